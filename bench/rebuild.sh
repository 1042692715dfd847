#!/usr/bin/env bash
# bench/rebuild.sh: the figures of the bucket (docs/BUCKET.md, "Rebuild"; issue 14):
#   1. keys: KEYS (2 000 000) Sets of 64-byte values (kvbench write, one key a record) at
#      durability none into serve with its default bucket (DATA.bucket); stopped
#      (the sealer seals the rest); the data directory wiped; serve rebuilds: the
#      rebuild's time split into fetch and replay (_status.bucket.rebuild) and the
#      replay rate, with the documents index on (it follows the replayed log);
#   2. documents: DOC_SECONDS of docbench inserts (durability none), the same wipe and
#      rebuild, and the time until the index has caught up with the rebuilt log;
#   3. writes/s at durability bucket with --bucket-latency-put-ms 70 (docbench, 32 clients),
#      with the default sealing interval (1000 ms) and with 50 ms;
#   4. class-A bucket requests per 1 000 writes and bytes uploaded per 1 000 documents in
#      a docbench write phase at durability local (from _status before and after); COST_ARGS
#      adds serve options to that server (such as --seal-mb 16).
# Usage: bench/rebuild.sh [WORKDIR]   (BUILD=build, KEYS, DOC_SECONDS=30, PORT=27100,
#        PARTS="1 2 3 4": which of the four to run)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
KEYS=${KEYS:-2000000}
DOC_SECONDS=${DOC_SECONDS:-30}
PORT=${PORT:-27100}
PARTS=${PARTS:-1 2 3 4}
part() { [[ " $PARTS " == *" $1 "* ]]; }
WORK=${1:-/tmp/rebuild-bench-$$}
HANUDB=$BUILD/hanudb
KV=127.0.0.1:$PORT
HTTP=127.0.0.1:$((PORT + 1))
mkdir -p "$WORK"
SERVER_PID=

status() { curl -s "http://$HTTP/_status"; }
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1], {}, {'d': d}))" "$1"; }

start() {   # start DATA [extra serve flags...]; waits until HTTP answers (after any rebuild)
    local data=$1; shift
    "$HANUDB" serve --data "$data" --kv-addr "$KV" --http-addr "$HTTP" "$@" >>"$WORK/serve.log" 2>&1 &
    SERVER_PID=$!
    until curl -s -o /dev/null "http://$HTTP/_health"; do
        kill -0 "$SERVER_PID" 2>/dev/null || { echo "serve exited; see $WORK/serve.log" >&2; exit 1; }
        sleep 0.05
    done
}
stop() { kill "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=; }
trap '[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; true' EXIT

rebuild_and_report() {   # rebuild_and_report DATA WHAT
    local data=$1 what=$2 t0 t1
    rm -rf "$data"
    t0=$(date +%s%N)
    start "$data" --takeover   # right after the stop: the chain moved within the 10 s window
    t1=$(date +%s%N)
    local st; st=$(status)
    echo "$what: rebuild $(echo "$st" | field 'd["bucket"]["rebuild"]')"
    echo "$what: process start to listening $(( (t1 - t0) / 1000000 )) ms; replay rate $(echo "$st" | \
        field 'round(d["bucket"]["rebuild"]["records"] * 1000 / max(1, d["bucket"]["rebuild"]["replay_ms"]))') records/s;" \
        "rebuild rate $(echo "$st" | field 'round(d["bucket"]["rebuild"]["records"] * 1000 / max(1, d["bucket"]["rebuild"]["ms"]))') records/s; per CPU second of the replaying thread $(echo "$st" | \
        field 'round(d["bucket"]["rebuild"]["records"] * 1000 / max(1, d["bucket"]["rebuild"]["cpu_ms"]))') records/s"
}

if part 1; then
echo "== 1. $KEYS keys"
start "$WORK/keys" --seal-interval-ms 1000
# One Set per record (fill would pack 1 024 keys into each WriteBatch record).
"$BUILD/bench/kvbench" --addr "$KV" --workload write --ops "$KEYS" --warmup 0 --keyspace "$KEYS" --value-size 64 \
    --durability none --clients 32 2>/dev/null | tail -4
stop
echo "bucket: $(du -sh "$WORK/keys.bucket" | cut -f1), $(ls "$WORK/keys.bucket/segments" | wc -l) segments"
rebuild_and_report "$WORK/keys" keys
stop
fi

if part 2; then
echo "== 2. documents for ${DOC_SECONDS}s"
start "$WORK/docs"
"$BUILD/bench/docbench" --url "http://$HTTP" --phase write --duration "$DOC_SECONDS" --clients 32 \
    --durability none 2>/dev/null | grep -E "^write:"
stop
echo "bucket: $(du -sh "$WORK/docs.bucket" | cut -f1), $(ls "$WORK/docs.bucket/segments" | wc -l) segments"
rebuild_and_report "$WORK/docs" docs
t0=$(date +%s%N)
until [ "$(status | field 'd["index"]["index_txn"] >= d["bucket"]["rebuild"]["last_txn"]')" = True ]; do sleep 0.2; done
echo "docs: the index caught up with the rebuilt log $(( ($(date +%s%N) - t0) / 1000000 )) ms after listening" \
     "($(status | field 'd["index"]["live_docs"]') documents)"
stop
fi

# A bucket answer waits for the next segment: the sealing interval bounds it as much as the
# put latency does, so both the default interval and a short one.
for interval in 1000 50; do
    part 3 || break
    echo "== 3. durability bucket, --bucket-latency-put-ms 70, --seal-interval-ms $interval, 32 clients"
    start "$WORK/slow-$interval" --bucket-latency-put-ms 70 --seal-interval-ms "$interval"
    "$BUILD/bench/docbench" --url "http://$HTTP" --phase write --duration 20 --clients 32 \
        --durability bucket 2>/dev/null | grep -E "^write"
    echo "segments put: $(status | field 'd["bucket"]["segments_put"]')"
    stop
done

part 4 || exit 0
echo "== 4. bucket requests and bytes in a docbench write phase (durability local)"
start "$WORK/cost" ${COST_ARGS:-}   # e.g. COST_ARGS="--seal-mb 16"
before=$(status)
"$BUILD/bench/docbench" --url "http://$HTTP" --phase write --duration 20 --clients 32 2>/dev/null | grep -E "^write:"
sleep 2   # the last interval's segment
after=$(status)
stop
python3 - "$before" "$after" <<'EOF'
import json, sys
b, a = json.loads(sys.argv[1]), json.loads(sys.argv[2])
writes = a["txn"] - b["txn"]
ca = a["bucket"]["class_a"] - b["bucket"]["class_a"]
up = a["bucket"]["bytes_up"] - b["bucket"]["bytes_up"]
print("writes %d, class-A requests %d: %.3f per 1 000 writes; %d bytes uploaded: %.0f bytes per 1 000 documents"
      % (writes, ca, ca * 1000 / writes, up, up * 1000 / writes))
EOF
echo "work directory: $WORK (serve.log)"
