# Bad input, faults and interruptions end to end (tests/craft.sh has the
# helpers), the fuzz corpus replayed, and the test programs again under
# AddressSanitizer + UBSan and a short run under valgrind.
TESTS += test_fuzz_replay
TEST_SCRIPTS += tests/test_modules.sh tests/test_cli.sh tests/test_faults.sh tests/test_signals.sh \
                tests/sanitizers.sh tests/valgrind.sh

# For tests/sanitizers.sh: the test programs this configuration builds.
.PHONY: print-test-programs
print-test-programs:
	@echo $(TEST_BINS)
