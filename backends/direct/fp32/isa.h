/* Which build of the direct backend's kernels may run, decided before any
 * of them loads: the names LENET_BENCH_DIRECT_ISA and
 * LENET_BENCH_DIRECT_BF16 take, the one rule that ties the vdpbf16ps
 * products to the first, and how many 512-bit FMA ports a core has (which
 * AVX-512 tiles fit it). Part of the program, not only of the direct
 * module: the harness refuses a value that names no build (or way) as bad
 * usage (exit 2) before it runs or lists anything.
 *
 * The rules: LENET_BENCH_DIRECT_ISA, when set and not empty, must name a
 * build (direct_isa_check). It forces the fp32 kernels (dispatch.c). The
 * vdpbf16ps products are AVX-512 code of their own, so they run only where
 * the choice is an AVX-512 build: none forced, or avx512*
 * (direct_isa_allows_bf16). bf16 itself runs wherever the fp32 kernels
 * do: beside a forced avx2 or generic (a run meant to keep off AVX-512) on
 * fp32 FMAs over that build's tiles (bf16_fma.h).
 * LENET_BENCH_DIRECT_BF16, when set and not empty, must be "dot" (the
 * vdpbf16ps products, refused with the reason where they cannot run) or
 * "fma" (fp32 FMAs on bf16-rounded operands); unset, the choice is
 * measured (bf16_fma.h). */
#ifndef LB_DIRECT_ISA_H
#define LB_DIRECT_ISA_H

#include <stddef.h>

#include "base/cpu.h"

/* The builds' names, best first: "avx512_2fma", "avx512", "avx2",
 * "generic" on x86-64, "generic" elsewhere. */
int direct_isa_count(void);
const char *direct_isa_name(int i);

/* LENET_BENCH_DIRECT_ISA when set and not empty, else NULL. */
const char *direct_isa_forced(void);

/* 0 when LENET_BENCH_DIRECT_ISA is unset, empty or a build's name and
 * LENET_BENCH_DIRECT_BF16 unset, empty, "dot" or "fma"; else -1 with
 * "LENET_BENCH_DIRECT_ISA=x: not one of avx512_2fma, ..." (or
 * "LENET_BENCH_DIRECT_BF16=x: not one of dot, fma") in err. */
int direct_isa_check(char *err, size_t err_len);

/* LENET_BENCH_DIRECT_BF16 when "dot" or "fma", else NULL. */
const char *direct_bf16_forced(void);

/* 1 when the vdpbf16ps products may run beside the fp32 kernels chosen;
 * else 0 with the reason in why (a value that names no build, or a forced
 * build without AVX-512: bf16 then runs on fp32 FMAs). Says nothing of
 * the CPU: direct_bf16_supported asks this first, then the CPU. */
int direct_isa_allows_bf16(char *why, size_t why_len);

/* 512-bit FMAs a core of this CPU retires per cycle, from its vendor,
 * family and model: 2 on Intel's server cores from Skylake-SP on and on
 * AMD Zen 5 but its mobile parts, else 1 (Zen 4 splits a 512-bit FMA into
 * two 256-bit halves; Intel's client cores fuse two 256-bit ports into
 * one), and 0 without AVX-512. */
int direct_fma_ports_512(const cpu_info *cpu);

#endif
