/* Creating oneDNN memories and primitives for the onednn engine
 * (onednn_impl.h), each recorded for destroy. */
#include <string.h>

#include "backends/onednn/onednn_impl.h"

/* A memory of md over handle (NULL: the library allocates it); bytes it
 * allocates are added to *counter when given. */
int new_memory(onednn_engine *e, dnnl_memory_t *m, const dnnl_memory_desc_t *md, void *handle,
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

int new_primitive(onednn_engine *e, op *o, const_dnnl_primitive_desc_t pd)
{
    host_engine *h = &e->h;
    if (e->n_prims == MAX_OBJECTS)
        return host_fail(h, "too many oneDNN primitives");
    DNNL_CHECK(h, dnnl_primitive_create(&o->prim, pd));
    e->prims[e->n_prims++] = o->prim;
    o->nargs = 0;
    return 0;
}

void bind(op *o, int arg, dnnl_memory_t m)
{
    o->args[o->nargs++] = (dnnl_exec_arg_t){arg, m};
}

int keep_pd(onednn_engine *e, dnnl_primitive_desc_t pd)
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
int describe_op(onednn_engine *e, dnnl_primitive_desc_t *pd, const_dnnl_op_desc_t desc,
                const_dnnl_primitive_desc_t hint)
{
    DNNL_CHECK(&e->h, dnnl_primitive_desc_create(pd, desc, NULL, e->cpu, hint));
    return keep_pd(e, *pd);
}

const dnnl_memory_desc_t *md_of(const_dnnl_primitive_desc_t pd, dnnl_query_t what)
{
    return dnnl_primitive_desc_query_md(pd, what, 0);
}

const dnnl_memory_desc_t *memory_md(dnnl_memory_t m)
{
    const dnnl_memory_desc_t *md = NULL;
    return dnnl_memory_get_memory_desc(m, &md) == dnnl_success ? md : NULL;
}

/* A reorder from one memory to another. */
int new_reorder(onednn_engine *e, op *o, dnnl_memory_t from, dnnl_memory_t to)
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
int plain_md(onednn_engine *e, dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims,
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

int any_md(onednn_engine *e, dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims,
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
int host_to_primitive(onednn_engine *e, dnnl_memory_t *mem, op *to, const dnnl_memory_desc_t *want,
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
int primitive_to_host(onednn_engine *e, op *to, dnnl_memory_t from, float *host)
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
int output_to_host(onednn_engine *e, dnnl_memory_t *mem, op *to, const dnnl_memory_desc_t *md,
                   float *host, size_t *counter)
{
    dnnl_memory_desc_t plain;
    if (plain_md(e, &plain, md->ndims, md->dims, dnnl_f32))
        return -1;
    if (dnnl_memory_desc_equal(&plain, md))
        return new_memory(e, mem, &plain, host, NULL);
    return new_memory(e, mem, md, NULL, counter) || primitive_to_host(e, to, *mem, host);
}

