#!/usr/bin/env bash
# Installs every Debian package HanuDB's build, tests and benchmarks need.
# Safe to run again: it does nothing when everything is already there.
set -euo pipefail

packages=(
  build-essential make pkg-config clang libclang-rt-14-dev
  libh2o-evloop-dev libssl-dev libzstd-dev liblz4-dev libxxhash-dev
  libroaring-dev libutf8proc-dev libcurl4-openssl-dev libjemalloc-dev
  liburing-dev python3 util-linux procps bc openssl groff-base   # python3: the tests, and the build (scripts/embed-files.py)
  libsqlite3-dev   # bench/peer_sqlite.c: the same workload on SQLite (FTS5), for scale
  libpq-dev postgresql  # bench/peer_pg.c, bench/peers.sh: the same workload on PostgreSQL, for scale
  chromium   # tests/e2e_http_browser.py: the API from a real browser (CORS, no-cors, dot segments)
  nodejs     # tests/test_bucket_s3.c: an S3-compatible server (tests/s3/package.json)
  prometheus # promtool: tests/e2e_metrics.py checks /metrics with `promtool check metrics`
  redis-server redis-tools  # tests/e2e_resp*.py: the RESP face against a real redis-server; bench/resp-cpu.sh
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# The npm packages the tests use, pinned by each folder's package-lock.json
# (tests/s3: an S3-compatible server; tests/duckdb: DuckDB reading exports);
# installed again only when a lock file changed since the last install.
install_npm_packages() {
  local root dir
  root="$(cd "$(dirname "$0")/.." && pwd)/tests"
  for dir in "$root/s3" "$root/duckdb"; do
    if [ -f "$dir/node_modules/.package-lock.json" ] && [ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
      echo "install-deps: npm packages in ${dir#"$root"/} present"
      continue
    fi
    echo "install-deps: npm ci in ${dir#"$root"/}"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  done
}

# Debian's npm; a nodejs from elsewhere (NodeSource) brings its own and conflicts with it.
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  install_npm_packages
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
install_npm_packages
