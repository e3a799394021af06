#!/bin/bash
# Network namespaces as hosts, for multi-host jobs on one machine (root only).
#
#   netns.sh up   NAME N [SUBNET]   make hosts NAME0..NAME{N-1}, joined by bridge NAME-br in the
#                                   current namespace (the gateway, SUBNET.254), host i at
#                                   SUBNET.(i+1); SUBNET defaults to 10.231.0. Prints "host ip".
#   netns.sh down NAME N            remove them (ignores what is already gone)
#   netns.sh cut  NAME I            host I vanishes from the network (link deleted, no FIN/RST)
#
# Then, e.g.: roxrun --hosts NAME0:2,NAME1:2 --rsh 'ip netns exec' PROGRAM
# The Go helpers in this directory (package netns) do the same for tests.
set -euo pipefail

usage() { sed -n '2,12p' "$0" >&2; exit 2; }
[ $# -ge 3 ] || usage
cmd=$1 name=$2 n=$3
subnet=${4:-10.231.0}
br="${name:0:12}-br"

case $cmd in
up)
  ip link add "$br" type bridge
  ip addr add "$subnet.254/24" dev "$br"
  ip link set "$br" up
  for ((i = 0; i < n; i++)); do
    h="$name$i" v="${name:0:10}-v$i"
    ip netns add "$h"
    ip link add "$v" type veth peer name eth0 netns "$h"
    ip link set "$v" master "$br" up
    ip -n "$h" link set lo up
    ip -n "$h" addr add "$subnet.$((i + 1))/24" dev eth0
    ip -n "$h" link set eth0 up
    ip -n "$h" route add default via "$subnet.254"
    echo "$h $subnet.$((i + 1))"
  done
  ;;
down)
  for ((i = 0; i < n; i++)); do
    ip netns del "$name$i" 2>/dev/null || true
    ip link del "${name:0:10}-v$i" 2>/dev/null || true
  done
  ip link del "$br" 2>/dev/null || true
  ;;
cut)
  ip link del "${name:0:10}-v$n"
  ip netns del "$name$n"
  ;;
*) usage ;;
esac
