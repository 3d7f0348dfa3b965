/* The environment of a framework peer's process (environment.h). */
#include "backends/peer/environment.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/blas/blas.h"
#include "backends/common/openmp_setup.h"

extern char **environ;

enum { PEER_VARS = 3, VAR_LEN = 96 };

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char **peer_env;
static char vars[PEER_VARS][VAR_LEN]; /* "NAME=value" to set, "" when not */
static int drop[PEER_VARS];           /* 1: taken out of the peer's environment */
static char note[512];

/* Starts with NAME= */
static int names(const char *entry, const char *name)
{
    size_t n = strlen(name);
    return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

static void decide(void)
{
    /* the blas backend's setup, whether or not blas runs: its kernel
     * choice, and (through it) the OpenMP waiting of every CPU row */
    blas_setup_prepare();
    const blas_setup *blas = blas_setup_get();
    const openmp_setup *omp = openmp_setup_get();
    static const char *const var_names[PEER_VARS] = {"OPENBLAS_CORETYPE", "OMP_WAIT_POLICY",
                                                     "GOMP_SPINCOUNT"};
    const kc_decision *k = &blas->kernels;
    char kernels[256];
    /* the user's value stays in the environment the peer inherits */
    if (k->source != KC_SOURCE_USER && k->core[0]) {
        snprintf(vars[0], VAR_LEN, "OPENBLAS_CORETYPE=%s", k->core);
        snprintf(kernels, sizeof kernels, "OPENBLAS_CORETYPE=%s (the blas backend's kernels, %s)",
                 k->core, k->source == KC_SOURCE_CHOSEN ? "chosen by the program"
                                                        : "OpenBLAS's own choice");
    } else if (k->source == KC_SOURCE_USER) {
        snprintf(kernels, sizeof kernels, "OPENBLAS_CORETYPE=%s (set by the user)", k->asked);
    } else {
        snprintf(kernels, sizeof kernels, "OPENBLAS_CORETYPE unset (the blas backend's kernels "
                                          "are unknown: %.160s)", k->reason);
    }
    /* OpenMP waiting: the framework runtime's own default (PyTorch's
     * OpenMP spins at its barriers, which is fastest for it: the suite's
     * passive default cost PyTorch 1.13 10% and 2.x a third of its speed),
     * unless the user set a policy, which the peer inherits as every row
     * does. The suite's defaults, which this process put in its own
     * environment for its libgomp, are taken out (drop[]). */
    char waiting[200];
    if (omp->wait_policy_by_user || omp->spin_count_by_user) {
        char set[96] = "";
        if (omp->wait_policy_by_user)
            snprintf(set, sizeof set, "OMP_WAIT_POLICY=%s", omp->wait_policy);
        if (omp->spin_count_by_user)
            snprintf(set + strlen(set), sizeof set - strlen(set), "%sGOMP_SPINCOUNT=%s",
                     set[0] ? ", " : "", omp->spin_count);
        snprintf(waiting, sizeof waiting, "%s (set by the user)", set);
    } else {
        snprintf(waiting, sizeof waiting,
                 "OpenMP waiting: the framework's own default (OMP_WAIT_POLICY and "
                 "GOMP_SPINCOUNT unset, not the suite's passive)");
    }
    drop[1] = !omp->wait_policy_by_user;
    drop[2] = !omp->spin_count_by_user;
    snprintf(note, sizeof note, "%s, %s", kernels, waiting);

    size_t n = 0;
    while (environ && environ[n])
        n++;
    peer_env = calloc(n + PEER_VARS + 1, sizeof *peer_env);
    if (!peer_env)
        return; /* the peer then inherits this process's environment */
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        int replaced = 0;
        for (int v = 0; v < PEER_VARS; v++)
            replaced |= (vars[v][0] || drop[v]) && names(environ[i], var_names[v]);
        if (!replaced)
            peer_env[used++] = environ[i];
    }
    for (int v = 0; v < PEER_VARS; v++)
        if (vars[v][0])
            peer_env[used++] = vars[v];
}

char *const *peer_environment(void)
{
    pthread_once(&once, decide);
    return peer_env ? peer_env : environ;
}

void peer_environment_describe(char *buf, size_t len) { snprintf(buf, len, "%s", note); }
