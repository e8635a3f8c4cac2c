/* import/onnx_fold.c — shape arithmetic, done while importing: exporters
 * compute Reshape/Expand/Slice shapes with Shape -> Gather -> Unsqueeze ->
 * Concat chains. What is known of such small integer values (each element
 * a number, a symbolic dimension such as `batch`, or unknown: a cc_dimvec,
 * compiler/shape.h) follows them through the chain; once every element is
 * known they are constants, and folding them keeps them out of the program
 * (and out of every loop iteration). Either way the ops after them know
 * ranks, and dims by name. */
#include <string.h>

#include "import/onnx_int.h"

/* What is known of x's elements: a constant i32/i64/bool scalar or vector,
 * or a value with a cc_dimvec. */
bool ox_dims_of(const ox_val *x, cc_dimvec *f)
{
    if (!x || x->rank < 0 || x->rank > 1)
        return false;
    if (x->dv) {
        *f = *x->dv;
        return true;
    }
    if (!x->cdata)
        return false;
    f->rank = x->rank;
    if (x->dtype == TFVM_BOOL) {
        int64_t n = ox_count_of(x);
        if (n < 0 || n > CC_DV_MAX)
            return false;
        f->n = (int)n;
        for (int i = 0; i < f->n; i++)
            f->v[i] = ((const uint8_t *)x->cdata)[i] != 0;
    } else {
        f->n = ox_const_ints(x, f->v, CC_DV_MAX);
    }
    memset(f->sym, 0, sizeof f->sym);
    return f->n >= 0 && (f->rank == 1 || f->n == 1);
}

static bool is_int(const ox_val *x) { return x->dtype == TFVM_I64 || x->dtype == TFVM_I32; }

static void put(ox_node *N, uint32_t k, uint8_t dtype, const cc_dimvec *f)
{
    ox_val *o = &N->out[k];
    memset(o, 0, sizeof *o);
    o->dtype = dtype;
    o->rank = (int8_t)f->rank;
    for (int d = 0; d < TFVM_MAX_RANK; d++)
        o->dims[d] = -1;
    if (f->rank)
        o->dims[0] = f->n;
    size_t es = dtype == TFVM_I64 ? 8 : dtype == TFVM_I32 ? 4 : 1;
    unsigned char *p = cc_alloc(N->C, (size_t)f->n * es + 8);
    for (int i = 0; i < f->n; i++) {
        if (dtype == TFVM_I64) {
            memcpy(p + 8 * i, &f->v[i], 8);
        } else if (dtype == TFVM_I32) {
            int32_t x = (int32_t)f->v[i];
            memcpy(p + 4 * i, &x, 4);
        } else {
            p[i] = f->v[i] != 0;
        }
    }
    o->cdata = p;
    o->v = cc_const_new(N->C, N->b, (tfvm_dtype)dtype, f->rank, o->dims, p, (size_t)f->n * es, true);
}

static void set_el(cc_dimvec *r, int i, int64_t v)
{
    r->v[i] = v;
    r->sym[i] = CC_EL_KNOWN;
}

static bool is(const ox_node *N, const char *op, uint32_t n_in)
{
    return strcmp(N->n->op_type, op) == 0 && (n_in == 0 || N->n_in == n_in);
}

/* a Slice bound (negative: from the end) clamped to [0, n] */
static int64_t clamp_bound(int64_t i, int64_t n)
{
    if (i < 0)
        return i + n < 0 ? 0 : i + n;
    return i > n ? n : i;
}

/* Shape(x): x's dims, sliced by start/end (opset 15) */
static bool shape_rule(ox_node *N, cc_dimvec *r)
{
    const ox_val *x = N->in[0];
    if (!x || !cc_dv_of_dims(x->rank, x->dims, r))
        return false;
    int64_t n = r->n, lo = clamp_bound(ox_attr_i(N, "start", 0), n), hi = clamp_bound(ox_attr_i(N, "end", n), n);
    int m = hi > lo ? (int)(hi - lo) : 0;
    memmove(r->v, r->v + lo, (size_t)m * sizeof *r->v);
    memmove(r->sym, r->sym + lo, (size_t)m * sizeof *r->sym);
    r->n = m;
    return true;
}

static bool concat_rule(ox_node *N, uint8_t dt, cc_dimvec *r)
{
    cc_dimvec b;
    int64_t axis = ox_attr_i(N, "axis", 0);
    if (axis != 0 && axis != -1)
        return false;
    r->rank = 1;
    r->n = 0;
    for (uint32_t k = 0; k < N->n_in; k++) {
        if (!ox_dims_of(N->in[k], &b) || b.rank != 1 || N->in[k]->dtype != dt || r->n + b.n > CC_DV_MAX)
            return false;
        memcpy(r->v + r->n, b.v, (size_t)b.n * sizeof *b.v);
        memcpy(r->sym + r->n, b.sym, (size_t)b.n * sizeof *b.sym);
        r->n += b.n;
    }
    return true;
}

static bool gather_rule(ox_node *N, const cc_dimvec *a, cc_dimvec *r)
{
    cc_dimvec b;
    if (a->rank != 1 || ox_attr_i(N, "axis", 0) != 0 || !ox_dims_of(N->in[1], &b) || !cc_dv_known(&b))
        return false;
    r->rank = b.rank;
    r->n = b.n;
    for (int i = 0; i < b.n; i++) {
        int64_t j = b.v[i] < 0 ? b.v[i] + a->n : b.v[i];
        if (j < 0 || j >= a->n)
            return false;
        r->v[i] = a->v[j];
        r->sym[i] = a->sym[j];
    }
    return true;
}

static bool slice_rule(ox_node *N, const cc_dimvec *a, cc_dimvec *r)
{
    cc_dimvec s, e, axs = {.n = 0}, st = {.n = 0};
    if (N->X->opset < 10 || N->n_in < 3 || a->rank != 1 || !ox_dims_of(N->in[1], &s) || !ox_dims_of(N->in[2], &e) || s.n != 1 ||
        e.n != 1 || !cc_dv_known(&s) || !cc_dv_known(&e))
        return false;
    if (N->n_in > 3 && N->in[3] && (!ox_dims_of(N->in[3], &axs) || axs.n != 1 || (axs.v[0] != 0 && axs.v[0] != -1)))
        return false;
    if (N->n_in > 4 && N->in[4] && (!ox_dims_of(N->in[4], &st) || st.n != 1 || st.v[0] != 1))
        return false;
    int64_t lo = clamp_bound(s.v[0], a->n), hi = clamp_bound(e.v[0], a->n);
    r->rank = 1;
    r->n = hi > lo ? (int)(hi - lo) : 0;
    memcpy(r->v, a->v + lo, (size_t)r->n * sizeof *r->v);
    memcpy(r->sym, a->sym + lo, (size_t)r->n * sizeof *r->sym);
    return true;
}

/* ConstantOfShape of a known length: n copies of an integer value */
static bool fill_rule(ox_node *N, const cc_dimvec *a, uint8_t *dt, cc_dimvec *r)
{
    const Onnx__AttributeProto *va = ox_attr(N, "value");
    ox_val t;
    int64_t c[1];
    if (a->rank != 1 || a->n != 1 || a->sym[0] != CC_EL_KNOWN || a->v[0] < 0 || a->v[0] > CC_DV_MAX || !va ||
        !va->t)
        return false;
    ox_tensor_const(N->X, N, N->b, va->t, &t);
    if (!is_int(&t) || ox_const_ints(&t, c, 1) != 1)
        return false;
    *dt = t.dtype;
    r->rank = 1;
    r->n = (int)a->v[0];
    for (int i = 0; i < r->n; i++)
        set_el(r, i, c[0]);
    return true;
}

/* Reshape of a vector or scalar to a vector or scalar: the same elements */
static bool reshape_rule(ox_node *N, const cc_dimvec *a, cc_dimvec *r)
{
    cc_dimvec t;
    if (N->X->opset < 5 || !ox_dims_of(N->in[1], &t) || !cc_dv_known(&t) || t.rank != 1 || t.n > 1)
        return false;
    if (t.n == 1 && t.v[0] != -1 && t.v[0] != a->n)
        return false;
    if (t.n == 0 && a->n != 1)
        return false;
    *r = *a;
    r->rank = t.n;
    return true;
}

/* What op N gives, as far as known, from what is known of its inputs: the
 * result's elements r and dtype *dt; false when it is not shape arithmetic. */
static bool rule(ox_node *N, uint8_t *dt, cc_dimvec *r)
{
    cc_dimvec a, b, c;
    if (N->n_out != 1 || N->n_in == 0 || !N->in[0])
        return false;
    if (is(N, "Shape", 1)) {
        *dt = TFVM_I64;
        return shape_rule(N, r);
    }
    ox_val *x = N->in[0];
    if (!ox_dims_of(x, &a))
        return false;
    *dt = x->dtype;
    if (is(N, "Where", 3)) {
        *dt = N->in[1] ? N->in[1]->dtype : 0;
        return N->in[1] && N->in[2] && is_int(N->in[1]) && ox_dims_of(N->in[1], &b) && ox_dims_of(N->in[2], &c) &&
               cc_dv_where(&a, &b, &c, r);
    }
    if (!is_int(x))
        return false;
    if (is(N, "Identity", 1)) {
        *r = a;
        return true;
    }
    if (is(N, "Neg", 1)) {
        b = a;
        set_el(&b, 0, 0);
        b.n = 1;
        return cc_dv_arith('-', &b, &a, r);
    }
    if (is(N, "ConstantOfShape", 1))
        return fill_rule(N, &a, dt, r);
    if (is(N, "Cast", 1)) {
        int64_t to = ox_attr_i(N, "to", 0);
        if (to != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && to != ONNX__TENSOR_PROTO__DATA_TYPE__INT32)
            return false;
        *dt = to == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? TFVM_I64 : TFVM_I32;
        *r = a;
        return true;
    }
    static const char *const ariths[] = {"Add", "Sub", "Mul", "Div"};
    for (int k = 0; k < 4; k++)
        if (is(N, ariths[k], 2))
            return ox_dims_of(N->in[1], &b) && N->in[1]->dtype == x->dtype && cc_dv_arith("+-*/"[k], &a, &b, r);
    if (is(N, "Equal", 2)) {
        *dt = TFVM_BOOL;
        return ox_dims_of(N->in[1], &b) && cc_dv_equal(&a, &b, r);
    }
    if (is(N, "Concat", 0))
        return concat_rule(N, x->dtype, r);
    if (is(N, "Gather", 2))
        return gather_rule(N, &a, r);
    if (is(N, "Unsqueeze", 0)) { /* a scalar as a one-element vector */
        int64_t ax[2];
        int nax = N->X->opset < 13 ? ox_attr_ints(N, "axes", ax, 2)
                                   : ox_const_ints(N->n_in > 1 ? N->in[1] : NULL, ax, 2);
        *r = a;
        r->rank = 1;
        return a.rank == 0 && nax == 1 && (ax[0] == 0 || ax[0] == -1);
    }
    if (is(N, "Squeeze", 0)) {
        *r = a;
        r->rank = 0;
        return a.rank == 1 && a.n == 1;
    }
    if (is(N, "Slice", 0))
        return slice_rule(N, &a, r);
    if (is(N, "Reshape", 2))
        return reshape_rule(N, &a, r);
    return false;
}

bool ox_try_fold(ox_node *N)
{
    uint8_t dt = 0;
    cc_dimvec r;
    N->dv = NULL;
    if (!rule(N, &dt, &r))
        return false;
    if (dt == TFVM_I32)
        for (int i = 0; i < r.n; i++)
            r.v[i] = (int32_t)r.v[i];
    if (cc_dv_known(&r) && (dt == TFVM_I64 || dt == TFVM_I32 || dt == TFVM_BOOL)) {
        put(N, 0, dt, &r);
        return true;
    }
    N->dv = cc_alloc(N->C, sizeof r);
    *N->dv = r;
    return false;
}

void ox_keep_facts(ox_node *N)
{
    ox_val *o = &N->out[0];
    const cc_dimvec *f = N->dv;
    if (!f || !o->v.n || o->cdata || (o->rank >= 0 && o->rank != f->rank) ||
        (o->rank == 1 && o->dims[0] >= 0 && o->dims[0] != f->n))
        return;
    o->dv = f;
    if (o->rank < 0 || (f->rank == 1 && o->dims[0] < 0)) {
        ox_unknown_shape(o, f->rank);
        if (f->rank)
            o->dims[0] = f->n;
        o->v.n->types[o->v.k] = ox_vtype(o);
    }
}
