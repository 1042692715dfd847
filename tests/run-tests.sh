#!/usr/bin/env bash
# Runs the test suite: every built tests/test_* program, then (unless UNIT_ONLY=1)
# every tests/e2e_*.py end-to-end script against real server processes.
# Prints one line per test program and a closing "N passed, N failed" line.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export HANUDB_BIN="$PWD/$BUILD/hanudb"
export HANUDB_BUILD="$PWD/$BUILD"
passed=0; failed=0; failed_names=()

run_one() {
  local name=$1; shift
  local start=$(date +%s.%N)
  local log="$BUILD/test-logs/$name.log"
  mkdir -p "$BUILD/test-logs"
  # A hung test fails (exit 124) instead of hanging the whole run.
  if timeout --kill-after=10 "${TEST_TIMEOUT:-600}" "$@" >"$log" 2>&1; then
    passed=$((passed + 1)); status=ok
  else
    failed=$((failed + 1)); status=FAIL; failed_names+=("$name")
  fi
  printf '%-4s %-36s %6.1fs\n' "$status" "$name" "$(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || echo 0)"
  if [ "$status" = FAIL ]; then tail -n 30 "$log" | sed 's/^/     | /'; fi
}

for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  [ -n "${E2E_ONLY:-}" ] && continue
  name=$(basename "$t")
  if [ "${UNIT_ONLY:-0}" = 1 ] && [[ $name == test_e2e_* ]]; then continue; fi
  run_one "$name" "$t"
done

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
