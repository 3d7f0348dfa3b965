/* ./bench: train LeNet with each backend and record how fast each one is.
 * `./bench SUBCOMMAND ...` runs one of the tools below instead. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "harness/run/config.h"
#include "harness/run/peak.h"
#include "harness/run/run.h"
#include "harness/tools/compare.h"
#include "harness/tools/count.h"
#include "harness/tools/history.h"
#include "harness/tools/plot.h"

typedef struct subcommand {
    const char *name;
    int (*main)(int argc, char **argv); /* argv[0] is the subcommand */
} subcommand;

static const subcommand subcommands[] = {
    {"compare", compare_main},
    {"count", count_main},
    {"history", history_main},
    {"peaks", peaks_main},
    {"plot", plot_main},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    for (const subcommand *s = subcommands; argc > 1 && s->name; s++)
        if (strcmp(argv[1], s->name) == 0) {
            alloc_set_exit_status(2); /* their 1 is a finding, not an error */
            return s->main(argc - 1, argv + 1);
        }
    static run_config cfg;
    int rc = cli_parse(argc, argv, &cfg);
    if (rc == 1)
        return 0;
    if (rc)
        return rc;
    return run_benchmark(&cfg);
}
