package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/roxamen/roxamen/device"
)

// TestGPUColl runs the team collectives on the GPU (gpucheck/coll-clang-sm_90.ptx) with the two PEs
// of newPEs (one per GPU, or both on one GPU: then their kernels run side by side in one context,
// one block each), in both ordering modes: all-reduce over both algorithms and five types,
// reduce-scatter, all-gather (fcollect, collect), broadcast, all-to-all and team barrier/sync, each
// checked against a reference computed here. Skips without a GPU; fails under ROX_TEST_GPU.
const (
	gcWSOff   = 48 << 20 // the team workspaces in every heap: world, then shared
	gcWSBytes = TeamWSData + 2*(2<<20)
	gcSrc     = dataOff          // sources (up to 16 MiB)
	gcDst     = dataOff + 16<<20 // destinations (up to 16 MiB, guarded)
	gcWords   = miscOff + 8<<10  // cg_sync's words
	gcPoison  = 0x5c
	gcMaxN    = 1<<20 + 5 // bytes of the largest per-PE buffer
)

type gpuTeams struct {
	tables [2]device.Ptr
	tabs   [2]TeamTable
}

// set gives both PEs a team table: world (slot 0) and shared (slot 1), both PEs, with their
// workspace at gcWSOff, and the algorithm algo.
func (g *gpuTeams) set(t *testing.T, pes [2]*gpuPE, algo uint32) {
	t.Helper()
	for i, p := range pes {
		if g.tables[i] == 0 {
			g.tables[i] = p.scratch(t, int(unsafe.Sizeof(TeamTable{})))
			ok(t, p.dev.Memset(p.heap.Add(gcWSOff), 0, 2*gcWSBytes))
		}
		tab := &g.tabs[i]
		tab.Magic, tab.NTeams, tab.CollAlgo = TeamMagic, 2, algo
		for slot := 0; slot < 2; slot++ {
			tab.Team[slot] = TeamDesc{Start: 0, Stride: 1, Size: 2, MyIndex: int32(i), WSOff: uint64(gcWSOff + slot*gcWSBytes), WSBytes: gcWSBytes}
		}
		ok(t, p.dev.CopyHtoD(g.tables[i], unsafe.Slice((*byte)(unsafe.Pointer(tab)), unsafe.Sizeof(*tab))))
		p.state.Teams = uint64(g.tables[i])
		p.push(t)
	}
}

func gcImage(t *testing.T) []byte {
	b, err := os.ReadFile(filepath.Join("gpucheck", "coll-clang-sm_90.ptx"))
	ok(t, err)
	return b
}

func TestGPUColl(t *testing.T) {
	devs := gpuDevices(t)
	image := gcImage(t)
	for _, mode := range []struct {
		name  string
		flags uint32
	}{{"strict", 0}, {"bypass", FlagBypass}} {
		t.Run(mode.name, func(t *testing.T) {
			pes := newPEs(t, devs, image, mode.flags)
			var teams gpuTeams
			teams.set(t, pes, CollAuto)
			rets := [2]device.Ptr{pes[0].scratch(t, 8), pes[1].scratch(t, 8)}
			t.Run("allreduce", func(t *testing.T) { gcAllReduce(t, pes, &teams, rets) })
			t.Run("reduce_scatter", func(t *testing.T) { gcReduceScatter(t, pes, rets) })
			t.Run("data", func(t *testing.T) { gcData(t, pes, rets) })
			t.Run("sync", func(t *testing.T) { gcSync(t, pes, rets) })
		})
	}
}

// gcRun launches name on both PEs (one block of 256 threads each), waits, and checks each PE's
// result code and abort record.
func gcRun(t *testing.T, pes [2]*gpuPE, rets [2]device.Ptr, what string, name string, args func(i int) []any) {
	t.Helper()
	for i, p := range pes {
		ok(t, p.dev.Memset(rets[i], 0xff, 8))
		p.launch(t, name, 1, 256, append(args(i), rets[i])...)
	}
	wait(t, pes[0], pes[1])
	for i, p := range pes {
		if r := int32(p.u64s(t, rets[i], 1)[0]); r != 0 {
			t.Errorf("%s: PE %d returned %d", what, i, r)
		}
		if first := binary.LittleEndian.Uint64(p.abort.Bytes[8:]); first != 0 {
			rec := DecodeAbortRecord(first)
			t.Errorf("%s: PE %d recorded %s (PE %d, detail %#x)", what, i, rec.CallName(), rec.PE, rec.Detail)
			clear(p.abort.Bytes)
		}
	}
}

func gcRandom(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return b
}

// gcPrepare writes srcs[i] at gcSrc of PE i (or at gcDst, in place) and poisons the destination
// plus a 64-byte guard.
func gcPrepare(t *testing.T, pes [2]*gpuPE, srcs [2][]byte, dstLen int, inplace bool) {
	t.Helper()
	for i, p := range pes {
		ok(t, p.dev.Memset(p.heap.Add(gcDst), gcPoison, dstLen+64))
		off := gcSrc
		if inplace {
			off = gcDst
		}
		ok(t, p.dev.CopyHtoD(p.heap.Add(off), srcs[i]))
	}
}

// gcCheck compares PE i's destination with want (elementwise for ty, NaN == NaN) and its guard.
func gcCheck(t *testing.T, p *gpuPE, i int, what string, ty collType, want []byte, dstLen int) {
	t.Helper()
	got := p.read(t, gcDst, dstLen+64)
	if at, same := sameElems(ty, got[:len(want)], want); !same {
		t.Errorf("%s: PE %d element %d is %#x, want %#x", what, i, at, getU(got[at*ty.size:], ty.size), getU(want[at*ty.size:], ty.size))
	}
	for k := dstLen; k < dstLen+64; k++ {
		if got[k] != gcPoison {
			t.Errorf("%s: PE %d wrote byte %d past its destination", what, i, k-dstLen)
			break
		}
	}
}

func gcAllReduce(t *testing.T, pes [2]*gpuPE, teams *gpuTeams, rets [2]device.Ptr) {
	defer teams.set(t, pes, CollAuto)
	kinds := []struct {
		ty collType
		op int
	}{{collTypes[21], opSum}, {collTypes[15], opMax}, {collTypes[24], opSum}, {collTypes[23], opMin}, {collTypes[18], opXor}}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, algo := range []uint32{CollOneshot, CollTwoshot, CollAuto} {
		teams.set(t, pes, algo)
		for which, k := range kinds {
			for _, n := range []int{0, 1, 1000 + 3, (gcMaxN / k.ty.size)} {
				inplace := n%2 == 1
				var srcs [2][]byte
				for i := range srcs {
					srcs[i] = make([]byte, n*k.ty.size)
					fill(rng, k.ty, srcs[i])
				}
				gcPrepare(t, pes, srcs, n*k.ty.size, inplace)
				what := fmt.Sprintf("%s_%s/algo%d/n%d/inplace%v", k.ty.name, opNames[k.op], algo, n, inplace)
				gcRun(t, pes, rets, what, "cg_reduce", func(i int) []any {
					src := pes[i].heap.Add(gcSrc)
					if inplace {
						src = pes[i].heap.Add(gcDst)
					}
					return []any{int32(TeamWorld), pes[i].heap.Add(gcDst), src, uint64(n), int32(which)}
				})
				want := refReduce(k.ty, k.op, srcs[:], n)
				for i, p := range pes {
					gcCheck(t, p, i, what, k.ty, want, n*k.ty.size)
				}
				// deterministic: both PEs hold the same bits
				if a, b := pes[0].read(t, gcDst, n*k.ty.size), pes[1].read(t, gcDst, n*k.ty.size); !bytes.Equal(a, b) {
					t.Errorf("%s: the PEs' results differ", what)
				}
			}
		}
	}
}

func gcReduceScatter(t *testing.T, pes [2]*gpuPE, rets [2]device.Ptr) {
	ty := collTypes[21] // float
	for _, n := range []int{1, 4096 + 3, 1 << 18} {
		var srcs [2][]byte
		for i := range srcs {
			srcs[i] = make([]byte, 2*n*4)
			for e := 0; e < 2*n; e++ {
				binary.LittleEndian.PutUint32(srcs[i][4*e:], math.Float32bits(float32(rand.NormFloat64())))
			}
		}
		gcPrepare(t, pes, srcs, n*4, false)
		what := fmt.Sprintf("float_sum_reduce_scatter/n%d", n)
		gcRun(t, pes, rets, what, "cg_reduce_scatter", func(i int) []any {
			return []any{int32(TeamWorld), pes[i].heap.Add(gcDst), pes[i].heap.Add(gcSrc), uint64(n)}
		})
		for i, p := range pes {
			want := refReduce(ty, opSum, [][]byte{srcs[0][i*n*4 : (i+1)*n*4], srcs[1][i*n*4 : (i+1)*n*4]}, n)
			gcCheck(t, p, i, what, ty, want, n*4)
		}
	}
}

func gcData(t *testing.T, pes [2]*gpuPE, rets [2]device.Ptr) {
	bytesT := collTypes[7] // uchar: compared byte by byte
	for which, name := range []string{"fcollect", "broadcast", "alltoall", "collect"} {
		for _, n := range []int{0, 1, 4096 + 3, gcMaxN} {
			var srcs [2][]byte
			counts := [2]int{n, n}
			if which == 3 {
				counts[1] = n / 3
			}
			for i := range srcs {
				l := counts[i]
				if which == 2 {
					l = 2 * n
				}
				srcs[i] = gcRandom(l)
			}
			var want [2][]byte
			switch which {
			case 0, 3:
				w := append(append([]byte{}, srcs[0]...), srcs[1]...)
				want = [2][]byte{w, w}
			case 1:
				want = [2][]byte{srcs[1], srcs[1]} // root 1
			case 2:
				want = [2][]byte{append(append([]byte{}, srcs[0][:n]...), srcs[1][:n]...),
					append(append([]byte{}, srcs[0][n:]...), srcs[1][n:]...)}
			}
			gcPrepare(t, pes, srcs, len(want[0]), false)
			what := fmt.Sprintf("%s/n%d", name, n)
			gcRun(t, pes, rets, what, "cg_data", func(i int) []any {
				return []any{int32(TeamShared), pes[i].heap.Add(gcDst), pes[i].heap.Add(gcSrc), uint64(counts[i]), int32(1), int32(which)}
			})
			for i, p := range pes {
				gcCheck(t, p, i, what, bytesT, want[i], len(want[i]))
			}
		}
	}
}

func gcSync(t *testing.T, pes [2]*gpuPE, rets [2]device.Ptr) {
	var bad [2]device.Ptr
	for i, p := range pes {
		bad[i] = p.scratch(t, 8)
		ok(t, p.dev.Memset(p.heap.Add(gcWords), 0, 64))
	}
	const rounds = 200
	gcRun(t, pes, rets, "team sync/barrier", "cg_sync", func(i int) []any {
		return []any{int32(TeamWorld), pes[i].heap.Add(gcWords), uint64(rounds), bad[i]}
	})
	for i, p := range pes {
		if b := p.u64s(t, bad[i], 1)[0]; b != 0 {
			t.Errorf("PE %d: %d times a member's word of the round was not there after the barrier", i, b)
		}
	}
}
