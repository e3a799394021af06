package host

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/roxamen/roxamen/device"
)

// An op is one queued piece of stream work. Markers (event records) run even after the stream
// has failed, so that nothing waiting on them hangs.
type op struct {
	run    func() error
	marker bool
}

type stream struct {
	dev       *hostDevice
	id        uintptr // Handle: the device's number for it
	mu        sync.Mutex
	cond      sync.Cond
	queue     []op
	enq, done uint64
	err       error // sticky: the first failure; later work is skipped and every call reports it
	destroyed bool
	exited    chan struct{}
}

var _ device.Stream = (*stream)(nil)

func (d *hostDevice) NewStream() (device.Stream, error) {
	s := &stream{dev: d, exited: make(chan struct{})}
	s.cond.L = &s.mu
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, d.errClosed("host.NewStream")
	}
	d.nextStream++
	s.id = d.nextStream
	d.streams[s] = true
	go s.loop()
	return s, nil
}

func (s *stream) loop() {
	defer close(s.exited)
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		for len(s.queue) == 0 && !s.destroyed {
			s.cond.Wait()
		}
		if len(s.queue) == 0 {
			return
		}
		o := s.queue[0]
		s.queue[0] = op{}
		s.queue = s.queue[1:]
		failed := s.err != nil
		s.mu.Unlock()
		var err error
		if !failed || o.marker {
			err = safely(o.run)
		}
		s.mu.Lock()
		if err != nil && s.err == nil {
			s.err = err
		}
		s.done++
		s.cond.Broadcast()
	}
}

// safely runs f and turns a panic (a kernel's, or Bytes on a bad address) into an error.
func safely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = &device.Error{Call: "host stream", Detail: "panic", Err: e}
			} else {
				err = &device.Error{Call: "host stream", Detail: fmt.Sprintf("panic: %v", r)}
			}
		}
	}()
	return f()
}

func (s *stream) enqueue(name string, o op) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return &device.Error{Call: name, Kind: device.ErrClosed}
	}
	if s.err != nil {
		return s.err
	}
	s.queue = append(s.queue, o)
	s.enq++
	s.cond.Broadcast()
	return nil
}

func (s *stream) CopyAsync(dst, src device.Ptr, n int) error {
	const name = "host.Stream.CopyAsync"
	// Check the ranges now, as a GPU driver checks its arguments at enqueue time.
	if _, err := slice(name, dst, n); err != nil {
		return err
	}
	if _, err := slice(name, src, n); err != nil {
		return err
	}
	return s.enqueue(name, op{run: func() error { return copyDtoD(name, dst, src, n) }})
}

// CopyHtoDAsync copies src when the stream reaches it: src must stay unchanged until then.
func (s *stream) CopyHtoDAsync(dst device.Ptr, src []byte) error {
	const name = "host.Stream.CopyHtoDAsync"
	if _, err := slice(name, dst, len(src)); err != nil {
		return err
	}
	return s.enqueue(name, op{run: func() error { return copyHtoD(name, dst, src) }})
}

// CopyDtoHAsync fills dst when the stream reaches it: dst must not be read until then.
func (s *stream) CopyDtoHAsync(dst []byte, src device.Ptr) error {
	const name = "host.Stream.CopyDtoHAsync"
	if _, err := slice(name, src, len(dst)); err != nil {
		return err
	}
	return s.enqueue(name, op{run: func() error { return copyDtoH(name, dst, src) }})
}

func (s *stream) MemsetAsync(dst device.Ptr, value byte, n int) error {
	const name = "host.Stream.MemsetAsync"
	if _, err := slice(name, dst, n); err != nil {
		return err
	}
	return s.enqueue(name, op{run: func() error { return memset(name, dst, value, n) }})
}

func (s *stream) Launch(fn device.Function, grid, block device.Dim3, sharedBytes int, args ...any) error {
	const name = "host.Stream.Launch"
	f, ok := fn.(*function)
	if !ok || f == nil {
		return &device.Error{Call: name, Detail: fmt.Sprintf("function of type %T", fn), Kind: device.ErrInvalid}
	}
	if grid.X == 0 || grid.Y == 0 || grid.Z == 0 || block.X == 0 || block.Y == 0 || block.Z == 0 || sharedBytes < 0 {
		return &device.Error{Call: name, Detail: fmt.Sprintf("%s grid=%v block=%v shared=%d", f.name, grid, block, sharedBytes), Kind: device.ErrInvalid}
	}
	if _, err := device.CheckArgs(name+" "+f.name, args); err != nil {
		return err
	}
	if err := f.mod.live(name); err != nil {
		return err
	}
	args = append([]any(nil), args...)
	return s.enqueue(name, op{run: func() error { return f.run(grid, block, sharedBytes, args) }})
}

func (s *stream) Record(e device.Event) error {
	const name = "host.Stream.Record"
	ev, ok := e.(*event)
	if !ok || ev == nil {
		return &device.Error{Call: name, Detail: fmt.Sprintf("event of type %T", e), Kind: device.ErrInvalid}
	}
	m := &marker{done: make(chan struct{})}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.destroyed {
		return &device.Error{Call: name, Kind: device.ErrClosed}
	}
	if err := s.enqueue(name, op{marker: true, run: func() error {
		m.t = time.Now()
		close(m.done)
		return nil
	}}); err != nil {
		return err
	}
	ev.cur = m
	return nil
}

// Wait makes later work on s wait for the work e marks; an event never recorded is complete.
func (s *stream) Wait(e device.Event) error {
	const name = "host.Stream.Wait"
	ev, ok := e.(*event)
	if !ok || ev == nil {
		return &device.Error{Call: name, Detail: fmt.Sprintf("event of type %T", e), Kind: device.ErrInvalid}
	}
	ev.mu.Lock()
	m, destroyed := ev.cur, ev.destroyed
	ev.mu.Unlock()
	if destroyed {
		return &device.Error{Call: name, Kind: device.ErrClosed}
	}
	if m == nil {
		return nil
	}
	return s.enqueue(name, op{run: func() error { <-m.done; return nil }})
}

func (s *stream) Synchronize() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for target := s.enq; s.done < target; {
		s.cond.Wait()
	}
	return s.err
}

func (s *stream) Query() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done == s.enq, s.err
}

// destroy lets queued work finish, then stops the goroutine.
func (s *stream) destroy() error {
	s.mu.Lock()
	if s.destroyed {
		s.mu.Unlock()
		return &device.Error{Call: "host.Stream.Destroy", Kind: device.ErrClosed}
	}
	s.destroyed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	<-s.exited
	return nil
}

func (s *stream) Destroy() error {
	if err := s.destroy(); err != nil {
		return err
	}
	s.dev.mu.Lock()
	delete(s.dev.streams, s)
	s.dev.mu.Unlock()
	return nil
}

func (s *stream) Handle() uintptr { return s.id }

// adopted is another holder's view of one of the device's streams (AdoptStream): the same queue,
// but its Destroy releases only the view.
type adopted struct {
	s    *stream
	dead atomic.Bool
}

var _ device.Stream = (*adopted)(nil)

// AdoptStream returns a view of the device's stream whose Handle is h (there are no streams of
// another API to adopt on the host backend).
func (d *hostDevice) AdoptStream(h uintptr) (device.Stream, error) {
	const name = "host.AdoptStream"
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, d.errClosed(name)
	}
	for s := range d.streams {
		if s.id == h {
			return &adopted{s: s}, nil
		}
	}
	return nil, &device.Error{Call: name, Detail: fmt.Sprintf("handle %#x is no live stream of this device", h), Kind: device.ErrInvalid}
}

func (a *adopted) live(name string) error {
	if a.dead.Load() {
		return &device.Error{Call: name, Detail: "adopted stream released", Kind: device.ErrClosed}
	}
	return nil
}

func (a *adopted) CopyAsync(dst, src device.Ptr, n int) error {
	if err := a.live("host.Stream.CopyAsync"); err != nil {
		return err
	}
	return a.s.CopyAsync(dst, src, n)
}

func (a *adopted) CopyHtoDAsync(dst device.Ptr, src []byte) error {
	if err := a.live("host.Stream.CopyHtoDAsync"); err != nil {
		return err
	}
	return a.s.CopyHtoDAsync(dst, src)
}

func (a *adopted) CopyDtoHAsync(dst []byte, src device.Ptr) error {
	if err := a.live("host.Stream.CopyDtoHAsync"); err != nil {
		return err
	}
	return a.s.CopyDtoHAsync(dst, src)
}

func (a *adopted) MemsetAsync(dst device.Ptr, value byte, n int) error {
	if err := a.live("host.Stream.MemsetAsync"); err != nil {
		return err
	}
	return a.s.MemsetAsync(dst, value, n)
}

func (a *adopted) Launch(fn device.Function, grid, block device.Dim3, sharedBytes int, args ...any) error {
	if err := a.live("host.Stream.Launch"); err != nil {
		return err
	}
	return a.s.Launch(fn, grid, block, sharedBytes, args...)
}

func (a *adopted) Record(e device.Event) error {
	if err := a.live("host.Stream.Record"); err != nil {
		return err
	}
	return a.s.Record(e)
}

func (a *adopted) Wait(e device.Event) error {
	if err := a.live("host.Stream.Wait"); err != nil {
		return err
	}
	return a.s.Wait(e)
}

func (a *adopted) Synchronize() error {
	if err := a.live("host.Stream.Synchronize"); err != nil {
		return err
	}
	return a.s.Synchronize()
}

func (a *adopted) Query() (bool, error) {
	if err := a.live("host.Stream.Query"); err != nil {
		return false, err
	}
	return a.s.Query()
}

func (a *adopted) Handle() uintptr { return a.s.id }

// Destroy releases the view; the stream stays its creator's.
func (a *adopted) Destroy() error {
	if a.dead.Swap(true) {
		return &device.Error{Call: "host.Stream.Destroy", Detail: "adopted stream released", Kind: device.ErrClosed}
	}
	return nil
}

type marker struct {
	done chan struct{}
	t    time.Time
}

type event struct {
	mu        sync.Mutex
	cur       *marker
	destroyed bool
}

var _ device.Event = (*event)(nil)

func (d *hostDevice) NewEvent() (device.Event, error) {
	if err := d.live("host.NewEvent"); err != nil {
		return nil, err
	}
	return &event{}, nil
}

func (e *event) get(name string) (*marker, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.destroyed {
		return nil, &device.Error{Call: name, Kind: device.ErrClosed}
	}
	return e.cur, nil
}

func (e *event) Synchronize() error {
	m, err := e.get("host.Event.Synchronize")
	if err != nil || m == nil {
		return err
	}
	<-m.done
	return nil
}

func (e *event) Since(start device.Event) (time.Duration, error) {
	const name = "host.Event.Since"
	st, ok := start.(*event)
	if !ok || st == nil {
		return 0, &device.Error{Call: name, Detail: fmt.Sprintf("start event of type %T", start), Kind: device.ErrInvalid}
	}
	m1, err := st.get(name)
	if err != nil {
		return 0, err
	}
	m2, err := e.get(name)
	if err != nil {
		return 0, err
	}
	if m1 == nil || m2 == nil {
		return 0, &device.Error{Call: name, Detail: "event never recorded", Kind: device.ErrNotReady}
	}
	for _, m := range []*marker{m1, m2} {
		select {
		case <-m.done:
		default:
			return 0, &device.Error{Call: name, Detail: "event not complete", Kind: device.ErrNotReady}
		}
	}
	return m2.t.Sub(m1.t), nil
}

func (e *event) Destroy() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.destroyed {
		return &device.Error{Call: "host.Event.Destroy", Kind: device.ErrClosed}
	}
	e.destroyed = true
	return nil
}
