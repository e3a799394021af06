// Ring passes a token around the PEs with put-with-signal: PE p waits for its signal, adds its
// number to the token and sends it to PE p+1. After the given number of laps PE 0 checks that the
// token holds every PE's contribution.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/roxamen/roxamen/shmem"
)

func main() {
	laps := flag.Int("laps", 10, "times the token goes around the ring")
	flag.Parse()
	ctx := context.Background()
	w, err := shmem.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	me, n := w.MyPE(), w.NPEs()
	token, err := shmem.Alloc[int64](w, 1)
	if err != nil {
		log.Fatal(err)
	}
	sig, err := shmem.Alloc[uint64](w, 1)
	if err != nil {
		log.Fatal(err)
	}
	next := (me + 1) % n
	for lap := 1; lap <= *laps; lap++ {
		hop := uint64(lap) // the signal counts laps, so each arrival is a new value
		val := int64(0)
		if me != 0 || lap > 1 {
			// Wait for the token from the previous PE.
			if _, err := shmem.SignalWaitUntil(ctx, sig, 0, shmem.CmpGE, hop-boolToU64(me == 0)); err != nil {
				log.Fatal(err)
			}
			val = token.Local()[0]
		}
		val += int64(me)
		if err := shmem.PutSignal(token, 0, []int64{val}, sig, 0, 1, shmem.SignalAdd, next); err != nil {
			log.Fatal(err)
		}
	}
	if me == 0 {
		// The last hop lands back on PE 0.
		if _, err := shmem.SignalWaitUntil(ctx, sig, 0, shmem.CmpGE, uint64(*laps)); err != nil {
			log.Fatal(err)
		}
		got, want := token.Local()[0], int64(*laps)*int64(n*(n-1)/2)
		if got != want {
			fmt.Printf("ring: token %d after %d laps of %d PEs, want %d\n", got, *laps, n, want)
			os.Exit(1)
		}
		fmt.Printf("ring: %d laps of %d PEs, token %d: ok\n", *laps, n, got)
	}
	if err := w.Finalize(); err != nil {
		log.Fatal(err)
	}
}

func boolToU64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
