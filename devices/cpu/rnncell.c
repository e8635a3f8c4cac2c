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
#include "devices/cpu/kern.h"
#include "devices/cpu/act.h"
#include "devices/cpu/par.h"
#include "devices/cpu/sgemm.h"
#include "devices/tensor.h"

#include <math.h>
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
 * and kept with r's tensor (dev_tensor_prep; packed into scratch on every
 * step when r has no tensor of its own). One row: r packed by blocks of
 * units (dev_sgemv_gates_pack), each block's product followed at once by
 * its units' gate math, while its gates are in cache; the blocks split over
 * the VM's idle workers, each worker's part a product and its gate math,
 * with the bits of the whole. Several rows: r^T packed for
 * dev_sgemm_packed, then the cells. f64: the sums in order, as they come. */
/* A row's product of at least this many multiply-adds is split over
 * threads: its weights (256 KB for [1, 128] x [128, 512]) stream from each
 * core's own cache in half the time */
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
        dev_sgemm_pack(true, p->G * p->H, p->H, p->r, p->H, out);
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
    *floats = row ? dev_sgemv_gates_floats(G, H, H) : dev_sgemm_packed_floats(G * H, H);
    const float *bp =
        rv->t ? dev_tensor_prep(rv->t, &key, sizeof key, *floats * sizeof(float), step_pack_make, &job) : NULL;
    if (!bp && (*own = dev_ktemp(k, *floats, sizeof(float)))) {
        step_pack_make(&job, *own);
        bp = *own;
    }
    return bp;
}

/* One row's step over blocks of units: each block's product, its bias,
 * its gate math */
typedef struct step_row_job {
    bool lstm;
    int64_t G, H;
    const float *h, *c, *bp, *rb, *gx; /* c: the previous cell state (LSTM) */
    float *oh, *oc;                     /* the new h (and c) */
} step_row_job;

/* A whole block's gate math, DEV_SG_GATE_UNITS units, 4 lanes at a time:
 * the cell functions' expressions in their order (the bias added to the
 * product first, as FUSED_MATMUL's), the sigmoids of a block in one call
 * and its tanhs in another, so the same bits. gx: the block's first unit
 * of the input gates (gate stride H), hr its product (gate stride U). */
enum { U = DEV_SG_GATE_UNITS, LN = 4 };
typedef float rv4 __attribute__((vector_size(LN * sizeof(float))));
static inline rv4 rv4_ld(const float *p)
{
    rv4 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void rv4_st(float *p, rv4 v) { memcpy(p, &v, sizeof v); }
/* the input gate plus the biased product of gate g, lanes [j, j + 4) */
static inline rv4 gate_pre(const step_row_job *jb, const float *gx, const float *hr, int64_t u0, int g, int j)
{
    const rv4 gh = rv4_ld(hr + g * U + j) + rv4_ld(jb->rb + g * jb->H + u0 + j);
    return rv4_ld(gx + g * jb->H + j) + gh;
}

static void lstm_block(const step_row_job *jb, int64_t u0, const float *hr)
{
    const float *gx = jb->gx + u0, *c = jb->c + u0;
    float sg[3 * U], tg[U]; /* sigmoid(i f o), then tanh(c gate), then tanh(c') */
    for (int j = 0; j < U; j += LN) {
        rv4_st(sg + j, gate_pre(jb, gx, hr, u0, 0, j));         /* i */
        rv4_st(sg + U + j, gate_pre(jb, gx, hr, u0, 2, j));     /* f */
        rv4_st(sg + 2 * U + j, gate_pre(jb, gx, hr, u0, 1, j)); /* o */
        rv4_st(tg + j, gate_pre(jb, gx, hr, u0, 3, j));         /* c */
    }
    dev_sigmoidf_n(sg, sg, 3 * U);
    dev_tanhf_n(tg, tg, U);
    for (int j = 0; j < U; j += LN) {
        const rv4 a = rv4_ld(sg + U + j) * rv4_ld(c + j), b = rv4_ld(sg + j) * rv4_ld(tg + j), cn = a + b;
        rv4_st(jb->oc + u0 + j, cn);
        rv4_st(tg + j, cn);
    }
    dev_tanhf_n(tg, tg, U);
    for (int j = 0; j < U; j += LN)
        rv4_st(jb->oh + u0 + j, rv4_ld(sg + 2 * U + j) * rv4_ld(tg + j));
}

static void gru_block(const step_row_job *jb, int64_t u0, const float *hr)
{
    const float *gx = jb->gx + u0, *h = jb->h + u0;
    float sg[2 * U], tg[U]; /* sigmoid(z r), tanh(h gate) */
    for (int j = 0; j < U; j += LN) {
        rv4_st(sg + j, gate_pre(jb, gx, hr, u0, 0, j));     /* z */
        rv4_st(sg + U + j, gate_pre(jb, gx, hr, u0, 1, j)); /* r */
    }
    dev_sigmoidf_n(sg, sg, 2 * U);
    for (int j = 0; j < U; j += LN) {
        const rv4 gh = rv4_ld(hr + 2 * U + j) + rv4_ld(jb->rb + 2 * jb->H + u0 + j), rg = rv4_ld(sg + U + j) * gh;
        rv4_st(tg + j, rv4_ld(gx + 2 * jb->H + j) + rg);
    }
    dev_tanhf_n(tg, tg, U);
    for (int j = 0; j < U; j += LN) {
        const rv4 z = rv4_ld(sg + j), a = (1 - z) * rv4_ld(tg + j), b = z * rv4_ld(h + j);
        rv4_st(jb->oh + u0 + j, a + b);
    }
}

static void step_row_blocks(void *arg, size_t b0, size_t b1)
{
    const step_row_job *j = arg;
    float hr[4 * U], t[3 * U];
    for (int64_t b = (int64_t)b0; b < (int64_t)b1; b++) {
        const int64_t u0 = b * U, n = j->H - u0 < U ? j->H - u0 : U;
        dev_sgemv_gates_part(j->G, j->H, j->h, j->bp, hr, b, b + 1);
        if (n == U) {
            (j->lstm ? lstm_block : gru_block)(j, u0, hr);
            continue;
        }
        /* the last units of a state of H % U: the cells' code, in place */
        for (int64_t g = 0; g < j->G; g++) /* as FUSED_MATMUL's bias */
            for (int64_t u = 0; u < n; u++)
                hr[g * U + u] = hr[g * U + u] + j->rb[g * j->H + u0 + u];
        if (j->lstm) {
            lstm_c_f32(j->gx + u0, j->H, hr, U, j->c + u0, j->oc + u0, t, n);
            lstm_h_f32(j->gx + u0, j->H, hr, U, j->oc + u0, j->oh + u0, t, n);
        } else {
            gru_f32(j->gx + u0, j->H, hr, U, j->h + u0, j->oh + u0, t, n);
        }
    }
}

static void step_row(const step_row_job *job)
{
    const int64_t nb = dev_sgemv_gates_blocks(job->H);
    const unsigned width = dev_par_width();
    if (width > 1 && nb > 1 && job->G * job->H * job->H >= STEP_SPLIT_MACS)
        dev_par_for((size_t)nb, (size_t)(nb + width - 1) / width, step_row_blocks, (void *)job);
    else
        step_row_blocks((void *)job, 0, (size_t)nb);
}

/* hr [B, N] = h [B, K] @ r^T, r [N, K], several rows; false when memory
 * runs out */
static bool step_product_f32(dev_kctx *k, const dev_kview *rv, int64_t B, int64_t G, int64_t H, const float *h,
                             float *hr)
{
    float *own;
    size_t floats;
    const float *bp = step_packed(k, rv, false, G, H, &own, &floats);
    bool ok = bp && dev_sgemm_packed(B, G * H, H, h, H, bp, 0, G * H, hr, G * H, NULL);
    if (bp && !ok)
        dev_kfail(k, TFVM_ERR_NOMEM, "out of memory (the product's packing buffer)");
    if (own)
        dev_ktemp_free(k, own, floats, sizeof(float));
    return ok;
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
static void step_bias(uint8_t dtype, int64_t B, int64_t N, const void *rb, void *hr)
{
    if (dtype == TFVM_F32) {
        float *h = hr;
        const float *b = rb;
        for (int64_t i = 0; i < B; i++, h += N)
            for (int64_t j = 0; j < N; j++)
                h[j] = h[j] + b[j];
    } else {
        double *h = hr;
        const double *b = rb;
        for (int64_t i = 0; i < B; i++, h += N)
            for (int64_t j = 0; j < N; j++)
                h[j] = h[j] + b[j];
    }
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

/* An f32 step of one row into o; false when memory runs out */
static bool step_row_f32(dev_kctx *k, const dev_kview *in, bool lstm, int64_t t, float *o)
{
    const int64_t G = lstm ? 4 : 3, H = in[2].dims[in[2].rank - 1];
    const float *h = in[2].data;
    float *own;
    size_t floats;
    const step_row_job job = {lstm, G, H, h, h + H, step_packed(k, &in[3], true, G, H, &own, &floats), in[4].data,
                              (const float *)in[0].data + t * G * H, o, o + H};
    if (!job.bp)
        return false;
    step_row(&job);
    if (own)
        dev_ktemp_free(k, own, floats, sizeof(float));
    return true;
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
    if (dt == TFVM_F32 && B == 1) {
        if (!step_row_f32(k, in, lstm, t, o)) {
            dev_value_release(&r);
            return TFVM_ERR_NOMEM;
        }
        *out = r;
        return TFVM_OK;
    }
    const size_t esz = dev_kesize(dt), nt = (size_t)(B * N + 3 * H);
    char *hr = dev_ktemp(k, nt, esz);
    if (!hr) {
        dev_value_release(&r);
        return TFVM_ERR_NOMEM;
    }
    char *tmp = hr + (size_t)(B * N) * esz;
    bool ok = true;
    if (dt == TFVM_F32)
        ok = step_product_f32(k, &in[3], B, G, H, st->data, (float *)(void *)hr);
    else
        step_product_f64(B, N, H, st->data, in[3].data, (double *)(void *)hr);
    if (ok) {
        step_bias(dt, B, N, in[4].data, hr);
        const char *gx = (const char *)in[0].data + (size_t)(t * B * N) * esz;
        if (lstm) {
            /* s' = [h', c']: the cell state first, then the output from it */
            char *c_new = (char *)o + (size_t)(B * H) * esz;
            cell_rows(dt, ISA_LSTM_CELL_C, B, H, gx, N, hr, (const char *)st->data + (size_t)(B * H) * esz, c_new,
                      tmp);
            cell_rows(dt, ISA_LSTM_CELL_H, B, H, gx, N, hr, c_new, o, tmp);
        } else {
            cell_rows(dt, ISA_GRU_CELL, B, H, gx, N, hr, st->data, o, tmp);
        }
    }
    dev_ktemp_free(k, hr, nt, esz);
    if (!ok) {
        dev_value_release(&r);
        return TFVM_ERR_NOMEM;
    }
    *out = r;
    return TFVM_OK;
}
