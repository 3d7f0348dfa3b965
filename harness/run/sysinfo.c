#include "harness/run/sysinfo.h"

#include <glob.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "backends/blas/kernel_choice.h"
#include "backends/common/openmp_setup.h"
#include "backends/peer/environment.h"
#include "backends/registry.h"
#include "base/alloc.h"
#include "base/cpu.h"
#include "harness/formats/csv.h"
#include "parallel/world.h"

#ifndef GIT_COMMIT
#define GIT_COMMIT "unknown"
#endif

#define APPEND(buf, used, ...)                                                                   \
    ((used) += (size_t)snprintf((buf) + ((used) < sizeof(buf) ? (used) : sizeof(buf) - 1),       \
                                (used) < sizeof(buf) ? sizeof(buf) - (used) : 1, __VA_ARGS__))

/* First "key : value" line of a /proc file whose key is `key`; lines may be
 * long. 0 when found. */
static int proc_field(const char *path, const char *key, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    int found = -1;
    size_t key_len = strlen(key);
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, key, key_len) != 0 || (line[key_len] != ' ' && line[key_len] != '\t' &&
                                                 line[key_len] != ':'))
            continue;
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        colon++;
        while (*colon == ' ' || *colon == '\t')
            colon++;
        colon[strcspn(colon, "\n")] = 0;
        snprintf(out, len, "%s", colon);
        found = 0;
        break;
    }
    free(line);
    fclose(f);
    return found;
}

/* The first line of a small file, without its newline. 0 when read. */
static int read_line(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fgets(out, (int)len, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    out[strcspn(out, "\n")] = 0;
    return 0;
}

static void read_caches(char *out, size_t len)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < 8; i++) {
        char path[128], level[16] = "", type[32] = "", size[32] = "";
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (read_line(path, level, sizeof level) != 0)
            break;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        read_line(path, type, sizeof type);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        read_line(path, size, sizeof size);
        const char *t = strcmp(type, "Data") == 0 ? "d" : strcmp(type, "Instruction") == 0 ? "i" : "";
        used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%sL%s%s %s",
                                 used ? ", " : "", level, t, size);
        if (used >= len)
            break;
    }
}

/* Physical cores: distinct (physical id, core id) pairs in /proc/cpuinfo. */
static int count_physical_cores(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    enum { MAX_PAIRS = 4096 };
    static long pairs[MAX_PAIRS];
    int n = 0;
    long package = 0;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "physical id", 11) == 0 && strchr(line, ':'))
            package = atol(strchr(line, ':') + 1);
        if (strncmp(line, "core id", 7) != 0 || !strchr(line, ':'))
            continue;
        long pair = package * 1000000 + atol(strchr(line, ':') + 1);
        int seen = 0;
        for (int i = 0; i < n && !seen; i++)
            seen = pairs[i] == pair;
        if (!seen && n < MAX_PAIRS)
            pairs[n++] = pair;
    }
    free(line);
    fclose(f);
    return n;
}

/* GPUs through the NVIDIA driver: nvidia-smi for model, memory and driver,
 * else the driver's /proc files. Nothing is spawned on a machine without
 * the driver. */
static void read_gpus(sysinfo *s)
{
    strcpy(s->gpu_model, "none");
    if (access("/proc/driver/nvidia", F_OK) != 0 && access("/dev/nvidiactl", F_OK) != 0)
        return;
    FILE *p = popen("nvidia-smi --query-gpu=name,memory.total,driver_version "
                    "--format=csv,noheader,nounits 2>/dev/null",
                    "r");
    if (p) {
        char line[512];
        while (fgets(line, sizeof line, p)) {
            char *name = strtok(line, ","), *mem = strtok(NULL, ","), *driver = strtok(NULL, ",\n");
            if (!name || !mem || !driver)
                continue;
            if (s->gpu_count++ == 0) {
                snprintf(s->gpu_model, sizeof s->gpu_model, "%s", name);
                s->gpu_memory_gib = atof(mem) / 1024.0; /* MiB */
                snprintf(s->gpu_driver, sizeof s->gpu_driver, "%s", driver + strspn(driver, " "));
            }
        }
        pclose(p);
    }
    if (s->gpu_count)
        return;
    glob_t g;
    if (glob("/proc/driver/nvidia/gpus/*/information", 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            char model[256];
            if (proc_field(g.gl_pathv[i], "Model", model, sizeof model) == 0 && s->gpu_count++ == 0)
                snprintf(s->gpu_model, sizeof s->gpu_model, "%s", model);
        }
        globfree(&g);
    }
    char version[256];
    if (read_line("/proc/driver/nvidia/version", version, sizeof version) == 0) {
        /* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  ..." */
        char *v = strstr(version, "Module");
        if (v && sscanf(v + 6, "%63s", s->gpu_driver) != 1)
            s->gpu_driver[0] = 0;
    }
}

static void read_build(char *out, size_t len)
{
    snprintf(out, len, "%s, %s%s",
#ifdef __OPTIMIZE__
             "optimised",
#else
             "unoptimised (-O0)",
#endif
#if defined(__AVX512F__)
             "AVX-512 target",
#elif defined(__AVX2__)
             "AVX2 target",
#elif defined(__aarch64__)
             "AArch64 target",
#else
             "baseline target",
#endif
#if defined(__SANITIZE_ADDRESS__)
             ", AddressSanitizer"
#else
             ""
#endif
    );
}

static void read_libraries(sysinfo *s)
{
    size_t used = 0;
    for (int i = 0; i < backend_count(); i++) {
        /* only what this run loaded: asking must not map a library */
        char info[512] = "";
        backend_library_info(backend_at(i), info, sizeof info);
        if (!info[0] || strstr(s->libraries, info))
            continue;
        APPEND(s->libraries, used, "%s%s", used ? "; " : "", info);
    }
    /* MPI is not a backend: the coordinator's world says which library */
    if (world_mpi_built() && !strstr(s->libraries, "MPI")) {
        char mpi[256] = "";
        world_mpi_version(mpi, sizeof mpi);
        if (mpi[0])
            APPEND(s->libraries, used, "%s%s", used ? "; " : "", mpi);
    }
}

/* Variables that change thread counts, kernels or devices. */
static void read_environment(char *out, size_t len)
{
    static const char *const names[] = {
        "OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND", "OMP_PLACES",
        "GOMP_CPU_AFFINITY",
        "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "CUDA_VISIBLE_DEVICES",
        "CUDA_LAUNCH_BLOCKING", "NCCL_ALGO", "NCCL_PROTO",
    };
    size_t used = 0;
    out[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v)
            used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%s%s=%s",
                                     used ? " " : "", names[i], v);
    }
}

static void read_cpu_setup(sysinfo *s)
{
    const openmp_setup *omp = openmp_setup_get();
    if (omp->prepared) {
        snprintf(s->omp_wait_policy, sizeof s->omp_wait_policy, "%s", omp->wait_policy);
        snprintf(s->omp_wait_policy_source, sizeof s->omp_wait_policy_source, "%s",
                 omp->wait_policy_by_user ? "user" : "default");
        snprintf(s->gomp_spin_count, sizeof s->gomp_spin_count, "%s", omp->spin_count);
        snprintf(s->gomp_spin_count_source, sizeof s->gomp_spin_count_source, "%s",
                 !omp->spin_count[0] ? "" : omp->spin_count_by_user ? "user" : "default");
    }
    const blas_setup *b = blas_setup_get();
    if (!b->prepared)
        return;
    static const char *const sources[] = {
        [KC_SOURCE_USER] = "user", [KC_SOURCE_LIBRARY] = "library", [KC_SOURCE_CHOSEN] = "chosen"};
    snprintf(s->blas_kernels, sizeof s->blas_kernels, "%s", b->kernels.core);
    snprintf(s->blas_kernels_asked, sizeof s->blas_kernels_asked, "%s",
             b->kernels.asked[0] ? b->kernels.asked : b->kernels.core);
    snprintf(s->blas_kernels_source, sizeof s->blas_kernels_source, "%s",
             sources[b->kernels.source]);
    snprintf(s->blas_kernels_reason, sizeof s->blas_kernels_reason, "%s", b->kernels.reason);
    /* What ran: the loaded library's corename, "OpenBLAS 0.3.21 Haswell
     * (openmp)" in the libraries (an unknown OPENBLAS_CORETYPE is ignored
     * by OpenBLAS, which then runs its own choice). */
    const char *lib = strstr(s->libraries, "OpenBLAS ");
    if (!lib)
        return;
    lib += strlen("OpenBLAS ");
    lib += strcspn(lib, " ");
    lib += strspn(lib, " ");
    size_t n = strcspn(lib, " ;(");
    char ran[32];
    snprintf(ran, sizeof ran, "%.*s", (int)n, lib);
    if (!ran[0] || !strcasecmp(ran, b->kernels.core))
        return; /* (a user's unknown core: the child found what runs) */
    snprintf(s->blas_kernels, sizeof s->blas_kernels, "%s", ran);
    snprintf(s->blas_kernels_reason, sizeof s->blas_kernels_reason,
             "asked for %.31s, OpenBLAS ran %.31s (it ignores a core it does not know or "
             "cannot run); %.300s", b->kernels.core[0] ? b->kernels.core : "no core", ran,
             b->kernels.reason);
}

void sysinfo_collect(sysinfo *s)
{
    memset(s, 0, sizeof *s);
    if (gethostname(s->host, sizeof s->host - 1) != 0)
        strcpy(s->host, "unknown");
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(s->os, sizeof s->os, "%s %s %s", u.sysname, u.release, u.machine);
    /* the CPU's name and vector extensions from the one reader of them
     * (base/cpu.h: cpuid, and only what the OS saves the registers of) */
    const cpu_info *cpu = cpu_this();
    snprintf(s->cpu_model, sizeof s->cpu_model, "%s", cpu->brand[0] ? cpu->brand : "unknown");
    cpu_feature_names(cpu->features, s->simd, sizeof s->simd);
    char text[64];
    if (proc_field("/proc/cpuinfo", "cpu MHz", text, sizeof text) == 0)
        s->cpu_mhz = atof(text);
    if (read_line("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", text, sizeof text) == 0)
        s->cpu_max_mhz = atof(text) / 1000.0; /* kHz */
    s->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    s->physical_cores = count_physical_cores();
    if (proc_field("/proc/meminfo", "MemTotal", text, sizeof text) == 0)
        s->memory_gib = atof(text) / (1024.0 * 1024.0);
    read_caches(s->caches, sizeof s->caches);
    if (getloadavg(s->load_average, 3) != 3)
        s->load_average[0] = s->load_average[1] = s->load_average[2] = -1;
    read_gpus(s);
#ifdef __VERSION__
    snprintf(s->compiler, sizeof s->compiler, "%s %s",
#ifdef __clang__
             "clang",
#else
             "gcc",
#endif
             __VERSION__);
#endif
    read_build(s->build, sizeof s->build);
    snprintf(s->git_commit, sizeof s->git_commit, "%s", GIT_COMMIT);
    size_t n = strlen(s->git_commit);
    s->git_dirty = n > 6 && strcmp(s->git_commit + n - 6, "-dirty") == 0;
    read_libraries(s);
    read_environment(s->environment, sizeof s->environment);
    read_cpu_setup(s);
    peer_environment_describe(s->peer_environment, sizeof s->peer_environment);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(s->date, sizeof s->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void json_string(FILE *f, const char *str)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* system.json's fields in order, each keyed by its member's name in
 * sysinfo: the kind of value and, for numbers, how it is written. */
typedef enum { FIELD_TEXT, FIELD_INT, FIELD_BOOL, FIELD_REAL, FIELD_REAL3, FIELD_JSON } field_kind;

typedef struct json_field {
    const char *key;
    field_kind kind;
    size_t offset;
    const char *format; /* FIELD_REAL, and each of FIELD_REAL3's three */
} json_field;

#define TEXT(m) {#m, FIELD_TEXT, offsetof(sysinfo, m), NULL}
#define INT(m) {#m, FIELD_INT, offsetof(sysinfo, m), NULL}
#define BOOL(m) {#m, FIELD_BOOL, offsetof(sysinfo, m), NULL}
#define REAL(m, fmt) {#m, FIELD_REAL, offsetof(sysinfo, m), fmt}
#define REAL3(m, fmt) {#m, FIELD_REAL3, offsetof(sysinfo, m), fmt}
#define JSON(m) {#m, FIELD_JSON, offsetof(sysinfo, m), NULL}

static const json_field system_fields[] = {
    TEXT(date), TEXT(host), TEXT(os),
    /* the CPU and memory */
    TEXT(cpu_model), INT(cores), INT(physical_cores), REAL(cpu_mhz, "%.0f"),
    REAL(cpu_max_mhz, "%.0f"), TEXT(simd), TEXT(caches), REAL(memory_gib, "%.1f"),
    REAL3(load_average, "%.2f"), JSON(cpu_peak), JSON(cpu_peaks), JSON(memory_bandwidth),
    /* the GPUs */
    INT(gpu_count), TEXT(gpu_model), REAL(gpu_memory_gib, "%.1f"), TEXT(gpu_driver),
    /* the build */
    TEXT(compiler), TEXT(build), TEXT(git_commit), BOOL(git_dirty), TEXT(libraries),
    TEXT(environment),
    /* the blas backend's start */
    TEXT(blas_kernels), TEXT(blas_kernels_source), TEXT(blas_kernels_reason),
    TEXT(blas_kernels_asked),
    TEXT(omp_wait_policy), TEXT(omp_wait_policy_source), TEXT(gomp_spin_count),
    TEXT(gomp_spin_count_source), TEXT(peer_environment),
    /* the data */
    TEXT(data_files), TEXT(data_files_not_read),
};

static void json_field_value(FILE *f, const json_field *field, const sysinfo *s)
{
    const void *at = (const char *)s + field->offset;
    const double *reals = at;
    switch (field->kind) {
    case FIELD_TEXT: json_string(f, at); break;
    case FIELD_INT: fprintf(f, "%d", *(const int *)at); break;
    case FIELD_BOOL: fprintf(f, "%s", *(const int *)at ? "true" : "false"); break;
    case FIELD_REAL: fprintf(f, field->format, *reals); break;
    case FIELD_JSON: fputs(*(const char *)at ? (const char *)at : "[]", f); break;
    case FIELD_REAL3:
        for (int i = 0; i < 3; i++) {
            fprintf(f, "%s", i ? ", " : "[");
            fprintf(f, field->format, reals[i]);
        }
        fprintf(f, "]");
        break;
    }
}

void sysinfo_write_json(FILE *f, const sysinfo *s, int argc, char **argv)
{
    fprintf(f, "{");
    for (size_t i = 0; i < sizeof system_fields / sizeof system_fields[0]; i++) {
        fprintf(f, "%s\n  \"%s\": ", i ? "," : "", system_fields[i].key);
        json_field_value(f, &system_fields[i], s);
    }
    fprintf(f, ",\n  \"command_line\": [");
    for (int i = 0; i < argc; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_string(f, argv[i]);
    }
    fprintf(f, "]\n}\n");
}

/* ---- reading system.json back ------------------------------------------- */

/* Decodes one JSON string literal at *p (just past its opening quote) in
 * place; returns its start, or NULL when malformed. */
static char *json_string_in_place(char **p)
{
    char *s = *p, *w = *p;
    while (*s && *s != '"') {
        if (*s != '\\') {
            *w++ = *s++;
            continue;
        }
        s++;
        switch (*s) {
        case 'n': *w++ = '\n'; break;
        case 't': *w++ = '\t'; break;
        case 'r': *w++ = '\r'; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'u':
            /* non-ASCII only matters for equality: keep the escape as is */
            *w++ = '\\';
            *w++ = 'u';
            for (int i = 1; i <= 4 && s[i]; i++)
                *w++ = s[i];
            for (int i = 0; i < 4 && s[1]; i++)
                s++;
            break;
        case 0: return NULL;
        default: *w++ = *s; break;
        }
        s++;
    }
    if (*s != '"')
        return NULL;
    char *start = *p;
    *p = s + 1;
    *w = 0;
    return start;
}

static void skip_space(char **p)
{
    while (**p == ' ' || **p == '\n' || **p == '\t' || **p == '\r')
        (*p)++;
}

/* Copies the string value of "key" in a flat JSON object into out ("" when
 * absent). Leaves text as it was. */
static void json_text_field(const char *text, const char *key, char *out, size_t len)
{
    out[0] = 0;
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", key);
    const char *p = strstr(text, quoted);
    if (!p)
        return;
    p += strlen(quoted);
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    if (*p++ != ':')
        return;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p++ != '"')
        return;
    size_t n = 0;
    for (; *p && *p != '"' && n + 1 < len; p++) {
        if (*p == '\\' && p[1])
            p++; /* the escaped character itself is enough for equality */
        out[n++] = *p;
    }
    out[n] = 0;
}

int sysinfo_read_json(const char *path, sysinfo_record *r, char *why, size_t why_len)
{
    memset(r, 0, sizeof *r);
    char err[256];
    size_t len;
    char *text = read_text_file(path, &len, err, sizeof err);
    if (!text) {
        snprintf(why, why_len, "no readable system.json");
        return -1;
    }
    r->text = text;
    json_text_field(text, "compiler", r->compiler, sizeof r->compiler);
    json_text_field(text, "libraries", r->libraries, sizeof r->libraries);
    char *p = strstr(text, "\"command_line\"");
    if (p) {
        p += strlen("\"command_line\"");
        skip_space(&p);
    }
    if (!p || *p++ != ':' || (skip_space(&p), *p++ != '[')) {
        snprintf(why, why_len, "no command_line in system.json");
        return -1;
    }
    int cap = 0;
    for (;;) {
        skip_space(&p);
        if (*p == ']')
            break;
        char *s = *p == '"' ? (p++, json_string_in_place(&p)) : NULL;
        if (!s) {
            snprintf(why, why_len, "unreadable command_line in system.json");
            return -1;
        }
        if (r->n_args == cap) {
            cap = cap ? 2 * cap : 32;
            r->command_line = xrealloc(r->command_line, sizeof(char *) * (size_t)cap);
        }
        r->command_line[r->n_args++] = s;
        skip_space(&p);
        if (*p == ',')
            p++;
    }
    return 0;
}

void sysinfo_record_free(sysinfo_record *r)
{
    free(r->command_line);
    free(r->text);
    memset(r, 0, sizeof *r);
}
