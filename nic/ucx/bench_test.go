package ucx

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roxamen/roxamen/nic"
)

// BenchmarkPingPong: PE 0 puts 8 bytes to PE 1, which waits for them and puts them back; one
// iteration is a round trip.
func BenchmarkPingPong(b *testing.B) {
	ts, heaps := job(b, 2, 1<<16)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		var seen uint64
		for {
			for le64(heaps[1][0:]) == seen {
				runtime.Gosched()
				select {
				case <-stop:
					return
				default:
				}
			}
			seen = le64(heaps[1][0:])
			buf := make([]byte, 8)
			copy(buf, heaps[1][0:8])
			ts[1].Put(0, 0, buf)
		}
	}()
	buf := make([]byte, 8)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		buf[0], buf[1] = byte(i), byte(i>>8)
		if err := ts[0].Put(1, 0, buf); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for le64(heaps[0][0:])&0xffff != uint64(i)&0xffff {
			runtime.Gosched()
			if time.Now().After(deadline) {
				b.Fatalf("no pong %d", i)
			}
		}
	}
}

func BenchmarkPutBandwidth(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		b.Run(byteSize(size), func(b *testing.B) {
			ts, _ := job(b, 2, 4<<20)
			src := make([]byte, size)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := ts[0].Put(1, 0, src); err != nil {
					b.Fatal(err)
				}
			}
			if err := ts[0].Quiet(context.Background(), -1); err != nil {
				b.Fatal(err)
			}
		})
	}
}

func byteSize(n int) string {
	switch {
	case n >= 1<<20:
		return itoa(n>>20) + "MiB"
	case n >= 1<<10:
		return itoa(n>>10) + "KiB"
	}
	return itoa(n) + "B"
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// BenchmarkConcurrentAMO: goroutines of PE 0 fetch-add one word of PE 1 at once; one iteration
// is one fetch-add. A transport that serializes whole round trips behind one lock, or makes
// every waiter spin for it, collapses here as the goroutines grow.
func BenchmarkConcurrentAMO(b *testing.B) {
	for _, g := range []int{1, 8} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			ts, heaps := job(b, 2, 1<<16)
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, g)
			b.ResetTimer()
			for range g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if _, err := ts[0].AMO(1, nic.AMOFetchAdd, 8, 0, 1, 0); err != nil {
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
			if got := le64(heaps[1][0:]); got != uint64(b.N) {
				b.Fatalf("the word holds %d after %d fetch-adds", got, b.N)
			}
		})
	}
}
