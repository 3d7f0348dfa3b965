/* The CPU peak probe's loops (peak_kernels.h). */
#include "harness/run/peak_kernels.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backends/engine.h"
#include "base/cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PEAK_X86 1
#endif
/* AVX512_FP16 intrinsics arrived in GCC 12 and clang 14 */
#if defined(PEAK_X86) && (__GNUC__ >= 12 || (defined(__clang__) && __clang_major__ >= 14))
#define PEAK_FP16 1
#endif

/* ---- fp32: the inner kernel of a GEMM ------------------------------------ */

/* C[6 x 2V] += A[6 x K] B[K x 2V] with V floats a vector, twelve
 * accumulators in registers and A and B in L1: how BLIS and OpenBLAS reach
 * their peak, so it measures the cores, not the memory. */
enum { MR = 6, PROBE_K = 256 };

#define GEMM_LOOP(NAME, TARGET, VEC, LANES, ZERO, LOAD, BCAST, FMA, SUM)                          \
    TARGET static float NAME(const float *a, const float *b, long reps)                          \
    {                                                                                            \
        VEC c[MR][2];                                                                            \
        for (int r = 0; r < MR; r++)                                                             \
            c[r][0] = c[r][1] = ZERO;                                                            \
        for (long rep = 0; rep < reps; rep++)                                                    \
            for (int k = 0; k < PROBE_K; k++) {                                                  \
                VEC b0 = LOAD(b + k * 2 * (LANES)), b1 = LOAD(b + k * 2 * (LANES) + (LANES));    \
                for (int r = 0; r < MR; r++) {                                                   \
                    VEC x = BCAST(a[k * MR + r]);                                                \
                    c[r][0] = FMA(x, b0, c[r][0]);                                               \
                    c[r][1] = FMA(x, b1, c[r][1]);                                               \
                }                                                                                \
            }                                                                                    \
        float sum = 0;                                                                           \
        for (int r = 0; r < MR; r++)                                                             \
            sum += SUM(c[r][0]) + SUM(c[r][1]);                                                  \
        return sum;                                                                              \
    }

/* ---- the other arithmetics: independent multiply-adds in registers ------ */

/* Twelve chains, each instruction depending only on its own chain's last:
 * enough for two units of four cycles' latency. x = 0.5 and y = 0.25 keep
 * an FMA chain at its fixed point 0.5 (no overflow, no subnormals). */
enum { CHAINS = 12, STEPS = 16 };

#define CHAIN_LOOP(NAME, TARGET, ACC, OPND, ACC_INIT, X, Y, STEP, SUM)                           \
    TARGET static float NAME(const float *a, const float *b, long reps)                          \
    {                                                                                            \
        (void)a, (void)b;                                                                        \
        ACC acc[CHAINS];                                                                         \
        for (int i = 0; i < CHAINS; i++)                                                         \
            acc[i] = ACC_INIT;                                                                   \
        const OPND x = X, y = Y;                                                                 \
        for (long rep = 0; rep < reps; rep++)                                                    \
            for (int k = 0; k < STEPS; k++) {                                                    \
                _Pragma("GCC unroll 12") for (int i = 0; i < CHAINS; i++) acc[i] =               \
                    STEP(acc[i], x, y);                                                          \
            }                                                                                    \
        float sum = 0;                                                                           \
        for (int i = 0; i < CHAINS; i++)                                                         \
            sum += (float)(SUM(acc[i]));                                                         \
        return sum;                                                                              \
    }

/* Any target: the compiler's generic vectors, multiply then add. */
typedef float gen_f32 __attribute__((vector_size(16)));
typedef double gen_f64 __attribute__((vector_size(32)));
static gen_f32 gen_load(const float *p)
{
    gen_f32 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static gen_f32 gen_bcast(float x) { return (gen_f32){x, x, x, x}; }
#define GEN_FMA(a, b, c) ((a) * (b) + (c))
#define GEN_SUM4(v) ((v)[0] + (v)[1] + (v)[2] + (v)[3])
GEMM_LOOP(fp32_generic, , gen_f32, 4, gen_bcast(0), gen_load, gen_bcast, GEN_FMA, GEN_SUM4)
CHAIN_LOOP(fp64_generic, , gen_f64, gen_f64, ((gen_f64){0.5, 0.5, 0.5, 0.5}),
           ((gen_f64){0.5, 0.5, 0.5, 0.5}), ((gen_f64){0.25, 0.25, 0.25, 0.25}), GEN_FMA,
           GEN_SUM4)

#ifdef PEAK_X86
#define T_AVX512 __attribute__((target("avx512f")))
#define T_AVX2 __attribute__((target("avx2,fma")))
#define T_BF16 __attribute__((target("avx512f,avx512bf16")))

T_AVX2 static float sum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}
T_AVX2 static double sum256d(__m256d v) { return v[0] + v[1] + v[2] + v[3]; }

GEMM_LOOP(fp32_avx512, T_AVX512, __m512, 16, _mm512_setzero_ps(), _mm512_loadu_ps,
          _mm512_set1_ps, _mm512_fmadd_ps, _mm512_reduce_add_ps)
GEMM_LOOP(fp32_avx2, T_AVX2, __m256, 8, _mm256_setzero_ps(), _mm256_loadu_ps, _mm256_set1_ps,
          _mm256_fmadd_ps, sum256)
CHAIN_LOOP(fp64_avx512, T_AVX512, __m512d, __m512d, _mm512_set1_pd(0.5), _mm512_set1_pd(0.5),
           _mm512_set1_pd(0.25), _mm512_fmadd_pd, _mm512_reduce_add_pd)
CHAIN_LOOP(fp64_avx2, T_AVX2, __m256d, __m256d, _mm256_set1_pd(0.5), _mm256_set1_pd(0.5),
           _mm256_set1_pd(0.25), _mm256_fmadd_pd, sum256d)
/* 16 sums of two bf16 products each an instruction; tiny operands keep
 * the growing sums far from overflow */
CHAIN_LOOP(bf16_dot, T_BF16, __m512, __m512bh, _mm512_set1_ps(0.5f),
           _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f)),
           _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f)), _mm512_dpbf16_ps,
           _mm512_reduce_add_ps)
#ifdef PEAK_FP16
#define T_FP16 __attribute__((target("avx512f,avx512fp16")))
CHAIN_LOOP(fp16_fma, T_FP16, __m512h, __m512h, _mm512_set1_ph((_Float16)0.5f),
           _mm512_set1_ph((_Float16)0.5f), _mm512_set1_ph((_Float16)0.25f), _mm512_fmadd_ph,
           _mm512_reduce_add_ph)
#endif

/* AMX: four accumulator tiles of 16 x 16 fp32, each C += A B with A 16 x 32
 * and B 32 x 16 bf16 (16,384 flops a tdpbf16ps); the operands' values do
 * not change the speed. */
typedef struct amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} amx_config;

__attribute__((target("amx-tile,amx-bf16"))) static float amx_bf16(const float *a,
                                                                   const float *b, long reps)
{
    (void)b;
    amx_config cfg = {.palette = 1};
    for (int t = 0; t < 8; t++) {
        cfg.bytes_per_row[t] = 64;
        cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
    float out[16 * 16];
    /* (one by one: tile numbers are immediates) */
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a + 256, 64);
    _tile_loadd(6, a + 512, 64);
    _tile_loadd(7, a + 768, 64);
    for (long rep = 0; rep < reps; rep++)
        for (int k = 0; k < STEPS; k++) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    _tile_stored(0, out, 64);
    _tile_release();
    return out[0];
}
#endif

/* ---- which loop ---------------------------------------------------------- */

static const struct {
    const char *name, *key;
} ariths[ARITH_COUNT] = {
    [ARITH_FP64] = {"fp64 FMA", ARITHMETIC_FP64},
    [ARITH_FP32] = {"fp32 FMA", ARITHMETIC_FP32},
    [ARITH_BF16_DOT] = {"bf16 dot product (vdpbf16ps)", ARITHMETIC_BF16_DOT},
    [ARITH_FP16] = {"fp16 FMA (vfmadd231ph)", ARITHMETIC_FP16},
    [ARITH_AMX_BF16] = {"AMX bf16 tiles (tdpbf16ps)", ARITHMETIC_AMX_BF16},
};

const char *peak_arith_name(peak_arith a) { return a < ARITH_COUNT ? ariths[a].name : "?"; }
const char *peak_arith_key(peak_arith a) { return a < ARITH_COUNT ? ariths[a].key : "?"; }

void peak_kernel_operands(float *a, float *b)
{
    static const float scale = 1.0f / 1024;
    for (int i = 0; i < KERNEL_A_FLOATS; i++)
        a[i] = (float)(i % 7) * scale;
    for (int i = 0; i < KERNEL_B_FLOATS; i++)
        b[i] = (float)(i % 5) * scale;
}

static int absent(char *why, size_t len, const char *text, unsigned missing)
{
    char names[128];
    snprintf(why, len, "%s%s", text, missing ? cpu_missing(missing, names, sizeof names) : "");
    return 0;
}

/* Operations a pass: the GEMM kernel's 6 x 2 vectors over K, a chain
 * loop's CHAINS x STEPS instructions; times the operations an instruction
 * does (its lanes x 2, or a tile product's). */
#define GEMM_PASS (2.0 * MR * PROBE_K * 2)
#define CHAIN_PASS (1.0 * CHAINS * STEPS)

/* The loops, best first for each arithmetic: the first whose features
 * this CPU has is taken. */
static const struct candidate {
    peak_arith arith;
    unsigned needs; /* CPU_* bits */
    peak_loop run;
    double flops_per_pass;
    const char *isa;
} candidates[] = {
#ifdef PEAK_X86
    {ARITH_FP32, CPU_AVX512F, fp32_avx512, GEMM_PASS * 16, "AVX-512"},
    {ARITH_FP32, CPU_AVX2 | CPU_FMA, fp32_avx2, GEMM_PASS * 8, "AVX2+FMA"},
    {ARITH_FP64, CPU_AVX512F, fp64_avx512, CHAIN_PASS * 16, "AVX-512"},
    {ARITH_FP64, CPU_AVX2 | CPU_FMA, fp64_avx2, CHAIN_PASS * 8, "AVX2+FMA"},
    {ARITH_BF16_DOT, CPU_AVX512F | CPU_AVX512_BF16, bf16_dot, CHAIN_PASS * 64, "AVX512_BF16"},
#ifdef PEAK_FP16
    {ARITH_FP16, CPU_AVX512F | CPU_AVX512_FP16, fp16_fma, CHAIN_PASS * 64, "AVX512_FP16"},
#endif
    /* 4 tile products a step, each 16 x 16 outputs of 32 multiply-adds */
    {ARITH_AMX_BF16, CPU_AMX_TILE | CPU_AMX_BF16, amx_bf16, 4 * STEPS * 16.0 * 16 * 32 * 2, "AMX"},
#endif
    {ARITH_FP32, 0, fp32_generic, GEMM_PASS * 4, "generic-vector"},
    {ARITH_FP64, 0, fp64_generic, CHAIN_PASS * 8, "generic-vector"},
};

/* What an arithmetic needs of the CPU, for why it is absent. */
static const unsigned needs_of[ARITH_COUNT] = {
    [ARITH_BF16_DOT] = CPU_AVX512F | CPU_AVX512_BF16,
    [ARITH_FP16] = CPU_AVX512F | CPU_AVX512_FP16,
    [ARITH_AMX_BF16] = CPU_AMX_TILE | CPU_AMX_BF16,
};

int peak_kernel_for(peak_arith a, peak_kernel *k, char *why, size_t why_len)
{
    if (a >= ARITH_COUNT)
        return absent(why, why_len, "not an arithmetic the probe knows", 0);
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        const struct candidate *c = &candidates[i];
        if (c->arith != a || !cpu_has(c->needs))
            continue;
        /* AMX tiles also need the kernel's grant of their state */
        if ((c->needs & CPU_AMX_TILE) && !cpu_amx_granted(why, why_len))
            return 0;
        *k = (peak_kernel){c->run, c->flops_per_pass, c->isa};
        return 1;
    }
    if (!cpu_has(needs_of[a]))
        return absent(why, why_len, "this CPU lacks ", needs_of[a] & ~cpu_this()->features);
    return absent(why, why_len, "this build's compiler has no loop for it", 0);
}
