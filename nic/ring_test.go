package nic

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
	"unsafe"
)

func TestDescLayout(t *testing.T) {
	var d Desc
	if s := unsafe.Sizeof(d); s != DescSize {
		t.Fatalf("sizeof(Desc) = %d, want %d", s, DescSize)
	}
	want := map[string][2]uintptr{
		"Seq": {unsafe.Offsetof(d.Seq), 0}, "Op": {unsafe.Offsetof(d.Op), 8}, "PE": {unsafe.Offsetof(d.PE), 12},
		"Size": {unsafe.Offsetof(d.Size), 16}, "Src": {unsafe.Offsetof(d.Src), 24}, "Dst": {unsafe.Offsetof(d.Dst), 32},
		"Value": {unsafe.Offsetof(d.Value), 40}, "Aux": {unsafe.Offsetof(d.Aux), 48}, "Flags": {unsafe.Offsetof(d.Flags), 56},
		"Pad": {unsafe.Offsetof(d.Pad), 60},
	}
	for name, o := range want {
		if o[0] != o[1] {
			t.Errorf("offsetof(Desc.%s) = %d, want %d", name, o[0], o[1])
		}
	}
	if RingHeadOffset != 0 || RingTailOffset != 64 || RingCompletedOffset != 128 || RingErrorOffset != 192 || RingHeaderSize != 256 {
		t.Errorf("ring header offsets changed")
	}
	f := MakeFlags(uint32(AMOFetchAdd), 8)
	d.Flags = f
	if d.Kind() != uint32(AMOFetchAdd) || d.Width() != 8 {
		t.Errorf("flags %#x: kind %d width %d", f, d.Kind(), d.Width())
	}
}

func TestRingBadMemory(t *testing.T) {
	if _, err := NewRing(AlignedBytes(RingBytes(4)), 3); err == nil {
		t.Error("capacity 3 accepted")
	}
	if _, err := NewRing(AlignedBytes(RingBytes(4)), 8); err == nil {
		t.Error("memory shorter than capacity accepted")
	}
	b := AlignedBytes(RingBytes(4) + 8)
	if _, err := NewRing(b[8:], 4); err == nil {
		t.Error("misaligned memory accepted")
	}
	if _, err := AttachRing(AlignedBytes(RingBytes(3))); err == nil {
		t.Error("attach: 3 slots accepted")
	}
}

// A header written through one Ring value is seen through another attached to the same memory.
func TestRingAttach(t *testing.T) {
	mem := AlignedBytes(RingBytes(8))
	for i := range mem {
		mem[i] = 0xa5 // NewRing must format whatever was there
	}
	p, err := NewRing(mem, 8)
	if err != nil {
		t.Fatal(err)
	}
	c, err := AttachRing(mem)
	if err != nil {
		t.Fatal(err)
	}
	if c.Capacity() != 8 {
		t.Fatalf("attached capacity %d", c.Capacity())
	}
	var buf [8]Desc
	if _, n := c.Poll(buf[:]); n != 0 {
		t.Fatalf("fresh ring polled %d descriptors", n)
	}
	in := Desc{Op: OpPut, PE: 3, Size: 17, Src: 0x1000, Dst: 0x40, Value: 5, Aux: 6, Flags: MakeFlags(1, 8)}
	tk, err := p.Push(context.Background(), &in)
	if err != nil || tk != 0 {
		t.Fatalf("push: ticket %d, %v", tk, err)
	}
	first, n := c.Poll(buf[:])
	in.Seq = 1
	if first != 0 || n != 1 || buf[0] != in {
		t.Fatalf("poll: first %d n %d desc %+v, want %+v", first, n, buf[0], in)
	}
	if p.Tail() != 1 {
		t.Fatalf("tail %d after poll", p.Tail())
	}
	c.SetCompleted(1)
	if err := p.Quiet(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.SetError(RingErrRemote, errors.New("boom"))
	if err := p.Err(); !errors.Is(err, ErrRing) {
		t.Fatalf("producer sees %v", err)
	}
}

// Many producers, a tiny ring that wraps thousands of times: every descriptor arrives exactly
// once, each producer's in its own order, and Quiet returns only after its descriptors completed.
func TestRingManyProducers(t *testing.T) {
	for _, capacity := range []int{4, 16, 256} {
		r, err := AllocRing(capacity)
		if err != nil {
			t.Fatal(err)
		}
		const producers, per = 8, 3000
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		stop := make(chan struct{})
		seen := make([]int, producers)
		var consumerErr error
		done := make(chan struct{})
		go func() { // the consumer
			defer close(done)
			buf := make([]Desc, 3)
			var b Backoff
			for {
				first, n := r.Poll(buf)
				if n == 0 {
					select {
					case <-stop:
						return
					default:
					}
					b.Wait()
					continue
				}
				b.Reset()
				for i := 0; i < n; i++ {
					d := buf[i]
					if d.Seq != first+uint64(i)+1 {
						consumerErr = errors.New("sequence out of order")
					}
					if int(d.Value) != seen[d.PE] {
						consumerErr = errors.New("producer order broken")
					}
					seen[d.PE]++
				}
				r.SetCompleted(first + uint64(n))
			}
		}()
		var wg sync.WaitGroup
		errs := make(chan error, producers)
		for p := 0; p < producers; p++ {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				for i := 0; i < per; i++ {
					if _, err := r.Push(ctx, &Desc{Op: OpPut, PE: uint32(p), Value: uint64(i)}); err != nil {
						errs <- err
						return
					}
					if i%500 == 499 {
						if err := r.Quiet(ctx); err != nil {
							errs <- err
							return
						}
						if r.Completed() < uint64(i+1) {
							errs <- errors.New("quiet returned before completion")
						}
					}
				}
			}(p)
		}
		wg.Wait()
		if err := r.Quiet(ctx); err != nil {
			t.Fatal(err)
		}
		close(stop)
		<-done
		cancel()
		close(errs)
		for err := range errs {
			t.Fatalf("capacity %d: %v", capacity, err)
		}
		if consumerErr != nil {
			t.Fatalf("capacity %d: %v", capacity, consumerErr)
		}
		for p, n := range seen {
			if n != per {
				t.Fatalf("capacity %d: producer %d: %d descriptors consumed, want %d", capacity, p, n, per)
			}
		}
		if r.Head() != producers*per || r.Completed() != producers*per {
			t.Fatalf("capacity %d: head %d completed %d", capacity, r.Head(), r.Completed())
		}
	}
}

// A full ring holds the next producer until the consumer frees a slot; it never overwrites an
// unconsumed descriptor.
func TestRingFull(t *testing.T) {
	r, _ := AllocRing(4)
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		if _, err := r.Push(ctx, &Desc{Op: OpPut, Value: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	pushed := make(chan error, 1)
	go func() {
		_, err := r.Push(ctx, &Desc{Op: OpPut, Value: 4})
		pushed <- err
	}()
	// The fifth push cannot finish while the ring is full: give it time to do damage if it would.
	for i := 0; i < 50; i++ {
		select {
		case err := <-pushed:
			t.Fatalf("push into a full ring returned (%v)", err)
		default:
			time.Sleep(time.Millisecond)
		}
	}
	var buf [4]Desc
	first, n := r.Poll(buf[:1])
	if first != 0 || n != 1 || buf[0].Value != 0 {
		t.Fatalf("poll: %d %d %+v", first, n, buf[0])
	}
	if err := <-pushed; err != nil {
		t.Fatal(err)
	}
	first, n = r.Poll(buf[:])
	if first != 1 || n != 4 {
		t.Fatalf("poll: first %d n %d", first, n)
	}
	for i := 0; i < n; i++ {
		if buf[i].Value != uint64(i+1) {
			t.Fatalf("slot %d holds value %d, want %d", i, buf[i].Value, i+1)
		}
	}
}

// A producer that gives up on a full ring fails the ring instead of leaving a hole that would
// stall the consumer forever; waiters then return the error.
func TestRingAbandonedReserve(t *testing.T) {
	r, _ := AllocRing(2)
	bg := context.Background()
	r.Push(bg, &Desc{})
	r.Push(bg, &Desc{})
	ctx, cancel := context.WithTimeout(bg, 5*time.Millisecond)
	defer cancel()
	if _, err := r.Reserve(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reserve on a full ring: %v", err)
	}
	var re *RingError
	if err := r.Quiet(bg); !errors.As(err, &re) || re.Code != RingErrAbort {
		t.Fatalf("quiet after abandoned reserve: %v", err)
	}
}

// Quiet and WaitCompleted return the proxy's error, and honour their context.
func TestRingQuietErrors(t *testing.T) {
	r, _ := AllocRing(4)
	bg := context.Background()
	tk, _ := r.Push(bg, &Desc{Op: OpPut})
	ctx, cancel := context.WithTimeout(bg, 5*time.Millisecond)
	defer cancel()
	if err := r.Quiet(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("quiet with nothing completed: %v", err)
	}
	cause := errors.New("peer 3 lost")
	r.SetError(RingErrRemote, cause)
	r.SetError(RingErrInput, errors.New("second"))
	err := r.WaitCompleted(bg, tk)
	var re *RingError
	if !errors.As(err, &re) || re.Code != RingErrRemote || !errors.Is(err, cause) {
		t.Fatalf("wait after error: %v", err)
	}
}
