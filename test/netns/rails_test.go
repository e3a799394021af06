package netns_test

// The multi-rail rig: two hosts joined by 4 rails (netns.NewRails), nic/tcp transports with one
// connection per rail. Data lands whole on every chunk boundary; put-with-signal and fence keep
// their order with one rail much slower than the others; a rail cut mid-transfer loses nothing
// and raises no error; all rails cut fails the transfer with an error naming the peer.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roxamen/roxamen/nic"
	"github.com/roxamen/roxamen/nic/tcp"
	"github.com/roxamen/roxamen/test/netns"
)

func needRails(t testing.TB, opt netns.RailOptions) *netns.RailNet {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	rn, err := netns.NewRails(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rn.Close() })
	return rn
}

// railJob makes PE i on host i, its rails the rig's (only the first nrails when > 0).
func railJob(t testing.TB, rn *netns.RailNet, nrails int, spray string, heapSize int, timeout time.Duration) ([]*tcp.Transport, []*heap, []*logs) {
	t.Helper()
	if nrails <= 0 {
		nrails = rn.Rails
	}
	var use []int
	for r := 0; r < nrails; r++ {
		use = append(use, r)
	}
	return railJobOn(t, rn, use, spray, heapSize, timeout)
}

// railJobOn is railJob on the rails listed.
func railJobOn(t testing.TB, rn *netns.RailNet, use []int, spray string, heapSize int, timeout time.Duration) ([]*tcp.Transport, []*heap, []*logs) {
	t.Helper()
	var hosts []int
	for i := range rn.Hosts {
		hosts = append(hosts, i)
	}
	return railJobHostsHeaps(t, rn, hosts, use, spray, nil, heapSize, timeout)
}

// railJobHosts makes PE k on host hosts[k] with heap heaps[k], on the rails listed (a rail
// listed twice: two connections on that NIC).
func railJobHosts(t testing.TB, rn *netns.RailNet, hosts, use []int, spray string, heaps []*heap, timeout time.Duration) ([]*tcp.Transport, []*logs) {
	t.Helper()
	ts, _, ls := railJobHostsHeaps(t, rn, hosts, use, spray, heaps, 0, timeout)
	return ts, ls
}

// railJobHostsHeaps is railJobHosts with fresh heaps of heapSize bytes when heaps is nil.
func railJobHostsHeaps(t testing.TB, rn *netns.RailNet, hosts, use []int, spray string, heaps []*heap, heapSize int, timeout time.Duration) ([]*tcp.Transport, []*heap, []*logs) {
	t.Helper()
	var ts []*tcp.Transport
	var hs []*heap
	var ls []*logs
	for pe, i := range hosts {
		h := rn.Hosts[i]
		var rails []tcp.Rail
		for _, r := range use {
			ln, err := h.Listen(net.JoinHostPort(rn.RailIP(i, r), "0"))
			if err != nil {
				t.Fatal(err)
			}
			rails = append(rails, tcp.Rail{Listener: ln, Dial: h.Dial})
		}
		var hp *heap
		if heaps != nil {
			hp = heaps[pe]
		} else {
			hp = newHeap(heapSize)
		}
		lg := &logs{}
		tr, err := tcp.New(tcp.Config{PE: pe, NPEs: len(hosts), Token: token, Rails: rails, Spray: spray, Heap: hp, Timeout: timeout, Logf: lg.logf})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		ts, hs, ls = append(ts, tr), append(hs, hp), append(ls, lg)
	}
	if err := connectAll(ts...); err != nil {
		t.Fatal(err)
	}
	return ts, hs, ls
}

// Every size around the stripe threshold and the chunk sizes, and odd ones, lands whole at the
// target over 4 rails, with nothing written around it; every rail carries chunks.
func TestRailsEveryChunkBoundary(t *testing.T) {
	rn := needRails(t, netns.RailOptions{Hosts: 2, Rails: 4})
	const heapSize = 3 << 20
	ts, hs, _ := railJob(t, rn, 0, tcp.SprayCAS, heapSize, 10*time.Second)
	var sizes []int
	for _, b := range []int{1, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 2 << 20} {
		sizes = append(sizes, b-1, b, b+1)
	}
	sizes = append(sizes, 3, 4095, 65537+7, 999999, 1234567)
	for _, size := range sizes {
		for _, h := range hs {
			for i := range h.b {
				h.b[i] = 0xee
			}
		}
		off := 4096 + 5 // unaligned
		src := pattern(size, byte(size))
		if err := ts[0].Put(1, uint64(off), src); err != nil {
			t.Fatal(err)
		}
		for i := range src {
			src[i] = 0 // Put returned: the buffer may be reused
		}
		if err := ts[0].Quiet(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		b := hs[1].b
		if !bytes.Equal(b[off:off+size], pattern(size, byte(size))) {
			t.Fatalf("size %d: the heap does not hold the data put", size)
		}
		if bytes.Count(b[:off], []byte{0xee}) != off || bytes.Count(b[off+size:], []byte{0xee}) != len(b)-off-size {
			t.Fatalf("size %d: written outside [%#x, %#x)", size, off, off+size)
		}
		got := make([]byte, size)
		if err := ts[1].Get(0, 0, got[:min(size, 8)]); err != nil {
			t.Fatal(err)
		}
	}
	for r, st := range ts[0].RailStats(1) {
		if st.Chunks == 0 {
			t.Fatalf("rail %d carried no chunk: %+v", r, ts[0].RailStats(1))
		}
	}
}

// One rail 50x slower than the other three: a large put-with-signal's signal is never seen
// before all its data; a flag put after a fence is never seen before the data before it; AMOs
// count exactly.
func TestRailsOrderWithOneSlow(t *testing.T) {
	rn := needRails(t, netns.RailOptions{Hosts: 2, Rails: 4, Rates: []string{"1gbit", "1gbit", "1gbit", "20mbit"}})
	const size, rounds = 1 << 20, 6
	const sigOff, flagOff, ctrOff, base = 0, 8, 16, 4096
	ts, hs, _ := railJob(t, rn, 0, tcp.SprayRR, base+2*size, 20*time.Second) // rr: the slow rail gets its share
	check := func(what string, want uint64, at uint64) {
		for k := uint64(0); k < size; k += 512 {
			if d := binary.LittleEndian.Uint64(hs[1].b[at+k:]); d != want {
				t.Fatalf("%s %d visible with data %d at +%d", what, want, d, k)
			}
		}
	}
	payload := make([]byte, size)
	for i := uint64(1); i <= rounds; i++ {
		for k := 0; k < size; k += 8 {
			binary.LittleEndian.PutUint64(payload[k:], i)
		}
		at := uint64(base + (i%2)*size)
		if i%2 == 0 {
			if err := ts[0].PutSignal(1, at, payload, sigOff, nic.SignalSet, i); err != nil {
				t.Fatal(err)
			}
			if err := waitWord(hs[1], sigOff, i, 20*time.Second); err != nil {
				t.Fatal(err)
			}
			check("signal", i, at)
		} else {
			if err := ts[0].Put(1, at, payload); err != nil {
				t.Fatal(err)
			}
			if err := ts[0].Fence(1); err != nil {
				t.Fatal(err)
			}
			// The flag: a signal with no data (written atomically, as the test reads it).
			if err := ts[0].PutSignal(1, flagOff, nil, flagOff, nic.SignalSet, i); err != nil {
				t.Fatal(err)
			}
			if err := waitWord(hs[1], flagOff, i, 20*time.Second); err != nil {
				t.Fatal(err)
			}
			check("flag after fence", i, at)
		}
		if _, err := ts[0].AMO(1, nic.AMOFetchAdd, 8, ctrOff, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts[0].Quiet(context.Background(), -1); err != nil {
		t.Fatal(err)
	}
	if v := atomic.LoadUint64(hs[1].word(ctrOff)); v != rounds {
		t.Fatalf("counter %d after %d fetch-adds", v, rounds)
	}
}

// A rail cut (link deleted) mid-transfer: its unanswered chunks go again on the other rails;
// every byte lands, no call fails, the rail is retired.
func TestRailCutMidTransfer(t *testing.T) {
	rn := needRails(t, netns.RailOptions{Hosts: 2, Rails: 4, Rates: []string{"200mbit", "200mbit", "200mbit", "200mbit"}})
	const size = 24 << 20
	ts, hs, ls := railJob(t, rn, 0, tcp.SprayCAS, size+4096, 4*time.Second)
	src := pattern(size, 3)
	errc := make(chan error, 1)
	go func() {
		for o := 0; o < size; o += size / 8 {
			if err := ts[0].Put(1, uint64(4096+o), src[o:o+size/8]); err != nil {
				errc <- err
				return
			}
			if _, err := ts[0].AMO(1, nic.AMOFetchAdd, 8, 0, 1, 0); err != nil {
				errc <- err
				return
			}
		}
		errc <- ts[0].Quiet(context.Background(), 1)
	}()
	// Cut once chunks are in flight on every rail.
	for {
		st := ts[0].RailStats(1)
		if st[2].Chunks > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := rn.Cut(1, 2); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("transfer with a rail cut: %v\n%s", err, ls[0])
	}
	if !bytes.Equal(hs[1].b[4096:4096+size], src) {
		t.Fatal("data lost with a rail cut")
	}
	if v := atomic.LoadUint64(hs[1].word(0)); v != 8 {
		t.Fatalf("counter %d after 8 fetch-adds", v)
	}
	st := ts[0].RailStats(1)
	if st[2].Up || st[2].Retired == 0 {
		t.Fatalf("rail 2 after its cut: %+v", st[2])
	}
	t.Logf("rail stats after the cut: %+v\n%s", st, ls[0])
}

// Every rail cut: the transfer fails with ErrPeerLost naming PE 1, within the timeout.
func TestAllRailsCut(t *testing.T) {
	rn := needRails(t, netns.RailOptions{Hosts: 2, Rails: 4, Rates: []string{"200mbit", "200mbit", "200mbit", "200mbit"}})
	const size, timeout = 16 << 20, 3 * time.Second
	ts, _, ls := railJob(t, rn, 0, tcp.SprayCAS, size+4096, timeout)
	src := pattern(size, 4)
	if err := ts[0].Put(1, 4096, src[:size/2]); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 4; r++ {
		if err := rn.Cut(1, r); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	err := ts[0].Put(1, 4096+size/2, src[size/2:])
	if err == nil {
		err = ts[0].Quiet(context.Background(), 1)
	}
	took := time.Since(start)
	if !errors.Is(err, tcp.ErrPeerLost) || !strings.Contains(err.Error(), "PE 1") || !strings.Contains(err.Error(), "every rail") {
		t.Fatalf("all rails cut: %v\n%s", err, ls[0])
	}
	t.Logf("all rails cut: failed after %v (timeout %v): %v", took.Round(time.Millisecond), timeout, err)
	if err := ts[0].Fence(1); !errors.Is(err, tcp.ErrPeerLost) {
		t.Fatalf("fence after the peer is lost: %v", err)
	}
}
