/* import/tf_ops.c — TensorFlow ops to tfvm instructions: one converter per
 * op (docs/tensorflow.md lists them), the outputs each op has, and the
 * dtypes its attributes give. Layouts TF and tfvm disagree on (NHWC convs,
 * HWIO filters) get TRANSPOSEs; shape operands become i64 vectors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compiler/decomp.h"
#include "isa/shape.h"
#include "import/tf.h"

typedef imp_tf_opctx ctx;

/* ---- Attributes ----------------------------------------------------------------------- */

static const tf_attr *attr(ctx *X, const char *k) { return imp_tf_attr(X->n->def, k); }

static int64_t attr_i(ctx *X, const char *k, int64_t dflt)
{
    const tf_attr *a = attr(X, k);
    return a && a->value_case == TFVM_TF__ATTR_VALUE__VALUE_I ? a->i : dflt;
}

static bool attr_b(ctx *X, const char *k, bool dflt)
{
    const tf_attr *a = attr(X, k);
    return a && a->value_case == TFVM_TF__ATTR_VALUE__VALUE_B ? a->b != 0 : dflt;
}

static float attr_f(ctx *X, const char *k, float dflt)
{
    const tf_attr *a = attr(X, k);
    return a && a->value_case == TFVM_TF__ATTR_VALUE__VALUE_F ? a->f : dflt;
}

/* A string attribute compared with s. */
static bool attr_is(ctx *X, const char *k, const char *s, bool dflt)
{
    const tf_attr *a = attr(X, k);
    if (!a || a->value_case != TFVM_TF__ATTR_VALUE__VALUE_S)
        return dflt;
    return a->s.len == strlen(s) && memcmp(a->s.data, s, a->s.len) == 0;
}

static const char *attr_func(ctx *X, const char *k)
{
    const tf_attr *a = attr(X, k);
    if (!a || a->value_case != TFVM_TF__ATTR_VALUE__VALUE_FUNC || !a->func->name)
        imp_tf_fail(X, "attribute '%s' names no function", k);
    return a->func->name;
}

static const TfvmTf__AttrValue__ListValue *attr_list(ctx *X, const char *k)
{
    const tf_attr *a = attr(X, k);
    return a && a->value_case == TFVM_TF__ATTR_VALUE__VALUE_LIST ? a->list : NULL;
}

static size_t list_len(const tf_nodedef *d, const char *k)
{
    const tf_attr *a = imp_tf_attr(d, k);
    if (!a || a->value_case != TFVM_TF__ATTR_VALUE__VALUE_LIST)
        return 0;
    return a->list->n_type;
}

static int64_t def_i(const tf_nodedef *d, const char *k, int64_t dflt)
{
    const tf_attr *a = imp_tf_attr(d, k);
    return a && a->value_case == TFVM_TF__ATTR_VALUE__VALUE_I ? a->i : dflt;
}

/* ---- Outputs ----------------------------------------------------------------------------- */


/* Ops with several outputs: their output arg names in order (single tensors). */
static const struct {
    const char *op;
    const char *args[6];
} multi[] = {
    {"Switch", {"output_false", "output_true"}},
    {"RefSwitch", {"output_false", "output_true"}},
    {"Merge", {"output", "value_index"}},
    {"RefMerge", {"output", "value_index"}},
    {"FusedBatchNorm", {"y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"}},
    {"FusedBatchNormV2", {"y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"}},
    {"FusedBatchNormV3",
     {"y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2", "reserve_space_3"}},
    {"TensorArrayV3", {"handle", "flow"}},
    {"TopKV2", {"values", "indices"}},
};

/* Ops with one list output: the attribute that sizes it. */
static const struct {
    const char *op, *attr;
    bool is_int;
} lists[] = {
    {"Unpack", "num", true},         {"Split", "num_split", true},  {"SplitV", "num_split", true},
    {"IdentityN", "T", false},       {"While", "T", false},         {"StatelessWhile", "T", false},
    {"If", "Tout", false},           {"StatelessIf", "Tout", false}, {"Case", "Tout", false},
    {"StatelessCase", "Tout", false}, {"PartitionedCall", "Tout", false},
    {"StatefulPartitionedCall", "Tout", false},
};

static const char *const no_outputs[] = {"NoOp", "Assert", "TensorArrayCloseV3", "SaveV2", "Print", NULL};

uint32_t imp_tf_n_outputs(imp_tf_st *T, const tf_nodedef *d)
{
    const char *op = d->op ? d->op : "";
    for (size_t i = 0; no_outputs[i]; i++)
        if (strcmp(op, no_outputs[i]) == 0)
            return 0;
    for (size_t i = 0; i < sizeof multi / sizeof *multi; i++)
        if (strcmp(op, multi[i].op) == 0) {
            uint32_t n = 0;
            while (n < 6 && multi[i].args[n])
                n++;
            return n;
        }
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
        if (strcmp(op, lists[i].op) == 0) {
            int64_t n = lists[i].is_int ? def_i(d, lists[i].attr, 0) : (int64_t)list_len(d, lists[i].attr);
            return n < 0 || n > 4096 ? 0 : (uint32_t)n;
        }
    if (imp_tf_is_function(T, op))
        return imp_tf_function_n_outputs(T, op);
    return 1;
}

int imp_tf_output_index(imp_tf_st *T, const tf_nodedef *d, const char *arg, size_t len, uint32_t idx)
{
    const char *op = d->op ? d->op : "";
    for (size_t i = 0; i < sizeof multi / sizeof *multi; i++)
        if (strcmp(op, multi[i].op) == 0) {
            for (int k = 0; k < 6 && multi[i].args[k]; k++)
                if (strlen(multi[i].args[k]) == len && memcmp(multi[i].args[k], arg, len) == 0)
                    return idx == 0 ? k : -1;
            return -1;
        }
    if (imp_tf_is_function(T, op))
        return imp_tf_function_output(T, op, arg, len, idx);
    return (int)idx; /* one output (or one list of them), whatever its name */
}

tfvm_dtype imp_tf_out_dtype(const tf_nodedef *d, uint32_t k)
{
    const char *op = d->op ? d->op : "";
    static const char *const bools[] = {"Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual",
                                        "LogicalAnd", "LogicalOr", "LogicalNot", "IsFinite", "IsNan", NULL};
    for (size_t i = 0; bools[i]; i++)
        if (strcmp(op, bools[i]) == 0)
            return TFVM_BOOL;
    if ((strcmp(op, "Merge") == 0 || strcmp(op, "RefMerge") == 0) && k == 1)
        return TFVM_I32;
    const char *keys[] = {"DstT", "out_type", "output_type", "dtype", "T", "Tout", NULL};
    if (strcmp(op, "ArgMax") == 0 || strcmp(op, "ArgMin") == 0) {
        const tf_attr *a = imp_tf_attr(d, "output_type");
        return a ? imp_tf_dtype(a->type) : TFVM_I64;
    }
    if (strcmp(op, "Shape") == 0 || strcmp(op, "Size") == 0) {
        const tf_attr *a = imp_tf_attr(d, "out_type");
        return a ? imp_tf_dtype(a->type) : TFVM_I32;
    }
    if (strcmp(op, "Rank") == 0)
        return TFVM_I32;
    if (strcmp(op, "TopKV2") == 0 && k == 1) {
        const tf_attr *a = imp_tf_attr(d, "index_type");
        return a ? imp_tf_dtype(a->type) : TFVM_I32;
    }
    for (size_t i = 0; keys[i]; i++) {
        const tf_attr *a = imp_tf_attr(d, keys[i]);
        if (!a)
            continue;
        if (a->value_case == TFVM_TF__ATTR_VALUE__VALUE_TYPE)
            return imp_tf_dtype(a->type);
        if (a->value_case == TFVM_TF__ATTR_VALUE__VALUE_LIST && k < a->list->n_type)
            return imp_tf_dtype(a->list->type[k]);
    }
    return 0;
}

/* ---- Building blocks ------------------------------------------------------------------ */

static tfvm_dtype dt(cc_irval v) { return (tfvm_dtype)v.n->types[v.k].dtype; }
static bool scalar(cc_irval v) { return !v.n->types[v.k].tensor; }
static cc_vtype ten(tfvm_dtype d) { return cc_tensor_t(d, -1); }

static int const_ints(cc_irval v, int64_t *out, int max);

/* What the instruction's own rules (isa/ops.def, isa/shape.h) say of its
 * result: its dtype, and its rank and the dims the shape rule knows. */
static cc_vtype ask_rules(isa_op o, uint32_t a, uint32_t n, const cc_irval *in)
{
    isa_shape x[8], r;
    int64_t vals[8][16];
    uint8_t dts[8] = {0};
    for (uint32_t k = 0; k < n && k < 8; k++) {
        const cc_vtype *v = &in[k].n->types[in[k].k];
        int rank = !v->tensor ? 0 : v->rank == ISA_RANK_ANY ? -1 : v->rank;
        x[k] = (isa_shape){.dtype = v->dtype, .rank = (int8_t)rank, .vals = vals[k]};
        if (rank > 0)
            memcpy(x[k].dims, v->dims, sizeof(int64_t) * (size_t)rank);
        x[k].n_vals = rank <= 1 ? const_ints(in[k], vals[k], 16) : -1;
        dts[k] = v->dtype;
    }
    cc_vtype t = cc_tensor_t(isa_result_dtype(o, dts, a), -1);
    char msg[1];
    if (n > 8 || isa_shape_rule(o, a, x, n, &r, msg, sizeof msg) != TFVM_OK || r.rank < 0)
        return t; /* a failure is the run's to report */
    t.tensor = r.rank > 0;
    t.rank = (uint8_t)r.rank;
    for (int k = 0; k < r.rank; k++)
        t.dims[k] = r.dims[k] >= 0 ? r.dims[k] : -1; /* the IR has no symbols */
    return t;
}

/* The instruction on its operands, its result typed by the rules. */
static cc_irval op(ctx *X, isa_op o, uint32_t a, uint32_t n, const cc_irval *in)
{
    return cc_op_new(X->C, X->b, o, a, n, in, ask_rules(o, a, n, in), NULL);
}

static cc_irval op1(ctx *X, isa_op o, uint32_t a, cc_irval x) { return op(X, o, a, 1, &x); }

static cc_irval op2(ctx *X, isa_op o, uint32_t a, cc_irval x, cc_irval y)
{
    cc_irval in[2] = {x, y};
    return op(X, o, a, 2, in);
}

/* Elementwise: the result is a scalar when every operand is (the rules). */
static cc_irval ew2(ctx *X, isa_op o, cc_irval x, cc_irval y) { return op2(X, o, 0, x, y); }

static cc_irval ew1(ctx *X, isa_op o, cc_irval x) { return op1(X, o, 0, x); }

static cc_irval num(ctx *X, tfvm_dtype d, double v)
{
    int64_t i = 0; /* an attribute's float may not fit an integer: saturate */
    if (d != TFVM_F32 && d != TFVM_F64)
        i = v != v ? 0 : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v;
    return cc_const_scalar(X->C, X->b, d, v, i);
}

/* a + b for slice bounds, saturating (bounds beyond a dim are clamped anyway) */
static int64_t sat_add(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b)
        return INT64_MIN;
    return a + b;
}

static cc_irval i64s(ctx *X, uint32_t n, const int64_t *v) { return cc_const_i64s(X->C, X->b, n, v); }

static bool is_const(cc_irval v) { return v.n->kind == CC_N_CONST; }

/* The integers of a constant (i32 or i64, any rank); -1 when it is not one. */
static int const_ints(cc_irval v, int64_t *out, int max)
{
    if (!is_const(v))
        return -1;
    const cc_cval *c = &v.n->u.c;
    size_t es = tfvm_dtype_size((tfvm_dtype)c->dtype);
    if ((c->dtype != TFVM_I32 && c->dtype != TFVM_I64) || c->nbytes / es > (size_t)max)
        return -1;
    int n = (int)(c->nbytes / es);
    for (int i = 0; i < n; i++) {
        if (c->dtype == TFVM_I32) {
            int32_t x;
            memcpy(&x, (const char *)c->data + 4 * i, 4);
            out[i] = x;
        } else {
            memcpy(&out[i], (const char *)c->data + 8 * i, 8);
        }
    }
    return n;
}

static int64_t static_int(ctx *X, uint32_t k, const char *what)
{
    int64_t v[1];
    if (const_ints(X->in[k], v, 1) != 1)
        imp_tf_fail(X, "%s must be a constant integer", what);
    return v[0];
}

/* A shape-like operand as an i64 vector (a scalar becomes [x]). */
static cc_irval vec64(ctx *X, cc_irval v)
{
    int64_t buf[64];
    int n = const_ints(v, buf, 64);
    if (n >= 0)
        return i64s(X, (uint32_t)n, buf);
    if (dt(v) != TFVM_I64)
        v = op1(X, ISA_CAST, TFVM_I64, v);
    if (scalar(v)) {
        int64_t m1 = -1;
        v = op2(X, ISA_RESHAPE, 0, v, i64s(X, 1, &m1));
    }
    return v;
}

static cc_irval cast(ctx *X, cc_irval v, tfvm_dtype d)
{
    if (!d)
        imp_tf_fail(X, "unsupported dtype");
    if (dt(v) == d)
        return v;
    return op1(X, ISA_CAST, d, v);
}

static cc_irval transpose(ctx *X, cc_irval v, const int64_t *perm, uint32_t n)
{
    return op2(X, ISA_TRANSPOSE, 0, v, i64s(X, n, perm));
}

static uint32_t axis_attr(ctx *X, int64_t a)
{
    if (a < -ISA_MAX_AXIS || a >= ISA_MAX_AXIS)
        imp_tf_fail(X, "axis %lld out of range", (long long)a);
    return (uint32_t)(int32_t)a;
}

static bool nchw(ctx *X) { return attr_is(X, "data_format", "NCHW", false); }

/* ---- Convolutions and pools ------------------------------------------------------------ */

/* The [pt, pl, pb, pr] pads of a SAME window over x (NCHW) at run time:
 * total = max((ceil(in / s) - 1) * s + k_eff - in, 0), before = total / 2. */
static cc_irval same_pads(ctx *X, cc_irval x, cc_irval keff, const int64_t *strides)
{
    int64_t s2[1] = {2}, e4[1] = {4};
    cc_irval st = i64s(X, 2, strides);
    cc_irval in3[3] = {op1(X, ISA_SHAPE, 0, x), i64s(X, 1, s2), i64s(X, 1, e4)};
    cc_irval hw = op(X, ISA_SLICE, 0, 3, in3);
    cc_irval one = i64s(X, 2, (int64_t[]){1, 1});
    cc_irval out = op2(X, ISA_FLOOR_DIV, 0, op2(X, ISA_SUB, 0, op2(X, ISA_ADD, 0, hw, st), one), st);
    cc_irval need = op2(X, ISA_SUB, 0, op2(X, ISA_ADD, 0, op2(X, ISA_MUL, 0, op2(X, ISA_SUB, 0, out, one), st), keff), hw);
    cc_irval total = op2(X, ISA_MAX, 0, need, i64s(X, 2, (int64_t[]){0, 0}));
    cc_irval before = op2(X, ISA_FLOOR_DIV, 0, total, i64s(X, 2, (int64_t[]){2, 2}));
    cc_irval after = op2(X, ISA_SUB, 0, total, before);
    return op2(X, ISA_CONCAT, 0, before, after);
}

/* strides/ksize/dilations attributes as (h, w) for the layout */
static void hw_attr(ctx *X, const char *k, int64_t dflt, int64_t *out)
{
    out[0] = out[1] = dflt;
    const TfvmTf__AttrValue__ListValue *l = attr_list(X, k);
    if (!l || l->n_i == 0)
        return;
    if (l->n_i != 4)
        imp_tf_fail(X, "attribute '%s' needs 4 values", k);
    int h = nchw(X) ? 2 : 1;
    out[0] = l->i[h];
    out[1] = l->i[h + 1];
}

/* p = [a0, a1] ++ pads ++ tail (a constant when the padding is). */
static cc_irval params(ctx *X, const int64_t *head, cc_irval pads, const int64_t *tail, uint32_t n_tail)
{
    cc_irval p = op2(X, ISA_CONCAT, 0, i64s(X, 2, head), pads);
    if (n_tail)
        p = op2(X, ISA_CONCAT, 0, p, i64s(X, n_tail, tail));
    return p;
}

static cc_irval to_nchw(ctx *X, cc_irval x) { return nchw(X) ? x : transpose(X, x, (int64_t[]){0, 3, 1, 2}, 4); }
static cc_irval from_nchw(ctx *X, cc_irval x) { return nchw(X) ? x : transpose(X, x, (int64_t[]){0, 2, 3, 1}, 4); }

static cc_irval explicit_pads(ctx *X)
{
    const TfvmTf__AttrValue__ListValue *l = attr_list(X, "explicit_paddings");
    if (!l || l->n_i != 8)
        imp_tf_fail(X, "EXPLICIT padding needs 8 explicit_paddings");
    int h = nchw(X) ? 2 : 1;
    int64_t p[4] = {l->i[2 * h], l->i[2 * h + 2], l->i[2 * h + 1], l->i[2 * h + 3]};
    return i64s(X, 4, p);
}

static void conv2d(ctx *X)
{
    int64_t s[2], d[2];
    hw_attr(X, "strides", 1, s);
    hw_attr(X, "dilations", 1, d);
    cc_irval x = to_nchw(X, X->in[0]);
    cc_irval w = transpose(X, X->in[1], (int64_t[]){3, 2, 0, 1}, 4); /* HWIO -> OIHW */
    cc_irval pads;
    if (attr_is(X, "padding", "SAME", false)) {
        int64_t k0[1] = {0}, k2[1] = {2};
        cc_irval in3[3] = {op1(X, ISA_SHAPE, 0, X->in[1]), i64s(X, 1, k0), i64s(X, 1, k2)};
        cc_irval k = op(X, ISA_SLICE, 0, 3, in3);
        cc_irval dd = i64s(X, 2, d), one = i64s(X, 2, (int64_t[]){1, 1});
        cc_irval keff = op2(X, ISA_ADD, 0, op2(X, ISA_MUL, 0, op2(X, ISA_SUB, 0, k, one), dd), one);
        pads = same_pads(X, x, keff, s);
    } else if (attr_is(X, "padding", "EXPLICIT", false)) {
        pads = explicit_pads(X);
    } else {
        pads = i64s(X, 4, (int64_t[]){0, 0, 0, 0});
    }
    /* groups = C / the filter's in-channels (TF2 grouped convolutions), at run time */
    int64_t a1[1] = {1}, a2[1] = {2}, a3[1] = {3};
    cc_irval xc[3] = {op1(X, ISA_SHAPE, 0, x), i64s(X, 1, a1), i64s(X, 1, a2)};
    cc_irval wc[3] = {op1(X, ISA_SHAPE, 0, X->in[1]), i64s(X, 1, a2), i64s(X, 1, a3)};
    cc_irval groups = op2(X, ISA_FLOOR_DIV, 0, op(X, ISA_SLICE, 0, 3, xc), op(X, ISA_SLICE, 0, 3, wc));
    cc_irval p = op2(X, ISA_CONCAT, 0, params(X, s, pads, d, 2), groups);
    cc_irval in3[3] = {x, w, p};
    X->out[0] = from_nchw(X, op(X, ISA_CONV2D, 0, 3, in3));
}

static void pool(ctx *X, isa_op o)
{
    int64_t k[2], s[2];
    hw_attr(X, "ksize", 1, k);
    hw_attr(X, "strides", 1, s);
    cc_irval x = to_nchw(X, X->in[0]);
    cc_irval pads = attr_is(X, "padding", "SAME", false) ? same_pads(X, x, i64s(X, 2, k), s)
                                                          : i64s(X, 4, (int64_t[]){0, 0, 0, 0});
    cc_irval p = op2(X, ISA_CONCAT, 0, i64s(X, 4, (int64_t[]){k[0], k[1], s[0], s[1]}), pads);
    X->out[0] = from_nchw(X, op2(X, o, 0, x, p));
}

/* A per-channel vector made to broadcast against x of the node's layout. */
static cc_irval channel(ctx *X, cc_irval v)
{
    if (!nchw(X))
        return v;
    return op2(X, ISA_RESHAPE, 0, v, i64s(X, 3, (int64_t[]){-1, 1, 1}));
}

static void batchnorm(ctx *X)
{
    if (attr_b(X, "is_training", true))
        imp_tf_fail(X, "is_training=true is not supported (inference graphs only)");
    tfvm_dtype d = dt(X->in[0]);
    cc_irval eps = num(X, dt(X->in[4]), attr_f(X, "epsilon", 1e-4f));
    cc_irval inv = ew1(X, ISA_SQRT, ew2(X, ISA_ADD, X->in[4], eps));
    cc_irval scale = ew2(X, ISA_DIV, X->in[1], inv);
    cc_irval shift = ew2(X, ISA_SUB, X->in[2], ew2(X, ISA_MUL, X->in[3], scale));
    scale = cast(X, channel(X, scale), d);
    shift = cast(X, channel(X, shift), d);
    X->out[0] = op2(X, ISA_ADD, 0, op2(X, ISA_MUL, 0, X->in[0], scale), shift);
    for (uint32_t k = 1; k < X->n->n_out; k++)
        X->out[k] = k == 1 ? X->in[3] : k == 2 ? X->in[4] : X->in[3];
}

/* ---- Shapes and slicing ------------------------------------------------------------------ */

static cc_irval unsqueeze(ctx *X, cc_irval v, int64_t axis)
{
    return op2(X, ISA_UNSQUEEZE, 0, v, i64s(X, 1, &axis));
}

static cc_irval concat_all(ctx *X, const cc_irval *v, uint32_t n, int64_t axis)
{
    cc_irval r = v[0];
    for (uint32_t i = 1; i < n; i++)
        r = op2(X, ISA_CONCAT, axis_attr(X, axis), r, v[i]);
    return r;
}

static cc_irval dim_of(ctx *X, cc_irval x, int64_t axis)
{
    cc_irval shp = op1(X, ISA_SHAPE, 0, x);
    return op2(X, ISA_GATHER, 0, shp, num(X, TFVM_I64, (double)axis));
}

/* x[start:end] along axis (STRIDED_SLICE with one axis, step 1). */
static cc_irval slice_axis(ctx *X, cc_irval x, cc_irval start, cc_irval end, int64_t axis)
{
    cc_irval in[5] = {x, start, end, i64s(X, 1, &axis), i64s(X, 1, (int64_t[]){1})};
    return op(X, ISA_STRIDED_SLICE, 0, 5, in);
}

static void split(ctx *X, uint32_t xi, int64_t axis, const int64_t *sizes, int n)
{
    cc_irval x = X->in[xi];
    if (!sizes) { /* equal parts: dim / n each, at run time */
        cc_irval part = op2(X, ISA_FLOOR_DIV, 0, dim_of(X, x, axis), num(X, TFVM_I64, n));
        for (int i = 0; i < n; i++) {
            cc_irval a = op2(X, ISA_MUL, 0, part, num(X, TFVM_I64, i));
            cc_irval b = op2(X, ISA_MUL, 0, part, num(X, TFVM_I64, i + 1));
            X->out[i] = slice_axis(X, x, unsqueeze(X, a, 0), unsqueeze(X, b, 0), axis);
        }
        return;
    }
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0 && i != n - 1)
            imp_tf_fail(X, "a -1 size_splits entry is supported only last");
        int64_t end = sizes[i] < 0 ? INT64_MAX : sat_add(at, sizes[i]);
        X->out[i] = slice_axis(X, x, i64s(X, 1, &at), i64s(X, 1, &end), axis);
        at = end;
    }
}

static void strided_slice(ctx *X)
{
    int64_t b[16], e[16], s[16];
    int nb = const_ints(X->in[1], b, 16), ne = const_ints(X->in[2], e, 16), ns = const_ints(X->in[3], s, 16);
    int64_t bm = attr_i(X, "begin_mask", 0), em = attr_i(X, "end_mask", 0), el = attr_i(X, "ellipsis_mask", 0);
    int64_t na = attr_i(X, "new_axis_mask", 0), sh = attr_i(X, "shrink_axis_mask", 0);
    if (ns < 0)
        imp_tf_fail(X, "strides must be constant");
    int n = ns;
    if ((nb >= 0 && nb != n) || (ne >= 0 && ne != n))
        imp_tf_fail(X, "begin, end and strides differ in length");
    bool dynamic = nb < 0 || ne < 0;
    if (dynamic && (el || na))
        imp_tf_fail(X, "a non-constant begin or end with ellipsis or new axes is not supported");
    /* spec entry i -> axis of x (negative after an ellipsis); new axes are
     * inserted afterwards, shrunk axes squeezed */
    int64_t axes[16], starts[16], ends[16], steps[16], squeeze[16], newax[16];
    int na_n = 0, nsq = 0, nnew = 0, after = 0;
    int el_at = -1;
    for (int i = 0; i < n; i++)
        if (el >> i & 1) {
            if (el_at >= 0)
                imp_tf_fail(X, "two ellipses");
            el_at = i;
        }
    if (el_at >= 0)
        for (int i = el_at + 1; i < n; i++)
            if (!(na >> i & 1))
                after++;
    int axis = 0, out_axis = 0;
    int64_t neg = -after;
    for (int i = 0; i < n; i++) {
        if (i == el_at) {
            axis = -1; /* from here on, axes count from the end */
            continue;
        }
        if (na >> i & 1) {
            if (el_at >= 0 && i > el_at)
                imp_tf_fail(X, "a new axis after an ellipsis is not supported");
            newax[nnew++] = out_axis++;
            continue;
        }
        int64_t ax = axis < 0 ? neg++ : axis++;
        if (s[i] == 0)
            imp_tf_fail(X, "stride 0");
        axes[na_n] = ax;
        steps[na_n] = s[i];
        if (!dynamic) {
            int64_t st = b[i], en = e[i];
            if (sh >> i & 1) {
                en = st == -1 ? INT64_MAX : sat_add(st, 1);
                steps[na_n] = 1;
            } else {
                if (bm >> i & 1)
                    st = s[i] > 0 ? 0 : INT64_MAX;
                if (em >> i & 1)
                    en = s[i] > 0 ? INT64_MAX : INT64_MIN;
            }
            starts[na_n] = st;
            ends[na_n] = en;
        }
        if (sh >> i & 1)
            squeeze[nsq++] = ax;
        else
            out_axis++;
        na_n++;
    }
    cc_irval x = X->in[0];
    cc_irval st, en;
    if (!dynamic) {
        st = i64s(X, (uint32_t)na_n, starts);
        en = i64s(X, (uint32_t)na_n, ends);
    } else {
        /* begin/end at run time: masked entries replaced, shrink ends = begin + 1 */
        cc_irval bv = vec64(X, X->in[1]), ev = vec64(X, X->in[2]);
        int64_t bfill[16], efill[16], bmask[16], emask[16], shm[16];
        for (int i = 0; i < n; i++) {
            bfill[i] = s[i] > 0 ? 0 : INT64_MAX;
            efill[i] = s[i] > 0 ? INT64_MAX : INT64_MIN;
            bmask[i] = (bm >> i & 1) && !(sh >> i & 1);
            emask[i] = (em >> i & 1) && !(sh >> i & 1);
            shm[i] = sh >> i & 1;
        }
        cc_irval one = i64s(X, (uint32_t)n, (int64_t[16]){1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
        cc_irval bmv = cast(X, i64s(X, (uint32_t)n, bmask), TFVM_BOOL), emv = cast(X, i64s(X, (uint32_t)n, emask),
                                                                                   TFVM_BOOL);
        cc_irval shv = cast(X, i64s(X, (uint32_t)n, shm), TFVM_BOOL);
        cc_irval sel1[3] = {bmv, i64s(X, (uint32_t)n, bfill), bv};
        st = op(X, ISA_SELECT, 0, 3, sel1);
        cc_irval bp1 = op2(X, ISA_ADD, 0, bv, one);
        cc_irval lastrow = op2(X, ISA_EQUAL, 0, bv, i64s(X, (uint32_t)n, (int64_t[16]){-1, -1, -1, -1, -1, -1, -1,
                                                                                        -1, -1, -1, -1, -1, -1, -1,
                                                                                        -1, -1}));
        int64_t big[16];
        for (int i = 0; i < 16; i++)
            big[i] = INT64_MAX;
        cc_irval sel2[3] = {lastrow, i64s(X, (uint32_t)n, big), bp1};
        cc_irval shend = op(X, ISA_SELECT, 0, 3, sel2);
        cc_irval sel3[3] = {emv, i64s(X, (uint32_t)n, efill), ev};
        en = op(X, ISA_SELECT, 0, 3, sel3);
        cc_irval sel4[3] = {shv, shend, en};
        en = op(X, ISA_SELECT, 0, 3, sel4);
        for (int i = 0; i < n; i++)
            if (sh >> i & 1)
                steps[i] = 1;
    }
    cc_irval in5[5] = {x, st, en, i64s(X, (uint32_t)na_n, axes), i64s(X, (uint32_t)na_n, steps)};
    x = op(X, ISA_STRIDED_SLICE, 0, 5, in5);
    if (nsq) {
        /* squeeze by position among the remaining axes: negative axes stay
         * valid as long as no later axis is squeezed before them */
        x = op2(X, ISA_SQUEEZE, 0, x, i64s(X, (uint32_t)nsq, squeeze));
    }
    if (nnew)
        x = op2(X, ISA_UNSQUEEZE, 0, x, i64s(X, (uint32_t)nnew, newax));
    X->out[0] = x;
}

static void slice(ctx *X)
{
    cc_irval b = vec64(X, X->in[1]), sz = vec64(X, X->in[2]);
    int64_t bv[16], sv[16];
    int nb = const_ints(b, bv, 16), ns = const_ints(sz, sv, 16);
    cc_irval end;
    if (nb >= 0 && nb == ns) {
        for (int i = 0; i < nb; i++)
            sv[i] = sv[i] < 0 ? INT64_MAX : sat_add(bv[i], sv[i]);
        end = i64s(X, (uint32_t)nb, sv);
    } else {
        cc_irval neg = op2(X, ISA_LESS, 0, sz, num(X, TFVM_I64, 0));
        cc_irval sel[3] = {neg, num(X, TFVM_I64, 0), op2(X, ISA_ADD, 0, b, sz)};
        sel[1] = cc_const_scalar(X->C, X->b, TFVM_I64, 0, INT64_MAX);
        end = op(X, ISA_SELECT, 0, 3, sel);
    }
    cc_irval in3[3] = {X->in[0], b, end};
    X->out[0] = op(X, ISA_SLICE, 0, 3, in3);
}

static void reduce(ctx *X, isa_op o)
{
    bool keep = attr_b(X, "keep_dims", false);
    int64_t ax[16];
    int n = const_ints(X->in[1], ax, 16);
    if (n == 0) { /* TF: no axes = nothing reduced */
        X->out[0] = X->in[0];
        return;
    }
    X->out[0] = op2(X, o, keep ? ISA_OPT_KEEPDIMS : 0, X->in[0], vec64(X, X->in[1]));
}

/* ---- Control flow (functional) and calls ----------------------------------------------- */

static cc_irval truth(ctx *X, cc_irval c)
{
    if (dt(c) == TFVM_BOOL)
        return c;
    return ew2(X, ISA_NOT_EQUAL, c, num(X, dt(c), 0));
}

static cc_vtype *out_types(ctx *X)
{
    cc_vtype *t = cc_array(X->C, X->n->n_out + 1, sizeof *t);
    for (uint32_t k = 0; k < X->n->n_out; k++) {
        tfvm_dtype d = imp_tf_out_dtype(X->n->def, k);
        t[k] = ten(d ? d : TFVM_F32);
    }
    return t;
}

/* A functional While: cond and body inlined into one While. TF passes loop
 * invariants as loop variables that the body returns unchanged; those stay
 * outside (read through ENTER const) instead of costing a SWITCH and a
 * NEXTITER every iteration. So does tf.while_loop's loop counter when
 * nothing reads it: its (dead) increment is left to the optimizer. */
static void fn_while(ctx *X)
{
    uint32_t n = X->n->n_in;
    if (X->n->n_out != n)
        imp_tf_fail(X, "has %u inputs and %u outputs", n, X->n->n_out);
    const char *body = attr_func(X, "body"), *cond = attr_func(X, "cond");
    bool *inv = cc_array(X->C, n + 1, sizeof *inv);
    uint32_t nv = 0;
    for (uint32_t k = 0; k < n; k++) {
        /* an invariant, or a counter whose value nobody reads: both stay out */
        inv[k] = imp_tf_passes_through(X->T, body, k) ||
                 (imp_tf_dead_counter(X->T, cond, body, k) && !imp_tf_output_used(X, k));
        nv += !inv[k];
    }
    if (nv == 0) /* a loop needs a variable: keep the first */
        inv[0] = false, nv = 1;
    cc_vtype *t = cc_array(X->C, nv + 1, sizeof *t);
    cc_irval *init = cc_array(X->C, nv + 1, sizeof *init);
    const char **names = cc_array(X->C, nv + 1, sizeof *names);
    uint32_t j = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (inv[k])
            continue;
        init[j] = X->in[k];
        t[j] = X->in[k].n->types[X->in[k].k];
        char *nm = cc_alloc(X->C, 16);
        snprintf(nm, 16, "v%u", k);
        names[j++] = nm;
    }
    cc_node *w = cc_while_new(X->C, X->b, nv, init, t, names, NULL);
    int64_t par = attr_i(X, "parallel_iterations", 0);
    if (par > 0)
        w->u.loop.parallel = (uint32_t)(par > ISA_MAX_PARALLEL ? ISA_MAX_PARALLEL : par);
    cc_irval *lv = cc_array(X->C, n + 1, sizeof *lv);
    for (uint32_t k = 0, i = 0; k < n; k++)
        lv[k] = inv[k] ? X->in[k] : cc_lvar(w, i++);
    cc_irval c;
    ctx H = *X;
    H.b = w->u.loop.head;
    imp_tf_inline(&H, cond, H.b, lv, n, &c, 1);
    c = truth(&H, c);
    cc_block_results(X->C, H.b, 1, &c);
    cc_irval *next = cc_array(X->C, n + 1, sizeof *next);
    ctx B = *X;
    B.b = w->u.loop.body;
    imp_tf_inline(&B, body, B.b, lv, n, next, n);
    for (uint32_t k = 0, i = 0; k < n; k++)
        if (!inv[k])
            next[i++] = next[k];
    cc_block_results(X->C, B.b, nv, next);
    for (uint32_t k = 0, i = 0; k < n; k++)
        X->out[k] = inv[k] ? X->in[k] : cc_out(w, i++);
}

/* An If choosing branch `then` or `els` (function names) on c; inputs from 1. */
static cc_node *fn_if2(ctx *X, cc_blk *b, cc_irval c, const char *then, const char *els, uint32_t first)
{
    uint32_t na = X->n->n_in - first, nr = X->n->n_out;
    cc_node *x = cc_if_new(X->C, b, c, nr, out_types(X), NULL);
    cc_irval *r = cc_array(X->C, nr + 1, sizeof *r);
    ctx Y = *X;
    Y.b = x->u.cond.then;
    imp_tf_inline(&Y, then, Y.b, X->in + first, na, r, nr);
    cc_block_results(X->C, Y.b, nr, r);
    if (els) {
        r = cc_array(X->C, nr + 1, sizeof *r);
        Y.b = x->u.cond.els;
        imp_tf_inline(&Y, els, Y.b, X->in + first, na, r, nr);
        cc_block_results(X->C, Y.b, nr, r);
    }
    return x;
}

static void fn_if(ctx *X)
{
    cc_irval c = truth(X, X->in[0]);
    cc_node *x = fn_if2(X, X->b, c, attr_func(X, "then_branch"), attr_func(X, "else_branch"), 1);
    for (uint32_t k = 0; k < X->n->n_out; k++)
        X->out[k] = cc_out(x, k);
}

/* Case: nested Ifs, index == 0 ? b0 : index == 1 ? b1 : ... : the last
 * (TF runs the last branch for an index out of range). */
static void fn_case(ctx *X)
{
    const TfvmTf__AttrValue__ListValue *l = attr_list(X, "branches");
    if (!l || l->n_func == 0)
        imp_tf_fail(X, "has no branches");
    uint32_t nb = (uint32_t)l->n_func, nr = X->n->n_out, na = X->n->n_in - 1;
    cc_irval idx = cast(X, X->in[0], TFVM_I32);
    cc_blk *b = X->b;
    cc_node *outer = NULL;
    cc_node *prev = NULL;
    for (uint32_t i = 0; i + 1 < nb; i++) {
        ctx Y = *X;
        Y.b = b;
        cc_irval c = ew2(&Y, ISA_EQUAL, idx, num(&Y, TFVM_I32, i));
        cc_node *x = cc_if_new(X->C, b, c, nr, out_types(X), NULL);
        cc_irval *r = cc_array(X->C, nr + 1, sizeof *r);
        Y.b = x->u.cond.then;
        imp_tf_inline(&Y, l->func[i]->name, Y.b, X->in + 1, na, r, nr);
        cc_block_results(X->C, Y.b, nr, r);
        if (prev) {
            cc_irval *o = cc_array(X->C, nr + 1, sizeof *o);
            for (uint32_t k = 0; k < nr; k++)
                o[k] = cc_out(x, k);
            cc_block_results(X->C, prev->u.cond.els, nr, o);
        } else {
            outer = x;
        }
        prev = x;
        b = x->u.cond.els;
    }
    cc_irval *r = cc_array(X->C, nr + 1, sizeof *r);
    ctx Y = *X;
    Y.b = b;
    imp_tf_inline(&Y, l->func[nb - 1]->name, b, X->in + 1, na, r, nr);
    if (!prev) {
        for (uint32_t k = 0; k < nr; k++)
            X->out[k] = r[k];
        return;
    }
    cc_block_results(X->C, b, nr, r);
    for (uint32_t k = 0; k < nr; k++)
        X->out[k] = cc_out(outer, k);
}

static void fn_call(ctx *X, const char *name)
{
    cc_ifn *f = imp_tf_function(X->T, name, X->n);
    if (f->n_params != X->n->n_in)
        imp_tf_fail(X, "calls '%s' with %u arguments, it takes %u", name, X->n->n_in, f->n_params);
    cc_node *c = cc_call_new(X->C, X->b, f, X->in);
    for (uint32_t k = 0; k < X->n->n_out && k < f->n_results; k++)
        X->out[k] = cc_out(c, k);
}

/* ---- TensorArrays: the contents travel as the flow value --------------------------- */

static void tensor_array(ctx *X)
{
    const tf_attr *a = attr(X, "dtype");
    tfvm_dtype d = a ? imp_tf_dtype(a->type) : 0;
    if (!d)
        imp_tf_fail(X, "unsupported element dtype");
    int64_t zero = 0;
    X->out[0] = (cc_irval){NULL, 0}; /* the handle is never a value */
    X->out[1] = cc_const_new(X->C, X->b, d, 1, &zero, NULL, 0, false);
}

/* ---- More ops ---------------------------------------------------------------------------- */

static bool is(ctx *X, const char *o) { return strcmp(X->n->op, o) == 0; }

/* TF paddings [rank, 2] -> tfvm pads [before..., after...]: the transpose, flattened. */
static cc_irval pads_of(ctx *X, cc_irval p)
{
    cc_irval t = transpose(X, cast(X, p, TFVM_I64), (int64_t[]){1, 0}, 2);
    int64_t m1 = -1;
    return op2(X, ISA_RESHAPE, 0, t, i64s(X, 1, &m1));
}

static void depthwise(ctx *X)
{
    int64_t s[2], d[2];
    hw_attr(X, "strides", 1, s);
    hw_attr(X, "dilations", 1, d);
    cc_irval x = to_nchw(X, X->in[0]);
    /* filter [H, W, C, M] -> [H, W, 1, C*M] -> OIHW [C*M, 1, H, W], groups = C */
    int64_t z[1] = {0}, t2[1] = {2};
    cc_irval hw3[3] = {op1(X, ISA_SHAPE, 0, X->in[1]), i64s(X, 1, z), i64s(X, 1, t2)};
    cc_irval fshape = op2(X, ISA_CONCAT, 0, op(X, ISA_SLICE, 0, 3, hw3), i64s(X, 2, (int64_t[]){1, -1}));
    cc_irval f = op2(X, ISA_RESHAPE, 0, X->in[1], fshape);
    f = transpose(X, f, (int64_t[]){3, 2, 0, 1}, 4);
    cc_irval pads;
    if (attr_is(X, "padding", "SAME", false)) {
        int64_t k0[1] = {0}, k2[1] = {2};
        cc_irval in3[3] = {op1(X, ISA_SHAPE, 0, X->in[1]), i64s(X, 1, k0), i64s(X, 1, k2)};
        cc_irval k = op(X, ISA_SLICE, 0, 3, in3);
        cc_irval dd = i64s(X, 2, d), one = i64s(X, 2, (int64_t[]){1, 1});
        cc_irval keff = op2(X, ISA_ADD, 0, op2(X, ISA_MUL, 0, op2(X, ISA_SUB, 0, k, one), dd), one);
        pads = same_pads(X, x, keff, s);
    } else if (attr_is(X, "padding", "EXPLICIT", false)) {
        pads = explicit_pads(X);
    } else {
        pads = i64s(X, 4, (int64_t[]){0, 0, 0, 0});
    }
    /* groups: the input's channels (dim 2 of the filter), known at run time */
    int64_t two[1] = {2}, three[1] = {3};
    cc_irval in3[3] = {op1(X, ISA_SHAPE, 0, X->in[1]), i64s(X, 1, two), i64s(X, 1, three)};
    cc_irval groups = op(X, ISA_SLICE, 0, 3, in3);
    cc_irval p = params(X, s, pads, d, 2);
    p = op2(X, ISA_CONCAT, 0, p, groups);
    cc_irval c3[3] = {x, f, p};
    X->out[0] = from_nchw(X, op(X, ISA_CONV2D, 0, 3, c3));
}

static void topk(ctx *X)
{
    cc_irval x = X->in[0];
    cc_irval in3[3] = {x, X->in[1], cc_const_scalar(X->C, X->b, TFVM_BOOL, 1, 1)};
    cc_irval idx = op(X, ISA_TOPK, axis_attr(X, -1), 3, in3);
    X->out[0] = op2(X, ISA_GATHER_ELEMENTS, axis_attr(X, -1), x, idx);
    const tf_attr *a = attr(X, "index_type");
    X->out[1] = cast(X, idx, a ? imp_tf_dtype(a->type) : TFVM_I32);
}

/* All / Any: a min / max over bools as i32 */
static void bool_reduce(ctx *X, isa_op o)
{
    bool keep = attr_b(X, "keep_dims", false);
    cc_irval x = cast(X, X->in[0], TFVM_I32);
    int64_t ax[16];
    if (const_ints(X->in[1], ax, 16) == 0) {
        X->out[0] = X->in[0];
        return;
    }
    cc_irval r = op2(X, o, keep ? ISA_OPT_KEEPDIMS : 0, x, vec64(X, X->in[1]));
    X->out[0] = cast(X, r, TFVM_BOOL);
}

static void reverse(ctx *X)
{
    int64_t ax[16];
    int n = const_ints(X->in[1], ax, 16);
    if (n < 0)
        imp_tf_fail(X, "axis must be constant");
    if (n == 0) {
        X->out[0] = X->in[0];
        return;
    }
    int64_t st[16], en[16], sp[16];
    for (int i = 0; i < n; i++)
        st[i] = -1, en[i] = INT64_MIN, sp[i] = -1;
    cc_irval in5[5] = {X->in[0], i64s(X, (uint32_t)n, st), i64s(X, (uint32_t)n, en), i64s(X, (uint32_t)n, ax),
                       i64s(X, (uint32_t)n, sp)};
    X->out[0] = op(X, ISA_STRIDED_SLICE, 0, 5, in5);
}

/* ResizeBilinear / ResizeNearestNeighbor on NHWC: RESIZE to sizes
 * [N, h, w, C]; TF's align_corners and half_pixel_centers pick the
 * coordinate transformation (and the rounding of nearest). */
static void resize(ctx *X, bool linear)
{
    cc_irval x = X->in[0];
    bool ac = attr_b(X, "align_corners", false), hp = attr_b(X, "half_pixel_centers", false);
    if (ac && hp)
        imp_tf_fail(X, "align_corners and half_pixel_centers together");
    uint32_t o = linear ? ISA_OPT_LINEAR : 0;
    if (ac)
        o |= ISA_OPT_ALIGN_CORNERS | (linear ? 0 : ISA_OPT_PREFER_CEIL);
    else if (hp)
        o |= linear ? 0 : ISA_OPT_TF_HALF_PIXEL_NN | ISA_OPT_NEAREST_FLOOR;
    else
        o |= ISA_OPT_ASYMMETRIC | (linear ? 0 : ISA_OPT_NEAREST_FLOOR);
    cc_irval shp = op1(X, ISA_SHAPE, 0, x);
    int64_t a0[1] = {0}, a1[1] = {1}, a3[1] = {3}, a4[1] = {4};
    cc_irval n3[3] = {shp, i64s(X, 1, a0), i64s(X, 1, a1)}, c3[3] = {shp, i64s(X, 1, a3), i64s(X, 1, a4)};
    cc_irval sizes = op2(X, ISA_CONCAT, 0, op(X, ISA_SLICE, 0, 3, n3), vec64(X, X->in[1]));
    sizes = op2(X, ISA_CONCAT, 0, sizes, op(X, ISA_SLICE, 0, 3, c3));
    int64_t zero = 0;
    cc_irval in3[3] = {x, cc_const_new(X->C, X->b, TFVM_F32, 1, &zero, NULL, 0, false), sizes};
    X->out[0] = op(X, ISA_RESIZE, o, 3, in3);
}

/* Returns true when it converted the node. */
static bool more_ops(ctx *X)
{
    const imp_tf_node *n = X->n;
    cc_irval x = n->n_in ? X->in[0] : (cc_irval){NULL, 0};
    tfvm_dtype d = x.n ? dt(x) : 0;
    if (is(X, "AddN")) {
        cc_irval r = x;
        for (uint32_t i = 1; i < n->n_in; i++)
            r = ew2(X, ISA_ADD, r, X->in[i]);
        X->out[0] = r;
    } else if (is(X, "SquaredDifference")) {
        cc_irval t = ew2(X, ISA_SUB, x, X->in[1]);
        X->out[0] = ew2(X, ISA_MUL, t, t);
    } else if (is(X, "Reciprocal") || is(X, "Inv")) {
        X->out[0] = ew2(X, ISA_DIV, num(X, d, 1), x);
    } else if (is(X, "LeakyRelu")) {
        X->out[0] = cc_decompose(X->C, X->b, CC_DC_LEAKY_RELU, x, (double[]){attr_f(X, "alpha", 0.2f)});
    } else if (is(X, "Softplus")) {
        X->out[0] = cc_decompose(X->C, X->b, CC_DC_SOFTPLUS, x, NULL);
    } else if (is(X, "Softsign")) {
        X->out[0] = cc_decompose(X->C, X->b, CC_DC_SOFTSIGN, x, NULL);
    } else if (is(X, "Addons>Mish")) { /* TensorFlow Addons' op; tf.keras spells mish out in Softplus and Tanh */
        X->out[0] = cc_decompose(X->C, X->b, CC_DC_MISH, x, NULL);
    } else if (is(X, "Selu")) { /* TF's constants, in double */
        const double p[2] = {1.6732632423543772848170429916717, 1.0507009873554804934193349852946};
        X->out[0] = cc_decompose(X->C, X->b, CC_DC_SELU, x, p);
    } else if (is(X, "Expm1")) {
        X->out[0] = cc_decompose(X->C, X->b, CC_DC_EXPM1, x, NULL);
    } else if (is(X, "Log1p")) {
        X->out[0] = cc_decompose(X->C, X->b, CC_DC_LOG1P, x, NULL);
    } else if (is(X, "ClipByValue")) {
        X->out[0] = ew2(X, ISA_MIN, ew2(X, ISA_MAX, x, X->in[1]), X->in[2]);
    } else if (is(X, "BroadcastTo")) {
        X->out[0] = op2(X, ISA_EXPAND, 0, x, vec64(X, X->in[1]));
    } else if (is(X, "ReverseV2")) {
        reverse(X);
    } else if (is(X, "IsNan")) {
        X->out[0] = ew2(X, ISA_NOT_EQUAL, x, x);
    } else if (is(X, "IsFinite")) {
        X->out[0] = ew2(X, ISA_LESS, ew1(X, ISA_ABS, x), num(X, d, INFINITY));
    } else if (is(X, "All")) {
        bool_reduce(X, ISA_REDUCE_MIN);
    } else if (is(X, "Any")) {
        bool_reduce(X, ISA_REDUCE_MAX);
    } else if (is(X, "Mod") || is(X, "TruncateMod")) {
        X->out[0] = ew2(X, ISA_MOD, x, X->in[1]);
    } else if (is(X, "TruncateDiv")) {
        X->out[0] = ew2(X, ISA_DIV, x, X->in[1]);
    } else if (is(X, "Pad")) {
        X->out[0] = op2(X, ISA_PAD, 0, x, pads_of(X, X->in[1]));
    } else if (is(X, "PadV2")) {
        cc_irval in3[3] = {x, pads_of(X, X->in[1]), X->in[2]};
        X->out[0] = op(X, ISA_PADV, 0, 3, in3);
    } else if (is(X, "MirrorPad")) {
        if (!attr_is(X, "mode", "REFLECT", false))
            imp_tf_fail(X, "only mode REFLECT is supported");
        cc_irval in3[3] = {x, pads_of(X, X->in[1]), num(X, d, 0)};
        X->out[0] = op(X, ISA_PADV, ISA_OPT_REFLECT, 3, in3);
    } else if (is(X, "DepthwiseConv2dNative")) {
        depthwise(X);
    } else if (is(X, "TopKV2")) {
        topk(X);
    } else if (is(X, "ResizeBilinear") || is(X, "ResizeNearestNeighbor")) {
        resize(X, is(X, "ResizeBilinear"));
    } else if (is(X, "LRN")) { /* TF's alpha multiplies the sum; ONNX's is divided by size */
        float size = 2.0f * (float)attr_i(X, "depth_radius", 5) + 1.0f;
        float p[4] = {size, attr_f(X, "alpha", 1.0f) * size, attr_f(X, "beta", 0.5f), attr_f(X, "bias", 1.0f)};
        int64_t four = 4;
        cc_irval pv = cc_const_new(X->C, X->b, TFVM_F32, 1, &four, p, sizeof p, false);
        X->out[0] = from_nchw(X, op2(X, ISA_LRN, 0, to_nchw(X, x), pv));
    } else if (is(X, "L2Loss")) {
        cc_irval sq = ew2(X, ISA_MUL, x, x);
        cc_irval s = op2(X, ISA_REDUCE_SUM, 0, sq, i64s(X, 0, NULL));
        X->out[0] = ew2(X, ISA_DIV, s, num(X, d, 2));
    } else {
        return false;
    }
    return true;
}

/* ---- The table -------------------------------------------------------------------------- */

typedef struct simple {
    const char *name;
    isa_op op;
    uint8_t kind; /* 1 unary, 2 binary, 3 compare/logic (bool result) */
} simple;

static const simple simples[] = {
    {"AddV2", ISA_ADD, 2}, {"Add", ISA_ADD, 2}, {"Sub", ISA_SUB, 2}, {"Mul", ISA_MUL, 2},
    {"RealDiv", ISA_DIV, 2}, {"Div", ISA_DIV, 2}, {"FloorDiv", ISA_FLOOR_DIV, 2}, {"FloorMod", ISA_FLOOR_MOD, 2},
    {"Maximum", ISA_MAX, 2}, {"Minimum", ISA_MIN, 2}, {"Pow", ISA_POW, 2}, {"Neg", ISA_NEG, 1},
    {"Abs", ISA_ABS, 1}, {"Exp", ISA_EXP, 1}, {"Log", ISA_LOG, 1}, {"Sqrt", ISA_SQRT, 1},
    {"Tanh", ISA_TANH, 1}, {"Sigmoid", ISA_SIGMOID, 1}, {"Relu", ISA_RELU, 1}, {"Floor", ISA_FLOOR, 1},
    {"Ceil", ISA_CEIL, 1}, {"Round", ISA_ROUND, 1}, {"Sin", ISA_SIN, 1}, {"Cos", ISA_COS, 1},
    {"Erf", ISA_ERF, 1}, {"Sign", ISA_SIGN, 1}, {"Less", ISA_LESS, 3}, {"LessEqual", ISA_LESS_EQUAL, 3},
    {"Greater", ISA_GREATER, 3}, {"GreaterEqual", ISA_GREATER_EQUAL, 3}, {"Equal", ISA_EQUAL, 3},
    {"NotEqual", ISA_NOT_EQUAL, 3}, {"LogicalAnd", ISA_AND, 3}, {"LogicalOr", ISA_OR, 3},
    {"LogicalNot", ISA_NOT, 4},
};

static void pass_through(ctx *X)
{
    for (uint32_t k = 0; k < X->n->n_out && k < X->n->n_in; k++)
        X->out[k] = X->in[k];
}

/* The fewest data inputs each op reads (the converters index X->in by them). */
static const struct {
    const char *op;
    uint8_t n;
} arity[] = {
    {"Select", 3}, {"SelectV2", 3}, {"MatMul", 2}, {"BatchMatMul", 2}, {"BatchMatMulV2", 2}, {"BatchMatMulV3", 2},
    {"BiasAdd", 2}, {"BiasAddV1", 2}, {"Conv2D", 2}, {"MaxPool", 1}, {"AvgPool", 1}, {"FusedBatchNorm", 5},
    {"FusedBatchNormV2", 5}, {"FusedBatchNormV3", 5}, {"Reshape", 2}, {"Shape", 1}, {"Size", 1}, {"Rank", 1},
    {"Pack", 1}, {"Unpack", 1}, {"Split", 2}, {"SplitV", 3}, {"Slice", 3}, {"StridedSlice", 4}, {"GatherV2", 3},
    {"Gather", 2}, {"ResourceGather", 2}, {"Squeeze", 1}, {"ExpandDims", 2}, {"Transpose", 2}, {"Tile", 2}, {"Fill", 2},
    {"ZerosLike", 1}, {"OnesLike", 1}, {"Range", 3}, {"Sum", 2}, {"Mean", 2}, {"Max", 2}, {"Min", 2},
    {"Prod", 2}, {"ArgMax", 2}, {"ArgMin", 2}, {"OneHot", 4}, {"Cumsum", 2}, {"While", 1},
    {"StatelessWhile", 1}, {"If", 1}, {"StatelessIf", 1}, {"Case", 1}, {"StatelessCase", 1},
    {"TensorArrayV3", 1}, {"TensorArrayWriteV3", 4}, {"TensorArrayReadV3", 3}, {"TensorArrayGatherV3", 3},
    {"TensorArrayScatterV3", 4}, {"TensorArraySizeV3", 2}, {"Rsqrt", 1}, {"Square", 1}, {"Relu6", 1},
    {"Elu", 1}, {"Softmax", 1}, {"LogSoftmax", 1}, {"Cast", 1}, {"TensorListSetItem", 3},
    {"TensorListGetItem", 2}, {"AddN", 1}, {"SquaredDifference", 2}, {"Reciprocal", 1}, {"Inv", 1},
    {"LeakyRelu", 1}, {"Softplus", 1}, {"Softsign", 1}, {"Addons>Mish", 1}, {"Selu", 1}, {"Expm1", 1}, {"Log1p", 1},
    {"ClipByValue", 3}, {"BroadcastTo", 2}, {"ReverseV2", 2}, {"IsNan", 1}, {"IsFinite", 1}, {"All", 2},
    {"Any", 2}, {"Mod", 2}, {"TruncateMod", 2}, {"TruncateDiv", 2}, {"Pad", 2}, {"PadV2", 3},
    {"MirrorPad", 2}, {"DepthwiseConv2dNative", 2}, {"TopKV2", 2}, {"L2Loss", 1}, {"ResizeBilinear", 2},
    {"ResizeNearestNeighbor", 2}, {"LRN", 1}, {"TensorListStack", 1}, {"TensorListFromTensor", 1}, {"TensorListLength", 1},
};

void imp_tf_convert(imp_tf_opctx *X)
{
    const imp_tf_node *n = X->n;
    for (size_t i = 0; i < sizeof arity / sizeof *arity; i++)
        if (is(X, arity[i].op) && n->n_in < arity[i].n)
            imp_tf_fail(X, "needs %u inputs, has %u", arity[i].n, n->n_in);
    for (size_t i = 0; i < sizeof simples / sizeof *simples; i++)
        if (is(X, simples[i].name) && n->n_in < (simples[i].kind == 1 || simples[i].kind == 4 ? 1u : 2u))
            imp_tf_fail(X, "needs %u inputs, has %u", simples[i].kind == 1 || simples[i].kind == 4 ? 1 : 2, n->n_in);
    for (size_t i = 0; i < sizeof simples / sizeof *simples; i++) {
        const simple *s = &simples[i];
        if (!is(X, s->name))
            continue;
        if (s->kind == 1 || s->kind == 4)
            X->out[0] = ew1(X, s->op, X->in[0]);
        else
            X->out[0] = ew2(X, s->op, X->in[0], X->in[1]);
        return;
    }
    cc_irval x = n->n_in ? X->in[0] : (cc_irval){NULL, 0};
    tfvm_dtype d = x.n ? dt(x) : 0;
    if (is(X, "Const")) {
        const tf_attr *a = attr(X, "value");
        if (!a || a->value_case != TFVM_TF__ATTR_VALUE__VALUE_TENSOR)
            imp_tf_fail(X, "has no value");
        X->out[0] = imp_tf_tensor(X, a->tensor);
    } else if (is(X, "Identity") || is(X, "StopGradient") || is(X, "Snapshot") || is(X, "PreventGradient") ||
               is(X, "IdentityN") || is(X, "PlaceholderWithDefault") || is(X, "EnsureShape") ||
               is(X, "CheckNumerics")) {
        pass_through(X);
    } else if (is(X, "VarHandleOp")) {
        /* a SavedModel's variable: its value is the handle's (inference never assigns) */
        const TfvmTf__TensorProto *v = imp_tf_variable(X->T, n->name);
        if (!v)
            imp_tf_fail(X, "a variable with no value (load the SavedModel directory, or freeze the graph)");
        X->out[0] = imp_tf_tensor(X, v);
    } else if (is(X, "ReadVariableOp")) {
        pass_through(X);
    } else if (is(X, "Placeholder")) {
        imp_tf_fail(X, "a Placeholder inside a function");
    } else if (is(X, "Rsqrt")) {
        X->out[0] = ew2(X, ISA_DIV, num(X, d, 1), ew1(X, ISA_SQRT, x));
    } else if (is(X, "Square")) {
        X->out[0] = ew2(X, ISA_MUL, x, x);
    } else if (is(X, "Relu6")) {
        X->out[0] = ew2(X, ISA_MIN, ew1(X, ISA_RELU, x), num(X, d, 6));
    } else if (is(X, "Elu")) {
        X->out[0] = cc_decompose(X->C, X->b, CC_DC_ELU, x, (double[]){1.0});
    } else if (is(X, "Softmax") || is(X, "LogSoftmax")) {
        X->out[0] = op1(X, is(X, "Softmax") ? ISA_SOFTMAX : ISA_LOG_SOFTMAX, axis_attr(X, -1), x);
    } else if (is(X, "Select") || is(X, "SelectV2")) {
        cc_irval c = X->in[0];
        bool sc = scalar(c) && scalar(X->in[1]) && scalar(X->in[2]);
        if (is(X, "Select") && !sc) {
            /* v1 Select: a vector condition picks rows of higher-rank operands.
             * Reshaping it to shape(c) ++ [1] * (rank(x) - rank(c)) makes every
             * case (scalar, same shape, rows) an ordinary broadcast. */
            cc_irval rx = op1(X, ISA_SHAPE, 0, op1(X, ISA_SHAPE, 0, X->in[1]));
            cc_irval sc_ = op1(X, ISA_SHAPE, 0, c);
            cc_irval rc = op1(X, ISA_SHAPE, 0, sc_);
            cc_irval ones = op2(X, ISA_FILL, 0, op2(X, ISA_SUB, 0, rx, rc), num(X, TFVM_I64, 1));
            cc_irval shp = op2(X, ISA_CONCAT, 0, sc_, ones);
            c = op2(X, ISA_RESHAPE, 0, c, shp);
        }
        cc_irval sel[3] = {c, X->in[1], X->in[2]};
        X->out[0] = op(X, ISA_SELECT, 0, 3, sel);
    } else if (is(X, "Cast")) {
        const tf_attr *a = attr(X, "DstT");
        tfvm_dtype to = a ? imp_tf_dtype(a->type) : 0;
        if (!to)
            imp_tf_fail(X, "unsupported destination dtype");
        X->out[0] = dt(x) == to ? x : cc_cast_x86(X->C, X->b, x, to); /* NaN to int: what TF gives */
    } else if (is(X, "MatMul") || is(X, "BatchMatMulV2") || is(X, "BatchMatMul") || is(X, "BatchMatMulV3")) {
        bool ta = is(X, "MatMul") ? attr_b(X, "transpose_a", false) : attr_b(X, "adj_x", false);
        bool tb = is(X, "MatMul") ? attr_b(X, "transpose_b", false) : attr_b(X, "adj_y", false);
        X->out[0] = op2(X, ISA_MATMUL, (ta ? ISA_OPT_TRANS_A : 0) | (tb ? ISA_OPT_TRANS_B : 0), x, X->in[1]);
    } else if (is(X, "BiasAdd") || is(X, "BiasAddV1")) {
        X->out[0] = op2(X, ISA_ADD, 0, x, channel(X, X->in[1]));
    } else if (is(X, "Conv2D")) {
        conv2d(X);
    } else if (is(X, "MaxPool")) {
        pool(X, ISA_MAXPOOL);
    } else if (is(X, "AvgPool")) {
        pool(X, ISA_AVGPOOL);
    } else if (is(X, "FusedBatchNorm") || is(X, "FusedBatchNormV2") || is(X, "FusedBatchNormV3")) {
        batchnorm(X);
    } else if (is(X, "Reshape")) {
        X->out[0] = op2(X, ISA_RESHAPE, 0, x, vec64(X, X->in[1]));
    } else if (is(X, "Shape")) {
        X->out[0] = cast(X, op1(X, ISA_SHAPE, 0, x), imp_tf_out_dtype(n->def, 0));
    } else if (is(X, "Size")) {
        cc_irval s = op1(X, ISA_SHAPE, 0, x);
        s = op2(X, ISA_REDUCE_PROD, 0, s, i64s(X, 0, NULL));
        X->out[0] = cast(X, s, imp_tf_out_dtype(n->def, 0));
    } else if (is(X, "Rank")) {
        cc_irval s = op1(X, ISA_SHAPE, 0, op1(X, ISA_SHAPE, 0, x));
        s = op2(X, ISA_REDUCE_SUM, 0, s, i64s(X, 0, NULL));
        X->out[0] = cast(X, s, TFVM_I32);
    } else if (is(X, "Pack")) {
        int64_t axis = attr_i(X, "axis", 0);
        cc_irval *v = cc_array(X->C, n->n_in + 1, sizeof *v);
        for (uint32_t i = 0; i < n->n_in; i++)
            v[i] = unsqueeze(X, X->in[i], axis);
        X->out[0] = concat_all(X, v, n->n_in, axis);
    } else if (is(X, "Unpack")) {
        int64_t axis = attr_i(X, "axis", 0);
        for (uint32_t i = 0; i < n->n_out; i++)
            X->out[i] = op2(X, ISA_GATHER, axis_attr(X, axis), x, num(X, TFVM_I64, i));
    } else if (is(X, "ConcatV2")) {
        if (n->n_in < 2)
            imp_tf_fail(X, "needs values and an axis");
        int64_t axis = static_int(X, n->n_in - 1, "axis");
        X->out[0] = concat_all(X, X->in, n->n_in - 1, axis);
    } else if (is(X, "Split")) {
        split(X, 1, static_int(X, 0, "axis"), NULL, (int)n->n_out);
    } else if (is(X, "SplitV")) {
        int64_t sz[64];
        if (const_ints(X->in[1], sz, 64) != (int)n->n_out)
            imp_tf_fail(X, "size_splits must be a constant of num_split entries");
        split(X, 0, static_int(X, 2, "axis"), sz, (int)n->n_out);
    } else if (is(X, "Slice")) {
        slice(X);
    } else if (is(X, "StridedSlice")) {
        strided_slice(X);
    } else if (is(X, "GatherV2") || is(X, "Gather") || is(X, "ResourceGather")) {
        /* ResourceGather: rows of a (SavedModel's) variable, whose value its handle is */
        if (attr_i(X, "batch_dims", 0) != 0)
            imp_tf_fail(X, "batch_dims other than 0 is not supported");
        int64_t axis = is(X, "GatherV2") ? static_int(X, 2, "axis") : 0;
        X->out[0] = op2(X, ISA_GATHER, axis_attr(X, axis), x, X->in[1]);
    } else if (is(X, "Squeeze")) {
        const TfvmTf__AttrValue__ListValue *l = attr_list(X, "squeeze_dims");
        X->out[0] = op2(X, ISA_SQUEEZE, 0, x, i64s(X, l ? (uint32_t)l->n_i : 0, l ? l->i : NULL));
    } else if (is(X, "ExpandDims")) {
        X->out[0] = op2(X, ISA_UNSQUEEZE, 0, x, vec64(X, X->in[1]));
    } else if (is(X, "Transpose")) {
        X->out[0] = op2(X, ISA_TRANSPOSE, 0, x, vec64(X, X->in[1]));
    } else if (is(X, "Tile")) {
        X->out[0] = op2(X, ISA_TILE, 0, x, vec64(X, X->in[1]));
    } else if (is(X, "Fill")) {
        X->out[0] = op2(X, ISA_FILL, 0, vec64(X, x), X->in[1]);
    } else if (is(X, "ZerosLike") || is(X, "OnesLike")) {
        cc_irval v = num(X, d, is(X, "OnesLike") ? 1 : 0);
        X->out[0] = scalar(x) ? v : op2(X, ISA_FILL, 0, op1(X, ISA_SHAPE, 0, x), v);
    } else if (is(X, "Range")) {
        X->out[0] = op(X, ISA_RANGE, 0, 3, X->in);
    } else if (is(X, "Sum")) {
        reduce(X, ISA_REDUCE_SUM);
    } else if (is(X, "Mean")) {
        reduce(X, ISA_REDUCE_MEAN);
    } else if (is(X, "Max")) {
        reduce(X, ISA_REDUCE_MAX);
    } else if (is(X, "Min")) {
        reduce(X, ISA_REDUCE_MIN);
    } else if (is(X, "Prod")) {
        reduce(X, ISA_REDUCE_PROD);
    } else if (is(X, "ArgMax") || is(X, "ArgMin")) {
        int64_t axis = static_int(X, 1, "dimension");
        cc_irval r = op1(X, is(X, "ArgMax") ? ISA_ARGMAX : ISA_ARGMIN, axis_attr(X, axis), x);
        X->out[0] = cast(X, r, imp_tf_out_dtype(n->def, 0));
    } else if (is(X, "OneHot")) {
        cc_irval vals = op2(X, ISA_CONCAT, 0, unsqueeze(X, X->in[3], 0), unsqueeze(X, X->in[2], 0));
        /* TF: a negative index is out of range (all off); tfvm counts it back */
        cc_irval depth = cast(X, X->in[1], d);
        cc_irval sel[3] = {ew2(X, ISA_LESS, x, num(X, d, 0)), depth, x};
        cc_irval idx = op(X, ISA_SELECT, 0, 3, sel);
        cc_irval in3[3] = {idx, X->in[1], vals};
        X->out[0] = op(X, ISA_ONEHOT, axis_attr(X, attr_i(X, "axis", -1)), 3, in3);
    } else if (is(X, "Cumsum")) {
        uint32_t o = (attr_b(X, "exclusive", false) ? ISA_OPT_EXCLUSIVE : 0) |
                     (attr_b(X, "reverse", false) ? ISA_OPT_REVERSE : 0);
        X->out[0] = op2(X, ISA_CUMSUM, o, x, X->in[1]);
    } else if (is(X, "NoOp") || is(X, "Assert") || is(X, "TensorArrayCloseV3")) {
        /* no outputs */
    } else if (is(X, "While") || is(X, "StatelessWhile")) {
        fn_while(X);
    } else if (is(X, "If") || is(X, "StatelessIf")) {
        fn_if(X);
    } else if (is(X, "Case") || is(X, "StatelessCase")) {
        fn_case(X);
    } else if (is(X, "PartitionedCall") || is(X, "StatefulPartitionedCall")) {
        fn_call(X, attr_func(X, "f"));
    } else if (is(X, "TensorArrayV3")) {
        tensor_array(X);
    } else if (is(X, "TensorArrayWriteV3")) { /* (handle, index, value, flow) */
        cc_irval in3[3] = {X->in[3], X->in[1], X->in[2]};
        X->out[0] = op(X, ISA_STACK_PUT, 0, 3, in3);
    } else if (is(X, "TensorArrayReadV3")) { /* (handle, index, flow) */
        X->out[0] = op2(X, ISA_GATHER, 0, X->in[2], X->in[1]);
    } else if (is(X, "TensorArrayGatherV3")) { /* (handle, indices, flow) */
        X->out[0] = op2(X, ISA_GATHER, 0, X->in[2], X->in[1]);
    } else if (is(X, "TensorArrayScatterV3")) { /* (handle, indices, value, flow): rows in order */
        X->out[0] = X->in[2];
    } else if (is(X, "TensorArraySizeV3")) { /* (handle, flow) */
        X->out[0] = cast(X, dim_of(X, X->in[1], 0), TFVM_I32);
    } else if (is(X, "TensorListReserve") || is(X, "EmptyTensorList")) {
        const tf_attr *a = attr(X, "element_dtype");
        tfvm_dtype ed = a ? imp_tf_dtype(a->type) : 0;
        if (!ed)
            imp_tf_fail(X, "unsupported element dtype");
        int64_t zero = 0;
        X->out[0] = cc_const_new(X->C, X->b, ed, 1, &zero, NULL, 0, false);
    } else if (is(X, "TensorListSetItem")) { /* (list, index, item) */
        cc_irval in3[3] = {X->in[0], X->in[1], X->in[2]};
        X->out[0] = op(X, ISA_STACK_PUT, 0, 3, in3);
    } else if (is(X, "TensorListGetItem")) { /* (list, index, element_shape) */
        X->out[0] = op2(X, ISA_GATHER, 0, x, X->in[1]);
    } else if (is(X, "TensorListStack") || is(X, "TensorListFromTensor")) {
        X->out[0] = x;
    } else if (is(X, "TensorListLength")) {
        X->out[0] = cast(X, dim_of(X, x, 0), TFVM_I32);
    } else if (imp_tf_is_function(X->T, n->op)) {
        fn_call(X, n->op);
    } else if (!more_ops(X)) {
        const char *w = imp_tf_where(X);
        bool in_fn = strcmp(w, "graph") != 0;
        imp_tf_error(X->C, TFVM_ERR_UNSUPPORTED, "%s%snode '%s': op '%s' is not supported", in_fn ? w : "",
                     in_fn ? ": " : "", n->name, n->op);
    }
}
