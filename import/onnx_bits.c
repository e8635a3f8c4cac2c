/* import/onnx_bits.c — ONNX's integer bitwise ops, BitCast, and the ops whose
 * result shape comes from the data (NonZero, Compress, Unique), plus Det and
 * BatchNormalization's training mode, TensorScatter, MaxUnpool and MaxPool's
 * Indices output, Einsum's batch diagonal, blocked quantization, Dropout's
 * training mode, 3-d ConvTranspose, TfIdfVectorizer (integer pools), the
 * optimizers of domain ai.onnx.preview.training and three ai.onnx.ml ops: each
 * a few ISA instructions. */
#include <math.h>
#include <string.h>

#include "import/onnx_int.h"

static void op_BitwiseAnd(ox_node *N) { N->out[0] = ox_ew2(N, ISA_BITAND, ox_need(N, 0), ox_need(N, 1)); }
static void op_BitwiseOr(ox_node *N) { N->out[0] = ox_ew2(N, ISA_BITOR, ox_need(N, 0), ox_need(N, 1)); }
static void op_BitwiseXor(ox_node *N) { N->out[0] = ox_ew2(N, ISA_BITXOR, ox_need(N, 0), ox_need(N, 1)); }
static void op_BitwiseNot(ox_node *N) { N->out[0] = ox_ew1(N, ISA_BITNOT, ox_need(N, 0)); }

static void op_BitShift(ox_node *N)
{
    char buf[16];
    const char *dir = ox_attr_s(N, "direction", "", buf, sizeof buf);
    isa_op op;
    if (strcmp(dir, "LEFT") == 0)
        op = ISA_SHL;
    else if (strcmp(dir, "RIGHT") == 0)
        op = ISA_SHR;
    else
        ox_fail(N, TFVM_ERR_FORMAT, "direction '%s' is not LEFT or RIGHT", dir);
    N->out[0] = ox_ew2(N, op, ox_need(N, 0), ox_need(N, 1));
}

static void op_BitCast(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int64_t to = ox_attr_i(N, "to", 0);
    uint8_t d;
    if (!ox_dtype((int32_t)to, &d))
        ox_unsupported(N, "bit-casting to %s", ox_onnx_type_name((int32_t)to));
    /* sizes and kinds as stored: a u32 computes in i64 */
    const uint8_t xs = x->store ? x->store : x->dtype, ts = ox_store_dtype((int32_t)to) ? ox_store_dtype((int32_t)to) : d;
    if (tfvm_dtype_size((tfvm_dtype)ts) != tfvm_dtype_size((tfvm_dtype)xs))
        ox_fail(N, TFVM_ERR_TYPE, "%s and %s differ in size", tfvm_dtype_name((tfvm_dtype)xs),
                tfvm_dtype_name((tfvm_dtype)ts));
    if (isa_dtype_int(d) && isa_dtype_int(x->dtype) && !isa_dtype_half(xs) && !isa_dtype_half(ts)) {
        /* between integers of one size the bits are the value, wrapped */
        ox_val s = ox_to_dtype(N, x, ts);
        N->out[0] = ox_to_dtype(N, &s, d);
        N->out[0].store = ts == d ? 0 : ts;
        return;
    }
    if (x->store || ts != d)
        ox_unsupported(N, "bit-casting %s to %s", tfvm_dtype_name((tfvm_dtype)xs), tfvm_dtype_name((tfvm_dtype)ts));
    if (d == x->dtype) {
        N->out[0] = *x;
        return;
    }
    ox_val y = ox_op1(N, ISA_BITCAST, d, x);
    memcpy(y.dims, x->dims, sizeof y.dims);
    y.v.n->types[0] = ox_vtype(&y);
    N->out[0] = y;
}

static void op_NonZero(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val y = ox_op_rank(N, ISA_NONZERO, 0, 1, (const ox_val *const[]){x}, 2);
    if (x->rank >= 0) {
        y.dims[0] = x->rank;
        y.v.n->types[0] = ox_vtype(&y);
    }
    N->out[0] = y;
}

/* the positions where the condition holds, gathered along axis (Compress
 * allows a condition shorter than the axis) */
static void op_Compress(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *c = ox_need(N, 1);
    int64_t m1 = -1;
    ox_val flat = ox_i64s(N, 1, &m1);
    ox_val cb = c->dtype == TFVM_BOOL ? *c : ox_to_dtype(N, c, TFVM_BOOL);
    ox_val nz = ox_op_rank(N, ISA_NONZERO, 0, 1, (const ox_val *const[]){&cb}, 2);
    ox_val idx = ox_op2(N, ISA_RESHAPE, 0, &nz, &flat);
    const Onnx__AttributeProto *ax = ox_attr(N, "axis");
    if (!ax) {
        ox_val xf = ox_op2(N, ISA_RESHAPE, 0, x, &flat);
        N->out[0] = ox_op2(N, ISA_GATHER, 0, &xf, &idx);
        return;
    }
    int r = ox_need_rank(N, x);
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", 0), r, false);
    ox_val y = ox_op2(N, ISA_GATHER, (uint32_t)axis, x, &idx);
    memcpy(y.dims, x->dims, sizeof y.dims);
    y.dims[axis] = -1;
    y.v.n->types[0] = ox_vtype(&y);
    N->out[0] = y;
}

static void op_Unique(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    uint32_t sorted = ox_attr_i(N, "sorted", 1) ? ISA_OPT_SORTED : 0;
    ox_val src = *x;
    int64_t axis = 0;
    int r = 1;
    if (ox_attr(N, "axis")) {
        r = ox_need_rank(N, x);
        axis = ox_norm_axis(N, ox_attr_i(N, "axis", 0), r, false);
    } else {
        int64_t m1 = -1;
        ox_val flat = ox_i64s(N, 1, &m1);
        src = ox_op2(N, ISA_RESHAPE, 0, x, &flat);
    }
    ox_val av = ox_scalar(N, TFVM_I64, 0, axis);
    static const uint32_t which[4] = {0, 0, ISA_OPT_UQ_INVERSE, ISA_OPT_UQ_COUNTS};
    for (uint32_t k = 0; k < N->n_out && k < 4; k++) {
        if (!N->n->output[k] || !N->n->output[k][0])
            continue;
        if (k == 0)
            N->out[0] = ox_op_rank(N, ISA_UNIQUE, sorted, 2, (const ox_val *const[]){&src, &av}, r);
        else
            N->out[k] = ox_op_rank(N, ISA_UNIQUE_INDEX, sorted | which[k], 2, (const ox_val *const[]){&src, &av}, 1);
    }
}

static void op_Det(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int r = ox_need_rank(N, x);
    if (r < 2)
        ox_fail(N, TFVM_ERR_SHAPE, "input of rank %d: Det needs matrices", r);
    ox_val y = ox_op1(N, ISA_DET, 0, x);
    memcpy(y.dims, x->dims, sizeof y.dims);
    y.v.n->types[0] = ox_vtype(&y);
    N->out[0] = y;
}

/* BatchNormalization with training_mode: the batch's mean and (population)
 * variance over every axis but 1 normalize x; outputs 1 and 2 are the
 * running statistics moved toward them by 1 - momentum. */
void ox_bn_training(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *scale = ox_need(N, 1), *b = ox_need(N, 2), *mean = ox_need(N, 3), *var = ox_need(N, 4);
    int r = ox_need_rank(N, x);
    if (r < 2)
        ox_unsupported(N, "training mode on an input of rank %d", r);
    uint8_t d = x->dtype;
    int64_t ax[TFVM_MAX_RANK];
    int na = 0;
    for (int i = 0; i < r; i++)
        if (i != 1)
            ax[na++] = i;
    ox_val axes = ox_i64s(N, na, ax);
    ox_val bm = ox_op2(N, ISA_REDUCE_MEAN, 0, x, &axes);
    ox_val mk = ox_per_channel(N, &bm, r);
    ox_val c = ox_ew2(N, ISA_SUB, x, &mk);
    ox_val sq = ox_ew2(N, ISA_MUL, &c, &c);
    ox_val bv = ox_op2(N, ISA_REDUCE_MEAN, 0, &sq, &axes);
    ox_val eps = ox_fscalar(N, d, ox_attr_f(N, "epsilon", 1e-5f));
    ox_val t = ox_ew2(N, ISA_ADD, &bv, &eps);
    t = ox_ew1(N, ISA_SQRT, &t);
    ox_val inv = ox_ew2(N, ISA_DIV, scale, &t);
    ox_val iv = ox_per_channel(N, &inv, r), bb = ox_per_channel(N, b, r);
    ox_val y = ox_ew2(N, ISA_MUL, &c, &iv);
    y = ox_ew2(N, ISA_ADD, &y, &bb);
    y.rank = (int8_t)r;
    memcpy(y.dims, x->dims, sizeof y.dims);
    N->out[0] = y;
    double mom = ox_attr_f(N, "momentum", 0.9f);
    ox_val m = ox_fscalar(N, d, mom), m1 = ox_fscalar(N, d, 1.0 - mom);
    const ox_val *run[2] = {mean, var}, *cur[2] = {&bm, &bv};
    for (uint32_t k = 1; k < N->n_out && k < 3; k++) {
        if (!N->n->output[k] || !N->n->output[k][0])
            continue;
        ox_val a = ox_ew2(N, ISA_MUL, run[k - 1], &m), e = ox_ew2(N, ISA_MUL, cur[k - 1], &m1);
        N->out[k] = ox_ew2(N, ISA_ADD, &a, &e);
    }
}

/* ---- TensorScatter, MaxUnpool, MaxPool's Indices ------------------------------------------ */

static ox_val bits_reshape(ox_node *N, const ox_val *x, int n, const int64_t *shape)
{
    ox_val sv = ox_i64s(N, n, shape);
    ox_val y = ox_op2(N, ISA_RESHAPE, 0, x, &sv);
    for (int k = 0; k < n; k++)
        y.dims[k] = shape[k] >= 0 ? shape[k] : -1;
    y.v.n->types[0] = ox_vtype(&y);
    return y;
}

/* present[b, .., j, ..] = update[b, .., s, ..] where s = j - write_indices[b]
 * (mod max_seq when circular) lies in [0, seq), else past[b, .., j, ..]: a
 * GATHER_ELEMENTS of update by s clamped, and a SELECT */
static void op_TensorScatter(ox_node *N)
{
    ox_val *past = ox_need(N, 0), *upd = ox_need(N, 1), *wi = ox_opt_in(N, 2);
    int r = ox_need_rank(N, past);
    if (r < 2 || upd->rank != r)
        ox_fail(N, TFVM_ERR_SHAPE, "past_cache of rank %d and update of rank %d", r, upd->rank);
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", -2), r, false);
    if (axis == 0)
        ox_fail(N, TFVM_ERR_FORMAT, "axis 0 is the batch axis");
    char buf[16];
    const char *mode = ox_attr_s(N, "mode", "linear", buf, sizeof buf);
    bool circular = strcmp(mode, "circular") == 0;
    if (!circular && strcmp(mode, "linear") != 0)
        ox_fail(N, TFVM_ERR_FORMAT, "mode '%s' is not linear or circular", mode);
    int64_t maxs = past->dims[axis], seq = upd->dims[axis];
    if (maxs < 0 || seq < 0)
        ox_unsupported(N, "a sequence axis of unknown length");
    if (seq == 0) {
        N->out[0] = *past;
        return;
    }
    ox_val z = ox_scalar(N, TFVM_I64, 0, 0), one = ox_scalar(N, TFVM_I64, 0, 1), mx = ox_scalar(N, TFVM_I64, 0, maxs);
    ox_val j = ox_op3(N, ISA_RANGE, 0, &z, &mx, &one);
    int64_t shape[TFVM_MAX_RANK];
    for (int i = 0; i < r; i++)
        shape[i] = i == axis ? maxs : 1;
    j = bits_reshape(N, &j, r, shape);
    ox_val s = j;
    if (wi) {
        ox_val w = ox_to_dtype(N, wi, TFVM_I64);
        for (int i = 0; i < r; i++)
            shape[i] = i == 0 ? -1 : 1;
        w = bits_reshape(N, &w, r, shape);
        s = ox_ew2(N, ISA_SUB, &j, &w);
    }
    if (circular)
        s = ox_ew2(N, ISA_FLOOR_MOD, &s, &mx);
    ox_val sq = ox_scalar(N, TFVM_I64, 0, seq);
    ox_val ge = ox_ew2(N, ISA_GREATER_EQUAL, &s, &z), lt = ox_ew2(N, ISA_LESS, &s, &sq);
    ox_val ok = ox_ew2(N, ISA_AND, &ge, &lt);
    ox_val sc = ox_op3(N, ISA_SELECT, 0, &ok, &s, &z);
    ox_val ps = ox_shape_of(N, past);
    ox_val idx = ox_op2(N, ISA_EXPAND, 0, &sc, &ps);
    ox_val g = ox_op2(N, ISA_GATHER_ELEMENTS, (uint32_t)axis, upd, &idx);
    ox_val y = ox_op3(N, ISA_SELECT, 0, &ok, &g, past);
    memcpy(y.dims, past->dims, sizeof y.dims);
    y.v.n->types[0] = ox_vtype(&y);
    N->out[0] = y;
}

/* y (zeros of output_shape, or of the shape the pool undoes) with
 * y.flat[I[k]] = X.flat[k]: X as a row times the one-hot rows of I */
static void op_MaxUnpool(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *ind = ox_need(N, 1), *osh = ox_opt_in(N, 2);
    int r = ox_need_rank(N, x);
    if (x->dtype != TFVM_F32 && x->dtype != TFVM_F64)
        ox_unsupported(N, "X of dtype %s", tfvm_dtype_name((tfvm_dtype)x->dtype));
    int64_t k[8], st[8], pads[16], d[TFVM_MAX_RANK];
    int nk = ox_attr_ints(N, "kernel_shape", k, 8), ns = ox_attr_ints(N, "strides", st, 8);
    int np = ox_attr_ints(N, "pads", pads, 16);
    if (nk != r - 2 || (ns >= 0 && ns != nk) || (np >= 0 && np != 2 * nk))
        ox_fail(N, TFVM_ERR_FORMAT, "kernel_shape, strides and pads do not fit %d spatial dims", r - 2);
    for (int i = 0; i < r; i++) {
        if (x->dims[i] < 0)
            ox_unsupported(N, "X of unknown shape");
        d[i] = x->dims[i];
    }
    for (int i = 0; i < nk; i++)
        d[i + 2] = (x->dims[i + 2] - 1) * (ns > 0 ? st[i] : 1) + k[i] - (np > 0 ? pads[i] + pads[i + nk] : 0);
    /* the indices address the shape the pool undoes; a larger output_shape
     * gets zeros after it (as ONNX's reference) */
    ox_val shape = ox_i64s(N, r, d);
    ox_val ax0 = ox_empty_vec(N, TFVM_I64);
    ox_val total = ox_op2(N, ISA_REDUCE_PROD, 0, &shape, &ax0);
    int64_t m1 = -1, row[2] = {1, -1};
    ox_val iflat = ox_to_dtype(N, ind, TFVM_I64);
    iflat = bits_reshape(N, &iflat, 1, &m1);
    double oo[2] = {0, 1};
    ox_val onoff = {0};
    onoff.dtype = x->dtype;
    ox_unknown_shape(&onoff, 1);
    int64_t two = 2;
    if (x->dtype == TFVM_F64) {
        onoff.v = cc_const_new(N->C, N->b, TFVM_F64, 1, &two, oo, sizeof oo, false);
    } else {
        float of[2] = {0, 1};
        onoff.v = cc_const_new(N->C, N->b, TFVM_F32, 1, &two, of, sizeof of, false);
    }
    ox_val oh = ox_op3(N, ISA_ONEHOT, 1, &iflat, &total, &onoff);
    ox_val xr = bits_reshape(N, x, 2, row);
    ox_val y = ox_op2(N, ISA_MATMUL, 0, &xr, &oh);
    y = bits_reshape(N, &y, r, d);
    if (osh) {
        ox_val want = ox_as_i64_vec(N, osh);
        ox_val extra = ox_ew2(N, ISA_SUB, &want, &shape);
        ox_val zs = ox_i64s(N, r, (const int64_t[TFVM_MAX_RANK]){0});
        ox_val pads2 = ox_op2(N, ISA_CONCAT, 0, &zs, &extra);
        y = ox_op2(N, ISA_PAD, 0, &y, &pads2);
    }
    N->out[0] = y;
}

/* MaxPool with Indices: a table of the input positions under each window
 * (S, past the input: a -inf column) gathers the windows, ARGMAX picks the
 * first maximum, a second table turns it into the flat index ONNX wants
 * (row- or column-major over the spatial dims, plus (n*C + c) * S). */
void ox_maxpool_indices(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int r = ox_need_rank(N, x), ns = r - 2;
    if (ns < 1 || ns > 3)
        ox_unsupported(N, "the Indices output with %d spatial dims", ns);
    if (x->dtype != TFVM_F32 && x->dtype != TFVM_F64)
        ox_unsupported(N, "the Indices output on %s", tfvm_dtype_name((tfvm_dtype)x->dtype));
    for (int i = 0; i < r; i++)
        if (x->dims[i] < 0)
            ox_unsupported(N, "the Indices output on an input of unknown shape");
    char buf[16];
    const char *ap = ox_attr_s(N, "auto_pad", "NOTSET", buf, sizeof buf);
    if (strcmp(ap, "NOTSET") != 0 || ox_attr_i(N, "ceil_mode", 0))
        ox_unsupported(N, "the Indices output with auto_pad %s or ceil_mode", ap);
    int64_t k[3], st[3] = {1, 1, 1}, dl[3] = {1, 1, 1}, pads[6] = {0};
    if (ox_attr_ints(N, "kernel_shape", k, 3) != ns)
        ox_fail(N, TFVM_ERR_FORMAT, "kernel_shape does not have %d entries", ns);
    int n1 = ox_attr_ints(N, "strides", st, 3), n2 = ox_attr_ints(N, "dilations", dl, 3);
    int n3 = ox_attr_ints(N, "pads", pads, 6);
    if ((n1 >= 0 && n1 != ns) || (n2 >= 0 && n2 != ns) || (n3 >= 0 && n3 != 2 * ns))
        ox_fail(N, TFVM_ERR_FORMAT, "strides, dilations or pads do not fit %d spatial dims", ns);
    bool colmajor = ox_attr_i(N, "storage_order", 0) != 0;
    int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, S = 1, P = 1, K = 1;
    for (int i = 0; i < ns; i++) {
        in[i] = x->dims[i + 2];
        out[i] = (in[i] + pads[i] + pads[i + ns] - dl[i] * (k[i] - 1) - 1) / st[i] + 1;
        if (out[i] < 1)
            ox_fail(N, TFVM_ERR_SHAPE, "the window does not fit spatial dim %d", i);
        S *= in[i];
        P *= out[i];
        K *= k[i];
    }
    if (P * K > (1 << 24))
        ox_unsupported(N, "the Indices output on %lld windows of %lld", (long long)P, (long long)K);
    int64_t *pos = cc_alloc(N->C, (size_t)(2 * P * K) * sizeof *pos), *flat = pos + P * K;
    for (int64_t p = 0; p < P; p++) {
        int64_t o[3] = {p / (out[1] * out[2]), p / out[2] % out[1], p % out[2]};
        for (int64_t q = 0; q < K; q++) {
            /* window offsets of kernel position q (row-major over k) */
            int64_t rem = q, c[3] = {0, 0, 0};
            for (int i = ns - 1; i >= 0; i--) {
                c[i] = rem % k[i];
                rem /= k[i];
            }
            bool inside = true;
            int64_t lin = 0, cm = 0, strd = 1;
            int64_t co[3];
            for (int i = 0; i < ns; i++) {
                co[i] = o[i] * st[i] - pads[i] + c[i] * dl[i];
                if (co[i] < 0 || co[i] >= in[i])
                    inside = false;
                lin = lin * in[i] + co[i];
            }
            for (int i = 0; i < ns; i++) {
                cm += co[i] * strd;
                strd *= in[i];
            }
            pos[p * K + q] = inside ? lin : S;
            flat[p * K + q] = inside ? (colmajor ? cm : lin) : 0;
        }
    }
    int64_t pk = P * K, nc = x->dims[0] * x->dims[1];
    uint8_t d = x->dtype;
    ox_val tpos = {0}, tflat = {0};
    tpos.dtype = tflat.dtype = TFVM_I64;
    ox_unknown_shape(&tpos, 1);
    ox_unknown_shape(&tflat, 1);
    tpos.v = cc_const_new(N->C, N->b, TFVM_I64, 1, &pk, pos, (size_t)pk * sizeof *pos, false);
    tflat.v = cc_const_new(N->C, N->b, TFVM_I64, 1, &pk, flat, (size_t)pk * sizeof *flat, false);
    int64_t s2[2] = {nc, S}, col[2] = {nc, 1};
    ox_val xs = bits_reshape(N, x, 2, s2);
    ox_val cs = ox_i64s(N, 2, col), ninf = ox_fscalar(N, d, -INFINITY);
    ox_val pad = ox_op2(N, ISA_FILL, 0, &cs, &ninf);
    xs = ox_op2(N, ISA_CONCAT, 1, &xs, &pad);
    ox_val g = ox_op2(N, ISA_GATHER, 1, &xs, &tpos);
    int64_t s3[3] = {nc, P, K};
    g = bits_reshape(N, &g, 3, s3);
    ox_val ax2 = ox_i64s(N, 1, (const int64_t[]){2});
    ox_val y = ox_op2(N, ISA_REDUCE_MAX, 0, &g, &ax2);
    ox_val am = ox_op1(N, ISA_ARGMAX, 2, &g);
    ox_val zero = ox_scalar(N, TFVM_I64, 0, 0), one = ox_scalar(N, TFVM_I64, 0, 1), pv = ox_scalar(N, TFVM_I64, 0, P);
    ox_val kv = ox_scalar(N, TFVM_I64, 0, K), sv = ox_scalar(N, TFVM_I64, 0, S), ncv = ox_scalar(N, TFVM_I64, 0, nc);
    ox_val pr = ox_op3(N, ISA_RANGE, 0, &zero, &pv, &one);
    pr = ox_ew2(N, ISA_MUL, &pr, &kv);
    ox_val sel = ox_ew2(N, ISA_ADD, &am, &pr);
    ox_val idx = ox_op2(N, ISA_GATHER, 0, &tflat, &sel);
    ox_val base = ox_op3(N, ISA_RANGE, 0, &zero, &ncv, &one);
    base = ox_ew2(N, ISA_MUL, &base, &sv);
    base = bits_reshape(N, &base, 2, col);
    idx = ox_ew2(N, ISA_ADD, &idx, &base);
    int64_t od[TFVM_MAX_RANK] = {x->dims[0], x->dims[1]};
    for (int i = 0; i < ns; i++)
        od[i + 2] = out[i];
    N->out[0] = bits_reshape(N, &y, r, od);
    N->out[1] = bits_reshape(N, &idx, r, od);
}

/* Einsum '...ii->...i' (any letter, spaces ignored): the diagonal of the
 * last two dims, as x times the identity summed over the last axis. True
 * when the equation is that one. */
bool ox_einsum_diag(ox_node *N, const char *eq)
{
    char e[32];
    size_t n = 0;
    for (const char *p = eq; *p && n + 1 < sizeof e; p++)
        if (*p != ' ')
            e[n++] = *p;
    e[n] = 0;
    if (n != 11 || strncmp(e, "...", 3) != 0 || e[3] != e[4] || strncmp(e + 5, "->...", 5) != 0 || e[10] != e[3])
        return false;
    ox_val *x = ox_need(N, 0);
    int r = ox_need_rank(N, x);
    if (r < 2 || x->dims[r - 1] < 0 || x->dims[r - 1] != x->dims[r - 2])
        ox_unsupported(N, "equation '%s' on a shape whose last two dims are not known and equal", eq);
    if (x->dtype == TFVM_BOOL)
        ox_unsupported(N, "equation '%s' on bool", eq);
    int64_t m = x->dims[r - 1];
    if (m > 4096)
        ox_unsupported(N, "equation '%s' on %lld x %lld matrices", eq, (long long)m, (long long)m);
    size_t es = tfvm_dtype_size((tfvm_dtype)x->dtype);
    unsigned char *eye = cc_alloc(N->C, (size_t)(m * m) * es + 1);
    for (int64_t i = 0; i < m; i++) {
        unsigned char *q = eye + (size_t)(i * m + i) * es;
        if (x->dtype == TFVM_F32) {
            float one = 1;
            memcpy(q, &one, es);
        } else if (x->dtype == TFVM_F64) {
            double one = 1;
            memcpy(q, &one, es);
        } else {
            q[0] = 1; /* integers, little-endian */
        }
    }
    int64_t dims[2] = {m, m};
    ox_val ev = {0};
    ev.dtype = x->dtype;
    ev.rank = 2;
    ev.dims[0] = ev.dims[1] = m;
    ev.v = cc_const_new(N->C, N->b, (tfvm_dtype)x->dtype, 2, dims, eye, (size_t)(m * m) * es, false);
    ox_val t = ox_ew2(N, ISA_MUL, x, &ev);
    int64_t last = r - 1;
    ox_val ax = ox_i64s(N, 1, &last);
    ox_val y = ox_op2(N, ISA_REDUCE_SUM, 0, &t, &ax);
    memcpy(y.dims, x->dims, sizeof y.dims);
    y.v.n->types[0] = ox_vtype(&y);
    N->out[0] = y;
    return true;
}

/* Blocked (De)QuantizeLinear: the scale and zero point, one per block of
 * block_size along axis, repeated to x's length there (a GATHER of i /
 * block_size), so that the per-element lowering applies. Replaces inputs 1
 * and 2 of the node. */
void ox_unblock(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int64_t bs = ox_attr_i(N, "block_size", 0);
    int r = ox_need_rank(N, x);
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", 1), r, false);
    int64_t len = x->dims[axis];
    if (bs < 0)
        ox_fail(N, TFVM_ERR_FORMAT, "block_size %lld", (long long)bs);
    if (len < 0)
        ox_unsupported(N, "blocked quantization along an axis of unknown length");
    int64_t *idx = cc_alloc(N->C, (size_t)(len ? len : 1) * sizeof *idx);
    for (int64_t i = 0; i < len; i++)
        idx[i] = i / bs;
    ox_val iv = {0};
    iv.dtype = TFVM_I64;
    ox_unknown_shape(&iv, 1);
    iv.dims[0] = len;
    iv.v = cc_const_new(N->C, N->b, TFVM_I64, 1, &len, idx, (size_t)len * sizeof *idx, false);
    for (uint32_t k = 1; k < 3 && k < N->n_in; k++) {
        ox_val *v = N->in[k];
        if (!v)
            continue;
        if (v->rank != r)
            ox_fail(N, TFVM_ERR_SHAPE, "blocked quantization: input %u has rank %d, x %d", k, v->rank, r);
        ox_val g = ox_op2(N, ISA_GATHER, (uint32_t)axis, v, &iv);
        memcpy(g.dims, v->dims, sizeof g.dims);
        g.dims[axis] = len;
        g.v.n->types[0] = ox_vtype(&g);
        N->in[k] = ox_new_val(N->C, &g);
    }
}

/* z >> k, logical, on i64 */
static ox_val bits_lsr(ox_node *N, const ox_val *z, int k)
{
    ox_val kv = ox_scalar(N, TFVM_I64, 0, k), m = ox_scalar(N, TFVM_I64, 0, (int64_t)(UINT64_MAX >> k));
    ox_val t = ox_ew2(N, ISA_SHR, z, &kv);
    return ox_ew2(N, ISA_BITAND, &t, &m);
}

/* Dropout with a training_mode input (run-time or true): each element is
 * kept when u >= ratio, u uniform in [0, 1) from SplitMix64 of (its C-order
 * index + seed + 1) — counter based, so the same on any thread count;
 * kept elements are scaled by 1 / (1 - ratio). Not training: x and an
 * all-true mask. Ratio 0 keeps everything exactly; other ratios cannot
 * match another runtime's generator. */
void ox_dropout_training(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *rv = ox_opt_in(N, 1), *tm = ox_need(N, 2);
    uint8_t d = x->dtype;
    if (d != TFVM_F32 && d != TFVM_F64)
        ox_unsupported(N, "training mode on %s", tfvm_dtype_name((tfvm_dtype)d));
    int r = ox_need_rank(N, x);
    ox_val ratio = rv ? ox_to_dtype(N, rv, TFVM_F64) : ox_fscalar(N, TFVM_F64, 0.5);
    if (rv && rv->rank > 0) {
        ox_val noax = ox_empty_vec(N, TFVM_I64);
        ratio = ox_op2(N, ISA_RESHAPE, 0, &ratio, &noax);
    }
    ox_val train = tm->dtype == TFVM_BOOL ? *tm : ox_to_dtype(N, tm, TFVM_BOOL);
    if (tm->rank > 0) {
        ox_val noax = ox_empty_vec(N, TFVM_I64);
        train = ox_op2(N, ISA_RESHAPE, 0, &train, &noax);
    }
    ox_val sh = ox_shape_of(N, x), all = ox_empty_vec(N, TFVM_I64);
    ox_val cnt = ox_op2(N, ISA_REDUCE_PROD, 0, &sh, &all);
    int64_t seed = ox_attr_i(N, "seed", 0);
    ox_val lo = ox_scalar(N, TFVM_I64, 0, (int64_t)((uint64_t)seed + 1)), step = ox_scalar(N, TFVM_I64, 0, 1);
    ox_val end = ox_ew2(N, ISA_ADD, &cnt, &lo);
    ox_val z = ox_op3(N, ISA_RANGE, 0, &lo, &end, &step);
    z = ox_op2(N, ISA_RESHAPE, 0, &z, &sh);
    static const uint64_t mul[3] = {0x9E3779B97F4A7C15u, 0xBF58476D1CE4E5B9u, 0x94D049BB133111EBu};
    static const int sft[3] = {30, 27, 31};
    ox_val g = ox_scalar(N, TFVM_I64, 0, (int64_t)mul[0]);
    z = ox_ew2(N, ISA_MUL, &z, &g);
    for (int i = 0; i < 3; i++) {
        ox_val t = bits_lsr(N, &z, sft[i]);
        z = ox_ew2(N, ISA_BITXOR, &z, &t);
        if (i < 2) {
            ox_val m = ox_scalar(N, TFVM_I64, 0, (int64_t)mul[i + 1]);
            z = ox_ew2(N, ISA_MUL, &z, &m);
        }
    }
    ox_val top = bits_lsr(N, &z, 11);
    ox_val u = ox_to_dtype(N, &top, TFVM_F64), ulp = ox_fscalar(N, TFVM_F64, 0x1p-53);
    u = ox_ew2(N, ISA_MUL, &u, &ulp);
    ox_val keep = ox_ew2(N, ISA_GREATER_EQUAL, &u, &ratio);
    ox_val one = ox_fscalar(N, TFVM_F64, 1), zero = ox_fscalar(N, TFVM_F64, 0);
    ox_val rest = ox_ew2(N, ISA_SUB, &one, &ratio);
    ox_val scale = ox_ew2(N, ISA_DIV, &one, &rest);
    ox_val lt1 = ox_ew2(N, ISA_LESS, &ratio, &one);
    scale = ox_op3(N, ISA_SELECT, 0, &lt1, &scale, &zero);
    scale = ox_to_dtype(N, &scale, d);
    ox_val xs = ox_ew2(N, ISA_MUL, x, &scale), zd = ox_fscalar(N, d, 0);
    ox_val kept = ox_op3(N, ISA_SELECT, 0, &keep, &xs, &zd);
    ox_val y = ox_op3(N, ISA_SELECT, 0, &train, &kept, x);
    memcpy(y.dims, x->dims, sizeof y.dims);
    y.v.n->types[0] = ox_vtype(&y);
    N->out[0] = y;
    if (N->n_out > 1 && N->n->output[1] && N->n->output[1][0]) {
        ox_val nt = ox_ew1(N, ISA_NOT, &train);
        ox_val mk = ox_ew2(N, ISA_OR, &keep, &nt);
        memcpy(mk.dims, x->dims, sizeof mk.dims);
        mk.rank = (int8_t)r;
        N->out[1] = mk;
    }
}

/* x[..] sliced along one axis: [b, e) by step */
static ox_val bits_slice_step(ox_node *N, const ox_val *x, int axis, int64_t b, int64_t e, int64_t step)
{
    int64_t ax = axis;
    ox_val vb = ox_i64s(N, 1, &b), ve = ox_i64s(N, 1, &e), va = ox_i64s(N, 1, &ax), vs = ox_i64s(N, 1, &step);
    const ox_val *in[5] = {x, &vb, &ve, &va, &vs};
    return ox_op(N, ISA_STRIDED_SLICE, 0, 5, in);
}
static ox_val bits_slice(ox_node *N, const ox_val *x, int axis, int64_t b, int64_t e)
{
    return bits_slice_step(N, x, axis, b, e, 1);
}

/* A 3-d convolution as a sum over its depth taps kd of 2-d convolutions of
 * depth slices ([N*D', C, H, W]): xp [N, C, D, H, W] of static dims xd (its
 * depth padded already), w [O, C/g, KD, KH, KW] of dims wd, depth stride sd
 * and dilation dd, p9 the 2-d convolutions' parameters; gives [N, O, D', H',
 * W'] of dims out, without bias. */
static ox_val depth_taps(ox_node *N, const ox_val *xp, const int64_t *xd, const ox_val *w, const int64_t *wd,
                         int64_t sd, int64_t dd, const int64_t *p9, const int64_t *out)
{
    ox_val p9v = ox_i64s(N, 9, p9);
    int64_t perm[5] = {0, 2, 1, 3, 4};
    ox_val permv = ox_i64s(N, 5, perm);
    int64_t s4x[4] = {xd[0] * out[2], xd[1], xd[3], xd[4]}, s4w[4] = {wd[0], wd[1], wd[3], wd[4]};
    ox_val acc = {0};
    for (int64_t kd = 0; kd < wd[2]; kd++) {
        ox_val xs = bits_slice_step(N, xp, 2, kd * dd, kd * dd + sd * (out[2] - 1) + 1, sd);
        xs = ox_op2(N, ISA_TRANSPOSE, 0, &xs, &permv);
        xs = bits_reshape(N, &xs, 4, s4x);
        ox_val wk = bits_slice(N, w, 2, kd, kd + 1);
        wk = bits_reshape(N, &wk, 4, s4w);
        ox_val yk = ox_op3(N, ISA_CONV2D, 0, &xs, &wk, &p9v);
        acc = kd == 0 ? yk : ox_ew2(N, ISA_ADD, &acc, &yk);
    }
    int64_t s5y[5] = {out[0], out[2], out[1], out[3], out[4]};
    ox_val y = bits_reshape(N, &acc, 5, s5y);
    y = ox_op2(N, ISA_TRANSPOSE, 0, &y, &permv);
    return bits_reshape(N, &y, 5, out);
}

ox_val ox_conv3d(ox_node *N, const ox_val *x, const ox_val *w, const ox_val *bias, const int64_t *s, const int64_t *pb,
                 const int64_t *pe, const int64_t *d, int64_t group)
{
    if (ox_need_rank(N, x) != 5 || w->rank != 5)
        ox_fail(N, TFVM_ERR_SHAPE, "3-d Conv needs X and W of rank 5");
    for (int i = 0; i < 5; i++)
        if (x->dims[i] < 0 || w->dims[i] < 0)
            ox_unsupported(N, "3 spatial dims with an input or weight of unknown shape");
    if (group < 1 || x->dims[1] != w->dims[1] * group || w->dims[0] % group)
        ox_fail(N, TFVM_ERR_SHAPE, "W [%lld, %lld, ...] does not fit X's %lld channels in %lld groups",
                (long long)w->dims[0], (long long)w->dims[1], (long long)x->dims[1], (long long)group);
    const uint8_t dt = x->dtype;
    int64_t xd[5], out[5] = {x->dims[0], w->dims[0]};
    memcpy(xd, x->dims, sizeof xd);
    xd[2] += pb[0] + pe[0];
    for (int j = 0; j < 3; j++) {
        const int64_t in = j == 0 ? xd[2] : x->dims[2 + j] + pb[j] + pe[j], ke = (w->dims[2 + j] - 1) * d[j] + 1;
        if (in < ke)
            ox_fail(N, TFVM_ERR_SHAPE, "the kernel does not fit the padded input along spatial dim %d", j);
        out[2 + j] = (in - ke) / s[j] + 1;
    }
    ox_val xp = *x;
    if (pb[0] || pe[0]) { /* the depth pads; the 2-d convolutions pad H and W */
        int64_t cp[10] = {0};
        cp[2] = pb[0];
        cp[7] = pe[0];
        ox_val cpv = ox_i64s(N, 10, cp), z = ox_scalar(N, dt, 0, 0);
        xp = ox_op3(N, ISA_PADV, 0, x, &cpv, &z);
    }
    const int64_t p9[9] = {s[1], s[2], pb[1], pb[2], pe[1], pe[2], d[1], d[2], group};
    ox_val y = depth_taps(N, &xp, xd, w, w->dims, s[0], d[0], p9, out);
    if (bias) {
        ox_val b = ox_per_channel(N, bias, 5);
        y = ox_ew2(N, ISA_ADD, &y, &b);
    }
    memcpy(y.dims, out, sizeof out);
    y.rank = 5;
    return y;
}

/* ConvTranspose with 3 spatial dims: the input with s-1 zeros between
 * elements, padded by the dilated kernel - 1 - pads (as the 1-/2-d lowering),
 * then a 3-d convolution of the flipped, channel-swapped weight as a sum
 * over the depth taps of 2-d convolutions of depth slices ([N*D', C, H, W]). */
void ox_convtranspose3d(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *w = ox_need(N, 1), *bias = ox_opt_in(N, 2);
    uint8_t dt = x->dtype;
    if (ox_need_rank(N, x) != 5 || w->rank != 5)
        ox_fail(N, TFVM_ERR_SHAPE, "3-d ConvTranspose needs X and W of rank 5");
    for (int i = 0; i < 5; i++)
        if (x->dims[i] < 0 || w->dims[i] < 0)
            ox_unsupported(N, "3 spatial dims with an input or weight of unknown shape");
    char buf[16];
    const char *ap = ox_attr_s(N, "auto_pad", "NOTSET", buf, sizeof buf);
    int64_t tmp[8];
    if (strcmp(ap, "NOTSET") != 0 || ox_attr_ints(N, "output_shape", tmp, 8) >= 0)
        ox_unsupported(N, "3 spatial dims with auto_pad or output_shape");
    int64_t k[3], s[3] = {1, 1, 1}, dl[3] = {1, 1, 1}, pb[3] = {0}, pe[3] = {0}, op[3] = {0}, pads[6];
    int nk = ox_attr_ints(N, "kernel_shape", k, 3), ns = ox_attr_ints(N, "strides", s, 3);
    int nd = ox_attr_ints(N, "dilations", dl, 3), no = ox_attr_ints(N, "output_padding", op, 3);
    int np = ox_attr_ints(N, "pads", pads, 6);
    if ((nk >= 0 && nk != 3) || (ns >= 0 && ns != 3) || (nd >= 0 && nd != 3) || (no >= 0 && no != 3) ||
        (np >= 0 && np != 6))
        ox_fail(N, TFVM_ERR_FORMAT, "kernel_shape, strides, dilations, output_padding or pads do not fit 3 spatial dims");
    for (int i = 0; i < 3; i++) {
        if (nk < 0)
            k[i] = w->dims[2 + i];
        if (np == 6) {
            pb[i] = pads[i];
            pe[i] = pads[3 + i];
        }
        if (k[i] != w->dims[2 + i] || s[i] < 1 || s[i] > 64 || dl[i] < 1 || dl[i] > 64 || op[i] < 0 || op[i] > 64 ||
            pb[i] < 0 || pe[i] < 0 || pb[i] > 4096 || pe[i] > 4096)
            ox_fail(N, TFVM_ERR_FORMAT, "kernel, strides, dilations, pads or output_padding out of range");
    }
    int64_t g = ox_attr_i(N, "group", 1), cin = w->dims[0], coutg = w->dims[1];
    if (g < 1 || cin % g || cin != x->dims[1])
        ox_fail(N, TFVM_ERR_SHAPE, "W has %lld input channels for %lld in X, group %lld", (long long)cin,
                (long long)x->dims[1], (long long)g);
    /* zeros between: [N, C, D, H, W] -> [N, C, D, 1, H, 1, W, 1] -> padded to s -> [N, C, D*s, H*s, W*s] */
    ox_val xx = *x;
    if (s[0] > 1 || s[1] > 1 || s[2] > 1) {
        int64_t ax[3] = {3, 5, 7}, pv8[16] = {0};
        pv8[8 + 3] = s[0] - 1;
        pv8[8 + 5] = s[1] - 1;
        pv8[8 + 7] = s[2] - 1;
        ox_val av = ox_i64s(N, 3, ax), pv = ox_i64s(N, 16, pv8), z = ox_scalar(N, dt, 0, 0);
        ox_val t = ox_op2(N, ISA_UNSQUEEZE, 0, &xx, &av);
        t = ox_op3(N, ISA_PADV, 0, &t, &pv, &z);
        int64_t sh[5] = {x->dims[0], x->dims[1], x->dims[2] * s[0], x->dims[3] * s[1], x->dims[4] * s[2]};
        xx = bits_reshape(N, &t, 5, sh);
    }
    int64_t cp[10] = {0}, sp[3];
    for (int j = 0; j < 3; j++) {
        int64_t ke = (k[j] - 1) * dl[j] + 1;
        cp[2 + j] = ke - 1 - pb[j];
        cp[7 + j] = ke - 1 - pe[j] + op[j] - (s[j] - 1);
        sp[j] = x->dims[2 + j] * s[j] + cp[2 + j] + cp[7 + j]; /* padded size */
        if (sp[j] - (ke - 1) < 1)
            ox_fail(N, TFVM_ERR_SHAPE, "pads leave no output along spatial dim %d", j);
    }
    ox_val cpv = ox_i64s(N, 10, cp), zz = ox_scalar(N, dt, 0, 0);
    xx = ox_op3(N, ISA_PADV, 0, &xx, &cpv, &zz);
    /* w [Cin, Cout/g, k...] -> [g, Cin/g, Cout/g, k...] -> [Cout, Cin/g, k...], flipped */
    int64_t s6[6] = {g, cin / g, coutg, k[0], k[1], k[2]}, p6[6] = {0, 2, 1, 3, 4, 5};
    int64_t s5[5] = {g * coutg, cin / g, k[0], k[1], k[2]};
    ox_val t = bits_reshape(N, w, 6, s6), pv = ox_i64s(N, 6, p6);
    t = ox_op2(N, ISA_TRANSPOSE, 0, &t, &pv);
    t = bits_reshape(N, &t, 5, s5);
    int64_t st[3] = {-1, -1, -1}, en[3] = {INT64_MIN, INT64_MIN, INT64_MIN}, fa[3] = {2, 3, 4}, fs[3] = {-1, -1, -1};
    ox_val vs = ox_i64s(N, 3, st), ve = ox_i64s(N, 3, en), va = ox_i64s(N, 3, fa), vp = ox_i64s(N, 3, fs);
    const ox_val *fin[5] = {&t, &vs, &ve, &va, &vp};
    ox_val ww = ox_op(N, ISA_STRIDED_SLICE, 0, 5, fin);
    /* out[:, :, d] = sum over kd of conv2d(xx[:, :, d + kd*dl0], ww[:, :, kd]) */
    int64_t nb = x->dims[0], dout = sp[0] - (k[0] - 1) * dl[0], cout = g * coutg;
    int64_t ho = sp[1] - (k[1] - 1) * dl[1], wo = sp[2] - (k[2] - 1) * dl[2];
    const int64_t p9[9] = {1, 1, 0, 0, 0, 0, dl[1], dl[2], g}, xd[5] = {nb, x->dims[1], sp[0], sp[1], sp[2]};
    const int64_t wd[5] = {cout, cin / g, k[0], k[1], k[2]}, out[5] = {nb, cout, dout, ho, wo};
    ox_val y = depth_taps(N, &xx, xd, &ww, wd, 1, dl[0], p9, out);
    if (bias) {
        ox_val b = ox_per_channel(N, bias, 5);
        y = ox_ew2(N, ISA_ADD, &y, &b);
    }
    memcpy(y.dims, out, sizeof out);
    y.rank = 5;
    N->out[0] = y;
}

/* ---- ai.onnx.preview.training: Adagrad, Momentum, Adam (opset 1) ------------------------------
 * Inputs R (learning rate), T (update count), then n tensors of each kind;
 * outputs n of each kind, as ONNX's reference formulas. */
static int bits_train_n(ox_node *N, int kinds)
{
    if (N->n_in < 2 + (uint32_t)kinds || (N->n_in - 2) % (uint32_t)kinds || N->n_out != N->n_in - 2 - (N->n_in - 2) / (uint32_t)kinds)
        ox_fail(N, TFVM_ERR_FORMAT, "%u inputs and %u outputs do not make groups of %d", N->n_in, N->n_out, kinds);
    return (int)((N->n_in - 2) / (uint32_t)kinds);
}

/* norm_coefficient * X + G */
static ox_val bits_reg(ox_node *N, const ox_val *x, const ox_val *g)
{
    ox_val nc = ox_fscalar(N, x->dtype, ox_attr_f(N, "norm_coefficient", 0));
    ox_val t = ox_ew2(N, ISA_MUL, x, &nc);
    return ox_ew2(N, ISA_ADD, &t, g);
}

static void op_Adagrad(ox_node *N)
{
    int n = bits_train_n(N, 3);
    for (int i = 0; i < n; i++) {
        ox_val *x = ox_need(N, 2 + (uint32_t)i), *g = ox_need(N, 2 + (uint32_t)(n + i)), *h = ox_need(N, 2 + (uint32_t)(2 * n + i));
        uint8_t d = x->dtype;
        ox_val r = ox_to_dtype(N, ox_need(N, 0), d), t = ox_to_dtype(N, ox_need(N, 1), d);
        ox_val df = ox_fscalar(N, d, ox_attr_f(N, "decay_factor", 0)), one = ox_fscalar(N, d, 1);
        ox_val den = ox_ew2(N, ISA_MUL, &t, &df);
        den = ox_ew2(N, ISA_ADD, &den, &one);
        r = ox_ew2(N, ISA_DIV, &r, &den);
        ox_val gr = bits_reg(N, x, g);
        ox_val g2 = ox_ew2(N, ISA_MUL, &gr, &gr);
        ox_val hn = ox_ew2(N, ISA_ADD, h, &g2);
        ox_val eps = ox_fscalar(N, d, ox_attr_f(N, "epsilon", 0));
        ox_val ha = ox_ew1(N, ISA_SQRT, &hn);
        ha = ox_ew2(N, ISA_ADD, &ha, &eps);
        ox_val step = ox_ew2(N, ISA_MUL, &r, &gr);
        step = ox_ew2(N, ISA_DIV, &step, &ha);
        N->out[i] = ox_ew2(N, ISA_SUB, x, &step);
        N->out[n + i] = hn;
    }
}

static void op_Momentum(ox_node *N)
{
    int n = bits_train_n(N, 3);
    char buf[16];
    const char *mode = ox_attr_s(N, "mode", "standard", buf, sizeof buf);
    bool nesterov = strcmp(mode, "nesterov") == 0;
    if (!nesterov && strcmp(mode, "standard") != 0)
        ox_fail(N, TFVM_ERR_FORMAT, "mode '%s' is not standard or nesterov", mode);
    for (int i = 0; i < n; i++) {
        ox_val *x = ox_need(N, 2 + (uint32_t)i), *g = ox_need(N, 2 + (uint32_t)(n + i)), *v = ox_need(N, 2 + (uint32_t)(2 * n + i));
        uint8_t d = x->dtype;
        ox_val r = ox_to_dtype(N, ox_need(N, 0), d), t = ox_to_dtype(N, ox_need(N, 1), d);
        ox_val al = ox_fscalar(N, d, ox_attr_f(N, "alpha", 0)), be = ox_fscalar(N, d, ox_attr_f(N, "beta", 0));
        ox_val zero = ox_fscalar(N, d, 0), one = ox_fscalar(N, d, 1);
        ox_val pos = ox_ew2(N, ISA_GREATER, &t, &zero);
        ox_val ba = ox_op3(N, ISA_SELECT, 0, &pos, &be, &one);
        ox_val gr = bits_reg(N, x, g);
        ox_val a = ox_ew2(N, ISA_MUL, &al, v), b = ox_ew2(N, ISA_MUL, &ba, &gr);
        ox_val vn = ox_ew2(N, ISA_ADD, &a, &b);
        ox_val dir = vn;
        if (nesterov) {
            ox_val av = ox_ew2(N, ISA_MUL, &al, &vn);
            dir = ox_ew2(N, ISA_ADD, &gr, &av);
        }
        ox_val step = ox_ew2(N, ISA_MUL, &r, &dir);
        N->out[i] = ox_ew2(N, ISA_SUB, x, &step);
        N->out[n + i] = vn;
    }
}

static void op_Adam(ox_node *N)
{
    int n = bits_train_n(N, 4);
    for (int i = 0; i < n; i++) {
        ox_val *x = ox_need(N, 2 + (uint32_t)i), *g = ox_need(N, 2 + (uint32_t)(n + i));
        ox_val *v = ox_need(N, 2 + (uint32_t)(2 * n + i)), *h = ox_need(N, 2 + (uint32_t)(3 * n + i));
        uint8_t d = x->dtype;
        double alpha = ox_attr_f(N, "alpha", 0.9f), beta = ox_attr_f(N, "beta", 0.999f);
        ox_val r = ox_to_dtype(N, ox_need(N, 0), d), t = ox_to_dtype(N, ox_need(N, 1), d);
        ox_val al = ox_fscalar(N, d, alpha), be = ox_fscalar(N, d, beta);
        ox_val al1 = ox_fscalar(N, d, 1 - alpha), be1 = ox_fscalar(N, d, 1 - beta);
        ox_val zero = ox_fscalar(N, d, 0), one = ox_fscalar(N, d, 1);
        ox_val gr = bits_reg(N, x, g);
        ox_val a = ox_ew2(N, ISA_MUL, &al, v), b = ox_ew2(N, ISA_MUL, &al1, &gr);
        ox_val vn = ox_ew2(N, ISA_ADD, &a, &b);
        ox_val g2 = ox_ew2(N, ISA_MUL, &gr, &gr);
        ox_val c = ox_ew2(N, ISA_MUL, &be, h), e = ox_ew2(N, ISA_MUL, &be1, &g2);
        ox_val hn = ox_ew2(N, ISA_ADD, &c, &e);
        ox_val eps = ox_fscalar(N, d, ox_attr_f(N, "epsilon", 1e-6f));
        ox_val hs = ox_ew1(N, ISA_SQRT, &hn);
        hs = ox_ew2(N, ISA_ADD, &hs, &eps);
        /* R * sqrt(1 - beta^T) / (1 - alpha^T) once T > 0 */
        ox_val bt = ox_ew2(N, ISA_POW, &be, &t), at = ox_ew2(N, ISA_POW, &al, &t);
        bt = ox_ew2(N, ISA_SUB, &one, &bt);
        bt = ox_ew1(N, ISA_SQRT, &bt);
        at = ox_ew2(N, ISA_SUB, &one, &at);
        ox_val ra = ox_ew2(N, ISA_MUL, &r, &bt);
        ra = ox_ew2(N, ISA_DIV, &ra, &at);
        ox_val pos = ox_ew2(N, ISA_GREATER, &t, &zero);
        ra = ox_op3(N, ISA_SELECT, 0, &pos, &ra, &r);
        ox_val q = ox_ew2(N, ISA_DIV, &vn, &hs);
        q = ox_ew2(N, ISA_MUL, &ra, &q);
        ox_val xn = ox_ew2(N, ISA_SUB, x, &q);
        ox_val post = ox_fscalar(N, d, 1 - (double)ox_attr_f(N, "norm_coefficient_post", 0));
        N->out[i] = ox_ew2(N, ISA_MUL, &xn, &post);
        N->out[n + i] = vn;
        N->out[2 * n + i] = hn;
    }
}

/* ---- ai.onnx.ml: Binarizer, ArrayFeatureExtractor ---------------------------------------------- */
static void op_Binarizer(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    if (x->dtype == TFVM_BOOL)
        ox_unsupported(N, "a bool input");
    ox_val th = ox_fscalar(N, x->dtype, ox_attr_f(N, "threshold", 0));
    if (!isa_dtype_float(x->dtype))
        th = ox_scalar(N, x->dtype, 0, (int64_t)ox_attr_f(N, "threshold", 0));
    ox_val gt = ox_ew2(N, ISA_GREATER, x, &th);
    N->out[0] = ox_to_dtype(N, &gt, x->dtype);
}

/* X's last axis gathered by the indices; a 1-d X gives [1, n] */
static void op_ArrayFeatureExtractor(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *idx = ox_need(N, 1);
    int r = ox_need_rank(N, x);
    ox_val xx = *x;
    if (r < 1)
        ox_fail(N, TFVM_ERR_SHAPE, "X is a scalar");
    if (r == 1) {
        int64_t s2[2] = {1, -1};
        xx = bits_reshape(N, x, 2, s2);
        r = 2;
    }
    int64_t m1 = -1;
    ox_val iv = ox_to_dtype(N, idx, TFVM_I64);
    iv = bits_reshape(N, &iv, 1, &m1);
    N->out[0] = ox_op2(N, ISA_GATHER, (uint32_t)(r - 1), &xx, &iv);
}

/* ---- ai.onnx.ml TreeEnsemble (opset 5) -------------------------------------------------------- */

/* A float tensor attribute (f32 or f64; float_data, double_data or raw) as
 * doubles; *n its count; NULL with *n = 0 when absent. */
static double *bits_attr_doubles(ox_node *N, const char *name, size_t *n)
{
    const Onnx__AttributeProto *a = ox_attr(N, name);
    *n = 0;
    if (!a)
        return NULL;
    const Onnx__TensorProto *t = a->t;
    if (!t)
        ox_fail(N, TFVM_ERR_FORMAT, "attribute '%s' is not a tensor", name);
    bool f64 = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    if (!f64 && t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        ox_unsupported(N, "attribute '%s' of %s", name, ox_onnx_type_name(t->data_type));
    size_t es = f64 ? 8 : 4, cnt = t->has_raw_data ? t->raw_data.len / es : f64 ? t->n_double_data : t->n_float_data;
    if (t->has_raw_data && t->raw_data.len % es)
        ox_fail(N, TFVM_ERR_FORMAT, "attribute '%s': %zu raw bytes", name, t->raw_data.len);
    double *v = cc_alloc(N->C, (cnt ? cnt : 1) * sizeof *v);
    for (size_t i = 0; i < cnt; i++) {
        if (t->has_raw_data && f64) {
            memcpy(&v[i], t->raw_data.data + i * 8, 8);
        } else if (t->has_raw_data) {
            float f;
            memcpy(&f, t->raw_data.data + i * 4, 4);
            v[i] = f;
        } else {
            v[i] = f64 ? t->double_data[i] : t->float_data[i];
        }
    }
    *n = cnt;
    return v;
}

/* an i64 constant of rank 1 */
static ox_val bits_i64_const(ox_node *N, size_t n, const int64_t *v)
{
    int64_t len = (int64_t)n;
    ox_val c = {0};
    c.dtype = TFVM_I64;
    c.rank = 1;
    c.dims[0] = len;
    c.v = cc_const_new(N->C, N->b, TFVM_I64, 1, &len, v, n * sizeof *v, false);
    return c;
}

/* A rank-r constant of doubles as dtype d. */
static ox_val bits_f_const(ox_node *N, uint8_t d, int r, const int64_t *dims, size_t n, const double *v)
{
    ox_val c = {0};
    c.dtype = d;
    c.rank = (int8_t)r;
    memcpy(c.dims, dims, (size_t)r * sizeof *dims);
    if (d == TFVM_F64) {
        c.v = cc_const_new(N->C, N->b, TFVM_F64, r, dims, v, n * sizeof *v, false);
    } else {
        float *f = cc_alloc(N->C, (n ? n : 1) * sizeof *f);
        for (size_t i = 0; i < n; i++)
            f[i] = (float)v[i];
        c.v = cc_const_new(N->C, N->b, TFVM_F32, r, dims, f, n * sizeof *f, false);
    }
    return c;
}

/* Every row walks every tree for as many steps as the deepest path: the
 * current node of each (row, tree) ([B, T] i64; a leaf l as -(l+1), where
 * it stays) picks its feature, split and mode by GATHER, the comparison
 * (MEMBER: EQUAL against the node's padded set, REDUCE_MAX) picks the
 * child. The leaves' weights go to their targets by ONEHOT and are summed
 * over the trees (AVERAGE: / trees). */
static void op_TreeEnsemble(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    uint8_t d = x->dtype;
    if (ox_need_rank(N, x) != 2 || (d != TFVM_F32 && d != TFVM_F64))
        ox_unsupported(N, "X other than an f32/f64 matrix");
    int64_t agg = ox_attr_i(N, "aggregate_function", 1), post = ox_attr_i(N, "post_transform", 0);
    if ((agg != 0 && agg != 1) || post != 0)
        ox_unsupported(N, "aggregate_function %lld or post_transform %lld (SUM and AVERAGE, NONE are)", (long long)agg,
                       (long long)post);
    const Onnx__AttributeProto *am = ox_attr(N, "nodes_modes"), *af = ox_attr(N, "nodes_featureids");
    const Onnx__AttributeProto *at = ox_attr(N, "nodes_truenodeids"), *afl = ox_attr(N, "nodes_falsenodeids");
    const Onnx__AttributeProto *atl = ox_attr(N, "nodes_trueleafs"), *afll = ox_attr(N, "nodes_falseleafs");
    const Onnx__AttributeProto *ar = ox_attr(N, "tree_roots"), *alt = ox_attr(N, "leaf_targetids");
    const Onnx__AttributeProto *amv = ox_attr(N, "nodes_missing_value_tracks_true");
    size_t nsp, nlw, nmv;
    double *splits = bits_attr_doubles(N, "nodes_splits", &nsp), *lw = bits_attr_doubles(N, "leaf_weights", &nlw);
    double *mv = bits_attr_doubles(N, "membership_values", &nmv);
    int64_t nt = ox_attr_i(N, "n_targets", 0);
    if (!am || !af || !at || !afl || !atl || !afll || !ar || !alt || !splits || !lw)
        ox_fail(N, TFVM_ERR_FORMAT, "missing node, leaf or tree attributes");
    if (amv)
        for (size_t i = 0; i < amv->n_ints; i++)
            if (amv->ints[i])
                ox_unsupported(N, "nodes_missing_value_tracks_true");
    /* nodes_modes: a u8 tensor (raw bytes or int32_data) */
    size_t nn = 0, nl = alt->n_ints, ntr = ar->n_ints;
    const Onnx__TensorProto *mt = am->t;
    if (!mt || mt->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__UINT8)
        ox_fail(N, TFVM_ERR_FORMAT, "nodes_modes is not a uint8 tensor");
    nn = mt->has_raw_data ? mt->raw_data.len : mt->n_int32_data;
    int64_t *modes = cc_alloc(N->C, (nn ? nn : 1) * sizeof *modes);
    for (size_t i = 0; i < nn; i++)
        modes[i] = mt->has_raw_data ? mt->raw_data.data[i] : mt->int32_data[i];
    if (!nn || !ntr || af->n_ints != nn || at->n_ints != nn || afl->n_ints != nn || atl->n_ints != nn ||
        afll->n_ints != nn || nsp != nn || nlw != nl || nt < 1 || nt > (1 << 20) || nn > (1u << 24) || nl > (1u << 24))
        ox_fail(N, TFVM_ERR_FORMAT, "node, leaf or tree attributes of inconsistent lengths");
    int64_t nf = x->dims[1];
    /* member sets: the k-th MEMBER node takes the k-th NaN-separated run */
    int64_t *setrow = cc_alloc(N->C, nn * sizeof *setrow), smax = 1, nsets = 0;
    size_t pos = 0;
    for (size_t i = 0; i < nn; i++) {
        int64_t m = modes[i], f = af->ints[i];
        if (m < 0 || m > 6 || f < 0 || (nf >= 0 && f >= nf))
            ox_fail(N, TFVM_ERR_FORMAT, "node %zu: mode %lld or feature %lld out of range", i, (long long)m, (long long)f);
        for (int side = 0; side < 2; side++) {
            int64_t c = side ? afl->ints[i] : at->ints[i], leaf = side ? afll->ints[i] : atl->ints[i];
            if (c < 0 || (leaf ? (size_t)c >= nl : (size_t)c >= nn))
                ox_fail(N, TFVM_ERR_FORMAT, "node %zu: child %lld out of range", i, (long long)c);
        }
        setrow[i] = 0;
        if (m == 6) {
            int64_t len = 0;
            while (pos < nmv && !isnan(mv[pos]))
                pos++, len++;
            pos++; /* the separator */
            setrow[i] = ++nsets;
            if (len > smax)
                smax = len;
        }
    }
    /* the sets as a [nsets + 1, smax] table padded with NaN (row 0: empty) */
    size_t tcells = (size_t)(nsets + 1) * (size_t)smax;
    double *sets = cc_alloc(N->C, tcells * sizeof *sets);
    for (size_t i = 0; i < tcells; i++)
        sets[i] = NAN;
    pos = 0;
    for (int64_t k = 1; k <= nsets; k++) {
        for (int64_t j = 0; pos < nmv && !isnan(mv[pos]); j++)
            sets[(size_t)k * (size_t)smax + (size_t)j] = mv[pos++];
        pos++;
    }
    /* the longest path from a root (cycles refused): a walk of depth steps */
    int64_t *depth = cc_alloc(N->C, nn * sizeof *depth), maxd = 0;
    for (size_t r = 0; r < ntr; r++) {
        if (ar->ints[r] < 0 || (size_t)ar->ints[r] >= nn)
            ox_fail(N, TFVM_ERR_FORMAT, "tree root %lld out of range", (long long)ar->ints[r]);
    }
    /* depth by relaxation: a node's depth bounds its children's; more than nn rounds means a cycle */
    for (size_t i = 0; i < nn; i++)
        depth[i] = -1;
    for (size_t r = 0; r < ntr; r++)
        depth[ar->ints[r]] = 1;
    for (size_t round = 0;; round++) {
        bool changed = false;
        for (size_t i = 0; i < nn; i++) {
            if (depth[i] < 0)
                continue;
            if (depth[i] > maxd)
                maxd = depth[i];
            for (int side = 0; side < 2; side++) {
                int64_t c = side ? afl->ints[i] : at->ints[i], leaf = side ? afll->ints[i] : atl->ints[i];
                if (!leaf && depth[c] < depth[i] + 1) {
                    depth[c] = depth[i] + 1;
                    changed = true;
                }
            }
        }
        if (!changed)
            break;
        if (round > nn || maxd > 512)
            ox_unsupported(N, "trees deeper than 512 or with cycles");
    }
    /* node tables */
    int64_t *feat = cc_alloc(N->C, nn * sizeof *feat), *mode = cc_alloc(N->C, nn * sizeof *mode);
    int64_t *tnext = cc_alloc(N->C, nn * sizeof *tnext), *fnext = cc_alloc(N->C, nn * sizeof *fnext);
    for (size_t i = 0; i < nn; i++) {
        feat[i] = af->ints[i];
        mode[i] = modes[i];
        tnext[i] = atl->ints[i] ? -(at->ints[i] + 1) : at->ints[i];
        fnext[i] = afll->ints[i] ? -(afl->ints[i] + 1) : afl->ints[i];
    }
    ox_val vfeat = bits_i64_const(N, nn, feat), vmode = bits_i64_const(N, nn, mode);
    ox_val vt = bits_i64_const(N, nn, tnext), vf = bits_i64_const(N, nn, fnext), vrow = bits_i64_const(N, nn, setrow);
    int64_t d1 = (int64_t)nn, dset[2] = {nsets + 1, smax};
    ox_val vsplit = bits_f_const(N, d, 1, &d1, nn, splits), vsets = bits_f_const(N, d, 2, dset, tcells, sets);
    /* cur [B, T]: the roots, broadcast over the rows */
    int64_t ntrees = (int64_t)ntr, b = x->dims[0];
    ox_val roots = bits_i64_const(N, ntr, ar->ints);
    int64_t rs[2] = {1, ntrees};
    roots = bits_reshape(N, &roots, 2, rs);
    ox_val xs = ox_shape_of(N, x), z1 = ox_i64s(N, 1, (const int64_t[]){0}), o1 = ox_i64s(N, 1, (const int64_t[]){1});
    ox_val tv = ox_i64s(N, 1, &ntrees);
    ox_val bsh = ox_op3(N, ISA_SLICE, 0, &xs, &z1, &o1);
    bsh = ox_op2(N, ISA_CONCAT, 0, &bsh, &tv); /* [rows, trees], rows known at run time */
    ox_val cur = ox_op2(N, ISA_EXPAND, 0, &roots, &bsh);
    ox_val zero = ox_scalar(N, TFVM_I64, 0, 0);
    for (int64_t step = 0; step < maxd; step++) {
        ox_val leafy = ox_ew2(N, ISA_LESS, &cur, &zero);
        ox_val at_ = ox_ew2(N, ISA_MAX, &cur, &zero);
        ox_val f = ox_op2(N, ISA_GATHER, 0, &vfeat, &at_);
        ox_val xv = ox_op2(N, ISA_GATHER_ELEMENTS, 1, x, &f);
        ox_val sp = ox_op2(N, ISA_GATHER, 0, &vsplit, &at_);
        ox_val md = ox_op2(N, ISA_GATHER, 0, &vmode, &at_);
        static const isa_op cmp[6] = {ISA_LESS_EQUAL, ISA_LESS, ISA_GREATER_EQUAL, ISA_GREATER, ISA_EQUAL, ISA_NOT_EQUAL};
        ox_val cond = {0};
        bool have = false;
        for (int m = 0; m <= 6; m++) {
            bool used = false;
            for (size_t i = 0; i < nn && !used; i++)
                used = mode[i] == m;
            if (!used)
                continue;
            ox_val c;
            if (m < 6) {
                c = ox_ew2(N, cmp[m], &xv, &sp);
            } else {
                ox_val row = ox_op2(N, ISA_GATHER, 0, &vrow, &at_);
                ox_val set = ox_op2(N, ISA_GATHER, 0, &vsets, &row);
                int64_t s3[3] = {b, ntrees, 1};
                ox_val x3 = bits_reshape(N, &xv, 3, s3);
                ox_val eq = ox_ew2(N, ISA_EQUAL, &set, &x3);
                int64_t two = 2;
                ox_val a2 = ox_i64s(N, 1, &two);
                c = ox_op2(N, ISA_REDUCE_MAX, 0, &eq, &a2);
            }
            if (!have) {
                cond = c;
                have = true;
            } else {
                ox_val mv_ = ox_scalar(N, TFVM_I64, 0, m);
                ox_val is = ox_ew2(N, ISA_EQUAL, &md, &mv_);
                cond = ox_op3(N, ISA_SELECT, 0, &is, &c, &cond);
            }
        }
        ox_val tn = ox_op2(N, ISA_GATHER, 0, &vt, &at_), fn = ox_op2(N, ISA_GATHER, 0, &vf, &at_);
        ox_val next = ox_op3(N, ISA_SELECT, 0, &cond, &tn, &fn);
        cur = ox_op3(N, ISA_SELECT, 0, &leafy, &cur, &next);
    }
    /* leaves: -(cur + 1); weights to their targets */
    ox_val one = ox_scalar(N, TFVM_I64, 0, 1);
    ox_val leaf = ox_ew1(N, ISA_NEG, &cur);
    leaf = ox_ew2(N, ISA_SUB, &leaf, &one);
    int64_t *tg = cc_alloc(N->C, (nl ? nl : 1) * sizeof *tg);
    for (size_t i = 0; i < nl; i++) {
        if (alt->ints[i] < 0 || alt->ints[i] >= nt)
            ox_fail(N, TFVM_ERR_FORMAT, "leaf %zu: target %lld out of range", i, (long long)alt->ints[i]);
        tg[i] = alt->ints[i];
    }
    int64_t dl1 = (int64_t)nl;
    ox_val vtg = bits_i64_const(N, nl, tg), vw = bits_f_const(N, d, 1, &dl1, nl, lw);
    ox_val lt = ox_op2(N, ISA_GATHER, 0, &vtg, &leaf), lwv = ox_op2(N, ISA_GATHER, 0, &vw, &leaf);
    double oo[2] = {0, 1};
    int64_t two = 2;
    ox_val onoff = bits_f_const(N, d, 1, &two, 2, oo);
    ox_val ntv = ox_scalar(N, TFVM_I64, 0, nt);
    ox_val oh = ox_op3(N, ISA_ONEHOT, 2, &lt, &ntv, &onoff);
    int64_t s3[3] = {b, ntrees, 1};
    ox_val w3 = bits_reshape(N, &lwv, 3, s3);
    ox_val contrib = ox_ew2(N, ISA_MUL, &oh, &w3);
    int64_t a1 = 1;
    ox_val ax1 = ox_i64s(N, 1, &a1);
    ox_val y = ox_op2(N, ISA_REDUCE_SUM, 0, &contrib, &ax1);
    if (agg == 0) {
        ox_val nv = ox_fscalar(N, d, (double)ntrees);
        y = ox_ew2(N, ISA_DIV, &y, &nv);
    }
    int64_t od[2] = {b, nt};
    N->out[0] = bits_reshape(N, &y, 2, od);
}

ox_handler ox_find_domain_op(const char *domain, const char *op_type)
{
    static const struct {
        const char *domain, *op;
        ox_handler h;
    } ops[] = {
        {"ai.onnx.preview.training", "Adagrad", op_Adagrad},
        {"ai.onnx.preview.training", "Adam", op_Adam},
        {"ai.onnx.preview.training", "Momentum", op_Momentum},
        {"ai.onnx.ml", "ArrayFeatureExtractor", op_ArrayFeatureExtractor},
        {"ai.onnx.ml", "Binarizer", op_Binarizer},
        {"ai.onnx.ml", "TreeEnsemble", op_TreeEnsemble},
    };
    for (size_t i = 0; i < UT_COUNTOF(ops); i++)
        if (strcmp(domain, ops[i].domain) == 0 && strcmp(op_type, ops[i].op) == 0)
            return ops[i].h;
    return NULL;
}

/* TfIdfVectorizer over integer pools: for each n-gram length n and skip k,
 * the n slices x[.., j*(k+1) ..] ([B, L, 1]) compared with the pool's n-grams
 * of that length ([1, 1, G]), ANDed over j, counted over L; the counts of
 * every pool n-gram (pool order) weighted, then moved to their output
 * columns by a constant 0/1 matrix (MATMUL). */
static void op_TfIdfVectorizer(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int r = ox_need_rank(N, x);
    if (r < 1 || r > 2 || x->dims[r - 1] < 0 || (x->dtype != TFVM_I32 && x->dtype != TFVM_I64))
        ox_unsupported(N, "input other than an i32/i64 [C] or [B, C] of known C");
    if (ox_attr(N, "pool_strings"))
        ox_unsupported(N, "pool_strings");
    const Onnx__AttributeProto *pa = ox_attr(N, "pool_int64s"), *ca = ox_attr(N, "ngram_counts");
    const Onnx__AttributeProto *ia = ox_attr(N, "ngram_indexes"), *wa = ox_attr(N, "weights");
    if (!pa || !ca || !ia)
        ox_fail(N, TFVM_ERR_FORMAT, "pool_int64s, ngram_counts and ngram_indexes are required");
    int64_t mn = ox_attr_i(N, "min_gram_length", 0), mx = ox_attr_i(N, "max_gram_length", 0);
    int64_t skip = ox_attr_i(N, "max_skip_count", 0);
    char buf[16];
    const char *mode = ox_attr_s(N, "mode", "", buf, sizeof buf);
    int md = strcmp(mode, "TF") == 0 ? 0 : strcmp(mode, "IDF") == 0 ? 1 : strcmp(mode, "TFIDF") == 0 ? 2 : -1;
    size_t np = pa->n_ints, nc = ca->n_ints, ng = ia->n_ints;
    if (md < 0 || mn < 1 || mx < mn || mx > 16 || (size_t)mx != nc || skip < 0 || skip > 256 || ng > (1u << 20) ||
        (wa && wa->n_floats != ng))
        ox_fail(N, TFVM_ERR_FORMAT, "mode '%s', gram lengths %lld..%lld, %zu ngram_counts, skip %lld or weights out of range",
                mode, (long long)mn, (long long)mx, nc, (long long)skip);
    int64_t vcols = 0;
    for (size_t i = 0; i < ng; i++) {
        if (ia->ints[i] < 0 || ia->ints[i] >= (1 << 24))
            ox_fail(N, TFVM_ERR_FORMAT, "ngram_indexes[%zu] = %lld", i, (long long)ia->ints[i]);
        if (ia->ints[i] + 1 > vcols)
            vcols = ia->ints[i] + 1;
    }
    int64_t rows = r == 2 ? x->dims[0] : 1, c = x->dims[r - 1];
    int64_t s2[2] = {rows, c};
    ox_val xi = ox_to_dtype(N, x, TFVM_I64);
    xi = bits_reshape(N, &xi, 2, s2);
    /* the pool n-grams, length by length: counts[n-1] is where length n starts */
    ox_val all = {0};
    size_t seen = 0;
    for (int64_t n = 1; n <= mx; n++) {
        int64_t st = ca->ints[n - 1], en = n < mx ? ca->ints[n] : (int64_t)np;
        if (st < 0 || en < st || en > (int64_t)np || (en - st) % n)
            ox_fail(N, TFVM_ERR_FORMAT, "ngram_counts do not split the pool into %lld-grams", (long long)n);
        int64_t g = (en - st) / n;
        if (g == 0)
            continue;
        ox_val cnt = {0};
        bool have = false;
        for (int64_t k = 0; n >= mn && k <= (n == 1 ? 0 : skip); k++) {
            int64_t L = c - (n - 1) * (k + 1);
            if (L <= 0)
                break;
            ox_val m = {0};
            for (int64_t j = 0; j < n; j++) {
                ox_val sl = bits_slice(N, &xi, 1, j * (k + 1), j * (k + 1) + L);
                int64_t s3[3] = {rows, L, 1};
                sl = bits_reshape(N, &sl, 3, s3);
                int64_t *pv = cc_alloc(N->C, (size_t)g * sizeof *pv);
                for (int64_t q = 0; q < g; q++)
                    pv[q] = pa->ints[st + q * n + j];
                int64_t pd[3] = {1, 1, g};
                ox_val pt = {0};
                pt.dtype = TFVM_I64;
                pt.rank = 3;
                memcpy(pt.dims, pd, sizeof pd);
                pt.v = cc_const_new(N->C, N->b, TFVM_I64, 3, pd, pv, (size_t)g * sizeof *pv, false);
                ox_val e = ox_ew2(N, ISA_EQUAL, &sl, &pt);
                m = j == 0 ? e : ox_ew2(N, ISA_AND, &m, &e);
            }
            ox_val mf = ox_to_dtype(N, &m, TFVM_F32);
            int64_t one = 1;
            ox_val a1 = ox_i64s(N, 1, &one);
            ox_val s = ox_op2(N, ISA_REDUCE_SUM, 0, &mf, &a1);
            cnt = have ? ox_ew2(N, ISA_ADD, &cnt, &s) : s;
            have = true;
        }
        if (!have) { /* a length outside [min, max] or longer than the input: zeros */
            int64_t zd[2] = {rows, g};
            ox_val zs = ox_i64s(N, 2, zd), z = ox_fscalar(N, TFVM_F32, 0);
            cnt = ox_op2(N, ISA_FILL, 0, &zs, &z);
        }
        all = seen == 0 ? cnt : ox_op2(N, ISA_CONCAT, 1, &all, &cnt);
        seen += (size_t)g;
    }
    if (seen != ng)
        ox_fail(N, TFVM_ERR_FORMAT, "the pool has %zu n-grams, ngram_indexes %zu", seen, ng);
    if (md == 1) {
        ox_val one = ox_fscalar(N, TFVM_F32, 1);
        all = ox_ew2(N, ISA_MIN, &all, &one);
    }
    size_t cells = (size_t)ng * (size_t)vcols;
    float *map = cc_alloc(N->C, (cells ? cells : 1) * sizeof *map);
    for (size_t i = 0; i < ng; i++)
        map[i * (size_t)vcols + (size_t)ia->ints[i]] = md && wa ? wa->floats[i] : 1.0f;
    int64_t md2[2] = {(int64_t)ng, vcols};
    ox_val mv = {0};
    mv.dtype = TFVM_F32;
    mv.rank = 2;
    memcpy(mv.dims, md2, sizeof md2);
    mv.v = cc_const_new(N->C, N->b, TFVM_F32, 2, md2, map, cells * sizeof *map, false);
    ox_val y = ox_op2(N, ISA_MATMUL, 0, &all, &mv);
    int64_t od[2] = {rows, vcols};
    N->out[0] = r == 2 ? bits_reshape(N, &y, 2, od) : bits_reshape(N, &y, 1, &vcols);
}

/* ---- Optionals of plain tensors (opset 15/18): an absent input is the
 * empty optional; a tensor is always there ------------------------------------------------------ */
static void op_OptionalHasElement(ox_node *N)
{
    N->out[0] = ox_scalar(N, TFVM_BOOL, 0, ox_opt_in(N, 0) != NULL);
}

static void op_OptionalGetElement(ox_node *N) { N->out[0] = *ox_need(N, 0); }

#define R(name, since) {#name, since, op_##name}
const ox_opdef ox_bits_ops[] = {
    R(BitCast, 26), R(BitShift, 11), R(BitwiseAnd, 18), R(BitwiseNot, 18), R(BitwiseOr, 18), R(BitwiseXor, 18),
    R(Compress, 9), R(Det, 11), R(MaxUnpool, 9), R(NonZero, 9), R(OptionalGetElement, 15), R(OptionalHasElement, 15), R(TensorScatter, 24), R(TfIdfVectorizer, 9), R(Unique, 11),
};
#undef R
const size_t ox_n_bits_ops = UT_COUNTOF(ox_bits_ops);
