/* devices/cpu/dwconv.c — f32 depthwise convolution (dwconv.h). A plane is
 * padded once into scratch, split by column into `stride` phases so that a
 * window tap reads consecutive elements whatever the stride; each vector of
 * outputs then sums its KH*KW taps in registers, in tap order, and is
 * stored once. MobileNet's and EfficientNet's depthwise layers went through
 * the grouped-convolution paths before: one product per channel, padded to
 * eight output channels, or im2col for strides of 2 (~0.7 GMAC/s). */
#include "devices/cpu/vec.h"
#include "devices/cpu/dwconv.h"

#include <stdatomic.h>
#include <string.h>

/* A block of outputs is four vectors: across a row when the row is at least
 * three vectors wide, else one vector down four rows. Their loads may run
 * DW_SPARE columns past a phase row and 3 strides of rows past the plane;
 * the scratch holds both (zeros), and those lanes are never stored. */
#define DW_SPARE 64
#define DW_MAXTAPS 1024

static atomic_int forced;

void dev_dw_force(int path) { atomic_store(&forced, path); }

/* Columns of one phase row: what the windows read and what x fills,
 * whichever is more, and the spare. */
static int64_t phase_cols(const dev_dw *d)
{
    const int64_t reads = d->OW + (d->KW - 1) * d->dw / d->sw + 1;
    const int64_t holds = (d->W + d->pl + d->sw - 1) / d->sw;
    return (reads > holds ? reads : holds) + DW_SPARE;
}

/* Rows of a phase plane: those the windows read, and the spare. */
static int64_t padded_rows(const dev_dw *d) { return (d->OH - 1) * d->sh + (d->KH - 1) * d->dh + 1 + 3 * d->sh; }

/* ph[q][r][c] = x[r - pt][c*sw + q - pl] (0 outside x): the padded plane by
 * column phase q < sw, each row written once. */
static void dw_pad(const dev_dw *d, const float *x, float *ph)
{
    const int64_t rows = padded_rows(d), cols = phase_cols(d), sw = d->sw, W = d->W, pl = d->pl;
    for (int64_t q = 0; q < sw; q++)
        for (int64_t r = 0; r < rows; r++) {
            float *row = ph + (q * rows + r) * cols;
            const int64_t h = r - d->pt;
            if (h < 0 || h >= d->H) {
                memset(row, 0, (size_t)cols * sizeof *row);
                continue;
            }
            const float *xr = x + h * W;
            /* phase column c holds x column c*sw + q - pl */
            int64_t c = 0;
            for (; c < cols && c * sw + q - pl < 0; c++)
                row[c] = 0;
            if (sw == 1) {
                const int64_t n = W < cols - c ? W : cols - c;
                memcpy(row + c, xr, (size_t)n * sizeof *row);
                c += n;
            } else {
                for (; c < cols && c * sw + q - pl < W; c++)
                    row[c] = xr[c * sw + q - pl];
            }
            for (; c < cols; c++)
                row[c] = 0;
        }
}

/* One instruction set's plane loop: VT a vector of VL floats; toff[t] the
 * offset in ph of tap t's first input for output (0, 0). */
#define DW_PLANE(SFX, TARGET, VT, VL)                                                       \
    TARGET static void dw_plane_##SFX(const dev_dw *d, const float *ph, const int64_t *toff, const float *wk, \
                                      float b, float *o)                                    \
    {                                                                                       \
        const int64_t cols = phase_cols(d), OW = d->OW, OH = d->OH, KK = d->KH * d->KW;     \
        const int64_t rstep = d->sh * cols;                                                 \
        const bool wide = OW >= 3 * VL;                                                     \
        const int64_t in_step = wide ? VL : rstep, bw = wide ? 4 * VL : VL, bh = wide ? 1 : 4; \
        for (int64_t oh = 0; oh < OH; oh += bh)                                             \
            for (int64_t ow = 0; ow < OW; ow += bw) {                                       \
                VT acc[4];                                                                  \
                for (int a = 0; a < 4; a++)                                                 \
                    for (int l = 0; l < VL; l++)                                            \
                        acc[a][l] = 0;                                                      \
                const float *base = ph + oh * rstep + ow;                                   \
                for (int64_t t = 0; t < KK; t++) {                                          \
                    const float wt = wk[t];                                                 \
                    const float *src = base + toff[t];                                      \
                    _Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)                     \
                    {                                                                       \
                        VT v;                                                               \
                        memcpy(&v, src + a * in_step, sizeof v);                            \
                        acc[a] += wt * v;                                                   \
                    }                                                                       \
                }                                                                           \
                for (int a = 0; a < 4; a++) {                                               \
                    const int64_t r = wide ? oh : oh + a, c = wide ? ow + a * VL : ow;      \
                    if (r >= OH || c >= OW)                                                 \
                        continue;                                                           \
                    VT y = acc[a] + b;                                                      \
                    if (d->relu)                                                            \
                        for (int l = 0; l < VL; l++)                                        \
                            y[l] = y[l] < 0 ? 0 : y[l];                                     \
                    if (OW - c >= VL) {                                                     \
                        memcpy(o + r * OW + c, &y, sizeof y);                               \
                        continue;                                                           \
                    }                                                                       \
                    for (int64_t l = 0; l < OW - c; l++)                                    \
                        o[r * OW + c + l] = y[l];                                           \
                }                                                                           \
            }                                                                               \
    }

/* Narrow planes (fewer than three vectors a row) go VL channels at a time,
 * channels last: x's block padded and transposed into tin [Hp][Wp][VL],
 * the taps into wt [KK][VL], four output pixels summed at once into tout
 * [OH*OW][VL], then back to channels first with the bias (and relu). Every
 * vector lane then holds an output, where a 7-wide row would fill 7 of 16. */
static int64_t blk_rows(const dev_dw *d) { return (d->OH - 1) * d->sh + (d->KH - 1) * d->dh + 1; }
static int64_t blk_cols(const dev_dw *d) { return (d->OW - 1) * d->sw + (d->KW - 1) * d->dw + 1; }
static int64_t blk_scratch(const dev_dw *d, int64_t vl)
{
    return (blk_rows(d) * blk_cols(d) + 3 * d->sw + d->KH * d->KW + d->OH * d->OW + 3) * vl + 16;
}

#define DW_BLOCK(SFX, TARGET, VT, VL)                                                       \
    TARGET static void dw_block_##SFX(const dev_dw *d, int64_t n, int64_t c0, float *s)      \
    {                                                                                       \
        const int64_t C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, KK = KH * KW;   \
        const int64_t OH = d->OH, OW = d->OW, sh = d->sh, sw = d->sw, dh = d->dh, dw = d->dw; \
        const int64_t Hp = blk_rows(d), Wp = blk_cols(d), nc = C - c0 < VL ? C - c0 : VL;   \
        float *tin = s, *wt = tin + (Hp * Wp + 3 * sw) * VL, *tout = wt + KK * VL;          \
        memset(tin, 0, (size_t)((Hp * Wp + 3 * sw) * VL) * sizeof *tin);                    \
        for (int64_t c = 0; c < nc; c++) {                                                  \
            const float *xs = d->x + (n * C + c0 + c) * H * W;                              \
            for (int64_t h = 0; h < H && h + d->pt < Hp; h++)                               \
                for (int64_t w = 0; w < W && w + d->pl < Wp; w++)                           \
                    tin[((h + d->pt) * Wp + w + d->pl) * VL + c] = xs[h * W + w];           \
        }                                                                                   \
        for (int64_t t = 0; t < KK; t++)                                                    \
            for (int64_t c = 0; c < VL; c++)                                                \
                wt[t * VL + c] = c < nc ? d->w[(c0 + c) * KK + t] : 0.0f;                   \
        for (int64_t oh = 0; oh < OH; oh++)                                                 \
            for (int64_t ow = 0; ow < OW; ow += 4) {                                        \
                VT acc[4];                                                                  \
                for (int a = 0; a < 4; a++)                                                 \
                    for (int l = 0; l < VL; l++)                                            \
                        acc[a][l] = 0;                                                      \
                for (int64_t i = 0; i < KH; i++)                                            \
                    for (int64_t j = 0; j < KW; j++) {                                      \
                        VT wv;                                                              \
                        memcpy(&wv, wt + (i * KW + j) * VL, sizeof wv);                     \
                        const float *src = tin + ((oh * sh + i * dh) * Wp + ow * sw + j * dw) * VL; \
                        _Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)                 \
                        {                                                                   \
                            VT v;                                                           \
                            memcpy(&v, src + a * sw * VL, sizeof v);                        \
                            acc[a] += wv * v;                                               \
                        }                                                                   \
                    }                                                                       \
                for (int a = 0; a < 4 && ow + a < OW; a++)                                  \
                    memcpy(tout + (oh * OW + ow + a) * VL, &acc[a], sizeof acc[a]);         \
            }                                                                               \
        const int64_t OHW = OH * OW;                                                        \
        for (int64_t c = 0; c < nc; c++) {                                                  \
            const float b = d->bias ? d->bias[c0 + c] : 0.0f;                               \
            float *o = d->o + (n * C + c0 + c) * OHW;                                       \
            for (int64_t q = 0; q < OHW; q++) {                                             \
                const float y = tout[q * VL + c] + b;                                       \
                o[q] = d->relu && y < 0 ? 0.0f : y;                                         \
            }                                                                               \
        }                                                                                   \
    }

typedef float dw_v4 __attribute__((vector_size(16)));
DW_PLANE(v4, , dw_v4, 4)
DW_BLOCK(v4, , dw_v4, 4)

#if defined(__x86_64__) && defined(__GNUC__)
typedef float dw_v8 __attribute__((vector_size(32)));
typedef float dw_v16 __attribute__((vector_size(64)));
DW_PLANE(v8, __attribute__((target("avx2,fma"))), dw_v8, 8)
DW_PLANE(v16, __attribute__((target("avx512f,fma"))), dw_v16, 16)
DW_BLOCK(v8, __attribute__((target("avx2,fma"))), dw_v8, 8)
DW_BLOCK(v16, __attribute__((target("avx512f,fma"))), dw_v16, 16)
static int best_path(void)
{
    return __builtin_cpu_supports("avx512f")                                         ? 0
           : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1
                                                                                     : 2;
}
#else
static int best_path(void) { return 2; }
#endif

static const int64_t path_vl[3] = {16, 8, 4};

bool dev_dw_plan(dev_dw *d, int64_t Cg, int64_t G)
{
    if (Cg != 1 || G != d->C || G < 2 || d->OH < 1 || d->OW < 1 || d->KH * d->KW > DW_MAXTAPS)
        return false;
    const int force = atomic_load(&forced), best = best_path();
    d->path = force > best ? force : best;
    const int64_t vl = path_vl[d->path];
    /* every factor is at most CONV_MAX (conv.c): no overflow */
    if (padded_rows(d) > 16384 || phase_cols(d) > 16384)
        return false;
    d->blocked = d->M == 1 && d->OW < 3 * vl && blk_scratch(d, vl) <= (INT64_C(1) << 22);
    d->vl = vl;
    d->scratch = d->blocked ? blk_scratch(d, vl) : d->sw * padded_rows(d) * phase_cols(d) + 16;
    return d->scratch <= (INT64_C(1) << 24);
}

int64_t dev_dw_items(const dev_dw *d)
{
    return d->blocked ? d->N * ((d->C + d->vl - 1) / d->vl) : d->N * d->C * d->M;
}

void dev_dw_item_planes(const dev_dw *d, int64_t b, int64_t e, int64_t *p0, int64_t *np)
{
    if (!d->blocked) {
        *p0 = b;
        *np = e - b;
        return;
    }
    const int64_t nb = (d->C + d->vl - 1) / d->vl;
    const int64_t first = b / nb * d->C + b % nb * d->vl, last_c = ((e - 1) % nb + 1) * d->vl;
    *p0 = first;
    *np = (e - 1) / nb * d->C + (last_c < d->C ? last_c : d->C) - first;
}

void dev_dw_run(const dev_dw *d, int64_t b, int64_t e, float *scratch)
{
    const int path = d->path;
    const int64_t CM = d->C * d->M, KK = d->KH * d->KW;
    float *ph = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    if (d->blocked) {
        const int64_t nb = (d->C + d->vl - 1) / d->vl;
        for (int64_t it = b; it < e; it++) {
            const int64_t n = it / nb, c0 = it % nb * d->vl;
#if defined(__x86_64__) && defined(__GNUC__)
            if (path == 0) {
                dw_block_v16(d, n, c0, ph);
                continue;
            }
            if (path == 1) {
                dw_block_v8(d, n, c0, ph);
                continue;
            }
#endif
            dw_block_v4(d, n, c0, ph);
        }
        return;
    }
    int64_t padded = -1; /* the input plane now in ph */
    int64_t toff[DW_MAXTAPS];
    const int64_t rows = padded_rows(d), cols = phase_cols(d);
    for (int64_t i = 0; i < d->KH; i++)
        for (int64_t j = 0; j < d->KW; j++) {
            const int64_t c = j * d->dw;
            toff[i * d->KW + j] = ((c % d->sw) * rows + i * d->dh) * cols + c / d->sw;
        }
    for (int64_t pl = b; pl < e; pl++) {
        const int64_t n = pl / CM, o = pl % CM, c = o / d->M, in = n * d->C + c;
        if (in != padded) {
            dw_pad(d, d->x + in * d->H * d->W, ph);
            padded = in;
        }
        const float bias = d->bias ? d->bias[o] : 0.0f;
        float *out = d->o + pl * d->OH * d->OW;
        const float *wk = d->w + o * KK;
#if defined(__x86_64__) && defined(__GNUC__)
        if (path == 0) {
            dw_plane_v16(d, ph, toff, wk, bias, out);
            continue;
        }
        if (path == 1) {
            dw_plane_v8(d, ph, toff, wk, bias, out);
            continue;
        }
#endif
        dw_plane_v4(d, ph, toff, wk, bias, out);
    }
}
