/* import/onnx_fold.c — shape arithmetic on constants, done while importing:
 * exporters compute Reshape/Expand/Slice shapes with Shape -> Gather ->
 * Unsqueeze -> Concat chains; once the dims are known those are small
 * integer constants, and folding them keeps them out of the program (and
 * out of every loop iteration) and lets the ops after them know ranks. */
#include <string.h>

#include "import/onnx_int.h"

#define FOLD_MAX 64 /* elements: shapes, not data */

typedef struct fval {
    int rank; /* 0 or 1 */
    int n;
    int64_t v[FOLD_MAX];
} fval;

static bool get(const ox_val *x, fval *f)
{
    if (!x || !x->cdata || x->rank < 0 || x->rank > 1)
        return false;
    f->rank = x->rank;
    f->n = ox_const_ints(x, f->v, FOLD_MAX);
    return f->n >= 0 && (f->rank == 1 || f->n == 1);
}

static void put(ox_node *N, uint32_t k, uint8_t dtype, const fval *f)
{
    ox_val *o = &N->out[k];
    memset(o, 0, sizeof *o);
    o->dtype = dtype;
    o->rank = (int8_t)f->rank;
    for (int d = 0; d < TFVM_MAX_RANK; d++)
        o->dims[d] = -1;
    if (f->rank)
        o->dims[0] = f->n;
    size_t es = dtype == TFVM_I64 ? 8 : 4;
    unsigned char *p = cc_alloc(N->C, (size_t)f->n * es + 8);
    for (int i = 0; i < f->n; i++) {
        if (dtype == TFVM_I64) {
            memcpy(p + 8 * i, &f->v[i], 8);
        } else {
            int32_t x = (int32_t)f->v[i];
            memcpy(p + 4 * i, &x, 4);
        }
    }
    o->cdata = p;
    o->v = cc_const_new(N->C, N->b, (tfvm_dtype)dtype, f->rank, o->dims, p, (size_t)f->n * es, true);
}

static bool arith(const char *op, const fval *a, const fval *b, fval *r)
{
    int n = a->n > b->n ? a->n : b->n;
    if ((a->n != n && a->n != 1) || (b->n != n && b->n != 1))
        return false;
    r->rank = a->rank > b->rank ? a->rank : b->rank;
    r->n = n;
    for (int i = 0; i < n; i++) {
        int64_t x = a->v[a->n == 1 ? 0 : i], y = b->v[b->n == 1 ? 0 : i];
        /* in unsigned arithmetic: integers wrap, as the VM's do */
        if (strcmp(op, "Add") == 0)
            r->v[i] = (int64_t)((uint64_t)x + (uint64_t)y);
        else if (strcmp(op, "Sub") == 0)
            r->v[i] = (int64_t)((uint64_t)x - (uint64_t)y);
        else if (strcmp(op, "Mul") == 0)
            r->v[i] = (int64_t)((uint64_t)x * (uint64_t)y);
        else if (y == 0 || (y == -1 && x == INT64_MIN))
            return false; /* Div: the run reports it */
        else
            r->v[i] = x / y;
    }
    return true;
}

bool ox_try_fold(ox_node *N)
{
    const char *op = N->n->op_type;
    if (N->n_out != 1 || N->n_in == 0)
        return false;
    fval a, b, r;
    ox_val *x = N->in[0];
    if (!get(x, &a) || (x->dtype != TFVM_I64 && x->dtype != TFVM_I32))
        return false;
    uint8_t dt = x->dtype;
    if (strcmp(op, "Identity") == 0 && N->n_in == 1) {
        r = a;
    } else if (strcmp(op, "Neg") == 0 && N->n_in == 1) {
        r = a;
        for (int i = 0; i < r.n; i++)
            r.v[i] = (int64_t)(0 - (uint64_t)r.v[i]);
        if (dt == TFVM_I32)
            for (int i = 0; i < r.n; i++)
                r.v[i] = (int32_t)r.v[i];
    } else if (strcmp(op, "ConstantOfShape") == 0 && N->n_in == 1) {
        /* a vector of n integers (the suffixes of computed shapes) */
        const Onnx__AttributeProto *va = ox_attr(N, "value");
        ox_val t;
        int64_t c[1];
        if (a.rank != 1 || a.n != 1 || a.v[0] < 0 || a.v[0] > FOLD_MAX || !va || !va->t)
            return false;
        ox_tensor_const(N->X, N, N->b, va->t, &t);
        if ((t.dtype != TFVM_I64 && t.dtype != TFVM_I32) || ox_const_ints(&t, c, 1) != 1)
            return false;
        dt = t.dtype;
        r.rank = 1;
        r.n = (int)a.v[0];
        for (int i = 0; i < r.n; i++)
            r.v[i] = c[0];
    } else if (strcmp(op, "Cast") == 0 && N->n_in == 1) {
        int64_t to = ox_attr_i(N, "to", 0);
        if (to != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && to != ONNX__TENSOR_PROTO__DATA_TYPE__INT32)
            return false;
        r = a;
        dt = to == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? TFVM_I64 : TFVM_I32;
        if (dt == TFVM_I32)
            for (int i = 0; i < r.n; i++)
                r.v[i] = (int32_t)r.v[i];
    } else if ((strcmp(op, "Add") == 0 || strcmp(op, "Sub") == 0 || strcmp(op, "Mul") == 0 ||
                strcmp(op, "Div") == 0) && N->n_in == 2) {
        if (!get(N->in[1], &b) || N->in[1]->dtype != dt || !arith(op, &a, &b, &r))
            return false;
        if (dt == TFVM_I32)
            for (int i = 0; i < r.n; i++)
                r.v[i] = (int32_t)r.v[i];
    } else if (strcmp(op, "Concat") == 0) {
        if (ox_attr_i(N, "axis", 0) != 0 && ox_attr_i(N, "axis", 0) != -1)
            return false;
        r.rank = 1;
        r.n = 0;
        for (uint32_t k = 0; k < N->n_in; k++) {
            if (!get(N->in[k], &b) || b.rank != 1 || N->in[k]->dtype != dt || r.n + b.n > FOLD_MAX)
                return false;
            memcpy(r.v + r.n, b.v, (size_t)b.n * sizeof *b.v);
            r.n += b.n;
        }
    } else if (strcmp(op, "Gather") == 0 && N->n_in == 2) {
        if (a.rank != 1 || ox_attr_i(N, "axis", 0) != 0 || !get(N->in[1], &b))
            return false;
        r.rank = b.rank;
        r.n = b.n;
        for (int i = 0; i < b.n; i++) {
            int64_t j = b.v[i] < 0 ? b.v[i] + a.n : b.v[i];
            if (j < 0 || j >= a.n)
                return false;
            r.v[i] = a.v[j];
        }
    } else if (strcmp(op, "Unsqueeze") == 0) {
        /* a scalar as a one-element vector */
        int64_t ax[2];
        int nax = N->X->opset < 13 ? ox_attr_ints(N, "axes", ax, 2) : ox_const_ints(N->n_in > 1 ? N->in[1] : NULL, ax, 2);
        if (a.rank != 0 || nax != 1 || (ax[0] != 0 && ax[0] != -1))
            return false;
        r = a;
        r.rank = 1;
    } else if (strcmp(op, "Squeeze") == 0) {
        if (a.rank != 1 || a.n != 1)
            return false;
        r = a;
        r.rank = 0;
    } else if (strcmp(op, "Slice") == 0 && N->X->opset >= 10 && N->n_in >= 3) {
        fval s, e, axs = {.n = 0}, st = {.n = 0};
        if (a.rank != 1 || !get(N->in[1], &s) || !get(N->in[2], &e) || s.n != 1 || e.n != 1)
            return false;
        if (N->n_in > 3 && N->in[3] && (!get(N->in[3], &axs) || axs.n != 1 || (axs.v[0] != 0 && axs.v[0] != -1)))
            return false;
        if (N->n_in > 4 && N->in[4] && (!get(N->in[4], &st) || st.n != 1 || st.v[0] != 1))
            return false;
        int64_t lo = s.v[0], hi = e.v[0], n = a.n;
        lo = lo < 0 ? (lo + n < 0 ? 0 : lo + n) : (lo > n ? n : lo);
        hi = hi < 0 ? (hi + n < 0 ? 0 : hi + n) : (hi > n ? n : hi);
        r.rank = 1;
        r.n = hi > lo ? (int)(hi - lo) : 0;
        if (r.n)
            memcpy(r.v, a.v + lo, (size_t)r.n * sizeof *r.v);
    } else {
        return false;
    }
    put(N, 0, dt, &r);
    return true;
}
