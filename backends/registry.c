/* The registry (see registry.h). */
#include "backends/registry.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backends/blas/kernel_choice.h"
#include "backends/module.h"

extern const backend naive_backend;     /* backends/naive/naive.c */
extern const backend multi_gpu_backend; /* parallel/coordinator.c */
/* Framework peers (backends/peer/pytorch.c): last, so a run's own
 * backends come first in its tables and charts */
extern const backend pytorch_cpu_backend, pytorch_cuda_backend;

/* A backend in a module: its entry holds what the registry knows without
 * loading it, and is filled with the module's table when loaded. */
typedef struct module_entry {
    backend b;
    const char *module;
    /* Optional: run once before the module loads, to set the environment
     * its libraries read when they start; and one line on what it set. */
    void (*prepare)(void);
    void (*describe_setup)(char *buf, size_t len, int with_reasons);
    int tried;
    const backend *table; /* the module's own, NULL until loaded */
    char why[512];        /* why it did not load */
} module_entry;

#ifdef HAVE_BLAS
#define BLAS_BUILT 1
#else
#define BLAS_BUILT 0
#endif
#ifdef HAVE_CUDA
#define CUDA_BUILT 1
#else
#define CUDA_BUILT 0
#endif

static module_entry blas_entry = {
    .b = {.name = "blas",
          .summary = "OpenBLAS GEMMs over the whole batch + OpenMP loops, fp32",
          .built = BLAS_BUILT,
          .not_built_reason = "OpenBLAS (cblas.h, libopenblas) or OpenMP not found at build "
                              "time, or left out with make BLAS=0"},
    .module = "blas",
    .prepare = blas_setup_prepare,
    .describe_setup = blas_setup_describe,
};

static module_entry cuda_entry = {
    .b = {.name = "cuda",
          .summary = "one GPU: cuDNN convolutions, cuBLAS dense layers",
          .built = CUDA_BUILT,
          .not_built_reason = "nvcc, cuDNN or cuBLAS not found at build time, or left out "
                              "with make CUDA=0"},
    .module = "cuda",
};

/* oneDNN primitives for every layer (backends/onednn) */
#ifdef HAVE_ONEDNN
#define ONEDNN_BUILT 1
#else
#define ONEDNN_BUILT 0
#endif
/* oneDNN's threads are libgomp's, which reads OMP_WAIT_POLICY once when it
 * starts, whichever module maps it first: the process's OpenMP setup
 * (backends/blas/kernel_choice.c, passive unless the user says) is made
 * before onednn loads too, and onednn's rows say how its threads wait. */
static void onednn_setup_describe(char *buf, size_t len, int with_reasons)
{
    (void)with_reasons;
    const blas_setup *s = blas_setup_get();
    snprintf(buf, len, "OMP_WAIT_POLICY=%s (%s)", s->wait_policy,
             s->wait_policy_by_user ? "set by the user" : "default");
}
static module_entry onednn_entry = {
    .b = {.name = "onednn",
          .summary = "oneDNN primitives for every layer, layouts of the library's choosing",
          .built = ONEDNN_BUILT,
          .not_built_reason = "oneDNN (dnnl.h, libdnnl) or OpenMP not found at build time, "
                              "or left out with make ONEDNN=0"},
    .module = "onednn",
    .prepare = blas_setup_prepare,
    .describe_setup = onednn_setup_describe,
};

static module_entry *const modules[] = {&blas_entry, &cuda_entry, &onednn_entry};

static const backend *const registry[] = {
    &naive_backend,
    &blas_entry.b,
    &cuda_entry.b,
    &onednn_entry.b,
    &multi_gpu_backend,
    &pytorch_cpu_backend,
    &pytorch_cuda_backend,
};

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

int backend_count(void) { return (int)(sizeof registry / sizeof registry[0]); }

const backend *backend_at(int i) { return registry[i]; }

const backend *backend_find(const char *name)
{
    for (int i = 0; i < backend_count(); i++)
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    return NULL;
}

static module_entry *entry_of(const backend *b)
{
    for (size_t i = 0; i < sizeof modules / sizeof modules[0]; i++)
        if (&modules[i]->b == b)
            return modules[i];
    return NULL;
}

/* Loads b's module if b lives in one; 0, or -1 with the reason. */
static int ensure_loaded(const backend *b, char *why, size_t why_len)
{
    module_entry *m = entry_of(b);
    if (!m)
        return 0;
    pthread_mutex_lock(&load_lock);
    if (!m->tried) {
        m->tried = 1;
        if (m->prepare)
            m->prepare();
        const backend *t = module_table(m->module, "backend", m->why, sizeof m->why);
        if (t && strcmp(t->name, m->b.name) != 0) {
            snprintf(m->why, sizeof m->why, "module %s holds backend %s, not %s", m->module,
                     t->name, m->b.name);
            t = NULL;
        }
        if (t) {
            m->table = t;
            m->b = *t;
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
    return b == &pytorch_cpu_backend || b == &pytorch_cuda_backend;
}

int backend_loaded(const backend *b)
{
    module_entry *m = entry_of(b);
    if (!m)
        return b->built;
    pthread_mutex_lock(&load_lock);
    int loaded = m->table != NULL;
    pthread_mutex_unlock(&load_lock);
    return loaded;
}

unsigned backend_precisions(const backend *b)
{
    return b->precisions ? b->precisions : 1u << PREC_FP32;
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
    if (!b->compute_gradients || !b->apply_update || !b->buffer) {
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
    if (b->placement)
        b->placement(e, threads, devices, replicas);
}

void backend_setup_note(const backend *b, int with_reasons, char *buf, size_t len)
{
    if (len)
        buf[0] = '\0';
    module_entry *m = entry_of(b);
    if (m && m->describe_setup && m->table)
        m->describe_setup(buf, len, with_reasons);
}

void backend_describe(const backend *b, engine *e, char *buf, size_t len)
{
    if (len)
        buf[0] = '\0';
    if (b->describe)
        b->describe(e, buf, len);
    char note[1024];
    backend_setup_note(b, 0, note, sizeof note);
    const size_t used = strlen(buf);
    if (note[0] && used + 2 < len)
        snprintf(buf + used, len - used, "%s%s", used ? "; " : "", note);
}

size_t backend_peak_memory(const backend *b, engine *e)
{
    return b->peak_memory ? b->peak_memory(e) : 0;
}

int backend_memory_use(const backend *b, engine *e, memory_use *out)
{
    memset(out, 0, sizeof *out);
    if (!b->memory_use || !e)
        return 0;
    b->memory_use(e, out);
    return 1;
}

double backend_peak_gflops(const backend *b, engine *e)
{
    return b->peak_gflops ? b->peak_gflops(e) : 0;
}

double backend_library_peak_gflops(const backend *b, int threads)
{
    return b->library_peak_gflops ? b->library_peak_gflops(threads) : 0;
}

int backend_profile_layers(const backend *b, engine *e, const int32_t *indices, int batch,
                           int reps, layer_times *out, char *err, size_t err_len)
{
    if (!b->profile_layers) {
        snprintf(err, err_len, "the %s backend cannot time its layers", b->name);
        return -1;
    }
    if (b->profile_layers(e, indices, batch, reps, out) != 0) {
        snprintf(err, err_len, "%s", b->error(e));
        return -1;
    }
    return 0;
}

double backend_last_loss(const backend *b, engine *e)
{
    return b->last_loss ? b->last_loss(e) : NAN;
}

void backend_library_info(const backend *b, char *buf, size_t len)
{
    if (len)
        buf[0] = '\0';
    if (backend_loaded(b) && b->library_info)
        b->library_info(buf, len);
}
