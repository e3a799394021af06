package tcp

// Lazy connections (Config.Resolve) and the idle-connection cap (Config.MaxPeers).
//
// With Resolve set, no connection is made before it is needed: the first operation to a PE
// looks up that PE's address (Resolve, e.g. a bootstrap key-value Get, cached) and dials every
// rail the two PEs share. Concurrent first uses share one attempt (link.call). Either PE may
// dial the other at any time; when both dial the same rail at once, the lower PE's connection
// wins: a lower PE that is dialing a rail refuses the higher PE's connection on it with the
// "crossed" byte, and the higher PE then waits for the lower PE's connection, which it always
// accepts. The accept and dial decisions for a rail are taken under link.mu, so a PE never
// holds two connections to one peer on one rail.
//
// Ordering across a connection made mid-job needs nothing more: a PE's operations to a peer
// before its first use of the peer do not exist, and a connection carries both directions in
// issue order. Across an eviction (MaxPeers), the old connection is drained before the next one
// is used, in both directions:
//
//	A (evicts, idle: no unflushed put, no pending answer)  -> bye(evict); A sends no request after it
//	B: applies everything before it, stops sending requests -> its farewell (B's error text for
//	   A's unacknowledged puts), then shuts its write side
//	A: reads B's remaining requests up to B's EOF, answers them -> its farewell (A's error text
//	   for B's puts), then closes
//	B: reads the answers and A's farewell, then EOF: the connection is retired on both sides.
//
// A PE retires the connection only once it has read the other side's end of the stream, and
// a new connection to the peer is only dialed or admitted after that, so no operation on the new
// connection can overtake one on the old. When both evict at once the lower PE's eviction
// stands (the higher PE answers it as the evicted side). A farewell's error text is reported
// by the next Quiet to that peer, so no error is lost with the connection.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	crossed  = 2 // the acceptor's last handshake byte when a lower PE's own dial wins
	byeEvict = 1 // reqBye kind: the sender drops this connection, not its transport
)

var (
	errCrossed = errors.New("both PEs dialed at once: the lower PE's connection is used")
	errAlready = errors.New("is already connected")
	// errEvicted: the connection is being retired (MaxPeers); the operation, which wrote
	// nothing, is issued again on the next connection.
	errEvicted = errors.New("connection retired to stay within the idle-connection cap")
)

// link is what a PE keeps about connecting to one peer.
type link struct {
	rmu       sync.Mutex // held through a look-up: one Resolve per peer (first use and accepts alike)
	mu        sync.Mutex
	addr      string // the peer's resolved address, once known
	call      *connectCall
	dialing   []bool        // dialing[rail]: this PE is dialing the peer on that rail
	accepting []bool        // accepting[rail]: this PE is admitting the peer's connection
	changed   chan struct{} // closed and replaced when a rail joins, retires or a dial ends
	lostErr   []error       // errors the peer reported in a farewell; the next Quiet returns them
	lastUse   atomic.Int64  // unix ns of the latest operation (MaxPeers' LRU)
}

type connectCall struct {
	done chan struct{}
	err  error
}

// kick wakes everything waiting on l.changed; l.mu is held.
func (l *link) kick() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (t *Transport) notify(pe int) {
	l := &t.links[pe]
	l.mu.Lock()
	l.kick()
	l.mu.Unlock()
}

// ConnStats counts one transport's connections.
type ConnStats struct {
	Live     int   // connections held now (one per peer and rail)
	Peers    int   // peers with at least one connection
	Dialed   int64 // connections this PE dialed and joined
	Accepted int64 // connections this PE accepted and joined
	Evicted  int64 // connections retired to stay within MaxPeers
}

// ConnStats returns how many connections the transport holds and has made.
func (t *Transport) ConnStats() ConnStats {
	s := ConnStats{Dialed: t.dialed.Load(), Accepted: t.accepted.Load(), Evicted: t.evicted.Load()}
	for _, r := range t.rems {
		if r == nil {
			continue
		}
		n := 0
		for i := range r.rails {
			if p := r.rails[i].Load(); p != nil && p.failure("stats") == nil {
				n++
			}
		}
		s.Live += n
		if n > 0 {
			s.Peers++
		}
	}
	return s
}

// Connections returns how many connections the transport holds now.
func (t *Transport) Connections() int { return t.ConnStats().Live }

// connectPeer returns the rail-0 connection to pe, connecting on first use when Resolve is set.
func (t *Transport) connectPeer(op string, pe int) (*peer, error) {
	l := &t.links[pe]
	deadline := time.Now().Add(t.cfg.Timeout)
	for {
		p := t.peers[pe].Load()
		if p != nil && !p.closing.Load() && p.rem.multi() && t.cfg.Resolve != nil {
			// Over several rails a joined connection is used once the rails layer has it up.
			l.mu.Lock()
			ch := l.changed
			l.mu.Unlock()
			if !p.rem.usable() {
				select {
				case <-ch:
				case <-t.done:
					return nil, fmt.Errorf("tcp: %s: PE %d: %w", op, t.cfg.PE, ErrClosed)
				case <-time.After(time.Until(deadline)):
					return nil, fmt.Errorf("tcp: %s: PE %d: to PE %d: %w: no rail came up within %v", op, t.cfg.PE, pe, ErrTimeout, t.cfg.Timeout)
				}
				continue
			}
		}
		if p != nil && !p.closing.Load() {
			if t.cfg.MaxPeers > 0 {
				l.lastUse.Store(time.Now().UnixNano())
			}
			return p, nil
		}
		if t.cfg.Resolve == nil {
			if p != nil {
				return p, nil
			}
			return nil, fmt.Errorf("tcp: %s: PE %d: PE %d is not connected", op, t.cfg.PE, pe)
		}
		if p != nil {
			// Being retired: the next connection waits until the old one is drained.
			if err := t.waitGone(op, p, deadline); err != nil {
				return nil, err
			}
			continue
		}
		l.mu.Lock()
		if t.peers[pe].Load() != nil {
			l.mu.Unlock()
			continue
		}
		c := l.call
		first := c == nil
		if first {
			c = &connectCall{done: make(chan struct{})}
			l.call = c
		}
		l.mu.Unlock()
		if first {
			c.err = t.establish(op, pe)
			l.mu.Lock()
			l.call = nil
			l.kick()
			l.mu.Unlock()
			close(c.done)
		} else {
			select {
			case <-c.done:
			case <-t.done:
				return nil, fmt.Errorf("tcp: %s: PE %d: %w", op, t.cfg.PE, ErrClosed)
			}
		}
		if c.err != nil {
			return nil, c.err
		}
	}
}

func (t *Transport) waitGone(op string, p *peer, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-p.failed:
		return nil
	case <-t.done:
		return fmt.Errorf("tcp: %s: PE %d: %w", op, t.cfg.PE, ErrClosed)
	case <-timer.C:
		return fmt.Errorf("tcp: %s: PE %d: to PE %d: %w: the previous connection was not drained within %v", op, t.cfg.PE, p.pe, ErrTimeout, t.cfg.Timeout)
	}
}

// establish resolves pe's address and connects every rail the two PEs share, within Timeout.
func (t *Transport) establish(op string, pe int) error {
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.Timeout)
	defer cancel()
	go func() {
		select {
		case <-t.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	l := &t.links[pe]
	addr, err := t.resolve(ctx, pe)
	if err != nil {
		return fmt.Errorf("tcp: %s: PE %d: looking up the address of PE %d: %w", op, t.cfg.PE, pe, err)
	}
	theirs := strings.Split(addr, ",")
	n := min(len(theirs), len(t.addrs))
	rem := t.rems[pe]
	if err := rem.setRails(n); err != nil {
		return fmt.Errorf("tcp: %s: PE %d: PE %d at %s: %w", op, t.cfg.PE, pe, addr, err)
	}
	// Each missing rail is dialed unless the peer's connection on it is being admitted; a rail
	// the peer brings (it dialed first, or won a crossing) is waited for, and dialed again if
	// that attempt came to nothing.
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		l.mu.Lock()
		ch := l.changed
		var missing []int
		for r := 0; r < n; r++ {
			if rem.rails[r].Load() == nil {
				missing = append(missing, r)
			}
		}
		l.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-retry.C:
			errs := make([]error, len(missing))
			var wg sync.WaitGroup
			for i, r := range missing {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = t.dialRail(ctx, op, pe, r, theirs[r])
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				return err
			}
			retry.Reset(20 * time.Millisecond)
		case <-ch:
		case <-ctx.Done():
			if t.closed.Load() {
				return fmt.Errorf("tcp: %s: PE %d: %w", op, t.cfg.PE, ErrClosed)
			}
			return fmt.Errorf("tcp: %s: PE %d: PE %d at %s did not connect rail %d within %v: %w", op, t.cfg.PE, pe, addr, missing[0], t.cfg.Timeout, ErrTimeout)
		}
	}
}

// resolve returns pe's address: from Resolve once, then from the cache.
func (t *Transport) resolve(ctx context.Context, pe int) (string, error) {
	l := &t.links[pe]
	l.rmu.Lock()
	defer l.rmu.Unlock()
	l.mu.Lock()
	addr := l.addr
	l.mu.Unlock()
	if addr != "" {
		return addr, nil
	}
	addr, err := t.cfg.Resolve(ctx, pe)
	if err != nil {
		return "", err
	}
	if addr == "" {
		return "", fmt.Errorf("PE %d published an empty address", pe)
	}
	l.mu.Lock()
	l.addr = addr
	rem := t.rems[pe]
	if rem.addrs == nil {
		// Read by rails' redial, which only runs once a rail has joined (after this write).
		rem.addrs = strings.Split(addr, ",")
	}
	l.mu.Unlock()
	return addr, nil
}

// dialRail dials pe on rail unless the rail is connected or the peer's connection on it is
// being admitted; a crossing the peer wins is not an error (its connection is waited for).
func (t *Transport) dialRail(ctx context.Context, op string, pe, rail int, addr string) error {
	l := &t.links[pe]
	rem := t.rems[pe]
	l.mu.Lock()
	if rem.rails[rail].Load() != nil || l.accepting[rail] {
		l.mu.Unlock()
		return nil
	}
	l.dialing[rail] = true
	l.mu.Unlock()
	err := t.dialAs(ctx, op, pe, rail, addr, true)
	l.mu.Lock()
	l.dialing[rail] = false
	l.kick()
	l.mu.Unlock()
	if errors.Is(err, errCrossed) || errors.Is(err, errAlready) {
		return nil // the other connection is used: waited for (or dialed again) by establish
	}
	if err != nil && rem.rails[rail].Load() != nil {
		return nil // the peer's connection joined meanwhile ("already connected")
	}
	return err
}

// admit decides, under link.mu, whether pe's connection on rail may join; done ends the
// admission. A lower PE dialing the same rail refuses it (errCrossed), and so does a PE that
// holds a live connection on the rail when the peer dials it for the first time (first); a
// connection being retired is drained first.
func (t *Transport) admit(pe, rail int, first bool) (done func(), err error) {
	l := &t.links[pe]
	deadline := time.Now().Add(t.cfg.Timeout)
	for {
		l.mu.Lock()
		if t.cfg.PE < pe && l.dialing[rail] {
			l.mu.Unlock()
			return nil, errCrossed
		}
		old := t.rems[pe].rails[rail].Load()
		if first && old != nil && !old.closing.Load() && old.failure("accept") == nil {
			// A first connection while this end holds one from the other direction: the
			// dialer uses that one.
			l.mu.Unlock()
			return nil, errCrossed
		}
		if old != nil && old.closing.Load() {
			l.mu.Unlock()
			if err := t.waitGone("accept", old, deadline); err != nil {
				return nil, err
			}
			continue
		}
		if l.accepting[rail] {
			ch := l.changed
			l.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-time.After(time.Until(deadline)):
				return nil, fmt.Errorf("PE %d: another connection on rail %d is being admitted", pe, rail)
			}
		}
		l.accepting[rail] = true
		l.mu.Unlock()
		return func() {
			l.mu.Lock()
			l.accepting[rail] = false
			l.kick()
			l.mu.Unlock()
		}, nil
	}
}

// usable reports whether the rails layer has a rail to r's peer up, or has given the peer up
// (then every operation reports why).
func (r *remote) usable() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.aliveLocked() > 0 || r.dead != nil || r.closed
}

// retired is called when a connection that was being retired is gone: the peer is free for
// the next connection.
func (t *Transport) retired(p *peer) {
	if p.rail == 0 {
		t.peers[p.pe].CompareAndSwap(p, nil)
	}
	p.rem.rails[p.rail].CompareAndSwap(p, nil)
}

// farewell records the error text a peer sent with its farewell, for the next Quiet.
func (t *Transport) farewell(pe int, msg string) {
	if msg == "" {
		return
	}
	l := &t.links[pe]
	l.mu.Lock()
	l.lostErr = append(l.lostErr, &RemoteError{PE: pe, Msg: msg})
	l.mu.Unlock()
}

// takeLost returns and clears the farewell errors of pe (of every PE when pe < 0).
func (t *Transport) takeLost(pe int) []error {
	var errs []error
	for q := range t.links {
		if pe >= 0 && q != pe {
			continue
		}
		l := &t.links[q]
		l.mu.Lock()
		for _, e := range l.lostErr {
			errs = append(errs, fmt.Errorf("tcp: quiet: PE %d: puts to PE %d: %w", t.cfg.PE, q, e))
		}
		l.lostErr = nil
		l.mu.Unlock()
	}
	return errs
}

// trim evicts the least recently used idle connections while more than MaxPeers peers are
// connected; keep (the connection just made) is never chosen. Peers with unflushed puts or
// pending answers are not idle: the cap may be exceeded while every peer is busy.
func (t *Transport) trim(keep *peer) {
	if t.cfg.MaxPeers <= 0 || len(t.cfg.Rails) > 1 {
		return
	}
	type cand struct {
		p    *peer
		used int64
	}
	var cands []cand
	live := 0
	for pe := range t.peers {
		p := t.peers[pe].Load()
		if p == nil || p.closing.Load() || p.failure("trim") != nil {
			continue
		}
		live++
		if p != keep {
			cands = append(cands, cand{p, t.links[pe].lastUse.Load()})
		}
	}
	for live > t.cfg.MaxPeers && len(cands) > 0 {
		best := 0
		for i, c := range cands {
			if c.used < cands[best].used {
				best = i
			}
		}
		c := cands[best]
		cands = append(cands[:best], cands[best+1:]...)
		if c.p.evict() {
			live--
		}
	}
}

// evict starts retiring p if it is idle: no put since the last flush, no answer pending, nothing
// buffered. It reports whether it did.
func (p *peer) evict() bool {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.pmu.Lock()
	idle := p.err == nil && len(p.pend) == 0
	p.pmu.Unlock()
	if !idle || p.dirty.Load() || len(p.wbuf) > 0 || p.closing.Load() {
		return false
	}
	p.evictor.Store(true)
	p.closing.Store(true)
	p.t.evicted.Add(1)
	// A peer that does not finish the exchange fails the connection within Timeout.
	time.AfterFunc(p.t.cfg.Timeout, func() {
		p.fail(fmt.Errorf("%w: %w: PE %d did not finish closing an idle connection within %v", ErrPeerLost, ErrTimeout, p.pe, p.t.cfg.Timeout))
	})
	p.wbuf = (&request{typ: reqBye, kind: byeEvict}).encode(p.wbuf)
	p.write([][]byte{p.wbuf})
	p.wbuf = p.wbuf[:0]
	return true
}
