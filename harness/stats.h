/* Summary statistics over timing samples. */
#ifndef LB_STATS_H
#define LB_STATS_H

typedef struct sample_stats {
    int n;
    double median, mean, stddev, min, max;
} sample_stats;

/* Median, mean, sample standard deviation (n-1), min and max; all zero
 * when n is 0. Does not reorder v. */
sample_stats stats_of(const double *v, int n);

#endif
