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
    backend b; /* `entries` under this wrapper's name; b.ctx points back here */
    const backend *inner;
    const void *options; /* the wrapper's own copy */
    char name[64];
    char summary[160];
    struct wrapped_backend *next;
} wrapped_backend;

/* The backend `entries` makes of inner with these options (options_size
 * bytes, compared byte for byte), named `name` (NULL: inner's name), its
 * summary inner's with ", <summary_tail>". NULL when out of memory. */
const backend *wrap_backend(const backend *entries, const backend *inner, const void *options,
                            size_t options_size, const char *name, const char *summary_tail);

/* The wrapper behind b when `entries` made it, else NULL. */
wrapped_backend *wrapper_from(const backend *b, const backend *entries);

#endif
