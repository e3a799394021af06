package coll

import (
	"context"
	"unsafe"
)

// AllReduce reduces count elements of kind at src over the team with op and leaves the result at
// dst on every member. The result is the same bits on every PE whatever the algorithm: see
// reducer for the order.
func (t *Team) AllReduce(ctx context.Context, call string, kind Kind, op Op, dst, src uint64, count int) error {
	r := newReducer(kind, op)
	size := count * r.es
	algo := t.pickReduce(size, size)
	h := header{call: CallAllReduce, kind: kind, op: op, count: int64(count), algo: algo, word: src, word2: dst}
	switch algo {
	case algoRing, algoHier:
		return t.chainReduce(ctx, call, h, r, dst, src, count, algo == algoHier)
	case algoTwoShot:
		return t.twoShot(ctx, call, h, r, dst, src, count)
	}
	return t.oneShot(ctx, call, h, r, dst, src, count)
}

// ReduceScatter reduces src (NPEs blocks of count elements) over the team with op; team PE i gets
// the reduction of block i at dst (count elements).
func (t *Team) ReduceScatter(ctx context.Context, call string, kind Kind, op Op, dst, src uint64, count int) error {
	r := newReducer(kind, op)
	n := len(t.members)
	es := r.es
	block := count * es
	algo := t.pickMove(block)
	eager := algo == algoOneShot && block <= t.payloadCap()
	h := header{call: CallReduceScatter, kind: kind, op: op, count: int64(count), algo: algo, word: src, word2: dst}
	o, err := t.startEager(ctx, call, h, eager, src, n*block, block)
	if err != nil {
		return err
	}
	// Nobody else reads block me of this PE's source: the fold goes straight into the destination.
	out := o.local(dst, block)
	if out == nil {
		out = make([]byte, block)
	}
	lo := t.me * count
	in := o.inputs(src, es, lo, lo+count, eager)
	if err := foldAll(r, n, lo, lo+count, &in, out); err != nil {
		return err
	}
	// Nobody else reads block me of this PE's source: the destination may be written now.
	if err := o.write(dst, out); err != nil {
		return err
	}
	if eager {
		return nil
	}
	return o.doneAll(func(j int) bool { return j != t.me }, func(j int) bool { return j != t.me })
}

// reduceBlock is how many elements a fold handles at a time (its accumulator stays in cache).
const reduceBlock = 4096

// foldAll reduces elements [lo, hi) of every team PE's input into dst (bytes for hi-lo elements),
// in team PE order: block by block, acc = x_0, then acc = acc op x_j for j = 1..n-1, then dst =
// acc. The accumulator is the destination block itself where the element is its own accumulator
// and no input shares a byte with that block, else the team's reusable accumulator block.
func foldAll(r reducer, n, lo, hi int, in *foldIn, dst []byte) error {
	t := in.op.t
	if need := min(hi-lo, reduceBlock) * r.as; cap(t.acc) < need {
		t.acc = make([]byte, need)
	}
	var xsBuf [16][]byte
	xs := xsBuf[:0]
	for j := 0; j < n; j++ {
		xs = append(xs, nil)
	}
	for b := lo; b < hi; b += reduceBlock {
		e := min(b+reduceBlock, hi)
		d := dst[(b-lo)*r.es : (e-lo)*r.es]
		direct := r.as == r.es
		for j := 0; j < n; j++ {
			x, err := in.get(j, b, e)
			if err != nil {
				return err
			}
			xs[j] = x
			if direct && sharesByte(d, x) {
				direct = false
			}
		}
		a := t.acc[:(e-b)*r.as]
		if direct {
			a = d
		}
		r.start(a, xs[0])
		for j := 1; j < n; j++ {
			r.fold(a, xs[j], false)
		}
		if !direct {
			r.finalize(d, a)
		}
	}
	return nil
}

// sharesByte says whether a and b overlap in memory.
func sharesByte(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}

// foldIn is where foldAll finds each PE's elements: each PE's source at s0 (views where mapped,
// one copy per remote PE otherwise, fetched whole on first use for the range [lo, hi)), or, for
// an eager call, what the other PEs sent in the header exchange.
type foldIn struct {
	op     *collOp
	s0     uint64
	es     int
	lo, hi int
	eager  bool
	cache  [][]byte
}

func (o *collOp) inputs(s0 uint64, es, lo, hi int, eager bool) foldIn {
	t := o.t
	n := len(t.members)
	if cap(t.ins) < n {
		t.ins = make([][]byte, n)
	}
	cache := t.ins[:n]
	clear(cache)
	return foldIn{op: o, s0: s0, es: es, lo: lo, hi: hi, eager: eager, cache: cache}
}

func (f *foldIn) get(j, b, e int) ([]byte, error) {
	o, es, lo, hi := f.op, f.es, f.lo, f.hi
	if f.cache[j] == nil && hi > lo {
		var err error
		if f.eager && j != o.t.me {
			f.cache[j], err = o.payload(j, (hi-lo)*es)
		} else {
			f.cache[j], err = o.read(j, o.src(j)+uint64(lo*es), (hi-lo)*es, nil)
		}
		if err != nil {
			return nil, err
		}
	}
	return f.cache[j][(b-lo)*es : (e-lo)*es], nil
}

// oneShot: every PE reduces every element; eager when the input fits a scratch region.
func (t *Team) oneShot(ctx context.Context, call string, h header, r reducer, d0, s0 uint64, count int) error {
	size := count * r.es
	eager := size <= t.payloadCap()
	o, err := t.startEager(ctx, call, h, eager, s0, size, 0)
	if err != nil {
		return err
	}
	// Block by block, each block's inputs are read before its result is written, so an eager call
	// (nobody else reads this PE's source) folds straight into the destination, in place or not.
	out := o.local(d0, size)
	if out == nil || !eager {
		out = make([]byte, size)
	}
	in := o.inputs(s0, r.es, 0, count, eager)
	if err := foldAll(r, len(t.members), 0, count, &in, out); err != nil {
		return err
	}
	if !eager {
		// In place, others may still be reading this PE's source.
		if err := o.doneAll(func(j int) bool { return j != t.me }, func(j int) bool { return j != t.me }); err != nil {
			return err
		}
	}
	return o.write(d0, out)
}

// chunk returns team PE c's share [lo, hi) of count elements.
func chunk(count, n, c int) (int, int) {
	return c * count / n, (c + 1) * count / n
}

// twoShot: PE c reduces chunk c reading every PE's source, then every PE reads the reduced chunks
// from their owners' destinations.
func (t *Team) twoShot(ctx context.Context, call string, h header, r reducer, d0, s0 uint64, count int) error {
	o, err := t.start(ctx, call, h, nil, 0)
	if err != nil {
		return err
	}
	n := len(t.members)
	lo, hi := chunk(count, n, t.me)
	// In place, chunk me of this PE's source is read by this PE alone, block by block before each
	// block's result is written: the fold may go straight into the destination.
	out := o.local(d0+uint64(lo*r.es), (hi-lo)*r.es)
	if out == nil {
		out = make([]byte, (hi-lo)*r.es)
	}
	in := o.inputs(s0, r.es, lo, hi, false)
	if err := foldAll(r, n, lo, hi, &in, out); err != nil {
		return err
	}
	if err := o.write(d0+uint64(lo*r.es), out); err != nil {
		return err
	}
	for k := 1; k < n; k++ {
		if err := o.signal(sigPhase, (t.me+k)%n); err != nil {
			return err
		}
	}
	var buf []byte
	for k := 1; k < n; k++ {
		c := (t.me + k) % n
		// Its owner has reduced chunk c (and so has read this PE's chunk c of the source).
		if err := o.wait(sigPhase, c, "reduce its chunk"); err != nil {
			return err
		}
		clo, chi := chunk(count, n, c)
		size := (chi - clo) * r.es
		b, err := o.read(c, o.dst(c)+uint64(clo*r.es), size, buf)
		if err != nil {
			return err
		}
		if !o.mapped(c) {
			buf = b
		}
		if err := o.write(d0+uint64(clo*r.es), b); err != nil {
			return err
		}
	}
	return o.doneAll(func(j int) bool { return j != t.me }, func(j int) bool { return j != t.me })
}
