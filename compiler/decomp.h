/* compiler/decomp.h — composite ops (Softplus, GELU, Mish, ...) spelled once
 * in primitive instructions of isa/ops.def, for every front end that builds
 * IR (compiler/build.h): the ONNX and TensorFlow importers map their op
 * names onto these rows, each in one line, and .tfg programs call them by
 * their names here (softplus(x), elu(x, alpha = 0.5)), so no two front ends
 * can disagree.
 *
 * Every row is elementwise on a float (f32 or f64) scalar or tensor x: the
 * result, and every value in between, has x's type (its dtype, and its shape
 * as far as x's type knows it). The forms are chosen to stay finite where
 * the function is (Softplus at 100 is 100, not inf); what each row gives at
 * +-inf, NaN and -0 is written beside it in decomp.c and checked against a
 * float64 reference by test/unit/test_decomp.c. */
#ifndef TFVM_COMPILER_DECOMP_H
#define TFVM_COMPILER_DECOMP_H

#include "build.h"

typedef enum cc_decomp {
    CC_DC_SOFTPLUS,         /* log(1 + exp(x)) */
    CC_DC_SOFTSIGN,         /* x / (1 + |x|) */
    CC_DC_MISH,             /* x * tanh(softplus(x)) */
    CC_DC_ELU,              /* x < 0 ? alpha * (exp(x) - 1) : x */
    CC_DC_SELU,             /* gamma * elu(x, alpha) */
    CC_DC_CELU,             /* x < 0 ? alpha * (exp(x / alpha) - 1) : x */
    CC_DC_LEAKY_RELU,       /* x < 0 ? alpha * x : x */
    CC_DC_THRESHOLDED_RELU, /* x > alpha ? x : 0 */
    CC_DC_HARD_SIGMOID,     /* max(min(alpha * x + beta, 1), 0) */
    CC_DC_HARD_SWISH,       /* x * hard_sigmoid(x, 1/6, 1/2) */
    CC_DC_SWISH,            /* x * sigmoid(alpha * x); alpha 1 is SiLU */
    CC_DC_GELU,             /* x / 2 * (1 + erf(x / sqrt(2))) */
    CC_DC_GELU_TANH,        /* x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) */
    CC_DC_EXPM1,            /* exp(x) - 1, to the last bits near 0 */
    CC_DC_LOG1P,            /* log(1 + x), to the last bits near 0 */
    CC_DC_COUNT
} cc_decomp;

/* A row's name (lower case, as in the comments above), how many parameters
 * it takes (0 to 2) and their names and usual values (ONNX's defaults; TF's
 * importer passes its own where they differ). */
typedef struct cc_decomp_info {
    const char *name;
    uint32_t n_params;
    const char *param[2];
    double dflt[2];
} cc_decomp_info;

const cc_decomp_info *cc_decomp_row(cc_decomp d);
/* The row named `name` (as in the comments above), or -1. */
int cc_decomp_find(const char *name);

/* Builds row d on x in block b; p holds its n_params parameters (NULL: the
 * defaults). Returns the result, typed as x. */
cc_irval cc_decompose(cc *C, cc_blk *b, cc_decomp d, cc_irval x, const double *p);

/* x converted to dtype `to` as an imported model's Cast (ONNX, TensorFlow)
 * runs in ONNX Runtime and TensorFlow on x86, where the CPU's truncating
 * conversion (cvttss2si) never fails: a float that is NaN or out of range
 * of i32 (of i64, for an i64 target) gives the "integer indefinite" value,
 * INT32_MIN (INT64_MIN), and narrower integer targets are that i32 result
 * wrapped (300.0 to i8 is 44, NaN is 0). Any other cast (not float to
 * integer) is one CAST. The ISA's own CAST (and so .tfg's) stays strict:
 * such a float is a run-time error there. */
cc_irval cc_cast_x86(cc *C, cc_blk *b, cc_irval x, tfvm_dtype to);

#endif
