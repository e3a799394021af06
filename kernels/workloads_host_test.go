package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
	"github.com/roxamen/roxamen/shmem/ep/eptest"
)

// The workloads' CPU harness: testdata/workloads_pe.cc (roxamen/ep.h and roxamen/gemm.h built for
// the CPU) loaded once per PE with purego, the PEs' heaps plain memory every PE maps, each PE's
// block a group of OS threads, as TestCollHost runs coll.h. Dispatch and Combine are checked
// against shmem/ep's host reference (eptest: the rows, their order, weights and sources, and the
// combined sums bit for bit), the GEMM's fused and unfused variants against each other (bit for
// bit) and against a float64 product.

const wlThreads = 4

type wlPE struct {
	setState    func(s *kernels.State)
	setThreads  func(n uint32)
	epLayout    func(i int32) int32
	gemmLayout  func(i int32) int32
	dispatch    func(tid uint32, e, x, idx, w uintptr, n int32, epoch uint64, ox, osrc, ow uintptr, nblk int32)
	combine     func(tid uint32, e, y, out uintptr, n int32, epoch uint64, nblk int32)
	gemmFused   func(tid uint32, g, a, b, c uintptr, step uint64, scratch uintptr, nblk int32)
	gemmUnfused func(tid uint32, g, a, b, cp, c, scratch uintptr, nblk int32) int32
	state       kernels.State
	abort       *kernels.Abort
	table       *kernels.TeamTable
	heap, local []byte
	hoff, loff  int // bump allocators
}

type wlNode struct {
	pes []*wlPE
}

// newWLNode loads npes PEs with heaps and local memories of the given sizes; bypass sets the
// state's CacheBypass flag (the library's other branch of every call).
func newWLNode(t *testing.T, npes, heap, local int, bypass bool) *wlNode {
	t.Helper()
	so := kernels.BuildHostLib(t, "testdata/workloads_pe.cc", "-O1", "-lm")
	nd := &wlNode{}
	for p := 0; p < npes; p++ {
		pe := &wlPE{heap: kernels.HostMem(t, heap), local: kernels.HostMem(t, local)}
		kernels.OpenHostPE(t, so, p, map[string]any{"rox_set_state": &pe.setState, "rox_set_threads": &pe.setThreads,
			"rox_ep_layout": &pe.epLayout, "rox_gemm_layout": &pe.gemmLayout, "rox_ep_dispatch": &pe.dispatch,
			"rox_ep_combine": &pe.combine, "rox_gemm_fused": &pe.gemmFused, "rox_gemm_unfused": &pe.gemmUnfused})
		ctl := pe.alloc(int(unsafe.Sizeof(kernels.TeamTable{}) + unsafe.Sizeof(kernels.Abort{})))
		pe.table = (*kernels.TeamTable)(unsafe.Pointer(&ctl[0]))
		pe.abort = (*kernels.Abort)(unsafe.Pointer(&ctl[unsafe.Sizeof(kernels.TeamTable{})]))
		nd.pes = append(nd.pes, pe)
	}
	// the barrier workspace and the world team's workspace first: the same offsets everywhere
	const wsBytes = kernels.TeamWSData + 2*16<<10
	for p, pe := range nd.pes {
		pe.symAlloc(kernels.BarrierBytes)
		ws := pe.symAlloc(wsBytes)
		pe.table.Magic, pe.table.NTeams = kernels.TeamMagic, 1
		pe.table.Team[kernels.TeamWorld] = kernels.TeamDesc{Start: 0, Stride: 1, Size: int32(npes), MyIndex: int32(p),
			WSOff: uint64(ws), WSBytes: wsBytes}
		pe.state = kernels.State{Magic: kernels.StateMagic, Version: kernels.StateVersion, MyPE: int32(p), NPEs: int32(npes),
			HeapBase: kernels.HostAddr(pe.heap), HeapSize: uint64(heap), BarrierOff: 0,
			Abort: uint64(uintptr(unsafe.Pointer(pe.abort))), Teams: uint64(uintptr(unsafe.Pointer(pe.table)))}
		if bypass {
			pe.state.Flags |= kernels.FlagBypass
		}
		for q := range nd.pes {
			pe.state.PeerBase[q] = kernels.HostAddr(nd.pes[q].heap)
		}
		pe.setState(&pe.state)
		pe.setThreads(wlThreads)
	}
	return nd
}

// symAlloc returns the heap offset of n fresh bytes (16-aligned); every PE allocates alike.
func (pe *wlPE) symAlloc(n int) int {
	off := pe.hoff
	pe.hoff += (n + 15) &^ 15
	if pe.hoff > len(pe.heap) {
		panic("harness heap too small")
	}
	return off
}

func (pe *wlPE) sym(off int) uint64 { return kernels.HostAddr(pe.heap) + uint64(off) }

func (pe *wlPE) alloc(n int) []byte {
	off := pe.loff
	pe.loff += (n + 15) &^ 15
	if pe.loff > len(pe.local) {
		panic("harness local memory too small")
	}
	b := pe.local[off : off+n : off+n]
	clear(b)
	return b
}

func (pe *wlPE) allocAddr(n int) uint64 {
	if n == 0 {
		n = 1
	}
	return kernels.HostAddr(pe.alloc(n))
}

// run calls f(pe, tid) on every thread of every PE at once; a run that does not end within the
// watchdog sets every abort word (the waits then give up) and fails, with each PE's record.
func (nd *wlNode) run(t *testing.T, what string, f func(p int, pe *wlPE, tid uint32)) {
	t.Helper()
	nd.exec(t, what, f)
	for p, pe := range nd.pes {
		if pe.abort.First != 0 {
			r := kernels.DecodeAbortRecord(pe.abort.First)
			t.Fatalf("%s: PE %d recorded %s PE %d detail %#x", what, p, r.CallName(), r.PE, r.Detail)
		}
	}
}

// exec is run without the check of the abort records.
func (nd *wlNode) exec(t *testing.T, what string, f func(p int, pe *wlPE, tid uint32)) {
	t.Helper()
	var aborts []*kernels.Abort
	var pes []int
	for p, pe := range nd.pes {
		aborts, pes = append(aborts, pe.abort), append(pes, p)
	}
	if !kernels.RunHostGroups(aborts, pes, func(int) int { return wlThreads }, func(p, tid int) { f(p, nd.pes[p], uint32(tid)) }) {
		t.Fatalf("%s did not finish in %v (abort words set to end it)", what, kernels.HostWatchdog)
	}
}

func TestWorkloadLayout(t *testing.T) {
	nd := newWLNode(t, 1, 1<<16, 1<<20, false)
	pe := nd.pes[0]
	var e kernels.EP
	var g kernels.GEMM
	for i, want := range []uintptr{unsafe.Sizeof(e), unsafe.Offsetof(e.CEMin), unsafe.Offsetof(e.Recv), unsafe.Offsetof(e.Stage), unsafe.Offsetof(e.Scratch)} {
		if got := pe.epLayout(int32(i)); uintptr(got) != want {
			t.Errorf("roxep_t layout value %d: C %d, Go %d", i, got, want)
		}
	}
	for i, want := range []uintptr{unsafe.Sizeof(g), unsafe.Offsetof(g.Slot), unsafe.Offsetof(g.Part), unsafe.Offsetof(g.Stage)} {
		if got := pe.gemmLayout(int32(i)); uintptr(got) != want {
			t.Errorf("roxgemm_t layout value %d: C %d, Go %d", i, got, want)
		}
	}
}

// ---- expert parallelism ------------------------------------------------------------------------

type epPE struct {
	e                *kernels.EP
	eAddr            uint64
	x, idx, w, y     []byte
	ox, osrc, ow, oc []byte
}

func align8(n int) int { return (n + 7) &^ 7 }

// newEP lays out one PE's buffer as ep.h documents it.
func newEP(pe *wlPE, cfg ep.Config, npes int) *epPE {
	es := 2
	if cfg.DType == ep.DTypeF32 {
		es = 4
	}
	P, M, K, E := npes, cfg.MaxTokens, cfg.TopK, cfg.Experts
	pay := align8(cfg.Hidden * es)
	row := align8(pay + 8*K + 4)
	mode := int32(kernels.EPNormal)
	if cfg.Mode == ep.LowLatency {
		mode = kernels.EPLowLatency
	}
	eb := pe.alloc(int(unsafe.Sizeof(kernels.EP{})))
	e := (*kernels.EP)(unsafe.Pointer(&eb[0]))
	*e = kernels.EP{Hidden: int32(cfg.Hidden), TopK: int32(K), Experts: int32(E), MaxTokens: int32(M), Local: int32(E / P),
		ESize: int32(es), Mode: mode, Payload: uint32(pay), RowBytes: uint32(row), CEMin: 4096}
	e.Recv = pe.sym(pe.symAlloc(P * M * row))
	e.Comb = pe.sym(pe.symAlloc(P * M * cfg.Hidden * es))
	e.Layout = pe.sym(pe.symAlloc(P * (P + E) * 8))
	e.Sig = pe.sym(pe.symAlloc(kernels.EPSignals * P * 8))
	e.Stage = pe.allocAddr(P * M * row)
	e.CStage = pe.allocAddr(P * M * cfg.Hidden * es)
	e.NSent = pe.allocAddr(4 * P)
	e.Sent = pe.allocAddr(4 * P * M)
	e.SlotOf = pe.allocAddr(4 * M * P)
	e.PerExpert = pe.allocAddr(8 * E)
	e.Counts = pe.allocAddr(4 * P)
	e.Start = pe.allocAddr(4 * P)
	e.ECount = pe.allocAddr(4 * (E / P))
	e.EOff = pe.allocAddr(4 * (E/P + 1))
	e.OutRow = pe.allocAddr(4 * P * M * K)
	e.OutW = pe.allocAddr(4 * P * M * K)
	e.Rows = pe.allocAddr(4)
	e.Arrived = pe.allocAddr(8 * P)
	e.CArrived = pe.allocAddr(8 * P)
	L := E / P
	e.Scratch = pe.allocAddr(4 * (P*M*K + kernels.EPMaxBlocks*L))
	st := &epPE{e: e, eAddr: kernels.HostAddr(eb)}
	st.x = pe.alloc(M * cfg.Hidden * es)
	st.idx = pe.alloc(8 * M * K)
	st.w = pe.alloc(4 * M * K)
	st.y = pe.alloc(P * M * K * cfg.Hidden * es)
	st.ox = pe.alloc(P * M * K * cfg.Hidden * es)
	st.osrc = pe.alloc(12 * P * M * K)
	st.ow = pe.alloc(4 * P * M * K)
	st.oc = pe.alloc(M * cfg.Hidden * es)
	return st
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

func tokensFrom(cfg ep.Config, b []byte, elems int) ep.Tokens {
	if cfg.DType == ep.DTypeBF16 {
		v := make([]shmem.BFloat16, elems)
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 2*elems), b)
		return ep.Tokens{BF16: v}
	}
	v := make([]float32, elems)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*elems), b)
	return ep.Tokens{F32: v}
}

// at returns the n bytes at addr, in this PE's heap or local memory.
func (pe *wlPE) at(addr uint64, n int) []byte {
	for _, m := range [][]byte{pe.heap, pe.local} {
		if b := kernels.HostAddr(m); addr >= b && addr+uint64(n) <= b+uint64(len(m)) {
			return m[addr-b : addr-b+uint64(n)]
		}
	}
	panic("address outside the PE's memory")
}

func (pe *wlPE) i32s(addr uint64, n int) []int32 {
	return unsafe.Slice((*int32)(unsafe.Pointer(&pe.at(addr, 4*n)[0])), n)
}

// recvOf reads PE me's dispatch outputs into an ep.Recv.
func recvOf(pe *wlPE, cfg ep.Config, npes, me int, st *epPE) *ep.Recv {
	L := cfg.Experts / npes
	rows := int(pe.i32s(st.e.Rows, 1)[0])
	r := &ep.Recv{Rows: rows, Counts: make([]int, L), Offsets: make([]int, L+1), Transfers: make([]int, npes)}
	for l, c := range pe.i32s(st.e.ECount, L) {
		r.Counts[l] = int(c)
	}
	for l, o := range pe.i32s(st.e.EOff, L+1) {
		r.Offsets[l] = int(o)
	}
	for s, c := range pe.i32s(st.e.Counts, npes) {
		r.Transfers[s] = int(c)
	}
	r.X = tokensFrom(cfg, st.ox, rows*cfg.Hidden)
	src := unsafe.Slice((*int32)(unsafe.Pointer(&st.osrc[0])), 3*rows+1)
	w := unsafe.Slice((*float32)(unsafe.Pointer(&st.ow[0])), rows+1)
	for i := 0; i < rows; i++ {
		r.Src = append(r.Src, ep.Source{PE: int(src[3*i]), Token: int(src[3*i+1]), K: int(src[3*i+2])})
		r.Weights = append(r.Weights, w[i])
		l := 0
		for l+1 < L && r.Offsets[l+1] <= i {
			l++
		}
		r.Experts = append(r.Experts, me*L+l)
	}
	return r
}

// empty: every PE dispatches no token
const kindEmpty eptest.Kind = "empty"

func runEPHost(t *testing.T, npes int, cfg ep.Config, kind eptest.Kind, bypass bool, nblk, calls int) {
	t.Helper()
	es := 2
	if cfg.DType == ep.DTypeF32 {
		es = 4
	}
	heap := 2<<20 + npes*cfg.MaxTokens*(align8(align8(cfg.Hidden*es)+8*cfg.TopK+4)+cfg.Hidden*es) + npes*(npes+cfg.Experts)*8 + 4096
	local := 4<<20 + npes*cfg.MaxTokens*cfg.TopK*(2*cfg.Hidden*es+64) + 3*npes*cfg.MaxTokens*cfg.Hidden*es
	nd := newWLNode(t, npes, heap, local, bypass)
	sts := make([]*epPE, npes)
	for p, pe := range nd.pes {
		sts[p] = newEP(pe, cfg, npes)
	}
	for c := 1; c <= calls; c++ {
		ins := make([]eptest.Input, npes)
		for p := range ins {
			k := kind
			if kind == kindEmpty {
				k = eptest.Random
			}
			ins[p] = eptest.Gen(cfg, npes, p, uint64(1000*c+17), k)
			if kind == kindEmpty {
				ins[p] = eptest.Input{}
			}
			copy(sts[p].x, tokBytes(cfg, ins[p].X))
			copy(sts[p].idx, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ins[p].Idx))), 8*len(ins[p].Idx)))
			copy(sts[p].w, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ins[p].Weights))), 4*len(ins[p].Weights)))
		}
		nd.run(t, fmt.Sprintf("dispatch %d", c), func(p int, pe *wlPE, tid uint32) {
			st := sts[p]
			pe.dispatch(tid, uintptr(st.eAddr), uintptr(kernels.HostAddr(st.x)), uintptr(kernels.HostAddr(st.idx)), uintptr(kernels.HostAddr(st.w)), int32(ins[p].N),
				uint64(c), uintptr(kernels.HostAddr(st.ox)), uintptr(kernels.HostAddr(st.osrc)), uintptr(kernels.HostAddr(st.ow)), int32(nblk))
		})
		for p := range nd.pes {
			r := recvOf(nd.pes[p], cfg, npes, p, sts[p])
			if err := eptest.CheckDispatch(cfg, ins, p, r); err != nil {
				t.Fatalf("call %d PE %d: %v", c, p, err)
			}
			copy(sts[p].y, tokBytes(cfg, eptest.Apply(cfg, r)))
		}
		nd.run(t, fmt.Sprintf("combine %d", c), func(p int, pe *wlPE, tid uint32) {
			st := sts[p]
			pe.combine(tid, uintptr(st.eAddr), uintptr(kernels.HostAddr(st.y)), uintptr(kernels.HostAddr(st.oc)), int32(ins[p].N), uint64(c), int32(nblk))
		})
		for p := range nd.pes {
			want := tokBytes(cfg, eptest.Combined(cfg, npes, ins[p]))
			got := sts[p].oc[:len(want)]
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("call %d PE %d: Combine byte %d (token %d) is %#x, want %#x", c, p, i, i/(cfg.Hidden*es), got[i], want[i])
				}
			}
		}
	}
}

// TestEPDeviceHost runs ep.h's dispatch and combine on the CPU against shmem/ep's host reference:
// both modes, both payload types, both ordering modes' code, random, skewed, full and empty
// routings, several calls in a row on one buffer (the acknowledgements and LowLatency's
// cumulative arrival counters), phases split over several blocks.
func TestEPDeviceHost(t *testing.T) {
	type tc struct {
		npes  int
		cfg   ep.Config
		kind  eptest.Kind
		nblk  int
		calls int
	}
	var cases []tc
	for _, mode := range []ep.Mode{ep.LowLatency, ep.Normal} {
		cases = append(cases,
			tc{2, ep.Config{Hidden: 37, TopK: 3, Experts: 6, MaxTokens: 9, DType: ep.DTypeBF16, Mode: mode}, eptest.Random, 1, 3},
			tc{4, ep.Config{Hidden: 40, TopK: 4, Experts: 8, MaxTokens: 12, DType: ep.DTypeBF16, Mode: mode}, eptest.Random, 3, 2},
			tc{4, ep.Config{Hidden: 24, TopK: 2, Experts: 4, MaxTokens: 10, DType: ep.DTypeF32, Mode: mode}, eptest.Skewed, 2, 2},
			tc{3, ep.Config{Hidden: 16, TopK: 8, Experts: 12, MaxTokens: 6, DType: ep.DTypeBF16, Mode: mode}, eptest.Full, 1, 2},
			tc{2, ep.Config{Hidden: 8, TopK: 2, Experts: 2, MaxTokens: 4, DType: ep.DTypeBF16, Mode: mode}, kindEmpty, 1, 2},
		)
	}
	// DeepSeek-V3's shape, a few tokens
	cases = append(cases, tc{2, ep.Config{Hidden: 7168, TopK: 8, Experts: 16, MaxTokens: 3, DType: ep.DTypeBF16, Mode: ep.LowLatency}, eptest.Full, 1, 1})
	for _, c := range cases {
		for _, bypass := range []bool{false, true} {
			name := fmt.Sprintf("%s/%v/%dpe/h%d/k%d/%s/b%d/bypass=%v", c.cfg.Mode, c.cfg.DType, c.npes, c.cfg.Hidden, c.cfg.TopK, c.kind, c.nblk, bypass)
			t.Run(name, func(t *testing.T) { runEPHost(t, c.npes, c.cfg, c.kind, bypass, c.nblk, c.calls) })
		}
	}
}

// TestEPDeviceHostSplit: the splits of the multi-block phases and the single-block numbering at
// their edges: more blocks than rows, a row count that is no multiple of the blocks, PEs that
// receive no token (a skewed routing sends every token to the last PE), more local experts than
// a block has threads (each thread counts several experts) and more than 32 (two mask words a row).
func TestEPDeviceHostSplit(t *testing.T) {
	type tc struct {
		npes  int
		cfg   ep.Config
		kind  eptest.Kind
		nblk  int
		calls int
	}
	var cases []tc
	for _, mode := range []ep.Mode{ep.LowLatency, ep.Normal} {
		cases = append(cases,
			tc{3, ep.Config{Hidden: 64, TopK: 3, Experts: 9, MaxTokens: 7, DType: ep.DTypeBF16, Mode: mode}, eptest.Skewed, 5, 2},
			tc{2, ep.Config{Hidden: 32, TopK: 4, Experts: 80, MaxTokens: 7, DType: ep.DTypeBF16, Mode: mode}, eptest.Full, 3, 2},
			tc{2, ep.Config{Hidden: 20, TopK: 2, Experts: 4, MaxTokens: 3, DType: ep.DTypeF32, Mode: mode}, eptest.Random, 16, 2},
		)
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s/%v/%dpe/e%d/%s/b%d", c.cfg.Mode, c.cfg.DType, c.npes, c.cfg.Experts, c.kind, c.nblk)
		t.Run(name, func(t *testing.T) { runEPHost(t, c.npes, c.cfg, c.kind, c.nblk%2 == 1, c.nblk, c.calls) })
	}
}

// TestEPDeviceHostBadExpert: an expert index out of range, which only the device sees in a
// stream-ordered Dispatch, is recorded (ep.h's call, the PE, the value) and that PE dispatches none
// of its tokens in that call; its peer's call completes with the reference of the job in which it
// sent nothing, its own Combine gives zeros, and the next call on the buffer is whole again.
func TestEPDeviceHostBadExpert(t *testing.T) {
	const npes = 2
	for _, mode := range []ep.Mode{ep.LowLatency, ep.Normal} {
		for _, bad := range []int64{6, -2, 1 << 40} {
			t.Run(fmt.Sprintf("%v/%d", mode, bad), func(t *testing.T) {
				cfg := ep.Config{Hidden: 24, TopK: 3, Experts: 6, MaxTokens: 5, DType: ep.DTypeBF16, Mode: mode}
				es := 2
				heap := 2<<20 + npes*cfg.MaxTokens*(align8(align8(cfg.Hidden*es)+8*cfg.TopK+4)+cfg.Hidden*es) + 4096
				nd := newWLNode(t, npes, heap, 4<<20, false)
				sts := []*epPE{newEP(nd.pes[0], cfg, npes), newEP(nd.pes[1], cfg, npes)}
				for c := 1; c <= 2; c++ {
					ins := []eptest.Input{eptest.Gen(cfg, npes, 0, uint64(c), eptest.Full), eptest.Gen(cfg, npes, 1, uint64(c), eptest.Full)}
					ref := ins
					if c == 1 { // PE 0's token 3, choice 2
						ins[0].Idx[3*cfg.TopK+2] = bad
						ref = []eptest.Input{{}, ins[1]}
					}
					for p, st := range sts {
						copy(st.x, tokBytes(cfg, ins[p].X))
						copy(st.idx, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ins[p].Idx))), 8*len(ins[p].Idx)))
						copy(st.w, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ins[p].Weights))), 4*len(ins[p].Weights)))
					}
					nd.exec(t, "dispatch", func(p int, pe *wlPE, tid uint32) {
						st := sts[p]
						pe.dispatch(tid, uintptr(st.eAddr), uintptr(kernels.HostAddr(st.x)), uintptr(kernels.HostAddr(st.idx)), uintptr(kernels.HostAddr(st.w)), int32(ins[p].N),
							uint64(c), uintptr(kernels.HostAddr(st.ox)), uintptr(kernels.HostAddr(st.osrc)), uintptr(kernels.HostAddr(st.ow)), 2)
					})
					if c == 1 {
						r := kernels.DecodeAbortRecord(nd.pes[0].abort.First)
						want := int32(bad)
						if bad > 1<<31-1 {
							want = 1<<31 - 1
						}
						if !r.Valid || r.Call != kernels.CallEPExpert || r.PE != 0 || int32(r.Detail) != want || r.CallName() != "ep expert index" {
							t.Fatalf("PE 0 recorded %+v (%s), want %s PE 0 detail %d", r, r.CallName(), "ep expert index", want)
						}
						if nd.pes[1].abort.First != 0 {
							t.Fatalf("PE 1 recorded %+v", kernels.DecodeAbortRecord(nd.pes[1].abort.First))
						}
						nd.pes[0].abort.First, nd.pes[0].abort.Count = 0, 0
					}
					for p := range nd.pes {
						r := recvOf(nd.pes[p], cfg, npes, p, sts[p])
						if err := eptest.CheckDispatch(cfg, ref, p, r); err != nil {
							t.Fatalf("call %d PE %d: %v", c, p, err)
						}
						copy(sts[p].y, tokBytes(cfg, eptest.Apply(cfg, r)))
					}
					nd.run(t, "combine", func(p int, pe *wlPE, tid uint32) {
						st := sts[p]
						pe.combine(tid, uintptr(st.eAddr), uintptr(kernels.HostAddr(st.y)), uintptr(kernels.HostAddr(st.oc)), int32(ins[p].N), uint64(c), 2)
					})
					for p := range nd.pes {
						want := tokBytes(cfg, eptest.Combined(cfg, npes, ref[p]))
						if c == 1 && p == 0 {
							want = make([]byte, ins[0].N*cfg.Hidden*es) // refused: zeros
						}
						if got := sts[p].oc[:len(want)]; string(got) != string(want) {
							t.Fatalf("call %d PE %d: Combine differs from the reference", c, p)
						}
					}
				}
			})
		}
	}
}

// ---- GEMM ---------------------------------------------------------------------------------------

type gemmPE struct {
	g        *kernels.GEMM
	gAddr    uint64
	a, b     []float32
	cf, cu   []float32 // fused and unfused results
	cp       uint64    // unfused partial (symmetric)
	cuAddr   uint64    // unfused result (symmetric: the all-reduce's destination)
	scratch  uint64
	cfAddr   uint64
	aAddr    uint64
	bAddr    uint64
	rsResult []float32
}

func f32s(b []byte) []float32 { return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4) }

func newGEMM(pe *wlPE, npes, m, n, k, tm, tn, op int, seed uint64, p int) *gemmPE {
	tiles := ((m + tm - 1) / tm) * ((n + tn - 1) / tn)
	gb := pe.alloc(int(unsafe.Sizeof(kernels.GEMM{})))
	g := (*kernels.GEMM)(unsafe.Pointer(&gb[0]))
	*g = kernels.GEMM{M: int32(m), N: int32(n), K: int32(k), TileM: int32(tm), TileN: int32(tn), TM: int32((m + tm - 1) / tm),
		TN: int32((n + tn - 1) / tn), Tiles: int32(tiles), Op: int32(op), Slot: uint32(tm * tn)}
	g.Part = pe.sym(pe.symAlloc(4 * npes * tiles * tm * tn))
	g.TSig = pe.sym(pe.symAlloc(8 * tiles * npes))
	g.Ack = pe.sym(pe.symAlloc(8 * npes))
	g.Stage = pe.allocAddr(4 * tiles * tm * tn)
	st := &gemmPE{g: g, gAddr: kernels.HostAddr(gb)}
	ab, bb, cf := pe.alloc(4*m*k), pe.alloc(4*k*n), pe.alloc(4*m*n)
	st.a, st.b, st.cf = f32s(ab), f32s(bb), f32s(cf)
	st.aAddr, st.bAddr, st.cfAddr = kernels.HostAddr(ab), kernels.HostAddr(bb), kernels.HostAddr(cf)
	st.cp = pe.sym(pe.symAlloc(4 * m * n))
	st.cuAddr = pe.sym(pe.symAlloc(4 * m * n))
	st.cu = f32s(pe.at(st.cuAddr, 4*m*n))
	st.scratch = pe.allocAddr(4 * (tm + tn) * 16)
	rng := rand.New(rand.NewPCG(seed, uint64(p)))
	for i := range st.a {
		st.a[i] = float32(rng.NormFloat64())
	}
	for i := range st.b {
		st.b[i] = float32(rng.NormFloat64())
	}
	return st
}

// TestGEMMHost runs gemm.h on the CPU: the fused variant (tiles pushed with put-with-signal as
// computed, reduced in PE order) equals the unfused one (the same tiles, then coll.h's
// all-reduce) bit for bit, at shapes that are not multiples of the tile, over several steps on
// one buffer; both are within float32 rounding of a float64 product; the reduce-scatter gives each
// PE its tile rows of the same sums.
func TestGEMMHost(t *testing.T) {
	type tc struct{ npes, m, n, k, tm, tn, nblk int }
	for _, c := range []tc{{2, 37, 29, 45, 16, 8, 1}, {3, 20, 33, 17, 8, 16, 2}, {4, 70, 65, 19, 64, 64, 1}} {
		for _, bypass := range []bool{false, true} {
			t.Run(fmt.Sprintf("%dpe/%dx%dx%d/tile%dx%d/bypass=%v", c.npes, c.m, c.n, c.k, c.tm, c.tn, bypass), func(t *testing.T) {
				runGEMMHost(t, c.npes, c.m, c.n, c.k, c.tm, c.tn, c.nblk, bypass)
			})
		}
	}
}

func runGEMMHost(t *testing.T, npes, m, n, k, tm, tn, nblk int, bypass bool) {
	nd := newWLNode(t, npes, 4<<20+4*(npes+4)*(m+tm)*(n+tn)*2, 4<<20+4*(m*k+k*n+3*(m+tm)*(n+tn)), bypass)
	ar := make([]*gemmPE, npes)
	rs := make([]*gemmPE, npes)
	for p, pe := range nd.pes {
		ar[p] = newGEMM(pe, npes, m, n, k, tm, tn, kernels.GEMMAllReduce, 5, p)
	}
	for p, pe := range nd.pes {
		rs[p] = newGEMM(pe, npes, m, n, k, tm, tn, kernels.GEMMReduceScatter, 5, p)
	}
	// the float64 reference of sum_p A_p B_p
	ref := make([]float64, m*n)
	for p := 0; p < npes; p++ {
		for i := 0; i < m; i++ {
			for kk := 0; kk < k; kk++ {
				a := float64(ar[p].a[i*k+kk])
				for j := 0; j < n; j++ {
					ref[i*n+j] += a * float64(ar[p].b[kk*n+j])
				}
			}
		}
	}
	for step := uint64(1); step <= 2; step++ {
		nd.run(t, "fused", func(p int, pe *wlPE, tid uint32) {
			s := ar[p]
			pe.gemmFused(tid, uintptr(s.gAddr), uintptr(s.aAddr), uintptr(s.bAddr), uintptr(s.cfAddr), step, uintptr(s.scratch), int32(nblk))
		})
		res := make([]int32, npes)
		nd.run(t, "unfused", func(p int, pe *wlPE, tid uint32) {
			s := ar[p]
			r := pe.gemmUnfused(tid, uintptr(s.gAddr), uintptr(s.aAddr), uintptr(s.bAddr), uintptr(s.cp), uintptr(s.cuAddr), uintptr(s.scratch), int32(nblk))
			if tid == 0 {
				res[p] = r
			}
		})
		nd.run(t, "fused reduce-scatter", func(p int, pe *wlPE, tid uint32) {
			s := rs[p]
			pe.gemmFused(tid, uintptr(s.gAddr), uintptr(s.aAddr), uintptr(s.bAddr), uintptr(s.cfAddr), step, uintptr(s.scratch), int32(nblk))
		})
		for p := 0; p < npes; p++ {
			if res[p] != 0 {
				t.Fatalf("step %d PE %d: the all-reduce returned %d", step, p, res[p])
			}
			for i := range ref {
				f, u := ar[p].cf[i], ar[p].cu[i]
				if math.Float32bits(f) != math.Float32bits(u) {
					t.Fatalf("step %d PE %d: C[%d][%d] fused %v, unfused %v: not bit for bit", step, p, i/n, i%n, f, u)
				}
				if d := math.Abs(float64(f) - ref[i]); d > 1e-4*float64(k*npes) {
					t.Fatalf("step %d PE %d: C[%d][%d] = %v, float64 product %v", step, p, i/n, i%n, f, ref[i])
				}
			}
			// reduce-scatter: PE p's tile rows
			tmr := (m + tm - 1) / tm
			r0, r1 := p*tmr/npes*tm, min((p+1)*tmr/npes*tm, m)
			for i := r0 * n; i < r1*n; i++ {
				if math.Float32bits(rs[p].cf[i]) != math.Float32bits(ar[p].cf[i]) {
					t.Fatalf("step %d PE %d: reduce-scatter C[%d][%d] = %v, all-reduce %v", step, p, i/n, i%n, rs[p].cf[i], ar[p].cf[i])
				}
			}
		}
		// a new step must not reuse the old results: change the inputs
		for p := 0; p < npes; p++ {
			for i := range ar[p].a {
				ar[p].a[i] *= -1
				rs[p].a[i] *= -1
			}
		}
		for i := range ref {
			ref[i] = -ref[i]
		}
	}
}
