/* Which python and script a peer runs (probe.h). */
#include "backends/peer/probe.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/peer/channel.h"
#include "backends/peer/environment.h"
#include "base/clock.h"

#ifndef LB_SOURCE_DIR_ABS
#define LB_SOURCE_DIR_ABS "."
#endif

#define SCRIPT_IN_TREE "backends/peer/train.py"

static peer_probe probed;
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;

static int find_script(char *out, size_t len)
{
    const char *env = getenv("LENET_BENCH_PYTORCH_SCRIPT");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            if (snprintf(out, len, "%s/" SCRIPT_IN_TREE, exe) < (int)len &&
                access(out, R_OK) == 0)
                return 0;
        }
    }
    snprintf(out, len, "%s/" SCRIPT_IN_TREE, LB_SOURCE_DIR_ABS);
    return access(out, R_OK) == 0 ? 0 : -1;
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
    double deadline = now_seconds() + base_timeout();
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
    } else if (w == TIMED_OUT) {
        snprintf(why, why_len, "%s --probe gave no answer within %.0f s", python,
                 base_timeout());
    } else if (w == READY) {
        snprintf(why, why_len, "%s --probe answered '%.100s'", python, line);
    } else {
        char how[400];
        describe_exit(&c, how, sizeof how);
        snprintf(why, why_len, "%s %s", python, how);
    }
    channel_close(&c, rc == 0 ? EXIT_WAIT_S : 0);
    return rc;
}

const peer_probe *probe_once(void)
{
    pthread_mutex_lock(&probe_lock);
    if (!probed.done) {
        probed.done = 1;
        if (timeout_setting_ok(probed.why, sizeof probed.why) != 0) {
            /* (not the interpreter's fault when no answer comes in time) */
        } else if (find_script(probed.script, sizeof probed.script) != 0) {
            snprintf(probed.why, sizeof probed.why,
                     "%.400s not found (LENET_BENCH_PYTORCH_SCRIPT names another)",
                     probed.script);
        } else {
            const char *env = getenv("LENET_BENCH_PYTHON");
            const char *candidates[2] = {"python3", "/usr/bin/python3"};
            int n = 2;
            if (env && *env)
                candidates[0] = env, n = 1;
            size_t used = 0;
            char tried[2][PATH_MAX];
            for (int i = 0; i < n && !probed.ok; i++) {
                char why[MSG_LEN];
                if (find_program(candidates[i], tried[i], sizeof tried[i]) != 0) {
                    snprintf(why, sizeof why, "%s not found", candidates[i]);
                } else if (i == 1 && n == 2 && !strcmp(tried[0], tried[1])) {
                    continue; /* PATH's python3 was this one */
                } else if (probe_python(tried[i], probed.script, &probed, why, sizeof why) ==
                           0) {
                    snprintf(probed.python, sizeof probed.python, "%s", tried[i]);
                    probed.ok = 1;
                    break;
                }
                used += (size_t)snprintf(probed.why + used,
                                         used < sizeof probed.why ? sizeof probed.why - used : 0,
                                         "%s%s", used ? "; " : "no python3 with torch: ", why);
            }
        }
    }
    pthread_mutex_unlock(&probe_lock);
    return &probed;
}

peer_probe probe_found(void)
{
    pthread_mutex_lock(&probe_lock);
    const peer_probe p = probed;
    pthread_mutex_unlock(&probe_lock);
    return p;
}
