/* devices/cpu/fused.c — FUSED_MATMUL and FUSED_CONV2D: a product, its bias and
 * its activation in one kernel, the bias and activation applied to each block
 * of the result right after the gemm that wrote it (while it is in cache). */
#include "devices/cpu/vec.h"
#include "devices/cpu/kern.h"
#include "devices/cpu/act.h"
#include "devices/cpu/par.h"

#include <math.h>
#include <string.h>

/* The activations, the same expressions as the elementwise ops they replace
 * (elementwise.c, act.c; the importers' spellings, docs/isa.md), so that a
 * fused instruction gives bit for bit what the separate ones give. RELU goes
 * with the bias; the others run over the row once the bias is in: f32
 * through act.c's vector code, f64 as the f64 elementwise kernels (libm). */
#define EPI_MIN(x, y) (((x) < (y) || isnan(x)) ? (x) : (y)) /* MIN, MAX: NaN wins */
#define EPI_MAX(x, y) (((x) > (y) || isnan(x)) ? (x) : (y))

/* MUL, ADD, MIN, MAX as four ops (separate statements: never contracted to an fma) */
static inline double hsig_f64(double x)
{
    const double t = x * (1.0 / 6);
    const double u = t + 0.5;
    return EPI_MAX(EPI_MIN(u, 1.0), 0.0);
}

/* GELU's tanh form as torch.onnx.export spells it, one op per statement (an
 * expression could be contracted to an fma): (x * (tanh(C * (x + K * (x *
 * (x * x)))) + 1)) * 0.5, the tanh through act.c as TANH; 256 at a time. */
#define GELU_C 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_K 0.044715
static void gelu_tanh_f32(float *c, int64_t n)
{
    float u[256];
    for (int64_t j0 = 0; j0 < n; j0 += 256) {
        const int64_t m = n - j0 < 256 ? n - j0 : 256;
        float *x = c + j0;
        for (int64_t j = 0; j < m; j++) {
            const float x2 = x[j] * x[j];
            const float x3 = x[j] * x2;
            const float kx3 = x3 * (float)GELU_K;
            const float a = x[j] + kx3;
            u[j] = a * (float)GELU_C;
        }
        dev_tanhf_n(u, u, (size_t)m);
        for (int64_t j = 0; j < m; j++) {
            const float p = u[j] + 1.0f;
            const float y = x[j] * p;
            x[j] = y * 0.5f;
        }
    }
}

/* GELU as transformers' NewGELUActivation spells it (GPT-2): (x * 0.5) *
 * (tanh((x + pow(x, 3) * K) * C) + 1), pow as POW computes it (ISA_FPOW:
 * x * x * x) */
static void gelu_new_f32(float *c, int64_t n)
{
    float u[256];
    for (int64_t j0 = 0; j0 < n; j0 += 256) {
        const int64_t m = n - j0 < 256 ? n - j0 : 256;
        float *x = c + j0;
        for (int64_t j = 0; j < m; j++) {
            const float p = ISA_FPOW(x[j], 3.0f, powf);
            const float kp = p * (float)GELU_K;
            const float a = x[j] + kp;
            u[j] = a * (float)GELU_C;
        }
        dev_tanhf_n(u, u, (size_t)m);
        for (int64_t j = 0; j < m; j++) {
            const float h = x[j] * 0.5f;
            const float p = u[j] + 1.0f;
            x[j] = h * p;
        }
    }
}

static void gelu_new_f64(double *c, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        const double x = c[j], p = ISA_FPOW(x, 3.0, pow);
        const double kp = p * GELU_K;
        const double a = x + kp;
        const double t = tanh(a * GELU_C);
        const double h = x * 0.5;
        c[j] = h * (t + 1.0);
    }
}

static void gelu_tanh_f64(double *c, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        const double x = c[j], x2 = x * x;
        const double x3 = x * x2;
        const double kx3 = x3 * GELU_K;
        const double a = x + kx3;
        const double t = tanh(a * GELU_C);
        const double p = t + 1.0;
        const double y = x * p;
        c[j] = y * 0.5;
    }
}

static void act_f32(uint32_t act, float *c, int64_t n)
{
    switch (act) {
    case ISA_OPT_ACT_SIGMOID: dev_sigmoidf_n(c, c, (size_t)n); break;
    case ISA_OPT_ACT_TANH: dev_tanhf_n(c, c, (size_t)n); break;
    case ISA_OPT_ACT_SILU: dev_siluf_n(c, c, (size_t)n); break;
    case ISA_OPT_ACT_GELU: dev_geluf_n(c, c, (size_t)n); break;
    case ISA_OPT_ACT_HARDSIGMOID: dev_hardsigmoidf_n(c, c, (size_t)n); break;
    case ISA_OPT_ACT_HARDSWISH: dev_hardswishf_n(c, c, (size_t)n); break;
    case ISA_OPT_ACT_RELU6: dev_relu6f_n(c, c, (size_t)n); break;
    case ISA_OPT_ACT_GELU_TANH: gelu_tanh_f32(c, n); break;
    case ISA_OPT_ACT_GELU_NEW: gelu_new_f32(c, n); break;
    default: break;
    }
}

static void act_f64(uint32_t act, double *c, int64_t n)
{
    switch (act) {
    case ISA_OPT_ACT_SIGMOID:
    case ISA_OPT_ACT_SILU:
        for (int64_t j = 0; j < n; j++) {
            const double x = c[j], s = x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
            c[j] = act == ISA_OPT_ACT_SILU ? x * s : s;
        }
        break;
    case ISA_OPT_ACT_TANH:
        for (int64_t j = 0; j < n; j++)
            c[j] = tanh(c[j]);
        break;
    case ISA_OPT_ACT_GELU:
        for (int64_t j = 0; j < n; j++)
            c[j] = (c[j] * (erf(c[j] / M_SQRT2) + 1)) * 0.5;
        break;
    case ISA_OPT_ACT_HARDSIGMOID:
        for (int64_t j = 0; j < n; j++)
            c[j] = hsig_f64(c[j]);
        break;
    case ISA_OPT_ACT_HARDSWISH:
        for (int64_t j = 0; j < n; j++)
            c[j] = c[j] * hsig_f64(c[j]);
        break;
    case ISA_OPT_ACT_RELU6:
        for (int64_t j = 0; j < n; j++)
            c[j] = EPI_MIN(EPI_MAX(c[j], 0.0), 6.0);
        break;
    case ISA_OPT_ACT_GELU_TANH: gelu_tanh_f64(c, n); break;
    case ISA_OPT_ACT_GELU_NEW: gelu_new_f64(c, n); break;
    default: break;
    }
}

#define EPI_BIAS(T)                                                                         \
    do {                                                                                    \
        T *c = cv;                                                                          \
        const T *b = bv;                                                                    \
        const T b0 = b ? b[0] : 0;                                                          \
        if (act == ISA_OPT_ACT_RELU) {                                                      \
            if (b && bstep)                                                                 \
                for (int64_t j = 0; j < n; j++) {                                           \
                    const T x = c[j] + b[j];                                                \
                    c[j] = x < 0 ? 0 : x;                                                   \
                }                                                                           \
            else                                                                            \
                for (int64_t j = 0; j < n; j++) {                                           \
                    const T x = c[j] + b0;                                                  \
                    c[j] = x < 0 ? 0 : x;                                                   \
                }                                                                           \
            return;                                                                         \
        }                                                                                   \
        if (b && bstep)                                                                     \
            for (int64_t j = 0; j < n; j++)                                                 \
                c[j] += b[j];                                                               \
        else if (b)                                                                         \
            for (int64_t j = 0; j < n; j++)                                                 \
                c[j] += b0;                                                                 \
    } while (0)

/* The f32 activations whose bias and activation go in one vector pass
 * (act.h), or DEV_BA_COUNT */
static dev_bias_act bias_act(uint32_t act)
{
    switch (act) {
    case 0: return DEV_BA_ID;
    case ISA_OPT_ACT_RELU: return DEV_BA_RELU;
    case ISA_OPT_ACT_SIGMOID: return DEV_BA_SIGMOID;
    case ISA_OPT_ACT_SILU: return DEV_BA_SILU;
    case ISA_OPT_ACT_GELU: return DEV_BA_GELU;
    case ISA_OPT_ACT_HARDSIGMOID: return DEV_BA_HARDSIGMOID;
    case ISA_OPT_ACT_HARDSWISH: return DEV_BA_HARDSWISH;
    case ISA_OPT_ACT_RELU6: return DEV_BA_RELU6;
    default: return DEV_BA_COUNT;
    }
}

void dev_kepilogue(uint8_t dtype, uint32_t act, void *cv, int64_t n, const void *bv, int64_t bstep)
{
    static const float zero = 0.0f;
    const dev_bias_act ba = dtype == TFVM_F32 ? bias_act(act) : DEV_BA_COUNT;
    /* RELU without a bias adds 0 all the same (-0 becomes 0), as below */
    if (ba != DEV_BA_COUNT && (bv || act == ISA_OPT_ACT_RELU)) {
        dev_bias_actf_n(ba, cv, (size_t)n, bv ? bv : &zero, bv && bstep);
        return;
    }
    if (dtype == TFVM_F32) {
        EPI_BIAS(float);
        act_f32(act, cv, n);
    } else {
        EPI_BIAS(double);
        act_f64(act, cv, n);
    }
}

tfvm_status dev_kepi_init(dev_kctx *k, dev_kepi *ep, const dev_kview *x, const dev_kview *bias,
                          int brank, const int64_t *bdims, int rank, const int64_t *dims)
{
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    *ep = (dev_kepi){.dtype = x->dtype, .act = k->attr & ISA_OPT_ACT_MASK, .rank = rank};
    if (ep->act & (ep->act - 1))
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "more than one activation (options 0x%x)", (unsigned)k->attr);
    if (bias->dtype != x->dtype)
        return dev_kfail(k, TFVM_ERR_TYPE, "dtype mismatch: %s and bias %s", dev_kdesc(x, s1),
                         dev_kdesc(bias, s2));
    bool ok = brank <= rank;
    for (int i = 0; ok && i < brank; i++) {
        const int64_t bd = bdims[brank - 1 - i];
        ok = bd == 1 || bd == dims[rank - 1 - i];
    }
    if (!ok)
        return dev_kfail(k, TFVM_ERR_SHAPE, "bias %s does not broadcast to the product %s", dev_kshape(bias, s1),
                         dev_kdims(rank, dims, s2));
    int64_t acc = 1;
    for (int i = 0; i < brank; i++) {
        const int j = rank - 1 - i;
        ep->bstr[j] = bdims[brank - 1 - i] == 1 ? 0 : acc;
        acc *= bdims[brank - 1 - i];
    }
    memcpy(ep->dims, dims, (size_t)rank * sizeof *dims);
    ep->len = rank ? dims[rank - 1] : 1;
    ep->bias = bias->data;
    return TFVM_OK;
}

void dev_kepi_apply(const dev_kepi *ep, void *c, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols)
{
    if (ep->len == 0 || nrows <= 0 || ncols <= 0)
        return;
    const int r = ep->rank;
    const size_t esz = dev_kesize(ep->dtype);
    int64_t step = r ? ep->bstr[r - 1] : 0;
    /* the coordinates of row0 over the leading dims, and its bias offset */
    int64_t idx[TFVM_MAX_RANK] = {0}, boff = col0 * step, rest = row0;
    for (int j = r - 2; j >= 0; j--) {
        idx[j] = ep->dims[j] ? rest % ep->dims[j] : 0;
        rest = ep->dims[j] ? rest / ep->dims[j] : 0;
        boff += idx[j] * ep->bstr[j];
    }
    const size_t at = (size_t)(row0 * ep->len + col0) * esz;
    char *cp = (char *)c + at;
    const char *rp = ep->res ? ep->res + at : NULL;
    if (ep->len == 1 && r >= 2 && idx[r - 2] + nrows <= ep->dims[r - 2] && ep->bstr[r - 2] <= 1) {
        /* rows of one element (a convolution's 1x1 output, the channels of
         * squeeze-excite), consecutive along one dim: one row of them, not
         * a call each */
        ncols = nrows, nrows = 1, step = ep->bstr[r - 2];
    }
    for (int64_t row = 0; row < nrows; row++, cp += (size_t)ep->len * esz) {
        if (rp) { /* the residual: an elementwise "bias" after the bias (if not added already) */
            if (ep->bias)
                dev_kepilogue(ep->dtype, 0, cp, ncols, ep->bias + (size_t)boff * esz, step);
            dev_kepilogue(ep->dtype, ep->act, cp, ncols, rp, 1);
            rp += (size_t)ep->len * esz;
        } else
            dev_kepilogue(ep->dtype, ep->act, cp, ncols, ep->bias + (size_t)boff * esz, step);
        for (int j = r - 2; j >= 0; j--) {
            boff += ep->bstr[j];
            if (++idx[j] < ep->dims[j])
                break;
            boff -= ep->bstr[j] * ep->dims[j];
            idx[j] = 0;
        }
    }
}

int64_t dev_kpieces(int64_t n, int64_t cost, int64_t least, unsigned width)
{
    if (n <= 1 || width <= 1)
        return 1;
    const double total = (double)n * (double)(cost > 0 ? cost : 1);
    int64_t pieces = 4 * (int64_t)width;
    if (total / (double)pieces < (double)least)
        pieces = (int64_t)(total / (double)least);
    if (pieces > n)
        pieces = n;
    return pieces < 2 ? 1 : pieces;
}

int dev_kpath(int force)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const int best = __builtin_cpu_supports("avx512f")                                         ? 0
                     : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1
                                                                                               : 2;
#else
    const int best = 2;
#endif
    return force > best ? force : best;
}

size_t dev_kgrain(int64_t n, int64_t cost, int64_t least, int64_t align)
{
    const int64_t pieces = dev_kpieces(n, cost, least, dev_par_width());
    if (pieces < 2)
        return n < 1 ? 1 : (size_t)n;
    /* the runner's chunks shrink toward the loop's end down to this grain
     * (scheduler/pool.c): a quarter of a piece */
    int64_t grain = (n + 4 * pieces - 1) / (4 * pieces);
    if (align > 1)
        grain = (grain + align - 1) / align * align;
    return (size_t)grain;
}
