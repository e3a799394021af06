"""Expert parallelism: DeepEP's Buffer shape over shmem/ep.

    buf = roxamen.ep.Buffer(hidden=7168, num_experts=256, num_topk=8, max_tokens=128)
    recv_x, num_recv_tokens_per_expert_list, handle = buf.dispatch(x, topk_idx, topk_weights)
    y = experts(recv_x)                  # rows grouped by local expert, in that order
    combined_x = buf.combine(y, handle)  # top-k weighted sums, back on each token's PE

x is [tokens, hidden] float32 (dtype "float32") or bfloat16 bits as uint16 (dtype "bfloat16");
topk_idx [tokens, topk] int64 (-1: none), topk_weights [tokens, topk] float32. Experts are split
evenly over the PEs. Creating and destroying a Buffer are collective.
"""

import ctypes

import numpy as np

from . import _addr, _call, _CudaMem, _lib, _local, _stream_handle

_DT = {"bfloat16": (0, np.uint16), "float32": (1, np.float32)}


class Handle:
    """A dispatch's routing, for the combine that returns its tokens. Also carries what the
    dispatch delivered beside the rows: per-row weights and sources (PE, token, k)."""

    def __init__(self, buf, h, tokens, recv_weights, recv_src):
        self.buf, self.h, self.tokens = buf, h, tokens
        self.recv_topk_weights, self.recv_src = recv_weights, recv_src

    def free(self):
        if self.h is not None and self.buf.h is not None:
            h, self.h = self.h, None
            _call("roxamen_ep_handle_free", self.buf.h, h)


class Buffer:
    def __init__(self, hidden, num_experts, num_topk, max_tokens, dtype="float32", low_latency=False):
        if dtype not in _DT:
            raise ValueError("roxamen.ep: dtype %r, want one of %s" % (dtype, ", ".join(_DT)))
        self.hidden, self.num_experts, self.num_topk = hidden, num_experts, num_topk
        self.dtype, self._np = dtype, _DT[dtype][1]
        h = ctypes.c_int()
        _call("roxamen_ep_create", hidden, num_topk, num_experts, max_tokens, _DT[dtype][0], int(bool(low_latency)), ctypes.byref(h))
        self.h = h.value
        self.max_rows = _lib.lib().roxamen_ep_max_rows(self.h)
        self.num_local_experts = _lib.lib().roxamen_ep_local_experts(self.h)

    def dispatch(self, x, topk_idx, topk_weights):
        """Send x's rows to the PEs owning their experts. Returns (recv_x [rows, hidden], the
        rows per local expert as a list, handle)."""
        x = _local(x, self._np)
        idx = _local(topk_idx, np.int64)
        w = _local(topk_weights, np.float32)
        ntok = x.shape[0] if x.ndim else 0
        recv = np.empty((self.max_rows, self.hidden), dtype=self._np)
        counts = np.zeros(self.num_local_experts, dtype=np.int32)
        rw = np.empty(self.max_rows, dtype=np.float32)
        src = np.empty((self.max_rows, 3), dtype=np.int32)
        rows, h = ctypes.c_int(), ctypes.c_int()
        _call("roxamen_ep_dispatch", self.h, x.ctypes.data, ntok, idx.ctypes.data, w.ctypes.data,
              recv.ctypes.data, self.max_rows, ctypes.byref(rows), counts.ctypes.data, rw.ctypes.data,
              src.ctypes.data, ctypes.byref(h))
        n = rows.value
        return recv[:n], counts.tolist(), Handle(self, h.value, ntok, rw[:n], src[:n])

    def combine(self, y, handle):
        """The top-k weighted sums of the experts' outputs y (recv_x's rows, in its order), for
        this PE's tokens of the dispatch that made handle: [tokens, hidden]."""
        if handle.buf is not self:
            raise ValueError("roxamen.ep: a handle from another Buffer")
        y = _local(y, self._np)
        out = np.empty((handle.tokens, self.hidden), dtype=self._np)
        h = -1 if handle.h is None else handle.h
        _call("roxamen_ep_combine", self.h, h, y.ctypes.data, y.shape[0] if y.ndim else 0, out.ctypes.data)
        return out

    def dispatch_on_stream(self, x, topk_idx, topk_weights, stream=None):
        """dispatch on a GPU World, enqueued on stream (a roxamen.Stream or a torch.cuda.Stream;
        torch's current stream when None): x, topk_idx (int64) and topk_weights (float32) are
        CUDA tensors. Returns (recv_x, rows, counts, handle): recv_x is [max_rows, hidden] in the
        buffer's device memory (the first rows[0] hold the rows), rows and counts int32 device
        tensors, for the work enqueued after it on the stream, until the buffer's next dispatch."""
        import torch
        st = _stream_handle(stream, x)
        ptrs = [ctypes.c_void_p() for _ in range(6)]
        h = ctypes.c_int()
        _call("roxamen_ep_dispatch_on_stream", self.h, st, _addr(x), x.shape[0], _addr(topk_idx),
              _addr(topk_weights), *[ctypes.byref(p) for p in ptrs], ctypes.byref(h))
        tdt = torch.float32 if self.dtype == "float32" else torch.bfloat16
        view = lambda p, shape, ts: torch.as_tensor(_CudaMem(p.value, shape, ts), device="cuda")  # noqa: E731
        recv_x = view(ptrs[0], (self.max_rows, self.hidden), "<f4" if self.dtype == "float32" else "<i2").view(tdt)
        rows = view(ptrs[1], (1,), "<i4")
        counts = view(ptrs[2], (self.num_local_experts,), "<i4")
        return recv_x, rows, counts, Handle(self, h.value, x.shape[0], None, None)

    def combine_on_stream(self, y, handle, stream=None):
        """combine on a GPU World, enqueued on stream (as dispatch_on_stream's): y is a CUDA
        tensor with room for max_rows rows (the experts' outputs, in recv_x's order). Returns the
        [tokens, hidden] combined tokens in the buffer's device memory, for the work enqueued
        after it on the stream."""
        import torch
        st = _stream_handle(stream, y)
        out = ctypes.c_void_p()
        _call("roxamen_ep_combine_on_stream", self.h, st, -1 if handle.h is None else handle.h, _addr(y),
              y.shape[0], ctypes.byref(out))
        t = torch.as_tensor(_CudaMem(out.value, (handle.tokens, self.hidden), "<f4" if self.dtype == "float32" else "<i2"), device="cuda")
        return t if self.dtype == "float32" else t.view(torch.bfloat16)

    def destroy(self):
        """Release the buffer's symmetric memory (collective)."""
        if self.h is not None:
            h, self.h = self.h, None
            _call("roxamen_ep_destroy", h)
