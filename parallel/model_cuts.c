/* Where the by-layers split of a model-parallel run cuts the network. */
#include "parallel/model_parallel_impl.h"

/* Where the by-layers split cuts ------------------------------------------ */

/* Work of a layer for the balance: its training multiply-adds, or the
 * numbers a pool or ReLU touches. */
static double layer_work(const layer *l)
{
    if (l->kind == LAYER_CONV)
        return 3.0 * (double)l->weight_count * l->out.h * l->out.w;
    if (l->kind == LAYER_DENSE)
        return 3.0 * (double)l->weight_count;
    return (double)shape3_size(l->in);
}

typedef struct cut_search {
    const workload *w;
    int workers;
    double limit;  /* the largest stage may do at most this much */
    double best_crossing;
    int cut[WORKLOAD_MAX_LAYERS + 1], best[WORKLOAD_MAX_LAYERS + 1];
    double best_max;
} cut_search;

/* Every way to cut layers [from, n) into the stages k.. that are left. */
static void search_cuts(cut_search *c, int k, int from, double max_so_far, double crossing)
{
    const int n = c->w->n_layers, left = c->workers - k;
    if (left == 1) {
        double work = 0;
        for (int i = from; i < n; i++)
            work += layer_work(&c->w->layers[i]);
        const double max = work > max_so_far ? work : max_so_far;
        if (c->limit > 0 ? (max <= c->limit && crossing < c->best_crossing) : max < c->best_max) {
            c->cut[k + 1] = n;
            memcpy(c->best, c->cut, sizeof c->best);
            c->best_max = max;
            c->best_crossing = crossing;
        }
        return;
    }
    double work = 0;
    for (int end = from + 1; end <= n - (left - 1); end++) {
        work += layer_work(&c->w->layers[end - 1]);
        const double max = work > max_so_far ? work : max_so_far;
        if (c->limit > 0 && max > c->limit)
            break;
        c->cut[k + 1] = end;
        search_cuts(c, k + 1, end, max, crossing + shape3_size(c->w->layers[end - 1].out));
    }
}

int mp_layer_cuts(const workload *w, int workers, int *cut)
{
    if (workers < 1 || workers > w->n_layers)
        return -1;
    cut_search c = {.w = w, .workers = workers, .best_max = 1e300, .best_crossing = 1e300};
    search_cuts(&c, 0, 0, 0, 0); /* the smallest largest stage */
    c.limit = c.best_max * 1.02;
    c.best_crossing = 1e300;
    search_cuts(&c, 0, 0, 0, 0); /* then the fewest activations crossing */
    memcpy(cut, c.best, sizeof(int) * (workers + 1));
    cut[0] = 0;
    return 0;
}
