package bootstrap

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// Tree mode. The rendezvous server is the root of a k-ary tree over the PEs: with v = PE+1 and
// the server at v = 0, v's parent is (v-1)/k and its children k*v+1 .. k*v+k. A PE listens at
// its derived address (Config.PEAddr), dials its parent (the server for PEs 0..k-1) and serves its
// children and its directory clients. No PE, and not the server, handles more than O(k) links
// for the tree:
//
//   - Allgather and Barrier: contributions flow up (each node sends its subtree's in one
//     msgUp once it has its own and every child's), the root sends the result down (msgDown):
//     2 x depth hops, depth = ceil(log_k(N+1)); no central counter of N.
//   - Put and Get: the key's owner is PE fnv64a(key) mod N, reached directly on a link of its own
//     (rolePeer), cached. Get waits at the owner until some PE has put the key.
//   - Failure: a node whose child's link drops without goodbye sends msgLost up to the root,
//     which (after the launcher's exit report, as in star mode) floods msgPeerFailed down the
//     whole tree; a PE that loses its parent fails its own subtree naming the parent. An Abort
//     floods from the aborting PE both up and down.
//   - Close: goodbyes flow up (a node says goodbye once its whole subtree has), the root answers
//     msgDone down; only then do links close, so no PE's exit is mistaken for a death.

const (
	roleChild = 0
	rolePeer  = 1
)

// treeShape is the tree over N PEs with fanout k. With a layout (PEs per node, nodes in PE
// order: roxrun across hosts) it is two-level (hier.go): the node leaders (each node's first
// PE) form a k-ary tree under the root, and each node's PEs a k-ary tree under their leader, so
// that only leaders' links cross nodes.
type treeShape struct {
	n, k   int
	layout []int // nil: one k-ary tree over the PEs
	starts []int // layout's prefix sums: node j's first PE
}

// parent is PE p's parent PE, -1 for the root.
func (t treeShape) parent(p int) int {
	if t.layout == nil {
		return p/t.k - 1
	}
	j, l := t.locate(p)
	if l == 0 {
		if pj := j/t.k - 1; pj >= 0 {
			return t.starts[pj]
		}
		return -1
	}
	return t.starts[j] + (l-1)/t.k
}

// children are PE p's children (p = -1: the root's).
func (t treeShape) children(p int) []int {
	var out []int
	if t.layout == nil {
		v := p + 1
		for c := t.k*v + 1; c <= t.k*v+t.k && c <= t.n; c++ {
			out = append(out, c-1)
		}
		return out
	}
	nodes := func(v int) { // the leaders of node-tree vertex v's children
		for m := t.k * v; m < t.k*v+t.k && m < len(t.layout); m++ {
			out = append(out, t.starts[m])
		}
	}
	if p < 0 {
		nodes(0)
		return out
	}
	j, l := t.locate(p)
	for c := t.k*l + 1; c <= t.k*l+t.k && c < t.layout[j]; c++ {
		out = append(out, t.starts[j]+c)
	}
	if l == 0 {
		nodes(j + 1)
	}
	return out
}

// kSubtree counts the vertices of v's subtree in the k-ary tree over 0..last (children of u:
// k*u+1 .. k*u+k), v included; weight, when not nil, weighs each vertex.
func kSubtree(v, last, k int, weight func(int) int) int {
	lo, hi, size := v, v, 0
	for lo <= last {
		for u := lo; u <= min(hi, last); u++ {
			if weight == nil {
				size += min(hi, last) - lo + 1
				break
			}
			size += weight(u)
		}
		lo, hi = k*lo+1, k*hi+k
	}
	return size
}

// subtree is the number of PEs in p's subtree, p included (the root's: every PE).
func (t treeShape) subtree(p int) int {
	if p < 0 {
		return t.n
	}
	if t.layout == nil {
		return kSubtree(p+1, t.n, t.k, nil)
	}
	j, l := t.locate(p)
	if l == 0 { // the leader: its node and every node below it, whole
		return kSubtree(j+1, len(t.layout), t.k, func(v int) int { return t.layout[v-1] })
	}
	return kSubtree(l, t.layout[j]-1, t.k, nil)
}

// depth is the number of hops from the root to the deepest PE.
func (t treeShape) depth() int {
	levels := func(n int) int { // of a k-ary tree under a root over n more vertices
		d, last := 0, 0
		for last < n {
			last = t.k*last + t.k
			d++
		}
		return d
	}
	if t.layout == nil {
		return levels(t.n)
	}
	return levels(len(t.layout)) + levels(slices.Max(t.layout)-1)
}

// owner is the PE whose directory holds key.
func owner(key string, npes int) int {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int(h.Sum64() % uint64(npes))
}

// link is one connection of a tree node: to its parent, a child, or a directory peer.
type link struct {
	conn net.Conn
	pe   int // the PE at the other end; -1: the root
	role int
	st   *counters
	// wait bounds one write: at least the job's timeout, so that a PE slow to read (a loaded
	// node) fails no sooner than any other wait of the job would.
	wait time.Duration
	wmu  sync.Mutex
	bye  bool // (child links) said goodbye: its drop is no failure
	// ready: (child links) welcomed, so that other frames may follow (guarded by the node's mu).
	ready bool
}

func (l *link) write(p Phase, msg []byte) error {
	l.wmu.Lock()
	l.conn.SetWriteDeadline(time.Now().Add(max(writeTimeout, l.wait)))
	_, err := l.conn.Write(msg)
	l.wmu.Unlock()
	l.st.sent(p, len(msg))
	if err != nil {
		l.conn.Close()
	}
	return err
}

// treeColl is one collective in progress at a node.
type treeColl struct {
	vals    map[int][]byte // allgather: the subtree's contributions so far
	n       int            // PEs of the subtree counted so far
	own     bool
	arrived map[int]bool // children whose msgUp came
	sentUp  bool
	result  chan [][]byte // the local caller's (buffered)
}

type treeKV struct {
	vals    map[string][]byte
	waiters map[string][]kvWaiter
}

type kvWaiter struct {
	l  *link // nil: a local Get
	id uint64
	ch chan []byte
}

// node is one PE's (or, pe -1, the server's) place in the tree.
type node struct {
	pe      int
	shape   treeShape
	token   string
	net     Network
	addrOf  func(ctx context.Context, pe int) (string, error) // where to dial PE pe (-1: the root)
	timeout time.Duration
	st      *counters
	lns     []net.Listener // its unix socket; a node leader's TCP listener too
	parent  *link
	// onFail is told the job's first failure (and every abort, for its status); onLost, at the
	// root only, a child's report that PE pe's link dropped.
	onFail func(e *PeerError)
	onLost func(pe int, reason string)
	wg     sync.WaitGroup

	mu       sync.Mutex
	children map[int]*link
	inbound  []*link // directory clients
	kv       treeKV
	colls    map[collKey]*treeColl
	owners   map[int]*ownerLink
	failure  *PeerError
	closing  bool
	byes     int           // children that said goodbye
	byeCh    chan struct{} // signalled at each goodbye or failure
	done     chan struct{} // closed at msgDone: every PE has said goodbye
	doneOnce sync.Once
	stopped  bool
	local    func(pe int) string // hierarchical tree: the addresses of this node's PEs
	leaders  []byte              // hierarchical tree: the msgLeaders frame, once the root has it
	relays   []net.Conn          // hierarchical tree, at a leader: the connections it relays
}

func newNode(pe int, shape treeShape, token string, nw Network, addrOf func(context.Context, int) (string, error), timeout time.Duration, st *counters) *node {
	return &node{
		pe: pe, shape: shape, token: token, net: nw, addrOf: addrOf, timeout: timeout, st: st,
		children: map[int]*link{},
		kv:       treeKV{vals: map[string][]byte{}, waiters: map[string][]kvWaiter{}},
		colls:    map[collKey]*treeColl{},
		owners:   map[int]*ownerLink{},
		byeCh:    make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
}

// listen starts serving children and directory clients on ln.
func (n *node) listen(ln net.Listener) {
	n.mu.Lock()
	n.lns = append(n.lns, ln)
	n.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				n.serveConn(conn, nil)
			}()
		}
	}()
}

// serveConn authenticates a joining link (first, when the server already read it) and serves it.
func (n *node) serveConn(conn net.Conn, first *frame) {
	defer conn.Close()
	refuse := func(reason string) {
		conn.SetWriteDeadline(time.Now().Add(time.Second))
		msg := newFrame(msgRefuse, 0).str(reason).finish()
		conn.Write(msg)
		n.st.sent(PhaseConnect, len(msg))
	}
	var f frame
	if first != nil {
		f = *first
	} else {
		conn.SetReadDeadline(time.Now().Add(n.handshake()))
		var err error
		if f, err = readFrame(conn, maxHelloFrame); err != nil {
			refuse(fmt.Sprintf("no valid join: %v", err))
			return
		}
		if f.typ == msgRelay { // hier.go: a dialer on another node, through this leader
			if !n.relay(conn, f) {
				return
			}
			if f, err = readFrame(conn, maxHelloFrame); err != nil {
				refuse(fmt.Sprintf("no valid join: %v", err))
				return
			}
		}
		conn.SetReadDeadline(time.Time{})
	}
	n.st.recv(PhaseConnect, f.size())
	d := &dec{b: f.body}
	token, pe, npes, version, k, role, layout := d.bytes(), d.i32(), d.i32(), d.u32(), d.i32(), d.u8(), d.u64()
	switch {
	case f.typ != msgJoin || d.err != nil:
		refuse("no valid join")
		return
	case subtle.ConstantTimeCompare(token, []byte(n.token)) != 1:
		refuse("bad job token")
		return
	case version != protocolVersion:
		refuse(fmt.Sprintf("protocol version %d, this node speaks %d", version, protocolVersion))
		return
	case npes != n.shape.n || k != n.shape.k:
		refuse(fmt.Sprintf("PE %d says the job has %d PEs in a tree of fanout %d, this node has %d and %d", pe, npes, k, n.shape.n, n.shape.k))
		return
	case layout != n.shape.sum():
		refuse(fmt.Sprintf("PE %d has another layout of the job's PEs over nodes than %s (ROX_LAYOUT: PEs disagree on the job's shape)", pe, n.name()))
		return
	case pe < 0 || pe >= n.shape.n:
		refuse(fmt.Sprintf("PE %d is outside [0,%d)", pe, n.shape.n))
		return
	case role == roleChild && n.shape.parent(pe) != n.pe:
		refuse(fmt.Sprintf("PE %d is not a child of %s in the bootstrap tree", pe, n.name()))
		return
	case role != roleChild && role != rolePeer:
		refuse(fmt.Sprintf("unknown role %d", role))
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	l := &link{conn: conn, pe: pe, role: int(role), st: n.st, wait: n.timeout}
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return
	}
	if role == roleChild {
		if n.children[pe] != nil {
			n.mu.Unlock()
			refuse(fmt.Sprintf("PE %d already joined this job", pe))
			return
		}
		n.children[pe] = l
	} else {
		n.inbound = append(n.inbound, l)
	}
	failure := n.failure
	n.mu.Unlock()
	n.st.conns.Add(1)
	defer n.st.conns.Add(-1)
	l.write(PhaseConnect, newFrame(msgWelcome, 0).i32(-1).finish())
	if failure != nil && role == roleChild {
		l.write(PhaseControl, failFrame(failure))
	}
	if role == roleChild {
		// Frames sent to every child (the leader table) go to this one from now on; if the table
		// came before, it goes here (leaderTable and gotLeaders take only ready links).
		n.mu.Lock()
		l.ready = true
		table := n.leaders
		n.mu.Unlock()
		if table != nil && n.shape.isLeader(pe) {
			l.write(PhaseConnect, table)
		}
	}
	var err error
	for {
		var f frame
		if f, err = readFrame(conn, maxFrame); err != nil {
			break
		}
		if role == roleChild {
			n.fromChild(l, f)
		} else {
			n.fromPeer(l, f)
		}
	}
	if role == roleChild {
		n.childGone(l, err)
	}
}

// handshake is how long a PE's listener waits for a join: at least as long as any other wait of
// the job (ROX_TIMEOUT). A join through a leader's relay arrives after the relay's own dial, and
// in a burst of first look-ups (every PE at once, once the leader table is out) a node with
// thousands of virtual PEs on two cores (the simulation at 8,192) took more than 10 s.
func (n *node) handshake() time.Duration { return max(handshakeTimeout, n.timeout) }

func (n *node) name() string {
	if n.pe < 0 {
		return "the root"
	}
	return fmt.Sprintf("PE %d", n.pe)
}

// join connects this node to its parent as a child.
func (n *node) join(ctx context.Context, addr string, call string) (*link, error) {
	return n.dialRetry(ctx, addr, roleChild, call, "its parent in the bootstrap tree")
}

// dialRetry opens a link, retrying until the timeout: the other PE may not be listening yet (it
// may not even have started).
func (n *node) dialRetry(ctx context.Context, addr string, role int, call, what string) (*link, error) {
	deadline := time.Now().Add(n.timeout)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	backoff := 5 * time.Millisecond
	var lastErr error
	for {
		l, err := n.dialLink(dctx, addr, role, deadline)
		if err == nil {
			return l, nil
		}
		if errors.Is(err, ErrRefused) {
			return nil, fmt.Errorf("%s: %w", call, err)
		}
		lastErr = err
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: connecting to %s: %w (last error: %v)", call, addr, ctx.Err(), lastErr)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: %w", call, &TimeoutError{After: n.timeout,
				Waiting: fmt.Sprintf("%s at %s (last error: %v)", what, addr, lastErr)})
		}
		select {
		case <-dctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// dialLink opens one authenticated link.
func (n *node) dialLink(ctx context.Context, addr string, role int, deadline time.Time) (*link, error) {
	conn, err := n.dialVia(ctx, addr)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(deadline)
	msg := newFrame(msgJoin, 0).str(n.token).i32(n.pe).i32(n.shape.n).u32(protocolVersion).i32(n.shape.k).u8(byte(role)).u64(n.shape.sum()).finish()
	if _, err := conn.Write(msg); err != nil {
		conn.Close()
		return nil, err
	}
	n.st.sent(PhaseConnect, len(msg))
	f, err := readFrame(conn, maxHelloFrame)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("joining %s: %w", addr, err)
	}
	n.st.recv(PhaseConnect, f.size())
	conn.SetDeadline(time.Time{})
	switch f.typ {
	case msgRefuse:
		conn.Close()
		return nil, fmt.Errorf("%w at %s: %s", ErrRefused, addr, (&dec{b: f.body}).str())
	case msgWelcome:
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		n.st.conns.Add(1)
		return &link{conn: conn, pe: n.shape.parent(n.pe), role: role, st: n.st, wait: n.timeout}, nil
	}
	conn.Close()
	return nil, fmt.Errorf("joining %s: unexpected message type %d", addr, f.typ)
}

// readParent is the parent link's reader.
func (n *node) readParent() {
	defer n.wg.Done()
	var err error
	for {
		var f frame
		if f, err = readFrame(n.parent.conn, maxFrame); err != nil {
			break
		}
		switch f.typ {
		case msgDown:
			d := &dec{b: f.body}
			key := collKey{d.u8(), d.u64()}
			n.st.recv(phaseOf(key.kind), f.size())
			n.down(key, f.body)
		case msgPeerFailed:
			n.st.recv(PhaseControl, f.size())
			n.failed(decodePeerFailed(f.body), n.parent)
		case msgDone:
			n.st.recv(PhaseControl, f.size())
			n.finish()
		case msgLeaders:
			n.gotLeaders(f, frameBytes(f))
		default:
			n.st.recv(PhaseControl, f.size())
		}
	}
	n.st.conns.Add(-1)
	select {
	case <-n.done:
		return
	default:
	}
	n.mu.Lock()
	stopped := n.stopped
	n.mu.Unlock()
	if !stopped {
		pe := n.shape.parent(n.pe)
		reason := fmt.Sprintf("lost the connection to its parent in the bootstrap tree: %v", err)
		if pe < 0 {
			n.failed(&PeerError{PE: -1, Reason: "lost the connection to the rendezvous server (the bootstrap tree's root): " + err.Error()}, n.parent)
			return
		}
		n.failed(&PeerError{PE: pe, Reason: reason}, n.parent)
	}
}

// fromChild handles a frame from a child.
func (n *node) fromChild(l *link, f frame) {
	d := &dec{b: f.body}
	switch f.typ {
	case msgUp:
		key := collKey{d.u8(), d.u64()}
		n.st.recv(phaseOf(key.kind), f.size())
		cnt := int(d.u32())
		var vals map[int][]byte
		if key.kind == msgAllgather {
			vals = make(map[int][]byte, cnt)
			for i := 0; i < cnt && d.err == nil; i++ {
				pe := d.i32()
				vals[pe] = d.bytes()
			}
		}
		if d.err != nil {
			n.failed(&PeerError{PE: l.pe, Reason: "sent a malformed collective contribution"}, nil)
			return
		}
		n.arrive(key, l.pe, cnt, vals)
	case msgLost:
		n.st.recv(PhaseControl, f.size())
		pe, reason := d.i32(), d.str()
		n.lost(pe, reason)
	case msgPeerFailed: // an abort in the child's subtree
		n.st.recv(PhaseControl, f.size())
		n.failed(decodePeerFailed(f.body), l)
	case msgBye:
		n.st.recv(PhaseControl, f.size())
		n.mu.Lock()
		if !l.bye {
			l.bye = true
			n.byes++
		}
		n.mu.Unlock()
		n.signalBye()
	default:
		n.st.recv(PhaseControl, f.size())
	}
}

func (n *node) signalBye() {
	select {
	case n.byeCh <- struct{}{}:
	default:
	}
}

// childGone handles the end of a child's link.
func (n *node) childGone(l *link, err error) {
	n.mu.Lock()
	quiet := l.bye || n.stopped
	n.mu.Unlock()
	select {
	case <-n.done:
		quiet = true
	default:
	}
	if !quiet {
		n.lost(l.pe, fmt.Sprintf("connection lost: %v", err))
	}
	n.signalBye()
}

// lost passes a dropped link up to the root, which decides (it may wait for the launcher's exit
// report) and floods the failure.
func (n *node) lost(pe int, reason string) {
	if n.parent == nil {
		if n.onLost != nil {
			n.onLost(pe, reason)
		}
		return
	}
	n.parent.write(PhaseControl, newFrame(msgLost, 0).i32(pe).str(reason).finish())
}

// failed records a failure and floods it over the tree: down to every child but the one it came
// from, and up too when it came from below (an abort), so that the root and the rest learn it.
func (n *node) failed(e *PeerError, from *link) {
	n.mu.Lock()
	first := n.failure == nil
	if first {
		n.failure = e
	}
	var to []*link
	if first || e.Aborted {
		for _, c := range n.children {
			if c != from && !c.bye {
				to = append(to, c)
			}
		}
		if n.parent != nil && from != n.parent && (from != nil || e.Aborted) {
			to = append(to, n.parent)
		}
	}
	n.mu.Unlock()
	if n.onFail != nil && (first || e.Aborted) {
		n.onFail(e)
	}
	if len(to) == 0 {
		n.signalBye()
		return
	}
	msg := failFrame(e)
	for _, l := range to {
		l.write(PhaseControl, msg)
	}
	n.signalBye()
}

// contribute is the local PE's arrival at a collective; the result comes on the channel.
func (n *node) contribute(key collKey, val []byte) (chan [][]byte, error) {
	n.mu.Lock()
	c := n.coll(key)
	if c.own {
		n.mu.Unlock()
		return nil, fmt.Errorf("PE %d arrived twice at collective %d", n.pe, key.seq)
	}
	c.own = true
	c.n++
	if key.kind == msgAllgather {
		c.vals[n.pe] = val
	}
	up := n.complete(key, c)
	n.mu.Unlock()
	n.sendUp(key, up)
	return c.result, nil
}

// arrive is a child's subtree contribution.
func (n *node) arrive(key collKey, child, cnt int, vals map[int][]byte) {
	n.mu.Lock()
	c := n.coll(key)
	if c.arrived[child] {
		n.mu.Unlock()
		return
	}
	c.arrived[child] = true
	c.n += cnt
	for pe, v := range vals {
		c.vals[pe] = v
	}
	up := n.complete(key, c)
	n.mu.Unlock()
	n.sendUp(key, up)
}

func (n *node) coll(key collKey) *treeColl {
	c := n.colls[key]
	if c == nil {
		c = &treeColl{arrived: map[int]bool{}, result: make(chan [][]byte, 1)}
		if key.kind == msgAllgather {
			c.vals = map[int][]byte{}
		}
		n.colls[key] = c
	}
	return c
}

// complete returns the frame to send up (or, at the root, down) once the subtree has arrived.
// Called with n.mu held.
func (n *node) complete(key collKey, c *treeColl) []byte {
	if c.sentUp || c.n < n.shape.subtree(n.pe) {
		return nil
	}
	c.sentUp = true
	if n.pe < 0 {
		body := (&enc{}).u8(key.kind).u64(key.seq)
		if key.kind == msgAllgather {
			vals := make([][]byte, n.shape.n)
			for pe, v := range c.vals {
				vals[pe] = v
			}
			encodeList(body, vals)
		}
		return body.b
	}
	e := newFrame(msgUp, 0).u8(key.kind).u64(key.seq).u32(uint32(c.n))
	if key.kind == msgAllgather {
		pes := make([]int, 0, len(c.vals))
		for pe := range c.vals {
			pes = append(pes, pe)
		}
		slices.Sort(pes)
		for _, pe := range pes {
			e.i32(pe).bytes(c.vals[pe])
		}
		c.vals = nil
	}
	return e.finish()
}

func (n *node) sendUp(key collKey, msg []byte) {
	if msg == nil {
		return
	}
	if n.pe < 0 {
		n.down(key, msg)
		return
	}
	n.parent.write(phaseOf(key.kind), msg)
}

// down delivers a collective's result (body: kind, seq, list) here and to the children.
func (n *node) down(key collKey, body []byte) {
	n.mu.Lock()
	c := n.coll(key)
	delete(n.colls, key)
	kids := make([]*link, 0, len(n.children))
	for _, l := range n.children {
		kids = append(kids, l)
	}
	n.mu.Unlock()
	e := newFrame(msgDown, 0)
	e.b = append(e.b, body...)
	msg := e.finish()
	for _, l := range kids {
		l.write(phaseOf(key.kind), msg)
	}
	if n.pe < 0 {
		return
	}
	var vals [][]byte
	if key.kind == msgAllgather {
		d := &dec{b: body[9:]}
		var err error
		if vals, err = decodeList(d.b); err != nil || len(vals) != n.shape.n {
			n.failed(&PeerError{PE: -1, Reason: fmt.Sprintf("malformed allgather result from the bootstrap tree (%d values, %v)", len(vals), err)}, nil)
			return
		}
	}
	c.result <- vals
}

// missing says what collective key waits for at this node, for a timeout message.
func (n *node) missing(key collKey) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.colls[key]
	if c == nil {
		return "the other PEs"
	}
	var kids []int
	for _, pe := range n.shape.children(n.pe) {
		if !c.arrived[pe] {
			kids = append(kids, pe)
		}
	}
	if len(kids) > 0 {
		return fmt.Sprintf("the subtrees of PEs %v (children of %s in the bootstrap tree)", kids, n.name())
	}
	return fmt.Sprintf("the result from the root via %s's parent (this subtree has arrived; some PE elsewhere has not)", n.name())
}

// kvPut stores a key this node owns and answers its waiters.
func (n *node) kvPut(key string, val []byte) {
	n.mu.Lock()
	n.kv.vals[key] = val
	ws := n.kv.waiters[key]
	delete(n.kv.waiters, key)
	n.mu.Unlock()
	if n.pe < 0 && n.shape.layout != nil && strings.HasPrefix(key, leaderKeyPrefix) {
		n.leaderTable()
	}
	for _, w := range ws {
		if w.l == nil {
			w.ch <- val
		} else {
			w.l.write(PhasePutGet, okFrame(w.id, val))
		}
	}
}

// kvGet returns the value if present, else registers w.
func (n *node) kvGet(key string, w kvWaiter) ([]byte, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if v, ok := n.kv.vals[key]; ok {
		return v, true
	}
	n.kv.waiters[key] = append(n.kv.waiters[key], w)
	return nil, false
}

func (n *node) dropWaiter(key string, ch chan []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ws := n.kv.waiters[key]
	n.kv.waiters[key] = slices.DeleteFunc(ws, func(w kvWaiter) bool { return w.ch == ch })
}

// fromPeer serves a directory client's request.
func (n *node) fromPeer(l *link, f frame) {
	n.st.recv(phaseOf(f.typ), f.size())
	d := &dec{b: f.body}
	switch f.typ {
	case msgPut:
		key, val := d.str(), d.bytes()
		if d.err != nil {
			break
		}
		n.kvPut(key, val)
		l.write(PhasePutGet, okFrame(f.id, nil))
	case msgGet:
		key := d.str()
		if d.err != nil {
			break
		}
		if v, ok := n.kvGet(key, kvWaiter{l: l, id: f.id}); ok {
			l.write(PhasePutGet, okFrame(f.id, v))
		}
	case msgAbort:
		// At the root only: an aborting PE tells the root directly, so that the launcher hears of
		// the abort before the PE's exit, as in star mode.
		status, reason := d.i32(), d.str()
		if d.err != nil || n.pe >= 0 {
			break
		}
		n.failed(&PeerError{PE: l.pe, Aborted: true, Status: status, Reason: reason}, l)
		l.write(PhaseControl, okFrame(f.id, nil))
	default:
		l.write(PhaseControl, errFrame(f.id, fmt.Sprintf("unknown request type %d", f.typ)))
		return
	}
	if d.err != nil || (f.typ == msgAbort && n.pe >= 0) {
		l.write(phaseOf(f.typ), errFrame(f.id, fmt.Sprintf("malformed or misdirected request type %d: %v", f.typ, d.err)))
	}
}

// ownerLink is this PE's link to a directory owner, with its pending requests.
type ownerLink struct {
	ready chan struct{} // closed once dialed (or failed)
	err   error
	l     *link
	mu    sync.Mutex
	next  uint64
	calls map[uint64]pendingCall
	dead  error
}

// ownerOf returns the link to PE pe's directory, dialing it once for every concurrent caller.
func (n *node) ownerOf(ctx context.Context, pe int) (*ownerLink, error) {
	n.mu.Lock()
	o := n.owners[pe]
	if o == nil {
		o = &ownerLink{ready: make(chan struct{}), calls: map[uint64]pendingCall{}}
		n.owners[pe] = o
		n.mu.Unlock()
		var addr string
		if addr, o.err = n.addrOf(ctx, pe); o.err != nil {
			o.err = fmt.Errorf("reaching PE %d, a directory owner: %w", pe, o.err)
		} else {
			o.l, o.err = n.dialRetry(ctx, addr, rolePeer, "reaching a directory owner", fmt.Sprintf("PE %d, a directory owner,", pe))
		}
		if o.err == nil {
			o.l.pe = pe
			n.wg.Add(1)
			go n.readOwner(o)
		} else {
			n.mu.Lock()
			delete(n.owners, pe)
			n.mu.Unlock()
		}
		close(o.ready)
	} else {
		n.mu.Unlock()
	}
	select {
	case <-o.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if o.err != nil {
		return nil, o.err
	}
	return o, nil
}

func (n *node) readOwner(o *ownerLink) {
	defer n.wg.Done()
	var err error
	for {
		var f frame
		if f, err = readFrame(o.l.conn, maxFrame); err != nil {
			break
		}
		o.mu.Lock()
		pc, ok := o.calls[f.id]
		delete(o.calls, f.id)
		o.mu.Unlock()
		n.st.recv(phaseOf(pc.typ), f.size())
		if ok {
			pc.ch <- decodeReply(f.body)
		}
	}
	n.st.conns.Add(-1)
	o.mu.Lock()
	o.dead = &PeerError{PE: o.l.pe, Reason: fmt.Sprintf("lost the connection to it as a directory owner: %v", err)}
	calls := o.calls
	o.calls = nil
	o.mu.Unlock()
	for _, pc := range calls {
		pc.ch <- reply{data: []byte(o.dead.Error())}
	}
	n.mu.Lock()
	if n.owners[o.l.pe] == o {
		delete(n.owners, o.l.pe)
	}
	n.mu.Unlock()
}

// request sends one directory request to its owner; the reply comes on the channel.
func (o *ownerLink) request(typ byte, build func(*enc)) (uint64, chan reply, error) {
	o.mu.Lock()
	if o.dead != nil {
		err := o.dead
		o.mu.Unlock()
		return 0, nil, err
	}
	o.next++
	id := o.next
	ch := make(chan reply, 1)
	o.calls[id] = pendingCall{ch, typ}
	o.mu.Unlock()
	e := newFrame(typ, id)
	build(e)
	if err := o.l.write(phaseOf(typ), e.finish()); err != nil {
		o.forget(id)
		return 0, nil, &PeerError{PE: o.l.pe, Reason: "writing to it as a directory owner: " + err.Error()}
	}
	return id, ch, nil
}

func (o *ownerLink) forget(id uint64) {
	o.mu.Lock()
	if o.calls != nil {
		delete(o.calls, id)
	}
	o.mu.Unlock()
}

// abortAtRoot tells the root of an abort over a link of its own and waits for its answer (at
// most the timeout), so that the launcher has the abort before it sees this PE's exit.
func (n *node) abortAtRoot(rootAddr string, status int, reason string) {
	deadline := time.Now().Add(n.timeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	l, err := n.dialLink(ctx, rootAddr, rolePeer, deadline)
	if err != nil {
		return // the flood over the tree still carries it
	}
	defer func() {
		l.conn.Close()
		n.st.conns.Add(-1)
	}()
	if l.write(PhaseControl, newFrame(msgAbort, 1).i32(status).str(reason).finish()) != nil {
		return
	}
	l.conn.SetReadDeadline(deadline)
	if f, err := readFrame(l.conn, maxHelloFrame); err == nil {
		n.st.recv(PhaseControl, f.size())
	}
}

// leave is Close's tree part: wait until every child's subtree has said goodbye, say goodbye to
// the parent, and wait for the root's msgDone, each at most until deadline.
func (n *node) leave(deadline time.Time) error {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	want := len(n.shape.children(n.pe))
	for {
		n.mu.Lock()
		byes, failed := n.byes, n.failure != nil
		n.mu.Unlock()
		if failed {
			return nil
		}
		if byes >= want {
			break
		}
		select {
		case <-n.byeCh:
		case <-t.C:
			return &TimeoutError{After: n.timeout, Waiting: n.waitingByes()}
		}
	}
	if n.pe < 0 {
		n.finish()
		return nil
	}
	n.parent.write(PhaseControl, newFrame(msgBye, 0).finish())
	for {
		select {
		case <-n.done:
			return nil
		case <-n.byeCh: // a failure wakes it too
			n.mu.Lock()
			failed := n.failure != nil
			n.mu.Unlock()
			if failed {
				return nil
			}
		case <-t.C:
			return &TimeoutError{After: n.timeout, Waiting: "the other PEs to close (the root's goodbye wave)"}
		}
	}
}

func (n *node) waitingByes() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var kids []int
	for _, pe := range n.shape.children(n.pe) {
		if l := n.children[pe]; l == nil || !l.bye {
			kids = append(kids, pe)
		}
	}
	return fmt.Sprintf("the subtrees of PEs %v (children of %s in the bootstrap tree) to close", kids, n.name())
}

// finish is msgDone: pass it down; from now on no link's end is a failure.
func (n *node) finish() {
	n.doneOnce.Do(func() {
		close(n.done)
		n.mu.Lock()
		kids := make([]*link, 0, len(n.children))
		for _, l := range n.children {
			kids = append(kids, l)
		}
		n.mu.Unlock()
		msg := newFrame(msgDone, 0).finish()
		for _, l := range kids {
			l.write(PhaseControl, msg)
		}
	})
}

// stop closes the listener and every link and waits for the node's goroutines.
func (n *node) stop() {
	n.mu.Lock()
	n.stopped = true
	links := make([]*link, 0, len(n.children)+len(n.inbound)+len(n.owners)+1)
	for _, l := range n.children {
		links = append(links, l)
	}
	links = append(links, n.inbound...)
	relays, lns := n.relays, n.lns
	owners := make([]*ownerLink, 0, len(n.owners))
	for _, o := range n.owners {
		owners = append(owners, o)
	}
	n.mu.Unlock()
	for _, o := range owners {
		<-o.ready
		if o.l != nil {
			links = append(links, o.l)
		}
	}
	if n.parent != nil {
		links = append(links, n.parent)
	}
	for _, ln := range lns {
		ln.Close()
	}
	for _, l := range links {
		l.conn.Close()
	}
	for _, c := range relays {
		c.Close()
	}
	n.wg.Wait()
}
