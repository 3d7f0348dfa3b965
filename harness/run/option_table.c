#include "harness/run/option_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "harness/run/options.h"

/* getopt_long returns FIRST_ENTRY + i for entries[i], apart from its own
 * ':' and '?' */
#define FIRST_ENTRY 256

static int takes_value(option_action a)
{
    return a != OPTION_SET && a != OPTION_CLEAR && a != OPTION_HELP && a != OPTION_DO;
}

/* A value given as the next argument may not look like an option: in
 * `--save-params --no-shuffle` the file name was forgotten. A value that
 * really starts with "--" is given as --flag=value. */
static int value_is_an_option(const char *subcommand, const char *flag, char **argv)
{
    const char *value = argv[optind - 1];
    if (optarg != value || strncmp(value, "--", 2) != 0)
        return 0;
    fprintf(stderr, "bench%s%s: %s needs a value, got the option '%s' (write %s=%s if that "
            "is the value)\n", subcommand ? " " : "", subcommand ? subcommand : "", flag,
            value, flag, value);
    return 2;
}

static int apply(const char *subcommand, const option_entry *e, const char *flag,
                 const char *value)
{
    switch (e->action) {
    case OPTION_SET: *(int *)e->to = 1; return 0;
    case OPTION_CLEAR: *(int *)e->to = 0; return 0;
    case OPTION_HELP: e->print(stdout); return OPTIONS_DONE;
    case OPTION_TEXT: *(const char **)e->to = value; return 0;
    case OPTION_INT:
        return option_int(subcommand, flag, value, (long)e->lo, (long)e->hi, e->to);
    case OPTION_NUMBER:
        return option_real(subcommand, flag, value, e->lo, e->hi, e->how, e->to);
    case OPTION_DO:
    case OPTION_READ: return e->read(flag, value, e);
    }
    return 0;
}

int options_read(const option_command *cmd, int argc, char **argv)
{
    int n = 0;
    while (cmd->entries[n].name)
        n++;
    struct option *options = xcalloc((size_t)n + 1, sizeof *options);
    for (int i = 0; i < n; i++)
        options[i] = (struct option){cmd->entries[i].name,
                                     takes_value(cmd->entries[i].action) ? required_argument
                                                                         : no_argument,
                                     NULL, FIRST_ENTRY + i};
    options_begin();
    int c, rc = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        if (c < FIRST_ENTRY || c >= FIRST_ENTRY + n) {
            rc = option_error(cmd->subcommand, options, c, argv);
            break;
        }
        const option_entry *e = &cmd->entries[c - FIRST_ENTRY];
        char flag[128];
        snprintf(flag, sizeof flag, "--%s", e->name);
        if (takes_value(e->action) && cmd->values_are_not_options &&
            (rc = value_is_an_option(cmd->subcommand, flag, argv)))
            break;
        rc = apply(cmd->subcommand, e, flag, takes_value(e->action) ? optarg : NULL);
    }
    free(options);
    return rc;
}

int subcommand_options(const char *subcommand, const option_entry *entries, int argc,
                       char **argv)
{
    const int rc = options_read(&(option_command){.subcommand = subcommand, .entries = entries},
                                argc, argv);
    return rc == 0 ? -1 : rc == OPTIONS_DONE ? 0 : rc;
}
