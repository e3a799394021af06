package ucx

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/roxamen/roxamen/nic"
)

// lazyJob starts n transports that create their endpoints on first use, resolving addresses as
// the bootstrap's key-value store would.
func lazyJob(t testing.TB, n, heapSize, maxPeers int) ([]*Transport, [][]byte, *sync.Map) {
	t.Helper()
	needUCX(t)
	ts := make([]*Transport, n)
	heaps := make([][]byte, n)
	addrs := make([][]byte, n)
	ready := make(chan struct{})
	var lookups sync.Map
	for pe := range ts {
		heaps[pe] = heap(t, heapSize)
		tr, err := New(Config{PE: pe, NPEs: n, Heap: heaps[pe], Timeout: 20 * time.Second, MaxPeers: maxPeers,
			Resolve: func(ctx context.Context, q int) ([]byte, error) {
				v, _ := lookups.LoadOrStore(fmt.Sprint(pe, "->", q), new(int))
				*v.(*int)++ // one caller per pair (lazyPeer.mu): a race here would be a double lookup
				<-ready
				return addrs[q], nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		ts[pe] = tr
		addrs[pe] = tr.Address()
	}
	close(ready)
	return ts, heaps, &lookups
}

func TestLazyFirstUse(t *testing.T) {
	for _, op := range []string{"put", "get", "amo", "put_signal"} {
		t.Run(op, func(t *testing.T) {
			ts, heaps, lookups := lazyJob(t, 3, 1<<16, 0)
			for pe, tr := range ts {
				if c := tr.Connections(); c != 0 {
					t.Fatalf("PE %d holds %d endpoints before any operation", pe, c)
				}
			}
			a := ts[2]
			data := bytes.Repeat([]byte{7, 1, 9}, 40)
			var err error
			switch op {
			case "put":
				if err = a.Put(0, 64, data); err == nil {
					err = a.Quiet(context.Background(), 0)
				}
				if err == nil && !bytes.Equal(heaps[0][64:64+len(data)], data) {
					err = fmt.Errorf("the put did not land")
				}
			case "get":
				copy(heaps[0][64:], data)
				got := make([]byte, len(data))
				if err = a.Get(0, 64, got); err == nil && !bytes.Equal(got, data) {
					err = fmt.Errorf("the get returned other bytes")
				}
			case "amo":
				binary.LittleEndian.PutUint64(heaps[0][64:], 41)
				var old uint64
				if old, err = a.AMO(0, nic.AMOFetchAdd, 8, 64, 1, 0); err == nil && old != 41 {
					err = fmt.Errorf("fetch-add returned %d, want 41", old)
				}
			case "put_signal":
				if err = a.PutSignal(0, 64, data, 8, nic.SignalSet, 5); err == nil {
					err = a.Quiet(context.Background(), 0)
				}
				if err == nil && (binary.LittleEndian.Uint64(heaps[0][8:]) != 5 || !bytes.Equal(heaps[0][64:64+len(data)], data)) {
					err = fmt.Errorf("the put-with-signal did not land")
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := a.ConnStats(); s.Live != 1 || s.Created != 1 {
				t.Fatalf("PE 2: %+v, want the one endpoint it used", s)
			}
			if c := ts[1].Connections(); c != 0 {
				t.Fatalf("PE 1, never used, holds %d endpoints", c)
			}
			n := 0
			lookups.Range(func(k, v any) bool { n += *v.(*int); return true })
			if n != 1 {
				t.Fatalf("%d address look-ups, want 1", n)
			}
		})
	}
}

// Concurrent first uses share one look-up; MaxPeers=1 cycles PE 0's endpoint through its peers,
// with every value checked.
func TestLazyEvictCycle(t *testing.T) {
	const n, rounds = 4, 10
	ts, heaps, lookups := lazyJob(t, n, 1<<16, 1)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := ts[0].AMO(1, nic.AMOFetchAdd, 8, 0, 1, 0); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if v := binary.LittleEndian.Uint64(heaps[1][0:]); v != 8 {
		t.Fatalf("8 concurrent first fetch-adds left %d", v)
	}
	var b [8]byte
	for r := uint64(1); r <= rounds; r++ {
		for q := 1; q < n; q++ {
			binary.LittleEndian.PutUint64(b[:], r<<8|uint64(q))
			if err := ts[0].Put(q, 128, b[:]); err != nil {
				t.Fatal(err)
			}
			if err := ts[0].Quiet(context.Background(), q); err != nil {
				t.Fatal(err)
			}
			var got [8]byte
			if err := ts[0].Get(q, 128, got[:]); err != nil {
				t.Fatal(err)
			}
			if v := binary.LittleEndian.Uint64(got[:]); v != r<<8|uint64(q) {
				t.Fatalf("round %d: PE %d holds %#x", r, q, v)
			}
		}
	}
	s := ts[0].ConnStats()
	if s.Live != 1 || s.Evicted < rounds {
		t.Fatalf("PE 0 with MaxPeers=1: %+v", s)
	}
	lookups.Range(func(k, v any) bool {
		if *v.(*int) != 1 {
			t.Errorf("%v looked up %d times, want once (cached across evictions)", k, *v.(*int))
		}
		return true
	})
}
