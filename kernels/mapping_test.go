package kernels

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/roxamen/roxamen/kernels/internal/build"
)

// needClang skips when clang-19 is absent (CI installs it from .ci/kernels-deps.txt).
func needClang(t *testing.T) {
	t.Helper()
	if _, err := build.Tool("clang-19"); errors.Is(err, build.ErrNoClang) {
		t.Skip("clang-19 not installed: ", err)
	}
}

// probeFuncs compiles testdata/probes.hip for target with defines and returns each probe's
// instructions: llvm-objdump-19's disassembly of the code object on amdgcn, PTX text on nvptx.
// Each build is made once per test binary and shared (TestMapping and TestMappingCtx read the
// same ones, seconds of clang each); callers only read the result.
func probeFuncs(t *testing.T, target build.Target, defines ...string) map[string][]string {
	t.Helper()
	key := target.Arch + " " + strings.Join(defines, " ")
	v, _ := probeBuilds.LoadOrStore(key, &probeBuild{})
	b := v.(*probeBuild)
	b.once.Do(func() { b.funcs, b.err = buildProbes(target, defines) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.funcs
}

var probeBuilds sync.Map // target and defines -> *probeBuild

type probeBuild struct {
	once  sync.Once
	funcs map[string][]string
	err   error
}

func buildProbes(target build.Target, defines []string) (map[string][]string, error) {
	dir, err := os.MkdirTemp("", "roxprobes")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "probes"+target.Ext())
	if err := build.Compile(".", target, "testdata/probes.hip", out, append(defines, "ROXSHMEM_INLINE_ALL")...); err != nil {
		return nil, err
	}
	var text string
	if target.AMD {
		objdump, err := build.Tool("llvm-objdump-19")
		if err != nil {
			return nil, err
		}
		b, err := exec.Command(objdump, "-d", "--no-show-raw-insn", out).Output()
		if err != nil {
			return nil, fmt.Errorf("llvm-objdump-19: %v", err)
		}
		text = string(b)
	} else {
		b, err := os.ReadFile(out)
		if err != nil {
			return nil, err
		}
		text = string(b)
	}
	return splitFuncs(text, target.AMD), nil
}

var (
	amdSym  = regexp.MustCompile(`^[0-9a-f]+ <(\w+)>:`)
	ptxSym  = regexp.MustCompile(`^\.visible \.entry (\w+)\(`)
	amdNote = regexp.MustCompile(`\s*(//|;).*$`) // llvm-objdump comments
	ptxNote = regexp.MustCompile(`\s*//.*$`)
)

// splitFuncs cuts a disassembly or PTX file into functions, one trimmed instruction per line.
func splitFuncs(text string, amd bool) map[string][]string {
	funcs := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(text, "\n") {
		sym := ptxSym
		if amd {
			sym = amdSym
		}
		if m := sym.FindStringSubmatch(line); m != nil {
			cur = m[1]
			continue
		}
		if cur == "" {
			continue
		}
		note := ptxNote
		if amd {
			note = amdNote
		}
		l := strings.TrimSpace(note.ReplaceAllString(line, ""))
		l = strings.Join(strings.Fields(l), " ")
		if l == "" || strings.HasPrefix(l, "s_nop") || strings.HasPrefix(l, ".") {
			continue
		}
		funcs[cur] = append(funcs[cur], l)
	}
	return funcs
}

// rule is one promise of MAPPING.md about one probe.
type rule struct {
	arch    string // regexp on the target arch
	probe   string
	mode    int      // 1 Strict, 2 CacheBypass, 0 both
	must    []string // each regexp matches some instruction
	mustNot []string // no instruction matches
	every   [2]string
	// every[0] selects instructions, each of which must match every[1]
	order [2]string // an instruction matching order[0] precedes one matching order[1]
	// seq: consecutive instructions of the probe's memory stream (memStream) match these, in
	// this order, somewhere in the probe: the row's instructions with their waits between and
	// nothing else that touches memory. Every AMD row has one.
	seq [][]string
}

// vmWait is the wait AMDGPUUsage puts between a write-back and what it must complete before.
const vmWait = `^s_waitcnt vmcnt\(0\)( lgkmcnt\(0\))?$`

var (
	memInsn    = regexp.MustCompile(`^(buffer_|s_waitcnt|global_|flat_|scratch_|s_barrier$)`)
	scalarWait = regexp.MustCompile(`^s_waitcnt lgkmcnt\(\d+\)$`)
	// the abort recorder's RMWs on abort->first (+8) and abort->count (+16): they run only when
	// a wait gives up, and sit in the disassembly between a wait's polls and its acquire
	abortRMW = regexp.MustCompile(`^(flat|global)_atomic_(cmpswap|add)_x2 v\[\d+:\d+\], v\[\d+:\d+\] offset:(8|16)( sc1| glc)?$`)
)

// memStream is what orders memory in a probe: vector memory and cache instructions, s_barrier
// and the waits on vector memory. Scalar-only waits (lgkmcnt), the abort recorder and ALU
// instructions are left out;
// a run of waits counts as one, a vmcnt(0) wait if any of the run is one.
func memStream(ins []string) []string {
	var out []string
	vm := regexp.MustCompile(vmWait)
	for _, l := range ins {
		if !memInsn.MatchString(l) || scalarWait.MatchString(l) || abortRMW.MatchString(l) {
			continue
		}
		if n := len(out); n > 0 && strings.HasPrefix(l, "s_waitcnt") && strings.HasPrefix(out[n-1], "s_waitcnt") {
			if vm.MatchString(l) {
				out[n-1] = l
			}
			continue
		}
		out = append(out, l)
	}
	return out
}

// seqAt returns where seq matches consecutive instructions of stream, or -1.
func seqAt(stream, seq []string) int {
	res := make([]*regexp.Regexp, len(seq))
	for i, p := range seq {
		res[i] = regexp.MustCompile(p)
	}
	for i := 0; i+len(seq) <= len(stream); i++ {
		ok := true
		for k, re := range res {
			if !re.MatchString(stream[i+k]) {
				ok = false
				break
			}
		}
		if ok {
			return i
		}
	}
	return -1
}

const (
	strict = 1
	bypass = 2
)

var gfx942Rules = []rule{
	{arch: "gfx942", probe: "probe_fence", mode: strict, must: []string{`^buffer_wbl2 sc0 sc1$`, `^buffer_inv sc0 sc1$`}, seq: [][]string{{`^buffer_wbl2 sc0 sc1$`, vmWait, `^buffer_inv sc0 sc1$`}}},
	{arch: "gfx942", probe: "probe_fence", mode: bypass, must: []string{`^s_waitcnt vmcnt\(0\)$`}, mustNot: []string{`buffer_wbl2`, `buffer_inv`}, seq: [][]string{{vmWait}}},
	{arch: "gfx942", probe: "probe_quiet", mode: strict, must: []string{`^buffer_wbl2 sc0 sc1$`, `^buffer_inv sc0 sc1$`}, seq: [][]string{{`^buffer_wbl2 sc0 sc1$`, vmWait, `^buffer_inv sc0 sc1$`}}},
	{arch: "gfx942", probe: "probe_quiet", mode: bypass, must: []string{`^buffer_wbl2 sc0 sc1$`}, mustNot: []string{`buffer_inv`}, seq: [][]string{{vmWait, `^buffer_wbl2 sc0 sc1$`, vmWait}}},
	{arch: "gfx942", probe: "probe_wait_until", mode: strict, must: []string{`_load_dwordx2 .* sc0 sc1$`, `^buffer_inv sc0 sc1$`}, mustNot: []string{`buffer_wbl2`}, seq: [][]string{{`_load_dwordx2 .* sc0 sc1$`, vmWait, `^buffer_inv sc0 sc1$`}}},
	{arch: "gfx942", probe: "probe_wait_until", mode: bypass, must: []string{`_load_dwordx2 .* sc0 sc1$`, `^buffer_inv sc1$`}, mustNot: []string{`buffer_wbl2`, `buffer_inv sc0`}, seq: [][]string{{`_load_dwordx2 .* sc0 sc1$`, vmWait, `^buffer_inv sc1$`}}},
	{arch: "gfx942", probe: "probe_signal_wait_until", mode: strict, must: []string{`_load_dwordx2 .* sc0 sc1$`, `^buffer_inv sc0 sc1$`}, seq: [][]string{{`_load_dwordx2 .* sc0 sc1$`, vmWait, `^buffer_inv sc0 sc1$`}}},
	{arch: "gfx942", probe: "probe_signal_wait_until", mode: bypass, must: []string{`_load_dwordx2 .* sc0 sc1$`, `^buffer_inv sc1$`}, mustNot: []string{`buffer_inv sc0`}, seq: [][]string{{`_load_dwordx2 .* sc0 sc1$`, vmWait, `^buffer_inv sc1$`}}},
	{arch: "gfx942", probe: "probe_p", must: []string{`_store_dwordx2 .* sc0 sc1$`}, every: [2]string{`_store_`, `sc0 sc1$`}, mustNot: []string{`buffer_wbl2`, `buffer_inv`}, seq: [][]string{{`_store_dwordx2 .* sc0 sc1$`}}},
	{arch: "gfx942", probe: "probe_g", mode: strict, must: []string{`_load_dwordx2 .* sc0 sc1$`, `^buffer_inv sc0 sc1$`}, seq: [][]string{{`_load_dwordx2 .* sc0 sc1$`, vmWait, `^buffer_inv sc0 sc1$`}}},
	{arch: "gfx942", probe: "probe_putmem", mode: strict, must: []string{`_store_dwordx4 v\[\d+:\d+\], v\[\d+:\d+\]( offset:\d+)?$`}, seq: [][]string{{`_store_dwordx4 v\[\d+:\d+\], v\[\d+:\d+\]$`, `_store_dwordx4 v\[\d+:\d+\], v\[\d+:\d+\] offset:16$`}}},
	{arch: "gfx942", probe: "probe_putmem", mode: bypass, must: []string{`_store_dwordx2 .* sc0 sc1$`}, every: [2]string{`_store_`, `sc0 sc1$`}, seq: [][]string{{`_store_dwordx2 .* sc0 sc1$`, `_store_dwordx2 .* offset:8 sc0 sc1$`}}},
	{arch: "gfx942", probe: "probe_putmem_block", mode: bypass, every: [2]string{`_store_`, `sc0 sc1$`}, seq: [][]string{{`^s_barrier$`}}},
	{arch: "gfx942", probe: "probe_getmem", must: []string{`_load_dwordx2 .* sc0 sc1$`}, seq: [][]string{{`_load_dwordx2 .* sc0 sc1$`, `_load_dwordx2 .* offset:8 sc0 sc1$`}}},
	{arch: "gfx942", probe: "probe_fetch_add", must: []string{`_atomic_add_x2 .* sc0 sc1$`}, every: [2]string{`_atomic_`, `sc1$`}, seq: [][]string{{`_atomic_add_x2 v\[\d+:\d+\], v\[\d+:\d+\], v\[\d+:\d+\] sc0 sc1$`, vmWait}}},
	{arch: "gfx942", probe: "probe_fetch_add", mode: strict, must: []string{`^buffer_inv sc0 sc1$`}, order: [2]string{`_atomic_add_x2 .* sc0 sc1$`, `^buffer_inv sc0 sc1$`}, seq: [][]string{{`_atomic_add_x2 .* sc0 sc1$`, vmWait, `^buffer_inv sc0 sc1$`}}},
	{arch: "gfx942", probe: "probe_fetch_add", mode: bypass, mustNot: []string{`buffer_inv`, `buffer_wbl2`}, seq: [][]string{{`_atomic_add_x2 .* sc0 sc1$`, vmWait, `_store_`}}},
	{arch: "gfx942", probe: "probe_add32", must: []string{`_atomic_add v\[\d+:\d+\], v\d+ sc1$`}, mustNot: []string{`buffer_inv`, `buffer_wbl2`}, seq: [][]string{{`_atomic_add v\[\d+:\d+\], v\d+ sc1$`}}},
	{arch: "gfx942", probe: "probe_compare_swap", must: []string{`_atomic_cmpswap_x2 .* sc0 sc1$`}, seq: [][]string{{`_atomic_cmpswap_x2 v\[\d+:\d+\], .* sc0 sc1$`, vmWait}}},
	{arch: "gfx942", probe: "probe_swap32", must: []string{`_atomic_swap v\d+, .* sc0 sc1$`}, seq: [][]string{{`_atomic_swap v\d+, .* sc0 sc1$`, vmWait}}},
	{arch: "gfx942", probe: "probe_fetch_xor", must: []string{`_atomic_xor_x2 .* sc0 sc1$`}, seq: [][]string{{`_atomic_xor_x2 .* sc0 sc1$`, vmWait}}},
	{arch: "gfx942", probe: "probe_putmem_signal_set", mode: strict, must: []string{`^buffer_wbl2 sc0 sc1$`}, order: [2]string{`^buffer_wbl2 sc0 sc1$`, `_store_dwordx2 .* sc0 sc1$`}, seq: [][]string{{`^buffer_wbl2 sc0 sc1$`, vmWait, `_store_dwordx2 .* sc0 sc1$`}}},
	{arch: "gfx942", probe: "probe_putmem_signal_set", mode: bypass, must: []string{`^s_waitcnt vmcnt\(0\)$`}, mustNot: []string{`buffer_wbl2`}, every: [2]string{`_store_`, `sc0 sc1$`}, seq: [][]string{{`_store_\w+ .* sc0 sc1$`, vmWait, `_store_dwordx2 .* sc0 sc1$`}}},
	{arch: "gfx942", probe: "probe_putmem_signal_add", mode: strict, must: []string{`^buffer_wbl2 sc0 sc1$`, `_atomic_add_x2 v\[\d+:\d+\], v\[\d+:\d+\] sc1$`}, order: [2]string{`^buffer_wbl2 sc0 sc1$`, `_atomic_add_x2 v\[\d+:\d+\], v\[\d+:\d+\] sc1$`}, seq: [][]string{{`^buffer_wbl2 sc0 sc1$`, vmWait, `_atomic_add_x2 v\[\d+:\d+\], v\[\d+:\d+\] sc1$`}}},
	{arch: "gfx942", probe: "probe_putmem_signal_add", mode: bypass, mustNot: []string{`buffer_wbl2`}, must: []string{`_atomic_add_x2 v\[\d+:\d+\], v\[\d+:\d+\] sc1$`}, seq: [][]string{{`_store_\w+ .* sc0 sc1$`, vmWait, `_atomic_add_x2 v\[\d+:\d+\], v\[\d+:\d+\] sc1$`}}},
	{arch: "gfx942", probe: "probe_barrier_all_block", mode: strict, must: []string{`^buffer_wbl2 sc0 sc1$`, `^buffer_inv sc0 sc1$`, `^s_barrier$`}, seq: [][]string{{vmWait, `^s_barrier$`, `^buffer_wbl2 sc0 sc1$`, vmWait, `^buffer_inv sc0 sc1$`}, {`^buffer_wbl2 sc0 sc1$`, vmWait, `_store_dwordx2 .* sc0 sc1$`}, {`_load_dwordx2 .* sc0 sc1$`, vmWait, `^buffer_inv sc0 sc1$`, `^s_barrier$`}}},
	{arch: "gfx942", probe: "probe_barrier_all_block", mode: bypass, must: []string{`^buffer_wbl2 sc0 sc1$`, `^buffer_inv sc1$`, `^s_barrier$`}, mustNot: []string{`buffer_inv sc0`}, seq: [][]string{{vmWait, `^s_barrier$`, `^buffer_wbl2 sc0 sc1$`, vmWait}, {`^buffer_wbl2 sc0 sc1$`, vmWait, `_store_dwordx2 .* sc0 sc1$`}, {vmWait, `^buffer_inv sc1$`, `^s_barrier$`}}},
}

var gfx90aRules = []rule{
	{arch: "gfx90a", probe: "probe_fence", mode: strict, must: []string{`^buffer_wbl2$`, `^buffer_invl2$`, `^buffer_wbinvl1_vol$`}, seq: [][]string{{`^buffer_wbl2$`, vmWait, `^buffer_invl2$`, `^buffer_wbinvl1_vol$`}}},
	{arch: "gfx90a", probe: "probe_fence", mode: bypass, must: []string{`^s_waitcnt vmcnt\(0\)$`}, mustNot: []string{`buffer_wbl2`, `buffer_invl2`, `buffer_wbinvl1`}, seq: [][]string{{vmWait}}},
	{arch: "gfx90a", probe: "probe_quiet", mode: strict, must: []string{`^buffer_wbl2$`, `^buffer_invl2$`}, seq: [][]string{{`^buffer_wbl2$`, vmWait, `^buffer_invl2$`, `^buffer_wbinvl1_vol$`}}},
	{arch: "gfx90a", probe: "probe_quiet", mode: bypass, must: []string{`^buffer_wbl2$`}, mustNot: []string{`buffer_invl2`, `buffer_wbinvl1`}, seq: [][]string{{vmWait, `^buffer_wbl2$`, vmWait}}},
	{arch: "gfx90a", probe: "probe_wait_until", mode: strict, must: []string{`_load_dwordx2 .* glc$`, `^buffer_invl2$`, `^buffer_wbinvl1_vol$`}, seq: [][]string{{`_load_dwordx2 .* glc$`, vmWait, `^buffer_invl2$`, `^buffer_wbinvl1_vol$`}}},
	{arch: "gfx90a", probe: "probe_wait_until", mode: bypass, must: []string{`_load_dwordx2 .* glc$`, `^buffer_wbinvl1_vol$`}, mustNot: []string{`buffer_invl2`, `buffer_wbl2`}, seq: [][]string{{`_load_dwordx2 .* glc$`, vmWait, `^buffer_wbinvl1_vol$`}}},
	{arch: "gfx90a", probe: "probe_putmem", mode: strict, must: []string{`_store_dwordx4 v\[\d+:\d+\], v\[\d+:\d+\]( offset:\d+)?$`}, seq: [][]string{{`_store_dwordx4 v\[\d+:\d+\], v\[\d+:\d+\]$`, `_store_dwordx4 v\[\d+:\d+\], v\[\d+:\d+\] offset:16$`}}},
	{arch: "gfx90a", probe: "probe_putmem", mode: bypass, must: []string{`_store_dwordx4 .* glc slc$`}, every: [2]string{`_store_dwordx4`, `glc slc$`}, seq: [][]string{{`_store_dwordx4 .* glc slc$`, `_store_dwordx4 .* offset:16 glc slc$`}}},
	{arch: "gfx90a", probe: "probe_fetch_add", must: []string{`_atomic_add_x2 .* glc$`}, seq: [][]string{{`_atomic_add_x2 .* glc$`, vmWait}}},
	{arch: "gfx90a", probe: "probe_fetch_add", mode: strict, must: []string{`^buffer_invl2$`}, seq: [][]string{{`_atomic_add_x2 .* glc$`, vmWait, `^buffer_invl2$`, `^buffer_wbinvl1_vol$`}}},
	{arch: "gfx90a", probe: "probe_fetch_add", mode: bypass, mustNot: []string{`buffer_invl2`, `buffer_wbl2`}, seq: [][]string{{`_atomic_add_x2 .* glc$`, vmWait, `_store_`}}},
	{arch: "gfx90a", probe: "probe_putmem_signal_set", mode: strict, must: []string{`^buffer_wbl2$`}, order: [2]string{`^buffer_wbl2$`, `_store_dwordx2`}, seq: [][]string{{`^buffer_wbl2$`, vmWait, `_store_dwordx2 v\[\d+:\d+\], v\[\d+:\d+\]$`}}},
	{arch: "gfx90a", probe: "probe_putmem_signal_set", mode: bypass, must: []string{`^s_waitcnt vmcnt\(0\)$`}, mustNot: []string{`buffer_wbl2`}, seq: [][]string{{`_store_`, vmWait, `_store_dwordx2 v\[\d+:\d+\], v\[\d+:\d+\]$`}}},
	{arch: "gfx90a", probe: "probe_signal_wait_until", mode: strict, seq: [][]string{{`_load_dwordx2 .* glc$`, vmWait, `^buffer_invl2$`, `^buffer_wbinvl1_vol$`}}},
	{arch: "gfx90a", probe: "probe_signal_wait_until", mode: bypass, mustNot: []string{`buffer_invl2`}, seq: [][]string{{`_load_dwordx2 .* glc$`, vmWait, `^buffer_wbinvl1_vol$`}}},
	{arch: "gfx90a", probe: "probe_p", mustNot: []string{`buffer_wbl2`, `buffer_inv`}, seq: [][]string{{`_store_dwordx2 v\[\d+:\d+\], v\[\d+:\d+\]$`}}},
	{arch: "gfx90a", probe: "probe_g", mode: strict, seq: [][]string{{`_load_dwordx2 .* glc$`, vmWait, `^buffer_invl2$`, `^buffer_wbinvl1_vol$`}}},
	{arch: "gfx90a", probe: "probe_g", mode: bypass, mustNot: []string{`buffer_invl2`, `buffer_wbinvl1`}, seq: [][]string{{`_load_dwordx2 .* glc$`}}},
	{arch: "gfx90a", probe: "probe_getmem", seq: [][]string{{`_load_dwordx2 .* glc$`, `_load_dwordx2 .* offset:8 glc$`}}},
	{arch: "gfx90a", probe: "probe_add32", mustNot: []string{`buffer_invl2`, `buffer_wbl2`}, seq: [][]string{{`_atomic_add v\[\d+:\d+\], v\d+$`}}},
	{arch: "gfx90a", probe: "probe_compare_swap", mode: strict, seq: [][]string{{`_atomic_cmpswap_x2 .* glc$`, vmWait, `^buffer_invl2$`, `^buffer_wbinvl1_vol$`}}},
	{arch: "gfx90a", probe: "probe_compare_swap", mode: bypass, mustNot: []string{`buffer_invl2`}, seq: [][]string{{`_atomic_cmpswap_x2 .* glc$`, vmWait}}},
	{arch: "gfx90a", probe: "probe_swap32", mode: strict, seq: [][]string{{`_atomic_swap v\d+, .* glc$`, vmWait, `^buffer_invl2$`, `^buffer_wbinvl1_vol$`}}},
	{arch: "gfx90a", probe: "probe_swap32", mode: bypass, seq: [][]string{{`_atomic_swap v\d+, .* glc$`, vmWait}}},
	{arch: "gfx90a", probe: "probe_fetch_xor", mode: strict, seq: [][]string{{`_atomic_xor_x2 .* glc$`, vmWait, `^buffer_invl2$`, `^buffer_wbinvl1_vol$`}}},
	{arch: "gfx90a", probe: "probe_fetch_xor", mode: bypass, seq: [][]string{{`_atomic_xor_x2 .* glc$`, vmWait}}},
	{arch: "gfx90a", probe: "probe_putmem_signal_add", mode: strict, seq: [][]string{{`^buffer_wbl2$`, vmWait, `_atomic_add_x2 v\[\d+:\d+\], v\[\d+:\d+\]$`}}},
	{arch: "gfx90a", probe: "probe_putmem_signal_add", mode: bypass, mustNot: []string{`buffer_wbl2`}, seq: [][]string{{`_store_`, vmWait, `_atomic_add_x2 v\[\d+:\d+\], v\[\d+:\d+\]$`}}},
	{arch: "gfx90a", probe: "probe_barrier_all_block", mode: strict, seq: [][]string{{vmWait, `^s_barrier$`, `^buffer_wbl2$`, vmWait, `^buffer_invl2$`, `^buffer_wbinvl1_vol$`}, {`^buffer_wbl2$`, vmWait, `_store_dwordx2 v\[\d+:\d+\], v\[\d+:\d+\]$`}, {`_load_dwordx2 .* glc$`, vmWait, `^buffer_invl2$`, `^buffer_wbinvl1_vol$`, `^s_barrier$`}}},
	{arch: "gfx90a", probe: "probe_barrier_all_block", mode: bypass, mustNot: []string{`buffer_invl2`}, seq: [][]string{{vmWait, `^s_barrier$`, `^buffer_wbl2$`, vmWait}, {`^buffer_wbl2$`, vmWait, `_store_dwordx2 v\[\d+:\d+\], v\[\d+:\d+\]$`}, {vmWait, `^buffer_wbinvl1_vol$`, `^s_barrier$`}}},
}

// nvptxRules apply to sm_80 and sm_90.
var nvptxRules = []rule{
	{probe: "*", every: [2]string{`^(atom|red)\.`, `^(atom|red)\.(relaxed|acquire|release|acq_rel)\.sys\.`}, mustNot: []string{`^membar`, `^atom\.global\.`, `\.gpu\.`, `\.cta\.`}},
	{probe: "probe_fence", mode: strict, must: []string{`^fence\.sc\.sys;$`}},
	{probe: "probe_fence", mode: bypass, must: []string{`^fence\.acq_rel\.sys;$`}, mustNot: []string{`^fence\.sc`}},
	{probe: "probe_quiet", mode: strict, must: []string{`^fence\.sc\.sys;$`}},
	{probe: "probe_quiet", mode: bypass, must: []string{`^fence\.acq_rel\.sys;$`}, mustNot: []string{`^fence\.sc`}},
	// 8-byte waits poll with acquire loads: no fence waits for the thread's earlier stores
	{probe: "probe_wait_until", must: []string{`^ld\.acquire\.sys\.u64 `}, mustNot: []string{`^fence\.`}},
	{probe: "probe_signal_wait_until", must: []string{`^ld\.acquire\.sys\.u64 `}, mustNot: []string{`^fence\.`}},
	// the state is __constant__: its loads hit the constant cache, which fences do not invalidate
	{probe: "probe_p", must: []string{`^st\.relaxed\.sys\.u64 `, `^ld\.const\.`}},
	{probe: "probe_g", must: []string{`^ld\.relaxed\.sys\.u64 `}},
	{probe: "probe_g", mode: strict, must: []string{`^fence\.acq_rel\.sys;$`}},
	{probe: "probe_putmem", mode: strict, must: []string{`^st\.v2\.u64 `}, mustNot: []string{`\.cg\.`}},
	{probe: "probe_putmem", mode: bypass, must: []string{`^st\.global\.cg\.v2\.u64 `}, mustNot: []string{`^st\.v2\.u64 `}},
	{probe: "probe_putmem_block", mode: bypass, must: []string{`^st\.global\.cg\.v2\.u64 `, `^bar\.sync 0;$`}},
	{probe: "probe_getmem", must: []string{`^ld\.global\.cg\.v2\.u64 `}},
	{probe: "probe_fetch_add", mode: strict, must: []string{`^atom\.acquire\.sys\.add\.u64 `}, mustNot: []string{`^fence`}},
	{probe: "probe_fetch_add", mode: bypass, must: []string{`^atom\.relaxed\.sys\.add\.u64 `}, mustNot: []string{`^fence`, `^atom\.acquire`}},
	{probe: "probe_add32", must: []string{`^atom\.relaxed\.sys\.add\.u32 `}, mustNot: []string{`^fence`}},
	{probe: "probe_compare_swap", mode: strict, must: []string{`^atom\.acquire\.sys\.cas\.b64 `}},
	{probe: "probe_compare_swap", mode: bypass, must: []string{`^atom\.relaxed\.sys\.cas\.b64 `}},
	{probe: "probe_swap32", mode: strict, must: []string{`^atom\.acquire\.sys\.exch\.b32 `}},
	{probe: "probe_swap32", mode: bypass, must: []string{`^atom\.relaxed\.sys\.exch\.b32 `}},
	{probe: "probe_fetch_xor", mode: strict, must: []string{`^atom\.acquire\.sys\.xor\.b64 `}},
	{probe: "probe_fetch_xor", mode: bypass, must: []string{`^atom\.relaxed\.sys\.xor\.b64 `}},
	{probe: "probe_putmem_signal_set", mode: strict, must: []string{`^st\.release\.sys\.u64 `}},
	{probe: "probe_putmem_signal_set", mode: bypass, must: []string{`^fence\.acq_rel\.sys;$`, `^st\.relaxed\.sys\.u64 `}, order: [2]string{`^fence\.acq_rel\.sys;$`, `^st\.relaxed\.sys\.u64 `}},
	{probe: "probe_putmem_signal_add", mode: strict, must: []string{`^atom\.release\.sys\.add\.u64 `}},
	{probe: "probe_putmem_signal_add", mode: bypass, must: []string{`^fence\.acq_rel\.sys;$`, `^atom\.relaxed\.sys\.add\.u64 `}},
	{probe: "probe_barrier_all_block", mode: strict, must: []string{`^fence\.sc\.sys;$`, `^bar\.sync 0;$`, `^st\.release\.sys\.u64 `, `^ld\.relaxed\.sys\.u64 `}},
	{probe: "probe_barrier_all_block", mode: bypass, must: []string{`^fence\.acq_rel\.sys;$`, `^bar\.sync 0;$`, `^st\.release\.sys\.u64 `}, mustNot: []string{`^fence\.sc`}},
}

func firstIndex(ins []string, re *regexp.Regexp) int {
	for i, l := range ins {
		if re.MatchString(l) {
			return i
		}
	}
	return -1
}

func lastIndex(ins []string, re *regexp.Regexp) int {
	idx := -1
	for i, l := range ins {
		if re.MatchString(l) {
			idx = i
		}
	}
	return idx
}

// check applies r to one probe's instructions and returns what it broke.
func (r rule) check(ins []string) []string {
	var bad []string
	for _, m := range r.must {
		if lastIndex(ins, regexp.MustCompile(m)) < 0 {
			bad = append(bad, "no instruction matches "+m)
		}
	}
	for _, m := range r.mustNot {
		re := regexp.MustCompile(m)
		for _, l := range ins {
			if re.MatchString(l) {
				bad = append(bad, fmt.Sprintf("%q matches forbidden %s", l, m))
			}
		}
	}
	if r.every[0] != "" {
		sel, want := regexp.MustCompile(r.every[0]), regexp.MustCompile(r.every[1])
		for _, l := range ins {
			if sel.MatchString(l) && !want.MatchString(l) {
				bad = append(bad, fmt.Sprintf("%q lacks %s", l, r.every[1]))
			}
		}
	}
	for _, sq := range r.seq {
		if seqAt(memStream(ins), sq) < 0 {
			bad = append(bad, fmt.Sprintf("no consecutive memory instructions match %q; the memory stream is:\n\t%s", sq, strings.Join(memStream(ins), "\n\t")))
		}
	}
	if r.order[0] != "" {
		a, b := firstIndex(ins, regexp.MustCompile(r.order[0])), lastIndex(ins, regexp.MustCompile(r.order[1]))
		if a < 0 || b < 0 || a > b {
			bad = append(bad, fmt.Sprintf("no %s (first at %d) precedes a %s (last at %d)", r.order[0], a, r.order[1], b))
		}
	}
	return bad
}

// TestMapping checks the instructions MAPPING.md promises, per target and ordering mode, in the
// probes compiled with the ring compiled out (the load/store paths alone).
func TestMapping(t *testing.T) {
	t.Parallel() // clang compiles, seconds each: two at a time with the other compiling tests
	needClang(t)
	if _, err := build.Tool("llvm-objdump-19"); err != nil {
		t.Fatal(err) // clang-19 present without llvm-19: the CI install is incomplete
	}
	rules := append(append([]rule{}, gfx942Rules...), gfx90aRules...)
	for _, target := range build.Targets {
		for _, mode := range []int{strict, bypass} {
			target, mode := target, mode
			t.Run(fmt.Sprintf("%s/mode%d", target.Arch, mode), func(t *testing.T) {
				funcs := probeFuncs(t, target, fmt.Sprintf("ROXSHMEM_ORDERING=%d", mode), "ROXSHMEM_RING=0")
				applied := 0
				apply := func(r rule, name string) {
					ins, ok := funcs[name]
					if !ok {
						t.Errorf("probe %s missing from the %s output", name, target.Arch)
						return
					}
					applied++
					for _, b := range r.check(ins) {
						t.Errorf("%s %s mode %d: %s", target.Arch, name, mode, b)
					}
				}
				set := rules
				if !target.AMD {
					set = nvptxRules
				}
				for _, r := range set {
					if r.mode != 0 && r.mode != mode {
						continue
					}
					if target.AMD && !regexp.MustCompile("^"+r.arch+"$").MatchString(target.Arch) {
						continue
					}
					if r.probe == "*" {
						for name := range funcs {
							apply(r, name)
						}
						continue
					}
					apply(r, r.probe)
				}
				if applied == 0 {
					t.Fatalf("no rule applied to %s", target.Arch)
				}
			})
		}
	}
}

// TestMappingRing checks the producer: ticket by a system-scope fetch_add, the descriptor, then the
// seq word published with a system-scope release (written last).
func TestMappingRing(t *testing.T) {
	t.Parallel() // clang compiles, seconds each: two at a time with the other compiling tests
	needClang(t)
	for _, target := range build.Targets {
		var r []rule
		switch target.Arch {
		case "gfx942":
			r = []rule{{probe: "probe_ring_push", must: []string{`_atomic_add_x2 .* sc0 sc1$`, `^buffer_wbl2 sc0 sc1$`},
				order: [2]string{`^buffer_wbl2 sc0 sc1$`, `_store_dwordx2 .* sc0 sc1$`}}}
		case "gfx90a":
			r = []rule{{probe: "probe_ring_push", must: []string{`_atomic_add_x2 .* glc$`, `^buffer_wbl2$`},
				order: [2]string{`^buffer_wbl2$`, `_store_dwordx2`}}}
		default:
			r = []rule{
				{probe: "probe_ring_push", must: []string{`^atom\.relaxed\.sys\.add\.u64 `, `^st\.release\.sys\.u64 `},
					order: [2]string{`^st(\.global)?\.u(32|64) `, `^st\.release\.sys\.u64 `}},
				{probe: "probe_ring_quiet", must: []string{`^ld\.relaxed\.sys\.u64 `, `^fence\.acq_rel\.sys;$`}},
			}
		}
		funcs := probeFuncs(t, target, "ROXSHMEM_ORDERING=1")
		for _, rr := range r {
			for _, b := range rr.check(funcs[rr.probe]) {
				t.Errorf("%s %s: %s", target.Arch, rr.probe, b)
			}
		}
	}
}

// TestRuleCheck makes sure a rule can fail.
func TestRuleCheck(t *testing.T) {
	ins := []string{"buffer_wbl2 sc0 sc1", "global_store_dwordx2 v0, v[0:1], s[0:1]", "s_waitcnt vmcnt(0)"}
	r := rule{must: []string{`^buffer_inv`}, mustNot: []string{`^buffer_wbl2`}, every: [2]string{`_store_`, `sc0 sc1$`},
		order: [2]string{`_store_`, `^buffer_wbl2`}}
	if got := r.check(ins); len(got) != 4 {
		t.Errorf("check found %d problems, want 4: %q", len(got), got)
	}
	fence := rule{seq: [][]string{{`^buffer_wbl2 sc0 sc1$`, vmWait, `^buffer_inv sc0 sc1$`}}}
	if got := fence.check([]string{"buffer_wbl2 sc0 sc1", "v_mov_b32 v0, 0", "buffer_inv sc0 sc1"}); len(got) != 1 {
		t.Errorf("a write-back and an invalidate with no wait between: %q, want one problem", got)
	}
	if got := fence.check([]string{"buffer_wbl2 sc0 sc1", "s_waitcnt lgkmcnt(0)", "s_waitcnt vmcnt(0)", "buffer_inv sc0 sc1"}); len(got) != 0 {
		t.Errorf("the fence with its wait: %q", got)
	}
	if got := fence.check([]string{"buffer_wbl2 sc0 sc1", "s_waitcnt vmcnt(0)", "global_store_dword v0, v1, s[0:1]", "buffer_inv sc0 sc1"}); len(got) != 1 {
		t.Errorf("a store between the wait and the invalidate: %q, want one problem", got)
	}
	for _, r := range append(append([]rule{}, gfx942Rules...), gfx90aRules...) {
		if len(r.seq) == 0 {
			t.Errorf("%s %s mode %d: an AMD row without an instruction sequence", r.arch, r.probe, r.mode)
		}
	}
	ok := rule{must: []string{`^buffer_wbl2 sc0 sc1$`}, order: [2]string{`^buffer_wbl2`, `_store_`}}
	if got := ok.check(ins); len(got) != 0 {
		t.Errorf("check of a satisfied rule: %q", got)
	}
}
