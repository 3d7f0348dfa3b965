/* Summary statistics over timing samples, which samples count, and the
 * significance test that compares two sets of them. */
#ifndef LB_STATS_H
#define LB_STATS_H

typedef struct sample_stats {
    int n;
    double median, mean, stddev, min, max;
    double cv; /* stddev / mean: the spread relative to the size */
} sample_stats;

/* Median, mean, sample standard deviation (n-1), min, max and cv; all zero
 * when n is 0. Does not reorder v. */
sample_stats stats_of(const double *v, int n);

/* The warm-up rule: how many leading epochs of each run the statistics
 * leave out.
 *
 * An epoch time covers only that epoch's training steps (forward, backward,
 * update, and the host-side batch order). It never includes engine creation,
 * the parameter upload, binding or uploading the dataset, evaluation, or
 * anything done between epochs. The first epoch of every run still pays
 * one-time costs inside the steps (first touch of buffers, cuDNN algorithm
 * search, CUDA graph capture, thread pools starting, clocks ramping up), so
 * it is written to epochs.csv like the others but left out of the median,
 * mean and stddev when a run has 3 or more epochs. With 1 or 2 epochs every
 * epoch counts, since dropping one would leave one sample or none. */
int warmup_epochs(int planned_epochs);

/* Appends the timed epochs of one run to out (epoch_seconds holds the
 * `done` epochs that finished); returns how many it appended. When the run
 * stopped before passing its warm-up, all of its epochs are used. */
int timed_samples(const double *epoch_seconds, int done, int planned_epochs, double *out);

/* Two-sided Mann-Whitney U test, normal approximation with tie and
 * continuity corrections (scipy's "asymptotic" method). u is the U of x;
 * p is 1 when every value is tied. */
typedef struct u_test {
    double u, z, p;
} u_test;
u_test mann_whitney_u(const double *x, int nx, const double *y, int ny);

/* The smallest p the test can give for these sample counts (the two
 * samples fully separated, no ties): when it is >= alpha the test can
 * never find a difference, so it is not worth running. */
double mann_whitney_min_p(int nx, int ny);

#endif
