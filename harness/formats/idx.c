#include "harness/formats/idx.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/errmsg.h"
#include "harness/formats/fileio.h"

#ifdef HAVE_ZLIB
#include <zlib.h>
#endif


static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* What a validated header describes. */
typedef struct idx_header {
    size_t header_len; /* 4 + 4 * ndims */
    size_t data_len;   /* bytes after the header */
    int count;         /* images or labels */
} idx_header;

/* Checks the header at hdr[0..avail) of an image (want_ndims 3) or label
 * (want_ndims 1) file. */
static int check_header(const uint8_t *hdr, size_t avail, const char *name, int want_ndims,
                        int rows, int cols, idx_header *h, char *err, size_t err_len)
{
    const char *what = want_ndims == 3 ? "image" : "label";
    uint32_t want = want_ndims == 3 ? IDX_MAGIC_IMAGES : IDX_MAGIC_LABELS;
    uint32_t other = want_ndims == 3 ? IDX_MAGIC_LABELS : IDX_MAGIC_IMAGES;

    if (avail == 0) {
        errmsg_set(err, err_len, name, "file is empty, expected an IDX %s file", what);
        return -1;
    }
    if (avail < 4) {
        errmsg_set(err, err_len, name, "file is truncated: %zu bytes, too short for an IDX header",
             avail);
        return -1;
    }
    uint32_t magic = be32(hdr);
    if (magic != want) {
        if (hdr[0] == 0x1f && hdr[1] == 0x8b)
            errmsg_set(err, err_len, name,
                 "bad magic 0x%08x: data is gzip-compressed, expected IDX %s data (0x%08x)",
                 magic, what, want);
        else if (magic == other)
            errmsg_set(err, err_len, name,
                 "bad magic 0x%08x: this is an IDX %s file, expected %s (0x%08x)", magic,
                 want_ndims == 3 ? "label" : "image", want_ndims == 3 ? "images" : "labels",
                 want);
        else if (hdr[0] || hdr[1])
            errmsg_set(err, err_len, name, "bad magic 0x%08x: not an IDX file (expected 0x%08x)",
                 magic, want);
        else if (hdr[2] != 0x08)
            errmsg_set(err, err_len, name,
                 "bad magic 0x%08x: element type 0x%02x is not unsigned byte (0x08)", magic,
                 hdr[2]);
        else
            errmsg_set(err, err_len, name,
                 "bad magic 0x%08x: %u dimensions, an IDX %s file has %d (0x%08x)", magic,
                 hdr[3], what, want_ndims, want);
        return -1;
    }
    h->header_len = 4 + 4 * (size_t)want_ndims;
    if (avail < h->header_len) {
        errmsg_set(err, err_len, name, "header is truncated: %zu of %zu bytes", avail,
             h->header_len);
        return -1;
    }
    uint32_t dims[3] = {0, 0, 0};
    size_t total = 1;
    int too_big = 0;
    for (int i = 0; i < want_ndims; i++) {
        dims[i] = be32(hdr + 4 + 4 * i);
        if (dims[i] && total > IDX_MAX_BYTES / dims[i])
            too_big = 1;
        else
            total *= dims[i];
    }
    if (too_big || total > IDX_MAX_BYTES) {
        if (want_ndims == 3)
            errmsg_set(err, err_len, name,
                 "header dimensions %u x %u x %u are too large (over the %zu-byte limit)",
                 dims[0], dims[1], dims[2], IDX_MAX_BYTES);
        else
            errmsg_set(err, err_len, name,
                 "header dimension %u is too large (over the %zu-byte limit)", dims[0],
                 IDX_MAX_BYTES);
        return -1;
    }
    if (dims[0] == 0) {
        errmsg_set(err, err_len, name, "header says the file holds no %ss", what);
        return -1;
    }
    if (dims[0] > INT_MAX) {
        errmsg_set(err, err_len, name, "header dimension %u is too large (at most %d %ss)",
             dims[0], INT_MAX, what);
        return -1;
    }
    if (want_ndims == 3 && ((long long)dims[1] != rows || (long long)dims[2] != cols)) {
        errmsg_set(err, err_len, name, "images are %ux%u (rows x cols), the workload expects %dx%d",
             dims[1], dims[2], rows, cols);
        return -1;
    }
    h->data_len = total;
    h->count = (int)dims[0];
    return 0;
}

static int check_labels(const uint8_t *labels, int count, const char *name, int classes,
                        char *err, size_t err_len)
{
    for (int i = 0; i < count; i++) {
        if (labels[i] >= classes) {
            errmsg_set(err, err_len, name, "label %u at index %d is outside 0..%d", labels[i], i,
                 classes - 1);
            return -1;
        }
    }
    return 0;
}

static int check_length(size_t len, const idx_header *h, const char *name, char *err,
                        size_t err_len)
{
    size_t want = h->header_len + h->data_len;
    if (len < want) {
        errmsg_set(err, err_len, name,
             "data is truncated: the header describes %zu bytes of data, the file has %zu",
             h->data_len, len - h->header_len);
        return -1;
    }
    if (len > want) {
        errmsg_set(err, err_len, name, "%zu trailing bytes after the %zu bytes of data the header "
             "describes", len - want, h->data_len);
        return -1;
    }
    return 0;
}

int idx_parse_images(const uint8_t *buf, size_t len, const char *name, int rows, int cols,
                     const uint8_t **pixels, int *count, char *err, size_t err_len)
{
    idx_header h;
    if (check_header(buf, len, name, 3, rows, cols, &h, err, err_len) ||
        check_length(len, &h, name, err, err_len))
        return -1;
    *pixels = buf + h.header_len;
    *count = h.count;
    return 0;
}

int idx_parse_labels(const uint8_t *buf, size_t len, const char *name, int classes,
                     const uint8_t **labels, int *count, char *err, size_t err_len)
{
    idx_header h;
    if (check_header(buf, len, name, 1, 0, 0, &h, err, err_len) ||
        check_length(len, &h, name, err, err_len) ||
        check_labels(buf + h.header_len, h.count, name, classes, err, err_len))
        return -1;
    *labels = buf + h.header_len;
    *count = h.count;
    return 0;
}

/* A file being read, plain or through inflate. --------------------------- */

typedef struct source {
    FILE *f;
    const char *path;
    int gz;
#ifdef HAVE_ZLIB
    z_stream zs;
    int zinit;
    int in_eof;
    int member_end; /* the last gzip member ended; more input may follow */
    unsigned char in[1 << 16];
#endif
} source;

static int source_open(source *s, const char *path, char *err, size_t err_len)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    s->f = open_input(path, "an IDX file", err, err_len);
    if (!s->f) {
        if (errno == ENOENT)
            errmsg_set(err, err_len, path, "no such file (pass --data DIR, or install Debian's "
                 "dataset-fashion-mnist for %s/)", IDX_DEFAULT_DIR);
        return -1;
    }
    unsigned char m[2];
    size_t got = fread(m, 1, 2, s->f);
    if (ferror(s->f)) {
        errmsg_set(err, err_len, path, "read error: %s", strerror(errno));
        goto bad;
    }
    if (got == 2 && m[0] == 0x1f && m[1] == 0x8b) {
#ifdef HAVE_ZLIB
        s->gz = 1;
        if (inflateInit2(&s->zs, 16 + MAX_WBITS) != Z_OK) {
            errmsg_set(err, err_len, path, "cannot start zlib: %s",
                 s->zs.msg ? s->zs.msg : "out of memory");
            goto bad;
        }
        s->zinit = 1;
#else
        errmsg_set(err, err_len, path, "file is gzip-compressed but zlib support is not built in "
             "(install zlib1g-dev and rebuild, or gunzip the file)");
        goto bad;
#endif
    }
    rewind(s->f);
    return 0;
bad:
    fclose(s->f);
    s->f = NULL;
    return -1;
}

static void source_close(source *s)
{
#ifdef HAVE_ZLIB
    if (s->zinit)
        inflateEnd(&s->zs);
    s->zinit = 0;
#endif
    if (s->f)
        fclose(s->f);
    s->f = NULL;
}

/* Reads up to n bytes; *got < n only at the end of the (decompressed) data. */
static int source_read(source *s, uint8_t *dst, size_t n, size_t *got, char *err,
                       size_t err_len)
{
    *got = 0;
    if (!s->gz) {
        *got = fread(dst, 1, n, s->f);
        if (*got < n && ferror(s->f)) {
            errmsg_set(err, err_len, s->path, "read error: %s", strerror(errno));
            return -1;
        }
        return 0;
    }
#ifdef HAVE_ZLIB
    while (*got < n) {
        if (s->zs.avail_in == 0 && !s->in_eof) {
            size_t r = fread(s->in, 1, sizeof s->in, s->f);
            if (r == 0) {
                if (ferror(s->f)) {
                    errmsg_set(err, err_len, s->path, "read error: %s", strerror(errno));
                    return -1;
                }
                s->in_eof = 1;
            }
            s->zs.next_in = s->in;
            s->zs.avail_in = (uInt)r;
        }
        if (s->member_end) {
            if (s->zs.avail_in == 0) {
                if (s->in_eof)
                    return 0; /* clean end of the last member */
                continue;
            }
            /* Another gzip member follows (as `cat a.gz b.gz` makes). */
            if (inflateReset(&s->zs) != Z_OK) {
                errmsg_set(err, err_len, s->path, "zlib error: cannot reset the stream");
                return -1;
            }
        }
        size_t want = n - *got;
        uInt chunk = want > (1u << 30) ? (1u << 30) : (uInt)want;
        s->zs.next_out = dst + *got;
        s->zs.avail_out = chunk;
        int rc = inflate(&s->zs, Z_NO_FLUSH);
        *got += chunk - s->zs.avail_out;
        if (rc == Z_STREAM_END) {
            s->member_end = 1;
        } else if (rc == Z_OK) {
            s->member_end = 0;
        } else if (rc == Z_BUF_ERROR) {
            if (s->in_eof && s->zs.avail_in == 0) {
                errmsg_set(err, err_len, s->path,
                     "gzip stream is truncated (unexpected end of compressed data)");
                return -1;
            }
        } else if (rc == Z_DATA_ERROR && s->member_end) {
            errmsg_set(err, err_len, s->path, "corrupt gzip stream: trailing garbage after the "
                 "end of the compressed data (zlib: %s)", s->zs.msg ? s->zs.msg : "data error");
            return -1;
        } else {
            errmsg_set(err, err_len, s->path, "corrupt gzip stream (zlib: %s)",
                 s->zs.msg ? s->zs.msg : zError(rc));
            return -1;
        }
    }
    return 0;
#else
    errmsg_set(err, err_len, s->path, "zlib support is not built in");
    return -1;
#endif
}

/* The most a gzip stream can decompress to per byte: deflate codes a run
 * of 258 bytes in no fewer than 2 bits, about 1032 to 1. */
#define GZIP_MAX_RATIO 1032

/* Opens path and reads and checks its header (want_ndims 3: images, 1:
 * labels); s is left at the first byte of data. Then what the header
 * claims against what the file can hold, before anything is allocated for
 * it: a plain file's size, a gzip file's size times deflate's largest
 * ratio. */
static int open_checked(source *s, const char *path, int want_ndims, int rows, int cols,
                        idx_header *h, char *err, size_t err_len)
{
    if (source_open(s, path, err, err_len))
        return -1;
    uint8_t hdr[16];
    size_t got;
    struct stat st;
    if (source_read(s, hdr, 4 + 4 * (size_t)want_ndims, &got, err, err_len) ||
        check_header(hdr, got, path, want_ndims, rows, cols, h, err, err_len))
        goto bad;
    if (fstat(fileno(s->f), &st) != 0 || st.st_size < 0)
        return 0; /* no size to hold it to: the reading finds out */
    size_t size = (size_t)st.st_size;
    if (!s->gz && size < h->header_len + h->data_len) {
        errmsg_set(err, err_len, path,
                   "data is truncated: the header describes %zu bytes of data, the file has %zu",
                   h->data_len, size > h->header_len ? size - h->header_len : 0);
        goto bad;
    }
    if (s->gz && size < (h->header_len + h->data_len) / GZIP_MAX_RATIO) {
        errmsg_set(err, err_len, path,
                   "data is truncated: the header describes %zu bytes of data, more than a "
                   "gzip file of %zu bytes can hold (%d times that at most)", h->data_len, size,
                   GZIP_MAX_RATIO);
        goto bad;
    }
    return 0;
bad:
    source_close(s);
    return -1;
}

/* Reads the data of s (header h) to its end, keeping the first `keep`
 * records (0: all) in *data: the rest is read and checked for length, not
 * held. The buffer grows as data arrives (from 1 MiB, doubling). Closes s. */
static int read_data(source *s, const idx_header *h, int keep, uint8_t **data, char *err,
                     size_t err_len)
{
    const char *path = s->path;
    const size_t record = h->data_len / (size_t)h->count;
    const size_t kept = keep > 0 && keep < h->count ? record * (size_t)keep : h->data_len;
    size_t cap = kept < ((size_t)1 << 20) ? kept : (size_t)1 << 20, have = 0, got;
    uint8_t *buf = NULL;
    int oom = 0;
    for (;;) {
        uint8_t *grown = realloc(buf, cap);
        if (!grown) {
            errmsg_set(err, err_len, path, "out of memory for %zu bytes", cap);
            oom = 1;
            goto bad;
        }
        buf = grown;
        if (source_read(s, buf + have, cap - have, &got, err, err_len))
            goto bad;
        have += got;
        if (have < cap || cap == kept)
            break;
        cap = cap > kept / 2 ? kept : cap * 2;
    }
    /* what is not kept: read through in pieces */
    uint8_t skip[1 << 16];
    while (have >= kept && have < h->data_len) {
        size_t want = h->data_len - have < sizeof skip ? h->data_len - have : sizeof skip;
        if (source_read(s, skip, want, &got, err, err_len))
            goto bad;
        have += got;
        if (got < want)
            break;
    }
    if (have < h->data_len) {
        errmsg_set(err, err_len, path,
             "data is truncated: the header describes %zu bytes of data, the %s has %zu",
             h->data_len, s->gz ? "decompressed file" : "file", have);
        goto bad;
    }
    uint8_t extra;
    size_t more = 0;
    if (source_read(s, &extra, 1, &more, err, err_len))
        goto bad;
    if (more) {
        if (s->gz) {
            errmsg_set(err, err_len, path, "trailing bytes: decompresses to more than the %zu "
                 "bytes of data the header describes", h->data_len);
        } else {
            struct stat st;
            long long n = fstat(fileno(s->f), &st) == 0
                              ? (long long)st.st_size - (long long)(h->header_len + h->data_len)
                              : 1;
            errmsg_set(err, err_len, path,
                 "%lld trailing bytes after the %zu bytes of data the header describes", n,
                 h->data_len);
        }
        goto bad;
    }
    source_close(s);
    *data = buf;
    return 0;
bad:
    free(buf);
    source_close(s);
    if (oom)
        errno = ENOMEM; /* not the file's fault: the caller says so */
    return -1;
}

/* Reads, validates and returns the data part of an image (want_ndims 3) or
 * label (want_ndims 1) file. */
static int load_file(const char *path, int want_ndims, int rows, int cols, int classes,
                     uint8_t **data, int *count, char *err, size_t err_len)
{
    *data = NULL;
    *count = 0;
    source s;
    idx_header h;
    if (open_checked(&s, path, want_ndims, rows, cols, &h, err, err_len) ||
        read_data(&s, &h, 0, data, err, err_len))
        return -1;
    if (want_ndims == 1 && check_labels(*data, h.count, path, classes, err, err_len)) {
        free(*data);
        *data = NULL;
        return -1;
    }
    *count = h.count;
    return 0;
}

int idx_load_images(const char *path, int rows, int cols, uint8_t **pixels, int *count,
                    char *err, size_t err_len)
{
    return load_file(path, 3, rows, cols, 0, pixels, count, err, err_len);
}

int idx_load_labels(const char *path, int classes, uint8_t **labels, int *count,
                    char *err, size_t err_len)
{
    return load_file(path, 1, 0, 0, classes, labels, count, err, err_len);
}

int idx_find(const char *dir, const char *split, const char *kind, char *path,
             size_t path_len, char *unread, size_t unread_len, char *err, size_t err_len)
{
    const char *forms[] = {"%s/%s-%s-idx%d-ubyte", "%s/%s-%s-idx%d-ubyte.gz",
                           "%s/%s-%s.idx%d-ubyte", "%s/%s-%s.idx%d-ubyte.gz"};
    const int n = strcmp(kind, "images") == 0 ? 3 : 1;
    const size_t n_forms = sizeof forms / sizeof forms[0];
    struct stat st;
    if (unread && unread_len)
        unread[0] = 0;
    for (size_t i = 0; i < n_forms; i++) {
        int w = snprintf(path, path_len, forms[i], dir, split, kind, n);
        if (w < 0 || (size_t)w >= path_len) {
            errmsg_set(err, err_len, dir, "path is too long");
            return -1;
        }
        if (stat(path, &st) != 0 && errno == ENOENT)
            continue;
        /* exists (or cannot be looked at: said on open); name any later
         * spelling that is present too, as it is not read */
        for (size_t j = i + 1; unread && j < n_forms; j++) {
            char other[4096];
            snprintf(other, sizeof other, forms[j], dir, split, kind, n);
            if (stat(other, &st) == 0 || errno != ENOENT) {
                snprintf(unread, unread_len, "%s", other);
                break;
            }
        }
        return 0;
    }
    snprintf(path, path_len, "%s/%s-%s-idx%d-ubyte", dir, split, kind, n);
    errmsg_set(err, err_len, path, "no such file (nor .gz, nor the %s-%s.idx%d-ubyte spelling); "
         "pass --data DIR, or install Debian's dataset-fashion-mnist for %s/",
         split, kind, n, IDX_DEFAULT_DIR);
    return -1;
}

void idx_describe_files(const char *dir, char *used, size_t used_len, char *unread,
                        size_t unread_len)
{
    static const char *const files[4][2] = {
        {"train", "images"}, {"train", "labels"}, {"t10k", "images"}, {"t10k", "labels"}};
    size_t u = 0, n = 0;
    used[0] = unread[0] = 0;
    for (int i = 0; i < 4; i++) {
        char path[4096], other[4096], err[16];
        if (idx_find(dir, files[i][0], files[i][1], path, sizeof path, other, sizeof other, err,
                     sizeof err) != 0)
            continue;
        if (u < used_len)
            u += (size_t)snprintf(used + u, used_len - u, "%s%s", u ? ", " : "", path);
        if (other[0] && n < unread_len)
            n += (size_t)snprintf(unread + n, unread_len - n, "%s%s (read %s instead)",
                                  n ? "; " : "", other, path);
    }
}

void dataset_free(dataset *d)
{
    if (!d)
        return;
    free((void *)d->images);
    free((void *)d->labels);
    memset(d, 0, sizeof *d);
}

/* The split's images, keeping the first `keep` (0: all), and its labels.
 * Both headers are read first: a label count that is not the image count
 * is refused before either file's data is read or allocated. */
static int load_split(const char *dir, const char *split, int classes, int rows, int cols,
                      int keep, dataset *out, char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    if (classes < 1 || classes > 256 || rows < 1 || cols < 1) {
        errmsg_set(err, err_len, dir, "bad request: %d classes, %dx%d images", classes, rows, cols);
        return -1;
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT)
            errmsg_set(err, err_len, dir, "no such directory; pass --data DIR, or install Debian's "
                 "dataset-fashion-mnist for %s/", IDX_DEFAULT_DIR);
        else
            errmsg_set(err, err_len, dir, "cannot look at the data directory: %s", strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        errmsg_set(err, err_len, dir, "is not a directory; --data expects the directory holding "
             "the IDX files");
        return -1;
    }
    char ipath[4096], lpath[4096];
    if (idx_find(dir, split, "images", ipath, sizeof ipath, NULL, 0, err, err_len) ||
        idx_find(dir, split, "labels", lpath, sizeof lpath, NULL, 0, err, err_len))
        return -1;
    source is, ls;
    idx_header ih, lh;
    if (open_checked(&is, ipath, 3, rows, cols, &ih, err, err_len))
        return -1;
    if (open_checked(&ls, lpath, 1, 0, 0, &lh, err, err_len)) {
        source_close(&is);
        return -1;
    }
    if (ih.count != lh.count) {
        errmsg_set(err, err_len, lpath, "holds %d labels but %s holds %d images", lh.count, ipath,
             ih.count);
        source_close(&is);
        source_close(&ls);
        return -1;
    }
    uint8_t *images = NULL, *labels = NULL;
    if (read_data(&is, &ih, keep, &images, err, err_len)) {
        source_close(&ls);
        return -1;
    }
    /* every label is checked, the few bytes of those not kept too */
    if (read_data(&ls, &lh, 0, &labels, err, err_len) ||
        check_labels(labels, lh.count, lpath, classes, err, err_len)) {
        free(images);
        free(labels);
        return -1;
    }
    out->count = keep > 0 && keep < ih.count ? keep : ih.count;
    out->rows = rows;
    out->cols = cols;
    out->images = images;
    out->labels = labels;
    return 0;
}

int idx_load_split(const char *dir, const char *split, int classes, int rows, int cols,
                   dataset *out, char *err, size_t err_len)
{
    return load_split(dir, split, classes, rows, cols, 0, out, err, err_len);
}

int idx_load_kept(const char *dir, int classes, int rows, int cols, int train_keep,
                  int test_keep, dataset *train, dataset *test, char *err, size_t err_len)
{
    memset(test, 0, sizeof *test);
    if (load_split(dir, "train", classes, rows, cols, train_keep, train, err, err_len))
        return -1;
    if (load_split(dir, "t10k", classes, rows, cols, test_keep, test, err, err_len)) {
        dataset_free(train);
        return -1;
    }
    return 0;
}

int idx_load(const char *dir, int classes, int rows, int cols, dataset *train,
             dataset *test, char *err, size_t err_len)
{
    return idx_load_kept(dir, classes, rows, cols, 0, 0, train, test, err, err_len);
}
