// Package eptest generates routings for package ep's tests and computes, on the host and
// independently of ep's transfers, what Dispatch and Combine must return: every PE can generate
// every other PE's tokens from the seed, so each checks its own results against the whole job's
// reference.
package eptest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
)

// Kind is a family of routings.
type Kind string

const (
	// Random: each PE has a random number of tokens in [0, MaxTokens] (PE 1 has none, when there
	// is a PE 1), each with TopK random experts, some left out (-1), duplicates on one PE allowed.
	Random Kind = "random"
	// Skewed: every token of every PE goes to one expert (the last), its other choices -1.
	Skewed Kind = "skewed"
	// Full: MaxTokens tokens per PE, TopK distinct random experts each.
	Full Kind = "full"
)

// Input is one PE's Dispatch arguments.
type Input struct {
	X       ep.Tokens
	Idx     []int64
	Weights []float32
	N       int
}

// Gen returns PE pe's input for seed and kind.
func Gen(cfg ep.Config, npes, pe int, seed uint64, kind Kind) Input {
	rng := rand.New(rand.NewPCG(seed, uint64(pe)))
	n := cfg.MaxTokens
	if kind == Random {
		n = rng.IntN(cfg.MaxTokens + 1)
		if pe == 1 {
			n = 0
		}
	}
	in := Input{N: n, Idx: make([]int64, n*cfg.TopK), Weights: make([]float32, n*cfg.TopK)}
	f := make([]float32, n*cfg.Hidden)
	for i := range f {
		f[i] = float32(rng.NormFloat64())
	}
	if cfg.DType == ep.DTypeBF16 {
		in.X.BF16 = ep.BF16sFromFloat32(f)
	} else {
		in.X.F32 = f
	}
	for t := 0; t < n; t++ {
		ks := in.Idx[t*cfg.TopK : (t+1)*cfg.TopK]
		switch kind {
		case Skewed:
			for k := range ks {
				ks[k] = -1
			}
			ks[0] = int64(cfg.Experts - 1)
		case Full:
			perm := rng.Perm(cfg.Experts)
			for k := range ks {
				ks[k] = int64(perm[k])
			}
		default:
			for k := range ks {
				ks[k] = int64(rng.IntN(cfg.Experts+1)) - 1
			}
		}
		for k := range ks {
			in.Weights[t*cfg.TopK+k] = float32(rng.Float64())
		}
	}
	return in
}

// Expert is the test's expert computation: row x of expert e, scaled, in the buffer's DType.
func Expert(cfg ep.Config, e int, x ep.Tokens, row int, out ep.Tokens, outRow int) {
	scale := float32(e%7+1) * 0.375
	h := cfg.Hidden
	if cfg.DType == ep.DTypeBF16 {
		for j := 0; j < h; j++ {
			out.BF16[outRow*h+j] = shmem.BFloat16From(x.BF16[row*h+j].Float32() * scale)
		}
		return
	}
	for j := 0; j < h; j++ {
		out.F32[outRow*h+j] = x.F32[row*h+j] * scale
	}
}

// Apply runs Expert on every received row.
func Apply(cfg ep.Config, r *ep.Recv) ep.Tokens {
	var y ep.Tokens
	if cfg.DType == ep.DTypeBF16 {
		y.BF16 = make([]shmem.BFloat16, r.Rows*cfg.Hidden)
	} else {
		y.F32 = make([]float32, r.Rows*cfg.Hidden)
	}
	for i := 0; i < r.Rows; i++ {
		Expert(cfg, r.Experts[i], r.X, i, y, i)
	}
	return y
}

func bits(cfg ep.Config, t ep.Tokens, i int) uint32 {
	if cfg.DType == ep.DTypeBF16 {
		return uint32(t.BF16[i])
	}
	return math.Float32bits(t.F32[i])
}

// CheckDispatch compares PE me's Recv with the reference from every PE's inputs.
func CheckDispatch(cfg ep.Config, ins []Input, me int, r *ep.Recv) error {
	npes := len(ins)
	local := cfg.Experts / npes
	h := cfg.Hidden
	row := 0
	for l := 0; l < local; l++ {
		ex := me*local + l
		if r.Offsets[l] != row {
			return fmt.Errorf("Dispatch: local expert %d starts at row %d, want %d", l, r.Offsets[l], row)
		}
		for s := 0; s < npes; s++ {
			for t := 0; t < ins[s].N; t++ {
				for k := 0; k < cfg.TopK; k++ {
					if ins[s].Idx[t*cfg.TopK+k] != int64(ex) {
						continue
					}
					if row >= r.Rows {
						return fmt.Errorf("Dispatch: %d rows, want more (expert %d misses PE %d token %d)", r.Rows, ex, s, t)
					}
					if got := (ep.Source{PE: s, Token: t, K: k}); r.Src[row] != got || r.Experts[row] != ex {
						return fmt.Errorf("Dispatch: row %d is %+v of expert %d, want %+v of expert %d", row, r.Src[row], r.Experts[row], got, ex)
					}
					if w := ins[s].Weights[t*cfg.TopK+k]; math.Float32bits(r.Weights[row]) != math.Float32bits(w) {
						return fmt.Errorf("Dispatch: row %d weight %v, want %v", row, r.Weights[row], w)
					}
					for j := 0; j < h; j++ {
						if a, b := bits(cfg, r.X, row*h+j), bits(cfg, ins[s].X, t*h+j); a != b {
							return fmt.Errorf("Dispatch: row %d (PE %d token %d) element %d is %#x, want %#x", row, s, t, j, a, b)
						}
					}
					row++
				}
			}
		}
		if r.Counts[l] != row-r.Offsets[l] {
			return fmt.Errorf("Dispatch: local expert %d count %d, want %d", l, r.Counts[l], row-r.Offsets[l])
		}
	}
	for s := 0; s < npes; s++ {
		want := 0
		for t := 0; t < ins[s].N; t++ {
			for k := 0; k < cfg.TopK; k++ {
				if e := ins[s].Idx[t*cfg.TopK+k]; e >= 0 && int(e)/local == me {
					want++
					break
				}
			}
		}
		if r.Transfers[s] != want {
			return fmt.Errorf("Dispatch: %d tokens travelled from PE %d, want %d (one per token with an expert here)", r.Transfers[s], s, want)
		}
	}
	if r.Rows != row {
		return fmt.Errorf("Dispatch: %d rows, want %d", r.Rows, row)
	}
	return nil
}

// Combined returns what Combine must give PE me for its input, with Expert as the experts, in
// ep's documented summation order.
func Combined(cfg ep.Config, npes int, in Input) ep.Tokens {
	local := cfg.Experts / npes
	h := cfg.Hidden
	acc := make([]float32, in.N*h)
	part := make([]float32, h)
	y := makeRow(cfg)
	for t := 0; t < in.N; t++ {
		for p := 0; p < npes; p++ {
			any := false
			clear(part)
			for k := 0; k < cfg.TopK; k++ {
				e := in.Idx[t*cfg.TopK+k]
				if e < 0 || int(e)/local != p {
					continue
				}
				any = true
				Expert(cfg, int(e), in.X, t, y, 0)
				w := in.Weights[t*cfg.TopK+k]
				for j := 0; j < h; j++ {
					part[j] += float32(w * rowAt(cfg, y, j))
				}
			}
			if any {
				for j := 0; j < h; j++ {
					v := part[j]
					if cfg.DType == ep.DTypeBF16 { // a partial travels back in the payload type
						v = shmem.BFloat16From(v).Float32()
					}
					acc[t*h+j] += v
				}
			}
		}
	}
	if cfg.DType == ep.DTypeBF16 {
		return ep.Tokens{BF16: ep.BF16sFromFloat32(acc)}
	}
	return ep.Tokens{F32: acc}
}

func makeRow(cfg ep.Config) ep.Tokens {
	if cfg.DType == ep.DTypeBF16 {
		return ep.Tokens{BF16: make([]shmem.BFloat16, cfg.Hidden)}
	}
	return ep.Tokens{F32: make([]float32, cfg.Hidden)}
}

func rowAt(cfg ep.Config, t ep.Tokens, j int) float32 {
	if cfg.DType == ep.DTypeBF16 {
		return t.BF16[j].Float32()
	}
	return t.F32[j]
}

// CheckCombine compares Combine's output with Combined's, bit for bit.
func CheckCombine(cfg ep.Config, npes int, in Input, out ep.Tokens) error {
	want := Combined(cfg, npes, in)
	n := in.N * cfg.Hidden
	var got int
	if cfg.DType == ep.DTypeBF16 {
		got = len(out.BF16)
	} else {
		got = len(out.F32)
	}
	if got != n {
		return fmt.Errorf("Combine: %d elements, want %d", got, n)
	}
	for i := 0; i < n; i++ {
		if a, b := bits(cfg, out, i), bits(cfg, want, i); a != b {
			return fmt.Errorf("Combine: token %d element %d is %#x, want %#x", i/cfg.Hidden, i%cfg.Hidden, a, b)
		}
	}
	return nil
}
