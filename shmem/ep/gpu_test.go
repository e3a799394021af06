package ep_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/cuda"
	"github.com/roxamen/roxamen/internal/testkit"
	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
	"github.com/roxamen/roxamen/shmem/ep/eptest"
	"github.com/roxamen/roxamen/tools/launch"
	"github.com/roxamen/roxamen/tools/testjob"
)

// TestGPU runs shmem/ep on the GPU: per ROX_ORDERING mode a 2-PE job of this test binary under the
// launcher, TestGPUWorker being one PE (one GPU each, or both PEs sharing one GPU, time-sliced:
// about 2.5 ms per handoff between them, so the calls are few and small, DeepSeek-V3's hidden size
// once). Every result is checked against eptest's host reference: the rows, their order,
// weights and sources, and the combined sums bit for bit. Skipped without a CUDA GPU, failed
// instead under ROX_TEST_GPU.
func TestGPU(t *testing.T) {
	if os.Getenv("ROX_EP_GPU_WORKER") != "" {
		t.Skip("in a worker")
	}
	n, err := cuda.New().Count()
	if err == nil && n == 0 {
		err = errors.New("no CUDA device")
	}
	if err != nil {
		testkit.NeedGPU(t, "no GPU: %v", err)
	}
	for _, ord := range []string{"strict", "bypass"} {
		t.Run(ord, func(t *testing.T) {
			start := time.Now()
			s := testjob.Workers{NPEs: 2, Worker: "TestGPUWorker", Marker: "ROX_EP_GPU_WORKER",
				Env: []string{"ROX_TIMEOUT=30s", "ROX_ORDERING=" + ord}, Timeout: 4 * time.Minute,
				MPS: launch.JobMPS(2)}.Run(t) // where the PEs share a GPU, at once under MPS as roxrun runs them
			t.Logf("job took %v", time.Since(start))
			t.Log(s)
		})
	}
}

func tokBytes(cfg ep.Config, x ep.Tokens) []byte {
	if cfg.DType == ep.DTypeBF16 {
		if len(x.BF16) == 0 {
			return nil
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(&x.BF16[0])), 2*len(x.BF16))
	}
	if len(x.F32) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x.F32[0])), 4*len(x.F32))
}

func esize(cfg ep.Config) int {
	if cfg.DType == ep.DTypeBF16 {
		return 2
	}
	return 4
}

// gpuPE is one PE's buffer and its device-resident inputs (symmetric arrays: device memory of
// this PE's GPU that the test can fill from the host).
type gpuPE struct {
	t        *testing.T
	ctx      context.Context
	w        *shmem.World
	st       device.Stream
	cfg      ep.Config
	buf      *ep.Buffer
	x, y     shmem.Sym[byte]
	idx      shmem.Sym[int64]
	wt       shmem.Sym[float32]
	me, npes int
}

func (p *gpuPE) must(err error) {
	p.t.Helper()
	if err != nil {
		p.t.Fatalf("PE %d %v/%v: %v", p.me, p.cfg.Mode, p.cfg.DType, err)
	}
}

func newGPUPE(t *testing.T, ctx context.Context, w *shmem.World, st device.Stream, cfg ep.Config) *gpuPE {
	p := &gpuPE{t: t, ctx: ctx, w: w, st: st, cfg: cfg, me: w.MyPE(), npes: w.NPEs()}
	var err error
	p.buf, err = ep.New(w, cfg)
	p.must(err)
	es, M, K := esize(cfg), cfg.MaxTokens, cfg.TopK
	p.x, err = shmem.Alloc[byte](w, M*cfg.Hidden*es)
	p.must(err)
	p.y, err = shmem.Alloc[byte](w, p.buf.MaxRows()*cfg.Hidden*es)
	p.must(err)
	p.idx, err = shmem.Alloc[int64](w, M*K)
	p.must(err)
	p.wt, err = shmem.Alloc[float32](w, M*K)
	p.must(err)
	return p
}

func (p *gpuPE) free() {
	p.must(errors.Join(p.buf.Free(), p.w.Free(p.x.Mem()), p.w.Free(p.y.Mem()), p.w.Free(p.idx.Mem()), p.w.Free(p.wt.Mem())))
}

// load copies in to the device inputs.
func (p *gpuPE) load(in eptest.Input) {
	if in.N == 0 {
		return
	}
	p.must(p.x.Put(0, tokBytes(p.cfg, in.X), p.me))
	p.must(p.idx.Put(0, in.Idx, p.me))
	p.must(p.wt.Put(0, in.Weights, p.me))
}

func (p *gpuPE) dispatchOnStream(in eptest.Input) (*ep.DeviceRecv, *ep.Handle, error) {
	p.load(in)
	return p.buf.DispatchOnStream(p.st, ep.DeviceTokens{Ptr: p.x.Device(), Rows: in.N}, p.idx.Device(), p.wt.Device())
}

// call runs one Dispatch and one Combine on every PE and checks both against the reference of
// ins (ref: the inputs the PEs' calls amount to); stream picks the stream-ordered forms, and
// blockingCombine a blocking Combine after a stream-ordered Dispatch.
func (p *gpuPE) call(ins []eptest.Input, stream, blockingCombine bool) {
	p.t.Helper()
	cfg, in := p.cfg, ins[p.me]
	var r *ep.Recv
	var h *ep.Handle
	if stream {
		dr, hh, err := p.dispatchOnStream(in)
		p.must(err)
		if dr.X.Rows != p.buf.MaxRows() {
			p.t.Fatalf("DeviceRecv.X has room for %d rows, want MaxRows %d", dr.X.Rows, p.buf.MaxRows())
		}
		p.must(p.w.SyncStream(p.ctx, p.st))
		r, err = ep.FetchRecv(p.buf)
		p.must(err)
		h = hh
	} else {
		var err error
		r, h, err = p.buf.Dispatch(p.ctx, in.X, in.Idx, in.Weights)
		p.must(err)
	}
	if err := eptest.CheckDispatch(cfg, ins, p.me, r); err != nil {
		p.t.Fatalf("PE %d %v/%v stream=%v: %v", p.me, cfg.Mode, cfg.DType, stream, err)
	}
	y := eptest.Apply(cfg, r)
	var out ep.Tokens
	if stream && !blockingCombine {
		if b := tokBytes(cfg, y); len(b) > 0 {
			p.must(p.y.Put(0, b, p.me))
		}
		o, err := p.buf.CombineOnStream(p.st, ep.DeviceTokens{Ptr: p.y.Device(), Rows: p.buf.MaxRows()}, h)
		p.must(err)
		p.must(p.w.SyncStream(p.ctx, p.st))
		out, err = ep.FetchOut(p.buf, o)
		p.must(err)
	} else {
		var err error
		out, err = p.buf.Combine(p.ctx, y, h)
		p.must(err)
	}
	if err := eptest.CheckCombine(cfg, p.npes, in, out); err != nil {
		p.t.Fatalf("PE %d %v/%v stream=%v: %v", p.me, cfg.Mode, cfg.DType, stream, err)
	}
}

func gen(cfg ep.Config, npes int, seed uint64, kind eptest.Kind) []eptest.Input {
	ins := make([]eptest.Input, npes)
	for pe := range ins {
		ins[pe] = eptest.Gen(cfg, npes, pe, seed, kind)
	}
	return ins
}

// TestGPUWorker is one PE of TestGPU's jobs.
func TestGPUWorker(t *testing.T) {
	if os.Getenv("ROX_EP_GPU_WORKER") == "" {
		t.Skip("run by TestGPU")
	}
	ctx := context.Background()
	w, err := shmem.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Finalize()
	if d := w.Device(); d.Driver == "host" {
		t.Fatalf("the job runs on the host backend (%v)", d)
	}
	me, npes := w.MyPE(), w.NPEs()
	st, err := w.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Destroy()
	start := time.Now()
	for _, mode := range []ep.Mode{ep.LowLatency, ep.Normal} {
		for _, dt := range []ep.DType{ep.DTypeBF16, ep.DTypeF32} {
			cfg := ep.Config{Hidden: 64, TopK: 4, Experts: 8, MaxTokens: 6, DType: dt, Mode: mode}
			p := newGPUPE(t, ctx, w, st, cfg)
			// random routing (PE 1 sends nothing), blocking; skewed (all to the last expert: the
			// others get none), stream-ordered; random again, stream-ordered Dispatch and blocking
			// Combine
			p.call(gen(cfg, npes, 11, eptest.Random), false, false)
			p.call(gen(cfg, npes, 12, eptest.Skewed), true, false)
			p.call(gen(cfg, npes, 13, eptest.Random), true, true)
			p.free()
			t.Logf("PE %d: %v %v: 3 calls match the reference", me, mode, dt)
		}
	}
	// DeepSeek-V3's shape: a few tokens in LowLatency; in Normal 96 tokens, whose bulk put to
	// each PE (96 rows of 14408 bytes, 1.3 MiB) is above ROX_CE_THRESHOLD's default (1 MiB) and
	// goes by the copy engine
	for _, mode := range []ep.Mode{ep.LowLatency, ep.Normal} {
		cfg := ep.Config{Hidden: 7168, TopK: 8, Experts: 16, MaxTokens: 3, DType: ep.DTypeBF16, Mode: mode}
		if mode == ep.Normal {
			cfg.MaxTokens = 96
		}
		p := newGPUPE(t, ctx, w, st, cfg)
		p.call(gen(cfg, npes, 21, eptest.Full), mode == ep.LowLatency, false)
		p.free()
	}
	t.Logf("PE %d: DeepSeek-V3's shape matches the reference; all calls took %v (two PEs may share one GPU: not a speed figure)", me, time.Since(start))
	gpuBadInput(t, ctx, w, st)
}

// gpuBadInput: what the host sees is refused before anything is enqueued; an expert index out of
// range, which only the device sees, is reported by SyncStream on its PE (ErrExpertRange, the PE,
// the value), that PE dispatches none of its tokens, its peer's call completes, and the buffer
// works on.
func gpuBadInput(t *testing.T, ctx context.Context, w *shmem.World, st device.Stream) {
	me, npes := w.MyPE(), w.NPEs()
	cfg := ep.Config{Hidden: 64, TopK: 2, Experts: 8, MaxTokens: 4, DType: ep.DTypeBF16, Mode: ep.LowLatency}
	p := newGPUPE(t, ctx, w, st, cfg)
	other, err := ep.New(w, cfg)
	p.must(err)
	expect := func(err, kind error, parts ...string) {
		t.Helper()
		if !errors.Is(err, kind) {
			t.Fatalf("PE %d: got %v, want %v", me, err, kind)
		}
		for _, s := range parts {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("PE %d: %q does not say %q", me, err, s)
			}
		}
	}
	good := gen(cfg, npes, 31, eptest.Full)

	// Host-checked: both PEs' blocking calls fail alike, nothing enqueued.
	bad := good[me]
	bad.Idx = append([]int64(nil), bad.Idx...)
	bad.Idx[1] = int64(cfg.Experts)
	_, _, err = p.buf.Dispatch(ctx, bad.X, bad.Idx, bad.Weights)
	expect(err, ep.ErrExpertRange, "ep.Dispatch", fmt.Sprintf("PE %d", me), "topkIdx[0][1] = 8")
	_, _, err = p.buf.DispatchOnStream(st, ep.DeviceTokens{Ptr: p.x.Device(), Rows: cfg.MaxTokens + 1}, p.idx.Device(), p.wt.Device())
	expect(err, ep.ErrTooManyTokens, "ep.DispatchOnStream", fmt.Sprintf("PE %d", me))
	_, _, err = p.buf.DispatchOnStream(st, ep.DeviceTokens{Ptr: p.x.Device(), Rows: 1}, p.idx.Device().Add(4), p.wt.Device())
	expect(err, shmem.ErrMisaligned, "topkIdx")
	p.call(good, true, false)

	// Device-checked: PE 0's index 3*Experts+3 (token 2, choice 1).
	ins := gen(cfg, npes, 32, eptest.Full)
	ref := append([]eptest.Input(nil), ins...)
	ref[0] = eptest.Input{}
	if me == 0 {
		ins[0].Idx[2*cfg.TopK+1] = int64(3*cfg.Experts + 3)
	}
	_, h, err := p.dispatchOnStream(ins[me])
	p.must(err)
	err = w.SyncStream(ctx, st)
	if me == 0 {
		expect(err, ep.ErrExpertRange, "SyncStream on PE 0", "ep.DispatchOnStream on PE 0", "topkIdx holds expert 27")
		t.Logf("PE 0: %v", err)
	} else {
		p.must(err)
	}
	r, err := ep.FetchRecv(p.buf)
	p.must(err)
	if err := eptest.CheckDispatch(cfg, ref, me, r); err != nil {
		t.Fatalf("PE %d after the refused dispatch: %v", me, err)
	}
	p.must(p.y.Put(0, tokBytes(cfg, eptest.Apply(cfg, r)), me))
	o, err := p.buf.CombineOnStream(st, ep.DeviceTokens{Ptr: p.y.Device(), Rows: p.buf.MaxRows()}, h)
	p.must(err)
	p.must(w.SyncStream(ctx, st))
	out, err := ep.FetchOut(p.buf, o)
	p.must(err)
	want := tokBytes(cfg, eptest.Combined(cfg, npes, ref[me]))
	if me == 0 {
		want = make([]byte, ins[0].N*cfg.Hidden*2) // its tokens were not dispatched: zeros
	}
	if !bytes.Equal(tokBytes(cfg, out), want) {
		t.Fatalf("PE %d: Combine after the refused dispatch differs from the reference", me)
	}

	// Handles: another buffer's, and an earlier Dispatch's (the device keeps the latest routing).
	_, h1, err := p.dispatchOnStream(good[me])
	p.must(err)
	p.must(w.SyncStream(ctx, st))
	y := ep.DeviceTokens{Ptr: p.y.Device(), Rows: p.buf.MaxRows()}
	_, err = other.CombineOnStream(st, y, h1)
	expect(err, ep.ErrForeignHandle, "ep.CombineOnStream", fmt.Sprintf("PE %d", me))
	p.call(good, true, false)
	_, err = p.buf.CombineOnStream(st, y, h1)
	expect(err, ep.ErrStaleHandle, "ep.CombineOnStream", "Dispatch call")
	p.call(good, false, false)
	p.must(other.Free())
	p.free()
	t.Logf("PE %d: bad input refused and reported as documented", me)
}
