package kernels

import (
	"fmt"
	"testing"

	"github.com/roxamen/roxamen/kernels/internal/build"
)

// sdmaRules: what MAPPING.md's SDMA rows promise on both AMD targets, in both modes. The producer
// writes packets with plain stores, makes them visible with a release at system scope, then
// stores the write pointer and (after waiting for that store) the doorbell at system scope; the
// put moves no data itself (no 16-byte loads: no copy loop).
var sdmaRules = []rule{
	{arch: "gfx942", probe: "probe_sdma_put", must: []string{`_atomic_cmpswap_x2 .* sc0 sc1$`, `^buffer_wbl2 sc0 sc1$`, `^s_waitcnt vmcnt\(0\)$`},
		mustNot: []string{`_load_dwordx4`, `buffer_inv`}, order: [2]string{`^buffer_wbl2 sc0 sc1$`, `_store_dwordx2 .* sc0 sc1$`}},
	{arch: "gfx942", probe: "probe_sdma_quiet", must: []string{`_load_dword .* sc0 sc1$`}, mustNot: []string{`_store_`}},
	{arch: "gfx90a", probe: "probe_sdma_put", must: []string{`_atomic_cmpswap_x2 `, `^buffer_wbl2$`, `^s_waitcnt vmcnt\(0\)$`},
		mustNot: []string{`_load_dwordx4`, `buffer_invl2`}, order: [2]string{`^buffer_wbl2$`, `_store_dwordx2 `}},
	{arch: "gfx90a", probe: "probe_sdma_quiet", must: []string{`_load_dword .* glc$`}, mustNot: []string{`_store_`}},
}

func TestMappingSDMA(t *testing.T) {
	t.Parallel() // clang compiles, seconds each: two at a time with the other compiling tests
	needClang(t)
	for _, target := range build.Targets {
		if !target.AMD {
			continue
		}
		for _, mode := range []int{strict, bypass} {
			t.Run(fmt.Sprintf("%s/mode%d", target.Arch, mode), func(t *testing.T) {
				funcs := probeFuncs(t, target, fmt.Sprintf("ROXSHMEM_ORDERING=%d", mode), "ROXSHMEM_RING=0", "ROXSHMEM_SDMA=1")
				for _, r := range sdmaRules {
					if r.arch != target.Arch {
						continue
					}
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
