#!/bin/bash
# Fused against unfused GEMM + all-reduce across two network-namespace hosts joined by a
# rate-limited link (root only): each host's eth0 sends through a tbf qdisc, so that the exchange
# takes the link's time rather than only the CPUs' (which, on one machine, both hosts share).
#
#   examples/gemm/tbf.sh [PES_PER_HOST [RATE [GEMM FLAGS...]]]
#
# defaults: 1 PE per host, 1gbit, -m 512 -n 512 -k 256 -steps 20. Needs iproute2 (ip, tc) and Go.
set -euo pipefail
cd "$(dirname "$0")/../.."
per=${1:-1} rate=${2:-1gbit}
shift $(($# < 2 ? $# : 2))
[ $# -gt 0 ] || set -- -m 512 -n 512 -k 256 -steps 20
name=gtbf$$ subnet=10.231.$((RANDOM % 200 + 20))
bin=$(mktemp -d)
cleanup() { test/netns/netns.sh down "$name" 2 >/dev/null 2>&1 || true; rm -rf "$bin"; }
trap cleanup EXIT
CGO_ENABLED=0 go build -o "$bin/roxrun" ./cmd/roxrun
CGO_ENABLED=0 go build -o "$bin/gemm" ./examples/gemm
test/netns/netns.sh up "$name" 2 "$subnet" >/dev/null
for i in 0 1; do
  ip netns exec "$name$i" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms
done
"$bin/roxrun" --hosts "${name}0:$per,${name}1:$per" --rsh 'ip netns exec' --bind "$subnet.254:0" \
  "$bin/gemm" "$@"
