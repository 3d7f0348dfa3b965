/* The direct backend's descriptor and module entry: the CHWN engine
 * (backends/chwn/chwn.h) created with the fp32 register tiles chosen for
 * this CPU, the bf16 products or the fp16 products, and what the backend
 * says of itself. Its name and summary are its registration's
 * (registration.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/chwn/chwn_products.h"
#include "backends/direct/candidates.h"
#include "backends/direct/direct_backend.h"
#include "backends/direct/fp32/direct.h"
#include "backends/direct/fp32/isa.h"
#include "backends/module.h"

/* The tests' way to the emulated fp16 products within one process (the
 * module's "direct_fp16_emulate" table is this int): set, an fp16 engine
 * is created with the "emulated" candidate whatever the choice. */
static int fp16_test_emulated;

/* The candidates of a reduced precision, NULL for fp32 */
static const direct_candidates *candidates_of(precision p)
{
    return p == PREC_BF16   ? &direct_bf16_candidates
           : p == PREC_FP16 ? &direct_fp16_candidates
                            : NULL;
}

/* The set an engine of precision p is created with: fp32's tiles, or the
 * set of the candidate chosen for p; NULL with the reason in why where p
 * cannot run here */
static const struct chwn_products_f32 *products_for(precision p, char *why, size_t why_len)
{
    const direct_candidates *t = candidates_of(p);
    if (!t)
        return direct_choose(why, why_len) ? &direct_fp32_products : NULL;
    if (t == &direct_fp16_candidates && fp16_test_emulated) {
        const direct_candidate *r = direct_candidate_named(t, "emulated");
        if (r && r->set)
            return r->set;
    }
    const direct_choice *c = direct_candidates_choose(t, why, why_len);
    return c ? c->row->set : NULL;
}

/* What an engine computes with, read from the set it was created with: the
 * fp32 kernels chosen at create (direct_choose), or the candidate row of
 * its set and why the choice took it. */
static void direct_describe(engine *e, char *buf, size_t len)
{
    const int threads = chwn_team_of(e).threads;
    const char *ts = threads == 1 ? "" : "s";
    const precision p = host_of(e)->cfg.precision;
    const direct_kernels *k = direct_active();
    const direct_candidates *t = candidates_of(p);
    if (!t) {
        snprintf(buf, len, "%s (direct register tiles: %s), %d thread%s, ISA %s (%s)",
                 precision_name(p), k->description, threads, ts, k->isa,
                 direct_isa_forced() ? "forced by LENET_BENCH_DIRECT_ISA"
                                     : "the best this CPU runs");
        return;
    }
    const struct chwn_products_f32 *set = chwn_products_of_f32(e);
    const direct_candidate *r = direct_candidate_of_set(t, set);
    char why[256] = "";
    const direct_choice *c = direct_candidates_choose(t, why, sizeof why);
    const char *chosen = c && c->row == r ? c->why : "asked for by a test";
    char isa[192];
    if (r && r->isa)
        snprintf(isa, sizeof isa, "%s", r->isa);
    else
        snprintf(isa, sizeof isa, "%s (direct register tiles: %s)", k->isa, k->description);
    snprintf(buf, len, "%s (%s: %s, candidate %s%s, fp32 master weights%s), %d thread%s, ISA %s",
             t->precision, r ? r->products : set->name, chosen, r ? r->name : "?",
             p == PREC_FP16 ? ", chains of 32 summed in fp32" : "",
             p == PREC_FP16 ? ", dynamic loss scaling" : "", threads, ts, isa);
}

/* The fp32 kernels, and each reduced precision's candidates, the chosen
 * one with why */
static void library_info(void *ctx, char *buf, size_t len)
{
    (void)ctx;
    const direct_kernels *k = direct_active();
    int n = snprintf(buf, len, "direct kernels %s (%s)", k->isa, k->description);
    const direct_candidates *const tables[] = {&direct_bf16_candidates, &direct_fp16_candidates};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0] && n >= 0 && (size_t)n < len; i++) {
        char list[512];
        direct_candidates_list(tables[i], list, sizeof list);
        n += snprintf(buf + n, len - n, "; %s candidates: %s", tables[i]->precision, list);
    }
}

/* Whether precision p runs here (products_for says it: a forced ISA the CPU
 * lacks, a candidate named that cannot run here, no candidate that runs) */
static int probe_precision(void *ctx, precision p, char *why, size_t why_len)
{
    (void)ctx;
    return products_for(p, why, why_len) != NULL;
}

static engine *direct_create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                             size_t err_len)
{
    (void)ctx;
    char why[320];
    const precision p = cfg ? cfg->precision : PREC_FP32;
    const struct chwn_products_f32 *set = products_for(p, why, sizeof why);
    if (!set) {
        snprintf(err, err_len, "direct: %s", why);
        return NULL;
    }
    return chwn_create_f32(&direct_backend, set, w, cfg, err, err_len);
}

static const engine_ops direct_ops = {CHWN_ENGINE_OPS, .describe = direct_describe};

const backend direct_backend = {
    .name = "direct",
    .precisions = 1u << PREC_FP32 | 1u << PREC_BF16 | 1u << PREC_FP16,
    .probe_precision = probe_precision,
    .create = direct_create,
    .library_info = library_info,
    .ops = &direct_ops,
    CHWN_BACKEND_ENTRIES,
};

/* the tests' way to the emulated fp16 products (direct_backend.h) */
LB_MODULE_TABLES({"backend", &direct_backend}, {"direct_fp16_emulate", &fp16_test_emulated})
