package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roxamen/roxamen/nic"
)

// startRails makes n connected transports with rails rails each, rail r on loopback address
// 127.0.0.(r+1).
func startRails(t testing.TB, n, rails, heapSize int, timeout time.Duration, spray string) *job {
	t.Helper()
	j := &job{}
	addrs := make([]string, n)
	for pe := 0; pe < n; pe++ {
		h := newHeap(heapSize)
		l := &logBuf{}
		var rl []Rail
		for r := 0; r < rails; r++ {
			rl = append(rl, Rail{Listen: fmt.Sprintf("127.0.0.%d:0", r+1)})
		}
		tr, err := New(Config{PE: pe, NPEs: n, Token: "job-token", Rails: rl, Spray: spray, Heap: h, Timeout: timeout, Logf: l.logf})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		j.ts, j.heaps, j.logs = append(j.ts, tr), append(j.heaps, h), append(j.logs, l)
		addrs[pe] = tr.Addr()
	}
	connect(t, j.ts, addrs)
	return j
}

// Every size around the stripe threshold and the chunk sizes lands whole, at every PE, with
// nothing written outside it, for each spray policy.
func TestRailsPutSizes(t *testing.T) {
	for _, spray := range []string{SprayCAS, SprayRR, SpraySingle} {
		t.Run(spray, func(t *testing.T) {
			j := startRails(t, 3, 4, maxChunk*8+8192, 10*time.Second, spray)
			if got := strings.Count(j.ts[0].Addr(), ","); got != 3 {
				t.Fatalf("address %q: want 4 rails", j.ts[0].Addr())
			}
			var sizes []int
			for _, b := range []int{1, directThreshold, defaultStripeThreshold, minChunk * 4, maxChunk, maxChunk * 8} {
				sizes = append(sizes, b-1, b, b+1)
			}
			sizes = append(sizes, 777777)
			for _, size := range sizes {
				for _, h := range j.heaps {
					fill(h.b, 0xee)
				}
				src := pattern(size, byte(size))
				off := 4096 + 3
				for pe := 0; pe < 3; pe++ {
					if err := j.ts[0].Put(pe, uint64(off), src); err != nil {
						t.Fatal(err)
					}
				}
				fill(src, 0)
				if err := j.ts[0].Quiet(context.Background(), -1); err != nil {
					t.Fatal(err)
				}
				want := pattern(size, byte(size))
				for pe := 0; pe < 3; pe++ {
					h := j.heaps[pe].b
					if !bytes.Equal(h[off:off+size], want) {
						t.Fatalf("size %d: PE %d's heap does not hold the data put there", size, pe)
					}
					if bytes.Count(h[:off], []byte{0xee}) != off || bytes.Count(h[off+size:], []byte{0xee}) != len(h)-off-size {
						t.Fatalf("size %d: PE %d's heap was written outside [%#x, %#x)", size, pe, off, off+size)
					}
				}
				got := make([]byte, size)
				if err := j.ts[2].Get(1, uint64(off), got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("size %d: get returned other bytes than were put", size)
				}
			}
			st := j.ts[0].RailStats(1)
			used := 0
			for _, s := range st {
				if s.Chunks > 0 {
					used++
				}
			}
			if want := map[string]int{SpraySingle: 1}[spray]; (want == 1) != (used == 1) || used == 0 {
				t.Fatalf("spray %s used %d rails: %+v", spray, used, st)
			}
		})
	}
}

// A large put-with-signal: the signal is never visible before the last chunk of its data.
func TestRailsPutSignalAfterEveryChunk(t *testing.T) {
	const size, rounds = 1 << 20, 20
	j := startRails(t, 2, 4, 2*size+4096, 10*time.Second, SprayCAS)
	const sigOff = 0
	done := make(chan error, 1)
	var checked atomic.Uint64 // the last round the reader has finished checking
	go func() {
		h := j.heaps[1]
		var last uint64
		for last < rounds {
			s := atomic.LoadUint64(h.word(sigOff))
			if s == last {
				continue
			}
			base := 4096 + (s%2)*size
			for k := uint64(0); k < size; k += 4096 {
				if d := binary.LittleEndian.Uint64(h.b[base+k:]); d != s {
					done <- fmt.Errorf("signal %d visible with data %d at +%d", s, d, k)
					return
				}
			}
			last = s
			checked.Store(s)
		}
		done <- nil
	}()
	payload := make([]byte, size)
	for i := uint64(1); i <= rounds; i++ {
		for k := 0; k < size; k += 8 {
			binary.LittleEndian.PutUint64(payload[k:], i)
		}
		// Two buffers, alternately: the reader checks round s while s+1 is written elsewhere;
		// round s+2, into s's buffer, waits until the reader is done with s.
		for i > 2 && checked.Load() < i-2 {
			select {
			case err := <-done:
				t.Fatal(err)
			default:
			}
		}
		if err := j.ts[0].PutSignal(1, 4096+(i%2)*size, payload, sigOff, nic.SignalSet, i); err != nil {
			t.Fatal(err)
		}
		if err := j.ts[0].Quiet(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		for atomic.LoadUint64(j.heaps[1].word(sigOff)) < i {
			select {
			case err := <-done:
				t.Fatal(err)
			default:
			}
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// AMOs across rails from several goroutines: each applied exactly once.
func TestRailsAMO(t *testing.T) {
	j := startRails(t, 2, 3, 1<<16, 10*time.Second, SprayCAS)
	var wg sync.WaitGroup
	const g, n = 4, 300
	for k := 0; k < g; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				if _, err := j.ts[0].AMO(1, nic.AMOFetchAdd, 8, 64, 1, 0); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if v := atomic.LoadUint64(j.heaps[1].word(64)); v != g*n {
		t.Fatalf("counter %d after %d fetch-adds", v, g*n)
	}
}

// A rail reset mid-transfer: its chunks go again on the others, nothing is lost, no error; the
// rail comes back later; AMOs in flight are applied once.
func TestRailsResetMidTransfer(t *testing.T) {
	const size = 8 << 20
	j := startRails(t, 2, 3, size+4096, 10*time.Second, SprayRR)
	src := pattern(size, 9)
	var cut sync.Once
	for round := 0; round < 3; round++ {
		for _, h := range j.heaps {
			fill(h.b, 0xee)
			atomic.StoreUint64(h.word(0), 0)
		}
		errc := make(chan error, 1)
		go func() {
			for i := 0; i < 8; i++ {
				if err := j.ts[0].Put(1, uint64(4096+i*size/8), src[i*size/8:(i+1)*size/8]); err != nil {
					errc <- err
					return
				}
				if _, err := j.ts[0].AMO(1, nic.AMOFetchAdd, 8, 0, 1, 0); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		cut.Do(func() {
			time.Sleep(time.Millisecond)
			// Reset rail 1 from PE 1's side: PE 0 sees it break with chunks unanswered.
			j.ts[1].rems[0].rails[1].Load().conn.(*net.TCPConn).SetLinger(0)
			j.ts[1].rems[0].rails[1].Load().conn.Close()
		})
		if err := <-errc; err != nil {
			t.Fatalf("round %d: %v\n%s", round, err, j.logs[0])
		}
		if err := j.ts[0].Quiet(context.Background(), -1); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !bytes.Equal(j.heaps[1].b[4096:4096+size], src) {
			t.Fatalf("round %d: the data put is not all there", round)
		}
		if v := atomic.LoadUint64(j.heaps[1].word(0)); v != 8 {
			t.Fatalf("round %d: counter %d after 8 fetch-adds", round, v)
		}
	}
	t.Log(j.logs[0])
	if !strings.Contains(j.logs[0].String(), "rail 1 to PE 1 retired") {
		t.Fatalf("no retirement logged:\n%s", j.logs[0])
	}
}

// The target applies a numbered request once, whichever rails it comes on: an AMO sent again
// (as after a rail lost before its answer) gets the first one's old value, and a signal sent
// again is not added twice.
func TestRailsResentAppliedOnce(t *testing.T) {
	j := startRails(t, 2, 2, 1<<16, 10*time.Second, SprayCAS)
	rem := j.ts[0].rems[1]
	send := func(rail int, r request, typ uint8) *pending {
		t.Helper()
		p := rem.rails[rail].Load()
		pd := &pending{typ: typ, done: make(chan struct{})}
		if err := p.send("test", &r, nil, pd, true); err != nil {
			t.Fatal(err)
		}
		if err := p.wait(context.Background(), "test", pd); err != nil {
			t.Fatal(err)
		}
		return pd
	}
	amo := request{typ: reqAMO, kind: uint8(nic.AMOFetchAdd), width: 8, off: 64, value: 5, seq: 77}
	a := send(0, amo, reqAMO)
	b := send(1, amo, reqAMO)
	if v := atomic.LoadUint64(j.heaps[1].word(64)); v != 5 || a.value != 0 || b.value != 0 {
		t.Fatalf("fetch-add of 5 sent twice: counter %d, old values %d and %d (want 5, 0, 0)", v, a.value, b.value)
	}
	sig := request{typ: reqPutSignal, flags: flagAck, kind: uint8(nic.SignalAdd), off: 128, value: 3, aux: 8, seq: 78}
	send(1, sig, reqPutSignal)
	send(0, sig, reqPutSignal)
	if v := atomic.LoadUint64(j.heaps[1].word(8)); v != 3 {
		t.Fatalf("signal add of 3 sent twice: signal %d", v)
	}
}
