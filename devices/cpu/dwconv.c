/* devices/cpu/dwconv.c — f32 depthwise convolution (dwconv.h). An input
 * plane is padded once into scratch, split into stride phases (row phase a,
 * column phase b: ph[a][b][r][c] = x padded [r*sh + a][c*sw + b]), so that
 * every window tap reads consecutive elements whatever the stride. Outputs
 * are computed on a wide grid q = oh*cols + ow (cols >= OW: the phase
 * planes' width), where tap t reads its phase plane at q + toff[t]: one
 * contiguous run over the whole plane, four vectors at a time with their
 * KH*KW taps summed in registers, in tap order; the first OW of every cols
 * are then copied out with the bias and relu. The grid's extra columns cost
 * (cols - OW) / cols of the work (2% at 112 wide, 36% for a 5x5 window over
 * 7x7). Convolutions with one output per channel run on channel blocks
 * instead (dw_run_blocks): VL planes interleaved, one vector per position,
 * no lane wasted. MobileNet's and EfficientNet's depthwise layers went through the
 * grouped-convolution paths before: one product per channel, padded to
 * eight output channels, or im2col for strides of 2 (~0.7 GMAC/s). f32
 * MAXPOOL other than 3x3 at stride 2 (conv.c's own) runs the same ways:
 * -inf pads, the taps' max instead of their weighted sum (on channel
 * blocks 1.5-2.7x faster than on planes). */
#include "devices/cpu/vec.h"
#include "devices/cpu/dwconv.h"
#include "devices/cpu/chw.h"
#include "devices/cpu/kern.h"
#include "devices/tensor.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#define DW_MAXTAPS 1024
/* The loads of the grid's last block run up to 4 vectors (at most 64
 * floats) past it, and a garbage column's taps up to cols past its plane:
 * cols + DW_TAIL zeros after the last plane cover both. */
#define DW_TAIL 64

static atomic_int forced, forced_layout;

void dev_dw_force(int path) { atomic_store(&forced, path); }
void dev_dw_force_layout(int layout) { atomic_store(&forced_layout, layout); }

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Stride 2's even columns of x from o[0] while all 2n read are in x (n
 * floats in all), by d's instruction set; the rest by the caller. */
static int64_t dw_evens(const dev_dw *d, float *o, const float *x, int64_t n)
{
    const int64_t vl = d->vl;
    n = n / vl * vl;
#if defined(__x86_64__) && defined(__GNUC__)
    if (d->path == 0) {
        evens_v16(o, x, n);
        return n;
    }
    if (d->path == 1) {
        evens_v8(o, x, n);
        return n;
    }
#endif
    evens_v4(o, x, n);
    return n;
}

/* A phase plane's width and height: every output's taps and every element
 * of x fall inside. */
static int64_t phase_cols(const dev_dw *d)
{
    return max64(d->OW + (d->KW - 1) * d->dw / d->sw, (d->W + d->pl + d->sw - 1) / d->sw);
}
static int64_t phase_rows(const dev_dw *d)
{
    return max64(d->OH + (d->KH - 1) * d->dh / d->sh, (d->H + d->pt + d->sh - 1) / d->sh);
}

/* The phase planes of one input plane x, every element written once. */
static void dw_pad(const dev_dw *d, const float *x, float *ph)
{
    const int64_t rows = phase_rows(d), cols = phase_cols(d), sh = d->sh, sw = d->sw, W = d->W;
    const float pad = d->max ? -INFINITY : 0.0f;
    for (int64_t b = 0; b < sw; b++) {
        /* phase column c holds x column c*sw + b - pl: those in [lo, hi)
         * fall inside x; stride 2 splits n of them as vectors */
        const int64_t off = b - d->pl;
        int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw, hi = W - off > 0 ? (W - off + sw - 1) / sw : 0;
        lo = lo < cols ? lo : cols;
        hi = hi < lo ? lo : hi < cols ? hi : cols;
        int64_t n = (W - off) / 2 - lo;
        n = n < hi - lo ? n : hi - lo;
        for (int64_t a = 0; a < sh; a++) {
            float *p = ph + (a * sw + b) * rows * cols;
            for (int64_t r = 0; r < rows; r++, p += cols) {
                const int64_t h = r * sh + a - d->pt;
                if (h < 0 || h >= d->H) {
                    for (int64_t c = 0; c < cols; c++)
                        p[c] = pad;
                    continue;
                }
                const float *xo = x + h * W + off;
                for (int64_t c = 0; c < lo; c++)
                    p[c] = pad;
                if (sw == 1) {
                    memcpy(p + lo, xo + lo, (size_t)(hi - lo) * sizeof *p);
                } else if (sw == 2) {
                    int64_t c = lo + (n > 0 ? dw_evens(d, p + lo, xo + 2 * lo, n) : 0);
                    for (; c < hi; c++)
                        p[c] = xo[2 * c];
                } else {
                    for (int64_t c = lo; c < hi; c++)
                        p[c] = xo[c * sw];
                }
                for (int64_t c = hi; c < cols; c++)
                    p[c] = pad;
            }
        }
    }
}

/* One instruction set's wide grid: VT a vector of VL floats; n grid
 * elements (a multiple of 4 VL) into wide. */
#define DW_GRID(SFX, TARGET, VT, VL)                                                        \
    TARGET static void dw_grid_##SFX(const float *ph, const int64_t *toff, const float *wk, int64_t taps, \
                                     int64_t n, float *wide)                                \
    {                                                                                       \
        for (int64_t q = 0; q < n; q += 4 * VL) {                                           \
            VT acc[4];                                                                      \
            for (int a = 0; a < 4; a++)                                                     \
                for (int l = 0; l < VL; l++)                                                \
                    acc[a][l] = 0;                                                          \
            for (int64_t t = 0; t < taps; t++) {                                            \
                const VT wt = (VT){0} + wk[t];                                              \
                const float *src = ph + toff[t] + q;                                        \
                _Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)                         \
                {                                                                           \
                    VT v;                                                                   \
                    memcpy(&v, src + a * VL, sizeof v);                                     \
                    acc[a] = dw_madd_##SFX(acc[a], wt, v);                                  \
                }                                                                           \
            }                                                                               \
            memcpy(wide + q, acc, sizeof acc);                                              \
        }                                                                                   \
    }

/* MAXPOOL's grid: the taps' max, a later one only when greater (as the
 * pool loops in conv.c), NaN where a window holds one. VI: VT's lanes as
 * int32 (the comparisons' type). */
#define DW_GRID_MAX(SFX, TARGET, VT, VI, VL)                                                \
    TARGET static void dw_gmax_##SFX(const float *ph, const int64_t *toff, int64_t taps, int64_t n, float *wide) \
    {                                                                                       \
        for (int64_t q = 0; q < n; q += 4 * VL) {                                           \
            VT m[4];                                                                        \
            VI bad[4];                                                                      \
            for (int a = 0; a < 4; a++)                                                     \
                for (int l = 0; l < VL; l++) {                                              \
                    m[a][l] = -INFINITY;                                                    \
                    bad[a][l] = 0;                                                          \
                }                                                                           \
            for (int64_t t = 0; t < taps; t++) {                                            \
                const float *src = ph + toff[t] + q;                                        \
                _Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)                         \
                {                                                                           \
                    VT v;                                                                   \
                    memcpy(&v, src + a * VL, sizeof v);                                     \
                    const VI gt = v > m[a];                                                 \
                    bad[a] |= v != v;                                                       \
                    m[a] = (VT)(((VI)v & gt) | ((VI)m[a] & ~gt));                           \
                }                                                                           \
            }                                                                               \
            for (int a = 0; a < 4; a++) {                                                   \
                VT nan;                                                                     \
                for (int l = 0; l < VL; l++)                                                \
                    nan[l] = NAN;                                                           \
                m[a] = (VT)(((VI)nan & bad[a]) | ((VI)m[a] & ~bad[a]));                     \
            }                                                                               \
            memcpy(wide + q, m, sizeof m);                                                  \
        }                                                                                   \
    }

/* Channel blocks: VL channels' planes interleaved, xi[r][c][lane] (the
 * padded input, rows and columns at the output's strides and dilations
 * read in place) and yo[oh][ow][lane], so that each tap is one vector
 * multiply-add across channels and no lane is wasted on a small plane
 * (7x7, 14x14), where the wide grid's rounding and per-plane costs
 * dominate. The taps are summed in the plane path's order (from zero, tap
 * by tap, the bias after): the same bits. wv: KK vectors of the block's
 * weights. Four outputs of a row at a time share each weight load. `rows`
 * output rows from xi's first (a strip: dw_run_blocks). */
#define DW_CBLOCK(SFX, TARGET, VT, VL)                                                      \
    TARGET static void dw_cblock_##SFX(const dev_dw *d, const float *xi, int64_t Wp, int64_t rows, \
                                       const float *wv, const float *bias, float *yo)       \
    {                                                                                       \
        const int64_t KH = d->KH, KW = d->KW, OW = d->OW, sw = d->sw;                       \
        const int64_t rstep = d->dh * Wp * VL, cstep = d->dw * VL, ostep = sw * VL;         \
        VT b;                                                                               \
        memcpy(&b, bias, sizeof b);                                                         \
        for (int64_t oh = 0; oh < rows; oh++) {                                             \
            const float *row = xi + oh * d->sh * Wp * VL;                                   \
            float *y = yo + oh * OW * VL;                                                   \
            int64_t ow = 0;                                                                 \
            for (; ow + 4 <= OW; ow += 4) {                                                 \
                VT acc[4] = {0};                                                            \
                for (int64_t i = 0; i < KH; i++)                                            \
                    for (int64_t j = 0; j < KW; j++) {                                      \
                        VT w;                                                               \
                        memcpy(&w, wv + (i * KW + j) * VL, sizeof w);                       \
                        const float *src = row + i * rstep + j * cstep + ow * ostep;        \
                        _Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)                 \
                        {                                                                   \
                            VT v;                                                           \
                            memcpy(&v, src + a * ostep, sizeof v);                          \
                            acc[a] = dw_madd_##SFX(acc[a], w, v);                           \
                        }                                                                   \
                    }                                                                       \
                for (int a = 0; a < 4; a++) {                                               \
                    acc[a] += b;                                                            \
                    memcpy(y + (ow + a) * VL, &acc[a], sizeof acc[a]);                      \
                }                                                                           \
            }                                                                               \
            for (; ow < OW; ow++) {                                                         \
                VT acc = {0};                                                               \
                for (int64_t i = 0; i < KH; i++)                                            \
                    for (int64_t j = 0; j < KW; j++) {                                      \
                        VT w, v;                                                            \
                        memcpy(&w, wv + (i * KW + j) * VL, sizeof w);                       \
                        memcpy(&v, row + i * rstep + j * cstep + ow * ostep, sizeof v);     \
                        acc = dw_madd_##SFX(acc, w, v);                                     \
                    }                                                                       \
                acc += b;                                                                   \
                memcpy(y + ow * VL, &acc, sizeof acc);                                      \
            }                                                                               \
        }                                                                                   \
    }

/* Channel blocks for the usual windows (3 or 5 wide, stride 1 or 2, no
 * dilation): R outputs of a row at a time (DW_ROW with AVX-512's 32
 * registers, 4 with 16), each input vector of a window row loaded once and
 * multiplied into every output whose window holds it (a 3x3 at stride 1:
 * 13 loads for 24 multiply-adds, where dw_cblock loads 30). Each output
 * still sums its taps from zero in (i, j) order, the bias after: the same
 * bits. A row's last outputs go with a whole R: xi's rows are wide enough
 * (cb_cols), the extra columns pads, their outputs not stored. */
#define DW_ROW 8
/* One load per input vector: GCC would fold a load into every multiply
 * that uses it otherwise (as many loads as taps). */
#if defined(__x86_64__) && defined(__GNUC__)
#define DW_IN_REGISTER(v) __asm__("" : "+v"(v))
#else
#define DW_IN_REGISTER(v) (void)0
#endif
#define DW_ROWS(SFX, TARGET, VT, VL, KWC, SWC, R)                                           \
    TARGET static void dw_rows_##SFX##_##KWC##_##SWC(const dev_dw *d, const float *xi, int64_t Wp, int64_t rows, \
                                                     const float *wv, const float *bias, float *yo) \
    {                                                                                       \
        const int64_t KH = d->KH, OW = d->OW, rstep = d->dh * Wp * VL;                      \
        VT b;                                                                               \
        memcpy(&b, bias, sizeof b);                                                         \
        for (int64_t oh = 0; oh < rows; oh++) {                                             \
            const float *row = xi + oh * d->sh * Wp * VL;                                   \
            float *y = yo + oh * OW * VL;                                                   \
            for (int64_t ow = 0; ow < OW; ow += R) {                                        \
                VT acc[R] = {0};                                                            \
                for (int64_t i = 0; i < KH; i++) {                                          \
                    const float *src = row + i * rstep + ow * SWC * VL;                     \
                    VT w[KWC];                                                              \
                    _Pragma("GCC unroll 8") for (int j = 0; j < KWC; j++)                   \
                        memcpy(&w[j], wv + (i * KWC + j) * VL, sizeof w[j]);                \
                    _Pragma("GCC unroll 32") for (int c = 0; c < (R - 1) * SWC + KWC; c++)  \
                    {                                                                       \
                        VT v;                                                               \
                        memcpy(&v, src + c * VL, sizeof v);                                 \
                        DW_IN_REGISTER(v);                                                  \
                        _Pragma("GCC unroll 8") for (int j = 0; j < KWC; j++) if (c >= j && (c - j) % SWC == 0 && \
                                                                                   (c - j) / SWC < R) \
                            acc[(c - j) / SWC] = dw_madd_##SFX(acc[(c - j) / SWC], w[j], v); \
                    }                                                                       \
                }                                                                           \
                const int64_t n = OW - ow < R ? OW - ow : R;                                \
                _Pragma("GCC unroll 8") for (int a = 0; a < R; a++) if (a < n)              \
                {                                                                           \
                    acc[a] += b;                                                            \
                    memcpy(y + (ow + a) * VL, &acc[a], sizeof acc[a]);                      \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    }
#define DW_ROWS_ALL(SFX, TARGET, VT, VL, R)                                                 \
    DW_ROWS(SFX, TARGET, VT, VL, 3, 1, R)                                                   \
    DW_ROWS(SFX, TARGET, VT, VL, 3, 2, R)                                                   \
    DW_ROWS(SFX, TARGET, VT, VL, 5, 1, R)                                                   \
    DW_ROWS(SFX, TARGET, VT, VL, 5, 2, R)                                                   \
    static dw_rows_fn *const dw_rows_##SFX[2][2] = {{dw_rows_##SFX##_3_1, dw_rows_##SFX##_3_2}, \
                                                    {dw_rows_##SFX##_5_1, dw_rows_##SFX##_5_2}};

typedef void dw_rows_fn(const dev_dw *d, const float *xi, int64_t Wp, int64_t rows, const float *wv,
                        const float *bias, float *yo);

/* MAXPOOL over channel blocks: each output the max of its window's taps
 * in dw_cblock's layout (the pads -inf), in the plane path's tap order and
 * with its rule (a NaN in the window wins; of equal values, -0 and 0, the
 * first stays): the same bits. Four outputs of a row at a time, for four
 * independent chains. */
#define DW_CBMAX_TAP(VT, VI, m, bad, src)                                                   \
    do {                                                                                    \
        VT v_;                                                                              \
        memcpy(&v_, src, sizeof v_);                                                        \
        const VI gt_ = v_ > (m);                                                            \
        (bad) |= v_ != v_;                                                                  \
        (m) = (VT)(((VI)v_ & gt_) | ((VI)(m) & ~gt_));                                      \
    } while (0)
#define DW_CBMAX(SFX, TARGET, VT, VI, VL)                                                   \
    TARGET static void dw_cbmax_##SFX(const dev_dw *d, const float *xi, int64_t Wp, int64_t rows, float *yo) \
    {                                                                                       \
        const int64_t KH = d->KH, KW = d->KW, OW = d->OW, sw = d->sw;                       \
        const int64_t rstep = d->dh * Wp * VL, cstep = d->dw * VL, ostep = sw * VL;         \
        VT lo, nan;                                                                         \
        for (int l = 0; l < VL; l++) {                                                      \
            lo[l] = -INFINITY;                                                              \
            nan[l] = NAN;                                                                   \
        }                                                                                   \
        for (int64_t oh = 0; oh < rows; oh++) {                                             \
            const float *row = xi + oh * d->sh * Wp * VL;                                   \
            float *y = yo + oh * OW * VL;                                                   \
            for (int64_t ow = 0; ow < OW;) {                                                \
                const int n = OW - ow >= 4 ? 4 : 1;                                         \
                VT m[4] = {lo, lo, lo, lo};                                                 \
                VI bad[4] = {0};                                                            \
                for (int64_t i = 0; i < KH; i++)                                            \
                    for (int64_t j = 0; j < KW; j++) {                                      \
                        const float *src = row + i * rstep + j * cstep + ow * ostep;        \
                        if (n == 4) {                                                       \
                            _Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)             \
                                DW_CBMAX_TAP(VT, VI, m[a], bad[a], src + a * ostep);        \
                        } else                                                              \
                            DW_CBMAX_TAP(VT, VI, m[0], bad[0], src);                        \
                    }                                                                       \
                for (int a = 0; a < n; a++) {                                               \
                    m[a] = (VT)(((VI)nan & bad[a]) | ((VI)m[a] & ~bad[a]));                 \
                    memcpy(y + (ow + a) * VL, &m[a], sizeof m[a]);                          \
                }                                                                           \
                ow += n;                                                                    \
            }                                                                               \
        }                                                                                   \
    }

/* acc + w * v as a layer's instruction set computes it: one fused
 * multiply-add (one rounding) on AVX2 and AVX-512, as their products do
 * (sgemm.h), a multiply and an add portably. Every layout of one set sums
 * with it, so the layouts agree bit for bit. */
typedef float dw_v4 __attribute__((vector_size(16)));
typedef int32_t dw_i4 __attribute__((vector_size(16)));
static inline dw_v4 dw_madd_v4(dw_v4 acc, dw_v4 w, dw_v4 v) { return acc + w * v; }
DW_GRID(v4, , dw_v4, 4)
DW_CBLOCK(v4, , dw_v4, 4)
DW_ROWS_ALL(v4, , dw_v4, 4, 4)
DW_CBMAX(v4, , dw_v4, dw_i4, 4)
DW_GRID_MAX(v4, , dw_v4, dw_i4, 4)

#if defined(__x86_64__) && defined(__GNUC__)
typedef float dw_v8 __attribute__((vector_size(32)));
typedef float dw_v16 __attribute__((vector_size(64)));
__attribute__((target("avx2,fma"))) static inline dw_v8 dw_madd_v8(dw_v8 acc, dw_v8 w, dw_v8 v)
{
    return (dw_v8)_mm256_fmadd_ps((__m256)w, (__m256)v, (__m256)acc);
}
__attribute__((target("avx512f"))) static inline dw_v16 dw_madd_v16(dw_v16 acc, dw_v16 w, dw_v16 v)
{
    return (dw_v16)_mm512_fmadd_ps((__m512)w, (__m512)v, (__m512)acc);
}
DW_GRID(v8, __attribute__((target("avx2,fma"))), dw_v8, 8)
DW_GRID(v16, __attribute__((target("avx512f,fma"))), dw_v16, 16)
DW_CBLOCK(v8, __attribute__((target("avx2,fma"))), dw_v8, 8)
DW_CBLOCK(v16, __attribute__((target("avx512f,fma"))), dw_v16, 16)
DW_ROWS_ALL(v8, __attribute__((target("avx2,fma"))), dw_v8, 8, 4)
DW_ROWS_ALL(v16, __attribute__((target("avx512f,fma"))), dw_v16, 16, DW_ROW)
typedef int32_t dw_i8 __attribute__((vector_size(32)));
typedef int32_t dw_i16 __attribute__((vector_size(64)));
DW_GRID_MAX(v8, __attribute__((target("avx2,fma"))), dw_v8, dw_i8, 8)
DW_GRID_MAX(v16, __attribute__((target("avx512f,fma"))), dw_v16, dw_i16, 16)
DW_CBMAX(v8, __attribute__((target("avx2,fma"))), dw_v8, dw_i8, 8)
DW_CBMAX(v16, __attribute__((target("avx512f,fma"))), dw_v16, dw_i16, 16)
#endif

static const int64_t path_vl[3] = {16, 8, 4};

/* The grid's size, rounded up to whole blocks of 4 VL. */
static int64_t grid_floats(const dev_dw *d)
{
    const int64_t block = 4 * d->vl;
    return (d->OH * phase_cols(d) + block - 1) / block * block;
}

/* Channel blocks' padded input extent: the rows that `rows` output rows'
 * windows read, and the columns a row's windows read. */
static int64_t strip_rows(const dev_dw *d, int64_t rows) { return (rows - 1) * d->sh + (d->KH - 1) * d->dh + 1; }
/* (whole DW_ROWs of outputs: dw_rows reads a row's last one's window) */
static int64_t cb_cols(const dev_dw *d)
{
    const int64_t ow = (d->OW + DW_ROW - 1) / DW_ROW * DW_ROW;
    return (ow - 1) * d->sw + (d->KW - 1) * d->dw + 1;
}

/* Output rows per strip: as many as keep the strip's input rows within
 * DW_STRIP_BYTES, at least one. Whole planes of 16 channels (1.6 MB at
 * 112x112, in and out) did not stay in a core's L2 between the
 * transpositions and the taps; strips of ~96 KB do, for the price of
 * transposing the few rows that two strips share once more. */
#define DW_STRIP_BYTES (96 * 1024)
static int64_t cb_strip(const dev_dw *d, int64_t cols)
{
    const int64_t fit = DW_STRIP_BYTES / (cols * d->vl * (int64_t)sizeof(float)), halo = (d->KH - 1) * d->dh + 1;
    const int64_t s = fit > halo ? (fit - halo) / d->sh + 1 : 1;
    return s < d->OH ? s : d->OH;
}

/* The channel blocks of an image (d->cb channels each, the last fewer) */
static int64_t cb_blocks(const dev_dw *d) { return (d->C + d->cb - 1) / d->cb; }

/* Channel blocks unless asked otherwise or their scratch is too big: they
 * ran 1.1x-3.5x faster than planes on MobileNet's and EfficientNet's
 * layers (112x112 to 7x7, 3x3 and 5x5 windows, strides 1 and 2), most on
 * small planes, where the wide grid's rounding to blocks of 4 VL and the
 * per-plane work (padding, tap offsets, copying out) weigh most. */
bool dev_dw_plan(dev_dw *d, int64_t Cg, int64_t G, unsigned threads)
{
    if (d->max ? d->M != 1 : Cg != 1 || G != d->C || G < 2)
        return false;
    if (d->OH < 1 || d->OW < 1 || d->KH * d->KW > DW_MAXTAPS)
        return false;
    const int layout = atomic_load(&forced_layout);
    d->path = dev_kpath(atomic_load(&forced));
    d->vl = path_vl[d->path];
    d->cb = 0;
    d->strips = false;
    if (d->M == 1 && layout != 1) {
        /* every factor is at most CONV_MAX (conv.c): no overflow */
        const int64_t cols = cb_cols(d);
        d->strip = cb_strip(d, cols);
        const int64_t rows = strip_rows(d, d->strip);
        d->scratch = (rows * cols + d->strip * d->OW + d->KH * d->KW + 1) * d->vl + 16;
        if (rows <= 16384 && cols <= 16384 && d->scratch <= (INT64_C(1) << 24)) {
            /* Fewer blocks than threads (16 or 32 channels of 112x112, the
             * first depthwise layers of mobile networks, at batch 1): each
             * strip an item, so that the layer still splits. Also fewer
             * than two a thread that do not share out evenly (48 channels,
             * 3 blocks on 2 threads: one thread did two while the other
             * waited; by strips 112x112 and 112x112 to 56x56 0.78-0.80x
             * the time). Not otherwise: a block a thread streams its planes
             * whole (32 channels of 112x112, 2 blocks on 2 threads: 1.08x
             * the time by strips; 72 to 144 channels of 56x56 the same) */
            d->cb = d->vl;
            const int64_t blocks = d->N * cb_blocks(d), T = threads;
            d->strips = blocks < T || (blocks < 2 * T && blocks % T);
            return true;
        }
    }
    const int64_t rows = phase_rows(d), cols = phase_cols(d);
    if (rows > 16384 || cols > 16384 || d->sh * d->sw > 64)
        return false;
    d->scratch = d->sh * d->sw * rows * cols + (cols + DW_TAIL) + 16 + grid_floats(d) + 16;
    return d->scratch <= (INT64_C(1) << 24);
}

/* A channel block's items: its row strips, or the whole block */
static int64_t cb_strips(const dev_dw *d) { return d->strips ? (d->OH + d->strip - 1) / d->strip : 1; }

int64_t dev_dw_items(const dev_dw *d)
{
    return d->cb ? d->N * cb_blocks(d) * cb_strips(d) : d->N * d->C * d->M;
}

/* An element read or written costs about 7 multiply-adds of the taps
 * (fitted on 72 channels of 56x56, 3x3, strides 1 and 2, 1 thread: 18 us
 * a million taps, 127 us a million elements). Counted by taps alone, a
 * stride-2 layer of 72 channels to 28x28 (45 us) was below two chunks'
 * worth and ran on one thread. */
#define DW_ELEM_MACS 8
int64_t dev_dw_item_cost(const dev_dw *d)
{
    const int64_t outs = d->N * d->C * d->M * d->OH * d->OW, ins = d->N * d->C * d->H * d->W, items = dev_dw_items(d);
    /* (a max pool's compare counts as a multiply-add) */
    return items > 0 ? (outs * d->KH * d->KW + DW_ELEM_MACS * (outs + ins)) / items : 0;
}

void dev_dw_item_span(const dev_dw *d, int64_t it, int64_t *row0, int64_t *n, int64_t *col0, int64_t *ncols)
{
    if (!d->cb) {
        *row0 = it, *n = 1, *col0 = 0, *ncols = d->OH * d->OW;
        return;
    }
    const int64_t per = cb_strips(d), blk = it / per, nb = cb_blocks(d), ch0 = blk % nb * d->cb;
    *row0 = blk / nb * d->C + ch0;
    *n = d->C - ch0 < d->cb ? d->C - ch0 : d->cb;
    if (!d->strips) {
        *col0 = 0, *ncols = d->OH * d->OW;
        return;
    }
    const int64_t oh0 = it % per * d->strip;
    *col0 = oh0 * d->OW;
    *ncols = (d->OH - oh0 < d->strip ? d->OH - oh0 : d->strip) * d->OW;
}

typedef struct dw_pack_job {
    const dev_dw *d;
} dw_pack_job;

/* Block b's weights into wv: KK vectors of VL lanes */
static void interleave(const dev_dw *d, int64_t ch0, float *wv)
{
    const int64_t VL = d->cb, KK = d->KH * d->KW, nl = d->C - ch0 < VL ? d->C - ch0 : VL;
    memset(wv, 0, (size_t)(KK * VL) * sizeof *wv);
    for (int64_t l = 0; l < nl; l++)
        for (int64_t t = 0; t < KK; t++)
            wv[t * VL + l] = d->w[(ch0 + l) * KK + t];
}

static void dw_pack_make(void *ctx, void *out)
{
    const dev_dw *d = ((const dw_pack_job *)ctx)->d;
    float *o = out;
    for (int64_t ch0 = 0; ch0 < d->C; ch0 += d->cb, o += d->KH * d->KW * d->cb)
        interleave(d, ch0, o);
}

const float *dev_dw_pack(const dev_dw *d, const struct tfvm_tensor *wt)
{
    if (!d->cb || d->max || !wt)
        return NULL;
    const struct {
        int64_t tag, vl, C, KK, offset;
    } key = {0x64774230 /* "dwB0" */, d->cb, d->C, d->KH * d->KW, (const char *)d->w - (const char *)wt->data};
    dw_pack_job job = {d};
    return dev_tensor_prep(wt, &key, sizeof key, (size_t)(cb_blocks(d) * d->KH * d->KW * d->cb) * sizeof(float),
                           dw_pack_make, &job);
}

/* A strip's taps on d's path: the weighted sums, or the max */
static void block_taps(const dev_dw *d, const float *xi, int64_t Wp, int64_t rows, const float *wv, const float *bv,
                       float *yo)
{
    if (!d->max && d->dw == 1 && (d->KW == 3 || d->KW == 5) && (d->sw == 1 || d->sw == 2)) {
        const int kw = d->KW == 5, sw = d->sw == 2;
#if defined(__x86_64__) && defined(__GNUC__)
        (d->path == 0 ? dw_rows_v16 : d->path == 1 ? dw_rows_v8 : dw_rows_v4)[kw][sw](d, xi, Wp, rows, wv, bv, yo);
#else
        dw_rows_v4[kw][sw](d, xi, Wp, rows, wv, bv, yo);
#endif
        return;
    }
#if defined(__x86_64__) && defined(__GNUC__)
    if (d->path == 0) {
        d->max ? dw_cbmax_v16(d, xi, Wp, rows, yo) : dw_cblock_v16(d, xi, Wp, rows, wv, bv, yo);
        return;
    }
    if (d->path == 1) {
        d->max ? dw_cbmax_v8(d, xi, Wp, rows, yo) : dw_cblock_v8(d, xi, Wp, rows, wv, bv, yo);
        return;
    }
#endif
    d->max ? dw_cbmax_v4(d, xi, Wp, rows, yo) : dw_cblock_v4(d, xi, Wp, rows, wv, bv, yo);
}

/* n positions' nl channels from src (positions sstep floats apart) to dst
 * (dstep apart). A block's whole width (16, 8 or 4) is a constant size: a
 * vector copy, not a call (a call a position was 2.4x the taps' time at
 * 576 channels of 14x14 to 7x7 on AVX2). */
static void copy_positions(float *dst, int64_t dstep, const float *src, int64_t sstep, int64_t n, int64_t nl)
{
#define COPY_POSITIONS(L)                                                                                    \
    for (int64_t q = 0; q < n; q++)                                                                          \
        memcpy(dst + q * dstep, src + q * sstep, (size_t)(L) * sizeof *dst);
    switch (nl) {
    case 16: COPY_POSITIONS(16) return;
    case 8: COPY_POSITIONS(8) return;
    case 4: COPY_POSITIONS(4) return;
    default: COPY_POSITIONS(nl) return;
    }
#undef COPY_POSITIONS
}

static void fill(float *p, int64_t n, float v)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = v;
}

/* Items [b, e): channel blocks (block = n * blocks + channels / VL), or with
 * d->strips their row strips (item = block * strips + strip), each strip
 * of d->strip output rows at a time: its input rows go in (to_hwc), the
 * taps run, its outputs go back (to_chw), all on a few rows, which stay in
 * the core's cache. */
static void dw_run_blocks(const dev_dw *d, int64_t b, int64_t e, float *scratch)
{
    const int64_t VL = d->cb, KK = d->KH * d->KW;
    const int64_t S = d->strip, Wp = cb_cols(d), H = d->H, W = d->W, OH = d->OH, OW = d->OW, OHW = OH * OW;
    float *xi = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *yo = xi + strip_rows(d, S) * Wp * VL, *wv = yo + S * OW * VL, *bv = wv + KK * VL;
    /* the columns inside x: [c0, c1) of xi; the others stay zero. Lanes
     * past a last block's channels hold whatever the block before left
     * there, computed and never stored. */
    const int64_t c0 = d->pl < Wp ? d->pl : Wp, c1 = W + d->pl < Wp ? W + d->pl : Wp;
    const float pad = d->max ? -INFINITY : 0.0f;
    /* the pad columns (rows are written, or filled as pads, strip by strip);
     * all of xi when a last block leaves lanes unwritten */
    if (d->C % VL)
        fill(xi, strip_rows(d, S) * Wp * VL, pad);
    else
        for (int64_t i = 0; i < strip_rows(d, S); i++) {
            fill(xi + i * Wp * VL, c0 * VL, pad);
            fill(xi + (i * Wp + c1) * VL, (Wp - c1) * VL, pad);
        }
    /* A block's planes are read a row at a time, VL streams at once, more
     * than the prefetchers follow: ask for each plane's next row where x
     * is bigger than a core's L2 (so it is not all there already) and a
     * row spans cache lines of its own (32 floats): 6-14% faster; below,
     * 3% slower with it */
    const int64_t ahead = d->N * d->C * H * W > (INT64_C(1) << 18) && W >= 32 ? W : 0;
    int64_t loaded = -1; /* the channel block whose weights are in wv */
    const int64_t per = cb_strips(d), nblocks = cb_blocks(d);
    for (int64_t it = b; it < e; it++) {
        /* an image's blocks one after another, as the result lies: a thread's
         * chunk writes whole images, which the next layer's chunks, split
         * the same way, find in their own core's cache (block-major, each
         * block's images in turn, interleaved the weights once a block,
         * but the two threads wrote and read each other's halves:
         * mobilenet_v3_small at batch 8 12% slower on 2 threads, 3% on 1) */
        const int64_t blk = it / per, s0 = d->strips ? it % per : 0, s1 = d->strips ? s0 + 1 : (OH + S - 1) / S;
        const int64_t n = blk / nblocks, ch0 = blk % nblocks * VL, nl = d->C - ch0 < VL ? d->C - ch0 : VL;
        if (ch0 != loaded && !d->max) {
            if (!d->wpk)
                interleave(d, ch0, wv);
            memset(bv, 0, (size_t)VL * sizeof *bv);
            for (int64_t l = 0; l < nl && d->bias; l++)
                bv[l] = d->bias[ch0 + l];
            loaded = ch0;
        }
        const float *wb = d->wpk ? d->wpk + ch0 / VL * KK * VL : wv;
        const float *x = d->nhwc ? d->x + n * H * W * d->C + ch0 : d->x + (n * d->C + ch0) * H * W;
        float *out = d->o + (n * d->C + ch0) * OHW;
        for (int64_t oh0 = s0 * S; oh0 < OH && oh0 < s1 * S; oh0 += S) {
            const int64_t rows = OH - oh0 < S ? OH - oh0 : S, in_rows = strip_rows(d, rows);
            for (int64_t i = 0; i < in_rows; i++) {
                const int64_t r = oh0 * d->sh + i - d->pt; /* x's row, or a pad */
                if (r < 0 || r >= H) {
                    fill(xi + i * Wp * VL, Wp * VL, pad);
                    continue;
                }
                if (c0 >= c1)
                    continue;
                float *dst = xi + (i * Wp + c0) * VL;
                if (d->nhwc) { /* the block's channels of each position: one copy each, no transposition */
                    const float *src = x + (r * W + c0 - d->pl) * d->C;
                    copy_positions(dst, VL, src, d->C, c1 - c0, nl);
                    continue;
                }
                const float *src = x + r * W + c0 - d->pl;
#if defined(__x86_64__) && defined(__GNUC__)
                if (VL == 16 && ahead) /* (apart: the plain one, without the prefetch's branch, was 3% faster) */
                    to_hwc_v16_pf(src, H * W, nl, c1 - c0, dst, VL, ahead);
                else if (VL == 16)
                    to_hwc_v16(src, H * W, nl, c1 - c0, dst, VL);
                else if (VL == 8)
                    to_hwc_v8(src, H * W, nl, c1 - c0, dst, VL);
                else
#endif
                    to_hwc_v4(src, H * W, nl, c1 - c0, dst, VL);
            }
            block_taps(d, xi, Wp, rows, wb, bv, yo);
            if (d->act)
                dev_kepilogue(TFVM_F32, d->act, yo, rows * OW * VL, NULL, 0);
#if defined(__x86_64__) && defined(__GNUC__)
            if (VL == 16)
                to_chw_v16(yo, VL, rows * OW, nl, out + oh0 * OW, OHW, NULL, NULL, d->relu);
            else if (VL == 8)
                to_chw_v8(yo, VL, rows * OW, nl, out + oh0 * OW, OHW, NULL, NULL, d->relu);
            else
#endif
                to_chw_v4(yo, VL, rows * OW, nl, out + oh0 * OW, OHW, NULL, NULL, d->relu);
        }
    }
}

void dev_dw_run(const dev_dw *d, int64_t b, int64_t e, float *scratch)
{
    if (d->cb) {
        dw_run_blocks(d, b, e, scratch);
        return;
    }
    const int64_t CM = d->C * d->M, KK = d->KH * d->KW, rows = phase_rows(d), cols = phase_cols(d);
    const int64_t OH = d->OH, OW = d->OW, n = grid_floats(d);
    float *ph = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    const int64_t planes_floats = d->sh * d->sw * rows * cols;
    float *wide = (float *)(((uintptr_t)(ph + planes_floats + (cols + DW_TAIL)) + 63) & ~(uintptr_t)63);
    memset(ph + planes_floats, 0, (size_t)(cols + DW_TAIL) * sizeof *ph);
    int64_t toff[DW_MAXTAPS];
    for (int64_t i = 0; i < d->KH; i++)
        for (int64_t j = 0; j < d->KW; j++) {
            const int64_t r = i * d->dh, c = j * d->dw;
            toff[i * d->KW + j] = ((r % d->sh) * d->sw + c % d->sw) * rows * cols + r / d->sh * cols + c / d->sw;
        }
    int64_t padded = -1; /* the input plane now in ph */
    for (int64_t pl = b; pl < e; pl++) {
        const int64_t o = pl % CM, in = pl / CM * d->C + o / d->M;
        if (in != padded) {
            dw_pad(d, d->x + in * d->H * d->W, ph);
            padded = in;
        }
        const float *wk = d->max ? NULL : d->w + o * KK;
#if defined(__x86_64__) && defined(__GNUC__)
        if (d->path == 0)
            d->max ? dw_gmax_v16(ph, toff, KK, n, wide) : dw_grid_v16(ph, toff, wk, KK, n, wide);
        else if (d->path == 1)
            d->max ? dw_gmax_v8(ph, toff, KK, n, wide) : dw_grid_v8(ph, toff, wk, KK, n, wide);
        else
#endif
            d->max ? dw_gmax_v4(ph, toff, KK, n, wide) : dw_grid_v4(ph, toff, wk, KK, n, wide);
        const float bias = d->bias ? d->bias[o] : 0.0f;
        float *out = d->o + pl * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++, out += OW) {
            const float *s = wide + oh * cols;
            if (d->max)
                memcpy(out, s, (size_t)OW * sizeof *out); /* + 0 would turn -0 into 0 */
            else if (d->relu)
                for (int64_t ow = 0; ow < OW; ow++) {
                    const float y = s[ow] + bias;
                    out[ow] = y < 0 ? 0.0f : y;
                }
            else
                for (int64_t ow = 0; ow < OW; ow++)
                    out[ow] = s[ow] + bias;
        }
    }
}
