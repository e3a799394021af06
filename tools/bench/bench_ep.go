package bench

// The workload rows of the host suite: expert-parallel dispatch and combine (shmem/ep) in both
// modes, and the tensor-parallel GEMM with its all-reduce fused in or after it (shmem/tp).
// `--compare mpi-ep` runs the same exchange with MPI_Alltoall + MPI_Alltoallv
// (tools/compare/c/mpi_ep_bench.c) over the same routings.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
	"github.com/roxamen/roxamen/shmem/tp"
	"github.com/roxamen/roxamen/tools/compare"
)

func init() {
	hostBench = append(hostBench,
		benchSection{rows: epRows, run: benchEP},
		benchSection{rows: gemmRows, run: benchGEMM})
	// The combine's arithmetic is vectorized on both sides: shmem/ep's loops are AVX2 where the
	// processor has it, so the C loops are compiled for this processor too (at -O2 GCC uses 4
	// lanes of SSE2), without contracting a multiply and an add into a fused one (shmem/ep
	// rounds each), so that the comparison is of the exchange, not of the compilers.
	comparisons["mpi-ep"] = comparison{name: "mpi-ep", source: compare.MPIEP, compiler: "mpicc",
		launcher: []string{"mpirun", "--oversubscribe", "--bind-to", "none"}, packages: "openmpi-bin and libopenmpi-dev",
		cflags: []string{"-O3", "-march=native", "-ffp-contract=off"}}
}

// epShape is one benchmarked dispatch/combine: DeepSeek-V3's decode shape for low latency
// (128 tokens of 7168 bf16, top-8) and a prefill-like one for normal mode that fits the host
// backend's default 64 MiB heap at 8 PEs beside the suite's own buffers (1024 tokens of 1024).
// 16 experts per PE. calls is the number of dispatch+combine pairs per round.
type epShape struct {
	dispatch, combine string
	mode              ep.Mode
	tokens, hidden    int
	calls             int
}

var epShapes = []epShape{
	{"ep_dispatch_ll", "ep_combine_ll", ep.LowLatency, 128, 7168, 20},
	{"ep_dispatch", "ep_combine", ep.Normal, 1024, 1024, 5},
}

const (
	epTopK          = 8
	epExpertsPerPE  = 16
	gemmM, gemmN    = 512, 512
	gemmK           = 256 // per PE
	gemmTile        = 128
	gemmStepsARound = 3
)

func epRows(int) []benchKey {
	var k []benchKey
	for _, s := range epShapes {
		k = append(k, benchKey{s.dispatch, s.tokens * s.hidden * 2}, benchKey{s.combine, s.tokens * s.hidden * 2})
	}
	return k
}

func gemmRows(int) []benchKey {
	return []benchKey{{"gemm_allreduce_fused", gemmM * gemmN * 4}, {"gemm_allreduce_unfused", gemmM * gemmN * 4}}
}

// epRNG is splitmix64, the generator mpi_ep_bench.c uses too, so that both sides route alike.
type epRNG uint64

func (s *epRNG) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// epInput is PE me's routing: uneven token counts (PE p has tokens - p*tokens/(2*npes)) and
// experts drawn half the time from the first half of the experts (whose PEs then receive more),
// top-k distinct.
func epInput(s epShape, me, npes int) (ep.Tokens, []int64, []float32) {
	E := epExpertsPerPE * npes
	n := s.tokens - me*s.tokens/(2*npes)
	rng := epRNG(0x5eed0000 + uint64(me)*0x10001)
	x := make([]shmem.BFloat16, n*s.hidden)
	for i := range x {
		x[i] = shmem.BFloat16(rng.next() >> 48)
	}
	idx := make([]int64, n*epTopK)
	w := make([]float32, n*epTopK)
	for t := 0; t < n; t++ {
		for k := 0; k < epTopK; k++ {
			var e int64
			for {
				r := rng.next()
				if r&1 == 1 {
					e = int64((r >> 1) % uint64(E/2))
				} else {
					e = int64((r >> 1) % uint64(E))
				}
				dup := false
				for j := 0; j < k; j++ {
					dup = dup || idx[t*epTopK+j] == e
				}
				if !dup {
					break
				}
			}
			idx[t*epTopK+k] = e
			w[t*epTopK+k] = float32(rng.next()>>40) / float32(1<<24)
		}
	}
	return ep.Tokens{BF16: x}, idx, w
}

// benchEP: per shape, rounds of calls dispatch+combine pairs back to back (the experts' output
// is the received rows themselves); a row's latency is the mean time of one call in a round
// (median over rounds, PE 0's clock), its bandwidth PE 0's payload bytes sent per call (tokens
// times the PEs they go to, or the partial sums going back) over that time.
func benchEP(b *benchEnv) error {
	for _, s := range epShapes {
		if !b.want(s.dispatch) && !b.want(s.combine) {
			continue
		}
		cfg := ep.Config{Hidden: s.hidden, TopK: epTopK, Experts: epExpertsPerPE * b.npes, MaxTokens: s.tokens, DType: ep.DTypeBF16, Mode: s.mode}
		buf, err := ep.New(b.w, cfg)
		if err != nil {
			return err
		}
		x, idx, w := epInput(s, b.me, b.npes)
		if err := b.running(s.dispatch, s.tokens*s.hidden*2); err != nil {
			return err
		}
		if err := b.settle(); err != nil {
			return err
		}
		var dper, cper []float64
		var sent, back int
		// Each call reuses the previous one's received rows and output (DispatchInto,
		// CombineInto), as the MPI program reuses its buffers: the rows time the exchange, not
		// the allocation and first touch of a fresh matrix per call.
		var recv *ep.Recv
		var out ep.Tokens
		for r := -1; r < b.rounds; r++ {
			calls := s.calls
			if r < 0 {
				calls = 1
			}
			var td, tc time.Duration
			for c := 0; c < calls; c++ {
				t0 := time.Now()
				var h *ep.Handle
				var err error
				if recv, h, err = buf.DispatchInto(b.ctx, recv, x, idx, w); err != nil {
					return err
				}
				t1 := time.Now()
				if out, err = buf.CombineInto(b.ctx, out, recv.X, h); err != nil {
					return err
				}
				td, tc = td+t1.Sub(t0), tc+time.Since(t1)
				if r < 0 {
					sent, back = 0, 0
					for d := 0; d < b.npes; d++ {
						sent += sentTo(idx, d, epExpertsPerPE)
					}
					for _, n := range recv.Transfers {
						back += n
					}
				}
			}
			if r >= 0 {
				dper = append(dper, us(td)/float64(calls))
				cper = append(cper, us(tc)/float64(calls))
			}
		}
		pay := s.hidden * 2
		if b.want(s.dispatch) {
			if err := b.emit(s.dispatch, s.tokens*pay, dper, sent*pay); err != nil {
				return err
			}
		}
		if b.want(s.combine) {
			if err := b.running(s.combine, s.tokens*pay); err != nil {
				return err
			}
			if err := b.emit(s.combine, s.tokens*pay, cper, back*pay); err != nil {
				return err
			}
		}
		if err := buf.Free(); err != nil {
			return err
		}
	}
	return nil
}

// sentTo counts the tokens of idx with an expert on PE d (experts per PE local).
func sentTo(idx []int64, d, local int) int {
	n := 0
	for t := 0; t < len(idx)/epTopK; t++ {
		for _, e := range idx[t*epTopK : (t+1)*epTopK] {
			if e >= 0 && int(e)/local == d {
				n++
				break
			}
		}
	}
	return n
}

// benchGEMM: rounds of gemmStepsARound steps of each variant, alternating, each step from one
// barrier to the next (every PE has its result); time per step, PE 0's clock.
func benchGEMM(b *benchEnv) error {
	if !b.want("gemm_allreduce_fused") && !b.want("gemm_allreduce_unfused") {
		return nil
	}
	// As examples/gemm: one more P than workers, so that the network poller runs while tiles are
	// computed (see there).
	workers := runtime.NumCPU()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(workers + 1))
	g, err := tp.New(b.w, tp.Config{M: gemmM, N: gemmN, K: gemmK, TileM: gemmTile, TileN: gemmTile, Workers: workers})
	if err != nil {
		return err
	}
	rng := epRNG(0x6e33 + uint64(b.me))
	a, bm := make([]float32, gemmM*gemmK), make([]float32, gemmK*gemmN)
	for i := range a {
		a[i] = float32(rng.next()>>40)/float32(1<<24) - 0.5
	}
	for i := range bm {
		bm[i] = float32(rng.next()>>40)/float32(1<<24) - 0.5
	}
	if err := b.running("gemm_allreduce_fused", gemmM*gemmN*4); err != nil {
		return err
	}
	if err := b.settle(); err != nil {
		return err
	}
	var fper, uper []float64
	for r := -1; r < b.rounds; r++ {
		for _, fused := range []bool{true, false} {
			run := g.Unfused
			if fused {
				run = g.Fused
			}
			var total time.Duration
			for s := 0; s < gemmStepsARound; s++ {
				if err := b.w.BarrierAll(b.ctx); err != nil {
					return err
				}
				t0 := time.Now()
				if _, err := run(b.ctx, a, bm); err != nil {
					return err
				}
				if err := b.w.BarrierAll(b.ctx); err != nil {
					return err
				}
				total += time.Since(t0)
			}
			if r < 0 {
				continue
			}
			if fused {
				fper = append(fper, us(total)/gemmStepsARound)
			} else {
				uper = append(uper, us(total)/gemmStepsARound)
			}
		}
	}
	if b.want("gemm_allreduce_fused") {
		if err := b.emit("gemm_allreduce_fused", gemmM*gemmN*4, fper, 0); err != nil {
			return err
		}
	}
	if b.want("gemm_allreduce_unfused") {
		if err := b.running("gemm_allreduce_unfused", gemmM*gemmN*4); err != nil {
			return err
		}
		if err := b.emit("gemm_allreduce_unfused", gemmM*gemmN*4, uper, 0); err != nil {
			return err
		}
	}
	return g.Free()
}

// gpuEPShapes are the GPU suite's ep rows: DeepSeek-V3's shape (hidden 7168, top-8, 256 experts,
// bf16) in both modes, low latency at 128 tokens per PE (decode) and normal at 4096 (prefill).
var gpuEPShapes = []epShape{
	{"ep_dispatch_ll", "ep_combine_ll", ep.LowLatency, 128, 7168, 0},
	{"ep_dispatch", "ep_combine", ep.Normal, 4096, 7168, 0},
}

const gpuEPExperts = 256

// gpuEPInput is PE me's input for the GPU rows: tokens of bf16 values near 1 in magnitude, and
// each token's top-8 experts drawn uniformly without repeats from the 256 (gpuEPRouting).
func gpuEPInput(s epShape, me int) (x []byte, idx []int64, w []float32) {
	rng := epRNG(0x7e0000 + uint64(me)*0x10001)
	x = make([]byte, s.tokens*s.hidden*2)
	for i := 0; i+1 < len(x); i += 2 {
		v := rng.next()
		x[i], x[i+1] = byte(v), 0x3f|byte(v>>8)&0x80 // a sign, exponent 126, a random mantissa
	}
	idx, w = gpuEPRouting(s, me)
	return x, idx, w
}

// gpuEPRouting is PE me's routing alone (seeded per PE), so that every PE can count what the
// others send it.
func gpuEPRouting(s epShape, me int) ([]int64, []float32) {
	rng := epRNG(0x9e0000 + uint64(me)*0x10001)
	idx := make([]int64, s.tokens*epTopK)
	w := make([]float32, s.tokens*epTopK)
	for t := 0; t < s.tokens; t++ {
		for k := 0; k < epTopK; k++ {
			for {
				e := int64(rng.next() % gpuEPExperts)
				dup := false
				for j := 0; j < k; j++ {
					dup = dup || idx[t*epTopK+j] == e
				}
				if !dup {
					idx[t*epTopK+k] = e
					break
				}
			}
			w[t*epTopK+k] = 1.0 / epTopK
		}
	}
	return idx, w
}

// runGPUEP measures the ep rows on module mod's stream (device events around each call). putBW
// gives the 32-block put bandwidth measured for a size (0 if none), handoff the one-way flag
// latency measured (0 if none). hbm is called after each buffer is made.
func runGPUEP(ctx context.Context, w *shmem.World, mod *shmem.Module, rounds int, want func(string) bool, asked bool, putBW func(size int) float64, handoff float64,
	hbm func(string) error, enc *json.Encoder) error {
	me, npes := w.MyPE(), w.NPEs()
	heap := int64(1 << 30) // a GPU World's default
	if env.HeapSize.IsSet() {
		heap, _ = env.HeapSize.Size()
	}
	for _, s := range gpuEPShapes {
		if !want(s.dispatch) && !want(s.combine) {
			continue
		}
		cfg := ep.Config{Hidden: s.hidden, TopK: epTopK, Experts: gpuEPExperts, MaxTokens: s.tokens, DType: ep.DTypeBF16, Mode: s.mode}
		// the buffer, the inputs, and room for the suite's own words
		if need := ep.DeviceHeapBytes(cfg, npes) + int64(s.tokens*(s.hidden*2+epTopK*12)) + 64<<20; need > heap {
			if asked {
				return fmt.Errorf("%s: %d tokens of %d at %d PEs need a symmetric heap of %d MiB; ROX_HEAP_SIZE is %d MiB", s.dispatch, s.tokens, s.hidden, npes, need>>20, heap>>20)
			}
			if me == 0 {
				fmt.Fprintf(os.Stderr, "bench: %s and %s skipped: they need ROX_HEAP_SIZE of at least %d MiB (it is %d MiB)\n", s.dispatch, s.combine, need>>20, heap>>20)
			}
			continue
		}
		buf, err := ep.New(w, cfg)
		if err != nil {
			return err
		}
		if err := hbm("hbm_after_" + s.dispatch); err != nil {
			return err
		}
		x, idx, wt := gpuEPInput(s, me)
		xs, err := shmem.Alloc[byte](w, len(x))
		if err != nil {
			return err
		}
		is, err := shmem.Alloc[int64](w, len(idx))
		if err != nil {
			return err
		}
		ws, err := shmem.Alloc[float32](w, len(wt))
		if err != nil {
			return err
		}
		if err := xs.Put(0, x, me); err != nil {
			return err
		}
		if err := is.Put(0, idx, me); err != nil {
			return err
		}
		if err := ws.Put(0, wt, me); err != nil {
			return err
		}
		sent := 0
		for d := 0; d < npes; d++ {
			sent += sentTo(idx, d, gpuEPExperts/npes)
		}
		// The combine returns one row per token and PE that the dispatch brought here.
		back := 0
		for p := 0; p < npes; p++ {
			pidx, _ := gpuEPRouting(s, p)
			back += sentTo(pidx, me, gpuEPExperts/npes)
		}
		var dper, cper []float64
		for r := -1; r < rounds; r++ {
			if err := w.BarrierAll(ctx); err != nil {
				return err
			}
			var recv *ep.DeviceRecv
			var h *ep.Handle
			dd, err := mod.Elapsed(ctx, func() error {
				var err error
				recv, h, err = buf.DispatchOnStream(mod.Stream(), ep.DeviceTokens{Ptr: xs.Device(), Rows: s.tokens}, is.Device(), ws.Device())
				return err
			})
			if err != nil {
				return err
			}
			if err := w.BarrierAll(ctx); err != nil {
				return err
			}
			dc, err := mod.Elapsed(ctx, func() error {
				_, err := buf.CombineOnStream(mod.Stream(), recv.X, h)
				return err
			})
			if err != nil {
				return err
			}
			if r >= 0 {
				dper, cper = append(dper, us(dd)), append(cper, us(dc))
			}
		}
		dph, cph, err := epPhases(ctx, w, mod, buf, rounds, ep.DeviceTokens{Ptr: xs.Device(), Rows: s.tokens}, is.Device(), ws.Device())
		if err != nil {
			return err
		}
		pay := s.hidden * 2
		for _, c := range []struct {
			test   string
			per    []float64
			bytes  int
			phases map[string]float64
		}{{s.dispatch, dper, sent * pay, dph}, {s.combine, cper, back * pay, cph}} {
			if !want(c.test) || me != 0 {
				continue
			}
			r := gpuRow{benchRow: benchRow{Test: c.test, Backend: w.Device().Driver, PEs: npes, SizeBytes: s.tokens * pay,
				Blocks: min(w.Device().Multiprocessors, 264), Rounds: len(c.per)},
				Ordering: string(w.Ordering()), Bytes: c.bytes, HandoffUS: handoff, PhaseUS: c.phases}
			r.LatencyUS, r.MinUS, r.MaxUS = spread(c.per)
			if r.PutGBps = putBW(c.bytes); r.PutGBps > 0 {
				r.BoundUS = float64(c.bytes)/r.PutGBps/1e3 + handoff
				r.OfBound = r.BoundUS / r.LatencyUS
			}
			fmt.Fprintf(os.Stderr, "bench %s: %s %.1f us (min %.1f, max %.1f), %d bytes, bound %.1f us (%.0f%%), phases %s\n",
				r.Ordering, c.test, r.LatencyUS, r.MinUS, r.MaxUS, c.bytes, r.BoundUS, 100*r.OfBound, phaseString(c.phases))
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		for _, m := range []shmem.Mem{xs.Mem(), is.Mem(), ws.Mem()} {
			if err := w.Free(m); err != nil {
				return err
			}
		}
		if err := buf.Free(); err != nil {
			return err
		}
	}
	return nil
}

func phaseString(ph map[string]float64) string {
	var b strings.Builder
	for i, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range ph {
			if !yield(k) {
				return
			}
		}
	}) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.1f", k, ph[k])
	}
	return b.String()
}

// stampStream is a stream that launches ep.h's clock kernel before each kernel enqueued on it:
// the marks between a call's phases.
type stampStream struct {
	device.Stream
	mod   *shmem.Module // a workload module of its own (roxep_k_stamp)
	at    shmem.Sym[uint64]
	me    int
	n     int
	names []string
}

func (s *stampStream) Launch(fn device.Function, grid, block device.Dim3, sharedBytes int, args ...any) error {
	if err := s.stamp(); err != nil {
		return err
	}
	s.names = append(s.names, strings.TrimPrefix(fn.Name(), "roxep_k_"))
	return s.Stream.Launch(fn, grid, block, sharedBytes, args...)
}

func (s *stampStream) stamp() error {
	if s.n >= s.at.Len() {
		return fmt.Errorf("bench: more than %d ep phases", s.at.Len()-1)
	}
	s.n++
	return s.mod.LaunchOn(s.Stream, "roxep_k_stamp", device.D1(1), device.D1(1), 0, s.at.Device().Add(8*(s.n-1)))
}

// phases returns each phase's time (us) after the stream has run the stamped call.
func (s *stampStream) phases() (map[string]float64, error) {
	t := make([]uint64, s.n)
	if err := s.at.Get(0, t, s.me); err != nil {
		return nil, err
	}
	ph := map[string]float64{}
	for i, name := range s.names {
		ph[name] = float64(t[i+1]-t[i]) / 1e3
	}
	return ph, nil
}

// epPhases times the phases of rounds dispatch+combine pairs on buf (each PE, after a barrier):
// a one-thread kernel writes the device clock before each phase and after the last, so each
// figure is a phase's kernel plus one such kernel's launch gap (a few us), the median over the
// rounds; these rounds are apart from the timed ones, whose calls have no marks.
func epPhases(ctx context.Context, w *shmem.World, mod *shmem.Module, buf *ep.Buffer, rounds int, x ep.DeviceTokens, idx, wt device.Ptr) (map[string]float64, map[string]float64, error) {
	_, arch, err := kernels.ObjectFor(w.Device().Arch)
	if err != nil {
		return nil, nil, err
	}
	img, err := kernels.WorkloadObject(arch)
	if err != nil {
		return nil, nil, err
	}
	tmod, err := w.LoadModule(img)
	if err != nil {
		return nil, nil, err
	}
	defer tmod.Unload()
	at, err := shmem.Alloc[uint64](w, 16)
	if err != nil {
		return nil, nil, err
	}
	defer w.Free(at.Mem())
	dall, call := map[string][]float64{}, map[string][]float64{}
	var recv *ep.DeviceRecv
	var h *ep.Handle
	for r := 0; r < rounds; r++ {
		for _, dispatch := range []bool{true, false} {
			if err := w.BarrierAll(ctx); err != nil {
				return nil, nil, err
			}
			st := &stampStream{Stream: mod.Stream(), mod: tmod, at: at, me: w.MyPE()}
			var err error
			if dispatch {
				recv, h, err = buf.DispatchOnStream(st, x, idx, wt)
			} else {
				_, err = buf.CombineOnStream(st, recv.X, h)
			}
			if err != nil {
				return nil, nil, err
			}
			if err := st.stamp(); err != nil {
				return nil, nil, err
			}
			if err := w.SyncStream(ctx, mod.Stream()); err != nil {
				return nil, nil, err
			}
			ph, err := st.phases()
			if err != nil {
				return nil, nil, err
			}
			all := call
			if dispatch {
				all = dall
			}
			for k, v := range ph {
				all[k] = append(all[k], v)
			}
		}
	}
	med := func(all map[string][]float64) map[string]float64 {
		m := map[string]float64{}
		for k, v := range all {
			m[k], _, _ = spread(v)
		}
		return m
	}
	return med(dall), med(call), nil
}
