/* devices/cpu/norm.c — LRN: ONNX local response normalization across the
 * channels (axis 1) of x [N, C, ...], in double. */
#include "devices/cpu/vec.h"
#include "devices/cpu/kern.h"

#include <math.h>

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
