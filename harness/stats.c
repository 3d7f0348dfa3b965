#include "harness/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

sample_stats stats_of(const double *v, int n)
{
    sample_stats s = {0};
    if (n <= 0)
        return s;
    double *sorted = malloc(sizeof(double) * (size_t)n);
    if (!sorted)
        return s;
    memcpy(sorted, v, sizeof(double) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof(double), cmp_double);
    s.n = n;
    s.min = sorted[0];
    s.max = sorted[n - 1];
    s.median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    s.mean = sum / n;
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += (v[i] - s.mean) * (v[i] - s.mean);
    s.stddev = n > 1 ? sqrt(ss / (n - 1)) : 0.0;
    s.cv = s.mean != 0 ? s.stddev / s.mean : 0.0;
    free(sorted);
    return s;
}

int warmup_epochs(int planned_epochs) { return planned_epochs >= 3 ? 1 : 0; }

int timed_samples(const double *epoch_seconds, int done, int planned_epochs, double *out)
{
    int skip = warmup_epochs(planned_epochs);
    if (done <= skip)
        skip = 0;
    for (int i = skip; i < done; i++)
        out[i - skip] = epoch_seconds[i];
    return done > skip ? done - skip : 0;
}
