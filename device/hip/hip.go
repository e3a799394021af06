// Package hip implements the device interfaces on AMD GPUs through the HIP runtime
// (libamdhip64.so, .so.6 or .so.5), loaded with purego: no cgo, no ROCm at build time. It mirrors
// device/cuda call for call.
//
// Thread affinity: HIP's current device is per OS thread. Every call into the runtime locks the
// calling goroutine to its OS thread, makes the device current there (hipSetDevice) and makes
// the call. Any goroutine may therefore use a Device, and calls from several goroutines run in
// parallel; blocking calls (stream or event synchronization) hold only their own thread.
//
// Synchronous calls (Memset, CopyHtoD, CopyDtoH, CopyDtoD) run on a private non-blocking stream
// and wait for it; like Streams from NewStream (created hipStreamNonBlocking) they are not
// ordered with other streams. Device.Synchronize waits for all of the device's work.
//
// Bindings carry their C prototypes from hip/hip_runtime_api.h.
package hip

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

// Constants from hip/hip_runtime_api.h.
const (
	// hipDeviceAttribute_t counts up from hipDeviceAttributeCudaCompatibleBegin = 0; this is the
	// position of hipDeviceAttributeMultiprocessorCount (stable from ROCm 5.0 on: later releases
	// append).
	attrMultiprocessorCount = 63

	hostMallocPortable = 0x01 // hipHostMallocPortable
	hostMallocMapped   = 0x02 // hipHostMallocMapped
	streamNonBlocking  = 0x01 // hipStreamNonBlocking
	memcpyDefault      = 4    // hipMemcpyDefault

	// hipIpcMemLazyEnablePeerAccess is 0x01 in current headers and was 0 in early ROCm 5 ones;
	// Import tries the first and falls back to the second on hipErrorInvalidValue.
	ipcLazyEnablePeer    = 0x01
	ipcLazyEnablePeerOld = 0x00

	propsSize = 16 << 10 // larger than any hipDeviceProp_t so far (R0600 is about 1.5 KiB)
)

// Driver is the HIP backend.
type Driver struct{}

// New returns the HIP driver. Nothing is loaded until Count or Open.
func New() device.Driver { return Driver{} }

// Name returns "hip".
func (Driver) Name() string { return "hip" }

// Count loads libamdhip64 and returns the number of devices: ErrNoDriver when the library is
// missing, ErrNoDevice when it reports none.
func (Driver) Count() (int, error) {
	if err := load(); err != nil {
		return 0, err
	}
	var n int32
	if err := check("hipGetDeviceCount", lib.hipGetDeviceCount(&n), Loaded()); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, &device.Error{Op: "hipGetDeviceCount", Arg: Loaded() + ": 0 devices", Kind: device.ErrNoDevice}
	}
	return int(n), nil
}

// Open opens device ordinal.
func (drv Driver) Open(ordinal int) (device.Device, error) {
	n, err := drv.Count()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, &device.Error{Op: "hip.Open", Arg: fmt.Sprintf("ordinal=%d, have %d devices", ordinal, n), Kind: device.ErrNoDevice}
	}
	d := &hipDevice{
		dev:    int32(ordinal),
		allocs: map[devptr]int{}, hosts: map[unsafe.Pointer]int{}, imports: map[devptr]bool{},
		streams: map[*stream]bool{}, events: map[*event]bool{}, modules: map[*module]bool{},
		peers: map[int32]bool{},
	}
	d.info.Ordinal = ordinal
	info, err := d.query(ordinal)
	if err == nil {
		err = d.call(func() error {
			return check("hipStreamCreateWithFlags", lib.hipStreamCreateWithFlags(&d.sync, streamNonBlocking), "flags=hipStreamNonBlocking")
		})
	}
	if err != nil {
		return nil, err
	}
	d.info = info
	return d, nil
}

func (d *hipDevice) query(ordinal int) (device.Info, error) {
	info := device.Info{Driver: "hip", Ordinal: ordinal}
	arg := fmt.Sprintf("device %d", ordinal)
	var name [256]byte
	if err := check("hipDeviceGetName", lib.hipDeviceGetName(&name[0], int32(len(name)), d.dev), arg); err != nil {
		return info, err
	}
	info.Name = cbuf(name[:])
	var mps int32
	if err := check("hipDeviceGetAttribute", lib.hipDeviceGetAttribute(&mps, attrMultiprocessorCount, d.dev),
		arg+" attr=hipDeviceAttributeMultiprocessorCount"); err != nil {
		return info, err
	}
	info.Multiprocessors = int(mps)
	props := make([]byte, propsSize)
	if err := check("hipGetDeviceProperties", lib.hipGetDeviceProperties(unsafe.Pointer(&props[0]), d.dev), arg); err != nil {
		return info, err
	}
	info.Arch = archName(props)
	if err := check("hipDeviceTotalMem", lib.hipDeviceTotalMem(&info.MemoryBytes, d.dev), arg); err != nil {
		return info, err
	}
	var uuid [16]byte
	if err := check("hipDeviceGetUuid", lib.hipDeviceGetUuid(&uuid, d.dev), arg); err != nil {
		return info, err
	}
	info.UUID = uuidString(uuid)
	var bus [64]byte
	if err := check("hipDeviceGetPCIBusId", lib.hipDeviceGetPCIBusId(&bus[0], int32(len(bus)), d.dev), arg); err != nil {
		return info, err
	}
	info.PCIBusID = cbuf(bus[:])
	return info, nil
}

type hipDevice struct {
	info device.Info
	dev  int32     // the HIP device ordinal
	sync hipStream // private stream for the synchronous calls

	life   sync.RWMutex // calls hold it shared; Close holds it exclusively
	closed bool

	mu      sync.Mutex // guards the maps below
	allocs  map[devptr]int
	hosts   map[unsafe.Pointer]int
	imports map[devptr]bool
	streams map[*stream]bool
	events  map[*event]bool
	modules map[*module]bool
	peers   map[int32]bool // peers this device enabled access to
}

var _ device.Device = (*hipDevice)(nil)

func (d *hipDevice) Info() device.Info { return d.info }

// call runs f with the device current on a locked OS thread (see the package doc), or fails
// with ErrClosed once the device is closed.
func (d *hipDevice) call(f func() error) error {
	d.life.RLock()
	defer d.life.RUnlock()
	if d.closed {
		return &device.Error{Op: "hip device", Arg: fmt.Sprintf("ordinal=%d", d.info.Ordinal), Kind: device.ErrClosed}
	}
	return d.callLocked(f)
}

func (d *hipDevice) callLocked(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := check("hipSetDevice", lib.hipSetDevice(d.dev), fmt.Sprintf("device %d", d.dev)); err != nil {
		return err
	}
	return f()
}

// syncStream runs f on the private stream and waits for it.
func (d *hipDevice) syncStream(f func(s hipStream) error) error {
	return d.call(func() error {
		if err := f(d.sync); err != nil {
			return err
		}
		return check("hipStreamSynchronize", lib.hipStreamSynchronize(d.sync), "")
	})
}

func sizeArg(op string, n int) error {
	if n <= 0 {
		return &device.Error{Op: op, Arg: fmt.Sprintf("size=%d", n), Kind: device.ErrInvalid}
	}
	return nil
}

func (d *hipDevice) Alloc(size int) (device.Ptr, error) {
	if err := sizeArg("hipMalloc", size); err != nil {
		return 0, err
	}
	var p devptr
	err := d.call(func() error {
		return check("hipMalloc", lib.hipMalloc(&p, uint64(size)), fmt.Sprintf("size=%d", size))
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
func take[K comparable, V any](d *hipDevice, m map[K]V, k K, op, what string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := m[k]; !ok {
		return &device.Error{Op: op, Arg: fmt.Sprintf("%#x: not %s of this device", any(k), what), Kind: device.ErrInvalid}
	}
	delete(m, k)
	return nil
}

func (d *hipDevice) Free(p device.Ptr) error {
	if err := take(d, d.allocs, devptr(p), "hipFree", "an allocation"); err != nil {
		return err
	}
	return d.call(func() error {
		return check("hipFree", lib.hipFree(devptr(p)), fmt.Sprintf("ptr=%#x", uintptr(p)))
	})
}

func (d *hipDevice) AllocHost(size int) (device.HostBuffer, error) {
	if err := sizeArg("hipHostMalloc", size); err != nil {
		return device.HostBuffer{}, err
	}
	var hp unsafe.Pointer
	var dp devptr
	err := d.call(func() error {
		arg := fmt.Sprintf("size=%d flags=hipHostMallocPortable|hipHostMallocMapped", size)
		if err := check("hipHostMalloc", lib.hipHostMalloc(&hp, uint64(size), hostMallocPortable|hostMallocMapped), arg); err != nil {
			return err
		}
		if err := check("hipHostGetDevicePointer", lib.hipHostGetDevicePointer(&dp, hp, 0), fmt.Sprintf("host=%p", hp)); err != nil {
			lib.hipHostFree(hp)
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

func (d *hipDevice) FreeHost(b device.HostBuffer) error {
	if len(b.Bytes) == 0 {
		return &device.Error{Op: "hipHostFree", Arg: "empty buffer", Kind: device.ErrInvalid}
	}
	hp := unsafe.Pointer(unsafe.SliceData(b.Bytes))
	if err := take(d, d.hosts, hp, "hipHostFree", "a host buffer"); err != nil {
		return err
	}
	return d.call(func() error { return check("hipHostFree", lib.hipHostFree(hp), fmt.Sprintf("host=%p", hp)) })
}

func (d *hipDevice) Memset(dst device.Ptr, value byte, n int) error {
	if n == 0 {
		return nil
	}
	return d.syncStream(func(s hipStream) error { return memsetAsync(dst, value, n, s) })
}

func (d *hipDevice) CopyHtoD(dst device.Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return d.syncStream(func(s hipStream) error { return copyHtoDAsync(dst, src, s) })
}

func (d *hipDevice) CopyDtoH(dst []byte, src device.Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.syncStream(func(s hipStream) error { return copyDtoHAsync(dst, src, s) })
}

func (d *hipDevice) CopyDtoD(dst, src device.Ptr, n int) error {
	if n == 0 {
		return nil
	}
	return d.syncStream(func(s hipStream) error { return copyAsync(dst, src, n, s) })
}

func memsetAsync(dst device.Ptr, value byte, n int, s hipStream) error {
	arg := fmt.Sprintf("dst=%#x value=%d n=%d", uintptr(dst), value, n)
	if n < 0 {
		return &device.Error{Op: "hipMemsetD8Async", Arg: arg, Kind: device.ErrInvalid}
	}
	return check("hipMemsetD8Async", lib.hipMemsetD8Async(devptr(dst), value, uint64(n), s), arg)
}

func copyHtoDAsync(dst device.Ptr, src []byte, s hipStream) error {
	return check("hipMemcpyHtoDAsync", lib.hipMemcpyHtoDAsync(devptr(dst), unsafe.Pointer(unsafe.SliceData(src)), uint64(len(src)), s),
		fmt.Sprintf("dst=%#x n=%d", uintptr(dst), len(src)))
}

func copyDtoHAsync(dst []byte, src device.Ptr, s hipStream) error {
	return check("hipMemcpyDtoHAsync", lib.hipMemcpyDtoHAsync(unsafe.Pointer(unsafe.SliceData(dst)), devptr(src), uint64(len(dst)), s),
		fmt.Sprintf("src=%#x n=%d", uintptr(src), len(dst)))
}

func copyAsync(dst, src device.Ptr, n int, s hipStream) error {
	arg := fmt.Sprintf("dst=%#x src=%#x n=%d", uintptr(dst), uintptr(src), n)
	if n < 0 {
		return &device.Error{Op: "hipMemcpyAsync", Arg: arg, Kind: device.ErrInvalid}
	}
	return check("hipMemcpyAsync", lib.hipMemcpyAsync(devptr(dst), devptr(src), uint64(n), memcpyDefault, s), arg)
}

func (d *hipDevice) Synchronize() error {
	return d.call(func() error {
		return check("hipDeviceSynchronize", lib.hipDeviceSynchronize(), fmt.Sprintf("device %d", d.info.Ordinal))
	})
}

// Handle layout: "ROXHIP01", the 64-byte hipIpcMemHandle_t, the allocation size (little endian).
const handleSize = 8 + 64 + 8

var handleMagic = [8]byte{'R', 'O', 'X', 'H', 'I', 'P', '0', '1'}

func (d *hipDevice) Export(p device.Ptr) ([]byte, error) {
	d.mu.Lock()
	size, ok := d.allocs[devptr(p)]
	d.mu.Unlock()
	if !ok {
		return nil, &device.Error{Op: "hipIpcGetMemHandle", Arg: fmt.Sprintf("ptr=%#x: not the start of an allocation of this device", uintptr(p)), Kind: device.ErrInvalid}
	}
	var h ipcMemHandle
	if err := d.call(func() error {
		return check("hipIpcGetMemHandle", lib.hipIpcGetMemHandle(&h, devptr(p)), fmt.Sprintf("ptr=%#x", uintptr(p)))
	}); err != nil {
		return nil, err
	}
	out := make([]byte, handleSize)
	copy(out, handleMagic[:])
	copy(out[8:], h.Reserved[:])
	binary.LittleEndian.PutUint64(out[72:], uint64(size))
	return out, nil
}

func (d *hipDevice) Import(handle []byte) (device.Ptr, error) {
	if len(handle) != handleSize || [8]byte(handle[:8]) != handleMagic {
		return 0, &device.Error{Op: "hipIpcOpenMemHandle", Arg: fmt.Sprintf("handle of %d bytes %.8q: not a hip export handle", len(handle), handle), Kind: device.ErrInvalid}
	}
	var h ipcMemHandle
	copy(h.Reserved[:], handle[8:72])
	size := binary.LittleEndian.Uint64(handle[72:])
	var p devptr
	if err := d.call(func() error {
		r := lib.hipIpcOpenMemHandle(&p, h, ipcLazyEnablePeer)
		if r == ErrorInvalidValue { // a runtime whose hipIpcMemLazyEnablePeerAccess is 0
			r = lib.hipIpcOpenMemHandle(&p, h, ipcLazyEnablePeerOld)
		}
		return check("hipIpcOpenMemHandle", r, fmt.Sprintf("size=%d flags=hipIpcMemLazyEnablePeerAccess", size))
	}); err != nil {
		return 0, err
	}
	d.mu.Lock()
	d.imports[p] = true
	d.mu.Unlock()
	return device.Ptr(p), nil
}

func (d *hipDevice) CloseImport(p device.Ptr) error {
	if err := take(d, d.imports, devptr(p), "hipIpcCloseMemHandle", "an import"); err != nil {
		return err
	}
	return d.call(func() error {
		return check("hipIpcCloseMemHandle", lib.hipIpcCloseMemHandle(devptr(p)), fmt.Sprintf("ptr=%#x", uintptr(p)))
	})
}

// EnablePeerAccess maps the peer device's memory into this device (both in this process);
// memory imported from another process is mapped by Import itself.
func (d *hipDevice) EnablePeerAccess(peer device.Info) error {
	if peer.Driver != "hip" || peer.PCIBusID == "" {
		return &device.Error{Op: "hip.EnablePeerAccess", Arg: fmt.Sprintf("peer %s device %q", peer.Driver, peer.PCIBusID), Kind: device.ErrNotSupported}
	}
	return d.call(func() error {
		var pd int32
		if err := check("hipDeviceGetByPCIBusId", lib.hipDeviceGetByPCIBusId(&pd, peer.PCIBusID), peer.PCIBusID); err != nil {
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
		if err := check("hipDeviceCanAccessPeer", lib.hipDeviceCanAccessPeer(&can, d.dev, pd), arg); err != nil {
			return err
		}
		if can == 0 {
			return &device.Error{Op: "hipDeviceCanAccessPeer", Arg: arg + ": no", Kind: device.ErrNotSupported}
		}
		if r := lib.hipDeviceEnablePeerAccess(pd, 0); r != Success && r != ErrorPeerAccessAlreadyEnabled {
			return check("hipDeviceEnablePeerAccess", r, arg)
		}
		d.peers[pd] = true
		return nil
	})
}

// Close waits for the device's work and releases everything it still owns.
func (d *hipDevice) Close() error {
	d.life.Lock()
	defer d.life.Unlock()
	if d.closed {
		return &device.Error{Op: "hip.Close", Arg: fmt.Sprintf("ordinal=%d", d.info.Ordinal), Kind: device.ErrClosed}
	}
	d.closed = true
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	d.callLocked(func() error {
		keep(check("hipDeviceSynchronize", lib.hipDeviceSynchronize(), ""))
		for s := range d.streams {
			s.destroyed = true
			keep(check("hipStreamDestroy", lib.hipStreamDestroy(s.h), ""))
		}
		for e := range d.events {
			e.destroyed = true
			keep(check("hipEventDestroy", lib.hipEventDestroy(e.h), ""))
		}
		for m := range d.modules {
			m.unloaded = true
			keep(check("hipModuleUnload", lib.hipModuleUnload(m.h), m.name))
		}
		for p := range d.imports {
			keep(check("hipIpcCloseMemHandle", lib.hipIpcCloseMemHandle(p), fmt.Sprintf("ptr=%#x", uintptr(p))))
		}
		for p := range d.allocs {
			keep(check("hipFree", lib.hipFree(p), fmt.Sprintf("ptr=%#x", uintptr(p))))
		}
		for p := range d.hosts {
			keep(check("hipHostFree", lib.hipHostFree(p), fmt.Sprintf("host=%p", p)))
		}
		keep(check("hipStreamDestroy", lib.hipStreamDestroy(d.sync), "private stream"))
		return nil
	})
	return first
}

// Streams.

type stream struct {
	d         *hipDevice
	h         hipStream
	destroyed bool // guarded by d.mu
}

var _ device.Stream = (*stream)(nil)

func (d *hipDevice) NewStream() (device.Stream, error) {
	s := &stream{d: d}
	if err := d.call(func() error {
		return check("hipStreamCreateWithFlags", lib.hipStreamCreateWithFlags(&s.h, streamNonBlocking), "flags=hipStreamNonBlocking")
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
	return s.do("hipMemcpyAsync", func() error { return copyAsync(dst, src, n, s.h) })
}

// CopyHtoDAsync: src must stay valid and unchanged until the stream reaches the copy.
func (s *stream) CopyHtoDAsync(dst device.Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return s.do("hipMemcpyHtoDAsync", func() error { return copyHtoDAsync(dst, src, s.h) })
}

// CopyDtoHAsync: dst must stay valid and not be read until the stream reaches the copy.
func (s *stream) CopyDtoHAsync(dst []byte, src device.Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return s.do("hipMemcpyDtoHAsync", func() error { return copyDtoHAsync(dst, src, s.h) })
}

func (s *stream) MemsetAsync(dst device.Ptr, value byte, n int) error {
	return s.do("hipMemsetD8Async", func() error { return memsetAsync(dst, value, n, s.h) })
}

// PeerCopyAsync copies n bytes from src on device srcDev to dst on device dstDev (both opened in
// this process) with hipMemcpyPeerAsync, on this stream.
func (s *stream) PeerCopyAsync(dst device.Ptr, dstDev device.Device, src device.Ptr, srcDev device.Device, n int) error {
	dd, ok1 := dstDev.(*hipDevice)
	sd, ok2 := srcDev.(*hipDevice)
	arg := fmt.Sprintf("dst=%#x src=%#x n=%d", uintptr(dst), uintptr(src), n)
	if !ok1 || !ok2 || n < 0 {
		return &device.Error{Op: "hipMemcpyPeerAsync", Arg: arg + fmt.Sprintf(" devices %T %T", dstDev, srcDev), Kind: device.ErrInvalid}
	}
	return s.do("hipMemcpyPeerAsync", func() error {
		return check("hipMemcpyPeerAsync", lib.hipMemcpyPeerAsync(devptr(dst), dd.dev, devptr(src), sd.dev, uint64(n), s.h), arg)
	})
}

func (s *stream) Launch(fn device.Function, grid, block device.Dim3, sharedBytes int, args ...any) error {
	f, ok := fn.(*function)
	if !ok || f == nil {
		return &device.Error{Op: "hipModuleLaunchKernel", Arg: fmt.Sprintf("function of type %T", fn), Kind: device.ErrInvalid}
	}
	arg := fmt.Sprintf("%s grid=%v block=%v shared=%d", f.name, grid, block, sharedBytes)
	if sharedBytes < 0 || grid.X == 0 || grid.Y == 0 || grid.Z == 0 || block.X == 0 || block.Y == 0 || block.Z == 0 {
		return &device.Error{Op: "hipModuleLaunchKernel", Arg: arg, Kind: device.ErrInvalid}
	}
	if _, err := device.CheckArgs("hipModuleLaunchKernel "+f.name, args); err != nil {
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
	return s.do("hipModuleLaunchKernel", func() error {
		f.mod.d.mu.Lock()
		dead := f.mod.unloaded
		f.mod.d.mu.Unlock()
		if dead {
			return &device.Error{Op: "hipModuleLaunchKernel", Arg: arg + ": module unloaded", Kind: device.ErrClosed}
		}
		return check("hipModuleLaunchKernel", lib.hipModuleLaunchKernel(f.h, grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z,
			uint32(sharedBytes), s.h, &params[0], nil), arg)
	})
}

func (s *stream) Record(e device.Event) error {
	ev, ok := e.(*event)
	if !ok || ev == nil {
		return &device.Error{Op: "hipEventRecord", Arg: fmt.Sprintf("event of type %T", e), Kind: device.ErrInvalid}
	}
	return s.do("hipEventRecord", func() error {
		if err := ev.alive("hipEventRecord"); err != nil {
			return err
		}
		return check("hipEventRecord", lib.hipEventRecord(ev.h, s.h), "")
	})
}

func (s *stream) Wait(e device.Event) error {
	ev, ok := e.(*event)
	if !ok || ev == nil {
		return &device.Error{Op: "hipStreamWaitEvent", Arg: fmt.Sprintf("event of type %T", e), Kind: device.ErrInvalid}
	}
	return s.do("hipStreamWaitEvent", func() error {
		if err := ev.alive("hipStreamWaitEvent"); err != nil {
			return err
		}
		return check("hipStreamWaitEvent", lib.hipStreamWaitEvent(s.h, ev.h, 0), "")
	})
}

func (s *stream) Synchronize() error {
	return s.do("hipStreamSynchronize", func() error { return check("hipStreamSynchronize", lib.hipStreamSynchronize(s.h), "") })
}

func (s *stream) Query() (bool, error) {
	var r Result
	err := s.do("hipStreamQuery", func() error { r = lib.hipStreamQuery(s.h); return nil })
	if err != nil {
		return false, err
	}
	if r == ErrorNotReady {
		return false, nil
	}
	return r == Success, check("hipStreamQuery", r, "")
}

// Destroy releases the stream; work already queued still completes.
func (s *stream) Destroy() error {
	return s.d.call(func() error {
		s.d.mu.Lock()
		if s.destroyed {
			s.d.mu.Unlock()
			return &device.Error{Op: "hipStreamDestroy", Arg: "stream destroyed", Kind: device.ErrClosed}
		}
		s.destroyed = true
		delete(s.d.streams, s)
		s.d.mu.Unlock()
		return check("hipStreamDestroy", lib.hipStreamDestroy(s.h), "")
	})
}

// Events.

type event struct {
	d         *hipDevice
	h         hipEvent
	destroyed bool // guarded by d.mu
}

var _ device.Event = (*event)(nil)

func (d *hipDevice) NewEvent() (device.Event, error) {
	e := &event{d: d}
	if err := d.call(func() error {
		return check("hipEventCreate", lib.hipEventCreate(&e.h), "")
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
		if err := e.alive("hipEventSynchronize"); err != nil {
			return err
		}
		return check("hipEventSynchronize", lib.hipEventSynchronize(e.h), "")
	})
}

func (e *event) Since(start device.Event) (time.Duration, error) {
	st, ok := start.(*event)
	if !ok || st == nil {
		return 0, &device.Error{Op: "hipEventElapsedTime", Arg: fmt.Sprintf("start event of type %T", start), Kind: device.ErrInvalid}
	}
	var ms float32
	err := e.d.call(func() error {
		if err := e.alive("hipEventElapsedTime"); err != nil {
			return err
		}
		if err := st.alive("hipEventElapsedTime"); err != nil {
			return err
		}
		return check("hipEventElapsedTime", lib.hipEventElapsedTime(&ms, st.h, e.h), "")
	})
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}

func (e *event) Destroy() error {
	return e.d.call(func() error {
		e.d.mu.Lock()
		if e.destroyed {
			e.d.mu.Unlock()
			return &device.Error{Op: "hipEventDestroy", Arg: "event destroyed", Kind: device.ErrClosed}
		}
		e.destroyed = true
		delete(e.d.events, e)
		e.d.mu.Unlock()
		return check("hipEventDestroy", lib.hipEventDestroy(e.h), "")
	})
}

// Modules.

type module struct {
	d        *hipDevice
	h        hipModule
	name     string // for errors: the first bytes of the image
	unloaded bool   // guarded by d.mu
}

var _ device.Module = (*module)(nil)

// LoadModule loads a code object (hsaco, or a clang offload bundle) for this device.
func (d *hipDevice) LoadModule(image []byte) (device.Module, error) {
	if len(image) == 0 {
		return nil, &device.Error{Op: "hipModuleLoadData", Arg: "empty image", Kind: device.ErrInvalid}
	}
	img := make([]byte, len(image)+1) // a NUL after the image, as for text formats
	copy(img, image)
	var pin runtime.Pinner
	pin.Pin(&img[0])
	defer pin.Unpin()
	m := &module{d: d, name: fmt.Sprintf("image of %d bytes", len(image))}
	err := d.call(func() error {
		return check("hipModuleLoadData", lib.hipModuleLoadData(&m.h, unsafe.Pointer(&img[0])), m.name)
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
	if err := m.do("hipModuleGetFunction", func() error {
		return check("hipModuleGetFunction", lib.hipModuleGetFunction(&f.h, m.h, name), fmt.Sprintf("name=%q", name))
	}); err != nil {
		return nil, err
	}
	return f, nil
}

func (m *module) Global(name string) (device.Ptr, int, error) {
	var p devptr
	var size uint64
	err := m.do("hipModuleGetGlobal", func() error {
		return check("hipModuleGetGlobal", lib.hipModuleGetGlobal(&p, &size, m.h, name), fmt.Sprintf("name=%q", name))
	})
	return device.Ptr(p), int(size), err
}

func (m *module) Unload() error {
	return m.d.call(func() error {
		m.d.mu.Lock()
		if m.unloaded {
			m.d.mu.Unlock()
			return &device.Error{Op: "hipModuleUnload", Arg: "module unloaded", Kind: device.ErrClosed}
		}
		m.unloaded = true
		delete(m.d.modules, m)
		m.d.mu.Unlock()
		return check("hipModuleUnload", lib.hipModuleUnload(m.h), m.name)
	})
}

type function struct {
	mod  *module
	h    hipFunc
	name string
}

func (f *function) Name() string { return f.name }
