#include "harness/common/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

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
    double *sorted = xmalloc(sizeof(double) * (size_t)n);
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

/* ---- Mann-Whitney U ---------------------------------------------------- */

typedef struct tagged {
    double value;
    int from_x;
} tagged;

static int cmp_tagged(const void *a, const void *b)
{
    double x = ((const tagged *)a)->value, y = ((const tagged *)b)->value;
    return (x > y) - (x < y);
}

u_test mann_whitney_u(const double *x, int nx, const double *y, int ny)
{
    u_test r = {0, 0, 1};
    int n = nx + ny;
    if (nx < 1 || ny < 1)
        return r;
    tagged *all = xmalloc(sizeof(tagged) * (size_t)n);
    for (int i = 0; i < nx; i++)
        all[i] = (tagged){x[i], 1};
    for (int i = 0; i < ny; i++)
        all[nx + i] = (tagged){y[i], 0};
    qsort(all, (size_t)n, sizeof(tagged), cmp_tagged);
    /* Tied values share the mean of the ranks they span. */
    double rank_sum_x = 0, tie_term = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && all[j].value == all[i].value)
            j++;
        double t = j - i, mean_rank = (i + 1 + j) / 2.0;
        for (int k = i; k < j; k++)
            if (all[k].from_x)
                rank_sum_x += mean_rank;
        tie_term += t * t * t - t;
        i = j;
    }
    free(all);
    r.u = rank_sum_x - nx * (nx + 1) / 2.0;
    double mu = nx * (double)ny / 2.0;
    double var = nx * (double)ny / 12.0 * ((n + 1) - tie_term / ((double)n * (n - 1)));
    if (!(var > 0))
        return r; /* every value tied: no evidence of a difference */
    double sigma = sqrt(var);
    double dev = fabs(r.u - mu) - 0.5;
    if (dev < 0)
        dev = 0;
    r.z = (r.u < mu ? -dev : dev) / sigma;
    r.p = erfc(fabs(r.z) / sqrt(2.0));
    if (r.p > 1)
        r.p = 1;
    return r;
}

double mann_whitney_min_p(int nx, int ny)
{
    if (nx < 1 || ny < 1)
        return 1;
    double mu = nx * (double)ny / 2.0;
    double sigma = sqrt(nx * (double)ny * (nx + ny + 1) / 12.0);
    double p = erfc((mu - 0.5) / sigma / sqrt(2.0));
    return p > 1 ? 1 : p;
}
