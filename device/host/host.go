// Package host implements the device interfaces on the CPU so that everything above the device
// layer runs and is tested without a GPU.
//
//   - Device memory (Alloc) is a memfd mapped shared; another process of the same user on the same
//     machine maps it through Export/Import. A Ptr is the host virtual address; Bytes gives a
//     slice over it.
//   - AllocHost is anonymous memory; its Dev address equals its host address.
//   - Synchronous copies and memsets run at once on the calling goroutine and are not ordered
//     with streams (as with CUDA streams created non-blocking).
//   - A Stream is a goroutine that runs its queued operations in order; an Event records the
//     time the stream reached it.
//   - Code objects are Go functions registered by module name with Register; LoadModule takes
//     the module name as its image. Each launch runs every block of the grid as its own
//     goroutine, all at once, and the kernel is called once per block (see Launch).
//
// Export handle choice: the exporting process keeps the memfd open; the handle names its pid, fd
// number, size and the file's device and inode numbers. Import opens /proc/PID/fd/N (allowed for
// the same user; Yama's ptrace_scope restricts only attaching, not this) and checks that the
// inode matches, so a reused fd number is detected. As with CUDA IPC, the exporter must keep the
// allocation alive while others use it.
package host

import (
	"crypto/sha256"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/roxamen/roxamen/device"
)

// Devices is the number of host devices the driver reports. They are virtual (all share the
// CPU and its memory); there are several so that one node can run several PEs, each opening its
// own ordinal as it would on a multi-GPU node.
const Devices = 64

// Driver is the host backend.
type Driver struct{}

// New returns the host driver.
func New() device.Driver { return Driver{} }

// Name returns "host".
func (Driver) Name() string { return "host" }

// Count returns Devices.
func (Driver) Count() (int, error) { return Devices, nil }

// Open opens host device ordinal.
func (Driver) Open(ordinal int) (device.Device, error) {
	if ordinal < 0 || ordinal >= Devices {
		return nil, &device.Error{Call: "host.Open", Detail: fmt.Sprintf("ordinal=%d, have %d", ordinal, Devices), Kind: device.ErrNoDevice}
	}
	var si unix.Sysinfo_t
	var mem uint64
	if unix.Sysinfo(&si) == nil {
		mem = uint64(si.Totalram) * uint64(si.Unit)
	}
	return &hostDevice{
		info: device.Info{
			Driver:          "host",
			Ordinal:         ordinal,
			Name:            "host CPU",
			Arch:            "host",
			Multiprocessors: runtime.NumCPU(),
			MemoryBytes:     mem,
			UUID:            uuid(ordinal),
		},
		maps:    map[device.Ptr]*mapping{},
		streams: map[*stream]bool{},
		modules: map[*module]bool{},
	}, nil
}

// uuid derives a stable id from the machine id (or host name) and the ordinal.
func uuid(ordinal int) string {
	id, err := os.ReadFile("/etc/machine-id")
	if err != nil {
		h, _ := os.Hostname()
		id = []byte(h)
	}
	s := sha256.Sum256(fmt.Appendf(id, "/%d", ordinal))
	return fmt.Sprintf("HOST-%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}

type hostDevice struct {
	info    device.Info
	mu      sync.Mutex
	closed  bool
	maps    map[device.Ptr]*mapping // everything this device allocated or imported
	streams map[*stream]bool
	modules map[*module]bool
	// nextStream numbers the streams (their Handle, for AdoptStream)
	nextStream uintptr
}

var _ device.Device = (*hostDevice)(nil)

func (d *hostDevice) Info() device.Info { return d.info }

func (d *hostDevice) errClosed(op string) error {
	return &device.Error{Call: op, Detail: fmt.Sprintf("device %d", d.info.Ordinal), Kind: device.ErrClosed}
}

func (d *hostDevice) track(op string, m *mapping) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return d.errClosed(op)
	}
	d.maps[m.base] = m
	addMapping(m)
	return nil
}

// untrack removes the mapping at p of the given kind and returns it.
func (d *hostDevice) untrack(op string, p device.Ptr, k kind) (*mapping, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, d.errClosed(op)
	}
	m := d.maps[p]
	if m == nil || m.kind != k {
		what := "not allocated by this device"
		if m != nil {
			what = "is " + m.kind.String()
		}
		return nil, &device.Error{Call: op, Detail: fmt.Sprintf("ptr=%#x: %s", uintptr(p), what), Kind: device.ErrInvalid}
	}
	delete(d.maps, p)
	removeMapping(m)
	return m, nil
}

func release(m *mapping) error {
	err := unix.Munmap(m.mem)
	if m.fd >= 0 {
		if e := unix.Close(m.fd); err == nil {
			err = e
		}
	}
	return err
}

// Retire ends device memory or an import as Free and CloseImport do, except that its address
// range stays mapped, to private zero pages, until the process exits: a slice over it that a
// caller still holds (shmem's Local after Finalize) reads zeros and its stores reach nobody,
// instead of faulting. The shared memory is released; the zero pages cost nothing until touched.
func (d *hostDevice) Retire(p device.Ptr) error {
	const op = "host.Retire"
	k := kindDevice
	d.mu.Lock()
	if m := d.maps[p]; m != nil && m.kind == kindImport {
		k = kindImport
	}
	d.mu.Unlock()
	m, err := d.untrack(op, p, k)
	if err != nil {
		return err
	}
	// MAP_FIXED replaces the shared pages in one step: nothing else can be mapped there between.
	_, err = unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(m.mem)), uintptr(len(m.mem)),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED)
	if err == nil && m.fd >= 0 {
		err = unix.Close(m.fd)
	}
	if err != nil {
		return &device.Error{Call: op, Detail: fmt.Sprintf("ptr=%#x", uintptr(p)), Err: err}
	}
	return nil
}

func checkSize(op string, size int) error {
	if size <= 0 {
		return &device.Error{Call: op, Detail: fmt.Sprintf("size=%d", size), Kind: device.ErrInvalid}
	}
	return nil
}

func (d *hostDevice) Alloc(size int) (device.Ptr, error) {
	const op = "host.Alloc"
	if err := checkSize(op, size); err != nil {
		return 0, err
	}
	fd, err := unix.MemfdCreate("roxamen-device", unix.MFD_CLOEXEC)
	if err != nil {
		return 0, &device.Error{Call: op, Detail: fmt.Sprintf("size=%d: memfd_create", size), Err: err}
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return 0, &device.Error{Call: op, Detail: fmt.Sprintf("size=%d: ftruncate", size), Err: err}
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return 0, &device.Error{Call: op, Detail: fmt.Sprintf("size=%d: mmap", size), Err: err}
	}
	m := &mapping{base: addr(mem), mem: mem, fd: fd, kind: kindDevice, dev: d}
	if err := d.track(op, m); err != nil {
		release(m)
		return 0, err
	}
	return m.base, nil
}

func (d *hostDevice) Free(p device.Ptr) error {
	m, err := d.untrack("host.Free", p, kindDevice)
	if err != nil {
		return err
	}
	if err := release(m); err != nil {
		return &device.Error{Call: "host.Free", Detail: fmt.Sprintf("ptr=%#x", uintptr(p)), Err: err}
	}
	return nil
}

func anon(op string, size int) ([]byte, error) {
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, &device.Error{Call: op, Detail: fmt.Sprintf("size=%d: mmap", size), Err: err}
	}
	return mem, nil
}

func (d *hostDevice) AllocHost(size int) (device.HostBuffer, error) {
	const op = "host.AllocHost"
	if err := checkSize(op, size); err != nil {
		return device.HostBuffer{}, err
	}
	mem, err := anon(op, size)
	if err != nil {
		return device.HostBuffer{}, err
	}
	m := &mapping{base: addr(mem), mem: mem, fd: -1, kind: kindHost, dev: d}
	if err := d.track(op, m); err != nil {
		release(m)
		return device.HostBuffer{}, err
	}
	return device.HostBuffer{Bytes: mem, Dev: m.base}, nil
}

func (d *hostDevice) FreeHost(b device.HostBuffer) error {
	m, err := d.untrack("host.FreeHost", b.Dev, kindHost)
	if err != nil {
		return err
	}
	if err := release(m); err != nil {
		return &device.Error{Call: "host.FreeHost", Detail: fmt.Sprintf("ptr=%#x", uintptr(b.Dev)), Err: err}
	}
	return nil
}

func (d *hostDevice) live(op string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return d.errClosed(op)
	}
	return nil
}

func memset(op string, dst device.Ptr, value byte, n int) error {
	b, err := slice(op, dst, n)
	if err != nil {
		return err
	}
	for i := range b {
		b[i] = value
	}
	return nil
}

func copyHtoD(op string, dst device.Ptr, src []byte) error {
	b, err := slice(op, dst, len(src))
	if err != nil {
		return err
	}
	copy(b, src)
	return nil
}

func copyDtoH(op string, dst []byte, src device.Ptr) error {
	b, err := slice(op, src, len(dst))
	if err != nil {
		return err
	}
	copy(dst, b)
	return nil
}

func copyDtoD(op string, dst, src device.Ptr, n int) error {
	d, err := slice(op, dst, n)
	if err != nil {
		return err
	}
	s, err := slice(op, src, n)
	if err != nil {
		return err
	}
	copy(d, s)
	return nil
}

func (d *hostDevice) Memset(dst device.Ptr, value byte, n int) error {
	if err := d.live("host.Memset"); err != nil {
		return err
	}
	return memset("host.Memset", dst, value, n)
}

func (d *hostDevice) CopyHtoD(dst device.Ptr, src []byte) error {
	if err := d.live("host.CopyHtoD"); err != nil {
		return err
	}
	return copyHtoD("host.CopyHtoD", dst, src)
}

func (d *hostDevice) CopyDtoH(dst []byte, src device.Ptr) error {
	if err := d.live("host.CopyDtoH"); err != nil {
		return err
	}
	return copyDtoH("host.CopyDtoH", dst, src)
}

func (d *hostDevice) CopyDtoD(dst, src device.Ptr, n int) error {
	if err := d.live("host.CopyDtoD"); err != nil {
		return err
	}
	return copyDtoD("host.CopyDtoD", dst, src, n)
}

// Synchronize waits for every stream of the device and returns the first stream error.
func (d *hostDevice) Synchronize() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return d.errClosed("host.Synchronize")
	}
	ss := make([]*stream, 0, len(d.streams))
	for s := range d.streams {
		ss = append(ss, s)
	}
	d.mu.Unlock()
	var first error
	for _, s := range ss {
		if err := s.Synchronize(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (d *hostDevice) EnablePeerAccess(peer device.Info) error {
	if err := d.live("host.EnablePeerAccess"); err != nil {
		return err
	}
	if peer.Driver != "host" {
		return &device.Error{Call: "host.EnablePeerAccess", Detail: fmt.Sprintf("peer driver %q", peer.Driver), Kind: device.ErrNotSupported}
	}
	return nil
}

// Close destroys the device's streams (after their work completes), unloads its modules and
// releases all its memory. Pointers into that memory must not be used afterwards.
func (d *hostDevice) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return d.errClosed("host.Close")
	}
	d.closed = true
	ss, ms, maps := d.streams, d.modules, d.maps
	d.streams, d.modules, d.maps = nil, nil, nil
	d.mu.Unlock()
	var first error
	for s := range ss {
		if err := s.destroy(); err != nil && first == nil {
			first = err
		}
	}
	for m := range ms {
		m.release()
	}
	for _, m := range maps {
		removeMapping(m)
		if err := release(m); err != nil && first == nil {
			first = &device.Error{Call: "host.Close", Detail: fmt.Sprintf("ptr=%#x", uintptr(m.base)), Err: err}
		}
	}
	return first
}
