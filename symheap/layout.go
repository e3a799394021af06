package symheap

import "fmt"

// Layout places every PE's copy of the heap in this process's address space: Bases[pe] is where
// PE pe's heap starts (0 when it is not mapped here, e.g. on another node), and every copy is Size
// bytes long. Offsets are the same on every PE; addresses are not.
type Layout struct {
	Bases []uintptr
	Size  uint64
}

func (l Layout) base(op string, pe int) (uintptr, error) {
	if pe < 0 || pe >= len(l.Bases) {
		return 0, errorf(op, ErrBadPE, "PE %d is outside [0,%d)", pe, len(l.Bases))
	}
	if l.Bases[pe] == 0 {
		return 0, errorf(op, ErrNotMapped, "PE %d's symmetric heap is not mapped in this process", pe)
	}
	return l.Bases[pe], nil
}

// Addr returns the address of offset off in PE pe's heap.
func (l Layout) Addr(pe int, off uint64) (uintptr, error) {
	op := fmt.Sprintf("Addr(PE %d, %#x)", pe, off)
	base, err := l.base(op, pe)
	if err != nil {
		return 0, err
	}
	if off >= l.Size {
		return 0, errorf(op, ErrOutOfRange, "offset %#x is outside PE %d's symmetric heap [0,%#x)", off, pe, l.Size)
	}
	return base + uintptr(off), nil
}

// Offset returns the heap offset of addr, an address inside PE pe's heap.
func (l Layout) Offset(pe int, addr uintptr) (uint64, error) {
	op := fmt.Sprintf("Offset(PE %d, %#x)", pe, addr)
	base, err := l.base(op, pe)
	if err != nil {
		return 0, err
	}
	if addr < base || uint64(addr-base) >= l.Size {
		return 0, errorf(op, ErrOutOfRange, "address %#x is outside PE %d's symmetric heap [%#x,%#x)",
			addr, pe, base, uint64(base)+l.Size)
	}
	return uint64(addr - base), nil
}
