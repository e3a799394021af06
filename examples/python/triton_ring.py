"""A Triton kernel that calls Roxamen's device library (kernels/obj/roxshmem-sm_90.bc.gz, linked
through extern_libs): each PE's kernel puts its block to the right neighbour with a signal,
waits for the left neighbour's signal, meets the others at a block barrier and sums every PE's
block with a block all-reduce. On a GPU World (PyTorch and Triton installed):

    PYTHONPATH=python roxrun -n 2 python3 examples/python/triton_ring.py

(two PEs: two GPUs, or one shared under MPS). Each PE prints "PE i: triton ring passed".
"""

import torch
import triton
import triton.language as tl

import roxamen as rx
import roxamen.triton as rxt

N = 1024


@triton.jit(do_not_specialize=["rnd"])  # one compiled module for every round: the one linked
def ring(data, recv, sig, total, rnd, N: tl.constexpr):
    me = rxt.my_pe()
    npes = rxt.n_pes()
    offs = tl.arange(0, N)
    tl.store(data + offs, (me * 1000 + offs).to(tl.float32) + rnd)
    tl.debug_barrier()  # the block's stores are in data before it is put
    rxt.putmem_signal_block(recv, data, N * 4, sig, 1, rxt.SIGNAL_ADD, (me + 1) % npes)
    rxt.signal_wait_until(sig, rxt.CMP_GE, rnd)
    rxt.barrier_block(rxt.TEAM_WORLD)
    rxt.float_sum_reduce_block(rxt.TEAM_WORLD, total, data, N)


def main():
    rx.init()
    me, n = rx.my_pe(), rx.n_pes()
    assert rx.on_gpu(), "a GPU World is needed (ROX_DEVICE)"
    data = rx.zeros(N, torch.float32)
    recv = rx.zeros(N, torch.float32)
    total = rx.zeros(N, torch.float32)
    sig = rx.zeros(1, torch.int64)  # a uint64 signal word (torch has no uint64 arithmetic)
    args = (data, recv, sig, total, 1)
    k = ring.warmup(*args, N=N, grid=(1,), extern_libs=rxt.extern_libs())
    rxt.link(k)  # fill the kernel module's roxshmem_state before its first launch
    for rnd in (1, 2):
        ring[(1,)](data, recv, sig, total, rnd, N=N, extern_libs=rxt.extern_libs())
        torch.cuda.synchronize()
        left = (me + n - 1) % n
        i = torch.arange(N, dtype=torch.float32)
        assert int(sig.item()) == rnd, "round %d: signal %d" % (rnd, sig.item())
        assert torch.equal(recv.cpu(), left * 1000 + i + rnd), "round %d: recv %s" % (rnd, recv[:4].tolist())
        want = sum(p * 1000 + i + rnd for p in range(n))
        assert torch.equal(total.cpu(), want), "round %d: total %s, want %s" % (rnd, total[:4].tolist(), want[:4].tolist())
        rx.barrier_all()
    print("PE %d: triton ring passed (module %#x, %d PEs)" % (me, k.module, n))
    for a in (sig, total, recv, data):
        rx.free(a)
    rx.finalize()


if __name__ == "__main__":
    main()
