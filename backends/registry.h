/* The registry: the one list of backends and the only way in.
 *
 * Every backend known to this build, built or not, in the order they run
 * under --backend all. The heavy ones live in modules (backends/module.h)
 * and are loaded by backend_runnable(), the first call that needs them;
 * until then their entry holds only the name, summary and whether they
 * were built, and loading makes it the module's descriptor (the tables
 * live in the module). That is the one write to a registered backend:
 * probes change nothing. The wrappers below supply the defaults for the
 * contract's optional entries, so no caller tests a function pointer. */
#ifndef LB_REGISTRY_H
#define LB_REGISTRY_H

#include <stddef.h>

#include "backends/engine.h"

/* A backend that lives in a module (backends/module.h), as its folder
 * registers it (backends/NAME/registration.c): what the registry knows
 * without loading it, and the hooks the backend runs around loading. */
typedef struct backend_module {
    backend b; /* name, summary, built, not_built_reason; the module's own
                * table once loaded */
    const char *module; /* $(BUILD)/modules/<module>.so */
    /* Optional: run once before the module loads, to set the environment
     * its libraries read when they start; and one line on what it set. */
    void (*prepare)(void);
    void (*describe_setup)(char *buf, size_t len, int with_reasons);
    /* Optional: after prepare, 1 when the module must not be loaded (what
     * prepare found would crash its library), with the reason. */
    int (*refuse)(char *why, size_t why_len);
    /* the registry's: whether loading was tried, the table, why it failed */
    int tried;
    const backend *table;
    char why[512];
} backend_module;

/* A module backend's registration, as its folder writes it (the one place
 * its summary is written: the module's descriptor leaves .summary out, and
 * loading keeps this one; its name the module's descriptor repeats, for
 * the messages of engines built without the registry, and loading checks
 * that the two agree):
 *   backend_module blas_registration = BACKEND_MODULE("blas", "summary",
 *       HAVE_BLAS, "why it may not be built", prepare, describe_setup);
 * BUILT is 1 when the build has the backend (the Makefile's -DHAVE_...),
 * 0 when not; the module is named for the backend. */
#define BACKEND_MODULE(NAME, SUMMARY, BUILT, NOT_BUILT_REASON, PREPARE, DESCRIBE_SETUP, ...)      \
    {                                                                                              \
        .b = {.name = NAME, .summary = SUMMARY, .built = BUILT,                                    \
              .not_built_reason = NOT_BUILT_REASON},                                               \
        .module = NAME, .prepare = PREPARE, .describe_setup = DESCRIBE_SETUP, __VA_ARGS__         \
    }

/* Adds b after the suite's own engines (before the framework peers): for
 * backends built above the registry, such as the multi-gpu coordinator,
 * which register themselves when the program starts. */
void backend_register(const backend *b);

int backend_count(void);
const backend *backend_at(int i);
const backend *backend_find(const char *name);

/* 1 if b is built, loads here, can run here and computes in precision p
 * here; else 0 with the reason in why ("not built: ...", the loader's
 * message, the probe's answer, "does not support --precision bf16", "this
 * CPU lacks AVX512_BF16"). Loads b's
 * module on first use: call it before any entry below. */
int backend_runnable(const backend *b, precision p, char *why, size_t why_len);

/* 1 when b is a framework peer (PyTorch run as a child process from the
 * same parameters and batch order), drawn apart from the suite's own
 * backends and left out by --no-peers. */
int backend_is_peer(const backend *b);

/* 1 when b's entries can be called without loading anything: b is not in
 * a module, or its module is loaded. */
int backend_loaded(const backend *b);

/* Precisions b runs (bit 1u << precision each), fp32 when it says none;
 * a wrapper's as its inner backend says them now (precisions_of). A module
 * backend's are known once it is loaded. */
unsigned backend_precisions(const backend *b);

/* 1 when b offers data parallelism (its dp table); else 0 with the
 * reason. Loads b's module. */
int backend_supports_data_parallel(const backend *b, char *why, size_t why_len);

engine *backend_create(const backend *b, const workload *w, const engine_config *cfg,
                       char *err, size_t err_len);

/* Optional entries, with their defaults. */
/* threads 1, devices 0, replicas 1 */
void backend_placement(const backend *b, engine *e, int *threads, int *devices, int *replicas);
/* What b's module set up before it loaded (the blas backend: OpenBLAS's
 * kernels and OpenMP's waiting), with why when asked; "" when nothing was
 * set up or b was not loaded. */
void backend_setup_note(const backend *b, int with_reasons, char *buf, size_t len);
/* The room a row's details need: the engine's own description (a bf16
 * row's arithmetic, threads, instruction set, the library's kernels), then
 * its setup note (the OpenMP settings), and a wrapper's words around them. */
#define BACKEND_DETAILS_MAX 4096
/* "", then the setup note after "; " */
void backend_describe(const backend *b, engine *e, char *buf, size_t len);
/* 0 */
size_t backend_peak_memory(const backend *b, engine *e);
/* 1 with what the engine holds, by kind; 0 (all zero) when not itemised */
int backend_memory_use(const backend *b, engine *e, memory_use *out);
/* 0: the harness probes the CPU instead */
double backend_peak_gflops(const backend *b, engine *e);
/* The arithmetic a CPU engine's products run on (engine.h's keys); an
 * engine that does not say computes in precision p's own: fp64 and fp16
 * FMAs, the bf16 dot product, fp32 FMAs (tf32 on a CPU) */
const char *backend_arithmetic(const backend *b, engine *e, precision p);
/* 0: not measured */
double backend_library_peak_gflops(const backend *b, int threads);
/* -1 with a message in err when b cannot profile its layers */
int backend_profile_layers(const backend *b, engine *e, const int32_t *indices, int batch,
                           int reps, layer_times *out, char *err, size_t err_len);
/* NAN: the last step's loss at the engine's own precision */
double backend_last_loss(const backend *b, engine *e);
/* Libraries and versions of a backend that is loaded; "" for one that is
 * not (asking must not load a library the run did not use). */
void backend_library_info(const backend *b, char *buf, size_t len);

#endif
