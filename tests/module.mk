# base/cpu.c, the one reader of the CPU's features, against the kernel's
# /proc/cpuinfo.
TESTS += test_cpu

# Bad input, faults and interruptions end to end (tests/craft.sh has the
# helpers), the fuzz corpus replayed, and the test programs again under
# AddressSanitizer + UBSan and a short run under valgrind.
TESTS += test_fuzz_replay
TEST_SCRIPTS += tests/test_modules.sh tests/test_cli.sh tests/test_axes.sh tests/test_model_cli.sh tests/test_faults.sh tests/test_signals.sh \
                tests/sanitizers.sh tests/valgrind.sh

# The test runner itself: totals, order and failures, one at a time and
# with --jobs.
TEST_SCRIPTS += tests/test_run_tests.sh

# For tests/sanitizers.sh: the test programs this configuration builds.
.PHONY: print-test-programs
print-test-programs:
	@echo $(TEST_BINS)
# Includes and calls run downwards through the rooms (scripts/check-layers,
# docs/design.md), and the check finds each kind of violation.
TEST_SCRIPTS += tests/test_layers.sh
.PHONY: check-layers
check-layers: $(BENCH) $(MODULES)
	scripts/check-layers $(BUILD)

# The documents: links and images resolve, the flags they show exist, the
# tests they name exist (scripts/check-docs).
TEST_SCRIPTS += tests/test_docs.sh

# Every backend of the registry against naive, and data-parallel against
# one replica (tests/test_equivalence.c).
TESTS += test_equivalence

# Where make finds the CUDA libraries (backends/cuda/find-libs.mk).
TEST_SCRIPTS += tests/test_find_libs.sh

# The GPU check's row judge (scripts/gpu-judge) on made-up runs: right ones
# pass, a wrong loss, a graph-off run unequal to graph on, a graph not
# captured fail their rows.
TEST_SCRIPTS += tests/test_gpu_judge.sh
# scripts/gpu-check past the device with a stand-in bench (naive labelled as
# the device): every command line the check gives there, its rows, table
# and archive, a wrong loss and a step out of time (about 80 s here).
TEST_SCRIPTS += tests/test_gpu_check.sh

# scripts/gpu-check rehearsed in the GPU machine's library layout, without a
# GPU (scripts/gpu-rehearsal; root), in `make test` too (about 30 s on two
# quiet cores): it alone compiles the make-less build the GPU machine uses.
# Passes when the rehearsal ends in "no GPU: ..." (exit 3) or, with a GPU,
# every check passes.
TEST_SCRIPTS += tests/test_gpu_rehearsal.sh
.PHONY: gpu-rehearsal
gpu-rehearsal:
	@scripts/gpu-check --rehearse; rc=$$?; [ $$rc -eq 3 ] || [ $$rc -eq 0 ]
