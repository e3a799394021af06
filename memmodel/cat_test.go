package memmodel

import (
	"math/rand"
	"os"
	"strings"
	"testing"
)

// allOptions lists the 8 settings of the three interpretation options.
func allOptions() []Options {
	var os []Options
	for m := 0; m < 8; m++ {
		os = append(os, Options{FenceOrdersStores: m&1 != 0, BlockingFetchOrders: m&2 != 0, AtomicAllWrites: m&4 != 0})
	}
	return os
}

func catStates(t *testing.T, m *Cat, tt *Test, mode Mode, o Options) map[string]bool {
	t.Helper()
	r, err := CheckCat(tt, m, mode, o)
	if err != nil {
		t.Fatal(err)
	}
	s := map[string]bool{}
	for _, st := range r.States {
		s[st] = true
	}
	return s
}

// sameStates fails unless model.cat and the Go axioms allow the same final states of tt.
func sameStates(t *testing.T, m *Cat, tt *Test, mode Mode, o Options) {
	t.Helper()
	cat, fast := catStates(t, m, tt, mode, o), stateSet(t, tt, mode, o)
	if k := subset(cat, fast); k != "" {
		t.Fatalf("%s %s %+v: model.cat allows %s, the Go axioms do not\n%s", tt.Name, mode, o, k, tt)
	}
	if k := subset(fast, cat); k != "" {
		t.Fatalf("%s %s %+v: the Go axioms allow %s, model.cat does not\n%s", tt.Name, mode, o, k, tt)
	}
}

// model.cat and the Go axioms give the same final states (so the same verdict) on every test of
// the suite, in both modes, under every option setting; a test with more than 5000 candidate
// executions (Big+4PE+12: 26244, seconds per setting) under the default options only.
func TestCatAgreesOnSuite(t *testing.T) {
	m := DefaultCat()
	for _, tt := range suite(t) {
		n := 0
		if err := Candidates(tt, DefaultOptions(), func(*Execution) { n++ }); err != nil {
			t.Fatal(err)
		}
		opts := allOptions()
		if n > 5000 {
			opts = []Options{DefaultOptions()}
		}
		for _, mode := range []Mode{Strict, Bypass} {
			for _, o := range opts {
				sameStates(t, m, tt, mode, o)
			}
			r, err := CheckCat(tt, m, mode, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != tt.Expect(mode) {
				t.Errorf("%s %s: model.cat says %s, the test expects %s", tt.Name, mode, r.Verdict, tt.Expect(mode))
			}
		}
	}
}

// ... and on random programs, every program in both modes under every option.
func TestCatAgreesOnRandom(t *testing.T) {
	m := DefaultCat()
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 150; i++ {
		data := make([]byte, 48)
		rng.Read(data)
		tt := genTest(data)
		for _, mode := range []Mode{Strict, Bypass} {
			for _, o := range allOptions() {
				sameStates(t, m, tt, mode, o)
			}
		}
	}
}

// FuzzCat compares the full sets of final states of model.cat and of the Go axioms.
func FuzzCat(f *testing.F) {
	f.Add([]byte{1, 3, 1, 0, 2, 1, 2, 13, 1, 1, 1, 2, 2, 1, 0, 1, 15, 0, 0, 1, 1})
	f.Add([]byte{2, 2, 2, 0, 1, 6, 1, 2, 1, 1, 2, 0, 0, 8, 0, 2, 0, 1, 0, 0, 0, 4, 2})
	m := DefaultCat()
	f.Fuzz(func(t *testing.T, data []byte) {
		tt := genTest(data)
		n := 0
		if err := Candidates(tt, DefaultOptions(), func(*Execution) { n++ }); err != nil {
			t.Fatal(err)
		}
		if n > 1000 { // CheckCat evaluates the file per candidate: keep each input well under a second
			t.Skip("more than 1000 candidate executions")
		}
		for _, mode := range []Mode{Strict, Bypass} {
			for _, o := range allOptions() {
				sameStates(t, m, tt, mode, o)
			}
		}
	})
}

// Strict allows a subset of what CacheBypass allows, on every program and option setting, by
// either statement of the model.
func TestStrictWithinBypass(t *testing.T) {
	m := DefaultCat()
	rng := rand.New(rand.NewSource(5))
	for i := 0; i < 150; i++ {
		data := make([]byte, 48)
		rng.Read(data)
		tt := genTest(data)
		for _, o := range allOptions() {
			if k := subset(stateSet(t, tt, Strict, o), stateSet(t, tt, Bypass, o)); k != "" {
				t.Fatalf("%+v: Go axioms: strict allows %s, bypass does not\n%s", o, k, tt)
			}
			if i%4 == 0 {
				if k := subset(catStates(t, m, tt, Strict, o), catStates(t, m, tt, Bypass, o)); k != "" {
					t.Fatalf("%+v: model.cat: strict allows %s, bypass does not\n%s", o, k, tt)
				}
			}
		}
	}
}

// A change to an axiom in the file changes the verdicts: without the fence rule, MP+fence+wait's
// forbidden outcome becomes allowed.
func TestCatDrivesVerdicts(t *testing.T) {
	src, err := os.ReadFile("model.cat")
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(src), "let fence = pairs &", "let fence = 0 & pairs &", 1)
	broken = strings.Replace(broken, "let RMW = R & W", "let RMW = R & W\nlet 0 = [M] \\ [M]", 1)
	mb, err := ParseCat("broken.cat", broken)
	if err != nil {
		t.Fatal(err)
	}
	tt := loadTest(t, "testdata/MP+fence+wait.litmus")
	for _, c := range []struct {
		m    *Cat
		want Verdict
	}{{DefaultCat(), Forbidden}, {mb, Allowed}} {
		r, err := CheckCat(tt, c.m, Strict, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict != c.want {
			t.Errorf("%s: MP+fence+wait %s, want %s", c.m.Name, r.Verdict, c.want)
		}
	}
}

func TestCatErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"let x = ", `f:1:9: want an expression`},
		{"acyclic po | nope as x", `unknown name "nope"`},
		{"frobnicate", `f:1:1: want let, instants`},
		{"acyclic [M] ; M as x", `; of a relation over events and a set`},
	} {
		m, err := ParseCat("f", c.src)
		if err == nil {
			_, err = CheckCat(loadTest(t, "testdata/MP+fence+wait.litmus"), m, Strict, DefaultOptions())
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.src, err, c.want)
		}
	}
}
