package kernels

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/roxamen/roxamen/internal/dl/abitest"
	"github.com/roxamen/roxamen/nic"
)

// runC compiles body (the statements of main) against the headers and returns the "key value"
// lines it prints.
func runC(t *testing.T, includes []string, body string) map[string]uint64 {
	t.Helper()
	var src strings.Builder
	for _, inc := range includes {
		fmt.Fprintf(&src, "#include \"roxamen/%s\"\n", inc)
	}
	src.WriteString("int printf(const char *, ...);\n")
	src.WriteString("#define P(name, v) printf(\"%s %llu\\n\", name, (unsigned long long)(v))\n")
	src.WriteString("#define F(T, f) P(#f, __builtin_offsetof(T, f)); P(#f \".size\", sizeof(((T *)0)->f))\n")
	src.WriteString("int main(void) {\n" + body + "return 0;\n}\n")
	inc, err := filepath.Abs("include")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	for k, v := range abitest.Run(t, abitest.Program{Source: src.String(), Cflags: []string{"-std=c11", "-Wall", "-Werror", "-I" + inc}}) {
		if m[k], err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("bad line %q: %v", k+" "+v, err)
		}
	}
	return m
}

// snake converts a Go field name to the C one: RingTailCache -> ring_tail_cache, MyPE -> my_pe,
// NPEs -> n_pes, CEThreshold -> ce_threshold.
func snake(s string) string {
	special := map[string]string{"MyPE": "my_pe", "NPEs": "n_pes", "CEThreshold": "ce_threshold", "PE": "pe",
		"SDMA": "sdma", "NQueues": "n_queues", "WSOff": "ws_off", "WSBytes": "ws_bytes"}
	if v, ok := special[s]; ok {
		return v
	}
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 && !(s[i-1] >= '0' && s[i-1] <= '9') {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// checkStruct compares every field of the Go struct v with the C struct cType.
func checkStruct(t *testing.T, includes []string, cType string, v any) {
	t.Helper()
	rt := reflect.TypeOf(v)
	var body strings.Builder
	fmt.Fprintf(&body, "P(\"sizeof\", sizeof(%s));\n", cType)
	for i := 0; i < rt.NumField(); i++ {
		fmt.Fprintf(&body, "F(%s, %s);\n", cType, snake(rt.Field(i).Name))
	}
	got := runC(t, includes, body.String())
	if got["sizeof"] != uint64(rt.Size()) {
		t.Errorf("sizeof(%s) = %d, Go %s is %d", cType, got["sizeof"], rt.Name(), rt.Size())
	}
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		c := snake(f.Name)
		if got[c] != uint64(f.Offset) {
			t.Errorf("%s.%s at offset %d, Go %s.%s at %d", cType, c, got[c], rt.Name(), f.Name, f.Offset)
		}
		if got[c+".size"] != uint64(f.Type.Size()) {
			t.Errorf("%s.%s is %d bytes, Go %s.%s is %d", cType, c, got[c+".size"], rt.Name(), f.Name, f.Type.Size())
		}
	}
}

func TestStateParity(t *testing.T) {
	checkStruct(t, []string{"state.h"}, "roxshmem_state_t", State{})
	checkStruct(t, []string{"state.h"}, "roxshmem_abort_t", Abort{})
	got := runC(t, []string{"state.h"}, `
P("magic", ROXSHMEM_STATE_MAGIC); P("version", ROXSHMEM_STATE_VERSION); P("maxpes", ROXSHMEM_MAX_PES);
P("bypass", ROXSHMEM_FLAG_BYPASS); P("ringfence", ROXSHMEM_FLAG_RING_FENCE);
P("round", ROXSHMEM_BARRIER_ROUND); P("gridcount", ROXSHMEM_BARRIER_GRID_COUNT);
P("gridgen", ROXSHMEM_BARRIER_GRID_GEN); P("syncround", ROXSHMEM_BARRIER_SYNC_ROUND);
P("arrive", ROXSHMEM_BARRIER_ARRIVE); P("syncarrive", ROXSHMEM_BARRIER_SYNC_ARRIVE);
P("bytes", ROXSHMEM_BARRIER_BYTES);
P("rec", ROXSHMEM_ABORT_RECORD(ROXSHMEM_CALL_QUIET, 7, ROXSHMEM_DETAIL_RING_ERROR | 2));
P("c1", ROXSHMEM_CALL_WAIT_UNTIL); P("c2", ROXSHMEM_CALL_SIGNAL_WAIT_UNTIL); P("c3", ROXSHMEM_CALL_QUIET);
P("c4", ROXSHMEM_CALL_BARRIER); P("c5", ROXSHMEM_CALL_RING); P("c6", ROXSHMEM_CALL_FENCE); P("c7", ROXSHMEM_CALL_SYNC);
P("c80", ROXSHMEM_CALL_BAD_PE); P("c81", ROXSHMEM_CALL_BAD_ADDR); P("c82", ROXSHMEM_CALL_NO_ROUTE);
P("daw", ROXSHMEM_DETAIL_ABORT_WORD); P("dre", ROXSHMEM_DETAIL_RING_ERROR);
`)
	want := map[string]uint64{
		"magic": StateMagic, "version": StateVersion, "maxpes": MaxPEs, "bypass": FlagBypass,
		"ringfence": FlagRingFence, "round": BarrierRound, "gridcount": BarrierGridCount,
		"gridgen": BarrierGridGen, "syncround": BarrierSyncRound, "arrive": BarrierArrive,
		"syncarrive": BarrierSyncArrive, "bytes": BarrierBytes,
		"c1": CallWaitUntil, "c2": CallSignalWaitUntil, "c3": CallQuiet, "c4": CallBarrier, "c5": CallRing,
		"c6": CallFence, "c7": CallSync, "c80": CallBadPE, "c81": CallBadAddr, "c82": CallNoRoute,
		"daw": DetailAbortWord, "dre": DetailRingError,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("C %s = %#x, Go %#x", k, got[k], w)
		}
	}
	rec := DecodeAbortRecord(got["rec"])
	if !rec.Valid || rec.Call != CallQuiet || rec.PE != 7 || rec.Detail != DetailRingError|2 {
		t.Errorf("ROXSHMEM_ABORT_RECORD decoded as %+v", rec)
	}
	if rec.CallName() != "quiet" {
		t.Errorf("CallName = %q", rec.CallName())
	}
	if got := len(StateBytes(&State{})); got != int(unsafe.Sizeof(State{})) {
		t.Errorf("StateBytes has %d bytes", got)
	}
}

// TestTeamParity compares the team table and the team workspace layout with state.h.
func TestTeamParity(t *testing.T) {
	checkStruct(t, []string{"state.h"}, "roxshmem_team_desc_t", TeamDesc{})
	checkStruct(t, []string{"state.h"}, "roxshmem_team_table_t", TeamTable{})
	got := runC(t, []string{"state.h"}, `
P("magic", ROXSHMEM_TEAM_MAGIC); P("max", ROXSHMEM_MAX_TEAMS); P("world", ROXSHMEM_TEAM_WORLD);
P("shared", ROXSHMEM_TEAM_SHARED); P("invalid", ROXSHMEM_TEAM_INVALID + 100);
P("auto", ROXSHMEM_COLL_AUTO); P("oneshot", ROXSHMEM_COLL_ONESHOT); P("twoshot", ROXSHMEM_COLL_TWOSHOT);
P("oneshotmax", ROXSHMEM_COLL_ONESHOT_MAX);
P("round", ROXSHMEM_TEAM_WS_ROUND); P("status", ROXSHMEM_TEAM_WS_STATUS); P("aux", ROXSHMEM_TEAM_WS_AUX); P("grid", ROXSHMEM_TEAM_WS_GRID);
P("sig", ROXSHMEM_TEAM_WS_SIG); P("count", ROXSHMEM_TEAM_WS_COUNT); P("arrive", ROXSHMEM_TEAM_WS_ARRIVE);
P("ready", ROXSHMEM_TEAM_WS_READY); P("data", ROXSHMEM_TEAM_WS_DATA); P("min", ROXSHMEM_TEAM_WS_MIN);
P("c9", ROXSHMEM_CALL_COLL); P("c83", ROXSHMEM_CALL_BAD_TEAM); P("c84", ROXSHMEM_CALL_COLL_MISMATCH);
P("c85", ROXSHMEM_CALL_BAD_ARG); P("ba1", ROXSHMEM_BAD_ARG_ROOT); P("ba2", ROXSHMEM_BAD_ARG_OVERLAP);
P("ba3", ROXSHMEM_BAD_ARG_WORKSPACE); P("ba4", ROXSHMEM_BAD_ARG_NOT_MAPPED);
`)
	want := map[string]uint64{
		"magic": TeamMagic, "max": MaxTeams, "world": TeamWorld, "shared": TeamShared, "invalid": TeamInvalid + 100,
		"auto": CollAuto, "oneshot": CollOneshot, "twoshot": CollTwoshot, "oneshotmax": CollOneshotMax,
		"round": TeamWSRound, "status": TeamWSStatus, "aux": TeamWSAux, "grid": TeamWSGrid, "sig": TeamWSSig, "count": TeamWSCount,
		"arrive": TeamWSArrive, "ready": TeamWSReady, "data": TeamWSData, "min": TeamWSMin,
		"c9": CallColl, "c83": CallBadTeam, "c84": CallCollMismatch, "c85": CallBadArg,
		"ba1": BadArgRoot, "ba2": BadArgOverlap, "ba3": BadArgWorkspace, "ba4": BadArgNotMapped,
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("C %s = %#x (present %v), Go %#x", k, g, ok, w)
		}
	}
}

// TestCtxParity compares the device context table with state.h.
func TestCtxParity(t *testing.T) {
	checkStruct(t, []string{"state.h"}, "roxshmem_ctx_desc_t", CtxDesc{})
	checkStruct(t, []string{"state.h"}, "roxshmem_ctx_table_t", CtxTable{})
	got := runC(t, []string{"state.h"}, `
P("magic", ROXSHMEM_CTX_MAGIC); P("max", ROXSHMEM_MAX_CTXS); P("default", ROXSHMEM_CTX_DEFAULT);
P("invalid", ROXSHMEM_CTX_INVALID + 100); P("c86", ROXSHMEM_CALL_BAD_CTX);
`)
	want := map[string]uint64{"magic": CtxMagic, "max": MaxCtxs, "default": CtxDefault, "invalid": CtxInvalid + 100, "c86": CallBadCtx}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("C %s = %#x (present %v), Go %#x", k, g, ok, w)
		}
	}
}

// TestRingParity compares ring.h with the proxy's Go definition in package nic.
func TestRingParity(t *testing.T) {
	checkStruct(t, []string{"ring.h"}, "roxshmem_desc_t", nic.Desc{})
	got := runC(t, []string{"ring.h"}, `
P("sizeof.header", sizeof(roxshmem_ring_header_t));
F(roxshmem_ring_header_t, head); F(roxshmem_ring_header_t, tail);
F(roxshmem_ring_header_t, completed); F(roxshmem_ring_header_t, error);
P("op.nop", ROXSHMEM_OP_NOP); P("op.put", ROXSHMEM_OP_PUT); P("op.get", ROXSHMEM_OP_GET);
P("op.putsig", ROXSHMEM_OP_PUT_SIGNAL); P("op.amo", ROXSHMEM_OP_AMO); P("op.fence", ROXSHMEM_OP_FENCE);
P("op.quiet", ROXSHMEM_OP_QUIET);
P("amo.fetch", ROXSHMEM_AMO_FETCH); P("amo.set", ROXSHMEM_AMO_SET); P("amo.swap", ROXSHMEM_AMO_SWAP);
P("amo.cswap", ROXSHMEM_AMO_COMPARE_SWAP); P("amo.fadd", ROXSHMEM_AMO_FETCH_ADD);
P("amo.fand", ROXSHMEM_AMO_FETCH_AND); P("amo.for", ROXSHMEM_AMO_FETCH_OR); P("amo.fxor", ROXSHMEM_AMO_FETCH_XOR);
P("sig.set", ROXSHMEM_SIGNAL_SET); P("sig.add", ROXSHMEM_SIGNAL_ADD);
P("flags.cswap8", ROXSHMEM_DESC_FLAGS(ROXSHMEM_AMO_COMPARE_SWAP, 8));
P("flags.add4", ROXSHMEM_DESC_FLAGS(ROXSHMEM_SIGNAL_ADD, 4));
P("kindmask", ROXSHMEM_DESC_KIND_MASK); P("widthshift", ROXSHMEM_DESC_WIDTH_SHIFT);
P("allpes", ROXSHMEM_DESC_ALL_PES);
`)
	want := map[string]uint64{
		"sizeof.header": nic.RingHeaderSize, "allpes": nic.AllPEs,
		"head": nic.RingHeadOffset, "tail": nic.RingTailOffset,
		"completed": nic.RingCompletedOffset, "error": nic.RingErrorOffset,
		"head.size": 8, "tail.size": 8, "completed.size": 8, "error.size": 4,
		"op.nop": uint64(nic.OpNop), "op.put": uint64(nic.OpPut), "op.get": uint64(nic.OpGet),
		"op.putsig": uint64(nic.OpPutSignal), "op.amo": uint64(nic.OpAMO), "op.fence": uint64(nic.OpFence),
		"op.quiet":  uint64(nic.OpQuiet),
		"amo.fetch": uint64(nic.AMOFetch), "amo.set": uint64(nic.AMOSet), "amo.swap": uint64(nic.AMOSwap),
		"amo.cswap": uint64(nic.AMOCompareSwap), "amo.fadd": uint64(nic.AMOFetchAdd),
		"amo.fand": uint64(nic.AMOFetchAnd), "amo.for": uint64(nic.AMOFetchOr), "amo.fxor": uint64(nic.AMOFetchXor),
		"sig.set": uint64(nic.SignalSet), "sig.add": uint64(nic.SignalAdd),
		"flags.cswap8": uint64(nic.MakeFlags(uint32(nic.AMOCompareSwap), 8)),
		"flags.add4":   uint64(nic.MakeFlags(uint32(nic.SignalAdd), 4)),
		"kindmask":     nic.FlagKindMask, "widthshift": nic.FlagWidthShift,
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("C %s = %d (present %v), nic says %d", k, g, ok, w)
		}
	}
	if nic.DescSize != unsafe.Sizeof(nic.Desc{}) {
		t.Errorf("nic.DescSize %d != sizeof nic.Desc %d", nic.DescSize, unsafe.Sizeof(nic.Desc{}))
	}
}

func TestLitmusParity(t *testing.T) {
	checkStruct(t, []string{"litmus.h"}, "roxk_insn_t", LitmusInsn{})
	got := runC(t, []string{"litmus.h", "roxshmem.h"}, `
P("st", ROXK_L_ST); P("ld", ROXK_L_LD); P("put", ROXK_L_PUT); P("putnbi", ROXK_L_PUT_NBI);
P("get", ROXK_L_GET); P("getnbi", ROXK_L_GET_NBI); P("fadd", ROXK_L_FADD); P("swap", ROXK_L_SWAP);
P("cswap", ROXK_L_CSWAP); P("fetch", ROXK_L_FETCH); P("add", ROXK_L_ADD); P("set", ROXK_L_SET);
P("putsig", ROXK_L_PUTSIG); P("wait", ROXK_L_WAIT); P("fence", ROXK_L_FENCE); P("quiet", ROXK_L_QUIET);
P("barrier", ROXK_L_BARRIER); P("maxregs", ROXK_LITMUS_MAX_REGS);
P("eq", ROXSHMEM_CMP_EQ); P("ne", ROXSHMEM_CMP_NE); P("gt", ROXSHMEM_CMP_GT); P("le", ROXSHMEM_CMP_LE);
P("lt", ROXSHMEM_CMP_LT); P("ge", ROXSHMEM_CMP_GE);
`)
	want := map[string]uint64{
		"st": LitmusSt, "ld": LitmusLd, "put": LitmusPut, "putnbi": LitmusPutNBI, "get": LitmusGet,
		"getnbi": LitmusGetNBI, "fadd": LitmusFAdd, "swap": LitmusSwap, "cswap": LitmusCSwap,
		"fetch": LitmusFetch, "add": LitmusAdd, "set": LitmusSet, "putsig": LitmusPutSig, "wait": LitmusWait,
		"fence": LitmusFence, "quiet": LitmusQuiet, "barrier": LitmusBarrier, "maxregs": LitmusMaxRegs,
		"eq": CmpEQ, "ne": CmpNE, "gt": CmpGT, "le": CmpLE, "lt": CmpLT, "ge": CmpGE,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("C %s = %d, Go %d", k, got[k], w)
		}
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{"RingTailCache": "ring_tail_cache", "MyPE": "my_pe", "NPEs": "n_pes",
		"PeerBase": "peer_base", "Pad0": "pad0", "CEThreshold": "ce_threshold", "Seq": "seq"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}
