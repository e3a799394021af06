package memmodel

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"strings"
)

// Power is what a conformance run showed of one test in one mode: how many of the final states
// the model allows it observed, whether it saw the weak outcome (a state satisfying the
// condition of a test the model allows), and how many observed states the model forbids. A run
// that never shows an allowed weak outcome cannot tell a correct fence from a missing one.
type Power struct {
	Test      string
	Mode      Mode
	Verdict   Verdict // the model's
	Observed  int     // allowed states observed
	Allowed   int     // allowed states in all
	Weak      bool    // Verdict Allowed and a state satisfying the condition observed
	Forbidden int     // distinct observed states the model forbids
	Runs      int
	// NotRun, when not empty, marks a test the runner did not run: the features it uses that the
	// runner does not support (Test.Unsupported); the counts are then zero.
	NotRun FeatureSet
}

// NotRunPower is the power row of a test a runner with the features supported skips in mode.
func NotRunPower(t *Test, mode Mode, opt Options, supported FeatureSet) (Power, error) {
	v, err := Decide(t, mode, opt)
	return Power{Test: t.Name, Mode: mode, Verdict: v, NotRun: t.Unsupported(supported)}, err
}

// NewPower measures histogram h against the model's result r.
func NewPower(h *Histogram, r *Result) Power {
	p := Power{Test: h.Test.Name, Mode: r.Mode, Verdict: r.Verdict, Allowed: len(r.States), Runs: h.Total}
	for k, s := range h.States {
		if !r.allowed[k] {
			p.Forbidden++
			continue
		}
		p.Observed++
		if r.Verdict == Allowed && h.Test.EvalState(s) {
			p.Weak = true
		}
	}
	return p
}

// PowerSummary counts the Allowed rows whose weak outcome was seen and the forbidden states, over
// the rows of tests that ran.
func PowerSummary(rows []Power) (weak, allowed, forbidden int) {
	for _, p := range rows {
		if !p.NotRun.Empty() {
			continue
		}
		if p.Verdict == Allowed {
			allowed++
			if p.Weak {
				weak++
			}
		}
		forbidden += p.Forbidden
	}
	return weak, allowed, forbidden
}

// PrintPower writes the power table, one row per test and mode, and a summary line. A row of a
// test the runner did not run shows "-" for its counts and, in the last column, the features it
// lacks (the reason); a row that ran has "-" there.
func PrintPower(w io.Writer, backend string, rows []Power) {
	width := len("test")
	for _, p := range rows {
		width = max(width, len(p.Test))
	}
	fmt.Fprintf(w, "Power (%s)\n%-*s  %-6s  %-9s  %8s  %4s  %9s  %6s  %s\n", backend, width, "test", "mode", "verdict", "states", "weak", "forbidden", "runs", "not run (features the runner lacks)")
	notRun := 0
	for _, p := range rows {
		if !p.NotRun.Empty() {
			notRun++
			fmt.Fprintf(w, "%-*s  %-6s  %-9s  %8s  %4s  %9s  %6s  %s\n", width, p.Test, p.Mode, p.Verdict, "-", "-", "-", "-", p.NotRun)
			continue
		}
		weak := "-"
		if p.Verdict == Allowed {
			weak = "no"
			if p.Weak {
				weak = "yes"
			}
		}
		fmt.Fprintf(w, "%-*s  %-6s  %-9s  %8s  %4s  %9d  %6d  %s\n", width, p.Test, p.Mode, p.Verdict, fmt.Sprintf("%d/%d", p.Observed, p.Allowed), weak, p.Forbidden, p.Runs, "-")
	}
	weak, allowed, forbidden := PowerSummary(rows)
	pct := 100.0
	if allowed > 0 {
		pct = 100 * float64(weak) / float64(allowed)
	}
	fmt.Fprintf(w, "power: weak outcome seen on %d of %d Allowed (test, mode) rows (%.0f%%), %d forbidden states observed", weak, allowed, pct, forbidden)
	if notRun > 0 {
		fmt.Fprintf(w, "; %d rows not run", notRun)
	}
	fmt.Fprintln(w)
}

// Mutate returns t as the model sees a backend with mutation m: fences dropped, quiets turned
// into fences, put-with-signal split into a signal update and a put of the data that may pass
// each other. The model's verdict on the mutated test says whether the mutation matters for t:
// a test that is Forbidden and whose mutation is Allowed can catch it.
func Mutate(t *Test, m Mutation) *Test {
	u := *t
	u.Name = t.Name + "~" + m.String()
	u.Columns = nil
	for _, c := range t.Columns {
		nc := Column{PE: c.PE, Thread: c.Thread}
		for _, in := range c.Instrs {
			switch {
			case m == MutDropFences && in.Op == OpFence:
				continue
			case m == MutQuietAsFence && in.Op == OpQuiet:
				in = Instr{Op: OpFence, Ctx: in.Ctx}
			case m == MutSignalFirst && in.Op == OpPutSig:
				sig := Instr{Op: OpSet, Loc: in.Sig, Val: in.New, Ctx: in.Ctx}
				if in.SigOp == SigAdd {
					sig.Op = OpAdd
				}
				nc.Instrs = append(nc.Instrs, sig)
				in = Instr{Op: OpPut, Loc: in.Loc, Val: in.Val, Ctx: in.Ctx}
			}
			nc.Instrs = append(nc.Instrs, in)
		}
		u.Columns = append(u.Columns, nc)
	}
	return &u
}

// Matters reports whether mutation m can be caught on t in mode: t is Forbidden and its
// mutation Allowed.
func Matters(t *Test, m Mutation, mode Mode, opt Options) (bool, error) {
	v, err := Decide(t, mode, opt)
	if err != nil || v != Forbidden {
		return false, err
	}
	mv, err := Decide(Mutate(t, m), mode, opt)
	return mv == Allowed, err
}

// Measure runs t iters times on runner (as Conform, without printing) and returns its power.
func Measure(ctx context.Context, t *Test, runner Runner, mode Mode, opt Options, iters int, seed int64) (Power, *Histogram, error) {
	r, err := Check(t, mode, opt)
	if err != nil {
		return Power{}, nil, err
	}
	rng := rand.New(rand.NewSource(seed))
	h := NewHistogram(t)
	for i := 0; i < iters; i++ {
		s, err := runner.RunOnce(ctx, t, rng.Int63())
		if err != nil {
			return Power{}, h, fmt.Errorf("memmodel: test %s iteration %d: %w", t.Name, i, err)
		}
		h.Add(s)
	}
	return NewPower(h, r), h, nil
}

// ParseMutation reads a Mutation's name (as String writes it).
func ParseMutation(s string) (Mutation, error) {
	for i, n := range mutationNames {
		if s == n {
			return Mutation(i), nil
		}
	}
	return MutNone, fmt.Errorf("memmodel: unknown mutation %q", s)
}

// Caught counts, for a run of a backend with mutation m, the tests where the model says m matters
// (Matters) and those of them on which the run observed a forbidden state; elsewhere counts the
// other tests on which it did (a mutation may break more than the model's rewrite of it shows).
func Caught(tests []*Test, rows []Power, m Mutation, opt Options) (caught, matters, elsewhere int, missed []string, err error) {
	byName := map[string]*Test{}
	for _, t := range tests {
		byName[t.Name] = t
	}
	for _, p := range rows {
		t := byName[p.Test]
		if t == nil || !p.NotRun.Empty() {
			continue
		}
		ok, err := Matters(t, m, p.Mode, opt)
		if err != nil {
			return 0, 0, 0, nil, err
		}
		switch {
		case ok && p.Forbidden > 0:
			matters++
			caught++
		case ok:
			matters++
			missed = append(missed, p.Test)
		case p.Forbidden > 0:
			elsewhere++
		}
	}
	return caught, matters, elsewhere, missed, nil
}

// PrintCaught writes Caught's result as one line.
func PrintCaught(w io.Writer, tests []*Test, rows []Power, m Mutation, opt Options) error {
	caught, matters, elsewhere, missed, err := Caught(tests, rows, m, opt)
	if err != nil {
		return err
	}
	pct := 100.0
	if matters > 0 {
		pct = 100 * float64(caught) / float64(matters)
	}
	fmt.Fprintf(w, "mutation %s: caught on %d of %d tests where the model says it matters (%.0f%%), and on %d others", m, caught, matters, pct, elsewhere)
	if len(missed) > 0 {
		fmt.Fprintf(w, "; missed: %s", strings.Join(missed, " "))
	}
	fmt.Fprintln(w)
	return nil
}
