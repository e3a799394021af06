#!/bin/bash
# Builds allreduce.hip with NVIDIA's nvcc (on a machine with the CUDA toolkit) into OUT (default
# /tmp/allreduce-nvcc.ptx): run it with `roxrun -n 2 ./examples/kernel -image OUT`.
set -euo pipefail
cd "$(dirname "$0")"
out=${1:-/tmp/allreduce-nvcc.ptx}
nvcc -x cu -arch=sm_90 -ptx -O3 -I../../kernels/include -o "$out" allreduce.hip
echo "built $out with $(nvcc --version | tail -1)"
