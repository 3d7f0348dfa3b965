/* Which python and framework script a peer runs, found once per process:
 * LENET_BENCH_PYTORCH_SCRIPT, else backends/peer/train.py beside the
 * program or in the source tree; LENET_BENCH_PYTHON, else python3 on PATH,
 * then /usr/bin/python3, the first whose `script --probe` answers (torch
 * imports). */
#ifndef LB_PEER_PROBE_H
#define LB_PEER_PROBE_H

#include <limits.h>

enum { MSG_LEN = 512 };

typedef struct peer_probe {
    int done, ok; /* probed; python and script found */
    char python[PATH_MAX];
    char script[PATH_MAX];
    char version[64];
    int gpus;
    int cpu_bf16; /* CPU autocast to bfloat16 works (the bf16 peer) */
    int cpu_fp16; /* CPU autocast to float16 works (no fp16 peer yet) */
    char why[MSG_LEN];
} peer_probe;

/* The probe, made on the first call (it starts python). */
const peer_probe *probe_once(void);
/* A copy of what an earlier probe found, taken under its lock, without
 * probing (done == 0 before one). */
peer_probe probe_found(void);

#endif
