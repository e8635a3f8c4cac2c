/* devices/cpu/act.c — the f32 activations over arrays: exp, sigmoid, erf,
 * tanh, log, SiLU, GELU, hardsigmoid, hardswish and relu6 computed in f32
 * by one algorithm (act_body.h) compiled for AVX-512, AVX2+FMA and portable
 * scalar code, the best the CPU has chosen at run time (dev_act_force pins
 * one). The elementwise kernels and the fused epilogues both call these, so
 * that a fused instruction gives bit for bit what the separate ones give.
 * Worst errors against the exact value over every 7th float (test_act
 * states the bounds and checks every 257th on each path): exp 0.89 ulp,
 * sigmoid 2.33, erf 1.14, tanh 1.07 (over every float; 0.12% of them not
 * correctly rounded), log 0.78; the portable code, which rounds a*b + c
 * twice: exp 1.17, erf 1.78, tanh 1.10 (a denormal result in units of the
 * smallest denormal). AVX-512 and AVX2 give the same bits. */
#include "devices/cpu/act.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF /* the portable a*b + c rounds twice on every compiler */
#endif

#define DEV_SQRT2F 0x1.6a09e6p0f /* (float)sqrt(2), the constant exporters divide by */

/* ---- Portable: one float at a time ------------------------------------------------ */
static inline float pt_bits_f(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}
static inline uint32_t pt_f_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}
static inline float pt_pow2(float p, float t)
{
    const int32_t n = (int32_t)(pt_f_bits(t) - pt_f_bits(0x1.8p23f)), n1 = n / 2, n2 = n - n1;
    return p * pt_bits_f((uint32_t)(n1 + 127) << 23) * pt_bits_f((uint32_t)(n2 + 127) << 23);
}
static inline float pt_pow2n(float p, float t)
{
    return p * pt_bits_f((pt_f_bits(t) - pt_f_bits(0x1.8p23f) + 127u) << 23);
}
/* m in [sqrt(1/2), sqrt(2)) and e with x = m 2^e, for x > 0 normal */
static inline void pt_logsplit(float x, float *m, float *e)
{
    const uint32_t b = pt_f_bits(x);
    int32_t k = (int32_t)(b >> 23) - 127;
    float mm = pt_bits_f((b & 0x7fffffu) | 0x3f800000u);
    if (mm > 0x1.6a09e6p0f) {
        mm *= 0.5f;
        k++;
    }
    *m = mm;
    *e = (float)k;
}
#define VLOGSPLIT(x, m, e) pt_logsplit(x, &(m), &(e))
#define VF float
#define VSET(c) (c)
#define VADD(a, b) ((a) + (b))
#define VSUB(a, b) ((a) - (b))
#define VMUL(a, b) ((a) * (b))
#define VDIV(a, b) ((a) / (b))
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VMIN(a, b) ((a) < (b) ? (a) : (b))
#define VMAX(a, b) ((a) > (b) ? (a) : (b))
#define VABS(a) fabsf(a)
#define VNEG(a) (-(a))
#define VNABS(a) (-fabsf(a))
#define VCOPYSIGN(m, x) copysignf(m, x)
#define VSEL_LT(a, b, x, y) ((a) < (b) ? (x) : (y))
#define VANY_LT(a, b) ((a) < (b))
#define VANY_OUT(a, lo, hi) ((a) < (lo) || (a) > (hi))
#define VSEL_NGE(a, b, x, y) (!((a) >= (b)) ? (x) : (y))
#define VSEL_NLE(a, b, x, y) (!((a) <= (b)) ? (x) : (y))
#define VNANFIX(x, r) (isnan(x) ? (x) + (x) : (r))
#define VPOW2(p, t) pt_pow2(p, t)
#define VPOW2N(p, t) pt_pow2n(p, t)
#define ACT_TARGET
#define ACT_SFX(f) pt_##f
#include "devices/cpu/act_body.h"
#undef VF
#undef VSET
#undef VADD
#undef VSUB
#undef VMUL
#undef VDIV
#undef VFMA
#undef VMIN
#undef VMAX
#undef VABS
#undef VNEG
#undef VNABS
#undef VCOPYSIGN
#undef VSEL_LT
#undef VANY_LT
#undef VANY_OUT
#undef VSEL_NGE
#undef VSEL_NLE
#undef VNANFIX
#undef VPOW2
#undef VPOW2N
#undef VLOGSPLIT
#undef ACT_TARGET
#undef ACT_SFX

#define PT_MAP(f)                                                      \
    static void pt_##f##_n(float *o, const float *x, size_t n)        \
    {                                                                  \
        for (size_t i = 0; i < n; i++)                                 \
            o[i] = pt_##f(x[i]);                                       \
    }
PT_MAP(exp)
/* exp(x - m) into o and the sum of o in double (dev_expf_sub_sum) */
static double pt_exp_sub_sum(float *o, const float *x, float m, size_t n)
{
    double p[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            p[l] += (double)(o[i + l] = pt_exp(x[i + l] - m));
    double s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
    for (; i < n; i++)
        s += (double)(o[i] = pt_exp(x[i] - m));
    return s;
}
PT_MAP(sigmoid)
PT_MAP(erf)
PT_MAP(tanh)
PT_MAP(silu)
PT_MAP(gelu)
PT_MAP(hardsigmoid)
PT_MAP(hardswish)
PT_MAP(relu6)
PT_MAP(log)

/* c[i] = f(c[i] + bias), the bias b[i] (vec) or b[0]: a fused epilogue in
 * one pass, the same two roundings as ADD then the activation */
#define PT_BMAP(f)                                                              \
    static void pt_##f##_b(float *c, size_t n, const float *b, bool vec)        \
    {                                                                           \
        for (size_t i = 0; i < n; i++)                                          \
            c[i] = pt_##f(c[i] + b[vec ? i : 0]);                               \
    }
#define BIAS_FNS(M) M(id) M(relu) M(sigmoid) M(silu) M(gelu) M(hardsigmoid) M(hardswish) M(relu6)
BIAS_FNS(PT_BMAP)

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* ---- AVX2 and FMA: eight floats ----------------------------------------------------- */
#define A2 __attribute__((target("avx2,fma")))
A2 static inline __m256 a2_pow2(__m256 p, __m256 t)
{
    const __m256i n = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(_mm256_set1_ps(0x1.8p23f)));
    const __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1), b = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, b), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, b), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}
A2 static inline __m256 a2_pow2n(__m256 p, __m256 t)
{
    const __m256i n = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(_mm256_set1_ps(0x1.8p23f)));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23)));
}
A2 static inline void a2_logsplit(__m256 x, __m256 *m, __m256 *e)
{
    const __m256i b = _mm256_castps_si256(x);
    const __m256i k = _mm256_sub_epi32(_mm256_srli_epi32(b, 23), _mm256_set1_epi32(127));
    const __m256 mm = _mm256_castsi256_ps(
        _mm256_or_si256(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffff)), _mm256_set1_epi32(0x3f800000)));
    const __m256 big = _mm256_cmp_ps(mm, _mm256_set1_ps(0x1.6a09e6p0f), _CMP_GT_OQ);
    *m = _mm256_blendv_ps(mm, _mm256_mul_ps(mm, _mm256_set1_ps(0.5f)), big);
    *e = _mm256_add_ps(_mm256_cvtepi32_ps(k), _mm256_and_ps(big, _mm256_set1_ps(1.0f)));
}
#define VLOGSPLIT(x, m, e) a2_logsplit(x, &(m), &(e))
#define VF __m256
#define VSET(c) _mm256_set1_ps(c)
#define VADD _mm256_add_ps
#define VSUB _mm256_sub_ps
#define VMUL _mm256_mul_ps
#define VDIV _mm256_div_ps
#define VFMA _mm256_fmadd_ps
#define VMIN _mm256_min_ps
#define VMAX _mm256_max_ps
#define VABS(a) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a)
#define VNEG(a) _mm256_xor_ps(a, _mm256_set1_ps(-0.0f))
#define VNABS(a) _mm256_or_ps(a, _mm256_set1_ps(-0.0f))
#define VCOPYSIGN(m, x) _mm256_or_ps(m, _mm256_and_ps(x, _mm256_set1_ps(-0.0f)))
#define VSEL_LT(a, b, x, y) _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ))
#define VANY_LT(a, b) (_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ)) != 0)
#define VANY_OUT(a, lo, hi) \
    (_mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(a, lo, _CMP_LT_OQ), _mm256_cmp_ps(a, hi, _CMP_GT_OQ))) != 0)
#define VSEL_NGE(a, b, x, y) _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_NGE_UQ))
#define VSEL_NLE(a, b, x, y) _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_NLE_UQ))
#define VNANFIX(x, r) _mm256_blendv_ps(r, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q))
#define VPOW2(p, t) a2_pow2(p, t)
#define VPOW2N(p, t) a2_pow2n(p, t)
#define ACT_TARGET A2
#define ACT_SFX(f) a2_##f
#include "devices/cpu/act_body.h"
#undef VF
#undef VSET
#undef VADD
#undef VSUB
#undef VMUL
#undef VDIV
#undef VFMA
#undef VMIN
#undef VMAX
#undef VABS
#undef VNEG
#undef VNABS
#undef VCOPYSIGN
#undef VSEL_LT
#undef VANY_LT
#undef VANY_OUT
#undef VSEL_NGE
#undef VSEL_NLE
#undef VNANFIX
#undef VPOW2
#undef VPOW2N
#undef VLOGSPLIT
#undef ACT_TARGET
#undef ACT_SFX

/* the last 1-7 elements through a zero-filled vector, computed the same way */
#define A2_MAP(f)                                                              \
    A2 static void a2_##f##_n(float *o, const float *x, size_t n)             \
    {                                                                          \
        size_t i = 0;                                                          \
        for (; i + 8 <= n; i += 8)                                             \
            _mm256_storeu_ps(o + i, a2_##f(_mm256_loadu_ps(x + i)));           \
        if (i < n) {                                                           \
            float in[8] = {0}, out[8];                                         \
            memcpy(in, x + i, (n - i) * sizeof *in);                           \
            _mm256_storeu_ps(out, a2_##f(_mm256_loadu_ps(in)));                \
            memcpy(o + i, out, (n - i) * sizeof *out);                         \
        }                                                                      \
    }
A2_MAP(exp)
A2 static double a2_exp_sub_sum(float *o, const float *x, float m, size_t n)
{
    const __m256 mv = _mm256_set1_ps(m);
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = a2_exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
        _mm256_storeu_ps(o + i, e);
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double a[4], b[4];
    _mm256_storeu_pd(a, lo);
    _mm256_storeu_pd(b, hi);
    double s = ((a[0] + a[1]) + (a[2] + a[3])) + ((b[0] + b[1]) + (b[2] + b[3]));
    if (i < n) {
        float in[8] = {0}, out[8];
        memcpy(in, x + i, (n - i) * sizeof *in);
        _mm256_storeu_ps(out, a2_exp(_mm256_sub_ps(_mm256_loadu_ps(in), mv)));
        memcpy(o + i, out, (n - i) * sizeof *out);
        for (; i < n; i++)
            s += (double)o[i];
    }
    return s;
}
A2_MAP(sigmoid)
A2_MAP(erf)
A2_MAP(tanh)
A2_MAP(silu)
A2_MAP(gelu)
A2_MAP(hardsigmoid)
A2_MAP(hardswish)
A2_MAP(relu6)
A2_MAP(log)

#define A2_BMAP(f)                                                                        \
    A2 static void a2_##f##_b(float *c, size_t n, const float *b, bool vec)              \
    {                                                                                     \
        size_t i = 0;                                                                     \
        const __m256 b0 = _mm256_set1_ps(b[0]);                                           \
        for (; i + 8 <= n; i += 8)                                                        \
            _mm256_storeu_ps(c + i, a2_##f(_mm256_add_ps(_mm256_loadu_ps(c + i),           \
                                                         vec ? _mm256_loadu_ps(b + i) : b0))); \
        if (i < n) {                                                                      \
            float in[8] = {0}, bt[8] = {0}, out[8];                                       \
            memcpy(in, c + i, (n - i) * sizeof *in);                                      \
            if (vec)                                                                      \
                memcpy(bt, b + i, (n - i) * sizeof *bt);                                  \
            const __m256 bv = vec ? _mm256_loadu_ps(bt) : b0;                             \
            _mm256_storeu_ps(out, a2_##f(_mm256_add_ps(_mm256_loadu_ps(in), bv)));        \
            memcpy(c + i, out, (n - i) * sizeof *out);                                    \
        }                                                                                 \
    }
BIAS_FNS(A2_BMAP)

/* ---- AVX-512: sixteen floats ---------------------------------------------------------- */
#define A5 __attribute__((target("avx512f,avx512vl,avx2,fma")))
/* p 2^n for t = 0x1.8p23 + n: vscalefps rounds p 2^n once, as the two
 * factors of AVX2's a2_pow2 do (p 2^(n/2) is exact), so both give the same
 * bits, denormal results and n = 128 included, in one instruction */
A5 static inline __m512 a5_pow2(__m512 p, __m512 t) { return _mm512_scalef_ps(p, _mm512_sub_ps(t, _mm512_set1_ps(0x1.8p23f))); }
A5 static inline __m512 a5_bits(__m512 a, uint32_t m, int op)
{
    const __m512i x = _mm512_castps_si512(a), k = _mm512_set1_epi32((int)m);
    return _mm512_castsi512_ps(op ? _mm512_xor_si512(x, k) : _mm512_and_si512(x, k));
}
A5 static inline void a5_logsplit(__m512 x, __m512 *m, __m512 *e)
{
    const __m512i b = _mm512_castps_si512(x);
    const __m512i k = _mm512_sub_epi32(_mm512_srli_epi32(b, 23), _mm512_set1_epi32(127));
    const __m512 mm = _mm512_castsi512_ps(
        _mm512_or_si512(_mm512_and_si512(b, _mm512_set1_epi32(0x7fffff)), _mm512_set1_epi32(0x3f800000)));
    const __mmask16 big = _mm512_cmp_ps_mask(mm, _mm512_set1_ps(0x1.6a09e6p0f), _CMP_GT_OQ);
    *m = _mm512_mask_mul_ps(mm, big, mm, _mm512_set1_ps(0.5f));
    *e = _mm512_mask_add_ps(_mm512_cvtepi32_ps(k), big, _mm512_cvtepi32_ps(k), _mm512_set1_ps(1.0f));
}
#define VLOGSPLIT(x, m, e) a5_logsplit(x, &(m), &(e))
#define VF __m512
#define VSET(c) _mm512_set1_ps(c)
#define VADD _mm512_add_ps
#define VSUB _mm512_sub_ps
#define VMUL _mm512_mul_ps
#define VDIV _mm512_div_ps
#define VFMA _mm512_fmadd_ps
#define VMIN _mm512_min_ps
#define VMAX _mm512_max_ps
#define VABS(a) a5_bits(a, 0x7fffffffu, 0)
#define VNEG(a) a5_bits(a, 0x80000000u, 1)
#define VNABS(a) _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)))
#define VCOPYSIGN(m, x)                                                                                \
    _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(m),                                       \
                                        _mm512_castps_si512(a5_bits(x, 0x80000000u, 0))))
#define VSEL_LT(a, b, x, y) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), y, x)
#define VANY_LT(a, b) (_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ) != 0)
#define VANY_OUT(a, lo, hi) ((_mm512_cmp_ps_mask(a, lo, _CMP_LT_OQ) | _mm512_cmp_ps_mask(a, hi, _CMP_GT_OQ)) != 0)
#define VSEL_NGE(a, b, x, y) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_NGE_UQ), y, x)
#define VSEL_NLE(a, b, x, y) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_NLE_UQ), y, x)
#define VNANFIX(x, r) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, _mm512_add_ps(x, x))
#define VPOW2(p, t) a5_pow2(p, t)
#define VPOW2N(p, t) a5_pow2(p, t)
#define ACT_TARGET A5
#define ACT_SFX(f) a5_##f
#include "devices/cpu/act_body.h"
#undef VF
#undef VSET
#undef VADD
#undef VSUB
#undef VMUL
#undef VDIV
#undef VFMA
#undef VMIN
#undef VMAX
#undef VABS
#undef VNEG
#undef VNABS
#undef VCOPYSIGN
#undef VSEL_LT
#undef VANY_LT
#undef VANY_OUT
#undef VSEL_NGE
#undef VSEL_NLE
#undef VNANFIX
#undef VPOW2
#undef VPOW2N
#undef VLOGSPLIT
#undef ACT_TARGET
#undef ACT_SFX

/* the last 1-15 elements by a masked load (zeros) and store */
#define A5_MAP(f)                                                                    \
    A5 static void a5_##f##_n(float *o, const float *x, size_t n)                   \
    {                                                                                \
        size_t i = 0;                                                                \
        for (; i + 16 <= n; i += 16)                                                 \
            _mm512_storeu_ps(o + i, a5_##f(_mm512_loadu_ps(x + i)));                 \
        if (i < n) {                                                                 \
            const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);                    \
            _mm512_mask_storeu_ps(o + i, m, a5_##f(_mm512_maskz_loadu_ps(m, x + i))); \
        }                                                                            \
    }
A5_MAP(exp)
A5 static double a5_exp_sub_sum(float *o, const float *x, float m, size_t n)
{
    const __m512 mv = _mm512_set1_ps(m);
    __m512d acc = _mm512_setzero_pd(); /* lane l: elements l mod 8 of the whole groups of 8 */
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = a5_exp(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv));
        _mm512_storeu_ps(o + i, e);
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        const __m512 e = a5_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mv));
        _mm512_mask_storeu_ps(o + i, k, e);
        if (n - i >= 8) {
            acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
            i += 8;
        }
    }
    double a[8];
    _mm512_storeu_pd(a, acc);
    double s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    for (; i < n; i++)
        s += (double)o[i];
    return s;
}
A5_MAP(sigmoid)
A5_MAP(erf)
A5_MAP(tanh)
A5_MAP(silu)
A5_MAP(gelu)
A5_MAP(hardsigmoid)
A5_MAP(hardswish)
A5_MAP(relu6)
A5_MAP(log)

#define A5_BMAP(f)                                                                          \
    A5 static void a5_##f##_b(float *c, size_t n, const float *b, bool vec)                \
    {                                                                                       \
        size_t i = 0;                                                                       \
        const __m512 b0 = _mm512_set1_ps(b[0]);                                             \
        for (; i + 16 <= n; i += 16)                                                        \
            _mm512_storeu_ps(c + i, a5_##f(_mm512_add_ps(_mm512_loadu_ps(c + i),             \
                                                         vec ? _mm512_loadu_ps(b + i) : b0))); \
        if (i < n) {                                                                        \
            const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);                           \
            const __m512 bv = vec ? _mm512_maskz_loadu_ps(m, b + i) : b0;                   \
            _mm512_mask_storeu_ps(c + i, m, a5_##f(_mm512_add_ps(_mm512_maskz_loadu_ps(m, c + i), bv))); \
        }                                                                                   \
    }
BIAS_FNS(A5_BMAP)

static bool cpu_has(dev_act_isa isa)
{
    switch (isa) {
    case DEV_ACT_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case DEV_ACT_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    default: return true;
    }
}
#else
static bool cpu_has(dev_act_isa isa) { return isa == DEV_ACT_PORTABLE || isa == DEV_ACT_AUTO; }
#endif

typedef void (*act_fn)(float *o, const float *x, size_t n);
enum { F_EXP, F_SIGMOID, F_ERF, F_SILU, F_GELU, F_TANH, F_HSIG, F_HSWISH, F_RELU6, F_LOG, F_COUNT };
#define ACT_ROW(p) \
    {p##_exp_n, p##_sigmoid_n, p##_erf_n, p##_silu_n, p##_gelu_n, p##_tanh_n, p##_hardsigmoid_n, p##_hardswish_n, \
     p##_relu6_n, p##_log_n}
static const act_fn act_fns[][F_COUNT] = {
    [DEV_ACT_PORTABLE] = ACT_ROW(pt),
#if defined(__x86_64__) && defined(__GNUC__)
    [DEV_ACT_AVX2] = ACT_ROW(a2),
    [DEV_ACT_AVX512] = ACT_ROW(a5),
#endif
};

/* The path in use: 0 until the first call picks the best the CPU has. */
static atomic_int act_isa;

static dev_act_isa best(void)
{
    return cpu_has(DEV_ACT_AVX512) ? DEV_ACT_AVX512 : cpu_has(DEV_ACT_AVX2) ? DEV_ACT_AVX2 : DEV_ACT_PORTABLE;
}

bool dev_act_force(dev_act_isa isa)
{
    if (isa != DEV_ACT_AUTO && !cpu_has(isa))
        return false;
    atomic_store(&act_isa, (int)(isa == DEV_ACT_AUTO ? best() : isa));
    return true;
}

dev_act_isa dev_act_current(void)
{
    int i = atomic_load_explicit(&act_isa, memory_order_relaxed);
    if (i == DEV_ACT_AUTO) {
        i = (int)best();
        atomic_store_explicit(&act_isa, i, memory_order_relaxed);
    }
    return (dev_act_isa)i;
}

static act_fn fn(int f) { return act_fns[dev_act_current()][f]; }

typedef void (*bias_fn)(float *c, size_t n, const float *b, bool vec);
#define BIAS_ROW(p)                                                                                       \
    {[DEV_BA_ID] = p##_id_b, [DEV_BA_RELU] = p##_relu_b, [DEV_BA_SIGMOID] = p##_sigmoid_b,               \
     [DEV_BA_SILU] = p##_silu_b, [DEV_BA_GELU] = p##_gelu_b, [DEV_BA_HARDSIGMOID] = p##_hardsigmoid_b,   \
     [DEV_BA_HARDSWISH] = p##_hardswish_b, [DEV_BA_RELU6] = p##_relu6_b}
static const bias_fn bias_fns[][DEV_BA_COUNT] = {
    [DEV_ACT_PORTABLE] = BIAS_ROW(pt),
#if defined(__x86_64__) && defined(__GNUC__)
    [DEV_ACT_AVX2] = BIAS_ROW(a2),
    [DEV_ACT_AVX512] = BIAS_ROW(a5),
#endif
};

void dev_bias_actf_n(dev_bias_act a, float *c, size_t n, const float *b, bool vec)
{
    bias_fns[dev_act_current()][a](c, n, b, vec);
}

void dev_expf_n(float *o, const float *x, size_t n) { fn(F_EXP)(o, x, n); }

double dev_expf_sub_sum(float *o, const float *x, float m, size_t n)
{
    switch (dev_act_current()) {
#if defined(__x86_64__) && defined(__GNUC__)
    case DEV_ACT_AVX512: return a5_exp_sub_sum(o, x, m, n);
    case DEV_ACT_AVX2: return a2_exp_sub_sum(o, x, m, n);
#endif
    default: return pt_exp_sub_sum(o, x, m, n);
    }
}
void dev_sigmoidf_n(float *o, const float *x, size_t n) { fn(F_SIGMOID)(o, x, n); }
void dev_erff_n(float *o, const float *x, size_t n) { fn(F_ERF)(o, x, n); }
void dev_siluf_n(float *o, const float *x, size_t n) { fn(F_SILU)(o, x, n); }
void dev_geluf_n(float *o, const float *x, size_t n) { fn(F_GELU)(o, x, n); }
void dev_tanhf_n(float *o, const float *x, size_t n) { fn(F_TANH)(o, x, n); }
void dev_hardsigmoidf_n(float *o, const float *x, size_t n) { fn(F_HSIG)(o, x, n); }
void dev_hardswishf_n(float *o, const float *x, size_t n) { fn(F_HSWISH)(o, x, n); }
void dev_relu6f_n(float *o, const float *x, size_t n) { fn(F_RELU6)(o, x, n); }
void dev_logf_n(float *o, const float *x, size_t n) { fn(F_LOG)(o, x, n); }
