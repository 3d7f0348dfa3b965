/* Choosing the blas backend's environment before its libraries start (see
 * kernel_choice.h). Compiled into the program: it runs before the blas
 * module, and so OpenBLAS, is loaded in this process. */
#include "backends/blas/kernel_choice.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backends/common/openmp_setup.h"
#include "backends/module.h"
#include "base/clock.h"
#include "base/cpu.h"
#include "base/stop.h"

/* ---------------------------------------------------------------------- */
/* The CPU                                                                  */

/* From the one reader of the CPU's features (base/cpu.h): a bit is set
 * only when the OS saves the registers it needs too. */
void kc_read_cpu(kc_cpu *cpu)
{
    static const struct {
        unsigned cpu_bit, kc_bit;
    } bits[] = {
        {CPU_AVX2, KC_AVX2},         {CPU_FMA, KC_FMA},           {CPU_AVX512F, KC_AVX512F},
        {CPU_AVX512BW, KC_AVX512BW}, {CPU_AVX512VL, KC_AVX512VL}, {CPU_AVX512DQ, KC_AVX512DQ},
        {CPU_AVX512_BF16, KC_AVX512_BF16},
    };
    const cpu_info *info = cpu_this();
    memset(cpu, 0, sizeof *cpu);
    snprintf(cpu->vendor, sizeof cpu->vendor, "%s", info->vendor);
    cpu->family = info->family;
    cpu->model = info->model;
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
        if (info->features & bits[i].cpu_bit)
            cpu->features |= bits[i].kc_bit;
}

enum { KC_AVX512_SKX = KC_AVX512F | KC_AVX512BW | KC_AVX512VL | KC_AVX512DQ };

/* What the features allow: 4 Cooperlake, 3 SkylakeX, 2 Haswell/Zen, 0. */
static int feature_rank(unsigned f)
{
    const int avx2 = (f & (KC_AVX2 | KC_FMA)) == (KC_AVX2 | KC_FMA);
    if (avx2 && (f & KC_AVX512_SKX) == KC_AVX512_SKX)
        return f & KC_AVX512_BF16 ? 4 : 3;
    return avx2 ? 2 : 0;
}

const char *kc_feature_summary(unsigned f)
{
    switch (feature_rank(f)) {
    case 4:
        return "AVX-512 (F, BW, VL, DQ) + BF16";
    case 3:
        return "AVX-512 (F, BW, VL, DQ)";
    case 2:
        return "AVX2 + FMA";
    }
    return "no AVX2 + FMA";
}

/* OpenBLAS's x86 core names by the instructions their kernels use; -1 for
 * a name this table does not know (a newer library's). */
static int core_rank(const char *core)
{
    static const struct {
        const char *name;
        int rank;
    } cores[] = {
        {"SapphireRapids", 5}, {"Cooperlake", 4},  {"SkylakeX", 3},    {"Haswell", 2},
        {"Zen", 2},            {"Excavator", 1},   {"Steamroller", 1}, {"Piledriver", 1},
        {"Bulldozer", 1},      {"Sandybridge", 1}, {"Prescott", 0},    {"Nehalem", 0},
        {"Core2", 0},          {"Penryn", 0},      {"Dunnington", 0},  {"Atom", 0},
        {"Nano", 0},           {"Barcelona", 0},   {"Opteron", 0},     {"Opteron_SSE3", 0},
        {"Athlon", 0},         {"Banias", 0},      {"Northwood", 0},   {"Coppermine", 0},
        {"Katmai", 0},         {"Bobcat", 0},      {"Unknown", 0},
    };
    for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++)
        if (strcasecmp(core, cores[i].name) == 0)
            return cores[i].rank;
    return -1;
}

int kc_candidates(const kc_cpu *cpu, const char **out, int max)
{
    const int amd = strcmp(cpu->vendor, "AuthenticAMD") == 0;
    const char *list[3];
    int n = 0;
    switch (feature_rank(cpu->features)) {
    case 4:
        list[n++] = "Cooperlake";
        /* fall through */
    case 3:
        list[n++] = "SkylakeX";
        /* fall through */
    case 2:
        list[n++] = amd ? "Zen" : "Haswell";
        break;
    }
    int k = 0;
    for (int i = 0; i < n && k < max; i++)
        out[k++] = list[i];
    return k;
}

int kc_library_choice_is_weak(const char *library_core, const kc_cpu *cpu)
{
    const int rank = core_rank(library_core);
    return rank >= 0 && rank < feature_rank(cpu->features);
}

/* ---------------------------------------------------------------------- */
/* The decision                                                             */

#define APPEND(buf, used, ...)                                                                 \
    ((used) += (size_t)snprintf((buf) + ((used) < sizeof(buf) ? (used) : sizeof(buf) - 1),     \
                                (used) < sizeof(buf) ? sizeof(buf) - (used) : 1, __VA_ARGS__))

void kc_decide(const char *user_value, const kc_cpu *cpu, const kc_probe *library,
               const char *const *candidates, const kc_probe *probes, int n, kc_decision *out)
{
    memset(out, 0, sizeof *out);
    if (user_value) {
        out->source = KC_SOURCE_USER;
        snprintf(out->core, sizeof out->core, "%s", user_value);
        snprintf(out->asked, sizeof out->asked, "%s", user_value);
        snprintf(out->reason, sizeof out->reason,
                 "OPENBLAS_CORETYPE was set before the program started: left as it is");
        return;
    }
    out->source = KC_SOURCE_LIBRARY;
    if (!library->ran) {
        snprintf(out->reason, sizeof out->reason,
                 "could not ask OpenBLAS (%s): environment left as it is", library->why);
        return;
    }
    snprintf(out->core, sizeof out->core, "%s", library->core);
    char this_cpu[128];
    snprintf(this_cpu, sizeof this_cpu, "%s; %s family %d model %d",
             kc_feature_summary(cpu->features), cpu->vendor[0] ? cpu->vendor : "unknown",
             cpu->family, cpu->model);
    if (!kc_library_choice_is_weak(library->core, cpu)) {
        snprintf(out->reason, sizeof out->reason,
                 core_rank(library->core) < 0
                     ? "a core this program does not rank, kept on this CPU (%s)"
                     : "suits this CPU (%s)",
                 this_cpu);
        return;
    }
    char tried[384] = "";
    size_t used = 0;
    const int library_rank = core_rank(library->core);
    for (int i = 0; i < n; i++) {
        if (core_rank(candidates[i]) <= library_rank)
            continue;
        const kc_probe *p = &probes[i];
        const char *why = NULL;
        char text[256];
        if (!p->ran)
            why = p->why[0] ? p->why : "not tried";
        else if (strcasecmp(p->core, candidates[i]) != 0) {
            snprintf(text, sizeof text, "not offered by this OpenBLAS (it ran %s)", p->core);
            why = text;
        } else if (!p->checked || !p->check_ok)
            why = p->why[0] ? p->why : "sgemm check did not run";
        if (!why) {
            out->source = KC_SOURCE_CHOSEN;
            snprintf(out->core, sizeof out->core, "%s", candidates[i]);
            snprintf(out->reason, sizeof out->reason,
                     "OpenBLAS picked %s on this CPU (%s); %s passed the sgemm check%s%s%s",
                     library->core, this_cpu, candidates[i], used ? " (" : "",
                     used ? tried : "", used ? ")" : "");
            return;
        }
        APPEND(tried, used, "%s%s: %s", used ? "; " : "", candidates[i], why);
    }
    snprintf(out->reason, sizeof out->reason,
             "OpenBLAS picked %s on this CPU (%s) and no better core passed (%s): kept",
             library->core, this_cpu, used ? tried : "none to try");
}

void kc_judge_user(const char *user, const kc_probe *p, kc_decision *d)
{
    snprintf(d->asked, sizeof d->asked, "%s", user);
    if (p->answered && !p->ran) {
        /* the library itself does not load (the registry says why): no
         * fault of the core */
        snprintf(d->reason, sizeof d->reason,
                 "OPENBLAS_CORETYPE was set before the program started: left as it is (not "
                 "tried: %.300s)", p->why);
        return;
    }
    if (!p->ran || !p->checked || !p->check_ok) {
        d->refused = 1;
        snprintf(d->reason, sizeof d->reason,
                 "OPENBLAS_CORETYPE=%.31s (set by the user) %s in a child process: %.300s; "
                 "the blas backend is left out",
                 user, !p->ran ? "did not run" : "failed the sgemm check",
                 p->why[0] ? p->why : "no reason given");
        return;
    }
    snprintf(d->core, sizeof d->core, "%s", p->core);
    if (strcasecmp(p->core, user) != 0)
        snprintf(d->reason, sizeof d->reason,
                 "OPENBLAS_CORETYPE=%.31s was set by the user; this OpenBLAS does not know it "
                 "and runs its own choice, %.31s (its sgemm passed the check in a child process)",
                 user, p->core);
    else
        snprintf(d->reason, sizeof d->reason,
                 "OPENBLAS_CORETYPE was set before the program started: left as it is (its "
                 "sgemm passed the check in a child process)");
}

/* ---------------------------------------------------------------------- */
/* The sgemm check                                                          */

/* Small values that are not all alike (no special cases), from a seed. */
static void fill(float *x, size_t n, unsigned seed)
{
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

/* One shape against a reference in double: 0, or -1 with what differed. */
static int check_shape(const blas_kernel_probe *lib, int ta, int tb, int M, int N, int K,
                       float alpha, float beta, int corrupt, char *why, size_t why_len)
{
    /* op(A) is M x K, op(B) K x N; padded leading dimensions */
    const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
    const size_t a_n = (size_t)(ta ? K : M) * lda, b_n = (size_t)(tb ? N : K) * ldb,
                 c_n = (size_t)M * ldc;
    float *a = malloc(sizeof(float) * a_n), *b = malloc(sizeof(float) * b_n),
          *c = malloc(sizeof(float) * c_n), *c0 = malloc(sizeof(float) * c_n);
    int rc = 0;
    if (!a || !b || !c || !c0) {
        snprintf(why, why_len, "out of memory for the sgemm check");
        rc = -1;
        goto done;
    }
    fill(a, a_n, (unsigned)(M * 7 + K));
    fill(b, b_n, (unsigned)(N * 13 + K));
    fill(c0, c_n, (unsigned)(M + N));
    memcpy(c, c0, sizeof(float) * c_n);
    lib->sgemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    if (corrupt)
        c[(size_t)(M / 2) * ldc + N / 2] += 0.5f;
    for (int i = 0; i < M && !rc; i++)
        for (int j = 0; j < N; j++) {
            double sum = 0, magnitude = 0;
            for (int k = 0; k < K; k++) {
                const double x = ta ? a[(size_t)k * lda + i] : a[(size_t)i * lda + k];
                const double y = tb ? b[(size_t)j * ldb + k] : b[(size_t)k * ldb + j];
                sum += x * y;
                magnitude += fabs(x * y);
            }
            const double cij = c0[(size_t)i * ldc + j];
            const double want = alpha * sum + beta * cij;
            const double scale = fabs(alpha) * magnitude + fabs(beta * cij);
            const double got = c[(size_t)i * ldc + j];
            /* fp32 sums of K terms in any order: well within 4 K eps */
            if (!(fabs(got - want) <= 4.0 * (K + 2) * 1.2e-7 * scale + 1e-30)) {
                snprintf(why, why_len,
                         "sgemm check failed: %dx%dx%d %s%s, C[%d][%d] = %g, reference %g", M,
                         N, K, ta ? "T" : "N", tb ? "T" : "N", i, j, got, want);
                rc = -1;
                break;
            }
        }
done:
    free(a);
    free(b);
    free(c);
    free(c0);
    return rc;
}

/* Odd sizes below and above the kernels' blocking, every transpose, alpha
 * and beta both ways, and one product large enough to be threaded. */
static int sgemm_check(const blas_kernel_probe *lib, int corrupt, char *why, size_t why_len)
{
    static const struct {
        int ta, tb, M, N, K;
        float alpha, beta;
    } shapes[] = {
        {0, 0, 1, 1, 1, 1.0f, 0.0f},       {0, 1, 7, 5, 3, 1.0f, 0.0f},
        {0, 0, 20, 577, 26, 1.0f, 0.0f},   {0, 1, 50, 131, 501, 1.0f, 0.0f},
        {1, 0, 33, 65, 17, 0.5f, 1.5f},    {1, 1, 129, 67, 255, 1.0f, 1.0f},
        {1, 0, 500, 37, 50, -1.0f, 0.0f},  {0, 0, 256, 263, 259, 1.0f, 0.0f},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (check_shape(lib, shapes[i].ta, shapes[i].tb, shapes[i].M, shapes[i].N,
                        shapes[i].K, shapes[i].alpha, shapes[i].beta, corrupt, why,
                        why_len) != 0)
            return -1;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Child processes                                                          */

/* Seconds a child may take: loading the library and the check take well
 * under one on an idle machine. A child still at work after NOTICE_SECONDS
 * is said on stderr, once, so a slow start-up is not a silent one. */
enum { CHILD_SECONDS = 60, NOTICE_SECONDS = 10 };

/* OpenMP settings under which OpenBLAS's threaded sgemm waits, spinning,
 * for threads OpenMP will not give it (OMP_THREAD_LIMIT below its thread
 * count, OMP_DYNAMIC true: every kernel check spun until its 60 s ran out).
 * NULL when neither is set; else the setting, for the reason. */
static const char *openmp_limits_threads(void)
{
    const char *limit = getenv("OMP_THREAD_LIMIT"), *dynamic = getenv("OMP_DYNAMIC");
    if (limit && *limit)
        return "OMP_THREAD_LIMIT";
    if (dynamic && (!strcasecmp(dynamic, "true") || !strcmp(dynamic, "1")))
        return "OMP_DYNAMIC";
    return NULL;
}

/* In the child: load the blas module with OPENBLAS_CORETYPE = core (unset
 * when NULL), name the core it runs and, for a candidate, check sgemm
 * (for the user's core, whichever core it runs: any_core). */
static void child_probe(const char *core, int any_core, const kc_hooks *hooks, kc_probe *p)
{
    if (core)
        setenv("OPENBLAS_CORETYPE", core, 1);
    else
        unsetenv("OPENBLAS_CORETYPE");
    /* settings that cannot leave the check waiting for threads: one
     * thread where OpenMP's are limited (an OpenMP OpenBLAS threads as
     * omp_get_max_threads says, which OMP_THREAD_LIMIT does not lower);
     * the kernels checked are the same */
    const int one_thread = openmp_limits_threads() != NULL;
    if (one_thread) {
        setenv("OMP_NUM_THREADS", "1", 1);
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
    }
    const blas_kernel_probe *lib = module_table("blas", "kernel_probe", p->why, sizeof p->why);
    if (!lib)
        return;
    /* an OpenMP runtime loaded before the environment was set (a test
     * program's) is told too */
    void (*set_threads)(int) = one_thread ? (void (*)(int))dlsym(RTLD_DEFAULT, "omp_set_num_threads") : NULL;
    if (set_threads)
        set_threads(1);
    p->ran = 1;
    const char *name = lib->corename();
    snprintf(p->core, sizeof p->core, "%s", name ? name : "");
    if (!core)
        return;
    if (!any_core && strcasecmp(p->core, core) != 0)
        return; /* not offered: the check would test another core */
    p->checked = 1;
    p->check_ok = sgemm_check(lib, hooks && hooks->corrupt_candidate_sgemm, p->why,
                              sizeof p->why) == 0;
}

/* Runs child_probe in a child process and collects its answer; a child
 * that dies or hangs gives a probe that did not run, with the reason. */
static void probe_in_child(const char *core, int any_core, const kc_hooks *hooks, kc_probe *p)
{
    memset(p, 0, sizeof *p);
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(p->why, sizeof p->why, "pipe: %s", strerror(errno));
        return;
    }
    fflush(NULL); /* the child must not write the parent's buffers again */
    const pid_t pid = fork();
    if (pid < 0) {
        snprintf(p->why, sizeof p->why, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        /* the parent's handlers (a test framework's, the run's SIGINT) are
         * not the child's: a fault must end it and show in its status */
        static const int defaults[] = {SIGILL, SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGINT, SIGTERM};
        for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
            signal(defaults[i], SIG_DFL);
        close(fds[0]);
        if (hooks && hooks->child_hangs)
            sleep(10 * CHILD_SECONDS);
        kc_probe answer = {0};
        child_probe(core, any_core, hooks, &answer);
        const char *at = (const char *)&answer;
        size_t left = sizeof answer;
        while (left > 0) {
            const ssize_t n = write(fds[1], at, left);
            if (n <= 0)
                _exit(1);
            at += n, left -= (size_t)n;
        }
        _exit(0);
    }
    close(fds[1]);
    kc_probe answer;
    size_t got = 0;
    const double start = now_seconds(), deadline = start + CHILD_SECONDS;
    int timed_out = 0, stopped = 0, noticed = 0;
    while (got < sizeof answer) {
        const double left = deadline - now_seconds();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        /* a stop request ends the wait (a signal, EINTR, or the next tenth
         * of a second): the child is not waited for */
        if (stop_requested()) {
            stopped = 1;
            break;
        }
        if (!noticed && now_seconds() - start >= NOTICE_SECONDS) {
            noticed = 1;
            fprintf(stderr, "bench: blas: still checking OpenBLAS's %s kernels in a child "
                            "process after %d s (at most %d s)\n",
                    core ? core : "own choice of", NOTICE_SECONDS, CHILD_SECONDS);
        }
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        const int r = poll(&pfd, 1, left < 0.1 ? (int)(left * 1000) + 1 : 100);
        if (r <= 0)
            continue;
        const ssize_t n = read(fds[0], (char *)&answer + got, sizeof answer - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fds[0]);
    if (timed_out || stopped)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got == sizeof answer) {
        *p = answer;
        p->answered = 1;
        p->core[sizeof p->core - 1] = p->why[sizeof p->why - 1] = '\0';
    } else if (stopped)
        snprintf(p->why, sizeof p->why, "not finished: the run was stopped");
    else if (timed_out)
        snprintf(p->why, sizeof p->why, "no answer within %d s", CHILD_SECONDS);
    else if (WIFSIGNALED(status))
        snprintf(p->why, sizeof p->why, "crashed with signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(p->why, sizeof p->why, "exited with status %d without answering",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

void blas_setup_decide(const kc_hooks *hooks, kc_decision *out)
{
    const char *user = hooks && hooks->pretend_user_value ? hooks->pretend_user_value
                                                          : getenv("OPENBLAS_CORETYPE");
    kc_cpu cpu;
    if (hooks && hooks->pretend_cpu)
        cpu = *hooks->pretend_cpu;
    else
        kc_read_cpu(&cpu);
    kc_probe library = {0};
    const char *candidates[3];
    kc_probe probes[3];
    memset(probes, 0, sizeof probes);
    int n = 0;
    if (!user) {
        probe_in_child(NULL, 0, hooks, &library);
        if (library.ran && hooks && hooks->pretend_library_core)
            snprintf(library.core, sizeof library.core, "%s", hooks->pretend_library_core);
        if (library.ran && kc_library_choice_is_weak(library.core, &cpu)) {
            n = kc_candidates(&cpu, candidates, 3);
            kc_decision d;
            /* best first; stop at the first that passes */
            for (int i = 0; i < n && !stop_requested(); i++) {
                if (core_rank(candidates[i]) <= core_rank(library.core))
                    continue;
                probe_in_child(candidates[i], 0, hooks, &probes[i]);
                kc_decide(NULL, &cpu, &library, candidates, probes, i + 1, &d);
                if (d.source == KC_SOURCE_CHOSEN)
                    break;
            }
        }
    }
    kc_decide(user, &cpu, &library, candidates, probes, n, out);
    if (user) {
        /* tried like the program's own candidates: a core this CPU cannot
         * run costs the blas backend, not the run */
        kc_probe mine;
        probe_in_child(user, 1, hooks, &mine);
        kc_judge_user(user, &mine, out);
    }
    const char *limit = openmp_limits_threads();
    const size_t used = strlen(out->reason);
    if (limit && used + 1 < sizeof out->reason)
        snprintf(out->reason + used, sizeof out->reason - used,
                 " (%s is set: the checks ran OpenBLAS on one thread, where its threaded "
                 "sgemm would wait for threads OpenMP does not give)",
                 limit);
}

/* ---------------------------------------------------------------------- */
/* The process's setup                                                      */

static blas_setup setup;

void blas_setup_prepare(void) { blas_setup_prepare_with(NULL); }

void blas_setup_prepare_with(const kc_hooks *hooks)
{
    if (setup.prepared)
        return;
    openmp_setup_prepare();
    blas_setup_decide(hooks, &setup.kernels);
    if (setup.kernels.source == KC_SOURCE_CHOSEN)
        setenv("OPENBLAS_CORETYPE", setup.kernels.core, 1);
    setup.prepared = 1;
}

const blas_setup *blas_setup_get(void) { return &setup; }

int blas_setup_refused(char *why, size_t len)
{
    if (!setup.prepared || !setup.kernels.refused)
        return 0;
    snprintf(why, len, "%s", setup.kernels.reason);
    return 1;
}

static const char *source_name(kc_source s)
{
    static const char *const names[] = {[KC_SOURCE_USER] = "set by the user",
                                        [KC_SOURCE_CHOSEN] = "chosen by the program",
                                        [KC_SOURCE_LIBRARY] = "OpenBLAS's own choice"};
    return (unsigned)s < sizeof names / sizeof names[0] && names[s] ? names[s]
                                                                     : names[KC_SOURCE_LIBRARY];
}

void blas_setup_describe(char *buf, size_t len, int with_reasons)
{
    if (!setup.prepared) {
        snprintf(buf, len, "%s", "");
        return;
    }
    char openmp[96], source[96];
    openmp_setup_describe(openmp, sizeof openmp, with_reasons);
    const kc_decision *k = &setup.kernels;
    if (k->refused)
        snprintf(source, sizeof source, "set by the user, failed in a child process");
    else if (k->source == KC_SOURCE_USER && k->asked[0] && strcasecmp(k->asked, k->core) != 0)
        snprintf(source, sizeof source, "the user's OPENBLAS_CORETYPE=%s is unknown to OpenBLAS",
                 k->asked);
    else
        snprintf(source, sizeof source, "%s", source_name(k->source));
    snprintf(buf, len, "kernels %s (%s%s%s), %s",
             k->refused ? k->asked : k->core[0] ? k->core : "unknown", source,
             with_reasons ? ": " : "", with_reasons ? k->reason : "", openmp);
}
