/* Parameter files: a bit-exact round trip in the documented byte layout, and
 * every kind of bad file refused with one line naming the file and the
 * problem, leaving the parameters untouched. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/formats/paramfile.h"
#include "tests/file_checks.h"
#include "tests/scratch.h"

typedef struct fixture {
    char dir[256];
    char path[512];
    char err[1024];
    workload lenet, mlp;
    float *params; /* lenet, distinctive bit patterns */
    float *out;    /* lenet, filled with a sentinel */
} fixture;

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void fill_sentinel(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = 12345.0f;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    if (scratch_make(f->dir, sizeof f->dir, "test_paramfile") != 0 ||
        workload_get("lenet", &f->lenet) ||
        workload_get("mlp", &f->mlp))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/params.bin", f->dir);
    size_t n = f->lenet.param_count;
    f->params = malloc(n * sizeof(float));
    f->out = malloc(n * sizeof(float));
    if (!f->params || !f->out)
        return -1;
    /* Finite values of every kind: random bits with the exponent kept below
     * all-ones, plus signed zeros, subnormals and the extremes. */
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        uint32_t u = (uint32_t)(s >> 11);
        if (((u >> 23) & 0xff) == 0xff)
            u &= ~(1u << 23);
        f->params[i] = from_bits(u);
    }
    f->params[0] = -0.0f;
    f->params[1] = 0.0f;
    f->params[2] = from_bits(1);          /* smallest subnormal */
    f->params[3] = from_bits(0x807fffff); /* largest negative subnormal */
    f->params[4] = from_bits(0x7f7fffff); /* FLT_MAX */
    f->params[5] = 1.0f;
    fill_sentinel(f->out, n);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    scratch_remove(f->dir);
    free(f->params);
    free(f->out);
    free(f);
    return 0;
}

static void expect_untouched(const fixture *f)
{
    for (size_t i = 0; i < f->lenet.param_count; i++)
        if (f->out[i] != 12345.0f)
            fail_msg("a failed load changed parameter %zu", i);
}

static bytes encode(fixture *f, const workload *w, const float *params)
{
    size_t n = paramfile_size(w);
    bytes b = {malloc(n + 64), n};
    assert_non_null(b.p);
    size_t got = paramfile_encode(w, params, b.p, n, "mem", f->err, sizeof f->err);
    if (got != n)
        fail_msg("encode: %s", f->err);
    return b;
}

/* Loads the bytes from a file into lenet and expects a failure naming the
 * file and every keyword (NULL ends them), with the parameters untouched. */
static void expect_load_error_va(fixture *f, const uint8_t *p, size_t n, va_list keywords)
{
    write_file(f->path, p, n);
    int rc = paramfile_load(f->path, &f->lenet, f->out, f->err, sizeof f->err);
    expect_error_va(rc, f->err, keywords);
    if (strncmp(f->err, f->path, strlen(f->path)) != 0)
        fail_msg("message \"%s\" does not start with the path", f->err);
    expect_untouched(f);
}

static void expect_load_error(fixture *f, const uint8_t *p, size_t n, ...)
{
    va_list keywords;
    va_start(keywords, n);
    expect_load_error_va(f, p, n, keywords);
    va_end(keywords);
}

/* Offset of tensor i's record (its name length) in an encoded lenet file. */
static size_t tensor_offset(const workload *w, int index)
{
    size_t p = 16;
    for (int i = 0; i < index; i++) {
        char name[64];
        size_t off, count;
        int dims[4], nd;
        workload_tensor_info(w, i, name, sizeof name, &off, &count, dims, &nd);
        p += 8 + strlen(name) + 4 * (size_t)nd + 4 * count;
    }
    return p;
}

/* Good files ------------------------------------------------------------- */

static void test_round_trip_bit_exact(void **state)
{
    fixture *f = *state;
    int rc = paramfile_save(f->path, &f->lenet, f->params, f->err, sizeof f->err);
    if (rc)
        fail_msg("save: %s", f->err);
    rc = paramfile_load(f->path, &f->lenet, f->out, f->err, sizeof f->err);
    if (rc)
        fail_msg("load: %s", f->err);
    for (size_t i = 0; i < f->lenet.param_count; i++)
        if (bits(f->out[i]) != bits(f->params[i]))
            fail_msg("parameter %zu: saved 0x%08x, loaded 0x%08x", i, bits(f->params[i]),
                     bits(f->out[i]));
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal((size_t)st.st_size, paramfile_size(&f->lenet));
    /* The temporary file is gone. */
    DIR *d = opendir(f->dir);
    assert_non_null(d);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            entries++;
    closedir(d);
    assert_int_equal(entries, 1);
}

static void test_round_trip_mlp(void **state)
{
    fixture *f = *state;
    if (paramfile_save(f->path, &f->mlp, f->params, f->err, sizeof f->err))
        fail_msg("save: %s", f->err);
    if (paramfile_load(f->path, &f->mlp, f->out, f->err, sizeof f->err))
        fail_msg("load: %s", f->err);
    assert_memory_equal(f->out, f->params, f->mlp.param_count * sizeof(float));
}

/* The documented layout, byte for byte, whatever the host's byte order. */
static void test_byte_layout(void **state)
{
    fixture *f = *state;
    /* sizes: 16 + sum(8 + name + 4 ndims + 4 count) */
    assert_int_equal(paramfile_size(&f->lenet),
                     16 + (8 + 12 + 16 + 4 * 500) + (8 + 10 + 4 + 4 * 20) +
                         (8 + 12 + 16 + 4 * 25000) + (8 + 10 + 4 + 4 * 50) +
                         (8 + 10 + 8 + 4 * 400000) + (8 + 8 + 4 + 4 * 500) +
                         (8 + 10 + 8 + 4 * 5000) + (8 + 8 + 4 + 4 * 10));
    f->params[0] = 1.0f;  /* 0x3f800000 */
    f->params[1] = -2.5f; /* 0xc0200000 */
    bytes b = encode(f, &f->lenet, f->params);
    static const uint8_t head[] = {
        'L', 'B', 'P', 'A', 'R', 'A', 'M', 'S', 1, 0, 0, 0, 8, 0, 0, 0, /* header */
        12, 0, 0, 0, 'c', 'o', 'n', 'v', '1', '.', 'w', 'e', 'i', 'g', 'h', 't',
        4, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0, 5, 0, 0, 0, /* shape */
        0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0,             /* 1.0, -2.5 */
    };
    assert_memory_equal(b.p, head, sizeof head);
    size_t fc1 = tensor_offset(&f->lenet, 4);
    static const uint8_t fc1_head[] = {10, 0, 0, 0, 'f', 'c', '1', '.', 'w', 'e', 'i', 'g',
                                       'h', 't', 2, 0, 0, 0, 0xf4, 1, 0, 0, 0x20, 3, 0, 0};
    assert_memory_equal(b.p + fc1, fc1_head, sizeof fc1_head); /* [500, 800] */
    free(b.p);
}

static void test_parse_from_memory(void **state)
{
    fixture *f = *state;
    bytes b = encode(f, &f->lenet, f->params);
    if (paramfile_parse(b.p, b.n, &f->lenet, f->out, f->err, sizeof f->err))
        fail_msg("%s", f->err);
    assert_memory_equal(f->out, f->params, f->lenet.param_count * sizeof(float));
    fill_sentinel(f->out, f->lenet.param_count);
    /* Every proper prefix is refused, and leaves params alone. */
    for (size_t n = 0; n < b.n; n += (n < 200 ? 1 : 4099)) {
        int rc = paramfile_parse(b.p, n, &f->lenet, f->out, f->err, sizeof f->err);
        expect_error(rc, f->err, "<param file>: ", NULL);
        if (n >= 8 && !strstr(f->err, "truncated"))
            fail_msg("prefix of %zu bytes: \"%s\" does not say truncated", n, f->err);
    }
    expect_untouched(f);
    free(b.p);
}

/* Bad files -------------------------------------------------------------- */

static void test_missing_file(void **state)
{
    fixture *f = *state;
    int rc = paramfile_load(f->path, &f->lenet, f->out, f->err, sizeof f->err);
    expect_error(rc, f->err, f->path, "cannot open", strerror(ENOENT), NULL);
    expect_untouched(f);
}

static void test_directory(void **state)
{
    fixture *f = *state;
    assert_int_equal(mkdir(f->path, 0700), 0);
    int rc = paramfile_load(f->path, &f->lenet, f->out, f->err, sizeof f->err);
    expect_error(rc, f->err, f->path, "is a directory", NULL);
}

static void test_empty(void **state)
{
    fixture *f = *state;
    expect_load_error(f, (const uint8_t *)"", 0, "empty", NULL);
}

/* A good lenet file with `len` bytes at `at` replaced by `patch` loads as
 * expect_load_error says, with every keyword (NULL ends them). */
static void expect_patched_error(fixture *f, size_t at, const char *patch, size_t len, ...)
{
    bytes b = encode(f, &f->lenet, f->params);
    assert_true(at + len <= b.n);
    memcpy(b.p + at, patch, len);
    va_list keywords;
    va_start(keywords, len);
    expect_load_error_va(f, b.p, b.n, keywords);
    va_end(keywords);
    free(b.p);
}

#define ALL_ONES "\xff\xff\xff\xff\xff\xff\xff\xff"

static void test_bad_magic(void **state)
{
    fixture *f = *state;
    expect_patched_error(f, 3, "X", 1, "bad magic", "LBPARAMS", NULL);
    expect_load_error(f, (const uint8_t *)"\x89PNG\r\n\x1a\n", 8, "bad magic", NULL);
}

static void test_bad_version(void **state)
{
    fixture *f = *state;
    expect_patched_error(f, 8, "\x02", 1, "version 2", "not supported", NULL);
}

static void test_other_workload(void **state)
{
    fixture *f = *state;
    bytes b = encode(f, &f->mlp, f->params);
    expect_load_error(f, b.p, b.n, "holds 4 tensors", "lenet has 8", "different workload",
                      NULL);
    free(b.p);
}

static void test_wrong_name(void **state)
{
    fixture *f = *state;
    size_t digit = tensor_offset(&f->lenet, 2) + 4 + 4; /* conv2.weight's '2' */
    expect_patched_error(f, digit, "7", 1, "tensor 2 is \"conv7.weight\"",
                         "expects \"conv2.weight\"", "different workload", NULL);
}

static void test_unprintable_name(void **state)
{
    fixture *f = *state;
    expect_patched_error(f, 16 + 4, "\n", 1, "\\x0a", "conv1.weight", NULL);
}

static void test_wrong_shape(void **state)
{
    fixture *f = *state;
    size_t ndims = tensor_offset(&f->lenet, 0) + 4 + 12; /* conv1.weight [20,1,5,5] */
    expect_patched_error(f, ndims + 4 + 8, "\x03", 1, "conv1.weight", "[20,1,3,5]",
                         "[20,1,5,5]", "different workload", NULL);
    expect_patched_error(f, ndims, "\x03", 1, "conv1.weight", "[20,1,5]", "[20,1,5,5]", NULL);
}

static void test_absurd_name_length(void **state)
{
    fixture *f = *state;
    size_t t = tensor_offset(&f->lenet, 1);
    expect_patched_error(f, t, ALL_ONES, 4, "tensor 1", "name length 4294967295", "corrupt",
                         NULL);
    expect_patched_error(f, t, "\0\0\0\0", 4, "tensor 1", "name length 0", NULL);
}

static void test_absurd_ndims(void **state)
{
    fixture *f = *state;
    size_t ndims = tensor_offset(&f->lenet, 4) + 4 + 10; /* fc1.weight's */
    expect_patched_error(f, ndims, ALL_ONES, 4, "fc1.weight", "4294967295 dimensions", NULL);
}

static void test_huge_dims(void **state)
{
    fixture *f = *state;
    size_t dims = tensor_offset(&f->lenet, 4) + 4 + 10 + 4; /* fc1.weight's */
    expect_patched_error(f, dims, ALL_ONES, 8, "fc1.weight", "[4294967295,4294967295]",
                         "[500,800]", NULL);
}

static void test_truncated(void **state)
{
    fixture *f = *state;
    bytes b = encode(f, &f->lenet, f->params);
    expect_load_error(f, b.p, 12, "truncated", NULL);
    expect_load_error(f, b.p, tensor_offset(&f->lenet, 3) + 6, "truncated", "conv2.bias",
                      NULL);
    expect_load_error(f, b.p, b.n - 1, "truncated", "values of tensor fc2.bias", NULL);
    free(b.p);
}

static void test_trailing_bytes(void **state)
{
    fixture *f = *state;
    bytes b = encode(f, &f->lenet, f->params);
    memset(b.p + b.n, 0, 5);
    expect_load_error(f, b.p, b.n + 5, "5 trailing bytes", NULL);
    free(b.p);
}

static void test_nan_and_inf(void **state)
{
    fixture *f = *state;
    size_t v = tensor_offset(&f->lenet, 5) + 4 + 8 + 4 + 4; /* fc1.bias values */
    expect_patched_error(f, v + 4 * 7, "\x00\x00\xc0\x7f", 4, /* NaN */
                         "tensor fc1.bias value 7 is NaN", NULL);
    expect_patched_error(f, v, "\x00\x00\x80\xff", 4, /* -Inf */
                         "tensor fc1.bias value 0 is -Inf", NULL);
}

static void test_save_refuses_non_finite(void **state)
{
    fixture *f = *state;
    f->params[f->lenet.layers[6].weight_offset + 3] = NAN;
    int rc = paramfile_save(f->path, &f->mlp, f->params, f->err, sizeof f->err);
    assert_int_equal(rc, 0); /* mlp's layout does not reach that index */
    rc = paramfile_save(f->path, &f->lenet, f->params, f->err, sizeof f->err);
    expect_error(rc, f->err, f->path, "fc2.weight value 3 is NaN", NULL);
    /* the earlier (mlp) file is still there and whole */
    if (paramfile_load(f->path, &f->mlp, f->out, f->err, sizeof f->err))
        fail_msg("%s", f->err);
}

static void test_save_to_missing_directory(void **state)
{
    fixture *f = *state;
    char path[600];
    snprintf(path, sizeof path, "%s/nowhere/params.bin", f->dir);
    int rc = paramfile_save(path, &f->lenet, f->params, f->err, sizeof f->err);
    expect_error(rc, f->err, path, "cannot create", strerror(ENOENT), NULL);
}

/* A write that fails part way (here: over the file-size limit, as a full
 * disk would) is reported, leaves no temporary file and keeps the old file. */
static void test_save_write_error(void **state)
{
    fixture *f = *state;
    bytes old = encode(f, &f->mlp, f->params);
    write_file(f->path, old.p, old.n);
    struct rlimit saved, small;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
    small = saved;
    small.rlim_cur = 100000;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    int rc = paramfile_save(f->path, &f->lenet, f->params, f->err, sizeof f->err);
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, prev);
    expect_error(rc, f->err, f->path, "write failed", strerror(EFBIG), NULL);
    bytes now = read_file(f->path);
    assert_int_equal(now.n, old.n);
    assert_memory_equal(now.p, old.p, old.n);
    DIR *d = opendir(f->dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tmp"))
            fail_msg("temporary file %s left behind", e->d_name);
    closedir(d);
    free(old.p);
    free(now.p);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_round_trip_bit_exact),
        T(test_round_trip_mlp),
        T(test_byte_layout),
        T(test_parse_from_memory),
        T(test_missing_file),
        T(test_directory),
        T(test_empty),
        T(test_bad_magic),
        T(test_bad_version),
        T(test_other_workload),
        T(test_wrong_name),
        T(test_unprintable_name),
        T(test_wrong_shape),
        T(test_absurd_name_length),
        T(test_absurd_ndims),
        T(test_huge_dims),
        T(test_truncated),
        T(test_trailing_bytes),
        T(test_nan_and_inf),
        T(test_save_refuses_non_finite),
        T(test_save_to_missing_directory),
        T(test_save_write_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
