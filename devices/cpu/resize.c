/* devices/cpu/resize.c — RESIZE: ONNX Resize-13+ in modes nearest (every
 * dtype) and linear (floats; n-linear over the axes whose scale is not 1),
 * with ONNX's coordinate transformations and nearest rounding modes. */
#include "devices/cpu/kern.h"
#include "devices/cpu/par.h"

#include <math.h>
#include <stdatomic.h>
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

/* The result's dims and each axis's scale, from scales (ns entries) or sizes
 * (nz entries): RESIZE's and RESIZE2's shared checks. */
static tfvm_status out_dims(dev_kctx *k, const dev_kview *x, const dev_kview *sc, int64_t ns, const int64_t *sizes,
                            int nz, int64_t *od, double *scale)
{
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    for (int i = 0; i < x->rank; i++) {
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
                return dev_kfail(k, TFVM_ERR_ARGUMENT, "bad sizes %s: each must be in 0..2^40", dev_kdims(nz, sizes, s1));
            if (d == 0 && sizes[i] > 0)
                return dev_kfail(k, TFVM_ERR_SHAPE, "cannot resize empty axis %d of %s to %s", i, dev_kshape(x, s1),
                                 dev_kdims(nz, sizes, s2));
            od[i] = sizes[i];
            scale[i] = d ? (double)sizes[i] / (double)d : 1;
        }
    }
    return TFVM_OK;
}

/* Bilinear over the last two axes, the others kept (a segmentation head's
 * upsampling): RESIZE_LINEAR's four corners in its order, its weights and
 * its sums, without its per-element walk over the corners and axes (a
 * [1, 21, 64, 64] -> [1, 21, 256, 256] upsampling took 19 ns an element).
 * Rows (plane, output row) [b, e); on f32 with AVX-512, eight columns at
 * once (bilinear_f32_v16), with AVX2 four (bilinear_f32_v8). */
typedef struct bilinear_job {
    const void *x;
    void *o;
    int64_t H, W, OH, OW;
    const resize_axis *ry, *rx;
    /* f32 in vectors: per output column its lo and hi less the first lo of
     * its block (8 columns on AVX-512, 4 on AVX2); per block whether they
     * all lie within twice its width of it */
    const int32_t *il, *ih;
    const uint8_t *near;
} bilinear_job;

/* Columns [qx0, qx1) of output row qy of the plane at xp into op */
#define BILINEAR_FNS(T, SFX)                                                                              \
    static void bilinear_row_##SFX(const bilinear_job *j, const T *xp, T *op, int64_t qy, int64_t qx0,   \
                                   int64_t qx1)                                                           \
    {                                                                                                     \
        const double wy = j->ry->w[qy], uy = 1 - wy;                                                      \
        const T *lo = xp + j->ry->lo[qy] * j->W, *hi = xp + j->ry->hi[qy] * j->W;                         \
        for (int64_t qx = qx0; qx < qx1; qx++) {                                                          \
            const double wx = j->rx->w[qx], ux = 1 - wx;                                                  \
            const int64_t l = j->rx->lo[qx], h = j->rx->hi[qx];                                           \
            double acc = 0, wt;                                                                           \
            if ((wt = uy * ux) != 0)                                                                      \
                acc += wt * (double)lo[l];                                                                \
            if ((wt = wy * ux) != 0)                                                                      \
                acc += wt * (double)hi[l];                                                                \
            if ((wt = uy * wx) != 0)                                                                      \
                acc += wt * (double)lo[h];                                                                \
            if ((wt = wy * wx) != 0)                                                                      \
                acc += wt * (double)hi[h];                                                                \
            op[qx] = (T)acc;                                                                              \
        }                                                                                                 \
    }                                                                                                     \
    static void bilinear_##SFX(void *arg, size_t b, size_t e)                                            \
    {                                                                                                     \
        const bilinear_job *j = arg;                                                                      \
        for (size_t r = b; r < e; r++)                                                                    \
            bilinear_row_##SFX(j, (const T *)j->x + (int64_t)r / j->OH * j->H * j->W,                    \
                               (T *)j->o + (int64_t)r * j->OW, (int64_t)r % j->OH, 0, j->OW);             \
    }
BILINEAR_FNS(float, f32)
BILINEAR_FNS(double, f64)
#undef BILINEAR_FNS

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "devices/cpu/chw.h"
/* Output row r of the vector rows below: its plane xp, where it goes, its
 * y and the two input rows it blends */
typedef struct bilinear_at {
    const float *xp, *row0, *row1;
    float *op;
    int64_t qy;
    double wy;
} bilinear_at;

static inline bilinear_at bilinear_row_at(const bilinear_job *j, size_t r)
{
    const int64_t p = (int64_t)r / j->OH, qy = (int64_t)r % j->OH;
    const float *xp = (const float *)j->x + p * j->H * j->W;
    return (bilinear_at){xp, xp + j->ry->lo[qy] * j->W, xp + j->ry->hi[qy] * j->W, (float *)j->o + (int64_t)r * j->OW,
                         qy, j->ry->w[qy]};
}

/* The same sums in double, eight columns a vector: their x from the two
 * input rows by a permutation of the 16 columns from the block's first lo
 * (loaded under a mask up to the row's end), each corner's term 0 where
 * its weight is (as skipped: acc + 0 is acc, which is never -0 once 0 +
 * the first term), rounded to f32 once. Blocks whose columns spread wider
 * (downscaling by more than 2) take the scalar row. */
__attribute__((target("avx512f"))) static void bilinear_f32_v16(void *arg, size_t b, size_t e)
{
    const bilinear_job *j = arg;
    const int64_t W = j->W, OW = j->OW;
    const __m512d zero = _mm512_setzero_pd(), one = _mm512_set1_pd(1);
    for (size_t r = b; r < e; r++) {
        const bilinear_at a = bilinear_row_at(j, r);
        const float *xp = a.xp, *row0 = a.row0, *row1 = a.row1;
        float *op = a.op;
        const int64_t qy = a.qy;
        const __m512d vwy = _mm512_set1_pd(a.wy), vuy = _mm512_set1_pd(1 - a.wy);
        for (int64_t qx = 0; qx < OW; qx += 8) {
            const int64_t n = OW - qx < 8 ? OW - qx : 8;
            if (!j->near[qx / 8]) {
                bilinear_row_f32(j, xp, op, qy, qx, qx + n);
                continue;
            }
            const __mmask8 k = (__mmask8)((1u << n) - 1);
            const int64_t l0 = j->rx->lo[qx], left = W - l0;
            const __mmask16 rk = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
            const __m512 rl = _mm512_maskz_loadu_ps(rk, row0 + l0), rh = _mm512_maskz_loadu_ps(rk, row1 + l0);
            const __m512i il = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(j->il + qx)));
            const __m512i ih = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(j->ih + qx)));
            const __m512d wx = _mm512_maskz_loadu_pd(k, j->rx->w + qx), ux = _mm512_sub_pd(one, wx);
            const __m512d t[4] = {_mm512_mul_pd(vuy, ux), _mm512_mul_pd(vwy, ux), _mm512_mul_pd(vuy, wx),
                                  _mm512_mul_pd(vwy, wx)};
            const __m512d v[4] = {
                _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_permutexvar_ps(il, rl))),
                _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_permutexvar_ps(il, rh))),
                _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_permutexvar_ps(ih, rl))),
                _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_permutexvar_ps(ih, rh)))};
            __m512d acc = zero;
            for (int c = 0; c < 4; c++)
                acc = _mm512_add_pd(
                    acc, _mm512_maskz_mul_pd(_mm512_cmp_pd_mask(t[c], zero, _CMP_NEQ_UQ), t[c], v[c]));
            _mm512_mask_storeu_ps(op + qx, k, _mm512_castps256_ps512(_mm512_cvtpd_ps(acc)));
        }
    }
}

/* The same on AVX2, four columns a vector: their x from the two input rows
 * by a permutation of the 8 columns from the block's first lo; blocks whose
 * columns spread wider take the scalar row. */
__attribute__((target("avx2"))) static void bilinear_f32_v8(void *arg, size_t b, size_t e)
{
    const bilinear_job *j = arg;
    const int64_t W = j->W, OW = j->OW;
    const __m256d zero = _mm256_setzero_pd(), one = _mm256_set1_pd(1);
    for (size_t r = b; r < e; r++) {
        const bilinear_at a = bilinear_row_at(j, r);
        const float *xp = a.xp, *row0 = a.row0, *row1 = a.row1;
        float *op = a.op;
        const int64_t qy = a.qy;
        const __m256d vwy = _mm256_set1_pd(a.wy), vuy = _mm256_set1_pd(1 - a.wy);
        for (int64_t qx = 0; qx < OW; qx += 4) {
            const int64_t n = OW - qx < 4 ? OW - qx : 4;
            if (!j->near[qx / 4]) {
                bilinear_row_f32(j, xp, op, qy, qx, qx + n);
                continue;
            }
            const int64_t l0 = j->rx->lo[qx], left = W - l0;
            const __m256i rk = v8_mask(left);
            const __m256 rl = _mm256_maskload_ps(row0 + l0, rk), rh = _mm256_maskload_ps(row1 + l0, rk);
            const __m256i il = _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(j->il + qx)));
            const __m256i ih = _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(j->ih + qx)));
            const __m256d wx = _mm256_maskload_pd(
                              j->rx->w + qx, _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3))),
                          ux = _mm256_sub_pd(one, wx);
            const __m256d t[4] = {_mm256_mul_pd(vuy, ux), _mm256_mul_pd(vwy, ux), _mm256_mul_pd(vuy, wx),
                                  _mm256_mul_pd(vwy, wx)};
            const __m256d v[4] = {_mm256_cvtps_pd(_mm256_castps256_ps128(_mm256_permutevar8x32_ps(rl, il))),
                                  _mm256_cvtps_pd(_mm256_castps256_ps128(_mm256_permutevar8x32_ps(rh, il))),
                                  _mm256_cvtps_pd(_mm256_castps256_ps128(_mm256_permutevar8x32_ps(rl, ih))),
                                  _mm256_cvtps_pd(_mm256_castps256_ps128(_mm256_permutevar8x32_ps(rh, ih)))};
            __m256d acc = zero;
            for (int c = 0; c < 4; c++)
                acc = _mm256_add_pd(
                    acc, _mm256_and_pd(_mm256_mul_pd(t[c], v[c]), _mm256_cmp_pd(t[c], zero, _CMP_NEQ_UQ)));
            const __m128 y = _mm256_cvtpd_ps(acc);
            if (n == 4)
                _mm_storeu_ps(op + qx, y);
            else
                _mm_maskstore_ps(op + qx, _mm_cmpgt_epi32(_mm_set1_epi32((int)n), _mm_setr_epi32(0, 1, 2, 3)), y);
        }
    }
}
#endif

static atomic_int resize_forced;

void dev_resize_force(int path) { atomic_store(&resize_forced, path); }

/* Rows of planes of an f32 or f64 bilinear RESIZE, over the VM's workers
 * past RESIZE_PAR_ELEMS outputs; false when the f32 tables' memory cannot
 * be had */
#define RESIZE_PAR_ELEMS (INT64_C(1) << 15)
static bool bilinear_run(dev_kctx *k, const dev_kview *x, void *o, const resize_axis *ax, const int64_t *od,
                         int64_t count)
{
    const int R = x->rank;
    bilinear_job j = {x->data, o, x->dims[R - 2], x->dims[R - 1], od[R - 2], od[R - 1], &ax[R - 2], &ax[R - 1],
                      NULL, NULL, NULL};
    void (*fn)(void *, size_t, size_t) = x->dtype == TFVM_F32 ? bilinear_f32 : bilinear_f64;
    char *tab = NULL;
    size_t tab_bytes = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    const int path = dev_kpath(atomic_load(&resize_forced));
    if (x->dtype == TFVM_F32 && path < 2) {
        const bool v16 = path == 0;
        /* blocks of 8 columns within 16 of their first lo (AVX-512), or of 4 within 8 (AVX2) */
        const int64_t bw = v16 ? 8 : 4, reach = 2 * bw, blocks = (j.OW + bw - 1) / bw;
        tab_bytes = (size_t)blocks * (size_t)(2 * bw * (int64_t)sizeof(int32_t) + 1);
        if (!(tab = dev_ktemp(k, tab_bytes, 1)))
            return false;
        int32_t *il = (int32_t *)(void *)tab, *ih = il + bw * blocks;
        uint8_t *near = (uint8_t *)(ih + bw * blocks);
        for (int64_t c = 0; c < blocks; c++) {
            const int64_t l0 = j.rx->lo[bw * c];
            near[c] = 1;
            for (int64_t q = bw * c; q < bw * c + bw; q++) {
                const bool in = q < j.OW;
                il[q] = in ? (int32_t)(j.rx->lo[q] - l0) : 0;
                ih[q] = in ? (int32_t)(j.rx->hi[q] - l0) : 0;
                if (in && (j.rx->lo[q] < l0 || j.rx->hi[q] - l0 >= reach))
                    near[c] = 0;
            }
        }
        j.il = il, j.ih = ih, j.near = near;
        fn = v16 ? bilinear_f32_v16 : bilinear_f32_v8;
    }
#endif
    const int64_t rows = count / j.OW;
    if (count >= RESIZE_PAR_ELEMS && dev_par_width() > 1)
        dev_par_for((size_t)rows, dev_kgrain(rows, j.OW, RESIZE_PAR_ELEMS / 2, 1), fn, &j);
    else
        fn(&j, 0, (size_t)rows);
    if (tab)
        dev_ktemp_free(k, tab, tab_bytes, 1);
    return true;
}

tfvm_status dev_cpu_resize(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0], *sc = &in[1];
    char s1[DEV_KSHAPE];
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
    if ((st = out_dims(k, x, sc, ns, sizes, nz, od, scale)))
        return st;
    for (int i = 0; i < R; i++)
        total += od[i];
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
        /* bilinear over the last two axes, the others as they were */
        bool last_two = linear && R >= 2 && m == 2 && ia[0] == R - 2 && ia[1] == R - 1;
        for (int i = 0; last_two && i < R - 2; i++)
            last_two = od[i] == x->dims[i];
        if (last_two) {
            if (!bilinear_run(k, x, o, ax, od, count)) {
                dev_value_release(&r);
                dev_ktemp_free(k, scratch, (size_t)total, per);
                return TFVM_ERR_NOMEM;
            }
        } else if (linear) {
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

/* ---- RESIZE2: the modes RESIZE leaves out ---------------------------------
 * ONNX Resize-19 as its reference computes it: one axis at a time (the
 * interpolation is separable), in f64, each output coordinate a window of
 * taps (index clamped into the axis, weight) from the mode's coefficient
 * function; tf_crop_and_resize's coordinates outside the input give the
 * extrapolation value, which later axes then interpolate like any value. */

#define RESIZE2_COORD (RESIZE_COORD | ISA_OPT_HALF_PIXEL_SYMMETRIC | ISA_OPT_TF_CROP_AND_RESIZE)
#define RESIZE2_MODES (ISA_OPT_LINEAR | ISA_OPT_CUBIC)
#define RESIZE2_KEEP (ISA_OPT_NOT_LARGER | ISA_OPT_NOT_SMALLER)
#define RESIZE2_MAXTAPS 4096 /* antialiased windows grow as 4 / scale */

typedef struct resize2_pass {
    int n;              /* taps per output coordinate */
    int64_t *start;     /* per output coordinate: the first tap's index, unclamped */
    double *w;          /* n weights per output coordinate */
    uint8_t *extra;     /* per output coordinate: outside the input (tf_crop_and_resize) */
} resize2_pass;

static double resize2_cubic(double A, double x)
{
    x = fabs(x);
    if (x <= 1)
        return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2)
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0;
}

/* The window width of the mode at scale s (a double: a tiny scale gives
 * more than an int holds, which the caller refuses). */
static double resize2_taps(uint32_t opt, double s)
{
    const double sa = s < 1 ? s : 1;
    if (opt & ISA_OPT_CUBIC) {
        if (!(opt & ISA_OPT_ANTIALIAS))
            return 4;
        const double st = floor(-2 / sa) + 1;
        return 2 - 2 * st;
    }
    if ((opt & ISA_OPT_LINEAR) && (opt & ISA_OPT_ANTIALIAS))
        return 2 - 2 * (floor(-1 / sa) + 1);
    return 2;
}

/* The weights of the window around ratio r in (0, 1] (the source coordinate
 * minus its floor, 1 at an integer), as ONNX's reference computes them. */
static void resize2_coeffs(uint32_t opt, double r, double s, double A, int n, double *w)
{
    const double sa = s < 1 ? s : 1;
    if (opt & ISA_OPT_CUBIC) {
        if (!(opt & ISA_OPT_ANTIALIAS)) {
            w[0] = resize2_cubic(A, r + 1);
            w[1] = resize2_cubic(A, r);
            w[2] = resize2_cubic(A, 1 - r);
            w[3] = resize2_cubic(A, 2 - r);
            return;
        }
        const double st = floor(-2 / sa) + 1;
        double sum = 0;
        for (int i = 0; i < n; i++)
            sum += w[i] = resize2_cubic(A, sa * (st + i - r));
        for (int i = 0; i < n; i++)
            w[i] /= sum;
        return;
    }
    if (opt & ISA_OPT_LINEAR) {
        if (!(opt & ISA_OPT_ANTIALIAS)) {
            w[0] = 1 - r;
            w[1] = r;
            return;
        }
        const double st = floor(-1 / sa) + 1;
        double sum = 0;
        for (int i = 0; i < n; i++) {
            double v = 1 - fabs((st + i - r) * sa);
            sum += w[i] = v < 0 ? 0 : v > 1 ? 1 : v;
        }
        for (int i = 0; i < n; i++)
            w[i] /= sum;
        return;
    }
    /* nearest: the left or the right neighbour */
    bool right;
    if (r == 1)
        right = true;
    else
        switch (opt & RESIZE_ROUND) {
        case ISA_OPT_NEAREST_FLOOR: right = false; break;
        case ISA_OPT_NEAREST_CEIL: right = true; break;
        case ISA_OPT_PREFER_CEIL: right = r >= 0.5; break;
        default: right = r > 0.5; break;
        }
    w[0] = right ? 0 : 1;
    w[1] = right ? 1 : 0;
}

/* Source coordinate of output coordinate y on an axis of in elements
 * resized to out (out_f = in * s before rounding); roi = [start, end]. */
static double resize2_orig(uint32_t opt, double y, int64_t in, int64_t out, double s, const float *roi,
                           bool *extra)
{
    const double len = (double)in * s;
    *extra = false;
    switch (opt & RESIZE2_COORD) {
    case ISA_OPT_HALF_PIXEL_SYMMETRIC: {
        const double adj = (double)out / len, center = (double)in / 2;
        return center * (1 - adj) + (y + 0.5) / s - 0.5;
    }
    case ISA_OPT_TF_CROP_AND_RESIZE: {
        const double r0 = roi[0], r1 = roi[1];
        double x = len == 1 ? (r1 - r0) * (double)(in - 1) / 2 : y * (r1 - r0) * (double)(in - 1) / (len - 1);
        x += r0 * (double)(in - 1);
        *extra = x < 0 || x > (double)(in - 1);
        return x;
    }
    default:
        return resize_orig(opt, y, in, s);
    }
}

/* One axis: src laid out [outer, in, inner] into dst [outer, out, inner]. */
static void resize2_apply(const resize2_pass *p, double ext, const double *src, double *dst, int64_t outer,
                          int64_t in, int64_t out, int64_t inner)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t q = 0; q < out; q++) {
            double *d = dst + (o * out + q) * inner;
            if (p->extra[q]) {
                for (int64_t i = 0; i < inner; i++)
                    d[i] = ext;
                continue;
            }
            for (int64_t i = 0; i < inner; i++)
                d[i] = 0;
            for (int j = 0; j < p->n; j++) {
                const double wt = p->w[q * p->n + j];
                if (wt == 0)
                    continue;
                int64_t ix = p->start[q] + j;
                ix = ix < 0 ? 0 : ix >= in ? in - 1 : ix;
                const double *s = src + (o * in + ix) * inner;
                for (int64_t i = 0; i < inner; i++)
                    d[i] += wt * s[i];
            }
        }
}

tfvm_status dev_cpu_resize2(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0], *sc = &in[1], *pv = &in[3];
    char s1[DEV_KSHAPE];
    const uint32_t opt = k->attr;
    const uint32_t coord = opt & RESIZE2_COORD, rnd = opt & RESIZE_ROUND, mode = opt & RESIZE2_MODES,
                   keep = opt & RESIZE2_KEEP;
    const uint32_t known = RESIZE2_COORD | RESIZE_ROUND | RESIZE2_MODES | RESIZE2_KEEP | ISA_OPT_ANTIALIAS |
                           ISA_OPT_EXCLUDE_OUTSIDE | ISA_OPT_KEEP_AXES;
    if ((opt & ~known) || (coord & (coord - 1)) || (rnd & (rnd - 1)) || (mode & (mode - 1)) || (keep & (keep - 1)))
        return dev_kfail(k, TFVM_ERR_ARGUMENT,
                         "bad options %u: one mode, coordinate mode, rounding mode and aspect policy at most",
                         (unsigned)opt);
    if (!dev_kfloat(x->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "x must be f32 or f64, got %s", dev_kdesc(x, s1));
    if (sc->dtype != TFVM_F32 || sc->rank != 1)
        return dev_kfail(k, TFVM_ERR_TYPE, "scales must be an f32 vector, got %s", dev_kdesc(sc, s1));
    const int R = x->rank;
    if (pv->dtype != TFVM_F32 || pv->rank != 1 || (pv->count != 2 && pv->count != 2 + 2 * R))
        return dev_kfail(k, TFVM_ERR_TYPE,
                         "params must be f32 [2] or [%d] (cubic a, extrapolation value, roi starts, roi ends), got %s",
                         2 + 2 * R, dev_kdesc(pv, s1));
    if (coord == ISA_OPT_TF_CROP_AND_RESIZE && pv->count != 2 + 2 * R)
        return dev_kfail(k, TFVM_ERR_SHAPE, "tf_crop_and_resize needs a roi: params must be f32 [%d], got %s",
                         2 + 2 * R, dev_kdesc(pv, s1));
    int64_t sizes[TFVM_MAX_RANK];
    int nz;
    tfvm_status st = dev_kvec(k, &in[2], "sizes", sizes, TFVM_MAX_RANK, &nz);
    if (st)
        return st;
    const int64_t ns = sc->count;
    if ((R > 0 && (ns == 0) == (nz == 0)) || (ns && ns != R) || (nz && nz != R))
        return dev_kfail(k, TFVM_ERR_SHAPE,
                         "exactly one of scales (%lld entries) and sizes (%d entries) must be given, one entry per axis of %s",
                         (long long)ns, nz, dev_kshape(x, s1));
    const float *par = pv->data;
    const double A = par[0], ext = par[1];
    int64_t od[TFVM_MAX_RANK];
    double scale[TFVM_MAX_RANK];
    const uint32_t kaxes = (opt & ISA_OPT_KEEP_AXES) / ISA_OPT_KEEP_AXIS0;
    if ((st = out_dims(k, x, sc, ns, sizes, nz, od, scale)))
        return st;
    if (keep && nz) {
        /* one scale for the listed axes: the smallest (not_larger) or largest */
        double s = 0;
        bool any = false;
        for (int i = 0; i < R; i++)
            if (kaxes >> i & 1) {
                if (!any || (keep == ISA_OPT_NOT_LARGER ? scale[i] < s : scale[i] > s))
                    s = scale[i];
                any = true;
            }
        for (int i = 0; i < R; i++)
            if (kaxes >> i & 1) {
                const double n = floor(s * (double)x->dims[i] + 0.5);
                if (n > (double)RESIZE_MAX)
                    return dev_kfail(k, TFVM_ERR_SHAPE, "axis %d of %s scaled by %g is too large", i, dev_kshape(x, s1), s);
                od[i] = (int64_t)n;
                scale[i] = s;
            } else {
                od[i] = x->dims[i];
                scale[i] = 1;
            }
    }
    int64_t count;
    if (!dev_kcount(R, od, &count))
        return dev_kfail(k, TFVM_ERR_SHAPE, "result %s is too large", dev_kdims(R, od, s1));
    /* the axes to resample, and the largest intermediate */
    const float *roi = pv->count == 2 + 2 * R ? par + 2 : NULL;
    bool act[TFVM_MAX_RANK];
    int64_t cur[TFVM_MAX_RANK], big = x->count > count ? x->count : count;
    memcpy(cur, x->dims, sizeof(int64_t) * (size_t)R);
    for (int i = 0; i < R; i++) {
        act[i] = !(fabs(scale[i] - 1) <= 1e-9 && od[i] == x->dims[i] &&
                   (!roi || (fabs(roi[i]) <= 1e-9 && fabs(roi[R + i] - 1) <= 1e-9)));
        if (act[i]) {
            cur[i] = od[i];
            int64_t c;
            if (!dev_kcount(R, cur, &c))
                return dev_kfail(k, TFVM_ERR_SHAPE, "result %s is too large", dev_kdims(R, od, s1));
            big = c > big ? c : big;
        }
    }
    for (int i = 0; i < R; i++)
        if (act[i] && x->dims[i] > 0 && resize2_taps(opt, scale[i]) > RESIZE2_MAXTAPS)
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "scale %g of axis %d is too small for an antialiased window",
                             scale[i], i);
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, R, od, &r, &o)))
        return st;
    if (count == 0 || R == 0) {
        if (count)
            memcpy(o, x->data, dev_kesize(x->dtype));
        *out = r;
        return TFVM_OK;
    }
    double *buf[2];
    buf[0] = dev_ktemp(k, (size_t)big, sizeof(double));
    buf[1] = buf[0] ? dev_ktemp(k, (size_t)big, sizeof(double)) : NULL;
    if (!buf[1]) {
        if (buf[0])
            dev_ktemp_free(k, buf[0], (size_t)big, sizeof(double));
        dev_value_release(&r);
        return TFVM_ERR_NOMEM;
    }
    for (int64_t i = 0; i < x->count; i++)
        buf[0][i] = x->dtype == TFVM_F32 ? ((const float *)x->data)[i] : ((const double *)x->data)[i];
    int b = 0;
    memcpy(cur, x->dims, sizeof(int64_t) * (size_t)R);
    st = TFVM_OK;
    for (int a = 0; a < R && !st; a++) {
        if (!act[a])
            continue;
        const int64_t din = cur[a], dout = od[a];
        resize2_pass p;
        p.n = (int)resize2_taps(opt, scale[a]); /* <= RESIZE2_MAXTAPS, checked above */
        const size_t per = (size_t)p.n * sizeof(double) + sizeof(int64_t) + 1;
        char *mem = dev_ktemp(k, (size_t)dout, per);
        if (!mem) {
            st = TFVM_ERR_NOMEM;
            break;
        }
        p.w = (double *)(void *)mem;
        p.start = (int64_t *)(void *)(mem + (size_t)dout * (size_t)p.n * sizeof(double));
        p.extra = (uint8_t *)(mem + (size_t)dout * ((size_t)p.n * sizeof(double) + sizeof(int64_t)));
        const float rr[2] = {roi ? roi[a] : 0, roi ? roi[R + a] : 1};
        const int pad = (p.n + 1) / 2;
        for (int64_t q = 0; q < dout; q++) {
            bool ex;
            double xo = resize2_orig(opt, (double)q, din, dout, scale[a], rr, &ex);
            if (!(fabs(xo) <= 0x1p50)) { /* a NaN or huge roi: far outside, never cast out of range */
                ex = ex || (opt & ISA_OPT_TF_CROP_AND_RESIZE);
                xo = xo < 0 ? -0x1p50 : 0x1p50;
            }
            const double fl = floor(xo);
            const double ratio = xo == fl ? 1 : xo - fl;
            double *w = p.w + q * p.n;
            resize2_coeffs(opt, ratio, scale[a], A, p.n, w);
            const double xp = xo + pad, pp = floor(xp), frac = xp - pp;
            int64_t off;
            if (p.n % 2 == 0)
                off = frac == 0 ? -(p.n / 2) : -(p.n / 2) + 1;
            else
                off = frac <= 0.5 ? -((p.n - 1) / 2) : -((p.n - 1) / 2) + 1;
            p.start[q] = (int64_t)pp + off - pad;
            p.extra[q] = ex;
            if (opt & ISA_OPT_EXCLUDE_OUTSIDE) {
                double sum = 0;
                for (int j = 0; j < p.n; j++) {
                    const int64_t ix = p.start[q] + j;
                    if (ix < 0 || ix >= din)
                        w[j] = 0;
                    sum += w[j];
                }
                if (sum == 0)
                    sum = 1;
                for (int j = 0; j < p.n; j++)
                    w[j] /= sum;
            }
        }
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < a; i++)
            outer *= cur[i];
        for (int i = a + 1; i < R; i++)
            inner *= cur[i];
        resize2_apply(&p, ext, buf[b], buf[b ^ 1], outer, din, dout, inner);
        b ^= 1;
        cur[a] = dout;
        dev_ktemp_free(k, mem, (size_t)dout, per);
    }
    if (!st) {
        for (int64_t i = 0; i < count; i++)
            if (x->dtype == TFVM_F32)
                ((float *)o)[i] = (float)buf[b][i];
            else
                ((double *)o)[i] = buf[b][i];
    }
    dev_ktemp_free(k, buf[0], (size_t)big, sizeof(double));
    dev_ktemp_free(k, buf[1], (size_t)big, sizeof(double));
    if (st) {
        dev_value_release(&r);
        return st;
    }
    *out = r;
    return TFVM_OK;
}
