#include "harness/formats/paramfile.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errmsg.h"
#include "harness/formats/fileio.h"


static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
    return p + 4;
}

static float get_float(const uint8_t *p)
{
    uint32_t u = get32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint8_t *put_float(uint8_t *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return put32(p, u);
}

/* One parameter tensor of the workload. */
typedef struct tensor {
    char name[64];
    size_t offset, count;
    int dims[4];
    int ndims;
} tensor;

static void tensor_get(const workload *w, int i, tensor *t)
{
    workload_tensor_info(w, i, t->name, sizeof t->name, &t->offset, &t->count, t->dims,
                         &t->ndims);
}

static void shape_str(char *buf, size_t len, const uint32_t *dims, uint32_t nd)
{
    size_t n = 0;
    buf[0] = 0;
    n += (size_t)snprintf(buf + n, len - n, "[");
    for (uint32_t i = 0; i < nd && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%u", i ? "," : "", dims[i]);
    if (n < len)
        snprintf(buf + n, len - n, "]");
}

/* A name from the file, made printable for a message. */
static void printable(char *out, size_t out_len, const uint8_t *s, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; i < n && j + 5 < out_len; i++) {
        if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' && s[i] != '\\')
            out[j++] = (char)s[i];
        else
            j += (size_t)snprintf(out + j, out_len - j, "\\x%02x", s[i]);
    }
    out[j] = 0;
}

size_t paramfile_size(const workload *w)
{
    size_t size = 16;
    int n = workload_tensor_count(w);
    for (int i = 0; i < n; i++) {
        tensor t;
        tensor_get(w, i, &t);
        size += 8 + strlen(t.name) + 4 * (size_t)t.ndims + 4 * t.count;
    }
    return size;
}

size_t paramfile_encode(const workload *w, const float *params, uint8_t *buf, size_t len,
                        const char *name, char *err, size_t err_len)
{
    size_t need = paramfile_size(w);
    if (len < need) {
        errmsg_set(err, err_len, name, "buffer of %zu bytes is too small, the file takes %zu", len,
             need);
        return 0;
    }
    uint8_t *p = buf;
    memcpy(p, PARAMFILE_MAGIC, 8);
    p += 8;
    p = put32(p, PARAMFILE_VERSION);
    int n = workload_tensor_count(w);
    p = put32(p, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        tensor t;
        tensor_get(w, i, &t);
        size_t l = strlen(t.name);
        p = put32(p, (uint32_t)l);
        memcpy(p, t.name, l);
        p += l;
        p = put32(p, (uint32_t)t.ndims);
        for (int d = 0; d < t.ndims; d++)
            p = put32(p, (uint32_t)t.dims[d]);
        for (size_t k = 0; k < t.count; k++) {
            float v = params[t.offset + k];
            if (!isfinite(v)) {
                errmsg_set(err, err_len, name, "refusing to save: tensor %s value %zu is %s", t.name,
                     k, isnan(v) ? "NaN" : (v > 0 ? "Inf" : "-Inf"));
                return 0;
            }
            p = put_float(p, v);
        }
    }
    return (size_t)(p - buf);
}

/* "name [a x b]" of the file's first tensor, as far as the bytes say. */
static void first_tensor_of_file(const uint8_t *buf, size_t len, char *out, size_t out_len)
{
    snprintf(out, out_len, "unreadable");
    if (len < 20)
        return;
    uint32_t l = get32(buf + 16);
    if (l == 0 || l > PARAMFILE_MAX_NAME || len - 20 < (size_t)l + 4)
        return;
    char name[PARAMFILE_MAX_NAME * 4 + 8], shape[128] = "of unreadable shape";
    printable(name, sizeof name, buf + 20, l);
    size_t p = 20 + l;
    uint32_t nd = get32(buf + p), dims[PARAMFILE_MAX_DIMS];
    p += 4;
    if (nd >= 1 && nd <= PARAMFILE_MAX_DIMS && (len - p) / 4 >= nd) {
        for (uint32_t d = 0; d < nd; d++)
            dims[d] = get32(buf + p + 4 * d);
        shape_str(shape, sizeof shape, dims, nd);
    }
    snprintf(out, out_len, "%s %s", name, shape);
}

static void first_tensor_of_workload(const workload *w, char *out, size_t out_len)
{
    tensor t;
    tensor_get(w, 0, &t);
    uint32_t dims[4];
    for (int d = 0; d < t.ndims && d < 4; d++)
        dims[d] = (uint32_t)t.dims[d];
    char shape[128];
    shape_str(shape, sizeof shape, dims, (uint32_t)t.ndims);
    snprintf(out, out_len, "%s %s", t.name, shape);
}

/* Validates buf against w; when params is not NULL, also copies the values. */
static int walk(const uint8_t *buf, size_t len, const char *name, const workload *w,
                float *params, char *err, size_t err_len)
{
    if (len == 0) {
        errmsg_set(err, err_len, name, "file is empty, expected a parameter file");
        return -1;
    }
    if (memcmp(buf, PARAMFILE_MAGIC, len < 8 ? len : 8) != 0) {
        errmsg_set(err, err_len, name, "bad magic: not a lenet-bench parameter file (expected "
             "\"%s\")", PARAMFILE_MAGIC);
        return -1;
    }
    if (len < 16) {
        errmsg_set(err, err_len, name, "file is truncated: %zu bytes, the header alone takes 16",
             len);
        return -1;
    }
    uint32_t version = get32(buf + 8);
    if (version != PARAMFILE_VERSION) {
        errmsg_set(err, err_len, name, "format version %u is not supported (this build reads "
             "version %u)", version, PARAMFILE_VERSION);
        return -1;
    }
    uint32_t count = get32(buf + 12);
    int n = workload_tensor_count(w);
    if (count != (uint32_t)n) {
        char file_first[PARAMFILE_MAX_NAME * 4 + 160], want_first[256];
        first_tensor_of_file(buf, len, file_first, sizeof file_first);
        first_tensor_of_workload(w, want_first, sizeof want_first);
        errmsg_set(err, err_len, name, "holds %u tensors, the first %s; workload %s has %d, the "
             "first %s: it was saved for a different workload", count, file_first, w->name, n,
             want_first);
        return -1;
    }
    size_t p = 16;
    for (int i = 0; i < n; i++) {
        tensor t;
        tensor_get(w, i, &t);
        if (len - p < 4) {
            errmsg_set(err, err_len, name, "file is truncated at tensor %d (%s)", i, t.name);
            return -1;
        }
        uint32_t l = get32(buf + p);
        p += 4;
        if (l == 0 || l > PARAMFILE_MAX_NAME) {
            errmsg_set(err, err_len, name, "tensor %d: name length %u is outside 1..%u (corrupt "
                 "file)", i, l, PARAMFILE_MAX_NAME);
            return -1;
        }
        if (len - p < l) {
            errmsg_set(err, err_len, name, "file is truncated in the name of tensor %d (%s)", i,
                 t.name);
            return -1;
        }
        if (l != strlen(t.name) || memcmp(buf + p, t.name, l) != 0) {
            char got[PARAMFILE_MAX_NAME * 4 + 8];
            printable(got, sizeof got, buf + p, l);
            errmsg_set(err, err_len, name, "tensor %d is \"%s\", workload %s expects \"%s\": it "
                 "was saved for a different workload", i, got, w->name, t.name);
            return -1;
        }
        p += l;
        if (len - p < 4) {
            errmsg_set(err, err_len, name, "file is truncated in the shape of tensor %s", t.name);
            return -1;
        }
        uint32_t nd = get32(buf + p);
        p += 4;
        if (nd == 0 || nd > PARAMFILE_MAX_DIMS) {
            errmsg_set(err, err_len, name, "tensor %s: %u dimensions is outside 1..%u (corrupt "
                 "file)", t.name, nd, PARAMFILE_MAX_DIMS);
            return -1;
        }
        if (len - p < 4 * (size_t)nd) {
            errmsg_set(err, err_len, name, "file is truncated in the shape of tensor %s", t.name);
            return -1;
        }
        uint32_t dims[PARAMFILE_MAX_DIMS], want[4];
        int same = (int)nd == t.ndims;
        for (uint32_t d = 0; d < nd; d++) {
            dims[d] = get32(buf + p + 4 * d);
            if (same && dims[d] != (uint32_t)t.dims[d])
                same = 0;
        }
        p += 4 * (size_t)nd;
        if (!same) {
            char a[128], b[128];
            for (int d = 0; d < t.ndims; d++)
                want[d] = (uint32_t)t.dims[d];
            shape_str(a, sizeof a, dims, nd);
            shape_str(b, sizeof b, want, (uint32_t)t.ndims);
            errmsg_set(err, err_len, name, "tensor %s has shape %s in the file, workload %s "
                 "expects %s: it was saved for a different workload", t.name, a, w->name, b);
            return -1;
        }
        /* The shape equals the workload's, so count is the workload's own. */
        if ((len - p) / 4 < t.count) {
            errmsg_set(err, err_len, name, "file is truncated in the values of tensor %s (%zu of "
                 "%zu bytes)", t.name, len - p, 4 * t.count);
            return -1;
        }
        for (size_t k = 0; k < t.count; k++) {
            float v = get_float(buf + p + 4 * k);
            if (!isfinite(v)) {
                errmsg_set(err, err_len, name, "tensor %s value %zu is %s", t.name, k,
                     isnan(v) ? "NaN" : (v > 0 ? "Inf" : "-Inf"));
                return -1;
            }
            if (params)
                params[t.offset + k] = v;
        }
        p += 4 * t.count;
    }
    if (p != len) {
        errmsg_set(err, err_len, name, "%zu trailing bytes after the last tensor", len - p);
        return -1;
    }
    return 0;
}

int paramfile_parse_named(const void *buf, size_t len, const char *name, const workload *w,
                          float *params, char *err, size_t err_len)
{
    if (walk(buf, len, name, w, NULL, err, err_len))
        return -1;
    return walk(buf, len, name, w, params, err, err_len);
}

int paramfile_parse(const void *buf, size_t len, const workload *w, float *params,
                    char *err, size_t err_len)
{
    return paramfile_parse_named(buf, len, "<param file>", w, params, err, err_len);
}

int paramfile_load(const char *path, const workload *w, float *params, char *err,
                   size_t err_len)
{
    FILE *f = open_input(path, "a parameter file", err, err_len);
    if (!f)
        return -1;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        errmsg_set(err, err_len, path, "cannot stat: %s", strerror(errno));
        fclose(f);
        return -1;
    }
    if ((unsigned long long)st.st_size > PARAMFILE_MAX_BYTES) {
        errmsg_set(err, err_len, path, "is %lld bytes, more than any parameter file (limit %zu; "
             "workload %s takes %zu)", (long long)st.st_size, PARAMFILE_MAX_BYTES, w->name,
             paramfile_size(w));
        fclose(f);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    uint8_t *buf = malloc(size + 1);
    if (!buf) {
        errmsg_set(err, err_len, path, "out of memory for %zu bytes", size);
        fclose(f);
        errno = ENOMEM; /* not the file's fault: the caller says so */
        return -1;
    }
    /* Read one byte more than stat said, to notice a file that grew. */
    size_t got = fread(buf, 1, size + 1, f);
    if (ferror(f)) {
        errmsg_set(err, err_len, path, "read error: %s", strerror(errno));
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    if (got != size) {
        errmsg_set(err, err_len, path, "changed size while being read");
        free(buf);
        return -1;
    }
    int rc = paramfile_parse_named(buf, size, path, w, params, err, err_len);
    free(buf);
    return rc;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0) {
            errno = EIO;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int paramfile_save(const char *path, const workload *w, const float *params, char *err,
                   size_t err_len)
{
    size_t size = paramfile_size(w);
    uint8_t *buf = malloc(size);
    if (!buf) {
        errmsg_set(err, err_len, path, "out of memory for %zu bytes", size);
        return -1;
    }
    if (paramfile_encode(w, params, buf, size, path, err, err_len) != size) {
        free(buf);
        return -1;
    }
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    if (!tmp) {
        errmsg_set(err, err_len, path, "out of memory");
        free(buf);
        return -1;
    }
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, tlen, "%s.tmp.%ld.%d", path, (long)getpid(), attempt);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        errmsg_set(err, err_len, path, "cannot create a temporary file beside it (%s): %s", tmp,
             strerror(errno));
        free(tmp);
        free(buf);
        return -1;
    }
    const char *step = "write failed";
    int rc = write_all(fd, buf, size);
    if (rc == 0) {
        step = "fsync failed";
        rc = fsync(fd);
        if (rc != 0 && (errno == EINVAL || errno == EROFS))
            rc = 0; /* a file system without fsync: nothing to flush */
    }
    int e = errno;
    if (close(fd) != 0 && rc == 0) {
        step = "close failed";
        rc = -1;
        e = errno;
    }
    if (rc == 0) {
        step = "rename failed";
        rc = rename(tmp, path);
        e = errno;
    }
    if (rc != 0) {
        errmsg_set(err, err_len, path, "%s: %s (nothing saved; any earlier file is unchanged)",
             step, strerror(e));
        unlink(tmp);
    }
    free(tmp);
    free(buf);
    return rc ? -1 : 0;
}
