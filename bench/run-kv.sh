#!/usr/bin/env bash
# Runs the key-value benchmark matrix of docs/BENCHMARKS.md: a fresh server pinned to
# CPU 0, kvbench pinned to CPU 1, every workload RUNS times, printing one markdown row
# per run (ops/s, p50, p99, p99.9) plus the server's bytes written per 1 000 records.
#   bench/run-kv.sh [--prealloc append|fallocate|zerofill] [--runs N] [--workloads "a b"]
#                   [--dir PATH] [--ops N] [--durability local|none] [--server-args "..."]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
prealloc=zerofill runs=2 workloads="read-overwrite write read cas batch" dir=/var/tmp/hanudb-bench
ops=256000 durability=local server_args=
while [ $# -gt 0 ]; do
  case $1 in
    --prealloc) prealloc=$2; shift 2;;
    --runs) runs=$2; shift 2;;
    --workloads) workloads=$2; shift 2;;
    --dir) dir=$2; shift 2;;
    --ops) ops=$2; shift 2;;
    --durability) durability=$2; shift 2;;
    --server-args) server_args=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
port=$((20000 + RANDOM % 20000))
echo "| workload | prealloc | durability | ops/s | p50 us | p99 us | p99.9 us | frame bytes / 1000 records | zero-fill bytes / 1000 records | syncs / 1000 records | mean fdatasync us |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for w in $workloads; do
  for r in $(seq "$runs"); do
    rm -rf "$dir" "$dir.bucket"   # the default bucket too, or each run rebuilds the last one's keys
    taskset -c 0 "$BUILD/hanudb" serve --data "$dir" --kv-addr 127.0.0.1:$port --prealloc "$prealloc" \
      $server_args >"$dir.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do "$BUILD/hanudb" kv --addr 127.0.0.1:$port ping >/dev/null 2>&1 && break; sleep 0.05; done
    s0=$("$BUILD/hanudb" kv --addr 127.0.0.1:$port stats)
    out=$(taskset -c 1 "$BUILD/bench/kvbench" --addr 127.0.0.1:$port --workload "$w" --ops "$ops" \
          --durability "$durability" --json 2>/dev/null)
    s1=$("$BUILD/hanudb" kv --addr 127.0.0.1:$port stats)
    kill "$pid"; wait "$pid" || true
    python3 - "$w" "$prealloc" "$durability" "$out" "$s0" "$s1" <<'PY'
import json, sys
w, pre, dur, out, s0, s1 = sys.argv[1:7]
o, a, b = json.loads(out), json.loads(s0), json.loads(s1)
frames = max(1, b["frames"] - a["frames"])
framed = b["log_bytes_written"] - a["log_bytes_written"]
zeros = b["prealloc_bytes"] - a["prealloc_bytes"]
syncs = max(1, b["syncs"] - a["syncs"])
print("| %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.1f | %.0f |" % (
    w, pre, dur, o["throughput"], o["p50_us"], o["p99_us"], o["p999_us"],
    framed * 1000.0 / frames, zeros * 1000.0 / frames, (b["syncs"] - a["syncs"]) * 1000.0 / frames,
    (b["sync_us"] - a["sync_us"]) / syncs))
PY
  done
done
rm -rf "$dir" "$dir.bucket" "$dir.log"
