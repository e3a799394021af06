package shmem

import (
	"context"
	"fmt"
	"time"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/shmem/internal/gpurt"
)

// Module is a user's code object (PTX, cubin or hsaco built from sources that include
// kernels/include/roxamen/roxshmem.h) loaded on this PE's GPU and linked to the runtime: its
// roxshmem_state is filled before any of its kernels runs, as nvshmemx_cumodule_init does. Its
// kernels run on the module's own stream, in launch order.
//
// Lifetime: from LoadModule to Unload or Finalize.
type Module struct {
	w      *World
	m      *gpurt.Module // the loaded object and its stream, which the runtime releases at Finalize
	stream device.Stream
}

// LoadModule loads image on this PE's GPU and fills its roxshmem_state. It fails with
// ErrBadArgument when the image does not include roxshmem.h (no roxshmem_state symbol) or was built
// against another layout of it, and with device.ErrNotSupported on the host backend.
func (w *World) LoadModule(image []byte) (*Module, error) {
	if err := w.check("LoadModule"); err != nil {
		return nil, err
	}
	if !w.gpu.Started() {
		return nil, &Error{Call: "LoadModule", PE: w.pe, Kind: ErrBadArgument, Detail: "code objects need a GPU backend, this PE runs on " + w.dev.Info().Driver, Err: device.ErrNotSupported}
	}
	gm, stage, err := w.gpu.LoadModule(image)
	switch stage {
	case "load":
		return nil, &Error{Call: "LoadModule", PE: w.pe, Kind: ErrBadArgument, Detail: fmt.Sprintf("loading a %d-byte image on %v", len(image), w.dev.Info()), Err: err}
	case "link":
		return nil, &Error{Call: "LoadModule", PE: w.pe, Kind: ErrBadArgument, Detail: "linking the module to the runtime (does it include roxamen/roxshmem.h?)", Err: err}
	case "stream":
		return nil, &Error{Call: "LoadModule", PE: w.pe, Kind: ErrPEFailed, Detail: "creating the module's stream", Err: err}
	}
	return &Module{w: w, m: gm, stream: gm.Stream}, nil
}

// LinkState fills the roxshmem_state of size bytes at device address p: the symbol of a code
// object the program loaded itself (cuModuleGetGlobal, hipModuleGetGlobal) or of its own
// runtime-API kernels (cudaGetSymbolAddress), as nvshmemx_cumodule_init and NVSHMEM's static
// device library do. Its kernels may then call roxshmem.h. It fails with ErrBadArgument for a
// state of another size (another version of roxshmem.h) or p == 0 (no such symbol), and with
// device.ErrNotSupported on the host backend.
func (w *World) LinkState(p device.Ptr, size int) error {
	const call = "LinkState"
	if err := w.check(call); err != nil {
		return err
	}
	if !w.gpu.Started() {
		return &Error{Call: call, PE: w.pe, Kind: ErrBadArgument, Detail: "device code needs a GPU backend, this PE runs on " + w.dev.Info().Driver, Err: device.ErrNotSupported}
	}
	if p == 0 {
		return w.errorf(call, ErrBadArgument, "no roxshmem_state (does the code include roxamen/roxshmem.h?)")
	}
	if err := w.gpu.FillStateAt(p, size); err != nil {
		return &Error{Call: call, PE: w.pe, Kind: ErrBadArgument, Detail: fmt.Sprintf("the %d-byte roxshmem_state at %#x", size, uintptr(p)), Err: err}
	}
	return nil
}

func (m *Module) check(call string) error {
	if m == nil || m.w == nil {
		return &Error{Call: call, PE: -1, Kind: ErrNotInitialized, Detail: "nil Module"}
	}
	if err := m.w.check(call); err != nil {
		return err
	}
	if m.m.Dead() {
		return m.w.errorf(call, ErrFinalized, "the module was unloaded")
	}
	return nil
}

func (m *Module) function(call, name string) (device.Function, error) {
	f, err := m.m.Function(name)
	if err != nil {
		return nil, &Error{Call: call, PE: m.w.pe, Kind: ErrBadArgument, Detail: fmt.Sprintf("kernel %q (declare it extern \"C\")", name), Err: err}
	}
	return f, nil
}

// Stream returns the stream the module's kernels run on; stream-ordered operations (PutOnStream,
// ...) enqueued on it are ordered with them.
func (m *Module) Stream() device.Stream {
	if m == nil {
		return nil
	}
	return m.stream
}

// Global returns the device address and size of a global variable of the module.
func (m *Module) Global(name string) (device.Ptr, int, error) {
	if err := m.check("Module.Global"); err != nil {
		return 0, 0, err
	}
	p, n, err := m.m.Mod.Global(name)
	if err != nil {
		return 0, 0, &Error{Call: "Module.Global", PE: m.w.pe, Kind: ErrBadArgument, Detail: fmt.Sprintf("global %q", name), Err: err}
	}
	return p, n, nil
}

// Launch enqueues kernel name on the module's stream (this PE only) and returns without waiting;
// Sync waits for it. Arguments are int32, uint32, int64, uint64, float32, float64, device.Ptr or
// uintptr (a Sym's Device() address for symmetric data).
func (m *Module) Launch(name string, grid, block device.Dim3, sharedBytes int, args ...any) error {
	return m.launch("Module.Launch", m.stream, name, grid, block, sharedBytes, args...)
}

// LaunchOn is Launch on st, a stream of this PE's device (World.NewStream), in order with the
// stream-ordered operations and the other kernels enqueued on it; SyncStream waits for it and
// reports what its device calls recorded.
func (m *Module) LaunchOn(st device.Stream, name string, grid, block device.Dim3, sharedBytes int, args ...any) error {
	if st == nil {
		if err := m.check("Module.LaunchOn"); err != nil {
			return err
		}
		return m.w.errorf("Module.LaunchOn", ErrBadArgument, "nil stream")
	}
	return m.launch("Module.LaunchOn", st, name, grid, block, sharedBytes, args...)
}

func (m *Module) launch(call string, st device.Stream, name string, grid, block device.Dim3, sharedBytes int, args ...any) error {
	if err := m.check(call); err != nil {
		return err
	}
	f, err := m.function(call, name)
	if err != nil {
		return err
	}
	if err := st.Launch(f, grid, block, sharedBytes, args...); err != nil {
		return m.w.mpsFault(&Error{Call: call, PE: m.w.pe, Kind: ErrBadArgument, Detail: fmt.Sprintf("kernel %q grid %v block %v shared %d", name, grid, block, sharedBytes), Err: err})
	}
	return nil
}

// Sync waits for the kernels launched so far. It never hangs: when a PE fails or ctx ends, it sets
// the abort word so that every device wait returns, and it reports why. A kernel that faulted, or
// a device call that recorded a failure (a wait that gave up, a PE out of range, an address outside
// the symmetric heap), makes it fail with an error naming the call and the PE.
func (m *Module) Sync(ctx context.Context) error {
	if err := m.check("Module.Sync"); err != nil {
		return err
	}
	return m.w.waitStream(ctx, "Module.Sync", m.stream)
}

// LaunchAll is the collective launch (nvshmemx_collective_launch): every PE calls it with the same
// kernel; no PE's kernel starts before every PE's module is loaded and every PE has reached the
// call, and it returns once this PE's kernel has finished. Device-wide barriers
// (roxshmem_barrier_all) need every block resident: keep grid within what the GPU runs at once
// (at most one block per multiprocessor is always safe).
func (m *Module) LaunchAll(ctx context.Context, name string, grid, block device.Dim3, sharedBytes int, args ...any) error {
	if err := m.check("Module.LaunchAll"); err != nil {
		return err
	}
	if err := m.w.SyncAll(ctx); err != nil {
		return err
	}
	if err := m.Launch(name, grid, block, sharedBytes, args...); err != nil {
		return err
	}
	return m.Sync(ctx)
}

// Unload waits for the module's kernels and releases it.
func (m *Module) Unload() error {
	if err := m.check("Module.Unload"); err != nil {
		return err
	}
	if err := m.w.gpu.Unload(m.m); err != nil {
		return &Error{Call: "Module.Unload", PE: m.w.pe, Kind: ErrPEFailed, Err: err}
	}
	return nil
}

// Elapsed times device work: it records an event on the module's stream, calls enqueue (which
// launches kernels or enqueues stream-ordered operations on Stream()), records a second event,
// waits as Sync does, and returns the device time between the two events.
func (m *Module) Elapsed(ctx context.Context, enqueue func() error) (time.Duration, error) {
	if err := m.check("Module.Elapsed"); err != nil {
		return 0, err
	}
	var evs [2]device.Event
	for i := range evs {
		e, err := m.w.dev.NewEvent()
		if err != nil {
			return 0, &Error{Call: "Module.Elapsed", PE: m.w.pe, Kind: ErrPEFailed, Err: err}
		}
		defer e.Destroy()
		evs[i] = e
	}
	if err := m.stream.Record(evs[0]); err != nil {
		return 0, &Error{Call: "Module.Elapsed", PE: m.w.pe, Kind: ErrPEFailed, Err: err}
	}
	if err := enqueue(); err != nil {
		return 0, err
	}
	if err := m.stream.Record(evs[1]); err != nil {
		return 0, &Error{Call: "Module.Elapsed", PE: m.w.pe, Kind: ErrPEFailed, Err: err}
	}
	if err := m.Sync(ctx); err != nil {
		return 0, err
	}
	d, err := evs[1].Since(evs[0])
	if err != nil {
		return 0, &Error{Call: "Module.Elapsed", PE: m.w.pe, Kind: ErrPEFailed, Err: err}
	}
	return d, nil
}
