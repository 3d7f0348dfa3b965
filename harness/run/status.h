/* How training one configuration ended: the status column of epochs.csv
 * and summary.csv, and what compare, history and plot decide by. */
#ifndef LB_STATUS_H
#define LB_STATUS_H

typedef enum run_status {
    STATUS_OK,
    STATUS_FAILED,      /* the engine reported an error */
    STATUS_DIVERGED,    /* a training or test loss became NaN or Inf */
    STATUS_INTERRUPTED, /* stopped by SIGINT or SIGTERM */
    STATUS_SKIPPED,     /* not built, or cannot run on this machine */
    STATUS_COUNT
} run_status;

/* Its name in the CSV files and tables: "ok", "failed", ... */
const char *status_name(run_status s);

/* The status a CSV field names: 0, or -1 when it names none. */
int status_parse(const char *text, run_status *out);

#endif
