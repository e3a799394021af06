package nic

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Benchmarks of the proxy itself, over a transport that does nothing: what a descriptor costs
// between the ring and a route, without a network.
//
//	BenchmarkProxyPut        8-byte puts/s from producers goroutines through one ring
//	BenchmarkProxyRoundTrip  one put, then a wait for its completion

// nopTransport delivers nothing and acknowledges at once.
type nopTransport struct{}

func (nopTransport) Put(int, uint64, []byte) error { return nil }
func (nopTransport) Get(int, uint64, []byte) error { return nil }
func (nopTransport) AMO(int, AMOOp, int, uint64, uint64, uint64) (uint64, error) {
	return 0, nil
}
func (nopTransport) PutSignal(int, uint64, []byte, uint64, SignalOp, uint64) error { return nil }
func (nopTransport) Fence(int) error                                               { return nil }
func (nopTransport) Quiet(context.Context, int) error                              { return nil }
func (nopTransport) Close() error                                                  { return nil }

func benchProxy(b *testing.B, capacity int) *Ring {
	ring, err := AllocRing(capacity)
	if err != nil {
		b.Fatal(err)
	}
	px, err := NewProxy(ProxyConfig{PE: 0, NPEs: 2, HeapSize: 1 << 20, Transport: nopTransport{},
		Local: newRegion(localBase, 4096), Rings: []*Ring{ring}, Timeout: time.Minute, Unlocked: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { px.Close() })
	return ring
}

func BenchmarkProxyPut(b *testing.B) {
	for _, producers := range []int{1, 8} {
		b.Run(fmt.Sprintf("producers=%d", producers), func(b *testing.B) {
			ring := benchProxy(b, 1024)
			ctx := context.Background()
			var wg sync.WaitGroup
			b.ResetTimer()
			for p := 0; p < producers; p++ {
				n := b.N / producers
				if p < b.N%producers {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					d := Desc{Op: OpPut, PE: 1, Size: 8, Src: localBase + uint64(p)*8, Dst: uint64(p) * 8}
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
		})
	}
}

func BenchmarkProxyRoundTrip(b *testing.B) {
	ring := benchProxy(b, 64)
	ctx := context.Background()
	d := Desc{Op: OpPut, PE: 1, Size: 8, Src: localBase, Dst: 0}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tk, err := ring.Push(ctx, &d)
		if err == nil {
			err = ring.WaitCompleted(ctx, tk)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
