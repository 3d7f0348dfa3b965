#include "backends/common/openmp_setup.h"

#include <stdio.h>
#include <stdlib.h>

static openmp_setup setup;

/* Spins of libgomp's wait loop (a pause instruction each, tens of cycles)
 * before a waiting thread sleeps: about a millisecond */
#define DEFAULT_SPIN_COUNT "30000"

void openmp_setup_prepare(void)
{
    if (setup.prepared)
        return;
    const char *wait = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    setup.wait_policy_by_user = wait != NULL;
    setup.spin_count_by_user = spin != NULL;
    if (!wait && !spin)
        setenv("GOMP_SPINCOUNT", DEFAULT_SPIN_COUNT, 1);
    if (!wait)
        setenv("OMP_WAIT_POLICY", "passive", 1);
    snprintf(setup.wait_policy, sizeof setup.wait_policy, "%s", getenv("OMP_WAIT_POLICY"));
    spin = getenv("GOMP_SPINCOUNT");
    snprintf(setup.spin_count, sizeof setup.spin_count, "%s", spin ? spin : "");
    setup.prepared = 1;
}

const openmp_setup *openmp_setup_get(void) { return &setup; }

void openmp_setup_describe(char *buf, size_t len, int with_reasons)
{
    (void)with_reasons;
    if (!setup.prepared)
        snprintf(buf, len, "%s", "");
    else if (!setup.spin_count[0])
        snprintf(buf, len, "OMP_WAIT_POLICY=%s (%s)", setup.wait_policy,
                 setup.wait_policy_by_user ? "set by the user" : "default");
    else
        snprintf(buf, len, "OMP_WAIT_POLICY=%s (%s), GOMP_SPINCOUNT=%s (%s)", setup.wait_policy,
                 setup.wait_policy_by_user ? "set by the user" : "default", setup.spin_count,
                 setup.spin_count_by_user ? "set by the user" : "default");
}
