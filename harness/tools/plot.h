/* Charts: the gnuplot scripts in plots/ rendered into a run directory as
 * PNG and SVG, at the end of every run and by `./bench plot DIR`. */
#ifndef LB_PLOT_H
#define LB_PLOT_H

/* Renders every chart the run directory has data for. Returns 0 when all
 * were drawn, 1 when gnuplot failed or warned on one (its message printed),
 * 2 when dir or its CSV files are missing, 3 when gnuplot or the scripts
 * cannot be found. Messages go to stderr. */
int plot_run_dir(const char *dir);

/* At the end of a run: renders the charts and prints one line saying where
 * they are, or why there are none (gnuplot not installed). -1 when a chart
 * could not be drawn or written (said on stderr), else 0. */
int plot_after_run(const char *dir);

/* `./bench plot DIR`; argv[0] is "plot". Exit status as plot_run_dir. */
int plot_main(int argc, char **argv);

#endif
