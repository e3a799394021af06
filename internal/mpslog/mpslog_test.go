package mpslog

import (
	"os"
	"path/filepath"
	"testing"
)

// What CUDA 13's MPS server logged on the H200 when PE 1 (PID 480) faulted and PE 0 (479) was
// torn down with it (abridged).
const h200 = `[2026-12-02 05:33:31.965 Server   471] Client {PID: 479, Context ID: 1} connected
[2026-12-02 05:33:31.966 Server   471] Client {PID: 480, Context ID: 1} connected
[2026-12-02 05:33:34.930 Server   471] Client {PID: 480, Context: 1} encountered a fatal GPU error.
[2026-12-02 05:33:34.930 Server   471] Server is handling a fatal GPU error.
[2026-12-02 05:33:34.930 Server   471] All clients belonging to error trigging process 480 will be torn down
[2026-12-02 05:33:34.930 Server   471] The following client process have a sticky error set:
[2026-12-02 05:33:34.930 Server   471] 479
`

func TestFaultingClient(t *testing.T) {
	dir := t.TempDir()
	old := "[2026-12-02 05:00:00.000 Server   471] Client {PID: 479, Context: 1} encountered a fatal GPU error.\n"
	if err := os.WriteFile(filepath.Join(dir, "server.log"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	l := Since(dir) // a fault before it, of a process whose PID is now a PE's, is not the job's
	f, err := os.OpenFile(filepath.Join(dir, "server.log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(h200)
	f.Close()
	rank, line, ok := l.FaultingClient(map[int]int{479: 0, 480: 1})
	if !ok || rank != 1 || line != "server.log: [2026-12-02 05:33:34.930 Server   471] Client {PID: 480, Context: 1} encountered a fatal GPU error." {
		t.Fatalf("FaultingClient: PE %d, %q, %v; want PE 1 and its fatal-error line", rank, line, ok)
	}
	// A PID equal to a field of the header (the date, the time, the server's PID) is no client.
	for _, pid := range []int{33, 2026, 471, 930} {
		if rank, line, ok := FaultingClient([]string{"server.log: [2026-12-02 05:33:34.930 Server   471] Server is handling a fatal GPU error."}, map[int]int{pid: 3}); ok {
			t.Errorf("PID %d: named PE %d by %q", pid, rank, line)
		}
	}
	// Two PEs named by fatal lines: which faulted is not known.
	two := []string{"Client {PID: 479, Context: 1} encountered a fatal GPU error.", "Client {PID: 480, Context: 1} encountered a fatal GPU error."}
	if rank, _, ok := FaultingClient(two, map[int]int{479: 0, 480: 1}); ok {
		t.Errorf("two faulting PEs: named PE %d", rank)
	}
	// A line without "PID" names the numbers past its header.
	if rank, _, ok := FaultingClient([]string{"control.log: [2026-12-02 05:33:34.930 Control 470] Xid 13 on client 480"}, map[int]int{13: 0, 480: 1}); ok || rank == 1 {
		// 13 and 480 are both PEs: ambiguous, not named
		t.Errorf("ambiguous line named PE %d", rank)
	}
	if rank, _, ok := FaultingClient([]string{"[2026-12-02 05:33:34.930 Control 470] exception in client 480"}, map[int]int{479: 0, 480: 1}); !ok || rank != 1 {
		t.Errorf("line without PID: PE %d %v, want 1", rank, ok)
	}
}

func TestDirs(t *testing.T) {
	none := func(string) string { return "" }
	if PipeDir(none) != DefaultPipeDir || LogDir(none) != DefaultLogDir {
		t.Errorf("defaults: %s %s", PipeDir(none), LogDir(none))
	}
	dir := t.TempDir()
	env := func(k string) string { return map[string]string{"CUDA_MPS_PIPE_DIRECTORY": dir}[k] }
	if Running(env) {
		t.Fatal("running without a control pipe")
	}
	os.WriteFile(filepath.Join(dir, "control"), nil, 0o600)
	if !Running(env) {
		t.Fatal("not running with a control pipe")
	}
}
