package memmodel

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// A correct backend never produces an outcome the strict model forbids.
func TestConformSimulated(t *testing.T) {
	iters := 150
	if testing.Short() {
		iters = 30
	}
	// Four tests at a time: a simulated run mostly waits in its random delays, so they overlap.
	tests := make(chan *Test)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tt := range tests {
				h, err := Conform(context.Background(), tt, SimRunner{}, Strict, DefaultOptions(), iters, 1, nil)
				if err != nil {
					t.Errorf("%v", err)
					continue
				}
				if h.Total != iters {
					t.Errorf("%s: histogram holds %d runs, want %d", tt.Name, h.Total, iters)
				}
			}
		}()
	}
	for _, tt := range suite(t) {
		tests <- tt
	}
	close(tests)
	wg.Wait()
}

// A backend that drops fences is caught: the harness fails on the outcomes fences exist to forbid.
func TestConformCatchesDroppedFences(t *testing.T) {
	for _, name := range []string{"CoWW+put+fence", "2+2W+fences", "MP+fence+wait"} {
		tt := loadTest(t, "testdata/"+name+".litmus")
		var err error
		var out bytes.Buffer
		for round := 0; round < 10 && err == nil; round++ {
			out.Reset()
			_, err = Conform(context.Background(), tt, SimRunner{Mutation: MutDropFences}, Strict, DefaultOptions(), 500, int64(round), &out)
		}
		var fe *ForbiddenError
		if errors.As(err, &fe) && !strings.Contains(out.String(), "FORBIDDEN by the strict model") {
			t.Errorf("%s: histogram does not flag the forbidden state:\n%s", name, out.String())
		}
		if !strings.Contains(out.String(), "Histogram (") || !strings.Contains(out.String(), "Observation "+tt.Name) {
			t.Errorf("%s: not a litmus7-style histogram:\n%s", name, out.String())
		}
		if !errors.As(err, &fe) {
			t.Errorf("%s: fence-dropping backend not caught (err %v)", name, err)
			continue
		}
		if fe.Test != tt.Name || len(fe.States) == 0 {
			t.Errorf("%s: error %v does not name the test and the forbidden state", name, err)
		}
	}
}
