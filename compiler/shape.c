/* compiler/shape.c — symbolic dimensions and the shape rules of
 * compiler/shape.h. */
#include <string.h>

#include "compiler/shape.h"

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

int64_t cc_dim_bcast(int64_t a, int64_t b)
{
    if (a == 1)
        return b;
    if (b == 1 || a == b)
        return a;
    /* a known size other than 1 wins over a symbol or an unknown dim (the
     * other must be 1 or equal, or the run fails) */
    if (a >= 0 && b < 0)
        return a;
    if (b >= 0 && a < 0)
        return b;
    return CC_DIM_ANY;
}

int cc_shape_bcast(int ra, const int64_t *a, int rb, const int64_t *b, int64_t *out)
{
    int rk = ra > rb ? ra : rb;
    for (int k = 0; k < rk; k++) {
        int ka = k - (rk - ra), kb = k - (rk - rb);
        out[k] = cc_dim_bcast(ka >= 0 ? a[ka] : 1, kb >= 0 ? b[kb] : 1);
    }
    return rk;
}

void cc_shape_reshape(int rx, const int64_t *x, const cc_dimvec *t, bool allowzero, int64_t *out)
{
    int infer = -1;
    for (int k = 0; k < t->n; k++) {
        bool known = t->sym[k] == CC_EL_KNOWN;
        if (known && t->v[k] == 0 && !allowzero)
            out[k] = rx >= 0 && k < rx ? x[k] : CC_DIM_ANY;
        else if (known && t->v[k] == -1)
            out[k] = CC_DIM_ANY, infer = k;
        else
            out[k] = cc_dv_dim(t, k);
    }
    if (infer < 0 || rx < 0)
        return;
    /* -1: the known part of x's size over the known part of the others,
     * when the rest (symbols) cancel out one for one */
    int64_t num = 1, den = 1;
    int64_t syms[2 * TFVM_MAX_RANK + CC_DV_MAX];
    int ns = 0;
    for (int k = 0; k < rx; k++) {
        if (x[k] >= 0)
            num *= x[k];
        else if (cc_dim_is_sym(x[k]))
            syms[ns++] = x[k];
        else
            return;
    }
    for (int k = 0; k < t->n; k++) {
        if (k == infer)
            continue;
        if (out[k] >= 0) {
            den *= out[k];
            continue;
        }
        if (!cc_dim_is_sym(out[k]))
            return;
        int j = 0;
        while (j < ns && syms[j] != out[k])
            j++;
        if (j == ns)
            return;
        syms[j] = syms[--ns];
    }
    if (ns == 0 && den > 0 && num % den == 0)
        out[infer] = num / den;
    else if (ns == 1 && den == num)
        out[infer] = syms[0];
}

int cc_shape_expand(int rx, const int64_t *x, const cc_dimvec *t, int64_t *out)
{
    int rk = rx > t->n ? rx : t->n;
    if (rk > TFVM_MAX_RANK)
        return -1;
    for (int k = 0; k < rk; k++) {
        int kx = k - (rk - rx), kt = k - (rk - t->n);
        int64_t dx = kx >= 0 ? x[kx] : 1;
        int64_t dt = kt >= 0 ? cc_dv_dim(t, kt) : 1;
        out[k] = cc_dim_bcast(dx, dt);
    }
    return rk;
}
