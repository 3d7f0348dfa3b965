/* How idle OpenMP threads wait (OMP_WAIT_POLICY), for every CPU backend
 * whose module runs libgomp (blas, direct, onednn). libgomp reads it once,
 * when it starts, whichever module maps it first, so the program sets it
 * before any of them loads (their registrations' prepare hooks). Unless
 * the user set it: passive. Spinning threads at a barrier keep their
 * partner off a core that another process shares (blas 2-3x slower under
 * load); on an idle machine passive costs a futex wake-up of microseconds
 * at each of a step's few barriers. */
#ifndef LB_OPENMP_SETUP_H
#define LB_OPENMP_SETUP_H

#include <stddef.h>

typedef struct openmp_setup {
    int prepared;
    char wait_policy[32]; /* OMP_WAIT_POLICY as the libraries see it */
    int wait_policy_by_user;
} openmp_setup;

/* Sets OMP_WAIT_POLICY=passive in this process's environment unless it is
 * set. Runs once; later calls do nothing. */
void openmp_setup_prepare(void);

/* The setup this process prepared (prepared == 0 before). */
const openmp_setup *openmp_setup_get(void);

/* "OMP_WAIT_POLICY=passive (default)" for the rows' details and --list;
 * "" before openmp_setup_prepare(). with_reasons is for the hook's
 * signature (there is no reason beyond the source). */
void openmp_setup_describe(char *buf, size_t len, int with_reasons);

#endif
