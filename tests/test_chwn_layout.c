/* The CHWN engine's moves between layouts against their definitions:
 * chwn_transpose (16 x 16 floats in registers, the rest element by
 * element) and the gather of images into [pixels][ld], on shapes with and
 * without whole blocks, each writing exactly its elements and nothing
 * around them; and the 2x2 pools over groups of images that fill whole
 * vectors of 16 (their loops in vectors, then the rest), with ties. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "backends/chwn/chwn_layers.h"
#include "backends/chwn/chwn_transpose.h"
#include "backends/common/elementwise.h"

/* the double build's gather (chwn_layers.h names the float one) */
void chwn_gather_f64(double *x, int ld, const uint8_t *images, size_t pixels,
                     const int32_t *idx, int first, int B, int threads);

static const float UNTOUCHED = -12345.0f;

static float *filled(size_t n, float value)
{
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = value;
    return p;
}

static void transposes_every_shape(void **state)
{
    (void)state;
    static const int sizes[] = {1, 5, 15, 16, 17, 31, 32, 37, 50};
    enum { N = sizeof sizes / sizeof sizes[0] };
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++) {
            const int rows = sizes[a], cols = sizes[b];
            const size_t ld_src = (size_t)cols + 3, ld_dst = (size_t)rows + 1;
            float *src = filled((size_t)rows * ld_src, 0.0f);
            float *dst = filled((size_t)cols * ld_dst, UNTOUCHED);
            for (int r = 0; r < rows; r++)
                for (int c = 0; c < cols; c++)
                    src[(size_t)r * ld_src + c] = (float)(r * 1000 + c);
            chwn_transpose(dst, ld_dst, src, ld_src, rows, cols);
            for (int c = 0; c < cols; c++)
                for (size_t r = 0; r < ld_dst; r++) {
                    const float want = (int)r < rows ? (float)((int)r * 1000 + c) : UNTOUCHED;
                    if (dst[(size_t)c * ld_dst + r] != want)
                        fail_msg("%d x %d: dst[%d][%zu] = %g, expected %g", rows, cols, c, r,
                                 dst[(size_t)c * ld_dst + r], want);
                }
            free(src);
            free(dst);
        }
}

/* images[i] of `pixels` bytes, each byte different */
static uint8_t *images_of(int count, size_t pixels)
{
    uint8_t *images = malloc((size_t)count * pixels);
    assert_non_null(images);
    for (size_t i = 0; i < (size_t)count * pixels; i++)
        images[i] = (uint8_t)(i * 7 + i / 251);
    return images;
}

static void gathers_every_batch(void **state)
{
    (void)state;
    static const int batches[] = {1, 5, 16, 17, 33};
    static const size_t pixel_counts[] = {784, 37, 32};
    enum { COUNT = 40 };
    const int32_t idx[] = {39, 3, 0, 17, 22, 8, 31, 1, 2, 4, 5, 6, 7, 9, 10, 11, 12,
                           13, 14, 15, 16, 18, 19, 20, 21, 23, 24, 25, 26, 27, 28, 29, 30,
                           32, 33};
    for (size_t q = 0; q < sizeof pixel_counts / sizeof pixel_counts[0]; q++) {
        const size_t pixels = pixel_counts[q];
        uint8_t *images = images_of(COUNT, pixels);
        for (size_t k = 0; k < sizeof batches / sizeof batches[0]; k++)
            for (int by_index = 0; by_index < 2; by_index++)
                for (int threads = 1; threads <= 2; threads++) {
                    const int B = batches[k], ld = B + 3, first = 2;
                    float *x = filled(pixels * ld, UNTOUCHED);
                    double *x64 = malloc(pixels * ld * sizeof *x64);
                    assert_non_null(x64);
                    for (size_t i = 0; i < pixels * ld; i++)
                        x64[i] = UNTOUCHED;
                    const int32_t *which = by_index ? idx : NULL;
                    chwn_gather(x, ld, images, pixels, which, first, B, threads);
                    chwn_gather_f64(x64, ld, images, pixels, which, first, B, threads);
                    for (size_t p = 0; p < pixels; p++)
                        for (int b = 0; b < ld; b++) {
                            const int image = by_index ? idx[b < B ? b : 0] : first + b;
                            const float want =
                                b < B ? lb_pixel(images[(size_t)image * pixels + p]) : UNTOUCHED;
                            if (x[p * ld + b] != want || x64[p * ld + b] != (double)want)
                                fail_msg("B %d, %zu pixels, %s, %d threads: x[%zu][%d] = %g "
                                         "(double %g), expected %g",
                                         B, pixels, by_index ? "by index" : "in order", threads,
                                         p, b, x[p * ld + b], x64[p * ld + b], want);
                        }
                    free(x);
                    free(x64);
                }
        free(images);
    }
}

/* A 2x2, stride-2 pool of B images, in[C][H][W][B], against the rule
 * (the first largest of each window in row-major order wins, and takes
 * the output's gradient), with and without recorded winners. */
static void check_pool2(int B, int C, int H, int W)
{
    const int OH = H / 2, OW = W / 2;
    const size_t n_in = (size_t)C * H * W * B, n_out = (size_t)C * OH * OW * B;
    float *in = filled(n_in, 0.0f), *d_out = filled(n_out, 0.0f);
    float *out = filled(n_out, UNTOUCHED), *d_in = filled(n_in, UNTOUCHED);
    unsigned char *won = malloc(n_out);
    assert_non_null(won);
    for (size_t i = 0; i < n_in; i++) /* few values: ties everywhere */
        in[i] = (float)((i * 2654435761u) % 5);
    for (size_t i = 0; i < n_out; i++)
        d_out[i] = 1.0f + (float)i;
    for (int recorded = 0; recorded < 2; recorded++) {
        chwn_maxpool_forward(out, recorded ? won : NULL, in, B, C, H, W, 2, 2, 1);
        chwn_maxpool_backward(d_in, d_out, recorded ? won : NULL, recorded ? NULL : in,
                              recorded ? NULL : out, B, C, H, W, 2, 2, 1);
        for (int c = 0; c < C; c++)
            for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++)
                    for (int b = 0; b < B; b++) {
                        const size_t at = (((size_t)c * OH + oy) * OW + ox) * B + b;
                        size_t place[4];
                        int best = 0;
                        for (int q = 0; q < 4; q++) {
                            place[q] = (((size_t)c * H + 2 * oy + q / 2) * W + 2 * ox + q % 2) * B + b;
                            if (in[place[q]] > in[place[best]])
                                best = q;
                        }
                        if (out[at] != in[place[best]] || (recorded && won[at] != best))
                            fail_msg("B %d: window (%d, %d, %d) image %d: max %g winner %d, "
                                     "expected %g and %d",
                                     B, c, oy, ox, b, out[at], recorded ? won[at] : -1,
                                     in[place[best]], best);
                        for (int q = 0; q < 4; q++)
                            if (d_in[place[q]] != (q == best ? d_out[at] : 0.0f))
                                fail_msg("B %d: window (%d, %d, %d) image %d: gradient %g at "
                                         "%d, winner %d",
                                         B, c, oy, ox, b, d_in[place[q]], q, best);
                    }
    }
    free(in);
    free(d_out);
    free(out);
    free(d_in);
    free(won);
}

static void pools_of_whole_vectors(void **state)
{
    (void)state;
    check_pool2(32, 3, 6, 4); /* the direct set's groups: two vectors */
    check_pool2(16, 2, 4, 6); /* the GEMM sets' groups */
    check_pool2(37, 2, 4, 4); /* two vectors, then 5 images */
    check_pool2(7, 2, 4, 4);  /* less than a vector */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(transposes_every_shape),
        cmocka_unit_test(gathers_every_batch),
        cmocka_unit_test(pools_of_whole_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
