/* import/onnx_bits.c — ONNX's integer bitwise ops, BitCast, and the ops whose
 * result shape comes from the data (NonZero, Compress, Unique), plus Det and
 * BatchNormalization's training mode: each one or a few ISA instructions. */
#include <string.h>

#include "import/onnx_int.h"

static void op_BitwiseAnd(ox_node *N) { N->out[0] = ox_ew2(N, ISA_BITAND, ox_need(N, 0), ox_need(N, 1), ox_need(N, 0)->dtype); }
static void op_BitwiseOr(ox_node *N) { N->out[0] = ox_ew2(N, ISA_BITOR, ox_need(N, 0), ox_need(N, 1), ox_need(N, 0)->dtype); }
static void op_BitwiseXor(ox_node *N) { N->out[0] = ox_ew2(N, ISA_BITXOR, ox_need(N, 0), ox_need(N, 1), ox_need(N, 0)->dtype); }
static void op_BitwiseNot(ox_node *N) { N->out[0] = ox_ew1(N, ISA_BITNOT, ox_need(N, 0)); }

static void op_BitShift(ox_node *N)
{
    char dir[16];
    ox_attr_s(N, "direction", "", dir, sizeof dir);
    isa_op op;
    if (strcmp(dir, "LEFT") == 0)
        op = ISA_SHL;
    else if (strcmp(dir, "RIGHT") == 0)
        op = ISA_SHR;
    else
        ox_fail(N, TFVM_ERR_FORMAT, "direction '%s' is not LEFT or RIGHT", dir);
    N->out[0] = ox_ew2(N, op, ox_need(N, 0), ox_need(N, 1), ox_need(N, 0)->dtype);
}

static void op_BitCast(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int64_t to = ox_attr_i(N, "to", 0);
    uint8_t d;
    if (!ox_dtype((int32_t)to, &d))
        ox_unsupported(N, "bit-casting to %s", ox_onnx_type_name((int32_t)to));
    if (tfvm_dtype_size((tfvm_dtype)d) != tfvm_dtype_size((tfvm_dtype)x->dtype))
        ox_fail(N, TFVM_ERR_TYPE, "%s and %s differ in size", tfvm_dtype_name((tfvm_dtype)x->dtype),
                tfvm_dtype_name((tfvm_dtype)d));
    if (d == x->dtype) {
        N->out[0] = *x;
        return;
    }
    ox_val y = ox_op1(N, ISA_BITCAST, d, x, d, x->rank);
    memcpy(y.dims, x->dims, sizeof y.dims);
    y.v.n->types[0] = ox_vtype(&y);
    N->out[0] = y;
}

static void op_NonZero(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val y = ox_op1(N, ISA_NONZERO, 0, x, TFVM_I64, 2);
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
    ox_val nz = ox_op1(N, ISA_NONZERO, 0, &cb, TFVM_I64, 2);
    ox_val idx = ox_op2(N, ISA_RESHAPE, 0, &nz, &flat, TFVM_I64, 1);
    const Onnx__AttributeProto *ax = ox_attr(N, "axis");
    if (!ax) {
        ox_val xf = ox_op2(N, ISA_RESHAPE, 0, x, &flat, x->dtype, 1);
        N->out[0] = ox_op2(N, ISA_GATHER, 0, &xf, &idx, x->dtype, 1);
        return;
    }
    int r = ox_need_rank(N, x);
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", 0), r, false);
    ox_val y = ox_op2(N, ISA_GATHER, (uint32_t)axis, x, &idx, x->dtype, r);
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
        src = ox_op2(N, ISA_RESHAPE, 0, x, &flat, x->dtype, 1);
    }
    ox_val av = ox_scalar(N, TFVM_I64, 0, axis);
    static const uint32_t which[4] = {0, 0, ISA_OPT_UQ_INVERSE, ISA_OPT_UQ_COUNTS};
    for (uint32_t k = 0; k < N->n_out && k < 4; k++) {
        if (!N->n->output[k] || !N->n->output[k][0])
            continue;
        if (k == 0)
            N->out[0] = ox_op2(N, ISA_UNIQUE, sorted, &src, &av, x->dtype, r);
        else
            N->out[k] = ox_op2(N, ISA_UNIQUE_INDEX, sorted | which[k], &src, &av, TFVM_I64, 1);
    }
}

static void op_Det(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    int r = ox_need_rank(N, x);
    if (r < 2)
        ox_fail(N, TFVM_ERR_SHAPE, "input of rank %d: Det needs matrices", r);
    ox_val y = ox_op1(N, ISA_DET, 0, x, x->dtype, r - 2);
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
    ox_val bm = ox_op2(N, ISA_REDUCE_MEAN, 0, x, &axes, d, 1);
    ox_val mk = ox_per_channel(N, &bm, r);
    ox_val c = ox_ew2(N, ISA_SUB, x, &mk, d);
    ox_val sq = ox_ew2(N, ISA_MUL, &c, &c, d);
    ox_val bv = ox_op2(N, ISA_REDUCE_MEAN, 0, &sq, &axes, d, 1);
    ox_val eps = ox_fscalar(N, d, ox_attr_f(N, "epsilon", 1e-5f));
    ox_val t = ox_ew2(N, ISA_ADD, &bv, &eps, d);
    t = ox_ew1(N, ISA_SQRT, &t);
    ox_val inv = ox_ew2(N, ISA_DIV, scale, &t, d);
    ox_val iv = ox_per_channel(N, &inv, r), bb = ox_per_channel(N, b, r);
    ox_val y = ox_ew2(N, ISA_MUL, &c, &iv, d);
    y = ox_ew2(N, ISA_ADD, &y, &bb, d);
    y.rank = (int8_t)r;
    memcpy(y.dims, x->dims, sizeof y.dims);
    N->out[0] = y;
    double mom = ox_attr_f(N, "momentum", 0.9f);
    ox_val m = ox_fscalar(N, d, mom), m1 = ox_fscalar(N, d, 1.0 - mom);
    const ox_val *run[2] = {mean, var}, *cur[2] = {&bm, &bv};
    for (uint32_t k = 1; k < N->n_out && k < 3; k++) {
        if (!N->n->output[k] || !N->n->output[k][0])
            continue;
        ox_val a = ox_ew2(N, ISA_MUL, run[k - 1], &m, d), e = ox_ew2(N, ISA_MUL, cur[k - 1], &m1, d);
        N->out[k] = ox_ew2(N, ISA_ADD, &a, &e, d);
    }
}

#define R(name, since) {#name, since, op_##name}
const ox_opdef ox_bits_ops[] = {
    R(BitCast, 26), R(BitShift, 11), R(BitwiseAnd, 18), R(BitwiseNot, 18), R(BitwiseOr, 18), R(BitwiseXor, 18),
    R(Compress, 9), R(Det, 11), R(NonZero, 9), R(Unique, 11),
};
#undef R
const size_t ox_n_bits_ops = UT_COUNTOF(ox_bits_ops);
