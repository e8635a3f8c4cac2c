/* devices/cpu/image.c — GRID_SAMPLE: ONNX GridSample-20 (nearest, linear,
 * cubic; padding zeros, border, reflection; align_corners) over any number
 * of spatial axes, as ONNX's reference (after PyTorch's grid_sampler) does. */
#include "devices/cpu/kern.h"

#include <math.h>
#include <stdlib.h>
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
            bool nan_pt = false; /* a NaN coordinate: a NaN result */
            for (int i = 0; i < S; i++) {
                const int64_t d = x->dims[2 + i];
                const int64_t gi = (n * G + p) * S + (S - 1 - i); /* the grid lists x (the last axis) first */
                const double gv = g->dtype == TFVM_F32 ? ((const float *)g->data)[gi] : ((const double *)g->data)[gi];
                /* the reference keeps coordinates in f32 */
                float c = (float)(align ? (gv + 1) / 2 * (double)(d - 1) : ((gv + 1) * (double)d - 1) / 2);
                const double lo = align ? 0 : -0.5, hi = align ? (double)d - 1 : (double)d - 0.5;
                if (isnan(c)) {
                    nan_pt = true;
                    c = 0;
                }
                /* zeros: far outside stays outside, and casts safely (border
                 * and reflection bring every coordinate into the axis) */
                if (!pad)
                    c = c < -8 ? -8 : c > (float)d + 8 ? (float)d + 8 : c;
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
                if (nan_pt)
                    acc = NAN;
                if (x->dtype == TFVM_F32)
                    ((float *)o)[oi] = (float)acc;
                else
                    ((double *)o)[oi] = acc;
            }
        }
    *out = r;
    return TFVM_OK;
}

/* ---- NMS: ONNX NonMaxSuppression-11 ----------------------------------------
 * Per batch and class: the boxes above the score threshold by score (ties:
 * lower index first), each kept unless its IoU with a box already kept
 * exceeds the threshold, at most max_output per class. Box arithmetic in
 * the boxes' dtype, as the reference does. */

typedef struct nms_cand {
    double score;
    int64_t idx;
} nms_cand;

static int nms_cmp(const void *a, const void *b)
{
    const nms_cand *p = a, *q = b;
    if (p->score != q->score)
        return p->score > q->score ? -1 : 1;
    return p->idx < q->idx ? -1 : p->idx > q->idx;
}

#define NMS_SUPPRESS(T, NAME)                                                               \
    static bool NAME(const T *b1, const T *b2, bool center, T thr)                          \
    {                                                                                       \
        T x1a, x1b, x2a, x2b, y1a, y1b, y2a, y2b;                                           \
        if (!center) {                                                                      \
            x1a = b1[1] < b1[3] ? b1[1] : b1[3], x1b = b1[1] < b1[3] ? b1[3] : b1[1];       \
            x2a = b2[1] < b2[3] ? b2[1] : b2[3], x2b = b2[1] < b2[3] ? b2[3] : b2[1];       \
            y1a = b1[0] < b1[2] ? b1[0] : b1[2], y1b = b1[0] < b1[2] ? b1[2] : b1[0];       \
            y2a = b2[0] < b2[2] ? b2[0] : b2[2], y2b = b2[0] < b2[2] ? b2[2] : b2[0];       \
        } else {                                                                            \
            const T w1 = b1[2] / 2, h1 = b1[3] / 2, w2 = b2[2] / 2, h2 = b2[3] / 2;        \
            x1a = b1[0] - w1, x1b = b1[0] + w1, x2a = b2[0] - w2, x2b = b2[0] + w2;         \
            y1a = b1[1] - h1, y1b = b1[1] + h1, y2a = b2[1] - h2, y2b = b2[1] + h2;         \
        }                                                                                   \
        const T ixa = x1a > x2a ? x1a : x2a, ixb = x1b < x2b ? x1b : x2b;                   \
        if (ixb <= ixa)                                                                     \
            return false;                                                                   \
        const T iya = y1a > y2a ? y1a : y2a, iyb = y1b < y2b ? y1b : y2b;                   \
        if (iyb <= iya)                                                                     \
            return false;                                                                   \
        const T inter = (ixb - ixa) * (iyb - iya);                                          \
        if (!(inter > 0))                                                                   \
            return false;                                                                   \
        const T a1 = (x1b - x1a) * (y1b - y1a), a2 = (x2b - x2a) * (y2b - y2a);             \
        const T uni = a1 + a2 - inter;                                                      \
        if (!(a1 > 0) || !(a2 > 0) || !(uni > 0))                                           \
            return false;                                                                   \
        return (T)(inter / uni) > thr;                                                      \
    }
NMS_SUPPRESS(float, nms_suppress_f32)
NMS_SUPPRESS(double, nms_suppress_f64)

/* Optional operand v (empty: absent) as a double: a scalar or one element. */
static tfvm_status nms_opt(dev_kctx *k, const dev_kview *v, const char *what, bool *given, double *out)
{
    char s1[DEV_KSHAPE];
    *given = v->count > 0;
    if (v->count > 1 || !dev_knumeric(v->dtype))
        return dev_kfail(k, TFVM_ERR_SHAPE, "%s must be a scalar, one element or empty, got %s", what,
                         dev_kdesc(v, s1));
    *out = *given ? dev_kget_f64(v, 0) : 0;
    return TFVM_OK;
}

tfvm_status dev_cpu_nms(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *bx = &in[0], *sc = &in[1];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    if (k->attr & ~ISA_OPT_CENTER_POINT_BOX)
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "bad options %u", (unsigned)k->attr);
    if (!dev_kfloat(bx->dtype) || sc->dtype != bx->dtype)
        return dev_kfail(k, TFVM_ERR_TYPE, "boxes and scores must be f32 or f64 alike, got %s and %s",
                         dev_kdesc(bx, s1), dev_kdesc(sc, s2));
    if (bx->rank != 3 || bx->dims[2] != 4 || sc->rank != 3 || sc->dims[0] != bx->dims[0] || sc->dims[2] != bx->dims[1])
        return dev_kfail(k, TFVM_ERR_SHAPE, "needs boxes [B, n, 4] and scores [B, C, n], got %s and %s",
                         dev_kshape(bx, s1), dev_kshape(sc, s2));
    bool has_max, has_iou, has_score;
    double maxd, iou, sthr;
    tfvm_status st;
    if ((st = nms_opt(k, &in[2], "max_output_boxes_per_class", &has_max, &maxd)) ||
        (st = nms_opt(k, &in[3], "iou_threshold", &has_iou, &iou)) ||
        (st = nms_opt(k, &in[4], "score_threshold", &has_score, &sthr)))
        return st;
    const int64_t B = bx->dims[0], C = sc->dims[1], n = bx->dims[1];
    const int64_t maxo = !has_max || !(maxd > 0) ? 0 : maxd > (double)n ? n : (int64_t)maxd;
    const bool center = k->attr & ISA_OPT_CENTER_POINT_BOX;
    if (maxo && B * C > INT64_MAX / 3 / maxo)
        return dev_kfail(k, TFVM_ERR_SHAPE, "%lld selections per class of %s are too many", (long long)maxo,
                         dev_kshape(sc, s1));
    /* at most B * C * min(n, maxo) selections */
    const size_t cap = (size_t)(B * C * maxo);
    int64_t *sel = NULL;
    nms_cand *cand = NULL;
    int64_t *kept = NULL;
    if (cap && !(sel = dev_ktemp(k, cap, 3 * sizeof(int64_t))))
        return TFVM_ERR_NOMEM;
    if (cap && n && (!(cand = dev_ktemp(k, (size_t)n, sizeof *cand)) || !(kept = dev_ktemp(k, (size_t)n, sizeof *kept)))) {
        if (cand)
            dev_ktemp_free(k, cand, (size_t)n, sizeof *cand);
        dev_ktemp_free(k, sel, cap, 3 * sizeof(int64_t));
        return TFVM_ERR_NOMEM;
    }
    int64_t ns = 0;
    for (int64_t b = 0; b < B && maxo; b++)
        for (int64_t c = 0; c < C; c++) {
            int64_t nc = 0, nk = 0;
            for (int64_t i = 0; i < n; i++) {
                const double s = dev_kget_f64(sc, (b * C + c) * n + i);
                bool above = bx->dtype == TFVM_F32 ? (float)s > (float)sthr : s > sthr;
                if (!has_score || above)
                    cand[nc++] = (nms_cand){s, i};
            }
            qsort(cand, (size_t)nc, sizeof *cand, nms_cmp);
            for (int64_t q = 0; q < nc && nk < maxo; q++) {
                bool keep = true;
                for (int64_t j = 0; j < nk && keep; j++) {
                    const int64_t o1 = (b * n + cand[q].idx) * 4, o2 = (b * n + kept[j]) * 4;
                    keep = bx->dtype == TFVM_F32
                               ? !nms_suppress_f32((const float *)bx->data + o1, (const float *)bx->data + o2, center,
                                                   (float)iou)
                               : !nms_suppress_f64((const double *)bx->data + o1, (const double *)bx->data + o2,
                                                   center, iou);
                }
                if (keep) {
                    kept[nk++] = cand[q].idx;
                    sel[3 * ns] = b;
                    sel[3 * ns + 1] = c;
                    sel[3 * ns + 2] = cand[q].idx;
                    ns++;
                }
            }
        }
    if (cand) {
        dev_ktemp_free(k, cand, (size_t)n, sizeof *cand);
        dev_ktemp_free(k, kept, (size_t)n, sizeof *kept);
    }
    const int64_t od[2] = {ns, 3};
    dev_value r;
    void *o;
    st = dev_kresult(k, TFVM_I64, 2, od, &r, &o);
    if (!st && ns)
        memcpy(o, sel, (size_t)ns * 3 * sizeof(int64_t));
    if (sel)
        dev_ktemp_free(k, sel, cap, 3 * sizeof(int64_t));
    if (st)
        return st;
    *out = r;
    return TFVM_OK;
}

/* ---- AFFINE_GRID: ONNX AffineGrid-20 ---------------------------------------
 * The normalized coordinates of an output of size [N, C, D1..Dk] (k = 2, 3)
 * transformed by theta [N, k, k+1]: [N, D1..Dk, k], each point
 * theta[n] @ (x, y[, z], 1), x along the last axis. */
tfvm_status dev_cpu_affine_grid(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *th = &in[0];
    char s1[DEV_KSHAPE];
    if (k->attr & ~ISA_OPT_AG_ALIGN_CORNERS)
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "bad options %u", (unsigned)k->attr);
    if (!dev_kfloat(th->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "theta must be f32 or f64, got %s", dev_kdesc(th, s1));
    int64_t size[TFVM_MAX_RANK];
    int ns;
    tfvm_status st = dev_kvec(k, &in[1], "size", size, TFVM_MAX_RANK, &ns);
    if (st)
        return st;
    const int S = ns - 2;
    if ((S != 2 && S != 3) || th->rank != 3 || th->dims[1] != S || th->dims[2] != S + 1 || th->dims[0] != size[0])
        return dev_kfail(k, TFVM_ERR_SHAPE, "needs size [N, C, H, W] or [N, C, D, H, W] and theta [N, k, k+1], got size of %d entries and theta %s",
                         ns, dev_kshape(th, s1));
    int64_t od[5];
    od[0] = size[0];
    for (int i = 0; i < S; i++) {
        if (size[2 + i] < 0)
            return dev_kfail(k, TFVM_ERR_SHAPE, "negative size %lld", (long long)size[2 + i]);
        od[1 + i] = size[2 + i];
    }
    od[S + 1] = S;
    int64_t count;
    if (!dev_kcount(S + 2, od, &count))
        return dev_kfail(k, TFVM_ERR_SHAPE, "result %s is too large", dev_kdims(S + 2, od, s1));
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, th->dtype, S + 2, od, &r, &o)))
        return st;
    const bool align = k->attr & ISA_OPT_AG_ALIGN_CORNERS;
    int64_t P = 1;
    for (int i = 0; i < S; i++)
        P *= od[1 + i];
    int64_t q = 0;
    for (int64_t n = 0; n < od[0]; n++)
        for (int64_t p = 0; p < P; p++) {
            double h[4];
            int64_t rest = p;
            for (int i = S - 1; i >= 0; i--) { /* h[0] = x: the last axis */
                const int64_t d = od[1 + i], ix = rest % d;
                rest /= d;
                const double step = align ? 2.0 / (double)(d - 1) : 2.0 / (double)d;
                h[S - 1 - i] = d == 1 && align ? -1 : (align ? -1 : -1 + step / 2) + (double)ix * step;
            }
            h[S] = 1;
            for (int j = 0; j < S; j++, q++) {
                double acc = 0;
                for (int m = 0; m <= S; m++)
                    acc += dev_kget_f64(th, (n * S + j) * (S + 1) + m) * h[m];
                if (th->dtype == TFVM_F32)
                    ((float *)o)[q] = (float)acc;
                else
                    ((double *)o)[q] = acc;
            }
        }
    *out = r;
    return TFVM_OK;
}

/* ---- COL2IM: ONNX Col2Im-18 ---------------------------------------------------
 * x [N, C * prod(block), L] holds the blocks of an image (L sliding
 * positions); the result [N, C, image..] sums every block element into
 * its pixel. p = [dilations (k), pads (begin k, end k), strides (k)]. */
tfvm_status dev_cpu_col2im(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE], s3[DEV_KSHAPE];
    int64_t img[TFVM_MAX_RANK], blk[TFVM_MAX_RANK], p[4 * TFVM_MAX_RANK];
    int ni, nb, np;
    tfvm_status st;
    if ((st = dev_kvec(k, &in[1], "image_shape", img, TFVM_MAX_RANK - 2, &ni)) ||
        (st = dev_kvec(k, &in[2], "block_shape", blk, TFVM_MAX_RANK - 2, &nb)) ||
        (st = dev_kvec(k, &in[3], "params", p, 4 * TFVM_MAX_RANK, &np)))
        return st;
    if (!dev_kfloat(x->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "x must be f32 or f64, got %s", dev_kdesc(x, s1));
    const int S = ni;
    if (S < 1 || nb != S || np != 4 * S || x->rank != 3)
        return dev_kfail(k, TFVM_ERR_SHAPE,
                         "needs x [N, C * prod(block), L], image_shape and block_shape of k entries and 4k params, got %s, %d, %d and %d",
                         dev_kshape(x, s1), ni, nb, np);
    const int64_t *dil = p, *pad = p + S, *str = p + 3 * S;
    int64_t nblk[TFVM_MAX_RANK], L = 1, B = 1;
    for (int i = 0; i < S; i++) {
        if (img[i] < 0 || blk[i] < 1 || dil[i] < 1 || str[i] < 1 || pad[i] < 0 || pad[S + i] < 0)
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "bad geometry on axis %d: image %lld, block %lld, dilation %lld, stride %lld, pads %lld %lld",
                             i, (long long)img[i], (long long)blk[i], (long long)dil[i], (long long)str[i],
                             (long long)pad[i], (long long)pad[S + i]);
        const int64_t span = dil[i] * (blk[i] - 1) + 1, room = img[i] + pad[i] + pad[S + i];
        nblk[i] = room >= span ? (room - span) / str[i] + 1 : 0;
        L *= nblk[i];
        B *= blk[i];
    }
    if (x->dims[2] != L || x->dims[1] % B)
        return dev_kfail(k, TFVM_ERR_SHAPE, "x %s does not hold blocks %s sliding %lld times over image %s",
                         dev_kshape(x, s1), dev_kdims(S, blk, s2), (long long)L, dev_kdims(S, img, s3));
    int64_t od[TFVM_MAX_RANK], count;
    od[0] = x->dims[0];
    od[1] = x->dims[1] / B;
    for (int i = 0; i < S; i++)
        od[2 + i] = img[i];
    if (!dev_kcount(S + 2, od, &count))
        return dev_kfail(k, TFVM_ERR_SHAPE, "result %s is too large", dev_kdims(S + 2, od, s1));
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, S + 2, od, &r, &o)))
        return st;
    memset(o, 0, (size_t)count * dev_kesize(x->dtype));
    int64_t plane = 1, is[TFVM_MAX_RANK];
    for (int i = S - 1; i >= 0; i--) {
        is[i] = plane;
        plane *= img[i];
    }
    const int64_t NC = od[0] * od[1];
    for (int64_t nc = 0; nc < NC; nc++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t l = 0; l < L; l++) {
                int64_t off = 0, rb = b, rl = l;
                bool inside = true;
                for (int i = S - 1; i >= 0; i--) {
                    const int64_t bi = rb % blk[i], li = rl % nblk[i];
                    rb /= blk[i];
                    rl /= nblk[i];
                    const int64_t pos = li * str[i] - pad[i] + bi * dil[i];
                    if (pos < 0 || pos >= img[i])
                        inside = false;
                    off += pos * is[i];
                }
                if (!inside)
                    continue;
                const int64_t xi = (nc * B + b) * L + l, oi = nc * plane + off;
                if (x->dtype == TFVM_F32)
                    ((float *)o)[oi] += ((const float *)x->data)[xi];
                else
                    ((double *)o)[oi] += ((const double *)x->data)[xi];
            }
    *out = r;
    return TFVM_OK;
}

/* ---- ROI_ALIGN: ONNX RoiAlign-16 ---------------------------------------------
 * x [N, C, H, W], rois [R, 4] (x1, y1, x2, y2), batch indices i64 [R],
 * p f32 [output_height, output_width, sampling_ratio, spatial_scale]:
 * [R, C, oh, ow], each bin the average (or max) of bilinear samples on a
 * regular grid, as the reference computes them. */
tfvm_status dev_cpu_roi_align(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0], *ro = &in[1], *bi = &in[2], *pv = &in[3];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE], s3[DEV_KSHAPE];
    if (k->attr & ~(ISA_OPT_ROI_MAX | ISA_OPT_ROI_HALF_PIXEL))
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "bad options %u", (unsigned)k->attr);
    if (!dev_kfloat(x->dtype) || ro->dtype != x->dtype || bi->dtype != TFVM_I64 || pv->dtype != TFVM_F32 ||
        pv->rank != 1 || pv->count != 4)
        return dev_kfail(k, TFVM_ERR_TYPE,
                         "needs x and rois of one float dtype, i64 batch indices and f32 [4] params, got %s, %s and %s",
                         dev_kdesc(x, s1), dev_kdesc(ro, s2), dev_kdesc(bi, s3));
    if (x->rank != 4 || ro->rank != 2 || ro->dims[1] != 4 || bi->rank != 1 || bi->dims[0] != ro->dims[0])
        return dev_kfail(k, TFVM_ERR_SHAPE, "needs x [N, C, H, W], rois [R, 4] and batch indices [R], got %s, %s and %s",
                         dev_kshape(x, s1), dev_kshape(ro, s2), dev_kshape(bi, s3));
    const float *p = pv->data;
    for (int i = 0; i < 3; i++)
        if (!(p[i] >= 0 && p[i] <= 0x1p24f))
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "params [%g, %g, %g, %g]: sizes and sampling ratio must be in 0..2^24",
                             p[0], p[1], p[2], p[3]);
    const int64_t OH = (int64_t)p[0], OW = (int64_t)p[1], sr = (int64_t)p[2];
    const double scale = p[3];
    const int64_t R = ro->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    if (OH < 1 || OW < 1)
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "output size %lld x %lld must be positive", (long long)OH, (long long)OW);
    const int64_t od[4] = {R, C, OH, OW};
    int64_t count;
    if (!dev_kcount(4, od, &count))
        return dev_kfail(k, TFVM_ERR_SHAPE, "result %s is too large", dev_kdims(4, od, s1));
    const int64_t *bidx = bi->data;
    for (int64_t r = 0; r < R; r++)
        if (bidx[r] < 0 || bidx[r] >= x->dims[0])
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "batch index %lld of roi %lld is outside x %s", (long long)bidx[r],
                             (long long)r, dev_kshape(x, s1));
    dev_value res;
    void *o;
    tfvm_status st = dev_kresult(k, x->dtype, 4, od, &res, &o);
    if (st)
        return st;
    const bool half = k->attr & ISA_OPT_ROI_HALF_PIXEL, mx = k->attr & ISA_OPT_ROI_MAX;
    const double off = half ? 0.5 : 0;
    for (int64_t r = 0; r < R; r++) {
        const double sw = dev_kget_f64(ro, r * 4) * scale - off, sh = dev_kget_f64(ro, r * 4 + 1) * scale - off;
        const double ew = dev_kget_f64(ro, r * 4 + 2) * scale - off, eh = dev_kget_f64(ro, r * 4 + 3) * scale - off;
        double rw = ew - sw, rh = eh - sh;
        if (!half) {
            rw = rw > 1 ? rw : 1;
            rh = rh > 1 ? rh : 1;
        }
        const double bh = rh / (double)OH, bw = rw / (double)OW;
        const double ch = ceil(rh / (double)OH), cw = ceil(rw / (double)OW);
        if (sr == 0 && !(ch <= 0x1p20 && cw <= 0x1p20)) {
            dev_value_release(&res);
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "roi %lld is too large (or NaN) for adaptive sampling", (long long)r);
        }
        const int64_t gh = sr > 0 ? sr : ch > 0 ? (int64_t)ch : 0, gw = sr > 0 ? sr : cw > 0 ? (int64_t)cw : 0;
        const double cnt = gh * gw > 1 ? (double)(gh * gw) : 1;
        for (int64_t c = 0; c < C; c++) {
            const int64_t base = (bidx[r] * C + c) * H * W;
            for (int64_t ph = 0; ph < OH; ph++)
                for (int64_t pw = 0; pw < OW; pw++) {
                    double acc = 0;
                    bool first = true;
                    for (int64_t iy = 0; iy < gh; iy++)
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double y = sh + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                            double xx = sw + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                            double v[4] = {0, 0, 0, 0};
                            if (isnan(y) || isnan(xx)) {
                                v[0] = NAN;
                            } else if (!(y < -1.0 || y > (double)H || xx < -1.0 || xx > (double)W)) {
                                y = y > 0 ? y : 0;
                                xx = xx > 0 ? xx : 0;
                                int64_t yl = (int64_t)y, xl = (int64_t)xx, yh, xh;
                                if (yl >= H - 1) {
                                    yh = yl = H - 1;
                                    y = (double)yl;
                                } else {
                                    yh = yl + 1;
                                }
                                if (xl >= W - 1) {
                                    xh = xl = W - 1;
                                    xx = (double)xl;
                                } else {
                                    xh = xl + 1;
                                }
                                const double ly = y - (double)yl, lx = xx - (double)xl, hy = 1 - ly, hx = 1 - lx;
                                v[0] = hy * hx * dev_kget_f64(x, base + yl * W + xl);
                                v[1] = hy * lx * dev_kget_f64(x, base + yl * W + xh);
                                v[2] = ly * hx * dev_kget_f64(x, base + yh * W + xl);
                                v[3] = ly * lx * dev_kget_f64(x, base + yh * W + xh);
                            } else {
                                for (int j = 0; j < 4; j++) /* the reference's zero weights at position 0 */
                                    v[j] = 0 * dev_kget_f64(x, base);
                            }
                            if (mx) {
                                double m = v[0];
                                for (int j = 1; j < 4; j++)
                                    m = v[j] > m ? v[j] : m;
                                acc = first || m > acc ? m : acc;
                                first = false;
                            } else {
                                acc += v[0] + v[1] + v[2] + v[3];
                            }
                        }
                    if (!mx)
                        acc /= cnt;
                    const int64_t oi = ((r * C + c) * OH + ph) * OW + pw;
                    if (x->dtype == TFVM_F32)
                        ((float *)o)[oi] = (float)acc;
                    else
                        ((double *)o)[oi] = acc;
                }
        }
    }
    *out = res;
    return TFVM_OK;
}

/* ---- DEFORM_CONV: ONNX DeformConv-19 on 2-D images ---------------------------
 * x [N, C, H, W], w [OC, C / group, KH, KW], offset [N, og * 2 * KH * KW,
 * OH, OW] (per offset group and kernel tap: dy, dx), mask [N, og * KH * KW,
 * OH, OW] or empty (ones), p i64 [group, og, pad top, left, bottom, right,
 * stride h, w, dilation h, w]. Each tap samples x bilinearly at its moved
 * position (zero outside), times the mask, into a column buffer; then per
 * group out = w @ columns (no bias: the importer adds it). */
static double dc_sample(const dev_kview *x, int64_t base, int64_t H, int64_t W, double y, double xx)
{
    if (isnan(y) || isnan(xx))
        return NAN;
    if (!(y > -2 && y < (double)H + 1 && xx > -2 && xx < (double)W + 1))
        return 0; /* every neighbour outside (and no cast out of range) */
    const double fy = floor(y), fx = floor(xx);
    const int64_t y0 = (int64_t)fy, x0 = (int64_t)fx;
    const double ly = y - fy, lx = xx - fx;
    double acc = 0;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            const int64_t yy = y0 + a, xq = x0 + b;
            if (yy < 0 || yy >= H || xq < 0 || xq >= W)
                continue;
            const double wt = (a ? ly : 1 - ly) * (b ? lx : 1 - lx);
            if (wt != 0)
                acc += wt * dev_kget_f64(x, base + yy * W + xq);
        }
    return acc;
}

tfvm_status dev_cpu_deform_conv(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0], *w = &in[1], *of = &in[2], *mk = &in[3];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE], s3[DEV_KSHAPE];
    int64_t p[10];
    int np;
    tfvm_status st = dev_kvec(k, &in[4], "params", p, 10, &np);
    if (st)
        return st;
    if (!dev_kfloat(x->dtype) || w->dtype != x->dtype || of->dtype != x->dtype || (mk->count && mk->dtype != x->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "x, w, offset and mask must share one float dtype, got %s, %s and %s",
                         dev_kdesc(x, s1), dev_kdesc(w, s2), dev_kdesc(of, s3));
    if (np != 10 || x->rank != 4 || w->rank != 4 || of->rank != 4)
        return dev_kfail(k, TFVM_ERR_SHAPE, "needs x, w and offset of rank 4 and 10 params, got %s, %s, %s",
                         dev_kshape(x, s1), dev_kshape(w, s2), dev_kshape(of, s3));
    const int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    const int64_t OC = w->dims[0], CG = w->dims[1], KH = w->dims[2], KW = w->dims[3];
    const int64_t G = p[0], OG = p[1], OH = of->dims[2], OW = of->dims[3];
    const int64_t *pad = p + 2, *str = p + 6, *dil = p + 8;
    if (G < 1 || OG < 1 || C != CG * G || OC % G || C % OG || of->dims[0] != N || of->dims[1] != OG * 2 * KH * KW ||
        (mk->count && (mk->rank != 4 || mk->dims[0] != N || mk->dims[1] != OG * KH * KW || mk->dims[2] != OH ||
                       mk->dims[3] != OW)))
        return dev_kfail(k, TFVM_ERR_SHAPE, "x %s, w %s and offset %s do not agree with group %lld, offset_group %lld",
                         dev_kshape(x, s1), dev_kshape(w, s2), dev_kshape(of, s3), (long long)G, (long long)OG);
    const int64_t od[4] = {N, OC, OH, OW};
    int64_t count;
    if (!dev_kcount(4, od, &count))
        return dev_kfail(k, TFVM_ERR_SHAPE, "result %s is too large", dev_kdims(4, od, s1));
    const int64_t cdims[2] = {C * KH * KW, OH * OW};
    int64_t ccount;
    if (!dev_kcount(2, cdims, &ccount) || str[0] < 1 || str[1] < 1 || dil[0] < 1 || dil[1] < 1)
        return dev_kfail(k, TFVM_ERR_SHAPE, "bad strides, dilations or sizes for x %s and w %s", dev_kshape(x, s1),
                         dev_kshape(w, s2));
    const int64_t P = OH * OW, rows = C * KH * KW;
    double *col = NULL;
    if (count && rows && !(col = dev_ktemp(k, (size_t)(rows * P), sizeof(double))))
        return TFVM_ERR_NOMEM;
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, 4, od, &r, &o))) {
        if (col)
            dev_ktemp_free(k, col, (size_t)(rows * P), sizeof(double));
        return st;
    }
    const int64_t cpo = C / OG, ocg = OC / G;
    for (int64_t n = 0; n < N && count; n++) {
        for (int64_t c = 0; c < C; c++) {
            const int64_t g = c / cpo;
            for (int64_t t = 0; t < KH * KW; t++) {
                const int64_t kh = t / KW, kw = t % KW;
                double *cr = col + (c * KH * KW + t) * P;
                for (int64_t q = 0; q < P; q++) {
                    const int64_t i = q / OW, j = q % OW;
                    const double dy = dev_kget_f64(of, ((n * OG + g) * KH * KW * 2 + t * 2) * P + q);
                    const double dx = dev_kget_f64(of, ((n * OG + g) * KH * KW * 2 + t * 2 + 1) * P + q);
                    const double y = (double)(-pad[0] + str[0] * i + kh * dil[0]) + dy;
                    const double xx = (double)(-pad[1] + str[1] * j + kw * dil[1]) + dx;
                    double v = dc_sample(x, (n * C + c) * H * W, H, W, y, xx);
                    if (mk->count)
                        v *= dev_kget_f64(mk, ((n * OG + g) * KH * KW + t) * P + q);
                    cr[q] = v;
                }
            }
        }
        for (int64_t oc = 0; oc < OC; oc++) {
            const int64_t g = oc / ocg;
            for (int64_t q = 0; q < P; q++) {
                double acc = 0;
                for (int64_t cg = 0; cg < CG; cg++)
                    for (int64_t t = 0; t < KH * KW; t++)
                        acc += dev_kget_f64(w, (oc * CG + cg) * KH * KW + t) * col[((g * CG + cg) * KH * KW + t) * P + q];
                const int64_t oi = (n * OC + oc) * P + q;
                if (x->dtype == TFVM_F32)
                    ((float *)o)[oi] = (float)acc;
                else
                    ((double *)o)[oi] = acc;
            }
        }
    }
    if (col)
        dev_ktemp_free(k, col, (size_t)(rows * P), sizeof(double));
    *out = r;
    return TFVM_OK;
}
