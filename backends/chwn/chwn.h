/* The CHWN engine: a CPU engine whose activations are CHWN ([C][H][W][B],
 * the images innermost; chwn_layers.h), whose convolutions run group by
 * group of images and dense layers over the whole batch, every product
 * computed by a product set chosen at create (chwn_products.h) and
 * everything else as OpenMP loops. Parameters, gradients and optimiser
 * state keep the flat layout of every backend, so the harness and a
 * data-parallel coordinator see the same floats as with the naive backend.
 *
 * Backends are built over it: blas (OpenBLAS's GEMMs, backends/blas/) and
 * direct (the project's register tiles, backends/direct/). Each defines
 * its descriptor and product sets in its own folder and hands a set to
 * chwn_create_f32 or chwn_create_f64; neither includes the other. This
 * header is what they use; it does not depend on the real type. */
#ifndef LB_CHWN_H
#define LB_CHWN_H

#include <stddef.h>

#include "backends/common/host_engine.h"
#include "backends/engine.h"

/* How the work is shared:
 *   CHWN_SPLIT_OWN      the engine's threads share out fixed pieces of work
 *                       (groups of images for the convolutions, tiles of
 *                       rows for the dense layers) and every product runs
 *                       on one thread inside that parallel region. The
 *                       pieces depend on the shapes only, so 1 thread and 8
 *                       compute the same floats.
 *   CHWN_SPLIT_LIBRARY  one product over the whole batch, threaded by the
 *                       product set (OpenBLAS's threads, or the direct
 *                       kernels' own); the loops around it use OpenMP.
 * The first is the default: on 2 cores it was 1.3-1.5x faster per step
 * with OpenBLAS (fewer, larger synchronisations; each group's data stays
 * in one core's cache), and 2-2.5x faster when other processes shared the
 * cores. */
typedef enum chwn_split { CHWN_SPLIT_OWN, CHWN_SPLIT_LIBRARY } chwn_split;

typedef struct chwn_team {
    int threads;
    chwn_split split;
} chwn_team;

/* The product sets, one struct type per real type (chwn_products.h). */
struct chwn_products_f32;
struct chwn_products_f64;

/* An engine of backend b (its descriptor: its name heads messages, its
 * ops serve the engine) for w and cfg, computing its products with `set`:
 * float parameters and activations (fp32, and the bf16 sets' master
 * weights), or double. NULL with the reason in err. */
engine *chwn_create_f32(const backend *b, const struct chwn_products_f32 *set,
                        const workload *w, const engine_config *cfg, char *err,
                        size_t err_len);
engine *chwn_create_f64(const backend *b, const struct chwn_products_f64 *set,
                        const workload *w, const engine_config *cfg, char *err,
                        size_t err_len);

/* The product set an engine was created with (the one handed to create),
 * for a backend's description. */
const struct chwn_products_f32 *chwn_products_of_f32(engine *e);
const struct chwn_products_f64 *chwn_products_of_f64(engine *e);
/* The engine's team (threads and split), for a backend's description. */
chwn_team chwn_team_of(engine *e);
/* Chooses who splits the products; CHWN_SPLIT_OWN is the default. Meant
 * for tests and measurements. */
void chwn_set_split(engine *e, chwn_split split);

/* The engine_ops entries every backend over the engine shares; the
 * backend adds its describe:
 *   static const engine_ops ops = {CHWN_ENGINE_OPS, .describe = describe}; */
void chwn_destroy(engine *e);
void chwn_placement(engine *e, int *threads, int *devices, int *replicas);
const char *chwn_arithmetic(engine *e); /* the product set's */
#define CHWN_ENGINE_OPS                                                                        \
    HOST_ENGINE_OPS, .destroy = chwn_destroy, .placement = chwn_placement,                     \
    .arithmetic = chwn_arithmetic

/* And the descriptor's entries they share, after the backend's own probe
 * of a precision, create and library_info. */
#define CHWN_BACKEND_ENTRIES                                                                   \
    .built = 1, .probe = host_probe, .dp = &host_data_parallel, .stage = &host_stages

#endif
