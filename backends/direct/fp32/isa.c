/* LENET_BENCH_DIRECT_ISA's names and rules, and a core's 512-bit FMA
 * ports (isa.h). */
#include "backends/direct/fp32/isa.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/direct/candidates.h"
#include "base/clock.h"
#include "base/fma_chains.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* the builds module.mk lists (DIRECT_ISAS), in its order, as dispatch.c */
#define NAME(isa) #isa,
static const char *const names[] = {LB_DIRECT_ISAS(NAME)};
#undef NAME
enum { NAMES = sizeof names / sizeof names[0] };

int direct_isa_count(void) { return NAMES; }

const char *direct_isa_name(int i) { return i >= 0 && i < NAMES ? names[i] : NULL; }

const char *direct_isa_forced(void)
{
    const char *forced = getenv("LENET_BENCH_DIRECT_ISA");
    return forced && *forced ? forced : NULL;
}

int direct_isa_check(char *err, size_t err_len)
{
    if (direct_candidates_check(err, err_len))
        return -1;
    const char *forced = direct_isa_forced();
    if (!forced)
        return 0;
    for (int i = 0; i < NAMES; i++)
        if (strcmp(forced, names[i]) == 0)
            return 0;
    char list[128] = "";
    for (int i = 0; i < NAMES; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    snprintf(err, err_len, "LENET_BENCH_DIRECT_ISA=%s: not one of %s", forced, list);
    return -1;
}

int direct_isa_allows_avx512(const char *what, char *why, size_t why_len)
{
    if (direct_isa_check(why, why_len))
        return 0;
    const char *forced = direct_isa_forced();
    if (!forced || strncmp(forced, "avx512", 6) == 0)
        return 1;
    snprintf(why, why_len,
             "LENET_BENCH_DIRECT_ISA=%s keeps the direct backend off AVX-512, and its "
             "%s are AVX-512 code (unset it, or force an avx512 build)",
             forced, what);
    return 0;
}

int direct_isa_avx512_set_runs(const char *what, int (*supported)(char *why, size_t why_len),
                               const char *feature, char *brief, size_t brief_len, char *why,
                               size_t why_len)
{
    if (!direct_isa_allows_avx512(what, why, why_len)) {
        snprintf(brief, brief_len, "LENET_BENCH_DIRECT_ISA=%s keeps it off AVX-512",
                 direct_isa_forced());
        return 0;
    }
    if (!supported(why, why_len)) {
        snprintf(brief, brief_len, "no %s here", feature);
        return 0;
    }
    return 1;
}

/* Intel's family 6 models with two 512-bit FMA ports: Skylake-SP to
 * Cascade/Cooper Lake, Ice Lake-SP and -D, Sapphire, Emerald and Granite
 * Rapids (Skylake-SP's smallest parts have one port: cpuid cannot tell
 * them apart). A hint: a hypervisor may report another model. */
static int intel_two_port_model(int model)
{
    static const int two_port_models[] = {0x55, 0x6a, 0x6c, 0x8f, 0xcf, 0xad, 0xae};
    for (size_t i = 0; i < sizeof two_port_models / sizeof two_port_models[0]; i++)
        if (model == two_port_models[i])
            return 1;
    return 0;
}

/* Features only Intel's server cores from Sapphire Rapids on have, all
 * with two 512-bit FMA ports: AMX tiles, or AVX512_FP16 (which Alder
 * Lake's client cores, models 0x97 and 0x9a, showed only with AVX-512
 * switched on against Intel's word, on one fused port) */
static const char *intel_two_port_features(const cpu_info *cpu)
{
    if (cpu->features & CPU_AMX_TILE)
        return "AMX-TILE";
    if ((cpu->features & CPU_AVX512_FP16) && cpu->model != 0x97 && cpu->model != 0x9a)
        return "AVX512_FP16";
    return NULL;
}

int direct_fma_ports_512(const cpu_info *cpu)
{
    if (!(cpu->features & CPU_AVX512F))
        return 0;
    if (strcmp(cpu->vendor, "AuthenticAMD") == 0) {
        /* Zen 5 (family 26): the full 512-bit datapath, but for the mobile
         * Strix Point (models 0x20-0x2f) and Krackan Point (0x60-0x6f) */
        const int mobile = (cpu->model >= 0x20 && cpu->model <= 0x2f) ||
                           (cpu->model >= 0x60 && cpu->model <= 0x6f);
        return cpu->family > 26 || (cpu->family == 26 && !mobile) ? 2 : 1;
    }
    if (strcmp(cpu->vendor, "GenuineIntel") == 0 && cpu->family == 6 &&
        (intel_two_port_model(cpu->model) || intel_two_port_features(cpu)))
        return 2;
    return 1;
}

#if defined(__x86_64__)
/* One trial of independent FMA chains on registers (base/fma_chains.h),
 * each step acc = a acc + b, in seconds of the thread's processor time */
#define FMA_ACC_FIRST_512(acc, a, b) _mm512_fmadd_ps(a, acc, b)
#define FMA_ACC_FIRST_256(acc, a, b) _mm256_fmadd_ps(a, acc, b)
enum { ZMM_CHAINS = 24, YMM_CHAINS = 12, ROUNDS = 2000, TRIALS = 16 };
FMA_CHAIN_TRIAL(zmm_trial, "avx512f", __m512, _mm512_set1_ps, __m512, _mm512_set1_ps(0.999f),
                _mm512_set1_ps(1e-3f), FMA_ACC_FIRST_512, ZMM_CHAINS, ROUNDS)
FMA_CHAIN_TRIAL(ymm_trial, "avx2,fma", __m256, _mm256_set1_ps, __m256, _mm256_set1_ps(0.999f),
                _mm256_set1_ps(1e-3f), FMA_ACC_FIRST_256, YMM_CHAINS, ROUNDS * 2)

/* 512-bit FMA flops over 256-bit FMA flops on this core: about 2 where a
 * core has two 512-bit FMA ports (each 256-bit FMA then takes the same
 * ports at half the width), about 1 where a 512-bit FMA takes both
 * 256-bit ports (Intel's client cores) or two passes of one (Zen 4). The
 * two take turns in trials of about 10 microseconds; the best of each by
 * the thread's processor time, so that a trial slowed by another thread
 * loses to one that ran alone. */
static double measure_zmm_over_ymm(void)
{
    double zmm, ymm;
    best_of_alternating(zmm_trial, ymm_trial, TRIALS, &zmm, &ymm);
    const double zmm_flops = 32.0 * ZMM_CHAINS * ROUNDS / zmm,
                 ymm_flops = 16.0 * YMM_CHAINS * ROUNDS * 2 / ymm;
    return zmm_flops / ymm_flops;
}
#endif

double direct_fma_zmm_over_ymm(void)
{
#if defined(__x86_64__)
    if (cpu_has(CPU_AVX512F | CPU_AVX2 | CPU_FMA))
        return measure_zmm_over_ymm();
#endif
    return 0;
}

static int ports_here;
static char ports_why[160];
static pthread_once_t ports_once = PTHREAD_ONCE_INIT;

static void decide_ports_here(void)
{
    const cpu_info *cpu = cpu_this();
    ports_here = direct_fma_ports_512(cpu);
    if (ports_here == 0) {
        snprintf(ports_why, sizeof ports_why, "no AVX-512");
        return;
    }
    const int intel = strcmp(cpu->vendor, "GenuineIntel") == 0 && cpu->family == 6;
    if (ports_here == 2) {
        const char *features = intel ? intel_two_port_features(cpu) : NULL;
        if (intel && intel_two_port_model(cpu->model))
            snprintf(ports_why, sizeof ports_why, "two 512-bit FMA ports: Intel model %#x",
                     cpu->model);
        else if (features)
            snprintf(ports_why, sizeof ports_why,
                     "two 512-bit FMA ports: %s, a Sapphire Rapids-class server core",
                     features);
        else
            snprintf(ports_why, sizeof ports_why, "two 512-bit FMA ports: %s family %d",
                     cpu->vendor, cpu->family);
        return;
    }
#if defined(__x86_64__)
    /* neither model nor features says: the core itself */
    if (cpu_has(CPU_AVX2 | CPU_FMA)) {
        const double ratio = measure_zmm_over_ymm();
        ports_here = ratio >= 1.5 ? 2 : 1;
        snprintf(ports_why, sizeof ports_why,
                 "%s 512-bit FMA port%s: 512-bit FMAs measured at %.2fx the flops of 256-bit "
                 "ones",
                 ports_here == 2 ? "two" : "one", ports_here == 2 ? "s" : "", ratio);
        return;
    }
#endif
    snprintf(ports_why, sizeof ports_why, "one 512-bit FMA port: %s family %d model %#x",
             cpu->vendor, cpu->family, cpu->model);
}

int direct_fma_ports_here(char *why, size_t why_len)
{
    pthread_once(&ports_once, decide_ports_here);
    if (why && why_len)
        snprintf(why, why_len, "%s", ports_why);
    return ports_here;
}

const char *direct_isa_best(char *why, size_t why_len)
{
    const char *forced = direct_isa_forced();
    if (forced) {
        snprintf(why, why_len, "forced by LENET_BENCH_DIRECT_ISA");
        return forced;
    }
#if defined(__x86_64__)
    if (cpu_has(CPU_AVX512 | CPU_AVX2 | CPU_FMA | CPU_F16C | CPU_AVX)) {
        const int ports = direct_fma_ports_here(why, why_len);
        return ports >= 2 ? "avx512_2fma" : "avx512";
    }
    if (cpu_has(CPU_AVX2 | CPU_FMA | CPU_F16C | CPU_AVX)) {
        snprintf(why, why_len, "AVX2 and FMA, no AVX-512");
        return "avx2";
    }
    snprintf(why, why_len, "neither AVX-512 nor AVX2 with FMA");
#else
    snprintf(why, why_len, "not an x86-64 CPU");
#endif
    return "generic";
}
