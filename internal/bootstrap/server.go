package bootstrap

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/internal/ratelog"
)

// handshakeTimeout bounds how long an unauthenticated connection may hold a server goroutine.
var handshakeTimeout = 10 * time.Second // a variable: tests shorten it

// writeTimeout bounds a write to one PE, so that a stopped PE cannot stall the whole job.
const writeTimeout = 10 * time.Second

// jobTimeout is the PEs' ROX_TIMEOUT as the launcher's environment gives it to them (0 if
// malformed: the PEs refuse it themselves). The server's waits on a PE, its hello and its
// writes, last at least that long: on a loaded node a PE may be slow to write its hello or read
// a reply, and the server must not fail it sooner than the PE itself would give up.
func jobTimeout() time.Duration {
	d, err := env.Timeout.Duration()
	if err != nil {
		return 0
	}
	return d
}

// keepAlive makes the kernel notice a peer host that vanished without closing its socket.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 2 * time.Second, Count: 3}

// Failure is a PE that left the job without saying goodbye: its connection dropped, it aborted,
// or its launcher reported its exit (Exited). Failures arrive in the order the server learnt of
// them, so the first one is the job's root cause and later ones may be its consequences.
type Failure struct {
	PE      int
	Reason  string
	Aborted bool // the PE called Abort (shmem's GlobalExit) with Status
	Status  int
}

// Server is the rendezvous service of one job: a key-value store with allgather and barrier,
// which only connections presenting the job's token may use. roxrun runs it; without roxrun
// PE 0 runs it inside its own process (Dial with Rank.Host).
type Server struct {
	ln       net.Listener
	npes     int
	token    []byte
	failures chan Failure
	wg       sync.WaitGroup
	done     chan struct{} // closed by Close
	// jobTimeout is the PEs' ROX_TIMEOUT: the least the server waits on one of them.
	jobTimeout time.Duration

	mu      sync.Mutex
	logf    func(format string, args ...any)
	refused *ratelog.Limiter // refused connections: a flood is a few lines and a count
	hostPE  int
	closed  bool
	pes     []*peer // by PE; nil until it joins
	kv      map[string][]byte
	getters map[string][]waiter
	colls   map[collKey]*collective
	failure *PeerError // the first failure, told to PEs that join later
	left    chan struct{}
	nleft   int          // PEs that said goodbye or failed
	gone    []bool       // by PE: counted in nleft
	root    *node        // tree mode: the root of the bootstrap tree, made at the first join
	mode    string       // "star" or "tree", set by the first PE to join
	aborts  map[int]bool // tree mode: the PEs whose abort the launcher was told of
	stats   counters
	layout  []int // Config.Layout: the root of a tree across nodes

	// acking counts the goodbyes whose acknowledgement is not written yet: left is closed only
	// once none is (leftHeld until then), so that the hosting PE does not close the server under
	// a reply
	acking   int
	leftHeld bool
	// exitWait, when positive, is how long a dropped connection waits for the launcher to report
	// the PE's exit (Exited), so that the others learn how it ended and not just that it is gone.
	exitWait time.Duration
}

// peer is the server side of one PE's connection.
type peer struct {
	pe      int
	conn    net.Conn
	wmu     sync.Mutex
	bye     bool // said goodbye: a later drop is not a failure
	aborted bool
}

type waiter struct {
	p  *peer
	id uint64
}

type collKey struct {
	kind byte // msgAllgather or msgBarrier
	seq  uint64
}

type collective struct {
	vals    [][]byte
	arrived []bool
	waiters []waiter
	n       int
}

// outgoing is a frame to write once the server lock is released.
type outgoing struct {
	p   *peer
	msg []byte
}

// NewServer listens on addr (":0" or "127.0.0.1:0" pick a free port) for the npes PEs of the job
// whose token is token, and serves them until Close.
func NewServer(addr string, npes int, token string) (*Server, error) {
	return NewServerConfig(addr, npes, token, Config{})
}

// NewServerConfig is NewServer over cfg.Net. The server serves either mode: PEs that join it as
// tree children (tree.go) make it the root of the job's bootstrap tree; its fanout is theirs.
func NewServerConfig(addr string, npes int, token string, cfg Config) (*Server, error) {
	if npes < 1 {
		return nil, fmt.Errorf("bootstrap: NewServer(%q): number of PEs %d is not positive", addr, npes)
	}
	if token == "" {
		return nil, fmt.Errorf("bootstrap: NewServer(%q): empty job token", addr)
	}
	nw := cfg.Net
	if nw == nil {
		nw = SysNet
	}
	if _, err := newShape(npes, DefaultFanout, cfg.Layout); err != nil {
		return nil, fmt.Errorf("bootstrap: NewServer(%q): %w", addr, err)
	}
	ln, err := nw.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: NewServer: %w", err)
	}
	s := newServer(npes, token)
	s.ln = ln
	s.layout = cfg.Layout
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// newServer is a server's state, without a listener.
func newServer(npes int, token string) *Server {
	return &Server{
		npes: npes, token: []byte(token),
		failures:   make(chan Failure, npes),
		logf:       env.Warnf,
		refused:    &ratelog.Limiter{Logf: env.Warnf},
		hostPE:     -1,
		pes:        make([]*peer, npes),
		gone:       make([]bool, npes),
		kv:         map[string][]byte{},
		getters:    map[string][]waiter{},
		colls:      map[collKey]*collective{},
		left:       make(chan struct{}),
		done:       make(chan struct{}),
		jobTimeout: jobTimeout(),
	}
}

// Addr returns the address the server listens on, HOST:PORT.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// SetLogger replaces env.Warnf (log.Printf unless ROX_DEBUG=off) as the destination of the server's messages (refused connections).
func (s *Server) SetLogger(logf func(format string, args ...any)) {
	s.mu.Lock()
	s.logf = logf
	s.refused = &ratelog.Limiter{Logf: logf}
	s.mu.Unlock()
}

// Failures delivers each PE that dropped its connection without saying goodbye, or aborted.
// It is buffered for one failure per PE and never blocks the server.
func (s *Server) Failures() <-chan Failure { return s.failures }

// Close stops listening and drops every connection. PEs still connected see the server go away.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	err := s.ln.Close()
	for _, p := range s.pes {
		if p != nil {
			p.conn.Close()
		}
	}
	root := s.root
	s.mu.Unlock()
	if root != nil {
		root.stop()
	}
	s.wg.Wait()
	return err
}

// waitLeft waits until every PE has said goodbye or failed, or until timeout; the PE that hosts the
// server calls it before closing so that it does not cut off PEs that are still finishing.
func (s *Server) waitLeft(timeout time.Duration) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	s.mu.Lock()
	var done chan struct{}
	if s.root != nil {
		done = s.root.done
	}
	s.mu.Unlock()
	select {
	case <-s.left:
	case <-done:
	case <-t.C:
	}
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient (e.g. out of file descriptors): back off rather than spin.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.wg.Add(1)
		go s.serve(conn)
	}
}

// serve authenticates one connection and then reads its requests until it closes.
// byeAckDelay holds back the acknowledgement of a goodbye from a PE other than the host (tests:
// the hosting PE must not close the server under a reply still being written).
var byeAckDelay time.Duration

func (s *Server) serve(conn net.Conn) {
	defer s.wg.Done()
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(max(handshakeTimeout, s.jobTimeout)))
	f, err := readFrame(conn, maxHelloFrame)
	if err == nil && f.typ == msgJoin {
		conn.SetReadDeadline(time.Time{})
		if root := s.treeRoot(conn, f); root != nil {
			root.serveConn(conn, &f)
		}
		return
	}
	p, ok := s.handshake(conn, f, err)
	if !ok {
		return
	}
	for {
		var f frame
		if f, err = readFrame(conn, maxFrame); err != nil {
			break
		}
		s.stats.recv(phaseOf(f.typ), f.size())
		out, stop := s.handle(p, f)
		if f.typ == msgBye && byeAckDelay > 0 && p.pe != s.hostPE {
			time.Sleep(byeAckDelay)
		}
		s.flush(out)
		if f.typ == msgBye {
			s.mu.Lock()
			if s.acking--; s.acking == 0 && s.leftHeld {
				s.leftHeld = false
				close(s.left)
			}
			s.mu.Unlock()
		}
		if stop {
			break
		}
	}
	s.dropped(p, err)
}

func (s *Server) handshake(conn net.Conn, f frame, err error) (*peer, bool) {
	refuse := func(reason string) (*peer, bool) {
		s.mu.Lock()
		refused := s.refused
		s.mu.Unlock()
		refused.Printf("bootstrap: refused connection from %s: %s", conn.RemoteAddr(), reason)
		conn.SetWriteDeadline(time.Now().Add(time.Second))
		conn.Write(newFrame(msgRefuse, 0).str(reason).finish())
		return nil, false
	}
	if err != nil {
		return refuse(fmt.Sprintf("no valid hello: %v", err))
	}
	s.stats.recv(PhaseConnect, f.size())
	d := &dec{b: f.body}
	token, pe, npes, version := d.bytes(), d.i32(), d.i32(), d.u32()
	switch {
	case f.typ != msgHello || d.err != nil:
		return refuse("no valid hello")
	case subtle.ConstantTimeCompare(token, s.token) != 1:
		return refuse("bad job token")
	case version != protocolVersion:
		return refuse(fmt.Sprintf("protocol version %d, server speaks %d", version, protocolVersion))
	case npes != s.npes:
		return refuse(fmt.Sprintf("PE %d says the job has %d PEs, the server was started for %d", pe, npes, s.npes))
	case pe < 0 || pe >= s.npes:
		return refuse(fmt.Sprintf("PE %d is outside [0,%d)", pe, s.npes))
	}
	conn.SetReadDeadline(time.Time{})
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	p := &peer{pe: pe, conn: conn}
	s.mu.Lock()
	if s.mode == "tree" {
		s.mu.Unlock()
		return refuse(fmt.Sprintf("PE %d joins in star mode, the job's first PE joined in tree mode (PEs disagree on the job's shape)", pe))
	}
	s.mode = "star"
	if s.pes[pe] != nil {
		s.mu.Unlock()
		return refuse(fmt.Sprintf("PE %d already joined this job", pe))
	}
	if s.closed {
		s.mu.Unlock()
		return nil, false
	}
	s.pes[pe] = p
	out := []outgoing{{p, newFrame(msgWelcome, 0).i32(s.hostPE).finish()}}
	if s.failure != nil {
		out = append(out, outgoing{p, failFrame(s.failure)})
	}
	s.mu.Unlock()
	s.flush(out)
	return p, true
}

func failFrame(e *PeerError) []byte {
	return newFrame(msgPeerFailed, 0).i32(e.PE).u8(e.flags()).i32(e.Status).str(e.Reason).finish()
}

func okFrame(id uint64, data []byte) []byte {
	return newFrame(msgReply, id).u8(1).bytes(data).finish()
}

func errFrame(id uint64, msg string) []byte {
	return newFrame(msgReply, id).u8(0).str(msg).finish()
}

// handle applies one request and returns the frames it causes; stop ends the connection.
func (s *Server) handle(p *peer, f frame) (out []outgoing, stop bool) {
	d := &dec{b: f.body}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch f.typ {
	case msgPut:
		key, val := d.str(), d.bytes()
		if d.err != nil {
			break
		}
		s.kv[key] = val
		out = append(out, outgoing{p, okFrame(f.id, nil)})
		for _, w := range s.getters[key] {
			out = append(out, outgoing{w.p, okFrame(w.id, val)})
		}
		delete(s.getters, key)
	case msgGet:
		key := d.str()
		if d.err != nil {
			break
		}
		if val, ok := s.kv[key]; ok {
			out = append(out, outgoing{p, okFrame(f.id, val)})
		} else {
			s.getters[key] = append(s.getters[key], waiter{p, f.id})
		}
	case msgAllgather, msgBarrier:
		seq := d.u64()
		var val []byte
		if f.typ == msgAllgather {
			val = d.bytes()
		}
		if d.err != nil {
			break
		}
		out = s.arrive(p, f.id, collKey{f.typ, seq}, val)
	case msgMissing:
		key := collKey{d.u8(), d.u64()}
		if d.err != nil {
			break
		}
		var missing []int
		if c := s.colls[key]; c != nil {
			for pe, ok := range c.arrived {
				if !ok {
					missing = append(missing, pe)
				}
			}
		}
		list := (&enc{}).u32(uint32(len(missing)))
		for _, pe := range missing {
			list.i32(pe)
		}
		out = append(out, outgoing{p, okFrame(f.id, list.b)})
	case msgAbort:
		status, reason := d.i32(), d.str()
		if d.err != nil {
			break
		}
		p.aborted = true
		out = s.fail(p.pe, &PeerError{PE: p.pe, Aborted: true, Status: status, Reason: reason},
			fmt.Sprintf("aborted with status %d: %s", status, reason))
		out = append(out, outgoing{p, okFrame(f.id, nil)})
	case msgBye:
		// The PEs leave at once, but the hosting PE may close the server only once every
		// goodbye's acknowledgement is written (serve, acking): closing first cut a reply off.
		p.bye = true
		s.acking++
		s.leave(p.pe)
		return append(out, outgoing{p, okFrame(f.id, nil)}), false
	default:
		return append(out, outgoing{p, errFrame(f.id, fmt.Sprintf("unknown request type %d", f.typ))}), false
	}
	if d.err != nil {
		out = append(out, outgoing{p, errFrame(f.id, fmt.Sprintf("malformed request type %d: %v", f.typ, d.err))})
	}
	return out, false
}

// arrive records p's contribution to a collective and, when it is the last, answers everyone.
func (s *Server) arrive(p *peer, id uint64, key collKey, val []byte) []outgoing {
	c := s.colls[key]
	if c == nil {
		c = &collective{vals: make([][]byte, s.npes), arrived: make([]bool, s.npes)}
		s.colls[key] = c
	}
	if c.arrived[p.pe] {
		return []outgoing{{p, errFrame(id, fmt.Sprintf("PE %d arrived twice at collective %d", p.pe, key.seq))}}
	}
	c.arrived[p.pe] = true
	c.vals[p.pe] = val
	c.waiters = append(c.waiters, waiter{p, id})
	c.n++
	if c.n < s.npes {
		return nil
	}
	delete(s.colls, key)
	var reply []byte
	if key.kind == msgAllgather {
		body := &enc{}
		encodeList(body, c.vals)
		reply = okFrame(0, body.b)
	}
	out := make([]outgoing, 0, len(c.waiters))
	for _, w := range c.waiters {
		if key.kind == msgBarrier {
			out = append(out, outgoing{w.p, okFrame(w.id, nil)})
			continue
		}
		// Same frame for every PE but its request id.
		m := slices.Clone(reply)
		putID(m, w.id)
		out = append(out, outgoing{w.p, m})
	}
	return out
}

func putID(frame []byte, id uint64) {
	for i := 0; i < 8; i++ {
		frame[5+i] = byte(id >> (8 * i))
	}
}

// fail records that PE pe left the job badly and tells every other PE. Called with s.mu held.
// The Failure is queued before any PE is told, so that a launcher that sees a PE fail because of
// it already has the cause.
func (s *Server) fail(pe int, e *PeerError, reason string) []outgoing {
	if s.failure == nil {
		s.failure = e
	}
	s.leave(pe)
	select {
	case s.failures <- Failure{PE: pe, Reason: reason, Aborted: e.Aborted, Status: e.Status}:
	default:
	}
	msg := failFrame(e)
	var out []outgoing
	for q, p := range s.pes {
		if p != nil && q != pe && !p.bye {
			out = append(out, outgoing{p, msg})
		}
	}
	return out
}

// leave counts PE pe as gone. Called with s.mu held.
func (s *Server) leave(pe int) {
	if s.gone[pe] {
		return
	}
	s.gone[pe] = true
	if s.nleft++; s.nleft == s.npes {
		if s.acking > 0 {
			s.leftHeld = true // closed by serve once the goodbyes' acknowledgements are written
		} else {
			close(s.left)
		}
	}
}

// dropped handles the end of p's connection. With a launcher that reports exits (AwaitExits) it
// first gives the launcher a moment to say how the PE ended.
func (s *Server) dropped(p *peer, err error) {
	s.mu.Lock()
	wait := s.exitWait
	s.mu.Unlock()
	lost := func() {
		s.mu.Lock()
		var out []outgoing
		if !s.closed && !s.gone[p.pe] {
			out = s.fail(p.pe, &PeerError{PE: p.pe, Reason: "connection lost"}, fmt.Sprintf("connection lost: %v", err))
		}
		s.mu.Unlock()
		s.flush(out)
	}
	if wait <= 0 {
		lost()
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
			lost()
		case <-s.done:
		}
	}()
}

// AwaitExits says that the launcher will report every PE's exit through Exited; a dropped
// connection then waits up to d for that report before it is announced as a lost connection.
func (s *Server) AwaitExits(d time.Duration) {
	s.mu.Lock()
	s.exitWait = d
	s.mu.Unlock()
}

// Exited is the launcher's report that PE pe's process ended; how says how ("exited with status
// 0", "was killed by signal SIGKILL"), status is its exit status (128+signal when killed). A PE
// that had not said goodbye (Close) is a failure of the job: every PE waiting for it learns at
// once that it is gone and how, including a PE that ended before it ever joined. A PE that said
// goodbye has left the job in order, whatever its status.
func (s *Server) Exited(pe int, how string, status int) {
	s.mu.Lock()
	if pe < 0 || pe >= s.npes || s.closed || s.gone[pe] {
		s.mu.Unlock()
		return
	}
	if root := s.root; root != nil {
		s.mu.Unlock()
		select {
		case <-root.done: // every PE said goodbye before any exited
			return
		default:
		}
		if status == 0 {
			how += " without Finalize"
		}
		root.failed(&PeerError{PE: pe, Exited: true, Status: status, Reason: how}, nil)
		return
	}
	switch {
	case s.pes[pe] == nil:
		how += " before Init"
	case status == 0:
		how += " without Finalize"
	}
	out := s.fail(pe, &PeerError{PE: pe, Exited: true, Status: status, Reason: how}, how)
	s.mu.Unlock()
	s.flush(out)
}

// flush writes frames outside the server lock. A PE whose write fails is disconnected; its reader
// then reports it.
func (s *Server) flush(out []outgoing) {
	for _, o := range out {
		o.p.wmu.Lock()
		o.p.conn.SetWriteDeadline(time.Now().Add(max(writeTimeout, s.jobTimeout)))
		_, err := o.p.conn.Write(o.msg)
		o.p.wmu.Unlock()
		s.stats.sent(phaseOf(o.msg[4]), len(o.msg))
		if err != nil {
			o.p.conn.Close()
		}
	}
}

// Stats returns the server's own traffic (star mode: every PE's requests; tree mode: its
// children's).
func (s *Server) Stats() Stats {
	s.mu.Lock()
	mode := s.mode
	s.mu.Unlock()
	return s.stats.snapshot(mode)
}

// treeRoot returns the root of the job's bootstrap tree, making it at the first join (whose
// fanout it takes; serveConn refuses a join that disagrees), or refuses a join into a star job.
func (s *Server) treeRoot(conn net.Conn, f frame) *node {
	d := &dec{b: f.body}
	d.bytes()
	d.i32()
	d.i32()
	d.u32()
	k := d.i32()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.mode == "star" || d.err != nil || k < 2 {
		reason := "a tree join into a job whose first PE joined in star mode (PEs disagree on the job's shape)"
		if s.mode != "star" {
			reason = fmt.Sprintf("malformed tree join (fanout %d, %v)", k, d.err)
		}
		s.refused.Printf("bootstrap: refused connection from %s: %s", conn.RemoteAddr(), reason)
		conn.SetWriteDeadline(time.Now().Add(time.Second))
		conn.Write(newFrame(msgRefuse, 0).str(reason).finish())
		return nil
	}
	if s.root != nil {
		return s.root
	}
	s.mode = "tree"
	s.aborts = map[int]bool{}
	shape, _ := newShape(s.npes, k, s.layout) // checked by NewServerConfig
	root := newNode(-1, shape, string(s.token), nil, nil, s.jobTimeout, &s.stats)
	root.failure = s.failure // a PE that exited before the first join
	root.onFail = s.treeFailed
	root.onLost = s.treeLost
	s.root = root
	s.wg.Add(1)
	go s.treeLeave(root)
	return root
}

// treeLeave ends the goodbye wave: once every child of the root has said goodbye (for its whole
// subtree), msgDone goes down and the job has left in order.
func (s *Server) treeLeave(root *node) {
	defer s.wg.Done()
	want := len(root.shape.children(-1))
	for {
		root.mu.Lock()
		byes, failed := root.byes, root.failure != nil
		root.mu.Unlock()
		if failed {
			return
		}
		if byes >= want {
			root.finish()
			return
		}
		select {
		case <-root.byeCh:
		case <-s.done:
			return
		}
	}
}

// treeFailed records a failure the tree reported (or the root decided): the launcher's Failures.
func (s *Server) treeFailed(e *PeerError) {
	reason := e.Reason
	if e.Aborted {
		reason = fmt.Sprintf("aborted with status %d: %s", e.Status, e.Reason)
	}
	s.mu.Lock()
	if s.failure == nil {
		s.failure = e
	}
	// An abort reaches the root twice (directly and over the tree): report it once.
	dup := e.Aborted && s.aborts[e.PE]
	if e.Aborted {
		s.aborts[e.PE] = true
	}
	s.mu.Unlock()
	if dup {
		return
	}
	select {
	case s.failures <- Failure{PE: e.PE, Reason: reason, Aborted: e.Aborted, Status: e.Status}:
	default:
	}
}

// treeLost is a node's report that PE pe's link dropped without goodbye: as in star mode, wait
// for the launcher's exit report (Exited) when it gives one, then flood the failure.
func (s *Server) treeLost(pe int, reason string) {
	s.mu.Lock()
	wait, root := s.exitWait, s.root
	s.mu.Unlock()
	lost := func() {
		s.mu.Lock()
		skip := s.closed || (pe >= 0 && pe < s.npes && s.gone[pe])
		s.mu.Unlock()
		if !skip {
			root.failed(&PeerError{PE: pe, Reason: "connection lost"}, nil)
		}
	}
	if wait <= 0 {
		lost()
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
			lost()
		case <-s.done:
		}
	}()
}
