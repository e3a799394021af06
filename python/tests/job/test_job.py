"""Every call of the Python package on a job of 2 or more PEs (4 in CI), and its error paths.
Tests are collective: each PE runs them all, in file order."""

import os

import numpy as np
import pytest

import roxamen as rx


def pes():
    me, n = rx.my_pe(), rx.n_pes()
    return me, n, (me + 1) % n, (me - 1) % n


def test_job_shape():
    me, n, _, _ = pes()
    assert n >= 2 and 0 <= me < n
    assert not rx.on_gpu()
    assert rx.TEAM_WORLD.n_pes() == n and rx.TEAM_WORLD.my_pe() == me


class _FakeTorchDtype:
    """Stands in for torch's dtypes where torch is not installed."""
    __module__ = "torch"

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


def test_torch_layouts():
    # How a symmetric tensor's device memory is described to torch on a GPU World: the element
    # size and typestr of the requested dtype (the H200 run found float32 described as int16).
    for name, want in (("float32", (4, "<f4")), ("int64", (8, "<i8")), ("bfloat16", (2, "<i2")), ("float16", (2, "<f2"))):
        assert rx._layout(_FakeTorchDtype(name)) == want, name
    assert rx._layout(np.uint64) == (8, "<u8")


def test_put_get():
    me, n, right, left = pes()
    a = rx.zeros((2, 4), np.int64)
    assert isinstance(a, np.ndarray) and a.shape == (2, 4) and (a == 0).all()
    rx.barrier_all()  # every PE has looked at its zeros before any put lands
    rx.put(a, np.arange(8).reshape(2, 4) + 100 * me, right)
    rx.barrier_all()
    assert (a.reshape(-1) == np.arange(8) + 100 * left).all()
    got = rx.get(a[1], right)  # a view names the symmetric object from its first element
    assert (got == np.arange(4, 8) + 100 * me).all()
    out = np.zeros(2, np.int64)
    rx.get_nbi(out, a[0, 2:], left)
    rx.quiet()
    assert (out == [2 + 100 * ((left - 1) % n), 3 + 100 * ((left - 1) % n)]).all()
    rx.barrier_all()
    src = np.full(4, me, np.int64)
    rx.put_nbi(a[0], src, right)
    rx.quiet()
    rx.fence()
    rx.barrier_all()
    assert (a[0] == left).all()
    peer = rx.ptr(a, right)
    if os.environ.get("ROX_DELIVERY") == "reorder":
        assert peer is None  # every access goes through the reordering path: nothing is mapped
    else:
        assert peer is not None and peer[0, 0] == me  # every PE of the job is on this node
    rx.barrier_all()
    rx.free(a)


def test_rma_errors():
    me, n, right, _ = pes()
    a = rx.zeros(4, np.float64)
    with pytest.raises(rx.RoxamenError) as e:
        rx.put(a, np.ones(4), n + 3)
    assert e.value.kind == "PE_RANGE"
    assert str(e.value) == "shmem: Put on PE %d: PE out of range: target PE %d, want 0 <= pe < %d" % (me, n + 3, n)
    with pytest.raises(rx.RoxamenError) as e:
        rx.put(np.zeros(4), np.ones(4), right)  # a private numpy array is not symmetric
    assert e.value.kind == "NOT_SYMMETRIC" and "roxamen_putmem on PE %d" % me in str(e.value)
    with pytest.raises(ValueError, match="32 bytes into a 16-byte array"):
        rx.put(a[2:], np.ones(4), right)
    with pytest.raises(rx.RoxamenError) as e:
        rx.get(a, -1)
    assert e.value.kind == "PE_RANGE" and "target PE -1" in str(e.value)
    rx.barrier_all()
    rx.free(a)
    with pytest.raises(rx.RoxamenError) as e:
        rx.put(a, np.ones(4), right)  # freed: no longer in the library's table
    assert e.value.kind == "NOT_SYMMETRIC"
    with pytest.raises(rx.RoxamenError) as e:
        rx.free(a)
    assert e.value.kind == "NOT_SYMMETRIC" and "roxamen_free" in str(e.value)


def test_atomics():
    me, n, right, left = pes()
    c = rx.zeros(4, np.int64)
    u = rx.zeros(1, np.uint64)
    f = rx.zeros(1, np.float64)
    rx.barrier_all()
    rx.fetch_add(c, 0, me + 1, 0)
    rx.add(c, 1, 1, right)
    rx.inc(c, 2, 0)
    rx.fetch_or(u, 0, 1 << me, 0)
    rx.barrier_all()
    if me == 0:
        assert c[0] == n * (n + 1) // 2 and c[2] == n and u[0] == (1 << n) - 1
    assert c[1] == 1
    rx.barrier_all()
    assert rx.compare_swap(c, 1, 1, 10 + me, right) == 1  # only this PE targets right's c[1]
    assert rx.compare_swap(c, 1, 1, 99, right) == 10 + me  # the comparison fails now
    assert rx.fetch(c, 1, right) == 10 + me
    assert rx.fetch_inc(c, 3, me) == 0 and rx.swap(c, 3, 7, me) == 1
    rx.set(f, 0, 2.5, me)
    rx.quiet()  # a non-fetching atomic is complete only at quiet (it may be reordered before)
    assert rx.fetch(f, 0, me) == 2.5 and rx.swap(f, 0, -1.0, me) == 2.5
    assert rx.fetch_and(u, 0, 0, me) == (((1 << n) - 1) if me == 0 else 0)
    assert rx.fetch_xor(u, 0, 5, me) == 0 and u[0] == 5
    assert rx.atomic("fetch", u, 0, me) == 5
    with pytest.raises(IndexError):
        rx.fetch_add(c, 4, 1, right)
    with pytest.raises(rx.RoxamenError) as e:
        rx.fetch_add(f, 0, 1.0, me)  # no float fetch_add
    assert e.value.kind == "BAD_ARGUMENT" and "floating-point atomics are fetch, set and swap" in str(e.value)
    s = rx.zeros(2, np.int16)
    with pytest.raises(rx.RoxamenError) as e:
        rx.fetch_add(s, 0, 1, me)
    assert e.value.kind == "BAD_ARGUMENT" and "ROXAMEN_INT16 has no atomics" in str(e.value)
    with pytest.raises(rx.RoxamenError) as e:
        rx.fetch_add(c, 0, 1, n)
    assert e.value.kind == "PE_RANGE"
    rx.barrier_all()
    for x in (s, f, u, c):
        rx.free(x)


def test_signals():
    me, n, right, left = pes()
    data = rx.zeros(4, np.int32)
    sig = rx.zeros(2, np.uint64)
    rx.barrier_all()
    rx.put_signal(data, np.arange(4, dtype=np.int32) + me, sig, 7, right)
    assert rx.signal_wait_until(sig, "eq", 7) == 7
    assert (data == np.arange(4) + left).all()
    slots = rx.zeros(n, np.int32)  # every PE's value lands in its own slot on PE 0
    rx.put_signal(slots[me:me + 1], [me + 1], sig, 1, 0, op="add", sig_index=1, nbi=True)
    rx.quiet()
    if me == 0:
        assert rx.signal_wait_until(sig, ">=", n, sig_index=1) == n
        assert (slots == np.arange(n) + 1).all()  # the data came before each signal
    assert rx.signal_fetch(sig) == 7
    with pytest.raises(TypeError):
        rx.signal_wait_until(data, "eq", 1)
    with pytest.raises(IndexError):
        rx.signal_fetch(sig, 2)
    rx.sync_all()
    rx.barrier_all()
    rx.free(slots)
    rx.free(sig)
    rx.free(data)


def test_teams():
    me, n, _, _ = pes()
    even = rx.TEAM_WORLD.split_strided(0, 2, (n + 1) // 2)
    x = rx.zeros(1, np.float64)
    y = rx.zeros(1, np.float64)
    x[0] = me
    if me % 2 == 0:
        assert even.n_pes() == (n + 1) // 2 and even.my_pe() == me // 2
        assert even.translate_pe(1, rx.TEAM_WORLD) == 2
        rx.allreduce(y, x, "sum", team=even)
        assert y[0] == sum(range(0, n, 2))
        even.sync()
        even.destroy()
        assert even.n_pes() == -1
    else:
        assert even is None
    row, col = rx.TEAM_WORLD.split_2d(2)
    assert row.n_pes() == 2 and row.my_pe() == me % 2 and col.my_pe() == me // 2
    assert rx.TEAM_WORLD.translate_pe(me, row) == me % 2
    row.destroy()
    col.destroy()
    with pytest.raises(rx.RoxamenError) as e:
        rx.TEAM_WORLD.destroy()
    assert e.value.kind == "BAD_ARGUMENT" and "cannot be destroyed" in str(e.value)
    with pytest.raises(rx.RoxamenError) as e:
        rx.TEAM_WORLD.split_strided(0, 1, n + 1)  # collective: every PE gets the error
    assert e.value.kind == "BAD_ARGUMENT" and "does not fit" in str(e.value)
    with pytest.raises(rx.RoxamenError) as e:
        row.sync()
    assert e.value.kind == "BAD_ARGUMENT" and "not a live team" in str(e.value)
    rx.barrier_all()
    rx.free(y)
    rx.free(x)


def test_contexts():
    me, n, right, left = pes()
    a = rx.zeros(4, np.int64)
    rx.barrier_all()
    with rx.Ctx("private") as c:
        c.put(a, [me] * 4, right)
        c.quiet()
        assert c.atomic("fetch_add", a, 3, right, 1) == me
        c.put(a[:2], [5, 6], right, nbi=True)
        c.fence()
        c.quiet()
        rx.barrier_all()
        assert (a == [5, 6, left, left + 1]).all()
        assert (c.get(a, left) == [5, 6, (left - 1) % n, (left - 1) % n + 1]).all()
    with rx.Ctx("nostore") as c:
        with pytest.raises(rx.RoxamenError) as e:
            c.put(a, [1], right)
        assert e.value.kind == "BAD_ARGUMENT"
    with pytest.raises(rx.RoxamenError) as e:
        c.quiet()
    assert "not a live context" in str(e.value)
    rx.barrier_all()
    rx.free(a)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint64, np.float32, np.float64])
def test_allreduce(dtype):
    me, n, _, _ = pes()
    src = rx.empty(5, dtype)
    dst = rx.zeros(5, dtype)
    src[:] = np.arange(5) + me
    for op, want in (("sum", n * np.arange(5) + n * (n - 1) // 2), ("min", np.arange(5)), ("max", np.arange(5) + n - 1)):
        rx.allreduce(dst, src, op)
        assert (dst == want.astype(dtype)).all(), (op, dst)
    rx.allreduce(src, src, "sum")  # in place
    assert (src == (n * np.arange(5) + n * (n - 1) // 2).astype(dtype)).all()
    rx.barrier_all()
    rx.free(dst)
    rx.free(src)


def test_collectives():
    me, n, _, _ = pes()
    src = rx.empty(3 * n, np.int32)
    dst = rx.zeros(3 * n, np.int32)
    src[:] = np.arange(3 * n) + 100 * me
    rx.alltoall(dst, src)
    for j in range(n):  # block j of PE i lands as block i of PE j
        assert (dst[3 * j:3 * j + 3] == np.arange(3 * me, 3 * me + 3) + 100 * j).all()
    rx.fcollect(dst, src[:3])
    assert (dst.reshape(n, 3) == np.arange(3) + 100 * np.arange(n)[:, None]).all()
    rx.broadcast(dst, src, root=1)
    assert (dst == np.arange(3 * n) + 100).all()
    rx.reduce_scatter(dst[:3], src, "sum")
    assert (dst[:3] == n * np.arange(3 * me, 3 * me + 3) + 100 * n * (n - 1) // 2).all()
    h = rx.zeros(4, np.float16)
    h[:] = 0.5
    rx.allreduce(h, h, "sum")
    assert (h == 0.5 * n).all()
    st = rx.Stream()
    f = rx.empty(4, np.float64)
    g = rx.zeros(4 * n, np.float64)
    f[:] = me
    rx.allreduce(g[:4], f, "max", stream=st)
    rx.allgather(g, f, stream=st)
    st.sync()
    assert (g.reshape(n, 4) == np.arange(n)[:, None]).all()
    rx.broadcast(f, f, 0, stream=st)
    rx.reduce_scatter(f[:1], g[:n], "sum", stream=st)
    rx.stream_sync(st)
    # a stream is the vendor's handle: the host backend has only the library's own
    assert st.handle != 0
    with pytest.raises(rx.RoxamenError) as e:
        rx.allreduce(f, f, "sum", stream=st.handle + 4096)
    assert e.value.kind == "BAD_ARGUMENT" and "roxamen_allreduce_on_stream on PE %d" % me in str(e.value)
    assert "not a live stream of roxamen_stream_create" in str(e.value)
    with pytest.raises(TypeError):
        rx.allreduce(f, f, "sum", stream="default")
    st.destroy()
    with pytest.raises(rx.RoxamenError) as e:
        st.sync()
    assert e.value.kind == "BAD_ARGUMENT"
    with pytest.raises(rx.RoxamenError) as e:
        rx.link_state(f.__array_interface__["data"][0], 640)
    assert e.value.kind == "NOT_SUPPORTED" and "LinkState on PE %d" % me in str(e.value)
    with pytest.raises(ValueError):
        rx.allreduce(dst[:2], src[:3])
    with pytest.raises(ValueError):
        rx.allreduce(dst, src, "median")
    with pytest.raises(TypeError):
        rx.allreduce(g, src)
    with pytest.raises(rx.RoxamenError) as e:
        rx.allreduce(dst, src, team=rx.Team(4242))
    assert e.value.kind == "BAD_ARGUMENT" and "team handle 4242" in str(e.value)
    rx.barrier_all()
    for x in (g, f, h, dst, src):
        rx.free(x)


def _route(me, ntok, experts):
    idx = np.array([[(me + t) % experts, (me + t + 3) % experts] for t in range(ntok)], dtype=np.int64)
    return idx, np.tile(np.array([0.5, 0.25], np.float32), (ntok, 1))


@pytest.mark.parametrize("low_latency", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_ep(low_latency, dtype):
    me, n, _, _ = pes()
    experts, hidden, ntok = 2 * n, 16, 3
    buf = rx.ep.Buffer(hidden=hidden, num_experts=experts, num_topk=2, max_tokens=4, dtype=dtype, low_latency=low_latency)
    assert buf.num_local_experts == 2
    x32 = (np.arange(ntok * hidden, dtype=np.float32).reshape(ntok, hidden) % 7 + me) / 4
    x = x32 if dtype == "float32" else (x32.view(np.uint32) >> 16).astype(np.uint16)  # exact in bf16
    idx, w = _route(me, ntok, experts)
    recv, counts, h = buf.dispatch(x, idx, w)
    assert sum(counts) == recv.shape[0] and recv.shape[1] == hidden
    for r in range(recv.shape[0]):
        spe, tok, k = h.recv_src[r]
        want = (np.arange(tok * hidden, (tok + 1) * hidden) % 7 + spe) / 4
        got = recv[r] if dtype == "float32" else (recv[r].astype(np.uint32) << 16).view(np.float32)
        assert (got == want).all()
        assert h.recv_topk_weights[r] == [0.5, 0.25][k]
    # an expert MLP stand-in: each local expert e scales its rows by (e + 1)
    y32 = (recv if dtype == "float32" else (recv.astype(np.uint32) << 16).view(np.float32)).copy()
    row = 0
    for e, c in enumerate(counts):
        y32[row:row + c] *= e + 1
        row += c
    y = y32 if dtype == "float32" else (y32.view(np.uint32) >> 16).astype(np.uint16)
    out = buf.combine(y, h)
    got = out if dtype == "float32" else (out.astype(np.uint32) << 16).view(np.float32)
    local = lambda e: e % (experts // n) + 1  # noqa: E731  the scale of expert e (experts split evenly)
    want = np.stack([x32[t] * sum(w[t, k] * local(idx[t, k]) for k in range(2)) for t in range(ntok)])
    tol = 1e-6 if dtype == "float32" else 1e-2
    assert np.allclose(got, want, rtol=tol), (got, want)
    bad = idx.copy()
    bad[1, 0] = experts + 1
    with pytest.raises(rx.RoxamenError) as e:
        buf.dispatch(x, bad, w)
    assert e.value.kind == "EXPERT_RANGE" and "topkIdx[1][0] = %d" % (experts + 1) in str(e.value)
    with pytest.raises(rx.RoxamenError) as e:
        buf.dispatch(np.zeros((5, hidden), x.dtype), np.zeros((5, 2), np.int64), np.zeros((5, 2), np.float32))
    assert e.value.kind == "TOO_MANY_TOKENS"
    h.free()
    with pytest.raises(rx.RoxamenError) as e:
        buf.combine(y, h)
    assert "not a live handle" in str(e.value)
    rx.barrier_all()
    buf.destroy()


def test_ep_on_stream_needs_a_gpu():
    buf = rx.ep.Buffer(hidden=8, num_experts=2 * rx.n_pes(), num_topk=1, max_tokens=2)
    st = rx.Stream()
    x = rx.zeros((2, 8), np.float32)
    idx = rx.zeros((2, 1), np.int64)
    w = rx.zeros((2, 1), np.float32)
    with pytest.raises(rx.RoxamenError) as e:
        rx._call("roxamen_ep_dispatch_on_stream", buf.h, st.handle, x.ctypes.data, 2, idx.ctypes.data, w.ctypes.data,
                 None, None, None, None, None, None, None)
    assert e.value.kind == "NOT_SUPPORTED" and "ep.DispatchOnStream on PE %d" % rx.my_pe() in str(e.value)
    st.destroy()
    rx.barrier_all()
    for a in (w, idx, x):
        rx.free(a)
    buf.destroy()
