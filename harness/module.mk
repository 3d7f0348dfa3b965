# harness/: the run (run/: flags, plan, run loop, results, columns, report,
# system information, peak), the tools (tools/: compare, history, count,
# plot, stats) and the file formats (formats/: IDX, parameter files, CSV).
# LIB_SRCS picks up their sources (less main.c); this adds their tests.
TESTS += test_idx test_paramfile
TESTS += test_compare test_mann_whitney test_options
TEST_SCRIPTS += tests/test_compare.sh tests/test_mpi_config.sh
TESTS += test_report test_report_runs test_peak
TEST_SCRIPTS += tests/test_plot.sh tests/test_peaks.sh
# The instruction-count gate (./bench count, bench compare on counts.csv)
# fails a build whose naive kernels are compiled at -O0.
TEST_SCRIPTS += tests/test_count.sh

# ./bench count records the optimisation and target flags of its build (the
# counts depend on them; objects are rebuilt when the flags change).
$(BUILD)/harness/tools/count_child.o: CFLAGS += -DCOUNT_BUILD_FLAGS='"$(OPT)"'
