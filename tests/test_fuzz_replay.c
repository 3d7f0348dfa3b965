/* Replays the fuzz seed corpus and every saved regression input
 * (fuzz/corpus/<target>/, fuzz/regressions/<target>/) through the fuzz
 * targets, which abort on a broken invariant. Built like every test, so
 * `make test` replays them plainly and tests/sanitizers.sh replays them
 * under AddressSanitizer and UBSan. Run from the repository root. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/targets.c"
#include "tests/cmocka_main.h"
#include "tests/testing.h"

typedef int (*fuzz_fn)(const uint8_t *data, size_t size);

/* Runs fn on every file in dir; returns how many (0 when dir is absent). */
static int replay_dir(const char *dir, fuzz_fn fn)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            fail_msg("cannot open %s", path);
        uint8_t *buf = malloc(1 << 20);
        assert_non_null(buf);
        size_t len = fread(buf, 1, 1 << 20, f);
        assert_int_equal(ferror(f), 0);
        fclose(f);
        /* an exact-size copy, so reading past the end is caught by ASan */
        uint8_t *exact = malloc(len ? len : 1);
        assert_non_null(exact);
        memcpy(exact, buf, len);
        free(buf);
        fn(exact, len);
        free(exact);
        n++;
    }
    closedir(d);
    return n;
}

static void replay(const char *target, fuzz_fn fn)
{
    char dir[256];
    snprintf(dir, sizeof dir, "fuzz/corpus/%s", target);
    int seeds = replay_dir(dir, fn);
    snprintf(dir, sizeof dir, "fuzz/regressions/%s", target);
    int regressions = replay_dir(dir, fn);
    print_message("%s: %d seeds and %d regression inputs replayed\n", target, seeds,
                  regressions);
    if (seeds == 0)
        fail_msg("no seeds in fuzz/corpus/%s (run from the repository root)", target);
}

typedef struct target {
    const char *name;
    fuzz_fn fn;
} target;

static const target idx_parse = {"idx_parse", fuzz_idx_parse},
                    idx_file = {"idx_file", fuzz_idx_file},
                    paramfile = {"paramfile", fuzz_paramfile},
                    csv = {"csv", fuzz_csv};

static void test_replay(void **state)
{
    const target *t = *state;
    replay(t->name, t->fn);
}

/* The csv seeds named valid-* are read, with the rows they hold. */
static void check_valid_csv_seeds(void)
{
    static const struct {
        const char *file;
        int cols, rows;
    } valid[] = {{"fuzz/corpus/csv/valid-summary", 5, 2},
                 {"fuzz/corpus/csv/valid-crlf-blank-lines", 2, 2},
                 {"fuzz/corpus/csv/valid-quoted-newline", 2, 1},
                 {"fuzz/corpus/csv/valid-header-only", 3, 0}};
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
        char err[1024] = "";
        csv_table t;
        if (csv_read(valid[i].file, &t, err, sizeof err))
            fail_msg("%s", err);
        assert_int_equal(t.n_cols, valid[i].cols);
        assert_int_equal(t.n_rows, valid[i].rows);
        csv_free(&t);
    }
}

/* The seeds named valid-* must be accepted: otherwise the fuzzers would
 * start with nothing that reaches the end of a parser. */
static void test_valid_seeds_parse(void **state)
{
    (void)state;
    check_valid_csv_seeds();
    workload tiny;
    fuzz_tiny_workload(&tiny);
    static const char *files[] = {"fuzz/corpus/paramfile/valid-tiny",
                                  "fuzz/corpus/idx_parse/valid-images-2x3",
                                  "fuzz/corpus/idx_parse/valid-labels"};
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(files[i], "rb");
        if (!f)
            fail_msg("cannot open %s", files[i]);
        uint8_t buf[4096];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        char err[1024] = "";
        float params[64];
        const uint8_t *out;
        int count, rc;
        if (i == 0)
            rc = paramfile_parse(buf, len, &tiny, params, err, sizeof err);
        else if (i == 1)
            rc = idx_parse_images(buf, len, "mem", 2, 3, &out, &count, err, sizeof err);
        else
            rc = idx_parse_labels(buf, len, "mem", 10, &out, &count, err, sizeof err);
        if (rc)
            fail_msg("%s: %s", files[i], err);
    }
}

TEST_MAIN(CASE_TEST("test_idx_parse", test_replay, &idx_parse),
          CASE_TEST("test_idx_file", test_replay, &idx_file),
          CASE_TEST("test_paramfile", test_replay, &paramfile),
          CASE_TEST("test_csv", test_replay, &csv),
          cmocka_unit_test(test_valid_seeds_parse))
