#include "harness/run/progress.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"

void progress_start(progress *p, const char *label, int epoch, int epochs, long total_images)
{
    p->tty = isatty(STDERR_FILENO);
    p->label = label;
    p->epoch = epoch;
    p->epochs = epochs;
    p->total = total_images;
    p->last_draw = -1;
}

void progress_update(progress *p, long done, double elapsed, double mean_loss)
{
    if (!p->tty || elapsed - p->last_draw < 0.1)
        return;
    p->last_draw = elapsed;
    enum { WIDTH = 24 };
    char bar[WIDTH + 1];
    int fill = p->total ? (int)(WIDTH * done / p->total) : 0;
    memset(bar, '#', (size_t)fill);
    memset(bar + fill, '.', (size_t)(WIDTH - fill));
    bar[WIDTH] = 0;
    double rate = elapsed > 0 ? done / elapsed : 0;
    double eta = rate > 0 ? (p->total - done) / rate : 0;
    fprintf(stderr, "\r%-10s epoch %d/%d [%s] %6ld/%ld  %9.0f img/s  loss %.4f  ETA %5.1fs ",
            p->label, p->epoch, p->epochs, bar, done, p->total, rate, mean_loss, eta);
    fflush(stderr);
}

void progress_finish(progress *p, long done, double seconds, double train_loss,
                     double test_accuracy, run_status status)
{
    if (p->tty)
        fprintf(stderr, "\r\033[K");
    fprintf(stderr, "%-10s epoch %d/%d  %ld images  %.3f s  %.0f img/s  loss %.4f  test acc %.4f%s%s\n",
            p->label, p->epoch, p->epochs, done, seconds, seconds > 0 ? done / seconds : 0.0,
            train_loss, test_accuracy, status != STATUS_OK ? "  " : "",
            status != STATUS_OK ? status_name(status) : "");
}
