package host

import (
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"github.com/roxamen/roxamen/device"
)

// A mapping is one region of memory this package handed out: device memory (memfd), host
// buffers, imports of another process's memory, module globals.
type mapping struct {
	base device.Ptr
	mem  []byte // the mmap'd bytes; len(mem) is the usable size
	fd   int    // memfd behind device memory (-1 for anonymous memory)
	kind kind
	dev  *hostDevice
}

type kind int

const (
	kindDevice kind = iota // Alloc: memfd, exportable
	kindHost               // AllocHost: anonymous
	kindImport             // Import: another process's memfd
	kindGlobal             // a loaded module's globals
)

func (k kind) String() string {
	return [...]string{"device memory", "host buffer", "imported memory", "module globals"}[k]
}

// The process-wide table of mappings, sorted by base, so that Bytes and every copy can check
// an address range before touching it (a bad address is an error, not a SIGSEGV).
var table struct {
	sync.RWMutex
	maps []*mapping
}

func addMapping(m *mapping) {
	table.Lock()
	defer table.Unlock()
	i := sort.Search(len(table.maps), func(i int) bool { return table.maps[i].base >= m.base })
	table.maps = append(table.maps, nil)
	copy(table.maps[i+1:], table.maps[i:])
	table.maps[i] = m
}

func removeMapping(m *mapping) {
	table.Lock()
	defer table.Unlock()
	for i, x := range table.maps {
		if x == m {
			table.maps = append(table.maps[:i], table.maps[i+1:]...)
			return
		}
	}
}

// find returns the mapping that holds [p, p+n), or nil.
func find(p device.Ptr, n int) *mapping {
	table.RLock()
	defer table.RUnlock()
	i := sort.Search(len(table.maps), func(i int) bool { return table.maps[i].base > p }) - 1
	if i < 0 {
		return nil
	}
	m := table.maps[i]
	if n < 0 || uint64(p-m.base)+uint64(n) > uint64(len(m.mem)) {
		return nil
	}
	return m
}

// slice returns the bytes at [p, p+n) or an error naming op when they are not all inside one
// mapping of this package.
func slice(op string, p device.Ptr, n int) ([]byte, error) {
	if n < 0 {
		return nil, &device.Error{Call: op, Detail: fmt.Sprintf("n=%d", n), Kind: device.ErrInvalid}
	}
	if n == 0 {
		return nil, nil
	}
	m := find(p, n)
	if m == nil {
		return nil, &device.Error{Call: op, Detail: fmt.Sprintf("ptr=%#x n=%d: not inside any allocation", uintptr(p), n), Kind: device.ErrInvalid}
	}
	off := int(p - m.base)
	return m.mem[off : off+n : off+n], nil
}

// Bytes returns a slice over n bytes of mapped memory at p: device memory, a host buffer's Dev
// address, imported memory or a module global. It panics when [p, p+n) is not inside one such
// mapping, so a bad address fails loudly instead of corrupting memory. The slice is valid until
// the memory is freed; loads and stores through it are plain CPU accesses (use sync/atomic on
// aligned words for cross-process synchronization).
func Bytes(p device.Ptr, n int) []byte {
	b, err := slice("host.Bytes", p, n)
	if err != nil {
		panic(err)
	}
	return b
}

func addr(b []byte) device.Ptr { return device.Ptr(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
