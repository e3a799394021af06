// Package sim runs the real bootstrap (internal/bootstrap: its client, server and tree code) for
// many virtual PEs in one process, over an in-memory network that charges every message a
// latency and a bandwidth cost in virtual time, and reports what each PE sent, received and
// held, and how long Init took in virtual time.
//
// Virtual time: every virtual PE (a Host) has a clock. A write departs at the sender's clock (or
// when its link is free, for back-to-back sends), takes len/Bandwidth to serialize and Latency
// to arrive; a read advances the reader's clock to the arrival time. The clock therefore follows
// the causal chain of messages (a PE that waits for a reply is as late as the reply), and the
// largest clock at the end of Init is the simulated Init time, independent of how fast this
// machine runs the goroutines. Computation is free: the model is of the network only.
package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Net is the in-memory network.
type Net struct {
	Latency   time.Duration // per message, one way
	Bandwidth float64       // bytes per second per PE link; 0: infinite

	mu        sync.Mutex
	listeners map[string]*listener
	arrived   chan struct{} // closed and replaced whenever a listener appears
}

// NewNet returns an empty network.
func NewNet(latency time.Duration, bandwidth float64) *Net {
	return &Net{Latency: latency, Bandwidth: bandwidth, listeners: map[string]*listener{}, arrived: make(chan struct{})}
}

// Host is one virtual PE's end of the network (a bootstrap.Network) and its virtual clock.
type Host struct {
	net *Net
	mu  sync.Mutex
	// clock: this PE's virtual time; free: when its outgoing link is next free; hops: the longest
	// chain of messages that led here (the rounds).
	clock, free time.Duration
	hops        int
}

// Host returns a new virtual PE at virtual time 0.
func (n *Net) Host() *Host { return &Host{net: n} }

// Now returns the host's virtual time and the longest message chain behind it.
func (h *Host) Now() (time.Duration, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clock, h.hops
}

// depart stamps a message of size bytes leaving h now: its arrival time and chain length.
func (h *Host) depart(size int) (time.Duration, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := max(h.clock, h.free)
	if bw := h.net.Bandwidth; bw > 0 {
		t += time.Duration(float64(size) / bw * float64(time.Second))
	}
	h.free = t
	return t + h.net.Latency, h.hops + 1
}

func (h *Host) arrive(at time.Duration, hops int) {
	h.mu.Lock()
	h.clock = max(h.clock, at)
	h.hops = max(h.hops, hops)
	h.mu.Unlock()
}

type addr string

func (a addr) Network() string { return "sim" }
func (a addr) String() string  { return string(a) }

type listener struct {
	net    *Net
	host   *Host
	a      string
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

// Listen registers addr; a second Listen on it fails as a bound socket would.
func (h *Host) Listen(a string) (net.Listener, error) {
	n := h.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners[a] != nil {
		return nil, fmt.Errorf("sim: listen %s: address already in use", a)
	}
	l := &listener{net: n, host: h, a: a, conns: make(chan net.Conn, 64), closed: make(chan struct{})}
	n.listeners[a] = l
	close(n.arrived)
	n.arrived = make(chan struct{})
	return l, nil
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *listener) Close() error {
	l.once.Do(func() {
		close(l.closed)
		l.net.mu.Lock()
		if l.net.listeners[l.a] == l {
			delete(l.net.listeners, l.a)
		}
		l.net.mu.Unlock()
	})
	return nil
}

func (l *listener) Addr() net.Addr { return addr(l.a) }

// Dial connects to addr. Every virtual PE starts at once, so a PE whose parent has not started
// listening waits for it rather than being refused and retrying (a real PE retries with backoff;
// the wait keeps retries, which cost no messages, from skewing the virtual clock). Connection
// setup costs the dialer one round trip.
func (h *Host) Dial(ctx context.Context, a string) (net.Conn, error) {
	n := h.net
	for {
		n.mu.Lock()
		l := n.listeners[a]
		arrived := n.arrived
		n.mu.Unlock()
		if l != nil {
			at, hops := h.depart(0)
			h.arrive(at+n.Latency, hops+1)
			up, down := newPipe(), newPipe()
			mine := &conn{host: h, in: down, out: up, local: "dialer", remote: a}
			theirs := &conn{host: l.host, in: up, out: down, local: a, remote: "dialer"}
			select {
			case l.conns <- theirs:
				return mine, nil
			case <-l.closed:
				return nil, fmt.Errorf("sim: dial %s: connection refused", a)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return nil, fmt.Errorf("sim: dial %s: nobody listens: %w", a, ctx.Err())
		}
	}
}

// pipe is one direction of a connection: chunks with their arrival stamps.
type pipe struct {
	mu     sync.Mutex
	chunks []chunk
	closed bool
	notify chan struct{}
}

type chunk struct {
	b    []byte
	at   time.Duration
	hops int
}

func newPipe() *pipe { return &pipe{notify: make(chan struct{}, 1)} }

func (p *pipe) wake() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

func (p *pipe) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wake()
}

type conn struct {
	host          *Host
	in, out       *pipe
	local, remote string
	dmu           sync.Mutex
	readDeadline  time.Time
	writeDeadline time.Time
	once          sync.Once
}

func (c *conn) Read(b []byte) (int, error) {
	for {
		c.in.mu.Lock()
		if len(c.in.chunks) > 0 {
			ch := &c.in.chunks[0]
			n := copy(b, ch.b)
			c.host.arrive(ch.at, ch.hops)
			if ch.b = ch.b[n:]; len(ch.b) == 0 {
				c.in.chunks = c.in.chunks[1:]
			}
			more := len(c.in.chunks) > 0
			c.in.mu.Unlock()
			if more {
				c.in.wake()
			}
			return n, nil
		}
		closed := c.in.closed
		c.in.mu.Unlock()
		if closed {
			return 0, io.EOF
		}
		c.dmu.Lock()
		dl := c.readDeadline
		c.dmu.Unlock()
		if dl.IsZero() {
			<-c.in.notify
			continue
		}
		d := time.Until(dl)
		if d <= 0 {
			return 0, os.ErrDeadlineExceeded
		}
		t := time.NewTimer(d)
		select {
		case <-c.in.notify:
		case <-t.C:
		}
		t.Stop()
	}
}

func (c *conn) Write(b []byte) (int, error) {
	c.out.mu.Lock()
	defer c.out.mu.Unlock()
	if c.out.closed {
		return 0, errors.New("sim: write on a closed connection")
	}
	at, hops := c.host.depart(len(b))
	c.out.chunks = append(c.out.chunks, chunk{b: append([]byte(nil), b...), at: at, hops: hops})
	c.out.wake()
	return len(b), nil
}

func (c *conn) Close() error {
	c.once.Do(func() {
		c.in.close()
		c.out.close()
	})
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return addr(c.local) }
func (c *conn) RemoteAddr() net.Addr { return addr(c.remote) }

func (c *conn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func (c *conn) SetReadDeadline(t time.Time) error {
	c.dmu.Lock()
	c.readDeadline = t
	c.dmu.Unlock()
	c.in.wake()
	return nil
}

// SetWriteDeadline is kept but never fires: writes never block in memory.
func (c *conn) SetWriteDeadline(t time.Time) error {
	c.dmu.Lock()
	c.writeDeadline = t
	c.dmu.Unlock()
	return nil
}
