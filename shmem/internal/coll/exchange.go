package coll

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/roxamen/roxamen/internal/simd"
)

// collOp is one collective call in progress on a team.
type collOp struct {
	t     *Team
	ctx   context.Context
	call  string
	e     uint64
	par   int
	h     header
	peers []header
	// the wait in progress, for its error (String)
	waitJ    int
	waitOff  uint64
	waitWhat string
}

// region is the heap offset of team PE src's region in the given half of the slot, and its
// payload capacity.
func (t *Team) region(half, src int) (off uint64, capacity int) {
	e := t.e
	return e.dataOff[t.slot] + uint64(half*(e.dataSize[t.slot]/2)+src*t.stride), t.stride - hdrSize
}

// payloadCap is how many payload bytes one PE can send another in the header exchange.
func (t *Team) payloadCap() int { _, c := t.region(0, 0); return c }

// hdrSig is the header's signal word kind of a call of parity par. Consecutive calls signal
// different words, as they use different regions: on a path that delivers put-with-signals out of
// order (ROX_DELIVERY=reorder; a NIC's adaptive routing) call e+1's signal may land before call
// e's, which, on one word, would set it back to e and leave the receiver waiting for e+1 forever.
// Call e+2 is sent only once the sender has every member's header of e+1, which each member sends
// after it saw call e's: e's signal has landed by then.
func hdrSig(par int) int {
	if par == 1 {
		return sigHeaderOdd
	}
	return sigHeader
}

func (t *Team) sigOff(kind, src int) uint64 {
	e := t.e
	return e.ctlBase + uint64(t.slot)*e.ctlStride + uint64((kind*e.cfg.NPEs+src)*8)
}

// Sync is a call that carries no data (Sync, Barrier, Destroy: id says which): the header
// exchange alone, which waits for every member.
func (t *Team) Sync(ctx context.Context, call string, id Call) error {
	_, err := t.start(ctx, call, header{call: id}, nil, 0)
	return err
}

// WorldCall gives the World's call id, with its arguments (a, b), its place in the team's
// sequence (the team is TeamWorld): a header exchange like a team call's, which fails with the
// Mismatch kind when a PE is at another call, or at this one with other arguments.
func (t *Team) WorldCall(ctx context.Context, call string, id Call, a, b int64) error {
	_, err := t.start(ctx, call, header{call: id, count: a, root: b}, nil, 0)
	return err
}

// Refuse is how a call ends when this PE's argument check refused it: the call still takes its
// place in the team's sequence, with a header that says it was refused and why (an index into
// Kinds.Refusals), so that every other PE's call fails at once naming this PE instead of being
// matched with this PE's next call. The error is the exchange's (the caller returns its own).
func (t *Team) Refuse(ctx context.Context, call string, id Call, why uint8) error {
	_, err := t.start(ctx, call, header{call: id, refused: true, why: why}, nil, 0)
	return err
}

// start numbers a call, sends this PE's header to every member, with member j's payload behind it
// (payload[j*per:(j+1)*per], or all of payload where per is 0), and waits for every member's
// header. It returns a Mismatch error when they disagree. It allocates nothing where every
// member's heap is mapped here: the call's state (t.op) and the headers (t.peers) are the team's,
// reused by each call.
func (t *Team) start(ctx context.Context, call string, h header, payload []byte, per int) (*collOp, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	h.epoch = t.next()
	if h.call == CallSplit {
		h.word2 = t.e.maxEpoch.Load()
	}
	return t.exchangeAt(ctx, call, h, payload, per)
}

// next numbers the team's next call and returns its epoch.
func (t *Team) next() uint64 {
	en := t.e
	t.epoch++
	e := t.epoch
	for {
		m := en.maxEpoch.Load()
		if e <= m || en.maxEpoch.CompareAndSwap(m, e) {
			break
		}
	}
	return e
}

// exchangeAt is the header exchange of the call numbered h.epoch (see start).
func (t *Team) exchangeAt(ctx context.Context, call string, h header, payload []byte, per int) (*collOp, error) {
	en := t.e
	w := en.w
	e := h.epoch
	n := len(t.members)
	if cap(t.peers) < n {
		t.peers = make([]header, n)
	}
	// Field by field: a composite literal would build the whole state aside, then copy it in.
	o := &t.op
	o.t, o.ctx, o.call, o.e, o.par, o.h, o.peers = t, ctx, call, e, int(e&1), h, t.peers[:n]
	off, capacity := t.region(o.par, t.me)
	var buf []byte
	for k := 1; k < n; k++ {
		j := (t.me + k) % n
		pe := t.members[j]
		data := payload
		if per > 0 && payload != nil {
			data = payload[j*per : (j+1)*per]
		}
		if len(data) > capacity {
			panic(fmt.Sprintf("shmem: %s: %d-byte payload over the %d-byte region", call, len(data), capacity))
		}
		if dst := w.Mapped(pe); dst != nil {
			// Over load/store the header's first word, the epoch, is the flag the receiver polls:
			// stored last (a release), so that the header and the payload are there when it shows
			// e, and they come with it in one or two cache lines where a separate signal word
			// would be one more line to fetch. The signal word is set too where a NIC runs: a PE
			// at a World call on the NIC path watches those words for a TeamWorld collective
			// (NICCall.Arrived).
			var hb [hdrSize]byte
			h.encode(hb[:])
			copy(dst[off+8:off+hdrSize], hb[8:])
			simd.Copy(dst[off+hdrSize:], data)
			atomic.StoreUint64((*uint64)(unsafe.Pointer(&dst[off])), e)
			if en.nic {
				atomic.StoreUint64((*uint64)(unsafe.Pointer(&dst[t.sigOff(hdrSig(o.par), t.me)])), e)
			}
			continue
		}
		if len(data) == 0 && worldCall(h.call) && w.Reorders() {
			// The World's barriers and allocation calls on the reordering path go on the
			// runtime's own channel, as the barrier's signals do: each word at once and in order,
			// the signal last, rather than held up to milliseconds per delivery.
			var hb [hdrSize]byte
			h.encode(hb[:])
			for i := 0; i < hdrSize; i += 8 {
				if err := w.SetWord(call, pe, off+uint64(i), binary.LittleEndian.Uint64(hb[i:])); err != nil {
					return nil, err
				}
			}
			if err := w.SetWord(call, pe, t.sigOff(hdrSig(o.par), t.me), e); err != nil {
				return nil, err
			}
			continue
		}
		buf = append(buf[:0], make([]byte, hdrSize)...)
		h.encode(buf)
		buf = append(buf, data...)
		if err := w.PutSignal(call, pe, off, buf, t.sigOff(hdrSig(o.par), t.me), e); err != nil {
			return nil, err
		}
	}
	o.peers[t.me] = h
	me := en.cfg.PE
	for k := 1; k < n; k++ {
		j := (t.me + n - k) % n
		off, _ := t.region(o.par, j)
		// A member that reaches this PE over load/store flags its header with the header's own
		// epoch word (see above); one that comes through a path, with its signal word after the
		// data (PutSignal). A PE maps a member's heap exactly when that member maps its own
		// (the same node, the same ROX_TRANSPORT), so both sides agree on which.
		var err error
		if w.Mapped(t.members[j]) != nil {
			err = o.waitWord(off, j, e, "")
		} else {
			err = o.wait(hdrSig(o.par), j, "") // "": enter the call
		}
		if err != nil {
			return nil, err
		}
		var hb []byte
		if src := w.Mapped(me); src != nil {
			hb = src[off : off+hdrSize]
		} else {
			// a device heap: through this PE's own path, into the team's buffer (a buffer on the
			// stack would escape through the World interface: one allocation per member and call)
			if t.hdrBuf == nil {
				t.hdrBuf = make([]byte, hdrSize)
			}
			hb = t.hdrBuf
			if err := w.Get(call, me, off, hb); err != nil {
				return nil, err
			}
		}
		o.peers[j] = decodeHeader(hb)
	}
	// Every header is in: the error, if any, names the lowest team PE that differs.
	var err error
	rejoin := false
	for j := 0; j < n; j++ {
		if j != t.me {
			p := &o.peers[j]
			if err == nil {
				err = t.disagree(call, &h, p, j)
			}
			rejoin = rejoin || (p.call != h.call || p.refused != h.refused) && (worldCall(p.call) || worldCall(h.call))
		}
	}
	if rejoin && t.slot == 0 {
		// TeamWorld's calls met World calls of another kind: on the NIC path those run protocols of
		// their own (see NICCall), which this PE completes too so that they stay in step.
		seen := make([]Seen, n)
		for j := range seen {
			seen[j] = Seen{Call: o.peers[j].call, Refused: o.peers[j].refused}
		}
		if rerr := w.Rejoin(call, seen, t.me); rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

// Seen is what one PE's header said of its call, for World.Rejoin.
type Seen struct {
	Call    Call
	Refused bool
}

// NICCall is a World call in progress on TeamWorld where some PE is reached over the NIC path.
// There a header exchange with every PE would open a transport connection from each PE to every
// other at its first allocation (connections are made on first use), so the World's calls run
// protocols of their own that reach few peers (an agreement through the bootstrap, a dissemination
// barrier over log2 N peers) and take their epoch in TeamWorld's sequence without sending a
// header. A TeamWorld collective still sends its header to every PE: a PE at a World call watches
// for one (Arrived) while its protocol waits, and on seeing it leaves the protocol for the header
// exchange (Exchange). Every other PE then sees a header too, so every PE ends the call with the
// full exchange: the Mismatch error names both calls on every PE within one delivery and one poll,
// and the protocols left half-done are completed by the PEs not in them (World.Rejoin) so that
// the calls after stay in step.
type NICCall struct {
	t    *Team
	ctx  context.Context
	call string
	h    header
}

// NICCall numbers the World's call id on TeamWorld, with its arguments (a, b) or its refusal
// (why), for the NIC path (see NICCall).
func (t *Team) NICCall(ctx context.Context, call string, id Call, a, b int64, refused bool, why uint8) *NICCall {
	if ctx == nil {
		ctx = context.Background()
	}
	h := header{call: id, count: a, root: b, refused: refused, why: why}
	h.epoch = t.next()
	return &NICCall{t: t, ctx: ctx, call: call, h: h}
}

// Epoch is the call's epoch in TeamWorld's sequence.
func (c *NICCall) Epoch() uint64 { return c.h.epoch }

// Arrived reports whether some PE's header for this call has arrived: a PE at a TeamWorld
// collective, or at a World call that left its protocol. One load per PE.
func (c *NICCall) Arrived() bool {
	t := c.t
	w := t.e.w
	sig := hdrSig(int(c.h.epoch & 1))
	for j := range t.members {
		if j != t.me && w.LoadWord(t.sigOff(sig, j)) >= c.h.epoch {
			return true
		}
	}
	return false
}

// Exchange is the header exchange of the call, for a PE that left its protocol (Arrived, or
// another sign that some PE is at another call). It returns the Mismatch error, or nil where
// this PE's own refusal is the error its caller returns.
func (c *NICCall) Exchange() error {
	_, err := c.t.exchangeAt(c.ctx, c.call, c.h, nil, 0)
	return err
}

// startEager is start for a call whose data travels in the header exchange where eager: this
// PE's n bytes at s0 are its payload (per as for start).
func (t *Team) startEager(ctx context.Context, call string, h header, eager bool, s0 uint64, n, per int) (*collOp, error) {
	var payload []byte
	if eager {
		var err error
		if payload, err = t.read(call, t.me, s0, n, nil); err != nil {
			return nil, err
		}
	}
	return t.start(ctx, call, h, payload, per)
}

// payload returns the bytes member j sent this PE in the header exchange (n of them): a view of
// this PE's scratch where the heap is host memory.
func (o *collOp) payload(j, n int) ([]byte, error) {
	t := o.t
	w, me := t.e.w, t.e.cfg.PE
	off, _ := t.region(o.par, j)
	off += hdrSize
	if src := w.Mapped(me); src != nil {
		return src[off : off+uint64(n)], nil
	}
	b := make([]byte, n)
	if err := w.Get(o.call, me, off, b); err != nil {
		return nil, err
	}
	return b, nil
}

// signal sets word kind[me] of member j to this call's epoch.
func (o *collOp) signal(kind, j int) error {
	t := o.t
	pe := t.members[j]
	off := t.sigOff(kind, t.me)
	if dst := t.e.w.Mapped(pe); dst != nil {
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&dst[off])), o.e)
		return nil
	}
	return t.e.w.PutSignal(o.call, pe, off, nil, off, o.e)
}

// wait waits until this PE's word kind[j] reaches the call's epoch.
func (o *collOp) wait(kind, j int, what string) error {
	return o.waitFor(kind, j, o.e, what)
}

func (o *collOp) waitFor(kind, j int, v uint64, what string) error {
	return o.waitWord(o.t.sigOff(kind, j), j, v, what)
}

// waitWord waits until the word at off of this PE's heap, which team PE j sets, reaches v; what
// says what PE j is to do ("" for entering the call).
func (o *collOp) waitWord(off uint64, j int, v uint64, what string) error {
	w := o.t.e.w
	if w.LoadWord(off) >= v {
		return nil
	}
	// The call's state describes the wait, so that waiting allocates nothing.
	o.waitJ, o.waitOff, o.waitWhat = j, off, what
	return w.WaitWord(o.ctx, o.call, o.t.members[j], off, v, o)
}

// String describes the wait in progress, for the error of one that fails.
func (o *collOp) String() string {
	t, j, what := o.t, o.waitJ, o.waitWhat
	if what == "" {
		what = "enter " + o.call
	}
	return fmt.Sprintf("PE %d (team PE %d of %s) to %s (call %d on the team; last signal %#x)", t.members[j], j, t.name, what, o.e, t.e.w.LoadWord(o.waitOff))
}

// src and dst are team PE j's source and destination offsets (from its header: a PE's buffers
// need not be at the same offset as this PE's, as for in-place calls).
func (o *collOp) src(j int) uint64 { return o.peers[j].word }
func (o *collOp) dst(j int) uint64 { return o.peers[j].word2 }

// read returns n bytes at off in team PE j's heap: a view where the heap is mapped here, else a
// copy (through the PE's path) into buf, or into a new slice where buf holds fewer than n bytes.
func (o *collOp) read(j int, off uint64, n int, buf []byte) ([]byte, error) {
	return o.t.read(o.call, j, off, n, buf)
}

// read is collOp.read for a call (named call) whose state is not made yet.
func (t *Team) read(call string, j int, off uint64, n int, buf []byte) ([]byte, error) {
	pe := t.members[j]
	if n == 0 {
		return nil, nil
	}
	if m := t.e.w.Mapped(pe); m != nil {
		return m[off : off+uint64(n)], nil
	}
	if len(buf) < n {
		buf = make([]byte, n)
	}
	if err := t.e.w.Get(call, pe, off, buf[:n]); err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// mapped reports whether team PE j's heap is mapped here (read returns views of it).
func (o *collOp) mapped(j int) bool { return o.t.e.w.Mapped(o.t.members[j]) != nil }

// local returns this PE's bytes at off for writing, or nil where the heap is device memory.
func (o *collOp) local(off uint64, n int) []byte {
	if l := o.t.e.w.Mapped(o.t.e.cfg.PE); l != nil {
		return l[off : off+uint64(n)]
	}
	return nil
}

// write stores data at off of this PE's heap.
func (o *collOp) write(off uint64, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	w, me := o.t.e.w, o.t.e.cfg.PE
	if l := w.Mapped(me); l != nil {
		if &l[off] != &data[0] {
			simd.Copy(l[off:off+uint64(len(data))], data)
		}
		return nil
	}
	return w.Put(o.call, me, off, data)
}

// self returns this PE's bytes at off (a view, or a copy from device memory).
func (o *collOp) self(off uint64, n int) ([]byte, error) {
	return o.read(o.t.me, off, n, nil)
}

// doneAll tells every PE whose buffers this PE read that it has finished, and waits for every PE
// that read this PE's buffers: readFrom(j) is whether this PE read from PE j, readBy(j) whether PE
// j read from this PE.
func (o *collOp) doneAll(readFrom, readBy func(j int) bool) error {
	t := o.t
	n := len(t.members)
	for k := 1; k < n; k++ {
		j := (t.me + k) % n
		if readFrom(j) {
			if err := o.signal(sigDone, j); err != nil {
				return err
			}
		}
	}
	for k := 1; k < n; k++ {
		j := (t.me + n - k) % n
		if readBy(j) {
			if err := o.wait(sigDone, j, "finish reading this PE's buffers"); err != nil {
				return err
			}
		}
	}
	return nil
}

func none(int) bool { return false }
