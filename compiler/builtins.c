/* compiler/builtins.c — the tensor ops of the language (docs/language.md,
 * "Tensor ops"): their parameters, and the type rules that check dtypes and
 * the shapes known at compile time and turn literal arguments (conv2d's
 * stride, an axis) into the instruction's constant operands and attribute. */
#include <math.h>
#include <string.h>

#include "compiler.h"
#include "isa/shape.h"

/* ---- Helpers ------------------------------------------------------------------------- */

typedef char tbuf[112];

static const cc_vtype *ty(const cc_expr *a) { return &a->type.t[0]; }
static const char *tstr(const cc_vtype *t, char *buf)
{
    cc_vtype_str(t, buf, sizeof(tbuf));
    return buf;
}
static bool is_float(uint8_t d) { return d == TFVM_F32 || d == TFVM_F64; }
static bool is_int(uint8_t d) { return d == TFVM_I32 || d == TFVM_I64; }

/* A result type: rank 0 is a scalar (kernels return scalars for rank 0). */
static cc_vtype result(uint8_t dtype, int rank, const int64_t *dims)
{
    cc_vtype t = {.dtype = dtype, .tensor = rank > 0, .rank = (uint8_t)rank};
    for (int i = 0; i < rank; i++)
        t.dims[i] = dims[i];
    return t;
}

static void set_result(cc *C, cc_expr *e, cc_vtype t)
{
    e->type.n = 1;
    e->type.t = cc_alloc(C, sizeof(cc_vtype));
    e->type.t[0] = t;
}

static void set_ops(cc *C, cc_expr *e, uint32_t n, cc_expr *a, cc_expr *b, cc_expr *c)
{
    cc_expr *all[3] = {a, b, c};
    e->u.call.n_ops = n;
    e->u.call.ops = cc_array(C, n, sizeof(cc_expr *));
    memcpy(e->u.call.ops, all, n * sizeof(cc_expr *));
}

/* What the instruction's shape rule (isa/shape.h) knows of an operand: its
 * type, and its values when it is an integer literal or a list of them. */
static isa_shape operand_shape(const cc_expr *a, int64_t *vals, int max)
{
    const cc_vtype *t = &a->type.t[0];
    isa_shape s = {.dtype = t->dtype, .rank = (int8_t)(t->tensor ? t->rank : 0), .n_vals = -1, .vals = vals};
    memcpy(s.dims, t->dims, sizeof(int64_t) * s.rank);
    if (a->kind == CC_E_INT) {
        vals[0] = a->u.lit.neg ? (int64_t)(0 - a->u.lit.mag) : (int64_t)a->u.lit.mag;
        s.n_vals = 1;
    } else if (a->kind == CC_E_TENSOR && a->u.tensor.rank == 1 && a->u.tensor.n <= (uint32_t)max) {
        s.n_vals = (int)a->u.tensor.n;
        for (uint32_t i = 0; i < a->u.tensor.n && s.n_vals >= 0; i++) {
            const cc_expr *x = a->u.tensor.elems[i];
            if (x->kind != CC_E_INT)
                s.n_vals = -1;
            else
                vals[i] = x->u.lit.neg ? (int64_t)(0 - x->u.lit.mag) : (int64_t)x->u.lit.mag;
        }
    }
    return s;
}

/* The call's result: dtype, and the shape its instruction's rule gives on
 * the operands and attribute set (set_ops). The checks before it have said
 * in the language's words what would fail; the rule's shape is the one the
 * analyser and the kernels agree on. */
static void rule_result(cc *C, const cc_builtin *b, cc_expr *e, uint8_t dtype)
{
    isa_shape x[3], o;
    int64_t vals[3][16];
    uint32_t n = e->u.call.n_ops;
    for (uint32_t k = 0; k < n; k++)
        x[k] = operand_shape(e->u.call.ops[k], vals[k], 16);
    char msg[1];
    isa_shape_rule(b->op, e->u.call.attr, x, n, &o, msg, sizeof msg);
    cc_vtype t = {.dtype = dtype, .tensor = o.rank > 0, .rank = (uint8_t)(o.rank > 0 ? o.rank : 0)};
    for (int i = 0; i < o.rank; i++)
        t.dims[i] = o.dims[i];
    set_result(C, e, t);
}

static cc_expr *new_int(cc *C, cc_pos pos, uint8_t dtype, int64_t v)
{
    cc_expr *x = cc_alloc(C, sizeof *x);
    x->kind = CC_E_INT;
    x->pos = x->start = pos;
    x->u.lit.neg = v < 0;
    x->u.lit.mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    set_result(C, x, (cc_vtype){.dtype = dtype});
    return x;
}

/* A constant i64 vector operand (a tensor literal the source did not spell). */
static cc_expr *int_vec(cc *C, cc_pos pos, const int64_t *v, uint32_t n)
{
    cc_expr *x = cc_alloc(C, sizeof *x);
    x->kind = CC_E_TENSOR;
    x->pos = x->start = pos;
    x->u.tensor.rank = 1;
    x->u.tensor.dims[0] = n;
    x->u.tensor.n = n;
    x->u.tensor.elems = cc_array(C, n, sizeof(cc_expr *));
    for (uint32_t i = 0; i < n; i++)
        x->u.tensor.elems[i] = new_int(C, pos, TFVM_I64, v[i]);
    set_result(C, x, result(TFVM_I64, 1, (int64_t[]){n}));
    return x;
}

static int64_t lit_int(const cc_expr *x)
{
    return x->u.lit.neg ? (int64_t)(0 - x->u.lit.mag) : (int64_t)x->u.lit.mag;
}

/* Sizes, strides and paddings written in the source stay below this (as
 * declared dimensions do), so shape arithmetic cannot overflow. */
#define LIT_MAX ((int64_t)1 << 40)

static void check_lit_range(cc *C, const cc_builtin *b, const char *what, const cc_expr *a, int64_t v)
{
    if (v > LIT_MAX || v < -LIT_MAX)
        cc_error(C, a->start, TFVM_ERR_TYPE, "%s: %s holds %lld, too large a size", b->name, what, (long long)v);
}

/* a * b for element counts: -1 when either is unknown or the product is absurd. */
static int64_t mul_dims(int64_t a, int64_t b)
{
    if (a < 0 || b < 0 || (b && a > ((int64_t)1 << 62) / b))
        return -1;
    return a * b;
}

static void vec_str(const int64_t *v, uint32_t n, char *buf, size_t size)
{
    ut_fmt(buf, size, "[");
    for (uint32_t i = 0; i < n; i++) {
        size_t l = strlen(buf);
        ut_fmt(buf + l, size - l, "%s%lld", i ? ", " : "", (long long)v[i]);
    }
    size_t l = strlen(buf);
    ut_fmt(buf + l, size - l, "]");
}

/* Integers fixed at compile time: an integer literal (one value) or a list
 * literal of them. Returns how many (at most max). */
static uint32_t lit_ints(cc *C, const cc_builtin *b, const char *what, const cc_expr *a, int64_t *out, uint32_t max)
{
    if (a->kind == CC_E_INT) {
        out[0] = lit_int(a);
        check_lit_range(C, b, what, a, out[0]);
        return 1;
    }
    bool ok = a->kind == CC_E_TENSOR && a->u.tensor.rank == 1 && a->u.tensor.n <= max;
    for (uint32_t i = 0; ok && i < a->u.tensor.n; i++)
        ok = a->u.tensor.elems[i]->kind == CC_E_INT;
    if (!ok) {
        if (a->kind == CC_E_TENSOR && a->u.tensor.rank == 1 && a->u.tensor.n > max)
            cc_error(C, a->start, TFVM_ERR_TYPE, "%s: %s takes at most %u values, got %u", b->name, what, max,
                     a->u.tensor.n);
        cc_error(C, a->start, TFVM_ERR_TYPE, "%s: %s must be an integer or a list of integers written out (2, [1, 2])",
                 b->name, what);
    }
    for (uint32_t i = 0; i < a->u.tensor.n; i++) {
        out[i] = lit_int(a->u.tensor.elems[i]);
        check_lit_range(C, b, what, a, out[i]);
    }
    return a->u.tensor.n;
}

static bool lit_bool(cc *C, const cc_builtin *b, const char *what, const cc_expr *a, bool dflt)
{
    if (!a)
        return dflt;
    if (a->kind != CC_E_BOOL)
        cc_error(C, a->start, TFVM_ERR_TYPE, "%s: %s must be true or false", b->name, what);
    return a->u.lit.b;
}

/* One integer fixed at compile time. */
static int64_t lit_one(cc *C, const cc_builtin *b, const char *what, const cc_expr *a, int64_t dflt)
{
    if (!a)
        return dflt;
    if (a->kind != CC_E_INT)
        cc_error(C, a->start, TFVM_ERR_TYPE, "%s: %s must be an integer written out", b->name, what);
    check_lit_range(C, b, what, a, lit_int(a));
    return lit_int(a);
}

/* An axis of t (negative counts from the end); the value is kept as written. */
static int64_t axis_of(cc *C, const cc_builtin *b, const cc_expr *a, int64_t dflt, const cc_vtype *t, cc_pos pos)
{
    int64_t ax = lit_one(C, b, "axis", a, dflt);
    if (ax < -(int64_t)t->rank || ax >= t->rank) {
        tbuf s;
        cc_error(C, a ? a->start : pos, TFVM_ERR_TYPE, "%s: axis %lld is out of range for %s", b->name, (long long)ax,
                 tstr(t, s));
    }
    return ax;
}

static int64_t norm_axis(int64_t ax, int rank) { return ax < 0 ? ax + rank : ax; }

/* Two values (h, w) from 1 or 2 integers, each at least `min`. */
static void lit_pair(cc *C, const cc_builtin *b, const char *what, const cc_expr *a, int64_t dflt, int64_t min,
                     int64_t out[2])
{
    int64_t v[2] = {dflt, dflt};
    uint32_t n = a ? lit_ints(C, b, what, a, v, 2) : 2;
    if (n == 0)
        cc_error(C, a->start, TFVM_ERR_TYPE, "%s: %s takes 1 or 2 values, got 0", b->name, what);
    out[0] = v[0];
    out[1] = n == 1 ? v[0] : v[1];
    for (int i = 0; i < 2; i++)
        if (out[i] < min)
            cc_error(C, a->start, TFVM_ERR_TYPE, "%s: %s must be %s, got %lld", b->name, what,
                     min > 0 ? "positive" : "at least 0", (long long)out[i]);
}

/* Padding [top, left, bottom, right] from p (all sides), [ph, pw] or [pt, pl, pb, pr]. */
static void lit_pads(cc *C, const cc_builtin *b, const cc_expr *a, int64_t out[4])
{
    int64_t v[4] = {0, 0, 0, 0};
    uint32_t n = a ? lit_ints(C, b, "padding", a, v, 4) : 1;
    if (n == 0 || n == 3)
        cc_error(C, a->start, TFVM_ERR_TYPE, "%s: padding takes 1, 2 or 4 values, got %u", b->name, n);
    out[0] = v[0];
    out[1] = n == 1 ? v[0] : v[1];
    out[2] = n == 4 ? v[2] : v[0];
    out[3] = n == 4 ? v[3] : out[1];
    for (int i = 0; i < 4; i++)
        if (out[i] < 0)
            cc_error(C, a->start, TFVM_ERR_TYPE, "%s: padding must be at least 0, got %lld", b->name,
                     (long long)out[i]);
}

/* An i64 vector operand of compile-time length: its values when it is a
 * literal list (*lit = true). */
static uint32_t shape_arg(cc *C, const cc_builtin *b, const char *what, const cc_expr *a, uint32_t max, int64_t *v,
                          bool *lit)
{
    const cc_vtype *t = ty(a);
    tbuf s;
    if (t->dtype != TFVM_I64 || !t->tensor || t->rank != 1)
        cc_error(C, a->start, TFVM_ERR_TYPE, "%s: %s must be an i64 vector, got %s%s", b->name, what, tstr(t, s),
                 t->tensor && t->rank == 1 && is_int(t->dtype) ? " (convert with cast<i64>(x))" : "");
    if (t->dims[0] < 0)
        cc_error(C, a->start, TFVM_ERR_TYPE, "%s: the length of %s must be known at compile time, got %s", b->name,
                 what, tstr(t, s));
    if (t->dims[0] > max)
        cc_error(C, a->start, TFVM_ERR_TYPE, "%s: %s has %lld values, at most %u are allowed", b->name, what,
                 (long long)t->dims[0], max);
    *lit = a->kind == CC_E_TENSOR;
    if (*lit)
        for (uint32_t i = 0; i < a->u.tensor.n; i++) {
            v[i] = lit_int(a->u.tensor.elems[i]);
            check_lit_range(C, b, what, a, v[i]);
        }
    return (uint32_t)t->dims[0];
}

static const cc_vtype *need_tensor(cc *C, const cc_builtin *b, const cc_expr *a, const char *what)
{
    const cc_vtype *t = ty(a);
    if (!t->tensor) {
        tbuf s;
        cc_error(C, a->start, TFVM_ERR_TYPE, "%s: %s must be a tensor, got %s", b->name, what, tstr(t, s));
    }
    return t;
}

static void need_float(cc *C, const cc_builtin *b, const cc_expr *a)
{
    if (!is_float(ty(a)->dtype)) {
        tbuf s;
        cc_error(C, a->start, TFVM_ERR_TYPE, "%s: needs f32 or f64, got %s", b->name, tstr(ty(a), s));
    }
}

static void need_number(cc *C, const cc_builtin *b, const cc_expr *a)
{
    if (ty(a)->dtype == TFVM_BOOL) {
        tbuf s;
        cc_error(C, a->start, TFVM_ERR_TYPE, "%s: needs numbers, got %s", b->name, tstr(ty(a), s));
    }
}

static void same_dtype(cc *C, const cc_builtin *b, cc_pos pos, const cc_vtype *x, const cc_vtype *y)
{
    if (x->dtype != y->dtype) {
        tbuf s, t;
        cc_error(C, pos, TFVM_ERR_TYPE, "%s: operands have different dtypes: %s and %s (convert with cast<T>(x))",
                 b->name, tstr(x, s), tstr(y, t));
    }
}

/* ---- Linear algebra and convolutions ------------------------------------------------ */

static void rule_matmul(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *const *x)
{
    const cc_vtype *ta = ty(x[0]), *tb = ty(x[1]);
    bool tra = lit_bool(C, b, "ta", x[2], false), trb = lit_bool(C, b, "tb", x[3], false);
    tbuf sa, sb;
    if (ta->rank < 2 || tb->rank < 2)
        cc_error(C, e->pos, TFVM_ERR_TYPE, "matmul: operands need 2 or more dimensions, got %s and %s", tstr(ta, sa),
                 tstr(tb, sb));
    same_dtype(C, b, e->pos, ta, tb);
    if (!is_float(ta->dtype))
        cc_error(C, e->pos, TFVM_ERR_TYPE, "matmul: needs f32 or f64 operands, got %s and %s", tstr(ta, sa),
                 tstr(tb, sb));
    int ra = ta->rank, rb = tb->rank;
    int64_t k = ta->dims[ra - (tra ? 2 : 1)], k2 = tb->dims[rb - (trb ? 1 : 2)];
    if (k >= 0 && k2 >= 0 && k != k2)
        cc_error(C, e->pos, TFVM_ERR_TYPE, "matmul: inner dimensions differ: %s and %s%s", tstr(ta, sa), tstr(tb, sb),
                 tra && trb ? " (ta, tb)" : tra ? " (ta)" : trb ? " (tb)" : "");
    /* batch dimensions broadcast as in NumPy */
    int r = (ra > rb ? ra : rb) - 2;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - (ra - 2)), ib = i - (r - (rb - 2));
        int64_t da = ia >= 0 ? ta->dims[ia] : 1, db = ib >= 0 ? tb->dims[ib] : 1;
        if (da >= 0 && db >= 0 && da != db && da != 1 && db != 1)
            cc_error(C, e->pos, TFVM_ERR_TYPE, "matmul: batch dimensions do not broadcast: %s and %s", tstr(ta, sa),
                     tstr(tb, sb));
    }
    set_ops(C, e, 2, x[0], x[1], NULL);
    e->u.call.attr = (tra ? ISA_OPT_TRANS_A : 0) | (trb ? ISA_OPT_TRANS_B : 0);
    rule_result(C, b, e, ta->dtype);
}

/* An error when a window does not fit its padded input (the extent itself is
 * the instruction's rule). */
static void window(cc *C, const cc_builtin *b, cc_pos pos, int64_t in, int64_t k, int64_t lo, int64_t hi,
                      int64_t dil, const cc_vtype *x, const cc_vtype *w)
{
    if (in < 0 || k < 0)
        return;
    int64_t padded = in + lo + hi, span = k > 0 ? mul_dims(dil, k - 1) : 0;
    if (span < 0 || padded < span + 1) {
        tbuf sx, sw;
        if (w)
            cc_error(C, pos, TFVM_ERR_TYPE, "%s: the kernel is larger than the padded input: %s and %s", b->name,
                     tstr(x, sx), tstr(w, sw));
        cc_error(C, pos, TFVM_ERR_TYPE, "%s: the %lld-wide window is larger than the padded input %s", b->name,
                 (long long)k, tstr(x, sx));
    }
}

static void rule_conv2d(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *const *x)
{
    const cc_vtype *tx = ty(x[0]), *tw = ty(x[1]);
    tbuf sx, sw;
    if (tx->rank != 4)
        cc_error(C, x[0]->start, TFVM_ERR_TYPE, "conv2d: x must be NCHW (4 dimensions), got %s", tstr(tx, sx));
    if (tw->rank != 4)
        cc_error(C, x[1]->start, TFVM_ERR_TYPE, "conv2d: w must be OIHW (4 dimensions), got %s", tstr(tw, sw));
    same_dtype(C, b, e->pos, tx, tw);
    need_float(C, b, x[0]);
    int64_t s[2], pad[4], d[2];
    lit_pair(C, b, "stride", x[2], 1, 1, s);
    lit_pads(C, b, x[3], pad);
    lit_pair(C, b, "dilation", x[4], 1, 1, d);
    int64_t g = lit_one(C, b, "groups", x[5], 1);
    if (g < 1)
        cc_error(C, x[5]->start, TFVM_ERR_TYPE, "conv2d: groups must be positive, got %lld", (long long)g);
    int64_t c = tx->dims[1], wc = tw->dims[1], o = tw->dims[0];
    if (c >= 0 && wc >= 0 && c != wc * g)
        cc_error(C, e->pos, TFVM_ERR_TYPE,
                 "conv2d: channels differ: %s has %lld input channels, %s with %lld group%s takes %lld", tstr(tx, sx),
                 (long long)c, tstr(tw, sw), (long long)g, g == 1 ? "" : "s", (long long)(wc * g));
    if (o >= 0 && o % g)
        cc_error(C, e->pos, TFVM_ERR_TYPE, "conv2d: %lld output channels (%s) do not split into %lld groups",
                 (long long)o, tstr(tw, sw), (long long)g);
    for (int i = 0; i < 2; i++)
        window(C, b, e->pos, tx->dims[2 + i], tw->dims[2 + i], pad[i], pad[2 + i], d[i], tx, tw);
    int64_t p[9] = {s[0], s[1], pad[0], pad[1], pad[2], pad[3], d[0], d[1], g};
    set_ops(C, e, 3, x[0], x[1], int_vec(C, e->pos, p, 9));
    rule_result(C, b, e, tx->dtype);
}

/* maxpool / avgpool (x, kernel, stride = kernel, padding = 0) */
static void rule_pool(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *const *x)
{
    const cc_vtype *tx = ty(x[0]);
    tbuf sx;
    if (tx->rank != 4)
        cc_error(C, x[0]->start, TFVM_ERR_TYPE, "%s: x must be NCHW (4 dimensions), got %s", b->name, tstr(tx, sx));
    if (b->op == ISA_AVGPOOL)
        need_float(C, b, x[0]);
    else
        need_number(C, b, x[0]);
    int64_t k[2], s[2], pad[4];
    lit_pair(C, b, "kernel", x[1], 1, 1, k);
    lit_pair(C, b, "stride", x[2] ? x[2] : x[1], 1, 1, s);
    lit_pads(C, b, x[3], pad);
    for (int i = 0; i < 2; i++)
        window(C, b, e->pos, tx->dims[2 + i], k[i], pad[i], pad[2 + i], 1, tx, NULL);
    int64_t p[8] = {k[0], k[1], s[0], s[1], pad[0], pad[1], pad[2], pad[3]};
    set_ops(C, e, 2, x[0], int_vec(C, e->pos, p, 8), NULL);
    rule_result(C, b, e, tx->dtype);
}

/* ---- Along axes ---------------------------------------------------------------------- */

static void rule_softmax(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *const *x)
{
    const cc_vtype *t = need_tensor(C, b, x[0], "x");
    need_float(C, b, x[0]);
    int64_t ax = axis_of(C, b, x[1], -1, t, e->pos);
    set_ops(C, e, 1, x[0], NULL, NULL);
    e->u.call.attr = (uint32_t)(int32_t)ax;
    rule_result(C, b, e, t->dtype);
}

static void rule_reduce(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *const *x)
{
    const cc_vtype *t = need_tensor(C, b, x[0], "x");
    if (b->op == ISA_REDUCE_MEAN)
        need_float(C, b, x[0]);
    else
        need_number(C, b, x[0]);
    bool keep = lit_bool(C, b, "keepdims", x[2], false);
    int64_t axes[TFVM_MAX_RANK];
    uint32_t n = 0;
    bool red[TFVM_MAX_RANK] = {0};
    tbuf s;
    if (x[1]) {
        n = lit_ints(C, b, "axes", x[1], axes, TFVM_MAX_RANK);
        for (uint32_t i = 0; i < n; i++) {
            if (axes[i] < -(int64_t)t->rank || axes[i] >= t->rank)
                cc_error(C, x[1]->start, TFVM_ERR_TYPE, "%s: axis %lld is out of range for %s", b->name,
                         (long long)axes[i], tstr(t, s));
            int64_t a = norm_axis(axes[i], t->rank);
            if (red[a])
                cc_error(C, x[1]->start, TFVM_ERR_TYPE, "%s: axis %lld appears twice", b->name, (long long)axes[i]);
            red[a] = true;
        }
        if (n == 0)
            cc_error(C, x[1]->start, TFVM_ERR_TYPE, "%s: axes is empty (leave it out to reduce over every axis)",
                     b->name);
    }
    set_ops(C, e, 2, x[0], x[1] ? int_vec(C, x[1]->start, axes, n) : int_vec(C, e->pos, NULL, 0), NULL);
    e->u.call.attr = keep ? ISA_OPT_KEEPDIMS : 0;
    rule_result(C, b, e, t->dtype);
}

static void rule_argmax(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *const *x)
{
    const cc_vtype *t = need_tensor(C, b, x[0], "x");
    need_number(C, b, x[0]);
    int64_t ax = axis_of(C, b, x[1], -1, t, e->pos);
    set_ops(C, e, 1, x[0], NULL, NULL);
    e->u.call.attr = (uint32_t)(int32_t)ax;
    rule_result(C, b, e, TFVM_I64);
}

static void rule_concat(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *const *x)
{
    const cc_vtype *ta = need_tensor(C, b, x[0], "a"), *tb = need_tensor(C, b, x[1], "b");
    tbuf sa, sb;
    same_dtype(C, b, e->pos, ta, tb);
    if (ta->rank != tb->rank)
        cc_error(C, e->pos, TFVM_ERR_TYPE, "concat: ranks differ: %s and %s", tstr(ta, sa), tstr(tb, sb));
    int64_t ax = axis_of(C, b, x[2], 0, ta, e->pos), a = norm_axis(ax, ta->rank);
    for (int i = 0; i < ta->rank; i++)
        if (i != a && ta->dims[i] >= 0 && tb->dims[i] >= 0 && ta->dims[i] != tb->dims[i])
            cc_error(C, e->pos, TFVM_ERR_TYPE, "concat: dimensions differ outside axis %lld: %s and %s",
                     (long long)ax, tstr(ta, sa), tstr(tb, sb));
    set_ops(C, e, 2, x[0], x[1], NULL);
    e->u.call.attr = (uint32_t)(int32_t)ax;
    rule_result(C, b, e, ta->dtype);
}

/* gather(x, idx, axis): x.dims[:axis] + idx.dims + x.dims[axis+1:] */
static void gather_type(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *xe, cc_expr *ie, int64_t ax)
{
    const cc_vtype *t = ty(xe), *ti = ty(ie);
    tbuf s, si;
    if (!t->tensor)
        cc_error(C, e->pos, TFVM_ERR_TYPE, "%s: cannot index %s: it is a scalar", b->name, tstr(t, s));
    if (!is_int(ti->dtype))
        cc_error(C, ie->start, TFVM_ERR_TYPE, "%s: indices must be i32 or i64, got %s", b->name, tstr(ti, si));
    if (ax < -(int64_t)t->rank || ax >= t->rank)
        cc_error(C, e->pos, TFVM_ERR_TYPE, "%s: axis %lld is out of range for %s", b->name, (long long)ax,
                 tstr(t, s));
    int64_t a = norm_axis(ax, t->rank);
    if (t->rank - 1 + ti->rank > TFVM_MAX_RANK)
        cc_error(C, e->pos, TFVM_ERR_TYPE, "%s: the result would have more than %d dimensions: %s and %s", b->name,
                 TFVM_MAX_RANK, tstr(t, s), tstr(ti, si));
    int64_t d = t->dims[a];
    if (ie->kind == CC_E_INT && d >= 0 && (lit_int(ie) >= d || lit_int(ie) < -d))
        cc_error(C, ie->start, TFVM_ERR_TYPE, "%s: index %lld is out of range for axis %lld of %s", b->name,
                 (long long)lit_int(ie), (long long)a, tstr(t, s));
    set_ops(C, e, 2, xe, ie, NULL);
    e->u.call.attr = (uint32_t)(int32_t)ax;
    rule_result(C, b, e, t->dtype);
}

static void rule_gather(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *const *x)
{
    gather_type(C, b, e, x[0], x[1], lit_one(C, b, "axis", x[2], 0));
}

/* ---- Shapes -------------------------------------------------------------------------- */

static void rule_reshape(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *const *x)
{
    const cc_vtype *t = ty(x[0]);
    int64_t v[TFVM_MAX_RANK];
    bool lit;
    uint32_t n = shape_arg(C, b, "the shape", x[1], TFVM_MAX_RANK, v, &lit);
    if (lit) {
        char sv[160];
        tbuf s;
        vec_str(v, n, sv, sizeof sv);
        int infer = -1;
        int64_t known = 1, total = 1;
        for (uint32_t i = 0; i < n; i++) {
            if (v[i] < -1 || (v[i] == -1 && infer >= 0))
                cc_error(C, x[1]->start, TFVM_ERR_TYPE, "reshape: bad shape %s (sizes, and at most one -1)", sv);
            if (v[i] == -1)
                infer = (int)i;
            else
                known = mul_dims(known, v[i]);
        }
        for (int i = 0; i < t->rank; i++)
            total = mul_dims(total, t->dims[i]);
        if (known < 0)
            total = -1; /* too large to check here */
        if (total >= 0 && infer < 0 && known != total)
            cc_error(C, e->pos, TFVM_ERR_TYPE, "reshape: %s has %lld element%s, the shape %s has %lld", tstr(t, s),
                     (long long)total, total == 1 ? "" : "s", sv, (long long)known);
        if (total >= 0 && infer >= 0 && (known == 0 || total % known))
            cc_error(C, e->pos, TFVM_ERR_TYPE, "reshape: %s (%lld element%s) does not fit the shape %s", tstr(t, s),
                     (long long)total, total == 1 ? "" : "s", sv);
    }
    set_ops(C, e, 2, x[0], x[1], NULL);
    rule_result(C, b, e, t->dtype);
}

static void rule_transpose(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *const *x)
{
    const cc_vtype *t = need_tensor(C, b, x[0], "x");
    int64_t perm[TFVM_MAX_RANK];
    uint32_t n = t->rank;
    for (uint32_t i = 0; i < n; i++)
        perm[i] = n - 1 - i;
    if (x[1]) {
        n = lit_ints(C, b, "perm", x[1], perm, TFVM_MAX_RANK);
        bool seen[TFVM_MAX_RANK] = {0}, ok = n == t->rank;
        for (uint32_t i = 0; ok && i < n; i++) {
            ok = perm[i] >= 0 && perm[i] < t->rank && !seen[perm[i]];
            if (ok)
                seen[perm[i]] = true;
        }
        if (!ok) {
            char sv[160];
            tbuf s;
            vec_str(perm, n, sv, sizeof sv);
            cc_error(C, x[1]->start, TFVM_ERR_TYPE, "transpose: %s is not a permutation of the %d axes of %s", sv,
                     t->rank, tstr(t, s));
        }
    }
    set_ops(C, e, 2, x[0], int_vec(C, x[1] ? x[1]->start : e->pos, perm, n), NULL);
    rule_result(C, b, e, t->dtype);
}

static void rule_slice(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *const *x)
{
    const cc_vtype *t = need_tensor(C, b, x[0], "x");
    int64_t s[TFVM_MAX_RANK], en[TFVM_MAX_RANK];
    bool ls, le;
    tbuf sb;
    const char *names[2] = {"starts", "ends"};
    uint32_t ns = shape_arg(C, b, names[0], x[1], TFVM_MAX_RANK, s, &ls);
    uint32_t ne = shape_arg(C, b, names[1], x[2], TFVM_MAX_RANK, en, &le);
    for (int k = 0; k < 2; k++) {
        uint32_t n = k ? ne : ns;
        if (n != t->rank)
            cc_error(C, x[1 + k]->start, TFVM_ERR_TYPE, "slice: %s has %u value%s but %s has %d ax%s", names[k], n,
                     n == 1 ? "" : "s", tstr(t, sb), t->rank, t->rank == 1 ? "is" : "es");
    }
    set_ops(C, e, 3, x[0], x[1], x[2]);
    rule_result(C, b, e, t->dtype);
}

static void rule_pad(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *const *x)
{
    const cc_vtype *t = need_tensor(C, b, x[0], "x");
    int64_t v[2 * TFVM_MAX_RANK];
    bool lit;
    tbuf s;
    uint32_t n = shape_arg(C, b, "pads", x[1], 2 * TFVM_MAX_RANK, v, &lit);
    if (n != 2u * t->rank)
        cc_error(C, x[1]->start, TFVM_ERR_TYPE, "pad: pads needs %d values (before and after each axis of %s), got %u",
                 2 * t->rank, tstr(t, s), n);
    for (int i = 0; i < t->rank; i++)
        if (lit && (v[i] < 0 || v[t->rank + i] < 0))
            cc_error(C, x[1]->start, TFVM_ERR_TYPE, "pad: padding must be at least 0, got %lld",
                     (long long)(v[i] < 0 ? v[i] : v[t->rank + i]));
    set_ops(C, e, 2, x[0], x[1], NULL);
    rule_result(C, b, e, t->dtype);
}

static void rule_shape(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *const *x)
{
    set_ops(C, e, 1, x[0], NULL, NULL);
    rule_result(C, b, e, TFVM_I64);
}

static void rule_fill(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *const *x)
{
    int64_t v[TFVM_MAX_RANK];
    bool lit;
    tbuf s;
    uint32_t n = shape_arg(C, b, "the shape", x[0], TFVM_MAX_RANK, v, &lit);
    const cc_vtype *tv = ty(x[1]);
    if (tv->tensor)
        cc_error(C, x[1]->start, TFVM_ERR_TYPE, "fill: the value must be a scalar, got %s", tstr(tv, s));
    for (uint32_t i = 0; i < n; i++) {
        if (lit && v[i] < 0) {
            char sv[160];
            vec_str(v, n, sv, sizeof sv);
            cc_error(C, x[0]->start, TFVM_ERR_TYPE, "fill: bad shape %s (sizes must be at least 0)", sv);
        }
    }
    set_ops(C, e, 2, x[0], x[1], NULL);
    rule_result(C, b, e, tv->dtype);
}

static bool lit_num(const cc_expr *a, double *out)
{
    if (a->kind == CC_E_INT)
        *out = (double)lit_int(a);
    else if (a->kind == CC_E_FLOAT)
        *out = a->u.lit.f;
    else
        return false;
    return true;
}

static void rule_range(cc *C, const cc_builtin *b, cc_expr *e, cc_expr *const *x)
{
    const char *names[3] = {"start", "limit", "delta"};
    tbuf s;
    for (int k = 0; k < 3; k++) {
        if (!x[k])
            continue;
        if (ty(x[k])->tensor)
            cc_error(C, x[k]->start, TFVM_ERR_TYPE, "range: %s must be a scalar, got %s", names[k],
                     tstr(ty(x[k]), s));
        need_number(C, b, x[k]);
        if (k)
            same_dtype(C, b, x[k]->start, ty(x[0]), ty(x[k]));
    }
    uint8_t d = ty(x[0])->dtype;
    cc_expr *delta = x[2] ? x[2] : new_int(C, e->pos, d, 1);
    double v[3];
    int64_t len = -1;
    if (lit_num(x[0], &v[0]) && lit_num(x[1], &v[1]) && lit_num(delta, &v[2])) {
        if (v[2] == 0)
            cc_error(C, delta->start, TFVM_ERR_TYPE, "range: delta is 0");
        if (is_int(d)) { /* exact, as the kernel counts */
            int64_t a = lit_int(x[0]), l = lit_int(x[1]), st = lit_int(delta);
            uint64_t span = st > 0 ? (l > a ? (uint64_t)l - (uint64_t)a : 0) : (a > l ? (uint64_t)a - (uint64_t)l : 0);
            uint64_t step = st > 0 ? (uint64_t)st : 0 - (uint64_t)st;
            uint64_t n = span / step + (span % step != 0);
            len = n > (uint64_t)LIT_MAX ? -1 : (int64_t)n;
        } else {
            double c = ceil((v[1] - v[0]) / v[2]);
            len = !(c > 0) ? 0 : c <= (double)LIT_MAX ? (int64_t)c : -1;
        }
    }
    set_result(C, e, result(d, 1, (int64_t[]){len}));
    set_ops(C, e, 3, x[0], x[1], delta);
}

/* ---- The table ----------------------------------------------------------------------- */

#define V(n) {n, CC_P_VALUE, false}
#define H(n) {n, CC_P_HINTED, false}
#define S(n) {n, CC_P_SHAPE, false}
#define I(n) {n, CC_P_INTS, false}
#define OPT_I(n) {n, CC_P_INTS, true}
#define OPT_B(n) {n, CC_P_BOOL, true}
#define OPT_H(n) {n, CC_P_HINTED, true}

static const cc_builtin builtins[] = {
    {"matmul", ISA_MATMUL, 4, {V("a"), V("b"), OPT_B("ta"), OPT_B("tb")}, rule_matmul},
    {"conv2d", ISA_CONV2D, 6,
     {V("x"), V("w"), OPT_I("stride"), OPT_I("padding"), OPT_I("dilation"), OPT_I("groups")}, rule_conv2d},
    {"maxpool", ISA_MAXPOOL, 4, {V("x"), I("kernel"), OPT_I("stride"), OPT_I("padding")}, rule_pool},
    {"avgpool", ISA_AVGPOOL, 4, {V("x"), I("kernel"), OPT_I("stride"), OPT_I("padding")}, rule_pool},
    {"softmax", ISA_SOFTMAX, 2, {V("x"), OPT_I("axis")}, rule_softmax},
    {"reduce_sum", ISA_REDUCE_SUM, 3, {V("x"), OPT_I("axes"), OPT_B("keepdims")}, rule_reduce},
    {"reduce_mean", ISA_REDUCE_MEAN, 3, {V("x"), OPT_I("axes"), OPT_B("keepdims")}, rule_reduce},
    {"reduce_max", ISA_REDUCE_MAX, 3, {V("x"), OPT_I("axes"), OPT_B("keepdims")}, rule_reduce},
    {"argmax", ISA_ARGMAX, 2, {V("x"), OPT_I("axis")}, rule_argmax},
    {"reshape", ISA_RESHAPE, 2, {V("x"), S("shape")}, rule_reshape},
    {"transpose", ISA_TRANSPOSE, 2, {V("x"), OPT_I("perm")}, rule_transpose},
    {"concat", ISA_CONCAT, 3, {V("a"), V("b"), OPT_I("axis")}, rule_concat},
    {"slice", ISA_SLICE, 3, {V("x"), S("starts"), S("ends")}, rule_slice},
    {"gather", ISA_GATHER, 3, {V("x"), V("idx"), OPT_I("axis")}, rule_gather},
    {"pad", ISA_PAD, 2, {V("x"), S("pads")}, rule_pad},
    {"shape", ISA_SHAPE, 1, {V("x")}, rule_shape},
    {"fill", ISA_FILL, 2, {S("shape"), H("value")}, rule_fill},
    {"range", ISA_RANGE, 3, {H("start"), H("limit"), OPT_H("delta")}, rule_range},
};

const cc_builtin *cc_builtin_find(const char *name)
{
    for (size_t i = 0; i < UT_COUNTOF(builtins); i++)
        if (strcmp(builtins[i].name, name) == 0)
            return &builtins[i];
    return NULL;
}

cc_expr *cc_gather(cc *C, cc_pos pos, cc_expr *x, cc_expr *idx, int axis)
{
    cc_expr *e = cc_alloc(C, sizeof *e);
    e->kind = CC_E_CALL;
    e->pos = pos;
    e->start = x->start;
    e->u.call.name = "gather";
    e->u.call.name_pos = pos;
    e->u.call.builtin = ISA_GATHER;
    static const cc_builtin indexing = {"indexing", ISA_GATHER, 0, {{0}}, NULL};
    gather_type(C, &indexing, e, x, idx, axis);
    return e;
}
