/* test/unit/test_kernels_image.c — the CPU kernels of the ONNX image ops
 * (RESIZE2, GRID_SAMPLE, NMS, AFFINE_GRID, COL2IM, ROI_ALIGN, DEFORM_CONV):
 * outputs worked out by hand or with ONNX's reference implementation
 * (onnx 1.22, noted so), error messages word for word, allocation failures. */
#include "kernutil.h"



#define NEAR_FLOOR ISA_OPT_NEAREST_FLOOR
#define P2(a, e) T(F32, (2), a, e)              /* RESIZE2 params without a roi */
#define X4 T(F32, (4), 1, 2, 3, 4)

/* ---- RESIZE2 ------------------------------------------------------------------ */
START_TEST(test_resize2)
{
    /* ONNX's reference: cubic (a = -0.75, half_pixel) upsampling by 2 */
    OK(ISA_RESIZE2, ISA_OPT_CUBIC, (X4, T(F32, (1), 2), IV0, P2(-0.75, 0)), F32, (8), 0.89453125, 1.19140625,
       1.66796875, 2.296875, 2.703125, 3.33203125, 3.80859375, 4.10546875);
    /* a = -0.5 with exclude_outside (reference) */
    OK(ISA_RESIZE2, ISA_OPT_CUBIC | ISA_OPT_EXCLUDE_OUTSIDE, (X4, T(F32, (1), 2), IV0, P2(-0.5, 0)), F32, (8),
       0.9117646813392639, 1.1678831577301025, 1.7099236249923706, 2.25, 2.75, 3.29007625579834,
       3.8321168422698975, 4.088235378265381);
    /* antialiased downsampling by 2: linear, cubic (reference) */
    OK(ISA_RESIZE2, ISA_OPT_LINEAR | ISA_OPT_ANTIALIAS, (T(F32, (8), 1, 2, 3, 4, 5, 6, 7, 8), T(F32, (1), 0.5), IV0,
       P2(-0.75, 0)), F32, (4), 1.625, 3.5, 5.5, 7.375);
    OK(ISA_RESIZE2, ISA_OPT_CUBIC | ISA_OPT_ANTIALIAS, (T(F32, (8), 1, 2, 3, 4, 5, 6, 7, 8), T(F32, (1), 0.5), IV0,
       P2(-0.75, 0)), F32, (4), 1.47265625, 3.482421875, 5.517578125, 7.52734375);
    /* tf_crop_and_resize: roi starts (0, 0.5), ends (1, 1.5); beyond the input: 9 (reference) */
    OK(ISA_RESIZE2, ISA_OPT_LINEAR | ISA_OPT_TF_CROP_AND_RESIZE,
       (T(F64, (2, 3), 1, 2, 3, 4, 5, 6), FV0, IV(2, 4), T(F32, (6), -0.75, 9, 0, 0.5, 1, 1.5)), F64, (2, 4), 2,
       2.6666666666666665, 9, 9, 5, 5.666666666666666, 9, 9);
    /* a NaN roi: every coordinate outside */
    OK(ISA_RESIZE2, ISA_OPT_LINEAR | ISA_OPT_TF_CROP_AND_RESIZE, (T(F32, (2), 1, 2), FV0, IV(2), T(F32, (4), -0.75, 7, NAN, 1)),
       F32, (2), 7, 7);
    /* half_pixel_symmetric: 4 * 0.6 = 2.4 -> 2 (reference) */
    OK(ISA_RESIZE2, ISA_OPT_LINEAR | ISA_OPT_HALF_PIXEL_SYMMETRIC, (X4, T(F32, (1), 0.6f), IV0, P2(-0.75, 0)), F32,
       (2), 1.6666667461395264, 3.3333332538604736);
    /* keep_aspect_ratio_policy over both axes: not_larger [2, 2] of [2, 4]
     * is scale 0.5 -> [1, 2]; not_smaller [1, 3] is 0.75 -> [2, 3] (reference) */
    const uint32_t both = ISA_OPT_KEEP_AXIS0 | ISA_OPT_KEEP_AXIS0 << 1;
    OK(ISA_RESIZE2, ISA_OPT_NOT_LARGER | both, (T(F32, (2, 4), 0, 1, 2, 3, 4, 5, 6, 7), FV0, IV(2, 2), P2(-0.75, 0)),
       F32, (1, 2), 0, 2);
    OK(ISA_RESIZE2, ISA_OPT_NOT_SMALLER | both, (T(F32, (2, 4), 0, 1, 2, 3, 4, 5, 6, 7), FV0, IV(1, 3), P2(-0.75, 0)),
       F32, (2, 3), 0, 1, 3, 4, 5, 7);
    /* only axis 1 listed: axis 0 keeps its size */
    OK(ISA_RESIZE2, ISA_OPT_NOT_LARGER | ISA_OPT_KEEP_AXIS0 << 1,
       (T(F32, (2, 4), 0, 1, 2, 3, 4, 5, 6, 7), FV0, IV(2, 2), P2(-0.75, 0)), F32, (2, 2), 0, 2, 4, 6);
    /* nearest floor, asymmetric: as RESIZE */
    OK(ISA_RESIZE2, ISA_OPT_ASYMMETRIC | NEAR_FLOOR, (X4, T(F32, (1), 0.5), IV0, P2(-0.75, 0)), F32, (2), 1, 3);
    /* identity and empty */
    OK(ISA_RESIZE2, ISA_OPT_CUBIC, (X4, T(F32, (1), 1), IV0, P2(-0.75, 0)), F32, (4), 1, 2, 3, 4);
    OK(ISA_RESIZE2, ISA_OPT_CUBIC, (X4, FV0, IV(0), P2(-0.75, 0)), F32, (0), 0);
    FAILS(ISA_RESIZE2, ISA_OPT_TF_CROP_AND_RESIZE, (X4, FV0, IV(2), P2(-0.75, 0)), SH,
          "resize2: tf_crop_and_resize needs a roi: params must be f32 [4], got f32 [2]");
    FAILS(ISA_RESIZE2, 0, (T(I32, (2), 1, 2), FV0, IV(4), P2(-0.75, 0)), TY, "resize2: x must be f32 or f64, got i32 [2]");
    FAILS(ISA_RESIZE2, ISA_OPT_LINEAR | ISA_OPT_CUBIC, (X4, FV0, IV(2), P2(-0.75, 0)), AR,
          "resize2: bad options 257: one mode, coordinate mode, rounding mode and aspect policy at most");
    FAILS(ISA_RESIZE2, 0, (X4, FV0, IV(2), T(F32, (3))), TY,
          "resize2: params must be f32 [2] or [4] (cubic a, extrapolation value, roi starts, roi ends), got f32 [3]");
    FAILS(ISA_RESIZE2, 0, (X4, T(F32, (1), 2), IV(2), P2(-0.75, 0)), SH,
          "resize2: exactly one of scales (1 entries) and sizes (1 entries) must be given, one entry per axis of [4]");
    FAILS(ISA_RESIZE2, ISA_OPT_LINEAR | ISA_OPT_ANTIALIAS, (X4, T(F32, (1), 1e-4f), IV0, P2(-0.75, 0)), AR,
          "resize2: scale 0.0001 of axis 0 is too small for an antialiased window");
}
END_TEST

/* ---- GRID_SAMPLE ----------------------------------------------------------------- */
#define GX T(F32, (1, 1, 2, 2), 1, 2, 3, 4)
#define GG T(F32, (1, 2, 2, 2), -1, -1, 0.5, -0.25, 1.2, 0.9, -0.7, 1.6)
#define GS_OK(opt, ...) OK(ISA_GRID_SAMPLE, opt, (GX, GG), F32, (1, 1, 2, 2), __VA_ARGS__)
START_TEST(test_grid_sample)
{
    /* ONNX's reference, on these four points, every mode x padding x align_corners */
    const uint32_t AL = ISA_OPT_GS_ALIGN_CORNERS, BO = ISA_OPT_GS_BORDER, RE = ISA_OPT_GS_REFLECTION,
                   NE = ISA_OPT_GS_NEAREST, CU = ISA_OPT_GS_CUBIC;
    GS_OK(0, 0.25, 2.5, 0.7199999094009399, 0);
    GS_OK(AL, 1, 2.5, 3.5099997520446777, 2.205000162124634);
    GS_OK(BO, 1, 2.5, 4, 3);
    GS_OK(BO | AL, 1, 2.5, 3.9000000953674316, 3.1500000953674316);
    GS_OK(RE, 1, 2.5, 4, 2.8000001907348633);
    GS_OK(RE | AL, 1, 2.5, 3.8000001907348633, 2.5500001907348633);
    GS_OK(NE, 1, 2, 0, 0);
    GS_OK(NE | AL, 1, 2, 4, 3);
    GS_OK(NE | BO, 1, 2, 4, 3);
    GS_OK(NE | RE, 1, 2, 4, 3);
    GS_OK(CU, 0.109375, 2.8046875, 0.7721726894378662, -0.14434146881103516);
    GS_OK(CU | AL, 1, 3.346954345703125, 3.790281057357788, 2.71382737159729);
    GS_OK(CU | BO, 0.71875, 2.453125, 4.215998649597168, 2.904000997543335);
    GS_OK(CU | BO | AL, 1, 2.494140625, 3.921374797821045, 3.127687692642212);
    GS_OK(CU | RE, 0.4375, 2.453125, 4.517499923706055, 2.7160017490386963);
    GS_OK(CU | RE | AL, 1, 2.4765625, 3.95749831199646, 2.6287505626678467);
    /* 1-d, f64, the grid f32: 0.25 is coordinate 1.25 of [10, 20, 30]; 2 lies beyond it */
    OK(ISA_GRID_SAMPLE, AL, (T(F64, (1, 1, 3), 10, 20, 30), T(F32, (1, 2, 1), 0.25, 2)), F64, (1, 1, 2), 22.5, 0);
    OK(ISA_GRID_SAMPLE, 0, (GX, T(F32, (1, 0, 3, 2))), F32, (1, 1, 0, 3), 0);
    /* a NaN coordinate gives NaN; a huge one is outside (zeros) */
    OK(ISA_GRID_SAMPLE, 0, (GX, T(F32, (1, 1, 2, 2), NAN, 0, 1e30, 0)), F32, (1, 1, 1, 2), NAN, 0);
    OK(ISA_GRID_SAMPLE, CU, (GX, T(F32, (1, 1, 1, 2), -1e30, 0)), F32, (1, 1, 1, 1), 0);
    FAILS(ISA_GRID_SAMPLE, 0, (GX, T(F32, (1, 2, 2, 3))), SH,
          "grid_sample: x [N, C, D1..Dk] (k in 1..6) needs grid [N, H1..Hk, k], got x [1, 1, 2, 2] and grid [1, 2, 2, 3]");
    FAILS(ISA_GRID_SAMPLE, 0, (T(I32, (1, 1, 2)), T(F32, (1, 1, 1))), TY,
          "grid_sample: x and grid must be f32 or f64, got i32 [1, 1, 2] and f32 [1, 1, 1]");
    FAILS(ISA_GRID_SAMPLE, NE | CU, (GX, GG), AR, "grid_sample: bad options 3: one mode and one padding mode at most");
}
END_TEST

/* ---- NMS ------------------------------------------------------------------------- */
/* boxes [y1, x1, y2, x2]: 0 and 1 overlap (IoU 0.9 / 1.1), 2 apart, 3 with
 * its corners swapped (the same box as 0) */
#define NB T(F32, (1, 4, 4), 0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, 2, 1, 3, 1, 1, 0, 0)
#define NS T(F32, (1, 2, 4), 0.9, 0.95, 0.5, 0.1, 0.1, 0.2, 0.3, 0.4)
START_TEST(test_nms)
{
    /* class 0: 1 (0.95), 0 suppressed by 1, 2, 3 suppressed by 1; class 1: 3, 2 (apart), 1 and 0 suppressed */
    OK(ISA_NMS, 0, (NB, NS, IV(10), T(F32, (1), 0.5), FV0), I64, (4, 3), 0, 0, 1, 0, 0, 2, 0, 1, 3, 0, 1, 2);
    /* IoU 0.818 is not above 0.9: 0 stays (0 and 3 are one box: 3 goes) */
    OK(ISA_NMS, 0, (NB, NS, sc64(3), sc(F32, 0.9), FV0), I64, (6, 3), 0, 0, 1, 0, 0, 0, 0, 0, 2, 0, 1, 3, 0, 1, 2, 0,
       1, 1);
    /* at most one per class; a score threshold keeps the boxes above it only */
    OK(ISA_NMS, 0, (NB, NS, IV(1), T(F32, (1), 0.5), FV0), I64, (2, 3), 0, 0, 1, 0, 1, 3);
    OK(ISA_NMS, 0, (NB, NS, IV(5), T(F32, (1), 0.5), T(F32, (1), 0.35)), I64, (3, 3), 0, 0, 1, 0, 0, 2, 0, 1, 3);
    /* no max: nothing */
    OK(ISA_NMS, 0, (NB, NS, IV0, FV0, FV0), I64, (0, 3), 0);
    /* center_point_box: [xc, yc, w, h]; the two boxes overlap by 1/3 */
    OK(ISA_NMS, ISA_OPT_CENTER_POINT_BOX, (T(F64, (1, 2, 4), 0, 0, 2, 2, 1, 0, 2, 2), T(F64, (1, 1, 2), 1, 2), IV(2),
       T(F32, (1), 0.3), FV0), I64, (1, 3), 0, 0, 1);
    OK(ISA_NMS, ISA_OPT_CENTER_POINT_BOX, (T(F64, (1, 2, 4), 0, 0, 2, 2, 1, 0, 2, 2), T(F64, (1, 1, 2), 1, 2), IV(2),
       T(F32, (1), 0.34), FV0), I64, (2, 3), 0, 0, 1, 0, 0, 0);
    FAILS(ISA_NMS, 0, (T(F32, (1, 6, 4)), T(F32, (1, 1, 5)), IV(1), FV0, FV0), SH,
          "nms: needs boxes [B, n, 4] and scores [B, C, n], got [1, 6, 4] and [1, 1, 5]");
    FAILS(ISA_NMS, 0, (T(F32, (1, 1, 4)), T(F64, (1, 1, 1)), IV(1), FV0, FV0), TY,
          "nms: boxes and scores must be f32 or f64 alike, got f32 [1, 1, 4] and f64 [1, 1, 1]");
    FAILS(ISA_NMS, 0, (T(F32, (1, 1, 4)), T(F32, (1, 1, 1)), IV(1, 2), FV0, FV0), SH,
          "nms: max_output_boxes_per_class must be a scalar, one element or empty, got i64 [2]");
}
END_TEST

/* ---- AFFINE_GRID, COL2IM ----------------------------------------------------------- */
START_TEST(test_affine_grid)
{
    /* identity: (x, y) with x = -1 + (2i + 1) / 3, y = -1 + (2j + 1) / 2 */
    OK(ISA_AFFINE_GRID, 0, (T(F32, (1, 2, 3), 1, 0, 0, 0, 1, 0), IV(1, 1, 2, 3)), F32, (1, 2, 3, 2), -2.0 / 3, -0.5, 0,
       -0.5, 2.0 / 3, -0.5, -2.0 / 3, 0.5, 0, 0.5, 2.0 / 3, 0.5);
    /* align_corners, x' = 2x + 1, y' = y - 1 */
    OK(ISA_AFFINE_GRID, ISA_OPT_AG_ALIGN_CORNERS, (T(F64, (1, 2, 3), 2, 0, 1, 0, 1, -1), IV(1, 1, 2, 3)), F64,
       (1, 2, 3, 2), -1, -2, 1, -2, 3, -2, -1, 0, 1, 0, 3, 0);
    /* 3-d: [1, 1, 1, 1, 2] (D, H = 1, W = 2), z' = z + x */
    OK(ISA_AFFINE_GRID, ISA_OPT_AG_ALIGN_CORNERS,
       (T(F32, (1, 3, 4), 1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1, 0), IV(1, 1, 1, 1, 2)), F32, (1, 1, 1, 2, 3), -1, -1, -2,
       1, -1, 0);
    FAILS(ISA_AFFINE_GRID, 0, (T(F32, (1, 2, 3)), IV(1, 1, 2)), SH,
          "affine_grid: needs size [N, C, H, W] or [N, C, D, H, W] and theta [N, k, k+1], got size of 3 entries and theta [1, 2, 3]");
}
END_TEST

START_TEST(test_col2im)
{
    /* block 2 sliding over 3: pixel 1 gets both blocks */
    OK(ISA_COL2IM, 0, (T(F32, (1, 2, 2), 1, 2, 3, 4), IV(3), IV(2), IV(1, 0, 0, 1)), F32, (1, 1, 3), 1, 5, 4);
    /* pads 1 + 1, stride 2: block element 0 of the first position falls in the pad */
    OK(ISA_COL2IM, 0, (T(F64, (1, 2, 2), 1, 2, 3, 4), IV(3), IV(2), IV(1, 1, 1, 2)), F64, (1, 1, 3), 3, 2, 4);
    /* 2-d, 2 channels, block [1, 2] over [1, 3] */
    OK(ISA_COL2IM, 0, (T(F32, (1, 4, 2), 1, 2, 3, 4, 5, 6, 7, 8), IV(1, 3), IV(1, 2), IV(1, 1, 0, 0, 0, 0, 1, 1)), F32,
       (1, 2, 1, 3), 1, 5, 4, 5, 13, 8);
    FAILS(ISA_COL2IM, 0, (T(F32, (1, 5, 4)), IV(1, 5), IV(1, 5), IV(1, 1, 0, 0, 0, 0, 1, 1)), SH,
          "col2im: x [1, 5, 4] does not hold blocks [1, 5] sliding 1 times over image [1, 5]");
    FAILS(ISA_COL2IM, 0, (T(F32, (1, 2, 2)), IV(3), IV(2), IV(0, 0, 0, 1)), AR,
          "col2im: bad geometry on axis 0: image 3, block 2, dilation 0, stride 1, pads 0 0");
}
END_TEST

/* ---- ROI_ALIGN, DEFORM_CONV ------------------------------------------------------------ */
#define RX T(F32, (1, 1, 4, 4), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#define RR T(F32, (2, 4), 0.5, 0.5, 2.5, 3.0, 1, 0, 3.7, 2.2)
#define RP T(F32, (4), 2, 2, 0, 1)
START_TEST(test_roi_align)
{
    /* ONNX's reference: adaptive sampling, 2 x 2 bins, both rois on batch 0 */
    const uint32_t HP = ISA_OPT_ROI_HALF_PIXEL, MX = ISA_OPT_ROI_MAX;
    OK(ISA_ROI_ALIGN, HP, (RX, RR, T(I64, (2), 0, 0), RP), F32, (2, 1, 2, 2), 3, 4, 8, 9, 1.8250000476837158,
       3.1750001907348633, 5.775000095367432, 7.125);
    OK(ISA_ROI_ALIGN, 0, (RX, RR, T(I64, (2), 0, 0), RP), F32, (2, 1, 2, 2), 5.5, 6.5, 10.5, 11.5, 3.875,
       5.043750286102295, 8.27500057220459, 9.443750381469727);
    OK(ISA_ROI_ALIGN, HP | MX, (RX, RR, T(I64, (2), 0, 0), RP), F32, (2, 1, 2, 2), 2.34375, 2.8125, 3.65625, 4.0625,
       1.3609375953674316, 2.58750057220459, 3.664062261581421, 5.282813549041748);
    OK(ISA_ROI_ALIGN, MX, (RX, RR, T(I64, (2), 0, 0), RP), F32, (2, 1, 2, 2), 4.0625, 4.875, 8.9375, 9.625,
       4.888124942779541, 5.77500057220459, 9.13437557220459, 10.17500114440918);
    FAILS(ISA_ROI_ALIGN, 0, (RX, RR, T(I64, (2), 0, 0), T(F32, (4), NAN, 2, 0, 1)), AR,
          "roi_align: params [nan, 2, 0, 1]: sizes and sampling ratio must be in 0..2^24");
    FAILS(ISA_ROI_ALIGN, 0, (RX, T(F32, (1, 4), 0, 0, 1e30, 1), T(I64, (1), 0), RP), AR,
          "roi_align: roi 0 is too large (or NaN) for adaptive sampling");
    FAILS(ISA_ROI_ALIGN, 0, (RX, RR, T(I64, (2), 0, 2), RP), AR, "roi_align: batch index 2 of roi 1 is outside x [1, 1, 4, 4]");
    FAILS(ISA_ROI_ALIGN, 0, (RX, T(F32, (2, 3)), T(I64, (2), 0, 0), RP), SH,
          "roi_align: needs x [N, C, H, W], rois [R, 4] and batch indices [R], got [1, 1, 4, 4], [2, 3] and [2]");
}
END_TEST

#define DX T(F32, (1, 1, 3, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8)
#define DW T(F32, (1, 1, 2, 2), 1, 2, 3, 4)
/* tap 0 of output (0, 0) moves down by 0.5; tap 1 of output (1, 1) left by 1.25 */
#define DO T(F32, (1, 8, 2, 2), 0.5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1.25, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
#define DP IV(1, 1, 0, 0, 0, 0, 1, 1, 1, 1)
START_TEST(test_deform_conv)
{
    /* ONNX's reference */
    OK(ISA_DEFORM_CONV, 0, (DX, DW, DO, T(F32, (0)), DP), F32, (1, 1, 2, 2), 28.5, 37, 57, 64.5);
    OK(ISA_DEFORM_CONV, 0,
       (DX, DW, DO, T(F32, (1, 4, 2, 2), 1, 0.5, 0, 2, 1, 0.5, 0, 2, 1, 0.5, 0, 2, 1, 0.5, 0, 2), DP), F32,
       (1, 1, 2, 2), 28.5, 18.5, 0, 129);
    /* no offsets: a plain convolution (by hand), 2 groups of one channel */
    OK(ISA_DEFORM_CONV, 0,
       (T(F64, (1, 2, 1, 2), 1, 2, 3, 4), T(F64, (2, 1, 1, 2), 1, 1, 1, -1), T(F64, (1, 4, 1, 1)), T(F64, (0)),
        IV(2, 1, 0, 0, 0, 0, 1, 1, 1, 1)), F64, (1, 2, 1, 1), 3, -1);
    FAILS(ISA_DEFORM_CONV, 0, (DX, DW, T(F32, (1, 6, 2, 2)), T(F32, (0)), DP), SH,
          "deform_conv: x [1, 1, 3, 3], w [1, 1, 2, 2] and offset [1, 6, 2, 2] do not agree with group 1, offset_group 1");
}
END_TEST

/* Every allocation of every kernel fails in turn: NOMEM with the message, nothing leaked. */
static void nm_case(int i, dev_value in[DEV_KMAX_IN], isa_op *op, int32_t *attr)
{
    for (int k = 0; k < DEV_KMAX_IN; k++)
        in[k] = NONE;
    *attr = 0;
    switch (i) {
    case 0: *op = ISA_RESIZE2; *attr = ISA_OPT_CUBIC; in[0] = T(F32, (2, 2), 1, 2, 3, 4); in[1] = T(F32, (2), 2, 2); in[2] = IV0; in[3] = P2(-0.75, 0); break;
    case 1: *op = ISA_GRID_SAMPLE; in[0] = GX; in[1] = GG; break;
    case 2: *op = ISA_NMS; in[0] = NB; in[1] = NS; in[2] = IV(2); in[3] = T(F32, (1), 0.5); in[4] = FV0; break;
    case 3: *op = ISA_AFFINE_GRID; in[0] = T(F32, (1, 2, 3), 1, 0, 0, 0, 1, 0); in[1] = IV(1, 1, 2, 3); break;
    case 4: *op = ISA_COL2IM; in[0] = T(F32, (1, 2, 2), 1, 2, 3, 4); in[1] = IV(3); in[2] = IV(2); in[3] = IV(1, 0, 0, 1); break;
    case 5: *op = ISA_ROI_ALIGN; in[0] = RX; in[1] = RR; in[2] = T(I64, (2), 0, 0); in[3] = RP; break;
    default: *op = ISA_DEFORM_CONV; in[0] = DX; in[1] = DW; in[2] = DO; in[3] = T(F32, (0)); in[4] = DP; break;
    }
}

START_TEST(test_nomem)
{
    for (long n = 0;; n++) {
        dev_value in[DEV_KMAX_IN], out;
        isa_op op;
        int32_t attr;
        ta.countdown = -1;
        nm_case(_i, in, &op, &attr);
        ta.countdown = n;
        tfvm_status st = callv(op, attr, in, &out);
        ta.countdown = -1;
        if (st == TFVM_OK) {
            ck_assert_msg(n > 0, "%s allocates nothing", isa_ops[op].name);
            dev_value_release(&out);
            break;
        }
        ck_assert_msg(st == TFVM_ERR_NOMEM, "%s, allocation %ld fails: %s (%s)", isa_ops[op].name, n,
                      tfvm_status_name(st), msg);
        ck_assert_msg(strstr(msg, "out of memory") != NULL, "%s: message '%s'", isa_ops[op].name, msg);
        ck_assert_msg(ta.live == 0, "%s, allocation %ld fails: %ld bytes leaked", isa_ops[op].name, n, ta.live);
    }
}
END_TEST

static void setup(void) { ta = (tu_alloc){.countdown = -1, .fresh_only = true}; }
static void teardown(void) { ck_assert_msg(ta.live == 0, "%ld bytes leaked", ta.live); }

static Suite *suite(void)
{
    Suite *s = suite_create("kernels_image");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_resize2);
    tcase_add_test(tc, test_grid_sample);
    tcase_add_test(tc, test_nms);
    tcase_add_test(tc, test_affine_grid);
    tcase_add_test(tc, test_col2im);
    tcase_add_test(tc, test_roi_align);
    tcase_add_test(tc, test_deform_conv);
    tcase_add_loop_test(tc, test_nomem, 0, 7);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(suite()); }
