/* Framework peers: PyTorch on the CPU and on a GPU as engines.
 *
 * Each engine is backends/peer/train.py in its serve mode, run as a child
 * process and driven over a socket pair with the commands that script
 * documents (serve()): the same flat parameters, data set, batch indices and
 * evaluation as any backend, so the harness times and records PyTorch
 * exactly as it does the suite's own engines. Nothing here links torch.
 *
 * The child is watched like untrusted input: every answer is awaited with
 * a deadline scaled to the work asked (LENET_BENCH_PEER_TIMEOUT seconds plus
 * a generous allowance per image), an answer that is not the protocol's, a
 * child that exits or one that stops answering fails the engine with the
 * reason and the child's last stderr line, and the child is killed and
 * reaped. It runs in a process group of its own, out of reach of the
 * terminal's signals, so that an interrupted run stops it through the
 * harness (the call in flight finishes, then destroy), and the whole group
 * dies with ./bench however ./bench ends (a guard process; the child
 * itself also by PR_SET_PDEATHSIG), so nothing it started is left behind
 * (channel.c). destroy parks a healthy child for the next engine of
 * its kind (see parked_child); atexit stops it.
 *
 * Environment: LENET_BENCH_PYTHON (the interpreter; default: python3 on
 * PATH, then /usr/bin/python3, the first whose torch imports),
 * LENET_BENCH_PYTORCH_SCRIPT (the script; default backends/peer/train.py
 * beside the program or in the source tree), LENET_BENCH_PEER_TIMEOUT
 * (seconds every answer may take besides its per-image allowance; default
 * 120). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/common/library_arithmetic.h"
#include "backends/engine.h"
#include "backends/peer/channel.h"
#include "backends/peer/environment.h"
#include "backends/peer/probe.h"
#include "base/clock.h"

/* Allowances on top of the base timeout: far below what PyTorch does on
 * one slow CPU thread (thousands of images a second for LeNet) */
#define TRAIN_S_PER_IMAGE 0.01
#define EVAL_S_PER_IMAGE 0.005
#define DATA_BYTES_PER_S 10e6
/* torch.compile's first steps compile the model (inductor writes and
 * builds C++: tens of seconds, minutes on a loaded 2-core machine), and a
 * new batch shape (the short last batch) compiles again: a compiling
 * peer's train calls get this much more */
#define COMPILE_S 900.0

/* ---------------------------------------------------------------------- */
/* The engines                                                            */

typedef struct peer_kind {
    const char *name;
    int cuda;
    const char *mode; /* train.py --mode: eager, or compile (torch.compile) */
} peer_kind;

static const peer_kind cpu_kind = {"pytorch-cpu", 0, "eager"};
/* torch.compile on the CPU: a row of its own, its first epoch holding the
 * compile (epochs.csv), the warm-up epoch then left out of its median as
 * every row's is */
static const peer_kind compile_kind = {"pytorch-compile", 0, "compile"};
static const peer_kind cuda_kind = {"pytorch-cuda", 1, "eager"};

/* The engine behind the contract's opaque handle (peer_of). */
typedef struct peer_engine {
    const peer_kind *kind;
    channel ch;
    int alive; /* 0 once the child failed: every call then fails */
    size_t param_count;
    int classes;
    int threads;
    int device; /* GPU index (pytorch-cuda) */
    int train_count, test_count;
    char describe[1024]; /* train.py's own words: version, libraries, mode */
    char err[MSG_LEN];
    char line[LINE_MAX_LEN + 1]; /* the last answer */
    precision prec;
} peer_engine;

static inline peer_engine *peer_of(engine *e) { return (peer_engine *)e; }

static int peer_probe_fn(void *ctx, char *why, size_t why_len)
{
    const peer_kind *k = ctx;
    const peer_probe *p = probe_once();
    if (!p->ok) {
        snprintf(why, why_len, "%s", p->why);
        return 0;
    }
    if (k->cuda && p->gpus < 1) {
        snprintf(why, why_len, "PyTorch %s (%s) sees no CUDA device", p->version, p->python);
        return 0;
    }
    if (!strcmp(k->mode, "compile") && !p->compile) {
        snprintf(why, why_len, "PyTorch %s (%s): %s", p->version, p->python, p->no_compile);
        return 0;
    }
    return 1;
}

/* Marks the engine failed: the child is killed and reaped. */
static int fail_child(peer_engine *e, const char *what, wait_result w, const char *line,
                      double limit_s)
{
    char how[400];
    switch (w) {
    case TIMED_OUT:
        if (e->ch.signalled)
            snprintf(how, sizeof how, "gave no answer to %s after the run was interrupted; "
                                      "killed it", what);
        else
            snprintf(how, sizeof how, "gave no answer to %s within %.0f s; killed it", what,
                     limit_s);
        channel_reap(&e->ch, 0);
        break;
    case CLOSED:
        describe_exit(&e->ch, how, sizeof how);
        break;
    default:
        snprintf(how, sizeof how, "answered '%.120s' to %s, which is not the protocol; killed it",
                 line, what);
        channel_reap(&e->ch, 0);
        break;
    }
    snprintf(e->err, sizeof e->err, "%s: the PyTorch process %s", e->kind->name, how);
    e->alive = 0;
    return -1;
}

/* Sends a command line and its payload, then reads the answer line: 0 with
 * the text after "ok" in rest, or -1 (a child's "error" answer leaves it
 * alive). */
static int request(peer_engine *e, const char *what, const char *cmd, const void *const *parts,
                   const size_t *sizes, int n_parts, double limit_s, double *deadline, char *rest,
                   size_t rest_len)
{
    if (!e->alive)
        return -1;
    *deadline = now_seconds() + limit_s;
    wait_result w = channel_send(&e->ch, cmd, strlen(cmd), deadline);
    for (int i = 0; i < n_parts && w == READY; i++)
        w = channel_send(&e->ch, parts[i], sizes[i], deadline);
    char *line = e->line;
    line[0] = 0;
    if (w == READY)
        w = channel_line(&e->ch, line, sizeof e->line, deadline);
    if (w != READY)
        return fail_child(e, what, w, line, limit_s);
    if (!strncmp(line, "error ", 6)) {
        snprintf(e->err, sizeof e->err, "%s: PyTorch: %.400s", e->kind->name, line + 6);
        return -1;
    }
    if (strncmp(line, "ok", 2) || (line[2] && line[2] != ' '))
        return fail_child(e, what, BROKEN, line, limit_s);
    snprintf(rest, rest_len, "%s", line[2] ? line + 3 : "");
    return 0;
}

static int cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* One idle child per kind, kept by destroy for the next create on the same
 * device: torch's import (seconds) is then paid once per process, not once
 * per engine (the tests create dozens). The child has dropped its model
 * and data ("park"); it is stopped when ./bench exits. */
typedef struct parked_child {
    int valid;
    int device;
    channel ch;
} parked_child;

static parked_child parked[2]; /* by peer_kind.cuda */
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t park_exit_once = PTHREAD_ONCE_INIT;

static void stop_parked(void)
{
    for (int i = 0; i < 2; i++) {
        pthread_mutex_lock(&park_lock);
        parked_child p = parked[i];
        parked[i].valid = 0;
        pthread_mutex_unlock(&park_lock);
        if (!p.valid)
            continue;
        double deadline = now_seconds() + 1;
        channel_send(&p.ch, "quit\n", 5, &deadline);
        channel_close(&p.ch, EXIT_WAIT_S);
    }
}

static void register_stop_parked(void) { atexit(stop_parked); }

/* 1 when ch was parked (the slot owns it now). */
static int park(const peer_kind *k, int device, channel *ch)
{
    double deadline = now_seconds() + 1;
    if (ch->in_len != 0 || channel_send(ch, "park\n", 5, &deadline) != READY)
        return 0;
    pthread_once(&park_exit_once, register_stop_parked);
    pthread_mutex_lock(&park_lock);
    parked_child *slot = &parked[k->cuda];
    int taken = !slot->valid;
    if (taken)
        *slot = (parked_child){.valid = 1, .device = device, .ch = *ch};
    pthread_mutex_unlock(&park_lock);
    return taken;
}

/* The parked child of kind k on device, if any: 1 with it in ch. */
static int unpark(const peer_kind *k, int device, channel *ch)
{
    pthread_mutex_lock(&park_lock);
    parked_child *slot = &parked[k->cuda];
    int found = slot->valid && slot->device == device;
    if (found) {
        *ch = slot->ch;
        slot->valid = 0;
    }
    pthread_mutex_unlock(&park_lock);
    if (found) {
        ch->signalled = 0;
        ch->tail_len = 0;
    }
    return found;
}

static void destroy_peer(peer_engine *e)
{
    if (!e)
        return;
    if (e->alive && park(e->kind, e->device, &e->ch)) {
        free(e);
        return;
    }
    if (e->alive) {
        double deadline = now_seconds() + 1;
        channel_send(&e->ch, "quit\n", 5, &deadline);
    }
    channel_close(&e->ch, e->alive ? EXIT_WAIT_S : 0);
    free(e);
}

static void destroy(engine *handle) { destroy_peer(peer_of(handle)); }

/* Reads the child's first answer, ready<TAB>version<TAB>description, into
 * e->describe. */
static int read_ready(peer_engine *e, const char *what)
{
    double limit = base_timeout(), deadline = now_seconds() + limit;
    char *line = e->line;
    line[0] = 0;
    wait_result r = channel_line(&e->ch, line, sizeof e->line, &deadline);
    char *tab = r == READY ? strchr(line, '\t') : NULL;
    if (r == READY && (strncmp(line, "ready\t", 6) || !tab || !strchr(tab + 1, '\t')))
        r = BROKEN;
    if (r != READY)
        return fail_child(e, what, r, line, limit);
    snprintf(e->describe, sizeof e->describe, "%s", strchr(tab + 1, '\t') + 1);
    return 0;
}

/* The engine of a child ready for its configuration (its peak resident
 * memory is reset by the child itself at each config: train.py's
 * "memory"). */
static engine *started(peer_engine *e) { return (engine *)e; }

/* create's refusal: the reason in err, no engine. */
__attribute__((format(printf, 3, 4))) static engine *refuse(char *err, size_t err_len,
                                                            const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    return NULL;
}

static engine *peer_create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                           size_t err_len)
{
    const peer_kind *k = ctx;
    const peer_probe *p = probe_once();
    if (!p->ok)
        return refuse(err, err_len, "%s", p->why);
    if (k->cuda && cfg->device >= p->gpus)
        return refuse(err, err_len, "PyTorch sees %d CUDA device%s, no device %d", p->gpus,
                      p->gpus == 1 ? "" : "s", cfg->device);
    if (!k->cuda && cfg->precision == PREC_BF16 && !p->cpu_bf16)
        return refuse(err, err_len, "PyTorch %s (%s) has no CPU autocast to bf16", p->version,
                      p->python);
    if (cfg->precision != PREC_FP32 && !(k->cuda && cfg->precision == PREC_TF32) &&
        !(!k->cuda && cfg->precision == PREC_BF16))
        return refuse(err, err_len, "%s does not support --precision %s", k->name,
                      precision_name(cfg->precision));
    peer_engine *e = calloc(1, sizeof *e);
    if (!e)
        return refuse(err, err_len, "out of memory");
    e->kind = k;
    e->param_count = w->param_count;
    e->classes = w->classes;
    e->threads = k->cuda ? 1 : cfg->threads > 0 ? cfg->threads : cpu_count();
    e->prec = cfg->precision;
    e->device = cfg->device;
    const optimizer_config *o = &cfg->opt;
    static const char *const optimizers[] = {"sgd", "nesterov", "adam"};
    char batch[32], threads[32], device[32], lr[32], mom[32], wd[32], b1[32], b2[32], eps[32];
    snprintf(batch, sizeof batch, "%d", cfg->batch_size);
    snprintf(threads, sizeof threads, "%d", e->threads);
    snprintf(device, sizeof device, "%d", cfg->device);
    snprintf(lr, sizeof lr, "%.9g", o->lr);
    snprintf(mom, sizeof mom, "%.9g", o->momentum);
    snprintf(wd, sizeof wd, "%.9g", o->weight_decay);
    snprintf(b1, sizeof b1, "%.9g", o->beta1);
    snprintf(b2, sizeof b2, "%.9g", o->beta2);
    snprintf(eps, sizeof eps, "%.9g", o->eps);
    char *const argv[] = {
        (char *)p->python, (char *)p->script, "--serve",
        "--workload", (char *)w->name, "--batch-size", batch,
        "--optimizer", (char *)optimizers[o->kind], "--lr", lr, "--momentum", mom,
        "--weight-decay", wd, "--beta1", b1, "--beta2", b2, "--eps", eps,
        "--threads", threads, "--device", k->cuda ? "cuda" : "cpu", "--device-index", device,
        "--precision", (char *)precision_name(cfg->precision), "--mode", (char *)k->mode, NULL,
    };
    /* a parked child takes the same options as a config command */
    if (unpark(k, cfg->device, &e->ch)) {
        char cmd[1024];
        size_t used = (size_t)snprintf(cmd, sizeof cmd, "config");
        for (int i = 3; argv[i] && used < sizeof cmd; i++)
            used += (size_t)snprintf(cmd + used, sizeof cmd - used, " %s", argv[i]);
        e->alive = 1;
        if (used + 1 < sizeof cmd) {
            cmd[used++] = '\n';
            double deadline = now_seconds() + base_timeout();
            if (channel_send(&e->ch, cmd, used, &deadline) == READY &&
                read_ready(e, "config") == 0)
                return started(e);
        }
        /* gone or confused while parked: a fresh one */
        channel_reap(&e->ch, 0);
        channel_close(&e->ch, 0);
        e->alive = 0;
        e->err[0] = 0;
    }
    char why[256];
    if (channel_start(&e->ch, argv, peer_environment(), why, sizeof why) != 0) {
        snprintf(err, err_len, "%s: cannot start %s: %s", k->name, p->python, why);
        free(e);
        return NULL;
    }
    e->alive = 1;
    if (read_ready(e, "start-up") != 0) {
        snprintf(err, err_len, "%s", e->err);
        destroy_peer(e);
        return NULL;
    }
    return started(e);
}

static const char *error(engine *handle)
{
    return handle ? peer_of(handle)->err : "pytorch: no engine";
}

static int set_params(engine *handle, const float *params)
{
    peer_engine *e = peer_of(handle);
    const void *parts[] = {params};
    size_t sizes[] = {sizeof(float) * e->param_count};
    char rest[64];
    double deadline;
    return request(e, "params", "params\n", parts, sizes, 1, base_timeout(), &deadline, rest,
                   sizeof rest);
}

static int get_params(engine *handle, float *params)
{
    peer_engine *e = peer_of(handle);
    char rest[64];
    double limit = base_timeout(), deadline;
    if (request(e, "get", "get\n", NULL, NULL, 0, limit, &deadline, rest, sizeof rest) != 0)
        return -1;
    wait_result w = channel_bytes(&e->ch, params, sizeof(float) * e->param_count, &deadline);
    return w == READY ? 0 : fail_child(e, "get", w, "", limit);
}

static int bind_dataset(engine *handle, const dataset *train, const dataset *test)
{
    peer_engine *e = peer_of(handle);
    char cmd[128], rest[64];
    snprintf(cmd, sizeof cmd, "data %d %d %d %d\n", train->count, test->count, train->rows,
             train->cols);
    if (test->rows != train->rows || test->cols != train->cols) {
        snprintf(e->err, sizeof e->err, "%s: training and test images differ in size",
                 e->kind->name);
        return -1;
    }
    size_t px = (size_t)train->rows * train->cols;
    const void *parts[] = {train->images, train->labels, test->images, test->labels};
    size_t sizes[] = {px * train->count, (size_t)train->count, px * test->count,
                      (size_t)test->count};
    double bytes = (double)(sizes[0] + sizes[1] + sizes[2] + sizes[3]);
    double deadline;
    if (request(e, "data", cmd, parts, sizes, 4, base_timeout() + bytes / DATA_BYTES_PER_S,
                &deadline, rest, sizeof rest) != 0)
        return -1;
    e->train_count = train->count;
    e->test_count = test->count;
    return 0;
}

static int train_steps(engine *handle, const int32_t *indices, int batch, int steps, float *losses)
{
    peer_engine *e = peer_of(handle);
    char cmd[64], rest[64];
    snprintf(cmd, sizeof cmd, "train %d %d\n", batch, steps);
    const void *parts[] = {indices};
    size_t sizes[] = {sizeof(int32_t) * (size_t)batch * steps};
    double limit = base_timeout() + TRAIN_S_PER_IMAGE * batch * steps, deadline;
    if (!strcmp(e->kind->mode, "compile"))
        limit += COMPILE_S;
    if (request(e, "train", cmd, parts, sizes, 1, limit, &deadline, rest, sizeof rest) != 0)
        return -1;
    float *out = losses ? losses : malloc(sizeof(float) * (size_t)steps);
    if (!out) {
        snprintf(e->err, sizeof e->err, "%s: out of memory", e->kind->name);
        return -1;
    }
    wait_result w = channel_bytes(&e->ch, out, sizeof(float) * (size_t)steps, &deadline);
    /* a cross-entropy is never below 0 (NaN and Inf pass: divergence,
     * which the harness reports) */
    int negative = -1;
    for (int i = 0; i < steps && w == READY && negative < 0; i++)
        if (out[i] < 0)
            negative = i;
    char what[96];
    if (negative >= 0)
        snprintf(what, sizeof what, "train: a loss of %g at step %d, which a cross-entropy "
                 "cannot be", (double)out[negative], negative + 1);
    if (!losses)
        free(out);
    if (negative >= 0) {
        snprintf(e->err, sizeof e->err, "%s: the PyTorch process answered %s; killed it",
                 e->kind->name, what);
        channel_reap(&e->ch, 0);
        e->alive = 0;
        return -1;
    }
    return w == READY ? 0 : fail_child(e, "train", w, "", limit);
}

/* "COUNT LOSS_SUM CLASSES C00 C01 ..." into out; -1 if malformed. */
static int parse_eval(const char *s, int classes, long limit, eval_counts *out)
{
    char *end;
    errno = 0;
    long count = strtol(s, &end, 10);
    if (end == s || count < 0 || count > limit)
        return -1;
    s = end;
    double loss_sum = strtod(s, &end); /* NaN or Inf: divergence, which the harness reports */
    if (end == s || loss_sum < 0)
        return -1;
    s = end;
    long k = strtol(s, &end, 10);
    if (end == s || k != classes)
        return -1;
    s = end;
    long total = 0;
    for (int i = 0; i < classes * classes; i++) {
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || errno)
            return -1;
        out->confusion[i] = v;
        total += v;
        s = end;
    }
    while (*s == ' ')
        s++;
    if (*s || total != count)
        return -1;
    out->classes = classes;
    out->count = count;
    out->loss_sum = loss_sum;
    return 0;
}

static int evaluate(engine *handle, int limit, eval_counts *out)
{
    peer_engine *e = peer_of(handle);
    int n = limit <= 0 || limit > e->test_count ? e->test_count : limit;
    char cmd[64];
    char *rest = malloc(LINE_MAX_LEN + 1);
    if (!rest) {
        snprintf(e->err, sizeof e->err, "%s: out of memory", e->kind->name);
        return -1;
    }
    snprintf(cmd, sizeof cmd, "eval %d\n", n);
    double time_limit = base_timeout() + EVAL_S_PER_IMAGE * n, deadline;
    int rc = request(e, "eval", cmd, NULL, NULL, 0, time_limit, &deadline, rest,
                     LINE_MAX_LEN + 1);
    memset(out, 0, sizeof *out);
    if (rc == 0 && parse_eval(rest, e->classes, n, out) != 0)
        rc = fail_child(e, "eval", BROKEN, e->line, time_limit);
    free(rest);
    if (rc)
        return -1;
    return 0;
}

static void placement(engine *handle, int *threads, int *devices, int *replicas)
{
    peer_engine *e = peer_of(handle);
    *threads = e->threads;
    *devices = e->kind->cuda ? 1 : 0;
    *replicas = 1;
}

/* The child's own description (the rows' details then end with
 * setup_note's). */
static void peer_describe(engine *handle, char *buf, size_t len)
{
    snprintf(buf, len, "%s", peer_of(handle)->describe);
}

/* Under --list and at the end of the rows' details: the PyTorch found,
 * where from, its CPU libraries, and (CPU) the environment its process
 * starts in (the same in every run: environment.h). Only what an earlier
 * probe found: asking must not start python. */
static void setup_note(void *ctx, char *buf, size_t len)
{
    const peer_kind *k = ctx;
    char found[768], env[512] = "";
    probe_describe(found, sizeof found);
    if (!found[0]) {
        if (len)
            buf[0] = 0;
        return;
    }
    if (!k->cuda) {
        peer_environment(); /* (decided once; the probe already did) */
        peer_environment_describe(env, sizeof env);
    }
    snprintf(buf, len, "%s%s%s", found, env[0] ? "; " : "", env);
}

/* pytorch-cpu's memory is the framework's process's peak resident set
 * (VmHWM) since its configuration, which that process reports itself
 * ("memory"): the child ./bench started may be an interpreter wrapper
 * whose own few MB say nothing. 0 when it does not answer a number. */
static size_t child_peak_rss(engine *handle)
{
    peer_engine *e = peer_of(handle);
    char rest[64];
    double deadline;
    if (!e->alive || request(e, "memory", "memory\n", NULL, NULL, 0, base_timeout(), &deadline,
                             rest, sizeof rest) != 0)
        return 0;
    char *end;
    unsigned long long bytes = strtoull(rest, &end, 10);
    return end != rest && !*end ? (size_t)bytes : 0;
}

/* Only what an earlier probe found: asking must not start python. */
static void library_info(void *ctx, char *buf, size_t len)
{
    (void)ctx;
    const peer_probe p = probe_found();
    if (p.ok)
        snprintf(buf, len, "PyTorch %s (%s, %s)%s%s", p.version, p.source, p.python,
                 p.libraries[0] ? "; " : "", p.libraries);
    else if (len)
        buf[0] = 0;
}

/* The CPU peer reports the child's peak resident memory as its peak. */
#define PEER_OPS                                                                               \
    .destroy = destroy, .error = error, .set_params = set_params, .get_params = get_params,   \
    .bind_dataset = bind_dataset, .train_steps = train_steps, .evaluate = evaluate,           \
    .placement = placement, .describe = peer_describe
/* PyTorch's CPU bf16 convolutions and matrix products are oneDNN's */
static const char *cpu_arithmetic(engine *handle)
{
    return peer_of(handle)->prec == PREC_BF16 ? library_bf16_arithmetic() : ARITHMETIC_FP32;
}

static const engine_ops cpu_ops = {PEER_OPS, .peak_memory = child_peak_rss,
                                   .arithmetic = cpu_arithmetic};
static const engine_ops cuda_ops = {PEER_OPS};

/* No data-parallel entries and no stages: the child trains whole steps. */
#define PEER_ENTRIES                                                                           \
    .built = 1, .probe = peer_probe_fn, .create = peer_create, .library_info = library_info,    \
    .setup_note = setup_note

/* bf16 on the CPU is torch.autocast("cpu", dtype=torch.bfloat16), which
 * PyTorch has had since 1.10: the peer's probe line says whether it works. */
static int cpu_probe_precision(void *ctx, precision prec, char *why, size_t why_len)
{
    (void)ctx;
    if (prec != PREC_BF16 && prec != PREC_FP16)
        return 1;
    const peer_probe *p = probe_once();
    if (!p->ok) {
        snprintf(why, why_len, "%s", p->why);
        return 0;
    }
    if (prec == PREC_FP16) { /* the peer has no fp16 (GradScaler) path yet */
        snprintf(why, why_len, "PyTorch %s (%s) %s", p->version, p->python,
                 p->cpu_fp16 ? "has CPU autocast to fp16, but the peer has no fp16 loss scaling"
                             : "has no CPU autocast to fp16 (it supports only bf16)");
        return 0;
    }
    if (!p->cpu_bf16) {
        snprintf(why, why_len, "PyTorch %s (%s) has no CPU autocast to bf16", p->version,
                 p->python);
        return 0;
    }
    return 1;
}

const backend pytorch_cpu_backend = {
    .name = "pytorch-cpu",
    .summary = "framework peer: PyTorch on the CPU (backends/peer/train.py as a child process), "
               "fp32; bf16 by autocast",
    .precisions = 1u << PREC_FP32 | 1u << PREC_BF16 | 1u << PREC_FP16,
    .probe_precision = cpu_probe_precision,
    .ctx = (void *)&cpu_kind,
    .ops = &cpu_ops,
    PEER_ENTRIES,
};

const backend pytorch_compile_backend = {
    .name = "pytorch-compile",
    .summary = "framework peer: PyTorch on the CPU under torch.compile (inductor; its first "
               "epoch holds the compile), fp32; bf16 by autocast",
    .precisions = 1u << PREC_FP32 | 1u << PREC_BF16 | 1u << PREC_FP16,
    .probe_precision = cpu_probe_precision,
    .ctx = (void *)&compile_kind,
    .ops = &cpu_ops,
    PEER_ENTRIES,
};

const backend pytorch_cuda_backend = {
    .name = "pytorch-cuda",
    .summary = "framework peer: PyTorch on one GPU (backends/peer/train.py as a child process)",
    .precisions = 1u << PREC_FP32 | 1u << PREC_TF32,
    .ctx = (void *)&cuda_kind,
    .ops = &cuda_ops,
    PEER_ENTRIES,
};

