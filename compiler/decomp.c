/* compiler/decomp.c — the composite ops of compiler/decomp.h, each once, in
 * primitive instructions. Beside each row: what it gives at the edges where
 * the plain formula goes wrong, and which spellings the optimizer's fusions
 * (compiler/opt.c) recognise, so that a change here is not made blindly. */
#include <math.h>
#include <string.h>

#include "decomp.h"

static const cc_decomp_info rows[CC_DC_COUNT] = {
    [CC_DC_SOFTPLUS] = {"softplus", 0, {0}, {0}},
    [CC_DC_SOFTSIGN] = {"softsign", 0, {0}, {0}},
    [CC_DC_MISH] = {"mish", 0, {0}, {0}},
    [CC_DC_ELU] = {"elu", 1, {"alpha"}, {1.0}},
    /* ONNX's defaults are these constants rounded to float */
    [CC_DC_SELU] = {"selu", 2, {"alpha", "gamma"}, {1.67326319217681884765625, 1.05070102214813232421875}},
    [CC_DC_CELU] = {"celu", 1, {"alpha"}, {1.0}},
    [CC_DC_LEAKY_RELU] = {"leaky_relu", 1, {"alpha"}, {0.009999999776482582}},
    [CC_DC_THRESHOLDED_RELU] = {"thresholded_relu", 1, {"alpha"}, {1.0}},
    [CC_DC_HARD_SIGMOID] = {"hard_sigmoid", 2, {"alpha", "beta"}, {0.20000000298023224, 0.5}},
    [CC_DC_HARD_SWISH] = {"hard_swish", 0, {0}, {0}},
    [CC_DC_SWISH] = {"swish", 1, {"alpha"}, {1.0}},
    [CC_DC_GELU] = {"gelu", 0, {0}, {0}},
    [CC_DC_GELU_TANH] = {"gelu_tanh", 0, {0}, {0}},
    [CC_DC_EXPM1] = {"expm1", 0, {0}, {0}},
    [CC_DC_LOG1P] = {"log1p", 0, {0}, {0}},
};

const cc_decomp_info *cc_decomp_row(cc_decomp d) { return d < CC_DC_COUNT ? &rows[d] : NULL; }

int cc_decomp_find(const char *name)
{
    for (int d = 0; d < CC_DC_COUNT; d++)
        if (strcmp(rows[d].name, name) == 0)
            return d;
    return -1;
}

/* One row being built: every value has x's type (or that type as bool). */
typedef struct dc {
    cc *C;
    cc_blk *b;
    cc_vtype t, tb;
} dc;

static cc_irval k(dc *D, double v)
{
    /* a parameter beyond float's range is float's infinity, not UB */
    if (D->t.dtype == TFVM_F32 && (v > 3.4028234663852886e38 || v < -3.4028234663852886e38))
        v = v > 0 ? INFINITY : -INFINITY;
    return cc_const_scalar(D->C, D->b, (tfvm_dtype)D->t.dtype, v, 0);
}

static cc_irval u(dc *D, isa_op op, cc_irval a) { return cc_op_new(D->C, D->b, op, 0, 1, &a, D->t, NULL); }

static cc_irval bin(dc *D, isa_op op, cc_irval a, cc_irval c)
{
    cc_irval in[2] = {a, c};
    return cc_op_new(D->C, D->b, op, 0, 2, in, D->t, NULL);
}

static cc_irval cmp(dc *D, isa_op op, cc_irval a, cc_irval c)
{
    cc_irval in[2] = {a, c};
    return cc_op_new(D->C, D->b, op, 0, 2, in, D->tb, NULL);
}

static cc_irval sel(dc *D, cc_irval c, cc_irval a, cc_irval e)
{
    cc_irval in[3] = {c, a, e};
    return cc_op_new(D->C, D->b, ISA_SELECT, 0, 3, in, D->t, NULL);
}

/* max(x, 0) + log(1 + exp(-|x|)): exp never overflows, so softplus(100) is
 * 100 (log(exp(x) + 1) gives inf from x = 89 in f32). Exact at +-inf (inf,
 * 0) and NaN; below x = -17 (f32) the log term rounds to 0 where the true
 * value is exp(x) < 4e-8: absolute error, not relative. */
static cc_irval softplus(dc *D, cc_irval x)
{
    cc_irval e = u(D, ISA_EXP, u(D, ISA_NEG, u(D, ISA_ABS, x)));
    return bin(D, ISA_ADD, u(D, ISA_RELU, x), u(D, ISA_LOG, bin(D, ISA_ADD, e, k(D, 1))));
}

/* 1 / (1/x + sign(x)), which is x / (1 + |x|) but gives +-1 at +-inf (inf /
 * inf is NaN) and keeps -0's sign; three roundings, within 2 ulp. */
static cc_irval softsign(dc *D, cc_irval x)
{
    cc_irval r = bin(D, ISA_DIV, k(D, 1), x);
    return bin(D, ISA_DIV, k(D, 1), bin(D, ISA_ADD, r, u(D, ISA_SIGN, x)));
}

/* alpha * (exp(x / scale) - 1) where x < 0, else x (-0 and NaN pass
 * through): ELU and SELU with scale 1 (no DIV), CELU with scale alpha.
 * exp(x) - 1 loses relative precision near 0 (its absolute error stays
 * within an ulp of 1). */
static cc_irval elu(dc *D, cc_irval x, double alpha, double scale)
{
    cc_irval e = u(D, ISA_EXP, scale == 1 ? x : bin(D, ISA_DIV, x, k(D, scale)));
    cc_irval m = bin(D, ISA_SUB, e, k(D, 1));
    if (alpha != 1) /* x * 1 is x for every float: one pass fewer for ELU's default */
        m = bin(D, ISA_MUL, m, k(D, alpha));
    return sel(D, cmp(D, ISA_LESS, x, k(D, 0)), m, x);
}

/* max(min(alpha * x + beta, 1), 0): opt.c's HardSigmoid fusion matches this
 * sequence (MUL by alpha, ADD beta, MIN 1, MAX 0) as the importers built it
 * before this file. */
static cc_irval hard_sigmoid(dc *D, cc_irval x, double alpha, double beta)
{
    cc_irval al = k(D, alpha), be = k(D, beta), zero = k(D, 0), one = k(D, 1);
    cc_irval t = bin(D, ISA_MUL, x, al);
    t = bin(D, ISA_ADD, t, be);
    t = bin(D, ISA_MIN, t, one);
    return bin(D, ISA_MAX, t, zero);
}

/* GELU: MUL(MUL(x, ADD(ERF(DIV(x, sqrt 2)), 1)), 1/2), or with TANH of
 * sqrt(2/pi) (x + 0.044715 x^3): torch.onnx.export's spellings, which
 * opt.c's gelu and gelu_tanh fusions match. At -inf it is -inf * 0 = NaN
 * (the limit is 0), as ORT's Gelu gives. */
static cc_irval gelu(dc *D, cc_irval x, bool tanh_form)
{
    cc_irval half = k(D, 0.5), one = k(D, 1), t;
    if (tanh_form) {
        cc_irval c = k(D, sqrt(2 / M_PI)), kk = k(D, 0.044715);
        cc_irval x3 = bin(D, ISA_MUL, x, x);
        x3 = bin(D, ISA_MUL, x3, x);
        x3 = bin(D, ISA_MUL, x3, kk);
        t = bin(D, ISA_ADD, x, x3);
        t = bin(D, ISA_MUL, t, c);
        t = u(D, ISA_TANH, t);
    } else {
        t = bin(D, ISA_DIV, x, k(D, M_SQRT2));
        t = u(D, ISA_ERF, t);
    }
    t = bin(D, ISA_ADD, t, one);
    t = bin(D, ISA_MUL, x, t);
    return bin(D, ISA_MUL, t, half);
}

/* Kahan's expm1: with u = exp(x), (u - 1) * x / log(u), whose rounding
 * errors cancel (exp(x) - 1 alone loses every digit below 1e-8 in f32);
 * x itself where u rounds to 1 (-0 kept), -1 where u - 1 does, u where u
 * is inf. */
static cc_irval expm1_form(dc *D, cc_irval x)
{
    cc_irval e = u(D, ISA_EXP, x), one = k(D, 1);
    cc_irval m = bin(D, ISA_SUB, e, one);
    cc_irval r = bin(D, ISA_MUL, m, bin(D, ISA_DIV, x, u(D, ISA_LOG, e)));
    r = sel(D, cmp(D, ISA_EQUAL, e, k(D, INFINITY)), e, r);
    r = sel(D, cmp(D, ISA_EQUAL, m, k(D, -1)), m, r);
    return sel(D, cmp(D, ISA_EQUAL, e, one), x, r);
}

/* Goldberg's log1p: with w = 1 + x, log(w) * x / (w - 1), exact to a few
 * ulp (log(1 + x) alone loses every digit below 6e-8 in f32); x itself
 * where w rounds to 1 (-0 kept), inf at inf (inf / inf is NaN). */
static cc_irval log1p_form(dc *D, cc_irval x)
{
    cc_irval one = k(D, 1), w = bin(D, ISA_ADD, x, one);
    cc_irval r = bin(D, ISA_MUL, u(D, ISA_LOG, w), bin(D, ISA_DIV, x, bin(D, ISA_SUB, w, one)));
    r = sel(D, cmp(D, ISA_EQUAL, x, k(D, INFINITY)), x, r);
    return sel(D, cmp(D, ISA_EQUAL, w, one), x, r);
}

cc_irval cc_decompose(cc *C, cc_blk *b, cc_decomp d, cc_irval x, const double *p)
{
    dc D = {.C = C, .b = b, .t = x.n->types[x.k]};
    D.tb = D.t;
    D.tb.dtype = TFVM_BOOL;
    const double *a = p ? p : rows[d].dflt;
    switch (d) {
    case CC_DC_SOFTPLUS: return softplus(&D, x);
    case CC_DC_SOFTSIGN: return softsign(&D, x);
    case CC_DC_MISH: {
        /* where softplus rounds to 0 (x below -17 in f32) x * tanh(0) is
         * -0, but NaN at -inf: there the result is 0 (within 7e-7 of the
         * true x * exp(x) at -17) */
        cc_irval s = softplus(&D, x);
        cc_irval m = bin(&D, ISA_MUL, x, u(&D, ISA_TANH, s));
        return sel(&D, cmp(&D, ISA_EQUAL, s, k(&D, 0)), k(&D, 0), m);
    }
    case CC_DC_ELU: return elu(&D, x, a[0], 1);
    case CC_DC_SELU: return bin(&D, ISA_MUL, elu(&D, x, a[0], 1), k(&D, a[1]));
    /* max(x, 0) + min(0, ...) as one SELECT: -0 stays -0 */
    case CC_DC_CELU: return elu(&D, x, a[0], a[0]);
    case CC_DC_LEAKY_RELU: return sel(&D, cmp(&D, ISA_LESS, x, k(&D, 0)), bin(&D, ISA_MUL, x, k(&D, a[0])), x);
    case CC_DC_THRESHOLDED_RELU: return sel(&D, cmp(&D, ISA_GREATER, x, k(&D, a[0])), x, k(&D, 0));
    case CC_DC_HARD_SIGMOID: return hard_sigmoid(&D, x, a[0], a[1]);
    /* MUL(x, hard_sigmoid(x, 1/6, 1/2)): opt.c's HardSwish fusion; -inf
     * gives -inf * 0 = NaN (the limit is 0) */
    case CC_DC_HARD_SWISH: return bin(&D, ISA_MUL, x, hard_sigmoid(&D, x, 1.0 / 6, 0.5));
    /* alpha 1 is MUL(x, SIGMOID(x)), the SiLU that opt.c fuses; -inf gives
     * NaN (-inf * 0) */
    case CC_DC_SWISH: {
        cc_irval t = a[0] == 1 ? x : bin(&D, ISA_MUL, x, k(&D, a[0]));
        return bin(&D, ISA_MUL, x, u(&D, ISA_SIGMOID, t));
    }
    case CC_DC_GELU: return gelu(&D, x, false);
    case CC_DC_GELU_TANH: return gelu(&D, x, true);
    case CC_DC_EXPM1: return expm1_form(&D, x);
    case CC_DC_LOG1P: return log1p_form(&D, x);
    case CC_DC_COUNT: break;
    }
    return x; /* not reached: d is a row */
}

/* SELECT(|x| < 2^31, x, -2^31) (2^63 for i64) keeps every value the CPU
 * converts exactly (-2^31 itself converts to INT32_MIN either way) and
 * sends NaN (whose comparison is false), infinities and the rest to the
 * bound, which CAST converts to INT_MIN exactly; then the integer CAST
 * between integers wraps, as C's conversion of the i32 result does. */
cc_irval cc_cast_x86(cc *C, cc_blk *b, cc_irval x, tfvm_dtype to)
{
    cc_vtype t = x.n->types[x.k];
    cc_vtype to_t = t;
    to_t.dtype = (uint8_t)to;
    if (!isa_dtype_float(t.dtype) || !isa_dtype_int(to))
        return cc_op_new(C, b, ISA_CAST, to, 1, &x, to_t, NULL);
    tfvm_dtype via = to == TFVM_I64 ? TFVM_I64 : TFVM_I32;
    dc D = {.C = C, .b = b, .t = t};
    D.tb = D.t;
    D.tb.dtype = TFVM_BOOL;
    double bound = via == TFVM_I64 ? 9223372036854775808.0 : 2147483648.0;
    cc_irval ok = cmp(&D, ISA_LESS, u(&D, ISA_ABS, x), k(&D, bound));
    cc_irval y = sel(&D, ok, x, k(&D, -bound));
    cc_vtype via_t = t;
    via_t.dtype = (uint8_t)via;
    y = cc_op_new(C, b, ISA_CAST, via, 1, &y, via_t, NULL);
    return via == to ? y : cc_op_new(C, b, ISA_CAST, to, 1, &y, to_t, NULL);
}
