package kernels

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/roxamen/roxamen/kernels/internal/build"
)

// collProbeFuncs compiles testdata/probes_coll.hip like probeFuncs does probes.hip.
func collProbeFuncs(t *testing.T, target build.Target, defines ...string) map[string][]string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "probes_coll"+target.Ext())
	if err := build.Compile(".", target, "testdata/probes_coll.hip", out, append(defines, "ROXSHMEM_INLINE_ALL")...); err != nil {
		t.Fatal(err)
	}
	if !target.AMD {
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return splitFuncs(string(b), false)
	}
	objdump, err := build.Tool("llvm-objdump-19")
	if err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(objdump, "-d", "--no-show-raw-insn", out).Output()
	if err != nil {
		t.Fatalf("llvm-objdump-19: %v", err)
	}
	return splitFuncs(string(b), true)
}

// What MAPPING.md's "Team collectives" rows promise. Every round: the staged data (and the call
// signature) released at system scope before the relaxed system-scope stores that announce the
// round to the members; the announcements polled with system-scope loads and followed by the
// mode's acquire; the members' data read with system-coherent loads.
var collProbes = []string{"probe_coll_reduce_block", "probe_coll_reduce_half", "probe_coll_broadcast_block",
	"probe_team_sync_block", "probe_team_barrier"}

// readers: the probes that read the members' data
var collReaders = []string{"probe_coll_reduce_block", "probe_coll_reduce_half", "probe_coll_broadcast_block"}

func collRules(arch string, mode int) []rule {
	var r []rule
	add := func(probes []string, x rule) {
		for _, p := range probes {
			x.probe = p
			r = append(r, x)
		}
	}
	switch arch {
	case "gfx942":
		if mode == strict {
			add(collProbes, rule{must: []string{`^buffer_wbl2 sc0 sc1$`, `^buffer_inv sc0 sc1$`, `_store_dwordx2 .* sc0 sc1$`},
				order: [2]string{`^buffer_wbl2 sc0 sc1$`, `_store_dwordx2 .* sc0 sc1$`}})
		} else {
			add(collProbes, rule{must: []string{`^s_waitcnt vmcnt\(0\)$`, `^buffer_inv sc1$`, `_store_dwordx2 .* sc0 sc1$`},
				mustNot: []string{`^buffer_inv sc0 sc1$`}, order: [2]string{`^s_waitcnt vmcnt\(0\)$`, `_store_dwordx2 .* sc0 sc1$`}})
		}
		// the announcements polled, the members' data read: system-scope loads
		add(collReaders, rule{must: []string{`_load_dwordx2 .* sc0 sc1$`}})
		add([]string{"probe_coll_reduce_block", "probe_coll_broadcast_block", "probe_team_sync_block"}, rule{must: []string{`^s_barrier$`}})
	case "gfx90a":
		if mode == strict {
			add(collProbes, rule{must: []string{`^buffer_wbl2$`, `^buffer_invl2$`, `^buffer_wbinvl1_vol$`},
				order: [2]string{`^buffer_wbl2$`, `_store_dwordx2 `}})
		} else {
			add(collProbes, rule{must: []string{`^s_waitcnt vmcnt\(0\)$`, `^buffer_wbinvl1_vol$`}, mustNot: []string{`^buffer_invl2$`},
				order: [2]string{`^s_waitcnt vmcnt\(0\)$`, `_store_dwordx2 `}})
		}
		add(collReaders, rule{must: []string{`_load_dwordx2 .* glc$`}})
		add([]string{"probe_coll_reduce_block", "probe_team_sync_block"}, rule{must: []string{`^s_barrier$`}})
	default: // nvptx
		add(collProbes, rule{must: []string{`^fence\.acq_rel\.sys;$`, `^st\.relaxed\.sys\.u64 `, `^ld\.relaxed\.sys\.u64 `},
			order:   [2]string{`^fence\.acq_rel\.sys;$`, `^st\.relaxed\.sys\.u64 `},
			every:   [2]string{`^(atom|red)\.`, `^(atom|red)\.(relaxed|acquire|release|acq_rel)\.sys\.`},
			mustNot: []string{`^membar`, `\.gpu\.`, `\.cta\.`}})
		// the members' data: 16-byte system-coherent (.cg) loads, or relaxed system-scope ones
		// 16-byte packets: coll.h's mover loop and a reduction's folds, vector loads (and the
		// copy's stores) of the global space
		add([]string{"probe_coll_reduce_block"}, rule{must: []string{`^ld\.global\.cg\.v4\.u32 `}})
		add([]string{"probe_coll_broadcast_block"}, rule{must: []string{`^ld\.global\.cg\.v4\.u32 `, `^st\.global\.v4\.u32 `}})
		add([]string{"probe_coll_reduce_half"}, rule{must: []string{`^ld\.relaxed\.sys\.u16 `}})
		add([]string{"probe_coll_reduce_block", "probe_team_sync_block"}, rule{must: []string{`^bar\.sync 0;$`}})
	}
	return r
}

// TestMappingColl checks the team collectives' instructions on both AMD targets and nvptx, in
// both ordering modes (ring compiled out: the load/store paths).
func TestMappingColl(t *testing.T) {
	needClang(t)
	for _, target := range build.Targets {
		for _, mode := range []int{strict, bypass} {
			t.Run(fmt.Sprintf("%s/mode%d", target.Arch, mode), func(t *testing.T) {
				t.Parallel() // eight compiles of every collective inlined: seconds each
				funcs := collProbeFuncs(t, target, fmt.Sprintf("ROXSHMEM_ORDERING=%d", mode), "ROXSHMEM_RING=0")
				rules := collRules(target.Arch, mode)
				if len(rules) == 0 {
					t.Fatalf("no rule for %s", target.Arch)
				}
				for _, r := range rules {
					ins, ok := funcs[r.probe]
					if !ok {
						t.Fatalf("probe %s missing from the %s output", r.probe, target.Arch)
					}
					for _, b := range r.check(ins) {
						t.Errorf("%s %s mode %d: %s", target.Arch, r.probe, mode, b)
					}
				}
			})
		}
	}
}

// TestMappingCollFails: the rules catch a round whose announcement is not released first (the
// release fence removed from the probe's instructions).
func TestMappingCollFails(t *testing.T) {
	needClang(t)
	sm90, _ := build.Lookup("sm_90")
	funcs := collProbeFuncs(t, sm90, "ROXSHMEM_ORDERING=1", "ROXSHMEM_RING=0")
	fence := regexp.MustCompile(`^fence\.acq_rel\.sys;$`)
	var stripped []string
	for _, l := range funcs["probe_team_sync_block"] {
		if !fence.MatchString(l) {
			stripped = append(stripped, l)
		}
	}
	for _, r := range collRules("sm_90", strict) {
		if r.probe == "probe_team_sync_block" && r.order[0] != "" {
			if len(r.check(stripped)) == 0 {
				t.Error("the rules accept a team sync without a release before its announcements")
			}
			return
		}
	}
	t.Fatal("no ordering rule for probe_team_sync_block")
}
