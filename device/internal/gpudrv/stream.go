package gpudrv

import (
	"fmt"
	"math"
	"regexp"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/internal/dl"
)

// owned is what a stream, an event and a module share: the device that owns it and whether it
// was released (destroyed, unloaded; by its own call or by the device's Close).
type owned struct {
	d    *gpuDevice
	dead bool   // guarded by d.mu
	gone string // what errors say once dead: "stream destroyed"
}

// alive fails with ErrClosed naming op (and arg, when not empty) once the handle is released.
func (o *owned) alive(op, arg string) error {
	o.d.mu.Lock()
	defer o.d.mu.Unlock()
	if !o.dead {
		return nil
	}
	if arg != "" {
		arg += ": "
	}
	return &device.Error{Call: op, Detail: arg + o.gone, Kind: device.ErrClosed}
}

// do runs f on the device's thread-and-context, or fails when the handle was released.
func (o *owned) do(op string, f func() error) error {
	return o.d.call(func() error {
		if err := o.alive(op, ""); err != nil {
			return err
		}
		return f()
	})
}

// create makes the library's create call with the vendor's flag on the device's thread and, when
// it succeeds, adds k to the device's set of them (which Close releases).
func create[K comparable](d *gpuDevice, set map[K]bool, k K, op string, fl Flag, call func(flags uint32) status) error {
	if err := d.call(func() error { return d.check(op, call(fl.Value), "flags="+fl.Name) }); err != nil {
		return err
	}
	d.mu.Lock()
	set[k] = true
	d.mu.Unlock()
	return nil
}

// release marks the handle dead, drops k from the device's set of them and calls free, once:
// the second call fails with ErrClosed.
func release[K comparable](o *owned, set map[K]bool, k K, op, arg string, free func() status) error {
	return o.d.call(func() error {
		o.d.mu.Lock()
		if o.dead {
			o.d.mu.Unlock()
			return &device.Error{Call: op, Detail: o.gone, Kind: device.ErrClosed}
		}
		o.dead = true
		delete(set, k)
		o.d.mu.Unlock()
		return o.d.check(op, free(), arg)
	})
}

// Streams.

type stream struct {
	owned
	h       streamH
	adopted bool          // the program's stream (AdoptStream): never destroyed here
	lmu     sync.Mutex    // guards lb: launches from several goroutines take turns packing it
	lb      *launchParams // made on the first launch
}

var _ device.Stream = (*stream)(nil)

func (d *gpuDevice) NewStream() (device.Stream, error) {
	s := &stream{owned: owned{d: d, gone: "stream destroyed"}}
	err := create(d, d.streams, s, d.op.StreamCreate, d.dr.v.StreamNonBlocking,
		func(flags uint32) status { return d.lib.streamCreate(&s.h, flags) })
	if err != nil {
		return nil, err
	}
	return s, nil
}

// AdoptStream wraps the program's stream h; it is not in the device's set, so Close leaves it.
func (d *gpuDevice) AdoptStream(h uintptr) (device.Stream, error) {
	s := &stream{owned: owned{d: d, gone: "adopted stream released"}, h: streamH(h), adopted: true}
	if err := d.call(func() error { return nil }); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *stream) Handle() uintptr { return uintptr(s.h) }

func (s *stream) CopyAsync(dst, src device.Ptr, n int) error {
	return s.do(s.d.copyOp(), func() error {
		if n >= 0 && (s.d.dr.copySym != 0 || s.d.dr.copyKindSym != 0) {
			return s.copyDirect(dst, src, n)
		}
		return s.d.copyAsync(dst, src, n, s.h)
	})
}

// copyDirect makes the copy through dl.Call on the library's symbol, its arguments in the
// stream's parameter block as a launch's are: the bound func's reflection cost microseconds and
// six allocations per call, on every putmem_on_stream to a mapped peer.
func (s *stream) copyDirect(dst, src device.Ptr, n int) error {
	s.lmu.Lock() // after the device's lock, as Launch takes it
	defer s.lmu.Unlock()
	lb := s.launchBuf()
	var r status
	if sym := s.d.dr.copySym; sym != 0 {
		lb.call = [11]uintptr{uintptr(dst), uintptr(src), uintptr(n), uintptr(s.h)}
		r = status(int32(dl.Call(sym, lb.call[:4]...)))
	} else {
		lb.call = [11]uintptr{uintptr(dst), uintptr(src), uintptr(n), uintptr(s.d.dr.v.MemcpyDefault.Value), uintptr(s.h)}
		r = status(int32(dl.Call(s.d.dr.copyKindSym, lb.call[:5]...)))
	}
	return s.d.copyErr(r, dst, src, n)
}

// CopyHtoDAsync: src must stay valid and unchanged until the stream reaches the copy.
func (s *stream) CopyHtoDAsync(dst device.Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return s.do(s.d.op.MemcpyHtoDAsync, func() error { return s.d.copyHtoDAsync(dst, src, s.h) })
}

// CopyDtoHAsync: dst must stay valid and not be read until the stream reaches the copy.
func (s *stream) CopyDtoHAsync(dst []byte, src device.Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return s.do(s.d.op.MemcpyDtoHAsync, func() error { return s.d.copyDtoHAsync(dst, src, s.h) })
}

func (s *stream) MemsetAsync(dst device.Ptr, value byte, n int) error {
	return s.do(s.d.op.MemsetD8Async, func() error { return s.d.memsetAsync(dst, value, n, s.h) })
}

// PeerCopyAsync copies n bytes from src on device srcDev to dst on device dstDev (both opened in
// this process by the same driver) with the vendor's peer copy, on this stream.
func (s *stream) PeerCopyAsync(dst device.Ptr, dstDev device.Device, src device.Ptr, srcDev device.Device, n int) error {
	dd, ok1 := dstDev.(*gpuDevice)
	sd, ok2 := srcDev.(*gpuDevice)
	op := s.d.op.MemcpyPeerAsync
	arg := fmt.Sprintf("dst=%#x src=%#x n=%d", uintptr(dst), uintptr(src), n)
	if !ok1 || !ok2 || dd.dr != s.d.dr || sd.dr != s.d.dr || n < 0 {
		return &device.Error{Call: op, Detail: arg + fmt.Sprintf(" devices %T %T", dstDev, srcDev), Kind: device.ErrInvalid}
	}
	return s.do(op, func() error {
		return s.d.check(op, s.d.lib.memcpyPeerAsync(devptr(dst), dd.peer(), devptr(src), sd.peer(), uint64(n), s.h), arg)
	})
}

func (s *stream) Launch(fn device.Function, grid, block device.Dim3, sharedBytes int, args ...any) error {
	op := s.d.op.LaunchKernel
	f, ok := fn.(*function)
	if !ok || f == nil {
		return &device.Error{Call: op, Detail: fmt.Sprintf("function of type %T", fn), Kind: device.ErrInvalid}
	}
	if sharedBytes < 0 || grid.X == 0 || grid.Y == 0 || grid.Z == 0 || block.X == 0 || block.Y == 0 || block.Z == 0 {
		return &device.Error{Call: op, Detail: launchArg(f.name, grid, block, sharedBytes), Kind: device.ErrInvalid}
	}
	if len(args) > maxLaunchArgs {
		return &device.Error{Call: op + " " + f.name, Detail: fmt.Sprintf("%d arguments (at most %d)", len(args), maxLaunchArgs), Kind: device.ErrInvalid}
	}
	return s.do(op, func() error {
		if err := f.mod.alive(op, f.name); err != nil {
			return err
		}
		s.lmu.Lock() // after the device's lock, as Close and Destroy take them
		defer s.lmu.Unlock()
		lb := s.launchBuf()
		// Each argument lives in its own 8-byte slot (little endian, so a 4-byte value is at
		// the slot's start); kernelParams points at the slots. The library copies them during
		// the call, so the stream's one block serves every launch.
		for i, a := range args {
			switch v := a.(type) {
			case int32:
				lb.slots[i] = uint64(uint32(v))
			case uint32:
				lb.slots[i] = uint64(v)
			case int64:
				lb.slots[i] = uint64(v)
			case uint64:
				lb.slots[i] = v
			case float32:
				lb.slots[i] = uint64(math.Float32bits(v))
			case float64:
				lb.slots[i] = math.Float64bits(v)
			case device.Ptr:
				lb.slots[i] = uint64(v)
			case uintptr:
				lb.slots[i] = uint64(v)
			default: // device.CheckArgs' refusal, without its allocations on the launch path
				return &device.Error{Call: op + " " + f.name, Detail: fmt.Sprintf("args[%d] of type %T", i, a), Kind: device.ErrInvalid}
			}
		}
		var r status
		if sym := s.d.dr.launchSym; sym != 0 {
			lb.call = [11]uintptr{uintptr(f.h), uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z), uintptr(block.X), uintptr(block.Y),
				uintptr(block.Z), uintptr(sharedBytes), uintptr(s.h), uintptr(unsafe.Pointer(&lb.params[0])), 0}
			r = status(int32(dl.Call(sym, lb.call[:]...)))
		} else {
			r = s.d.lib.launchKernel(f.h, grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, uint32(sharedBytes), s.h, &lb.params[0], nil)
		}
		if r != 0 {
			return s.d.check(op, r, launchArg(f.name, grid, block, sharedBytes))
		}
		return nil
	})
}

// launchArg describes a launch for an error. Formatted only then, from copies: a launch is on the
// hot path of every stream-ordered call (a closure over grid and block would move them to the
// heap on every call).
func launchArg(name string, grid, block device.Dim3, shared int) string {
	return fmt.Sprintf("%s grid=%v block=%v shared=%d", name, grid, block, shared)
}

// maxLaunchArgs: the kernel arguments one launch takes (the runtime's kernels take at most 8).
const maxLaunchArgs = 32

// launchParams is a stream's kernel-parameter block: slots and the pointers at them, made and
// pinned on the stream's first launch and reused by every launch after (under stream.lmu), so
// that a launch, the hot path of every stream-ordered call, allocates nothing.
type launchParams struct {
	slots  [maxLaunchArgs]uint64
	params [maxLaunchArgs]unsafe.Pointer
	call   [11]uintptr // cuLaunchKernel's arguments (Driver.launchSym)
	pin    runtime.Pinner
}

// launchBuf returns the stream's parameter block, made on first use (s.lmu held).
func (s *stream) launchBuf() *launchParams {
	if s.lb == nil {
		lb := &launchParams{}
		for i := range lb.params {
			lb.params[i] = unsafe.Pointer(&lb.slots[i])
		}
		lb.pin.Pin(&lb.slots[0]) // the whole block: the library reads it during the call
		s.lb = lb
	}
	return s.lb
}

// dropLaunchBuf unpins the parameter block of a released stream (on the device's thread).
func (s *stream) dropLaunchBuf() {
	s.lmu.Lock()
	if s.lb != nil {
		s.lb.pin.Unpin()
		s.lb = nil
	}
	s.lmu.Unlock()
}

func (s *stream) Record(e device.Event) error {
	op := s.d.op.EventRecord
	ev, ok := e.(*event)
	if !ok || ev == nil {
		return &device.Error{Call: op, Detail: fmt.Sprintf("event of type %T", e), Kind: device.ErrInvalid}
	}
	return s.do(op, func() error {
		if err := ev.alive(op, ""); err != nil {
			return err
		}
		return s.d.check(op, s.d.lib.eventRecord(ev.h, s.h), "")
	})
}

func (s *stream) Wait(e device.Event) error {
	op := s.d.op.StreamWaitEvent
	ev, ok := e.(*event)
	if !ok || ev == nil {
		return &device.Error{Call: op, Detail: fmt.Sprintf("event of type %T", e), Kind: device.ErrInvalid}
	}
	return s.do(op, func() error {
		if err := ev.alive(op, ""); err != nil {
			return err
		}
		return s.d.check(op, s.d.lib.streamWaitEvent(s.h, ev.h, 0), "")
	})
}

func (s *stream) Synchronize() error {
	op := s.d.op.StreamSynchronize
	return s.do(op, func() error { return s.d.check(op, s.d.lib.streamSynchronize(s.h), "") })
}

func (s *stream) Query() (bool, error) {
	op := s.d.op.StreamQuery
	var r status
	err := s.do(op, func() error { r = s.d.lib.streamQuery(s.h); return nil })
	if err != nil {
		return false, err
	}
	if int32(r) == s.d.dr.v.NotReady {
		return false, nil
	}
	return r == 0, s.d.check(op, r, "")
}

// Destroy releases the stream; work already queued still completes. An adopted stream's
// wrapper is released, the stream stays the program's.
func (s *stream) Destroy() error {
	if s.adopted {
		return release(&s.owned, map[*stream]bool{}, s, s.d.op.StreamDestroy, "adopted", func() status {
			s.dropLaunchBuf()
			return 0
		})
	}
	return release(&s.owned, s.d.streams, s, s.d.op.StreamDestroy, "", func() status {
		s.dropLaunchBuf()
		return s.d.lib.streamDestroy(s.h)
	})
}

// Events.

type event struct {
	owned
	h eventH
}

var _ device.Event = (*event)(nil)

func (d *gpuDevice) NewEvent() (device.Event, error) {
	e := &event{owned: owned{d: d, gone: "event destroyed"}}
	err := create(d, d.events, e, d.op.EventCreate, d.dr.v.EventDefault,
		func(flags uint32) status { return d.lib.eventCreate(&e.h, flags) })
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (e *event) Synchronize() error {
	op := e.d.op.EventSynchronize
	return e.do(op, func() error { return e.d.check(op, e.d.lib.eventSynchronize(e.h), "") })
}

func (e *event) Since(start device.Event) (time.Duration, error) {
	op := e.d.op.EventElapsedTime
	st, ok := start.(*event)
	if !ok || st == nil {
		return 0, &device.Error{Call: op, Detail: fmt.Sprintf("start event of type %T", start), Kind: device.ErrInvalid}
	}
	var ms float32
	err := e.do(op, func() error {
		if err := st.alive(op, "start event"); err != nil {
			return err
		}
		return e.d.check(op, e.d.lib.eventElapsedTime(&ms, st.h, e.h), "")
	})
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}

func (e *event) Destroy() error {
	return release(&e.owned, e.d.events, e, e.d.op.EventDestroy, "", func() status { return e.d.lib.eventDestroy(e.h) })
}

// Modules.

type module struct {
	owned
	h    moduleH
	name string // for errors: the image's size
}

var _ device.Module = (*module)(nil)

// LoadModule loads a code object: PTX (JIT-compiled for the device, a compile error coming back
// with the JIT's error log) or a cubin/fatbin with ModuleLoadDataEx (CUDA); an hsaco or a clang
// offload bundle with ModuleLoadData (HIP).
func (d *gpuDevice) LoadModule(image []byte) (device.Module, error) {
	op := d.op.ModuleLoadDataEx + d.op.ModuleLoadData // the one named
	if len(image) == 0 {
		return nil, &device.Error{Call: op, Detail: "empty image", Kind: device.ErrInvalid}
	}
	img := make([]byte, len(image)+1) // text formats (PTX) must be NUL-terminated
	copy(img, image)
	var pin runtime.Pinner
	pin.Pin(&img[0])
	defer pin.Unpin()
	m := &module{owned: owned{d: d, gone: "module unloaded"}, name: fmt.Sprintf("image of %d bytes", len(image))}
	var err error
	if d.lib.moduleLoadDataEx != nil {
		logBuf := make([]byte, 16<<10)
		opts := []int32{d.dr.v.JITErrorLog, d.dr.v.JITErrorLogSize}
		vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
		pin.Pin(&logBuf[0])
		pin.Pin(&opts[0])
		pin.Pin(&vals[0])
		err = d.call(func() error {
			r := d.lib.moduleLoadDataEx(&m.h, unsafe.Pointer(&img[0]), uint32(len(opts)), &opts[0], &vals[0])
			arg := m.name
			if log := dl.FixedString(logBuf); log != "" {
				arg += ": " + log
			}
			return d.check(op, r, arg)
		})
	} else {
		err = d.call(func() error { return d.check(op, d.lib.moduleLoadData(&m.h, unsafe.Pointer(&img[0])), m.name) })
	}
	if err != nil {
		return nil, err
	}
	if err := d.preload(m, image); err != nil {
		d.call(func() error { return d.check(d.op.ModuleUnload, d.lib.moduleUnload(m.h), m.name) })
		return nil, err
	}
	d.mu.Lock()
	d.modules[m] = true
	d.mu.Unlock()
	return m, nil
}

// ptxEntry finds the kernels of a PTX image.
var ptxEntry = regexp.MustCompile(`(?m)^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z_$][\w$]*)`)

// preload loads every function of m now, so that no launch has to load one while other kernels
// of the context run (see Symbols.FuncLoad).
func (d *gpuDevice) preload(m *module, image []byte) error {
	if d.lib.funcLoad != nil {
		return d.call(func() error {
			var n uint32
			if err := d.check(d.op.ModuleFunctionCount, d.lib.moduleFunctionCount(&n, m.h), m.name); err != nil || n == 0 {
				return err
			}
			fns := make([]funcH, n)
			if err := d.check(d.op.ModuleEnumerateFunctions, d.lib.moduleEnumerateFunctions(&fns[0], n, m.h), m.name); err != nil {
				return err
			}
			for _, f := range fns {
				if err := d.check(d.op.FuncLoad, d.lib.funcLoad(f), m.name); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if d.lib.moduleLoadDataEx == nil {
		return nil // HIP loads a code object's kernels at load time
	}
	for _, e := range ptxEntry.FindAllSubmatch(image, -1) {
		var f funcH
		name := string(e[1])
		if err := d.call(func() error {
			return d.check(d.op.ModuleGetFunction, d.lib.moduleGetFunction(&f, m.h, name), m.name+": "+name)
		}); err != nil {
			return err
		}
	}
	return nil
}

func (m *module) Function(name string) (device.Function, error) {
	op := m.d.op.ModuleGetFunction
	f := &function{mod: m, name: name}
	if err := m.do(op, func() error {
		return m.d.check(op, m.d.lib.moduleGetFunction(&f.h, m.h, name), fmt.Sprintf("name=%q", name))
	}); err != nil {
		return nil, err
	}
	return f, nil
}

func (m *module) Global(name string) (device.Ptr, int, error) {
	op := m.d.op.ModuleGetGlobal
	var p devptr
	var size uint64
	err := m.do(op, func() error {
		return m.d.check(op, m.d.lib.moduleGetGlobal(&p, &size, m.h, name), fmt.Sprintf("name=%q", name))
	})
	return device.Ptr(p), int(size), err
}

func (m *module) Unload() error {
	return release(&m.owned, m.d.modules, m, m.d.op.ModuleUnload, m.name, func() status { return m.d.lib.moduleUnload(m.h) })
}

type function struct {
	mod  *module
	h    funcH
	name string
}

func (f *function) Name() string { return f.name }
