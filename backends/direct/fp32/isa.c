/* LENET_BENCH_DIRECT_ISA's names and rules, and a core's 512-bit FMA
 * ports (isa.h). */
#include "backends/direct/fp32/isa.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/direct/candidates.h"

/* the builds module.mk lists (DIRECT_ISAS), in its order, as dispatch.c */
#define NAME(isa) #isa,
static const char *const names[] = {LB_DIRECT_ISAS(NAME)};
#undef NAME
enum { NAMES = sizeof names / sizeof names[0] };

int direct_isa_count(void) { return NAMES; }

const char *direct_isa_name(int i) { return i >= 0 && i < NAMES ? names[i] : NULL; }

const char *direct_isa_forced(void)
{
    const char *forced = getenv("LENET_BENCH_DIRECT_ISA");
    return forced && *forced ? forced : NULL;
}

int direct_isa_check(char *err, size_t err_len)
{
    if (direct_candidates_check(err, err_len))
        return -1;
    const char *forced = direct_isa_forced();
    if (!forced)
        return 0;
    for (int i = 0; i < NAMES; i++)
        if (strcmp(forced, names[i]) == 0)
            return 0;
    char list[128] = "";
    for (int i = 0; i < NAMES; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    snprintf(err, err_len, "LENET_BENCH_DIRECT_ISA=%s: not one of %s", forced, list);
    return -1;
}

int direct_isa_allows_avx512(const char *what, char *why, size_t why_len)
{
    if (direct_isa_check(why, why_len))
        return 0;
    const char *forced = direct_isa_forced();
    if (!forced || strncmp(forced, "avx512", 6) == 0)
        return 1;
    snprintf(why, why_len,
             "LENET_BENCH_DIRECT_ISA=%s keeps the direct backend off AVX-512, and its "
             "%s are AVX-512 code (unset it, or force an avx512 build)",
             forced, what);
    return 0;
}

int direct_fma_ports_512(const cpu_info *cpu)
{
    if (!(cpu->features & CPU_AVX512F))
        return 0;
    if (strcmp(cpu->vendor, "AuthenticAMD") == 0) {
        /* Zen 5 (family 26): the full 512-bit datapath, but for the mobile
         * Strix Point (models 0x20-0x2f) and Krackan Point (0x60-0x6f) */
        const int mobile = (cpu->model >= 0x20 && cpu->model <= 0x2f) ||
                           (cpu->model >= 0x60 && cpu->model <= 0x6f);
        return cpu->family > 26 || (cpu->family == 26 && !mobile) ? 2 : 1;
    }
    if (strcmp(cpu->vendor, "GenuineIntel") == 0 && cpu->family == 6) {
        /* Skylake-SP to Cascade/Cooper Lake, Ice Lake-SP and -D, Sapphire,
         * Emerald and Granite Rapids (Skylake-SP's smallest parts have one
         * port: cpuid cannot tell them apart) */
        static const int two_port_models[] = {0x55, 0x6a, 0x6c, 0x8f, 0xcf, 0xad, 0xae};
        for (size_t i = 0; i < sizeof two_port_models / sizeof two_port_models[0]; i++)
            if (cpu->model == two_port_models[i])
                return 2;
    }
    return 1;
}
