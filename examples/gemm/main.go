// Gemm is a tensor-parallel GEMM with its all-reduce (or reduce-scatter) fused in (package tp):
// every PE multiplies its slice of the reduction dimension, tile by tile, and pushes each tile
// with put-with-signal as soon as it is computed; the tile's owner reduces the PEs' partials.
// It checks the fused result against the unfused one (the same GEMM, then the exchange as a
// separate step) bit for bit, and both against a float64 reference of the whole product, then
// times both:
//
//	roxrun -n 4 ./examples/gemm -m 509 -n 381 -k 203 -tile 64 -op allreduce -steps 10
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/tp"
)

func main() {
	m := flag.Int("m", 509, "rows of C")
	n := flag.Int("n", 381, "columns of C")
	k := flag.Int("k", 203, "each PE's share of the reduction dimension")
	tile := flag.Int("tile", 128, "tile edge")
	op := flag.String("op", "allreduce", "allreduce or reducescatter")
	steps := flag.Int("steps", 5, "timed steps of each variant (0: only check)")
	workers := flag.Int("workers", 0, "goroutines computing tiles (default: the CPUs)")
	seed := flag.Uint64("seed", 1, "seed of the matrices")
	raw := flag.Bool("raw", false, "print every timed step (PE 0: fused, the faster unfused, that one's GEMM)")
	flag.Parse()
	// One more P than workers: the goroutine that reads a NIC path's socket is woken by the
	// network poller, which the scheduler consults only when a P runs out of work (or every
	// 10 ms); with every P computing tiles, the peers' tiles would land in 10 ms bursts.
	if *workers == 0 {
		*workers = runtime.NumCPU()
	}
	runtime.GOMAXPROCS(*workers + 1)
	ctx := context.Background()
	w, err := shmem.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	cfg := tp.Config{M: *m, N: *n, K: *k, TileM: *tile, TileN: *tile, Workers: *workers}
	switch *op {
	case "allreduce":
	case "reducescatter":
		cfg.Op = tp.ReduceScatter
	default:
		log.Fatalf("gemm: -op %q, want allreduce or reducescatter", *op)
	}
	me, npes := w.MyPE(), w.NPEs()
	g, err := tp.New(w, cfg)
	if err != nil {
		log.Fatal(err)
	}
	as, bs := make([][]float32, npes), make([][]float32, npes)
	for p := range as {
		as[p], bs[p] = matrices(cfg, *seed, p)
	}
	fused, err := g.Fused(ctx, as[me], bs[me])
	if err != nil {
		log.Fatal(err)
	}
	unfused, err := g.Unfused(ctx, as[me], bs[me])
	if err != nil {
		log.Fatal(err)
	}
	r0, r1 := g.Rows()
	if err := check(cfg, as, bs, r0, r1, fused, unfused); err != nil {
		fmt.Fprintf(os.Stderr, "gemm: PE %d: %v\n", me, err)
		os.Exit(1)
	}
	coll := cfg.Op == tp.AllReduce
	if coll {
		c, err := g.UnfusedCollective(ctx, as[me], bs[me])
		if err != nil {
			log.Fatal(err)
		}
		if err := check(cfg, as, bs, r0, r1, fused, c); err != nil {
			fmt.Fprintf(os.Stderr, "gemm: PE %d: unfused through shmem.AllReduce: %v\n", me, err)
			os.Exit(1)
		}
	}
	if err := w.BarrierAll(ctx); err != nil {
		log.Fatal(err)
	}
	if me == 0 {
		fmt.Printf("gemm: %s of %dx%d, K %d per PE, tile %d, %d PEs, exchange %s: fused = unfused bit for bit, both as the float64 reference: ok\n",
			cfg.Op, cfg.M, cfg.N, cfg.K, *tile, npes, g.Scheme())
	}
	if *steps > 0 {
		var tf, tu, tc []float64
		var pf, pu, pc []tp.Phases
		variants := []int{0, 1}
		if coll {
			variants = append(variants, 2)
		}
		for s := 0; s < *steps; s++ {
			for _, v := range variants {
				if err := w.BarrierAll(ctx); err != nil {
					log.Fatal(err)
				}
				t0 := time.Now()
				run := [...]func(context.Context, []float32, []float32) ([]float32, error){g.Fused, g.Unfused, g.UnfusedCollective}[v]
				got, err := run(ctx, as[me], bs[me])
				if err != nil {
					log.Fatal(err)
				}
				// A step ends when every PE has its result.
				if err := w.BarrierAll(ctx); err != nil {
					log.Fatal(err)
				}
				d := time.Since(t0).Seconds() * 1e3
				// Every step's result is the checked one, bit for bit (the buffers alternate
				// between steps).
				if !slices.EqualFunc(got, fused, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) }) {
					fmt.Fprintf(os.Stderr, "gemm: PE %d: timed step %d, variant %d: the result differs from the checked one\n", me, s, v)
					os.Exit(1)
				}
				switch v {
				case 0:
					tf, pf = append(tf, d), append(pf, g.LastPhases())
				case 1:
					tu, pu = append(tu, d), append(pu, g.LastPhases())
				case 2:
					tc, pc = append(tc, d), append(pc, g.LastPhases())
				}
			}
		}
		if me == 0 {
			// The baseline is the faster unfused exchange: tp's own (per-tile puts) or the
			// runtime's all-reduce collective.
			mf, mu, base, bp := median(tf), median(tu), tu, pu
			name := "tp's exchange"
			if coll && median(tc) < mu {
				mu, base, bp, name = median(tc), tc, pc, "shmem.AllReduce"
			}
			// The exchange of an unfused step is what follows its GEMM.
			exch := make([]float64, len(base))
			for i := range base {
				exch[i] = base[i] - ms(bp[i].Computed)
			}
			// Steps of the two variants alternate, so that a load that comes and goes (the
			// machine is shared) falls on both; the paired ratio compares each fused step with
			// the unfused step next to it.
			pair := make([]float64, len(tf))
			for i := range tf {
				pair[i] = base[i] / tf[i]
			}
			if *raw {
				for i := range tf {
					fmt.Printf("gemm: step %d: fused %.3f ms, unfused %.3f ms, its GEMM %.3f ms\n", i, tf[i], base[i], ms(bp[i].Computed))
				}
			}
			fmt.Printf("gemm: per step (median of %d, min..max): fused %.2f ms (%.2f..%.2f), unfused (%s) %.2f ms (%.2f..%.2f), exchange %.2f ms = %.0f%% of the unfused step; on PE 0: fused is %.2fx faster (median of paired steps %.2fx)\n",
				*steps, mf, slices.Min(tf), slices.Max(tf), name, mu, slices.Min(base), slices.Max(base), median(exch), 100*median(exch)/mu, mu/mf, median(pair))
		}
		// Every PE's phases: a step lasts as long as its slowest PE's.
		fmt.Printf("gemm: PE %d phases (median ms from the step's start: last tile computed, last push handed over, last tile reduced, result out):\n", me)
		fmt.Printf("gemm:   fused                      %s  step %.2f\n", phases(pf), median(tf))
		fmt.Printf("gemm:   unfused, tp's exchange     %s  step %.2f\n", phases(pu), median(tu))
		if coll {
			fmt.Printf("gemm:   unfused, shmem.AllReduce   %s  step %.2f\n", phases(pc), median(tc))
		}
	}
	if err := g.Free(); err != nil {
		log.Fatal(err)
	}
	if err := w.Finalize(); err != nil {
		log.Fatal(err)
	}
}

// matrices returns PE p's A (M x K) and B (K x N) for seed.
func matrices(cfg tp.Config, seed uint64, p int) (a, b []float32) {
	rng := rand.New(rand.NewPCG(seed, uint64(p)))
	a, b = make([]float32, cfg.M*cfg.K), make([]float32, cfg.K*cfg.N)
	for i := range a {
		a[i] = float32(rng.Float64()*2 - 1)
	}
	for i := range b {
		b[i] = float32(rng.Float64()*2 - 1)
	}
	return a, b
}

// check compares the fused result with the unfused one bit for bit, and with the float64 product
// of every PE's matrices within float32 rounding.
func check(cfg tp.Config, as, bs [][]float32, r0, r1 int, fused, unfused []float32) error {
	if len(fused) != (r1-r0)*cfg.N || len(unfused) != len(fused) {
		return fmt.Errorf("results of %d and %d elements, want rows [%d, %d) of %d columns", len(fused), len(unfused), r0, r1, cfg.N)
	}
	for i := range fused {
		if math.Float32bits(fused[i]) != math.Float32bits(unfused[i]) {
			return fmt.Errorf("C[%d][%d]: fused %v, unfused %v", r0+i/cfg.N, i%cfg.N, fused[i], unfused[i])
		}
	}
	for i := r0; i < r1; i++ {
		for j := 0; j < cfg.N; j++ {
			var sum, mag float64
			for p := range as {
				for k := 0; k < cfg.K; k++ {
					v := float64(as[p][i*cfg.K+k]) * float64(bs[p][k*cfg.N+j])
					sum += v
					mag += math.Abs(v)
				}
			}
			got := float64(fused[(i-r0)*cfg.N+j])
			if math.Abs(got-sum) > 1e-5*mag+1e-30 {
				return fmt.Errorf("C[%d][%d] = %v, the float64 reference is %v", i, j, got, sum)
			}
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

// phases formats the median of each phase.
func phases(ps []tp.Phases) string {
	var c, s, r, d []float64
	for _, p := range ps {
		c, s, r, d = append(c, ms(p.Computed)), append(s, ms(p.Sent)), append(r, ms(p.Reduced)), append(d, ms(p.Done))
	}
	return fmt.Sprintf("computed %.2f  sent %.2f  reduced %.2f  done %.2f", median(c), median(s), median(r), median(d))
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
