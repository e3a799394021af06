package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/roxamen/roxamen/internal/pmix"
)

// Client is one PE's connection to the job's rendezvous server. Its methods are safe for
// concurrent use, but collective calls (Allgather, Barrier) are matched across PEs by how many
// each PE has made, so every PE must make them in the same order.
type Client struct {
	rank    Rank
	addr    string
	conn    net.Conn
	server  *Server      // owned when rank.Host
	pmix    *pmix.Client // owned: finalized by Close, when the job was found through PMIx
	timeout time.Duration
	hostPE  int

	wmu sync.Mutex // one frame at a time on conn

	stats counters
	net   Network // star mode
	tree  *node   // tree mode (tree.go); nil in star mode

	mu         sync.Mutex
	nextID     uint64
	pending    map[uint64]pendingCall
	gatherSeq  uint64
	barrierSeq uint64
	closing    bool
	err        error // set once, with failed closed

	failed     chan struct{}
	exits      chan int
	readerDone chan struct{}
}

// pendingCall is a request waiting for its reply; typ says which phase the reply counts in.
type pendingCall struct {
	ch  chan reply
	typ byte
}

type reply struct {
	ok   bool
	data []byte
}

// Dial joins the job described by r: when r.Host it first starts the job's server at r.Addr
// (owned by the client and closed by Close), then connects, retrying until timeout, and
// authenticates with r.Token as PE r.PE. timeout is also every later call's limit (ROX_TIMEOUT).
//
// When r.Source is "pmix", the job's PMIx server first says what the environment does not (job
// size, local rank and size, node), and PE 0 publishes the rendezvous address and a random token
// through it (see dialPMIx); Rank then returns the completed rank.
func Dial(ctx context.Context, r Rank, timeout time.Duration) (*Client, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("bootstrap: Dial on PE %d: timeout %v is not positive", r.PE, timeout)
	}
	if r.Source == "pmix" {
		return dialPMIx(ctx, r, timeout)
	}
	return dial(ctx, r, timeout, nil, defaultConfig(r))
}

// DialConfig is Dial carried as cfg says: over another Network (the scale simulation), or in
// tree mode with the given addresses and fanout. Dial uses tree mode on its own for a one-node
// job of more than StarMax PEs (defaultConfig).
func DialConfig(ctx context.Context, r Rank, timeout time.Duration, cfg Config) (*Client, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("bootstrap: Dial on PE %d: timeout %v is not positive", r.PE, timeout)
	}
	if r.Source == "pmix" {
		return nil, fmt.Errorf("bootstrap: DialConfig on PE %d: the PMIx path takes no Config (use Dial)", r.PE)
	}
	return dial(ctx, r, timeout, nil, cfg)
}

// dial is Dial once r is complete; s, when not nil, is the server this PE already started (it
// is owned by the client from here on, closed on failure).
func dial(ctx context.Context, r Rank, timeout time.Duration, s *Server, cfg Config) (*Client, error) {
	if cfg.Net == nil {
		cfg.Net = SysNet
	}
	if cfg.Fanout == 0 {
		cfg.Fanout = DefaultFanout
	}
	call := fmt.Sprintf("bootstrap: Dial on PE %d", r.PE)
	fail := func(err error) (*Client, error) {
		if s != nil {
			s.Close()
		}
		return nil, err
	}
	if r.NPEs < 1 || r.PE < 0 || r.PE >= r.NPEs {
		return fail(fmt.Errorf("%s: PE %d is outside [0,%d)", call, r.PE, r.NPEs))
	}
	if r.Addr == "" {
		return fail(fmt.Errorf("%s: the launcher (%s) gives no rendezvous address: set ROX_BOOTSTRAP=TOKEN@HOST:PORT", call, r.Source))
	}
	if r.Token == "" {
		return fail(fmt.Errorf("%s: empty job token", call))
	}
	c := &Client{
		rank: r, addr: r.Addr, timeout: timeout, hostPE: -1,
		pending:    map[uint64]pendingCall{},
		failed:     make(chan struct{}),
		exits:      make(chan int, 1),
		readerDone: make(chan struct{}),
	}
	if s != nil {
		c.server = s
	} else if r.Host {
		s, err := NewServerConfig(listenAddr(r.Addr), r.NPEs, r.Token, cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: starting the rendezvous server: %w", call, err)
		}
		s.mu.Lock()
		s.hostPE = r.PE
		s.mu.Unlock()
		c.server = s
		if _, port, _ := net.SplitHostPort(r.Addr); port == "0" {
			c.addr = s.Addr()
		}
	}
	if cfg.PEAddr != nil || cfg.Lookup != nil {
		if cfg.Fanout < 2 {
			return fail(fmt.Errorf("%s: tree fanout %d is below 2", call, cfg.Fanout))
		}
		if err := c.joinTree(ctx, call, cfg); err != nil {
			if c.server != nil {
				c.server.Close()
			}
			return nil, err
		}
		return c, nil
	}
	c.net = cfg.Net
	if err := c.connect(ctx, call); err != nil {
		if c.server != nil {
			c.server.Close()
		}
		return nil, err
	}
	go c.read()
	return c, nil
}

// listenAddr is where a hosting PE listens: every interface for a named host (its name may resolve
// to a different local address than the one peers reach it by), the address itself for loopback.
func listenAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return addr
	}
	return net.JoinHostPort("", port)
}

func (c *Client) connect(ctx context.Context, call string) error {
	deadline := time.Now().Add(c.timeout)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	backoff := 5 * time.Millisecond
	var lastErr error
	for {
		conn, err := c.net.Dial(dctx, c.addr)
		if err == nil {
			err = c.hello(conn, deadline)
			if err == nil {
				return nil
			}
			conn.Close()
			if errors.Is(err, ErrRefused) {
				return fmt.Errorf("%s: %w", call, err)
			}
		}
		lastErr = err
		if ctx.Err() != nil {
			return fmt.Errorf("%s: connecting to %s: %w (last error: %v)", call, c.addr, ctx.Err(), lastErr)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %w", call, &TimeoutError{After: c.timeout,
				Waiting: fmt.Sprintf("the rendezvous server at %s (last error: %v)", c.addr, lastErr)})
		}
		select {
		case <-dctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// hello authenticates and reads the server's answer.
func (c *Client) hello(conn net.Conn, deadline time.Time) error {
	conn.SetDeadline(deadline)
	defer conn.SetDeadline(time.Time{})
	hello := newFrame(msgHello, 0).str(c.rank.Token).i32(c.rank.PE).i32(c.rank.NPEs).u32(protocolVersion).finish()
	if _, err := conn.Write(hello); err != nil {
		return err
	}
	c.stats.sent(PhaseConnect, len(hello))
	f, err := readFrame(conn, maxHelloFrame)
	if err != nil {
		return fmt.Errorf("handshake with %s: %w", c.addr, err)
	}
	c.stats.recv(PhaseConnect, f.size())
	d := &dec{b: f.body}
	switch f.typ {
	case msgRefuse:
		return fmt.Errorf("%w at %s: %s", ErrRefused, c.addr, d.str())
	case msgWelcome:
		c.hostPE = d.i32()
		c.conn = conn
		c.stats.conns.Add(1)
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		return d.err
	}
	return fmt.Errorf("handshake with %s: unexpected message type %d", c.addr, f.typ)
}

// read is the connection's one reader: it routes replies to their callers and failures to fail.
func (c *Client) read() {
	defer close(c.readerDone)
	for {
		f, err := readFrame(c.conn, maxFrame)
		if err != nil {
			c.mu.Lock()
			closing := c.closing
			c.mu.Unlock()
			if !closing {
				c.fail(c.lostServer(err))
			}
			return
		}
		switch f.typ {
		case msgReply:
			c.mu.Lock()
			pc, ok := c.pending[f.id]
			delete(c.pending, f.id)
			c.mu.Unlock()
			c.stats.recv(phaseOf(pc.typ), f.size())
			if ok {
				pc.ch <- decodeReply(f.body)
			}
		case msgPeerFailed:
			c.stats.recv(PhaseControl, f.size())
			e := decodePeerFailed(f.body)
			if e.Aborted {
				select {
				case c.exits <- e.Status:
				default:
				}
			}
			c.fail(e)
		}
	}
}

// decodeReply decodes a msgReply body; a malformed one is a failed reply.
func decodeReply(body []byte) reply {
	d := &dec{b: body}
	ok := d.u8() == 1
	r := reply{ok: ok, data: d.bytes()}
	if d.err != nil {
		r = reply{data: []byte("malformed reply from the server")}
	}
	return r
}

// decodePeerFailed decodes a msgPeerFailed body; what a malformed one lacks stays zero, and the
// job has failed all the same.
func decodePeerFailed(body []byte) *PeerError {
	d := &dec{b: body}
	e := &PeerError{PE: d.i32()}
	e.setFlags(d.u8())
	e.Status, e.Reason = d.i32(), d.str()
	if d.err != nil {
		e.Reason += " (malformed failure report from the server)"
	}
	return e
}

func (c *Client) lostServer(err error) error {
	if c.hostPE >= 0 && c.hostPE != c.rank.PE {
		return &PeerError{PE: c.hostPE, Reason: fmt.Sprintf("lost the connection to the rendezvous server it hosted at %s: %v", c.addr, err)}
	}
	return &PeerError{PE: -1, Reason: fmt.Sprintf("lost the connection to the rendezvous server at %s: %v", c.addr, err)}
}

// fail records the first failure and wakes every waiting call.
func (c *Client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	close(c.failed)
}

// Failed is closed when the job has failed: a PE died or aborted, or the server went away.
func (c *Client) Failed() <-chan struct{} { return c.failed }

// Err returns why the job failed (nil while it has not), e.g. "bootstrap: PE 3 died (connection lost)".
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Exits delivers the exit status of a PE that aborted the job.
func (c *Client) Exits() <-chan int { return c.exits }

// Stats returns this PE's bootstrap traffic so far, by phase (see Stats). When this PE hosts the
// rendezvous server (PE 0 under a foreign launcher or PMIx), the server's traffic, which is the
// root's, is part of it: it is what this PE's process handles.
func (c *Client) Stats() Stats {
	mode := "star"
	if c.tree != nil {
		mode = "tree"
	}
	st := c.stats.snapshot(mode)
	if c.server != nil {
		root := c.server.stats.snapshot(mode)
		for p := range st.Phases {
			st.Phases[p] = st.Phases[p].Add(root.Phases[p])
		}
		st.Conns += root.Conns
	}
	return st
}

// Rank returns the rank the client joined with.
func (c *Client) Rank() Rank { return c.rank }

// send writes a request and returns the channel its reply arrives on.
func (c *Client) send(typ byte, build func(*enc)) (uint64, chan reply, error) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return 0, nil, ErrClosed
	}
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, nil, err
	}
	c.nextID++
	id := c.nextID
	ch := make(chan reply, 1)
	c.pending[id] = pendingCall{ch, typ}
	c.mu.Unlock()
	e := newFrame(typ, id)
	build(e)
	msg := e.finish()
	c.wmu.Lock()
	c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	_, err := c.conn.Write(msg)
	c.wmu.Unlock()
	c.stats.sent(phaseOf(typ), len(msg))
	if err != nil {
		c.forget(id)
		return 0, nil, c.lostServer(err)
	}
	return id, ch, nil
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// call sends one request and waits for its reply, the context, the timeout or a failure.
// waiting describes what a timeout waited for.
func (c *Client) call(ctx context.Context, name string, typ byte, build func(*enc), waiting func() string) ([]byte, error) {
	id, ch, err := c.send(typ, build)
	if err != nil {
		return nil, &CallError{Call: name, PE: c.rank.PE, Err: err}
	}
	return c.await(ctx, name, ch, func() { c.forget(id) }, waiting)
}

// ctxErr is a call's error when its context ended first. A deadline says what the call was still
// waiting for, as the client's own timeout does: the caller's deadline (shmem.Init bounds all of
// Init by ROX_TIMEOUT) is the one a slow job meets first, and "context deadline exceeded" alone
// names no PE.
func ctxErr(ctx context.Context, waiting func() string) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w waiting for %s", err, waiting())
	}
	return err
}

// Put stores val under key for every PE to Get. A later Put of the same key replaces it.
func (c *Client) Put(ctx context.Context, key string, val []byte) error {
	if c.tree != nil {
		return c.treePut(ctx, key, val)
	}
	_, err := c.call(ctx, fmt.Sprintf("Put(%q)", key), msgPut,
		func(e *enc) { e.str(key).bytes(val) },
		func() string { return "the server to store it" })
	return err
}

// Get returns the value stored under key, waiting until some PE has put it.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	if c.tree != nil {
		return c.treeGet(ctx, key)
	}
	return c.call(ctx, fmt.Sprintf("Get(%q)", key), msgGet,
		func(e *enc) { e.str(key) },
		func() string { return fmt.Sprintf("key %q", key) })
}

// Allgather contributes val and returns every PE's contribution, indexed by PE.
func (c *Client) Allgather(ctx context.Context, val []byte) ([][]byte, error) {
	c.mu.Lock()
	seq := c.gatherSeq
	c.gatherSeq++
	c.mu.Unlock()
	name := "Allgather #" + strconv.FormatUint(seq, 10)
	if c.tree != nil {
		return c.treeColl(ctx, name, collKey{msgAllgather, seq}, val)
	}
	data, err := c.call(ctx, name, msgAllgather,
		func(e *enc) { e.u64(seq).bytes(val) },
		func() string { return c.missing(context.WithoutCancel(ctx), msgAllgather, seq) })
	if err != nil {
		return nil, err
	}
	vals, err := decodeList(data)
	if err != nil || len(vals) != c.rank.NPEs {
		return nil, &CallError{Call: name, PE: c.rank.PE, Err: fmt.Errorf("malformed reply (%d values, %v)", len(vals), err)}
	}
	return vals, nil
}

// Barrier returns once every PE has called it (as many times as this PE has).
func (c *Client) Barrier(ctx context.Context) error {
	c.mu.Lock()
	seq := c.barrierSeq
	c.barrierSeq++
	c.mu.Unlock()
	if c.tree != nil {
		_, err := c.treeColl(ctx, "Barrier", collKey{msgBarrier, seq}, nil)
		return err
	}
	_, err := c.call(ctx, "Barrier", msgBarrier,
		func(e *enc) { e.u64(seq) },
		func() string { return c.missing(context.WithoutCancel(ctx), msgBarrier, seq) })
	return err
}

// missing asks the server which PEs have not reached a collective, for a timeout message.
func (c *Client) missing(ctx context.Context, kind byte, seq uint64) string {
	id, ch, err := c.send(msgMissing, func(e *enc) { e.u8(kind).u64(seq) })
	if err != nil {
		return "the other PEs (the server could not say which: " + err.Error() + ")"
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case r := <-ch:
		d := &dec{b: r.data}
		n := d.u32()
		pes := make([]int, 0, min(n, uint32(c.rank.NPEs)))
		for i := uint32(0); i < n && d.err == nil; i++ {
			pes = append(pes, d.i32())
		}
		return fmt.Sprintf("PEs %v", pes)
	case <-ctx.Done():
	case <-c.failed:
	case <-t.C:
	}
	c.forget(id)
	return "the other PEs (the server did not say which)"
}

// Abort ends the job: every other PE's pending and later calls fail naming this PE and reason,
// and their Exits channel delivers status. Later calls on this client fail too. Abort waits (at
// most the client's timeout) until the server has passed the news on.
func (c *Client) Abort(status int, reason string) {
	if c.tree != nil {
		e := &PeerError{PE: c.rank.PE, Aborted: true, Status: status, Reason: reason}
		c.fail(e)
		c.tree.failed(e, nil)
		c.tree.abortAtRoot(c.addr, status, reason)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	c.call(ctx, "Abort", msgAbort, func(e *enc) { e.i32(status).str(reason) },
		func() string { return "the server to pass the abort on" })
	c.fail(&PeerError{PE: c.rank.PE, Aborted: true, Status: status, Reason: reason})
}

// Close says goodbye, so that this PE's disconnection is not taken for a death, and disconnects.
// A client that hosts the server keeps it up until every PE has left or failed (at most the
// timeout), so that it does not cut off PEs that are still finishing.
func (c *Client) Close() error { return c.close(true) }

// Drop disconnects without goodbye, so that the job takes this PE for failed and the PEs that
// wait for it learn so at once (a PE whose Finalize failed has not left the job in order).
func (c *Client) Drop() error { return c.close(false) }

func (c *Client) close(bye bool) error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return nil
	}
	failed := c.err != nil || !bye
	if c.tree != nil {
		c.closing = true
	}
	c.mu.Unlock()
	if c.tree != nil {
		return c.closeTree(failed)
	}
	var err error
	if !failed {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		_, err = c.call(ctx, "Close", msgBye, func(*enc) {}, func() string { return "the server to acknowledge the goodbye" })
		cancel()
	} else if bye {
		// The job already failed: still say goodbye, without waiting, so that the server does not
		// report this PE's exit as one more death on top of the real one.
		c.wmu.Lock()
		c.conn.SetWriteDeadline(time.Now().Add(time.Second))
		c.conn.Write(newFrame(msgBye, 0).finish())
		c.wmu.Unlock()
	}
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.conn.Close()
	c.stats.conns.Add(-1)
	<-c.readerDone
	if c.server != nil {
		if !failed && err == nil {
			c.server.waitLeft(c.timeout)
		}
		c.server.Close()
	}
	if c.pmix != nil {
		// Last: the launcher takes a PMIx client that exits without PMIx_Finalize for a crash.
		if ferr := c.pmix.Finalize(); ferr != nil && err == nil {
			err = &CallError{Call: "Close", PE: c.rank.PE, Err: ferr}
		}
	}
	return err
}
