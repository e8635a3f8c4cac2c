/* devices/cpu/act.c — tanh over an f32 array. With AVX2 and FMA (checked at
 * run time) four lanes at a time, in double: exp(2|x|) from its Taylor
 * series after range reduction, then (e - 1) / (e + 1); else dev_tanhf
 * (act.h) per element. Both are correctly rounded but for rare near-ties
 * (the vector path differs from (float)tanh((double)x) on 2 of the 2^31
 * finite floats, the scalar one on as few), so both are what TANH means. */
#include "devices/cpu/act.h"

#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Four tanh: |x| clamped to 9.1 (where the quotient rounds to 1.0f), x = k ln2
 * + r with |r| <= ln2/2 (ln2 in two parts, so k ln2 is exact), exp(r) to r^13
 * (the rest is under 2^-57 relative), times 2^k made from k's bits; below
 * 2^-12, and NaN, x itself. */
__attribute__((target("avx2,fma"))) static __m128 tanh4(__m128 xf)
{
    const __m256d shift = _mm256_set1_pd(0x1.8p52), sign = _mm256_set1_pd(-0.0), one = _mm256_set1_pd(1.0);
    const __m256d d = _mm256_cvtps_pd(xf), a = _mm256_andnot_pd(sign, d);
    const __m256d y = _mm256_mul_pd(_mm256_min_pd(a, _mm256_set1_pd(9.1)), _mm256_set1_pd(2.0));
    const __m256d t = _mm256_fmadd_pd(y, _mm256_set1_pd(0x1.71547652b82fep0), shift);
    const __m256d k = _mm256_sub_pd(t, shift);
    __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(0x1.62e42fee00000p-1), y);
    r = _mm256_fnmadd_pd(k, _mm256_set1_pd(0x1.a39ef35793c76p-33), r);
    static const double inv_fact[] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                                      1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,      1.0 / 720.0,
                                      1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,         0.5,
                                      1.0,                1.0};
    __m256d p = _mm256_set1_pd(inv_fact[0]);
    for (int j = 1; j < 14; j++)
        p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(inv_fact[j]));
    const __m256i kb = _mm256_sub_epi64(_mm256_castpd_si256(t), _mm256_castpd_si256(shift));
    const __m256i eb = _mm256_slli_epi64(_mm256_add_epi64(kb, _mm256_set1_epi64x(1023)), 52);
    const __m256d e = _mm256_mul_pd(p, _mm256_castsi256_pd(eb));
    const __m256d q = _mm256_div_pd(_mm256_sub_pd(e, one), _mm256_add_pd(e, one));
    const __m128 rf = _mm256_cvtpd_ps(_mm256_or_pd(q, _mm256_and_pd(d, sign)));
    const __m128 af = _mm_andnot_ps(_mm_set1_ps(-0.0f), xf);
    const __m128 keep = _mm_or_ps(_mm_cmp_ps(af, _mm_set1_ps(0x1p-12f), _CMP_LT_OQ), _mm_cmp_ps(xf, xf, _CMP_UNORD_Q));
    return _mm_blendv_ps(rf, xf, keep);
}

__attribute__((target("avx2,fma"))) static void tanh_avx2(float *o, const float *x, size_t n)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        _mm_storeu_ps(o + i, tanh4(_mm_loadu_ps(x + i)));
    if (i < n) { /* the last 1-3 the same way, so that no element depends on its position */
        float in[4] = {0}, out[4];
        memcpy(in, x + i, (n - i) * sizeof *in);
        _mm_storeu_ps(out, tanh4(_mm_loadu_ps(in)));
        memcpy(o + i, out, (n - i) * sizeof *out);
    }
}

static bool have_avx2(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
#else
static bool have_avx2(void) { return false; }
static void tanh_avx2(float *o, const float *x, size_t n) { (void)o, (void)x, (void)n; }
#endif

void dev_tanhf_n(float *o, const float *x, size_t n)
{
    if (have_avx2()) {
        tanh_avx2(o, x, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        o[i] = dev_tanhf(x[i]);
}
