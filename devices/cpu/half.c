/* devices/cpu/half.c — f16/bf16 array conversions (half.h): F16C (with AVX2
 * for bf16's integer shifts) chosen at run time, the portable loop otherwise. */
#include "devices/cpu/half.h"
#include "util/half.h"

#include <stdatomic.h>

static void pt_f16_to_f32(float *o, const uint16_t *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        o[i] = ut_f16_to_f32(x[i]);
}
static void pt_f32_to_f16(uint16_t *o, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        o[i] = ut_f32_to_f16(x[i]);
}
static void pt_bf16_to_f32(float *o, const uint16_t *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        o[i] = ut_bf16_to_f32(x[i]);
}
static void pt_f32_to_bf16(uint16_t *o, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        o[i] = ut_f32_to_bf16(x[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HC __attribute__((target("f16c,avx2")))

HC static void hc_f16_to_f32(float *o, const uint16_t *x, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    pt_f16_to_f32(o + i, x + i, n - i);
}
HC static void hc_f32_to_f16(uint16_t *o, const float *x, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(o + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    pt_f32_to_f16(o + i, x + i, n - i);
}
HC static void hc_bf16_to_f32(float *o, const uint16_t *x, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_si256((__m256i *)(o + i), _mm256_slli_epi32(w, 16));
    }
    pt_bf16_to_f32(o + i, x + i, n - i);
}
/* round to nearest even as ut_f32_to_bf16: + 0x7fff + lsb, NaNs quieted */
HC static void hc_f32_to_bf16(uint16_t *o, const float *x, size_t n)
{
    size_t i = 0;
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x400000);
    for (; i + 8 <= n; i += 8) {
        const __m256 f = _mm256_loadu_ps(x + i);
        const __m256i u = _mm256_castps_si256(f);
        const __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(_mm256_srli_epi32(u, 16), one));
        const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
        const __m256i w = _mm256_srli_epi32(_mm256_blendv_epi8(r, _mm256_or_si256(u, quiet), nan), 16);
        /* the 32-bit lanes to 16 bits: pack within 128-bit halves, then order them */
        const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(w, w), 0x08);
        _mm_storeu_si128((__m128i *)(o + i), _mm256_castsi256_si128(p));
    }
    pt_f32_to_bf16(o + i, x + i, n - i);
}
/* F16C by CPUID leaf 1 (not every compiler's __builtin_cpu_supports knows
   it); AVX2 also says the OS saves the vector registers */
static bool cpu_has(dev_half_isa isa)
{
    unsigned a, b, c, d;
    return isa != DEV_HALF_F16C ||
           (__builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C));
}
#else
static bool cpu_has(dev_half_isa isa) { return isa != DEV_HALF_F16C; }
#endif

typedef struct half_fns {
    void (*f16_to_f32)(float *, const uint16_t *, size_t);
    void (*f32_to_f16)(uint16_t *, const float *, size_t);
    void (*bf16_to_f32)(float *, const uint16_t *, size_t);
    void (*f32_to_bf16)(uint16_t *, const float *, size_t);
} half_fns;
static const half_fns fns[] = {
    [DEV_HALF_PORTABLE] = {pt_f16_to_f32, pt_f32_to_f16, pt_bf16_to_f32, pt_f32_to_bf16},
#if defined(__x86_64__) && defined(__GNUC__)
    [DEV_HALF_F16C] = {hc_f16_to_f32, hc_f32_to_f16, hc_bf16_to_f32, hc_f32_to_bf16},
#endif
};

static atomic_int half_isa; /* 0 until the first call picks the best the CPU has */

static dev_half_isa best(void) { return cpu_has(DEV_HALF_F16C) ? DEV_HALF_F16C : DEV_HALF_PORTABLE; }

bool dev_half_force(dev_half_isa isa)
{
    if (isa != DEV_HALF_AUTO && !cpu_has(isa))
        return false;
    atomic_store(&half_isa, (int)(isa == DEV_HALF_AUTO ? best() : isa));
    return true;
}

dev_half_isa dev_half_current(void)
{
    int i = atomic_load_explicit(&half_isa, memory_order_relaxed);
    if (i == DEV_HALF_AUTO) {
        i = (int)best();
        atomic_store_explicit(&half_isa, i, memory_order_relaxed);
    }
    return (dev_half_isa)i;
}

void dev_f16_to_f32_n(float *o, const uint16_t *x, size_t n) { fns[dev_half_current()].f16_to_f32(o, x, n); }
void dev_f32_to_f16_n(uint16_t *o, const float *x, size_t n) { fns[dev_half_current()].f32_to_f16(o, x, n); }
void dev_bf16_to_f32_n(float *o, const uint16_t *x, size_t n) { fns[dev_half_current()].bf16_to_f32(o, x, n); }
void dev_f32_to_bf16_n(uint16_t *o, const float *x, size_t n) { fns[dev_half_current()].f32_to_bf16(o, x, n); }
