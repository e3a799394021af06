package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const testToken = "test-token"

// testTimeout is long enough never to fire in a passing test on a loaded machine; tests that
// exercise timeouts use their own short one.
const testTimeout = 30 * time.Second

func startServer(t *testing.T, npes int) *Server {
	t.Helper()
	s, err := NewServer("127.0.0.1:0", npes, testToken)
	if err != nil {
		t.Fatal(err)
	}
	s.SetLogger(t.Logf)
	t.Cleanup(func() { s.Close() })
	return s
}

func dialPE(t *testing.T, addr string, pe, npes int, timeout time.Duration) *Client {
	t.Helper()
	c, err := Dial(context.Background(), Rank{PE: pe, NPEs: npes, Addr: addr, Token: testToken, Source: "test"}, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// job starts a server and npes clients on loopback.
func job(t *testing.T, npes int, timeout time.Duration) (*Server, []*Client) {
	t.Helper()
	s := startServer(t, npes)
	cs := make([]*Client, npes)
	for pe := range cs {
		cs[pe] = dialPE(t, s.Addr(), pe, npes, timeout)
	}
	return s, cs
}

// each runs f on every PE concurrently and fails the test with the first error.
func each(t *testing.T, cs []*Client, f func(pe int, c *Client) error) {
	t.Helper()
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for pe, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[pe] = f(pe, c)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestAllgather(t *testing.T) {
	_, cs := job(t, 5, testTimeout)
	ctx := context.Background()
	each(t, cs, func(pe int, c *Client) error {
		for round := 0; round < 3; round++ {
			vals, err := c.Allgather(ctx, []byte(fmt.Sprintf("pe%d-round%d", pe, round)))
			if err != nil {
				return err
			}
			for from, v := range vals {
				if want := fmt.Sprintf("pe%d-round%d", from, round); string(v) != want {
					return fmt.Errorf("PE %d round %d: value from PE %d is %q, want %q", pe, round, from, v, want)
				}
			}
		}
		// Empty and large contributions.
		vals, err := c.Allgather(ctx, make([]byte, pe*100000))
		if err != nil {
			return err
		}
		for from, v := range vals {
			if len(v) != from*100000 {
				return fmt.Errorf("PE %d: value from PE %d has %d bytes", pe, from, len(v))
			}
		}
		return nil
	})
}

func TestBarrierManyRounds(t *testing.T) {
	const npes, rounds = 4, 1000
	_, cs := job(t, npes, testTimeout)
	var arrived [rounds]atomic.Int32
	each(t, cs, func(pe int, c *Client) error {
		for r := 0; r < rounds; r++ {
			arrived[r].Add(1)
			if err := c.Barrier(context.Background()); err != nil {
				return err
			}
			// A barrier that returned early would let this PE see a round not everyone reached.
			if n := arrived[r].Load(); n != npes {
				return fmt.Errorf("PE %d left barrier %d when only %d PEs had arrived", pe, r, n)
			}
		}
		return nil
	})
}

func TestPutGet(t *testing.T) {
	const npes = 4
	_, cs := job(t, npes, testTimeout)
	ctx := context.Background()
	each(t, cs, func(pe int, c *Client) error {
		// PE 0 asks for every key before the others put theirs: Get must wait.
		if pe != 0 {
			time.Sleep(20 * time.Millisecond)
		}
		if err := c.Put(ctx, fmt.Sprintf("addr/%d", pe), []byte{byte(pe), 42}); err != nil {
			return err
		}
		for from := 0; from < npes; from++ {
			v, err := c.Get(ctx, fmt.Sprintf("addr/%d", from))
			if err != nil {
				return err
			}
			if !slices.Equal(v, []byte{byte(from), 42}) {
				return fmt.Errorf("PE %d: addr/%d = %v", pe, from, v)
			}
		}
		return nil
	})
	// An empty value is a value, not a missing key.
	if err := cs[1].Put(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if v, err := cs[2].Get(ctx, "empty"); err != nil || len(v) != 0 {
		t.Fatalf("Get(empty) = %v, %v", v, err)
	}
}

func TestWrongTokenRefused(t *testing.T) {
	s := startServer(t, 2)
	var mu sync.Mutex
	var logged []string
	s.SetLogger(func(format string, args ...any) {
		mu.Lock()
		logged = append(logged, fmt.Sprintf(format, args...))
		mu.Unlock()
	})
	_, err := Dial(context.Background(), Rank{PE: 1, NPEs: 2, Addr: s.Addr(), Token: "not-the-token"}, testTimeout)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "bad job token") || !strings.Contains(err.Error(), "PE 1") {
		t.Fatalf("Dial with a wrong token: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) != 1 || !strings.HasPrefix(logged[0], "bootstrap: refused connection from 127.0.0.1:") ||
		!strings.HasSuffix(logged[0], ": bad job token") {
		t.Fatalf("server log %q", logged)
	}
}

func TestRefusals(t *testing.T) {
	s := startServer(t, 2)
	dialPE(t, s.Addr(), 0, 2, testTimeout)
	for _, tc := range []struct {
		name string
		r    Rank
		want string
	}{
		{"duplicate PE", Rank{PE: 0, NPEs: 2}, "PE 0 already joined"},
		{"wrong size", Rank{PE: 1, NPEs: 3}, "PE 1 says the job has 3 PEs, the server was started for 2"},
	} {
		tc.r.Addr, tc.r.Token = s.Addr(), testToken
		_, err := Dial(context.Background(), tc.r, testTimeout)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrRefused mentioning %q", tc.name, err, tc.want)
		}
	}
	// The slot of a refused duplicate is still free for the real PE 1.
	dialPE(t, s.Addr(), 1, 2, testTimeout)
}

func TestDialRejectsBadRank(t *testing.T) {
	for _, r := range []Rank{
		{PE: 2, NPEs: 2, Addr: "127.0.0.1:1", Token: "x"},
		{PE: -1, NPEs: 2, Addr: "127.0.0.1:1", Token: "x"},
		{PE: 0, NPEs: 2, Addr: "", Token: "x", Source: "ompi"},
		{PE: 0, NPEs: 2, Addr: "127.0.0.1:1", Token: ""},
	} {
		if _, err := Dial(context.Background(), r, time.Second); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("PE %d", r.PE)) {
			t.Errorf("Dial(%+v) = %v, want an error naming the PE", r, err)
		}
	}
	if _, err := Dial(context.Background(), Rank{PE: 0, NPEs: 1, Addr: "127.0.0.1:1", Token: "x"}, 0); err == nil {
		t.Error("Dial with a zero timeout succeeded")
	}
}

func TestStrayConnectionRefused(t *testing.T) {
	s, cs := job(t, 2, testTimeout)
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	// A frame claiming 1 GiB must not be read, let alone allocated.
	conn.Write([]byte{0, 0, 0, 0x40, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f, err := readFrame(conn, maxHelloFrame)
	conn.Close()
	if err != nil || f.typ != msgRefuse {
		t.Fatalf("stray connection got %+v, %v; want a refusal", f, err)
	}
	// The job is unaffected.
	each(t, cs, func(_ int, c *Client) error { return c.Barrier(context.Background()) })
}

// killConn drops a client's connection without a goodbye, as a crashed process would.
func killConn(c *Client) { c.conn.Close() }

func TestDeadPEFailsTheOthers(t *testing.T) {
	const npes, dead = 4, 2
	s, cs := job(t, npes, testTimeout)
	errs := make(chan error, npes)
	for pe, c := range cs {
		if pe == dead {
			continue
		}
		go func() { errs <- c.Barrier(context.Background()) }()
	}
	killConn(cs[dead])
	for i := 0; i < npes-1; i++ {
		err := <-errs
		var pe *PeerError
		if !errors.As(err, &pe) || pe.PE != dead || !strings.Contains(err.Error(), "PE 2 died (connection lost)") ||
			!strings.Contains(err.Error(), "Barrier on PE") {
			t.Errorf("pending Barrier: %v, want one naming dead PE 2", err)
		}
	}
	for pe, c := range cs {
		if pe == dead {
			continue
		}
		<-c.Failed()
		if got, want := c.Err().Error(), "bootstrap: PE 2 died (connection lost)"; got != want {
			t.Errorf("PE %d: Err() = %q, want %q", pe, got, want)
		}
		// Later calls fail at once, naming the dead PE.
		if _, err := c.Get(context.Background(), "never"); !errors.Is(err, ErrPeerFailed) || !strings.Contains(err.Error(), "PE 2 died") {
			t.Errorf("PE %d: later Get: %v", pe, err)
		}
	}
	select {
	case f := <-s.Failures():
		if f.PE != dead || !strings.Contains(f.Reason, "connection lost") {
			t.Errorf("Failure %+v", f)
		}
	case <-time.After(testTimeout):
		t.Fatal("server reported no failure")
	}
	// The survivors leave after the failure: that is no further death.
	for pe, c := range cs {
		if pe != dead {
			c.Close()
		}
	}
	// Every PE has now left or failed, so whatever the server reports is already in Failures.
	select {
	case <-s.left:
	case <-time.After(testTimeout):
		t.Fatal("the server did not see every PE leave")
	}
	select {
	case f := <-s.Failures():
		t.Errorf("a survivor's Close after the failure was reported as %+v", f)
	default:
	}
}

func TestAbort(t *testing.T) {
	const npes = 3
	s, cs := job(t, npes, testTimeout)
	errs := make(chan error, npes)
	for _, c := range cs[1:] {
		go func() { _, err := c.Get(context.Background(), "never"); errs <- err }()
	}
	cs[0].Abort(7, "bad input on PE 0")
	for range cs[1:] {
		err := <-errs
		if !errors.Is(err, ErrPeerFailed) || !strings.Contains(err.Error(), "PE 0 aborted the job with status 7: bad input on PE 0") {
			t.Errorf("pending Get after Abort: %v", err)
		}
	}
	for pe, c := range cs[1:] {
		select {
		case st := <-c.Exits():
			if st != 7 {
				t.Errorf("PE %d: Exits delivered %d, want 7", pe+1, st)
			}
		case <-time.After(testTimeout):
			t.Fatalf("PE %d: Exits delivered nothing", pe+1)
		}
	}
	if err := cs[0].Barrier(context.Background()); !errors.Is(err, ErrPeerFailed) {
		t.Errorf("Barrier after own Abort: %v", err)
	}
	if f := <-s.Failures(); f.PE != 0 || !strings.Contains(f.Reason, "aborted with status 7") {
		t.Errorf("Failure %+v", f)
	}
}

func TestTimeouts(t *testing.T) {
	_, cs := job(t, 4, 300*time.Millisecond)
	err := cs[2].Barrier(context.Background())
	var te *TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, ErrTimeout) {
		t.Fatalf("lonely Barrier: %v, want a timeout", err)
	}
	if want := "bootstrap: Barrier on PE 2: timed out after 300ms waiting for PEs [0 1 3]"; err.Error() != want {
		t.Errorf("got  %q\nwant %q", err, want)
	}
	// PE 1 joins the allgather: only 0 and 3 are missing.
	done := make(chan error)
	go func() { _, err := cs[1].Allgather(context.Background(), nil); done <- err }()
	_, err = cs[2].Allgather(context.Background(), nil)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "Allgather #0 on PE 2") {
		t.Errorf("Allgather: %v", err)
	}
	if err1 := <-done; !strings.Contains(err.Error()+err1.Error(), "waiting for PEs [0 3]") {
		t.Errorf("Allgather timeouts %q and %q do not name PEs [0 3]", err, err1)
	}
	_, err = cs[0].Get(context.Background(), "nobody-puts-this")
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), `Get("nobody-puts-this") on PE 0: timed out after 300ms waiting for key "nobody-puts-this"`) {
		t.Errorf("Get: %v", err)
	}
	// The context ends a call before the timeout.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := cs[3].Barrier(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Barrier with a cancelled context: %v", err)
	}
}

func TestDialTimesOut(t *testing.T) {
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = Dial(context.Background(), Rank{PE: 1, NPEs: 2, Addr: addr, Token: "x"}, 200*time.Millisecond)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "Dial on PE 1") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Dial to nothing: %v", err)
	}
}

func TestCloseIsNotAFailure(t *testing.T) {
	s, cs := job(t, 3, testTimeout)
	each(t, cs, func(_ int, c *Client) error { return c.Barrier(context.Background()) })
	if err := cs[1].Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cs[1].Get(context.Background(), "x"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	// The others keep working with each other.
	if err := cs[0].Put(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, err := cs[2].Get(context.Background(), "k"); err != nil || string(v) != "v" {
		t.Fatalf("Get after a peer's Close: %q, %v", v, err)
	}
	select {
	case f := <-s.Failures():
		t.Fatalf("a clean Close was reported as %+v", f)
	default:
	}
	if cs[0].Err() != nil || cs[2].Err() != nil {
		t.Fatalf("Err after a clean Close: %v, %v", cs[0].Err(), cs[2].Err())
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestHostedServer(t *testing.T) {
	const npes = 3
	addr := freePort(t)
	cs := make([]*Client, npes)
	errs := make([]error, npes)
	var wg sync.WaitGroup
	// The others start dialing before PE 0 hosts: Dial retries until the server is up.
	for pe := npes - 1; pe >= 0; pe-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs[pe], errs[pe] = Dial(context.Background(), Rank{PE: pe, NPEs: npes, Addr: addr, Token: testToken, Host: pe == 0}, testTimeout)
		}()
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	each(t, cs, func(pe int, c *Client) error {
		vals, err := c.Allgather(context.Background(), []byte{byte(pe)})
		if err == nil && !slices.EqualFunc(vals, [][]byte{{0}, {1}, {2}}, slices.Equal) {
			err = fmt.Errorf("allgather %v", vals)
		}
		return err
	})
	// PE 0's server goes away without goodbyes: the others name PE 0.
	cs[0].server.Close()
	for pe, c := range cs[1:] {
		<-c.Failed()
		if err := c.Err(); !errors.Is(err, ErrPeerFailed) || !strings.Contains(err.Error(), "PE 0 died (lost the connection to the rendezvous server it hosted") {
			t.Errorf("PE %d: %v", pe+1, err)
		}
	}
	for _, c := range cs {
		c.Close()
	}
}

func TestHostCloseWaitsForOthers(t *testing.T) {
	addr := freePort(t)
	host, err := Dial(context.Background(), Rank{PE: 0, NPEs: 2, Addr: addr, Token: testToken, Host: true}, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	other := dialPE(t, addr, 1, 2, testTimeout)
	closed := make(chan error)
	go func() { closed <- host.Close() }()
	// PE 1 still works after PE 0 started closing, until it leaves itself.
	if err := other.Put(context.Background(), "late", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestHostCloseWaitsForLastAck: the last PE's goodbye is acknowledged before the hosting PE's
// Close takes the server down, however late the acknowledgement is written.
func TestHostCloseWaitsForLastAck(t *testing.T) {
	byeAckDelay = 100 * time.Millisecond
	defer func() { byeAckDelay = 0 }()
	addr := freePort(t)
	host, err := Dial(context.Background(), Rank{PE: 0, NPEs: 2, Addr: addr, Token: testToken, Host: true}, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	other := dialPE(t, addr, 1, 2, testTimeout)
	closed := make(chan error)
	go func() { closed <- host.Close() }()
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

func TestSingleProcess(t *testing.T) {
	r, err := Detect(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	c, err := Dial(context.Background(), r, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	vals, err := c.Allgather(context.Background(), []byte("me"))
	if err != nil || len(vals) != 1 || string(vals[0]) != "me" {
		t.Fatalf("Allgather = %q, %v", vals, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkBarrier(b *testing.B) {
	for _, npes := range []int{2, 8} {
		b.Run(fmt.Sprint(npes, "PEs"), func(b *testing.B) {
			s, err := NewServer("127.0.0.1:0", npes, testToken)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			cs := make([]*Client, npes)
			for pe := range cs {
				if cs[pe], err = Dial(context.Background(), Rank{PE: pe, NPEs: npes, Addr: s.Addr(), Token: testToken}, testTimeout); err != nil {
					b.Fatal(err)
				}
				defer cs[pe].Close()
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, c := range cs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < b.N; i++ {
						if err := c.Barrier(context.Background()); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}

// A flood of connections with a wrong token (3000 of them) is logged as a few lines and a count
// of the rest, each refused all the same.
func TestRefusalFloodRateLimited(t *testing.T) {
	s := startServer(t, 2)
	var mu sync.Mutex
	var logged []string
	s.SetLogger(func(format string, args ...any) {
		mu.Lock()
		logged = append(logged, fmt.Sprintf(format, args...))
		mu.Unlock()
	})
	s.refused.Period = time.Hour // one period for the whole flood, however slow the machine
	const n = 3000
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("no hello at all, just bytes\n"))
		c.SetReadDeadline(time.Now().Add(testTimeout))
		io.Copy(io.Discard, c) // the server refuses and closes
		c.Close()
	}
	s.refused.Flush()
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, l := range logged {
		var k int
		if _, err := fmt.Sscanf(l, "%d more like this", &k); err == nil {
			total += k
		} else if strings.HasPrefix(l, "bootstrap: refused connection from") {
			total++
		}
	}
	if len(logged) != 6 || total != n {
		t.Fatalf("%d lines account for %d of %d refusals; want the 5 of the burst and one summary accounting for all:\n%s", len(logged), total, n, strings.Join(logged[:min(len(logged), 10)], "\n"))
	}
}

// A reply delivered before the client failed answers its call: the reader hands the server's last
// acknowledgement over and then fails the client on the connection's end, so both are ready when
// the caller wakes (TestHostCloseWaitsForOthers failed 1 run in ~1000 under -race -cpu 1 with
// "PE 0 died" in a clean Close before this).
func TestReplyBeforeFailureAnswers(t *testing.T) {
	c := &Client{failed: make(chan struct{}), timeout: time.Second, rank: Rank{PE: 1, NPEs: 2}}
	c.fail(errors.New("lost the connection"))
	for i := range 200 {
		ch := make(chan reply, 1)
		ch <- reply{ok: true, data: []byte("ack")}
		got, err := c.await(context.Background(), "Close", ch, func() {}, func() string { return "" })
		if err != nil || string(got) != "ack" {
			t.Fatalf("call %d: got %q, %v; want the delivered reply", i, got, err)
		}
	}
}
