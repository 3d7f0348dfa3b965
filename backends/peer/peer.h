/* The framework peers' public face: LENET_BENCH_PEER_TIMEOUT, read by one
 * parser (the program's number grammar, base/number.h) in one range, by
 * the command line's check (a usage error, exit 2, before anything runs)
 * and by the peers themselves. */
#ifndef LB_PEER_PEER_H
#define LB_PEER_PEER_H

/* The shortest and longest LENET_BENCH_PEER_TIMEOUT taken: under a second
 * not even the interpreter starts; a day is longer than any answer. */
#define PEER_TIMEOUT_MIN_S 1.0
#define PEER_TIMEOUT_MAX_S 86400.0

/* s as a number of seconds from PEER_TIMEOUT_MIN_S to PEER_TIMEOUT_MAX_S:
 * 0 with it in *out, else -1. */
int peer_timeout_read(const char *s, double *out);

#endif
