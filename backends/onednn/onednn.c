/* The onednn engine (see onednn.h and, for how it is built, onednn_impl.h):
 * what the library runs on, create and destroy, running the chains, the
 * backend table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/common/elementwise.h"
#include "backends/common/library_arithmetic.h"
#include "backends/common/parallel_update.h"
#include "backends/module.h"
#include "backends/onednn/onednn_impl.h"
#include "base/clock.h"

/* ---------------------------------------------------------------------- */
/* What the library runs on                                                 */

static int isa_has_bf16(dnnl_cpu_isa_t isa)
{
    return (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

static const char *isa_name(void)
{
    /* "cpu_isa_avx512_core_bf16" -> "avx512_core_bf16" */
    const char *s = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa());
    if (!s)
        return "unknown ISA";
    return strncmp(s, "cpu_isa_", 8) == 0 ? s + 8 : s;
}

static void library_info(void *ctx, char *buf, size_t len)
{
    (void)ctx;
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, len, "oneDNN %d.%d.%d %s (%s)", v->major, v->minor, v->patch, isa_name(),
             dnnl_runtime2str(v->cpu_runtime));
}

/* "" when oneDNN creates f16 primitives for LeNet's conv2 (128 x 20 x 12 x
 * 12, 50 5x5) and an f16 inner product on this CPU, else what it said of
 * the first it refused: asked of the library, not of its version, so that
 * one with f16 CPU kernels is seen as such (oneDNN 2.6 has none). */
static void f16_primitives(char *said, size_t len)
{
    dnnl_engine_t cpu = NULL;
    dnnl_status_t st = dnnl_engine_create(&cpu, dnnl_cpu, 0);
    const char *what = "engine_create";
    const dnnl_dims_t src = {128, 20, 12, 12}, wei = {50, 20, 5, 5}, dst = {128, 50, 8, 8};
    const dnnl_dims_t fsrc = {128, 800}, fwei = {500, 800}, fdst = {128, 500}, bias = {50};
    const dnnl_dims_t fbias = {500}, one = {1, 1}, none = {0, 0};
    dnnl_memory_desc_t md[8];
    const int ok_mds =
        dnnl_memory_desc_init_by_tag(&md[0], 4, src, dnnl_f16, dnnl_format_tag_any) == 0 &&
        dnnl_memory_desc_init_by_tag(&md[1], 4, wei, dnnl_f16, dnnl_format_tag_any) == 0 &&
        dnnl_memory_desc_init_by_tag(&md[2], 1, bias, dnnl_f16, dnnl_a) == 0 &&
        dnnl_memory_desc_init_by_tag(&md[3], 4, dst, dnnl_f16, dnnl_format_tag_any) == 0 &&
        dnnl_memory_desc_init_by_tag(&md[4], 2, fsrc, dnnl_f16, dnnl_format_tag_any) == 0 &&
        dnnl_memory_desc_init_by_tag(&md[5], 2, fwei, dnnl_f16, dnnl_format_tag_any) == 0 &&
        dnnl_memory_desc_init_by_tag(&md[6], 1, fbias, dnnl_f16, dnnl_a) == 0 &&
        dnnl_memory_desc_init_by_tag(&md[7], 2, fdst, dnnl_f16, dnnl_format_tag_any) == 0;
    if (st == dnnl_success && !ok_mds)
        st = dnnl_unimplemented, what = "memory_desc_init (f16)";
    if (st == dnnl_success) {
        dnnl_convolution_desc_t conv;
        dnnl_inner_product_desc_t ip;
        dnnl_primitive_desc_t pd = NULL;
        what = "convolution";
        st = dnnl_convolution_forward_desc_init(&conv, dnnl_forward_training,
                                                dnnl_convolution_direct, &md[0], &md[1],
                                                &md[2], &md[3], one, none, none);
        if (st == dnnl_success)
            st = dnnl_primitive_desc_create(&pd, &conv, NULL, cpu, NULL);
        if (pd)
            dnnl_primitive_desc_destroy(pd), pd = NULL;
        if (st == dnnl_success) {
            what = "inner product";
            st = dnnl_inner_product_forward_desc_init(&ip, dnnl_forward_training, &md[4],
                                                      &md[5], &md[6], &md[7]);
            if (st == dnnl_success)
                st = dnnl_primitive_desc_create(&pd, &ip, NULL, cpu, NULL);
            if (pd)
                dnnl_primitive_desc_destroy(pd);
        }
    }
    if (cpu)
        dnnl_engine_destroy(cpu);
    said[0] = 0;
    if (st != dnnl_success)
        snprintf(said, len, "f16 %s: %s", what, dnnl_status2str(st));
}

/* fp16 would need the library's f16 kernels and loss scaling in this
 * engine: refused with the library's reason, or the engine's where the
 * library has them. */
static int fp16_refused(char *why, size_t why_len)
{
    char said[128];
    f16_primitives(said, sizeof said);
    const dnnl_version_t *v = dnnl_version();
    if (said[0])
        snprintf(why, why_len,
                 "oneDNN %d.%d.%d has no f16 convolution or inner product on this CPU (%s, "
                 "ISA %s)",
                 v->major, v->minor, v->patch, said, isa_name());
    else
        snprintf(why, why_len,
                 "oneDNN %d.%d.%d offers f16 primitives here, but this engine has no fp16 loss "
                 "scaling yet",
                 v->major, v->minor, v->patch);
    return 0;
}

static int probe_precision(void *ctx, precision p, char *why, size_t why_len)
{
    (void)ctx;
    if (p == PREC_FP16)
        return fp16_refused(why, why_len);
    if (p != PREC_BF16 || isa_has_bf16(dnnl_get_effective_cpu_isa()))
        return 1;
    snprintf(why, why_len,
             "oneDNN runs %s here, and bf16 needs AVX512_BF16 or AMX (avx512_core_bf16 "
             "or later: AMD Zen 4, Intel Cooper Lake, Sapphire Rapids and later)",
             isa_name());
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Create and destroy                                                       */

static const host_layers onednn_layers;

static void destroy(engine *handle)
{
    onednn_engine *e = onednn_of(handle);
    if (!e)
        return;
    for (int i = 0; i < e->n_prims; i++)
        dnnl_primitive_destroy(e->prims[i]);
    for (int i = 0; i < e->n_mems; i++)
        dnnl_memory_destroy(e->mems[i]);
    for (int i = 0; i < e->n_pds; i++)
        dnnl_primitive_desc_destroy(e->pds[i]);
    if (e->stream)
        dnnl_stream_destroy(e->stream);
    if (e->cpu)
        dnnl_engine_destroy(e->cpu);
    host_engine_free(handle); /* and the buffers of host_alloc_counted */
}

static const char *check_workload(const workload *w, const engine_config *cfg)
{
    (void)w;
    if (cfg->threads < 0)
        return "thread count must be 0 (every core) or more";
    return NULL;
}

static int build(onednn_engine *e)
{
    host_engine *h = &e->h;
    DNNL_CHECK(h, dnnl_engine_create(&e->cpu, dnnl_cpu, 0));
    DNNL_CHECK(h, dnnl_stream_create(&e->stream, e->cpu, dnnl_stream_default_flags));
    if (build_chain(e, &e->train, dnnl_forward_training) || build_backward_chain(e) ||
        build_chain(e, &e->infer, dnnl_forward_inference))
        return -1;
    note_implementations(e);
    return 0;
}

static engine *onednn_create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                             size_t err_len)
{
    (void)ctx;
    char why[256];
    if (cfg && !probe_precision(NULL, cfg->precision, why, sizeof why)) {
        snprintf(err, err_len, "onednn: %s", why);
        return NULL;
    }
    onednn_engine *e = onednn_of(host_engine_create(&onednn_backend, &onednn_layers, sizeof *e,
                                                    w, cfg, check_workload, err, err_len));
    if (!e)
        return NULL;
    host_engine *h = &e->h;
    e->threads = cfg->threads > 0 ? cfg->threads : omp_get_num_procs();
    e->dt = cfg->precision == PREC_BF16 ? dnnl_bf16 : dnnl_f32;
    const size_t B = (size_t)cfg->batch_size;
    e->input = host_alloc_counted(h, B * shape3_size(w->input), &h->workspace_bytes);
    e->logits = host_alloc_counted(h, B * w->classes, &h->workspace_bytes);
    e->d_logits = host_alloc_counted(h, B * w->classes, &h->workspace_bytes);
    if (!e->input || !e->logits || !e->d_logits)
        return host_engine_out_of_memory((engine *)e, err, err_len);
    enter(e); /* the kernels are chosen for the engine's thread count */
    if (build(e)) {
        snprintf(err, err_len, "%s", h->err);
        destroy((engine *)e);
        return NULL;
    }
    return (engine *)e;
}

/* ---------------------------------------------------------------------- */
/* Running                                                                  */

static int run(onednn_engine *e, const op *o)
{
    if (o->prim)
        DNNL_CHECK(&e->h, dnnl_primitive_execute(o->prim, e->stream, o->nargs, o->args));
    return 0;
}

static int finish(onednn_engine *e)
{
    DNNL_CHECK(&e->h, dnnl_stream_wait(e->stream));
    return 0;
}

/* Images idx[0..n) of d (first.. when idx is NULL) as the first layer's
 * source; the rows past n of a short batch are zero. */
static int load_images(onednn_engine *e, const chain *c, const dataset *d, const int32_t *idx,
                       int first, int n)
{
    const size_t pixels = (size_t)d->rows * d->cols;
    for (int b = 0; b < n; b++) {
        const long i = idx ? idx[b] : first + b;
        const uint8_t *src = d->images + (size_t)i * pixels;
        float *dst = e->input + (size_t)b * pixels;
        for (size_t p = 0; p < pixels; p++)
            dst[p] = lb_pixel(src[p]);
    }
    memset(e->input + (size_t)n * pixels, 0,
           sizeof(float) * pixels * (size_t)(e->h.cfg.batch_size - n));
    return run(e, &c->to_input);
}

/* The scoring primitives' weights from the flat parameters. */
static int load_weights(onednn_engine *e, const chain *c)
{
    for (int i = 0; i < e->h.w.n_layers; i++)
        if (run(e, &c->layer[i].to_weights))
            return -1;
    return 0;
}

/* The mean loss of the first n rows of the logits, its gradient into the
 * last layer's output gradient (zero in the padded rows). */
static int loss_and_dlogits(onednn_engine *e, int n, double *mean)
{
    host_engine *h = &e->h;
    const int classes = h->w.classes;
    if (run(e, &e->train.to_logits) || finish(e))
        return -1;
    double sum = 0;
    for (int b = 0; b < n; b++)
        sum += lb_softmax_xent(e->logits + (size_t)b * classes, classes, h->labels[b],
                               1.0f / (float)n, e->d_logits + (size_t)b * classes);
    memset(e->d_logits + (size_t)n * classes, 0,
           sizeof(float) * classes * (size_t)(h->cfg.batch_size - n));
    *mean = sum / n;
    return run(e, &e->to_diff_logits);
}

static int backward_layer(onednn_engine *e, int i)
{
    const back_layer *k = &e->back[i];
    return run(e, &k->to_weights_src) || run(e, &k->to_weights_diff_dst) ||
           run(e, &k->backward_weights) || run(e, &k->to_grads) ||
           run(e, &k->backward_data);
}

/* One training pass over n images; times added to t when given. */
static int step(onednn_engine *e, int n, double *mean, layer_times *t)
{
    const int L = e->h.w.n_layers;
    for (int i = 0; i < L; i++) {
        /* a layer's time includes its weights' reorders from the flat vector */
        const double t0 = t ? now_ms() : 0;
        if (run(e, &e->train.layer[i].to_weights) || run(e, &e->back[i].to_weights) ||
            run(e, &e->train.layer[i].forward) || (t && finish(e)))
            return -1;
        if (t)
            t->forward_ms[i] += now_ms() - t0;
    }
    double t0 = t ? now_ms() : 0;
    if (loss_and_dlogits(e, n, mean))
        return -1;
    if (t)
        t->loss_ms += now_ms() - t0;
    for (int i = L - 1; i >= 0; i--) {
        t0 = t ? now_ms() : 0;
        if (backward_layer(e, i) || (t && finish(e)))
            return -1;
        if (t)
            t->backward_ms[i] += now_ms() - t0;
    }
    return finish(e);
}

/* Every conv and dense layer writes its gradients whole, and every
 * parameter belongs to one of them, so nothing needs zeroing. */
static int compute_gradients(engine *handle, const int32_t *indices, int batch, float *loss)
{
    onednn_engine *e = onednn_of(handle);
    host_engine *h = &e->h;
    enter(e);
    if (host_check_batch(h, batch) || host_take_labels(h, &h->train, indices, 0, batch) ||
        load_images(e, &e->train, &h->train, indices, 0, batch))
        return -1;
    double mean;
    return step(e, batch, &mean, NULL) ? -1 : host_keep_loss(h, mean, loss);
}

static int apply_update(engine *handle, float grad_scale)
{
    onednn_engine *e = onednn_of(handle);
    enter(e);
    host_update_in_ranges(&e->h, grad_scale, e->threads);
    return 0;
}

static int score(engine *handle, int first, int n, double *loss_sum)
{
    onednn_engine *e = onednn_of(handle);
    host_engine *h = &e->h;
    const int L = h->w.n_layers, classes = h->w.classes;
    enter(e);
    if (load_weights(e, &e->infer) || load_images(e, &e->infer, &h->test, NULL, first, n))
        return -1;
    for (int i = 0; i < L; i++)
        if (run(e, &e->infer.layer[i].forward))
            return -1;
    if (run(e, &e->infer.to_logits) || finish(e))
        return -1;
    for (int b = 0; b < n; b++) {
        const float *z = e->logits + (size_t)b * classes;
        *loss_sum += lb_softmax_xent(z, classes, h->labels[b], 1.0f, NULL);
        h->predicted[b] = lb_argmax(z, classes);
    }
    return 0;
}

static void time_steps(engine *handle, const int32_t *indices, int batch, int reps,
                       layer_times *out)
{
    onednn_engine *e = onednn_of(handle);
    host_engine *h = &e->h;
    enter(e);
    if (load_images(e, &e->train, &h->train, indices, 0, batch))
        return;
    for (int r = 0; r < reps; r++) {
        double mean;
        if (step(e, batch, &mean, out))
            return;
        const double t0 = now_ms();
        host_update_in_ranges(&e->h, 1, e->threads);
        out->update_ms += now_ms() - t0;
    }
}

static const host_layers onednn_layers = {
    .compute_gradients = compute_gradients,
    .apply_update = apply_update,
    .score = score,
    .time_steps = time_steps,
};

/* ---------------------------------------------------------------------- */
/* For the tests                                                            */

static int export(onednn_engine *e, dnnl_memory_t m, float *out)
{
    op to = {0};
    if (!m)
        return host_fail(&e->h, "no such tensor");
    enter(e);
    if (primitive_to_host(e, &to, m, out) || run(e, &to) || finish(e))
        return -1;
    return 0;
}

int onednn_engine_activation(engine *handle, int i, float *out)
{
    onednn_engine *e = onednn_of(handle);
    if (i < 0 || i >= e->h.w.n_layers)
        return host_fail(&e->h, "layer %d outside 0..%d", i, e->h.w.n_layers - 1);
    return export(e, e->train.layer[i].dst, out);
}

int onednn_engine_input_gradient(engine *handle, int i, float *out)
{
    onednn_engine *e = onednn_of(handle);
    if (i < 1 || i >= e->h.w.n_layers)
        return host_fail(&e->h, "layer %d outside 1..%d", i, e->h.w.n_layers - 1);
    return export(e, e->back[i].diff_src, out);
}

/* ---------------------------------------------------------------------- */
/* The table                                                                */

static void placement(engine *handle, int *threads, int *devices, int *replicas)
{
    onednn_engine *e = onednn_of(handle);
    *threads = e->threads;
    *devices = 0;
    *replicas = 1;
}

static void onednn_describe(engine *handle, char *buf, size_t len)
{
    onednn_engine *e = onednn_of(handle);
    char lib[128];
    library_info(NULL, lib, sizeof lib);
    snprintf(buf, len, "%s, %d thread%s, %s; %s",
             e->dt == dnnl_bf16 ? "bf16 (fp32 master weights)" : "fp32",
             e->threads, e->threads == 1 ? "" : "s", lib, e->impls);
}

static const char *arithmetic(engine *handle)
{
    return onednn_of(handle)->dt == dnnl_bf16 ? library_bf16_arithmetic() : ARITHMETIC_FP32;
}

static const engine_ops onednn_ops = {HOST_ENGINE_OPS, .destroy = destroy,
                                      .placement = placement, .describe = onednn_describe,
                                      .arithmetic = arithmetic};

/* No model-parallel stages: this engine does not offer them. */
const backend onednn_backend = {
    .name = "onednn",
    .built = 1,
    .precisions = 1u << PREC_FP32 | 1u << PREC_BF16 | 1u << PREC_FP16,
    .probe = host_probe, .probe_precision = probe_precision, .create = onednn_create,
    .library_info = library_info, .ops = &onednn_ops, .dp = &host_data_parallel,
};

LB_MODULE_TABLES({"backend", &onednn_backend})
