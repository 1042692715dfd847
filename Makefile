# HanuDB build. Plain make: every src/<module>/*.c goes into build/libhanudb.a,
# every tests/test_*.c, bench/*.c becomes its own program linked against it.
#   make            build hanudb, tests and benchmarks (build/)
#   make test       build and run the whole test suite
#   make asan       ASan+UBSan build of the unit tests, run (build-asan/)
#   make fuzz       libFuzzer targets (clang), built into build-fuzz/
#   make libs       libhanuquad and libhanudb-client, static and shared (build/lib/)
#   make install    PREFIX (/usr/local) and DESTDIR as usual; make uninstall
#   make examples-check  install into a temporary DESTDIR, build examples/ from it, run them

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
PKGS    := libh2o-evloop libzstd liblz4 libxxhash libutf8proc libcurl openssl liburing
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CFLAGS  += -std=c11 $(OPT) -g -Wall -Wextra -Werror -D_GNU_SOURCE -DH2O_USE_LIBUV=0 \
           -Iinclude -Isrc $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDLIBS  += $(PKG_LIBS) -lroaring -pthread -lm $(EXTRA_LDLIBS)

# MODULES limits the library to some modules (e.g. while another is half-written).
# hanudb serve links the server core (src/server) and its faces: src/http, src/kv, src/resp.
MODULES   ?= *
LIB_SRC   := $(filter-out src/cli/%,$(wildcard $(MODULES:%=src/%/*.c)))
CLI_SRC   := $(wildcard src/cli/*.c)
TEST_SRC  := $(wildcard tests/test_*.c)
BENCH_SRC := $(wildcard bench/*.c)
FUZZ_SRC  := $(wildcard fuzz/fuzz_*.c)

LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
HEADERS   := $(wildcard include/*.h src/*/*.h tests/*.h)

# The web console's static files (console/), embedded into the library as a
# generated C file (src/console/console.h; scripts/embed-files.py).
CONSOLE_FILES := $(sort $(wildcard console/*.html console/*.css console/*.js console/*.svg))
LIB_OBJ   += $(BUILD)/obj/gen/console_files.o

.PHONY: all test asan fuzz fuzz-targets fuzz-smoke check clean libs install uninstall examples-check
FAULT_LIB := $(BUILD)/tests/libfault_fsync.so
CRASH_BIN := $(BUILD)/tests/libcrash_record.so $(BUILD)/tests/crash_check
all: $(BUILD)/hanudb $(TEST_BIN) $(BENCH_BIN) $(FAULT_LIB) $(CRASH_BIN)

# Fault injection for the fsync-failure test (LD_PRELOAD).
$(BUILD)/tests/libfault_%.so: tests/fault_%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared $< -o $@ -ldl

# The crash-state checker (docs/TESTING.md): a recorder (LD_PRELOAD) and the checker.
$(BUILD)/tests/libcrash_record.so: tests/crash/crash_record.c tests/crash/crash_trace.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared $< -o $@ -ldl -pthread

$(BUILD)/tests/crash_check: tests/crash/crash_check.c tests/crash/crash_trace.h $(BUILD)/libhanudb.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libhanudb.a -o $@ $(LDLIBS)

$(BUILD)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/gen/console_files.c: $(CONSOLE_FILES) scripts/embed-files.py
	@mkdir -p $(dir $@)
	python3 scripts/embed-files.py $@ console $(CONSOLE_FILES)
$(BUILD)/obj/gen/console_files.o: $(BUILD)/gen/console_files.c src/console/console.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DCONSOLE_NO_H2O -c $< -o $@

$(BUILD)/libhanudb.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# The executable exports the parser functions and h2o_send_error_generic so that libh2o
# uses src/http/http_guard.c's (see http_guard.h).
$(BUILD)/hanudb: $(CLI_OBJ) $(BUILD)/libhanudb.a
	$(CC) $(CFLAGS) $^ -o $@ -Wl,--export-dynamic-symbol=phr_parse_request -Wl,--export-dynamic-symbol=phr_decode_chunked \
	  -Wl,--export-dynamic-symbol=phr_decode_chunked_is_in_data -Wl,--export-dynamic-symbol=h2o_send_error_generic $(LDLIBS) -ldl

$(BUILD)/tests/%: tests/%.c $(BUILD)/libhanudb.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libhanudb.a -o $@ $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libhanudb.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libhanudb.a -o $@ $(LDLIBS)

# Peers for scale (docs/PERFORMANCE.md, "Peers"): their client libraries only here.
$(BUILD)/bench/peer_sqlite: LDLIBS += -lsqlite3
$(BUILD)/bench/peer_pg: CFLAGS += $(shell pkg-config --cflags libpq 2>/dev/null)
$(BUILD)/bench/peer_pg: LDLIBS += $(shell pkg-config --libs libpq 2>/dev/null)

test: all
	BUILD=$(BUILD) tests/run-tests.sh
	$(MAKE) examples-check

# The e2e scripts that run against the server built with ASan+UBSan (make asan): one
# line per area, so that adding a script touches one line.
ASAN_E2E := e2e_kv_protocol.py e2e_kv_auth.py e2e_kv_kill.py e2e_kv_nospace.py e2e_kv_fsync_fail.py e2e_waiters.py e2e_none_ack.py
ASAN_E2E += e2e_http_api.py e2e_http_semantics.py e2e_http_framing.py e2e_http_params.py e2e_http_kill.py e2e_startup.py e2e_metrics.py e2e_log.py
ASAN_E2E += e2e_kinds.py e2e_query.py e2e_query_pool.py e2e_doc_cache.py e2e_index_crash.py e2e_update.py
ASAN_E2E += e2e_bucket.py e2e_dump.py e2e_snapshot.py e2e_restore.py e2e_retain.py e2e_export.py e2e_twin.py e2e_audit.py
ASAN_E2E += e2e_follow.py e2e_behind.py e2e_takeover.py
ASAN_E2E += e2e_resp.py e2e_resp_kill.py e2e_resp_lists.py e2e_ttl.py
ASAN_E2E += e2e_ndjson.py e2e_expire.py
ASAN_E2E += e2e_fresh.py e2e_watermark_lock.py
ASAN_E2E += e2e_console.py

asan:
	$(MAKE) BUILD=build-asan OPT=-O1 \
	  EXTRA_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
	  EXTRA_LDLIBS="-fsanitize=address,undefined" all
	BUILD=build-asan UNIT_ONLY=1 tests/run-tests.sh
	@# The server itself under ASan+UBSan: protocol, key-value auth, HTTP API, semantics and framing, SIGKILL, no-space,
	@# waiting, metrics, kinds, queries (on the loop and the pool) and the fault-injection tests (LD_PRELOAD shims: verify_asan_link_order=0).
	BUILD=build-asan ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:verify_asan_link_order=0 E2E_ONLY="$(ASAN_E2E)" \
	  tests/run-tests.sh

# The targets are linked by their own rule (the second make), so that -j links them side by side.
FUZZ_BIN := $(FUZZ_SRC:fuzz/%.c=build-fuzz/fuzz/%)
fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang OPT=-O1 \
	  EXTRA_CFLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" build-fuzz/libhanudb.a
	$(MAKE) fuzz-targets

fuzz-targets: $(FUZZ_BIN)

build-fuzz/fuzz/%: fuzz/%.c build-fuzz/libhanudb.a $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "clang $<"
	@clang $(CFLAGS) -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined $< build-fuzz/libhanudb.a \
	  -o $@ $(LDLIBS)

# Runs every fuzz target briefly (FUZZ_SECONDS each) from its seed corpus, if any,
# FUZZ_JOBS (default 2) at a time: a target is one process on one core for a fixed time.
# Undefined behaviour stops a target (-fno-sanitize-recover): a fuzz run that
# only printed it passed before, hiding one (NULL + 0 in quad_read.c).
FUZZ_SECONDS ?= 8
FUZZ_JOBS ?= 2
fuzz-smoke: fuzz
	@ls build-fuzz/fuzz/* | xargs -P $(FUZZ_JOBS) -n 1 sh -c 'f=$$0; n=$$(basename $$f); mkdir -p build-fuzz/corpus/$$n; \
	  seeds=""; [ -d fuzz/corpus/$$n ] && seeds=fuzz/corpus/$$n; \
	  echo "fuzz $$n for $(FUZZ_SECONDS)s"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -print_final_stats=0 \
	    build-fuzz/corpus/$$n $$seeds >build-fuzz/$$n.log 2>&1 || { tail -40 build-fuzz/$$n.log; exit 1; }'

# What CI runs: the whole suite, the sanitizer build of the unit tests, short fuzzing.
check:
	$(MAKE) test
	$(MAKE) asan
	$(MAKE) fuzz-smoke

clean:
	rm -rf build build-asan build-fuzz

# ---- the installable libraries (docs/INSTALL.md) ----
# Each library is built from its own -fPIC objects: a shared library with a
# soname and a version script, and a static archive made of one relocatable
# object (ld -r) in which objcopy localises every name but the public ones,
# so neither exports base, codec or internal names. packaging/<lib>.syms lists
# the public names; examples/check.sh compares it with nm of both.
VERSION    := $(shell sed -n 's/^\#define HANUDB_VERSION "\(.*\)"/\1/p' include/hanudb_version.h)
SOVERSION  := 0
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
UNITDIR    ?= $(PREFIX)/lib/systemd/system
DOCDIR     ?= $(PREFIX)/share/doc/hanudb
PUBLIC_HEADERS := include/quad.h include/hanudb_client.h include/hanudb_status.h \
                  include/hanudb_protocol.h include/hanudb_version.h
LIBNAMES   := hanuquad hanudb-client
hanuquad_SRC      := $(wildcard src/quad/*.c) src/base/base.c src/codec/codec.c
hanuquad_LIBS     := -lxxhash -pthread
hanudb-client_SRC := $(wildcard src/client/*.c)
hanudb-client_LIBS :=
LIBDIR_B   := $(BUILD)/lib

$(BUILD)/pic/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -fno-semantic-interposition -c $< -o $@

define library_rules
$(LIBDIR_B)/lib$(1).so.$(VERSION): $$($(1)_SRC:%.c=$(BUILD)/pic/%.o) packaging/$(1).syms
	@mkdir -p $$(dir $$@)
	{ echo '{ global:'; sed 's/.*/  &;/' packaging/$(1).syms; echo 'local: *; };'; } >$(LIBDIR_B)/$(1).map
	$$(CC) $$(CFLAGS) -shared -Wl,-soname,lib$(1).so.$(SOVERSION) -Wl,--version-script=$(LIBDIR_B)/$(1).map \
	  -Wl,--no-undefined -o $$@ $$(filter %.o,$$^) $$($(1)_LIBS) $$(EXTRA_LDLIBS)
	ln -sf lib$(1).so.$(VERSION) $(LIBDIR_B)/lib$(1).so.$(SOVERSION)
	ln -sf lib$(1).so.$(SOVERSION) $(LIBDIR_B)/lib$(1).so

$(LIBDIR_B)/lib$(1).a: $$($(1)_SRC:%.c=$(BUILD)/pic/%.o) packaging/$(1).syms
	@mkdir -p $$(dir $$@)
	ld -r -o $(LIBDIR_B)/$(1).o $$(filter %.o,$$^)
	objcopy --keep-global-symbols=packaging/$(1).syms $(LIBDIR_B)/$(1).o
	rm -f $$@ && ar rcs $$@ $(LIBDIR_B)/$(1).o
endef
$(foreach l,$(LIBNAMES),$(eval $(call library_rules,$(l))))

libs: $(foreach l,$(LIBNAMES),$(LIBDIR_B)/lib$(l).so.$(VERSION) $(LIBDIR_B)/lib$(l).a)

# The .pc files and the unit get the install paths here (PREFIX may change
# between builds). The unit is installed, never enabled (docs/INSTALL.md).
install: $(BUILD)/hanudb libs
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR) \
	  $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR)/examples
	install -m 755 $(BUILD)/hanudb $(DESTDIR)$(BINDIR)/hanudb
	install -m 644 $(PUBLIC_HEADERS) $(DESTDIR)$(INCLUDEDIR)/
	for l in $(LIBNAMES); do \
	  install -m 644 $(LIBDIR_B)/lib$$l.a $(DESTDIR)$(LIBDIR)/ && \
	  install -m 755 $(LIBDIR_B)/lib$$l.so.$(VERSION) $(DESTDIR)$(LIBDIR)/ && \
	  ln -sf lib$$l.so.$(VERSION) $(DESTDIR)$(LIBDIR)/lib$$l.so.$(SOVERSION) && \
	  ln -sf lib$$l.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/lib$$l.so && \
	  sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' packaging/$$l.pc.in >$(DESTDIR)$(LIBDIR)/pkgconfig/$$l.pc || exit 1; done
	install -m 644 man/*.1 $(DESTDIR)$(MANDIR)/man1/
	sed 's|/usr/local/bin/hanudb|$(BINDIR)/hanudb|' packaging/hanudb.service >$(DESTDIR)$(UNITDIR)/hanudb.service
	install -m 644 README.md CHANGELOG.md LICENSE docs/INSTALL.md $(DESTDIR)$(DOCDIR)/
	install -m 644 examples/*.c examples/*.cpp $(DESTDIR)$(DOCDIR)/examples/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/hanudb $(DESTDIR)$(UNITDIR)/hanudb.service
	rm -f $(PUBLIC_HEADERS:include/%=$(DESTDIR)$(INCLUDEDIR)/%) $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(wildcard man/*.1)))
	for l in $(LIBNAMES); do rm -f $(DESTDIR)$(LIBDIR)/lib$$l.a $(DESTDIR)$(LIBDIR)/lib$$l.so \
	  $(DESTDIR)$(LIBDIR)/lib$$l.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/lib$$l.so.$(VERSION) $(DESTDIR)$(LIBDIR)/pkgconfig/$$l.pc; done
	rm -rf $(DESTDIR)$(DOCDIR)

examples-check: $(BUILD)/hanudb libs
	BUILD=$(BUILD) examples/check.sh
