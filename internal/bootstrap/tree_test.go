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
	token := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
	s, err := NewServer("127.0.0.1:0", npes, token)
	if err != nil {
		t.Fatal(err)
	}
	s.SetLogger(t.Logf)
	t.Cleanup(func() { s.Close() })
	cfg := Config{PEAddr: UnixPEAddr(token), Fanout: k}
	cs := make([]*Client, npes)
	errs := make([]error, npes)
	var wg sync.WaitGroup
	for pe := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs[pe], errs[pe] = DialConfig(context.Background(), Rank{PE: pe, NPEs: npes, Addr: s.Addr(), Token: token, Source: "test"}, testTimeout, cfg)
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
	for _, tc := range []struct{ n, k int }{{1, 2}, {7, 2}, {40, 3}, {1000, 8}} {
		sh := treeShape{tc.n, tc.k}
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
