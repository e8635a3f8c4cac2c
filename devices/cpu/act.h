/* devices/cpu/act.h — the float activations that both the elementwise
 * kernels (elementwise.c) and the fused epilogues (fused.c) apply, so that a
 * fused instruction gives bit for bit what the separate ones give. */
#ifndef TFVM_CPU_ACT_H
#define TFVM_CPU_ACT_H

#include <stdbool.h>
#include <stddef.h>

/* o[i] = f(x[i]) for n elements (o may be x): act.c, vectorised where the
 * CPU allows. What TANH, EXP, SIGMOID, ERF and LOG on f32 compute, and the
 * fused epilogues (SiLU: x * sigmoid(x), MUL (x, SIGMOID (x)); GELU: (x *
 * (erf(x / sqrt(2)) + 1)) * 0.5 in that order, as torch.onnx.export spells
 * it). */
void dev_tanhf_n(float *o, const float *x, size_t n);
void dev_expf_n(float *o, const float *x, size_t n);
/* o[i] = exp(x[i] - m), x - m rounded to f32 first (EXP of SUB), and the sum
 * of o in double: eight partial sums (i mod 8) over the whole groups of
 * eight, added ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)), then the last n % 8
 * in order (a softmax row's exponentials and their sum, in one pass) */
double dev_expf_sub_sum(float *o, const float *x, float m, size_t n);
void dev_sigmoidf_n(float *o, const float *x, size_t n);
void dev_erff_n(float *o, const float *x, size_t n);
void dev_logf_n(float *o, const float *x, size_t n);
void dev_siluf_n(float *o, const float *x, size_t n);
void dev_geluf_n(float *o, const float *x, size_t n);
/* the fused hardsigmoid (alpha 1/6, beta 0.5), hardswish and relu6: MUL,
 * ADD, MIN and MAX as the elementwise ops compute them, vectorised */
void dev_hardsigmoidf_n(float *o, const float *x, size_t n);
void dev_hardswishf_n(float *o, const float *x, size_t n);
void dev_relu6f_n(float *o, const float *x, size_t n);

/* c[i] = act(c[i] + b[i]) (vec) or act(c[i] + b[0]): a fused epilogue's
 * bias and activation in one pass over c, with the same two roundings as
 * the bias added first and the activation after (fused.c) */
typedef enum {
    DEV_BA_ID, /* the bias alone */
    DEV_BA_RELU,
    DEV_BA_SIGMOID,
    DEV_BA_SILU,
    DEV_BA_GELU,
    DEV_BA_HARDSIGMOID,
    DEV_BA_HARDSWISH,
    DEV_BA_RELU6,
    DEV_BA_COUNT
} dev_bias_act;
void dev_bias_actf_n(dev_bias_act a, float *c, size_t n, const float *b, bool vec);

/* Which code computes them: the best the CPU has (AUTO), or one forced for
 * tests and measurements; false (and nothing changes) when the CPU lacks it.
 * Process-wide: force only while nothing else runs. */
typedef enum { DEV_ACT_AUTO, DEV_ACT_PORTABLE, DEV_ACT_AVX2, DEV_ACT_AVX512 } dev_act_isa;
bool dev_act_force(dev_act_isa isa);
dev_act_isa dev_act_current(void);

#endif
