package tcp

// Benchmarks, between two network namespaces when root (else over loopback), each beside the
// plain TCP baseline measured in the same run between the same two endpoints:
//
//	BenchmarkBandwidth/N   put bandwidth, 64 KiB .. 16 MiB, and a plain TCP stream
//	BenchmarkPingPong      8-byte put-with-signal round trips, and plain TCP round trips
//	BenchmarkProxyPutRate  8-byte puts/s from many ring producers through one proxy
//	BenchmarkRingPingPong  8-byte put-with-signal round trips issued through rings and proxies
//	BenchmarkConcurrentAMO fetch-adds from 1 and 8 goroutines at once

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roxamen/roxamen/nic"
	"github.com/roxamen/roxamen/test/netns"
)

type benchEnv struct {
	where   string
	ts      [2]*Transport
	hs      [2]*memHeap
	changed [2]chan struct{} // signalled by each transport's Notify
	// listen on host 1 and dial from host 0, for the plain TCP baselines
	listen func() (net.Listener, error)
	dial   func(addr string) (net.Conn, error)
	close  func()
}

var (
	envOnce sync.Once
	bench   *benchEnv
	envErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if bench != nil {
		bench.close()
	}
	os.Exit(code)
}

const benchHeap = 40 << 20

func getEnv(b *testing.B) *benchEnv {
	envOnce.Do(func() { bench, envErr = newBenchEnv() })
	if envErr != nil {
		b.Fatal(envErr)
	}
	return bench
}

func newBenchEnv() (*benchEnv, error) {
	e := &benchEnv{where: "loopback", close: func() {}}
	var lns [2]net.Listener
	var dials [2]func(ctx context.Context, network, addr string) (net.Conn, error)
	if err := netns.Available(); err == nil {
		nt, err := netns.New(2, netns.Options{})
		if err != nil {
			return nil, err
		}
		e.where = "two network namespaces (veth + bridge)"
		for i, h := range nt.Hosts {
			if lns[i], err = h.Listen(""); err != nil {
				nt.Close()
				return nil, err
			}
			dials[i] = h.Dial
		}
		h0, h1 := nt.Hosts[0], nt.Hosts[1]
		e.listen = func() (net.Listener, error) { return h1.Listen("") }
		e.dial = func(addr string) (net.Conn, error) { return h0.Dial(context.Background(), "tcp", addr) }
		e.close = func() { nt.Close() }
	} else {
		for i := range lns {
			var err error
			if lns[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				return nil, err
			}
		}
		e.listen = func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
		e.dial = func(addr string) (net.Conn, error) { return net.Dial("tcp", addr) }
	}
	addrs := make([]string, 2)
	for i := range e.ts {
		e.hs[i] = newHeap(benchHeap)
		ch := make(chan struct{}, 1)
		e.changed[i] = ch
		notify := func() {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		tr, err := New(Config{PE: i, NPEs: 2, Token: "bench", Listener: lns[i], Dial: dials[i], Heap: e.hs[i], Timeout: time.Minute, Notify: notify})
		if err != nil {
			return nil, err
		}
		e.ts[i], addrs[i] = tr, tr.Addr()
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, tr := range e.ts {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = tr.Connect(context.Background(), addrs) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	prev := e.close
	e.close = func() { e.ts[0].Close(); e.ts[1].Close(); prev() }
	fmt.Fprintf(os.Stderr, "nic/tcp benchmarks: between %s\n", e.where)
	return e, nil
}

var benchSizes = []int{64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// plainConn accepts one connection on a fresh listener in host 1 and dials it from host 0.
func plainConn(b *testing.B, e *benchEnv, serve func(c net.Conn)) net.Conn {
	ln, err := e.listen()
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		defer ln.Close()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.(*net.TCPConn).SetNoDelay(true)
		serve(c)
	}()
	c, err := e.dial(ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	c.(*net.TCPConn).SetNoDelay(true)
	return c
}

// BenchmarkBandwidth: one op is one put of the size (completed by a Quiet per block) and the same
// bytes over a plain TCP connection between the same hosts (acknowledged per block), measured in
// alternating blocks of about 4 MiB so that both see the same machine load.
func BenchmarkBandwidth(b *testing.B) {
	e := getEnv(b)
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			block := max(1, (4<<20)/size) // small blocks, many alternations: load spikes hit both
			c := plainConn(b, e, func(c net.Conn) {
				buf := make([]byte, size)
				var hdr [8]byte
				for {
					if _, err := io.ReadFull(c, hdr[:]); err != nil {
						return
					}
					for n := binary.LittleEndian.Uint64(hdr[:]); n > 0; n-- {
						if _, err := io.ReadFull(c, buf); err != nil {
							return
						}
					}
					if _, err := c.Write(hdr[:1]); err != nil {
						return
					}
				}
			})
			defer c.Close()
			src := make([]byte, size)
			var tPut, tTCP time.Duration
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(block, b.N-done)
				t0 := time.Now()
				for i := 0; i < n; i++ {
					if err := e.ts[0].Put(1, uint64(i%2)*uint64(size), src); err != nil {
						b.Fatal(err)
					}
				}
				if err := e.ts[0].Quiet(context.Background(), 1); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				var hdr [8]byte
				binary.LittleEndian.PutUint64(hdr[:], uint64(n))
				c.Write(hdr[:])
				for i := 0; i < n; i++ {
					if _, err := c.Write(src); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := io.ReadFull(c, hdr[:1]); err != nil {
					b.Fatal(err)
				}
				tPut += t1.Sub(t0)
				tTCP += time.Since(t1)
				done += n
			}
			mb := float64(b.N) * float64(size) / 1e6
			b.ReportMetric(mb/tPut.Seconds(), "put-MB/s")
			b.ReportMetric(mb/tTCP.Seconds(), "tcp-MB/s")
			b.ReportMetric(tTCP.Seconds()/tPut.Seconds(), "put/tcp")
		})
	}
}

// waitWord waits for an 8-byte heap word as a host-backend wait_until would: spin a little, then
// sleep until the transport says the heap changed (Config.Notify) or a backoff interval passes.
func waitWord(w *uint64, want uint64, changed <-chan struct{}) {
	spin := 200
	if v := os.Getenv("ROX_BENCH_SPIN"); v != "" {
		fmt.Sscan(v, &spin)
	}
	for i := 0; i < spin; i++ {
		if atomic.LoadUint64(w) == want {
			return
		}
		if i%16 == 15 {
			runtime.Gosched()
		}
	}
	var b nic.Backoff
	for atomic.LoadUint64(w) != want {
		if changed == nil || os.Getenv("ROX_BENCH_WAIT") == "backoff" {
			b.Wait()
			continue
		}
		<-changed // only the transport writes these words, and Notify follows every write
	}
}

var pingRound atomic.Uint64 // signal values keep growing across benchmark runs

// BenchmarkPingPong: one op is one 8-byte put-with-signal round trip (each side waits for its
// signal word, then answers) and one 8-byte round trip over a plain TCP connection between the
// same hosts, in alternating blocks of 50.
func BenchmarkPingPong(b *testing.B) {
	e := getEnv(b)
	const data, sig, block = 4096, 64, 50
	base := pingRound.Add(uint64(b.N)) - uint64(b.N)
	w0, w1 := e.hs[0].word(sig), e.hs[1].word(sig)
	errc := make(chan error, 1)
	go func() { // PE 1: wait for ping i, answer with pong i
		msg := make([]byte, 8)
		for i := uint64(1); i <= uint64(b.N); i++ {
			waitWord(w1, base+i, e.changed[1])
			if err := e.ts[1].PutSignal(0, data, msg, sig, nic.SignalSet, base+i); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	c := plainConn(b, e, func(c net.Conn) {
		buf := make([]byte, 8)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	defer c.Close()
	msg, buf := make([]byte, 8), make([]byte, 8)
	var tSig, tTCP time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(block, b.N-done)
		t0 := time.Now()
		for k := 1; k <= n; k++ {
			i := base + uint64(done+k)
			if err := e.ts[0].PutSignal(1, data, msg, sig, nic.SignalSet, i); err != nil {
				b.Fatal(err)
			}
			waitWord(w0, i, e.changed[0])
		}
		t1 := time.Now()
		for k := 0; k < n; k++ {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
		}
		tSig += t1.Sub(t0)
		tTCP += time.Since(t1)
		done += n
	}
	b.StopTimer()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(tSig.Microseconds())/float64(b.N), "put_signal-us")
	b.ReportMetric(float64(tTCP.Microseconds())/float64(b.N), "tcp-us")
	b.ReportMetric(tSig.Seconds()/tTCP.Seconds(), "put_signal/tcp")
}

// unlocked: proxies in benchmarks run unlocked unless ROX_BENCH_LOCKED=1.
var unlocked = os.Getenv("ROX_BENCH_LOCKED") != "1"

type benchLocal struct{ b []byte }

func (l benchLocal) Bytes(addr uint64, n int) ([]byte, error) {
	if addr > uint64(len(l.b)) || uint64(n) > uint64(len(l.b))-addr {
		return nil, fmt.Errorf("[%#x, +%d) is not local", addr, n)
	}
	return l.b[addr : addr+uint64(n)], nil
}

// BenchmarkProxyPutRate: 8-byte puts from many device-side producers (goroutines playing GPU
// threads) through one ring and one proxy to the other host; one op is one put.
func BenchmarkProxyPutRate(b *testing.B) {
	e := getEnv(b)
	for _, producers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("producers=%d", producers), func(b *testing.B) {
			ring, err := nic.AllocRing(1024)
			if err != nil {
				b.Fatal(err)
			}
			loc := benchLocal{nic.AlignedBytes(4096)}
			px, err := nic.NewProxy(nic.ProxyConfig{PE: 0, NPEs: 2, HeapSize: benchHeap, Transport: e.ts[0], Local: loc,
				Rings: []*nic.Ring{ring}, Timeout: time.Minute, Unlocked: unlocked})
			if err != nil {
				b.Fatal(err)
			}
			defer px.Close()
			ctx := context.Background()
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for p := 0; p < producers; p++ {
				n := b.N / producers
				if p < b.N%producers {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					d := nic.Desc{Op: nic.OpPut, PE: 1, Size: 8, Src: uint64(p%512) * 8, Dst: uint64(p) * 8}
					for i := 0; i < n; i++ {
						if _, err := ring.Push(ctx, &d); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if err := ring.Quiet(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "puts/s")
		})
	}
}

// BenchmarkRingPingPong: the put-with-signal round trip as device code issues it: each side
// pushes a descriptor into its ring, its proxy sends it, and the other side waits for the signal.
func BenchmarkRingPingPong(b *testing.B) {
	e := getEnv(b)
	const data, sig = 8192, 128
	var rings [2]*nic.Ring
	for pe := range rings {
		r, err := nic.AllocRing(64)
		if err != nil {
			b.Fatal(err)
		}
		rings[pe] = r
		px, err := nic.NewProxy(nic.ProxyConfig{PE: pe, NPEs: 2, HeapSize: benchHeap, Transport: e.ts[pe],
			Local: benchLocal{nic.AlignedBytes(4096)}, Rings: []*nic.Ring{r}, Timeout: time.Minute, Unlocked: unlocked})
		if err != nil {
			b.Fatal(err)
		}
		defer px.Close()
	}
	base := pingRound.Add(uint64(b.N)) - uint64(b.N)
	desc := func(to int, v uint64) *nic.Desc {
		return &nic.Desc{Op: nic.OpPutSignal, PE: uint32(to), Size: 8, Src: 0, Dst: data, Aux: sig, Value: v,
			Flags: nic.MakeFlags(uint32(nic.SignalSet), 8)}
	}
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() {
		w := e.hs[1].word(sig)
		for i := uint64(1); i <= uint64(b.N); i++ {
			waitWord(w, base+i, e.changed[1])
			if _, err := rings[1].Push(ctx, desc(0, base+i)); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	w := e.hs[0].word(sig)
	b.ResetTimer()
	for i := uint64(1); i <= uint64(b.N); i++ {
		if _, err := rings[0].Push(ctx, desc(1, base+i)); err != nil {
			b.Fatal(err)
		}
		waitWord(w, base+i, e.changed[0])
	}
	b.StopTimer()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	for _, r := range rings {
		if err := r.Quiet(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConcurrentAMO: goroutines of PE 0 fetch-add one word of PE 1 at once; one iteration
// is one fetch-add (nic/ucx has the same row).
func BenchmarkConcurrentAMO(b *testing.B) {
	for _, g := range []int{1, 8} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			e := getEnv(b)
			const word = 512
			before := *e.hs[1].word(word)
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, g)
			b.ResetTimer()
			for range g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if _, err := e.ts[0].AMO(1, nic.AMOFetchAdd, 8, word, 1, 0); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			if got := atomic.LoadUint64(e.hs[1].word(word)) - before; got != uint64(b.N) {
				b.Fatalf("the word grew by %d after %d fetch-adds", got, b.N)
			}
		})
	}
}
