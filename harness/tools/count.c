/* `./bench count`: see count.h. The command line: it re-runs this same
 * executable under callgrind as a child (count_parent.c runs it and reads
 * its dumps back, count_child.c is the hidden `--child` mode that counts
 * each item), and count_compare.c reads counts.csv files back. */
#include "harness/tools/count.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "base/alloc.h"
#include "harness/formats/idx.h"
#include "harness/run/config.h"
#include "harness/run/option_table.h"
#include "harness/run/options.h"
#include "harness/tools/children.h"
#include "harness/tools/count_run.h"

#define DEFAULT_BLAS_CORE "Sandybridge"

/* ---- command line ------------------------------------------------------------ */

static void count_usage(FILE *f)
{
    char workloads[256];
    workload_names(workloads, sizeof workloads);
    fprintf(f,
        "usage: ./bench count [options]      (normally: make count)\n"
        "\n"
        "Counts the instructions each part of a training run executes, under\n"
        "valgrind's callgrind, and writes OUT/counts.csv: one row per item with\n"
        "its instructions per image, the commit, compiler, build target, OpenBLAS\n"
        "version and kernels, valgrind version and the CPU valgrind presented.\n"
        "Only the item itself is counted: not start-up, engine creation, the\n"
        "warm-up step or anything timed.\n"
        "\n"
        "Items: load (reading and checking the test split's IDX files),\n"
        "train-NAME (--steps training steps of backend NAME, one thread, after one\n"
        "warm-up step), eval-NAME (scoring --eval-images test images).\n"
        "\n"
        "  --items LIST         comma-separated items (default: load, and train-\n"
        "                       and eval- of naive and blas where they can run)\n"
        "  --steps N            training steps counted per backend (default 2)\n"
        "  --batch-size B       images per step (default the workload's, 128)\n"
        "  --eval-images N      test images scored (default 200)\n"
        "  --workload NAME      %s (default lenet)\n"
        "  --data DIR           the IDX files (default " IDX_DEFAULT_DIR ")\n"
        "  --out DIR            where counts.csv goes (default results/count-<date>-<time>)\n"
        "  --blas-core NAME     OPENBLAS_CORETYPE for the counted run only (default\n"
        "                       " DEFAULT_BLAS_CORE ", so every AVX2 machine counts the same\n"
        "                       kernels; 'native' leaves the environment as it is)\n"
        "  --valgrind PATH      the valgrind to run (default valgrind)\n"
        "  --help               this text\n"
        "\n"
        "The build must not target AVX-512 (valgrind cannot decode it): `make count`\n"
        "builds build-count/bench for x86-64-v3 and counts with it. Compare two\n"
        "counts with ./bench compare BASE NEW (directories or counts.csv files).\n"
        "Exit status: 0 counted, 1 the counted run failed, 2 bad input, 3 valgrind\n"
        "missing or this build cannot be counted.\n",
        workloads);
}

static int runnable(const char *name, char *why, size_t why_len)
{
    const backend *b = backend_find(name);
    if (!b) {
        snprintf(why, why_len, "no backend called %s", name);
        return 0;
    }
    return backend_runnable(b, PREC_FP32, why, why_len);
}

/* --items: a list (options.h) of load, train-NAME and eval-NAME for every
 * backend NAME; a framework peer's is refused with the reason. */
static int parse_items(count_options *o, const char *list)
{
    const int count = 1 + 2 * backend_count();
    char (*spelled)[ITEM_LEN] = xcalloc((size_t)count, sizeof *spelled);
    const char **names = xcalloc((size_t)count, sizeof *names);
    int *got = xcalloc((size_t)count, sizeof *got);
    snprintf(spelled[0], ITEM_LEN, "load");
    for (int i = 0; i < backend_count(); i++) {
        snprintf(spelled[1 + 2 * i], ITEM_LEN, "train-%s", backend_at(i)->name);
        snprintf(spelled[2 + 2 * i], ITEM_LEN, "eval-%s", backend_at(i)->name);
    }
    for (int k = 0; k < count; k++)
        names[k] = spelled[k];
    int rc = option_name_list("count", "--items", "item", list, names, count, got, MAX_ITEMS,
                              &o->n_items);
    for (int i = 0; rc == 0 && i < o->n_items; i++) {
        const backend *b = got[i] ? backend_at((got[i] - 1) / 2) : NULL;
        if (b && backend_is_peer(b)) {
            fprintf(stderr, "bench count: --items: %s cannot be counted: %s trains in a "
                    "process of its own, which callgrind does not trace\n", names[got[i]],
                    b->name);
            rc = 2;
        }
        snprintf(o->items[i], ITEM_LEN, "%s", names[got[i]]);
    }
    free(got);
    free(names);
    free(spelled);
    return rc;
}

int count_main(int argc, char **argv)
{
    count_options o = {
        .steps = 2,
        .batch = 0,
        .eval_images = 200,
        .data_dir = IDX_DEFAULT_DIR,
        .blas_core = DEFAULT_BLAS_CORE,
        .valgrind = "valgrind",
    };
    const char *items = NULL, *workload_name = "lenet";
    const option_entry options[] = {
        {"items", OPTION_TEXT, .to = &items},
        {"steps", OPTION_INT, .to = &o.steps, .lo = 1, .hi = 1000},
        {"batch-size", OPTION_INT, .to = &o.batch, .lo = 1, .hi = 4096},
        {"eval-images", OPTION_INT, .to = &o.eval_images, .lo = 1, .hi = 10000},
        {"workload", OPTION_TEXT, .to = &workload_name},
        {"data", OPTION_TEXT, .to = &o.data_dir},
        {"out", OPTION_TEXT, .to = &o.out_dir},
        {"blas-core", OPTION_TEXT, .to = &o.blas_core},
        {"valgrind", OPTION_TEXT, .to = &o.valgrind},
        {"child", OPTION_TEXT, .to = &o.child_meta},
        {"help", OPTION_HELP, .print = count_usage},
        {.name = NULL},
    };
    const int status = subcommand_options("count", options, argc, argv);
    if (status >= 0)
        return status;
    if (optind != argc) {
        fprintf(stderr, "bench count: unexpected argument '%s' (see ./bench count --help)\n",
                argv[optind]);
        return 2;
    }
    if (workload_get(workload_name, &o.work) != 0) {
        char workloads[256];
        workload_names(workloads, sizeof workloads);
        fprintf(stderr, "bench count: --workload: '%s' is not one of %s\n", workload_name,
                workloads);
        return 2;
    }
    if (!o.batch)
        o.batch = o.work.default_batch_size;
    if (strlen(o.data_dir) >= PATH_LEN || (o.out_dir && strlen(o.out_dir) >= PATH_LEN - 32)) {
        fprintf(stderr, "bench count: path too long\n");
        return 2;
    }
    if (items) {
        const int rc = parse_items(&o, items);
        if (rc != 0)
            return rc;
    } else {
        snprintf(o.items[o.n_items++], ITEM_LEN, "load");
        static const char *const cpu_backends[] = {"naive", "blas", "direct"};
        for (size_t i = 0; i < sizeof cpu_backends / sizeof cpu_backends[0]; i++) {
            char why[512];
            if (!runnable(cpu_backends[i], why, sizeof why)) {
                fprintf(stderr, "bench count: leaving out %s: %s\n", cpu_backends[i], why);
                continue;
            }
            snprintf(o.items[o.n_items++], ITEM_LEN, "train-%s", cpu_backends[i]);
            snprintf(o.items[o.n_items++], ITEM_LEN, "eval-%s", cpu_backends[i]);
        }
    }
    if (o.child_meta)
        return child_main(&o);
    for (int i = 0; i < o.n_items; i++) {
        char why[512];
        const char *dash = strchr(o.items[i], '-');
        if (dash && !runnable(dash + 1, why, sizeof why)) {
            fprintf(stderr, "bench count: %s cannot run: %s\n", o.items[i], why);
            return 3;
        }
    }
    children_catch_signals(); /* a signal ends valgrind and removes the temporaries */
    return parent_main(&o);
}
