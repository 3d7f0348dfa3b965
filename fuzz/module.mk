# Fuzzing the input parsers with libFuzzer (clang):
#   make fuzz                 builds $(BUILD)/fuzz/<target> for each target
#   make fuzz-run             runs each for FUZZ_SECONDS (default 60) from the
#                             seeds in fuzz/corpus/<target>/ (a single
#                             allocation over 64 MB counts as a crash: no
#                             small input may make a parser allocate that);
#                             new inputs go
#                             to $(BUILD)/fuzz/corpus-<target>/, crashes to
#                             $(BUILD)/fuzz/crash-<target>-*
# A crash found becomes an input under fuzz/regressions/<target>/, which
# tests/test_fuzz_replay.c replays in `make test` (and under the sanitisers).

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := idx_parse idx_file paramfile csv
FUZZ_SRCS := fuzz/targets.c harness/formats/idx.c harness/formats/paramfile.c harness/formats/csv.c base/alloc.c \
             harness/formats/fileio.c workloads/workload.c
FUZZ_CFLAGS := -std=c11 -g -O1 -D_GNU_SOURCE -I. -Wall -Wextra -Werror \
               -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
               $(if $(filter 1,$(HAVE_ZLIB)),-DHAVE_ZLIB)
FUZZ_LDLIBS := $(if $(filter 1,$(HAVE_ZLIB)),-lz)
FUZZ_BINS := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/%)

.PHONY: fuzz fuzz-run
fuzz: $(FUZZ_BINS)

$(BUILD)/fuzz/%: fuzz/fuzz_main.c $(FUZZ_SRCS) $(wildcard fuzz/*.h harness/*/*.h workloads/*.h)
	@mkdir -p $(dir $@)
	@command -v $(FUZZ_CC) >/dev/null || { echo "error: $(FUZZ_CC) not found; install clang and libclang-rt-14-dev" >&2; exit 2; }
	$(FUZZ_CC) $(FUZZ_CFLAGS) -DFUZZ_TARGET=fuzz_$* -o $@ fuzz/fuzz_main.c $(FUZZ_SRCS) $(FUZZ_LDLIBS)

fuzz-run: $(FUZZ_BINS)
	@for t in $(FUZZ_TARGETS); do \
	    mkdir -p $(BUILD)/fuzz/corpus-$$t; \
	    echo "== fuzz $$t for $(FUZZ_SECONDS) s"; \
	    $(BUILD)/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -malloc_limit_mb=64 -print_final_stats=1 \
	        -artifact_prefix=$(BUILD)/fuzz/crash-$$t- \
	        $(BUILD)/fuzz/corpus-$$t fuzz/corpus/$$t $$(test -d fuzz/regressions/$$t && echo fuzz/regressions/$$t) \
	        > $(BUILD)/fuzz/$$t.log 2>&1; rc=$$?; \
	    grep -E '^(Done [0-9]+ runs|stat::(number_of_executed_units|peak_rss_mb|new_units_added)|SUMMARY|==[0-9]+==ERROR)' $(BUILD)/fuzz/$$t.log; \
	    if [ $$rc -ne 0 ]; then tail -40 $(BUILD)/fuzz/$$t.log; \
	        echo "fuzz $$t: crashed (input saved as $(BUILD)/fuzz/crash-$$t-*; add it to fuzz/regressions/$$t/)" >&2; exit 1; fi; \
	done
