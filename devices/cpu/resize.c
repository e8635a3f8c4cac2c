/* devices/cpu/resize.c — RESIZE: ONNX Resize-13+ in modes nearest (every
 * dtype) and linear (floats; n-linear over the axes whose scale is not 1),
 * with ONNX's coordinate transformations and nearest rounding modes. */
#include "devices/cpu/kern.h"

#include <math.h>
#include <string.h>

#define RESIZE_MAX (INT64_C(1) << 40)
#define RESIZE_COORD (ISA_OPT_ASYMMETRIC | ISA_OPT_ALIGN_CORNERS | ISA_OPT_PYTORCH_HALF_PIXEL | ISA_OPT_TF_HALF_PIXEL_NN)
#define RESIZE_ROUND (ISA_OPT_NEAREST_FLOOR | ISA_OPT_NEAREST_CEIL | ISA_OPT_PREFER_CEIL)

/* The input coordinate of output coordinate xo on an axis of in elements
 * at scale s (ONNX's coordinate_transformation_mode). The resized length is
 * in * s before rounding down, as in ONNX's reference implementation (and
 * its conformance data): align_corners downscaling 4 by 0.6 maps output 1
 * to 1 * 3 / (2.4 - 1), not 1 * 3 / (2 - 1). */
static double resize_orig(uint32_t opt, double xo, int64_t in, double s)
{
    const double len = (double)in * s;
    switch (opt & RESIZE_COORD) {
    case ISA_OPT_ASYMMETRIC: return xo / s;
    case ISA_OPT_ALIGN_CORNERS: return len == 1 ? 0 : xo * (double)(in - 1) / (len - 1);
    case ISA_OPT_PYTORCH_HALF_PIXEL: return len > 1 ? (xo + 0.5) / s - 0.5 : -0.5;
    case ISA_OPT_TF_HALF_PIXEL_NN: return (xo + 0.5) / s;
    default: return (xo + 0.5) / s - 0.5; /* half_pixel */
    }
}

/* ONNX's nearest_mode, then clamped into the axis. */
static int64_t resize_nearest(uint32_t opt, double x, int64_t in)
{
    double f = floor(x), r;
    switch (opt & RESIZE_ROUND) {
    case ISA_OPT_NEAREST_FLOOR: r = f; break;
    case ISA_OPT_NEAREST_CEIL: r = ceil(x); break;
    case ISA_OPT_PREFER_CEIL: r = x - f == 0.5 ? f + 1 : round(x); break;
    default: r = x - f == 0.5 ? f : round(x); break; /* round_prefer_floor */
    }
    return r < 0 ? 0 : r > (double)(in - 1) ? in - 1 : (int64_t)r;
}

typedef struct resize_axis {
    int64_t *lo, *hi; /* per output coordinate: the input neighbours */
    double *w;        /* the weight of hi (linear) */
    bool interp;      /* linear along this axis */
} resize_axis;

#define RESIZE_LINEAR(T)                                                                   \
    do {                                                                                   \
        const T *xp = x->data;                                                             \
        T *op = o;                                                                         \
        int64_t idx[TFVM_MAX_RANK] = {0};                                                  \
        for (int64_t t = 0; t < count; t++) {                                              \
            int64_t base = 0;                                                              \
            for (int i = 0; i < R; i++)                                                    \
                if (!ax[i].interp)                                                         \
                    base += ax[i].lo[idx[i]] * xs[i];                                      \
            double acc = 0;                                                                \
            for (int c = 0; c < (1 << m); c++) {                                           \
                double wt = 1;                                                             \
                int64_t off = base;                                                        \
                for (int j = 0; j < m; j++) {                                              \
                    const resize_axis *a = &ax[ia[j]];                                     \
                    const int64_t q = idx[ia[j]];                                          \
                    if (c >> j & 1) {                                                      \
                        wt *= a->w[q];                                                     \
                        off += a->hi[q] * xs[ia[j]];                                       \
                    } else {                                                               \
                        wt *= 1 - a->w[q];                                                 \
                        off += a->lo[q] * xs[ia[j]];                                       \
                    }                                                                      \
                }                                                                          \
                if (wt != 0)                                                               \
                    acc += wt * (double)xp[off];                                           \
            }                                                                              \
            op[t] = (T)acc;                                                                \
            for (int j = R - 1; j >= 0 && ++idx[j] == od[j]; j--)                          \
                idx[j] = 0;                                                                \
        }                                                                                  \
    } while (0)

tfvm_status dev_cpu_resize(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0], *sc = &in[1];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    const uint32_t opt = k->attr;
    const uint32_t coord = opt & RESIZE_COORD, rnd = opt & RESIZE_ROUND;
    if ((opt & ~(ISA_OPT_LINEAR | RESIZE_COORD | RESIZE_ROUND)) || (coord & (coord - 1)) || (rnd & (rnd - 1)))
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "bad options %u: one coordinate mode and one rounding mode at most",
                         (unsigned)opt);
    const bool linear = opt & ISA_OPT_LINEAR;
    if (linear && !dev_kfloat(x->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "linear mode is not defined on %s (floats only)",
                         tfvm_dtype_name((tfvm_dtype)x->dtype));
    if (sc->dtype != TFVM_F32 || sc->rank != 1)
        return dev_kfail(k, TFVM_ERR_TYPE, "scales must be an f32 vector, got %s", dev_kdesc(sc, s1));
    int64_t sizes[TFVM_MAX_RANK];
    int nz;
    tfvm_status st = dev_kvec(k, &in[2], "sizes", sizes, TFVM_MAX_RANK, &nz);
    if (st)
        return st;
    const int R = x->rank;
    const int64_t ns = sc->count;
    if ((R > 0 && (ns == 0) == (nz == 0)) || (ns && ns != R) || (nz && nz != R))
        return dev_kfail(k, TFVM_ERR_SHAPE,
                         "exactly one of scales (%lld entries) and sizes (%d entries) must be given, one entry per axis of %s",
                         (long long)ns, nz, dev_kshape(x, s1));
    int64_t od[TFVM_MAX_RANK], count, total = 0;
    double scale[TFVM_MAX_RANK];
    for (int i = 0; i < R; i++) {
        const int64_t d = x->dims[i];
        if (ns) {
            const double s = ((const float *)sc->data)[i];
            if (!(s > 0) || isinf(s))
                return dev_kfail(k, TFVM_ERR_ARGUMENT, "scale %g for axis %d must be finite and > 0", s, i);
            const double n = floor((double)d * s);
            if (n > (double)RESIZE_MAX)
                return dev_kfail(k, TFVM_ERR_SHAPE, "axis %d of %s scaled by %g is too large", i, dev_kshape(x, s1), s);
            od[i] = (int64_t)n;
            scale[i] = s;
        } else {
            if (sizes[i] < 0 || sizes[i] > RESIZE_MAX)
                return dev_kfail(k, TFVM_ERR_ARGUMENT, "bad sizes %s: each must be in 0..2^40",
                                 dev_kdims(nz, sizes, s1));
            if (d == 0 && sizes[i] > 0)
                return dev_kfail(k, TFVM_ERR_SHAPE, "cannot resize empty axis %d of %s to %s", i, dev_kshape(x, s1),
                                 dev_kdims(nz, sizes, s2));
            od[i] = sizes[i];
            scale[i] = d ? (double)sizes[i] / (double)d : 1;
        }
        total += od[i];
    }
    if (!dev_kcount(R, od, &count))
        return dev_kfail(k, TFVM_ERR_SHAPE, "result %s is too large", dev_kdims(R, od, s1));
    /* One scratch block: lo, hi and w for every output coordinate of every axis. */
    const size_t per = 2 * sizeof(int64_t) + sizeof(double);
    char *scratch = NULL;
    if (count && !(scratch = dev_ktemp(k, (size_t)total, per)))
        return TFVM_ERR_NOMEM;
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, R, od, &r, &o))) {
        if (scratch)
            dev_ktemp_free(k, scratch, (size_t)total, per);
        return st;
    }
    const size_t esz = dev_kesize(x->dtype);
    if (R == 0) {
        memcpy(o, x->data, esz);
    } else if (count) {
        resize_axis ax[TFVM_MAX_RANK];
        int ia[TFVM_MAX_RANK], m = 0;
        int64_t xs[TFVM_MAX_RANK];
        dev_kstrides(R, x->dims, xs);
        double *wp = (double *)(void *)scratch;
        int64_t *ip = (int64_t *)(void *)(scratch + (size_t)total * sizeof(double));
        for (int i = 0; i < R; i++) {
            resize_axis *a = &ax[i];
            a->w = wp;
            a->lo = ip;
            a->hi = ip + od[i];
            wp += od[i];
            ip += 2 * od[i];
            const int64_t d = x->dims[i];
            a->interp = linear && !(od[i] == d && scale[i] == 1.0);
            if (a->interp)
                ia[m++] = i;
            for (int64_t q = 0; q < od[i]; q++) {
                if (!linear || !a->interp) {
                    a->lo[q] = a->hi[q] = linear ? q : resize_nearest(opt, resize_orig(opt, (double)q, d, scale[i]), d);
                    a->w[q] = 0;
                    continue;
                }
                double c = resize_orig(opt, (double)q, d, scale[i]);
                c = c < 0 ? 0 : c > (double)(d - 1) ? (double)(d - 1) : c;
                const double f = floor(c);
                a->lo[q] = (int64_t)f;
                a->hi[q] = a->lo[q] + 1 < d ? a->lo[q] + 1 : d - 1;
                a->w[q] = c - f;
            }
        }
        if (linear) {
            if (x->dtype == TFVM_F32)
                RESIZE_LINEAR(float);
            else
                RESIZE_LINEAR(double);
        } else {
            /* nearest: one source element per output element */
            int64_t idx[TFVM_MAX_RANK] = {0};
            const char *xp = x->data;
            char *op = o;
            const int64_t *last = ax[R - 1].lo;
            for (;;) {
                int64_t off = 0;
                for (int i = 0; i < R - 1; i++)
                    off += ax[i].lo[idx[i]] * xs[i];
                for (int64_t q = 0; q < od[R - 1]; q++, op += esz)
                    memcpy(op, xp + (size_t)(off + last[q]) * esz, esz);
                int j = R - 2;
                for (; j >= 0 && ++idx[j] == od[j]; j--)
                    idx[j] = 0;
                if (j < 0)
                    break;
            }
        }
    }
    if (scratch)
        dev_ktemp_free(k, scratch, (size_t)total, per);
    *out = r;
    return TFVM_OK;
}
