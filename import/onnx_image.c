/* import/onnx_image.c — ONNX image ops beyond issue 10's list: Resize in the
 * modes RESIZE leaves out (cubic, antialias, half_pixel_symmetric,
 * tf_crop_and_resize, keep_aspect_ratio_policy), lowered to RESIZE2. */
#include "import/onnx_int.h"

#include <string.h>

/* Whether Resize node N needs RESIZE2 (a mode, transformation or policy
 * that RESIZE does not have). */
static bool img_needs_resize2(ox_node *N)
{
    char b[40];
    if (N->X->opset < 11)
        return false;
    if (strcmp(ox_attr_s(N, "mode", "nearest", b, sizeof b), "cubic") == 0 || ox_attr_i(N, "antialias", 0))
        return true;
    const char *ct = ox_attr_s(N, "coordinate_transformation_mode", "half_pixel", b, sizeof b);
    if (strcmp(ct, "half_pixel_symmetric") == 0 || strcmp(ct, "tf_crop_and_resize") == 0)
        return true;
    return strcmp(ox_attr_s(N, "keep_aspect_ratio_policy", "stretch", b, sizeof b), "stretch") != 0;
}

bool ox_resize2(ox_node *N)
{
    if (!img_needs_resize2(N))
        return false;
    ox_val *x = ox_need(N, 0);
    char mb[40], cb[40], nb[40], kb[40];
    uint32_t opts = 0;
    const char *mode = ox_attr_s(N, "mode", "nearest", mb, sizeof mb);
    if (strcmp(mode, "linear") == 0)
        opts |= ISA_OPT_LINEAR;
    else if (strcmp(mode, "cubic") == 0)
        opts |= ISA_OPT_CUBIC;
    else if (strcmp(mode, "nearest") != 0)
        ox_unsupported(N, "mode '%s'", mode);
    static const struct {
        const char *name;
        uint32_t bit;
    } coords[] = {{"half_pixel", 0},
                  {"asymmetric", ISA_OPT_ASYMMETRIC},
                  {"align_corners", ISA_OPT_ALIGN_CORNERS},
                  {"pytorch_half_pixel", ISA_OPT_PYTORCH_HALF_PIXEL},
                  {"tf_half_pixel_for_nn", ISA_OPT_TF_HALF_PIXEL_NN},
                  {"half_pixel_symmetric", ISA_OPT_HALF_PIXEL_SYMMETRIC},
                  {"tf_crop_and_resize", ISA_OPT_TF_CROP_AND_RESIZE}},
      rounds[] = {{"round_prefer_floor", 0},
                  {"round_prefer_ceil", ISA_OPT_PREFER_CEIL},
                  {"floor", ISA_OPT_NEAREST_FLOOR},
                  {"ceil", ISA_OPT_NEAREST_CEIL}};
    const char *ct = ox_attr_s(N, "coordinate_transformation_mode", "half_pixel", cb, sizeof cb);
    size_t i = 0;
    while (i < UT_COUNTOF(coords) && strcmp(coords[i].name, ct) != 0)
        i++;
    if (i == UT_COUNTOF(coords))
        ox_unsupported(N, "coordinate_transformation_mode '%s'", ct);
    opts |= coords[i].bit;
    if (!(opts & (ISA_OPT_LINEAR | ISA_OPT_CUBIC))) {
        const char *nm = ox_attr_s(N, "nearest_mode", "round_prefer_floor", nb, sizeof nb);
        for (i = 0; i < UT_COUNTOF(rounds) && strcmp(rounds[i].name, nm) != 0;)
            i++;
        if (i == UT_COUNTOF(rounds))
            ox_unsupported(N, "nearest_mode '%s'", nm);
        opts |= rounds[i].bit;
        if (ox_attr_i(N, "antialias", 0))
            ox_fail(N, TFVM_ERR_FORMAT, "antialias is not defined for mode nearest");
    } else if (ox_attr_i(N, "antialias", 0)) {
        opts |= ISA_OPT_ANTIALIAS;
    }
    if (ox_attr_i(N, "exclude_outside", 0))
        opts |= ISA_OPT_EXCLUDE_OUTSIDE;
    /* the rank matters only to axes and to the aspect policy's axis mask */
    char kb0[40];
    const bool keep_any = strcmp(ox_attr_s(N, "keep_aspect_ratio_policy", "stretch", kb0, sizeof kb0), "stretch") != 0;
    int r = ox_attr(N, "axes") || keep_any ? ox_need_rank(N, x) : x->rank;
    int64_t ax[TFVM_MAX_RANK];
    int na = -1;
    if (ox_attr(N, "axes")) {
        na = ox_attr_ints(N, "axes", ax, TFVM_MAX_RANK);
        if (na < 0 || na > r)
            ox_fail(N, TFVM_ERR_FORMAT, "axes lists %d axes of a rank-%d input", na, r);
        for (int j = 0; j < na; j++)
            ax[j] = ox_norm_axis(N, ax[j], r, false);
    }
    const char *kp = ox_attr_s(N, "keep_aspect_ratio_policy", "stretch", kb, sizeof kb);
    if (strcmp(kp, "stretch") != 0) {
        if (strcmp(kp, "not_larger") == 0)
            opts |= ISA_OPT_NOT_LARGER;
        else if (strcmp(kp, "not_smaller") == 0)
            opts |= ISA_OPT_NOT_SMALLER;
        else
            ox_unsupported(N, "keep_aspect_ratio_policy '%s'", kp);
        for (int j = 0; j < (na < 0 ? r : na); j++)
            opts |= ISA_OPT_KEEP_AXIS0 << (na < 0 ? j : ax[j]);
    }
    ox_val *roi = ox_opt_in(N, 1), sc, sz;
    ox_val axes_v = na >= 0 ? ox_i64s(N, na, ax) : (ox_val){0};
    ox_resize_targets(N, x, ox_opt_in(N, 2), ox_opt_in(N, 3), na >= 0 ? &axes_v : NULL, r, &sc, &sz);
    /* params: cubic_coeff_a, extrapolation_value, then the roi of every axis
     * (starts, ends) for tf_crop_and_resize */
    const float head[2] = {ox_attr_f(N, "cubic_coeff_a", -0.75f), ox_attr_f(N, "extrapolation_value", 0)};
    int64_t two = 2;
    ox_val p = {0};
    p.dtype = TFVM_F32;
    ox_unknown_shape(&p, 1);
    p.dims[0] = 2;
    float *hp = cc_alloc(N->C, sizeof head);
    memcpy(hp, head, sizeof head);
    p.v = cc_const_new(N->C, N->b, TFVM_F32, 1, &two, hp, sizeof head, false);
    if ((opts & ISA_OPT_TF_CROP_AND_RESIZE) && roi && !(roi->rank == 1 && roi->dims[0] == 0)) {
        ox_val rf = ox_to_dtype(N, roi, TFVM_F32);
        if (na >= 0) {
            /* roi lists starts then ends of the listed axes; the others: [0, 1] */
            int64_t lo[TFVM_MAX_RANK], hi[TFVM_MAX_RANK];
            for (int j = 0; j < na; j++) {
                lo[j] = j;
                hi[j] = na + j;
            }
            ox_val li = ox_i64s(N, na, lo), hii = ox_i64s(N, na, hi);
            ox_val s0 = ox_op2(N, ISA_GATHER, 0, &rf, &li);
            ox_val e0 = ox_op2(N, ISA_GATHER, 0, &rf, &hii);
            ox_val one = ox_fscalar(N, TFVM_F32, 1);
            ox_val st = ox_spread_axes(N, &s0, &axes_v, r, TFVM_F32);
            ox_val ed = ox_ew2(N, ISA_SUB, &e0, &one);
            ed = ox_spread_axes(N, &ed, &axes_v, r, TFVM_F32);
            ed = ox_ew2(N, ISA_ADD, &ed, &one);
            rf = ox_op2(N, ISA_CONCAT, 0, &st, &ed);
        }
        p = ox_op2(N, ISA_CONCAT, 0, &p, &rf);
    } else if (opts & ISA_OPT_TF_CROP_AND_RESIZE) {
        ox_fail(N, TFVM_ERR_FORMAT, "tf_crop_and_resize needs a roi input");
    }
    const ox_val *in4[4] = {x, &sc, &sz, &p};
    N->out[0] = ox_op_rank(N, ISA_RESIZE2, opts, 4, in4, x->rank);
    return true;
}

/* GridSample-16 (bilinear, bicubic) and -20 (linear, cubic): GRID_SAMPLE. */
static void op_GridSample(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *g = ox_need(N, 1);
    char mb[40], pb[40];
    uint32_t opts = 0;
    const char *mode = ox_attr_s(N, "mode", N->X->opset >= 20 ? "linear" : "bilinear", mb, sizeof mb);
    if (strcmp(mode, "nearest") == 0)
        opts |= ISA_OPT_GS_NEAREST;
    else if (strcmp(mode, "cubic") == 0 || strcmp(mode, "bicubic") == 0)
        opts |= ISA_OPT_GS_CUBIC;
    else if (strcmp(mode, "linear") != 0 && strcmp(mode, "bilinear") != 0)
        ox_unsupported(N, "mode '%s'", mode);
    const char *pm = ox_attr_s(N, "padding_mode", "zeros", pb, sizeof pb);
    if (strcmp(pm, "border") == 0)
        opts |= ISA_OPT_GS_BORDER;
    else if (strcmp(pm, "reflection") == 0)
        opts |= ISA_OPT_GS_REFLECTION;
    else if (strcmp(pm, "zeros") != 0)
        ox_unsupported(N, "padding_mode '%s'", pm);
    if (ox_attr_i(N, "align_corners", 0))
        opts |= ISA_OPT_GS_ALIGN_CORNERS;
    if (x->dtype != TFVM_F32 && x->dtype != TFVM_F64)
        ox_unsupported(N, "input dtype %s (f32 and f64 only)", tfvm_dtype_name((tfvm_dtype)x->dtype));
    ox_val gg = ox_to_dtype(N, g, x->dtype == TFVM_F64 && g->dtype == TFVM_F64 ? TFVM_F64 : TFVM_F32);
    ox_val y = ox_op_rank(N, ISA_GRID_SAMPLE, opts, 2, (const ox_val *const[]){x, &gg}, x->rank);
    if (x->rank >= 0 && g->rank == x->rank) {
        y.dims[0] = x->dims[0];
        y.dims[1] = x->dims[1];
        for (int i = 2; i < x->rank; i++)
            y.dims[i] = g->dims[i - 1];
    }
    N->out[0] = y;
}

/* NonMaxSuppression-10/11: NMS; absent optional inputs become empty vectors. */
static void op_NonMaxSuppression(ox_node *N)
{
    ox_val *bx = ox_need(N, 0), *sc = ox_need(N, 1);
    if (bx->dtype != TFVM_F32 && bx->dtype != TFVM_F64)
        ox_unsupported(N, "boxes of dtype %s (f32 and f64 only)", tfvm_dtype_name((tfvm_dtype)bx->dtype));
    ox_val s = ox_to_dtype(N, sc, bx->dtype);
    ox_val *m = ox_opt_in(N, 2), *io = ox_opt_in(N, 3), *st = ox_opt_in(N, 4);
    ox_val mv = m ? ox_to_dtype(N, m, TFVM_I64) : ox_empty_vec(N, TFVM_I64);
    ox_val iv = io ? ox_to_dtype(N, io, TFVM_F32) : ox_empty_vec(N, TFVM_F32);
    ox_val sv = st ? ox_to_dtype(N, st, TFVM_F32) : ox_empty_vec(N, TFVM_F32);
    const ox_val *in5[5] = {bx, &s, &mv, &iv, &sv};
    uint32_t opts = ox_attr_i(N, "center_point_box", 0) ? ISA_OPT_CENTER_POINT_BOX : 0;
    ox_val y = ox_op_rank(N, ISA_NMS, opts, 5, in5, 2);
    y.dims[1] = 3;
    N->out[0] = y;
}

/* AffineGrid-20: AFFINE_GRID. */
static void op_AffineGrid(ox_node *N)
{
    ox_val *th = ox_need(N, 0);
    ox_val sz = ox_as_i64_vec(N, ox_need(N, 1));
    if (th->dtype != TFVM_F32 && th->dtype != TFVM_F64)
        ox_unsupported(N, "theta of dtype %s (f32 and f64 only)", tfvm_dtype_name((tfvm_dtype)th->dtype));
    int64_t n = ox_count_of(&sz);
    /* the result [N, D1..Dk, k] has as many axes as size has entries, k + 2 */
    int rank = n == 4 || n == 5 ? (int)n : th->rank == 3 && (th->dims[1] == 2 || th->dims[1] == 3) ? (int)th->dims[1] + 2 : -1;
    uint32_t opts = ox_attr_i(N, "align_corners", 0) ? ISA_OPT_AG_ALIGN_CORNERS : 0;
    N->out[0] = ox_op_rank(N, ISA_AFFINE_GRID, opts, 2, (const ox_val *const[]){th, &sz}, rank);
}

/* Col2Im-18: COL2IM, the attributes as one i64 vector (defaults: 1, 0, 1). */
static void op_Col2Im(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    ox_val img = ox_as_i64_vec(N, ox_need(N, 1)), blk = ox_as_i64_vec(N, ox_need(N, 2));
    int64_t k = ox_count_of(&img);
    if (k < 1 || k > TFVM_MAX_RANK - 2)
        ox_unsupported(N, "an image_shape whose length is not known when compiling");
    int64_t p[4 * TFVM_MAX_RANK], a[2 * TFVM_MAX_RANK];
    for (int i = 0; i < k; i++)
        p[i] = p[3 * k + i] = 1, p[k + i] = p[2 * k + i] = 0;
    static const char *const names[3] = {"dilations", "pads", "strides"};
    for (int w = 0; w < 3; w++) {
        int n = ox_attr_ints(N, names[w], a, 2 * TFVM_MAX_RANK);
        if (n < 0)
            continue;
        if (n != (w == 1 ? 2 : 1) * k)
            ox_fail(N, TFVM_ERR_FORMAT, "%s has %d entries, not %lld", names[w], n, (long long)((w == 1 ? 2 : 1) * k));
        memcpy(p + (w == 0 ? 0 : w == 1 ? k : 3 * k), a, (size_t)n * sizeof *a);
    }
    ox_val pv = ox_i64s(N, 4 * (int)k, p);
    const ox_val *in4[4] = {x, &img, &blk, &pv};
    N->out[0] = ox_op_rank(N, ISA_COL2IM, 0, 4, in4, (int)k + 2);
}

/* RoiAlign-10/16: ROI_ALIGN (opset 10 has no coordinate_transformation_mode:
 * its rois are output_half_pixel). */
static void op_RoiAlign(ox_node *N)
{
    ox_val *x = ox_need(N, 0);
    if (x->dtype != TFVM_F32 && x->dtype != TFVM_F64)
        ox_unsupported(N, "input dtype %s (f32 and f64 only)", tfvm_dtype_name((tfvm_dtype)x->dtype));
    ox_val ro = ox_to_dtype(N, ox_need(N, 1), x->dtype);
    ox_val bi = ox_as_i64_vec(N, ox_need(N, 2));
    char mb[40], cb[40];
    uint32_t opts = 0;
    const char *mode = ox_attr_s(N, "mode", "avg", mb, sizeof mb);
    if (strcmp(mode, "max") == 0)
        opts |= ISA_OPT_ROI_MAX;
    else if (strcmp(mode, "avg") != 0)
        ox_unsupported(N, "mode '%s'", mode);
    const char *ct = ox_attr_s(N, "coordinate_transformation_mode", N->X->opset >= 16 ? "half_pixel" : "output_half_pixel",
                               cb, sizeof cb);
    if (strcmp(ct, "half_pixel") == 0)
        opts |= ISA_OPT_ROI_HALF_PIXEL;
    else if (strcmp(ct, "output_half_pixel") != 0)
        ox_unsupported(N, "coordinate_transformation_mode '%s'", ct);
    const int64_t oh = ox_attr_i(N, "output_height", 1), ow = ox_attr_i(N, "output_width", 1);
    const int64_t sr = ox_attr_i(N, "sampling_ratio", 0);
    if (oh < 1 || ow < 1 || oh > (1 << 24) || ow > (1 << 24) || sr < 0 || sr > (1 << 24))
        ox_fail(N, TFVM_ERR_FORMAT, "output size %lld x %lld or sampling_ratio %lld out of range", (long long)oh,
                (long long)ow, (long long)sr);
    float *pp = cc_alloc(N->C, 4 * sizeof(float));
    pp[0] = (float)oh;
    pp[1] = (float)ow;
    pp[2] = (float)sr;
    pp[3] = ox_attr_f(N, "spatial_scale", 1);
    int64_t four = 4;
    ox_val p = {0};
    p.dtype = TFVM_F32;
    ox_unknown_shape(&p, 1);
    p.dims[0] = 4;
    p.v = cc_const_new(N->C, N->b, TFVM_F32, 1, &four, pp, 4 * sizeof(float), false);
    const ox_val *in4[4] = {x, &ro, &bi, &p};
    ox_val y = ox_op_rank(N, ISA_ROI_ALIGN, opts, 4, in4, 4);
    y.dims[2] = oh;
    y.dims[3] = ow;
    N->out[0] = y;
}

/* DeformConv-19 (2-d): DEFORM_CONV, then the bias per channel. */
static void op_DeformConv(ox_node *N)
{
    ox_val *x = ox_need(N, 0), *w = ox_need(N, 1), *of = ox_need(N, 2);
    ox_val *b = ox_opt_in(N, 3), *m = ox_opt_in(N, 4);
    if (x->rank != 4)
        ox_unsupported(N, "an input of rank %d (2-d images [N, C, H, W] only)", x->rank);
    if (x->dtype != TFVM_F32 && x->dtype != TFVM_F64)
        ox_unsupported(N, "input dtype %s (f32 and f64 only)", tfvm_dtype_name((tfvm_dtype)x->dtype));
    int64_t p[10] = {ox_attr_i(N, "group", 1), ox_attr_i(N, "offset_group", 1), 0, 0, 0, 0, 1, 1, 1, 1}, a[8];
    int n = ox_attr_ints(N, "pads", a, 8);
    if (n >= 0 && n != 4)
        ox_fail(N, TFVM_ERR_FORMAT, "pads has %d entries, not 4", n);
    if (n == 4)
        memcpy(p + 2, a, 4 * sizeof *a);
    if ((n = ox_attr_ints(N, "strides", a, 8)) >= 0 && n != 2)
        ox_fail(N, TFVM_ERR_FORMAT, "strides has %d entries, not 2", n);
    if (n == 2)
        memcpy(p + 6, a, 2 * sizeof *a);
    if ((n = ox_attr_ints(N, "dilations", a, 8)) >= 0 && n != 2)
        ox_fail(N, TFVM_ERR_FORMAT, "dilations has %d entries, not 2", n);
    if (n == 2)
        memcpy(p + 8, a, 2 * sizeof *a);
    ox_val pv = ox_i64s(N, 10, p);
    ox_val wv = ox_to_dtype(N, w, x->dtype), ov = ox_to_dtype(N, of, x->dtype);
    ox_val mv = m ? ox_to_dtype(N, m, x->dtype) : ox_empty_vec(N, x->dtype);
    const ox_val *in5[5] = {x, &wv, &ov, &mv, &pv};
    ox_val y = ox_op_rank(N, ISA_DEFORM_CONV, 0, 5, in5, 4);
    if (b) {
        ox_val bv = ox_to_dtype(N, b, x->dtype);
        bv = ox_per_channel(N, &bv, 4);
        y = ox_ew2(N, ISA_ADD, &y, &bv);
    }
    N->out[0] = y;
}

#define R(name, since) {#name, since, op_##name}
const ox_opdef ox_image_ops[] = {
    R(AffineGrid, 20),
    R(Col2Im, 18),
    R(DeformConv, 19),
    R(GridSample, 16),
    R(NonMaxSuppression, 10),
    R(RoiAlign, 10),
};
#undef R
const size_t ox_n_image_ops = UT_COUNTOF(ox_image_ops);
