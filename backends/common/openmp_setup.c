#include "backends/common/openmp_setup.h"

#include <stdio.h>
#include <stdlib.h>

static openmp_setup setup;

void openmp_setup_prepare(void)
{
    if (setup.prepared)
        return;
    const char *wait = getenv("OMP_WAIT_POLICY");
    setup.wait_policy_by_user = wait != NULL;
    if (!wait)
        setenv("OMP_WAIT_POLICY", "passive", 1);
    snprintf(setup.wait_policy, sizeof setup.wait_policy, "%s", getenv("OMP_WAIT_POLICY"));
    setup.prepared = 1;
}

const openmp_setup *openmp_setup_get(void) { return &setup; }

void openmp_setup_describe(char *buf, size_t len, int with_reasons)
{
    (void)with_reasons;
    if (!setup.prepared)
        snprintf(buf, len, "%s", "");
    else
        snprintf(buf, len, "OMP_WAIT_POLICY=%s (%s)", setup.wait_policy,
                 setup.wait_policy_by_user ? "set by the user" : "default");
}
