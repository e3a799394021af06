// Quickstart: every PE puts its number into its right neighbour's array with put-with-signal,
// waits for its left neighbour's, then the PEs sum their numbers with an all-reduce.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/roxamen/roxamen/shmem"
)

func main() {
	ctx := context.Background()
	w, err := shmem.Init(ctx) // joins the job that roxrun, mpirun, srun or torchrun started
	check(err)
	me, n := w.MyPE(), w.NPEs()
	x, err := shmem.Alloc[int64](w, 1) // symmetric: the same array on every PE
	check(err)
	sig, err := shmem.Alloc[uint64](w, 1)
	check(err)
	check(shmem.PutSignal(x, 0, []int64{int64(me)}, sig, 0, 1, shmem.SignalSet, (me+1)%n))
	_, err = shmem.SignalWaitUntil(ctx, sig, 0, shmem.CmpEQ, 1) // the left neighbour's put landed
	check(err)
	sum, err := shmem.Alloc[int64](w, 1)
	check(err)
	check(shmem.AllReduce(ctx, w.TeamWorld(), sum, x, shmem.OpSum))
	fmt.Printf("PE %d of %d: from the left %d, sum %d\n", me, n, x.Local()[0], sum.Local()[0])
	check(w.Finalize())
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
