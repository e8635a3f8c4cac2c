/* import/onnx_seq.c — ONNX sequence and signal ops as decompositions into
 * ISA instructions: CausalConvWithState (a depthwise CONV2D), FlexAttention
 * (ai.onnx.preview; its score/prob graphs inlined), LinearAttention (its
 * recurrence unrolled over a sequence length known at import time), DFT and
 * STFT (MATMULs with cos/sin matrices computed at run time). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "import/onnx_int.h"

#define OS_MAX_UNROLL 512 /* LinearAttention steps unrolled at most */

static ox_val os_i64(ox_node *N, int64_t v) { return ox_scalar(N, TFVM_I64, 0, v); }

/* x[..., lo:hi, ...] along axis (constant bounds) */
static ox_val os_slice(ox_node *N, const ox_val *x, int64_t axis, int64_t lo, int64_t hi)
{
    int64_t one = 1;
    ox_val s = ox_i64s(N, 1, &lo), e = ox_i64s(N, 1, &hi), a = ox_i64s(N, 1, &axis), st = ox_i64s(N, 1, &one);
    const ox_val *in[5] = {x, &s, &e, &a, &st};
    return ox_op(N, ISA_STRIDED_SLICE, 0, 5, in);
}

static ox_val os_perm(ox_node *N, const ox_val *x, int r, const int64_t *perm)
{
    ox_val p = ox_i64s(N, r, perm);
    return ox_op2(N, ISA_TRANSPOSE, 0, x, &p);
}

static ox_val os_reshape(ox_node *N, const ox_val *x, int r, const int64_t *shape)
{
    ox_val s = ox_i64s(N, r, shape);
    ox_val y = ox_op2(N, ISA_RESHAPE, 0, x, &s);
    for (int k = 0; k < r; k++)
        y.dims[k] = shape[k];
    y.v.n->types[0] = ox_vtype(&y);
    return y;
}

static ox_val os_axis_op(ox_node *N, isa_op op, const ox_val *x, int64_t axis)
{
    ox_val a = ox_i64s(N, 1, &axis);
    return ox_op2(N, op, 0, x, &a);
}

/* [B, H, S, E] with each head repeated `rep` times in place (NumPy's
 * repeat along axis 1): [B, H, 1, S, E] tiled to [B, H, rep, S, E] */
static ox_val os_repeat_heads(ox_node *N, const ox_val *x, int64_t rep)
{
    if (rep == 1)
        return *x;
    ox_val u = os_axis_op(N, ISA_UNSQUEEZE, x, 2);
    int64_t reps[5] = {1, 1, rep, 1, 1}, mul[4] = {1, rep, 1, 1};
    ox_val rv = ox_i64s(N, 5, reps);
    u = ox_op2(N, ISA_TILE, 0, &u, &rv);
    ox_val s = ox_shape_of(N, x), m = ox_i64s(N, 4, mul);
    s = ox_ew2(N, ISA_MUL, &s, &m);
    return ox_op2(N, ISA_RESHAPE, 0, &u, &s);
}

/* [B, T, H*D] -> [B, H, T, D] (all dims known) */
static ox_val os_heads(ox_node *N, const ox_val *x, int64_t b, int64_t t, int64_t h)
{
    int64_t s[4] = {b, t, h, x->dims[2] / h}, perm[4] = {0, 2, 1, 3};
    ox_val y = os_reshape(N, x, 4, s);
    return os_perm(N, &y, 4, perm);
}

/* ---- CausalConvWithState --------------------------------------------------------- */

static void op_CausalConvWithState(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *w = ox_need(N, 1), *bias = ox_opt_in(N, 2), *past = ox_opt_in(N, 3);
    char ab[16];
    const char *act = ox_attr_s(N, "activation", "none", ab, sizeof ab);
    bool silu = strcmp(act, "silu") == 0 || strcmp(act, "swish") == 0;
    if (!silu && strcmp(act, "none") != 0)
        ox_fail(N, TFVM_ERR_FORMAT, "activation '%s' (none, silu or swish are)", act);
    if (ox_need_rank(N, x) != 3 || ox_need_rank(N, w) != 3)
        ox_fail(N, TFVM_ERR_FORMAT, "input and weight must be of rank 3");
    int64_t c = x->dims[1] >= 0 ? x->dims[1] : w->dims[0], k = w->dims[2];
    if (c < 1 || k < 1)
        ox_unsupported(N, "an input of unknown channel count or kernel size");
    ox_val padded;
    if (past) {
        padded = ox_op2(N, ISA_CONCAT, 2, past, x);
    } else {
        int64_t pads[6] = {0, 0, k - 1, 0, 0, 0};
        ox_val pv = ox_i64s(N, 6, pads);
        padded = ox_op2(N, ISA_PAD, 0, x, &pv);
    }
    /* depthwise: one group per channel, valid padding */
    ox_val x4 = os_axis_op(N, ISA_UNSQUEEZE, &padded, 2), w4 = os_axis_op(N, ISA_UNSQUEEZE, w, 2);
    int64_t p[9] = {1, 1, 0, 0, 0, 0, 1, 1, c};
    ox_val pv = ox_i64s(N, 9, p);
    ox_val y = ox_op3(N, ISA_CONV2D, 0, &x4, &w4, &pv);
    y = os_axis_op(N, ISA_SQUEEZE, &y, 2);
    if (bias) {
        int64_t s2[2] = {-1, 1};
        ox_val bb = os_reshape(N, bias, 2, s2);
        y = ox_ew2(N, ISA_ADD, &y, &bb);
    }
    if (silu)
        y = ox_decompose(N, CC_DC_SWISH, &y, NULL);
    N->out[0] = y;
    if (N->n_out > 1)
        /* the last k - 1 positions (none when k = 1) */
        N->out[1] = os_slice(N, &padded, 2, k > 1 ? -(k - 1) : INT64_MAX, INT64_MAX);
}

/* ---- FlexAttention (ai.onnx.preview) ------------------------------------------------ */

/* the value of graph attribute `name` applied to x, or x when absent */
static ox_val os_mod_graph(ox_node *N, const char *name, const ox_val *x)
{
    const Onnx__AttributeProto *a = ox_attr(N, name);
    if (!a)
        return *x;
    const Onnx__GraphProto *g = a->g;
    if (!g || g->n_input != 1 || g->n_output != 1 || !g->input[0] || !g->input[0]->name || !g->input[0]->name[0])
        ox_fail(N, TFVM_ERR_FORMAT, "%s must be a graph of one named input and one output", name);
    ox *X = N->X;
    ox_ent *mark = X->top;
    ox_bind(X, g->input[0]->name, ox_new_val(N->C, x));
    ox_val *out[2] = {NULL, NULL};
    ox_graph_nodes(X, g, N->b, out);
    ox_scope_pop(X, mark);
    if (!out[0])
        ox_fail(N, TFVM_ERR_FORMAT, "%s gives no output", name);
    if (out[0]->dtype != x->dtype)
        return ox_to_dtype(N, out[0], x->dtype);
    return *out[0];
}

static void op_FlexAttention(ox_node *N)
{
    ox_val *q = ox_need(N, 0), *k = ox_need(N, 1), *v = ox_need(N, 2);
    if (ox_need_rank(N, q) != 4 || ox_need_rank(N, k) != 4 || ox_need_rank(N, v) != 4)
        ox_fail(N, TFVM_ERR_FORMAT, "Q, K and V must be of rank 4");
    uint8_t d = q->dtype;
    if (d != TFVM_F32 && d != TFVM_F64)
        ox_unsupported(N, "dtype other than float and double");
    const Onnx__AttributeProto *sp = ox_attr(N, "softmax_precision");
    if (sp && sp->has_i && !((sp->i == 1 && d == TFVM_F32) || (sp->i == 11 && d == TFVM_F64)))
        ox_unsupported(N, "softmax_precision %lld for this input dtype", (long long)sp->i);
    int64_t e = q->dims[3], hq = q->dims[1], hkv = k->dims[1];
    const Onnx__AttributeProto *sa = ox_attr(N, "scale");
    double scale;
    if (sa && sa->has_f) {
        scale = sa->f;
    } else {
        if (e < 1)
            ox_unsupported(N, "Q of unknown head size without scale");
        scale = 1.0 / sqrt((double)e);
    }
    if (hq < 1 || hkv < 1)
        ox_unsupported(N, "Q or K of unknown head count");
    if (hq % hkv)
        ox_fail(N, TFVM_ERR_FORMAT, "%lld query heads for %lld key heads", (long long)hq, (long long)hkv);
    /* sqrt(scale) on each side, rounded to float first as the reference does */
    ox_val sq = ox_fscalar(N, d, (double)sqrtf((float)scale));
    ox_val kr = os_repeat_heads(N, k, hq / hkv), vr = os_repeat_heads(N, v, hq / hkv);
    ox_val qs = ox_ew2(N, ISA_MUL, q, &sq), ks = ox_ew2(N, ISA_MUL, &kr, &sq);
    ox_val s = ox_op2(N, ISA_MATMUL, ISA_OPT_TRANS_B, &qs, &ks);
    s = os_mod_graph(N, "score_mod", &s);
    ox_val p = ox_op1(N, ISA_SOFTMAX, 3, &s);
    p = os_mod_graph(N, "prob_mod", &p);
    N->out[0] = ox_op2(N, ISA_MATMUL, 0, &p, &vr);
}

/* ---- LinearAttention ------------------------------------------------------------------ */

static void op_LinearAttention(ox_node *N)
{
    ox_val *q = ox_need(N, 0), *k = ox_need(N, 1), *v = ox_need(N, 2);
    ox_val *past = ox_opt_in(N, 3), *decay = ox_opt_in(N, 4), *beta = ox_opt_in(N, 5);
    char rb[16];
    const char *rule = ox_attr_s(N, "update_rule", "gated_delta", rb, sizeof rb);
    bool gating = strcmp(rule, "gated") == 0 || strcmp(rule, "gated_delta") == 0;
    bool delta = strcmp(rule, "delta") == 0 || strcmp(rule, "gated_delta") == 0;
    if (!gating && !delta && strcmp(rule, "linear") != 0)
        ox_fail(N, TFVM_ERR_FORMAT, "update_rule '%s'", rule);
    if (gating != (decay != NULL) || delta != (beta != NULL))
        ox_fail(N, TFVM_ERR_FORMAT, "update_rule '%s' with%s decay and with%s beta", rule, decay ? "" : "out",
                beta ? "" : "out");
    int64_t hq = ox_attr_i(N, "q_num_heads", 0), hkv = ox_attr_i(N, "kv_num_heads", 0);
    if (hq < 1 || hkv < 1 || hq % hkv)
        ox_fail(N, TFVM_ERR_FORMAT, "q_num_heads %lld, kv_num_heads %lld", (long long)hq, (long long)hkv);
    if (ox_need_rank(N, q) != 3 || ox_need_rank(N, k) != 3 || ox_need_rank(N, v) != 3)
        ox_fail(N, TFVM_ERR_FORMAT, "query, key and value must be of rank 3");
    uint8_t d = q->dtype;
    if (d != TFVM_F32 || k->dtype != d || v->dtype != d)
        ox_unsupported(N, "dtype other than float");
    int64_t b = q->dims[0], t = q->dims[1];
    for (int i = 0; i < 3; i++)
        if (q->dims[i] < 0 || k->dims[i] < 0 || v->dims[i] < 0)
            ox_unsupported(N, "query, key or value of unknown shape");
    if (t < 1 || t > OS_MAX_UNROLL)
        ox_unsupported(N, "a sequence of %lld steps (1 to %d are)", (long long)t, OS_MAX_UNROLL);
    if (q->dims[2] % hq || k->dims[2] % hkv || v->dims[2] % hkv)
        ox_fail(N, TFVM_ERR_FORMAT, "hidden sizes not divisible by the head counts");
    int64_t dk = q->dims[2] / hq, dv = v->dims[2] / hkv;
    ox_val q4 = os_heads(N, q, b, t, hq), k4 = os_heads(N, k, b, t, hkv), v4 = os_heads(N, v, b, t, hkv);
    ox_val g4 = {0}, b4 = {0};
    if (decay) {
        if (ox_need_rank(N, decay) != 3 || (decay->dims[2] != hkv && decay->dims[2] != hkv * dk))
            ox_fail(N, TFVM_ERR_FORMAT, "decay of last dim %lld", (long long)decay->dims[2]);
        g4 = os_heads(N, decay, b, t, hkv);
    }
    if (beta) {
        if (ox_need_rank(N, beta) != 3 || (beta->dims[2] != hkv && beta->dims[2] != 1))
            ox_fail(N, TFVM_ERR_FORMAT, "beta of last dim %lld", (long long)beta->dims[2]);
        b4 = os_heads(N, beta, b, t, beta->dims[2]);
    }
    int64_t sdims[4] = {b, hkv, dk, dv};
    ox_val state;
    if (past) {
        state = ox_to_dtype(N, past, TFVM_F32);
    } else {
        ox_val sv = ox_i64s(N, 4, sdims), z = ox_fscalar(N, d, 0);
        state = ox_op2(N, ISA_FILL, 0, &sv, &z);
    }
    const Onnx__AttributeProto *sa = ox_attr(N, "scale");
    double scale = sa && sa->has_f && sa->f != 0 ? sa->f : 1.0 / sqrt((double)dk);
    ox_val sc = ox_fscalar(N, d, (double)(float)scale), out = {0};
    int64_t swap[4] = {0, 1, 3, 2};
    for (int64_t i = 0; i < t; i++) {
        ox_val qt = os_slice(N, &q4, 2, i, i + 1), kt = os_slice(N, &k4, 2, i, i + 1);
        ox_val vt = os_slice(N, &v4, 2, i, i + 1);
        if (gating) {
            /* state *= exp(g): g as [B, H, dk or 1, 1], broadcast over dv */
            ox_val gt = os_slice(N, &g4, 2, i, i + 1);
            gt = os_perm(N, &gt, 4, swap);
            gt = ox_ew1(N, ISA_EXP, &gt);
            state = ox_ew2(N, ISA_MUL, &state, &gt);
        }
        if (delta) {
            /* v <- beta * (v - k @ state) */
            ox_val rt = ox_op2(N, ISA_MATMUL, 0, &kt, &state);
            ox_val bt = os_slice(N, &b4, 2, i, i + 1);
            vt = ox_ew2(N, ISA_SUB, &vt, &rt);
            vt = ox_ew2(N, ISA_MUL, &bt, &vt);
        }
        /* state += k^T v (an outer product: one term per element, exact) */
        ox_val kv = ox_op2(N, ISA_MATMUL, ISA_OPT_TRANS_A, &kt, &vt);
        state = ox_ew2(N, ISA_ADD, &state, &kv);
        ox_val rd = os_repeat_heads(N, &state, hq / hkv);
        ox_val ot = ox_op2(N, ISA_MATMUL, 0, &qt, &rd);
        ot = ox_ew2(N, ISA_MUL, &sc, &ot);
        out = i == 0 ? ot : ox_op2(N, ISA_CONCAT, 2, &out, &ot);
    }
    int64_t perm[4] = {0, 2, 1, 3}, os[3] = {b, t, hq * dv};
    out = os_perm(N, &out, 4, perm);
    N->out[0] = os_reshape(N, &out, 3, os);
    if (N->n_out > 1) {
        ox_val st = past ? ox_to_dtype(N, &state, past->dtype) : state;
        memcpy(st.dims, sdims, sizeof sdims);
        st.rank = 4;
        N->out[1] = st;
    }
}

/* ---- DFT, STFT -------------------------------------------------------------------------- */

/* the DFT of x [..., n, c] (c = 1: real, 2: complex) along axis R-2, of
 * length m (i64 scalar): [..., K, 2], or [..., m, 1] for an inverse
 * one-sided (real) transform. The matrices W[j, k] = exp(-+2 pi i jk/m)
 * are made at run time in f64 (jk reduced mod m in integers first), rows
 * j >= m dropped (the input truncated; zero padding adds nothing). */
static ox_val os_dft(ox_node *N, const ox_val *x, int R, int64_t c, const ox_val *m, bool inverse, bool onesided)
{
    uint8_t d = x->dtype, f = TFVM_F64;
    ox_val n = ox_shape_of(N, x), ri = os_i64(N, R - 2);
    n = ox_op2(N, ISA_GATHER, 0, &n, &ri);
    ox_val z = os_i64(N, 0), one = os_i64(N, 1), two = os_i64(N, 2);
    bool irfft = inverse && onesided;
    ox_val kn = *m;
    if (onesided && !inverse) {
        kn = ox_ew2(N, ISA_FLOOR_DIV, m, &two);
        kn = ox_ew2(N, ISA_ADD, &kn, &one);
    }
    ox_val j = ox_op3(N, ISA_RANGE, 0, &z, &n, &one);
    ox_val kk = ox_op3(N, ISA_RANGE, 0, &z, &kn, &one);
    j = os_axis_op(N, ISA_UNSQUEEZE, &j, 1);
    ox_val jk = ox_ew2(N, ISA_MUL, &j, &kk);
    jk = ox_ew2(N, ISA_FLOOR_MOD, &jk, m);
    ox_val mf = ox_to_dtype(N, m, f), jkf = ox_to_dtype(N, &jk, f), tp = ox_fscalar(N, f, 2 * M_PI);
    ox_val th = ox_ew2(N, ISA_MUL, &jkf, &tp);
    th = ox_ew2(N, ISA_DIV, &th, &mf);
    ox_val wr = ox_ew1(N, ISA_COS, &th), wi = ox_ew1(N, ISA_SIN, &th);
    if (!inverse)
        wi = ox_ew1(N, ISA_NEG, &wi);
    /* per-row weight: 0 beyond the signal; an inverse one-sided input's
     * bins 1 .. ceil(m/2)-1 stand for their mirror images too (weight 2) */
    ox_val w;
    if (irfft) {
        ox_val j2 = ox_ew2(N, ISA_MUL, &j, &two);
        ox_val in = ox_ew2(N, ISA_LESS_EQUAL, &j2, m);
        ox_val edge = ox_ew2(N, ISA_EQUAL, &j2, m), j0 = ox_ew2(N, ISA_EQUAL, &j, &z);
        edge = ox_ew2(N, ISA_OR, &edge, &j0);
        ox_val f0 = ox_fscalar(N, f, 0), f1 = ox_fscalar(N, f, 1), f2 = ox_fscalar(N, f, 2);
        w = ox_op3(N, ISA_SELECT, 0, &edge, &f1, &f2);
        w = ox_op3(N, ISA_SELECT, 0, &in, &w, &f0);
    } else {
        ox_val in = ox_ew2(N, ISA_LESS, &j, m);
        w = ox_to_dtype(N, &in, f);
    }
    if (inverse)
        w = ox_ew2(N, ISA_DIV, &w, &mf);
    wr = ox_ew2(N, ISA_MUL, &wr, &w);
    wi = ox_ew2(N, ISA_MUL, &wi, &w);
    /* (a + ib)(wr + i wi) = (a wr - b wi) + i (a wi + b wr) */
    ox_val xf = ox_to_dtype(N, x, f);
    ox_val a = c == 1 ? xf : os_slice(N, &xf, R - 1, 0, 1);
    a = os_axis_op(N, ISA_SQUEEZE, &a, R - 1);
    ox_val re = ox_op2(N, ISA_MATMUL, 0, &a, &wr);
    ox_val im = ox_op2(N, ISA_MATMUL, 0, &a, &wi);
    if (c == 2) {
        ox_val bb = os_slice(N, &xf, R - 1, 1, 2);
        bb = os_axis_op(N, ISA_SQUEEZE, &bb, R - 1);
        ox_val bi = ox_op2(N, ISA_MATMUL, 0, &bb, &wi), br = ox_op2(N, ISA_MATMUL, 0, &bb, &wr);
        re = ox_ew2(N, ISA_SUB, &re, &bi);
        im = ox_ew2(N, ISA_ADD, &im, &br);
    }
    re = os_axis_op(N, ISA_UNSQUEEZE, &re, R - 1);
    ox_val y = re;
    if (!irfft) {
        im = os_axis_op(N, ISA_UNSQUEEZE, &im, R - 1);
        y = ox_op2(N, ISA_CONCAT, (uint32_t)(R - 1), &re, &im);
    }
    return ox_to_dtype(N, &y, d);
}

static void op_DFT(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *len = ox_opt_in(N, 1);
    int R = ox_need_rank(N, x);
    if (R < 2)
        ox_fail(N, TFVM_ERR_FORMAT, "input of rank %d", R);
    int64_t c = x->dims[R - 1];
    if (c != 1 && c != 2)
        ox_unsupported(N, "a last dimension of %lld (1 or 2 are)", (long long)c);
    if (x->dtype != TFVM_F32 && x->dtype != TFVM_F64)
        ox_unsupported(N, "dtype other than float and double");
    bool inverse = ox_attr_i(N, "inverse", 0) != 0, onesided = ox_attr_i(N, "onesided", 0) != 0;
    if (onesided && !inverse && c == 2)
        ox_fail(N, TFVM_ERR_FORMAT, "onesided on a complex input");
    /* the axis: an attribute before opset 20, else input 2 (maybe known only at run time) */
    ox_val ax;
    ox_val *axin = N->X->opset >= 20 ? ox_opt_in(N, 2) : NULL;
    int64_t axc;
    if (N->X->opset < 20 || !axin) {
        axc = N->X->opset < 20 ? ox_attr_i(N, "axis", 1) : -2;
        ax = os_i64(N, axc);
    } else {
        ax = ox_as_i64_scalar(N, axin);
    }
    ox_val rr = os_i64(N, R);
    ax = ox_ew2(N, ISA_FLOOR_MOD, &ax, &rr);
    /* the axis swapped with R-2 (its own inverse) */
    ox_val z = os_i64(N, 0), one = os_i64(N, 1), r2 = os_i64(N, R - 2);
    ox_val idx = ox_op3(N, ISA_RANGE, 0, &z, &rr, &one);
    ox_val is_a = ox_ew2(N, ISA_EQUAL, &idx, &ax), is_l = ox_ew2(N, ISA_EQUAL, &idx, &r2);
    ox_val perm = ox_op3(N, ISA_SELECT, 0, &is_l, &ax, &idx);
    perm = ox_op3(N, ISA_SELECT, 0, &is_a, &r2, &perm);
    ox_val xt = ox_op2(N, ISA_TRANSPOSE, 0, x, &perm);
    ox_val m;
    if (len) {
        m = ox_as_i64_scalar(N, len);
    } else {
        ox_val n = ox_shape_of(N, &xt);
        m = ox_op2(N, ISA_GATHER, 0, &n, &r2);
        if (inverse && onesided) {
            ox_val two = os_i64(N, 2);
            m = ox_ew2(N, ISA_SUB, &m, &one);
            m = ox_ew2(N, ISA_MUL, &m, &two);
        }
    }
    ox_val y = os_dft(N, &xt, R, c, &m, inverse, onesided);
    N->out[0] = ox_op2(N, ISA_TRANSPOSE, 0, &y, &perm);
}

static void op_STFT(ox_node *N)
{
    ox_val *sig = ox_need(N, 0), *step = ox_need(N, 1), *win = ox_opt_in(N, 2), *flen = ox_opt_in(N, 3);
    if (ox_need_rank(N, sig) != 3)
        ox_fail(N, TFVM_ERR_FORMAT, "signal of rank %d (3 is)", sig->rank);
    int64_t c = sig->dims[2];
    if (c != 1 && c != 2)
        ox_unsupported(N, "a last dimension of %lld (1 or 2 are)", (long long)c);
    if (sig->dtype != TFVM_F32 && sig->dtype != TFVM_F64)
        ox_unsupported(N, "dtype other than float and double");
    bool onesided = ox_attr_i(N, "onesided", 1) != 0;
    if (onesided && c == 2)
        ox_fail(N, TFVM_ERR_FORMAT, "onesided on a complex signal");
    uint8_t d = sig->dtype;
    ox_val z = os_i64(N, 0), one = os_i64(N, 1);
    ox_val fl;
    if (flen) {
        fl = ox_as_i64_scalar(N, flen);
    } else {
        /* the window's length, else the whole signal */
        fl = ox_shape_of(N, win ? win : sig);
        ox_val at = win ? z : one;
        fl = ox_op2(N, ISA_GATHER, 0, &fl, &at);
    }
    ox_val st = ox_as_i64_scalar(N, step);
    /* frames = (L - fl) / step + 1; frame f takes samples f*step + [0, fl) */
    ox_val l = ox_shape_of(N, sig);
    l = ox_op2(N, ISA_GATHER, 0, &l, &one);
    ox_val nf = ox_ew2(N, ISA_SUB, &l, &fl);
    nf = ox_ew2(N, ISA_FLOOR_DIV, &nf, &st);
    nf = ox_ew2(N, ISA_ADD, &nf, &one);
    ox_val fi = ox_op3(N, ISA_RANGE, 0, &z, &nf, &one);
    ox_val ti = ox_op3(N, ISA_RANGE, 0, &z, &fl, &one);
    fi = ox_ew2(N, ISA_MUL, &fi, &st);
    fi = os_axis_op(N, ISA_UNSQUEEZE, &fi, 1);
    ox_val idx = ox_ew2(N, ISA_ADD, &fi, &ti);
    ox_val fr = ox_op2(N, ISA_GATHER, 1, sig, &idx); /* [B, F, fl, c] */
    if (win) {
        int64_t s2[2] = {-1, 1};
        ox_val wv = ox_to_dtype(N, win, d);
        wv = os_reshape(N, &wv, 2, s2);
        fr = ox_ew2(N, ISA_MUL, &fr, &wv);
    }
    N->out[0] = os_dft(N, &fr, 4, c, &fl, false, onesided);
}

/* ---- MelWeightMatrix -------------------------------------------------------------- */

static ox_val os_scalar_as(ox_node *N, const ox_val *v, uint8_t d)
{
    ox_val s = ox_count_of(v) == 1 && v->rank == 1 ? os_axis_op(N, ISA_SQUEEZE, v, 0) : *v;
    return ox_to_dtype(N, &s, d);
}

/* mel(hz) = 2595 log10(1 + hz/700), in float as the reference computes it */
static ox_val os_mel(ox_node *N, const ox_val *hz)
{
    uint8_t f = TFVM_F32;
    ox_val h = os_scalar_as(N, hz, f), c700 = ox_fscalar(N, f, 700), one = ox_fscalar(N, f, 1);
    h = ox_ew2(N, ISA_DIV, &h, &c700);
    h = ox_ew2(N, ISA_ADD, &one, &h);
    h = ox_to_dtype(N, &h, TFVM_F64);
    h = ox_ew1(N, ISA_LOG, &h);
    ox_val l10 = ox_fscalar(N, TFVM_F64, log(10.0)), k = ox_fscalar(N, f, 2595);
    h = ox_ew2(N, ISA_DIV, &h, &l10);
    h = ox_to_dtype(N, &h, f);
    return ox_ew2(N, ISA_MUL, &k, &h);
}

/* triangular filters over the bins of a one-sided spectrum: column i rises
 * from bin b[i] to b[i+1] and falls to b[i+2] (b from mel-spaced edges) */
static void op_MelWeightMatrix(ox_node *N)
{
    ox_val *nm = ox_need(N, 0), *dl = ox_need(N, 1), *sr = ox_need(N, 2), *lo = ox_need(N, 3), *hi = ox_need(N, 4);
    int64_t ot = ox_attr_i(N, "output_datatype", 1);
    uint8_t od, f = TFVM_F64, i64 = TFVM_I64;
    if (!ox_dtype((int32_t)ot, &od))
        ox_unsupported(N, "output_datatype %s", ox_onnx_type_name((int32_t)ot));
    ox_val m = ox_as_i64_scalar(N, nm), n = ox_as_i64_scalar(N, dl), rate = ox_as_i64_scalar(N, sr);
    ox_val z = os_i64(N, 0), one = os_i64(N, 1), two = os_i64(N, 2);
    ox_val lm = os_mel(N, lo), hm = os_mel(N, hi);
    ox_val m2 = ox_ew2(N, ISA_ADD, &m, &two);
    ox_val step = ox_ew2(N, ISA_SUB, &hm, &lm), m2f = ox_to_dtype(N, &m2, TFVM_F32);
    step = ox_ew2(N, ISA_DIV, &step, &m2f);
    /* edges in double: 700 (10^(mel/2595) - 1), then floor((n+1) hz / rate) */
    ox_val b = ox_op3(N, ISA_RANGE, 0, &z, &m2, &one);
    b = ox_to_dtype(N, &b, f);
    ox_val sd = ox_to_dtype(N, &step, f), ld = ox_to_dtype(N, &lm, f);
    b = ox_ew2(N, ISA_MUL, &b, &sd);
    b = ox_ew2(N, ISA_ADD, &b, &ld);
    ox_val c2595 = ox_fscalar(N, f, 2595), ten = ox_fscalar(N, f, 10), fone = ox_fscalar(N, f, 1);
    ox_val c700 = ox_fscalar(N, f, 700);
    b = ox_ew2(N, ISA_DIV, &b, &c2595);
    b = ox_ew2(N, ISA_POW, &ten, &b);
    b = ox_ew2(N, ISA_SUB, &b, &fone);
    b = ox_ew2(N, ISA_MUL, &c700, &b);
    ox_val n1 = ox_ew2(N, ISA_ADD, &n, &one);
    n1 = ox_to_dtype(N, &n1, f);
    ox_val rf = ox_to_dtype(N, &rate, f);
    b = ox_ew2(N, ISA_MUL, &n1, &b);
    b = ox_ew2(N, ISA_DIV, &b, &rf);
    b = ox_ew1(N, ISA_FLOOR, &b);
    b = ox_to_dtype(N, &b, i64);
    /* lo, c, hi as [1, M] rows; the bin j as a [nb, 1] column */
    ox_val nb = ox_ew2(N, ISA_FLOOR_DIV, &n, &two);
    nb = ox_ew2(N, ISA_ADD, &nb, &one);
    ox_val mp1 = ox_ew2(N, ISA_ADD, &m, &one);
    ox_val iv = ox_op3(N, ISA_RANGE, 0, &z, &m, &one);
    ox_val iv1 = ox_op3(N, ISA_RANGE, 0, &one, &mp1, &one);
    ox_val iv2 = ox_op3(N, ISA_RANGE, 0, &two, &m2, &one);
    ox_val bl = ox_op2(N, ISA_GATHER, 0, &b, &iv), bc = ox_op2(N, ISA_GATHER, 0, &b, &iv1);
    ox_val bh = ox_op2(N, ISA_GATHER, 0, &b, &iv2);
    ox_val j = ox_op3(N, ISA_RANGE, 0, &z, &nb, &one);
    j = os_axis_op(N, ISA_UNSQUEEZE, &j, 1);
    ox_val jf = ox_to_dtype(N, &j, f), blf = ox_to_dtype(N, &bl, f), bcf = ox_to_dtype(N, &bc, f);
    ox_val bhf = ox_to_dtype(N, &bh, f), f0 = ox_fscalar(N, f, 0);
    /* rising edge (or 1 at the centre when it has no width) */
    ox_val up = ox_ew2(N, ISA_SUB, &jf, &blf), w1 = ox_ew2(N, ISA_SUB, &bcf, &blf);
    up = ox_ew2(N, ISA_DIV, &up, &w1);
    ox_val ge = ox_ew2(N, ISA_GREATER_EQUAL, &j, &bl), le = ox_ew2(N, ISA_LESS_EQUAL, &j, &bc);
    ox_val inr = ox_ew2(N, ISA_AND, &ge, &le);
    up = ox_op3(N, ISA_SELECT, 0, &inr, &up, &f0);
    ox_val flat = ox_ew2(N, ISA_EQUAL, &bc, &bl), atc = ox_ew2(N, ISA_EQUAL, &j, &bc);
    ox_val atcf = ox_to_dtype(N, &atc, f);
    up = ox_op3(N, ISA_SELECT, 0, &flat, &atcf, &up);
    /* falling edge, written over the rising one where it applies */
    ox_val dn = ox_ew2(N, ISA_SUB, &bhf, &jf), w2 = ox_ew2(N, ISA_SUB, &bhf, &bcf);
    dn = ox_ew2(N, ISA_DIV, &dn, &w2);
    ox_val gc = ox_ew2(N, ISA_GREATER_EQUAL, &j, &bc), lh = ox_ew2(N, ISA_LESS, &j, &bh);
    ox_val infall = ox_ew2(N, ISA_AND, &gc, &lh);
    ox_val y = ox_op3(N, ISA_SELECT, 0, &infall, &dn, &up);
    N->out[0] = ox_to_dtype(N, &y, od);
}

const ox_opdef ox_seq_ops[] = {
    {"MelWeightMatrix", 17, op_MelWeightMatrix},
    {"CausalConvWithState", 27, op_CausalConvWithState},
    {"LinearAttention", 27, op_LinearAttention},
    {"DFT", 17, op_DFT},
    {"STFT", 17, op_STFT},
};
const size_t ox_n_seq_ops = sizeof ox_seq_ops / sizeof ox_seq_ops[0];

/* ops of domain ai.onnx.preview (opset-independent) */
ox_handler ox_find_preview_op(const char *op_type)
{
    if (strcmp(op_type, "FlexAttention") == 0)
        return op_FlexAttention;
    return NULL;
}
