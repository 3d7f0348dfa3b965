/* Which python and script a peer runs (probe.h). */
#include "backends/peer/probe.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/peer/channel.h"
#include "backends/peer/environment.h"
#include "base/clock.h"

#ifndef LB_SOURCE_DIR_ABS
#define LB_SOURCE_DIR_ABS "."
#endif

#define SCRIPT_IN_TREE "backends/peer/train.py"
#define PEER_ENV_DIR ".venv-peer"
/* the probe's timeout unless LENET_BENCH_PEER_TIMEOUT is set */
#define PROBE_TIMEOUT_S 60.0

static peer_probe probed;
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;

static int readable(const char *path) { return access(path, R_OK) == 0; }

static int is_directory(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Where the peer's files are found, into out: where the environment
 * variable env_name says, when set (0 when usable() takes it, else -1);
 * else `rel` beside the program, else in the source tree. */
static int find_peer_file(const char *env_name, const char *rel, int (*usable)(const char *),
                          char *out, size_t len)
{
    const char *env = getenv(env_name);
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return usable(out) ? 0 : -1;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            if (snprintf(out, len, "%s/%s", exe, rel) < (int)len && usable(out))
                return 0;
        }
    }
    snprintf(out, len, "%s/%s", LB_SOURCE_DIR_ABS, rel);
    return usable(out) ? 0 : -1;
}

static int find_script(char *out, size_t len)
{
    return find_peer_file("LENET_BENCH_PYTORCH_SCRIPT", SCRIPT_IN_TREE, readable, out, len);
}

/* How long the probe may take: the user's LENET_BENCH_PEER_TIMEOUT, else
 * PROBE_TIMEOUT_S. The probe costs about 2.5 s of processor time (PyTorch
 * 2.15's import and its checks), 22-32 s of wall time on a 2-core machine
 * at a load average of 17; an interpreter that has not answered in a
 * minute is not going to, and the training calls' 120 s is too long to
 * wait for one that hangs. */
static double probe_timeout(void)
{
    return getenv("LENET_BENCH_PEER_TIMEOUT") ? base_timeout() : PROBE_TIMEOUT_S;
}

/* Runs `python script --probe`: 0 with the version and GPU count, or -1
 * with why. */
static int probe_python(const char *python, const char *script, peer_probe *p, char *why,
                        size_t why_len)
{
    char *const argv[] = {(char *)python, (char *)script, (char *)"--probe", NULL};
    channel c;
    char err[256];
    if (channel_start(&c, argv, peer_environment(), err, sizeof err) != 0) {
        snprintf(why, why_len, "%s", err);
        return -1;
    }
    double limit = probe_timeout(), deadline = now_seconds() + limit;
    char line[512];
    wait_result w = channel_line(&c, line, sizeof line, &deadline);
    int rc = -1;
    char ver[64];
    int gpus, used = 0, bf16 = 0, fp16 = 0;
    /* "pytorch VERSION cpu-bf16 0|1 cpu-fp16 0|1 cuda N [NAME]"; a script
     * without the cpu-bf16 (cpu-fp16) field has no bf16 (fp16) autocast */
    if (w == READY && (sscanf(line, "pytorch %63s cpu-bf16 %d cpu-fp16 %d cuda %d%n", ver, &bf16,
                              &fp16, &gpus, &used) == 4 ||
                       sscanf(line, "pytorch %63s cpu-bf16 %d cuda %d%n", ver, &bf16, &gpus,
                              &used) == 3 ||
                       (bf16 = 0, sscanf(line, "pytorch %63s cuda %d%n", ver, &gpus, &used) == 2)) &&
        used > 0 && gpus >= 0) {
        snprintf(p->version, sizeof p->version, "%s", ver);
        p->gpus = gpus;
        p->cpu_bf16 = bf16 == 1;
        p->cpu_fp16 = fp16 == 1;
        rc = 0;
        /* optional lines: "libraries TEXT" (its CPU libraries), "modes
         * eager [compile]" (a script without it: eager only) */
        p->libraries[0] = 0;
        p->compile = 0;
        snprintf(p->no_compile, sizeof p->no_compile, "its train.py names no compile mode");
        for (int more = 0; more < 2; more++) {
            if (channel_line(&c, line, sizeof line, &deadline) != READY)
                break;
            if (!strncmp(line, "libraries ", 10)) {
                size_t o = 0;
                for (const char *q = line + 10; *q && o + 1 < sizeof p->libraries; q++)
                    p->libraries[o++] = (unsigned char)*q < 0x20 ? ' ' : *q;
                p->libraries[o] = 0;
            } else if (!strncmp(line, "modes ", 6)) {
                const char *no = strstr(line, "; no compile: ");
                p->compile = !no && strstr(line + 5, " compile") != NULL;
                if (no)
                    snprintf(p->no_compile, sizeof p->no_compile, "%.200s", no + 14);
            }
        }
    } else if (w == TIMED_OUT) {
        snprintf(why, why_len, "%.300s --probe gave no answer within %.0f s", python, limit);
    } else if (w == READY) {
        snprintf(why, why_len, "%.300s --probe answered '%.100s'", python, line);
    } else {
        char how[400];
        describe_exit(&c, how, sizeof how);
        snprintf(why, why_len, "%.100s %.380s", python, how);
    }
    channel_close(&c, rc == 0 ? EXIT_WAIT_S : 0);
    return rc;
}

/* The project's environment (probe.h): its directory in dir, 0 when it is
 * there (a directory), -1 when not. */
static int find_environment(char *dir, size_t len)
{
    return find_peer_file("LENET_BENCH_PEER_ENV", PEER_ENV_DIR, is_directory, dir, len);
}

/* Probes one interpreter named by `name` (a path or a name on PATH): 1
 * when it answered (probed filled in), else 0 with why appended to
 * probed.why. */
static int try_python(const char *name, const char *source, size_t *used)
{
    char path[PATH_MAX], why[MSG_LEN];
    if (find_program(name, path, sizeof path) != 0) {
        snprintf(why, sizeof why, "%s not found", name);
    } else if (probe_python(path, probed.script, &probed, why, sizeof why) == 0) {
        snprintf(probed.python, sizeof probed.python, "%s", path);
        snprintf(probed.source, sizeof probed.source, "%s", source);
        probed.ok = 1;
        return 1;
    }
    *used += (size_t)snprintf(probed.why + *used,
                              *used < sizeof probed.why ? sizeof probed.why - *used : 0, "%s%s",
                              *used ? "; " : "no python3 with torch: ", why);
    return 0;
}

const peer_probe *probe_once(void)
{
    pthread_mutex_lock(&probe_lock);
    if (!probed.done) {
        probed.done = 1;
        size_t used = 0;
        char env_dir[PATH_MAX], env_python[PATH_MAX + 16];
        const char *python = getenv("LENET_BENCH_PYTHON");
        if (timeout_setting_ok(probed.why, sizeof probed.why) != 0) {
            /* (not the interpreter's fault when no answer comes in time) */
        } else if (find_script(probed.script, sizeof probed.script) != 0) {
            snprintf(probed.why, sizeof probed.why,
                     "%.400s not found (LENET_BENCH_PYTORCH_SCRIPT names another)",
                     probed.script);
        } else if (python && *python) {
            try_python(python, "LENET_BENCH_PYTHON", &used);
        } else if (find_environment(env_dir, sizeof env_dir) == 0) {
            snprintf(env_python, sizeof env_python, "%s/bin/python", env_dir);
            char source[128];
            snprintf(source, sizeof source, "the project's environment (make peer)");
            if (!try_python(env_python, source, &used)) {
                char was[MSG_LEN];
                snprintf(was, sizeof was, "%s", probed.why + strlen("no python3 with torch: "));
                snprintf(probed.why, sizeof probed.why,
                         "the peer's environment %.150s cannot run the peer (make peer "
                         "reinstalls it; LENET_BENCH_PYTHON picks another python): %.200s",
                         env_dir, was);
            }
        } else {
            const char *candidates[2] = {"python3", "/usr/bin/python3"};
            char first[PATH_MAX] = "";
            for (int i = 0; i < 2 && !probed.ok; i++) {
                char path[PATH_MAX];
                if (i == 1 && first[0] && find_program(candidates[1], path, sizeof path) == 0 &&
                    !strcmp(first, path))
                    continue; /* PATH's python3 was this one */
                if (i == 0 && find_program(candidates[0], first, sizeof first) != 0)
                    first[0] = 0;
                try_python(candidates[i], "the system's python3", &used);
            }
        }
    }
    pthread_mutex_unlock(&probe_lock);
    return &probed;
}

void probe_describe(char *buf, size_t len)
{
    const peer_probe p = probe_found();
    if (!p.ok) {
        if (len)
            buf[0] = 0;
        return;
    }
    snprintf(buf, len, "PyTorch %s from %s (%s)%s%s", p.version, p.source, p.python,
             p.libraries[0] ? "; CPU libraries: " : "", p.libraries);
}

peer_probe probe_found(void)
{
    pthread_mutex_lock(&probe_lock);
    const peer_probe p = probed;
    pthread_mutex_unlock(&probe_lock);
    return p;
}
