// Package roxruntest builds the roxrun command for the tests that run it as users do: bench and
// litmus --run start the binary itself as their PEs, so a call in the test's process cannot stand
// in for it. The binary is built once per test binary; TestMain removes it with Remove.
package roxruntest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var bin struct {
	once      sync.Once
	dir, path string
	err       error
}

// Binary returns the path of roxrun built from this checkout (CGO_ENABLED=0, as it ships).
func Binary(t testing.TB) string {
	t.Helper()
	bin.once.Do(func() {
		dir, err := os.MkdirTemp("", "roxrun-test-")
		if err != nil {
			bin.err = err
			return
		}
		bin.dir = dir
		path := filepath.Join(dir, "roxrun")
		cmd := exec.Command("go", "build", "-o", path, "github.com/roxamen/roxamen/cmd/roxrun")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			bin.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		bin.path = path
	})
	if bin.err != nil {
		t.Fatal(bin.err)
	}
	return bin.path
}

// Remove deletes the binary Binary built, if any; TestMain calls it after m.Run.
func Remove() {
	if bin.dir != "" {
		os.RemoveAll(bin.dir)
	}
}
