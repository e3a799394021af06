package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roxamen/roxamen/nic"
)

// startLazy makes n transports on loopback that connect on first use, each resolving its peers'
// addresses as the bootstrap's key-value store would.
func startLazy(t testing.TB, n, heapSize int, timeout time.Duration, maxPeers int, opts ...func(*Config)) *job {
	t.Helper()
	j := &job{}
	addrs := make([]string, n)
	ready := make(chan struct{})
	var lookups sync.Map
	for pe := 0; pe < n; pe++ {
		h := newHeap(heapSize)
		l := &logBuf{}
		cfg := Config{PE: pe, NPEs: n, Token: "job-token", Listen: "127.0.0.1:0", Heap: h, Timeout: timeout, Logf: l.logf, MaxPeers: maxPeers,
			Resolve: func(ctx context.Context, q int) (string, error) {
				v, _ := lookups.LoadOrStore(fmt.Sprint(pe, q), new(int))
				*v.(*int)++ // only the first-use goroutine calls Resolve: a race here would be a double lookup
				<-ready
				return addrs[q], nil
			}}
		for _, o := range opts {
			o(&cfg)
		}
		tr, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		j.ts, j.heaps, j.logs = append(j.ts, tr), append(j.heaps, h), append(j.logs, l)
		addrs[pe] = tr.Addr()
	}
	close(ready)
	t.Cleanup(func() {
		lookups.Range(func(k, v any) bool {
			if *v.(*int) != 1 {
				t.Errorf("PE pair %v looked up its peer's address %d times, want once (cached)", k, *v.(*int))
			}
			return true
		})
	})
	return j
}

func live(j *job) []int {
	out := make([]int, len(j.ts))
	for i, tr := range j.ts {
		out[i] = tr.Connections()
	}
	return out
}

// Each kind of first operation connects just the pair it names.
func TestLazyFirstUse(t *testing.T) {
	for _, op := range []string{"put", "get", "amo", "put_signal"} {
		t.Run(op, func(t *testing.T) {
			j := startLazy(t, 4, 1<<16, 5*time.Second, 0)
			if c := live(j); fmt.Sprint(c) != "[0 0 0 0]" {
				t.Fatalf("connections before any operation: %v, want none", c)
			}
			a, b := j.ts[2], j.ts[1] // the higher PE dials first
			data := pattern(100, 3)
			var err error
			switch op {
			case "put":
				err = a.Put(1, 64, data)
				if err == nil {
					err = a.Quiet(context.Background(), 1)
				}
				if err == nil && !bytes.Equal(j.heaps[1].b[64:164], data) {
					err = errors.New("the put did not land")
				}
			case "get":
				copy(j.heaps[1].b[64:], data)
				got := make([]byte, 100)
				err = a.Get(1, 64, got)
				if err == nil && !bytes.Equal(got, data) {
					err = errors.New("the get returned other bytes")
				}
			case "amo":
				*j.heaps[1].word(64) = 41
				var old uint64
				old, err = a.AMO(1, nic.AMOFetchAdd, 8, 64, 1, 0)
				if err == nil && (old != 41 || *j.heaps[1].word(64) != 42) {
					err = fmt.Errorf("fetch-add returned %d and left %d, want 41 and 42", old, *j.heaps[1].word(64))
				}
			case "put_signal":
				err = a.PutSignal(1, 64, data, 8, nic.SignalSet, 7)
				if err == nil {
					err = a.Quiet(context.Background(), 1)
				}
				if err == nil && (*j.heaps[1].word(8) != 7 || !bytes.Equal(j.heaps[1].b[64:164], data)) {
					err = errors.New("the put-with-signal did not land")
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			// The reverse direction rides the same connection.
			if err := b.Put(2, 0, []byte{9}); err != nil {
				t.Fatal(err)
			}
			if err := b.Quiet(context.Background(), 2); err != nil {
				t.Fatal(err)
			}
			if c := live(j); fmt.Sprint(c) != "[0 1 1 0]" {
				t.Fatalf("connections after PE 2 -> PE 1 and back: %v, want [0 1 1 0]", c)
			}
			if s := a.ConnStats(); s.Dialed != 1 || s.Accepted != 0 {
				t.Fatalf("PE 2: %+v, want one connection dialed", s)
			}
		})
	}
}

// Every PE's goroutines start their first operations to every other PE at once: each pair
// ends with one connection per rail, and every put lands.
func TestLazySimultaneous(t *testing.T) {
	for _, rails := range []int{1, 2} {
		t.Run(fmt.Sprintf("rails=%d", rails), func(t *testing.T) { lazySimultaneous(t, rails) })
	}
}

func lazySimultaneous(t *testing.T, rails int) {
	for round := 0; round < 5; round++ {
		const n, g = 5, 4
		j := startLazy(t, n, 1<<16, 5*time.Second, 0, func(c *Config) {
			if rails > 1 {
				for r := 0; r < rails; r++ {
					c.Rails = append(c.Rails, Rail{Listen: fmt.Sprintf("127.0.0.%d:0", r+1)})
				}
			}
		})
		var wg sync.WaitGroup
		errs := make(chan error, n*n*g)
		start := make(chan struct{})
		for me := 0; me < n; me++ {
			for q := 0; q < n; q++ {
				if q == me {
					continue
				}
				for k := 0; k < g; k++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						off := uint64(8 * (me*g + k))
						var b [8]byte
						binary.LittleEndian.PutUint64(b[:], uint64(me<<8|k+1))
						if err := j.ts[me].Put(q, off, b[:]); err != nil {
							errs <- err
						}
					}()
				}
			}
		}
		close(start)
		wg.Wait()
		for me := range j.ts {
			if err := j.ts[me].Quiet(context.Background(), -1); err != nil {
				errs <- err
			}
		}
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for q := 0; q < n; q++ {
			for me := 0; me < n; me++ {
				for k := 0; k < g && me != q; k++ {
					off := 8 * (me*g + k)
					if v := binary.LittleEndian.Uint64(j.heaps[q].b[off:]); v != uint64(me<<8|k+1) {
						t.Fatalf("round %d: PE %d's word from PE %d goroutine %d is %#x", round, q, me, k, v)
					}
				}
			}
		}
		for pe, c := range live(j) {
			if c != (n-1)*rails {
				t.Fatalf("round %d: PE %d holds %d connections, want %d (one per peer and rail): %v", round, pe, c, (n-1)*rails, live(j))
			}
		}
		for pe, l := range j.logs {
			if strings.Contains(l.String(), "retired") || strings.Contains(l.String(), "lost") {
				t.Fatalf("round %d: PE %d lost a connection while connecting:\n%s", round, pe, l)
			}
		}
	}
}

// A fence to a PE not yet connected, then the first puts: data, fence, flag. Whenever the
// target's reader has applied the flag, the data is there (checked on the reader goroutine,
// through Notify, which runs after each burst it applied).
func TestLazyFenceBeforeFirstPut(t *testing.T) {
	for round := 0; round < 20; round++ {
		var j *job
		var mu sync.Mutex
		var bad error
		seen := make(chan struct{})
		data := pattern(256<<10, byte(round+1))
		j = startLazy(t, 2, 1<<20, 5*time.Second, 0, func(c *Config) {
			if c.PE != 0 {
				return
			}
			c.Notify = func() {
				h := j.heaps[0].b
				if h[0] != 1 {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if bad == nil && !bytes.Equal(h[4096:4096+len(data)], data) {
					bad = errors.New("the flag landed before the data fenced ahead of it")
				}
				select {
				case <-seen:
				default:
					close(seen)
				}
			}
		})
		src := j.ts[1]
		if err := src.Fence(0); err != nil {
			t.Fatal(err)
		}
		if err := src.Put(0, 4096, data); err != nil {
			t.Fatal(err)
		}
		if err := src.Fence(0); err != nil {
			t.Fatal(err)
		}
		if err := src.Put(0, 0, []byte{1}); err != nil {
			t.Fatal(err)
		}
		if err := src.Quiet(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		select {
		case <-seen:
		case <-time.After(5 * time.Second):
			t.Fatal("the flag never arrived")
		}
		mu.Lock()
		err := bad
		mu.Unlock()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}

// MaxPeers=1: PE 0 cycles through its peers, each of which puts to PE 0 without waiting at the
// same time, so connections are retired while both directions carry puts. Every value is the
// last one written: nothing lost, nothing reordered across a retired and a new connection.
func TestLazyEvictionKeepsOrder(t *testing.T) {
	const n, rounds, burst = 4, 30, 50
	j := startLazy(t, n, 1<<16, 10*time.Second, 1)
	t.Cleanup(func() {
		if t.Failed() {
			for pe, l := range j.logs {
				t.Logf("PE %d's log:\n%s", pe, l)
			}
		}
	})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for q := 1; q < n; q++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b [8]byte
			for k := uint64(1); k <= rounds*burst; k++ {
				binary.LittleEndian.PutUint64(b[:], k)
				if err := j.ts[q].Put(0, uint64(8*q), b[:]); err != nil {
					errs <- err
					return
				}
				if k%burst == 0 {
					if err := j.ts[q].Quiet(ctx, 0); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	var b [8]byte
	for r := uint64(1); r <= rounds; r++ {
		for q := 1; q < n; q++ {
			for k := uint64(1); k <= 10; k++ {
				binary.LittleEndian.PutUint64(b[:], r*100+k)
				if err := j.ts[0].Put(q, 512, b[:]); err != nil {
					t.Fatal(err)
				}
			}
			if err := j.ts[0].Quiet(ctx, q); err != nil {
				t.Fatal(err)
			}
			var got [8]byte
			if err := j.ts[0].Get(q, 512, got[:]); err != nil {
				t.Fatal(err)
			}
			if v := binary.LittleEndian.Uint64(got[:]); v != r*100+10 {
				t.Fatalf("round %d: PE %d holds %d, want %d", r, q, v, r*100+10)
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for q := 1; q < n; q++ {
		if v := binary.LittleEndian.Uint64(j.heaps[0].b[8*q:]); v != rounds*burst {
			t.Fatalf("PE %d's last put to PE 0 left %d, want %d", q, v, rounds*burst)
		}
	}
	s := j.ts[0].ConnStats()
	if s.Evicted < int64(rounds) {
		t.Fatalf("PE 0: %+v: want at least %d connections retired", s, rounds)
	}
	if s.Live > 2 {
		t.Fatalf("PE 0 holds %d connections with MaxPeers=1", s.Live)
	}
	t.Logf("PE 0: %+v", s)
}

// A first use of a PE that is not there (its address refuses connections) fails within the
// timeout, naming the call and the PE.
func TestLazyDeadPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	tr, err := New(Config{PE: 0, NPEs: 2, Token: "job-token", Listen: "127.0.0.1:0", Heap: newHeap(4096), Timeout: 300 * time.Millisecond,
		Logf:    func(string, ...any) {},
		Resolve: func(context.Context, int) (string, error) { return dead, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	start := time.Now()
	err = tr.Put(1, 0, []byte{1})
	if err == nil {
		t.Fatal("a put to a dead PE succeeded")
	}
	for _, want := range []string{"put", "PE 1 unreachable at " + dead, "within 300ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("the put took %v to fail", time.Since(start))
	}
	if _, err := tr.AMO(1, nic.AMOFetch, 8, 0, 0, 0); err == nil || !strings.Contains(err.Error(), "amo") {
		t.Fatalf("a later AMO to the dead PE: %v", err)
	}
}
