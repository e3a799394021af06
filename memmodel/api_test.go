package memmodel

import (
	"fmt"
	"go/ast"
	goparser "go/parser"
	gotoken "go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// streamUncovered is why the stream-ordered calls have no test: a stream is an agent of its own,
// whose operations each complete before its next one starts and which SyncStream joins to the
// host thread; the language has no such column (a thread orders only by fence and quiet, and
// nothing joins two threads), and no runner has GPU streams.
const streamUncovered = "uncovered: a stream is an agent of its own (each operation complete before its next starts, SyncStream joins it to the host thread), which the language cannot state; no runner has GPU streams"

// apiCalls maps every exported call of package shmem to the litmus instructions that state it
// (instrTokens' names), or to why none does: "-" and a reason for a call with no memory effect
// the model speaks of, "uncovered:" and a reason for one the suite does not cover yet.
var apiCalls = map[string]string{
	"Sym.P": "put", "Sym.Put": "put, put x,y@q", "Sym.PutNBI": "put_nbi, put_nbi from buffer",
	"Sym.G": "get", "Sym.Get": "get, get into location, get r0,r1 x,y@q", "Sym.GetNBI": "get_nbi, get_nbi into location",
	"Sym.Ptr": "st x@q, ld r x@q", "Sym.Local": "st, ld", "Mem.Local": "st, ld",
	"AtomicAdd": "add", "AtomicInc": "inc", "AtomicSet": "set", "AtomicSwap": "swap",
	"AtomicCompareSwap": "cswap", "AtomicFetch": "fetch", "AtomicFetchAdd": "fadd", "AtomicFetchInc": "finc",
	"AtomicAnd": "and", "AtomicOr": "or", "AtomicXor": "xor",
	"AtomicFetchAnd": "fand", "AtomicFetchOr": "for", "AtomicFetchXor": "fxor",
	"AtomicFetchNBI": "fetch_nbi", "AtomicFetchAddNBI": "fadd_nbi", "AtomicFetchIncNBI": "finc_nbi",
	"AtomicSwapNBI": "swap_nbi", "AtomicCompareSwapNBI": "cswap_nbi",
	"AtomicFetchAndNBI": "fand_nbi", "AtomicFetchOrNBI": "for_nbi", "AtomicFetchXorNBI": "fxor_nbi",
	"CtxP": "put on ctx", "CtxPut": "put on ctx", "CtxPutNBI": "put_nbi on ctx",
	"CtxG": "get on ctx", "CtxGet": "get on ctx",
	"CtxAtomicAdd": "add on ctx", "CtxAtomicSet": "set on ctx", "CtxAtomicSwap": "swap on ctx",
	"CtxAtomicCompareSwap": "cswap on ctx", "CtxAtomicFetch": "fetch on ctx", "CtxAtomicFetchAdd": "fadd on ctx",
	"CtxAtomicFetchNBI": "fetch_nbi on ctx", "CtxAtomicFetchAddNBI": "fadd_nbi on ctx",
	"CtxAtomicSwapNBI": "swap_nbi on ctx", "CtxAtomicCompareSwapNBI": "cswap_nbi on ctx",
	"Ctx.Fence": "fence on ctx", "Ctx.Quiet": "quiet on ctx", "Ctx.Destroy": "ctx_destroy on ctx",
	"PutSignal": "putsig", "PutSignalNBI": "putsig_nbi", "SignalFetch": "sigfetch", "SignalWaitUntil": "signal_wait",
	"WaitUntil": "wait", "WaitUntilAll": "wait_all", "WaitUntilAny": "wait_any", "WaitUntilSome": "wait_some",
	"Test": "test", "TestAll": "test_all", "TestAny": "test_any", "TestSome": "test_some",
	"World.Fence": "fence", "World.Quiet": "quiet", "World.BarrierAll": "barrier", "World.SyncAll": "sync",
	"Team.Barrier": "barrier {team}", "Team.Sync": "sync {team}",
	"AllReduce": "allreduce", "Broadcast": "broadcast", "AllToAll": "alltoall", "AllToAlls": "alltoalls",
	"Collect": "collect", "FCollect": "fcollect", "ReduceScatter": "reduce_scatter",

	"Sym.IPut": "iput", "Sym.IGet": "iget", "World.PEQuiet": "pe_quiet",
	"World.Malloc": "malloc", "World.Calloc": "calloc", "World.Realloc": "realloc", "World.Align": "align",
	"World.Free": "free", "Alloc": "calloc", // Alloc is Calloc of n elements
	"World.CreateCtx":       "nostore, quiet on ctx", // SERIALIZED and PRIVATE are promises with no memory effect
	"World.Finalize":        "- ends the program: its quiet and barrier complete every operation, which the final state (read after all complete) already assumes; no runner can go on after it",
	"World.GlobalExit":      "- ends every PE",
	"PutOnStream":           streamUncovered,
	"PutSignalOnStream":     streamUncovered,
	"SignalWaitOnStream":    streamUncovered,
	"AllGatherOnStream":     streamUncovered,
	"AllReduceOnStream":     streamUncovered,
	"AllToAllOnStream":      streamUncovered,
	"BroadcastOnStream":     streamUncovered,
	"ReduceScatterOnStream": streamUncovered,
	"World.BarrierOnStream": streamUncovered,
	"Team.BarrierOnStream":  streamUncovered,
	"World.QuietOnStream":   streamUncovered,
	"World.SyncStream":      streamUncovered,
	"Team.Destroy":          "- releases a team; orders nothing the model states",
	"Team.Split2D":          "- makes teams (the suite's teams come from SplitStrided)",
	"Team.SplitStrided":     "- makes the teams of barrier {team} ... before a test runs",
}

// noMemory lists calls with no memory effect: accessors, setup, conversions, modules.
var noMemory = []string{"As", "BuildVersion.String", "Version", "WithLauncherEnv", "BFloat16.Float32", "BFloat16From", "Cmp.String", "Ctx.Options",
	"CtxOption.String", "Float16.Float32", "Float16From", "Init", "InitReport.String",
	"Mem.Device", "Mem.Offset", "Mem.Size", "Module.Elapsed", "Module.Global", "Module.Launch", "Module.LaunchAll",
	"Module.LaunchOn", "Module.Stream", "Module.Sync", "Module.Unload", "Op.String", "RegisterDeviceRecord",
	"Sym.Device", "Sym.Len", "Sym.Mem", "Sym.Slice", "SymOf", "Team.Algorithm", "Team.Handle",
	"Team.MyPE", "Team.NPEs", "Team.StreamAlgorithm", "Team.StreamBlocks", "Team.String", "Team.TranslatePE", "Team.WorldPE",
	"WithHeapSize", "WithTimeout", "World.Connections", "World.Device", "World.InitReport", "World.LoadModule",
	"World.LocalNPEs", "World.LocalPE", "World.MyPE", "World.NPEs", "World.NewStream", "World.Ordering", "World.AdoptStream", "World.LinkState",
	"World.TeamShared", "World.TeamWorld", "World.Timeout"}

// shmemCalls lists package shmem's exported functions and methods of exported types.
func shmemCalls(t *testing.T) []string {
	files, err := filepath.Glob("../shmem/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("../shmem: %d files, %v", len(files), err)
	}
	fs := gotoken.NewFileSet()
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := goparser.ParseFile(fs, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil {
				typ := fd.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if ix, ok := typ.(*ast.IndexExpr); ok {
					typ = ix.X
				}
				id, ok := typ.(*ast.Ident)
				if !ok || !id.IsExported() {
					continue
				}
				name = id.Name + "." + name
			}
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// instrTokens names what instruction in (of column pe) exercises, in apiCalls' terms.
func instrTokens(in Instr, pe int) []string {
	base := in.name()
	if in.NBI && in.Call == "" { // a call variant's name says _nbi itself (putsig_nbi_warp)
		base += "_nbi"
	}
	var ts []string
	switch {
	case in.Ctx != "":
		ts = append(ts, base+" on ctx")
	case in.Team != nil && (in.Op == OpBarrier || in.Op == OpSync): // Team.Barrier, Team.Sync
		ts = append(ts, base+" {team}")
	case in.Team != nil: // the other collectives take their team as an argument
		ts = append(ts, base)
	case in.elems() && in.Call == "" && in.Op == OpPut:
		ts = append(ts, "put x,y@q")
	case in.elems() && in.Call == "":
		ts = append(ts, "get r0,r1 x,y@q")
	case in.Src.Var != "":
		ts = append(ts, base+" from buffer")
	case in.Dst.Var != "":
		ts = append(ts, base+" into location")
	case in.Op == OpSt && in.Loc.PE != pe:
		ts = append(ts, "st x@q")
	case in.Op == OpLd && in.Loc.PE != pe:
		ts = append(ts, "ld r x@q")
	default:
		ts = append(ts, base)
	}
	return ts
}

// instrUses maps each instruction token (instrTokens) to the suite's tests that use it.
func instrUses(t *testing.T) map[string][]string {
	uses := map[string][]string{}
	for _, tt := range suite(t) {
		seen := map[string]bool{}
		if len(tt.NoStore) > 0 {
			seen["nostore"] = true
			uses["nostore"] = append(uses["nostore"], tt.Name)
		}
		for _, c := range tt.Columns {
			for _, in := range c.Instrs {
				for _, k := range instrTokens(in, c.PE) {
					if !seen[k] {
						seen[k] = true
						uses[k] = append(uses[k], tt.Name)
					}
				}
			}
		}
	}
	return uses
}

// apiTable is API.md: each call of package shmem, the instructions that state it and the suite's
// tests that use them.
func apiTable(t *testing.T) string {
	uses := instrUses(t)
	var b strings.Builder
	b.WriteString("# Package shmem's calls in the litmus suite\n\n")
	b.WriteString("Generated by `ROX_UPDATE_API=1 go test -run TestAPITable ./memmodel` from the table in\n")
	b.WriteString("`memmodel/api_test.go` and the tests of `memmodel/testdata`; `TestAPITable` fails when this file\n")
	b.WriteString("is not current or a call of package shmem is missing from the table. A call with no memory effect\n")
	b.WriteString("the model speaks of (accessors, setup, conversions, modules) is listed at the end.\n\n")
	b.WriteString("| call | litmus instructions | tests |\n| --- | --- | --- |\n")
	var calls []string
	for c := range apiCalls {
		calls = append(calls, c)
	}
	sort.Strings(calls)
	covered, uncovered := 0, 0
	for _, c := range calls {
		row := apiCalls[c]
		if strings.HasPrefix(row, "- ") || strings.HasPrefix(row, "uncovered: ") {
			if strings.HasPrefix(row, "uncovered: ") {
				uncovered++
			}
			fmt.Fprintf(&b, "| `%s` | %s | |\n", c, row)
			continue
		}
		var tests []string
		var toks []string
		for _, tok := range strings.Split(row, ", ") {
			toks = append(toks, "`"+tok+"`")
			tests = append(tests, uses[tok]...)
		}
		sort.Strings(tests)
		tests = slices.Compact(tests)
		if len(tests) > 0 {
			covered++
		} else {
			uncovered++
		}
		list := tests
		more := ""
		if len(list) > 8 {
			list, more = list[:8], fmt.Sprintf(" and %d more", len(tests)-8)
		}
		cell := "none"
		if len(list) > 0 {
			cell = strings.Join(list, ", ") + more
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", c, strings.Join(toks, ", "), cell)
	}
	fmt.Fprintf(&b, "\n%d calls with tests, %d without.\n\nNo memory effect: %s.\n", covered, uncovered, "`"+strings.Join(noMemory, "`, `")+"`")
	return b.String()
}

// API.md is current, and every exported call of package shmem is in apiCalls or noMemory.
func TestAPITable(t *testing.T) {
	checkCallTable(t, callTable{call: "shmem.", lib: "package shmem", stated: "apiCalls", none: "noMemory", file: "API.md", test: "TestAPITable"},
		shmemCalls(t), apiCalls, noMemory, apiTable(t))
}

// callTable names what checkCallTable checks, for its messages.
type callTable struct{ call, lib, stated, none, file, test string }

// checkCallTable fails t where a call the library has is in neither stated nor none, where either
// names a call the library no longer has, and where the table file is not want (ROX_UPDATE_API=1
// writes it).
func checkCallTable(t *testing.T, ct callTable, calls []string, stated map[string]string, none []string, want string) {
	t.Helper()
	for _, c := range calls {
		if _, ok := stated[c]; !ok && !slices.Contains(none, c) {
			t.Errorf("%s%s is in neither %s nor %s: say which instructions state it", ct.call, c, ct.stated, ct.none)
		}
	}
	for c := range stated {
		if !slices.Contains(calls, c) {
			t.Errorf("%s names %s, which %s no longer has", ct.stated, c, ct.lib)
		}
	}
	for _, c := range none {
		if !slices.Contains(calls, c) {
			t.Errorf("%s names %s, which %s no longer has", ct.none, c, ct.lib)
		}
	}
	if os.Getenv("ROX_UPDATE_API") != "" {
		if err := os.WriteFile(ct.file, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(ct.file)
	if err != nil || string(got) != want {
		t.Errorf("%s is not current (%v): run ROX_UPDATE_API=1 go test -run %s ./memmodel", ct.file, err, ct.test)
	}
}
