#!/usr/bin/env bash
# Server CPU per document written (issue 24): a fresh server pinned to CPU 0 takes DURATION
# seconds of docbench writes (32 clients on CPU 1, durability local); then the index
# catches up (lag_txns 0). Prints writes/s, live documents in the index, the server's CPU
# microseconds per document during the writes, and the hanu-indexer thread's CPU
# microseconds per document up to the end of the catch-up, the write p99, the index's lag
# (txns) when the writes end and the seconds it takes to catch up after them.
#   BUILD=build bench/docs-cpu.sh LABEL [DURATION] [-- server args]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
label=$1; shift
duration=15
if [ $# -gt 0 ] && [ "$1" != "--" ]; then duration=$1; shift; fi
[ "${1:-}" = "--" ] && shift
dir=/var/tmp/hanudb-docscpu.$$
port=$((20000 + RANDOM % 12000))   # below the ephemeral ports (32768-)
url=http://127.0.0.1:$port
rm -rf "$dir" "$dir.bucket"
taskset -c 0 "$BUILD/hanudb" serve --data "$dir" --http-addr 127.0.0.1:$port --kv-addr 127.0.0.1:$((port + 1)) "$@" \
  >"$dir.log" 2>&1 &
pid=$!
for _ in $(seq 200); do curl -sf "$url/_health" >/dev/null 2>&1 && break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null || { echo "$label: the server did not start:" >&2; cat "$dir.log" >&2; rm -rf "$dir" "$dir.bucket" "$dir.log"; exit 1; }
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
icpu() {
  local t=0
  for d in /proc/$pid/task/*; do
    if [ "$(cat "$d/comm" 2>/dev/null)" = hanu-indexer ]; then t=$((t + $(awk '{print $14 + $15}' "$d/stat"))); fi
  done
  echo $t
}
c0=$(cpu); i0=$(icpu)
out=$(taskset -c 1 "$BUILD/bench/docbench" --url "$url" --phase write --duration "$duration" --json 2>/dev/null)
c1=$(cpu)
st() { curl -sf "$url/_status"; }
lag() { st | python3 -c 'import json,sys; print(json.load(sys.stdin).get("index", {}).get("lag_txns", 0))'; }
lag_end=$(lag) t_end=$(date +%s.%N)
for _ in $(seq 1200); do
  [ "$(lag)" = 0 ] && break
  sleep 0.1
done
t_done=$(date +%s.%N)
i1=$(icpu)
live=$(st | python3 -c 'import json,sys; print(json.load(sys.stdin).get("index", {}).get("live_docs", "-"))')
kill "$pid"; wait "$pid" || true
python3 - "$label" "$out" "$(getconf CLK_TCK)" "$c0" "$c1" "$i0" "$i1" "$live" "$lag_end" "$t_end" "$t_done" <<'PY'
import json, sys
label, o, tick = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
c0, c1, i0, i1 = map(int, sys.argv[4:8])
docs = max(1, o["docs_written"])
print("| %s | %.0f | %d | %s | %.1f | %.1f | %.2f | %s | %.1f |" % (label, o["writes_per_s"], docs, sys.argv[8],
      (c1 - c0) * 1e6 / tick / docs, (i1 - i0) * 1e6 / tick / docs, o["write_p99_us"] / 1000,
      sys.argv[9], float(sys.argv[11]) - float(sys.argv[10])))
PY
rm -rf "$dir" "$dir.bucket" "$dir.log"
