/* The builds of the direct kernels themselves (backends/direct/fp32/direct.h,
 * isa.h): each build this CPU runs, forced in turn, against a
 * double-precision reference on LeNet's shapes as the engine calls them
 * and on ragged ones (tiles cut short everywhere); the two AVX-512 builds
 * to the same floats where each element is one sum (their tiles differ,
 * those sums do not);
 * which build is the best on which core; and LENET_BENCH_DIRECT_ISA's
 * rules: names, a value that names no build, and the bf16 products kept
 * to an AVX-512 choice. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/direct/candidates.h"
#include "backends/direct/fp32/direct.h"
#include "backends/direct/fp32/isa.h"
#include "base/cpu.h"

/* ---------------------------------------------------------------------- */
/* LENET_BENCH_DIRECT_ISA and the choice of a build                         */

static void names_are_the_builds(void **state)
{
    (void)state;
    assert_int_equal(direct_isa_count(), direct_kernels_count());
    for (int i = 0; i < direct_kernels_count(); i++)
        assert_string_equal(direct_isa_name(i), direct_kernels_at(i)->isa);
}

static cpu_info made_up(const char *vendor, int family, int model, unsigned features)
{
    cpu_info c;
    memset(&c, 0, sizeof c);
    snprintf(c.vendor, sizeof c.vendor, "%s", vendor);
    c.family = family, c.model = model, c.features = features;
    return c;
}

static void fma_ports_by_core(void **state)
{
    (void)state;
    const struct {
        const char *vendor;
        int family, model, ports;
    } cores[] = {
        {"AuthenticAMD", 25, 0x11, 1}, /* Zen 4 (Genoa): double-pumped */
        {"AuthenticAMD", 26, 0x02, 2}, /* Zen 5 (Turin) */
        {"AuthenticAMD", 26, 0x44, 2}, /* Zen 5 (Granite Ridge) */
        {"AuthenticAMD", 26, 0x24, 1}, /* Zen 5 mobile (Strix Point) */
        {"GenuineIntel", 6, 0xcf, 2},  /* Emerald Rapids */
        {"GenuineIntel", 6, 0x8f, 2},  /* Sapphire Rapids */
        {"GenuineIntel", 6, 0x6a, 2},  /* Ice Lake-SP */
        {"GenuineIntel", 6, 0x8c, 1},  /* Tiger Lake */
        {"GenuineIntel", 6, 0xa7, 1},  /* Rocket Lake */
    };
    for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++) {
        const cpu_info c = made_up(cores[i].vendor, cores[i].family, cores[i].model, CPU_AVX512);
        if (direct_fma_ports_512(&c) != cores[i].ports)
            fail_msg("%s family %d model %#x: %d ports, expected %d", cores[i].vendor,
                     cores[i].family, cores[i].model, direct_fma_ports_512(&c), cores[i].ports);
    }
    const cpu_info no_avx512 = made_up("AuthenticAMD", 26, 0x02, CPU_AVX2 | CPU_FMA);
    assert_int_equal(direct_fma_ports_512(&no_avx512), 0);
    /* the features of Sapphire Rapids and later, whatever model a
     * hypervisor reports (one lent here said 0xa7, Rocket Lake's) */
    const struct {
        int model;
        unsigned features;
        int ports;
    } by_features[] = {
        {0xa7, CPU_AVX512 | CPU_AVX512_FP16 | CPU_AMX_TILE, 2},
        {0xa7, CPU_AVX512 | CPU_AMX_TILE, 2},
        {0xa7, CPU_AVX512 | CPU_AVX512_FP16, 2},
        {0x97, CPU_AVX512 | CPU_AVX512_FP16, 1}, /* Alder Lake, AVX-512 switched on */
        {0x8c, CPU_AVX512 | CPU_AVX512_BF16, 1},
    };
    for (size_t i = 0; i < sizeof by_features / sizeof by_features[0]; i++) {
        const cpu_info c = made_up("GenuineIntel", 6, by_features[i].model, by_features[i].features);
        if (direct_fma_ports_512(&c) != by_features[i].ports)
            fail_msg("Intel model %#x, features %#x: %d ports, expected %d", by_features[i].model,
                     by_features[i].features, direct_fma_ports_512(&c), by_features[i].ports);
    }
    /* this CPU: the rule's answer or a measured one, never fewer than the
     * rule's, and the reason given */
    char why[192] = "";
    const int here = direct_fma_ports_here(why, sizeof why);
    printf("this CPU: %d 512-bit FMA ports (%s)\n", here, why);
    assert_true(here >= direct_fma_ports_512(cpu_this()));
    assert_true(why[0] != '\0');
    if (direct_fma_ports_512(cpu_this()) == 1)
        assert_non_null(strstr(why, "measured"));
    /* the measurement the choice falls back on, shown wherever it runs */
    if (cpu_has(CPU_AVX512F | CPU_AVX2 | CPU_FMA)) {
        const double ratio = direct_fma_zmm_over_ymm();
        printf("this CPU: 512-bit FMAs measured at %.2fx the flops of 256-bit ones\n", ratio);
        assert_true(ratio > 0.25 && ratio < 4.0);
    } else
        assert_true(direct_fma_zmm_over_ymm() == 0);
}

/* Unforced, this CPU gets the AVX-512 build fitted to its cores */
static void best_build_fits_the_core(void **state)
{
    (void)state;
    unsetenv("LENET_BENCH_DIRECT_ISA");
    char err[256] = "";
    const direct_kernels *k = direct_choose(err, sizeof err);
    assert_non_null(k);
    assert_ptr_equal(direct_active(), k);
    const int ports = direct_fma_ports_here(NULL, 0);
    char why[192];
    assert_string_equal(direct_isa_best(why, sizeof why), k->isa); /* (the listing's) */
    if (!direct_kernels_find("avx512")) {
        skip(); /* not x86-64 */
        return;
    }
    if (!cpu_has(CPU_AVX512 | CPU_AVX2 | CPU_FMA | CPU_F16C))
        assert_int_equal(strncmp(k->isa, "avx512", 6) != 0, 1);
    else
        assert_string_equal(k->isa, ports >= 2 ? "avx512_2fma" : "avx512");
    printf("this CPU (%s family %d model %d, %d 512-bit FMA ports): %s\n", cpu_this()->vendor,
           cpu_this()->family, cpu_this()->model, ports, k->isa);
}

static void forced_values(void **state)
{
    (void)state;
    char why[256] = "";
    setenv("LENET_BENCH_DIRECT_ISA", "garbage", 1);
    assert_int_equal(direct_isa_check(why, sizeof why), -1);
    assert_non_null(strstr(why, "LENET_BENCH_DIRECT_ISA=garbage: not one of "));
    assert_non_null(strstr(why, "generic"));
    assert_null(direct_choose(why, sizeof why));
    why[0] = '\0';
    assert_int_equal(direct_isa_allows_avx512("vdpbf16ps products", why, sizeof why), 0);
    assert_non_null(strstr(why, "not one of"));

    /* the half sets' AVX-512 products only beside an AVX-512 choice */
    const struct {
        const char *value;
        int bf16;
    } cases[] = {{"", 1}, {"avx512", 1}, {"avx512_2fma", 1}, {"avx2", 0}, {"generic", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].value[0] && !direct_kernels_find(cases[i].value))
            continue; /* a build this machine's compiler does not make */
        setenv("LENET_BENCH_DIRECT_ISA", cases[i].value, 1);
        why[0] = '\0';
        assert_int_equal(direct_isa_check(why, sizeof why), 0);
        if (direct_isa_allows_avx512("vfmadd231ph products", why, sizeof why) != cases[i].bf16)
            fail_msg("LENET_BENCH_DIRECT_ISA='%s': bf16 %s", cases[i].value,
                     cases[i].bf16 ? "refused" : "allowed");
        if (!cases[i].bf16) {
            assert_non_null(strstr(why, "keeps the direct backend off AVX-512"));
            assert_non_null(strstr(why, "its vfmadd231ph products are AVX-512 code"));
        }
    }
    unsetenv("LENET_BENCH_DIRECT_ISA");
}

/* Each table of candidates is whole: names unique and of one word (an
 * environment value), each row's products in words, a row the choice may
 * take unasked, and in this module-less program no set linked (the rows
 * name them weakly: the program reads the names only) */
static void candidate_tables_are_whole(void **state)
{
    (void)state;
    const direct_candidates *const tables[] = {&direct_bf16_candidates, &direct_fp16_candidates};
    for (size_t t = 0; t < 2; t++) {
        const direct_candidates *c = tables[t];
        assert_non_null(strstr(c->variable, "LENET_BENCH_DIRECT_"));
        int unasked = 0;
        for (int r = 0; r < c->count; r++) {
            const direct_candidate *row = &c->rows[r];
            assert_true(row->name[0] && !strpbrk(row->name, " ,=:"));
            assert_true(row->products && row->products[0]);
            assert_null(row->set);
            unasked += !row->named_only;
            for (int q = 0; q < r; q++)
                assert_string_not_equal(c->rows[q].name, row->name);
        }
        assert_true(unasked >= 1);
    }
}

/* LENET_BENCH_DIRECT_BF16 and _FP16 take a candidate's name
 * (backends/direct/candidates.h), anything else is refused naming them */
static void candidate_names(void **state)
{
    (void)state;
    char why[256] = "";
    unsetenv("LENET_BENCH_DIRECT_ISA");
    const direct_candidates *const tables[] = {&direct_bf16_candidates, &direct_fp16_candidates};
    const char *const wrong[] = {"garbage", "EMULATED", "Dot", " fma"};
    for (size_t t = 0; t < 2; t++) {
        const direct_candidates *c = tables[t];
        unsetenv("LENET_BENCH_DIRECT_BF16");
        unsetenv("LENET_BENCH_DIRECT_FP16");
        assert_true(c->count >= 2);
        for (int r = 0; r < c->count; r++) {
            setenv(c->variable, c->rows[r].name, 1);
            assert_int_equal(direct_isa_check(why, sizeof why), 0);
            assert_ptr_equal(direct_candidate_named(c, c->rows[r].name), &c->rows[r]);
        }
        setenv(c->variable, "", 1);
        assert_int_equal(direct_isa_check(why, sizeof why), 0);
        for (size_t w = 0; w < sizeof wrong / sizeof wrong[0]; w++) {
            setenv(c->variable, wrong[w], 1);
            why[0] = '\0';
            assert_int_equal(direct_isa_check(why, sizeof why), -1);
            char want[128];
            snprintf(want, sizeof want, "%s=%s: not one of ", c->variable, wrong[w]);
            if (!strstr(why, want))
                fail_msg("%s=%s: \"%s\"", c->variable, wrong[w], why);
            for (int r = 0; r < c->count; r++)
                assert_non_null(strstr(why, c->rows[r].name));
            assert_null(strchr(why, '\n'));
        }
        unsetenv(c->variable);
    }
    setenv("LENET_BENCH_DIRECT_FP16", "EMULATED", 1);
    direct_isa_check(why, sizeof why);
    assert_string_equal(why, "LENET_BENCH_DIRECT_FP16=EMULATED: not one of avx512_fp16, emulated");
    unsetenv("LENET_BENCH_DIRECT_FP16");
}

/* ---------------------------------------------------------------------- */
/* The products against a reference                                         */

static float *filled(size_t n, unsigned seed)
{
    float *x = malloc(sizeof(float) * (n ? n : 1));
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) * (1.0 / 16777216.0) - 0.5);
    }
    return x;
}

typedef struct shape {
    const char *name;
    int B, C, H, W, K, kernel, dense; /* dense: n_in = C, n_out = K */
} shape;

/* Every output of one product: the value and the sum of its terms'
 * magnitudes (the scale of its rounding error) */
typedef struct reference {
    double *value, *scale;
    size_t n;
} reference;

static reference reference_new(size_t n)
{
    reference r = {calloc(n, sizeof(double)), calloc(n, sizeof(double)), n};
    assert_true(r.value && r.scale);
    return r;
}

static void add_term(reference *r, size_t at, double a, double b)
{
    r->value[at] += a * b;
    r->scale[at] += fabs(a * b);
}

/* The operands of a shape and the three references */
typedef struct case_data {
    shape s;
    float *in, *wb, *d_out;       /* wb: conv [K][R + 1]; dense weight [K][C], bias after */
    reference out, d_in, d_param; /* d_param: d_weight_bias, or d_weight then d_bias */
} case_data;

static void conv_references(case_data *d)
{
    const shape *s = &d->s;
    const int OH = s->H - s->kernel + 1, OW = s->W - s->kernel + 1,
              R = s->C * s->kernel * s->kernel;
    d->out = reference_new((size_t)s->K * OH * OW * s->B);
    d->d_in = reference_new((size_t)s->C * s->H * s->W * s->B);
    d->d_param = reference_new((size_t)s->K * (R + 1));
    for (int k = 0; k < s->K; k++)
        for (int y = 0; y < OH; y++)
            for (int x = 0; x < OW; x++)
                for (int n = 0; n < s->B; n++) {
                    const size_t o = (((size_t)k * OH + y) * OW + x) * s->B + n;
                    add_term(&d->out, o, d->wb[(size_t)k * (R + 1) + R], 1.0);
                    add_term(&d->d_param, (size_t)k * (R + 1) + R, d->d_out[o], 1.0);
                    for (int c = 0; c < s->C; c++)
                        for (int ki = 0; ki < s->kernel; ki++)
                            for (int kj = 0; kj < s->kernel; kj++) {
                                const size_t r = ((size_t)c * s->kernel + ki) * s->kernel + kj;
                                const size_t i =
                                    (((size_t)c * s->H + y + ki) * s->W + x + kj) * s->B + n;
                                const double w = d->wb[(size_t)k * (R + 1) + r];
                                add_term(&d->out, o, w, d->in[i]);
                                add_term(&d->d_in, i, w, d->d_out[o]);
                                add_term(&d->d_param, (size_t)k * (R + 1) + r, d->d_out[o],
                                         d->in[i]);
                            }
                }
}

static void dense_references(case_data *d)
{
    const shape *s = &d->s;
    const float *bias = d->wb + (size_t)s->K * s->C;
    d->out = reference_new((size_t)s->K * s->B);
    d->d_in = reference_new((size_t)s->C * s->B);
    d->d_param = reference_new((size_t)s->K * s->C + s->K);
    for (int o = 0; o < s->K; o++)
        for (int n = 0; n < s->B; n++) {
            const size_t at = (size_t)o * s->B + n;
            add_term(&d->out, at, bias[o], 1.0);
            add_term(&d->d_param, (size_t)s->K * s->C + o, d->d_out[at], 1.0);
            for (int i = 0; i < s->C; i++) {
                const double w = d->wb[(size_t)o * s->C + i];
                add_term(&d->out, at, w, d->in[(size_t)i * s->B + n]);
                add_term(&d->d_in, (size_t)i * s->B + n, w, d->d_out[at]);
                add_term(&d->d_param, (size_t)o * s->C + i, d->d_out[at],
                         d->in[(size_t)i * s->B + n]);
            }
        }
}

static case_data case_new(shape s)
{
    case_data d = {.s = s};
    const int OH = s.H - s.kernel + 1, OW = s.W - s.kernel + 1;
    const size_t n_in = (size_t)s.C * s.H * s.W * s.B, n_out = (size_t)s.K * OH * OW * s.B;
    const size_t n_wb =
        s.dense ? (size_t)s.K * s.C + s.K : (size_t)s.K * (s.C * s.kernel * s.kernel + 1);
    d.in = filled(n_in, 11), d.wb = filled(n_wb, 12), d.d_out = filled(n_out, 13);
    if (s.dense)
        dense_references(&d);
    else
        conv_references(&d);
    return d;
}

static void case_free(case_data *d)
{
    free(d->in), free(d->wb), free(d->d_out);
    reference *all[] = {&d->out, &d->d_in, &d->d_param};
    for (int i = 0; i < 3; i++)
        free(all[i]->value), free(all[i]->scale);
}

/* The three products of one build on one case, into out, d_in and
 * d_param (sized as the references) */
static void run_build(const direct_kernels *k, const case_data *d, float *out, float *d_in,
                      float *d_param, int threads)
{
    const shape *s = &d->s;
    if (s->dense) {
        const float *bias = d->wb + (size_t)s->K * s->C;
        k->dense_forward(out, d->in, d->wb, bias, s->B, s->C, s->K, threads);
        k->dense_backward(d_param, d_param + (size_t)s->K * s->C, d_in, d->d_out, d->in, d->wb,
                          s->B, s->C, s->K, threads);
        return;
    }
    float *scratch =
        malloc(sizeof(float) * direct_conv_scratch_floats(s->B, s->C, s->H, s->W, s->K, s->kernel));
    assert_non_null(scratch);
    k->conv_forward(out, d->in, d->wb, s->B, s->C, s->H, s->W, s->K, s->kernel, threads);
    k->conv_backward_params(d_param, d->d_out, d->in, s->B, s->C, s->H, s->W, s->K, s->kernel,
                            threads);
    /* the weights alone: the same floats, every bias's place untouched */
    const int R = s->C * s->kernel * s->kernel;
    const size_t n_param = (size_t)s->K * (R + 1);
    float *weights_only = malloc(sizeof(float) * n_param);
    assert_non_null(weights_only);
    for (size_t i = 0; i < n_param; i++)
        weights_only[i] = -12345.0f;
    k->conv_backward_weights(weights_only, d->d_out, d->in, s->B, s->C, s->H, s->W, s->K,
                             s->kernel, threads);
    for (int o = 0; o < s->K; o++) {
        assert_memory_equal(weights_only + (size_t)o * (R + 1), d_param + (size_t)o * (R + 1),
                            sizeof(float) * R);
        assert_float_equal(weights_only[(size_t)o * (R + 1) + R], -12345.0f, 0);
    }
    free(weights_only);
    k->conv_backward_data(d_in, d->d_out, d->wb, scratch, s->B, s->C, s->H, s->W, s->K, s->kernel,
                          threads);
    free(scratch);
}

/* got against the reference: within 1e-4 of the terms' magnitudes (float
 * sums of up to 20,000 terms; a wrong index is off by the terms themselves) */
static void expect_close(const char *what, const float *got, const reference *r)
{
    for (size_t i = 0; i < r->n; i++)
        if (!(fabs(got[i] - r->value[i]) <= 1e-4 * r->scale[i] + 1e-6))
            fail_msg("%s [%zu]: %.9g, expected %.9g (terms' magnitudes %.3g)", what, i, got[i],
                     r->value[i], r->scale[i]);
}

static const shape shapes[] = {
    {"conv1, 32 images", 32, 1, 28, 28, 20, 5, 0},
    {"conv2, 32 images", 32, 20, 12, 12, 50, 5, 0},
    {"ragged conv, 5 images", 5, 3, 9, 7, 7, 3, 0},
    {"ragged conv, 19 images", 19, 2, 6, 8, 11, 5, 0},
    {"fc1, 128 images", 128, 800, 1, 1, 500, 1, 1},
    {"fc2, 128 images", 128, 500, 1, 1, 10, 1, 1},
    {"ragged dense, 21 images", 21, 37, 1, 1, 13, 1, 1},
    /* more images than a strip of the transposed input holds (kernels.c's
     * STRIP_IMAGES): the weight gradient's sums resumed chunk by chunk */
    {"ragged dense, 300 images", 300, 70, 1, 1, 9, 1, 1},
};
enum { SHAPES = sizeof shapes / sizeof shapes[0] };

/* Each build this CPU runs (a build it lacks: a visible skip), forced as
 * LENET_BENCH_DIRECT_ISA forces it, on one and two threads */
static void every_build_matches_the_reference(void **state)
{
    (void)state;
    int ran = 0;
    for (int c = 0; c < SHAPES; c++) {
        case_data d = case_new(shapes[c]);
        float *out = malloc(sizeof(float) * d.out.n), *d_in = malloc(sizeof(float) * d.d_in.n);
        float *d_param = malloc(sizeof(float) * d.d_param.n);
        assert_true(out && d_in && d_param);
        for (int i = 0; i < direct_kernels_count(); i++) {
            const direct_kernels *k = direct_kernels_at(i);
            if (!k->cpu_runs()) {
                if (c == 0)
                    printf("[  SKIPPED ] direct %s: this CPU cannot run it\n", k->isa);
                continue;
            }
            setenv("LENET_BENCH_DIRECT_ISA", k->isa, 1);
            char err[256];
            assert_ptr_equal(direct_choose(err, sizeof err), k);
            for (int threads = 1; threads <= 2; threads++) {
                char what[160];
                run_build(direct_active(), &d, out, d_in, d_param, threads);
                snprintf(what, sizeof what, "%s, %s, %d thread(s): forward", k->isa, d.s.name,
                         threads);
                expect_close(what, out, &d.out);
                snprintf(what, sizeof what, "%s, %s, %d thread(s): input gradient", k->isa,
                         d.s.name, threads);
                expect_close(what, d_in, &d.d_in);
                snprintf(what, sizeof what, "%s, %s, %d thread(s): parameter gradients", k->isa,
                         d.s.name, threads);
                expect_close(what, d_param, &d.d_param);
                ran++;
            }
        }
        free(out), free(d_in), free(d_param);
        case_free(&d);
    }
    unsetenv("LENET_BENCH_DIRECT_ISA");
    assert_true(ran > 0);
}

/* The two AVX-512 builds differ in tiles only: each output of the forward
 * pass and each parameter gradient is the same sum in the same order, so
 * the same float. (An element of the input gradient takes the sums of its
 * kernel columns in the order of the column tiles that hold them: there
 * the builds may differ in the last bits, as the reference allows.) */
static void avx512_builds_agree_exactly(void **state)
{
    (void)state;
    const direct_kernels *one = direct_kernels_find("avx512"),
                         *two = direct_kernels_find("avx512_2fma");
    if (!one || !two || !one->cpu_runs() || !two->cpu_runs()) {
        printf("[  SKIPPED ] no AVX-512 here: the two AVX-512 builds not compared\n");
        skip();
        return;
    }
    for (int c = 0; c < SHAPES; c++) {
        case_data d = case_new(shapes[c]);
        const size_t n[3] = {d.out.n, d.d_in.n, d.d_param.n};
        float *got[2][3];
        for (int b = 0; b < 2; b++) {
            for (int j = 0; j < 3; j++)
                assert_non_null(got[b][j] = malloc(sizeof(float) * n[j]));
            run_build(b ? two : one, &d, got[b][0], got[b][1], got[b][2], 1);
        }
        static const char *const products[3] = {"forward", "input gradient", "parameter gradients"};
        for (int j = 0; j < 3; j++) {
            if (j != 1 && memcmp(got[0][j], got[1][j], sizeof(float) * n[j]))
                fail_msg("%s %s: avx512 and avx512_2fma differ", d.s.name, products[j]);
            free(got[0][j]), free(got[1][j]);
        }
        case_free(&d);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_are_the_builds),
        cmocka_unit_test(fma_ports_by_core),
        cmocka_unit_test(best_build_fits_the_core),
        cmocka_unit_test(forced_values),
        cmocka_unit_test(candidate_tables_are_whole),
        cmocka_unit_test(candidate_names),
        cmocka_unit_test(every_build_matches_the_reference),
        cmocka_unit_test(avx512_builds_agree_exactly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
