package coll

import "context"

// The data-movement collectives. Each takes this PE's destination and source as heap offsets and
// counts in elements of kind; the caller has checked them (lengths, overlaps, the root).

// Broadcast copies team PE root's count elements at src into dst on every member, root included.
func (t *Team) Broadcast(ctx context.Context, call string, kind Kind, dst, src uint64, count, root int) error {
	size := count * kind.Size()
	algo := t.pickMove(size)
	h := header{call: CallBroadcast, kind: kind, count: int64(count), root: int64(root), algo: algo, word: src, word2: dst}
	eager := algo == algoOneShot && size <= t.payloadCap()
	o, err := t.startEager(ctx, call, h, eager && t.me == root, src, size, 0)
	if err != nil {
		return err
	}
	if t.me == root {
		if dst != src {
			b, err := o.self(src, size)
			if err != nil {
				return err
			}
			if err := o.write(dst, b); err != nil {
				return err
			}
		}
		if eager {
			return nil
		}
		return o.doneAll(none, func(j int) bool { return j != root })
	}
	var b []byte
	if eager {
		b, err = o.payload(root, size)
	} else {
		b, err = o.read(root, o.src(root), size, nil)
	}
	if err != nil {
		return err
	}
	if err := o.write(dst, b); err != nil {
		return err
	}
	if eager {
		return nil
	}
	return o.doneAll(func(j int) bool { return j == root }, none)
}

// FCollect concatenates every member's count elements at src, in team PE order, into dst.
func (t *Team) FCollect(ctx context.Context, call string, kind Kind, dst, src uint64, count int) error {
	size := count * kind.Size()
	algo := t.pickMove(size)
	eager := algo == algoOneShot && size <= t.payloadCap()
	h := header{call: CallFCollect, kind: kind, count: int64(count), algo: algo, word: src, word2: dst}
	o, err := t.startEager(ctx, call, h, eager, src, size, 0)
	if err != nil {
		return err
	}
	counts := func(int) int { return size }
	return gatherData(o, dst, src, counts, func(int) bool { return eager }, false)
}

// Collect concatenates every member's elements at src (count of them here; the counts may differ
// by member), in team PE order, into dst, which has dstCount elements. Every PE checks every PE's
// destination against the total. overlap, given this PE's element offset in the destination
// (where its own block lands), returns the error of a source that overlaps the destination
// elsewhere, or nil: the call still finishes the protocol, leaving the destination untouched, and
// returns that error.
func (t *Team) Collect(ctx context.Context, call string, kind Kind, dst, src uint64, count, dstCount int, overlap func(at int) error) error {
	es := kind.Size()
	size := count * es
	algo := t.pickMove(size)
	eager := algo == algoOneShot && size <= t.payloadCap()
	h := header{call: CallCollect, kind: kind, count: int64(count), extra: int64(dstCount), extra2: int64(btoi(eager)), word: src, word2: dst}
	if t.knob() != algoAuto {
		h.algo = t.knob() // an explicit choice must agree; auto may differ per source
	}
	o, err := t.startEager(ctx, call, h, eager, src, size, 0)
	if err != nil {
		return err
	}
	total, at := 0, 0
	for j := range t.members {
		if j == t.me {
			at = total
		}
		total += int(o.peers[j].count)
	}
	for j := range t.members {
		if int(o.peers[j].extra) < total {
			return t.e.w.Errorf(call, t.e.cfg.Kinds.BadArgument, "on %s: PE %d's destination has %d elements, the %d PEs send %d in all", t.name, t.members[j], o.peers[j].extra, len(t.members), total)
		}
	}
	// Every PE has the counts now; one whose buffers overlap still finishes the protocol.
	err = overlap(at)
	counts := func(j int) int { return int(o.peers[j].count) * es }
	if gerr := gatherData(o, dst, src, counts, func(j int) bool { return o.peers[j].extra2 == 1 }, err != nil); gerr != nil {
		return gerr
	}
	return err
}

// gatherData places every PE's block at its place in dst: from scratch where PE j sent it eagerly,
// else read from PE j's source. skipWrites keeps the destination untouched (an argument error).
func gatherData(o *collOp, d0, s0 uint64, counts func(int) int, eager func(int) bool, skipWrites bool) error {
	t := o.t
	n := len(t.members)
	var atBuf [17]uint64
	at := atBuf[:1]
	for j := 0; j < n; j++ {
		at = append(at, 0)
		at[j+1] = at[j] + uint64(counts(j))
	}
	var buf []byte
	for k := 0; k < n; k++ {
		j := (t.me + k) % n
		size := counts(j)
		if size == 0 || skipWrites {
			continue
		}
		dst := d0 + at[j]
		var b []byte
		var err error
		switch {
		case j == t.me:
			if dst == s0 {
				continue
			}
			b, err = o.self(s0, size)
		case eager(j):
			b, err = o.payload(j, size)
		default:
			b, err = o.read(j, o.src(j), size, buf)
			if !o.mapped(j) {
				buf = b
			}
		}
		if err != nil {
			return err
		}
		if err := o.write(dst, b); err != nil {
			return err
		}
	}
	return o.doneAll(func(j int) bool { return j != t.me && !eager(j) }, func(j int) bool { return j != t.me && !eager(t.me) })
}

// AllToAll sends block j of src (count/NPEs elements; count is the source's length) to team PE
// j, where it lands as block i of dst, i being the sender.
func (t *Team) AllToAll(ctx context.Context, call string, kind Kind, dst, src uint64, count int) error {
	h := header{call: CallAllToAll, count: int64(count)}
	return t.allToAll(ctx, call, h, kind, dst, src, 1, 1, count/len(t.members))
}

// AllToAlls is AllToAll with strides, in elements: team PE i's element k of block j,
// src[(j*nelems+k)*srcStride], lands in team PE j's dst[(i*nelems+k)*dstStride].
func (t *Team) AllToAlls(ctx context.Context, call string, kind Kind, dst, src uint64, dstStride, srcStride, nelems int) error {
	// CallAllToAlls even at strides 1: its header carries the strides, which must agree.
	h := header{call: CallAllToAlls, count: int64(nelems)}
	return t.allToAll(ctx, call, h, kind, dst, src, dstStride, srcStride, nelems)
}

// allToAll runs AllToAll and AllToAlls; h has the call and its count.
func (t *Team) allToAll(ctx context.Context, call string, h header, kind Kind, d0, s0 uint64, dstStride, srcStride, nelems int) error {
	n := len(t.members)
	es := kind.Size()
	block := nelems * es
	strided := dstStride != 1 || srcStride != 1
	algo := t.pickMove(block)
	eager := algo == algoOneShot && block <= t.payloadCap()
	h.kind, h.algo, h.root, h.extra, h.word, h.word2 = kind, algo, int64(dstStride), int64(srcStride), s0, d0
	// block j of this PE's source, packed
	srcBlock := func(o *collOp, j int) ([]byte, error) {
		if block == 0 {
			return nil, nil
		}
		if !strided {
			return o.self(s0+uint64(j*block), block)
		}
		span := ((nelems-1)*srcStride + 1) * es
		b, err := o.self(s0+uint64(j*nelems*srcStride*es), span)
		if err != nil {
			return nil, err
		}
		return pack(b, es, srcStride, nelems), nil
	}
	var payload []byte
	var err error
	if eager && !strided {
		// the blocks lie one after the other in the source
		if payload, err = t.read(call, t.me, s0, n*block, nil); err != nil {
			return err
		}
	} else if eager {
		sel := &collOp{t: t, call: call}
		payload = t.scratch[:0]
		for j := 0; j < n; j++ {
			b, err := srcBlock(sel, j)
			if err != nil {
				return err
			}
			payload = append(payload, b...)
		}
		t.scratch = payload
	}
	o, err := t.start(ctx, call, h, payload, block)
	if err != nil {
		return err
	}
	var buf []byte
	for k := 0; k < n && block > 0; k++ {
		j := (t.me + k) % n
		var b []byte
		switch {
		case j == t.me:
			b, err = srcBlock(o, j)
		case eager:
			b, err = o.payload(j, block)
		case !strided:
			b, err = o.read(j, o.src(j)+uint64(t.me*block), block, buf)
			if !o.mapped(j) {
				buf = b
			}
		default:
			span := ((nelems-1)*srcStride + 1) * es
			if len(buf) < span {
				buf = make([]byte, span)
			}
			b, err = o.read(j, o.src(j)+uint64(t.me*nelems*srcStride*es), span, buf)
			if err == nil {
				b = pack(b, es, srcStride, nelems)
			}
		}
		if err != nil {
			return err
		}
		if !strided {
			err = o.write(d0+uint64(j*block), b)
		} else {
			err = o.writeStrided(d0+uint64(j*nelems*dstStride*es), b, es, dstStride)
		}
		if err != nil {
			return err
		}
	}
	if eager {
		return nil
	}
	return o.doneAll(func(j int) bool { return j != t.me }, func(j int) bool { return j != t.me })
}

// pack gathers n elements of es bytes, every stride elements, from b.
func pack(b []byte, es, stride, n int) []byte {
	out := make([]byte, n*es)
	for k := 0; k < n; k++ {
		copy(out[k*es:(k+1)*es], b[k*stride*es:])
	}
	return out
}

func (o *collOp) writeStrided(off uint64, packed []byte, es, stride int) error {
	n := len(packed) / es
	if n == 0 {
		return nil
	}
	if l := o.local(off, ((n-1)*stride+1)*es); l != nil {
		for k := 0; k < n; k++ {
			copy(l[k*stride*es:], packed[k*es:(k+1)*es])
		}
		return nil
	}
	for k := 0; k < n; k++ {
		if err := o.write(off+uint64(k*stride*es), packed[k*es:(k+1)*es]); err != nil {
			return err
		}
	}
	return nil
}
