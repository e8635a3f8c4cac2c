/* devices/cpu/conv.c — CONV2D (NCHW input, OIHW weights; stride, 4-sided
 * padding, dilation, groups) as im2col + gemm, and MAXPOOL/AVGPOOL (with
 * ONNX's dilations, ceil_mode and count_include_pad). */
#include "devices/cpu/vec.h"
#include "devices/cpu/kern.h"
#include "devices/cpu/convf32.h"
#include "devices/cpu/convplan.h"
#include "devices/cpu/chw.h"
#include "devices/cpu/dwconv.h"
#include "devices/cpu/par.h"
#include "devices/cpu/sgemm.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

/* Whether this CPU runs the AVX-512 or AVX2 code below (im2col's shuffles,
 * the transposed product's layout changes; 2x2 pooling asks convplan.c). */
#if defined(__x86_64__) && defined(__GNUC__)
static bool have_avx512(void) { return __builtin_cpu_supports("avx512f"); }
static bool have_avx2(void) { return __builtin_cpu_supports("avx2"); }
#endif

/* Parameters and spatial dims are bounded so that no size arithmetic below
 * can overflow an int64. */
#define CONV_MAX (INT64_C(1) << 30)

static bool conv_in(int64_t v, int64_t lo) { return v >= lo && v <= CONV_MAX; }

/* Output extent of one spatial dim; false when the dilated window does not
 * fit the padded input. */
static bool conv_out(int64_t in, int64_t pad0, int64_t pad1, int64_t kernel, int64_t dil,
                     int64_t stride, int64_t *out)
{
    const int64_t span = dil * (kernel - 1) + 1, padded = in + pad0 + pad1;
    if (padded < span)
        return false;
    *out = (padded - span) / stride + 1;
    return true;
}

/* Output columns [lo, hi) whose input column ow*stride + off lies in [0, W). */
static void conv_valid(int64_t off, int64_t stride, int64_t W, int64_t OW, int64_t *lo, int64_t *hi)
{
    int64_t l = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int64_t h = W - 1 - off < 0 ? 0 : (W - 1 - off) / stride + 1;
    if (h > OW)
        h = OW;
    if (l > h)
        l = h;
    *lo = l;
    *hi = h;
}

/* col[(c*KH + i)*KW + j][oh*OW + ow] = x[c][oh*sh - pt + i*dh][ow*sw - pl + j*dw],
 * 0 in the padding. Rows are short (OW elements), so plain typed loops
 * beat memcpy/memset calls; unit stride gets its own loop. */
#define IM2COL(T)                                                                           \
    do {                                                                                    \
        T *cp = (T *)(void *)col;                                                           \
        const T *xp = (const T *)(const void *)x;                                           \
        for (int64_t c = 0; c < C; c++)                                                     \
            for (int64_t i = 0; i < KH; i++)                                                \
                for (int64_t j = 0; j < KW; j++) {                                          \
                    int64_t lo, hi;                                                         \
                    const int64_t off = j * dw - pl;                                        \
                    conv_valid(off, sw, W, OW, &lo, &hi);                                   \
                    for (int64_t oh = oh0; oh < oh1; oh++, cp += OW) {                      \
                        const int64_t h = oh * sh - pt + i * dh;                            \
                        if (h < 0 || h >= H || lo >= hi) {                                  \
                            for (int64_t ow = 0; ow < OW; ow++)                             \
                                cp[ow] = 0;                                                 \
                            continue;                                                       \
                        }                                                                   \
                        for (int64_t ow = 0; ow < lo; ow++)                                 \
                            cp[ow] = 0;                                                     \
                        /* the first input element inside: column lo */                     \
                        const T *xr = xp + (c * H + h) * W + lo * sw + off;                 \
                        T *o = cp + lo;                                                     \
                        if (sw == 1)                                                        \
                            for (int64_t q = 0; q < hi - lo; q++)                           \
                                o[q] = xr[q];                                               \
                        else {                                                              \
                            int64_t q = 0;                                                  \
                            if (sw == 2 && sizeof(T) == 4)                                  \
                                q = evens4(o, xr, hi - lo, W - (lo * sw + off));            \
                            for (; q < hi - lo; q++)                                        \
                                o[q] = xr[q * sw];                                          \
                        }                                                                   \
                        for (int64_t ow = hi; ow < OW; ow++)                                \
                            cp[ow] = 0;                                                     \
                    }                                                                       \
                }                                                                           \
    } while (0)

/* o[q] = x[2q] for the first q < n of 4-byte elements, x[0, avail)
 * readable: as many as vector shuffles take (chw.h); returns how many. */
static int64_t evens4(void *o, const void *x, int64_t n, int64_t avail)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_avx512()) { /* all that x holds: x[2(all - 1)] the last read */
        const int64_t all = n <= (avail + 1) / 2 ? n : (avail + 1) / 2;
        evens_v16_all(o, x, all, avail);
        return all;
    }
#endif
    int64_t v = n < avail / 2 ? n : avail / 2;
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_avx2()) {
        v = v / 8 * 8;
        evens_v8(o, x, v);
        return v;
    }
#endif
    v = v / 4 * 4;
    evens_v4(o, x, v);
    return v;
}

/* The column matrix of output rows [oh0, oh1): CKK rows of (oh1 - oh0) * OW */
static void im2col(char *col, const char *x, int64_t C, int64_t H, int64_t W, int64_t KH, int64_t KW, int64_t oh0,
                   int64_t oh1, int64_t OW, const int64_t *p, size_t esz)
{
    const int64_t sh = p[0], sw = p[1], pt = p[2], pl = p[3], dh = p[6], dw = p[7];
    if (esz == 4)
        IM2COL(uint32_t);
    else
        IM2COL(uint64_t);
}

/* One CONV2D: the (image, group) items are independent products
 * w_g [Og, CKK] @ col [CKK, OH*OW] into the result's channels of group g. */
typedef struct conv_job {
    const char *x, *w;
    char *o;
    const int64_t *p;
    const dev_kepi *ep;
    const tfvm_allocator *alloc;
    uint8_t dtype;
    size_t esz;
    int64_t N, C, H, W, O, Cg, G, KH, KW, OH, OW;
    bool direct; /* 1x1, stride 1, no padding: x is the column matrix */
    bool wide;   /* unit strides: the product on the wide grid (below) */
    bool split;  /* one item at a time, its product split over the threads */
    const dev_cf *cf; /* an f32 kernel without im2col (convf32.h), or NULL */
    int64_t item;     /* split mode with cf: the item whose parts are shared out */
    const float *ap;  /* w packed for the product (one group), or NULL */
    const float *bt;  /* tprod: w^T packed as the product's B, or NULL */
    bool taps;        /* tprod: bt tap-major, op(A) packed from xt, each tap a run of Cg channels */
    int64_t timgs;    /* tprod: images stacked in one product */
    int64_t prows, panels; /* a big column matrix: panels of prows output rows (below), or 0 */
    bool in_place;         /* o is r's memory (conv_in_place) */
    atomic_bool nomem;
} conv_job;

/* ---- Unit strides: the wide product ------------------------------------------------
 * With stride and dilation 1, pad x into xp [Cg, Hp, Wp] and compute the
 * output on the wide grid OH x Wp: wide[o][q] = sum over (c, i, j) of
 * w[o][c][i][j] * xp[c][q + i*Wp + j]. Each column-matrix row (c, i, j) is
 * then one contiguous run of xp, a memcpy of OH*Wp elements, instead of OH
 * runs of OW (3x3 on 14x14: 15x fewer copies); the product is (KW-1)/OW
 * wider, and its first OW of every Wp columns are the result, which the
 * epilogue copies out (with the bias and activation) while they are hot.
 * The last KW-1 elements of xp are zeros read only by discarded columns.
 * Taken (convplan.c) where output rows are at least 4x the window's width. */
#define PADROWS(T)                                                                          \
    do {                                                                                    \
        T *d = (T *)(void *)xp;                                                             \
        const T *sx = (const T *)(const void *)xg;                                          \
        for (int64_t c = 0; c < Cg; c++) {                                                  \
            for (int64_t q = 0; q < pt * Wp; q++)                                           \
                *d++ = 0;                                                                   \
            for (int64_t h = 0; h < H; h++, sx += W) {                                      \
                for (int64_t q = 0; q < pl; q++)                                            \
                    *d++ = 0;                                                               \
                for (int64_t q = 0; q < W; q++)                                             \
                    d[q] = sx[q];                                                           \
                d += W;                                                                     \
                for (int64_t q = 0; q < pr; q++)                                            \
                    *d++ = 0;                                                               \
            }                                                                               \
            for (int64_t q = 0; q < pb * Wp; q++)                                           \
                *d++ = 0;                                                                   \
        }                                                                                   \
        for (int64_t q = 0; q < KW; q++)                                                    \
            *d++ = 0;                                                                       \
    } while (0)

/* The first OW of every Wp columns of wide rows [o0, o1) into out. */
#define UNWIDE(T)                                                                           \
    do {                                                                                    \
        for (int64_t o = o0; o < o1; o++) {                                                 \
            const T *s = (const T *)(const void *)wide + o * OH * Wp;                       \
            T *d = (T *)(void *)og + o * OH * OW;                                           \
            for (int64_t oh = 0; oh < OH; oh++, s += Wp, d += OW)                           \
                for (int64_t q = 0; q < OW; q++)                                            \
                    d[q] = s[q];                                                            \
        }                                                                                   \
    } while (0)

/* One item on the wide grid; scratch holds xp, col and wide. */
static void conv_wide_item(const conv_job *j, const char *xg, const char *wg, char *og, int64_t row0, char *scratch)
{
    const int64_t Cg = j->Cg, H = j->H, W = j->W, KH = j->KH, KW = j->KW, OH = j->OH, OW = j->OW;
    const int64_t pt = j->p[2], pl = j->p[3], pb = j->p[4], pr = j->p[5];
    const int64_t Hp = H + pt + pb, Wp = W + pl + pr, Og = j->O / j->G, CKK = Cg * KH * KW, N = OH * Wp;
    const size_t esz = j->esz;
    char *xp = scratch, *col = xp + (size_t)(Cg * Hp * Wp + KW) * esz, *wide = col + (size_t)(CKK * N) * esz;
    if (esz == 4)
        PADROWS(uint32_t);
    else
        PADROWS(uint64_t);
    char *cr = col;
    for (int64_t c = 0; c < Cg; c++)
        for (int64_t i = 0; i < KH; i++)
            for (int64_t jj = 0; jj < KW; jj++, cr += (size_t)N * esz)
                memcpy(cr, xp + (size_t)(c * Hp * Wp + i * Wp + jj) * esz, (size_t)N * esz);
    const dev_kmm mm = {.dtype = j->dtype, .M = Og, .N = N, .K = CKK, .A = wg, .lda = CKK, .B = col, .ldb = N,
                        .C = wide, .ldc = N, .ap = j->ap};
    if (j->split)
        dev_kmm_run(&mm);
    else
        dev_kmm_one(&mm);
    /* out, 16 channels at a time (in cache) */
    for (int64_t o0 = 0; o0 < Og; o0 += 16) {
        const int64_t o1 = o0 + 16 < Og ? o0 + 16 : Og;
        if (esz == 4)
            UNWIDE(uint32_t);
        else
            UNWIDE(uint64_t);
        if (j->ep)
            dev_kepi_apply(j->ep, j->o, row0 + o0, o1 - o0, 0, OH * OW);
    }
}

/* ---- Few output positions: the product transposed ---------------------------------
 * A 7x7 output (the last stage of resnets and mobile nets) gives the
 * product w [Og, CKK] @ col [CKK, 49] only 49 columns: a 32-wide tile of our
 * kernel is then a quarter empty. Computed as y [rows, Og] = col^T @ w^T
 * instead, the positions become rows, and the positions of several images
 * (j->timgs) are stacked in one product: whole tiles of 8 rows (batch 8 at
 * 7x7: 196 rows a product, not 8 products of 49 columns). w^T is packed
 * once and kept with its tensor (j->bt); y is transposed back into each
 * image's result while it is in cache, then the bias and activation. An
 * element's sum does not depend on the rows around it: the same bits at
 * any batch and thread count, but for images of one output position, whose
 * product alone is one row (matmul.c's dot products, another order). f32
 * only; taken (convplan.c) below 64 output positions (a window larger
 * than 1x1 at strides above 1: up to 256) against at least 64 output
 * channels and 64 column rows, stacks of at most 256 rows. Split by
 * columns over the threads, the product packs its rows once for all of
 * them (matmul.c). */
/* d[c * rows + r] = y[r * ystride + c], r < rows, c < cols */
static void to_chw_f32(const float *y, int64_t ystride, int64_t rows, int64_t cols, float *d)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_avx512()) {
        to_chw_v16(y, ystride, rows, cols, d, rows, NULL, NULL, false);
        return;
    }
    if (have_avx2()) {
        to_chw_v8(y, ystride, rows, cols, d, rows, NULL, NULL, false);
        return;
    }
#endif
    to_chw_v4(y, ystride, rows, cols, d, rows, NULL, NULL, false);
}

/* Rows [q0, q1) of colt [OHW, CKK]: row p the window of output position p,
 * in w's (c, i, j) order; pads 0. Built directly: im2col and a transposition of its
 * [CKK, OHW] result took 9% of resnet's last 3x3 layer. A 1x1 window with
 * unit strides and no pads is x transposed. */
static void im2row(float *colt, const float *x, const conv_job *j, int64_t q0, int64_t q1)
{
    const int64_t C = j->Cg, H = j->H, W = j->W, KH = j->KH, KW = j->KW;
    const int64_t sh = j->p[0], sw = j->p[1], pt = j->p[2], pl = j->p[3], dh = j->p[6], dw = j->p[7];
    if (j->direct) {
#if defined(__x86_64__) && defined(__GNUC__)
        if (have_avx512()) {
            to_hwc_v16(x + q0, H * W, C, q1 - q0, colt + q0 * C, C);
            return;
        }
        if (have_avx2()) {
            to_hwc_v8(x + q0, H * W, C, q1 - q0, colt + q0 * C, C);
            return;
        }
#endif
        to_hwc_v4(x + q0, H * W, C, q1 - q0, colt + q0 * C, C);
        return;
    }
    colt += q0 * C * KH * KW;
    for (int64_t pos = q0; pos < q1; pos++) {
        const int64_t oh = pos / j->OW, w0 = pos % j->OW * sw - pl;
        const bool cols_in = w0 >= 0 && w0 + (KW - 1) * dw < W; /* the window's columns inside x */
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < KH; i++, colt += KW) {
                const int64_t h = oh * sh - pt + i * dh;
                if (h < 0 || h >= H) {
                    for (int64_t q = 0; q < KW; q++)
                        colt[q] = 0.0f;
                    continue;
                }
                const float *xr = x + (c * H + h) * W;
                if (cols_in && KW == 3 && dw == 1) { /* the usual window, unrolled */
                    colt[0] = xr[w0];
                    colt[1] = xr[w0 + 1];
                    colt[2] = xr[w0 + 2];
                } else if (cols_in && dw == 1 && KW >= 8) { /* a run (a ViT's 16x16 patches) */
                    memcpy(colt, xr + w0, (size_t)KW * sizeof *colt);
                } else if (cols_in)
                    for (int64_t q = 0; q < KW; q++)
                        colt[q] = xr[w0 + q * dw];
                else
                    for (int64_t q = 0; q < KW; q++) {
                        const int64_t w = w0 + q * dw;
                        colt[q] = w >= 0 && w < W ? xr[w] : 0.0f;
                    }
            }
    }
}

/* With j->taps (w^T packed tap-major, windows of several taps): x's image
 * transposed into xt [Hp, Wp, C], its pads zero, so that each tap of a
 * window is one run of C channels, which the product packs as op(A)'s
 * rows where they lie (dev_sg_rows). The column matrix cost 6.5% of
 * resnet18's last 3x3 layer built a channel's 3x3 window at a time (3
 * floats a copy, and bounds). */
static int64_t taps_rows(const conv_job *j) { return j->H + j->p[2] + j->p[4]; }
static int64_t taps_cols(const conv_job *j) { return j->W + j->p[3] + j->p[5]; }

static void taps_transpose(const float *x, const conv_job *j, float *xt)
{
    const int64_t C = j->Cg, H = j->H, W = j->W, pt = j->p[2], pl = j->p[3], Hp = taps_rows(j), Wp = taps_cols(j);
    memset(xt, 0, (size_t)(pt * Wp * C) * sizeof *xt);
    memset(xt + (pt + H) * Wp * C, 0, (size_t)((Hp - pt - H) * Wp * C) * sizeof *xt);
    for (int64_t h = 0; h < H; h++) {
        float *row = xt + (h + pt) * Wp * C;
        memset(row, 0, (size_t)(pl * C) * sizeof *row);
        memset(row + (pl + W) * C, 0, (size_t)((Wp - pl - W) * C) * sizeof *row);
#if defined(__x86_64__) && defined(__GNUC__)
        if (have_avx512()) {
            to_hwc_v16(x + h * W, H * W, C, W, row + pl * C, C);
            continue;
        }
        if (have_avx2()) {
            to_hwc_v8(x + h * W, H * W, C, W, row + pl * C, C);
            continue;
        }
#endif
        to_hwc_v4(x + h * W, H * W, C, W, row + pl * C, C);
    }
}

/* Rows [b, e) of a stack's colt: im2row in parallel chunks (split mode) */
typedef struct tprod_rows {
    const conv_job *j;
    const float *x; /* the stack's first image */
    float *colt;
} tprod_rows;

static void tprod_rows_chunk(void *arg, size_t b, size_t e)
{
    const tprod_rows *t = arg;
    const conv_job *j = t->j;
    const int64_t OHW = j->OH * j->OW, CKK = j->Cg * j->KH * j->KW, HWC = j->C * j->H * j->W;
    for (int64_t r = (int64_t)b; r < (int64_t)e;) {
        const int64_t n = r / OHW, q0 = r % OHW, q1 = (int64_t)e - n * OHW < OHW ? (int64_t)e - n * OHW : OHW;
        im2row(t->colt + n * OHW * CKK, t->x + n * HWC, j, q0, q1);
        r = n * OHW + q1;
    }
}

/* A parallel chunk's scratch of `bytes`; NULL, with the job's nomem set,
 * when memory runs out (the chunk then does nothing) */
static void *chunk_scratch(const tfvm_allocator *alloc, size_t bytes, atomic_bool *nomem)
{
    void *s = ut_alloc(alloc, bytes);
    if (!s)
        atomic_store(nomem, true);
    return s;
}

/* The part of a stacked product's scratch before y: colt, or with j->taps
 * the tables of where op(A)'s rows and taps lie in xt (dev_sg_rows) */
static int64_t tprod_colt_floats(const conv_job *j, int64_t rows)
{
    return j->taps ? 2 * (rows + j->KH * j->KW) : rows * j->Cg * j->KH * j->KW;
}

/* The scratch of one stacked product: that part, y, and with j->taps each image's xt */
static size_t tprod_floats(const conv_job *j)
{
    const int64_t xt = j->taps ? taps_rows(j) * taps_cols(j) * j->Cg : 0, rows = j->timgs * j->OH * j->OW;
    return (size_t)(tprod_colt_floats(j, rows) + rows * j->O + j->timgs * xt);
}

/* Channels [b, e) of a stack's y [rows, O] into the images' results, then
 * the epilogue there when the product did not apply it (parallel chunks in
 * split mode: a layer of 1152 channels of 7x7 spent a tenth of its time in
 * these passes, on one thread while the other waited) */
typedef struct tprod_out {
    const conv_job *j;
    const float *y;
    int64_t n0, n1;
    bool epi; /* the epilogue is still to be applied */
} tprod_out;

/* An element transposed and given its epilogue costs about this many
 * multiply-adds (0.3-0.6 ns against the product's ~0.01 ns each) */
#define TPROD_OUT_COST 32

static void tprod_out_chunk(void *arg, size_t b, size_t e)
{
    const tprod_out *t = arg;
    const conv_job *j = t->j;
    const int64_t O = j->O, OHW = j->OH * j->OW, c0 = (int64_t)b, nc = (int64_t)(e - b);
    float *o = (float *)(void *)j->o;
    for (int64_t n = t->n0; n < t->n1; n++) {
        to_chw_f32(t->y + (n - t->n0) * OHW * O + c0, O, OHW, nc, o + (n * O + c0) * OHW);
        if (t->epi)
            dev_kepi_apply(j->ep, j->o, n * O + c0, nc, 0, OHW);
    }
}

/* y transposed into the results, and the epilogue if still due: over the
 * threads by channels in split mode */
static void tprod_finish(const conv_job *j, const tprod_out *t)
{
    const int64_t OHW = j->OH * j->OW;
    if (j->split)
        dev_par_for((size_t)j->O, dev_kgrain(j->O, (t->n1 - t->n0) * OHW * TPROD_OUT_COST, DEV_KPAR_MACS, 16),
                    tprod_out_chunk, (void *)t);
    else
        tprod_out_chunk((void *)t, 0, (size_t)j->O);
}

/* The epilogue of a product [rows, O] whose columns are the output
 * channels: ep's bias, one per column, and its activation (the same
 * additions and activation as on the result's planes) */
static dev_kepi epi_by_columns(const dev_kepi *ep, int64_t rows, int64_t O)
{
    return (dev_kepi){.dtype = TFVM_F32, .act = ep->act, .rank = 2, .len = O, .dims = {rows, O}, .bstr = {0, 1},
                      .bias = ep->bias};
}

/* One image x [C, HW] of a 1x1 layer as y [HW, O] = x^T @ w^T (row stride
 * O), the product's rows packed straight from x (no transposition into a
 * row matrix first); epilogue ep (or NULL) on rows ep_row0... of ep_base */
static void image_rows_product(const float *x, int64_t C, int64_t HW, const conv_job *j, const float *bt, float *y,
                               const dev_kepi *ep, void *ep_base, int64_t ep_row0, bool split)
{
    const dev_kmm mm = {.dtype = TFVM_F32, .ta = true, .tb = true, .M = HW, .N = j->O, .K = C, .A = (const char *)x,
                        .lda = HW, .B = j->w, .ldb = C, .C = (char *)y, .ldc = j->O, .ep = ep, .ep_base = ep_base,
                        .ep_row0 = ep_row0};
    dev_kmm_packed(&mm, bt, split);
}

/* Images [n0, n1) (G = 1) as one product, split over the threads when j->split */
static void conv_tprod_imgs(conv_job *j, int64_t n0, int64_t n1, float *scratch)
{
    const int64_t O = j->O, CKK = j->Cg * j->KH * j->KW, OHW = j->OH * j->OW, rows = (n1 - n0) * OHW;
    const float *x = (const float *)(const void *)j->x;
    float *o = (float *)(void *)j->o, *colt = scratch, *y = colt + tprod_colt_floats(j, rows);
    /* The bias and activation in the product's blocks while they are in
     * cache (y's columns are the output channels: a bias per column, the
     * same additions and activation), unless a residual, which lies in the
     * result's layout, comes first */
    const bool in_product = j->ep && j->ep->bias && !j->ep->res;
    const dev_kepi ep_y = in_product ? epi_by_columns(j->ep, rows, O) : (dev_kepi){0};
    const tprod_out out = {j, y, n0, n1, j->ep && !in_product};
    if (n0 == 0)
        dev_conv_took(DEV_CONV_TPROD);
    if (OHW == 1 && j->direct) {
        /* 1x1 in and out (squeeze-excite's products): x's images are the
         * rows of colt and y's rows are the results, as they lie */
        const dev_kmm mm = {.dtype = TFVM_F32, .tb = true, .M = n1 - n0, .N = O, .K = CKK,
                            .A = (const char *)(x + n0 * CKK), .lda = CKK, .B = j->w, .ldb = CKK,
                            .C = (char *)(o + n0 * O), .ldc = O};
        dev_kmm_packed(&mm, j->bt, j->split);
        for (int64_t n = n0; n < n1 && j->ep; n++)
            dev_kepi_apply(j->ep, j->o, n * O, O, 0, 1);
        return;
    }
    if (j->direct && n1 - n0 == 1) {
        /* one image of a 1x1 window (a transposition into colt and the
         * packing's own were two passes over it) */
        image_rows_product(x + n0 * CKK * OHW, CKK, OHW, j, j->bt, y, in_product ? &ep_y : NULL, y, 0, j->split);
        tprod_finish(j, &out);
        return;
    }
    /* With taps the product packs op(A)'s rows straight from xt, each tap
     * a run of C channels: no column matrix (resnet18's last 3x3 layer made
     * one of 0.9 MB, 3% of its time on one thread; on two the threads made
     * halves and each then packed all of it, half from the other core) */
    dev_sg_rows ar = {0};
    if (j->taps) {
        float *xt = y + rows * O;
        const int64_t C = j->Cg, Wp = taps_cols(j), per = taps_rows(j) * Wp * C;
        for (int64_t n = n0; n < n1; n++)
            taps_transpose(x + n * j->C * j->H * j->W, j, xt + (n - n0) * per);
        int64_t *row = (int64_t *)(void *)colt, *tap = row + rows;
        for (int64_t r = 0; r < rows; r++) {
            const int64_t n = r / OHW, oh = r % OHW / j->OW, ow = r % j->OW;
            row[r] = n * per + (oh * j->p[0] * Wp + ow * j->p[1]) * C;
        }
        for (int64_t i = 0; i < j->KH; i++)
            for (int64_t q = 0; q < j->KW; q++)
                tap[i * j->KW + q] = (i * j->p[6] * Wp + q * j->p[7]) * C;
        ar = (dev_sg_rows){xt, row, tap, C};
    } else {
        tprod_rows tr = {j, x + n0 * j->C * j->H * j->W, colt};
        if (j->split)
            dev_par_for((size_t)rows, dev_kgrain(rows, CKK, DEV_KPAR_MACS / 4, 1), tprod_rows_chunk, &tr);
        else
            tprod_rows_chunk(&tr, 0, (size_t)rows);
    }
    /* (tap-major, B is there only packed: where that cannot be used, the
     * product fails as out of memory rather than read w in its own order) */
    const dev_kmm mm = {.dtype = TFVM_F32, .tb = true, .M = rows, .N = O, .K = CKK, .A = (const char *)colt,
                        .lda = CKK, .B = j->w, .ldb = CKK, .C = (char *)y, .ldc = O, .ep = in_product ? &ep_y : NULL,
                        .ep_base = y, .failed = j->taps ? &j->nomem : NULL, .arows = j->taps ? &ar : NULL};
    dev_kmm_packed(&mm, j->bt, j->split);
    tprod_finish(j, &out);
}

/* Stacks [b, e) of j->timgs images, with one scratch for the chunk */
static void conv_tprod_chunk(void *arg, size_t b, size_t e)
{
    conv_job *j = arg;
    const size_t bytes = tprod_floats(j) * sizeof(float);
    float *scratch = chunk_scratch(j->alloc, bytes, &j->nomem);
    if (!scratch)
        return;
    for (size_t it = b; it < e; it++) {
        const int64_t n0 = (int64_t)it * j->timgs, n1 = n0 + j->timgs < j->N ? n0 + j->timgs : j->N;
        conv_tprod_imgs(j, n0, n1, scratch);
    }
    ut_free(j->alloc, scratch, bytes);
}

/* Whether the f32 kernel (convf32.h) of kind adds FUSED_CONV2D_ADD's r
 * in its stores (Winograd's and the channels kernel's, through to_chw) */
static bool cf_res(int kind) { return kind == DEV_CF_WINO || kind == DEV_CF_CHAN; }

/* Whether the f32 kernel of kind applies epilogue ep (or NULL) in its
 * stores: at most a RELU, and r where cf_res */
static bool cf_inner(const dev_kepi *ep, int kind)
{
    const uint32_t act = ep ? ep->act : 0;
    return (act == 0 || act == ISA_OPT_ACT_RELU) && (!ep || !ep->res || cf_res(kind));
}

/* Parts [b, e) of item `it` through the f32 kernel (convf32.h): bias, r
 * and relu in its stores where it can (cf_inner), the epilogue after. */
static void conv_cf_parts(conv_job *j, int64_t it, int64_t b, int64_t e, char *scratch)
{
    const int64_t n = it / j->G, g = it % j->G, Og = j->O / j->G, OHW = j->OH * j->OW;
    const float *xg = (const float *)(const void *)j->x + (n * j->C + g * j->Cg) * j->H * j->W;
    float *og = (float *)(void *)j->o + (n * j->O + g * Og) * OHW;
    const bool inner = cf_inner(j->ep, j->cf->kind);
    const float *res = j->ep && j->ep->res ? (const float *)(const void *)j->ep->res + (n * j->O + g * Og) * OHW : NULL;
    dev_cf_item(j->cf, g, xg, og, (float *)(void *)scratch,
                j->ep && inner ? (const float *)(const void *)j->ep->bias : NULL, inner ? res : NULL,
                inner && j->ep && j->ep->act == ISA_OPT_ACT_RELU, b, e);
    if (j->ep && !inner) {
        int64_t col0, ncols, o0, no;
        dev_cf_part_cols(j->cf, b, e, &col0, &ncols);
        dev_cf_part_chans(j->cf, b, e, &o0, &no);
        dev_kepi_apply(j->ep, j->o, n * j->O + g * Og + o0, no, col0, ncols);
    }
}

/* Split mode: parts [b, e) of item j->item, with their own scratch. */
static void conv_cf_chunk(void *arg, size_t b, size_t e)
{
    conv_job *j = arg;
    const size_t bytes = j->cf->scratch_floats * sizeof(float);
    char *scratch = chunk_scratch(j->alloc, bytes, &j->nomem);
    if (!scratch)
        return;
    if (j->item == 0 && b == 0)
        dev_conv_took(DEV_CONV_F32);
    conv_cf_parts(j, j->item, (int64_t)b, (int64_t)e, scratch);
    ut_free(j->alloc, scratch, bytes);
}

/* ---- Big column matrices: panels --------------------------------------------------
 * A column matrix bigger than a core's L2 (resnet's 7x7 stem: 147 x 12544,
 * 7.4 MB) went to memory and back between im2col and the product. It is
 * made instead a panel of output rows at a time (64 Ki elements at most:
 * convplan.c), each multiplied while it is in cache into its columns of the
 * result; the panels of all (image, group) items are the parallel items,
 * so im2col runs on every thread too. The sums of an element do not depend
 * on the columns around it: the same bits. */
static void conv_panels(void *arg, size_t b, size_t e)
{
    conv_job *j = arg;
    const int64_t Og = j->O / j->G, CKK = j->Cg * j->KH * j->KW, OHW = j->OH * j->OW;
    const size_t esz = j->esz, bytes = (size_t)(CKK * j->prows * j->OW) * esz;
    char *col = chunk_scratch(j->alloc, bytes, &j->nomem);
    if (!col)
        return;
    if (b == 0)
        dev_conv_took(DEV_CONV_PANELS);
    for (size_t it = b; it < e; it++) {
        const int64_t item = (int64_t)it / j->panels, oh0 = (int64_t)it % j->panels * j->prows;
        const int64_t oh1 = oh0 + j->prows < j->OH ? oh0 + j->prows : j->OH, ncols = (oh1 - oh0) * j->OW;
        const int64_t n = item / j->G, g = item % j->G;
        const char *xg = j->x + (size_t)((n * j->C + g * j->Cg) * j->H * j->W) * esz;
        im2col(col, xg, j->Cg, j->H, j->W, j->KH, j->KW, oh0, oh1, j->OW, j->p, esz);
        const dev_kmm mm = {.dtype = j->dtype, .M = Og, .N = ncols, .K = CKK,
                            .A = j->w + (size_t)(g * Og * CKK) * esz, .lda = CKK, .B = col, .ldb = ncols,
                            .C = j->o + (size_t)((n * j->O + g * Og) * OHW + oh0 * j->OW) * esz, .ldc = OHW,
                            .ep = j->ep, .ep_base = j->o, .ep_row0 = n * j->O + g * Og, .ap = j->ap,
                            .ep_col0 = oh0 * j->OW};
        if (j->split) /* (fewer panels than threads: the product split over them) */
            dev_kmm_run(&mm);
        else
            dev_kmm_one(&mm);
    }
    ut_free(j->alloc, col, bytes);
}

/* Items [b, e) (item = n * G + g), with one scratch buffer for the chunk. */
static void conv_items(void *arg, size_t b, size_t e)
{
    conv_job *j = arg;
    const int64_t Og = j->O / j->G, CKK = j->Cg * j->KH * j->KW, OHW = j->OH * j->OW;
    const bool wide = j->wide;
    const int64_t Hp = j->H + j->p[2] + j->p[4], Wp = j->W + j->p[3] + j->p[5];
    const size_t esz = j->esz;
    const size_t scratch_bytes = j->cf       ? j->cf->scratch_floats * sizeof(float)
                                 : j->direct ? 0
                                 : wide      ? (size_t)(j->Cg * Hp * Wp + j->KW + (CKK + Og) * j->OH * Wp) * esz
                                             : (size_t)(CKK * OHW) * esz;
    char *col = NULL;
    if (scratch_bytes && !(col = chunk_scratch(j->alloc, scratch_bytes, &j->nomem)))
        return;
    if (b == 0)
        dev_conv_took(j->cf ? DEV_CONV_F32 : wide ? DEV_CONV_WIDE : j->direct ? DEV_CONV_DIRECT : DEV_CONV_IM2COL);
    for (size_t it = b; it < e; it++) {
        const int64_t n = (int64_t)it / j->G, g = (int64_t)it % j->G;
        const char *xg = j->x + (size_t)((n * j->C + g * j->Cg) * j->H * j->W) * esz;
        const char *wg = j->w + (size_t)(g * Og * CKK) * esz;
        char *og = j->o + (size_t)((n * j->O + g * Og) * OHW) * esz;
        if (j->cf) {
            conv_cf_parts(j, (int64_t)it, 0, dev_cf_parts(j->cf), col);
            continue;
        }
        if (wide) {
            conv_wide_item(j, xg, wg, og, n * j->O + g * Og, col);
            continue;
        }
        if (!j->direct)
            im2col(col, xg, j->Cg, j->H, j->W, j->KH, j->KW, 0, j->OH, j->OW, j->p, esz);
        const dev_kmm mm = {.dtype = j->dtype, .M = Og, .N = OHW, .K = CKK, .A = wg, .lda = CKK,
                            .B = j->direct ? xg : col, .ldb = OHW, .C = og, .ldc = OHW, .ep = j->ep, .ep_base = j->o,
                            .ep_row0 = n * j->O + g * Og, .ap = j->ap, .in_place = j->in_place,
                            .failed = j->in_place ? &j->nomem : NULL};
        if (j->split)
            dev_kmm_run(&mm);
        else
            dev_kmm_one(&mm);
    }
    if (col)
        ut_free(j->alloc, col, scratch_bytes);
}

/* Depthwise convolutions (dwconv.h): output planes (or channel blocks) in
 * parallel chunks, each with its scratch; the bias and an activation in the
 * kernel (planes: relu only), and what the kernel does not apply (`after`:
 * another activation, or FUSED_CONV2D_ADD's r and its activation) on each
 * item's planes as soon as they are made, while they are in cache. */
typedef struct dw_job {
    dev_dw d;
    const dev_kepi *after; /* or NULL */
    const tfvm_allocator *alloc;
    atomic_bool nomem;
} dw_job;

static void dw_chunk(void *arg, size_t b, size_t e)
{
    dw_job *j = arg;
    const size_t bytes = (size_t)j->d.scratch * sizeof(float);
    float *scratch = chunk_scratch(j->alloc, bytes, &j->nomem);
    if (!scratch)
        return;
    if (b == 0 && !j->d.max)
        dev_conv_took(DEV_CONV_DEPTHWISE);
    if (j->after)
        for (size_t p = b; p < e; p++) {
            int64_t row0, n, col0, ncols;
            dev_dw_run(&j->d, (int64_t)p, (int64_t)p + 1, scratch);
            dev_dw_item_span(&j->d, (int64_t)p, &row0, &n, &col0, &ncols);
            dev_kepi_apply(j->after, j->d.o, row0, n, col0, ncols);
        }
    else
        dev_dw_run(&j->d, (int64_t)b, (int64_t)e, scratch);
    ut_free(j->alloc, scratch, bytes);
}

/* A depthwise 1x1 (DEV_CONV_SCALE): each plane x * w[c], summed from zero as
 * the depthwise kernels sum their one tap, then its epilogue (bias,
 * activation, r) while the plane is in L1: the same bits */
typedef struct scale_job {
    const float *x, *w;
    float *o;
    int64_t C, HW;
    const dev_kepi *ep;
} scale_job;

static void scale_planes(void *arg, size_t b, size_t e)
{
    const scale_job *j = arg;
    if (b == 0)
        dev_conv_took(DEV_CONV_SCALE);
    for (size_t pi = b; pi < e; pi++) {
        const float wc = j->w[(int64_t)pi % j->C], *xs = j->x + (int64_t)pi * j->HW;
        float *os = j->o + (int64_t)pi * j->HW;
        for (int64_t q = 0; q < j->HW; q++)
            os[q] = 0.0f + xs[q] * wc;
        if (j->ep)
            dev_kepi_apply(j->ep, j->o, (int64_t)pi, 1, 0, j->HW);
    }
}

/* Few input channels (fewch.h): bands of output rows in parallel chunks,
 * each band's bias and activation (and FUSED_CONV2D_ADD's r) as soon as it
 * is made, while it is in cache */
typedef struct fc_job {
    const dev_fc *f;
    const float *x, *wk;
    float *o;
    const dev_kepi *ep;
    const tfvm_allocator *alloc;
    atomic_bool nomem;
} fc_job;

static void fc_chunk(void *arg, size_t b, size_t e)
{
    fc_job *j = arg;
    const dev_fc *f = j->f;
    const size_t bytes = (size_t)f->scratch * sizeof(float);
    float *scratch = chunk_scratch(j->alloc, bytes, &j->nomem);
    if (!scratch)
        return;
    if (b == 0)
        dev_conv_took(DEV_CONV_FEWCH);
    for (size_t it = b; it < e; it++) {
        dev_fc_run(f, j->x, j->wk, j->o, (int64_t)it, (int64_t)it + 1, scratch);
        if (j->ep) {
            int64_t n, oh0, oh1;
            dev_fc_band(f, (int64_t)it, &n, &oh0, &oh1);
            dev_kepi_apply(j->ep, j->o, n * f->O, f->O, oh0 * f->OW, (oh1 - oh0) * f->OW);
        }
    }
    ut_free(j->alloc, scratch, bytes);
}

static bool epi_res(const dev_kepi *ep) { return ep && ep->res; }

/* ---- Channels last (FUSED_CONV2D's nhwc_in, nhwc_out) ----------------------------------
 * A 1x1 convolution whose only use is a depthwise one (the optimizer's
 * pairs) writes its result channels last straight from its product, whose
 * rows are the positions (x's images packed as A transposed; the bias of
 * each column and the activation in the product's blocks), and the
 * depthwise kernel's channel blocks copy each position's channels from it
 * where they transposed planes (dwconv.c). Any other convolution given
 * either option computes in NCHW between transpositions (conv_relayout). */

/* dst[n][b][a] = src[n][a][b] for elements of esz bytes */
static void swap_inner(const char *src, char *dst, int64_t N, int64_t A, int64_t B, size_t esz)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t a = 0; a < A; a++)
            for (int64_t b = 0; b < B; b++)
                memcpy(dst + (size_t)((n * B + b) * A + a) * esz, src + (size_t)((n * A + a) * B + b) * esz, esz);
}

/* The convolution in NCHW, x transposed into that layout first (nhwc_in)
 * and the result into channels last after it (nhwc_out) */
static tfvm_status conv_relayout(dev_kctx *k, const dev_kview *in, dev_value *out, uint32_t lay)
{
    const dev_kview *x = &in[0];
    const size_t esz = dev_kesize(x->dtype);
    dev_kview v[4];
    memcpy(v, in, sizeof v);
    dev_value xt = {0}, r;
    tfvm_status st;
    if (lay & ISA_OPT_NHWC_IN) {
        const int64_t d[4] = {x->dims[0], x->dims[3], x->dims[1], x->dims[2]};
        void *data;
        if ((st = dev_kresult(k, x->dtype, 4, d, &xt, &data)))
            return st;
        swap_inner(x->data, data, d[0], d[2] * d[3], d[1], esz);
        v[0].data = data;
        v[0].t = NULL;
        memcpy(v[0].dims, d, sizeof d);
    }
    dev_kctx nchw = *k;
    nchw.attr &= ~(uint32_t)(ISA_OPT_NHWC_IN | ISA_OPT_NHWC_OUT);
    st = dev_cpu_conv2d(&nchw, v, &r);
    dev_value_release(&xt);
    if (st != TFVM_OK || !(lay & ISA_OPT_NHWC_OUT)) {
        if (st == TFVM_OK)
            *out = r;
        return st;
    }
    const tfvm_tensor *t = r.u.t;
    const int64_t d[4] = {t->dims[0], t->dims[2], t->dims[3], t->dims[1]};
    dev_value o;
    void *data;
    if ((st = dev_kresult(k, x->dtype, 4, d, &o, &data)) == TFVM_OK) {
        swap_inner(t->data, data, d[0], d[3], d[1] * d[2], esz);
        *out = o;
    }
    dev_value_release(&r);
    return st;
}

/* Images [b, e) of a 1x1 convolution with its result channels last, each
 * image one product (split over the threads when the plan is) */
typedef struct nhwc_job {
    const conv_job *j;
    const float *bt;
    const dev_kepi *ep; /* the result's [N * OH*OW, O] rows */
} nhwc_job;

static void nhwc_chunk(void *arg, size_t b, size_t e)
{
    const nhwc_job *nj = arg;
    const conv_job *j = nj->j;
    const int64_t HW = j->H * j->W;
    for (int64_t n = (int64_t)b; n < (int64_t)e; n++)
        image_rows_product((const float *)(const void *)j->x + n * j->C * HW, j->C, HW, j, nj->bt,
                           (float *)(void *)j->o + n * HW * j->O, nj->ep, j->o, n * HW, j->split);
}

/* FUSED_CONV2D_ADD's result written over r, where the run holds r alone
 * (its last use: the VM consumed the token that carried it) and each
 * element of r is read just before the kernel stores the result there: a
 * 1x1 layer (w @ x, tfvm's kernel, K one block of it) whose bias and
 * activation (at most a RELU) go in the kernel's stores (dev_kmm.in_place),
 * or a Winograd layer with at most a RELU (r added as its output rows go
 * back to channels first). A new result's lines came from memory only to be
 * overwritten, r's from memory once more to be added: resnet50's 1x1 layer
 * 64 -> 256 channels on 56x56 plus its residual, 8 images, 11.2-12.8 ->
 * 7.3-7.5 ms. The same bits either way. */
static bool conv_in_place(const dev_kctx *k, const dev_kview *in, const dev_kepi *ep, const dev_conv_plan *plan,
                          const int64_t *od)
{
    const dev_kview *res = &in[4], *x = &in[0];
    const tfvm_tensor *t = res->t;
    const int64_t O = od[1], OHW = od[2] * od[3];
    /* the product of image 0 as conv_items makes it (the others differ in
     * where they lie) */
    const dev_kmm mm = {.dtype = x->dtype, .M = O, .N = OHW, .K = x->dims[1], .lda = x->dims[1], .ldb = OHW,
                        .ldc = OHW, .ep = ep, .in_place = true};
    const bool kernel = plan->kernel == DEV_CONV_DIRECT
                            ? in[1].dims[1] == x->dims[1] && ep && dev_kmm_in_place_ok(&mm)
                            : plan->kernel == DEV_CONV_F32 && cf_res(plan->cf.kind) && cf_inner(ep, plan->cf.kind);
    return k->op == ISA_FUSED_CONV2D_ADD && kernel && t && t == dev_kview_overwritable(k, res) &&
           t->dtype == TFVM_F32 && t->count == od[0] * od[1] * od[2] * od[3] && t != in[0].t && t != in[1].t &&
           t != in[3].t;
}

/* CONV2D (x [N, C, H, W], w [O, C/groups, KH, KW], p) -> [N, O, OH, OW];
 * p = [sh, sw, pt, pl, pb, pr, dh, dw, groups]. */
tfvm_status dev_cpu_conv2d(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0], *w = &in[1];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    int64_t p[9];
    int np;
    tfvm_status st = dev_kvec(k, &in[2], "parameters", p, 9, &np);
    if (st)
        return st;
    if (np != 9)
        return dev_kfail(k, TFVM_ERR_SHAPE,
                         "parameters must be [sh, sw, pt, pl, pb, pr, dh, dw, groups], got %d entries",
                         np);
    if (x->dtype != w->dtype)
        return dev_kfail(k, TFVM_ERR_TYPE, "dtype mismatch: %s and %s", dev_kdesc(x, s1),
                         dev_kdesc(w, s2));
    if (x->dtype == TFVM_BOOL)
        return dev_kfail(k, TFVM_ERR_TYPE, "not defined on bool");
    tfvm_status ready = dev_kgemm_ready(k, x->dtype);
    if (ready)
        return ready;
    if (x->rank != 4 || w->rank != 4)
        return dev_kfail(k, TFVM_ERR_SHAPE, "x must be NCHW and w OIHW (rank 4), got %s and %s",
                         dev_kshape(x, s1), dev_kshape(w, s2));
    if (!conv_in(p[0], 1) || !conv_in(p[1], 1) || !conv_in(p[2], 0) || !conv_in(p[3], 0) ||
        !conv_in(p[4], 0) || !conv_in(p[5], 0) || !conv_in(p[6], 1) || !conv_in(p[7], 1) ||
        !conv_in(p[8], 1))
        return dev_kfail(k, TFVM_ERR_ARGUMENT,
                         "bad parameters %s: strides, dilations and groups must be >= 1, pads >= 0",
                         dev_kdims(9, p, s1));
    /* channels last in or out: FUSED_CONV2D's options (verify.c lets no other op have them) */
    const uint32_t lay = k->op == ISA_FUSED_CONV2D ? k->attr & (ISA_OPT_NHWC_IN | ISA_OPT_NHWC_OUT) : 0;
    const bool xl = lay & ISA_OPT_NHWC_IN;
    const int64_t N = x->dims[0], C = x->dims[xl ? 3 : 1], H = x->dims[xl ? 1 : 2], W = x->dims[xl ? 2 : 3];
    const int64_t O = w->dims[0], Cg = w->dims[1], KH = w->dims[2], KW = w->dims[3], G = p[8];
    if (C != Cg * G)
        return dev_kfail(k, TFVM_ERR_SHAPE, "x %s has %lld channels, w %s takes %lld (groups %lld)",
                         dev_kshape(x, s1), (long long)C, dev_kshape(w, s2), (long long)(Cg * G),
                         (long long)G);
    if (O % G)
        return dev_kfail(k, TFVM_ERR_SHAPE, "w %s: %lld output channels do not split into %lld groups",
                         dev_kshape(w, s1), (long long)O, (long long)G);
    int64_t OH, OW;
    if (!conv_in(H, 0) || !conv_in(W, 0) || !conv_in(KH, 1) || !conv_in(KW, 1) ||
        !conv_out(H, p[2], p[4], KH, p[6], p[0], &OH) || !conv_out(W, p[3], p[5], KW, p[7], p[1], &OW))
        return dev_kfail(k, TFVM_ERR_SHAPE, "window of w %s (dilation %lld, %lld) does not fit x %s padded by [%lld, %lld, %lld, %lld]",
                         dev_kshape(w, s1), (long long)p[6], (long long)p[7], dev_kshape(x, s2),
                         (long long)p[2], (long long)p[3], (long long)p[4], (long long)p[5]);
    const int64_t Og = O / G, CKK = Cg * KH * KW, OHW = OH * OW;
    if (!dev_kgemm_fits(Og) || !dev_kgemm_fits(CKK) || !dev_kgemm_fits(OHW))
        return dev_kfail(k, TFVM_ERR_SHAPE, "too large for BLAS: x %s, w %s", dev_kshape(x, s1),
                         dev_kshape(w, s2));
    const int64_t od[4] = {N, O, OH, OW};
    /* FUSED_CONV2D: the result as [N, O, OH*OW] with bias [O, 1];
     * FUSED_CONV2D_ADD's r added after it, in the result's layout */
    dev_kepi epi, *ep = NULL;
    if (k->op == ISA_FUSED_CONV2D || k->op == ISA_FUSED_CONV2D_ADD) {
        const dev_kview *bias = &in[3];
        if (bias->rank != 1 || bias->dims[0] != O)
            return dev_kfail(k, TFVM_ERR_SHAPE, "bias must be [%lld] (the output channels of w %s), got %s",
                             (long long)O, dev_kshape(w, s1), dev_kshape(bias, s2));
        const int64_t rd[3] = {N, O, OH * OW}, bd[2] = {O, 1};
        if ((st = dev_kepi_init(k, &epi, x, bias, 2, bd, 3, rd)))
            return st;
        ep = &epi;
    }
    if (k->op == ISA_FUSED_CONV2D_ADD) {
        const dev_kview *res = &in[4];
        if (res->dtype != x->dtype)
            return dev_kfail(k, TFVM_ERR_TYPE, "dtype mismatch: %s and r %s", dev_kdesc(x, s1), dev_kdesc(res, s2));
        if (res->rank != 4 || memcmp(res->dims, od, sizeof od) != 0)
            return dev_kfail(k, TFVM_ERR_SHAPE, "r %s must have the result's shape %s", dev_kshape(res, s1),
                             dev_kdims(4, od, s2));
        epi.res = res->data;
    }
    dev_conv_shape shape = {.dtype = x->dtype, .N = N, .C = C, .H = H, .W = W, .O = O, .Cg = Cg, .KH = KH,
                            .KW = KW, .OH = OH, .OW = OW, .lay = lay};
    memcpy(shape.p, p, sizeof shape.p);
    dev_conv_plan plan;
    dev_conv_plan_make(&shape, dev_par_width(), &plan);
    /* the layouts the kernels read and write themselves; others go through NCHW */
    if (lay && !plan.out_last && !plan.x_last && !k->shape_only)
        return conv_relayout(k, in, out, lay);
    const int64_t odl[4] = {N, OH, OW, O};
    dev_value r;
    void *o;
    const bool in_place = !k->shape_only && conv_in_place(k, in, ep, &plan, od);
    if (in_place) {
        r = (dev_value){.dtype = x->dtype, .is_tensor = 1, .u.t = tfvm_tensor_ref((tfvm_tensor *)in[4].t)};
        o = r.u.t->data;
    } else if ((st = dev_kresult(k, x->dtype, 4, lay & ISA_OPT_NHWC_OUT ? odl : od, &r, &o)))
        return st;
    if (plan.out_last) {
        const dev_kmm mm = {.dtype = TFVM_F32, .tb = true, .M = OHW, .N = O, .K = C, .lda = C, .B = w->data,
                            .ldb = C};
        const conv_job cj = {.x = x->data, .w = w->data, .o = o, .N = N, .C = C, .H = H, .W = W, .O = O,
                             .split = plan.split};
        const dev_kepi ep_y = epi_by_columns(ep, N * OHW, O);
        const nhwc_job nj = {&cj, dev_kmm_prepack_b(&mm, w), &ep_y};
        dev_conv_took(DEV_CONV_TPROD);
        if (plan.split) {
            nhwc_chunk((void *)&nj, 0, (size_t)N);
        } else {
            int64_t imgs, cost, least;
            dev_conv_par_loop(&plan, &shape, &imgs, &cost, &least);
            dev_par_for((size_t)imgs, dev_kgrain(imgs, cost, least, 1), nhwc_chunk, (void *)&nj);
        }
        *out = r;
        return TFVM_OK;
    }
    if (plan.kernel == DEV_CONV_EMPTY) {
        dev_conv_took(DEV_CONV_EMPTY);
        *out = r;
        return TFVM_OK;
    }
    if (plan.kernel == DEV_CONV_DEPTHWISE) {
        dw_job dj = {.d = plan.dw, .alloc = k->alloc};
        dj.d.x = x->data;
        dj.d.w = w->data;
        dj.d.o = o;
        dj.d.wpk = dev_dw_pack(&dj.d, w->t);
        dj.d.nhwc = plan.x_last;
        /* channel blocks apply every activation, planes relu; with r, the
         * bias alone, then r and the activation after */
        const uint32_t act = ep ? ep->act : 0;
        const bool res = epi_res(ep), inner = !res && (dj.d.cb || act == 0 || act == ISA_OPT_ACT_RELU);
        dev_kepi after = ep ? *ep : (dev_kepi){0};
        dj.d.bias = ep && (inner || res) ? (const float *)(const void *)ep->bias : NULL;
        dj.d.relu = inner && act == ISA_OPT_ACT_RELU;
        dj.d.act = inner && dj.d.cb && act != ISA_OPT_ACT_RELU ? act : 0;
        if (res)
            after.bias = NULL; /* added by the kernel */
        dj.after = ep && !inner ? &after : NULL;
        atomic_init(&dj.nomem, false);
        int64_t dw_items, cost, least;
        dev_conv_par_loop(&plan, &shape, &dw_items, &cost, &least);
        dev_par_for((size_t)dw_items, dev_kgrain(dw_items, cost, least, 1), dw_chunk, &dj);
        if (atomic_load(&dj.nomem)) {
            dev_value_release(&r);
            return dev_kfail(k, TFVM_ERR_NOMEM, "out of memory");
        }
        *out = r;
        return TFVM_OK;
    }
    if (plan.kernel == DEV_CONV_SCALE) {
        scale_job sj = {x->data, w->data, o, C, OHW, ep};
        int64_t planes, cost, least;
        dev_conv_par_loop(&plan, &shape, &planes, &cost, &least);
        dev_par_for((size_t)planes, dev_kgrain(planes, cost, least, 1), scale_planes, &sj);
        *out = r;
        return TFVM_OK;
    }
    if (plan.kernel == DEV_CONV_FEWCH) {
        /* the weights packed once, kept with their tensor (else packed here) */
        const size_t wk_floats = dev_fc_wk_floats(&plan.fc);
        const float *wk = dev_fc_pack_kept(&plan.fc, w->data, w->t);
        float *own = NULL;
        if (!wk && (own = dev_ktemp(k, wk_floats, sizeof(float))))
            dev_fc_pack(&plan.fc, w->data, own);
        fc_job fj = {.f = &plan.fc, .x = x->data, .wk = wk ? wk : own, .o = o, .ep = ep, .alloc = k->alloc};
        atomic_init(&fj.nomem, !fj.wk);
        int64_t fitems, cost, least;
        dev_conv_par_loop(&plan, &shape, &fitems, &cost, &least);
        if (fj.wk)
            dev_par_for((size_t)fitems, dev_kgrain(fitems, cost, least, 1), fc_chunk, &fj);
        if (own)
            dev_ktemp_free(k, own, wk_floats, sizeof(float));
        if (atomic_load(&fj.nomem)) {
            dev_value_release(&r);
            return dev_kfail(k, TFVM_ERR_NOMEM, "out of memory");
        }
        *out = r;
        return TFVM_OK;
    }
    conv_job job = {.x = x->data, .w = w->data, .o = o, .p = p, .ep = ep, .alloc = k->alloc,
                    .dtype = x->dtype, .esz = dev_kesize(x->dtype), .N = N, .C = C, .H = H, .W = W, .O = O,
                    .Cg = Cg, .G = G, .KH = KH, .KW = KW, .OH = OH, .OW = OW, .split = plan.split,
                    .direct = plan.direct, .wide = plan.kernel == DEV_CONV_WIDE,
                    .timgs = plan.timgs, .prows = plan.prows, .panels = plan.panels, .in_place = in_place};
    atomic_init(&job.nomem, false);
    const int64_t items = N * G;
    /* f32 at unit strides and dilations: a kernel without im2col, its
     * weights prepared once */
    dev_cf cf = plan.cf;
    if (plan.kernel == DEV_CONV_F32) {
        if (!dev_cf_prepare(&cf, w->data, w->t, k->alloc)) {
            dev_value_release(&r);
            return dev_kfail(k, TFVM_ERR_NOMEM, "out of memory");
        }
        job.cf = &cf;
    }
    if (plan.kernel == DEV_CONV_TPROD) {
        /* w^T packed once, kept with its tensor */
        const dev_kmm mm = {.dtype = TFVM_F32, .tb = true, .M = job.timgs * OHW, .N = Og, .K = CKK, .lda = CKK,
                            .B = w->data, .ldb = CKK, .ldc = Og};
        /* taps are runs of Cg channels, im2row's rows runs of KW columns
         * (at unit dilation): the longer runs win (a ViT's 16x16 patches
         * of 3 channels 0.61 -> 0.48 ms as rows; 3x3 over 8 channels
         * 43 -> 36 us as taps) */
        if (!job.direct && KH * KW > 1 && !(p[7] == 1 && KW > Cg))
            job.taps = (job.bt = dev_kmm_prepack_b_taps(&mm, w, Cg, KH * KW)) != NULL;
        if (!job.bt)
            job.bt = dev_kmm_prepack_b(&mm, w);
    } else if (!job.cf && G == 1) {
        /* the weights packed once, kept with their tensor */
        const int64_t ncols = job.wide ? OH * (W + p[3] + p[5]) : OHW;
        const dev_kmm mm = {.dtype = x->dtype, .M = Og, .N = ncols, .K = CKK, .A = w->data, .lda = CKK, .B = NULL,
                            .ldb = ncols, .ldc = ncols};
        job.ap = dev_kmm_prepack_a(&mm, w);
    }
    /* stacks of images, panels, images or an image's parts in parallel (one
     * stack's or image's product split instead where there are fewer than
     * threads) */
    int64_t pn, cost, least;
    dev_conv_par_loop(&plan, &shape, &pn, &cost, &least);
    const size_t grain = dev_kgrain(pn, cost, least, 1);
    if (plan.kernel == DEV_CONV_TPROD && job.split)
        conv_tprod_chunk(&job, 0, (size_t)pn);
    else if (plan.kernel == DEV_CONV_TPROD)
        dev_par_for((size_t)pn, grain, conv_tprod_chunk, &job);
    else if (plan.kernel == DEV_CONV_PANELS && job.split)
        conv_panels(&job, 0, (size_t)pn);
    else if (plan.kernel == DEV_CONV_PANELS)
        dev_par_for((size_t)pn, grain, conv_panels, &job);
    else if (job.split && job.cf) {
        /* each chunk of a Winograd layer's channel blocks transforms all of
         * the image's tiles again (they are its input): one chunk a thread
         * (resnet's 256-channel 3x3 on 14x14, 2 threads: 0.72 -> 0.51 ms,
         * where the shrinking chunks of dev_kgrain had made some five) */
        const unsigned width = dev_par_width();
        const size_t chunk = cf.nob ? (size_t)((pn + width - 1) / width) : grain;
        for (job.item = 0; job.item < items && !atomic_load(&job.nomem); job.item++)
            dev_par_for((size_t)pn, chunk, conv_cf_chunk, &job);
    }
    else if (job.split)
        conv_items(&job, 0, (size_t)items);
    else
        dev_par_for((size_t)pn, grain, conv_items, &job);
    if (job.cf)
        dev_cf_free(&cf, k->alloc);
    if (atomic_load(&job.nomem)) {
        dev_value_release(&r);
        return dev_kfail(k, TFVM_ERR_NOMEM, "out of memory");
    }
    *out = r;
    return TFVM_OK;
}

/* ---- Pooling ------------------------------------------------------------------------
 * Windows are clipped to the input; with every pad smaller than the window
 * and H, W >= 1, each window holds at least one input element, so the max is
 * defined and the average divides by a count of real elements. Windows that
 * lie wholly inside the input (all of them without padding) take a loop
 * whose bounds are KH x KW; the common 2x2 and 3x3 windows get their own
 * copies with constant bounds, which the compiler unrolls. */
#define POOL_LOOP(T, KH, KW, FIRST, STEP, FINISH)                                           \
    do {                                                                                    \
        const T *xs = x->data;                                                              \
        T *os = o;                                                                          \
        for (int64_t pl_ = 0; pl_ < planes; pl_++, xs += H * W)                             \
            for (int64_t oh = 0; oh < OH; oh++) {                                           \
                const int64_t h0 = oh * sh - pt;                                            \
                const int64_t ha = h0 < 0 ? 0 : h0, hb = h0 + kh > H ? H : h0 + kh;         \
                const bool rows_in = h0 >= 0 && h0 + kh <= H;                               \
                for (int64_t ow = 0; ow < OW; ow++) {                                       \
                    const int64_t w0 = ow * sw - pl;                                        \
                    T acc;                                                                  \
                    if (rows_in && w0 >= 0 && w0 + kw <= W) {                               \
                        const T *xw = xs + h0 * W + w0;                                     \
                        acc = FIRST(xw[0]);                                                 \
                        bool bad = acc != acc;                                              \
                        for (int64_t i = 0; i < (KH); i++)                                  \
                            for (int64_t j = i == 0; j < (KW); j++) {                       \
                                const T v = xw[i * W + j];                                  \
                                STEP;                                                       \
                            }                                                               \
                        *os++ = FINISH(acc, (KH) * (KW));                                   \
                        (void)bad;                                                          \
                        continue;                                                           \
                    }                                                                       \
                    const int64_t wa = w0 < 0 ? 0 : w0, wb = w0 + kw > W ? W : w0 + kw;    \
                    acc = FIRST(xs[ha * W + wa]);                                           \
                    bool bad = acc != acc;                                                  \
                    for (int64_t h = ha; h < hb; h++)                                       \
                        for (int64_t w = h == ha ? wa + 1 : wa; w < wb; w++) {              \
                            const T v = xs[h * W + w];                                      \
                            STEP;                                                           \
                        }                                                                   \
                    *os++ = FINISH(acc, (hb - ha) * (wb - wa));                             \
                    (void)bad;                                                              \
                }                                                                           \
            }                                                                               \
    } while (0)

#define POOL_ID(v) (v)
#define POOL_KEEP(acc, n) (acc)
#define POOL_KEEPF(acc, n) (bad ? NAN : (acc))
#define POOL_MEAN(acc, n) (acc / (n))
#define POOL_IMAX acc = v > acc ? v : acc
/* NumPy max: a NaN anywhere in the window wins (noted in `bad`, which keeps
 * the max itself branch-free). */
#define POOL_FMAX (acc = v > acc ? v : acc, bad |= v != v)
#define POOL_SUM acc += v

/* One POOL_LOOP per window shape: 2x2, 3x3, any. */
#define POOL_SHAPES(T, STEP, FINISH)                                                        \
    do {                                                                                    \
        if (kh == 2 && kw == 2)                                                             \
            POOL_LOOP(T, 2, 2, POOL_ID, STEP, FINISH);                                      \
        else if (kh == 3 && kw == 3)                                                        \
            POOL_LOOP(T, 3, 3, POOL_ID, STEP, FINISH);                                      \
        else                                                                                \
            POOL_LOOP(T, kh, kw, POOL_ID, STEP, FINISH);                                    \
    } while (0)

/* The general window loop: dilations, ceil mode's partial windows and
 * count_include_pad. Elements outside x are skipped; the average divides by
 * the elements inside x, or with cip by the window positions inside the
 * padded input [-pt, H + pb) x [-pl, W + pr). A window that holds no element
 * of x (possible only with dilations that step over a small input) gives
 * the lowest value for MAXPOOL and NaN (0/0) for AVGPOOL without cip. */
#define POOL_GENERAL(T, LOWEST, IS_NAN)                                                     \
    do {                                                                                    \
        const T *xs = x->data;                                                              \
        T *os = o;                                                                          \
        for (int64_t pl_ = 0; pl_ < planes; pl_++, xs += H * W)                             \
            for (int64_t oh = 0; oh < OH; oh++)                                             \
                for (int64_t ow = 0; ow < OW; ow++) {                                       \
                    const int64_t h0 = oh * sh - pt, w0 = ow * sw - pl;                     \
                    T acc = avg ? 0 : LOWEST;                                               \
                    bool bad = false;                                                       \
                    int64_t n = 0, ph = 0, pw = 0;                                          \
                    for (int64_t i = 0; i < kh; i++) {                                      \
                        const int64_t h = h0 + i * dh;                                      \
                        ph += h < H + pb;                                                   \
                        if (h < 0 || h >= H)                                                \
                            continue;                                                       \
                        for (int64_t j = 0; j < kw; j++) {                                  \
                            const int64_t w = w0 + j * dw;                                  \
                            if (w < 0 || w >= W)                                            \
                                continue;                                                   \
                            const T v = xs[h * W + w];                                      \
                            if (avg)                                                        \
                                acc += v;                                                   \
                            else                                                            \
                                acc = v > acc ? v : acc;                                    \
                            bad |= IS_NAN(v);                                               \
                            n++;                                                            \
                        }                                                                   \
                    }                                                                       \
                    for (int64_t j = 0; j < kw; j++)                                        \
                        pw += w0 + j * dw < W + pr;                                         \
                    if (avg)                                                                \
                        acc = (T)(acc / (T)(cip ? ph * pw : n));                            \
                    else if (bad)                                                           \
                        acc = (T)NAN;                                                       \
                    *os++ = acc;                                                            \
                }                                                                           \
    } while (0)
#define POOL_NO_NAN(v) false
#define POOL_IS_NAN(v) ((v) != (v))

/* The 2x2 window at stride 2 without padding (the usual CNN downsampling):
 * every window lies inside x, and each output row reads two input rows at
 * even and odd columns, a loop the compiler vectorises. The max keeps the
 * first of equal elements and gives NaN when the window holds one, as the
 * general loops; the mean sums in their order. Planes [b, e). */
#define POOL2(T)                                                                            \
    do {                                                                                    \
        const T *xs = (const T *)a->x + b * H * W;                                          \
        T *os = (T *)a->o + b * OH * OW;                                                    \
        for (size_t pl_ = b; pl_ < e; pl_++, xs += H * W)                                   \
            for (int64_t oh = 0; oh < OH; oh++, os += OW) {                                 \
                const T *r0 = xs + 2 * oh * W, *r1 = r0 + W;                                \
                if (a->avg)                                                                 \
                    for (int64_t ow = 0; ow < OW; ow++)                                     \
                        os[ow] = (((r0[2 * ow] + r0[2 * ow + 1]) + r1[2 * ow]) + r1[2 * ow + 1]) / (T)4; \
                else                                                                        \
                    for (int64_t ow = 0; ow < OW; ow++) {                                   \
                        const T x0 = r0[2 * ow], x1 = r0[2 * ow + 1];                       \
                        const T x2 = r1[2 * ow], x3 = r1[2 * ow + 1];                       \
                        T m = x1 > x0 ? x1 : x0;                                            \
                        m = x2 > m ? x2 : m;                                                \
                        m = x3 > m ? x3 : m;                                                \
                        const bool nan = (x0 != x0) | (x1 != x1) | (x2 != x2) | (x3 != x3); \
                        os[ow] = nan ? (T)NAN : m;                                          \
                    }                                                                       \
            }                                                                               \
    } while (0)

typedef struct pool2_arg {
    const void *x;
    void *o;
    int64_t H, W, OH, OW;
    bool avg, avx512, avx2, f32; /* avx512, avx2: the plan's vector code (f32) */
} pool2_arg;

/* POOL2 on f32 with AVX-512 (checked at run time): 16 outputs at a time from
 * two rows of 32 inputs, split into even and odd columns; the max picks in
 * the same order (a later element only when greater) and NaN when the
 * window holds one, so the results are POOL2's bit for bit. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The 16 windows whose elements are x0..x3 (in the loop's order). */
__attribute__((target("avx512f"), always_inline)) static inline __m512 pool2_vec(__m512 x0, __m512 x1, __m512 x2,
                                                                                  __m512 x3, bool avg)
{
    if (avg) /* times 0.25: the quotient by 4, without a division's cost */
        return _mm512_mul_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(x0, x1), x2), x3), _mm512_set1_ps(0.25f));
    /* vmaxps a, b is a > b ? a : b: the loop's x1 > m ? x1 : m */
    __m512 m = _mm512_max_ps(x1, x0);
    m = _mm512_max_ps(x2, m);
    m = _mm512_max_ps(x3, m);
    const __mmask16 bad = _mm512_cmp_ps_mask(x0, x1, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(x2, x3, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(bad, m, _mm512_set1_ps(NAN));
}

__attribute__((target("avx512f"))) static void pool2_f32_avx512(const pool2_arg *a, size_t b, size_t e)
{
    const int64_t H = a->H, W = a->W, OH = a->OH, OW = a->OW;
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    /* rows of at most 8 outputs go two at a time: lanes [0, OW) from the
     * first pair of input rows, [OW, 2 OW) from the next (index 16 on) */
    const bool pairs = OW <= 8;
    int32_t e2[16] = {0};
    for (int64_t j = 0; pairs && j < 2 * OW; j++)
        e2[j] = (int32_t)(j < OW ? 2 * j : 16 + 2 * (j - OW));
    const __m512i even2 = _mm512_loadu_si512(e2), odd2 = _mm512_add_epi32(even2, _mm512_set1_epi32(1));
    const __mmask16 in2 = (__mmask16)(pairs ? (1u << (2 * OW)) - 1 : 0), out2 = in2;
    const float *xs = (const float *)a->x + b * H * W;
    float *os = (float *)a->o + b * OH * OW;
    for (size_t pl_ = b; pl_ < e; pl_++, xs += H * W) {
        int64_t oh = 0;
        for (; pairs && oh + 1 < OH; oh += 2, os += 2 * OW) {
            const float *r0 = xs + 2 * oh * W;
            const __m512 p0 = _mm512_maskz_loadu_ps(in2, r0), p1 = _mm512_maskz_loadu_ps(in2, r0 + W);
            const __m512 p2 = _mm512_maskz_loadu_ps(in2, r0 + 2 * W), p3 = _mm512_maskz_loadu_ps(in2, r0 + 3 * W);
            const __m512 m = pool2_vec(_mm512_permutex2var_ps(p0, even2, p2), _mm512_permutex2var_ps(p0, odd2, p2),
                                       _mm512_permutex2var_ps(p1, even2, p3), _mm512_permutex2var_ps(p1, odd2, p3),
                                       a->avg);
            _mm512_mask_storeu_ps(os, out2, m);
        }
        for (; oh < OH; oh++, os += OW) {
            const float *r0 = xs + 2 * oh * W, *r1 = r0 + W;
            for (int64_t ow = 0; ow < OW; ow += 16) {
                const int64_t n = OW - ow < 16 ? OW - ow : 16;
                const __mmask16 lo = (__mmask16)(n >= 8 ? 0xFFFF : (1u << (2 * n)) - 1);
                const __mmask16 hi = (__mmask16)(n <= 8 ? 0 : n == 16 ? 0xFFFF : (1u << (2 * n - 16)) - 1);
                const __mmask16 out = (__mmask16)(n == 16 ? 0xFFFF : (1u << n) - 1);
                const __m512 a0 = _mm512_maskz_loadu_ps(lo, r0 + 2 * ow);
                const __m512 a1 = _mm512_maskz_loadu_ps(hi, r0 + 2 * ow + 16);
                const __m512 b0 = _mm512_maskz_loadu_ps(lo, r1 + 2 * ow);
                const __m512 b1 = _mm512_maskz_loadu_ps(hi, r1 + 2 * ow + 16);
                const __m512 m = pool2_vec(_mm512_permutex2var_ps(a0, even, a1), _mm512_permutex2var_ps(a0, odd, a1),
                                           _mm512_permutex2var_ps(b0, even, b1), _mm512_permutex2var_ps(b0, odd, b1),
                                           a->avg);
                _mm512_mask_storeu_ps(os + ow, out, m);
            }
        }
    }
}

/* The same on AVX2: 8 outputs at a time from two rows of 16 inputs, their
 * even and odd columns by chw.h's laced shuffles (put in order once, at
 * the end); the max as pool2_vec's, NaN put back by a blend. */
__attribute__((target("avx2"), always_inline)) static inline __m256 pool2_vec8(__m256 x0, __m256 x1, __m256 x2,
                                                                                __m256 x3, bool avg)
{
    if (avg)
        return _mm256_mul_ps(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(x0, x1), x2), x3), _mm256_set1_ps(0.25f));
    __m256 m = _mm256_max_ps(x1, x0);
    m = _mm256_max_ps(x2, m);
    m = _mm256_max_ps(x3, m);
    const __m256 bad = _mm256_or_ps(_mm256_cmp_ps(x0, x1, _CMP_UNORD_Q), _mm256_cmp_ps(x2, x3, _CMP_UNORD_Q));
    return _mm256_blendv_ps(m, _mm256_set1_ps(NAN), bad);
}

/* outputs [ow, ow + n) of a row from its input rows r0, r1 (n <= 8) */
__attribute__((target("avx2"), always_inline)) static inline void pool2_row8(const float *r0, const float *r1,
                                                                              float *os, int64_t ow, int64_t n,
                                                                              bool avg)
{
    __m256 a0, a1, b0, b1;
    if (n == 8) {
        a0 = _mm256_loadu_ps(r0 + 2 * ow), a1 = _mm256_loadu_ps(r0 + 2 * ow + 8);
        b0 = _mm256_loadu_ps(r1 + 2 * ow), b1 = _mm256_loadu_ps(r1 + 2 * ow + 8);
    } else { /* 2n columns of each row */
        a0 = v8_ldn(r0 + 2 * ow, 2 * n), b0 = v8_ldn(r1 + 2 * ow, 2 * n);
        a1 = n > 4 ? v8_ldn(r0 + 2 * ow + 8, 2 * n - 8) : _mm256_setzero_ps();
        b1 = n > 4 ? v8_ldn(r1 + 2 * ow + 8, 2 * n - 8) : _mm256_setzero_ps();
    }
    const __m256 m = pool2_vec8(v8_evens_laced(a0, a1), v8_odds_laced(a0, a1), v8_evens_laced(b0, b1),
                                v8_odds_laced(b0, b1), avg);
    if (n == 8)
        _mm256_storeu_ps(os + ow, v8_unlace(m));
    else
        v8_stn(os + ow, v8_unlace(m), n);
}

__attribute__((target("avx2"))) static void pool2_f32_avx2(const pool2_arg *a, size_t b, size_t e)
{
    const int64_t H = a->H, W = a->W, OH = a->OH, OW = a->OW;
    const float *xs = (const float *)a->x + b * H * W;
    float *os = (float *)a->o + b * OH * OW;
    for (size_t pl_ = b; pl_ < e; pl_++, xs += H * W)
        for (int64_t oh = 0; oh < OH; oh++, os += OW) {
            const float *r0 = xs + 2 * oh * W, *r1 = r0 + W;
            int64_t ow = 0;
            for (; ow + 8 <= OW; ow += 8)
                pool2_row8(r0, r1, os, ow, 8, a->avg);
            if (ow < OW && OW >= 8) /* the last 8 again rather than a masked tail: the same values */
                pool2_row8(r0, r1, os, OW - 8, 8, a->avg);
            else if (ow < OW)
                pool2_row8(r0, r1, os, ow, OW - ow, a->avg);
        }
}

#else
static void pool2_f32_avx512(const pool2_arg *a, size_t b, size_t e) { (void)a, (void)b, (void)e; }
static void pool2_f32_avx2(const pool2_arg *a, size_t b, size_t e) { (void)a, (void)b, (void)e; }
#endif

static void pool2_planes(void *arg, size_t b, size_t e)
{
    const pool2_arg *a = arg;
    const int64_t H = a->H, W = a->W, OH = a->OH, OW = a->OW;
    if (a->avx512 || a->avx2) {
        (a->avx512 ? pool2_f32_avx512 : pool2_f32_avx2)(a, b, e);
        return;
    }
    if (a->f32)
        POOL2(float);
    else
        POOL2(double);
}

/* ---- 3x3 max pools at stride 2 --------------------------------------------------------
 * An f32 MAXPOOL of 3x3 windows at stride 2 (any pads, any ceil mode:
 * resnet's, squeezenet's, shufflenet's) on the planes as they lie.
 * The depthwise kernel it had taken turned each 16 planes into channel
 * blocks and back, three quarters of its time (resnet's 64 x 112 x 112:
 * 284 us against ORT's 200 on one thread). On AVX-512 and AVX2 (without
 * either the depthwise kernel's portable code): each output row reads its
 * three input rows, 16 (8) outputs from 33 (17) columns of each, the three
 * taps of a row by two-source shuffles. The taps go in row-major order
 * with the pool loops' rule (a later element only when greater, NaN when
 * the window holds one; the cells outside x are -inf): their bits. */
typedef struct pool3_arg {
    const float *x;
    float *o;
    int64_t H, W, OH, OW, pt, pl;
    bool avx512; /* else AVX2 */
} pool3_arg;

#if defined(__x86_64__) && defined(__GNUC__)
/* Columns [w0, w0 + 16) of row r, -inf outside [0, W) (w0 >= -2: a pad's
 * lanes are masked off, their address formed as an integer) */
__attribute__((target("avx512f"), always_inline)) static inline __m512 pool3_load(const float *r, int64_t w0,
                                                                                   int64_t W)
{
    const int64_t lo = w0 < 0 ? -w0 : 0, hi = W - w0 < 16 ? W - w0 : 16;
    const __mmask16 m = hi <= lo ? 0 : (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
    return _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m,
                                (const void *)((uintptr_t)r + (uintptr_t)w0 * sizeof *r));
}

__attribute__((target("avx512f"))) static void pool3_avx512(const pool3_arg *a, size_t b, size_t e)
{
    const int64_t H = a->H, W = a->W, OH = a->OH, OW = a->OW;
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (size_t pl_ = b; pl_ < e; pl_++) {
        const float *xs = a->x + (int64_t)pl_ * H * W;
        float *os = a->o + (int64_t)pl_ * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++, os += OW)
            for (int64_t ow = 0; ow < OW; ow += 16) {
                const int64_t w0 = 2 * ow - a->pl; /* the window of output ow + k starts at w0 + 2k */
                __m512 m = _mm512_set1_ps(-INFINITY);
                __mmask16 bad = 0;
                for (int64_t h = 2 * oh - a->pt; h < 2 * oh - a->pt + 3; h++) {
                    if (h < 0 || h >= H)
                        continue;
                    const float *r = xs + h * W;
                    const __m512 l0 = pool3_load(r, w0, W), l1 = pool3_load(r, w0 + 16, W);
                    const __m512 l2 = pool3_load(r, w0 + 32, W);
                    const __m512 s0 = _mm512_castsi512_ps(
                        _mm512_alignr_epi32(_mm512_castps_si512(l1), _mm512_castps_si512(l0), 2));
                    const __m512 s1 = _mm512_castsi512_ps(
                        _mm512_alignr_epi32(_mm512_castps_si512(l2), _mm512_castps_si512(l1), 2));
                    const __m512 t0 = _mm512_permutex2var_ps(l0, even, l1), t1 = _mm512_permutex2var_ps(l0, odd, l1);
                    const __m512 t2 = _mm512_permutex2var_ps(s0, even, s1);
                    /* vmaxps t, m is t > m ? t : m, the loops' step (m is never NaN) */
                    m = _mm512_max_ps(t2, _mm512_max_ps(t1, _mm512_max_ps(t0, m)));
                    bad |= _mm512_cmp_ps_mask(t0, t1, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(t2, t2, _CMP_UNORD_Q);
                }
                m = _mm512_mask_mov_ps(m, bad, _mm512_set1_ps(NAN));
                const int64_t n = OW - ow < 16 ? OW - ow : 16;
                _mm512_mask_storeu_ps(os + ow, (__mmask16)((1u << n) - 1), m);
            }
    }
}

/* The same on AVX2, 8 outputs at a time: the first taps of their windows
 * are the even columns of [w0, w0 + 16), the second the odd ones, the
 * third the even ones of [w0 + 2, w0 + 18) (chw.h's laced shuffles, put
 * in order once at the end); loads inside the row unmasked, those that
 * reach a pad masked to -inf. */
__attribute__((target("avx2"), always_inline)) static inline __m256 pool3_load8(const float *r, int64_t w0,
                                                                                 int64_t W, bool inside)
{
    if (inside)
        return _mm256_loadu_ps(r + w0);
    const int64_t lo = w0 < 0 ? -w0 : 0, hi = W - w0 < 8 ? W - w0 : 8;
    const __m256i m = _mm256_andnot_si256(v8_mask(lo), v8_mask(hi));
    return _mm256_blendv_ps(_mm256_set1_ps(-INFINITY),
                            _mm256_maskload_ps((const float *)((uintptr_t)r + (uintptr_t)w0 * sizeof *r), m),
                            _mm256_castsi256_ps(m));
}

/* outputs [ow, ow + n) of output row oh, n <= 8; inside: every load
 * within the row (a constant where this is inlined: the interior's code
 * has no masks) */
__attribute__((target("avx2"), always_inline)) static inline void pool3_vec8(const pool3_arg *a, const float *xs,
                                                                              float *os, int64_t oh, int64_t ow,
                                                                              int64_t n, bool inside)
{
    const int64_t H = a->H, W = a->W, w0 = 2 * ow - a->pl; /* the window of output ow + k starts at w0 + 2k */
    __m256 m = _mm256_set1_ps(-INFINITY), bad = _mm256_setzero_ps();
    for (int64_t h = 2 * oh - a->pt; h < 2 * oh - a->pt + 3; h++) {
        if (h < 0 || h >= H)
            continue;
        const float *r = xs + h * W;
        const __m256 l0 = pool3_load8(r, w0, W, inside), l1 = pool3_load8(r, w0 + 8, W, inside);
        const __m256 s0 = pool3_load8(r, w0 + 2, W, inside), s1 = pool3_load8(r, w0 + 10, W, inside);
        const __m256 t0 = v8_evens_laced(l0, l1), t1 = v8_odds_laced(l0, l1), t2 = v8_evens_laced(s0, s1);
        m = _mm256_max_ps(t2, _mm256_max_ps(t1, _mm256_max_ps(t0, m)));
        bad = _mm256_or_ps(bad, _mm256_or_ps(_mm256_cmp_ps(t0, t1, _CMP_UNORD_Q), _mm256_cmp_ps(t2, t2, _CMP_UNORD_Q)));
    }
    v8_stn(os + ow, v8_unlace(_mm256_blendv_ps(m, _mm256_set1_ps(NAN), bad)), n);
}

__attribute__((target("avx2"))) static void pool3_avx2(const pool3_arg *a, size_t b, size_t e)
{
    const int64_t H = a->H, W = a->W, OH = a->OH, OW = a->OW;
    for (size_t pl_ = b; pl_ < e; pl_++) {
        const float *xs = a->x + (int64_t)pl_ * H * W;
        float *os = a->o + (int64_t)pl_ * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++, os += OW)
            for (int64_t ow = 0; ow < OW; ow += 8) {
                const int64_t w0 = 2 * ow - a->pl, n = OW - ow < 8 ? OW - ow : 8;
                if (w0 >= 0 && w0 + 18 <= W && n == 8)
                    pool3_vec8(a, xs, os, oh, ow, 8, true);
                else
                    pool3_vec8(a, xs, os, oh, ow, n, false);
            }
    }
}

static void pool3_planes(void *arg, size_t b, size_t e)
{
    const pool3_arg *a = arg;
    (a->avx512 ? pool3_avx512 : pool3_avx2)(a, b, e);
}
#else
static void pool3_planes(void *arg, size_t b, size_t e) { (void)arg, (void)b, (void)e; }
#endif

/* ---- Average pools on a padded plane --------------------------------------------------
 * A float AVGPOOL without dilations (any window, strides, pads, ceil mode,
 * count_include_pad: inception's 3x3 at stride 1): each plane copied into
 * a zeroed plane that holds every window whole (Hp x Wp), then for each
 * window position (i, j), in row-major order, every output adds its
 * element, a loop GCC vectorises (at stride 1 one loop over the whole
 * plane, the outputs laid Wp apart). Each output so sums its window's
 * elements in the window loops' order with the cells outside x added as
 * +0, which changes no sum (one that starts at +0 is never -0), and
 * divides by the same count (the elements, or with cip the window's
 * positions inside the padded input: rows times columns, exact as the
 * loops' product): their bits. The general loop had taken 1.6 ns an
 * element, 40x ORT's time on inception_v3's pools. Planes in parallel. */
typedef struct avg_job {
    const void *x;
    void *o;
    int64_t H, W, OH, OW, kh, kw, sh, sw, pt, pl, pb, pr, Hp, Wp;
    bool cip;
    size_t scratch; /* bytes of a chunk's scratch */
    void (*planes)(const struct avg_job *j, void *scratch, size_t b, size_t e);
    const tfvm_allocator *alloc;
    atomic_bool nomem;
} avg_job;

/* The divisor of output row oh (col) along one axis: the window's cells
 * inside x, or with cip inside the padded input */
static int64_t avg_count(int64_t o, int64_t s, int64_t p0, int64_t p1, int64_t k, int64_t n, bool cip)
{
    const int64_t a = o * s - p0, lo = a < 0 ? 0 : a, hi = a + k > n ? n : a + k, pad = n + p1 - a;
    return cip ? (pad < k ? pad : k) : hi - lo;
}

/* Planes [b, e): each copied into the zeroed padded plane xp, then PLANE(T)
 * its outputs at os from xp and the divisors' factors dr (rows), dc
 * (columns) */
#define AVG_PLANES(T, PLANE)                                                                \
    do {                                                                                    \
        const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW, kh = j->kh, kw = j->kw;   \
        const int64_t sh = j->sh, sw = j->sw, Hp = j->Hp, Wp = j->Wp;                       \
        T *xp = scratch, *acc = xp + Hp * Wp, *dr = acc + OH * Wp, *dc = dr + OH;           \
        for (int64_t oh = 0; oh < OH; oh++)                                                 \
            dr[oh] = (T)avg_count(oh, sh, j->pt, j->pb, kh, H, j->cip);                     \
        for (int64_t ow = 0; ow < OW; ow++)                                                 \
            dc[ow] = (T)avg_count(ow, sw, j->pl, j->pr, kw, W, j->cip);                     \
        memset(xp, 0, (size_t)(Hp * Wp) * sizeof *xp);                                      \
        const int64_t rows = H < Hp - j->pt ? H : Hp - j->pt, cols = W < Wp - j->pl ? W : Wp - j->pl; \
        for (size_t pi = b; pi < e; pi++) {                                                 \
            const T *xs = (const T *)j->x + (int64_t)pi * H * W;                            \
            T *os = (T *)j->o + (int64_t)pi * OH * OW;                                      \
            for (int64_t h = 0; h < rows; h++)                                              \
                memcpy(xp + (h + j->pt) * Wp + j->pl, xs + h * W, (size_t)cols * sizeof *xs); \
            PLANE(T);                                                                       \
        }                                                                                   \
    } while (0)

/* The plane's sums in acc, one pass over them per window position, then
 * the divisions */
#define AVG_SUMS(T)                                                                         \
    do {                                                                                    \
        if (sh == 1 && sw == 1) {                                                           \
            const int64_t n = (OH - 1) * Wp + OW;                                           \
            for (int64_t q = 0; q < n; q++)                                                 \
                acc[q] = 0;                                                                 \
            for (int64_t i = 0; i < kh; i++)                                                \
                for (int64_t jj = 0; jj < kw; jj++) {                                       \
                    const T *xq = xp + i * Wp + jj;                                         \
                    for (int64_t q = 0; q < n; q++)                                         \
                        acc[q] += xq[q];                                                    \
                }                                                                           \
        } else {                                                                            \
            for (int64_t oh = 0; oh < OH; oh++) {                                           \
                T *ar = acc + oh * Wp;                                                      \
                for (int64_t ow = 0; ow < OW; ow++)                                         \
                    ar[ow] = 0;                                                             \
                for (int64_t i = 0; i < kh; i++)                                            \
                    for (int64_t jj = 0; jj < kw; jj++) {                                   \
                        const T *xq = xp + (oh * sh + i) * Wp + jj;                         \
                        for (int64_t ow = 0; ow < OW; ow++)                                 \
                            ar[ow] += xq[ow * sw];                                          \
                    }                                                                       \
            }                                                                               \
        }                                                                                   \
        for (int64_t oh = 0; oh < OH; oh++)                                                 \
            for (int64_t ow = 0; ow < OW; ow++)                                             \
                os[oh * OW + ow] = acc[oh * Wp + ow] / (dr[oh] * dc[ow]);                   \
    } while (0)

static void avg_f64(const avg_job *j, void *scratch, size_t b, size_t e) { AVG_PLANES(double, AVG_SUMS); }
static void avg_f32(const avg_job *j, void *scratch, size_t b, size_t e) { AVG_PLANES(float, AVG_SUMS); }
#if defined(__x86_64__) && defined(__GNUC__)
/* the same loops in 8 lanes */
__attribute__((target("avx2"))) static void avg_f32_avx2(const avg_job *j, void *scratch, size_t b, size_t e)
{
    AVG_PLANES(float, AVG_SUMS);
}
/* Unit strides, 16 outputs of a row at a time: their sums in a register,
 * the window's taps added row by row, left to right, to 0 (the loops'
 * order), then the division: the same bits. The loops above passed over
 * the plane's sums once per tap (inception_v3's 3x3 pools 1.1 ns an
 * output). */
__attribute__((target("avx512f"))) static inline void avg_rows_v16(const avg_job *j, const float *xp,
                                                                    const float *dr, const float *dc, float *os)
{
    const int64_t OH = j->OH, OW = j->OW, kh = j->kh, kw = j->kw, Wp = j->Wp;
    for (int64_t oh = 0; oh < OH; oh++) {
        const __m512 vr = _mm512_set1_ps(dr[oh]);
        for (int64_t ow = 0; ow < OW; ow += 16) {
            const __mmask16 k = OW - ow >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (OW - ow)) - 1);
            __m512 acc = _mm512_setzero_ps();
            if (kh == 3 && kw == 3) /* (inception's: the taps unrolled) */
                for (int i = 0; i < 3; i++) {
                    const float *xr = xp + (oh + i) * Wp + ow;
                    acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(k, xr));
                    acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(k, xr + 1));
                    acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(k, xr + 2));
                }
            else
                for (int64_t i = 0; i < kh; i++) {
                    const float *xr = xp + (oh + i) * Wp + ow;
                    for (int64_t jj = 0; jj < kw; jj++)
                        acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(k, xr + jj));
                }
            const __m512 d = _mm512_mul_ps(vr, _mm512_maskz_loadu_ps(k, dc + ow));
            _mm512_mask_storeu_ps(os + oh * OW + ow, k, _mm512_div_ps(acc, d));
        }
    }
}
#define AVG_ROWS_V16(T) avg_rows_v16(j, xp, dr, dc, os)
__attribute__((target("avx512f"))) static void avg_f32_v16(const avg_job *j, void *scratch, size_t b, size_t e)
{
    AVG_PLANES(float, AVG_ROWS_V16);
}
#undef AVG_ROWS_V16
#else
static void avg_f32_avx2(const avg_job *j, void *scratch, size_t b, size_t e) { avg_f32(j, scratch, b, e); }
static void avg_f32_v16(const avg_job *j, void *scratch, size_t b, size_t e) { avg_f32(j, scratch, b, e); }
#endif

static void avg_chunk(void *arg, size_t b, size_t e)
{
    avg_job *j = arg;
    void *scratch = chunk_scratch(j->alloc, j->scratch, &j->nomem);
    if (!scratch)
        return;
    j->planes(j, scratch, b, e);
    ut_free(j->alloc, scratch, j->scratch);
}

/* Output extent of one pooled dim: floor, or with ceil mode ceil, of
 * (in + pads - span) / stride, + 1; in ceil mode a last window that would
 * start in the end padding is dropped (ONNX, PyTorch). */
static bool pool_out(int64_t in, int64_t p0, int64_t p1, int64_t kernel, int64_t dil, int64_t stride,
                     bool ceil_mode, int64_t *out)
{
    const int64_t span = dil * (kernel - 1) + 1, room = in + p0 + p1 - span;
    if (room < 0)
        return false;
    int64_t n = (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
    if (ceil_mode && (n - 1) * stride >= in + p0)
        n--;
    *out = n;
    return true;
}

/* MAXPOOL / AVGPOOL (x [N, C, H, W], p = [kh, kw, sh, sw, pt, pl, pb, pr]
 * or those and [dh, dw, ceil_mode, count_include_pad]). */
tfvm_status dev_cpu_pool(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *x = &in[0];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE], s3[DEV_KSHAPE];
    int64_t p[12];
    int np;
    tfvm_status st = dev_kvec(k, &in[1], "parameters", p, 12, &np);
    if (st)
        return st;
    if (np != 8 && np != 12)
        return dev_kfail(k, TFVM_ERR_SHAPE,
                         "parameters must be [kh, kw, sh, sw, pt, pl, pb, pr] and optionally [dh, dw, ceil_mode, count_include_pad], got %d entries",
                         np);
    if (np == 8) {
        p[8] = p[9] = 1;
        p[10] = p[11] = 0;
    }
    const bool avg = k->op == ISA_AVGPOOL;
    if (avg ? !dev_kfloat(x->dtype) : !dev_knumeric(x->dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "not defined on %s%s",
                         tfvm_dtype_name((tfvm_dtype)x->dtype), avg ? " (floats only)" : "");
    if (x->rank != 4)
        return dev_kfail(k, TFVM_ERR_SHAPE, "x must be NCHW (rank 4), got %s", dev_kshape(x, s1));
    const int64_t kh = p[0], kw = p[1], sh = p[2], sw = p[3], pt = p[4], pl = p[5], pb = p[6], pr = p[7];
    const int64_t dh = p[8], dw = p[9];
    if (!conv_in(kh, 1) || !conv_in(kw, 1) || !conv_in(sh, 1) || !conv_in(sw, 1) || !conv_in(pt, 0) ||
        !conv_in(pl, 0) || !conv_in(pb, 0) || !conv_in(pr, 0) || !conv_in(dh, 1) || !conv_in(dw, 1) ||
        pt >= dh * (kh - 1) + 1 || pb >= dh * (kh - 1) + 1 || pl >= dw * (kw - 1) + 1 ||
        pr >= dw * (kw - 1) + 1 || (p[10] != 0 && p[10] != 1) || (p[11] != 0 && p[11] != 1))
        return dev_kfail(k, TFVM_ERR_ARGUMENT,
                         np == 8 ? "bad parameters %s: window and strides must be >= 1, pads >= 0 and smaller than the window"
                                 : "bad parameters %s: window, strides and dilations must be >= 1, pads >= 0 and smaller than the window, ceil_mode and count_include_pad 0 or 1",
                         dev_kdims(np, p, s1));
    const bool ceil_mode = p[10], cip = p[11];
    const int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t OH, OW;
    if (H == 0 || W == 0 || !conv_in(H, 0) || !conv_in(W, 0) || !pool_out(H, pt, pb, kh, dh, sh, ceil_mode, &OH) ||
        !pool_out(W, pl, pr, kw, dw, sw, ceil_mode, &OW))
        return dev_kfail(k, TFVM_ERR_SHAPE, "window %s does not fit x %s padded by %s",
                         dev_kdims(2, p, s1), dev_kshape(x, s2), dev_kdims(4, p + 4, s3));
    const int64_t od[4] = {N, C, OH, OW};
    dev_value r;
    void *o;
    if ((st = dev_kresult(k, x->dtype, 4, od, &r, &o)))
        return st;
    const int64_t planes = N * C;
    dev_pool_plan plan;
    dev_pool_plan_make(x->dtype, avg, x->dims, p, OH, OW, dev_par_width(), &plan);
    if (plan.kernel == DEV_POOL_EMPTY) {
        *out = r;
        return TFVM_OK;
    }
    if (plan.kernel == DEV_POOL_2X2) {
        pool2_arg a = {x->data, o, H, W, OH, OW, avg, plan.avx512, plan.avx2, x->dtype == TFVM_F32};
        dev_par_for((size_t)plan.planes, dev_kgrain(plan.planes, plan.plane, DEV_POOL2_LEAST, 1), pool2_planes, &a);
        *out = r;
        return TFVM_OK;
    }
    if (plan.kernel == DEV_POOL_3X3) {
        pool3_arg a = {x->data, o, H, W, OH, OW, pt, pl, plan.avx512};
        dev_par_for((size_t)plan.planes, dev_kgrain(plan.planes, plan.plane, DEV_POOL2_LEAST, 1), pool3_planes, &a);
        *out = r;
        return TFVM_OK;
    }
    if (plan.kernel == DEV_POOL_GRID) {
        /* f32 max pools through the depthwise grid (dwconv.c) */
        dw_job dj = {.d = plan.dw, .alloc = k->alloc};
        dj.d.x = x->data;
        dj.d.o = o;
        atomic_init(&dj.nomem, false);
        const int64_t items = dev_dw_items(&dj.d);
        dev_par_for((size_t)items, dev_kgrain(items, dev_dw_item_cost(&dj.d), DEV_KPAR_MACS, 1), dw_chunk, &dj);
        if (atomic_load(&dj.nomem)) {
            dev_value_release(&r);
            return dev_kfail(k, TFVM_ERR_NOMEM, "out of memory");
        }
        *out = r;
        return TFVM_OK;
    }
    if (plan.kernel == DEV_POOL_AVG) {
        const size_t esz = dev_kesize(x->dtype);
        avg_job j = {x->data, o, H, W, OH, OW, kh, kw, sh, sw, pt, pl, pb, pr, plan.Hp, plan.Wp, cip,
                     (size_t)(plan.Hp * plan.Wp + OH * plan.Wp + OH + OW) * esz,
                     x->dtype == TFVM_F64 ? avg_f64
                     : plan.avx512        ? avg_f32_v16
                     : plan.avx2          ? avg_f32_avx2
                                          : avg_f32,
                     k->alloc, false};
        dev_par_for((size_t)plan.planes, dev_kgrain(plan.planes, plan.plane, DEV_POOL2_LEAST, 1), avg_chunk, &j);
        if (atomic_load(&j.nomem)) {
            dev_value_release(&r);
            return dev_kfail(k, TFVM_ERR_NOMEM, "out of memory");
        }
        *out = r;
        return TFVM_OK;
    }
    if (plan.kernel == DEV_POOL_GENERAL) {
        switch (x->dtype) {
        case TFVM_U8: POOL_GENERAL(uint8_t, 0, POOL_NO_NAN); break;
        case TFVM_I8: POOL_GENERAL(int8_t, INT8_MIN, POOL_NO_NAN); break;
        case TFVM_I32: POOL_GENERAL(int32_t, INT32_MIN, POOL_NO_NAN); break;
        case TFVM_I64: POOL_GENERAL(int64_t, INT64_MIN, POOL_NO_NAN); break;
        case TFVM_F32: POOL_GENERAL(float, -INFINITY, POOL_IS_NAN); break;
        default: POOL_GENERAL(double, -INFINITY, POOL_IS_NAN); break;
        }
        *out = r;
        return TFVM_OK;
    }
    switch (x->dtype) {
    case TFVM_U8: POOL_SHAPES(uint8_t, POOL_IMAX, POOL_KEEP); break;
    case TFVM_I8: POOL_SHAPES(int8_t, POOL_IMAX, POOL_KEEP); break;
    case TFVM_I32: POOL_SHAPES(int32_t, POOL_IMAX, POOL_KEEP); break;
    case TFVM_I64: POOL_SHAPES(int64_t, POOL_IMAX, POOL_KEEP); break;
    case TFVM_F32:
        if (avg)
            POOL_SHAPES(float, POOL_SUM, POOL_MEAN);
        else
            POOL_SHAPES(float, POOL_FMAX, POOL_KEEPF);
        break;
    default:
        if (avg)
            POOL_SHAPES(double, POOL_SUM, POOL_MEAN);
        else
            POOL_SHAPES(double, POOL_FMAX, POOL_KEEPF);
        break;
    }
    *out = r;
    return TFVM_OK;
}
