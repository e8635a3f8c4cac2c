/* devices/cpu/bits.c — tensor kernels whose result shape or dtype comes from
 * the data: BITCAST (bytes reinterpreted), NONZERO, UNIQUE / UNIQUE_INDEX
 * (distinct slices along an axis), and DET (LU with partial pivoting). */
#include "devices/cpu/kern.h"

#include <math.h>
#include <string.h>

/* ---- BITCAST -------------------------------------------------------------------------- */
tfvm_status dev_cpu_bitcast(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    const uint32_t to = k->attr;
    if (!isa_dtype_valid(to))
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "invalid target dtype %u", to);
    size_t es = dev_kesize(x->dtype);
    if (dev_kesize((uint8_t)to) != es)
        return dev_kfail(k, TFVM_ERR_TYPE, "%s and %s differ in size", tfvm_dtype_name((tfvm_dtype)x->dtype),
                         tfvm_dtype_name((tfvm_dtype)to));
    if (to == TFVM_BOOL && x->dtype != TFVM_BOOL) {
        const uint8_t *b = x->data;
        for (int64_t i = 0; i < x->count; i++)
            if (b[i] > 1)
                return dev_kfail(k, TFVM_ERR_ARGUMENT, "byte %u at element %lld is not a bool", b[i],
                                 (long long)i);
    }
    dev_value r;
    void *o;
    tfvm_status st = dev_kresult(k, (uint8_t)to, x->rank, x->dims, &r, &o);
    if (st)
        return st;
    if (x->count)
        memcpy(o, x->data, (size_t)x->count * es);
    *out = r;
    return TFVM_OK;
}

/* ---- NONZERO ------------------------------------------------------------------------ */

/* Whether element i is not zero (-0.0 is zero; NaN is not). */
static bool bits_nonzero(const dev_kview *x, int64_t i)
{
#define BITS_NZ(T) return ((const T *)x->data)[i] != 0
    DEV_KTYPED(x->dtype, BITS_NZ);
#undef BITS_NZ
}

tfvm_status dev_cpu_nonzero(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    int64_t n = 0;
    for (int64_t i = 0; i < x->count; i++)
        n += bits_nonzero(x, i);
    int64_t dims[2] = {x->rank, n};
    dev_value r;
    void *o;
    tfvm_status st = dev_kresult(k, TFVM_I64, 2, dims, &r, &o);
    if (st)
        return st;
    int64_t *p = o, j = 0, idx[TFVM_MAX_RANK] = {0};
    for (int64_t i = 0; i < x->count; i++) {
        if (bits_nonzero(x, i)) {
            for (int a = 0; a < x->rank; a++)
                p[a * n + j] = idx[a];
            j++;
        }
        for (int a = x->rank - 1; a >= 0; a--) {
            if (++idx[a] < x->dims[a])
                break;
            idx[a] = 0;
        }
    }
    *out = r;
    return TFVM_OK;
}

/* ---- UNIQUE / UNIQUE_INDEX -------------------------------------------------------------
 * Slice i of x along axis is the elements (o, i, j) for every outer o and
 * inner j. Slices are ordered lexicographically in that element order; a
 * stable merge sort by that order (ties by index) puts equal slices next to
 * each other, the first of each run being its first occurrence. */
typedef struct bits_uq {
    const dev_kview *x;
    int64_t n, outer, inner;
} bits_uq;

static int bits_cmp_elem(uint8_t dt, const void *p, int64_t a, int64_t b)
{
#define BITS_CMP(T)                                         \
    do {                                                    \
        const T u = ((const T *)p)[a], v = ((const T *)p)[b]; \
        return u < v ? -1 : u > v ? 1 : 0;                  \
    } while (0)
    DEV_KTYPED(dt, BITS_CMP);
#undef BITS_CMP
}

static int bits_cmp_slice(const bits_uq *u, int64_t a, int64_t b)
{
    for (int64_t o = 0; o < u->outer; o++) {
        int64_t base = o * u->n * u->inner;
        for (int64_t j = 0; j < u->inner; j++) {
            int c = bits_cmp_elem(u->x->dtype, u->x->data, base + a * u->inner + j, base + b * u->inner + j);
            if (c)
                return c;
        }
    }
    return 0;
}

static void bits_msort(const bits_uq *u, int64_t *v, int64_t *tmp, int64_t n)
{
    if (n < 2)
        return;
    int64_t h = n / 2;
    bits_msort(u, v, tmp, h);
    bits_msort(u, v + h, tmp, n - h);
    int64_t i = 0, j = h, t = 0;
    while (i < h && j < n)
        tmp[t++] = bits_cmp_slice(u, v[j], v[i]) < 0 ? v[j++] : v[i++];
    while (i < h)
        tmp[t++] = v[i++];
    while (j < n)
        tmp[t++] = v[j++];
    memcpy(v, tmp, (size_t)n * sizeof *v);
}

/* The groups of equal slices: first[g] (its first index), count[g], and
 * inv[i] (the group of slice i); groups in sorted order when `sorted`, else
 * by first occurrence. Returns the number of groups, -1 on NOMEM. All arrays
 * have room for n; `order` is scratch of 2n. */
static int64_t bits_groups(dev_kctx *k, const bits_uq *u, bool sorted, int64_t *order, int64_t *first,
                           int64_t *count, int64_t *inv)
{
    int64_t n = u->n;
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    bits_msort(u, order, order + n, n);
    int64_t g = -1;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || bits_cmp_slice(u, order[i - 1], order[i]) != 0) {
            g++;
            first[g] = order[i];
            count[g] = 0;
        }
        count[g]++;
        inv[order[i]] = g;
    }
    int64_t ng = g + 1;
    if (!sorted && ng > 1) {
        /* renumber the groups by first occurrence: rank[g] = position */
        int64_t *pos = order; /* scratch now free */
        int64_t next = 0;
        for (int64_t i = 0; i < ng; i++)
            pos[i] = -1;
        for (int64_t i = 0; i < n; i++)
            if (pos[inv[i]] < 0)
                pos[inv[i]] = next++;
        int64_t *f2 = dev_ktemp(k, (size_t)(2 * ng), sizeof *f2);
        if (!f2)
            return -1;
        for (int64_t i = 0; i < ng; i++) {
            f2[pos[i]] = first[i];
            f2[ng + pos[i]] = count[i];
        }
        for (int64_t i = 0; i < n; i++)
            inv[i] = pos[inv[i]];
        memcpy(first, f2, (size_t)ng * sizeof *first);
        memcpy(count, f2 + ng, (size_t)ng * sizeof *count);
        dev_ktemp_free(k, f2, (size_t)(2 * ng), sizeof *f2);
    }
    return ng;
}

static tfvm_status bits_unique(dev_kctx *k, const dev_kview *in, dev_value *out, bool index)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE];
    int64_t axis;
    tfvm_status st = dev_kscalar_i64(k, &in[1], "axis", false, &axis);
    if (st)
        return st;
    if (x->rank == 0 || axis < -x->rank || axis >= x->rank)
        return dev_kfail(k, TFVM_ERR_SHAPE, "axis %lld out of range for shape %s", (long long)axis,
                         dev_kshape(x, s1));
    int a = (int)(axis < 0 ? axis + x->rank : axis);
    uint32_t which = k->attr & (ISA_OPT_UQ_INVERSE | ISA_OPT_UQ_COUNTS);
    if (index && which == (ISA_OPT_UQ_INVERSE | ISA_OPT_UQ_COUNTS))
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "options inverse and counts together name two outputs");
    bits_uq u = {.x = x, .n = x->dims[a], .outer = 1, .inner = 1};
    for (int i = 0; i < a; i++)
        u.outer *= x->dims[i];
    for (int i = a + 1; i < x->rank; i++)
        u.inner *= x->dims[i];
    int64_t n = u.n, cap = 5 * (n ? n : 1);
    int64_t *mem = dev_ktemp(k, (size_t)cap, sizeof *mem);
    if (!mem)
        return TFVM_ERR_NOMEM;
    int64_t *order = mem, *first = mem + 2 * n, *count = mem + 3 * n, *inv = mem + 4 * n;
    int64_t ng = bits_groups(k, &u, (k->attr & ISA_OPT_SORTED) != 0, order, first, count, inv);
    if (ng < 0) {
        dev_ktemp_free(k, mem, (size_t)cap, sizeof *mem);
        return TFVM_ERR_NOMEM;
    }
    dev_value r;
    void *o;
    if (index) {
        int64_t len = which == ISA_OPT_UQ_INVERSE ? n : ng;
        st = dev_kresult(k, TFVM_I64, 1, &len, &r, &o);
        if (!st && len)
            memcpy(o, which == ISA_OPT_UQ_COUNTS ? count : which == ISA_OPT_UQ_INVERSE ? inv : first,
                   (size_t)len * sizeof(int64_t));
    } else {
        int64_t dims[TFVM_MAX_RANK];
        memcpy(dims, x->dims, sizeof dims);
        dims[a] = ng;
        st = dev_kresult(k, x->dtype, x->rank, dims, &r, &o);
        if (!st) {
            size_t es = dev_kesize(x->dtype), row = (size_t)u.inner * es;
            for (int64_t q = 0; q < u.outer; q++)
                for (int64_t g = 0; g < ng; g++)
                    memcpy((char *)o + (size_t)(q * ng + g) * row,
                           (const char *)x->data + (size_t)(q * n + first[g]) * row, row);
        }
    }
    dev_ktemp_free(k, mem, (size_t)cap, sizeof *mem);
    if (st)
        return st;
    *out = r;
    return TFVM_OK;
}

tfvm_status dev_cpu_unique(dev_kctx *k, const dev_kview *in, dev_value *out) { return bits_unique(k, in, out, false); }
tfvm_status dev_cpu_unique_index(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    return bits_unique(k, in, out, true);
}

/* ---- DET ---------------------------------------------------------------------------- */
tfvm_status dev_cpu_det(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE];
    if (!dev_kfloat(x->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "not defined on %s (floats only)", tfvm_dtype_name((tfvm_dtype)x->dtype));
    if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
        return dev_kfail(k, TFVM_ERR_SHAPE, "needs square matrices in the last two dims, got %s", dev_kshape(x, s1));
    int64_t m = x->dims[x->rank - 1], batch = 1;
    for (int i = 0; i < x->rank - 2; i++)
        batch *= x->dims[i];
    dev_value r;
    void *o;
    tfvm_status st = dev_kresult(k, x->dtype, x->rank - 2, x->dims, &r, &o);
    if (st)
        return st;
    const size_t cells = m > 0 ? (size_t)(m * m) : 1;
    double *a = dev_ktemp(k, cells, sizeof *a);
    if (!a) {
        dev_value_release(&r);
        return TFVM_ERR_NOMEM;
    }
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t i = 0; i < m * m; i++)
            a[i] = dev_kget_f64(x, b * m * m + i);
        double det = 1;
        for (int64_t c = 0; c < m && det != 0; c++) {
            int64_t p = c;
            for (int64_t i = c + 1; i < m; i++)
                if (fabs(a[i * m + c]) > fabs(a[p * m + c]))
                    p = i;
            if (a[p * m + c] == 0) {
                det = 0;
                break;
            }
            if (p != c) {
                for (int64_t j = 0; j < m; j++) {
                    double t = a[c * m + j];
                    a[c * m + j] = a[p * m + j];
                    a[p * m + j] = t;
                }
                det = -det;
            }
            det *= a[c * m + c];
            for (int64_t i = c + 1; i < m; i++) {
                double f = a[i * m + c] / a[c * m + c];
                for (int64_t j = c + 1; j < m; j++)
                    a[i * m + j] -= f * a[c * m + j];
            }
        }
        if (x->dtype == TFVM_F32)
            ((float *)o)[b] = (float)det;
        else
            ((double *)o)[b] = det;
    }
    dev_ktemp_free(k, a, cells, sizeof *a);
    *out = r;
    return TFVM_OK;
}
