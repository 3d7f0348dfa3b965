#include "harness/formats/csv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "harness/formats/fileio.h"

void csv_field(FILE *f, const char *s)
{
    if (!s)
        s = "";
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('"', f);
}

char *read_text_file(const char *path, size_t *len, char *err, size_t err_len)
{
    const char *problem;
    FILE *f = fopen_regular(path, &problem); /* a FIFO would block the read */
    if (!f) {
        snprintf(err, err_len, "cannot open %s: %s", path, problem);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap + 1);
    for (;;) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        cap *= 2;
        buf = xrealloc(buf, cap + 1);
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        snprintf(err, err_len, "cannot read %s: %s", path, strerror(errno));
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

static void push_pointer(void ***v, int *n, int *cap, void *p)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        *v = xrealloc(*v, sizeof(void *) * (size_t)*cap);
    }
    (*v)[(*n)++] = p;
}

int csv_read(const char *path, csv_table *t, char *err, size_t err_len)
{
    memset(t, 0, sizeof *t);
    size_t len;
    char *text = read_text_file(path, &len, err, err_len);
    if (!text)
        return -1;
    t->text = text;
    char *nul = memchr(text, 0, len);
    if (nul) {
        int line = 1;
        for (char *c = text; c < nul; c++)
            line += *c == '\n';
        snprintf(err, err_len, "%s:%d: a NUL byte: not a text CSV file", path, line);
        return -1;
    }

    char *p = text, *end = text + len;
    int line = 1, row_cap = 0, line_cap = 0;
    void **fields = NULL;
    int n_fields = 0, field_cap = 0;
    while (p < end) {
        int record_line = line;
        if (*p == '\n' || *p == '\r') { /* blank line */
            p += (*p == '\r' && p + 1 < end && p[1] == '\n') ? 2 : 1;
            line++;
            continue;
        }
        n_fields = 0;
        for (;;) {
            char *field = p, *w = p;
            if (p < end && *p == '"') {
                p++;
                for (;;) {
                    if (p >= end) {
                        snprintf(err, err_len, "%s:%d: a quoted field is never closed", path,
                                 record_line);
                        goto fail;
                    }
                    if (*p == '"') {
                        if (p + 1 < end && p[1] == '"') {
                            *w++ = '"';
                            p += 2;
                            continue;
                        }
                        p++;
                        break;
                    }
                    line += *p == '\n';
                    *w++ = *p++;
                }
                if (p < end && *p != ',' && *p != '\n' && *p != '\r') {
                    snprintf(err, err_len, "%s:%d: text after a closing quote", path, line);
                    goto fail;
                }
            } else {
                while (p < end && *p != ',' && *p != '\n' && *p != '\r') {
                    if (*p == '"') {
                        snprintf(err, err_len, "%s:%d: a double quote inside an unquoted field",
                                 path, line);
                        goto fail;
                    }
                    p++;
                }
                w = p;
            }
            /* Note the separator before the terminator may overwrite it. */
            int more = p < end && *p == ',';
            size_t skip = p >= end ? 0 : (*p == '\r' && p + 1 < end && p[1] == '\n') ? 2 : 1;
            *w = 0;
            p += skip;
            push_pointer(&fields, &n_fields, &field_cap, field);
            if (more)
                continue;
            line++;
            break;
        }
        if (!t->header) {
            t->n_cols = n_fields;
            t->header = xmalloc(sizeof(char *) * (size_t)n_fields);
            memcpy(t->header, fields, sizeof(char *) * (size_t)n_fields);
            continue;
        }
        if (n_fields != t->n_cols) {
            snprintf(err, err_len, "%s:%d: %d fields where the header has %d", path, record_line,
                     n_fields, t->n_cols);
            goto fail;
        }
        char **row = xmalloc(sizeof(char *) * (size_t)n_fields);
        memcpy(row, fields, sizeof(char *) * (size_t)n_fields);
        int n = t->n_rows;
        push_pointer((void ***)&t->rows, &n, &row_cap, row);
        if (n > line_cap) {
            t->lines = xrealloc(t->lines, sizeof(int) * (size_t)row_cap);
            line_cap = row_cap;
        }
        t->lines[t->n_rows++] = record_line;
    }
    free(fields);
    if (!t->header) {
        snprintf(err, err_len, "%s: empty file (no header line)", path);
        return -1;
    }
    return 0;
fail:
    free(fields);
    return -1;
}

int csv_column(const csv_table *t, const char *name)
{
    for (int i = 0; i < t->n_cols; i++)
        if (strcmp(t->header[i], name) == 0)
            return i;
    return -1;
}

void csv_free(csv_table *t)
{
    for (int i = 0; i < t->n_rows; i++)
        free(t->rows[i]);
    free(t->rows);
    free(t->lines);
    free(t->header);
    free(t->text);
    memset(t, 0, sizeof *t);
}
