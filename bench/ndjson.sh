#!/usr/bin/env bash
# NDJSON import and export (issue 28): a fresh server pinned to CPU 0 (index on,
# durability local), `hanudb import` of DOCS docbench documents (build/bench/ndjsongen)
# from CPU 1, then `hanudb export --to` a file on CPU 1. Prints documents/s and MB/s
# (wall), the server's CPU per document and per MB (utime+stime of /proc/PID/stat),
# the time the index took to catch up after the import (and to finish its merges), and
# the server's peak RssAnon during each phase (bench/memwatch.py); then the export again
# through curl -o /dev/null (what the server sends when the client does nothing with it).
#   BUILD=build bench/ndjson.sh [DOCS (1000000)] [-- server args]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
docs=1000000
if [ $# -gt 0 ] && [ "$1" != "--" ]; then docs=$1; shift; fi
[ "${1:-}" = "--" ] && shift
dir=/var/tmp/hanudb-ndjson.$$
port=$((20000 + RANDOM % 12000))
url=http://127.0.0.1:$port
rm -rf "$dir" "$dir.bucket"
mkdir -p "$dir.files"
"$BUILD/bench/ndjsongen" --docs "$docs" > "$dir.files/in.ndjson"
bytes=$(stat -c %s "$dir.files/in.ndjson")
taskset -c 0 "$BUILD/hanudb" serve --data "$dir" --http-addr 127.0.0.1:$port --kv-addr 127.0.0.1:$((port + 1)) "$@" \
  >"$dir.log" 2>&1 &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir" "$dir.bucket" "$dir.log" "$dir.files"; }
trap cleanup EXIT
for _ in $(seq 200); do curl -sf "$url/_health" >/dev/null 2>&1 && break; sleep 0.05; done
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
now() { date +%s.%N; }
python3 bench/memwatch.py "$pid" > "$dir.files/mem-import" & mw=$!
c0=$(cpu); t0=$(now)
taskset -c 1 "$BUILD/hanudb" import --url "$url" --collection docs --request-bytes 8M "$dir.files/in.ndjson" \
  > "$dir.files/import.json"
t1=$(now); c1=$(cpu)
for _ in $(seq 3000); do
  [ "$(curl -sf "$url/_status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["index"]["lag_txns"])')" = 0 ] && break
  sleep 0.1
done
t2=$(now); c2=$(cpu)
for _ in $(seq 3000); do   # and its merges: their work is not the export's
  [ "$(curl -sf "$url/_status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["index"]["merging"])')" = False ] && break
  sleep 0.1
done
t2m=$(now); c2m=$(cpu)
kill -TERM "$mw"; wait "$mw" || true
python3 bench/memwatch.py "$pid" > "$dir.files/mem-export" & mw=$!
c3=$(cpu); t3=$(now)
taskset -c 1 "$BUILD/hanudb" export --url "$url" --collection docs --to "$dir.files/out.ndjson" 2>/dev/null
t4=$(now); c4=$(cpu)
kill -TERM "$mw"; wait "$mw" || true
c5=$(cpu); t5=$(now)   # the same through curl to /dev/null: what the server sends without hanudb's writes
taskset -c 1 curl -sf -o /dev/null "$url/c/docs/docs?format=ndjson"
t6=$(now); c6=$(cpu)
out=$(stat -c %s "$dir.files/out.ndjson")
python3 - "$docs" "$bytes" "$out" "$t0" "$t1" "$t2" "$t3" "$t4" "$c0" "$c1" "$c3" "$c4" "$dir.files" "$t5" "$t6" \
  "$c5" "$c6" "$t2m" "$c2" "$c2m" <<'PY'
import json, os, sys
docs, bytes_in, bytes_out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
t0, t1, t2, t3, t4 = map(float, sys.argv[4:9])
c0, c1, c3, c4 = (int(x) / os.sysconf("SC_CLK_TCK") for x in sys.argv[9:13])
d = sys.argv[13]
t5, t6 = float(sys.argv[14]), float(sys.argv[15])
c5, c6 = (int(x) / os.sysconf("SC_CLK_TCK") for x in sys.argv[16:18])
t2m = float(sys.argv[18])
c2, c2m = (int(x) / os.sysconf("SC_CLK_TCK") for x in sys.argv[19:21])
imp = json.load(open(d + "/import.json"))
mi, me = json.load(open(d + "/mem-import")), json.load(open(d + "/mem-export"))
print(json.dumps({
    "docs": docs, "imported": imp["imported"], "input_mb": round(bytes_in / 1e6, 1),
    "import_s": round(t1 - t0, 2), "import_docs_per_s": round(docs / (t1 - t0)),
    "import_server_cpu_us_per_doc": round((c1 - c0) * 1e6 / docs, 2),
    "index_caught_up_after_s": round(t2 - t1, 2),
    "index_merged_after_s": round(t2m - t1, 2),
    "catch_up_server_cpu_s": round(c2 - c1, 2), "merges_after_server_cpu_s": round(c2m - c2, 2),
    "import_peak_rss_anon_mb": round(mi.get("peak_anon_kb", 0) / 1024, 1),
    "export_mb": round(bytes_out / 1e6, 1), "export_s": round(t4 - t3, 2),
    "export_mb_per_s": round(bytes_out / 1e6 / (t4 - t3), 1),
    "export_server_cpu_ms_per_100mb": round((c4 - c3) * 1e3 * 100e6 / max(bytes_out, 1), 1),
    "export_peak_rss_anon_mb": round(me.get("peak_anon_kb", 0) / 1024, 1),
    "export_curl_mb_per_s": round(bytes_out / 1e6 / (t6 - t5), 1),
    "export_curl_server_cpu_ms_per_100mb": round((c6 - c5) * 1e3 * 100e6 / max(bytes_out, 1), 1),
}))
PY
