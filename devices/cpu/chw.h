/* devices/cpu/chw.h — f32 layout changes for the convolution kernels: a
 * stride of 2's elements gathered by vector shuffles, and rows between
 * channels first (a row of each channel's plane) and channels last (each
 * position's channels together), with the bias and relu on the way back,
 * for the kernels that compute channels last (convf32.c, dwconv.c):
 * portably, and for AVX2 and AVX-512 in 8 x 8 and 16 x 16 blocks
 * transposed in registers. */
#ifndef TFVM_CPU_CHW_H
#define TFVM_CPU_CHW_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* o[c] = x[2c] for c < n, n a multiple of VL, reading x[0, 2n): stride
 * 2's columns (depthwise phases, im2col), VL at a time by one two-source
 * shuffle. Per instruction set, so that the shuffle is one instruction
 * (vpermt2ps, vshufps), not lanes through the stack. */
#ifdef __clang__
#define CHW_EVENS4(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6)
#define CHW_EVENS8(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14)
#define CHW_EVENS16(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#else
#define CHW_EVENS4(a, b) __builtin_shuffle(a, b, (chw_i4x){0, 2, 4, 6})
#define CHW_EVENS8(a, b) __builtin_shuffle(a, b, (chw_i8x){0, 2, 4, 6, 8, 10, 12, 14})
#define CHW_EVENS16(a, b) __builtin_shuffle(a, b, (chw_i16x){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30})
#endif
#define CHW_EVENS_FN(SFX, TARGET, VT, VL, EVENS)                                             \
    TARGET static inline void evens_##SFX(float *o, const float *x, int64_t n)                  \
    {                                                                                       \
        for (int64_t c = 0; c < n; c += VL) {                                               \
            VT a, b;                                                                        \
            memcpy(&a, x + 2 * c, sizeof a);                                                \
            memcpy(&b, x + 2 * c + VL, sizeof b);                                           \
            const VT e = EVENS(a, b);                                                       \
            memcpy(o + c, &e, sizeof e);                                                    \
        }                                                                                   \
    }
typedef float chw_f4x __attribute__((vector_size(16)));
typedef int32_t chw_i4x __attribute__((vector_size(16)));
CHW_EVENS_FN(v4, , chw_f4x, 4, CHW_EVENS4)
#if defined(__x86_64__) && defined(__GNUC__)
typedef float chw_f8x __attribute__((vector_size(32)));
typedef int32_t chw_i8x __attribute__((vector_size(32)));
typedef float chw_f16x __attribute__((vector_size(64)));
typedef int32_t chw_i16x __attribute__((vector_size(64)));
CHW_EVENS_FN(v8, __attribute__((target("avx2"))), chw_f8x, 8, CHW_EVENS8)
CHW_EVENS_FN(v16, __attribute__((target("avx512f"))), chw_f16x, 16, CHW_EVENS16)
#endif

/* d[w*dstride + c] = x[c*cstride + w], c < C, w < W: an x row into channels last */
static inline void to_hwc_v4(const float *x, int64_t cstride, int64_t C, int64_t W, float *d, int64_t dstride)
{
    for (int64_t c = 0; c < C; c++)
        for (int64_t w = 0; w < W; w++)
            d[w * dstride + c] = x[c * cstride + w];
}

/* d[o*dstride + w] = act((y[w*ystride + o] + bias[o]) + res[o*dstride + w]),
 * o < O, w < W: an output row back to channels first, with the epilogue
 * (bias, res NULL: none; res may be d itself, each element read before it
 * is written) */
static inline void to_chw_v4(const float *y, int64_t ystride, int64_t W, int64_t O, float *d, int64_t dstride,
                             const float *bias, const float *res, bool relu)
{
    for (int64_t o = 0; o < O; o++)
        for (int64_t w = 0; w < W; w++) {
            float v = y[w * ystride + o];
            if (bias)
                v = v + bias[o];
            if (res)
                v = v + res[o * dstride + w];
            if (relu)
                v = v < 0 ? 0 : v;
            d[o * dstride + w] = v;
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* ---- AVX2: 8 x 8 blocks ---- */
#define CHW_TARGET __attribute__((target("avx2")))
/* the first n lanes (n < 0: none) */
CHW_TARGET static inline __m256i v8_mask(int64_t n)
{
    const int k = n < 0 ? 0 : n > 8 ? 8 : (int)n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
CHW_TARGET static inline __m256 v8_ldn(const float *p, int64_t n)
{
    return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, v8_mask(n));
}
CHW_TARGET static inline void v8_stn(float *p, __m256 v, int64_t n)
{
    if (n >= 8)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, v8_mask(n), v);
}
/* The columns of a stride of 2 (the pools): lanes 0, 2, .., 14 (evens) or
 * 1, 3, .., 15 (odds) of a then b, in the order one in-lane shuffle leaves
 * them (a0 a2 b0 b2 a4 a6 b4 b6), which v8_unlace puts right (a0 a2 a4 a6 b0
 * b2 b4 b6): elementwise work between the two, once per result rather than
 * once per operand */
CHW_TARGET static inline __m256 v8_evens_laced(__m256 a, __m256 b) { return _mm256_shuffle_ps(a, b, 0x88); }
CHW_TARGET static inline __m256 v8_odds_laced(__m256 a, __m256 b) { return _mm256_shuffle_ps(a, b, 0xDD); }
CHW_TARGET static inline __m256 v8_unlace(__m256 v)
{
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), 0xD8));
}
/* x < 0 ? 0 : x, as v16_relu */
CHW_TARGET static inline __m256 v8_relu(__m256 v) { return _mm256_max_ps(_mm256_setzero_ps(), v); }

/* r[j][i] = r[i][j] */
CHW_TARGET __attribute__((always_inline)) static inline void tr8(__m256 r[8])
{
    __m256 t[8], u[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* r: the block of nr rows (stride ss) by nc columns at s, transposed, zeros
 * past its edges */
CHW_TARGET static inline void tr8_load(const float *s, int64_t ss, int64_t nr, int64_t nc, __m256 r[8])
{
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        r[i] = i < nr ? v8_ldn(s + i * ss, nc) : _mm256_setzero_ps();
    tr8(r);
}

/* to_hwc_v4 and to_chw_v4 in 8 x 8 blocks transposed in registers */
CHW_TARGET static inline void to_hwc_v8(const float *x, int64_t cstride, int64_t C, int64_t W, float *d,
                                         int64_t dstride)
{
    for (int64_t c0 = 0; c0 < C; c0 += 8)
        for (int64_t w0 = 0; w0 < W; w0 += 8) {
            const int64_t nc = C - c0 < 8 ? C - c0 : 8, nw = W - w0 < 8 ? W - w0 : 8;
            __m256 r[8];
            tr8_load(x + c0 * cstride + w0, cstride, nc, nw, r);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++)
                if (j < nw)
                    v8_stn(d + (w0 + j) * dstride + c0, r[j], nc);
        }
}

CHW_TARGET static inline void to_chw_v8(const float *y, int64_t ystride, int64_t W, int64_t O, float *d,
                                         int64_t dstride, const float *bias, const float *res, bool relu)
{
    for (int64_t o0 = 0; o0 < O; o0 += 8)
        for (int64_t w0 = 0; w0 < W; w0 += 8) {
            const int64_t no = O - o0 < 8 ? O - o0 : 8, nw = W - w0 < 8 ? W - w0 : 8;
            __m256 r[8];
            tr8_load(y + w0 * ystride + o0, ystride, nw, no, r);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) {
                if (j >= no)
                    break;
                __m256 v = r[j];
                if (bias)
                    v = _mm256_add_ps(v, _mm256_set1_ps(bias[o0 + j]));
                if (res)
                    v = _mm256_add_ps(v, v8_ldn(res + (o0 + j) * dstride + w0, nw));
                if (relu)
                    v = v8_relu(v);
                v8_stn(d + (o0 + j) * dstride + w0, v, nw);
            }
        }
}
#undef CHW_TARGET

#define CHW_TARGET __attribute__((target("avx512f")))
static inline __mmask16 v16_mask(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }
/* o[c] = x[2c] for all c < n, reading only x[0, avail) (avail > 2(n - 1)):
 * evens_v16's vectors, then the last 1-15 by masked loads and a masked
 * store (im2col's stride-2 rows of 28 had left 12 to a scalar loop, half
 * of its time) */
CHW_TARGET static inline void evens_v16_all(float *o, const float *x, int64_t n, int64_t avail)
{
    int64_t c = 0;
    for (; c + 16 <= n && 2 * c + 32 <= avail; c += 16)
        _mm512_storeu_ps(o + c, _mm512_permutex2var_ps(_mm512_loadu_ps(x + 2 * c),
                                                       _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
                                                                         22, 24, 26, 28, 30),
                                                       _mm512_loadu_ps(x + 2 * c + 16)));
    for (; c < n; c += 16) {
        const int64_t left = avail - 2 * c;
        const __m512 a = _mm512_maskz_loadu_ps(v16_mask(left), x + 2 * c);
        const __m512 b = _mm512_maskz_loadu_ps(v16_mask(left > 16 ? left - 16 : 0), x + 2 * c + 16);
        const __m512 e = _mm512_permutex2var_ps(
            a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);
        _mm512_mask_storeu_ps(o + c, v16_mask(n - c), e);
    }
}

/* max(0, x) returns x when x is NaN, and x = -0 itself: x < 0 ? 0 : x */
CHW_TARGET static inline __m512 v16_relu(__m512 v) { return _mm512_max_ps(_mm512_setzero_ps(), v); }

/* r[j][i] = r[i][j] (inlined: r stays in registers) */
CHW_TARGET __attribute__((always_inline)) static inline void tr16(__m512 r[16])
{
    __m512 t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 4) {
        const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
        const __m512d c = _mm512_castps_pd(t[i + 2]), e = _mm512_castps_pd(t[i + 3]);
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, e));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, e));
    }
#pragma GCC unroll 16
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}

/* r: the block of nr rows (stride ss) by nc columns at s, transposed (row j
 * of r is column j of the block), zeros past its edges */
CHW_TARGET static inline void tr16_load(const float *s, int64_t ss, int64_t nr, int64_t nc, __m512 r[16])
{
    const __mmask16 m = v16_mask(nc);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        r[i] = i < nr ? _mm512_maskz_loadu_ps(m, s + i * ss) : _mm512_setzero_ps();
    tr16(r);
}

/* to_hwc_v4 and to_chw_v4 in 16 x 16 blocks transposed in registers */
CHW_TARGET static inline void to_hwc_v16_pf(const float *x, int64_t cstride, int64_t C, int64_t W, float *d,
                                             int64_t dstride, int64_t ahead)
{
    for (int64_t c0 = 0; c0 < C; c0 += 16)
        for (int64_t w0 = 0; w0 < W; w0 += 16) {
            const int64_t nc = C - c0 < 16 ? C - c0 : 16, nw = W - w0 < 16 ? W - w0 : 16;
            __m512 r[16];
            if (ahead)
                for (int64_t i = 0; i < nc; i++)
                    __builtin_prefetch(x + (c0 + i) * cstride + w0 + ahead, 0, 3);
            tr16_load(x + c0 * cstride + w0, cstride, nc, nw, r);
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++)
                if (j < nw)
                    _mm512_mask_storeu_ps(d + (w0 + j) * dstride + c0, v16_mask(nc), r[j]);
        }
}

CHW_TARGET static inline void to_hwc_v16(const float *x, int64_t cstride, int64_t C, int64_t W, float *d,
                                          int64_t dstride)
{
    to_hwc_v16_pf(x, cstride, C, W, d, dstride, 0);
}

CHW_TARGET static inline void to_chw_v16(const float *y, int64_t ystride, int64_t W, int64_t O, float *d,
                                          int64_t dstride, const float *bias, const float *res, bool relu)
{
    for (int64_t o0 = 0; o0 < O; o0 += 16)
        for (int64_t w0 = 0; w0 < W; w0 += 16) {
            const int64_t no = O - o0 < 16 ? O - o0 : 16, nw = W - w0 < 16 ? W - w0 : 16;
            __m512 r[16];
            tr16_load(y + w0 * ystride + o0, ystride, nw, no, r);
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++) {
                if (j >= no)
                    break;
                __m512 v = r[j];
                if (bias)
                    v = _mm512_add_ps(v, _mm512_set1_ps(bias[o0 + j]));
                if (res)
                    v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(v16_mask(nw), res + (o0 + j) * dstride + w0));
                if (relu)
                    v = v16_relu(v);
                _mm512_mask_storeu_ps(d + (o0 + j) * dstride + w0, v16_mask(nw), v);
            }
        }
}
#undef CHW_TARGET
#endif

#endif
