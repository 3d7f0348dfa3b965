# lenet-bench. `make` builds ./bench with every backend this machine can
# build; `make test` runs the test suite; `make run` installs what is missing,
# builds and runs the benchmark. Dependencies are detected by compiling a
# one-line probe, not by asking the package manager.

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
WARN := -Wall -Wextra -Werror
CFLAGS := -std=c11 $(OPT) -g $(WARN) -D_GNU_SOURCE -I. -MMD -MP $(EXTRA_CFLAGS)
LDFLAGS := $(EXTRA_LDFLAGS)
LDLIBS := -lm

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
LIB_SRCS := $(wildcard workloads/*.c) backends/registry.c $(wildcard backends/common/*.c) \
            $(wildcard backends/naive/*.c) $(filter-out harness/main.c,$(wildcard harness/*.c))
CU_SRCS :=
TESTS :=        # cmocka programs: tests/<name>.c
TEST_SCRIPTS := # shell tests: exit 0 pass, 77 skip (run after the programs)
SKIPPED :=

# Optional parts add their sources, flags and tests here.
include $(sort $(wildcard backends/*/module.mk parallel/module.mk harness/module.mk tests/module.mk fuzz/module.mk))

LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o) $(CU_SRCS:%.cu=$(BUILD)/%.o)
TEST_BINS := $(TESTS:%=$(BUILD)/tests/%)

# The commit recorded with every run; sysinfo.o is rebuilt when it changes.
GIT_COMMIT := $(shell git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
$(shell mkdir -p $(BUILD) && (test "$$(cat $(BUILD)/git-commit 2>/dev/null)" = "$(GIT_COMMIT)" || echo "$(GIT_COMMIT)" > $(BUILD)/git-commit))
$(BUILD)/harness/sysinfo.o: $(BUILD)/git-commit
$(BUILD)/harness/sysinfo.o: CFLAGS += -DGIT_COMMIT='"$(GIT_COMMIT)"'

.PHONY: all test run clean deps info
all: $(BENCH) info

info:
	@for s in $(SKIPPED); do echo "note: skipped $$s" | tr '_' ' '; done

$(BENCH): $(LIB_OBJS) $(BUILD)/harness/main.o
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB_OBJS) $(LDLIBS) -lcmocka

# `make test` first installs what the tests need (scripts/install-deps test:
# as root it installs, otherwise it prints the one command to run), then
# runs again so that the probes see the new packages.
ifeq ($(TEST_DEPS_CHECKED),)
test:
	@scripts/install-deps test
	@$(MAKE) --no-print-directory test TEST_DEPS_CHECKED=1
else ifeq ($(HAVE_CMOCKA),1)
test: $(BENCH) $(TEST_BINS)
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
	    OPT='$(COUNT_OPT)' NVCC=none CUDA_HOME=/nonexistent MPICC=none all
	$(COUNT_BUILD)/bench count $(ARGS)

deps:
	@scripts/install-deps

run: deps
	@$(MAKE) --no-print-directory all
	./$(BENCH) --backend all --epochs 10 $(ARGS)

clean:
	rm -rf $(BUILD) $(BENCH)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
