#!/usr/bin/env bash
# Measures index merges (docs/INDEX.md, "Measured"). For each merge policy: a fresh server
# pinned to CPU 0, docbench pinned to CPU 1 writes for WRITE_S seconds, the index's
# segments are read from /_status when reads begin, then the read mix runs for READ_S
# seconds; one line per run: segments, index bytes per live document, reads/s and p50/p99
# per op, and the server's peak anonymous memory and the machine's peak dirty page cache
# over both phases (bench/memwatch.py). Then writes/s (READ_S seconds of writes) with the index on, with --no-index, and
# with the index but no merges, RUNS times each, alternating, in the same session.
#   bench/run-index.sh [--write-s 60] [--read-s 20] [--runs 2] [--clients 32] [--dir PATH]
#                      [--policies "default none"] [--mix get=50,find=25,search=25]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
write_s=60 read_s=20 runs=2 clients=32 dir=/var/tmp/hanudb-index-bench policies="default none"
mix=get=50,find=25,search=25
while [ $# -gt 0 ]; do
  case $1 in
    --write-s) write_s=$2; shift 2;;
    --read-s) read_s=$2; shift 2;;
    --runs) runs=$2; shift 2;;
    --clients) clients=$2; shift 2;;
    --dir) dir=$2; shift 2;;
    --policies) policies=$2; shift 2;;
    --mix) mix=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
port=$((26100 + RANDOM % 800))
url=http://127.0.0.1:$port

start_server() {   # extra serve arguments
  rm -rf "$dir" "$dir.bucket"   # the default bucket too: a run must not rebuild the last one's documents
  taskset -c 0 "$BUILD/hanudb" serve --data "$dir" --kv-addr 127.0.0.1:$((port + 1)) \
    --http-addr 127.0.0.1:$port "$@" >"$dir.log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do curl -sf "$url/_health" >/dev/null 2>&1 && return; sleep 0.05; done
  echo "server did not start: $(tail -5 "$dir.log")" >&2; exit 1
}

stop_server() { kill "$pid"; wait "$pid" || true; }

index_status() {
  curl -sf "$url/_status" | python3 -c '
import json, sys
s = json.load(sys.stdin)["index"]
print(json.dumps({k: s[k] for k in ("segments", "bytes", "live_docs", "merges", "merge_ms", "lag_txns")}))'
}

for policy in $policies; do
  start_server --merge-policy "$policy"
  python3 bench/memwatch.py "$pid" >"$dir.mem" &
  mem_pid=$!
  w=$(taskset -c 1 "$BUILD/bench/docbench" --url "$url" --phase write --duration "$write_s" \
      --clients "$clients" --ids "$dir.ids" --json 2>>"$dir.bench-err") || true
  # Reads begin once the index has every write (what the read mix then queries).
  for _ in $(seq 600); do
    [ "$(curl -sf "$url/_status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["index"]["lag_txns"])')" = 0 ] && break
    sleep 0.1
  done
  st=$(index_status)
  r=$(taskset -c 1 "$BUILD/bench/docbench" --url "$url" --phase read --duration "$read_s" \
      --clients "$clients" --ids "$dir.ids" --mix "$mix" --json 2>>"$dir.bench-err") || true
  st2=$(index_status)
  kill "$mem_pid"; wait "$mem_pid" || true
  mem=$(cat "$dir.mem")
  stop_server
  python3 - "$policy" "$w" "$st" "$r" "$st2" "$mem" <<'PY'
import json, sys
policy, w, st, r, st2, mem = sys.argv[1], *map(json.loads, sys.argv[2:])
per_doc = st["bytes"] / st["live_docs"] if st["live_docs"] else 0
print("policy %-7s writes/s %6.0f  docs %d  segments at reads %d (merges %d, %d ms)  index bytes/doc %.0f"
      % (policy, w["writes_per_s"], st["live_docs"], st["segments"], st["merges"], st["merge_ms"], per_doc))
for op in ("get", "find", "search"):
    if r[op + "_count"]:
        print("  %-6s %7.0f/s  p50 %6d us  p99 %7d us" % (op, r[op + "_per_s"], r[op + "_p50_us"], r[op + "_p99_us"]))
print("  all    %7.0f/s  p50 %6d us  p99 %7d us   segments after reads %d"
      % (r["reads_per_s"], r["read_p50_us"], r["read_p99_us"], st2["segments"]))
print("  memory: peak anonymous %.0f MB, peak dirty page cache %.0f MB, peak of the sum %.0f MB (%d samples)"
      % (mem["peak_anon_kb"] / 1024, mem["peak_dirty_kb"] / 1024, mem["peak_anon_plus_dirty_kb"] / 1024,
         mem["samples"]))
if "peak_anon_plus_dirty_bytes" in w:   # docbench's own samples of /_status, once a second per phase
    print("  docbench: anonymous + dirty at most %.0f MB writing, %.0f MB reading; server peak RSS %.0f MB"
          % (w["peak_anon_plus_dirty_bytes"] / 2**20, r.get("peak_anon_plus_dirty_bytes", 0) / 2**20,
             max(w["server_peak_rss_bytes"], r.get("server_peak_rss_bytes", 0)) / 2**20))
PY
done

for run in $(seq "$runs"); do
  for mode in index no-index index-no-merges; do
    case $mode in
      index) start_server;;
      no-index) start_server --no-index;;
      *) start_server --merge-policy none;;
    esac
    w=$(taskset -c 1 "$BUILD/bench/docbench" --url "$url" --phase write --duration "$read_s" \
        --clients "$clients" --json 2>>"$dir.bench-err") || true
    stop_server
    python3 -c 'import json,sys; w=json.loads(sys.argv[2]); print("writes run %s %-15s %6.0f/s  p99 %d us" % (sys.argv[1], sys.argv[3], w["writes_per_s"], w["write_p99_us"]))' "$run" "$w" "$mode"
  done
done
rm -rf "$dir" "$dir.bucket" "$dir.ids" "$dir.log" "$dir.mem"
