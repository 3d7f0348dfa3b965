/* The roofline chart's data (roofline.h). */
#include "harness/tools/roofline.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/formats/csv.h"
#include "harness/run/columns.h"
#include "harness/run/label.h"
#include "harness/run/status.h"

layer_traffic roofline_traffic(const workload *w, int i, int backward, int batch,
                               element_sizes sizes)
{
    const layer *l = &w->layers[i];
    const double in = shape3_size(l->in), out = shape3_size(l->out), b = batch;
    const double params = (double)(l->weight_count + l->bias_count);
    const double act = sizes.activation, op = sizes.operand;
    /* the first layer with parameters has no input gradient to make */
    int first = 1;
    for (int k = 0; k < i; k++)
        first &= w->layers[k].kind != LAYER_CONV && w->layers[k].kind != LAYER_DENSE;
    double ops = 0, bytes = 0;
    switch (l->kind) {
    case LAYER_CONV:
    case LAYER_DENSE: {
        /* multiply-adds of the forward product, each 2 operations */
        const double fwd = 2.0 * out * (l->kind == LAYER_CONV
                                             ? (double)l->in.c * l->kernel * l->kernel
                                             : in);
        ops = backward ? fwd * (first ? 1 : 2) : fwd;
        /* forward: x in, y out (activations), the weights once (the
         * product's operands); backward: x and dy in, dx out (not for the
         * first), the weights in, their gradient out (summed as
         * activations are) */
        bytes = backward ? act * b * (in + out + (first ? 0 : in)) + (op + act) * params
                         : act * b * (in + out) + op * params;
        break;
    }
    case LAYER_MAXPOOL:
        /* a comparison per window element; backward routes each dy */
        ops = backward ? out : out * l->kernel * l->kernel;
        bytes = act * (backward ? b * (2 * in + out) : b * (in + out));
        break;
    case LAYER_RELU:
        ops = out;
        bytes = act * (backward ? b * 3 * out : b * 2 * out);
        break;
    }
    return (layer_traffic){ops * b, bytes};
}

element_sizes roofline_element_sizes(const char *precision)
{
    if (!strcmp(precision, "fp64"))
        return (element_sizes){8, 8};
    /* the CPU rows' bf16 and fp16 round the products' operands to 2 bytes;
     * activations, gradients between layers and the sums stay fp32 */
    if (!strcmp(precision, "bf16") || !strcmp(precision, "fp16"))
        return (element_sizes){4, 2};
    return (element_sizes){4, 4};
}

/* ---- system.json: the ceilings ------------------------------------------- */

/* The number after "key": in the object that starts at obj (up to its '}'),
 * NaN when absent or null. */
static double number_in(const char *obj, const char *key)
{
    const char *end = strchr(obj, '}');
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\": ", key);
    const char *p = strstr(obj, quoted);
    if (!p || (end && p > end))
        return NAN;
    char *stop;
    double v = strtod(p + strlen(quoted), &stop);
    return stop == p + strlen(quoted) ? NAN : v;
}

/* The object of array `array` in json whose "key" is "value" (value NULL:
 * whose "threads" is threads), or NULL. */
static const char *object_in(const char *json, const char *array, const char *key,
                             const char *value, int threads)
{
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\": [", array);
    const char *p = strstr(json, quoted);
    if (!p)
        return NULL;
    const char *end = strchr(p, ']');
    for (p = strchr(p, '{'); p && (!end || p < end); p = strchr(p + 1, '{')) {
        if (value) {
            char want[96];
            snprintf(want, sizeof want, "\"%s\": \"%s\"", key, value);
            const char *close = strchr(p, '}'), *hit = strstr(p, want);
            if (hit && close && hit < close)
                return p;
        } else if (number_in(p, "threads") == threads) {
            return p;
        }
    }
    return NULL;
}

/* The peak of arithmetic `arith` on `threads` threads: the table's figure
 * for one thread, or for all of them. */
static double table_peak(const char *json, const char *arith, int threads, int *uncertain)
{
    const char *o = object_in(json, "cpu_peaks", "arithmetic", arith, 0);
    if (!o)
        return NAN;
    double peak = number_in(o, threads == 1 ? "one_thread_gflops" : "all_threads_gflops");
    if (peak > 0)
        return peak;
    /* an uncertain probe: its best trial, drawn as such */
    *uncertain = 1;
    return number_in(o, threads == 1 ? "one_thread_best_trial_gflops"
                                     : "all_threads_best_trial_gflops");
}

static double bandwidth(const char *json, int threads)
{
    const char *one = object_in(json, "memory_bandwidth", NULL, NULL, 1);
    const char *all = strstr(json, "\"memory_bandwidth\": [");
    /* the last entry is every CPU's */
    const char *last = NULL;
    for (const char *p = all ? strchr(all, '{') : NULL; p && p < strchr(all, ']');
         p = strchr(p + 1, '{'))
        last = p;
    const char *o = threads == 1 ? one : last;
    return o ? number_in(o, "gbytes_per_second") : NAN;
}

/* ---- the data files ------------------------------------------------------- */

/* The profiled row's points, appended to pts; the number written (a row
 * without a roof still leaves its points: the chart draws the rows that
 * have both). */
static int write_points(FILE *pts, const char *dir, const char *label, const summary_row *s)
{
    workload w;
    if (workload_get(s->key.workload, &w) != 0)
        return 0;
    char path[PATH_MAX + 64], err[256];
    snprintf(path, sizeof path, "%s/profile-%s.csv", dir, label);
    csv_table t;
    if (csv_read(path, &t, err, sizeof err) != 0)
        return 0;
    const int name = csv_column(&t, "layer"), fwd = csv_column(&t, "forward_ms"),
              bwd = csv_column(&t, "backward_ms");
    int n = 0;
    for (int r = 0; r < t.n_rows && name >= 0 && fwd >= 0 && bwd >= 0; r++) {
        int i = 0;
        while (i < w.n_layers && strcmp(w.layers[i].name, t.rows[r][name]) != 0)
            i++;
        if (i == w.n_layers)
            continue; /* loss and update are not layers */
        for (int pass = 0; pass < 2; pass++) {
            const double ms = atof(t.rows[r][pass ? bwd : fwd]);
            layer_traffic lt =
                roofline_traffic(&w, i, pass, s->key.batch_size,
                                 roofline_element_sizes(s->key.precision));
            if (!(ms > 0) || !(lt.ops > 0) || !(lt.bytes > 0))
                continue;
            fprintf(pts, "%s,%s,%s,%.6g,%.6g\n", label, w.layers[i].name,
                    pass ? "backward" : "forward", lt.ops / lt.bytes, lt.ops / (ms * 1e-3) * 1e-9);
            n++;
        }
    }
    csv_free(&t);
    return n;
}

/* The row's roof: up the bandwidth's slope to the ridge, then flat. */
static int write_ceiling(FILE *f, const char *label, const char *arith, double peak, double bw)
{
    if (!(peak > 0 && isfinite(peak)) || !(bw > 0 && isfinite(bw)))
        return 0;
    const double ridge = peak / bw;
    fprintf(f, "%s,%s,%.6g,%.6g\n", label, arith, ridge / 1000, bw * ridge / 1000);
    fprintf(f, "%s,%s,%.6g,%.6g\n", label, arith, ridge, peak);
    fprintf(f, "%s,%s,%.6g,%.6g\n\n", label, arith, ridge * 1000, peak); /* a line each */
    return 1;
}

static unsigned label_axes_of(const result_table *t)
{
    const column *prec = SUMMARY_COLUMN(key.precision), *batch = SUMMARY_COLUMN(key.batch_size);
    int precisions = 0, batches = 0;
    for (int r = 1; r < t->csv.n_rows; r++) {
        precisions |= strcmp(result_text(t, r, prec), result_text(t, 0, prec)) != 0;
        batches |= strcmp(result_text(t, r, batch), result_text(t, 0, batch)) != 0;
    }
    return (precisions ? LABEL_PRECISION : 0) | (batches ? LABEL_BATCH : 0);
}

int roofline_write_data(const char *dir, const char *profiled, char *msg, size_t msg_len)
{
    char path[PATH_MAX + 64], err[512];
    snprintf(path, sizeof path, "%s/system.json", dir);
    size_t len;
    char *json = read_text_file(path, &len, err, sizeof err);
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    result_table t;
    if (!json || result_table_read(&t, summary_columns, path, err, sizeof err) != 0) {
        snprintf(msg, msg_len, "%s", json ? err : "no system.json with the run's peaks");
        free(json);
        if (json)
            result_table_free(&t);
        return 0;
    }
    snprintf(path, sizeof path, "%s/roofline.dat", dir);
    FILE *pts = fopen(path, "w");
    snprintf(path, sizeof path, "%s/roofline-ceilings.dat", dir);
    FILE *roofs = pts ? fopen(path, "w") : NULL;
    int points = 0, rc = 0;
    if (!pts || !roofs) {
        snprintf(msg, msg_len, "cannot write %s: %s", path, strerror(errno));
        rc = -1;
        goto done;
    }
    fprintf(pts, "label,layer,pass,intensity,gflops\n");
    fprintf(roofs, "label,arithmetic,intensity,gflops\n");
    const unsigned axes = label_axes_of(&t);
    for (int r = 0; r < t.csv.n_rows; r++) {
        summary_row s;
        summary_row_init(&s);
        s.key = (row_key){.backend = "", .workload = "", .precision = "", .optimizer = ""};
        result_table_row(&t, r, &s);
        char label[128], spaced[132];
        config_label_of(s.key.backend, s.key.replicas, s.key.ranks, s.key.precision,
                        s.key.batch_size, axes, label, sizeof label);
        snprintf(spaced, sizeof spaced, " %s ", label);
        char list[1100];
        snprintf(list, sizeof list, " %s ", profiled);
        if (s.status != STATUS_OK || !strstr(list, spaced) || s.key.devices > 0)
            continue;
        const int n = write_points(pts, dir, label, &s);
        if (n == 0)
            continue;
        const char *arith = s.peak_arithmetic && *s.peak_arithmetic ? s.peak_arithmetic : "fp32";
        int uncertain = 0;
        const double peak = s.peak_gflops > 0 ? s.peak_gflops
                                              : table_peak(json, arith, s.key.threads, &uncertain);
        char roof[64];
        snprintf(roof, sizeof roof, "%s%s", arith, uncertain ? "(uncertain)" : "");
        /* a row without both ceilings has no roof to be drawn against */
        if (write_ceiling(roofs, label, roof, peak, bandwidth(json, s.key.threads)))
            points += n;
    }
    if (!points)
        snprintf(msg, msg_len, "no profiled CPU row with its peak and the memory bandwidth "
                               "measured (--no-peak?)");
done:
    if (roofs && fclose(roofs) != 0 && rc == 0)
        rc = -1;
    if (pts && fclose(pts) != 0 && rc == 0)
        rc = -1;
    result_table_free(&t);
    free(json);
    return rc < 0 ? -1 : points > 0;
}
