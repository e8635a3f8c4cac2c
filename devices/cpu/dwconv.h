/* devices/cpu/dwconv.h — f32 depthwise CONV2D (groups = input channels, one
 * input channel per group): every window shape, stride, dilation and pad,
 * four vectors of outputs at a time over the plane; AVX-512, AVX2 or
 * portable, picked at run time (the same sums in the same order on every
 * path). */
#ifndef TFVM_CPU_DWCONV_H
#define TFVM_CPU_DWCONV_H

#include <stdbool.h>
#include <stdint.h>

#include "tfvm.h"

/* One depthwise convolution: x [N, C, H, W], w [C*M, 1, KH, KW] (M output
 * channels per input channel), p as CONV2D takes it (strides, pads,
 * dilations; groups = C), out [N, C*M, OH, OW]. */
typedef struct dev_dw {
    const float *x, *w, *bias; /* bias: [C*M] or NULL */
    float *o;
    int64_t N, C, M, H, W, KH, KW, OH, OW;
    int64_t sh, sw, pt, pl, dh, dw;
    bool relu; /* max(sum + bias, 0): what ADD and RELU give */
    bool max;  /* MAXPOOL instead (w, bias, relu unused): the window's max,
                  NaN where it holds one, M = 1 */
    uint32_t act; /* channel blocks (cb): an activation after the bias
                     (ISA_OPT_ACT_*, not relu), applied by the kernel */
    const float *wpk; /* channel blocks: w interleaved (dev_dw_pack), or NULL */
    bool nhwc; /* channel blocks: x is [N, H, W, C] (channels last), read as it lies */
    /* dev_dw_plan's: the instruction set (0 AVX-512, 1 AVX2, 2 portable),
     * its vector length, the scratch an item needs (floats), and the
     * layout: output planes one by one on a wide grid (cb 0), or blocks of
     * cb = vl channels interleaved, `strip` output rows at a time */
    int path;
    int64_t vl, scratch, cb, strip;
    bool strips; /* cb: each strip of a block is an item (fewer blocks than threads) */
} dev_dw;

/* True when the depthwise kernel takes d (its sizes filled in; the plan
 * filled in here, for `threads` threads): groups G = C > 1, one input
 * channel per group (Cg = 1) (or d->max), and a scratch of at most 16 Mi
 * floats. */
bool dev_dw_plan(dev_dw *d, int64_t Cg, int64_t G, unsigned threads);
/* Items of work, each computed apart: an output plane (n * C*M + o), or
 * with cb a block of cb channels (block = n * blocks + c / cb: an image's
 * blocks one after another, in the result's order), with d->strips each
 * strip of d->strip output rows of a block (block * strips + strip).
 * dev_dw_run(d, b, e, scratch) computes items [b, e) with scratch of
 * d->scratch floats. */
int64_t dev_dw_items(const dev_dw *d);
/* One item's work in multiply-adds, for splitting the layer over threads:
 * its taps, and its elements read and written, which cost more than the
 * taps on small windows and at stride 2 (their transpositions in and out). */
int64_t dev_dw_item_cost(const dev_dw *d);
/* What item `it` writes: rows [*row0, *row0 + *n) of the output as [N *
 * C*M, OH*OW], columns [*col0, *col0 + *ncols) of them. */
void dev_dw_item_span(const dev_dw *d, int64_t it, int64_t *row0, int64_t *n, int64_t *col0, int64_t *ncols);
/* Channel blocks' weights, each block's KH*KW vectors of cb lanes (zeros past
 * the last channel), made once and kept with w's tensor wt (w its data, or
 * a view into it); NULL without channel blocks or a tensor to keep them
 * with: each chunk then interleaves its blocks' own. */
const float *dev_dw_pack(const dev_dw *d, const struct tfvm_tensor *wt);
void dev_dw_run(const dev_dw *d, int64_t b, int64_t e, float *scratch);
/* Tests: 0 the fastest path the CPU has, 1 AVX2 at most, 2 portable; the
 * layout: 0 and 2 channel blocks where they apply, 1 planes. */
void dev_dw_force(int path);
void dev_dw_force_layout(int layout);

#endif
