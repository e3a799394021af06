package symheap_test

import (
	"errors"
	"fmt"

	"github.com/roxamen/roxamen/symheap"
)

func Example() {
	// Every PE builds the same heap and makes the same calls, so offsets agree across PEs.
	h, _ := symheap.New(1<<20, 64)
	a, _ := h.Alloc(100, 0)
	b, _ := h.Alloc(8, 4096)
	fmt.Println(a, b)

	// Turn an offset into PE 1's address, given where each PE's heap is mapped here.
	l := symheap.Layout{Bases: []uintptr{0x7f0000000000, 0x7f1000000000}, Size: h.Size()}
	addr, _ := l.Addr(1, b)
	fmt.Printf("%#x\n", addr)

	// Bounds checks name the offending range.
	err := h.Check(a+96, 8)
	fmt.Println(errors.Is(err, symheap.ErrOutOfRange), err)
	// Output:
	// 0 4096
	// 0x7f1000001000
	// true symheap: Check(0x60, n=8): [0x60,0x68) runs past the end of the allocation at 0x0 of size 100
}
