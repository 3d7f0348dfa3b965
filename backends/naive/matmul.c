/* The matrix loops behind the convolution and dense layers.
 *
 * The innermost loop is always c[j] += a * b[j] over contiguous j, which the
 * compiler vectorises without reordering any sum (no -ffast-math needed).
 * To keep loads and stores below the arithmetic, each pass of that loop
 * updates four rows of C from four rows of B: sixteen multiply-adds for every
 * four loads of B and four loads and stores of C. Leftover rows and the last
 * K % 4 terms go one at a time. matmul_nn and matmul_tn are the same loops,
 * differing only in where they find A's elements. */
#include "backends/naive/layers.h"

void matmul_nn(real *restrict C, const real *restrict A, const real *restrict B, int M,
               int N, int K)
{
    int i = 0;
    for (; i + 4 <= M; i += 4) {
        real *restrict c0 = C + (size_t)i * N, *restrict c1 = c0 + N, *restrict c2 = c1 + N,
                        *restrict c3 = c2 + N;
        const real *a0 = A + (size_t)i * K, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K;
        int k = 0;
        for (; k + 4 <= K; k += 4) {
            const real *b0 = B + (size_t)k * N, *b1 = b0 + N, *b2 = b1 + N, *b3 = b2 + N;
            for (int j = 0; j < N; j++) {
                const real x0 = b0[j], x1 = b1[j], x2 = b2[j], x3 = b3[j];
                c0[j] += a0[k] * x0 + a0[k + 1] * x1 + a0[k + 2] * x2 + a0[k + 3] * x3;
                c1[j] += a1[k] * x0 + a1[k + 1] * x1 + a1[k + 2] * x2 + a1[k + 3] * x3;
                c2[j] += a2[k] * x0 + a2[k + 1] * x1 + a2[k + 2] * x2 + a2[k + 3] * x3;
                c3[j] += a3[k] * x0 + a3[k + 1] * x1 + a3[k + 2] * x2 + a3[k + 3] * x3;
            }
        }
        for (; k < K; k++) {
            const real *b = B + (size_t)k * N;
            for (int j = 0; j < N; j++) {
                c0[j] += a0[k] * b[j];
                c1[j] += a1[k] * b[j];
                c2[j] += a2[k] * b[j];
                c3[j] += a3[k] * b[j];
            }
        }
    }
    for (; i < M; i++) {
        real *restrict c = C + (size_t)i * N;
        const real *a = A + (size_t)i * K;
        for (int k = 0; k < K; k++) {
            const real *b = B + (size_t)k * N;
            for (int j = 0; j < N; j++)
                c[j] += a[k] * b[j];
        }
    }
}

/* As matmul_nn with A(i, k) = A[k * M + i]: a0..a3 below point at
 * A(i, k), A(i, k + 1), A(i, k + 2), A(i, k + 3). */
void matmul_tn(real *restrict C, const real *restrict A, const real *restrict B, int M,
               int N, int K)
{
    int i = 0;
    for (; i + 4 <= M; i += 4) {
        real *restrict c0 = C + (size_t)i * N, *restrict c1 = c0 + N, *restrict c2 = c1 + N,
                        *restrict c3 = c2 + N;
        int k = 0;
        for (; k + 4 <= K; k += 4) {
            const real *a0 = A + (size_t)k * M + i, *a1 = a0 + M, *a2 = a1 + M, *a3 = a2 + M;
            const real *b0 = B + (size_t)k * N, *b1 = b0 + N, *b2 = b1 + N, *b3 = b2 + N;
            for (int j = 0; j < N; j++) {
                const real x0 = b0[j], x1 = b1[j], x2 = b2[j], x3 = b3[j];
                c0[j] += a0[0] * x0 + a1[0] * x1 + a2[0] * x2 + a3[0] * x3;
                c1[j] += a0[1] * x0 + a1[1] * x1 + a2[1] * x2 + a3[1] * x3;
                c2[j] += a0[2] * x0 + a1[2] * x1 + a2[2] * x2 + a3[2] * x3;
                c3[j] += a0[3] * x0 + a1[3] * x1 + a2[3] * x2 + a3[3] * x3;
            }
        }
        for (; k < K; k++) {
            const real *a = A + (size_t)k * M + i;
            const real *b = B + (size_t)k * N;
            for (int j = 0; j < N; j++) {
                c0[j] += a[0] * b[j];
                c1[j] += a[1] * b[j];
                c2[j] += a[2] * b[j];
                c3[j] += a[3] * b[j];
            }
        }
    }
    for (; i < M; i++) {
        real *restrict c = C + (size_t)i * N;
        for (int k = 0; k < K; k++) {
            const real a = A[(size_t)k * M + i];
            const real *b = B + (size_t)k * N;
            for (int j = 0; j < N; j++)
                c[j] += a * b[j];
        }
    }
}

void transpose(real *restrict out, const real *restrict in, int M, int N)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            out[(size_t)j * M + i] = in[(size_t)i * N + j];
}
