/* Backends made of another backend and options: the data-parallel
 * coordinator over replicas of `inner` (data_parallel.c), the model-parallel
 * one over its workers (model_parallel.c). Each is made once per (entries, inner,
 * options, name) and lives as long as the program, so that asking again
 * hands out the same backend, which the registry's users may keep. */
#ifndef LB_WRAP_H
#define LB_WRAP_H

#include <stddef.h>

#include "backends/engine.h"

typedef struct wrapped_backend {
    backend b; /* `entries` under this wrapper's name; b.ctx points back here.
                * Nothing in it is written after wrap_backend. */
    const backend *inner;
    const void *options; /* the wrapper's own copy */
    crossing hand_over;  /* what crosses between its engines: the precisions it refuses */
    char name[64];
    char summary[160];
    struct wrapped_backend *next;
} wrapped_backend;

/* The backend `entries` makes of inner with these options (options_size
 * bytes, compared byte for byte), named `name` (NULL: inner's name), its
 * summary inner's with ", <summary_tail>"; its engines hand over what
 * `hand_over` says. NULL when out of memory. */
const backend *wrap_backend(const backend *entries, crossing hand_over, const backend *inner,
                            const void *options, size_t options_size, const char *name,
                            const char *summary_tail);

/* The wrapper behind b when `entries` made it, else NULL. */
wrapped_backend *wrapper_from(const backend *b, const backend *entries);

/* Every wrapper's precisions_of and library_info (ctx: the wrapper): the
 * inner backend's as they are when asked, so that probing a wrapper need
 * copy nothing into it. */
unsigned wrapped_precisions(void *ctx);
void wrapped_library_info(void *ctx, char *buf, size_t len);

/* Every wrapper's probe_precision (ctx: the wrapper): a precision that
 * cannot cross between its engines is refused with crossing_refusal's
 * reason, any other runs as the inner backend runs it. */
int wrapped_probe_precision(void *ctx, precision p, char *why, size_t why_len);

/* A coordinator's engine of `size` bytes, zeroed; NULL with
 * "<coordinator>: out of memory" in err. */
void *coordinator_alloc(size_t size, const char *coordinator, char *err, size_t err_len);

/* e = a new coordinator's engine (coordinator_alloc) holding what both
 * coordinators' engines keep of their creation: the inner backend, a copy
 * of the options, the workload and the configuration as the harness gave
 * them. e is NULL when out of memory. */
#define COORDINATOR_NEW(e, coordinator, inner_, options, w_, cfg_, err, err_len)                   \
    do {                                                                                           \
        (e) = coordinator_alloc(sizeof *(e), coordinator, err, err_len);                           \
        if (e) {                                                                                   \
            (e)->inner = (inner_);                                                                 \
            (e)->opt = *(options);                                                                 \
            (e)->w = *(w_);                                                                        \
            (e)->cfg = *(cfg_);                                                                    \
        }                                                                                          \
    } while (0)

/* The engine of one member of a coordinator (a replica, a worker: `role`
 * and its index), inner's, created with cfg on `device`. NULL with
 * "<role> <index>: reason" in err. */
engine *member_create(const backend *inner, const workload *w, const engine_config *cfg,
                      int device, const char *role, int index, char *err, size_t err_len);

/* Destroys *e, inner's, when there is one; *e = NULL. */
void member_destroy(const backend *inner, engine **e);

#endif
