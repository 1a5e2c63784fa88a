# cabrank - the one non-recursive GNU Makefile (STYLE.md, "Build").
#
#   make            libcabrank (static + shared) and the programs, into build/
#   make run        build and serve on 127.0.0.1:8080
#   make test       format check, unit tests (plain, ASan+UBSan, TSan), integration
#   make asan|tsan  sanitizer builds, into build/asan/ and build/tsan/
#   make PGO=0      cabrank-httpd without the profile-guided build (see below)
#   make install PREFIX=/usr/local DESTDIR=
#
# Sources are found by wildcard: a new src/*.c or src/<layer>/*.c joins the library, a new
# tests/unit/test_<comp>.c (exporting <comp>_suite) joins the unit runner, a new
# tests/integration/<name>.c becomes an integration program, examples/<name>.c a
# program. Objects go to build/<variant>/.

VERSION   := 0.1.0
SOVERSION := 0
PREFIX    ?= /usr/local
DESTDIR   ?=
BINDIR    ?= $(PREFIX)/bin
LIBDIR    ?= $(PREFIX)/lib
INCDIR    ?= $(PREFIX)/include
PKGDIR    ?= $(LIBDIR)/pkgconfig
CC        ?= cc
CLANG     ?= clang
RUN_ADDR  ?= 127.0.0.1:8080
FUZZ_SECONDS ?= 60
# Everything built goes below BUILD (helpers working in parallel use their own).
BUILD     ?= build

.DEFAULT_GOAL := all
SHELL := /bin/bash

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
        -Wvla -fno-common -Werror
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -pthread -Iinclude -Isrc -Itests/support $(WARN) -MMD -MP
# Library dependencies resolved when a recipe runs (after `deps` has installed them).
DEP_CFLAGS = $(shell pkg-config --cflags liburing sqlite3 libpq 2>/dev/null) \
             $(shell pkg-config --exists liburing 2>/dev/null && echo -DCR_HAVE_LIBURING) \
             $(shell pkg-config --exists libpq 2>/dev/null && echo -DCR_HAVE_LIBPQ)
DEP_LIBS   = $(shell pkg-config --libs liburing 2>/dev/null) -lpthread -lm
# Libraries only the applications need: SQLite and libpq for the ledger
# (apps/oltp); their headers are found through DEP_CFLAGS.
APP_LIBS   = $(shell pkg-config --libs sqlite3 libpq 2>/dev/null)
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null)

# gcc's generic x86-64 tuning zeroes a struct of 128 bytes or more with rep stos,
# whose start-up cost made three such zeroings a quarter of http_input's time
# (perf annotate, hello.txt under wrk); up to 512 bytes it writes vector stores
# now. Only where the compiler takes the option (gcc on x86).
MEMSET_STRATEGY := -mmemset-strategy=unrolled_loop:512:noalign,libcall:-1:noalign
MEMSET_FLAGS := $(shell $(CC) $(MEMSET_STRATEGY) -Werror -x c -c -o /dev/null /dev/null \
                  >/dev/null 2>&1 && echo '$(MEMSET_STRATEGY)')
# Link-time optimization for the release programs: the request path crosses many
# small functions in several files (conn, reactor, pool, service), and inlining
# across them took 4% of cabrank-httpd's instructions per request (3,826 to
# 3,658, bench/httpd_instructions.sh) and 1% of its CPU (4.17 to 4.12 us,
# bench/httpd_configs.sh --runs 6 no-lto=@DIR lto=, DIR built with LTO_FLAGS=).
# Fat objects, so that libcabrank.so and the archives still link without it.
# Only where the compiler takes it (gcc).
LTO_FLAGS := $(shell $(CC) -flto=auto -ffat-lto-objects -Werror -x c -c -o /dev/null /dev/null \
               >/dev/null 2>&1 && echo '-flto=auto -ffat-lto-objects')
CFLAGS_release := -O2 -g -fPIC $(MEMSET_FLAGS) $(LTO_FLAGS)
LDFLAGS_release := $(if $(LTO_FLAGS),-flto=auto)
# Profile-guided cabrank-httpd (build/pgo/): built instrumented, trained on a
# request mix (tools/pgo_train.c), built again from the
# profile. gcc lays out the hot path straight, inlines by measured calls and
# moves cold code aside: 11% fewer instructions per request (2,992 to 2,664,
# bench/httpd_instructions.sh --build build/release --build build) and 4% less
# server CPU per request (4.08 to 3.91 us, bench/httpd_configs.sh --runs 8) on
# hello.txt. Only that program is built so; the library, the tests and the
# other programs are not. Both builds use the same object paths, since gcc
# keys a static function's profile by its object's name. Where gcc takes the
# options; PGO=0 skips it (a quicker build while editing). Warnings are errors
# in the release build of the same sources; here a profile gcc finds not to
# fit a function ("Missing counts", a coverage mismatch: warnings without an
# option of their own) only costs that function its profile.
PGO_PROBE := -fprofile-use -fprofile-partial-training -Wno-missing-profile
PGO ?= $(shell $(CC) $(PGO_PROBE) -Werror -x c -c -o /dev/null /dev/null >/dev/null 2>&1 && echo 1)
ifeq ($(PGO_STAGE),gen)
CFLAGS_pgo  := $(CFLAGS_release) -fprofile-generate -fprofile-update=atomic
LDFLAGS_pgo := $(LDFLAGS_release) -fprofile-generate
else
CFLAGS_pgo  := $(CFLAGS_release) $(PGO_PROBE) -Wno-error
LDFLAGS_pgo := $(LDFLAGS_release) $(PGO_PROBE)
endif
CFLAGS_asan    := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
                  -fno-omit-frame-pointer -DCR_DEBUG=1
CFLAGS_tsan    := -O1 -g -fsanitize=thread -DCR_DEBUG=1
LDFLAGS_asan   := -fsanitize=address,undefined
LDFLAGS_tsan   := -fsanitize=thread

# Where each variant puts its objects (OBJ) and its products (OUT).
OBJ_release := $(BUILD)/release
OUT_release := $(BUILD)
OBJ_asan    := $(BUILD)/asan
OUT_asan    := $(BUILD)/asan
OBJ_tsan    := $(BUILD)/tsan
OUT_tsan    := $(BUILD)/tsan
OBJ_pgo     := $(BUILD)/pgo
OUT_pgo     := $(BUILD)/pgo
VARIANTS    := release asan tsan $(if $(filter 1,$(PGO)),pgo)

LIB_SRCS     := $(sort $(wildcard src/*.c src/*/*.c))
UNIT_SRCS    := $(sort $(wildcard tests/unit/test_*.c))
SUPPORT_SRCS := $(sort $(wildcard tests/support/*.c))
INTEG_SRCS   := $(sort $(wildcard tests/integration/*.c))
EXAMPLE_SRCS := $(sort $(wildcard examples/*.c))
HEADERS      := $(sort $(wildcard include/cabrank/*.h))
FUZZ_SRCS    := $(sort $(wildcard fuzz/*.c))
# Applications: apps/<app>/main.c is the program cabrank-<app>, main_<prog>.c
# the program cabrank-<prog>; every other .c of apps/ goes into libapps.a,
# which the programs, the unit tests and the fuzz targets link.
APP_ALL_SRCS  := $(sort $(wildcard apps/*/*.c))
APP_MAIN_SRCS := $(foreach f,$(APP_ALL_SRCS),$(if $(filter main%,$(notdir $(f))),$(f)))
APP_LIB_SRCS  := $(filter-out $(APP_MAIN_SRCS),$(APP_ALL_SRCS))
prog_name = cabrank-$(if $(filter main.c,$(notdir $(1))),$(notdir $(patsubst %/,%,$(dir $(1)))),$(patsubst main_%.c,%,$(notdir $(1))))
APP_PROGS     := $(foreach f,$(APP_MAIN_SRCS),$(call prog_name,$(f)))
FORMAT_FILES := $(sort $(wildcard include/cabrank/*.h src/*.[ch] src/*/*.[ch] tests/*/*.[ch] \
                  examples/*.c apps/*/*.[ch] bench/*.[ch] bench/*/*.[ch] fuzz/*.c tools/*.c))

# ---------------------------------------------------------------- dependencies
# pkg-config module:Debian package, and command:Debian package.
PKG_DEPS := check:check liburing:liburing-dev sqlite3:libsqlite3-dev libpq:libpq-dev
CMD_DEPS := pkg-config:pkg-config clang-format:clang-format
# postgresql: the OLTP tests start a PostgreSQL server of their own (pg_ctlcluster is
# the package's command on PATH; the tests run its initdb and postgres directly).
TEST_CMD_DEPS := curl:curl chromium:chromium wrk:wrk pg_ctlcluster:postgresql

.PHONY: deps deps-test
deps:
	@scripts/deps.sh "$(CMD_DEPS)" "$(PKG_DEPS)"
deps-test: deps
	@scripts/deps.sh "$(TEST_CMD_DEPS)" ""

# ---------------------------------------------------------------- variant rules
# $(1) = variant. Defines the library, unit runner, examples and integration
# programs of that variant.
define variant_rules
$(1)_LIB_OBJS   := $$(patsubst %.c,$$(OBJ_$(1))/%.o,$$(LIB_SRCS))
$(1)_UNIT_OBJS  := $$(patsubst %.c,$$(OBJ_$(1))/%.o,$$(UNIT_SRCS) tests/unit/runner.c)
$(1)_SUPP_OBJS  := $$(patsubst %.c,$$(OBJ_$(1))/%.o,$$(SUPPORT_SRCS))
$(1)_EXAMPLES   := $$(patsubst examples/%.c,$$(OUT_$(1))/examples/%,$$(EXAMPLE_SRCS))
$(1)_INTEG      := $$(patsubst tests/integration/%.c,$$(OUT_$(1))/integration/%,$$(INTEG_SRCS))
$(1)_APP_OBJS   := $$(patsubst %.c,$$(OBJ_$(1))/%.o,$$(APP_LIB_SRCS))
$(1)_PROGS      := $$(addprefix $$(OUT_$(1))/,$$(APP_PROGS))

$$(OBJ_$(1))/%.o: %.c | deps
	@mkdir -p $$(@D)
	$$(CC) $$(BASE_CFLAGS) $$(CFLAGS_$(1)) $$(DEP_CFLAGS) $$(CHECK_CFLAGS) -I$$(OBJ_$(1))/gen -c -o $$@ $$<

$$(OUT_$(1))/libcabrank.a: $$($(1)_LIB_OBJS)
	@mkdir -p $$(@D)
	rm -f $$@ && ar rcs $$@ $$^

# Suite list for the unit runner, one X(<comp>) per tests/unit/test_<comp>.c.
$$(OBJ_$(1))/gen/suites.h: $$(UNIT_SRCS) Makefile
	@mkdir -p $$(@D)
	@printf '%s\n' $$(patsubst tests/unit/test_%.c,'X(%)',$$(UNIT_SRCS)) > $$@.tmp && mv $$@.tmp $$@
$$(OBJ_$(1))/tests/unit/runner.o: $$(OBJ_$(1))/gen/suites.h

$$(OUT_$(1))/libapps.a: $$($(1)_APP_OBJS)
	@mkdir -p $$(@D)
	rm -f $$@ && ar rcs $$@ $$^

# The test services and helpers (tests/support): an archive, so a program
# takes only the members it uses (cabrank-bench: the echo and line services).
$$(OUT_$(1))/libsupport.a: $$($(1)_SUPP_OBJS)
	@mkdir -p $$(@D)
	rm -f $$@ && ar rcs $$@ $$^

$$(OUT_$(1))/unit-tests: $$($(1)_UNIT_OBJS) $$(OUT_$(1))/libsupport.a $$(OUT_$(1))/libapps.a $$(OUT_$(1))/libcabrank.a
	$$(CC) $$(LDFLAGS_$(1)) -pthread -o $$@ $$^ $$(CHECK_LIBS) $$(DEP_LIBS) $$(APP_LIBS)

$$(OUT_$(1))/examples/%: $$(OBJ_$(1))/examples/%.o $$(OUT_$(1))/libcabrank.a
	@mkdir -p $$(@D)
	$$(CC) $$(LDFLAGS_$(1)) -pthread -o $$@ $$^ $$(DEP_LIBS)

$$(OUT_$(1))/integration/%: $$(OBJ_$(1))/tests/integration/%.o $$(OUT_$(1))/libsupport.a $$(OUT_$(1))/libapps.a $$(OUT_$(1))/libcabrank.a
	@mkdir -p $$(@D)
	$$(CC) $$(LDFLAGS_$(1)) -pthread -o $$@ $$^ $$(DEP_LIBS) $$(APP_LIBS)

.PHONY: $(1)-all
$(1)-all: $$(OUT_$(1))/libcabrank.a $$(OUT_$(1))/unit-tests $$($(1)_EXAMPLES) $$($(1)_INTEG) \
          $$($(1)_PROGS)

-include $$(shell find $$(OBJ_$(1)) -name '*.d' 2>/dev/null)
endef
$(foreach v,$(VARIANTS),$(eval $(call variant_rules,$(v))))

# $(1) = variant, $(2) = main source, $(3) = where the program goes (default
# the variant's OUT): the program's link rule. libsupport.a
# serves cabrank-bench the test services it runs; other programs take nothing
# from it.
define prog_rule
$(if $(3),$(3),$$(OUT_$(1)))/$(call prog_name,$(2)): $$(patsubst %.c,$$(OBJ_$(1))/%.o,$(2)) $$(OUT_$(1))/libsupport.a $$(OUT_$(1))/libapps.a $$(OUT_$(1))/libcabrank.a
	$$(CC) $$(LDFLAGS_$(1)) -pthread -o $$@ $$^ $$(DEP_LIBS) $$(APP_LIBS)
endef
# With PGO the release cabrank-httpd is the profile-guided one (below), and
# the plain build goes to build/release/cabrank-httpd.
PGO_MAIN := $(if $(filter 1,$(PGO)),apps/httpd/main.c)
$(foreach v,$(VARIANTS),$(foreach m,$(APP_MAIN_SRCS),\
  $(eval $(call prog_rule,$(v),$(m),$(if $(and $(filter release,$(v)),$(filter $(PGO_MAIN),$(m))),$(OBJ_release))))))

# ---------------------------------------------------------------- profile-guided cabrank-httpd
# The training run, tools/pgo_train.c, built like the benchmarks.
$(BUILD)/tools/%: $(OBJ_release)/tools/%.o $(BUILD)/libsupport.a $(BUILD)/libcabrank.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_release) -pthread -o $@ $^ $(DEP_LIBS) $(APP_LIBS)

ifeq ($(PGO),1)
# The plain build changes whenever a source of the program does; then the
# instrumented one is built into build/pgo/ (a make of its own, PGO_STAGE=gen),
# trained, and its objects removed, so that the rules below build them again
# from the profile beside them.
PGO_STAMP := $(OBJ_pgo)/trained.stamp
$(PGO_STAMP): $(OBJ_release)/cabrank-httpd $(BUILD)/tools/pgo_train
	rm -rf $(OBJ_pgo)
	$(MAKE) --no-print-directory PGO_STAGE=gen $(OUT_pgo)/cabrank-httpd
	CR_BUILD_DIR=$(OUT_pgo) $(BUILD)/tools/pgo_train
	@find $(OBJ_pgo) -name '*.gcda' | grep -q . || \
	  { echo "no profile in $(OBJ_pgo); make PGO=0 builds without one" >&2; exit 1; }
	find $(OBJ_pgo) -type f ! -name '*.gcda' -delete
	@touch $@
ifneq ($(PGO_STAGE),gen)
$(pgo_LIB_OBJS) $(pgo_APP_OBJS) $(pgo_SUPP_OBJS) $(OBJ_pgo)/apps/httpd/main.o: $(PGO_STAMP)
endif

# A new file in its place, so that a running server keeps its own.
$(BUILD)/cabrank-httpd: $(OUT_pgo)/cabrank-httpd
	cp $< $@.tmp && mv -f $@.tmp $@
endif

# ---------------------------------------------------------------- release extras
$(BUILD)/libcabrank.so.$(SOVERSION): $(release_LIB_OBJS)
	$(CC) -shared -pthread -Wl,-soname,libcabrank.so.$(SOVERSION) -o $@ $^ $(DEP_LIBS)
$(BUILD)/libcabrank.so: $(BUILD)/libcabrank.so.$(SOVERSION)
	ln -sf libcabrank.so.$(SOVERSION) $@

$(BUILD)/cabrank.pc: Makefile
	@mkdir -p $(@D)
	@printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCDIR)' '' \
	  'Name: cabrank' 'Description: concurrent request-processing server toolkit' \
	  'Version: $(VERSION)' 'Requires.private: liburing' 'Libs: -L$${libdir} -lcabrank' \
	  'Libs.private: -lpthread -lm' 'Cflags: -I$${includedir}' > $@

# Benchmarks: bench/<name>.c, linked with the test services.
BENCH_SRCS := $(sort $(wildcard bench/*.c))
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))
$(BUILD)/bench/%: $(OBJ_release)/bench/%.o $(BUILD)/libsupport.a $(BUILD)/libapps.a $(BUILD)/libcabrank.a
	@mkdir -p $(@D)
	$(CC) -pthread -o $@ $^ $(DEP_LIBS) $(APP_LIBS)

PROGRAMS := $(BUILD)/cabrank-echo

$(BUILD)/cabrank-echo: $(BUILD)/examples/reactor_echo
	ln -sf examples/reactor_echo $@

.PHONY: all asan tsan
all: release-all $(BUILD)/libcabrank.so $(BUILD)/cabrank.pc $(PROGRAMS) $(BENCH_BINS)
asan: asan-all
tsan: tsan-all

# ---------------------------------------------------------------- run, test
.PHONY: bench
# The architecture lab's short default sweep (under 5 minutes on 2 cores): every model and the
# peers installed, into bench/results/ (results.csv, results.md, plot-*.svg). BENCH_ARGS adds
# flags; a list given again replaces the default (cabrank-bench --help).
BENCH_DEFAULT := --seconds 1 --concurrency 1,16,128 --rates 2000,20000 --interval-clients 200 \
                 --out bench/results
bench: all
	$(BUILD)/cabrank-bench $(BENCH_DEFAULT) $(BENCH_ARGS)

.PHONY: run test test-unit format format-check tidy fuzz clean install uninstall
run: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all
	@echo "cabrank-httpd: serving www/ on http://$(RUN_ADDR)/ (Ctrl-C stops it)"
	exec $(BUILD)/cabrank-httpd --root www --listen $(RUN_ADDR)

# The transaction service (issue #8): a cabrank-ledger on SQLite in a temporary directory, a
# cabrank-gateway in front of it on OLTP_ADDR, and a short checked load through the gateway
# (cabrank-oltp-load --setup ... --check); on exit the gateway stops, then the ledger, and the
# exit status is the checker's.
OLTP_ADDR    ?= 127.0.0.1:7000
OLTP_SECONDS ?= 5
OLTP_CLIENTS ?= 16
.PHONY: run-oltp
run-oltp: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all
	@dir=$$(mktemp -d /tmp/cabrank-oltp-XXXXXX); pids=""; \
	trap 'for p in $$pids; do kill $$p 2>/dev/null; wait $$p 2>/dev/null; done; rm -rf "$$dir"' EXIT; \
	listening() { for i in $$(seq 200); do grep -q 'listening on' "$$1" && return 0; \
	  kill -0 $$2 2>/dev/null || break; sleep 0.05; done; echo "$$3 did not start" >&2; return 1; }; \
	$(BUILD)/cabrank-ledger --listen 127.0.0.1:0 --db "$$dir/ledger.db" >"$$dir/ledger.out" & \
	pids="$$!"; listening "$$dir/ledger.out" $$! cabrank-ledger || exit 1; \
	ledger=$$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$$dir/ledger.out" | head -1); \
	$(BUILD)/cabrank-gateway --listen $(OLTP_ADDR) --backend $$ledger >"$$dir/gateway.out" & \
	pids="$$! $$pids"; listening "$$dir/gateway.out" $$! cabrank-gateway || exit 1; \
	echo "cabrank-ledger on $$ledger (SQLite $$dir/ledger.db), cabrank-gateway on $(OLTP_ADDR)"; \
	echo "$(BUILD)/cabrank-oltp-load --target $(OLTP_ADDR) --setup --clients $(OLTP_CLIENTS)" \
	  "--seconds $(OLTP_SECONDS) --log $$dir/acked.log --check $$dir/ledger.db"; \
	$(BUILD)/cabrank-oltp-load --target $(OLTP_ADDR) --setup --clients $(OLTP_CLIENTS) \
	  --seconds $(OLTP_SECONDS) --log "$$dir/acked.log" --check "$$dir/ledger.db"

test: deps-test
	@$(MAKE) --no-print-directory -j$$(nproc) release-all asan-all tsan-all fuzz-build
	@BUILD=$(BUILD) tests/run.sh

format:
	clang-format -i $(FORMAT_FILES)
format-check: deps
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format-check: ok"

compile_commands.json:
	bear -- $(MAKE) -B release-all
tidy: compile_commands.json
	clang-tidy -p . --quiet $(LIB_SRCS)

# Fuzz targets: fuzz/<target>.c built with libFuzzer; `make fuzz` explores each
# for FUZZ_SECONDS, the suite replays fuzz/corpus/<target>/.
FUZZ_BINS := $(patsubst fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRCS))
$(BUILD)/fuzz/%: fuzz/%.c $(LIB_SRCS) $(APP_LIB_SRCS) | deps
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc -fsanitize=fuzzer,address,undefined \
	  -o $@ $< $(LIB_SRCS) $(APP_LIB_SRCS) $(DEP_CFLAGS) $(DEP_LIBS) $(APP_LIBS)
fuzz-build: $(FUZZ_BINS)
fuzz: $(FUZZ_BINS)
	@for f in $(FUZZ_BINS); do t=$${f##*/}; mkdir -p $(BUILD)/fuzz/corpus/$$t; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -dict=fuzz/$$t.dict $(BUILD)/fuzz/corpus/$$t fuzz/corpus/$$t || exit 1; done

install: all
	install -d $(DESTDIR)$(INCDIR)/cabrank $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGDIR) $(DESTDIR)$(BINDIR)
	install -m 644 $(HEADERS) $(DESTDIR)$(INCDIR)/cabrank/
	install -m 644 $(BUILD)/libcabrank.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/libcabrank.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libcabrank.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libcabrank.so
	install -m 644 $(BUILD)/cabrank.pc $(DESTDIR)$(PKGDIR)/
	install -m 755 $(BUILD)/examples/reactor_echo $(DESTDIR)$(BINDIR)/cabrank-echo
	$(if $(APP_PROGS),install -m 755 $(addprefix $(BUILD)/,$(APP_PROGS)) $(DESTDIR)$(BINDIR)/)
uninstall:
	rm -rf $(DESTDIR)$(INCDIR)/cabrank
	rm -f $(DESTDIR)$(LIBDIR)/libcabrank.a $(DESTDIR)$(LIBDIR)/libcabrank.so* \
	  $(DESTDIR)$(PKGDIR)/cabrank.pc $(DESTDIR)$(BINDIR)/cabrank-echo \
	  $(addprefix $(DESTDIR)$(BINDIR)/,$(APP_PROGS))

clean:
	rm -rf $(BUILD)
