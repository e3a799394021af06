package nic

import (
	"context"
	"errors"
	"fmt"
	"log"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBadDescriptor is matched (errors.Is) by the error a proxy reports for a descriptor it
// rejected: an unknown op, a PE out of range, a heap range outside the symmetric heap, a local
// address it cannot resolve. A rejected descriptor writes nothing.
var ErrBadDescriptor = errors.New("nic: bad descriptor")

// ProxyConfig configures a Proxy.
type ProxyConfig struct {
	PE, NPEs int
	// HeapSize is the size of every PE's symmetric heap: remote ranges are checked against it.
	HeapSize uint64
	// Transport carries the operations.
	Transport Transport
	// Local resolves the local addresses in descriptors (Desc.Src).
	Local Memory
	// Rings are the rings this proxy drains (each has exactly one consumer: this proxy).
	Rings []*Ring
	// Timeout bounds each wait for the transport (the quiet that completes a batch). Default 30s.
	Timeout time.Duration
	// Batch is the most descriptors taken from one ring at a time. Default 256.
	Batch int
	// Logf logs the proxy's failure once; default log.Printf.
	Logf func(format string, args ...any)
	// Unlocked runs the proxy goroutine on any OS thread instead of one locked to it. Locking
	// matters when the transport keeps per-thread state (a device context); a pure network
	// transport has none, and a locked goroutine costs an OS thread handoff at every wakeup
	// (BenchmarkRingPingPong: about 3x the round trip on a loaded machine).
	Unlocked bool
}

// Proxy drains one PE's rings: one goroutine locked to an OS thread (unless
// ProxyConfig.Unlocked), polling with bounded backoff, executing descriptors in ticket order in batches through the Transport. Per-PE order
// holds because descriptors are issued in ticket order and the Transport keeps issue order across
// fences. A batch's completed count is published after the transport's quiet for it has
// returned (started without waiting when the transport is an AsyncQuieter), so Ring.Quiet means
// delivered. The first failure sets the ring's error word (and the detail, in this
// process); the ring then stops completing and its later descriptors are discarded.
type Proxy struct {
	cfg     ProxyConfig
	batcher Batcher
	async   AsyncQuieter
	waiting []completion // batches whose puts are being acknowledged, in issue order
	stop    atomic.Bool
	done    chan struct{}
	err     atomic.Pointer[error]
	once    sync.Once
}

// NewProxy validates cfg and starts the proxy.
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	if cfg.NPEs < 1 || cfg.PE < 0 || cfg.PE >= cfg.NPEs {
		return nil, fmt.Errorf("nic: NewProxy: PE %d of %d PEs is out of range", cfg.PE, cfg.NPEs)
	}
	if cfg.Transport == nil || cfg.Local == nil || len(cfg.Rings) == 0 {
		return nil, fmt.Errorf("nic: NewProxy: PE %d: needs a transport, local memory and at least one ring", cfg.PE)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.Logf == nil {
		cfg.Logf = log.Printf
	}
	p := &Proxy{cfg: cfg, done: make(chan struct{})}
	p.batcher, _ = cfg.Transport.(Batcher)
	p.async, _ = cfg.Transport.(AsyncQuieter)
	go p.loop()
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
	for {
		stopping := p.stop.Load()
		busy := p.poll(buf)
		p.reap(false)
		if busy {
			b.Reset()
			idle = 0
			continue
		}
		if stopping {
			for len(p.waiting) > 0 {
				p.reap(true)
			}
			for _, r := range p.cfg.Rings {
				r.SetError(RingErrClosed, fmt.Errorf("nic: proxy of PE %d closed", p.cfg.PE))
			}
			return
		}
		if idle++; idle < backoffSpins+backoffYields {
			b.Wait()
			continue
		}
		// Sleep until a producer in this process rings, or ProxyMaxSleep passes.
		for _, r := range p.cfg.Rings {
			r.SetBell(bell)
		}
		if !p.poll(buf) {
			var ack <-chan error
			if len(p.waiting) > 0 {
				ack = p.waiting[0].done
			}
			timer.Reset(ProxyMaxSleep)
			select {
			case <-bell:
				timer.Stop()
			case err := <-ack:
				timer.Stop()
				c := p.waiting[0]
				p.waiting[0] = completion{}
				p.waiting = p.waiting[1:]
				p.finish(c, err)
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
	for _, r := range p.cfg.Rings {
		first, n := r.Poll(buf)
		if n > 0 {
			busy = true
			p.execBatch(r, first, buf[:n])
		}
	}
	return busy
}

func (p *Proxy) fail(r *Ring, code RingErrCode, err error) {
	r.SetError(code, err)
	if p.err.CompareAndSwap(nil, &err) {
		p.cfg.Logf("%v", err)
	}
}

func (p *Proxy) execBatch(r *Ring, first uint64, descs []Desc) {
	if r.Err() != nil {
		return // a failed ring completes nothing more; its slots are freed so producers go on
	}
	if p.batcher != nil {
		p.batcher.BeginBatch()
	}
	delivered := false // puts issued that only a transport quiet completes
	var failed error
	code := RingErrRemote
	for i := range descs {
		d := &descs[i]
		err := p.exec(d)
		if err != nil {
			failed = err
			if errors.Is(err, ErrBadDescriptor) {
				code = RingErrInput
			}
			break
		}
		switch d.Op {
		case OpPut, OpPutSignal:
			delivered = true
		case OpQuiet:
			delivered = false
		}
	}
	var ack <-chan error
	if failed == nil && delivered && p.async != nil {
		// Before EndBatch: the flush request goes out in the same write as the batch's puts.
		ack = p.async.QuietAsync(-1)
	}
	if p.batcher != nil {
		if err := p.batcher.EndBatch(); err != nil && failed == nil {
			failed = fmt.Errorf("nic: proxy of PE %d: sending a batch: %w", p.cfg.PE, err)
		}
	}
	if failed != nil {
		p.fail(r, code, failed)
		return
	}
	upTo := first + uint64(len(descs))
	switch {
	case ack != nil:
		p.waiting = append(p.waiting, completion{r, first, upTo, ack})
	case delivered:
		p.finish(completion{r, first, upTo, nil}, p.quiet())
	case len(p.waiting) > 0:
		p.waiting = append(p.waiting, completion{r, first, upTo, nil}) // keep ticket order
	default:
		r.SetCompleted(upTo)
	}
	if len(p.waiting) >= maxWaiting {
		p.reap(true)
	}
}

// completion is a batch [first, upTo) of ring r waiting for done (nil: nothing to wait for).
type completion struct {
	r           *Ring
	first, upTo uint64
	done        <-chan error
}

// maxWaiting bounds the batches in flight behind acknowledgements.
const maxWaiting = 64

func (p *Proxy) finish(c completion, err error) {
	if c.r.Err() != nil {
		return
	}
	if err != nil {
		p.fail(c.r, RingErrRemote, fmt.Errorf("nic: proxy of PE %d: completing descriptors %d..%d: %w", p.cfg.PE, c.first, c.upTo-1, err))
		return
	}
	c.r.SetCompleted(c.upTo)
}

// reap completes the waiting batches whose acknowledgements are in, in order; with block, it
// waits for the oldest.
func (p *Proxy) reap(block bool) {
	for len(p.waiting) > 0 {
		c := p.waiting[0]
		var err error
		if c.done != nil {
			if block {
				err = <-c.done
				block = false
			} else {
				select {
				case err = <-c.done:
				default:
					return
				}
			}
		}
		p.waiting[0] = completion{}
		p.waiting = p.waiting[1:]
		p.finish(c, err)
	}
}

func (p *Proxy) quiet() error {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Timeout)
	defer cancel()
	return p.cfg.Transport.Quiet(ctx, -1)
}

func (p *Proxy) bad(d *Desc, format string, args ...any) error {
	return fmt.Errorf("%w: proxy of PE %d: %v to PE %d: %s", ErrBadDescriptor, p.cfg.PE, d.Op, d.PE, fmt.Sprintf(format, args...))
}

// heapRange checks [off, off+n) against the symmetric heap.
func (p *Proxy) heapRange(d *Desc, what string, off, n uint64) error {
	if off > p.cfg.HeapSize || n > p.cfg.HeapSize-off {
		return p.bad(d, "%s heap range [%#x, +%#x) is outside the %#x-byte symmetric heap", what, off, n, p.cfg.HeapSize)
	}
	return nil
}

func (p *Proxy) local(d *Desc, what string, addr, n uint64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	if n > uint64(int(^uint(0)>>1)) {
		return nil, p.bad(d, "%s range [%#x, +%#x) is too large", what, addr, n)
	}
	b, err := p.cfg.Local.Bytes(addr, int(n))
	if err != nil {
		return nil, p.bad(d, "%s range [%#x, +%#x): %v", what, addr, n, err)
	}
	if uint64(len(b)) != n {
		return nil, p.bad(d, "%s range [%#x, +%#x) resolved to %d bytes", what, addr, n, len(b))
	}
	return b, nil
}

// exec validates one descriptor completely, then issues it.
func (p *Proxy) exec(d *Desc) error {
	tr := p.cfg.Transport
	switch d.Op {
	case OpNop:
		return nil
	case OpQuiet:
		if err := p.quiet(); err != nil {
			return fmt.Errorf("nic: proxy of PE %d: quiet: %w", p.cfg.PE, err)
		}
		return nil
	case OpFence, OpPut, OpPutSignal, OpGet, OpAMO:
	default:
		return p.bad(d, "unknown op %d", uint32(d.Op))
	}
	if int64(d.PE) >= int64(p.cfg.NPEs) {
		return p.bad(d, "PE %d is out of range (%d PEs)", d.PE, p.cfg.NPEs)
	}
	pe := int(d.PE)
	var err error
	switch d.Op {
	case OpFence:
		err = tr.Fence(pe)
	case OpPut, OpGet:
		if err := p.heapRange(d, "remote", d.Dst, d.Size); err != nil {
			return err
		}
		b, err2 := p.local(d, "local", d.Src, d.Size)
		if err2 != nil {
			return err2
		}
		if d.Op == OpPut {
			err = tr.Put(pe, d.Dst, b)
		} else {
			err = tr.Get(pe, d.Dst, b)
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
		sigOp := SignalOp(d.Kind())
		if sigOp > SignalAdd {
			return p.bad(d, "unknown signal op %d", d.Kind())
		}
		b, err2 := p.local(d, "local", d.Src, d.Size)
		if err2 != nil {
			return err2
		}
		err = tr.PutSignal(pe, d.Dst, b, d.Aux, sigOp, d.Value)
	case OpAMO:
		op, width := AMOOp(d.Kind()), d.Width()
		if err := CheckAMO(op, width, d.Dst); err != nil {
			return p.bad(d, "heap offset %#x: %v", d.Dst, err)
		}
		if err := p.heapRange(d, "remote", d.Dst, uint64(width)); err != nil {
			return err
		}
		var res []byte
		if d.Src != 0 {
			if res, err = p.local(d, "result", d.Src, uint64(width)); err != nil {
				return err
			}
			if err := CheckAMO(op, width, d.Src); err != nil {
				return p.bad(d, "result address %#x: %v", d.Src, err)
			}
		}
		var old uint64
		old, err = tr.AMO(pe, op, width, d.Dst, d.Value, d.Aux)
		if err == nil && res != nil {
			err = StoreWord(res, width, old)
		}
	}
	if err != nil {
		return fmt.Errorf("nic: proxy of PE %d: %v to PE %d: %w", p.cfg.PE, d.Op, d.PE, err)
	}
	return nil
}
