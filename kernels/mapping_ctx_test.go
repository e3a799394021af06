package kernels

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/kernels/internal/build"
)

// TestMappingCtx checks the device contexts' instructions (MAPPING.md, "Contexts") on every
// target: with the ring compiled out, a context's fence and quiet are exactly the default
// context's memory fences (the rules of probe_fence and probe_quiet, per mode); with the ring,
// a context's producer is the ring producer on the context's own ring (ticket by a system-scope
// fetch_add, seq published last with a system-scope release), its quiet polls the context's
// completion and ends with an acquire, create claims a slot by a system-scope compare-and-swap
// followed by an acquire, and destroy releases before it frees the slot.
func TestMappingCtx(t *testing.T) {
	t.Parallel() // clang compiles, seconds each: two at a time with the other compiling tests
	ctxOpProbes := []string{"probe_ctx_p", "probe_ctx_g", "probe_ctx_putmem", "probe_ctx_getmem", "probe_ctx_fetch_add",
		"probe_ctx_add32", "probe_ctx_compare_swap", "probe_ctx_swap32", "probe_ctx_fetch_xor", "probe_ctx_putmem_signal_set",
		"probe_ctx_putmem_signal_add"}
	needClang(t)
	var fenceRules, opRules []rule
	for _, set := range [][]rule{gfx942Rules, gfx90aRules, nvptxRules} {
		for _, r := range set {
			switch r.probe {
			case "probe_fence", "probe_quiet":
				r.probe = strings.Replace(r.probe, "probe_", "probe_ctx_", 1)
				fenceRules = append(fenceRules, r)
			default:
				if p := strings.Replace(r.probe, "probe_", "probe_ctx_", 1); slices.Contains(ctxOpProbes, p) {
					r.probe = p
					opRules = append(opRules, r)
				}
			}
		}
	}
	for _, target := range build.Targets {
		covered := map[string]bool{} // the context probes some rule applied to, in either mode
		for _, mode := range []int{strict, bypass} {
			funcs := probeFuncs(t, target, fmt.Sprintf("ROXSHMEM_ORDERING=%d", mode), "ROXSHMEM_RING=0")
			applied := 0
			for _, r := range fenceRules {
				if (r.mode != 0 && r.mode != mode) || (r.arch != "") != target.AMD || (target.AMD && r.arch != target.Arch) {
					continue
				}
				ins, ok := funcs[r.probe]
				if !ok {
					t.Fatalf("probe %s missing from the %s output", r.probe, target.Arch)
				}
				applied++
				for _, b := range r.check(ins) {
					t.Errorf("%s %s mode %d (ring compiled out): %s", target.Arch, r.probe, mode, b)
				}
			}
			if applied != 2 {
				t.Errorf("%s mode %d: %d fence/quiet rules applied to the context probes, want 2", target.Arch, mode, applied)
			}
			// the context forms of the operations: exactly the default probes' rules (the
			// context lookup before them is a relaxed load of the slot's in_use, no fence)
			for _, r := range opRules {
				if (r.mode != 0 && r.mode != mode) || (r.arch != "") != target.AMD || (target.AMD && r.arch != target.Arch) {
					continue
				}
				ins, ok := funcs[r.probe]
				if !ok {
					t.Fatalf("probe %s missing from the %s output", r.probe, target.Arch)
				}
				covered[r.probe] = true
				for _, b := range r.check(ins) {
					t.Errorf("%s %s mode %d (ring compiled out): %s", target.Arch, r.probe, mode, b)
				}
			}
		}
		for _, p := range ctxOpProbes {
			if !covered[p] {
				t.Errorf("%s: no rule applied to %s in either mode", target.Arch, p)
			}
		}
		var rs []rule
		switch target.Arch {
		case "gfx942":
			rs = []rule{
				{probe: "probe_ctx_push", must: []string{`_atomic_add_x2 .* sc0 sc1$`, `^buffer_wbl2 sc0 sc1$`},
					seq: [][]string{{`^buffer_wbl2 sc0 sc1$`, vmWait, `_store_dwordx2 .* offset:256 sc0 sc1$`}}},
				{probe: "probe_ctx_ring_quiet", must: []string{`_load_dwordx2 .* sc0 sc1$`, `^buffer_inv sc0 sc1$`},
					order: [2]string{`_load_dwordx2 .* sc0 sc1$`, `^buffer_inv sc0 sc1$`}},
				{probe: "probe_ctx_create", seq: [][]string{{`_atomic_cmpswap v\d+, .* sc0 sc1$`, vmWait, `^buffer_inv sc0 sc1$`}}},
				{probe: "probe_ctx_destroy", seq: [][]string{{`^buffer_wbl2 sc0 sc1$`, vmWait, `_store_dword v\[\d+:\d+\], v\d+ offset:36 sc0 sc1$`}}},
			}
		case "gfx90a":
			rs = []rule{
				{probe: "probe_ctx_push", must: []string{`_atomic_add_x2 .* glc$`, `^buffer_wbl2$`},
					order: [2]string{`^buffer_wbl2$`, `_store_dwordx2 .* offset:256`}},
				{probe: "probe_ctx_ring_quiet", must: []string{`_load_dwordx2 .* glc$`, `^buffer_invl2$`},
					order: [2]string{`_load_dwordx2 .* glc$`, `^buffer_invl2$`}},
				{probe: "probe_ctx_create", must: []string{`_atomic_cmpswap v\d+, .* glc$`, `^buffer_invl2$`},
					order: [2]string{`_atomic_cmpswap v\d+, .* glc$`, `^buffer_invl2$`}},
				{probe: "probe_ctx_destroy", seq: [][]string{{`^buffer_wbl2$`, vmWait, `_store_dword v\[\d+:\d+\], v\d+ offset:36$`}}},
			}
		default:
			rs = []rule{
				{probe: "probe_ctx_push", must: []string{`^atom\.relaxed\.sys\.add\.u64 `, `^st\.release\.sys\.u64 `},
					order: [2]string{`^st(\.global)?\.u(32|64) `, `^st\.release\.sys\.u64 `}},
				{probe: "probe_ctx_ring_quiet", must: []string{`^ld\.relaxed\.sys\.u64 `, `^fence\.acq_rel\.sys;$`}},
				{probe: "probe_ctx_create", must: []string{`^atom\.relaxed\.sys\.cas\.b32 `, `^fence\.acq_rel\.sys;$`},
					order: [2]string{`^atom\.relaxed\.sys\.cas\.b32 `, `^fence\.acq_rel\.sys;$`}},
				{probe: "probe_ctx_destroy", must: []string{`^st\.relaxed\.sys\.u32 `},
					order: [2]string{`^fence\.acq_rel\.sys;$`, `^st\.relaxed\.sys\.u32 `}},
			}
		}
		// with the ring, the context forms hold the context ring's producer, and the blocking
		// ones its wait (polls of the completion, then the acquire)
		for _, r := range rs {
			var to []string
			switch r.probe {
			case "probe_ctx_push":
				// (put-with-signal through the ring is a call on amdgcn, out of line)
				to = []string{"probe_ctx_p", "probe_ctx_g", "probe_ctx_putmem", "probe_ctx_fetch_add", "probe_ctx_add32"}
			case "probe_ctx_ring_quiet":
				to = []string{"probe_ctx_g", "probe_ctx_fetch_add", "probe_ctx_compare_swap"}
			}
			for _, p := range to {
				r.probe = p
				rs = append(rs, r)
			}
		}
		funcs := probeFuncs(t, target, "ROXSHMEM_ORDERING=1")
		for _, r := range rs {
			ins, ok := funcs[r.probe]
			if !ok {
				t.Fatalf("probe %s missing from the %s output", r.probe, target.Arch)
			}
			for _, b := range r.check(ins) {
				t.Errorf("%s %s: %s", target.Arch, r.probe, b)
			}
		}
	}
}
