#!/usr/bin/env bash
# Two servers' documents workload in turns (docs/PERFORMANCE.md, "The documents workload with the
# index, 2026-12-02"): for each round and each binary, a fresh server pinned to CPU 0 takes
# WRITE_S seconds of docbench writes (docbench on CPU 1), the index catches up (lag_txns 0), then
# each read mix runs READ_S seconds; every mix prints docbench's lines and the server's CPU time
# (user + system from /proc) per answer.
#   bench/ab-docs.sh BIN_A BIN_B [--rounds 2] [--write-s 20] [--read-s 8] [--dir PATH] [-- serve args]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
[ $# -ge 2 ] || { echo "usage: bench/ab-docs.sh BIN_A BIN_B [--rounds N] [--write-s S] [--read-s S] [--dir PATH] [-- serve args]" >&2; exit 2; }
bins=("$1" "$2"); shift 2
rounds=2 write_s=20 read_s=8 dir=/var/tmp/hanudb-ab-docs extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2;;
    --write-s) write_s=$2; shift 2;;
    --read-s) read_s=$2; shift 2;;
    --dir) dir=$2; shift 2;;
    --) shift; extra=("$@"); break;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
port=$((27100 + RANDOM % 800))
url=http://127.0.0.1:$port
tck=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
lag() { curl -sf "$url/_status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["index"]["lag_txns"])'; }
for round in $(seq "$rounds"); do
  for k in 0 1; do
    name=$([ $k = 0 ] && echo A || echo B)
    rm -rf "$dir" "$dir.bucket" "$dir.ids"
    taskset -c 0 "${bins[$k]}" serve --data "$dir" --http-addr 127.0.0.1:$port --kv-addr 127.0.0.1:$((port + 1)) \
      "${extra[@]}" >"$dir.log" 2>&1 &
    pid=$!
    for _ in $(seq 200); do curl -sf "$url/_health" >/dev/null 2>&1 && break; sleep 0.05; done
    echo "$round $name $(taskset -c 1 "$BUILD/bench/docbench" --url "$url" --phase write --duration "$write_s" \
      --ids "$dir.ids" 2>/dev/null | grep '^write  insert')"
    for _ in $(seq 1200); do [ "$(lag)" = 0 ] && break; sleep 0.1; done
    for mix in get=50,find=25,search=25 get=100 find=100 search=100 "search=100 --search-words zipf"; do
      c0=$(cpu_ticks $pid)
      # shellcheck disable=SC2086  # mix may carry docbench's --search-words
      out=$(taskset -c 1 "$BUILD/bench/docbench" --url "$url" --phase read --duration "$read_s" --ids "$dir.ids" \
        --mix $mix 2>/dev/null | grep '^read ')
      c1=$(cpu_ticks $pid)
      n=$(echo "$out" | awk '/^read   all/ {print $3}')
      echo "$round $name [$mix] server CPU per answer: $(echo "scale=1; ($c1 - $c0) * 1000000 / $tck / $n" | bc) us"
      echo "$out" | sed "s/^/    /"
    done
    kill $pid; wait $pid || true
  done
done
rm -rf "$dir" "$dir.bucket" "$dir.ids"
