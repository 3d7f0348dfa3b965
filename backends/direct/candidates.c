/* The direct backend's candidate tables and their names' rule
 * (candidates.h). Part of the program, which reads only the names, and of
 * the module: the sets and functions a row names are declared weak here,
 * so that the program links without them and a row whose set this build
 * left out holds NULL. */
#include "backends/direct/candidates.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WEAK __attribute__((weak))

/* bf16 (bf16/bf16_fma.h, bf16/bf16.h) */
extern const struct chwn_products_f32 direct_bf16_fma_products WEAK, direct_bf16_products WEAK;
int direct_bf16_dot_runs(char *brief, size_t brief_len, char *why, size_t why_len) WEAK;
double direct_bf16_dot_over_fma(void) WEAK;

/* fp32 FMAs on bf16-rounded operands first: vdpbf16ps is chosen only
 * where it measures faster */
static const direct_candidate bf16_rows[] = {
    {
        .name = "fma",
        .set = &direct_bf16_fma_products,
        .products = "fp32 FMAs on bf16-rounded operands",
    },
    {
        .name = "dot",
        .set = &direct_bf16_products,
        .missing = "the compiler has no -mavx512bf16",
        .products = "bf16 products (vdpbf16ps)",
        .isa = "avx512_bf16 (AVX-512 with AVX512_BF16)",
        .runs = direct_bf16_dot_runs,
        .rate = direct_bf16_dot_over_fma,
    },
};

const direct_candidates direct_bf16_candidates = {
    .precision = "bf16",
    .variable = "LENET_BENCH_DIRECT_BF16",
    .rows = bf16_rows,
    .count = sizeof bf16_rows / sizeof bf16_rows[0],
};

/* fp16 (fp16/fp16.h) */
extern const struct chwn_products_f32 direct_fp16_products WEAK,
    direct_fp16_emulated_products WEAK;
int direct_fp16_vector_runs(char *brief, size_t brief_len, char *why, size_t why_len) WEAK;

/* the emulation (the same numbers, many times slower) only when asked for:
 * for measuring the numerics where the CPU lacks the instructions */
static const direct_candidate fp16_rows[] = {
    {
        .name = "avx512_fp16",
        .set = &direct_fp16_products,
        .missing = "the compiler has no -mavx512fp16",
        .products = "fp16 products (vfmadd231ph)",
        .isa = "avx512_fp16 (AVX-512 with AVX512_FP16)",
        .runs = direct_fp16_vector_runs,
    },
    {
        .name = "emulated",
        .set = &direct_fp16_emulated_products,
        .missing = "the compiler has no -mavx512fp16",
        .products = "fp16 products (vfmadd231ph emulated in portable C)",
        .isa = "none (emulated)",
        .named_only = 1,
    },
};

const direct_candidates direct_fp16_candidates = {
    .precision = "fp16",
    .variable = "LENET_BENCH_DIRECT_FP16",
    .rows = fp16_rows,
    .count = sizeof fp16_rows / sizeof fp16_rows[0],
};

const direct_candidate *direct_candidate_named(const direct_candidates *t, const char *name)
{
    for (int i = 0; name && i < t->count; i++)
        if (strcmp(t->rows[i].name, name) == 0)
            return &t->rows[i];
    return NULL;
}

const char *direct_candidate_asked(const direct_candidates *t)
{
    const char *asked = getenv(t->variable);
    return asked && *asked ? asked : NULL;
}

int direct_candidates_check(char *err, size_t err_len)
{
    const direct_candidates *const tables[] = {&direct_bf16_candidates, &direct_fp16_candidates};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        const direct_candidates *t = tables[i];
        const char *asked = direct_candidate_asked(t);
        if (!asked || direct_candidate_named(t, asked))
            continue;
        int n = snprintf(err, err_len, "%s=%s: not one of ", t->variable, asked);
        for (int r = 0; r < t->count && n >= 0 && (size_t)n < err_len; r++)
            n += snprintf(err + n, err_len - n, "%s%s", r ? ", " : "", t->rows[r].name);
        return -1;
    }
    return 0;
}
