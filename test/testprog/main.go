// Testprog is the PE side of the integration tests: each scenario runs on every PE of a roxrun job
// and exits non-zero with a message when something is wrong.
package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/shmem"
)

// scenarios maps a scenario name to its PE-side body. Files of this package add their own in init,
// so that independent groups of scenarios live in files of their own.
var scenarios = map[string]func(context.Context, *shmem.World) error{
	"api":      api,
	"badinput": badInput,
	"kill":     kill,
	"exit":     globalExit,
	"hang":     hang,
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testprog api|badinput|kill|exit|hang")
		os.Exit(2)
	}
	run, ok := scenarios[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "testprog: unknown scenario %q\n", os.Args[1])
		os.Exit(2)
	}
	ctx := context.Background()
	w, err := shmem.Init(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testprog:", err)
		os.Exit(1)
	}
	if err := run(ctx, w); err != nil {
		fmt.Fprintf(os.Stderr, "testprog %s: PE %d: %v\n", os.Args[1], w.MyPE(), err)
		os.Exit(1)
	}
	if err := w.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "testprog:", err)
		os.Exit(1)
	}
	if w.MyPE() == 0 {
		fmt.Printf("%s: ok on %d PEs\n", os.Args[1], w.NPEs())
	}
}

// api exercises every host call between all PEs on fresh random data.
func api(ctx context.Context, w *shmem.World) error {
	me, n := w.MyPE(), w.NPEs()
	right, left := (me+1)%n, (me+n-1)%n
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, uint64(me)))

	// Put/Get/P/G/NBI on a poisoned destination: every element written, nothing beside it.
	const length = 1000
	dst, err := shmem.Alloc[int32](w, length+2)
	if err != nil {
		return err
	}
	for i := range dst.Local() {
		dst.Local()[i] = -1
	}
	data := make([]int32, length)
	for i := range data {
		data[i] = int32(rng.Uint32() >> 1)
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	if err := dst.Put(1, data, right); err != nil {
		return err
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	// Check what the left neighbour sent by reading it back from our own heap and from theirs.
	got := make([]int32, length)
	if err := dst.Get(1, got, right); err != nil {
		return err
	}
	for i := range got {
		if got[i] != data[i] {
			return fmt.Errorf("Get from PE %d: element %d is %d, put %d", right, i, got[i], data[i])
		}
	}
	local := dst.Local()
	if local[0] != -1 || local[length+1] != -1 {
		return fmt.Errorf("Put from PE %d wrote outside [1,%d]: %d %d", left, length, local[0], local[length+1])
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	// P/G single elements and the NBI forms.
	if err := dst.P(0, int32(1000+me), right); err != nil {
		return err
	}
	if err := dst.PutNBI(length+1, []int32{int32(2000 + me)}, right); err != nil {
		return err
	}
	if err := w.Quiet(); err != nil {
		return err
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	if v, err := dst.G(0, me); err != nil || v != int32(1000+left) {
		return fmt.Errorf("G: %d, %v; want %d", v, err, 1000+left)
	}
	nb := make([]int32, 1)
	if err := dst.GetNBI(length+1, nb, me); err != nil {
		return err
	}
	if err := w.Quiet(); err != nil {
		return err
	}
	if nb[0] != int32(2000+left) {
		return fmt.Errorf("GetNBI after PutNBI: %d, want %d", nb[0], 2000+left)
	}

	// Strided: every third element of src into every second element of the target.
	str, err := shmem.Alloc[float64](w, 64)
	if err != nil {
		return err
	}
	src := make([]float64, 90)
	for i := range src {
		src[i] = float64(me*1000 + i)
	}
	if err := str.IPut(1, 2, src, 3, 30, right); err != nil {
		return err
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	for k := 0; k < 30; k++ {
		if v := str.Local()[1+2*k]; v != float64(left*1000+3*k) {
			return fmt.Errorf("IPut: element %d is %v, want %v", 1+2*k, v, float64(left*1000+3*k))
		}
		if v := str.Local()[2*k]; v != 0 {
			return fmt.Errorf("IPut wrote element %d between strides: %v", 2*k, v)
		}
	}
	back := make([]float64, 60)
	if err := str.IGet(1, 2, back, 2, 30, right); err != nil {
		return err
	}
	for k := 0; k < 30; k++ {
		if back[2*k] != float64(me*1000+3*k) || back[2*k+1] != 0 {
			return fmt.Errorf("IGet: element %d is %v", 2*k, back[2*k])
		}
	}

	// AMOs of every width and kind, all PEs on PE 0's words at once.
	if err := amoAll[int32](ctx, w); err != nil {
		return fmt.Errorf("int32: %w", err)
	}
	if err := amoAll[int64](ctx, w); err != nil {
		return fmt.Errorf("int64: %w", err)
	}
	if err := amoAll[uint32](ctx, w); err != nil {
		return fmt.Errorf("uint32: %w", err)
	}
	if err := amoAll[uint64](ctx, w); err != nil {
		return fmt.Errorf("uint64: %w", err)
	}
	fl, err := shmem.Alloc[float64](w, 1)
	if err != nil {
		return err
	}
	if err := shmem.AtomicSet(fl, 0, 2.5, right); err != nil {
		return err
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	if old, err := shmem.AtomicSwap(fl, 0, 7.25, me); err != nil || old != 2.5 {
		return fmt.Errorf("float64 swap: old %v, %v", old, err)
	}
	if v, err := shmem.AtomicFetch(fl, 0, me); err != nil || v != 7.25 {
		return fmt.Errorf("float64 fetch: %v, %v", v, err)
	}

	// Put-with-signal: the left neighbour sends a block and a signal; the data is there when the
	// signal is.
	blk, err := shmem.Alloc[uint64](w, 4096)
	if err != nil {
		return err
	}
	sig, err := shmem.Alloc[uint64](w, 2)
	if err != nil {
		return err
	}
	payload := make([]uint64, 4096)
	for round := uint64(1); round <= 20; round++ {
		for i := range payload {
			payload[i] = round<<32 | uint64(me)<<16 | uint64(i)
		}
		if err := shmem.PutSignalNBI(blk, 0, payload, sig, 0, round, shmem.SignalSet, right); err != nil {
			return err
		}
		if _, err := shmem.SignalWaitUntil(ctx, sig, 0, shmem.CmpGE, round); err != nil {
			return err
		}
		for i, v := range blk.Local() {
			if v != round<<32|uint64(left)<<16|uint64(i) {
				return fmt.Errorf("put_signal round %d: element %d is %#x before the data arrived", round, i, v)
			}
		}
		// Nobody overwrites blk before its owner has checked it.
		if err := w.BarrierAll(ctx); err != nil {
			return err
		}
	}
	// Signal add from every PE; the wait variants on a set of flags.
	if err := shmem.PutSignal(blk, 0, payload[:1], sig, 1, 1, shmem.SignalAdd, 0); err != nil {
		return err
	}
	if me == 0 {
		v, err := shmem.SignalWaitUntil(ctx, sig, 1, shmem.CmpEQ, uint64(n))
		if err != nil {
			return err
		}
		if f, _ := shmem.SignalFetch(sig, 1); f != v || v != uint64(n) {
			return fmt.Errorf("signal add: %d then %d, want %d", v, f, n)
		}
	}
	flags, err := shmem.Alloc[int64](w, n)
	if err != nil {
		return err
	}
	if err := flags.P(me, 1, right); err != nil {
		return err
	}
	if idx, err := shmem.WaitUntilAny(ctx, flags, nil, shmem.CmpEQ, 1); err != nil || idx != left {
		return fmt.Errorf("WaitUntilAny: %d, %v; want %d", idx, err, left)
	}
	if ok, err := shmem.Test(flags, left, shmem.CmpEQ, 1); err != nil || !ok {
		return fmt.Errorf("Test: %v, %v", ok, err)
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	for pe := 0; pe < n; pe++ {
		if err := flags.P(me, 1, pe); err != nil {
			return err
		}
	}
	if err := shmem.WaitUntilAll(ctx, flags, nil, shmem.CmpEQ, 1); err != nil {
		return err
	}
	if ok, _ := shmem.TestAll(flags, nil, shmem.CmpEQ, 1); !ok {
		return errors.New("TestAll false after WaitUntilAll")
	}
	some, err := shmem.WaitUntilSome(ctx, flags, nil, shmem.CmpEQ, 1)
	if err != nil || len(some) != n {
		return fmt.Errorf("WaitUntilSome: %v, %v", some, err)
	}
	mask := make([]bool, n)
	for i := range mask {
		mask[i] = true
	}
	if idx, err := shmem.TestAny(flags, mask, shmem.CmpEQ, 1); err != nil || idx != -1 {
		return fmt.Errorf("TestAny with all masked: %d, %v", idx, err)
	}

	// Ptr gives direct access to a peer's copy when its heap is mapped here: always on one node
	// with the default transport, never through the NIC path. Where it is given it must alias.
	p := flags.Ptr(right)
	oneNode := os.Getenv("ROX_NODE") == "" && w.LocalNPEs() == n && (os.Getenv("ROX_TRANSPORT") == "" || os.Getenv("ROX_TRANSPORT") == "auto")
	if oneNode && (p == nil || len(p) != n) {
		return fmt.Errorf("Ptr(%d) on one node: %v", right, p)
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	if p != nil {
		p[me] = 5 // our slot in the right neighbour's copy; only we write it
		if v, err := flags.G(me, right); err != nil || v != 5 {
			return fmt.Errorf("a store through Ptr(%d) is not seen by G: %d, %v", right, v, err)
		}
	}
	if err := w.SyncAll(ctx); err != nil {
		return err
	}

	// Realloc keeps contents; Free then reuse.
	m, err := w.Malloc(256)
	if err != nil {
		return err
	}
	for i := range m.Local() {
		m.Local()[i] = byte(i)
	}
	m2, err := w.Realloc(m, 1<<20)
	if err != nil {
		return err
	}
	for i, b := range m2.Local()[:256] {
		if b != byte(i) {
			return fmt.Errorf("Realloc lost byte %d", i)
		}
	}
	if err := w.Free(m2); err != nil {
		return err
	}
	al, err := w.Align(4096, 100)
	if err != nil {
		return err
	}
	if al.Offset()%4096 != 0 {
		return fmt.Errorf("Align(4096): offset %d", al.Offset())
	}
	return w.Free(al)
}

// amoAll has every PE run each AMO on PE 0's words and checks the totals.
func amoAll[T shmem.AMOBit](ctx context.Context, w *shmem.World) error {
	me, n := w.MyPE(), w.NPEs()
	x, err := shmem.Alloc[T](w, 8)
	if err != nil {
		return err
	}
	const adds = 200
	for i := 0; i < adds; i++ {
		if _, err := shmem.AtomicFetchAdd(x, 0, T(1), 0); err != nil {
			return err
		}
		if err := shmem.AtomicInc(x, 1, 0); err != nil {
			return err
		}
	}
	if err := shmem.AtomicOr(x, 2, T(1)<<me, 0); err != nil {
		return err
	}
	if _, err := shmem.AtomicFetchXor(x, 3, T(1)<<me, 0); err != nil {
		return err
	}
	// Exactly one PE wins the compare-swap.
	won := 0
	if old, err := shmem.AtomicCompareSwap(x, 4, 0, T(me+1), 0); err != nil {
		return err
	} else if old == 0 {
		won = 1
	}
	wins, err := shmem.Alloc[int64](w, 1)
	if err != nil {
		return err
	}
	if err := shmem.AtomicAdd(wins, 0, int64(won), 0); err != nil {
		return err
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	if me == 0 {
		v := x.Local()
		all := T(1)<<n - 1
		if v[0] != T(n*adds) || v[1] != T(n*adds) {
			return fmt.Errorf("fetch_add/inc: %d and %d, want %d", v[0], v[1], n*adds)
		}
		if v[2] != all || v[3] != all {
			return fmt.Errorf("or/xor: %#x and %#x, want %#x", v[2], v[3], all)
		}
		if wins.Local()[0] != 1 || v[4] == 0 {
			return fmt.Errorf("compare_swap: %d winners, value %d", wins.Local()[0], v[4])
		}
		if old, err := shmem.AtomicFetchAnd(x, 2, ^T(1), 0); err != nil || old != all {
			return fmt.Errorf("fetch_and: old %#x, %v", old, err)
		}
		if err := shmem.AtomicAnd(x, 3, T(0), 0); err != nil || v[3] != 0 || v[2] != all&^1 {
			return fmt.Errorf("and: %#x %#x, %v", v[2], v[3], err)
		}
		if old, err := shmem.AtomicSwap(x, 5, T(9), 0); err != nil || old != 0 {
			return fmt.Errorf("swap: old %d, %v", old, err)
		}
		if old, err := shmem.AtomicFetchInc(x, 5, 0); err != nil || old != 9 {
			return fmt.Errorf("fetch_inc: old %d, %v", old, err)
		}
		if err := shmem.AtomicXor(x, 5, T(10), 0); err != nil || v[5] != 0 {
			return fmt.Errorf("xor: %d, %v", v[5], err)
		}
		if f, err := shmem.AtomicFetchOr(x, 5, T(6), 0); err != nil || f != 0 || v[5] != 6 {
			return fmt.Errorf("fetch_or: %d, %v", v[5], err)
		}
	}
	return w.BarrierAll(ctx)
}

// badInput checks that each bad call fails with an error naming the call, the PE and the value,
// and writes nothing.
func badInput(ctx context.Context, w *shmem.World) error {
	me, n := w.MyPE(), w.NPEs()
	x, err := shmem.Alloc[int64](w, 4)
	if err != nil {
		return err
	}
	for i := range x.Local() {
		x.Local()[i] = 77
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	want := func(err error, kind error, call string, values ...string) error {
		if err == nil {
			return fmt.Errorf("%s: no error, want %v", call, kind)
		}
		if !errors.Is(err, kind) {
			return fmt.Errorf("%s: error %q is not %v", call, err, kind)
		}
		msg := err.Error()
		for _, s := range append([]string{call, fmt.Sprintf("PE %d", me)}, values...) {
			if !strings.Contains(msg, s) {
				return fmt.Errorf("%s: error %q does not name %q", call, msg, s)
			}
		}
		return nil
	}
	checks := []error{
		want(x.Put(0, []int64{1}, n), shmem.ErrPERange, "Put", fmt.Sprint(n)),
		want(x.Put(0, []int64{1}, -1), shmem.ErrPERange, "Put", "-1"),
		want(x.Put(3, []int64{1, 2}, 0), shmem.ErrBounds, "Put", "[3, 5)", "4-element"),
		want(x.Get(-1, make([]int64, 1), 0), shmem.ErrBounds, "Get", "-1"),
		want(x.P(4, 1, 0), shmem.ErrBounds, "P", "[4, 5)"),
		want(x.IPut(0, 2, make([]int64, 10), 1, 3, 0), shmem.ErrBounds, "IPut"),
		want(x.IPut(0, 1, make([]int64, 10), 1, -3, 0), shmem.ErrBadArgument, "IPut", "-3"),
		want(shmem.AtomicAdd(x, 9, 1, 0), shmem.ErrBounds, "AtomicAdd", "[9, 10)"),
		want(shmem.PutSignal(x, 0, []int64{1}, shmem.Sym[uint64]{}, 0, 1, shmem.SignalSet, 0), shmem.ErrNotSymmetric, "PutSignal", "signal"),
	}
	// A misaligned atomic: a 4-byte view of the heap that starts 2 bytes in.
	raw, err := w.Malloc(64)
	if err != nil {
		return err
	}
	odd, err := shmem.SymOf(w, unsafeInt32At(raw.Local(), 2))
	if err != nil {
		return err
	}
	checks = append(checks, want(func() error { _, err := shmem.AtomicFetchAdd(odd, 0, 1, 0); return err }(), shmem.ErrMisaligned, "AtomicFetchAdd", "offset"))
	// An address outside the symmetric heap.
	outside := make([]int32, 4)
	_, err = shmem.SymOf(w, outside)
	checks = append(checks, want(err, shmem.ErrNotSymmetric, "SymOf", "outside the symmetric heap"))
	// Negative size, a full heap.
	_, err = w.Malloc(-5)
	checks = append(checks, want(err, shmem.ErrBadArgument, "Malloc", "-5"))
	_, err = w.Malloc(1 << 40)
	checks = append(checks, want(err, shmem.ErrOutOfMemory, "Malloc", fmt.Sprint(1<<40)))
	for _, c := range checks {
		if c != nil {
			return c
		}
	}
	// Mismatched collective sizes name both PEs and sizes (only with more than one PE).
	if n > 1 {
		_, err := w.Malloc(100 + me)
		other := 1 - me
		if me > 1 {
			other = 0
		}
		if err := want(err, shmem.ErrMismatch, "Malloc", fmt.Sprintf("PE %d asked for %d bytes, PE %d for %d", me, 100+me, other, 100+other)); err != nil {
			return err
		}
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	// Nothing was written anywhere.
	for i, v := range x.Local() {
		if v != 77 {
			return fmt.Errorf("element %d changed to %d by a failed call", i, v)
		}
	}
	return nil
}

// kill: the last PE SIGKILLs itself while the others wait in a barrier.
func kill(ctx context.Context, w *shmem.World) error {
	if w.MyPE() == w.NPEs()-1 {
		time.Sleep(200 * time.Millisecond)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	err := w.BarrierAll(ctx)
	if err == nil {
		return errors.New("BarrierAll returned nil although a PE died")
	}
	return fmt.Errorf("barrier failed as expected: %w", err)
}

// globalExit: PE 0 ends the job with status 7 (or os.Args[2]) while the others wait.
func globalExit(ctx context.Context, w *shmem.World) error {
	status := 7
	if len(os.Args) > 2 {
		var err error
		if status, err = strconv.Atoi(os.Args[2]); err != nil {
			return err
		}
	}
	x, err := shmem.Alloc[int64](w, 1)
	if err != nil {
		return err
	}
	if w.MyPE() == 0 {
		time.Sleep(100 * time.Millisecond)
		w.GlobalExit(status)
	}
	return shmem.WaitUntil(ctx, x, 0, shmem.CmpEQ, 1)
}

// unsafeInt32At views four int32s of b starting at byte off (which need not be aligned).
func unsafeInt32At(b []byte, off int) []int32 {
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[off])), 4)
}

// hang: every PE waits for a value nobody writes; ROX_TIMEOUT must end it.
func hang(ctx context.Context, w *shmem.World) error {
	x, err := shmem.Alloc[int64](w, 1)
	if err != nil {
		return err
	}
	return shmem.WaitUntil(ctx, x, 0, shmem.CmpEQ, 1)
}
