/* ./bench: train LeNet with each backend and record how fast each one is. */
#include <stdio.h>

#include "harness/config.h"
#include "harness/run.h"

int main(int argc, char **argv)
{
    static run_config cfg;
    int rc = cli_parse(argc, argv, &cfg);
    if (rc == 1)
        return 0;
    if (rc)
        return rc;
    return run_benchmark(&cfg);
}
