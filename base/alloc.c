#include "base/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int exit_status = 1;

void alloc_set_exit_status(int status) { exit_status = status; }

static void *checked(void *p)
{
    if (!p) {
        fputs("bench: out of memory\n", stderr);
        exit(exit_status);
    }
    return p;
}

/* A request for 0 bytes still returns a pointer that can be freed. */
void *xmalloc(size_t size) { return checked(malloc(size ? size : 1)); }

void *xcalloc(size_t count, size_t size)
{
    return checked(calloc(count ? count : 1, size ? size : 1));
}

void *xrealloc(void *p, size_t size) { return checked(realloc(p, size ? size : 1)); }

char *xstrdup(const char *s) { return checked(strdup(s ? s : "")); }
