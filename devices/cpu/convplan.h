/* devices/cpu/convplan.h — which kernel and layout the CPU backend runs for
 * a convolution or a pool, and how it splits the work over threads: decided
 * here alone, from the shapes, the dtype, this CPU's instruction set and the
 * thread count. The kernels (conv.c) follow the plan; `tfvm check` prints it
 * (analysis, tfvm_facts_kernel), so the two cannot disagree. docs/check.md
 * describes each kernel and when it is chosen. */
#ifndef TFVM_CPU_CONVPLAN_H
#define TFVM_CPU_CONVPLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/cpu/convf32.h"
#include "devices/cpu/dwconv.h"
#include "devices/cpu/fewch.h"
#include "devices/cpu/kern.h"

/* A convolution's operands, as the kernel has checked them: x [N, C, H, W],
 * w [O, Cg, KH, KW], p = [sh, sw, pt, pl, pb, pr, dh, dw, groups], the
 * output OH x OW. */
typedef struct dev_conv_shape {
    uint8_t dtype;
    int64_t N, C, H, W, O, Cg, KH, KW, OH, OW;
    int64_t p[9];
    uint32_t lay; /* FUSED_CONV2D's ISA_OPT_NHWC_IN / _OUT (the dims above are NCHW's all the same) */
} dev_conv_shape;

/* The kernels of conv.c. The gemm-based ones compute products w @ col
 * (per image and group) by plan.gemm's code. */
typedef enum dev_conv_kernel {
    DEV_CONV_EMPTY,     /* an empty result: nothing to compute */
    DEV_CONV_DEPTHWISE, /* dwconv.h, plan.dw: channel blocks or planes on a wide grid */
    DEV_CONV_F32,       /* convf32.h, plan.cf: Winograd F(2x2, 3x3), flat or by rows */
    DEV_CONV_TPROD,     /* few output positions: y = col^T @ w^T, timgs images a product */
    DEV_CONV_PANELS,    /* a big column matrix: im2col in panels of prows output rows */
    DEV_CONV_DIRECT,    /* 1x1, unit strides, no pads: x is the column matrix */
    DEV_CONV_WIDE,      /* unit strides: the product on the wide grid OH x (W + pads) */
    DEV_CONV_IM2COL,    /* the column matrix of an image, then the product */
    DEV_CONV_FEWCH,     /* fewch.h, plan.fc: few input channels, bands of output rows */
    DEV_CONV_SCALE,     /* a depthwise 1x1 at unit strides, no pads: each plane times its weight */
    DEV_CONV_KERNELS
} dev_conv_kernel;

typedef struct dev_conv_plan {
    dev_conv_kernel kernel;
    dev_kmm_code gemm;  /* who computes the products (not DEPTHWISE, F32) */
    bool direct;        /* a 1x1 window, unit strides, no pads: x is the column
                           matrix as it lies (DIRECT; TPROD transposes it) */
    bool split;         /* fewer items (images x groups, or stacks) than threads:
                           one at a time, each split over the threads */
    unsigned threads;
    int64_t items;      /* what runs in parallel: images x groups, depthwise
                           items, stacks or panels of every item */
    int64_t timgs;      /* TPROD: images stacked in one product */
    int64_t prows;      /* PANELS: output rows per panel */
    int64_t panels;     /* PANELS: panels per image and group */
    dev_dw dw;          /* DEPTHWISE: its layout and path (sizes, no data) */
    dev_cf cf;          /* F32: its kind and sizes (weights not prepared) */
    dev_fc fc;          /* FEWCH: its path and sizes (no data) */
    /* s->lay's layouts that the kernel reads (x_last: DEPTHWISE's channel
     * blocks) or writes (out_last: TPROD, a 1x1 layer) itself; any other
     * option goes through NCHW, transposed before and after (conv.c) */
    bool x_last, out_last;
} dev_conv_plan;

/* The plan for s on `threads` threads (dev_par_width() in a kernel). */
void dev_conv_plan_make(const dev_conv_shape *s, unsigned threads, dev_conv_plan *plan);

/* The parallel loop a plan runs (not a gemm plan's split product): its
 * n items, each worth `cost` multiply-adds, pieces of at least `least`
 * (conv.c passes them to dev_kgrain; tfvm check to dev_kpieces). A split
 * F32 plan's loop is over one item's dev_cf_parts parts. */
void dev_conv_par_loop(const dev_conv_plan *plan, const dev_conv_shape *s, int64_t *n, int64_t *cost, int64_t *least);

/* The kernels of dev_cpu_pool. */
typedef enum dev_pool_kernel {
    DEV_POOL_EMPTY,   /* an empty result */
    DEV_POOL_2X2,     /* 2x2 windows at stride 2, no pads, floats: two rows at a time */
    DEV_POOL_3X3,     /* f32 MAXPOOL, 3x3 windows at stride 2, AVX-512: planes as they lie */
    DEV_POOL_GRID,    /* f32 MAXPOOL through the depthwise kernel (plan.dw) */
    DEV_POOL_AVG,     /* float AVGPOOL without dilations: each plane padded, planes in parallel */
    DEV_POOL_GENERAL, /* dilations, ceil mode or count_include_pad: the general loop */
    DEV_POOL_WINDOWS, /* the window loop, 2x2 and 3x3 unrolled */
    DEV_POOL_KERNELS
} dev_pool_kernel;

typedef struct dev_pool_plan {
    dev_pool_kernel kernel;
    bool avx512; /* 2X2, 3X3, and AVG at unit strides, on f32: the AVX-512 code */
    bool avx2;   /* 2X2, 3X3, AVG on f32: the AVX2 code (where avx512 is not) */
    unsigned threads;
    int64_t planes, plane; /* 2X2, 3X3, AVG: N x C planes in parallel, OH x OW each */
    dev_dw dw;   /* GRID */
    int64_t Hp, Wp; /* AVG: the padded plane, every window whole */
} dev_pool_plan;
/* SCALE: planes go in chunks of at least this many elements (~3-6 us) */
#define DEV_CONV_SCALE_LEAST 16384
/* 2X2: planes go in chunks of at least this many output elements (~1.5-3 us) */
#define DEV_POOL2_LEAST 4096

/* x [N, C, H, W] pooled by p = [kh, kw, sh, sw, pt, pl, pb, pr, dh, dw,
 * ceil_mode, count_include_pad] into OH x OW, as dev_cpu_pool has checked,
 * on `threads` threads. */
void dev_pool_plan_make(uint8_t dtype, bool avg, const int64_t *xdims, const int64_t *p, int64_t OH, int64_t OW,
                        unsigned threads, dev_pool_plan *plan);
/* For tests: an f32 MAXPOOL that 3X3 would take goes to the depthwise
 * kernel (GRID) instead while on */
void dev_pool_force_grid(bool on);
/* For tests: the f32 pools' vector build (dev_kpath: 0 the best the CPU
 * has, 1 AVX2 at most, 2 portable; 3X3 has no portable build: GRID) */
void dev_pool_force(int path);

/* The plans in words, as `tfvm check` prints them after "cpu: " (docs/check.md):
 * "Winograd F(2x2, 3x3), AVX-512; 2 threads: 4 images in parallel". With
 * batch_known false (the batch dim is `?`) what depends on it is left out. */
const char *dev_conv_plan_str(const dev_conv_plan *plan, const dev_conv_shape *s, bool batch_known, char *buf,
                              size_t size);
const char *dev_pool_plan_str(const dev_pool_plan *plan, bool batch_known, char *buf, size_t size);

/* Tests (test_fused): counting what the kernels of conv.c take. While on,
 * each CONV2D adds 1 to the count of the kernel that computed its first
 * item (dev_conv_took, called by that kernel); dev_conv_count resets. */
void dev_conv_count(bool on);
uint64_t dev_conv_counted(dev_conv_kernel k);
void dev_conv_took(dev_conv_kernel k);

#endif
