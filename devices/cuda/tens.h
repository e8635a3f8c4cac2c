/* devices/cuda/tens.h — what one output element of each CUDA tensor kernel
 * computes (the tc_backend functions from `copy` on, devices/cuda/abi.h),
 * shared by the GPU kernels (backend.cu) and the host stand-in the tests run
 * (test/unit/fake_cuda.c), as elem.h is for the elementwise ops: each GPU
 * kernel is a grid-stride loop over these, the stand-in a plain loop. The
 * semantics are the CPU kernels' (devices/cpu/conv.c, reduce.c, shape.c,
 * elementwise.c, fused.c), written out for one element. C11 and CUDA C++. */
#ifndef TFVM_CUDA_TENS_H
#define TFVM_CUDA_TENS_H

#include "devices/cuda/elem.h"

/* ---- im2col ----------------------------------------------------------------------
 * Column element i of col [nimg][C * KH * KW][OH * OW] for images from n0:
 * its offset in x, or -1 where the window lies in the zero padding. */
TC_FN int64_t tc_im2col_src(const tc_conv *c, int64_t n0, int64_t i)
{
    const int64_t P = c->OH * c->OW, K = c->C * c->KH * c->KW;
    const int64_t p = i % P, rest = i / P, k = rest % K, n = n0 + rest / K;
    const int64_t ow = p % c->OW, oh = p / c->OW;
    const int64_t kw = k % c->KW, kh = (k / c->KW) % c->KH, ch = k / (c->KW * c->KH);
    const int64_t h = oh * c->sh - c->pt + kh * c->dh, w = ow * c->sw - c->pl + kw * c->dw;
    if (h < 0 || h >= c->H || w < 0 || w >= c->W)
        return -1;
    return ((n * c->C + ch) * c->H + h) * c->W + w;
}

/* ---- Pooling ---------------------------------------------------------------------
 * Output element i of y [N, C, OH, OW]: conv.c's general window loop. Elements
 * outside x are skipped; the average divides by the elements of x in the
 * window, or with count_include_pad by the window positions inside the padded
 * input; a NaN in the window makes the max NaN; a window over no element of x
 * gives LOWEST (max) or 0/0 (average without count_include_pad). */
#define TC_POOL_ONE(NAME, T, LOWEST, IS_NAN, NANV)                                                    \
    TC_FN T NAME(const tc_pool *p, const T *x, int64_t i)                               \
    {                                                                                   \
        const int64_t ow = i % p->OW, oh = (i / p->OW) % p->OH, plane = i / (p->OW * p->OH); \
        const T *xs = x + plane * p->H * p->W;                                          \
        const int64_t h0 = oh * p->sh - p->pt, w0 = ow * p->sw - p->pl;                 \
        T acc = p->avg ? (T)0 : (T)(LOWEST);                                            \
        int bad = 0;                                                                    \
        int64_t n = 0, ph = 0, pw = 0;                                                  \
        for (int64_t a = 0; a < p->kh; a++) {                                           \
            const int64_t h = h0 + a * p->dh;                                           \
            ph += h < p->H + p->pb;                                                     \
            if (h < 0 || h >= p->H)                                                     \
                continue;                                                               \
            for (int64_t b = 0; b < p->kw; b++) {                                       \
                const int64_t w = w0 + b * p->dw;                                       \
                if (w < 0 || w >= p->W)                                                 \
                    continue;                                                           \
                const T v = xs[h * p->W + w];                                           \
                if (p->avg)                                                             \
                    acc += v;                                                           \
                else                                                                    \
                    acc = v > acc ? v : acc;                                            \
                bad |= IS_NAN(v);                                                       \
                n++;                                                                    \
            }                                                                           \
        }                                                                               \
        for (int64_t b = 0; b < p->kw; b++)                                             \
            pw += w0 + b * p->dw < p->W + p->pr;                                        \
        if (p->avg)                                                                     \
            return (T)(acc / (T)(p->count_include_pad ? ph * pw : n));                  \
        return bad ? NANV : acc;                                                        \
    }
#define TC_IS_NAN(v) ((v) != (v))
#define TC_NO_NAN(v) 0
TC_POOL_ONE(tc_pool_f32, float, -INFINITY, TC_IS_NAN, (float)NAN)
TC_POOL_ONE(tc_pool_f64, double, -INFINITY, TC_IS_NAN, (double)NAN)
TC_POOL_ONE(tc_pool_i32, int32_t, INT32_MIN, TC_NO_NAN, acc)
TC_POOL_ONE(tc_pool_i64, int64_t, INT64_MIN, TC_NO_NAN, acc)

/* ---- Reductions ------------------------------------------------------------------
 * Output element o: reduce.c's rules. Sums and means accumulate in double for
 * floats (the f32 mean is (float)(sum / n)), integer sums wrap; MAX and MIN
 * keep the first of equal elements and give NaN when one is NaN; on bool MAX
 * is any and MIN all (0/1 bytes compared as numbers). */
TC_FN int64_t tc_reduce_base(const tc_reduce *r, int64_t o) { return tc_offset(o, r->nk, r->kdims, r->kstrides); }
TC_FN int64_t tc_reduce_at(const tc_reduce *r, int64_t j) { return tc_offset(j, r->nr, r->rdims, r->rstrides); }

#define TC_REDUCE_FLOAT(NAME, T)                                                        \
    TC_FN T NAME(int op, const tc_reduce *r, const T *x, int64_t o)                     \
    {                                                                                   \
        const T *xs = x + tc_reduce_base(r, o);                                         \
        if (op == TC_RED_SUM || op == TC_RED_MEAN) {                                    \
            double acc = 0;                                                             \
            for (int64_t j = 0; j < r->rcount; j++)                                     \
                acc += (double)xs[tc_reduce_at(r, j)];                                  \
            return (T)(op == TC_RED_MEAN ? acc / (double)r->rcount : acc);              \
        }                                                                               \
        T acc = xs[0];                                                                  \
        int nan = acc != acc;                                                           \
        for (int64_t j = 1; j < r->rcount; j++) {                                       \
            const T v = xs[tc_reduce_at(r, j)];                                         \
            nan |= v != v;                                                              \
            acc = (op == TC_RED_MAX ? v > acc : v < acc) ? v : acc;                     \
        }                                                                               \
        return nan ? (T)NAN : acc;                                                      \
    }
TC_REDUCE_FLOAT(tc_reduce_f32, float)
TC_REDUCE_FLOAT(tc_reduce_f64, double)

#define TC_REDUCE_INT(NAME, T, U)                                                       \
    TC_FN T NAME(int op, const tc_reduce *r, const T *x, int64_t o)                     \
    {                                                                                   \
        const T *xs = x + tc_reduce_base(r, o);                                         \
        if (op == TC_RED_SUM) {                                                         \
            U acc = 0;                                                                  \
            for (int64_t j = 0; j < r->rcount; j++)                                     \
                acc += (U)xs[tc_reduce_at(r, j)];                                       \
            return (T)acc;                                                              \
        }                                                                               \
        T acc = xs[0];                                                                  \
        for (int64_t j = 1; j < r->rcount; j++) {                                       \
            const T v = xs[tc_reduce_at(r, j)];                                         \
            acc = (op == TC_RED_MAX ? v > acc : v < acc) ? v : acc;                     \
        }                                                                               \
        return acc;                                                                     \
    }
TC_REDUCE_INT(tc_reduce_b, uint8_t, uint8_t)
TC_REDUCE_INT(tc_reduce_i32, int32_t, uint32_t)
TC_REDUCE_INT(tc_reduce_i64, int64_t, uint64_t)

/* Which (reduction, dtype) pairs the backend has: SUM on numbers, MEAN on
 * floats, MAX and MIN on every GPU dtype. */
TC_FN int tc_reduce_has(int op, int dtype)
{
    if (op == TC_RED_MEAN)
        return dtype == TC_F32 || dtype == TC_F64;
    if (op == TC_RED_SUM)
        return dtype >= TC_I32 && dtype <= TC_F64;
    return (op == TC_RED_MAX || op == TC_RED_MIN) && dtype >= TC_BOOL && dtype <= TC_F64;
}

/* ---- Softmax ---------------------------------------------------------------------
 * Row j of x [outer, n, inner] (j = a * inner + b): x - max, exp, the sum in
 * double; LOG_SOFTMAX x - max - log(sum), in double. A NaN in the row makes
 * the max NaN and so every element. */
#define TC_SOFTMAX_ROW(NAME, T, EXP)                                                    \
    TC_FN void NAME(int log_of, int64_t n, int64_t inner, const T *x, T *y, int64_t j)  \
    {                                                                                   \
        const int64_t a = j / inner, b = j % inner;                                     \
        const T *xs = x + a * n * inner + b;                                            \
        T *ys = y + a * n * inner + b;                                                  \
        T m = xs[0];                                                                    \
        for (int64_t l = 1; l < n && m == m; l++) {                                     \
            const T v = xs[l * inner];                                                  \
            m = v > m || v != v ? v : m;                                                \
        }                                                                               \
        double s = 0;                                                                   \
        for (int64_t l = 0; l < n; l++)                                                 \
            s += log_of ? exp((double)xs[l * inner] - (double)m) : (double)EXP(xs[l * inner] - m); \
        if (log_of) {                                                                   \
            const double ls = log(s);                                                   \
            for (int64_t l = 0; l < n; l++)                                             \
                ys[l * inner] = (T)((double)xs[l * inner] - (double)m - ls);            \
            return;                                                                     \
        }                                                                               \
        const T scale = (T)(1.0 / s);                                                   \
        for (int64_t l = 0; l < n; l++)                                                 \
            ys[l * inner] = EXP(xs[l * inner] - m) * scale;                             \
    }
TC_SOFTMAX_ROW(tc_softmax_f32, float, expf)
TC_SOFTMAX_ROW(tc_softmax_f64, double, exp)

/* ---- Layer normalization -------------------------------------------------------
 * Row j of x [rows, d] (LAYER_NORM; RMS_NORM when !center: m is 0): the
 * mean and the mean of (x - m)^2, each summed in double in order and
 * rounded to T, then (x - m) * (1 / sqrt(v + eps)) * scale + bias, each step
 * rounded to T; scale and bias read through x's dims (element j * d + l) at
 * sd / bd with strides ss / bs, or the scalars s1 / b1 where sd / bd is
 * NULL. */
#define TC_LAYER_NORM_ROW(NAME, T, SQRT)                                                \
    TC_FN void NAME(int center, int rank, const int64_t *dims, int64_t d, const T *x, const T *sd, \
                    const int64_t *ss, T s1, const T *bd, const int64_t *bs, T b1, T eps, T *y, int64_t j) \
    {                                                                                   \
        const T *xs = x + j * d;                                                        \
        double s = 0, q = 0;                                                            \
        for (int64_t l = 0; l < d && center; l++)                                       \
            s += (double)xs[l];                                                         \
        const T m = center ? (T)(s / (double)d) : (T)0;                                 \
        for (int64_t l = 0; l < d; l++) {                                               \
            const T c = xs[l] - m;                                                      \
            q += (double)(c * c);                                                       \
        }                                                                               \
        const T v = (T)(q / (double)d), inv = (T)1 / SQRT(v + eps);                     \
        for (int64_t l = 0; l < d; l++) {                                               \
            const int64_t i = j * d + l;                                                \
            const T sc = sd ? sd[tc_offset(i, rank, dims, ss)] : s1;                    \
            const T bi = bd ? bd[tc_offset(i, rank, dims, bs)] : b1;                    \
            const T n = (xs[l] - m) * inv, w = n * sc;                                  \
            y[i] = w + bi;                                                              \
        }                                                                               \
    }
TC_LAYER_NORM_ROW(tc_layer_norm_f32, float, sqrtf)
TC_LAYER_NORM_ROW(tc_layer_norm_f64, double, sqrt)

/* ---- Gather ----------------------------------------------------------------------
 * Output element i of y [outer, nidx, inner]: its offset in x [outer, d,
 * inner], or -1 when its index lies outside [-d, d). */
TC_FN int64_t tc_gather_src(int idx_dtype, int64_t d, int64_t inner, int64_t nidx, const void *idx, int64_t i)
{
    const int64_t b = i % inner, t = (i / inner) % nidx, a = i / (inner * nidx);
    int64_t v = idx_dtype == TC_I32 ? (int64_t)((const int32_t *)idx)[t] : ((const int64_t *)idx)[t];
    if (v < -d || v >= d)
        return -1;
    if (v < 0)
        v += d;
    return (a * d + v) * inner + b;
}

/* ---- Cast ------------------------------------------------------------------------
 * elementwise.c's CAST between the GPU dtypes: to bool x != 0; integers
 * narrow by wrapping (through the unsigned type); a float to an integer is
 * truncated toward zero and must fit (FITS_I32/FITS_I64), else *bad is set.
 * Elements are read and written as double or int64_t. */
TC_FN double tc_cast_read_f(int dt, const void *x, int64_t i)
{
    switch (dt) {
    case TC_BOOL: return (double)((const uint8_t *)x)[i];
    case TC_I32: return (double)((const int32_t *)x)[i];
    case TC_I64: return (double)((const int64_t *)x)[i];
    case TC_F32: return (double)((const float *)x)[i];
    default: return ((const double *)x)[i];
    }
}

TC_FN int64_t tc_cast_read_i(int dt, const void *x, int64_t i)
{
    switch (dt) {
    case TC_BOOL: return (int64_t)((const uint8_t *)x)[i];
    case TC_I32: return (int64_t)((const int32_t *)x)[i];
    default: return ((const int64_t *)x)[i];
    }
}

TC_FN void tc_cast_one(int from, int to, const void *x, void *y, int64_t i, int *bad)
{
    const int ffloat = from == TC_F32 || from == TC_F64;
    if (to == TC_BOOL) {
        ((uint8_t *)y)[i] = (uint8_t)(ffloat ? tc_cast_read_f(from, x, i) != 0 : tc_cast_read_i(from, x, i) != 0);
        return;
    }
    if (to == TC_F32) {
        /* i64 to f32 rounds once, as C's conversion; f64 to f32 too */
        ((float *)y)[i] = from == TC_I64 ? (float)((const int64_t *)x)[i] : (float)tc_cast_read_f(from, x, i);
        return;
    }
    if (to == TC_F64) {
        ((double *)y)[i] = tc_cast_read_f(from, x, i);
        return;
    }
    if (ffloat) {
        const double v = tc_cast_read_f(from, x, i);
        const int fits = to == TC_I32 ? v > -2147483649.0 && v < 2147483648.0
                                      : v >= -9223372036854775808.0 && v < 9223372036854775808.0;
        if (!fits) {
            *bad = 1;
            return;
        }
        if (to == TC_I32)
            ((int32_t *)y)[i] = (int32_t)v;
        else
            ((int64_t *)y)[i] = (int64_t)v;
        return;
    }
    const int64_t v = tc_cast_read_i(from, x, i);
    if (to == TC_I32)
        ((int32_t *)y)[i] = (int32_t)(uint32_t)(uint64_t)v;
    else
        ((int64_t *)y)[i] = v;
}

/* ---- Activations (bias_act) ------------------------------------------------------
 * docs/isa.md's table: each exactly the elementwise ops shown, in that
 * order, with elem.h's semantics and constants in y's dtype. */
#define TC_ACT(NAME, T, BIN, UN)                                                        \
    TC_FN T NAME(int act, T y)                                                          \
    {                                                                                   \
        switch (act) {                                                                  \
        case TC_ACT_RELU: return UN(TC_RELU, y);                                        \
        case TC_ACT_SIGMOID: return UN(TC_SIGMOID, y);                                  \
        case TC_ACT_TANH: return UN(TC_TANH, y);                                        \
        case TC_ACT_SILU: return BIN(TC_MUL, y, UN(TC_SIGMOID, y));                     \
        case TC_ACT_GELU:                                                               \
            return BIN(TC_MUL, BIN(TC_MUL, y, BIN(TC_ADD, UN(TC_ERF, BIN(TC_DIV, y, (T)1.4142135623730951)), (T)1)), \
                       (T)0.5);                                                         \
        case TC_ACT_HARDSIGMOID:                                                        \
            return BIN(TC_MAX, BIN(TC_MIN, BIN(TC_ADD, BIN(TC_MUL, y, (T)(1.0 / 6.0)), (T)0.5), (T)1), (T)0); \
        case TC_ACT_HARDSWISH:                                                          \
            return BIN(TC_MUL, y,                                                       \
                       BIN(TC_MAX, BIN(TC_MIN, BIN(TC_ADD, BIN(TC_MUL, y, (T)(1.0 / 6.0)), (T)0.5), (T)1), (T)0)); \
        case TC_ACT_RELU6: return BIN(TC_MIN, BIN(TC_MAX, y, (T)0), (T)6);              \
        case TC_ACT_GELU_TANH: {                                                        \
            const T inner = BIN(TC_MUL, BIN(TC_ADD, y, BIN(TC_MUL, BIN(TC_MUL, y, BIN(TC_MUL, y, y)), (T)0.044715)), \
                                (T)0.7978845608028654);                                 \
            return BIN(TC_MUL, BIN(TC_MUL, y, BIN(TC_ADD, UN(TC_TANH, inner), (T)1)), (T)0.5); \
        }                                                                               \
        case TC_ACT_GELU_NEW: {                                                         \
            const T inner = BIN(TC_MUL, BIN(TC_ADD, y, BIN(TC_MUL, BIN(TC_POW, y, (T)3), (T)0.044715)), \
                                (T)0.7978845608028654);                                 \
            return BIN(TC_MUL, BIN(TC_MUL, y, (T)0.5), BIN(TC_ADD, UN(TC_TANH, inner), (T)1)); \
        }                                                                               \
        default: return y;                                                              \
        }                                                                               \
    }
TC_ACT(tc_act_f32, float, tc_binary_f32, tc_unary_f32)
TC_ACT(tc_act_f64, double, tc_binary_f64, tc_unary_f64)

#endif
