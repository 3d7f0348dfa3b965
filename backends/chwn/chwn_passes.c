/* The CHWN engine's passes (chwn_engine_impl.h): the conv stage one group
 * of images at a time, the dense stage over the whole batch, each product
 * through the engine's product set. */
#include <omp.h>
#include <string.h>

#include "backends/chwn/chwn_engine_impl.h"

/* ---------------------------------------------------------------------- */
/* What every pass uses: a slot's buffers, a product's failure              */

void chwn_use_slot(chwn_engine *e, int slot)
{
    const int L = e->h.w.n_layers;
    real **buf = e->slot_buf + (size_t)slot * chwn_slot_stride(L);
    for (int i = 0; i <= L; i++)
        e->act[i] = buf[i];
    e->rows = buf[L + 1];
    for (int i = 0; i < L; i++)
        e->argmax[i] = (unsigned char *)buf[L + 2 + i];
}

int chwn_pass_failed(chwn_engine *e)
{
    if (e->products->take_failure && e->products->take_failure())
        return host_fail(&e->h, "out of memory for the rounded copies of a product's operands "
                                "(%s)",
                         e->products->name);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The conv stage, one group of images at a time                            */

/* A group's block of a per-layer buffer whose images hold s each. */
static real *group_block(real *base, shape3 s, int b0)
{
    return base + (size_t)b0 * shape3_size(s);
}

/* A group's block of d_a or d_b, which carry gradients of every shape: a
 * fixed stride per image keeps the groups' blocks apart whichever layer
 * each group has reached. */
real *chwn_group_grad(const chwn_engine *e, real *base, int b0)
{
    return base + (size_t)b0 * e->max_act;
}

/* Images b0..b0+n of the batch into their block of act[0] (the conv
 * stage), or into the [features][B] matrix when the first layer is dense
 * or a ReLU before none. */
static void gather(chwn_engine *e, const source *src, int b0, int n, int ld, int threads)
{
    const size_t F = (size_t)shape3_size(e->h.w.input);
    real *x = e->conv_layers ? e->act[0] + (size_t)b0 * F : e->act[0] + b0;
    if (src->floats)
        chwn_from_nchw(x, ld, src->floats + (size_t)b0 * F, F, n, threads);
    else
        chwn_gather(x, ld, src->d->images, F, src->idx ? src->idx + b0 : NULL,
                         src->first + b0, n, threads);
}

/* Layer i's argmax block for the images from b0, or NULL */
static unsigned char *group_argmax(const chwn_engine *e, int i, int b0)
{
    const layer *l = &e->h.w.layers[i];
    return e->argmax[i] ? e->argmax[i] + (size_t)b0 * shape3_size(l->out) : NULL;
}

/* Whether conv layer i hands its output to the pool after it through
 * `handoff` (chwn_engine_impl.h) when a pass runs both */
static int hands_off(const chwn_engine *e, int i)
{
    return e->handoff && i + 1 < e->conv_layers && e->h.w.layers[i].kind == LAYER_CONV &&
           e->argmax[i + 1];
}

/* Conv-stage layer i forward for the n images from b0, from `in` to `out`
 * (act's blocks or the thread's handoff), a pool recording its winners in
 * argmax unless that is NULL; the stage's last layer also hands its output
 * to the dense stage as columns of `rows`. */
static void group_forward_layer(chwn_engine *e, int i, int B, int b0, int n, const real *in,
                                real *out, unsigned char *argmax, real *scratch, int threads)
{
    const layer *l = &e->h.w.layers[i];
    switch (l->kind) {
    case LAYER_CONV:
        e->products->forward_conv(e->products, out, in, e->weight_bias[i], scratch, n, l->in.c,
                                  l->in.h, l->in.w, l->units, l->kernel, l->stride, threads);
        break;
    case LAYER_MAXPOOL:
        chwn_maxpool_forward(out, argmax, in, n, l->in.c, l->in.h, l->in.w, l->kernel,
                             l->stride, threads);
        break;
    case LAYER_RELU:
        chwn_relu_forward(out, in, (size_t)n * shape3_size(l->in), threads);
        break;
    case LAYER_DENSE:
        break; /* not in the conv stage */
    }
    if (i == e->conv_layers - 1)
        chwn_rows_from_group(e->rows, B, b0, out, shape3_size(l->out), n);
}

/* Conv-stage layer i backward for group g (the n images from b0). Layer
 * i's output gradient is in d_a when an even number of layers follow it in
 * the stage, else in d_b; its input gradient goes to the other one, each
 * in the block of images from grad_b0 (b0, or the thread's block: see
 * chwn_conv_stage_backward). The stage's last layer first takes its
 * gradient from the columns of d_rows. Weight and bias gradients go to the
 * group's slot of partial[i]. */
static void group_backward_layer(chwn_engine *e, int i, int B, int g, int b0, int n,
                                 int grad_b0, real *d_col, int threads)
{
    const layer *l = &e->h.w.layers[i];
    const int after = e->conv_layers - 1 - i;
    real *d = chwn_group_grad(e, after % 2 ? e->d_b : e->d_a, grad_b0);
    real *d_in = i > 0 || e->want_d_in
                     ? chwn_group_grad(e, after % 2 ? e->d_a : e->d_b, grad_b0)
                     : NULL;
    if (after == 0)
        chwn_group_from_rows(d, e->d_rows, B, b0, shape3_size(l->out), n);
    switch (l->kind) {
    case LAYER_CONV: {
        real *part = e->partial[i] + (size_t)g * (l->weight_count + l->bias_count);
        const chwn_products *set = e->products;
        const real *in = group_block(e->act[i], l->in, b0);
        if (d_in && set->backward_conv) {
            set->backward_conv(set, part, d_in, d, in, e->weight_bias[i], d_col, n, l->in.c,
                               l->in.h, l->in.w, l->units, l->kernel, l->stride, threads);
            break;
        }
        set->backward_conv_params(set, part, d, in, d_col, n, l->in.c, l->in.h, l->in.w,
                                  l->units, l->kernel, l->stride, threads);
        if (d_in)
            set->backward_conv_data(set, d_in, d, e->weight_bias[i], d_col, n, l->in.c, l->in.h,
                                    l->in.w, l->units, l->kernel, l->stride, threads);
        break;
    }
    case LAYER_MAXPOOL:
        if (d_in)
            chwn_maxpool_backward(d_in, d, group_argmax(e, i, b0),
                                  group_block(e->act[i], l->in, b0),
                                  group_block(e->act[i + 1], l->out, b0), n, l->in.c, l->in.h,
                                  l->in.w, l->kernel, l->stride, threads);
        break;
    case LAYER_RELU:
        if (d_in)
            chwn_relu_backward(d_in, d, group_block(e->act[i + 1], l->out, b0),
                               (size_t)n * shape3_size(l->in), threads);
        break;
    case LAYER_DENSE:
        break; /* not in the conv stage */
    }
}

plan chwn_plan_for(const chwn_engine *e, int B)
{
    plan p;
    const int own = e->team.split == CHWN_SPLIT_OWN;
    p.group_images = own ? e->group_images : B;
    p.groups = (B + p.group_images - 1) / p.group_images;
    p.group_threads = !own || p.groups == 1        ? 1
                      : e->team.threads < p.groups ? e->team.threads
                                                   : p.groups;
    p.layer_threads = own ? 1 : e->team.threads;
    return p;
}

int chwn_group_size(const plan *p, int B, int g)
{
    const int b0 = g * p->group_images;
    return B - b0 < p->group_images ? B - b0 : p->group_images;
}

/* This thread's slot of the products' scratch. */
static real *d_col_slot(const chwn_engine *e, const plan *p)
{
    const int slot = p->group_threads > 1 ? omp_get_thread_num() : 0;
    return e->d_col + (size_t)slot * e->group_images * e->d_col_per_image;
}

/* Each conv layer's weights and biases as the products want them, and the
 * set's packed copies of the dense weights, from the current parameters. */
void chwn_join_weights(chwn_engine *e)
{
    for (int i = e->conv_layers; i < e->h.w.n_layers; i++)
        if (e->dense_packed[i]) {
            const layer *l = &e->h.w.layers[i];
            e->products->dense_pack_weights(e->dense_packed[i],
                                            e->h.TYPED(params) + l->weight_offset,
                                            shape3_size(l->in), l->units, &e->team);
        }
    for (int i = 0; i < e->conv_layers; i++) {
        const layer *l = &e->h.w.layers[i];
        if (l->kind == LAYER_CONV) {
            chwn_join_weight_bias(e->weight_bias[i], e->h.TYPED(params) + l->weight_offset,
                                  e->h.TYPED(params) + l->bias_offset, l->units,
                                  (int)(l->weight_count / l->bias_count));
            if (e->products->conv_pack_weights)
                e->products->conv_pack_weights(e->weight_bias[i], l->in.c, l->units, l->kernel);
        }
    }
}

/* Conv-stage layers [lo, hi) forward for the batch, group after group (a
 * whole pass in one parallel region, each group's data still in its
 * thread's cache from the layer before), the input gathered from src
 * first unless src is NULL; a workload without a conv stage just gathers
 * it. */
void chwn_conv_stage_forward(chwn_engine *e, const source *src, int B, int lo, int hi)
{
    if (src) /* a new pass: the parameters may have changed */
        chwn_join_weights(e);
    if (e->conv_layers == 0) {
        if (src)
            gather(e, src, 0, B, B, e->team.threads);
        return;
    }
    const plan p = chwn_plan_for(e, B);
#pragma omp parallel for schedule(dynamic, 1)                                                 \
    num_threads(p.group_threads) if (p.group_threads > 1)
    for (int g = 0; g < p.groups; g++) {
        const int b0 = g * p.group_images, n = chwn_group_size(&p, B, g);
        /* the thread's handoff block, when groups are group_images images */
        const int slot = p.group_threads > 1 ? omp_get_thread_num() : 0;
        real *handoff = p.group_images == e->group_images && e->handoff
                            ? e->handoff + (size_t)slot * e->group_images * e->handoff_per_image
                            : NULL;
        if (src)
            gather(e, src, b0, n, n, p.layer_threads);
        for (int i = lo; i < hi; i++) {
            const layer *l = &e->h.w.layers[i];
            const real *in = handoff && i > lo && hands_off(e, i - 1)
                                 ? handoff
                                 : group_block(e->act[i], l->in, b0);
            real *out = handoff && i + 1 < hi && hands_off(e, i)
                            ? handoff
                            : group_block(e->act[i + 1], l->out, b0);
            unsigned char *argmax = src && src->forward_only ? NULL : group_argmax(e, i, b0);
            group_forward_layer(e, i, B, b0, n, in, out, argmax, d_col_slot(e, &p),
                                p.layer_threads);
        }
    }
}

/* Conv-stage layers [lo, hi) backward, from hi - 1 down. When the pass
 * runs the whole stage and leaves no input gradient behind, no group's
 * gradients outlive its pass through the layers: each thread then keeps
 * them in the blocks of d_a and d_b of the thread's own first images,
 * reused group after group and so still in its core's caches, where a
 * block per group went out to memory and came back (pool1's input
 * gradient is 1.5 MB a group of 32). */
void chwn_conv_stage_backward(chwn_engine *e, int B, int lo, int hi)
{
    const plan p = chwn_plan_for(e, B);
    /* (each thread's block must hold a whole group inside the batch's) */
    const int thread_blocks = lo == 0 && hi == e->conv_layers && !e->want_d_in &&
                              p.group_threads * p.group_images <= B;
#pragma omp parallel for schedule(dynamic, 1)                                                 \
    num_threads(p.group_threads) if (p.group_threads > 1)
    for (int g = 0; g < p.groups; g++) {
        const int b0 = g * p.group_images, n = chwn_group_size(&p, B, g);
        const int slot = p.group_threads > 1 ? omp_get_thread_num() : 0;
        const int grad_b0 = thread_blocks ? slot * p.group_images : b0;
        real *d_col = d_col_slot(e, &p);
        for (int i = hi - 1; i >= lo; i--)
            group_backward_layer(e, i, B, g, b0, n, grad_b0, d_col, p.layer_threads);
    }
}

/* The groups' [K][R + 1] gradients, summed in group order so that the sum
 * does not depend on which thread did which group, and split into the
 * flat layout's weights [K][R] and bias [K]. */
void chwn_conv_stage_sum_gradients(chwn_engine *e, int B)
{
    const plan p = chwn_plan_for(e, B);
    for (int i = 0; i < e->conv_layers; i++) {
        const layer *l = &e->h.w.layers[i];
        if (l->kind != LAYER_CONV)
            continue;
        const int K = l->units, R = (int)(l->weight_count / l->bias_count);
        const size_t count = l->weight_count + l->bias_count;
        real *dw = e->h.TYPED(grads) + l->weight_offset, *db = e->h.TYPED(grads) + l->bias_offset;
        for (int k = 0; k < K; k++) {
            const real *src = e->partial[i] + (size_t)k * (R + 1);
            memcpy(dw + (size_t)k * R, src, sizeof(real) * R);
            db[k] = src[R];
        }
        for (int g = 1; g < p.groups; g++)
            for (int k = 0; k < K; k++) {
                const real *src = e->partial[i] + g * count + (size_t)k * (R + 1);
                real *w = dw + (size_t)k * R;
                for (int r = 0; r < R; r++)
                    w[r] += src[r];
                db[k] += src[R];
            }
    }
}

/* ---------------------------------------------------------------------- */
/* The dense stage, over the whole batch                                    */

/* Dense layer i's weights as the products read them: the set's packed
 * copy (made by chwn_join_weights this pass), or the parameters */
static const real *dense_weights(const chwn_engine *e, int i)
{
    return e->dense_packed[i] ? e->dense_packed[i]
                              : e->h.TYPED(params) + e->h.w.layers[i].weight_offset;
}

/* The [features][B] input of layer i >= conv_layers. */
static const real *dense_input(const chwn_engine *e, int i)
{
    return i == e->conv_layers && e->conv_layers > 0 ? e->rows : e->act[i];
}

void chwn_dense_forward_layer(chwn_engine *e, int i, int B)
{
    const layer *l = &e->h.w.layers[i];
    const real *in = dense_input(e, i);
    if (l->kind == LAYER_DENSE)
        e->products->forward_dense(e->products, e->act[i + 1], in, dense_weights(e, i),
                                   e->h.TYPED(params) + l->bias_offset, e->dense_scratch, B,
                                   shape3_size(l->in), l->units, &e->team);
    else /* a ReLU */
        chwn_relu_forward(e->act[i + 1], in, (size_t)B * shape3_size(l->in), e->team.threads);
}

/* Layer i's output gradient is in d_a when an even number of layers follow
 * it (the loss, or a stage's d_out, writes the last one's into d_a), else
 * in d_b; its input gradient goes to the other one, or to d_rows for the
 * first dense layer after a conv stage and a stage's first layer when its
 * input gradient is wanted, else nowhere for the first layer. */
void chwn_dense_backward_layer(chwn_engine *e, int i, int B)
{
    const layer *l = &e->h.w.layers[i];
    const int after = e->h.w.n_layers - 1 - i;
    const real *d = after % 2 ? e->d_b : e->d_a;
    real *d_in = i == e->conv_layers ? (i > 0 || e->want_d_in ? e->d_rows : NULL)
                 : after % 2           ? e->d_a
                                       : e->d_b;
    if (l->kind == LAYER_DENSE)
        e->products->backward_dense(e->products, e->h.TYPED(grads) + l->weight_offset,
                                    e->h.TYPED(grads) + l->bias_offset, d_in, d,
                                    dense_input(e, i), dense_weights(e, i),
                                    e->dense_scratch, B, shape3_size(l->in), l->units,
                                    &e->team);
    else if (d_in)
        chwn_relu_backward(d_in, d, e->act[i + 1], (size_t)B * shape3_size(l->in),
                           e->team.threads);
}
