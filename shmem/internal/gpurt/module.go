package gpurt

import (
	"sync"
	"sync/atomic"

	"github.com/roxamen/roxamen/device"
)

// Module is a code object loaded for the user and linked to this PE (its roxshmem_state filled),
// with the stream its kernels run on. The runtime keeps every live one, so that Release unloads
// them before the device goes.
type Module struct {
	Mod    device.Module
	Stream device.Stream
	dead   atomic.Bool

	mu  sync.Mutex
	fns map[string]device.Function
}

// LoadModule loads image, links it to this PE and gives it a stream. stage says which step failed:
// "load", "link" or "stream".
func (rt *Runtime) LoadModule(image []byte) (m *Module, stage string, err error) {
	mod, err := rt.dev.LoadModule(image)
	if err != nil {
		return nil, "load", err
	}
	if err := rt.FillState(mod); err != nil {
		_ = mod.Unload()
		return nil, "link", err
	}
	st, err := rt.dev.NewStream()
	if err != nil {
		_ = mod.Unload()
		return nil, "stream", err
	}
	m = &Module{Mod: mod, Stream: st, fns: map[string]device.Function{}}
	rt.modMu.Lock()
	rt.modules[m] = true
	rt.modMu.Unlock()
	return m, "", nil
}

// Dead reports whether the module was unloaded (by Unload, or the runtime's Release).
func (m *Module) Dead() bool { return m.dead.Load() }

// Function returns kernel name of the module.
func (m *Module) Function(name string) (device.Function, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.fns[name]; ok {
		return f, nil
	}
	f, err := m.Mod.Function(name)
	if err != nil {
		return nil, err
	}
	m.fns[name] = f
	return f, nil
}

// Unload waits for the module's kernels and releases it.
func (rt *Runtime) Unload(m *Module) error {
	rt.modMu.Lock()
	delete(rt.modules, m)
	rt.modMu.Unlock()
	m.dead.Store(true)
	err := m.Stream.Synchronize()
	_ = m.Stream.Destroy()
	if e := m.Mod.Unload(); err == nil {
		err = e
	}
	return err
}
