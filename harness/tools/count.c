/* `./bench count`: see count.h. The command re-runs this same executable
 * under `valgrind --tool=callgrind --instr-atstart=no` as a child (the
 * hidden `--child` mode); the child switches instrumentation on around each
 * item only and dumps the counts with the item's name, and the parent
 * reads the dumps back and writes counts.csv. */
#include "harness/tools/count.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HAVE_CALLGRIND_H 1
#endif
#endif

#include "backends/engine.h"
#include "backends/registry.h"
#include "harness/formats/csv.h"
#include "harness/formats/fileio.h"
#include "harness/formats/idx.h"
#include "harness/run/config.h"
#include "harness/run/init.h"
#include "harness/run/options.h"
#include "harness/run/sysinfo.h"
#include "harness/tools/children.h"

#ifndef COUNT_BUILD_FLAGS
#define COUNT_BUILD_FLAGS "unknown flags"
#endif

#define MAX_ITEMS 16
#define ITEM_LEN 40
#define DEFAULT_BLAS_CORE "Sandybridge"

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

typedef struct count_options {
    char items[MAX_ITEMS][ITEM_LEN];
    int n_items;
    int steps, batch, eval_images;
    workload work;
    const char *data_dir, *out_dir, *blas_core, *valgrind;
    const char *child_meta; /* set in the child: where to write what it ran */
} count_options;

/* ---- the child: runs the items under callgrind ---------------------------- */

/* What the CPU says it is through CPUID: under valgrind, the CPU valgrind
 * presents to the program (glibc and OpenBLAS choose their code by it). */
static void cpuid_brand(char *out, size_t len)
{
    snprintf(out, len, "unknown");
#if defined(__x86_64__) || defined(__i386__)
    unsigned r[12], max = __get_cpuid_max(0x80000000u, NULL);
    if (max < 0x80000004u)
        return;
    for (unsigned i = 0; i < 3; i++)
        __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
    char brand[49];
    memcpy(brand, r, 48);
    brand[48] = 0;
    const char *b = brand;
    while (*b == ' ')
        b++;
    snprintf(out, len, "%s", b);
#endif
}

static int item_index(const count_options *o, const char *name)
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
    if (!losses || b->set_params(e, params) != 0 || b->bind_dataset(e, train, test) != 0) {
        fprintf(stderr, "bench count: %s: setup: %s\n", name, losses ? b->error(e) : "out of memory");
        rc = -1;
        goto done;
    }
    /* One warm-up step: first touches and the library's own set-up stay
     * out of the counts, so a count is steps times one step. */
    if (b->train_steps(e, order, o->batch, 1, losses) != 0) {
        fprintf(stderr, "bench count: %s: train: %s\n", name, b->error(e));
        rc = -1;
        goto done;
    }
    if (want_train) {
        REGION_BEGIN();
        int failed = b->train_steps(e, order + o->batch, o->batch, o->steps, losses);
        REGION_END(train_item);
        if (failed || !all_finite(losses, o->steps)) {
            fprintf(stderr, "bench count: %s: train: %s\n", name,
                    failed ? b->error(e) : "loss became NaN or Inf");
            rc = -1;
            goto done;
        }
        fprintf(meta, "item %s %ld %d\n", train_item, (long)o->steps * o->batch, o->steps);
    }
    if (want_eval) {
        eval_counts ev;
        int failed = b->evaluate(e, 1, &ev); /* warm-up */
        if (!failed) {
            REGION_BEGIN();
            failed = b->evaluate(e, o->eval_images, &ev);
            REGION_END(eval_item);
        }
        if (failed || ev.count != o->eval_images) {
            fprintf(stderr, "bench count: %s: evaluate: %s\n", name,
                    failed ? b->error(e) : "scored a different number of images");
            rc = -1;
            goto done;
        }
        fprintf(meta, "item %s %d 0\n", eval_item, o->eval_images);
    }
done:
    free(losses);
    b->destroy(e);
    return rc;
}

static int child_main(const count_options *o)
{
    FILE *meta = fopen(o->child_meta, "w");
    if (!meta) {
        fprintf(stderr, "bench count: cannot write %s: %s\n", o->child_meta, strerror(errno));
        return 1;
    }
    sysinfo sys;
    sysinfo_collect(&sys);
    char cpu[64];
    cpuid_brand(cpu, sizeof cpu);
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

/* ---- the parent: runs valgrind and collects the dumps ---------------------- */

/* Copies src into dst[len], cut short when it does not fit. */
static void copy_text(char *dst, size_t len, const char *src)
{
    size_t n = strlen(src);
    if (n >= len)
        n = len - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* Runs argv with stdout and stderr into log_path (or a pipe read into out
 * when out is given); returns the exit status, or -1 when it could not run. */
static int run_program(char *const argv[], const char *coretype, const char *log_path,
                       char *out, size_t out_len)
{
    int fds[2] = {-1, -1};
    if (out && pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = out ? fds[1] : open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (fd < 0)
            _exit(127);
        dup2(fd, 1);
        dup2(fd, 2);
        /* The count's own controlled run picks its OpenBLAS kernels; the
         * benchmark and the tests never do. */
        if (coretype)
            setenv("OPENBLAS_CORETYPE", coretype, 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    if (out) {
        close(fds[1]);
        size_t n = 0;
        ssize_t got;
        while ((got = read(fds[0], out + n, out_len - 1 - n)) > 0 && n + (size_t)got < out_len - 1)
            n += (size_t)got;
        if (got > 0)
            n += (size_t)got;
        out[n] = 0;
        out[strcspn(out, "\n")] = 0;
        close(fds[0]);
    }
    int status = 0;
    if (children_wait(pid, &status) != 0)
        return -1;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* The Ir total and the trigger of one callgrind dump. */
static int read_dump(const char *path, char *trigger, size_t trigger_len, double *ir)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[4096];
    trigger[0] = 0;
    *ir = -1;
    static const char desc[] = "desc: Trigger: Client Request: ";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, desc, sizeof desc - 1))
            copy_text(trigger, trigger_len, line + sizeof desc - 1);
        else if (!strncmp(line, "summary: ", 9) || !strncmp(line, "totals: ", 8))
            *ir = strtod(strchr(line, ' ') + 1, NULL);
    }
    fclose(f);
    return 0;
}

typedef struct counted {
    char item[ITEM_LEN];
    long images;
    int steps;
    double instructions;
} counted;

typedef struct count_meta {
    char commit[64], compiler[160], build[160], cpu_seen[64], host_cpu[256], blas[256],
        coretype[64];
    counted items[MAX_ITEMS];
    int n_items;
} count_meta;

static int read_meta(const char *path, count_meta *m)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    memset(m, 0, sizeof *m);
    char line[1024];
    struct {
        const char *key;
        char *dst;
        size_t len;
    } fields[] = {
        {"commit=", m->commit, sizeof m->commit},
        {"compiler=", m->compiler, sizeof m->compiler},
        {"build=", m->build, sizeof m->build},
        {"cpu_seen=", m->cpu_seen, sizeof m->cpu_seen},
        {"host_cpu=", m->host_cpu, sizeof m->host_cpu},
        {"blas=", m->blas, sizeof m->blas},
        {"openblas_coretype=", m->coretype, sizeof m->coretype},
    };
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++)
            if (!strncmp(line, fields[k].key, strlen(fields[k].key)))
                copy_text(fields[k].dst, fields[k].len, line + strlen(fields[k].key));
        counted c = {.instructions = -1};
        if (m->n_items < MAX_ITEMS &&
            sscanf(line, "item %39s %ld %d", c.item, &c.images, &c.steps) == 3)
            m->items[m->n_items++] = c;
    }
    fclose(f);
    return 0;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        char path[PATH_LEN + 300];
        while ((de = readdir(d)))
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
                snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
                unlink(path);
            }
        closedir(d);
    }
    rmdir(dir);
}

static void print_file(const char *path, FILE *to)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, to);
    fclose(f);
}

/* Fills the instruction counts of m's items from the dumps in dir. */
static int collect_dumps(const char *dir, count_meta *m)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *de;
    char path[PATH_LEN + 300], trigger[256];
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "callgrind.out", 13))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        double ir;
        if (read_dump(path, trigger, sizeof trigger, &ir) != 0)
            continue;
        for (int i = 0; i < m->n_items; i++)
            if (!strcmp(m->items[i].item, trigger))
                m->items[i].instructions = ir;
    }
    closedir(d);
    for (int i = 0; i < m->n_items; i++)
        if (m->items[i].instructions < 0) {
            fprintf(stderr, "bench count: no callgrind dump for %s\n", m->items[i].item);
            return -1;
        }
    return 0;
}

static const char *const count_columns[] = {
    "item", "workload", "batch", "steps", "images", "instructions", "instructions_per_image",
    "commit", "date", "compiler", "build", "blas", "openblas_coretype", "cpu_seen", "valgrind",
    "host_cpu", NULL,
};

static int write_counts(const char *path, const count_options *o, const count_meta *m,
                        const char *valgrind_version)
{
    FILE *f = fopen(path, "wx");
    if (!f) {
        fprintf(stderr, "bench count: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    for (int i = 0; count_columns[i]; i++)
        fprintf(f, "%s%s", i ? "," : "", count_columns[i]);
    fputc('\n', f);
    char date[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    for (int i = 0; i < m->n_items; i++) {
        const counted *c = &m->items[i];
        int is_train = !strncmp(c->item, "train-", 6);
        fprintf(f, "%s,%s,%d,%d,%ld,%.0f,%.1f,", c->item, o->work.name, is_train ? o->batch : 0,
                c->steps, c->images, c->instructions, c->instructions / (double)c->images);
        const char *text[] = {m->commit, date, m->compiler, m->build, m->blas, m->coretype,
                              m->cpu_seen, valgrind_version, m->host_cpu};
        for (size_t k = 0; k < sizeof text / sizeof text[0]; k++) {
            if (k)
                fputc(',', f);
            csv_field(f, text[k]);
        }
        fputc('\n', f);
    }
    return fclose(f) == 0 ? 0 : -1;
}

static int parent_main(const count_options *o)
{
#ifndef HAVE_CALLGRIND_H
    fprintf(stderr, "bench count: this build has no <valgrind/callgrind.h> (apt-get install valgrind, then rebuild)\n");
    return 3;
#endif
#ifdef __AVX512F__
    fprintf(stderr, "bench count: this build targets AVX-512, which valgrind cannot decode; "
                    "count with `make count` (an x86-64-v3 build)\n");
    return 3;
#endif
    char version[128];
    char *version_argv[] = {(char *)o->valgrind, "--version", NULL};
    if (run_program(version_argv, NULL, NULL, version, sizeof version) != 0 || !version[0]) {
        fprintf(stderr, "bench count: cannot run %s (apt-get install valgrind)\n", o->valgrind);
        return 3;
    }
    char self[PATH_LEN];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "bench count: cannot find this program's path: %s\n", strerror(errno));
        return 1;
    }
    self[n] = 0;

    char out_dir[PATH_LEN];
    if (o->out_dir) {
        snprintf(out_dir, sizeof out_dir, "%s", o->out_dir);
    } else {
        char stamp[32];
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        mkdir("results", 0777);
        snprintf(out_dir, sizeof out_dir, "results/count-%s", stamp);
    }
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "bench count: cannot create %s: %s\n", out_dir, strerror(errno));
        return 2;
    }
    char counts_path[PATH_LEN + 32];
    snprintf(counts_path, sizeof counts_path, "%s/" COUNT_FILE, out_dir);
    if (access(counts_path, F_OK) == 0) {
        fprintf(stderr, "bench count: %s exists; pick a new --out\n", counts_path);
        return 2;
    }

    char tmp[] = "/tmp/bench-count.XXXXXX";
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "bench count: cannot make a temporary directory: %s\n", strerror(errno));
        return 1;
    }
    char out_file[64], meta_path[64], log_path[64], steps[16], batch[16], eval[16],
        items[MAX_ITEMS * ITEM_LEN] = "";
    snprintf(out_file, sizeof out_file, "--callgrind-out-file=%s/callgrind.out", tmp);
    snprintf(meta_path, sizeof meta_path, "%s/meta", tmp);
    snprintf(log_path, sizeof log_path, "%s/log", tmp);
    snprintf(steps, sizeof steps, "%d", o->steps);
    snprintf(batch, sizeof batch, "%d", o->batch);
    snprintf(eval, sizeof eval, "%d", o->eval_images);
    for (int i = 0; i < o->n_items; i++)
        snprintf(items + strlen(items), sizeof items - strlen(items), "%s%s", i ? "," : "",
                 o->items[i]);
    char *argv[] = {(char *)o->valgrind, "--tool=callgrind", "--instr-atstart=no", out_file,
                    "-q", self, "count", "--child", meta_path,
                    "--items", items, "--steps", steps, "--batch-size", batch,
                    "--eval-images", eval, "--workload", (char *)o->work.name, "--data",
                    (char *)o->data_dir, NULL};
    const char *coretype = strcmp(o->blas_core, "native") ? o->blas_core : NULL;
    fprintf(stderr, "bench count: %s under callgrind (%s), %d step%s of batch %d, "
                    "OPENBLAS_CORETYPE=%s for the counted run\n",
            items, version, o->steps, o->steps == 1 ? "" : "s", o->batch,
            coretype ? coretype : "(as the environment is)");
    int status = run_program(argv, coretype, log_path, NULL, 0);
    count_meta m;
    int rc = 0;
    if (children_signal()) {
        fprintf(stderr, "bench count: stopped by signal %d; nothing counted\n",
                children_signal());
        rc = 128 + children_signal();
    } else if (status != 0) {
        fprintf(stderr, "bench count: the counted run under valgrind failed (exit status %d):\n",
                status);
        print_file(log_path, stderr);
        rc = status == 2 ? 2 : 1;
    } else if (read_meta(meta_path, &m) != 0 || collect_dumps(tmp, &m) != 0) {
        fprintf(stderr, "bench count: the counted run left no usable record\n");
        print_file(log_path, stderr);
        rc = 1;
    } else if (write_counts(counts_path, o, &m, version) != 0) {
        rc = 1;
    } else {
        printf("| item | images | instructions | instructions per image |\n|---|---:|---:|---:|\n");
        for (int i = 0; i < m.n_items; i++)
            printf("| %s | %ld | %.0f | %.0f |\n", m.items[i].item, m.items[i].images,
                   m.items[i].instructions, m.items[i].instructions / (double)m.items[i].images);
        printf("\ncommit %s, %s, %s, blas: %s, CPU as valgrind presents it: %s\n", m.commit,
               m.compiler, m.build, m.blas, m.cpu_seen);
        fprintf(stderr, "counts in %s\n", counts_path);
    }
    remove_dir(tmp);
    return rc;
}

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

static int parse_items(count_options *o, const char *list)
{
    char buf[MAX_ITEMS * ITEM_LEN];
    if (strlen(list) >= sizeof buf) {
        fprintf(stderr, "bench count: --items: list too long\n");
        return 2;
    }
    snprintf(buf, sizeof buf, "%s", list);
    o->n_items = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int ok = !strcmp(t, "load");
        if (!strncmp(t, "train-", 6) || !strncmp(t, "eval-", 5))
            ok = backend_find(strchr(t, '-') + 1) != NULL;
        if (ok && item_index(o, t) >= 0) {
            fprintf(stderr, "bench count: --items: '%s' is listed twice\n", t);
            return 2;
        }
        if (!ok || strlen(t) >= ITEM_LEN || o->n_items == MAX_ITEMS) {
            fprintf(stderr, "bench count: --items: '%s' is not an item (load, train-NAME, "
                            "eval-NAME with NAME a backend, each once)\n", t);
            return 2;
        }
        snprintf(o->items[o->n_items++], ITEM_LEN, "%s", t);
    }
    if (!o->n_items) {
        fprintf(stderr, "bench count: --items: empty list\n");
        return 2;
    }
    return 0;
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
    enum { O_ITEMS = 256, O_STEPS, O_BATCH, O_EVAL, O_WORKLOAD, O_DATA, O_OUT, O_CORE,
           O_VALGRIND, O_CHILD, O_HELP };
    static const struct option options[] = {
        {"items", required_argument, 0, O_ITEMS},
        {"steps", required_argument, 0, O_STEPS},
        {"batch-size", required_argument, 0, O_BATCH},
        {"eval-images", required_argument, 0, O_EVAL},
        {"workload", required_argument, 0, O_WORKLOAD},
        {"data", required_argument, 0, O_DATA},
        {"out", required_argument, 0, O_OUT},
        {"blas-core", required_argument, 0, O_CORE},
        {"valgrind", required_argument, 0, O_VALGRIND},
        {"child", required_argument, 0, O_CHILD},
        {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0},
    };
    const char *cmd = "count";
    options_begin();
    int c, rc = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        switch (c) {
        case O_ITEMS: items = optarg; break;
        case O_STEPS: rc = option_int(cmd, "--steps", optarg, 1, 1000, &o.steps); break;
        case O_BATCH: rc = option_int(cmd, "--batch-size", optarg, 1, 4096, &o.batch); break;
        case O_EVAL: rc = option_int(cmd, "--eval-images", optarg, 1, 10000, &o.eval_images); break;
        case O_WORKLOAD: workload_name = optarg; break;
        case O_DATA: o.data_dir = optarg; break;
        case O_OUT: o.out_dir = optarg; break;
        case O_CORE: o.blas_core = optarg; break;
        case O_VALGRIND: o.valgrind = optarg; break;
        case O_CHILD: o.child_meta = optarg; break;
        case O_HELP: count_usage(stdout); return 0;
        default: return option_error(cmd, options, c, argv);
        }
    }
    if (rc)
        return rc;
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
        if ((rc = parse_items(&o, items)) != 0)
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

/* ---- compare and history ------------------------------------------------------- */

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int count_path(const char *arg, char *path, size_t len)
{
    size_t n = strlen(arg), suffix = strlen(COUNT_FILE);
    if (!is_dir(arg)) /* counts.csv, or a copy named like base-counts.csv */
        return n >= suffix && !strcmp(arg + n - suffix, COUNT_FILE) &&
               snprintf(path, len, "%s", arg) < (int)len;
    return snprintf(path, len, "%s/" COUNT_FILE, arg) < (int)len && access(path, F_OK) == 0;
}

int count_only(const char *arg)
{
    char path[PATH_LEN + 32];
    if (!count_path(arg, path, sizeof path))
        return 0;
    if (!is_dir(arg))
        return 1;
    snprintf(path, sizeof path, "%s/summary.csv", arg);
    return access(path, F_OK) != 0;
}

/* What must be the same for two counts to be comparable: the code counted
 * depends on the compiler and target, OpenBLAS's version and kernels, and
 * the CPU valgrind presents (glibc picks its string functions by it). */
static const char *const setting_columns[] = {
    "compiler", "build", "blas", "openblas_coretype", "cpu_seen", "valgrind", NULL,
};

typedef struct count_table {
    csv_table t;
    int item, workload, batch, per_image, commit, date;
    int settings[8];
} count_table;

static int open_counts(const char *label, const char *path, count_table *c)
{
    char err[PATH_LEN + 256];
    if (csv_read(path, &c->t, err, sizeof err) != 0) {
        fprintf(stderr, "bench compare: %s: %s\n", label, err);
        return -1;
    }
    struct {
        const char *name;
        int *col;
    } need[] = {
        {"item", &c->item}, {"workload", &c->workload}, {"batch", &c->batch},
        {"instructions_per_image", &c->per_image}, {"commit", &c->commit}, {"date", &c->date},
    };
    for (size_t k = 0; k < sizeof need / sizeof need[0]; k++)
        if ((*need[k].col = csv_column(&c->t, need[k].name)) < 0) {
            fprintf(stderr, "bench compare: %s: %s: no column '%s' in the header\n", label, path,
                    need[k].name);
            return -1;
        }
    for (int k = 0; setting_columns[k]; k++)
        if ((c->settings[k] = csv_column(&c->t, setting_columns[k])) < 0) {
            fprintf(stderr, "bench compare: %s: %s: no column '%s' in the header\n", label, path,
                    setting_columns[k]);
            return -1;
        }
    if (c->t.n_rows == 0) {
        fprintf(stderr, "bench compare: %s: %s has no rows\n", label, path);
        return -1;
    }
    for (int r = 0; r < c->t.n_rows; r++) {
        char *end;
        double v = strtod(c->t.rows[r][c->per_image], &end);
        if (end == c->t.rows[r][c->per_image] || *end || !(v > 0) || !isfinite(v)) {
            fprintf(stderr, "bench compare: %s: %s:%d: instructions_per_image '%s' is not a "
                            "positive number\n",
                    label, path, c->t.lines[r], c->t.rows[r][c->per_image]);
            return -1;
        }
        for (int k = 0; setting_columns[k]; k++)
            if (strcmp(c->t.rows[r][c->settings[k]], c->t.rows[0][c->settings[k]])) {
                fprintf(stderr, "bench compare: %s: %s:%d: %s differs from the first row's; "
                                "not one count\n",
                        label, path, c->t.lines[r], setting_columns[k]);
                return -1;
            }
    }
    return 0;
}

int count_compare(const char *base_path, const char *new_path, double max_growth_pct)
{
    count_table base = {0}, next = {0};
    int rc = 2;
    if (open_counts("BASE", base_path, &base) != 0 || open_counts("NEW", new_path, &next) != 0)
        goto done;
    const char *base_commit = base.t.rows[0][base.commit];
    for (int k = 0; setting_columns[k]; k++) {
        const char *b = base.t.rows[0][base.settings[k]], *n = next.t.rows[0][next.settings[k]];
        if (strcmp(b, n)) {
            printf("counts: NOT JUDGED: %s differs: BASE (commit %s) was counted with '%s', NEW "
                   "with '%s'. Counts depend on it, so they cannot be compared; count a baseline "
                   "with this %s (scripts/count-baseline) to judge.\n",
                   setting_columns[k], base_commit, b, n, setting_columns[k]);
            rc = 0;
            goto done;
        }
    }
    printf("counts: instructions per image (callgrind), BASE commit %s (%s) against NEW commit "
           "%s (%s); limit %+g%%\n",
           base_commit, base.t.rows[0][base.date], next.t.rows[0][next.commit],
           next.t.rows[0][next.date], max_growth_pct);
    printf("counted with %s, %s, %s, valgrind presenting %s\n\n", base.t.rows[0][base.settings[0]],
           base.t.rows[0][base.settings[1]], base.t.rows[0][base.settings[2]],
           base.t.rows[0][base.settings[4]]);
    printf("| item | BASE | NEW | change | verdict |\n|---|---:|---:|---:|---|\n");
    int regressions = 0, improvements = 0, compared = 0;
    char findings[MAX_ITEMS * 3][512];
    int n_findings = 0;
    int *paired = calloc((size_t)next.t.n_rows + 1, sizeof *paired);
    if (!paired) {
        fprintf(stderr, "bench compare: out of memory\n");
        goto done;
    }
    for (int i = 0; i < base.t.n_rows; i++) {
        char **b = base.t.rows[i];
        int j = 0;
        while (j < next.t.n_rows &&
               (paired[j] || strcmp(next.t.rows[j][next.item], b[base.item]) ||
                strcmp(next.t.rows[j][next.workload], b[base.workload]) ||
                strcmp(next.t.rows[j][next.batch], b[base.batch])))
            j++;
        if (j == next.t.n_rows) {
            if (n_findings < MAX_ITEMS * 3)
                snprintf(findings[n_findings++], 512, "NOTE %s (%s, batch %s): only in BASE; not compared",
                         b[base.item], b[base.workload], b[base.batch]);
            continue;
        }
        paired[j] = 1;
        compared++;
        double bv = strtod(b[base.per_image], NULL);
        double nv = strtod(next.t.rows[j][next.per_image], NULL);
        double change = (nv / bv - 1) * 100;
        const char *verdict = "same";
        if (change > max_growth_pct) {
            verdict = "REGRESSION";
            regressions++;
        } else if (change < -max_growth_pct) {
            verdict = "improved";
            improvements++;
        }
        printf("| %s | %.0f | %.0f | %+.3f%% | %s |\n", b[base.item], bv, nv, change, verdict);
        if (strcmp(verdict, "same") && n_findings < MAX_ITEMS * 3)
            snprintf(findings[n_findings++], 512,
                     "%s %s: %.0f -> %.0f instructions per image (%+.2f%%, limit %g%%) against "
                     "commit %s",
                     change > 0 ? "REGRESSION" : "IMPROVED", b[base.item], bv, nv, change,
                     max_growth_pct, base_commit);
    }
    for (int j = 0; j < next.t.n_rows; j++)
        if (!paired[j] && n_findings < MAX_ITEMS * 3)
            snprintf(findings[n_findings++], 512, "NOTE %s (%s, batch %s): only in NEW; not compared",
                     next.t.rows[j][next.item], next.t.rows[j][next.workload],
                     next.t.rows[j][next.batch]);
    free(paired);
    if (n_findings)
        printf("\n");
    for (int i = 0; i < n_findings; i++)
        printf("%s\n", findings[i]);
    if (compared == 0) {
        fprintf(stderr, "bench compare: no common items: %s and %s share no item (item, "
                        "workload, batch)\n", base_path, new_path);
        goto done;
    }
    rc = regressions ? 1 : 0;
    printf("\ncounts: %d item%s compared, %d regression%s, %d improvement%s -> exit %d\n",
           compared, compared == 1 ? "" : "s", regressions, regressions == 1 ? "" : "s",
           improvements, improvements == 1 ? "" : "s", rc);
done:
    csv_free(&base.t);
    csv_free(&next.t);
    return rc;
}

static const char *const history_columns[] = {
    "commit", "date", "item", "workload", "batch", "instructions_per_image", "compiler",
    "build", "blas", "cpu_seen", "run", NULL,
};

int count_history(const char *counts_path, const char *history_path, const char *run)
{
    count_table c = {0};
    csv_table h = {0};
    int rc = 2;
    FILE *out = NULL;
    if (open_counts("RUN", counts_path, &c) != 0)
        goto done;
    int n_cols = 0;
    while (history_columns[n_cols])
        n_cols++;
    struct stat st;
    int have = stat(history_path, &st) == 0 && st.st_size > 0;
    char err[PATH_LEN + 256];
    if (have) {
        if (csv_read(history_path, &h, err, sizeof err) != 0) {
            fprintf(stderr, "bench history: %s\n", err);
            goto done;
        }
        int same = h.n_cols == n_cols;
        for (int i = 0; same && i < n_cols; i++)
            same = !strcmp(h.header[i], history_columns[i]);
        if (!same) {
            fprintf(stderr, "bench history: %s:1: not the count history header; move it aside "
                            "or pick another --counts-file\n", history_path);
            goto done;
        }
    }
    out = fopen(history_path, "a");
    if (!out) {
        fprintf(stderr, "bench history: cannot append to %s: %s\n", history_path,
                strerror(errno));
        goto done;
    }
    if (!have) {
        for (int i = 0; i < n_cols; i++)
            fprintf(out, "%s%s", i ? "," : "", history_columns[i]);
        fputc('\n', out);
    } else if (!file_ends_with_newline(history_path)) {
        fputc('\n', out); /* a file edited by hand may lack its last newline */
    }
    int added = 0, known = 0;
    for (int r = 0; r < c.t.n_rows; r++) {
        const char *values[16];
        for (int i = 0; i < n_cols; i++) {
            int col = csv_column(&c.t, history_columns[i]);
            values[i] = !strcmp(history_columns[i], "run") ? run : col >= 0 ? c.t.rows[r][col] : "";
        }
        int seen = 0; /* same commit, date and item: recorded already */
        for (int k = 0; k < h.n_rows && !seen; k++)
            seen = !strcmp(h.rows[k][0], values[0]) && !strcmp(h.rows[k][1], values[1]) &&
                   !strcmp(h.rows[k][2], values[2]);
        if (seen) {
            known++;
            continue;
        }
        for (int i = 0; i < n_cols; i++) {
            if (i)
                fputc(',', out);
            csv_field(out, values[i]);
        }
        fputc('\n', out);
        added++;
    }
    int bad = fclose(out) != 0;
    out = NULL;
    if (bad) {
        fprintf(stderr, "bench history: cannot write %s: %s\n", history_path, strerror(errno));
        goto done;
    }
    printf("history: %d count row%s of %s appended to %s", added, added == 1 ? "" : "s", run,
           history_path);
    if (known)
        printf(", %d already there", known);
    printf("\n");
    rc = 0;
done:
    if (out)
        fclose(out);
    csv_free(&c.t);
    csv_free(&h);
    return rc;
}
