/* Charts: runs gnuplot on the scripts in plots/ for one run directory.
 *
 * gnuplot is started with fork/exec, never through a shell, so paths need
 * no shell quoting; values reach the scripts as gnuplot string variables
 * (`gnuplot -e "dir='...'; ..." script.gp`), quoted the gnuplot way. Any
 * output from gnuplot counts as a failure: the scripts print nothing when
 * all is well, so a warning is a bug to fix, not noise to ignore. */
#include "harness/tools/plot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/registry.h"
#include "harness/formats/csv.h"
#include "harness/run/columns.h"
#include "harness/run/report.h"
#include "harness/run/status.h"
#include "harness/tools/children.h"

enum { VARS_LEN = 16384, OUTPUT_LEN = 2048, MSG_LEN = 2 * PATH_MAX + 1024 };

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* gnuplot on PATH, as execvp would find it. */
static int find_gnuplot(char *path, size_t len)
{
    const char *dirs = getenv("PATH");
    if (!dirs || !*dirs)
        return -1;
    const char *p = dirs;
    while (*p) {
        size_t n = strcspn(p, ":");
        snprintf(path, len, "%.*s/gnuplot", (int)n, n ? p : ".");
        if (is_file(path) && access(path, X_OK) == 0)
            return 0;
        p += n;
        if (*p == ':')
            p++;
    }
    return -1;
}

/* The plots/ directory (with a trailing slash): beside the program, one
 * level up (a build directory), or under the current directory. */
static int find_plot_dir(char *out, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const char *candidates[3];
    char beside[PATH_MAX + 16], above[PATH_MAX + 16];
    int count = 0;
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(beside, sizeof beside, "%s/plots/", exe);
            snprintf(above, sizeof above, "%s/../plots/", exe);
            candidates[count++] = beside;
            candidates[count++] = above;
        }
    }
    candidates[count++] = "plots/";
    for (int i = 0; i < count; i++) {
        char probe[PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%scommon.gp", candidates[i]);
        if (is_file(probe)) {
            snprintf(out, len, "%s", candidates[i]);
            return 0;
        }
    }
    return -1;
}

/* Appends name='value' to vars: a gnuplot single-quoted string, in which
 * the only special character is the quote itself (written twice). Control
 * characters become spaces. */
static void add_var(char *vars, size_t len, const char *name, const char *value)
{
    size_t used = strlen(vars);
    used += (size_t)snprintf(vars + used, used < len ? len - used : 0, "%s%s='",
                             used ? "; " : "", name);
    for (const char *c = value; *c && used + 3 < len; c++) {
        if (*c == '\'')
            vars[used++] = '\'';
        vars[used++] = (unsigned char)*c < 0x20 ? ' ' : *c;
    }
    if (used + 2 < len) {
        vars[used++] = '\'';
        vars[used] = 0;
    }
}

/* Runs gnuplot -e vars script. 0 when it exits 0 and prints nothing; else
 * -1 with what it printed (or why it did not run) in msg. */
static int run_gnuplot(const char *gnuplot, const char *vars, const char *script, char *msg,
                       size_t msg_len)
{
    int fds[2];
    msg[0] = 0;
    if (pipe(fds) != 0) {
        snprintf(msg, msg_len, "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(msg, msg_len, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0)
            dup2(null, STDIN_FILENO);
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        char *const argv[] = {(char *)"gnuplot", (char *)"-e", (char *)vars, (char *)script, NULL};
        execv(gnuplot, argv);
        fprintf(stderr, "cannot run %s: %s\n", gnuplot, strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    char output[OUTPUT_LEN];
    size_t got = 0;
    for (;;) {
        char chunk[1024];
        ssize_t n = read(fds[0], chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) {
            children_end_if_signalled(pid); /* its end closes the pipe */
            continue;
        }
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n && got + 1 < sizeof output; i++)
            output[got++] = chunk[i];
    }
    output[got] = 0;
    close(fds[0]);
    int status = 0;
    children_wait(pid, &status);
    /* keep the message to its first lines, on one line */
    for (char *c = output; *c; c++)
        if (*c == '\n')
            *c = *(c + 1) ? ' ' : 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && got == 0)
        return 0;
    if (got)
        snprintf(msg, msg_len, "%s", output);
    else if (WIFEXITED(status))
        snprintf(msg, msg_len, "gnuplot exited with status %d", WEXITSTATUS(status));
    else
        snprintf(msg, msg_len, "gnuplot was killed by signal %d", WTERMSIG(status));
    return -1;
}

/* What a run directory has to draw. */
typedef struct run_facts {
    int finished;        /* configurations with status ok */
    int drawable;        /* finished, or interrupted after a timed epoch */
    int naive_finished;
    int evaluated;       /* a finished backend has a test accuracy */
    char profiled[1024]; /* finished configurations with a profile-<label>.csv */
    /* row_key.label_axes as the run set it: the axes with several values
     * among all rows */
    unsigned label_axes;
    int split_model; /* a configuration split its model (model-parallel or hybrid) */
    char machine[512], date[16];
} run_facts;

static const char *field(const csv_table *t, int row, const char *name)
{
    int c = csv_column(t, name);
    return c >= 0 && c < t->n_cols ? t->rows[row][c] : "";
}

/* epochs.csv must have what the scripts read before gnuplot sees it: a bad
 * file is the input's fault (2), not a chart that failed. */
static int check_epochs_csv(const char *dir, char *msg, size_t msg_len)
{
    char path[PATH_MAX + 64], err[1024];
    snprintf(path, sizeof path, "%s/epochs.csv", dir);
    csv_table t;
    if (csv_read(path, &t, err, sizeof err) != 0) {
        snprintf(msg, msg_len, "%s", err);
        csv_free(&t);
        return 2;
    }
    static const char *const needed[] = {
        "backend", "replicas", "ranks", "repeat", "epoch", "train_loss", "test_loss",
        "test_accuracy", "status",
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof needed / sizeof needed[0] && !rc; i++)
        if (csv_column(&t, needed[i]) < 0) {
            snprintf(msg, msg_len, "%s has no column %s (not a bench epochs.csv?)", path,
                     needed[i]);
            rc = 2;
        }
    if (!rc && columns_check_csv(epoch_columns, &t, path, err, sizeof err) != 0) {
        snprintf(msg, msg_len, "%s", err);
        rc = 2;
    }
    for (int r = 0; r < t.n_rows && !rc; r++)
        if (atoi(field(&t, r, "epoch")) < 1) {
            snprintf(msg, msg_len, "%s: row %d has no epoch number", path, r + 2);
            rc = 2;
        }
    csv_free(&t);
    return rc;
}

static int same_configuration(const csv_table *a, int ra, const csv_table *b, int rb)
{
    static const char *const key[] = {"backend", "precision", "threads", "devices",
                                      "replicas", "ranks", "batch_size"};
    for (size_t k = 0; k < sizeof key / sizeof *key; k++)
        if (strcmp(field(a, ra, key[k]), field(b, rb, key[k])))
            return 0;
    return 1;
}

/* summary.csv and epochs.csv of one run: every finished configuration of
 * the summary has its epochs x repeats rows in epochs.csv, each of its
 * images per epoch. A summary beside another run's epochs is refused (2)
 * rather than drawn as a chart of neither. */
static int check_one_run(const char *dir, char *msg, size_t msg_len)
{
    char spath[PATH_MAX + 64], epath[PATH_MAX + 64], err[1024];
    snprintf(spath, sizeof spath, "%s/summary.csv", dir);
    snprintf(epath, sizeof epath, "%s/epochs.csv", dir);
    csv_table s, e;
    if (csv_read(spath, &s, err, sizeof err) != 0) {
        snprintf(msg, msg_len, "%s", err);
        csv_free(&s);
        return 2;
    }
    if (csv_read(epath, &e, err, sizeof err) != 0) {
        snprintf(msg, msg_len, "%s", err);
        csv_free(&s);
        csv_free(&e);
        return 2;
    }
    int rc = 0;
    for (int r = 0; r < s.n_rows && !rc; r++) {
        if (strcmp(field(&s, r, "status"), "ok"))
            continue;
        long want = atol(field(&s, r, "epochs")) * atol(field(&s, r, "repeats"));
        long images = atol(field(&s, r, "images_per_epoch")), have = 0, other_images = 0;
        /* the summary's fastest and slowest epochs are epochs of this file,
         * to the microsecond as both were written: another run of the same
         * shape has other times */
        const char *fastest = field(&s, r, "epoch_seconds_min");
        const char *slowest = field(&s, r, "epoch_seconds_max");
        int times_found = !*fastest + !*slowest;
        for (int k = 0; k < e.n_rows; k++)
            if (same_configuration(&s, r, &e, k)) {
                have++;
                other_images += atol(field(&e, k, "images")) != images;
                times_found += !strcmp(field(&e, k, "epoch_seconds"), fastest) +
                               (strcmp(fastest, slowest) &&
                                !strcmp(field(&e, k, "epoch_seconds"), slowest));
            }
        if (have != want || other_images || times_found < 1 + !!strcmp(fastest, slowest))
            rc = 2;
        if (rc && have == want && !other_images) {
            snprintf(msg, msg_len, "%s/{summary,epochs}.csv are not of one run: %.64s's "
                     "summary row (line %d) has epoch times that epochs.csv does not hold",
                     dir, field(&s, r, "backend"), s.lines[r]);
            break;
        }
        if (rc)
            snprintf(msg, msg_len, "%s/{summary,epochs}.csv are not of one run: %.64s's "
                     "summary row (line %d) has %ld epoch%s of %ld images, epochs.csv %ld row%s%s",
                     dir, field(&s, r, "backend"), s.lines[r], want, want == 1 ? "" : "s",
                     images, have, have == 1 ? "" : "s",
                     other_images ? " of other sizes" : "");
    }
    csv_free(&s);
    csv_free(&e);
    return rc;
}

/* Whether a chart file ends as a whole PNG (its IEND chunk) or SVG
 * (</svg>) does: gnuplot may exit 0 having written part of it to a full
 * disk. */
static int chart_complete(const char *path, int svg)
{
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
    unsigned char tail[64];
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t got = 0;
    if (fseek(f, -(long)sizeof tail, SEEK_END) != 0)
        rewind(f);
    got = fread(tail, 1, sizeof tail, f);
    fclose(f);
    if (!svg)
        return got >= sizeof iend && memcmp(tail + got - sizeof iend, iend, sizeof iend) == 0;
    for (size_t i = 0; i + 6 <= got; i++)
        if (memcmp(tail + i, "</svg>", 6) == 0)
            return 1;
    return 0;
}

/* As plots/common.gp picks the configurations it draws: finished, or
 * interrupted after a timed epoch. */
static int row_drawn(const csv_table *t, int r)
{
    run_status status;
    if (status_parse(field(t, r, "status"), &status) != 0)
        return 0;
    return status == STATUS_OK ||
           (status == STATUS_INTERRUPTED && atoi(field(t, r, "timed_samples")) > 0);
}

/* How many different values the column has (0 without the column). */
static int distinct_values(const csv_table *t, const char *column)
{
    int c = csv_column(t, column), n = 0;
    if (c < 0)
        return 0;
    for (int r = 0; r < t->n_rows; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = !strcmp(t->rows[q][c], t->rows[r][c]);
        n += !seen;
    }
    return n;
}

/* Reads summary.csv; 0, or 2 with a message. */
static int read_facts(const char *dir, run_facts *f, char *msg, size_t msg_len)
{
    memset(f, 0, sizeof *f);
    char path[PATH_MAX + 64], err[1024];
    snprintf(path, sizeof path, "%s/epochs.csv", dir);
    if (!is_file(path)) {
        snprintf(msg, msg_len, "%s/epochs.csv not found: not a bench run directory?", dir);
        return 2;
    }
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    csv_table t;
    if (csv_read(path, &t, err, sizeof err) != 0) {
        snprintf(msg, msg_len, "%s", err);
        return 2;
    }
    static const char *const needed[] = {
        "backend", "workload", "threads", "devices", "replicas", "ranks", "batch_size",
        "repeats", "images_per_epoch", "status",
        "epoch_seconds_median", "epoch_seconds_min", "epoch_seconds_max", "images_per_second",
        "gflops_per_second", "percent_of_peak", "speedup_vs_naive", "final_test_accuracy",
        "cpu_model", "gpu_model", "date",
    };
    if (columns_check_csv(summary_columns, &t, path, err, sizeof err) != 0) {
        snprintf(msg, msg_len, "%s", err);
        csv_free(&t);
        return 2;
    }
    if (t.n_rows > MAX_RUN_CONFIGS) {
        /* gnuplot takes minutes over thousands of bars, and none can be read */
        snprintf(msg, msg_len, "%s holds %d configurations, more than the %d one run makes and "
                 "a chart can show; plot a run, or a summary.csv cut to the rows to compare",
                 path, t.n_rows, MAX_RUN_CONFIGS);
        csv_free(&t);
        return 2;
    }
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        if (csv_column(&t, needed[i]) < 0) {
            snprintf(msg, msg_len, "%s has no column %s (written by an older bench?)", path,
                     needed[i]);
            csv_free(&t);
            return 2;
        }
    f->label_axes = (distinct_values(&t, "precision") > 1 ? LABEL_PRECISION : 0) |
                    (distinct_values(&t, "batch_size") > 1 ? LABEL_BATCH : 0);
    size_t used = 0;
    for (int r = 0; r < t.n_rows; r++) {
        run_status status;
        if (status_parse(field(&t, r, "status"), &status) != 0)
            continue;
        int ok = status == STATUS_OK;
        if (!row_drawn(&t, r))
            continue;
        const char *backend = field(&t, r, "backend");
        char name[128];
        config_label_of(backend, atoi(field(&t, r, "replicas")), atoi(field(&t, r, "ranks")),
                        field(&t, r, "precision"), atoi(field(&t, r, "batch_size")),
                        f->label_axes, name, sizeof name);
        f->drawable++;
        f->finished += ok;
        f->naive_finished |= ok && strcmp(name, "naive") == 0;
        f->evaluated |= atof(field(&t, r, "final_test_accuracy")) > 0;
        f->split_model |= !strcmp(field(&t, r, "parallel"), "model") ||
                          !strcmp(field(&t, r, "parallel"), "hybrid");
        char profile[PATH_MAX + 64];
        snprintf(profile, sizeof profile, "%s/profile-%s.csv", dir, name);
        if (is_file(profile) && used + strlen(name) + 2 < sizeof f->profiled)
            used += (size_t)snprintf(f->profiled + used, sizeof f->profiled - used, "%s%s",
                                     used ? " " : "", name);
        if (f->drawable == 1) {
            const char *gpu = field(&t, r, "gpu_model");
            snprintf(f->machine, sizeof f->machine, "%s%s%s", field(&t, r, "cpu_model"),
                     *gpu && strcmp(gpu, "none") ? " + " : "",
                     *gpu && strcmp(gpu, "none") ? gpu : "");
            snprintf(f->date, sizeof f->date, "%.10s", field(&t, r, "date"));
        }
    }
    csv_free(&t);
    if (!f->drawable) {
        snprintf(msg, msg_len, "no backend finished in %s (summary.csv has no row with status ok, "
                 "nor an interrupted one with a timed epoch)", dir);
        return 2;
    }
    int rc = check_epochs_csv(dir, msg, msg_len);
    return rc ? rc : check_one_run(dir, msg, msg_len);
}

/* Renders what dir has data for; lists the charts drawn in drawn. */
static int render(const char *dir, char *drawn, size_t drawn_len)
{
    char msg[MSG_LEN];
    drawn[0] = 0;
    if (!is_dir(dir)) {
        fprintf(stderr, "bench plot: %s is not a directory\n", dir);
        return 2;
    }
    run_facts facts;
    int rc = read_facts(dir, &facts, msg, sizeof msg);
    if (rc) {
        fprintf(stderr, "bench plot: %s\n", msg);
        return rc;
    }
    char gnuplot[PATH_MAX + 16], plotdir[PATH_MAX + 16];
    if (find_gnuplot(gnuplot, sizeof gnuplot) != 0) {
        fprintf(stderr, "bench plot: gnuplot not found; install it with: apt-get install gnuplot-nox\n");
        return 3;
    }
    if (find_plot_dir(plotdir, sizeof plotdir) != 0) {
        fprintf(stderr, "bench plot: the chart scripts (plots/*.gp) are not beside the program "
                        "nor under the current directory\n");
        return 3;
    }
    struct {
        const char *name;
        int wanted;
    } charts[] = {
        {"epoch_time", 1},
        {"throughput", 1},
        {"speedup", facts.naive_finished && facts.finished > 1},
        {"accuracy", facts.evaluated},
        {"loss", 1},
        {"layers", facts.profiled[0] != 0},
        /* the axes: only when the run asked for more than one value */
        {"precision", (facts.label_axes & LABEL_PRECISION) && facts.drawable},
        {"batch_size", (facts.label_axes & LABEL_BATCH) && facts.drawable},
        {"parallel", facts.split_model},
    };
    static const char *const formats[] = {"png", "svg"};
    char peers[256] = ""; /* drawn apart from the suite's own backends */
    for (int i = 0, n = 0; i < backend_count(); i++)
        if (backend_is_peer(backend_at(i)) && (size_t)n < sizeof peers)
            n += snprintf(peers + n, sizeof peers - n, "%s%s", n ? " " : "", backend_at(i)->name);
    size_t used = 0;
    rc = 0;
    for (size_t c = 0; c < sizeof charts / sizeof charts[0]; c++) {
        if (!charts[c].wanted)
            continue;
        int ok = 1;
        for (int k = 0; k < 2; k++) {
            char script[PATH_MAX + 64], out[PATH_MAX + 64], part[PATH_MAX + 96];
            static char vars[VARS_LEN];
            snprintf(script, sizeof script, "%s%s.gp", plotdir, charts[c].name);
            snprintf(out, sizeof out, "%s/%s.%s", dir, charts[c].name, formats[k]);
            /* drawn beside the chart and renamed over it only when whole,
             * so a failure never leaves a broken chart in place of a good one */
            snprintf(part, sizeof part, "%s/.%s.%s.part-%ld", dir, charts[c].name, formats[k],
                     (long)getpid());
            vars[0] = 0;
            add_var(vars, sizeof vars, "dir", dir);
            add_var(vars, sizeof vars, "out", part);
            add_var(vars, sizeof vars, "term", formats[k]);
            add_var(vars, sizeof vars, "plotdir", plotdir);
            add_var(vars, sizeof vars, "machine", facts.machine);
            add_var(vars, sizeof vars, "date", facts.date);
            add_var(vars, sizeof vars, "profiled", facts.profiled);
            add_var(vars, sizeof vars, "peers", peers);
            if (run_gnuplot(gnuplot, vars, script, msg, sizeof msg) != 0) {
                if (!children_signal()) /* else ended by us: said once by the caller */
                    fprintf(stderr, "bench plot: %s: %s\n", out, msg);
                ok = 0;
            } else if (!chart_complete(part, k == 1)) {
                fprintf(stderr, "bench plot: %s: not written in full (is the disk full?); any "
                        "earlier chart is kept\n", out);
                ok = 0;
            } else if (rename(part, out) != 0) {
                fprintf(stderr, "bench plot: %s: %s\n", out, strerror(errno));
                ok = 0;
            }
            unlink(part); /* left only by a failure */
            if (children_signal())
                return 128 + children_signal();
        }
        if (ok)
            used += (size_t)snprintf(drawn + used, used < drawn_len ? drawn_len - used : 0,
                                     "%s%s", used ? "," : "", charts[c].name);
        else
            rc = 1;
    }
    return rc;
}

int plot_run_dir(const char *dir)
{
    char drawn[256];
    return render(dir, drawn, sizeof drawn);
}

static void say_drawn(const char *dir, const char *drawn)
{
    if (!drawn[0])
        return;
    if (strchr(drawn, ','))
        fprintf(stderr, "charts: %s/{%s}.png and .svg\n", dir, drawn);
    else
        fprintf(stderr, "charts: %s/%s.png and .svg\n", dir, drawn);
}

int plot_after_run(const char *dir)
{
    char gnuplot[PATH_MAX + 16];
    if (find_gnuplot(gnuplot, sizeof gnuplot) != 0) {
        fprintf(stderr, "charts: not drawn, gnuplot is not installed (apt-get install gnuplot-nox; "
                        "then ./bench plot %s)\n", dir);
        return 0;
    }
    char drawn[256];
    int rc = render(dir, drawn, sizeof drawn);
    say_drawn(dir, drawn);
    return rc == 1 ? -1 : 0;
}

static void plot_usage(FILE *f)
{
    fprintf(f, "usage: ./bench plot DIR\n"
               "  draws the charts of the run in DIR (a results/ directory) from its CSV files,\n"
               "  as DIR/<chart>.png and .svg, with the gnuplot scripts in plots/\n");
}

int plot_main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        plot_usage(stdout);
        return 0;
    }
    if (argc != 2 || argv[1][0] == '-') {
        plot_usage(stderr);
        return 2;
    }
    char drawn[256];
    children_catch_signals();
    int rc = render(argv[1], drawn, sizeof drawn);
    if (children_signal()) {
        fprintf(stderr, "bench plot: stopped by signal %d; earlier charts kept\n",
                children_signal());
        return 128 + children_signal();
    }
    say_drawn(argv[1], drawn);
    return rc;
}
