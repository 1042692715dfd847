#!/usr/bin/env bash
# What the projections (index, sealer) cost the write path (issue 24), in one command: the
# same binary with the settings in turns, ROUNDS rounds, server pinned to CPU 0 and the
# client to CPU 1. Prints every run's row, then the medians and the ratios the issue aims at:
#   key-value `local` Sets (kvbench, `default` database): default, --no-index, --no-bucket;
#   document writes (docbench write phase, 32 clients, `local`): default,
#     --no-index --no-bucket, --no-index, --no-bucket (with write p99 and the index's lag);
#   with --redis: HanuDB's RESP face against redis-server (bench/resp-vs-redis.py).
#   BUILD=build bench/projections.sh [--rounds N] [--duration S] [--kv-ops N] [--redis]
set -euo pipefail
cd "$(dirname "$0")/.."
export BUILD=${BUILD:-build}
rounds=2 duration=15 kvops=192000 redis=0
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2;;
    --duration) duration=$2; shift 2;;
    --kv-ops) kvops=$2; shift 2;;
    --redis) redis=1; shift;;
    *) echo "usage: bench/projections.sh [--rounds N] [--duration S] [--kv-ops N] [--redis]" >&2; exit 2;;
  esac
done
make -s -j2 "$BUILD/hanudb" "$BUILD/bench/kvbench" "$BUILD/bench/docbench" >/dev/null
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
echo "| key-value Sets, local | ops/s | server us/op | indexer us/op | sealer us/op |"
echo "| --- | --- | --- | --- | --- |"
for r in $(seq "$rounds"); do
  bench/kv-cpu.sh "kv default" --ops "$kvops" | tee -a "$rows"
  bench/kv-cpu.sh "kv no-index" --ops "$kvops" -- --no-index | tee -a "$rows"
  bench/kv-cpu.sh "kv no-bucket" --ops "$kvops" -- --no-bucket | tee -a "$rows"
done
echo
echo "| document writes, local | writes/s | docs | live | server us/doc | indexer us/doc | p99 ms | lag at end (txns) | catch-up s |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for r in $(seq "$rounds"); do
  bench/docs-cpu.sh "docs default" "$duration" | tee -a "$rows"
  bench/docs-cpu.sh "docs no-index no-bucket" "$duration" -- --no-index --no-bucket | tee -a "$rows"
  bench/docs-cpu.sh "docs no-index" "$duration" -- --no-index | tee -a "$rows"
  bench/docs-cpu.sh "docs no-bucket" "$duration" -- --no-bucket | tee -a "$rows"
done
echo
python3 - "$rows" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    runs.setdefault(cells[0], []).append(cells[1:])
def med(label, col):
    return statistics.median(float(r[col]) for r in runs[label])
def ratio(a, b, col=0):
    return "%.2fx (%.0f / %.0f)" % (med(a, col) / med(b, col), med(a, col), med(b, col))
print("medians and ratios (aims from issue 24):")
print("  kv Sets, index on / --no-index:            ", ratio("kv default", "kv no-index"), "aim >= 0.95x")
print("  kv Sets, bucket on / --no-bucket:          ", ratio("kv default", "kv no-bucket"))
print("  kv server us/op default, no-index:          %.1f, %.1f" % (med("kv default", 1), med("kv no-index", 1)))
print("  kv sealer us/op share of server us/op:      %.1f%% (aim <= 3%%)" % (100 * med("kv default", 3) / med("kv default", 1)))
print("  doc writes, default / --no-index --no-bucket:", ratio("docs default", "docs no-index no-bucket"), "aim >= 0.80x")
print("  doc writes, default / --no-index:          ", ratio("docs default", "docs no-index"))
print("  doc writes, default / --no-bucket:         ", ratio("docs default", "docs no-bucket"))
print("  doc write p99 default: %.2f ms (aim <= 3 ms); indexer us/doc %.1f (aim <= 6)" %
      (med("docs default", 5), med("docs default", 4)))
print("  index lag at the end of the writes: %.0f txns, caught up in %.1f s (aim: within 2 s)" %
      (med("docs default", 6), med("docs default", 7)))
PY
if [ "$redis" = 1 ]; then
  echo
  python3 bench/resp-vs-redis.py --runs "$rounds"
fi
