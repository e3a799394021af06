package nic

import (
	"context"
	"errors"
	"fmt"
	"log"
	"runtime"
	"sync/atomic"
	"time"
)

// ProxyConfig configures a Proxy.
type ProxyConfig struct {
	PE, NPEs int
	// HeapSize is the size of every PE's symmetric heap: remote ranges are checked against it.
	HeapSize uint64
	// Routes has one route per PE (len NPEs): the way descriptors to that PE go. Several PEs
	// usually share one route value.
	Routes []Route
	// Transport and Local, when Routes is nil, send every PE's descriptors through one
	// TransportRoute over Transport, with local addresses resolved in Local (the host backend).
	Transport Transport
	Local     Memory
	// Completer, when set, writes every completion of the rings: device code polls a copy of
	// the completed counter that only it updates. Without it the proxy writes a batch's
	// completion from the host unless a DeviceCompleter route took part in the batch (or one
	// still has a completion in flight), so that a device queue that stalls cannot hold back
	// batches that never used it.
	Completer DeviceCompleter
	// Rings are the rings this proxy drains (each has exactly one consumer: this proxy).
	Rings []*Ring
	// Timeout bounds each wait for a route (the quiet that completes a batch). Default 30s.
	Timeout time.Duration
	// Batch is the most descriptors taken from one ring at a time. Default 256.
	Batch int
	// Window, when positive, bounds the tickets of a ring between issued and completed: ticket
	// t is issued only once tickets below t+1-Window have completed (a route that reuses
	// per-ticket slots of its own, or ring results indexed by ticket, needs Window < capacity).
	// Batches are then at most Window long.
	Window int
	// IdleSpin is how long the proxy keeps polling without sleeping after its last descriptor,
	// for producers that cannot ring its bell (on a device). Default 0: a short backoff.
	IdleSpin time.Duration
	// IdleSleep bounds a sleep of an idle proxy between polls. Default ProxyMaxSleep.
	IdleSleep time.Duration
	// Logf logs the proxy's failure once; default log.Printf.
	Logf func(format string, args ...any)
	// Failed, when set, is called once, from the proxy's goroutine, with the proxy's first
	// error, just before the ring's error word is set: a producer that sees the ring failed
	// also sees what Failed raised (a device-visible abort word, say).
	Failed func(err error)
	// Stats, when set, receives the proxy's counters.
	Stats *ProxyStats
	// Unlocked runs the proxy goroutine on any OS thread instead of one locked to it. Locking
	// matters when a route keeps per-thread state (a device context); a pure network
	// transport has none, and a locked goroutine costs an OS thread handoff at every wakeup
	// (BenchmarkRingPingPong: about 3x the round trip on a loaded machine).
	Unlocked bool
}

// ProxyStats are a proxy's counters (for debugging output); any goroutine may read them.
type ProxyStats struct {
	Batches, Descs atomic.Uint64
	BusyNs         atomic.Uint64 // time spent executing batches
	WindowWaits    atomic.Uint64 // descriptors that waited for ProxyConfig.Window
	WindowNs       atomic.Uint64
}

// Reset zeroes the counters.
func (s *ProxyStats) Reset() {
	for _, c := range []*atomic.Uint64{&s.Batches, &s.Descs, &s.BusyNs, &s.WindowWaits, &s.WindowNs} {
		c.Store(0)
	}
}

// Proxy drains one PE's rings: one goroutine locked to an OS thread (unless
// ProxyConfig.Unlocked), polling with bounded backoff, executing descriptors in ticket order in
// batches through each target PE's route. Per-PE order holds because descriptors are issued in
// ticket order, a PE's descriptors all take one route, and fences reach that route. A batch's
// completed count is published, in ticket order, once every route it used has delivered it: after
// a host route's quiet has returned (started without waiting when the route is a
// RouteQuietStarter), or by a device route itself (DeviceCompleter), so Ring.Quiet means
// delivered. The first failure sets the ring's error word (and the detail, in this process); the
// ring then stops completing and its later descriptors are discarded.
type Proxy struct {
	cfg     ProxyConfig
	routes  []Route // distinct routes
	routeOf []int   // per PE: index into routes
	batcher []Batcher
	starter []RouteQuietStarter
	device  []DeviceCompleter
	pending []bool // per route: puts issued that only its quiet completes
	used    []bool // per device route: issued to in this batch
	rings   []*ringState
	// nWaiting counts the batches of all rings waiting for acknowledgements; nextSeq numbers
	// them in issue order (the oldest one is the one a blocking reap waits for)
	nWaiting int
	nextSeq  uint64
	stop     atomic.Bool
	done     chan struct{}
	err      atomic.Pointer[error]
}

// ringState is what the proxy keeps about one ring: the device route that has its latest
// completion write queued (devEnd) and has not necessarily executed it yet, and the ring's
// batches waiting for acknowledgements, in ticket order. Each ring completes in its own ticket
// order only: a batch of one ring whose acknowledgement is held (a slow or stalled peer) never
// holds back another ring's completion, so that a device context's quiet (one ring per context)
// waits for that context's traffic alone.
type ringState struct {
	r       *Ring
	dev     DeviceCompleter
	devEnd  uint64
	waiting []completion
}

// NewProxy validates cfg and starts the proxy.
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	p, err := newProxy(cfg)
	if err != nil {
		return nil, err
	}
	go p.loop()
	return p, nil
}

// newProxy validates cfg and builds the proxy's routes without starting its loop (the fuzz test
// drives exec directly).
func newProxy(cfg ProxyConfig) (*Proxy, error) {
	if cfg.NPEs < 1 || cfg.PE < 0 || cfg.PE >= cfg.NPEs {
		return nil, fmt.Errorf("nic: NewProxy: PE %d of %d PEs is out of range", cfg.PE, cfg.NPEs)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Routes == nil {
		if cfg.Transport == nil || cfg.Local == nil || len(cfg.Rings) == 0 {
			return nil, fmt.Errorf("nic: NewProxy: PE %d: needs a transport, local memory and at least one ring", cfg.PE)
		}
		r := NewTransportRoute(cfg.Transport, cfg.Local, cfg.Timeout)
		cfg.Routes = make([]Route, cfg.NPEs)
		for pe := range cfg.Routes {
			cfg.Routes[pe] = r
		}
	}
	if len(cfg.Routes) != cfg.NPEs || len(cfg.Rings) == 0 {
		return nil, fmt.Errorf("nic: NewProxy: PE %d: needs a route for each of %d PEs (got %d) and at least one ring", cfg.PE, cfg.NPEs, len(cfg.Routes))
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.Window > 0 && cfg.Batch > cfg.Window {
		cfg.Batch = cfg.Window // a batch never waits for its own completion
	}
	if cfg.IdleSleep <= 0 {
		cfg.IdleSleep = ProxyMaxSleep
	}
	if cfg.Logf == nil {
		cfg.Logf = log.Printf
	}
	p := &Proxy{cfg: cfg, done: make(chan struct{}), routeOf: make([]int, cfg.NPEs)}
	index := map[Route]int{}
	for pe, r := range cfg.Routes {
		if r == nil {
			return nil, fmt.Errorf("nic: NewProxy: PE %d: no route to PE %d", cfg.PE, pe)
		}
		i, ok := index[r]
		if !ok {
			i = len(p.routes)
			index[r] = i
			p.routes = append(p.routes, r)
			b, _ := r.(Batcher)
			s, _ := r.(RouteQuietStarter)
			d, _ := r.(DeviceCompleter)
			p.batcher, p.starter, p.device = append(p.batcher, b), append(p.starter, s), append(p.device, d)
		}
		p.routeOf[pe] = i
	}
	p.pending, p.used = make([]bool, len(p.routes)), make([]bool, len(p.routes))
	for _, r := range cfg.Rings {
		p.rings = append(p.rings, &ringState{r: r})
	}
	return p, nil
}

// Err returns the first error the proxy met, or nil.
func (p *Proxy) Err() error {
	if e := p.err.Load(); e != nil {
		return *e
	}
	return nil
}

// Close executes what is already published, stops the proxy and marks its rings closed, so that
// later waits on them return instead of hanging. It returns the proxy's first error.
func (p *Proxy) Close() error {
	p.stop.Store(true)
	<-p.done
	return p.Err()
}

// ProxyMaxSleep bounds how long an idle proxy sleeps between polls when its producers cannot
// ring its bell (they are in another process or on a device).
const ProxyMaxSleep = 50 * time.Microsecond

func (p *Proxy) loop() {
	if !p.cfg.Unlocked {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	defer close(p.done)
	buf := make([]Desc, p.cfg.Batch)
	bell := make(chan struct{}, 1)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var b Backoff
	idle := 0
	var last time.Time // the last busy poll, while IdleSpin matters
	for {
		stopping := p.stop.Load()
		busy := p.poll(buf)
		p.reap(false)
		if busy {
			b.Reset()
			idle = 0
			if p.cfg.IdleSpin > 0 {
				last = time.Now()
			}
			continue
		}
		if stopping {
			for p.nWaiting > 0 {
				p.reap(true)
			}
			for _, r := range p.cfg.Rings {
				r.SetError(RingErrClosed, fmt.Errorf("nic: proxy of PE %d closed", p.cfg.PE))
			}
			return
		}
		idle++
		if p.cfg.IdleSpin > 0 && idle&255 != 0 {
			// Device producers cannot ring the bell: poll on, yielding now and then.
			if idle&15 == 0 {
				runtime.Gosched()
			}
			continue
		}
		if p.cfg.IdleSpin > 0 && time.Since(last) < p.cfg.IdleSpin {
			continue
		}
		if p.cfg.IdleSpin == 0 && idle < backoffSpins+backoffYields {
			b.Wait()
			continue
		}
		// Sleep until a producer in this process rings, an acknowledgement arrives, or
		// IdleSleep passes.
		for _, r := range p.cfg.Rings {
			r.SetBell(bell)
		}
		if !p.poll(buf) {
			var ack <-chan error
			if rs := p.oldest(); rs != nil && len(rs.waiting[0].acks) > 0 {
				ack = rs.waiting[0].acks[0]
			}
			timer.Reset(p.cfg.IdleSleep)
			select {
			case <-bell:
				timer.Stop()
			case err := <-ack:
				timer.Stop()
				p.acked(p.oldest(), err)
			case <-timer.C:
			}
		}
		for _, r := range p.cfg.Rings {
			r.SetBell(nil)
		}
		select { // a ring that came too late
		case <-bell:
		default:
		}
	}
}

// poll executes one batch from every ring that has work and reports whether any had.
func (p *Proxy) poll(buf []Desc) bool {
	busy := false
	for _, rs := range p.rings {
		first, n := rs.r.Poll(buf)
		if n > 0 {
			busy = true
			p.execBatch(rs, first, buf[:n])
		}
	}
	return busy
}

func (p *Proxy) fail(r *Ring, code RingErrCode, err error) {
	first := p.err.CompareAndSwap(nil, &err)
	if first && p.cfg.Failed != nil {
		p.cfg.Failed(err)
	}
	r.SetError(code, err)
	if first {
		p.cfg.Logf("%v", err)
	}
}

func (p *Proxy) execBatch(rs *ringState, first uint64, descs []Desc) {
	r := rs.r
	if r.Err() != nil {
		return // a failed ring completes nothing more; its slots are freed so producers go on
	}
	var t0 time.Time
	if p.cfg.Stats != nil {
		t0 = time.Now()
		defer func() {
			p.cfg.Stats.Batches.Add(1)
			p.cfg.Stats.Descs.Add(uint64(len(descs)))
			p.cfg.Stats.BusyNs.Add(uint64(time.Since(t0)))
		}()
	}
	for _, b := range p.batcher {
		if b != nil {
			b.BeginBatch()
		}
	}
	var failed error
	for i := range descs {
		if p.cfg.Window > 0 {
			if err := p.waitWindow(rs, first+uint64(i)); err != nil {
				failed = err
				break
			}
		}
		if err := p.exec(&descs[i]); err != nil {
			failed = err
			break
		}
	}
	code := RingErrRemote
	if errors.Is(failed, ErrBadDescriptor) {
		code = RingErrInput
	}
	var acks []<-chan error
	if failed == nil {
		for i, s := range p.starter {
			if p.pending[i] && s != nil {
				// Before EndBatch: the flush request goes out in the same write as the batch's puts.
				acks = append(acks, s.QuietAsync())
				p.pending[i] = false
			}
		}
	}
	for _, b := range p.batcher {
		if b != nil {
			if err := b.EndBatch(); err != nil && failed == nil {
				failed = fmt.Errorf("nic: proxy of PE %d: sending a batch: %w", p.cfg.PE, err)
			}
		}
	}
	// The routes that take no started quiet are quieted now; of the device routes this batch
	// used, the last one completes it and the others are quieted.
	var dev DeviceCompleter
	for i, route := range p.routes {
		if p.device[i] != nil {
			if p.used[i] && failed == nil {
				if dev != nil {
					failed = p.quietRoute(dev, "completing descriptors on one route of several")
				}
				dev = p.device[i]
			}
			p.used[i] = false
			continue
		}
		if p.pending[i] && failed == nil {
			if err := p.quietRoute(route, ""); err != nil {
				failed = fmt.Errorf("nic: proxy of PE %d: completing descriptors %d..%d: %w", p.cfg.PE, first, first+uint64(len(descs))-1, err)
			}
		}
		p.pending[i] = false
	}
	if failed != nil {
		p.fail(r, code, failed)
		return
	}
	c := completion{rs, first, first + uint64(len(descs)), acks, dev, p.nextSeq}
	if len(acks) == 0 && len(rs.waiting) == 0 {
		p.finish(c, nil)
		return
	}
	p.nextSeq++
	rs.waiting = append(rs.waiting, c) // keep the ring's ticket order
	p.nWaiting++
	if p.nWaiting >= maxWaiting {
		p.reap(true)
	}
}

// quietRoute quiets route within the proxy's Timeout; its error says what for, unless what is
// empty (the caller says it).
func (p *Proxy) quietRoute(route Route, what string) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Timeout)
	defer cancel()
	err := route.Quiet(ctx)
	if err != nil && what != "" {
		return fmt.Errorf("nic: proxy of PE %d: %s: %w", p.cfg.PE, what, err)
	}
	return err
}

// waitWindow waits, under ProxyConfig.Window, until ticket t may be issued.
func (p *Proxy) waitWindow(rs *ringState, t uint64) error {
	w := uint64(p.cfg.Window)
	if w == 0 || t+1 <= w || rs.r.Completed() >= t+1-w {
		return nil
	}
	target := t + 1 - w
	t0 := time.Now()
	if s := p.cfg.Stats; s != nil {
		defer func() {
			s.WindowWaits.Add(1)
			s.WindowNs.Add(uint64(time.Since(t0)))
		}()
	}
	for n := 0; rs.r.Completed() < target; n++ {
		p.reap(false)
		if err := rs.r.Err(); err != nil {
			return err
		}
		if p.stop.Load() {
			return fmt.Errorf("nic: proxy of PE %d: stopped with %d descriptors in flight", p.cfg.PE, t-rs.r.Completed())
		}
		if n > 64 {
			time.Sleep(5 * time.Microsecond)
		}
	}
	return nil
}

// completion is a batch [first, upTo) of a ring waiting for its acknowledgements; dev, when not
// nil, is the device route that writes its completion.
type completion struct {
	rs          *ringState
	first, upTo uint64
	acks        []<-chan error
	dev         DeviceCompleter
	seq         uint64 // issue order among all rings' waiting batches
}

// maxWaiting bounds the batches in flight behind acknowledgements.
const maxWaiting = 64

// finish completes c, whose acknowledgements are in (err: the first that failed), after every
// batch before it.
func (p *Proxy) finish(c completion, err error) {
	rs := c.rs
	r := rs.r
	if r.Err() != nil {
		return
	}
	if err != nil {
		p.fail(r, RingErrRemote, fmt.Errorf("nic: proxy of PE %d: completing descriptors %d..%d: %w", p.cfg.PE, c.first, c.upTo-1, err))
		return
	}
	dev := c.dev
	if dev == nil {
		dev = p.cfg.Completer
	}
	inFlight := rs.dev != nil && r.Completed() < rs.devEnd
	if dev == nil && inFlight {
		dev = rs.dev // behind the queued completion, on the same queue: the counter never goes back
	}
	if dev == nil {
		r.SetCompleted(c.upTo)
		return
	}
	if inFlight && dev != rs.dev {
		// Another device queue holds a completion write: let it land first.
		if err := p.quietRoute(rs.dev, "completing on another device route"); err != nil {
			p.fail(r, RingErrRemote, err)
			return
		}
	}
	if err := dev.CompleteAt(r, c.upTo); err != nil {
		p.fail(r, RingErrRemote, fmt.Errorf("nic: proxy of PE %d: completing descriptors %d..%d: %w", p.cfg.PE, c.first, c.upTo-1, err))
		return
	}
	rs.dev, rs.devEnd = dev, c.upTo
}

// oldest is the ring whose first waiting batch was issued first of all rings' (nil: none waits).
func (p *Proxy) oldest() *ringState {
	var o *ringState
	for _, rs := range p.rings {
		if len(rs.waiting) > 0 && (o == nil || rs.waiting[0].seq < o.waiting[0].seq) {
			o = rs
		}
	}
	return o
}

// pop removes rs's first waiting batch and completes it (err: its acknowledgement's failure).
func (p *Proxy) pop(rs *ringState, err error) {
	done := rs.waiting[0]
	rs.waiting[0] = completion{}
	rs.waiting = rs.waiting[1:]
	p.nWaiting--
	p.finish(done, err)
}

// acked takes the result of the first acknowledgement of rs's first waiting batch and
// completes what it unblocks.
func (p *Proxy) acked(rs *ringState, err error) {
	c := &rs.waiting[0]
	c.acks = c.acks[1:]
	if err != nil {
		c.acks = nil
	}
	if len(c.acks) == 0 {
		p.pop(rs, err)
	}
	p.reap(false)
}

// reap completes, ring by ring and in each ring's ticket order, the waiting batches whose
// acknowledgements are in; with block, it first waits for the oldest batch of all. A failed
// ring's batches are dropped without waiting.
func (p *Proxy) reap(block bool) {
	if block {
		if rs := p.oldest(); rs != nil {
			c := &rs.waiting[0]
			var err error
			for len(c.acks) > 0 && err == nil && rs.r.Err() == nil {
				err = <-c.acks[0]
				c.acks = c.acks[1:]
			}
			p.pop(rs, err)
		}
	}
	for _, rs := range p.rings {
	ring:
		for len(rs.waiting) > 0 {
			c := &rs.waiting[0]
			var err error
			for len(c.acks) > 0 && err == nil && rs.r.Err() == nil {
				select {
				case err = <-c.acks[0]:
				default:
					break ring
				}
				c.acks = c.acks[1:]
			}
			p.pop(rs, err)
		}
	}
}

func (p *Proxy) bad(d *Desc, format string, args ...any) error {
	return fmt.Errorf("%w: proxy of PE %d: ticket %d: %v to PE %d: %s", ErrBadDescriptor, p.cfg.PE, d.Seq-1, d.Op, d.PE, fmt.Sprintf(format, args...))
}

// heapRange checks [off, off+n) against the symmetric heap.
func (p *Proxy) heapRange(d *Desc, what string, off, n uint64) error {
	if off > p.cfg.HeapSize || n > p.cfg.HeapSize-off {
		return p.bad(d, "%s heap range [%#x, +%#x) is outside the %#x-byte symmetric heap", what, off, n, p.cfg.HeapSize)
	}
	return nil
}

// exec validates one descriptor completely, then issues it on its PE's route.
func (p *Proxy) exec(d *Desc) error {
	switch d.Op {
	case OpNop:
		return nil
	case OpQuiet:
		for i, route := range p.routes {
			if p.device[i] == nil {
				if err := p.quietRoute(route, "quiet"); err != nil {
					return err
				}
				p.pending[i] = false
			}
		}
		return nil
	case OpFence, OpPut, OpPutSignal, OpGet, OpAMO:
	default:
		return p.bad(d, "unknown op %d", uint32(d.Op))
	}
	if d.Op == OpFence && d.PE == AllPEs {
		for pe := 0; pe < p.cfg.NPEs; pe++ {
			if err := p.routes[p.routeOf[pe]].Fence(pe); err != nil {
				return fmt.Errorf("nic: proxy of PE %d: ticket %d: fence to PE %d: %w", p.cfg.PE, d.Seq-1, pe, err)
			}
		}
		return nil
	}
	if int64(d.PE) >= int64(p.cfg.NPEs) {
		return p.bad(d, "PE %d is out of range (%d PEs)", d.PE, p.cfg.NPEs)
	}
	switch d.Op {
	case OpPut, OpGet:
		if err := p.heapRange(d, "remote", d.Dst, d.Size); err != nil {
			return err
		}
	case OpPutSignal:
		if err := p.heapRange(d, "remote", d.Dst, d.Size); err != nil {
			return err
		}
		if err := p.heapRange(d, "signal", d.Aux, 8); err != nil {
			return err
		}
		if d.Aux%8 != 0 {
			return p.bad(d, "signal at heap offset %#x is not 8-byte aligned", d.Aux)
		}
		if SignalOp(d.Kind()) > SignalAdd {
			return p.bad(d, "unknown signal op %d", d.Kind())
		}
	case OpAMO:
		if err := CheckAMO(AMOOp(d.Kind()), d.Width(), d.Dst); err != nil {
			return p.bad(d, "heap offset %#x: %v", d.Dst, err)
		}
		if err := p.heapRange(d, "remote", d.Dst, uint64(d.Width())); err != nil {
			return err
		}
	}
	i := p.routeOf[d.PE]
	var err error
	if d.Op == OpFence {
		err = p.routes[i].Fence(int(d.PE))
	} else {
		err = p.routes[i].Issue(d)
	}
	if err != nil {
		var rej *rejection
		if errors.As(err, &rej) {
			return p.bad(d, "%s", rej.msg)
		}
		return fmt.Errorf("nic: proxy of PE %d: ticket %d: %v to PE %d: %w", p.cfg.PE, d.Seq-1, d.Op, d.PE, err)
	}
	switch {
	case p.device[i] != nil:
		p.used[i] = true
	case d.Op == OpPut || d.Op == OpPutSignal:
		p.pending[i] = true
	}
	return nil
}
