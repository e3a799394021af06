#!/bin/bash
# Fused against unfused GEMM + all-reduce across two network-namespace hosts joined by a
# rate-limited link (root only): each host's eth0 sends through a tbf qdisc, so that the exchange
# takes the link's time rather than only the CPUs' (which, on one machine, both hosts share).
#
#   examples/gemm/tbf.sh [PES_PER_HOST [RATE [GEMM FLAGS...]]]
#
# defaults: 1 PE per host, 1gbit, -m 512 -n 512 -k 192 -steps 20: there the exchange is about a
# third of the unfused step, the issue's CPU target (-raw prints every step). RUNS=N runs the job
# N times on the same hosts (each run prints its own medians), with the load average before each.
# Needs iproute2 (ip, tc) and Go. The hosts (namespaces rox-g<pid>0 and 1) are removed on any exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
per=${1:-1} rate=${2:-1gbit}
shift $(($# < 2 ? $# : 2))
[ $# -gt 0 ] || set -- -m 512 -n 512 -k 192 -steps 20
name=rox-g$$ subnet=10.231.$((RANDOM % 200 + 20))
bin=$(mktemp -d)
job=
cleanup() {
  if [ -n "$job" ]; then kill "$job" 2>/dev/null || true; wait "$job" 2>/dev/null || true; fi
  test/netns/netns.sh down "$name" 2 >/dev/null 2>&1 || true
  rm -rf "$bin"
}
trap cleanup EXIT
trap 'exit 143' INT TERM # a signal ends the script through its EXIT trap too
CGO_ENABLED=0 go build -o "$bin/roxrun" ./cmd/roxrun
CGO_ENABLED=0 go build -o "$bin/gemm" ./examples/gemm
test/netns/netns.sh up "$name" 2 "$subnet" >/dev/null
for i in 0 1; do
  ip netns exec "$name$i" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms
done
for ((r = 1; r <= ${RUNS:-1}; r++)); do
  echo "tbf.sh: run $r of ${RUNS:-1}, $per PEs per host, link $rate, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  # in the background, so that a signal reaches the trap now rather than when the job ends
  "$bin/roxrun" --hosts "${name}0:$per,${name}1:$per" --rsh 'ip netns exec' --bind "$subnet.254:0" \
    "$bin/gemm" "$@" &
  job=$!
  wait "$job"
  job=
done
