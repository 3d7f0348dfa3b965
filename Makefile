# lenet-bench. `make` builds ./bench and a module for every heavy backend
# this machine can build ($(BUILD)/modules/*.so, loaded when that backend is
# used); `make test` runs the test suite; `make run` installs what is
# missing, builds and runs the benchmark. Dependencies are detected by
# compiling a one-line probe, not by asking the package manager.
# Switches: BLAS=0, CUDA=0, MPI=0 leave that part out on a machine that has it.

.DEFAULT_GOAL := all
BUILD ?= build
BENCH ?= bench
CC ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif
NVCC ?= nvcc
CUDA_HOME ?= /usr/local/cuda

OPT ?= -O3 -march=native
WARN := -Wall -Wextra $(if $(filter 0,$(WERROR)),,-Werror)
# -fPIC: the modules link some of the program's objects too
CFLAGS := -std=c11 $(OPT) -g $(WARN) -D_GNU_SOURCE -I. -fPIC -MMD -MP $(EXTRA_CFLAGS)
LDFLAGS := $(EXTRA_LDFLAGS)
LDLIBS := -lm -ldl

# probe NAME: 1 when `printf CODE | cc -x c - FLAGS` links.
H := \#
probe = $(shell printf '$(1)' | $(CC) -x c - -o /dev/null $(2) >/dev/null 2>&1 && echo 1)

HAVE_ZLIB := $(call probe,$(H)include <zlib.h>\nint main(void){return zlibVersion()==0;}\n,-lz)
ifeq ($(HAVE_ZLIB),1)
CFLAGS += -DHAVE_ZLIB
LDLIBS += -lz
endif

HAVE_CMOCKA := $(call probe,$(H)include <stdarg.h>\n$(H)include <stddef.h>\n$(H)include <stdint.h>\n$(H)include <setjmp.h>\n$(H)include <cmocka.h>\nint main(void){return 0;}\n,-lcmocka)

# Sources of the program, less main.c (tests link these too).
LIB_SRCS := $(wildcard base/*.c) $(wildcard workloads/*.c) backends/registry.c backends/module.c \
            $(wildcard backends/common/*.c) $(wildcard backends/naive/*.c) \
            $(filter-out harness/main.c,$(wildcard harness/*.c harness/*/*.c))
TESTS :=        # cmocka programs: tests/<name>.c; TEST_OBJS_<name>, TEST_LIBS_<name> extra
TEST_SCRIPTS := # shell tests: exit 0 pass, 77 skip (run after the programs)
SKIPPED := $(if $(HAVE_ZLIB),,reading_.gz_data:_zlib.h_or_libz_not_found,_gunzip_the_data_files)
MODULES :=      # $(BUILD)/modules/<name>.so, added by module_rule
# Sources written over `real` (backends/common/real.h), built for float
# (foo.o) and for double (foo_f64.o); the double objects join LIB_OBJS.
REAL_TWICE := backends/common/optimizer.c

# What every backend module links from the program's own sources.
MODULE_SHARED_OBJS := $(BUILD)/base/cpu.o $(BUILD)/workloads/workload.o $(BUILD)/backends/common/optimizer.o \
                      $(BUILD)/backends/common/optimizer_f64.o $(BUILD)/backends/common/host_engine.o

# module_rule NAME,OBJECTS,LIBRARIES: builds $(BUILD)/modules/NAME.so.
define module_rule
MODULES += $(BUILD)/modules/$(1).so
MODULE_OBJS += $(2)
$(BUILD)/modules/$(1).so: $(2) backends/module.map
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) $$(LDFLAGS) -shared -Wl,--no-undefined -Wl,-Bsymbolic \
	    -Wl,--version-script=backends/module.map -o $$@ $(2) $(3) -lm
endef

# Library detection first, so that the module files below may be read in
# any order; then each part adds its sources, modules, flags and tests.
include backends/cuda/find-libs.mk
include backends/chwn/module.mk
include $(filter-out backends/chwn/module.mk,$(wildcard backends/*/module.mk)) \
        $(wildcard backends/direct/bf16/bf16.mk backends/direct/fp16/fp16.mk backends/direct/tools/tools.mk \
                   parallel/module.mk \
                   harness/module.mk tests/module.mk fuzz/module.mk)

LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o) $(REAL_TWICE:%.c=$(BUILD)/%_f64.o)
TEST_BINS := $(TESTS:%=$(BUILD)/tests/%)

# The module loader looks beside the program first (the build directory as
# given), then in this build's absolute path.
$(BUILD)/backends/module.o: CFLAGS += -DLB_BUILD_DIR='"$(BUILD)"' -DLB_BUILD_DIR_ABS='"$(abspath $(BUILD))"'

# The commit recorded with every run; sysinfo.o is rebuilt when it changes.
GIT_COMMIT := $(shell git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
$(shell mkdir -p $(BUILD) && (test "$$(cat $(BUILD)/git-commit 2>/dev/null)" = "$(GIT_COMMIT)" || echo "$(GIT_COMMIT)" > $(BUILD)/git-commit))
$(BUILD)/harness/run/sysinfo.o: $(BUILD)/git-commit

# Objects are rebuilt when the flags change (another OPT, a sanitiser, a
# switch), not only when their sources do.
BUILD_FLAGS := $(CC) $(CFLAGS) $(NVCCFLAGS)
$(shell test "$$(cat $(BUILD)/build-flags 2>/dev/null)" = '$(BUILD_FLAGS)' || echo '$(BUILD_FLAGS)' > $(BUILD)/build-flags)
$(LIB_OBJS) $(BUILD)/harness/main.o $(MODULE_OBJS): $(BUILD)/build-flags
$(BUILD)/harness/run/sysinfo.o: CFLAGS += -DGIT_COMMIT='"$(GIT_COMMIT)"'

.PHONY: all modules test run clean deps info
all: $(BENCH) modules $(BUILD)/precisions.json info

modules: $(MODULES)

info:
	@for s in $(SKIPPED); do echo "note: skipped $$s" | tr '_' ' '; done

$(BENCH): $(LIB_OBJS) $(BUILD)/harness/main.o
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The precision table of the engine contract (backends/engine.h) as JSON,
# for scripts (gpu-judge's tolerances, charts' labels).
$(BUILD)/precision-table: backends/precision_table.c backends/engine.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $<
$(BUILD)/precisions.json: $(BUILD)/precision-table
	$< > $@.tmp && mv $@.tmp $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/%_f64.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DLB_REAL_DOUBLE -c -o $@ $<

.SECONDEXPANSION:
$(BUILD)/tests/%: tests/%.c $(LIB_OBJS) $$(TEST_OBJS_$$*) | $(MODULES)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB_OBJS) $(TEST_OBJS_$*) $(LDLIBS) $(TEST_LIBS_$*) -lcmocka

# `make test` first installs what the tests need (scripts/install-deps test:
# as root it installs, otherwise it prints the one command to run), then
# runs again so that the probes see the new packages.
ifeq ($(TEST_DEPS_CHECKED),)
test:
	@scripts/install-deps test
	@$(MAKE) --no-print-directory test TEST_DEPS_CHECKED=1
else ifeq ($(HAVE_CMOCKA),1)
test: $(BENCH) $(MODULES) $(BUILD)/precisions.json $(TEST_BINS)
	@BENCH=./$(BENCH) BUILD=$(BUILD) scripts/run-tests $(TEST_BINS) $(TEST_SCRIPTS)
else
test:
	@echo "error: cmocka not found; install it with: apt-get install libcmocka-dev" >&2; exit 2
endif

# Instruction counts under valgrind (./bench count --help): a build of its
# own for x86-64-v3, since valgrind 3.19 cannot decode AVX-512, with the CPU
# backends only. ARGS go to ./bench count.
COUNT_BUILD ?= $(BUILD)-count
COUNT_OPT ?= -O3 -march=x86-64-v3
.PHONY: count
count:
	@$(MAKE) --no-print-directory BUILD=$(COUNT_BUILD) BENCH=$(COUNT_BUILD)/bench \
	    OPT='$(COUNT_OPT)' CUDA=0 MPI=0 all
	$(COUNT_BUILD)/bench count $(ARGS)

deps:
	@scripts/install-deps

# The PyTorch peer's own environment (scripts/install-peer): the newest
# torch that installs here from PyPI, in $(PEER_ENV), which ./bench then
# runs the peer with (docs/peers.md). Not part of run or test: the wheel
# brings its CUDA libraries, several GB.
PEER_ENV ?= .venv-peer
.PHONY: peer
peer:
	@scripts/install-peer $(PEER_ENV)

run: deps
	@$(MAKE) --no-print-directory all
	./$(BENCH) --backend all --epochs 10 $(ARGS)

clean:
	rm -rf $(BUILD) $(BENCH)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
