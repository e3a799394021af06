package netns_test

// The NIC path between "hosts" (network namespaces): nic/tcp transports in two hosts, as two
// processes (this test binary re-executed under `ip netns exec`) and in one process with sockets
// placed in each namespace; the ring and the proxy in front of them; and the faults: a peer
// killed mid-transfer, a host torn down, a ring filled faster than drained, a bad descriptor, a
// wrong job token.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/nic"
	"github.com/roxamen/roxamen/nic/tcp"
	"github.com/roxamen/roxamen/test/netns"
)

const token = "netns-test-token"

type heap struct{ b []byte }

func newHeap(n int) *heap { return &heap{nic.AlignedBytes(n)} }

func (h *heap) Bytes(off uint64, n int) ([]byte, error) {
	if n < 0 || off > uint64(len(h.b)) || uint64(n) > uint64(len(h.b))-off {
		return nil, fmt.Errorf("range [%#x, %#x) outside the %d-byte heap", off, off+uint64(n), len(h.b))
	}
	return h.b[off : off+uint64(n) : off+uint64(n)], nil
}

func (h *heap) word(off uint64) *uint64 { return (*uint64)(unsafe.Pointer(&h.b[off])) }

// waitWord polls an 8-byte heap word until it equals want, for at most d.
func waitWord(h *heap, off, want uint64, d time.Duration) error {
	deadline := time.Now().Add(d)
	var b nic.Backoff
	for {
		v := atomic.LoadUint64(h.word(off))
		if v == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("heap word at %#x is %d after %v, want %d", off, v, d, want)
		}
		b.Wait()
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed ^ byte(i) ^ byte(i>>9)
	}
	return b
}

func needNetns(t *testing.T) *netns.Net {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	nt, err := netns.New(2, netns.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nt.Close() })
	return nt
}

type logs struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logs) logf(f string, a ...any) {
	l.mu.Lock()
	fmt.Fprintf(&l.b, f+"\n", a...)
	l.mu.Unlock()
}

func (l *logs) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// onHost makes a transport for pe whose sockets live in host h.
func onHost(t *testing.T, h *netns.Host, pe, npes int, tok string, hp *heap, timeout time.Duration, lg *logs) *tcp.Transport {
	t.Helper()
	ln, err := h.Listen("")
	if err != nil {
		t.Fatal(err)
	}
	if lg == nil {
		lg = &logs{}
	}
	tr, err := tcp.New(tcp.Config{PE: pe, NPEs: npes, Token: tok, Listener: ln, Dial: h.Dial, Heap: hp, Timeout: timeout, Logf: lg.logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func connectAll(ts ...*tcp.Transport) error {
	addrs := make([]string, len(ts))
	for i, tr := range ts {
		addrs[i] = tr.Addr()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, tr := range ts {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = tr.Connect(ctx, addrs) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Child process: PE 1 of 2, run in host 1 by the tests below.

const (
	sigOff  = 0
	ctrOff  = 8
	dataOff = 4096
	dataLen = 200000
)

// TestChildPE is not a test: it is PE 1 when the binary is re-executed by startChild.
func TestChildPE(t *testing.T) {
	role := os.Getenv("ROX_NETNS_CHILD")
	if role == "" {
		t.Skip("helper process for the multi-process tests")
	}
	if err := childPE(role); err != nil {
		fmt.Println("child error:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func childPE(role string) error {
	hp := newHeap(1 << 20)
	tr, err := tcp.New(tcp.Config{PE: 1, NPEs: 2, Token: token, Listen: os.Getenv("ROX_NETNS_LISTEN"), Heap: hp, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer tr.Close()
	fmt.Println("addr", tr.Addr())
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return errors.New("no peers line")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tr.Connect(ctx, strings.Fields(in.Text())[1:]); err != nil {
		return err
	}
	fmt.Println("connected")
	if role == "echo" {
		if err := waitWord(hp, sigOff, 1, 20*time.Second); err != nil {
			return err
		}
		if !bytes.Equal(hp.b[dataOff:dataOff+dataLen], pattern(dataLen, 1)) {
			return errors.New("data did not arrive before its signal")
		}
		old, err := tr.AMO(0, nic.AMOFetchAdd, 8, ctrOff, 5, 0)
		if err != nil {
			return err
		}
		if err := tr.PutSignal(0, dataOff, pattern(dataLen, 2), sigOff, nic.SignalSet, old+100); err != nil {
			return err
		}
		if err := tr.Quiet(ctx, -1); err != nil {
			return err
		}
		fmt.Println("done")
	}
	for in.Scan() { // until the parent says exit or goes away
		if in.Text() == "exit" {
			break
		}
	}
	return nil
}

type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	addr  string
}

func startChild(t *testing.T, h *netns.Host, role string) *child {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := h.Command(ctx, os.Args[0], "-test.run=^TestChildPE$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ROX_NETNS_CHILD="+role, "ROX_NETNS_LISTEN="+h.IP+":0")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	line := c.expect(t, "addr ")
	c.addr = strings.TrimPrefix(line, "addr ")
	return c
}

func (c *child) expect(t *testing.T, prefix string) string {
	t.Helper()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before printing %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
			if strings.HasPrefix(l, "child error") {
				t.Fatal(l)
			}
		case <-timer.C:
			t.Fatalf("child printed no %q within 30s", prefix)
		}
	}
}

// startJob runs PE 0 here (sockets in host 0) and PE 1 as a child process in host 1.
func startJob(t *testing.T, nt *netns.Net, role string, timeout time.Duration) (*tcp.Transport, *heap, *child) {
	t.Helper()
	hp := newHeap(1 << 20)
	tr := onHost(t, nt.Hosts[0], 0, 2, token, hp, timeout, nil)
	c := startChild(t, nt.Hosts[1], role)
	fmt.Fprintf(c.stdin, "peers %s %s\n", tr.Addr(), c.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tr.Connect(ctx, []string{tr.Addr(), c.addr}); err != nil {
		t.Fatal(err)
	}
	c.expect(t, "connected")
	return tr, hp, c
}

// Put, get, AMO and put-with-signal between two processes on two hosts.
func TestTransportAcrossHosts(t *testing.T) {
	nt := needNetns(t)
	tr, hp, c := startJob(t, nt, "echo", 10*time.Second)
	atomic.StoreUint64(hp.word(ctrOff), 37)
	if err := tr.PutSignal(1, dataOff, pattern(dataLen, 1), sigOff, nic.SignalSet, 1); err != nil {
		t.Fatal(err)
	}
	if err := waitWord(hp, sigOff, 137, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(hp.b[dataOff:dataOff+dataLen], pattern(dataLen, 2)) {
		t.Fatal("PE 1's put-with-signal data was not in place when its signal was")
	}
	if v := atomic.LoadUint64(hp.word(ctrOff)); v != 42 {
		t.Fatalf("PE 1's fetch-add left %d, want 42", v)
	}
	c.expect(t, "done")
	got := make([]byte, dataLen)
	if err := tr.Get(1, dataOff, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, pattern(dataLen, 1)) {
		t.Fatal("get from PE 1 returned other data than was put")
	}
	if old, err := tr.AMO(1, nic.AMOCompareSwap, 8, sigOff, 7, 1); err != nil || old != 1 {
		t.Fatalf("compare-swap on PE 1: old %d, %v", old, err)
	}
	if old, err := tr.AMO(1, nic.AMOFetch, 8, sigOff, 0, 0); err != nil || old != 7 {
		t.Fatalf("fetch on PE 1: %d, %v", old, err)
	}
	fmt.Fprintln(c.stdin, "exit")
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}

// Killing PE 1's process in the middle of a stream of large puts fails the pending and later
// operations to it, naming PE 1, without hanging.
func TestPeerKilledMidTransfer(t *testing.T) {
	nt := needNetns(t)
	tr, _, c := startJob(t, nt, "idle", 5*time.Second)
	src := pattern(4<<20, 3)
	var err error
	start := time.Now()
	for i := 0; err == nil; i++ {
		if i == 3 {
			c.cmd.Process.Signal(syscall.SIGKILL)
		}
		if err = tr.Put(1, 0, src[:1<<20]); err == nil && i%4 == 3 {
			err = tr.Quiet(context.Background(), 1)
		}
		if time.Since(start) > time.Minute {
			t.Fatal("operations to a killed PE kept succeeding")
		}
	}
	if !strings.Contains(err.Error(), "PE 1") || !(errors.Is(err, tcp.ErrPeerLost) || errors.Is(err, tcp.ErrTimeout)) {
		t.Fatalf("put to a killed PE: %v", err)
	}
	if _, err := tr.AMO(1, nic.AMOFetch, 8, 0, 0, 0); err == nil || !strings.Contains(err.Error(), "PE 1") {
		t.Fatalf("AMO after the peer died: %v", err)
	}
}

// A host torn down (its link cut: no FIN, no RST) fails a quiet and a get within the timeout.
func TestHostTornDown(t *testing.T) {
	nt := needNetns(t)
	const timeout = 2 * time.Second
	tr, _, _ := startJob(t, nt, "idle", timeout)
	if err := tr.Put(1, 64, []byte("before")); err != nil {
		t.Fatal(err)
	}
	if err := tr.Quiet(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if err := nt.Hosts[1].TearDown(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		err := tr.Put(1, 64, []byte("after"))
		if err == nil {
			err = tr.Quiet(context.Background(), 1)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !errors.Is(err, tcp.ErrTimeout) || !strings.Contains(err.Error(), "PE 1") {
			t.Fatalf("quiet to a torn-down host: %v", err)
		}
	case <-time.After(10 * timeout):
		t.Fatal("quiet to a torn-down host hung")
	}
	if err := tr.Get(1, 0, make([]byte, 8)); err == nil || !strings.Contains(err.Error(), "PE 1") {
		t.Fatalf("get after the host vanished: %v", err)
	}
}

// A transport holding a different job token is refused by PE 0 (which dials it) and the refusal
// is logged; it never gets to write into PE 0's heap.
func TestWrongTokenAcrossHosts(t *testing.T) {
	nt := needNetns(t)
	good := &logs{}
	h0 := newHeap(4096)
	t0 := onHost(t, nt.Hosts[0], 0, 2, token, h0, 3*time.Second, good)
	t1 := onHost(t, nt.Hosts[1], 1, 2, "stolen", newHeap(4096), 3*time.Second, nil)
	err := connectAll(t0, t1)
	if !errors.Is(err, tcp.ErrAuth) {
		t.Fatalf("connect with mismatched tokens: %v", err)
	}
	// PE 0 logs once it has checked the answer, which may be after PE 1's Connect returned.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		l := good.String()
		if strings.Contains(l, "refused PE 1 at "+nt.Hosts[1].IP) && strings.Contains(l, "job token") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refusal not logged:\n%s", l)
		}
	}
	if err := t1.Put(0, 0, []byte{1}); err == nil {
		t.Fatal("a refused transport could put")
	}
	for i, b := range h0.b {
		if b != 0 {
			t.Fatalf("heap byte %d written through a refused connection", i)
		}
	}
}

// pair makes PE 0 in host 0 and PE 1 in host 1, both in this process.
func pair(t *testing.T, nt *netns.Net, heapSize int, timeout time.Duration) ([]*tcp.Transport, []*heap) {
	t.Helper()
	hs := []*heap{newHeap(heapSize), newHeap(heapSize)}
	ts := []*tcp.Transport{
		onHost(t, nt.Hosts[0], 0, 2, token, hs[0], timeout, nil),
		onHost(t, nt.Hosts[1], 1, 2, token, hs[1], timeout, nil),
	}
	if err := connectAll(ts...); err != nil {
		t.Fatal(err)
	}
	return ts, hs
}

type local struct{ b []byte }

const localBase = 0x10000000

func (l local) Bytes(addr uint64, n int) ([]byte, error) {
	if addr < localBase || addr-localBase > uint64(len(l.b)) || uint64(n) > uint64(len(l.b))-(addr-localBase) {
		return nil, fmt.Errorf("[%#x, +%d) is not local memory", addr, n)
	}
	o := addr - localBase
	return l.b[o : o+uint64(n)], nil
}

// Device-side producers (goroutines, as kernels would be) fill a small ring much faster than the
// proxy drains it over TCP to another host: every put lands in order, Quiet means delivered, and
// a bad descriptor is rejected with nothing written on the target.
func TestRingProxyOverTCP(t *testing.T) {
	nt := needNetns(t)
	const heapSize = 1 << 16
	ts, hs := pair(t, nt, heapSize, 10*time.Second)
	ring, err := nic.AllocRing(8)
	if err != nil {
		t.Fatal(err)
	}
	const producers, per = 8, 1500
	loc := local{nic.AlignedBytes(producers * per * 8)}
	px, err := nic.NewProxy(nic.ProxyConfig{PE: 0, NPEs: 2, HeapSize: heapSize, Transport: ts[0], Local: loc, Rings: []*nic.Ring{ring}, Timeout: 10 * time.Second, Logf: (&logs{}).logf})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= per; i++ {
				addr := uint64(localBase + (p*per+i-1)*8)
				b, _ := loc.Bytes(addr, 8)
				binary.LittleEndian.PutUint64(b, uint64(i))
				d := nic.Desc{Op: nic.OpPut, PE: 1, Size: 8, Src: addr, Dst: uint64(1024 + p*8)}
				if _, err := ring.Push(ctx, &d); err != nil {
					errs <- err
					return
				}
			}
			if err := ring.Quiet(ctx); err != nil {
				errs <- err
				return
			}
			if v := atomic.LoadUint64(hs[1].word(uint64(1024 + p*8))); v != per {
				errs <- fmt.Errorf("producer %d: PE 1 holds %d after quiet, want %d", p, v, per)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Put-with-signal, AMO with a result, and get, through the ring.
	copy(loc.b, "signalled data")
	push := func(d nic.Desc) {
		if _, err := ring.Push(ctx, &d); err != nil {
			t.Fatal(err)
		}
	}
	push(nic.Desc{Op: nic.OpPutSignal, PE: 1, Size: 14, Src: localBase, Dst: 2048, Aux: 8, Value: 9, Flags: nic.MakeFlags(uint32(nic.SignalSet), 8)})
	push(nic.Desc{Op: nic.OpAMO, PE: 1, Dst: 1024, Value: 10, Src: localBase + 64, Flags: nic.MakeFlags(uint32(nic.AMOFetchAdd), 8)})
	push(nic.Desc{Op: nic.OpGet, PE: 1, Size: 14, Src: localBase + 128, Dst: 2048})
	if err := ring.Quiet(ctx); err != nil {
		t.Fatal(err)
	}
	if string(hs[1].b[2048:2062]) != "signalled data" || atomic.LoadUint64(hs[1].word(8)) != 9 {
		t.Fatal("put-with-signal through the ring did not land")
	}
	if binary.LittleEndian.Uint64(loc.b[64:]) != per || atomic.LoadUint64(hs[1].word(1024)) != per+10 {
		t.Fatal("AMO through the ring: wrong result or target")
	}
	if string(loc.b[128:142]) != "signalled data" {
		t.Fatal("get through the ring read other data")
	}
	// A descriptor past the heap: rejected by the proxy, nothing written on PE 1.
	before := append([]byte(nil), hs[1].b...)
	push(nic.Desc{Op: nic.OpPut, PE: 1, Size: 64, Src: localBase, Dst: heapSize - 32})
	err = ring.Quiet(ctx)
	if !errors.Is(err, nic.ErrBadDescriptor) || !strings.Contains(err.Error(), "put to PE 1") || !strings.Contains(err.Error(), "[0xffe0, +0x40)") {
		t.Fatalf("bad descriptor: %v", err)
	}
	if !bytes.Equal(before, hs[1].b) {
		t.Fatal("a rejected descriptor wrote PE 1's heap")
	}
}

// The target host vanishes while producers stream through the ring: producers and Quiet return
// an error that names PE 1 instead of hanging.
func TestRingProxyHostTornDown(t *testing.T) {
	nt := needNetns(t)
	ts, _ := pair(t, nt, 1<<16, 2*time.Second)
	ring, _ := nic.AllocRing(16)
	loc := local{nic.AlignedBytes(4096)}
	px, err := nic.NewProxy(nic.ProxyConfig{PE: 0, NPEs: 2, HeapSize: 1 << 16, Transport: ts[0], Local: loc, Rings: []*nic.Ring{ring}, Timeout: 2 * time.Second, Logf: (&logs{}).logf})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 4)
	for p := 0; p < 4; p++ {
		go func() {
			for {
				if _, err := ring.Push(ctx, &nic.Desc{Op: nic.OpPut, PE: 1, Size: 4096, Src: localBase, Dst: 0}); err != nil {
					done <- err
					return
				}
				if err := ring.Quiet(ctx); err != nil {
					done <- err
					return
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	if err := nt.Hosts[1].TearDown(); err != nil {
		t.Fatal(err)
	}
	for p := 0; p < 4; p++ {
		err := <-done
		if errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, nic.ErrRing) || !strings.Contains(err.Error(), "PE 1") {
			t.Fatalf("producer after the host vanished: %v", err)
		}
	}
}
