// Package tp is a tensor-parallel GEMM with its communication fused in: each PE holds a slice of
// the reduction dimension (A_p is M x K, B_p is K x N, C = sum over PEs of A_p B_p), computes its
// partial C_p tile by tile on worker goroutines with gonum's BLAS, and pushes every tile to the PE
// that owns it with put-with-signal the moment the tile is done. The owner waits on the tile's
// signal, reduces the PEs' partials, and (all-reduce) pushes the sum to every PE, or
// (reduce-scatter) keeps it.
//
// Unfused runs the same GEMM code to the end first and then the same exchange as a separate step
// (a reduce-scatter + all-gather all-reduce over put-with-signal, chunked by tile), so that the
// two differ only in the fusion. UnfusedCollective is the other honest baseline: the same GEMM,
// then the runtime's own all-reduce collective (shmem.AllReduce) over the whole result. Which of
// the two unfused exchanges is faster depends on the network (on a rate-limited link between two
// hosts, tp's per-tile puts were; examples/gemm times both and compares against the faster).
//
// A step's buffers (the stage of this PE's partials, the landing slots, the sums) alternate
// between two halves from one step to the next, so that the Quiet that completes what a step
// pushed runs during the next step's GEMM rather than as a round trip at the end of each step.
//
// Tiles are TileM x TileN (the last row and column of tiles are smaller when M or N is not a
// multiple). All-reduce: tile t is owned by PE t mod NPEs (on 2 PEs, both PEs reduce every tile:
// see direct). Reduce-scatter: tile rows are split
// into NPEs contiguous blocks, PE p owning block p, so that each PE's result is a contiguous range
// of rows (Rows).
//
// Arithmetic: each tile is one blas32.Gemm call on the same sub-matrices in both variants, and a
// reduced tile is ((C_0 + C_1) + C_2) + ... in PE order, so Fused and Unfused agree bit for bit,
// in both ROX_ORDERING modes.
package tp

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/shmem"
)

// Op is the collective that follows the GEMM.
type Op int

const (
	AllReduce     Op = iota // every PE gets C
	ReduceScatter           // PE p gets its block of C's rows
)

func (o Op) String() string {
	if o == ReduceScatter {
		return "reduce-scatter"
	}
	return "all-reduce"
}

// Config is the GEMM's shape; every PE passes the same.
type Config struct {
	M, N, K      int // C is M x N; K is this PE's share of the reduction dimension
	TileM, TileN int // default 64 x 64
	Workers      int // goroutines computing tiles (default GOMAXPROCS)
	Op           Op
}

// GEMM holds the symmetric landing zones of one shape, allocated once.
type GEMM struct {
	w        *shmem.World
	cfg      Config
	me, npes int
	tm, tn   int // tiles down and across
	tiles    int
	slot     int // floats per tile slot (TileM*TileN)
	step     uint64

	part    shmem.Sym[float32] // [2][npes][tiles] slots: partial tiles pushed to their owner
	res     shmem.Sym[float32] // [2][tiles] slots: reduced tiles (all-reduce: pushed by their owner)
	partSig shmem.Sym[uint64]  // per tile: partials arrived (cumulative count)
	resSig  shmem.Sym[uint64]  // per tile: the step whose sum has arrived
	// Reduce-scatter: element p is the last step whose partials PE p has reduced; a PE pushes
	// the next step's partials to p only after that (an all-reduce needs no such signal: every PE
	// has received every sum of a step before it starts the next).
	ack   shmem.Sym[uint64]
	stage []float32 // this PE's partial tiles, [2][tiles] slots: stageSym's local view
	// The unfused all-reduce through the runtime's collective (UnfusedCollective): a half of the
	// stage is its source, sum its destination.
	stageSym, sum shmem.Sym[float32]
	// The half of stage, part and res that this step uses: a step's buffers are not written
	// again until two steps later, so the Quiet that lets this PE reuse what it pushed from runs
	// during the next step's GEMM (run), not at the end of each step.
	half int
	// computed[t] is the step whose partial of tile t is in the stage. The tile's signal says
	// so too, but it is an atomic in the symmetric heap, outside the Go memory model's view;
	// this one orders the computing worker's stores before the reducing goroutine's loads.
	computed []atomic.Uint64
	order    []int // the order in which the workers compute the tiles (see New)
	// The node chain (see chained): nodes of npn consecutive PEs, this PE on node node; chain
	// holds, per half and tile, the running sum this PE passes on to the next node.
	npn, node int
	chain     []float32

	last  Phases // of the last step
	start time.Time
	sent  atomic.Int64 // ns after start when the last push of this step was handed to the transport
}

// Phases are the times, from the start of a step (Fused or Unfused), at which this PE had
// computed its last tile, handed its last push to the transport, reduced its last owned tile and
// returned its result. Fused, the first three overlap; unfused they follow one another.
type Phases struct {
	Computed, Sent, Reduced, Done time.Duration
}

// New allocates the buffers (collective).
func New(w *shmem.World, cfg Config) (*GEMM, error) {
	if cfg.TileM == 0 {
		cfg.TileM = 64
	}
	if cfg.TileN == 0 {
		cfg.TileN = 64
	}
	if cfg.Workers == 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	me := w.MyPE()
	if d := w.Device().Driver; d != "host" {
		// The tiles are computed by gonum on the CPU, into and out of this PE's heap as the CPU
		// sees it; the GPU variant (a tiled kernel) is not written yet.
		return nil, &shmem.Error{Call: "tp.New", PE: me, Kind: device.ErrNotSupported,
			Detail: fmt.Sprintf("the %s backend: tp runs on the host backend only so far (ROX_DEVICE=host)", d)}
	}
	if cfg.M < 1 || cfg.N < 1 || cfg.K < 1 || cfg.TileM < 1 || cfg.TileN < 1 || cfg.Workers < 1 || (cfg.Op != AllReduce && cfg.Op != ReduceScatter) {
		return nil, &shmem.Error{Call: "tp.New", PE: me, Kind: shmem.ErrBadArgument, Detail: fmt.Sprintf("config %+v: want positive sizes and a known Op", cfg)}
	}
	g := &GEMM{w: w, cfg: cfg, me: me, npes: w.NPEs(),
		tm: (cfg.M + cfg.TileM - 1) / cfg.TileM, tn: (cfg.N + cfg.TileN - 1) / cfg.TileN, slot: cfg.TileM * cfg.TileN}
	g.tiles = g.tm * g.tn
	var err error
	if g.part, err = shmem.Alloc[float32](w, 2*g.npes*g.tiles*g.slot); err != nil {
		return nil, err
	}
	if g.res, err = shmem.Alloc[float32](w, 2*g.tiles*g.slot); err != nil {
		return nil, err
	}
	if g.partSig, err = shmem.Alloc[uint64](w, g.tiles); err != nil {
		return nil, err
	}
	if g.resSig, err = shmem.Alloc[uint64](w, g.tiles); err != nil {
		return nil, err
	}
	if g.ack, err = shmem.Alloc[uint64](w, g.npes); err != nil {
		return nil, err
	}
	if g.stageSym, err = shmem.Alloc[float32](w, 2*g.tiles*g.slot); err != nil {
		return nil, err
	}
	if g.sum, err = shmem.Alloc[float32](w, g.tiles*g.slot); err != nil {
		return nil, err
	}
	g.stage = g.stageSym.Local()
	g.computed = make([]atomic.Uint64, g.tiles)
	if err := g.nodes(); err != nil {
		return nil, err
	}
	g.chain = make([]float32, 2*g.tiles*g.slot)
	g.order = make([]int, g.tiles)
	for t := range g.order {
		g.order[t] = t
	}
	// The next PE's tiles first and this PE's own last: a partial that travels leaves early, so
	// its owner can reduce it and (all-reduce) send the sum back while later tiles are computed,
	// and the partials of this PE's own tiles have arrived by the time it computes them. The order
	// in which tiles are computed does not change their bits. Chained, every PE computes the
	// tiles in the same order, so that each tile's running sum can leave node 0 early.
	if !g.chained() {
		slices.SortStableFunc(g.order, func(x, y int) int {
			return (g.owner(x)-g.me-1+g.npes)%g.npes - (g.owner(y)-g.me-1+g.npes)%g.npes
		})
	}
	return g, nil
}

// nodes sets up the node chain when the PEs are on two or more nodes of npn >= 2 consecutive PEs
// each (every PE must agree: an all-reduce of this PE's view of its node).
func (g *GEMM) nodes() error {
	if g.cfg.Op != AllReduce || g.npes <= 2 {
		return nil
	}
	ts := g.w.TeamShared()
	l, first := ts.NPEs(), ts.WorldPE(0)
	ok := int64(1)
	for i := 0; i < l; i++ {
		if ts.WorldPE(i) != first+i {
			ok = 0
		}
	}
	if l < 2 || g.npes%l != 0 || first != g.me/l*l {
		ok = 0
	}
	src, err := shmem.Alloc[int64](g.w, 3)
	if err != nil {
		return err
	}
	dst, err := shmem.Alloc[int64](g.w, 3)
	if err != nil {
		return err
	}
	copy(src.Local(), []int64{int64(l), -int64(l), ok})
	err = shmem.AllReduce(context.Background(), g.w.TeamWorld(), dst, src, shmem.OpMin)
	v := slices.Clone(dst.Local())
	for _, m := range []shmem.Mem{dst.Mem(), src.Mem()} {
		if ferr := g.w.Free(m); err == nil {
			err = ferr
		}
	}
	if err != nil {
		return err
	}
	if v[0] == -v[1] && v[2] == 1 && int(v[0]) < g.npes {
		g.npn, g.node = l, g.me/l
	}
	return nil
}

// Free releases the buffers (collective), once what this PE pushed has landed.
func (g *GEMM) Free() error {
	if err := g.w.Quiet(); err != nil {
		return err
	}
	for _, m := range []shmem.Mem{g.sum.Mem(), g.stageSym.Mem(), g.ack.Mem(), g.resSig.Mem(), g.partSig.Mem(), g.res.Mem(), g.part.Mem()} {
		if err := g.w.Free(m); err != nil {
			return err
		}
	}
	return nil
}

// Rows returns the rows [r0, r1) of C that this PE's result holds.
func (g *GEMM) Rows() (r0, r1 int) {
	if g.cfg.Op == AllReduce {
		return 0, g.cfg.M
	}
	b0, b1 := g.rowBlock(g.me)
	return min(b0*g.cfg.TileM, g.cfg.M), min(b1*g.cfg.TileM, g.cfg.M)
}

// rowBlock returns the tile rows [b0, b1) that PE p owns in a reduce-scatter.
func (g *GEMM) rowBlock(p int) (int, int) { return p * g.tm / g.npes, (p + 1) * g.tm / g.npes }

func (g *GEMM) owner(t int) int {
	if g.direct() {
		return g.me
	}
	if g.chained() {
		return g.nodeOwner(g.node, t)
	}
	if g.cfg.Op == AllReduce {
		return t % g.npes
	}
	r := t / g.tn
	for p := 0; ; p++ {
		if _, b1 := g.rowBlock(p); r < b1 {
			return p
		}
	}
}

// chained reports whether the all-reduce runs as a chain of nodes: with the PEs on two or more
// nodes of npn >= 2 consecutive PEs each, tile t is reduced on every node by its node owner (the
// node's PE t mod npn): the node's PEs push their partials to it over load/store, the owner on
// node 0 sums them in PE order and passes the running sum to the owner on node 1, which adds its
// node's partials in PE order and passes it on; the last node's owner has the sum, in PE order
// as everywhere, and sends it to its node's PEs and to every other node's owner, which hands it
// to its own. Each tile crosses between nodes once as a running sum and once as the sum, against
// twice per PE of the other node when every PE reduces the tiles it owns.
func (g *GEMM) chained() bool { return g.npn > 0 }

// Scheme says how the PEs exchange the tiles: "direct" (2-PE all-reduce: both reduce every
// tile), "node chain" (chained) or "owners" (each tile reduced by its owner).
func (g *GEMM) Scheme() string {
	switch {
	case g.direct():
		return "direct"
	case g.chained():
		return fmt.Sprintf("node chain (%d nodes of %d PEs)", g.npes/g.npn, g.npn)
	}
	return "owners"
}

// nodeOwner returns the PE that reduces tile t on node nd (chained).
func (g *GEMM) nodeOwner(nd, t int) int { return nd*g.npn + t%g.npn }

// chainAt returns the index of tile t's running sum in this step's half of chain.
func (g *GEMM) chainAt(t int) int { return g.at(t) }

// extent returns tile t's first row and column and its size.
func (g *GEMM) extent(t int) (i0, j0, m, n int) {
	i0, j0 = t/g.tn*g.cfg.TileM, t%g.tn*g.cfg.TileN
	return i0, j0, min(g.cfg.TileM, g.cfg.M-i0), min(g.cfg.TileN, g.cfg.N-j0)
}

// LastPhases returns the phases of the last step (Fused or Unfused) on this PE.
func (g *GEMM) LastPhases() Phases { return g.last }

// markSent records that a push of this step has been handed to the transport.
func (g *GEMM) markSent() {
	d := int64(time.Since(g.start))
	for {
		o := g.sent.Load()
		if o >= d || g.sent.CompareAndSwap(o, d) {
			return
		}
	}
}

func (g *GEMM) check(call string, a, b []float32) error {
	c := g.cfg
	if len(a) != c.M*c.K || len(b) != c.K*c.N {
		return &shmem.Error{Call: call, PE: g.me, Kind: shmem.ErrBadArgument,
			Detail: fmt.Sprintf("a has %d elements and b %d, want M*K = %d*%d and K*N = %d*%d", len(a), len(b), c.M, c.K, c.K, c.N)}
	}
	return nil
}

// at returns the index of tile t's slot in this step's half of the stage or of res.
func (g *GEMM) at(t int) int { return (g.half*g.tiles + t) * g.slot }

// partAt returns the index of PE p's slot for tile t in this step's half of part.
func (g *GEMM) partAt(p, t int) int { return ((g.half*g.npes+p)*g.tiles + t) * g.slot }

// computeTile writes this PE's partial of tile t (a row-major m x n block) into its stage slot.
func (g *GEMM) computeTile(t int, a, b []float32) []float32 {
	c := g.cfg
	i0, j0, m, n := g.extent(t)
	out := g.stage[g.at(t) : g.at(t)+m*n]
	blas32.Gemm(blas.NoTrans, blas.NoTrans, 1,
		blas32.General{Rows: m, Cols: c.K, Stride: c.K, Data: a[i0*c.K:]},
		blas32.General{Rows: c.K, Cols: n, Stride: c.N, Data: b[j0:]},
		0, blas32.General{Rows: m, Cols: n, Stride: n, Data: out})
	g.computed[t].Store(g.step)
	return out
}

// send pushes this PE's partial of tile t to its owner; when that is this PE, the partial stays
// in the stage and only the tile's signal counts it.
func (g *GEMM) send(ctx context.Context, t int, tile []float32) error {
	if g.direct() {
		if err := g.push(ctx, t, tile, 1-g.me); err != nil {
			return err
		}
		return shmem.AtomicAdd(g.partSig, t, 1, g.me)
	}
	o := g.owner(t)
	if o == g.me {
		return shmem.AtomicAdd(g.partSig, t, 1, g.me)
	}
	return g.push(ctx, t, tile, o)
}

// push puts this PE's partial of tile t into o's landing slot for it.
func (g *GEMM) push(ctx context.Context, t int, tile []float32, o int) error {
	if g.cfg.Op == ReduceScatter || g.direct() {
		if _, err := shmem.SignalWaitUntil(ctx, g.ack, o, shmem.CmpGE, g.step-1); err != nil {
			return err
		}
	}
	err := shmem.PutSignalNBI(g.part, g.partAt(g.me, t), tile, g.partSig, t, 1, shmem.SignalAdd, o)
	g.markSent()
	return err
}

// direct reports whether the all-reduce is the 2-PE direct exchange: each PE pushes every partial
// tile to the other and both reduce every tile (in PE order, so both get the same bits). That
// moves the same bytes as reduce-scatter + all-gather with no reduction between a tile's two
// transfers, so the last tile's sum is ready one transfer after it is computed, not two.
func (g *GEMM) direct() bool { return g.cfg.Op == AllReduce && g.npes == 2 }

// reduce sums the PEs' partials of tile t (this PE owns it; they have all arrived) in PE order
// and, for an all-reduce, pushes the sum to every other PE.
func (g *GEMM) reduce(t int) error {
	for g.computed[t].Load() != g.step {
		runtime.Gosched() // in practice never waits: the tile's signal counted this PE's partial after the store
	}
	if g.chained() {
		return g.reduceChain(t)
	}
	_, _, m, n := g.extent(t)
	resLocal, partLocal := g.res.Local(), g.part.Local()
	sum := resLocal[g.at(t) : g.at(t)+m*n]
	for p := 0; p < g.npes; p++ {
		src := partLocal[g.partAt(p, t):]
		if p == g.me {
			src = g.stage[g.at(t):]
		}
		if p == 0 {
			copy(sum, src[:m*n])
			continue
		}
		for i := range sum {
			sum[i] += src[i]
		}
	}
	if g.cfg.Op == AllReduce && !g.direct() {
		for p := 0; p < g.npes; p++ {
			if p != g.me {
				if err := shmem.PutSignalNBI(g.res, g.at(t), sum, g.resSig, t, g.step, shmem.SignalSet, p); err != nil {
					return err
				}
				g.markSent()
			}
		}
	}
	return nil
}

// want returns the count an owned tile's signal reaches once this step's partials are in: every
// PE's, or (chained) its node's and the running sum from the node before.
func (g *GEMM) want() uint64 {
	if !g.chained() {
		return g.step * uint64(g.npes)
	}
	n := uint64(g.npn)
	if g.node > 0 {
		n++
	}
	return g.step * n
}

// reduceChain folds this node's partials of tile t into the running sum from the node before (on
// node 0: into the node's first partial), in PE order, and passes it on (chained).
func (g *GEMM) reduceChain(t int) error {
	_, _, m, n := g.extent(t)
	last := g.node == g.w.NPEs()/g.npn-1
	partLocal := g.part.Local()
	acc := g.chain[g.chainAt(t) : g.chainAt(t)+m*n]
	if last {
		acc = g.res.Local()[g.at(t) : g.at(t)+m*n]
	}
	first := g.node * g.npn
	src := func(p int) []float32 {
		if p == g.me {
			return g.stage[g.at(t):]
		}
		return partLocal[g.partAt(p, t):]
	}
	p0 := first
	if g.node == 0 {
		copy(acc, src(first)[:m*n])
		p0++
	} else {
		copy(acc, partLocal[g.partAt(g.nodeOwner(g.node-1, t), t):][:m*n])
	}
	for p := p0; p < first+g.npn; p++ {
		x := src(p)
		for i := range acc {
			acc[i] += x[i]
		}
	}
	if !last {
		// Into the next node's owner's landing slot of this PE, which no other PE writes.
		err := shmem.PutSignalNBI(g.part, g.partAt(g.me, t), acc, g.partSig, t, 1, shmem.SignalAdd, g.nodeOwner(g.node+1, t))
		g.markSent()
		return err
	}
	for nd := 0; nd < g.w.NPEs()/g.npn; nd++ {
		for i := 0; i < g.npn; i++ {
			q := nd*g.npn + i
			// The last node's PEs and every other node's owner; those owners hand it on (gather).
			if q == g.me || (nd != g.node && q != g.nodeOwner(nd, t)) {
				continue
			}
			if err := shmem.PutSignalNBI(g.res, g.at(t), acc, g.resSig, t, g.step, shmem.SignalSet, q); err != nil {
				return err
			}
			g.markSent()
		}
	}
	return nil
}

// owned returns the tiles this PE reduces, in order.
func (g *GEMM) owned() []int {
	var o []int
	for t := 0; t < g.tiles; t++ {
		if g.owner(t) == g.me {
			o = append(o, t)
		}
	}
	return o
}

// run computes every tile on the workers, in tile order. Fused (push), each computed tile goes
// to a sender goroutine that pushes it (a put on a NIC path may block until the link takes it,
// and a worker must not wait for the link), and a worker, before taking the next tile, reduces
// the next owned tile whose partials have all arrived; once no tile is left to compute, the
// workers wait for and reduce the rest. No goroutine spins while there is a tile to compute: a
// spinning wait would take a core from the GEMM. Unfused, the workers only compute.
func (g *GEMM) run(ctx context.Context, a, b []float32, push bool) error {
	var next, red atomic.Int64
	owned := g.owned()
	tryReduce := func() error {
		i := red.Load()
		if i >= int64(len(owned)) {
			return nil
		}
		ok, err := shmem.Test(g.partSig, owned[i], shmem.CmpGE, g.want())
		if err != nil || !ok || !red.CompareAndSwap(i, i+1) {
			return err
		}
		return g.reduce(owned[i])
	}
	var wg, computing sync.WaitGroup
	errs := make([]error, g.cfg.Workers+2)
	computed := make([]time.Time, g.cfg.Workers)
	defer func() {
		var last time.Time
		for _, c := range computed {
			if c.After(last) {
				last = c
			}
		}
		g.last.Computed = last.Sub(g.start)
	}()
	computing.Add(g.cfg.Workers) // before the closer below can wait on it
	// What this PE pushed in the last step came from (and went to) the other half of the
	// buffers, which the next step writes: complete it now, while this step's GEMM runs, rather
	// than with a round trip at the end of every step.
	wg.Add(1)
	go func() { defer wg.Done(); errs[g.cfg.Workers+1] = g.w.Quiet() }()
	var sendq chan int
	if push {
		sendq = make(chan int, g.tiles)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range sendq {
				if errs[g.cfg.Workers] != nil {
					continue // drain: the workers must not block on a full queue
				}
				_, _, m, n := g.extent(t)
				errs[g.cfg.Workers] = g.send(ctx, t, g.stage[g.at(t):g.at(t)+m*n])
			}
		}()
		go func() { computing.Wait(); close(sendq) }()
	}
	for wk := 0; wk < g.cfg.Workers; wk++ {
		wg.Add(1)
		go func(wk int) {
			defer wg.Done()
			done := false
			finish := func() {
				if !done {
					done = true
					computed[wk] = time.Now()
					computing.Done()
				}
			}
			defer finish()
			for {
				if push {
					if err := tryReduce(); err != nil {
						errs[wk] = err
						return
					}
				}
				i := int(next.Add(1) - 1)
				if i >= g.tiles {
					break
				}
				t := g.order[i]
				g.computeTile(t, a, b)
				if push {
					sendq <- t
					// Let the sender and the transport's goroutines (a NIC path's receiver,
					// applying the peers' tiles) run now rather than at the next preemption.
					runtime.Gosched()
				}
			}
			finish()
			for push {
				i := red.Add(1) - 1
				if i >= int64(len(owned)) {
					return
				}
				if _, err := shmem.SignalWaitUntil(ctx, g.partSig, owned[i], shmem.CmpGE, g.want()); err != nil {
					errs[wk] = fmt.Errorf("tile %d: %w", owned[i], err)
					return
				}
				if err := g.reduce(owned[i]); err != nil {
					errs[wk] = err
					return
				}
			}
		}(wk)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// gather waits for the sums of this PE's rows that other PEs own and returns its result,
// row-major; the reduce-scatter tells every PE that its partials of this step are consumed.
func (g *GEMM) gather(ctx context.Context, call string) ([]float32, error) {
	c := g.cfg
	if c.Op == ReduceScatter || g.direct() {
		for p := 0; p < g.npes; p++ {
			if err := shmem.AtomicSet(g.ack, g.me, g.step, p); err != nil {
				return nil, fmt.Errorf("%s: %w", call, err)
			}
		}
	}
	resLocal := g.res.Local()
	r0, r1 := g.Rows()
	out := make([]float32, (r1-r0)*c.N)
	for t := 0; t < g.tiles; t++ {
		i0, j0, m, n := g.extent(t)
		if i0 < r0 || i0 >= r1 {
			continue
		}
		last := g.chained() && g.node == g.npes/g.npn-1
		if g.owner(t) != g.me || (g.chained() && !last) {
			if _, err := shmem.SignalWaitUntil(ctx, g.resSig, t, shmem.CmpGE, g.step); err != nil {
				return nil, fmt.Errorf("%s: tile %d from PE %d: %w", call, t, g.owner(t), err)
			}
		}
		if g.chained() && !last && g.owner(t) == g.me {
			// The sum came from the last node to this node's owner of the tile: hand it on.
			for q := g.node * g.npn; q < (g.node+1)*g.npn; q++ {
				if q != g.me {
					if err := shmem.PutSignalNBI(g.res, g.at(t), resLocal[g.at(t):g.at(t)+m*n], g.resSig, t, g.step, shmem.SignalSet, q); err != nil {
						return nil, fmt.Errorf("%s: %w", call, err)
					}
				}
			}
		}
		tile := resLocal[g.at(t):]
		for i := 0; i < m; i++ {
			copy(out[(i0-r0+i)*c.N+j0:(i0-r0+i)*c.N+j0+n], tile[i*n:(i+1)*n])
		}
	}
	return out, nil
}

// Fused computes C = sum over PEs of a b (a: M x K, b: K x N, row-major, this PE's slices) and
// returns this PE's result (Rows of C, row-major), pushing each tile as soon as it is computed.
// Collective.
func (g *GEMM) Fused(ctx context.Context, a, b []float32) ([]float32, error) {
	if err := g.check("tp.Fused", a, b); err != nil {
		return nil, err
	}
	g.begin(true)
	if err := g.run(ctx, a, b, true); err != nil {
		return nil, fmt.Errorf("tp.Fused: %w", err)
	}
	g.last.Reduced = time.Since(g.start)
	out, err := g.gather(ctx, "tp.Fused")
	g.end()
	return out, err
}

// begin starts a step; exchange says that it is one of tp's exchanges, whose signals count
// steps (cumulative), so that it takes the next step number.
func (g *GEMM) begin(exchange bool) {
	if exchange {
		g.step++
		g.half = int(g.step % 2)
	} else {
		// The other half than the last exchange's: the one whose pushes have been quieted.
		g.half = int(g.step+1) % 2
	}
	g.start = time.Now()
	g.sent.Store(0)
}

// end records the step's last phases.
func (g *GEMM) end() {
	g.last.Done = time.Since(g.start)
	g.last.Sent = time.Duration(g.sent.Load())
}

// Unfused computes the same result as Fused, the whole GEMM first and then the exchange: every
// partial tile to its owner, each owned tile reduced once its partials are in (and, all-reduce,
// pushed to every PE), then the gather.
func (g *GEMM) Unfused(ctx context.Context, a, b []float32) ([]float32, error) {
	if err := g.check("tp.Unfused", a, b); err != nil {
		return nil, err
	}
	g.begin(true)
	if err := g.run(ctx, a, b, false); err != nil {
		return nil, fmt.Errorf("tp.Unfused: %w", err)
	}
	for t := 0; t < g.tiles; t++ {
		_, _, m, n := g.extent(t)
		if err := g.send(ctx, t, g.stage[g.at(t):g.at(t)+m*n]); err != nil {
			return nil, fmt.Errorf("tp.Unfused: %w", err)
		}
	}
	for _, t := range g.owned() {
		if _, err := shmem.SignalWaitUntil(ctx, g.partSig, t, shmem.CmpGE, g.want()); err != nil {
			return nil, fmt.Errorf("tp.Unfused: tile %d: %w", t, err)
		}
		if err := g.reduce(t); err != nil {
			return nil, fmt.Errorf("tp.Unfused: %w", err)
		}
	}
	g.last.Reduced = time.Since(g.start)
	out, err := g.gather(ctx, "tp.Unfused")
	g.end()
	return out, err
}

// UnfusedCollective computes the same all-reduce as Unfused with the runtime's own collective
// for the exchange: the same GEMM into the stage, then shmem.AllReduce of the whole stage over
// the world team (the runtime picks its algorithm: one-shot, two-shot, ring or hierarchical
// across nodes). Every algorithm reduces in PE order, so the result is Fused's bits. All-reduce
// only.
func (g *GEMM) UnfusedCollective(ctx context.Context, a, b []float32) ([]float32, error) {
	const call = "tp.UnfusedCollective"
	if err := g.check(call, a, b); err != nil {
		return nil, err
	}
	if g.cfg.Op != AllReduce {
		return nil, &shmem.Error{Call: call, PE: g.me, Kind: shmem.ErrBadArgument, Detail: fmt.Sprintf("op %v: the collective variant is an all-reduce", g.cfg.Op)}
	}
	g.begin(false)
	if err := g.run(ctx, a, b, false); err != nil {
		return nil, fmt.Errorf("%s: %w", call, err)
	}
	src, err := g.stageSym.Slice(g.half*g.tiles*g.slot, g.tiles*g.slot)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", call, err)
	}
	if err := shmem.AllReduce(ctx, g.w.TeamWorld(), g.sum, src, shmem.OpSum); err != nil {
		return nil, fmt.Errorf("%s: %w", call, err)
	}
	g.last.Sent = time.Since(g.start) // the collective returns with its puts done
	g.last.Reduced = g.last.Sent
	c := g.cfg
	out := make([]float32, c.M*c.N)
	sum := g.sum.Local()
	for t := 0; t < g.tiles; t++ {
		i0, j0, m, n := g.extent(t)
		for i := 0; i < m; i++ {
			copy(out[(i0+i)*c.N+j0:(i0+i)*c.N+j0+n], sum[t*g.slot+i*n:t*g.slot+(i+1)*n])
		}
	}
	g.last.Done = time.Since(g.start)
	return out, nil
}
