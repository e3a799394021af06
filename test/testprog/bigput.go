package main

import (
	"context"
	"fmt"

	"github.com/roxamen/roxamen/shmem"
)

func init() { scenarios["bigput"] = bigPut }

// bigPut: every PE puts 4 MiB to its right neighbour, 4 rounds of fresh data, each completed by a
// quiet and a barrier, and checks what its left neighbour sent: large transfers, for the
// transports' multi-rail paths (striping, rendezvous over several NICs).
func bigPut(ctx context.Context, w *shmem.World) error {
	me, n := w.MyPE(), w.NPEs()
	right, left := (me+1)%n, (me+n-1)%n
	const elems = 512 << 10 // 4 MiB of uint64
	dst, err := shmem.Alloc[uint64](w, elems)
	if err != nil {
		return err
	}
	data := make([]uint64, elems)
	for round := uint64(1); round <= 4; round++ {
		for i := range data {
			data[i] = round<<56 | uint64(me)<<40 | uint64(i)
		}
		if err := dst.Put(0, data, right); err != nil {
			return err
		}
		if err := w.Quiet(); err != nil {
			return err
		}
		if err := w.BarrierAll(ctx); err != nil {
			return err
		}
		for i, v := range dst.Local() {
			if want := round<<56 | uint64(left)<<40 | uint64(i); v != want {
				return fmt.Errorf("round %d: element %d from PE %d is %#x, want %#x", round, i, left, v, want)
			}
		}
		if err := w.BarrierAll(ctx); err != nil {
			return err
		}
	}
	return nil
}
