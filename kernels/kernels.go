// Package kernels holds Roxamen's device side: the header-only device library that user kernels
// include (include/roxamen/roxshmem.h), the runtime's own kernels (src/*.hip), and their prebuilt
// code objects (obj/), embedded here. The layout of roxshmem_state and of the command ring is
// mirrored in Go (State, Abort, LitmusInsn) and checked against the C headers by the tests.
//
// Regenerate the objects with `go generate ./kernels` (Debian's clang-19, lld-19; no vendor SDK):
// every kernel the runtime loads is built this way, and the kernels only tests launch
// (src/test.hip) the same way into package testkernels. PREFIXES.md says which layer each name
// prefix of the device code (roxa_, roxi_, roxk_, ...) belongs to and who may call it.
//
// For kernels written outside C++ (Triton's extern_libs), obj/roxshmem-sm_90.bc.gz and
// obj/roxshmem-gfx942.bc.gz are the device library as LLVM bitcode: src/bitcode.hip's out-of-line
// roxshmem_bc_* entry points (addresses as 64-bit integers), with the roxshmem_state that the host
// fills after the module is loaded. They are not embedded: python/roxamen/triton.py reads them.
//
// Linking a loaded module (runtime or user) to a PE: look up StateSymbol with
// device.Module.Global and copy a filled State into it (StateBytes) before launching. The runtime
// provides, per PE: the symmetric heap (HeapBase, HeapSize) with BarrierBytes of zeroed workspace
// at BarrierOff; PeerBase[i] for every PE whose heap this GPU can load and store (0 otherwise);
// an Abort block in host-mapped memory; and, when any PE needs the ring, the ring in host-mapped
// memory (nic.NewRing), a device buffer of RingCapacity*RingResultSlotSize bytes for RingResults,
// optionally a device-local ticket counter (RingHead) and completion mirror (Completion). In
// CacheBypass mode (FlagBypass) the heap must be memory the GPU's L2 does not cache (see
// MAPPING.md). For the device team API (include/roxamen/coll.h) the runtime also provides a
// TeamTable in device-visible memory (State.Teams): slot TeamWorld, slot TeamShared, then the
// teams it creates, each with a zeroed workspace of at least TeamWSMin bytes at the same heap
// offset on every member (TeamDesc.WSOff); a destroyed team's slot gets Size 0. The proxy's side of the contract (per-PE order, completion in ticket order, a
// fetched value or get written to Src before completion, no result written when Src is 0) is in
// MAPPING.md, "Command ring".
package kernels

import (
	"embed"
	"fmt"
	"strings"
)

//go:generate go run ./internal/gen

//go:embed obj/*.hsaco obj/*.ptx
var objects embed.FS

// Arches lists the architectures Object has code for.
var Arches = []string{"gfx90a", "gfx942", "sm_80", "sm_90"}

// Object returns the runtime kernels built for arch ("gfx90a", "gfx942": amdgcn code objects;
// "sm_80", "sm_90": PTX text that the CUDA driver JIT-compiles for the device, newer ones included).
// The slice is shared: do not modify it.
func Object(arch string) ([]byte, error) { return object("runtime", arch) }

// CollObject returns the runtime's stream-ordered team collectives (src/coll.hip) built for arch,
// as Object does the runtime kernels: a separate code object, loaded on first use.
func CollObject(arch string) ([]byte, error) { return object("coll", arch) }

// CollKernels are the kernels of the collectives' object (src/coll.hip) that the runtime
// launches: a reduction per element type (with its ops), the three data movers, the
// copy-engine offload of the data movers, the team barrier, and the device-side latency loops
// that roxrun bench times.
var CollKernels = []string{
	"roxk_coll_reduce_int8", "roxk_coll_reduce_int16", "roxk_coll_reduce_int32", "roxk_coll_reduce_int64",
	"roxk_coll_reduce_uint8", "roxk_coll_reduce_uint16", "roxk_coll_reduce_uint32", "roxk_coll_reduce_uint64",
	"roxk_coll_reduce_float", "roxk_coll_reduce_double", "roxk_coll_reduce_half", "roxk_coll_reduce_bfloat16",
	"roxk_coll_broadcast", "roxk_coll_fcollect", "roxk_coll_alltoall", "roxk_coll_ce", "roxk_coll_barrier", "roxk_bench_barrier_loop", "roxk_bench_allreduce_loop",
}

func object(name, arch string) ([]byte, error) {
	ext := ""
	switch {
	case strings.HasPrefix(arch, "gfx"):
		ext = ".hsaco"
	case strings.HasPrefix(arch, "sm_"):
		ext = ".ptx"
	}
	for _, a := range Arches {
		if a == arch {
			return objects.ReadFile("obj/" + name + "-" + arch + ext)
		}
	}
	return nil, fmt.Errorf("kernels: no code object for arch %q (have %s)", arch, strings.Join(Arches, ", "))
}

// ObjectFor picks the object a device of arch can load: the exact amdgcn target, or for NVIDIA the
// newest PTX not newer than the device (sm_90 for sm_90 and later, sm_80 for sm_80..sm_89).
func ObjectFor(arch string) ([]byte, string, error) { return objectFor(Object, arch) }

// CollObjectFor picks the collectives' object for a device of arch, as ObjectFor does.
func CollObjectFor(arch string) ([]byte, string, error) { return objectFor(CollObject, arch) }

func objectFor(Object func(string) ([]byte, error), arch string) ([]byte, string, error) {
	if strings.HasPrefix(arch, "sm_") {
		var v int
		if _, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimSuffix(arch[3:], "a"), "f"), "%d", &v); err == nil {
			switch {
			case v >= 90:
				b, err := Object("sm_90")
				return b, "sm_90", err
			case v >= 80:
				b, err := Object("sm_80")
				return b, "sm_80", err
			}
		}
	}
	b, err := Object(arch)
	return b, arch, err
}

// WorkloadKernels are the entry points of the workload objects (WorkloadObject): the phases of
// roxamen/ep.h's dispatch and combine and of roxamen/gemm.h's fused and unfused GEMM.
var WorkloadKernels = []string{
	"roxep_k_route", "roxep_k_normal_layout", "roxep_k_dispatch_send", "roxep_k_dispatch_recv_count",
	"roxep_k_dispatch_recv_scan", "roxep_k_dispatch_recv_copy", "roxep_k_dispatch_ack", "roxep_k_combine_send", "roxep_k_combine_recv",
	"roxep_k_combine_ack", "roxep_k_stamp",
	"roxgemm_k_fused", "roxgemm_k_reduce", "roxgemm_k_ack", "roxgemm_k_unfused", "roxgemm_k_allreduce",
}

// WorkloadObject returns the workload kernels (src/workloads.hip) built for arch, a code object
// of its own beside the runtime's (Object); ObjectFor's choice of arch applies to it too. A module
// loaded from it links to its PE as any user module does (StateSymbol).
func WorkloadObject(arch string) ([]byte, error) {
	if _, err := Object(arch); err != nil {
		return nil, err
	}
	ext := ".ptx"
	if strings.HasPrefix(arch, "gfx") {
		ext = ".hsaco"
	}
	return objects.ReadFile("obj/workloads-" + arch + ext)
}
