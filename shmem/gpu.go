package shmem

import (
	"context"
	"fmt"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/nic"
)

// devicePath reaches pe's heap at base, a device address (this PE's own heap or a peer's mapped
// through IPC).
func (w *World) devicePath(pe int, base device.Ptr) path { return unsupportedPath{} }

// startDevice brings up the GPU side of the runtime once the heaps are mapped.
func (w *World) startDevice(ctx context.Context) error {
	return fmt.Errorf("%w: shmem on %s devices", device.ErrNotSupported, w.dev.Info().Driver)
}

// stopDevice releases what startDevice set up.
func (w *World) stopDevice() {}

type unsupportedPath struct{}

func (unsupportedPath) put(uint64, []byte) error { return device.ErrNotSupported }
func (unsupportedPath) get(uint64, []byte) error { return device.ErrNotSupported }
func (unsupportedPath) amo(nic.AMOOp, int, uint64, uint64, uint64) (uint64, error) {
	return 0, device.ErrNotSupported
}
func (unsupportedPath) putSignal(uint64, []byte, uint64, SignalOp, uint64) error {
	return device.ErrNotSupported
}
