/* The one reader of the CPU's features: cpuid, the registers the operating
 * system saves (xgetbv), the brand string, and the OS's grant of AMX tile
 * state to this process. Every backend, probe and tool that asks what this
 * CPU can do asks here, at run time, never where the program was built.
 *
 * A feature bit is set only when the CPU has it *and* the OS saves the
 * registers it needs (XCR0): an AVX-512 CPU under a kernel that does not
 * save zmm state has no CPU_AVX512F here. */
#ifndef LB_BASE_CPU_H
#define LB_BASE_CPU_H

#include <stddef.h>

enum {
    CPU_AVX = 1u << 0,
    CPU_FMA = 1u << 1,
    CPU_F16C = 1u << 2,
    CPU_AVX2 = 1u << 3,
    CPU_AVX512F = 1u << 4,
    CPU_AVX512DQ = 1u << 5,
    CPU_AVX512BW = 1u << 6,
    CPU_AVX512VL = 1u << 7,
    CPU_AVX512_VNNI = 1u << 8,
    CPU_AVX512_BF16 = 1u << 9,  /* vdpbf16ps */
    CPU_AVX512_FP16 = 1u << 10, /* vfmadd231ph and the rest of fp16 arithmetic */
    CPU_AMX_TILE = 1u << 11,    /* the CPU has AMX and the OS can save tile state */
    CPU_AMX_BF16 = 1u << 12,
    CPU_AMX_FP16 = 1u << 13,
};

/* AVX-512 as the kernels use it: F, DQ, BW and VL together. */
#define CPU_AVX512 (CPU_AVX512F | CPU_AVX512DQ | CPU_AVX512BW | CPU_AVX512VL)

typedef struct cpu_info {
    char vendor[16]; /* "GenuineIntel", "AuthenticAMD"; "" off x86 */
    char brand[49];  /* "AMD EPYC 9B14 96-Core Processor", trimmed; "" if unknown */
    int family, model, stepping; /* display family and model, as Linux prints them */
    unsigned features;           /* CPU_* bits */
    int l1d_bytes; /* a core's level-1 data cache (cpuid, else sysfs); 0 if unknown */
} cpu_info;

/* This machine's CPU, read once (thread-safe) and kept. */
const cpu_info *cpu_this(void);

/* Read the CPU again into *out (what cpu_this keeps). */
void cpu_read(cpu_info *out);

/* The level-1 data cache of one core of this CPU in bytes: cpuid's cache
 * leaves (Intel's 4, AMD's 0x8000001d, else AMD's 0x80000005), else
 * Linux's /sys/devices/system/cpu/cpu0/cache; fallback when none says. */
int cpu_l1d_bytes(int fallback);

/* The level-1 data (or unified) cache as Linux lists it for the first
 * processor (/sys/devices/system/cpu/cpu0/cache), in bytes; 0 where it
 * lists none. cpu_l1d_bytes falls back on it; the tests hold cpuid's
 * answer to it. */
int cpu_l1d_listed(void);

/* 1 when this CPU has every feature in mask, else 0. */
int cpu_has(unsigned mask);

/* The names of the features in mask missing on this CPU, comma-separated
 * ("AVX512_FP16", "AVX512BW, AVX512VL"), or "" when none is missing. */
const char *cpu_missing(unsigned mask, char *buf, size_t len);

/* Every feature in features, by name, comma-separated. */
const char *cpu_feature_names(unsigned features, char *buf, size_t len);

/* Ask the kernel for AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM): 1 when
 * this process may use AMX tiles (asked once, kept), 0 with the reason in
 * why (no AMX on this CPU, or the kernel refused). */
int cpu_amx_granted(char *why, size_t len);

#endif
