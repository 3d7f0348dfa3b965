/* Which build of the direct backend's kernels may run, decided before any
 * of them loads: the names LENET_BENCH_DIRECT_ISA takes, the one rule that
 * ties the AVX-512 products of the half sets (vdpbf16ps, vfmadd231ph) to
 * it, and how many 512-bit FMA ports a core has (which AVX-512 tiles fit
 * it). Part of the program, not only of the direct module: the harness
 * refuses a value that names no build, and a LENET_BENCH_DIRECT_BF16 or
 * _FP16 that names no candidate (backends/direct/candidates.h), as bad
 * usage (exit 2) before it runs or lists anything.
 *
 * The builds are listed once, in DIRECT_ISAS (backends/direct/module.mk),
 * which hands them to this file and to dispatch.c as LB_DIRECT_ISAS(X).
 *
 * The rules: LENET_BENCH_DIRECT_ISA, when set and not empty, must name a
 * build (direct_isa_check). It forces the fp32 kernels (dispatch.c). The
 * vdpbf16ps and vfmadd231ph products are AVX-512 code of their own, so
 * they run only where the choice is an AVX-512 build: none forced, or
 * avx512* (direct_isa_allows_avx512). bf16 itself runs wherever the fp32
 * kernels do: beside a forced avx2 or generic (a run meant to keep off
 * AVX-512) on fp32 FMAs over that build's tiles (bf16/bf16_fma.h); fp16
 * there only emulated, when LENET_BENCH_DIRECT_FP16=emulated asks. */
#ifndef LB_DIRECT_ISA_H
#define LB_DIRECT_ISA_H

#include <stddef.h>

#include "base/cpu.h"

/* The builds' names, best first: "avx512_2fma", "avx512", "avx2",
 * "generic" on x86-64, "generic" elsewhere (DIRECT_ISAS). */
int direct_isa_count(void);
const char *direct_isa_name(int i);

/* LENET_BENCH_DIRECT_ISA when set and not empty, else NULL. */
const char *direct_isa_forced(void);

/* 0 when LENET_BENCH_DIRECT_ISA is unset, empty or a build's name and
 * LENET_BENCH_DIRECT_BF16 and _FP16 unset, empty or a candidate's name;
 * else -1 with "LENET_BENCH_DIRECT_ISA=x: not one of avx512_2fma, ..."
 * (or "LENET_BENCH_DIRECT_BF16=x: not one of fma, dot") in err. */
int direct_isa_check(char *err, size_t err_len);

/* 1 when AVX-512 code of a product set of its own (`what`: "vdpbf16ps
 * products") may run beside the fp32 kernels chosen; else 0 with the
 * reason in why (a value that names no build, or a forced build without
 * AVX-512). Says nothing of the CPU: the set's own check asks it. */
int direct_isa_allows_avx512(const char *what, char *why, size_t why_len);

/* The `runs` check (candidates.h) of such a set: 1 where
 * direct_isa_allows_avx512 lets it run and `supported` finds the CPU
 * feature it needs (`feature`: "AVX512_BF16"); else 0 with a short reason
 * in brief ("no AVX512_BF16 here") and the whole one in why. */
int direct_isa_avx512_set_runs(const char *what, int (*supported)(char *why, size_t why_len),
                               const char *feature, char *brief, size_t brief_len, char *why,
                               size_t why_len);

/* 512-bit FMAs a core of this CPU retires per cycle, from what cpuid
 * says: 2 on Intel's server cores from Skylake-SP on (by model, a hint a
 * hypervisor may hide; or by the features only Sapphire Rapids and later
 * have, AMX-TILE or AVX512_FP16) and on AMD Zen 5 but its mobile parts,
 * else 1 (Zen 4 splits a 512-bit FMA into two 256-bit halves; Intel's
 * client cores fuse two 256-bit ports into one), and 0 without AVX-512. */
int direct_fma_ports_512(const cpu_info *cpu);

/* The same for this machine's CPU, and why (for the program's listing):
 * direct_fma_ports_512, and where it says 1 the core itself, measured
 * once a process (about a millisecond): 2 where 512-bit FMAs do at least
 * 1.5x the flops of 256-bit ones, as on a core with two 512-bit ports
 * under a hypervisor that masks both model and features. */
int direct_fma_ports_here(char *why, size_t why_len);

/* That measurement alone: 512-bit FMA flops over 256-bit ones on this
 * core (best of 16 short trials each), 0 without AVX-512 and AVX2. */
double direct_fma_zmm_over_ymm(void);

/* The build the direct backend runs here unforced, by the rule dispatch.c
 * applies to its tables (test_direct_kernels holds the two together), or
 * the forced one; why in why ("two 512-bit FMA ports: AMX-TILE, ..."). */
const char *direct_isa_best(char *why, size_t why_len);

#endif
