package nic

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// FuzzRingDescriptors decodes arbitrary ring memory the way the proxy does (a device or another
// process may have written anything there): the header and slots are the fuzzer's bytes, Poll
// takes the published descriptors, and the proxy validates and executes each against a transport
// over in-memory heaps. Poll must hand out at most a ring's worth of descriptors, in ticket order;
// the proxy must reject what is out of range with ErrBadDescriptor before the transport sees it
// (the transport fails or panics on anything out of range), and never panic.
func FuzzRingDescriptors(f *testing.F) {
	const capacity, npes, heapSize, localSize = 8, 3, 4096, 4096
	desc := func(seq uint64, op Op, pe uint32, size, src, dst, value, aux uint64, flags uint32) []byte {
		b := make([]byte, DescSize)
		binary.LittleEndian.PutUint64(b[0:], seq)
		binary.LittleEndian.PutUint32(b[8:], uint32(op))
		binary.LittleEndian.PutUint32(b[12:], pe)
		binary.LittleEndian.PutUint64(b[16:], size)
		binary.LittleEndian.PutUint64(b[24:], src)
		binary.LittleEndian.PutUint64(b[32:], dst)
		binary.LittleEndian.PutUint64(b[40:], value)
		binary.LittleEndian.PutUint64(b[48:], aux)
		binary.LittleEndian.PutUint32(b[56:], flags)
		return b
	}
	ring := func(tail uint64, descs ...[]byte) []byte {
		b := make([]byte, RingHeaderSize)
		binary.LittleEndian.PutUint64(b[RingHeadOffset:], tail+uint64(len(descs)))
		binary.LittleEndian.PutUint64(b[RingTailOffset:], tail)
		for _, d := range descs {
			b = append(b, d...)
		}
		return b
	}
	f.Add(ring(0,
		desc(1, OpPut, 1, 16, localBase, 64, 0, 0, 0),
		desc(2, OpGet, 2, 8, localBase+8, 128, 0, 0, 0),
		desc(3, OpPutSignal, 1, 8, localBase, 0, 1, 256, MakeFlags(uint32(SignalAdd), 8)),
		desc(4, OpAMO, 2, 0, localBase+64, 512, 5, 0, MakeFlags(uint32(AMOFetchAdd), 8)),
		desc(5, OpFence, 1, 0, 0, 0, 0, 0, 0),
		desc(6, OpQuiet, 0, 0, 0, 0, 0, 0, 0),
		desc(7, OpAMO, 0, 0, 0, 1024, 3, 4, MakeFlags(uint32(AMOCompareSwap), 4))))
	f.Add(ring(0,
		desc(1, OpPut, 3, 16, localBase, 64, 0, 0, 0),
		desc(2, OpPut, 1, 1<<63, localBase, 64, 0, 0, 0),
		desc(3, OpGet, 1, 16, localBase+localSize-8, 0, 0, 0, 0),
		desc(4, OpPutSignal, 1, 8, localBase, heapSize-4, 1, heapSize-4, 0),
		desc(5, OpAMO, 1, 0, localBase+3, 8, 0, 0, MakeFlags(uint32(AMOSwap), 8)),
		desc(6, OpAMO, 1, 0, 0, 8, 0, 0, MakeFlags(99, 3)),
		desc(7, 42, 1, 0, 0, 0, 0, 0, 0),
		desc(8, OpPut, 0xffffffff, 1, localBase, 0, 0, 0, 0)))
	f.Add(ring(5, desc(1, OpPut, 1, 1, localBase, 0, 0, 0, 0), desc(7, OpGet, 1, 1, localBase, 0, 0, 0, 0)))
	f.Add(ring(^uint64(0)-2, desc(^uint64(0)-1, OpNop, 0, 0, 0, 0, 0, 0, 0)))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := AlignedBytes(RingBytes(capacity))
		copy(mem, data)
		r, err := AttachRing(mem)
		if err != nil {
			t.Fatal(err)
		}
		fake := newFake(npes, heapSize)
		p, err := newProxy(ProxyConfig{PE: 0, NPEs: npes, HeapSize: heapSize, Transport: fake,
			Local: newRegion(localBase, localSize), Rings: []*Ring{r}, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]Desc, 2*capacity)
		first, n := r.Poll(out)
		if n > capacity {
			t.Fatalf("Poll returned %d descriptors from a ring of %d", n, capacity)
		}
		if n > 0 && r.Tail() != first+uint64(n) {
			t.Fatalf("Poll took tickets [%d, +%d) but left the tail at %d", first, n, r.Tail())
		}
		for i := 0; i < n; i++ {
			d := &out[i]
			if d.Seq != first+uint64(i)+1 {
				t.Fatalf("descriptor %d has seq %d, want %d", i, d.Seq, first+uint64(i)+1)
			}
			if err := p.exec(d); err != nil && !errors.Is(err, ErrBadDescriptor) {
				t.Fatalf("%v reached the transport and failed there: %v", d, err)
			}
		}
	})
}
