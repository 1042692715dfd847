#!/usr/bin/env bash
# Latency of key-value Sets at durability `bucket` (docs/PERFORMANCE.md, "Bucket
# writes"): a fresh server on a file:// bucket with the default seal interval,
# pinned to CPU 0, kvbench's write workload on CPU 1, at 1 and 32 clients, with no
# added latency and with every put taking --bucket-latency-put-ms (70: a simulated
# object store). One markdown row per run: ops/s, p50, p99, max.
#   bench/bucket-latency.sh [--bin PATH] [--ops N] [--runs N] [--dir PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
bin=$BUILD/hanudb ops=2000 runs=1 dir=/var/tmp/hanudb-bucket-lat
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$2; shift 2;;
    --ops) ops=$2; shift 2;;
    --runs) runs=$2; shift 2;;
    --dir) dir=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
port=$((20000 + RANDOM % 20000))
echo "| binary | put latency | clients | ops/s | p50 ms | p99 ms | max ms |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for lat in 0 70; do
  for clients in 1 32; do
    for r in $(seq "$runs"); do
      rm -rf "$dir" "$dir.bucket"
      taskset -c 0 "$bin" serve --data "$dir" --kv-addr 127.0.0.1:$port --http-addr off \
        --bucket-latency-put-ms "$lat" >"$dir.log" 2>&1 &
      pid=$!
      for _ in $(seq 100); do "$BUILD/hanudb" kv --addr 127.0.0.1:$port ping >/dev/null 2>&1 && break; sleep 0.05; done
      n=$ops
      [ "$clients" = 1 ] && [ "$lat" != 0 ] && n=$((ops / 8))   # about 75 ms each: keep the run short
      out=$(taskset -c 1 "$BUILD/bench/kvbench" --addr 127.0.0.1:$port --workload write --clients "$clients" \
            --ops "$n" --warmup 0 --durability bucket --json 2>/dev/null)
      kill "$pid"; wait "$pid" || true
      python3 - "$bin" "$lat" "$clients" "$out" <<'PY'
import json, sys
b, lat, clients, out = sys.argv[1:]
j = json.loads(out)
print("| %s | %s ms | %s | %.0f | %.2f | %.2f | %.2f |" % (b, lat, clients, j["throughput"], j["p50_us"] / 1000,
      j["p99_us"] / 1000, j["max_us"] / 1000))
PY
    done
  done
done
rm -rf "$dir" "$dir.bucket" "$dir.log"
