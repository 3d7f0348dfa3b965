/* The backend tables over the CHWN engine (blas_engine_impl.h): blas's in
 * the plain float build (OpenBLAS; create picks the fp32, fp64 or bf16
 * build), direct's in the direct fp32 build (the register tiles; create
 * picks fp32 or bf16), with what each says of itself. Built those two ways
 * only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LB_REAL_DIRECT
#include "backends/direct/direct.h"
#else
#include <cblas.h>

#include "backends/blas/bf16.h"
#include "backends/blas/sgemm_peak.h"
#endif
#include "backends/blas/blas_engine_impl.h"
#include "backends/module.h"

#ifdef LB_REAL_PLAIN
static const char *parallel_name(void)
{
    switch (openblas_get_parallel()) {
    case 0:
        return "sequential";
    case 1:
        return "pthreads";
    case 2:
        return "openmp";
    }
    return "unknown threading";
}

void blas_library_info(char *buf, size_t len)
{
    /* the configuration string starts "OpenBLAS 0.3.21 ..." */
    char version[64] = "OpenBLAS";
    const char *config = openblas_get_config();
    if (config && strncmp(config, "OpenBLAS ", 9) == 0)
        snprintf(version, sizeof version, "OpenBLAS %.*s", (int)strcspn(config + 9, " "),
                 config + 9);
    snprintf(buf, len, "%s %s (%s)", version, openblas_get_corename(), parallel_name());
}

static void library_info(void *ctx, char *buf, size_t len)
{
    (void)ctx;
    blas_library_info(buf, len);
}

/* 1024^3 is big enough for OpenBLAS to reach its speed and takes about
 * 0.1 s at 100 GFLOP/s (the tool's default, 2048^3 five times, seconds). */
static double library_peak_gflops(int threads)
{
    return blas_sgemm_peak_gflops_sized(threads, 1024, 3);
}

#endif

static void placement(engine *e, int *threads, int *devices, int *replicas)
{
    *threads = e->team.threads;
    *devices = 0;
    *replicas = 1;
}

#ifdef LB_REAL_DIRECT_FP32
/* Whether bf16 runs: the build has the products (bf16.mk) and the CPU
 * AVX512_BF16; else 0 and the reason. */
static int bf16_runs(char *why, size_t why_len)
{
#ifdef HAVE_DIRECT_BF16
    return direct_bf16_supported(why, why_len);
#else
    snprintf(why, why_len, "bf16 products left out of this build (the compiler has no "
                           "-mavx512bf16)");
    return 0;
#endif
}

/* The fp32 kernels this engine was created with (direct_choose, at
 * create); bf16 runs the one AVX512_BF16 build of its products, whatever
 * LENET_BENCH_DIRECT_ISA says. */
static void describe(engine *e, char *buf, size_t len)
{
    const int threads = e->team.threads;
    if (e->h.cfg.precision == PREC_BF16) {
        snprintf(buf, len,
                 "bf16 (bf16 products (vdpbf16ps), fp32 master weights), %d thread%s, ISA "
                 "avx512_bf16 (AVX-512 with AVX512_BF16)",
                 threads, threads == 1 ? "" : "s");
        return;
    }
    const direct_kernels *k = direct_active();
    snprintf(buf, len, "%s (direct register tiles: %s), %d thread%s, ISA %s (%s)",
             precision_name(e->h.cfg.precision), k->description, threads,
             threads == 1 ? "" : "s", k->isa,
             getenv("LENET_BENCH_DIRECT_ISA") && *getenv("LENET_BENCH_DIRECT_ISA")
                 ? "forced by LENET_BENCH_DIRECT_ISA"
                 : "the best this CPU runs");
}

static void library_info(void *ctx, char *buf, size_t len)
{
    (void)ctx;
    const direct_kernels *k = direct_active();
    char why[256];
    snprintf(buf, len, "direct kernels %s (%s); bf16 products (vdpbf16ps): %s", k->isa,
             k->description, bf16_runs(why, sizeof why) ? "available" : "not on this CPU");
}

/* A forced instruction set the CPU lacks makes fp32 not runnable, a CPU
 * without AVX512_BF16 (or a build without the products) bf16, with the
 * reason. */
static int probe_precision(void *ctx, precision p, char *why, size_t why_len)
{
    (void)ctx;
    if (p == PREC_BF16)
        return bf16_runs(why, why_len);
    return direct_choose(why, why_len) != NULL;
}

static engine *create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                      size_t err_len)
{
    (void)ctx;
    char why[256];
    if (cfg && cfg->precision == PREC_BF16) {
        if (!bf16_runs(why, sizeof why)) {
            snprintf(err, err_len, "direct: %s", why);
            return NULL;
        }
#ifdef HAVE_DIRECT_BF16
        return blas_create_direct_bf16(w, cfg, err, err_len);
#endif
    }
    if (!direct_choose(why, sizeof why)) {
        snprintf(err, err_len, "direct: %s", why);
        return NULL;
    }
    return blas_create_direct(w, cfg, err, err_len);
}
#endif

#ifdef LB_REAL_PLAIN
static void describe(engine *e, char *buf, size_t len)
{
    static const char *const gemms[PRECISION_COUNT] = {
        [PREC_FP32] = "sgemm",
        [PREC_BF16] = "sbgemm on bf16 operands, fp32 sums",
        [PREC_FP64] = "dgemm"};
    const precision p = e->h.cfg.precision;
    snprintf(buf, len, "%s (%s), %d thread%s, OpenBLAS %s %s, work split by %s",
             precision_name(p), gemms[p] ? gemms[p] : "?", e->team.threads,
             e->team.threads == 1 ? "" : "s", parallel_name(), openblas_get_corename(),
             e->team.split == BLAS_SPLIT_OWN ? "the engine" : "OpenBLAS");
}

static engine *create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                      size_t err_len)
{
    (void)ctx;
    const precision p = cfg ? cfg->precision : PREC_FP32;
    char why[256];
    if (p == PREC_BF16 && !blas_bf16_available(why, sizeof why)) {
        snprintf(err, err_len, "blas: %s", why);
        return NULL;
    }
    return p == PREC_FP64   ? blas_create_f64(w, cfg, err, err_len)
           : p == PREC_BF16 ? blas_create_bf16(w, cfg, err, err_len)
                            : blas_create_f32(w, cfg, err, err_len);
}

/* bf16 needs the CPU's AVX512_BF16 and an OpenBLAS with cblas_sbgemm. */
static int probe_precision(void *ctx, precision p, char *why, size_t why_len)
{
    (void)ctx;
    return p != PREC_BF16 || blas_bf16_available(why, why_len);
}
#endif

/* The engine entries the blas and direct tables share: each build's own
 * destroy and description, the host engine's bookkeeping. */
static const engine_ops chwn_ops = {HOST_ENGINE_OPS, .destroy = R(blas_destroy),
                                    .placement = placement, .describe = describe};

/* What the blas and direct descriptors share: each build's own create and
 * probe of a precision, its libraries, and the host engine's tables. */
#define CHWN_BACKEND_ENTRIES                                                                   \
    .probe = host_probe, .probe_precision = probe_precision, .create = create,                \
    .library_info = library_info, .ops = &chwn_ops, .dp = &host_data_parallel,                \
    .stage = &host_stages

#ifdef LB_REAL_PLAIN
const backend blas_backend = {
    .name = "blas",
    .summary = "OpenBLAS GEMMs (convolutions over unfolded inputs, dense layers over the "
               "whole batch) + OpenMP loops, fp32, fp64 or bf16",
    .built = 1,
    .precisions = 1u << PREC_FP32 | 1u << PREC_FP64 | 1u << PREC_BF16,
    CHWN_BACKEND_ENTRIES,
    .library_peak_gflops = library_peak_gflops,
};

LB_MODULE_EXPORT const void *lb_module_entry(int abi, const char *table)
{
    if (abi != LB_MODULE_ABI)
        return NULL;
    if (strcmp(table, "backend") == 0)
        return &blas_backend;
    if (strcmp(table, "kernel_probe") == 0)
        return &blas_kernel_probe_table;
    return NULL;
}
#endif

#ifdef LB_REAL_DIRECT_FP32
const backend direct_backend = {
    .name = "direct",
    .summary = "the project's own register tiles (no library), vector width and tiles "
               "chosen per CPU when it runs (AVX-512, AVX2, generic) + OpenMP loops, fp32; "
               "bf16 products (vdpbf16ps, AVX512_BF16) with fp32 master weights",
    .built = 1,
    .precisions = 1u << PREC_FP32 | 1u << PREC_BF16,
    CHWN_BACKEND_ENTRIES,
};

LB_MODULE_EXPORT const void *lb_module_entry(int abi, const char *table)
{
    if (abi != LB_MODULE_ABI)
        return NULL;
    if (strcmp(table, "backend") == 0)
        return &direct_backend;
    return NULL;
}
#endif
