/* The parent of `./bench count`: runs this program again as the child
 * under callgrind, reads the dumps back and writes counts.csv. */
#include "harness/tools/count_run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/formats/csv.h"
#include "harness/run/config.h"
#include "harness/tools/children.h"
#include "harness/tools/count.h"


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
        /* and waits without spinning: a spin loop's instructions would be
         * counted, as many as the wait happened to last */
        setenv("GOMP_SPINCOUNT", "0", 1);
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

int parent_main(const count_options *o)
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
