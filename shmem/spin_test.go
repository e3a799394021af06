package shmem

import (
	"errors"
	"testing"
	"time"
)

// fakeSpinClock replaces the spinner's clock, yield and sleep with counters on a clock that only
// the test (and a sleep, by what it asked for) advances.
func fakeSpinClock(t *testing.T) (now *time.Time, yields, sleeps *int) {
	t.Helper()
	clock := time.Unix(1000, 0)
	var y, s int
	oldClock, oldSleep, oldYield := spinClock, spinSleep, spinYield
	spinClock = func() time.Time { return clock }
	spinSleep = func(d time.Duration) { s++; clock = clock.Add(d) }
	spinYield = func() { y++ }
	t.Cleanup(func() { spinClock, spinSleep, spinYield = oldClock, oldSleep, oldYield })
	return &clock, &y, &s
}

// A wait neither sleeps nor yields while it is short: a sleep's wake-up comes at the timer's
// granularity, so sleeping after a few microseconds made barriers cost a millisecond now and then.
// Past spinFor it does sleep (a long wait must not burn a core), and the deadline still holds.
func TestSpinnerSleepsOnlyAfterSpinFor(t *testing.T) {
	const perPoll = 100 * time.Nanosecond
	now, yields, sleeps := fakeSpinClock(t)
	w := &World{pe: 3, timeout: time.Second}
	sp := w.spin(nil, "WaitUntil")
	start := *now
	for now.Sub(start) < spinFor {
		if err := sp.next(func() string { return "a word" }); err != nil {
			t.Fatal(err)
		}
		if *sleeps > 0 {
			t.Fatalf("slept after waiting %v (%d polls), before spinFor (%v)", now.Sub(start), sp.n, spinFor)
		}
		if *yields > 0 && now.Sub(start) < yieldAfter {
			t.Fatalf("yielded after waiting %v, before yieldAfter (%v)", now.Sub(start), yieldAfter)
		}
		*now = now.Add(perPoll)
	}
	if *yields == 0 {
		t.Errorf("no yield in %v of waiting", spinFor)
	}
	var err error
	for i := 0; i < 1e6 && err == nil; i++ {
		err = sp.next(func() string { return "a word" })
		*now = now.Add(perPoll)
	}
	if *sleeps == 0 {
		t.Errorf("no sleep in a wait of %v", now.Sub(start))
	}
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("after %v: %v, want ErrTimeout", now.Sub(start), err)
	}
}

// On a node with more PEs than CPUs the PE a wait depends on may be waiting for this core: the
// wait yields at its first clock read, not after yieldAfter.
func TestSpinnerYieldsAtOnceWhenOversubscribed(t *testing.T) {
	now, yields, _ := fakeSpinClock(t)
	w := &World{pe: 1, timeout: time.Second, oversubscribed: true}
	sp := w.spin(nil, "WaitUntil")
	start := *now
	for *yields == 0 {
		if err := sp.next(func() string { return "a word" }); err != nil {
			t.Fatal(err)
		}
		*now = now.Add(10 * time.Nanosecond)
	}
	if waited := now.Sub(start); waited >= yieldAfter {
		t.Fatalf("first yield after %v of waiting (%d polls); want it at the first clock read", waited, sp.n)
	}
}
