/* base/cpu.c, the one reader of the CPU's features, against what the
 * kernel says of the same CPU in /proc/cpuinfo: every feature the reader
 * reports must be one the kernel lists (and, since the kernel lists only
 * what it saves, the reverse for the features whose registers it always
 * saves when it lists them), the family and model must agree, and the
 * names of missing features must name exactly what is missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "tests/cmocka_main.h"

/* The first processor's line "key : value" of /proc/cpuinfo, or NULL. */
static char *cpuinfo_field(const char *key, char *out, size_t len)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return NULL;
    char line[8192];
    char *found = NULL;
    while (!found && fgets(line, sizeof line, f)) {
        size_t k = strlen(key);
        if (strncmp(line, key, k) != 0 || (line[k] != ' ' && line[k] != '\t' && line[k] != ':'))
            continue;
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        snprintf(out, len, "%s", colon + 1 + (colon[1] == ' '));
        out[strcspn(out, "\n")] = '\0';
        found = out;
    }
    fclose(f);
    return found;
}

static int flag_listed(const char *flags, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = flags; (p = strstr(p, name)) != NULL; p += n)
        if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}

static const struct {
    unsigned bit;
    const char *flag; /* as /proc/cpuinfo names it */
} kernel_flags[] = {
    {CPU_AVX, "avx"},
    {CPU_FMA, "fma"},
    {CPU_F16C, "f16c"},
    {CPU_AVX2, "avx2"},
    {CPU_AVX512F, "avx512f"},
    {CPU_AVX512DQ, "avx512dq"},
    {CPU_AVX512BW, "avx512bw"},
    {CPU_AVX512VL, "avx512vl"},
    {CPU_AVX512_VNNI, "avx512_vnni"},
    {CPU_AVX512_BF16, "avx512_bf16"},
    {CPU_AVX512_FP16, "avx512_fp16"},
    {CPU_AMX_TILE, "amx_tile"},
    {CPU_AMX_BF16, "amx_bf16"},
    {CPU_AMX_FP16, "amx_fp16"},
};

static void features_agree_with_the_kernel(void **state)
{
    (void)state;
    static char flags[8192];
    if (!cpuinfo_field("flags", flags, sizeof flags)) {
        skip(); /* not Linux on x86: nothing to compare with */
        return;
    }
    const cpu_info *cpu = cpu_this();
    for (size_t i = 0; i < sizeof kernel_flags / sizeof kernel_flags[0]; i++) {
        int ours = (cpu->features & kernel_flags[i].bit) != 0;
        int kernels = flag_listed(flags, kernel_flags[i].flag);
        if (ours != kernels)
            fail_msg("%s: base/cpu.c says %d, /proc/cpuinfo says %d", kernel_flags[i].flag, ours,
                     kernels);
    }
}

static void identity_agrees_with_the_kernel(void **state)
{
    (void)state;
    char value[256];
    const cpu_info *cpu = cpu_this();
    if (!cpuinfo_field("cpu family", value, sizeof value)) {
        skip();
        return;
    }
    assert_int_equal(cpu->family, atoi(value));
    assert_non_null(cpuinfo_field("model", value, sizeof value));
    assert_int_equal(cpu->model, atoi(value));
    assert_non_null(cpuinfo_field("vendor_id", value, sizeof value));
    assert_string_equal(cpu->vendor, value);
    assert_non_null(cpuinfo_field("model name", value, sizeof value));
    /* the kernel's brand may carry trailing blanks of its own */
    for (size_t n = strlen(value); n > 0 && value[n - 1] == ' '; n--)
        value[n - 1] = '\0';
    assert_string_equal(cpu->brand, value);
}

static void missing_names_exactly_the_missing(void **state)
{
    (void)state;
    char buf[256];
    const unsigned have = cpu_this()->features;
    assert_string_equal(cpu_missing(have, buf, sizeof buf), "");
    assert_true(cpu_has(have));
    const unsigned all = CPU_AVX512 | CPU_AVX512_BF16 | CPU_AVX512_FP16 | CPU_AVX2;
    cpu_missing(all, buf, sizeof buf);
    char expect[256];
    cpu_feature_names(all & ~have, expect, sizeof expect);
    assert_string_equal(buf, expect);
    assert_int_equal(cpu_has(all), (have & all) == all);
    if (!(have & CPU_AVX512_FP16))
        assert_non_null(strstr(buf, "AVX512_FP16"));
    /* a small buffer is cut, never overrun */
    char tiny[4];
    cpu_feature_names(CPU_AVX512, tiny, sizeof tiny);
    assert_true(strlen(tiny) < sizeof tiny);
}

static void amx_answer_matches_the_cpu(void **state)
{
    (void)state;
    char why[160] = "";
    int granted = cpu_amx_granted(why, sizeof why);
    if (!cpu_has(CPU_AMX_TILE)) {
        assert_int_equal(granted, 0);
        assert_non_null(strstr(why, "no AMX"));
    } else if (!granted)
        assert_true(why[0] != '\0');
    /* asked twice, the same answer */
    assert_int_equal(cpu_amx_granted(NULL, 0), granted);
}

/* The level-1 data cache (cpuid's, on x86) against the size Linux lists
 * for the first processor's, where it lists one */
static void l1d_agrees_with_the_kernel(void **state)
{
    (void)state;
    const int l1d = cpu_this()->l1d_bytes;
    assert_int_equal(cpu_l1d_bytes(12345), l1d > 0 ? l1d : 12345);
    const int listed = cpu_l1d_listed();
    if (!listed) {
        printf("the kernel lists no level-1 data cache: %d bytes read, not compared\n", l1d);
        assert_true(l1d >= 0);
    } else if (l1d != listed) {
        fail_msg("L1d: %d bytes read, the kernel lists %d KiB", l1d, listed / 1024);
    }
}

TEST_MAIN(cmocka_unit_test(features_agree_with_the_kernel),
          cmocka_unit_test(identity_agrees_with_the_kernel),
          cmocka_unit_test(missing_names_exactly_the_missing),
          cmocka_unit_test(amx_answer_matches_the_cpu),
          cmocka_unit_test(l1d_agrees_with_the_kernel))
