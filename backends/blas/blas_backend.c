/* The blas backend's descriptor and module entry: the CHWN engine
 * (backends/chwn/chwn.h) created with the OpenBLAS product set of the
 * precision asked (gemm_products.c), and what the backend says of itself.
 * Its name and summary are its registration's (registration.c). */
#include <cblas.h>
#include <stdio.h>
#include <string.h>

#include "backends/blas/blas.h"
#include "backends/blas/bf16.h"
#include "backends/blas/sgemm_peak.h"
#include "backends/module.h"

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

static void blas_describe(engine *e, char *buf, size_t len)
{
    static const char *const gemms[PRECISION_COUNT] = {
        [PREC_FP32] = "sgemm",
        [PREC_BF16] = "sbgemm on bf16 operands, fp32 sums",
        [PREC_FP64] = "dgemm"};
    const precision p = host_of(e)->cfg.precision;
    const chwn_team team = chwn_team_of(e);
    snprintf(buf, len, "%s (%s), %d thread%s, OpenBLAS %s %s, work split by %s",
             precision_name(p), gemms[p] ? gemms[p] : "?", team.threads,
             team.threads == 1 ? "" : "s", parallel_name(), openblas_get_corename(),
             team.split == CHWN_SPLIT_OWN ? "the engine" : "OpenBLAS");
}

static engine *blas_create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                           size_t err_len)
{
    (void)ctx;
    const precision p = cfg ? cfg->precision : PREC_FP32;
    char why[256];
    if (p == PREC_BF16 && !blas_bf16_available(why, sizeof why)) {
        snprintf(err, err_len, "blas: %s", why);
        return NULL;
    }
    if (p == PREC_FP64)
        return chwn_create_f64(&blas_backend, &blas_dgemm_products, w, cfg, err, err_len);
    return chwn_create_f32(&blas_backend,
                           p == PREC_BF16 ? &blas_sbgemm_products : &blas_sgemm_products, w, cfg,
                           err, err_len);
}

/* bf16 needs the CPU's AVX512_BF16 and an OpenBLAS with cblas_sbgemm. */
static int probe_precision(void *ctx, precision p, char *why, size_t why_len)
{
    (void)ctx;
    return p != PREC_BF16 || blas_bf16_available(why, why_len);
}

static const engine_ops blas_ops = {CHWN_ENGINE_OPS, .describe = blas_describe};

const backend blas_backend = {
    .name = "blas",
    .precisions = 1u << PREC_FP32 | 1u << PREC_FP64 | 1u << PREC_BF16,
    .probe_precision = probe_precision,
    .create = blas_create,
    .library_info = library_info,
    .library_peak_gflops = library_peak_gflops,
    .ops = &blas_ops,
    CHWN_BACKEND_ENTRIES,
};

LB_MODULE_TABLES({"backend", &blas_backend}, {"kernel_probe", &blas_kernel_probe_table})
