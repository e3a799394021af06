package memmodel

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// deviceCalls maps every call family of the device library (kernels/include/roxamen/roxshmem.h,
// ctx.h, coll.h; TYPE stands for each element type's name, OP for each reduction, BITS for each
// width) to the litmus instructions that state it, as apiCalls does for package shmem: "-" and a
// reason for a call with no memory effect the model speaks of.
var deviceCalls = map[string]string{
	"roxshmem_TYPE_p": "put", "roxshmem_TYPE_g": "get", "roxshmem_TYPE_put": "put, put x,y@q", "roxshmem_TYPE_get": "get, get r0,r1 x,y@q",
	"roxshmem_TYPE_put_nbi": "put_nbi, put_nbi from buffer", "roxshmem_TYPE_get_nbi": "get_nbi",
	"roxshmem_putBITS": "put, put x,y@q", "roxshmem_getBITS": "get, get r0,r1 x,y@q", "roxshmem_putBITS_nbi": "put_nbi, put_nbi from buffer", "roxshmem_getBITS_nbi": "get_nbi",
	"roxshmem_putmem": "put, put x,y@q", "roxshmem_getmem": "get, get into location", "roxshmem_putmem_nbi": "put_nbi, put_nbi from buffer",
	"roxshmem_getmem_nbi":      "get_nbi, get_nbi into location",
	"roxshmem_TYPE_atomic_add": "add", "roxshmem_TYPE_atomic_and": "and", "roxshmem_TYPE_atomic_compare_swap": "cswap",
	"roxshmem_TYPE_atomic_fetch": "fetch", "roxshmem_TYPE_atomic_fetch_add": "fadd", "roxshmem_TYPE_atomic_fetch_and": "fand",
	"roxshmem_TYPE_atomic_fetch_inc": "finc", "roxshmem_TYPE_atomic_fetch_or": "for", "roxshmem_TYPE_atomic_fetch_xor": "fxor",
	"roxshmem_TYPE_atomic_inc": "inc", "roxshmem_TYPE_atomic_or": "or", "roxshmem_TYPE_atomic_set": "set",
	"roxshmem_TYPE_atomic_swap": "swap", "roxshmem_TYPE_atomic_xor": "xor",
	"roxshmem_putmem_signal": "putsig", "roxshmem_putmem_signal_nbi": "putsig_nbi",
	"roxshmem_signal_fetch": "sigfetch", "roxshmem_signal_wait_until": "signal_wait",
	"roxshmem_TYPE_wait_until": "wait", "roxshmem_TYPE_test": "test",
	"roxshmem_fence": "fence", "roxshmem_quiet": "quiet", "roxshmem_barrier_all": "barrier", "roxshmem_sync_all": "sync",
	"roxshmem_barrier": "barrier {team}", "roxshmem_team_sync": "sync {team}",
	"roxshmem_ptr":            "st x@q, ld r x@q",
	"roxshmem_TYPE_broadcast": "broadcast", "roxshmem_broadcastmem": "broadcast", "roxshmem_TYPE_fcollect": "fcollect",
	"roxshmem_fcollectmem": "fcollect", "roxshmem_TYPE_collect": "collect", "roxshmem_collectmem": "collect",
	"roxshmem_TYPE_alltoall": "alltoall", "roxshmem_alltoallmem": "alltoall", "roxshmem_TYPE_OP_reduce": "allreduce",
	"roxshmemx_TYPE_OP_reduce_scatter": "reduce_scatter",

	// contexts (ctx.h): the same calls on a named context
	"roxshmem_ctx_TYPE_p": "put on ctx", "roxshmem_ctx_TYPE_g": "get on ctx", "roxshmem_ctx_TYPE_put": "put on ctx",
	"roxshmem_ctx_TYPE_get": "get on ctx", "roxshmem_ctx_TYPE_put_nbi": "put_nbi on ctx", "roxshmem_ctx_TYPE_get_nbi": "get_nbi on ctx",
	"roxshmem_ctx_putBITS": "put on ctx", "roxshmem_ctx_getBITS": "get on ctx", "roxshmem_ctx_putBITS_nbi": "put_nbi on ctx",
	"roxshmem_ctx_getBITS_nbi": "get_nbi on ctx", "roxshmem_ctx_putmem": "put on ctx", "roxshmem_ctx_getmem": "get on ctx",
	"roxshmem_ctx_putmem_nbi": "put_nbi on ctx", "roxshmem_ctx_getmem_nbi": "get_nbi on ctx",
	"roxshmem_ctx_TYPE_atomic_add": "add on ctx", "roxshmem_ctx_TYPE_atomic_and": "and on ctx",
	"roxshmem_ctx_TYPE_atomic_compare_swap": "cswap on ctx", "roxshmem_ctx_TYPE_atomic_fetch": "fetch on ctx",
	"roxshmem_ctx_TYPE_atomic_fetch_add": "fadd on ctx", "roxshmem_ctx_TYPE_atomic_fetch_and": "fand on ctx",
	"roxshmem_ctx_TYPE_atomic_fetch_inc": "finc on ctx", "roxshmem_ctx_TYPE_atomic_fetch_or": "for on ctx",
	"roxshmem_ctx_TYPE_atomic_fetch_xor": "fxor on ctx", "roxshmem_ctx_TYPE_atomic_inc": "inc on ctx",
	"roxshmem_ctx_TYPE_atomic_or": "or on ctx", "roxshmem_ctx_TYPE_atomic_set": "set on ctx",
	"roxshmem_ctx_TYPE_atomic_swap": "swap on ctx", "roxshmem_ctx_TYPE_atomic_xor": "xor on ctx",
	"roxshmem_ctx_putmem_signal": "putsig on ctx", "roxshmem_ctx_putmem_signal_nbi": "putsig_nbi on ctx",
	"roxshmem_ctx_fence": "fence on ctx", "roxshmem_ctx_quiet": "quiet on ctx", "roxshmem_ctx_destroy": "ctx_destroy on ctx",
	"roxshmem_ctx_create": "- makes a context: its operations are the instructions' `on NAME` forms",

	// the group forms: the thread form's events, made by every thread of a warp or block together
	"roxshmemx_putmem_warp": "put_warp", "roxshmemx_putmem_block": "put_block", "roxshmemx_putmem_nbi_warp": "put_nbi_warp",
	"roxshmemx_putmem_nbi_block": "put_nbi_block", "roxshmemx_getmem_warp": "get_warp", "roxshmemx_getmem_block": "get_block",
	"roxshmemx_getmem_nbi_warp": "get_nbi_warp", "roxshmemx_getmem_nbi_block": "get_nbi_block",
	"roxshmemx_TYPE_put_warp": "put_warp", "roxshmemx_TYPE_put_block": "put_block", "roxshmemx_TYPE_get_warp": "get_warp",
	"roxshmemx_TYPE_get_block":     "get_block",
	"roxshmemx_putmem_signal_warp": "putsig_warp", "roxshmemx_putmem_signal_block": "putsig_block",
	"roxshmemx_putmem_signal_nbi_warp": "putsig_nbi_warp", "roxshmemx_putmem_signal_nbi_block": "putsig_nbi_block",
	"roxshmemx_ctx_putmem_warp": "put_warp on ctx", "roxshmemx_ctx_putmem_block": "put_block on ctx",
	"roxshmemx_ctx_putmem_nbi_warp": "put_nbi_warp on ctx", "roxshmemx_ctx_putmem_nbi_block": "put_nbi_block on ctx",
	"roxshmemx_ctx_getmem_warp": "get_warp on ctx", "roxshmemx_ctx_getmem_block": "get_block on ctx",
	"roxshmemx_ctx_getmem_nbi_warp": "get_nbi_warp on ctx", "roxshmemx_ctx_getmem_nbi_block": "get_nbi_block on ctx",
	"roxshmemx_ctx_TYPE_put_warp": "put_warp on ctx", "roxshmemx_ctx_TYPE_put_block": "put_block on ctx",
	"roxshmemx_ctx_TYPE_get_warp": "get_warp on ctx", "roxshmemx_ctx_TYPE_get_block": "get_block on ctx",
	"roxshmemx_ctx_putmem_signal_warp": "putsig_warp on ctx", "roxshmemx_ctx_putmem_signal_block": "putsig_block on ctx",
	"roxshmemx_ctx_putmem_signal_nbi_warp": "putsig_nbi_warp on ctx", "roxshmemx_ctx_putmem_signal_nbi_block": "putsig_nbi_block on ctx",
	"roxshmemx_ctx_quiet_warp": "quiet_warp, quiet_warp on ctx", "roxshmemx_ctx_quiet_block": "quiet_block, quiet_block on ctx",
	"roxshmemx_barrier_all_block": "barrier_all_block", "roxshmemx_sync_all_block": "sync_all_block",
	"roxshmemx_barrier_warp": "barrier_warp {team}", "roxshmemx_barrier_block": "barrier_block {team}",
	"roxshmemx_team_sync_warp": "sync_warp {team}", "roxshmemx_team_sync_block": "sync_block {team}",
	"roxshmemx_broadcastmem_warp": "broadcast_warp", "roxshmemx_broadcastmem_block": "broadcast_block",
	"roxshmemx_TYPE_broadcast_block": "broadcast_block", "roxshmemx_fcollectmem_warp": "fcollect_warp",
	"roxshmemx_fcollectmem_block": "fcollect_block", "roxshmemx_TYPE_fcollect_block": "fcollect_block",
	"roxshmemx_collectmem_warp": "collect_warp", "roxshmemx_collectmem_block": "collect_block",
	"roxshmemx_TYPE_collect_block": "collect_block", "roxshmemx_alltoallmem_warp": "alltoall_warp",
	"roxshmemx_alltoallmem_block": "alltoall_block", "roxshmemx_TYPE_alltoall_block": "alltoall_block",
	"roxshmemx_TYPE_OP_reduce_warp": "allreduce_warp", "roxshmemx_TYPE_OP_reduce_block": "allreduce_block",
	"roxshmemx_TYPE_OP_reduce_scatter_warp": "reduce_scatter_warp", "roxshmemx_TYPE_OP_reduce_scatter_block": "reduce_scatter_block",

	// the copy engine (roxshmemx_putmem_ce: through the proxy's ring) and AMD's SDMA queues
	// (MODEL.md §9: the put it is; kernels' SDMA litmus test runs the suite over that route)
	"roxshmemx_putmem_ce": "put_ce", "roxshmemx_putmem_ce_nbi": "put_ce_nbi", "roxshmemx_putmem_ce_block": "put_ce_block",
	"roxshmemx_putmem_ce_nbi_block": "put_ce_nbi_block",
	"roxshmemx_ctx_putmem_ce":       "put_ce on ctx", "roxshmemx_ctx_putmem_ce_nbi": "put_ce_nbi on ctx",
	"roxshmemx_ctx_putmem_ce_block": "put_ce_block on ctx", "roxshmemx_ctx_putmem_ce_nbi_block": "put_ce_nbi_block on ctx",
	"roxshmemx_putmem_sdma": "put", "roxshmemx_putmem_sdma_nbi": "put_nbi, put_nbi from buffer", "roxshmemx_putmem_sdma_block": "put_block",
	"roxshmemx_putmem_sdma_nbi_block": "put_nbi_block",
	"roxshmemx_putmem_signal_sdma":    "putsig", "roxshmemx_putmem_signal_sdma_nbi": "putsig_nbi",
	"roxshmemx_putmem_signal_sdma_block": "putsig_block", "roxshmemx_putmem_signal_sdma_nbi_block": "putsig_nbi_block",
}

// deviceNoMemory lists the device library's calls with no memory effect of their own: accessors,
// the command ring's producer (roxshmemx_ring_push) and the SDMA route's packet encoders
// (roxshmem_sdma_*), which the calls above use.
var deviceNoMemory = []string{"roxshmemx_ring_push", "roxshmem_my_pe", "roxshmem_n_pes", "roxshmem_team_my_pe", "roxshmem_team_n_pes",
	"roxshmem_team_translate_pe", "roxshmemx_aborted", "roxshmem_sdma_atomic", "roxshmem_sdma_copy_linear",
	"roxshmem_sdma_fence", "roxshmem_sdma_header", "roxshmem_sdma_hi", "roxshmem_sdma_lo", "roxshmem_sdma_nop",
	"roxshmem_sdma_poll_mem", "roxshmem_sdma_put_dwords", "roxshmem_sdma_trap"}

// deviceTypes are the element type names of the typed device calls (roxshmem_TYPE_...).
var deviceTypes = []string{"longdouble", "longlong", "ulonglong", "schar", "uchar", "ushort", "uint", "ulong", "int8",
	"int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "size", "ptrdiff", "half", "bfloat16", "float",
	"double", "char", "short", "int", "long"}

// deviceFamilies preprocesses roxshmem.h for the CPU (as kernels' CPU-library tests compile it)
// and returns the call families of every function it defines whose name has the roxshmem_ or
// roxshmemx_ prefix.
func deviceFamilies(t *testing.T) []string {
	var cxx string
	for _, c := range []string{"clang-19", "clang++", "g++", "c++"} {
		if p, err := exec.LookPath(c); err == nil {
			cxx = p
			break
		}
	}
	if cxx == "" {
		t.Skip("no C++ compiler (clang-19, clang++, g++, c++) to preprocess the device headers")
	}
	cmd := exec.Command(cxx, "-x", "c++", "-std=c++17", "-E", "-P", "-D__HIP__", "-D__device__=ROXDEVICEFN", "-D__global__=",
		"-D__constant__=", "-D__host__=", "-D__shared__=", "-I../kernels/include", "-")
	cmd.Stdin = strings.NewReader("#include \"roxamen/roxshmem.h\"\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("preprocessing roxamen/roxshmem.h with %s: %v", cxx, err)
	}
	src := strings.Join(strings.Fields(string(out)), " ")
	def := regexp.MustCompile(`ROXDEVICEFN inline (?:__attribute__\(\(\w+\)\) )?[\w\s*]*?\b(roxshmemx?_\w+) ?\(`)
	seen := map[string]bool{}
	for _, m := range def.FindAllStringSubmatch(src, -1) {
		seen[deviceFamily(m[1])] = true
	}
	var fams []string
	for f := range seen {
		fams = append(fams, f)
	}
	sort.Strings(fams)
	return fams
}

var (
	reduceOp = regexp.MustCompile(`^TYPE_(sum|prod|min|max|and|or|xor)_`)
	widthOp  = regexp.MustCompile(`^(put|get)(8|16|32|64|128)`)
)

// deviceFamily is a device call's family: its element type, reduction and width replaced.
func deviceFamily(name string) string {
	pre := "roxshmem_"
	if strings.HasPrefix(name, "roxshmemx_") {
		pre = "roxshmemx_"
	}
	rest := strings.TrimPrefix(name, pre)
	if r, ok := strings.CutPrefix(rest, "ctx_"); ok {
		pre, rest = pre+"ctx_", r
	}
	for _, ty := range deviceTypes {
		if r, ok := strings.CutPrefix(rest, ty+"_"); ok {
			rest = "TYPE_" + r
			break
		}
	}
	rest = reduceOp.ReplaceAllString(rest, "TYPE_OP_")
	rest = widthOp.ReplaceAllString(rest, "${1}BITS")
	return pre + rest
}

// deviceAPITable is API-device.md.
func deviceAPITable(t *testing.T) string {
	uses := instrUses(t)
	var b strings.Builder
	b.WriteString("# The device library's calls in the litmus suite\n\n")
	b.WriteString("Generated by `ROX_UPDATE_API=1 go test -run TestDeviceAPITable ./memmodel` from the table in\n")
	b.WriteString("`memmodel/device_api_test.go` and the tests of `memmodel/testdata`; `TestDeviceAPITable` fails when\n")
	b.WriteString("this file is not current or a call of the device library (`kernels/include/roxamen/roxshmem.h` and the\n")
	b.WriteString("headers it includes) is missing from the table. A call stands for its family: TYPE is each element\n")
	b.WriteString("type's name, OP each reduction, BITS each width. The warp and block forms and the copy-engine puts are\n")
	b.WriteString("call variants of feature `device_calls` (MODEL.md §1), which no runner runs yet: the model states them.\n\n")
	b.WriteString("| call | litmus instructions | tests |\n| --- | --- | --- |\n")
	var calls []string
	for c := range deviceCalls {
		calls = append(calls, c)
	}
	sort.Strings(calls)
	covered, uncovered := 0, 0
	for _, c := range calls {
		row := deviceCalls[c]
		if strings.HasPrefix(row, "- ") {
			fmt.Fprintf(&b, "| `%s` | %s | |\n", c, row)
			continue
		}
		var tests, toks []string
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
		list, more := tests, ""
		if len(list) > 6 {
			list, more = list[:6], fmt.Sprintf(" and %d more", len(tests)-6)
		}
		cell := "none"
		if len(list) > 0 {
			cell = strings.Join(list, ", ") + more
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", c, strings.Join(toks, ", "), cell)
	}
	fmt.Fprintf(&b, "\n%d calls with tests, %d without.\n\nNo memory effect: %s.\n", covered, uncovered, "`"+strings.Join(deviceNoMemory, "`, `")+"`")
	return b.String()
}

// API-device.md is current, every call family of the device library is in deviceCalls or
// deviceNoMemory, and each of the table's instructions is one the suite's tests use (no row
// without tests).
func TestDeviceAPITable(t *testing.T) {
	checkCallTable(t, callTable{call: "device call ", lib: "the device library", stated: "deviceCalls", none: "deviceNoMemory",
		file: "API-device.md", test: "TestDeviceAPITable"}, deviceFamilies(t), deviceCalls, deviceNoMemory, deviceAPITable(t))
}
