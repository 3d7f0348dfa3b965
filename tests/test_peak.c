/* The CPU peak probe on a machine with a busy neighbour: a duty-cycled
 * spinner this test starts holds one core most of the time while the probe
 * runs, and the figure must stay near the unloaded one or say it is
 * uncertain; and a rate above the peak must never leave a percentage over
 * 100 or a peak below the rate. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/cpu.h"
#include "harness/run/columns.h"
#include "harness/run/peak.h"
#include "harness/run/results.h"
#include "harness/tools/roofline.h"

/* How far below the unloaded figure a loaded one may fall before it must
 * call itself uncertain. */
#define LOADED_TOLERANCE 0.15
/* The neighbour: busy 140 ms of every 200 ms on one core. */
#define BUSY_MS 140
#define PERIOD_MS 200

static int online_cpus(void)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return 1;
    return CPU_COUNT(&allowed);
}

/* The last CPU this process may use, where the spinner goes. */
static int last_cpu(void)
{
    cpu_set_t allowed;
    int last = 0;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &allowed))
                last = c;
    return last;
}

static pid_t start_spinner(int cpu)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0)
        _exit(3);
    volatile double sink = 0;
    for (;;) {
        double until = now_seconds() + BUSY_MS * 1e-3;
        while (now_seconds() < until)
            sink = sink * 0.5 + 1;
        struct timespec rest = {0, (PERIOD_MS - BUSY_MS) * 1000000L};
        nanosleep(&rest, NULL);
    }
}

static void stop_spinner(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* The peak of `threads` threads measured in a fresh process (the probe
 * caches per process), with whether it was uncertain. */
static peak_measure fresh_peak(int threads)
{
    int fds[2];
    peak_measure m = {0};
    if (pipe(fds) != 0)
        return m;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        peak_measure c = cpu_peak_gflops(threads);
        double out[4] = {c.gflops, c.uncertain, c.kernel.best, c.kernel.trials};
        ssize_t w = write(fds[1], out, sizeof out);
        _exit(w == (ssize_t)sizeof out ? 0 : 1);
    }
    close(fds[1]);
    double in[4];
    if (pid > 0 && read(fds[0], in, sizeof in) == (ssize_t)sizeof in) {
        m.gflops = in[0];
        m.uncertain = (int)in[1];
        m.kernel.best = in[2];
        m.kernel.trials = (int)in[3];
    }
    close(fds[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return m;
}

static void print_peak(const char *what, peak_measure m)
{
    print_message("%s: %s %.1f GFLOP/s (C kernel best %.1f of %d trials)\n", what,
                  m.uncertain ? "uncertain," : "", m.uncertain ? m.kernel.best : m.gflops,
                  m.kernel.best, m.kernel.trials);
}

/* All cores, unloaded and then with the spinner on one of them: the loaded
 * figure is within LOADED_TOLERANCE of the unloaded one, or uncertain. The
 * machine may be shared, so one more pair is measured before failing. */
static void busy_neighbour(void **state)
{
    (void)state;
    const int threads = online_cpus();
    if (threads < 2)
        skip(); /* the spinner would share the probe's only core */
    int ok = 0, compared = 0;
    for (int attempt = 0; attempt < 2 && !ok; attempt++) {
        peak_measure quiet = fresh_peak(threads);
        pid_t spinner = start_spinner(last_cpu());
        assert_true(spinner > 0);
        peak_measure loaded = fresh_peak(threads);
        stop_spinner(spinner);
        print_peak("unloaded", quiet);
        print_peak("one core busy 140 ms of 200", loaded);
        assert_true(quiet.uncertain || quiet.gflops > 0);
        assert_true(loaded.uncertain || loaded.gflops > 0);
        /* uncertain is only ever said with no figure */
        assert_true(!loaded.uncertain || isnan(loaded.gflops));
        if (quiet.uncertain)
            continue; /* no unloaded figure to hold the loaded one to */
        compared = 1;
        ok = loaded.uncertain || loaded.gflops >= (1 - LOADED_TOLERANCE) * quiet.gflops;
    }
    if (!compared)
        skip(); /* other load all along: the unloaded probe never settled */
    assert_true(ok);
}

/* A row faster than the peak has the probe measure again, and if it still
 * loses the peak is uncertain: never a percentage over 100, never a peak
 * below a measured rate. */
static void faster_row(void **state)
{
    (void)state;
    setenv("LB_PEAK_SECONDS", "0.3", 1); /* the rules, not the figure: short rounds */
    peak_measure before = cpu_peak_gflops(1);
    assert_true(before.kernel.trials + before.kernel.waited > 0);
    if (!before.uncertain) {
        /* a rate below the peak leaves it as it was, with no more rounds */
        peak_measure same = cpu_peak_check(1, 0.5 * before.gflops, "a slow row");
        assert_false(same.uncertain);
        assert_true(same.gflops == before.gflops);
        assert_int_equal(same.kernel.rounds, before.kernel.rounds);

        const double fast = 1.10 * before.gflops;
        peak_measure after = cpu_peak_check(1, fast, "a fast row");
        assert_true(after.kernel.rounds > before.kernel.rounds); /* measured again */
        if (after.uncertain) {
            assert_true(isnan(after.gflops));
            assert_non_null(strstr(after.source, "peak uncertain"));
            assert_non_null(strstr(after.source, "a fast row"));
        } else {
            assert_true(after.gflops >= fast);
            assert_true(percent_of_peak(fast, after.gflops) <= 100);
        }
    } else {
        /* a busy machine: the probe said so, with no figure */
        assert_true(isnan(before.gflops));
        assert_non_null(strstr(before.source, "peak uncertain"));
    }
    /* ten times the best trial: no further round can find that */
    const double impossible = 10 * fmax(before.kernel.best, before.kernel.best_waited);
    peak_measure beaten = cpu_peak_check(1, impossible, "an impossible row");
    assert_true(beaten.uncertain && isnan(beaten.gflops));
    assert_true(isnan(percent_of_peak(impossible, beaten.gflops)));
    /* and it stays so for the rest of the run */
    assert_true(cpu_peak_gflops(1).uncertain);

    char json[8192];
    cpu_peak_json(json, sizeof json);
    assert_non_null(strstr(json, "\"uncertain\": true"));
    assert_non_null(strstr(json, "\"gflops\": null"));
    assert_non_null(strstr(json, "\"top_spread\": "));
}

/* The CSV writer leaves an uncertain percentage's cell empty ("nan" would
 * read as a number to some readers), JSON writes null. */
static void uncertain_cell(void **state)
{
    (void)state;
    summary_row row;
    memset(&row, 0, sizeof row);
    row.key = (row_key){.backend = "blas", .workload = "lenet", .precision = "fp32",
                        .threads = 2, .batch_size = 128, .optimizer = "sgd"};
    row.gflops_per_second = 120;
    row.percent_of_peak = NAN;
    row.peak_gflops = NAN;
    row.peak_source = "peak uncertain: a test";
    row.details = row.message = "";
    sysinfo sys;
    memset(&sys, 0, sizeof sys);
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    assert_non_null(f);
    columns_csv_header(f, summary_columns);
    columns_csv_row(f, summary_columns, &row, &sys);
    fclose(f);
    char *header = text, *line = strchr(text, '\n');
    assert_non_null(line);
    *line++ = 0;
    /* the percent_of_peak cell: as many commas in as in the header */
    int col = 0;
    for (char *p = header; strncmp(p, "percent_of_peak", 15); p++)
        col += *p == ',';
    char *cell = line;
    for (int c = 0; c < col; c++)
        cell = strchr(cell, ',') + 1;
    assert_true(*cell == ',');
    assert_null(strstr(line, "nan"));
    free(text);
    text = NULL;
    f = open_memstream(&text, &size);
    assert_non_null(f);
    columns_json_object(f, summary_columns, &row, &sys);
    fclose(f);
    assert_non_null(strstr(text, "\"percent_of_peak\": null"));
    assert_non_null(strstr(text, "\"peak_gflops\": null"));
    free(text);
}

/* The per-precision table holds every arithmetic this CPU has (asked of
 * base/cpu.h), each on one thread and all, and none it lacks: absent, not
 * zero. */
static void table_of_precisions(void **state)
{
    (void)state;
    setenv("LB_PEAK_SECONDS", "0.05", 1); /* the table's shape, not its figures */
    char json[8192];
    cpu_peak_table_json(json, sizeof json);
    assert_non_null(strstr(json, "{\"arithmetic\": \"fp64\""));
    assert_non_null(strstr(json, "{\"arithmetic\": \"fp32\""));
    const int bf16 = cpu_has(CPU_AVX512F | CPU_AVX512_BF16);
    const int fp16 = cpu_has(CPU_AVX512F | CPU_AVX512_FP16);
    assert_true((strstr(json, "\"arithmetic\": \"bf16-dot\"") != NULL) == bf16);
    assert_true((strstr(json, "\"arithmetic\": \"fp16\"") != NULL) == fp16);
    char why[128];
    const int amx = cpu_has(CPU_AMX_TILE | CPU_AMX_BF16) && cpu_amx_granted(why, sizeof why);
    assert_true((strstr(json, "\"arithmetic\": \"amx-bf16\"") != NULL) == amx);
    assert_null(strstr(json, "\"one_thread_gflops\": 0"));
    assert_non_null(strstr(json, "\"all_threads_gflops\": "));
    /* printed for a reader, the absent ones with why */
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    assert_non_null(f);
    cpu_peak_table_print(f);
    fclose(f);
    assert_non_null(strstr(text, "fp32 FMA"));
    assert_non_null(strstr(text, "memory bandwidth (triad)"));
    if (!fp16)
        assert_non_null(strstr(text, "fp16 FMA (vfmadd231ph)           absent: this CPU lacks"));
    free(text);
}

/* Each row is held to the peak of the arithmetic its products run in. */
static void row_and_peak(void **state)
{
    (void)state;
    assert_int_equal(peak_arith_held_to(ARITHMETIC_FP32), ARITH_FP32);
    assert_int_equal(peak_arith_held_to(ARITHMETIC_FP64), ARITH_FP64);
    assert_int_equal(peak_arith_held_to(NULL), ARITH_FP32);
    assert_int_equal(peak_arith_held_to("tf32"), ARITH_FP32); /* no such key */
    const int bf16 = cpu_has(CPU_AVX512F | CPU_AVX512_BF16);
    assert_int_equal(peak_arith_held_to(ARITHMETIC_BF16_DOT), bf16 ? ARITH_BF16_DOT : ARITH_FP32);
    char why[128];
    const int amx = cpu_has(CPU_AMX_TILE | CPU_AMX_BF16) && cpu_amx_granted(why, sizeof why);
    assert_int_equal(peak_arith_held_to(ARITHMETIC_AMX_BF16),
                     amx ? ARITH_AMX_BF16 : bf16 ? ARITH_BF16_DOT : ARITH_FP32);
    if (!cpu_has(CPU_AVX512F | CPU_AVX512_FP16))
        assert_int_equal(peak_arith_held_to(ARITHMETIC_FP16), ARITH_FP32);
    else
        assert_int_equal(peak_arith_held_to(ARITHMETIC_FP16), ARITH_FP16);
    /* a bf16 row's check names the bf16 peak (or why it has none) */
    setenv("LB_PEAK_SECONDS", "0.05", 1);
    peak_measure m = cpu_peak_check_of(peak_arith_held_to(ARITHMETIC_BF16_DOT), 1, 1.0, "a row");
    assert_non_null(strstr(m.source, bf16 ? "bf16 dot product" : "fp32 FMA"));
    peak_measure half = cpu_peak_of(ARITH_FP16, 1);
    if (!cpu_has(CPU_AVX512F | CPU_AVX512_FP16)) {
        assert_true(half.gflops == 0 && !half.uncertain);
        assert_non_null(strstr(half.source, "lacks AVX512_FP16"));
    }
}

/* More threads than usable CPUs are probed as that many CPUs, quickly, and
 * the source says so (--threads 1000 took 80 s on 256 threads). */
static void threads_beyond_the_cpus(void **state)
{
    (void)state;
    setenv("LB_PEAK_SECONDS", "0.05", 1);
    const double t0 = now_seconds();
    peak_measure m = cpu_peak_of(ARITH_FP64, 1000);
    assert_true(now_seconds() - t0 < 30);
    char said[64];
    snprintf(said, sizeof said, "1000 threads asked, %d CPUs usable", peak_usable_cpus());
    assert_non_null(strstr(m.source, said));
    assert_int_equal(peak_usable_cpus(), online_cpus());
}

/* Under a CPU quota below the threads probed, the peak's source says the
 * quota holds longer work below it (the probe's short trials run inside
 * the quota, a row's epochs do not). A cgroup tree of the test's own. */
static void quota_hint(void **state)
{
    (void)state;
    char root[] = "/tmp/test_peak_cgroup.XXXXXX", path[128];
    assert_non_null(mkdtemp(root));
    setenv("LB_PEAK_CGROUP_ROOT", root, 1);
    assert_true(peak_cpu_quota() == 0); /* no file: no quota */
    snprintf(path, sizeof path, "%s/cpu.max", root);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("max 100000\n", f);
    fclose(f);
    assert_true(peak_cpu_quota() == 0);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("50000 100000\n", f);
    fclose(f);
    assert_true(fabs(peak_cpu_quota() - 0.5) < 1e-9);
    setenv("LB_PEAK_SECONDS", "0.05", 1);
    peak_measure m = cpu_peak_of(ARITH_FP64, 1); /* a new entry: one thread over 0.5 CPUs */
    assert_non_null(strstr(m.source, "a CPU quota of 0.50 CPUs"));
    unlink(path);
    rmdir(root);
    unsetenv("LB_PEAK_CGROUP_ROOT");
}

/* The roofline's operations and least bytes of a layer: LeNet's conv1
 * (20 filters of 5x5 over 28x28, no input gradient) and pool1. */
static void roofline_counts(void **state)
{
    (void)state;
    workload w;
    assert_int_equal(workload_get("lenet", &w), 0);
    assert_string_equal(w.layers[0].name, "conv1");
    const double out = 20.0 * 24 * 24, in = 28.0 * 28, params = 20.0 * 25 + 20;
    const element_sizes fp32 = roofline_element_sizes("fp32");
    layer_traffic f = roofline_traffic(&w, 0, 0, 2, fp32);
    assert_true(f.ops == 2 * 2.0 * out * 25 && f.bytes == 4 * (2 * (in + out) + params));
    layer_traffic b = roofline_traffic(&w, 0, 1, 2, fp32);
    assert_true(b.ops == f.ops && b.bytes == 4 * (2 * (in + out) + 2 * params));
    /* the second convolution makes its input gradient too */
    assert_true(roofline_traffic(&w, 2, 1, 1, fp32).ops == 2 * roofline_traffic(&w, 2, 0, 1, fp32).ops);
    /* bf16 and fp16 on the CPU: pools and ReLUs move fp32 activations,
     * the same bytes as in fp32 (they were given half, so twice the
     * intensity); a product reads its weights as 2-byte operands */
    const char *halves[] = {"bf16", "fp16"};
    for (int h = 0; h < 2; h++) {
        const element_sizes half = roofline_element_sizes(halves[h]);
        for (int i = 0; i < w.n_layers; i++)
            for (int pass = 0; pass < 2; pass++) {
                layer_traffic t16 = roofline_traffic(&w, i, pass, 8, half);
                layer_traffic t32 = roofline_traffic(&w, i, pass, 8, fp32);
                if (w.layers[i].kind == LAYER_MAXPOOL || w.layers[i].kind == LAYER_RELU)
                    assert_true(t16.bytes == t32.bytes && t16.ops == t32.ops);
            }
        layer_traffic c16 = roofline_traffic(&w, 0, 0, 2, half);
        assert_true(c16.bytes == 4 * 2 * (in + out) + 2 * params);
    }
    /* fp64 moves twice fp32's bytes everywhere */
    assert_true(roofline_traffic(&w, 1, 0, 8, roofline_element_sizes("fp64")).bytes ==
                2 * roofline_traffic(&w, 1, 0, 8, fp32).bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(uncertain_cell),
        cmocka_unit_test(busy_neighbour),
        cmocka_unit_test(faster_row),
        cmocka_unit_test(table_of_precisions),
        cmocka_unit_test(row_and_peak),
        cmocka_unit_test(threads_beyond_the_cpus),
        cmocka_unit_test(roofline_counts),
        cmocka_unit_test(quota_hint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
