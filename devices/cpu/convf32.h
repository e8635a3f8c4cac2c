/* devices/cpu/convf32.h — f32 CONV2D without im2col: at unit strides
 * Winograd F(2x2, 3x3) or a direct kernel for small windows (flat or by
 * rows); for groups of many channels at any strides a direct kernel with
 * output channels in vectors; AVX-512 when the CPU has it, else portable
 * code (the same sums up to rounding). */
#ifndef TFVM_CPU_CONVF32_H
#define TFVM_CPU_CONVF32_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfvm.h"

struct dev_cf_isa;

/* One convolution's plan: its shape (per group), the kernel and the weights
 * prepared for it (transformed or packed, per group), made once per
 * instruction and shared by every item (image, group). */
typedef struct dev_cf {
    int kind; /* DEV_CF_WINO, DEV_CF_ROWS, DEV_CF_FLAT or DEV_CF_CHAN */
    const struct dev_cf_isa *isa;
    int64_t Cg, H, W, Og, KH, KW, OH, OW, pt, pl, G;
    int64_t sh, sw, dh, dw; /* strides and dilations (1 but in DEV_CF_CHAN) */
    int64_t Cp, Op;        /* channels rounded up to the kernel's blocks */
    int64_t TH, TW;        /* Winograd: 2x2 output tiles */
    int64_t BT;            /* Winograd: tile rows per band (the scratch holds one band);
                              channels: output rows per band */
    int64_t Hb, Wp;        /* channels: a band's padded copy of x, Hb rows of Wp floats */
    int64_t WG;            /* Winograd: groups of the register block's tiles per product */
    int64_t ob, nob;       /* Winograd: output channels per block; parts are nob blocks
                              of them (0: parts are tile rows) */
    int64_t CS, nblk;      /* flat: floats per channel's copy of x, runs of output pixels */
    const uint32_t *mk;    /* flat: lane masks (in raw) */
    size_t mk_count;
    const float *wk;       /* prepared weights, wk_floats per group (64-byte aligned):
                              kept with w's tensor, or in raw */
    void *raw;             /* this plan's own block (NULL: none), raw_bytes long */
    size_t raw_bytes;
    size_t wk_floats, scratch_floats;
} dev_cf;

enum { DEV_CF_WINO = 1, DEV_CF_ROWS = 2, DEV_CF_FLAT = 3, DEV_CF_CHAN = 4 };

/* Chooses the kernel for CONV2D of x [N, G*Cg, H, W] (f32) with w [G*Og, Cg,
 * KH, KW], CONV2D's parameters p (strides p[0..1], pads p[2..5] = [pt, pl,
 * pb, pr], dilations p[6..7]), output OH x OW, on this CPU: true with cf's kind and sizes filled (its
 * weights not yet prepared), false when no kernel here suits this shape (cf
 * untouched). Pure: devices/cpu/convplan.c asks it for `tfvm check` too. */
bool dev_cf_choose(dev_cf *cf, int64_t Cg, int64_t H, int64_t W, int64_t G, int64_t Og, int64_t KH, int64_t KW,
                   const int64_t *p, int64_t OH, int64_t OW);
/* Prepares a chosen plan's weights from w: once, kept with their tensor wt
 * (dev_tensor_prep: every later run finds them), or for this call only when
 * wt is NULL or keeps none. False when memory cannot be had (cf untouched). */
bool dev_cf_prepare(dev_cf *cf, const float *w, const tfvm_tensor *wt, const tfvm_allocator *a);
/* The instruction set of a plan's code: "AVX-512" or "portable". */
const char *dev_cf_isa_name(const dev_cf *cf);
/* An item (group g of one image) is made of dev_cf_parts(cf) parts (output
 * rows, tile rows, runs of pixels or blocks of channels) that can be computed apart, each element the same way
 * whichever parts go together: so one image can be split over threads. */
int64_t dev_cf_parts(const dev_cf *cf);
/* The output pixels (columns of og's [Og, OH*OW]) and channels (its rows)
 * that parts [b, e) write. */
void dev_cf_part_cols(const dev_cf *cf, int64_t b, int64_t e, int64_t *col0, int64_t *ncols);
void dev_cf_part_chans(const dev_cf *cf, int64_t b, int64_t e, int64_t *o0, int64_t *no);
/* Parts [b, e) of an item: xg [Cg, H, W] into og [Og, OH, OW], with scratch
 * of cf->scratch_floats floats; with bias (the instruction's [G*Og], or
 * NULL) each sum + bias[o], then with res (Winograd and channels only: the item's r,
 * og's layout, or NULL) + its element, then with relu x < 0 ? 0 : x: what
 * ADD, ADD and RELU would give. res may be og itself (each element read
 * just before it is written). */
void dev_cf_item(const dev_cf *cf, int64_t g, const float *xg, float *og, float *scratch, const float *bias,
                 const float *res, bool relu, int64_t b, int64_t e);
void dev_cf_free(dev_cf *cf, const tfvm_allocator *a);
/* Tests: 0 plans with the best kernels the CPU has, 1 with AVX2's at most,
 * 2 with the portable ones. */
void dev_cf_force(int path);

#endif
