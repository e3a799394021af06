package host

import (
	"encoding/binary"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/roxamen/roxamen/device"
)

// Handle layout (little endian), HandleSize bytes:
//
//	0  magic "ROXHOST1"
//	8  pid of the exporter
//	16 fd number of the memfd in the exporter
//	24 size in bytes
//	32 st_dev of the memfd
//	40 st_ino of the memfd
const HandleSize = 48

var magic = [8]byte{'R', 'O', 'X', 'H', 'O', 'S', 'T', '1'}

func (d *hostDevice) Export(p device.Ptr) ([]byte, error) {
	const op = "host.Export"
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, d.errClosed(op)
	}
	m := d.maps[p]
	if m == nil || m.kind != kindDevice {
		what := "not the start of an allocation of this device"
		if m != nil {
			what = "is " + m.kind.String() + ", not from Alloc"
		}
		return nil, &device.Error{Call: op, Detail: fmt.Sprintf("ptr=%#x: %s", uintptr(p), what), Kind: device.ErrInvalid}
	}
	var st unix.Stat_t
	if err := unix.Fstat(m.fd, &st); err != nil {
		return nil, &device.Error{Call: op, Detail: fmt.Sprintf("ptr=%#x: fstat", uintptr(p)), Err: err}
	}
	h := make([]byte, HandleSize)
	copy(h, magic[:])
	binary.LittleEndian.PutUint64(h[8:], uint64(os.Getpid()))
	binary.LittleEndian.PutUint64(h[16:], uint64(m.fd))
	binary.LittleEndian.PutUint64(h[24:], uint64(len(m.mem)))
	binary.LittleEndian.PutUint64(h[32:], st.Dev)
	binary.LittleEndian.PutUint64(h[40:], st.Ino)
	return h, nil
}

func (d *hostDevice) Import(h []byte) (device.Ptr, error) {
	const op = "host.Import"
	if err := d.live(op); err != nil {
		return 0, err
	}
	if len(h) != HandleSize || [8]byte(h[:8]) != magic {
		return 0, &device.Error{Call: op, Detail: fmt.Sprintf("handle of %d bytes %.8q: not a host export handle", len(h), h), Kind: device.ErrInvalid}
	}
	pid := binary.LittleEndian.Uint64(h[8:])
	fdn := binary.LittleEndian.Uint64(h[16:])
	size := binary.LittleEndian.Uint64(h[24:])
	dev := binary.LittleEndian.Uint64(h[32:])
	ino := binary.LittleEndian.Uint64(h[40:])
	desc := fmt.Sprintf("pid=%d fd=%d size=%d", pid, fdn, size)
	if size == 0 || size > 1<<48 || pid > 1<<31 || fdn > 1<<31 {
		return 0, &device.Error{Call: op, Detail: desc, Kind: device.ErrInvalid}
	}
	path := fmt.Sprintf("/proc/%d/fd/%d", pid, fdn)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, &device.Error{Call: op, Detail: desc + ": open " + path, Err: err, Kind: device.ErrInvalid}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return 0, &device.Error{Call: op, Detail: desc + ": fstat", Err: err}
	}
	if st.Dev != dev || st.Ino != ino || uint64(st.Size) != size {
		unix.Close(fd)
		return 0, &device.Error{Call: op, Detail: fmt.Sprintf("%s: %s is inode %d size %d, handle says inode %d (freed or fd reused)",
			desc, path, st.Ino, st.Size, ino), Kind: device.ErrInvalid}
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fd) // the mapping keeps the file alive
	if err != nil {
		return 0, &device.Error{Call: op, Detail: desc + ": mmap", Err: err}
	}
	m := &mapping{base: addr(mem), mem: mem, fd: -1, kind: kindImport, dev: d}
	if err := d.track(op, m); err != nil {
		release(m)
		return 0, err
	}
	return m.base, nil
}

func (d *hostDevice) CloseImport(p device.Ptr) error {
	m, err := d.untrack("host.CloseImport", p, kindImport)
	if err != nil {
		return err
	}
	if err := release(m); err != nil {
		return &device.Error{Call: "host.CloseImport", Detail: fmt.Sprintf("ptr=%#x", uintptr(p)), Err: err}
	}
	return nil
}
