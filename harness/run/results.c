#include "harness/run/results.h"

#include "harness/formats/idx.h"

#include <errno.h>
#include <stdio_ext.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness/run/columns.h"

/* Flushes and reports a failed write (a full disk shows up here). A row
 * that did not fit is cut off at row_start, so the file still ends on a
 * whole row. */
static int finish_row(FILE *f, const char *dir, const char *name, long row_start)
{
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "bench: cannot write %s/%s: %s\n", dir, name, strerror(errno));
        __fpurge(f);
        if (row_start >= 0 && ftruncate(fileno(f), row_start) == 0)
            fseek(f, row_start, SEEK_SET);
        return -1;
    }
    return 0;
}

static int make_run_dir(char *dir, const run_config *cfg, const sysinfo *sys, int *made,
                        char *err, size_t err_len)
{
    if (cfg->out_dir[0]) {
        snprintf(dir, PATH_LEN, "%s", cfg->out_dir);
        /* A given directory may exist only if empty of results. */
        *made = mkdir(dir, 0777) == 0;
        if (!*made && errno != EEXIST) {
            snprintf(err, err_len, "cannot create --out directory %s: %s", dir, strerror(errno));
            return -1;
        }
        struct stat st;
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            snprintf(err, err_len, "--out %s is not a directory", dir);
            return -1;
        }
        return 0;
    }
    if (mkdir("results", 0777) != 0 && errno != EEXIST) {
        snprintf(err, err_len, "cannot create results/: %s", strerror(errno));
        return -1;
    }
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    /* mkdir is atomic: a second run started in the same second gets -2. */
    for (int n = 1; n < 1000; n++) {
        if (n == 1)
            snprintf(dir, PATH_LEN, "results/%s-%s", stamp, sys->host);
        else
            snprintf(dir, PATH_LEN, "results/%s-%s-%d", stamp, sys->host, n);
        if (mkdir(dir, 0777) == 0) {
            *made = 1;
            return 0;
        }
        if (errno != EEXIST) {
            snprintf(err, err_len, "cannot create %s: %s", dir, strerror(errno));
            return -1;
        }
    }
    snprintf(err, err_len, "cannot find a free results directory name under results/");
    return -1;
}

FILE *results_file(results *r, const char *name)
{
    char path[PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/%s", r->dir, name);
    return fopen(path, "w");
}

/* Opens a CSV in the run directory exclusively: two runs never share one. */
static FILE *create_exclusive(results *r, const char *name, char *err, size_t err_len)
{
    char path[PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/%s", r->dir, name);
    FILE *f = fopen(path, "wx");
    if (!f)
        snprintf(err, err_len, "cannot create %s: %s%s", path, strerror(errno),
                 errno == EEXIST ? " (another run wrote here; pick a new --out)" : "");
    return f;
}

static int open_files(results *r, const run_config *cfg, char *err, size_t err_len);

/* Removes what a failed results_open made, so the same --out can be used
 * again once the cause is fixed; errno is kept for the exit status. */
static void discard_partial_run(results *r, int made_dir)
{
    int e = errno;
    static const char *const names[] = {"epochs.csv", "summary.csv", "system.json"};
    for (int i = 0; i < 3; i++)
        if (r->created & (1 << i)) {
            char path[PATH_LEN + 64];
            snprintf(path, sizeof path, "%s/%s", r->dir, names[i]);
            unlink(path);
        }
    if (made_dir)
        rmdir(r->dir);
    r->created = 0;
    errno = e;
}

int results_open(results *r, const run_config *cfg, char *err, size_t err_len)
{
    memset(r, 0, sizeof *r);
    sysinfo_collect(&r->sys);
    idx_describe_files(cfg->data_dir, r->sys.data_files, sizeof r->sys.data_files,
                       r->sys.data_files_not_read, sizeof r->sys.data_files_not_read);
    int made_dir = 0;
    if (make_run_dir(r->dir, cfg, &r->sys, &made_dir, err, err_len) != 0)
        return -1;
    if (open_files(r, cfg, err, err_len) != 0) {
        int e = errno;
        if (r->epochs)
            fclose(r->epochs);
        if (r->summary)
            fclose(r->summary);
        r->epochs = r->summary = NULL;
        errno = e;
        discard_partial_run(r, made_dir);
        return -1;
    }
    return 0;
}

int results_write_system(results *r, const run_config *cfg, char *err, size_t err_len)
{
    FILE *sys = results_file(r, "system.json");
    if (sys)
        r->created |= 4;
    if (!sys) {
        snprintf(err, err_len, "cannot write %s/system.json: %s", r->dir, strerror(errno));
        return -1;
    }
    sysinfo_write_json(sys, &r->sys, cfg->argc, cfg->argv);
    if (ferror(sys) + fclose(sys) != 0) {
        snprintf(err, err_len, "cannot write %s/system.json: %s", r->dir, strerror(errno));
        return -1;
    }
    return 0;
}

static int open_files(results *r, const run_config *cfg, char *err, size_t err_len)
{
    if (!(r->epochs = create_exclusive(r, "epochs.csv", err, err_len)))
        return -1;
    r->created |= 1;
    if (!(r->summary = create_exclusive(r, "summary.csv", err, err_len)))
        return -1;
    r->created |= 2;
    if (results_write_system(r, cfg, err, err_len) != 0)
        return -1;
    columns_csv_header(r->epochs, epoch_columns);
    columns_csv_header(r->summary, summary_columns);
    if (fflush(r->epochs) != 0 || ferror(r->epochs) || fflush(r->summary) != 0 ||
        ferror(r->summary)) {
        snprintf(err, err_len, "cannot write the CSV headers in %s: %s", r->dir, strerror(errno));
        return -1;
    }
    /* summary.csv is rewritten whole from here (results_write_summary) */
    FILE *summary = r->summary;
    r->summary = NULL;
    if (fclose(summary) != 0) {
        snprintf(err, err_len, "cannot write %s/summary.csv: %s", r->dir, strerror(errno));
        return -1;
    }
    return 0;
}

int results_epoch(results *r, const epoch_row *row)
{
    long start = ftell(r->epochs);
    columns_csv_row(r->epochs, epoch_columns, row, &r->sys);
    return finish_row(r->epochs, r->dir, "epochs.csv", start);
}

/* The header and rows into f; 0, or the errno of a failed write. */
static int put_summary(FILE *f, const summary_row *rows, int n, const sysinfo *sys)
{
    columns_csv_header(f, summary_columns);
    for (int i = 0; i < n; i++)
        columns_csv_row(f, summary_columns, &rows[i], sys);
    return fflush(f) != 0 || ferror(f) ? (errno ? errno : EIO) : 0;
}

/* No room for a second copy of the file beside it. */
static int out_of_room(int e) { return e == ENOSPC || e == EDQUOT || e == EFBIG; }

int results_write_summary(results *r, const summary_row *rows, int n)
{
    char path[PATH_LEN + 64], part[PATH_LEN + 96];
    snprintf(path, sizeof path, "%s/summary.csv", r->dir);
    snprintf(part, sizeof part, "%s/summary.csv.part-%ld", r->dir, (long)getpid());
    errno = 0;
    FILE *f = fopen(part, "w");
    int e = f ? put_summary(f, rows, n, &r->sys) : errno;
    if (f && fclose(f) != 0 && !e)
        e = errno;
    if (!e && rename(part, path) == 0)
        return 0;
    if (!e)
        e = errno;
    if (f)
        unlink(part);
    /* A full disk: rewritten in place, where its earlier rows already hold
     * their room; a crash while it is written could cut it short, where
     * refusing would lose the row that did not fit for certain. */
    if (out_of_room(e) && (f = fopen(path, "r+")) != NULL) {
        e = put_summary(f, rows, n, &r->sys);
        if (!e && ftruncate(fileno(f), ftell(f)) != 0)
            e = errno;
        if (fclose(f) != 0 && !e)
            e = errno;
        if (!e)
            return 0;
    }
    fprintf(stderr, "bench: cannot write %s: %s\n", path, strerror(e));
    errno = e;
    return -1;
}

int results_close(results *r)
{
    int rc = 0;
    if (r->epochs && fclose(r->epochs) != 0)
        rc = -1;
    if (r->summary && fclose(r->summary) != 0)
        rc = -1;
    r->epochs = r->summary = NULL;
    if (rc)
        fprintf(stderr, "bench: cannot finish writing the CSV files in %s: %s\n", r->dir,
                strerror(errno));
    return rc;
}
