#!/bin/sh
# The kernels' GPU check, run on the GPU machine (nvcc from CUDA 13, libcuda; no Go there) from the
# repository root. Build the test binary first, on a machine with Go:
#
#   CGO_ENABLED=0 go test -c -o .gpu/kernels.test ./kernels
#
# then, in the device call (carry .gpu):  bash kernels/gpucheck/run.sh
#
# It checks that ptxas accepts every PTX file clang-19 produced (obj/ and gpucheck/), that the
# header compiles under nvcc with all warnings as errors (the check kernel and the full-API
# kernel, sm_80 and sm_90; the workload kernels; the collectives' object, sm_90), then runs
# TestGPU/TestGPURing (clang-19 and nvcc builds), TestGPUColl, TestGPUEP and TestGPUGEMM.
set -u
fail=0
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/.gpu}
mkdir -p "$out"
inc="$root/kernels/include"
nvcc --version | tail -n 2

step() { # name, command...: runs it, records a failure, goes on
	name=$1
	shift
	if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}

for arch in sm_80 sm_90; do
	step "ptxas $arch runtime-$arch.ptx" ptxas -arch="$arch" -o /dev/null "$root/kernels/obj/runtime-$arch.ptx"
	step "ptxas $arch workloads-$arch.ptx" ptxas -arch="$arch" -o /dev/null "$root/kernels/obj/workloads-$arch.ptx"
	# the collectives' object: ptxas's time is about what the driver's JIT spends on the first
	# stream-ordered collective of a process
	t0=$(date +%s)
	step "ptxas $arch coll-$arch.ptx" ptxas -arch="$arch" -o /dev/null "$root/kernels/obj/coll-$arch.ptx"
	echo "     ptxas coll-$arch.ptx took $(($(date +%s) - t0)) s"
done
step "ptxas sm_90 check-clang-sm_90.ptx" ptxas -arch=sm_90 -o /dev/null "$root/kernels/gpucheck/check-clang-sm_90.ptx"
step "ptxas sm_90 coll-clang-sm_90.ptx" ptxas -arch=sm_90 -o /dev/null "$root/kernels/gpucheck/coll-clang-sm_90.ptx"

for arch in sm_80 sm_90; do
	for src in gpucheck/check.hip gpucheck/coll.hip testdata/api.hip src/workloads.hip; do
		base=$(basename "$src" .hip)
		step "nvcc -Werror $arch $src" nvcc -x cu -arch="$arch" -ptx -Werror all-warnings \
			-Xcompiler -Wall,-Werror -I"$inc" -o "$out/$base-nvcc-$arch.ptx" "$root/kernels/$src"
		if [ ! -s "$out/$base-nvcc-$arch.ptx" ]; then # still build it, so the run below can go on
			nvcc -x cu -arch="$arch" -ptx -I"$inc" -o "$out/$base-nvcc-$arch.ptx" "$root/kernels/$src"
		fi
	done
done

step "nvcc -Werror sm_90 src/coll.hip" nvcc -x cu -arch=sm_90 -ptx -Werror all-warnings -Xcompiler -Wall,-Werror \
	-I"$inc" -o "$out/coll-nvcc-sm_90.ptx" "$root/kernels/src/coll.hip"

cd "$root/kernels"
step "TestGPU/TestGPURing/TestGPUColl/TestGPUEP/TestGPUGEMM" env ROX_TEST_GPU=1 ROX_GPUCHECK_NVCC_PTX="$out/check-nvcc-sm_90.ptx" \
	"$root/.gpu/kernels.test" -test.run 'GPU' -test.v -test.timeout 9m
exit $fail
