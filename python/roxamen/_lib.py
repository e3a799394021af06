"""Finding (or building) libroxamen.so and declaring its C API for ctypes.

Where the library comes from, in this order:
  1. ROXAMEN_LIB, a path to libroxamen.so;
  2. libroxamen.so at the root of the checkout this package sits in (the README's
     `CGO_ENABLED=1 go build -buildmode=c-shared -o libroxamen.so ./capi`), unless ROXAMEN_BUILD=1;
  3. a build into a cache directory ($ROXAMEN_CACHE, else $XDG_CACHE_HOME/roxamen, else
     ~/.cache/roxamen), keyed by a hash of the Go sources, made on first use when `go` is on PATH.
     The PEs of a job that start together take a file lock, so one of them builds and the others
     wait for it.
"""

import ctypes
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))


def _source_hash(repo):
    h = hashlib.sha256()
    for top, dirs, files in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("testdata", "python", "docs"))
        for f in sorted(files):
            if f.endswith((".go", ".c", ".h", ".s")) or f in ("go.mod", "go.sum"):
                p = os.path.join(top, f)
                h.update(os.path.relpath(p, repo).encode() + b"\0")
                with open(p, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()[:16]


def _cache_dir():
    d = os.environ.get("ROXAMEN_CACHE")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "roxamen")
    return d


def _build(repo):
    go = shutil.which("go")
    if not os.path.exists(os.path.join(repo, "go.mod")):
        go = None
    out = os.path.join(_cache_dir(), _source_hash(repo)) if go or os.path.exists(os.path.join(repo, "go.mod")) else None
    lib = out and os.path.join(out, "libroxamen.so")
    if lib and os.path.exists(lib):
        return lib
    if go is None:
        raise OSError(
            "roxamen: no libroxamen.so (set ROXAMEN_LIB, or build it at the checkout's root with "
            "`CGO_ENABLED=1 go build -buildmode=c-shared -o libroxamen.so ./capi`), and no Go "
            "toolchain and checkout to build it from")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another PE of the job may be building it
        if os.path.exists(lib):
            return lib
        tmp = tempfile.mkdtemp(dir=out)
        env = dict(os.environ, CGO_ENABLED="1")
        r = subprocess.run([go, "build", "-buildmode=c-shared", "-o", os.path.join(tmp, "libroxamen.so"), "./capi"],
                           cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise OSError("roxamen: building libroxamen.so failed:\n" + r.stdout)
        os.replace(os.path.join(tmp, "libroxamen.so"), lib)
        shutil.rmtree(tmp, ignore_errors=True)
    return lib


def find():
    """The path of the library this process will load."""
    p = os.environ.get("ROXAMEN_LIB")
    if p:
        if not os.path.exists(p):
            raise OSError("roxamen: ROXAMEN_LIB=%s does not exist" % p)
        return p
    p = os.path.join(_REPO, "libroxamen.so")
    if os.path.exists(p) and os.environ.get("ROXAMEN_BUILD") != "1":
        return p
    return _build(_REPO)


P, I, L, S, U64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_size_t, ctypes.c_uint64
PI = ctypes.POINTER(ctypes.c_int)
PU64 = ctypes.POINTER(ctypes.c_uint64)
PP = ctypes.POINTER(ctypes.c_void_p)

# name: (result, argument types), as include/roxamen.h declares them.
_PROTOS = {
    "roxamen_error_message": (ctypes.c_char_p, []),
    "roxamen_error_code": (I, []),
    "roxamen_init": (I, []),
    "roxamen_get_unique_id": (I, [ctypes.c_char_p, S]),
    "roxamen_init_with_unique_id": (I, [ctypes.c_char_p, I, I]),
    "roxamen_finalize": (I, []),
    "roxamen_my_pe": (I, []),
    "roxamen_n_pes": (I, []),
    "roxamen_on_gpu": (I, []),
    "roxamen_malloc": (P, [S]),
    "roxamen_calloc": (P, [S, S]),
    "roxamen_free": (I, [P]),
    "roxamen_ptr": (P, [P, I]),
    "roxamen_putmem": (I, [P, P, S, I]),
    "roxamen_putmem_nbi": (I, [P, P, S, I]),
    "roxamen_getmem": (I, [P, P, S, I]),
    "roxamen_getmem_nbi": (I, [P, P, S, I]),
    "roxamen_fence": (I, []),
    "roxamen_quiet": (I, []),
    "roxamen_atomic": (I, [I, I, P, P, P, P, I]),
    "roxamen_putmem_signal": (I, [P, P, S, P, U64, I, I]),
    "roxamen_putmem_signal_nbi": (I, [P, P, S, P, U64, I, I]),
    "roxamen_signal_wait_until": (I, [P, I, U64, PU64]),
    "roxamen_signal_fetch": (I, [P, PU64]),
    "roxamen_barrier_all": (I, []),
    "roxamen_sync_all": (I, []),
    "roxamen_team_my_pe": (I, [I]),
    "roxamen_team_n_pes": (I, [I]),
    "roxamen_team_translate_pe": (I, [I, I, I]),
    "roxamen_team_split_strided": (I, [I, I, I, I, PI]),
    "roxamen_team_split_2d": (I, [I, I, PI, PI]),
    "roxamen_team_sync": (I, [I]),
    "roxamen_team_destroy": (I, [I]),
    "roxamen_ctx_create": (I, [L, PI]),
    "roxamen_ctx_destroy": (I, [I]),
    "roxamen_ctx_putmem": (I, [I, P, P, S, I]),
    "roxamen_ctx_putmem_nbi": (I, [I, P, P, S, I]),
    "roxamen_ctx_getmem": (I, [I, P, P, S, I]),
    "roxamen_ctx_atomic": (I, [I, I, I, P, P, P, P, I]),
    "roxamen_ctx_fence": (I, [I]),
    "roxamen_ctx_quiet": (I, [I]),
    "roxamen_stream_create": (I, [PP]),
    "roxamen_stream_destroy": (I, [P]),
    "roxamen_stream_sync": (I, [P]),
    "roxamen_allreduce": (I, [I, I, I, P, P, S]),
    "roxamen_broadcast": (I, [I, I, P, P, S, I]),
    "roxamen_fcollect": (I, [I, I, P, P, S]),
    "roxamen_alltoall": (I, [I, I, P, P, S]),
    "roxamen_reduce_scatter": (I, [I, I, I, P, P, S]),
    "roxamen_allreduce_on_stream": (I, [P, I, I, I, P, P, S]),
    "roxamen_broadcast_on_stream": (I, [P, I, I, P, P, S, I]),
    "roxamen_allgather_on_stream": (I, [P, I, I, P, P, S]),
    "roxamen_alltoall_on_stream": (I, [P, I, I, P, P, S]),
    "roxamen_reduce_scatter_on_stream": (I, [P, I, I, I, P, P, S]),
    "roxamen_ep_create": (I, [I, I, I, I, I, I, PI]),
    "roxamen_ep_destroy": (I, [I]),
    "roxamen_ep_max_rows": (I, [I]),
    "roxamen_ep_local_experts": (I, [I]),
    "roxamen_ep_dispatch": (I, [I, P, I, P, P, P, I, PI, P, P, P, PI]),
    "roxamen_ep_combine": (I, [I, I, P, I, P]),
    "roxamen_ep_handle_free": (I, [I, I]),
    "roxamen_ep_dispatch_on_stream": (I, [I, P, P, I, P, P, PP, PP, PP, PP, PP, PP, PI]),
    "roxamen_ep_combine_on_stream": (I, [I, P, I, P, I, PP]),
    "roxamen_link_state": (I, [P, S]),
}

_lib = None


def lib():
    """The loaded library, its functions declared."""
    global _lib
    if _lib is None:
        l = ctypes.CDLL(find())
        for name, (res, args) in _PROTOS.items():
            f = getattr(l, name)
            f.restype, f.argtypes = res, args
        _lib = l
    return _lib
