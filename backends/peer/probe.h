/* Which python and framework script a peer runs, found once per process:
 * LENET_BENCH_PYTORCH_SCRIPT, else backends/peer/train.py beside the
 * program or in the source tree; the interpreter, in this order:
 *   1. LENET_BENCH_PYTHON, when set;
 *   2. the project's environment (`make peer`): LENET_BENCH_PEER_ENV, else
 *      .venv-peer beside the program, else in the source tree; when its
 *      directory is there, its bin/python is the peer's, and an
 *      environment that does not answer the probe makes the peer not
 *      runnable with the reason (never a quiet fall back to an older
 *      PyTorch);
 *   3. the system's: python3 on PATH, then /usr/bin/python3 (Debian's
 *      python3-torch), the first whose `script --probe` answers.
 * The probe's answer says the torch version and its CPU libraries
 * (oneDNN, BLAS, OpenMP), which --list, the rows' details and system.json
 * name with the interpreter and where it came from. */
#ifndef LB_PEER_PROBE_H
#define LB_PEER_PROBE_H

#include <limits.h>
#include <stddef.h>

enum { MSG_LEN = 512 };

typedef struct peer_probe {
    int done, ok; /* probed; python and script found */
    char python[PATH_MAX];
    char script[PATH_MAX];
    char version[64];
    char source[128];    /* where the interpreter came from: "LENET_BENCH_PYTHON", ... */
    char libraries[256]; /* its CPU libraries, from the probe ("" unknown) */
    int gpus;
    int cpu_bf16; /* CPU autocast to bfloat16 works (the bf16 peer) */
    int cpu_fp16; /* CPU autocast to float16 works (no fp16 peer yet) */
    int compile;  /* torch.compile can run here (the pytorch-compile row) */
    char no_compile[256]; /* why not, when it cannot */
    char why[MSG_LEN];
} peer_probe;

/* The probe, made on the first call (it starts python). */
const peer_probe *probe_once(void);
/* A copy of what an earlier probe found, taken under its lock, without
 * probing (done == 0 before one). */
peer_probe probe_found(void);
/* "PyTorch 2.15.0 from the project's environment (make peer) (PATH);
 * CPU libraries: ..." from what an earlier probe found; "" before one or
 * when none answered. */
void probe_describe(char *buf, size_t len);

#endif
