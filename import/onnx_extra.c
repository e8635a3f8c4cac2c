/* import/onnx_extra.c — ONNX ops beyond issue 10's list, each a short
 * decomposition into ISA instructions: losses, more normalizations,
 * hyperbolic functions, Hardmax, quantization, layout shuffles. */
#include <math.h>
#include <string.h>

#include "import/onnx_int.h"

static ox_val reshape_to(ox_node *N, const ox_val *x, int n, const int64_t *shape)
{
    ox_val s = ox_i64s(N, n, shape);
    ox_val y = ox_op2(N, ISA_RESHAPE, 0, x, &s);
    for (int k = 0; k < n; k++)
        y.dims[k] = shape[k] >= 0 ? shape[k] : -1;
    y.v.n->types[0] = ox_vtype(&y);
    return y;
}

static ox_val axes_from(ox_node *N, int axis, int r)
{
    int64_t ax[TFVM_MAX_RANK];
    for (int i = axis; i < r; i++)
        ax[i - axis] = i;
    return ox_i64s(N, r - axis, ax);
}

/* ---- Elementwise ------------------------------------------------------------------ */

static ox_val exp_pm(ox_node *N, const ox_val *x, isa_op op)
{
    ox_val nx = ox_ew1(N, ISA_NEG, x), a = ox_ew1(N, ISA_EXP, x), b = ox_ew1(N, ISA_EXP, &nx);
    ox_val s = ox_ew2(N, op, &a, &b), h = ox_fscalar(N, x->dtype, 0.5);
    return ox_ew2(N, ISA_MUL, &s, &h);
}

static void op_Sinh(ox_node *N) { N->out[0] = exp_pm(N, ox_need(N, 0), ISA_SUB); }
static void op_Cosh(ox_node *N) { N->out[0] = exp_pm(N, ox_need(N, 0), ISA_ADD); }

static void op_Tan(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val s = ox_ew1(N, ISA_SIN, x), c = ox_ew1(N, ISA_COS, x);
    N->out[0] = ox_ew2(N, ISA_DIV, &s, &c);
}

/* log(x + sqrt(x*x + sign)) */
static ox_val log_root(ox_node *N, const ox_val *x, double sign)
{
    ox_val sq = ox_ew2(N, ISA_MUL, x, x), c = ox_fscalar(N, x->dtype, sign);
    sq = ox_ew2(N, ISA_ADD, &sq, &c);
    sq = ox_ew1(N, ISA_SQRT, &sq);
    sq = ox_ew2(N, ISA_ADD, x, &sq);
    return ox_ew1(N, ISA_LOG, &sq);
}

static void op_Asinh(ox_node *N) { N->out[0] = log_root(N, ox_need(N, 0), 1); }
static void op_Acosh(ox_node *N) { N->out[0] = log_root(N, ox_need(N, 0), -1); }

static void op_Atanh(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val one = ox_fscalar(N, x->dtype, 1), h = ox_fscalar(N, x->dtype, 0.5);
    ox_val a = ox_ew2(N, ISA_ADD, &one, x), b = ox_ew2(N, ISA_SUB, &one, x);
    ox_val q = ox_ew2(N, ISA_DIV, &a, &b);
    q = ox_ew1(N, ISA_LOG, &q);
    N->out[0] = ox_ew2(N, ISA_MUL, &q, &h);
}

static void op_IsInf(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    bool pos = ox_attr_i(N, "detect_positive", 1) != 0, neg = ox_attr_i(N, "detect_negative", 1) != 0;
    ox_val pi = ox_fscalar(N, x->dtype, INFINITY), ni = ox_fscalar(N, x->dtype, -INFINITY);
    ox_val a = ox_ew2(N, ISA_EQUAL, x, &pi), b = ox_ew2(N, ISA_EQUAL, x, &ni);
    if (pos && neg)
        N->out[0] = ox_ew2(N, ISA_OR, &a, &b);
    else if (pos)
        N->out[0] = a;
    else if (neg)
        N->out[0] = b;
    else
        N->out[0] = ox_ew2(N, ISA_NOT_EQUAL, &a, &a); /* all false */
}

static void op_Swish(ox_node *N)
{
    N->out[0] = ox_decompose(N, CC_DC_SWISH, ox_need(N, 0), (double[]){ox_attr_f(N, "alpha", 1.0f)});
}

/* ---- Normalizations ----------------------------------------------------------------- */

static void op_RMSNormalization(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *scale = ox_need(N, 1);
    int r = ox_need_rank(N, x);
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", -1), r, false);
    ox_val axes = axes_from(N, axis, r);
    uint8_t d = x->dtype;
    ox_val sq = ox_ew2(N, ISA_MUL, x, x);
    ox_val ms = ox_op2(N, ISA_REDUCE_MEAN, ISA_OPT_KEEPDIMS, &sq, &axes);
    ox_val eps = ox_fscalar(N, d, ox_attr_f(N, "epsilon", 1e-5f));
    ms = ox_ew2(N, ISA_ADD, &ms, &eps);
    ms = ox_ew1(N, ISA_SQRT, &ms);
    ox_val y = ox_ew2(N, ISA_DIV, x, &ms);
    N->out[0] = ox_ew2(N, ISA_MUL, &y, scale);
}

static void op_LpNormalization(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int64_t p = ox_attr_i(N, "p", 2);
    if (p != 1 && p != 2)
        ox_unsupported(N, "p = %lld", (long long)p);
    int64_t axis = ox_attr_i(N, "axis", -1);
    ox_val av = ox_i64s(N, 1, &axis);
    ox_val t = p == 1 ? ox_ew1(N, ISA_ABS, x) : ox_ew2(N, ISA_MUL, x, x);
    ox_val n = ox_op2(N, ISA_REDUCE_SUM, ISA_OPT_KEEPDIMS, &t, &av);
    if (p == 2)
        n = ox_ew1(N, ISA_SQRT, &n);
    /* a zero norm leaves zeros (not 0/0) */
    ox_val z = ox_fscalar(N, x->dtype, 0), one = ox_fscalar(N, x->dtype, 1);
    ox_val isz = ox_ew2(N, ISA_EQUAL, &n, &z);
    n = ox_op3(N, ISA_SELECT, 0, &isz, &one, &n);
    N->out[0] = ox_ew2(N, ISA_DIV, x, &n);
}

static void op_MeanVarianceNormalization(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int64_t ax[TFVM_MAX_RANK] = {0, 2, 3};
    int na = ox_attr_ints(N, "axes", ax, TFVM_MAX_RANK);
    ox_val axes = ox_i64s(N, na < 0 ? 3 : na, ax);
    uint8_t d = x->dtype;
    /* the ONNX function: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) */
    ox_val ex = ox_op2(N, ISA_REDUCE_MEAN, ISA_OPT_KEEPDIMS, x, &axes);
    ox_val sq = ox_ew2(N, ISA_MUL, x, x);
    ox_val ex2 = ox_op2(N, ISA_REDUCE_MEAN, ISA_OPT_KEEPDIMS, &sq, &axes);
    ox_val e2 = ox_ew2(N, ISA_MUL, &ex, &ex);
    ox_val var = ox_ew2(N, ISA_SUB, &ex2, &e2);
    ox_val sd = ox_ew1(N, ISA_SQRT, &var), eps = ox_fscalar(N, d, 1e-9);
    sd = ox_ew2(N, ISA_ADD, &sd, &eps);
    ox_val c = ox_ew2(N, ISA_SUB, x, &ex);
    N->out[0] = ox_ew2(N, ISA_DIV, &c, &sd);
}

static void op_GroupNormalization(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *scale = ox_need(N, 1), *bias = ox_need(N, 2);
    int r = ox_need_rank(N, x);
    int64_t g = ox_attr_i(N, "num_groups", 0), c = r > 1 ? x->dims[1] : -1;
    if (g < 1 || r < 2)
        ox_fail(N, TFVM_ERR_FORMAT, "num_groups %lld for rank %d", (long long)g, r);
    /* x as [N, G, -1], normalized over the last axis, back to x's shape */
    ox_val xs = ox_shape_of(N, x);
    int64_t z = 0, one = 1, rest[2] = {g, -1};
    ox_val vz = ox_i64s(N, 1, &z), v1 = ox_i64s(N, 1, &one), vr = ox_i64s(N, 2, rest);
    ox_val n0 = ox_op3(N, ISA_SLICE, 0, &xs, &vz, &v1);
    ox_val gs = ox_op2(N, ISA_CONCAT, 0, &n0, &vr);
    ox_val xg = ox_op2(N, ISA_RESHAPE, 0, x, &gs);
    int64_t two = 2;
    ox_val a2 = ox_i64s(N, 1, &two);
    ox_val y = ox_normalize(N, &xg, &a2, ox_attr_f(N, "epsilon", 1e-5f), NULL, NULL);
    y = ox_op2(N, ISA_RESHAPE, 0, &y, &xs);
    ox_val sc = *scale, bi = *bias;
    if (N->X->opset < 21 || (scale->rank == 1 && scale->dims[0] == g && g != c)) {
        /* per group: each repeated over its C/G channels */
        if (c < 0)
            ox_unsupported(N, "per-group scale on an input of unknown channel count");
        int64_t gc[2] = {g, 1}, rep[2] = {1, c / g}, flat = -1;
        ox_val vgc = ox_i64s(N, 2, gc), vrep = ox_i64s(N, 2, rep), vf = ox_i64s(N, 1, &flat);
        ox_val *src[2] = {scale, bias};
        ox_val *dst[2] = {&sc, &bi};
        for (int k = 0; k < 2; k++) {
            ox_val t = ox_op2(N, ISA_RESHAPE, 0, src[k], &vgc);
            t = ox_op2(N, ISA_TILE, 0, &t, &vrep);
            *dst[k] = ox_op2(N, ISA_RESHAPE, 0, &t, &vf);
        }
    }
    ox_val s2 = ox_per_channel(N, &sc, r), b2 = ox_per_channel(N, &bi, r);
    y = ox_ew2(N, ISA_MUL, &y, &s2);
    N->out[0] = ox_ew2(N, ISA_ADD, &y, &b2);
}

/* ---- Losses --------------------------------------------------------------------------- */

/* -input[n, target[n, ...], ...] weighted, reduced as asked (ONNX's
 * NegativeLogLikelihoodLoss); ignored targets weigh 0 */
static ox_val nll(ox_node *N, const ox_val *in, const ox_val *target, const ox_val *weight)
{
    uint8_t d = in->dtype;
    char rb[16];
    const char *red = ox_attr_s(N, "reduction", "mean", rb, sizeof rb);
    const Onnx__AttributeProto *ia = ox_attr(N, "ignore_index");
    ox_val t = ox_to_dtype(N, target, TFVM_I64), mask = {0};
    bool ignore = ia && ia->has_i;
    if (ignore) {
        ox_val ii = ox_scalar(N, TFVM_I64, 0, ia->i), zero = ox_scalar(N, TFVM_I64, 0, 0);
        mask = ox_ew2(N, ISA_NOT_EQUAL, &t, &ii);
        t = ox_op3(N, ISA_SELECT, 0, &mask, &t, &zero);
    }
    int64_t one = 1;
    ox_val a1 = ox_i64s(N, 1, &one);
    ox_val tu = ox_op2(N, ISA_UNSQUEEZE, 0, &t, &a1);
    ox_val g = ox_op2(N, ISA_GATHER_ELEMENTS, 1, in, &tu);
    g = ox_op2(N, ISA_SQUEEZE, 0, &g, &a1);
    ox_val loss = ox_ew1(N, ISA_NEG, &g), w = {0};
    bool have_w = false;
    if (weight) {
        w = ox_op2(N, ISA_GATHER, 0, weight, &t);
        have_w = true;
    }
    if (ignore) {
        ox_val m = ox_to_dtype(N, &mask, d);
        w = have_w ? ox_ew2(N, ISA_MUL, &w, &m) : m;
        have_w = true;
    }
    if (have_w)
        loss = ox_ew2(N, ISA_MUL, &loss, &w);
    if (strcmp(red, "none") == 0)
        return loss;
    ox_val all = ox_i64s(N, 0, NULL);
    ox_val sum = ox_op2(N, ISA_REDUCE_SUM, 0, &loss, &all);
    if (strcmp(red, "sum") == 0)
        return sum;
    if (strcmp(red, "mean") != 0)
        ox_unsupported(N, "reduction '%s'", red);
    if (!have_w)
        return ox_op2(N, ISA_REDUCE_MEAN, 0, &loss, &all);
    ox_val ws = ox_op2(N, ISA_REDUCE_SUM, 0, &w, &all);
    return ox_ew2(N, ISA_DIV, &sum, &ws);
}

static void op_NegativeLogLikelihoodLoss(ox_node *N)
{
    N->out[0] = nll(N, ox_need(N, 0), ox_need(N, 1), ox_opt_in(N, 2));
}

static void op_SoftmaxCrossEntropyLoss(ox_node *N)
{
    ox_val *s = ox_need(N, 0);
    ox_val lp = ox_op1(N, ISA_LOG_SOFTMAX, 1, s);
    memcpy(lp.dims, s->dims, sizeof lp.dims);
    N->out[0] = nll(N, &lp, ox_need(N, 1), ox_opt_in(N, 2));
    if (N->n_out > 1)
        N->out[1] = lp;
}

/* ---- Hardmax, EyeLike, layout ------------------------------------------------------------ */

static ox_val hardmax_axis(ox_node *N, const ox_val *x, int axis)
{
    ox_val idx = ox_op1(N, ISA_ARGMAX, (uint32_t)axis, x);
    ox_val sh = ox_op1(N, ISA_SHAPE, 0, x), ai = ox_scalar(N, TFVM_I64, 0, axis);
    ox_val depth = ox_op2(N, ISA_GATHER, 0, &sh, &ai);
    unsigned char onoff[16] = {0};
    size_t es = tfvm_dtype_size((tfvm_dtype)x->dtype);
    if (x->dtype == TFVM_F32) {
        float o = 1;
        memcpy(onoff + es, &o, es);
    } else if (x->dtype == TFVM_F64) {
        double o = 1;
        memcpy(onoff + es, &o, es);
    } else {
        onoff[es] = 1;
    }
    int64_t two = 2;
    ox_val oo = {0};
    oo.dtype = x->dtype;
    ox_unknown_shape(&oo, 1);
    oo.v = cc_const_new(N->C, N->b, (tfvm_dtype)x->dtype, 1, &two, onoff, 2 * es, false);
    return ox_op3(N, ISA_ONEHOT, (uint32_t)axis, &idx, &depth, &oo);
}

static void op_Hardmax(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int r = ox_need_rank(N, x);
    if (N->X->opset >= 13) {
        N->out[0] = hardmax_axis(N, x, ox_norm_axis(N, ox_attr_i(N, "axis", -1), r, false));
        return;
    }
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", 1), r, false);
    ox_val s = ox_shape_of(N, x);
    ox_val f = ox_op1(N, ISA_FLATTEN, (uint32_t)axis, x);
    ox_val y = hardmax_axis(N, &f, 1);
    N->out[0] = ox_op2(N, ISA_RESHAPE, 0, &y, &s);
}

static void op_EyeLike(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    uint8_t d = x->dtype;
    const Onnx__AttributeProto *da = ox_attr(N, "dtype");
    if (da && da->has_i && !ox_dtype((int32_t)da->i, &d))
        ox_unsupported(N, "dtype %s", ox_onnx_type_name((int32_t)da->i));
    ox_val s = ox_shape_of(N, x), one = ox_scalar(N, d, 1, 1), k = ox_scalar(N, TFVM_I64, 0, ox_attr_i(N, "k", 0));
    ox_val ones = ox_op2(N, ISA_FILL, 0, &s, &one);
    ox_val up = ox_op2(N, ISA_TRILU, ISA_OPT_UPPER, &ones, &k);
    N->out[0] = ox_op2(N, ISA_TRILU, 0, &up, &k);
}

static void need_dims(ox_node *N, const ox_val *x)
{
    /* known and non-empty, which bounds every product of dims and block below */
    if (x->rank != 4 || ox_count_of(x) < 1)
        ox_unsupported(N, "an input whose 4 dims are not known (or that is empty)");
    int64_t b = ox_attr_i(N, "blocksize", 0);
    if (b < 1 || b > (1 << 15))
        ox_fail(N, TFVM_ERR_FORMAT, "blocksize %lld out of range", (long long)b);
}

static void op_DepthToSpace(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    need_dims(N, x);
    int64_t b = ox_attr_i(N, "blocksize", 0), n = x->dims[0], c = x->dims[1], h = x->dims[2], w = x->dims[3];
    if (b < 1 || c % (b * b))
        ox_fail(N, TFVM_ERR_FORMAT, "blocksize %lld for %lld channels", (long long)b, (long long)c);
    char mb[8];
    bool crd = strcmp(ox_attr_s(N, "mode", "DCR", mb, sizeof mb), "CRD") == 0;
    int64_t s1[6] = {n, b, b, c / (b * b), h, w}, s1c[6] = {n, c / (b * b), b, b, h, w};
    int64_t p[6] = {0, 3, 4, 1, 5, 2}, pc[6] = {0, 1, 4, 2, 5, 3}, s2[4] = {n, c / (b * b), h * b, w * b};
    ox_val t = reshape_to(N, x, 6, crd ? s1c : s1);
    ox_val pv = ox_i64s(N, 6, crd ? pc : p);
    t = ox_op2(N, ISA_TRANSPOSE, 0, &t, &pv);
    N->out[0] = reshape_to(N, &t, 4, s2);
}

static void op_SpaceToDepth(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    need_dims(N, x);
    int64_t b = ox_attr_i(N, "blocksize", 0), n = x->dims[0], c = x->dims[1], h = x->dims[2], w = x->dims[3];
    if (b < 1 || h % b || w % b)
        ox_fail(N, TFVM_ERR_FORMAT, "blocksize %lld for [%lld, %lld]", (long long)b, (long long)h, (long long)w);
    int64_t s1[6] = {n, c, h / b, b, w / b, b}, p[6] = {0, 3, 5, 1, 2, 4}, s2[4] = {n, c * b * b, h / b, w / b};
    ox_val t = reshape_to(N, x, 6, s1);
    ox_val pv = ox_i64s(N, 6, p);
    t = ox_op2(N, ISA_TRANSPOSE, 0, &t, &pv);
    N->out[0] = reshape_to(N, &t, 4, s2);
}

static void op_Upsample(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    char mb[16];
    const char *mode = ox_attr_s(N, "mode", "nearest", mb, sizeof mb);
    uint32_t opts = ISA_OPT_ASYMMETRIC;
    if (strcmp(mode, "linear") == 0 || strcmp(mode, "bilinear") == 0)
        opts |= ISA_OPT_LINEAR;
    else if (strcmp(mode, "nearest") == 0)
        opts |= ISA_OPT_NEAREST_FLOOR;
    else
        ox_unsupported(N, "mode '%s'", mode);
    ox_val sc;
    const Onnx__AttributeProto *a = ox_attr(N, "scales");
    if (N->X->opset < 9 && a) {
        int64_t n = (int64_t)a->n_floats;
        sc.dtype = TFVM_F32;
        ox_unknown_shape(&sc, 1);
        static const float none = 0;
        sc.cdata = NULL;
        sc.v = cc_const_new(N->C, N->b, TFVM_F32, 1, &n, n ? a->floats : &none, (size_t)n * sizeof(float), false);
    } else {
        sc = ox_to_dtype(N, ox_need(N, 1), TFVM_F32);
    }
    ox_val sz = ox_empty_vec(N, TFVM_I64);
    N->out[0] = ox_op3(N, ISA_RESIZE, opts, x, &sc, &sz);
}

/* ---- Quantization ------------------------------------------------------------------------- */

/* a per-axis parameter vector shaped to broadcast along x's axis */
static ox_val along(ox_node *N, const ox_val *v, const ox_val *x)
{
    if (v->rank != 1 || x->rank <= 1)
        return *v;
    int r = ox_need_rank(N, x);
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", 1), r, false);
    int64_t s[TFVM_MAX_RANK];
    for (int k = 0; k < r - axis; k++)
        s[k] = k == 0 ? -1 : 1;
    return reshape_to(N, v, r - axis, s);
}

static void op_DequantizeLinear(ox_node *N)
{
    if (ox_attr_i(N, "block_size", 0))
        ox_unblock(N);
    ox_val *x = ox_need(N, 0), *sc = ox_need(N, 1), *zp = ox_opt_in(N, 2);
    uint8_t d = sc->dtype;
    ox_val xf = ox_to_dtype(N, x, d);
    if (zp) {
        ox_val z = along(N, zp, x);
        z = ox_to_dtype(N, &z, d);
        xf = ox_ew2(N, ISA_SUB, &xf, &z);
    }
    ox_val s = along(N, sc, x);
    N->out[0] = ox_ew2(N, ISA_MUL, &xf, &s);
}

static void op_QuantizeLinear(ox_node *N)
{
    if (ox_attr_i(N, "block_size", 0))
        ox_unblock(N);
    ox_val *x = ox_need(N, 0), *sc = ox_need(N, 1), *zp = ox_opt_in(N, 2);
    uint8_t out = zp ? zp->dtype : TFVM_U8, store = zp ? zp->store : 0;
    const Onnx__AttributeProto *od = ox_attr(N, "output_dtype");
    if (od && od->has_i && od->i && !ox_dtype((int32_t)od->i, &out))
        ox_unsupported(N, "output_dtype %s", ox_onnx_type_name((int32_t)od->i));
    if (od && od->has_i && od->i)
        store = ox_store_dtype((int32_t)od->i);
    /* the range of the stored integer type: 8 bits, or i16/u16 computed in i32 */
    const double lo_v = out == TFVM_U8 || store == TFVM_U16 ? 0 : out == TFVM_I8 ? -128 : store == TFVM_I16 ? -32768 : 1;
    const double hi_v = out == TFVM_U8 ? 255 : out == TFVM_I8 ? 127 : store == TFVM_I16 ? 32767 : 65535;
    if (out != TFVM_U8 && out != TFVM_I8 && store != TFVM_I16 && store != TFVM_U16)
        ox_unsupported(N, "quantizing to %s", tfvm_dtype_name((tfvm_dtype)(store ? store : out)));
    uint8_t d = sc->dtype;
    ox_val xf = ox_to_dtype(N, x, d), s = along(N, sc, x);
    ox_val q = ox_ew2(N, ISA_DIV, &xf, &s);
    q = ox_ew1(N, ISA_ROUND, &q);
    if (zp) {
        ox_val z = along(N, zp, x);
        z = ox_to_dtype(N, &z, d);
        q = ox_ew2(N, ISA_ADD, &q, &z);
    }
    ox_val lo = ox_fscalar(N, d, lo_v), hi = ox_fscalar(N, d, hi_v);
    q = ox_ew2(N, ISA_MAX, &q, &lo);
    q = ox_ew2(N, ISA_MIN, &q, &hi);
    N->out[0] = ox_to_dtype(N, &q, out);
    N->out[0].store = store;
}


/* ---- Attention (opset 23) -------------------------------------------------------------- */

static ox_val dim_of(ox_node *N, const ox_val *x, int k)
{
    if (x->rank > k && x->dims[k] >= 0)
        return ox_scalar(N, TFVM_I64, 0, x->dims[k]);
    ox_val sh = ox_op1(N, ISA_SHAPE, 0, x), ki = ox_scalar(N, TFVM_I64, 0, k);
    return ox_op2(N, ISA_GATHER, 0, &sh, &ki);
}

/* shape(x)[a:b] followed by the constants tail[0..nt) */
static ox_val shape_with(ox_node *N, const ox_val *x, int64_t a, int64_t b, int nt, const int64_t *tail)
{
    ox_val sh = ox_op1(N, ISA_SHAPE, 0, x);
    ox_val va = ox_i64s(N, 1, &a), vb = ox_i64s(N, 1, &b);
    ox_val head = ox_op3(N, ISA_SLICE, 0, &sh, &va, &vb);
    if (!nt)
        return head;
    ox_val t = ox_i64s(N, nt, tail);
    return ox_op2(N, ISA_CONCAT, 0, &head, &t);
}

/* [B, S, H*D] -> [B, H, S, D] */
static ox_val split_heads(ox_node *N, const ox_val *x, int64_t heads)
{
    int64_t tail[2] = {heads, -1}, perm[4] = {0, 2, 1, 3};
    ox_val s = shape_with(N, x, 0, 2, 2, tail);
    ox_val y = ox_op2(N, ISA_RESHAPE, 0, x, &s);
    ox_val pv = ox_i64s(N, 4, perm);
    return ox_op2(N, ISA_TRANSPOSE, 0, &y, &pv);
}

static void op_Attention(ox_node *N)
{
    ox_val *q = ox_need(N, 0), *k = ox_need(N, 1), *v = ox_need(N, 2);
    ox_val *mask = ox_opt_in(N, 3), *pk = ox_opt_in(N, 4), *pv = ox_opt_in(N, 5), *nonpad = ox_opt_in(N, 6);
    int r = ox_need_rank(N, q);
    uint8_t d = q->dtype;
    if (r != 3 && r != 4)
        ox_fail(N, TFVM_ERR_FORMAT, "Q of rank %d", r);
    int64_t qh = ox_attr_i(N, "q_num_heads", 0), kvh = ox_attr_i(N, "kv_num_heads", 0);
    ox_val Q = *q, K = *k, V = *v;
    if (r == 3) {
        if (qh < 1 || kvh < 1)
            ox_fail(N, TFVM_ERR_FORMAT, "3-d inputs need q_num_heads and kv_num_heads");
        Q = split_heads(N, q, qh);
        K = split_heads(N, k, kvh);
        V = split_heads(N, v, kvh);
    } else {
        qh = q->dims[1];
        kvh = k->dims[1];
    }
    /* scale: sqrt of it on each side, as the reference rounds */
    const Onnx__AttributeProto *sa = ox_attr(N, "scale");
    ox_val sq;
    if (sa && sa->has_f) {
        sq = ox_fscalar(N, d, sqrt((double)sa->f));
    } else {
        ox_val hd = dim_of(N, &Q, 3);
        if (r == 3 && q->rank == 3 && q->dims[2] >= 0)
            hd = ox_scalar(N, TFVM_I64, 0, q->dims[2] / qh);
        ox_val hf = ox_to_dtype(N, &hd, d);
        ox_val rs = ox_ew1(N, ISA_SQRT, &hf), one = ox_fscalar(N, d, 1);
        rs = ox_ew2(N, ISA_DIV, &one, &rs);
        sq = ox_ew1(N, ISA_SQRT, &rs);
    }
    ox_val PK = K, PV = V;
    if (pk)
        PK = ox_op2(N, ISA_CONCAT, 2, pk, &K);
    if (pv)
        PV = ox_op2(N, ISA_CONCAT, 2, pv, &V);
    ox_val sk = dim_of(N, &PK, 2), sqn = dim_of(N, &Q, 2);
    ox_val zero = ox_fscalar(N, d, 0), ninf = ox_fscalar(N, d, -INFINITY);
    ox_val bias = {0};
    bool have_bias = false;
    if (mask) {
        ox_val m = *mask;
        int mr = ox_need_rank(N, mask);
        /* a mask shorter than the keys (past included) is padded: masked out */
        ox_val ml = dim_of(N, mask, mr - 1);
        ox_val pw = ox_ew2(N, ISA_SUB, &sk, &ml);
        int64_t one = 1;
        ox_val v1 = ox_i64s(N, 1, &one);
        ox_val pwv = ox_op2(N, ISA_RESHAPE, 0, &pw, &v1);
        ox_val zs = ox_i64s(N, 2 * mr - 1, (const int64_t[16]){0});
        ox_val pads = ox_op2(N, ISA_CONCAT, 0, &zs, &pwv);
        ox_val pval = m.dtype == TFVM_BOOL ? ox_scalar(N, TFVM_BOOL, 0, 0) : ninf;
        m = ox_op3(N, ISA_PADV, 0, &m, &pads, &pval);
        if (m.dtype == TFVM_BOOL)
            m = ox_op3(N, ISA_SELECT, 0, &m, &zero, &ninf);
        bias = m;
        have_bias = true;
    }
    if (ox_attr_i(N, "is_causal", 0)) {
        /* -inf where key j > query i + past */
        ox_val past = pk ? dim_of(N, pk, 2) : ox_scalar(N, TFVM_I64, 0, 0);
        ox_val z = ox_scalar(N, TFVM_I64, 0, 0), o = ox_scalar(N, TFVM_I64, 0, 1);
        ox_val rows = ox_op3(N, ISA_RANGE, 0, &z, &sqn, &o);
        ox_val cols = ox_op3(N, ISA_RANGE, 0, &z, &sk, &o);
        int64_t ax = 1;
        ox_val av = ox_i64s(N, 1, &ax);
        rows = ox_op2(N, ISA_UNSQUEEZE, 0, &rows, &av);
        rows = ox_ew2(N, ISA_ADD, &rows, &past);
        ox_val c = ox_ew2(N, ISA_GREATER, &cols, &rows);
        ox_val cb = ox_op3(N, ISA_SELECT, 0, &c, &ninf, &zero);
        bias = have_bias ? ox_ew2(N, ISA_ADD, &bias, &cb) : cb;
        have_bias = true;
    }
    if (nonpad) {
        ox_val z = ox_scalar(N, TFVM_I64, 0, 0), o = ox_scalar(N, TFVM_I64, 0, 1);
        ox_val cols = ox_op3(N, ISA_RANGE, 0, &z, &sk, &o);
        int64_t s4[4] = {-1, 1, 1, 1};
        ox_val np = ox_to_dtype(N, nonpad, TFVM_I64);
        np = reshape_to(N, &np, 4, s4);
        ox_val c = ox_ew2(N, ISA_LESS, &cols, &np);
        ox_val pb = ox_op3(N, ISA_SELECT, 0, &c, &zero, &ninf);
        bias = have_bias ? ox_ew2(N, ISA_ADD, &bias, &pb) : pb;
        have_bias = true;
    }
    ox_val Kr = PK, Vr = PV;
    if (qh > 0 && kvh > 0 && qh != kvh) {
        /* grouped queries: each key/value head repeated q/kv times, interleaved */
        if (qh % kvh)
            ox_fail(N, TFVM_ERR_FORMAT, "%lld query heads for %lld key heads", (long long)qh, (long long)kvh);
        int64_t reps[5] = {1, 1, qh / kvh, 1, 1}, ax = 2, tail[1] = {qh};
        ox_val av = ox_i64s(N, 1, &ax), rv = ox_i64s(N, 5, reps);
        ox_val *src[2] = {&PK, &PV};
        ox_val *dst[2] = {&Kr, &Vr};
        for (int i = 0; i < 2; i++) {
            ox_val t = ox_op2(N, ISA_UNSQUEEZE, 0, src[i], &av);
            t = ox_op2(N, ISA_TILE, 0, &t, &rv);
            ox_val s0 = shape_with(N, src[i], 0, 1, 1, tail);
            ox_val s1 = shape_with(N, src[i], 2, 4, 0, NULL);
            ox_val sh = ox_op2(N, ISA_CONCAT, 0, &s0, &s1);
            *dst[i] = ox_op2(N, ISA_RESHAPE, 0, &t, &sh);
        }
    }
    ox_val qs = ox_ew2(N, ISA_MUL, &Q, &sq), ks = ox_ew2(N, ISA_MUL, &Kr, &sq);
    ox_val qk = ox_op2(N, ISA_MATMUL, ISA_OPT_TRANS_B, &qs, &ks);
    const Onnx__AttributeProto *sc = ox_attr(N, "softcap");
    if (sc && sc->has_f && sc->f > 0) {
        ox_val cap = ox_fscalar(N, d, sc->f);
        qk = ox_ew2(N, ISA_DIV, &qk, &cap);
        qk = ox_ew1(N, ISA_TANH, &qk);
        qk = ox_ew2(N, ISA_MUL, &qk, &cap);
    }
    ox_val qkb = have_bias ? ox_ew2(N, ISA_ADD, &qk, &bias) : qk;
    ox_val sm = ox_op1(N, ISA_SOFTMAX, (uint32_t)-1, &qkb);
    ox_val y = ox_op2(N, ISA_MATMUL, 0, &sm, &Vr);
    if (r == 3) {
        int64_t perm[4] = {0, 2, 1, 3}, tail[1] = {-1};
        ox_val pvv = ox_i64s(N, 4, perm);
        y = ox_op2(N, ISA_TRANSPOSE, 0, &y, &pvv);
        ox_val s = shape_with(N, &y, 0, 2, 1, tail);
        y = ox_op2(N, ISA_RESHAPE, 0, &y, &s);
    }
    int64_t mode = ox_attr_i(N, "qk_matmul_output_mode", 0);
    ox_val outs[4] = {y, PK, PV, mode == 2 ? qkb : mode == 3 ? sm : qk};
    for (uint32_t i = 0; i < N->n_out && i < 4; i++)
        N->out[i] = outs[i];
}

/* ---- RotaryEmbedding (opset 23) ---------------------------------------------------------- */

static ox_val slice_last(ox_node *N, const ox_val *x, int64_t start, int64_t end, int64_t step)
{
    int64_t ax = -1;
    ox_val vs = ox_i64s(N, 1, &start), ve = ox_i64s(N, 1, &end), va = ox_i64s(N, 1, &ax), vp = ox_i64s(N, 1, &step);
    const ox_val *in[5] = {x, &vs, &ve, &va, &vp};
    return ox_op(N, ISA_STRIDED_SLICE, 0, 5, in);
}

static void op_RotaryEmbedding(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *cosc = ox_need(N, 1), *sinc = ox_need(N, 2), *pos = ox_opt_in(N, 3);
    int r = ox_need_rank(N, x);
    int64_t nh = ox_attr_i(N, "num_heads", 0), perm[4] = {0, 2, 1, 3};
    ox_val pv = ox_i64s(N, 4, perm), X;
    int64_t hs;
    if (r == 4) {
        X = ox_op2(N, ISA_TRANSPOSE, 0, x, &pv);
        hs = x->dims[3];
    } else if (r == 3) {
        if (nh < 1 || x->dims[2] < 0)
            ox_unsupported(N, "a 3-d input without num_heads or of unknown hidden size");
        int64_t tail[2] = {nh, -1};
        ox_val shp = shape_with(N, x, 0, 2, 2, tail);
        X = ox_op2(N, ISA_RESHAPE, 0, x, &shp);
        hs = x->dims[2] / nh;
    } else {
        ox_fail(N, TFVM_ERR_FORMAT, "input of rank %d", r);
    }
    if (hs < 0)
        ox_unsupported(N, "an input of unknown head size");
    int64_t rd = ox_attr_i(N, "rotary_embedding_dim", 0);
    if (rd <= 0)
        rd = hs;
    int64_t half = rd / 2, two = 2;
    ox_val xr = rd < hs ? slice_last(N, &X, 0, rd, 1) : X;
    ox_val co = *cosc, si = *sinc;
    if (pos) {
        co = ox_op2(N, ISA_GATHER, 0, cosc, pos);
        si = ox_op2(N, ISA_GATHER, 0, sinc, pos);
    }
    ox_val a2 = ox_i64s(N, 1, &two);
    co = ox_op2(N, ISA_UNSQUEEZE, 0, &co, &a2);
    si = ox_op2(N, ISA_UNSQUEEZE, 0, &si, &a2);
    bool inter = ox_attr_i(N, "interleaved", 0) != 0;
    ox_val x1 = inter ? slice_last(N, &xr, 0, INT64_MAX, 2) : slice_last(N, &xr, 0, half, 1);
    ox_val x2 = inter ? slice_last(N, &xr, 1, INT64_MAX, 2) : slice_last(N, &xr, half, rd, 1);
    ox_val c1 = ox_ew2(N, ISA_MUL, &co, &x1), s2 = ox_ew2(N, ISA_MUL, &si, &x2);
    ox_val s1 = ox_ew2(N, ISA_MUL, &si, &x1), c2 = ox_ew2(N, ISA_MUL, &co, &x2);
    ox_val re = ox_ew2(N, ISA_SUB, &c1, &s2), im = ox_ew2(N, ISA_ADD, &s1, &c2);
    ox_val rot;
    if (inter) {
        int64_t four = 4;
        ox_val a4 = ox_i64s(N, 1, &four);
        ox_val re5 = ox_op2(N, ISA_UNSQUEEZE, 0, &re, &a4), im5 = ox_op2(N, ISA_UNSQUEEZE, 0, &im, &a4);
        rot = ox_op2(N, ISA_CONCAT, 4, &re5, &im5);
        ox_val shp = ox_op1(N, ISA_SHAPE, 0, &xr);
        rot = ox_op2(N, ISA_RESHAPE, 0, &rot, &shp);
    } else {
        rot = ox_op2(N, ISA_CONCAT, 3, &re, &im);
    }
    if (rd < hs) {
        ox_val xn = slice_last(N, &X, rd, INT64_MAX, 1);
        rot = ox_op2(N, ISA_CONCAT, 3, &rot, &xn);
    }
    if (r == 4) {
        N->out[0] = ox_op2(N, ISA_TRANSPOSE, 0, &rot, &pv);
    } else {
        ox_val shp = ox_op1(N, ISA_SHAPE, 0, x);
        N->out[0] = ox_op2(N, ISA_RESHAPE, 0, &rot, &shp);
    }
}

/* ---- CenterCropPad (opset 18) --------------------------------------------------------------- */

static void op_CenterCropPad(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *shp = ox_need(N, 1);
    int r = ox_need_rank(N, x);
    int64_t ax[TFVM_MAX_RANK];
    int na = ox_attr_ints(N, "axes", ax, TFVM_MAX_RANK);
    if (na < 0)
        for (na = 0; na < r; na++)
            ax[na] = na;
    ox_val axv = ox_i64s(N, na, ax);
    ox_val t = ox_as_i64_vec(N, shp);
    ox_val xs = ox_op1(N, ISA_SHAPE, 0, x);
    ox_val dm = ox_op2(N, ISA_GATHER, 0, &xs, &axv);
    ox_val two = ox_scalar(N, TFVM_I64, 0, 2), zero = ox_scalar(N, TFVM_I64, 0, 0);
    ox_val big = ox_scalar(N, TFVM_I64, 0, INT64_MAX);
    /* crop: [(dim - t) // 2, + t) where t < dim */
    ox_val crop = ox_ew2(N, ISA_LESS, &t, &dm);
    ox_val dd = ox_ew2(N, ISA_SUB, &dm, &t);
    ox_val st = ox_ew2(N, ISA_FLOOR_DIV, &dd, &two);
    st = ox_op3(N, ISA_SELECT, 0, &crop, &st, &zero);
    ox_val en = ox_ew2(N, ISA_ADD, &st, &t);
    en = ox_op3(N, ISA_SELECT, 0, &crop, &en, &big);
    ox_val steps = ox_empty_vec(N, TFVM_I64);
    const ox_val *in[5] = {x, &st, &en, &axv, &steps};
    ox_val y = ox_op(N, ISA_STRIDED_SLICE, 0, 5, in);
    /* pad: (t - dim) // 2 before, the rest after, where t > dim */
    ox_val pad = ox_ew2(N, ISA_GREATER, &t, &dm);
    ox_val pd = ox_ew2(N, ISA_SUB, &t, &dm);
    ox_val pb = ox_ew2(N, ISA_FLOOR_DIV, &pd, &two);
    ox_val pe = ox_ew2(N, ISA_SUB, &pd, &pb);
    pb = ox_op3(N, ISA_SELECT, 0, &pad, &pb, &zero);
    pe = ox_op3(N, ISA_SELECT, 0, &pad, &pe, &zero);
    pb = ox_spread_axes(N, &pb, &axv, r, TFVM_I64);
    pe = ox_spread_axes(N, &pe, &axv, r, TFVM_I64);
    ox_val pads = ox_op2(N, ISA_CONCAT, 0, &pb, &pe);
    ox_val v0 = ox_scalar(N, x->dtype, 0, 0);
    N->out[0] = ox_op3(N, ISA_PADV, 0, &y, &pads, &v0);
}

/* ---- CumProd, integer and dynamic quantization ---------------------------------------------- */

/* a running product as exp(running sum of log|x|), its sign from the
 * running count of negative factors (f64 inside: integers stay exact
 * while their products fit a double) */
static void op_CumProd(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val ax = ox_as_i64_scalar(N, ox_need(N, 1));
    uint32_t opts = (ox_attr_i(N, "exclusive", 0) ? ISA_OPT_EXCLUSIVE : 0) | (ox_attr_i(N, "reverse", 0) ? ISA_OPT_REVERSE : 0);
    ox_val xf = ox_to_dtype(N, x, TFVM_F64);
    ox_val a = ox_ew1(N, ISA_ABS, &xf);
    a = ox_ew1(N, ISA_LOG, &a);
    a = ox_op2(N, ISA_CUMSUM, opts, &a, &ax);
    a = ox_ew1(N, ISA_EXP, &a);
    ox_val z = ox_fscalar(N, TFVM_F64, 0), two = ox_fscalar(N, TFVM_F64, 2), one = ox_fscalar(N, TFVM_F64, 1);
    ox_val neg = ox_ew2(N, ISA_LESS, &xf, &z);
    ox_val nf = ox_to_dtype(N, &neg, TFVM_F64);
    nf = ox_op2(N, ISA_CUMSUM, opts, &nf, &ax);
    nf = ox_ew2(N, ISA_FLOOR_MOD, &nf, &two);
    /* sign = 1 - 2 * (negatives mod 2) */
    nf = ox_ew2(N, ISA_MUL, &nf, &two);
    ox_val sg = ox_ew2(N, ISA_SUB, &one, &nf);
    ox_val y = ox_ew2(N, ISA_MUL, &a, &sg);
    if (x->dtype != TFVM_F64 && x->dtype != TFVM_F32)
        y = ox_ew1(N, ISA_ROUND, &y);
    N->out[0] = ox_to_dtype(N, &y, x->dtype);
}

/* (q - zero point) as i32 */
static ox_val centered(ox_node *N, const ox_val *q, const ox_val *zp)
{
    ox_val a = ox_to_dtype(N, q, TFVM_I32);
    if (!zp)
        return a;
    ox_val z = ox_to_dtype(N, zp, TFVM_I32);
    return ox_ew2(N, ISA_SUB, &a, &z);
}

static void op_MatMulInteger(ox_node *N)
{
    ox_val *a = ox_need(N, 0), *b = ox_need(N, 1);
    ox_val ac = centered(N, a, ox_opt_in(N, 2)), bc = centered(N, b, ox_opt_in(N, 3));
    N->out[0] = ox_op2(N, ISA_MATMUL, 0, &ac, &bc);
}

/* round(v) + zp saturated to the zero point's 8-bit dtype */
static ox_val requantize(ox_node *N, const ox_val *v, const ox_val *zp, uint8_t out)
{
    uint8_t d = v->dtype;
    ox_val q = ox_ew1(N, ISA_ROUND, v);
    if (zp) {
        ox_val z = ox_to_dtype(N, zp, d);
        q = ox_ew2(N, ISA_ADD, &q, &z);
    }
    ox_val lo = ox_fscalar(N, d, out == TFVM_U8 ? 0 : -128), hi = ox_fscalar(N, d, out == TFVM_U8 ? 255 : 127);
    q = ox_ew2(N, ISA_MAX, &q, &lo);
    q = ox_ew2(N, ISA_MIN, &q, &hi);
    return ox_to_dtype(N, &q, out);
}

static void op_QLinearMatMul(ox_node *N)
{
    ox_val *a = ox_need(N, 0), *as = ox_need(N, 1), *b = ox_need(N, 3), *bs = ox_need(N, 4), *ys = ox_need(N, 6);
    ox_val *azp = ox_opt_in(N, 2), *bzp = ox_opt_in(N, 5), *yzp = ox_opt_in(N, 7);
    uint8_t f = as->dtype, out = yzp ? yzp->dtype : a->dtype;
    ox_val ac = centered(N, a, azp), bc = centered(N, b, bzp);
    ox_val c = ox_op2(N, ISA_MATMUL, 0, &ac, &bc);
    ox_val cf = ox_to_dtype(N, &c, f);
    ox_val sc = ox_ew2(N, ISA_MUL, as, bs);
    sc = ox_ew2(N, ISA_DIV, &sc, ys);
    cf = ox_ew2(N, ISA_MUL, &cf, &sc);
    N->out[0] = requantize(N, &cf, yzp, out);
}

static void op_DynamicQuantizeLinear(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    uint8_t d = x->dtype;
    ox_val all = ox_i64s(N, 0, NULL), z = ox_fscalar(N, d, 0), q = ox_fscalar(N, d, 255);
    ox_val mx = ox_op2(N, ISA_REDUCE_MAX, 0, x, &all), mn = ox_op2(N, ISA_REDUCE_MIN, 0, x, &all);
    mx = ox_ew2(N, ISA_MAX, &mx, &z);
    mn = ox_ew2(N, ISA_MIN, &mn, &z);
    ox_val rg = ox_ew2(N, ISA_SUB, &mx, &mn);
    ox_val same = ox_ew2(N, ISA_EQUAL, &mx, &mn), one = ox_fscalar(N, d, 1);
    rg = ox_op3(N, ISA_SELECT, 0, &same, &one, &rg);
    ox_val scale = ox_ew2(N, ISA_DIV, &rg, &q);
    ox_val zp = ox_ew2(N, ISA_DIV, &mn, &scale);
    zp = ox_ew2(N, ISA_SUB, &z, &zp);
    zp = ox_ew2(N, ISA_MAX, &zp, &z);
    zp = ox_ew2(N, ISA_MIN, &zp, &q);
    zp = ox_ew1(N, ISA_ROUND, &zp);
    ox_val v = ox_ew2(N, ISA_DIV, x, &scale);
    N->out[0] = requantize(N, &v, &zp, TFVM_U8);
    if (N->n_out > 1)
        N->out[1] = scale;
    if (N->n_out > 2)
        N->out[2] = ox_to_dtype(N, &zp, TFVM_U8);
}

/* ---- ConvTranspose ------------------------------------------------------------------------- */

/* As a CONV2D: x with s-1 zeros between elements (UNSQUEEZE, PADV,
 * RESHAPE), padded by K'-1-pads (K' the dilated kernel; negative pads
 * crop), convolved with w's channels swapped per group and its window
 * flipped. */
static void op_ConvTranspose(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *w = ox_need(N, 1), *bias = ox_opt_in(N, 2);
    int r = ox_need_rank(N, x);
    int nsp = r - 2;
    if (nsp == 3) {
        ox_convtranspose3d(N);
        return;
    }
    if (nsp < 1 || nsp > 2)
        ox_unsupported(N, "%d spatial dims (1 to 3 are)", nsp);
    uint8_t dt = x->dtype;
    int64_t k[2] = {1, 1}, s[2] = {1, 1}, dl[2] = {1, 1}, pb[2] = {0, 0}, pe[2] = {0, 0}, op[2] = {0, 0};
    int64_t buf[8], in[2] = {1, 1};
    int n = ox_attr_ints(N, "kernel_shape", buf, 8);
    for (int i = 0; i < nsp; i++) {
        k[2 - nsp + i] = n == nsp ? buf[i] : w->rank == r ? w->dims[2 + i] : -1;
        in[2 - nsp + i] = x->dims[2 + i];
    }
    if (k[0] < 1 || k[1] < 1)
        ox_unsupported(N, "a weight of unknown shape without kernel_shape");
    if ((n = ox_attr_ints(N, "strides", buf, 8)) == nsp)
        for (int i = 0; i < nsp; i++)
            s[2 - nsp + i] = buf[i];
    if ((n = ox_attr_ints(N, "dilations", buf, 8)) == nsp)
        for (int i = 0; i < nsp; i++)
            dl[2 - nsp + i] = buf[i];
    if ((n = ox_attr_ints(N, "output_padding", buf, 8)) >= nsp)
        for (int i = 0; i < nsp; i++)
            op[2 - nsp + i] = buf[i];
    int np = ox_attr_ints(N, "pads", buf, 8);
    if (np == 2 * nsp)
        for (int i = 0; i < nsp; i++) {
            pb[2 - nsp + i] = buf[i];
            pe[2 - nsp + i] = buf[nsp + i];
        }
    for (int j = 0; j < 2; j++)
        if (k[j] > (1 << 20) || s[j] < 1 || s[j] > (1 << 20) || dl[j] < 1 || dl[j] > (1 << 20) || op[j] < 0 ||
            op[j] > (1 << 20) || pb[j] < -(1 << 30) || pb[j] > (1 << 30) || pe[j] < -(1 << 30) || pe[j] > (1 << 30))
            ox_fail(N, TFVM_ERR_FORMAT, "kernel, strides, dilations, pads or output_padding out of range");
    char ab[16];
    const char *ap = ox_attr_s(N, "auto_pad", "NOTSET", ab, sizeof ab);
    bool same = strncmp(ap, "SAME", 4) == 0;
    int64_t os[8];
    int nos = ox_attr_ints(N, "output_shape", os, 8);
    if ((np != 2 * nsp && same) || nos >= nsp) {
        for (int i = 0; i < nsp; i++) {
            int j = 2 - nsp + i;
            if (in[j] < 0)
                ox_unsupported(N, "output_shape or auto_pad on an input of unknown spatial size");
            int64_t want = nos >= nsp ? os[nos - nsp + i] : in[j] * s[j];
            if (want < 0 || want > ((int64_t)1 << 40))
                ox_fail(N, TFVM_ERR_FORMAT, "output_shape %lld out of range", (long long)want);
            int64_t natural = s[j] * (in[j] - 1) + op[j] + (k[j] - 1) * dl[j] + 1;
            if (np != 2 * nsp && same) {
                /* the padding that gives that size, the odd one after (SAME_UPPER) or before */
                int64_t total = natural - want;
                bool upper = strcmp(ap, "SAME_UPPER") == 0;
                pb[j] = upper ? total / 2 : total - total / 2;
                pe[j] = total - pb[j];
            } else {
                /* output_shape with explicit (or no) pads: the difference comes at the end */
                op[j] += want - (natural - pb[j] - pe[j]);
            }
        }
    }
    int64_t g = ox_attr_i(N, "group", 1);
    ox_val xx = *x, ww = *w;
    if (nsp == 1) {
        int64_t two = 2;
        ox_val a2 = ox_i64s(N, 1, &two);
        xx = ox_op2(N, ISA_UNSQUEEZE, 0, x, &a2);
        ww = ox_op2(N, ISA_UNSQUEEZE, 0, w, &a2);
    }
    /* zeros between: [N, C, H, W] -> [N, C, H, 1, W, 1] -> padded to s -> [N, C, H*s, W*s] */
    if (s[0] > 1 || s[1] > 1) {
        int64_t ax[2] = {3, 5}, pads[12] = {0};
        pads[6 + 3] = s[0] - 1;
        pads[6 + 5] = s[1] - 1;
        ox_val av = ox_i64s(N, 2, ax), pv = ox_i64s(N, 12, pads), z = ox_scalar(N, dt, 0, 0);
        ox_val t = ox_op2(N, ISA_UNSQUEEZE, 0, &xx, &av);
        t = ox_op3(N, ISA_PADV, 0, &t, &pv, &z);
        ox_val sh = ox_op1(N, ISA_SHAPE, 0, &xx);
        int64_t a0 = 0, a2 = 2, a4 = 4;
        ox_val v0 = ox_i64s(N, 1, &a0), v2 = ox_i64s(N, 1, &a2), v4 = ox_i64s(N, 1, &a4);
        ox_val nc = ox_op3(N, ISA_SLICE, 0, &sh, &v0, &v2);
        ox_val hw = ox_op3(N, ISA_SLICE, 0, &sh, &v2, &v4);
        ox_val sv = ox_i64s(N, 2, s);
        hw = ox_ew2(N, ISA_MUL, &hw, &sv);
        ox_val ns = ox_op2(N, ISA_CONCAT, 0, &nc, &hw);
        xx = ox_op2(N, ISA_RESHAPE, 0, &t, &ns);
    }
    /* pads of the equivalent convolution; the trailing s-1 zeros come off the end */
    int64_t cp[8] = {0};
    for (int j = 0; j < 2; j++) {
        int64_t kd = (k[j] - 1) * dl[j] + 1;
        cp[2 + j] = kd - 1 - pb[j];
        cp[6 + j] = kd - 1 - pe[j] + op[j] - (s[j] - 1);
    }
    ox_val cpv = ox_i64s(N, 8, cp), z = ox_scalar(N, dt, 0, 0);
    xx = ox_op3(N, ISA_PADV, 0, &xx, &cpv, &z);
    /* w [Cin, Cout/g, kh, kw] -> [g, Cin/g, Cout/g, kh, kw] -> [Cout, Cin/g, kh, kw], flipped */
    if (w->rank != r || w->dims[0] < 0 || w->dims[1] < 0)
        ox_unsupported(N, "a weight of unknown shape");
    int64_t cin = w->dims[0], coutg = w->dims[1];
    int64_t s5[5] = {g, cin / g, coutg, k[0], k[1]}, p5[5] = {0, 2, 1, 3, 4}, s4[4] = {g * coutg, cin / g, k[0], k[1]};
    ox_val t = reshape_to(N, &ww, 5, s5);
    ox_val pv = ox_i64s(N, 5, p5);
    t = ox_op2(N, ISA_TRANSPOSE, 0, &t, &pv);
    t = reshape_to(N, &t, 4, s4);
    int64_t st[2] = {-1, -1}, en[2] = {INT64_MIN, INT64_MIN}, fa[2] = {2, 3}, fs[2] = {-1, -1};
    ox_val vs = ox_i64s(N, 2, st), ve = ox_i64s(N, 2, en), va = ox_i64s(N, 2, fa), vp = ox_i64s(N, 2, fs);
    const ox_val *fin[5] = {&t, &vs, &ve, &va, &vp};
    ww = ox_op(N, ISA_STRIDED_SLICE, 0, 5, fin);
    int64_t p9[9] = {1, 1, 0, 0, 0, 0, dl[0], dl[1], g};
    ox_val p9v = ox_i64s(N, 9, p9);
    ox_val y = ox_op3(N, ISA_CONV2D, 0, &xx, &ww, &p9v);
    if (nsp == 1) {
        int64_t two = 2;
        ox_val a2 = ox_i64s(N, 1, &two);
        y = ox_op2(N, ISA_SQUEEZE, 0, &y, &a2);
    }
    if (bias) {
        ox_val b = ox_per_channel(N, bias, r);
        y = ox_ew2(N, ISA_ADD, &y, &b);
    }
    N->out[0] = y;
}

/* ---- Window functions (opset 17) -------------------------------------------------------------- */

typedef enum { W_HANN, W_HAMMING, W_BLACKMAN } window_kind;

/* computed in f64 over n = 0 .. size-1, with N = size (periodic) or size - 1 */
static void window(ox_node *N, window_kind kind)
{
    ox_val size = ox_as_i64_scalar(N, ox_need(N, 0));
    uint8_t out = TFVM_F32;
    const Onnx__AttributeProto *od = ox_attr(N, "output_datatype");
    if (od && od->has_i && !ox_dtype((int32_t)od->i, &out))
        ox_unsupported(N, "output_datatype %s", ox_onnx_type_name((int32_t)od->i));
    ox_val z = ox_scalar(N, TFVM_I64, 0, 0), o = ox_scalar(N, TFVM_I64, 0, 1);
    ox_val n = ox_op3(N, ISA_RANGE, 0, &z, &size, &o);
    ox_val nf = ox_to_dtype(N, &n, TFVM_F64), len = size;
    if (!ox_attr_i(N, "periodic", 1))
        len = ox_ew2(N, ISA_SUB, &size, &o);
    ox_val lf = ox_to_dtype(N, &len, TFVM_F64);
    ox_val ph = ox_ew2(N, ISA_DIV, &nf, &lf); /* n / N */
    ox_val tp = ox_fscalar(N, TFVM_F64, 2 * M_PI);
    ox_val a = ox_ew2(N, ISA_MUL, &ph, &tp);
    ox_val ca = ox_ew1(N, ISA_COS, &a), y;
    if (kind == W_HANN || kind == W_HAMMING) {
        double al = kind == W_HANN ? 0.5 : 25.0 / 46.0;
        ox_val alv = ox_fscalar(N, TFVM_F64, al), bev = ox_fscalar(N, TFVM_F64, 1 - al);
        ox_val t = ox_ew2(N, ISA_MUL, &ca, &bev);
        y = ox_ew2(N, ISA_SUB, &alv, &t);
    } else {
        ox_val two = ox_fscalar(N, TFVM_F64, 2), c1 = ox_fscalar(N, TFVM_F64, 0.42), c2 = ox_fscalar(N, TFVM_F64, 0.5),
               c3 = ox_fscalar(N, TFVM_F64, 0.08);
        ox_val a2 = ox_ew2(N, ISA_MUL, &a, &two);
        ox_val cb = ox_ew1(N, ISA_COS, &a2);
        ox_val t1 = ox_ew2(N, ISA_MUL, &ca, &c2), t2 = ox_ew2(N, ISA_MUL, &cb, &c3);
        y = ox_ew2(N, ISA_SUB, &c1, &t1);
        y = ox_ew2(N, ISA_ADD, &y, &t2);
    }
    N->out[0] = ox_to_dtype(N, &y, out);
}

static void op_HannWindow(ox_node *N) { window(N, W_HANN); }
static void op_HammingWindow(ox_node *N) { window(N, W_HAMMING); }
static void op_BlackmanWindow(ox_node *N) { window(N, W_BLACKMAN); }

/* ---- ReverseSequence (opset 10) ------------------------------------------------------------------- */

/* GATHER_ELEMENTS along the time axis with index len-1-t below each
 * sequence's length and t above it */
static void op_ReverseSequence(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *lens = ox_need(N, 1);
    int r = ox_need_rank(N, x);
    int ta = ox_norm_axis(N, ox_attr_i(N, "time_axis", 0), r, false);
    int ba = ox_norm_axis(N, ox_attr_i(N, "batch_axis", 1), r, false);
    ox_val xs = ox_op1(N, ISA_SHAPE, 0, x);
    ox_val tai = ox_scalar(N, TFVM_I64, 0, ta), z = ox_scalar(N, TFVM_I64, 0, 0), o = ox_scalar(N, TFVM_I64, 0, 1);
    ox_val T = ox_op2(N, ISA_GATHER, 0, &xs, &tai);
    ox_val t = ox_op3(N, ISA_RANGE, 0, &z, &T, &o);
    /* t along the time axis, lens along the batch axis, both rank r */
    int64_t ts[TFVM_MAX_RANK], bs[TFVM_MAX_RANK];
    for (int k = 0; k < r; k++)
        ts[k] = bs[k] = 1;
    ts[ta] = -1;
    bs[ba] = -1;
    ox_val tt = reshape_to(N, &t, r, ts);
    ox_val l = ox_to_dtype(N, lens, TFVM_I64);
    l = reshape_to(N, &l, r, bs);
    ox_val lm1 = ox_ew2(N, ISA_SUB, &l, &o);
    ox_val rv = ox_ew2(N, ISA_SUB, &lm1, &tt);
    ox_val in = ox_ew2(N, ISA_LESS, &tt, &l);
    ox_val idx = ox_op3(N, ISA_SELECT, 0, &in, &rv, &tt);
    idx = ox_op2(N, ISA_EXPAND, 0, &idx, &xs);
    N->out[0] = ox_op2(N, ISA_GATHER_ELEMENTS, (uint32_t)ta, x, &idx);
}

/* ---- GatherND, ScatterND ------------------------------------------------------------------- */

/* index tuples [..., k] into data of known dims as row numbers of data
 * seen as [prod(dims[b:b+k]) per batch..., rest]: sum of (idx mod dim) * stride
 * (plus the batch element's offset when b > 0) */
static ox_val linear_index(ox_node *N, const ox_val *data, const ox_val *idx, int b, int k, int64_t *rows)
{
    int64_t strides[TFVM_MAX_RANK], dims[TFVM_MAX_RANK], st = 1;
    for (int j = k - 1; j >= 0; j--) {
        strides[j] = st;
        dims[j] = data->dims[b + j];
        st *= dims[j];
    }
    ox_val iv = ox_to_dtype(N, idx, TFVM_I64);
    ox_val dv = ox_i64s(N, k, dims), sv = ox_i64s(N, k, strides);
    iv = ox_ew2(N, ISA_FLOOR_MOD, &iv, &dv);
    iv = ox_ew2(N, ISA_MUL, &iv, &sv);
    int64_t last = -1;
    ox_val lv = ox_i64s(N, 1, &last);
    ox_val lin = ox_op2(N, ISA_REDUCE_SUM, 0, &iv, &lv);
    int64_t nb = 1;
    for (int j = 0; j < b; j++)
        nb *= data->dims[j];
    if (b > 0) {
        /* the batch element's first row: its number (over the b batch dims) times st */
        ox_val z = ox_scalar(N, TFVM_I64, 0, 0), o = ox_scalar(N, TFVM_I64, 0, 1), nbv = ox_scalar(N, TFVM_I64, 0, nb);
        ox_val r = ox_op3(N, ISA_RANGE, 0, &z, &nbv, &o);
        int64_t shape[TFVM_MAX_RANK];
        int lr = idx->rank - 1;
        for (int j = 0; j < lr; j++)
            shape[j] = j < b ? data->dims[j] : 1;
        ox_val s = ox_i64s(N, lr, shape);
        r = ox_op2(N, ISA_RESHAPE, 0, &r, &s);
        ox_val stv = ox_scalar(N, TFVM_I64, 0, st);
        r = ox_ew2(N, ISA_MUL, &r, &stv);
        lin = ox_ew2(N, ISA_ADD, &lin, &r);
    }
    *rows = nb * st;
    return lin;
}

static int nd_setup(ox_node *N, const ox_val *data, const ox_val *idx, int b)
{
    int r = ox_need_rank(N, data);
    if (idx->rank < 1 || idx->dims[idx->rank - 1] < 1 || ox_count_of(data) < 0)
        ox_unsupported(N, "data or index tuples of unknown shape");
    int k = (int)idx->dims[idx->rank - 1];
    if (b < 0 || b + k > r || b >= idx->rank)
        ox_fail(N, TFVM_ERR_FORMAT, "index tuples of %d for rank %d (batch_dims %d)", k, r, b);
    return k;
}

static void op_GatherND(ox_node *N)
{
    ox_val *data = ox_need(N, 0), *idx = ox_need(N, 1);
    int b = (int)ox_attr_i(N, "batch_dims", 0);
    int k = nd_setup(N, data, idx, b), r = data->rank;
    int64_t rows;
    ox_val lin = linear_index(N, data, idx, b, k, &rows);
    int64_t shape[TFVM_MAX_RANK + 1];
    int n = 0;
    shape[n++] = rows;
    for (int j = b + k; j < r; j++)
        shape[n++] = data->dims[j];
    ox_val flat = reshape_to(N, data, n, shape);
    N->out[0] = ox_op2(N, ISA_GATHER, 0, &flat, &lin);
}

/* flat [rows, R] with row lin[i] set to (or, add, increased by) u[i]. Set:
 * SCATTER_ROWS, each update row copied once (of two updates of a row the
 * later stays, as in ONNX Runtime). Reduced: a one-hot [n, rows] of the
 * target rows, its transpose times the updates (every update against every
 * row: Swin's attention masks, nine ScatterNDs onto 56x56, had taken 20 ms
 * of its 175 that way before they were set rows). */
typedef enum { SC_NONE, SC_ADD, SC_MUL, SC_MAX, SC_MIN } scatter_red;

static ox_val scatter_rows(ox_node *N, const ox_val *flat, const ox_val *lin, const ox_val *u, const ox_val *rv,
                           scatter_red red)
{
    if (red == SC_NONE)
        return ox_op3(N, ISA_SCATTER_ROWS, 0, flat, lin, u);
    uint8_t d = flat->dtype;
    unsigned char onoff[16] = {0};
    size_t es = tfvm_dtype_size((tfvm_dtype)d);
    if (d == TFVM_F32) {
        float o = 1;
        memcpy(onoff + es, &o, es);
    } else if (d == TFVM_F64) {
        double o = 1;
        memcpy(onoff + es, &o, es);
    } else {
        onoff[es] = 1;
    }
    int64_t two = 2;
    ox_val oo = {0};
    oo.dtype = d;
    ox_unknown_shape(&oo, 1);
    oo.v = cc_const_new(N->C, N->b, (tfvm_dtype)d, 1, &two, onoff, 2 * es, false);
    ox_val oh = ox_op3(N, ISA_ONEHOT, (uint32_t)-1, lin, rv, &oo);
    if (red == SC_MUL || red == SC_MAX || red == SC_MIN) {
        /* every update against every row: [rows, n, R] of the update where
         * it hits and the reduction's identity elsewhere, reduced over n */
        int64_t p2[2] = {1, 0}, a2 = 2, a0 = 0, a1 = 1;
        ox_val pv = ox_i64s(N, 2, p2), v2 = ox_i64s(N, 1, &a2), v0 = ox_i64s(N, 1, &a0), v1 = ox_i64s(N, 1, &a1);
        ox_val zero = ox_scalar(N, d, 0, 0);
        ox_val ht = ox_op2(N, ISA_TRANSPOSE, 0, &oh, &pv);
        ht = ox_ew2(N, ISA_GREATER, &ht, &zero);
        ht = ox_op2(N, ISA_UNSQUEEZE, 0, &ht, &v2);
        ox_val u3 = ox_op2(N, ISA_UNSQUEEZE, 0, u, &v0);
        bool flt = d == TFVM_F32 || d == TFVM_F64;
        int64_t imax = d == TFVM_I32 ? INT32_MAX : d == TFVM_U8 ? 255 : d == TFVM_I8 ? 127 : INT64_MAX;
        int64_t imin = d == TFVM_I32 ? INT32_MIN : d == TFVM_U8 ? 0 : d == TFVM_I8 ? -128 : INT64_MIN;
        ox_val id = red == SC_MUL ? ox_scalar(N, d, 1, 1)
                    : red == SC_MAX ? (flt ? ox_fscalar(N, d, -INFINITY) : ox_scalar(N, d, 0, imin))
                                    : (flt ? ox_fscalar(N, d, INFINITY) : ox_scalar(N, d, 0, imax));
        ox_val cand = ox_op3(N, ISA_SELECT, 0, &ht, &u3, &id);
        isa_op rop = red == SC_MUL ? ISA_REDUCE_PROD : red == SC_MAX ? ISA_REDUCE_MAX : ISA_REDUCE_MIN;
        ox_val agg = ox_op2(N, rop, 0, &cand, &v1);
        return ox_ew2(N, red == SC_MUL ? ISA_MUL : red == SC_MAX ? ISA_MAX : ISA_MIN, flat, &agg);
    }
    ox_val sc = ox_op2(N, ISA_MATMUL, ISA_OPT_TRANS_A, &oh, u);
    if (red == SC_ADD)
        return ox_ew2(N, ISA_ADD, flat, &sc);
    int64_t z0 = 0, p2[2] = {1, 0};
    ox_val a0 = ox_i64s(N, 1, &z0), zero = ox_scalar(N, d, 0, 0), pv = ox_i64s(N, 2, p2);
    ox_val cnt = ox_op2(N, ISA_REDUCE_SUM, ISA_OPT_KEEPDIMS, &oh, &a0);
    cnt = ox_op2(N, ISA_TRANSPOSE, 0, &cnt, &pv);
    ox_val hit = ox_ew2(N, ISA_GREATER, &cnt, &zero);
    return ox_op3(N, ISA_SELECT, 0, &hit, &sc, flat);
}

static scatter_red scatter_reduction(ox_node *N, const ox_val *data)
{
    char rb[16];
    const char *red = ox_attr_s(N, "reduction", "none", rb, sizeof rb);
    if (data->dtype == TFVM_BOOL)
        ox_unsupported(N, "bool data");
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    for (int k = 0; k < 5; k++)
        if (strcmp(red, names[k]) == 0)
            return (scatter_red)k;
    ox_unsupported(N, "reduction '%s'", red);
}

/* [a, b] from two i64 scalars */
static ox_val pair_vec(ox_node *N, const ox_val *a, const ox_val *b)
{
    int64_t z = 0;
    ox_val zv = ox_i64s(N, 1, &z);
    ox_val va = ox_op2(N, ISA_UNSQUEEZE, 0, a, &zv), vb = ox_op2(N, ISA_UNSQUEEZE, 0, b, &zv);
    return ox_op2(N, ISA_CONCAT, 0, &va, &vb);
}

/* The run-time scatters' end: data (of run-time shape ds) as [rows, rest],
 * the updates as [-1, rest], row lin[i] of it set from update row i. One
 * update row without a reduction (a scripted loop's toks[step] = tok) is
 * STACK_PUT's row write, in place when the buffer is the loop's alone,
 * where the general form multiplies a one-hot matrix of every row. */
static void scatter_runtime_rows(ox_node *N, const ox_val *data, const ox_val *upd, const ox_val *lin, const ox_val *rows,
                                 const ox_val *rest, const ox_val *ds, scatter_red red, bool one_row)
{
    int64_t m1 = -1;
    ox_val m1v = ox_scalar(N, TFVM_I64, 0, -1), l = reshape_to(N, lin, 1, &m1);
    ox_val fs = pair_vec(N, rows, rest), us = pair_vec(N, &m1v, rest);
    ox_val flat = ox_op2(N, ISA_RESHAPE, 0, data, &fs), u = ox_op2(N, ISA_RESHAPE, 0, upd, &us);
    ox_val y;
    if (one_row && red == SC_NONE) {
        ox_val z = ox_scalar(N, TFVM_I64, 0, 0);
        ox_val at = ox_op2(N, ISA_GATHER, 0, &l, &z), row = ox_op2(N, ISA_GATHER, 0, &u, &z);
        y = ox_op3(N, ISA_STACK_PUT, 0, &flat, &at, &row);
    } else {
        y = scatter_rows(N, &flat, &l, &u, rows, red);
    }
    N->out[0] = ox_op2(N, ISA_RESHAPE, 0, &y, ds);
    memcpy(N->out[0].dims, data->dims, sizeof data->dims);
}

/* One index tuple naming one element (TorchScript's toks[step] = tok, the
 * index tuple as long as data's rank): data flattened (when it has more than
 * one dimension), that element set by one STACK_PUT (in place when the buffer
 * is the loop's alone) and the shape put back. The rows machinery below
 * took some twenty instructions a step of a scripted decoder for it. */
static void scatter_one_element(ox_node *N, const ox_val *data, const ox_val *upd, const ox_val *lin, const ox_val *ds)
{
    int64_t m1 = -1;
    const ox_val flat = data->rank == 1 ? *data : reshape_to(N, data, 1, &m1);
    const ox_val u = reshape_to(N, upd, 0, NULL);
    ox_val y = ox_op3(N, ISA_STACK_PUT, 0, &flat, lin, &u);
    N->out[0] = data->rank == 1 ? y : ox_op2(N, ISA_RESHAPE, 0, &y, ds);
    memcpy(N->out[0].dims, data->dims, sizeof data->dims);
}

/* ScatterND on data whose dims are known only at run time (a buffer
 * carried through a loop: TorchScript's `toks[step] = tok`), index tuples of
 * known length k: the rows of data as [prod(dims[:k]), prod(dims[k:])] from
 * its run-time shape, each tuple's row by Horner's rule. */
static void scatter_nd_runtime(ox_node *N, const ox_val *data, const ox_val *idx, const ox_val *upd, scatter_red red,
                               int k)
{
    const int r = data->rank;
    ox_val ds = ox_op1(N, ISA_SHAPE, 0, data), iv = ox_to_dtype(N, idx, TFVM_I64);
    ox_val lin = {0}, rows = {0};
    for (int j = 0; j < k; j++) {
        ox_val jv = ox_scalar(N, TFVM_I64, 0, j);
        ox_val dj = ox_op2(N, ISA_GATHER, 0, &ds, &jv);
        ox_val ij = ox_op2(N, ISA_GATHER, (uint32_t)-1, &iv, &jv);
        ij = ox_ew2(N, ISA_FLOOR_MOD, &ij, &dj); /* negative indices count back */
        if (j == 0) {
            lin = ij;
            rows = dj;
        } else {
            lin = ox_ew2(N, ISA_MUL, &lin, &dj);
            lin = ox_ew2(N, ISA_ADD, &lin, &ij);
            rows = ox_ew2(N, ISA_MUL, &rows, &dj);
        }
    }
    bool one_row = idx->rank >= 1;
    for (int j = 0; j + 1 < idx->rank; j++)
        one_row = one_row && idx->dims[j] == 1;
    if (one_row && k == r && red == SC_NONE) {
        scatter_one_element(N, data, upd, &lin, &ds);
        return;
    }
    int64_t kk = k, rr = r;
    ox_val kv = ox_i64s(N, 1, &kk), rv = ox_i64s(N, 1, &rr), none = ox_i64s(N, 0, NULL);
    ox_val tail = ox_op3(N, ISA_SLICE, 0, &ds, &kv, &rv);
    ox_val rest = ox_op2(N, ISA_REDUCE_PROD, 0, &tail, &none);
    scatter_runtime_rows(N, data, upd, &lin, &rows, &rest, &ds, red, one_row);
}

static void op_ScatterND(ox_node *N)
{
    ox_val *data = ox_need(N, 0), *idx = ox_need(N, 1), *upd = ox_need(N, 2);
    scatter_red add = scatter_reduction(N, data);
    if (ox_count_of(data) < 0 && ox_need_rank(N, data) > 0 && idx->rank >= 1 && idx->dims[idx->rank - 1] >= 1 &&
        idx->dims[idx->rank - 1] <= data->rank) {
        scatter_nd_runtime(N, data, idx, upd, add, (int)idx->dims[idx->rank - 1]);
        return;
    }
    int k = nd_setup(N, data, idx, 0), r = data->rank;
    int64_t rows, rest = 1;
    for (int j = k; j < r; j++)
        rest *= data->dims[j];
    ox_val lin = linear_index(N, data, idx, 0, k, &rows);
    int64_t m1 = -1, fs[2] = {rows, rest}, us[2] = {-1, rest};
    lin = reshape_to(N, &lin, 1, &m1);
    ox_val flat = reshape_to(N, data, 2, fs), u = reshape_to(N, upd, 2, us);
    ox_val rv = ox_scalar(N, TFVM_I64, 0, rows);
    ox_val y = scatter_rows(N, &flat, &lin, &u, &rv, add);
    N->out[0] = reshape_to(N, &y, r, data->dims);
}

/* i64 scalar: element j of the shape vector sh */
static ox_val shape_at(ox_node *N, const ox_val *sh, int j)
{
    ox_val jv = ox_scalar(N, TFVM_I64, 0, j);
    return ox_op2(N, ISA_GATHER, 0, sh, &jv);
}

/* ScatterElements on data or indices whose dims are known only at run time:
 * the static lowering below with strides, coordinates and rows from their
 * run-time shapes */
static void scatter_elements_runtime(ox_node *N, const ox_val *data, const ox_val *idx, const ox_val *upd,
                                     scatter_red red, int r, int axis)
{
    ox_val ds = ox_op1(N, ISA_SHAPE, 0, data), is = ox_op1(N, ISA_SHAPE, 0, idx);
    ox_val none = ox_i64s(N, 0, NULL), z = ox_scalar(N, TFVM_I64, 0, 0), o = ox_scalar(N, TFVM_I64, 0, 1);
    ox_val lin = {0};
    for (int j = 0; j < r; j++) {
        int64_t b = j + 1, e = r;
        ox_val bv = ox_i64s(N, 1, &b), ev = ox_i64s(N, 1, &e);
        ox_val tail = ox_op3(N, ISA_SLICE, 0, &ds, &bv, &ev);
        ox_val sj = ox_op2(N, ISA_REDUCE_PROD, 0, &tail, &none), c;
        if (j == axis) { /* the index, negative ones counting back */
            ox_val dj = shape_at(N, &ds, j);
            c = ox_to_dtype(N, idx, TFVM_I64);
            c = ox_ew2(N, ISA_FLOOR_MOD, &c, &dj);
        } else { /* the element's own coordinate along j */
            ox_val n = shape_at(N, &is, j);
            c = ox_op3(N, ISA_RANGE, 0, &z, &n, &o);
            int64_t shape[TFVM_MAX_RANK];
            for (int q = 0; q < r; q++)
                shape[q] = q == j ? -1 : 1;
            c = reshape_to(N, &c, r, shape);
        }
        c = ox_ew2(N, ISA_MUL, &c, &sj);
        lin = j == 0 ? c : ox_ew2(N, ISA_ADD, &lin, &c);
    }
    ox_val rows = ox_op2(N, ISA_REDUCE_PROD, 0, &ds, &none);
    scatter_runtime_rows(N, data, upd, &lin, &rows, &o, &ds, red, false);
}

/* every element of indices names a row of data (flattened to [count, 1]):
 * its own position with the axis coordinate replaced by the index */
static void op_ScatterElements(ox_node *N)
{
    ox_val *data = ox_need(N, 0), *idx = ox_need(N, 1), *upd = ox_need(N, 2);
    scatter_red add = scatter_reduction(N, data);
    int r = ox_need_rank(N, data);
    if (idx->rank >= 0 && idx->rank != r)
        ox_fail(N, TFVM_ERR_SHAPE, "indices of rank %d for data of rank %d", idx->rank, r);
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", 0), r, false);
    if (ox_count_of(data) < 0 || ox_count_of(idx) < 0) {
        scatter_elements_runtime(N, data, idx, upd, add, r, axis);
        return;
    }
    int64_t strides[TFVM_MAX_RANK], st = 1;
    for (int j = r - 1; j >= 0; j--) {
        strides[j] = st;
        st *= data->dims[j];
    }
    ox_val ix = ox_to_dtype(N, idx, TFVM_I64), dax = ox_scalar(N, TFVM_I64, 0, data->dims[axis]);
    ox_val sax = ox_scalar(N, TFVM_I64, 0, strides[axis]);
    ox_val lin = ox_ew2(N, ISA_FLOOR_MOD, &ix, &dax);
    lin = ox_ew2(N, ISA_MUL, &lin, &sax);
    ox_val z = ox_scalar(N, TFVM_I64, 0, 0), o = ox_scalar(N, TFVM_I64, 0, 1);
    for (int j = 0; j < r; j++) {
        if (j == axis)
            continue;
        ox_val n = ox_scalar(N, TFVM_I64, 0, idx->dims[j]), sj = ox_scalar(N, TFVM_I64, 0, strides[j]);
        ox_val c = ox_op3(N, ISA_RANGE, 0, &z, &n, &o);
        c = ox_ew2(N, ISA_MUL, &c, &sj);
        int64_t shape[TFVM_MAX_RANK];
        for (int q = 0; q < r; q++)
            shape[q] = q == j ? -1 : 1;
        c = reshape_to(N, &c, r, shape);
        lin = ox_ew2(N, ISA_ADD, &lin, &c);
    }
    int64_t m1 = -1, fs[2] = {st, 1}, us[2] = {-1, 1};
    lin = reshape_to(N, &lin, 1, &m1);
    ox_val flat = reshape_to(N, data, 2, fs), u = reshape_to(N, upd, 2, us);
    ox_val rows = ox_scalar(N, TFVM_I64, 0, st);
    ox_val y = scatter_rows(N, &flat, &lin, &u, &rows, add);
    N->out[0] = reshape_to(N, &y, r, data->dims);
}

/* ---- Atan, Asin, Acos (no instruction: series after argument halving) ------------------------ */

/* atan(t) = 2 atan(t / (1 + sqrt(1 + t^2))): three times brings any finite
 * t within tan(pi/16) ~ 0.2, where the series to t^13 is exact to ~1e-11 */
static ox_val atan_of(ox_node *N, const ox_val *x, int halvings)
{
    uint8_t d = x->dtype;
    ox_val one = ox_fscalar(N, d, 1), t = *x;
    for (int k = 0; k < halvings; k++) {
        ox_val q = ox_ew2(N, ISA_MUL, &t, &t);
        q = ox_ew2(N, ISA_ADD, &q, &one);
        q = ox_ew1(N, ISA_SQRT, &q);
        q = ox_ew2(N, ISA_ADD, &q, &one);
        t = ox_ew2(N, ISA_DIV, &t, &q);
    }
    ox_val t2 = ox_ew2(N, ISA_MUL, &t, &t);
    /* Horner: t (1 - t2/3 + t2^2/5 - ...) */
    ox_val acc = ox_fscalar(N, d, 1.0 / 13);
    for (int n = 11; n >= 1; n -= 2) {
        acc = ox_ew2(N, ISA_MUL, &acc, &t2);
        ox_val c = ox_fscalar(N, d, ((n / 2) % 2 ? -1.0 : 1.0) / n);
        acc = ox_ew2(N, ISA_ADD, &acc, &c);
    }
    acc = ox_ew2(N, ISA_MUL, &acc, &t);
    ox_val sc = ox_fscalar(N, d, (double)(1 << halvings));
    return ox_ew2(N, ISA_MUL, &acc, &sc);
}

static void op_Atan(ox_node *N) { N->out[0] = atan_of(N, ox_need(N, 0), 3); }

/* asin(x) = 2 atan(x / (1 + sqrt(1 - x^2))), no division by zero on [-1, 1] */
static ox_val asin_of(ox_node *N, const ox_val *x)
{
    uint8_t d = x->dtype;
    ox_val one = ox_fscalar(N, d, 1);
    ox_val q = ox_ew2(N, ISA_MUL, x, x);
    q = ox_ew2(N, ISA_SUB, &one, &q);
    q = ox_ew1(N, ISA_SQRT, &q);
    q = ox_ew2(N, ISA_ADD, &q, &one);
    ox_val t = ox_ew2(N, ISA_DIV, x, &q);
    ox_val a = atan_of(N, &t, 2);
    ox_val two = ox_fscalar(N, d, 2);
    return ox_ew2(N, ISA_MUL, &a, &two);
}

static void op_Asin(ox_node *N) { N->out[0] = asin_of(N, ox_need(N, 0)); }

static void op_Acos(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val a = asin_of(N, x), h = ox_fscalar(N, x->dtype, M_PI / 2);
    N->out[0] = ox_ew2(N, ISA_SUB, &h, &a);
}

#define R(name, since) {#name, since, op_##name}
const ox_opdef ox_extra_ops[] = {
    R(Acos, 7), R(Acosh, 9), R(Asin, 7), R(Asinh, 9), R(Atan, 7), R(Atanh, 9), R(Attention, 23), R(BlackmanWindow, 17), R(CenterCropPad, 18),
    R(ConvTranspose, 1), R(Cosh, 9), R(CumProd, 26), R(DepthToSpace, 1), R(DequantizeLinear, 10),
    R(DynamicQuantizeLinear, 11), R(EyeLike, 9), R(GatherND, 11), R(GroupNormalization, 18),
    R(HammingWindow, 17), R(HannWindow, 17), R(Hardmax, 1), R(IsInf, 10), R(LpNormalization, 1),
    R(MatMulInteger, 10), R(MeanVarianceNormalization, 9), R(NegativeLogLikelihoodLoss, 12),
    R(QLinearMatMul, 10), R(QuantizeLinear, 10), R(RMSNormalization, 23), R(ReverseSequence, 10),
    R(RotaryEmbedding, 23), {"Scatter", 9, op_ScatterElements}, R(ScatterElements, 11), R(ScatterND, 11),
    R(Sinh, 9), R(SoftmaxCrossEntropyLoss, 12), R(SpaceToDepth, 1), R(Swish, 24), R(Tan, 7), R(Upsample, 7),
};
#undef R
const size_t ox_n_extra_ops = UT_COUNTOF(ox_extra_ops);
