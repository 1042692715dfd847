#!/usr/bin/env bash
# The ceiling of docbench's read shape on this machine (docs/PERFORMANCE.md, "The ceiling of the
# documents shape"): bench/nullhttp, a server that does no work, pinned to CPU 0, answers each of
# docbench's read mixes (docbench on CPU 1) with bodies of the sizes HanuDB sends; prints
# docbench's lines and the null server's CPU time (user + system from /proc) per answer. What it
# reaches is what any server reaches at best in this shape, on this machine, at this moment: run
# it next to bench/ab-docs.sh.
#   bench/docs-ceiling.sh [--rounds 2] [--read-s 8]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
rounds=2 read_s=8
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2;;
    --read-s) read_s=$2; shift 2;;
    *) echo "usage: bench/docs-ceiling.sh [--rounds N] [--read-s S]" >&2; exit 2;;
  esac
done
port=$((27900 + RANDOM % 90))
ids=$(mktemp)
trap 'rm -f "$ids"' EXIT
for i in $(seq 0 999); do printf '%d\t06NULL%014d\n' "$i" "$i"; done >"$ids"
tck=$(getconf CLK_TCK)
for round in $(seq "$rounds"); do
  taskset -c 0 "$BUILD/bench/nullhttp" --port "$port" >/dev/null &
  pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/" >/dev/null 2>&1 && break; sleep 0.05; done
  for mix in get=50,find=25,search=25 get=100 find=100 search=100; do
    c0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    out=$(taskset -c 1 "$BUILD/bench/docbench" --url "http://127.0.0.1:$port" --phase read --duration "$read_s" \
      --ids "$ids" --mix "$mix" 2>/dev/null | grep '^read')
    c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    n=$(echo "$out" | awk '/^read   all/ {print $3}')
    echo "$round null [$mix] server CPU per answer: $(echo "scale=1; ($c1 - $c0) * 1000000 / $tck / $n" | bc) us"
    echo "$out" | sed "s/^/    /"
  done
  kill $pid; wait $pid 2>/dev/null || true
done
