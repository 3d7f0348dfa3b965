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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/registry.h"
#include "base/alloc.h"
#include "harness/run/columns.h"
#include "harness/run/report.h"
#include "harness/run/status.h"
#include "harness/tools/children.h"
#include "harness/tools/roofline.h"

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
    int evaluated;       /* a drawn configuration has a test accuracy (0 is one) */
    char profiled[1024]; /* finished configurations with a profile-<label>.csv */
    /* row_key.label_axes as the run set it: the axes with several values
     * among all rows */
    unsigned label_axes;
    int split_model; /* a configuration split its model (model-parallel or hybrid) */
    int arithmetic;  /* the summary names each CPU row's peak arithmetic (newer ones do) */
    char machine[512], date[16];
} run_facts;

/* A summary row, and an epoch row, as read back; text a file lacks is "". */
static summary_row summary_row_at(const result_table *t, int i)
{
    summary_row s;
    summary_row_init(&s);
    s.key = (row_key){.backend = "", .workload = "", .precision = "", .optimizer = ""};
    s.parallel = "";
    s.status = STATUS_FAILED;
    result_table_row(t, i, &s);
    return s;
}

static epoch_row epoch_row_at(const result_table *t, int i)
{
    epoch_row e = {.key = {.backend = "", .workload = "", .precision = "", .optimizer = ""},
                   .status = STATUS_FAILED};
    result_table_row(t, i, &e);
    return e;
}

/* epochs.csv must have what the scripts read before gnuplot sees it: a bad
 * file is the input's fault (2), not a chart that failed. */
static int check_epochs_csv(const result_table *e, char *msg, size_t msg_len)
{
    static const column_field needed[] = {
        IN_EPOCH(key.backend), IN_EPOCH(key.replicas), IN_EPOCH(key.ranks), IN_EPOCH(repeat),
        IN_EPOCH(epoch), IN_EPOCH(train_loss), IN_EPOCH(test_loss), IN_EPOCH(test_accuracy),
        IN_EPOCH(status),
    };
    const column *missing = result_table_missing(e, needed, sizeof needed / sizeof *needed);
    if (missing) {
        snprintf(msg, msg_len, "%s has no column %s (not a bench epochs.csv?)", e->path,
                 missing->name);
        return 2;
    }
    char err[1024];
    if (result_table_check(e, err, sizeof err) != 0) {
        snprintf(msg, msg_len, "%s", err);
        return 2;
    }
    for (int r = 0; r < e->csv.n_rows; r++)
        if (epoch_row_at(e, r).epoch < 1) {
            snprintf(msg, msg_len, "%s: row %d has no epoch number", e->path, r + 2);
            return 2;
        }
    return 0;
}

static int same_configuration(const row_key *a, const row_key *b)
{
    return !strcmp(a->backend, b->backend) && !strcmp(a->precision, b->precision) &&
           a->threads == b->threads && a->devices == b->devices && a->replicas == b->replicas &&
           a->ranks == b->ranks && a->batch_size == b->batch_size;
}

/* summary.csv and epochs.csv of one run: every finished configuration of
 * the summary has its epochs x repeats rows in epochs.csv, each of its
 * images per epoch. A summary beside another run's epochs is refused (2)
 * rather than drawn as a chart of neither. */
static int check_one_run(const char *dir, const result_table *s, const result_table *e,
                         char *msg, size_t msg_len)
{
    const column *fastest_col = SUMMARY_COLUMN(epoch_seconds_min);
    const column *slowest_col = SUMMARY_COLUMN(epoch_seconds_max);
    const column *seconds_col = EPOCH_COLUMN(epoch_seconds);
    epoch_row *epochs = xcalloc((size_t)e->csv.n_rows + 1, sizeof *epochs);
    for (int k = 0; k < e->csv.n_rows; k++)
        epochs[k] = epoch_row_at(e, k);
    int rc = 0;
    for (int r = 0; r < s->csv.n_rows && !rc; r++) {
        summary_row row = summary_row_at(s, r);
        if (row.status != STATUS_OK)
            continue;
        long want = (long)row.epochs * row.repeats;
        long images = row.images_per_epoch, have = 0, other_images = 0;
        /* the summary's fastest and slowest epochs are epochs of this file,
         * to the microsecond as both were written: another run of the same
         * shape has other times */
        const char *fastest = result_text(s, r, fastest_col);
        const char *slowest = result_text(s, r, slowest_col);
        int times_found = !*fastest + !*slowest;
        for (int k = 0; k < e->csv.n_rows; k++) {
            if (same_configuration(&row.key, &epochs[k].key)) {
                const char *seconds = result_text(e, k, seconds_col);
                have++;
                other_images += epochs[k].images != images;
                times_found += !strcmp(seconds, fastest) +
                               (strcmp(fastest, slowest) && !strcmp(seconds, slowest));
            }
        }
        if (have != want || other_images || times_found < 1 + !!strcmp(fastest, slowest))
            rc = 2;
        if (rc && have == want && !other_images) {
            snprintf(msg, msg_len, "%s/{summary,epochs}.csv are not of one run: %.64s's "
                     "summary row (line %d) has epoch times that epochs.csv does not hold",
                     dir, row.key.backend, s->csv.lines[r]);
            break;
        }
        if (rc)
            snprintf(msg, msg_len, "%s/{summary,epochs}.csv are not of one run: %.64s's "
                     "summary row (line %d) has %ld epoch%s of %ld images, epochs.csv %ld row%s%s",
                     dir, row.key.backend, s->csv.lines[r], want, want == 1 ? "" : "s",
                     images, have, have == 1 ? "" : "s",
                     other_images ? " of other sizes" : "");
    }
    free(epochs);
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
static int row_drawn(const summary_row *s)
{
    return s->status == STATUS_OK || (s->status == STATUS_INTERRUPTED && s->timed_samples > 0);
}

/* How many different values the column has (0 without the column). */
static int distinct_values(const result_table *t, const column *c)
{
    if (!result_has(t, c))
        return 0;
    int n = 0;
    for (int r = 0; r < t->csv.n_rows; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = !strcmp(result_text(t, q, c), result_text(t, r, c));
        n += !seen;
    }
    return n;
}

/* What the charts need of summary.csv, which must have what the scripts
 * read; 0, or 2 with a message. */
static int summary_facts(const char *dir, const result_table *t, run_facts *f, char *msg,
                         size_t msg_len)
{
    static const column_field needed[] = {
        IN_SUMMARY(key.backend), IN_SUMMARY(key.workload), IN_SUMMARY(key.threads),
        IN_SUMMARY(key.devices), IN_SUMMARY(key.replicas), IN_SUMMARY(key.ranks),
        IN_SUMMARY(key.batch_size), IN_SUMMARY(repeats), IN_SUMMARY(images_per_epoch),
        IN_SUMMARY(status), IN_SUMMARY(epoch_seconds_median), IN_SUMMARY(epoch_seconds_min),
        IN_SUMMARY(epoch_seconds_max), IN_SUMMARY(images_per_second),
        IN_SUMMARY(gflops_per_second), IN_SUMMARY(percent_of_peak),
        IN_SUMMARY(speedup_vs_naive), IN_SUMMARY(final_test_accuracy), IN_SYSTEM(cpu_model),
        IN_SYSTEM(gpu_model), IN_SYSTEM(date),
    };
    char err[1024];
    if (result_table_check(t, err, sizeof err) != 0) {
        snprintf(msg, msg_len, "%s", err);
        return 2;
    }
    if (t->csv.n_rows > MAX_RUN_CONFIGS) {
        /* gnuplot takes minutes over thousands of bars, and none can be read */
        snprintf(msg, msg_len, "%s holds %d configurations, more than the %d one run makes and "
                 "a chart can show; plot a run, or a summary.csv cut to the rows to compare",
                 t->path, t->csv.n_rows, MAX_RUN_CONFIGS);
        return 2;
    }
    const column *missing = result_table_missing(t, needed, sizeof needed / sizeof *needed);
    if (missing) {
        snprintf(msg, msg_len, "%s has no column %s (written by an older bench?)", t->path,
                 missing->name);
        return 2;
    }
    f->arithmetic = result_has(t, SUMMARY_COLUMN(peak_arithmetic));
    f->label_axes = (distinct_values(t, SUMMARY_COLUMN(key.precision)) > 1 ? LABEL_PRECISION : 0) |
                    (distinct_values(t, SUMMARY_COLUMN(key.batch_size)) > 1 ? LABEL_BATCH : 0);
    size_t used = 0;
    for (int r = 0; r < t->csv.n_rows; r++) {
        summary_row s = summary_row_at(t, r);
        if (!row_drawn(&s))
            continue;
        int ok = s.status == STATUS_OK;
        char name[128];
        config_label_of(s.key.backend, s.key.replicas, s.key.ranks, s.key.precision,
                        s.key.batch_size, f->label_axes, name, sizeof name);
        f->drawable++;
        f->finished += ok;
        f->naive_finished |= ok && strcmp(name, "naive") == 0;
        f->evaluated |= isfinite(s.final_test_accuracy); /* 0 is a result too */
        f->split_model |= !strcmp(s.parallel, "model") || !strcmp(s.parallel, "hybrid");
        char profile[PATH_MAX + 64];
        snprintf(profile, sizeof profile, "%s/profile-%s.csv", dir, name);
        if (is_file(profile) && used + strlen(name) + 2 < sizeof f->profiled)
            used += (size_t)snprintf(f->profiled + used, sizeof f->profiled - used, "%s%s",
                                     used ? " " : "", name);
        if (f->drawable == 1) {
            const char *gpu = result_text(t, r, SYSTEM_COLUMN(gpu_model));
            snprintf(f->machine, sizeof f->machine, "%s%s%s",
                     result_text(t, r, SYSTEM_COLUMN(cpu_model)),
                     *gpu && strcmp(gpu, "none") ? " + " : "",
                     *gpu && strcmp(gpu, "none") ? gpu : "");
            snprintf(f->date, sizeof f->date, "%.10s", result_text(t, r, SYSTEM_COLUMN(date)));
        }
    }
    if (!f->drawable) {
        snprintf(msg, msg_len, "no backend finished in %s (summary.csv has no row with status ok, "
                 "nor an interrupted one with a timed epoch)", dir);
        return 2;
    }
    return 0;
}

/* Reads the run's summary.csv and epochs.csv; 0, or 2 with a message. */
static int read_facts(const char *dir, run_facts *f, char *msg, size_t msg_len)
{
    memset(f, 0, sizeof *f);
    char spath[PATH_MAX + 64], epath[PATH_MAX + 64], err[1024];
    snprintf(epath, sizeof epath, "%s/epochs.csv", dir);
    if (!is_file(epath)) {
        snprintf(msg, msg_len, "%s/epochs.csv not found: not a bench run directory?", dir);
        return 2;
    }
    snprintf(spath, sizeof spath, "%s/summary.csv", dir);
    result_table s, e = {0};
    int rc = 2;
    if (result_table_read(&s, summary_columns, spath, err, sizeof err) != 0) {
        snprintf(msg, msg_len, "%s", err);
        goto done;
    }
    if ((rc = summary_facts(dir, &s, f, msg, msg_len)) != 0)
        goto done;
    rc = 2;
    if (result_table_read(&e, epoch_columns, epath, err, sizeof err) != 0) {
        snprintf(msg, msg_len, "%s", err);
        goto done;
    }
    rc = check_epochs_csv(&e, msg, msg_len);
    if (!rc)
        rc = check_one_run(dir, &s, &e, msg, msg_len);
done:
    result_table_free(&s);
    result_table_free(&e);
    return rc;
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
    /* the roofline's points and roofs, from the profiles and the run's peaks */
    const int roofline = facts.profiled[0] && roofline_write_data(dir, facts.profiled, msg,
                                                                  sizeof msg) > 0;
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
        {"roofline", roofline},
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
    if (!facts.evaluated) /* a chart left out says why, never silently */
        fprintf(stderr, "note: %s/accuracy.png not drawn: no configuration drawn has a test "
                        "accuracy in summary.csv\n", dir);
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
            add_var(vars, sizeof vars, "arithmetic", facts.arithmetic ? "1" : "0");
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
