package testkit

import (
	"strings"
	"sync"
	"testing"
)

func TestRequired(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "1": true, "yes": true} {
		t.Setenv("ROX_TEST_TESTKIT", v)
		if got := Required("ROX_TEST_TESTKIT"); got != want {
			t.Errorf("ROX_TEST_TESTKIT=%q: Required %v, want %v", v, got, want)
		}
	}
}

func TestLockedBuffer(t *testing.T) {
	var b LockedBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("x"))
			}
		})
	}
	wg.Wait()
	if s := b.String(); s != strings.Repeat("x", 800) {
		t.Fatalf("%d bytes", len(s))
	}
}
