/* The direct backend's descriptor and module entry: the CHWN engine
 * (backends/chwn/chwn.h) created with the fp32 register tiles chosen for
 * this CPU, the bf16 products or the fp16 products, and what the backend
 * says of itself. Its name and summary are its registration's
 * (registration.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/direct/bf16/bf16_fma.h"
#include "backends/direct/fp32/direct.h"
#include "backends/direct/direct_backend.h"
#ifdef HAVE_DIRECT_FP16
#include "backends/direct/fp16/fp16.h"
#include "backends/direct/fp16/fp16_tiles.h"
#endif
#include "backends/module.h"

/* Whether fp16 runs: the build has the products (fp16.mk) and the CPU
 * AVX512_FP16, or a test (direct_fp16_emulate) or LENET_BENCH_DIRECT_FP16=
 * emulated asked for the emulated products (the same numbers, many times
 * slower: for measuring the numerics where the CPU lacks the
 * instructions); else 0 and the reason. */
static int fp16_runs(char *why, size_t why_len)
{
#ifdef HAVE_DIRECT_FP16
    const char *asked = getenv("LENET_BENCH_DIRECT_FP16");
    if (asked && strcmp(asked, "emulated") == 0)
        direct_fp16_emulate = 1;
    return direct_fp16_emulate || direct_fp16_supported(why, why_len);
#else
    snprintf(why, why_len, "fp16 products left out of this build (the compiler has no "
                           "-mavx512fp16)");
    return 0;
#endif
}

#ifdef HAVE_DIRECT_FP16
static int fp16_emulated(void) { return direct_fp16_emulate; }
#else
static int fp16_emulated(void) { return 0; }
#endif

/* The products this engine was created with: the fp32 kernels chosen at
 * create (direct_choose), the bf16 products chosen then (the same choice
 * again: the environment and the measurement, once a process), or the
 * fp16 ones. */
static void describe_bf16(char *buf, size_t len, int threads)
{
    direct_bf16_choice c;
    char why[256];
    if (!direct_bf16_choose(&c, why, sizeof why)) {
        snprintf(buf, len, "bf16 (%s)", why);
        return;
    }
    const direct_kernels *k = direct_active();
    if (c.dot)
        snprintf(buf, len,
                 "bf16 (bf16 products (vdpbf16ps): %s, fp32 master weights), %d thread%s, ISA "
                 "avx512_bf16 (AVX-512 with AVX512_BF16)",
                 c.why, threads, threads == 1 ? "" : "s");
    else
        snprintf(buf, len,
                 "bf16 (fp32 FMAs on bf16-rounded operands: %s, fp32 master weights), %d "
                 "thread%s, ISA %s (direct register tiles: %s)",
                 c.why, threads, threads == 1 ? "" : "s", k->isa, k->description);
}

static void describe(engine *e, char *buf, size_t len)
{
    const int threads = chwn_team_of(e).threads;
    const precision p = host_of(e)->cfg.precision;
    if (p == PREC_BF16) {
        describe_bf16(buf, len, threads);
        return;
    }
    if (p == PREC_FP16) {
        snprintf(buf, len,
                 "fp16 (fp16 products (%s), chains of 32 summed in fp32, fp32 master weights, "
                 "dynamic loss scaling), %d thread%s, ISA %s",
                 fp16_emulated() ? "vfmadd231ph emulated in portable C" : "vfmadd231ph", threads,
                 threads == 1 ? "" : "s",
                 fp16_emulated() ? "none (emulated)" : "avx512_fp16 (AVX-512 with AVX512_FP16)");
        return;
    }
    const direct_kernels *k = direct_active();
    snprintf(buf, len, "%s (direct register tiles: %s), %d thread%s, ISA %s (%s)",
             precision_name(p), k->description, threads, threads == 1 ? "" : "s", k->isa,
             getenv("LENET_BENCH_DIRECT_ISA") && *getenv("LENET_BENCH_DIRECT_ISA")
                 ? "forced by LENET_BENCH_DIRECT_ISA"
                 : "the best this CPU runs");
}

static void library_info(void *ctx, char *buf, size_t len)
{
    (void)ctx;
    char why[256], bf16[320];
    direct_bf16_choice c;
    const int bf16_ok = direct_bf16_choose(&c, why, sizeof why);
    const direct_kernels *k = direct_active(); /* (chosen with bf16's) */
    if (!bf16_ok)
        snprintf(bf16, sizeof bf16, "not here (%s)", why);
    else
        snprintf(bf16, sizeof bf16, "%s (%s)",
                 c.dot ? "vdpbf16ps" : "fp32 FMAs on bf16-rounded operands", c.why);
    const int fp16 = fp16_runs(why, sizeof why);
    snprintf(buf, len, "direct kernels %s (%s); bf16 products: %s; fp16 products "
             "(vfmadd231ph): %s",
             k->isa, k->description, bf16,
             fp16 ? (fp16_emulated() ? "emulated" : "available") : "not on this CPU");
}

/* A forced instruction set the CPU lacks makes fp32 and bf16 not
 * runnable, LENET_BENCH_DIRECT_BF16=dot where vdpbf16ps cannot run bf16,
 * a CPU without AVX512_FP16 fp16, with the reason. */
static int probe_precision(void *ctx, precision p, char *why, size_t why_len)
{
    (void)ctx;
    direct_bf16_choice c;
    if (p == PREC_BF16)
        return direct_bf16_choose(&c, why, why_len); /* bf16_fma.h */
    if (p == PREC_FP16)
        return fp16_runs(why, why_len);
    return direct_choose(why, why_len) != NULL;
}

/* The set of precision p (a build without the fp16 set never gets here
 * for it: probe_precision refuses) */
static const struct chwn_products_f32 *products_for(precision p)
{
    direct_bf16_choice c;
    char why[256];
    if (p == PREC_BF16 && direct_bf16_choose(&c, why, sizeof why))
        return c.set;
#ifdef HAVE_DIRECT_FP16
    if (p == PREC_FP16)
        return &direct_fp16_products;
#endif
    return &direct_fp32_products;
}

static engine *create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                      size_t err_len)
{
    char why[256];
    const precision p = cfg ? cfg->precision : PREC_FP32;
    if (!probe_precision(ctx, p, why, sizeof why)) {
        snprintf(err, err_len, "direct: %s", why);
        return NULL;
    }
    return chwn_create_f32(&direct_backend, products_for(p), w, cfg, err, err_len);
}

static const engine_ops direct_ops = {CHWN_ENGINE_OPS, .describe = describe};

const backend direct_backend = {
    .name = "direct",
    .precisions = 1u << PREC_FP32 | 1u << PREC_BF16 | 1u << PREC_FP16,
    .probe_precision = probe_precision,
    .create = create,
    .library_info = library_info,
    .ops = &direct_ops,
    CHWN_BACKEND_ENTRIES,
};

#ifdef HAVE_DIRECT_FP16
/* the tests' way to the emulated fp16 products (direct_backend.h) */
LB_MODULE_TABLES({"backend", &direct_backend}, {"direct_fp16_emulate", &direct_fp16_emulate})
#else
LB_MODULE_TABLES({"backend", &direct_backend})
#endif
