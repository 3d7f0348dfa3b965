#include "harness/run/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

void options_begin(void)
{
    opterr = 0;
    optind = 1;
}

/* "bench" or "bench compare", as the errors begin. */
#define COMMAND_FORMAT "bench%s%s"
#define COMMAND_ARGS(subcommand) (subcommand) ? " " : "", (subcommand) ? (subcommand) : ""

int option_error(const char *subcommand, const struct option *options, int c, char **argv)
{
    const char *arg = argv[optind - 1];
    if (c == ':') {
        fprintf(stderr, COMMAND_FORMAT ": %s needs a value", COMMAND_ARGS(subcommand), arg);
    } else {
        fprintf(stderr, COMMAND_FORMAT ": unknown option '%s'; options are:",
                COMMAND_ARGS(subcommand), arg);
        for (const struct option *o = options; o->name; o++)
            fprintf(stderr, " --%s", o->name);
    }
    fprintf(stderr, " (see ./" COMMAND_FORMAT " --help)\n", COMMAND_ARGS(subcommand));
    return 2;
}

int option_int(const char *subcommand, const char *flag, const char *s, long lo, long hi,
               int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi || s[0] == ' ' || s[0] == '+') {
        fprintf(stderr, COMMAND_FORMAT ": %s expects a whole number in %ld..%ld, got '%s'\n",
                COMMAND_ARGS(subcommand), flag, lo, hi, s);
        return 2;
    }
    *out = (int)v;
    return 0;
}

int option_number(const char *subcommand, const char *flag, const char *s, double lo,
                  double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, COMMAND_FORMAT ": %s expects a number from %g to %g, got '%s'\n",
                COMMAND_ARGS(subcommand), flag, lo, hi, s);
        return 2;
    }
    *out = v;
    return 0;
}
