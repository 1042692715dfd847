#!/usr/bin/env bash
# Installs every Debian package HanuDB's build, tests and benchmarks need.
# Safe to run again: it does nothing when everything is already there.
set -euo pipefail

packages=(
  build-essential make pkg-config clang libclang-rt-14-dev
  libh2o-evloop-dev libssl-dev libzstd-dev liblz4-dev libxxhash-dev
  libroaring-dev libutf8proc-dev libcurl4-openssl-dev libjemalloc-dev
  liburing-dev python3 util-linux procps bc openssl
  chromium   # tests/e2e_http_browser.py: the API from a real browser (CORS, no-cors, dot segments)
  prometheus # promtool: tests/e2e_metrics.py checks /metrics with `promtool check metrics`
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
