// Package tcp is a nic.Transport over kernel TCP, in pure Go.
//
// Each pair of PEs shares one connection, dialed by the lower PE, that carries both PEs'
// requests and the answers to them (so a put one way carries the TCP acknowledgement of a put the
// other way). Each PE applies the other's requests to its symmetric heap in arrival order (so
// per-PE order holds with no extra work for Fence) and answers those that need an answer (Get,
// AMO, Flush) from a separate goroutine, so that a PE never stops reading while it writes.
// Requests are pipelined: Put and PutSignal return once the data is handed to the kernel, and
// Quiet sends a Flush to each PE written since the last one and waits for its answer. Connections are authenticated by the
// job token (HMAC challenge-response in both directions); a connection that fails it is refused
// and logged. A lost or timed-out connection fails every pending and later operation to its PE
// with an error that names the PE; no call waits longer than Config.Timeout.
package tcp

import (
	"bufio"
	"context"
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/roxamen/roxamen/nic"
)

// Config configures a Transport.
type Config struct {
	PE, NPEs int
	// Token is the job's secret; both ends of every connection must hold the same one.
	Token string
	// Listen is the local address to listen on ("host:port"; port 0 picks one). Ignored when
	// Listener is set.
	Listen string
	// Advertise is the host (IP or name) other PEs reach this one at, when the listen address is
	// unspecified (0.0.0.0, ::): e.g. the local IP of the bootstrap connection.
	Advertise string
	// Heap is this PE's symmetric heap: remote writes and AMOs land in it, gets read from it. Its
	// size is also the bound checked for every remote range before it is sent.
	Heap nic.Memory
	// Timeout bounds every wait: a connection, a response, a write. Default 30s.
	Timeout time.Duration
	// Listener and Dial, when set, replace net.Listen and a net.Dialer (tests use them to place
	// sockets in network namespaces).
	Listener net.Listener
	Dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logf logs refused connections and lost peers; default log.Printf.
	Logf func(format string, args ...any)
	// Notify, when set, is called after requests from other PEs changed this PE's heap (puts,
	// signals, AMOs), once per burst, before the transport waits for more: a PE waiting for a
	// heap word can sleep until then rather than spin. It must not block.
	Notify func()
}

// Errors matched with errors.Is.
var (
	ErrPeerLost = errors.New("connection lost")
	ErrAuth     = errors.New("authentication failed")
	ErrClosed   = errors.New("transport closed")
	ErrTimeout  = errors.New("timed out")
	errBye      = errors.New("it closed its transport")
)

const (
	defaultTimeout  = 30 * time.Second
	directThreshold = 16 << 10  // payloads this large go to the socket without a copy
	flushThreshold  = 256 << 10 // a batch sends once this much is buffered
	readBufSize     = 16 << 10  // small: payloads past what it holds are read straight into place
)

// Transport is a nic.Transport over TCP. Its methods are safe for concurrent use.
type Transport struct {
	cfg  Config
	ln   net.Listener
	addr string

	peers  []atomic.Pointer[peer] // peers[pe]: the connection to pe, once made; nil for itself
	mu     sync.Mutex
	conns  map[net.Conn]struct{} // every open connection, for Close
	joined chan struct{}         // signalled when a peer is added

	corked    atomic.Int32
	closed    atomic.Bool
	closeOnce sync.Once
	done      chan struct{}
	wg        sync.WaitGroup
}

var _ nic.Transport = (*Transport)(nil)
var _ nic.Batcher = (*Transport)(nil)
var _ nic.AsyncQuieter = (*Transport)(nil)

// New listens and starts accepting connections from other PEs; Connect then joins them.
func New(cfg Config) (*Transport, error) {
	if cfg.NPEs < 1 || cfg.PE < 0 || cfg.PE >= cfg.NPEs {
		return nil, fmt.Errorf("tcp: New: PE %d of %d PEs is out of range", cfg.PE, cfg.NPEs)
	}
	if cfg.Token == "" {
		return nil, fmt.Errorf("tcp: New: PE %d: empty job token", cfg.PE)
	}
	if cfg.Heap == nil {
		return nil, fmt.Errorf("tcp: New: PE %d: no heap", cfg.PE)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.Logf == nil {
		cfg.Logf = log.Printf
	}
	ln := cfg.Listener
	if ln == nil {
		l := cfg.Listen
		if l == "" {
			l = ":0"
		}
		var err error
		if ln, err = net.Listen("tcp", l); err != nil {
			return nil, fmt.Errorf("tcp: New: PE %d: %w", cfg.PE, err)
		}
	}
	host, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("tcp: New: PE %d: listen address %q: %w", cfg.PE, ln.Addr(), err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		if cfg.Advertise == "" {
			ln.Close()
			return nil, fmt.Errorf("tcp: New: PE %d: listening on %s: an unspecified address needs Config.Advertise", cfg.PE, ln.Addr())
		}
		host = cfg.Advertise
	}
	t := &Transport{
		cfg:    cfg,
		ln:     ln,
		addr:   net.JoinHostPort(host, port),
		peers:  make([]atomic.Pointer[peer], cfg.NPEs),
		conns:  map[net.Conn]struct{}{},
		joined: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	t.wg.Add(2)
	go t.acceptLoop()
	go t.watchdog()
	return t, nil
}

// Addr returns the address other PEs dial to reach this one.
func (t *Transport) Addr() string { return t.addr }

// PE returns this transport's PE.
func (t *Transport) PE() int { return t.cfg.PE }

func (t *Transport) logf(format string, args ...any) {
	if !t.closed.Load() {
		t.cfg.Logf(format, args...)
	}
}

// track registers a connection so that Close closes it; it returns false once closed.
func (t *Transport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed.Load() {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *Transport) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	c.Close()
}

// Connect joins every other PE: it dials the higher PEs (addrs[pe], from the bootstrap
// allgather; addrs[self] is ignored) and waits until every lower PE has dialed this one. It fails
// within ctx's deadline or Config.Timeout, naming the PEs it could not reach.
func (t *Transport) Connect(ctx context.Context, addrs []string) error {
	if len(addrs) != t.cfg.NPEs {
		return fmt.Errorf("tcp: Connect: PE %d: %d addresses for %d PEs", t.cfg.PE, len(addrs), t.cfg.NPEs)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.cfg.Timeout)
		defer cancel()
	}
	errs := make([]error, t.cfg.NPEs)
	var wg sync.WaitGroup
	for pe := t.cfg.PE + 1; pe < t.cfg.NPEs; pe++ {
		if t.peers[pe].Load() != nil {
			continue
		}
		wg.Add(1)
		go func(pe int) {
			defer wg.Done()
			errs[pe] = t.dial(ctx, pe, addrs[pe])
		}(pe)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for {
		var missing []int
		for pe := 0; pe < t.cfg.PE; pe++ {
			if t.peers[pe].Load() == nil {
				missing = append(missing, pe)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-t.joined:
		case <-t.done:
			return fmt.Errorf("tcp: Connect: PE %d: %w", t.cfg.PE, ErrClosed)
		case <-ctx.Done():
			return fmt.Errorf("tcp: Connect: PE %d: no connection from PEs %v: %w", t.cfg.PE, missing, ctx.Err())
		}
	}
}

func (t *Transport) dial(ctx context.Context, pe int, addr string) error {
	dial := t.cfg.Dial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	var conn net.Conn
	for {
		var err error
		conn, err = dial(ctx, "tcp", addr)
		if err == nil {
			break
		}
		// The peer may not listen yet (another process still starting): retry until ctx ends.
		if ctx.Err() != nil {
			return fmt.Errorf("tcp: Connect: PE %d: dial PE %d at %s: %w", t.cfg.PE, pe, addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !t.track(conn) {
		conn.Close()
		return fmt.Errorf("tcp: Connect: PE %d: %w", t.cfg.PE, ErrClosed)
	}
	if err := t.dialHandshake(ctx, conn, pe); err != nil {
		t.untrack(conn)
		if errors.Is(err, ErrAuth) {
			t.logf("tcp: PE %d: refused PE %d at %s: %v", t.cfg.PE, pe, addr, err)
		}
		return fmt.Errorf("tcp: Connect: PE %d: PE %d at %s: %w", t.cfg.PE, pe, addr, err)
	}
	if _, err := t.join(pe, conn, nil); err != nil {
		t.untrack(conn)
		return fmt.Errorf("tcp: Connect: PE %d: PE %d at %s: %w", t.cfg.PE, pe, addr, err)
	}
	return nil
}

// join makes conn the connection to pe and starts serving it. The acceptor passes its last
// handshake byte in ack: it is written before anything this PE sends can be.
func (t *Transport) join(pe int, conn net.Conn, ack []byte) (*peer, error) {
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	p := &peer{t: t, pe: pe, conn: conn, failed: make(chan struct{}), wake: make(chan struct{}, 1)}
	p.wmu.Lock()
	if !t.peers[pe].CompareAndSwap(nil, p) {
		p.wmu.Unlock()
		return nil, fmt.Errorf("PE %d is already connected", pe)
	}
	if ack != nil {
		conn.SetWriteDeadline(time.Now().Add(t.cfg.Timeout))
		if _, err := conn.Write(ack); err != nil {
			p.fail(fmt.Errorf("%w: PE %d: %v", ErrPeerLost, pe, err))
		}
		conn.SetWriteDeadline(time.Time{})
	}
	p.wmu.Unlock()
	t.wg.Add(2)
	go p.serve()
	go p.answer()
	select {
	case t.joined <- struct{}{}:
	default:
	}
	return p, nil
}

const accepted = 1 // the acceptor's last handshake byte

func (t *Transport) dialHandshake(ctx context.Context, conn net.Conn, pe int) error {
	deadline := time.Now().Add(t.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	defer conn.SetDeadline(time.Time{})
	nd, err := nonce()
	if err != nil {
		return err
	}
	h := hello{pe: t.cfg.PE, npes: t.cfg.NPEs, nonce: nd}
	if _, err := conn.Write(h.encode()); err != nil {
		return err
	}
	var ch [challengeSize]byte
	if _, err := io.ReadFull(conn, ch[:]); err != nil {
		return fmt.Errorf("refused (wrong job token, or not a roxamen PE?): %w", err)
	}
	if [8]byte(ch[:8]) != magic {
		return fmt.Errorf("%w: not a roxamen nic endpoint", ErrAuth)
	}
	accPE := int(binary.LittleEndian.Uint32(ch[8:]))
	var na [32]byte
	copy(na[:], ch[12:44])
	// Answer the challenge even when the acceptor failed ours, so that it can log why it refuses
	// us; the answer is worthless to anyone else (fresh nonces).
	_, werr := conn.Write(mac(t.cfg.Token, "dialer", na, nd, t.cfg.PE, pe))
	if !hmac.Equal(ch[44:], mac(t.cfg.Token, "acceptor", nd, na, accPE, t.cfg.PE)) {
		return fmt.Errorf("%w: the endpoint does not hold the job token", ErrAuth)
	}
	if accPE != pe {
		return fmt.Errorf("%w: the endpoint is PE %d", ErrAuth, accPE)
	}
	if werr != nil {
		return werr
	}
	var ok [1]byte
	if _, err := io.ReadFull(conn, ok[:]); err != nil || ok[0] != accepted {
		return fmt.Errorf("%w: refused by PE %d", ErrAuth, pe)
	}
	return nil
}

func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	for {
		conn, err := t.ln.Accept()
		if err != nil {
			if t.closed.Load() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			t.logf("tcp: PE %d: accept: %v", t.cfg.PE, err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !t.track(conn) {
			conn.Close()
			return
		}
		t.wg.Add(1)
		go t.accept(conn)
	}
}

// accept authenticates an inbound connection and joins it.
func (t *Transport) accept(conn net.Conn) {
	defer t.wg.Done()
	pe, err := t.acceptHandshake(conn)
	if err == nil {
		if _, err = t.join(pe, conn, []byte{accepted}); err == nil {
			return
		}
	}
	t.logf("tcp: PE %d: refused connection from %s: %v", t.cfg.PE, conn.RemoteAddr(), err)
	t.untrack(conn)
}

func (t *Transport) acceptHandshake(conn net.Conn) (int, error) {
	conn.SetDeadline(time.Now().Add(t.cfg.Timeout))
	defer conn.SetDeadline(time.Time{})
	var hb [helloSize]byte
	if _, err := io.ReadFull(conn, hb[:]); err != nil {
		return -1, err
	}
	h, err := decodeHello(hb[:])
	if err != nil {
		return -1, err
	}
	if h.npes != t.cfg.NPEs || h.pe < 0 || h.pe >= t.cfg.PE {
		// Only lower PEs dial this one.
		return -1, fmt.Errorf("claims PE %d of %d PEs (this is PE %d of %d)", h.pe, h.npes, t.cfg.PE, t.cfg.NPEs)
	}
	na, err := nonce()
	if err != nil {
		return -1, err
	}
	ch := make([]byte, 0, challengeSize)
	ch = append(ch, magic[:]...)
	me := uint32(t.cfg.PE)
	ch = append(ch, byte(me), byte(me>>8), byte(me>>16), byte(me>>24))
	ch = append(ch, na[:]...)
	ch = append(ch, mac(t.cfg.Token, "acceptor", h.nonce, na, t.cfg.PE, h.pe)...)
	if _, err := conn.Write(ch); err != nil {
		return -1, err
	}
	resp := make([]byte, len(ch)-44)
	if _, err := io.ReadFull(conn, resp); err != nil {
		return -1, fmt.Errorf("claims PE %d: no proof of the job token: %w", h.pe, err)
	}
	if !hmac.Equal(resp, mac(t.cfg.Token, "dialer", na, h.nonce, h.pe, t.cfg.PE)) {
		return -1, fmt.Errorf("claims PE %d: %w: wrong job token", h.pe, ErrAuth)
	}
	return h.pe, nil
}

// Close stops accepting, closes every connection and waits for the transport's goroutines.
// Pending operations fail with ErrClosed.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed.Store(true)
		close(t.done)
		conns := make([]net.Conn, 0, len(t.conns))
		for c := range t.conns {
			conns = append(conns, c)
		}
		t.mu.Unlock()
		t.ln.Close()
		var byes sync.WaitGroup
		for i := range t.peers {
			if p := t.peers[i].Load(); p != nil {
				byes.Add(1)
				go func() { defer byes.Done(); p.bye() }()
			}
		}
		byes.Wait()
		for i := range t.peers {
			if p := t.peers[i].Load(); p != nil {
				p.fail(fmt.Errorf("PE %d: %w", t.cfg.PE, ErrClosed))
			}
		}
		for _, c := range conns {
			c.Close()
		}
	})
	t.wg.Wait()
	return nil
}

// checkRange checks a heap range against this PE's heap: heaps are symmetric, so a range this PE
// does not hold is not held by any PE.
func (t *Transport) checkRange(op string, pe int, off uint64, n int) error {
	if pe < 0 || pe >= t.cfg.NPEs {
		return fmt.Errorf("tcp: %s: PE %d: to PE %d of %d PEs: PE out of range", op, t.cfg.PE, pe, t.cfg.NPEs)
	}
	if n == 0 {
		return nil
	}
	if _, err := t.cfg.Heap.Bytes(off, n); err != nil {
		return fmt.Errorf("tcp: %s: PE %d: to PE %d heap [%#x, %#x): %w", op, t.cfg.PE, pe, off, off+uint64(n), err)
	}
	return nil
}

func (t *Transport) peer(op string, pe int) (*peer, error) {
	if t.closed.Load() {
		return nil, fmt.Errorf("tcp: %s: PE %d: %w", op, t.cfg.PE, ErrClosed)
	}
	p := t.peers[pe].Load()
	if p == nil {
		return nil, fmt.Errorf("tcp: %s: PE %d: PE %d is not connected", op, t.cfg.PE, pe)
	}
	return p, nil
}

// Put copies src to pe's heap at dst. It returns once src may be reused; Quiet completes it.
func (t *Transport) Put(pe int, dst uint64, src []byte) error {
	if err := t.checkRange("put", pe, dst, len(src)); err != nil {
		return err
	}
	if pe == t.cfg.PE {
		b, _ := t.cfg.Heap.Bytes(dst, len(src))
		copy(b, src)
		return nil
	}
	p, err := t.peer("put", pe)
	if err != nil {
		return err
	}
	r := request{typ: reqPut, off: dst, size: uint64(len(src))}
	return p.send("put", &r, src, nil, false)
}

// PutSignal copies src to pe's heap at dst and then updates the signal word at sig; the target
// applies the two in that order.
func (t *Transport) PutSignal(pe int, dst uint64, src []byte, sig uint64, sigOp nic.SignalOp, sigValue uint64) error {
	if err := t.checkRange("put_signal", pe, dst, len(src)); err != nil {
		return err
	}
	if err := t.checkRange("put_signal (signal)", pe, sig, 8); err != nil {
		return err
	}
	if sig%8 != 0 || sigOp > nic.SignalAdd {
		return fmt.Errorf("tcp: put_signal: PE %d: to PE %d: signal %v at %#x: want set or add at an 8-byte aligned offset", t.cfg.PE, pe, sigOp, sig)
	}
	if pe == t.cfg.PE {
		b, _ := t.cfg.Heap.Bytes(dst, len(src))
		copy(b, src)
		s, _ := t.cfg.Heap.Bytes(sig, 8)
		return nic.ApplySignal(s, sigOp, sigValue)
	}
	p, err := t.peer("put_signal", pe)
	if err != nil {
		return err
	}
	r := request{typ: reqPutSignal, kind: uint8(sigOp), off: dst, size: uint64(len(src)), value: sigValue, aux: sig}
	return p.send("put_signal", &r, src, nil, false)
}

// Get copies len(dst) bytes from pe's heap at src into dst.
func (t *Transport) Get(pe int, src uint64, dst []byte) error {
	if err := t.checkRange("get", pe, src, len(dst)); err != nil {
		return err
	}
	if pe == t.cfg.PE {
		b, _ := t.cfg.Heap.Bytes(src, len(dst))
		copy(dst, b)
		return nil
	}
	p, err := t.peer("get", pe)
	if err != nil {
		return err
	}
	pd := &pending{typ: reqGet, dst: dst, done: make(chan struct{})}
	r := request{typ: reqGet, off: src, size: uint64(len(dst))}
	if err := p.send("get", &r, nil, pd, true); err != nil {
		return err
	}
	if err := p.wait(context.Background(), "get", pd); err != nil {
		return fmt.Errorf("tcp: get: PE %d: from PE %d heap [%#x, %#x): %w", t.cfg.PE, pe, src, src+uint64(len(dst)), err)
	}
	return nil
}

// AMO applies op to the width-byte word at dst on pe and returns its old value.
func (t *Transport) AMO(pe int, op nic.AMOOp, width int, dst uint64, value, compare uint64) (uint64, error) {
	if err := nic.CheckAMO(op, width, dst); err != nil {
		return 0, fmt.Errorf("tcp: amo: PE %d: to PE %d heap offset %#x: %w", t.cfg.PE, pe, dst, err)
	}
	if err := t.checkRange("amo", pe, dst, width); err != nil {
		return 0, err
	}
	if pe == t.cfg.PE {
		b, _ := t.cfg.Heap.Bytes(dst, width)
		return nic.ApplyAMO(b, op, width, value, compare)
	}
	p, err := t.peer("amo", pe)
	if err != nil {
		return 0, err
	}
	pd := &pending{typ: reqAMO, done: make(chan struct{})}
	r := request{typ: reqAMO, kind: uint8(op), width: uint8(width), off: dst, value: value, aux: compare}
	if err := p.send("amo", &r, nil, pd, true); err != nil {
		return 0, err
	}
	if err := p.wait(context.Background(), "amo", pd); err != nil {
		return 0, fmt.Errorf("tcp: amo %v: PE %d: on PE %d heap offset %#x: %w", op, t.cfg.PE, pe, dst, err)
	}
	return pd.value, nil
}

// Fence orders delivery to pe: one connection per ordered pair of PEs, applied in arrival order,
// already does. It reports a peer that is lost.
func (t *Transport) Fence(pe int) error {
	if pe < 0 || pe >= t.cfg.NPEs {
		return fmt.Errorf("tcp: fence: PE %d: PE %d of %d PEs: PE out of range", t.cfg.PE, pe, t.cfg.NPEs)
	}
	if pe == t.cfg.PE {
		return nil
	}
	p, err := t.peer("fence", pe)
	if err != nil {
		return err
	}
	return p.failure("fence")
}

// Quiet waits until every put issued so far to pe (every PE when pe < 0) is delivered, and
// returns the first error any of them met.
func (t *Transport) Quiet(ctx context.Context, pe int) error {
	fl, err := t.startQuiet(pe)
	if err != nil || len(fl) == 0 {
		return err
	}
	return t.finishQuiet(ctx, fl)
}

// QuietAsync starts a Quiet and returns at once; the channel receives its result.
func (t *Transport) QuietAsync(pe int) <-chan error {
	ch := make(chan error, 1)
	fl, err := t.startQuiet(pe)
	if err != nil || len(fl) == 0 {
		ch <- err
		return ch
	}
	go func() { ch <- t.finishQuiet(context.Background(), fl) }()
	return ch
}

type flush struct {
	p  *peer
	pd *pending
}

// startQuiet sends a Flush to every PE (or pe) written since its last one.
func (t *Transport) startQuiet(pe int) ([]flush, error) {
	if pe >= t.cfg.NPEs {
		return nil, fmt.Errorf("tcp: quiet: PE %d: PE %d of %d PEs: PE out of range", t.cfg.PE, pe, t.cfg.NPEs)
	}
	var fl []flush
	var errs []error
	for q := range t.peers {
		p := t.peers[q].Load()
		if p == nil || (pe >= 0 && q != pe) {
			continue
		}
		if !p.dirty.Load() {
			continue
		}
		pd := &pending{typ: reqFlush, done: make(chan struct{})}
		if err := p.send("quiet", &request{typ: reqFlush}, nil, pd, true); err != nil {
			errs = append(errs, err)
			continue
		}
		fl = append(fl, flush{p, pd})
	}
	if len(errs) > 0 {
		// Still wait for the others, so that what the error leaves behind is settled.
		errs = append(errs, t.finishQuiet(context.Background(), fl))
		return nil, errors.Join(errs...)
	}
	return fl, nil
}

func (t *Transport) finishQuiet(ctx context.Context, fl []flush) error {
	var errs []error
	for _, f := range fl {
		if err := f.p.wait(ctx, "quiet", f.pd); err != nil {
			errs = append(errs, fmt.Errorf("tcp: quiet: PE %d: puts to PE %d: %w", t.cfg.PE, f.p.pe, err))
		}
	}
	return errors.Join(errs...)
}

// BeginBatch lets small puts wait in the send buffers until EndBatch.
func (t *Transport) BeginBatch() { t.corked.Add(1) }

// EndBatch sends what the batch buffered.
func (t *Transport) EndBatch() error {
	if t.corked.Add(-1) > 0 {
		return nil
	}
	var errs []error
	for i := range t.peers {
		if p := t.peers[i].Load(); p != nil {
			if err := p.flushBuffered(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// pending is an operation waiting for its answer.
type pending struct {
	typ   uint8
	dst   []byte // a get's destination
	value uint64
	err   error
	done  chan struct{}
}

// answer is a response to one of the peer's requests, waiting to be written.
type answer struct {
	hdr  []byte
	data []byte // a get's data: heap memory, written as it is when the answer goes out
}

// peer is the connection to another PE: this PE's requests and answers out, the other's in.
type peer struct {
	t    *Transport
	pe   int
	conn net.Conn

	wmu   sync.Mutex // serializes writes; guards wbuf
	wbuf  []byte
	dirty atomic.Bool // puts sent since the last flush
	clock stallClock  // when the write in progress began

	pmu      sync.Mutex // guards pend and err
	pend     []*pending // FIFO: answers come back in request order
	err      error
	failed   chan struct{}
	failOnce sync.Once

	amu     sync.Mutex // guards answers
	answers []answer
	wake    chan struct{}
}

func (p *peer) failure(op string) error {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	if p.err != nil {
		return fmt.Errorf("tcp: %s: PE %d: to PE %d: %w", op, p.t.cfg.PE, p.pe, p.err)
	}
	return nil
}

// fail records the first error, fails every pending operation and closes the connection.
func (p *peer) fail(err error) {
	p.failOnce.Do(func() {
		p.pmu.Lock()
		p.err = err
		pend := p.pend
		p.pend = nil
		p.pmu.Unlock()
		close(p.failed)
		for _, pd := range pend {
			pd.err = err
			close(pd.done)
		}
		p.conn.Close()
		if !errors.Is(err, ErrClosed) && !errors.Is(err, errBye) {
			p.t.logf("tcp: PE %d: %v", p.t.cfg.PE, err)
		}
	})
}

// write writes bufs (one Write, or a writev for several); the caller holds wmu.
func (p *peer) write(bufs net.Buffers) error {
	p.clock.start()
	defer p.clock.stop()
	var err error
	if len(bufs) == 1 {
		_, err = p.conn.Write(bufs[0])
	} else {
		_, err = bufs.WriteTo(p.conn)
	}
	if err != nil {
		p.fail(fmt.Errorf("%w: PE %d: %v", ErrPeerLost, p.pe, err))
		p.pmu.Lock()
		defer p.pmu.Unlock()
		return p.err // the first failure: the watchdog's timeout, if it closed the connection
	}
	return nil
}

// send writes one request. pd, when set, is queued for the answer before the request can reach
// the wire. A payload of directThreshold or more is written from src itself.
func (p *peer) send(op string, r *request, payload []byte, pd *pending, flush bool) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if pd != nil {
		p.pmu.Lock()
		if p.err != nil {
			err := p.err
			p.pmu.Unlock()
			return fmt.Errorf("tcp: %s: PE %d: to PE %d: %w", op, p.t.cfg.PE, p.pe, err)
		}
		p.pend = append(p.pend, pd)
		p.pmu.Unlock()
	} else if err := p.failure(op); err != nil {
		return err
	}
	switch r.typ {
	case reqPut, reqPutSignal:
		p.dirty.Store(true)
	case reqFlush:
		p.dirty.Store(false)
	}
	var err error
	if len(payload) >= directThreshold {
		p.wbuf = r.encode(p.wbuf)
		err = p.write(net.Buffers{p.wbuf, payload})
		p.wbuf = p.wbuf[:0]
	} else {
		p.wbuf = append(r.encode(p.wbuf), payload...)
		if !flush && p.t.corked.Load() > 0 && len(p.wbuf) < flushThreshold {
			return nil
		}
		err = p.write(net.Buffers{p.wbuf})
		p.wbuf = p.wbuf[:0]
	}
	if err != nil {
		return fmt.Errorf("tcp: %s: PE %d: to PE %d: %w", op, p.t.cfg.PE, p.pe, err)
	}
	return nil
}

// bye tells the peer that this transport is closing (so that it does not report a lost PE),
// after whatever is buffered; it gives up after a short while.
func (p *peer) bye() {
	if p.failure("close") != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.wmu.Lock()
		defer p.wmu.Unlock()
		p.wbuf = (&request{typ: reqBye}).encode(p.wbuf)
		p.write(net.Buffers{p.wbuf})
		p.wbuf = p.wbuf[:0]
	}()
	select {
	case <-done:
	case <-time.After(min(p.t.cfg.Timeout, time.Second)):
		p.conn.Close() // unblocks the write
		<-done
	}
}

func (p *peer) flushBuffered() error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if len(p.wbuf) == 0 {
		return nil
	}
	err := p.write(net.Buffers{p.wbuf})
	p.wbuf = p.wbuf[:0]
	return err
}

// wait waits for pd's answer, at most Config.Timeout; a timeout fails the peer, since the answer
// stream can no longer be trusted to line up with the requests.
func (p *peer) wait(ctx context.Context, op string, pd *pending) error {
	timer := time.NewTimer(p.t.cfg.Timeout)
	defer timer.Stop()
	select {
	case <-pd.done:
		return pd.err
	case <-timer.C:
		p.fail(fmt.Errorf("%w: PE %d: no answer to %s within %v", ErrTimeout, p.pe, op, p.t.cfg.Timeout))
	case <-ctx.Done():
		p.fail(fmt.Errorf("%w: PE %d: %s abandoned: %v", ErrTimeout, p.pe, op, ctx.Err()))
	}
	<-pd.done
	return pd.err
}

// queue hands an answer to the answering goroutine: the reader never blocks on a write, so two
// PEs writing to each other can always both make progress.
func (p *peer) queue(a answer) {
	p.amu.Lock()
	p.answers = append(p.answers, a)
	p.amu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// answer writes queued answers, small ones gathered into one write.
func (p *peer) answer() {
	defer p.t.wg.Done()
	var out []byte
	for {
		select {
		case <-p.wake:
		case <-p.failed:
			return
		}
		p.amu.Lock()
		q := p.answers
		p.answers = nil
		p.amu.Unlock()
		if len(q) == 0 {
			continue
		}
		p.wmu.Lock()
		out = append(out[:0], p.wbuf...) // buffered requests go too
		p.wbuf = p.wbuf[:0]
		var err error
		for _, a := range q {
			out = append(out, a.hdr...)
			if len(a.data) < directThreshold {
				out = append(out, a.data...)
				continue
			}
			if err = p.write(net.Buffers{out, a.data}); err != nil {
				break
			}
			out = out[:0]
		}
		if err == nil && len(out) > 0 {
			err = p.write(net.Buffers{out})
		}
		p.wmu.Unlock()
		if err != nil {
			return
		}
		if cap(out) > 1<<20 {
			out = nil
		}
	}
}

// serve reads the connection: the peer's requests, applied to this PE's heap in order, and the
// answers to this PE's requests, matched to them in order.
func (p *peer) serve() {
	defer p.t.wg.Done()
	err := p.read()
	if p.t.closed.Load() {
		err = ErrClosed
	}
	p.fail(fmt.Errorf("%w: PE %d: %w", ErrPeerLost, p.pe, err))
	p.t.untrack(p.conn)
}

func (p *peer) read() error {
	t := p.t
	br := bufio.NewReaderSize(p.conn, readBufSize)
	var firstErr string // the first failed put since the last flush
	var h [reqHeaderSize]byte
	var r request
	changed := false
	for {
		if changed && br.Buffered() == 0 && t.cfg.Notify != nil {
			t.cfg.Notify()
			changed = false
		}
		if _, err := io.ReadFull(br, h[:1]); err != nil {
			return err
		}
		if h[0]&respFlag != 0 {
			if _, err := io.ReadFull(br, h[1:respHeaderSize]); err != nil {
				return err
			}
			if err := p.readAnswer(br, h[:respHeaderSize]); err != nil {
				return err
			}
			continue
		}
		if _, err := io.ReadFull(br, h[1:]); err != nil {
			return err
		}
		r.decode(h[:])
		switch r.typ {
		case reqPut, reqPutSignal:
			op := "put"
			if r.typ == reqPutSignal {
				op = "put_signal"
			}
			b, err := p.heap(op, r.off, r.size)
			if err != nil {
				if firstErr == "" {
					firstErr = err.Error()
				}
				// Stay in step with the stream; write nothing.
				if _, err := io.CopyN(io.Discard, br, int64(r.size)); err != nil {
					return err
				}
				continue
			}
			if err := p.readPayload(br, b); err != nil {
				return err
			}
			changed = true
			if r.typ == reqPutSignal {
				sb, err := p.heap("put_signal (signal)", r.aux, 8)
				if err == nil {
					err = nic.ApplySignal(sb, nic.SignalOp(r.kind), r.value)
				}
				if err != nil && firstErr == "" {
					firstErr = fmt.Sprintf("put_signal from PE %d: signal at %#x: %v", p.pe, r.aux, err)
				}
			}
		case reqGet:
			b, err := p.heap("get", r.off, r.size)
			if err != nil {
				p.queue(answer{hdr: encodeResp(nil, reqGet|respFlag, 0, err.Error())})
				continue
			}
			p.queue(answer{hdr: encodeResp(nil, reqGet|respFlag, uint64(len(b)), ""), data: b})
		case reqAMO:
			var old uint64
			b, err := p.heap("amo", r.off, uint64(r.width))
			if err == nil {
				old, err = nic.ApplyAMO(b, nic.AMOOp(r.kind), int(r.width), r.value, r.aux)
				changed = true
			}
			msg := ""
			if err != nil {
				msg = fmt.Sprintf("amo from PE %d at heap offset %#x: %v", p.pe, r.off, err)
			}
			p.queue(answer{hdr: encodeResp(nil, reqAMO|respFlag, old, msg)})
		case reqFlush:
			p.queue(answer{hdr: encodeResp(nil, reqFlush|respFlag, 0, firstErr)})
			firstErr = ""
		case reqBye:
			if firstErr != "" {
				return fmt.Errorf("%w, after an unreported error: %s", errBye, firstErr)
			}
			return errBye
		default:
			return fmt.Errorf("protocol error: request type %d", r.typ)
		}
	}
}

// readAnswer matches one answer (its header in h) to the oldest pending operation.
func (p *peer) readAnswer(br *bufio.Reader, h []byte) error {
	typ := h[0] &^ respFlag
	errLen := int(binary.LittleEndian.Uint32(h[4:]))
	value := binary.LittleEndian.Uint64(h[8:])
	if errLen > maxErrText {
		return fmt.Errorf("protocol error: error text of %d bytes", errLen)
	}
	var remoteErr error
	if errLen > 0 {
		msg := make([]byte, errLen)
		if _, err := io.ReadFull(br, msg); err != nil {
			return err
		}
		remoteErr = &RemoteError{PE: p.pe, Msg: string(msg)}
	}
	p.pmu.Lock()
	var pd *pending
	if len(p.pend) > 0 && p.pend[0].typ == typ {
		pd = p.pend[0]
		p.pend[0] = nil
		p.pend = p.pend[1:]
	}
	p.pmu.Unlock()
	if pd == nil {
		return fmt.Errorf("protocol error: unexpected answer of type %d", typ)
	}
	if typ == reqGet && remoteErr == nil {
		if value != uint64(len(pd.dst)) {
			pd.err = fmt.Errorf("%w: PE %d: protocol error: get answered %d bytes for %d", ErrPeerLost, p.pe, value, len(pd.dst))
			close(pd.done)
			return pd.err
		}
		if err := p.readPayload(br, pd.dst); err != nil {
			// pd is off the queue: fail it here; the caller fails the peer.
			pd.err = fmt.Errorf("%w: PE %d: %v", ErrPeerLost, p.pe, err)
			close(pd.done)
			return err
		}
	}
	pd.value, pd.err = value, remoteErr
	close(pd.done)
	return nil
}

// readPayload fills b from the stream: what the buffer holds, then, for a large payload, the
// rest straight from the connection into b (the heap, or a get's destination) without a copy.
func (p *peer) readPayload(br *bufio.Reader, b []byte) error {
	k := min(br.Buffered(), len(b))
	if _, err := io.ReadFull(br, b[:k]); err != nil {
		return err
	}
	rest := b[k:]
	if len(rest) < readBufSize {
		_, err := io.ReadFull(br, rest)
		return err
	}
	_, err := io.ReadFull(p.conn, rest) // the buffer is empty: the stream continues in the socket
	return err
}

func (p *peer) heap(op string, off, size uint64) ([]byte, error) {
	if size > uint64(^uint(0)>>1) {
		return nil, fmt.Errorf("%s from PE %d to PE %d heap [%#x, +%d): size too large", op, p.pe, p.t.cfg.PE, off, size)
	}
	if size == 0 {
		return nil, nil
	}
	b, err := p.t.cfg.Heap.Bytes(off, int(size))
	if err != nil {
		return nil, fmt.Errorf("%s from PE %d to PE %d heap [%#x, %#x): %v", op, p.pe, p.t.cfg.PE, off, off+size, err)
	}
	return b, nil
}

// RemoteError is an error the target PE reported for one of our operations.
type RemoteError struct {
	PE  int
	Msg string
}

func (e *RemoteError) Error() string { return "PE " + strconv.Itoa(e.PE) + " reports: " + e.Msg }

// stallClock records when a blocking write began (0: none in progress), for the watchdog: one
// timer for the transport instead of a deadline set on every write.
type stallClock struct{ since atomic.Int64 }

func (c *stallClock) start() { c.since.Store(time.Now().UnixNano()) }
func (c *stallClock) stop()  { c.since.Store(0) }

func (c *stallClock) stalled(now time.Time, limit time.Duration) bool {
	s := c.since.Load()
	return s != 0 && now.UnixNano()-s > int64(limit)
}

// watchdog fails a connection whose write has made no progress for Config.Timeout: the peer
// stopped reading, or its host is gone.
func (t *Transport) watchdog() {
	defer t.wg.Done()
	tick := min(max(t.cfg.Timeout/4, 5*time.Millisecond), time.Second)
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for {
		select {
		case <-t.done:
			return
		case now := <-tk.C:
			for i := range t.peers {
				if p := t.peers[i].Load(); p != nil && p.clock.stalled(now, t.cfg.Timeout) {
					p.fail(fmt.Errorf("%w: %w: PE %d accepted no data for %v", ErrPeerLost, ErrTimeout, p.pe, t.cfg.Timeout))
				}
			}
		}
	}
}
