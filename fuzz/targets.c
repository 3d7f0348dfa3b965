#include "fuzz/targets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness/formats/csv.h"
#include "harness/formats/idx.h"
#include "harness/formats/paramfile.h"

#define FUZZ_CLASSES 10

/* A failure must leave one non-empty line that starts with "name: ". */
static void check_message(const char *err, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(err, name, n) != 0 || strncmp(err + n, ": ", 2) != 0 || !err[n + 2] ||
        strchr(err, '\n') || strchr(err, '\r')) {
        fprintf(stderr, "bad error message for %s: \"%s\"\n", name, err);
        abort();
    }
}

static void check_labels(const uint8_t *labels, int count)
{
    for (int i = 0; i < count; i++)
        if (labels[i] >= FUZZ_CLASSES) {
            fprintf(stderr, "accepted label %u at %d\n", labels[i], i);
            abort();
        }
}

/* In memory: a success must describe exactly the bytes given. */
static void parse_images_as(const uint8_t *data, size_t size, int rows, int cols)
{
    char err[1024] = "";
    const uint8_t *pixels = NULL;
    int count = 0;
    if (idx_parse_images(data, size, "mem", rows, cols, &pixels, &count, err, sizeof err)) {
        check_message(err, "mem");
        return;
    }
    if (count < 1 || pixels != data + 16 || size != 16 + (size_t)count * rows * cols) {
        fprintf(stderr, "accepted %zu bytes as %d images of %dx%d\n", size, count, rows, cols);
        abort();
    }
}

int fuzz_idx_parse(const uint8_t *data, size_t size)
{
    parse_images_as(data, size, 28, 28);
    parse_images_as(data, size, 2, 3);
    char err[1024] = "";
    const uint8_t *labels = NULL;
    int count = 0;
    if (idx_parse_labels(data, size, "mem", FUZZ_CLASSES, &labels, &count, err, sizeof err)) {
        check_message(err, "mem");
    } else {
        if (count < 1 || labels != data + 8 || size != 8 + (size_t)count) {
            fprintf(stderr, "accepted %zu bytes as %d labels\n", size, count);
            abort();
        }
        check_labels(labels, count);
    }
    return 0;
}

/* The bytes as a file: an in-memory one (no disk, one per process) that a
 * loader opens by the /proc path returned. */
static const char *as_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("input", 0);
        if (fd < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) {
        perror("writing the memfd");
        abort();
    }
    return path;
}

/* A refused file leaves one message and no buffer. */
static void check_refused(const char *err, const char *path, const uint8_t *out)
{
    check_message(err, path);
    if (out) {
        fprintf(stderr, "failed load left a buffer\n");
        abort();
    }
}

/* An accepted file gave count >= 1 items of item_size bytes; from a plain
 * (not gzip) file, exactly the bytes after its header. */
static void check_accepted(const uint8_t *data, size_t size, size_t header, size_t item_size,
                           const uint8_t *out, int count, const char *items)
{
    int plain = !(size >= 2 && data[0] == 0x1f && data[1] == 0x8b);
    if (count < 1 || !out ||
        (plain && (size != header + (size_t)count * item_size ||
                   memcmp(out, data + header, size - header)))) {
        fprintf(stderr, "accepted %zu bytes as %d %s\n", size, count, items);
        abort();
    }
}

int fuzz_idx_file(const uint8_t *data, size_t size)
{
    const char *path = as_file(data, size);
    char err[1024] = "";
    uint8_t *out = NULL;
    int count = 0;
    if (idx_load_images(path, 2, 3, &out, &count, err, sizeof err))
        check_refused(err, path, out);
    else
        check_accepted(data, size, 16, 2 * 3, out, count, "images of 2x3");
    free(out);
    out = NULL;
    if (idx_load_labels(path, FUZZ_CLASSES, &out, &count, err, sizeof err)) {
        check_refused(err, path, out);
    } else {
        check_accepted(data, size, 8, 1, out, count, "labels");
        check_labels(out, count);
    }
    free(out);
    return 0;
}

/* A row as its fields joined by commas must be the line it came from, when
 * the input has no quotes or carriage returns to undo. */
static void check_row_is_line(const uint8_t *data, size_t size, char **fields, int n, int line)
{
    const uint8_t *p = data, *end = data + size;
    for (int l = 1; l < line && p < end; l++) {
        p = memchr(p, '\n', (size_t)(end - p));
        p = p ? p + 1 : end;
    }
    for (int i = 0; i < n; i++) {
        size_t len = strlen(fields[i]);
        if ((size_t)(end - p) < len || memcmp(p, fields[i], len) ||
            (i + 1 < n && (p + len == end || p[len] != ','))) {
            fprintf(stderr, "line %d: field %d '%s' is not what the line holds\n", line, i,
                    fields[i]);
            abort();
        }
        p += len + 1;
    }
}

int fuzz_csv(const uint8_t *data, size_t size)
{
    const char *path = as_file(data, size);
    char err[1024] = "";
    csv_table t;
    if (csv_read(path, &t, err, sizeof err)) {
        if (!strstr(err, path) || strchr(err, '\n') || strchr(err, '\r')) {
            fprintf(stderr, "bad error message for %s: \"%s\"\n", path, err);
            abort();
        }
        csv_free(&t);
        return 0;
    }
    int plain = !memchr(data, '"', size) && !memchr(data, '\r', size);
    if (t.n_cols < 1 || !t.header || (t.n_rows && (!t.rows || !t.lines))) {
        fprintf(stderr, "accepted a table of %d columns and %d rows\n", t.n_cols, t.n_rows);
        abort();
    }
    for (int j = 0; j < t.n_cols; j++)
        if (csv_column(&t, t.header[j]) > j) {
            fprintf(stderr, "column '%s' not found at %d\n", t.header[j], j);
            abort();
        }
    for (int i = 0; i < t.n_rows; i++) {
        if (t.lines[i] < 2 || (i && t.lines[i] <= t.lines[i - 1])) {
            fprintf(stderr, "row %d says line %d\n", i, t.lines[i]);
            abort();
        }
        if (plain)
            check_row_is_line(data, size, t.rows[i], t.n_cols, t.lines[i]);
    }
    csv_free(&t);
    return 0;
}

void fuzz_tiny_workload(workload *w)
{
    memset(w, 0, sizeof *w);
    w->name = "tiny";
    w->input = (shape3){1, 3, 3};
    w->classes = 3;
    w->n_layers = 2;
    layer *conv = &w->layers[0], *dense = &w->layers[1];
    *conv = (layer){.kind = LAYER_CONV, .name = "conv", .kernel = 2, .stride = 1, .units = 2,
                    .in = {1, 3, 3}, .out = {2, 2, 2}, .weight_offset = 0, .weight_count = 8,
                    .bias_offset = 8, .bias_count = 2};
    *dense = (layer){.kind = LAYER_DENSE, .name = "fc", .units = 3, .in = {2, 2, 2},
                     .out = {3, 1, 1}, .weight_offset = 10, .weight_count = 24,
                     .bias_offset = 34, .bias_count = 3};
    w->param_count = 37;
}

/* A success must fill every value with a finite float and re-encode to the
 * very bytes given (the format has one spelling); a failure must leave the
 * output untouched. */
static void parse_tiny_params(const uint8_t *data, size_t size, const workload *w)
{
    static const float sentinel = -12345.0f;
    float params[64];
    size_t n = w->param_count;
    for (size_t i = 0; i < n; i++)
        params[i] = sentinel;
    char err[1024] = "";
    if (paramfile_parse(data, size, w, params, err, sizeof err)) {
        check_message(err, "<param file>");
        for (size_t i = 0; i < n; i++)
            if (params[i] != sentinel) {
                fprintf(stderr, "failed parse wrote value %zu\n", i);
                abort();
            }
        return;
    }
    uint8_t again[1024];
    if (size != paramfile_size(w) || size > sizeof again ||
        paramfile_encode(w, params, again, size, "again", err, sizeof err) != size ||
        memcmp(again, data, size)) {
        fprintf(stderr, "accepted %zu bytes that do not re-encode to themselves\n", size);
        abort();
    }
}

/* LeNet: inputs this small are never valid; the message must still be right. */
static void parse_lenet_params(const uint8_t *data, size_t size, const workload *w,
                               float *params)
{
    char err[1024] = "";
    if (paramfile_parse(data, size, w, params, err, sizeof err))
        check_message(err, "<param file>");
    else if (size != paramfile_size(w))
        abort();
}

int fuzz_paramfile(const uint8_t *data, size_t size)
{
    static workload tiny, lenet;
    static float *lenet_params;
    if (!lenet_params) {
        fuzz_tiny_workload(&tiny);
        if (workload_get("lenet", &lenet) != 0 ||
            !(lenet_params = malloc(sizeof(float) * lenet.param_count)))
            abort();
    }
    parse_tiny_params(data, size, &tiny);
    parse_lenet_params(data, size, &lenet, lenet_params);
    return 0;
}
