/* The child of `./bench count`, run under `valgrind --tool=callgrind
 * --instr-atstart=no`: it switches instrumentation on around each item
 * only and dumps the counts with the item's name (count.h says what the
 * items are). */
#include "harness/tools/count_run.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/engine.h"
#include "backends/registry.h"
#include "base/cpu.h"
#include "harness/formats/idx.h"
#include "harness/run/init.h"
#include "harness/run/sysinfo.h"

#ifndef COUNT_BUILD_FLAGS
#define COUNT_BUILD_FLAGS "unknown flags"
#endif

/* The counted region: instrumentation on, counters zeroed; at the end the
 * counts are dumped under the item's name and instrumentation goes off. */
#ifdef HAVE_CALLGRIND_H
#define REGION_BEGIN()                                                                     \
    do {                                                                                   \
        CALLGRIND_START_INSTRUMENTATION;                                                   \
        CALLGRIND_ZERO_STATS;                                                              \
    } while (0)
#define REGION_END(name)                                                                   \
    do {                                                                                   \
        CALLGRIND_DUMP_STATS_AT(name);                                                     \
        CALLGRIND_STOP_INSTRUMENTATION;                                                    \
    } while (0)
#else
#define REGION_BEGIN() ((void)0)
#define REGION_END(name) ((void)(name))
#endif

int item_index(const count_options *o, const char *name)
{
    for (int i = 0; i < o->n_items; i++)
        if (!strcmp(o->items[i], name))
            return i;
    return -1;
}

static int all_finite(const float *v, int n)
{
    for (int i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

/* train-NAME and eval-NAME of one backend, on one engine. */
static int child_backend(const count_options *o, const char *name, const dataset *train,
                         const dataset *test, const float *params, const int32_t *order,
                         FILE *meta)
{
    char train_item[ITEM_LEN], eval_item[ITEM_LEN];
    snprintf(train_item, sizeof train_item, "train-%s", name);
    snprintf(eval_item, sizeof eval_item, "eval-%s", name);
    int want_train = item_index(o, train_item) >= 0, want_eval = item_index(o, eval_item) >= 0;
    if (!want_train && !want_eval)
        return 0;
    const backend *b = backend_find(name);
    char why[512];
    if (!b || !backend_runnable(b, PREC_FP32, why, sizeof why)) {
        fprintf(stderr, "bench count: %s cannot run: %s\n", name, b ? why : "no such backend");
        return -1;
    }
    engine_config cfg = {
        .batch_size = o->batch,
        .opt = {.kind = OPT_NESTEROV, .lr = (float)o->work.default_lr,
                .momentum = (float)o->work.default_momentum,
                .weight_decay = (float)o->work.default_weight_decay,
                .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f},
        .threads = 1, /* one thread: no spinning or scheduling in the counts */
        .precision = PREC_FP32,
    };
    char err[512] = "";
    engine *e = backend_create(b, &o->work, &cfg, err, sizeof err);
    if (!e) {
        fprintf(stderr, "bench count: %s: create: %s\n", name, err[0] ? err : "unknown error");
        return -1;
    }
    int rc = 0;
    float *losses = malloc(sizeof(float) * (size_t)(o->steps + 1));
    if (!losses || b->ops->set_params(e, params) != 0 || b->ops->bind_dataset(e, train, test) != 0) {
        fprintf(stderr, "bench count: %s: setup: %s\n", name, losses ? b->ops->error(e) : "out of memory");
        rc = -1;
        goto done;
    }
    /* One warm-up step: first touches and the library's own set-up stay
     * out of the counts, so a count is steps times one step. */
    if (b->ops->train_steps(e, order, o->batch, 1, losses) != 0) {
        fprintf(stderr, "bench count: %s: train: %s\n", name, b->ops->error(e));
        rc = -1;
        goto done;
    }
    if (want_train) {
        REGION_BEGIN();
        int failed = b->ops->train_steps(e, order + o->batch, o->batch, o->steps, losses);
        REGION_END(train_item);
        if (failed || !all_finite(losses, o->steps)) {
            fprintf(stderr, "bench count: %s: train: %s\n", name,
                    failed ? b->ops->error(e) : "loss became NaN or Inf");
            rc = -1;
            goto done;
        }
        fprintf(meta, "item %s %ld %d\n", train_item, (long)o->steps * o->batch, o->steps);
    }
    if (want_eval) {
        eval_counts ev;
        int failed = b->ops->evaluate(e, 1, &ev); /* warm-up */
        if (!failed) {
            REGION_BEGIN();
            failed = b->ops->evaluate(e, o->eval_images, &ev);
            REGION_END(eval_item);
        }
        if (failed || ev.count != o->eval_images) {
            fprintf(stderr, "bench count: %s: evaluate: %s\n", name,
                    failed ? b->ops->error(e) : "scored a different number of images");
            rc = -1;
            goto done;
        }
        fprintf(meta, "item %s %d 0\n", eval_item, o->eval_images);
    }
done:
    free(losses);
    b->ops->destroy(e);
    return rc;
}

int child_main(const count_options *o)
{
    FILE *meta = fopen(o->child_meta, "w");
    if (!meta) {
        fprintf(stderr, "bench count: cannot write %s: %s\n", o->child_meta, strerror(errno));
        return 1;
    }
    sysinfo sys;
    sysinfo_collect(&sys);
    /* what the CPU says it is through CPUID: under valgrind, the CPU
     * valgrind presents to the program (glibc and OpenBLAS choose their
     * code by it) */
    char cpu[64];
    snprintf(cpu, sizeof cpu, "%s", cpu_this()->brand[0] ? cpu_this()->brand : "unknown");
    /* OpenBLAS's version and the kernels it picked, with OPENBLAS_CORETYPE
     * as the parent set it (loading the module here is not counted). */
    const backend *blas = backend_find("blas");
    char blas_info[256] = "none", why[512] = "";
    if (blas && backend_runnable(blas, PREC_FP32, why, sizeof why))
        backend_library_info(blas, blas_info, sizeof blas_info);
    else
        snprintf(blas_info, sizeof blas_info, "none (%.200s)", why[0] ? why : "not in this build");
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    fprintf(meta, "commit=%s\ncompiler=%s\nbuild=%s, %s\ncpu_seen=%s\nhost_cpu=%s\nblas=%s\n"
                  "openblas_coretype=%s\n",
            sys.git_commit, sys.compiler, sys.build, COUNT_BUILD_FLAGS, cpu, sys.cpu_model, blas_info,
            coretype ? coretype : "unset");

    const workload *w = &o->work;
    dataset train = {0}, test = {0};
    char err[1024];
    int rc = 0;
    /* The load item is the test split: the same code as the training split,
     * a sixth of the bytes. */
    int count_load = item_index(o, "load") >= 0;
    if (count_load)
        REGION_BEGIN();
    int failed = idx_load_split(o->data_dir, "t10k", w->classes, w->input.h, w->input.w, &test,
                                err, sizeof err);
    if (count_load)
        REGION_END("load");
    if (!failed)
        failed = idx_load_split(o->data_dir, "train", w->classes, w->input.h, w->input.w, &train,
                                err, sizeof err);
    if (failed) {
        fprintf(stderr, "bench count: %s\n", err);
        fclose(meta);
        return 2;
    }
    if (count_load)
        fprintf(meta, "item load %d 0\n", test.count);
    long need = (long)(o->steps + 1) * o->batch;
    if (need > train.count || o->eval_images > test.count) {
        fprintf(stderr, "bench count: %ld training images needed (have %d), %d test images (have %d)\n",
                need, train.count, o->eval_images, test.count);
        rc = 2;
    }
    float *params = malloc(sizeof(float) * w->param_count);
    int32_t *order = malloc(sizeof(int32_t) * (size_t)train.count);
    if (!rc && (!params || !order)) {
        fprintf(stderr, "bench count: out of memory\n");
        rc = 1;
    }
    if (!rc) {
        init_params(w, w->default_seed, params);
        epoch_order(w->default_seed, 0, train.count, 1, order);
        /* each backend once, in the order its items were asked for */
        char done[MAX_ITEMS][ITEM_LEN];
        int n_done = 0;
        for (int i = 0; i < o->n_items && !rc; i++) {
            const char *dash = strchr(o->items[i], '-');
            if (!dash)
                continue;
            const char *name = dash + 1;
            int seen = 0;
            for (int k = 0; k < n_done; k++)
                seen |= !strcmp(done[k], name);
            if (seen)
                continue;
            snprintf(done[n_done++], ITEM_LEN, "%s", name);
            if (child_backend(o, name, &train, &test, params, order, meta) != 0)
                rc = 1;
        }
    }
    free(params);
    free(order);
    dataset_free(&train);
    dataset_free(&test);
    if (fclose(meta) != 0 && !rc) {
        fprintf(stderr, "bench count: cannot write %s\n", o->child_meta);
        rc = 1;
    }
    return rc;
}
