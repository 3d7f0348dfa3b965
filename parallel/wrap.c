#include "parallel/wrap.h"

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

const backend *wrap_backend(const backend *entries, const backend *inner, const void *options,
                            size_t options_size, const char *name, const char *summary_tail)
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
