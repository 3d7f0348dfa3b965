#include "parallel/wrap.h"

#include "backends/registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static wrapped_backend *wrappers;
static pthread_mutex_t wrappers_lock = PTHREAD_MUTEX_INITIALIZER;

static int same(const wrapped_backend *w, const backend *entries, const backend *inner,
                const void *options, size_t options_size, const char *name)
{
    return w->b.create == entries->create && w->inner == inner &&
           memcmp(w->options, options, options_size) == 0 && strcmp(w->name, name) == 0;
}

const backend *wrap_backend(const backend *entries, crossing hand_over, const backend *inner,
                            const void *options, size_t options_size, const char *name,
                            const char *summary_tail)
{
    if (!name)
        name = inner->name;
    pthread_mutex_lock(&wrappers_lock);
    wrapped_backend *w = wrappers;
    while (w && !same(w, entries, inner, options, options_size, name))
        w = w->next;
    void *copy = NULL;
    if (!w && (copy = malloc(options_size)) && (w = calloc(1, sizeof *w))) {
        memcpy(copy, options, options_size);
        w->inner = inner;
        w->options = copy;
        w->hand_over = hand_over;
        snprintf(w->name, sizeof w->name, "%s", name);
        snprintf(w->summary, sizeof w->summary, "%s, %s", inner->summary, summary_tail);
        w->b = *entries;
        w->b.ctx = w;
        w->b.name = w->name;
        w->b.summary = w->summary;
        w->b.built = inner->built;
        w->b.not_built_reason = inner->not_built_reason;
        w->next = wrappers;
        wrappers = w;
    } else if (!w) {
        free(copy);
    }
    pthread_mutex_unlock(&wrappers_lock);
    return w ? &w->b : NULL;
}

wrapped_backend *wrapper_from(const backend *b, const backend *entries)
{
    return b && b->create == entries->create ? b->ctx : NULL;
}

unsigned wrapped_precisions(void *ctx)
{
    const wrapped_backend *w = ctx;
    return backend_precisions(w->inner);
}

void wrapped_library_info(void *ctx, char *buf, size_t len)
{
    const wrapped_backend *w = ctx;
    backend_library_info(w->inner, buf, len);
}

int wrapped_probe_precision(void *ctx, precision p, char *why, size_t why_len)
{
    const wrapped_backend *w = ctx;
    const char *refused = crossing_refusal(w->hand_over, p);
    if (refused) {
        snprintf(why, why_len, "%s", refused);
        return 0;
    }
    return backend_runnable(w->inner, p, why, why_len);
}

void *coordinator_alloc(size_t size, const char *coordinator, char *err, size_t err_len)
{
    void *e = calloc(1, size);
    if (!e)
        snprintf(err, err_len, "%s: out of memory", coordinator);
    return e;
}

engine *member_create(const backend *inner, const workload *w, const engine_config *cfg,
                      int device, const char *role, int index, char *err, size_t err_len)
{
    engine_config c = *cfg;
    c.device = device;
    char why[300] = "";
    engine *e = backend_create(inner, w, &c, why, sizeof why);
    if (!e)
        snprintf(err, err_len, "%s %d: %s", role, index, why[0] ? why : "create failed");
    return e;
}

void member_destroy(const backend *inner, engine **e)
{
    if (*e)
        inner->ops->destroy(*e);
    *e = NULL;
}
