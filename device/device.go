// Package device is the layer between Roxamen and a vendor GPU driver: devices, memory, streams,
// events, code objects and inter-process memory sharing. It knows nothing of SHMEM.
//
// Three drivers implement it: device/cuda (libcuda.so.1), device/hip (libamdhip64.so) and
// device/host (the CPU, with memfd shared memory standing in for device memory). cuda and hip
// are one implementation (device/internal/gpudrv) over two vendor tables. A Device is safe for
// use from any goroutine; drivers that need a per-thread context set it themselves.
//
// Ownership: memory from Alloc, AllocHost and Import lives until Free (or Close of its Device);
// a Stream, Event or Module until its Destroy/Unload. Closing a Device releases everything it
// still owns.
package device

import (
	"errors"
	"fmt"
	"github.com/roxamen/roxamen/internal/errs"
	"time"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrNoDriver: the vendor library is not installed or could not be loaded.
	ErrNoDriver = errors.New("device: driver library not found")
	// ErrNoDevice: the library loaded but reports no usable device (or the ordinal is out of range).
	ErrNoDevice = errors.New("device: no device")
	// ErrNotSupported: the driver or device lacks a feature the call needs.
	ErrNotSupported = errors.New("device: not supported")
	// ErrInvalid: an argument is out of range (an unknown pointer, a size past an allocation's end,
	// a handle that is not one, an argument of an unsupported type).
	ErrInvalid = errors.New("device: invalid argument")
	// ErrNotReady: the work an event or stream marks has not completed (or the event was never recorded).
	ErrNotReady = errors.New("device: not ready")
	// ErrClosed: the device, stream, event or module was already closed, destroyed or unloaded.
	ErrClosed = errors.New("device: closed")
)

// Error is a failed driver call, in the one shape of every layer's call errors (errs.Error):
// Call is the call that failed ("cuMemAlloc_v2", "host.Import"), Detail the offending values
// ("size=0"), Err the cause, Kind a sentinel of this package that also matches; a driver call has
// no PE (the field stays unused). Every driver returns its errors as *Error, reading
// "CALL(DETAIL): CAUSE"; errors.Is matches both the cause (a native status such as cuda.Result(1),
// an OS error) and the sentinel Kind (ErrInvalid, ErrNoDevice, ...).
type Error = errs.Error[errs.Device]

// CheckArgs verifies that every kernel argument has a type Stream.Launch accepts and returns its
// size in bytes; op names the calling function in the error.
func CheckArgs(op string, args []any) ([]int, error) {
	sizes := make([]int, len(args))
	for i, a := range args {
		switch a.(type) {
		case int32, uint32, float32:
			sizes[i] = 4
		case int64, uint64, float64, Ptr, uintptr:
			sizes[i] = 8
		default:
			return nil, &Error{Call: op, Detail: fmt.Sprintf("args[%d] of type %T", i, a), Kind: ErrInvalid}
		}
	}
	return sizes, nil
}

// Ptr is an address in a device's address space. On the host backend it is a host virtual address.
type Ptr uintptr

// Add returns p advanced by n bytes.
func (p Ptr) Add(n int) Ptr { return p + Ptr(n) }

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// D1 is a one-dimensional shape.
func D1(x int) Dim3 { return Dim3{uint32(x), 1, 1} }

// Info describes a device.
type Info struct {
	Driver          string // "cuda", "hip" or "host"
	Ordinal         int
	Name            string // marketing name, e.g. "NVIDIA H200"
	Arch            string // "sm_90", "gfx942", "host"
	Multiprocessors int    // SMs or CUs (CPU cores on the host backend)
	MemoryBytes     uint64
	UUID            string
	PCIBusID        string // "0000:19:00.0"; empty on the host backend
	// HostNativeAtomics: the device's atomics on host-pinned memory are atomic with the CPU's
	// (CUDA's CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED: NVLink-C2C hosts, not PCIe
	// ones). False where the driver cannot say, the safe answer.
	HostNativeAtomics bool
}

func (i Info) String() string {
	return fmt.Sprintf("%s:%d %s (%s, %d MPs, %d MiB)", i.Driver, i.Ordinal, i.Name, i.Arch,
		i.Multiprocessors, i.MemoryBytes>>20)
}

// Driver is one vendor library.
type Driver interface {
	Name() string
	// Count returns the number of devices; ErrNoDriver or ErrNoDevice when there are none.
	Count() (int, error)
	// Open opens device ordinal (0-based).
	Open(ordinal int) (Device, error)
}

// HostBuffer is host memory that the device can address: page-locked and mapped on GPUs.
type HostBuffer struct {
	Bytes []byte // the host view
	Dev   Ptr    // the same memory as the device addresses it
}

// Device is one opened GPU (or the CPU on the host backend).
type Device interface {
	Info() Info

	// Alloc returns size bytes of device memory that can be exported with Export.
	Alloc(size int) (Ptr, error)
	Free(p Ptr) error
	// AllocHost returns host memory mapped into the device; FreeHost releases it.
	AllocHost(size int) (HostBuffer, error)
	FreeHost(b HostBuffer) error

	Memset(dst Ptr, value byte, n int) error
	CopyHtoD(dst Ptr, src []byte) error
	CopyDtoH(dst []byte, src Ptr) error
	// CopyDtoD copies between two device addresses, either of which may be a peer's imported memory.
	CopyDtoD(dst, src Ptr, n int) error
	Synchronize() error

	NewStream() (Stream, error)
	// AdoptStream wraps a stream the program made with the vendor's own API (a CUstream or
	// hipStream_t; 0 is the vendor's default stream; on the host backend the Handle of one of
	// this device's streams) so that work can be enqueued on it. The program keeps it: Destroy
	// releases only the wrapper and Close leaves the stream alone.
	AdoptStream(handle uintptr) (Stream, error)
	NewEvent() (Event, error)

	// LoadModule loads a code object (PTX, cubin or hsaco; a registered module name on the host backend).
	LoadModule(image []byte) (Module, error)

	// Export returns an opaque handle through which another process on the node can map the
	// allocation that starts at p (from Alloc).
	Export(p Ptr) ([]byte, error)
	// Import maps a peer's exported allocation into this device's address space.
	Import(handle []byte) (Ptr, error)
	// CloseImport unmaps memory returned by Import.
	CloseImport(p Ptr) error
	// EnablePeerAccess lets this device load and store to memory on the device with the given PCI bus id
	// (a no-op where all memory is already reachable).
	EnablePeerAccess(peer Info) error

	// Close releases everything the device still owns.
	Close() error
}

// Stream is an ordered queue of device work.
type Stream interface {
	CopyAsync(dst, src Ptr, n int) error
	CopyHtoDAsync(dst Ptr, src []byte) error
	CopyDtoHAsync(dst []byte, src Ptr) error
	MemsetAsync(dst Ptr, value byte, n int) error
	// Launch enqueues fn. Args are passed by value: int32, uint32, int64, uint64, float32, float64,
	// Ptr or uintptr.
	Launch(fn Function, grid, block Dim3, sharedBytes int, args ...any) error
	Record(e Event) error
	Wait(e Event) error
	Synchronize() error
	// Query reports whether all work so far has completed.
	Query() (bool, error)
	Destroy() error
	// Handle is the vendor's handle of the stream (CUstream, hipStream_t; on the host backend a
	// number of the device's), which AdoptStream takes.
	Handle() uintptr
}

// Capturer is a Stream whose work can be captured into a Graph instead of run (CUDA and HIP
// stream capture; the GPU drivers' streams implement it): between BeginCapture and EndCapture the
// stream's launches and copies are recorded, not executed, and the Graph replays them in order,
// with the arguments they were enqueued with, each time it is launched. Other threads may make
// any call meanwhile (the capture is relaxed).
type Capturer interface {
	BeginCapture() error
	// EndCapture ends the capture and returns the captured work, ready to launch.
	EndCapture() (Graph, error)
}

// Graph is captured stream work (a CUDA or HIP graph, instantiated).
type Graph interface {
	// Launch enqueues one replay of the captured work on st, a stream of the same device.
	Launch(st Stream) error
	Destroy() error
}

// Event marks a point in a stream.
type Event interface {
	Synchronize() error
	// Since returns the device time between start and this event, both recorded and complete.
	Since(start Event) (time.Duration, error)
	Destroy() error
}

// Module is a loaded code object.
type Module interface {
	Function(name string) (Function, error)
	// Global returns the device address and size of a global symbol.
	Global(name string) (Ptr, int, error)
	Unload() error
}

// Function is a kernel entry point in a Module.
type Function interface {
	Name() string
}
