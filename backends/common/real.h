/* Code written once over `real` and compiled twice: as float (the fp32
 * engines, and the bf16 ones, whose activations and master weights are
 * fp32) and, with -DLB_REAL_DOUBLE, as double (the fp64 engines). The
 * Makefile's REAL_TWICE list, and the CHWN engine's fragment, name the
 * sources built both ways; their objects are foo.o and foo_f64.o. Both
 * builds link into one program or module, so each external name has its
 * build's suffix, name_f32 or name_f64, and nothing else. Both are
 * written out where the name is declared, so that grep finds them:
 * REAL_NAME(name_f32, name_f64) is the build's, which a header of such
 * code gives its plain name (#define name REAL_NAME(name_f32, name_f64)),
 * and an entry point other code calls is defined under each name as a
 * function of its own (#ifdef LB_REAL_DOUBLE ... #else ... #endif).
 * LB_REAL_PLAIN is defined in the float build only, for what a file holds
 * once whatever the type.
 *
 * TYPED(member) names the view of a member of a shared struct that has the
 * build's type (host_engine's params_f32 or params_f64). */
#ifndef LB_REAL_H
#define LB_REAL_H

#if defined(LB_REAL_DOUBLE)
typedef double real;
#define REAL_NAME(f32_name, f64_name) f64_name
#define TYPED(member) member##_f64
#else
typedef float real;
#define REAL_NAME(f32_name, f64_name) f32_name
#define TYPED(member) member##_f32
#define LB_REAL_PLAIN 1
#endif

#endif
