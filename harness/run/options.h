/* The command lines of ./bench and of its subcommands (./bench compare,
 * count, history): getopt_long set up the same way for each, and its errors
 * worded the same way, on one line. */
#ifndef LB_OPTIONS_H
#define LB_OPTIONS_H

#include <getopt.h>

/* Starts reading argv's options afresh (a subcommand may run after another
 * scan); getopt_long itself prints nothing, the caller reports with
 * option_error. Scan with the optstring ":" so a missing value reads ':'. */
void options_begin(void);

/* Reports what getopt_long returned instead of one of `options`: ':' (the
 * option before optind lacks its value) or anything else (an unknown
 * option), listing the options there are. `subcommand` is NULL for ./bench
 * itself. Returns 2, the exit status of bad input. */
int option_error(const char *subcommand, const struct option *options, int c, char **argv);

/* An option's value s, the whole of it, as a whole number in [lo, hi] or
 * a number in [lo, hi]; otherwise a one-line error naming the flag, and 2. */
int option_int(const char *subcommand, const char *flag, const char *s, long lo, long hi,
               int *out);
int option_number(const char *subcommand, const char *flag, const char *s, double lo,
                  double hi, double *out);

#endif
