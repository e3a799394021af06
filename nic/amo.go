package nic

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

func (o AMOOp) String() string {
	switch o {
	case AMOFetch:
		return "fetch"
	case AMOSet:
		return "set"
	case AMOSwap:
		return "swap"
	case AMOCompareSwap:
		return "compare_swap"
	case AMOFetchAdd:
		return "fetch_add"
	case AMOFetchAnd:
		return "fetch_and"
	case AMOFetchOr:
		return "fetch_or"
	case AMOFetchXor:
		return "fetch_xor"
	}
	return fmt.Sprintf("amo(%d)", uint32(o))
}

func (o SignalOp) String() string {
	switch o {
	case SignalSet:
		return "set"
	case SignalAdd:
		return "add"
	}
	return fmt.Sprintf("signal_op(%d)", uint32(o))
}

// CheckAMO validates an AMO's kind, width and alignment (of a heap offset or an address).
func CheckAMO(op AMOOp, width int, at uint64) error {
	if op > AMOFetchXor {
		return fmt.Errorf("unknown AMO %v", op)
	}
	if width != 4 && width != 8 {
		return fmt.Errorf("AMO width %d (want 4 or 8)", width)
	}
	if at%uint64(width) != 0 {
		return fmt.Errorf("AMO at %#x is not %d-byte aligned", at, width)
	}
	return nil
}

// ApplyAMO performs op atomically (real atomic instructions: other processes may access the same
// shared memory) on the width-byte word at the start of b and returns the word's old value. A
// 4-byte AMO uses the low 32 bits of value and compare. b must be aligned to width.
func ApplyAMO(b []byte, op AMOOp, width int, value, compare uint64) (uint64, error) {
	if err := CheckAMO(op, width, 0); err != nil {
		return 0, err
	}
	if len(b) < width {
		return 0, fmt.Errorf("%v: %d bytes for a %d-byte word", op, len(b), width)
	}
	if err := CheckAMO(op, width, uint64(uintptr(unsafe.Pointer(&b[0])))); err != nil {
		return 0, err
	}
	p := unsafe.Pointer(&b[0])
	if width == 8 {
		w := (*uint64)(p)
		switch op {
		case AMOFetch:
			return atomic.LoadUint64(w), nil
		case AMOSet, AMOSwap:
			return atomic.SwapUint64(w, value), nil
		case AMOCompareSwap:
			for {
				old := atomic.LoadUint64(w)
				if old != compare || atomic.CompareAndSwapUint64(w, old, value) {
					return old, nil
				}
			}
		case AMOFetchAdd:
			return atomic.AddUint64(w, value) - value, nil
		case AMOFetchAnd:
			return atomic.AndUint64(w, value), nil
		case AMOFetchOr:
			return atomic.OrUint64(w, value), nil
		case AMOFetchXor:
			for {
				old := atomic.LoadUint64(w)
				if atomic.CompareAndSwapUint64(w, old, old^value) {
					return old, nil
				}
			}
		}
	}
	w, v, c := (*uint32)(p), uint32(value), uint32(compare)
	switch op {
	case AMOFetch:
		return uint64(atomic.LoadUint32(w)), nil
	case AMOSet, AMOSwap:
		return uint64(atomic.SwapUint32(w, v)), nil
	case AMOCompareSwap:
		for {
			old := atomic.LoadUint32(w)
			if old != c || atomic.CompareAndSwapUint32(w, old, v) {
				return uint64(old), nil
			}
		}
	case AMOFetchAdd:
		return uint64(atomic.AddUint32(w, v) - v), nil
	case AMOFetchAnd:
		return uint64(atomic.AndUint32(w, v)), nil
	case AMOFetchOr:
		return uint64(atomic.OrUint32(w, v)), nil
	}
	for { // AMOFetchXor
		old := atomic.LoadUint32(w)
		if atomic.CompareAndSwapUint32(w, old, old^v) {
			return uint64(old), nil
		}
	}
}

// ApplySignal updates the 8-byte signal word at the start of b (8-byte aligned) atomically.
func ApplySignal(b []byte, op SignalOp, value uint64) error {
	if len(b) < 8 || uintptr(unsafe.Pointer(&b[0]))%8 != 0 {
		return fmt.Errorf("signal word of %d bytes at %p: want 8 aligned bytes", len(b), unsafe.Pointer(unsafe.SliceData(b)))
	}
	w := (*uint64)(unsafe.Pointer(&b[0]))
	switch op {
	case SignalSet:
		atomic.StoreUint64(w, value)
	case SignalAdd:
		atomic.AddUint64(w, value)
	default:
		return fmt.Errorf("unknown signal op %v", op)
	}
	return nil
}

// StoreWord writes the low width bytes of v to the start of b atomically (b aligned to width),
// so that a waiter polling the word sees it whole.
func StoreWord(b []byte, width int, v uint64) error {
	if len(b) < width || (width != 4 && width != 8) || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(width) != 0 {
		return fmt.Errorf("store of a %d-byte word into %d bytes at %p: want aligned 4 or 8", width, len(b), unsafe.Pointer(unsafe.SliceData(b)))
	}
	if width == 8 {
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[0])), v)
	} else {
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[0])), uint32(v))
	}
	return nil
}
