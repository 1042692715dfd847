#!/usr/bin/env bash
# Runs the documents workload on the peers, for scale (docs/PERFORMANCE.md, "Peers"):
# a throwaway PostgreSQL 15 (initdb in a temporary folder, fsync and
# synchronous_commit on, server pinned to CPU 0, client to CPU 1) through
# bench/peer_pg, and SQLite with FTS5 in-process through bench/peer_sqlite.
#   bench/peers.sh [--docs N] [--writes M] [--duration S] [--clients C]
# Prints one JSON line per peer. Needs root (PostgreSQL runs as user postgres).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
docs=55000 writes=20000 duration=20 clients=32
while [ $# -gt 0 ]; do
  case $1 in
    --docs) docs=$2; shift 2 ;;
    --writes) writes=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    *) echo "usage: bench/peers.sh [--docs N] [--writes M] [--duration S] [--clients C]" >&2; exit 2 ;;
  esac
done
make -s -j2 "$BUILD/bench/peer_pg" "$BUILD/bench/peer_sqlite" >/dev/null
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
tmp=$(mktemp -d /tmp/hanudb-peers-XXXXXX)
chown postgres "$tmp"
port=54329
cleanup() {
  su postgres -c "$pgbin/pg_ctl -D $tmp/pg -m immediate stop" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
su postgres -c "$pgbin/initdb -D $tmp/pg -A trust -U postgres" >/dev/null
cat >>"$tmp/pg/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$tmp'
max_connections = $((clients + 10))
shared_buffers = 256MB
fsync = on
synchronous_commit = on
CONF
su postgres -c "taskset -c 0 $pgbin/pg_ctl -D $tmp/pg -l $tmp/pg.log -w start" >/dev/null
taskset -c 1 "$BUILD/bench/peer_pg" --conn "host=127.0.0.1 port=$port user=postgres dbname=postgres" \
  --docs "$docs" --writes "$writes" --duration "$duration" --clients "$clients"
# SQLite is in-process: one writer; two reader threads (the machine's two cores).
taskset -c 0,1 "$BUILD/bench/peer_sqlite" --db "$tmp/sqlite.db" --docs "$docs" --writes 2000 \
  --duration "$duration" --threads 2
