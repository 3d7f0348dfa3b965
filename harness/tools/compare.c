/* `./bench compare BASE NEW`: the command line. compare_read.c reads the
 * two runs, compare_judge.c judges them (what is judged how is in
 * compare_judge.c's opening comment and the usage below), count_compare
 * the instruction counts beside them. */
#include "harness/tools/compare.h"

#include <stdio.h>
#include <string.h>

#include "harness/run/config.h"
#include "harness/run/option_table.h"
#include "harness/tools/compare_judge.h"
#include "harness/tools/count.h"

/* ---- command line ------------------------------------------------------------ */

static void compare_usage(FILE *f)
{
    fprintf(f,
        "usage: ./bench compare [options] BASE NEW\n"
        "\n"
        "Compares two runs, each a run directory or its summary.csv, row by row:\n"
        "rows are joined on backend, workload, precision, batch_size, threads,\n"
        "devices, replicas and ranks (the last two taken as 1 when absent). For\n"
        "each it prints images/s, s/epoch, final test accuracy and final train\n"
        "loss, BASE against NEW, and judges them.\n"
        "\n"
        "  --max-slowdown PCT       a row taking more than PCT percent longer per\n"
        "                           image than in BASE regressed (default 10, that\n"
        "                           is images/s down by more than 9.1%%)\n"
        "  --max-accuracy-drop PTS  final test accuracy lower by more than PTS\n"
        "                           percentage points regressed (default 1.0)\n"
        "  --relative-to BACKEND    judge each row's images/s divided by BACKEND's\n"
        "                           images/s in the same run, so the machine's speed\n"
        "                           cancels (CI uses --relative-to naive); BACKEND's\n"
        "                           own speed is then shown, not judged\n"
        "  --alpha A                significance level of the U test (default 0.05)\n"
        "  --loss-tolerance REL     relative change of final train loss still counted\n"
        "                           as the same numerics, on top of one unit of the\n"
        "                           CSV's sixth decimal (default 1e-6)\n"
        "  --numerics gate|report   whether changed numerics fail the comparison\n"
        "                           (gate, the default) or are only reported\n"
        "  --max-count-growth PCT   instruction counts (counts.csv from ./bench count):\n"
        "                           an item whose instructions per image grew by more\n"
        "                           than PCT percent regressed (default %g)\n"
        "  --help                   this text\n"
        "\n"
        "Counts: when both BASE and NEW hold a counts.csv (or are one), their\n"
        "instructions per image are compared item by item; when NEW has no\n"
        "summary.csv, only the counts are. Counts made with a different compiler,\n"
        "build target, OpenBLAS or kernels, valgrind or presented CPU are not\n"
        "judged (a message says which, exit 0).\n"
        "\n"
        "Speed: a slowdown regresses only when the figures (summary.csv, from the\n"
        "median epoch) differ by more than --max-slowdown and, when both runs\n"
        "have enough per-epoch samples in epochs.csv, a two-sided Mann-Whitney U\n"
        "test (normal approximation with tie and continuity corrections) finds\n"
        "the samples different at --alpha. The samples are the per-epoch images/s\n"
        "of ok epochs, less the warm-up epochs the summary leaves out too. When\n"
        "they are too few for the test ever to reach --alpha (3 against 3 or 4\n"
        "with 0.05; 4 against 4 is enough) the threshold alone decides, and the\n"
        "table says so.\n"
        "\n"
        "Numerics: the final train loss is deterministic for one seed, so a change\n"
        "beyond --loss-tolerance is CHANGED NUMERICS when both rows ran the same\n"
        "training options (system.json's command line, less --out, --repeat,\n"
        "--backend and other options that cannot change the numbers), the same\n"
        "epochs, images per epoch and optimizer, on the same CPU model, compiler\n"
        "and library versions, with the same engine details (precision, math\n"
        "mode, library kernels). Otherwise the difference is shown and not\n"
        "judged.\n"
        "\n"
        "Status: a row ok in BASE that failed, diverged or was interrupted in NEW\n"
        "regressed; a row skipped in NEW, or in only one run, is a note (that\n"
        "machine or build cannot run it), never a failure.\n"
        "\n"
        "Exit status: 0 nothing regressed, 1 a regression or changed numerics,\n"
        "2 unusable input (a missing file, a bad CSV line, a missing column, no\n"
        "common rows), with the file and line named.\n",
        COUNT_MAX_GROWTH_PCT);
}

static int read_numerics(const char *flag, const char *value, const option_entry *e)
{
    (void)flag;
    if (strcmp(value, "gate") && strcmp(value, "report")) {
        fprintf(stderr, "bench compare: --numerics expects gate or report, got '%s'\n", value);
        return 2;
    }
    *(int *)e->to = !strcmp(value, "gate");
    return 0;
}

int compare_main(int argc, char **argv)
{
    compare_options o = {
        .max_slowdown_pct = 10,
        .max_accuracy_drop_points = 1.0,
        .alpha = 0.05,
        .loss_tolerance = 1e-6,
        .numerics_gate = 1,
        .max_count_growth_pct = COUNT_MAX_GROWTH_PCT,
    };
    const option_entry options[] = {
        {"max-slowdown", OPTION_NUMBER, .to = &o.max_slowdown_pct, .lo = 0, .hi = 1e6},
        {"max-accuracy-drop", OPTION_NUMBER, .to = &o.max_accuracy_drop_points, .lo = 0,
         .hi = 100},
        {"relative-to", OPTION_TEXT, .to = &o.relative_to},
        {"alpha", OPTION_NUMBER, .to = &o.alpha, .lo = 1e-12, .hi = 0.5},
        {"loss-tolerance", OPTION_NUMBER, .to = &o.loss_tolerance, .lo = 0, .hi = 1},
        {"numerics", OPTION_READ, .to = &o.numerics_gate, .read = read_numerics},
        {"max-count-growth", OPTION_NUMBER, .to = &o.max_count_growth_pct, .lo = 0, .hi = 1e6},
        {"help", OPTION_HELP, .print = compare_usage},
        {.name = NULL},
    };
    const int status = subcommand_options("compare", options, argc, argv);
    if (status >= 0)
        return status;
    if (argc - optind != 2) {
        fprintf(stderr, "bench compare: expects two runs, BASE and NEW (see ./bench compare --help)\n");
        return 2;
    }
    /* Instruction counts (./bench count) are judged beside the timings, or
     * alone when NEW has no timings. */
    char base_counts[PATH_LEN + 32], new_counts[PATH_LEN + 32];
    int counts = count_path(argv[optind], base_counts, sizeof base_counts) &&
                 count_path(argv[optind + 1], new_counts, sizeof new_counts);
    if (counts && count_only(argv[optind + 1]))
        return count_compare(base_counts, new_counts, o.max_count_growth_pct);
    run_files base, next;
    char err[2 * PATH_LEN];
    if (open_run(&base, "BASE", argv[optind], err, sizeof err) != 0) {
        fprintf(stderr, "bench compare: %s\n", err);
        close_run(&base);
        return 2;
    }
    if (open_run(&next, "NEW", argv[optind + 1], err, sizeof err) != 0) {
        fprintf(stderr, "bench compare: %s\n", err);
        close_run(&base);
        close_run(&next);
        return 2;
    }
    int rc = compare_runs(&o, &base, &next);
    close_run(&base);
    close_run(&next);
    if (counts) {
        printf("\n");
        int counts_rc = count_compare(base_counts, new_counts, o.max_count_growth_pct);
        rc = counts_rc > rc ? counts_rc : rc;
    }
    return rc;
}
