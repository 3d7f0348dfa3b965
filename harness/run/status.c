#include "harness/run/status.h"

#include <string.h>

static const char *const names[STATUS_COUNT] = {
    [STATUS_OK] = "ok",
    [STATUS_FAILED] = "failed",
    [STATUS_DIVERGED] = "diverged",
    [STATUS_INTERRUPTED] = "interrupted",
    [STATUS_SKIPPED] = "skipped",
};

const char *status_name(run_status s)
{
    return (unsigned)s < STATUS_COUNT ? names[s] : "unknown";
}

int status_parse(const char *text, run_status *out)
{
    for (int s = 0; s < STATUS_COUNT; s++)
        if (!strcmp(text, names[s])) {
            *out = (run_status)s;
            return 0;
        }
    return -1;
}
