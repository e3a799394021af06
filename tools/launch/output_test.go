package launch

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// The root cause's verdict repeats what the PE itself said last on stderr: among hundreds of PEs
// failing at once (unprefixed), its own message is otherwise one line among many.
func TestLaunchVerdictSaysRootCause(t *testing.T) {
	var stderr bytes.Buffer
	err := Run(context.Background(), Config{
		NPEs:   3,
		Argv:   []string{"sh", "-c", `if [ "$ROX_PE" = 1 ]; then echo "noise" >&2; echo "bootstrap: Dial on PE 1: the cause" >&2; exit 3; fi; exec sleep 30`},
		Grace:  100 * time.Millisecond,
		Stdout: &bytes.Buffer{}, Stderr: &stderr,
	})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.PE != 1 || ee.Status != 3 {
		t.Fatalf("Run: %v, want PE 1's status 3\n%s", err, &stderr)
	}
	if ee.Said != "bootstrap: Dial on PE 1: the cause" {
		t.Errorf("Said = %q, want PE 1's last stderr line", ee.Said)
	}
	want := "roxrun: PE 1 exited with status 3 before Init\nroxrun: PE 1 said last (stderr): bootstrap: Dial on PE 1: the cause\n"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr:\n%s\nwant the lines %q", &stderr, want)
	}
}

// A panic's first line is what names it, not the last line of its trace.
func TestLaunchLastWordsPanic(t *testing.T) {
	var w lastWords
	for _, l := range []string{"working\n", "panic: index out of range [3] with length 3\n", "\n", "goroutine 1 [running]:\n", "main.main()\n", "\t/x/main.go:9 +0x1d\n"} {
		w.add(l)
	}
	if got := w.said(); got != "panic: index out of range [3] with length 3" {
		t.Errorf("said %q", got)
	}
}

// slowWriter takes a while per write, like a terminal or a loaded machine's reader.
type slowWriter struct {
	mu    sync.Mutex
	lines int
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(2 * time.Millisecond)
	w.mu.Lock()
	w.lines += bytes.Count(p, []byte{'\n'})
	w.mu.Unlock()
	return len(p), nil
}

// Output a PE wrote before it exited is read to its end, however long copying it takes: the
// wait for it ends when none comes for the grace period, not after a fixed time.
func TestLaunchOutputDrained(t *testing.T) {
	const lines = 1000 // 2 s of copying at 2 ms a line, the grace period 0.5 s
	var out slowWriter
	err := Run(context.Background(), Config{
		NPEs:   1,
		Argv:   []string{"sh", "-c", `i=0; while [ $i -lt 1000 ]; do echo "line $i"; i=$((i+1)); done; exit 2`},
		Grace:  500 * time.Millisecond,
		Stdout: &out, Stderr: &bytes.Buffer{},
	})
	if ExitStatus(err) != 2 {
		t.Fatalf("Run: %v, want status 2", err)
	}
	if out.lines != lines {
		t.Errorf("copied %d of the PE's %d lines", out.lines, lines)
	}
}
