package nic

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"unsafe"
)

// The reordering path delivers unfenced puts out of order, keeps fenced ones and a
// put-with-signal's data before its signal, and MutSignalFirst breaks the latter.
func TestReorderOrders(t *testing.T) {
	run := func(m Mutation, fence bool, putsig bool) (reordered, broken int) {
		h0, h1 := make([]byte, 4096), make([]byte, 4096)
		r := NewReorder(Mapped{h0, h1}, 2, ReorderConfig{PE: 0, Seed: 1, Local: h0, Mutation: m})
		defer r.Close()
		one := binary.LittleEndian.AppendUint64(nil, 1)
		for it := 0; it < 300; it++ {
			clear(h1)
			x, y := (*uint64)(unsafe.Pointer(&h1[0])), (*uint64)(unsafe.Pointer(&h1[64]))
			if putsig {
				if err := r.PutSignal(1, 0, one, 64, SignalSet, 1); err != nil {
					t.Fatal(err)
				}
			} else {
				r.Put(1, 0, one)
				if fence {
					r.Fence(1)
				}
				r.Put(1, 64, one)
			}
			for atomic.LoadUint64(y) == 0 {
			}
			if atomic.LoadUint64(x) == 0 {
				if fence || putsig {
					broken++
				} else {
					reordered++
				}
			}
			if err := r.Quiet(context.Background(), -1); err != nil {
				t.Fatal(err)
			}
			if v := atomic.LoadUint64(x); v != 1 {
				t.Fatalf("after Quiet x = %d, want 1", v)
			}
		}
		return
	}
	if n, _ := run(MutNone, false, false); n == 0 {
		t.Error("no unfenced put was overtaken in 300 tries")
	}
	if _, b := run(MutNone, true, false); b != 0 {
		t.Errorf("a put overtook a fence %d times", b)
	}
	if _, b := run(MutNone, false, true); b != 0 {
		t.Errorf("a signal overtook its data %d times", b)
	}
	if _, b := run(MutSignalFirst, false, true); b == 0 {
		t.Error("signal-first: the signal never came before its data")
	}
	if _, b := run(MutDropFences, true, false); b == 0 {
		t.Error("drop-fences: no put overtook the fence")
	}
}

func TestParseMutation(t *testing.T) {
	for _, m := range []Mutation{MutNone, MutDropFences, MutQuietAsFence, MutSignalFirst} {
		if got, err := ParseMutation(m.String()); err != nil || got != m {
			t.Errorf("ParseMutation(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := ParseMutation("fast"); err == nil {
		t.Error("no error for an unknown mutation")
	}
}

// A store through roxshmem_ptr (StoreTo a peer) reaches the peer's heap without a quiet; in
// Strict a fence orders it before a later put to that PE, in Bypass it does not.
func TestReorderPtrStore(t *testing.T) {
	run := func(bypass bool) (reordered int) {
		h0, h1 := make([]byte, 4096), make([]byte, 4096)
		r := NewReorder(Mapped{h0, h1}, 2, ReorderConfig{PE: 0, Seed: 1, Local: h0, Heaps: [][]byte{h0, h1}, Bypass: bypass})
		defer r.Close()
		one := binary.LittleEndian.AppendUint64(nil, 1)
		x, y := (*uint64)(unsafe.Pointer(&h1[0])), (*uint64)(unsafe.Pointer(&h1[64]))
		for it := 0; it < 300; it++ {
			clear(h1)
			r.StoreTo(1, 0, 1)
			r.Fence(1)
			r.Put(1, 64, one)
			for atomic.LoadUint64(y) == 0 {
			}
			if atomic.LoadUint64(x) == 0 {
				reordered++
			}
			for atomic.LoadUint64(x) == 0 { // delivered in time, with no quiet
			}
		}
		if v := atomic.LoadUint64((*uint64)(unsafe.Pointer(&h0[0]))); v != 0 {
			t.Errorf("a store to PE 1 wrote PE 0's own heap: %d", v)
		}
		return
	}
	if n := run(false); n != 0 {
		t.Errorf("strict: a put overtook a fenced ptr store %d times", n)
	}
	if n := run(true); n == 0 {
		t.Error("bypass: no put overtook a fenced ptr store in 300 tries")
	}
}

// put_nbi from a source buffer sends the buffer's value at the call or a later one, never an
// older one; a get's destination follows the PE's earlier stores to it in Strict only.
func TestReorderBufferAndDestination(t *testing.T) {
	h0, h1 := make([]byte, 4096), make([]byte, 4096)
	r := NewReorder(Mapped{h0, h1}, 2, ReorderConfig{PE: 0, Seed: 1, Local: h0, Heaps: [][]byte{h0, h1}})
	defer r.Close()
	x := (*uint64)(unsafe.Pointer(&h1[0]))
	got := map[uint64]int{}
	for it := 0; it < 300; it++ {
		r.Store(128, 1)
		if err := r.PutFromLocal(1, 0, 128, 8); err != nil {
			t.Fatal(err)
		}
		r.Store(128, 2)
		if err := r.Quiet(context.Background(), -1); err != nil {
			t.Fatal(err)
		}
		got[atomic.LoadUint64(x)]++
	}
	if got[1] == 0 || got[2] == 0 || len(got) != 2 {
		t.Errorf("put_nbi from a reused buffer sent %v, want both 1 and 2 and nothing else", got)
	}
	for _, bypass := range []bool{false, true} {
		h := make([]byte, 4096)
		r := NewReorder(Mapped{h}, 1, ReorderConfig{PE: 0, Seed: 1, Local: h, Heaps: [][]byte{h}, Bypass: bypass})
		d := (*uint64)(unsafe.Pointer(&h[256]))
		late := 0
		for it := 0; it < 300; it++ {
			atomic.StoreUint64(d, 0)
			r.Store(256, 7)
			r.Destination(256)
			atomic.StoreUint64(d, 5) // the get's data
			if err := r.Quiet(context.Background(), -1); err != nil {
				t.Fatal(err)
			}
			if atomic.LoadUint64(d) == 7 {
				late++
			}
		}
		r.Close()
		if !bypass && late != 0 {
			t.Errorf("strict: an earlier store landed after the get's data %d times", late)
		}
		if bypass && late == 0 {
			t.Error("bypass: an earlier store never landed after the get's data in 300 tries")
		}
	}
}

// A context's fence orders and its quiet completes its own operations only, and its plain stores
// sit in its own store buffer: its thread reads them at once, another context's thread only once
// they have landed.
func TestReorderContexts(t *testing.T) {
	h0, h1 := make([]byte, 4096), make([]byte, 4096)
	r := NewReorder(Mapped{h0, h1}, 2, ReorderConfig{PE: 0, Seed: 1, Local: h0, Heaps: [][]byte{h0, h1}})
	defer r.Close()
	b := r.NewContext()
	one := binary.LittleEndian.AppendUint64(nil, 1)
	x, y := (*uint64)(unsafe.Pointer(&h1[0])), (*uint64)(unsafe.Pointer(&h1[64]))
	var pendingAfterOtherQuiet, overtookOtherFence, overtookOwnFence, unseen int
	for it := 0; it < 300; it++ {
		clear(h1)
		r.Put(1, 0, one) // the default context's
		if err := b.Quiet(context.Background(), -1); err != nil {
			t.Fatal(err)
		}
		if atomic.LoadUint64(x) == 0 {
			pendingAfterOtherQuiet++
		}
		if err := r.Quiet(context.Background(), -1); err != nil {
			t.Fatal(err)
		}
		if v := atomic.LoadUint64(x); v != 1 {
			t.Fatalf("after the default context's Quiet x = %d, want 1", v)
		}

		clear(h1)
		r.Put(1, 0, one)
		b.Fence(1)
		b.Put(1, 64, one)
		for atomic.LoadUint64(y) == 0 {
		}
		if atomic.LoadUint64(x) == 0 {
			overtookOtherFence++
		}
		r.Quiet(context.Background(), -1)
		b.Quiet(context.Background(), -1)

		clear(h1)
		b.Put(1, 0, one)
		b.Fence(1)
		b.Put(1, 64, one)
		for atomic.LoadUint64(y) == 0 {
		}
		if atomic.LoadUint64(x) == 0 {
			overtookOwnFence++
		}
		b.Quiet(context.Background(), -1)

		atomic.StoreUint64((*uint64)(unsafe.Pointer(&h0[128])), 0)
		b.Store(128, 5)
		var own, other uint64
		b.Load(128, &own)
		r.Load(128, &other)
		if err := r.Quiet(context.Background(), -1); err != nil { // performs the late loads
			t.Fatal(err)
		}
		if own != 5 {
			t.Fatalf("a context's thread read %d after its own store of 5", own)
		}
		if other == 0 {
			unseen++
		}
	}
	if pendingAfterOtherQuiet == 0 {
		t.Error("another context's Quiet always completed the default context's put")
	}
	if overtookOtherFence == 0 {
		t.Error("another context's Fence always ordered the default context's put")
	}
	if overtookOwnFence != 0 {
		t.Errorf("a put overtook its own context's fence %d times", overtookOwnFence)
	}
	if unseen == 0 {
		t.Error("another thread's load always saw a store still in a context's store buffer")
	}
}
