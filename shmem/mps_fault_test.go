package shmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/cuda"
	"github.com/roxamen/roxamen/device/host"
	"github.com/roxamen/roxamen/tools/testjob"
)

// Under CUDA MPS one PE's kernel fault fails every PE's context with the same status, so each
// PE's own error must say whose kernel it was, from the MPS server's log. On the CPU: a stand-in
// MPS daemon (a pipe directory with its control pipe, a log directory) and host kernels standing
// for the GPU's. PE 1's "faults": the stand-in server logs its process as CUDA 13's server did on
// the H200 and its stream fails with CUDA_ERROR_ILLEGAL_ADDRESS; PE 0's is then torn down with
// the same status. Each PE waits for its stream as Module.Sync does (waitStream) and checks that
// its error names PE 1.
func TestMPSFaultNamedOnEveryPE(t *testing.T) {
	if testjob.InWorker(mpsFaultMarker) {
		t.Skip("in a worker")
	}
	pipe, logs := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(pipe, "control"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A fault of another process on the same daemon, before the job: it names no PE.
	if err := os.WriteFile(filepath.Join(logs, "server.log"), []byte(fmt.Sprintf("[2026-12-02 05:00:00.000 Server   471] Client {PID: %d, Context: 1} encountered a fatal GPU error.\n", os.Getpid())), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CUDA_MPS_PIPE_DIRECTORY", pipe)
	t.Setenv("CUDA_MPS_LOG_DIRECTORY", logs)
	out := testjob.Workers{NPEs: 2, Worker: "TestMPSFaultWorker", Marker: mpsFaultMarker,
		Env: []string{"ROX_DEVICE=host", "ROX_TIMEOUT=20s"}, Timeout: time.Minute}.Run(t)
	if testing.Verbose() {
		t.Log(out)
	}
}

const mpsFaultMarker = "ROX_MPS_FAULT_WORKER"

// mpsFaultModule is the host module whose kernel stands for both PEs' GPU kernels.
const mpsFaultModule = "rox-test-mps-fault"

func init() {
	host.Register(mpsFaultModule, map[string]host.Kernel{"fault": func(l host.Launch, args []any) {
		pe, logf := args[0].(int32), os.Getenv("CUDA_MPS_LOG_DIRECTORY")+"/server.log"
		if pe == 1 {
			f, err := os.OpenFile(logf, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				panic(err)
			}
			p := os.Getpid()
			fmt.Fprintf(f, "[2026-12-02 05:33:34.930 Server   471] Client {PID: %d, Context: 1} encountered a fatal GPU error.\n", p)
			fmt.Fprintf(f, "[2026-12-02 05:33:34.930 Server   471] Server is handling a fatal GPU error.\n")
			fmt.Fprintf(f, "[2026-12-02 05:33:34.930 Server   471] All clients belonging to error trigging process %d will be torn down\n", p)
			f.Close()
			panic(cuda.ErrorIllegalAddress)
		}
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if b, _ := os.ReadFile(logf); strings.Count(string(b), "encountered a fatal GPU error") == 2 {
				break
			}
		}
		panic(cuda.ErrorIllegalAddress) // torn down with PE 1's context, as every MPS client is
	}}, nil)
}

// TestMPSFaultWorker is one PE of TestMPSFaultNamedOnEveryPE's job.
func TestMPSFaultWorker(t *testing.T) {
	if !testjob.InWorker(mpsFaultMarker) {
		t.Skip("run by TestMPSFaultNamedOnEveryPE")
	}
	ctx := context.Background()
	w, err := Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Finalize()
	me := w.MyPE()
	if w.pids[me] != os.Getpid() || w.pids[1-me] <= 0 || w.pids[1-me] == os.Getpid() {
		t.Fatalf("PE %d knows the PEs' process IDs %v, want its own %d and its peer's", me, w.pids, os.Getpid())
	}
	mod, err := w.dev.LoadModule([]byte(mpsFaultModule))
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Unload()
	fn, err := mod.Function("fault")
	if err != nil {
		t.Fatal(err)
	}
	st, err := w.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Destroy()
	if err := st.Launch(fn, device.D1(1), device.D1(1), 0, int32(me)); err != nil {
		t.Fatal(err)
	}
	// The host backend starts no device runtime; its waiting and error plumbing are a GPU PE's.
	w.gpu = w.gpuRT()
	err = w.waitStream(ctx, "Module.Sync", st)
	w.gpu = nil
	t.Logf("PE %d: %v", me, err)
	if !errors.Is(err, ErrPEFailed) || !errors.Is(err, cuda.ErrorIllegalAddress) {
		t.Fatalf("PE %d: %v, want ErrPEFailed with CUDA_ERROR_ILLEGAL_ADDRESS", me, err)
	}
	want := fmt.Sprintf("PE 1's kernel faulted (the CUDA MPS server's log: server.log: [2026-12-02 05:33:34.930 Server   471] Client {PID: %d, Context: 1} encountered a fatal GPU error.); this PE's context was torn down with it", w.pids[1])
	if me == 1 {
		want = fmt.Sprintf("this PE's kernel faulted (the CUDA MPS server's log: server.log: [2026-12-02 05:33:34.930 Server   471] Client {PID: %d, Context: 1} encountered a fatal GPU error.); every PE's context was torn down with it", w.pids[1])
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("PE %d's error does not name PE 1 as the faulting PE:\n%v\nwant it to say:\n%s", me, err, want)
	}
}
