/* util/half.h — f16 (IEEE binary16) and bf16 (bfloat16) to and from f32 and
 * f64, one element at a time, portably: what CAST, .npy and the printers
 * use. Narrowing rounds to nearest even; NaN stays NaN (quieted, the payload
 * truncated, as x86's F16C does, so the vector path in devices/cpu/half.c
 * gives the same bits). */
#ifndef TFVM_UTIL_HALF_H
#define TFVM_UTIL_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float ut_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t x;
    if (e == 0x1f) {
        x = sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0);
    } else if (e == 0) { /* zero or subnormal: m * 2^-24 is exact in f32 */
        const float f = (float)m * 0x1p-24f;
        memcpy(&x, &f, 4);
        x |= sign;
    } else {
        x = sign | ((e + 112) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static inline uint16_t ut_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
    if (x >= 0x47800000u) /* 2^16 and up (inf too): inf */
        return (uint16_t)(sign | 0x7c00u);
    if (x < 0x38800000u) { /* below 2^-14: subnormal or zero; adding 0.5 rounds the
                              10 bits at the bottom of the sum to nearest even */
        float a;
        memcpy(&a, &x, 4);
        a += 0.5f;
        memcpy(&x, &a, 4);
        return (uint16_t)(sign | (x - 0x3f000000u));
    }
    /* rebias the exponent; + 0xfff + the kept lsb rounds to nearest even
       (a carry into the exponent is the right answer, up to inf) */
    x += 0xc8000fffu + ((x >> 13) & 1);
    return (uint16_t)(sign | (x >> 13));
}

static inline float ut_bf16_to_f32(uint16_t h)
{
    const uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static inline uint16_t ut_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* f64 to f32 rounding to odd: a second rounding (to f16 or bf16, with far
 * fewer bits) then gives what one rounding of the f64 would. */
static inline float ut_f64_to_f32_odd(double d)
{
    float f = (float)d;
    if (!isfinite(f) || (double)f == d)
        return f;
    if (fabs((double)f) > fabs(d))
        f = nextafterf(f, 0.0f);
    uint32_t x;
    memcpy(&x, &f, 4);
    x |= 1;
    memcpy(&f, &x, 4);
    return f;
}

static inline uint16_t ut_f64_to_f16(double d) { return ut_f32_to_f16(ut_f64_to_f32_odd(d)); }
static inline uint16_t ut_f64_to_bf16(double d) { return ut_f32_to_bf16(ut_f64_to_f32_odd(d)); }

#endif
