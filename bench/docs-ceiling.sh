#!/usr/bin/env bash
# The ceiling of docbench's read shape on this machine (docs/PERFORMANCE.md, "The ceiling of the
# documents shape"): bench/nullhttp, a server that does no work, pinned to CPU 0, answers each of
# docbench's read mixes (docbench on CPU 1) with bodies of the sizes HanuDB sends; prints
# docbench's lines and the server's CPU time (user + system from /proc) per answer. What it
# reaches is what any server reaches at best in this shape, on this machine, at this moment.
# This machine's speed changes by up to 2x within minutes, so with --against the null server and
# HanuDB take turns on every mix (HanuDB on an existing data directory, e.g. one that
# bench/ab-docs.sh or a docbench write phase filled, with its --ids file) and each pair prints
# HanuDB's share of the ceiling.
# --mixes picks the mixes (comma-separated lists joined by spaces), --search-words is docbench's.
#   bench/docs-ceiling.sh [--rounds 2] [--read-s 8] [--mixes "get=100 search=100"] [--search-words zipf]
#                         [--against BIN --data DIR --ids FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
rounds=2 read_s=8 against="" data="" ids="" words=uniform
mixes="get=50,find=25,search=25 get=100 find=100 search=100"
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2;;
    --read-s) read_s=$2; shift 2;;
    --against) against=$2; shift 2;;
    --data) data=$2; shift 2;;
    --ids) ids=$2; shift 2;;
    --mixes) mixes=$2; shift 2;;
    --search-words) words=$2; shift 2;;
    *) echo "usage: bench/docs-ceiling.sh [--rounds N] [--read-s S] [--mixes LIST] [--search-words uniform|zipf] [--against BIN --data DIR --ids FILE]" >&2
       exit 2;;
  esac
done
if [ -n "$against" ] && { [ ! -d "$data" ] || [ ! -f "$ids" ]; }; then
  echo "docs-ceiling: --against needs --data (an existing data directory) and --ids (docbench's ids file)" >&2
  exit 2
fi
port=$((27900 + RANDOM % 90))
url=http://127.0.0.1:$port
null_ids=$(mktemp)
trap 'rm -f "$null_ids"' EXIT
for i in $(seq 0 999); do printf '%d\t06NULL%014d\n' "$i" "$i"; done >"$null_ids"
tck=$(getconf CLK_TCK)
start_server() {   # null | hanudb
  if [ "$1" = null ]; then
    taskset -c 0 "$BUILD/bench/nullhttp" --port "$port" >/dev/null &
  else
    taskset -c 0 "$against" serve --data "$data" --http-addr "127.0.0.1:$port" --kv-addr "127.0.0.1:$((port + 1))" \
      >/dev/null 2>&1 &
  fi
  pid=$!
  for _ in $(seq 200); do curl -sf "$url/_health" >/dev/null 2>&1 && break; sleep 0.05; done
}
# run_mix NAME MIX IDS: prints docbench's lines and the CPU per answer; sets ops (answers/s)
run_mix() {
  local c0 c1 out n
  c0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  out=$(taskset -c 1 "$BUILD/bench/docbench" --url "$url" --phase read --duration "$read_s" --ids "$3" \
    --mix "$2" --search-words "$words" 2>/dev/null | grep '^read')
  c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  n=$(echo "$out" | awk '/^read   all/ {print $3}')
  ops=$(echo "$out" | awk '/^read   all/ {print $4}')
  echo "$round $1 [$2 $words] server CPU per answer: $(echo "scale=1; ($c1 - $c0) * 1000000 / $tck / $n" | bc) us"
  echo "$out" | sed "s/^/    /"
}
for round in $(seq "$rounds"); do
  for mix in $mixes; do
    start_server null
    run_mix null "$mix" "$null_ids"
    null_ops=$ops
    kill $pid; wait $pid 2>/dev/null || true
    if [ -n "$against" ]; then
      start_server hanudb
      run_mix hanudb "$mix" "$ids"
      echo "$round [$mix] hanudb / null: $(echo "scale=3; $ops / $null_ops" | bc)"
      kill $pid; wait $pid 2>/dev/null || true
    fi
  done
done
