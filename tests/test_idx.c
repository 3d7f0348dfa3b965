/* IDX loader: good files (plain, gzip, both spellings) load exactly; every
 * kind of bad file is refused with one line naming the file and the
 * problem. Files are written into a fresh mkdtemp directory per test. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef HAVE_ZLIB
#include <zlib.h>
#endif

#include "harness/formats/idx.h"
#include "tests/file_checks.h"
#include "tests/scratch.h"

#define REAL_DIR "/usr/share/datasets/fashion-mnist"

struct bad_images;

typedef struct fixture {
    char dir[SCRATCH_DIR_LEN];
    char err[1024];
    const struct bad_images *bad; /* the case of test_bad_images */
} fixture;

SCRATCH_SETUP_TEARDOWN(fixture, "test_idx")

/* setup() for a test over one case, given as its initial state. */
static int setup_case(void **state)
{
    const struct bad_images *bad = *state;
    if (setup(state) != 0)
        return -1;
    ((fixture *)*state)->bad = bad;
    return 0;
}

static char *path_in(const fixture *f, const char *name)
{
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 512, "%s/%s", f->dir, name);
    return p;
}

/* Building files --------------------------------------------------------- */

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint8_t pixel(size_t i) { return (uint8_t)(i * 7 + i / 13); }

/* An image file: header with `magic` and dims, then `data_n` pixel bytes. */
static bytes images_file(uint32_t magic, uint32_t count, uint32_t rows, uint32_t cols,
                         size_t data_n)
{
    bytes b = {malloc(16 + data_n), 16 + data_n};
    assert_non_null(b.p);
    put_be32(b.p, magic);
    put_be32(b.p + 4, count);
    put_be32(b.p + 8, rows);
    put_be32(b.p + 12, cols);
    for (size_t i = 0; i < data_n; i++)
        b.p[16 + i] = pixel(i);
    return b;
}

static bytes good_images(uint32_t count)
{
    return images_file(IDX_MAGIC_IMAGES, count, 28, 28, (size_t)count * 28 * 28);
}

static bytes labels_file(uint32_t magic, uint32_t count, size_t data_n)
{
    bytes b = {malloc(8 + data_n), 8 + data_n};
    assert_non_null(b.p);
    put_be32(b.p, magic);
    put_be32(b.p + 4, count);
    for (size_t i = 0; i < data_n; i++)
        b.p[8 + i] = (uint8_t)((i * 3) % 10);
    return b;
}

static bytes good_labels(uint32_t count)
{
    return labels_file(IDX_MAGIC_LABELS, count, count);
}

static void write_bytes(const char *path, bytes b)
{
    write_file(path, b.p, b.n);
    free(b.p);
}

/* The split's ("train", "t10k") two plain files, `count` good images. */
static void write_good_split(const fixture *f, const char *split, uint32_t count)
{
    char name[64];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", split);
    write_bytes(path_in(f, name), good_images(count));
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", split);
    write_bytes(path_in(f, name), good_labels(count));
}

#ifdef HAVE_ZLIB
static void write_gz_mode(const char *path, const void *p, size_t n, const char *mode)
{
    gzFile g = gzopen(path, mode);
    assert_non_null(g);
    assert_int_equal(gzwrite(g, p, (unsigned)n), (int)n);
    assert_int_equal(gzclose(g), Z_OK);
}

static void write_gz(const char *path, bytes b)
{
    write_gz_mode(path, b.p, b.n, "wb");
    free(b.p);
}
#endif

/* Checking what was loaded ----------------------------------------------- */

static void expect_pixels(const dataset *d, int count)
{
    assert_int_equal(d->count, count);
    assert_int_equal(d->rows, 28);
    assert_int_equal(d->cols, 28);
    assert_non_null(d->images);
    assert_non_null(d->labels);
    for (size_t i = 0; i < (size_t)count * 28 * 28; i++)
        if (d->images[i] != pixel(i))
            fail_msg("pixel %zu is %u, expected %u", i, d->images[i], pixel(i));
    for (int i = 0; i < count; i++)
        assert_int_equal(d->labels[i], (i * 3) % 10);
}

static int load_train(fixture *f, dataset *d)
{
    return idx_load_split(f->dir, "train", 10, 28, 28, d, f->err, sizeof f->err);
}

/* The split ("train", "t10k") in the directory loads `count` good images,
 * and freeing it leaves an empty dataset. */
static void expect_split_loads(fixture *f, const char *split, int count)
{
    dataset d;
    if (idx_load_split(f->dir, split, 10, 28, 28, &d, f->err, sizeof f->err))
        fail_msg("%s", f->err);
    expect_pixels(&d, count);
    dataset_free(&d);
    assert_null(d.images);
    assert_null(d.labels);
    assert_int_equal(d.count, 0);
}

/* The bad file is the image file `name`; the labels are good. */
static void expect_bad_images_in(fixture *f, const char *name, bytes images, const char *k1,
                                 const char *k2)
{
    const char *ip = path_in(f, name);
    write_bytes(ip, images);
    write_bytes(path_in(f, "train-labels-idx1-ubyte"), good_labels(3));
    dataset d;
    int rc = load_train(f, &d);
    expect_error(rc, f->err, ip, k1, k2, NULL);
    assert_null(d.images);
    assert_null(d.labels);
}

static void expect_bad_images(fixture *f, bytes images, const char *k1, const char *k2)
{
    expect_bad_images_in(f, "train-images-idx3-ubyte", images, k1, k2);
}

static void expect_bad_labels(fixture *f, bytes labels, const char *k1, const char *k2)
{
    const char *lp = path_in(f, "train-labels-idx1-ubyte");
    write_bytes(path_in(f, "train-images-idx3-ubyte"), good_images(3));
    write_bytes(lp, labels);
    dataset d;
    int rc = load_train(f, &d);
    expect_error(rc, f->err, lp, k1, k2, NULL);
    assert_null(d.images);
}

/* Good files ------------------------------------------------------------- */

static void test_plain_loads(void **state)
{
    fixture *f = *state;
    write_good_split(f, "train", 3);
    expect_split_loads(f, "train", 3);
}

typedef void (*file_writer)(const char *path, bytes b);

/* A split's two files of `count` images, each written under its name by
 * its writer (plain or gzip), load as that split. */
static void expect_files_load(fixture *f, const char *split, int count, const char *images,
                              file_writer write_images, const char *labels,
                              file_writer write_labels)
{
    write_images(path_in(f, images), good_images((uint32_t)count));
    write_labels(path_in(f, labels), good_labels((uint32_t)count));
    expect_split_loads(f, split, count);
}

static void test_dot_spelling_loads(void **state)
{
    expect_files_load(*state, "t10k", 2, "t10k-images.idx3-ubyte", write_bytes,
                      "t10k-labels.idx1-ubyte", write_bytes);
}

static void test_load_both_splits(void **state)
{
    fixture *f = *state;
    write_good_split(f, "train", 5);
    write_good_split(f, "t10k", 2);
    dataset train, test;
    int rc = idx_load(f->dir, 10, 28, 28, &train, &test, f->err, sizeof f->err);
    if (rc)
        fail_msg("%s", f->err);
    expect_pixels(&train, 5);
    expect_pixels(&test, 2);
    dataset_free(&train);
    dataset_free(&test);
}

static void test_load_both_fails_on_test_split(void **state)
{
    fixture *f = *state;
    write_good_split(f, "train", 5);
    dataset train, test;
    int rc = idx_load(f->dir, 10, 28, 28, &train, &test, f->err, sizeof f->err);
    expect_error(rc, f->err, "t10k-images-idx3-ubyte", "no such file", "--data", NULL);
    assert_null(train.images);
    assert_null(test.images);
}

#ifdef HAVE_ZLIB
static void test_gzip_loads(void **state)
{
    expect_files_load(*state, "train", 3, "train-images-idx3-ubyte.gz", write_gz,
                      "train-labels-idx1-ubyte.gz", write_gz);
}

/* gzip is recognised by its magic bytes, not by the name: gzip under the
 * plain name, plain bytes under the .gz name. */
static void test_gzip_detected_by_magic(void **state)
{
    expect_files_load(*state, "train", 3, "train-images-idx3-ubyte", write_gz,
                      "train-labels-idx1-ubyte.gz", write_bytes);
}

/* `cat a.gz b.gz` is a valid gzip file holding both. */
static void test_gzip_multi_member_loads(void **state)
{
    fixture *f = *state;
    const char *ip = path_in(f, "train-images-idx3-ubyte.gz");
    bytes im = good_images(3);
    write_gz_mode(ip, im.p, 1000, "wb");
    write_gz_mode(ip, im.p + 1000, im.n - 1000, "ab");
    free(im.p);
    write_gz(path_in(f, "train-labels-idx1-ubyte.gz"), good_labels(3));
    expect_split_loads(f, "train", 3);
}

#define GZ_IMAGES "train-images-idx3-ubyte.gz"

/* Three good images gzipped, as bytes to damage. */
static bytes gzipped_images(fixture *f)
{
    const char *ip = path_in(f, GZ_IMAGES);
    write_gz(ip, good_images(3));
    bytes b = read_file(ip);
    assert_true(b.n > 20);
    return b;
}

static void test_gzip_corrupt(void **state)
{
    fixture *f = *state;
    bytes b = gzipped_images(f);
    b.p[10] = 0xff; /* first deflate block header: reserved block type */
    expect_bad_images_in(f, GZ_IMAGES, b, "corrupt gzip", "zlib");
}

static void test_gzip_bad_crc(void **state)
{
    fixture *f = *state;
    bytes b = gzipped_images(f);
    b.p[b.n - 8] ^= 0x55; /* the CRC-32 in the trailer */
    expect_bad_images_in(f, GZ_IMAGES, b, "corrupt gzip", "check");
}

static void test_gzip_truncated(void **state)
{
    fixture *f = *state;
    bytes b = gzipped_images(f);
    b.n /= 2;
    expect_bad_images_in(f, GZ_IMAGES, b, "gzip", "truncated");
}

/* Header says 2 images; the stream holds 3 (and would hold any amount). */
static void test_gzip_decompresses_to_too_much(void **state)
{
    fixture *f = *state;
    const char *ip = path_in(f, "train-images-idx3-ubyte.gz");
    bytes im = images_file(IDX_MAGIC_IMAGES, 2, 28, 28, 3 * 28 * 28);
    write_gz(ip, im);
    write_gz(path_in(f, "train-labels-idx1-ubyte.gz"), good_labels(2));
    dataset d;
    expect_error(load_train(f, &d), f->err, ip, "decompresses to more than", "1568", NULL);
}

static void test_gzip_trailing_garbage(void **state)
{
    fixture *f = *state;
    bytes b = gzipped_images(f);
    memcpy(b.p + b.n, "garbage!", 8);
    b.n += 8;
    expect_bad_images_in(f, GZ_IMAGES, b, "trailing garbage", "gzip");
}

static void test_gzip_label_out_of_range(void **state)
{
    fixture *f = *state;
    const char *lp = path_in(f, "train-labels-idx1-ubyte.gz");
    bytes l = good_labels(3);
    l.p[8 + 2] = 200;
    write_gz(lp, l);
    write_gz(path_in(f, "train-images-idx3-ubyte.gz"), good_images(3));
    dataset d;
    expect_error(load_train(f, &d), f->err, lp, "label 200 at index 2 is outside 0..9", NULL);
}
#else
static void test_gzip_without_zlib(void **state)
{
    fixture *f = *state;
    const char *ip = path_in(f, "train-images-idx3-ubyte.gz");
    static const uint8_t gz[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0,
                                 0, 0, 0, 0};
    write_file(ip, gz, sizeof gz);
    write_bytes(path_in(f, "train-labels-idx1-ubyte"), good_labels(3));
    dataset d;
    expect_error(load_train(f, &d), f->err, ip, "gzip", "zlib support is not built in",
                 NULL);
}
#endif

/* Bad files -------------------------------------------------------------- */

static void test_label_out_of_range(void **state)
{
    fixture *f = *state;
    bytes l = good_labels(3);
    l.p[8 + 1] = 12;
    expect_bad_labels(f, l, "label 12 at index 1 is outside 0..9", NULL);
}

static void test_label_range_follows_classes(void **state)
{
    fixture *f = *state;
    write_good_split(f, "train", 3); /* labels 0, 3, 6 */
    dataset d;
    int rc = idx_load_split(f->dir, "train", 5, 28, 28, &d, f->err, sizeof f->err);
    expect_error(rc, f->err, "train-labels-idx1-ubyte", "label 6 at index 2 is outside 0..4",
                 NULL);
}

/* An image file wrong in its header or its length, beside good labels, and
 * two phrases of the error it gets. */
typedef struct bad_images {
    uint32_t magic, count, rows, cols;
    size_t data_n;
    const char *k1, *k2;
} bad_images;

static const bad_images images_bad_magic = {0x12345678, 3, 28, 28, 3 * 784,
                                            "bad magic 0x12345678", "not an IDX file"};
static const bad_images labels_given_as_images = {IDX_MAGIC_LABELS, 3, 28, 28, 3 * 784,
                                                  "bad magic 0x00000801", "label file"};
static const bad_images element_type = {0x00000D03, 3, 28, 28, 3 * 784, "element type 0x0d",
                                        "unsigned byte"};
static const bad_images number_of_dimensions = {0x00000804, 3, 28, 28, 3 * 784,
                                                "4 dimensions", "has 3"};
static const bad_images image_size_mismatch = {IDX_MAGIC_IMAGES, 3, 32, 32, 3 * 32 * 32,
                                               "32x32", "expects 28x28"};
static const bad_images no_images = {IDX_MAGIC_IMAGES, 0, 28, 28, 0, "no images", NULL};
static const bad_images truncated_data = {IDX_MAGIC_IMAGES, 3, 28, 28, 3 * 784 - 5,
                                          "truncated", "2347"};
static const bad_images trailing_garbage = {IDX_MAGIC_IMAGES, 3, 28, 28, 3 * 784 + 3,
                                            "3 trailing bytes", NULL};
static const bad_images dimension_overflow = {IDX_MAGIC_IMAGES, 0xffffffffu, 0xffffffffu,
                                              0xffffffffu, 0, "too large",
                                              "4294967295 x 4294967295 x 4294967295"};
/* 2^22 x 28 x 28 bytes is over 2 GiB without overflowing. */
static const bad_images dimension_over_limit = {IDX_MAGIC_IMAGES, 1u << 22, 28, 28, 10,
                                                "too large", "limit"};

/* One test per case: the fixture holds it (setup_case). */
static void test_bad_images(void **state)
{
    fixture *f = *state;
    const bad_images *c = f->bad;
    expect_bad_images(f, images_file(c->magic, c->count, c->rows, c->cols, c->data_n), c->k1,
                      c->k2);
}

static void test_labels_bad_magic(void **state)
{
    fixture *f = *state;
    expect_bad_labels(f, labels_file(IDX_MAGIC_IMAGES, 3, 3), "bad magic 0x00000803",
                      "image file");
}

static void test_count_mismatch(void **state)
{
    fixture *f = *state;
    const char *lp = path_in(f, "train-labels-idx1-ubyte");
    write_bytes(path_in(f, "train-images-idx3-ubyte"), good_images(3));
    write_bytes(lp, good_labels(2));
    dataset d;
    expect_error(load_train(f, &d), f->err, lp, "holds 2 labels", "holds 3 images",
                 "train-images-idx3-ubyte", NULL);
    assert_null(d.images);
}

static void test_truncated_header(void **state)
{
    fixture *f = *state;
    bytes b = good_images(3);
    b.n = 10;
    expect_bad_images(f, b, "header is truncated", "10 of 16");
}

static void test_too_short_for_magic(void **state)
{
    fixture *f = *state;
    bytes b = good_images(3);
    b.n = 3;
    expect_bad_images(f, b, "truncated", "3 bytes");
}

static void test_labels_trailing_garbage(void **state)
{
    fixture *f = *state;
    expect_bad_labels(f, labels_file(IDX_MAGIC_LABELS, 3, 4), "1 trailing bytes", NULL);
}

static void test_labels_over_limit(void **state)
{
    fixture *f = *state;
    expect_bad_labels(f, labels_file(IDX_MAGIC_LABELS, 0xfffffff0u, 3), "too large", NULL);
}

static void test_empty_file(void **state)
{
    fixture *f = *state;
    expect_bad_images(f, images_file(IDX_MAGIC_IMAGES, 3, 28, 28, 0), "truncated", NULL);
    const char *ip = path_in(f, "train-images-idx3-ubyte");
    write_file(ip, "", 0);
    dataset d;
    expect_error(load_train(f, &d), f->err, ip, "empty", NULL);
}

static void test_directory_instead_of_file(void **state)
{
    fixture *f = *state;
    const char *ip = path_in(f, "train-images-idx3-ubyte");
    assert_int_equal(mkdir(ip, 0700), 0);
    write_bytes(path_in(f, "train-labels-idx1-ubyte"), good_labels(3));
    dataset d;
    expect_error(load_train(f, &d), f->err, ip, "is a directory", NULL);
}

static void test_permission_denied(void **state)
{
    fixture *f = *state;
    const char *ip = path_in(f, "train-images-idx3-ubyte");
    write_good_split(f, "train", 3);
    assert_int_equal(chmod(ip, 0), 0);
    if (access(ip, R_OK) == 0) {
        print_message("running as a user that reads mode-000 files (root): cannot test\n");
        skip();
    }
    dataset d;
    expect_error(load_train(f, &d), f->err, ip, "cannot open", strerror(EACCES), NULL);
}

static void test_missing_file(void **state)
{
    fixture *f = *state;
    write_bytes(path_in(f, "train-images-idx3-ubyte"), good_images(3));
    dataset d;
    expect_error(load_train(f, &d), f->err, path_in(f, "train-labels-idx1-ubyte"),
                 "no such file", "--data DIR", "dataset-fashion-mnist", NULL);
}

static void test_missing_directory(void **state)
{
    fixture *f = *state;
    const char *dir = path_in(f, "nowhere");
    dataset d;
    int rc = idx_load(dir, 10, 28, 28, &d, &d, f->err, sizeof f->err);
    expect_error(rc, f->err, dir, "no such directory", "--data DIR", "dataset-fashion-mnist",
                 NULL);
}

static void test_directory_is_a_file(void **state)
{
    fixture *f = *state;
    const char *dir = path_in(f, "afile");
    write_file(dir, "x", 1);
    dataset d;
    int rc = idx_load_split(dir, "train", 10, 28, 28, &d, f->err, sizeof f->err);
    expect_error(rc, f->err, dir, "not a directory", NULL);
}

/* The parsers on memory (what fuzz targets call) ------------------------- */

static void test_parse_from_memory(void **state)
{
    fixture *f = *state;
    bytes im = good_images(4);
    const uint8_t *px = NULL;
    int n = 0;
    assert_int_equal(
        idx_parse_images(im.p, im.n, "mem", 28, 28, &px, &n, f->err, sizeof f->err), 0);
    assert_ptr_equal(px, im.p + 16);
    assert_int_equal(n, 4);
    /* every length short of the whole file is refused */
    for (size_t len = 0; len < im.n; len += (len < 32 ? 1 : 97))
        expect_error(idx_parse_images(im.p, len, "mem", 28, 28, &px, &n, f->err,
                                      sizeof f->err),
                     f->err, "mem: ", NULL);
    expect_error(idx_parse_images(im.p, im.n, "mem", 28, 27, &px, &n, f->err, sizeof f->err),
                 f->err, "mem: ", "28x27", NULL);
    free(im.p);
    im = images_file(IDX_MAGIC_IMAGES, 4, 28, 28, 4 * 784 + 2);
    expect_error(idx_parse_images(im.p, im.n, "mem", 28, 28, &px, &n, f->err, sizeof f->err),
                 f->err, "mem: 2 trailing bytes", NULL);
    free(im.p);

    bytes l = good_labels(4);
    const uint8_t *lab = NULL;
    assert_int_equal(
        idx_parse_labels(l.p, l.n, "mem", 10, &lab, &n, f->err, sizeof f->err), 0);
    assert_ptr_equal(lab, l.p + 8);
    assert_int_equal(n, 4);
    l.p[8 + 3] = 10;
    expect_error(idx_parse_labels(l.p, l.n, "mem", 10, &lab, &n, f->err, sizeof f->err),
                 f->err, "mem: label 10 at index 3 is outside 0..9", NULL);
    free(l.p);

    static const uint8_t gz[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0};
    expect_error(idx_parse_labels(gz, sizeof gz, "mem", 10, &lab, &n, f->err, sizeof f->err),
                 f->err, "mem: ", "gzip", NULL);
}

/* The real data set ------------------------------------------------------ */

static void test_real_fashion_mnist(void **state)
{
    fixture *f = *state;
    struct stat st;
    if (stat(REAL_DIR, &st) != 0) {
        print_message("%s absent (apt-get install dataset-fashion-mnist): skipped\n",
                      REAL_DIR);
        skip();
    }
#ifndef HAVE_ZLIB
    print_message("built without zlib: cannot read the .gz files in %s\n", REAL_DIR);
    skip();
#endif
    dataset train, test;
    int rc = idx_load(REAL_DIR, 10, 28, 28, &train, &test, f->err, sizeof f->err);
    if (rc)
        fail_msg("%s", f->err);
    assert_int_equal(train.count, 60000);
    assert_int_equal(test.count, 10000);
    /* Fashion-MNIST is balanced: 6000 and 1000 images per class. */
    long per_train[10] = {0}, per_test[10] = {0};
    for (int i = 0; i < train.count; i++)
        per_train[train.labels[i]]++;
    for (int i = 0; i < test.count; i++)
        per_test[test.labels[i]]++;
    for (int c = 0; c < 10; c++) {
        assert_int_equal(per_train[c], 6000);
        assert_int_equal(per_test[c], 1000);
    }
    /* Not all black: the mean pixel of the first image is well above 0. */
    long sum = 0;
    for (int i = 0; i < 28 * 28; i++)
        sum += train.images[i];
    assert_true(sum > 28 * 28 * 10);
    dataset_free(&train);
    dataset_free(&test);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
#define BAD_IMAGES(c) {"test_" #c, test_bad_images, setup_case, teardown, (void *)&c}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_plain_loads),
        T(test_dot_spelling_loads),
        T(test_load_both_splits),
        T(test_load_both_fails_on_test_split),
#ifdef HAVE_ZLIB
        T(test_gzip_loads),
        T(test_gzip_detected_by_magic),
        T(test_gzip_multi_member_loads),
        T(test_gzip_corrupt),
        T(test_gzip_bad_crc),
        T(test_gzip_truncated),
        T(test_gzip_decompresses_to_too_much),
        T(test_gzip_trailing_garbage),
        T(test_gzip_label_out_of_range),
#else
        T(test_gzip_without_zlib),
#endif
        T(test_label_out_of_range),
        T(test_label_range_follows_classes),
        BAD_IMAGES(images_bad_magic),
        BAD_IMAGES(labels_given_as_images),
        T(test_labels_bad_magic),
        BAD_IMAGES(element_type),
        BAD_IMAGES(number_of_dimensions),
        T(test_count_mismatch),
        BAD_IMAGES(image_size_mismatch),
        BAD_IMAGES(no_images),
        BAD_IMAGES(truncated_data),
        T(test_truncated_header),
        T(test_too_short_for_magic),
        BAD_IMAGES(trailing_garbage),
        T(test_labels_trailing_garbage),
        BAD_IMAGES(dimension_overflow),
        BAD_IMAGES(dimension_over_limit),
        T(test_labels_over_limit),
        T(test_empty_file),
        T(test_directory_instead_of_file),
        T(test_permission_denied),
        T(test_missing_file),
        T(test_missing_directory),
        T(test_directory_is_a_file),
        T(test_parse_from_memory),
        T(test_real_fashion_mnist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
