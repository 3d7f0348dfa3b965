/* The environment the blas backend's libraries start in: which OpenBLAS
 * kernels (OPENBLAS_CORETYPE) and how idle OpenMP threads wait
 * (OMP_WAIT_POLICY). Both are read once, when OpenBLAS and libgomp start,
 * so they are decided here, in the program, before the registry loads the
 * blas module (the registry calls blas_setup_prepare(), the hook
 * backends/blas/registration.c gives it).
 *
 * Kernels. OpenBLAS's DYNAMIC_ARCH build picks its kernels from the CPU's
 * family and model, and on a model it does not know it may fall back to a
 * generic one: OpenBLAS 0.3.21 runs its Prescott (SSE3) kernels on an Intel
 * Xeon of family 6 model 207, with AVX-512, at a sixth of the speed. So,
 * unless the user set OPENBLAS_CORETYPE (which always wins), the program
 *   1. asks the library for its own choice, in a short-lived child process;
 *   2. if that core is older than what the CPU's features allow (cpuid:
 *      AVX-512 F/BW/VL/DQ -> SkylakeX, plus AVX512_BF16 -> Cooperlake;
 *      AVX2 + FMA -> Haswell, Zen on AMD), tries the better cores the
 *      library offers, best first, each in its own child that loads the
 *      library with that core and checks its sgemm against a plain
 *      reference on a few shapes (odd sizes, every transpose, threaded);
 *   3. takes the first that passes, by setting OPENBLAS_CORETYPE in its
 *      own environment; if none does, keeps the library's choice and says
 *      why. A child that crashes (an illegal instruction) or hangs costs
 *      only its candidate.
 * The choice and its reason go to --list, each blas row's details and
 * system.json.
 *
 * Waiting. libgomp's idle threads spin for milliseconds before sleeping;
 * on a shared machine the spinning thread keeps its partner off the core
 * (blas 2-3x slower under load). Unless OMP_WAIT_POLICY is set, the
 * program sets it to passive. */
#ifndef LB_KERNEL_CHOICE_H
#define LB_KERNEL_CHOICE_H

#include <stddef.h>

/* CPU features that decide the kernels (cpuid, with the OS saving the
 * registers: XCR0). */
enum {
    KC_AVX2 = 1 << 0,
    KC_FMA = 1 << 1,
    KC_AVX512F = 1 << 2,
    KC_AVX512BW = 1 << 3,
    KC_AVX512VL = 1 << 4,
    KC_AVX512DQ = 1 << 5,
    KC_AVX512_BF16 = 1 << 6,
};

typedef struct kc_cpu {
    char vendor[16]; /* "GenuineIntel", "AuthenticAMD", "" off x86 */
    int family, model;
    unsigned features; /* KC_* bits */
} kc_cpu;

/* This machine's CPU, as base/cpu.h reads it at run time. */
void kc_read_cpu(kc_cpu *cpu);

/* "AVX-512 (F, BW, VL, DQ) + BF16", "AVX2 + FMA", "no AVX2" */
const char *kc_feature_summary(unsigned features);

/* What one child process found. */
typedef struct kc_probe {
    int answered;     /* the child answered (it did not crash or hang) */
    int ran;          /* the child loaded the library and answered */
    char core[32];    /* openblas_get_corename() there */
    int checked;      /* the sgemm check ran */
    int check_ok;     /* and matched the reference */
    char why[200];    /* why it did not run, or how the check failed */
} kc_probe;

/* The better cores to try for cpu, best first (at most 3). */
int kc_candidates(const kc_cpu *cpu, const char **out, int max);

/* 1 when the library's own core is older than what cpu's features allow,
 * so the candidates above it are worth trying; 0 for a core it knows to be
 * current, or one it does not know (left alone). */
int kc_library_choice_is_weak(const char *library_core, const kc_cpu *cpu);

typedef enum kc_source {
    KC_SOURCE_USER,    /* OPENBLAS_CORETYPE set before the program started */
    KC_SOURCE_LIBRARY, /* the library's own choice, kept */
    KC_SOURCE_CHOSEN,  /* set by the program */
} kc_source;

typedef struct kc_decision {
    kc_source source;
    char core[32];    /* the core OpenBLAS will run ("" when unknown) */
    char asked[32];   /* what OPENBLAS_CORETYPE asks for ("" when unset) */
    int refused;      /* the user's core failed in its child: blas cannot run */
    char reason[512]; /* one line */
} kc_decision;

/* The decision as a pure function of what was found: the user's value
 * (NULL when unset), the CPU, the library's own choice and the candidates
 * kc_candidates() named, each with its child's answer (candidates at or
 * below the library's core may be left unprobed: ran == 0). */
void kc_decide(const char *user_value, const kc_cpu *cpu, const kc_probe *library,
               const char *const *candidates, const kc_probe *probes, int n,
               kc_decision *out);

/* The user's OPENBLAS_CORETYPE as its child process found it (user: what
 * it asks for): the core that ran becomes the decision's, and a core that
 * did not run or failed the sgemm check refuses the blas backend (loading
 * OpenBLAS with it here could end the whole run with an illegal
 * instruction). */
void kc_judge_user(const char *user, const kc_probe *probe, kc_decision *d);

/* Test hooks for blas_setup_decide(); production passes NULL. */
typedef struct kc_hooks {
    const char *pretend_user_value;   /* as if OPENBLAS_CORETYPE were this */
    const char *pretend_library_core; /* as if the library had chosen this */
    const kc_cpu *pretend_cpu;        /* as if the CPU were this one */
    int corrupt_candidate_sgemm;      /* spoil each candidate's sgemm result */
    int child_hangs;                  /* each child sleeps instead of answering */
} kc_hooks;

/* Finds the decision (children and all) without changing this process's
 * environment. */
void blas_setup_decide(const kc_hooks *hooks, kc_decision *out);

/* What the blas backend starts with, once decided. */
typedef struct blas_setup {
    int prepared;           /* blas_setup_prepare() ran */
    kc_decision kernels;
} blas_setup;

/* Decides, and sets OPENBLAS_CORETYPE (when chosen) and OMP_WAIT_POLICY
 * (when unset: backends/common/openmp_setup.h) in this process's
 * environment. Runs once; later calls do nothing. Call before the blas
 * module is loaded. */
void blas_setup_prepare(void);
/* The same with test hooks (blas_setup_decide's). */
void blas_setup_prepare_with(const kc_hooks *hooks);

/* The setup this process prepared (prepared == 0 before). */
const blas_setup *blas_setup_get(void);

/* The registration's refusal hook: 1 when the blas module must not be
 * loaded (the user's core failed in its child), with the reason. */
int blas_setup_refused(char *why, size_t len);

/* One line for the rows' details, "kernels Haswell (chosen by the
 * program), OMP_WAIT_POLICY=passive (default)", and with the kernels'
 * reason for --list; "" before blas_setup_prepare(). */
void blas_setup_describe(char *buf, size_t len, int with_reasons);

/* The table the blas module hands out as "kernel_probe": what a child
 * needs from the library it loaded. */
typedef struct blas_kernel_probe {
    const char *(*corename)(void);
    /* row-major C = alpha op(A) op(B) + beta C, on the library's threads */
    void (*sgemm)(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc);
} blas_kernel_probe;

#endif
