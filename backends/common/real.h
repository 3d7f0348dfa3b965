/* Code written once over `real` and compiled twice: as float (the fp32
 * engines) and, with -DLB_REAL_DOUBLE, as double (the fp64 engines). The
 * Makefile's REAL_TWICE list names the sources built both ways; their
 * objects are foo.o and foo_f64.o. R(name) gives each external name its
 * version (name_f32, name_f64), so both link into one program. */
#ifndef LB_REAL_H
#define LB_REAL_H

#ifdef LB_REAL_DOUBLE
typedef double real;
#define R(name) name##_f64
#else
typedef float real;
#define R(name) name##_f32
#endif

#endif
