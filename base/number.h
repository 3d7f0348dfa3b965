/* The grammar of every number the program reads, on its command line
 * (harness/run/options.h), in its environment (LENET_BENCH_PEER_TIMEOUT)
 * and in the tools' CSV: a whole number is an optional '-' and decimal
 * digits, nothing else; a number is an optional '-', decimal digits with
 * an optional '.' and an optional exponent (e or E, an optional sign,
 * digits): no space, no '+', no hexadecimal, inf or nan; one too large for
 * a double is refused, one too small is taken as the nearest double. */
#ifndef LB_BASE_NUMBER_H
#define LB_BASE_NUMBER_H

/* 0 with the value, -1 when s is not written as a whole number (a
 * number), -2 when it is but out of range (beyond long long; beyond a
 * double). */
int number_read_whole(const char *s, long long *out);
int number_read(const char *s, double *out);

#endif
