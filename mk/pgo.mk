# mk/pgo.mk - the profile-guided cabrank-httpd, included by the Makefile.
#
# cabrank-httpd is built instrumented into build/pgo/ (a make of its own,
# PGO_STAGE=gen), trained on a request mix (tools/pgo_train.c), and built again
# there from the profile; the result replaces build/cabrank-httpd, and the plain
# build goes to build/release/cabrank-httpd. Only that program is built so. Both
# builds use the same object paths, since gcc keys a static function's profile by
# its object's name. PGO=0 skips it (a quicker build while editing); figures in
# docs/design/build.md.

# Where gcc takes the options. A profile gcc finds not to fit a function
# ("Missing counts", warnings without an option of their own) only costs that
# function its profile, so warnings are not errors here (the release build of
# the same sources has them as errors).
PGO_PROBE := -fprofile-use -fprofile-partial-training -Wno-missing-profile
PGO ?= $(shell $(CC) $(PGO_PROBE) -Werror -x c -c -o /dev/null /dev/null >/dev/null 2>&1 && echo 1)
ifeq ($(PGO_STAGE),gen)
CFLAGS_pgo  := $(CFLAGS_release) -fprofile-generate -fprofile-update=atomic
LDFLAGS_pgo := $(LDFLAGS_release) -fprofile-generate
else
CFLAGS_pgo  := $(CFLAGS_release) $(PGO_PROBE) -Wno-error
LDFLAGS_pgo := $(LDFLAGS_release) $(PGO_PROBE)
endif

# The training run, tools/pgo_train.c, on the HTTP client of apps/common/.
$(BUILD)/tools/%: $(OBJ_release)/tools/%.o $(BUILD)/libapps.a $(BUILD)/libcabrank.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_release) -pthread -o $@ $^ $(DEP_LIBS) $(APP_LIBS)
# Its object kept: removed as an intermediate, it would be built again by the
# next make, and the newer trainer would make the whole training run again.
.SECONDARY: $(OBJ_release)/tools/pgo_train.o

ifeq ($(PGO),1)
# Rebuilt whenever the plain build changes: the instrumented build, its training,
# then its objects removed, so that the pgo rules build them again from the
# profile beside them. The generated headers (gen/) stay: make decided before
# this recipe ran that they are up to date, and an object built without one
# would be built again by the next make (make install, which must build nothing).
PGO_STAMP := $(OBJ_pgo)/trained.stamp
$(PGO_STAMP): $(OBJ_release)/cabrank-httpd $(BUILD)/tools/pgo_train
	rm -rf $(OBJ_pgo)
	$(MAKE) --no-print-directory PGO_STAGE=gen $(OUT_pgo)/cabrank-httpd
	CR_BUILD_DIR=$(OUT_pgo) $(BUILD)/tools/pgo_train
	@find $(OBJ_pgo) -name '*.gcda' | grep -q . || \
	  { echo "no profile in $(OBJ_pgo); make PGO=0 builds without one" >&2; exit 1; }
	find $(OBJ_pgo) -type f ! -name '*.gcda' ! -path '$(OBJ_pgo)/gen/*' -delete
	@touch $@
ifneq ($(PGO_STAGE),gen)
$(patsubst %.c,$(OBJ_pgo)/%.o,$(LIB_SRCS) $(APP_LIB_SRCS) apps/httpd/main.c): \
  $(PGO_STAMP)
endif

# The release cabrank-httpd is the profile-guided one; the program rule links
# the plain one into build/release/ instead.
PGO_REPLACES := $(BUILD)/cabrank-httpd
PGO_PLAIN    := $(OBJ_release)/cabrank-httpd
# A new file in its place, so that a running server keeps its own.
$(BUILD)/cabrank-httpd: $(OUT_pgo)/cabrank-httpd
	cp $< $@.tmp && mv -f $@.tmp $@
endif
