/* devices/cpu/reduce.c — the ops that fold or scan an axis or a set of axes:
 * SOFTMAX and LOG_SOFTMAX (stable: x - max), REDUCE_SUM/MEAN/MAX/MIN/PROD
 * with keepdims, ARGMAX/ARGMIN, CUMSUM. */
#include "devices/cpu/vec.h"
#include "devices/cpu/kern.h"
#include "devices/cpu/act.h"
#include "devices/cpu/par.h"

#include <math.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

/* dims before the axis, along it, after it. */
static void split_axis(const dev_kview *x, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
    int64_t o = 1, i = 1;
    for (int j = 0; j < axis; j++)
        o *= x->dims[j];
    for (int j = axis + 1; j < x->rank; j++)
        i *= x->dims[j];
    *outer = o;
    *len = x->dims[axis];
    *inner = i;
}

/* ---- SOFTMAX, LOG_SOFTMAX -------------------------------------------------------------
 * Along the axis: m = max(x); softmax = exp(x - m) / sum, log_softmax =
 * x - m - log(sum), the sum of exp(x - m) taken in double. */
#define SOFTMAX_LOOP(T, EXP, LOG)                                                          \
    do {                                                                                   \
        const T *xs = x->data;                                                             \
        T *os = o;                                                                         \
        for (int64_t a = 0; a < outer; a++)                                                \
            for (int64_t b = 0; b < inner; b++) {                                          \
                const T *xp = xs + a * len * inner + b;                                    \
                T *op = os + a * len * inner + b;                                          \
                T m = xp[0];                                                               \
                for (int64_t l = 1; l < len; l++)                                          \
                    m = xp[l * inner] > m ? xp[l * inner] : m;                             \
                double sum = 0;                                                            \
                for (int64_t l = 0; l < len; l++) {                                        \
                    const T e = EXP(xp[l * inner] - m);                                    \
                    if (!(LOG))                                                            \
                        op[l * inner] = e;                                                 \
                    sum += (double)e;                                                      \
                }                                                                          \
                if (LOG) {                                                                 \
                    const double lse = log(sum);                                           \
                    for (int64_t l = 0; l < len; l++)                                      \
                        op[l * inner] = (T)((double)(xp[l * inner] - m) - lse);            \
                } else {                                                                   \
                    const T scale = (T)(1.0 / sum);                                        \
                    for (int64_t l = 0; l < len; l++)                                      \
                        op[l * inner] *= scale;                                            \
                }                                                                          \
            }                                                                              \
    } while (0)

/* The sum of a run, in double: eight partial sums (one vector's worth each
 * way), so the adds do not wait on each other; then their total and the
 * tail. A run of 3136 (a 56x56 plane's global average) took a dependent
 * add per element. f32 runs keep the eight sums in two vectors of four
 * doubles, AVX2 where the CPU has it (GCC spilled the array to the stack
 * each step: 0.44 ns an element on EfficientNet's squeeze-excite pools);
 * the same sums, so the same bits on every path. Each is written once for
 * two element maps E: the elements themselves, and the squares of their
 * differences from m, in x's dtype (what REDUCE_MEAN of MUL(c, c) for c =
 * SUB(x, m) sums: LAYER_NORM's variance). */
#define RED_ID(v, m) (v)
#define RED_SQ(v, m) (((v) - (m)) * ((v) - (m)))
#define SUM_RUN(NAME, T, E)                                                                \
    static double NAME(const T *x, T m, int64_t n)                                         \
    {                                                                                      \
        (void)m;                                                                           \
        double p[8] = {0};                                                                 \
        int64_t j = 0;                                                                     \
        for (; j + 8 <= n; j += 8)                                                         \
            for (int l = 0; l < 8; l++)                                                    \
                p[l] += (double)E(x[j + l], m);                                            \
        double s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));      \
        for (; j < n; j++)                                                                 \
            s += (double)E(x[j], m);                                                       \
        return s;                                                                          \
    }
typedef double red_v4d __attribute__((vector_size(32)));
#define SUM_RUN_F32(NAME, TARGET, E)                                                       \
    TARGET static double NAME(const float *x, float m, int64_t n)                          \
    {                                                                                      \
        (void)m;                                                                           \
        red_v4d lo = {0}, hi = {0};                                                        \
        int64_t j = 0;                                                                     \
        for (; j + 8 <= n; j += 8) {                                                       \
            lo += (red_v4d){E(x[j], m), E(x[j + 1], m), E(x[j + 2], m), E(x[j + 3], m)};   \
            hi += (red_v4d){E(x[j + 4], m), E(x[j + 5], m), E(x[j + 6], m), E(x[j + 7], m)}; \
        }                                                                                  \
        double s = ((lo[0] + lo[1]) + (lo[2] + lo[3])) + ((hi[0] + hi[1]) + (hi[2] + hi[3])); \
        for (; j < n; j++)                                                                 \
            s += (double)E(x[j], m);                                                       \
        return s;                                                                          \
    }
SUM_RUN_F32(sum_f32_v2, , RED_ID)
SUM_RUN_F32(sumsq_f32_v2, , RED_SQ)
#if defined(__x86_64__) && defined(__GNUC__)
SUM_RUN_F32(sum_f32_avx2, __attribute__((target("avx2"))), RED_ID)
SUM_RUN_F32(sumsq_f32_avx2, __attribute__((target("avx2"))), RED_SQ)
static double sum_run_float(const float *x, int64_t n)
{
    return __builtin_cpu_supports("avx2") ? sum_f32_avx2(x, 0, n) : sum_f32_v2(x, 0, n);
}
static double sumsq_run_float(const float *x, float m, int64_t n)
{
    return __builtin_cpu_supports("avx2") ? sumsq_f32_avx2(x, m, n) : sumsq_f32_v2(x, m, n);
}
#else
static double sum_run_float(const float *x, int64_t n) { return sum_f32_v2(x, 0, n); }
static double sumsq_run_float(const float *x, float m, int64_t n) { return sumsq_f32_v2(x, m, n); }
#endif
SUM_RUN(sum_run_d, double, RED_ID)
SUM_RUN(sumsq_run_double, double, RED_SQ)
static double sum_run_double(const double *x, int64_t n) { return sum_run_d(x, 0, n); }

/* REDUCE_MEAN's mean of a run of n > 0 (an accumulator of 0 plus the run's
 * sum, over n, rounded to x's dtype), and of the squares of x - m: the bits
 * of REDUCE_MEAN over the run and of REDUCE_MEAN of MUL(SUB(x, m), SUB(x, m)) */
float dev_mean_run_f32(const float *x, int64_t n)
{
    double a = 0;
    a += sum_run_float(x, n);
    return (float)(a / (double)n);
}
float dev_mean_sq_run_f32(const float *x, float m, int64_t n)
{
    double a = 0;
    a += sumsq_run_float(x, m, n);
    return (float)(a / (double)n);
}
double dev_mean_run_f64(const double *x, int64_t n)
{
    double a = 0;
    a += sum_run_double(x, n);
    return a / (double)n;
}
double dev_mean_sq_run_f64(const double *x, double m, int64_t n)
{
    double a = 0;
    a += sumsq_run_double(x, m, n);
    return a / (double)n;
}
/* The largest of x[0, n), n >= 1, by eight running maxima (AVX2 where the
 * CPU has it; GCC's generic lowering of the comparison without it was a
 * branch per lane): x - max is then at most 0 wherever it is a number. A
 * NaN in x makes every exp and so the whole softmax NaN, whichever maximum
 * it leaves. */
static float max_f32_scalar(const float *x, int64_t n)
{
    float m = x[0];
    for (int64_t j = 1; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static float max_f32_avx2(const float *x, int64_t n)
{
    __m256 a = _mm256_set1_ps(-INFINITY), b = a;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        a = _mm256_max_ps(a, _mm256_loadu_ps(x + j));
        b = _mm256_max_ps(b, _mm256_loadu_ps(x + j + 8));
    }
    a = _mm256_max_ps(a, b);
    if (j + 8 <= n) {
        a = _mm256_max_ps(a, _mm256_loadu_ps(x + j));
        j += 8;
    }
    const __m128 h = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    float l[4], m;
    _mm_storeu_ps(l, h);
    m = l[0] > l[1] ? l[0] : l[1];
    m = l[2] > m ? l[2] : m;
    m = l[3] > m ? l[3] : m;
    for (; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}
/* AVX-512: two running maxima of 16 lanes (a softmax row of 128 took 30 ns
 * through the one dependent blend chain above: a third of the softmax) */
__attribute__((target("avx512f"))) static float max_f32_avx512(const float *x, int64_t n)
{
    __m512 a = _mm512_set1_ps(-INFINITY), b = a;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        a = _mm512_max_ps(a, _mm512_loadu_ps(x + j));
        b = _mm512_max_ps(b, _mm512_loadu_ps(x + j + 16));
    }
    for (; j < n; j += 16) {
        const __mmask16 k = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1);
        a = _mm512_max_ps(a, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, x + j));
    }
    return _mm512_reduce_max_ps(_mm512_max_ps(a, b));
}
/* The largest element where x holds no NaN (with one, any result: the
 * softmax of that row is NaN whatever maximum it subtracts) */
static float max_run_f32(const float *x, int64_t n)
{
    return __builtin_cpu_supports("avx512f") ? max_f32_avx512(x, n)
           : __builtin_cpu_supports("avx2") ? max_f32_avx2(x, n)
                                            : max_f32_scalar(x, n);
}
#else
static float max_run_f32(const float *x, int64_t n) { return max_f32_scalar(x, n); }
#endif

/* o[i] *= s from i = j on, VL lanes at a time (GCC vectors), as far as
 * whole vectors go before n; returns where it stopped */
#define SCALE_VEC(SFX, TARGET, VL)                                                             \
    typedef float red_v##SFX __attribute__((vector_size(4 * (VL))));                          \
    TARGET static int64_t scale_f32_##SFX(float *o, int64_t j, int64_t n, float s)           \
    {                                                                                          \
        for (; j + (VL) <= n; j += (VL)) {                                                     \
            red_v##SFX v;                                                                      \
            memcpy(&v, o + j, sizeof v);                                                       \
            v = v * s;                                                                         \
            memcpy(o + j, &v, sizeof v);                                                       \
        }                                                                                      \
        return j;                                                                              \
    }
#if defined(__x86_64__) && defined(__GNUC__)
SCALE_VEC(8, __attribute__((target("avx2"))), 8)
SCALE_VEC(16, __attribute__((target("avx512f"))), 16)
#endif
#undef SCALE_VEC

/* o[j] *= s: the softmax's scale, 16 or 8 lanes at a time where the CPU has them */
static void scale_f32(float *o, int64_t n, float s)
{
    int64_t j = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512f"))
        j = scale_f32_16(o, j, n, s);
    else if (__builtin_cpu_supports("avx2"))
        j = scale_f32_8(o, j, n, s);
#endif
    for (; j < n; j++)
        o[j] *= s;
}

/* Rows [b, e) of a softmax over f32 rows of n (the last axis): exp(x - max)
 * with act.c's vector exp (what EXP of SUB gives) and its sum in double
 * (sum_run_float's order) in one pass (dev_expf_sub_sum), then the scale.
 * Rows are split over threads past SOFTMAX_PAR_ELEMS elements in all (a
 * layer's attention scores, [heads, T, T]); each row alone, so the same
 * bits. */
#define SOFTMAX_PAR_ELEMS (INT64_C(1) << 13)
typedef struct softmax_rows {
    const float *x;
    float *o;
    int64_t n;
} softmax_rows;

static void softmax_rows_chunk(void *arg, size_t b, size_t e)
{
    const softmax_rows *j = arg;
    const int64_t len = j->n;
    for (size_t r = b; r < e; r++) {
        const float *xs = j->x + (int64_t)r * len;
        float *os = j->o + (int64_t)r * len;
        const float m = max_run_f32(xs, len);
        scale_f32(os, len, (float)(1.0 / dev_expf_sub_sum(os, xs, m, (size_t)len)));
    }
}

tfvm_status dev_cpu_softmax(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    if (!dev_kfloat(x->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "not defined on %s (floats only)",
                         tfvm_dtype_name((tfvm_dtype)x->dtype));
    int axis;
    tfvm_status st = dev_kaxis(k, x, &axis);
    if (st)
        return st;
    int64_t outer, len, inner;
    split_axis(x, axis, &outer, &len, &inner);
    dev_value r;
    void *o;
    const bool log_of = k->op == ISA_LOG_SOFTMAX, rows = len > 0 && x->dtype == TFVM_F32 && inner == 1 && !log_of;
    /* Rows written over x where the call may (dev_kview_overwritable): each
     * row's elements are read before they are written. A large softmax
     * (Whisper's attention, [4, 1500, 1500]) then brings no fresh block's
     * 36 MB in from memory only to overwrite it. */
    tfvm_tensor *t = rows ? dev_kview_overwritable(k, x) : NULL;
    if (t) {
        r = (dev_value){.dtype = x->dtype, .is_tensor = 1, .u.t = tfvm_tensor_ref(t)};
        o = t->data;
    } else if ((st = dev_kresult(k, x->dtype, x->rank, x->dims, &r, &o))) {
        return st;
    }
    if (rows) {
        /* the last axis of f32 (attention's scores, a classifier's logits) */
        softmax_rows job = {x->data, o, len};
        if (outer * len >= SOFTMAX_PAR_ELEMS && dev_par_width() > 1)
            dev_par_for((size_t)outer, dev_kgrain(outer, len, SOFTMAX_PAR_ELEMS / 2, 1), softmax_rows_chunk, &job);
        else
            softmax_rows_chunk(&job, 0, (size_t)outer);
    } else if (len > 0) {
        if (x->dtype == TFVM_F32)
            SOFTMAX_LOOP(float, expf, log_of);
        else
            SOFTMAX_LOOP(double, exp, log_of);
    }
    *out = r;
    return TFVM_OK;
}

/* ---- REDUCE_SUM / REDUCE_MEAN / REDUCE_MAX / REDUCE_MIN / REDUCE_PROD -------------------------------------------
 * The input is read once in order. Its dims (size 1 dropped) are merged into
 * runs of reduced and kept dims; an odometer walks all runs but the last,
 * which is a tight loop: a reduction into one accumulator, or a kept run
 * added element by element into a row of accumulators. */
typedef struct red_plan {
    int m;                      /* runs */
    int64_t d[TFVM_MAX_RANK];   /* run sizes */
    int64_t os[TFVM_MAX_RANK];  /* accumulator stride of each run (0 = reduced) */
} red_plan;

/* the integer loops name it too, but never call it (RUN is false there) */
static double sum_run_none(const void *x, int64_t n) { return (void)x, (double)n * 0; }
#define SUM_RUN_OF(x, n)                                                                   \
    _Generic((x), const float *: sum_run_float, const double *: sum_run_double, default: sum_run_none)(x, n)

#define RED_LOOP(T, A, INIT, STEP) RED_LOOP_RUN(T, A, INIT, STEP, false)
/* RUN: a reduced last run is summed by sum_run_T (float sums only) */
#define RED_LOOP_RUN(T, A, INIT, STEP, RUN)                                                \
    do {                                                                                   \
        const T *xs = x->data;                                                             \
        A *acc = accbuf;                                                                   \
        for (int64_t i = 0; i < kept; i++)                                                 \
            acc[i] = INIT;                                                                 \
        if (x->count == 0)                                                                 \
            break;                                                                         \
        const int last = pl.m - 1;                                                         \
        const int64_t n = pl.d[last];                                                      \
        const bool red_last = pl.os[last] == 0;                                            \
        int64_t idx[TFVM_MAX_RANK] = {0}, off = 0;                                         \
        for (;;) {                                                                         \
            if (red_last && (RUN)) {                                                       \
                acc[off] += (A)SUM_RUN_OF(xs, n);                                          \
            } else if (red_last) {                                                         \
                A s = acc[off];                                                            \
                for (int64_t j = 0; j < n; j++) {                                          \
                    const T v = xs[j];                                                     \
                    STEP(A, s);                                                             \
                }                                                                          \
                acc[off] = s;                                                              \
            } else {                                                                       \
                A *ap = acc + off;                                                         \
                for (int64_t j = 0; j < n; j++) {                                          \
                    const T v = xs[j];                                                     \
                    STEP(A, ap[j]);                                                         \
                }                                                                          \
            }                                                                              \
            xs += n;                                                                       \
            int j = last - 1;                                                              \
            for (; j >= 0; j--) {                                                          \
                off += pl.os[j];                                                           \
                if (++idx[j] < pl.d[j])                                                    \
                    break;                                                                 \
                off -= pl.os[j] * pl.d[j];                                                 \
                idx[j] = 0;                                                                \
            }                                                                              \
            if (j < 0)                                                                     \
                break;                                                                     \
        }                                                                                  \
    } while (0)

#define STEP_FSUM(A, s) (s) += (double)v
#define STEP_FPROD(A, s) (s) *= (double)v
/* Integers wrap: unsigned arithmetic has the low bits of the exact result. */
#define STEP_ISUM(A, s) (s) = (A)((uint64_t)(s) + (uint64_t)v)
#define STEP_IPROD(A, s) (s) = (A)((uint64_t)(s) * (uint64_t)v)
#define STEP_IMAX(A, s) (s) = v > (s) ? v : (s)
#define STEP_IMIN(A, s) (s) = v < (s) ? v : (s)
/* NumPy max/min: NaN wins. */
#define STEP_FMAX(A, s) (s) = (v > (s) || isnan(v)) ? v : (s)
#define STEP_FMIN(A, s) (s) = (v < (s) || isnan(v)) ? v : (s)

/* The integer reductions of dtype T, whose range is LO..HI. */
#define RED_INT(T, LO, HI)                                                                 \
    do {                                                                                   \
        switch (op) {                                                                      \
        case ISA_REDUCE_MAX: RED_LOOP(T, T, LO, STEP_IMAX); break;                         \
        case ISA_REDUCE_MIN: RED_LOOP(T, T, HI, STEP_IMIN); break;                         \
        case ISA_REDUCE_PROD: RED_LOOP(T, T, 1, STEP_IPROD); break;                        \
        default: RED_LOOP(T, T, 0, STEP_ISUM); break;                                      \
        }                                                                                  \
    } while (0)
/* Float reductions; sums, means and products accumulate in double (A). */
#define RED_FLOAT(T)                                                                       \
    do {                                                                                   \
        switch (op) {                                                                      \
        case ISA_REDUCE_MAX: RED_LOOP(T, T, -INFINITY, STEP_FMAX); break;                  \
        case ISA_REDUCE_MIN: RED_LOOP(T, T, INFINITY, STEP_FMIN); break;                   \
        case ISA_REDUCE_PROD: RED_LOOP(T, double, 1, STEP_FPROD); break;                   \
        default: RED_LOOP_RUN(T, double, 0, STEP_FSUM, true); break;                       \
        }                                                                                  \
    } while (0)

/* Float sums of whole rows [rows, n] split over threads past this many
 * elements (a global average pool of 576 channels of 7x7 is 28K, 5 us):
 * each row is summed as RED_LOOP_RUN sums it (the same bits) */
#define RED_PAR_ELEMS (INT64_C(1) << 13)
typedef struct red_rows {
    const void *x;
    double *acc;
    int64_t n;
    bool f32;
} red_rows;

static void red_rows_chunk(void *arg, size_t b, size_t e)
{
    const red_rows *j = arg;
    for (size_t r = b; r < e; r++) {
        const double s = j->f32 ? sum_run_float((const float *)j->x + (int64_t)r * j->n, j->n)
                                : sum_run_double((const double *)j->x + (int64_t)r * j->n, j->n);
        double a = 0; /* 0 + s, as the loop adds a run to its accumulator (-0 becomes +0 there too) */
        a += s;
        j->acc[r] = a;
    }
}

tfvm_status dev_cpu_reduce(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    const isa_op op = k->op;
    const uint8_t dt = x->dtype;
    /* bool: MAX is any, MIN all (ONNX ReduceMax/ReduceMin-20) */
    const bool bool_ok = op == ISA_REDUCE_MAX || op == ISA_REDUCE_MIN;
    if (op == ISA_REDUCE_MEAN ? !dev_kfloat(dt) : dt == TFVM_BOOL && !bool_ok)
        return dev_kfail(k, TFVM_ERR_TYPE, "not defined on %s%s", tfvm_dtype_name((tfvm_dtype)dt),
                         op == ISA_REDUCE_MEAN ? " (floats only)" : "");
    int64_t axes[TFVM_MAX_RANK];
    int na;
    tfvm_status st = dev_kvec(k, &in[1], "axes", axes, TFVM_MAX_RANK, &na);
    if (st)
        return st;
    bool red[TFVM_MAX_RANK] = {false};
    for (int i = 0; i < na; i++) {
        const int64_t a = axes[i] < 0 ? axes[i] + x->rank : axes[i];
        if (a < 0 || a >= x->rank)
            return dev_kfail(k, TFVM_ERR_SHAPE, "axis %lld out of range for shape %s",
                             (long long)axes[i], dev_kshape(x, s1));
        if (red[a])
            return dev_kfail(k, TFVM_ERR_ARGUMENT, "axis %lld repeated in axes %s",
                             (long long)axes[i], dev_kdims(na, axes, s1));
        red[a] = true;
    }
    if (na == 0)
        for (int i = 0; i < x->rank; i++)
            red[i] = true;
    const bool keep = k->attr & ISA_OPT_KEEPDIMS;
    int64_t od[TFVM_MAX_RANK], rcount = 1, kept = 1;
    int orank = 0;
    for (int i = 0; i < x->rank; i++) {
        if (red[i])
            rcount *= x->dims[i];
        else
            kept *= x->dims[i];
        if (!red[i] || keep)
            od[orank++] = red[i] ? 1 : x->dims[i];
    }
    const bool extreme = op == ISA_REDUCE_MAX || op == ISA_REDUCE_MIN;
    if (extreme && rcount == 0)
        return dev_kfail(k, TFVM_ERR_SHAPE, "%s over no elements: axes %s of shape %s",
                         op == ISA_REDUCE_MAX ? "max" : "min", dev_kdims(na, axes, s1), dev_kshape(x, s2));

    /* Runs of reduced/kept dims and the accumulator stride of each. */
    red_plan pl = {0};
    int64_t ostride = 1;
    bool flag[TFVM_MAX_RANK];
    for (int i = 0; i < x->rank; i++) {
        if (x->dims[i] == 1)
            continue;
        if (pl.m > 0 && flag[pl.m - 1] == red[i]) {
            pl.d[pl.m - 1] *= x->dims[i];
            continue;
        }
        flag[pl.m] = red[i];
        pl.d[pl.m++] = x->dims[i];
    }
    if (pl.m == 0) {
        pl.d[0] = 1;
        flag[0] = false;
        pl.m = 1;
    }
    for (int i = pl.m - 1; i >= 0; i--) {
        pl.os[i] = flag[i] ? 0 : ostride;
        if (!flag[i])
            ostride *= pl.d[i];
    }

    dev_value r;
    void *o;
    if ((st = dev_kresult(k, dt, orank, od, &r, &o)))
        return st;
    /* f32 sums, means and products accumulate in double, in a scratch row. */
    void *accbuf = o;
    const bool f32acc = dt == TFVM_F32 && !extreme;
    if (f32acc && !(accbuf = dev_ktemp(k, (size_t)kept, sizeof(double)))) {
        dev_value_release(&r);
        return TFVM_ERR_NOMEM;
    }
    const bool sum = op == ISA_REDUCE_SUM || op == ISA_REDUCE_MEAN;
    if (sum && dev_kfloat(dt) && pl.m == 2 && pl.os[0] == 1 && pl.os[1] == 0 && kept > 1 &&
        kept * pl.d[1] >= RED_PAR_ELEMS && dev_par_width() > 1) {
        /* rows of x (a global average pool's planes) on the VM's idle workers */
        red_rows job = {.x = x->data, .acc = accbuf, .n = pl.d[1], .f32 = dt == TFVM_F32};
        dev_par_for((size_t)kept, dev_kgrain(kept, pl.d[1], RED_PAR_ELEMS / 2, 1), red_rows_chunk, &job);
    } else {
        switch (dt) {
        case TFVM_BOOL: RED_INT(uint8_t, 0, 1); break;
        case TFVM_U8: RED_INT(uint8_t, 0, UINT8_MAX); break;
        case TFVM_I8: RED_INT(int8_t, INT8_MIN, INT8_MAX); break;
        case TFVM_I32: RED_INT(int32_t, INT32_MIN, INT32_MAX); break;
        case TFVM_I64: RED_INT(int64_t, INT64_MIN, INT64_MAX); break;
        case TFVM_F32: RED_FLOAT(float); break;
        default: RED_FLOAT(double); break;
        }
    }
    if (f32acc) {
        const double *acc = accbuf;
        float *of = o;
        const double div = op == ISA_REDUCE_MEAN ? (double)rcount : 1.0;
        for (int64_t i = 0; i < kept; i++)
            of[i] = (float)(acc[i] / div);
        dev_ktemp_free(k, accbuf, (size_t)kept, sizeof(double));
    } else if (dt == TFVM_F64 && op == ISA_REDUCE_MEAN) {
        double *od64 = o;
        for (int64_t i = 0; i < kept; i++)
            od64[i] /= (double)rcount;
    }
    *out = r;
    return TFVM_OK;
}

/* ---- ARGMAX / ARGMIN ---------------------------------------------------------------- */
#define ARGMAX_LOOP(T, NAN_CHECK, BETTER)                                                        \
    do {                                                                                   \
        const T *xs = x->data;                                                             \
        int64_t *os = o;                                                                   \
        for (int64_t a = 0; a < outer; a++)                                                \
            for (int64_t b = 0; b < inner; b++) {                                          \
                const T *xp = xs + a * len * inner + b;                                    \
                T best = xp[0];                                                            \
                int64_t bi = 0;                                                            \
                for (int64_t l = 1; l < len && !NAN_CHECK(best); l++) {                    \
                    const T v = xp[l * inner];                                             \
                    if (v BETTER best || NAN_CHECK(v)) {                                   \
                        best = v;                                                          \
                        bi = l;                                                            \
                    }                                                                      \
                }                                                                          \
                os[a * inner + b] = bi;                                                    \
            }                                                                              \
    } while (0)
#define NO_NAN(v) 0
#define IS_NAN(v) isnan(v)
#define ARG_BOTH(T, NAN_CHECK)                                                             \
    do {                                                                                   \
        if (mx)                                                                            \
            ARGMAX_LOOP(T, NAN_CHECK, >);                                                  \
        else                                                                               \
            ARGMAX_LOOP(T, NAN_CHECK, <);                                                  \
    } while (0)

tfvm_status dev_cpu_argmax(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE];
    int axis;
    tfvm_status st = dev_kaxis(k, x, &axis);
    if (st)
        return st;
    int64_t outer, len, inner;
    split_axis(x, axis, &outer, &len, &inner);
    if (len == 0)
        return dev_kfail(k, TFVM_ERR_SHAPE, "axis %d of shape %s is empty", axis, dev_kshape(x, s1));
    int64_t od[TFVM_MAX_RANK];
    int orank = 0;
    for (int i = 0; i < x->rank; i++)
        if (i != axis)
            od[orank++] = x->dims[i];
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, TFVM_I64, orank, od, &r, &o)))
        return st;
    const bool mx = k->op == ISA_ARGMAX;
    switch (x->dtype) {
    case TFVM_BOOL:
    case TFVM_U8: ARG_BOTH(uint8_t, NO_NAN); break;
    case TFVM_I8: ARG_BOTH(int8_t, NO_NAN); break;
    case TFVM_I32: ARG_BOTH(int32_t, NO_NAN); break;
    case TFVM_I64: ARG_BOTH(int64_t, NO_NAN); break;
    case TFVM_F32: ARG_BOTH(float, IS_NAN); break;
    default: ARG_BOTH(double, IS_NAN); break;
    }
    *out = r;
    return TFVM_OK;
}

/* ---- CUMSUM ---------------------------------------------------------------------------
 * ONNX CumSum: running sums along the axis given as an operand, in the
 * dtype (integers wrap); exclusive: element i sums the ones before it;
 * reverse: from the end of the axis. */
#define CUMSUM_LOOP(T, ADD)                                                                \
    do {                                                                                   \
        const T *xs = x->data;                                                             \
        T *os = o;                                                                         \
        for (int64_t a = 0; a < outer; a++)                                                \
            for (int64_t b = 0; b < inner; b++) {                                          \
                const T *xp = xs + a * len * inner + b;                                    \
                T *op = os + a * len * inner + b;                                          \
                T s = 0;                                                                   \
                for (int64_t j = 0; j < len; j++) {                                        \
                    const int64_t l = rev ? len - 1 - j : j;                               \
                    const T v = xp[l * inner];                                             \
                    if (excl) {                                                            \
                        op[l * inner] = s;                                                 \
                        s = ADD(T, s, v);                                                  \
                    } else {                                                               \
                        s = ADD(T, s, v);                                                  \
                        op[l * inner] = s;                                                 \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
    } while (0)
#define CUMSUM_IADD(T, a, b) (T)((uint64_t)(a) + (uint64_t)(b))
#define CUMSUM_FADD(T, a, b) (T)((a) + (b))

tfvm_status dev_cpu_cumsum(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE];
    if (!dev_knumeric(x->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "not defined on bool");
    int64_t ax;
    tfvm_status st = dev_kscalar_i64(k, &in[1], "axis", false, &ax);
    if (st)
        return st;
    if (ax < -(int64_t)x->rank || ax >= x->rank)
        return dev_kfail(k, TFVM_ERR_SHAPE, "axis %lld out of range for shape %s", (long long)ax,
                         dev_kshape(x, s1));
    const int axis = (int)(ax < 0 ? ax + x->rank : ax);
    const bool excl = k->attr & ISA_OPT_EXCLUSIVE, rev = k->attr & ISA_OPT_REVERSE;
    int64_t outer, len, inner;
    split_axis(x, axis, &outer, &len, &inner);
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, x->rank, x->dims, &r, &o)))
        return st;
    switch (x->dtype) {
    case TFVM_U8: CUMSUM_LOOP(uint8_t, CUMSUM_IADD); break;
    case TFVM_I8: CUMSUM_LOOP(int8_t, CUMSUM_IADD); break;
    case TFVM_I32: CUMSUM_LOOP(int32_t, CUMSUM_IADD); break;
    case TFVM_I64: CUMSUM_LOOP(int64_t, CUMSUM_IADD); break;
    case TFVM_F32: CUMSUM_LOOP(float, CUMSUM_FADD); break;
    default: CUMSUM_LOOP(double, CUMSUM_FADD); break;
    }
    *out = r;
    return TFVM_OK;
}
