/* devices/cpu/reduce.c — the ops that fold an axis or a set of axes:
 * SOFTMAX (stable: exp(x - max)), REDUCE_SUM/MEAN/MAX with keepdims, ARGMAX. */
#include "devices/cpu/kern.h"

#include <math.h>
#include <string.h>

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

/* ---- SOFTMAX ------------------------------------------------------------------------ */
#define SOFTMAX_LOOP(T, EXP)                                                               \
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
                    op[l * inner] = e;                                                     \
                    sum += (double)e;                                                      \
                }                                                                          \
                const T scale = (T)(1.0 / sum);                                            \
                for (int64_t l = 0; l < len; l++)                                          \
                    op[l * inner] *= scale;                                                \
            }                                                                              \
    } while (0)

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
    if ((st = dev_kresult(k, x->dtype, x->rank, x->dims, &r, &o)))
        return st;
    if (len > 0) {
        if (x->dtype == TFVM_F32)
            SOFTMAX_LOOP(float, expf);
        else
            SOFTMAX_LOOP(double, exp);
    }
    *out = r;
    return TFVM_OK;
}

/* ---- REDUCE_SUM / REDUCE_MEAN / REDUCE_MAX -------------------------------------------
 * The input is read once in order. Its dims (size 1 dropped) are merged into
 * runs of reduced and kept dims; an odometer walks all runs but the last,
 * which is a tight loop: a reduction into one accumulator, or a kept run
 * added element by element into a row of accumulators. */
typedef struct red_plan {
    int m;                      /* runs */
    int64_t d[TFVM_MAX_RANK];   /* run sizes */
    int64_t os[TFVM_MAX_RANK];  /* accumulator stride of each run (0 = reduced) */
} red_plan;

#define RED_LOOP(T, A, INIT, STEP)                                                         \
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
            if (red_last) {                                                                \
                A s = acc[off];                                                            \
                for (int64_t j = 0; j < n; j++) {                                          \
                    const T v = xs[j];                                                     \
                    STEP(s);                                                               \
                }                                                                          \
                acc[off] = s;                                                              \
            } else {                                                                       \
                A *ap = acc + off;                                                         \
                for (int64_t j = 0; j < n; j++) {                                          \
                    const T v = xs[j];                                                     \
                    STEP(ap[j]);                                                           \
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

#define STEP_FSUM(s) (s) += (double)v
#define STEP_SUM32(s) (s) = (int32_t)((uint32_t)(s) + (uint32_t)v)
#define STEP_SUM64(s) (s) = (int64_t)((uint64_t)(s) + (uint64_t)v)
#define STEP_IMAX(s) (s) = v > (s) ? v : (s)
/* NumPy max: NaN wins. */
#define STEP_FMAX(s) (s) = (v > (s) || isnan(v)) ? v : (s)

tfvm_status dev_cpu_reduce(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    const isa_op op = k->op;
    const uint8_t dt = x->dtype;
    if (op == ISA_REDUCE_MEAN ? !dev_kfloat(dt) : dt == TFVM_BOOL)
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
    if (op == ISA_REDUCE_MAX && rcount == 0)
        return dev_kfail(k, TFVM_ERR_SHAPE, "max over no elements: axes %s of shape %s",
                         dev_kdims(na, axes, s1), dev_kshape(x, s2));

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
    /* f32 sums and means accumulate in double, in a scratch row. */
    void *accbuf = o;
    if (dt == TFVM_F32 && op != ISA_REDUCE_MAX && !(accbuf = dev_ktemp(k, (size_t)kept, sizeof(double)))) {
        dev_value_release(&r);
        return TFVM_ERR_NOMEM;
    }
    switch (dt) {
    case TFVM_I32:
        if (op == ISA_REDUCE_MAX)
            RED_LOOP(int32_t, int32_t, INT32_MIN, STEP_IMAX);
        else
            RED_LOOP(int32_t, int32_t, 0, STEP_SUM32);
        break;
    case TFVM_I64:
        if (op == ISA_REDUCE_MAX)
            RED_LOOP(int64_t, int64_t, INT64_MIN, STEP_IMAX);
        else
            RED_LOOP(int64_t, int64_t, 0, STEP_SUM64);
        break;
    case TFVM_F32:
        if (op == ISA_REDUCE_MAX)
            RED_LOOP(float, float, -INFINITY, STEP_FMAX);
        else
            RED_LOOP(float, double, 0, STEP_FSUM);
        break;
    default:
        if (op == ISA_REDUCE_MAX)
            RED_LOOP(double, double, -INFINITY, STEP_FMAX);
        else
            RED_LOOP(double, double, 0, STEP_FSUM);
        break;
    }
    if (dt == TFVM_F32 && op != ISA_REDUCE_MAX) {
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

/* ---- ARGMAX ------------------------------------------------------------------------- */
#define ARGMAX_LOOP(T, NAN_CHECK)                                                          \
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
                    if (v > best || NAN_CHECK(v)) {                                        \
                        best = v;                                                          \
                        bi = l;                                                            \
                    }                                                                      \
                }                                                                          \
                os[a * inner + b] = bi;                                                    \
            }                                                                              \
    } while (0)
#define NO_NAN(v) 0
#define IS_NAN(v) isnan(v)

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
    switch (x->dtype) {
    case TFVM_BOOL: ARGMAX_LOOP(uint8_t, NO_NAN); break;
    case TFVM_I32: ARGMAX_LOOP(int32_t, NO_NAN); break;
    case TFVM_I64: ARGMAX_LOOP(int64_t, NO_NAN); break;
    case TFVM_F32: ARGMAX_LOOP(float, IS_NAN); break;
    default: ARGMAX_LOOP(double, IS_NAN); break;
    }
    *out = r;
    return TFVM_OK;
}
