package litmusrun

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"

	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/memmodel"
)

const testBase = 0x10040 // a heap offset for the variable array

// Every test's program, for every PE of the job, survives packing (the kernel's memory layout)
// and decodes back to the column it came from.
func TestGPUProgramRoundTrip(t *testing.T) {
	tests, err := loadSuite("../../memmodel/testdata")
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) == 0 {
		t.Fatal("no tests in memmodel/testdata")
	}
	npes := NPEs(tests)
	for _, lt := range tests {
		if miss := lt.Unsupported(GPUFeatures); !miss.Empty() { // RunSuiteGPU skips it and says so: the encoder must refuse it too
			g, err := newGPUTest(lt)
			refused := err != nil
			for pe := 0; pe < npes && !refused; pe++ {
				_, err := g.encode(pe, testBase, 0)
				refused = err != nil
			}
			if !refused {
				t.Errorf("%s: GPUFeatures lacks %s, the encoder takes it", lt.Name, miss)
			}
			continue
		}
		g, err := newGPUTest(lt)
		if err != nil {
			t.Fatal(err)
		}
		for pe := 0; pe < npes; pe++ {
			for _, seed := range []uint64{0, 12345} {
				prog, err := g.encode(pe, testBase, seed)
				if err != nil {
					t.Fatalf("%s PE %d: %v", lt.Name, pe, err)
				}
				back, err := unpackProgram(packProgram(prog))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(back, prog) && !(len(back) == 0 && len(prog) == 0) {
					t.Fatalf("%s PE %d: packed program reads back as %+v, want %+v", lt.Name, pe, back, prog)
				}
				ins, err := g.decode(pe, testBase, back)
				if err != nil {
					t.Fatalf("%s PE %d: %v", lt.Name, pe, err)
				}
				var want []string
				if col := g.column(pe); col != nil {
					for _, in := range col.Instrs {
						in.Ctx = "" // the device runs every operation on the default context (completes more)
						want = append(want, in.Format(pe))
					}
				} else {
					for _, in := range lt.Columns[0].Instrs { // it joins the barriers and syncs
						if in.Op == memmodel.OpBarrier || in.Op == memmodel.OpSync {
							want = append(want, memmodel.Instr{Op: in.Op}.Format(pe))
						}
					}
				}
				var got []string
				for _, in := range ins {
					got = append(got, in.Format(pe))
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s PE %d seed %d: decodes to %q, want %q", lt.Name, pe, seed, got, want)
				}
				delays, warms := 0, map[memmodel.Loc]bool{}
				for _, x := range prog {
					if x.Op == kernels.LitmusNop {
						delays++
					}
					if x.Op == kernels.LitmusWarm {
						v, err := g.decode(pe, testBase, []kernels.LitmusInsn{{Op: kernels.LitmusLd, Var: x.Var}})
						if err != nil {
							t.Fatalf("%s PE %d: a warm of no variable: %v", lt.Name, pe, err)
						}
						warms[memmodel.Loc{Var: v[0].Loc.Var, PE: int(x.PE)}] = true
					}
				}
				wantW := map[memmodel.Loc]bool{} // every word the column loads plainly, once
				if col := g.column(pe); col != nil {
					for _, in := range col.Instrs {
						if in.Op == memmodel.OpLd {
							wantW[in.Loc] = true
						}
					}
				}
				if !reflect.DeepEqual(warms, wantW) {
					t.Errorf("%s PE %d: warms %v, want %v", lt.Name, pe, warms, wantW)
				}
				if wantD := 0; seed != 0 && g.column(pe) != nil {
					wantD = len(want) + 1
					if delays != wantD {
						t.Errorf("%s PE %d: %d delays, want %d", lt.Name, pe, delays, wantD)
					}
				} else if delays != 0 {
					t.Errorf("%s PE %d seed %d: %d delays, want none", lt.Name, pe, seed, delays)
				}
			}
		}
	}
	if _, err := unpackProgram(make([]uint64, insnWords+1)); err == nil {
		t.Error("unpackProgram accepted a partial instruction")
	}
	g, _ := newGPUTest(tests[0])
	if _, err := g.decode(0, testBase, []kernels.LitmusInsn{{Op: kernels.LitmusLd, Var: testBase + 8}}); err == nil {
		t.Error("decode accepted an offset between two variables")
	}
}

// simJob interprets the encoded programs of every PE on the CPU, with the roxk_litmus kernel's
// semantics (get_nbi values land at the next quiet or the end of the program; barriers join every
// PE; the memory of each PE is reset to initList) and one instruction at a time in a random
// interleaving: a sequentially consistent execution of exactly what the GPU runs.
type simJob struct {
	g     *gpuTest
	progs [][]kernels.LitmusInsn
	rng   *rand.Rand
	skip  uint32 // an op the interpreter ignores (to check that the harness catches a broken one)
}

func newSimJob(t *memmodel.Test, npes int, seed int64) (*simJob, error) {
	g, err := newGPUTest(t)
	if err != nil {
		return nil, err
	}
	j := &simJob{g: g, rng: rand.New(rand.NewSource(seed))}
	for pe := 0; pe < npes; pe++ {
		prog, err := g.encode(pe, testBase, uint64(seed)+1)
		if err != nil {
			return nil, err
		}
		j.progs = append(j.progs, prog)
	}
	return j, nil
}

func simCmp(c uint32, a, b uint64) bool {
	switch c {
	case kernels.CmpEQ:
		return a == b
	case kernels.CmpNE:
		return a != b
	case kernels.CmpGT:
		return a > b
	case kernels.CmpLE:
		return a <= b
	case kernels.CmpLT:
		return a < b
	case kernels.CmpGE:
		return a >= b
	}
	return false
}

func (j *simJob) RunOnce(ctx context.Context, t *memmodel.Test, seed int64) (memmodel.State, error) {
	npes := len(j.progs)
	mem := make([]map[uint64]uint64, npes)
	pc := make([]int, npes)
	regs := make([][]uint64, npes)
	gets := make([][]kernels.LitmusInsn, npes)
	for q := range mem {
		mem[q] = map[uint64]uint64{}
		l := j.g.initList(q, testBase)
		for i := 0; i < len(l); i += 2 {
			mem[q][l[i]] = l[i+1]
		}
		regs[q] = make([]uint64, kernels.LitmusMaxRegs)
	}
	drain := func(q int) {
		for _, x := range gets[q] {
			regs[q][x.Reg] = mem[x.PE][x.Var]
		}
		gets[q] = nil
	}
	for {
		var ready []int
		atBar, done := 0, 0
		for q := range j.progs {
			switch {
			case pc[q] == len(j.progs[q]):
				done++
			case j.progs[q][pc[q]].Op == kernels.LitmusBarrier || j.progs[q][pc[q]].Op == kernels.LitmusSync:
				atBar++
			case j.progs[q][pc[q]].Op == kernels.LitmusWait && j.skip != kernels.LitmusWait:
				x := j.progs[q][pc[q]]
				if simCmp(x.Sub, mem[q][x.Var], x.Value) {
					ready = append(ready, q)
				}
			default:
				ready = append(ready, q)
			}
		}
		if done == npes {
			break
		}
		if len(ready) == 0 {
			if atBar == npes {
				for q := range pc {
					pc[q]++
				}
				continue
			}
			return nil, fmt.Errorf("deadlock at pcs %v", pc)
		}
		q := ready[j.rng.Intn(len(ready))]
		x := j.progs[q][pc[q]]
		pc[q]++
		if x.Op == j.skip {
			continue
		}
		m := mem[x.PE]
		switch x.Op {
		case kernels.LitmusSt:
			mem[q][x.Var] = x.Value
		case kernels.LitmusLd:
			regs[q][x.Reg] = mem[q][x.Var]
		case kernels.LitmusPut, kernels.LitmusPutNBI, kernels.LitmusSet:
			m[x.Var] = x.Value
		case kernels.LitmusGet, kernels.LitmusFetch:
			regs[q][x.Reg] = m[x.Var]
		case kernels.LitmusGetNBI:
			gets[q] = append(gets[q], x)
		case kernels.LitmusFAdd:
			regs[q][x.Reg], m[x.Var] = m[x.Var], m[x.Var]+x.Value
		case kernels.LitmusAdd:
			m[x.Var] += x.Value
		case kernels.LitmusSwap:
			regs[q][x.Reg], m[x.Var] = m[x.Var], x.Value
		case kernels.LitmusCSwap:
			regs[q][x.Reg] = m[x.Var]
			if m[x.Var] == x.Aux {
				m[x.Var] = x.Value
			}
		case kernels.LitmusPutSig:
			m[x.Var] = x.Value
			if x.Sub == 1 {
				m[x.Aux] += uint64(x.Reg)
			} else {
				m[x.Aux] = uint64(x.Reg)
			}
		case kernels.LitmusQuiet:
			drain(q)
		case kernels.LitmusInc:
			m[x.Var]++
		case kernels.LitmusFInc:
			regs[q][x.Reg], m[x.Var] = m[x.Var], m[x.Var]+1
		case kernels.LitmusAnd:
			m[x.Var] &= x.Value
		case kernels.LitmusOr:
			m[x.Var] |= x.Value
		case kernels.LitmusXor:
			m[x.Var] ^= x.Value
		case kernels.LitmusFAnd:
			regs[q][x.Reg], m[x.Var] = m[x.Var], m[x.Var]&x.Value
		case kernels.LitmusFOr:
			regs[q][x.Reg], m[x.Var] = m[x.Var], m[x.Var]|x.Value
		case kernels.LitmusFXor:
			regs[q][x.Reg], m[x.Var] = m[x.Var], m[x.Var]^x.Value
		case kernels.LitmusSigFetch:
			regs[q][x.Reg] = mem[q][x.Var]
		case kernels.LitmusPtrSt:
			m[x.Var] = x.Value
		case kernels.LitmusPtrLd:
			regs[q][x.Reg] = m[x.Var]
		case kernels.LitmusPutSigNBI:
			m[x.Var] = x.Value
			if x.Sub == 1 {
				m[x.Aux] += uint64(x.Reg)
			} else {
				m[x.Aux] = uint64(x.Reg)
			}
		case kernels.LitmusGetDst, kernels.LitmusGetNBIDst: // done at once: one execution the model allows
			mem[q][x.Aux] = m[x.Var]
		case kernels.LitmusPutBuf:
			m[x.Var] = mem[q][x.Aux]
		}
		if pc[q] == len(j.progs[q]) {
			drain(q)
		}
	}
	r, ms := make([][]uint64, npes), make([][]uint64, npes)
	for q := range r {
		r[q] = regs[q][:j.g.nregs]
		for i := range j.g.vars {
			ms[q] = append(ms[q], mem[q][testBase+uint64(8*varStride*i)])
		}
	}
	return j.g.state(r, ms)
}

// The programs the GPU runner builds, interpreted on the CPU with the kernel's semantics in
// sequentially consistent interleavings, produce no outcome either mode forbids; an interpreter
// that ignores waits is caught.
func TestGPUProgramSimulated(t *testing.T) {
	tests, err := loadSuite("../../memmodel/testdata")
	if err != nil {
		t.Fatal(err)
	}
	npes := NPEs(tests)
	ctx := context.Background()
	for i, lt := range tests {
		if !lt.Unsupported(GPUFeatures).Empty() {
			continue
		}
		for _, mode := range []memmodel.Mode{memmodel.Strict, memmodel.Bypass} {
			j, err := newSimJob(lt, npes, int64(i+1))
			if err != nil {
				t.Fatal(err)
			}
			h, err := memmodel.Conform(ctx, lt, j, mode, memmodel.DefaultOptions(), 300, int64(i), nil)
			if err != nil {
				t.Errorf("%s (%s): %v", lt.Name, mode, err)
				continue
			}
			if h.Total != 300 {
				t.Errorf("%s: %d states, want 300", lt.Name, h.Total)
			}
		}
	}
	var mp *memmodel.Test
	for _, lt := range tests {
		if lt.Name == "MP+fence+wait" {
			mp = lt
		}
	}
	if mp == nil {
		t.Fatal("MP+fence+wait not in memmodel/testdata")
	}
	j, err := newSimJob(mp, 2, 7)
	if err != nil {
		t.Fatal(err)
	}
	j.skip = kernels.LitmusWait
	_, err = memmodel.Conform(ctx, mp, j, memmodel.Strict, memmodel.DefaultOptions(), 300, 1, nil)
	var fe *memmodel.ForbiddenError
	if !errors.As(err, &fe) {
		t.Errorf("an interpreter without waits: Conform says %v, want a forbidden outcome", err)
	}
}

// On the many-copies path copy c runs the program with every heap offset moved by c lines: each
// variable offset the encoder writes, so moved, is that copy's word of the variable in the
// variable-major array, which the launch's image initializes from the test's init line.
func TestGPUMultiLayout(t *testing.T) {
	lt, err := memmodel.Parse("layout", []byte("SHMEM layout\n{ y@1=5; s@1=2; }\nPE0 | PE1 ;\nputsig x@1 1 s@1 add 1 | wait s == 3 ;\n | ld r0 y ;\n | ld r1 x ;\nexists (1:r1=0)\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGPUTest(lt)
	if err != nil {
		t.Fatal(err)
	}
	g.stride = 8 * slotWords * gpuCopies // as runPEGPUMulti sets it
	words := len(g.vars) * slotWords * gpuCopies
	img := multiImage(g, 1, testBase, words)
	for _, c := range []int{0, 1, 77, gpuCopies - 1} {
		for pe := 0; pe < 2; pe++ {
			prog, err := g.encode(pe, testBase, 3)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range prog {
				if x.Op == kernels.LitmusNop {
					continue
				}
				off := x.Var + uint64(c*8*slotWords) // the kernel's shift
				w := int(off-testBase) / 8
				v := sort.SearchStrings(g.vars, g.vars[(x.Var-testBase)/g.stride])
				if w != multiWord(v, c) {
					t.Fatalf("copy %d PE %d op %d: word %d, want %d", c, pe, x.Op, w, multiWord(v, c))
				}
			}
		}
		for v, name := range g.vars {
			want := map[string]uint64{"y": 5, "s": 2}[name]
			if got := img[multiWord(v, c)]; got != want {
				t.Errorf("copy %d: %s@1 starts at %d, want %d", c, name, got, want)
			}
		}
	}
	for i, w := range img {
		if i%slotWords != 0 && w != 0 {
			t.Fatalf("word %d between variables is %d", i, w)
		}
	}
}
