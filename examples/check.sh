#!/usr/bin/env bash
# examples/check.sh: what `make examples-check` (part of `make test`) runs, so the
# packaging cannot rot. Installs into a temporary DESTDIR (PREFIX /opt/hanudb),
# compares the install tree and each library's exported names with the lists
# kept in the repository, builds the installed examples against the installed
# tree only (pkg-config with PKG_CONFIG_SYSROOT_DIR), each linked shared and
# static, runs them (the client ones against `hanudb serve` started from the
# installed binary on a free port) and compares their output with
# examples/expected/, then uninstalls and checks that nothing is left.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
BUILD=${BUILD:-build}
root=$(mktemp -d "${TMPDIR:-/tmp}/hanudb-examples.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$root"
}
trap cleanup EXIT
fail() { echo "examples-check: $*" >&2; exit 1; }
stage=$root/stage prefix=/opt/hanudb work=$root/work
inst=$stage$prefix
mkdir -p "$work"

echo "install into DESTDIR, PREFIX=$prefix"
make -s BUILD="$BUILD" PREFIX=$prefix DESTDIR="$stage" install >/dev/null
(cd "$stage" && find . | sort) | diff -u examples/expected/install-tree.txt - || fail "install tree differs"
[ "$("$inst/bin/hanudb" --version)" = "hanudb $(sed -n 's/^#define HANUDB_VERSION "\(.*\)"/\1/p' include/hanudb_version.h)" ] \
  || fail "hanudb --version"
grep -q "^ExecStart=$prefix/bin/hanudb serve" "$stage$prefix/lib/systemd/system/hanudb.service" || fail "unit ExecStart"

echo "each public header compiles alone, as C99 and C++11"
for h in "$inst"/include/*.h; do
  printf '#include <%s>\nint main(void) { return 0; }\n' "$(basename "$h")" >"$work/alone.c"
  cc -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$inst/include" "$work/alone.c" || fail "$h as C"
  g++ -x c++ -std=c++11 -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$inst/include" "$work/alone.c" || fail "$h as C++"
done

echo "man pages: no groff warnings, one for every command"
for m in man/*.1; do
  w=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$m" 2>&1)
  [ -z "$w" ] || fail "$m: $w"
done
for c in $("$inst/bin/hanudb" help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}'); do
  case $c in version|help) continue ;; esac
  [ -f "$inst/share/man/man1/hanudb-$c.1" ] || fail "no man page hanudb-$c.1 for the command $c"
done

echo "exported names: only packaging/*.syms"
for l in hanuquad hanudb-client; do
  nm -D --defined-only "$inst/lib/lib$l.so" | awk '{print $3}' | sort | diff -u "packaging/$l.syms" - \
    || fail "lib$l.so exports other names"
  nm -g --defined-only "$inst/lib/lib$l.a" | awk 'NF == 3 {print $3}' | sort | diff -u "packaging/$l.syms" - \
    || fail "lib$l.a has other global names"
  readelf -d "$inst/lib/lib$l.so" | grep "SONAME.*\[lib$l.so.0\]" >/dev/null || fail "lib$l.so soname"
done
if readelf -d "$inst/lib/libhanuquad.so" | grep liburing >/dev/null; then fail "libhanuquad.so needs liburing"; fi

echo "build the installed examples with pkg-config, shared and static"
export PKG_CONFIG_PATH=$inst/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$stage
# -l:libX.a picks the archive although the .so sits next to it (docs/INSTALL.md)
static_libs() { pkg-config --static --libs "$@" | sed -E 's/-l(hanuquad|hanudb-client)( |$)/-l:lib\1.a\2/g'; }
ex=$inst/share/doc/hanudb/examples
cd "$work"
CW="-Wall -Wextra -Werror"
set -x
cc -std=c11 $CW "$ex/facts.c" $(pkg-config --cflags --libs hanuquad) -o facts_shared
cc -std=c11 $CW "$ex/facts.c" $(pkg-config --cflags hanuquad) $(static_libs hanuquad) -o facts_static
cc -std=c11 $CW "$ex/facts_stream.c" $(pkg-config --cflags --libs hanuquad) -o facts_stream_shared
cc -std=c11 $CW "$ex/facts_stream.c" $(pkg-config --cflags hanuquad) $(static_libs hanuquad) -o facts_stream_static
cc -std=c11 $CW "$ex/kv_client.c" $(pkg-config --cflags --libs hanudb-client) -o kv_client_shared
cc -std=c11 $CW "$ex/kv_client.c" $(pkg-config --cflags hanudb-client) $(static_libs hanudb-client) -o kv_client_static
g++ -std=c++17 $CW "$ex/both.cpp" $(pkg-config --cflags --libs hanuquad hanudb-client) -o both_shared
g++ -std=c++17 $CW "$ex/both.cpp" $(pkg-config --cflags hanuquad hanudb-client) \
  $(static_libs hanuquad hanudb-client) -o both_static
{ set +x; } 2>/dev/null
export LD_LIBRARY_PATH=$inst/lib
for p in facts facts_stream kv_client both; do
  ldd ${p}_shared | grep "=> $inst/lib/lib" >/dev/null || fail "${p}_shared does not load the installed library"
  if ldd ${p}_static | grep 'libhanu' >/dev/null; then fail "${p}_static needs a shared libhanu*"; fi
done

check_output() {   # NAME EXPECTED COMMAND...
  local name=$1 expected=$2; shift 2
  "$@" >"$name.out" 2>"$name.err" || { cat "$name.err" >&2; fail "$name exited with $?"; }
  diff -u "$src/examples/expected/$expected" "$name.out" || fail "$name output differs"
  echo "ok $name"
}
check_output facts_shared facts.txt ./facts_shared "$work/shared.quad"
check_output facts_static facts.txt ./facts_static "$work/static.quad"
mkdir "$work/stream_shared" "$work/stream_static"
check_output facts_stream_shared facts_stream.txt ./facts_stream_shared "$work/stream_shared"
check_output facts_stream_static facts_stream.txt ./facts_stream_static "$work/stream_static"
# the default I/O backend never loads liburing (docs/INSTALL.md)
LD_DEBUG=files ./facts_shared "$work/debug.quad" 2>"$work/ld_debug.log" >/dev/null
grep 'file=libhanuquad.so.0' "$work/ld_debug.log" >/dev/null || fail "LD_DEBUG shows no library loads"
if grep 'liburing' "$work/ld_debug.log" >/dev/null; then fail "facts_shared loaded liburing"; fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
addr=127.0.0.1:$port
"$inst/bin/hanudb" serve --data "$work/data" --kv-addr "$addr" --http-addr off >"$work/serve.log" 2>&1 &
server_pid=$!
# waits until the server answers (a bounded number of tries, not a timed check)
for _ in $(seq 300); do
  "$inst/bin/hanudb" kv --addr "$addr" ping >/dev/null 2>&1 && break
  kill -0 $server_pid 2>/dev/null || { cat "$work/serve.log" >&2; fail "server exited"; }
  sleep 0.1
done
check_output kv_client_shared kv_client.txt ./kv_client_shared "$addr"
check_output kv_client_static kv_client.txt ./kv_client_static "$addr"
check_output both_shared both.txt ./both_shared "$work/both_shared.quad" "$addr"
check_output both_static both.txt ./both_static "$work/both_static.quad" "$addr"
kill $server_pid; wait $server_pid || fail "server exit status $? after SIGTERM"
server_pid=

cd "$src"
make -s BUILD="$BUILD" PREFIX=$prefix DESTDIR="$stage" uninstall
left=$(find "$stage" -not -type d)
[ -z "$left" ] || fail "left after uninstall: $left"
echo "examples-check: ok"
