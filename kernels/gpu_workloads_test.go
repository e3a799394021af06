package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device"
)

// GPU tests of the workload object (WorkloadObject for the device's arch): two PEs, one per GPU or
// both on one GPU (each with its own stream; the phases that wait for the other PE take few
// blocks, so both PEs' kernels are resident at once). Skipped without a GPU, failed when
// ROX_TEST_GPU is set and none is found. On the GPU machine:
//
//	here:  CGO_ENABLED=0 go test -c -o .gpu/kernels.test ./kernels
//	there: cd kernels && ROX_TEST_GPU=1 ../.gpu/kernels.test -test.run 'TestGPUGEMM|TestGPUEP' -test.v

// wlPEs loads the workload object on two PEs in ordering mode flags.
func wlPEs(t *testing.T, devs []device.Device, flags uint32) [2]*gpuPE {
	t.Helper()
	_, arch, err := ObjectFor(devs[0].Info().Arch)
	ok(t, err)
	image, err := WorkloadObject(arch)
	ok(t, err)
	return newPEs(t, devs, image, flags)
}

// symBump hands out heap offsets below miscOff, the same on both PEs.
type symBump struct{ off int }

func (b *symBump) take(t *testing.T, n int) int {
	t.Helper()
	o := b.off
	b.off += (n + 255) &^ 255
	if b.off > miscOff {
		t.Fatalf("the workload test's symmetric data (%d bytes) does not fit below %d", b.off, miscOff)
	}
	return o
}

func (p *gpuPE) hostToDev(t *testing.T, b []byte) device.Ptr {
	t.Helper()
	d := p.scratch(t, max(len(b), 8))
	if len(b) > 0 {
		ok(t, p.dev.CopyHtoD(d, b))
	}
	return d
}

func structBytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// worldTeam gives both PEs a team table with the world team, its workspace at off.
func worldTeam(t *testing.T, pes [2]*gpuPE, off, bytes int) {
	for i, p := range pes {
		var tab TeamTable
		tab.Magic, tab.NTeams = TeamMagic, 1
		tab.Team[TeamWorld] = TeamDesc{Start: 0, Stride: 1, Size: 2, MyIndex: int32(i), WSOff: uint64(off), WSBytes: uint64(bytes)}
		p.state.Teams = uint64(p.hostToDev(t, structBytes(&tab)))
		p.push(t)
	}
}

// TestGPUGEMM: gemm.h's fused GEMM + all-reduce (tiles pushed with put-with-signal into the peer's
// heap as they are computed, reduced by waiting on tile signals) and the unfused GEMM + coll.h
// all-reduce, both modes: fused equals unfused bit for bit, both are within float32 rounding of
// a CPU product, and the time per step of each variant and mode is logged (one measurement, not
// asserted: on one GPU both PEs share it).
func TestGPUGEMM(t *testing.T) {
	devs := gpuDevices(t)
	const m, n, k, tile, steps = 1024, 1024, 1024, 64, 10
	rng := rand.New(rand.NewPCG(3, 4))
	var a, b [2][]float32
	for p := 0; p < 2; p++ {
		a[p], b[p] = make([]float32, m*k), make([]float32, k*n)
		for i := range a[p] {
			a[p][i] = float32(rng.NormFloat64())
		}
		for i := range b[p] {
			b[p][i] = float32(rng.NormFloat64())
		}
	}
	// a sample of the float64 reference
	refAt := func(i, j int) float64 {
		s := 0.0
		for p := 0; p < 2; p++ {
			for kk := 0; kk < k; kk++ {
				s += float64(a[p][i*k+kk]) * float64(b[p][kk*n+j])
			}
		}
		return s
	}
	results := map[string][]float32{}
	for _, mode := range []struct {
		name  string
		flags uint32
	}{{"strict", 0}, {"bypass", FlagBypass}} {
		pes := wlPEs(t, devs, mode.flags)
		tiles := (m / tile) * (n / tile)
		var bump symBump
		part, tsig, ack := bump.take(t, 4*2*tiles*tile*tile), bump.take(t, 8*tiles*2), bump.take(t, 8*2)
		cp, c := bump.take(t, 4*m*n), bump.take(t, 4*m*n)
		ws := bump.take(t, TeamWSData+2*256<<10)
		worldTeam(t, pes, ws, TeamWSData+2*256<<10)
		var gp, ap, bp [2]device.Ptr
		for i, p := range pes {
			g := GEMM{M: m, N: n, K: k, TileM: tile, TileN: tile, TM: m / tile, TN: n / tile, Tiles: int32(tiles), Op: GEMMAllReduce,
				Slot: tile * tile, Part: uint64(p.heap) + uint64(part), TSig: uint64(p.heap) + uint64(tsig), Ack: uint64(p.heap) + uint64(ack),
				Stage: uint64(p.scratch(t, 4*tiles*tile*tile))}
			gp[i] = p.hostToDev(t, structBytes(&g))
			ap[i] = p.hostToDev(t, unsafe.Slice((*byte)(unsafe.Pointer(&a[i][0])), 4*len(a[i])))
			bp[i] = p.hostToDev(t, unsafe.Slice((*byte)(unsafe.Pointer(&b[i][0])), 4*len(b[i])))
		}
		fusedOut := [2]device.Ptr{pes[0].scratch(t, 4*m*n), pes[1].scratch(t, 4*m*n)}
		var fused, unfused []time.Duration
		for step := uint64(1); step <= steps; step++ {
			t0 := time.Now()
			for i, p := range pes {
				p.launch(t, "roxgemm_k_fused", tiles, 256, gp[i], ap[i], bp[i], step)
			}
			for i, p := range pes {
				p.launch(t, "roxgemm_k_reduce", tiles, 256, gp[i], fusedOut[i], step)
				p.launch(t, "roxgemm_k_ack", 1, 256, gp[i], step)
			}
			wait(t, pes[0], pes[1])
			fused = append(fused, time.Since(t0))
			t0 = time.Now()
			for i, p := range pes {
				p.launch(t, "roxgemm_k_unfused", tiles, 256, gp[i], ap[i], bp[i], p.heap.Add(cp))
			}
			for _, p := range pes {
				p.launch(t, "roxgemm_k_allreduce", 1, 256, p.heap.Add(c), p.heap.Add(cp), uint64(m*n))
			}
			wait(t, pes[0], pes[1])
			unfused = append(unfused, time.Since(t0))
		}
		for i, p := range pes {
			f, u := make([]byte, 4*m*n), p.read(t, uint64(c), 4*m*n)
			ok(t, p.dev.CopyDtoH(f, fusedOut[i]))
			ff := unsafe.Slice((*float32)(unsafe.Pointer(&f[0])), m*n)
			uu := unsafe.Slice((*float32)(unsafe.Pointer(&u[0])), m*n)
			for e := range ff {
				if math.Float32bits(ff[e]) != math.Float32bits(uu[e]) {
					t.Fatalf("%s PE %d: C[%d][%d] fused %v, unfused %v", mode.name, i, e/n, e%n, ff[e], uu[e])
				}
			}
			for _, e := range []int{0, 1, n + 3, m*n/2 + 17, m*n - 1} {
				if d := math.Abs(float64(ff[e]) - refAt(e/n, e%n)); d > 1e-3*math.Sqrt(float64(2*k)) {
					t.Fatalf("%s PE %d: C[%d][%d] = %v, CPU %v", mode.name, i, e/n, e%n, ff[e], refAt(e/n, e%n))
				}
			}
			results[fmt.Sprintf("%s/%d", mode.name, i)] = ff
		}
		med := func(d []time.Duration) time.Duration { d = slices.Clone(d[2:]); slices.Sort(d); return d[len(d)/2] }
		mn := func(d []time.Duration) time.Duration { return slices.Min(d[2:]) }
		mx := func(d []time.Duration) time.Duration { return slices.Max(d[2:]) }
		t.Logf("%s: %dx%dx%d per PE, %d tiles of %dx%d, 2 PEs on %d GPU(s), steps 3..%d: fused GEMM+push+reduce min/median/max %v/%v/%v; unfused GEMM + coll.h all-reduce (one block) %v/%v/%v",
			mode.name, m, n, k, tiles, tile, tile, len(devs), steps, mn(fused), med(fused), mx(fused), mn(unfused), med(unfused), mx(unfused))
	}
	for i := 0; i < 2; i++ {
		s, b := results[fmt.Sprintf("strict/%d", i)], results[fmt.Sprintf("bypass/%d", i)]
		for e := range s {
			if math.Float32bits(s[e]) != math.Float32bits(b[e]) {
				t.Fatalf("PE %d: C[%d] strict %v, bypass %v: the modes differ", i, e, s[e], b[e])
			}
		}
	}
}
