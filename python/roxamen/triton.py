"""Roxamen's device library in Triton kernels, through extern_libs.

    import triton, triton.language as tl
    import roxamen as rx, roxamen.triton as rxt

    @triton.jit(do_not_specialize=["step"])  # one compiled module, the one linked, for every step
    def kernel(x, sig, step):
        me = rxt.my_pe()
        rxt.putmem_signal_block(x, x, 4096, sig, 1, rxt.SIGNAL_ADD, (me + 1) % rxt.n_pes())
        rxt.signal_wait_until(sig, rxt.CMP_GE, step)
        rxt.barrier_block(rxt.TEAM_WORLD)

    k = kernel.warmup(x, sig, 1, grid=(1,), extern_libs=rxt.extern_libs())  # compiled, not run
    rxt.link(k)                      # fill the module's roxshmem_state (before its first launch)
    kernel[(1,)](x, sig, 1, extern_libs=rxt.extern_libs())

The device library is kernels/obj/roxshmem-sm_90.bc.gz (go generate ./kernels), unpacked into the
package's cache; its entry points (kernels/src/bitcode.hip) take addresses as 64-bit integers,
which the wrappers here make of Triton's pointers. The *_block calls are collective over the
program's thread block: every thread of a Triton program runs a call on scalars, as they need.
The others are one thread's calls; here every thread makes them (a put of n bytes by each thread),
so use the block forms for data. Symmetric addresses come from roxamen.zeros/empty (torch tensors
on a GPU World).
"""

import gzip
import hashlib
import inspect
import os

import triton
import triton.language as tl
from triton.language import core

from . import _lib, init_module

# constexpr: the only globals a Triton kernel may read
SIGNAL_SET, SIGNAL_ADD = tl.constexpr(0), tl.constexpr(1)
CMP_EQ, CMP_NE, CMP_GT, CMP_LE, CMP_LT, CMP_GE = (tl.constexpr(c) for c in range(6))
TEAM_WORLD = tl.constexpr(0)


def bitcode(arch="sm_90"):
    """The path of the device library's bitcode for arch, unpacked on first use
    (ROXAMEN_BITCODE overrides it)."""
    p = os.environ.get("ROXAMEN_BITCODE")
    if p:
        return p
    gz = os.path.join(_lib._REPO, "kernels", "obj", "roxshmem-%s.bc.gz" % arch)
    with open(gz, "rb") as f:
        data = gzip.decompress(f.read())
    out = os.path.join(_lib._cache_dir(), "roxshmem-%s-%s.bc" % (arch, hashlib.sha256(data).hexdigest()[:16]))
    if not os.path.exists(out):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        tmp = "%s.%d" % (out, os.getpid())
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, out)
    return out


def extern_libs(arch="sm_90"):
    """The extern_libs argument of a launch or warmup of a kernel that calls this module."""
    return {"roxshmem": bitcode(arch)}


def link(compiled):
    """Link a compiled Triton kernel (kernel.warmup(...)'s result) to this PE: fill its module's
    roxshmem_state. Do it before the kernel's first launch."""
    compiled._init_handles()
    init_module(compiled.module)  # the CUmodule Triton loaded the kernel's cubin into


U64, I32, I64 = core.dtype("uint64"), core.dtype("int32"), core.dtype("int64")
_KW = "_semantic" if "_semantic" in inspect.signature(core.extern_elementwise).parameters else "_builder"


def _call(sym, args, types, ret, _semantic):
    # Triton 3.4 renamed the builder argument of builtins to _semantic
    kw = {_KW: _semantic}
    return core.extern_elementwise("roxshmem", "", args, {tuple(types): (sym, ret)}, is_pure=False, **kw)


@core.extern
def _team_my_pe(team, _semantic=None, _builder=None):
    return _call("roxshmem_bc_team_my_pe", [team], [I32], I32, _semantic or _builder)


@core.extern
def _team_n_pes(team, _semantic=None, _builder=None):
    return _call("roxshmem_bc_team_n_pes", [team], [I32], I32, _semantic or _builder)


@core.extern
def _putmem_block(dest, src, nbytes, pe, _semantic=None, _builder=None):
    return _call("roxshmem_bc_putmem_block", [dest, src, nbytes, pe], [U64, U64, U64, I32], I32, _semantic or _builder)


@core.extern
def _getmem_block(dest, src, nbytes, pe, _semantic=None, _builder=None):
    return _call("roxshmem_bc_getmem_block", [dest, src, nbytes, pe], [U64, U64, U64, I32], I32, _semantic or _builder)


@core.extern
def _putmem_signal_block(dest, src, nbytes, sig, value, op, pe, _semantic=None, _builder=None):
    return _call("roxshmem_bc_putmem_signal_block", [dest, src, nbytes, sig, value, op, pe],
                 [U64, U64, U64, U64, U64, I32, I32], I32, _semantic or _builder)


@core.extern
def _signal_wait_until(sig, cmp, value, _semantic=None, _builder=None):
    return _call("roxshmem_bc_signal_wait_until", [sig, cmp, value], [U64, I32, U64], U64, _semantic or _builder)


@core.extern
def _barrier_block(team, _semantic=None, _builder=None):
    return _call("roxshmem_bc_barrier_block", [team], [I32], I32, _semantic or _builder)


@core.extern
def _float_sum_reduce_block(team, dest, src, n, _semantic=None, _builder=None):
    return _call("roxshmem_bc_float_sum_reduce_block", [team, dest, src, n], [I32, U64, U64, U64], I32, _semantic or _builder)


@core.extern
def _int64_atomic_fetch_add(dest, value, pe, _semantic=None, _builder=None):
    return _call("roxshmem_bc_int64_atomic_fetch_add", [dest, value, pe], [U64, I64, I32], I64, _semantic or _builder)


@triton.jit
def my_pe():
    return _team_my_pe(tl.cast(0, tl.int32))


@triton.jit
def n_pes():
    return _team_n_pes(tl.cast(0, tl.int32))


@triton.jit
def putmem_block(dest, src, nbytes, pe):
    """The block puts nbytes from src (local) to symmetric dest on pe."""
    return _putmem_block(tl.cast(dest, tl.uint64), tl.cast(src, tl.uint64), tl.cast(nbytes, tl.uint64), tl.cast(pe, tl.int32))


@triton.jit
def getmem_block(dest, src, nbytes, pe):
    return _getmem_block(tl.cast(dest, tl.uint64), tl.cast(src, tl.uint64), tl.cast(nbytes, tl.uint64), tl.cast(pe, tl.int32))


@triton.jit
def putmem_signal_block(dest, src, nbytes, sig, value, op, pe):
    """putmem_block, then sig (a symmetric uint64) on pe set to or added value (op SIGNAL_SET or
    SIGNAL_ADD) once the data is there."""
    return _putmem_signal_block(tl.cast(dest, tl.uint64), tl.cast(src, tl.uint64), tl.cast(nbytes, tl.uint64),
                                tl.cast(sig, tl.uint64), tl.cast(value, tl.uint64), tl.cast(op, tl.int32),
                                tl.cast(pe, tl.int32))


@triton.jit
def signal_wait_until(sig, cmp, value):
    """Wait until this PE's signal word compares to value (CMP_*); returns it."""
    return _signal_wait_until(tl.cast(sig, tl.uint64), tl.cast(cmp, tl.int32), tl.cast(value, tl.uint64))


@triton.jit
def barrier_block(team):
    """The block's barrier over team (TEAM_WORLD: every PE): this PE's puts are complete and
    every member has arrived."""
    return _barrier_block(tl.cast(team, tl.int32))


@triton.jit
def float_sum_reduce_block(team, dest, src, n):
    """dest = the sum over team's PEs of src (n float32 each, symmetric); 0 on success."""
    return _float_sum_reduce_block(tl.cast(team, tl.int32), tl.cast(dest, tl.uint64), tl.cast(src, tl.uint64), tl.cast(n, tl.uint64))


@triton.jit
def int64_atomic_fetch_add(dest, value, pe):
    return _int64_atomic_fetch_add(tl.cast(dest, tl.uint64), tl.cast(value, tl.int64), tl.cast(pe, tl.int32))
