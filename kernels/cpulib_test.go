package kernels

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/roxamen/roxamen/internal/dl"
	"github.com/roxamen/roxamen/kernels/internal/build"
)

// The device library built for the CPU, as the host harnesses (TestCollHost, the SDMA and
// workload tests, TestHostLibrary, TestCompatHostRun) run it: the HIP paths with the GPU
// qualifiers defined away, so that the arch layer's host fallbacks stand in for the GPU
// instructions. The exported helpers serve package kernels_test too.

// TestMain removes the libraries BuildHostLib built.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, l := range hostLibs.libs {
		if l.dir != "" {
			os.RemoveAll(l.dir)
		}
	}
	os.Exit(code)
}

// cpuArgs are a C++ compiler's arguments to build src (relative to kernels/) for the CPU into out;
// extra (an optimization level, -shared, libraries) follows the source.
func cpuArgs(out, src string, extra ...string) []string {
	return append([]string{"-x", "c++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-D__HIP__", "-D__device__=",
		"-D__global__=", "-D__constant__=", "-D__host__=", "-D__shared__=", "-Iinclude", "-o", out, src}, extra...)
}

var hostLibs struct {
	mu   sync.Mutex
	libs map[string]*hostLib // by source and flags
}

type hostLib struct {
	once      sync.Once
	dir, path string
	err       error
}

// BuildHostLib builds src (relative to kernels/) with clang-19 into a shared library for the CPU,
// once per test binary for each source and flags (extra: the optimization level, libraries), and
// returns its path. It skips the test where clang-19 is not installed.
func BuildHostLib(t testing.TB, src string, extra ...string) string {
	t.Helper()
	clang, err := build.Tool("clang-19")
	if err != nil {
		t.Skip("clang-19 not installed: ", err)
	}
	key := src + " " + strings.Join(extra, " ")
	hostLibs.mu.Lock()
	if hostLibs.libs == nil {
		hostLibs.libs = map[string]*hostLib{}
	}
	l := hostLibs.libs[key]
	if l == nil {
		l = &hostLib{}
		hostLibs.libs[key] = l
	}
	hostLibs.mu.Unlock()
	l.once.Do(func() {
		// not t.TempDir: the library outlives the test that builds it
		l.dir, err = os.MkdirTemp("", "roxcpu")
		if err != nil {
			l.err = err
			return
		}
		so := filepath.Join(l.dir, "lib"+strings.TrimSuffix(filepath.Base(src), filepath.Ext(src))+".so")
		args := cpuArgs(so, src, append([]string{"-fPIC", "-shared"}, extra...)...)
		if out, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
			l.err = fmt.Errorf("clang-19 %s: %v\n%s", src, err, out)
			return
		}
		l.path = so
	})
	if l.err != nil {
		t.Fatal(l.err)
	}
	return l.path
}

// OpenHostPE loads PE p's own instance of the shared library so (a copy under another name, so
// that its globals, roxshmem_state among them, are its own) and binds fns: symbol name -> pointer
// to a func variable.
func OpenHostPE(t testing.TB, so string, p int, fns map[string]any) *dl.Lib {
	t.Helper()
	h, err := dl.OpenCopy(so, t.TempDir(), fmt.Sprintf("pe%d", p))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Map(fns); err != nil {
		t.Fatal(err)
	}
	return h
}

// HostMem returns n bytes of fresh anonymous memory (page-aligned, zeroed), unmapped when the test
// ends: a PE's heap, a queue, a control block.
func HostMem(t testing.TB, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// HostAddr is the address of b's first byte, as the library sees it.
func HostAddr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

// HostWatchdog bounds a host harness's run: a hang breaker, not a speed limit (on a loaded 2-core
// machine 32 threads may wait long for the CPU; a 30 s limit was once exceeded by a batch on a
// one-member team, which has no wait but its group barriers).
const HostWatchdog = 3 * time.Minute

// RunHostGroups runs f(p, tid) for each thread tid < threads(p) of each PE p of pes, every PE's
// group at once, and waits for them all. Where they have not finished in HostWatchdog it sets
// every abort word of aborts (the library's waits then give up), waits for them again and
// returns false.
func RunHostGroups(aborts []*Abort, pes []int, threads func(p int) int, f func(p, tid int)) bool {
	var wg sync.WaitGroup
	for _, p := range pes {
		for tid := range threads(p) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f(p, tid)
			}()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(HostWatchdog):
		for _, a := range aborts {
			atomic.StoreUint64(&a.Word, 0xdead)
		}
		<-done
		return false
	}
}
