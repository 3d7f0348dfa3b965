/* `./bench history RUN`: one row per ok configuration of the run, appended
 * to results/history.csv (header written once). Rows already there (same
 * run date, host and configuration) are not added twice, so appending the
 * same run again is harmless. */
#include "harness/tools/history.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/formats/csv.h"
#include "harness/formats/fileio.h"
#include "harness/run/columns.h"
#include "harness/run/config.h"
#include "harness/run/options.h"
#include "harness/run/status.h"
#include "harness/tools/count.h"

#define DEFAULT_HISTORY "results/history.csv"

/* History columns, each taken from the summary column of the same name
 * except commit (git_commit) and run (the run directory's name). */
static const char *const history_columns[] = {
    "commit", "date", "backend", "workload", "precision", "batch_size", "threads", "devices",
    "replicas", "ranks", "epochs", "images_per_epoch", "images_per_second", "speedup_vs_naive",
    "final_test_accuracy", "final_train_loss", "cpu_model", "host", "run", NULL,
};

/* Without these a history row means nothing. */
static const char *const required_columns[] = {
    "backend", "workload", "precision", "batch_size", "threads", "devices", "status",
    "images_per_second", "final_test_accuracy", "final_train_loss", NULL,
};

/* Columns that identify a row: the same run's configuration twice. */
static const char *const identity_columns[] = {
    "date", "host", "backend", "workload", "precision", "batch_size", "threads", "devices",
    "replicas", "ranks", NULL,
};

static void usage(FILE *f)
{
    fprintf(f,
        "usage: ./bench history [--file CSV] [--counts-file CSV] RUN\n"
        "\n"
        "Appends the ok rows of RUN (a run directory or its summary.csv) to the\n"
        "history, " DEFAULT_HISTORY " by default: commit, date, configuration,\n"
        "images/s, speedup over naive, final accuracy and loss, CPU, host and run.\n"
        "The header is written once; rows already recorded are not added again.\n"
        "Draw it with:\n"
        "  gnuplot -e \"file='" DEFAULT_HISTORY "'; out='history.png'\" plots/history.gp\n"
        "\n"
        "When RUN holds a counts.csv (./bench count), its instructions per image\n"
        "go to the count history, " COUNT_HISTORY " by default; draw them\n"
        "with counts=1 in the gnuplot line above.\n"
        "\n"
        "  --file CSV          the history file to append to\n"
        "  --counts-file CSV   the count history file to append to\n"
        "  --help              this text\n");
}

static int history_column_index(const char *name)
{
    for (int i = 0; history_columns[i]; i++)
        if (!strcmp(history_columns[i], name))
            return i;
    return -1;
}

static const char *summary_name_of(const char *history_name)
{
    return !strcmp(history_name, "commit") ? "git_commit" : history_name;
}

/* The run directory's last path component, for the run column. */
static void run_name(const char *arg, int is_dir, char *out, size_t len)
{
    char buf[PATH_LEN];
    snprintf(buf, sizeof buf, "%s", arg);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = 0;
    if (!is_dir) { /* .../RUN/summary.csv */
        char *slash = strrchr(buf, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(buf, sizeof buf, ".");
    }
    const char *base = strrchr(buf, '/');
    snprintf(out, len, "%s", base ? base + 1 : buf);
}

/* Fills values[] (one per history column) for summary row i. */
static void history_values(const csv_table *s, int i, const char *run, const char **values)
{
    for (int c = 0; history_columns[c]; c++) {
        if (!strcmp(history_columns[c], "run")) {
            values[c] = run;
            continue;
        }
        int col = csv_column(s, summary_name_of(history_columns[c]));
        values[c] = col >= 0 ? s->rows[i][col] : "";
        if (!strcmp(history_columns[c], "commit") && !*values[c])
            values[c] = "unknown";
        /* runs from before data parallelism had one replica in one process */
        if ((!strcmp(history_columns[c], "replicas") || !strcmp(history_columns[c], "ranks")) &&
            col < 0)
            values[c] = "1";
    }
}

static int already_recorded(const csv_table *h, const char **values)
{
    for (int r = 0; r < h->n_rows; r++) {
        int same = 1;
        for (int k = 0; identity_columns[k] && same; k++) {
            int c = history_column_index(identity_columns[k]);
            same = !strcmp(h->rows[r][c], values[c]);
        }
        if (same)
            return 1;
    }
    return 0;
}

static int check_history_header(const csv_table *h, const char *path)
{
    int n = 0;
    while (history_columns[n])
        n++;
    int same = h->n_cols == n;
    for (int i = 0; same && i < n; i++)
        same = !strcmp(h->header[i], history_columns[i]);
    if (!same) {
        fprintf(stderr,
                "bench history: %s:1: not the history header (",
                path);
        for (int i = 0; i < n; i++)
            fprintf(stderr, "%s%s", i ? "," : "", history_columns[i]);
        fprintf(stderr, "); move it aside or pick another --file\n");
        return -1;
    }
    return 0;
}

int history_main(int argc, char **argv)
{
    const char *file = DEFAULT_HISTORY, *counts_file = COUNT_HISTORY;
    enum { O_FILE = 256, O_COUNTS, O_HELP };
    static const struct option options[] = {
        {"file", required_argument, 0, O_FILE},
        {"counts-file", required_argument, 0, O_COUNTS},
        {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0},
    };
    options_begin();
    int c;
    while ((c = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        switch (c) {
        case O_FILE: file = optarg; break;
        case O_COUNTS: counts_file = optarg; break;
        case O_HELP: usage(stdout); return 0;
        default: return option_error("history", options, c, argv);
        }
    }
    if (argc - optind != 1) {
        fprintf(stderr, "bench history: expects one run directory (see ./bench history --help)\n");
        return 2;
    }
    const char *arg = argv[optind];
    struct stat st;
    if (strlen(arg) >= PATH_LEN - 16 || stat(arg, &st) != 0) {
        fprintf(stderr, "bench history: cannot open %s: %s\n", arg,
                strlen(arg) >= PATH_LEN - 16 ? "path too long" : strerror(errno));
        return 2;
    }
    int is_dir = S_ISDIR(st.st_mode);
    char summary_path[PATH_LEN], run[PATH_LEN], err[2 * PATH_LEN];
    snprintf(summary_path, sizeof summary_path, is_dir ? "%s/summary.csv" : "%s", arg);
    run_name(arg, is_dir, run, sizeof run);
    /* instruction counts go to their own history, beside the timings */
    char counts_path[PATH_LEN + 32];
    int counts_rc = -1;
    if (count_path(arg, counts_path, sizeof counts_path)) {
        counts_rc = count_history(counts_path, counts_file, run);
        if (count_only(arg))
            return counts_rc;
    }

    csv_table s, h = {0};
    if (csv_read(summary_path, &s, err, sizeof err) != 0) {
        fprintf(stderr, "bench history: %s\n", err);
        csv_free(&s);
        return 2;
    }
    for (int i = 0; required_columns[i]; i++)
        if (csv_column(&s, required_columns[i]) < 0) {
            fprintf(stderr, "bench history: %s: no column '%s' in the header\n", summary_path,
                    required_columns[i]);
            csv_free(&s);
            return 2;
        }
    /* every row's status and numbers are checked before anything is
     * appended, by the check compare makes */
    if (columns_check_csv(summary_columns, &s, summary_path, err, sizeof err) != 0) {
        fprintf(stderr, "bench history: %s\n", err);
        csv_free(&s);
        return 2;
    }
    if (is_special_file(file)) { /* appending to a FIFO would wait for a reader */
        fprintf(stderr, "bench history: %s is not a regular file (a FIFO, device or socket)\n",
                file);
        csv_free(&s);
        return 2;
    }
    int have_history = stat(file, &st) == 0 && st.st_size > 0;
    if (have_history) {
        int bad = csv_read(file, &h, err, sizeof err) != 0;
        if (bad)
            fprintf(stderr, "bench history: %s\n", err);
        else
            bad = check_history_header(&h, file) != 0;
        if (bad) {
            csv_free(&s);
            csv_free(&h);
            return 2;
        }
    }

    FILE *out = fopen(file, "a");
    if (!out) {
        fprintf(stderr, "bench history: cannot append to %s: %s\n", file, strerror(errno));
        csv_free(&s);
        csv_free(&h);
        return 2;
    }
    if (!have_history) {
        for (int i = 0; history_columns[i]; i++)
            fprintf(out, "%s%s", i ? "," : "", history_columns[i]);
        fputc('\n', out);
    } else if (!file_ends_with_newline(file)) {
        fputc('\n', out); /* a file edited by hand may lack its last newline */
    }
    int added = 0, known = 0, not_ok = 0;
    const int status = csv_column(&s, "status");
    const char *values[sizeof history_columns / sizeof history_columns[0]];
    for (int i = 0; i < s.n_rows; i++) {
        run_status st;
        if (status_parse(s.rows[i][status], &st) != 0 || st != STATUS_OK) {
            not_ok++;
            continue;
        }
        history_values(&s, i, run, values);
        if (have_history && already_recorded(&h, values)) {
            known++;
            continue;
        }
        for (int c = 0; history_columns[c]; c++) {
            if (c)
                fputc(',', out);
            csv_field(out, values[c]);
        }
        fputc('\n', out);
        added++;
    }
    int rc = 0;
    if (fclose(out) != 0) {
        fprintf(stderr, "bench history: cannot write %s: %s\n", file, strerror(errno));
        rc = 2;
    } else {
        printf("history: %d row%s of %s appended to %s", added, added == 1 ? "" : "s", run, file);
        if (known)
            printf(", %d already there", known);
        if (not_ok)
            printf(", %d not ok (failed or skipped) left out", not_ok);
        printf("\n");
    }
    csv_free(&s);
    csv_free(&h);
    return counts_rc > rc ? counts_rc : rc;
}
