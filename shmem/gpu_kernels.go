package shmem

import (
	"fmt"
	"strings"
)

// auxSource is shmem's own device code, in the HIP dialect of kernels/include: the one-thread AMO
// kernel behind host-initiated atomics on device memory, put-with-signal's signal on the copy-engine
// stream, and stream-ordered signals. gpu_kernels_ptx.go holds it compiled with clang-19;
// TestAuxKernelsUpToDate rebuilds it and fails when the two differ (ROX_UPDATE_PTX=1 rewrites it).
const auxSource = `// shmem's device kernels (generated into gpu_kernels_ptx.go; edit auxSource in gpu_kernels.go).
#include "roxamen/roxshmem.h"

// One AMO (ROXSHMEM_AMO_*) of width 4 or 8 at system scope on addr (this PE's heap or a mapped
// peer's); the old value goes to out (host-pinned and device-mapped, or device memory) unless out is 0.
extern "C" __global__ void roxg_amo(uint64_t addr, uint32_t kind, uint32_t width, uint64_t value, uint64_t cmp,
				    uint64_t *out)
{
	if (roxa_tid() != 0 || roxa_block() != 0)
		return;
	roxa_fence_sc();
	uint64_t old;
	if (width == 8)
		old = roxa_amo_u64(kind, (uint64_t *)(uintptr_t)addr, value, cmp);
	else
		old = roxa_amo_u32(kind, (uint32_t *)(uintptr_t)addr, (uint32_t)value, (uint32_t)cmp);
	roxa_fence_sc();
	if (out != 0)
		roxa_st_release_u64(out, old);
}
`

// auxArches are the targets auxPTX holds.
var auxArches = []string{"sm_80", "sm_90"}

// auxObject returns shmem's kernels for a device of arch: the newest PTX not newer than it.
func auxObject(arch string) ([]byte, error) {
	var v int
	if strings.HasPrefix(arch, "sm_") {
		fmt.Sscanf(strings.TrimRight(arch[3:], "af"), "%d", &v)
	}
	switch {
	case v >= 90:
		return []byte(auxPTX["sm_90"]), nil
	case v >= 80:
		return []byte(auxPTX["sm_80"]), nil
	}
	return nil, fmt.Errorf("shmem: no build of shmem's device kernels for %q (have PTX for %s)", arch, strings.Join(auxArches, ", "))
}
