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
#include "harness/tools/history_file.h"

#define DEFAULT_HISTORY "results/history.csv"

/* The columns of history.csv, each copied from a column of summary.csv
 * except run (the run directory's name). The identity columns tell a row
 * apart: the same run's configuration twice. */
typedef struct history_column {
    const char *name;
    column_field from;
    int is_run, identity;
    const char *missing; /* written when the summary's cell is empty or absent */
} history_column;

static const history_column history_columns[] = {
    {"commit", .from = IN_SYSTEM(git_commit), .missing = "unknown"},
    {"date", .from = IN_SYSTEM(date), .identity = 1},
    {"backend", .from = IN_SUMMARY(key.backend), .identity = 1},
    {"workload", .from = IN_SUMMARY(key.workload), .identity = 1},
    {"precision", .from = IN_SUMMARY(key.precision), .identity = 1},
    {"batch_size", .from = IN_SUMMARY(key.batch_size), .identity = 1},
    {"threads", .from = IN_SUMMARY(key.threads), .identity = 1},
    {"devices", .from = IN_SUMMARY(key.devices), .identity = 1},
    /* runs from before data parallelism had one replica in one process */
    {"replicas", .from = IN_SUMMARY(key.replicas), .identity = 1, .missing = "1"},
    {"ranks", .from = IN_SUMMARY(key.ranks), .identity = 1, .missing = "1"},
    {"epochs", .from = IN_SUMMARY(epochs)},
    {"images_per_epoch", .from = IN_SUMMARY(images_per_epoch)},
    {"images_per_second", .from = IN_SUMMARY(images_per_second)},
    {"speedup_vs_naive", .from = IN_SUMMARY(speedup_vs_naive)},
    {"final_test_accuracy", .from = IN_SUMMARY(final_test_accuracy)},
    {"final_train_loss", .from = IN_SUMMARY(final_train_loss)},
    {"cpu_model", .from = IN_SYSTEM(cpu_model)},
    {"host", .from = IN_SYSTEM(host), .identity = 1},
    {"run", .is_run = 1},
};
enum { HISTORY_COLUMNS = sizeof history_columns / sizeof *history_columns };

/* Without these a history row means nothing. */
static const column_field required_columns[] = {
    IN_SUMMARY(key.backend), IN_SUMMARY(key.workload), IN_SUMMARY(key.precision),
    IN_SUMMARY(key.batch_size), IN_SUMMARY(key.threads), IN_SUMMARY(key.devices),
    IN_SUMMARY(status), IN_SUMMARY(images_per_second), IN_SUMMARY(final_test_accuracy),
    IN_SUMMARY(final_train_loss),
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
static void history_values(const result_table *s, int i, const char *run, const char **values)
{
    for (int c = 0; c < HISTORY_COLUMNS; c++) {
        const history_column *h = &history_columns[c];
        values[c] = h->is_run ? run : result_text(s, i, column_of(s->cols, h->from));
        if (h->missing && !*values[c])
            values[c] = h->missing;
    }
}

static int already_recorded(const csv_table *h, const char **values)
{
    for (int r = 0; r < h->n_rows; r++) {
        int same = 1;
        for (int c = 0; c < HISTORY_COLUMNS && same; c++)
            same = !history_columns[c].identity || !strcmp(h->rows[r][c], values[c]);
        if (same)
            return 1;
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

    result_table s;
    history_file h = {0};
    int rc = 2, not_ok = 0;
    const column *missing = NULL;
    if (result_table_read(&s, summary_columns, summary_path, err, sizeof err) != 0) {
        fprintf(stderr, "bench history: %s\n", err);
        goto done;
    }
    missing = result_table_missing(&s, required_columns,
                                   (int)(sizeof required_columns / sizeof *required_columns));
    if (missing) {
        fprintf(stderr, "bench history: %s: no column '%s' in the header\n", summary_path,
                missing->name);
        goto done;
    }
    /* every row's status and numbers are checked before anything is
     * appended, by the check compare makes */
    if (result_table_check(&s, err, sizeof err) != 0) {
        fprintf(stderr, "bench history: %s\n", err);
        goto done;
    }
    if (is_special_file(file)) { /* appending to a FIFO would wait for a reader */
        fprintf(stderr, "bench history: %s is not a regular file (a FIFO, device or socket)\n",
                file);
        goto done;
    }
    const char *names[HISTORY_COLUMNS], *values[HISTORY_COLUMNS];
    for (int c = 0; c < HISTORY_COLUMNS; c++)
        names[c] = history_columns[c].name;
    if (history_file_open(&h, file, names, HISTORY_COLUMNS, "history", "--file") != 0)
        goto done;
    const column *status = SUMMARY_COLUMN(status);
    for (int i = 0; i < s.csv.n_rows; i++) {
        run_status st;
        if (status_parse(result_text(&s, i, status), &st) != 0 || st != STATUS_OK) {
            not_ok++;
            continue;
        }
        history_values(&s, i, run, values);
        if (already_recorded(&h.known, values))
            h.already_there++;
        else
            history_file_append(&h, values, HISTORY_COLUMNS);
    }
    rc = 0;
done:;
    char note[96] = "";
    if (not_ok)
        snprintf(note, sizeof note, ", %d not ok (failed or skipped) left out", not_ok);
    rc = history_file_close(&h, "row", run, note) || rc ? 2 : 0;
    result_table_free(&s);
    return counts_rc > rc ? counts_rc : rc;
}
