/* Judging for `./bench compare BASE NEW`, on the rows compare_read.c read
 * from both runs (joined on the configuration), metric by metric:
 *   images/s       slower beyond --max-slowdown, and significant by a
 *                  Mann-Whitney U test when there are enough samples
 *   s/epoch        shown, not judged (images/s carries the same news and
 *                  stays valid when the epoch size differs)
 *   test accuracy  dropped by more than --max-accuracy-drop points
 *   train loss     deterministic for the same seed and settings: a change
 *                  beyond rounding is "changed numerics"
 * Rows trained differently (another training option, --epochs, --limit or
 * optimiser) are shown and not compared on any metric.
 * Exit 0 nothing regressed, 1 regressed, 2 unusable input. */
#include "harness/tools/compare_judge.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "harness/tools/compare.h"
#include "harness/common/stats.h"

/* ---- judging speed ------------------------------------------------------- */

speed_verdict judge_speed(double base, double next, const double *base_samples, int n_base,
                          const double *next_samples, int n_next, double max_slowdown_pct,
                          double alpha)
{
    speed_verdict v = {0, 0, 1, 0};
    v.slowdown_pct = (base / next - 1) * 100;
    int beyond = v.slowdown_pct > max_slowdown_pct;
    if (mann_whitney_min_p(n_base, n_next) < alpha) {
        v.u_test_used = 1;
        v.p = mann_whitney_u(base_samples, n_base, next_samples, n_next).p;
        v.regression = beyond && v.p < alpha;
    } else {
        v.regression = beyond;
    }
    return v;
}

typedef struct tally {
    int regressions, numerics, notes, compared;
    FILE *findings; /* printed after the table */
} tally;

static int is_ok(const run_row *r) { return r->s.status == STATUS_OK; }
static int is_skipped(const run_row *r) { return r->s.status == STATUS_SKIPPED; }

static void finding(tally *t, const char *kind, const char *row, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void finding(tally *t, const char *kind, const char *row, const char *fmt, ...)
{
    if (!strcmp(kind, "REGRESSION"))
        t->regressions++;
    else if (!strcmp(kind, "NUMERICS"))
        t->numerics++;
    else
        t->notes++;
    FILE *f = t->findings ? t->findings : stdout;
    fprintf(f, "%-10s %s: ", kind, row);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
}

/* The reference row for --relative-to: same workload and batch, ok; one
 * replica in one process when there is such a row. */
static const run_row *reference_row(const run_files *run, const char *ref, const run_row *like)
{
    for (int single = 1; single >= 0; single--)
        for (int i = 0; i < run->n_rows; i++) {
            const run_row *r = &run->rows[i];
            if (!strcmp(r->s.key.backend, ref) &&
                !strcmp(r->s.key.workload, like->s.key.workload) &&
                r->s.key.batch_size == like->s.key.batch_size && is_ok(r) &&
                r->s.images_per_second > 0 && r->s.epoch_seconds_median > 0 &&
                (!single || (r->s.key.replicas == 1 && r->s.key.ranks == 1)))
                return r;
        }
    return NULL;
}

/* Why two rows were not trained alike (another seed, learning rate,
 * --epochs or --limit, optimiser), or NULL when, as far as the runs say,
 * they were. Rows trained differently are not compared on any metric:
 * their speed, accuracy and loss answer different questions. */
static const char *trained_differently(const run_files *base, const run_files *next,
                                       const run_row *b, const run_row *n, char *why, size_t len)
{
    if (base->have_settings && next->have_settings) {
        int i = 0, j = 0;
        while (i < base->n_settings || j < next->n_settings) {
            int c = i == base->n_settings   ? 1
                    : j == next->n_settings ? -1
                                            : strcmp(base->settings[i], next->settings[j]);
            if (c == 0) {
                i++, j++;
                continue;
            }
            if (i < base->n_settings && j < next->n_settings) {
                /* one option with two values: sorted "name=value" puts them side by side */
                const char *bs = base->settings[i], *ns = next->settings[j];
                size_t bn = strcspn(bs, "="), nn = strcspn(ns, "=");
                if (bn == nn && !strncmp(bs, ns, bn)) {
                    snprintf(why, len,
                             "training options differ: --%.*s is %.60s in %s and %.60s in %s",
                             (int)(bn < 60 ? bn : 60), bs, bs[bn] ? bs + bn + 1 : "",
                             base->label, ns[nn] ? ns + nn + 1 : "", next->label);
                    return why;
                }
            }
            const char *s = c < 0 ? base->settings[i] : next->settings[j];
            snprintf(why, len, "training options differ: --%.160s only in %s", s,
                     c < 0 ? base->label : next->label);
            return why;
        }
    }
    if (b->s.epochs >= 0 && n->s.epochs >= 0 && b->s.images_per_epoch >= 0 &&
        n->s.images_per_epoch >= 0 &&
        (b->s.epochs != n->s.epochs || b->s.images_per_epoch != n->s.images_per_epoch)) {
        snprintf(why, len, "trained for different lengths: %d x %ld images vs %d x %ld",
                 b->s.epochs, b->s.images_per_epoch, n->s.epochs, n->s.images_per_epoch);
        return why;
    }
    if (strcmp(b->s.key.optimizer, n->s.key.optimizer)) {
        snprintf(why, len, "different optimizer");
        return why;
    }
    return NULL;
}

/* Why two ok rows' final train losses need not be equal, or NULL when they
 * must be (same seed, settings, epochs and CPU). */
static const char *numerics_incomparable(const run_files *base, const run_files *next,
                                         const run_row *b, const run_row *n, char *why,
                                         size_t len)
{
    if (trained_differently(base, next, b, n, why, len))
        return why;
    if (!base->have_settings || !next->have_settings) {
        snprintf(why, len, "training options unknown: %.160s",
                 base->have_settings ? next->settings_why : base->settings_why);
        return why;
    }
    if (b->s.epochs < 0 || n->s.epochs < 0 || b->s.images_per_epoch < 0 ||
        n->s.images_per_epoch < 0) {
        snprintf(why, len, "epochs or images_per_epoch not recorded");
        return why;
    }
    if (!*b->cpu_model || strcmp(b->cpu_model, n->cpu_model)) {
        snprintf(why, len, "different or unknown CPU model (libraries pick other kernels)");
        return why;
    }
    /* another compiler or library version may round differently */
    if (strcmp(base->system.compiler, next->system.compiler)) {
        snprintf(why, len, "compilers differ: '%.60s' vs '%.60s'", base->system.compiler,
                 next->system.compiler);
        return why;
    }
    if (strcmp(base->system.libraries, next->system.libraries)) {
        snprintf(why, len, "library versions differ (system.json)");
        return why;
    }
    /* the engine's own account of its precision, math mode, library kernels */
    if (strcmp(b->s.details, n->s.details)) {
        snprintf(why, len, "engine details differ: '%.80s' vs '%.80s'", b->s.details, n->s.details);
        return why;
    }
    return NULL;
}

/* v in `fixed` ("%.1f"), or in six significant digits when the fixed form
 * would be longer than a figure reads (1e308 images/s has 309 digits). */
static const char *figure(char *buf, size_t len, const char *fixed, double v)
{
    if (isfinite(v) && fabs(v) >= 1e12)
        snprintf(buf, len, "%.6g", v);
    else
        snprintf(buf, len, fixed, v);
    return buf;
}

static void table_row(const char *config, const char *metric, const char *base,
                      const char *next, const char *change, const char *verdict)
{
    printf("| %s | %s | %s | %s | %s | %s |\n", config, metric, base, next, change, verdict);
}

static void judge_pair(const compare_options *o, const run_files *base, const run_files *next,
                       const run_row *b, const run_row *n, tally *t)
{
    char name[512], cell_b[64], cell_n[64], change[64], verdict[256];
    describe_row(n, name, sizeof name);
    t->compared++;

    /* speed */
    const char *metric = "images/s";
    char metric_buf[96];
    double fig_b = b->s.images_per_second, fig_n = n->s.images_per_second;
    double sec_b = b->s.epoch_seconds_median, sec_n = n->s.epoch_seconds_median;
    double scale_b = 1, scale_n = 1;
    int speed_known = fig_b > 0 && fig_n > 0;
    const char *speed_why = "no images/s figure";
    int is_reference = o->relative_to && reference_row(base, o->relative_to, b) == b;
    if (o->relative_to && !is_reference) {
        snprintf(metric_buf, sizeof metric_buf, "images/s / %s", o->relative_to);
        metric = metric_buf;
        const run_row *rb = reference_row(base, o->relative_to, b);
        const run_row *rn = reference_row(next, o->relative_to, n);
        if (!rb || !rn) {
            speed_known = 0;
            speed_why = !rb ? "no ok reference row in BASE" : "no ok reference row in NEW";
        } else {
            scale_b = rb->s.images_per_second;
            scale_n = rn->s.images_per_second;
            fig_b /= scale_b;
            fig_n /= scale_n;
            sec_b /= rb->s.epoch_seconds_median;
            sec_n /= rn->s.epoch_seconds_median;
        }
    }
    if (is_reference) {
        figure(cell_b, sizeof cell_b, "%.1f", fig_b);
        figure(cell_n, sizeof cell_n, "%.1f", fig_n);
        figure(change, sizeof change, "%.3f", fig_n / fig_b);
        table_row(name, metric, cell_b, cell_n, change, "reference (not judged)");
    } else if (!speed_known) {
        table_row(name, metric, "-", "-", "-", speed_why);
        finding(t, "NOTE", name, "speed not compared: %s", speed_why);
    } else {
        double *sb = xcalloc((size_t)b->n_samples, sizeof(double));
        double *sn = xcalloc((size_t)n->n_samples, sizeof(double));
        int nb = b->n_samples, nn = n->n_samples;
        for (int i = 0; i < nb; i++)
            sb[i] = b->samples[i] / scale_b;
        for (int i = 0; i < nn; i++)
            sn[i] = n->samples[i] / scale_n;
        speed_verdict v = judge_speed(fig_b, fig_n, sb, nb, sn, nn, o->max_slowdown_pct, o->alpha);
        free(sb);
        free(sn);
        const char *fmt = o->relative_to ? "%.4f" : "%.1f";
        figure(cell_b, sizeof cell_b, fmt, fig_b);
        figure(cell_n, sizeof cell_n, fmt, fig_n);
        figure(change, sizeof change, "%.3f", fig_n / fig_b);
        char test[160];
        if (v.u_test_used)
            snprintf(test, sizeof test, "U test p=%.4f, %d vs %d samples", v.p, nb, nn);
        else if (nb == 0 || nn == 0)
            snprintf(test, sizeof test, "threshold alone: no per-epoch samples in %s",
                     nb ? "NEW" : nn ? "BASE" : "either run");
        else
            snprintf(test, sizeof test, "threshold alone: %d vs %d samples are too few for the U test",
                     nb, nn);
        /* slower: more time per image; faster: more images per second */
        const char *word = v.slowdown_pct >= 0 ? "slower" : "faster";
        double size = v.slowdown_pct >= 0 ? v.slowdown_pct : (fig_n / fig_b - 1) * 100;
        char size_text[32];
        snprintf(verdict, sizeof verdict, "%s%s%% %s (%s)", v.regression ? "REGRESSION " : "",
                 figure(size_text, sizeof size_text, "%.1f", size), word, test);
        table_row(name, metric, cell_b, cell_n, change, verdict);
        if (v.regression)
            finding(t, "REGRESSION", name, "%s %.1f%% slower, beyond the %g%% limit (%s)", metric,
                    v.slowdown_pct, o->max_slowdown_pct, test);
    }
    if (sec_b > 0 && sec_n > 0 && (speed_known || is_reference)) {
        const char *fmt = o->relative_to && !is_reference ? "%.4f" : "%.3f";
        figure(cell_b, sizeof cell_b, fmt, sec_b);
        figure(cell_n, sizeof cell_n, fmt, sec_n);
        figure(change, sizeof change, "%.3f", sec_n / sec_b);
        snprintf(metric_buf, sizeof metric_buf, "s/epoch%s%s", o->relative_to && !is_reference ? " / " : "",
                 o->relative_to && !is_reference ? o->relative_to : "");
        table_row("", metric_buf, cell_b, cell_n, change,
                  b->s.images_per_epoch == n->s.images_per_epoch ? "shown, not judged"
                                                             : "different epoch sizes");
    }

    /* accuracy, in percentage points */
    double drop = (b->s.final_test_accuracy - n->s.final_test_accuracy) * 100;
    snprintf(cell_b, sizeof cell_b, "%.4f", b->s.final_test_accuracy);
    snprintf(cell_n, sizeof cell_n, "%.4f", n->s.final_test_accuracy);
    snprintf(change, sizeof change, "%+.2f pt", -drop);
    if (isfinite(b->s.final_test_accuracy) && !isfinite(n->s.final_test_accuracy)) {
        table_row("", "test accuracy", cell_b, cell_n, "-", "REGRESSION: no accuracy in NEW");
        finding(t, "REGRESSION", name, "test accuracy missing in NEW (was %.4f)",
                b->s.final_test_accuracy);
    } else if (drop > o->max_accuracy_drop_points) {
        snprintf(verdict, sizeof verdict, "REGRESSION: %.2f points lower", drop);
        table_row("", "test accuracy", cell_b, cell_n, change, verdict);
        finding(t, "REGRESSION", name,
                "test accuracy %.4f -> %.4f, %.2f points lower, beyond the %g point limit",
                b->s.final_test_accuracy, n->s.final_test_accuracy, drop,
                o->max_accuracy_drop_points);
    } else {
        table_row("", "test accuracy", cell_b, cell_n, change, "ok");
    }

    /* train loss: deterministic for the same seed and settings */
    figure(cell_b, sizeof cell_b, "%.6f", b->s.final_train_loss);
    figure(cell_n, sizeof cell_n, "%.6f", n->s.final_train_loss);
    figure(change, sizeof change, "%.6f", n->s.final_train_loss / b->s.final_train_loss);
    char why[256];
    const char *incomparable = numerics_incomparable(base, next, b, n, why, sizeof why);
    double diff = fabs(n->s.final_train_loss - b->s.final_train_loss);
    /* the CSV prints 6 decimals: allow one unit of the last digit as well */
    int changed = !(diff <= o->loss_tolerance * fabs(b->s.final_train_loss) + 1e-6);
    if (!changed) {
        table_row("", "train loss", cell_b, cell_n, change, diff == 0 ? "identical" : "same");
    } else if (incomparable) {
        snprintf(verdict, sizeof verdict, "differs; not judged (%.200s)", incomparable);
        table_row("", "train loss", cell_b, cell_n, change, verdict);
    } else {
        snprintf(verdict, sizeof verdict, "CHANGED NUMERICS%s",
                 o->numerics_gate ? "" : " (reported, not gated)");
        table_row("", "train loss", cell_b, cell_n, change, verdict);
        finding(
            t, o->numerics_gate ? "NUMERICS" : "NOTE", name,
            "final train loss %s -> %s (relative change %.2e, tolerance %.0e) with the same "
            "seed, options, epochs and CPU: the arithmetic changed",
            cell_b, cell_n, diff / fabs(b->s.final_train_loss), o->loss_tolerance);
    }
}

/* Rows trained differently (trained_differently says why): shown, with
 * their figures, and not judged on any metric. */
static void judge_not_alike(const run_row *b, const run_row *n, const char *why, tally *t)
{
    char name[512], cell_b[64], cell_n[64], verdict[256];
    describe_row(is_ok(b) ? b : n, name, sizeof name);
    t->compared++;
    snprintf(verdict, sizeof verdict, "not compared (%.200s)", why);
    if (is_ok(b) && is_ok(n)) {
        figure(cell_b, sizeof cell_b, "%.1f", b->s.images_per_second);
        figure(cell_n, sizeof cell_n, "%.1f", n->s.images_per_second);
        table_row(name, "images/s", cell_b, cell_n, "-", verdict);
        snprintf(cell_b, sizeof cell_b, "%.4f", b->s.final_test_accuracy);
        snprintf(cell_n, sizeof cell_n, "%.4f", n->s.final_test_accuracy);
        table_row("", "test accuracy", cell_b, cell_n, "-", "not compared");
        figure(cell_b, sizeof cell_b, "%.6f", b->s.final_train_loss);
        figure(cell_n, sizeof cell_n, "%.6f", n->s.final_train_loss);
        table_row("", "train loss", cell_b, cell_n, "-", "not compared");
    } else {
        table_row(name, "status", status_name(b->s.status), status_name(n->s.status), "-",
                  verdict);
    }
    finding(t, "NOTE", name, "not compared: %s", why);
}

static void judge_status(const run_row *b, const run_row *n, tally *t)
{
    char name[512];
    describe_row(is_ok(b) ? b : n, name, sizeof name);
    t->compared++;
    const char *was = status_name(b->s.status), *now = status_name(n->s.status);
    table_row(name, "status", was, now, "-",
              is_ok(b) && !is_skipped(n) ? "REGRESSION" : "not compared");
    if (is_ok(b) && is_skipped(n))
        finding(t, "NOTE", name, "skipped in NEW (%s); not compared", n->s.message);
    else if (is_ok(b))
        finding(t, "REGRESSION", name, "ok in BASE, %s in NEW: %s", now,
                *n->s.message ? n->s.message : "(no message)");
    else if (is_ok(n))
        finding(t, "NOTE", name, "%s in BASE, ok in NEW", was);
    else
        finding(t, "NOTE", name, "%s in BASE, %s in NEW", was, now);
}

static void print_samples_line(const run_files *run)
{
    int lo = -1, hi = -1;
    for (int i = 0; i < run->n_rows; i++) {
        int s = run->rows[i].n_samples;
        if (!is_ok(&run->rows[i]))
            continue;
        lo = lo < 0 || s < lo ? s : lo;
        hi = s > hi ? s : hi;
    }
    printf("%-4s %s (%d rows; ", run->label, run->summary_path, run->n_rows);
    if (!run->have_epochs)
        printf("no epochs.csv beside it, so no samples for the U test)\n");
    else if (lo == hi)
        printf("%d per-epoch samples per row)\n", lo < 0 ? 0 : lo);
    else
        printf("%d to %d per-epoch samples per row)\n", lo, hi);
}

int compare_runs(const compare_options *o, run_files *base, run_files *next)
{
    if (o->relative_to) {
        for (int s = 0; s < 2; s++) {
            const run_files *run = s ? next : base;
            int found = 0;
            for (int i = 0; i < run->n_rows; i++)
                found |= !strcmp(run->rows[i].s.key.backend, o->relative_to);
            if (!found) {
                fprintf(stderr, "bench compare: --relative-to %s: %s has no %s row\n",
                        o->relative_to, run->summary_path, o->relative_to);
                return 2;
            }
        }
    }
    /* Pair exactly first, then by the loose key when a row did not run. */
    int *partner = xcalloc((size_t)base->n_rows, sizeof(int));
    for (int i = 0; i < base->n_rows; i++) {
        partner[i] = index_find(next, &base->rows[i].s.key, 1, 1);
        if (partner[i] >= 0)
            next->rows[partner[i]].paired = base->rows[i].paired = 1;
    }
    for (int i = 0; i < base->n_rows; i++) {
        run_row *b = &base->rows[i];
        if (partner[i] >= 0)
            continue;
        /* the earliest unpaired row of the loose key for which one of the
         * two did not finish */
        int found = -1;
        for (int j = next->bucket ? next->bucket[loose_key_hash(&b->s.key) & (next->n_buckets - 1)]
                                  : -1;
             j >= 0; j = next->chain[j]) {
            run_row *n = &next->rows[j];
            if (!n->paired && same_loose_key(&b->s.key, &n->s.key) && (!is_ok(b) || !is_ok(n)))
                found = j;
        }
        if (found >= 0) {
            partner[i] = found;
            next->rows[found].paired = b->paired = 1;
        }
    }
    int pairs = 0;
    for (int i = 0; i < base->n_rows; i++)
        pairs += partner[i] >= 0;
    if (pairs == 0) {
        fprintf(stderr,
                "bench compare: no common rows: %s and %s share no configuration "
                "(backend, workload, precision, batch_size, threads, devices, replicas, ranks)\n",
                base->summary_path, next->summary_path);
        free(partner);
        return 2;
    }

    print_samples_line(base);
    print_samples_line(next);
    if (o->relative_to)
        printf("speed: images/s divided by %s's images/s in the same run, so machine speed cancels\n",
               o->relative_to);
    printf("limits: slowdown %g%% (and U test at alpha %g when the samples allow), test accuracy "
           "drop %g points, numerics %s\n\n",
           o->max_slowdown_pct, o->alpha, o->max_accuracy_drop_points,
           o->numerics_gate ? "gated" : "reported only");
    printf("| configuration | metric | BASE | NEW | NEW/BASE | verdict |\n");
    printf("|---|---|---:|---:|---:|---|\n");

    /* The table first; the findings gathered meanwhile follow it. */
    char *findings_text = NULL;
    size_t findings_len = 0;
    tally t = {0};
    t.findings = open_memstream(&findings_text, &findings_len);
    for (int i = 0; i < base->n_rows; i++) {
        if (partner[i] < 0)
            continue;
        const run_row *b = &base->rows[i], *n = &next->rows[partner[i]];
        char why[256];
        if (trained_differently(base, next, b, n, why, sizeof why))
            judge_not_alike(b, n, why, &t);
        else if (is_ok(b) && is_ok(n))
            judge_pair(o, base, next, b, n, &t);
        else
            judge_status(b, n, &t);
    }
    for (int s = 0; s < 2; s++) {
        const run_files *run = s ? next : base;
        for (int i = 0; i < run->n_rows; i++) {
            const run_row *r = &run->rows[i];
            if (r->paired)
                continue;
            char name[512];
            describe_row(r, name, sizeof name);
            finding(&t, "NOTE", name, "only in %s (%s); not compared", run->label,
                    status_name(r->s.status));
        }
    }
    if (t.findings && fclose(t.findings) == 0 && findings_len) {
        printf("\n");
        fwrite(findings_text, 1, findings_len, stdout);
    }
    free(findings_text);
    free(partner);
    int rc = t.regressions || t.numerics ? 1 : 0;
    printf("\ncompare: %d configuration%s compared, %d regression%s, %d numerics change%s, "
           "%d note%s -> exit %d\n",
           t.compared, t.compared == 1 ? "" : "s", t.regressions, t.regressions == 1 ? "" : "s",
           t.numerics, t.numerics == 1 ? "" : "s", t.notes, t.notes == 1 ? "" : "s", rc);
    return rc;
}
