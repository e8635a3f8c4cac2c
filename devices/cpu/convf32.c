/* devices/cpu/convf32.c — f32 convolutions at unit strides without im2col
 * (convf32.h): plans (which kernel, the weights prepared once per
 * instruction) and the kernels of convf32_body.h for AVX-512, AVX2 and
 * portably. */
#include "devices/cpu/vec.h"
#include "devices/cpu/f4.h"
#include "devices/cpu/convf32.h"
#include "devices/cpu/chw.h"
#include "devices/cpu/kern.h"

#include <stdatomic.h>
#include <string.h>

#include "devices/tensor.h"
#include "util/util.h"

/* Build with -DCF_PHASE='__attribute__((noinline))' to see the Winograd
 * phases apart in a profile (perf report). */
#ifndef CF_PHASE
#define CF_PHASE
#endif

/* One instruction set's kernels and their register blocking. */
typedef struct dev_cf_isa {
    int64_t vl, pw, ov, mr, nv;
    void (*wino)(const dev_cf *cf, const float *U, const float *xg, float *og, float *s, const float *bias,
                 const float *res, bool relu, int64_t ty0, int64_t ty1, int64_t o0, int64_t o1);
    void (*rows)(const dev_cf *cf, const float *wk, const float *xg, float *og, float *s, const float *bias,
                 bool relu, int64_t oh0, int64_t oh1);
    void (*flat)(const dev_cf *cf, const float *wk, const float *xg, float *og, float *s, const float *bias,
                 bool relu, int64_t b, int64_t e);
    void (*chan)(const dev_cf *cf, const float *wk, const float *xg, float *og, float *s, const float *bias,
                 const float *res, bool relu, int64_t oh0, int64_t oh1);
    /* the Winograd weights (wino_weights' result); NULL: wino_weights */
    void (*wino_weights)(const dev_cf *cf, const float *w, float *wk);
} dev_cf_isa;

/* ---- Portable: GCC vector extensions, four lanes (SSE2 on x86-64) ---- */
typedef dev_f4 cf_v4;
static inline void v4_stn(float *p, cf_v4 v, int64_t n) { memcpy(p, &v, (size_t)n * sizeof *p); }
static inline cf_v4 v4_bc(float s) { return (cf_v4){s, s, s, s}; }
/* the lanes of bits (bit l: lane l) loaded from p, the others 0 */
static inline cf_v4 v4_ldz(const float *p, uint32_t bits)
{
    typedef int32_t i4 __attribute__((vector_size(16)));
    const i4 m = {-(int32_t)(bits & 1), -(int32_t)(bits >> 1 & 1), -(int32_t)(bits >> 2 & 1),
                  -(int32_t)(bits >> 3 & 1)};
    return (cf_v4)((i4)dev_f4_ld(p) & m);
}
typedef int32_t cf_i4 __attribute__((vector_size(16)));
/* x < 0 ? 0 : x: NaN and -0 stay */
static inline cf_v4 v4_relu(cf_v4 v) { return (cf_v4)((cf_i4)v & ~(cf_i4)(v < 0)); }

#define VF cf_v4
#define VLD dev_f4_ld
#define VST dev_f4_st
#define VSTN v4_stn
#define VBC v4_bc
#define VLDZ v4_ldz
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VZERO ((cf_v4){0, 0, 0, 0})
#define VRELU v4_relu
#define CF_VL 4
#define CF_PW 4
#define CF_OV 2
#define CF_MR 4
#define CF_NV 2
#define CF_TARGET
#define CF_SFX(name) name##_v4
#include "devices/cpu/convf32_body.h"
#undef VF
#undef VLD
#undef VST
#undef VSTN
#undef VBC
#undef VLDZ
#undef VFMA
#undef VZERO
#undef VRELU
#undef CF_VL
#undef CF_PW
#undef CF_OV
#undef CF_MR
#undef CF_NV
#undef CF_TARGET
#undef CF_SFX

static const dev_cf_isa isa_v4 = {4, 4, 2, 4, 2, wino_item_v4, rows_item_v4, flat_item_v4, chan_item_v4, NULL};

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* ---- AVX2: 16 registers, so blocks of 6 x 2 vectors (12 sums, 2 loaded,
 * 1 broadcast) ---- */
#define CF_TARGET __attribute__((target("avx2,fma")))
/* the lanes of bits loaded from p, the others 0 */
CF_TARGET static inline __m256 v8_ldz(const float *p, uint32_t bits)
{
    const __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_maskload_ps(p, _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)bits), lane), lane));
}
#define VF __m256
#define VLD _mm256_loadu_ps
#define VST _mm256_storeu_ps
#define VSTN v8_stn
#define VBC _mm256_set1_ps
#define VLDZ v8_ldz
#define VFMA _mm256_fmadd_ps
#define VZERO _mm256_setzero_ps()
#define VRELU v8_relu
#define CF_VL 8
#define CF_PW 6
#define CF_OV 2
#define CF_MR 6
#define CF_NV 2
#define CF_SFX(name) name##_v8
#include "devices/cpu/convf32_body.h"
#undef VF
#undef VLD
#undef VST
#undef VSTN
#undef VBC
#undef VLDZ
#undef VFMA
#undef VZERO
#undef VRELU
#undef CF_VL
#undef CF_PW
#undef CF_OV
#undef CF_MR
#undef CF_NV
#undef CF_TARGET
#undef CF_SFX

static const dev_cf_isa isa_v8 = {8, 6, 2, 6, 2, wino_item_v8, rows_item_v8, flat_item_v8, chan_item_v8, NULL};

/* ---- AVX-512 ---- */

#define CF_TARGET __attribute__((target("avx512f")))
CF_TARGET static inline void v16_stn(float *p, __m512 v, int64_t n) { _mm512_mask_storeu_ps(p, v16_mask(n), v); }
#define VF __m512
#define VLD _mm512_loadu_ps
#define VST _mm512_storeu_ps
#define VSTN v16_stn
#define VBC _mm512_set1_ps
#define VLDZ(p, bits) _mm512_maskz_loadu_ps((__mmask16)(bits), p)
#define VFMA _mm512_fmadd_ps
#define VZERO _mm512_setzero_ps()
#define VRELU v16_relu
#define CF_VL 16
#define CF_PW 7
#define CF_OV 2
#define CF_MR 8
#define CF_NV 2
#define CF_SFX(name) name##_v16
#include "devices/cpu/convf32_body.h"

/* wino_weights for 16 output channels at a time: their 9 weights gathered
 * (w[o][c] steps by Cg * 9 over o), the same operations in the same order
 * per lane, so the same values. */
CF_TARGET static void wino_weights_v16(const dev_cf *cf, const float *w, float *wk)
{
    const int64_t Cg = cf->Cg, Og = cf->Og, Op = cf->Op, step = Cg * Op;
    const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32((int)(Cg * 9)));
    const __m512 half = _mm512_set1_ps(0.5f);
    for (int64_t g = 0; g < cf->G; g++)
        for (int64_t o0 = 0; o0 < Og; o0 += 16) {
            const __mmask16 m = v16_mask(Og - o0);
            for (int64_t c = 0; c < Cg; c++) {
                const float *k = w + ((g * Og + o0) * Cg + c) * 9;
                __m512 x[9];
#pragma GCC unroll 9
                for (int j = 0; j < 9; j++)
                    x[j] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, k + j, 4);
#define CF_G(x0, x1, x2, y0, y1, y2, y3)                                                   \
    const __m512 y0 = (x0), y1 = _mm512_mul_ps(_mm512_add_ps(_mm512_add_ps(x0, x1), x2), half),              \
                 y2 = _mm512_mul_ps(_mm512_add_ps(_mm512_sub_ps(x0, x1), x2), half), y3 = (x2)
                CF_G(x[0], x[3], x[6], t00, t10, t20, t30);
                CF_G(x[1], x[4], x[7], t01, t11, t21, t31);
                CF_G(x[2], x[5], x[8], t02, t12, t22, t32);
                CF_G(t00, t01, t02, u00, u01, u02, u03);
                CF_G(t10, t11, t12, u10, u11, u12, u13);
                CF_G(t20, t21, t22, u20, u21, u22, u23);
                CF_G(t30, t31, t32, u30, u31, u32, u33);
#undef CF_G
                const __m512 u[16] = {u00, u01, u02, u03, u10, u11, u12, u13,
                                      u20, u21, u22, u23, u30, u31, u32, u33};
                float *U = wk + g * (int64_t)cf->wk_floats + c * Op + o0;
#pragma GCC unroll 16
                for (int xi = 0; xi < 16; xi++)
                    _mm512_mask_storeu_ps(U + xi * step, m, u[xi]);
            }
        }
}

static const dev_cf_isa isa_v16 = {16, 7, 2, 8, 2, wino_item_v16, rows_item_v16, flat_item_v16, chan_item_v16,
                                   wino_weights_v16};

#else
static const dev_cf_isa isa_v8 = {0}, isa_v16 = {0};
#endif

static atomic_int forced;

void dev_cf_force(int path) { atomic_store(&forced, path); }

/* the instruction set of a new plan, by dev_kpath's number */
static const dev_cf_isa *const cf_isas[3] = {&isa_v16, &isa_v8, &isa_v4};

static int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

/* p rounded up to a multiple of 64 bytes (p has 15 floats to spare) */
static float *cf_align(float *p) { return ut_align_up(p, 64); }

/* ---- Plans ------------------------------------------------------------------------
 * Winograd for 3x3 windows over at least 8 input channels (fewer make its
 * transforms cost more than the products they save); for windows of at most
 * 64 elements over all channels (the first layer of a CNN: one channel, where
 * im2col's product has K = 9) flat when the output is as wide as x, else
 * rows. The scratch of an item stays under 4 MiB: Winograd works in bands of
 * tile rows, flat and rows need x whole. */
#define CF_SCRATCH_MAX (INT64_C(1) << 20)
/* The prepared weights are made once per instruction: up to 16 MiB. */
#define CF_WEIGHTS_MAX (INT64_C(1) << 22)

/* U[g][xi][c][o] = (G w G^T)[xi] of w[g*Og + o][c], G = [1 0 0; 1/2 1/2 1/2;
 * 1/2 -1/2 1/2; 0 0 1]; o in [Og, Op) stays 0. */
static void wino_weights(const dev_cf *cf, const float *w, float *wk)
{
    const int64_t Cg = cf->Cg, Og = cf->Og, Op = cf->Op, step = Cg * Op;
    for (int64_t g = 0; g < cf->G; g++)
        for (int64_t c = 0; c < Cg; c++)
            for (int64_t o = 0; o < Og; o++) {
                const float *k = w + ((g * Og + o) * Cg + c) * 9;
                float *U = wk + g * (int64_t)cf->wk_floats + c * Op + o;
                /* named scalars, not arrays: GCC's vectoriser turned arrays
                 * into stores read back wider (a store-forwarding stall each) */
#define CF_G(x0, x1, x2, y0, y1, y2, y3)                                                   \
    const float y0 = (x0), y1 = ((x0) + (x1) + (x2)) * 0.5f, y2 = ((x0) - (x1) + (x2)) * 0.5f, y3 = (x2)
                CF_G(k[0], k[3], k[6], t00, t10, t20, t30);
                CF_G(k[1], k[4], k[7], t01, t11, t21, t31);
                CF_G(k[2], k[5], k[8], t02, t12, t22, t32);
                CF_G(t00, t01, t02, u00, u01, u02, u03);
                CF_G(t10, t11, t12, u10, u11, u12, u13);
                CF_G(t20, t21, t22, u20, u21, u22, u23);
                CF_G(t30, t31, t32, u30, u31, u32, u33);
#undef CF_G
                const float u[16] = {u00, u01, u02, u03, u10, u11, u12, u13,
                                     u20, u21, u22, u23, u30, u31, u32, u33};
                for (int xi = 0; xi < 16; xi++)
                    U[xi * step] = u[xi];
            }
}

/* wk[g][k][o] = w[g*Og + o][k] (k over c, i, j); o in [Og, Op) stays 0. */
static void rows_weights(const dev_cf *cf, const float *w, float *wk)
{
    const int64_t K = cf->Cg * cf->KH * cf->KW, Og = cf->Og, Op = cf->Op;
    for (int64_t g = 0; g < cf->G; g++)
        for (int64_t o = 0; o < Og; o++)
            for (int64_t k = 0; k < K; k++)
                wk[g * (int64_t)cf->wk_floats + k * Op + o] = w[(g * Og + o) * K + k];
}

/* The flat kernel's lane masks into mk: bit l of mk[v][j] is set when
 * output pixel q = v*VL + l exists and its column ow + j - pl is in x. */
static void flat_masks(dev_cf *cf, uint32_t *mk)
{
    const int64_t vl = cf->isa->vl, nvec = cf->nblk * cf->isa->nv, KW = cf->KW, W = cf->W, OHW = cf->OH * cf->OW;
    for (int64_t v = 0, q = 0, ow = 0; v < nvec; v++) {
        uint32_t *bits = mk + v * KW;
        for (int64_t j = 0; j < KW; j++)
            bits[j] = 0;
        for (int64_t l = 0; l < vl && q < OHW; l++, q++) {
            /* columns ow + j - pl in [0, W): j in [pl - ow, W + pl - ow) */
            const int64_t j0 = cf->pl - ow > 0 ? cf->pl - ow : 0, j1 = W + cf->pl - ow < KW ? W + cf->pl - ow : KW;
            for (int64_t j = j0; j < j1; j++)
                bits[j] |= 1u << l;
            if (++ow == W)
                ow = 0;
        }
    }
    cf->mk = mk;
}

/* What a plan's weights are made from (dev_tensor_prep's make). */
typedef struct cf_weights_job {
    const dev_cf *cf;
    const float *w;
} cf_weights_job;

static void cf_make_weights(void *ctx, void *out)
{
    const cf_weights_job *j = ctx;
    const dev_cf *cf = j->cf;
    memset(out, 0, cf->wk_floats * (size_t)cf->G * sizeof(float));
    if (cf->kind == DEV_CF_WINO)
        (cf->isa->wino_weights ? cf->isa->wino_weights : wino_weights)(cf, j->w, out);
    else
        rows_weights(cf, j->w, out);
}

bool dev_cf_choose(dev_cf *cf, int64_t Cg, int64_t H, int64_t W, int64_t G, int64_t Og, int64_t KH, int64_t KW,
                   const int64_t *p, int64_t OH, int64_t OW)
{
    const dev_cf_isa *isa = cf_isas[dev_kpath(atomic_load(&forced))];
    dev_cf c = {.isa = isa, .Cg = Cg, .H = H, .W = W, .Og = Og, .KH = KH, .KW = KW, .OH = OH, .OW = OW,
                .pt = p[2], .pl = p[3], .G = G, .sh = p[0], .sw = p[1], .dh = p[6], .dw = p[7]};
    const bool unit = p[0] == 1 && p[1] == 1 && p[6] == 1 && p[7] == 1;
    if (OH < 1 || OW < 1 || Og < 1 || Cg < 1 || OH > 4096 || OW > 4096 || Og > 4096 || Cg > 4096)
        return false;
    /* Winograd reads its transformed weights (16 Cg x Og floats, 1.8x the
     * plain ones) once per image: with few tiles to share them (a 7x7
     * output has 16) the weights' traffic outweighs the 2.25x fewer
     * multiplies, and the transposed product of conv.c (weights packed
     * once, whole tiles) runs faster: resnet18's last 3x3 layer 3.5 -> 2.5
     * ms at batch 1, 27 -> ~21 at batch 8 */
    const bool few_tiles = ((OH + 1) / 2) * ((OW + 1) / 2) < 32 && 16 * Cg * Og > (INT64_C(1) << 20);
    if (unit && KH == 3 && KW == 3 && Cg >= 8 && !few_tiles) {
        c.kind = DEV_CF_WINO;
        c.Cp = round_up(Cg, isa->vl);
        c.Op = round_up(Og, isa->vl);
        c.TH = (OH + 1) / 2;
        c.TW = (OW + 1) / 2;
        /* the product's tiles: enough groups of pw for a band of all tile
         * rows where half the scratch holds their transforms (U is read
         * once per product: fewer, larger products read it less) */
        const int64_t per_group = 16 * isa->pw * (c.Cp + c.Op), all = (c.TH * c.TW + isa->pw - 1) / isa->pw;
        c.WG = CF_SCRATCH_MAX / 2 / per_group;
        c.WG = c.WG < 1 ? 1 : c.WG > all ? all : c.WG;
        /* bands of BT tile rows: as many as keep the scratch in bounds */
        const int64_t fixed = c.WG * per_group + 2 * (2 * c.TW + 2) * c.Cp;
        const int64_t per = 2 * (2 * c.TW + 2) * c.Cp + 2 * (2 * c.TW) * c.Op; /* per tile row */
        c.BT = (CF_SCRATCH_MAX - 16 - fixed) / per;
        if (c.BT < 1)
            return false;
        if (c.BT > c.TH)
            c.BT = c.TH;
        c.scratch_floats = (size_t)(fixed + c.BT * per);
        c.wk_floats = (size_t)(16 * Cg * c.Op);
        /* few tile rows (7x7 and 14x14 late layers): an image's parts are
         * blocks of output channels, each reading only its share of U, not
         * bands of tile rows that each read all of it */
        c.ob = isa->ov * isa->vl;
        c.nob = c.TH < 8 && c.Op > c.ob ? (c.Op + c.ob - 1) / c.ob : 0;
    } else if (G > 1 && 2 * Og >= isa->vl && (!unit || Cg * KH * KW > 64)) {
        /* groups of at least half a vector of channels where the kernels
         * above do not serve (strided, dilated, or windows over many
         * channels): im2col's product per group, [Og, Cg KH KW] x [Cg KH
         * KW, OH OW], was too small to run at speed. RegNetX's 25 groups of
         * 16 channels, 3x3 stride 2 onto 7x7, 281 -> 84 us; 32 groups of 8
         * onto 14x14 0.29 -> 0.17 ms; 5x5, unit strides, groups of 16 1.05
         * -> 0.60 ms. Groups of 4 (ResNeXt 32x4d's) 0.62x to 1.2x the
         * time: left to im2col. */
        c.kind = DEV_CF_CHAN;
        c.Op = round_up(Og, isa->vl);
        c.Wp = (round_up(OW, isa->pw) - 1) * p[1] + (KW - 1) * p[7] + 1;
        const int64_t y = round_up(OW, isa->pw) * c.Op;
        /* bands of BT output rows: as many as keep the scratch in bounds */
        c.BT = ((CF_SCRATCH_MAX - 32 - y) / (Cg * c.Wp) - (KH - 1) * p[6] - 1) / p[0] + 1;
        if (c.BT < 1 || (CF_SCRATCH_MAX - 32 - y) / (Cg * c.Wp) < (KH - 1) * p[6] + 1)
            return false;
        if (c.BT > OH)
            c.BT = OH;
        c.Hb = (c.BT - 1) * p[0] + (KH - 1) * p[6] + 1;
        c.scratch_floats = (size_t)(Cg * c.Hb * c.Wp + y);
        c.wk_floats = (size_t)(Cg * KH * KW * c.Op);
    } else if (!unit) {
        return false;
    } else if (Cg * KH * KW <= 64 && OW == W) {
        /* as wide as x: the flat kernel, whose vectors run across rows */
        c.kind = DEV_CF_FLAT;
        c.Op = round_up(Og, isa->mr);
        c.CS = (p[2] + H + p[4]) * W + 2 * KW + isa->nv * isa->vl;
        c.nblk = (OH * OW + isa->nv * isa->vl - 1) / (isa->nv * isa->vl);
        c.scratch_floats = (size_t)(Cg * c.CS);
        c.wk_floats = (size_t)(Cg * KH * KW * c.Op);
        c.mk_count = (size_t)(c.nblk * isa->nv * KW);
    } else if (Cg * KH * KW <= 64) {
        c.kind = DEV_CF_ROWS;
        c.Op = round_up(Og, isa->mr);
        c.scratch_floats = (size_t)(Cg * (OH + KH - 1) * (OW + KW - 1) + isa->nv * isa->vl);
        c.wk_floats = (size_t)(Cg * KH * KW * c.Op);
    } else {
        return false;
    }
    /* each group's weights and the scratch start on a 64-byte line: a
     * vector load across two lines costs two */
    c.wk_floats = (c.wk_floats + 15) / 16 * 16;
    c.scratch_floats += 16;
    if (c.scratch_floats > (size_t)CF_SCRATCH_MAX || c.wk_floats * (size_t)G > (size_t)CF_WEIGHTS_MAX)
        return false;
    *cf = c;
    return true;
}

bool dev_cf_prepare(dev_cf *cf, const float *w, const tfvm_tensor *wt, const tfvm_allocator *a)
{
    dev_cf c = *cf;
    /* the weights prepared once, kept with w's tensor (dev_tensor_prep);
     * where it keeps none, here, in the call's own block after the masks */
    cf_weights_job job = {&c, w};
    const struct {
        int64_t tag, kind, vl, Cg, Og, Op, KH, KW, floats;
    } key = {0x636630 /* "cf0" */, c.kind, c.isa->vl, c.Cg, c.Og, c.Op, c.KH, c.KW, (int64_t)c.wk_floats};
    const size_t wk_bytes = c.wk_floats * (size_t)c.G * sizeof(float);
    c.wk = dev_tensor_prep(wt, &key, sizeof key, wk_bytes, cf_make_weights, &job);
    c.raw_bytes = c.mk_count * sizeof(uint32_t) + (c.wk ? 0 : 64 + wk_bytes);
    if (c.raw_bytes && !(c.raw = ut_alloc(a, c.raw_bytes)))
        return false;
    if (!c.wk) {
        float *wk = cf_align((float *)c.raw + c.mk_count);
        cf_make_weights(&job, wk);
        c.wk = wk;
    }
    if (c.kind == DEV_CF_FLAT)
        flat_masks(&c, c.raw);
    *cf = c;
    return true;
}

const char *dev_cf_isa_name(const dev_cf *cf)
{
    return cf->isa == &isa_v16 ? "AVX-512" : cf->isa == &isa_v8 ? "AVX2" : "portable";
}

int64_t dev_cf_parts(const dev_cf *cf)
{
    return cf->kind == DEV_CF_WINO ? (cf->nob ? cf->nob : cf->TH) : cf->kind == DEV_CF_FLAT ? cf->nblk : cf->OH;
}

void dev_cf_part_chans(const dev_cf *cf, int64_t b, int64_t e, int64_t *o0, int64_t *no)
{
    if (!cf->nob) {
        *o0 = 0;
        *no = cf->Og;
        return;
    }
    const int64_t lo = b * cf->ob < cf->Og ? b * cf->ob : cf->Og, hi = e * cf->ob < cf->Og ? e * cf->ob : cf->Og;
    *o0 = lo;
    *no = hi - lo;
}

void dev_cf_part_cols(const dev_cf *cf, int64_t b, int64_t e, int64_t *col0, int64_t *ncols)
{
    if (cf->nob) {
        *col0 = 0;
        *ncols = cf->OH * cf->OW;
        return;
    }
    const int64_t OHW = cf->OH * cf->OW;
    const int64_t per = cf->kind == DEV_CF_WINO   ? 2 * cf->OW /* a tile row */
                        : cf->kind == DEV_CF_FLAT ? cf->isa->nv * cf->isa->vl
                                                  : cf->OW;
    const int64_t lo = b * per < OHW ? b * per : OHW, hi = e * per < OHW ? e * per : OHW;
    *col0 = lo;
    *ncols = hi - lo;
}

void dev_cf_item(const dev_cf *cf, int64_t g, const float *xg, float *og, float *scratch, const float *bias,
                 const float *res, bool relu, int64_t b, int64_t e)
{
    const float *wk = cf->wk + g * (int64_t)cf->wk_floats;
    scratch = cf_align(scratch);
    if (bias)
        bias += g * cf->Og;
    if (cf->kind == DEV_CF_WINO)
        if (cf->nob)
            cf->isa->wino(cf, wk, xg, og, scratch, bias, res, relu, 0, cf->TH, b * cf->ob,
                          e * cf->ob < cf->Op ? e * cf->ob : cf->Op);
        else
            cf->isa->wino(cf, wk, xg, og, scratch, bias, res, relu, b, e, 0, cf->Op);
    else if (cf->kind == DEV_CF_FLAT)
        cf->isa->flat(cf, wk, xg, og, scratch, bias, relu, b, e);
    else if (cf->kind == DEV_CF_CHAN)
        cf->isa->chan(cf, wk, xg, og, scratch, bias, res, relu, b, e);
    else
        cf->isa->rows(cf, wk, xg, og, scratch, bias, relu, b, e);
}

void dev_cf_free(dev_cf *cf, const tfvm_allocator *a)
{
    if (cf->raw)
        ut_free(a, cf->raw, cf->raw_bytes);
    cf->raw = NULL;
    cf->wk = NULL;
}
