/* import/onnx_ops.c — each ONNX op as ISA instructions: one instruction
 * where the ISA has it, a short decomposition where it does not (Gemm,
 * the normalizations, the activations), with the little shape knowledge
 * the decompositions need (docs/onnx.md lists the ops and their limits). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compiler/decomp.h"
#include "isa/shape.h"
#include "import/onnx_int.h"

/* ---- Building blocks ------------------------------------------------------------- */

void ox_unknown_shape(ox_val *v, int rank)
{
    v->rank = (int8_t)(rank > TFVM_MAX_RANK ? -1 : rank);
    for (int k = 0; k < TFVM_MAX_RANK; k++)
        v->dims[k] = -1;
}

/* What the instruction's own rules (isa/ops.def, isa/shape.h) say of its
 * result: the dtype, the rank when r's is -1, and the dims the shape rule
 * knows (symbols too) where it agrees with r's rank. */
static void ask_rules(isa_op op, uint32_t attr, uint32_t n, const ox_val *const *in, ox_val *r)
{
    isa_shape x[8], o;
    cc_dimvec dv[8];
    uint8_t dt[8] = {0};
    for (uint32_t k = 0; k < n; k++) {
        const ox_val *v = in[k];
        x[k] = (isa_shape){.dtype = v->dtype, .rank = v->rank, .n_vals = -1};
        if (v->rank > 0)
            memcpy(x[k].dims, v->dims, sizeof(int64_t) * (size_t)v->rank);
        dt[k] = v->dtype;
        if (v->dtype != TFVM_BOOL && ox_dims_of(v, &dv[k])) {
            x[k].n_vals = dv[k].n;
            x[k].vals = dv[k].v;
            x[k].syms = dv[k].sym;
        }
    }
    r->dtype = isa_result_dtype(op, dt, attr);
    char msg[1];
    isa_shape_rule(op, attr, x, n, &o, msg, sizeof msg); /* a failure is the run's to report */
    if (o.rank < 0 || (r->rank >= 0 && o.rank != r->rank))
        return;
    r->rank = o.rank;
    memcpy(r->dims, o.dims, sizeof(int64_t) * (size_t)o.rank);
}

/* The instruction on its operands, its result typed by the rules; rank -1
 * leaves the rank to them too. */
static ox_val build(ox_node *N, isa_op op, uint32_t attr, uint32_t n, const ox_val *const *in, int rank)
{
    cc_irval iv[8];
    for (uint32_t k = 0; k < n; k++)
        iv[k] = in[k]->v;
    ox_val r = {0};
    ox_unknown_shape(&r, rank);
    ask_rules(op, attr, n, in, &r);
    r.v = cc_op_new(N->C, N->b, op, attr, n, iv, ox_vtype(&r), NULL);
    return r;
}

ox_val ox_op(ox_node *N, isa_op op, uint32_t attr, uint32_t n, const ox_val *const *in)
{
    return build(N, op, attr, n, in, -1);
}

ox_val ox_op_rank(ox_node *N, isa_op op, uint32_t attr, uint32_t n, const ox_val *const *in, int rank)
{
    return build(N, op, attr, n, in, rank);
}

ox_val ox_op1(ox_node *N, isa_op op, uint32_t attr, const ox_val *a)
{
    const ox_val *in[1] = {a};
    return build(N, op, attr, 1, in, -1);
}

ox_val ox_op2(ox_node *N, isa_op op, uint32_t attr, const ox_val *a, const ox_val *b)
{
    const ox_val *in[2] = {a, b};
    return build(N, op, attr, 2, in, -1);
}

ox_val ox_op3(ox_node *N, isa_op op, uint32_t attr, const ox_val *a, const ox_val *b, const ox_val *c)
{
    const ox_val *in[3] = {a, b, c};
    return build(N, op, attr, 3, in, -1);
}

ox_val ox_i64s(ox_node *N, int n, const int64_t *v)
{
    ox_val r = {0};
    r.dtype = TFVM_I64;
    ox_unknown_shape(&r, 1);
    r.dims[0] = n;
    int64_t *p = cc_array(N->C, (size_t)n + 1, sizeof *p);
    if (n)
        memcpy(p, v, (size_t)n * sizeof *v);
    r.cdata = p;
    r.v = cc_const_new(N->C, N->b, TFVM_I64, 1, r.dims, p, (size_t)n * sizeof *p, true);
    return r;
}

ox_val ox_empty_vec(ox_node *N, uint8_t dtype)
{
    ox_val r = {0};
    r.dtype = dtype;
    ox_unknown_shape(&r, 1);
    r.dims[0] = 0;
    static const int64_t zero = 0;
    r.cdata = &zero;
    r.v = cc_const_new(N->C, N->b, (tfvm_dtype)dtype, 1, r.dims, &zero, 0, true);
    return r;
}

/* double to int64 without C's undefined cases (NaN, out of range): saturating */
static int64_t f2i(double f)
{
    if (f != f)
        return 0;
    if (f >= 9223372036854775807.0)
        return INT64_MAX;
    if (f <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)f;
}

ox_val ox_scalar(ox_node *N, uint8_t dtype, double f, int64_t i)
{
    ox_val r = {0};
    r.dtype = dtype;
    ox_unknown_shape(&r, 0);
    if (dtype == TFVM_F32 && f == f && (f > 3.4028234663852886e38 || f < -3.4028234663852886e38))
        f = f > 0 ? INFINITY : -INFINITY; /* beyond float: its infinity, not UB */
    if (dtype == TFVM_F32 || dtype == TFVM_F64)
        i = f2i(f);
    else if (dtype == TFVM_BOOL)
        i = f != 0 || i != 0;
    else
        f = (double)i;
    r.v = cc_const_scalar(N->C, N->b, (tfvm_dtype)dtype, f, i);
    return r;
}

ox_val ox_fscalar(ox_node *N, uint8_t dtype, double f)
{
    return ox_scalar(N, dtype, f, f2i(f));
}

int64_t ox_count_of(const ox_val *v)
{
    if (v->rank < 0)
        return -1;
    int64_t n = 1;
    for (int k = 0; k < v->rank; k++) {
        if (v->dims[k] < 0)
            return -1;
        if (__builtin_mul_overflow(n, v->dims[k], &n) || n > ((int64_t)1 << 40))
            return -1;
    }
    return n;
}

int ox_const_ints(const ox_val *v, int64_t *out, int max)
{
    if (!v || !v->cdata || (v->dtype != TFVM_I64 && v->dtype != TFVM_I32))
        return -1;
    int64_t n = ox_count_of(v);
    if (n < 0 || n > max)
        return -1;
    for (int64_t k = 0; k < n; k++) {
        if (v->dtype == TFVM_I64) {
            memcpy(&out[k], (const char *)v->cdata + 8 * k, 8);
        } else {
            int32_t x;
            memcpy(&x, (const char *)v->cdata + 4 * k, 4);
            out[k] = x;
        }
    }
    return (int)n;
}

static bool dims_known(const ox_val *v)
{
    return ox_count_of(v) >= 0;
}

ox_val ox_shape_of(ox_node *N, const ox_val *x)
{
    if (dims_known(x))
        return ox_i64s(N, x->rank, x->dims);
    ox_val r = ox_op1(N, ISA_SHAPE, 0, x);
    r.dims[0] = x->rank;
    return r;
}

/* an i64 scalar from a scalar or one-element tensor of any integer dtype */
ox_val ox_as_i64_scalar(ox_node *N, const ox_val *v)
{
    int64_t c[1];
    if (ox_const_ints(v, c, 1) == 1)
        return ox_scalar(N, TFVM_I64, 0, c[0]);
    ox_val r = *v;
    if (r.dtype != TFVM_I64)
        r = ox_op1(N, ISA_CAST, TFVM_I64, &r);
    if (r.rank != 0) {
        ox_val e = ox_i64s(N, 0, NULL);
        r = ox_op2(N, ISA_RESHAPE, 0, &r, &e);
    }
    return r;
}

/* an i64 vector from an i32/i64 tensor */
ox_val ox_as_i64_vec(ox_node *N, const ox_val *v)
{
    if (v->dtype == TFVM_I64)
        return *v;
    int64_t c[64];
    int n = ox_const_ints(v, c, 64);
    if (n >= 0)
        return ox_i64s(N, n, c);
    return ox_op1(N, ISA_CAST, TFVM_I64, v);
}

ox_val *ox_need(ox_node *N, uint32_t k)
{
    if (k >= N->n_in || !N->in[k])
        ox_fail(N, TFVM_ERR_FORMAT, "input %u is missing", k);
    return N->in[k];
}

ox_val *ox_opt_in(ox_node *N, uint32_t k)
{
    return k < N->n_in ? N->in[k] : NULL;
}

int ox_norm_axis(ox_node *N, int64_t axis, int rank, bool allow_end)
{
    if (rank < 0) {
        if (axis < -TFVM_MAX_RANK || axis >= TFVM_MAX_RANK)
            ox_fail(N, TFVM_ERR_FORMAT, "axis %lld out of range", (long long)axis);
        return (int)axis;
    }
    if (axis < -rank || axis > rank - (allow_end ? 0 : 1))
        ox_fail(N, TFVM_ERR_FORMAT, "axis %lld out of range for rank %d", (long long)axis, rank);
    return (int)(axis < 0 ? axis + rank : axis);
}

int ox_need_rank(ox_node *N, const ox_val *x)
{
    if (x->rank < 0)
        ox_unsupported(N, "an input of unknown rank (give the graph inputs shapes)");
    return x->rank;
}

/* result of NumPy broadcasting, as far as known */
static void bcast_shape(ox_val *r, const ox_val *a, const ox_val *b)
{
    if (a->rank < 0 || b->rank < 0) {
        ox_unknown_shape(r, -1);
        return;
    }
    ox_unknown_shape(r, a->rank > b->rank ? a->rank : b->rank);
    cc_shape_bcast(a->rank, a->dims, b->rank, b->dims, r->dims);
}

ox_val ox_ew2(ox_node *N, isa_op op, const ox_val *a, const ox_val *b) { return ox_op2(N, op, 0, a, b); }

ox_val ox_ew1(ox_node *N, isa_op op, const ox_val *a)
{
    ox_val r = ox_op1(N, op, 0, a);
    memcpy(r.dims, a->dims, sizeof r.dims);
    r.v.n->types[0] = ox_vtype(&r);
    return r;
}

/* a value whose dtype differs from want: CAST it */
ox_val ox_to_dtype(ox_node *N, const ox_val *v, uint8_t want)
{
    if (v->dtype == want)
        return *v;
    ox_val r = ox_op1(N, ISA_CAST, want, v);
    memcpy(r.dims, v->dims, sizeof r.dims);
    return r;
}

/* v, a vector over `axes` (known only at run time, or negative), spread
 * over the rank-r axes: out[d] = v[j] where axes[j] == d, else 0. ONEHOT
 * makes the [len(axes), r] selection matrix, MATMUL applies it. */
ox_val ox_spread_axes(ox_node *N, const ox_val *v, const ox_val *axes, int r, uint8_t dtype)
{
    ox_val rv = ox_scalar(N, TFVM_I64, 0, r);
    ox_val ax = ox_as_i64_vec(N, axes);
    ax = ox_ew2(N, ISA_FLOOR_MOD, &ax, &rv);
    unsigned char onoff[16] = {0};
    size_t es = tfvm_dtype_size((tfvm_dtype)dtype);
    if (dtype == TFVM_F32) {
        float one = 1;
        memcpy(onoff + es, &one, es);
    } else if (dtype == TFVM_F64) {
        double one = 1;
        memcpy(onoff + es, &one, es);
    } else {
        onoff[es] = 1; /* little-endian integer 1 */
    }
    int64_t two = 2;
    ox_val oo = {0};
    oo.dtype = dtype;
    ox_unknown_shape(&oo, 1);
    oo.dims[0] = 2;
    oo.v = cc_const_new(N->C, N->b, (tfvm_dtype)dtype, 1, &two, onoff, 2 * es, false);
    ox_val m = ox_op3(N, ISA_ONEHOT, (uint32_t)-1, &ax, &rv, &oo);
    ox_val vv = ox_to_dtype(N, v, dtype);
    return ox_op2(N, ISA_MATMUL, 0, &vv, &m);
}

/* ---- Elementwise ------------------------------------------------------------------ */

/* ONNX's binary ops take one type: a model that mixes them is malformed */
static void same_dtype(ox_node *N, const ox_val *a, const ox_val *b)
{
    if (a->dtype != b->dtype)
        ox_fail(N, TFVM_ERR_FORMAT, "operands of different types (%s and %s)", tfvm_dtype_name((tfvm_dtype)a->dtype),
                tfvm_dtype_name((tfvm_dtype)b->dtype));
}

#define BIN(NAME, OP)                                                                                             \
    static void op_##NAME(ox_node *N)                                                                             \
    {                                                                                                             \
        same_dtype(N, ox_need(N, 0), ox_need(N, 1));                                                              \
        N->out[0] = ox_ew2(N, OP, ox_need(N, 0), ox_need(N, 1));                            \
    }
BIN(Add, ISA_ADD)
BIN(Sub, ISA_SUB)
BIN(Mul, ISA_MUL)
BIN(Div, ISA_DIV)
BIN(And, ISA_AND)
BIN(Or, ISA_OR)
BIN(Xor, ISA_XOR)

#define CMP(NAME, OP)                                                                                             \
    static void op_##NAME(ox_node *N)                                                                             \
    {                                                                                                             \
        same_dtype(N, ox_need(N, 0), ox_need(N, 1));                                                              \
        N->out[0] = ox_ew2(N, OP, ox_need(N, 0), ox_need(N, 1));                                       \
    }
CMP(Equal, ISA_EQUAL)
CMP(Less, ISA_LESS)
CMP(LessOrEqual, ISA_LESS_EQUAL)
CMP(Greater, ISA_GREATER)
CMP(GreaterOrEqual, ISA_GREATER_EQUAL)

#define UN(NAME, OP)                                                                                              \
    static void op_##NAME(ox_node *N) { N->out[0] = ox_ew1(N, OP, ox_need(N, 0)); }
UN(Abs, ISA_ABS)
UN(Neg, ISA_NEG)
UN(Exp, ISA_EXP)
UN(Log, ISA_LOG)
UN(Sqrt, ISA_SQRT)
UN(Relu, ISA_RELU)
UN(Sigmoid, ISA_SIGMOID)
UN(Tanh, ISA_TANH)
UN(Floor, ISA_FLOOR)
UN(Ceil, ISA_CEIL)
UN(Round, ISA_ROUND)
UN(Sin, ISA_SIN)
UN(Cos, ISA_COS)
UN(Erf, ISA_ERF)
UN(Sign, ISA_SIGN)
UN(Not, ISA_NOT)

static void op_Pow(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val y = ox_to_dtype(N, ox_need(N, 1), x->dtype);
    N->out[0] = ox_ew2(N, ISA_POW, x, &y);
}

static void op_Mod(ox_node *N)
{
    ox_val *a = ox_need(N, 0);
    bool fmod = ox_attr_i(N, "fmod", 0) != 0;
    bool flt = a->dtype == TFVM_F32 || a->dtype == TFVM_F64;
    same_dtype(N, a, ox_need(N, 1));
    N->out[0] = ox_ew2(N, fmod || flt ? ISA_MOD : ISA_FLOOR_MOD, a, ox_need(N, 1));
}

static void variadic(ox_node *N, isa_op op)
{
    if (N->n_in == 0)
        ox_fail(N, TFVM_ERR_FORMAT, "no inputs");
    ox_val acc = *ox_need(N, 0);
    for (uint32_t k = 1; k < N->n_in; k++) {
        same_dtype(N, &acc, ox_need(N, k));
        acc = ox_ew2(N, op, &acc, ox_need(N, k));
    }
    N->out[0] = acc;
}

static void op_Sum(ox_node *N) { variadic(N, ISA_ADD); }
static void op_Max(ox_node *N) { variadic(N, ISA_MAX); }
static void op_Min(ox_node *N) { variadic(N, ISA_MIN); }

static void op_Mean(ox_node *N)
{
    variadic(N, ISA_ADD);
    ox_val n = ox_fscalar(N, N->out[0].dtype, (double)N->n_in);
    N->out[0] = ox_ew2(N, ISA_DIV, &N->out[0], &n);
}

static void op_Reciprocal(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val one = ox_fscalar(N, x->dtype, 1);
    N->out[0] = ox_ew2(N, ISA_DIV, &one, x);
}

/* ---- Composite activations: one row each of compiler/decomp.h --------------------------- */

ox_val ox_decompose(ox_node *N, cc_decomp d, const ox_val *x, const double *p)
{
    ox_val r = *x;
    r.cdata = NULL;
    r.dv = NULL;
    r.v = cc_decompose(N->C, N->b, d, x->v, p);
    return r;
}

/* Row d on input 0 */
static void decomposed(ox_node *N, cc_decomp d, const double *p) { N->out[0] = ox_decompose(N, d, ox_need(N, 0), p); }

/* A float attribute, or the row's default parameter k */
static double param(ox_node *N, cc_decomp d, uint32_t k)
{
    return ox_attr_f(N, cc_decomp_row(d)->param[k], (float)cc_decomp_row(d)->dflt[k]);
}

static void op_Softplus(ox_node *N) { decomposed(N, CC_DC_SOFTPLUS, NULL); }
static void op_Softsign(ox_node *N) { decomposed(N, CC_DC_SOFTSIGN, NULL); }
static void op_Mish(ox_node *N) { decomposed(N, CC_DC_MISH, NULL); }
static void op_HardSwish(ox_node *N) { decomposed(N, CC_DC_HARD_SWISH, NULL); }

static void op_HardSigmoid(ox_node *N)
{
    decomposed(N, CC_DC_HARD_SIGMOID, (double[]){param(N, CC_DC_HARD_SIGMOID, 0), param(N, CC_DC_HARD_SIGMOID, 1)});
}

static void op_LeakyRelu(ox_node *N) { decomposed(N, CC_DC_LEAKY_RELU, (double[]){param(N, CC_DC_LEAKY_RELU, 0)}); }
static void op_Elu(ox_node *N) { decomposed(N, CC_DC_ELU, (double[]){param(N, CC_DC_ELU, 0)}); }
static void op_Celu(ox_node *N) { decomposed(N, CC_DC_CELU, (double[]){param(N, CC_DC_CELU, 0)}); }

static void op_Selu(ox_node *N)
{
    decomposed(N, CC_DC_SELU, (double[]){param(N, CC_DC_SELU, 0), param(N, CC_DC_SELU, 1)});
}

static void op_ThresholdedRelu(ox_node *N)
{
    decomposed(N, CC_DC_THRESHOLDED_RELU, (double[]){param(N, CC_DC_THRESHOLDED_RELU, 0)});
}

static void op_Gelu(ox_node *N)
{
    char buf[16];
    const char *approx = ox_attr_s(N, "approximate", "none", buf, sizeof buf);
    decomposed(N, strcmp(approx, "tanh") == 0 ? CC_DC_GELU_TANH : CC_DC_GELU, NULL);
}

/* x < 0 ? x * slope : x, the slope broadcast against x */
static void op_PRelu(ox_node *N)
{
    ox_val *x = ox_need(N, 0), slope = *ox_need(N, 1);
    /* before opset 7 a vector slope of x's channel count lies along axis 1
       (what PyTorch's exporter relied on): [C] -> [C, 1, ..., 1] */
    if (N->X->opset < 7 && slope.rank == 1 && x->rank > 2 && slope.dims[0] != 1)
        slope = ox_per_channel(N, &slope, x->rank);
    ox_val m = ox_ew2(N, ISA_MUL, x, &slope);
    ox_val zero = ox_fscalar(N, x->dtype, 0);
    ox_val c = ox_ew2(N, ISA_LESS, x, &zero);
    ox_val r = ox_op3(N, ISA_SELECT, 0, &c, &m, x);
    bcast_shape(&r, x, &m);
    r.v.n->types[0] = ox_vtype(&r);
    N->out[0] = r;
}

static void op_Shrink(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    uint8_t d = x->dtype;
    double l = ox_attr_f(N, "lambd", 0.5f), bias = ox_attr_f(N, "bias", 0.0f);
    ox_val nl = ox_fscalar(N, d, -l), pl = ox_fscalar(N, d, l), b = ox_fscalar(N, d, bias), zero = ox_fscalar(N, d, 0);
    ox_val lo = ox_ew2(N, ISA_LESS, x, &nl), hi = ox_ew2(N, ISA_GREATER, x, &pl);
    ox_val xp = ox_ew2(N, ISA_ADD, x, &b), xm = ox_ew2(N, ISA_SUB, x, &b);
    ox_val inner = ox_op3(N, ISA_SELECT, 0, &hi, &xm, &zero);
    N->out[0] = ox_op3(N, ISA_SELECT, 0, &lo, &xp, &inner);
}

static void op_IsNaN(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    N->out[0] = ox_ew2(N, ISA_NOT_EQUAL, x, x);
}

static void op_Identity(ox_node *N) { N->out[0] = *ox_need(N, 0); }

static void op_Dropout(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val *tm = ox_opt_in(N, 2);
    if (tm) {
        int64_t c[1];
        bool t = false;
        if (tm->cdata && tm->dtype == TFVM_BOOL && ox_count_of(tm) == 1)
            t = *(const uint8_t *)tm->cdata != 0;
        else if (ox_const_ints(tm, c, 1) == 1)
            t = c[0] != 0;
        else if (!tm->cdata)
            t = true; /* decided at run time */
        if (t) {
            ox_dropout_training(N);
            return;
        }
    }
    N->out[0] = *x;
    if (N->n_out > 1 && N->n->output[1] && N->n->output[1][0]) {
        ox_val s = ox_shape_of(N, x), t = ox_scalar(N, TFVM_BOOL, 1, 1);
        N->out[1] = ox_op2(N, ISA_FILL, 0, &s, &t);
        memcpy(N->out[1].dims, x->dims, sizeof x->dims);
    }
}

/* Cast and CastLike: a NaN or out-of-range float to an integer gives what
 * ORT gives on x86 (compiler/decomp.h), not an error. */
static ox_val cast_as_ort(ox_node *N, const ox_val *x, uint8_t d)
{
    if (!isa_dtype_float(x->dtype) || !isa_dtype_int(d))
        return ox_to_dtype(N, x, d);
    ox_val r = *x;
    r.dtype = d;
    r.cdata = NULL;
    r.v = cc_cast_x86(N->C, N->b, x->v, (tfvm_dtype)d);
    return r;
}

/* Cast to compute dtype d, stored as `store` (0: d itself): through the
 * storage dtype, which rounds (f16, bf16) or wraps (the integers, after
 * x86's conversion to the wide one, as ORT's static_cast does) as the stored
 * value would. */
static void cast_to(ox_node *N, const ox_val *x, uint8_t d, uint8_t store)
{
    ox_val u;
    if (x->store == TFVM_U64 && !isa_dtype_int(d)) { /* to a float from the u64 itself, not i64's reading */
        u = ox_to_dtype(N, x, TFVM_U64);
        x = &u;
    }
    if (store && isa_dtype_half(store)) {
        ox_val s = ox_to_dtype(N, x, store);
        N->out[0] = ox_to_dtype(N, &s, d);
    } else {
        N->out[0] = cast_as_ort(N, x, d);
        if (store)
            N->out[0] = ox_narrow(N, &N->out[0], store);
    }
    N->out[0].store = store;
}

static void op_Cast(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int64_t to = ox_attr_i(N, "to", 0);
    uint8_t d;
    if (!ox_dtype((int32_t)to, &d))
        ox_unsupported(N, "casting to %s", ox_onnx_type_name((int32_t)to));
    cast_to(N, x, d, ox_store_dtype((int32_t)to));
}

static void op_CastLike(ox_node *N)
{
    const ox_val *like = ox_need(N, 1);
    cast_to(N, ox_need(N, 0), like->dtype, like->store);
}

static void op_Clip(ox_node *N)
{
    ox_val x = *ox_need(N, 0);
    ox_val lo, hi, *plo = NULL, *phi = NULL;
    if (N->X->opset < 11) {
        if (ox_attr(N, "min")) {
            lo = ox_fscalar(N, x.dtype, ox_attr_f(N, "min", 0));
            plo = &lo;
        }
        if (ox_attr(N, "max")) {
            hi = ox_fscalar(N, x.dtype, ox_attr_f(N, "max", 0));
            phi = &hi;
        }
    } else {
        plo = ox_opt_in(N, 1);
        phi = ox_opt_in(N, 2);
    }
    if (plo)
        x = ox_ew2(N, ISA_MAX, &x, plo);
    if (phi)
        x = ox_ew2(N, ISA_MIN, &x, phi);
    N->out[0] = x;
}

cc_node *ox_count_loop(ox_node *N, uint32_t nvar, const cc_irval *init, const cc_vtype *types,
                       const char *const *names, const char *label, const ox_val *bound, ox_val *lv, cc_blk **outer)
{
    cc_node *w = cc_while_new(N->C, N->b, nvar, init, types, names, label);
    for (uint32_t k = 0; k < nvar; k++)
        lv[k].v = cc_lvar(w, k);
    *outer = N->b;
    N->b = w->u.loop.head;
    ox_val c = ox_op2(N, ISA_LESS, 0, &lv[0], bound);
    cc_block_results(N->C, w->u.loop.head, 1, &c.v);
    N->b = w->u.loop.body;
    return w;
}

ox_val ox_where(ox_node *N, const ox_val *c, const ox_val *a, const ox_val *b)
{
    ox_val r = ox_op3(N, ISA_SELECT, 0, c, a, b);
    ox_val t;
    bcast_shape(&t, a, b);
    bcast_shape(&r, c, &t);
    r.v.n->types[0] = ox_vtype(&r);
    return r;
}

static void op_Where(ox_node *N) { N->out[0] = ox_where(N, ox_need(N, 0), ox_need(N, 1), ox_need(N, 2)); }

/* ---- Matrix products and convolutions --------------------------------------------- */

static void op_MatMul(ox_node *N)
{
    ox_val *a = ox_need(N, 0), *b = ox_need(N, 1);
    N->out[0] = ox_op2(N, ISA_MATMUL, 0, a, b);
}

static void op_Gemm(ox_node *N)
{
    ox_val *a = ox_need(N, 0), *b = ox_need(N, 1), *c = ox_opt_in(N, 2);
    uint32_t opts = (ox_attr_i(N, "transA", 0) ? ISA_OPT_TRANS_A : 0) | (ox_attr_i(N, "transB", 0) ? ISA_OPT_TRANS_B : 0);
    double alpha = ox_attr_f(N, "alpha", 1.0f), beta = ox_attr_f(N, "beta", 1.0f);
    uint8_t d = a->dtype;
    ox_val y = ox_op2(N, ISA_MATMUL, opts, a, b);
    if (alpha != 1) {
        ox_val s = ox_fscalar(N, d, alpha);
        y = ox_ew2(N, ISA_MUL, &y, &s);
    }
    if (c && beta != 0) {
        ox_val cv = *c;
        if (beta != 1) {
            ox_val s = ox_fscalar(N, d, beta);
            cv = ox_ew2(N, ISA_MUL, c, &s);
        }
        y = ox_ew2(N, ISA_ADD, &y, &cv);
    }
    y.rank = 2;
    N->out[0] = y;
}

/* Spatial parameters shared by Conv and the pools: kernel, strides, pads
 * (begin..., end...), dilations, for 1 or 2 spatial dims. */
typedef struct spatial {
    int nsp;
    int64_t k[3], s[3], pb[3], pe[3], d[3];
} spatial;

/* max_nsp: 3 (a 3-d pool is two 2-d ones, a 3-d Conv a sum of 2-d ones) */
static void spatial_params(ox_node *N, const ox_val *x, const int64_t *kernel, spatial *S, int max_nsp)
{
    int r = ox_need_rank(N, x);
    S->nsp = r - 2;
    if (S->nsp < 1 || S->nsp > max_nsp)
        ox_unsupported(N, "%d spatial dims (1 to %d are)", S->nsp, max_nsp);
    int64_t buf[8];
    for (int i = 0; i < S->nsp; i++) {
        S->k[i] = kernel[i];
        S->s[i] = S->d[i] = 1;
        S->pb[i] = S->pe[i] = 0;
    }
    int n = ox_attr_ints(N, "strides", buf, 8);
    for (int i = 0; i < n && i < S->nsp; i++)
        S->s[i] = buf[i];
    n = ox_attr_ints(N, "dilations", buf, 8);
    for (int i = 0; i < n && i < S->nsp; i++)
        S->d[i] = buf[i];
    n = ox_attr_ints(N, "pads", buf, 8);
    if (n == 2 * S->nsp)
        for (int i = 0; i < S->nsp; i++) {
            S->pb[i] = buf[i];
            S->pe[i] = buf[S->nsp + i];
        }
    for (int i = 0; i < S->nsp; i++)
        if (S->k[i] < 1 || S->k[i] > (1 << 20) || S->s[i] < 1 || S->s[i] > (1 << 20) || S->d[i] < 1 ||
            S->d[i] > (1 << 20) || S->pb[i] < -(1 << 30) || S->pb[i] > (1 << 30) || S->pe[i] < -(1 << 30) ||
            S->pe[i] > (1 << 30))
            ox_fail(N, TFVM_ERR_FORMAT, "kernel, strides, dilations or pads out of range");
    char ap[32];
    const char *auto_pad = ox_attr_s(N, "auto_pad", "NOTSET", ap, sizeof ap);
    if (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0) {
        for (int i = 0; i < S->nsp; i++) {
            int64_t in = x->dims[2 + i];
            if (in < 0)
                ox_unsupported(N, "auto_pad %s on an input of unknown spatial size", auto_pad);
            int64_t out = (in + S->s[i] - 1) / S->s[i];
            int64_t total = (out - 1) * S->s[i] + (S->k[i] - 1) * S->d[i] + 1 - in;
            if (total < 0)
                total = 0;
            bool upper = auto_pad[5] == 'U';
            S->pb[i] = upper ? total / 2 : total - total / 2;
            S->pe[i] = total - S->pb[i];
        }
    } else if (strcmp(auto_pad, "VALID") == 0) {
        for (int i = 0; i < S->nsp; i++)
            S->pb[i] = S->pe[i] = 0;
    } else if (strcmp(auto_pad, "NOTSET") != 0) {
        ox_unsupported(N, "auto_pad '%s'", auto_pad);
    }
}

/* x of 1 spatial dim as 2: [N, C, L] -> [N, C, 1, L] */
static ox_val unsq2(ox_node *N, const ox_val *x)
{
    int64_t ax = 2;
    ox_val a = ox_i64s(N, 1, &ax);
    return ox_op2(N, ISA_UNSQUEEZE, 0, x, &a);
}

static ox_val sq2(ox_node *N, const ox_val *y)
{
    int64_t ax = 2;
    ox_val a = ox_i64s(N, 1, &ax);
    return ox_op2(N, ISA_SQUEEZE, 0, y, &a);
}

static void op_Conv(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *w = ox_need(N, 1), *bias = ox_opt_in(N, 2);
    int64_t kernel[8] = {0};
    int nk = ox_attr_ints(N, "kernel_shape", kernel, 8);
    if (nk < 0) {
        int wr = w->rank;
        if (wr < 3)
            ox_unsupported(N, "a weight of unknown shape without kernel_shape");
        for (int i = 2; i < wr; i++)
            kernel[i - 2] = w->dims[i];
    }
    ox_val xr = *x;
    if (xr.rank < 0 && w->rank > 0)
        xr.rank = w->rank;
    spatial S;
    spatial_params(N, &xr, kernel, &S, 3);
    int64_t group = ox_attr_i(N, "group", 1);
    if (S.nsp == 3) {
        N->out[0] = ox_conv3d(N, x, w, bias, S.s, S.pb, S.pe, S.d, group);
        return;
    }
    ox_val xx = *x, ww = *w;
    int64_t p[9];
    if (S.nsp == 1) {
        xx = unsq2(N, x);
        ww = unsq2(N, w);
        int64_t q[9] = {1, S.s[0], 0, S.pb[0], 0, S.pe[0], 1, S.d[0], group};
        memcpy(p, q, sizeof p);
    } else {
        int64_t q[9] = {S.s[0], S.s[1], S.pb[0], S.pb[1], S.pe[0], S.pe[1], S.d[0], S.d[1], group};
        memcpy(p, q, sizeof p);
    }
    ox_val pv = ox_i64s(N, 9, p);
    ox_val y = ox_op3(N, ISA_CONV2D, 0, &xx, &ww, &pv);
    if (bias) { /* on the 2-D result (a 1-D one's too), where the optimizer fuses it and the activation after */
        int64_t shp[3] = {-1, 1, 1};
        ox_val s = ox_i64s(N, 3, shp);
        ox_val bb = ox_op2(N, ISA_RESHAPE, 0, bias, &s);
        y = ox_op2(N, ISA_ADD, 0, &y, &bb);
    }
    if (S.nsp == 1)
        y = sq2(N, &y);
    N->out[0] = y;
}

/* (q - zero point) as i32 */
static ox_val centered_i32(ox_node *N, const ox_val *q, const ox_val *zp, const ox_val *like)
{
    ox_val a = ox_to_dtype(N, q, TFVM_I32);
    if (!zp)
        return a;
    ox_val z = ox_to_dtype(N, zp, TFVM_I32);
    if (z.rank == 1 && like && like->rank > 1) {
        /* per output channel of a weight [M, C, k...]: [M] as [M, 1, 1, ...] */
        int64_t s[TFVM_MAX_RANK] = {-1, 1, 1, 1, 1, 1, 1, 1};
        ox_val sv = ox_i64s(N, like->rank, s);
        z = ox_op2(N, ISA_RESHAPE, 0, &z, &sv);
    }
    return ox_ew2(N, ISA_SUB, &a, &z);
}

/* Conv's lowering on other operands: the node's inputs swapped for a while */
static ox_val conv_with(ox_node *N, ox_val *x, ox_val *w, ox_val *b)
{
    ox_val **saved = N->in, *in[3] = {x, w, b};
    uint32_t n_saved = N->n_in;
    ox_val out0 = N->out[0];
    N->in = in;
    N->n_in = 3;
    op_Conv(N);
    ox_val y = N->out[0];
    N->in = saved;
    N->n_in = n_saved;
    N->out[0] = out0;
    return y;
}

static void op_ConvInteger(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *w = ox_need(N, 1);
    ox_val xc = centered_i32(N, x, ox_opt_in(N, 2), NULL), wc = centered_i32(N, w, ox_opt_in(N, 3), w);
    xc.rank = x->rank;
    memcpy(xc.dims, x->dims, sizeof xc.dims);
    wc.rank = w->rank;
    memcpy(wc.dims, w->dims, sizeof wc.dims);
    N->out[0] = conv_with(N, &xc, &wc, NULL);
}

static void op_QLinearConv(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *xs = ox_need(N, 1), *w = ox_need(N, 3), *ws = ox_need(N, 4), *ys = ox_need(N, 6);
    ox_val *xz = ox_opt_in(N, 2), *wz = ox_opt_in(N, 5), *yz = ox_opt_in(N, 7), *b = ox_opt_in(N, 8);
    ox_val xc = centered_i32(N, x, xz, NULL), wc = centered_i32(N, w, wz, w);
    xc.rank = x->rank;
    memcpy(xc.dims, x->dims, sizeof xc.dims);
    wc.rank = w->rank;
    memcpy(wc.dims, w->dims, sizeof wc.dims);
    ox_val bi = b ? ox_to_dtype(N, b, TFVM_I32) : (ox_val){0};
    ox_val acc = conv_with(N, &xc, &wc, b ? &bi : NULL);
    uint8_t f = xs->dtype, out = yz ? yz->dtype : x->dtype;
    ox_val af = ox_to_dtype(N, &acc, f);
    ox_val wsv = *ws;
    if (ws->rank == 1 && x->rank > 2)
        wsv = ox_per_channel(N, ws, x->rank);
    ox_val sc = ox_ew2(N, ISA_MUL, xs, &wsv);
    sc = ox_ew2(N, ISA_DIV, &sc, ys);
    af = ox_ew2(N, ISA_MUL, &af, &sc);
    ox_val q = ox_ew1(N, ISA_ROUND, &af);
    if (yz) {
        ox_val z = ox_to_dtype(N, yz, f);
        q = ox_ew2(N, ISA_ADD, &q, &z);
    }
    ox_val lo = ox_fscalar(N, f, out == TFVM_U8 ? 0 : -128), hi = ox_fscalar(N, f, out == TFVM_U8 ? 255 : 127);
    q = ox_ew2(N, ISA_MAX, &q, &lo);
    q = ox_ew2(N, ISA_MIN, &q, &hi);
    N->out[0] = ox_to_dtype(N, &q, out);
}

/* lp: LpPool's p (0 for the plain pools): the average of |x|^p with the
 * padding counted, times the window size, to the power 1/p */
static void pool_p(ox_node *N, isa_op op, double lp)
{
    ox_val *x = ox_need(N, 0), xp;
    if (lp > 0) {
        ox_val a = ox_ew1(N, ISA_ABS, x), pe = ox_fscalar(N, x->dtype, lp);
        xp = ox_ew2(N, ISA_POW, &a, &pe);
        x = &xp;
    }
    if (N->n_out > 1 && N->n->output[1] && N->n->output[1][0]) {
        if (op != ISA_MAXPOOL || lp > 0)
            ox_unsupported(N, "the Indices output");
        ox_maxpool_indices(N);
        return;
    }
    int64_t kernel[8];
    int nk = ox_attr_ints(N, "kernel_shape", kernel, 8);
    if (nk < 1)
        ox_fail(N, TFVM_ERR_FORMAT, "no kernel_shape");
    spatial S;
    spatial_params(N, x, kernel, &S, 3);
    if (nk != S.nsp)
        ox_fail(N, TFVM_ERR_FORMAT, "kernel_shape has %d entries for %d spatial dims", nk, S.nsp);
    int64_t ceil_mode = ox_attr_i(N, "ceil_mode", 0), cip = lp > 0 ? 1 : ox_attr_i(N, "count_include_pad", 0);
    /* the pools take i32 i64 f32 f64: 8-bit inputs go through i32 */
    bool narrow = x->dtype == TFVM_U8 || x->dtype == TFVM_I8;
    ox_val xw = narrow ? ox_to_dtype(N, x, TFVM_I32) : *x;
    x = &xw;
    ox_val xx = *x;
    int64_t p[12];
    if (S.nsp == 3) {
        /* separable: the window over (H, W) on [N, C*D, H, W], then over D
         * on [N, C, D, H'*W'] (a max, or an average of a box of valid
         * elements, factors over the dims) */
        ox_val xs = ox_op1(N, ISA_SHAPE, 0, x);
        int64_t a0 = 0, a1 = 1, a2 = 2, a3 = 3, a5 = 5, m1 = -1;
        ox_val v0 = ox_i64s(N, 1, &a0), v1 = ox_i64s(N, 1, &a1), v2 = ox_i64s(N, 1, &a2), v3 = ox_i64s(N, 1, &a3);
        ox_val v5 = ox_i64s(N, 1, &a5), vm = ox_i64s(N, 1, &m1);
        ox_val n0 = ox_op3(N, ISA_SLICE, 0, &xs, &v0, &v1);
        ox_val hw = ox_op3(N, ISA_SLICE, 0, &xs, &v3, &v5);
        ox_val s1 = ox_op2(N, ISA_CONCAT, 0, &n0, &vm);
        s1 = ox_op2(N, ISA_CONCAT, 0, &s1, &hw);
        ox_val t = ox_op2(N, ISA_RESHAPE, 0, x, &s1);
        int64_t q1[12] = {S.k[1], S.k[2], S.s[1], S.s[2], S.pb[1], S.pb[2], S.pe[1], S.pe[2], S.d[1], S.d[2],
                          ceil_mode, cip};
        ox_val pv1 = ox_i64s(N, 12, q1);
        t = ox_op2(N, op, 0, &t, &pv1);
        ox_val ts = ox_op1(N, ISA_SHAPE, 0, &t);
        ox_val hw2 = ox_op3(N, ISA_SLICE, 0, &ts, &v2, &v5);
        ox_val ncd = ox_op3(N, ISA_SLICE, 0, &xs, &v0, &v3);
        ox_val s2 = ox_op2(N, ISA_CONCAT, 0, &ncd, &vm);
        t = ox_op2(N, ISA_RESHAPE, 0, &t, &s2);
        int64_t q2[12] = {S.k[0], 1, S.s[0], 1, S.pb[0], 0, S.pe[0], 0, S.d[0], 1, ceil_mode, cip};
        ox_val pv2 = ox_i64s(N, 12, q2);
        t = ox_op2(N, op, 0, &t, &pv2);
        ox_val ts2 = ox_op1(N, ISA_SHAPE, 0, &t);
        ox_val ncd2 = ox_op3(N, ISA_SLICE, 0, &ts2, &v0, &v3);
        ox_val s3 = ox_op2(N, ISA_CONCAT, 0, &ncd2, &hw2);
        ox_val y = ox_op2(N, ISA_RESHAPE, 0, &t, &s3);
        if (lp > 0) {
            ox_val wv = ox_fscalar(N, x->dtype, (double)(S.k[0] * S.k[1] * S.k[2])), inv = ox_fscalar(N, x->dtype, 1 / lp);
            y = ox_ew2(N, ISA_MUL, &y, &wv);
            y = ox_ew2(N, ISA_POW, &y, &inv);
        }
        N->out[0] = narrow ? ox_to_dtype(N, &y, ox_need(N, 0)->dtype) : y;
        return;
    }
    if (S.nsp == 1) {
        xx = unsq2(N, x);
        int64_t q[12] = {1, S.k[0], 1, S.s[0], 0, S.pb[0], 0, S.pe[0], 1, S.d[0], ceil_mode, cip};
        memcpy(p, q, sizeof p);
    } else {
        int64_t q[12] = {S.k[0], S.k[1], S.s[0], S.s[1], S.pb[0], S.pb[1], S.pe[0], S.pe[1], S.d[0], S.d[1],
                         ceil_mode, cip};
        memcpy(p, q, sizeof p);
    }
    ox_val pv = ox_i64s(N, 12, p);
    ox_val y = ox_op2(N, op, 0, &xx, &pv);
    if (S.nsp == 1)
        y = sq2(N, &y);
    if (lp > 0) {
        double win = 1;
        for (int i = 0; i < S.nsp; i++)
            win *= (double)S.k[i];
        ox_val w = ox_fscalar(N, x->dtype, win), inv = ox_fscalar(N, x->dtype, 1 / lp);
        y = ox_ew2(N, ISA_MUL, &y, &w);
        y = ox_ew2(N, ISA_POW, &y, &inv);
    }
    N->out[0] = narrow ? ox_to_dtype(N, &y, ox_need(N, 0)->dtype) : y;
}

static void op_MaxPool(ox_node *N) { pool_p(N, ISA_MAXPOOL, 0); }
static void op_AveragePool(ox_node *N) { pool_p(N, ISA_AVGPOOL, 0); }
static void op_LpPool(ox_node *N) { pool_p(N, ISA_AVGPOOL, (double)ox_attr_i(N, "p", 2)); }

ox_val ox_spatial_axes(ox_node *N, int r)
{
    int64_t ax[8] = {0};
    for (int i = 2; i < r; i++)
        ax[i - 2] = i;
    return ox_i64s(N, r - 2, ax);
}

static void global_pool(ox_node *N, isa_op op)
{
    ox_val *x = ox_need(N, 0);
    int r = ox_need_rank(N, x);
    ox_val ax = ox_spatial_axes(N, r);
    ox_val y = ox_op2(N, op, ISA_OPT_KEEPDIMS, x, &ax);
    y.dims[0] = x->dims[0];
    y.dims[1] = x->dims[1];
    for (int i = 2; i < r; i++)
        y.dims[i] = 1;
    y.v.n->types[0] = ox_vtype(&y);
    N->out[0] = y;
}

static void op_GlobalAveragePool(ox_node *N) { global_pool(N, ISA_REDUCE_MEAN); }
static void op_GlobalMaxPool(ox_node *N) { global_pool(N, ISA_REDUCE_MAX); }

/* v [C] as [C, 1, ...] against x of rank r */
ox_val ox_per_channel(ox_node *N, const ox_val *v, int r)
{
    int64_t s[8] = {-1, 1, 1, 1, 1, 1, 1, 1};
    ox_val sv = ox_i64s(N, r - 1, s);
    return ox_op2(N, ISA_RESHAPE, 0, v, &sv);
}

static void op_BatchNormalization(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *scale = ox_need(N, 1), *b = ox_need(N, 2), *mean = ox_need(N, 3), *var = ox_need(N, 4);
    if (ox_attr_i(N, "training_mode", 0)) {
        ox_bn_training(N);
        return;
    }
    for (uint32_t k = 1; k < N->n_out; k++)
        if (N->n->output[k] && N->n->output[k][0])
            ox_unsupported(N, "the running mean and variance outputs (training)");
    int r = ox_need_rank(N, x);
    uint8_t d = x->dtype;
    ox_val eps = ox_fscalar(N, d, ox_attr_f(N, "epsilon", 1e-5f));
    ox_val t = ox_ew2(N, ISA_ADD, var, &eps);
    t = ox_ew1(N, ISA_SQRT, &t);
    ox_val inv = ox_ew2(N, ISA_DIV, scale, &t);
    ox_val m = ox_per_channel(N, mean, r), iv = ox_per_channel(N, &inv, r), bb = ox_per_channel(N, b, r);
    ox_val y = ox_ew2(N, ISA_SUB, x, &m);
    y = ox_ew2(N, ISA_MUL, &y, &iv);
    y = ox_ew2(N, ISA_ADD, &y, &bb);
    y.rank = (int8_t)r;
    memcpy(y.dims, x->dims, sizeof y.dims);
    N->out[0] = y;
}

/* LAYER_NORM (x, scale, bias, eps) over x's dims from axis on */
static ox_val layer_norm_op(ox_node *N, const ox_val *x, const ox_val *scale, const ox_val *bias, int axis, double eps)
{
    ox_val e = ox_fscalar(N, x->dtype, eps);
    const ox_val *in[4] = {x, scale, bias, &e};
    return ox_op(N, ISA_LAYER_NORM, (uint32_t)axis, 4, in);
}

/* (x - mean) * (1 / sqrt(var + eps)) over axes (keepdims), and 1 / sqrt(var + eps);
 * over x's last axes without those two, one LAYER_NORM of scale 1 and bias -0
 * (the same bits: y * 1 + -0 is y; InstanceNormalization, GroupNormalization) */
ox_val ox_normalize(ox_node *N, const ox_val *x, const ox_val *axes, double epsilon, ox_val *mean_out,
                        ox_val *inv_out)
{
    uint8_t d = x->dtype;
    const int first = axes->cdata && axes->rank == 1 ? isa_last_axes(axes->cdata, (int)axes->dims[0], x->rank) : -1;
    if (!mean_out && !inv_out && first >= 0) {
        ox_val one = ox_fscalar(N, d, 1), nz = ox_fscalar(N, d, -0.0);
        return layer_norm_op(N, x, &one, &nz, first, epsilon);
    }
    ox_val mean = ox_op2(N, ISA_REDUCE_MEAN, ISA_OPT_KEEPDIMS, x, axes);
    ox_val c = ox_ew2(N, ISA_SUB, x, &mean);
    ox_val sq = ox_ew2(N, ISA_MUL, &c, &c);
    ox_val var = ox_op2(N, ISA_REDUCE_MEAN, ISA_OPT_KEEPDIMS, &sq, axes);
    ox_val eps = ox_fscalar(N, d, epsilon), one = ox_fscalar(N, d, 1);
    ox_val s = ox_ew2(N, ISA_ADD, &var, &eps);
    s = ox_ew1(N, ISA_SQRT, &s);
    ox_val inv = ox_ew2(N, ISA_DIV, &one, &s);
    if (mean_out)
        *mean_out = mean;
    if (inv_out)
        *inv_out = inv;
    ox_val y = ox_ew2(N, ISA_MUL, &c, &inv);
    y.rank = x->rank;
    memcpy(y.dims, x->dims, sizeof y.dims);
    return y;
}

static void op_InstanceNormalization(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *scale = ox_need(N, 1), *b = ox_need(N, 2);
    int r = ox_need_rank(N, x);
    ox_val ax = ox_spatial_axes(N, r);
    ox_val y = ox_normalize(N, x, &ax, ox_attr_f(N, "epsilon", 1e-5f), NULL, NULL);
    ox_val sc = ox_per_channel(N, scale, r), bb = ox_per_channel(N, b, r);
    y = ox_ew2(N, ISA_MUL, &y, &sc);
    N->out[0] = ox_ew2(N, ISA_ADD, &y, &bb);
}

/* Whether LayerNormalization's scale or bias p is one LAYER_NORM takes:
 * known dims that fit x's from axis on, where x's are known (the run checks
 * the rest) */
static bool layer_norm_param(const ox_val *p, const ox_val *x, int axis)
{
    return p->rank >= 0 && isa_norm_param_fits(p->rank, p->dims, x->rank, x->dims, axis, true);
}

static void op_LayerNormalization(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *scale = ox_need(N, 1), *b = ox_opt_in(N, 2);
    int r = ox_need_rank(N, x);
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", -1), r, false);
    if (N->n_out == 1 && layer_norm_param(scale, x, axis) && (!b || layer_norm_param(b, x, axis))) {
        /* one instruction, the bits of the lowering below; no bias is a
         * bias of -0 (y + -0 is y, -0 included) */
        ox_val nb = b ? *b : ox_fscalar(N, x->dtype, -0.0);
        N->out[0] = layer_norm_op(N, x, scale, &nb, axis, ox_attr_f(N, "epsilon", 1e-5f));
        return;
    }
    int64_t ax[8];
    for (int i = axis; i < r; i++)
        ax[i - axis] = i;
    ox_val axes = ox_i64s(N, r - axis, ax);
    ox_val mean, inv;
    ox_val y = ox_normalize(N, x, &axes, ox_attr_f(N, "epsilon", 1e-5f), &mean, &inv);
    y = ox_ew2(N, ISA_MUL, &y, scale);
    if (b)
        y = ox_ew2(N, ISA_ADD, &y, b);
    N->out[0] = y;
    if (N->n_out > 1)
        N->out[1] = mean;
    if (N->n_out > 2)
        N->out[2] = inv;
}

static void op_LRN(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    float p[4] = {(float)ox_attr_i(N, "size", 1), ox_attr_f(N, "alpha", 1e-4f), ox_attr_f(N, "beta", 0.75f),
                  ox_attr_f(N, "bias", 1.0f)};
    int64_t four = 4;
    ox_val pv = {0};
    pv.v = cc_const_new(N->C, N->b, TFVM_F32, 1, &four, p, sizeof p, false);
    pv.dtype = TFVM_F32;
    N->out[0] = ox_op2(N, ISA_LRN, 0, x, &pv);
}

/* ---- Softmax, arg and reductions ------------------------------------------------- */

static void softmax(ox_node *N, isa_op op)
{
    ox_val *x = ox_need(N, 0);
    if (N->X->opset >= 13) {
        int64_t axis = ox_attr_i(N, "axis", -1);
        N->out[0] = ox_op1(N, op, (uint32_t)ox_norm_axis(N, axis, x->rank, false), x);
        return;
    }
    /* before opset 13: x as 2-d [prod(dims[:axis]), prod(dims[axis:])] */
    int r = ox_need_rank(N, x);
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", 1), r, false);
    if (axis == r - 1) {
        N->out[0] = ox_op1(N, op, (uint32_t)axis, x);
        return;
    }
    ox_val s = ox_shape_of(N, x);
    ox_val f = ox_op1(N, ISA_FLATTEN, (uint32_t)axis, x);
    ox_val y = ox_op1(N, op, 1, &f);
    N->out[0] = ox_op2(N, ISA_RESHAPE, 0, &y, &s);
}

static void op_Softmax(ox_node *N) { softmax(N, ISA_SOFTMAX); }
static void op_LogSoftmax(ox_node *N) { softmax(N, ISA_LOG_SOFTMAX); }

static void arg(ox_node *N, isa_op op)
{
    ox_val *x = ox_need(N, 0);
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", 0), x->rank, false);
    bool keep = ox_attr_i(N, "keepdims", 1) != 0;
    ox_val y;
    if (ox_attr_i(N, "select_last_index", 0)) {
        /* the first best of x reversed along the axis, counted from the end */
        int64_t st = -1, en = INT64_MIN, ax = axis, step = -1;
        ox_val vs = ox_i64s(N, 1, &st), ve = ox_i64s(N, 1, &en), va = ox_i64s(N, 1, &ax), vp = ox_i64s(N, 1, &step);
        const ox_val *in[5] = {x, &vs, &ve, &va, &vp};
        ox_val rev = ox_op(N, ISA_STRIDED_SLICE, 0, 5, in);
        ox_val ri = ox_op1(N, op, (uint32_t)axis, &rev);
        ox_val sh = ox_op1(N, ISA_SHAPE, 0, x);
        ox_val ai = ox_scalar(N, TFVM_I64, 0, axis);
        ox_val dim = ox_op2(N, ISA_GATHER, 0, &sh, &ai);
        ox_val one = ox_scalar(N, TFVM_I64, 0, 1);
        ox_val last = ox_ew2(N, ISA_SUB, &dim, &one);
        y = ox_op2(N, ISA_SUB, 0, &last, &ri);
    } else {
        y = ox_op1(N, op, (uint32_t)axis, x);
    }
    if (keep) {
        int64_t a = axis;
        ox_val av = ox_i64s(N, 1, &a);
        y = ox_op2(N, ISA_UNSQUEEZE, 0, &y, &av);
    }
    N->out[0] = y;
}

static void op_ArgMax(ox_node *N) { arg(N, ISA_ARGMAX); }
static void op_ArgMin(ox_node *N) { arg(N, ISA_ARGMIN); }

typedef enum { R_PLAIN, R_L1, R_L2, R_SUMSQ, R_LOGSUM, R_LOGSUMEXP } reduce_kind;

static void reduce(ox_node *N, isa_op op, reduce_kind kind, int64_t axes_input_since)
{
    ox_val x = *ox_need(N, 0);
    bool keep = ox_attr_i(N, "keepdims", 1) != 0;
    bool noop = ox_attr_i(N, "noop_with_empty_axes", 0) != 0;
    ox_val axes;
    bool have_axes = false;
    int64_t ax[16] = {0};
    int nax = -1;
    if (N->X->opset >= axes_input_since) {
        ox_val *a = ox_opt_in(N, 1);
        if (a) {
            nax = ox_const_ints(a, ax, 16);
            if (nax < 0) {
                axes = ox_as_i64_vec(N, a);
                have_axes = true;
            }
        }
    } else {
        nax = ox_attr_ints(N, "axes", ax, 16);
    }
    if (!have_axes) {
        if (nax <= 0) {
            if (noop) {
                N->out[0] = x;
                return;
            }
            nax = 0;
        }
        axes = ox_i64s(N, nax, ax);
    }
    /* the max (min) of no elements is -inf (+inf), as ONNX defines it; the
     * kernels refuse it, so on an input known to be empty it is a sum (of
     * the right shape, zeros) plus -inf (+inf) */
    if ((op == ISA_REDUCE_MAX || op == ISA_REDUCE_MIN) && ox_count_of(&x) == 0 &&
        (x.dtype == TFVM_F32 || x.dtype == TFVM_F64)) {
        ox_val z = ox_op2(N, ISA_REDUCE_SUM, keep ? ISA_OPT_KEEPDIMS : 0, &x, &axes);
        ox_val v = ox_fscalar(N, x.dtype, op == ISA_REDUCE_MAX ? -INFINITY : INFINITY);
        N->out[0] = ox_ew2(N, ISA_ADD, &z, &v);
        return;
    }
    /* max and min of bools are any and all: computed on i32 */
    const ox_val x0 = x;
    bool bool_minmax = x.dtype == TFVM_BOOL && (op == ISA_REDUCE_MAX || op == ISA_REDUCE_MIN);
    if (bool_minmax)
        x = ox_to_dtype(N, &x, TFVM_I32);
    cc_node *noop_if = NULL;
    cc_blk *outer = N->b;
    if (have_axes && noop) {
        /* empty axes at run time leave x as it is: an If on len(axes) == 0 */
        ox_val sh = ox_op1(N, ISA_SHAPE, 0, &axes), z = ox_scalar(N, TFVM_I64, 0, 0);
        ox_val len = ox_op2(N, ISA_GATHER, 0, &sh, &z);
        ox_val c = ox_ew2(N, ISA_EQUAL, &len, &z);
        cc_vtype t = cc_tensor_t((tfvm_dtype)x0.dtype, -1);
        noop_if = cc_if_new(N->C, N->b, c.v, 1, &t, NULL);
        cc_block_results(N->C, noop_if->u.cond.then, 1, &x0.v);
        N->b = noop_if->u.cond.els;
    }
    if (kind == R_L1)
        x = ox_ew1(N, ISA_ABS, &x);
    else if (kind == R_L2 || kind == R_SUMSQ)
        x = ox_ew2(N, ISA_MUL, &x, &x);
    else if (kind == R_LOGSUMEXP)
        x = ox_ew1(N, ISA_EXP, &x);
    ox_val y = ox_op2(N, op, keep ? ISA_OPT_KEEPDIMS : 0, &x, &axes);
    if (kind == R_L2)
        y = ox_ew1(N, ISA_SQRT, &y);
    else if (kind == R_LOGSUM || kind == R_LOGSUMEXP)
        y = ox_ew1(N, ISA_LOG, &y);
    if (bool_minmax)
        y = ox_to_dtype(N, &y, TFVM_BOOL);
    if (noop_if) {
        cc_block_results(N->C, noop_if->u.cond.els, 1, &y.v);
        N->b = outer;
        y.v = cc_out(noop_if, 0);
        ox_unknown_shape(&y, -1);
    }
    N->out[0] = y;
}

static void op_ReduceSum(ox_node *N) { reduce(N, ISA_REDUCE_SUM, R_PLAIN, 13); }
static void op_ReduceMean(ox_node *N) { reduce(N, ISA_REDUCE_MEAN, R_PLAIN, 18); }
static void op_ReduceMax(ox_node *N) { reduce(N, ISA_REDUCE_MAX, R_PLAIN, 18); }
static void op_ReduceMin(ox_node *N) { reduce(N, ISA_REDUCE_MIN, R_PLAIN, 18); }
static void op_ReduceProd(ox_node *N) { reduce(N, ISA_REDUCE_PROD, R_PLAIN, 18); }
static void op_ReduceL1(ox_node *N) { reduce(N, ISA_REDUCE_SUM, R_L1, 18); }
static void op_ReduceL2(ox_node *N) { reduce(N, ISA_REDUCE_SUM, R_L2, 18); }
static void op_ReduceSumSquare(ox_node *N) { reduce(N, ISA_REDUCE_SUM, R_SUMSQ, 18); }
static void op_ReduceLogSum(ox_node *N) { reduce(N, ISA_REDUCE_SUM, R_LOGSUM, 18); }
static void op_ReduceLogSumExp(ox_node *N) { reduce(N, ISA_REDUCE_SUM, R_LOGSUMEXP, 18); }

/* ---- Shapes ------------------------------------------------------------------------- */

static void op_Shape(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val s = ox_shape_of(N, x);
    const Onnx__AttributeProto *as = ox_attr(N, "start"), *ae = ox_attr(N, "end");
    if (as || ae) {
        int64_t st = ox_attr_i(N, "start", 0), en = ox_attr_i(N, "end", INT64_MAX);
        ox_val vs = ox_i64s(N, 1, &st), ve = ox_i64s(N, 1, &en);
        s = ox_op3(N, ISA_SLICE, 0, &s, &vs, &ve);
    }
    N->out[0] = s;
}

static void op_Size(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int64_t n = ox_count_of(x);
    if (n >= 0) {
        N->out[0] = ox_scalar(N, TFVM_I64, 0, n);
        return;
    }
    ox_val s = ox_op1(N, ISA_SHAPE, 0, x), e = ox_i64s(N, 0, NULL);
    N->out[0] = ox_op2(N, ISA_REDUCE_PROD, 0, &s, &e);
}

/* Reshape's result dims from what is known of its shape (compiler/shape.h) */
static void reshape_dims(ox_node *N, const ox_val *x, bool allowzero)
{
    cc_dimvec t;
    ox_val *y = &N->out[0];
    if (N->X->opset < 5) {
        t.rank = 1;
        t.n = ox_attr_ints(N, "shape", t.v, CC_DV_MAX);
        memset(t.sym, 0, sizeof t.sym);
    } else if (!ox_dims_of(ox_need(N, 1), &t)) {
        return;
    }
    if (t.rank != 1 || t.n > TFVM_MAX_RANK)
        return;
    ox_unknown_shape(y, t.n);
    cc_shape_reshape(x->rank, x->dims, &t, allowzero, y->dims);
    y->v.n->types[y->v.k] = ox_vtype(y);
}

static void op_Reshape(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int64_t sh[16];
    int n;
    ox_val sv;
    if (N->X->opset < 5) {
        n = ox_attr_ints(N, "shape", sh, 16);
        if (n < 0)
            ox_fail(N, TFVM_ERR_FORMAT, "no shape");
    } else {
        n = ox_const_ints(ox_need(N, 1), sh, 16);
    }
    bool allowzero = ox_attr_i(N, "allowzero", 0) != 0;
    if (n >= 0) {
        bool runtime = false;
        for (int k = 0; k < n && !allowzero; k++)
            if (sh[k] == 0) {
                if (x->rank >= 0 && k < x->rank && x->dims[k] >= 0)
                    sh[k] = x->dims[k];
                else
                    runtime = true;
            }
        if (!runtime) {
            sv = ox_i64s(N, n, sh);
        } else {
            /* 0 = copy the dim: select(shape == 0, shape(x)[:n], shape) */
            ox_val s = ox_i64s(N, n, sh), zero = ox_scalar(N, TFVM_I64, 0, 0);
            ox_val xs = ox_op1(N, ISA_SHAPE, 0, x);
            int64_t b0 = 0, e0 = n;
            ox_val vb = ox_i64s(N, 1, &b0), ve = ox_i64s(N, 1, &e0);
            xs = ox_op3(N, ISA_SLICE, 0, &xs, &vb, &ve);
            ox_val c = ox_ew2(N, ISA_EQUAL, &s, &zero);
            sv = ox_op3(N, ISA_SELECT, 0, &c, &xs, &s);
        }
        N->out[0] = ox_op2(N, ISA_RESHAPE, 0, x, &sv);
        reshape_dims(N, x, allowzero);
        return;
    }
    ox_val *s = ox_need(N, 1);
    sv = ox_as_i64_vec(N, s);
    if (!allowzero) {
        /* a shape computed at run time may hold 0s too: select(shape == 0,
         * (shape(x) + zeros)[:len(shape)], shape) */
        ox_val zero = ox_scalar(N, TFVM_I64, 0, 0);
        ox_val xs = ox_op1(N, ISA_SHAPE, 0, x);
        int64_t pads[2] = {0, TFVM_MAX_RANK}, b0 = 0;
        ox_val pv = ox_i64s(N, 2, pads), vb = ox_i64s(N, 1, &b0);
        xs = ox_op2(N, ISA_PAD, 0, &xs, &pv);
        ox_val ve = ox_op1(N, ISA_SHAPE, 0, &sv);
        xs = ox_op3(N, ISA_SLICE, 0, &xs, &vb, &ve);
        ox_val c = ox_ew2(N, ISA_EQUAL, &sv, &zero);
        sv = ox_op3(N, ISA_SELECT, 0, &c, &xs, &sv);
    }
    /* the target's length is s's, which the SELECT's shape no longer shows */
    int rr = s->rank == 1 && s->dims[0] >= 0 ? (int)s->dims[0] : -1;
    N->out[0] = ox_op_rank(N, ISA_RESHAPE, 0, 2, (const ox_val *const[]){x, &sv}, rr);
    reshape_dims(N, x, allowzero);
}

static void op_Flatten(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int r = ox_need_rank(N, x);
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", 1), r, true);
    ox_val y;
    if (axis == r) {
        int64_t s[2] = {-1, 1};
        ox_val sv = ox_i64s(N, 2, s);
        y = ox_op2(N, ISA_RESHAPE, 0, x, &sv);
    } else {
        y = ox_op1(N, ISA_FLATTEN, (uint32_t)axis, x);
    }
    int64_t a = 1, b = 1;
    for (int k = 0; k < r; k++) {
        int64_t *p = k < axis ? &a : &b;
        if (*p < 0 || x->dims[k] < 0 || __builtin_mul_overflow(*p, x->dims[k], p))
            *p = -1;
    }
    y.dims[0] = a;
    y.dims[1] = b;
    y.v.n->types[0] = ox_vtype(&y);
    N->out[0] = y;
}

static void op_Transpose(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int64_t perm[8];
    int n = ox_attr_ints(N, "perm", perm, 8);
    if (n < 0) {
        int r = ox_need_rank(N, x);
        for (int k = 0; k < r; k++)
            perm[k] = r - 1 - k;
        n = r;
    }
    ox_val pv = ox_i64s(N, n, perm);
    ox_val y = ox_op2(N, ISA_TRANSPOSE, 0, x, &pv);
    if (x->rank == n)
        for (int k = 0; k < n; k++)
            y.dims[k] = perm[k] >= 0 && perm[k] < n ? x->dims[perm[k]] : -1;
    y.v.n->types[0] = ox_vtype(&y);
    N->out[0] = y;
}

/* the axes of Squeeze/Unsqueeze: an attribute before opset 13, an input after */
static bool axes_arg(ox_node *N, ox_val *out, int64_t *ax, int *nax)
{
    if (N->X->opset < 13) {
        *nax = ox_attr_ints(N, "axes", ax, 16);
        if (*nax < 0)
            return false;
        *out = ox_i64s(N, *nax, ax);
        return true;
    }
    ox_val *a = ox_opt_in(N, 1);
    if (!a)
        return false;
    *nax = ox_const_ints(a, ax, 16);
    *out = *nax >= 0 ? ox_i64s(N, *nax, ax) : ox_as_i64_vec(N, a);
    return true;
}

static void op_Squeeze(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val axes;
    int64_t ax[16];
    int nax = -1;
    bool given = axes_arg(N, &axes, ax, &nax);
    if (!given)
        axes = ox_i64s(N, 0, NULL);
    else if (nax < 0 && axes.rank == 1 && axes.dims[0] >= 0) /* axes computed at run time, their number known */
        nax = (int)axes.dims[0];
    int rr = -1;
    if (x->rank >= 0 && nax > 0)
        rr = x->rank - nax;
    else if (dims_known(x) && !given) { /* no axes: every dim of size 1 goes */
        rr = 0;
        for (int k = 0; k < x->rank; k++)
            rr += x->dims[k] != 1;
    }
    /* axes unknown to the rule (computed at run time, or none given) */
    N->out[0] = ox_op_rank(N, ISA_SQUEEZE, 0, 2, (const ox_val *const[]){x, &axes}, rr);
}

static void op_Unsqueeze(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val axes;
    int64_t ax[16];
    int nax = -1;
    if (!axes_arg(N, &axes, ax, &nax))
        ox_fail(N, TFVM_ERR_FORMAT, "no axes");
    int rr = x->rank >= 0 && nax >= 0 ? x->rank + nax : -1;
    ox_val y = ox_op2(N, ISA_UNSQUEEZE, 0, x, &axes);
    if (rr >= 0 && rr <= TFVM_MAX_RANK) {
        bool ins[8] = {0};
        bool ok = true;
        for (int k = 0; k < nax; k++) {
            int64_t a = ax[k] < 0 ? ax[k] + rr : ax[k];
            if (a < 0 || a >= rr)
                ok = false;
            else
                ins[a] = true;
        }
        for (int k = 0, j = 0; k < rr && ok; k++)
            y.dims[k] = ins[k] ? 1 : x->dims[j++];
        y.v.n->types[0] = ox_vtype(&y);
    }
    N->out[0] = y;
}

static void op_Concat(ox_node *N)
{
    int64_t axis = ox_attr_i(N, "axis", 0);
    ox_val acc = *ox_need(N, 0);
    if (N->n_in == 1) {
        N->out[0] = acc;
        return;
    }
    for (uint32_t k = 1; k < N->n_in; k++) {
        ox_val *b = ox_need(N, k);
        int r = acc.rank >= 0 ? acc.rank : b->rank;
        int ax = ox_norm_axis(N, axis, r, false);
        ox_val y = ox_op2(N, ISA_CONCAT, (uint32_t)ax, &acc, b);
        if (r > 0 && acc.rank == r && b->rank == r && ax >= 0) {
            /* the dims along the axis add up (what Reshape's shape length needs) */
            memcpy(y.dims, acc.dims, sizeof y.dims);
            y.dims[ax] = acc.dims[ax] >= 0 && b->dims[ax] >= 0 ? acc.dims[ax] + b->dims[ax] : -1;
            y.v.n->types[0] = ox_vtype(&y);
        }
        acc = y;
    }
    N->out[0] = acc;
}

static void op_Gather(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *idx = ox_need(N, 1);
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", 0), x->rank, false);
    N->out[0] = ox_op2(N, ISA_GATHER, (uint32_t)axis, x, idx);
}

static void op_GatherElements(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *idx = ox_need(N, 1);
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", 0), x->rank, false);
    ox_val y = ox_op2(N, ISA_GATHER_ELEMENTS, (uint32_t)axis, x, idx);
    memcpy(y.dims, idx->dims, sizeof y.dims);
    y.v.n->types[0] = ox_vtype(&y);
    N->out[0] = y;
}

static void op_Slice(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val st, en, ax, sp;
    if (N->X->opset < 10) {
        int64_t s[16], e[16], a[16];
        int ns = ox_attr_ints(N, "starts", s, 16), ne = ox_attr_ints(N, "ends", e, 16);
        int na = ox_attr_ints(N, "axes", a, 16);
        if (ns < 0 || ne != ns)
            ox_fail(N, TFVM_ERR_FORMAT, "starts and ends differ in length");
        st = ox_i64s(N, ns, s);
        en = ox_i64s(N, ne, e);
        ax = na >= 0 ? ox_i64s(N, na, a) : ox_empty_vec(N, TFVM_I64);
        sp = ox_empty_vec(N, TFVM_I64);
    } else {
        st = ox_as_i64_vec(N, ox_need(N, 1));
        en = ox_as_i64_vec(N, ox_need(N, 2));
        ax = ox_opt_in(N, 3) ? ox_as_i64_vec(N, ox_opt_in(N, 3)) : ox_empty_vec(N, TFVM_I64);
        sp = ox_opt_in(N, 4) ? ox_as_i64_vec(N, ox_opt_in(N, 4)) : ox_empty_vec(N, TFVM_I64);
    }
    const ox_val *in[5] = {x, &st, &en, &ax, &sp};
    N->out[0] = ox_op(N, ISA_STRIDED_SLICE, 0, 5, in);
}

static void op_Split(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", 0), x->rank, false);
    int64_t split[OX_MAX_IO];
    int ns = -1;
    if (N->X->opset < 13) {
        ns = ox_attr_ints(N, "split", split, OX_MAX_IO);
    } else if (ox_opt_in(N, 1)) {
        ns = ox_const_ints(ox_opt_in(N, 1), split, OX_MAX_IO);
        if (ns < 0) {
            /* part k is [sum(split[:k]), sum(split[:k+1])) */
            ox_val sp0 = ox_as_i64_vec(N, ox_opt_in(N, 1)), zax = ox_scalar(N, TFVM_I64, 0, 0);
            ox_val ex = ox_op2(N, ISA_CUMSUM, ISA_OPT_EXCLUSIVE, &sp0, &zax);
            ox_val in_ = ox_op2(N, ISA_CUMSUM, 0, &sp0, &zax);
            int64_t a0 = axis;
            ox_val av0 = ox_i64s(N, 1, &a0), st0 = ox_empty_vec(N, TFVM_I64);
            for (uint32_t k = 0; k < N->n_out; k++) {
                int64_t kk = k;
                ox_val ki = ox_i64s(N, 1, &kk);
                ox_val vb = ox_op2(N, ISA_GATHER, 0, &ex, &ki);
                ox_val ve = ox_op2(N, ISA_GATHER, 0, &in_, &ki);
                const ox_val *in[5] = {x, &vb, &ve, &av0, &st0};
                N->out[k] = ox_op(N, ISA_STRIDED_SLICE, 0, 5, in);
            }
            return;
        }
    }
    int n = (int)N->n_out;
    if (ns >= 0 && ns != n)
        ox_fail(N, TFVM_ERR_FORMAT, "split has %d sizes for %d outputs", ns, n);
    for (int k = 0; k < ns; k++)
        if (split[k] < 0 || split[k] > ((int64_t)1 << 40))
            ox_fail(N, TFVM_ERR_FORMAT, "split size %lld out of range", (long long)split[k]);
    int64_t a = axis;
    ox_val av = ox_i64s(N, 1, &a), sp = ox_empty_vec(N, TFVM_I64);
    if (ns >= 0) {
        int64_t off = 0;
        for (int k = 0; k < n; k++) {
            int64_t b = off, e = off + split[k];
            ox_val vb = ox_i64s(N, 1, &b), ve = ox_i64s(N, 1, &e);
            const ox_val *in[5] = {x, &vb, &ve, &av, &sp};
            N->out[k] = ox_op(N, ISA_STRIDED_SLICE, 0, 5, in);
            off = e;
        }
        return;
    }
    /* equal parts (the last smaller): chunk = ceil(dim / n); ends clamp */
    int64_t dim = x->rank > axis ? x->dims[axis] : -1;
    if (dim >= 0) {
        int64_t chunk = (dim + n - 1) / n;
        for (int k = 0; k < n; k++) {
            int64_t b = k * chunk, e = (k + 1) * chunk;
            ox_val vb = ox_i64s(N, 1, &b), ve = ox_i64s(N, 1, &e);
            const ox_val *in[5] = {x, &vb, &ve, &av, &sp};
            N->out[k] = ox_op(N, ISA_STRIDED_SLICE, 0, 5, in);
        }
        return;
    }
    ox_val sh = ox_op1(N, ISA_SHAPE, 0, x);
    ox_val ai = ox_i64s(N, 1, &a);
    ox_val d = ox_op2(N, ISA_GATHER, 0, &sh, &ai);
    ox_val nm1 = ox_scalar(N, TFVM_I64, 0, n - 1), nn = ox_scalar(N, TFVM_I64, 0, n);
    ox_val chunk = ox_ew2(N, ISA_ADD, &d, &nm1);
    chunk = ox_ew2(N, ISA_FLOOR_DIV, &chunk, &nn);
    for (int k = 0; k < n; k++) {
        ox_val kb = ox_scalar(N, TFVM_I64, 0, k), ke = ox_scalar(N, TFVM_I64, 0, k + 1);
        ox_val vb = ox_ew2(N, ISA_MUL, &chunk, &kb), ve = ox_ew2(N, ISA_MUL, &chunk, &ke);
        const ox_val *in[5] = {x, &vb, &ve, &av, &sp};
        N->out[k] = ox_op(N, ISA_STRIDED_SLICE, 0, 5, in);
    }
}

static void op_ConstantOfShape(ox_node *N)
{
    ox_val *s = ox_need(N, 0);
    const Onnx__AttributeProto *a = ox_attr(N, "value");
    ox_val v;
    if (a && a->t) {
        ox_val t;
        ox_tensor_const(N->X, N, N->b, a->t, &t);
        if (ox_count_of(&t) != 1)
            ox_fail(N, TFVM_ERR_FORMAT, "value must hold one element");
        v = t;
        if (t.rank != 0) {
            ox_val e = ox_i64s(N, 0, NULL);
            v = ox_op2(N, ISA_RESHAPE, 0, &t, &e);
        }
    } else {
        v = ox_fscalar(N, TFVM_F32, 0);
    }
    ox_val sv = ox_as_i64_vec(N, s);
    cc_dimvec t;
    ox_val y = ox_op2(N, ISA_FILL, 0, &sv, &v);
    if (ox_dims_of(s, &t) && t.rank == 1 && t.n == y.rank) {
        for (int k = 0; k < y.rank; k++)
            y.dims[k] = cc_dv_dim(&t, k);
        y.v.n->types[y.v.k] = ox_vtype(&y);
    }
    N->out[0] = y;
}

static void op_Expand(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *s = ox_need(N, 1);
    ox_val sv = ox_as_i64_vec(N, s);
    cc_dimvec t;
    int64_t dims[TFVM_MAX_RANK];
    int rr = -1;
    if (x->rank >= 0 && ox_dims_of(s, &t) && t.rank == 1)
        rr = cc_shape_expand(x->rank, x->dims, &t, dims);
    else if (s->rank == 1 && s->dims[0] >= 0 && x->rank >= 0)
        rr = (int)(s->dims[0] > x->rank ? s->dims[0] : x->rank);
    ox_val y = ox_op2(N, ISA_EXPAND, 0, x, &sv);
    if (rr >= 0 && x->rank >= 0 && ox_dims_of(s, &t) && t.rank == 1) {
        memcpy(y.dims, dims, (size_t)rr * sizeof *dims);
        y.v.n->types[y.v.k] = ox_vtype(&y);
    }
    N->out[0] = y;
}

static void op_Tile(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val r = ox_as_i64_vec(N, ox_need(N, 1));
    N->out[0] = ox_op2(N, ISA_TILE, 0, x, &r);
}

static void op_Range(ox_node *N)
{
    ox_val v[3];
    for (uint32_t k = 0; k < 3; k++) {
        v[k] = *ox_need(N, k);
        if (v[k].rank != 0) {
            ox_val e = ox_i64s(N, 0, NULL);
            v[k] = ox_op2(N, ISA_RESHAPE, 0, ox_need(N, k), &e);
        }
    }
    N->out[0] = ox_op3(N, ISA_RANGE, 0, &v[0], &v[1], &v[2]);
}

static void op_Pad(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    char mb[16];
    const char *mode = ox_attr_s(N, "mode", "constant", mb, sizeof mb);
    uint32_t opts = 0;
    if (strcmp(mode, "reflect") == 0)
        opts = ISA_OPT_REFLECT;
    else if (strcmp(mode, "edge") == 0)
        opts = ISA_OPT_EDGE;
    else if (strcmp(mode, "wrap") == 0)
        opts = ISA_OPT_WRAP;
    else if (strcmp(mode, "constant") != 0)
        ox_unsupported(N, "mode '%s'", mode);
    ox_val pads, v;
    if (N->X->opset < 11) {
        int64_t p[16];
        int n = ox_attr_ints(N, N->X->opset < 2 ? "paddings" : "pads", p, 16);
        if (n < 0)
            ox_fail(N, TFVM_ERR_FORMAT, "no pads");
        pads = ox_i64s(N, n, p);
        v = ox_fscalar(N, x->dtype, ox_attr_f(N, "value", 0));
    } else {
        pads = ox_as_i64_vec(N, ox_need(N, 1));
        ox_val *cv = ox_opt_in(N, 2);
        if (cv) {
            v = *cv;
            if (cv->rank != 0) {
                ox_val e = ox_i64s(N, 0, NULL);
                v = ox_op2(N, ISA_RESHAPE, 0, cv, &e);
            }
        } else {
            v = ox_scalar(N, x->dtype, 0, 0);
        }
        ox_val *axv = ox_opt_in(N, 3);
        if (axv) {
            int64_t ax[8], p[16], full[16] = {0};
            int na = ox_const_ints(axv, ax, 8), np = ox_const_ints(ox_need(N, 1), p, 16);
            int r = ox_need_rank(N, x);
            if (na >= 0 && np == 2 * na) {
                for (int k = 0; k < na; k++) {
                    int a = ox_norm_axis(N, ax[k], r, false);
                    full[a] = p[k];
                    full[r + a] = p[na + k];
                }
                pads = ox_i64s(N, 2 * r, full);
            } else {
                /* begins = pads[:len(axes)], ends = pads[len(axes):], each spread */
                ox_val la = ox_op1(N, ISA_SHAPE, 0, axv);
                int64_t z = 0, big = INT64_MAX;
                ox_val vz = ox_i64s(N, 1, &z), vbig = ox_i64s(N, 1, &big);
                ox_val b = ox_op3(N, ISA_SLICE, 0, &pads, &vz, &la);
                ox_val e = ox_op3(N, ISA_SLICE, 0, &pads, &la, &vbig);
                b = ox_spread_axes(N, &b, axv, r, TFVM_I64);
                e = ox_spread_axes(N, &e, axv, r, TFVM_I64);
                pads = ox_op2(N, ISA_CONCAT, 0, &b, &e);
            }
        }
    }
    N->out[0] = ox_op3(N, ISA_PADV, opts, x, &pads, &v);
}

static void op_Einsum(ox_node *N)
{
    char eq[128];
    const char *e = ox_attr_s(N, "equation", "", eq, sizeof eq);
    char in[2][16] = {{0}}, outl[16] = {0};
    int nin = 0, len = 0;
    bool arrow = false;
    for (const char *p = e; *p; p++) {
        char c = *p;
        if (c == ' ')
            continue;
        if (c == '.') {
            if (ox_einsum_diag(N, e))
                return;
            ox_unsupported(N, "equation '%s' (ellipsis)", e);
        }
        if (c == ',') {
            if (arrow || ++nin > 1)
                ox_unsupported(N, "equation '%s' (more than two operands)", e);
            len = 0;
            continue;
        }
        if (c == '-' && p[1] == '>') {
            arrow = true;
            p++;
            len = 0;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) || len >= 8)
            ox_unsupported(N, "equation '%s'", e);
        char *dst = arrow ? outl : in[nin];
        dst[len++] = c;
    }
    nin++;
    if ((int)N->n_in != nin)
        ox_fail(N, TFVM_ERR_FORMAT, "equation '%s' has %d operands, the node %u", e, nin, N->n_in);
    if (!arrow) {
        /* implicit output: the letters seen once, sorted */
        int n = 0;
        for (char c = 'A'; c <= 'z'; c++) {
            int cnt = 0;
            for (int k = 0; k < nin; k++)
                for (const char *q = in[k]; *q; q++)
                    cnt += *q == c;
            if (cnt == 1)
                outl[n++] = c;
        }
    }
    for (int k = 0; k < nin; k++) {
        for (const char *q = in[k]; *q; q++)
            if (strchr(q + 1, *q))
                ox_unsupported(N, "equation '%s' (a repeated index: diagonals)", e);
        if (ox_need(N, k)->rank >= 0 && (size_t)ox_need(N, k)->rank != strlen(in[k]))
            ox_fail(N, TFVM_ERR_FORMAT, "operand %d has rank %d, equation '%s'", k, ox_need(N, k)->rank, e);
    }
    ox_val ops[2];
    char lt[2][16];
    /* sum away each operand's letters that appear nowhere else */
    for (int k = 0; k < nin; k++) {
        ox_val x = *ox_need(N, k);
        int64_t ax[8];
        int na = 0, j = 0;
        for (int i = 0; in[k][i]; i++) {
            char c = in[k][i];
            bool other = strchr(outl, c) || (nin == 2 && strchr(in[1 - k], c));
            if (!other)
                ax[na++] = i;
            else
                lt[k][j++] = c;
        }
        lt[k][j] = 0;
        if (na) {
            ox_val av = ox_i64s(N, na, ax);
            x = ox_op2(N, ISA_REDUCE_SUM, 0, &x, &av);
        }
        ops[k] = x;
    }
    char cur[16];
    ox_val y;
    if (nin == 1) {
        y = ops[0];
        strcpy(cur, lt[0]);
    } else {
        char batch[8], m[8], kk[8], nn[8];
        int nb = 0, nm = 0, nk = 0, nnn = 0;
        for (const char *q = lt[0]; *q; q++) {
            bool inb = strchr(lt[1], *q) != NULL, ino = strchr(outl, *q) != NULL;
            if (inb && ino)
                batch[nb++] = *q;
            else if (inb)
                kk[nk++] = *q;
            else
                m[nm++] = *q;
        }
        for (const char *q = lt[1]; *q; q++)
            if (!strchr(lt[0], *q))
                nn[nnn++] = *q;
        if (nm > 1 || nk > 1 || nnn > 1)
            ox_unsupported(N, "equation '%s' (more than one free or summed index per operand)", e);
        /* A as [batch, m|1, k|1], B as [batch, k|1, n|1] */
        for (int k = 0; k < 2; k++) {
            char want[16];
            int w = 0;
            for (int i = 0; i < nb; i++)
                want[w++] = batch[i];
            if (k == 0) {
                if (nm) want[w++] = m[0];
                if (nk) want[w++] = kk[0];
            } else {
                if (nk) want[w++] = kk[0];
                if (nnn) want[w++] = nn[0];
            }
            want[w] = 0;
            int64_t perm[8];
            bool id = true;
            for (int i = 0; i < w; i++) {
                perm[i] = strchr(lt[k], want[i]) - lt[k];
                id = id && perm[i] == i;
            }
            if (!id) {
                ox_val pv = ox_i64s(N, w, perm);
                ops[k] = ox_op2(N, ISA_TRANSPOSE, 0, &ops[k], &pv);
            }
            int64_t ins[2];
            int ni = 0;
            if (k == 0) {
                if (!nm) ins[ni++] = nb;
                if (!nk) ins[ni++] = nb + 1;
            } else {
                if (!nk) ins[ni++] = nb;
                if (!nnn) ins[ni++] = nb + 1;
            }
            if (ni) {
                ox_val iv = ox_i64s(N, ni, ins);
                ops[k] = ox_op2(N, ISA_UNSQUEEZE, 0, &ops[k], &iv);
            }
        }
        y = ox_op2(N, ISA_MATMUL, 0, &ops[0], &ops[1]);
        int64_t sq[2];
        int ns = 0;
        if (!nm) sq[ns++] = nb;
        if (!nnn) sq[ns++] = nb + 1;
        if (ns) {
            ox_val sv = ox_i64s(N, ns, sq);
            y = ox_op2(N, ISA_SQUEEZE, 0, &y, &sv);
        }
        int c = 0;
        for (int i = 0; i < nb; i++)
            cur[c++] = batch[i];
        if (nm) cur[c++] = m[0];
        if (nnn) cur[c++] = nn[0];
        cur[c] = 0;
    }
    int ro = (int)strlen(outl);
    if ((int)strlen(cur) != ro)
        ox_unsupported(N, "equation '%s'", e);
    int64_t perm[8];
    bool id = true;
    for (int i = 0; i < ro; i++) {
        const char *p = strchr(cur, outl[i]);
        if (!p)
            ox_unsupported(N, "equation '%s'", e);
        perm[i] = p - cur;
        id = id && perm[i] == i;
    }
    if (!id) {
        ox_val pv = ox_i64s(N, ro, perm);
        y = ox_op2(N, ISA_TRANSPOSE, 0, &y, &pv);
    }
    y.rank = (int8_t)ro;
    N->out[0] = y;
}

static void op_TopK(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val k;
    if (N->X->opset < 10)
        k = ox_scalar(N, TFVM_I64, 0, ox_attr_i(N, "k", 0));
    else
        k = ox_as_i64_scalar(N, ox_need(N, 1));
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", -1), x->rank, false);
    ox_val largest = ox_scalar(N, TFVM_BOOL, 0, ox_attr_i(N, "largest", 1) != 0);
    ox_val idx = ox_op3(N, ISA_TOPK, (uint32_t)axis, x, &k, &largest);
    N->out[0] = ox_op2(N, ISA_GATHER_ELEMENTS, (uint32_t)axis, x, &idx);
    if (N->n_out > 1)
        N->out[1] = idx;
}

static void op_Trilu(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val k = ox_opt_in(N, 1) ? ox_as_i64_scalar(N, ox_opt_in(N, 1)) : ox_scalar(N, TFVM_I64, 0, 0);
    uint32_t opts = ox_attr_i(N, "upper", 1) ? ISA_OPT_UPPER : 0;
    ox_val y = ox_op2(N, ISA_TRILU, opts, x, &k);
    memcpy(y.dims, x->dims, sizeof y.dims);
    N->out[0] = y;
}

static void op_CumSum(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val a = ox_as_i64_scalar(N, ox_need(N, 1));
    uint32_t opts = (ox_attr_i(N, "exclusive", 0) ? ISA_OPT_EXCLUSIVE : 0) | (ox_attr_i(N, "reverse", 0) ? ISA_OPT_REVERSE : 0);
    ox_val y = ox_op2(N, ISA_CUMSUM, opts, x, &a);
    memcpy(y.dims, x->dims, sizeof y.dims);
    N->out[0] = y;
}

static void op_OneHot(ox_node *N)
{
    ox_val *ind = ox_need(N, 0), *vals = ox_need(N, 2);
    ox_val i = ox_to_dtype(N, ind, TFVM_I64);
    ox_val dep = ox_to_dtype(N, ox_need(N, 1), TFVM_I64);
    dep = ox_as_i64_scalar(N, &dep);
    int rr = ind->rank >= 0 ? ind->rank + 1 : -1;
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", -1), rr, false);
    N->out[0] = ox_op3(N, ISA_ONEHOT, (uint32_t)axis, &i, &dep, vals);
}

static void op_Resize(ox_node *N)
{
    if (ox_resize2(N)) /* cubic, antialias, cropping, aspect policies: onnx_image.c */
        return;
    ox_val *x = ox_need(N, 0);
    ox_val axes_v = {0};
    bool have_axes = false;
    char mb[32], cb[32], nb[32];
    const char *mode = ox_attr_s(N, "mode", "nearest", mb, sizeof mb);
    uint32_t opts = 0;
    if (strcmp(mode, "linear") == 0 || strcmp(mode, "bilinear") == 0)
        opts |= ISA_OPT_LINEAR;
    else if (strcmp(mode, "nearest") != 0)
        ox_unsupported(N, "mode '%s'", mode);
    ox_val *scales = NULL, *sizes = NULL;
    if (N->X->opset < 11) {
        scales = ox_need(N, 1);
        opts |= ISA_OPT_ASYMMETRIC | ISA_OPT_NEAREST_FLOOR;
    } else {
        const char *ct = ox_attr_s(N, "coordinate_transformation_mode", "half_pixel", cb, sizeof cb);
        if (strcmp(ct, "asymmetric") == 0)
            opts |= ISA_OPT_ASYMMETRIC;
        else if (strcmp(ct, "align_corners") == 0)
            opts |= ISA_OPT_ALIGN_CORNERS;
        else if (strcmp(ct, "pytorch_half_pixel") == 0)
            opts |= ISA_OPT_PYTORCH_HALF_PIXEL;
        else if (strcmp(ct, "tf_half_pixel_for_nn") == 0)
            opts |= ISA_OPT_TF_HALF_PIXEL_NN;
        else if (strcmp(ct, "half_pixel") != 0)
            ox_unsupported(N, "coordinate_transformation_mode '%s'", ct);
        const char *nm = ox_attr_s(N, "nearest_mode", "round_prefer_floor", nb, sizeof nb);
        if (!(opts & ISA_OPT_LINEAR)) {
            if (strcmp(nm, "round_prefer_ceil") == 0)
                opts |= ISA_OPT_PREFER_CEIL;
            else if (strcmp(nm, "floor") == 0)
                opts |= ISA_OPT_NEAREST_FLOOR;
            else if (strcmp(nm, "ceil") == 0)
                opts |= ISA_OPT_NEAREST_CEIL;
            else if (strcmp(nm, "round_prefer_floor") != 0)
                ox_unsupported(N, "nearest_mode '%s'", nm);
        }
        if (ox_attr_i(N, "antialias", 0))
            ox_unsupported(N, "antialias");
        if (ox_attr(N, "axes")) {
            int64_t ax[8];
            int na = ox_attr_ints(N, "axes", ax, 8);
            axes_v = ox_i64s(N, na, ax);
            have_axes = true;
        }
        char kb[32];
        const char *kp = ox_attr_s(N, "keep_aspect_ratio_policy", "stretch", kb, sizeof kb);
        if (strcmp(kp, "stretch") != 0)
            ox_unsupported(N, "keep_aspect_ratio_policy '%s'", kp);
        scales = ox_opt_in(N, 2);
        sizes = ox_opt_in(N, 3);
    }
    ox_val sc, sz;
    ox_resize_targets(N, x, scales, sizes, have_axes ? &axes_v : NULL, have_axes ? ox_need_rank(N, x) : 0, &sc, &sz);
    N->out[0] = ox_op3(N, ISA_RESIZE, opts, x, &sc, &sz);
}

void ox_resize_targets(ox_node *N, const ox_val *x, const ox_val *scales, const ox_val *sizes, const ox_val *axes_v,
                       int r, ox_val *sc, ox_val *sz)
{
    if (scales && scales->rank == 1 && scales->dims[0] == 0)
        scales = NULL;
    if (sizes && sizes->rank == 1 && sizes->dims[0] == 0)
        sizes = NULL;
    *sc = scales ? ox_to_dtype(N, scales, TFVM_F32) : ox_empty_vec(N, TFVM_F32);
    *sz = sizes ? ox_as_i64_vec(N, sizes) : ox_empty_vec(N, TFVM_I64);
    if (!axes_v)
        return;
    /* scales or sizes for the listed axes only: the others keep their size */
    if (scales) {
        ox_val one = ox_fscalar(N, TFVM_F32, 1);
        ox_val d = ox_ew2(N, ISA_SUB, sc, &one);
        d = ox_spread_axes(N, &d, axes_v, r, TFVM_F32);
        *sc = ox_ew2(N, ISA_ADD, &d, &one);
    } else if (sizes) {
        ox_val xs = ox_op1(N, ISA_SHAPE, 0, x);
        ox_val old = ox_op2(N, ISA_GATHER, 0, &xs, axes_v);
        ox_val d = ox_ew2(N, ISA_SUB, sz, &old);
        d = ox_spread_axes(N, &d, axes_v, r, TFVM_I64);
        *sz = ox_ew2(N, ISA_ADD, &xs, &d);
    }
}

static void op_Constant(ox_node *N)
{
    const Onnx__AttributeProto *a;
    if ((a = ox_attr(N, "value")) && a->t) {
        ox_tensor_const(N->X, N, N->b, a->t, &N->out[0]);
    } else if ((a = ox_attr(N, "value_float")) && a->has_f) {
        N->out[0] = ox_fscalar(N, TFVM_F32, a->f);
        N->out[0].cdata = NULL;
    } else if ((a = ox_attr(N, "value_int")) && a->has_i) {
        N->out[0] = ox_scalar(N, TFVM_I64, 0, a->i);
        int64_t *p = cc_alloc(N->C, sizeof *p);
        *p = a->i;
        N->out[0].cdata = p;
    } else if ((a = ox_attr(N, "value_ints"))) {
        if (a->n_ints > (1u << 28))
            ox_unsupported(N, "a value_ints of %zu entries", a->n_ints);
        N->out[0] = ox_i64s(N, (int)a->n_ints, a->ints);
    } else if ((a = ox_attr(N, "value_floats"))) {
        int64_t n = (int64_t)a->n_floats;
        N->out[0].dtype = TFVM_F32;
        N->out[0].rank = 1;
        N->out[0].dims[0] = n;
        static const float none = 0;
        const float *fl = a->n_floats ? a->floats : &none;
        N->out[0].cdata = fl;
        N->out[0].v = cc_const_new(N->C, N->b, TFVM_F32, 1, &n, fl, a->n_floats * sizeof(float), true);
    } else {
        ox_unsupported(N, "this kind of value (sparse or strings)");
    }
}

/* ---- The table ---------------------------------------------------------------------- */


#define R(name, since) {#name, since, op_##name}
static const ox_opdef ops[] = {
    R(Abs, 1), R(Add, 1), R(And, 1), R(ArgMax, 1), R(ArgMin, 1), R(AveragePool, 1), R(BatchNormalization, 1),
    R(Cast, 1), R(CastLike, 15), R(Ceil, 1), R(Celu, 12), R(Clip, 1), R(Concat, 1), R(Constant, 1),
    R(ConstantOfShape, 9), R(Conv, 1), R(ConvInteger, 10), R(Cos, 7), R(CumSum, 11), R(Div, 1), R(Dropout, 1), R(Einsum, 12), R(Elu, 1),
    R(Equal, 1), R(Erf, 9), R(Exp, 1), R(Expand, 8), R(Flatten, 1), R(Floor, 1), R(Gather, 1),
    R(GatherElements, 11), R(Gelu, 20), R(Gemm, 1), R(GlobalAveragePool, 1), R(GlobalMaxPool, 1), R(Greater, 1),
    R(GreaterOrEqual, 12), R(HardSigmoid, 1), R(HardSwish, 14), R(Identity, 1), {"If", 1, ox_op_if},
    R(InstanceNormalization, 1), R(IsNaN, 9), R(LayerNormalization, 17), R(LeakyRelu, 1), R(Less, 1),
    R(LessOrEqual, 12), R(Log, 1), R(LogSoftmax, 1), {"Loop", 1, ox_op_loop}, R(LRN, 1), R(LpPool, 1), R(MatMul, 1), R(Max, 1),
    R(MaxPool, 1), R(Mean, 1), R(Min, 1), R(Mish, 18), R(Mod, 10), R(Mul, 1), R(Neg, 1), R(Not, 1), R(OneHot, 9), R(Or, 1),
    R(Pad, 1), R(Pow, 1), R(PRelu, 1), R(QLinearConv, 10), R(Range, 11), R(Reciprocal, 1), R(ReduceL1, 1), R(ReduceL2, 1),
    R(ReduceLogSum, 1), R(ReduceLogSumExp, 1), R(ReduceMax, 1), R(ReduceMean, 1), R(ReduceMin, 1),
    R(ReduceProd, 1), R(ReduceSum, 1), R(ReduceSumSquare, 1), R(Relu, 1), R(Reshape, 1), R(Resize, 10),
    R(Round, 11), {"Scan", 8, ox_op_scan}, R(Selu, 1), R(Shape, 1), R(Shrink, 9), R(Sigmoid, 1), R(Sign, 9),
    R(Sin, 7), R(Size, 1), R(Slice, 1), R(Softmax, 1), R(Softplus, 1), R(Softsign, 1), R(Split, 2), R(Sqrt, 1),
    R(Squeeze, 1), R(Sub, 1), R(Sum, 1), R(Tanh, 1), R(ThresholdedRelu, 10), R(Tile, 6), R(TopK, 1),
    R(Transpose, 1), R(Trilu, 14), R(Unsqueeze, 1), R(Where, 9), R(Xor, 1),
};
#undef R

static ox_handler find_in(const ox_opdef *t, size_t n, const char *op_type, int64_t opset, int64_t *min_opset)
{
    for (size_t k = 0; k < n; k++)
        if (strcmp(t[k].name, op_type) == 0) {
            if (opset < t[k].since) {
                *min_opset = t[k].since;
                return NULL;
            }
            return t[k].h;
        }
    return NULL;
}

ox_handler ox_find_op(const char *op_type, int64_t opset, int64_t *min_opset)
{
    *min_opset = 0;
    ox_handler h = find_in(ops, UT_COUNTOF(ops), op_type, opset, min_opset);
    if (!h && !*min_opset)
        h = find_in(ox_extra_ops, ox_n_extra_ops, op_type, opset, min_opset);
    if (!h && !*min_opset)
        h = find_in(ox_rnn_ops, ox_n_rnn_ops, op_type, opset, min_opset);
    if (!h && !*min_opset)
        h = find_in(ox_image_ops, ox_n_image_ops, op_type, opset, min_opset);
    if (!h && !*min_opset)
        h = find_in(ox_seq_ops, ox_n_seq_ops, op_type, opset, min_opset);
    if (!h && !*min_opset)
        h = find_in(ox_bits_ops, ox_n_bits_ops, op_type, opset, min_opset);
    if (!h && !*min_opset)
        h = find_in(ox_list_ops, ox_n_list_ops, op_type, opset, min_opset);
    return h;
}

bool ox_op_supported(const char *op_type)
{
    int64_t m;
    return ox_find_op(op_type, OX_MAX_OPSET, &m) != NULL;
}
