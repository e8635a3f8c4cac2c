/* compiler/shape.c — symbolic dimensions and the shape rules of
 * compiler/shape.h. */
#include <string.h>

#include "compiler/shape.h"
#include "isa/isa.h"

bool cc_dv_known(const cc_dimvec *a)
{
    for (int k = 0; k < a->n; k++)
        if (a->sym[k] != CC_EL_KNOWN)
            return false;
    return true;
}

int64_t cc_dv_dim(const cc_dimvec *a, int k)
{
    if (a->sym[k] == CC_EL_KNOWN)
        return a->v[k] >= 0 ? a->v[k] : CC_DIM_ANY;
    return a->sym[k];
}

bool cc_dv_of_dims(int rank, const int64_t *dims, cc_dimvec *out)
{
    if (rank < 0 || rank > CC_DV_MAX)
        return false;
    out->rank = 1;
    out->n = rank;
    for (int k = 0; k < rank; k++) {
        out->v[k] = dims[k] >= 0 ? dims[k] : 0;
        out->sym[k] = dims[k] >= 0 ? CC_EL_KNOWN : dims[k];
    }
    return true;
}

static void set_known(cc_dimvec *r, int k, int64_t v)
{
    r->v[k] = v;
    r->sym[k] = CC_EL_KNOWN;
}

static void set_unknown(cc_dimvec *r, int k)
{
    r->v[k] = 0;
    r->sym[k] = CC_EL_UNKNOWN;
}

/* the shape of a broadcast of a and b (one-element vectors stretch) */
static bool dv_shape2(const cc_dimvec *a, const cc_dimvec *b, cc_dimvec *r)
{
    int n = a->n > b->n ? a->n : b->n;
    if ((a->n != n && a->n != 1) || (b->n != n && b->n != 1))
        return false;
    r->rank = a->rank > b->rank ? a->rank : b->rank;
    r->n = n;
    return true;
}

/* x op y where y is known: whether x's element passes through unchanged */
static bool identity_on(char op, int64_t y)
{
    return ((op == '+' || op == '-') && y == 0) || ((op == '*' || op == '/') && y == 1);
}

bool cc_dv_arith(char op, const cc_dimvec *a, const cc_dimvec *b, cc_dimvec *r)
{
    if (!dv_shape2(a, b, r))
        return false;
    for (int i = 0; i < r->n; i++) {
        int ia = a->n == 1 ? 0 : i, ib = b->n == 1 ? 0 : i;
        int64_t x = a->v[ia], y = b->v[ib];
        bool kx = a->sym[ia] == CC_EL_KNOWN, ky = b->sym[ib] == CC_EL_KNOWN;
        if (!kx || !ky) {
            if (ky && identity_on(op, y)) {
                r->v[i] = x;
                r->sym[i] = a->sym[ia];
            } else if (kx && op == '*' && x == 1) {
                r->v[i] = y;
                r->sym[i] = b->sym[ib];
            } else {
                set_unknown(r, i);
            }
            continue;
        }
        /* in unsigned arithmetic: integers wrap, as the VM's do */
        if (op == '+')
            set_known(r, i, (int64_t)((uint64_t)x + (uint64_t)y));
        else if (op == '-')
            set_known(r, i, (int64_t)((uint64_t)x - (uint64_t)y));
        else if (op == '*')
            set_known(r, i, (int64_t)((uint64_t)x * (uint64_t)y));
        else if (y == 0 || (y == -1 && x == INT64_MIN))
            return false; /* the run reports it */
        else
            set_known(r, i, x / y);
    }
    return true;
}

bool cc_dv_equal(const cc_dimvec *a, const cc_dimvec *b, cc_dimvec *r)
{
    if (!dv_shape2(a, b, r))
        return false;
    for (int i = 0; i < r->n; i++) {
        int ia = a->n == 1 ? 0 : i, ib = b->n == 1 ? 0 : i;
        int64_t sa = a->sym[ia], sb = b->sym[ib];
        if (sa == CC_EL_KNOWN && sb == CC_EL_KNOWN)
            set_known(r, i, a->v[ia] == b->v[ib]);
        else if (cc_dim_is_sym(sa) && sa == sb)
            set_known(r, i, 1);
        else if ((cc_dim_is_sym(sa) && sb == CC_EL_KNOWN && b->v[ib] < 0) ||
                 (cc_dim_is_sym(sb) && sa == CC_EL_KNOWN && a->v[ia] < 0))
            set_known(r, i, 0);
        else
            set_unknown(r, i);
    }
    return true;
}

bool cc_dv_where(const cc_dimvec *c, const cc_dimvec *a, const cc_dimvec *b, cc_dimvec *r)
{
    cc_dimvec ab;
    if (!cc_dv_known(c) || !dv_shape2(a, b, &ab) || !dv_shape2(c, &ab, r))
        return false;
    for (int i = 0; i < r->n; i++) {
        const cc_dimvec *from = c->v[c->n == 1 ? 0 : i] ? a : b;
        int j = from->n == 1 ? 0 : i;
        r->v[i] = from->v[j];
        r->sym[i] = from->sym[j];
    }
    return true;
}

/* ---- Shape rules: the instructions' own (isa/shape.h) -------------------------------------- */

static isa_shape dims_shape(int rank, const int64_t *dims)
{
    isa_shape s = {.rank = (int8_t)rank, .n_vals = -1};
    if (rank > 0)
        memcpy(s.dims, dims, sizeof(int64_t) * (size_t)rank);
    return s;
}

/* A dimension vector as a shape operand's values (its encoding is isa_shape's). */
static isa_shape dv_shape(const cc_dimvec *t)
{
    return (isa_shape){.rank = 1, .dims = {t->n}, .n_vals = t->n, .vals = t->v, .syms = t->sym};
}

int64_t cc_dim_bcast(int64_t a, int64_t b) { return isa_dim_bcast(a, b); }

int cc_shape_bcast(int ra, const int64_t *a, int rb, const int64_t *b, int64_t *out)
{
    isa_shape x[2] = {dims_shape(ra, a), dims_shape(rb, b)}, o;
    const isa_shape *xs[2] = {&x[0], &x[1]};
    isa_shape_bcast(xs, 2, &o);
    memcpy(out, o.dims, sizeof(int64_t) * (size_t)o.rank);
    return o.rank;
}

void cc_shape_reshape(int rx, const int64_t *x, const cc_dimvec *t, bool allowzero, int64_t *out)
{
    /* ONNX's 0 copies x's dim (unless allowzero): then it is RESHAPE's rule */
    cc_dimvec u = *t;
    for (int k = 0; k < t->n; k++)
        if (t->sym[k] == CC_EL_KNOWN && t->v[k] == 0 && !allowzero) {
            int64_t d = rx >= 0 && k < rx ? x[k] : CC_DIM_ANY;
            u.v[k] = d >= 0 ? d : 0;
            u.sym[k] = d >= 0 ? CC_EL_KNOWN : d;
        }
    isa_shape in[2] = {dims_shape(rx, x), dv_shape(&u)}, o;
    char msg[1];
    isa_shape_rule(ISA_RESHAPE, 0, in, 2, &o, msg, sizeof msg);
    for (int k = 0; k < t->n; k++)
        out[k] = o.rank == t->n ? o.dims[k] : cc_dv_dim(&u, k);
}

int cc_shape_expand(int rx, const int64_t *x, const cc_dimvec *t, int64_t *out)
{
    isa_shape in[2] = {dims_shape(rx, x), dv_shape(t)}, o;
    char msg[1];
    isa_shape_rule(ISA_EXPAND, 0, in, 2, &o, msg, sizeof msg);
    if (o.rank > 0)
        memcpy(out, o.dims, sizeof(int64_t) * (size_t)o.rank);
    return o.rank;
}
