/* `./bench compare BASE NEW`: which configurations got slower, less
 * accurate or numerically different between two runs, with a significance
 * test so that timing noise cannot flap the gate. */
#ifndef LB_COMPARE_H
#define LB_COMPARE_H

/* Whether a configuration's speed regressed. base and next are the figures
 * (images/s, higher is faster); the samples are per-epoch images/s. */
typedef struct speed_verdict {
    double slowdown_pct; /* (base / next - 1) * 100: > 0 means slower */
    int u_test_used;     /* 0: too few samples, the threshold alone decided */
    double p;            /* the U test's p when used */
    int regression;
} speed_verdict;
speed_verdict judge_speed(double base, double next, const double *base_samples, int n_base,
                          const double *next_samples, int n_next, double max_slowdown_pct,
                          double alpha);

/* The subcommand; argv[0] is "compare". Exit status 0, 1 or 2. */
int compare_main(int argc, char **argv);

#endif
