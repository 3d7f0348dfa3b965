/* How idle OpenMP threads wait (OMP_WAIT_POLICY, GOMP_SPINCOUNT), for
 * every CPU backend whose module runs libgomp (blas, direct, onednn).
 * libgomp reads them once, when it starts, whichever module maps it first,
 * so the program sets them before any of them loads (their registrations'
 * prepare hooks). Unless the user set the policy: passive, and unless the
 * user set either, a short spin first (DEFAULT_SPIN_COUNT, about a
 * millisecond). A thread that spins for milliseconds at a barrier keeps
 * its partner off a core that another process shares (blas 2-3x slower
 * under load), but one that sleeps at once is woken by a futex at each of
 * a step's dozen or so parallel regions, each wake-up tens of
 * microseconds on a shared machine: the direct backend ran 10-25% slower
 * in fp32 and 30-50% in bf16 (25,000 context switches in two epochs
 * against 800). A short spin bridges the gaps between regions and still
 * sleeps soon when the other thread is held off its core; with more
 * libgomp threads than CPUs, passive does not spin at all. */
#ifndef LB_OPENMP_SETUP_H
#define LB_OPENMP_SETUP_H

#include <stddef.h>

typedef struct openmp_setup {
    int prepared;
    char wait_policy[32]; /* OMP_WAIT_POLICY as the libraries see it */
    int wait_policy_by_user;
    char spin_count[32]; /* GOMP_SPINCOUNT as libgomp sees it ("" unset) */
    int spin_count_by_user;
} openmp_setup;

/* Sets OMP_WAIT_POLICY=passive in this process's environment unless it is
 * set, and GOMP_SPINCOUNT unless either is. Runs once; later calls do
 * nothing. */
void openmp_setup_prepare(void);

/* The setup this process prepared (prepared == 0 before). */
const openmp_setup *openmp_setup_get(void);

/* "OMP_WAIT_POLICY=passive (default), GOMP_SPINCOUNT=30000 (default)" for
 * the rows' details and --list;
 * "" before openmp_setup_prepare(). with_reasons is for the hook's
 * signature (there is no reason beyond the source). */
void openmp_setup_describe(char *buf, size_t len, int with_reasons);

#endif
