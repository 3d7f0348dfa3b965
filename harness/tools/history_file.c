#include "harness/tools/history_file.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/formats/fileio.h"

static void print_names(FILE *f, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%s", i ? "," : "", names[i]);
}

int history_file_open(history_file *h, const char *path, const char *const *names, int n,
                      const char *what, const char *flag)
{
    memset(h, 0, sizeof *h);
    h->path = path;
    struct stat st;
    int have = stat(path, &st) == 0 && st.st_size > 0;
    if (have) {
        char err[2 * 4096];
        if (csv_read(path, &h->known, err, sizeof err) != 0) {
            fprintf(stderr, "bench history: %s\n", err);
            return 2;
        }
        int same = h->known.n_cols == n;
        for (int i = 0; same && i < n; i++)
            same = !strcmp(h->known.header[i], names[i]);
        if (!same) {
            fprintf(stderr, "bench history: %s:1: not the %s header (", path, what);
            print_names(stderr, names, n);
            fprintf(stderr, "); move it aside or pick another %s\n", flag);
            return 2;
        }
    }
    h->out = fopen(path, "a");
    if (!h->out) {
        fprintf(stderr, "bench history: cannot append to %s: %s\n", path, strerror(errno));
        return 2;
    }
    if (!have) {
        print_names(h->out, names, n);
        fputc('\n', h->out);
    } else if (!file_ends_with_newline(path)) {
        fputc('\n', h->out); /* a file edited by hand may lack its last newline */
    }
    return 0;
}

void history_file_append(history_file *h, const char *const *values, int n)
{
    for (int i = 0; i < n; i++) {
        if (i)
            fputc(',', h->out);
        csv_field(h->out, values[i]);
    }
    fputc('\n', h->out);
    h->added++;
}

int history_file_close(history_file *h, const char *rows, const char *run, const char *note)
{
    int bad = h->out && fclose(h->out) != 0;
    int opened = h->out != NULL;
    h->out = NULL;
    csv_free(&h->known);
    if (!opened)
        return 2;
    if (bad) {
        fprintf(stderr, "bench history: cannot write %s: %s\n", h->path, strerror(errno));
        return 2;
    }
    printf("history: %d %s%s of %s appended to %s", h->added, rows, h->added == 1 ? "" : "s", run,
           h->path);
    if (h->already_there)
        printf(", %d already there", h->already_there);
    printf("%s\n", note ? note : "");
    return 0;
}
