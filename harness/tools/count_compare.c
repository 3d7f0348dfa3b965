/* Counts read back: `./bench compare` on two counts.csv files, and
 * `./bench history` appending one to the count history (see count.h). */
#include "harness/tools/count.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/formats/csv.h"
#include "harness/run/config.h"
#include "harness/run/options.h"
#include "harness/tools/count_run.h"
#include "harness/tools/history_file.h"

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int count_path(const char *arg, char *path, size_t len)
{
    size_t n = strlen(arg), suffix = strlen(COUNT_FILE);
    if (!is_dir(arg)) /* counts.csv, or a copy named like base-counts.csv */
        return n >= suffix && !strcmp(arg + n - suffix, COUNT_FILE) &&
               snprintf(path, len, "%s", arg) < (int)len;
    return snprintf(path, len, "%s/" COUNT_FILE, arg) < (int)len && access(path, F_OK) == 0;
}

int count_only(const char *arg)
{
    char path[PATH_LEN + 32];
    if (!count_path(arg, path, sizeof path))
        return 0;
    if (!is_dir(arg))
        return 1;
    snprintf(path, sizeof path, "%s/summary.csv", arg);
    return access(path, F_OK) != 0;
}

/* What must be the same for two counts to be comparable: the code counted
 * depends on the compiler and target, OpenBLAS's version and kernels, and
 * the CPU valgrind presents (glibc picks its string functions by it). */
static const char *const setting_columns[] = {
    "compiler", "build", "blas", "openblas_coretype", "cpu_seen", "valgrind", NULL,
};

typedef struct count_table {
    csv_table t;
    int item, workload, batch, per_image, commit, date;
    int settings[8];
} count_table;

static int open_counts(const char *label, const char *path, count_table *c)
{
    char err[PATH_LEN + 256];
    if (csv_read(path, &c->t, err, sizeof err) != 0) {
        fprintf(stderr, "bench compare: %s: %s\n", label, err);
        return -1;
    }
    struct {
        const char *name;
        int *col;
    } need[] = {
        {"item", &c->item}, {"workload", &c->workload}, {"batch", &c->batch},
        {"instructions_per_image", &c->per_image}, {"commit", &c->commit}, {"date", &c->date},
    };
    for (size_t k = 0; k < sizeof need / sizeof need[0]; k++)
        if ((*need[k].col = csv_column(&c->t, need[k].name)) < 0) {
            fprintf(stderr, "bench compare: %s: %s: no column '%s' in the header\n", label, path,
                    need[k].name);
            return -1;
        }
    for (int k = 0; setting_columns[k]; k++)
        if ((c->settings[k] = csv_column(&c->t, setting_columns[k])) < 0) {
            fprintf(stderr, "bench compare: %s: %s: no column '%s' in the header\n", label, path,
                    setting_columns[k]);
            return -1;
        }
    if (c->t.n_rows == 0) {
        fprintf(stderr, "bench compare: %s: %s has no rows\n", label, path);
        return -1;
    }
    for (int r = 0; r < c->t.n_rows; r++) {
        double v;
        if (number_read(c->t.rows[r][c->per_image], &v) != 0 || !(v > 0)) {
            fprintf(stderr, "bench compare: %s: %s:%d: instructions_per_image '%s' is not a "
                            "positive number\n",
                    label, path, c->t.lines[r], c->t.rows[r][c->per_image]);
            return -1;
        }
        for (int k = 0; setting_columns[k]; k++)
            if (strcmp(c->t.rows[r][c->settings[k]], c->t.rows[0][c->settings[k]])) {
                fprintf(stderr, "bench compare: %s: %s:%d: %s differs from the first row's; "
                                "not one count\n",
                        label, path, c->t.lines[r], setting_columns[k]);
                return -1;
            }
    }
    return 0;
}

int count_compare(const char *base_path, const char *new_path, double max_growth_pct)
{
    count_table base = {0}, next = {0};
    int rc = 2;
    if (open_counts("BASE", base_path, &base) != 0 || open_counts("NEW", new_path, &next) != 0)
        goto done;
    const char *base_commit = base.t.rows[0][base.commit];
    for (int k = 0; setting_columns[k]; k++) {
        const char *b = base.t.rows[0][base.settings[k]], *n = next.t.rows[0][next.settings[k]];
        if (strcmp(b, n)) {
            printf("counts: NOT JUDGED: %s differs: BASE (commit %s) was counted with '%s', NEW "
                   "with '%s'. Counts depend on it, so they cannot be compared; count a baseline "
                   "with this %s (scripts/count-baseline) to judge.\n",
                   setting_columns[k], base_commit, b, n, setting_columns[k]);
            rc = 0;
            goto done;
        }
    }
    printf("counts: instructions per image (callgrind), BASE commit %s (%s) against NEW commit "
           "%s (%s); limit %+g%%\n",
           base_commit, base.t.rows[0][base.date], next.t.rows[0][next.commit],
           next.t.rows[0][next.date], max_growth_pct);
    printf("counted with %s, %s, %s, valgrind presenting %s\n\n", base.t.rows[0][base.settings[0]],
           base.t.rows[0][base.settings[1]], base.t.rows[0][base.settings[2]],
           base.t.rows[0][base.settings[4]]);
    printf("| item | BASE | NEW | change | verdict |\n|---|---:|---:|---:|---|\n");
    int regressions = 0, improvements = 0, compared = 0;
    char findings[MAX_ITEMS * 3][512];
    int n_findings = 0;
    int *paired = calloc((size_t)next.t.n_rows + 1, sizeof *paired);
    if (!paired) {
        fprintf(stderr, "bench compare: out of memory\n");
        goto done;
    }
    for (int i = 0; i < base.t.n_rows; i++) {
        char **b = base.t.rows[i];
        int j = 0;
        while (j < next.t.n_rows &&
               (paired[j] || strcmp(next.t.rows[j][next.item], b[base.item]) ||
                strcmp(next.t.rows[j][next.workload], b[base.workload]) ||
                strcmp(next.t.rows[j][next.batch], b[base.batch])))
            j++;
        if (j == next.t.n_rows) {
            if (n_findings < MAX_ITEMS * 3)
                snprintf(findings[n_findings++], 512, "NOTE %s (%s, batch %s): only in BASE; not compared",
                         b[base.item], b[base.workload], b[base.batch]);
            continue;
        }
        paired[j] = 1;
        compared++;
        double bv = strtod(b[base.per_image], NULL);
        double nv = strtod(next.t.rows[j][next.per_image], NULL);
        double change = (nv / bv - 1) * 100;
        const char *verdict = "same";
        if (change > max_growth_pct) {
            verdict = "REGRESSION";
            regressions++;
        } else if (change < -max_growth_pct) {
            verdict = "improved";
            improvements++;
        }
        printf("| %s | %.0f | %.0f | %+.3f%% | %s |\n", b[base.item], bv, nv, change, verdict);
        if (strcmp(verdict, "same") && n_findings < MAX_ITEMS * 3)
            snprintf(findings[n_findings++], 512,
                     "%s %s: %.0f -> %.0f instructions per image (%+.2f%%, limit %g%%) against "
                     "commit %s",
                     change > 0 ? "REGRESSION" : "IMPROVED", b[base.item], bv, nv, change,
                     max_growth_pct, base_commit);
    }
    for (int j = 0; j < next.t.n_rows; j++)
        if (!paired[j] && n_findings < MAX_ITEMS * 3)
            snprintf(findings[n_findings++], 512, "NOTE %s (%s, batch %s): only in NEW; not compared",
                     next.t.rows[j][next.item], next.t.rows[j][next.workload],
                     next.t.rows[j][next.batch]);
    free(paired);
    if (n_findings)
        printf("\n");
    for (int i = 0; i < n_findings; i++)
        printf("%s\n", findings[i]);
    if (compared == 0) {
        fprintf(stderr, "bench compare: no common items: %s and %s share no item (item, "
                        "workload, batch)\n", base_path, new_path);
        goto done;
    }
    rc = regressions ? 1 : 0;
    printf("\ncounts: %d item%s compared, %d regression%s, %d improvement%s -> exit %d\n",
           compared, compared == 1 ? "" : "s", regressions, regressions == 1 ? "" : "s",
           improvements, improvements == 1 ? "" : "s", rc);
done:
    csv_free(&base.t);
    csv_free(&next.t);
    return rc;
}

static const char *const history_columns[] = {
    "commit", "date", "item", "workload", "batch", "instructions_per_image", "compiler",
    "build", "blas", "cpu_seen", "run",
};
enum { HISTORY_COLUMNS = sizeof history_columns / sizeof *history_columns };

int count_history(const char *counts_path, const char *history_path, const char *run)
{
    count_table c = {0};
    history_file h = {0};
    int rc = 2;
    if (open_counts("RUN", counts_path, &c) != 0 ||
        history_file_open(&h, history_path, history_columns, HISTORY_COLUMNS,
                          "count history", "--counts-file") != 0)
        goto done;
    for (int r = 0; r < c.t.n_rows; r++) {
        const char *values[HISTORY_COLUMNS];
        for (int i = 0; i < HISTORY_COLUMNS; i++) {
            int col = csv_column(&c.t, history_columns[i]);
            values[i] = !strcmp(history_columns[i], "run") ? run : col >= 0 ? c.t.rows[r][col] : "";
        }
        int seen = 0; /* same commit, date and item: recorded already */
        for (int k = 0; k < h.known.n_rows && !seen; k++)
            seen = !strcmp(h.known.rows[k][0], values[0]) &&
                   !strcmp(h.known.rows[k][1], values[1]) && !strcmp(h.known.rows[k][2], values[2]);
        if (seen)
            h.already_there++;
        else
            history_file_append(&h, values, HISTORY_COLUMNS);
    }
    rc = 0;
done:
    rc = history_file_close(&h, "count row", run, NULL) || rc ? 2 : 0;
    csv_free(&c.t);
    return rc;
}
