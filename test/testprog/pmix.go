package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/roxamen/roxamen/shmem"
)

func init() {
	scenarios["hold"] = hold
}

// hold keeps a joined job open until the file named by its argument exists (test/pmix_test.go
// connects an outsider to the job's rendezvous meanwhile), then meets in a barrier.
func hold(ctx context.Context, w *shmem.World) error {
	if len(os.Args) < 3 {
		return errors.New("usage: testprog hold FILE")
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(os.Args[2]); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within 2m", os.Args[2])
		}
		time.Sleep(20 * time.Millisecond)
	}
	return w.BarrierAll(ctx)
}
