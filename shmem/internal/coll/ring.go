package coll

import (
	"context"
	"sync/atomic"
	"unsafe"

	"github.com/roxamen/roxamen/internal/simd"
)

// The ring and hierarchical all-reduce: a pipelined chain in team PE order.
//
// The team is cut into groups of consecutive team PEs: the nodes (hier), or one PE each (ring).
// The elements are cut into R chunks, R being the smallest group's size; local PE l of every group
// is on rail l and handles chunk l. On each rail, segment by segment:
//
//  1. reduce, from group 0 to group G-1: group 0's rail PE folds its group's inputs (read over
//     load/store) for the segment and sends the partial (accumulators: float32 for the 16-bit
//     float types) to the rail PE of group 1, which folds its group's inputs onto it, and so on;
//     so every element is reduced in team PE order, as in every other algorithm;
//  2. broadcast, from group G-1 along G-1, 0, 1, ..., G-2: each rail PE stores the final segment
//     into the destination of every PE of its group.
//
// Each PE receives from one PE (its rail predecessor) through a pipe: the payload areas of the
// current half of its scratch, n slots, with a message counter and a credit counter (signal words
// whose values are epoch<<20 | messages, so a later call's waits are never met by an earlier
// call's values). Each counter is set to rising values, so a fence to the word's PE goes before
// every set: the memory model orders two deliveries to one PE only across a fence (MODEL.md §3,
// rule 3), and a later set landing first would be overwritten by the earlier, lower one. Group G-1 finishes its reduce before it broadcasts, so the pipes never wait in a
// cycle. Last, every rail PE tells the PEs of its group that their destination chunk is written
// and their source no longer read.

const pipeShift = 20

func (op *collOp) tag(i int) uint64 { return op.e<<pipeShift | uint64(i) }

// pipeSlot is the heap offset and capacity of pipe slot i in a PE's scratch.
func (op *collOp) pipeSlot(i int) (uint64, int) {
	n := len(op.t.members)
	off, c := op.t.region(op.par, i%n)
	return off + hdrSize, c
}

func (op *collOp) putWord(j, kind int, v uint64) error {
	t := op.t
	pe := t.members[j]
	off := t.sigOff(kind, t.me)
	if dst := t.e.w.Mapped(pe); dst != nil {
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&dst[off])), v)
		return nil
	}
	if err := op.fence(pe); err != nil {
		return err
	}
	return t.e.w.PutSignal(op.call, pe, off, nil, off, v)
}

// fence orders this PE's earlier deliveries to world PE pe before its later ones (World.Fence:
// stores to a mapped heap are atomics in program order already; a device path completes each call
// before it returns; the NIC path, and the reordering path, needs the transport's fence).
func (op *collOp) fence(pe int) error { return op.t.e.w.Fence(op.call, pe) }

type pipe struct {
	op         *collOp
	to, from   int // team PEs; -1 for none
	sent, recd int
}

func (p *pipe) send(data []byte) error {
	op := p.op
	n := len(op.t.members)
	if p.sent >= n {
		if err := op.waitFor(sigCredit, p.to, op.tag(p.sent-n+1), "take a chunk of the ring"); err != nil {
			return err
		}
	}
	off, _ := op.pipeSlot(p.sent)
	p.sent++
	pe := op.t.members[p.to]
	if dst := op.t.e.w.Mapped(pe); dst != nil {
		simd.Copy(dst[off:off+uint64(len(data))], data)
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&dst[op.t.sigOff(sigPipe, op.t.me)])), op.tag(p.sent))
		return nil
	}
	if err := op.fence(pe); err != nil {
		return err
	}
	return op.t.e.w.PutSignal(op.call, pe, off, data, op.t.sigOff(sigPipe, op.t.me), op.tag(p.sent))
}

// recv returns the next message (n bytes), valid until release.
func (p *pipe) recv(n int) ([]byte, error) {
	op := p.op
	if err := op.waitFor(sigPipe, p.from, op.tag(p.recd+1), "pass a chunk along the ring"); err != nil {
		return nil, err
	}
	off, _ := op.pipeSlot(p.recd)
	p.recd++
	if l := op.local(off, n); l != nil {
		return l, nil
	}
	b := make([]byte, n)
	if err := op.t.e.w.Get(op.call, op.t.e.cfg.PE, off, b); err != nil {
		return nil, err
	}
	return b, nil
}

func (p *pipe) release() error { return p.op.putWord(p.from, sigCredit, p.op.tag(p.recd)) }

// drain waits until the receiver has consumed everything sent, so that no credit is in flight
// when the call returns.
func (p *pipe) drain() error {
	if p.sent == 0 {
		return nil
	}
	return p.op.waitFor(sigCredit, p.to, p.op.tag(p.sent), "take the last chunk of the ring")
}

func (t *Team) chainReduce(ctx context.Context, call string, h header, r reducer, d0, s0 uint64, count int, hier bool) error {
	op, err := t.start(ctx, call, h, nil, 0)
	if err != nil {
		return err
	}
	n := len(t.members)
	// groups of consecutive team PEs
	var starts []int
	for j := 0; j < n; j++ {
		if j == 0 || !hier || t.nodes[j] != t.nodes[j-1] {
			starts = append(starts, j)
		}
	}
	G := len(starts)
	starts = append(starts, n)
	rails := n
	g := 0
	for k := 0; k < G; k++ {
		rails = min(rails, starts[k+1]-starts[k])
		if t.me >= starts[k] {
			g = k
		}
	}
	local := t.me - starts[g]
	members := func(k int) []int {
		var m []int
		for j := starts[k]; j < starts[k+1]; j++ {
			m = append(m, j)
		}
		return m
	}
	mine := members(g)
	if local < rails && count > 0 {
		if err := op.rail(r, d0, s0, count, rails, local, g, G, starts, mine); err != nil {
			return err
		}
	}
	// Rail PEs of this group have written their chunks of every group PE's destination and read
	// their sources: tell the group, and wait for the group's rail PEs.
	for _, j := range mine {
		if j != t.me && local < rails {
			// The chunks went to j by put: a fence orders them before the signal on any path.
			if err := op.fence(t.members[j]); err != nil {
				return err
			}
			if err := op.signal(sigDone, j); err != nil {
				return err
			}
		}
	}
	for l, j := range mine {
		if j != t.me && l < rails {
			if err := op.wait(sigDone, j, "write its chunk of this PE's destination"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (op *collOp) rail(r reducer, d0, s0 uint64, count, rails, local, g, G int, starts, mine []int) error {
	lo, hi := chunk(count, rails, local)
	if lo == hi {
		return nil
	}
	_, capacity := op.pipeSlot(0)
	seg := max(capacity/r.as, 1)
	var in, out *pipe
	if G > 1 {
		pred := starts[(g+G-1)%G] + local
		succ := starts[(g+1)%G] + local
		in = &pipe{op: op, from: pred, to: -1}
		out = &pipe{op: op, to: succ, from: -1}
	}
	acc := make([]byte, min(seg, hi-lo)*r.as)
	fin := make([]byte, min(seg, hi-lo)*r.es)
	var buf []byte
	input := func(j, b, e int) ([]byte, error) {
		size := (e - b) * r.es
		if len(buf) < size {
			buf = make([]byte, size)
		}
		return op.read(j, op.src(j)+uint64(b*r.es), size, buf)
	}
	// store writes a final segment into every group PE's destination.
	store := func(b int, data []byte) error {
		for _, j := range mine {
			off := op.dst(j) + uint64(b*r.es)
			if j == op.t.me {
				if err := op.write(off, data); err != nil {
					return err
				}
				continue
			}
			if err := op.t.e.w.Put(op.call, op.t.members[j], off, data); err != nil {
				return err
			}
		}
		return nil
	}
	// 1: reduce along the groups
	for b := lo; b < hi; b += seg {
		e := min(b+seg, hi)
		a := acc[:(e-b)*r.as]
		var msg []byte
		first := 0
		if g > 0 {
			var err error
			if msg, err = in.recv(len(a)); err != nil {
				return err
			}
			copy(a, msg)
		} else {
			x, err := input(mine[0], b, e)
			if err != nil {
				return err
			}
			r.start(a, x)
			first = 1
		}
		if g > 0 {
			if err := in.release(); err != nil {
				return err
			}
		}
		for _, j := range mine[first:] {
			x, err := input(j, b, e)
			if err != nil {
				return err
			}
			r.fold(a, x, false)
		}
		if g < G-1 {
			if err := out.send(a); err != nil {
				return err
			}
			continue
		}
		f := fin[:(e-b)*r.es]
		r.finalize(f, a)
		if err := store(b, f); err != nil {
			return err
		}
	}
	if G == 1 {
		return nil
	}
	// 2: broadcast along G-1, 0, 1, ..., G-2
	for b := lo; b < hi; b += seg {
		e := min(b+seg, hi)
		size := (e - b) * r.es
		if g == G-1 {
			f, err := op.self(d0+uint64(b*r.es), size)
			if err != nil {
				return err
			}
			if err := out.send(f); err != nil {
				return err
			}
			continue
		}
		msg, err := in.recv(size)
		if err != nil {
			return err
		}
		if err := store(b, msg); err != nil {
			return err
		}
		if g != G-2 {
			if err := out.send(msg); err != nil {
				return err
			}
		}
		if err := in.release(); err != nil {
			return err
		}
	}
	return out.drain()
}
