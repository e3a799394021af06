package memmodel

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"
)

// rmwRace writes a test in which pes PEs each do per fetch-adds of 1 to each of words words
// (x0@pes, x1@pes, ... on a PE without a column), in program order word by word; register
// r(k*words+w) holds what the k-th round read from word w.
func rmwRace(name string, pes, per, words int, cond string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "SHMEM %s\n", name)
	for p := 0; p < pes; p++ {
		if p > 0 {
			b.WriteString(" | ")
		}
		fmt.Fprintf(&b, "PE%d", p)
	}
	b.WriteString(" ;\n")
	for k := 0; k < per; k++ {
		for w := 0; w < words; w++ {
			for p := 0; p < pes; p++ {
				if p > 0 {
					b.WriteString(" | ")
				}
				fmt.Fprintf(&b, "fadd r%d x%d@%d 1", k*words+w, w, pes)
			}
			b.WriteString(" ;\n")
		}
	}
	fmt.Fprintf(&b, "exists (%s)\n", cond)
	return b.String()
}

type rmwCase struct {
	pes, per, words int
	cond            string
	want            Verdict
}

// rmwCases are racing fetch-adds at the sizes (4 PEs x 4, 5 x 3, 8 x 4 on one word; 32 PEs
// x 2 words), with conditions that atomicity alone refutes (two RMWs read one value, a lost update,
// a PE's later RMW reading less), that order refutes, and that some execution meets.
func rmwCases() []rmwCase {
	return []rmwCase{
		{4, 4, 1, "0:r0=0 /\\ 1:r0=0", Forbidden},
		{4, 4, 1, "x0@4=15", Forbidden},
		{4, 4, 1, "0:r3=15 /\\ 1:r0=0", Allowed},
		{4, 4, 1, "0:r0=16 \\/ 1:r0=17", Forbidden},
		{5, 3, 1, "0:r0=3 /\\ 1:r0=3", Forbidden},
		{5, 3, 1, "0:r2=14 /\\ x0@5=15", Allowed},
		{8, 4, 1, "0:r0=0 /\\ 1:r0=0", Forbidden},
		{8, 4, 1, "0:r0=5 /\\ 0:r1=3", Forbidden},
		{8, 4, 1, "~(x0@8=32)", Forbidden},
		{8, 4, 1, "0:r0=3 /\\ 1:r0=4 /\\ 2:r0=5 /\\ 3:r0=6 /\\ 4:r0=7 /\\ 5:r0=8 /\\ 6:r0=9 /\\ 7:r0=10", Forbidden},
		{8, 4, 1, "0:r0=5 /\\ 0:r1=7 /\\ 1:r0=6 /\\ 1:r1=8", Allowed},
		{32, 1, 2, "0:r1=0 /\\ 1:r1=0", Forbidden},
		{32, 1, 2, "0:r0=0 /\\ 1:r0=0", Forbidden},
		{32, 1, 2, "x0@32=32 /\\ x1@32=31", Forbidden},
		{32, 1, 2, "0:r0=31 /\\ 0:r1=0 /\\ 1:r0=0 /\\ 1:r1=31", Allowed},
	}
}

// Racing read-modify-writes at the sizes are decided (issue 27: 4 PEs x 4 fetch-adds took
// 313 s, 32 PEs x 2 words grew exponentially). Bounded by the sizes, not by the clock; the times
// are logged (go test -v) and BenchmarkRMWRace prints them.
func TestRMWRaceDecided(t *testing.T) {
	for _, rc := range rmwCases() {
		tt := mustParse(t, rmwRace("RMW", rc.pes, rc.per, rc.words, rc.cond))
		for _, m := range []Mode{Strict, Bypass} {
			start := time.Now()
			v, err := Decide(tt, m, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if v != rc.want {
				t.Errorf("%d PEs x %d x %d words, %s, %s: Decide says %s, want %s", rc.pes, rc.per, rc.words, rc.cond, m, v, rc.want)
			}
			t.Logf("%2d PEs x %d x %d words %-6s %-9s %-10v %s", rc.pes, rc.per, rc.words, m, v, time.Since(start).Round(time.Microsecond), rc.cond)
		}
	}
}

// BenchmarkRMWRace decides every case of rmwCases in both modes and reports the slowest.
func BenchmarkRMWRace(b *testing.B) {
	type row struct {
		name string
		d    time.Duration
	}
	var rows []row
	for i := 0; i < b.N; i++ {
		rows = rows[:0]
		for _, rc := range rmwCases() {
			tt, err := Parse("bench", []byte(rmwRace("RMW", rc.pes, rc.per, rc.words, rc.cond)))
			if err != nil {
				b.Fatal(err)
			}
			for _, m := range []Mode{Strict, Bypass} {
				start := time.Now()
				if _, err := Decide(tt, m, DefaultOptions()); err != nil {
					b.Fatal(err)
				}
				rows = append(rows, row{fmt.Sprintf("%dx%dx%d %s %s", rc.pes, rc.per, rc.words, m, rc.cond), time.Since(start)})
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].d > rows[j].d })
	for _, r := range rows[:min(5, len(rows))] {
		b.Logf("slowest: %-12v %s", r.d.Round(time.Microsecond), r.name)
	}
}

// genCount builds small races on counting locations (adding AMOs, addends of one or both signs)
// and a plain word y that puts and gets tie to them, with conditions mixing and, or and not, for
// comparing Decide's pruning (counting bounds, the three-valued condition, the deferred location)
// with exhaustive enumeration.
func genCount(rng *rand.Rand) *Test {
	npe := 2 + rng.Intn(3)
	t := &Test{Name: "Count"}
	var atoms []Prop
	total := 0
	for pe := 0; pe < npe; pe++ {
		col := Column{PE: pe}
		for i, n := 0, 1+rng.Intn(3); i < n && total < 7; i++ {
			total++
			loc := Loc{[]string{"x", "x", "z"}[rng.Intn(3)], 4}
			reg := fmt.Sprintf("r%d", i)
			val := []int64{1, 1, 2, 0, -1}[rng.Intn(5)]
			var in Instr
			switch rng.Intn(8) {
			case 0, 1, 2:
				in = Instr{Op: OpFAdd, Reg: reg, Loc: loc, Val: val}
			case 3:
				in = Instr{Op: OpAdd, Loc: loc, Val: val}
			case 4:
				in = Instr{Op: OpFInc, Reg: reg, Loc: loc}
			case 5:
				in = Instr{Op: OpPut, Loc: Loc{"y", 4}, Val: 1}
			case 6:
				in = Instr{Op: OpGet, Reg: reg, Loc: Loc{"y", 4}}
			default:
				in = Instr{Op: OpQuiet}
			}
			if in.Reg != "" && rng.Intn(2) == 0 {
				atoms = append(atoms, Prop{Kind: PropReg, PE: pe, Reg: reg, Val: int64(rng.Intn(5))})
			}
			col.Instrs = append(col.Instrs, in)
		}
		t.Columns = append(t.Columns, col)
	}
	if rng.Intn(2) == 0 {
		atoms = append(atoms, Prop{Kind: PropMem, Loc: Loc{"x", 4}, Val: int64(rng.Intn(6))})
	}
	if len(atoms) == 0 {
		atoms = append(atoms, Prop{Kind: PropMem, Loc: Loc{"z", 4}, Val: int64(rng.Intn(4))})
	}
	for i := range atoms {
		if rng.Intn(4) == 0 {
			atoms[i] = Prop{Kind: PropNot, Args: []Prop{atoms[i]}}
		}
	}
	t.Cond = atoms[0]
	if len(atoms) > 1 {
		t.Cond = Prop{Kind: []PropKind{PropAnd, PropAnd, PropOr}[rng.Intn(3)], Args: atoms}
	}
	return t
}

// Decide's verdict on racing adding AMOs agrees with exhaustive enumeration, in both modes and
// under AtomicAllWrites and BlockingFetchOrders off.
func TestCountAgreesWithExhaustive(t *testing.T) {
	rng := rand.New(rand.NewSource(27))
	for i := 0; i < 150; i++ {
		tt := genCount(rng)
		for _, m := range []Mode{Strict, Bypass} {
			for _, o := range []Options{DefaultOptions(), {FenceOrdersStores: true, AtomicAllWrites: true}} {
				slow := exhaustiveStates(t, tt, m, o)
				want := Forbidden
				for k := range slow {
					st := State{}
					for _, kv := range strings.Split(strings.TrimSuffix(k, ";"), "; ") {
						var key string
						var v int64
						eq := strings.IndexByte(kv, '=')
						key = kv[:eq]
						fmt.Sscan(kv[eq+1:], &v)
						st[key] = v
					}
					if tt.EvalState(st) {
						want = Allowed
					}
				}
				if v, err := Decide(tt, m, o); err != nil || v != want {
					t.Fatalf("%s %+v: Decide says %v (%v), exhaustive enumeration %v\n%s", m, o, v, err, want, tt)
				}
				if fast := stateSet(t, tt, m, o); subset(fast, slow)+subset(slow, fast) != "" {
					t.Fatalf("%s %+v: Check and Enumerate disagree\n%s", m, o, tt)
				}
			}
		}
	}
}
