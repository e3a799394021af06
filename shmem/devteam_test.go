package shmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/internal/dl"
	"github.com/roxamen/roxamen/kernels"
)

// The device team table on the CPU: the device library's team collectives
// (kernels/testdata/coll_pe.cc, include/roxamen/coll.h built for the CPU, as kernels'
// TestCollHost builds it), one loaded copy per PE of a host-backend job, run against the team
// table and workspaces that shmem filled. The host backend maps every PE's heap into every PE,
// so the CPU stands in for GPUs of one node.

var devLib struct {
	once sync.Once
	path string
	err  error
}

func buildDevLib(t *testing.T) string {
	t.Helper()
	cxx, err := exec.LookPath("clang-19")
	if err != nil {
		t.Skipf("clang-19 not installed: %v", err)
	}
	devLib.once.Do(func() {
		inc, _ := filepath.Abs("../kernels/include")
		tmp, err := os.MkdirTemp("", "roxdevteam")
		if err != nil {
			devLib.err = err
			return
		}
		so := filepath.Join(tmp, "libcoll_pe.so")
		args := []string{"-x", "c++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-D__HIP__",
			"-D__device__=", "-D__global__=", "-D__constant__=", "-D__host__=", "-D__shared__=", "-I" + inc, "-o", so,
			"../kernels/testdata/coll_pe.cc"}
		if out, err := exec.Command(cxx, args...).CombinedOutput(); err != nil {
			devLib.err = fmt.Errorf("clang-19: %v\n%s", err, out)
			return
		}
		devLib.path = so
	})
	if devLib.err != nil {
		t.Fatal(devLib.err)
	}
	return devLib.path
}

// cpuPE is one PE's copy of the device library, linked to its World.
type cpuPE struct {
	setState   func(s *kernels.State)
	setThreads func(n uint32)
	call       func(tid uint32, coll, typ, op, level, team int32, dest, src uintptr, n uint64, root int32) int32
	nTypes     func() int32
	typeName   func(i int32) string
	state      kernels.State
	abort      *kernels.Abort
}

// the harness's collective numbers (coll_pe.cc)
const (
	cpuFcollect = 3
	cpuReduce   = 6
	cpuOpSum    = 0
)

// linkCPU loads a private copy of the library for w and fills its roxshmem_state as shmem fills a
// module's: heap, peers, and the World's device team table.
func linkCPU(t *testing.T, w *World, so string) *cpuPE {
	h, err := dl.OpenCopy(so, t.TempDir(), fmt.Sprintf("pe%d", w.pe))
	if err != nil {
		t.Fatal(err)
	}
	pe := &cpuPE{abort: new(kernels.Abort)}
	if err := h.Map(map[string]any{"rox_set_state": &pe.setState, "rox_set_threads": &pe.setThreads, "rox_coll": &pe.call,
		"rox_n_types": &pe.nTypes, "rox_type_name": &pe.typeName}); err != nil {
		t.Fatal(err)
	}
	s := &pe.state
	s.Magic, s.Version = kernels.StateMagic, kernels.StateVersion
	s.MyPE, s.NPEs = int32(w.pe), int32(w.npes)
	s.HeapBase, s.HeapSize = uint64(uintptr(unsafe.Pointer(&w.local[0]))), uint64(w.heapSize)
	s.Abort = uint64(uintptr(unsafe.Pointer(pe.abort)))
	s.Teams = uint64(uintptr(unsafe.Pointer(w.dteams.Table())))
	for q := range w.npes {
		s.PeerBase[q] = uint64(uintptr(unsafe.Pointer(&w.peers[q][0])))
	}
	pe.setState(s)
	pe.setThreads(1)
	return pe
}

func (pe *cpuPE) typeIndex(t *testing.T, name string) int32 {
	for i := range pe.nTypes() {
		if pe.typeName(i) == name {
			return i
		}
	}
	t.Fatalf("the harness has no type %q", name)
	return -1
}

// jobOpts runs body on n PEs of a host-backend job with extra Init options.
func jobOpts(t *testing.T, n int, heapSize int64, body func(w *World) error, opts ...Option) {
	t.Helper()
	runJob(t, n, 0, heapSize, 20*time.Second, body, false, opts...)
}

// TestDeviceTeamTable: the table holds world, shared and every team a split made, under the handle
// the members agreed on; device collectives on those handles run on the CPU with shmem's
// workspaces; Destroy clears the slot and zeroes its workspace, and a device call on the destroyed
// handle is a recorded error that the host reports as ErrTeamDestroyed naming the team.
func TestDeviceTeamTable(t *testing.T) {
	so := buildDevLib(t)
	const n, elems = 4, 5
	jobOpts(t, n, 4<<20, func(w *World) error {
		ctx := context.Background()
		dev := linkCPU(t, w, so)
		tt := w.dteams.Table()
		if tt.Magic != kernels.TeamMagic {
			return fmt.Errorf("team table magic %#x", tt.Magic)
		}
		world := w.TeamWorld()
		if world.Handle() != kernels.TeamWorld || w.TeamShared().Handle() != kernels.TeamShared {
			return fmt.Errorf("handles: world %d, shared %d", world.Handle(), w.TeamShared().Handle())
		}
		x, y, err := world.Split2D(ctx, 2) // x: {0,1},{2,3}; y: {0,2},{1,3}
		if err != nil {
			return err
		}
		odd, err := world.SplitStrided(ctx, 1, 2, 2) // {1,3}; nil on PEs 0 and 2
		if err != nil {
			return err
		}
		for _, tm := range []*Team{world, w.TeamShared(), x, y, odd} {
			if tm == nil {
				continue
			}
			d := tt.Team[tm.Handle()]
			if int(d.Size) != tm.NPEs() || int(d.MyIndex) != tm.MyPE() || int(d.Start) != tm.WorldPE(0) ||
				(tm.NPEs() > 1 && int(d.Start+d.Stride) != tm.WorldPE(1)) || d.WSBytes < kernels.TeamWSMin {
				return fmt.Errorf("%s (handle %d): device entry %+v", tm, tm.Handle(), d)
			}
		}
		if odd == nil && w.pe%2 == 1 || odd != nil && w.pe%2 == 0 {
			return fmt.Errorf("odd team = %v", odd)
		}

		src, err := Alloc[int64](w, elems)
		if err != nil {
			return err
		}
		dst, err := Alloc[int64](w, 2*elems)
		if err != nil {
			return err
		}
		sum, err := Alloc[int64](w, elems)
		if err != nil {
			return err
		}
		for i := range elems {
			src.Local()[i] = int64(w.pe*100 + i)
		}
		if err := w.BarrierAll(ctx); err != nil {
			return err
		}
		addr := func(s Sym[int64]) uintptr { return uintptr(unsafe.Pointer(&s.Local()[0])) }
		// the device all-gather on the y team, by the handle the host gave
		if r := dev.call(0, cpuFcollect, 0, 0, 0, y.Handle(), addr(dst), addr(src), elems*8, 0); r != 0 {
			return fmt.Errorf("device fcollect on %s: %d, %v", y, r, w.deviceRecordError("fcollect", dev.abort.First, dev.abort.Count, nil))
		}
		for j := range 2 {
			for i := range elems {
				if got, want := dst.Local()[j*elems+i], int64(y.WorldPE(j)*100+i); got != want {
					return fmt.Errorf("device fcollect on %s: element %d of member %d = %d, want %d", y, i, j, got, want)
				}
			}
		}
		// the device sum on the world team
		i64 := dev.typeIndex(t, "int64")
		if r := dev.call(0, cpuReduce, i64, cpuOpSum, 0, world.Handle(), addr(sum), addr(src), elems, 0); r != 0 {
			return fmt.Errorf("device sum on TeamWorld: %d, %v", r, w.deviceRecordError("sum", dev.abort.First, dev.abort.Count, nil))
		}
		for i := range elems {
			if got, want := sum.Local()[i], int64(600+4*i); got != want {
				return fmt.Errorf("device sum: element %d = %d, want %d", i, got, want)
			}
		}

		// Destroy: the slot is cleared, its workspace zeroed, and the device refuses the handle.
		h := y.Handle()
		wsOff, wsSize := w.dteams.Workspace(int(h))
		if err := y.Destroy(ctx); err != nil {
			return err
		}
		if d := tt.Team[h]; d.Size != 0 {
			return fmt.Errorf("destroyed %s: device entry %+v, want size 0", y, d)
		}
		for i, b := range w.local[wsOff : wsOff+wsSize] {
			if b != 0 {
				return fmt.Errorf("destroyed %s: workspace byte %d is %#x, want 0", y, i, b)
			}
		}
		if r := dev.call(0, cpuFcollect, 0, 0, 0, h, addr(dst), addr(src), elems*8, 0); r == 0 {
			return fmt.Errorf("device fcollect on destroyed handle %d returned 0", h)
		}
		err = w.deviceRecordError("Module.Sync", dev.abort.First, dev.abort.Count, nil)
		if !errors.Is(err, ErrTeamDestroyed) {
			return fmt.Errorf("device call on destroyed handle %d: %v, want ErrTeamDestroyed", h, err)
		}
		t.Logf("PE %d: %v", w.pe, err)
		// the slot's next team works from a clean workspace
		again, err := world.SplitStrided(ctx, 0, 1, n)
		if err != nil {
			return err
		}
		if r := dev.call(0, cpuReduce, i64, cpuOpSum, 0, again.Handle(), addr(sum), addr(src), elems, 0); r != 0 {
			return fmt.Errorf("device sum on %s (handle %d): %d", again, again.Handle(), r)
		}
		return w.BarrierAll(ctx)
	}, withDevTeams())
}
