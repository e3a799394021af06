package shmem

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/roxamen/roxamen/internal/bootstrap"
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

// A wait's yield steps off its P (runtime.Gosched) only where that can let a PE run: another PE
// of this process, or a process on one P. Elsewhere Gosched wakes an idle P's thread to look for
// work (the runtime's wakep), which takes a core from the PE the wait is for.
func TestSpinnerYieldKeepsThePOfALonePE(t *testing.T) {
	procs := runtime.GOMAXPROCS(2)
	t.Cleanup(func() { runtime.GOMAXPROCS(procs) })
	left := initialized.live.Load() // PEs an earlier test left initialized (none where all finalize)
	one, err := register(bootstrap.Rank{Source: "test", Addr: "yield", PE: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister(one)
	if left == 0 && goschedHelps() {
		t.Errorf("one PE in the process on 2 Ps: its waits yield the P too (Gosched wakes an idle P's thread)")
	}
	two, err := register(bootstrap.Rank{Source: "test", Addr: "yield", PE: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !goschedHelps() {
		t.Errorf("two PEs in the process: a wait keeps the P the other PE's goroutine may need")
	}
	unregister(two)
	runtime.GOMAXPROCS(1)
	if !goschedHelps() {
		t.Errorf("one PE on one P: a wait keeps the P that a transport's goroutine may need")
	}
}
