#include "harness/run/options.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- numbers ---------------------------------------------------------------- */

int option_whole(const char *subcommand, const char *flag, const char *s, long long lo,
                 long long hi, long long *out)
{
    long long v;
    if (number_read_whole(s, &v) != 0 || v < lo || v > hi) {
        fprintf(stderr, COMMAND_FORMAT ": %s expects a whole number in %lld..%lld, got '%s'\n",
                COMMAND_ARGS(subcommand), flag, lo, hi, s);
        return 2;
    }
    *out = v;
    return 0;
}

int option_int(const char *subcommand, const char *flag, const char *s, long lo, long hi,
               int *out)
{
    long long v;
    int rc = option_whole(subcommand, flag, s, lo, hi, &v);
    if (rc == 0)
        *out = (int)v;
    return rc;
}

int option_real(const char *subcommand, const char *flag, const char *s, double lo, double hi,
                unsigned how, double *out)
{
    double v = 0;
    const int written = number_read(s, &v) == 0;
    const double stored = how & NUMBER_IN_FLOAT ? (double)(float)v : v;
    const int above = how & NUMBER_ABOVE_LO ? stored > lo : stored >= lo;
    if (written && above && stored <= hi) {
        *out = v;
        return 0;
    }
    char as_float[64] = "";
    if (written && stored != v)
        snprintf(as_float, sizeof as_float, " (%g as a float)", stored);
    fprintf(stderr, COMMAND_FORMAT ": %s expects a number in %c%g, %g], got '%s'%s\n",
            COMMAND_ARGS(subcommand), flag, how & NUMBER_ABOVE_LO ? '(' : '[', lo, hi, s,
            as_float);
    return 2;
}

int option_number(const char *subcommand, const char *flag, const char *s, double lo,
                  double hi, double *out)
{
    return option_real(subcommand, flag, s, lo, hi, 0, out);
}

/* ---- lists ------------------------------------------------------------------ */

#define LIST_ITEM_LEN 64

/* The item of a list at *p, copied into item (cut to LIST_ITEM_LEN - 1); *p
 * moves past it and its comma, to NULL after the last. Its whole length. */
static size_t next_item(const char **p, char *item)
{
    size_t n = strcspn(*p, ",");
    snprintf(item, LIST_ITEM_LEN, "%.*s", (int)(n < LIST_ITEM_LEN ? n : LIST_ITEM_LEN - 1), *p);
    *p = (*p)[n] == ',' ? *p + n + 1 : NULL;
    return n;
}

/* A list of no items ("", ",") and a list with an empty one ("a,", ",a",
 * "a,,b": a typo, not a request) are refused; `choices` (may be "") ends
 * the message. 0 or 2. */
static int check_items(const char *subcommand, const char *flag, const char *list,
                       const char *noun, const char *choices)
{
    const size_t n = strlen(list);
    const char *sep = choices[0] ? "; choose from: " : "";
    if (strspn(list, ",") == n) {
        fprintf(stderr, COMMAND_FORMAT ": %s needs at least one %s, got '%s'%s%s\n",
                COMMAND_ARGS(subcommand), flag, noun, list, sep, choices);
        return 2;
    }
    if (list[0] == ',' || list[n - 1] == ',' || strstr(list, ",,")) {
        fprintf(stderr, COMMAND_FORMAT ": %s '%s' has an empty item%s%s\n",
                COMMAND_ARGS(subcommand), flag, list, sep, choices);
        return 2;
    }
    return 0;
}

/* Adds v (written `item`) to out[0..*n), in ascending place when `sorted`;
 * a repeat or a full list is refused. 0, or 2 after the message. */
static int add_item(const char *subcommand, const char *flag, const char *list,
                    const char *item, int v, int *out, int max, int *n, int sorted)
{
    for (int i = 0; i < *n; i++)
        if (out[i] == v) {
            fprintf(stderr, COMMAND_FORMAT ": %s lists %s twice in '%s'\n",
                    COMMAND_ARGS(subcommand), flag, item, list);
            return 2;
        }
    if (*n == max) {
        fprintf(stderr, COMMAND_FORMAT ": %s takes at most %d values, got '%s'\n",
                COMMAND_ARGS(subcommand), flag, max, list);
        return 2;
    }
    int i = (*n)++;
    for (; sorted && i > 0 && out[i - 1] > v; i--)
        out[i] = out[i - 1];
    out[i] = v;
    return 0;
}

int option_whole_list(const char *subcommand, const char *flag, const char *list, long lo,
                      long hi, int *out, int max, int *n)
{
    *n = 0;
    if (check_items(subcommand, flag, list, "value", ""))
        return 2;
    for (const char *p = list; p;) {
        char item[LIST_ITEM_LEN];
        long long v;
        if (next_item(&p, item) >= LIST_ITEM_LEN || number_read_whole(item, &v) != 0 || v < lo ||
            v > hi) {
            fprintf(stderr, COMMAND_FORMAT ": %s expects a comma list of whole numbers in "
                    "%ld..%ld, got '%s'\n", COMMAND_ARGS(subcommand), flag, lo, hi, list);
            return 2;
        }
        if (add_item(subcommand, flag, list, item, (int)v, out, max, n, 1))
            return 2;
    }
    return 0;
}

int option_name_list(const char *subcommand, const char *flag, const char *what,
                     const char *list, const char *const *names, int count, int *out, int max,
                     int *n)
{
    char choices[1024] = "";
    size_t used = 0;
    for (int k = 0; k < count && used < sizeof choices; k++)
        used += (size_t)snprintf(choices + used, sizeof choices - used, "%s%s", k ? ", " : "",
                                 names[k]);
    *n = 0;
    if (check_items(subcommand, flag, list, "name", choices))
        return 2;
    for (const char *p = list; p;) {
        char item[LIST_ITEM_LEN];
        const int cut = next_item(&p, item) >= LIST_ITEM_LEN;
        int found = -1;
        for (int k = 0; k < count && !cut; k++)
            if (!strcmp(item, names[k]))
                found = k;
        if (found < 0) {
            fprintf(stderr, COMMAND_FORMAT ": unknown %s '%s%s'; choose one of: %s\n",
                    COMMAND_ARGS(subcommand), what, item, cut ? "..." : "", choices);
            return 2;
        }
        if (add_item(subcommand, flag, list, item, found, out, max, n, 0))
            return 2;
    }
    return 0;
}
