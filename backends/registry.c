/* The registry (see registry.h). */
#include "backends/registry.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/module.h"

/* Each backend's registration, defined beside its code. */
extern const backend naive_backend;      /* backends/naive/naive.c */
extern backend_module blas_registration, direct_registration, onednn_registration,
    cuda_registration;
/* Framework peers (backends/peer/pytorch.c): last, so a run's own
 * backends come first in its tables and charts */
extern const backend pytorch_cpu_backend, pytorch_cuda_backend;

/* The suite's own engines, in the order --backend all runs them: naive
 * (in the program), then the module backends; then the backends
 * registered from above (backend_register), then the peers. */
static backend_module *const modules[] = {&blas_registration, &direct_registration,
                                           &onednn_registration, &cuda_registration};
static const backend *const peers[] = {&pytorch_cpu_backend, &pytorch_cuda_backend};
enum { MAX_REGISTERED = 8 };
static const backend *registered[MAX_REGISTERED];
static int registered_count;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

#define COUNT(a) ((int)(sizeof a / sizeof a[0]))

void backend_register(const backend *b)
{
    if (registered_count == MAX_REGISTERED) {
        fprintf(stderr, "bench: more than %d backends registered; raise MAX_REGISTERED\n",
                MAX_REGISTERED);
        abort();
    }
    registered[registered_count++] = b;
}

int backend_count(void) { return 1 + COUNT(modules) + registered_count + COUNT(peers); }

const backend *backend_at(int i)
{
    if (i == 0)
        return &naive_backend;
    if (--i < COUNT(modules))
        return &modules[i]->b;
    i -= COUNT(modules);
    return i < registered_count ? registered[i] : peers[i - registered_count];
}

const backend *backend_find(const char *name)
{
    for (int i = 0; i < backend_count(); i++)
        if (strcmp(backend_at(i)->name, name) == 0)
            return backend_at(i);
    return NULL;
}

static backend_module *entry_of(const backend *b)
{
    for (size_t i = 0; i < sizeof modules / sizeof modules[0]; i++)
        if (&modules[i]->b == b)
            return modules[i];
    return NULL;
}

/* Loads b's module if b lives in one; 0, or -1 with the reason. */
static int ensure_loaded(const backend *b, char *why, size_t why_len)
{
    backend_module *m = entry_of(b);
    if (!m)
        return 0;
    pthread_mutex_lock(&load_lock);
    if (!m->tried) {
        m->tried = 1;
        if (m->prepare)
            m->prepare();
        const backend *t = m->refuse && m->refuse(m->why, sizeof m->why)
                               ? NULL
                               : module_table(m->module, "backend", m->why, sizeof m->why);
        if (t && strcmp(t->name, m->b.name) != 0) {
            snprintf(m->why, sizeof m->why, "module %s holds backend %s, not %s", m->module,
                     t->name, m->b.name);
            t = NULL;
        }
        if (t) { /* the registered entry becomes the module's descriptor, with
                  * the registration's summary: the one place it is written */
            const char *summary = m->b.summary;
            m->table = t;
            m->b = *t;
            m->b.summary = summary;
        }
    }
    int rc = m->table ? 0 : -1;
    if (rc)
        snprintf(why, why_len, "%s", m->why);
    pthread_mutex_unlock(&load_lock);
    return rc;
}

int backend_is_peer(const backend *b)
{
    for (int i = 0; i < COUNT(peers); i++)
        if (b == peers[i])
            return 1;
    return 0;
}

int backend_loaded(const backend *b)
{
    backend_module *m = entry_of(b);
    if (!m)
        return b->built;
    pthread_mutex_lock(&load_lock);
    int loaded = m->table != NULL;
    pthread_mutex_unlock(&load_lock);
    return loaded;
}

unsigned backend_precisions(const backend *b)
{
    const unsigned said = b->precisions_of ? b->precisions_of(b->ctx) : b->precisions;
    return said ? said : 1u << PREC_FP32;
}

int backend_runnable(const backend *b, precision p, char *why, size_t why_len)
{
    char tmp[8];
    if (!why || why_len == 0)
        why = tmp, why_len = sizeof tmp;
    why[0] = '\0';
    if (!b->built) {
        snprintf(why, why_len, "not built: %s", b->not_built_reason);
        return 0;
    }
    if (ensure_loaded(b, why, why_len) != 0)
        return 0;
    if (b->probe && !b->probe(b->ctx, why, why_len))
        return 0;
    if (!(backend_precisions(b) & (1u << p))) {
        snprintf(why, why_len, "does not support --precision %s", precision_name(p));
        return 0;
    }
    if (b->probe_precision && !b->probe_precision(b->ctx, p, why, why_len))
        return 0;
    return 1;
}

int backend_supports_data_parallel(const backend *b, char *why, size_t why_len)
{
    if (ensure_loaded(b, why, why_len) != 0)
        return 0;
    if (!b->dp) {
        snprintf(why, why_len, "the %s backend offers no data-parallel entries "
                               "(compute_gradients, apply_update, buffer)", b->name);
        return 0;
    }
    return 1;
}

engine *backend_create(const backend *b, const workload *w, const engine_config *cfg,
                       char *err, size_t err_len)
{
    if (ensure_loaded(b, err, err_len) != 0)
        return NULL;
    if (!b->create) {
        snprintf(err, err_len, "%s: not built", b->name);
        return NULL;
    }
    return b->create(b->ctx, w, cfg, err, err_len);
}

void backend_placement(const backend *b, engine *e, int *threads, int *devices, int *replicas)
{
    *threads = 1, *devices = 0, *replicas = 1;
    if (b->ops->placement)
        b->ops->placement(e, threads, devices, replicas);
}

void backend_setup_note(const backend *b, int with_reasons, char *buf, size_t len)
{
    if (len)
        buf[0] = '\0';
    backend_module *m = entry_of(b);
    if (m && m->describe_setup && m->table)
        m->describe_setup(buf, len, with_reasons);
}

void backend_describe(const backend *b, engine *e, char *buf, size_t len)
{
    if (len)
        buf[0] = '\0';
    if (b->ops->describe)
        b->ops->describe(e, buf, len);
    char note[BACKEND_DETAILS_MAX];
    backend_setup_note(b, 0, note, sizeof note);
    const size_t used = strlen(buf);
    if (note[0] && used + 2 < len)
        snprintf(buf + used, len - used, "%s%s", used ? "; " : "", note);
}

size_t backend_peak_memory(const backend *b, engine *e)
{
    return b->ops->peak_memory ? b->ops->peak_memory(e) : 0;
}

int backend_memory_use(const backend *b, engine *e, memory_use *out)
{
    memset(out, 0, sizeof *out);
    if (!b->ops->memory_use || !e)
        return 0;
    b->ops->memory_use(e, out);
    return 1;
}

double backend_peak_gflops(const backend *b, engine *e)
{
    return b->ops->peak_gflops ? b->ops->peak_gflops(e) : 0;
}

const char *backend_arithmetic(const backend *b, engine *e, precision p)
{
    const char *said = b->ops->arithmetic && e ? b->ops->arithmetic(e) : NULL;
    if (said)
        return said;
    return precision_of(p)->arithmetic;
}

double backend_library_peak_gflops(const backend *b, int threads)
{
    return b->library_peak_gflops ? b->library_peak_gflops(threads) : 0;
}

int backend_profile_layers(const backend *b, engine *e, const int32_t *indices, int batch,
                           int reps, layer_times *out, char *err, size_t err_len)
{
    if (!b->ops->profile_layers) {
        snprintf(err, err_len, "the %s backend cannot time its layers", b->name);
        return -1;
    }
    if (b->ops->profile_layers(e, indices, batch, reps, out) != 0) {
        snprintf(err, err_len, "%s", b->ops->error(e));
        return -1;
    }
    return 0;
}

double backend_last_loss(const backend *b, engine *e)
{
    return b->ops->last_loss ? b->ops->last_loss(e) : NAN;
}

void backend_library_info(const backend *b, char *buf, size_t len)
{
    if (len)
        buf[0] = '\0';
    if (backend_loaded(b) && b->library_info)
        b->library_info(b->ctx, buf, len);
}
