/* A request to stop, for the work that may take seconds wherever it sits
 * (the peak probes, the blas backend's kernel-check children): the run
 * names the flag its stop signal sets, and such work asks between its
 * steps whether it is set, so that a stopped run is not held up by it. */
#ifndef LB_BASE_STOP_H
#define LB_BASE_STOP_H

#include <signal.h>

/* The flag to look at (non-zero: stop); NULL: none, nothing stops. */
void stop_request_watch(const volatile sig_atomic_t *flag);
/* Whether a stop was requested. */
int stop_requested(void);

#endif
