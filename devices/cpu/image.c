/* devices/cpu/image.c — GRID_SAMPLE: ONNX GridSample-20 (nearest, linear,
 * cubic; padding zeros, border, reflection; align_corners) over any number
 * of spatial axes, as ONNX's reference (after PyTorch's grid_sampler) does. */
#include "devices/cpu/kern.h"

#include <math.h>
#include <string.h>

#define GS_MAXS 6 /* spatial axes */

/* Reflects x into [lo, hi] by the nearer border until it lies inside. */
static double gs_reflect(double x, double lo, double hi)
{
    const double rng = hi - lo;
    if (!(rng > 0))
        return lo;
    if (x < lo || x > hi) {
        const double dx = x < lo ? lo - x : x - hi;
        const double n = floor(dx / rng), r = dx - n * rng;
        const bool even = fmod(n, 2) == 0;
        if (x < lo)
            return even ? lo + r : hi - r;
        return even ? hi - r : lo + r;
    }
    return x;
}

static void gs_cubic(double t, double *w)
{
    const double A = -0.75;
    const double t1 = t + 1, t2 = 1 - t, t3 = 2 - t;
    w[0] = ((A * t1 - 5 * A) * t1 + 8 * A) * t1 - 4 * A;
    w[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
    w[2] = ((A + 2) * t2 - (A + 3)) * t2 * t2 + 1;
    w[3] = ((A * t3 - 5 * A) * t3 + 8 * A) * t3 - 4 * A;
}

tfvm_status dev_cpu_grid_sample(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0], *g = &in[1];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    const uint32_t opt = k->attr;
    const uint32_t mode = opt & (ISA_OPT_GS_NEAREST | ISA_OPT_GS_CUBIC),
                   pad = opt & (ISA_OPT_GS_BORDER | ISA_OPT_GS_REFLECTION);
    if ((opt & ~(ISA_OPT_GS_NEAREST | ISA_OPT_GS_CUBIC | ISA_OPT_GS_BORDER | ISA_OPT_GS_REFLECTION |
                 ISA_OPT_GS_ALIGN_CORNERS)) ||
        (mode & (mode - 1)) || (pad & (pad - 1)))
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "bad options %u: one mode and one padding mode at most", (unsigned)opt);
    if (!dev_kfloat(x->dtype) || !dev_kfloat(g->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "x and grid must be f32 or f64, got %s and %s", dev_kdesc(x, s1),
                         dev_kdesc(g, s2));
    const int S = x->rank - 2;
    if (S < 1 || S > GS_MAXS || g->rank != x->rank || g->dims[0] != x->dims[0] || g->dims[g->rank - 1] != S)
        return dev_kfail(k, TFVM_ERR_SHAPE,
                         "x [N, C, D1..Dk] (k in 1..%d) needs grid [N, H1..Hk, k], got x %s and grid %s", GS_MAXS,
                         dev_kshape(x, s1), dev_kshape(g, s2));
    int64_t od[TFVM_MAX_RANK];
    od[0] = x->dims[0];
    od[1] = x->dims[1];
    int64_t G = 1;
    for (int i = 0; i < S; i++)
        G *= od[2 + i] = g->dims[1 + i];
    int64_t count;
    if (!dev_kcount(x->rank, od, &count))
        return dev_kfail(k, TFVM_ERR_SHAPE, "result %s is too large", dev_kdims(x->rank, od, s1));
    dev_value r;
    void *o;
    tfvm_status st = dev_kresult(k, x->dtype, x->rank, od, &r, &o);
    if (st)
        return st;
    const int64_t NB = x->dims[0], C = x->dims[1];
    int64_t plane = 1, xs[GS_MAXS];
    for (int i = S - 1; i >= 0; i--) {
        xs[i] = plane;
        plane *= x->dims[2 + i];
    }
    const bool align = opt & ISA_OPT_GS_ALIGN_CORNERS;
    const int nt = mode == ISA_OPT_GS_NEAREST ? 1 : mode == ISA_OPT_GS_CUBIC ? 4 : 2;
    for (int64_t n = 0; n < NB && count; n++)
        for (int64_t p = 0; p < G; p++) {
            /* per spatial axis: nt taps (element offset, or -1 outside: zero) and weights */
            int64_t toff[GS_MAXS][4];
            double tw[GS_MAXS][4];
            for (int i = 0; i < S; i++) {
                const int64_t d = x->dims[2 + i];
                const int64_t gi = (n * G + p) * S + (S - 1 - i); /* the grid lists x (the last axis) first */
                const double gv = g->dtype == TFVM_F32 ? ((const float *)g->data)[gi] : ((const double *)g->data)[gi];
                /* the reference keeps coordinates in f32 */
                float c = (float)(align ? (gv + 1) / 2 * (double)(d - 1) : ((gv + 1) * (double)d - 1) / 2);
                const double lo = align ? 0 : -0.5, hi = align ? (double)d - 1 : (double)d - 0.5;
                if (mode == ISA_OPT_GS_NEAREST)
                    c = nearbyintf(c);
                if (c < lo || c > hi) {
                    if (pad == ISA_OPT_GS_BORDER)
                        c = c < 0 ? 0 : c > (float)(d - 1) ? (float)(d - 1) : c;
                    else if (pad == ISA_OPT_GS_REFLECTION)
                        c = (float)gs_reflect(c, lo, hi);
                }
                int64_t first;
                if (mode == ISA_OPT_GS_NEAREST) {
                    first = (int64_t)c;
                    tw[i][0] = 1;
                } else {
                    const double f = floor(c);
                    first = (int64_t)f - (nt == 4);
                    if (nt == 2) {
                        tw[i][0] = 1 - (c - f);
                        tw[i][1] = c - f;
                    } else {
                        gs_cubic(c - f, tw[i]);
                    }
                }
                for (int j = 0; j < nt; j++) {
                    int64_t ix = first + j;
                    if (ix < 0 || ix >= d) {
                        if (pad == ISA_OPT_GS_BORDER)
                            ix = ix < 0 ? 0 : d - 1;
                        else if (pad == ISA_OPT_GS_REFLECTION)
                            ix = (int64_t)gs_reflect((double)ix, lo, hi);
                        else
                            ix = -1;
                        if (ix >= d)
                            ix = d - 1;
                    }
                    toff[i][j] = ix < 0 ? -1 : ix * xs[i];
                }
            }
            int combos = 1;
            for (int i = 0; i < S; i++)
                combos *= nt;
            for (int64_t c = 0; c < C; c++) {
                const int64_t base = (n * C + c) * plane;
                double acc = 0;
                for (int m = 0; m < combos; m++) {
                    double w = 1;
                    int64_t off = base;
                    int q = m;
                    for (int i = S - 1; i >= 0 && w != 0; i--, q /= nt) {
                        const int j = q % nt;
                        if (toff[i][j] < 0)
                            w = 0;
                        else {
                            w *= tw[i][j];
                            off += toff[i][j];
                        }
                    }
                    if (w != 0)
                        acc += w * (x->dtype == TFVM_F32 ? (double)((const float *)x->data)[off]
                                                          : ((const double *)x->data)[off]);
                }
                const int64_t oi = (n * C + c) * G + p;
                if (x->dtype == TFVM_F32)
                    ((float *)o)[oi] = (float)acc;
                else
                    ((double *)o)[oi] = acc;
            }
        }
    *out = r;
    return TFVM_OK;
}
