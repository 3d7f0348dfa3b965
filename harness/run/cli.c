#include "harness/formats/idx.h"
#include "harness/run/config.h"
#include "harness/run/option_table.h"
#include "harness/run/options.h"
#include "harness/run/peak.h"
#include "harness/run/plan.h"

#include "backends/direct/fp32/isa.h"
#include "backends/registry.h"
#include "parallel/world.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *optimizer_names[] = {"sgd", "nesterov", "adam"};

const char *optimizer_name(optimizer_kind k) { return optimizer_names[k]; }

static void usage(FILE *f)
{
    fprintf(f,
        "usage: ./bench [options]           train and time each backend\n"
        "       ./bench --list              list backends and whether they run here\n"
        "       ./bench compare BASE NEW    judge a run against a baseline (exit 1: regressed)\n"
        "       ./bench history RUN         append a run's rows to results/history.csv\n"
        "       ./bench plot RUN            draw a run's charts again\n"
        "       ./bench count [options]     count instructions per item under callgrind\n"
        "       ./bench peaks               this CPU's peak per arithmetic and memory bandwidth\n"
        "       (each takes --help)\n"
        "\n"
        "  --backend LIST       comma list of backends, or 'all' (default: all)\n"
        "  --no-peers           leave out the framework peers (pytorch-cpu, pytorch-cuda)\n"
        "  --workload W         lenet (default) or mlp\n"
        "  --epochs N           epochs per backend (default 10)\n"
        "  --batch-size LIST    images per step, a comma list each trained as its own\n"
        "                       configuration, e.g. 32,128,512 (default: the workload's;\n"
        "                       the learning rate stays as set)\n"
        "  --limit N            train on the first N training images only\n"
        "  --test-limit N       evaluate on the first N test images only\n"
        "  --data DIR           directory with the four MNIST-format files\n"
        "                       (default " IDX_DEFAULT_DIR ")\n"
        "  --optimizer O        nesterov (default), sgd or adam\n"
        "  --lr X               learning rate (default 0.01; adam 0.001)\n"
        "  --momentum X         Nesterov momentum (default 0.9)\n"
        "  --weight-decay X     L2 decay on weights, not biases (default 5e-4)\n"
        "  --seed S             seed for initial parameters and order (default 123)\n"
        "  --no-shuffle         train in file order\n"
        "  --init-params FILE   start from these parameters instead of the seed\n"
        "  --save-params FILE   write the trained parameters (FILE.<backend> when\n"
        "                       several backends run)\n"
        "  --out DIR            results directory (default results/<date>-<time>-<host>)\n"
        "  --threads N          CPU threads for the blas backend (default: all cores)\n"
        "  --device N           GPU index (default 0)\n"
        "  --replicas LIST      data-parallel replicas in this process (threads), a comma\n"
        "                       list run in turn, e.g. 1,2 (default 1); under mpirun\n"
        "                       every rank is one replica\n"
        "  --gpus N             multi-gpu: replicas, one per GPU (default: every visible\n"
        "                       GPU; more than the GPUs shares them)\n"
        "  --averaging-frequency K  average the replicas' parameters every K steps each\n"
        "                       instead of all-reducing gradients every step (default 0)\n"
        "  --average-optimizer-state  with K > 0: average the optimiser state too\n"
        "  --parallel LIST      model and/or hybrid: besides each backend's own rows,\n"
        "                       train it split over --workers engines (model), or as\n"
        "                       --groups data-parallel groups of --workers/--groups\n"
        "                       model-parallel engines (hybrid)\n"
        "  --split LIST         layers (stages of whole layers, default) and/or filters\n"
        "                       (a share of every layer's filters and units per worker)\n"
        "  --workers N          model-parallel workers (default 2)\n"
        "  --groups G           hybrid: data-parallel groups (default 2)\n"
        "  --micro-batches LIST pipeline each batch as M micro-batches (default 1)\n"
        "  --prefetch LIST      model/hybrid: batches gathered and converted ahead on\n"
        "                       threads of their own (default 0: none)\n"
        "  --step-losses FILE   write every training step's loss to FILE (CSV; a new or\n"
        "                       empty file, never overwritten)\n"
        "  --precision LIST     fp32 (default), fp64, tf32, bf16 or fp16, or a comma list\n"
        "                       of them, each trained as its own configuration; a\n"
        "                       backend that cannot compute in one is a skipped row\n"
        "                       (--list: which backend runs which here)\n"
        "  --cuda-graph on|off  replay the training step as a CUDA graph (default on)\n"
        "  --data-on-device on|off  keep the training set on the GPU (default on)\n"
        "  --repeat N           train each backend N times (statistics over runs)\n"
        "  --profile-layers     time each layer's forward and backward\n"
        "  --no-peak            skip the peak GFLOP/s probe after each run (no %% of peak;\n"
        "                       for short or instrumented runs, e.g. under a sanitizer)\n"
        "  --target-accuracy X  report the time to reach test accuracy X (0..1)\n"
        "  --format md|csv|json summary printed at the end (default md)\n"
        "  --list               list backends: built or not, runnable here or not\n"
        "  --help               this text\n");
}

/* "precisions here: fp32, fp64; not bf16: <why>" for --list. */
static const char *precisions_here(const backend *b, char *buf, size_t len)
{
    char runs[128] = "", refused[384] = "", why[256];
    for (int p = 0; p < PRECISION_COUNT; p++) {
        if (!(backend_precisions(b) & (1u << p)))
            continue;
        const char *name = precision_name((precision)p);
        if (backend_runnable(b, (precision)p, why, sizeof why))
            snprintf(runs + strlen(runs), sizeof runs - strlen(runs), "%s%s",
                     runs[0] ? ", " : "", name);
        else
            snprintf(refused + strlen(refused), sizeof refused - strlen(refused), "; not %s: %s",
                     name, why);
    }
    snprintf(buf, len, "precisions here: %s%s", runs, refused);
    return buf;
}

static void list_backends(void)
{
    /* names in a column as wide as the longest, so every row lines up */
    int w = 0;
    for (int i = 0; i < backend_count(); i++)
        if ((int)strlen(backend_at(i)->name) > w)
            w = (int)strlen(backend_at(i)->name);
    for (int i = 0; i < backend_count(); i++) {
        const backend *b = backend_at(i);
        char why[512] = "";
        if (!b->built)
            printf("%-*s not built: %s\n", w, b->name, b->not_built_reason);
        else if (!backend_runnable(b, PREC_FP32, why, sizeof why))
            printf("%-*s built, not runnable here: %s\n", w, b->name, why);
        else
            printf("%-*s built, runnable: %s (%s)\n", w, b->name, b->summary,
                   precisions_here(b, why, sizeof why));
        char note[1024];
        backend_setup_note(b, 1, note, sizeof note);
        if (note[0])
            printf("%-*s %s\n", w, "", note);
    }
    dp_print_support(stdout);
}

static int usage_error(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "bench: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n(see ./bench --help)\n");
    return 2;
}

static int parse_on_off(const char *flag, const char *s, int *out)
{
    if (strcmp(s, "on") == 0)
        *out = 1;
    else if (strcmp(s, "off") == 0)
        *out = 0;
    else
        return usage_error("%s expects on or off, got '%s'", flag, s);
    return 0;
}

static int pick(const char *flag, const char *s, const char *const *names, int n,
                const char *choices, int *out)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    fprintf(stderr, "bench: unknown %s '%s'; choose one of: %s\n", flag, s, choices);
    return 2;
}

/* --backend: names of the registry, or "all" (every backend) among them. */
static int parse_backends(const char *list, run_config *cfg)
{
    const char *names[MAX_RUN_BACKENDS + 1] = {"all"};
    int count = 1, got[MAX_RUN_BACKENDS + 1], n;
    for (int i = 0; i < backend_count() && count <= MAX_RUN_BACKENDS; i++)
        names[count++] = backend_at(i)->name;
    cfg->n_backends = 0;
    cfg->all_backends = 0;
    if (option_name_list(NULL, "--backend", "backend", list, names, count, got, count, &n))
        return 2;
    for (int i = 0; i < n; i++)
        cfg->all_backends |= got[i] == 0;
    if (cfg->all_backends)
        for (int k = 1; k < count; k++)
            cfg->backends[cfg->n_backends++] = backend_at(k - 1);
    else
        for (int i = 0; i < n; i++)
            cfg->backends[cfg->n_backends++] = backend_at(got[i] - 1);
    return 0;
}

/* --no-peers: the framework peers leave the list. */
static int drop_peers(run_config *cfg)
{
    int kept = 0;
    for (int i = 0; i < cfg->n_backends; i++)
        if (!backend_is_peer(cfg->backends[i]))
            cfg->backends[kept++] = cfg->backends[i];
    cfg->n_backends = kept;
    if (kept == 0)
        return usage_error("--no-peers leaves no backend of --backend to run%s%s", "", "");
    return 0;
}

static int copy_path(const char *flag, const char *s, char *dst)
{
    if (!*s || strlen(s) >= PATH_LEN)
        return usage_error("%s needs a path (got '%s')", flag, s);
    strcpy(dst, s);
    return 0;
}

/* The readers of the options that are more than a number or a name
 * (option_table.h); each entry's `to` says where the value goes. */

static int read_path(const char *flag, const char *value, const option_entry *e)
{
    return copy_path(flag, value, e->to);
}

/* --out: a path whose charts can be drawn. gnuplot reads the directory
 * from a string in its own language, in which a control character (a
 * newline, a tab) cannot be written as it is: such a name is refused
 * before anything is trained, not found out when every chart fails. */
static int read_out(const char *flag, const char *value, const option_entry *e)
{
    for (const char *c = value; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            fprintf(stderr,
                    "bench: %s: the directory's name holds a control character (0x%02x at byte "
                    "%d), which the charts cannot be drawn into: choose another name\n",
                    flag, (unsigned char)*c, (int)(c - value) + 1);
            return 2;
        }
    return copy_path(flag, value, e->to);
}

/* --seed: a whole number a double holds exactly (the system record's). */
static int read_seed(const char *flag, const char *value, const option_entry *e)
{
    return option_whole(NULL, flag, value, (long long)e->lo, (long long)e->hi, e->to);
}

static int read_on_off(const char *flag, const char *value, const option_entry *e)
{
    return parse_on_off(flag, value, e->to);
}

static int read_optimizer(const char *flag, const char *value, const option_entry *e)
{
    (void)flag;
    return pick("optimizer", value, optimizer_names, 3, "nesterov, sgd, adam", e->to);
}

static const char *format_names[] = {"md", "csv", "json"};

static int read_format(const char *flag, const char *value, const option_entry *e)
{
    (void)flag;
    return pick("format", value, format_names, 3, "md, csv, json", e->to);
}

static int read_precisions(const char *flag, const char *value, const option_entry *e)
{
    run_config *cfg = e->to;
    const char *names[PRECISION_COUNT];
    int got[PRECISION_COUNT];
    for (int k = 0; k < PRECISION_COUNT; k++)
        names[k] = precision_name((precision)k);
    int rc = option_name_list(NULL, flag, "precision", value, names, PRECISION_COUNT, got,
                              PRECISION_COUNT, &cfg->n_precisions);
    for (int i = 0; rc == 0 && i < cfg->n_precisions; i++)
        cfg->precisions[i] = (precision)got[i];
    return rc;
}

static int read_parallel(const char *flag, const char *value, const option_entry *e)
{
    run_config *cfg = e->to;
    static const char *const modes[] = {"model", "hybrid"};
    int got[2], n;
    int rc = option_name_list(NULL, flag, "parallel mode", value, modes, 2, got, 2, &n);
    for (int i = 0; rc == 0 && i < n; i++)
        *(got[i] ? &cfg->hybrid_parallel : &cfg->model_parallel) = 1;
    return rc;
}

/* The model-parallel options go to the configuration and note which came
 * first, to refuse it without --parallel. */
typedef struct model_options {
    run_config *cfg;
    const char *first; /* the first one given, without its "--" */
    int groups_given;
} model_options;

static model_options *note_model_option(model_options *m, const char *name)
{
    m->first = m->first ? m->first : name;
    return m;
}

static model_options *model_option_given(const option_entry *e)
{
    return note_model_option(e->to, e->name);
}

/* Where a list of whole numbers from e->lo to e->hi goes (--batch-size,
 * --replicas, --micro-batches, --prefetch): up to `most` values and their
 * count; `model` set for a model-parallel option, noted as given. */
typedef struct whole_list {
    int *values, most, *count;
    model_options *model;
} whole_list;

static int read_whole_list(const char *flag, const char *value, const option_entry *e)
{
    const whole_list *l = e->to;
    if (l->model)
        note_model_option(l->model, e->name);
    return option_whole_list(NULL, flag, value, (long)e->lo, (long)e->hi, l->values, l->most,
                             l->count);
}

static int read_split(const char *flag, const char *value, const option_entry *e)
{
    run_config *cfg = model_option_given(e)->cfg;
    static const char *const splits[] = {"layers", "filters"};
    int got[2];
    int rc = option_name_list(NULL, flag, "split", value, splits, 2, got, 2, &cfg->n_splits);
    for (int i = 0; rc == 0 && i < cfg->n_splits; i++)
        cfg->splits[i] = (mp_split)got[i];
    return rc;
}

static int read_workers(const char *flag, const char *value, const option_entry *e)
{
    run_config *cfg = model_option_given(e)->cfg;
    cfg->workers_given = 1;
    return option_int(NULL, flag, value, (long)e->lo, (long)e->hi, &cfg->workers);
}

static int read_groups(const char *flag, const char *value, const option_entry *e)
{
    model_options *m = model_option_given(e);
    m->groups_given = 1;
    return option_int(NULL, flag, value, (long)e->lo, (long)e->hi, &m->cfg->groups);
}

static int do_list(const char *flag, const char *value, const option_entry *e)
{
    (void)flag, (void)value, (void)e;
    char why[256];
    if (direct_isa_check(why, sizeof why))
        return usage_error("%s%s", why, "");
    list_backends();
    return OPTIONS_DONE;
}

/* More threads than the CPUs this process may use (its affinity, as
 * taskset sets it, not the online count) only slows a run: say so, run
 * anyway. */
static void warn_threads_beyond_cores(int threads)
{
    int cpus = peak_usable_cpus();
    if (threads > 0 && threads > cpus)
        fprintf(stderr, "bench: warning: --threads %d is more than the %d CPUs this process may "
                "use; the threads will share them and run slower\n", threads, cpus);
}

/* Some configuration of the run has more than one replica to average. */
static int several_replicas(const run_config *cfg)
{
    if (world_launched_by_mpirun())
        return 1;
    for (int i = 0; i < cfg->n_replicas; i++)
        if (cfg->replicas[i] > 1)
            return 1;
    for (int i = 0; i < cfg->n_backends; i++)
        if (cfg->backends[i] == &multi_gpu_backend)
            return 1;
    return 0;
}

/* LENET_BENCH_PEER_TIMEOUT, read by the peers: a value that is not a
 * number of seconds was silently replaced by the default. */
static int check_peer_timeout(const run_config *cfg)
{
    const char *env = getenv("LENET_BENCH_PEER_TIMEOUT");
    int peers = 0;
    for (int i = 0; i < cfg->n_backends; i++)
        peers |= backend_is_peer(cfg->backends[i]);
    if (!env || !peers)
        return 0;
    double v;
    if (number_read(env, &v) != 0 || !(v > 0) || v > 1e6)
        return usage_error("LENET_BENCH_PEER_TIMEOUT='%s' is not a number of seconds in "
                           "(0, 1e6]%s", env, "");
    return 0;
}

int cli_parse(int argc, char **argv, run_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->argc = argc;
    cfg->argv = argv;
    const char *workload_name = "lenet";
    const char *backend_list = "all";
    int no_peers = 0;
    int epochs = -1, optimizer = OPT_NESTEROV, fmt = FORMAT_MD;
    double lr = -1, momentum = -1, decay = -1;
    long long seed = -1;
    cfg->shuffle = 1;
    cfg->repeat = 1;
    cfg->replicas[0] = cfg->n_replicas = 1;
    cfg->splits[0] = MP_SPLIT_LAYERS;
    cfg->n_splits = 1;
    cfg->workers = 2;
    cfg->groups = 2;
    cfg->micro_batches[0] = cfg->n_micro_batches = 1;
    cfg->prefetch[0] = 0;
    cfg->n_prefetch = 1;
    cfg->engine.cuda_graph = 1;
    cfg->engine.data_on_device = 1;
    strcpy(cfg->data_dir, IDX_DEFAULT_DIR);
    model_options model = {.cfg = cfg};
    whole_list batch_sizes = {cfg->batch_sizes, MAX_BATCH_SIZES, &cfg->n_batch_sizes, NULL};
    whole_list replicas = {cfg->replicas, MAX_REPLICA_COUNTS, &cfg->n_replicas, NULL};
    whole_list micro_batches = {cfg->micro_batches, MAX_AXIS_VALUES, &cfg->n_micro_batches,
                                &model};
    whole_list prefetch = {cfg->prefetch, MAX_AXIS_VALUES, &cfg->n_prefetch, &model};
    const option_entry options[] = {
        {"backend", OPTION_TEXT, .to = &backend_list},
        {"no-peers", OPTION_SET, .to = &no_peers},
        {"workload", OPTION_TEXT, .to = &workload_name},
        {"epochs", OPTION_INT, .to = &epochs, .lo = 1, .hi = 100000},
        {"batch-size", OPTION_READ, .to = &batch_sizes, .lo = 1, .hi = PLAN_MAX_BATCH,
         .read = read_whole_list},
        {"limit", OPTION_INT, .to = &cfg->limit, .lo = 1, .hi = INT_MAX},
        {"test-limit", OPTION_INT, .to = &cfg->test_limit, .lo = 1, .hi = INT_MAX},
        {"data", OPTION_READ, .to = cfg->data_dir, .read = read_path},
        {"optimizer", OPTION_READ, .to = &optimizer, .read = read_optimizer},
        /* stored as floats (optimizer_config) */
        {"lr", OPTION_NUMBER, .to = &lr, .lo = 0, .hi = 1e6,
         .how = NUMBER_ABOVE_LO | NUMBER_IN_FLOAT},
        {"momentum", OPTION_NUMBER, .to = &momentum, .lo = 0, .hi = 0.999999,
         .how = NUMBER_IN_FLOAT},
        {"weight-decay", OPTION_NUMBER, .to = &decay, .lo = 0, .hi = 1, .how = NUMBER_IN_FLOAT},
        {"seed", OPTION_READ, .to = &seed, .lo = 0, .hi = 9007199254740992.0, .read = read_seed},
        {"no-shuffle", OPTION_CLEAR, .to = &cfg->shuffle},
        {"init-params", OPTION_READ, .to = cfg->init_params, .read = read_path},
        {"save-params", OPTION_READ, .to = cfg->save_params, .read = read_path},
        {"out", OPTION_READ, .to = cfg->out_dir, .read = read_out},
        {"threads", OPTION_INT, .to = &cfg->engine.threads, .lo = 1, .hi = 1024},
        {"device", OPTION_INT, .to = &cfg->engine.device, .lo = 0, .hi = 1023},
        {"precision", OPTION_READ, .to = cfg, .read = read_precisions},
        {"cuda-graph", OPTION_READ, .to = &cfg->engine.cuda_graph, .read = read_on_off},
        {"data-on-device", OPTION_READ, .to = &cfg->engine.data_on_device, .read = read_on_off},
        {"repeat", OPTION_INT, .to = &cfg->repeat, .lo = 1, .hi = 1000},
        {"profile-layers", OPTION_SET, .to = &cfg->profile_layers},
        {"no-peak", OPTION_SET, .to = &cfg->no_peak},
        {"target-accuracy", OPTION_NUMBER, .to = &cfg->target_accuracy, .lo = 0, .hi = 1,
         .how = NUMBER_ABOVE_LO},
        {"format", OPTION_READ, .to = &fmt, .read = read_format},
        {"replicas", OPTION_READ, .to = &replicas, .lo = 1, .hi = DP_MAX_REPLICAS,
         .read = read_whole_list},
        {"gpus", OPTION_INT, .to = &cfg->gpus, .lo = 1, .hi = DP_MAX_REPLICAS},
        {"averaging-frequency", OPTION_INT, .to = &cfg->averaging_frequency, .lo = 0,
         .hi = 1000000},
        {"average-optimizer-state", OPTION_SET, .to = &cfg->average_optimizer_state},
        {"step-losses", OPTION_READ, .to = cfg->step_losses, .read = read_path},
        {"parallel", OPTION_READ, .to = cfg, .read = read_parallel},
        {"split", OPTION_READ, .to = &model, .read = read_split},
        {"workers", OPTION_READ, .to = &model, .lo = 1, .hi = MP_MAX_WORKERS,
         .read = read_workers},
        {"groups", OPTION_READ, .to = &model, .lo = 1, .hi = DP_MAX_REPLICAS,
         .read = read_groups},
        {"micro-batches", OPTION_READ, .to = &micro_batches, .lo = 1, .hi = MP_MAX_MICRO_BATCHES,
         .read = read_whole_list},
        {"prefetch", OPTION_READ, .to = &prefetch, .lo = 0, .hi = 64, .read = read_whole_list},
        {"list", OPTION_DO, .read = do_list},
        {"help", OPTION_HELP, .print = usage},
        {.name = NULL},
    };
    int rc = options_read(&(option_command){.entries = options, .values_are_not_options = 1},
                          argc, argv);
    if (rc == OPTIONS_DONE)
        return 1; /* --list or --help did the work */
    if (rc)
        return rc;
    if (optind < argc)
        return usage_error("unexpected argument '%s'%s", argv[optind], "");
    if (cfg->hybrid_parallel && (cfg->workers % cfg->groups || cfg->workers < cfg->groups))
        return usage_error("--parallel hybrid needs --workers to be a multiple of --groups "
                           "(each group holds --workers / --groups workers)%s%s", "", "");
    if (model.first && !cfg->model_parallel && !cfg->hybrid_parallel)
        return usage_error("--%s applies to model parallelism: add --parallel model (or hybrid), "
                           "or leave --%s out", model.first, model.first);
    if (model.groups_given && !cfg->hybrid_parallel)
        return usage_error("--groups applies to --parallel hybrid only%s%s", "", "");
    if (cfg->hybrid_parallel && cfg->groups == 1)
        return usage_error("--parallel hybrid with --groups 1 is one model-parallel group: the "
                           "training, and the row's name and key, of --parallel model; give "
                           "--groups 2 or more, or use --parallel model%s%s", "", "");
    if (cfg->hybrid_parallel && cfg->averaging_frequency)
        return usage_error("--parallel hybrid all-reduces gradients every step; leave out "
                           "--averaging-frequency%s%s", "", "");
    if (cfg->average_optimizer_state && cfg->averaging_frequency == 0)
        return usage_error("--average-optimizer-state needs --averaging-frequency K > 0%s%s", "",
                           "");
    if (workload_get(workload_name, &cfg->work) != 0) {
        char names[256];
        workload_names(names, sizeof names);
        fprintf(stderr, "bench: unknown workload '%s'; choose one of: %s\n", workload_name,
                names);
        return 2;
    }
    if ((rc = parse_backends(backend_list, cfg)))
        return rc;
    if (no_peers && (rc = drop_peers(cfg)))
        return rc;
    if (cfg->averaging_frequency && !several_replicas(cfg))
        return usage_error("--averaging-frequency averages replicas, and every configuration "
                           "has one: add --replicas N (N > 1), multi-gpu, or mpirun -np N%s%s",
                           "", "");
    if ((rc = check_peer_timeout(cfg)))
        return rc;
    if (!cfg->no_peak && (rc = peak_check_round_seconds(NULL)))
        return rc;
    char isa_why[256]; /* a LENET_BENCH_DIRECT_ISA that names no build */
    if (direct_isa_check(isa_why, sizeof isa_why))
        return usage_error("%s%s", isa_why, "");

    warn_threads_beyond_cores(cfg->engine.threads);
    const workload *w = &cfg->work;
    cfg->epochs = epochs > 0 ? epochs : w->default_epochs;
    if (cfg->n_batch_sizes == 0)
        cfg->batch_sizes[cfg->n_batch_sizes++] = w->default_batch_size;
    cfg->seed = seed >= 0 ? (uint64_t)seed : w->default_seed;
    cfg->format = (output_format)fmt;
    optimizer_config *opt = &cfg->engine.opt;
    opt->kind = (optimizer_kind)optimizer;
    opt->lr = (float)(lr > 0 ? lr : optimizer == OPT_ADAM ? 0.001 : w->default_lr);
    opt->momentum = (float)(momentum >= 0 ? momentum : w->default_momentum);
    opt->weight_decay = (float)(decay >= 0 ? decay : w->default_weight_decay);
    opt->beta1 = 0.9f;
    opt->beta2 = 0.999f;
    opt->eps = 1e-8f;
    if (cfg->n_precisions == 0)
        cfg->precisions[cfg->n_precisions++] = PREC_FP32;
    return 0;
}

int cli_check_against_data(const run_config *cfg, int train_count, int test_count)
{
    if (cfg->limit > train_count) {
        fprintf(stderr, "bench: --limit %d is beyond the %d training images in %s\n",
                cfg->limit, train_count, cfg->data_dir);
        return 2;
    }
    if (cfg->test_limit > test_count) {
        fprintf(stderr, "bench: --test-limit %d is beyond the %d test images in %s\n",
                cfg->test_limit, test_count, cfg->data_dir);
        return 2;
    }
    int n = cfg->limit ? cfg->limit : train_count;
    int largest = cfg->batch_sizes[cfg->n_batch_sizes - 1];
    if (largest > n) {
        fprintf(stderr, "bench: --batch-size %d is larger than the %d training images\n",
                largest, n);
        return 2;
    }
    return 0;
}
