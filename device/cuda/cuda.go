// Package cuda implements the device interfaces on NVIDIA GPUs through the CUDA driver API
// (libcuda.so.1), loaded with purego: no cgo, no CUDA toolkit at build time.
//
// Thread affinity: CUDA's current context is per OS thread. Every call into the driver locks the
// calling goroutine to its OS thread, makes the device's primary context current there
// (cuCtxSetCurrent, a cheap thread-local store) and makes the call. Any goroutine may therefore
// use a Device, and calls from several goroutines run in parallel; blocking calls (stream or
// event synchronization) hold only their own thread.
//
// Synchronous calls (Memset, CopyHtoD, CopyDtoH, CopyDtoD) run on a private non-blocking stream
// and wait for it; like Streams from NewStream (created CU_STREAM_NON_BLOCKING) they are not
// ordered with other streams. Device.Synchronize waits for all of the device's work.
//
// Bindings carry their C prototypes from cuda.h; versioned entry points are bound explicitly
// (cuMemAlloc_v2, cuIpcOpenMemHandle_v2, ...).
package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device"
)

// Constants from cuda.h.
const (
	attrMultiprocessorCount = 16 // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
	attrCCMajor             = 75 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	attrCCMinor             = 76 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

	memHostAllocPortable  = 0x01 // CU_MEMHOSTALLOC_PORTABLE
	memHostAllocDeviceMap = 0x02 // CU_MEMHOSTALLOC_DEVICEMAP
	streamNonBlocking     = 0x01 // CU_STREAM_NON_BLOCKING
	eventDefault          = 0x00 // CU_EVENT_DEFAULT (timing enabled)
	ipcLazyEnablePeer     = 0x01 // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS

	jitErrorLogBuffer     = 5 // CU_JIT_ERROR_LOG_BUFFER
	jitErrorLogBufferSize = 6 // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
)

// Driver is the CUDA backend.
type Driver struct{}

// New returns the CUDA driver. Nothing is loaded until Count or Open.
func New() device.Driver { return Driver{} }

// Name returns "cuda".
func (Driver) Name() string { return "cuda" }

// Count loads libcuda.so.1 and returns the number of devices: ErrNoDriver when the library is
// missing, ErrNoDevice when it reports none.
func (Driver) Count() (int, error) {
	if err := load(); err != nil {
		return 0, err
	}
	var n int32
	if err := check("cuDeviceGetCount", lib.cuDeviceGetCount(&n), ""); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, &device.Error{Op: "cuDeviceGetCount", Arg: "0 devices", Kind: device.ErrNoDevice}
	}
	return int(n), nil
}

// Open retains the primary context of device ordinal.
func (drv Driver) Open(ordinal int) (device.Device, error) {
	n, err := drv.Count()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, &device.Error{Op: "cuda.Open", Arg: fmt.Sprintf("ordinal=%d, have %d devices", ordinal, n), Kind: device.ErrNoDevice}
	}
	d := &cudaDevice{
		allocs: map[devptr]int{}, hosts: map[unsafe.Pointer]int{}, imports: map[devptr]bool{},
		streams: map[*stream]bool{}, events: map[*event]bool{}, modules: map[*module]bool{},
		peers: map[cuDevice]bool{},
	}
	arg := fmt.Sprintf("ordinal=%d", ordinal)
	if err := check("cuDeviceGet", lib.cuDeviceGet(&d.dev, int32(ordinal)), arg); err != nil {
		return nil, err
	}
	if err := check("cuDevicePrimaryCtxRetain", lib.cuDevicePrimaryCtxRetain(&d.ctx, d.dev), arg); err != nil {
		return nil, err
	}
	info, err := d.query(ordinal)
	if err == nil {
		err = d.call(func() error {
			return check("cuStreamCreate", lib.cuStreamCreate(&d.sync, streamNonBlocking), "flags=CU_STREAM_NON_BLOCKING")
		})
	}
	if err != nil {
		lib.cuDevicePrimaryCtxRelease(d.dev)
		return nil, err
	}
	d.info = info
	return d, nil
}

func (d *cudaDevice) query(ordinal int) (device.Info, error) {
	info := device.Info{Driver: "cuda", Ordinal: ordinal}
	arg := fmt.Sprintf("device %d", ordinal)
	var name [256]byte
	if err := check("cuDeviceGetName", lib.cuDeviceGetName(&name[0], int32(len(name)), d.dev), arg); err != nil {
		return info, err
	}
	info.Name = cbuf(name[:])
	var major, minor, mps int32
	for _, a := range []struct {
		attr int32
		v    *int32
	}{{attrCCMajor, &major}, {attrCCMinor, &minor}, {attrMultiprocessorCount, &mps}} {
		if err := check("cuDeviceGetAttribute", lib.cuDeviceGetAttribute(a.v, a.attr, d.dev), fmt.Sprintf("%s attr=%d", arg, a.attr)); err != nil {
			return info, err
		}
	}
	info.Arch = fmt.Sprintf("sm_%d%d", major, minor)
	info.Multiprocessors = int(mps)
	if err := check("cuDeviceTotalMem_v2", lib.cuDeviceTotalMem(&info.MemoryBytes, d.dev), arg); err != nil {
		return info, err
	}
	var uuid [16]byte
	if err := check("cuDeviceGetUuid_v2", lib.cuDeviceGetUuid(&uuid, d.dev), arg); err != nil {
		return info, err
	}
	info.UUID = uuidString(uuid)
	var bus [64]byte
	if err := check("cuDeviceGetPCIBusId", lib.cuDeviceGetPCIBusId(&bus[0], int32(len(bus)), d.dev), arg); err != nil {
		return info, err
	}
	info.PCIBusID = cbuf(bus[:])
	return info, nil
}

type cudaDevice struct {
	info device.Info
	dev  cuDevice
	ctx  cuContext
	sync cuStream // private stream for the synchronous calls

	life   sync.RWMutex // calls hold it shared; Close holds it exclusively
	closed bool

	mu      sync.Mutex // guards the maps below
	allocs  map[devptr]int
	hosts   map[unsafe.Pointer]int
	imports map[devptr]bool
	streams map[*stream]bool
	events  map[*event]bool
	modules map[*module]bool
	peers   map[cuDevice]bool // peers whose primary context this device retained
}

var _ device.Device = (*cudaDevice)(nil)

func (d *cudaDevice) Info() device.Info { return d.info }

// call runs f with the device's context current on a locked OS thread (see the package doc),
// or fails with ErrClosed once the device is closed.
func (d *cudaDevice) call(f func() error) error {
	d.life.RLock()
	defer d.life.RUnlock()
	if d.closed {
		return &device.Error{Op: "cuda device", Arg: fmt.Sprintf("ordinal=%d", d.info.Ordinal), Kind: device.ErrClosed}
	}
	return d.callLocked(f)
}

func (d *cudaDevice) callLocked(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := check("cuCtxSetCurrent", lib.cuCtxSetCurrent(d.ctx), fmt.Sprintf("device %d", d.info.Ordinal)); err != nil {
		return err
	}
	return f()
}

// syncStream runs f on the private stream and waits for it.
func (d *cudaDevice) syncStream(f func(s cuStream) error) error {
	return d.call(func() error {
		if err := f(d.sync); err != nil {
			return err
		}
		return check("cuStreamSynchronize", lib.cuStreamSynchronize(d.sync), "")
	})
}

func sizeArg(op string, n int) error {
	if n <= 0 {
		return &device.Error{Op: op, Arg: fmt.Sprintf("size=%d", n), Kind: device.ErrInvalid}
	}
	return nil
}

func (d *cudaDevice) Alloc(size int) (device.Ptr, error) {
	if err := sizeArg("cuMemAlloc_v2", size); err != nil {
		return 0, err
	}
	var p devptr
	err := d.call(func() error {
		return check("cuMemAlloc_v2", lib.cuMemAlloc(&p, uint64(size)), fmt.Sprintf("size=%d", size))
	})
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	d.allocs[p] = size
	d.mu.Unlock()
	return device.Ptr(p), nil
}

// take removes p from m and fails with ErrInvalid naming op when it is not there.
func take[K comparable, V any](d *cudaDevice, m map[K]V, k K, op, what string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := m[k]; !ok {
		return &device.Error{Op: op, Arg: fmt.Sprintf("%#x: not %s of this device", any(k), what), Kind: device.ErrInvalid}
	}
	delete(m, k)
	return nil
}

func (d *cudaDevice) Free(p device.Ptr) error {
	if err := take(d, d.allocs, devptr(p), "cuMemFree_v2", "an allocation"); err != nil {
		return err
	}
	return d.call(func() error {
		return check("cuMemFree_v2", lib.cuMemFree(devptr(p)), fmt.Sprintf("ptr=%#x", uintptr(p)))
	})
}

func (d *cudaDevice) AllocHost(size int) (device.HostBuffer, error) {
	if err := sizeArg("cuMemHostAlloc", size); err != nil {
		return device.HostBuffer{}, err
	}
	var hp unsafe.Pointer
	var dp devptr
	err := d.call(func() error {
		arg := fmt.Sprintf("size=%d flags=PORTABLE|DEVICEMAP", size)
		if err := check("cuMemHostAlloc", lib.cuMemHostAlloc(&hp, uint64(size), memHostAllocPortable|memHostAllocDeviceMap), arg); err != nil {
			return err
		}
		if err := check("cuMemHostGetDevicePointer_v2", lib.cuMemHostGetDevicePointer(&dp, hp, 0), fmt.Sprintf("host=%p", hp)); err != nil {
			lib.cuMemFreeHost(hp)
			return err
		}
		return nil
	})
	if err != nil {
		return device.HostBuffer{}, err
	}
	d.mu.Lock()
	d.hosts[hp] = size
	d.mu.Unlock()
	return device.HostBuffer{Bytes: unsafe.Slice((*byte)(hp), size), Dev: device.Ptr(dp)}, nil
}

func (d *cudaDevice) FreeHost(b device.HostBuffer) error {
	if len(b.Bytes) == 0 {
		return &device.Error{Op: "cuMemFreeHost", Arg: "empty buffer", Kind: device.ErrInvalid}
	}
	hp := unsafe.Pointer(unsafe.SliceData(b.Bytes))
	if err := take(d, d.hosts, hp, "cuMemFreeHost", "a host buffer"); err != nil {
		return err
	}
	return d.call(func() error { return check("cuMemFreeHost", lib.cuMemFreeHost(hp), fmt.Sprintf("host=%p", hp)) })
}

func (d *cudaDevice) Memset(dst device.Ptr, value byte, n int) error {
	if n == 0 {
		return nil
	}
	return d.syncStream(func(s cuStream) error { return memsetAsync(dst, value, n, s) })
}

func (d *cudaDevice) CopyHtoD(dst device.Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return d.syncStream(func(s cuStream) error { return copyHtoDAsync(dst, src, s) })
}

func (d *cudaDevice) CopyDtoH(dst []byte, src device.Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.syncStream(func(s cuStream) error { return copyDtoHAsync(dst, src, s) })
}

func (d *cudaDevice) CopyDtoD(dst, src device.Ptr, n int) error {
	if n == 0 {
		return nil
	}
	return d.syncStream(func(s cuStream) error { return copyAsync(dst, src, n, s) })
}

func memsetAsync(dst device.Ptr, value byte, n int, s cuStream) error {
	arg := fmt.Sprintf("dst=%#x value=%d n=%d", uintptr(dst), value, n)
	if n < 0 {
		return &device.Error{Op: "cuMemsetD8Async", Arg: arg, Kind: device.ErrInvalid}
	}
	return check("cuMemsetD8Async", lib.cuMemsetD8Async(devptr(dst), value, uint64(n), s), arg)
}

func copyHtoDAsync(dst device.Ptr, src []byte, s cuStream) error {
	return check("cuMemcpyHtoDAsync_v2", lib.cuMemcpyHtoDAsync(devptr(dst), unsafe.Pointer(unsafe.SliceData(src)), uint64(len(src)), s),
		fmt.Sprintf("dst=%#x n=%d", uintptr(dst), len(src)))
}

func copyDtoHAsync(dst []byte, src device.Ptr, s cuStream) error {
	return check("cuMemcpyDtoHAsync_v2", lib.cuMemcpyDtoHAsync(unsafe.Pointer(unsafe.SliceData(dst)), devptr(src), uint64(len(dst)), s),
		fmt.Sprintf("src=%#x n=%d", uintptr(src), len(dst)))
}

func copyAsync(dst, src device.Ptr, n int, s cuStream) error {
	arg := fmt.Sprintf("dst=%#x src=%#x n=%d", uintptr(dst), uintptr(src), n)
	if n < 0 {
		return &device.Error{Op: "cuMemcpyAsync", Arg: arg, Kind: device.ErrInvalid}
	}
	return check("cuMemcpyAsync", lib.cuMemcpyAsync(devptr(dst), devptr(src), uint64(n), s), arg)
}

func (d *cudaDevice) Synchronize() error {
	return d.call(func() error {
		return check("cuCtxSynchronize", lib.cuCtxSynchronize(), fmt.Sprintf("device %d", d.info.Ordinal))
	})
}

// Handle layout: "ROXCUDA1", the 64-byte CUipcMemHandle, the allocation size (little endian).
const handleSize = 8 + 64 + 8

var handleMagic = [8]byte{'R', 'O', 'X', 'C', 'U', 'D', 'A', '1'}

func (d *cudaDevice) Export(p device.Ptr) ([]byte, error) {
	d.mu.Lock()
	size, ok := d.allocs[devptr(p)]
	d.mu.Unlock()
	if !ok {
		return nil, &device.Error{Op: "cuIpcGetMemHandle", Arg: fmt.Sprintf("ptr=%#x: not the start of an allocation of this device", uintptr(p)), Kind: device.ErrInvalid}
	}
	var h ipcMemHandle
	if err := d.call(func() error {
		return check("cuIpcGetMemHandle", lib.cuIpcGetMemHandle(&h, devptr(p)), fmt.Sprintf("ptr=%#x", uintptr(p)))
	}); err != nil {
		return nil, err
	}
	out := make([]byte, handleSize)
	copy(out, handleMagic[:])
	copy(out[8:], h.Reserved[:])
	binary.LittleEndian.PutUint64(out[72:], uint64(size))
	return out, nil
}

func (d *cudaDevice) Import(handle []byte) (device.Ptr, error) {
	if len(handle) != handleSize || [8]byte(handle[:8]) != handleMagic {
		return 0, &device.Error{Op: "cuIpcOpenMemHandle_v2", Arg: fmt.Sprintf("handle of %d bytes %.8q: not a cuda export handle", len(handle), handle), Kind: device.ErrInvalid}
	}
	var h ipcMemHandle
	copy(h.Reserved[:], handle[8:72])
	size := binary.LittleEndian.Uint64(handle[72:])
	var p devptr
	if err := d.call(func() error {
		return check("cuIpcOpenMemHandle_v2", lib.cuIpcOpenMemHandle(&p, h, ipcLazyEnablePeer),
			fmt.Sprintf("size=%d flags=CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS", size))
	}); err != nil {
		return 0, err
	}
	d.mu.Lock()
	d.imports[p] = true
	d.mu.Unlock()
	return device.Ptr(p), nil
}

func (d *cudaDevice) CloseImport(p device.Ptr) error {
	if err := take(d, d.imports, devptr(p), "cuIpcCloseMemHandle", "an import"); err != nil {
		return err
	}
	return d.call(func() error {
		return check("cuIpcCloseMemHandle", lib.cuIpcCloseMemHandle(devptr(p)), fmt.Sprintf("ptr=%#x", uintptr(p)))
	})
}

// EnablePeerAccess maps the peer device's memory into this device's context (both in this
// process); memory imported from another process is mapped by Import itself.
func (d *cudaDevice) EnablePeerAccess(peer device.Info) error {
	if peer.Driver != "cuda" || peer.PCIBusID == "" {
		return &device.Error{Op: "cuda.EnablePeerAccess", Arg: fmt.Sprintf("peer %s device %q", peer.Driver, peer.PCIBusID), Kind: device.ErrNotSupported}
	}
	return d.call(func() error {
		var pd cuDevice
		if err := check("cuDeviceGetByPCIBusId", lib.cuDeviceGetByPCIBusId(&pd, peer.PCIBusID), peer.PCIBusID); err != nil {
			return err
		}
		if pd == d.dev {
			return nil
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.peers[pd] {
			return nil
		}
		var can int32
		arg := fmt.Sprintf("%s -> %s", d.info.PCIBusID, peer.PCIBusID)
		if err := check("cuDeviceCanAccessPeer", lib.cuDeviceCanAccessPeer(&can, d.dev, pd), arg); err != nil {
			return err
		}
		if can == 0 {
			return &device.Error{Op: "cuDeviceCanAccessPeer", Arg: arg + ": no", Kind: device.ErrNotSupported}
		}
		var pctx cuContext
		if err := check("cuDevicePrimaryCtxRetain", lib.cuDevicePrimaryCtxRetain(&pctx, pd), peer.PCIBusID); err != nil {
			return err
		}
		if r := lib.cuCtxEnablePeerAccess(pctx, 0); r != Success && r != ErrorPeerAccessAlreadyEnabled {
			lib.cuDevicePrimaryCtxRelease(pd)
			return check("cuCtxEnablePeerAccess", r, arg)
		}
		d.peers[pd] = true
		return nil
	})
}

// Close waits for the device's work, releases everything it still owns and its primary context.
func (d *cudaDevice) Close() error {
	d.life.Lock()
	defer d.life.Unlock()
	if d.closed {
		return &device.Error{Op: "cuda.Close", Arg: fmt.Sprintf("ordinal=%d", d.info.Ordinal), Kind: device.ErrClosed}
	}
	d.closed = true
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	d.callLocked(func() error {
		keep(check("cuCtxSynchronize", lib.cuCtxSynchronize(), ""))
		for s := range d.streams {
			s.destroyed = true
			keep(check("cuStreamDestroy_v2", lib.cuStreamDestroy(s.h), ""))
		}
		for e := range d.events {
			e.destroyed = true
			keep(check("cuEventDestroy_v2", lib.cuEventDestroy(e.h), ""))
		}
		for m := range d.modules {
			m.unloaded = true
			keep(check("cuModuleUnload", lib.cuModuleUnload(m.h), m.name))
		}
		for p := range d.imports {
			keep(check("cuIpcCloseMemHandle", lib.cuIpcCloseMemHandle(p), fmt.Sprintf("ptr=%#x", uintptr(p))))
		}
		for p := range d.allocs {
			keep(check("cuMemFree_v2", lib.cuMemFree(p), fmt.Sprintf("ptr=%#x", uintptr(p))))
		}
		for p := range d.hosts {
			keep(check("cuMemFreeHost", lib.cuMemFreeHost(p), fmt.Sprintf("host=%p", p)))
		}
		keep(check("cuStreamDestroy_v2", lib.cuStreamDestroy(d.sync), "private stream"))
		return nil
	})
	for pd := range d.peers {
		keep(check("cuDevicePrimaryCtxRelease_v2", lib.cuDevicePrimaryCtxRelease(pd), "peer"))
	}
	keep(check("cuDevicePrimaryCtxRelease_v2", lib.cuDevicePrimaryCtxRelease(d.dev), fmt.Sprintf("ordinal=%d", d.info.Ordinal)))
	return first
}

// Streams.

type stream struct {
	d         *cudaDevice
	h         cuStream
	destroyed bool // guarded by d.mu
}

var _ device.Stream = (*stream)(nil)

func (d *cudaDevice) NewStream() (device.Stream, error) {
	s := &stream{d: d}
	if err := d.call(func() error {
		return check("cuStreamCreate", lib.cuStreamCreate(&s.h, streamNonBlocking), "flags=CU_STREAM_NON_BLOCKING")
	}); err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.streams[s] = true
	d.mu.Unlock()
	return s, nil
}

// do runs f with the stream's handle on the device's thread-and-context, or fails when the
// stream was destroyed.
func (s *stream) do(op string, f func() error) error {
	return s.d.call(func() error {
		s.d.mu.Lock()
		dead := s.destroyed
		s.d.mu.Unlock()
		if dead {
			return &device.Error{Op: op, Arg: "stream destroyed", Kind: device.ErrClosed}
		}
		return f()
	})
}

func (s *stream) CopyAsync(dst, src device.Ptr, n int) error {
	return s.do("cuMemcpyAsync", func() error { return copyAsync(dst, src, n, s.h) })
}

// CopyHtoDAsync: src must stay valid and unchanged until the stream reaches the copy.
func (s *stream) CopyHtoDAsync(dst device.Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return s.do("cuMemcpyHtoDAsync_v2", func() error { return copyHtoDAsync(dst, src, s.h) })
}

// CopyDtoHAsync: dst must stay valid and not be read until the stream reaches the copy.
func (s *stream) CopyDtoHAsync(dst []byte, src device.Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return s.do("cuMemcpyDtoHAsync_v2", func() error { return copyDtoHAsync(dst, src, s.h) })
}

func (s *stream) MemsetAsync(dst device.Ptr, value byte, n int) error {
	return s.do("cuMemsetD8Async", func() error { return memsetAsync(dst, value, n, s.h) })
}

// PeerCopyAsync copies n bytes from src on device srcDev to dst on device dstDev (both opened in
// this process) with cuMemcpyPeerAsync, on this stream.
func (s *stream) PeerCopyAsync(dst device.Ptr, dstDev device.Device, src device.Ptr, srcDev device.Device, n int) error {
	dd, ok1 := dstDev.(*cudaDevice)
	sd, ok2 := srcDev.(*cudaDevice)
	arg := fmt.Sprintf("dst=%#x src=%#x n=%d", uintptr(dst), uintptr(src), n)
	if !ok1 || !ok2 || n < 0 {
		return &device.Error{Op: "cuMemcpyPeerAsync", Arg: arg + fmt.Sprintf(" devices %T %T", dstDev, srcDev), Kind: device.ErrInvalid}
	}
	return s.do("cuMemcpyPeerAsync", func() error {
		return check("cuMemcpyPeerAsync", lib.cuMemcpyPeerAsync(devptr(dst), dd.ctx, devptr(src), sd.ctx, uint64(n), s.h), arg)
	})
}

func (s *stream) Launch(fn device.Function, grid, block device.Dim3, sharedBytes int, args ...any) error {
	f, ok := fn.(*function)
	if !ok || f == nil {
		return &device.Error{Op: "cuLaunchKernel", Arg: fmt.Sprintf("function of type %T", fn), Kind: device.ErrInvalid}
	}
	arg := fmt.Sprintf("%s grid=%v block=%v shared=%d", f.name, grid, block, sharedBytes)
	if sharedBytes < 0 || grid.X == 0 || grid.Y == 0 || grid.Z == 0 || block.X == 0 || block.Y == 0 || block.Z == 0 {
		return &device.Error{Op: "cuLaunchKernel", Arg: arg, Kind: device.ErrInvalid}
	}
	if _, err := device.CheckArgs("cuLaunchKernel "+f.name, args); err != nil {
		return err
	}
	// Each argument lives in its own 8-byte slot (little endian, so a 4-byte value is at the
	// slot's start); kernelParams points at the slots. The driver copies them during the call.
	slots := make([]uint64, len(args)+1)
	params := make([]unsafe.Pointer, len(args)+1)
	for i, a := range args {
		switch v := a.(type) {
		case int32:
			slots[i] = uint64(uint32(v))
		case uint32:
			slots[i] = uint64(v)
		case int64:
			slots[i] = uint64(v)
		case uint64:
			slots[i] = v
		case float32:
			slots[i] = uint64(math.Float32bits(v))
		case float64:
			slots[i] = math.Float64bits(v)
		case device.Ptr:
			slots[i] = uint64(v)
		case uintptr:
			slots[i] = uint64(v)
		}
		params[i] = unsafe.Pointer(&slots[i])
	}
	var pin runtime.Pinner
	pin.Pin(&slots[0])
	pin.Pin(&params[0])
	defer pin.Unpin()
	return s.do("cuLaunchKernel", func() error {
		f.mod.d.mu.Lock()
		dead := f.mod.unloaded
		f.mod.d.mu.Unlock()
		if dead {
			return &device.Error{Op: "cuLaunchKernel", Arg: arg + ": module unloaded", Kind: device.ErrClosed}
		}
		return check("cuLaunchKernel", lib.cuLaunchKernel(f.h, grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z,
			uint32(sharedBytes), s.h, &params[0], nil), arg)
	})
}

func (s *stream) Record(e device.Event) error {
	ev, ok := e.(*event)
	if !ok || ev == nil {
		return &device.Error{Op: "cuEventRecord", Arg: fmt.Sprintf("event of type %T", e), Kind: device.ErrInvalid}
	}
	return s.do("cuEventRecord", func() error {
		if err := ev.alive("cuEventRecord"); err != nil {
			return err
		}
		return check("cuEventRecord", lib.cuEventRecord(ev.h, s.h), "")
	})
}

func (s *stream) Wait(e device.Event) error {
	ev, ok := e.(*event)
	if !ok || ev == nil {
		return &device.Error{Op: "cuStreamWaitEvent", Arg: fmt.Sprintf("event of type %T", e), Kind: device.ErrInvalid}
	}
	return s.do("cuStreamWaitEvent", func() error {
		if err := ev.alive("cuStreamWaitEvent"); err != nil {
			return err
		}
		return check("cuStreamWaitEvent", lib.cuStreamWaitEvent(s.h, ev.h, 0), "")
	})
}

func (s *stream) Synchronize() error {
	return s.do("cuStreamSynchronize", func() error { return check("cuStreamSynchronize", lib.cuStreamSynchronize(s.h), "") })
}

func (s *stream) Query() (bool, error) {
	var r Result
	err := s.do("cuStreamQuery", func() error { r = lib.cuStreamQuery(s.h); return nil })
	if err != nil {
		return false, err
	}
	if r == ErrorNotReady {
		return false, nil
	}
	return r == Success, check("cuStreamQuery", r, "")
}

// Destroy releases the stream; work already queued still completes.
func (s *stream) Destroy() error {
	return s.d.call(func() error {
		s.d.mu.Lock()
		if s.destroyed {
			s.d.mu.Unlock()
			return &device.Error{Op: "cuStreamDestroy_v2", Arg: "stream destroyed", Kind: device.ErrClosed}
		}
		s.destroyed = true
		delete(s.d.streams, s)
		s.d.mu.Unlock()
		return check("cuStreamDestroy_v2", lib.cuStreamDestroy(s.h), "")
	})
}

// Events.

type event struct {
	d         *cudaDevice
	h         cuEvent
	destroyed bool // guarded by d.mu
}

var _ device.Event = (*event)(nil)

func (d *cudaDevice) NewEvent() (device.Event, error) {
	e := &event{d: d}
	if err := d.call(func() error {
		return check("cuEventCreate", lib.cuEventCreate(&e.h, eventDefault), "flags=CU_EVENT_DEFAULT")
	}); err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.events[e] = true
	d.mu.Unlock()
	return e, nil
}

func (e *event) alive(op string) error {
	e.d.mu.Lock()
	defer e.d.mu.Unlock()
	if e.destroyed {
		return &device.Error{Op: op, Arg: "event destroyed", Kind: device.ErrClosed}
	}
	return nil
}

func (e *event) Synchronize() error {
	return e.d.call(func() error {
		if err := e.alive("cuEventSynchronize"); err != nil {
			return err
		}
		return check("cuEventSynchronize", lib.cuEventSynchronize(e.h), "")
	})
}

func (e *event) Since(start device.Event) (time.Duration, error) {
	st, ok := start.(*event)
	if !ok || st == nil {
		return 0, &device.Error{Op: "cuEventElapsedTime", Arg: fmt.Sprintf("start event of type %T", start), Kind: device.ErrInvalid}
	}
	var ms float32
	err := e.d.call(func() error {
		if err := e.alive("cuEventElapsedTime"); err != nil {
			return err
		}
		if err := st.alive("cuEventElapsedTime"); err != nil {
			return err
		}
		return check("cuEventElapsedTime", lib.cuEventElapsedTime(&ms, st.h, e.h), "")
	})
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}

func (e *event) Destroy() error {
	return e.d.call(func() error {
		e.d.mu.Lock()
		if e.destroyed {
			e.d.mu.Unlock()
			return &device.Error{Op: "cuEventDestroy_v2", Arg: "event destroyed", Kind: device.ErrClosed}
		}
		e.destroyed = true
		delete(e.d.events, e)
		e.d.mu.Unlock()
		return check("cuEventDestroy_v2", lib.cuEventDestroy(e.h), "")
	})
}

// Modules.

type module struct {
	d        *cudaDevice
	h        cuModule
	name     string // for errors: the first bytes of the image
	unloaded bool   // guarded by d.mu
}

var _ device.Module = (*module)(nil)

// LoadModule loads PTX (JIT-compiled for this device) or a cubin/fatbin. A PTX compile error
// comes back with the JIT's error log.
func (d *cudaDevice) LoadModule(image []byte) (device.Module, error) {
	if len(image) == 0 {
		return nil, &device.Error{Op: "cuModuleLoadDataEx", Arg: "empty image", Kind: device.ErrInvalid}
	}
	img := make([]byte, len(image)+1) // PTX must be NUL-terminated
	copy(img, image)
	logBuf := make([]byte, 16<<10)
	opts := []int32{jitErrorLogBuffer, jitErrorLogBufferSize}
	vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
	var pin runtime.Pinner
	pin.Pin(&img[0])
	pin.Pin(&logBuf[0])
	pin.Pin(&opts[0])
	pin.Pin(&vals[0])
	defer pin.Unpin()
	m := &module{d: d, name: fmt.Sprintf("image of %d bytes", len(image))}
	err := d.call(func() error {
		r := lib.cuModuleLoadDataEx(&m.h, unsafe.Pointer(&img[0]), uint32(len(opts)), &opts[0], &vals[0])
		arg := m.name
		if log := cbuf(logBuf); log != "" {
			arg += ": " + log
		}
		return check("cuModuleLoadDataEx", r, arg)
	})
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.modules[m] = true
	d.mu.Unlock()
	return m, nil
}

func (m *module) do(op string, f func() error) error {
	return m.d.call(func() error {
		m.d.mu.Lock()
		dead := m.unloaded
		m.d.mu.Unlock()
		if dead {
			return &device.Error{Op: op, Arg: "module unloaded", Kind: device.ErrClosed}
		}
		return f()
	})
}

func (m *module) Function(name string) (device.Function, error) {
	f := &function{mod: m, name: name}
	if err := m.do("cuModuleGetFunction", func() error {
		return check("cuModuleGetFunction", lib.cuModuleGetFunction(&f.h, m.h, name), fmt.Sprintf("name=%q", name))
	}); err != nil {
		return nil, err
	}
	return f, nil
}

func (m *module) Global(name string) (device.Ptr, int, error) {
	var p devptr
	var size uint64
	err := m.do("cuModuleGetGlobal_v2", func() error {
		return check("cuModuleGetGlobal_v2", lib.cuModuleGetGlobal(&p, &size, m.h, name), fmt.Sprintf("name=%q", name))
	})
	return device.Ptr(p), int(size), err
}

func (m *module) Unload() error {
	return m.d.call(func() error {
		m.d.mu.Lock()
		if m.unloaded {
			m.d.mu.Unlock()
			return &device.Error{Op: "cuModuleUnload", Arg: "module unloaded", Kind: device.ErrClosed}
		}
		m.unloaded = true
		delete(m.d.modules, m)
		m.d.mu.Unlock()
		return check("cuModuleUnload", lib.cuModuleUnload(m.h), m.name)
	})
}

type function struct {
	mod  *module
	h    cuFunc
	name string
}

func (f *function) Name() string { return f.name }
