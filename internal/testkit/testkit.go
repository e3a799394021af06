// Package testkit is what the tests of every layer share, on the standard library alone (so that
// the lowest packages' tests can use it): the gates that turn a skip into a failure on the
// machines that must have a GPU, a library or a header (ROX_TEST_GPU, ROX_TEST_KFD,
// ROX_TEST_PMIX), a buffer that collects output written from several goroutines, and the float
// bit patterns the vector loops are held to the scalar ones with. Jobs of
// several PEs are in tools/testjob (it starts them through the launcher).
package testkit

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"
)

// GPU is the variable that makes the GPU tests fail, rather than skip, where no usable GPU is
// found: the GPU machine sets it so that a skip never hides a regression.
const GPU = "ROX_TEST_GPU"

// Required reports whether the environment variable name demands what a test would otherwise
// skip without: set, and not "0".
func Required(name string) bool {
	v := os.Getenv(name)
	return v != "" && v != "0"
}

// Need skips the test with the message, or fails it when the variable name requires what is
// missing (see Required).
func Need(t testing.TB, name, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required(name) {
		t.Fatalf("%s is set but %s", name, msg)
	}
	t.Skip(msg)
}

// NeedGPU is Need for the GPU gate: the test skips where there is no usable GPU (format says
// what is missing) and fails instead under ROX_TEST_GPU.
func NeedGPU(t testing.TB, format string, args ...any) {
	t.Helper()
	Need(t, GPU, format, args...)
}

// LockedBuffer is a bytes.Buffer several goroutines (a job's PEs, a launcher's output copiers)
// may write at once.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
