package gpurt

import (
	"context"
	"time"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/nic"
)

// fakeWorld is PE 0 of npes for runtimes the tests assemble by hand (the proxy rigs): no
// bootstrap, no heap allocator.
type fakeWorld struct {
	npes      int
	dev       device.Device
	heapSize  int64
	timeout   time.Duration
	transport nic.Transport
}

func (f *fakeWorld) PE() int                  { return 0 }
func (f *fakeWorld) NPEs() int                { return f.npes }
func (f *fakeWorld) Device() device.Device    { return f.dev }
func (f *fakeWorld) HeapSize() int64          { return f.heapSize }
func (f *fakeWorld) Timeout() time.Duration   { return f.timeout }
func (f *fakeWorld) Bypass() bool             { return false }
func (f *fakeWorld) Transport() nic.Transport { return f.transport }
func (f *fakeWorld) Failed() <-chan struct{}  { return nil }
func (f *fakeWorld) Err() error               { return nil }
func (f *fakeWorld) Allgather(context.Context, []byte) ([][]byte, error) {
	return [][]byte{nil}, nil
}
func (f *fakeWorld) Reserve(uint64) (uint64, error) { return 0, nil }
func (f *fakeWorld) Zero(uint64, int) error         { return nil }
