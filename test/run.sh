#!/bin/bash
# The test command: installs what the tests need when it is missing, then runs the whole suite.
# CI (.ci/run) calls exactly this. Run it from anywhere in the checkout. `./test/run.sh long` is
# the nightly-style run: the long matrices too, and a 10-minute soak.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in "" | long) ;; *) echo "usage: test/run.sh [long]" >&2; exit 2 ;; esac

need=()
command -v clang-19 >/dev/null || need+=(clang-19 lld-19 llvm-19)
command -v gcc >/dev/null || need+=(gcc)               # the race detector's runtime needs cgo
/usr/bin/python3 -c 'import numpy, pytest' 2>/dev/null || need+=(python3-numpy python3-pytest)  # test/capi.sh
command -v ip >/dev/null || need+=(iproute2)           # network namespaces as hosts
[ -e /usr/lib/x86_64-linux-gnu/libamdhip64.so.5 ] || need+=(libamdhip64-5)   # the hip binding's "no AMD device" path
command -v mpirun >/dev/null || need+=(openmpi-bin libopenmpi-dev)
[ -e /usr/lib/x86_64-linux-gnu/libucp.so.0 ] && [ -e /usr/include/ucp/api/ucp.h ] && command -v ucx_perftest >/dev/null || need+=(libucx0 libucx-dev ucx-utils)
command -v slurmctld >/dev/null || need+=(slurm-wlm munge)      # a one-node Slurm for srun (test/launchers_test.go)
[ -e /usr/lib/x86_64-linux-gnu/libhsakmt.so.1 ] && [ -e /usr/include/hsakmttypes.h ] || need+=(libhsakmt1 libhsakmt-dev)  # the KFD binding's ABI check
# PMIx: libpmix.so.2 is what internal/pmix loads under mpirun and srun --mpi=pmix; libpmix-dev has
# the headers its ABI test compiles against and the unversioned libpmix.so that Slurm's mpi/pmix
# plugin dlopens.
[ -e /usr/lib/x86_64-linux-gnu/libpmix.so.2 ] && [ -e /usr/lib/x86_64-linux-gnu/libpmix.so ] && [ -e /usr/lib/x86_64-linux-gnu/pmix2/include/pmix.h ] || need+=(libpmix2 libpmix-dev)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "test/run.sh: installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "test/run.sh: missing ${need[*]} (not root: tests that need them skip)" >&2
  fi
fi

export CGO_ENABLED=0
# As root the packages above are installed, so a UCX that does not load is a failure, not a skip.
[ "$(id -u)" = 0 ] && export ROX_TEST_UCX=1 ROX_TEST_KFD=1
# Likewise libpmix and its headers: the PMIx ABI test and the PMIx launcher tests fail, not skip.
[ "$(id -u)" = 0 ] && export ROX_TEST_PMIX=1
# `./test/run.sh long` also runs the long matrices (ROX_TEST_LONG=1: each test that reads it says
# what it adds) and soaks for ROX_SOAK (default 10m) instead of a minute.
soak_for=15s fuzz_for=5s
[ "$mode" = long ] && export ROX_TEST_LONG=1 && soak_for=${ROX_SOAK:-10m} && fuzz_for=1m
go mod download

work=$(mktemp -d)
bg=()
finish() {
  status=$?
  for pid in "${bg[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  if [ -x "$work/testlog" ] && compgen -G "$work/*.json" >/dev/null; then
    "$work/testlog" slowest -n 10 "$work"/*.json || true
  fi
  rm -rf "$work"
  exit $status
}
trap finish EXIT
set -m # each background lane in its own process group, so that a failed run stops all of it
go build -o "$work/testlog" ./test/testlog
go build -o "$work/soak" ./test/soak
go vet ./...
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change: $unformatted" >&2; exit 1; fi

# Every decoder of untrusted bytes, and the allocator against its model, fuzzed for a bounded time
# each from its committed corpus (testdata/fuzz/NAME): about a minute in all (a minute each in the long
# run). A crash fails the run
# and leaves its input in the package's testdata/fuzz/NAME, to be fixed and committed.
fuzz_all() {
  for target in \
    internal/bootstrap:FuzzWire \
    internal/bootstrap:FuzzExpandNodelist \
    nic/tcp:FuzzFrames \
    nic:FuzzRingDescriptors \
    memmodel:FuzzParse \
    symheap:FuzzHeap; do
    pkg=${target%%:*} name=${target##*:}
    log=$(mktemp)
    if ! go test -run '^$' -fuzz "^$name\$" -fuzztime $fuzz_for -parallel 1 -fuzzminimizetime 2s "./$pkg" >"$log" 2>&1; then
      if grep -q 'Failing input written to' "$log"; then
        cat "$log" >&2; echo "test/run.sh: $name in ./$pkg found a failing input (above)" >&2; exit 1
      fi
      # No failing input: the fuzzing engine itself gave up (a worker starved on a loaded machine
      # reads as a hang). Say so and fuzz once more; a second failure fails the run.
      echo "test/run.sh: $name in ./$pkg: the fuzzing engine failed without a failing input; once more:" >&2
      tail -5 "$log" >&2
      go test -run '^$' -fuzz "^$name\$" -fuzztime $fuzz_for -parallel 1 -fuzzminimizetime 2s "./$pkg" >"$log" 2>&1 ||
        { cat "$log" >&2; echo "test/run.sh: $name in ./$pkg failed" >&2; exit 1; }
    fi
    rm -f "$log"
  done
}

# Three lanes run at once, each through testlog (plain output; the JSON kept for the slowest
# tests): much of the suite waits on jobs, timeouts and the namespaces' slow rail, not on the CPU.
# A lane's output is shown when it ends, the main lane's as it goes.
lanes=()
lane() { # lane NAME LABEL go test ARGS...: run in the background, its output in $work/NAME.log
  local name=$1 label=$2
  shift 2
  ("$@" | "$work/testlog" filter -save "$work/$name.json" -label "$label") >"$work/$name.log" 2>&1 &
  bg+=($!)
  lanes+=("$name:$!")
}
# Package test (the conformance suite over the NIC paths: tcp on one node, across namespaces, over
# the 4 rails, over UCX; the launchers, the examples): long jobs, started at once rather than
# after the packages before it; the lane still ends minutes before the plain pass.
lane test "" go test -json -count=1 -timeout 30m ./test
test_lane=$!
# The fuzzing (fuzz_all, above) runs for a set time once that lane has ended, in its place (the
# lane is not reaped before the plain pass ends: ended is gone or a zombie).
(
  while state=$(sed 's/.*) //' "/proc/$test_lane/stat" 2>/dev/null | cut -d' ' -f1) && [ -n "$state" ] && [ "$state" != Z ]; do
    sleep 2
  done
  fuzz_all
) >"$work/fuzz.log" 2>&1 &
bg+=($!)
fuzz=$!
# The concurrent core again under the race detector. Left out there: TestRailsPutSignalAfterEveryChunk,
# whose reader and the transport's are ordered through the rails' sockets and a signal, which the
# race detector cannot see (it runs in the plain pass); and what has no concurrency of its own to
# check or repeats at scale what the smaller tests run under the detector: the bootstrap simulation's 1024-PE runs
# (TestScale1024, TestScaleAcrossNodes: 100 s under the detector, 4 s without). One package at a
# time (-p 1): the detector's CPU would otherwise crowd the other lanes' timed jobs.
lane race race env CGO_ENABLED=1 go test -json -count=1 -race -p 1 -timeout 20m ./shmem/... ./symheap/... ./internal/bootstrap/... ./internal/pmix/... ./nic/... ./test/netns/... ./examples/gemm/... \
  -skip '^(TestRailsPutSignalAfterEveryChunk|TestScale1024|TestScaleAcrossNodes)$'

# Everything else, without the race detector (it needs cgo for its runtime, never for our code).
failed=0
go test -json -count=1 -timeout 30m $(go list ./... | grep -v '/roxamen/test$') | "$work/testlog" filter -save "$work/plain.json" || failed=1
for l in "${lanes[@]}"; do
  name=${l%%:*} pid=${l##*:}
  wait "$pid" || failed=1
  echo "test/run.sh: the $name lane:"
  cat "$work/$name.log"
done
[ $failed = 0 ] || { echo "test/run.sh: tests failed (above)" >&2; exit 1; }

# A soak (test/soak: random puts, AMOs, signals, collectives and ep calls, every result checked)
# over shared memory, tcp and the reordering delivery path, for a set time.
(
  for env in ROX_TRANSPORT=auto ROX_TRANSPORT=tcp ROX_DELIVERY=reorder; do
    echo "test/run.sh: soak with $env for $soak_for"
    env "$env" "$work/soak" -n 4 -d "$soak_for" || exit 1
  done
) >"$work/soak.log" 2>&1 &
bg+=($!)
soak=$!

# The C library and the Python package (their own cgo build, a C test and pytest jobs) beside the
# soak, which runs for a set time whatever else the machine does.
bash test/capi.sh >"$work/capi.log" 2>&1 &
bg+=($!)
capi=$!

fuzz_ok=0
wait "$fuzz" || fuzz_ok=1
cat "$work/fuzz.log"
[ $fuzz_ok = 0 ] || { echo "test/run.sh: the fuzzing failed (above)" >&2; exit 1; }
soak_ok=0
wait "$soak" || soak_ok=1
cat "$work/soak.log"
[ $soak_ok = 0 ] || { echo "test/run.sh: the soak failed (above)" >&2; exit 1; }
capi_ok=0
wait "$capi" || capi_ok=1
cat "$work/capi.log"
[ $capi_ok = 0 ] || { echo "test/run.sh: the C library or the Python package failed (above)" >&2; exit 1; }

trap - EXIT
"$work/testlog" slowest -n 10 "$work"/*.json
rm -rf "$work"
echo "test/run.sh: all tests passed"
