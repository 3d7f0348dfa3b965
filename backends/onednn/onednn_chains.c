/* The onednn engine's chains (onednn_impl.h): the forward primitives of a
 * training and a scoring chain, and the training chain's backward ones. */
#include <stdio.h>
#include <string.h>

#include "backends/onednn/onednn_impl.h"

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
static int build_layer(onednn_engine *e, chain *c, int i, dnnl_prop_kind_t prop,
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
    dnnl_memory_t bias = NULL; /* conv and dense layers: their weights and bias */
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
        if (host_to_primitive(e, &p->weights, &p->to_weights,
                              md_of(pd, dnnl_query_weights_md), h->params + l->weight_offset,
                              &h->workspace_bytes) ||
            new_memory(e, &bias, &bias_md, h->params + l->bias_offset, NULL))
            return -1;
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
    /* the first layer's source from the host's images; the output; the
     * workspace when the primitive has one (max pooling's, in training) */
    if (i == 0 && host_to_primitive(e, &p->src, &c->to_input, md_of(pd, dnnl_query_src_md),
                                    e->input, &h->workspace_bytes))
        return -1;
    if (new_memory(e, &p->dst, md_of(pd, dnnl_query_dst_md), NULL, act_bytes) ||
        new_primitive(e, &p->forward, pd))
        return -1;
    bind(&p->forward, DNNL_ARG_SRC, p->src);
    if (bias) {
        bind(&p->forward, DNNL_ARG_WEIGHTS, p->weights);
        bind(&p->forward, DNNL_ARG_BIAS, bias);
    }
    bind(&p->forward, DNNL_ARG_DST, p->dst);
    const dnnl_memory_desc_t *ws = md_of(pd, dnnl_query_workspace_md);
    if (ws && ws->ndims > 0) {
        if (new_memory(e, &p->workspace, ws, NULL, act_bytes))
            return -1;
        bind(&p->forward, DNNL_ARG_WORKSPACE, p->workspace);
    }
    p->pd = pd;
    if (i + 1 < h->w.n_layers)
        c->layer[i + 1].src = p->dst;
    return 0;
}

int build_chain(onednn_engine *e, chain *c, dnnl_prop_kind_t prop)
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
static int describe_weights_gradient(onednn_engine *e, const layer *l,
                                     const_dnnl_primitive_desc_t hint,
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
static int weights_from_f32(onednn_engine *e, const layer *l, const pass_layer *p,
                            dnnl_memory_t diff_dst,
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
/* Layer i's backward-data primitive of data_pd, reading diff_dst into its
 * own diff_src in the workspace (the layer binds the rest). */
static int backward_data_op(onednn_engine *e, back_layer *k, const_dnnl_primitive_desc_t data_pd,
                            dnnl_memory_t diff_dst)
{
    if (new_memory(e, &k->diff_src, md_of(data_pd, dnnl_query_diff_src_md), NULL,
                   &e->h.workspace_bytes) ||
        new_primitive(e, &k->backward_data, data_pd))
        return -1;
    bind(&k->backward_data, DNNL_ARG_DIFF_DST, diff_dst);
    bind(&k->backward_data, DNNL_ARG_DIFF_SRC, k->diff_src);
    return 0;
}

static int build_backward(onednn_engine *e, int i, dnnl_memory_t diff_dst)
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
            if (backward_data_op(e, k, data_pd, diff_dst))
                return -1;
            bind(&k->backward_data, DNNL_ARG_WEIGHTS, k->weights);
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
    if (backward_data_op(e, k, data_pd, diff_dst))
        return -1;
    if (l->kind == LAYER_RELU)
        bind(&k->backward_data, DNNL_ARG_SRC, p->src);
    else
        bind(&k->backward_data, DNNL_ARG_WORKSPACE, p->workspace);
    return 0;
}

int build_backward_chain(onednn_engine *e)
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
void note_implementations(onednn_engine *e)
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

