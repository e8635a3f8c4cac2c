/* devices/cpu/act.h — the float activations that both the elementwise
 * kernels (elementwise.c) and the fused epilogues (fused.c) apply, so that a
 * fused instruction gives bit for bit what the separate ones give. */
#ifndef TFVM_CPU_ACT_H
#define TFVM_CPU_ACT_H

#include <math.h>
#include <stddef.h>

/* tanh of an f32 through one double exp: glibc's tanhf (expm1f inside) took
 * ~20 ns an element, half of a 64-wide RNN step. In double, (e - 1) / (e + 1)
 * with e = exp(2x) is accurate to ~2^-40 relative for |x| >= 2^-12, so the
 * rounded f32 is correctly rounded but for rare near-ties; below 2^-12 tanh(x)
 * rounds to x (x^3/3 is under half an ulp), which also keeps -0; from 9.1 on
 * it rounds to +-1. NaN stays NaN. */
static inline float dev_tanhf(float x)
{
    const double d = x, a = fabs(d);
    if (a < 0x1p-12)
        return x;
    if (a > 9.1)
        return copysignf(1.0f, x);
    const double e = exp(2.0 * d);
    return (float)((e - 1.0) / (e + 1.0));
}

/* o[i] = tanh(x[i]) for n elements (o may be x): act.c, vectorised where the
 * CPU allows. What TANH on f32, and the fused tanh epilogue, compute. */
void dev_tanhf_n(float *o, const float *x, size_t n);

#endif
