/* devices/cpu/index.c — ops driven by indices: GATHER_ELEMENTS, TOPK (the
 * indices of the k best), ONEHOT, STACK_PUT, the scan-output accumulator
 * that grows in place when it holds the only reference to its tensor, and
 * SCATTER_ROWS. */
#include "devices/cpu/kern.h"

#include <math.h>
#include <string.h>

/* Element t of an i32/i64 index view. */
static int64_t index_at(const dev_kview *ix, int64_t t)
{
    return ix->dtype == TFVM_I32 ? ((const int32_t *)ix->data)[t] : ((const int64_t *)ix->data)[t];
}

/* ---- GATHER_ELEMENTS ------------------------------------------------------------------
 * ONNX GatherElements: out[i_0, .., i_r] = x[i_0, .., idx[i_0, .., i_r], .., i_r]
 * with the index on the axis; idx has x's rank and its dims fit x's outside
 * the axis; a negative index counts from the end. */
tfvm_status dev_cpu_gather_elements(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0], *ix = &in[1];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    int axis;
    tfvm_status st = dev_kaxis(k, x, &axis);
    if (st)
        return st;
    if (ix->dtype != TFVM_I32 && ix->dtype != TFVM_I64)
        return dev_kfail(k, TFVM_ERR_TYPE, "indices must be i32 or i64, got %s", dev_kdesc(ix, s1));
    bool fit = ix->rank == x->rank;
    for (int i = 0; fit && i < x->rank; i++)
        fit = i == axis || ix->dims[i] <= x->dims[i];
    if (!fit)
        return dev_kfail(k, TFVM_ERR_SHAPE, "indices %s do not fit x %s outside axis %d", dev_kshape(ix, s1),
                         dev_kshape(x, s2), axis);
    const int64_t d = x->dims[axis];
    for (int64_t t = 0; t < ix->count; t++) {
        const int64_t v = index_at(ix, t);
        if (v < -d || v >= d)
            return dev_kfail(k, TFVM_ERR_SHAPE, "index %lld out of range for axis %d of %s", (long long)v,
                             axis, dev_kshape(x, s1));
    }
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, ix->rank, ix->dims, &r, &o)))
        return st;
    const size_t esz = dev_kesize(x->dtype);
    if (ix->count) {
        int64_t xs[TFVM_MAX_RANK], idx[TFVM_MAX_RANK] = {0};
        dev_kstrides(x->rank, x->dims, xs);
        const char *xp = x->data;
        char *op = o;
        for (int64_t t = 0; t < ix->count; t++, op += esz) {
            int64_t v = index_at(ix, t), off = 0;
            if (v < 0)
                v += d;
            for (int i = 0; i < x->rank; i++)
                off += (i == axis ? v : idx[i]) * xs[i];
            memcpy(op, xp + (size_t)off * esz, esz);
            for (int j = x->rank - 1; j >= 0 && ++idx[j] == ix->dims[j]; j--)
                idx[j] = 0;
        }
    }
    *out = r;
    return TFVM_OK;
}

/* ---- TOPK -------------------------------------------------------------------------------
 * The indices of the k largest (smallest) elements of each line along the
 * axis, best first, ties by the lower index: a stable merge sort of the
 * line's indices by value. NaN counts as larger than every number. */
#define TOPK_GT(a, b) ((a) > (b) || ((a) != (a) && (b) == (b)))
#define TOPK_SORT(T)                                                                       \
    do {                                                                                   \
        const T *xs = x->data;                                                             \
        int64_t *os = o;                                                                   \
        for (int64_t a = 0; a < outer; a++)                                                \
            for (int64_t b = 0; b < inner; b++) {                                          \
                const T *xp = xs + a * len * inner + b;                                    \
                int64_t *src = ia, *dst = ib;                                              \
                for (int64_t l = 0; l < len; l++)                                          \
                    src[l] = l;                                                            \
                for (int64_t w = 1; w < len; w *= 2) {                                     \
                    for (int64_t lo = 0; lo < len; lo += 2 * w) {                          \
                        const int64_t mid = lo + w < len ? lo + w : len;                   \
                        const int64_t hi = lo + 2 * w < len ? lo + 2 * w : len;            \
                        int64_t p = lo, q = mid, t = lo;                                   \
                        while (p < mid && q < hi) {                                        \
                            const T u = xp[src[q] * inner], v = xp[src[p] * inner];        \
                            /* q goes first only when strictly better */                   \
                            const bool qfirst = largest ? TOPK_GT(u, v) : TOPK_GT(v, u);   \
                            dst[t++] = qfirst ? src[q++] : src[p++];                       \
                        }                                                                  \
                        while (p < mid)                                                    \
                            dst[t++] = src[p++];                                           \
                        while (q < hi)                                                     \
                            dst[t++] = src[q++];                                           \
                    }                                                                      \
                    int64_t *sw = src;                                                     \
                    src = dst;                                                             \
                    dst = sw;                                                              \
                }                                                                          \
                int64_t *op = os + a * kk * inner + b;                                     \
                for (int64_t l = 0; l < kk; l++)                                           \
                    op[l * inner] = src[l];                                                \
            }                                                                              \
    } while (0)

tfvm_status dev_cpu_topk(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0], *lg = &in[2];
    char s1[DEV_KSHAPE];
    int axis;
    tfvm_status st = dev_kaxis(k, x, &axis);
    if (st)
        return st;
    int64_t kk;
    if ((st = dev_kscalar_i64(k, &in[1], "k", false, &kk)))
        return st;
    if (lg->dtype != TFVM_BOOL || lg->count != 1 || lg->rank > 1)
        return dev_kfail(k, TFVM_ERR_TYPE, "largest must be a bool scalar, got %s", dev_kdesc(lg, s1));
    const bool largest = *(const uint8_t *)lg->data != 0;
    const int64_t len = x->dims[axis];
    if (kk < 0 || kk > len)
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "k %lld out of range for axis %d of %s", (long long)kk, axis,
                         dev_kshape(x, s1));
    int64_t od[TFVM_MAX_RANK], outer = 1, inner = 1;
    for (int i = 0; i < x->rank; i++) {
        od[i] = i == axis ? kk : x->dims[i];
        if (i < axis)
            outer *= x->dims[i];
        else if (i > axis)
            inner *= x->dims[i];
    }
    int64_t *ia = NULL, *ib = NULL;
    const size_t n = (size_t)len;
    if (!(ia = dev_ktemp(k, n, sizeof *ia)) || !(ib = dev_ktemp(k, n, sizeof *ib))) {
        if (ia)
            dev_ktemp_free(k, ia, n, sizeof *ia);
        return TFVM_ERR_NOMEM;
    }
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, TFVM_I64, x->rank, od, &r, &o)) == TFVM_OK) {
        if (kk > 0 && outer * inner > 0)
            DEV_KTYPED(x->dtype, TOPK_SORT);
        *out = r;
    }
    dev_ktemp_free(k, ia, n, sizeof *ia);
    dev_ktemp_free(k, ib, n, sizeof *ib);
    return st;
}

#define ONEHOT_MAX_DEPTH (INT64_C(1) << 40)

/* ---- ONEHOT -----------------------------------------------------------------------------
 * ONNX OneHot: out has indices' dims with `depth` inserted at the axis; the
 * element is on where the index (+ depth when negative) equals its position
 * along the new axis, off elsewhere (an index still out of range: a row of off). */
tfvm_status dev_cpu_onehot(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *ix = &in[0], *vals = &in[2];
    char s1[DEV_KSHAPE];
    if (!dev_knumeric(ix->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "indices must be numeric, got %s", dev_kdesc(ix, s1));
    int64_t depth;
    tfvm_status st = dev_kscalar_i64(k, &in[1], "depth", true, &depth);
    if (st)
        return st;
    if (depth < 0 || depth > ONEHOT_MAX_DEPTH)
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "depth %lld must be in 0..2^40", (long long)depth);
    if (vals->rank != 1 || vals->count != 2)
        return dev_kfail(k, TFVM_ERR_SHAPE, "values must be a vector [off, on], got %s", dev_kdesc(vals, s1));
    const int orank = ix->rank + 1;
    if (orank > TFVM_MAX_RANK)
        return dev_kfail(k, TFVM_ERR_SHAPE, "result would have rank %d (indices %s), more than %d", orank,
                         dev_kshape(ix, s1), TFVM_MAX_RANK);
    const int32_t a = (int32_t)k->attr;
    const int64_t axis = a < 0 ? (int64_t)a + orank : a;
    if (axis < 0 || axis >= orank)
        return dev_kfail(k, TFVM_ERR_SHAPE, "axis %d out of range for result rank %d (indices %s)", (int)a,
                         orank, dev_kshape(ix, s1));
    int64_t od[TFVM_MAX_RANK], outer = 1, inner = 1, count;
    for (int i = 0, j = 0; i < orank; i++) {
        if (i == axis) {
            od[i] = depth;
            continue;
        }
        od[i] = ix->dims[j];
        if (i < axis)
            outer *= ix->dims[j];
        else
            inner *= ix->dims[j];
        j++;
    }
    if (!dev_kcount(orank, od, &count))
        return dev_kfail(k, TFVM_ERR_SHAPE, "result %s is too large", dev_kdims(orank, od, s1));
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, vals->dtype, orank, od, &r, &o)))
        return st;
    const size_t esz = dev_kesize(vals->dtype);
    const char *off = vals->data, *on = off + esz;
    char *op = o;
    for (int64_t t = 0; t < count; t++)
        memcpy(op + (size_t)t * esz, off, esz);
    for (int64_t p = 0; p < outer && count; p++)
        for (int64_t q = 0; q < inner; q++) {
            int64_t v;
            if (!dev_kget_i64(ix, p * inner + q, &v) || v < -depth || v >= depth)
                continue;
            if (v < 0)
                v += depth;
            memcpy(op + (size_t)((p * depth + v) * inner + q) * esz, on, esz);
        }
    *out = r;
    return TFVM_OK;
}

/* ---- STACK_PUT --------------------------------------------------------------------------
 * acc [n, v.dims...] with row i set to v, rows between n and i zero. The
 * tensor keeps spare rows behind its last one (its block is larger than
 * its nbytes): growth doubles the capacity, and when acc's tensor is held
 * by nobody but this call (reference count 1: the VM consumed the token
 * that carried it, and no other token, constant or API caller shares it),
 * the row is written in place, so a loop of n puts copies O(n) rows. */
#define STACK_MAX_ROWS (INT64_C(1) << 40)

/* Bytes the tensor's block holds from its data on (dev_tensor_mine: its own block). */
static size_t stack_capacity(const tfvm_tensor *t)
{
    return t->block - (size_t)((const char *)t->data - (const char *)t);
}

tfvm_status dev_cpu_stack_put(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *acc = &in[0], *v = &in[2];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    int64_t i;
    tfvm_status st = dev_kscalar_i64(k, &in[1], "index", false, &i);
    if (st)
        return st;
    if (i < 0 || i >= STACK_MAX_ROWS)
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "index %lld out of range 0..2^40-1", (long long)i);
    if (v->rank + 1 > TFVM_MAX_RANK)
        return dev_kfail(k, TFVM_ERR_SHAPE, "row %s has rank %d: a stack of it would exceed rank %d",
                         dev_kshape(v, s1), v->rank, TFVM_MAX_RANK);
    const bool fresh = acc->rank == 1 && acc->count == 0 && acc->dims[0] == 0;
    int64_t n = 0;
    if (!fresh) {
        bool same = acc->rank == v->rank + 1;
        for (int j = 0; same && j < v->rank; j++)
            same = acc->dims[j + 1] == v->dims[j];
        if (!same)
            return dev_kfail(k, TFVM_ERR_SHAPE, "rows of %s cannot hold %s", dev_kshape(acc, s1),
                             dev_kshape(v, s2));
        if (acc->dtype != v->dtype)
            return dev_kfail(k, TFVM_ERR_TYPE, "dtype mismatch: %s and %s", dev_kdesc(acc, s1),
                             dev_kdesc(v, s2));
        n = acc->dims[0];
    }
    const size_t esz = dev_kesize(v->dtype);
    size_t row;
    int64_t od[TFVM_MAX_RANK], rows = i + 1 > n ? i + 1 : n, total;
    od[0] = rows;
    memcpy(od + 1, v->dims, (size_t)v->rank * sizeof *od);
    if (!dev_kcount(v->rank + 1, od, &total) || !ut_mul_ok((size_t)v->count, esz, &row))
        return dev_kfail(k, TFVM_ERR_SHAPE, "stack %s is too large", dev_kdims(v->rank + 1, od, s1));

    tfvm_tensor *t = (tfvm_tensor *)acc->t; /* NULL only for a scalar acc, rejected above */
    if (!fresh && dev_tensor_mine(t) && (row == 0 || (uint64_t)rows <= stack_capacity(t) / row)) {
        /* Ours alone: nobody can observe the change. */
        if (i > n) /* the rows between (row i itself is written next) */
            memset((char *)t->data + (size_t)n * row, 0, (size_t)(i - n) * row);
        memcpy((char *)t->data + (size_t)i * row, v->data, row);
        t->dims[0] = rows;
        t->count = total;
        t->nbytes = (size_t)rows * row;
        *out = (dev_value){.dtype = t->dtype, .is_tensor = 1, .u.t = tfvm_tensor_ref(t)};
        return TFVM_OK;
    }
    /* A new tensor; when it grows, with room for twice the rows. */
    int64_t cap = rows;
    if (rows > n && !fresh && n <= STACK_MAX_ROWS / 2 && 2 * n > rows)
        cap = 2 * n;
    int64_t cd[TFVM_MAX_RANK], ccount;
    memcpy(cd, od, (size_t)(v->rank + 1) * sizeof *cd);
    cd[0] = cap;
    if (!dev_kcount(v->rank + 1, cd, &ccount))
        cd[0] = cap = rows;
    tfvm_tensor *nt = dev_tensor_alloc(k->alloc, (tfvm_dtype)v->dtype, v->rank + 1, cd);
    if (!nt)
        return dev_kfail(k, TFVM_ERR_NOMEM, "out of memory");
    nt->dims[0] = rows;
    nt->count = total;
    nt->nbytes = (size_t)rows * row;
    char *d = nt->data;
    if (n)
        memcpy(d, acc->data, (size_t)n * row);
    if (i > n)
        memset(d + (size_t)n * row, 0, (size_t)(i - n) * row);
    if (row)
        memcpy(d + (size_t)i * row, v->data, row);
    *out = (dev_value){.dtype = nt->dtype, .is_tensor = 1, .u.t = nt};
    return TFVM_OK;
}

/* ---- SCATTER_ROWS -----------------------------------------------------------------------
 * x with row idx[j] replaced by v[j], j = 0, 1, ... in order, so that of two
 * updates of one row the later stays (ONNX Runtime's ScatterND); a copy of x
 * and then one copy of each update row: time linear in x and v, where the
 * importers' one-hot product had taken every update times every row (and
 * spread an update's inf or NaN over rows it did not hit). */
tfvm_status dev_cpu_scatter_rows(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0], *ix = &in[1], *v = &in[2];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    if (x->rank < 1)
        return dev_kfail(k, TFVM_ERR_SHAPE, "x must have rows (rank >= 1), got %s", dev_kshape(x, s1));
    if (ix->dtype != TFVM_I64 || ix->rank != 1)
        return dev_kfail(k, TFVM_ERR_TYPE, "indices must be an i64 vector, got %s", dev_kdesc(ix, s1));
    if (v->dtype != x->dtype)
        return dev_kfail(k, TFVM_ERR_TYPE, "dtype mismatch: x %s and v %s", dev_kdesc(x, s1), dev_kdesc(v, s2));
    bool fits = v->rank == x->rank && v->dims[0] == ix->dims[0];
    for (int j = 1; fits && j < x->rank; j++)
        fits = v->dims[j] == x->dims[j];
    if (!fits)
        return dev_kfail(k, TFVM_ERR_SHAPE, "v %s must be %lld rows like those of x %s", dev_kshape(v, s1),
                         (long long)ix->dims[0], dev_kshape(x, s2));
    const int64_t R = x->dims[0], n = ix->dims[0];
    for (int64_t j = 0; j < n; j++) {
        const int64_t r = ((const int64_t *)ix->data)[j];
        if (r < 0 || r >= R)
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "index %lld out of range for %lld rows", (long long)r,
                             (long long)R);
    }
    dev_value res;
    void *o;
    tfvm_status st = dev_kresult(k, x->dtype, x->rank, x->dims, &res, &o);
    if (st)
        return st;
    const size_t esz = dev_kesize(x->dtype), row = R ? (size_t)(x->count / R) * esz : 0;
    if (x->count)
        memcpy(o, x->data, (size_t)x->count * esz);
    for (int64_t j = 0; j < n && row; j++)
        memcpy((char *)o + (size_t)((const int64_t *)ix->data)[j] * row, (const char *)v->data + (size_t)j * row, row);
    *out = res;
    return TFVM_OK;
}
