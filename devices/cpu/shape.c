/* devices/cpu/shape.c — the ops that move elements without arithmetic:
 * RESHAPE (and its kin SQUEEZE, UNSQUEEZE, FLATTEN), TRANSPOSE, CONCAT, SLICE,
 * GATHER, PAD, SHAPE, and the makers FILL and RANGE. Tensors are immutable
 * and own their data (no views), so each result is a fresh copy, but for a
 * reshape of a tensor nobody else can see, which it relabels. */
#include "devices/cpu/vec.h"
#include "devices/cpu/kern.h"
#include "devices/cpu/par.h"

#include <math.h>
#include <string.h>

static tfvm_status reshaped(dev_kctx *k, const dev_kview *x, int rank, const int64_t *dims, dev_value *out);

/* ---- RESHAPE ------------------------------------------------------------------------ */
tfvm_status dev_cpu_reshape(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    int64_t d[TFVM_MAX_RANK];
    int n;
    tfvm_status st = dev_kvec(k, &in[1], "shape", d, TFVM_MAX_RANK, &n);
    if (st)
        return st;
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < n; i++) {
        if (d[i] == -1 && infer < 0) {
            infer = i;
            continue;
        }
        if (d[i] < 0)
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "bad shape %s: dims must be >= 0, one may be -1",
                             dev_kdims(n, d, s1));
        if (d[i] && known > INT64_MAX / d[i])
            return dev_kfail(k, TFVM_ERR_SHAPE, "cannot reshape %s (%lld elements) into %s",
                             dev_kshape(x, s1), (long long)x->count, dev_kdims(n, d, s2));
        known *= d[i];
    }
    if (infer >= 0) {
        if (known == 0 || x->count % known)
            return dev_kfail(k, TFVM_ERR_SHAPE, "cannot reshape %s (%lld elements) into %s",
                             dev_kshape(x, s1), (long long)x->count, dev_kdims(n, d, s2));
        d[infer] = x->count / known;
    } else if (known != x->count) {
        return dev_kfail(k, TFVM_ERR_SHAPE, "cannot reshape %s (%lld elements) into %s",
                         dev_kshape(x, s1), (long long)x->count, dev_kdims(n, d, s2));
    }
    return reshaped(k, x, n, d, out);
}

/* ---- SQUEEZE / UNSQUEEZE / FLATTEN ------------------------------------------------------
 * New dims for the same elements in the same order, as RESHAPE: x's own
 * tensor with the new dims where nobody else can see it (dev_tensor_mine:
 * its token was consumed; an RNN's stacked outputs, squeezed and unsqueezed
 * on their way out, were copied each time), else a copy. */
static tfvm_status reshaped(dev_kctx *k, const dev_kview *x, int rank, const int64_t *dims, dev_value *out)
{
    tfvm_tensor *t = (tfvm_tensor *)(uintptr_t)x->t;
    if (!k->shape_only && rank > 0 && t && x->data == t->data && x->count == t->count && dev_tensor_mine(t)) {
        t->rank = rank;
        memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
        *out = (dev_value){.dtype = t->dtype, .is_tensor = 1, .u.t = tfvm_tensor_ref(t)};
        return TFVM_OK;
    }
    dev_value r;
    void *o;
    tfvm_status st = dev_kresult(k, x->dtype, rank, dims, &r, &o);
    if (st)
        return st;
    if (x->count)
        memcpy(o, x->data, (size_t)x->count * dev_kesize(x->dtype));
    *out = r;
    return TFVM_OK;
}

tfvm_status dev_cpu_squeeze(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    int64_t axes[TFVM_MAX_RANK], od[TFVM_MAX_RANK];
    int na, orank = 0;
    tfvm_status st = dev_kvec(k, &in[1], "axes", axes, TFVM_MAX_RANK, &na);
    if (st)
        return st;
    bool drop[TFVM_MAX_RANK] = {false};
    for (int i = 0; i < na; i++) {
        const int64_t a = axes[i] < 0 ? axes[i] + x->rank : axes[i];
        if (a < 0 || a >= x->rank)
            return dev_kfail(k, TFVM_ERR_SHAPE, "axis %lld out of range for shape %s",
                             (long long)axes[i], dev_kshape(x, s1));
        if (drop[a])
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "axis %lld repeated in axes %s",
                             (long long)axes[i], dev_kdims(na, axes, s1));
        if (x->dims[a] != 1)
            return dev_kfail(k, TFVM_ERR_SHAPE, "axis %lld of shape %s is not of size 1",
                             (long long)axes[i], dev_kshape(x, s2));
        drop[a] = true;
    }
    for (int i = 0; i < x->rank; i++)
        if (!(na ? drop[i] : x->dims[i] == 1))
            od[orank++] = x->dims[i];
    return reshaped(k, x, orank, od, out);
}

tfvm_status dev_cpu_unsqueeze(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    int64_t axes[TFVM_MAX_RANK], od[TFVM_MAX_RANK];
    int na;
    tfvm_status st = dev_kvec(k, &in[1], "axes", axes, TFVM_MAX_RANK, &na);
    if (st)
        return st;
    const int orank = x->rank + na;
    if (orank > TFVM_MAX_RANK)
        return dev_kfail(k, TFVM_ERR_SHAPE, "result would have rank %d (x %s, axes %s), more than %d",
                         orank, dev_kshape(x, s1), dev_kdims(na, axes, s2), TFVM_MAX_RANK);
    bool ins[TFVM_MAX_RANK] = {false};
    for (int i = 0; i < na; i++) {
        const int64_t a = axes[i] < 0 ? axes[i] + orank : axes[i];
        if (a < 0 || a >= orank)
            return dev_kfail(k, TFVM_ERR_SHAPE, "axis %lld out of range for result rank %d (x %s)",
                             (long long)axes[i], orank, dev_kshape(x, s1));
        if (ins[a])
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "axis %lld repeated in axes %s",
                             (long long)axes[i], dev_kdims(na, axes, s1));
        ins[a] = true;
    }
    for (int i = 0, j = 0; i < orank; i++)
        od[i] = ins[i] ? 1 : x->dims[j++];
    return reshaped(k, x, orank, od, out);
}

tfvm_status dev_cpu_flatten(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE];
    const int32_t a = (int32_t)k->attr;
    const int64_t axis = a < 0 ? (int64_t)a + x->rank : a;
    if (axis < 0 || axis > x->rank)
        return dev_kfail(k, TFVM_ERR_SHAPE, "axis %d out of range for shape %s (0..%d)", (int)a,
                         dev_kshape(x, s1), x->rank);
    /* With a 0 on one side the other side's product may not fit an int64. */
    int64_t od[2];
    if (!dev_kcount((int)axis, x->dims, &od[0]) ||
        !dev_kcount(x->rank - (int)axis, x->dims + axis, &od[1]))
        return dev_kfail(k, TFVM_ERR_SHAPE, "result for shape %s at axis %d is too large",
                         dev_kshape(x, s1), (int)a);
    return reshaped(k, x, 2, od, out);
}

/* ---- TRANSPOSE ---------------------------------------------------------------------- */
tfvm_status dev_cpu_transpose(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    int64_t given[TFVM_MAX_RANK], perm[TFVM_MAX_RANK];
    int n;
    tfvm_status st = dev_kvec(k, &in[1], "perm", given, TFVM_MAX_RANK, &n);
    if (st)
        return st;
    bool seen[TFVM_MAX_RANK] = {false};
    bool ok = n == x->rank;
    for (int i = 0; ok && i < n; i++) {
        perm[i] = given[i] < 0 ? given[i] + n : given[i];
        ok = perm[i] >= 0 && perm[i] < n && !seen[perm[i]];
        if (ok)
            seen[perm[i]] = true;
    }
    if (!ok)
        return dev_kfail(k, TFVM_ERR_SHAPE, "perm %s is not a permutation of the axes of %s",
                         dev_kdims(n, given, s1), dev_kshape(x, s2));
    int64_t xs[TFVM_MAX_RANK], od[TFVM_MAX_RANK], ss[TFVM_MAX_RANK], ds[TFVM_MAX_RANK];
    dev_kstrides(x->rank, x->dims, xs);
    int64_t last = -1; /* the axes larger than 1 in their order: the elements' order is x's */
    bool same_order = true;
    for (int i = 0; i < n; i++) {
        od[i] = x->dims[perm[i]];
        ss[i] = xs[perm[i]];
        if (od[i] != 1) {
            same_order &= perm[i] > last;
            last = perm[i];
        }
    }
    if (same_order) /* only axes of size 1 move ([1, T, H] to [T, 1, H]): a reshape */
        return reshaped(k, x, n, od, out);
    dev_kstrides(n, od, ds);
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, n, od, &r, &o)))
        return st;
    dev_kcopy(o, ds, x->data, ss, n, od, dev_kesize(x->dtype));
    *out = r;
    return TFVM_OK;
}

/* ---- CONCAT ------------------------------------------------------------------------- *
 * The result's bytes in pieces of CONCAT_PIECE, split over the VM's workers
 * when there are enough of them (a SqueezeNet's fire module joins two
 * 774 KB halves: one thread copied them while the other waited) */
#define CONCAT_PIECE ((size_t)16 << 10)
#define CONCAT_PAR_BYTES (INT64_C(256) << 10)

typedef struct concat_job {
    char *o;
    const char *a, *b;
    size_t ca, cb; /* bytes of a row of a, of b: a result row is both */
    size_t bytes;  /* of the result */
} concat_job;

/* the result's bytes [p0 * CONCAT_PIECE, p1 * CONCAT_PIECE), within its end */
static void concat_pieces(void *arg, size_t p0, size_t p1)
{
    const concat_job *j = arg;
    const size_t row = j->ca + j->cb, end = p1 * CONCAT_PIECE < j->bytes ? p1 * CONCAT_PIECE : j->bytes;
    size_t at = p0 * CONCAT_PIECE, i = at / row, in = at % row; /* `in` bytes into result row i */
    while (at < end) {
        const bool in_a = in < j->ca;
        size_t n = (in_a ? j->ca : row) - in;
        if (n > end - at)
            n = end - at;
        memcpy(j->o + at, in_a ? j->a + i * j->ca + in : j->b + i * j->cb + (in - j->ca), n);
        at += n;
        if ((in += n) == row)
            i++, in = 0;
    }
}

tfvm_status dev_cpu_concat(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *a = &in[0], *b = &in[1];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    if (a->dtype != b->dtype)
        return dev_kfail(k, TFVM_ERR_TYPE, "dtype mismatch: %s and %s", dev_kdesc(a, s1),
                         dev_kdesc(b, s2));
    int axis;
    tfvm_status st = dev_kaxis(k, a, &axis);
    if (st)
        return st;
    if ((st = dev_krule(k, in, 2, 0, NULL))) /* ranks, and dims outside the axis */
        return st;
    int64_t od[TFVM_MAX_RANK], outer = 1, inner = 1;
    for (int i = 0; i < a->rank; i++) {
        od[i] = i == axis ? a->dims[i] + b->dims[i] : a->dims[i];
        if (i < axis)
            outer *= a->dims[i];
        else if (i > axis)
            inner *= a->dims[i];
    }
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, a->dtype, a->rank, od, &r, &o)))
        return st;
    const size_t esz = dev_kesize(a->dtype);
    const size_t ca = (size_t)(a->dims[axis] * inner) * esz, cb = (size_t)(b->dims[axis] * inner) * esz;
    concat_job j = {o, a->data, b->data, ca, cb, (size_t)outer * (ca + cb)};
    const size_t pieces = (j.bytes + CONCAT_PIECE - 1) / CONCAT_PIECE;
    dev_par_for(pieces, dev_kgrain((int64_t)pieces, CONCAT_PIECE, CONCAT_PAR_BYTES, 1), concat_pieces, &j);
    *out = r;
    return TFVM_OK;
}

/* ---- SLICE -------------------------------------------------------------------------- */
/* NumPy's rule for one bound: negative counts from the end, then clamped. */
static int64_t slice_bound(int64_t v, int64_t dim)
{
    if (v < 0)
        v += dim;
    return v < 0 ? 0 : v > dim ? dim : v;
}

tfvm_status dev_cpu_slice(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    int64_t st_[TFVM_MAX_RANK], en[TFVM_MAX_RANK];
    int ns, ne;
    tfvm_status st = dev_kvec(k, &in[1], "starts", st_, TFVM_MAX_RANK, &ns);
    if (st || (st = dev_kvec(k, &in[2], "ends", en, TFVM_MAX_RANK, &ne)))
        return st;
    if (ns != ne)
        return dev_kfail(k, TFVM_ERR_SHAPE, "starts %s and ends %s differ in length",
                         dev_kdims(ns, st_, s1), dev_kdims(ne, en, s2));
    if (ns > x->rank)
        return dev_kfail(k, TFVM_ERR_SHAPE, "starts %s has more entries than %s has axes",
                         dev_kdims(ns, st_, s1), dev_kshape(x, s2));
    int64_t od[TFVM_MAX_RANK], xs[TFVM_MAX_RANK], ds[TFVM_MAX_RANK], off = 0;
    dev_kstrides(x->rank, x->dims, xs);
    for (int i = 0; i < x->rank; i++) {
        int64_t lo = 0, hi = x->dims[i];
        if (i < ns) {
            lo = slice_bound(st_[i], x->dims[i]);
            hi = slice_bound(en[i], x->dims[i]);
        }
        od[i] = hi > lo ? hi - lo : 0;
        off += lo * xs[i];
    }
    dev_kstrides(x->rank, od, ds);
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, x->rank, od, &r, &o)))
        return st;
    const size_t esz = dev_kesize(x->dtype);
    int64_t count;
    if (dev_kcount(x->rank, od, &count) && count) /* else the offset may point past x */
        dev_kcopy(o, ds, (const char *)x->data + (size_t)off * esz, xs, x->rank, od, esz);
    *out = r;
    return TFVM_OK;
}

/* ---- GATHER -------------------------------------------------------------------------
 * np.take(x, idx, axis): result dims = x.dims[:axis] + idx.dims + x.dims[axis+1:].
 * An index i in [-d, d) picks element i (negative: d + i); others are errors. */
tfvm_status dev_cpu_gather(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0], *ix = &in[1];
    char s1[DEV_KSHAPE];
    int axis;
    tfvm_status st = dev_kaxis(k, x, &axis);
    if (st)
        return st;
    if (ix->dtype != TFVM_I32 && ix->dtype != TFVM_I64)
        return dev_kfail(k, TFVM_ERR_TYPE, "indices must be i32 or i64, got %s", dev_kdesc(ix, s1));
    if (x->rank - 1 + ix->rank > TFVM_MAX_RANK)
        return dev_kfail(k, TFVM_ERR_SHAPE, "result would have rank %d (x %s), more than %d",
                         x->rank - 1 + ix->rank, dev_kshape(x, s1), TFVM_MAX_RANK);
    const int64_t d = x->dims[axis];
    for (int64_t t = 0; t < ix->count; t++) {
        const int64_t v = ix->dtype == TFVM_I32 ? ((const int32_t *)ix->data)[t]
                                                : ((const int64_t *)ix->data)[t];
        if (v < -d || v >= d)
            return dev_kfail(k, TFVM_ERR_SHAPE, "index %lld out of range for axis %d of %s",
                             (long long)v, axis, dev_kshape(x, s1));
    }
    int64_t od[TFVM_MAX_RANK], outer = 1, inner = 1;
    int orank = 0;
    for (int i = 0; i < axis; i++) {
        od[orank++] = x->dims[i];
        outer *= x->dims[i];
    }
    for (int i = 0; i < ix->rank; i++)
        od[orank++] = ix->dims[i];
    for (int i = axis + 1; i < x->rank; i++) {
        od[orank++] = x->dims[i];
        inner *= x->dims[i];
    }
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, orank, od, &r, &o)))
        return st;
    const size_t chunk = (size_t)inner * dev_kesize(x->dtype);
    char *op = o;
    const char *xp = x->data;
    for (int64_t a = 0; a < outer && chunk; a++)
        for (int64_t t = 0; t < ix->count; t++) {
            int64_t v = ix->dtype == TFVM_I32 ? ((const int32_t *)ix->data)[t]
                                              : ((const int64_t *)ix->data)[t];
            if (v < 0)
                v += d;
            memcpy(op, xp + (size_t)(a * d + v) * chunk, chunk);
            op += chunk;
        }
    *out = r;
    return TFVM_OK;
}

/* ---- PAD ---------------------------------------------------------------------------- */
#define PAD_MAX (INT64_C(1) << 40)

tfvm_status dev_cpu_pad(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    int64_t p[2 * TFVM_MAX_RANK];
    int n;
    tfvm_status st = dev_kvec(k, &in[1], "pads", p, 2 * TFVM_MAX_RANK, &n);
    if (st)
        return st;
    if (n != 2 * x->rank)
        return dev_kfail(k, TFVM_ERR_SHAPE, "pads %s must have 2 entries per axis of %s",
                         dev_kdims(n, p, s1), dev_kshape(x, s2));
    int64_t od[TFVM_MAX_RANK], count;
    for (int i = 0; i < x->rank; i++) {
        if (p[i] < 0 || p[i] > PAD_MAX || p[x->rank + i] < 0 || p[x->rank + i] > PAD_MAX)
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "bad pads %s: each must be in 0..2^40",
                             dev_kdims(n, p, s1));
        od[i] = x->dims[i] + p[i] + p[x->rank + i];
    }
    if (!dev_kcount(x->rank, od, &count))
        return dev_kfail(k, TFVM_ERR_SHAPE, "result %s is too large", dev_kdims(x->rank, od, s1));
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, x->rank, od, &r, &o)))
        return st;
    const size_t esz = dev_kesize(x->dtype);
    int64_t xs[TFVM_MAX_RANK], ds[TFVM_MAX_RANK], off = 0;
    dev_kstrides(x->rank, x->dims, xs);
    dev_kstrides(x->rank, od, ds);
    for (int i = 0; i < x->rank; i++)
        off += p[i] * ds[i];
    if (count) { /* else the offset may point past the result */
        memset(o, 0, (size_t)count * esz);
        dev_kcopy((char *)o + (size_t)off * esz, ds, x->data, xs, x->rank, x->dims, esz);
    }
    *out = r;
    return TFVM_OK;
}

/* ---- SHAPE -------------------------------------------------------------------------- */
tfvm_status dev_cpu_shape(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const int64_t n = in[0].rank;
    dev_value r;
    void *o;
    tfvm_status st = dev_kresult(k, TFVM_I64, 1, &n, &r, &o);
    if (st)
        return st;
    if (n)
        memcpy(o, in[0].dims, (size_t)n * sizeof(int64_t));
    *out = r;
    return TFVM_OK;
}

/* ---- WORKERS: the calling thread's runner's width (the VM's workers; 1 outside a run) */
tfvm_status dev_cpu_workers(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    (void)k;
    (void)in;
    *out = (dev_value){.dtype = TFVM_I64, .u.i64 = (int64_t)dev_par_width()};
    return TFVM_OK;
}

/* ---- FILL --------------------------------------------------------------------------- */
tfvm_status dev_cpu_fill(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *v = &in[1];
    char s1[DEV_KSHAPE];
    int64_t d[TFVM_MAX_RANK], count;
    int n;
    tfvm_status st = dev_kvec(k, &in[0], "shape", d, TFVM_MAX_RANK, &n);
    if (st)
        return st;
    if (v->rank != 0)
        return dev_kfail(k, TFVM_ERR_SHAPE, "value must be a scalar, got %s", dev_kdesc(v, s1));
    for (int i = 0; i < n; i++)
        if (d[i] < 0)
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "bad shape %s: dims must be >= 0",
                             dev_kdims(n, d, s1));
    if (!dev_kcount(n, d, &count))
        return dev_kfail(k, TFVM_ERR_SHAPE, "shape %s is too large", dev_kdims(n, d, s1));
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, v->dtype, n, d, &r, &o)))
        return st;
    switch (dev_kesize(v->dtype)) {
    case 1: memset(o, *(const uint8_t *)v->data, (size_t)count); break; /* bool, u8, i8 */
    case 4: {
        uint32_t x, *p = o;
        memcpy(&x, v->data, 4);
        for (int64_t i = 0; i < count; i++)
            p[i] = x;
        break;
    }
    default: {
        uint64_t x, *p = o;
        memcpy(&x, v->data, 8);
        for (int64_t i = 0; i < count; i++)
            p[i] = x;
        break;
    }
    }
    *out = r;
    return TFVM_OK;
}

/* ---- RANGE -------------------------------------------------------------------------
 * NumPy arange: n = ceil((limit - start) / delta) elements (none when that is
 * <= 0). Integers: start + i*delta, exact. Floats as NumPy fills them: the
 * first two elements are start and start + delta, then start + i*(a1 - a0). */
#define RANGE_MAX (INT64_C(1) << 40)

static double range_get(const dev_kview *v)
{
    switch (v->dtype) {
    case TFVM_I32: return (double)*(const int32_t *)v->data;
    case TFVM_I64: return (double)*(const int64_t *)v->data;
    case TFVM_F32: return (double)*(const float *)v->data;
    default: return *(const double *)v->data;
    }
}

static int64_t range_geti(const dev_kview *v)
{
    return v->dtype == TFVM_I32 ? *(const int32_t *)v->data : *(const int64_t *)v->data;
}

tfvm_status dev_cpu_range(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE], s3[DEV_KSHAPE];
    const uint8_t dt = in[0].dtype;
    if (in[0].rank || in[1].rank || in[2].rank)
        return dev_kfail(k, TFVM_ERR_SHAPE, "start, limit and delta must be scalars, got %s, %s and %s",
                         dev_kshape(&in[0], s1), dev_kshape(&in[1], s2), dev_kshape(&in[2], s3));
    if (in[1].dtype != dt || in[2].dtype != dt)
        return dev_kfail(k, TFVM_ERR_TYPE, "dtype mismatch: %s, %s and %s",
                         tfvm_dtype_name((tfvm_dtype)dt), tfvm_dtype_name((tfvm_dtype)in[1].dtype),
                         tfvm_dtype_name((tfvm_dtype)in[2].dtype));
    if (dt == TFVM_BOOL)
        return dev_kfail(k, TFVM_ERR_TYPE, "not defined on bool");
    int64_t n = 0;
    if (!dev_kfloat(dt)) {
        const int64_t a = range_geti(&in[0]), l = range_geti(&in[1]), d = range_geti(&in[2]);
        if (d == 0)
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "delta is zero");
        /* Unsigned differences are exact whatever the signs. */
        uint64_t span = 0, step = d > 0 ? (uint64_t)d : 0 - (uint64_t)d;
        if (d > 0 && l > a)
            span = (uint64_t)l - (uint64_t)a;
        else if (d < 0 && a > l)
            span = (uint64_t)a - (uint64_t)l;
        const uint64_t un = span ? (span - 1) / step + 1 : 0;
        if (un > (uint64_t)RANGE_MAX)
            return dev_kfail(k, TFVM_ERR_SHAPE, "%llu elements are too many", (unsigned long long)un);
        n = (int64_t)un;
        dev_value r;
        void *o;
        tfvm_status st = dev_kresult(k, dt, 1, &n, &r, &o);
        if (st)
            return st;
        for (int64_t i = 0; i < n; i++) {
            const int64_t v = (int64_t)((uint64_t)a + (uint64_t)i * (uint64_t)d);
            if (dt == TFVM_I32)
                ((int32_t *)o)[i] = (int32_t)v;
            else
                ((int64_t *)o)[i] = v;
        }
        *out = r;
        return TFVM_OK;
    }
    const double a = range_get(&in[0]), l = range_get(&in[1]), d = range_get(&in[2]);
    if (d == 0)
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "delta is zero");
    /* f32 operands: the count is computed in f32, as NumPy does for them. */
    const double fn = dt == TFVM_F32 ? ceil((double)(((float)l - (float)a) / (float)d)) : ceil((l - a) / d);
    if (isnan(fn) || fn > (double)RANGE_MAX)
        return dev_kfail(k, TFVM_ERR_SHAPE, "%g to %g by %g has too many elements", a, l, d);
    n = fn > 0 ? (int64_t)fn : 0;
    dev_value r;
    void *o;
    tfvm_status st = dev_kresult(k, dt, 1, &n, &r, &o);
    if (st)
        return st;
    if (dt == TFVM_F32) {
        float *p = o;
        const float a0 = (float)a, step = (float)(a0 + (float)d) - a0;
        for (int64_t i = 0; i < n; i++)
            p[i] = i == 1 ? (float)(a0 + (float)d) : a0 + (float)i * step;
    } else {
        double *p = o;
        const double step = (a + d) - a;
        for (int64_t i = 0; i < n; i++)
            p[i] = i == 1 ? a + d : a + (double)i * step;
    }
    *out = r;
    return TFVM_OK;
}
