package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/roxamen/roxamen/shmem"
)

func init() {
	scenarios["repro10"] = func(ctx context.Context, w *shmem.World) error {
		_, err := shmem.Init(ctx)
		fmt.Printf("second Init: %v (ErrPEFailed=%v)\n", err, errors.Is(err, shmem.ErrPEFailed))
		if w.MyPE() == 1 {
			time.Sleep(3 * time.Second)
		}
		_, err = w.Malloc(64)
		fmt.Printf("Malloc with a late PE: %v (ErrTimeout=%v)\n", err, errors.Is(err, shmem.ErrTimeout))
		return nil
	}
}
