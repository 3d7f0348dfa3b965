/* What the report tests read the program's output with: a small CSV
 * reader and JSON checker of their own (so the program's readers are not
 * used to check the program's writers), a whole-file reader and a
 * comparison of doubles. For tests/test_report.c and test_report_runs.c. */
#ifndef LB_TESTS_REPORT_CHECKS_H
#define LB_TESTS_REPORT_CHECKS_H

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka 1.1's assert_float_equal compares floats; these are doubles. */
#define assert_close(a, b, tol)                                                                  \
    do {                                                                                         \
        double a_ = (a), b_ = (b);                                                               \
        if (!(fabs(a_ - b_) <= (tol)))                                                           \
            fail_msg("%s = %.12g, expected %.12g (within %g)", #a, a_, b_, (double)(tol));       \
    } while (0)


static inline char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    if (text && fread(text, 1, (size_t)n, f) != (size_t)n) {
        free(text);
        text = NULL;
    }
    if (text)
        text[n] = 0;
    fclose(f);
    return text;
}

/* ---- a small CSV reader (RFC 4180: quoted fields, "" inside quotes) ---- */

typedef struct table {
    int n_cols, n_rows;
    char *cells[512][64]; /* [row][col]; row 0 is the header */
} table;

static inline void table_free(table *t)
{
    for (int r = 0; r <= t->n_rows; r++)
        for (int c = 0; c < t->n_cols; c++)
            free(t->cells[r][c]);
    free(t);
}

/* NULL when the file is missing or a row's width differs from the header. */
static inline table *read_csv(const char *path)
{
    char *text = slurp(path);
    if (!text)
        return NULL;
    table *t = calloc(1, sizeof *t);
    const char *p = text;
    int row = 0, ok = 1;
    while (*p && ok && row < 512) {
        int col = 0;
        for (;;) {
            char field[1024];
            size_t n = 0;
            if (*p == '"') {
                for (p++; *p && !(*p == '"' && p[1] != '"'); p++) {
                    if (*p == '"')
                        p++;
                    if (n + 1 < sizeof field)
                        field[n++] = *p;
                }
                if (*p == '"')
                    p++;
            } else {
                while (*p && *p != ',' && *p != '\n')
                    if (n + 1 < sizeof field)
                        field[n++] = *p++;
                    else
                        p++;
            }
            field[n] = 0;
            if (col < 64)
                t->cells[row][col] = strdup(field);
            col++;
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p == '\n')
                p++;
            break;
        }
        if (row == 0)
            t->n_cols = col;
        else if (col != t->n_cols)
            ok = 0;
        row++;
    }
    free(text);
    t->n_rows = row - 1;
    if (!ok || t->n_cols > 64) {
        t->n_cols = t->n_cols > 64 ? 64 : t->n_cols;
        table_free(t);
        return NULL;
    }
    return t;
}

static inline int col_of(const table *t, const char *name)
{
    for (int c = 0; c < t->n_cols; c++)
        if (strcmp(t->cells[0][c], name) == 0)
            return c;
    return -1;
}

/* Data row r (1-based), column by name; fails the test when absent. */
static inline const char *cell(const table *t, int r, const char *name)
{
    int c = col_of(t, name);
    if (c < 0)
        fail_msg("no column %s", name);
    return t->cells[r][c];
}

static inline double num(const table *t, int r, const char *name) { return atof(cell(t, r, name)); }

/* ---- a small JSON checker: syntax, and the top-level object's keys ---- */

typedef struct json_cursor {
    const char *p;
    int depth;
} json_cursor;

static inline void ws(json_cursor *j)
{
    while (isspace((unsigned char)*j->p))
        j->p++;
}

static inline int json_value(json_cursor *j, char keys[][64], int max_keys, int *n_keys);

static inline int json_str(json_cursor *j, char *out, size_t len)
{
    size_t n = 0;
    if (*j->p != '"')
        return -1;
    for (j->p++; *j->p != '"'; j->p++) {
        if (!*j->p || (unsigned char)*j->p < 0x20)
            return -1;
        if (*j->p == '\\') {
            j->p++;
            if (*j->p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!isxdigit((unsigned char)j->p[i]))
                        return -1;
                j->p += 4;
            } else if (!strchr("\"\\/bfnrt", *j->p)) {
                return -1;
            }
        }
        if (out && n + 1 < len)
            out[n++] = *j->p;
    }
    if (out)
        out[n] = 0;
    j->p++;
    return 0;
}

static inline int json_value(json_cursor *j, char keys[][64], int max_keys, int *n_keys)
{
    ws(j);
    if (*j->p == '{' || *j->p == '[') {
        char close = *j->p == '{' ? '}' : ']';
        int object = close == '}';
        j->p++;
        j->depth++;
        ws(j);
        if (*j->p == close) {
            j->p++;
            j->depth--;
            return 0;
        }
        for (;;) {
            ws(j);
            if (object) {
                char key[64];
                if (json_str(j, key, sizeof key))
                    return -1;
                if (j->depth == 1 && keys && *n_keys < max_keys)
                    snprintf(keys[(*n_keys)++], 64, "%s", key);
                ws(j);
                if (*j->p++ != ':')
                    return -1;
            }
            if (json_value(j, keys, max_keys, n_keys))
                return -1;
            ws(j);
            if (*j->p == ',') {
                j->p++;
                continue;
            }
            if (*j->p++ != close)
                return -1;
            j->depth--;
            return 0;
        }
    }
    if (*j->p == '"')
        return json_str(j, NULL, 0);
    for (const char *lit = "true\0false\0null\0"; *lit; lit += strlen(lit) + 1)
        if (strncmp(j->p, lit, strlen(lit)) == 0) {
            j->p += strlen(lit);
            return 0;
        }
    char *end;
    strtod(j->p, &end);
    if (end == j->p || !(isdigit((unsigned char)*j->p) || *j->p == '-'))
        return -1; /* also refuses nan and inf */
    j->p = end;
    return 0;
}

static inline int json_valid(const char *text, char keys[][64], int max_keys, int *n_keys)
{
    json_cursor j = {text, 0};
    *n_keys = 0;
    if (json_value(&j, keys, max_keys, n_keys))
        return -1;
    ws(&j);
    return *j.p ? -1 : 0;
}

#endif
