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
# kernel, sm_80 and sm_90), then runs TestGPU/TestGPURing on the clang-19 and the nvcc builds.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/.gpu}
mkdir -p "$out"
inc="$root/kernels/include"
nvcc --version | tail -n 2

for arch in sm_80 sm_90; do
	ptxas -arch="$arch" -o /dev/null "$root/kernels/obj/runtime-$arch.ptx"
	echo "ptxas $arch: runtime-$arch.ptx ok"
done
ptxas -arch=sm_90 -o /dev/null "$root/kernels/gpucheck/check-clang-sm_90.ptx"
echo "ptxas sm_90: check-clang-sm_90.ptx ok"

for arch in sm_80 sm_90; do
	nvcc -x cu -arch="$arch" -ptx -Werror all-warnings -Xcompiler -Wall,-Werror -I"$inc" \
		-o "$out/check-nvcc-$arch.ptx" "$root/kernels/gpucheck/check.hip"
	nvcc -x cu -arch="$arch" -ptx -Werror all-warnings -Xcompiler -Wall,-Werror -I"$inc" \
		-o "$out/api-nvcc-$arch.ptx" "$root/kernels/testdata/api.hip"
	echo "nvcc $arch: check.hip and api.hip ok"
done

cd "$root/kernels"
ROX_TEST_GPU=1 ROX_GPUCHECK_NVCC_PTX="$out/check-nvcc-sm_90.ptx" \
	"$root/.gpu/kernels.test" -test.run 'GPU' -test.v -test.timeout 9m
