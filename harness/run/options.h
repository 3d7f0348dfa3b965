/* The command lines of ./bench and of its subcommands (./bench compare,
 * count, history): getopt_long set up the same way for each, its errors
 * worded the same way, on one line, and one grammar for every number and
 * list they take (docs/running.md, "Numbers and lists"):
 *
 * - a whole number is an optional '-' and decimal digits, nothing else;
 * - a number is an optional '-', decimal digits with an optional '.' and
 *   an optional exponent (e or E, an optional sign, digits): no space, no
 *   '+', no hexadecimal, inf or nan; one too large for a double is refused,
 *   one too small is taken as the nearest double;
 * - a value is checked against its range as it is stored: a number kept in
 *   a float as that float (--lr 1e-300 is 0 there), a whole number kept in
 *   a double only where the double holds it exactly;
 * - a list is items separated by commas: none empty, none repeated, at
 *   most as many as the flag takes; numbers are kept ascending, names in
 *   the order given.
 *
 * The CSV check of the tools (columns.c) reads numbers by the same rules. */
#ifndef LB_OPTIONS_H
#define LB_OPTIONS_H

#include <getopt.h>

#include "base/number.h"

/* Starts reading argv's options afresh (a subcommand may run after another
 * scan); getopt_long itself prints nothing, the caller reports with
 * option_error. Scan with the optstring ":" so a missing value reads ':'. */
void options_begin(void);

/* Reports what getopt_long returned instead of one of `options`: ':' (the
 * option before optind lacks its value) or anything else (an unknown
 * option), listing the options there are. `subcommand` is NULL for ./bench
 * itself. Returns 2, the exit status of bad input. */
int option_error(const char *subcommand, const struct option *options, int c, char **argv);

/* The grammar without messages (base/number.h): number_read_whole,
 * number_read. */

/* An option's value s, the whole of it, as a whole number in [lo, hi];
 * otherwise a one-line error naming the flag, and 2. */
int option_whole(const char *subcommand, const char *flag, const char *s, long long lo,
                 long long hi, long long *out);
int option_int(const char *subcommand, const char *flag, const char *s, long lo, long hi,
               int *out);

/* How option_real checks a number against [lo, hi]. */
#define NUMBER_ABOVE_LO 1u /* lo itself is refused: (lo, hi] */
#define NUMBER_IN_FLOAT 2u /* stored in a float: the float is checked */

/* An option's value s as a number in its range (option_number: [lo, hi]);
 * otherwise a one-line error naming the flag, and 2. */
int option_real(const char *subcommand, const char *flag, const char *s, double lo, double hi,
                unsigned how, double *out);
int option_number(const char *subcommand, const char *flag, const char *s, double lo,
                  double hi, double *out);

/* A comma list of whole numbers in [lo, hi] into out[0..*n), ascending; at
 * most max. 0, or 2 after a one-line error. */
int option_whole_list(const char *subcommand, const char *flag, const char *list, long lo,
                      long hi, int *out, int max, int *n);

/* A comma list of names out of names[0..count) (each a `what`, for the
 * errors: "unknown <what> 'x'; choose one of: ...") into out[0..*n) as
 * their indices, in the order given; at most max. 0, or 2 after a one-line
 * error. */
int option_name_list(const char *subcommand, const char *flag, const char *what,
                     const char *list, const char *const *names, int count, int *out, int max,
                     int *n);

#endif
