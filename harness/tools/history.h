/* `./bench history RUN`: appends a run's summary rows to results/history.csv,
 * the record of speed and accuracy across commits that plots/history.gp
 * draws. */
#ifndef LB_HISTORY_H
#define LB_HISTORY_H

/* The subcommand; argv[0] is "history". Exit status 0, or 2 on bad input. */
int history_main(int argc, char **argv);

#endif
