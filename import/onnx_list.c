/* import/onnx_list.c — ONNX sequences (SequenceEmpty, SequenceConstruct,
 * SequenceInsert, SequenceAt, SequenceErase, SequenceLength,
 * SplitToSequence, ConcatFromSequence) as lists of tensors the importer
 * holds: tfvm has no sequence value, so a sequence lives inside one graph,
 * its length and every position that changes it known at import time (what
 * exporters write for torch.split, torch.cat of a list, list indexing).
 * SequenceAt may take a run-time position on equal-shaped elements (they are
 * stacked and gathered). */
#include <string.h>

#include "import/onnx_int.h"

static ox_val seq_new(ox_node *N, uint8_t dtype, uint32_t n, ox_val *const *items)
{
    ox_seq *s = cc_alloc(N->C, sizeof *s);
    s->n = n;
    s->dtype = dtype;
    s->items = cc_array(N->C, n + 1, sizeof *s->items);
    if (n)
        memcpy(s->items, items, n * sizeof *items);
    ox_val v = {0};
    v.dtype = dtype;
    v.seq = s;
    ox_unknown_shape(&v, -1);
    return v;
}

static const ox_seq *seq_in(ox_node *N, uint32_t k)
{
    const ox_val *v = ox_need(N, k);
    if (!v->seq)
        ox_fail(N, TFVM_ERR_TYPE, "input %u is a tensor, not a sequence", k);
    return v->seq;
}

static ox_val *tensor_in(ox_node *N, uint32_t k, uint8_t dtype)
{
    ox_val *v = ox_need(N, k);
    if (v->seq)
        ox_fail(N, TFVM_ERR_TYPE, "input %u is a sequence, not a tensor", k);
    if (v->dtype != dtype)
        ox_fail(N, TFVM_ERR_TYPE, "a %s tensor for a sequence of %s", tfvm_dtype_name((tfvm_dtype)v->dtype),
                tfvm_dtype_name((tfvm_dtype)dtype));
    return v;
}

/* The constant integer scalar (or one-element vector) of input k. */
static bool const_int(const ox_val *v, int64_t *out)
{
    if (!v || !v->cdata || v->seq || v->rank > 1 || (v->rank == 1 && v->dims[0] != 1))
        return false;
    if (v->dtype == TFVM_I64)
        memcpy(out, v->cdata, 8);
    else if (v->dtype == TFVM_I32) {
        int32_t i;
        memcpy(&i, v->cdata, 4);
        *out = i;
    } else
        return false;
    return true;
}

/* Input k as a position in a sequence of n (an insert may name n); def when absent. */
static uint32_t position(ox_node *N, uint32_t k, uint32_t n, bool insert, uint32_t def)
{
    const ox_val *v = ox_opt_in(N, k);
    if (!v)
        return def;
    int64_t p;
    if (!const_int(v, &p))
        ox_unsupported(N, "a position known only at run time");
    const int64_t hi = insert ? (int64_t)n : (int64_t)n - 1;
    if (p < -(int64_t)n || p > hi)
        ox_fail(N, TFVM_ERR_SHAPE, "position %lld is outside a sequence of %u", (long long)p, n);
    return (uint32_t)(p < 0 ? p + n : p);
}

static void op_SequenceEmpty(ox_node *N)
{
    uint8_t d = TFVM_F32;
    int64_t t = ox_attr_i(N, "dtype", 1);
    if (!ox_dtype((int32_t)t, &d) || ox_store_dtype((int32_t)t))
        ox_unsupported(N, "a sequence of %s", ox_onnx_type_name((int32_t)t));
    N->out[0] = seq_new(N, d, 0, NULL);
}

static void op_SequenceConstruct(ox_node *N)
{
    if (N->n_in == 0)
        ox_fail(N, TFVM_ERR_FORMAT, "no inputs");
    uint8_t d = ox_need(N, 0)->dtype;
    for (uint32_t k = 0; k < N->n_in; k++)
        tensor_in(N, k, d);
    N->out[0] = seq_new(N, d, N->n_in, N->in);
}

static void op_SequenceInsert(ox_node *N)
{
    const ox_seq *s = seq_in(N, 0);
    ox_val *t = tensor_in(N, 1, s->dtype);
    uint32_t at = position(N, 2, s->n, true, s->n);
    ox_val **items = cc_array(N->C, s->n + 2, sizeof *items);
    memcpy(items, s->items, at * sizeof *items);
    items[at] = t;
    memcpy(items + at + 1, s->items + at, (s->n - at) * sizeof *items);
    N->out[0] = seq_new(N, s->dtype, s->n + 1, items);
}

static void op_SequenceErase(ox_node *N)
{
    const ox_seq *s = seq_in(N, 0);
    if (s->n == 0)
        ox_fail(N, TFVM_ERR_SHAPE, "erasing from an empty sequence");
    uint32_t at = position(N, 1, s->n, false, s->n - 1);
    ox_val **items = cc_array(N->C, s->n + 1, sizeof *items);
    memcpy(items, s->items, at * sizeof *items);
    memcpy(items + at, s->items + at + 1, (s->n - at - 1) * sizeof *items);
    N->out[0] = seq_new(N, s->dtype, s->n - 1, items);
}

static void op_SequenceLength(ox_node *N) { N->out[0] = ox_scalar(N, TFVM_I64, 0, seq_in(N, 0)->n); }

/* the elements stacked along a new axis 0 (equal shapes) */
static ox_val stack(ox_node *N, const ox_seq *s, int axis)
{
    int64_t ax = axis;
    ox_val acc = {0};
    for (uint32_t k = 0; k < s->n; k++) {
        const ox_val *e = s->items[k];
        ox_val av = ox_i64s(N, 1, &ax);
        ox_val u = ox_op2(N, ISA_UNSQUEEZE, 0, e, &av);
        acc = k == 0 ? u : ox_op2(N, ISA_CONCAT, (uint32_t)axis, &acc, &u);
    }
    return acc;
}

static void op_SequenceAt(ox_node *N)
{
    const ox_seq *s = seq_in(N, 0);
    if (s->n == 0)
        ox_fail(N, TFVM_ERR_SHAPE, "reading from an empty sequence");
    int64_t p;
    if (const_int(ox_need(N, 1), &p)) {
        N->out[0] = *s->items[position(N, 1, s->n, false, 0)];
        return;
    }
    /* a run-time position: equal shapes stacked, the position gathered */
    const ox_val *e0 = s->items[0];
    for (uint32_t k = 1; k < s->n; k++)
        if (e0->rank < 0 || s->items[k]->rank != e0->rank ||
            memcmp(s->items[k]->dims, e0->dims, (size_t)e0->rank * sizeof e0->dims[0]) != 0 ||
            ox_count_of(e0) < 0)
            ox_unsupported(N, "a run-time position into elements of different or unknown shapes");
    ox_val st = stack(N, s, 0), n = ox_scalar(N, TFVM_I64, 0, s->n);
    ox_val pos = ox_to_dtype(N, ox_need(N, 1), TFVM_I64);
    pos = ox_ew2(N, ISA_FLOOR_MOD, &pos, &n); /* negative positions count back */
    ox_val y = ox_op2(N, ISA_GATHER, 0, &st, &pos);
    memcpy(y.dims, e0->dims, sizeof y.dims);
    y.v.n->types[0] = ox_vtype(&y);
    N->out[0] = y;
}

static void op_ConcatFromSequence(ox_node *N)
{
    const ox_seq *s = seq_in(N, 0);
    if (s->n == 0)
        ox_unsupported(N, "an empty sequence");
    const bool new_axis = ox_attr_i(N, "new_axis", 0) != 0;
    const int r = s->items[0]->rank;
    if (r < 0)
        ox_unsupported(N, "elements of unknown rank");
    int axis = ox_norm_axis(N, ox_attr_i(N, "axis", 0), new_axis ? r + 1 : r, false);
    if (new_axis) {
        N->out[0] = stack(N, s, axis);
        return;
    }
    ox_val acc = *s->items[0];
    for (uint32_t k = 1; k < s->n; k++)
        acc = ox_op2(N, ISA_CONCAT, (uint32_t)axis, &acc, s->items[k]);
    N->out[0] = acc;
}

/* x[..., b:e, ...] along axis, the axis dropped when squeeze */
static ox_val piece(ox_node *N, const ox_val *x, int axis, int64_t b, int64_t e, bool squeeze)
{
    int64_t ax = axis, one = 1;
    ox_val vb = ox_i64s(N, 1, &b), ve = ox_i64s(N, 1, &e), va = ox_i64s(N, 1, &ax), vs = ox_i64s(N, 1, &one);
    const ox_val *in[5] = {x, &vb, &ve, &va, &vs};
    ox_val y = ox_op(N, ISA_STRIDED_SLICE, 0, 5, in);
    memcpy(y.dims, x->dims, sizeof y.dims);
    y.dims[axis] = e - b;
    if (squeeze) {
        y = ox_op2(N, ISA_SQUEEZE, 0, &y, &va);
        for (int k = 0; k < x->rank - 1; k++)
            y.dims[k] = x->dims[k < axis ? k : k + 1];
    }
    y.v.n->types[0] = ox_vtype(&y);
    return y;
}

static void op_SplitToSequence(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    const int r = ox_need_rank(N, x);
    const int axis = ox_norm_axis(N, ox_attr_i(N, "axis", 0), r, false);
    const int64_t len = x->dims[axis];
    if (len < 0)
        ox_unsupported(N, "splitting an axis of unknown length");
    const ox_val *sp = ox_opt_in(N, 1);
    int64_t sizes[4096], one;
    uint32_t n = 0;
    bool squeeze = false;
    if (!sp || const_int(sp, &one)) { /* pieces of one size (1 and squeezed when absent), the last shorter */
        int64_t size = sp ? one : 1;
        squeeze = !sp && ox_attr_i(N, "keepdims", 1) == 0;
        if (size < 1)
            ox_fail(N, TFVM_ERR_FORMAT, "split %lld", (long long)size);
        for (int64_t at = 0; at < len && n < UT_COUNTOF(sizes); at += size)
            sizes[n++] = len - at < size ? len - at : size;
    } else {
        if (!sp->cdata || sp->rank != 1 || sp->dtype != TFVM_I64 || sp->dims[0] < 1 ||
            sp->dims[0] > (int64_t)UT_COUNTOF(sizes))
            ox_unsupported(N, "a split known only at run time");
        n = (uint32_t)sp->dims[0];
        memcpy(sizes, sp->cdata, n * sizeof sizes[0]);
        int64_t total = 0;
        for (uint32_t k = 0; k < n; k++)
            total += sizes[k] >= 0 ? sizes[k] : INT64_MIN / 2;
        if (total != len)
            ox_fail(N, TFVM_ERR_SHAPE, "split sizes add up to %lld for an axis of %lld", (long long)total,
                    (long long)len);
    }
    if (len >= (int64_t)UT_COUNTOF(sizes) && !sp)
        ox_unsupported(N, "more than %zu pieces", UT_COUNTOF(sizes));
    ox_val **items = cc_array(N->C, n + 1, sizeof *items);
    int64_t at = 0;
    for (uint32_t k = 0; k < n; at += sizes[k], k++) {
        ox_val p = piece(N, x, axis, at, at + sizes[k], squeeze);
        items[k] = ox_new_val(N->C, &p);
    }
    N->out[0] = seq_new(N, x->dtype, n, items);
}

const ox_opdef ox_list_ops[] = {
    {"SequenceEmpty", 11, op_SequenceEmpty},     {"SequenceConstruct", 11, op_SequenceConstruct},
    {"SequenceInsert", 11, op_SequenceInsert},   {"SequenceErase", 11, op_SequenceErase},
    {"SequenceLength", 11, op_SequenceLength},   {"SequenceAt", 11, op_SequenceAt},
    {"SplitToSequence", 11, op_SplitToSequence}, {"ConcatFromSequence", 11, op_ConcatFromSequence},
};
const size_t ox_n_list_ops = sizeof ox_list_ops / sizeof ox_list_ops[0];

bool ox_is_list_op(const char *op_type)
{
    for (size_t k = 0; k < ox_n_list_ops; k++)
        if (strcmp(ox_list_ops[k].name, op_type) == 0)
            return true;
    return strcmp(op_type, "Identity") == 0; /* passes a sequence on as it is */
}
