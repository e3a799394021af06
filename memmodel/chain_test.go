package memmodel

import (
	"fmt"
	"math/rand"
	"testing"
)

// Order passes through a PE that only calls collectives (issue 27): each chain shape of the suite
// (Chain+*) is Forbidden, the same chain with an access on the middle PE was Forbidden before, and
// breaking the chain (the middle PE not the root of the second broadcast, nothing completing the
// put, a plain load after syncs in bypass) leaves the weak outcome.
func TestCollectiveChains(t *testing.T) {
	cases := []struct {
		src            string
		strict, bypass Verdict
	}{
		{`SHMEM Chain+barrier+ld+barrier
PE0            | PE1            | PE2            ;
put x@2 1      | barrier {0,1}  | barrier {1,2}  ;
barrier {0,1}  | ld r1 y        | ld r0 x        ;
               | barrier {1,2}  |                ;
exists (2:r0=0)`, Forbidden, Forbidden},
		{`SHMEM Chain+barrier+barrier+barrier
PE0            | PE1            | PE2            | PE3            ;
put x@3 1      | barrier {0,1}  | barrier {1,2}  | barrier {2,3}  ;
barrier {0,1}  | barrier {1,2}  | barrier {2,3}  | ld r0 x        ;
exists (3:r0=0)`, Forbidden, Forbidden},
		{`SHMEM Chain+broadcast+notroot
PE0                | PE1                | PE2                ;
put x@2 1          | broadcast 0 {0,1}  | broadcast 2 {1,2}  ;
quiet              | broadcast 2 {1,2}  | get r0 x@2         ;
broadcast 0 {0,1}  |                    |                    ;
exists (2:r0=0)`, Allowed, Allowed},
		{`SHMEM Chain+sync+sync
PE0          | PE1          | PE2          ;
put x@2 1    | sync {0,1}   | sync {1,2}   ;
sync {0,1}   | sync {1,2}   | get r0 x@2   ;
exists (2:r0=0)`, Allowed, Allowed},
		{`SHMEM Chain+quiet+sync+sync+ld
PE0          | PE1          | PE2          ;
put x@2 1    | sync {0,1}   | sync {1,2}   ;
quiet        | sync {1,2}   | ld r0 x      ;
sync {0,1}   |              |              ;
exists (2:r0=0)`, Forbidden, Allowed},
		{`SHMEM Chain+st+sync+barrier
PE0          | PE1            | PE2            ;
st x 1       | sync {0,1}     | barrier {1,2}  ;
sync {0,1}   | barrier {1,2}  | get r0 x@0     ;
exists (2:r0=0)`, Forbidden, Allowed},
		{`SHMEM Chain+barrier+reversed
PE0            | PE1            | PE2            ;
put x@2 1      | barrier {1,2}  | barrier {1,2}  ;
barrier {0,1}  | barrier {0,1}  | ld r0 x        ;
exists (2:r0=0)`, Allowed, Allowed},
	}
	m := DefaultCat()
	for _, tc := range cases {
		tt := mustParse(t, tc.src)
		for _, mode := range []Mode{Strict, Bypass} {
			want := map[Mode]Verdict{Strict: tc.strict, Bypass: tc.bypass}[mode]
			r, err := Check(tt, mode, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != want {
				t.Errorf("%s %s: the checker says %s, want %s", tt.Name, mode, r.Verdict, want)
			}
			rc, err := CheckCat(tt, m, mode, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if rc.Verdict != want {
				t.Errorf("%s %s: model.cat says %s, want %s", tt.Name, mode, rc.Verdict, want)
			}
		}
	}
}

// genChain builds a random three-PE chain: PE0 and PE1 meet in one collective, PE1 and PE2 in a
// second, each column with a few accesses around its calls.
func genChain(rng *rand.Rand) *Test {
	colls := func(team []int) Instr {
		switch rng.Intn(4) {
		case 0:
			return Instr{Op: OpBarrier, Team: team}
		case 1:
			return Instr{Op: OpSync, Team: team}
		case 2:
			return Instr{Op: OpAllReduce, Team: team}
		}
		return Instr{Op: OpBroadcast, Team: team, Root: team[rng.Intn(2)]}
	}
	nreg := 0
	var regs []Prop
	ops := func(pe, n int) []Instr {
		var ins []Instr
		for i := 0; i < n; i++ {
			v, q := []string{"x", "y"}[rng.Intn(2)], rng.Intn(3)
			reg := fmt.Sprintf("r%d", nreg)
			var in Instr
			switch rng.Intn(7) {
			case 0:
				in = Instr{Op: OpPut, Loc: Loc{v, q}, Val: 1}
			case 1:
				in = Instr{Op: OpSt, Loc: Loc{v, pe}, Val: 2}
			case 2:
				in = Instr{Op: OpLd, Reg: reg, Loc: Loc{v, pe}}
			case 3:
				in = Instr{Op: OpGet, Reg: reg, Loc: Loc{v, q}}
			case 4:
				in = Instr{Op: OpQuiet}
			case 5:
				in = Instr{Op: OpFAdd, Reg: reg, Loc: Loc{v, q}, Val: 1}
			default:
				in = Instr{Op: OpFence}
			}
			if in.Reg != "" {
				nreg++
				regs = append(regs, Prop{Kind: PropReg, PE: pe, Reg: reg, Val: int64(rng.Intn(2))})
			}
			ins = append(ins, in)
		}
		return ins
	}
	first, second := colls([]int{0, 1}), colls([]int{1, 2})
	cat := func(parts ...[]Instr) []Instr {
		var out []Instr
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	t := &Test{Name: "Chain"}
	t.Columns = []Column{
		{PE: 0, Instrs: cat(ops(0, 1+rng.Intn(2)), []Instr{first}, ops(0, rng.Intn(2)))},
		{PE: 1, Instrs: cat(ops(1, rng.Intn(2)), []Instr{first}, ops(1, rng.Intn(2)), []Instr{second}, ops(1, rng.Intn(2)))},
		{PE: 2, Instrs: cat(ops(2, rng.Intn(2)), []Instr{second}, ops(2, 1+rng.Intn(2)))},
	}
	t.Cond = Prop{Kind: PropMem, Loc: Loc{"x", 2}, Val: int64(rng.Intn(2))}
	if len(regs) > 0 {
		t.Cond = Prop{Kind: PropAnd, Args: append(regs[:min(len(regs), 3)], t.Cond)}
	}
	return t
}

// model.cat and the Go checker allow the same final states of random chains of collectives.
func TestCatAgreesOnChains(t *testing.T) {
	m := DefaultCat()
	rng := rand.New(rand.NewSource(27))
	for i := 0; i < 60; i++ {
		tt := genChain(rng)
		if _, err := Parse("chain", []byte(tt.String())); err != nil {
			t.Fatalf("generated chain does not parse: %v\n%s", err, tt)
		}
		for _, mode := range []Mode{Strict, Bypass} {
			for _, o := range []Options{DefaultOptions(), {}} {
				sameStates(t, m, tt, mode, o)
			}
		}
	}
}
