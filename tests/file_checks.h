/* For the tests of the file readers (IDX, parameter files): whole files
 * written and read back, and the check that a bad one is refused with one
 * line naming what is wrong. Header-only, for cmocka tests. */
#ifndef LB_FILE_CHECKS_H
#define LB_FILE_CHECKS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bytes {
    uint8_t *p;
    size_t n;
} bytes;

/* Writes n bytes as the whole of path. */
static inline void write_file(const char *path, const void *p, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(p, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

/* The whole of path, in a buffer of READ_FILE_MAX bytes (room to append). */
#define READ_FILE_MAX ((size_t)4 << 20)

static inline bytes read_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    bytes b = {malloc(READ_FILE_MAX), 0};
    assert_non_null(b.p);
    b.n = fread(b.p, 1, READ_FILE_MAX, fp);
    fclose(fp);
    assert_true(b.n < READ_FILE_MAX);
    return b;
}

/* rc must be non-zero and err one line holding every keyword (NULL ends
 * them). */
static inline void expect_error_va(int rc, const char *err, va_list keywords)
{
    if (rc == 0)
        fail_msg("expected a failure, got success");
    if (strchr(err, '\n'))
        fail_msg("message is more than one line: \"%s\"", err);
    for (const char *k; (k = va_arg(keywords, const char *));)
        if (!strstr(err, k))
            fail_msg("message \"%s\" lacks \"%s\"", err, k);
}

static inline void expect_error(int rc, const char *err, ...)
{
    va_list ap;
    va_start(ap, err);
    expect_error_va(rc, err, ap);
    va_end(ap);
}

#endif
