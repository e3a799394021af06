package memmodel

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// suite parses every litmus file of testdata.
func suite(t *testing.T) []*Test {
	t.Helper()
	files, err := filepath.Glob("testdata/*.litmus")
	if err != nil {
		t.Fatal(err)
	}
	var tests []*Test
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := ParseFile(f, src)
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, ts...)
	}
	if len(tests) < 40 {
		t.Fatalf("testdata holds %d tests, want at least 40", len(tests))
	}
	return tests
}

func mustParse(t *testing.T, src string) *Test {
	t.Helper()
	tt, err := Parse("inline", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

func TestSuiteVerdicts(t *testing.T) {
	for _, tt := range suite(t) {
		if tt.ExpectStrict == VerdictNone || tt.ExpectBypass == VerdictNone {
			t.Errorf("%s: no expect line for both modes", tt.Name)
			continue
		}
		for _, m := range []Mode{Strict, Bypass} {
			r, err := Check(tt, m, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != tt.Expect(m) {
				t.Errorf("%s %s: model says %s, test expects %s; states %v", tt.Name, m, r.Verdict, tt.Expect(m), r.States)
			}
		}
	}
}

// Every file of testdata holds one test and is named after it, <name>.litmus, so that a name in
// the checker's or the runner's output is the file to open.
func TestFileNames(t *testing.T) {
	files, err := filepath.Glob("testdata/*.litmus")
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata: %d files, %v", len(files), err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := ParseFile(f, src)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 1 {
			t.Errorf("%s holds %d tests, want 1", f, len(ts))
			continue
		}
		if want := ts[0].Name + ".litmus"; filepath.Base(f) != want {
			t.Errorf("%s holds test %s: name the file %s", f, ts[0].Name, want)
		}
	}
}

// Bypass only adds outcomes: every state Strict allows, Bypass allows too.
func TestBypassContainsStrict(t *testing.T) {
	differ := 0
	for _, tt := range suite(t) {
		s, err := Check(tt, Strict, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		b, err := Check(tt, Bypass, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range s.States {
			if !b.allowed[st] {
				t.Errorf("%s: strict allows %q, bypass does not", tt.Name, st)
			}
		}
		if s.Verdict != b.Verdict {
			differ++
		}
	}
	if differ < 8 {
		t.Errorf("only %d tests tell the modes apart, want the suite to cover every differing shape (8+)", differ)
	}
}

// The bound: a test with 4 PEs and 12 events is decided well under a second. Checked by
// counting candidate work, not by the clock: the biggest test must stay far below the naive bound.
func TestBigTestDecided(t *testing.T) {
	src, err := os.ReadFile("testdata/Big+4PE+12.litmus")
	if err != nil {
		t.Fatal(err)
	}
	tt := mustParse(t, string(src))
	if n := len(Events(tt)); n != 12 {
		t.Fatalf("Big_4PE_12 has %d events, want 12", n)
	}
	for _, m := range []Mode{Strict, Bypass} {
		r, err := Check(tt, m, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		if len(r.States) == 0 || r.Verdict != tt.Expect(m) {
			t.Errorf("%s: %d states, verdict %s", m, len(r.States), r.Verdict)
		}
	}
}

func BenchmarkSuite(b *testing.B) {
	var tests []*Test
	files, _ := filepath.Glob("testdata/*.litmus")
	for _, f := range files {
		src, _ := os.ReadFile(f)
		ts, err := ParseFile(f, src)
		if err != nil {
			b.Fatal(err)
		}
		tests = append(tests, ts...)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, tt := range tests {
			for _, m := range []Mode{Strict, Bypass} {
				if _, err := Check(tt, m, DefaultOptions()); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// Each interpretation option changes the verdict of the test that depends on it.
func TestOptions(t *testing.T) {
	mpStores := mustParse(t, `SHMEM MP+st+fence+st
PE0 | PE1 ;
st x 1 | get r0 y@0 ;
fence | get r1 x@0 ;
st y 1 | ;
exists (1:r0=1 /\ 1:r1=0)`)
	fetchOrder := mustParse(t, `SHMEM LB+gets
PE0 | PE1 ;
get r0 x@2 | get r1 y@2 ;
put y@2 1 | put x@2 1 ;
exists (0:r0=1 /\ 1:r1=1)`)
	atomic := mustParse(t, `SHMEM AMO+fadd+put
PE0 | PE1 ;
fadd r0 x@2 1 | put x@2 5 ;
exists (0:r0=0 /\ x@2=1)`)
	cases := []struct {
		name      string
		test      *Test
		opt       func(*Options)
		def, with Verdict
	}{
		{"FenceOrdersStores=false", mpStores, func(o *Options) { o.FenceOrdersStores = false }, Forbidden, Allowed},
		{"BlockingFetchOrders=false", fetchOrder, func(o *Options) { o.BlockingFetchOrders = false }, Forbidden, Allowed},
		{"AtomicAllWrites=true", atomic, func(o *Options) { o.AtomicAllWrites = true }, Allowed, Forbidden},
	}
	for _, c := range cases {
		def, err := Check(c.test, Strict, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		o := DefaultOptions()
		c.opt(&o)
		with, err := Check(c.test, Strict, o)
		if err != nil {
			t.Fatal(err)
		}
		if def.Verdict != c.def || with.Verdict != c.with {
			t.Errorf("%s: default %s (want %s), with option %s (want %s)", c.name, def.Verdict, c.def, with.Verdict, c.with)
		}
	}
}

// Executions carry consistent relations: rf pairs a read with a write of its location and the
// value it reads, co is per location, and every execution's final state is among the results.
func TestExecutionRelations(t *testing.T) {
	tt := mustParse(t, `SHMEM MP+fence+wait
PE0 | PE1 ;
put x@1 1 | wait y == 1 ;
fence | ld r0 x ;
put y@1 1 | ;
exists (1:r0=0)`)
	r, err := Check(tt, Bypass, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	seen := map[string]bool{}
	err = Enumerate(tt, Bypass, DefaultOptions(), func(x *Execution) {
		n++
		for _, p := range x.RF {
			if p[0] >= 0 && x.Events[p[0]].Loc != x.Events[p[1]].Loc {
				t.Errorf("rf %v joins different locations", p)
			}
			if p[0] >= 0 && x.Values[p[0]] != x.Values[p[1]] {
				t.Errorf("rf %v: read %d from a write of %d", p, x.Values[p[1]], x.Values[p[0]])
			}
		}
		for _, p := range x.CO {
			if p[0] >= 0 && x.Events[p[0]].Loc != x.Events[p[1]].Loc {
				t.Errorf("co %v joins different locations", p)
			}
		}
		seen[r.Format(x.Final)] = true
		if !r.Allows(x.Final) {
			t.Errorf("execution's final state %v is not among the result's", x.Final)
		}
		if len(x.Ord) == 0 {
			t.Errorf("no preserved order in MP+fence+wait")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || len(seen) != len(r.States) {
		t.Errorf("Enumerate saw %d executions with %d final states, Check %d states", n, len(seen), len(r.States))
	}
}

// Past the checker's bound the error names the test, its size and the bound.
func TestTooLarge(t *testing.T) {
	var b strings.Builder
	b.WriteString("SHMEM Huge\nPE0 ;\n")
	for i := 0; i < 1030; i++ {
		b.WriteString("put x@1 1 ;\n")
	}
	b.WriteString("exists (x@1=1)\n")
	tt := mustParse(t, b.String())
	_, err := Check(tt, Strict, DefaultOptions())
	if err == nil || !strings.Contains(err.Error(), "Huge") || !strings.Contains(err.Error(), "1030") || !strings.Contains(err.Error(), "1024") {
		t.Fatalf("err = %v, want an error naming the test, its 1030 points and the bound 1024", err)
	}
}

// The old bound (64 instants) rejected 17 store/load pairs in bypass (68 instants): decided now.
func TestBypassPastSixtyFourPoints(t *testing.T) {
	var b strings.Builder
	b.WriteString("SHMEM Pairs17\nPE0 | PE1 ;\n")
	for i := 0; i < 17; i++ {
		fmt.Fprintf(&b, "st x%d 1 | ld r%d x%d ;\n", i, i, i)
	}
	b.WriteString("exists (1:r0=0 /\\ 1:r16=0)\n")
	tt := mustParse(t, b.String())
	tt.Columns[1].Instrs = nil // PE1 loads PE0's words through gets, so that they race
	for i := 0; i < 17; i++ {
		tt.Columns[1].Instrs = append(tt.Columns[1].Instrs, Instr{Op: OpGet, Reg: fmt.Sprintf("r%d", i), Loc: Loc{fmt.Sprintf("x%d", i), 0}})
		tt.Columns[0].Instrs = append(tt.Columns[0].Instrs, Instr{Op: OpLd, Reg: fmt.Sprintf("s%d", i), Loc: Loc{fmt.Sprintf("x%d", i), 0}})
	}
	for _, m := range []Mode{Strict, Bypass} {
		v, err := Decide(tt, m, DefaultOptions())
		if err != nil || v != Allowed {
			t.Errorf("%s: %v (%v), want Allowed", m, v, err)
		}
	}
}

func loadTest(t *testing.T, path string) *Test {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tt, err := Parse(path, src)
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

// exhaustiveStates is the slow reference: the final states of every execution Enumerate lists.
func exhaustiveStates(t *testing.T, tt *Test, m Mode, o Options) map[string]bool {
	t.Helper()
	keys := StateKeys(tt)
	s := map[string]bool{}
	if err := Enumerate(tt, m, o, func(x *Execution) { s[x.Final.format(keys)] = true }); err != nil {
		t.Fatal(err)
	}
	return s
}

// Check's fast path (rf and final writes first, one coherence order searched per new state) agrees
// with exhaustive enumeration on every test of the suite, in both modes and under every option, and
// Decide agrees with Check's verdict.
func TestFastAgreesWithExhaustive(t *testing.T) {
	variants := []func(*Options){
		func(*Options) {},
		func(o *Options) { o.FenceOrdersStores = false },
		func(o *Options) { o.BlockingFetchOrders = false },
		func(o *Options) { o.AtomicAllWrites = true },
	}
	for _, tt := range suite(t) {
		for _, m := range []Mode{Strict, Bypass} {
			for _, v := range variants {
				o := DefaultOptions()
				v(&o)
				fast := stateSet(t, tt, m, o)
				r, _ := Check(tt, m, o)
				if v, err := Decide(tt, m, o); err != nil || v != r.Verdict {
					t.Errorf("%s %s %+v: Decide says %v (%v), Check %v", tt.Name, m, o, v, err, r.Verdict)
				}
				slow := exhaustiveStates(t, tt, m, o)
				if k := subset(fast, slow); k != "" {
					t.Errorf("%s %s %+v: Check allows %s, no execution reaches it", tt.Name, m, o, k)
				}
				if k := subset(slow, fast); k != "" {
					t.Errorf("%s %s %+v: an execution reaches %s, Check misses it", tt.Name, m, o, k)
				}
			}
		}
	}
}

// Many writes to one word: the fast path must not enumerate every coherence order (12! here).
func TestManyWritesOneWord(t *testing.T) {
	var b strings.Builder
	b.WriteString("SHMEM Writes12\nPE0 | PE1 | PE2 | PE3 ;\n")
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&b, "put x@0 %d | put x@0 %d | put x@0 %d | put x@0 %d ;\n", 4*i+1, 4*i+2, 4*i+3, 4*i+4)
	}
	b.WriteString("exists (x@0=1)\n")
	tt := mustParse(t, b.String())
	for _, m := range []Mode{Strict, Bypass} {
		r, err := Check(tt, m, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		if len(r.States) != 12 || r.Verdict != Allowed {
			t.Errorf("%s: %d final states, want 12 (any put may land last)", m, len(r.States))
		}
	}
}

// An RMW-heavy test at the size bound (4 PEs, 12 events, six AMOs on one word): Decide's
// pruned search and Check's full listing agree on the verdict.
func TestDecideRMWHeavy(t *testing.T) {
	tt := mustParse(t, `SHMEM RMW+heavy
PE0 | PE1 | PE2 | PE3 ;
get_nbi r0 x@0 | swap r1 x@0 2 | put y@0 2 | add x@0 2 ;
add x@0 2 | put y@0 3 | fadd r6 x@0 1 | fadd r7 x@0 1 ;
swap r8 x@0 2 | put y@0 3 | put x@0 3 | put x@0 2 ;
exists (x@0=5 /\ 2:r6=4 /\ 0:r8=3)`)
	for _, m := range []Mode{Strict, Bypass} {
		r, err := Check(tt, m, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		v, err := Decide(tt, m, DefaultOptions())
		if err != nil || v != r.Verdict {
			t.Errorf("%s: Decide %v (%v), Check %v over %d states", m, v, err, r.Verdict, len(r.States))
		}
	}
}

// testdata/big holds tests past what Check lists or Enumerate walks in CI time (32 racing AMOs,
// 6 PEs and 40 events): Decide decides each. The time is logged, not asserted (go test -v).
func TestBigDecided(t *testing.T) {
	files, err := filepath.Glob("testdata/big/*.litmus")
	if err != nil || len(files) < 8 {
		t.Fatalf("testdata/big: %d files, %v", len(files), err)
	}
	for _, f := range files {
		tt := loadTest(t, f)
		if want := tt.Name + ".litmus"; filepath.Base(f) != want {
			t.Errorf("%s holds test %s: name the file %s", f, tt.Name, want)
		}
		for _, m := range []Mode{Strict, Bypass} {
			start := time.Now()
			v, err := Decide(tt, m, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if v != tt.Expect(m) {
				t.Errorf("%s %s: Decide says %s, the test expects %s", tt.Name, m, v, tt.Expect(m))
			}
			t.Logf("%-22s %-6s %2d PEs %3d events  %-9s %v", tt.Name, m, len(tt.Columns), len(Events(tt)), v, time.Since(start).Round(time.Microsecond))
		}
	}
}
