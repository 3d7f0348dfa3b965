#ifndef LB_RUN_H
#define LB_RUN_H

#include "harness/run/config.h"

/* Trains every requested backend and writes the results. Returns the exit
 * status: 0 ok, 1 a backend failed or a result could not be written, 2 bad
 * input, 3 nothing requested can run here, 130 interrupted. */
int run_benchmark(const run_config *cfg);

#endif
