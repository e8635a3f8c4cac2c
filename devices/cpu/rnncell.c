/* devices/cpu/rnncell.c — LSTM_CELL_C, LSTM_CELL_H and GRU_CELL: a recurrent
 * step's gate math in one pass over its gates, g = xw + hr (the input
 * product, hoisted out of the loop, and the recurrent one). The same
 * expressions, in the same order, as the elementwise ops they replace
 * (ADD, SIGMOID, TANH, MUL, SUB: elementwise.c, act.h), so a fused step
 * gives what the separate instructions give. */
#include "devices/cpu/vec.h"
#include "devices/cpu/kern.h"
#include "devices/cpu/act.h"

#include <math.h>

/* SIGMOID and TANH over n elements in place, as the elementwise ops compute
 * them: f32 through act.c's vector functions, f64 with libm */
static void sig_n_f32(float *v, int64_t n) { dev_sigmoidf_n(v, v, (size_t)n); }
static void tanh_n_f32(float *v, int64_t n) { dev_tanhf_n(v, v, (size_t)n); }
static void sig_n_f64(double *v, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        v[j] = v[j] >= 0 ? 1 / (1 + exp(-v[j])) : exp(v[j]) / (1 + exp(v[j]));
}
static void tanh_n_f64(double *v, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        v[j] = tanh(v[j]);
}

/* One row (batch element) at a time; t is scratch of 3H elements. Gate k
 * of a row is columns [k*H, (k+1)*H): LSTM i o f c, GRU z r h. */
#define CELL_ROWS(T, SIG_N, TANH_N)                                                         \
    do {                                                                                    \
        const T *gx = in[0].data, *gh = in[1].data, *sv = in[2].data;                       \
        T *o = out_data, *t0 = tmp, *t1 = t0 + H, *t2 = t1 + H;                             \
        for (int64_t b = 0; b < B; b++, gx += G * H, gh += G * H, sv += H, o += H) {        \
            if (k->op == ISA_LSTM_CELL_C) {                                                 \
                for (int64_t j = 0; j < H; j++) {                                           \
                    t0[j] = gx[j] + gh[j];                  /* i */                         \
                    t1[j] = gx[2 * H + j] + gh[2 * H + j];  /* f */                         \
                    t2[j] = gx[3 * H + j] + gh[3 * H + j];  /* c */                         \
                }                                                                           \
                SIG_N(t0, H);                                                               \
                SIG_N(t1, H);                                                               \
                TANH_N(t2, H);                                                              \
                for (int64_t j = 0; j < H; j++) {                                           \
                    const T a = t1[j] * sv[j], c = t0[j] * t2[j];                           \
                    o[j] = a + c;                                                           \
                }                                                                           \
            } else if (k->op == ISA_LSTM_CELL_H) {                                          \
                for (int64_t j = 0; j < H; j++) {                                           \
                    t0[j] = gx[H + j] + gh[H + j];          /* o */                         \
                    t1[j] = sv[j];                                                          \
                }                                                                           \
                SIG_N(t0, H);                                                               \
                TANH_N(t1, H);                                                              \
                for (int64_t j = 0; j < H; j++)                                             \
                    o[j] = t0[j] * t1[j];                                                   \
            } else {                                                                        \
                for (int64_t j = 0; j < H; j++) {                                           \
                    t0[j] = gx[j] + gh[j];                  /* z */                         \
                    t1[j] = gx[H + j] + gh[H + j];          /* r */                         \
                }                                                                           \
                SIG_N(t0, H);                                                               \
                SIG_N(t1, H);                                                               \
                for (int64_t j = 0; j < H; j++)                                             \
                    t2[j] = gx[2 * H + j] + t1[j] * gh[2 * H + j];                          \
                TANH_N(t2, H);                                                              \
                for (int64_t j = 0; j < H; j++) {                                           \
                    const T a = (1 - t0[j]) * t2[j], c = t0[j] * sv[j];                     \
                    o[j] = a + c;                                                           \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    } while (0)

tfvm_status dev_cpu_rnn_cell(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    const int64_t G = k->op == ISA_GRU_CELL ? 3 : 4;
    const dev_kview *xw = &in[0], *st = &in[2];
    if (!dev_kfloat(xw->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "not defined on %s (floats only)", tfvm_dtype_name((tfvm_dtype)xw->dtype));
    for (int i = 1; i < 3; i++)
        if (in[i].dtype != xw->dtype)
            return dev_kfail(k, TFVM_ERR_TYPE, "dtype mismatch: %s and %s", dev_kdesc(xw, s1), dev_kdesc(&in[i], s2));
    if (st->rank != 2)
        return dev_kfail(k, TFVM_ERR_SHAPE, "the state must be [B, H] (rank 2), got %s", dev_kshape(st, s1));
    const int64_t B = st->dims[0], H = st->dims[1];
    for (int i = 0; i < 2; i++)
        if (in[i].rank != 2 || in[i].dims[0] != B || in[i].dims[1] != G * H)
            return dev_kfail(k, TFVM_ERR_SHAPE, "gates %s must be [%lld, %lld] (%lld gates of the state %s)",
                             dev_kshape(&in[i], s1), (long long)B, (long long)(G * H), (long long)G,
                             dev_kshape(st, s2));
    dev_value r;
    void *out_data;
    tfvm_status s = dev_kresult(k, st->dtype, 2, st->dims, &r, &out_data);
    if (s)
        return s;
    if (B > 0 && H > 0) {
        const size_t esz = dev_kesize(st->dtype);
        void *tmp = dev_ktemp(k, (size_t)(3 * H), esz);
        if (!tmp) {
            dev_value_release(&r);
            return TFVM_ERR_NOMEM;
        }
        if (st->dtype == TFVM_F32)
            CELL_ROWS(float, sig_n_f32, tanh_n_f32);
        else
            CELL_ROWS(double, sig_n_f64, tanh_n_f64);
        dev_ktemp_free(k, tmp, (size_t)(3 * H), esz);
    }
    *out = r;
    return TFVM_OK;
}
