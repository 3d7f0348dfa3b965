/* Reports: statistics and evaluation statistics on known inputs and the
 * summary table's formats, checked with this test's own readers
 * (tests/report_checks.h). Short real runs: tests/test_report_runs.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/run/peak.h"
#include "harness/run/report.h"
#include "harness/common/stats.h"
#include "tests/report_checks.h"

/* ---- statistics ------------------------------------------------------ */

static void stats_on_known_samples(void **state)
{
    (void)state;
    const double odd[] = {3, 100, 1, 4, 2};
    sample_stats s = stats_of(odd, 5);
    assert_int_equal(s.n, 5);
    assert_close(s.median, 3, 1e-12);
    assert_close(s.mean, 22, 1e-12);
    assert_close(s.stddev, 43.617656975128774, 1e-9); /* n - 1, as numpy ddof=1 */
    assert_close(s.min, 1, 0);
    assert_close(s.max, 100, 0);
    assert_close(s.cv, 43.617656975128774 / 22, 1e-9);
    assert_close(odd[0], 3, 0); /* the input keeps its order */
    assert_close(odd[1], 100, 0);

    const double even[] = {4, 1, 3, 2};
    s = stats_of(even, 4);
    assert_close(s.median, 2.5, 1e-12);
    assert_close(s.mean, 2.5, 1e-12);
    assert_close(s.stddev, sqrt(5.0 / 3.0), 1e-12);

    const double one[] = {7};
    s = stats_of(one, 1);
    assert_close(s.median, 7, 0);
    assert_close(s.stddev, 0, 0);

    s = stats_of(NULL, 0);
    assert_int_equal(s.n, 0);
    assert_close(s.median, 0, 0);
}

static void warmup_rule(void **state)
{
    (void)state;
    assert_int_equal(warmup_epochs(1), 0);
    assert_int_equal(warmup_epochs(2), 0);
    assert_int_equal(warmup_epochs(3), 1);
    assert_int_equal(warmup_epochs(10), 1);

    const double times[] = {9.0, 1.0, 1.2, 1.1};
    double out[4] = {0};
    /* 4 planned, 4 done: epoch 1 left out */
    assert_int_equal(timed_samples(times, 4, 4, out), 3);
    assert_close(out[0], 1.0, 0);
    assert_close(out[2], 1.1, 0);
    /* 2 planned: every epoch counts */
    assert_int_equal(timed_samples(times, 2, 2, out), 2);
    assert_close(out[0], 9.0, 0);
    /* 10 planned but stopped after the warm-up epoch: keep what there is */
    assert_int_equal(timed_samples(times, 1, 10, out), 1);
    assert_close(out[0], 9.0, 0);
    assert_int_equal(timed_samples(times, 0, 10, out), 0);
}

/* ---- evaluation statistics --------------------------------------------- */

/* m: rows are true classes, columns predictions; count: images scored. */
static eval_stats eval_stats_of_3x3(const long m[3][3], long count)
{
    eval_counts ev;
    memset(&ev, 0, sizeof ev);
    ev.classes = 3;
    ev.count = count;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            ev.confusion[i * 3 + j] = m[i][j];
    return eval_stats_of(&ev);
}

static void eval_stats_on_known_matrix(void **state)
{
    (void)state;
    /* rows: true class, columns: predicted */
    static const long m[3][3] = {{5, 1, 0}, {2, 3, 1}, {0, 0, 4}};
    eval_stats s = eval_stats_of_3x3(m, 16);
    assert_close(s.accuracy, 12.0 / 16.0, 1e-12);
    /* precision 5/7, 3/4, 4/5; recall 5/6, 3/6, 4/4 (scikit-learn's macro) */
    assert_close(s.macro_precision, 0.7547619047619047, 1e-12);
    assert_close(s.macro_recall, 0.7777777777777778, 1e-12);
    assert_close(s.macro_f1, 0.7527065527065527, 1e-12);
}

static void eval_stats_absent_and_unpredicted_classes(void **state)
{
    (void)state;
    /* class 1 never predicted (precision 0), class 2 never occurs (left
     * out of the macro averages) */
    static const long m[3][3] = {{4, 0, 0}, {2, 0, 0}, {0, 0, 0}};
    eval_stats s = eval_stats_of_3x3(m, 6);
    assert_close(s.accuracy, 4.0 / 6.0, 1e-12);
    assert_close(s.macro_precision, (4.0 / 6.0 + 0) / 2, 1e-12);
    assert_close(s.macro_recall, (1.0 + 0) / 2, 1e-12);
    assert_close(s.macro_f1, (0.8 + 0) / 2, 1e-12);

    s = eval_stats_of_3x3(m, 0); /* nothing scored */
    assert_close(s.accuracy, 0, 0);
}

static void peak_and_percent(void **state)
{
    (void)state;
    assert_close(percent_of_peak(50, 200), 25, 1e-12);
    assert_close(percent_of_peak(50, 0), 0, 0);
    assert_close(percent_of_peak(0, 200), 0, 0);
    peak_measure a = cpu_peak_gflops(1);
    assert_true((a.gflops > 0 && isfinite(a.gflops)) || (a.uncertain && isnan(a.gflops)));
    assert_non_null(a.source);
    peak_measure b = cpu_peak_gflops(1); /* cached: measured once per run */
    assert_true(a.gflops == b.gflops || (isnan(a.gflops) && isnan(b.gflops)));
}

/* ---- the summary table ------------------------------------------------- */

static void configuration_labels(void **state)
{
    (void)state;
    char label[64];
    config_label_of("naive", 1, 1, "fp32", 64, 0, label, sizeof label);
    assert_string_equal(label, "naive");
    config_label_of("naive", 2, 1, "fp32", 64, 0, label, sizeof label);
    assert_string_equal(label, "naive-x2");
    config_label_of("blas", 4, 2, "fp32", 64, 0, label, sizeof label);
    assert_string_equal(label, "blas-x4-2ranks");
    row_key k = {.backend = "cuda", .replicas = 1, .ranks = 1, .precision = "bf16",
                 .batch_size = 512};
    config_label(&k, label, sizeof label);
    assert_string_equal(label, "cuda");
    /* the axes the run varies name the row, so confusion files do not collide */
    k.label_axes = LABEL_PRECISION;
    config_label(&k, label, sizeof label);
    assert_string_equal(label, "cuda-bf16");
    k.label_axes = LABEL_BATCH;
    config_label(&k, label, sizeof label);
    assert_string_equal(label, "cuda-b512");
    k.label_axes = LABEL_PRECISION | LABEL_BATCH;
    k.replicas = 2;
    config_label(&k, label, sizeof label);
    assert_string_equal(label, "cuda-x2-bf16-b512");
    config_label_of("naive", 16, 1, "fp32", 64, LABEL_BATCH, label, 6); /* cut short */
    assert_string_equal(label, "naive");
}

/* The summary as printed in fmt; what goes to stderr (the notes, in csv
 * and json) is dropped. */
static char *print_to_string(output_format fmt, const summary_row *rows, int n)
{
    static results res; /* only its system record is read */
    memset(&res, 0, sizeof res);
    snprintf(res.sys.cpu_model, sizeof res.sys.cpu_model, "Test CPU");
    snprintf(res.sys.gpu_model, sizeof res.sys.gpu_model, "none");
    FILE *f = tmpfile();
    assert_non_null(f);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    FILE *null = fopen("/dev/null", "w");
    if (null && saved >= 0)
        dup2(fileno(null), STDERR_FILENO);
    print_summary(f, fmt, rows, n, &res);
    fflush(stderr);
    if (saved >= 0) {
        dup2(saved, STDERR_FILENO);
        close(saved);
    }
    if (null)
        fclose(null);
    long len = ftell(f);
    rewind(f);
    char *text = calloc(1, (size_t)len + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    return text;
}

static void summary_formats(void **state)
{
    (void)state;
    summary_row rows[2];
    memset(rows, 0, sizeof rows);
    rows[0].key = (row_key){.backend = "naive", .precision = "fp32", .threads = 1};
    rows[0].status = STATUS_OK;
    rows[0].epochs = 4;
    rows[0].repeats = 1;
    rows[0].epoch_seconds_median = 2.5;
    rows[0].epoch_seconds_stddev = 0.25;
    rows[0].timed_samples = 3;
    rows[0].warmup_epochs = 1;
    rows[0].images_per_second = 24000;
    rows[0].speedup_vs_naive = 1;
    rows[0].final_test_accuracy = 0.85;
    rows[0].target_accuracy = 0.9;
    rows[0].time_to_target_seconds = -1;
    rows[0].peak_gflops = 100;
    rows[0].peak_source = "test probe";
    rows[0].gflops_per_second = 25;
    rows[0].percent_of_peak = 25;
    rows[0].memory_bytes = 3 * 1048576.0;
    rows[0].memory_source = "host heap held by the engine";
    rows[1].key = (row_key){.backend = "cuda", .precision = "fp32"};
    rows[1].status = STATUS_SKIPPED;
    rows[1].message = "no \"GPU\" here";
    rows[1].time_to_target_seconds = -1;
    rows[1].final_test_accuracy = NAN;
    /* what a worker holds: 0 is a measurement (row 0), NOT_MEASURED empty */
    rows[1].worker_params_bytes = rows[1].worker_grads_bytes = NOT_MEASURED;
    rows[1].worker_opt_state_bytes = rows[1].worker_activation_bytes = NOT_MEASURED;
    rows[1].worker_workspace_bytes = NOT_MEASURED;

    char *md = print_to_string(FORMAT_MD, rows, 2);
    assert_non_null(strstr(md, "| naive | fp32 | 1 | 0 | 2.500 ± 0.250 | 24000 | 25.00 | 25.0 |"
                               " 1.00x | 0.8500 | not reached | ok | 3.0 |"));
    assert_non_null(strstr(md, "| cuda | fp32 | 0 | 0 | - |"));
    assert_non_null(strstr(md, "epochs 2-4"));
    assert_non_null(strstr(md, "100.0 GFLOP/s (test probe)"));
    assert_non_null(strstr(md, "accuracy 0.8500"));
    free(md);

    char *json = print_to_string(FORMAT_JSON, rows, 2);
    char keys[8][64];
    int n_keys = 0;
    assert_int_equal(json_valid(json, keys, 8, &n_keys), 0);
    assert_non_null(strstr(json, "\"final_test_accuracy\": null")); /* NaN is not JSON */
    assert_non_null(strstr(json, "\"message\": \"no \\\"GPU\\\" here\""));
    free(json);

    /* --format csv: summary.csv's columns, in its order */
    char *csv = print_to_string(FORMAT_CSV, rows, 2);
    const char *header =
        "backend,workload,precision,threads,devices,replicas,ranks,batch_size,optimizer,epochs,"
        "repeats,images_per_epoch,epoch_seconds_median,epoch_seconds_mean,epoch_seconds_stddev,"
        "images_per_second,gflops_per_second,percent_of_peak,speedup_vs_naive,final_train_loss,"
        "final_test_accuracy,macro_precision,macro_recall,macro_f1,time_to_target_seconds,"
        "peak_memory_bytes,details,status,message,cpu_model,host,git_commit,date,timed_samples,"
        "warmup_epochs,epoch_seconds_min,epoch_seconds_max,peak_gflops,peak_source,gpu_model,"
        "target_accuracy,scaling_efficiency,memory_bytes,memory_source,parallel,split,workers,"
        "micro_batches,prefetch,worker_params_bytes,worker_grads_bytes,worker_opt_state_bytes,"
        "worker_activation_bytes,worker_workspace_bytes,peak_arithmetic\n";
    assert_true(strncmp(csv, header, strlen(header)) == 0);
    assert_non_null(strstr(csv, "\nnaive,,fp32,1,0,0,0,0,,4,1,0,2.500000,0.000000,0.250000,"
                                "24000.0,25.000,25.00,1.000,0.000000,0.850000,"));
    assert_non_null(strstr(csv, ",ok,,Test CPU,,,,3,1,0.000000,0.000000,100.0,test probe,none,"
                                "0.9000,,3145728,host heap held by the engine,,,0,0,0,0,0,0,0,0,\n"));
    /* no scaling efficiency: empty */
    assert_non_null(strstr(csv, ",skipped,\"no \"\"GPU\"\" here\",Test CPU,"));
    assert_non_null(strstr(csv, ",,,0,0,0,,,,,,\n")); /* the skipped row's last columns */
    free(csv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stats_on_known_samples),
        cmocka_unit_test(warmup_rule),
        cmocka_unit_test(eval_stats_on_known_matrix),
        cmocka_unit_test(eval_stats_absent_and_unpredicted_classes),
        cmocka_unit_test(peak_and_percent),
        cmocka_unit_test(configuration_labels),
        cmocka_unit_test(summary_formats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
