// Package testjob starts the jobs tests run: an in-process job (the PEs as goroutines of the test,
// meeting at a real rendezvous server, each starting its runtime from the launcher's variables it
// is handed) and a job of the test binary's own processes under the launcher. It knows nothing of
// shmem, so that package shmem's own tests launch their Worlds through it too: a job is started
// one way.
package testjob

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roxamen/roxamen/internal/bootstrap"
	"github.com/roxamen/roxamen/internal/testkit"
	"github.com/roxamen/roxamen/tools/launch"
)

// InProcess is an in-process job: NPEs PEs as goroutines of this process, which map each other's
// heaps as separate processes would and meet at a real rendezvous server.
type InProcess struct {
	NPEs int
	// PerNode PEs form a node named ROX_NODE=node<i>; 0: one node, ROX_NODE unset.
	PerNode int
}

// Run starts the rendezvous server and calls pe for every PE on its own goroutine, with getenv
// answering the launcher's variables for that PE (ROX_PE, ROX_NPES, ROX_LOCAL_PE,
// ROX_LOCAL_NPES, ROX_BOOTSTRAP, ROX_NODE). Each error a PE returns fails the test.
func (j InProcess) Run(t testing.TB, pe func(pe int, getenv func(string) string) error) {
	t.Helper()
	n := j.NPEs
	srv, err := bootstrap.NewServer("127.0.0.1:0", n, "test-token")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for p := range n {
		vars := map[string]string{
			"ROX_PE": fmt.Sprint(p), "ROX_NPES": fmt.Sprint(n),
			"ROX_LOCAL_PE": fmt.Sprint(p), "ROX_LOCAL_NPES": fmt.Sprint(n),
			"ROX_BOOTSTRAP": "test-token@" + srv.Addr(),
		}
		if j.PerNode > 0 {
			node := p / j.PerNode
			vars["ROX_LOCAL_PE"], vars["ROX_LOCAL_NPES"] = fmt.Sprint(p%j.PerNode), fmt.Sprint(min(j.PerNode, n-node*j.PerNode))
			vars["ROX_NODE"] = fmt.Sprintf("node%d", node)
		}
		wg.Go(func() { errs[p] = pe(p, func(k string) string { return vars[k] }) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// Workers is a job of this test binary's own processes under the launcher: each of NPEs PEs
// runs only the test Worker, with Marker=1 and Env in its environment (the worker skips
// without Marker; the test that starts the job skips with it).
type Workers struct {
	NPEs    int
	Worker  string // the test function each PE runs, "TestGPUWorker"
	Marker  string // the variable that tells a process it is a PE of the job
	Env     []string
	Timeout time.Duration
	MPS     launch.MPS // a CUDA MPS daemon for the job, as roxrun starts one (launch.NodeMPS)
}

// Run runs the job and returns its output, every line prefixed with its PE. It fails the test
// unless the job succeeded and every PE passed its worker.
func (w Workers) Run(t testing.TB) string {
	t.Helper()
	out, err := w.Start()
	if err != nil || strings.Count(out, "--- PASS: "+w.Worker) != w.NPEs {
		t.Fatalf("job failed: %v\n%s", err, out)
	}
	return out
}

// Start runs the job and returns its output and the launcher's error, for a test that expects
// the job to fail.
func (w Workers) Start() (string, error) {
	out := &testkit.LockedBuffer{}
	err := launch.Run(context.Background(), launch.Config{
		NPEs: w.NPEs, Argv: []string{os.Args[0], "-test.run=^" + w.Worker + "$", "-test.v"},
		Env:    append([]string{w.Marker + "=1"}, w.Env...),
		Prefix: true, Timeout: w.Timeout, Stdout: out, Stderr: out, MPS: w.MPS,
	})
	return out.String(), err
}

// InWorker reports whether this process is a PE of a Workers job with that marker.
func InWorker(marker string) bool { return os.Getenv(marker) != "" }
