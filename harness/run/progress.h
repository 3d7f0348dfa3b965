/* One line per epoch on stderr: a live bar with images/s and ETA on a
 * terminal, a plain line at the end of each epoch otherwise. */
#ifndef LB_PROGRESS_H
#define LB_PROGRESS_H

#include "harness/run/status.h"

typedef struct progress {
    int tty;
    const char *label;
    int epoch, epochs;
    long total;
    double last_draw;
} progress;

void progress_start(progress *p, const char *label, int epoch, int epochs, long total_images);
void progress_update(progress *p, long done, double elapsed, double mean_loss);
void progress_finish(progress *p, long done, double seconds, double train_loss,
                     double test_accuracy, run_status status);

#endif
