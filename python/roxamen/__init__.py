"""Roxamen from Python: pure Python over libroxamen.so (ctypes), no compiled extension.

    import numpy as np, roxamen as rx
    rx.init()                                   # under roxrun, mpirun, srun or torchrun
    x = rx.zeros(4, np.float64)                 # symmetric: the same array on every PE
    x[:] = rx.my_pe()
    rx.allreduce(x, x, "sum")                   # collectives on symmetric arrays
    rx.put(x, np.ones(4), (rx.my_pe() + 1) % rx.n_pes())
    rx.finalize()

Symmetric arrays are numpy arrays over the symmetric heap on the host backend (torch tensors over
device memory on a GPU World); any view of one (x[2:], x.reshape(...)) names the same symmetric
object from that element on. Local sources and destinations are any numpy-compatible arrays.
Every failure raises RoxamenError carrying the runtime's message (call, PE, value); blocking calls
are bounded by ROX_TIMEOUT and fail at once when a PE they need has died.
"""

import ctypes

import numpy as np

from . import _lib

__all__ = [
    "RoxamenError", "init", "init_torch", "finalize", "my_pe", "n_pes", "get_unique_id",
    "zeros", "empty", "free", "ptr", "put", "get", "put_nbi", "get_nbi", "quiet", "fence",
    "atomic", "fetch", "set", "swap", "compare_swap", "fetch_add", "add", "fetch_inc", "inc",
    "fetch_and", "fetch_or", "fetch_xor", "put_signal", "signal_wait_until", "signal_fetch",
    "barrier_all", "sync_all", "Team", "TEAM_WORLD", "TEAM_SHARED", "Ctx", "Stream", "stream_sync",
    "link_state", "init_module",
    "allreduce", "broadcast", "fcollect", "allgather", "alltoall", "reduce_scatter",
]

ERRORS = ["SUCCESS", "OTHER", "NOT_INITIALIZED", "FINALIZED", "PE_RANGE", "BOUNDS", "NOT_SYMMETRIC",
          "MISALIGNED", "BAD_ARGUMENT", "MISMATCH", "PE_FAILED", "TIMEOUT", "OUT_OF_MEMORY", "FREED",
          "CONCURRENT", "INITIALIZED", "TEAM_DESTROYED", "NOT_IN_TEAM", "NOT_SUPPORTED",
          "EXPERT_RANGE", "TOO_MANY_TOKENS", "SHAPE"]


class RoxamenError(RuntimeError):
    """A failed call: .code is the ROXAMEN_ERR_* number, .kind its name ("PE_RANGE"...), and the
    message the runtime's text."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.kind = ERRORS[code] if 0 <= code < len(ERRORS) else str(code)


def _check(rc):
    if rc != 0:
        raise RoxamenError(rc, _lib.lib().roxamen_error_message().decode(errors="replace"))


def _call(name, *args):
    _check(getattr(_lib.lib(), name)(*args))


def _sync_torch(*arrays):
    """Wait for torch's current stream when an operand is a CUDA tensor: the runtime reads and
    writes device memory from its own streams, so what torch queued on them must be done first.
    Every call returns with its own work complete (or enqueued on a Roxamen stream, completed by
    Stream.sync)."""
    for a in arrays:
        if _is_torch(a) and a.is_cuda:
            import torch
            torch.cuda.current_stream(a.device).synchronize()
            return


# ---- element types ----

_DTYPES = {np.dtype(np.uint8): 0, np.dtype(np.int8): 1, np.dtype(np.int16): 2, np.dtype(np.uint16): 3,
           np.dtype(np.int32): 4, np.dtype(np.uint32): 5, np.dtype(np.int64): 6, np.dtype(np.uint64): 7,
           np.dtype(np.float32): 8, np.dtype(np.float64): 9, np.dtype(np.float16): 11}
_TORCH_DTYPES = {"torch.uint8": 0, "torch.int8": 1, "torch.int16": 2, "torch.int32": 4, "torch.int64": 6,
                 "torch.float32": 8, "torch.float64": 9, "torch.bfloat16": 10, "torch.float16": 11}
_OPS = {"sum": 1, "prod": 2, "min": 3, "max": 4, "and": 5, "or": 6, "xor": 7}
_CMPS = {"eq": 0, "==": 0, "ne": 1, "!=": 1, "gt": 2, ">": 2, "ge": 3, ">=": 3, "lt": 4, "<": 4, "le": 5, "<=": 5}
_SIGOPS = {"set": 0, "add": 1}


def _is_torch(a):
    return type(a).__module__.startswith("torch")


def _addr(a):
    """The address of a's first element (a numpy array or a torch tensor)."""
    if _is_torch(a):
        return a.data_ptr()
    return a.__array_interface__["data"][0]


def _nbytes(a):
    if _is_torch(a):
        return a.numel() * a.element_size()
    return a.nbytes


def _np_dtype(a):
    """a's element type as numpy's (torch's names match numpy's but for bfloat16)."""
    if _is_torch(a):
        name = str(a.dtype).replace("torch.", "")
        return np.dtype(np.uint16 if name == "bfloat16" else name)
    return np.dtype(a.dtype)


def _dtype_code(a):
    if _is_torch(a):
        code = _TORCH_DTYPES.get(str(a.dtype))
    else:
        code = _DTYPES.get(np.dtype(a.dtype))
    if code is None:
        raise TypeError("roxamen: element type %s has no Roxamen equivalent" % (a.dtype,))
    return code


def _contig(a, what):
    if _is_torch(a):
        ok = a.is_contiguous()
    else:
        ok = a.flags["C_CONTIGUOUS"]
    if not ok:
        raise ValueError("roxamen: %s must be contiguous" % what)
    return a


def _local(a, dtype=None):
    """a as a contiguous host numpy array (the local side of RMA)."""
    if _is_torch(a):
        import torch
        a = a.detach()
        a = (a.view(torch.int16).cpu().numpy().view(np.uint16) if a.dtype == torch.bfloat16 else a.cpu().numpy())
    return np.ascontiguousarray(a, dtype=dtype)


def _op(op):
    if isinstance(op, int):
        return op
    try:
        return _OPS[op.lower()]
    except (KeyError, AttributeError):
        raise ValueError("roxamen: reduction %r, want one of %s" % (op, ", ".join(_OPS))) from None


# ---- setup ----

def init():
    """Join the job the launcher started (roxrun, mpirun/PMIx, srun, torchrun; a lone process is a
    1-PE job)."""
    _call("roxamen_init")


def get_unique_id():
    """A rendezvous for init(unique_id=...): TOKEN@HOST:PORT, drawn on this host."""
    buf = ctypes.create_string_buffer(128)
    _call("roxamen_get_unique_id", buf, len(buf))
    return buf.value.decode()


def init_with_unique_id(unique_id, rank, size):
    """Join a job of size PEs as PE rank, meeting at unique_id (from get_unique_id on one PE)."""
    _call("roxamen_init_with_unique_id", unique_id.encode(), rank, size)


def init_torch(group=None):
    """Join a job made of the processes of a torch.distributed process group: rank 0 draws the
    unique id and the group broadcasts it (any backend that carries objects: gloo, nccl)."""
    import torch.distributed as dist
    ids = [get_unique_id() if dist.get_rank(group) == 0 else None]
    dist.broadcast_object_list(ids, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
    init_with_unique_id(ids[0], dist.get_rank(group), dist.get_world_size(group))


def finalize():
    _live.clear()
    _call("roxamen_finalize")


def my_pe():
    return _lib.lib().roxamen_my_pe()


def n_pes():
    return _lib.lib().roxamen_n_pes()


def on_gpu():
    """Whether symmetric memory is device memory (a GPU World)."""
    return _lib.lib().roxamen_on_gpu() == 1


# ---- symmetric memory ----

_live = {}  # base address -> the array made there (free() takes it back)


class _CudaMem:
    """A device allocation described by __cuda_array_interface__ (for torch.as_tensor)."""

    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr, "version": 3}


def _alloc(shape, dtype, zero):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    n = int(np.prod(shape, dtype=np.int64))
    size, typestr = _layout(dtype)
    l = _lib.lib()
    p = l.roxamen_calloc(n, size) if zero else l.roxamen_malloc(n * size)
    if not p:
        if n == 0:
            return np.zeros(shape, dtype) if not _is_torch_dtype(dtype) else None
        _check(l.roxamen_error_code())
    if on_gpu():
        import torch
        tdt = dtype if _is_torch_dtype(dtype) else getattr(torch, np.dtype(dtype).name)
        t = torch.as_tensor(_CudaMem(p, shape, typestr), device="cuda")
        if t.dtype != tdt:  # bfloat16: described as raw 2-byte words, then viewed
            t = t.view(tdt)
        _live[p] = t
        return t
    if _is_torch_dtype(dtype):
        import torch
        raw = (ctypes.c_uint8 * (n * size)).from_address(p)
        t = torch.frombuffer(raw, dtype=dtype).view(shape)
        _live[p] = t
        return t
    raw = (ctypes.c_uint8 * (n * size)).from_address(p)
    a = np.frombuffer(raw, dtype=dtype).reshape(shape)
    _live[p] = a
    return a


def _layout(dtype):
    """(element size, __cuda_array_interface__ typestr) of a numpy or torch dtype; bfloat16,
    which the interface cannot name, is described as 2-byte integers."""
    if _is_torch_dtype(dtype):
        name = str(dtype).replace("torch.", "")
        dtype = np.int16 if name == "bfloat16" else np.dtype(name)
    dt = np.dtype(dtype)
    return dt.itemsize, dt.str


def _is_torch_dtype(dtype):
    return type(dtype).__module__.startswith("torch")


def zeros(shape, dtype=np.float64):
    """A zeroed symmetric array (collective: every PE makes the same call)."""
    return _alloc(shape, dtype, True)


def empty(shape, dtype=np.float64):
    """An uninitialized symmetric array (collective)."""
    return _alloc(shape, dtype, False)


def free(a):
    """Release a symmetric array from zeros/empty (collective). Using it afterwards is an error
    of the runtime's, never a fault, for every call that goes through the library; plain loads
    and stores through the numpy array itself are the program's to avoid."""
    p = _addr(a)
    _call("roxamen_free", p)
    _live.pop(p, None)


def ptr(a, pe):
    """pe's copy of symmetric array a as a numpy array for direct loads and stores, or None when
    pe's heap is not mapped here."""
    p = _lib.lib().roxamen_ptr(_addr(a), pe)
    if not p or _is_torch(a):
        return None
    raw = (ctypes.c_uint8 * _nbytes(a)).from_address(p)
    return np.frombuffer(raw, dtype=a.dtype).reshape(a.shape)


# ---- RMA ----

def _fits(s, dest, call):
    if s.nbytes > _nbytes(dest):
        raise ValueError("roxamen: %s on PE %d: %d bytes into a %d-byte array" % (call, my_pe(), s.nbytes, _nbytes(dest)))
    return s


def put(dest, src, pe):
    """Copy the local array src into symmetric dest on pe (dest's type; as many bytes as src).
    On a GPU World dest is a device tensor and src host memory (a device tensor is copied to the
    host first); make the work on torch's stream that wrote dest complete first."""
    _sync_torch(dest, src)
    s = _fits(_local(src, _np_dtype(dest)), dest, "put")
    _call("roxamen_putmem", _addr(_contig(dest, "dest")), s.ctypes.data, s.nbytes, pe)


_pending = []  # the local sources of non-blocking puts, kept alive until quiet


def put_nbi(dest, src, pe):
    """put, completed by quiet() (the package keeps its copy of src until then)."""
    _sync_torch(dest, src)
    s = _fits(_local(src, _np_dtype(dest)), dest, "put_nbi")
    _pending.append(s)
    _call("roxamen_putmem_nbi", _addr(_contig(dest, "dest")), s.ctypes.data, s.nbytes, pe)


def get(src, pe, out=None):
    """Return pe's copy of symmetric src (into out when given)."""
    if out is None and _is_torch(src):
        import torch
        out = torch.empty(tuple(src.shape), dtype=src.dtype)
    elif out is None:
        out = np.empty(src.shape, dtype=src.dtype)
    _contig(out, "out")
    _sync_torch(src, out)
    if _nbytes(out) > _nbytes(src):
        raise ValueError("roxamen: get on PE %d: %d bytes from a %d-byte array" % (my_pe(), _nbytes(out), _nbytes(src)))
    _call("roxamen_getmem", _addr(out), _addr(_contig(src, "src")), _nbytes(out), pe)
    return out


def get_nbi(out, src, pe):
    """Fetch pe's copy of src into out, completed by quiet()."""
    _contig(out, "out")
    _call("roxamen_getmem_nbi", _addr(out), _addr(_contig(src, "src")), _nbytes(out), pe)


def quiet():
    _call("roxamen_quiet")
    del _pending[:]


def fence():
    _call("roxamen_fence")


# ---- atomics ----

_AMO = {"fetch": 0, "set": 1, "swap": 2, "compare_swap": 3, "fetch_add": 4, "add": 5, "fetch_inc": 6, "inc": 7,
        "fetch_and": 8, "and": 9, "fetch_or": 10, "or": 11, "fetch_xor": 12, "xor": 13}
_FETCHING = {"fetch", "swap", "compare_swap", "fetch_add", "fetch_inc", "fetch_and", "fetch_or", "fetch_xor"}


def _amo(ctx, op, a, index, pe, value=None, cond=None):
    _sync_torch(a)
    dt = _np_dtype(a)
    code = _dtype_code(a)
    if not 0 <= index < _count(a):
        raise IndexError("roxamen: %s on PE %d: index %d of a %d-element array" % (op, my_pe(), index, _count(a)))
    addr = _addr(a) + index * dt.itemsize
    v = np.array([0 if value is None else value], dtype=dt)
    c = np.array([0 if cond is None else cond], dtype=dt)
    f = np.zeros(1, dtype=dt)
    args = (_AMO[op], code, addr, v.ctypes.data if value is not None else None,
            c.ctypes.data if cond is not None else None, f.ctypes.data if op in _FETCHING else None, pe)
    if ctx is None:
        _call("roxamen_atomic", *args)
    else:
        _call("roxamen_ctx_atomic", ctx, *args)
    return f[0].item() if op in _FETCHING else None


def atomic(op, a, index, pe, value=None, cond=None):
    """The atomic op ("fetch_add", "compare_swap"...) on element index of symmetric a on pe;
    returns the old value for the fetching forms."""
    return _amo(None, op, a, index, pe, value, cond)


def fetch(a, index, pe): return _amo(None, "fetch", a, index, pe)
def set(a, index, value, pe): return _amo(None, "set", a, index, pe, value)  # noqa: A001 (OpenSHMEM's name)
def swap(a, index, value, pe): return _amo(None, "swap", a, index, pe, value)
def compare_swap(a, index, cond, value, pe): return _amo(None, "compare_swap", a, index, pe, value, cond)
def fetch_add(a, index, value, pe): return _amo(None, "fetch_add", a, index, pe, value)
def add(a, index, value, pe): return _amo(None, "add", a, index, pe, value)
def fetch_inc(a, index, pe): return _amo(None, "fetch_inc", a, index, pe)
def inc(a, index, pe): return _amo(None, "inc", a, index, pe)
def fetch_and(a, index, value, pe): return _amo(None, "fetch_and", a, index, pe, value)
def fetch_or(a, index, value, pe): return _amo(None, "fetch_or", a, index, pe, value)
def fetch_xor(a, index, value, pe): return _amo(None, "fetch_xor", a, index, pe, value)


# ---- signals and synchronization ----

def _sig_addr(sig, index):
    if _np_dtype(sig) != np.uint64:
        raise TypeError("roxamen: a signal is a symmetric uint64 array, not %s" % (sig.dtype,))
    if not 0 <= index < _count(sig):
        raise IndexError("roxamen: PE %d: signal index %d of a %d-element array" % (my_pe(), index, _count(sig)))
    return _addr(sig) + 8 * index


def put_signal(dest, src, sig, value, pe, op="set", sig_index=0, nbi=False):
    """Put src into symmetric dest on pe, then update sig[sig_index] there with value ("set" or
    "add"); the signal is seen only after the data."""
    _sync_torch(dest, src)
    s = _fits(_local(src, _np_dtype(dest)), dest, "put_signal")
    name = "roxamen_putmem_signal_nbi" if nbi else "roxamen_putmem_signal"
    if nbi:
        _pending.append(s)
    _call(name, _addr(_contig(dest, "dest")), s.ctypes.data, s.nbytes, _sig_addr(sig, sig_index), value,
          _SIGOPS[op], pe)


def signal_wait_until(sig, cmp, value, sig_index=0):
    """Wait until this PE's sig[sig_index] compares to value (cmp: "eq", ">="...); return it."""
    got = ctypes.c_uint64()
    _call("roxamen_signal_wait_until", _sig_addr(sig, sig_index), _CMPS[cmp], value, ctypes.byref(got))
    return got.value


def signal_fetch(sig, sig_index=0):
    got = ctypes.c_uint64()
    _call("roxamen_signal_fetch", _sig_addr(sig, sig_index), ctypes.byref(got))
    return got.value


def barrier_all():
    _call("roxamen_barrier_all")


def sync_all():
    _call("roxamen_sync_all")


# ---- teams ----

class Team:
    """A team handle. Team(0) is the world, Team(1) the PEs of this node."""

    def __init__(self, handle):
        self.handle = handle

    def __repr__(self):
        return "Team(%d)" % self.handle

    def __eq__(self, other):
        return isinstance(other, Team) and other.handle == self.handle

    def __hash__(self):
        return hash(self.handle)

    def my_pe(self):
        return _lib.lib().roxamen_team_my_pe(self.handle)

    def n_pes(self):
        return _lib.lib().roxamen_team_n_pes(self.handle)

    def translate_pe(self, pe, other):
        """pe's number in other, or -1."""
        return _lib.lib().roxamen_team_translate_pe(self.handle, pe, other.handle)

    def split_strided(self, start, stride, size):
        """The team of PEs start, start+stride, ... (collective over this team); None on a PE
        left out."""
        h = ctypes.c_int()
        _call("roxamen_team_split_strided", self.handle, start, stride, size, ctypes.byref(h))
        return Team(h.value) if h.value >= 0 else None

    def split_2d(self, xrange):
        """(row team, column team) of a grid xrange PEs wide (collective)."""
        x, y = ctypes.c_int(), ctypes.c_int()
        _call("roxamen_team_split_2d", self.handle, xrange, ctypes.byref(x), ctypes.byref(y))
        return Team(x.value), Team(y.value)

    def sync(self):
        _call("roxamen_team_sync", self.handle)

    def destroy(self):
        _call("roxamen_team_destroy", self.handle)


TEAM_WORLD = Team(0)
TEAM_SHARED = Team(1)


# ---- contexts ----

class Ctx:
    """A communication context (options: "serialized", "private", "nostore"); a context manager
    that destroys it."""

    _OPTS = {"serialized": 1, "private": 2, "nostore": 4}

    def __init__(self, *options):
        bits = 0
        for o in options:
            bits |= self._OPTS[o]
        h = ctypes.c_int()
        _call("roxamen_ctx_create", bits, ctypes.byref(h))
        self.handle = h.value

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def put(self, dest, src, pe, nbi=False):
        s = _fits(_local(src, _np_dtype(dest)), dest, "Ctx.put")
        name = "roxamen_ctx_putmem_nbi" if nbi else "roxamen_ctx_putmem"
        if nbi:
            self._keep = s  # alive until quiet
        _call(name, self.handle, _addr(_contig(dest, "dest")), s.ctypes.data, s.nbytes, pe)

    def get(self, src, pe, out=None):
        if out is None:
            out = np.empty(tuple(src.shape), dtype=_np_dtype(src))
        _call("roxamen_ctx_getmem", self.handle, _addr(out), _addr(_contig(src, "src")), _nbytes(out), pe)
        return out

    def atomic(self, op, a, index, pe, value=None, cond=None):
        return _amo(self.handle, op, a, index, pe, value, cond)

    def fence(self):
        _call("roxamen_ctx_fence", self.handle)

    def quiet(self):
        _call("roxamen_ctx_quiet", self.handle)

    def destroy(self):
        """Release the context; later calls on it fail with the library's error."""
        _call("roxamen_ctx_destroy", self.handle)


# ---- collectives ----

class Stream:
    """A stream of the library's for stream-ordered collectives (errors come at sync()). On a GPU
    World it is a CUDA stream (torch.cuda.ExternalStream(st.handle) names it to torch); there the
    collectives also take torch's streams, and run on torch's current stream by default."""

    def __init__(self):
        h = ctypes.c_void_p()
        _call("roxamen_stream_create", ctypes.byref(h))
        self.handle = h.value or 0

    def sync(self):
        _call("roxamen_stream_sync", self.handle)

    def destroy(self):
        _call("roxamen_stream_destroy", self.handle)


def _stream_handle(stream, *arrays):
    """The vendor handle of the stream a call goes on, or None for the blocking call: stream's
    (a roxamen.Stream, after torch's current stream is waited for; a torch.cuda.Stream or a raw
    cudaStream_t as an int, ordered by the program), else torch's current stream when an operand
    is a CUDA tensor (so that the call is ordered with torch's work)."""
    if stream is not None:
        if isinstance(stream, Stream):
            _sync_torch(*arrays)  # the library's stream is not ordered with torch's
            return stream.handle
        h = getattr(stream, "cuda_stream", stream)
        if not isinstance(h, int):
            raise TypeError("roxamen: stream %r is not a roxamen.Stream, a torch.cuda.Stream or a handle" % (stream,))
        return h
    for a in arrays:
        if _is_torch(a) and a.is_cuda:
            import torch
            return torch.cuda.current_stream(a.device).cuda_stream
    return None


def stream_sync(stream=None):
    """Wait for a stream's work through the library, which reports device-side failures (a PE
    that died, a bad argument a kernel found) as RoxamenError: stream as in the collectives,
    torch's current stream when None."""
    if stream is None:
        import torch
        stream = torch.cuda.current_stream()
    _call("roxamen_stream_sync", _stream_handle(stream))


def _coll(name, stream, team, *args):
    if stream is not None:
        _call(name + "_on_stream", stream, team.handle, *args)
    else:
        _call(name, team.handle, *args)


def _count(a):
    return a.numel() if _is_torch(a) else a.size


def _same_type(dst, src):
    if str(dst.dtype) != str(src.dtype):
        raise TypeError("roxamen: dst is %s, src %s" % (dst.dtype, src.dtype))
    return _dtype_code(dst)


def allreduce(dst, src, op="sum", team=TEAM_WORLD, stream=None):
    """dst = op over the team of every PE's src (symmetric arrays of the same size; may be one).
    The collectives on CUDA tensors are enqueued on stream, else on torch's current stream, and
    return at once (as torch.distributed's NCCL calls): torch's later work on that stream sees
    the result, and stream_sync() reports failures."""
    dt = _same_type(dst, src)
    if _count(dst) != _count(src):
        raise ValueError("roxamen: allreduce of %d elements into %d" % (_count(src), _count(dst)))
    _coll("roxamen_allreduce", _stream_handle(stream, dst, src), team, dt, _op(op), _addr(dst), _addr(src), _count(src))


def broadcast(dst, src, root, team=TEAM_WORLD, stream=None):
    """dst = root's src on every PE of the team."""
    dt = _same_type(dst, src)
    _coll("roxamen_broadcast", _stream_handle(stream, dst, src), team, dt, _addr(dst), _addr(src), _count(src), root)


def fcollect(dst, src, team=TEAM_WORLD, stream=None):
    """All-gather: dst (n_pes times src's size) = every team PE's src in PE order."""
    dt = _same_type(dst, src)
    st = _stream_handle(stream, dst, src)
    name = "roxamen_allgather" if st is not None else "roxamen_fcollect"
    _coll(name, st, team, dt, _addr(dst), _addr(src), _count(src))


allgather = fcollect


def alltoall(dst, src, team=TEAM_WORLD, stream=None):
    """Block j of src (size/n_pes elements) goes to team PE j, landing as block i of its dst."""
    dt = _same_type(dst, src)
    n = team.n_pes()
    if _count(src) % n:
        raise ValueError("roxamen: alltoall of %d elements over %d PEs" % (_count(src), n))
    _coll("roxamen_alltoall", _stream_handle(stream, dst, src), team, dt, _addr(dst), _addr(src), _count(src) // n)


def reduce_scatter(dst, src, op="sum", team=TEAM_WORLD, stream=None):
    """Team PE i gets, in dst, op over every PE's block i of src (n_pes blocks of dst's size)."""
    dt = _same_type(dst, src)
    _coll("roxamen_reduce_scatter", _stream_handle(stream, dst, src), team, dt, _op(op), _addr(dst), _addr(src), _count(dst))


# ---- the program's own device code ----

def link_state(address, size):
    """Fill the roxshmem_state of size bytes at device address address (a code object's global
    from kernels/include/roxamen/roxshmem.h) with this PE's state."""
    _call("roxamen_link_state", address, size)


def init_module(module):
    """Link a code object the program loaded with the CUDA driver API (a CUmodule as an int, e.g.
    a Triton kernel's .module) to this PE: its roxshmem_state is found with cuModuleGetGlobal and
    filled, as nvshmemx_cumodule_init does."""
    cuda = ctypes.CDLL("libcuda.so.1")
    f = cuda.cuModuleGetGlobal_v2
    f.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p, ctypes.c_char_p]
    p, n = ctypes.c_uint64(), ctypes.c_size_t()
    if f(ctypes.byref(p), ctypes.byref(n), module, b"roxshmem_state") != 0:
        p, n = ctypes.c_uint64(0), ctypes.c_size_t(0)  # the library's error names what is missing
    link_state(p.value, n.value)


from . import ep  # noqa: E402,F401  (roxamen.ep.Buffer)
