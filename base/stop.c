#include "base/stop.h"

static const volatile sig_atomic_t *watched;

void stop_request_watch(const volatile sig_atomic_t *flag) { watched = flag; }

int stop_requested(void) { return watched && *watched; }
