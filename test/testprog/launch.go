package main

// Scenarios of the launcher's reliability tests (test/reliability_launch_test.go): PEs that leave
// the job in every way a user's program can (a background child holding stdout, an exit before
// Init or without Finalize, os.Exit, a panic, a signal) while the others wait for them.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/roxamen/roxamen/shmem"
)

func init() {
	scenarios["bgchild"] = bgChild
	scenarios["leave"] = leave
	scenarios["nofinalize"] = noFinalize
	scenarios["amoconc"] = amoConcurrent
	scenarios["killpeer"] = killPeer
	// Some scenarios act before main calls Init: the child a PE leaves behind, and a PE that ends
	// before it ever joins the job.
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case "linger":
		// The background child of bgchild: it holds the PE's stdout and stderr far longer than
		// the test waits (bounded all the same, so that a launcher that fails the test leaves no
		// process behind for long).
		fmt.Println("linger: holding stdout")
		time.Sleep(5 * time.Minute)
		os.Exit(0)
	case "preinit":
		// preinit: the last PE exits with status 0 before Init; the others run hang and must
		// learn at once which PE is gone.
		if os.Getenv("ROX_PE") == strconv.Itoa(npesFromEnv()-1) {
			os.Exit(0)
		}
		os.Args[1] = "hang"
	}
}

func npesFromEnv() int {
	n, _ := strconv.Atoi(os.Getenv("ROX_NPES"))
	return n
}

// bgChild: PE 0 starts a child that inherits its stdout and stderr and outlives it; every PE
// then finishes normally. roxrun must end anyway and take the child with it.
func bgChild(ctx context.Context, w *shmem.World) error {
	if w.MyPE() == 0 {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		child := exec.Command(self, "linger")
		child.Stdout, child.Stderr = os.Stdout, os.Stderr
		if err := child.Start(); err != nil {
			return err
		}
		fmt.Printf("bgchild: started child %d\n", child.Process.Pid)
	}
	return w.BarrierAll(ctx)
}

// leave: the last PE leaves the job the way os.Args[2] says while the others wait for it in a
// barrier; they must fail naming it. Ways: exit0 (returns from main without Finalize), exit3
// (os.Exit(3)), panic, sigkill, sigterm, sigstop, oom.
func leave(ctx context.Context, w *shmem.World) error {
	how := "exit0"
	if len(os.Args) > 2 {
		how = os.Args[2]
	}
	if w.MyPE() == w.NPEs()-1 {
		time.Sleep(100 * time.Millisecond)
		switch how {
		case "exit0":
			os.Exit(0)
		case "exit3":
			os.Exit(3)
		case "panic":
			panic("leave: PE " + strconv.Itoa(w.MyPE()) + " panics on purpose")
		case "sigkill":
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		case "oom":
			// Grows until the kernel's OOM killer ends it (the test runs the job in a memory cgroup).
			var hold [][]byte
			for {
				b := make([]byte, 16<<20)
				for i := 0; i < len(b); i += 4096 {
					b[i] = 1
				}
				hold = append(hold, b)
			}
		case "sigterm":
			_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		case "sigstop":
			_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		}
		select {}
	}
	err := w.BarrierAll(ctx)
	if err == nil {
		return errors.New("BarrierAll returned nil although a PE left the job")
	}
	return fmt.Errorf("barrier failed as expected: %w", err)
}

// noFinalize: every PE works, synchronises and then returns from main without Finalize, as many
// OpenSHMEM programs do; the job must end cleanly.
func noFinalize(ctx context.Context, w *shmem.World) error {
	x, err := shmem.Alloc[int64](w, 1)
	if err != nil {
		return err
	}
	if _, err := shmem.AtomicFetchAdd(x, 0, 1, 0); err != nil {
		return err
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	if w.MyPE() == 0 {
		fmt.Printf("nofinalize: %d adds seen, exiting without Finalize\n", x.Local()[0])
	}
	os.Exit(0)
	return nil
}

// amoConcurrent: 8 goroutines of PE 0 make 10,000 fetch-adds each (os.Args[2] and [3] override)
// on one word of the last PE, which must then hold their sum; PE 0 prints the rate.
func amoConcurrent(ctx context.Context, w *shmem.World) error {
	g, n := 8, 10000
	if len(os.Args) > 3 {
		g, _ = strconv.Atoi(os.Args[2])
		n, _ = strconv.Atoi(os.Args[3])
	}
	x, err := shmem.Alloc[int64](w, 1)
	if err != nil {
		return err
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	target := w.NPEs() - 1
	if w.MyPE() == 0 {
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, g)
		for range g {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n {
					if _, err := shmem.AtomicFetchAdd(x, 0, 1, target); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		took := time.Since(start)
		close(errs)
		for err := range errs {
			return err
		}
		got, err := shmem.AtomicFetch(x, 0, target)
		if err != nil {
			return err
		}
		if got != int64(g*n) {
			return fmt.Errorf("the word holds %d after %d fetch-adds", got, g*n)
		}
		fmt.Printf("amoconc: %d goroutines x %d fetch-adds in %v: %.0f/s\n", g, n, took.Round(time.Millisecond), float64(g*n)/took.Seconds())
	}
	return w.BarrierAll(ctx)
}

// killPeer: the last PE starts a child that holds its stdout (so that roxrun reports its end
// only after the output grace, late), then SIGKILLs itself, while PE 0 reads from it until a
// read fails. Over tcp PE 0 sees the connection reset at once and exits with status 1 long
// before the dead PE is reported: roxrun must still name the dead PE first.
func killPeer(ctx context.Context, w *shmem.World) error {
	x, err := shmem.Alloc[int64](w, 1)
	if err != nil {
		return err
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	dead := w.NPEs() - 1
	switch w.MyPE() {
	case dead:
		self, err := os.Executable()
		if err != nil {
			return err
		}
		child := exec.Command(self, "linger")
		child.Stdout, child.Stderr = os.Stdout, os.Stderr
		if err := child.Start(); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case 0:
		for {
			if _, err := x.G(0, dead); err != nil {
				return fmt.Errorf("read from PE %d failed as expected: %w", dead, err)
			}
		}
	}
	select {} // roxrun ends the job
}
