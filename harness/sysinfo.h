/* The system a run happened on: machine, build and libraries. */
#ifndef LB_SYSINFO_H
#define LB_SYSINFO_H

#include <stdio.h>

typedef struct sysinfo {
    char host[256];
    char os[256];
    char cpu_model[256];
    int cores;
    double cpu_mhz;
    char caches[256];
    double memory_gib;
    char compiler[128];
    char git_commit[64]; /* with -dirty when the tree had changes */
    char libraries[1024];
    char date[64];       /* ISO 8601, UTC */
} sysinfo;

void sysinfo_collect(sysinfo *s);

/* The record as a JSON object, with the command line. */
void sysinfo_write_json(FILE *f, const sysinfo *s, int argc, char **argv);

/* Writes `str` as a JSON string literal (quoted, escaped). */
void json_string(FILE *f, const char *str);

#endif
