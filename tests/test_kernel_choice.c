/* Which OpenBLAS kernels the blas backend starts with (kernel_choice.h).
 *
 * The decision is a pure function, checked here on CPU feature sets and
 * library answers given as data: the Xeon OpenBLAS 0.3.21 does not know
 * (Prescott on an AVX-512 CPU), Zen 4 (Cooperlake, kept), Zen 1 (Zen,
 * kept), an AVX2 Intel with a generic core, a CPU without AVX2, a core this
 * program does not rank, a user's value, candidates not offered, crashed or
 * wrong. Then the real thing in child processes that load the blas module:
 * a candidate's sgemm checked against the reference passes, fails when a
 * test hook spoils its output, and a child that dies costs only its
 * candidate. The user's OPENBLAS_CORETYPE is set only inside a child
 * process of this test that checks that it wins. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/blas/kernel_choice.h"
#include "backends/common/openmp_setup.h"
#include "backends/module.h"
#include "backends/registry.h"
#include "base/clock.h"
#include "base/stop.h"

enum { AVX2_FMA = KC_AVX2 | KC_FMA,
       AVX512 = AVX2_FMA | KC_AVX512F | KC_AVX512BW | KC_AVX512VL | KC_AVX512DQ };

static const kc_cpu xeon_207 = {"GenuineIntel", 6, 207, AVX512 | KC_AVX512_BF16};
static const kc_cpu skylake_x = {"GenuineIntel", 6, 85, AVX512};
static const kc_cpu zen4 = {"AuthenticAMD", 25, 17, AVX512 | KC_AVX512_BF16};
static const kc_cpu zen1 = {"AuthenticAMD", 23, 1, AVX2_FMA};
static const kc_cpu haswell = {"GenuineIntel", 6, 60, AVX2_FMA};
static const kc_cpu old_cpu = {"GenuineIntel", 6, 26, 0};
/* AVX-512 F without BW/VL/DQ (Knights Landing): not SkylakeX's */
static const kc_cpu knl = {"GenuineIntel", 6, 87, AVX2_FMA | KC_AVX512F};

static kc_probe answered(const char *core)
{
    kc_probe p = {.ran = 1};
    snprintf(p.core, sizeof p.core, "%s", core);
    return p;
}

static kc_probe checked(const char *core, int ok, const char *why)
{
    kc_probe p = answered(core);
    p.checked = 1;
    p.check_ok = ok;
    snprintf(p.why, sizeof p.why, "%s", why);
    return p;
}

static kc_probe failed_child(const char *why)
{
    kc_probe p = {0};
    snprintf(p.why, sizeof p.why, "%s", why);
    return p;
}

static void candidates_follow_features(void **state)
{
    (void)state;
    const char *c[3];
    assert_int_equal(kc_candidates(&xeon_207, c, 3), 3);
    assert_string_equal(c[0], "Cooperlake");
    assert_string_equal(c[1], "SkylakeX");
    assert_string_equal(c[2], "Haswell");
    assert_int_equal(kc_candidates(&skylake_x, c, 3), 2);
    assert_string_equal(c[0], "SkylakeX");
    assert_int_equal(kc_candidates(&zen1, c, 3), 1);
    assert_string_equal(c[0], "Zen");
    assert_int_equal(kc_candidates(&haswell, c, 3), 1);
    assert_string_equal(c[0], "Haswell");
    assert_int_equal(kc_candidates(&knl, c, 3), 1);
    assert_string_equal(c[0], "Haswell");
    assert_int_equal(kc_candidates(&old_cpu, c, 3), 0);
    /* AVX2 without FMA is not Haswell's */
    const kc_cpu no_fma = {"GenuineIntel", 6, 60, KC_AVX2};
    assert_int_equal(kc_candidates(&no_fma, c, 3), 0);
    assert_int_equal(kc_candidates(&xeon_207, c, 1), 1);
}

static void weak_means_older_than_the_features(void **state)
{
    (void)state;
    assert_true(kc_library_choice_is_weak("Prescott", &xeon_207));
    assert_true(kc_library_choice_is_weak("Haswell", &xeon_207));
    assert_true(kc_library_choice_is_weak("SkylakeX", &xeon_207));
    assert_false(kc_library_choice_is_weak("Cooperlake", &zen4));
    assert_false(kc_library_choice_is_weak("SapphireRapids", &xeon_207));
    assert_false(kc_library_choice_is_weak("Zen", &zen1));
    assert_false(kc_library_choice_is_weak("Haswell", &zen1));
    assert_true(kc_library_choice_is_weak("Sandybridge", &haswell));
    assert_true(kc_library_choice_is_weak("unknown", &haswell)); /* any case */
    assert_false(kc_library_choice_is_weak("Prescott", &old_cpu));
    /* a name from a newer library is left alone */
    assert_false(kc_library_choice_is_weak("Zen5Turbo", &zen1));
}

/* d came from `source` and names `core` (NULL: any), and its reason holds
 * every keyword after that (NULL ends them). */
static void expect_decision(const kc_decision *d, kc_source source, const char *core, ...)
{
    if (d->source != source)
        fail_msg("decision source %d, expected %d (%s: %s)", d->source, source, d->core,
                 d->reason);
    if (core && strcmp(d->core, core) != 0)
        fail_msg("decided on '%s', expected '%s' (%s)", d->core, core, d->reason);
    va_list keywords;
    va_start(keywords, core);
    for (const char *k; (k = va_arg(keywords, const char *));)
        if (!strstr(d->reason, k))
            fail_msg("reason \"%s\" lacks \"%s\"", d->reason, k);
    va_end(keywords);
}

/* decide with the library's answer and one probe per candidate */
static kc_decision decide(const char *user, const kc_cpu *cpu, kc_probe library,
                          const kc_probe *probes, int n)
{
    const char *c[3];
    const int count = kc_candidates(cpu, c, 3);
    assert_true(n <= count);
    kc_decision d;
    kc_decide(user, cpu, &library, c, probes, n, &d);
    return d;
}

static void unknown_xeon_gets_the_best_core_that_passes(void **state)
{
    (void)state;
    /* Debian's 0.3.21: Cooperlake is not offered, SkylakeX passes */
    kc_probe p[3] = {answered("Haswell"), checked("SkylakeX", 1, ""), {0}};
    kc_decision d = decide(NULL, &xeon_207, answered("Prescott"), p, 2);
    expect_decision(&d, KC_SOURCE_CHOSEN, "SkylakeX", "OpenBLAS picked Prescott",
                    "family 6 model 207",
                    "Cooperlake: not offered by this OpenBLAS (it ran Haswell)", NULL);

    /* every AVX-512 core fails: Haswell */
    kc_probe q[3] = {failed_child("crashed with signal 4 (Illegal instruction)"),
                     checked("SkylakeX", 0, "sgemm check failed: 7x5x3 NT"),
                     checked("Haswell", 1, "")};
    d = decide(NULL, &xeon_207, answered("Prescott"), q, 3);
    expect_decision(&d, KC_SOURCE_CHOSEN, "Haswell", "Illegal instruction",
                    "sgemm check failed", NULL);

    /* all fail: the library's choice stays, with every reason */
    kc_probe r[3] = {answered("Haswell"), checked("SkylakeX", 0, "sgemm check failed: X"),
                     failed_child("no answer within 60 s")};
    d = decide(NULL, &xeon_207, answered("Prescott"), r, 3);
    expect_decision(&d, KC_SOURCE_LIBRARY, "Prescott", "no better core passed",
                    "Haswell: no answer within 60 s", NULL);
}

static void a_current_choice_is_kept(void **state)
{
    (void)state;
    kc_decision d = decide(NULL, &zen4, answered("Cooperlake"), NULL, 0);
    expect_decision(&d, KC_SOURCE_LIBRARY, "Cooperlake", "suits this CPU", NULL);
    d = decide(NULL, &zen1, answered("Zen"), NULL, 0);
    expect_decision(&d, KC_SOURCE_LIBRARY, "Zen", NULL);
    d = decide(NULL, &old_cpu, answered("Nehalem"), NULL, 0);
    expect_decision(&d, KC_SOURCE_LIBRARY, "Nehalem", NULL);
    d = decide(NULL, &zen1, answered("Zen5Turbo"), NULL, 0);
    expect_decision(&d, KC_SOURCE_LIBRARY, NULL, "does not rank", NULL);
}

static void only_cores_above_the_librarys_are_tried(void **state)
{
    (void)state;
    /* SkylakeX CPU, library on Haswell: the Haswell candidate is not
     * "better", so a failing SkylakeX keeps Haswell without naming it */
    kc_probe p[2] = {checked("SkylakeX", 0, "sgemm check failed: Y"), checked("Haswell", 1, "")};
    kc_decision d = decide(NULL, &skylake_x, answered("Haswell"), p, 2);
    expect_decision(&d, KC_SOURCE_LIBRARY, "Haswell", NULL);
    assert_null(strstr(d.reason, "Haswell:"));
    p[0] = checked("SkylakeX", 1, "");
    d = decide(NULL, &skylake_x, answered("Haswell"), p, 1);
    expect_decision(&d, KC_SOURCE_CHOSEN, "SkylakeX", NULL);
}

static void the_users_value_always_wins(void **state)
{
    (void)state;
    kc_probe p[3] = {checked("Cooperlake", 1, ""), {0}, {0}};
    kc_decision d = decide("Prescott", &xeon_207, answered("Prescott"), p, 1);
    expect_decision(&d, KC_SOURCE_USER, "Prescott", NULL);
    /* even a value the library does not know, even empty */
    d = decide("", &xeon_207, failed_child("x"), NULL, 0);
    expect_decision(&d, KC_SOURCE_USER, "", NULL);
}

static void a_library_that_does_not_answer_is_left_alone(void **state)
{
    (void)state;
    kc_decision d = decide(NULL, &xeon_207, failed_child("cannot load blas.so: nope"), NULL, 0);
    expect_decision(&d, KC_SOURCE_LIBRARY, "", "cannot load blas.so: nope", NULL);
}

/* ---------------------------------------------------------------------- */
/* In child processes, with the real library                                */

static int blas_module_present(void)
{
    char path[4096];
    module_path("blas", path, sizeof path);
    return access(path, R_OK) == 0;
}

/* The real CPU, when OpenBLAS has AVX2 kernels for it (Zen or Haswell),
 * the blas module is here and the user set no OPENBLAS_CORETYPE; the test
 * is skipped otherwise. */
static void real_avx2_cpu_or_skip(kc_cpu *cpu)
{
    kc_read_cpu(cpu);
    if (!blas_module_present() || (cpu->features & AVX2_FMA) != AVX2_FMA ||
        getenv("OPENBLAS_CORETYPE"))
        skip(); /* no module, no AVX2, or a value the user set */
}

/* The AVX2 core OpenBLAS has for the CPU's vendor. */
static const char *avx2_core(const kc_cpu *cpu)
{
    return strcmp(cpu->vendor, "AuthenticAMD") == 0 ? "Zen" : "Haswell";
}

static void a_candidate_passes_its_check(void **state)
{
    (void)state;
    kc_cpu cpu;
    real_avx2_cpu_or_skip(&cpu);
    /* as if the library had fallen back to Prescott on this CPU; only the
     * AVX2 candidate, whatever AVX-512 the machine has */
    cpu.features &= AVX2_FMA;
    const kc_hooks hooks = {.pretend_library_core = "Prescott", .pretend_cpu = &cpu};
    kc_decision d;
    blas_setup_decide(&hooks, &d);
    expect_decision(&d, KC_SOURCE_CHOSEN, avx2_core(&cpu), "passed the sgemm check", NULL);
    /* deciding leaves this process's environment alone */
    assert_null(getenv("OPENBLAS_CORETYPE"));
}

static void a_wrong_sgemm_result_is_caught(void **state)
{
    (void)state;
    kc_cpu cpu;
    real_avx2_cpu_or_skip(&cpu);
    cpu.features &= AVX2_FMA;
    const kc_hooks hooks = {.pretend_library_core = "Prescott",
                            .pretend_cpu = &cpu,
                            .corrupt_candidate_sgemm = 1};
    kc_decision d;
    blas_setup_decide(&hooks, &d);
    expect_decision(&d, KC_SOURCE_LIBRARY, "Prescott", "sgemm check failed", "reference", NULL);
}

static void a_candidate_the_cpu_cannot_run_costs_only_itself(void **state)
{
    (void)state;
    kc_cpu cpu;
    real_avx2_cpu_or_skip(&cpu);
    if (cpu.features & KC_AVX512F) {
        skip(); /* the SkylakeX kernels run here: nothing to crash */
        return;
    }
    /* as if the CPU had AVX-512: the SkylakeX kernels die of an illegal
     * instruction in their child (or, if this library runs AVX2 code for
     * these shapes, pass); the AVX2 candidate still wins or SkylakeX does */
    kc_cpu pretend = cpu;
    pretend.features |= KC_AVX512F | KC_AVX512BW | KC_AVX512VL | KC_AVX512DQ;
    const kc_hooks hooks = {.pretend_library_core = "Prescott", .pretend_cpu = &pretend};
    kc_decision d;
    blas_setup_decide(&hooks, &d);
    if (strcmp(d.core, "SkylakeX") == 0)
        expect_decision(&d, KC_SOURCE_CHOSEN, "SkylakeX", NULL);
    else
        expect_decision(&d, KC_SOURCE_CHOSEN, avx2_core(&cpu), "SkylakeX: crashed with signal",
                        NULL);
}

/* The user's core as its child found it: one that crashed or failed its
 * check refuses blas with the reason; one the library does not know names
 * the core that runs instead, beside what was asked. */
static void a_users_core_is_judged_by_its_child(void **state)
{
    (void)state;
    kc_decision d = decide("SkylakeX", &zen1, answered("Zen"), NULL, 0);
    kc_judge_user("SkylakeX", &(kc_probe){.why = "crashed with signal 4 (Illegal instruction)"},
                  &d);
    assert_true(d.refused);
    expect_decision(&d, KC_SOURCE_USER, "SkylakeX", "did not run", "Illegal instruction",
                    "blas backend is left out", NULL);
    d = decide("SkylakeX", &zen1, answered("Zen"), NULL, 0);
    kc_judge_user("SkylakeX", &(kc_probe){.ran = 1, .checked = 1, .core = "SkylakeX",
                                          .why = "sgemm check failed: 7x5x3"}, &d);
    assert_true(d.refused);
    expect_decision(&d, KC_SOURCE_USER, "SkylakeX", "failed the sgemm check", "7x5x3", NULL);
    /* a library that does not load is no fault of the core: the registry
     * says why blas cannot run */
    d = decide("Zen", &zen1, answered("Zen"), NULL, 0);
    kc_judge_user("Zen", &(kc_probe){.answered = 1, .why = "cannot load blas.so: nope"}, &d);
    assert_false(d.refused);
    expect_decision(&d, KC_SOURCE_USER, "Zen", "not tried: cannot load blas.so", NULL);
    d = decide("garbage", &zen4, answered("Cooperlake"), NULL, 0);
    kc_judge_user("garbage", &(kc_probe){.ran = 1, .checked = 1, .check_ok = 1,
                                         .core = "Cooperlake"}, &d);
    assert_false(d.refused);
    assert_string_equal(d.asked, "garbage");
    expect_decision(&d, KC_SOURCE_USER, "Cooperlake", "does not know it", NULL);
    d = decide("Zen", &zen1, answered("Zen"), NULL, 0);
    kc_judge_user("Zen", &(kc_probe){.ran = 1, .checked = 1, .check_ok = 1, .core = "Zen"}, &d);
    assert_false(d.refused);
    expect_decision(&d, KC_SOURCE_USER, "Zen", "left as it is", NULL);
}

/* The same in child processes with the real library, the user's value
 * given by a hook (the children set it, this process does not). */
static void a_users_core_runs_in_a_child_first(void **state)
{
    (void)state;
    kc_cpu cpu;
    real_avx2_cpu_or_skip(&cpu);
    kc_hooks hooks = {.pretend_user_value = "garbage"};
    kc_decision d;
    blas_setup_decide(&hooks, &d);
    assert_false(d.refused);
    assert_string_equal(d.asked, "garbage");
    assert_string_not_equal(d.core, "garbage");
    expect_decision(&d, KC_SOURCE_USER, NULL, "does not know it", NULL);
    /* a core whose products come out wrong costs blas, not the run */
    hooks = (kc_hooks){.pretend_user_value = avx2_core(&cpu), .corrupt_candidate_sgemm = 1};
    blas_setup_decide(&hooks, &d);
    assert_true(d.refused);
    expect_decision(&d, KC_SOURCE_USER, NULL, "failed the sgemm check", NULL);
    assert_null(getenv("OPENBLAS_CORETYPE"));
}

/* The child pid of this test exited with status 0 (its checks held). */
static void expect_child_passed(pid_t pid)
{
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* In a child of this test: a user's core that fails in its own child
 * makes blas not runnable, with the reason, and its module is never loaded
 * (with the core, it could end the whole run). */
static void a_failed_user_core_costs_blas_its_row(void **state)
{
    (void)state;
    kc_cpu cpu;
    real_avx2_cpu_or_skip(&cpu);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const kc_hooks hooks = {.pretend_user_value = avx2_core(&cpu),
                                .corrupt_candidate_sgemm = 1};
        blas_setup_prepare_with(&hooks);
        char why[512] = "";
        const int runnable = backend_runnable(backend_find("blas"), PREC_FP32, why, sizeof why);
        _exit(!runnable && strstr(why, "failed the sgemm check") &&
                      strstr(why, "the blas backend is left out") && !module_loaded("blas")
                  ? 0
                  : 1);
    }
    expect_child_passed(pid);
}

/* In a child of this test: the user's value, set there, is never replaced,
 * and nothing is asked of the library. */
static void a_user_value_is_never_overridden(void **state)
{
    (void)state;
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("OPENBLAS_CORETYPE", "Prescott", 1);
        blas_setup_prepare();
        const blas_setup *s = blas_setup_get();
        const char *now = getenv("OPENBLAS_CORETYPE");
        _exit(s->prepared && s->kernels.source == KC_SOURCE_USER &&
                      strcmp(s->kernels.core, "Prescott") == 0 && now &&
                      strcmp(now, "Prescott") == 0 && !module_loaded("blas")
                  ? 0
                  : 1);
    }
    expect_child_passed(pid);
}

/* Sets name to value, or unsets it for NULL */
static void set_or_unset(const char *name, const char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

/* The same text, NULL standing for unset */
static int same(const char *a, const char *b) { return a && b ? strcmp(a, b) == 0 : a == b; }

/* OMP_WAIT_POLICY: passive unless set; GOMP_SPINCOUNT: a short spin unless
 * either is set; a value set wins. In children: policy and spin are what
 * the user set (NULL unset), want_* what libgomp must see (NULL unset). */
static int wait_policy_child(const char *policy, const char *spin, const char *want_policy,
                             const char *want_spin)
{
    const pid_t pid = fork();
    if (pid == 0) {
        set_or_unset("OMP_WAIT_POLICY", policy);
        set_or_unset("GOMP_SPINCOUNT", spin);
        blas_setup_prepare();
        const openmp_setup *s = openmp_setup_get();
        char line[2048];
        blas_setup_describe(line, sizeof line, 0);
        const int described = strstr(line, "OMP_WAIT_POLICY=") &&
                              (!want_spin || strstr(line, "GOMP_SPINCOUNT="));
        _exit(same(getenv("OMP_WAIT_POLICY"), want_policy) && same(s->wait_policy, want_policy) &&
                      s->wait_policy_by_user == (policy != NULL) &&
                      same(getenv("GOMP_SPINCOUNT"), want_spin) &&
                      same(s->spin_count[0] ? s->spin_count : NULL, want_spin) &&
                      s->spin_count_by_user == (spin != NULL) && described
                  ? 0
                  : 1);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* OMP_THREAD_LIMIT=1 or OMP_DYNAMIC=true (set here before any OpenMP
 * runtime is loaded, so the children's start with it): OpenBLAS's
 * threaded sgemm in the check waited for a thread it could not have and
 * spun until the child's 60 s ran out, and the core was refused. The
 * check runs on one thread instead, passes within seconds, and the reason
 * says why. */
static void limited_openmp_does_not_hold_the_check(void **state)
{
    (void)state;
    kc_cpu cpu;
    real_avx2_cpu_or_skip(&cpu);
    static const char *const settings[][2] = {{"OMP_THREAD_LIMIT", "1"},
                                              {"OMP_DYNAMIC", "true"}};
    for (int i = 0; i < 2; i++) {
        setenv(settings[i][0], settings[i][1], 1);
        const kc_hooks hooks = {.pretend_user_value = avx2_core(&cpu)};
        kc_decision d;
        const double t0 = now_seconds();
        blas_setup_decide(&hooks, &d);
        const double took = now_seconds() - t0;
        unsetenv(settings[i][0]);
        if (took > 20 || d.refused)
            fail_msg("%s=%s: %.1f s, %s", settings[i][0], settings[i][1], took, d.reason);
        expect_decision(&d, KC_SOURCE_USER, avx2_core(&cpu), "passed the check",
                        settings[i][0], "one thread", NULL);
    }
}

/* A stop request (the run's SIGINT) ends the wait for a child at once:
 * the wait retried on EINTR for the child's whole 60 s. */
static volatile sig_atomic_t stop_flag;
static void on_alarm(int sig) { stop_flag = sig; }

static void a_stop_ends_the_wait_for_a_child(void **state)
{
    (void)state;
    kc_cpu cpu;
    real_avx2_cpu_or_skip(&cpu);
    stop_flag = 0;
    stop_request_watch(&stop_flag);
    struct sigaction sa = {.sa_handler = on_alarm}, old;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, &old);
    alarm(1);
    const kc_hooks hooks = {.pretend_user_value = avx2_core(&cpu), .child_hangs = 1};
    kc_decision d;
    const double t0 = now_seconds();
    blas_setup_decide(&hooks, &d);
    const double took = now_seconds() - t0;
    alarm(0);
    sigaction(SIGALRM, &old, NULL);
    stop_request_watch(NULL);
    if (took > 5)
        fail_msg("the stop was honoured after %.1f s", took);
    expect_decision(&d, KC_SOURCE_USER, NULL, "the run was stopped", NULL);
}

static void passive_waiting_unless_set(void **state)
{
    (void)state;
    assert_int_equal(wait_policy_child(NULL, NULL, "passive", "30000"), 0);
    /* a policy of the user's own: no spin count of ours */
    assert_int_equal(wait_policy_child("active", NULL, "active", NULL), 0);
    assert_int_equal(wait_policy_child("passive", NULL, "passive", NULL), 0);
    /* a spin count of the user's own, under our policy */
    assert_int_equal(wait_policy_child(NULL, "0", "passive", "0"), 0);
    /* the controls: wrong expectations fail */
    assert_int_equal(wait_policy_child("active", NULL, "passive", NULL), 1);
    assert_int_equal(wait_policy_child(NULL, NULL, "passive", NULL), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(candidates_follow_features),
        cmocka_unit_test(weak_means_older_than_the_features),
        cmocka_unit_test(unknown_xeon_gets_the_best_core_that_passes),
        cmocka_unit_test(a_current_choice_is_kept),
        cmocka_unit_test(only_cores_above_the_librarys_are_tried),
        cmocka_unit_test(the_users_value_always_wins),
        cmocka_unit_test(a_library_that_does_not_answer_is_left_alone),
        cmocka_unit_test(a_candidate_passes_its_check),
        cmocka_unit_test(a_wrong_sgemm_result_is_caught),
        cmocka_unit_test(a_candidate_the_cpu_cannot_run_costs_only_itself),
        cmocka_unit_test(a_users_core_is_judged_by_its_child),
        cmocka_unit_test(a_users_core_runs_in_a_child_first),
        cmocka_unit_test(a_failed_user_core_costs_blas_its_row),
        cmocka_unit_test(a_user_value_is_never_overridden),
        cmocka_unit_test(passive_waiting_unless_set),
        cmocka_unit_test(limited_openmp_does_not_hold_the_check),
        cmocka_unit_test(a_stop_ends_the_wait_for_a_child),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
