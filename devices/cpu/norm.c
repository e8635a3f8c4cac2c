/* devices/cpu/norm.c — LRN: ONNX local response normalization across the
 * channels (axis 1) of x [N, C, ...], in double; LAYER_NORM and RMS_NORM:
 * each row of x normalized over its last axes, in one pass per row. */
#include "devices/cpu/vec.h"
#include "devices/cpu/kern.h"
#include "devices/cpu/par.h"
#include "isa/shape.h"

#include <math.h>
#include <string.h>

#define LRN_LOOP(T)                                                                        \
    do {                                                                                   \
        const T *xp = x->data;                                                             \
        T *op = o;                                                                         \
        for (int64_t n = 0; n < N; n++)                                                    \
            for (int64_t c = 0; c < C; c++)                                                \
                for (int64_t s = 0; s < S; s++) {                                          \
                    const int64_t a = c - before < 0 ? 0 : c - before;                     \
                    const int64_t b = c + after >= C ? C - 1 : c + after;                  \
                    double sq = 0;                                                         \
                    for (int64_t j = a; j <= b; j++) {                                     \
                        const double v = (double)xp[(n * C + j) * S + s];                  \
                        sq += v * v;                                                       \
                    }                                                                      \
                    const int64_t at = (n * C + c) * S + s;                                \
                    op[at] = (T)((double)xp[at] / pow(bias + alpha / size * sq, beta));    \
                }                                                                          \
    } while (0)

/* LRN (x, p = [size, alpha, beta, bias] f32): y = x / (bias + alpha / size *
 * sum of x^2 over channels c - floor((size-1)/2) .. c + ceil((size-1)/2))^beta. */
tfvm_status dev_cpu_lrn(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0], *p = &in[1];
    char s1[DEV_KSHAPE];
    if (!dev_kfloat(x->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "not defined on %s (floats only)",
                         tfvm_dtype_name((tfvm_dtype)x->dtype));
    if (p->dtype != TFVM_F32 || p->rank != 1 || p->count != 4)
        return dev_kfail(k, TFVM_ERR_TYPE, "parameters must be an f32 vector [size, alpha, beta, bias], got %s",
                         dev_kdesc(p, s1));
    if (x->rank < 2)
        return dev_kfail(k, TFVM_ERR_SHAPE, "x must be [N, C, ...] (rank >= 2), got %s", dev_kshape(x, s1));
    const float *pv = p->data;
    const double size = pv[0], alpha = pv[1], beta = pv[2], bias = pv[3];
    if (!(size >= 1 && size <= 65536) || size != floor(size))
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "size %g must be a whole number in 1..65536", size);
    const int64_t before = ((int64_t)size - 1) / 2, after = (int64_t)size / 2; /* floor and ceil of (size-1)/2 */
    const int64_t N = x->dims[0], C = x->dims[1];
    int64_t S = 1;
    for (int i = 2; i < x->rank; i++)
        S *= x->dims[i];
    dev_value r;
    void *o;
    tfvm_status st = dev_kresult(k, x->dtype, x->rank, x->dims, &r, &o);
    if (st)
        return st;
    if (x->count) {
        if (x->dtype == TFVM_F32)
            LRN_LOOP(float);
        else
            LRN_LOOP(double);
    }
    *out = r;
    return TFVM_OK;
}

/* ---- LAYER_NORM, RMS_NORM -------------------------------------------------------------
 * LAYER_NORM (x, scale, bias, eps): over each row of x's dims from the axis
 * on (D elements), mean m and variance v as REDUCE_MEAN gives them
 * (reduce.c's sums of the row and of (x - m)^2, in its order), then y = (x
 * - m) * (1 / sqrt(v + eps)) * scale + bias, each step rounded to x's dtype
 * as the instructions it replaces round it (SUB, MUL, REDUCE_MEAN, ADD,
 * SQRT, DIV, MUL, MUL, ADD): the same bits as those, in one pass over a row
 * that is in cache, rows split over the VM's workers past LN_PAR_ELEMS.
 * RMS_NORM (x, scale, eps) is the same without the centring and the bias:
 * m is 0 (x - 0 is x, -0 included) and nothing is added, the bits of
 * MUL(x, x) or POW(x, 2), REDUCE_MEAN, ADD, SQRT, DIV, MUL, MUL. */
#define LN_PAR_ELEMS (INT64_C(1) << 13)

typedef struct ln_rows {
    const void *x, *scale, *bias; /* scale: D elements; bias: D elements, or NULL (RMS_NORM) */
    void *y;
    int64_t d;
    bool center;
    double eps;
} ln_rows;

/* y = (x - m) * inv * sc + bi over elements [i, n), VL at a time, each
 * step rounded to f32 (no sum where bi is NULL); returns where it stopped
 * (the elements past the last whole vector are left). One body for every
 * width: GCC vectors of 4 (portable), 8 (AVX2), 16 (AVX-512) lanes. */
#define LN_AFFINE_VEC(SFX, TARGET, VL)                                                                       \
    typedef float ln_v##SFX __attribute__((vector_size(4 * (VL))));                                          \
    TARGET static int64_t ln_affine_##SFX(float *restrict y, const float *restrict x, float m, float inv,    \
                                          const float *restrict sc, const float *restrict bi, int64_t i,     \
                                          int64_t n)                                                         \
    {                                                                                                        \
        for (; i + (VL) <= n; i += (VL)) {                                                                   \
            ln_v##SFX xv, sv, bv, w;                                                                         \
            memcpy(&xv, x + i, sizeof xv);                                                                   \
            memcpy(&sv, sc + i, sizeof sv);                                                                  \
            w = (xv - m) * inv * sv;                                                                         \
            if (bi) {                                                                                        \
                memcpy(&bv, bi + i, sizeof bv);                                                              \
                w = w + bv;                                                                                  \
            }                                                                                                \
            memcpy(y + i, &w, sizeof w);                                                                     \
        }                                                                                                    \
        return i;                                                                                            \
    }
LN_AFFINE_VEC(4, , 4)
#if defined(__x86_64__) && defined(__GNUC__)
LN_AFFINE_VEC(8, __attribute__((target("avx2"))), 8)
LN_AFFINE_VEC(16, __attribute__((target("avx512f"))), 16)
#endif
#undef LN_AFFINE_VEC

/* ln_affine_* over n elements, the widest vectors the CPU has first */
static void ln_affine_f32(float *restrict y, const float *restrict x, float m, float inv, const float *restrict sc,
                          const float *restrict bi, int64_t n)
{
    int64_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512f"))
        i = ln_affine_16(y, x, m, inv, sc, bi, i, n);
    else if (__builtin_cpu_supports("avx2"))
        i = ln_affine_8(y, x, m, inv, sc, bi, i, n);
#endif
    for (i = ln_affine_4(y, x, m, inv, sc, bi, i, n); i < n; i++) {
        const float w = (x[i] - m) * inv * sc[i];
        y[i] = bi ? w + bi[i] : w;
    }
}

static void ln_affine_f64(double *restrict y, const double *restrict x, double m, double inv,
                          const double *restrict sc, const double *restrict bi, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const double w = (x[i] - m) * inv * sc[i];
        y[i] = bi ? w + bi[i] : w;
    }
}

#define LN_ROWS(T, MEAN, MEAN_SQ, SQRT, AFFINE)                                            \
    do {                                                                                   \
        const T eps = (T)j->eps;                                                           \
        for (size_t r = b; r < e; r++) {                                                   \
            const T *xs = (const T *)j->x + (int64_t)r * j->d;                             \
            const T m = j->center ? MEAN(xs, j->d) : 0, v = MEAN_SQ(xs, m, j->d);        \
            const T s = SQRT(v + eps), inv = (T)1 / s;                                     \
            AFFINE((T *)j->y + (int64_t)r * j->d, xs, m, inv, j->scale, j->bias, j->d);     \
        }                                                                                  \
    } while (0)

static void ln_f32(void *arg, size_t b, size_t e)
{
    const ln_rows *j = arg;
    LN_ROWS(float, dev_mean_run_f32, dev_mean_sq_run_f32, sqrtf, ln_affine_f32);
}

static void ln_f64(void *arg, size_t b, size_t e)
{
    const ln_rows *j = arg;
    LN_ROWS(double, dev_mean_run_f64, dev_mean_sq_run_f64, sqrt, ln_affine_f64);
}

tfvm_status dev_cpu_layer_norm(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    const bool ln = k->op == ISA_LAYER_NORM;
    const int n_in = ln ? 4 : 3, n_par = ln ? 2 : 1; /* scale (and bias), then eps */
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    if (!dev_kfloat(x->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "not defined on %s (floats only)", tfvm_dtype_name((tfvm_dtype)x->dtype));
    for (int i = 1; i < n_in; i++)
        if (in[i].dtype != x->dtype)
            return dev_kfail(k, TFVM_ERR_TYPE, "dtype mismatch: %s and %s", dev_kdesc(x, s1), dev_kdesc(&in[i], s2));
    int axis;
    tfvm_status st = dev_kaxis(k, x, &axis);
    if (st)
        return st;
    for (int i = 1; i <= n_par; i++)
        if (!isa_norm_param_fits(in[i].rank, in[i].dims, x->rank, x->dims, axis, false))
            return dev_kfail(k, TFVM_ERR_SHAPE, "%s %s must be one element or x's dims from axis %d on (x %s)",
                             i == 1 ? "scale" : "bias", dev_kshape(&in[i], s1), axis, dev_kshape(x, s2));
    if (in[n_in - 1].count != 1)
        return dev_kfail(k, TFVM_ERR_SHAPE, "eps must be one element, got %s", dev_kshape(&in[n_in - 1], s1));
    int64_t d = 1;
    for (int i = axis; i < x->rank; i++)
        d *= x->dims[i];
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, x->rank, x->dims, &r, &o)))
        return st;
    if (x->count == 0) {
        *out = r;
        return TFVM_OK;
    }
    /* a one-element scale or bias as D of them, so that a row is one loop */
    const size_t esz = dev_kesize(x->dtype);
    void *wide[2] = {NULL, NULL};
    const void *par[2] = {in[1].data, ln ? in[2].data : NULL};
    for (int i = 0; i < n_par; i++) {
        if (in[1 + i].count != 1 || d == 1)
            continue;
        if (!(wide[i] = dev_ktemp(k, (size_t)d, esz))) {
            if (wide[0])
                dev_ktemp_free(k, wide[0], (size_t)d, esz);
            dev_value_release(&r);
            return TFVM_ERR_NOMEM;
        }
        for (int64_t q = 0; q < d; q++)
            memcpy((char *)wide[i] + q * (int64_t)esz, in[1 + i].data, esz);
        par[i] = wide[i];
    }
    const int64_t rows = x->count / d;
    ln_rows job = {x->data, par[0], par[1], o, d, ln, dev_kget_f64(&in[n_in - 1], 0)};
    const dev_par_fn fn = x->dtype == TFVM_F32 ? ln_f32 : ln_f64;
    if (rows > 1 && x->count >= LN_PAR_ELEMS && dev_par_width() > 1)
        dev_par_for((size_t)rows, dev_kgrain(rows, d, LN_PAR_ELEMS / 2, 1), fn, &job);
    else
        fn(&job, 0, (size_t)rows);
    for (int i = 0; i < 2; i++)
        if (wide[i])
            dev_ktemp_free(k, wide[i], (size_t)d, esz);
    *out = r;
    return TFVM_OK;
}
