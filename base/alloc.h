/* Allocations that cannot fail unnoticed: on failure the program prints
 * one line, "bench: out of memory", and exits. The status is 1, as for any
 * failed run; the subcommands, whose 1 is a finding (compare: a
 * regression), set 2 with alloc_set_exit_status before they start. */
#ifndef LB_BASE_ALLOC_H
#define LB_BASE_ALLOC_H

#include <stddef.h>

void *xmalloc(size_t size);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t size);
char *xstrdup(const char *s);

void alloc_set_exit_status(int status);

#endif
