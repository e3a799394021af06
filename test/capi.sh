#!/bin/bash
# The C library and the Python package, end to end on the host backend: builds libroxamen.so
# (the one cgo build), checks include/roxamen.h against the prototypes cgo generates, runs the C
# test program and the pytest suites as 4-PE roxrun jobs. About 30 s once Go's build cache is warm.
# Exits non-zero on any failure, pytest's "no tests ran" (5) included.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PYTHONDONTWRITEBYTECODE=1 ROX_DEVICE=host ROX_TIMEOUT=20s

CGO_ENABLED=1 go build -buildmode=c-shared -o "$tmp/libroxamen.so" ./capi
# The hand-written header and cgo's must agree: a differing prototype is a compile error here.
printf '#include "libroxamen.h"\n#include "roxamen.h"\n' >"$tmp/headers.c"
gcc -fsyntax-only -Wall -Werror -Iinclude -I"$tmp" "$tmp/headers.c"
# CUDA/HIP C++ programs include it too (where a C++ compiler is installed)
! command -v g++ >/dev/null || g++ -x c++ -fsyntax-only -Wall -Werror -Iinclude -I"$tmp" "$tmp/headers.c"
CGO_ENABLED=0 go build -o "$tmp/roxrun" ./cmd/roxrun

gcc -O1 -Wall -Werror -Iinclude examples/c/roxamen_test.c -L"$tmp" -lroxamen -lm -Wl,-rpath,"$tmp" -o "$tmp/roxamen_test"
# Both deliveries: in order, and ROX_DELIVERY=reorder (what the memory model allows, no more).
for delivery in direct reorder; do
  out=$(ROX_DELIVERY=$delivery timeout 60 "$tmp/roxrun" -n 4 "$tmp/roxamen_test" 2>&1) ||
    { echo "$out" >&2; echo "test/capi.sh: the C test failed (ROX_DELIVERY=$delivery)" >&2; exit 1; }
  [ "$(grep -c 'all checks passed' <<<"$out")" = 4 ] || { echo "$out" >&2; echo "test/capi.sh: not every PE passed the C test" >&2; exit 1; }
done

# The README's C example, as the README builds and runs it.
gcc -Wall -Werror -Iinclude examples/c/ring.c -L"$tmp" -lroxamen -Wl,-rpath,"$tmp" -o "$tmp/ring"
out=$(timeout 60 "$tmp/roxrun" -n 4 "$tmp/ring" 2>&1) || { echo "$out" >&2; echo "test/capi.sh: examples/c/ring.c failed" >&2; exit 1; }
[ "$(grep -cE 'sum 6$' <<<"$out")" = 4 ] && [ "$(grep -c 'PE 4' <<<"$out")" = 4 ] ||
  { echo "$out" >&2; echo "test/capi.sh: examples/c/ring.c printed other sums or no out-of-range error" >&2; exit 1; }

py=""
for p in /usr/bin/python3 python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import numpy, pytest' 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "test/capi.sh: no python3 with numpy and pytest (apt-get install python3-numpy python3-pytest)" >&2; exit 1; }
export ROXAMEN_LIB="$tmp/libroxamen.so" ROXRUN="$tmp/roxrun" PYTHONPATH=python

# pytest: 0 is success; anything else (failures, 5: no tests collected) fails the run.
for delivery in direct reorder; do
  out=$(ROX_DELIVERY=$delivery timeout 120 "$tmp/roxrun" -n 4 "$py" -m pytest -q -p no:cacheprovider python/tests/job 2>&1) ||
    { echo "$out" >&2; echo "test/capi.sh: the 4-PE pytest job failed (ROX_DELIVERY=$delivery)" >&2; exit 1; }
  [ "$(grep -cE '\] [0-9]+ passed' <<<"$out")" = 4 ] || { echo "$out" >&2; echo "test/capi.sh: not every PE ran the tests" >&2; exit 1; }
done
timeout 300 "$py" -m pytest -q -p no:cacheprovider python/tests/test_launch.py ||
  { echo "test/capi.sh: python/tests/test_launch.py failed" >&2; exit 1; }
echo "test/capi.sh: the C library and the Python package passed"
