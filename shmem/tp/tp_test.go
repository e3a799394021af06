package tp_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/tp"
)

// In a 1-PE job (a lone process) every tile is this PE's: the workers, the sender and the
// reductions still run, and C must be A*B, fused and unfused alike, step after step.
func TestOnePE(t *testing.T) {
	ctx := context.Background()
	w, err := shmem.Init(ctx, shmem.WithHeapSize(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Finalize()
	for _, op := range []tp.Op{tp.AllReduce, tp.ReduceScatter} {
		cfg := tp.Config{M: 45, N: 37, K: 19, TileM: 8, TileN: 16, Workers: 3, Op: op}
		g, err := tp.New(w, cfg)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		a, b := make([]float32, cfg.M*cfg.K), make([]float32, cfg.K*cfg.N)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		for i := range b {
			b[i] = float32(rng.NormFloat64())
		}
		for step := 0; step < 3; step++ {
			f, err := g.Fused(ctx, a, b)
			if err != nil {
				t.Fatal(err)
			}
			u, err := g.Unfused(ctx, a, b)
			if err != nil {
				t.Fatal(err)
			}
			if r0, r1 := g.Rows(); r0 != 0 || r1 != cfg.M || len(f) != cfg.M*cfg.N || len(u) != len(f) {
				t.Fatalf("%v: rows [%d, %d), %d and %d elements", op, r0, r1, len(f), len(u))
			}
			for i := 0; i < cfg.M; i++ {
				for j := 0; j < cfg.N; j++ {
					var want, mag float64
					for k := 0; k < cfg.K; k++ {
						v := float64(a[i*cfg.K+k]) * float64(b[k*cfg.N+j])
						want, mag = want+v, mag+math.Abs(v)
					}
					got := f[i*cfg.N+j]
					if math.Float32bits(got) != math.Float32bits(u[i*cfg.N+j]) || math.Abs(float64(got)-want) > 1e-5*mag {
						t.Fatalf("%v step %d: C[%d][%d] fused %v unfused %v, want %v", op, step, i, j, got, u[i*cfg.N+j], want)
					}
				}
			}
		}
		if err := g.Free(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tp.New(w, tp.Config{M: 0, N: 1, K: 1}); err == nil {
		t.Error("tp.New accepted M = 0")
	}
}
