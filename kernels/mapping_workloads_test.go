package kernels

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/kernels/internal/build"
	"github.com/roxamen/roxamen/kernels/internal/wlcount"
)

// workloadRules: what MAPPING.md's "Workloads" rows promise about the probes of
// testdata/probes_workloads.hip (each a unit of work of ep.h or gemm.h, ring compiled out).
func workloadRules(arch string, mode int) []rule {
	var r []rule
	add := func(probes []string, x rule) {
		for _, p := range probes {
			x.probe = p
			r = append(r, x)
		}
	}
	addSig := []string{"probe_ep_dispatch_token", "probe_ep_combine_token"} // put-with-signal ADD
	setSig := []string{"probe_ep_bulk", "probe_gemm_push"}                  // put-with-signal SET
	switch {
	case arch == "gfx942" && mode == strict:
		add(addSig, rule{seq: [][]string{{`^buffer_wbl2 sc0 sc1$`, vmWait, `_atomic_add_x2 v\[\d+:\d+\], v\[\d+:\d+\] sc1$`}}})
		add(setSig, rule{seq: [][]string{{`^buffer_wbl2 sc0 sc1$`, vmWait, `_store_dwordx2 .* sc0 sc1$`}}})
		add(append(addSig, setSig...), rule{must: []string{`_store_dwordx4 v\[\d+:\d+\], v\[\d+:\d+\]( offset:\d+)?$`}, seq: [][]string{{`^buffer_wbl2 sc0 sc1$`}}})
		add([]string{"probe_ep_wait"}, rule{seq: [][]string{{`_load_dwordx2 .* sc0 sc1$`, vmWait, `^buffer_inv sc0 sc1$`}}})
	case arch == "gfx942":
		// every data store bypasses the caches; each thread's drain, the block barrier; the
		// leader's drain, the signal (a warp writes the token's row, so its last store need not
		// be the last memory instruction before the drain)
		add(addSig, rule{mustNot: []string{`^buffer_wbl2`, `^buffer_inv`}, every: [2]string{`_store_`, `sc0 sc1$`}, order: [2]string{`^s_barrier$`, `_atomic_add_x2 v\[\d+:\d+\], v\[\d+:\d+\] sc1$`},
			seq: [][]string{{vmWait, `^s_barrier$`}, {vmWait, `_atomic_add_x2 v\[\d+:\d+\], v\[\d+:\d+\] sc1$`}}})
		add(setSig, rule{mustNot: []string{`^buffer_wbl2`, `^buffer_inv`}, every: [2]string{`_store_`, `sc0 sc1$`},
			seq: [][]string{{`_store_\w+ .* sc0 sc1$`, vmWait, `^s_barrier$`, vmWait, `_store_dwordx2 .* sc0 sc1$`}}})
		add([]string{"probe_ep_wait"}, rule{mustNot: []string{`^buffer_inv sc0`}, seq: [][]string{{`_load_dwordx2 .* sc0 sc1$`, vmWait, `^buffer_inv sc1$`}}})
	case arch == "gfx90a" && mode == strict:
		add(addSig, rule{seq: [][]string{{`^buffer_wbl2$`, vmWait, `_atomic_add_x2 v\[\d+:\d+\], v\[\d+:\d+\]$`}}})
		add(setSig, rule{seq: [][]string{{`^buffer_wbl2$`, vmWait, `_store_dwordx2 v\[\d+:\d+\], v\[\d+:\d+\]$`}}})
		add([]string{"probe_ep_wait"}, rule{seq: [][]string{{`_load_dwordx2 .* glc$`, vmWait, `^buffer_invl2$`, `^buffer_wbinvl1_vol$`}}})
	case arch == "gfx90a":
		add(append(addSig, setSig...), rule{must: []string{`_store_dwordx4 .* glc slc$`}, mustNot: []string{`^buffer_wbl2`, `^buffer_invl2`}})
		add(addSig, rule{order: [2]string{`^s_barrier$`, `_atomic_add_x2 v\[\d+:\d+\], v\[\d+:\d+\]$`},
			seq: [][]string{{vmWait, `^s_barrier$`}, {vmWait, `_atomic_add_x2 v\[\d+:\d+\], v\[\d+:\d+\]$`}}})
		add([]string{"probe_ep_wait"}, rule{mustNot: []string{`^buffer_invl2`}, seq: [][]string{{`_load_dwordx2 .* glc$`, vmWait, `^buffer_wbinvl1_vol$`}}})
	default: // nvptx
		add([]string{"*"}, rule{every: [2]string{`^(atom|red)\.`, `^(atom|red)\.(relaxed|acquire|release|acq_rel)\.sys\.`}, mustNot: []string{`^membar`}})
		if mode == strict {
			add(addSig, rule{must: []string{`^atom\.release\.sys\.add\.u64 `, `^bar\.sync 0;$`}, mustNot: []string{`\.cg\.`}})
			add(setSig, rule{must: []string{`^st\.release\.sys\.u64 `}})
		} else {
			add(addSig, rule{must: []string{`^st\.global\.cg\.v2\.u64 `, `^fence\.acq_rel\.sys;$`, `^atom\.relaxed\.sys\.add\.u64 `},
				order: [2]string{`^fence\.acq_rel\.sys;$`, `^atom\.relaxed\.sys\.add\.u64 `}})
			add(setSig, rule{must: []string{`^st\.global\.cg\.v2\.u64 `, `^st\.relaxed\.sys\.u64 `}, order: [2]string{`^fence\.acq_rel\.sys;$`, `^st\.relaxed\.sys\.u64 `}})
		}
		add([]string{"probe_ep_wait"}, rule{must: []string{`^ld\.acquire\.sys\.u64 `}})
	}
	return r
}

// TestMappingWorkloads checks the workload probes' instructions on every target in both modes:
// on AMD the committed count objects (which TestWorkloadCounts keeps equal to a rebuild), on
// nvptx a build of the same probes.
func TestMappingWorkloads(t *testing.T) {
	t.Parallel() // clang compiles, seconds each: two at a time with the other compiling tests
	needClang(t)
	for _, target := range build.Targets {
		for _, mode := range []int{strict, bypass} {
			t.Run(fmt.Sprintf("%s/mode%d", target.Arch, mode), func(t *testing.T) {
				var funcs map[string][]string
				if target.AMD {
					funcs = disasm(t, filepath.Join("testdata/count", build.CountObjectName(target, build.CountModes[mode-1].Name)))
				} else {
					out := filepath.Join(t.TempDir(), "p.ptx")
					if err := build.Compile(".", target, build.CountSource, out, build.CountModes[mode-1].Define, "ROXSHMEM_RING=0", "ROXSHMEM_INLINE_ALL"); err != nil {
						t.Fatal(err)
					}
					b, _ := os.ReadFile(out)
					funcs = splitFuncs(string(b), false)
				}
				rules := workloadRules(target.Arch, mode)
				for _, r := range rules {
					names := []string{r.probe}
					if r.probe == "*" {
						names = nil
						for n := range funcs {
							names = append(names, n)
						}
					}
					for _, n := range names {
						ins, ok := funcs[n]
						if !ok {
							t.Fatalf("probe %s missing from the %s output", n, target.Arch)
						}
						for _, b := range r.check(ins) {
							t.Errorf("%s %s mode %d: %s", target.Arch, n, mode, b)
						}
					}
				}
			})
		}
	}
}

func disasm(t *testing.T, path string) map[string][]string {
	t.Helper()
	objdump, err := build.Tool("llvm-objdump-19")
	if err != nil {
		t.Fatal(err)
	}
	b, err := execOutput(objdump, "-d", "--no-show-raw-insn", path)
	if err != nil {
		t.Fatalf("llvm-objdump-19 %s: %v", path, err)
	}
	return splitFuncs(b, true)
}

const (
	countBegin = "<!-- wlcount table: go run ./kernels/internal/wlcount/print; TestWorkloadCounts checks it -->"
	countEnd   = "<!-- end of wlcount table -->"
)

// TestWorkloadCounts rebuilds the count objects and compares them with the committed ones, then
// computes the instruction-count table from the committed objects and compares it with
// MAPPING.md's, and checks what the table must show: a write-back per token and per tile in
// Strict and none in CacheBypass, which instead marks the data stores; a system-scope invalidate
// per wait in Strict, a CU-cache-only one in CacheBypass; no cache operation in a data copy loop.
func TestWorkloadCounts(t *testing.T) {
	t.Parallel() // clang compiles, seconds each: two at a time with the other compiling tests
	needClang(t)
	out := t.TempDir()
	if err := build.CountObjects(".", out); err != nil {
		t.Fatal(err)
	}
	for _, target := range build.Targets {
		if !target.AMD {
			continue
		}
		for _, m := range build.CountModes {
			name := build.CountObjectName(target, m.Name)
			got, _ := os.ReadFile(filepath.Join(out, name))
			want, err := os.ReadFile(filepath.Join("testdata/count", name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("testdata/count/%s differs from a rebuild: run go generate ./kernels and commit", name)
			}
		}
	}
	tab, err := wlcount.Table("testdata/count")
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range wlcount.Arches {
		for _, u := range []string{"probe_ep_dispatch_token", "probe_ep_combine_token", "probe_ep_bulk", "probe_gemm_push"} {
			s, b := tab[arch]["strict"][u], tab[arch]["bypass"][u]
			// combine's marked stores are of sums, in the loop around its innermost (loading) one
			marked := b.PerPacket != "0" || u == "probe_ep_combine_token" && b.LoopBits > 0 && s.LoopBits == 0
			if s.WriteBacks != 1 || s.PerPacket != "0" || b.WriteBacks != 0 || !marked || s.LoopOrder != 0 || b.LoopOrder != 0 {
				t.Errorf("%s %s: strict %+v, bypass %+v: want one write-back and plain data in Strict, none and marked data in CacheBypass", arch, u, s, b)
			}
		}
		s, b := tab[arch]["strict"]["probe_ep_wait"], tab[arch]["bypass"]["probe_ep_wait"]
		if s.Invalidates < 1 || b.Invalidates != 1 || s.WriteBacks+b.WriteBacks != 0 || strings.Contains(b.Kinds, "sc0") || strings.Contains(b.Kinds, "invl2") {
			t.Errorf("%s wait: strict %+v, bypass %+v", arch, s, b)
		}
	}
	for _, doc := range []string{"MAPPING.md", "../docs/reference.md"} {
		md, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		i, j := bytes.Index(md, []byte(countBegin)), bytes.Index(md, []byte(countEnd))
		if i < 0 || j < i {
			t.Fatalf("%s lacks the instruction-count table between %q and %q", doc, countBegin, countEnd)
		}
		if got, want := strings.TrimSpace(string(md[i+len(countBegin):j])), strings.TrimSpace(wlcount.Markdown(tab)); got != want {
			t.Errorf("%s's instruction-count table is stale; the objects give:\n%s", doc, want)
		}
	}
}

// TestWorkloadCountsFail: the counter sees a write-back that a data loop would add, and the
// table check catches a Strict put without its write-back.
func TestWorkloadCountsFail(t *testing.T) {
	needClang(t)
	funcs, err := wlcount.Disassemble(filepath.Join("testdata/count", build.CountObjectName(build.Targets[1], "strict")))
	if err != nil {
		t.Fatal(err)
	}
	ins := funcs["probe_ep_dispatch_token"]
	if c := wlcount.CountFunc(ins); c.WriteBacks != 1 {
		t.Fatalf("probe_ep_dispatch_token: %+v", c)
	}
	if c := wlcount.CountFunc(wlcount.Without(ins, "buffer_wbl2")); c.WriteBacks != 0 {
		t.Errorf("a probe without its write-back still counts %d", c.WriteBacks)
	}
}

func execOutput(name string, args ...string) (string, error) {
	b, err := exec.Command(name, args...).Output()
	return string(b), err
}
