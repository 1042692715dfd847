#!/usr/bin/env bash
# Server CPU per operation of one kvbench run (issue 24): a fresh server pinned to CPU 0,
# kvbench on CPU 1; prints ops/s, the server's CPU microseconds per sampled+warm-up op
# (utime+stime of /proc/PID/stat) and those of its hanu-indexer and hanu-sealer threads.
#   BUILD=build bench/kv-cpu.sh LABEL [--workload write] [--durability local] [--ops N] -- [server args]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
label=$1; shift
workload=write durability=local ops=192000 db=default
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    --workload) workload=$2; shift 2;;
    --durability) durability=$2; shift 2;;
    --ops) ops=$2; shift 2;;
    --db) db=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
[ "${1:-}" = "--" ] && shift
dir=/var/tmp/hanudb-kvcpu.$$
port=$((20000 + RANDOM % 12000))   # below the ephemeral ports (32768-)
hport=$((port + 1))
rm -rf "$dir" "$dir.bucket"
taskset -c 0 "$BUILD/hanudb" serve --data "$dir" --kv-addr 127.0.0.1:$port --http-addr 127.0.0.1:$hport "$@" \
  >"$dir.log" 2>&1 &
pid=$!
for _ in $(seq 100); do "$BUILD/hanudb" kv --addr 127.0.0.1:$port ping >/dev/null 2>&1 && break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null || { echo "$label: the server did not start:" >&2; cat "$dir.log" >&2; rm -rf "$dir" "$dir.bucket" "$dir.log"; exit 1; }
tick=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
tcpu() {  # CPU ticks of the threads named $1
  local t=0
  for d in /proc/$pid/task/*; do
    if [ "$(cat "$d/comm" 2>/dev/null)" = "$1" ]; then t=$((t + $(awk '{print $14 + $15}' "$d/stat"))); fi
  done
  echo $t
}
c0=$(cpu); i0=$(tcpu hanu-indexer); s0=$(tcpu hanu-sealer)
out=$(taskset -c 1 "$BUILD/bench/kvbench" --addr 127.0.0.1:$port --workload "$workload" --ops "$ops" \
      --durability "$durability" --db "$db" --json 2>/dev/null)
c1=$(cpu); i1=$(tcpu hanu-indexer); s1=$(tcpu hanu-sealer)
kill "$pid"; wait "$pid" || true
python3 - "$label" "$out" "$ops" "$tick" "$c0" "$c1" "$i0" "$i1" "$s0" "$s1" <<'PY'
import json, sys
label, out = sys.argv[1], json.loads(sys.argv[2])
ops, tick = int(sys.argv[3]) + 4096, int(sys.argv[4])
c0, c1, i0, i1, s0, s1 = map(int, sys.argv[5:11])
us = lambda a, b: (b - a) * 1e6 / tick / ops
print("| %s | %.0f | %.1f | %.1f | %.1f |" % (label, out["throughput"], us(c0, c1), us(i0, i1), us(s0, s1)))
PY
rm -rf "$dir" "$dir.bucket" "$dir.log"
