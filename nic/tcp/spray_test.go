package tcp

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// sprayRail is one rail of a planning test: its delivery rate (bytes/s), path delay (seconds)
// and when they were last measured.
type sprayRail struct {
	rate, delay float64
	age         time.Duration
}

// sprayRemote is a remote whose rails carry the given estimates, as measured age ago (nothing
// sampled since: what stands is the kept estimate).
func sprayRemote(rails []sprayRail) *remote {
	r := &remote{t: &Transport{cfg: Config{Spray: SprayCAS}}, st: make([]railState, len(rails))}
	now := time.Now()
	for i, sr := range rails {
		st := &r.st[i]
		st.p = &peer{}
		st.wake = make(chan struct{}, 1)
		st.rate, st.rateAt = sr.rate, now.Add(-sr.age)
		if sr.delay >= 0 {
			st.addDelay(sr.delay)
		}
	}
	return r
}

// plan cuts a put of size bytes as put does, placing each chunk (its bytes join the rail's
// backlog; nothing drains), and returns the bytes and chunks each rail got.
func plan(r *remote, size int) (bytes []int, chunks []int) {
	bytes, chunks = make([]int, len(r.st)), make([]int, len(r.st))
	for o := 0; o < size; {
		n, rail := r.planLocked(size, size-o)
		if n <= 0 || rail < 0 {
			panic("no chunk planned")
		}
		c := &chunk{data: make([]byte, n), striped: true, rail: rail + 1}
		r.placeLocked(c)
		for i := range r.st {
			if len(r.st[i].queue) > 0 && r.st[i].queue[len(r.st[i].queue)-1] == c {
				bytes[i] += n
				chunks[i]++
			}
		}
		o += n
	}
	return bytes, chunks
}

// The rig's unequal rails as one PE's connections see them in an all-to-all: two fast, one
// at a fifth of their rate, one as fast but behind a congested 67 ms queue.
var unequalRails = []sprayRail{{5e6, 2e-4, 0}, {5e6, 2e-4, 0}, {1e6, 2e-4, 0}, {5e6, 0.067, 0}}

// A small message goes on the fast rails in a few large chunks, none on the slow or the
// congested rail; a large one gives every rail a share in proportion to its rate (the
// congested one only what it lands by the time the others finish), and no rail finishes its
// part later than the ideal sharing would (the tail goes to the rails that land it first).
func TestSprayPlanShares(t *testing.T) {
	for _, tc := range []struct {
		size      int
		useSlow   bool // rail 2 gets a share
		useQueued bool // rail 3 gets a share
	}{
		{64 << 10, false, false},
		{256 << 10, true, false},
		{1 << 20, true, true}, // the others take 87 ms: 20 ms past the queue
		{4 << 20, true, true},
		{64 << 20, true, true},
	} {
		r := sprayRemote(unequalRails)
		bytes, chunks := plan(r, tc.size)
		total := 0
		for _, b := range bytes {
			total += b
		}
		if total != tc.size {
			t.Fatalf("%d bytes: planned %d", tc.size, total)
		}
		if (bytes[2] > 0) != tc.useSlow || (bytes[3] > 0) != tc.useQueued {
			t.Errorf("%d bytes: shares %v (chunks %v): want the slow rail used %v, the congested one %v", tc.size, bytes, chunks, tc.useSlow, tc.useQueued)
		}
		if tc.size == 64<<10 && chunks[0]+chunks[1] > 4 {
			t.Errorf("%d bytes: %v chunks on the fast rails: want a few large ones", tc.size, chunks)
		}
		// The ideal: every rail used finishes at T, sum rate_i (T - delay_i) = size.
		var ideal float64
		for lo, hi := 0.0, 100.0; hi-lo > 1e-9; {
			ideal = (lo + hi) / 2
			s := 0.0
			for _, sr := range unequalRails {
				s += sr.rate * max(0, ideal-sr.delay)
			}
			if s > float64(tc.size) {
				hi = ideal
			} else {
				lo = ideal
			}
		}
		for i, sr := range unequalRails {
			if bytes[i] == 0 {
				continue
			}
			// One chunk of slack: shares are cut in whole chunks.
			if done := sr.delay + float64(bytes[i])/sr.rate; done > ideal+float64(maxChunk)/sr.rate {
				t.Errorf("%d bytes: rail %d finishes its %d bytes at %.1f ms, the ideal sharing at %.1f ms (shares %v)", tc.size, i, bytes[i], done*1e3, ideal*1e3, bytes)
			}
		}
	}
}

// A rail not measured for long keeps its estimates: a congested rail the spray gave nothing
// for seconds is still avoided by a small message, not taken for the fastest and sent a burst.
func TestSprayStaleEstimateKept(t *testing.T) {
	rails := append([]sprayRail(nil), unequalRails...)
	rails[3].age = 10 * time.Second
	rails[2].age = 10 * time.Second
	r := sprayRemote(rails)
	for k := 0; k < 8; k++ {
		bytes, chunks := plan(r, 64<<10)
		if bytes[2] > 0 || bytes[3] > 0 {
			t.Fatalf("put %d: shares %v (chunks %v): the stale slow and congested rails were given chunks of a small message", k, bytes, chunks)
		}
		for i := range r.st {
			r.st[i].queue, r.st[i].backlog = nil, 0 // drained: the next put starts afresh
		}
	}
	// A rail never measured gets a small share, not a burst.
	r = sprayRemote(append(unequalRails[:3:3], sprayRail{0, -1, 10 * time.Second}))
	bytes, _ := plan(r, 4<<20)
	if bytes[3] > int(float64(bytes[0])*unequalRails[2].rate/unequalRails[0].rate)+maxChunk {
		t.Fatalf("shares %v: the rail with no estimate was given more than the slowest rail's share", bytes)
	}
}

// A rail given nothing still has its path delay measured (the watchdog's flush probes): with
// no put at all, every rail's delay becomes known.
func TestSprayIdleRailProbed(t *testing.T) {
	j := startRails(t, 2, 3, 1<<16, 2*time.Second, SprayCAS)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		known := 0
		st := j.ts[0].RailStats(1)
		for _, s := range st {
			if s.Delay > 0 && s.Chunks == 0 {
				known++
			}
		}
		if known == len(st) && known > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no delay measured on the idle rails: %+v", st)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A rail that runs out of work between chunks keeps its delivery-rate estimate: a chunk that
// the path's buffers take at once (a burst) says little of the rate the rail sustains, and
// would make a rail the spray gives little to look the fastest; it may raise the estimate only
// up to what another rail sustains. A window in which the rail stays busy does move it.
func TestSprayRateFromBusyWindowsOnly(t *testing.T) {
	r := sprayRemote([]sprayRail{{1e6, 1e-4, 0}})
	r.progress, r.open = make(chan struct{}), map[uint32]struct{}{}
	p := &peer{rail: 0}
	r.st[0].p = p
	send := func(n int) *chunk {
		c := &chunk{data: make([]byte, n), striped: true, rail: 1}
		r.queued += int64(n)
		r.outstanding++
		r.placeLocked(c)
		r.st[0].queue = nil // the writer's part
		c.sentAt.Store(time.Now().UnixNano())
		return c
	}
	// Bursts: 64 KiB answered at once (far above 1 MB/s), the rail idle in between, over
	// several rate windows.
	for k := 0; k < 6; k++ {
		r.mu.Lock()
		c := send(64 << 10)
		r.mu.Unlock()
		r.acked(p, c, nil)
		time.Sleep(rateWindow / 2)
	}
	if got := r.st[0].rate; got != 1e6 {
		t.Fatalf("after bursts on an otherwise idle rail the rate is %.0f B/s: want the 1000000 it was", got)
	}
	// With another rail to the peer sustaining 2 MB/s, the bursts may raise it that far, no
	// further.
	r.st = append(r.st, railState{rate: 2e6})
	for k := 0; k < 40; k++ {
		r.mu.Lock()
		c := send(64 << 10)
		r.mu.Unlock()
		r.acked(p, c, nil)
		time.Sleep(rateWindow / 2)
	}
	if got := r.st[0].rate; got <= 1e6 || got > 2e6 {
		t.Fatalf("after bursts on an idle rail, another sustaining 2 MB/s, the rate is %.0f B/s: want it raised, to 2000000 at most", got)
	}
	r.st[0].rate = 1e6
	// Busy: a chunk always waiting while others are answered, for more than a window.
	r.mu.Lock()
	next := send(64 << 10)
	r.mu.Unlock()
	for start := time.Now(); time.Since(start) < 3*rateWindow; {
		r.mu.Lock()
		c := send(64 << 10)
		r.mu.Unlock()
		r.acked(p, next, nil)
		next = c
		time.Sleep(time.Millisecond)
	}
	if got := r.st[0].rate; got <= 1e6 {
		t.Fatalf("after a busy window answering far faster than 1 MB/s the rate is %.0f B/s: want it raised", got)
	}
}

// A rail not yet measured to a peer is expected to go at the rate it was measured at to
// another peer: the slow rail gets no chunk of a small message to a peer it never carried
// anything to.
func TestSprayRateFromOtherPeers(t *testing.T) {
	r := sprayRemote([]sprayRail{{0, 2e-4, 0}, {0, 2e-4, 0}, {0, 2e-4, 0}, {0, 2e-4, 0}})
	r.t.railRate = make([]atomic.Uint64, 4)
	for i, rate := range []float64{5e6, 5e6, 1e6, 5e6} {
		r.t.railRate[i].Store(math.Float64bits(rate))
	}
	if bytes, chunks := plan(r, 64<<10); bytes[2] != 0 {
		t.Fatalf("shares %v (chunks %v): the rail measured slow to another peer was given a chunk", bytes, chunks)
	}
}
