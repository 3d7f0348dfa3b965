/* The CPU's features from cpuid and xgetbv (cpu.h). */
#include "base/cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define CPU_X86 1
#endif

static const struct {
    unsigned bit;
    const char *name;
} feature_names[] = {
    {CPU_AVX, "AVX"},
    {CPU_FMA, "FMA"},
    {CPU_F16C, "F16C"},
    {CPU_AVX2, "AVX2"},
    {CPU_AVX512F, "AVX512F"},
    {CPU_AVX512DQ, "AVX512DQ"},
    {CPU_AVX512BW, "AVX512BW"},
    {CPU_AVX512VL, "AVX512VL"},
    {CPU_AVX512_VNNI, "AVX512_VNNI"},
    {CPU_AVX512_BF16, "AVX512_BF16"},
    {CPU_AVX512_FP16, "AVX512_FP16"},
    {CPU_AMX_TILE, "AMX-TILE"},
    {CPU_AMX_BF16, "AMX-BF16"},
    {CPU_AMX_FP16, "AMX-FP16"},
};
enum { FEATURE_NAMES = sizeof feature_names / sizeof feature_names[0] };

#ifdef CPU_X86
static unsigned long long read_xcr0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static void read_brand(char *out, size_t len)
{
    unsigned r[12];
    out[0] = '\0';
    if (__get_cpuid_max(0x80000000u, NULL) < 0x80000004u)
        return;
    for (unsigned leaf = 0; leaf < 3; leaf++)
        __get_cpuid(0x80000002u + leaf, &r[4 * leaf], &r[4 * leaf + 1], &r[4 * leaf + 2],
                    &r[4 * leaf + 3]);
    char brand[49];
    memcpy(brand, r, 48);
    brand[48] = '\0';
    const char *s = brand;
    while (*s == ' ')
        s++;
    snprintf(out, len, "%s", s);
    for (size_t n = strlen(out); n > 0 && out[n - 1] == ' '; n--)
        out[n - 1] = '\0';
}


/* The level-1 data cache from the deterministic cache leaves (Intel's 4,
 * AMD's 0x8000001d: the same layout), else AMD's older 0x80000005; 0 when
 * cpuid does not say. */
static int l1d_from_cpuid(unsigned max_leaf)
{
    unsigned a, b, c, d, max_ext = __get_cpuid_max(0x80000000u, NULL);
    const unsigned leaves[2] = {4, 0x8000001du};
    for (int l = 0; l < 2; l++) {
        const unsigned leaf = leaves[l];
        if (leaf < 0x80000000u ? max_leaf < leaf : max_ext < leaf)
            continue;
        for (unsigned sub = 0; sub < 16; sub++) {
            __cpuid_count(leaf, sub, a, b, c, d);
            const unsigned type = a & 0x1f, level = (a >> 5) & 7;
            if (type == 0)
                break; /* no more caches */
            if (level == 1 && (type == 1 || type == 3)) /* data or unified */
                return (int)((((b >> 22) & 0x3ff) + 1) * (((b >> 12) & 0x3ff) + 1) *
                             ((b & 0xfff) + 1) * (c + 1));
        }
    }
    if (max_ext >= 0x80000005u) {
        __cpuid(0x80000005u, a, b, c, d);
        if (c >> 24)
            return (int)(c >> 24) * 1024;
    }
    (void)d;
    return 0;
}
#endif

int cpu_l1d_listed(void)
{
    for (int i = 0; i < 8; i++) {
        char path[96], text[32];
        int level = 0, size = 0;
        char unit = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        if (fscanf(f, "%d", &level) != 1)
            level = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (!(f = fopen(path, "r")))
            continue;
        if (!fgets(text, sizeof text, f))
            text[0] = '\0';
        fclose(f);
        if (level != 1 || (strncmp(text, "Data", 4) != 0 && strncmp(text, "Unified", 7) != 0))
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!(f = fopen(path, "r")))
            continue;
        const int got = fscanf(f, "%d%c", &size, &unit);
        fclose(f);
        if (got >= 1 && size > 0)
            return size * (got == 2 && unit == 'K' ? 1024 : got == 2 && unit == 'M' ? 1 << 20 : 1);
    }
    return 0;
}

#ifdef CPU_X86
static int l1d_bytes_here(unsigned max_leaf)
{
    const int from_cpuid = l1d_from_cpuid(max_leaf);
    return from_cpuid > 0 ? from_cpuid : cpu_l1d_listed();
}
#endif

void cpu_read(cpu_info *cpu)
{
    memset(cpu, 0, sizeof *cpu);
#ifndef CPU_X86
    cpu->l1d_bytes = cpu_l1d_listed();
#endif
#ifdef CPU_X86
    unsigned a, b, c, d;
    read_brand(cpu->brand, sizeof cpu->brand);
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return;
    const unsigned max_leaf = a;
    cpu->l1d_bytes = l1d_bytes_here(max_leaf);
    memcpy(cpu->vendor, &b, 4);
    memcpy(cpu->vendor + 4, &d, 4);
    memcpy(cpu->vendor + 8, &c, 4);
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    const unsigned base_family = (a >> 8) & 0xf, base_model = (a >> 4) & 0xf;
    cpu->family = (int)(base_family == 0xf ? base_family + ((a >> 20) & 0xff) : base_family);
    cpu->model = (int)(base_family == 0x6 || base_family == 0xf
                           ? base_model + (((a >> 16) & 0xf) << 4)
                           : base_model);
    cpu->stepping = (int)(a & 0xf);
    const int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1,
              f16c = (c >> 29) & 1;
    if (!osxsave || !avx)
        return;
    const unsigned long long xcr0 = read_xcr0();
    /* the OS saves xmm and ymm (bits 1, 2); opmask, zmm halves and zmm16-31
     * (bits 5, 6, 7); tile config and data (bits 17, 18) */
    const int ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6,
              tiles = (xcr0 & 0x60000) == 0x60000;
    if (!ymm)
        return;
    cpu->features |= CPU_AVX;
    if (fma)
        cpu->features |= CPU_FMA;
    if (f16c)
        cpu->features |= CPU_F16C;
    if (max_leaf < 7)
        return;
    unsigned a1 = 0, b1, c1, d1;
    __cpuid_count(7, 0, a, b, c, d);
    if (a >= 1)
        __cpuid_count(7, 1, a1, b1, c1, d1);
    (void)b1, (void)c1, (void)d1;
    if ((b >> 5) & 1)
        cpu->features |= CPU_AVX2;
    if (zmm) {
        static const struct {
            unsigned reg_bit; /* ebx bits of leaf 7.0 */
            unsigned feature;
        } ebx7[] = {{16, CPU_AVX512F}, {17, CPU_AVX512DQ}, {30, CPU_AVX512BW}, {31, CPU_AVX512VL}};
        for (size_t i = 0; i < sizeof ebx7 / sizeof ebx7[0]; i++)
            if ((b >> ebx7[i].reg_bit) & 1)
                cpu->features |= ebx7[i].feature;
        if ((c >> 11) & 1)
            cpu->features |= CPU_AVX512_VNNI;
        if ((d >> 23) & 1)
            cpu->features |= CPU_AVX512_FP16;
        if ((a1 >> 5) & 1)
            cpu->features |= CPU_AVX512_BF16;
    }
    if (tiles && ((d >> 24) & 1)) {
        cpu->features |= CPU_AMX_TILE;
        if ((d >> 22) & 1)
            cpu->features |= CPU_AMX_BF16;
        if ((a1 >> 21) & 1)
            cpu->features |= CPU_AMX_FP16;
    }
#endif
}

static cpu_info this_cpu;
static pthread_once_t this_cpu_once = PTHREAD_ONCE_INIT;

static void read_this_cpu(void) { cpu_read(&this_cpu); }

const cpu_info *cpu_this(void)
{
    pthread_once(&this_cpu_once, read_this_cpu);
    return &this_cpu;
}

int cpu_l1d_bytes(int fallback)
{
    const int l1d = cpu_this()->l1d_bytes;
    return l1d > 0 ? l1d : fallback;
}

int cpu_has(unsigned mask) { return (cpu_this()->features & mask) == mask; }

static const char *names_of(unsigned features, char *buf, size_t len)
{
    if (!len)
        return buf;
    buf[0] = '\0';
    for (int i = 0; i < FEATURE_NAMES; i++)
        if (features & feature_names[i].bit) {
            size_t used = strlen(buf);
            snprintf(buf + used, len - used, "%s%s", used ? ", " : "", feature_names[i].name);
        }
    return buf;
}

const char *cpu_feature_names(unsigned features, char *buf, size_t len)
{
    return names_of(features, buf, len);
}

const char *cpu_missing(unsigned mask, char *buf, size_t len)
{
    return names_of(mask & ~cpu_this()->features, buf, len);
}

/* arch_prctl's request for a dynamically enabled state component, and
 * the component number of AMX tile data (linux/arch/x86/include/uapi/asm/prctl.h) */
#define LB_ARCH_REQ_XCOMP_PERM 0x1023
#define LB_XFEATURE_XTILEDATA 18

static int amx_answer = -1;
static char amx_why[160];
static pthread_mutex_t amx_lock = PTHREAD_MUTEX_INITIALIZER;

int cpu_amx_granted(char *why, size_t len)
{
    pthread_mutex_lock(&amx_lock);
    if (amx_answer < 0) {
        if (!cpu_has(CPU_AMX_TILE)) {
            amx_answer = 0;
            snprintf(amx_why, sizeof amx_why, "this CPU has no AMX tiles");
        } else {
#ifdef CPU_X86
            long rc = syscall(SYS_arch_prctl, LB_ARCH_REQ_XCOMP_PERM, LB_XFEATURE_XTILEDATA);
            amx_answer = rc == 0;
            if (rc != 0)
                snprintf(amx_why, sizeof amx_why,
                         "the kernel did not grant AMX tile state (arch_prctl)");
#else
            amx_answer = 0;
            snprintf(amx_why, sizeof amx_why, "not an x86 CPU");
#endif
        }
    }
    int granted = amx_answer;
    if (!granted && why && len)
        snprintf(why, len, "%s", amx_why);
    pthread_mutex_unlock(&amx_lock);
    return granted;
}
