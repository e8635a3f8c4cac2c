/* devices/cpu/fewch.c — f32 CONV2D of few input channels without im2col
 * (fewch.h). A CNN's first layer spent a third of its time making and
 * reading im2col's column matrix, and its product, with 16 or 32 output
 * channels and 27 sums an element, kept our gemm's 8 x 32 tile half fed:
 * 32 GFLOP/s for MobileNet's stem at batch 8. Here a band of output rows
 * at a time: its input rows split by column phase once (x[k*sw + ph] for
 * the phase ph < sw, zeros where the window reaches the pads), then for
 * each block of ob output channels and VL output columns, ob sums in
 * registers, one contiguous vector of inputs a tap against ob weights. */
#include "devices/cpu/vec.h"
#include "devices/cpu/fewch.h"
#include "devices/cpu/chw.h"
#include "devices/cpu/f4.h"
#include "devices/cpu/sgemm.h"
#include "devices/tensor.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

/* Output rows per band: with 3 channels at 112 output columns, a band's
 * split input (17 rows x 2 phases x 3 channels) and its output rows (16
 * channels) stay in L1/L2 */
#define FC_ROWS 8
/* A band's split input at most (floats; rows of millions of columns go to
 * im2col's panels instead) */
#define FC_MAX_SCRATCH (INT64_C(1) << 24)

static atomic_int forced;

void dev_fc_force(int path) { atomic_store(&forced, path); }

/* The gemm's instruction set (dev_sg_best), so that its sums are ours */
static int best_path(void)
{
    const dev_sg_isa isa = dev_sg_best();
    return isa == DEV_SG_AVX512 ? 0 : isa == DEV_SG_AVX2 ? 1 : 2;
}

static const int64_t path_vl[3] = {16, 8, 4};
static const int64_t path_ob[3] = {16, 6, 8}; /* (FC_BAND's OB on each path) */

const char *dev_fc_isa_name(const dev_fc *f)
{
    static const char *const names[3] = {"AVX-512", "AVX2", "portable"};
    return names[f->path >= 0 && f->path < 3 ? f->path : 2];
}

/* Input rows a band of `rows` output rows reads */
static int64_t band_in_rows(const dev_fc *f, int64_t rows) { return (rows - 1) * f->sh + (f->KH - 1) * f->dh + 1; }

bool dev_fc_plan(dev_fc *f)
{
    const int64_t K = f->C * f->KH * f->KW;
    const int force = atomic_load(&forced), best = best_path();
    const int path = force > best ? force : best;
    if (f->C < 1 || f->C > DEV_FC_MAX_C || K > DEV_FC_MAX_TAPS || f->O < 1 || f->OH < 1 || f->OW < path_vl[path])
        return false;
    f->path = path;
    f->vl = path_vl[path];
    f->ob = path == 1 && f->O % 6 && f->O % 6 <= 2 ? 4 : path_ob[path];
    f->rows = f->OH < FC_ROWS ? f->OH : FC_ROWS;
    /* a row's last vector starts at the last block of vl columns and reads
     * past it by the window's reach in its phase */
    f->wq = (f->OW + f->vl - 1) / f->vl * f->vl + (f->KW - 1) * f->dw / f->sw + 1;
    f->scratch = f->C * band_in_rows(f, f->rows) * f->sw * f->wq;
    return f->scratch <= FC_MAX_SCRATCH;
}

static int64_t fc_bands(const dev_fc *f) { return (f->OH + f->rows - 1) / f->rows; }

int64_t dev_fc_items(const dev_fc *f) { return f->N * fc_bands(f); }

void dev_fc_band(const dev_fc *f, int64_t item, int64_t *n, int64_t *oh0, int64_t *oh1)
{
    const int64_t bands = fc_bands(f);
    *n = item / bands;
    *oh0 = item % bands * f->rows;
    *oh1 = *oh0 + f->rows < f->OH ? *oh0 + f->rows : f->OH;
}

size_t dev_fc_wk_floats(const dev_fc *f)
{
    return (size_t)((f->O + f->ob - 1) / f->ob * f->ob * f->C * f->KH * f->KW);
}

void dev_fc_pack(const dev_fc *f, const float *w, float *wk)
{
    const int64_t K = f->C * f->KH * f->KW, ob = f->ob;
    for (int64_t o0 = 0; o0 < f->O; o0 += ob, wk += K * ob)
        for (int64_t k = 0; k < K; k++)
            for (int64_t l = 0; l < ob; l++)
                wk[k * ob + l] = o0 + l < f->O ? w[(o0 + l) * K + k] : 0.0f;
}

typedef struct fc_pack_job {
    const dev_fc *f;
    const float *w;
} fc_pack_job;

static void fc_pack_make(void *ctx, void *out)
{
    const fc_pack_job *j = ctx;
    dev_fc_pack(j->f, j->w, out);
}

const float *dev_fc_pack_kept(const dev_fc *f, const float *w, const struct tfvm_tensor *wt)
{
    if (!wt)
        return NULL;
    const struct {
        int64_t tag, ob, O, K, offset;
    } key = {0x66634b30 /* "fcK0" */, f->ob, f->O, f->C * f->KH * f->KW, (const char *)w - (const char *)wt->data};
    fc_pack_job job = {f, w};
    return dev_tensor_prep(wt, &key, sizeof key, dev_fc_wk_floats(f) * sizeof(float), fc_pack_make, &job);
}

/* dst[k] = xr[k*sw + ph - pl] for k < wq, 0 where that is outside [0, W) */
static void split_row(const dev_fc *f, float *dst, const float *xr, int64_t ph)
{
    const int64_t sw = f->sw, s0 = ph - f->pl, wq = f->wq;
    int64_t k0 = s0 >= 0 ? 0 : (-s0 + sw - 1) / sw, k1 = f->W - s0 > 0 ? (f->W - s0 + sw - 1) / sw : 0;
    k0 = k0 < wq ? k0 : wq;
    k1 = k1 < k0 ? k0 : k1 < wq ? k1 : wq;
    memset(dst, 0, (size_t)k0 * sizeof *dst);
    memset(dst + k1, 0, (size_t)(wq - k1) * sizeof *dst);
    const float *src = xr + k0 * sw + s0;
    int64_t k = k0;
    if (sw == 1) {
        memcpy(dst + k0, src, (size_t)(k1 - k0) * sizeof *dst);
        return;
    }
    if (sw == 2) {
        /* vectors of evens while both of each pair are inside the row */
        int64_t n = (f->W - (k0 * 2 + s0)) / 2;
        n = n < k1 - k0 ? n : k1 - k0;
#if defined(__x86_64__) && defined(__GNUC__)
        if (f->path == 0) {
            n = n / 16 * 16;
            evens_v16(dst + k0, src, n);
        } else if (f->path == 1) {
            n = n / 8 * 8;
            evens_v8(dst + k0, src, n);
        } else
#endif
        {
            n = n / 4 * 4;
            evens_v4(dst + k0, src, n);
        }
        k += n;
    }
    for (; k < k1; k++)
        dst[k] = xr[k * sw + s0];
}

/* Output rows [oh0, oh1) of one image into o (its [O, OH*OW]) from the
 * band's split input xs: for each block of OB channels, tiles of CV
 * vectors of VL columns (then of 2 and of 1 where fewer columns are left),
 * the taps in w's order (toff: each tap's offset in xs), OB x CV sums in
 * registers, the product's multiply-add (FMA: fused or not as the gemm on
 * this path). A tap costs a load of toff, CV loads of x and OB broadcasts
 * of w for OB x CV multiply-adds: on AVX2, 8 channels by one vector (10
 * loads for 8) kept the FMA units half fed; 6 channels by two vectors (9
 * for 12: the 7x7 stem onto 64 channels 3.17 -> 2.62 ms) or, where blocks
 * of 6 would leave 4 or 5 lanes idle (O % 6 of 1 or 2: 32 channels), 4 by
 * three (8 for 12: the 3x3 stem onto 32 channels 0.38 -> 0.345 ms). */
#define FC_TILE(VT, VL, OB, CV, ZERO, BCAST, LOAD, FMA)                                                          \
    VT acc[OB][CV];                                                                                              \
    _Pragma("GCC unroll 16") for (int l = 0; l < (OB); l++)                                                     \
        _Pragma("GCC unroll 4") for (int v = 0; v < (CV); v++) acc[l][v] = ZERO;                                 \
    const float *wp = wb, *xq = xrow + q0;                                                                       \
    for (int64_t k = 0; k < K; k++, wp += (OB)) {                                                                \
        VT xv[CV];                                                                                               \
        _Pragma("GCC unroll 4") for (int v = 0; v < (CV); v++) xv[v] = LOAD(xq + toff[k] + v * (VL));           \
        _Pragma("GCC unroll 16") for (int l = 0; l < (OB); l++) {                                               \
            const VT wl = BCAST(wp[l]);                                                                          \
            _Pragma("GCC unroll 4") for (int v = 0; v < (CV); v++) acc[l][v] = FMA(wl, xv[v], acc[l][v]);       \
        }                                                                                                        \
    }
/* Whole tiles of W vectors from column q0 on while they fit the row, each
 * stored as it is done (no, the block's channels that exist) */
#define FC_RUN(VT, VL, OB, W, ZERO, BCAST, LOAD, STORE, FMA)                                                     \
    for (; q0 + (W) * (VL) <= OW; q0 += (W) * (VL)) {                                                            \
        FC_TILE(VT, VL, OB, W, ZERO, BCAST, LOAD, FMA)                                                           \
        /* (loops of constant bounds: acc stays in registers) */                                                 \
        _Pragma("GCC unroll 16") for (int l = 0; l < (OB); l++) if (l < no)                                     \
            _Pragma("GCC unroll 4") for (int v = 0; v < (W); v++)                                               \
                STORE(orow + l * OHW + q0 + v * (VL), acc[l][v]);                                                \
    }
#define FC_BAND(SFX, TARGET, VT, VL, OB, CV, ZERO, BCAST, LOAD, STORE, FMA)                                      \
    TARGET static void band_##SFX(const dev_fc *f, const float *xs, int64_t rstep, const int64_t *toff,           \
                                  const float *wk, float *o, int64_t oh0, int64_t oh1)                            \
    {                                                                                                            \
        const int64_t K = f->C * f->KH * f->KW, OW = f->OW, OHW = f->OH * OW;                                    \
        for (int64_t ob0 = 0; ob0 < f->O; ob0 += (OB)) {                                                         \
            const float *wb = wk + ob0 / (OB) * K * (OB);                                                        \
            const int64_t no = f->O - ob0 < (OB) ? f->O - ob0 : (OB);                                            \
            for (int64_t oh = oh0; oh < oh1; oh++) {                                                             \
                const float *xrow = xs + (oh - oh0) * rstep;                                                     \
                float *orow = o + ob0 * OHW + oh * OW;                                                           \
                int64_t q0 = 0;                                                                                  \
                FC_RUN(VT, VL, OB, CV, ZERO, BCAST, LOAD, STORE, FMA)                                            \
                if ((CV) > 2)                                                                                    \
                    FC_RUN(VT, VL, OB, 2, ZERO, BCAST, LOAD, STORE, FMA)                                         \
                if ((CV) > 1)                                                                                    \
                    FC_RUN(VT, VL, OB, 1, ZERO, BCAST, LOAD, STORE, FMA)                                         \
                if (q0 < OW) { /* the row's last columns, fewer than a vector */                                 \
                    FC_TILE(VT, VL, OB, 1, ZERO, BCAST, LOAD, FMA)                                               \
                    float t[OB][VL];                                                                             \
                    _Pragma("GCC unroll 16") for (int l = 0; l < (OB); l++) STORE(t[l], acc[l][0]);             \
                    for (int64_t l = 0; l < no; l++)                                                             \
                        memcpy(orow + l * OHW + q0, t[l], (size_t)(OW - q0) * sizeof *t[l]);                     \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
    }

#define V4_BC(w) ((dev_f4){(w), (w), (w), (w)})
#define V4_FMA(a, b, c) ((a) * (b) + (c)) /* the portable gemm's: not fused */
FC_BAND(v4, , dev_f4, 4, 8, 1, ((dev_f4){0, 0, 0, 0}), V4_BC, dev_f4_ld, dev_f4_st, V4_FMA)

#if defined(__x86_64__) && defined(__GNUC__)
FC_BAND(v8, __attribute__((target("avx2,fma"))), __m256, 8, 6, 2, _mm256_setzero_ps(), _mm256_set1_ps,
        _mm256_loadu_ps, _mm256_storeu_ps, _mm256_fmadd_ps)
FC_BAND(v8n, __attribute__((target("avx2,fma"))), __m256, 8, 4, 3, _mm256_setzero_ps(), _mm256_set1_ps,
        _mm256_loadu_ps, _mm256_storeu_ps, _mm256_fmadd_ps)
FC_BAND(v16, __attribute__((target("avx512f"))), __m512, 16, 16, 1, _mm512_setzero_ps(), _mm512_set1_ps,
        _mm512_loadu_ps, _mm512_storeu_ps, _mm512_fmadd_ps)
#endif

void dev_fc_run(const dev_fc *f, const float *x, const float *wk, float *o, int64_t b, int64_t e, float *scratch)
{
    int64_t toff[DEV_FC_MAX_TAPS];
    for (int64_t it = b; it < e; it++) {
        int64_t n, oh0, oh1;
        dev_fc_band(f, it, &n, &oh0, &oh1);
        const int64_t nrows = band_in_rows(f, oh1 - oh0);
        /* the band's input rows, each in sw phases; rows above and below x zeros */
        for (int64_t c = 0; c < f->C; c++)
            for (int64_t r = 0; r < nrows; r++) {
                const int64_t h = oh0 * f->sh - f->pt + r;
                float *dst = scratch + (c * nrows + r) * f->sw * f->wq;
                if (h < 0 || h >= f->H) {
                    memset(dst, 0, (size_t)(f->sw * f->wq) * sizeof *dst);
                    continue;
                }
                for (int64_t ph = 0; ph < f->sw; ph++)
                    split_row(f, dst + ph * f->wq, x + ((n * f->C + c) * f->H + h) * f->W, ph);
            }
        /* tap (c, i, j) of output row 0, column 0: input row i*dh of channel
         * c, column j*dw: its phase and column there */
        for (int64_t c = 0, k = 0; c < f->C; c++)
            for (int64_t i = 0; i < f->KH; i++)
                for (int64_t j = 0; j < f->KW; j++, k++) {
                    const int64_t xo = j * f->dw;
                    toff[k] = ((c * nrows + i * f->dh) * f->sw + xo % f->sw) * f->wq + xo / f->sw;
                }
        float *on = o + n * f->O * f->OH * f->OW;
        const int64_t rstep = f->sh * f->sw * f->wq;
#if defined(__x86_64__) && defined(__GNUC__)
        if (f->path == 0) {
            band_v16(f, scratch, rstep, toff, wk, on, oh0, oh1);
            continue;
        }
        if (f->path == 1) {
            (f->ob == 4 ? band_v8n : band_v8)(f, scratch, rstep, toff, wk, on, oh0, oh1);
            continue;
        }
#endif
        band_v4(f, scratch, rstep, toff, wk, on, oh0, oh1);
    }
}
