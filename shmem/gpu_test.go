package shmem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/cuda"
	"github.com/roxamen/roxamen/internal/testkit"
	"github.com/roxamen/roxamen/kernels/testkernels"
	"github.com/roxamen/roxamen/nic"
	"github.com/roxamen/roxamen/tools/launch"
	"github.com/roxamen/roxamen/tools/testjob"
)

// The GPU tests run 2-PE jobs: TestGPU starts this test binary twice under the launcher with
// ROX_GPU_WORKER set, and TestGPUWorker is then one PE. They need a CUDA GPU (two PEs share one
// GPU when there is only one); they skip without, and fail instead under ROX_TEST_GPU (testkit.NeedGPU).

func needGPUs(t *testing.T, n int) {
	t.Helper()
	count, err := cuda.New().Count()
	if err == nil && count >= n {
		return
	}
	testkit.NeedGPU(t, "need %d CUDA GPUs: found %d (%v)", n, count, err)
}

func gpuJob(t *testing.T, limit time.Duration, env ...string) (string, error) {
	t.Helper()
	mps, _ := launch.NodeMPS(2) // a daemon of the job's own where the PEs share a GPU, as roxrun's
	return testjob.Workers{NPEs: 2, Worker: "TestGPUWorker", Marker: "ROX_GPU_WORKER",
		Env: append([]string{"ROX_TIMEOUT=20s"}, env...), Timeout: limit, MPS: mps}.Start()
}

// concurrent reports whether a 2-PE job's PEs run at once: a GPU each, or one shared under MPS
// (a daemon the job starts, or one already serving this process).
func concurrent() bool {
	if n, _ := cuda.New().Count(); n >= 2 {
		return true
	}
	mps, _ := launch.NodeMPS(2)
	return mps.Start || launch.MPSRunning(os.Getenv)
}

func TestGPU(t *testing.T) {
	if os.Getenv("ROX_GPU_WORKER") != "" {
		t.Skip("in a worker")
	}
	needGPUs(t, 1)
	transports := []string{"auto", "tcp"}
	faultEnv := []string{"ROX_GPU_FAULT=1"}
	if !concurrent() {
		// Both PEs share the one GPU, their contexts time-sliced (no MPS): a handoff between them
		// costs about 2 ms, and the load/store path's job hands off thousands of times (minutes).
		// Over the NIC path the job is the same API on few handoffs. Under MPS both run at once.
		t.Log("one GPU, no MPS: both PEs share it time-sliced; the jobs run over ROX_TRANSPORT=tcp only")
		transports = []string{"tcp"}
		faultEnv = append(faultEnv, "ROX_TRANSPORT=tcp")
	}
	for _, ord := range []string{"strict", "bypass"} {
		for _, tr := range transports {
			t.Run(ord+"/"+tr, func(t *testing.T) {
				start := time.Now()
				limit := 75 * time.Second
				if d, err := time.ParseDuration(os.Getenv("ROX_GPU_JOB_LIMIT")); err == nil {
					limit = d
				}
				out, err := gpuJob(t, limit, "ROX_ORDERING="+ord, "ROX_TRANSPORT="+tr, fmt.Sprintf("ROX_GPU_WATCHDOG=%v", limit*3/4))
				t.Logf("job took %v", time.Since(start))
				if err != nil || !strings.Contains(out, "--- PASS: TestGPUWorker") {
					t.Fatalf("job failed: %v\n%s", err, out)
				}
				if testing.Verbose() {
					t.Log(out)
				}
			})
		}
	}
	t.Run("fault", func(t *testing.T) {
		start := time.Now()
		// Where both PEs share the GPU and MPS can run, the fault job runs under a daemon of its
		// own, over the load/store path, as roxrun runs such a job: MPS does not isolate the fault
		// (every client's context fails with it), and the launcher must still name PE 1.
		mps, _ := launch.NodeMPS(2)
		var out string
		var err error
		if mps.Start {
			t.Logf("under CUDA MPS: %s", mps.Why)
			out, err = testjob.Workers{NPEs: 2, Worker: "TestGPUWorker", Marker: "ROX_GPU_WORKER",
				Env: []string{"ROX_TIMEOUT=20s", "ROX_GPU_FAULT=1"}, Timeout: 2 * time.Minute, MPS: mps}.Start()
		} else {
			out, err = gpuJob(t, 2*time.Minute, faultEnv...)
		}
		took := time.Since(start)
		t.Logf("faulting job ended after %v: %v\n%s", took, err, out)
		if err == nil {
			t.Fatal("a job whose PE 1 kernel faults succeeded")
		}
		var ee *launch.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("want a launch.ExitError, got %T %v", err, err)
		}
		if !strings.Contains(out, "CUDA_ERROR_ILLEGAL_ADDRESS") {
			t.Errorf("no PE reported the fault (CUDA_ERROR_ILLEGAL_ADDRESS) in:\n%s", out)
		}
		if mps.Start && ee.PE != 1 {
			t.Errorf("under MPS the launcher names PE %d as the root cause, want PE 1 (whose kernel faulted): %v", ee.PE, err)
		}
		if mps.Start {
			// Each PE's own error names PE 1 too, from the MPS server's log (gpuFault prints it).
			for pe, want := range []string{"PE 1's kernel faulted (the CUDA MPS server's log: ", "this PE's kernel faulted (the CUDA MPS server's log: "} {
				if !outLineHas(out, fmt.Sprintf("[pe %d]", pe), fmt.Sprintf("PE %d: the kernel ended: ", pe), want) {
					t.Errorf("PE %d's own error does not say %q in:\n%s", pe, want, out)
				}
			}
		}
		if took > time.Minute {
			t.Errorf("the job took %v to fail", took)
		}
	})
}

// outLineHas reports whether a line of out holds every one of parts.
func outLineHas(out string, parts ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

// TestGPUWorker is one PE of TestGPU's jobs.
func TestGPUWorker(t *testing.T) {
	if os.Getenv("ROX_GPU_WORKER") == "" {
		t.Skip("run by TestGPU")
	}
	ctx := context.Background()
	w, err := Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	me, peer := w.MyPE(), 1-w.MyPE()
	seed := uint64(time.Now().UnixNano())
	t.Logf("PE %d on %v, ordering %s, seed %d, host-native atomics %v", me, w.Device(), w.Ordering(), seed, w.Device().HostNativeAtomics)
	rng := rand.New(rand.NewPCG(seed, uint64(me))) // data: fresh on every run
	lay := rand.New(rand.NewPCG(7, 11))            // offsets and sizes: the same on every PE
	viaNIC := w.transport != nil

	if d, err := time.ParseDuration(os.Getenv("ROX_GPU_WATCHDOG")); err == nil {
		timer := time.AfterFunc(d, func() { watchdog(w, d) })
		defer timer.Stop()
	}
	img, _, err := testkernels.ObjectFor(w.Device().Arch)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := w.LoadModule(img)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("ROX_GPU_FAULT") != "" {
		gpuFault(t, ctx, w, mod)
		return
	}

	if !viaNIC {
		latencyProbe(t, ctx, w, mod)
	}

	maxSize := 256 << 20
	if viaNIC {
		maxSize = 16 << 20
	}
	const pad = 64
	dst, err := Alloc[byte](w, maxSize+2*pad)
	if err != nil {
		t.Fatal(err)
	}
	src, err := Alloc[byte](w, maxSize+2*pad)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := Alloc[uint64](w, 8)
	if err != nil {
		t.Fatal(err)
	}
	const poison = 0xa5
	sizes := []int{1, 7, 4096 + 3, 1<<20 + 5, maxSize}
	data := make([]byte, maxSize+2*pad)
	fill := func(b []byte) {
		for i := 0; i < len(b); i += 8 {
			v := rng.Uint64()
			for j := i; j < min(i+8, len(b)); j++ {
				b[j] = byte(v >> (8 * (j - i)))
			}
		}
	}
	poisonDst := func(n int) {
		t.Helper()
		p := bytes.Repeat([]byte{poison}, n)
		if err := dst.Put(0, p, me); err != nil {
			t.Fatal(err)
		}
	}
	// check reads this PE's dst and compares [off, off+len(want)) with want and pad bytes on each
	// side with the poison.
	check := func(what string, off int, want []byte) {
		t.Helper()
		lo, hi := max(0, off-pad), min(dst.Len(), off+len(want)+pad)
		got := make([]byte, hi-lo)
		if err := dst.Get(lo, got, me); err != nil {
			t.Fatal(err)
		}
		for i, b := range got {
			a := lo + i
			exp := byte(poison)
			if a >= off && a < off+len(want) {
				exp = want[a-off]
			}
			if b != exp {
				t.Fatalf("%s: byte %d of dst (offset %d, %d bytes at %d) is %#x, want %#x", what, a, a-off, len(want), off, b, exp)
			}
		}
	}
	barrier := func() {
		t.Helper()
		if err := w.BarrierAll(ctx); err != nil {
			t.Fatal(err)
		}
	}

	if gpuPhase("rma") {
		t.Logf("phase: host put/get")
		// Host API: PE 0 puts into PE 1 and PE 1 gets from PE 0, odd offsets, every size.
		for _, n := range sizes {
			off := 1 + 2*lay.IntN(pad/2)
			poisonDst(dst.Len())
			fill(data[:n])
			barrier()
			if me == 0 {
				if err := dst.Put(off, data[:n], peer); err != nil {
					t.Fatal(err)
				}
			}
			barrier()
			// Both PEs learn PE 0's data: PE 1 reads it where it landed.
			var want []byte
			if me == 0 {
				want = data[:n]
				if err := src.Put(off, want, me); err != nil {
					t.Fatal(err)
				}
			}
			barrier()
			if me == 1 {
				want = make([]byte, n)
				if err := src.Get(off, want, peer); err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprintf("host Put of %d bytes", n), off, want)
			}
			barrier()
		}

		t.Logf("phase: host AMOs")
		// Host AMOs on the peer's word: every op, 4 and 8 bytes, against a model.
		words, err := Alloc[uint64](w, 8)
		if err != nil {
			t.Fatal(err)
		}
		w32, err := As[uint32](words.Mem())
		if err != nil {
			t.Fatal(err)
		}
		if me == 0 {
			model := uint64(0)
			for i := 0; i < 200; i++ {
				op := nic.AMOOp(rng.IntN(8))
				v, c := rng.Uint64(), model
				if rng.IntN(2) == 0 {
					c = rng.Uint64()
				}
				old, err := w.amo("test", peer, op, 8, words.off, v, c)
				if err != nil {
					t.Fatal(err)
				}
				if op != nic.AMOSet && old != model {
					t.Fatalf("8-byte %v #%d returned %#x, the model holds %#x", op, i, old, model)
				}
				model = applyModel(op, model, v, c, 8)
				m32 := uint64(0)
				if got, _ := AtomicFetch(w32, 2, peer); uint64(got) != m32 {
					t.Fatalf("an 8-byte AMO on element 0 changed element 2 to %#x", got)
				}
			}
			if got, _ := AtomicFetch(words, 0, peer); got != model {
				t.Fatalf("after the AMOs the word is %#x, the model holds %#x", got, model)
			}
			m32 := uint64(0)
			for i := 0; i < 200; i++ {
				op := nic.AMOOp(rng.IntN(8))
				v, c := uint64(rng.Uint32()), m32
				if rng.IntN(2) == 0 {
					c = uint64(rng.Uint32())
				}
				old, err := w.amo("test", peer, op, 4, w32.off+12, v, c)
				if err != nil {
					t.Fatal(err)
				}
				if op != nic.AMOSet && old != m32 {
					t.Fatalf("4-byte %v #%d returned %#x, the model holds %#x", op, i, old, m32)
				}
				m32 = applyModel(op, m32, v, c, 4)
			}
		}
		barrier()
		// Host contention: both PEs fetch-add PE 0's word.
		if err := AtomicSet(words, 4, 0, 0); err != nil {
			t.Fatal(err)
		}
		barrier()
		for i := 0; i < 300; i++ {
			if err := AtomicAdd(words, 4, 1, 0); err != nil {
				t.Fatal(err)
			}
		}
		barrier()
		if got, _ := AtomicFetch(words, 4, 0); got != 600 {
			t.Fatalf("2 PEs x 300 host fetch-adds left %d, want 600", got)
		}

		t.Logf("phase: host put-with-signal")
		// Host put-with-signal.
		for round := uint64(1); round <= 3; round++ {
			n := sizes[lay.IntN(len(sizes))]
			poisonDst(dst.Len())
			barrier()
			off := 1 + 2*lay.IntN(pad/2)
			if me == 0 {
				fill(data[:n])
				if err := PutSignal(dst, off, data[:n], sig, 0, round, SignalSet, peer); err != nil {
					t.Fatal(err)
				}
				if err := src.Put(0, data[:n], me); err != nil {
					t.Fatal(err)
				}
			} else {
				if _, err := SignalWaitUntil(ctx, sig, 0, CmpEQ, round); err != nil {
					t.Fatal(err)
				}
			}
			barrier()
			if me == 1 {
				want := make([]byte, n)
				if err := src.Get(0, want, peer); err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprintf("PutSignal of %d bytes", n), off, want)
			}
			barrier()
		}

		t.Logf("phase: device RMA")
		// Device API: PE 0's kernel puts (or gets) with one thread, a warp and a block, on every path.
		groups := []struct {
			name         string
			group, block int
		}{{"thread", 0, 1}, {"warp", 1, 32}, {"block", 2, 256}}
		ops := []string{"putmem", "getmem", "putmem_ce", "putmem_signal"}
		round := uint64(100)
		for op, opName := range ops {
			for _, g := range groups {
				for _, n := range sizes {
					if op == 2 && g.group == 1 {
						continue
					}
					if g.group == 0 && n > 1<<20+5 && op != 2 {
						n = 1<<20 + 5 // one thread moving 256 MiB byte by byte takes too long
					}
					round++
					t.Logf("phase: device %s %s %d", opName, g.name, n)
					what := fmt.Sprintf("device %s by a %s, %d bytes", opName, g.name, n)
					off := 1 + 2*lay.IntN(pad/2)
					poisonDst(dst.Len())
					// PE 0's src holds the data; for getmem PE 1's kernel reads PE 0's src.
					if me == 0 {
						fill(data[:n])
						if err := src.Put(off, data[:n], me); err != nil {
							t.Fatal(err)
						}
					}
					barrier()
					runner := 0
					if op == 1 {
						runner = 1
					}
					if me == runner {
						err := mod.Launch("roxg_t_rma", device.D1(1), device.D1(g.block), 0,
							dst.Device().Add(off), src.Device().Add(off), uint64(n), int32(1-me), int32(g.group), int32(op),
							sig.Device(), round)
						if err == nil {
							err = mod.Sync(ctx)
						}
						if err != nil {
							t.Fatalf("%s: %v", what, err)
						}
					}
					if op == 3 && me == 1 {
						if _, err := SignalWaitUntil(ctx, sig, 0, CmpEQ, round); err != nil {
							t.Fatalf("%s: %v", what, err)
						}
					}
					barrier()
					if me == 1 {
						want := make([]byte, n)
						if err := src.Get(off, want, peer); err != nil {
							t.Fatal(err)
						}
						check(what, off, want)
					}
					barrier()
				}
			}
		}

		t.Logf("phase: device AMO contention")
		// AMO atomicity under contention from every SM of both GPUs, on PE 0's words.
		ctr, err := Alloc[uint64](w, 8)
		if err != nil {
			t.Fatal(err)
		}
		ctr32, _ := As[uint32](ctr.Mem())
		grid, block := w.Device().Multiprocessors, 128
		iters, casIters := 20, 2
		if viaNIC {
			grid, block, iters, casIters = 2, 32, 5, 1
		}
		barrier()
		if err := mod.Launch("roxg_t_amo", device.D1(grid), device.D1(block), 0, ctr.Device(), ctr32.Device().Add(8*4), ctr.Device().Add(16*8/8*1), int32(0), uint32(iters), uint32(casIters)); err != nil {
			t.Fatal(err)
		}
		if err := mod.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		barrier()
		if me == 0 {
			want := uint64(2 * grid * block * iters)
			if got, _ := AtomicFetch(ctr, 0, me); got != want {
				t.Errorf("64-bit adds: %d, want %d", got, want)
			}
			if got, _ := AtomicFetch(ctr32, 8, me); uint64(got) != want {
				t.Errorf("32-bit fetch-adds: %d, want %d", got, want)
			}
			if got, _ := AtomicFetch(ctr, 2, me); got != uint64(2*grid*block*casIters) {
				t.Errorf("compare-and-swap increments: %d, want %d", got, 2*grid*block*casIters)
			}
		}
		barrier()

		t.Logf("phase: CE/LS ordering")
		// Put-with-signal and quiet/fence ordering when copy-engine and load/store transfers mix.
		if !viaNIC {
			bigN, smallN := 8<<20+3, 4096+1
			for r := uint64(1); r <= 6; r++ {
				useFence := int32(r % 2)
				poisonDst(dst.Len())
				if me == 0 {
					fill(data[:bigN+smallN])
					if err := src.Put(0, data[:bigN+smallN], me); err != nil {
						t.Fatal(err)
					}
				}
				barrier()
				rr := 1000 + r
				if me == 0 {
					err := mod.Launch("roxg_t_mix", device.D1(1), device.D1(1), 0, dst.Device(), src.Device(), uint64(bigN),
						dst.Device().Add(bigN+pad), src.Device().Add(bigN), uint64(smallN), sig.Device(), rr, int32(peer), useFence)
					if err == nil {
						err = mod.Sync(ctx)
					}
					if err != nil {
						t.Fatal(err)
					}
				} else {
					// The signal is the only synchronization: the data must be there when it is.
					if _, err := SignalWaitUntil(ctx, sig, 0, CmpEQ, rr); err != nil {
						t.Fatal(err)
					}
					got := make([]byte, bigN+pad+smallN)
					if err := dst.Get(0, got, me); err != nil {
						t.Fatal(err)
					}
					want := make([]byte, bigN+smallN)
					if err := src.Get(0, want, peer); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got[:bigN], want[:bigN]) {
						t.Fatalf("round %d (fence=%d): the copy-engine data was not there when the signal was", r, useFence)
					}
					if !bytes.Equal(got[bigN+pad:], want[bigN:]) {
						t.Fatalf("round %d: the put-with-signal data was not there when the signal was", r)
					}
				}
				barrier()
			}
		}

	}
	if viaNIC {
		// Does a kernel see a word that the host CPU writes into the host-mapped heap?
		probe, _ := sig.Slice(4, 1)
		p := (*uint64)(unsafe.Pointer(&w.local[probe.off]))
		atomic.StoreUint64(p, 0)
		if err := mod.Launch("roxg_t_wait", device.D1(1), device.D1(1), 0, probe.Device(), uint64(1)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		atomic.StoreUint64(p, 1)
		t0 := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := mod.Sync(cctx)
		cancel()
		t.Logf("visibility probe: a kernel waiting on a host-heap word the CPU set: %v after %v", err, time.Since(t0))
	}
	if gpuPhase("ctx") {
		gpuCtxPhase(t, ctx, w, mod, dst, src) // gpu_ctx_test.go
	}
	t.Logf("phase: stream-ordered")
	// Stream-ordered: PE 0 puts with signal on a stream, PE 1's stream waits for the signal and then
	// puts the data back; PE 0 waits on its stream and checks.
	n := 1<<20 + 3
	poisonDst(dst.Len())
	if me == 0 {
		fill(data[:n])
		if err := src.Put(0, data[:n], me); err != nil {
			t.Fatal(err)
		}
	}
	if err := AtomicSet(sig, 1, 0, me); err != nil {
		t.Fatal(err)
	}
	barrier()
	st := mod.Stream()
	if me == 0 {
		if err := PutSignalOnStream(st, dst, 1, src.Device(), n, sig, 1, 7, SignalSet, peer); err != nil {
			t.Fatal(err)
		}
		if err := SignalWaitOnStream(st, sig, 1, CmpEQ, 8); err != nil {
			t.Fatal(err)
		}
	} else {
		if err := SignalWaitOnStream(st, sig, 1, CmpEQ, 7); err != nil {
			t.Fatal(err)
		}
		if err := PutOnStream(st, dst, 3, dst.Device().Add(1), n, peer); err != nil {
			t.Fatal(err)
		}
		if err := w.QuietOnStream(st); err != nil {
			t.Fatal(err)
		}
		if err := PutSignalOnStream(st, dst, 0, dst.Device(), 0, sig, 1, 8, SignalSet, peer); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.BarrierOnStream(st); err != nil {
		t.Fatal(err)
	}
	if err := w.SyncStream(ctx, st); err != nil {
		t.Fatal(err)
	}
	if me == 0 {
		check("stream-ordered round trip", 3, data[:n])
	}
	barrier()

	if err := mod.Unload(); err != nil {
		t.Fatal(err)
	}
	if err := w.Finalize(); err != nil {
		t.Fatal(err)
	}
}

// gpuPhase reports whether the worker runs the named group of checks (ROX_GPU_PHASES, a
// comma-separated list; unset: all).
func gpuPhase(name string) bool {
	v := os.Getenv("ROX_GPU_PHASES")
	return v == "" || strings.Contains(","+v+",", ","+name+",")
}

func applyModel(op nic.AMOOp, cur, v, c uint64, width int) uint64 {
	mask := ^uint64(0)
	if width == 4 {
		mask = 0xffffffff
	}
	v, c = v&mask, c&mask
	switch op {
	case nic.AMOSet, nic.AMOSwap:
		return v
	case nic.AMOCompareSwap:
		if cur == c {
			return v
		}
	case nic.AMOFetchAdd:
		return (cur + v) & mask
	case nic.AMOFetchAnd:
		return cur & v
	case nic.AMOFetchOr:
		return cur | v
	case nic.AMOFetchXor:
		return cur ^ v
	}
	return cur
}

// gpuFault: PE 1's kernel faults; PE 0's kernel waits for a word PE 1 never sets. Both must end
// with an error (PE 0 because PE 1 died), not hang.
func gpuFault(t *testing.T, ctx context.Context, w *World, mod *Module) {
	word, err := Alloc[uint64](w, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.BarrierAll(ctx); err != nil {
		t.Fatal(err)
	}
	if w.MyPE() == 1 {
		err = mod.Launch("roxg_t_fault", device.D1(1), device.D1(1), 0, uint64(8))
	} else {
		err = mod.Launch("roxg_t_wait", device.D1(1), device.D1(1), 0, word.Device(), uint64(1))
	}
	if err == nil {
		err = mod.Sync(ctx)
	}
	t.Fatalf("PE %d: the kernel ended: %v", w.MyPE(), err)
}

// latencyProbe logs the one-way ping-pong latency of each roxg_b_pingpong variant (a measurement
// for the notes, not a check).
func latencyProbe(t *testing.T, ctx context.Context, w *World, mod *Module) {
	words, err := Alloc[uint64](w, 16)
	if err != nil {
		t.Fatal(err)
	}
	me := w.MyPE()
	const iters = 20000
	for _, v := range []int32{0, 1, 2, 0} {
		for _, n := range []uint64{1000, iters} {
			if err := w.BarrierAll(ctx); err != nil {
				t.Fatal(err)
			}
			if err := words.P(0, 0, me); err != nil {
				t.Fatal(err)
			}
			if err := w.BarrierAll(ctx); err != nil {
				t.Fatal(err)
			}
			init := int32(0)
			if me == 0 {
				init = 1
			}
			if err := mod.Launch("roxg_b_pingpong", device.D1(1), device.D1(1), 0, words.Device(), n, int32(1-me), init, v, words.Device().Add(64)); err != nil {
				t.Fatal(err)
			}
			if err := mod.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if n == iters && me == 0 {
				ns, _ := words.G(8, me)
				t.Logf("latency probe variant %d (%s): %.3f us one way", v, w.Ordering(), float64(ns)/1e3/float64(2*n))
			}
		}
	}
}

// watchdog prints this PE's goroutines and its ring's state, then ends the process: a job that
// hangs shows where.
func watchdog(w *World, after time.Duration) {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	fmt.Fprintf(os.Stderr, "PE %d: watchdog after %v\n", w.pe, after)
	if s := w.gpu.RingState(); s != "" {
		fmt.Fprintf(os.Stderr, "PE %d: %s\n", w.pe, s)
	}
	os.Stderr.Write(buf[:n])
	os.Exit(3)
}
