package kernels_test

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/cuda"
	"github.com/roxamen/roxamen/internal/testkit"
	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/shmem/ep"
	"github.com/roxamen/roxamen/shmem/ep/eptest"
)

// TestGPUEP runs ep.h's dispatch and combine from the workload object on the GPU: two PEs (one
// per GPU, or both on one GPU with a stream each), DeepSeek-V3's token shape, both modes, both
// ROX_ORDERING modes, two calls per buffer, checked against shmem/ep's host reference as
// TestEPDeviceHost checks the CPU build. Skipped without a GPU, failed when ROX_TEST_GPU is set and
// none is found. Built and run like the kernels' other GPU tests (gpu_workloads_test.go).
func TestGPUEP(t *testing.T) {
	drv := cuda.New()
	n, err := drv.Count()
	if err == nil && n == 0 {
		err = fmt.Errorf("no CUDA device")
	}
	if err != nil {
		testkit.NeedGPU(t, "no GPU: %v", err)
	}
	n = min(n, 2)
	var devs []device.Device
	for i := 0; i < n; i++ {
		d, err := drv.Open(i)
		must(t, err)
		t.Cleanup(func() { d.Close() })
		devs = append(devs, d)
	}
	if n == 2 {
		must(t, devs[0].EnablePeerAccess(devs[1].Info()))
		must(t, devs[1].EnablePeerAccess(devs[0].Info()))
	}
	_, arch, err := kernels.ObjectFor(devs[0].Info().Arch)
	must(t, err)
	image, err := kernels.WorkloadObject(arch)
	must(t, err)
	for _, mode := range []ep.Mode{ep.LowLatency, ep.Normal} {
		for _, bypass := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/bypass=%v", mode, bypass), func(t *testing.T) {
				m := 128
				if mode == ep.Normal {
					m = 256
				}
				cfg := ep.Config{Hidden: 7168, TopK: 8, Experts: 16, MaxTokens: m, DType: ep.DTypeBF16, Mode: mode}
				runGPUEP(t, devs, image, cfg, bypass)
			})
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type gpuEPPE struct {
	dev                            device.Device
	mod                            device.Module
	stream                         device.Stream
	heap                           device.Ptr
	hoff                           int
	abort                          device.HostBuffer
	e                              kernels.EP
	eDev                           device.Ptr
	x, idx, w, y, ox, osrc, ow, oc device.Ptr
}

const gpuEPHeap = 256 << 20

func (p *gpuEPPE) sym(t *testing.T, n int) uint64 {
	o := p.hoff
	p.hoff += (n + 255) &^ 255
	if p.hoff > gpuEPHeap-kernels.BarrierBytes {
		t.Fatalf("heap of %d bytes too small", gpuEPHeap)
	}
	return uint64(p.heap) + uint64(o)
}

func (p *gpuEPPE) loc(t *testing.T, n int) device.Ptr {
	b, err := p.dev.Alloc(max(n, 8))
	must(t, err)
	t.Cleanup(func() { p.dev.Free(b) })
	must(t, p.dev.Memset(b, 0, max(n, 8)))
	return b
}

func (p *gpuEPPE) launch(t *testing.T, name string, grid int, args ...any) {
	t.Helper()
	fn, err := p.mod.Function(name)
	must(t, err)
	must(t, p.stream.Launch(fn, device.D1(grid), device.D1(256), 0, args...))
}

func (p *gpuEPPE) get(t *testing.T, at device.Ptr, n int) []byte {
	b := make([]byte, max(n, 1))
	if n > 0 {
		must(t, p.dev.CopyDtoH(b[:n], at))
	}
	return b[:n]
}

func (p *gpuEPPE) i32(t *testing.T, at uint64, n int) []int32 {
	b := p.get(t, device.Ptr(at), 4*n)
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), n)
}

func syncAll(t *testing.T, pes []*gpuEPPE) {
	t.Helper()
	done := make(chan error, len(pes))
	for _, p := range pes {
		go func() { done <- p.stream.Synchronize() }()
	}
	timeout := time.After(60 * time.Second)
	for i := range pes {
		select {
		case err := <-done:
			must(t, err)
		case <-timeout:
			for _, p := range pes {
				atomic.StoreUint64((*uint64)(unsafe.Pointer(&p.abort.Bytes[0])), 0xdead)
			}
			for ; i < len(pes); i++ {
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					fmt.Fprintf(os.Stderr, "%s: a kernel ignored the abort word\n", t.Name())
					os.Exit(3)
				}
			}
			t.Fatal("ep kernels did not finish in 60 s (abort word set)")
		}
	}
	for i, p := range pes {
		if r := (*kernels.Abort)(unsafe.Pointer(&p.abort.Bytes[0])); r.First != 0 {
			d := kernels.DecodeAbortRecord(r.First)
			t.Fatalf("PE %d recorded %s PE %d detail %#x", i, d.CallName(), d.PE, d.Detail)
		}
	}
}

func runGPUEP(t *testing.T, devs []device.Device, image []byte, cfg ep.Config, bypass bool) {
	const npes, blocks = 2, 16
	P, M, K, E, H := npes, cfg.MaxTokens, cfg.TopK, cfg.Experts, cfg.Hidden
	es := 2
	pay := align8(H * es)
	row := align8(pay + 8*K + 4)
	pes := make([]*gpuEPPE, npes)
	for i := range pes {
		p := &gpuEPPE{dev: devs[i%len(devs)]}
		var err error
		p.heap, err = p.dev.Alloc(gpuEPHeap)
		must(t, err)
		t.Cleanup(func() { p.dev.Free(p.heap) })
		must(t, p.dev.Memset(p.heap, 0, gpuEPHeap))
		p.abort, err = p.dev.AllocHost(int(unsafe.Sizeof(kernels.Abort{})))
		must(t, err)
		t.Cleanup(func() { p.dev.FreeHost(p.abort) })
		clear(p.abort.Bytes)
		p.mod, err = p.dev.LoadModule(image)
		must(t, err)
		t.Cleanup(func() { p.mod.Unload() })
		p.stream, err = p.dev.NewStream()
		must(t, err)
		t.Cleanup(func() { p.stream.Destroy() })
		pes[i] = p
	}
	for i, p := range pes {
		st := kernels.State{Magic: kernels.StateMagic, Version: kernels.StateVersion, MyPE: int32(i), NPEs: npes,
			HeapBase: uint64(p.heap), HeapSize: gpuEPHeap, Abort: uint64(p.abort.Dev), BarrierOff: gpuEPHeap - kernels.BarrierBytes}
		if bypass {
			st.Flags |= kernels.FlagBypass
		}
		for q := range pes {
			st.PeerBase[q] = uint64(pes[q].heap)
		}
		sp, _, err := p.mod.Global(kernels.StateSymbol)
		must(t, err)
		must(t, p.dev.CopyHtoD(sp, kernels.StateBytes(&st)))
		mode := int32(kernels.EPNormal)
		if cfg.Mode == ep.LowLatency {
			mode = kernels.EPLowLatency
		}
		p.e = kernels.EP{Hidden: int32(H), TopK: int32(K), Experts: int32(E), MaxTokens: int32(M), Local: int32(E / P), ESize: int32(es),
			Mode: mode, Payload: uint32(pay), RowBytes: uint32(row)}
		p.e.Recv, p.e.Comb = p.sym(t, P*M*row), p.sym(t, P*M*H*es)
		p.e.Layout, p.e.Sig = p.sym(t, P*(P+E)*8), p.sym(t, kernels.EPSignals*P*8)
		for _, f := range []struct {
			at *uint64
			n  int
		}{{&p.e.Stage, P * M * row}, {&p.e.CStage, P * M * H * es}, {&p.e.NSent, 4 * P}, {&p.e.Sent, 4 * P * M},
			{&p.e.SlotOf, 4 * M * P}, {&p.e.PerExpert, 8 * E}, {&p.e.Counts, 4 * P}, {&p.e.Start, 4 * P},
			{&p.e.ECount, 4 * (E / P)}, {&p.e.EOff, 4 * (E/P + 1)}, {&p.e.OutRow, 4 * P * M * K}, {&p.e.OutW, 4 * P * M * K},
			{&p.e.Rows, 4}, {&p.e.Arrived, 8 * P}, {&p.e.CArrived, 8 * P},
			{&p.e.Scratch, 4 * (P*M*K + kernels.EPMaxBlocks*E/P)}} {
			*f.at = uint64(p.loc(t, f.n))
		}
		p.eDev = p.loc(t, int(unsafe.Sizeof(p.e)))
		must(t, p.dev.CopyHtoD(p.eDev, unsafe.Slice((*byte)(unsafe.Pointer(&p.e)), unsafe.Sizeof(p.e))))
		p.x, p.idx, p.w = p.loc(t, M*H*es), p.loc(t, 8*M*K), p.loc(t, 4*M*K)
		p.y, p.ox = p.loc(t, P*M*K*H*es), p.loc(t, P*M*K*H*es)
		p.osrc, p.ow, p.oc = p.loc(t, 12*P*M*K), p.loc(t, 4*P*M*K), p.loc(t, M*H*es)
	}
	for c, kind := range []eptest.Kind{eptest.Random, eptest.Full} {
		epoch := uint64(c + 1)
		ins := make([]eptest.Input, npes)
		for i, p := range pes {
			ins[i] = eptest.Gen(cfg, npes, i, uint64(77+c), kind)
			if b := tokBytes(cfg, ins[i].X); len(b) > 0 {
				must(t, p.dev.CopyHtoD(p.x, b))
				must(t, p.dev.CopyHtoD(p.idx, unsafe.Slice((*byte)(unsafe.Pointer(&ins[i].Idx[0])), 8*len(ins[i].Idx))))
				must(t, p.dev.CopyHtoD(p.w, unsafe.Slice((*byte)(unsafe.Pointer(&ins[i].Weights[0])), 4*len(ins[i].Weights))))
			}
		}
		t0 := time.Now()
		each := func(f func(i int, p *gpuEPPE)) {
			for i, p := range pes {
				f(i, p)
			}
		}
		each(func(i int, p *gpuEPPE) { p.launch(t, "roxep_k_route", 1, p.eDev, p.idx, int32(ins[i].N)) })
		if cfg.Mode == ep.Normal {
			each(func(i int, p *gpuEPPE) { p.launch(t, "roxep_k_normal_layout", 1, p.eDev, epoch) })
		}
		each(func(i int, p *gpuEPPE) { p.launch(t, "roxep_k_dispatch_send", blocks, p.eDev, p.x, p.idx, p.w, epoch) })
		each(func(i int, p *gpuEPPE) { p.launch(t, "roxep_k_dispatch_recv_count", blocks, p.eDev, epoch) })
		each(func(i int, p *gpuEPPE) { p.launch(t, "roxep_k_dispatch_recv_scan", 1, p.eDev, int32(blocks)) })
		each(func(i int, p *gpuEPPE) { p.launch(t, "roxep_k_dispatch_recv_copy", blocks, p.eDev, p.ox, p.osrc, p.ow) })
		each(func(i int, p *gpuEPPE) { p.launch(t, "roxep_k_dispatch_ack", 1, p.eDev, epoch) })
		syncAll(t, pes)
		dispatch := time.Since(t0)
		for i, p := range pes {
			L := E / P
			rows := int(p.i32(t, p.e.Rows, 1)[0])
			r := &ep.Recv{Rows: rows, Counts: make([]int, L), Offsets: make([]int, L+1), Transfers: make([]int, P)}
			for l, v := range p.i32(t, p.e.ECount, L) {
				r.Counts[l] = int(v)
			}
			for l, v := range p.i32(t, p.e.EOff, L+1) {
				r.Offsets[l] = int(v)
			}
			for s, v := range p.i32(t, p.e.Counts, P) {
				r.Transfers[s] = int(v)
			}
			r.X = tokensFrom(cfg, p.get(t, p.ox, rows*H*es), rows*H)
			src := p.i32(t, uint64(p.osrc), 3*rows)
			wb := p.get(t, p.ow, 4*rows)
			for j := 0; j < rows; j++ {
				r.Src = append(r.Src, ep.Source{PE: int(src[3*j]), Token: int(src[3*j+1]), K: int(src[3*j+2])})
				r.Weights = append(r.Weights, *(*float32)(unsafe.Pointer(&wb[4*j])))
				l := 0
				for l+1 < L && r.Offsets[l+1] <= j {
					l++
				}
				r.Experts = append(r.Experts, i*L+l)
			}
			if err := eptest.CheckDispatch(cfg, ins, i, r); err != nil {
				t.Fatalf("call %d PE %d: %v", c+1, i, err)
			}
			if y := tokBytes(cfg, eptest.Apply(cfg, r)); len(y) > 0 {
				must(t, p.dev.CopyHtoD(p.y, y))
			}
		}
		t0 = time.Now()
		each(func(i int, p *gpuEPPE) { p.launch(t, "roxep_k_combine_send", blocks, p.eDev, p.y, epoch) })
		each(func(i int, p *gpuEPPE) {
			p.launch(t, "roxep_k_combine_recv", blocks, p.eDev, p.oc, int32(ins[i].N), epoch)
		})
		each(func(i int, p *gpuEPPE) { p.launch(t, "roxep_k_combine_ack", 1, p.eDev, epoch) })
		syncAll(t, pes)
		combine := time.Since(t0)
		for i, p := range pes {
			want := tokBytes(cfg, eptest.Combined(cfg, npes, ins[i]))
			got := p.get(t, p.oc, len(want))
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("call %d PE %d: Combine byte %d (token %d) is %#x, want %#x", c+1, i, j, j/(H*es), got[j], want[j])
				}
			}
		}
		t.Logf("call %d (%s, %d and %d tokens): dispatch %v, combine %v (host wall time around the launches, one run)", c+1, kind, ins[0].N, ins[1].N, dispatch, combine)
	}
}
