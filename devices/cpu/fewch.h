/* devices/cpu/fewch.h — f32 CONV2D of few input channels without im2col: a
 * CNN's first layer (3 channels, a 3x3 or 7x7 window, stride 2), where each
 * output element sums only Cg*KH*KW products and im2col's column matrix,
 * read once by the product, costs as much as the product. A band of output
 * rows at a time: its input rows split by column phase (x[k*sw + ph], so
 * that every window tap of VL neighbouring outputs is one contiguous
 * vector), then blocks of output channels x VL output columns summed in
 * registers, tap by tap in w's (c, i, j) order with the product's own
 * multiply-add: the bits of im2col and our gemm on the same instruction set
 * (AVX-512, AVX2 or portable, the one dev_sgemm uses). */
#ifndef TFVM_CPU_FEWCH_H
#define TFVM_CPU_FEWCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tfvm_tensor;

/* One convolution: x [N, C, H, W], w [O, C, KH, KW] (one group), strides
 * sh, sw, pads pt, pl, dilations dh, dw, output [N, O, OH, OW]; the plan's:
 * the instruction set (0 AVX-512, 1 AVX2, 2 portable), its lanes vl, the
 * output channels per block ob, output rows per band, floats per phase row
 * (wq) and per band's split input (the scratch an item needs). */
typedef struct dev_fc {
    int64_t N, C, H, W, O, KH, KW, OH, OW, sh, sw, pt, pl, dh, dw;
    int path;
    int64_t vl, ob, rows, wq, scratch;
} dev_fc;

/* True when this kernel takes f (its plan filled in): one group, at most
 * DEV_FC_MAX_C input channels and DEV_FC_MAX_TAPS products per output
 * element (one block of the gemm's sums, so the same bits), output rows at
 * least one vector wide. Pure: the planner (convplan.c) asks it. */
#define DEV_FC_MAX_C 4
#define DEV_FC_MAX_TAPS 256
bool dev_fc_plan(dev_fc *f);
/* Items of work: bands of f->rows output rows, n * bands + band; item's
image n and output rows [oh0, oh1). */
int64_t dev_fc_items(const dev_fc *f);
void dev_fc_band(const dev_fc *f, int64_t item, int64_t *n, int64_t *oh0, int64_t *oh1);
/* w packed by output channel blocks (each block's taps, ob lanes a tap,
 * zeros past the last channel): dev_fc_wk_floats(f) floats, made once and
 * kept with w's tensor wt; NULL without a tensor to keep them with. */
size_t dev_fc_wk_floats(const dev_fc *f);
const float *dev_fc_pack_kept(const dev_fc *f, const float *w, const struct tfvm_tensor *wt);
void dev_fc_pack(const dev_fc *f, const float *w, float *wk);
/* Items [b, e) of x into o (the sums alone: the caller adds the bias and
 * activation), scratch of f->scratch floats. */
void dev_fc_run(const dev_fc *f, const float *x, const float *wk, float *o, int64_t b, int64_t e, float *scratch);
/* Tests: 0 the fastest path the CPU has, 1 AVX2 at most, 2 portable. */
void dev_fc_force(int path);
/* The name of a plan's instruction set. */
const char *dev_fc_isa_name(const dev_fc *f);

#endif
