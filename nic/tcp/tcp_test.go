package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/nic"
)

// memHeap is a bounds-checked symmetric heap in aligned Go memory.
type memHeap struct{ b []byte }

// heapMu orders the tests' own writes to a heap (fill) before the transport's reader takes the
// heap's bytes (Bytes): in a real job the network orders them, which the race detector cannot
// see through a socket.
var heapMu sync.Mutex

func newHeap(n int) *memHeap { return &memHeap{nic.AlignedBytes(n)} }

func (h *memHeap) Bytes(off uint64, n int) ([]byte, error) {
	if n < 0 || off > uint64(len(h.b)) || uint64(n) > uint64(len(h.b))-off {
		return nil, fmt.Errorf("range [%#x, %#x) outside the %d-byte heap", off, off+uint64(n), len(h.b))
	}
	heapMu.Lock()
	defer heapMu.Unlock()
	return h.b[off : off+uint64(n) : off+uint64(n)], nil
}

func (h *memHeap) word(off uint64) *uint64 { return (*uint64)(unsafe.Pointer(&h.b[off])) }

type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.b, format+"\n", args...)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type job struct {
	ts    []*Transport
	heaps []*memHeap
	logs  []*logBuf
}

// start makes n connected transports on loopback. heapSizes[pe] overrides the heap size.
func start(t testing.TB, n int, heapSize int, timeout time.Duration, heapSizes ...int) *job {
	t.Helper()
	j := &job{}
	addrs := make([]string, n)
	for pe := 0; pe < n; pe++ {
		size := heapSize
		if pe < len(heapSizes) && heapSizes[pe] > 0 {
			size = heapSizes[pe]
		}
		h := newHeap(size)
		l := &logBuf{}
		tr, err := New(Config{PE: pe, NPEs: n, Token: "job-token", Listen: "127.0.0.1:0", Heap: h, Timeout: timeout, Logf: l.logf})
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

func connect(t testing.TB, ts []*Transport, addrs []string) {
	t.Helper()
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, tr := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = tr.Connect(context.Background(), addrs)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>8)
	}
	return b
}

func fill(b []byte, v byte) {
	heapMu.Lock()
	defer heapMu.Unlock()
	for i := range b {
		b[i] = v
	}
}

// checkOnly fails unless heap holds want at off and the guard byte everywhere else.
func checkOnly(t *testing.T, h *memHeap, off int, want []byte, guard byte) {
	t.Helper()
	if !bytes.Equal(h.b[off:off+len(want)], want) {
		t.Fatalf("heap [%#x, %#x) does not hold the data put there", off, off+len(want))
	}
	for i, c := range h.b {
		if (i < off || i >= off+len(want)) && c != guard {
			t.Fatalf("heap byte %#x outside the destination [%#x, %#x) was written: %#x", i, off, off+len(want), c)
		}
	}
}

func TestPutGetQuiet(t *testing.T) {
	j := start(t, 3, 1<<20, 10*time.Second)
	for _, size := range []int{1, 8, 1000, directThreshold - 1, directThreshold, 300000} {
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
		fill(src, 0) // Put returned: src may be reused
		if err := j.ts[0].Quiet(context.Background(), -1); err != nil {
			t.Fatal(err)
		}
		want := pattern(size, byte(size))
		for pe := 0; pe < 3; pe++ {
			checkOnly(t, j.heaps[pe], off, want, 0xee)
		}
		got := make([]byte, size)
		if err := j.ts[2].Get(1, uint64(off), got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("size %d: get returned other bytes than were put", size)
		}
	}
}

// A get after puts to the same PE sees them without a quiet: one ordered connection.
func TestPutThenGetOrdered(t *testing.T) {
	j := start(t, 2, 1<<16, 10*time.Second)
	tr := j.ts[0]
	var buf [8]byte
	tr.BeginBatch()
	for i := uint64(1); i <= 2000; i++ {
		binary.LittleEndian.PutUint64(buf[:], i)
		if err := tr.Put(1, 64, buf[:]); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			var got [8]byte
			if err := tr.Get(1, 64, got[:]); err != nil {
				t.Fatal(err)
			}
			if v := binary.LittleEndian.Uint64(got[:]); v != i {
				t.Fatalf("get after put %d read %d", i, v)
			}
		}
	}
	if err := tr.EndBatch(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Quiet(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
}

func TestAMO(t *testing.T) {
	j := start(t, 2, 1<<12, 10*time.Second)
	tr, h := j.ts[0], j.heaps[1]
	type tc struct {
		op             nic.AMOOp
		width          int
		init, v, c     uint64
		wantOld, after uint64
	}
	cases := []tc{
		{nic.AMOFetch, 8, 41, 0, 0, 41, 41},
		{nic.AMOSet, 8, 41, 7, 0, 41, 7},
		{nic.AMOSwap, 8, 41, 1 << 40, 0, 41, 1 << 40},
		{nic.AMOCompareSwap, 8, 41, 9, 41, 41, 9},
		{nic.AMOCompareSwap, 8, 41, 9, 40, 41, 41},
		{nic.AMOFetchAdd, 8, 41, 1, 0, 41, 42},
		{nic.AMOFetchAnd, 8, 0b1100, 0b1010, 0, 0b1100, 0b1000},
		{nic.AMOFetchOr, 8, 0b1100, 0b1010, 0, 0b1100, 0b1110},
		{nic.AMOFetchXor, 8, 0b1100, 0b1010, 0, 0b1100, 0b0110},
		{nic.AMOFetchAdd, 4, 0xffffffff, 2, 0, 0xffffffff, 1},
		{nic.AMOCompareSwap, 4, 5, 6, 5, 5, 6},
		{nic.AMOFetchXor, 4, 0xf0f0, 0xff, 0, 0xf0f0, 0xf00f},
	}
	for _, c := range cases {
		fill(h.b, 0xee)
		const off = 128
		if c.width == 8 {
			binary.LittleEndian.PutUint64(h.b[off:], c.init)
		} else {
			binary.LittleEndian.PutUint32(h.b[off:], uint32(c.init))
		}
		old, err := tr.AMO(1, c.op, c.width, off, c.v, c.c)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		var after uint64
		if c.width == 8 {
			after = binary.LittleEndian.Uint64(h.b[off:])
		} else {
			after = uint64(binary.LittleEndian.Uint32(h.b[off:]))
		}
		if old != c.wantOld || after != c.after {
			t.Errorf("%v width %d on %#x with %#x/%#x: old %#x after %#x, want %#x %#x", c.op, c.width, c.init, c.v, c.c, old, after, c.wantOld, c.after)
		}
		for i, b := range h.b {
			if (i < off || i >= off+c.width) && b != 0xee {
				t.Fatalf("%v wrote heap byte %#x", c.op, i)
			}
		}
	}
	if _, err := tr.AMO(1, nic.AMOFetchAdd, 8, 4, 1, 0); err == nil || !strings.Contains(err.Error(), "aligned") {
		t.Errorf("misaligned AMO: %v", err)
	}
	if _, err := tr.AMO(1, nic.AMOFetchAdd, 2, 8, 1, 0); err == nil {
		t.Errorf("2-byte AMO accepted")
	}
}

// Fetch-adds from every PE onto one word are atomic: the old values are a permutation.
func TestAMOAtomicity(t *testing.T) {
	const n, per = 4, 300
	j := start(t, n, 1<<12, 10*time.Second)
	seen := make([][]uint64, n)
	var wg sync.WaitGroup
	for pe := 0; pe < n; pe++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				old, err := j.ts[pe].AMO(0, nic.AMOFetchAdd, 8, 256, 1, 0)
				if err != nil {
					t.Error(err)
					return
				}
				seen[pe] = append(seen[pe], old)
			}
		}()
	}
	wg.Wait()
	got := map[uint64]bool{}
	for _, s := range seen {
		for _, v := range s {
			if got[v] {
				t.Fatalf("old value %d returned twice", v)
			}
			got[v] = true
		}
	}
	if v := atomic.LoadUint64(j.heaps[0].word(256)); v != n*per || len(got) != n*per {
		t.Fatalf("counter %d, %d distinct old values; want %d", v, len(got), n*per)
	}
}

// The signal never becomes visible before its data.
func TestPutSignalDataFirst(t *testing.T) {
	const rounds, size = 2000, 256
	j := start(t, 2, (rounds+2)*size, 10*time.Second)
	const sigOff = 64
	dataOff := func(i uint64) uint64 { return size * (i + 1) }
	done := make(chan error, 1)
	go func() {
		h := j.heaps[1]
		var last uint64
		for last < rounds {
			s := atomic.LoadUint64(h.word(sigOff))
			if s == last {
				runtime.Gosched()
				continue
			}
			// Every byte of round s's payload must be there (no later round writes it).
			for k := uint64(0); k < size; k += 8 {
				if d := binary.LittleEndian.Uint64(h.b[dataOff(s)+k:]); d != s {
					done <- fmt.Errorf("signal %d visible with data %d at +%d", s, d, k)
					return
				}
			}
			last = s
		}
		done <- nil
	}()
	payload := make([]byte, size)
	for i := uint64(1); i <= rounds; i++ {
		for k := 0; k < len(payload); k += 8 {
			binary.LittleEndian.PutUint64(payload[k:], i)
		}
		if err := j.ts[0].PutSignal(1, dataOff(i), payload, sigOff, nic.SignalSet, i); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("signals never arrived")
	}
	if err := j.ts[0].PutSignal(1, dataOff(0), payload[:8], sigOff, nic.SignalAdd, 5); err != nil {
		t.Fatal(err)
	}
	if err := j.ts[0].Quiet(context.Background(), -1); err != nil {
		t.Fatal(err)
	}
	if v := atomic.LoadUint64(j.heaps[1].word(sigOff)); v != rounds+5 {
		t.Fatalf("signal after add: %d", v)
	}
}

// Bad ranges are refused with the op, the PE and the range, and write nothing: by the issuer
// when its own (symmetric) heap says so, by the target otherwise.
func TestBadRange(t *testing.T) {
	j := start(t, 2, 1<<12, 10*time.Second, 1<<14, 1<<12)
	fill(j.heaps[1].b, 0xee)
	tr := j.ts[0]
	err := tr.Put(1, 1<<14-4, make([]byte, 8))
	if err == nil || !strings.Contains(err.Error(), "put") || !strings.Contains(err.Error(), "PE 1") || !strings.Contains(err.Error(), "0x3ffc") {
		t.Fatalf("put past the issuer's heap: %v", err)
	}
	if err := tr.Put(5, 0, make([]byte, 8)); err == nil || !strings.Contains(err.Error(), "PE 5") {
		t.Fatalf("put to PE 5 of 2: %v", err)
	}
	// Within PE 0's heap, past PE 1's: the target refuses it and Quiet reports it.
	if err := tr.Put(1, 1<<12-4, pattern(100, 1)); err != nil {
		t.Fatal(err)
	}
	if err := tr.Put(1, 1<<12+100, pattern(5000, 1)); err != nil {
		t.Fatal(err)
	}
	err = tr.Quiet(context.Background(), -1)
	if err == nil || !strings.Contains(err.Error(), "put from PE 0 to PE 1 heap [0xffc, 0x1060)") {
		t.Fatalf("quiet after a put past the target's heap: %v", err)
	}
	for i, b := range j.heaps[1].b {
		if b != 0xee {
			t.Fatalf("refused put wrote heap byte %#x", i)
		}
	}
	if err := tr.Get(1, 1<<12, make([]byte, 8)); err == nil || !strings.Contains(err.Error(), "get") {
		t.Fatalf("get past the target's heap: %v", err)
	}
	// The connection is still good.
	if err := tr.Put(1, 8, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Quiet(context.Background(), -1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(j.heaps[1].b[8:11], []byte{1, 2, 3}) {
		t.Fatal("put after a refused one did not land")
	}
}

// A PE holding a different job token is refused, whichever side of the connection it is on, and
// the good PE logs the refusal; a connection that speaks garbage is refused too.
func TestWrongToken(t *testing.T) {
	for bad := 0; bad < 2; bad++ {
		var ts [2]*Transport
		var logs [2]*logBuf
		for pe := range ts {
			tok := "right"
			if pe == bad {
				tok = "wrong"
			}
			logs[pe] = &logBuf{}
			tr, err := New(Config{PE: pe, NPEs: 2, Token: tok, Listen: "127.0.0.1:0", Heap: newHeap(4096), Timeout: 2 * time.Second, Logf: logs[pe].logf})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			ts[pe] = tr
		}
		addrs := []string{ts[0].Addr(), ts[1].Addr()}
		var errs [2]error
		var wg sync.WaitGroup
		for pe := range ts {
			wg.Add(1)
			go func() { defer wg.Done(); errs[pe] = ts[pe].Connect(context.Background(), addrs) }()
		}
		wg.Wait()
		good := 1 - bad
		if errs[0] == nil || errs[1] == nil {
			t.Fatalf("bad PE %d: connect succeeded: %v, %v", bad, errs[0], errs[1])
		}
		if good == 0 && !errors.Is(errs[good], ErrAuth) {
			t.Fatalf("good PE 0 dialing a PE with another token: %v", errs[good])
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			l := logs[good].String()
			if strings.Contains(l, "refused") && strings.Contains(l, "job token") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("bad PE %d: refusal not logged by PE %d; log:\n%s", bad, good, l)
			}
		}
		if err := ts[bad].Put(good, 0, []byte{1}); err == nil {
			t.Fatalf("bad PE %d could put", bad)
		}
	}
	// A raw connection that speaks garbage is refused and logged too.
	logs := &logBuf{}
	tr, err := New(Config{PE: 1, NPEs: 2, Token: "right", Listen: "127.0.0.1:0", Heap: newHeap(4096), Timeout: 2 * time.Second, Logf: logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	c, err := net.Dial("tcp", tr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Write(bytes.Repeat([]byte("x"), helloSize))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _ := c.Read(make([]byte, 1)); n != 0 {
		t.Fatal("garbage hello was answered")
	}
	c.Close()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "refused connection"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("garbage connection not logged: %s", logs.String())
		}
	}
}

// The target's connection is reset in the middle of a stream of large puts: the pending and
// every later operation to it fail with an error naming the PE; nothing hangs.
func TestPeerResetMidTransfer(t *testing.T) {
	j := start(t, 3, 8<<20, 5*time.Second)
	src := pattern(4<<20, 3)
	errc := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			if err := j.ts[0].Put(1, 0, src); err != nil {
				errc <- err
				return
			}
			if i == 2 {
				// Reset PE 1's end of the connection with an RST while data flows.
				c := j.ts[1].peers[0].Load().conn
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}
		}
	}()
	var err error
	select {
	case err = <-errc:
	case <-time.After(30 * time.Second):
		t.Fatal("puts to a reset peer never failed")
	}
	if !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), "PE 1") {
		t.Fatalf("put to a reset peer: %v", err)
	}
	if err := j.ts[0].Quiet(context.Background(), 1); !errors.Is(err, ErrPeerLost) {
		t.Fatalf("quiet after reset: %v", err)
	}
	if _, err := j.ts[0].AMO(1, nic.AMOFetch, 8, 0, 0, 0); !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), "PE 1") {
		t.Fatalf("amo after reset: %v", err)
	}
	// Other PEs are unaffected.
	if err := j.ts[0].Put(2, 0, src[:100]); err != nil {
		t.Fatal(err)
	}
	if err := j.ts[0].Quiet(context.Background(), -1); err == nil {
		t.Fatal("quiet of all PEs hid PE 1's failure")
	}
	if err := j.ts[0].Quiet(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(j.logs[0].String(), "connection lost: PE 1") {
		t.Fatalf("the lost peer was not logged:\n%s", j.logs[0].String())
	}
}

// A peer that authenticates and then goes silent (its host vanished) fails a get, a quiet and
// puts within the timeout, naming the PE.
func TestSilentPeerTimesOut(t *testing.T) {
	tr, err := New(Config{PE: 0, NPEs: 2, Token: "tok", Listen: "127.0.0.1:0", Heap: newHeap(4096), Timeout: 300 * time.Millisecond, Logf: (&logBuf{}).logf})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// A fake PE 1 that completes the handshake and never reads again.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stall := make(chan struct{})
	fake, err := New(Config{PE: 1, NPEs: 2, Token: "tok", Listener: ln, Heap: stallHeap{stall}, Timeout: time.Minute, Logf: (&logBuf{}).logf})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	defer close(stall) // before fake.Close, which waits for the stalled session
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Dial PE 1 from PE 0 only; PE 1's session stalls on its first request.
	if err := tr.dial(ctx, 1, 0, fake.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := tr.Get(1, 0, make([]byte, 8)); !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "PE 1") {
		t.Fatalf("get from a silent peer: %v", err)
	}
	if err := tr.Put(1, 0, make([]byte, 8)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("put after the timeout: %v", err)
	}
}

type stallHeap struct{ c chan struct{} }

func (s stallHeap) Bytes(off uint64, n int) ([]byte, error) {
	<-s.c
	return nil, errors.New("stalled")
}

func TestCloseFailsPending(t *testing.T) {
	j := start(t, 2, 1<<12, 10*time.Second)
	j.ts[0].Close()
	if err := j.ts[0].Put(1, 0, []byte{1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("put after close: %v", err)
	}
	// PE 1 learns from the connection that PE 0 closed, and fails its ops to PE 0.
	deadline := time.Now().Add(10 * time.Second)
	for j.ts[1].Fence(0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("PE 1 never learned that PE 0 closed")
		}
		time.Sleep(time.Millisecond)
	}
	for _, err := range []error{j.ts[1].Fence(0), j.ts[1].Put(0, 0, []byte{1}), j.ts[1].Get(0, 0, make([]byte, 1))} {
		if !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), "PE 0: it closed its transport") {
			t.Fatalf("op to a closed PE: %v", err)
		}
	}
	// PE 0 said goodbye: PE 1 does not report it as lost.
	if l := j.logs[1].String(); l != "" {
		t.Fatalf("a PE that closed its transport was logged as lost:\n%s", l)
	}
}

// The acceptor may put the moment its Connect returns, while the dialer is still finishing the
// handshake: the put must not be taken for the handshake's last byte.
func TestAcceptorPutsFirst(t *testing.T) {
	for round := 0; round < 20; round++ {
		var ts [2]*Transport
		var hs [2]*memHeap
		for pe := range ts {
			hs[pe] = newHeap(4096)
			tr, err := New(Config{PE: pe, NPEs: 2, Token: "tok", Listen: "127.0.0.1:0", Heap: hs[pe], Timeout: 5 * time.Second, Logf: (&logBuf{}).logf})
			if err != nil {
				t.Fatal(err)
			}
			ts[pe] = tr
		}
		addrs := []string{ts[0].Addr(), ts[1].Addr()}
		errc := make(chan error, 1)
		go func() {
			err := ts[1].Connect(context.Background(), addrs)
			if err == nil {
				err = ts[1].Put(0, 8, []byte("first"))
			}
			if err == nil {
				err = ts[1].Quiet(context.Background(), 0)
			}
			errc <- err
		}()
		if err := ts[0].Connect(context.Background(), addrs); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if string(hs[0].b[8:13]) != "first" {
			t.Fatalf("round %d: put not delivered", round)
		}
		ts[0].Close()
		ts[1].Close()
	}
}
