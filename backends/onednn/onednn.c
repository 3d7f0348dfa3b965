/* The onednn engine (see onednn.h): oneDNN is to the CPU what cuDNN is to
 * the GPU, so the engine describes each layer and lets the library pick
 * its algorithm and memory layout.
 *
 * Every primitive is created once, in create, for the engine's batch size:
 * one chain for training (forward_training, then backward data and
 * backward weights) and one for scoring (forward_inference). A smaller
 * batch (an epoch's last, the test set's last) runs through the same
 * primitives with its images padded to the full batch: the padded rows
 * get a zero loss gradient, so they add exactly nothing to any gradient.
 *
 * Layouts: each primitive is created with dnnl_format_tag_any for its
 * source, weights and destination (the first layer's source too), and a
 * layer's source is the previous layer's destination as the library laid
 * it out, so activations flow from layer to layer without reorders. The
 * flat parameter vector (workloads/workload.h) and the data are the only
 * places a layout is imposed: weights are reordered from it before each
 * pass, weight gradients back into it after, the images into the first
 * layer, the logits out of the last and their gradient back in.
 *
 * bf16 (a CPU with AVX512_BF16 or AMX, as oneDNN sees it): activations,
 * their gradients and the primitives' weights in bf16, bias and weight
 * gradients in fp32, fp32 master weights and optimiser state in the host
 * buffers. */
#include "backends/onednn/onednn.h"

#include <dnnl.h>
#include <dnnl_debug.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/common/elementwise.h"
#include "backends/common/host_engine.h"
#include "backends/common/parallel_update.h"
#include "backends/module.h"
#include "base/clock.h"

enum { MAX_OBJECTS = 32 * WORKLOAD_MAX_LAYERS, MAX_ARGS = 6 };

/* One primitive with its arguments, bound at create; prim NULL: nothing
 * to run. */
typedef struct op {
    dnnl_primitive_t prim;
    int nargs;
    dnnl_exec_arg_t args[MAX_ARGS];
} op;

/* A layer in one chain. */
typedef struct pass_layer {
    const_dnnl_primitive_desc_t pd; /* the forward's, a hint for the backward */
    dnnl_memory_t src, dst, workspace;
    dnnl_memory_t weights;    /* in the primitive's layout */
    op to_weights;            /* from the flat parameters, when their layout differs */
    op forward;
} pass_layer;

/* A chain of forward primitives over the engine's batch. */
typedef struct chain {
    pass_layer layer[WORKLOAD_MAX_LAYERS];
    op to_input;  /* the host's NCHW floats into the first layer's source */
    op to_logits; /* the last layer's output into the host's floats */
} chain;

/* A layer's backward pass (training chain only). */
typedef struct back_layer {
    dnnl_memory_t diff_src; /* NULL for the first layer */
    dnnl_memory_t weights;  /* what backward data reads (the forward's when alike) */
    op to_weights;
    op backward_data, backward_weights;
    /* the source and output gradient as the weight gradient's fp32 fallback
     * reads them (see weights_from_f32) */
    op to_weights_src, to_weights_diff_dst;
    int weights_in_f32; /* that fallback is taken */
    op to_grads; /* the weight gradient into the flat vector, when its layout differs */
} back_layer;

struct engine {
    host_engine h; /* first, so that the host_* entries find it */
    int threads;
    dnnl_data_type_t dt; /* activations and the primitives' weights */
    dnnl_engine_t cpu;
    dnnl_stream_t stream;
    float *input;    /* [B][C][H][W]: the images of a pass */
    float *logits;   /* [B][classes] */
    float *d_logits; /* [B][classes] */
    chain train, infer;
    back_layer back[WORKLOAD_MAX_LAYERS];
    op to_diff_logits;
    dnnl_memory_t diff_logits; /* the last layer's output gradient */
    char impls[512];           /* which implementation each forward runs */
    /* everything created, for destroy */
    dnnl_memory_t mems[MAX_OBJECTS];
    dnnl_primitive_t prims[MAX_OBJECTS];
    dnnl_primitive_desc_t pds[MAX_OBJECTS];
    int n_mems, n_prims, n_pds;
};

/* Every oneDNN call is checked; the message says where and what. */
#define DNNL_CHECK(h, call)                                                                    \
    do {                                                                                       \
        const dnnl_status_t status_ = (call);                                                  \
        if (status_ != dnnl_success)                                                           \
            return host_fail(h, "%s:%d: %s: %s", __FILE__, __LINE__, #call,                    \
                             dnnl_status2str(status_));                                        \
    } while (0)

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

static void library_info(char *buf, size_t len)
{
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, len, "oneDNN %d.%d.%d %s (%s)", v->major, v->minor, v->patch, isa_name(),
             dnnl_runtime2str(v->cpu_runtime));
}

static int probe_precision(void *ctx, precision p, char *why, size_t why_len)
{
    (void)ctx;
    if (p != PREC_BF16 || isa_has_bf16(dnnl_get_effective_cpu_isa()))
        return 1;
    snprintf(why, why_len,
             "oneDNN runs %s here, and bf16 needs AVX512_BF16 or AMX (avx512_core_bf16 "
             "or later: AMD Zen 4, Intel Cooper Lake, Sapphire Rapids and later)",
             isa_name());
    return 0;
}

/* oneDNN's OpenMP regions take the calling thread's team size. */
static void enter(const engine *e) { omp_set_num_threads(e->threads); }

/* ---------------------------------------------------------------------- */
/* Creating memories and primitives, each recorded for destroy              */

/* A memory of md over handle (NULL: the library allocates it); bytes it
 * allocates are added to *counter when given. */
static int new_memory(engine *e, dnnl_memory_t *m, const dnnl_memory_desc_t *md, void *handle,
                      size_t *counter)
{
    host_engine *h = &e->h;
    if (e->n_mems == MAX_OBJECTS)
        return host_fail(h, "too many oneDNN memories");
    DNNL_CHECK(h, dnnl_memory_create(m, md, e->cpu, handle ? handle : DNNL_MEMORY_ALLOCATE));
    e->mems[e->n_mems++] = *m;
    if (!handle && counter)
        *counter += dnnl_memory_desc_get_size(md);
    return 0;
}

static int new_primitive(engine *e, op *o, const_dnnl_primitive_desc_t pd)
{
    host_engine *h = &e->h;
    if (e->n_prims == MAX_OBJECTS)
        return host_fail(h, "too many oneDNN primitives");
    DNNL_CHECK(h, dnnl_primitive_create(&o->prim, pd));
    e->prims[e->n_prims++] = o->prim;
    o->nargs = 0;
    return 0;
}

static void bind(op *o, int arg, dnnl_memory_t m)
{
    o->args[o->nargs++] = (dnnl_exec_arg_t){arg, m};
}

static int keep_pd(engine *e, dnnl_primitive_desc_t pd)
{
    if (e->n_pds == MAX_OBJECTS) {
        dnnl_primitive_desc_destroy(pd);
        return host_fail(&e->h, "too many oneDNN primitive descriptors");
    }
    e->pds[e->n_pds++] = pd;
    return 0;
}

/* The primitive descriptor of an operation, kept until destroy (the
 * forward's is the backward's hint). */
static int describe_op(engine *e, dnnl_primitive_desc_t *pd, const_dnnl_op_desc_t desc,
                       const_dnnl_primitive_desc_t hint)
{
    DNNL_CHECK(&e->h, dnnl_primitive_desc_create(pd, desc, NULL, e->cpu, hint));
    return keep_pd(e, *pd);
}

static const dnnl_memory_desc_t *md_of(const_dnnl_primitive_desc_t pd, dnnl_query_t what)
{
    return dnnl_primitive_desc_query_md(pd, what, 0);
}

static const dnnl_memory_desc_t *memory_md(dnnl_memory_t m)
{
    const dnnl_memory_desc_t *md = NULL;
    return dnnl_memory_get_memory_desc(m, &md) == dnnl_success ? md : NULL;
}

/* A reorder from one memory to another. */
static int new_reorder(engine *e, op *o, dnnl_memory_t from, dnnl_memory_t to)
{
    dnnl_primitive_desc_t pd;
    DNNL_CHECK(&e->h, dnnl_reorder_primitive_desc_create(&pd, memory_md(from), e->cpu,
                                                         memory_md(to), e->cpu, NULL));
    if (keep_pd(e, pd) || new_primitive(e, o, pd))
        return -1;
    bind(o, DNNL_ARG_FROM, from);
    bind(o, DNNL_ARG_TO, to);
    return 0;
}

/* A plain (row-major) descriptor: nchw, oihw, nc, oi, x by ndims (the
 * API reads DNNL_MAX_NDIMS dims, hence the copy). */
static int plain_md(engine *e, dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims,
                    dnnl_data_type_t dt)
{
    static const dnnl_format_tag_t tags[] = {dnnl_format_tag_undef, dnnl_a, dnnl_ab, dnnl_abc,
                                             dnnl_abcd};
    if (ndims < 1 || ndims > 4)
        return host_fail(&e->h, "a tensor of %d dimensions (1 to 4 supported)", ndims);
    dnnl_dims_t all = {0};
    memcpy(all, dims, sizeof(dnnl_dim_t) * ndims);
    DNNL_CHECK(&e->h, dnnl_memory_desc_init_by_tag(md, ndims, all, dt, tags[ndims]));
    return 0;
}

static int any_md(engine *e, dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims,
                  dnnl_data_type_t dt)
{
    dnnl_dims_t all = {0};
    memcpy(all, dims, sizeof(dnnl_dim_t) * ndims);
    DNNL_CHECK(&e->h, dnnl_memory_desc_init_by_tag(md, ndims, all, dt, dnnl_format_tag_any));
    return 0;
}

/* Memory `want` for a primitive that reads what the host holds at `host`
 * in the plain layout of `want`'s dims: the host's floats themselves when
 * the primitive takes them as they are, else a memory of its own and a
 * reorder into it (*to). */
static int host_to_primitive(engine *e, dnnl_memory_t *mem, op *to, const dnnl_memory_desc_t *want,
                             float *host, size_t *counter)
{
    dnnl_memory_desc_t plain;
    dnnl_memory_t user;
    if (plain_md(e, &plain, want->ndims, want->dims, dnnl_f32) ||
        new_memory(e, &user, &plain, host, NULL))
        return -1;
    if (dnnl_memory_desc_equal(&plain, want)) {
        *mem = user;
        return 0;
    }
    return new_memory(e, mem, want, NULL, counter) || new_reorder(e, to, user, *mem);
}

/* The other way: a primitive's output `from` into host floats. */
static int primitive_to_host(engine *e, op *to, dnnl_memory_t from, float *host)
{
    const dnnl_memory_desc_t *md = memory_md(from);
    dnnl_memory_desc_t plain;
    dnnl_memory_t user;
    if (plain_md(e, &plain, md->ndims, md->dims, dnnl_f32) ||
        new_memory(e, &user, &plain, host, NULL))
        return -1;
    return new_reorder(e, to, from, user);
}

/* Like primitive_to_host, but writing the host floats directly when the
 * layouts agree (*mem then is the host's memory). */
static int output_to_host(engine *e, dnnl_memory_t *mem, op *to, const dnnl_memory_desc_t *md,
                          float *host, size_t *counter)
{
    dnnl_memory_desc_t plain;
    if (plain_md(e, &plain, md->ndims, md->dims, dnnl_f32))
        return -1;
    if (dnnl_memory_desc_equal(&plain, md))
        return new_memory(e, mem, &plain, host, NULL);
    return new_memory(e, mem, md, NULL, counter) || primitive_to_host(e, to, *mem, host);
}

/* ---------------------------------------------------------------------- */
/* The chains                                                               */

/* (the API reads DNNL_MAX_NDIMS numbers from each of its dims arguments) */
static const dnnl_dims_t NO_PAD = {0, 0};

/* A layer's weight dims: conv [K][C][k][k]; dense [O][C][H][W] after a 4-d
 * source (the flat layout's [O][C*H*W] as it lies), [O][I] after a 2-d one. */
static int weight_dims(const layer *l, const dnnl_memory_desc_t *src, dnnl_dim_t *dims)
{
    dims[0] = l->units;
    if (l->kind == LAYER_CONV) {
        dims[1] = l->in.c, dims[2] = dims[3] = l->kernel;
        return 4;
    }
    for (int d = 1; d < src->ndims; d++)
        dims[d] = src->dims[d];
    return src->ndims;
}

/* Layer i of chain c, its source described by src (the previous layer's
 * destination, or the first layer's choice when NULL). */
static int build_layer(engine *e, chain *c, int i, dnnl_prop_kind_t prop,
                       const dnnl_memory_desc_t *src)
{
    host_engine *h = &e->h;
    const layer *l = &h->w.layers[i];
    pass_layer *p = &c->layer[i];
    const dnnl_dim_t B = h->cfg.batch_size;
    const int training = prop == dnnl_forward_training;
    size_t *act_bytes = training ? &h->activation_bytes : &h->workspace_bytes;
    const dnnl_dim_t in_dims[4] = {B, l->in.c, l->in.h, l->in.w};
    const dnnl_dim_t out_dims[4] = {B, l->out.c, l->out.h, l->out.w};
    const dnnl_dims_t strides = {l->stride, l->stride}, kernel = {l->kernel, l->kernel};
    dnnl_memory_desc_t src_md, weights_md, bias_md, dst_md;
    if (src)
        src_md = *src;
    else if ((l->kind == LAYER_CONV || l->kind == LAYER_DENSE ? any_md : plain_md)(
                 e, &src_md, 4, in_dims, e->dt))
        return -1;
    dnnl_primitive_desc_t pd = NULL;
    switch (l->kind) {
    case LAYER_CONV:
    case LAYER_DENSE: {
        dnnl_dim_t wdims[4];
        const int wnd = weight_dims(l, &src_md, wdims);
        const dnnl_dim_t bias_dims[1] = {l->units};
        const int out_nd = l->kind == LAYER_CONV ? 4 : 2;
        if (any_md(e, &weights_md, wnd, wdims, e->dt) ||
            plain_md(e, &bias_md, 1, bias_dims, dnnl_f32) ||
            any_md(e, &dst_md, out_nd, out_dims, e->dt))
            return -1;
        if (l->kind == LAYER_CONV) {
            dnnl_convolution_desc_t d;
            DNNL_CHECK(h, dnnl_convolution_forward_desc_init(
                              &d, prop, dnnl_convolution_direct, &src_md, &weights_md, &bias_md,
                              &dst_md, strides, NO_PAD, NO_PAD));
            if (describe_op(e, &pd, &d, NULL))
                return -1;
        } else {
            dnnl_inner_product_desc_t d;
            DNNL_CHECK(h, dnnl_inner_product_forward_desc_init(&d, prop, &src_md, &weights_md,
                                                               &bias_md, &dst_md));
            if (describe_op(e, &pd, &d, NULL))
                return -1;
        }
        dnnl_memory_t bias;
        if (host_to_primitive(e, &p->weights, &p->to_weights,
                              md_of(pd, dnnl_query_weights_md), h->params + l->weight_offset,
                              &h->workspace_bytes) ||
            new_memory(e, &bias, &bias_md, h->params + l->bias_offset, NULL))
            return -1;
        if (i == 0 && !src && host_to_primitive(e, &p->src, &c->to_input,
                                                md_of(pd, dnnl_query_src_md), e->input,
                                                &h->workspace_bytes))
            return -1;
        if (new_memory(e, &p->dst, md_of(pd, dnnl_query_dst_md), NULL, act_bytes) ||
            new_primitive(e, &p->forward, pd))
            return -1;
        bind(&p->forward, DNNL_ARG_SRC, p->src);
        bind(&p->forward, DNNL_ARG_WEIGHTS, p->weights);
        bind(&p->forward, DNNL_ARG_BIAS, bias);
        bind(&p->forward, DNNL_ARG_DST, p->dst);
        break;
    }
    case LAYER_MAXPOOL: {
        dnnl_pooling_desc_t d;
        if (any_md(e, &dst_md, 4, out_dims, e->dt))
            return -1;
        DNNL_CHECK(h, dnnl_pooling_forward_desc_init(&d, prop, dnnl_pooling_max, &src_md,
                                                     &dst_md, strides, kernel, NO_PAD, NO_PAD));
        if (describe_op(e, &pd, &d, NULL))
            return -1;
        break;
    }
    case LAYER_RELU: {
        dnnl_eltwise_desc_t d;
        DNNL_CHECK(h, dnnl_eltwise_forward_desc_init(&d, prop, dnnl_eltwise_relu, &src_md, 0, 0));
        if (describe_op(e, &pd, &d, NULL))
            return -1;
        break;
    }
    }
    if (l->kind == LAYER_MAXPOOL || l->kind == LAYER_RELU) {
        if (i == 0 && host_to_primitive(e, &p->src, &c->to_input, md_of(pd, dnnl_query_src_md),
                                        e->input, &h->workspace_bytes))
            return -1;
        if (new_memory(e, &p->dst, md_of(pd, dnnl_query_dst_md), NULL, act_bytes) ||
            new_primitive(e, &p->forward, pd))
            return -1;
        bind(&p->forward, DNNL_ARG_SRC, p->src);
        bind(&p->forward, DNNL_ARG_DST, p->dst);
        const dnnl_memory_desc_t *ws = md_of(pd, dnnl_query_workspace_md);
        if (ws && ws->ndims > 0) {
            if (new_memory(e, &p->workspace, ws, NULL, act_bytes))
                return -1;
            bind(&p->forward, DNNL_ARG_WORKSPACE, p->workspace);
        }
    }
    p->pd = pd;
    if (i + 1 < h->w.n_layers)
        c->layer[i + 1].src = p->dst;
    return 0;
}

static int build_chain(engine *e, chain *c, dnnl_prop_kind_t prop)
{
    const int L = e->h.w.n_layers;
    for (int i = 0; i < L; i++)
        if (build_layer(e, c, i, prop, i ? memory_md(c->layer[i - 1].dst) : NULL))
            return -1;
    return primitive_to_host(e, &c->to_logits, c->layer[L - 1].dst, e->logits);
}

static int is_reference(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
           impl && strncmp(impl, "ref", 3) == 0;
}

/* The weight-gradient primitive of conv or dense layer l. */
static int describe_weights_gradient(engine *e, const layer *l, const_dnnl_primitive_desc_t hint,
                                     const dnnl_memory_desc_t *src_md,
                                     const dnnl_memory_desc_t *grads_md,
                                     const dnnl_memory_desc_t *bias_md,
                                     const dnnl_memory_desc_t *dst_md, dnnl_primitive_desc_t *pd)
{
    host_engine *h = &e->h;
    const dnnl_dims_t strides = {l->stride, l->stride};
    if (l->kind == LAYER_CONV) {
        dnnl_convolution_desc_t d;
        DNNL_CHECK(h, dnnl_convolution_backward_weights_desc_init(
                          &d, dnnl_convolution_direct, src_md, grads_md, bias_md, dst_md, strides,
                          NO_PAD, NO_PAD));
        return describe_op(e, pd, &d, hint);
    }
    dnnl_inner_product_desc_t d;
    DNNL_CHECK(h, dnnl_inner_product_backward_weights_desc_init(&d, src_md, grads_md, bias_md,
                                                                dst_md));
    return describe_op(e, pd, &d, hint);
}

/* When the library has only its reference kernel for a weight gradient
 * (oneDNN 2.6's bf16 one for a convolution of one input channel, LeNet's
 * conv1: 5 s a step), the fp32 kernel computes it from fp32 copies of the
 * source and the output gradient, in layouts of its choosing; the copies
 * are fp32 views of bf16 numbers, so the result is what a bf16 kernel with
 * fp32 sums would give. *pd and the two memories are replaced when it
 * finds a faster kernel, else left as they are. */
static int weights_from_f32(engine *e, const layer *l, const pass_layer *p, dnnl_memory_t diff_dst,
                            const dnnl_memory_desc_t *grads_md, const dnnl_memory_desc_t *bias_md,
                            dnnl_primitive_desc_t *pd, dnnl_memory_t *src, dnnl_memory_t *dst,
                            back_layer *k)
{
    host_engine *h = &e->h;
    const dnnl_memory_desc_t *src_md = memory_md(p->src), *dst_md = memory_md(diff_dst);
    dnnl_memory_desc_t src_f32, dst_f32;
    dnnl_primitive_desc_t chosen;
    if (any_md(e, &src_f32, src_md->ndims, src_md->dims, dnnl_f32) ||
        any_md(e, &dst_f32, dst_md->ndims, dst_md->dims, dnnl_f32) ||
        describe_weights_gradient(e, l, NULL, &src_f32, grads_md, bias_md, &dst_f32, &chosen))
        return -1;
    if (is_reference(chosen))
        return 0;
    *pd = chosen;
    k->weights_in_f32 = 1;
    return new_memory(e, src, md_of(chosen, dnnl_query_src_md), NULL, &h->activation_bytes) ||
           new_reorder(e, &k->to_weights_src, p->src, *src) ||
           new_memory(e, dst, md_of(chosen, dnnl_query_diff_dst_md), NULL, &h->workspace_bytes) ||
           new_reorder(e, &k->to_weights_diff_dst, diff_dst, *dst);
}

/* Layer i's backward pass: its output gradient is diff_dst. */
static int build_backward(engine *e, int i, dnnl_memory_t diff_dst)
{
    host_engine *h = &e->h;
    const layer *l = &h->w.layers[i];
    const pass_layer *p = &e->train.layer[i];
    back_layer *k = &e->back[i];
    const dnnl_memory_desc_t *src_md = memory_md(p->src), *dst_md = memory_md(p->dst);
    const dnnl_dims_t strides = {l->stride, l->stride}, kernel = {l->kernel, l->kernel};
    const int wants_data = i > 0;
    dnnl_primitive_desc_t data_pd = NULL, weights_pd = NULL;
    switch (l->kind) {
    case LAYER_CONV:
    case LAYER_DENSE: {
        dnnl_dim_t wdims[4];
        const int wnd = weight_dims(l, src_md, wdims);
        const dnnl_dim_t bias_dims[1] = {l->units};
        dnnl_memory_desc_t weights_md, grads_md, bias_md;
        if (any_md(e, &weights_md, wnd, wdims, e->dt) ||
            any_md(e, &grads_md, wnd, wdims, dnnl_f32) ||
            plain_md(e, &bias_md, 1, bias_dims, dnnl_f32))
            return -1;
        if (l->kind == LAYER_CONV) {
            dnnl_convolution_desc_t dd;
            if (wants_data) {
                DNNL_CHECK(h, dnnl_convolution_backward_data_desc_init(
                                  &dd, dnnl_convolution_direct, src_md, &weights_md, dst_md,
                                  strides, NO_PAD, NO_PAD));
                if (describe_op(e, &data_pd, &dd, p->pd))
                    return -1;
            }
        } else {
            dnnl_inner_product_desc_t dd;
            if (wants_data) {
                DNNL_CHECK(h, dnnl_inner_product_backward_data_desc_init(&dd, src_md, &weights_md,
                                                                         dst_md));
                if (describe_op(e, &data_pd, &dd, p->pd))
                    return -1;
            }
        }
        if (wants_data) {
            const dnnl_memory_desc_t *want = md_of(data_pd, dnnl_query_weights_md);
            if (dnnl_memory_desc_equal(want, memory_md(p->weights)))
                k->weights = p->weights;
            else if (host_to_primitive(e, &k->weights, &k->to_weights, want,
                                       h->params + l->weight_offset, &h->workspace_bytes))
                return -1;
            if (new_memory(e, &k->diff_src, md_of(data_pd, dnnl_query_diff_src_md), NULL,
                           &h->workspace_bytes) ||
                new_primitive(e, &k->backward_data, data_pd))
                return -1;
            bind(&k->backward_data, DNNL_ARG_DIFF_DST, diff_dst);
            bind(&k->backward_data, DNNL_ARG_WEIGHTS, k->weights);
            bind(&k->backward_data, DNNL_ARG_DIFF_SRC, k->diff_src);
        }
        if (describe_weights_gradient(e, l, p->pd, src_md, &grads_md, &bias_md, dst_md,
                                      &weights_pd))
            return -1;
        dnnl_memory_t weights_src = p->src, weights_diff_dst = diff_dst;
        if (is_reference(weights_pd) && (weights_from_f32(e, l, p, diff_dst, &grads_md, &bias_md,
                                                          &weights_pd, &weights_src,
                                                          &weights_diff_dst, k)))
            return -1;
        dnnl_memory_t grads, bias_grads;
        if (output_to_host(e, &grads, &k->to_grads, md_of(weights_pd, dnnl_query_diff_weights_md),
                           h->grads + l->weight_offset, &h->workspace_bytes) ||
            new_memory(e, &bias_grads, &bias_md, h->grads + l->bias_offset, NULL) ||
            new_primitive(e, &k->backward_weights, weights_pd))
            return -1;
        bind(&k->backward_weights, DNNL_ARG_SRC, weights_src);
        bind(&k->backward_weights, DNNL_ARG_DIFF_DST, weights_diff_dst);
        bind(&k->backward_weights, DNNL_ARG_DIFF_WEIGHTS, grads);
        bind(&k->backward_weights, DNNL_ARG_DIFF_BIAS, bias_grads);
        return 0;
    }
    case LAYER_MAXPOOL: {
        if (!wants_data)
            return 0;
        dnnl_pooling_desc_t d;
        DNNL_CHECK(h, dnnl_pooling_backward_desc_init(&d, dnnl_pooling_max, src_md, dst_md,
                                                      strides, kernel, NO_PAD, NO_PAD));
        if (describe_op(e, &data_pd, &d, p->pd))
            return -1;
        break;
    }
    case LAYER_RELU: {
        if (!wants_data)
            return 0;
        dnnl_eltwise_desc_t d;
        DNNL_CHECK(h, dnnl_eltwise_backward_desc_init(&d, dnnl_eltwise_relu, dst_md, src_md, 0, 0));
        if (describe_op(e, &data_pd, &d, p->pd))
            return -1;
        break;
    }
    }
    if (new_memory(e, &k->diff_src, md_of(data_pd, dnnl_query_diff_src_md), NULL,
                   &h->workspace_bytes) ||
        new_primitive(e, &k->backward_data, data_pd))
        return -1;
    bind(&k->backward_data, DNNL_ARG_DIFF_DST, diff_dst);
    bind(&k->backward_data, DNNL_ARG_DIFF_SRC, k->diff_src);
    if (l->kind == LAYER_RELU)
        bind(&k->backward_data, DNNL_ARG_SRC, p->src);
    else
        bind(&k->backward_data, DNNL_ARG_WORKSPACE, p->workspace);
    return 0;
}

static int build_backward_chain(engine *e)
{
    host_engine *h = &e->h;
    const int L = h->w.n_layers;
    if (host_to_primitive(e, &e->diff_logits, &e->to_diff_logits,
                          memory_md(e->train.layer[L - 1].dst), e->d_logits, &h->workspace_bytes))
        return -1;
    for (int i = L - 1; i >= 0; i--)
        if (build_backward(e, i, i == L - 1 ? e->diff_logits : e->back[i + 1].diff_src))
            return -1;
    return 0;
}

/* "conv1 jit:avx512_core, pool1 ..." from the training chain. */
static void note_implementations(engine *e)
{
    size_t used = 0;
    e->impls[0] = '\0';
    for (int i = 0; i < e->h.w.n_layers && used < sizeof e->impls; i++) {
        const char *impl = NULL;
        if (dnnl_primitive_desc_query(e->train.layer[i].pd, dnnl_query_impl_info_str, 0,
                                      &impl) != dnnl_success || !impl)
            impl = "?";
        /* the ISA is named once in the details: "jit_bf16:avx512_core_bf16" -> "jit_bf16" */
        const char *isa = strstr(impl, ":avx");
        const int impl_len = isa ? (int)(isa - impl) : (int)strlen(impl);
        used += (size_t)snprintf(e->impls + used, sizeof e->impls - used, "%s%s %.*s%s",
                                 i ? ", " : "", e->h.w.layers[i].name, impl_len, impl,
                                 e->back[i].weights_in_f32 && e->dt != dnnl_f32
                                     ? " (fp32 weight gradient)"
                                     : "");
    }
}

/* ---------------------------------------------------------------------- */
/* Create and destroy                                                       */

static const host_layers onednn_layers;

static void destroy(engine *e)
{
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
    host_engine_free(e); /* and the buffers of host_alloc_counted */
}

static const char *check_workload(const workload *w, const engine_config *cfg)
{
    (void)w;
    if (cfg->threads < 0)
        return "thread count must be 0 (every core) or more";
    return NULL;
}

static int build(engine *e)
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

static engine *create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                      size_t err_len)
{
    (void)ctx;
    char why[256];
    if (cfg && !probe_precision(NULL, cfg->precision, why, sizeof why)) {
        snprintf(err, err_len, "onednn: %s", why);
        return NULL;
    }
    engine *e = host_engine_create(&onednn_backend, &onednn_layers, sizeof *e, w, cfg,
                                   check_workload, err, err_len);
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
        return host_engine_out_of_memory(e, err, err_len);
    enter(e); /* the kernels are chosen for the engine's thread count */
    if (build(e)) {
        snprintf(err, err_len, "%s", h->err);
        destroy(e);
        return NULL;
    }
    return e;
}

/* ---------------------------------------------------------------------- */
/* Running                                                                  */

static int run(engine *e, const op *o)
{
    if (o->prim)
        DNNL_CHECK(&e->h, dnnl_primitive_execute(o->prim, e->stream, o->nargs, o->args));
    return 0;
}

static int finish(engine *e)
{
    DNNL_CHECK(&e->h, dnnl_stream_wait(e->stream));
    return 0;
}

/* Images idx[0..n) of d (first.. when idx is NULL) as the first layer's
 * source; the rows past n of a short batch are zero. */
static int load_images(engine *e, const chain *c, const dataset *d, const int32_t *idx,
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
static int load_weights(engine *e, const chain *c)
{
    for (int i = 0; i < e->h.w.n_layers; i++)
        if (run(e, &c->layer[i].to_weights))
            return -1;
    return 0;
}

/* The mean loss of the first n rows of the logits, its gradient into the
 * last layer's output gradient (zero in the padded rows). */
static int loss_and_dlogits(engine *e, int n, double *mean)
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

static int backward_layer(engine *e, int i)
{
    const back_layer *k = &e->back[i];
    return run(e, &k->to_weights_src) || run(e, &k->to_weights_diff_dst) ||
           run(e, &k->backward_weights) || run(e, &k->to_grads) ||
           run(e, &k->backward_data);
}

/* One training pass over n images; times added to t when given. */
static int step(engine *e, int n, double *mean, layer_times *t)
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
static int compute_gradients(engine *e, const int32_t *indices, int batch, float *loss)
{
    host_engine *h = &e->h;
    enter(e);
    if (host_check_batch(h, batch) || host_take_labels(h, &h->train, indices, 0, batch) ||
        load_images(e, &e->train, &h->train, indices, 0, batch))
        return -1;
    double mean;
    if (step(e, batch, &mean, NULL))
        return -1;
    h->last_loss = mean;
    if (loss)
        *loss = (float)mean;
    return 0;
}

static int apply_update(engine *e, float grad_scale)
{
    enter(e);
    host_update_in_ranges(&e->h, grad_scale, e->threads);
    return 0;
}

static int score(engine *e, int first, int n, double *loss_sum)
{
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

static void time_steps(engine *e, const int32_t *indices, int batch, int reps,
                       layer_times *out)
{
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

static int export(engine *e, dnnl_memory_t m, float *out)
{
    op to = {0};
    if (!m)
        return host_fail(&e->h, "no such tensor");
    enter(e);
    if (primitive_to_host(e, &to, m, out) || run(e, &to) || finish(e))
        return -1;
    return 0;
}

int onednn_engine_activation(engine *e, int i, float *out)
{
    if (i < 0 || i >= e->h.w.n_layers)
        return host_fail(&e->h, "layer %d outside 0..%d", i, e->h.w.n_layers - 1);
    return export(e, e->train.layer[i].dst, out);
}

int onednn_engine_input_gradient(engine *e, int i, float *out)
{
    if (i < 1 || i >= e->h.w.n_layers)
        return host_fail(&e->h, "layer %d outside 1..%d", i, e->h.w.n_layers - 1);
    return export(e, e->back[i].diff_src, out);
}

/* ---------------------------------------------------------------------- */
/* The table                                                                */

static void placement(engine *e, int *threads, int *devices, int *replicas)
{
    *threads = e->threads;
    *devices = 0;
    *replicas = 1;
}

static void describe(engine *e, char *buf, size_t len)
{
    char lib[128];
    library_info(lib, sizeof lib);
    snprintf(buf, len, "%s, %d thread%s, %s; %s",
             e->dt == dnnl_bf16 ? "bf16 (fp32 master weights)" : "fp32",
             e->threads, e->threads == 1 ? "" : "s", lib, e->impls);
}

const backend onednn_backend = {
    .name = "onednn",
    .summary = "oneDNN primitives for every layer, layouts of the library's choosing, fp32 "
               "or bf16",
    .built = 1,
    .precisions = 1u << PREC_FP32 | 1u << PREC_BF16,
    /* HOST_ENGINE_ENTRIES less the model-parallel stages, which this engine
     * does not offer */
    .probe = host_probe,
    .error = host_error,
    .set_params = host_set_params,
    .get_params = host_get_params,
    .bind_dataset = host_bind_dataset,
    .train_steps = host_train_steps,
    .evaluate = host_evaluate,
    .buffer = host_buffer,
    .buffer_space = MEM_HOST,
    .profile_layers = host_profile_layers,
    .last_loss = host_last_loss,
    .memory_use = host_memory_use,
    .probe_precision = probe_precision,
    .create = create,
    .destroy = destroy,
    .compute_gradients = host_compute_gradients,
    .apply_update = host_apply_update,
    .placement = placement,
    .describe = describe,
    .library_info = library_info,
};

LB_MODULE_EXPORT const void *lb_module_entry(int abi, const char *table)
{
    if (abi != LB_MODULE_ABI)
        return NULL;
    return strcmp(table, "backend") == 0 ? &onednn_backend : NULL;
}
