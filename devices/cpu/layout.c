/* devices/cpu/layout.c — data movement with ONNX's shape rules: EXPAND,
 * TILE, STRIDED_SLICE (ONNX Slice with steps), TRILU and PADV (constant,
 * reflect, edge, wrap; negative pads crop). Byte-size generic: every dtype. */
#include "devices/cpu/vec.h"
#include "devices/cpu/kern.h"
#include "isa/shape.h"

#include <string.h>

/* Pads and tile counts are bounded so that no size arithmetic overflows. */
#define LAYOUT_MAX (INT64_C(1) << 40)

/* ---- EXPAND ---------------------------------------------------------------------------
 * NumPy broadcasting of x's dims with `shape`, in both directions. */
tfvm_status dev_cpu_expand(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE];
    int64_t sh[TFVM_MAX_RANK];
    int n;
    tfvm_status st = dev_kvec(k, &in[1], "shape", sh, TFVM_MAX_RANK, &n);
    if (st)
        return st;
    for (int i = 0; i < n; i++)
        if (sh[i] < 0)
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "bad shape %s: dims must be >= 0", dev_kdims(n, sh, s1));
    isa_shape bc; /* x broadcast with the target both ways, by the rule */
    if ((st = dev_krule(k, in, 2, 1u << 1, &bc)))
        return st;
    const int R = bc.rank;
    int64_t ss[TFVM_MAX_RANK], xs[TFVM_MAX_RANK], ds[TFVM_MAX_RANK], count;
    const int64_t *od = bc.dims;
    dev_kstrides(x->rank, x->dims, xs);
    for (int i = 0; i < R; i++) {
        const int xi = i - (R - x->rank);
        ss[i] = xi < 0 || x->dims[xi] == 1 ? 0 : xs[xi];
    }
    if (!dev_kcount(R, od, &count))
        return dev_kfail(k, TFVM_ERR_SHAPE, "result %s is too large", dev_kdims(R, od, s1));
    dev_kstrides(R, od, ds);
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, R, od, &r, &o)))
        return st;
    if (count)
        dev_kcopy(o, ds, x->data, ss, R, od, dev_kesize(x->dtype));
    *out = r;
    return TFVM_OK;
}

/* ---- TILE -------------------------------------------------------------------------------
 * Every row of the result (all dims but the last) is the row of x at the
 * indices modulo x's dims, repeated along the last dim. */
tfvm_status dev_cpu_tile(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    int64_t rep[TFVM_MAX_RANK], od[TFVM_MAX_RANK], count;
    int n;
    tfvm_status st = dev_kvec(k, &in[1], "repeats", rep, TFVM_MAX_RANK, &n);
    if (st)
        return st;
    if (n != x->rank)
        return dev_kfail(k, TFVM_ERR_SHAPE, "repeats %s must have one entry per axis of %s",
                         dev_kdims(n, rep, s1), dev_kshape(x, s2));
    for (int i = 0; i < n; i++) {
        if (rep[i] < 0 || rep[i] > LAYOUT_MAX)
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "bad repeats %s: each must be in 0..2^40",
                             dev_kdims(n, rep, s1));
        if (x->dims[i] && rep[i] > INT64_MAX / x->dims[i])
            return dev_kfail(k, TFVM_ERR_SHAPE, "result of tiling %s by %s is too large", dev_kshape(x, s1),
                             dev_kdims(n, rep, s2));
        od[i] = x->dims[i] * rep[i];
    }
    if (!dev_kcount(n, od, &count))
        return dev_kfail(k, TFVM_ERR_SHAPE, "result of tiling %s by %s is too large", dev_kshape(x, s1),
                         dev_kdims(n, rep, s2));
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, n, od, &r, &o)))
        return st;
    const size_t esz = dev_kesize(x->dtype);
    if (n == 0) {
        memcpy(o, x->data, esz);
    } else if (count) {
        int64_t xs[TFVM_MAX_RANK], idx[TFVM_MAX_RANK] = {0};
        dev_kstrides(n, x->dims, xs);
        const size_t row = (size_t)x->dims[n - 1] * esz;
        char *op = o;
        for (;;) {
            int64_t off = 0;
            for (int i = 0; i < n - 1; i++)
                off += (idx[i] % x->dims[i]) * xs[i];
            const char *src = (const char *)x->data + (size_t)off * esz;
            for (int64_t t = 0; t < rep[n - 1]; t++, op += row)
                memcpy(op, src, row);
            int j = n - 2;
            for (; j >= 0 && ++idx[j] == od[j]; j--)
                idx[j] = 0;
            if (j < 0)
                break;
        }
    }
    *out = r;
    return TFVM_OK;
}

/* ---- STRIDED_SLICE ------------------------------------------------------------------------
 * ONNX Slice-10+ as its reference implementation (NumPy slicing) computes
 * it: for each listed axis, start and end (negative: + dim) clamped to
 * [0, dim] (step > 0) or [-1, dim - 1] (step < 0), and ceil((end - start) /
 * step) elements. (ONNX's text clamps a start to [0, dim - 1] for negative
 * steps; NumPy, the reference and the conformance data give nothing for a
 * start below -dim.) */
tfvm_status dev_cpu_strided_slice(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    int64_t sv[TFVM_MAX_RANK], ev[TFVM_MAX_RANK], av[TFVM_MAX_RANK], pv[TFVM_MAX_RANK];
    int ns, ne, na, np;
    tfvm_status st;
    if ((st = dev_kvec(k, &in[1], "starts", sv, TFVM_MAX_RANK, &ns)) ||
        (st = dev_kvec(k, &in[2], "ends", ev, TFVM_MAX_RANK, &ne)) ||
        (st = dev_kvec(k, &in[3], "axes", av, TFVM_MAX_RANK, &na)) ||
        (st = dev_kvec(k, &in[4], "steps", pv, TFVM_MAX_RANK, &np)))
        return st;
    if (ns != ne)
        return dev_kfail(k, TFVM_ERR_SHAPE, "starts %s and ends %s differ in length", dev_kdims(ns, sv, s1),
                         dev_kdims(ne, ev, s2));
    if (na && na != ns)
        return dev_kfail(k, TFVM_ERR_SHAPE, "axes %s and starts %s differ in length", dev_kdims(na, av, s1),
                         dev_kdims(ns, sv, s2));
    if (np && np != ns)
        return dev_kfail(k, TFVM_ERR_SHAPE, "steps %s and starts %s differ in length", dev_kdims(np, pv, s1),
                         dev_kdims(ns, sv, s2));
    if (!na && ns > x->rank)
        return dev_kfail(k, TFVM_ERR_SHAPE, "starts %s has more entries than %s has axes", dev_kdims(ns, sv, s1),
                         dev_kshape(x, s2));
    int64_t lo[TFVM_MAX_RANK], step[TFVM_MAX_RANK], od[TFVM_MAX_RANK];
    bool seen[TFVM_MAX_RANK] = {false};
    for (int i = 0; i < x->rank; i++) {
        lo[i] = 0;
        step[i] = 1;
        od[i] = x->dims[i];
    }
    for (int i = 0; i < ns; i++) {
        int64_t a = na ? av[i] : i;
        if (a < -(int64_t)x->rank || a >= x->rank)
            return dev_kfail(k, TFVM_ERR_SHAPE, "axis %lld out of range for shape %s", (long long)a,
                             dev_kshape(x, s1));
        if (a < 0)
            a += x->rank;
        if (seen[a])
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "axis %lld repeated in axes %s", (long long)av[i],
                             dev_kdims(na, av, s1));
        seen[a] = true;
        const int64_t d = x->dims[a], p = np ? pv[i] : 1;
        if (p == 0)
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "step 0 for axis %lld in steps %s", (long long)a,
                             dev_kdims(np, pv, s1));
        int64_t b = sv[i], e = ev[i];
        if (b < 0)
            b = b < -d ? -1 : b + d; /* below -d: anything below the clamp */
        if (e < 0)
            e = e < -d ? -1 : e + d;
        int64_t n;
        if (p > 0) {
            b = b < 0 ? 0 : b > d ? d : b;
            e = e < 0 ? 0 : e > d ? d : e;
            /* (e - b) <= d <= 2^63 and p >= 1: no overflow */
            n = e > b ? (e - b - 1) / p + 1 : 0;
        } else {
            b = b < -1 ? -1 : b > d - 1 ? d - 1 : b;
            e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
            n = b > e ? (int64_t)(((uint64_t)(b - e) - 1) / (0 - (uint64_t)p)) + 1 : 0;
        }
        lo[a] = n ? b : 0;
        step[a] = p;
        od[a] = n;
    }
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, x->rank, od, &r, &o)))
        return st;
    int64_t count, xs[TFVM_MAX_RANK], ss[TFVM_MAX_RANK], ds[TFVM_MAX_RANK], off = 0;
    dev_kstrides(x->rank, x->dims, xs);
    dev_kstrides(x->rank, od, ds);
    for (int i = 0; i < x->rank; i++) {
        /* With two or more elements |step| < dim, so the stride fits. */
        ss[i] = od[i] > 1 ? xs[i] * step[i] : xs[i];
        off += lo[i] * xs[i];
    }
    const size_t esz = dev_kesize(x->dtype);
    if (dev_kcount(x->rank, od, &count) && count)
        dev_kcopy(o, ds, (const char *)x->data + (size_t)off * esz, ss, x->rank, od, esz);
    *out = r;
    return TFVM_OK;
}

/* ---- TRILU ------------------------------------------------------------------------------
 * ONNX Trilu on the last two dims: lower keeps j <= i + k, upper j >= i + k. */
tfvm_status dev_cpu_trilu(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE];
    int64_t kk;
    tfvm_status st = dev_kscalar_i64(k, &in[1], "k", false, &kk);
    if (st)
        return st;
    if (x->rank < 2)
        return dev_kfail(k, TFVM_ERR_SHAPE, "x must have rank >= 2, got %s", dev_kshape(x, s1));
    const int64_t M = x->dims[x->rank - 2], N = x->dims[x->rank - 1];
    /* Beyond +-(M + N) every k is the same: clamp so that i + k cannot overflow. */
    const int64_t lim = M + N;
    kk = kk > lim ? lim : kk < -lim ? -lim : kk;
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, x->rank, x->dims, &r, &o)))
        return st;
    const size_t esz = dev_kesize(x->dtype);
    if (x->count)
        memcpy(o, x->data, (size_t)x->count * esz);
    const bool upper = k->attr & ISA_OPT_UPPER;
    const int64_t mats = M && N ? x->count / (M * N) : 0;
    char *op = o;
    for (int64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < M; i++, op += (size_t)N * esz) {
            int64_t a, b; /* zero columns [a, b) */
            if (upper) {
                a = 0;
                b = i + kk;
            } else {
                a = i + kk + 1;
                b = N;
            }
            a = a < 0 ? 0 : a > N ? N : a;
            b = b < 0 ? 0 : b > N ? N : b;
            if (b > a)
                memset(op + (size_t)a * esz, 0, (size_t)(b - a) * esz);
        }
    *out = r;
    return TFVM_OK;
}

/* ---- PADV ---------------------------------------------------------------------------------
 * ONNX Pad-11+: pads = [begin per axis..., end per axis...], negative crops.
 * Each output coordinate maps to a source index along its axis, or to -1
 * (the constant v) outside x in constant mode; reflect mirrors without
 * repeating the edge (NumPy 'reflect', repeated for pads wider than the
 * axis), edge repeats it, wrap wraps around. */
static int64_t padv_src(int64_t j, int64_t d, uint32_t mode)
{
    if (j >= 0 && j < d)
        return j;
    if (mode & ISA_OPT_EDGE)
        return j < 0 ? 0 : d - 1;
    if (mode & ISA_OPT_WRAP)
        return ((j % d) + d) % d;
    if (mode & ISA_OPT_REFLECT) {
        if (d == 1)
            return 0;
        const int64_t period = 2 * (d - 1);
        int64_t m = (j < 0 ? -j : j) % period;
        return m < d ? m : period - m;
    }
    return -1;
}

tfvm_status dev_cpu_padv(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0], *v = &in[2];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    int64_t p[2 * TFVM_MAX_RANK];
    int n;
    tfvm_status st = dev_kvec(k, &in[1], "pads", p, 2 * TFVM_MAX_RANK, &n);
    if (st)
        return st;
    const uint32_t mode = k->attr & (ISA_OPT_REFLECT | ISA_OPT_EDGE | ISA_OPT_WRAP);
    if (mode & (mode - 1))
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "options %u name more than one mode", (unsigned)k->attr);
    if (!mode && (v->rank != 0 || v->dtype != x->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "value must be a scalar of x's dtype (%s), got %s",
                         tfvm_dtype_name((tfvm_dtype)x->dtype), dev_kdesc(v, s1));
    const int R = x->rank;
    if (n != 2 * R)
        return dev_kfail(k, TFVM_ERR_SHAPE, "pads %s must have 2 entries per axis of %s", dev_kdims(n, p, s1),
                         dev_kshape(x, s2));
    int64_t od[TFVM_MAX_RANK], count, total = 0;
    for (int i = 0; i < R; i++) {
        const int64_t b = p[i], e = p[R + i];
        if (b < -LAYOUT_MAX || b > LAYOUT_MAX || e < -LAYOUT_MAX || e > LAYOUT_MAX)
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "bad pads %s: each must be in -2^40..2^40",
                             dev_kdims(n, p, s1));
        od[i] = x->dims[i] + b + e;
        if (od[i] < 0)
            return dev_kfail(k, TFVM_ERR_SHAPE, "pads %s crop more than axis %d of %s holds",
                             dev_kdims(n, p, s1), i, dev_kshape(x, s2));
        if (mode && x->dims[i] == 0 && od[i] > 0)
            return dev_kfail(k, TFVM_ERR_SHAPE, "cannot pad empty axis %d of %s from its elements",
                             i, dev_kshape(x, s1));
        total += od[i];
    }
    if (!dev_kcount(R, od, &count))
        return dev_kfail(k, TFVM_ERR_SHAPE, "result %s is too large", dev_kdims(R, od, s1));
    int64_t *map = NULL;
    if (count && !(map = dev_ktemp(k, (size_t)total, sizeof *map)))
        return TFVM_ERR_NOMEM;
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, R, od, &r, &o))) {
        if (map)
            dev_ktemp_free(k, map, (size_t)total, sizeof *map);
        return st;
    }
    const size_t esz = dev_kesize(x->dtype);
    if (R == 0) {
        memcpy(o, x->data, esz);
    } else if (count) {
        /* map[base[i] + c]: source index of output coordinate c on axis i */
        int64_t base[TFVM_MAX_RANK], xs[TFVM_MAX_RANK], idx[TFVM_MAX_RANK] = {0};
        dev_kstrides(R, x->dims, xs);
        for (int i = 0; i < R; i++) {
            base[i] = i ? base[i - 1] + od[i - 1] : 0;
            for (int64_t c = 0; c < od[i]; c++)
                map[base[i] + c] = padv_src(c - p[i], x->dims[i], mode);
        }
        const char *xp = x->data;
        char *op = o;
        const int64_t *last = map + base[R - 1];
        for (;;) {
            int64_t off = 0;
            bool outside = false;
            for (int i = 0; i < R - 1; i++) {
                const int64_t s = map[base[i] + idx[i]];
                outside |= s < 0;
                off += s * xs[i];
            }
            for (int64_t c = 0; c < od[R - 1];) {
                const int64_t s = last[c];
                if (outside || s < 0) {
                    memcpy(op, v->data, esz);
                    op += esz;
                    c++;
                    continue;
                }
                int64_t run = 1; /* consecutive source elements: one copy */
                while (c + run < od[R - 1] && last[c + run] == s + run)
                    run++;
                memcpy(op, xp + (size_t)(off + s) * esz, (size_t)run * esz);
                op += (size_t)run * esz;
                c += run;
            }
            int j = R - 2;
            for (; j >= 0 && ++idx[j] == od[j]; j--)
                idx[j] = 0;
            if (j < 0)
                break;
        }
    }
    if (map)
        dev_ktemp_free(k, map, (size_t)total, sizeof *map);
    *out = r;
    return TFVM_OK;
}
