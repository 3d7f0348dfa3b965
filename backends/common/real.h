/* Code written once over `real` and compiled twice: as float (the fp32
 * engines) and, with -DLB_REAL_DOUBLE, as double (the fp64 engines). The
 * Makefile's REAL_TWICE list names the sources built both ways; their
 * objects are foo.o and foo_f64.o. R(name) gives each external name its
 * version (name_f32, name_f64), so both link into one program.
 *
 * The blas backend builds its sources a third time, with -DLB_REAL_BF16:
 * float again, but with bf16 GEMMs (backends/blas/bf16.h); objects
 * foo_bf16.o, names name_bf16. LB_REAL_PLAIN is defined in the plain float
 * build only, for what a file holds once whatever the type.
 *
 * The direct backend builds the blas engine's sources once more, with
 * -DLB_REAL_DIRECT: float, with the direct kernels as its products
 * (backends/direct/direct.h) and no OpenBLAS; objects foo_direct.o, names
 * name_direct. LB_REAL_DIRECT_FP32 is defined in that build only, for what
 * the direct backend holds once. With -DLB_REAL_DIRECT -DLB_DIRECT_BF16 it
 * builds them a fifth time: float, with the bf16 products
 * (backends/direct/bf16.h) instead; objects foo_direct_bf16.o, names
 * name_direct_bf16.
 *
 * TYPED(member) names the view of a member of a shared struct that has the
 * build's type (host_engine's params_f32 or params_f64). */
#ifndef LB_REAL_H
#define LB_REAL_H

#if defined(LB_REAL_DOUBLE)
typedef double real;
#define R(name) name##_f64
#define TYPED(member) member##_f64
#elif defined(LB_REAL_BF16)
typedef float real;
#define R(name) name##_bf16
#define TYPED(member) member##_f32
#elif defined(LB_REAL_DIRECT) && defined(LB_DIRECT_BF16)
typedef float real;
#define R(name) name##_direct_bf16
#define TYPED(member) member##_f32
#elif defined(LB_REAL_DIRECT)
typedef float real;
#define R(name) name##_direct
#define TYPED(member) member##_f32
#define LB_REAL_DIRECT_FP32 1
#else
typedef float real;
#define R(name) name##_f32
#define TYPED(member) member##_f32
#define LB_REAL_PLAIN 1
#endif

#endif
