package tcp

// Rails: a PE reaches a peer through several NICs, one connection per (peer, rail).
//
// With one rail the transport is what tcp.go describes: puts are pipelined without answers and
// a Flush answer reports them. With two or more (both PEs publish as many addresses), every put
// becomes one or more chunks: a put of at least Config.StripeThreshold bytes is cut into chunks
// that travel on several rails at once and are written in place at the target; a smaller one is
// one chunk on one rail. Each chunk is answered (flagAck), and the sender keeps a copy until the
// answer comes, so that a rail lost mid-transfer has its unanswered chunks sent again on the
// others (the data is copied once, when Put takes it; what is kept is bounded by the window).
//
// Ordering across rails, where one connection no longer gives it for free:
//   - Fence(pe), Get and AMO wait until every chunk sent to pe before them is answered, so that
//     nothing after them can overtake what came before.
//   - Put-with-signal: the signal travels in its own numbered request, placed on a rail only
//     once every chunk of its data has been answered (a small one carries its data and signal
//     in one request, applied in that order at the target).
//   - Quiet waits until every chunk to pe is answered and reports the first error among them.
//   - AMOs, signals and chunks carry a sequence number; the target records what each did
//     (dedup, per source PE), so that one resent after a lost answer is not applied twice: an
//     AMO's resend gets the recorded old value, a signal's is skipped, a chunk already written
//     is not written again (a resent write cannot undo a later one). The sender never lets its
//     numbers run more than maxSeqGap ahead of the oldest one unanswered, so the target's record
//     (dedupWindow entries) always still holds it.
//
// Spray (Config.Spray) picks each chunk's rail: "cas" (congestion-aware) expects bytes put on a
// rail to land after its path delay (the least write-to-answer time, less the time spent behind
// this PE's own bytes) plus the bytes already waiting there (queued or unanswered) at its
// delivery rate (bytes answered per second while busy), and cuts each put so that the rails it
// uses all finish their part at once, as early as can be (planLocked): a few large chunks on
// the rails that can carry it soonest, in proportion to their rates, and none on a rail that
// would land its part after the others could have finished it. Estimates are kept while a
// rail carries nothing, and an idle rail's delay is measured with a flush now and then; "rr"
// takes the rails in turn; "single" uses the lowest rail alive.
//
// Failure: a rail whose connection breaks, or whose answers stop for railLimit while another
// rail still answers, is retired: its unanswered and queued chunks go to the other rails, and
// the PE that dialed it dials it again later (retryDelay, doubling). The job sees no error while
// one rail remains; when the last rail to a PE is lost (its own limit being Config.Timeout),
// every operation to that PE fails with an error that names it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Spray policies (Config.Spray, ROX_SPRAY).
const (
	SprayCAS    = "cas"
	SprayRR     = "rr"
	SpraySingle = "single"
)

const (
	maxRails               = 64
	defaultStripeThreshold = 64 << 10
	minChunk               = 16 << 10
	maxChunk               = 256 << 10
	windowPerRail          = 4 << 20 // bytes a PE may have unanswered to one peer, per rail alive
	dedupWindow            = 1 << 14 // numbered operations the target remembers per source PE
	maxSeqGap              = dedupWindow / 2
	rateWindow             = 20 * time.Millisecond
	delaySamples           = 4                      // the path delay is the least of the last ones
	probeEvery             = 250 * time.Millisecond // an idle rail's delay is sampled this often (a flush)
	retryDelay             = 500 * time.Millisecond
	maxRetryDelay          = 10 * time.Second
)

// chunk is a piece of a put (or a signal) on its way to a rail, kept until it is answered.
type chunk struct {
	typ     uint8 // reqPut or reqPutSignal
	off     uint64
	data    []byte // a copy: the caller's buffer may be reused once Put returns
	sigOp   uint8
	sigVal  uint64
	sigOff  uint64
	seq     uint32
	parent  *stripe      // the put-with-signal this chunk carries data for
	striped bool         // a piece of a large put: sprayed; else it takes the first rail alive
	rail    int          // striped: 1 + the rail planLocked chose for it; 0: pickLocked's
	sentAt  atomic.Int64 // unix ns of the write of its latest send
	mark    int64        // its rail's answered bytes when its writer took it: what answers before it was ahead of it
}

// stripe holds back a put-with-signal's signal until every chunk of its data is answered.
type stripe struct {
	left int
	sig  *chunk
}

type railState struct {
	p       *peer // the live connection; nil while the rail is down
	queue   []*chunk
	wake    chan struct{}
	backlog int64   // bytes queued or unanswered on this rail
	minRTT  float64 // seconds, least write-to-answer time seen
	// The path's delay, what a chunk placed on an idle rail still waits (the propagation, and
	// the queues that other traffic keeps standing on the path): the least of the last
	// delaySamples write-to-answer times, each less the time the chunk queued behind this PE's
	// own bytes on the rail (the bytes answered before it and its own, at the rail's rate; the
	// spray counts those), so that a queue that drains stops counting at once, one sample that
	// a stalled host made late does not count, and a queue that builds counts once every
	// recent sample shows it. The estimate stands while the spray gives the rail nothing, and
	// the watchdog samples an idle rail with a flush every probeEvery, which puts nothing of
	// the job's on it: a congested rail keeps its high delay, rather than being taken for fast
	// again and given a burst of chunks that the operation then waits for.
	delays    [delaySamples]float64
	delayN    int       // samples taken (the latest at delays[(delayN-1)%delaySamples])
	rate      float64   // bytes per second, smoothed delivery rate while busy; 0: unknown
	rateAt    time.Time // its last sample
	lastAck   time.Time
	probeAt   time.Time // the last delay probe sent
	probeMark int64     // acked when it was sent: a chunk answered since spoils it
	// The delivery rate is sampled over windows of at least rateWindow (answers come in bursts:
	// the target gathers them into one write), restarted when the rail goes from idle to busy:
	// the bytes answered over the time within the window that the rail had bytes waiting, so
	// that a rail the spray gives a chunk now and then is not judged by its idle time.
	winStart  time.Time
	winBytes  int64
	winBusy   time.Duration // busy time in the window before busySince
	busySince time.Time     // when the rail last went from idle to busy
	winIdle   bool          // the rail ran out of work during the window: the window says
	//                         little of its rate (a chunk or two: their round trip counts, or a
	//                         burst the path's buffers took at line rate); only windows in which
	//                         it stayed busy set it, so that how the spray used a rail does not
	//                         bias the estimate it uses (an idle one may raise it, see acked)
	acked   int64 // bytes answered, for RailStats
	chunks  int64
	retired int
}

// remote is everything this PE keeps about one peer across its rails.
type remote struct {
	t       *Transport
	pe      int
	n       atomic.Int32           // rails to this peer (min of both sides'); 0 until known
	rails   []atomic.Pointer[peer] // rails[r]: the connection on rail r
	addrs   []string               // the peer's rail addresses (set by the dialing side)
	lastAns atomic.Int64           // unix ns: the latest answer on any rail (or rail joined)

	mu          sync.Mutex
	st          []railState
	progress    chan struct{} // closed (and replaced) when a chunk is answered or a rail changes
	queued      int64         // bytes of chunks not yet answered
	outstanding int           // chunks (and held-back signals) not yet answered
	open        map[uint32]struct{}
	low, seq    uint32 // the oldest number possibly unanswered; the latest issued
	rr          int
	firstErr    error       // the first error the target reported for a chunk since the last Quiet
	probed      []time.Time // probed[rail]: the last probe check sent (the watchdog's only)
	dead        error       // every rail is lost
	closed      bool
}

func newRemote(t *Transport, pe int) *remote {
	r := &remote{t: t, pe: pe, rails: make([]atomic.Pointer[peer], len(t.cfg.Rails)),
		st: make([]railState, len(t.cfg.Rails)), probed: make([]time.Time, len(t.cfg.Rails)), progress: make(chan struct{}), open: map[uint32]struct{}{}, low: 1}
	for i := range r.st {
		r.st[i].wake = make(chan struct{}, 1)
	}
	return r
}

func (r *remote) multi() bool { return r.n.Load() > 1 }

// setRails records how many rails the two PEs share; both ends must agree.
func (r *remote) setRails(n int) error {
	if n < 1 || n > len(r.rails) {
		return fmt.Errorf("%d rails (this PE has %d)", n, len(r.rails))
	}
	if !r.n.CompareAndSwap(0, int32(n)) && int(r.n.Load()) != n {
		return fmt.Errorf("%d rails, after %d", n, r.n.Load())
	}
	return nil
}

// complete reports whether every rail to the peer is connected.
func (r *remote) complete() bool {
	n := int(r.n.Load())
	if n == 0 {
		return false
	}
	for i := 0; i < n; i++ {
		if r.rails[i].Load() == nil {
			return false
		}
	}
	return true
}

// kick wakes everything waiting for progress; the caller holds mu.
func (r *remote) kick() {
	close(r.progress)
	r.progress = make(chan struct{})
}

// railUp starts using a joined connection on its rail.
func (r *remote) railUp(p *peer) {
	r.mu.Lock()
	st := &r.st[p.rail]
	if r.closed || r.dead != nil {
		r.mu.Unlock()
		return
	}
	st.p, st.backlog, st.minRTT, st.rate, st.lastAck = p, 0, 0, 0, time.Time{}
	st.delayN = 0
	r.lastAns.Store(max(r.lastAns.Load(), time.Now().UnixNano()))
	r.kick()
	r.mu.Unlock()
	r.t.wg.Add(1)
	go r.writer(p)
}

// railDown retires p's rail: its queued and unanswered chunks (lost) go to the other rails.
func (r *remote) railDown(p *peer, err error, lost []*chunk) {
	t := r.t
	r.mu.Lock()
	st := &r.st[p.rail]
	if st.p == p {
		st.p = nil
		st.retired++
		lost = append(lost, st.queue...)
		st.queue, st.backlog = nil, 0
	}
	alive := r.aliveLocked()
	if alive == 0 && r.dead == nil && !r.closed {
		r.dead = fmt.Errorf("%w: PE %d: every rail to it is lost (the last, rail %d: %v)", ErrPeerLost, r.pe, p.rail, err)
	}
	if t.closed.Load() {
		r.closed = true
	}
	for _, c := range lost {
		if r.dead != nil || r.closed {
			r.finishLocked(c)
		} else {
			r.placeLocked(c)
		}
	}
	dead := r.dead
	r.kick()
	r.mu.Unlock()
	if t.closed.Load() || errors.Is(err, errBye) {
		return
	}
	if dead != nil {
		t.logf("tcp: PE %d: %v", t.cfg.PE, dead)
		return
	}
	t.logf("tcp: PE %d: rail %d to PE %d retired (%d chunks sent again on the %d other rails): %v", t.cfg.PE, p.rail, r.pe, len(lost), alive, err)
	if t.cfg.PE < r.pe && p.rail < len(r.addrs) {
		t.wg.Add(1)
		go r.redial(p.rail)
	}
}

// delay is the rail's path delay (see railState), -1 while it has no sample.
func (st *railState) delay() float64 {
	if st.delayN == 0 {
		return -1
	}
	d := math.Inf(1)
	for _, v := range st.delays[:min(st.delayN, delaySamples)] {
		d = min(d, v)
	}
	return d
}

// addDelay records a path delay sample (seconds).
func (st *railState) addDelay(d float64) {
	st.delays[st.delayN%delaySamples] = d
	st.delayN++
}

func (r *remote) aliveLocked() int {
	n := 0
	for i := range r.st {
		if r.st[i].p != nil {
			n++
		}
	}
	return n
}

// redial connects a retired rail again, later and less often each time it fails.
func (r *remote) redial(rail int) {
	t := r.t
	defer t.wg.Done()
	delay := retryDelay
	for {
		select {
		case <-t.done:
			return
		case <-time.After(delay):
		}
		r.mu.Lock()
		stop := r.dead != nil || r.closed || r.st[rail].p != nil
		r.mu.Unlock()
		if stop {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(t.cfg.Timeout, 2*time.Second))
		go func() {
			select {
			case <-t.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		err := t.dial(ctx, r.pe, rail, r.addrs[rail])
		cancel()
		if err == nil {
			t.logf("tcp: PE %d: rail %d to PE %d is back", t.cfg.PE, rail, r.pe)
			return
		}
		delay = min(2*delay, maxRetryDelay)
	}
}

func (r *remote) close() {
	r.mu.Lock()
	r.closed = true
	r.kick()
	r.mu.Unlock()
}

// writer sends the chunks queued on p's rail, one after another, while p lives.
func (r *remote) writer(p *peer) {
	defer r.t.wg.Done()
	var batch []*chunk
	for {
		r.mu.Lock()
		st := &r.st[p.rail]
		for st.p == p && len(st.queue) == 0 {
			r.mu.Unlock()
			select {
			case <-st.wake:
			case <-p.failed:
			}
			r.mu.Lock()
		}
		if st.p != p {
			r.mu.Unlock()
			return
		}
		// Small chunks queued together go out in one write.
		batch = batch[:0]
		size := 0
		for len(st.queue) > 0 && (len(batch) == 0 || size+len(st.queue[0].data) <= flushThreshold) && len(batch) < 256 {
			c := st.queue[0]
			c.mark = st.acked
			st.queue[0] = nil
			st.queue = st.queue[1:]
			batch = append(batch, c)
			size += len(c.data)
		}
		r.mu.Unlock()
		if sent, err := p.sendChunks(batch); err != nil {
			if !sent {
				// p failed before the chunks were handed to it: they are nobody's yet.
				r.mu.Lock()
				for _, c := range batch {
					if r.dead != nil || r.closed {
						r.finishLocked(c)
					} else {
						r.placeLocked(c)
					}
				}
				r.kick()
				r.mu.Unlock()
			}
			return
		}
	}
}

// railEst is what the spray expects of rail i: bytes placed on it now begin to land start
// seconds from now (its path delay, plus what waits there at its rate) and then go at rate
// bytes per second; a chunk of n bytes is done at start + n/rate.
type railEst struct {
	i           int
	start, rate float64
}

// estimatesLocked returns the estimates of the rails alive (appended to buf). Estimates are kept
// while a rail is given nothing (railState). A rail not measured yet to this peer is expected
// to go at the rate it was last measured at to any peer (the NIC is the same; an all-to-all of
// small messages keeps most pairs from ever filling a rail), else as slow as the slowest rail
// measured (so that it gets a small share, not a burst, until its own answers say more), with
// as little delay as the least one; all rails are alike while none is measured.
func (r *remote) estimatesLocked(now time.Time, buf []railEst) []railEst {
	rateOf := func(i int) float64 {
		if st := &r.st[i]; st.rate > 0 || r.t.railRate == nil {
			return st.rate
		}
		return math.Float64frombits(r.t.railRate[i].Load())
	}
	slowest, least := math.Inf(1), math.Inf(1)
	for i := range r.st {
		st := &r.st[i]
		if st.p == nil {
			continue
		}
		if rate := rateOf(i); rate > 0 {
			slowest = min(slowest, rate)
		}
		if d := st.delay(); d >= 0 {
			least = min(least, d)
		}
	}
	if math.IsInf(slowest, 1) {
		slowest = 1e9
	}
	if math.IsInf(least, 1) {
		least = 0
	}
	for i := range r.st {
		st := &r.st[i]
		if st.p == nil {
			continue
		}
		e := railEst{i: i, rate: rateOf(i)}
		if e.rate <= 0 {
			e.rate = slowest
		}
		d := st.delay()
		if d < 0 {
			d = least
		}
		e.start = d + float64(st.backlog)/e.rate
		buf = append(buf, e)
	}
	return buf
}

// pickLocked chooses the rail for a chunk of size bytes (a resent one, or any under rr and
// single); -1 when none is alive.
func (r *remote) pickLocked(size int) int {
	switch r.t.cfg.Spray {
	case SpraySingle:
		for i := range r.st {
			if r.st[i].p != nil {
				return i
			}
		}
	case SprayRR:
		for k := 0; k < len(r.st); k++ {
			i := (r.rr + k) % len(r.st)
			if r.st[i].p != nil {
				r.rr = i + 1
				return i
			}
		}
	default:
		// The rail expected to finish the chunk first.
		var buf [8]railEst
		best, bestT := -1, math.Inf(1)
		for _, e := range r.estimatesLocked(time.Now(), buf[:0]) {
			if t := e.start + float64(size)/e.rate; t < bestT {
				best, bestT = e.i, t
			}
		}
		return best
	}
	return -1
}

// planLocked cuts the next chunk of a striped put with left bytes still to queue: it returns
// the chunk's size and, under cas, its rail (-1: pickLocked's, at placement).
//
// Under cas the remaining bytes are shared out so that every rail given some finishes at the
// same time T, the earliest possible (water-filling over the estimates: rail i takes
// rate_i * (T - start_i), and a rail whose start is after T takes nothing), and the next chunk
// is the share of the rail that starts first, at most maxChunk. A rail whose share would be
// under half a minChunk takes nothing and the others share its part: a message is a few large chunks
// on the rails that can carry it soonest, in proportion to their rates, not one chunk on
// every rail; and its last chunks, T being near, only go where they land by T, so that a
// message never waits for a slow or congested rail that the fast ones could have beaten.
// Recomputed for every chunk from the estimates of the moment (what the earlier chunks added
// to the rails' queues included), a long put adapts as the rails do.
//
// A chunk takes at most as long as maxChunk on the fastest rail: a slower rail gets smaller
// ones, so that what an estimate's error can add to the end of a put is alike on every rail.
func (r *remote) planLocked(total, left int) (size, rail int) {
	if r.t.cfg.Spray != SprayCAS {
		alive := max(r.aliveLocked(), 1)
		return min(max((total+2*alive-1)/(2*alive), minChunk), maxChunk, left), -1
	}
	var buf [8]railEst
	est := r.estimatesLocked(time.Now(), buf[:0])
	if len(est) == 0 {
		return min(left, maxChunk), -1
	}
	share, first := waterFill(est, float64(left))
	fastest := 0.0
	for _, e := range est {
		fastest = max(fastest, e.rate)
	}
	size = int(min(share, maxChunk*est[first].rate/fastest))
	if size >= 2*4096 {
		size &^= 4095 // whole pages: cheaper copies on both sides
	}
	if size < minChunk || left-size < minChunk {
		size = min(max(size, minChunk), left)
		if left-size < minChunk {
			size = left // no runt chunk at the end
		}
	}
	return size, est[first].i
}

// waterFill shares n bytes among the rails of est so that all those given some finish at one
// time T, as early as possible, leaving out any whose share would be under half a minChunk
// (while another remains: four equal rails still share a put of 4 minChunks). It returns the share of the rail that starts first among those given
// some, and that rail's index in est.
func waterFill(est []railEst, n float64) (share float64, first int) {
	var inBuf [8]bool
	in := inBuf[:0]
	for range est {
		in = append(in, true)
	}
	for {
		// T over the rails still in, ignoring those that start after it.
		var t float64
		for {
			sr, srs := 0.0, 0.0
			for k, e := range est {
				if in[k] {
					sr += e.rate
					srs += e.rate * e.start
				}
			}
			t = (n + srs) / sr
			late := -1
			for k, e := range est {
				if in[k] && e.start >= t && (late < 0 || e.start > est[late].start) {
					late = k
				}
			}
			if late < 0 {
				break
			}
			in[late] = false // never all: the earliest start is before T
		}
		// Leave out the rail with the least share under half a minChunk, unless it is the last.
		small, count := -1, 0
		for k, e := range est {
			if !in[k] {
				continue
			}
			count++
			if s := e.rate * (t - e.start); s < minChunk/2 && (small < 0 || s < est[small].rate*(t-est[small].start)) {
				small = k
			}
		}
		if small < 0 || count == 1 {
			first = -1
			for k, e := range est {
				if in[k] && (first < 0 || e.start < est[first].start) {
					first = k
				}
			}
			return est[first].rate * (t - est[first].start), first
		}
		in[small] = false
	}
}

// placeLocked queues c on a rail; there must be one alive. Small messages all take the first
// rail alive, so that they stay in issue order among themselves, as on one connection.
func (r *remote) placeLocked(c *chunk) {
	i := 0
	if c.striped {
		if i = c.rail - 1; i < 0 || r.st[i].p == nil {
			i = r.pickLocked(len(c.data))
		}
		c.rail = 0 // sent again after a loss: picked again
	} else {
		for r.st[i].p == nil {
			i++
		}
	}
	st := &r.st[i]
	if st.backlog == 0 {
		now := time.Now()
		st.busySince = now
		if st.winBytes == 0 {
			st.winStart, st.winIdle, st.winBusy = now, false, 0 // busy from now: a fresh rate window
		}
	}
	st.queue = append(st.queue, c)
	st.backlog += int64(len(c.data))
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// finishLocked retires a chunk: answered, or dropped with its peer.
func (r *remote) finishLocked(c *chunk) {
	r.queued -= int64(len(c.data))
	r.outstanding--
	r.doneSeqLocked(c.seq)
	if s := c.parent; s != nil {
		c.parent = nil
		r.releaseLocked(s)
	}
}

func (r *remote) doneSeqLocked(seq uint32) {
	if seq == 0 {
		return
	}
	delete(r.open, seq)
	for r.low != r.seq+1 {
		if _, ok := r.open[r.low]; ok {
			break
		}
		if r.low++; r.low == 0 {
			r.low = 1
		}
	}
}

// acked is called by p's reader with a chunk's answer.
func (r *remote) acked(p *peer, c *chunk, remoteErr error) {
	now := time.Now()
	r.mu.Lock()
	st := &r.st[p.rail]
	if st.p == p {
		n := int64(len(c.data))
		st.backlog -= n
		st.acked += n
		st.chunks++
		sent := time.Unix(0, c.sentAt.Load())
		if rtt := now.Sub(sent).Seconds(); rtt > 0 {
			if st.minRTT == 0 || rtt < st.minRTT {
				st.minRTT = rtt
			}
			d := rtt
			if st.rate > 0 {
				d = max(0, rtt-float64(st.acked-c.mark)/st.rate) // its own bytes too: the spray counts them at the rate
			}
			st.addDelay(d)
		}
		st.winBytes += n
		if st.backlog == 0 {
			st.winBusy += now.Sub(st.busySince)
			st.winIdle = true
		}
		if d := now.Sub(st.winStart); d >= max(rateWindow, time.Duration(2*st.minRTT*float64(time.Second))) {
			busy := st.winBusy
			if st.backlog > 0 {
				busy += now.Sub(st.busySince)
				st.busySince = now
			}
			if busy > 0 {
				switch s := float64(st.winBytes) / busy.Seconds(); {
				case st.winIdle:
					// The rail ran out of work: it can do at least s, but a burst that the
					// path's buffers took at line rate says too much. So s may raise the
					// estimate only up to the best rate another rail to the peer has
					// sustained: a rail judged slow once (a window in which the host stalled)
					// and then given too little to stay busy is not held at that for good.
					best := 0.0
					for k := range r.st {
						if k != p.rail {
							best = max(best, r.st[k].rate)
						}
					}
					if s = min(s, best); st.rate > 0 && s > st.rate {
						st.rate, st.rateAt = 0.75*st.rate+0.25*s, now
					}
				case st.rate == 0:
					st.rate, st.rateAt = s, now
				default:
					st.rate, st.rateAt = 0.75*st.rate+0.25*s, now // an EWMA: one window is noisy on a loaded host
				}
				if st.rate > 0 && r.t.railRate != nil {
					r.t.railRate[p.rail].Store(math.Float64bits(st.rate))
				}
			}
			st.winStart, st.winBytes, st.winIdle, st.winBusy = now, 0, false, 0
		}
		st.lastAck = now
	}
	if remoteErr != nil && r.firstErr == nil {
		r.firstErr = remoteErr
	}
	r.finishLocked(c)
	r.kick()
	r.mu.Unlock()
}

// waitLocked waits (mu held, and held again on return) until cond holds, the peer is lost or
// the transport closed, ctx ends, or nothing has progressed for Config.Timeout.
func (r *remote) waitLocked(ctx context.Context, op string, cond func() bool) error {
	// A little past Config.Timeout: the watchdog, which names the cause, speaks first.
	limit := r.t.cfg.Timeout + r.t.railLimit()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		if r.dead != nil {
			return r.dead // what was sent may not all have landed
		}
		if r.closed {
			return ErrClosed
		}
		if cond() {
			return nil
		}
		ch := r.progress
		r.mu.Unlock()
		select {
		case <-ch:
			if !timer.Stop() {
				<-timer.C
			}
			timer.Reset(limit)
		case <-timer.C:
			r.mu.Lock()
			return fmt.Errorf("%w: PE %d: %s made no progress for %v", ErrTimeout, r.pe, op, limit)
		case <-ctx.Done():
			r.mu.Lock()
			return fmt.Errorf("%w: PE %d: %s abandoned: %v", ErrTimeout, r.pe, op, ctx.Err())
		}
		r.mu.Lock()
	}
}

// nextSeqLocked numbers an operation, once the numbers are not too far ahead of the oldest
// unanswered one.
func (r *remote) nextSeqLocked(ctx context.Context, op string) (uint32, error) {
	if err := r.waitLocked(ctx, op, func() bool { return r.seq+1-r.low < maxSeqGap }); err != nil {
		return 0, err
	}
	if r.seq++; r.seq == 0 {
		r.seq = 1
	}
	r.open[r.seq] = struct{}{}
	return r.seq, nil
}

func (r *remote) opErr(op string, err error) error {
	return fmt.Errorf("tcp: %s: PE %d: to PE %d: %w", op, r.t.cfg.PE, r.pe, err)
}

// put cuts src into chunks and queues them (sig, when set, is sent once they are all answered).
// Each chunk's size and rail are planned once the window has room for it (planLocked); its
// copy is made outside the lock, so that answers keep flowing meanwhile.
func (r *remote) put(op string, dst uint64, src []byte, sig *chunk) error {
	size := len(src)
	striped := size >= r.t.cfg.StripeThreshold
	r.mu.Lock()
	var st *stripe
	if sig != nil {
		if !striped {
			// One request: data, then signal, applied in that order at the target.
			sig.off, sig.data = dst, append([]byte(nil), src...)
			err := r.queueLocked(op, sig)
			r.mu.Unlock()
			return err
		}
		// left holds one for the put itself until its last chunk is queued.
		st = &stripe{left: 1, sig: sig}
		seq, err := r.nextSeqLocked(context.Background(), op)
		if err != nil {
			r.mu.Unlock()
			return r.opErr(op, err)
		}
		sig.seq = seq
		r.outstanding++
	}
	r.mu.Unlock()
	for o := 0; o < size || (size == 0 && o == 0); {
		n, rail := size, -1
		if striped {
			r.mu.Lock()
			window := int64(windowPerRail * max(r.aliveLocked(), 2))
			want := int64(min(size-o, maxChunk))
			if err := r.waitLocked(context.Background(), op, func() bool { return r.queued == 0 || r.queued+want <= window }); err != nil {
				r.abandonLocked(st)
				r.mu.Unlock()
				return r.opErr(op, err)
			}
			n, rail = r.planLocked(size, size-o)
			r.mu.Unlock()
		}
		c := &chunk{typ: reqPut, off: dst + uint64(o), data: append([]byte(nil), src[o:o+n]...), parent: st, striped: striped, rail: rail + 1}
		r.mu.Lock()
		if st != nil {
			st.left++
		}
		err := r.queueLocked(op, c)
		r.mu.Unlock()
		if err != nil || size == 0 {
			return err
		}
		o += n
	}
	if st != nil {
		r.mu.Lock()
		r.releaseLocked(st)
		r.kick()
		r.mu.Unlock()
	}
	return nil
}

// releaseLocked counts one of s's chunks done; after the last, its signal is sent.
func (r *remote) releaseLocked(s *stripe) {
	if s.left--; s.left == 0 {
		if r.dead != nil || r.closed {
			r.finishLocked(s.sig)
		} else {
			r.placeLocked(s.sig)
		}
	}
}

// abandonLocked drops the signal of a put-with-signal whose chunks will not all be sent: it
// must never be.
func (r *remote) abandonLocked(s *stripe) {
	if s == nil || s.sig == nil {
		return
	}
	r.doneSeqLocked(s.sig.seq)
	r.outstanding--
	s.sig = nil
	s.left = -1
}

// queueLocked numbers c and places it, once the window has room.
func (r *remote) queueLocked(op string, c *chunk) error {
	window := int64(windowPerRail * max(r.aliveLocked(), 2))
	err := r.waitLocked(context.Background(), op, func() bool { return r.queued == 0 || r.queued+int64(len(c.data)) <= window })
	if err == nil {
		c.seq, err = r.nextSeqLocked(context.Background(), op)
	}
	if err == nil && r.aliveLocked() == 0 {
		err = r.dead
		if err == nil {
			err = ErrClosed
		}
	}
	if err != nil {
		r.abandonLocked(c.parent)
		return r.opErr(op, err)
	}
	r.queued += int64(len(c.data))
	r.outstanding++
	r.placeLocked(c)
	return nil
}

// fence waits until every chunk sent so far to the peer is answered.
func (r *remote) fence(ctx context.Context, op string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.waitLocked(ctx, op, func() bool { return r.outstanding == 0 }); err != nil {
		return r.opErr(op, err)
	}
	return nil
}

// quiet is fence, and reports the first error the peer found in the chunks since the last one.
func (r *remote) quiet(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.waitLocked(ctx, "quiet", func() bool { return r.outstanding == 0 }); err != nil {
		return err
	}
	err := r.firstErr
	r.firstErr = nil
	return err
}

// pickSyncLocked chooses the rail for an answered request: the least loaded one alive, at the
// least round-trip time.
func (r *remote) pickSync() (*peer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dead != nil {
		return nil, r.dead
	}
	var best *peer
	bestT := math.Inf(1)
	for i := range r.st {
		st := &r.st[i]
		if st.p == nil {
			continue
		}
		est := max(0, st.delay())
		if st.rate > 0 {
			est += float64(st.backlog) / st.rate
		}
		if est < bestT {
			best, bestT = st.p, est
		}
	}
	if best == nil {
		if r.closed {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("%w: PE %d: no rail up", ErrPeerLost, r.pe)
	}
	return best, nil
}

// call sends an answered request after every chunk before it has landed, on the rail that
// answers soonest, and sends it again on another if that rail is lost before it answers.
func (r *remote) call(op string, req *request, mk func() *pending) (*pending, error) {
	if err := r.fence(context.Background(), op); err != nil {
		return nil, err
	}
	for {
		p, err := r.pickSync()
		if err != nil {
			return nil, r.opErr(op, err)
		}
		pd := mk()
		err = p.send(op, req, nil, pd, true)
		if err == nil {
			err = p.wait(context.Background(), op, pd)
		}
		var re *RemoteError
		if err == nil || errors.As(err, &re) || errors.Is(err, ErrClosed) || r.t.closed.Load() {
			return pd, err
		}
		// The rail was lost (or timed out, which retires it): try the others.
		r.mu.Lock()
		dead := r.dead
		r.mu.Unlock()
		if dead != nil {
			return pd, dead
		}
	}
}

// amo numbers the AMO so that a resend is not applied twice.
func (r *remote) amo(req *request) (uint64, error) {
	r.mu.Lock()
	seq, err := r.nextSeqLocked(context.Background(), "amo")
	r.mu.Unlock()
	if err != nil {
		return 0, err
	}
	defer func() {
		r.mu.Lock()
		r.doneSeqLocked(seq)
		r.kick()
		r.mu.Unlock()
	}()
	req.seq = seq
	pd, err := r.call("amo", req, func() *pending { return &pending{typ: reqAMO, done: make(chan struct{})} })
	if err != nil {
		return 0, err
	}
	return pd.value, nil
}

// check retires a rail that has owed an answer for railLimit (or whose write has not moved for
// as long) while another rail to the peer owes none or still answers, unless the kernel shows
// that the rail's path works and is only slow (pathState): congested queues drop segments and
// TCP backs off for seconds, and retiring the rail would resend its chunks into the same
// congestion and leave a working NIC idle. When the kernel has delivered everything and the
// answer is still late (the peer's application is slow), a probe (a flush) is sent, so that a
// path cut since shows as data unacknowledged. When every rail owes an answer, the PE itself may
// be slow rather than the rails broken: they are all kept until no rail has answered for
// Config.Timeout, and then the peer is lost.
func (r *remote) check(now time.Time) {
	if !r.multi() {
		return
	}
	r.probeIdle(now)
	limit := r.t.railLimit()
	var stuck, slow []*peer
	fine := false
	for i := range r.rails {
		p := r.rails[i].Load()
		if p == nil || p.failure("check") != nil {
			continue
		}
		if !p.stuck(now, limit) && !p.clock.stalled(now, limit) {
			fine = true
			continue
		}
		alive, idle, ok := pathState(p.conn, limit)
		if !ok || !(alive || idle) {
			stuck = append(stuck, p)
			continue
		}
		slow = append(slow, p)
		fine = true
		if idle && now.Sub(r.probed[i]) >= limit {
			r.probed[i] = now
			r.t.wg.Add(1)
			go func() {
				defer r.t.wg.Done()
				p.send("probe", &request{typ: reqFlush}, nil, &pending{typ: reqFlush, done: make(chan struct{})}, true)
			}()
		}
	}
	silent := time.Duration(now.UnixNano() - r.lastAns.Load())
	if silent > r.t.cfg.Timeout && len(stuck)+len(slow) > 0 {
		// No rail has answered for Config.Timeout: the peer is lost, whatever its kernel does.
		stuck, limit = append(stuck, slow...), silent
	} else if len(stuck) == 0 || !fine {
		return
	}
	for _, p := range stuck {
		p.fail(fmt.Errorf("%w: %w: PE %d: rail %d answered nothing for %v", ErrPeerLost, ErrTimeout, r.pe, p.rail, limit.Round(time.Millisecond)))
	}
}

// probeIdle sends a flush on every rail that has had nothing to carry for probeEvery, so that
// its path delay stays measured while the spray gives it nothing (see railState): the flush
// waits for no chunk of the job's, and no operation waits for it.
func (r *remote) probeIdle(now time.Time) {
	var ps []*peer
	r.mu.Lock()
	for i := range r.st {
		st := &r.st[i]
		if st.p == nil || st.backlog > 0 || now.Sub(st.lastAck) < probeEvery || now.Sub(st.probeAt) < probeEvery {
			continue
		}
		st.probeAt, st.probeMark = now, st.acked
		ps = append(ps, st.p)
	}
	r.mu.Unlock()
	for _, p := range ps {
		r.t.wg.Add(1)
		go func() {
			defer r.t.wg.Done()
			p.send("probe", &request{typ: reqFlush}, nil, &pending{typ: reqFlush, done: make(chan struct{}), probe: time.Now().UnixNano()}, true)
		}()
	}
}

// probeAnswered takes a delay probe's answer: its round trip is the rail's path delay, when no
// chunk went on the rail meanwhile (it would have counted).
func (r *remote) probeAnswered(p *peer, sent int64, remoteErr error) {
	now := time.Now()
	r.mu.Lock()
	st := &r.st[p.rail]
	if st.p == p && st.backlog == 0 && st.acked == st.probeMark {
		if d := now.Sub(time.Unix(0, sent)).Seconds(); d > 0 {
			st.addDelay(d)
		}
	}
	if remoteErr != nil && r.firstErr == nil {
		r.firstErr = remoteErr
	}
	r.mu.Unlock()
}

// railLimit is how long a rail may go unanswered, while another one works, before it is retired.
func (t *Transport) railLimit() time.Duration {
	return min(max(t.cfg.Timeout/4, 100*time.Millisecond), time.Second)
}

// RailStats is what the sender knows about one rail to a peer.
type RailStats struct {
	Up      bool
	Bytes   int64   // chunk bytes answered
	Chunks  int64   // chunks answered
	RTT     float64 // seconds: least write-to-answer time
	Delay   float64 // seconds: the path delay the spray counts (see railState)
	Rate    float64 // bytes/s: smoothed delivery rate
	Retired int     // times the rail was retired
}

// RailStats returns per-rail statistics for the rails to pe (nil with one rail).
func (t *Transport) RailStats(pe int) []RailStats {
	if pe < 0 || pe >= len(t.rems) || t.rems[pe] == nil || !t.rems[pe].multi() {
		return nil
	}
	r := t.rems[pe]
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]RailStats, r.n.Load())
	for i := range out {
		st := &r.st[i]
		out[i] = RailStats{Up: st.p != nil, Bytes: st.acked, Chunks: st.chunks, RTT: st.minRTT, Delay: max(0, st.delay()), Rate: st.rate, Retired: st.retired}
	}
	return out
}

// eachRail calls f for every connection this transport holds.
func (t *Transport) eachRail(f func(p *peer)) {
	for _, r := range t.rems {
		if r == nil {
			continue
		}
		for i := range r.rails {
			if p := r.rails[i].Load(); p != nil {
				f(p)
			}
		}
	}
}

// RailsFromNICs makes one Rail per NIC, each named by an interface ("eth1": its first IPv4
// address, else its first address) or by a local address ("10.0.1.5"). Each rail listens on
// that address with a free port and dials from it.
func RailsFromNICs(nics []string) ([]Rail, error) {
	var rails []Rail
	for _, n := range nics {
		ip := net.ParseIP(n)
		if ip == nil {
			ifc, err := net.InterfaceByName(n)
			if err != nil {
				return nil, fmt.Errorf("NIC %q: neither an address nor an interface of this host: %w", n, err)
			}
			addrs, err := ifc.Addrs()
			if err != nil {
				return nil, fmt.Errorf("NIC %q: %w", n, err)
			}
			for _, a := range addrs {
				if in, ok := a.(*net.IPNet); ok && (ip == nil || (ip.To4() == nil && in.IP.To4() != nil)) && !in.IP.IsLinkLocalUnicast() {
					ip = in.IP
				}
			}
			if ip == nil {
				return nil, fmt.Errorf("NIC %q has no address", n)
			}
		}
		s := ip.String()
		rails = append(rails, Rail{Listen: net.JoinHostPort(s, "0"), Advertise: s})
	}
	return rails, nil
}

// dedup records what a source PE's numbered operations did at this PE, so that one sent again
// (after its rail was lost before its answer came) is not applied twice, and is never written by
// two connections at once.
type dedup struct {
	mu   sync.Mutex
	cond sync.Cond
	ent  []dedupEntry
}

type dedupEntry struct {
	seq     uint32
	owner   *peer // the connection applying it now
	applied bool
	old     uint64
	msg     string
}

func (d *dedup) slotLocked(seq uint32) *dedupEntry {
	if d.ent == nil {
		d.ent = make([]dedupEntry, dedupWindow)
		d.cond.L = &d.mu
	}
	return &d.ent[seq%dedupWindow]
}

// begin claims seq for p, which then applies it and calls end; or reports that it was applied
// already (dup), with what it answered then. When another connection is still reading it, that
// connection is one the sender has given up on: it is closed, and begin waits until its reader
// lets go.
func (d *dedup) begin(seq uint32, p *peer) (dup bool, old uint64, msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		e := d.slotLocked(seq)
		switch {
		case e.seq != seq || (!e.applied && e.owner == nil):
			*e = dedupEntry{seq: seq, owner: p}
			return false, 0, ""
		case e.applied:
			return true, e.old, e.msg
		}
		q := e.owner
		d.mu.Unlock()
		q.fail(fmt.Errorf("%w: PE %d: rail %d: its request was sent again on rail %d", ErrPeerLost, q.pe, q.rail, p.rail))
		d.mu.Lock()
		for e.seq == seq && e.owner == q {
			d.cond.Wait()
		}
	}
}

// end releases seq: applied (with its answer), or not (a resend may apply it).
func (d *dedup) end(seq uint32, p *peer, applied bool, old uint64, msg string) {
	d.mu.Lock()
	e := d.slotLocked(seq)
	if e.seq == seq && e.owner == p {
		if applied {
			*e = dedupEntry{seq: seq, applied: true, old: old, msg: msg}
		} else {
			*e = dedupEntry{}
		}
	}
	d.cond.Broadcast()
	d.mu.Unlock()
}

// discard skips n payload bytes.
func discard(r io.Reader, n uint64) error {
	_, err := io.CopyN(io.Discard, r, int64(n))
	return err
}
