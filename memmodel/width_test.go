package memmodel

import (
	"math/rand"
	"testing"
)

// SameWidthAtomicity (OpenSHMEM's letter: atomicity among AMOs of one datatype) lets a 32-bit AMO
// land inside a 64-bit AMO on the same half: the lost updates the default (every backend's 32-
// and 64-bit AMOs are atomic with each other) forbids become allowed, by the checker and by
// model.cat alike; what does not hang on atomicity keeps its verdict.
func TestSameWidthAtomicity(t *testing.T) {
	flips := map[string]bool{"MixW+fadd32+fadd64": true, "MixW+fadd32+fadd64+lost": true, "MixW+cswap64+fadd32": true}
	m := DefaultCat()
	n := 0
	for _, tt := range suite(t) {
		if len(splitWords(tt)) == 0 {
			continue
		}
		n++
		o := DefaultOptions()
		o.SameWidthAtomicity = true
		for _, mode := range []Mode{Strict, Bypass} {
			want := tt.Expect(mode)
			if flips[tt.Name] {
				if want != Forbidden {
					t.Fatalf("%s %s: expected Forbidden by default", tt.Name, mode)
				}
				want = Allowed
			}
			r, err := Check(tt, mode, o)
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != want {
				t.Errorf("%s %s: with SameWidthAtomicity the checker says %s, want %s", tt.Name, mode, r.Verdict, want)
			}
			sameStates(t, m, tt, mode, o)
		}
	}
	if n < 9 {
		t.Errorf("%d mixed-width tests in the suite, want the 9 MixW tests", n)
	}
	rng := rand.New(rand.NewSource(5))
	for tried := 0; tried < 20; {
		data := make([]byte, 48)
		rng.Read(data)
		tt := genTest(data)
		if len(splitWords(tt)) == 0 {
			continue
		}
		tried++
		for _, mode := range []Mode{Strict, Bypass} {
			for _, o := range []Options{{FenceOrdersStores: true, BlockingFetchOrders: true, SameWidthAtomicity: true}} {
				sameStates(t, m, tt, mode, o)
			}
		}
	}
}
