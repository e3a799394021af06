package gpudrv

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/internal/dl"
)

// Count loads the library and returns the number of devices: ErrNoDriver when the library is
// missing, ErrNoDevice when it reports none.
func (dr *Driver) Count() (int, error) {
	if err := dr.load(); err != nil {
		return 0, err
	}
	var n int32
	if err := dr.check(dr.op.DeviceCount, dr.lib.deviceCount(&n), dr.library); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, &device.Error{Call: dr.op.DeviceCount, Detail: dr.library + ": 0 devices", Kind: device.ErrNoDevice}
	}
	return int(n), nil
}

// Open opens device ordinal (PrimaryContext: retains its primary context).
func (dr *Driver) Open(ordinal int) (device.Device, error) {
	n, err := dr.Count()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, &device.Error{Call: dr.v.Name + ".Open", Detail: fmt.Sprintf("ordinal=%d, have %d devices", ordinal, n), Kind: device.ErrNoDevice}
	}
	d := &gpuDevice{
		dr: dr, op: &dr.op, lib: &dr.lib,
		allocs: map[devptr]int{}, hosts: map[unsafe.Pointer]int{}, imports: map[devptr]bool{},
		streams: map[*stream]bool{}, events: map[*event]bool{}, modules: map[*module]bool{},
		peers: map[devHandle]bool{},
	}
	d.info = device.Info{Driver: dr.v.Name, Ordinal: ordinal}
	arg := fmt.Sprintf("ordinal=%d", ordinal)
	switch dr.v.Context {
	case PrimaryContext:
		if err := dr.check(d.op.DeviceGet, d.lib.deviceGet(&d.dev, int32(ordinal)), arg); err != nil {
			return nil, err
		}
		if err := dr.check(d.op.PrimaryCtxRetain, d.lib.primaryCtxRetain(&d.ctx, d.dev), arg); err != nil {
			return nil, err
		}
		d.ctxArgs[0] = uintptr(d.ctx)
	case CurrentDevice:
		d.dev = devHandle(ordinal)
		d.ctxArgs[0] = uintptr(ordinal)
	}
	err = d.query()
	if err == nil {
		err = d.call(func() error {
			return dr.check(d.op.StreamCreate, d.lib.streamCreate(&d.sync, dr.v.StreamNonBlocking.Value), "flags="+dr.v.StreamNonBlocking.Name)
		})
	}
	if err != nil {
		d.releaseContexts()
		return nil, err
	}
	return d, nil
}

type gpuDevice struct {
	dr   *Driver
	op   *Symbols // the names errors give the calls
	lib  *bindings
	info device.Info
	dev  devHandle // CUdevice; the HIP device ordinal
	ctx  ctxH      // PrimaryContext: the retained primary context
	// ctx (PrimaryContext) or the ordinal (CurrentDevice) as the argument block of the call that
	// makes it current (read only: every call shares it)
	ctxArgs [1]uintptr
	sync    streamH // private stream for the synchronous calls

	life   sync.RWMutex // calls hold it shared; Close holds it exclusively
	closed bool

	mu      sync.Mutex // guards the maps below
	allocs  map[devptr]int
	hosts   map[unsafe.Pointer]int
	imports map[devptr]bool
	streams map[*stream]bool
	events  map[*event]bool
	modules map[*module]bool
	graphs  map[*graph]bool    // made on the first capture (graph.go)
	peers   map[devHandle]bool // peers this device enabled access to (PrimaryContext: and retained)
}

var _ device.Device = (*gpuDevice)(nil)

func (d *gpuDevice) check(op string, r status, arg string) error { return d.dr.check(op, r, arg) }

// Attribute implements Query.
func (d *gpuDevice) Attribute(a Attr) (int32, error) {
	var v int32
	err := d.check(d.op.DeviceAttribute, d.lib.deviceAttribute(&v, a.Value, d.dev), fmt.Sprintf("device %d attr=%s", d.info.Ordinal, a.Name))
	return v, err
}

// Properties implements Query.
func (d *gpuDevice) Properties(size int) ([]byte, error) {
	if d.lib.deviceProperties == nil {
		return nil, &device.Error{Call: d.dr.v.Name + ".Properties", Detail: "the vendor table names no DeviceProperties", Kind: device.ErrNotSupported}
	}
	buf := make([]byte, size)
	return buf, d.check(d.op.DeviceProperties, d.lib.deviceProperties(unsafe.Pointer(&buf[0]), d.dev), fmt.Sprintf("device %d", d.info.Ordinal))
}

// query fills d.info; the device's context need not be current (the device is named).
func (d *gpuDevice) query() error {
	info := &d.info
	arg := fmt.Sprintf("device %d", info.Ordinal)
	var name [256]byte
	if err := d.check(d.op.DeviceName, d.lib.deviceName(&name[0], int32(len(name)), d.dev), arg); err != nil {
		return err
	}
	info.Name = dl.FixedString(name[:])
	mps, err := d.Attribute(d.dr.v.MultiprocessorCount)
	if err != nil {
		return err
	}
	info.Multiprocessors = int(mps)
	if a := d.dr.v.HostNativeAtomics; a.Name != "" {
		// A driver that does not know the attribute leaves the safe answer (false).
		v, err := d.Attribute(a)
		info.HostNativeAtomics = err == nil && v != 0
	}
	if info.Arch, err = d.dr.v.Arch(d); err != nil {
		return err
	}
	if err := d.check(d.op.DeviceTotalMem, d.lib.deviceTotalMem(&info.MemoryBytes, d.dev), arg); err != nil {
		return err
	}
	var uuid [16]byte
	if err := d.check(d.op.DeviceUUID, d.lib.deviceUUID(&uuid, d.dev), arg); err != nil {
		return err
	}
	info.UUID = uuidString(uuid)
	var bus [64]byte
	if err := d.check(d.op.DevicePCIBusID, d.lib.devicePCIBusID(&bus[0], int32(len(bus)), d.dev), arg); err != nil {
		return err
	}
	info.PCIBusID = dl.FixedString(bus[:])
	return nil
}

func (d *gpuDevice) Info() device.Info { return d.info }

// call runs f with the device current on a locked OS thread (see the package doc), or fails
// with ErrClosed once the device is closed.
func (d *gpuDevice) call(f func() error) error {
	d.life.RLock()
	defer d.life.RUnlock()
	if d.closed {
		return &device.Error{Call: d.dr.v.Name + " device", Detail: fmt.Sprintf("ordinal=%d", d.info.Ordinal), Kind: device.ErrClosed}
	}
	return d.callLocked(f)
}

func (d *gpuDevice) callLocked(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var r status
	op := d.op.CtxSetCurrent
	switch d.dr.v.Context {
	case PrimaryContext:
		if d.dr.ctxSym != 0 {
			r = status(int32(dl.Call(d.dr.ctxSym, d.ctxArgs[:]...)))
		} else {
			r = d.lib.ctxSetCurrent(d.ctx)
		}
	case CurrentDevice:
		op = d.op.SetDevice
		if d.dr.ctxSym != 0 {
			r = status(int32(dl.Call(d.dr.ctxSym, d.ctxArgs[:]...)))
		} else {
			r = d.lib.setDevice(d.dev)
		}
	}
	if r != 0 { // the name is formatted only for an error: every device call comes here
		return d.check(op, r, fmt.Sprintf("device %d", d.info.Ordinal))
	}
	return f()
}

// peer is what the peer-copy call names this device by: its context (CUDA), its ordinal (HIP).
func (d *gpuDevice) peer() uintptr {
	if d.dr.v.Context == PrimaryContext {
		return uintptr(d.ctx)
	}
	return uintptr(d.dev)
}

// releaseContexts releases the primary contexts Open and EnablePeerAccess retained
// (PrimaryContext; nothing under CurrentDevice).
func (d *gpuDevice) releaseContexts() error {
	if d.dr.v.Context != PrimaryContext {
		return nil
	}
	var first error
	for pd := range d.peers {
		if err := d.check(d.op.PrimaryCtxRelease, d.lib.primaryCtxRelease(pd), "peer"); err != nil && first == nil {
			first = err
		}
	}
	if err := d.check(d.op.PrimaryCtxRelease, d.lib.primaryCtxRelease(d.dev), fmt.Sprintf("ordinal=%d", d.info.Ordinal)); err != nil && first == nil {
		first = err
	}
	return first
}

// syncStream runs f on the private stream and waits for it.
func (d *gpuDevice) syncStream(f func(s streamH) error) error {
	return d.call(func() error {
		if err := f(d.sync); err != nil {
			return err
		}
		return d.check(d.op.StreamSynchronize, d.lib.streamSynchronize(d.sync), "")
	})
}

func sizeArg(op string, n int) error {
	if n <= 0 {
		return &device.Error{Call: op, Detail: fmt.Sprintf("size=%d", n), Kind: device.ErrInvalid}
	}
	return nil
}

func (d *gpuDevice) Alloc(size int) (device.Ptr, error) {
	if err := sizeArg(d.op.MemAlloc, size); err != nil {
		return 0, err
	}
	var p devptr
	err := d.call(func() error {
		return d.check(d.op.MemAlloc, d.lib.memAlloc(&p, uint64(size)), fmt.Sprintf("size=%d", size))
	})
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	d.allocs[p] = size
	d.mu.Unlock()
	return device.Ptr(p), nil
}

// take removes k from m and fails with ErrInvalid naming op when it is not there.
func take[K comparable, V any](d *gpuDevice, m map[K]V, k K, op, what string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := m[k]; !ok {
		return &device.Error{Call: op, Detail: fmt.Sprintf("%#x: not %s of this device", any(k), what), Kind: device.ErrInvalid}
	}
	delete(m, k)
	return nil
}

func (d *gpuDevice) Free(p device.Ptr) error {
	if err := take(d, d.allocs, devptr(p), d.op.MemFree, "an allocation"); err != nil {
		return err
	}
	return d.call(func() error {
		return d.check(d.op.MemFree, d.lib.memFree(devptr(p)), fmt.Sprintf("ptr=%#x", uintptr(p)))
	})
}

func (d *gpuDevice) AllocHost(size int) (device.HostBuffer, error) {
	if err := sizeArg(d.op.HostAlloc, size); err != nil {
		return device.HostBuffer{}, err
	}
	var hp unsafe.Pointer
	var dp devptr
	fl := d.dr.v.HostAllocFlags
	err := d.call(func() error {
		arg := fmt.Sprintf("size=%d flags=%s", size, fl.Name)
		if err := d.check(d.op.HostAlloc, d.lib.hostAlloc(&hp, uint64(size), fl.Value), arg); err != nil {
			return err
		}
		if err := d.check(d.op.HostDevicePointer, d.lib.hostDevicePointer(&dp, hp, 0), fmt.Sprintf("host=%p", hp)); err != nil {
			d.lib.hostFree(hp)
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

func (d *gpuDevice) FreeHost(b device.HostBuffer) error {
	if len(b.Bytes) == 0 {
		return &device.Error{Call: d.op.HostFree, Detail: "empty buffer", Kind: device.ErrInvalid}
	}
	hp := unsafe.Pointer(unsafe.SliceData(b.Bytes))
	if err := take(d, d.hosts, hp, d.op.HostFree, "a host buffer"); err != nil {
		return err
	}
	return d.call(func() error { return d.check(d.op.HostFree, d.lib.hostFree(hp), fmt.Sprintf("host=%p", hp)) })
}

func (d *gpuDevice) Memset(dst device.Ptr, value byte, n int) error {
	if n == 0 {
		return nil
	}
	return d.syncStream(func(s streamH) error { return d.memsetAsync(dst, value, n, s) })
}

func (d *gpuDevice) CopyHtoD(dst device.Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return d.syncStream(func(s streamH) error { return d.copyHtoDAsync(dst, src, s) })
}

func (d *gpuDevice) CopyDtoH(dst []byte, src device.Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.syncStream(func(s streamH) error { return d.copyDtoHAsync(dst, src, s) })
}

func (d *gpuDevice) CopyDtoD(dst, src device.Ptr, n int) error {
	if n == 0 {
		return nil
	}
	return d.syncStream(func(s streamH) error { return d.copyAsync(dst, src, n, s) })
}

func (d *gpuDevice) memsetAsync(dst device.Ptr, value byte, n int, s streamH) error {
	arg := fmt.Sprintf("dst=%#x value=%d n=%d", uintptr(dst), value, n)
	if n < 0 {
		return &device.Error{Call: d.op.MemsetD8Async, Detail: arg, Kind: device.ErrInvalid}
	}
	return d.check(d.op.MemsetD8Async, d.lib.memsetD8Async(devptr(dst), value, uint64(n), s), arg)
}

func (d *gpuDevice) copyHtoDAsync(dst device.Ptr, src []byte, s streamH) error {
	return d.check(d.op.MemcpyHtoDAsync, d.lib.memcpyHtoDAsync(devptr(dst), unsafe.Pointer(unsafe.SliceData(src)), uint64(len(src)), s),
		fmt.Sprintf("dst=%#x n=%d", uintptr(dst), len(src)))
}

func (d *gpuDevice) copyDtoHAsync(dst []byte, src device.Ptr, s streamH) error {
	return d.check(d.op.MemcpyDtoHAsync, d.lib.memcpyDtoHAsync(unsafe.Pointer(unsafe.SliceData(dst)), devptr(src), uint64(len(dst)), s),
		fmt.Sprintf("src=%#x n=%d", uintptr(src), len(dst)))
}

// copyOp is the bound device-to-device copy: MemcpyAsync or MemcpyAsyncKind (one is empty).
func (d *gpuDevice) copyOp() string { return d.op.MemcpyAsync + d.op.MemcpyAsyncKind }

// copyAsync is the device-to-device (and peer-to-peer) copy.
func (d *gpuDevice) copyAsync(dst, src device.Ptr, n int, s streamH) error {
	if n < 0 {
		return &device.Error{Call: d.copyOp(), Detail: copyArg(dst, src, n), Kind: device.ErrInvalid}
	}
	var r status
	if d.lib.memcpyAsync != nil {
		r = d.lib.memcpyAsync(devptr(dst), devptr(src), uint64(n), s)
	} else {
		r = d.lib.memcpyAsyncKind(devptr(dst), devptr(src), uint64(n), d.dr.v.MemcpyDefault.Value, s)
	}
	return d.copyErr(r, dst, src, n)
}

// copyErr is a copy's result as an error, its description formatted only then: a copy is on the
// hot path of every stream-ordered put to a mapped peer (putmem_on_stream).
func (d *gpuDevice) copyErr(r status, dst, src device.Ptr, n int) error {
	if r == 0 {
		return nil
	}
	arg := copyArg(dst, src, n)
	if d.lib.memcpyAsync == nil {
		arg += " kind=" + d.dr.v.MemcpyDefault.Name
	}
	return d.check(d.copyOp(), r, arg)
}

func copyArg(dst, src device.Ptr, n int) string {
	return fmt.Sprintf("dst=%#x src=%#x n=%d", uintptr(dst), uintptr(src), n)
}

func (d *gpuDevice) Synchronize() error {
	return d.call(func() error {
		return d.check(d.op.Synchronize, d.lib.synchronize(), fmt.Sprintf("device %d", d.info.Ordinal))
	})
}

// Handle layout: the vendor's 8-byte magic, the IPC memory handle, the allocation size (little
// endian).
const (
	handleSize   = 8 + ipcHandleSize + 8
	handleSizeAt = 8 + ipcHandleSize
)

func (d *gpuDevice) Export(p device.Ptr) ([]byte, error) {
	d.mu.Lock()
	size, ok := d.allocs[devptr(p)]
	d.mu.Unlock()
	if !ok {
		return nil, &device.Error{Call: d.op.IpcGetMemHandle, Detail: fmt.Sprintf("ptr=%#x: not the start of an allocation of this device", uintptr(p)), Kind: device.ErrInvalid}
	}
	var h ipcHandle
	if err := d.call(func() error {
		return d.check(d.op.IpcGetMemHandle, d.lib.ipcGetMemHandle(&h, devptr(p)), fmt.Sprintf("ptr=%#x", uintptr(p)))
	}); err != nil {
		return nil, err
	}
	out := make([]byte, handleSize)
	copy(out, d.dr.v.HandleMagic[:])
	copy(out[8:], h.Reserved[:])
	binary.LittleEndian.PutUint64(out[handleSizeAt:], uint64(size))
	return out, nil
}

func (d *gpuDevice) Import(handle []byte) (device.Ptr, error) {
	if len(handle) != handleSize || [8]byte(handle[:8]) != d.dr.v.HandleMagic {
		return 0, &device.Error{Call: d.op.IpcOpenMemHandle, Detail: fmt.Sprintf("handle of %d bytes %.8q: not a %s export handle", len(handle), handle, d.dr.v.Name), Kind: device.ErrInvalid}
	}
	var h ipcHandle
	copy(h.Reserved[:], handle[8:handleSizeAt])
	size := binary.LittleEndian.Uint64(handle[handleSizeAt:])
	var p devptr
	if err := d.call(func() error {
		var r status
		var fl Flag
		for _, fl = range d.dr.v.IPCOpenFlags {
			if r = d.lib.ipcOpenMemHandle(&p, h, fl.Value); int32(r) != d.dr.v.InvalidValue {
				break
			}
		}
		return d.check(d.op.IpcOpenMemHandle, r, fmt.Sprintf("size=%d flags=%s", size, fl.Name))
	}); err != nil {
		return 0, err
	}
	d.mu.Lock()
	d.imports[p] = true
	d.mu.Unlock()
	return device.Ptr(p), nil
}

func (d *gpuDevice) CloseImport(p device.Ptr) error {
	if err := take(d, d.imports, devptr(p), d.op.IpcCloseMemHandle, "an import"); err != nil {
		return err
	}
	return d.call(func() error {
		return d.check(d.op.IpcCloseMemHandle, d.lib.ipcCloseMemHandle(devptr(p)), fmt.Sprintf("ptr=%#x", uintptr(p)))
	})
}

// EnablePeerAccess maps the peer device's memory into this device (both in this process);
// memory imported from another process is mapped by Import itself.
func (d *gpuDevice) EnablePeerAccess(peer device.Info) error {
	v := d.dr.v
	if peer.Driver != v.Name || peer.PCIBusID == "" {
		return &device.Error{Call: v.Name + ".EnablePeerAccess", Detail: fmt.Sprintf("peer %s device %q", peer.Driver, peer.PCIBusID), Kind: device.ErrNotSupported}
	}
	return d.call(func() error {
		var pd devHandle
		if err := d.check(d.op.DeviceByPCIBusID, d.lib.deviceByPCIBusID(&pd, peer.PCIBusID), peer.PCIBusID); err != nil {
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
		if err := d.check(d.op.DeviceCanAccessPeer, d.lib.deviceCanAccessPeer(&can, d.dev, pd), arg); err != nil {
			return err
		}
		if can == 0 {
			return &device.Error{Call: d.op.DeviceCanAccessPeer, Detail: arg + ": no", Kind: device.ErrNotSupported}
		}
		switch v.Context {
		case PrimaryContext:
			var pctx ctxH
			if err := d.check(d.op.PrimaryCtxRetain, d.lib.primaryCtxRetain(&pctx, pd), peer.PCIBusID); err != nil {
				return err
			}
			if r := d.lib.ctxEnablePeerAccess(pctx, 0); r != 0 && int32(r) != v.PeerAccessAlreadyEnabled {
				d.lib.primaryCtxRelease(pd)
				return d.check(d.op.CtxEnablePeerAccess, r, arg)
			}
		case CurrentDevice:
			if r := d.lib.deviceEnablePeerAccess(pd, 0); r != 0 && int32(r) != v.PeerAccessAlreadyEnabled {
				return d.check(d.op.DeviceEnablePeerAccess, r, arg)
			}
		}
		d.peers[pd] = true
		return nil
	})
}

// Close waits for the device's work, releases everything it still owns and the contexts it
// retained.
func (d *gpuDevice) Close() error {
	d.life.Lock()
	defer d.life.Unlock()
	if d.closed {
		return &device.Error{Call: d.dr.v.Name + ".Close", Detail: fmt.Sprintf("ordinal=%d", d.info.Ordinal), Kind: device.ErrClosed}
	}
	d.closed = true
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	l, op := d.lib, d.op
	d.callLocked(func() error {
		keep(d.check(op.Synchronize, l.synchronize(), ""))
		for s := range d.streams {
			s.dead = true
			s.dropLaunchBuf()
			keep(d.check(op.StreamDestroy, l.streamDestroy(s.h), ""))
		}
		for e := range d.events {
			e.dead = true
			keep(d.check(op.EventDestroy, l.eventDestroy(e.h), ""))
		}
		d.closeGraphs(keep)
		for m := range d.modules {
			m.dead = true
			keep(d.check(op.ModuleUnload, l.moduleUnload(m.h), m.name))
		}
		for p := range d.imports {
			keep(d.check(op.IpcCloseMemHandle, l.ipcCloseMemHandle(p), fmt.Sprintf("ptr=%#x", uintptr(p))))
		}
		for p := range d.allocs {
			keep(d.check(op.MemFree, l.memFree(p), fmt.Sprintf("ptr=%#x", uintptr(p))))
		}
		for p := range d.hosts {
			keep(d.check(op.HostFree, l.hostFree(p), fmt.Sprintf("host=%p", p)))
		}
		keep(d.check(op.StreamDestroy, l.streamDestroy(d.sync), "private stream"))
		return nil
	})
	keep(d.releaseContexts())
	return first
}
