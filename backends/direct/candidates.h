/* The direct backend's candidates: for each reduced precision, one table
 * of the product sets that may compute it, and the one choice among them
 * a process makes.
 *
 * A row is {name, product set, the products and the ISA they run in
 * words, whether they run here (and why not), their rate where it is
 * measured}. The precision's environment variable (LENET_BENCH_DIRECT_BF16,
 * LENET_BENCH_DIRECT_FP16), when set and not empty, must be a row's name:
 * anything else is bad usage, refused by the harness before anything runs
 * (direct_candidates_check, called from isa.h's direct_isa_check). The
 * choice (choice.c), made once a process per precision:
 *   - named: that row, or the precision refused with the row's reason
 *     (left out of this build, not on this CPU, kept off by
 *     LENET_BENCH_DIRECT_ISA);
 *   - else, of the rows that run here and are not named_only, the one of
 *     the highest rate against the fp32 FMAs (1 where not measured: the
 *     fp32 tiles' own rate); a tie goes to the row listed first;
 *   - none: the precision is refused with the reasons.
 * The engine is created with the chosen row's set, and what the backend
 * says of itself (probe, describe, library_info) is read from the choice.
 *
 * The tables are part of the program as well as the module: the harness
 * reads their names only. A row names its set and functions weakly
 * (candidates.c), so the program links without them and a module whose
 * compiler lacked a set's instructions has a row whose set is NULL (left
 * out of this build, with the row's `missing`). */
#ifndef LB_DIRECT_CANDIDATES_H
#define LB_DIRECT_CANDIDATES_H

#include <stddef.h>

struct chwn_products_f32;

typedef struct direct_candidate {
    const char *name; /* the environment variable's value: "dot" */
    const struct chwn_products_f32 *set; /* NULL: left out of this build */
    const char *missing;  /* why a build leaves it out (the compiler lacks...) */
    const char *products; /* in words, for the details: "bf16 products (vdpbf16ps)" */
    const char *isa;      /* the ISA it runs, in words; NULL: the fp32 tiles' (direct_active) */
    /* 1 when it runs here; else 0 with a short reason (for the details of
     * the row chosen instead) and the whole one (for a refusal). NULL: it
     * runs wherever the fp32 tiles do. */
    int (*runs)(char *brief, size_t brief_len, char *why, size_t why_len);
    /* its flops over the fp32 FMAs' on this CPU, measured once a process;
     * NULL: not measured (1, the fp32 tiles' rate) */
    double (*rate)(void);
    int named_only; /* chosen only when the variable names it (a slow stand-in) */
} direct_candidate;

typedef struct direct_candidates {
    const char *precision; /* "bf16" */
    const char *variable;  /* "LENET_BENCH_DIRECT_BF16" */
    const direct_candidate *rows;
    int count;
} direct_candidates;

/* The tables (candidates.c). */
extern const direct_candidates direct_bf16_candidates, direct_fp16_candidates;

/* The row of t named `name`, or NULL. */
const direct_candidate *direct_candidate_named(const direct_candidates *t, const char *name);

/* The variable's value when set and not empty, else NULL. */
const char *direct_candidate_asked(const direct_candidates *t);

/* 0 when both variables are unset, empty or a row's name; else -1 with
 * "LENET_BENCH_DIRECT_FP16=x: not one of avx512_fp16, emulated" in err. */
int direct_candidates_check(char *err, size_t err_len);

/* The choice of a table (choice.c, in the module). */
typedef struct direct_choice {
    const direct_candidate *row;
    char why[192]; /* why this row: "forced by LENET_BENCH_DIRECT_BF16=dot" */
} direct_choice;

/* The choice for t, made once a process (the fp32 tiles are chosen with
 * it: direct_choose): the row and why; NULL with the reason in why when
 * none runs here. */
const direct_choice *direct_candidates_choose(const direct_candidates *t, char *why,
                                              size_t why_len);

/* The row of t whose set is `set`, or NULL. */
const direct_candidate *direct_candidate_of_set(const direct_candidates *t,
                                                const struct chwn_products_f32 *set);

/* Each row of t for library_info: "fma (chosen: bf16 products (vdpbf16ps)
 * measured at 0.51x the FMA rate here), dot (0.51x the FMA rate here)",
 * the chosen one with why, the others with their measured rate, or why
 * they do not run here. */
void direct_candidates_list(const direct_candidates *t, char *buf, size_t len);

#endif
