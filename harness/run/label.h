/* The name of a configuration (a row key) in tables, charts and file
 * names. Its own file: the columns, the report, the run and the plots all
 * name rows, and none of them should need another to do it. */
#ifndef LB_LABEL_H
#define LB_LABEL_H

#include <stddef.h>

#include "harness/run/results.h"

/* A configuration's name in tables, charts and file names: the backend,
 * then "-xN" for N data-parallel replicas, "-Mranks" under mpirun, and, when
 * the run has several of them (label_axes), "-<precision>" and "-b<batch
 * size>", e.g. "naive", "naive-x2", "blas-bf16-b512". The same backend may
 * run in several configurations in one run, so the backend alone does not
 * name a row; plots/common.gp names them the same way. */
void config_label(const row_key *k, char *buf, size_t len);
void config_label_of(const char *backend, int replicas, int ranks, const char *precision,
                     int batch_size, unsigned label_axes, char *buf, size_t len);

#endif
