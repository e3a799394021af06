package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// treeJob starts a server and npes tree-mode clients over real abstract unix sockets (the PEs)
// and loopback TCP (the root), all joining at once.
func treeJob(t *testing.T, npes, k int) (*Server, []*Client) {
	t.Helper()
	return treeJobLayout(t, npes, k, nil)
}

// treeJobLayout is treeJob with the two-level tree over layout's nodes (hier.go): node leaders
// listen on loopback TCP, and a PE reaches another node's PEs only through its leader's relay
// (all of it in one network namespace, but addressed as if the nodes were apart).
func treeJobLayout(t *testing.T, npes, k int, layout []int) (*Server, []*Client) {
	t.Helper()
	return treeJobLayoutTimeout(t, npes, k, layout, testTimeout)
}

func treeJobLayoutTimeout(t *testing.T, npes, k int, layout []int, timeout time.Duration) (*Server, []*Client) {
	t.Helper()
	token := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
	s, err := NewServerConfig("127.0.0.1:0", npes, token, Config{Layout: layout})
	if err != nil {
		t.Fatal(err)
	}
	s.SetLogger(t.Logf)
	t.Cleanup(func() { s.Close() })
	cfg := Config{PEAddr: UnixPEAddr(token), Fanout: k, Layout: layout, LeaderAddr: func(int) string { return "127.0.0.1:0" }}
	cs := make([]*Client, npes)
	errs := make([]error, npes)
	var wg sync.WaitGroup
	for pe := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs[pe], errs[pe] = DialConfig(context.Background(), Rank{PE: pe, NPEs: npes, Addr: s.Addr(), Token: token, Source: "test"}, timeout, cfg)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		t.Cleanup(func() { c.Close() })
	}
	return s, cs
}

func TestTreeShape(t *testing.T) {
	for _, tc := range []struct {
		n, k   int
		layout []int
	}{{1, 2, nil}, {7, 2, nil}, {40, 3, nil}, {1000, 8, nil},
		{1, 2, []int{1}}, {6, 2, []int{1, 1, 1, 1, 1, 1}}, {13, 2, []int{5, 1, 7}}, {1000, 8, []int{100, 300, 50, 50, 100, 100, 100, 100, 50, 50}},
		{4096, 8, func() []int {
			l := make([]int, 64)
			for i := range l {
				l[i] = 64
			}
			return l
		}()}} {
		sh, err := newShape(tc.n, tc.k, tc.layout)
		if err != nil {
			t.Fatal(err)
		}
		seen := make([]int, tc.n)
		var walk func(p int) int
		walk = func(p int) int {
			size := 1
			for _, c := range sh.children(p) {
				if sh.parent(c) != p {
					t.Fatalf("n=%d k=%d: parent(%d) = %d, want %d", tc.n, tc.k, c, sh.parent(c), p)
				}
				seen[c]++
				size += walk(c)
			}
			if got, want := sh.subtree(p), size-btoi(p < 0); got != want {
				t.Fatalf("n=%d k=%d: subtree(%d) = %d, want %d", tc.n, tc.k, p, got, want)
			}
			return size
		}
		walk(-1)
		if tc.layout != nil { // only leaders' links cross nodes
			for pe := range tc.n {
				if p := sh.parent(pe); p >= 0 && !sh.isLeader(pe) {
					if a, _ := sh.locate(pe); func() bool { b, _ := sh.locate(p); return a != b }() {
						t.Fatalf("layout %v: PE %d's parent %d is on another node", tc.layout, pe, p)
					}
				}
			}
		}
		for pe, n := range seen {
			if n != 1 {
				t.Fatalf("n=%d k=%d: PE %d is in the tree %d times", tc.n, tc.k, pe, n)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestTreeCollectivesAndDirectory(t *testing.T) {
	const npes, k = 40, 3
	s, cs := treeJob(t, npes, k)
	ctx := context.Background()
	each(t, cs, func(pe int, c *Client) error {
		// Get before the key exists: it waits at the owner.
		got := make(chan error, 1)
		go func() {
			v, err := c.Get(ctx, fmt.Sprintf("addr/%d", (pe+1)%npes))
			if err == nil && string(v) != fmt.Sprintf("pe%d", (pe+1)%npes) {
				err = fmt.Errorf("PE %d: Get = %q", pe, v)
			}
			got <- err
		}()
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		if err := c.Put(ctx, fmt.Sprintf("addr/%d", pe), []byte(fmt.Sprintf("pe%d", pe))); err != nil {
			return err
		}
		if err := <-got; err != nil {
			return err
		}
		for round := range 3 {
			vals, err := c.Allgather(ctx, []byte(fmt.Sprintf("%d.%d", pe, round)))
			if err != nil {
				return err
			}
			for q, v := range vals {
				if string(v) != fmt.Sprintf("%d.%d", q, round) {
					return fmt.Errorf("PE %d round %d: value of PE %d = %q", pe, round, q, v)
				}
			}
			if err := c.Barrier(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	// Structure: the root talked only to its k children, no PE to more than its parent, k
	// children and a few directory links.
	if st := s.Stats(); st.Mode != "tree" || st.Phases[PhaseConnect].MsgsRecv != k {
		t.Errorf("root: %+v, want tree mode and %d joins", st, k)
	}
	for pe, c := range cs {
		st := c.Stats()
		if st.Mode != "tree" || st.Phases[PhaseBarrier].MsgsSent > 4*(k+1) || st.Phases[PhaseBarrier].MsgsRecv > 4*(k+1) || st.Conns > k+1+8 {
			t.Errorf("PE %d: %+v", pe, st)
		}
	}
	each(t, cs, func(pe int, c *Client) error { return c.Close() })
	select {
	case f := <-s.Failures():
		t.Errorf("an orderly Close was reported as %+v", f)
	default:
	}
}

func TestTreeDeadPEFailsTheOthers(t *testing.T) {
	const npes, k, dead = 30, 3, 2 // PE 2 is interior: its children are PEs 9, 10, 11
	s, cs := treeJob(t, npes, k)
	errs := make(chan error, npes)
	for pe, c := range cs {
		if pe != dead {
			go func() { errs <- c.Barrier(context.Background()) }()
		}
	}
	// Die: every link drops at once, no goodbye.
	n := cs[dead].tree
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	n.stop()
	cs[dead].fail(errors.New("killed by the test")) // its own Close then waits for nobody
	for range npes - 1 {
		err := <-errs
		var pe *PeerError
		if !errors.As(err, &pe) || pe.PE != dead || !strings.Contains(err.Error(), "PE 2 died") {
			t.Errorf("pending Barrier: %v, want one naming dead PE 2", err)
		}
	}
	select {
	case f := <-s.Failures():
		if f.PE != dead {
			t.Errorf("Failure %+v", f)
		}
	case <-time.After(testTimeout):
		t.Fatal("the root reported no failure")
	}
}

func TestTreeAbort(t *testing.T) {
	const npes, k, aborter = 30, 2, 25
	s, cs := treeJob(t, npes, k)
	errs := make(chan error, npes)
	for pe, c := range cs {
		if pe != aborter {
			go func() { _, err := c.Get(context.Background(), "never"); errs <- err }()
		}
	}
	cs[aborter].Abort(7, "bad input")
	for range npes - 1 {
		if err := <-errs; !errors.Is(err, ErrPeerFailed) || !strings.Contains(err.Error(), "PE 25 aborted the job with status 7: bad input") {
			t.Errorf("pending Get after Abort: %v", err)
		}
	}
	for pe, c := range cs {
		if pe == aborter {
			continue
		}
		select {
		case st := <-c.Exits():
			if st != 7 {
				t.Errorf("PE %d: Exits delivered %d", pe, st)
			}
		case <-time.After(testTimeout):
			t.Fatalf("PE %d: Exits delivered nothing", pe)
		}
	}
	// The root had the abort (directly, before Abort returned), and reports it once.
	if f := <-s.Failures(); f.PE != aborter || !f.Aborted || f.Status != 7 {
		t.Errorf("Failure %+v", f)
	}
	select {
	case f := <-s.Failures():
		t.Errorf("a second Failure %+v", f)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestTreeExitedIsReported(t *testing.T) {
	const npes, k = 20, 4
	s, cs := treeJob(t, npes, k)
	s.Exited(13, "was killed by signal SIGKILL", 137)
	for pe, c := range cs {
		<-c.Failed()
		if pe != 13 && !strings.Contains(c.Err().Error(), "PE 13 was killed by signal SIGKILL") {
			t.Errorf("PE %d: %v", pe, c.Err())
		}
	}
}

// TestTreeAcrossNodes: the two-level tree over three nodes of 5, 1 and 7 PEs (fanout 2: the
// leader tree has depth 2, node 2's leader under node 1's): collectives, and directory keys
// whose owners sit on other nodes (reached through their leaders' relays); the root handles
// its children's joins and the leaders' registrations, not one message per PE.
func TestTreeAcrossNodes(t *testing.T) {
	layout := []int{5, 1, 7}
	const npes, k = 13, 2
	s, cs := treeJobLayout(t, npes, k, layout)
	ctx := context.Background()
	each(t, cs, func(pe int, c *Client) error {
		for q := range npes { // every PE's key, from every PE: every owner, every node
			if err := c.Put(ctx, fmt.Sprintf("k/%d/%d", pe, q), []byte(fmt.Sprintf("%d>%d", pe, q))); err != nil {
				return err
			}
		}
		for q := range npes {
			v, err := c.Get(ctx, fmt.Sprintf("k/%d/%d", q, pe))
			if err != nil {
				return err
			}
			if string(v) != fmt.Sprintf("%d>%d", q, pe) {
				return fmt.Errorf("PE %d: Get of PE %d's key = %q", pe, q, v)
			}
		}
		vals, err := c.Allgather(ctx, []byte(fmt.Sprint(pe)))
		if err != nil {
			return err
		}
		for q, v := range vals {
			if string(v) != fmt.Sprint(q) {
				return fmt.Errorf("PE %d: value of PE %d = %q", pe, q, v)
			}
		}
		return c.Barrier(ctx)
	})
	// The root: 2 children (the leaders of nodes 0 and 1) join; 3 leaders register (a join of
	// their own, a Put) and 1 reads its parent's address (a Get): 2 + 3*2 + 1 requests.
	st := s.Stats()
	if st.Mode != "tree" || st.Phases[PhaseConnect].MsgsRecv != 2+3 || st.Phases[PhasePutGet].MsgsRecv != 3+1 {
		t.Errorf("root: %+v, want 5 joins and 4 directory requests", st)
	}
	t.Logf("root: %d messages in all (%d joins, %d directory requests)", st.Total().Msgs(), st.Phases[PhaseConnect].MsgsRecv, st.Phases[PhasePutGet].MsgsRecv)
	each(t, cs, func(pe int, c *Client) error { return c.Close() })
	select {
	case f := <-s.Failures():
		t.Errorf("an orderly Close was reported as %+v", f)
	default:
	}
}

// TestTreeLayoutMismatch: a PE with another layout than the root's is refused, naming it.
func TestTreeLayoutMismatch(t *testing.T) {
	token := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
	s, err := NewServerConfig("127.0.0.1:0", 4, token, Config{Layout: []int{2, 2}})
	if err != nil {
		t.Fatal(err)
	}
	s.SetLogger(t.Logf)
	defer s.Close()
	cfg := Config{PEAddr: UnixPEAddr(token), Fanout: 2, Layout: []int{1, 3}, LeaderAddr: func(int) string { return "127.0.0.1:0" }}
	_, err = DialConfig(context.Background(), Rank{PE: 0, NPEs: 4, Addr: s.Addr(), Token: token, Source: "test"}, 5*time.Second, cfg)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "layout") {
		t.Fatalf("Dial with another layout: %v, want a refusal naming the layout", err)
	}
}

// TestTreeRelayOutlivesHandshake: a directory link through another node's leader stays up past
// the handshake's deadline (here 2 s: the job's timeout), with a Get waiting on it when the
// deadline passes (the relay once kept the deadline, cutting every relayed link, and the Gets
// waiting on it, that long after it opened).
func TestTreeRelayOutlivesHandshake(t *testing.T) {
	old := handshakeTimeout
	handshakeTimeout = 100 * time.Millisecond
	t.Cleanup(func() { handshakeTimeout = old })
	const timeout = 2 * time.Second // the handshake's deadline too (node.handshake)
	_, cs := treeJobLayoutTimeout(t, 4, 2, []int{2, 2}, timeout)
	var keys []string // owned by PE 3: PE 0 reaches them through PE 2, node 1's leader
	for i := 0; len(keys) < 2; i++ {
		if k := fmt.Sprintf("relayed/%d", i); owner(k, 4) == 3 {
			keys = append(keys, k)
		}
	}
	first, key := keys[0], keys[1]
	ctx := context.Background()
	if err := cs[0].Put(ctx, first, nil); err != nil { // opens the relayed link
		t.Fatal(err)
	}
	time.Sleep(timeout * 3 / 4)
	got := make(chan error, 1)
	go func() {
		v, err := cs[0].Get(ctx, key) // waits at PE 3 while the handshake's deadline passes
		if err == nil && string(v) != "late" {
			err = fmt.Errorf("Get = %q", v)
		}
		got <- err
	}()
	time.Sleep(timeout / 2)
	if err := cs[3].Put(ctx, key, []byte("late")); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("a Get waiting over the relayed link past the handshake's deadline: %v", err)
	}
	each(t, cs, func(pe int, c *Client) error { return c.Close() })
}

// A collective that the caller's deadline ends (shmem.Init bounds Init by ROX_TIMEOUT) says what
// it was still waiting for, as the client's own timeout does, and is still a deadline.
func TestTreeDeadlineNamesTheMissing(t *testing.T) {
	// The client's own timeout only bounds Close's goodbye wave, which PE 5's absence holds up.
	_, cs := treeJobLayoutTimeout(t, 7, 2, nil, time.Second)
	t.Cleanup(func() { // all at once, each held up by PE 5 for the client's timeout
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
		wg.Wait()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	// PE 5 never arrives: PE 1 (its parent) waits for its subtree, PE 2 for the root's result.
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for pe, c := range cs {
		if pe == 5 {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs[pe] = c.Barrier(ctx) }()
	}
	wg.Wait()
	if err := errs[1]; !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for the subtrees of PEs [5]") {
		t.Errorf("PE 1's barrier: %v, want a deadline naming PE 5's subtree", err)
	}
	if err := errs[2]; !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for the result from the root") {
		t.Errorf("PE 2's barrier: %v, want a deadline naming what it waits for", err)
	}
}

// The rendezvous waits for a PE's hello at least the PEs' ROX_TIMEOUT, not its own fixed bound:
// on a loaded node a PE may connect and only get to write its hello much later, and the server
// refusing it then fails a job that was within its timeout.
func TestBootServerWaitsJobTimeoutForHello(t *testing.T) {
	old := handshakeTimeout
	handshakeTimeout = 50 * time.Millisecond
	t.Cleanup(func() { handshakeTimeout = old })
	t.Setenv("ROX_TIMEOUT", "20s")
	s, err := NewServerConfig("127.0.0.1:0", 1, "tok", Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.SetLogger(t.Logf)
	t.Cleanup(func() { s.Close() })
	conn, err := SysNet.Dial(context.Background(), s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	time.Sleep(10 * handshakeTimeout) // a PE descheduled between its connect and its hello
	conn.SetDeadline(time.Now().Add(testTimeout))
	if _, err := conn.Write(newFrame(msgHello, 0).str("tok").i32(0).i32(1).u32(protocolVersion).finish()); err != nil {
		t.Fatal(err)
	}
	f, err := readFrame(conn, maxHelloFrame)
	if err != nil || f.typ != msgWelcome {
		t.Fatalf("a hello after the server's own handshake bound: %v (message type %d), want a welcome", err, f.typ)
	}
}
