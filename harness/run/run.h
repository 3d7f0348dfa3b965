#ifndef LB_RUN_H
#define LB_RUN_H

#include "harness/run/config.h"

/* Draws the charts of the finished run in dir and says where they are, or
 * why there are none; -1 when a chart could not be drawn or written (said
 * on stderr), else 0. Charts are drawn above the run (tools/plot.h), so the
 * run is handed the drawer rather than calling up into tools/. */
typedef int run_chart_drawer(const char *dir);

/* Trains every requested backend and writes the results, then (rank 0, not
 * after a stop signal) has draw_charts (NULL: none) draw the charts.
 * Returns the exit status: 0 ok, 1 a backend failed or a result could not
 * be written, 2 bad input, 3 nothing requested can run here, 130
 * interrupted. */
int run_benchmark(const run_config *cfg, run_chart_drawer *draw_charts);

#endif
