package memmodel

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"strings"
	"time"
)

// Runner is what a backend implements to be checked against the model: run every PE's column of
// t once, from fresh memory holding the test's initial values, and return the final state (every
// register "PE:reg" and every location "x@PE" the condition names, see StateKeys). seed drives the
// backend's random delays so that iterations interleave differently.
type Runner interface {
	RunOnce(ctx context.Context, t *Test, seed int64) (State, error)
}

// Histogram counts the final states a backend produced, litmus7-style.
type Histogram struct {
	Test   *Test
	Keys   []string
	Counts map[string]int
	States map[string]State
	Total  int
}

// NewHistogram returns an empty histogram for t.
func NewHistogram(t *Test) *Histogram {
	return &Histogram{Test: t, Keys: StateKeys(t), Counts: map[string]int{}, States: map[string]State{}}
}

// Add records one observed final state.
func (h *Histogram) Add(s State) {
	k := s.format(h.Keys)
	if _, ok := h.States[k]; !ok {
		h.States[k] = s
	}
	h.Counts[k]++
	h.Total++
}

// Forbidden lists the observed states that r (the model's answer in some mode) does not allow.
func (h *Histogram) Forbidden(r *Result) []string {
	var bad []string
	for k := range h.Counts {
		if !r.allowed[k] {
			bad = append(bad, k)
		}
	}
	sort.Strings(bad)
	return bad
}

// Print writes the histogram like litmus7: "*>" marks states satisfying the condition, ":>" the
// others, and states that r forbids are flagged.
func (h *Histogram) Print(w io.Writer, r *Result, elapsed time.Duration) {
	keys := make([]string, 0, len(h.Counts))
	for k := range h.Counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "Test %s %s (%s)\n", h.Test.Name, r.Verdict, r.Mode)
	fmt.Fprintf(w, "Histogram (%d states)\n", len(keys))
	pos := 0
	for _, k := range keys {
		mark := ":>"
		if h.Test.EvalState(h.States[k]) {
			mark = "*>"
			pos += h.Counts[k]
		}
		flag := ""
		if !r.allowed[k] {
			flag = "   <- FORBIDDEN by the " + r.Mode.String() + " model"
		}
		fmt.Fprintf(w, "%-8d%s%s%s\n", h.Counts[k], mark, k, flag)
	}
	validated := pos > 0
	switch h.Test.Quant {
	case NotExists:
		validated = pos == 0
	case Forall:
		validated = pos == h.Total
	}
	if validated {
		fmt.Fprintln(w, "Ok")
	} else {
		fmt.Fprintln(w, "No")
	}
	fmt.Fprintf(w, "Witnesses\nPositive: %d, Negative: %d\n", pos, h.Total-pos)
	is := "is NOT validated"
	if validated {
		is = "is validated"
	}
	fmt.Fprintf(w, "Condition %s (%s) %s\n", h.Test.Quant, h.Test.Cond, is)
	obs := "Sometimes"
	switch {
	case pos == 0:
		obs = "Never"
	case pos == h.Total:
		obs = "Always"
	}
	fmt.Fprintf(w, "Observation %s %s %d %d\n", h.Test.Name, obs, pos, h.Total-pos)
	fmt.Fprintf(w, "Time %s %.2f\n\n", h.Test.Name, elapsed.Seconds())
}

// ForbiddenError reports observed outcomes the model forbids.
type ForbiddenError struct {
	Test   string
	Mode   Mode
	States []string
	Counts []int
}

func (e *ForbiddenError) Error() string {
	var parts []string
	for i, s := range e.States {
		parts = append(parts, fmt.Sprintf("[%s] x%d", s, e.Counts[i]))
	}
	return fmt.Sprintf("memmodel: test %s: the backend produced %d outcome(s) the %s model forbids: %s",
		e.Test, len(e.States), e.Mode, strings.Join(parts, ", "))
}

// CheckHistogram returns a *ForbiddenError if h holds a state r forbids.
func CheckHistogram(h *Histogram, r *Result) error {
	bad := h.Forbidden(r)
	if len(bad) == 0 {
		return nil
	}
	e := &ForbiddenError{Test: h.Test.Name, Mode: r.Mode, States: bad}
	for _, k := range bad {
		e.Counts = append(e.Counts, h.Counts[k])
	}
	return e
}

// Conform runs t iters times on runner with random seeds from seed, prints the histogram to out,
// and fails with a *ForbiddenError if any observed outcome is forbidden by mode.
func Conform(ctx context.Context, t *Test, runner Runner, mode Mode, opt Options, iters int, seed int64, out io.Writer) (*Histogram, error) {
	if iters <= 0 {
		return nil, fmt.Errorf("memmodel: Conform %s: iterations %d, want > 0", t.Name, iters)
	}
	r, err := Check(t, mode, opt)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewSource(seed))
	h := NewHistogram(t)
	start := time.Now()
	for i := 0; i < iters; i++ {
		s, err := runner.RunOnce(ctx, t, rng.Int63())
		if err != nil {
			return h, fmt.Errorf("memmodel: test %s iteration %d: %w", t.Name, i, err)
		}
		h.Add(s)
	}
	if out != nil {
		h.Print(out, r, time.Since(start))
	}
	return h, CheckHistogram(h, r)
}
