# cabrank - the one non-recursive GNU Makefile (STYLE.md, "Build").
#
#   make            libcabrank (static + shared) and the programs, into build/
#   make run        build and serve on 127.0.0.1:8080
#   make test       format check, unit tests (plain, ASan+UBSan, TSan), integration
#   make test-unit  the unit tests only, under the three variants
#   make asan|tsan  sanitizer builds, into build/asan/ and build/tsan/
#   make PGO=0      cabrank-httpd without the profile-guided build (mk/pgo.mk)
#   make bench      the architecture lab's short sweep, into BENCH_OUT (build/bench-results)
#   make install PREFIX=/usr/local DESTDIR=
#
# Sources are found by wildcard: a new src/*.c or src/<layer>/*.c joins the library, a new
# tests/unit/test_<comp>.c (exporting <comp>_suite) joins the unit runner, a new
# tests/integration/<name>.c becomes an integration program, examples/<name>.c a
# program. Objects go to build/<variant>/; measurements behind the flags are in
# docs/design/build.md.

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
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -pthread -Iinclude -Isrc $(WARN) -MMD -MP
# Only test code (tests/, and the benchmarks under bench/ that run the test services) finds
# the test support's headers; what ships takes its shared pieces from apps/common/.
TEST_CFLAGS = $(if $(filter tests/% bench/%,$<),-Itests/support)
# Library dependencies resolved when a recipe runs (after `deps` has installed them).
DEP_CFLAGS = $(shell pkg-config --cflags liburing sqlite3 libpq 2>/dev/null) \
             $(shell pkg-config --exists liburing 2>/dev/null && echo -DCR_HAVE_LIBURING) \
             $(shell pkg-config --exists libpq 2>/dev/null && echo -DCR_HAVE_LIBPQ)
# What libcabrank itself links: the pkg-config modules among its dependencies that
# are installed (LIB_MODULES) and system libraries (LIB_SYS_LIBS); cabrank.pc names
# both for static links (Requires.private, Libs.private).
LIB_MODULES  = $(shell pkg-config --exists liburing 2>/dev/null && echo liburing)
LIB_SYS_LIBS := -lpthread -lm
DEP_LIBS   = $(if $(LIB_MODULES),$(shell pkg-config --libs $(LIB_MODULES) 2>/dev/null)) $(LIB_SYS_LIBS)
# Libraries only the applications need: SQLite and libpq for the ledger
# (apps/oltp); their headers are found through DEP_CFLAGS.
APP_LIBS   = $(shell pkg-config --libs sqlite3 libpq 2>/dev/null)
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null)

# gcc's generic x86-64 tuning zeroes structs of 128 bytes or more with rep stos,
# slow to start on the request path; vector stores up to 512 bytes instead.
# Only where the compiler takes the option (gcc on x86).
MEMSET_STRATEGY := -mmemset-strategy=unrolled_loop:512:noalign,libcall:-1:noalign
MEMSET_FLAGS := $(shell $(CC) $(MEMSET_STRATEGY) -Werror -x c -c -o /dev/null /dev/null \
                  >/dev/null 2>&1 && echo '$(MEMSET_STRATEGY)')
# Link-time optimization for the release programs: the request path crosses many
# small functions in several files, and LTO inlines across them. Fat objects, so
# that libcabrank.so and the archives still link without it. Only where the
# compiler takes it (gcc).
LTO_FLAGS := $(shell $(CC) -flto=auto -ffat-lto-objects -Werror -x c -c -o /dev/null /dev/null \
               >/dev/null 2>&1 && echo '-flto=auto -ffat-lto-objects')
CFLAGS_release := -O2 -g -fPIC $(MEMSET_FLAGS) $(LTO_FLAGS)
LDFLAGS_release := $(if $(LTO_FLAGS),-flto=auto)
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
                  tests/support/preload/*.c \
                  examples/*.c apps/*/*.[ch] bench/*.[ch] bench/*/*.[ch] fuzz/*.c tools/*.c))

# ---------------------------------------------------------------- dependencies
# pkg-config module:Debian package, and command:Debian package. clang-format only for
# the format targets (and so `make test`), not to build or serve.
PKG_DEPS := check:check liburing:liburing-dev sqlite3:libsqlite3-dev libpq:libpq-dev
CMD_DEPS := pkg-config:pkg-config
FORMAT_CMD_DEPS := clang-format:clang-format
# postgresql: the OLTP tests start a PostgreSQL server of their own (pg_ctlcluster is
# the package's command on PATH; the tests run its initdb and postgres directly).
TEST_CMD_DEPS := curl:curl chromium:chromium wrk:wrk pg_ctlcluster:postgresql
# Python module:Debian package, for /usr/bin/python3 (with python3 itself when it is
# missing): the status page's Prometheus text is parsed by a real parser.
TEST_PY_DEPS := prometheus_client:python3-prometheus-client

.PHONY: deps deps-format deps-test
deps:
	@scripts/deps.sh "$(CMD_DEPS)" "$(PKG_DEPS)"
deps-format:
	@scripts/deps.sh "$(FORMAT_CMD_DEPS)" ""
deps-test: deps deps-format
	@scripts/deps.sh "$(TEST_CMD_DEPS)" "" "$(TEST_PY_DEPS)"

# ---------------------------------------------------------------- variants
# release (build/, objects in build/release/), asan, tsan, and with PGO=1 pgo.
include mk/pgo.mk
VARIANTS := release asan tsan $(if $(filter 1,$(PGO)),pgo)

# The variant of a path under BUILD: build/asan/... is asan, build/tsan/... tsan,
# build/pgo/... pgo, everything else (build/release/..., build/<product>) release.
variant = $(or $(filter asan tsan pgo,$(firstword $(subst /, ,$(patsubst $(BUILD)/%,%,$(1))))),release)
# $(call objs,TARGET,SOURCES): the objects of SOURCES in TARGET's variant.
objs = $(patsubst %.c,$(OBJ_$(call variant,$(1)))/%.o,$(2))
# $(call libs,TARGET,ARCHIVES): those archives of TARGET's variant.
libs = $(addprefix $(OUT_$(call variant,$(1)))/,$(2))
# $(call every,NAMES): NAMES in the product directory of every variant.
every = $(foreach v,$(VARIANTS),$(addprefix $(OUT_$(v))/,$(1)))
# Product names below a variant's OUT: examples/<name>, integration/<name>.
EXAMPLE_NAMES := $(patsubst %.c,%,$(EXAMPLE_SRCS))
INTEG_NAMES   := $(patsubst tests/%.c,%,$(INTEG_SRCS))

# Objects, one rule per variant: the same command with that variant's flags.
compile = $(CC) $(BASE_CFLAGS) $(TEST_CFLAGS) $(CFLAGS_$(1)) $(DEP_CFLAGS) $(CHECK_CFLAGS) -I$(OBJ_$(1))/gen -c -o $@ $<
$(OBJ_release)/%.o: %.c | deps
	@mkdir -p $(@D)
	$(call compile,release)
$(OBJ_asan)/%.o: %.c | deps
	@mkdir -p $(@D)
	$(call compile,asan)
$(OBJ_tsan)/%.o: %.c | deps
	@mkdir -p $(@D)
	$(call compile,tsan)
$(OBJ_pgo)/%.o: %.c | deps
	@mkdir -p $(@D)
	$(call compile,pgo)

# Suite list for the unit runner, one X(<comp>) per tests/unit/test_<comp>.c.
%/gen/suites.h: $(UNIT_SRCS) Makefile
	@mkdir -p $(@D)
	@printf '%s\n' $(patsubst tests/unit/test_%.c,'X(%)',$(UNIT_SRCS)) > $@.tmp && mv $@.tmp $@
$(foreach v,$(VARIANTS),$(OBJ_$(v))/tests/unit/runner.o): %/tests/unit/runner.o: %/gen/suites.h

# The version the programs report (the status page): VERSION, and `git describe` when the
# tree is a git checkout (a tarball has no .git and gets VERSION alone). Written again only
# when its text would change, so a commit rebuilds the one object that includes it
# (apps/httpd/version.c).
GIT_DESCRIBE = $(if $(wildcard .git),$(shell git describe --tags --always --dirty 2>/dev/null))
%/gen/cabrank_version.h: FORCE
	@mkdir -p $(@D)
	@printf '#define CR_VERSION "%s"\n' '$(VERSION)$(if $(GIT_DESCRIBE),+$(GIT_DESCRIBE))' > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
$(foreach v,$(VARIANTS),$(OBJ_$(v))/apps/httpd/version.o): %/apps/httpd/version.o: %/gen/cabrank_version.h

# Products. Each rule serves every variant: $$(call objs,$$@,...) and
# $$(call libs,$$@,...) pick the objects and archives of the target's variant.
.SECONDEXPANSION:

$(call every,libcabrank.a): $$(call objs,$$@,$$(LIB_SRCS))
$(call every,libapps.a): $$(call objs,$$@,$$(APP_LIB_SRCS))
# The test helpers (tests/support): an archive the unit runner, the
# integration programs and the benchmarks link; no shipped program does.
$(call every,libsupport.a): $$(call objs,$$@,$$(SUPPORT_SRCS))
$(BUILD)/%.a:
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(call every,unit-tests): $$(call objs,$$@,$$(UNIT_SRCS) tests/unit/runner.c) \
                          $$(call libs,$$@,libsupport.a libapps.a libcabrank.a)
	$(CC) $(LDFLAGS_$(call variant,$@)) -pthread -o $@ $^ $(CHECK_LIBS) $(DEP_LIBS) $(APP_LIBS)

$(call every,$(EXAMPLE_NAMES)): $$(call objs,$$@,examples/$$(@F).c) $$(call libs,$$@,libcabrank.a)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_$(call variant,$@)) -pthread -o $@ $^ $(DEP_LIBS)

$(call every,$(INTEG_NAMES)): $$(call objs,$$@,tests/integration/$$(@F).c) \
                              $$(call libs,$$@,libsupport.a libapps.a libcabrank.a)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_$(call variant,$@)) -pthread -o $@ $^ $(DEP_LIBS) $(APP_LIBS)

# Fault-injection shims (tests/support/preload/<name>.c): shared objects a test preloads
# into a program it starts (LD_PRELOAD), as <variant>/test-preload/<name>.so. Built
# without sanitizers, for tests only: nothing links them, nothing installs them.
PRELOAD_SRCS  := $(sort $(wildcard tests/support/preload/*.c))
PRELOAD_NAMES := $(patsubst tests/support/preload/%.c,test-preload/%.so,$(PRELOAD_SRCS))
$(call every,$(PRELOAD_NAMES)): $$(patsubst %.so,tests/support/preload/%.c,$$(@F)) | deps
	@mkdir -p $(@D)
	$(CC) -std=c11 -D_GNU_SOURCE -pthread $(WARN) -O2 -g -fPIC -shared -o $@ $< -ldl

# The programs cabrank-<prog>, from their main source.
main_of = $(foreach f,$(APP_MAIN_SRCS),$(if $(filter $(1),$(call prog_name,$(f))),$(f)))
PROGS := $(filter-out $(PGO_REPLACES),$(call every,$(APP_PROGS))) $(PGO_PLAIN)
$(PROGS): $$(call objs,$$@,$$(call main_of,$$(@F))) \
          $$(call libs,$$@,libapps.a libcabrank.a)
	$(CC) $(LDFLAGS_$(call variant,$@)) -pthread -o $@ $^ $(DEP_LIBS) $(APP_LIBS)

# release-all, asan-all, ...: a variant's library, unit runner, examples,
# integration programs and programs.
.PHONY: $(addsuffix -all,$(VARIANTS))
$(addsuffix -all,$(VARIANTS)): %-all: $$(addprefix $$(OUT_$$*)/,libcabrank.a unit-tests \
                                     $$(EXAMPLE_NAMES) $$(INTEG_NAMES) $$(APP_PROGS) \
                                     $$(PRELOAD_NAMES))

-include $(foreach v,$(VARIANTS),$(shell find $(OBJ_$(v)) -name '*.d' 2>/dev/null))

# ---------------------------------------------------------------- release extras
$(BUILD)/libcabrank.so.$(SOVERSION): $(patsubst %.c,$(OBJ_release)/%.o,$(LIB_SRCS))
	$(CC) -shared -pthread -Wl,-soname,libcabrank.so.$(SOVERSION) -o $@ $^ $(DEP_LIBS)
$(BUILD)/libcabrank.so: $(BUILD)/libcabrank.so.$(SOVERSION)
	ln -sf libcabrank.so.$(SOVERSION) $@

# cabrank.pc names the directories of this make's PREFIX, LIBDIR and INCDIR (never
# DESTDIR): it is written again whenever its text would change, so that `make install
# PREFIX=/x` after a plain `make` installs one that says /x.
pc_dir = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
PC_LINES = 'prefix=$(PREFIX)' 'libdir=$(call pc_dir,$(LIBDIR))' \
  'includedir=$(call pc_dir,$(INCDIR))' '' 'Name: cabrank' \
  'Description: concurrent request-processing server toolkit' 'Version: $(VERSION)' \
  $(if $(LIB_MODULES),'Requires.private: $(LIB_MODULES)') 'Libs: -L$${libdir} -lcabrank' \
  'Libs.private: $(LIB_SYS_LIBS)' 'Cflags: -I$${includedir}'
.PHONY: FORCE
$(BUILD)/cabrank.pc: FORCE | deps
	@mkdir -p $(@D)
	@printf '%s\n' $(PC_LINES) > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@ && echo "wrote $@ (prefix=$(PREFIX))"; fi

# Benchmarks: bench/<name>.c, linked with the test services.
BENCH_SRCS := $(sort $(wildcard bench/*.c))
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))
$(BUILD)/bench/%: $(OBJ_release)/bench/%.o $(BUILD)/libsupport.a $(BUILD)/libapps.a $(BUILD)/libcabrank.a
	@mkdir -p $(@D)
	$(CC) -pthread -o $@ $^ $(DEP_LIBS) $(APP_LIBS)
# Kept, not removed as intermediates, so that the next make finds them built.
.SECONDARY: $(patsubst %.c,$(OBJ_release)/%.o,$(BENCH_SRCS))

PROGRAMS := $(BUILD)/cabrank-echo

$(BUILD)/cabrank-echo: $(BUILD)/examples/reactor_echo
	ln -sf examples/reactor_echo $@

.PHONY: all asan tsan
all: release-all $(BUILD)/libcabrank.so $(BUILD)/cabrank.pc $(PROGRAMS) $(BENCH_BINS)
asan: asan-all
tsan: tsan-all

# ---------------------------------------------------------------- run, test
.PHONY: bench
# The architecture lab's short default sweep (under 5 minutes on 2 cores, plus two passes over
# the claims' points for their spread: cabrank-bench's default --repeat 3; BENCH_ARGS='--repeat 1'
# leaves them out and judges no claim): every model and the
# peers installed, into BENCH_OUT (results.csv, results.md, claims.csv, plot-*.svg), below build/ unless
# asked (BENCH_OUT=bench/results records a run in the checkout). BENCH_ARGS adds flags; a list
# given again replaces the default (cabrank-bench --help).
BENCH_OUT     ?= $(BUILD)/bench-results
BENCH_DEFAULT := --seconds 1 --concurrency 1,16,128 --rates 2000,20000 --interval-clients 200 \
                 --out $(BENCH_OUT)
bench: all
	$(BUILD)/cabrank-bench $(BENCH_DEFAULT) $(BENCH_ARGS)

.PHONY: run test test-unit format format-check tidy fuzz clean install uninstall
run: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all
	@echo "cabrank-httpd: serving www/ on http://$(RUN_ADDR)/ (Ctrl-C stops it)"
	exec $(BUILD)/cabrank-httpd --root www --listen $(RUN_ADDR)

# The transaction service: a cabrank-ledger, a cabrank-gateway in front of it on OLTP_ADDR,
# and a short checked load through the gateway (scripts/run-oltp.sh says how).
OLTP_ADDR    ?= 127.0.0.1:7000
OLTP_SECONDS ?= 5
OLTP_CLIENTS ?= 16
.PHONY: run-oltp
run-oltp: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all
	@scripts/run-oltp.sh $(BUILD) $(OLTP_ADDR) $(OLTP_SECONDS) $(OLTP_CLIENTS)

test: deps-test
	@$(MAKE) --no-print-directory -j$$(nproc) release-all asan-all tsan-all fuzz-build \
	  $(BUILD)/libcabrank.so
	@BUILD=$(BUILD) tests/run.sh
# The three unit runners only (plain, ASan+UBSan, TSan).
test-unit: deps-test
	@$(MAKE) --no-print-directory -j$$(nproc) $(addsuffix /unit-tests,$(OUT_release) $(OUT_asan) $(OUT_tsan))
	@BUILD=$(BUILD) tests/run.sh unit

format: deps-format
	clang-format -i $(FORMAT_FILES)
format-check: deps-format
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

# What install copies, and only that: from a built tree it compiles nothing
# (tests/install.sh checks it after `make test`).
INSTALL_FILES := $(BUILD)/libcabrank.a $(BUILD)/libcabrank.so.$(SOVERSION) $(BUILD)/cabrank.pc \
                 $(BUILD)/examples/reactor_echo $(addprefix $(BUILD)/,$(APP_PROGS))
install: $(INSTALL_FILES)
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
