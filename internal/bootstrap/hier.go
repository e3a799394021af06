package bootstrap

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The tree across roxrun's hosts (Config.Layout). A PE's address on another node cannot be
// derived (doc.go), but roxrun knows how many PEs each host runs, in PE order, and passes that
// (ROX_LAYOUT) to every PE and to its rendezvous server. The tree is then two-level (treeShape):
//
//   - Within a node, PEs use the abstract unix sockets of the one-node tree (UnixPEAddr), under
//     their node's leader (its first PE).
//   - Each leader also listens on TCP, and registers that address at the root (a Put of
//     leaderKey(node) over a link of its own); a leader reads its parent leader's address there
//     (a Get), which is all the root serves beyond its k children: O(nodes) messages at Init.
//   - Once every leader has registered, the root sends the table of leader addresses down the
//     leader tree (msgLeaders, O(nodes) bytes per leader, never through the root more than k
//     times); a leader keeps it in its directory, where its node's PEs read the entries they need.
//   - A directory owner on another node is reached through that node's leader: the dialer opens
//     a TCP connection to the leader, asks it to relay to the owner (msgRelay), and the leader
//     splices that connection onto the owner's unix socket. The relayed bytes are not counted in
//     the leader's Stats (they are the two ends' traffic, counted there).

// leaderKeyPrefix starts the directory keys of leader addresses (a NUL: no user key collides).
const leaderKeyPrefix = "\x00roxamen.leader/"

func leaderKey(node int) string { return leaderKeyPrefix + strconv.Itoa(node) }

// newShape is the tree over n PEs with fanout k, two-level when layout is given.
func newShape(n, k int, layout []int) (treeShape, error) {
	t := treeShape{n: n, k: k}
	if layout == nil {
		return t, nil
	}
	sum := 0
	t.starts = make([]int, len(layout))
	for j, c := range layout {
		if c < 1 {
			return treeShape{}, fmt.Errorf("node %d of the layout %v has %d PEs", j, layout, c)
		}
		t.starts[j] = sum
		sum += c
	}
	if sum != n {
		return treeShape{}, fmt.Errorf("the layout %v adds up to %d PEs, the job has %d", layout, sum, n)
	}
	t.layout = layout
	return t, nil
}

// locate returns PE p's node and its index there.
func (t treeShape) locate(p int) (node, local int) {
	j := sort.Search(len(t.starts), func(j int) bool { return t.starts[j] > p }) - 1
	return j, p - t.starts[j]
}

// isLeader says whether PE p is its node's leader (false for every PE of a one-level tree).
func (t treeShape) isLeader(p int) bool {
	if t.layout == nil {
		return false
	}
	_, l := t.locate(p)
	return l == 0
}

// sum identifies the shape's layout in a join, so that PEs with different layouts never join
// one tree (0: no layout).
func (t treeShape) sum() uint64 {
	if t.layout == nil {
		return 0
	}
	h := fnv.New64a()
	for _, c := range t.layout {
		h.Write([]byte(strconv.Itoa(c) + ","))
	}
	return h.Sum64() | 1
}

// relayAddr is how PE pe on another node is dialed: through its leader at leader (HOST:PORT).
func relayAddr(leader string, pe int) string { return "relay:" + leader + "#" + strconv.Itoa(pe) }

// dialVia opens the connection a link runs on: directly, or through a leader's relay.
func (n *node) dialVia(ctx context.Context, addr string) (net.Conn, error) {
	rest, ok := strings.CutPrefix(addr, "relay:")
	if !ok {
		return n.net.Dial(ctx, addr)
	}
	leader, peStr, _ := strings.Cut(rest, "#")
	pe, err := strconv.Atoi(peStr)
	if err != nil {
		return nil, fmt.Errorf("bad relay address %q", addr)
	}
	conn, err := n.net.Dial(ctx, leader)
	if err != nil {
		return nil, err
	}
	msg := newFrame(msgRelay, 0).str(n.token).i32(pe).finish()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetWriteDeadline(dl)
	}
	if _, err := conn.Write(msg); err != nil {
		conn.Close()
		return nil, err
	}
	n.st.sent(PhaseConnect, len(msg))
	return conn, nil
}

// relay serves a msgRelay at a leader: splice conn onto the unix socket of PE pe of this node.
// It returns false when the relay is for this PE itself (the caller serves conn as usual).
func (n *node) relay(conn net.Conn, f frame) (mine bool) {
	n.st.recv(PhaseConnect, f.size())
	d := &dec{b: f.body}
	token, pe := d.bytes(), d.i32()
	if d.err != nil || subtle.ConstantTimeCompare(token, []byte(n.token)) != 1 || n.shape.layout == nil || pe < 0 || pe >= n.shape.n {
		return false // serveConn refuses what comes next, or the connection's end
	}
	if pe == n.pe {
		return true
	}
	mj, _ := n.shape.locate(n.pe)
	if j, _ := n.shape.locate(pe); j != mj {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.handshake())
	target, err := n.net.Dial(ctx, n.localAddr(pe))
	cancel()
	if err != nil {
		return false // the dialer retries: the PE may not be listening yet
	}
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		target.Close()
		return false
	}
	n.relays = append(n.relays, target, conn)
	n.mu.Unlock()
	conn.SetReadDeadline(time.Time{}) // the handshake's: a relayed link lives as long as the job
	done := make(chan struct{})
	go func() {
		io.Copy(target, conn)
		target.Close()
		close(done)
	}()
	io.Copy(conn, target)
	conn.Close()
	<-done
	return false
}

// localAddr is the unix socket of a PE of this node.
func (n *node) localAddr(pe int) string { return n.local(pe) }

// leaderTable is called at the root after each Put of a leader key: once every node's leader
// has registered, the table goes down to the root's children (every one a leader).
func (n *node) leaderTable() {
	m := len(n.shape.layout)
	n.mu.Lock()
	if n.leaders != nil {
		n.mu.Unlock()
		return
	}
	e := newFrame(msgLeaders, 0).u32(uint32(m))
	for j := range m {
		v, ok := n.kv.vals[leaderKey(j)]
		if !ok {
			n.mu.Unlock()
			return
		}
		e.bytes(v)
	}
	n.leaders = e.finish()
	kids := n.readyLeaders()
	msg := n.leaders
	n.mu.Unlock()
	for _, l := range kids {
		l.write(PhaseConnect, msg)
	}
}

// readyLeaders are the child links that are node leaders and have been welcomed. Called with
// n.mu held.
func (n *node) readyLeaders() []*link {
	var out []*link
	for pe, l := range n.children {
		if l.ready && n.shape.isLeader(pe) {
			out = append(out, l)
		}
	}
	return out
}

// gotLeaders is msgLeaders at a leader: keep the table in the directory (its node's PEs read it
// there) and pass it down to the child leaders.
func (n *node) gotLeaders(f frame, raw []byte) {
	n.st.recv(PhaseConnect, f.size())
	d := &dec{b: f.body}
	cnt := int(d.u32())
	if d.err != nil || cnt != len(n.shape.layout) {
		n.failed(&PeerError{PE: -1, Reason: fmt.Sprintf("malformed table of node leaders (%d entries for %d nodes)", cnt, len(n.shape.layout))}, nil)
		return
	}
	addrs := make([][]byte, cnt)
	for j := range cnt {
		addrs[j] = d.bytes()
	}
	if d.err != nil {
		n.failed(&PeerError{PE: -1, Reason: "malformed table of node leaders: " + d.err.Error()}, nil)
		return
	}
	for j, a := range addrs {
		n.kvPut(leaderKey(j), a)
	}
	n.mu.Lock()
	n.leaders = raw
	kids := n.readyLeaders()
	n.mu.Unlock()
	for _, l := range kids {
		l.write(PhaseConnect, raw)
	}
}

// pickLeader chooses which of a leader's published addresses (reachableAddrs) to dial.
func pickLeader(rec string) (string, error) {
	addrs := strings.Split(rec, ",")
	if a, err := pickAddr(addrs, false); err == nil {
		return a, nil
	}
	if len(addrs) == 0 || addrs[0] == "" {
		return "", errors.New("a node leader published no address")
	}
	return addrs[0], nil // the same machine (two of roxrun's hosts on one): any will do
}

// treeAddrs is a hierarchical tree's addressing for one PE (joinTree): same node, the unix
// socket; another node, its leader's relay, the leader's address read once from this node's
// leader (or, at a leader, from its own copy of the table).
type treeAddrs struct {
	c     *Client
	node  int
	cache map[int]string // node -> leader HOST:PORT
}

func (a *treeAddrs) addrOf(ctx context.Context, pe int) (string, error) {
	n := a.c.tree
	if pe < 0 {
		return a.c.addr, nil
	}
	j, _ := n.shape.locate(pe)
	if j == a.node {
		return n.localAddr(pe), nil
	}
	n.mu.Lock()
	leader, ok := a.cache[j]
	n.mu.Unlock()
	if !ok {
		rec, err := a.c.getAt(ctx, "reading a node leader's address", n.shape.starts[a.node], leaderKey(j))
		if err != nil {
			return "", err
		}
		if leader, err = pickLeader(string(rec)); err != nil {
			return "", err
		}
		n.mu.Lock()
		a.cache[j] = leader
		n.mu.Unlock()
	}
	return relayAddr(leader, pe), nil
}

// joinLeader is a leader's part of joinTree: listen on TCP, register at the root, and return
// the parent leader's address (the root's, for the first k leaders).
func (c *Client) joinLeader(ctx context.Context, call string, nw Network, listen string) (string, error) {
	n := c.tree
	ln, err := nw.Listen(listen)
	if err != nil {
		return "", fmt.Errorf("%s: listening on TCP for the other nodes' leaders: %w", call, err)
	}
	n.listen(ln)
	pub := ln.Addr().String()
	if host, _, _ := net.SplitHostPort(listen); nw == SysNet && host == "" {
		addrs, err := reachableAddrs("", pub)
		if err != nil {
			return "", fmt.Errorf("%s: %w", call, err)
		}
		pub = strings.Join(addrs, ",")
	}
	j, _ := n.shape.locate(c.rank.PE)
	if err := c.putAt(ctx, "registering this node's leader at the root", -1, leaderKey(j), []byte(pub)); err != nil {
		return "", err
	}
	p := n.shape.parent(c.rank.PE)
	if p < 0 {
		return c.addr, nil
	}
	pj, _ := n.shape.locate(p)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rec, err := c.getAt(ctx, "reading its parent leader's address at the root", -1, leaderKey(pj))
	if err != nil {
		return "", err
	}
	return pickLeader(string(rec))
}

// tcpListen is where a leader listens for the other nodes: every interface, any port.
const tcpListen = ":0"

// frameBytes is f as it came on the wire (to pass it on unchanged).
func frameBytes(f frame) []byte {
	e := newFrame(f.typ, f.id)
	e.b = append(e.b, f.body...)
	return e.finish()
}
