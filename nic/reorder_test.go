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
