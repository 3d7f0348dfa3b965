/* ./bench: train LeNet with each backend and record how fast each one is.
 * `./bench SUBCOMMAND ...` runs one of the tools below instead. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* What was printed must have reached stdout (not a full disk, a closed
 * descriptor or a pipe whose reader left with SIGPIPE ignored): else one
 * line and `lost` as the exit status, unless rc already says a failure. */
static int check_stdout(int rc, int lost)
{
    int flushed = fflush(stdout) == 0;
    if (flushed && !ferror(stdout))
        return rc;
    fprintf(stderr, "bench: cannot write to standard output%s%s\n", flushed ? "" : ": ",
            flushed ? "" : strerror(errno));
    return rc ? rc : lost;
}

/* Standard input, output and error open before anything else is: a
 * closed one would otherwise be the next file opened (epochs.csv), and the
 * table or the progress lines would land inside it. A closed one becomes
 * /dev/null opened for reading only, so that what is written to a closed
 * standard output still fails and is reported as not written. */
static void hold_standard_descriptors(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        int got = open("/dev/null", O_RDONLY); /* the lowest free: fd */
        if (got >= 0 && got != fd) {
            dup2(got, fd);
            close(got);
        }
    }
}

int main(int argc, char **argv)
{
    hold_standard_descriptors();
    for (const subcommand *s = subcommands; argc > 1 && s->name; s++)
        if (strcmp(argv[1], s->name) == 0) {
            alloc_set_exit_status(2); /* their 1 is a finding, not an error */
            return check_stdout(s->main(argc - 1, argv + 1), 2);
        }
    static run_config cfg;
    int rc = cli_parse(argc, argv, &cfg);
    if (rc == 1)
        return check_stdout(0, 1);
    if (rc)
        return rc;
    return check_stdout(run_benchmark(&cfg, plot_after_run), 1);
}
