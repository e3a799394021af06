// Counter has every PE add to a counter on PE 0 with atomics, and checks the total and that no
// two fetch-adds returned the same ticket.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"

	"github.com/roxamen/roxamen/shmem"
)

func main() {
	adds := flag.Int("adds", 1000, "fetch-adds per PE")
	flag.Parse()
	ctx := context.Background()
	w, err := shmem.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	me, n := w.MyPE(), w.NPEs()
	counter, err := shmem.Alloc[int64](w, 1)
	if err != nil {
		log.Fatal(err)
	}
	// Every PE's tickets land on PE 0, which checks them for duplicates.
	tickets, err := shmem.Alloc[int64](w, n**adds)
	if err != nil {
		log.Fatal(err)
	}
	mine := make([]int64, *adds)
	for i := range mine {
		if mine[i], err = shmem.AtomicFetchAdd(counter, 0, 1, 0); err != nil {
			log.Fatal(err)
		}
	}
	if err := tickets.Put(me**adds, mine, 0); err != nil {
		log.Fatal(err)
	}
	if err := w.BarrierAll(ctx); err != nil {
		log.Fatal(err)
	}
	if me == 0 {
		total := int64(n * *adds)
		final, err := shmem.AtomicFetch(counter, 0, 0)
		if err != nil {
			log.Fatal(err)
		}
		all := append([]int64(nil), tickets.Local()...)
		sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
		for i, t := range all {
			if t != int64(i) {
				fmt.Printf("counter: ticket %d handed out %s\n", i, map[bool]string{true: "twice", false: "never"}[t < int64(i)])
				os.Exit(1)
			}
		}
		if final != total {
			fmt.Printf("counter: %d after %d adds\n", final, total)
			os.Exit(1)
		}
		fmt.Printf("counter: %d PEs x %d fetch-adds = %d, every ticket once: ok\n", n, *adds, final)
	}
	if err := w.Finalize(); err != nil {
		log.Fatal(err)
	}
}
