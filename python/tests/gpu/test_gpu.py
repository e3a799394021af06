"""The package on a GPU World: symmetric arrays are torch tensors in device memory (no copy),
RMA and collectives on them, and an expert-parallel layer (dispatch, a torch expert MLP on the
GPU, combine) against a torch reference. Needs torch with CUDA; elsewhere every test skips."""

import ctypes
import threading

import numpy as np
import pytest

import roxamen as rx

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)


def pes():
    me, n = rx.my_pe(), rx.n_pes()
    return me, n, (me + 1) % n, (me - 1) % n


def test_world_is_on_the_gpu():
    assert rx.on_gpu()
    x = rx.zeros(4, torch.float32)
    assert isinstance(x, torch.Tensor) and x.is_cuda and (x == 0).all()
    y = rx.zeros((2, 3), np.int64)
    assert y.is_cuda and y.dtype == torch.int64 and y.shape == (2, 3)
    assert rx.ptr(x, 0) is None  # device memory has no host mapping to give
    rx.barrier_all()
    rx.free(y)
    rx.free(x)


def test_put_get_tensors():
    me, n, right, left = pes()
    x = rx.zeros(8, torch.float32)
    rx.barrier_all()
    rx.put(x, torch.arange(8, dtype=torch.float32, device="cuda") + 10 * me, right)
    rx.barrier_all()
    assert torch.equal(x.cpu(), torch.arange(8, dtype=torch.float32) + 10 * left)
    got = rx.get(x[2:], right)
    assert torch.equal(got, torch.arange(2, 8, dtype=torch.float32) + 10 * me)
    with pytest.raises(rx.RoxamenError) as e:
        rx.put(x, torch.ones(8), n)
    assert e.value.kind == "PE_RANGE" and "target PE %d" % n in str(e.value)
    c = rx.zeros(2, torch.int64)
    rx.barrier_all()
    rx.fetch_add(c, 0, me + 1, 0)
    rx.barrier_all()
    if me == 0:
        assert c[0].item() == n * (n + 1) // 2
    sig = rx.zeros(1, np.uint64)
    rx.barrier_all()
    rx.put_signal(x[:2], torch.tensor([1.5, 2.5]), sig, 1, right)
    rx.signal_wait_until(sig, "eq", 1)
    assert x[:2].tolist() == [1.5, 2.5]
    rx.barrier_all()
    for a in (sig, c, x):
        rx.free(a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_collectives_on_tensors(dtype):
    me, n, _, _ = pes()
    src = rx.zeros(6 * n, dtype)
    dst = rx.zeros(6 * n, dtype)
    src.copy_(torch.arange(6 * n, device="cuda").to(dtype) + me)
    torch.cuda.synchronize()  # the copy ran on torch's stream; the collective reads src from another
    rx.allreduce(dst, src, "sum")
    want = (n * torch.arange(6 * n) + n * (n - 1) // 2).to(dtype)
    assert torch.equal(dst.cpu(), want)
    rx.fcollect(dst, src[:6])
    assert torch.equal(dst.view(n, 6).cpu(), (torch.arange(6)[None, :] + torch.arange(n)[:, None]).to(dtype))
    rx.alltoall(dst, src)
    for j in range(n):
        assert torch.equal(dst[6 * j:6 * j + 6].cpu(), (torch.arange(6 * me, 6 * me + 6) + j).to(dtype))
    st = rx.Stream()
    rx.allreduce(dst, src, "max", stream=st)
    rx.broadcast(src, src, 1, stream=st)
    st.sync()
    st.destroy()
    assert torch.equal(dst.cpu(), (torch.arange(6 * n) + n - 1).to(dtype))
    assert torch.equal(src.cpu(), (torch.arange(6 * n) + 1).to(dtype))
    rx.barrier_all()
    rx.free(dst)
    rx.free(src)


def expert_mlp(e, hidden):
    """Expert e's MLP, the same on every PE (weights seeded by e)."""
    g = torch.Generator().manual_seed(1000 + e)
    w1 = (torch.randn(hidden, 2 * hidden, generator=g) / hidden ** 0.5).cuda()
    w2 = (torch.randn(2 * hidden, hidden, generator=g) / hidden ** 0.5).cuda()
    return lambda x: torch.nn.functional.gelu(x @ w1) @ w2


@pytest.mark.parametrize("low_latency", [False, True])
def test_expert_parallel_layer(low_latency):
    me, n, _, _ = pes()
    hidden, experts, topk, ntok = 64, 4 * n, 2, 16
    buf = rx.ep.Buffer(hidden=hidden, num_experts=experts, num_topk=topk, max_tokens=ntok, low_latency=low_latency)
    g = torch.Generator().manual_seed(me)
    x = torch.randn(ntok, hidden, generator=g).cuda()
    logits = torch.randn(ntok, experts, generator=g).cuda()
    wts, idx = torch.softmax(logits, -1).topk(topk, -1)
    recv_x, counts, h = buf.dispatch(x, idx, wts)
    assert len(counts) == experts // n and sum(counts) == recv_x.shape[0]
    y = torch.from_numpy(recv_x).cuda()
    row = 0
    for le, c in enumerate(counts):  # this PE's experts, each on its rows
        if c:
            y[row:row + c] = expert_mlp(me * (experts // n) + le, hidden)(y[row:row + c])
        row += c
    out = torch.from_numpy(buf.combine(y, h)).cuda()
    mlps = [expert_mlp(e, hidden) for e in range(experts)]
    ref = torch.stack([sum(wts[t, k] * mlps[idx[t, k].item()](x[t:t + 1])[0] for k in range(topk)) for t in range(ntok)])
    assert torch.allclose(out, ref, rtol=1e-4, atol=1e-5), (out - ref).abs().max()
    h.free()
    rx.barrier_all()
    buf.destroy()


@pytest.mark.parametrize("low_latency,torch_stream", [(False, False), (True, False), (False, True)])
def test_expert_parallel_layer_on_stream(low_latency, torch_stream):
    me, n, _, _ = pes()
    hidden, experts, topk, ntok = 64, 4 * n, 2, 16
    buf = rx.ep.Buffer(hidden=hidden, num_experts=experts, num_topk=topk, max_tokens=ntok, low_latency=low_latency)
    g = torch.Generator().manual_seed(10 + me)
    x = torch.randn(ntok, hidden, generator=g).cuda()
    wts, idx = torch.softmax(torch.randn(ntok, experts, generator=g).cuda(), -1).topk(topk, -1)
    # a roxamen.Stream, or a torch stream made current (the calls then take it by default)
    st = torch.cuda.Stream() if torch_stream else rx.Stream()
    if torch_stream:
        st.wait_stream(torch.cuda.current_stream())
    ctx = torch.cuda.stream(st) if torch_stream else torch.cuda.stream(torch.cuda.current_stream())
    with ctx:
        recv_x, rows, counts, h = buf.dispatch_on_stream(x, idx.contiguous(), wts.contiguous(), None if torch_stream else st)
    rx.stream_sync(st)
    counts = counts.tolist()
    assert rows.item() == sum(counts)
    y = torch.zeros(buf.max_rows, hidden, device="cuda")
    row = 0
    for le, c in enumerate(counts):
        if c:
            y[row:row + c] = expert_mlp(me * (experts // n) + le, hidden)(recv_x[row:row + c])
        row += c
    if torch_stream:
        st.wait_stream(torch.cuda.current_stream())
    with ctx:
        out = buf.combine_on_stream(y, h, None if torch_stream else st)
    rx.stream_sync(st)
    mlps = [expert_mlp(e, hidden) for e in range(experts)]
    ref = torch.stack([sum(wts[t, k] * mlps[idx[t, k].item()](x[t:t + 1])[0] for k in range(topk)) for t in range(ntok)])
    assert torch.allclose(out, ref, rtol=1e-4, atol=1e-5), (out - ref).abs().max()
    bad = idx.clone()
    bad[3, 1] = experts + 2
    if torch_stream:
        st.wait_stream(torch.cuda.current_stream())
    with ctx:
        buf.dispatch_on_stream(x, bad, wts.contiguous(), None if torch_stream else st)
    with pytest.raises(rx.RoxamenError) as e:
        rx.stream_sync(st)  # the device saw the index: the error comes at the sync, naming PE and value
    assert e.value.kind == "EXPERT_RANGE" and str(experts + 2) in str(e.value)
    if not torch_stream:
        st.destroy()
    rx.barrier_all()
    buf.destroy()


def _gate(stream):
    """Hold stream's later work until the host writes 1 to the returned pinned word (the device
    polls it: cuStreamWaitValue32). None where the driver has no stream memory operations."""
    cuda = ctypes.CDLL("libcuda.so.1")
    flag = torch.zeros(1, dtype=torch.int32, pin_memory=True)
    dev = ctypes.c_uint64()
    if cuda.cuMemHostGetDevicePointer_v2(ctypes.byref(dev), ctypes.c_void_p(flag.data_ptr()), 0) != 0:
        return None
    wait = cuda.cuStreamWaitValue32_v2
    wait.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    if wait(stream.cuda_stream, dev.value, 1, 0) != 0:  # 0: CU_STREAM_WAIT_VALUE_GEQ
        return None
    return flag


def test_collectives_run_on_the_current_torch_stream():
    # On a non-default torch stream held by a gate: the collective returns while the stream is
    # still held (it is enqueued there, not run at once), and runs in the stream's order: after
    # the fill before it, before the multiply after it. A call that waited for torch's stream
    # would wait for the gate, which only the watchdog opens.
    me, n, _, _ = pes()
    src = rx.zeros(1 << 16, torch.float32)
    dst = rx.zeros(1 << 16, torch.float32)
    rx.barrier_all()
    s = torch.cuda.Stream()
    flag = _gate(s)
    if flag is None:
        pytest.skip("no stream memory operations (cuStreamWaitValue32)")
    watchdog_opened = threading.Event()

    def watchdog():
        if not opened.wait(20):
            watchdog_opened.set()
            flag[0] = 1

    opened = threading.Event()
    threading.Thread(target=watchdog, daemon=True).start()
    with torch.cuda.stream(s):
        src.fill_(me + 1)
        rx.allreduce(dst, src, "sum")  # on s: torch's current stream
        out = dst * 2
    flag[0] = 1
    opened.set()
    s.synchronize()
    rx.stream_sync(s)
    assert not watchdog_opened.is_set(), "the collective waited for the gated stream instead of enqueueing on it"
    assert torch.all(out == n * (n + 1)).item(), out[:4]
    rx.barrier_all()
    rx.free(dst)
    rx.free(src)
