package host

import (
	"fmt"
	"sort"
	"sync"

	"github.com/roxamen/roxamen/device"
)

// Kernel is a host "kernel": it is called once per block of the grid and plays all of that
// block's threads itself (l.Block tells how many). The blocks of one launch run concurrently,
// each on its own goroutine, so a block may wait for another as on a GPU whose grid fits. args
// are the values given to Launch, unchanged. A panic fails the launch: the stream reports it.
type Kernel func(l Launch, args []any)

// Launch describes the block a Kernel call runs.
type Launch struct {
	Grid, Block device.Dim3
	BlockIdx    device.Dim3 // this block's index in Grid
	Shared      []byte      // this block's dynamic shared memory (sharedBytes long, zeroed)
	mod         *module
}

// Threads returns the number of threads in a block.
func (l Launch) Threads() int { return int(l.Block.X) * int(l.Block.Y) * int(l.Block.Z) }

// Global returns the address of the launching module's global symbol name, as the kernel's own
// code would see it. It panics (failing the launch) when the module has no such global.
func (l Launch) Global(name string) device.Ptr {
	g, ok := l.mod.globals[name]
	if !ok {
		panic(fmt.Errorf("host kernel: module %q has no global %q", l.mod.name, name))
	}
	return g.ptr
}

type registered struct {
	kernels map[string]Kernel
	globals map[string]int
}

var modules struct {
	sync.Mutex
	m map[string]registered
}

// Register makes a host module available to LoadModule([]byte(module)): kernels by name, and
// globals by name and size in bytes (each loaded copy of the module gets its own zeroed globals,
// 16-byte aligned). It panics on a duplicate module name, an empty name, a nil kernel or a global
// size not above zero: these are programming errors, as with flag or http registrations.
func Register(module string, kernels map[string]Kernel, globals map[string]int) {
	if module == "" {
		panic("host.Register: empty module name")
	}
	r := registered{kernels: map[string]Kernel{}, globals: map[string]int{}}
	for n, k := range kernels {
		if k == nil {
			panic(fmt.Sprintf("host.Register(%q): kernel %q is nil", module, n))
		}
		r.kernels[n] = k
	}
	for n, size := range globals {
		if size <= 0 {
			panic(fmt.Sprintf("host.Register(%q): global %q has size %d", module, n, size))
		}
		r.globals[n] = size
	}
	modules.Lock()
	defer modules.Unlock()
	if modules.m == nil {
		modules.m = map[string]registered{}
	}
	if _, dup := modules.m[module]; dup {
		panic(fmt.Sprintf("host.Register: module %q registered twice", module))
	}
	modules.m[module] = r
}

type global struct {
	ptr  device.Ptr
	size int
}

type module struct {
	dev      *hostDevice
	name     string
	kernels  map[string]Kernel
	globals  map[string]global
	mem      *mapping // the globals; nil when there are none
	mu       sync.Mutex
	unloaded bool
}

var _ device.Module = (*module)(nil)

func (d *hostDevice) LoadModule(image []byte) (device.Module, error) {
	const op = "host.LoadModule"
	if err := d.live(op); err != nil {
		return nil, err
	}
	name := string(image)
	modules.Lock()
	r, ok := modules.m[name]
	modules.Unlock()
	if !ok {
		if len(name) > 64 {
			name = name[:64] + "..."
		}
		return nil, &device.Error{Call: op, Detail: fmt.Sprintf("module %q: not registered with host.Register", name), Kind: device.ErrInvalid}
	}
	m := &module{dev: d, name: name, kernels: r.kernels, globals: map[string]global{}}
	names := make([]string, 0, len(r.globals))
	total := 0
	for n, size := range r.globals {
		names = append(names, n)
		total += (size + 15) &^ 15
	}
	sort.Strings(names)
	if total > 0 {
		mem, err := anon(op, total)
		if err != nil {
			return nil, err
		}
		m.mem = &mapping{base: addr(mem), mem: mem, fd: -1, kind: kindGlobal, dev: d}
		off := 0
		for _, n := range names {
			size := r.globals[n]
			m.globals[n] = global{ptr: m.mem.base.Add(off), size: size}
			off += (size + 15) &^ 15
		}
		if err := d.track(op, m.mem); err != nil {
			release(m.mem)
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, d.errClosed(op)
	}
	d.modules[m] = true
	return m, nil
}

func (m *module) live(op string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unloaded {
		return &device.Error{Call: op, Detail: "module " + m.name, Kind: device.ErrClosed}
	}
	return nil
}

func (m *module) Function(name string) (device.Function, error) {
	const op = "host.Module.Function"
	if err := m.live(op); err != nil {
		return nil, err
	}
	k, ok := m.kernels[name]
	if !ok {
		return nil, &device.Error{Call: op, Detail: fmt.Sprintf("module %q has no kernel %q", m.name, name), Kind: device.ErrInvalid}
	}
	return &function{mod: m, name: name, k: k}, nil
}

func (m *module) Global(name string) (device.Ptr, int, error) {
	const op = "host.Module.Global"
	if err := m.live(op); err != nil {
		return 0, 0, err
	}
	g, ok := m.globals[name]
	if !ok {
		return 0, 0, &device.Error{Call: op, Detail: fmt.Sprintf("module %q has no global %q", m.name, name), Kind: device.ErrInvalid}
	}
	return g.ptr, g.size, nil
}

// release marks the module unloaded (its memory is released by the caller).
func (m *module) release() {
	m.mu.Lock()
	m.unloaded = true
	m.mu.Unlock()
}

// Unload frees the module's globals. Launches already queued must have completed.
func (m *module) Unload() error {
	const op = "host.Module.Unload"
	if err := m.live(op); err != nil {
		return err
	}
	m.release()
	m.dev.mu.Lock()
	delete(m.dev.modules, m)
	m.dev.mu.Unlock()
	if m.mem != nil {
		mm, err := m.dev.untrack(op, m.mem.base, kindGlobal)
		if err != nil {
			return err
		}
		if err := release(mm); err != nil {
			return &device.Error{Call: op, Detail: "module " + m.name, Err: err}
		}
	}
	return nil
}

type function struct {
	mod  *module
	name string
	k    Kernel
}

func (f *function) Name() string { return f.name }

// run executes every block of the grid, each on its own goroutine, and waits for all.
func (f *function) run(grid, block device.Dim3, shared int, args []any) error {
	if err := f.mod.live("host kernel " + f.name); err != nil {
		return err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for z := uint32(0); z < grid.Z; z++ {
		for y := uint32(0); y < grid.Y; y++ {
			for x := uint32(0); x < grid.X; x++ {
				l := Launch{Grid: grid, Block: block, BlockIdx: device.Dim3{X: x, Y: y, Z: z}, mod: f.mod}
				if shared > 0 {
					l.Shared = make([]byte, shared)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := safely(func() error { f.k(l, args); return nil })
					if err != nil {
						mu.Lock()
						if first == nil {
							first = &device.Error{Call: "host kernel " + f.name, Detail: fmt.Sprintf("block %v", l.BlockIdx), Err: err}
						}
						mu.Unlock()
					}
				}()
			}
		}
	}
	wg.Wait()
	return first
}
