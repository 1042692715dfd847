#!/usr/bin/env bash
# Runs the test suite: every built tests/test_* program, then (unless UNIT_ONLY=1)
# every tests/e2e_*.py end-to-end script against real server processes.
# Prints one line per test program and a closing "N passed, N failed" line.
#
# The unit test programs run TEST_JOBS (default 2) at a time, in the order they finish:
# each works in its own directory (test_tmpdir() and mkdtemp() names carry the pid) and
# binds only port 0, so two never share a file or a port. The e2e scripts run one at a
# time: several check deadlines against the clock (HTTP timeouts, kill rounds) and
# would be judged on a machine that another script keeps busy.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export HANUDB_BIN="$PWD/$BUILD/hanudb"
export HANUDB_BUILD="$PWD/$BUILD"
JOBS=${TEST_JOBS:-2}
passed=0; failed=0; failed_names=()
mkdir -p "$BUILD/test-logs"

# Runs one test into its log and writes "ok|FAIL SECONDS" to its .result file.
run_to_result() {
  local name=$1; shift
  local start=$(date +%s.%N) status=ok
  # A hung test fails (exit 124) instead of hanging the whole run.
  timeout --kill-after=10 "${TEST_TIMEOUT:-600}" "$@" >"$BUILD/test-logs/$name.log" 2>&1 </dev/null || status=FAIL
  echo "$status $(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || echo 0)" >"$BUILD/test-logs/$name.result"
}

# Prints a finished test's line and counts it.
report() {
  local name=$1 status=FAIL secs=0
  read -r status secs <"$BUILD/test-logs/$name.result" 2>/dev/null
  if [ "$status" = ok ]; then passed=$((passed + 1)); else status=FAIL; failed=$((failed + 1)); failed_names+=("$name"); fi
  printf '%-4s %-36s %6.1fs\n' "$status" "$name" "$secs"
  if [ "$status" = FAIL ]; then tail -n 30 "$BUILD/test-logs/$name.log" | sed 's/^/     | /'; fi
}

# An e2e script runs with a TMPDIR of its own (every mkdtemp, log and scratch
# directory of it and of its servers goes there), removed when it passed and kept
# for a look when it failed.
run_one() {
  rm -f "$BUILD/test-logs/$1.result"
  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/hanudb-e2e-run-XXXXXX")
  TMPDIR=$tmp run_to_result "$@"
  report "$1"
  if grep -q '^ok ' "$BUILD/test-logs/$1.result" 2>/dev/null; then rm -rf "$tmp"; else echo "     | kept: $tmp"; fi
}

declare -A running=()   # pid -> test name
# Waits for any running test and reports it.
reap_one() {
  local pid=""
  wait -n -p pid
  [ -n "$pid" ] || return
  report "${running[$pid]}"
  unset "running[$pid]"
}

for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  [ -n "${E2E_ONLY:-}" ] && continue
  name=$(basename "$t")
  if [ "${UNIT_ONLY:-0}" = 1 ] && [[ $name == test_e2e_* ]]; then continue; fi
  while [ ${#running[@]} -ge "$JOBS" ]; do reap_one; done
  rm -f "$BUILD/test-logs/$name.result"
  run_to_result "$name" "$t" &
  running[$!]=$name
done
while [ ${#running[@]} -gt 0 ]; do reap_one; done

if [ "${UNIT_ONLY:-0}" != 1 ]; then
  for t in tests/e2e_*.py; do
    [ -f "$t" ] || continue
    if [ -n "${E2E_ONLY:-}" ] && [[ " $E2E_ONLY " != *" $(basename "$t") "* ]]; then continue; fi
    run_one "$(basename "$t")" python3 "$t"
  done
  for t in tests/e2e_*.sh; do
    [ -f "$t" ] || continue
    [ -n "${E2E_ONLY:-}" ] && continue
    run_one "$(basename "$t")" bash "$t"
  done
fi

[ ${#failed_names[@]} -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
