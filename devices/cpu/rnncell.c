/* devices/cpu/rnncell.c — LSTM_CELL_C, LSTM_CELL_H and GRU_CELL: a recurrent
 * step's gate math in one pass over its gates, g = xw + hr (the input
 * product, hoisted out of the loop, and the recurrent one); LSTM_STEP and
 * GRU_STEP: a whole step, the recurrent product of the state with the
 * weights packed once (sgemm.h) and then that gate math, so that a step of
 * a loop is one instruction. The same expressions, in the same order, as
 * the elementwise ops they replace (ADD, SIGMOID, TANH, MUL, SUB:
 * elementwise.c, act.h), so a fused step gives what the separate
 * instructions give. */
#include "devices/cpu/vec.h"
#include "devices/cpu/f4.h"
#include "devices/cpu/kern.h"
#include "devices/cpu/act.h"
#include "devices/cpu/par.h"
#include "devices/cpu/sgemm.h"
#include "devices/tensor.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

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

/* The gate math of n units of one row (batch element), per dtype: gate k
 * of unit j at gx[k * xs + j] and gh[k * hs + j] (LSTM i o f c, GRU z r
 * h), s the state, o where the result goes, t scratch of 3n elements. */
#define CELL_ROW_FNS(T, SFX, SIG_N, TANH_N)                                                        \
    /* LSTM_CELL_C: the new cell state from the previous one, s */                                 \
    static void lstm_c_##SFX(const T *gx, int64_t xs, const T *gh, int64_t hs, const T *s, T *o, T *t, int64_t n) \
    {                                                                                              \
        T *t0 = t, *t1 = t + n, *t2 = t + 2 * n;                                                   \
        for (int64_t j = 0; j < n; j++) {                                                          \
            t0[j] = gx[j] + gh[j];                   /* i */                                       \
            t1[j] = gx[2 * xs + j] + gh[2 * hs + j]; /* f */                                       \
            t2[j] = gx[3 * xs + j] + gh[3 * hs + j]; /* c */                                       \
        }                                                                                          \
        SIG_N(t0, n);                                                                              \
        SIG_N(t1, n);                                                                              \
        TANH_N(t2, n);                                                                             \
        for (int64_t j = 0; j < n; j++) {                                                          \
            const T a = t1[j] * s[j], c = t0[j] * t2[j];                                           \
            o[j] = a + c;                                                                          \
        }                                                                                          \
    }                                                                                              \
    /* LSTM_CELL_H: the output from the new cell state, s */                                       \
    static void lstm_h_##SFX(const T *gx, int64_t xs, const T *gh, int64_t hs, const T *s, T *o, T *t, int64_t n) \
    {                                                                                              \
        T *t0 = t, *t1 = t + n;                                                                    \
        for (int64_t j = 0; j < n; j++) {                                                          \
            t0[j] = gx[xs + j] + gh[hs + j]; /* o */                                               \
            t1[j] = s[j];                                                                          \
        }                                                                                          \
        SIG_N(t0, n);                                                                              \
        TANH_N(t1, n);                                                                             \
        for (int64_t j = 0; j < n; j++)                                                            \
            o[j] = t0[j] * t1[j];                                                                  \
    }                                                                                              \
    /* GRU_CELL: the new output from the previous one, s */                                        \
    static void gru_##SFX(const T *gx, int64_t xs, const T *gh, int64_t hs, const T *s, T *o, T *t, int64_t n) \
    {                                                                                              \
        T *t0 = t, *t1 = t + n, *t2 = t + 2 * n;                                                   \
        for (int64_t j = 0; j < n; j++) {                                                          \
            t0[j] = gx[j] + gh[j];           /* z */                                               \
            t1[j] = gx[xs + j] + gh[hs + j]; /* r */                                               \
        }                                                                                          \
        SIG_N(t0, n);                                                                              \
        SIG_N(t1, n);                                                                              \
        for (int64_t j = 0; j < n; j++) {                                                          \
            const T rg = t1[j] * gh[2 * hs + j]; /* apart: never contracted into an FMA */         \
            t2[j] = gx[2 * xs + j] + rg;                                                           \
        }                                                                                          \
        TANH_N(t2, n);                                                                             \
        for (int64_t j = 0; j < n; j++) {                                                          \
            const T a = (1 - t0[j]) * t2[j], c = t0[j] * s[j];                                     \
            o[j] = a + c;                                                                          \
        }                                                                                          \
    }
CELL_ROW_FNS(float, f32, sig_n_f32, tanh_n_f32)
CELL_ROW_FNS(double, f64, sig_n_f64, tanh_n_f64)
#undef CELL_ROW_FNS

typedef void cell_row_f32(const float *gx, int64_t xs, const float *gh, int64_t hs, const float *s, float *o, float *t,
                          int64_t n);
typedef void cell_row_f64(const double *gx, int64_t xs, const double *gh, int64_t hs, const double *s, double *o,
                          double *t, int64_t n);

/* B rows of one cell op: gates gx, gh [B, G*H] (gx's rows gx_ld apart), states
 * s [B, H], results o [B, H]; t scratch of 3H elements */
static void cell_rows(uint8_t dtype, isa_op op, int64_t B, int64_t H, const void *gx, int64_t gx_ld, const void *gh,
                      const void *s, void *o, void *t)
{
    const int64_t G = op == ISA_GRU_CELL ? 3 : 4;
    if (dtype == TFVM_F32) {
        cell_row_f32 *fn = op == ISA_LSTM_CELL_C ? lstm_c_f32 : op == ISA_LSTM_CELL_H ? lstm_h_f32 : gru_f32;
        for (int64_t b = 0; b < B; b++)
            fn((const float *)gx + b * gx_ld, H, (const float *)gh + b * G * H, H, (const float *)s + b * H,
               (float *)o + b * H, t, H);
    } else {
        cell_row_f64 *fn = op == ISA_LSTM_CELL_C ? lstm_c_f64 : op == ISA_LSTM_CELL_H ? lstm_h_f64 : gru_f64;
        for (int64_t b = 0; b < B; b++)
            fn((const double *)gx + b * gx_ld, H, (const double *)gh + b * G * H, H, (const double *)s + b * H,
               (double *)o + b * H, t, H);
    }
}

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
        cell_rows(st->dtype, k->op, B, H, xw->data, G * H, in[1].data, st->data, out_data, tmp);
        dev_ktemp_free(k, tmp, (size_t)(3 * H), esz);
    }
    *out = r;
    return TFVM_OK;
}

/* ---- LSTM_STEP, GRU_STEP ----------------------------------------------------------
 * hr = h @ r^T + rb, then the cells of rows t of xw. f32: r packed once
 * by blocks of units (sgemm.h, DEV_SG_GATE_UNITS) and kept with r's tensor
 * (dev_tensor_prep; packed into scratch on every step when r has no tensor
 * of its own), one row's for dev_sgemv_gates_part, several rows' for
 * dev_sgemm_packed; the product of a few blocks followed at once by
 * their units' gate math, while their gates are in cache; the blocks split
 * over the VM's idle workers, each worker's part a product and its gate
 * math, with the bits of the whole. Odd steps run the blocks last first:
 * a step then starts on the weights the step before read last, still in
 * cache, where weights larger than a cache level (an LSTM of 512 units
 * has 4 MB of them) would otherwise all stream from the level below on
 * every step (measured: such a layer's steps 25-30% faster; the same
 * bits). f64: the sums in order, as they come, then the cells. */
/* A step's product of at least this many multiply-adds may be split over
 * threads: its weights (256 KB for [1, 128] x [128, 512]) stream from each
 * core's own cache in half the time, where the handoff between cores costs
 * less than that saves (timed: dev_par_tune_split) */
#define STEP_SPLIT_MACS (INT64_C(1) << 15)

typedef struct step_pack {
    bool row; /* for dev_sgemv_gates_part (one row), else dev_sgemm_packed */
    int64_t G, H;
    const float *r;
} step_pack;

static void step_pack_make(void *ctx, void *out)
{
    const step_pack *p = ctx;
    if (p->row)
        dev_sgemv_gates_pack(p->G, p->H, p->H, p->r, out);
    else
        dev_sgemm_pack_gates(p->G, p->H, p->H, p->r, out);
}

/* r [G * H, H] packed for one row or several: the form kept with its
 * tensor, else packed into *own (scratch of *floats); NULL when memory
 * runs out */
static const float *step_packed(dev_kctx *k, const dev_kview *rv, bool row, int64_t G, int64_t H, float **own,
                                size_t *floats)
{
    const struct {
        int64_t tag, nr, row, G, H, offset;
    } key = {0x726e5231 /* "rnR1" */, dev_sgemm_nr(), row, G, H,
             rv->t ? (const char *)rv->data - (const char *)rv->t->data : 0};
    step_pack job = {row, G, H, rv->data};
    *own = NULL;
    *floats = row ? dev_sgemv_gates_floats(G, H, H)
                  : dev_sgemm_packed_floats((int64_t)dev_sgemv_gates_floats(G, H, 1), H);
    const float *bp =
        rv->t ? dev_tensor_prep(rv->t, &key, sizeof key, *floats * sizeof(float), step_pack_make, &job) : NULL;
    if (!bp && (*own = dev_ktemp(k, *floats, sizeof(float)))) {
        step_pack_make(&job, *own);
        bp = *own;
    }
    return bp;
}

/* An f32 step over blocks of units: each block's product, its bias, its
 * gate math, row by row. Row b's h, c (the previous cell state, LSTM), the
 * new h and c at b * H, its input gates at b * G * H; several rows'
 * product into hr [B, Np] (the blocked order, Np columns). */
typedef struct step_job {
    bool lstm, down; /* down: the blocks last first (odd steps) */
    int64_t B, G, H, Np;
    const float *h, *c, *bp, *rb, *gx;
    float *oh, *oc, *hr;
    atomic_bool nomem; /* a part's gemm could not have its packing buffer */
} step_job;

/* The gate math of nb whole blocks of one row (nb * DEV_SG_GATE_UNITS
 * units, nb <= CELL_BLOCKS), 4 lanes at a time: the cell functions'
 * expressions in their order (the bias added to the product first, as
 * FUSED_MATMUL's), all their sigmoids in one call and their tanhs in
 * another (several vectors in flight), so the same bits. gx: the first
 * unit's input gates (gate stride H), hr the blocks' product (gate stride
 * U, blocks G * U apart). */
enum { U = DEV_SG_GATE_UNITS, LN = 4, CELL_BLOCKS = 4 };
typedef dev_f4 rv4; /* LN lanes */
/* the input gate plus the biased product of gate g, unit u (4 lanes) */
static inline rv4 gate_pre(const step_job *jb, const float *gx, const float *hr, int64_t u0, int g, int64_t u)
{
    const rv4 gh = dev_f4_ld(hr + u / U * jb->G * U + g * U + u % U) + dev_f4_ld(jb->rb + g * jb->H + u0 + u);
    return dev_f4_ld(gx + g * jb->H + u) + gh;
}

/* row b's units [u0, u0 + n) */
static void lstm_blocks(const step_job *jb, int64_t b, int64_t u0, int64_t n, const float *hr)
{
    const int64_t at = b * jb->H + u0;
    const float *gx = jb->gx + b * jb->G * jb->H + u0, *c = jb->c + at;
    /* sigmoid(i f o), then tanh(c gate), then tanh(c') */
    _Alignas(64) float sg[3 * CELL_BLOCKS * U], tg[CELL_BLOCKS * U];
    if (n <= 0)
        return;
    for (int64_t u = 0; u < n; u += LN) {
        dev_f4_st(sg + u, gate_pre(jb, gx, hr, u0, 0, u));         /* i */
        dev_f4_st(sg + n + u, gate_pre(jb, gx, hr, u0, 2, u));     /* f */
        dev_f4_st(sg + 2 * n + u, gate_pre(jb, gx, hr, u0, 1, u)); /* o */
        dev_f4_st(tg + u, gate_pre(jb, gx, hr, u0, 3, u));         /* c */
    }
    dev_sigmoidf_n(sg, sg, (size_t)(3 * n));
    dev_tanhf_n(tg, tg, (size_t)n);
    for (int64_t u = 0; u < n; u += LN) {
        const rv4 a = dev_f4_ld(sg + n + u) * dev_f4_ld(c + u), e = dev_f4_ld(sg + u) * dev_f4_ld(tg + u), cn = a + e;
        dev_f4_st(jb->oc + at + u, cn);
        dev_f4_st(tg + u, cn);
    }
    dev_tanhf_n(tg, tg, (size_t)n);
    for (int64_t u = 0; u < n; u += LN)
        dev_f4_st(jb->oh + at + u, dev_f4_ld(sg + 2 * n + u) * dev_f4_ld(tg + u));
}

static void gru_blocks(const step_job *jb, int64_t b, int64_t u0, int64_t n, const float *hr)
{
    const int64_t at = b * jb->H + u0;
    const float *gx = jb->gx + b * jb->G * jb->H + u0, *h = jb->h + at;
    _Alignas(64) float sg[2 * CELL_BLOCKS * U], tg[CELL_BLOCKS * U]; /* sigmoid(z r), tanh(h gate) */
    if (n <= 0)
        return;
    for (int64_t u = 0; u < n; u += LN) {
        dev_f4_st(sg + u, gate_pre(jb, gx, hr, u0, 0, u));     /* z */
        dev_f4_st(sg + n + u, gate_pre(jb, gx, hr, u0, 1, u)); /* r */
    }
    dev_sigmoidf_n(sg, sg, (size_t)(2 * n));
    for (int64_t u = 0; u < n; u += LN) {
        const rv4 gh = dev_f4_ld(hr + u / U * 3 * U + 2 * U + u % U) + dev_f4_ld(jb->rb + 2 * jb->H + u0 + u);
        const rv4 rg = dev_f4_ld(sg + n + u) * gh;
        dev_f4_st(tg + u, dev_f4_ld(gx + 2 * jb->H + u) + rg);
    }
    dev_tanhf_n(tg, tg, (size_t)n);
    for (int64_t u = 0; u < n; u += LN) {
        const rv4 z = dev_f4_ld(sg + u), a = (1 - z) * dev_f4_ld(tg + u), e = z * dev_f4_ld(h + u);
        dev_f4_st(jb->oh + at + u, a + e);
    }
}

/* Row b's gate math of blocks [blk, blk + nb), nb <= CELL_BLOCKS, their
 * product at hr (written over) */
static void step_cells(const step_job *j, int64_t b, int64_t blk, int64_t nb, float *hr)
{
    const int64_t u0 = blk * U, left = j->H - u0, whole = left < nb * U ? left / U : nb;
    if (whole)
        (j->lstm ? lstm_blocks : gru_blocks)(j, b, u0, whole * U, hr);
    if (whole == nb)
        return;
    /* the last n = H % U units (gate stride n): the cells' code, in place */
    float t[3 * U];
    const int64_t n = left - whole * U, at = b * j->H + u0 + whole * U;
    const float *gx = j->gx + b * j->G * j->H + u0 + whole * U;
    hr += whole * j->G * U;
    for (int64_t g = 0; g < j->G; g++) /* as FUSED_MATMUL's bias */
        for (int64_t u = 0; u < n; u++)
            hr[g * n + u] = hr[g * n + u] + j->rb[g * j->H + u0 + whole * U + u];
    if (j->lstm) {
        lstm_c_f32(gx, j->H, hr, n, j->c + at, j->oc + at, t, n);
        lstm_h_f32(gx, j->H, hr, n, j->oc + at, j->oh + at, t, n);
    } else {
        gru_f32(gx, j->H, hr, n, j->h + at, j->oh + at, t, n);
    }
}

static void step_blocks(void *arg, size_t b0, size_t b1)
{
    step_job *j = arg;
    if (j->B == 1) {
        /* every other step last block first (dev_sgemv_gates_part) */
        _Alignas(64) float hr[CELL_BLOCKS * 4 * U];
        const int64_t blocks = (int64_t)(b1 - b0);
        for (int64_t done = 0, nb; done < blocks; done += nb) {
            nb = blocks - done < CELL_BLOCKS ? blocks - done : CELL_BLOCKS;
            const int64_t blk = j->down ? (int64_t)b1 - done - nb : (int64_t)b0 + done;
            dev_sgemv_gates_part(j->G, j->H, j->H, j->h, j->bp, hr, blk, blk + nb, j->down);
            step_cells(j, 0, blk, nb, hr);
        }
        return;
    }
    /* several rows: the product (every other step last block first), then the gate math */
    const int64_t c0 = (int64_t)b0 * j->G * U, w = ((int64_t)b1 * U < j->H ? (int64_t)b1 * j->G * U : j->Np) - c0;
    if (!dev_sgemm_packed_down(j->down, false, j->B, w, j->H, j->h, j->H, j->bp, c0, j->Np, j->hr + c0, j->Np,
                               NULL)) {
        atomic_store(&j->nomem, true);
        return;
    }
    for (int64_t b = 0; b < j->B; b++)
        for (int64_t blk = (int64_t)b0, nb; blk < (int64_t)b1; blk += nb) {
            nb = (int64_t)b1 - blk < CELL_BLOCKS ? (int64_t)b1 - blk : CELL_BLOCKS;
            step_cells(j, b, blk, nb, j->hr + b * j->Np + blk * j->G * U);
        }
}

/* An f32 step into o; false when memory runs out */
static bool step_f32(dev_kctx *k, const dev_kview *in, bool lstm, int64_t t, float *o)
{
    const int64_t G = lstm ? 4 : 3, B = in[2].dims[in[2].rank - 2], H = in[2].dims[in[2].rank - 1];
    const int64_t nb = dev_sgemv_gates_blocks(H), Np = (int64_t)dev_sgemv_gates_floats(G, H, 1);
    const float *h = in[2].data;
    float *own;
    size_t floats;
    const float *bp = step_packed(k, &in[3], B == 1, G, H, &own, &floats);
    float *hr = bp && B > 1 ? dev_ktemp(k, (size_t)(B * Np), sizeof(float)) : NULL;
    if (!bp || (B > 1 && !hr)) {
        if (own)
            dev_ktemp_free(k, own, floats, sizeof(float));
        return false;
    }
    step_job job = {lstm, t & 1, B, G, H, Np, h, h + B * H, bp, in[4].data, (const float *)in[0].data + t * B * G * H,
                    o, o + B * H, hr, false};
    /* split or whole as timed on this machine (par.h), per weights: the
     * bits are the same */
    const unsigned width = dev_par_width();
    dev_par_trial trial;
    if (width > 1 && nb > 1 && B * G * H * H >= STEP_SPLIT_MACS) {
        if (dev_par_tune_split(in[3].t, &trial))
            dev_par_for((size_t)nb, (size_t)(nb + width - 1) / width, step_blocks, &job);
        else
            step_blocks(&job, 0, (size_t)nb);
        dev_par_tune_done(&trial);
    } else {
        step_blocks(&job, 0, (size_t)nb);
    }
    if (hr)
        dev_ktemp_free(k, hr, (size_t)(B * Np), sizeof(float));
    if (own)
        dev_ktemp_free(k, own, floats, sizeof(float));
    if (atomic_load(&job.nomem))
        dev_kfail(k, TFVM_ERR_NOMEM, "out of memory (the product's packing buffer)");
    return !atomic_load(&job.nomem);
}

static void step_product_f64(int64_t B, int64_t N, int64_t K, const double *h, const double *r, double *hr)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t p = 0; p < K; p++)
                acc += h[b * K + p] * r[j * K + p];
            hr[b * N + j] = acc;
        }
}

/* hr [B, N] += rb [N], as FUSED_MATMUL's bias */
static void step_bias_f64(int64_t B, int64_t N, const double *rb, double *hr)
{
    for (int64_t i = 0; i < B; i++, hr += N)
        for (int64_t j = 0; j < N; j++)
            hr[j] = hr[j] + rb[j];
}

/* The operands' shapes against the state's (B, H from it) */
static tfvm_status step_check(dev_kctx *k, const dev_kview *in, int64_t G, int64_t *t)
{
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    const dev_kview *xw = &in[0], *st = &in[2], *r = &in[3], *rb = &in[4];
    const bool lstm = k->op == ISA_LSTM_STEP;
    if (!dev_kfloat(xw->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "not defined on %s (floats only)", tfvm_dtype_name((tfvm_dtype)xw->dtype));
    for (int i = 2; i < 5; i++)
        if (in[i].dtype != xw->dtype)
            return dev_kfail(k, TFVM_ERR_TYPE, "dtype mismatch: %s and %s", dev_kdesc(xw, s1), dev_kdesc(&in[i], s2));
    tfvm_status s = dev_kscalar_i64(k, &in[1], "the step", false, t);
    if (s)
        return s;
    if (st->rank != (lstm ? 3 : 2) || (lstm && st->dims[0] != 2))
        return dev_kfail(k, TFVM_ERR_SHAPE, "the state must be %s, got %s", lstm ? "[2, B, H] (h and c)" : "[B, H]",
                         dev_kshape(st, s1));
    const int64_t B = st->dims[st->rank - 2], H = st->dims[st->rank - 1];
    if (xw->rank != 3 || xw->dims[1] != B || xw->dims[2] != G * H)
        return dev_kfail(k, TFVM_ERR_SHAPE, "input gates %s must be [T, %lld, %lld] (%lld gates of the state %s)",
                         dev_kshape(xw, s1), (long long)B, (long long)(G * H), (long long)G, dev_kshape(st, s2));
    if (r->rank != 2 || r->dims[0] != G * H || r->dims[1] != H)
        return dev_kfail(k, TFVM_ERR_SHAPE, "weights %s must be [%lld, %lld] (%lld gates of the state %s)",
                         dev_kshape(r, s1), (long long)(G * H), (long long)H, (long long)G, dev_kshape(st, s2));
    if (rb->rank != 1 || rb->dims[0] != G * H)
        return dev_kfail(k, TFVM_ERR_SHAPE, "bias %s must be [%lld] (%lld gates of the state %s)", dev_kshape(rb, s1),
                         (long long)(G * H), (long long)G, dev_kshape(st, s2));
    if (*t < 0 || *t >= xw->dims[0])
        return dev_kfail(k, TFVM_ERR_SHAPE, "step %lld out of range for input gates %s", (long long)*t,
                         dev_kshape(xw, s1));
    return TFVM_OK;
}

tfvm_status dev_cpu_rnn_step(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const bool lstm = k->op == ISA_LSTM_STEP;
    const int64_t G = lstm ? 4 : 3;
    int64_t t;
    tfvm_status s = step_check(k, in, G, &t);
    if (s)
        return s;
    const dev_kview *st = &in[2];
    const uint8_t dt = st->dtype;
    const int64_t B = st->dims[st->rank - 2], H = st->dims[st->rank - 1], N = G * H;
    dev_value r;
    void *o;
    if ((s = dev_kresult(k, dt, st->rank, st->dims, &r, &o)))
        return s;
    if (B == 0 || H == 0) {
        *out = r;
        return TFVM_OK;
    }
    if (dt == TFVM_F32) {
        if (!step_f32(k, in, lstm, t, o)) {
            dev_value_release(&r);
            return TFVM_ERR_NOMEM;
        }
        *out = r;
        return TFVM_OK;
    }
    /* f64 */
    const size_t nt = (size_t)(B * N + 3 * H);
    double *hr = dev_ktemp(k, nt, sizeof *hr);
    if (!hr) {
        dev_value_release(&r);
        return TFVM_ERR_NOMEM;
    }
    const double *h = st->data;
    step_product_f64(B, N, H, h, in[3].data, hr);
    step_bias_f64(B, N, in[4].data, hr);
    const double *gx = (const double *)in[0].data + t * B * N;
    if (lstm) {
        /* s' = [h', c']: the cell state first, then the output from it */
        double *c_new = (double *)o + B * H;
        cell_rows(dt, ISA_LSTM_CELL_C, B, H, gx, N, hr, h + B * H, c_new, hr + B * N);
        cell_rows(dt, ISA_LSTM_CELL_H, B, H, gx, N, hr, c_new, o, hr + B * N);
    } else {
        cell_rows(dt, ISA_GRU_CELL, B, H, gx, N, hr, h, o, hr + B * N);
    }
    dev_ktemp_free(k, hr, nt, sizeof *hr);
    *out = r;
    return TFVM_OK;
}
