#!/bin/sh
# What fresh-by-default costs a query during a document write load (docs/QUERY.md,
# "Fresh by default"): the server on CPU 0, a docbench write phase and a docbench
# read phase (finds and searches) at the same time on CPU 1, in turns with the
# reads fresh (the default) and with "fresh":false. Prints, per turn, the p99 and
# p50 of find and search, the write rate and the index's refreshes and segments.
#
#   bench/fresh-p99.sh [TURNS] [SECONDS] [PRELOAD_SECONDS]
#
# Needs build/hanudb and build/bench/docbench. Uses a data directory under
# ${TMPDIR:-/tmp} and ports 18480 (HTTP) and 18481 (key-value); removes the data
# directory at the end.
set -eu
TURNS=${1:-4}
SECS=${2:-15}
PRELOAD=${3:-15}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${HANUDB_BIN:-$ROOT/build/hanudb}
DB=$ROOT/build/bench/docbench
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fresh-p99.XXXXXX")
URL=http://127.0.0.1:18480
CLIENTS=${CLIENTS:-8}

taskset -c 0 "$BIN" serve --data "$WORK/data" --http-addr 127.0.0.1:18480 --kv-addr 127.0.0.1:18481 \
    >"$WORK/server.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$WORK"' EXIT INT TERM
until curl -sf $URL/_health >/dev/null 2>&1; do sleep 0.1; done

echo "preload: ${PRELOAD} s of writes"
taskset -c 1 "$DB" --url $URL --phase write --duration "$PRELOAD" --clients 16 --json >"$WORK/preload.json" 2>/dev/null
# let the index catch up before the turns
until curl -s $URL/_status | python3 -c 'import json,sys; s=json.load(sys.stdin); sys.exit(s["index"]["lag_txns"] > 0)'; do
    sleep 0.5
done

status() { curl -s $URL/_status | python3 -c 'import json,sys; i=json.load(sys.stdin)["index"]; print(i["refreshes"], i["segments"], i["commits"])'; }

printf '%-6s %-5s %10s %10s %10s %10s %10s %10s %10s\n' turn fresh find_p50 find_p99 srch_p50 srch_p99 writes/s refreshes segments
t=0
while [ $t -lt "$TURNS" ]; do
    for fresh in on off; do
        before=$(status)
        taskset -c 1 "$DB" --url $URL --phase write --duration "$SECS" --clients "$CLIENTS" --seed $((t + 7)) \
            --json >"$WORK/w.json" 2>/dev/null &
        WP=$!
        taskset -c 1 "$DB" --url $URL --phase read --duration "$SECS" --clients "$CLIENTS" \
            --mix find=50,search=50 --fresh $fresh --json >"$WORK/r.json" 2>/dev/null || true
        wait $WP || true
        after=$(status)
        python3 - "$WORK/r.json" "$WORK/w.json" "$t" "$fresh" "$before" "$after" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); w = json.load(open(sys.argv[2]))
b = [int(x) for x in sys.argv[5].split()]; a = [int(x) for x in sys.argv[6].split()]
print("%-6s %-5s %10.0f %10.0f %10.0f %10.0f %10.0f %10d %10d" % (
    sys.argv[3], sys.argv[4], r["find_p50_us"], r["find_p99_us"], r["search_p50_us"], r["search_p99_us"],
    w["writes_per_s"], a[0] - b[0], a[1]))
if r["errors"] or w["errors"]:
    print("  errors: reads %d, writes %d" % (r["errors"], w["errors"]))
EOF
    done
    t=$((t + 1))
done
