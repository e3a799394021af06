package kernels

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/kernels/internal/build"
)

// bitcodeEntries are the entry points of src/bitcode.hip that the Python package's Triton
// bindings (python/roxamen/triton.py) declare.
var bitcodeEntries = []string{"my_pe", "n_pes", "ptr", "putmem", "getmem", "putmem_block", "getmem_block",
	"putmem_signal", "putmem_signal_block", "signal_wait_until", "signal_fetch", "int64_atomic_fetch_add",
	"fence", "quiet", "barrier_all_block", "team_sync_block", "team_my_pe", "team_n_pes", "barrier_block", "float_sum_reduce_block",
	"float_max_reduce_block", "int32_sum_reduce_block"}

// TestBitcode rebuilds the device library's bitcode (obj/roxshmem-<arch>.bc.gz) and compares it
// with the committed files, checks that it defines every entry point and roxshmem_state, that
// the sm_90 one links into a module with Triton's module flags, and that llc-19 lowers it for its
// target (PTX for sm_90, a code object for gfx942): the static check of the AMD bitcode, which no
// Triton here links.
func TestBitcode(t *testing.T) {
	t.Parallel()
	needClang(t)
	dis, err := build.Tool("llvm-dis-19")
	if err != nil {
		t.Skip(err)
	}
	llc, err := build.Tool("llc-19")
	if err != nil {
		t.Skip(err)
	}
	for _, tg := range build.BitcodeTargets {
		got, err := build.Bitcode(".", tg)
		if err != nil {
			t.Fatal(err)
		}
		gz, err := os.ReadFile(filepath.Join("obj", build.BitcodeName(tg)))
		if err != nil {
			t.Fatal(err)
		}
		r, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatal(err)
		}
		want, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("obj/%s differs from a rebuild (%d vs %d bytes): run go generate ./kernels and commit", build.BitcodeName(tg), len(want), len(got))
		}
		dir := t.TempDir()
		bc := filepath.Join(dir, "roxshmem.bc")
		if err := os.WriteFile(bc, got, 0o644); err != nil {
			t.Fatal(err)
		}
		ll, err := exec.Command(dis, "-o", "-", bc).Output()
		if err != nil {
			t.Fatalf("%s: llvm-dis-19: %v", tg.Arch, err)
		}
		defined := map[string]bool{}
		for _, line := range strings.Split(string(ll), "\n") {
			if f := strings.Index(line, " @roxshmem_bc_"); strings.HasPrefix(line, "define ") && f > 0 {
				name, _, _ := strings.Cut(line[f+len(" @roxshmem_bc_"):], "(")
				defined[name] = true
			}
		}
		for _, e := range bitcodeEntries {
			if !defined[e] {
				t.Errorf("%s: the bitcode does not define roxshmem_bc_%s", tg.Arch, e)
			}
		}
		if !bytes.Contains(ll, []byte("@roxshmem_state = ")) || !bytes.Contains(ll, []byte("externally_initialized")) {
			t.Errorf("%s: no externally initialized roxshmem_state for the host to fill", tg.Arch)
		}
		if !tg.AMD {
			tritonLink(t, dir, bc, ll)
		}
		args := []string{"-O2", "-mcpu=" + tg.Arch, "-o", filepath.Join(dir, "out"), bc}
		if tg.AMD {
			args = append([]string{"-mtriple=amdgcn-amd-amdhsa", "-filetype=obj"}, args...)
		} else {
			args = append([]string{"-mattr=+ptx80"}, args...)
		}
		if out, err := exec.Command(llc, args...).CombinedOutput(); err != nil {
			t.Errorf("%s: llc-19 does not lower the bitcode: %v\n%s", tg.Arch, err, out)
		}
	}
}

// tritonLink does to the sm_90 bitcode what Triton does with extern_libs: a kernel module that
// sets nvvm-reflect-ftz to 1 (Override) and calls entry points with integer addresses links it
// (only what it needs; LLVM's linker refuses two override values, as Triton 3.6 did on the H200)
// and is lowered for sm_90a; the PTX must keep roxshmem_state visible for the host to fill.
func tritonLink(t *testing.T, dir, bc string, ll []byte) {
	t.Helper()
	link, err := build.Tool("llvm-link-19")
	if err != nil {
		t.Skip(err)
	}
	llc, _ := build.Tool("llc-19")
	host := filepath.Join(dir, "triton.ll")
	mod := `target triple = "nvptx64-nvidia-cuda"
declare i32 @roxshmem_bc_team_my_pe(i32)
declare i32 @roxshmem_bc_putmem_signal_block(i64, i64, i64, i64, i64, i32, i32)
define ptx_kernel void @k(ptr addrspace(1) %out, i64 %sig) {
  %pe = call i32 @roxshmem_bc_team_my_pe(i32 0)
  %dst = ptrtoint ptr addrspace(1) %out to i64
  %r = call i32 @roxshmem_bc_putmem_signal_block(i64 %dst, i64 %dst, i64 64, i64 %sig, i64 1, i32 1, i32 %pe)
  store i32 %r, ptr addrspace(1) %out
  ret void
}
!llvm.module.flags = !{!0}
!0 = !{i32 4, !"nvvm-reflect-ftz", i32 1}
`
	if err := os.WriteFile(host, []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(dir, "linked.bc")
	if out, err := exec.Command(link, "--only-needed", host, bc, "-o", linked).CombinedOutput(); err != nil {
		t.Fatalf("the bitcode does not link into a Triton-like module (nvvm-reflect-ftz=1): %v\n%s", err, out)
	}
	if bytes.Contains(ll, []byte(`"target-cpu"`)) {
		t.Errorf("the bitcode's functions name a target-cpu: they should take the linking module's")
	}
	ptx := filepath.Join(dir, "linked.ptx")
	if out, err := exec.Command(llc, "-O2", "-mcpu=sm_90a", "-mattr=+ptx80", "-o", ptx, linked).CombinedOutput(); err != nil {
		t.Fatalf("llc-19 does not lower the linked module: %v\n%s", err, out)
	}
	text, err := os.ReadFile(ptx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(text, []byte(".visible .const .align 64 .b8 roxshmem_state[")) {
		t.Errorf("the linked kernel's PTX has no visible roxshmem_state for the host to fill")
	}
}
