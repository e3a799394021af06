// Package tcp is a nic.Transport over kernel TCP, in pure Go.
//
// Each pair of PEs shares one connection that carries both PEs'
// requests and the answers to them (so a put one way carries the TCP acknowledgement of a put the
// other way). Each PE applies the other's requests to its symmetric heap in arrival order (so
// per-PE order holds with no extra work for Fence) and answers those that need an answer (Get,
// AMO, Flush) from a separate goroutine, so that a PE never stops reading while it writes.
// Requests are pipelined: Put and PutSignal return once the data is handed to the kernel, and
// Quiet sends a Flush to each PE written since the last one and waits for its answer. Connections are authenticated by the
// job token (HMAC challenge-response in both directions); a connection that fails it is refused
// and logged. A lost or timed-out connection fails every pending and later operation to its PE
// with an error that names the PE; no call waits longer than Config.Timeout.
//
// With several NICs (Config.Rails) two PEs share one connection per rail, and puts are striped
// and sprayed over them with failover; rails.go describes that path and its ordering.
//
// Connections are made either all at once (Connect: each PE dials the higher ones) or, with
// Config.Resolve, on the first operation to each peer, by either PE; Config.MaxPeers then caps
// the idle ones. lazy.go describes that path and how it keeps order across a closed and a
// reopened connection.
package tcp

import (
	"bufio"
	"context"
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/internal/errs"
	"github.com/roxamen/roxamen/internal/ratelog"
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
	// Logf logs refused connections and lost peers; default env.Warnf (log.Printf unless ROX_DEBUG=off).
	Logf func(format string, args ...any)
	// Notify, when set, is called after requests from other PEs changed this PE's heap (puts,
	// signals, AMOs), once per burst, before the transport waits for more: a PE waiting for a
	// heap word can sleep until then rather than spin. It must not block.
	Notify func()
	// Rails, when set, replaces Listen, Advertise, Listener and Dial: one entry per NIC this PE
	// reaches its peers through. A peer that publishes as many rails is reached over one
	// connection per rail (rail i to its rail i); with two or more, puts are striped and sprayed
	// across them and a lost rail's work moves to the others (see rails.go).
	Rails []Rail
	// Spray picks the rail of each chunk when there are several: SprayCAS (default), SprayRR or
	// SpraySingle.
	Spray string
	// StripeThreshold: puts of at least this many bytes are cut into chunks over several rails;
	// default 64 KiB.
	StripeThreshold int
	// Resolve, when set, makes connections lazy (lazy.go): the first operation to a PE looks up
	// its address (what that PE's Addr returns) and connects; Connect is then not called.
	Resolve func(ctx context.Context, pe int) (string, error)
	// MaxPeers, when positive (and with one rail), caps the peers this PE keeps connections to:
	// past it the least recently used idle connection is retired, without losing order or data,
	// and a later operation connects again.
	MaxPeers int
}

// Rail is one NIC: where this PE listens on it, and how it dials from it.
type Rail struct {
	// Listen is the local address on the NIC ("ip:port"; port 0 picks one).
	Listen string
	// Advertise is the host other PEs reach this rail at, when Listen is unspecified.
	Advertise string
	// Listener and Dial, when set, replace net.Listen and a net.Dialer bound to Listen's IP.
	Listener net.Listener
	Dial     func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Errors matched with errors.Is.
var (
	ErrPeerLost = errors.New("connection lost")
	ErrAuth     = errors.New("authentication failed")
	ErrClosed   = errors.New("transport closed")
	ErrTimeout  = errs.ErrTimeout // the one timeout of every layer
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
	cfg     Config
	refused ratelog.Limiter // refused connections: a flood is a few lines and a count
	lns     []net.Listener  // lns[rail]
	addrs   []string        // addrs[rail]: where other PEs dial it
	addr    string          // addrs, comma-separated: what Addr publishes

	peers  []atomic.Pointer[peer] // peers[pe]: the connection to pe on rail 0, once made; nil for itself
	links  []link                 // links[pe]: connecting to pe (lazy.go)
	rems   []*remote              // rems[pe]: every rail to pe; nil for itself
	dedup  []dedup                // dedup[pe]: what pe's numbered operations did here
	mu     sync.Mutex
	conns  map[net.Conn]struct{} // every open connection, for Close
	joined chan struct{}         // signalled when a peer is added

	dialed, accepted, evicted atomic.Int64

	// railRate[r]: the latest delivery rate measured on rail r to any peer (float64 bits,
	// bytes/s), what the spray expects of rail r to a peer it has not measured it to yet.
	railRate []atomic.Uint64

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
		cfg.Logf = env.Warnf
	}
	if len(cfg.Rails) == 0 {
		cfg.Rails = []Rail{{Listen: cfg.Listen, Advertise: cfg.Advertise, Listener: cfg.Listener, Dial: cfg.Dial}}
	}
	if len(cfg.Rails) > maxRails {
		return nil, fmt.Errorf("tcp: New: PE %d: %d rails (at most %d)", cfg.PE, len(cfg.Rails), maxRails)
	}
	switch cfg.Spray {
	case "":
		cfg.Spray = SprayCAS
	case SprayCAS, SprayRR, SpraySingle:
	default:
		return nil, fmt.Errorf("tcp: New: PE %d: spray policy %q (want %s|%s|%s)", cfg.PE, cfg.Spray, SprayCAS, SprayRR, SpraySingle)
	}
	if cfg.StripeThreshold <= 0 {
		cfg.StripeThreshold = defaultStripeThreshold
	}
	t := newTransport(cfg)
	for i, rl := range cfg.Rails {
		addr, ln, err := listenRail(rl)
		if err != nil {
			for _, l := range t.lns {
				l.Close()
			}
			if len(cfg.Rails) > 1 {
				return nil, fmt.Errorf("tcp: New: PE %d: rail %d: %w", cfg.PE, i, err)
			}
			return nil, fmt.Errorf("tcp: New: PE %d: %w", cfg.PE, err)
		}
		t.lns, t.addrs = append(t.lns, ln), append(t.addrs, addr)
	}
	t.addr = strings.Join(t.addrs, ",")
	t.wg.Add(1 + len(t.lns))
	for i := range t.lns {
		go t.acceptLoop(i)
	}
	go t.watchdog()
	return t, nil
}

// newTransport makes a transport's per-PE state, before it listens: New and the frame fuzzer
// share it, so the decoder under test sees the state a running transport has.
func newTransport(cfg Config) *Transport {
	t := &Transport{
		cfg:    cfg,
		peers:  make([]atomic.Pointer[peer], cfg.NPEs),
		rems:   make([]*remote, cfg.NPEs),
		links:  make([]link, cfg.NPEs),
		conns:  map[net.Conn]struct{}{},
		joined: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	t.refused.Logf = t.logf
	if len(cfg.Rails) > 1 {
		t.dedup = make([]dedup, cfg.NPEs)
	}
	t.railRate = make([]atomic.Uint64, len(cfg.Rails))
	for pe := range t.rems {
		if pe != cfg.PE {
			t.rems[pe] = newRemote(t, pe)
		}
		l := &t.links[pe]
		l.dialing, l.accepting = make([]bool, len(cfg.Rails)), make([]bool, len(cfg.Rails))
		l.changed = make(chan struct{})
	}
	return t
}

// listenRail listens on one rail and returns the address other PEs dial it at.
func listenRail(rl Rail) (string, net.Listener, error) {
	ln := rl.Listener
	if ln == nil {
		l := rl.Listen
		if l == "" {
			l = ":0"
		}
		var err error
		if ln, err = net.Listen("tcp", l); err != nil {
			return "", nil, err
		}
	}
	host, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		ln.Close()
		return "", nil, fmt.Errorf("listen address %q: %w", ln.Addr(), err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		if rl.Advertise == "" {
			ln.Close()
			return "", nil, fmt.Errorf("listening on %s: an unspecified address needs Config.Advertise", ln.Addr())
		}
		host = rl.Advertise
	}
	return net.JoinHostPort(host, port), ln, nil
}

// Addr returns the address other PEs dial to reach this one: one host:port per rail,
// comma-separated.
func (t *Transport) Addr() string { return t.addr }

// Rails returns how many rails this transport listens on.
func (t *Transport) Rails() int { return len(t.addrs) }

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
	errs := make([]error, t.cfg.NPEs*len(t.addrs))
	var wg sync.WaitGroup
	for pe := t.cfg.PE + 1; pe < t.cfg.NPEs; pe++ {
		theirs := strings.Split(addrs[pe], ",")
		n := min(len(theirs), len(t.addrs))
		t.rems[pe].addrs = theirs
		if err := t.rems[pe].setRails(n); err != nil {
			return fmt.Errorf("tcp: Connect: PE %d: PE %d at %s: %w", t.cfg.PE, pe, addrs[pe], err)
		}
		for r := 0; r < n; r++ {
			if t.rems[pe].rails[r].Load() != nil {
				continue
			}
			wg.Add(1)
			go func(pe, r int) {
				defer wg.Done()
				errs[pe*len(t.addrs)+r] = t.dial(ctx, pe, r, theirs[r])
			}(pe, r)
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for {
		var missing []int
		for pe := 0; pe < t.cfg.PE; pe++ {
			if !t.rems[pe].complete() {
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

func (t *Transport) dial(ctx context.Context, pe, rail int, addr string) error {
	return t.dialAs(ctx, "Connect", pe, rail, addr, false)
}

// firstDial, set in the hello's rail field, marks a lazy first connection (lazy.go): an
// acceptor that already holds a live connection on the rail refuses it as crossed, where a
// dial without it (Connect, rails' redial) replaces a connection the dialer has retired.
const firstDial = 1 << 15

// dialAs dials pe on rail for op (the call whose first use connects, or Connect).
func (t *Transport) dialAs(ctx context.Context, op string, pe, rail int, addr string, first bool) error {
	t.rems[pe].n.CompareAndSwap(0, 1) // dialed outside Connect: one rail
	dial := t.cfg.Rails[rail].Dial
	if dial == nil {
		var d net.Dialer
		if len(t.addrs) > 1 {
			// Leave from this rail's own address, so that the connection uses its NIC.
			if h, _, err := net.SplitHostPort(t.addrs[rail]); err == nil {
				if ip := net.ParseIP(h); ip != nil {
					d.LocalAddr = &net.TCPAddr{IP: ip}
				}
			}
		}
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
			return fmt.Errorf("tcp: %s: PE %d: PE %d unreachable at %s within %v: %w", op, t.cfg.PE, pe, addr, t.cfg.Timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !t.track(conn) {
		conn.Close()
		return fmt.Errorf("tcp: %s: PE %d: %w", op, t.cfg.PE, ErrClosed)
	}
	if err := t.dialHandshake(ctx, conn, pe, rail, first); err != nil {
		t.untrack(conn)
		if errors.Is(err, errCrossed) {
			return err
		}
		if errors.Is(err, ErrAuth) {
			t.logf("tcp: PE %d: refused PE %d at %s: %v", t.cfg.PE, pe, addr, err)
		}
		return fmt.Errorf("tcp: %s: PE %d: PE %d at %s: %w", op, t.cfg.PE, pe, addr, err)
	}
	if _, err := t.join(pe, rail, conn, nil); err != nil {
		t.untrack(conn)
		return fmt.Errorf("tcp: %s: PE %d: PE %d at %s: %w", op, t.cfg.PE, pe, addr, err)
	}
	env.Logf(env.LevelTrace, "tcp: PE %d: connected to PE %d at %s (rail %d) on first %s", t.cfg.PE, pe, addr, rail, op)
	return nil
}

// join makes conn the connection to pe and starts serving it. The acceptor passes its last
// handshake byte in ack: it is written before anything this PE sends can be.
func (t *Transport) join(pe, rail int, conn net.Conn, ack []byte) (*peer, error) {
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	rem := t.rems[pe]
	if old := rem.rails[rail].Load(); old != nil && old.closing.Load() {
		// Retiring (lazy.go): the peer is done with it, this end is reading its last bytes.
		if err := t.waitGone("connect", old, time.Now().Add(t.cfg.Timeout)); err != nil {
			return nil, err
		}
	}
	p := &peer{t: t, pe: pe, rail: rail, rem: rem, conn: conn, failed: make(chan struct{}), wake: make(chan struct{}, 1)}
	p.wmu.Lock()
	old := rem.rails[rail].Load()
	if old != nil && !rem.multi() {
		p.wmu.Unlock()
		return nil, fmt.Errorf("PE %d %w", pe, errAlready)
	}
	if old != nil {
		// Several rails: the peer dialed a rail again, so the connection it replaces is gone
		// for it, whether or not this end has noticed.
		old.fail(fmt.Errorf("%w: PE %d: rail %d dialed again", ErrPeerLost, pe, rail))
	}
	if !rem.rails[rail].CompareAndSwap(old, p) {
		p.wmu.Unlock()
		return nil, fmt.Errorf("PE %d is already connected on rail %d", pe, rail)
	}
	if rail == 0 {
		t.peers[pe].Store(p)
	}
	if t.cfg.MaxPeers > 0 {
		t.links[pe].lastUse.Store(time.Now().UnixNano())
	}
	if ack != nil {
		t.accepted.Add(1)
	} else {
		t.dialed.Add(1)
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
	if rem.multi() {
		rem.railUp(p)
	}
	select {
	case t.joined <- struct{}{}:
	default:
	}
	t.notify(pe)
	if t.cfg.MaxPeers > 0 {
		go t.trim(p)
	}
	return p, nil
}

const accepted = 1 // the acceptor's last handshake byte

func (t *Transport) dialHandshake(ctx context.Context, conn net.Conn, pe, rail int, first bool) error {
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
	h := hello{pe: t.cfg.PE, npes: t.cfg.NPEs, rail: rail, rails: int(t.rems[pe].n.Load()), nonce: nd}
	if first {
		h.rail |= firstDial
	}
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
	_, err = io.ReadFull(conn, ok[:])
	if err == nil && ok[0] == crossed {
		return errCrossed
	}
	if err != nil || ok[0] != accepted {
		return fmt.Errorf("%w: refused by PE %d", ErrAuth, pe)
	}
	return nil
}

func (t *Transport) acceptLoop(rail int) {
	defer t.wg.Done()
	for {
		conn, err := t.lns[rail].Accept()
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
		go t.accept(conn, rail)
	}
}

// accept authenticates an inbound connection and joins it.
func (t *Transport) accept(conn net.Conn, rail int) {
	defer t.wg.Done()
	pe, first, err := t.acceptHandshake(conn, rail)
	if err == nil {
		var done func()
		done, err = t.admit(pe, rail, first)
		if errors.Is(err, errCrossed) {
			conn.SetWriteDeadline(time.Now().Add(t.cfg.Timeout))
			conn.Write([]byte{crossed})
			t.untrack(conn)
			return
		}
		if err == nil {
			if len(t.addrs) > 1 && t.cfg.PE < pe && t.cfg.Resolve != nil {
				// This PE redials a retired rail to pe: it needs pe's addresses.
				ctx, cancel := context.WithTimeout(context.Background(), t.cfg.Timeout)
				_, err = t.resolve(ctx, pe)
				cancel()
			}
			if err == nil {
				_, err = t.join(pe, rail, conn, []byte{accepted})
			}
			done()
			if err == nil {
				return
			}
			if errors.Is(err, errAlready) && t.cfg.Resolve != nil {
				// Both ends connected at once: the dialer uses the connection that won.
				conn.SetWriteDeadline(time.Now().Add(t.cfg.Timeout))
				conn.Write([]byte{crossed})
				t.untrack(conn)
				return
			}
		}
	}
	t.refused.Printf("tcp: PE %d: refused connection from %s: %v", t.cfg.PE, conn.RemoteAddr(), err)
	t.untrack(conn)
}

func (t *Transport) acceptHandshake(conn net.Conn, rail int) (int, bool, error) {
	conn.SetDeadline(time.Now().Add(t.cfg.Timeout))
	defer conn.SetDeadline(time.Time{})
	var hb [helloSize]byte
	if _, err := io.ReadFull(conn, hb[:]); err != nil {
		return -1, false, err
	}
	h, err := decodeHello(hb[:])
	if err != nil {
		return -1, false, err
	}
	first := h.rail&firstDial != 0 && t.cfg.Resolve != nil
	h.rail &^= firstDial
	if h.npes != t.cfg.NPEs || h.pe < 0 || h.pe >= t.cfg.NPEs || h.pe == t.cfg.PE || (t.cfg.Resolve == nil && h.pe > t.cfg.PE) {
		// Eager (Connect): only lower PEs dial this one; lazy: any other PE.
		return -1, false, fmt.Errorf("claims PE %d of %d PEs (this is PE %d of %d)", h.pe, h.npes, t.cfg.PE, t.cfg.NPEs)
	}
	if h.rail != rail || h.rails < 1 || h.rails > len(t.addrs) {
		return -1, false, fmt.Errorf("claims PE %d on rail %d of %d: reached rail %d of %d", h.pe, h.rail, h.rails, rail, len(t.addrs))
	}
	na, err := nonce()
	if err != nil {
		return -1, false, err
	}
	ch := make([]byte, 0, challengeSize)
	ch = append(ch, magic[:]...)
	me := uint32(t.cfg.PE)
	ch = append(ch, byte(me), byte(me>>8), byte(me>>16), byte(me>>24))
	ch = append(ch, na[:]...)
	ch = append(ch, mac(t.cfg.Token, "acceptor", h.nonce, na, t.cfg.PE, h.pe)...)
	if _, err := conn.Write(ch); err != nil {
		return -1, false, err
	}
	resp := make([]byte, len(ch)-44)
	if _, err := io.ReadFull(conn, resp); err != nil {
		return -1, false, fmt.Errorf("claims PE %d: no proof of the job token: %w", h.pe, err)
	}
	if !hmac.Equal(resp, mac(t.cfg.Token, "dialer", na, h.nonce, h.pe, t.cfg.PE)) {
		return -1, false, fmt.Errorf("claims PE %d: %w: wrong job token", h.pe, ErrAuth)
	}
	if err := t.rems[h.pe].setRails(h.rails); err != nil {
		return -1, false, fmt.Errorf("PE %d: %w", h.pe, err)
	}
	return h.pe, first, nil
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
		for _, ln := range t.lns {
			ln.Close()
		}
		var byes sync.WaitGroup
		t.eachRail(func(p *peer) {
			byes.Add(1)
			go func() { defer byes.Done(); p.bye() }()
		})
		byes.Wait()
		t.eachRail(func(p *peer) { p.fail(fmt.Errorf("PE %d: %w", t.cfg.PE, ErrClosed)) })
		for _, r := range t.rems {
			if r != nil {
				r.close()
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
	return t.connectPeer(op, pe)
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
	for {
		p, err := t.peer("put", pe)
		if err != nil {
			return err
		}
		if p.rem.multi() {
			return p.rem.put("put", dst, src, nil)
		}
		r := request{typ: reqPut, off: dst, size: uint64(len(src))}
		if err := p.send("put", &r, src, nil, false); !errors.Is(err, errEvicted) {
			return err
		}
	}
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
	for {
		p, err := t.peer("put_signal", pe)
		if err != nil {
			return err
		}
		if p.rem.multi() {
			return p.rem.put("put_signal", dst, src, &chunk{typ: reqPutSignal, sigOp: uint8(sigOp), sigVal: sigValue, sigOff: sig})
		}
		r := request{typ: reqPutSignal, kind: uint8(sigOp), off: dst, size: uint64(len(src)), value: sigValue, aux: sig}
		if err := p.send("put_signal", &r, src, nil, false); !errors.Is(err, errEvicted) {
			return err
		}
	}
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
	r := request{typ: reqGet, off: src, size: uint64(len(dst))}
	if p.rem.multi() {
		_, err := p.rem.call("get", &r, func() *pending { return &pending{typ: reqGet, dst: dst, done: make(chan struct{})} })
		if err != nil {
			return fmt.Errorf("tcp: get: PE %d: from PE %d heap [%#x, %#x): %w", t.cfg.PE, pe, src, src+uint64(len(dst)), err)
		}
		return nil
	}
	pd := &pending{typ: reqGet, dst: dst, done: make(chan struct{})}
	if err := p.send("get", &r, nil, pd, true); errors.Is(err, errEvicted) {
		return t.Get(pe, src, dst) // nothing was sent: the next connection carries it
	} else if err != nil {
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
	r := request{typ: reqAMO, kind: uint8(op), width: uint8(width), off: dst, value: value, aux: compare}
	if p.rem.multi() {
		old, err := p.rem.amo(&r)
		if err != nil {
			return 0, fmt.Errorf("tcp: amo %v: PE %d: on PE %d heap offset %#x: %w", op, t.cfg.PE, pe, dst, err)
		}
		return old, nil
	}
	pd := &pending{typ: reqAMO, done: make(chan struct{})}
	if err := p.send("amo", &r, nil, pd, true); errors.Is(err, errEvicted) {
		return t.AMO(pe, op, width, dst, value, compare) // nothing was sent: the next connection carries it
	} else if err != nil {
		return 0, err
	}
	if err := p.wait(context.Background(), "amo", pd); err != nil {
		return 0, fmt.Errorf("tcp: amo %v: PE %d: on PE %d heap offset %#x: %w", op, t.cfg.PE, pe, dst, err)
	}
	return pd.value, nil
}

// Fence orders delivery to pe: one connection per ordered pair of PEs, applied in arrival order,
// already does; over several rails it waits until every put before it has landed. It reports a
// peer that is lost.
func (t *Transport) Fence(pe int) error {
	if pe < 0 || pe >= t.cfg.NPEs {
		return fmt.Errorf("tcp: fence: PE %d: PE %d of %d PEs: PE out of range", t.cfg.PE, pe, t.cfg.NPEs)
	}
	if pe == t.cfg.PE {
		return nil
	}
	if t.cfg.Resolve != nil && t.peers[pe].Load() == nil {
		return nil // never used (or retired after its puts were flushed): nothing to order
	}
	p, err := t.peer("fence", pe)
	if err != nil {
		return err
	}
	if p.rem.multi() {
		return p.rem.fence(context.Background(), "fence")
	}
	return p.failure("fence")
}

// Quiet waits until every put issued so far to pe (every PE when pe < 0) is delivered, and
// returns the first error any of them met.
func (t *Transport) Quiet(ctx context.Context, pe int) error {
	fl, err := t.startQuiet(pe)
	if err != nil {
		return err
	}
	return t.finishQuiet(ctx, fl, pe)
}

// QuietAsync starts a Quiet and returns at once; the channel receives its result.
func (t *Transport) QuietAsync(pe int) <-chan error {
	ch := make(chan error, 1)
	fl, err := t.startQuiet(pe)
	if err != nil || len(fl) == 0 {
		if err == nil {
			err = errors.Join(t.takeLost(pe)...)
		}
		ch <- err
		return ch
	}
	go func() { ch <- t.finishQuiet(context.Background(), fl, pe) }()
	return ch
}

type flush struct {
	p    *peer
	pd   *pending
	rem  *remote // several rails: wait for its chunks instead
	gone bool    // a connection being retired: wait until it is
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
		if p.rem.multi() {
			fl = append(fl, flush{rem: p.rem})
			continue
		}
		if !p.dirty.Load() {
			continue
		}
		pd := &pending{typ: reqFlush, done: make(chan struct{})}
		if err := p.send("quiet", &request{typ: reqFlush}, nil, pd, true); errors.Is(err, errEvicted) {
			// Retiring: its farewell reports these puts (takeLost, once it is gone).
			fl = append(fl, flush{p: p, gone: true})
			continue
		} else if err != nil {
			errs = append(errs, err)
			continue
		}
		fl = append(fl, flush{p: p, pd: pd})
	}
	if len(errs) > 0 {
		// Still wait for the others, so that what the error leaves behind is settled.
		errs = append(errs, t.finishQuiet(context.Background(), fl, pe))
		return nil, errors.Join(errs...)
	}
	return fl, nil
}

func (t *Transport) finishQuiet(ctx context.Context, fl []flush, pe int) error {
	var errs []error
	for _, f := range fl {
		if f.gone {
			if err := t.waitGone("quiet", f.p, time.Now().Add(t.cfg.Timeout)); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if f.rem != nil {
			if err := f.rem.quiet(ctx); err != nil {
				errs = append(errs, fmt.Errorf("tcp: quiet: PE %d: puts to PE %d: %w", t.cfg.PE, f.rem.pe, err))
			}
			continue
		}
		if err := f.p.wait(ctx, "quiet", f.pd); err != nil {
			errs = append(errs, fmt.Errorf("tcp: quiet: PE %d: puts to PE %d: %w", t.cfg.PE, f.p.pe, err))
		}
	}
	return errors.Join(append(errs, t.takeLost(pe)...)...)
}

// BeginBatch lets small puts wait in the send buffers until EndBatch.
func (t *Transport) BeginBatch() { t.corked.Add(1) }

// EndBatch sends what the batch buffered.
func (t *Transport) EndBatch() error {
	if t.corked.Add(-1) > 0 {
		return nil
	}
	var errs []error
	t.eachRail(func(p *peer) {
		if err := p.flushBuffered(); err != nil {
			errs = append(errs, err)
		}
	})
	return errors.Join(errs...)
}

// pending is an operation waiting for its answer.
type pending struct {
	typ   uint8
	c     *chunk // a chunk waiting for its answer (several rails): no one waits on done
	probe int64  // a delay probe's flush (several rails): unix ns when it was sent
	dst   []byte // a get's destination
	value uint64
	err   error
	done  chan struct{}
}

// answer is a response to one of the peer's requests, waiting to be written.
type answer struct {
	hdr  []byte
	data []byte // a get's data: heap memory, written as it is when the answer goes out
	// A farewell (retiring the connection): shut the write side after it, or close done once it
	// is written.
	halfClose bool
	done      chan struct{}
}

// peer is the connection to another PE: this PE's requests and answers out, the other's in.
type peer struct {
	t    *Transport
	pe   int
	rail int
	rem  *remote
	conn net.Conn

	wmu   sync.Mutex // serializes writes; guards wbuf
	wbuf  []byte
	dirty atomic.Bool // puts sent since the last flush
	clock stallClock  // when the write in progress began

	pmu      sync.Mutex // guards pend, since and err
	pend     []*pending // FIFO: answers come back in request order
	since    int64      // unix ns: when pend last became non-empty
	lastAns  atomic.Int64
	err      error
	failed   chan struct{}
	failOnce sync.Once

	amu     sync.Mutex // guards answers
	answers []answer
	wake    chan struct{}

	// Retiring an idle connection (lazy.go): closing stops new requests (they go to the next
	// connection), evictor says this end started it.
	closing, evictor atomic.Bool
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
		if p.closing.Load() {
			p.t.retired(p)
		}
		close(p.failed)
		p.conn.Close()
		if p.closing.Load() {
			p.t.notify(p.pe)
		}
		if p.rem.multi() {
			// Chunks first: they are queued on the other rails before the waiters below retry
			// their requests there.
			var lost []*chunk
			for _, pd := range pend {
				if pd.c != nil {
					lost = append(lost, pd.c)
				}
			}
			p.rem.railDown(p, err, lost)
		}
		for _, pd := range pend {
			if pd.c == nil {
				pd.err = err
				close(pd.done)
			}
		}
		if p.rem.multi() {
			return
		}
		if !errors.Is(err, ErrClosed) && !errors.Is(err, errBye) && !errors.Is(err, errEvicted) {
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
		if len(p.pend) == 0 {
			p.since = time.Now().UnixNano()
		}
		if p.closing.Load() {
			p.pmu.Unlock()
			return errEvicted
		}
		p.pend = append(p.pend, pd)
		p.pmu.Unlock()
	} else if err := p.failure(op); err != nil {
		return err
	} else if p.closing.Load() {
		return errEvicted
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

// sendChunks writes chunks, each to be answered; sent reports whether they were handed to p
// (after which p's answers or p's failure account for them).
func (p *peer) sendChunks(cs []*chunk) (sent bool, err error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	now := time.Now()
	p.pmu.Lock()
	if p.err != nil {
		err := p.err
		p.pmu.Unlock()
		return false, err
	}
	if len(p.pend) == 0 {
		p.since = now.UnixNano()
	}
	for _, c := range cs {
		p.pend = append(p.pend, &pending{typ: c.typ, c: c})
	}
	p.pmu.Unlock()
	for _, c := range cs {
		c.sentAt.Store(now.UnixNano())
		r := request{typ: c.typ, flags: flagAck, seq: c.seq, off: c.off, size: uint64(len(c.data))}
		if c.typ == reqPutSignal {
			r.kind, r.value, r.aux = c.sigOp, c.sigVal, c.sigOff
		}
		p.wbuf = r.encode(p.wbuf)
		if len(c.data) >= directThreshold {
			if err := p.write(net.Buffers{p.wbuf, c.data}); err != nil {
				return true, err
			}
			p.wbuf = p.wbuf[:0]
		} else {
			p.wbuf = append(p.wbuf, c.data...)
		}
	}
	if len(p.wbuf) > 0 {
		err = p.write(net.Buffers{p.wbuf})
		p.wbuf = p.wbuf[:0]
	}
	return true, err
}

// stuck reports whether p has waited for an answer for longer than limit.
func (p *peer) stuck(now time.Time, limit time.Duration) bool {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	if len(p.pend) == 0 || p.err != nil {
		return false
	}
	last := max(p.since, p.lastAns.Load())
	return now.UnixNano()-last > int64(limit)
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
		var fin *answer
		for i, a := range q {
			out = append(out, a.hdr...)
			if a.halfClose || a.done != nil {
				fin = &q[i] // nothing is queued after a farewell
				break
			}
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
		if fin != nil && fin.halfClose {
			if cw, ok := p.conn.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
		}
		p.wmu.Unlock()
		if fin != nil && fin.done != nil {
			close(fin.done)
		}
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
	if errors.Is(err, errEvicted) {
		p.fail(err)
		p.t.untrack(p.conn)
		return
	}
	p.fail(fmt.Errorf("%w: PE %d: %w", ErrPeerLost, p.pe, err))
	p.t.untrack(p.conn)
}

func (p *peer) read() error {
	t := p.t
	br := bufio.NewReaderSize(p.conn, readBufSize)
	var firstErr string // the first failed put since the last flush
	farewell := false   // the peer's farewell has come: its EOF retires the connection
	var h [reqHeaderSize]byte
	var r request
	changed := false
	for {
		if changed && br.Buffered() == 0 && t.cfg.Notify != nil {
			t.cfg.Notify()
			changed = false
		}
		if _, err := io.ReadFull(br, h[:1]); err != nil {
			if err == io.EOF && farewell {
				if p.evictor.Load() {
					// The evicted side sent everything: answer what it sent, then say goodbye.
					done := make(chan struct{})
					p.queue(answer{hdr: encodeResp(nil, reqBye|respFlag, 0, firstErr), done: done})
					select {
					case <-done:
					case <-p.failed:
					}
				}
				return errEvicted
			}
			return err
		}
		if h[0]&respFlag != 0 {
			if _, err := io.ReadFull(br, h[1:respHeaderSize]); err != nil {
				return err
			}
			if h[0] == reqBye|respFlag {
				msg, err := readErrText(br, h[:respHeaderSize])
				if err != nil {
					return err
				}
				t.farewell(p.pe, msg)
				farewell = true
				continue
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
			ack := r.flags&flagAck != 0
			var dd *dedup
			if r.seq != 0 && t.dedup != nil {
				dd = &t.dedup[p.pe]
			}
			b, err := p.heap(op, r.off, r.size)
			if err != nil {
				// Stay in step with the stream; write nothing.
				if err := discard(br, r.size); err != nil {
					return err
				}
				if ack {
					p.queue(answer{hdr: encodeResp(nil, r.typ|respFlag, 0, err.Error())})
				} else if firstErr == "" {
					firstErr = err.Error()
				}
				continue
			}
			if dd != nil {
				if dup, _, msg := dd.begin(r.seq, p); dup {
					// Sent again after its answer was lost: applied already (and perhaps since
					// overwritten by a later put that the answer let through), signal included.
					if err := discard(br, r.size); err != nil {
						return err
					}
					p.queue(answer{hdr: encodeResp(nil, r.typ|respFlag, 0, msg)})
					continue
				}
			}
			if err := p.readPayload(br, b); err != nil {
				if dd != nil {
					dd.end(r.seq, p, false, 0, "") // not applied: a resend may apply it
				}
				return err
			}
			changed = true
			msg := ""
			if r.typ == reqPutSignal {
				sb, err := p.heap("put_signal (signal)", r.aux, 8)
				if err == nil {
					err = nic.ApplySignal(sb, nic.SignalOp(r.kind), r.value)
				}
				if err != nil {
					msg = fmt.Sprintf("put_signal from PE %d: signal at %#x: %v", p.pe, r.aux, err)
				}
			}
			if dd != nil {
				dd.end(r.seq, p, true, 0, msg)
			}
			if ack {
				p.queue(answer{hdr: encodeResp(nil, r.typ|respFlag, 0, msg)})
			} else if msg != "" && firstErr == "" {
				firstErr = msg
			}
		case reqGet:
			b, err := p.heap("get", r.off, r.size)
			if err != nil {
				p.queue(answer{hdr: encodeResp(nil, reqGet|respFlag, 0, err.Error())})
				continue
			}
			p.queue(answer{hdr: encodeResp(nil, reqGet|respFlag, uint64(len(b)), ""), data: b})
		case reqAMO:
			apply := func() (uint64, string) {
				var old uint64
				b, err := p.heap("amo", r.off, uint64(r.width))
				if err == nil {
					old, err = nic.ApplyAMO(b, nic.AMOOp(r.kind), int(r.width), r.value, r.aux)
					changed = true
				}
				if err != nil {
					return 0, fmt.Sprintf("amo from PE %d at heap offset %#x: %v", p.pe, r.off, err)
				}
				return old, ""
			}
			var old uint64
			var msg string
			if r.seq != 0 && t.dedup != nil {
				// A resent AMO gets the first one's answer.
				dd := &t.dedup[p.pe]
				dup := false
				if dup, old, msg = dd.begin(r.seq, p); !dup {
					old, msg = apply()
					dd.end(r.seq, p, true, old, msg)
				}
			} else {
				old, msg = apply()
			}
			p.queue(answer{hdr: encodeResp(nil, reqAMO|respFlag, old, msg)})
		case reqFlush:
			p.queue(answer{hdr: encodeResp(nil, reqFlush|respFlag, 0, firstErr)})
			firstErr = ""
		case reqBye:
			if r.kind == byeEvict {
				if p.evictor.Load() && t.cfg.PE < p.pe {
					continue // both evict: this, the lower PE's, eviction stands
				}
				// Evicted: nothing more will come from the peer but answers; this PE's
				// requests stop here too, after everything it sent before.
				p.evictor.Store(false)
				p.closing.Store(true)
				p.queue(answer{hdr: encodeResp(nil, reqBye|respFlag, 0, firstErr), halfClose: true})
				firstErr = ""
				continue
			}
			if firstErr != "" {
				return fmt.Errorf("%w, after an unreported error: %s", errBye, firstErr)
			}
			return errBye
		default:
			return fmt.Errorf("protocol error: request type %d", r.typ)
		}
	}
}

// readErrText reads the error text an answer header h announces.
func readErrText(br *bufio.Reader, h []byte) (string, error) {
	errLen := int(binary.LittleEndian.Uint32(h[4:]))
	if errLen > maxErrText {
		return "", fmt.Errorf("protocol error: error text of %d bytes", errLen)
	}
	msg := make([]byte, errLen)
	if _, err := io.ReadFull(br, msg); err != nil {
		return "", err
	}
	return string(msg), nil
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
	now := time.Now().UnixNano()
	p.lastAns.Store(now)
	if p.rem.multi() {
		p.rem.lastAns.Store(now)
	}
	if pd.c != nil {
		p.rem.acked(p, pd.c, remoteErr)
		return nil
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
	if pd.probe != 0 {
		p.rem.probeAnswered(p, pd.probe, remoteErr)
	}
	pd.value, pd.err = value, remoteErr
	close(pd.done)
	return nil
}

// readPayload fills b from the stream: what the buffer holds, then, for a large payload, the
// rest straight from the connection into b (the heap, or a get's destination) without a copy.
func (p *peer) readPayload(br *bufio.Reader, b []byte) error {
	// An aligned 4- or 8-byte put lands with one store (single-copy atomic, as the memory model
	// says of aligned words): read off the stream, copied into the heap whole.
	if n := len(b); (n == 8 || n == 4) && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(n) == 0 {
		var w [8]byte
		if _, err := io.ReadFull(br, w[:n]); err != nil {
			return err
		}
		return nic.StoreWord(b, n, binary.NativeEndian.Uint64(w[:]))
	}
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
	if len(t.cfg.Rails) > 1 {
		tick = min(tick, t.railLimit()/4)
	}
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for {
		select {
		case <-t.done:
			return
		case now := <-tk.C:
			for i := range t.peers {
				if p := t.peers[i].Load(); p != nil && !p.rem.multi() && p.clock.stalled(now, t.cfg.Timeout) {
					p.fail(fmt.Errorf("%w: %w: PE %d accepted no data for %v", ErrPeerLost, ErrTimeout, p.pe, t.cfg.Timeout))
				}
			}
			for _, r := range t.rems {
				if r != nil {
					r.check(now)
				}
			}
		}
	}
}
