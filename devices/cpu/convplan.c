/* devices/cpu/convplan.c — the one place that decides how the CPU backend
 * computes a convolution or a pool (convplan.h): the kernels of conv.c ask
 * it, and so does `tfvm check`. The thresholds are measured ones; the
 * comments say where. */
#include "devices/cpu/convplan.h"
#include "devices/cpu/sgemm.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* ---- Convolutions ---------------------------------------------------------------- */

/* The transposed product's rows per stack, at most (conv.c: "Few output
 * positions"). */
#define TPROD_ROWS 256
/* ... and at most this many multiply-adds: resnet's 512-channel 3x3 layers
 * on 7x7 at batch 8 run 2 images a product; 4 were slower in the network,
 * on OpenBLAS (11%) and on our kernel alike */
#define TPROD_MACS (INT64_C(1) << 28)
/* A column matrix of more than twice this many elements is made in panels
 * of output rows of at most this many (conv.c: "Big column matrices"). */
#define CONV_PANEL_FLOATS (INT64_C(1) << 16)

/* The wide product's column matrix (CKK x OH*Wp, made whole) at most this
 * many floats (2 MiB); past it im2col's panels of output rows, which the
 * product reads from L2: inception_v3's 5x5 layers (48 -> 64 channels on
 * 25x25, a 3.5 MB matrix) 1.28 -> 1.12 ms on one thread and 1.07 -> 0.67
 * ms on two (the panels share out), a 7x7 64 -> 64 on 28x28 4.6 -> 3.6
 * and 3.2 -> 2.1 ms; 1x7 and 7x1 192 -> 192 on 12x12 (1.1 MB) the same
 * either way */
#define WIDE_COL_MOST (INT64_C(1) << 19)

/* Unit strides and dilations, not 1x1-direct, output rows at least 4x the
 * window's width and a column matrix of at most WIDE_COL_MOST: the product
 * on the wide grid (conv.c: "Unit strides") */
static bool wide_fits(const dev_conv_shape *s, bool direct)
{
    const int64_t *p = s->p;
    return !direct && p[0] == 1 && p[1] == 1 && p[6] == 1 && p[7] == 1 && (s->KW - 1) * 4 <= s->OW &&
           s->Cg * s->KH * s->KW <= WIDE_COL_MOST / (s->OH * (s->W + p[3] + p[5]));
}

static bool plan_depthwise(const dev_conv_shape *s, dev_conv_plan *plan)
{
    const int64_t *p = s->p, G = p[8];
    dev_dw d = {.N = s->N, .C = s->C, .M = s->O / G, .H = s->H, .W = s->W, .KH = s->KH, .KW = s->KW, .OH = s->OH,
                .OW = s->OW, .sh = p[0], .sw = p[1], .pt = p[2], .pl = p[3], .dh = p[6], .dw = p[7]};
    if (s->dtype != TFVM_F32 || !dev_dw_plan(&d, s->Cg, G, plan->threads))
        return false;
    plan->kernel = DEV_CONV_DEPTHWISE;
    plan->dw = d;
    plan->items = dev_dw_items(&d);
    plan->x_last = s->lay == ISA_OPT_NHWC_IN && d.cb;
    return true;
}

/* f32, a depthwise 1x1 at unit strides without pads, one output channel
 * per input channel: y = x * w[c] (+ bias, activation), a batch norm on its
 * own as the optimizer spells it (compiler/opt.c). Each plane in one pass,
 * its epilogue while it is in L1; the depthwise kernel's channel blocks
 * took 2x the time (the copy into blocks and back) */
static bool plan_scale(const dev_conv_shape *s, dev_conv_plan *plan)
{
    const int64_t *p = s->p;
    if (s->dtype != TFVM_F32 || s->KH != 1 || s->KW != 1 || p[0] != 1 || p[1] != 1 || p[2] || p[3] || p[4] ||
        p[5] || s->Cg != 1 || p[8] != s->C || s->O != s->C)
        return false;
    plan->kernel = DEV_CONV_SCALE;
    plan->items = s->N * s->C;
    return true;
}

/* f32, one group, few input channels (a CNN's first layer): bands of
 * output rows without im2col (fewch.h). Before the unit-stride kernels
 * too where rows are 4 vectors or more and windows 27 taps or more:
 * against them (3 channels, 3x3, 16 to 64 output channels, 64x64 to
 * 224x224) 0.70-0.91x the time; on shorter rows or fewer taps 0.95-1.07x */
static bool plan_fewch(const dev_conv_shape *s, dev_conv_plan *plan)
{
    const int64_t *p = s->p;
    dev_fc f = {.N = s->N, .C = s->C, .H = s->H, .W = s->W, .O = s->O, .KH = s->KH, .KW = s->KW, .OH = s->OH,
                .OW = s->OW, .sh = p[0], .sw = p[1], .pt = p[2], .pl = p[3], .dh = p[6], .dw = p[7]};
    if (s->dtype != TFVM_F32 || p[8] != 1 || !dev_fc_plan(&f))
        return false;
    /* at unit strides the kernels below win with few taps or short rows
     * (a 1-channel 3x3 over 28x28, MNIST's first layer: 6% slower here) */
    if (p[0] == 1 && p[1] == 1 && (s->C * s->KH * s->KW < 27 || s->OW < 4 * f.vl))
        return false;

    plan->kernel = DEV_CONV_FEWCH;
    plan->fc = f;
    plan->items = dev_fc_items(&f);
    return true;
}

/* f32: a kernel without im2col (convf32.h), where one suits the shape */
static bool plan_f32(const dev_conv_shape *s, bool direct, dev_conv_plan *plan)
{
    const int64_t *p = s->p, G = p[8];
    if (s->dtype != TFVM_F32 || direct || s->Cg * s->KH * s->KW == 0)
        return false;
    if (!dev_cf_choose(&plan->cf, s->Cg, s->H, s->W, G, s->O / G, s->KH, s->KW, p, s->OH, s->OW))
        return false;
    plan->kernel = DEV_CONV_F32;
    return true;
}

/* Few output positions against many output channels: the transposed
 * product, images stacked */
static bool plan_tprod(const dev_conv_shape *s, bool wide, dev_conv_plan *plan)
{
    const int64_t G = s->p[8], Og = s->O / G, CKK = s->Cg * s->KH * s->KW, OHW = s->OH * s->OW;
    /* a strided window (not 1x1): up to a stack's rows (resnet's 3x3
     * stride-2 layers onto 14x14: 128 -> 256 channels 1.1 -> 0.85 ms at
     * batch 1, 9.3 -> 6.9 ms at batch 8, 256 -> 256 2.35 -> 1.54 ms,
     * against im2col's panels; onto 28x28, 784 rows, no better at batch 1
     * and worse at 8; a 1x1 stride-2 layer onto 14x14, 512 -> 1024
     * channels, 15% slower: its im2col is a light gather) */
    const bool strided = (s->p[0] > 1 || s->p[1] > 1) && s->KH * s->KW > 1;
    if (s->dtype != TFVM_F32 || G != 1 || wide || OHW >= (strided ? TPROD_ROWS + 1 : 64) || Og < 64 || CKK < 64)
        return false;
    /* the fewest stacks of at most TPROD_ROWS rows and TPROD_MACS
     * multiply-adds, their images evened out, on our kernel */
    int64_t own = dev_kmm_own_rows(Og, CKK);
    own = (own < TPROD_MACS / (Og * CKK) ? own : TPROD_MACS / (Og * CKK)) / OHW;
    const int64_t most = own < 1 ? 1 : own;
    const int64_t rows = TPROD_ROWS / OHW < most ? TPROD_ROWS : most * OHW;
    const int64_t stacks = (s->N * OHW + rows - 1) / rows;
    plan->kernel = DEV_CONV_TPROD;
    plan->timgs = (s->N + stacks - 1) / stacks;
    plan->items = (s->N + plan->timgs - 1) / plan->timgs;
    plan->split = plan->items < (int64_t)plan->threads;
    plan->gemm = dev_kmm_who(TFVM_F32, false, true, plan->timgs * OHW, Og, CKK, Og);
    return true;
}

/* A 1x1 layer whose result is wanted channels last (nhwc_out): the
 * positions of each image as the product's rows, written as they come */
static bool plan_nhwc_out(const dev_conv_shape *s, bool direct, dev_conv_plan *plan)
{
    if (s->lay != ISA_OPT_NHWC_OUT || s->dtype != TFVM_F32 || s->p[8] != 1 || !direct)
        return false;
    const int64_t OHW = s->OH * s->OW;
    plan->kernel = DEV_CONV_TPROD;
    plan->out_last = true;
    plan->timgs = 1;
    plan->items = s->N;
    plan->split = plan->items < (int64_t)plan->threads;
    plan->gemm = dev_kmm_who(TFVM_F32, true, true, OHW, s->O, s->C, s->O);
    return true;
}

/* A panel's output rows: CONV_PANEL_FLOATS' worth, but at least
 * PANEL_COLS output positions where the panel stays under 4x that (a
 * panel of 2 rows of 28, 56 positions, read all the weights again for
 * less than two tiles of the kernel's 32 columns: resnet50's 3x3 stride-2
 * layer onto 28x28, 128 channels, 1.98 -> 1.59 ms as panels of 8 rows);
 * of the rows up to twice that many, those whose positions leave the
 * least of the kernel's last tile of columns empty (8 rows of 28 fill 7
 * tiles). */
#define PANEL_COLS 192
/* Weights of more than this many floats (2 MiB, a core's L2) stream from
 * L3 or memory once for every panel: then a panel has at least as many
 * positions as the layer has output channels, however long its rows (DeepLabV3's
 * 3x3 layer dilated by 12, 960 -> 256 channels on 16x16: 8.8 MB of weights
 * read for each of 16 panels of one row, 17 ms; as two of 8 rows 9.3) */
#define PANEL_WEIGHTS_BIG (INT64_C(1) << 19)
static int64_t panel_rows(int64_t O, int64_t CKK, int64_t OH, int64_t OW)
{
    const int64_t NR = dev_sgemm_nr(), fit = CONV_PANEL_FLOATS / (CKK * OW);
    int64_t most = 4 * CONV_PANEL_FLOATS / (CKK * OW);
    if (O * CKK > PANEL_WEIGHTS_BIG && most < (O + OW - 1) / OW)
        most = (O + OW - 1) / OW;
    int64_t r0 = (PANEL_COLS + OW - 1) / OW;
    if (r0 > most)
        r0 = most;
    if (r0 < fit)
        r0 = fit;
    if (r0 < 1)
        r0 = 1;
    if (r0 > OH)
        r0 = OH;
    int64_t best = r0, waste = NR;
    for (int64_t r = r0; r <= 2 * r0 && r <= OH && (r == r0 || r <= most); r++) {
        const int64_t w = (NR - r * OW % NR) % NR * 1024 / (r * OW);
        if (w < waste)
            best = r, waste = w;
    }
    return best;
}

/* im2col's column matrix past CONV_PANEL_FLOATS: panels of output rows.
 * Also a smaller one where there are fewer images (and groups) than
 * threads: whole, one thread made it while the others waited for the
 * product (resnet18's 1x1 stride-2 layer onto 28x28 on 2 threads 90-98 ->
 * 82 us, as two panels of 14 rows) */
static bool plan_panels(const dev_conv_shape *s, bool direct, bool wide, dev_conv_plan *plan)
{
    const int64_t G = s->p[8], CKK = s->Cg * s->KH * s->KW, OW = s->OW;
    if (direct || wide || (CKK * s->OH * OW <= 2 * CONV_PANEL_FLOATS && s->N * G >= (int64_t)plan->threads))
        return false;
    plan->kernel = DEV_CONV_PANELS;
    plan->prows = panel_rows(s->O / G, CKK, s->OH, OW);
    /* One image's panels on the threads: rows evened out over them, panels
     * of up to twice the size (resnet's 3x3 stride-2 layer onto 28x28, 2
     * threads: 7 panels of 4 rows kept a thread idle an eighth of the
     * time, 4 of 7 rows 6% faster; resnet50's 1x1 stride-2 onto 28x28 had
     * 3 panels of 9 rows and one of 1) */
    const int64_t threads = plan->threads > 1 ? plan->threads : 1;
    if (s->N * G == 1 && (s->OH + plan->prows - 1) / plan->prows < 4 * threads)
        for (int64_t k = 1;; k++) {
            const int64_t rows = (s->OH + threads * k - 1) / (threads * k);
            if (rows * CKK * OW <= 2 * CONV_PANEL_FLOATS || rows <= plan->prows) {
                plan->prows = rows;
                break;
            }
        }
    plan->panels = (s->OH + plan->prows - 1) / plan->prows;
    plan->items = s->N * G * plan->panels;
    /* fewer panels than threads (a 1-D convolution, one row of outputs):
     * each panel's product split over them instead */
    plan->split = plan->items < (int64_t)plan->threads;
    plan->gemm = dev_kmm_who(s->dtype, false, false, s->O / G, plan->prows * OW, CKK, s->OH * OW);
    return true;
}

void dev_conv_plan_make(const dev_conv_shape *s, unsigned threads, dev_conv_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->threads = threads ? threads : 1;
    const int64_t *p = s->p, G = p[8];
    if (s->N == 0 || s->O == 0 || s->OH == 0 || s->OW == 0) {
        plan->kernel = DEV_CONV_EMPTY;
        return;
    }
    /* (image, group) pairs in parallel; fewer pairs than threads run one
     * after another, each product split over the threads */
    plan->items = s->N * G;
    plan->split = plan->items < (int64_t)plan->threads;
    /* A 1x1 window with unit stride and no padding reads x as it is. */
    const bool direct = s->KH == 1 && s->KW == 1 && p[0] == 1 && p[1] == 1 && !p[2] && !p[3] && !p[4] && !p[5];
    const bool wide = wide_fits(s, direct);
    plan->direct = direct;
    if (plan_nhwc_out(s, direct, plan) || plan_scale(s, plan) || plan_depthwise(s, plan) || plan_fewch(s, plan) ||
        plan_f32(s, direct, plan) || plan_tprod(s, wide, plan) || plan_panels(s, direct, wide, plan))
        return;
    plan->kernel = direct ? DEV_CONV_DIRECT : wide ? DEV_CONV_WIDE : DEV_CONV_IM2COL;
    const int64_t ncols = wide ? s->OH * (s->W + p[3] + p[5]) : s->OH * s->OW;
    plan->gemm = dev_kmm_who(s->dtype, false, false, s->O / G, ncols, s->Cg * s->KH * s->KW, ncols);
}

/* ---- Pools ------------------------------------------------------------------------- */

static atomic_bool pool_forced;

void dev_pool_force_grid(bool on) { atomic_store(&pool_forced, on); }

static atomic_int pool_path;

void dev_pool_force(int path) { atomic_store(&pool_path, path); }

void dev_pool_plan_make(uint8_t dtype, bool avg, const int64_t *xdims, const int64_t *p, int64_t OH, int64_t OW,
                        unsigned threads, dev_pool_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->threads = threads ? threads : 1;
    const int path = dtype == TFVM_F32 ? dev_kpath(atomic_load(&pool_path)) : 2; /* the f32 kernels' vector build */
    const int64_t N = xdims[0], C = xdims[1], H = xdims[2], W = xdims[3];
    const int64_t kh = p[0], kw = p[1], sh = p[2], sw = p[3], pt = p[4], pl = p[5], pb = p[6], pr = p[7];
    const int64_t dh = p[8], dw = p[9];
    const bool ceil_mode = p[10], cip = p[11];
    if (N == 0 || C == 0 || OH == 0 || OW == 0) {
        plan->kernel = DEV_POOL_EMPTY;
        return;
    }
    if (kh == 2 && kw == 2 && sh == 2 && sw == 2 && !pt && !pl && !pb && !pr && dh == 1 && dw == 1 && !ceil_mode &&
        dev_kfloat(dtype)) {
        plan->kernel = DEV_POOL_2X2;
        plan->avx512 = path == 0;
        plan->avx2 = path == 1;
        plan->planes = N * C;
        plan->plane = OH * OW;
        return;
    }
    if (dtype == TFVM_F32 && !avg && kh == 3 && kw == 3 && sh == 2 && sw == 2 && dh == 1 && dw == 1 && path < 2 &&
        !atomic_load(&pool_forced)) {
        plan->kernel = DEV_POOL_3X3;
        plan->avx512 = path == 0;
        plan->avx2 = path == 1;
        plan->planes = N * C;
        plan->plane = OH * OW;
        return;
    }
    if (dtype == TFVM_F32 && !avg) {
        /* every other f32 max pool through the depthwise grid (dwconv.c) */
        dev_dw d = {.N = N, .C = C, .M = 1, .H = H, .W = W, .KH = kh, .KW = kw, .OH = OH, .OW = OW, .sh = sh,
                    .sw = sw, .pt = pt, .pl = pl, .dh = dh, .dw = dw, .max = true};
        if (dev_dw_plan(&d, 1, C, plan->threads)) {
            plan->kernel = DEV_POOL_GRID;
            plan->dw = d;
            return;
        }
    }
    /* the padded plane (conv.c) holds every window whole; within 16 M
     * elements, divisors exact in f32 */
    const int64_t Hp = (OH - 1) * sh + kh, Wp = (OW - 1) * sw + kw;
    if (avg && dh == 1 && dw == 1 && Hp <= (INT64_C(1) << 24) / Wp && kh * kw <= (INT64_C(1) << 24)) {
        plan->kernel = DEV_POOL_AVG;
        plan->Hp = Hp;
        plan->Wp = Wp;
        plan->avx512 = path == 0 && sh == 1 && sw == 1;
        plan->avx2 = path < 2 && !plan->avx512;
        plan->planes = N * C;
        plan->plane = OH * OW;
        return;
    }
    plan->kernel = dh != 1 || dw != 1 || ceil_mode || cip ? DEV_POOL_GENERAL : DEV_POOL_WINDOWS;
}

/* ---- In words ---------------------------------------------------------------------- */

typedef struct sbuf {
    char *buf;
    size_t size, len;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) UT_PRINTF(2, 3);
static void put(sbuf *b, const char *fmt, ...)
{
    if (b->len >= b->size)
        return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(b->buf + b->len, b->size - b->len, fmt, ap);
    va_end(ap);
    b->len = n < 0 ? b->size : b->len + (size_t)n > b->size ? b->size : b->len + (size_t)n;
}

static const char *dw_path_name(const dev_dw *d)
{
    static const char *const names[3] = {"AVX-512", "AVX2", "portable"};
    return names[d->path >= 0 && d->path < 3 ? d->path : 2];
}

static const char *gemm_name(dev_kmm_code c)
{
    return c == DEV_KMM_OWN ? "own kernel" : c == DEV_KMM_BLAS ? "OpenBLAS" : "integer loop";
}

/* What a depthwise plan's items are (dev_dw_items), `planes` on the wide grid */
static const char *dw_items_words(const dev_dw *d, const char *planes)
{
    return d->strips ? "row strips of channel blocks" : d->cb ? "channel blocks" : planes;
}

/* Whether conv.c's loop over a depthwise plan's items splits at all on
 * `threads` threads (a small layer runs whole on one) */
static bool dw_splits(const dev_dw *d, unsigned threads)
{
    return dev_kpieces(dev_dw_items(d), dev_dw_item_cost(d), DEV_KPAR_MACS, threads) > 1;
}

static void dw_words(sbuf *b, const dev_dw *d)
{
    if (d->cb)
        put(b, "channel blocks of %lld, %s", (long long)d->cb, dw_path_name(d));
    else
        put(b, "plane by plane on a wide grid, %s", dw_path_name(d));
}

/* What one F32 plan's parts of an image are (dev_cf_parts) */
static const char *cf_parts_name(const dev_cf *cf)
{
    return cf->kind == DEV_CF_WINO ? (cf->nob ? "output channel blocks" : "tile rows")
           : cf->kind == DEV_CF_FLAT ? "pixel runs"
                                     : "output rows";
}

/* FUSED_CONV2D's channels-last options: whether the kernel reads or writes that layout itself */
static void layout_words(sbuf *b, const dev_conv_plan *plan, const dev_conv_shape *s)
{
    if (s->lay & ISA_OPT_NHWC_IN)
        put(b, plan->x_last ? "; x channels last, read as it lies" : "; x channels last, transposed first");
    if (s->lay & ISA_OPT_NHWC_OUT)
        put(b, plan->out_last ? "; result channels last, as the product writes it"
                              : "; result transposed to channels last");
}

static void conv_kernel_words(sbuf *b, const dev_conv_plan *plan, const dev_conv_shape *s, bool batch_known)
{
    const int64_t G = s->p[8];
    switch (plan->kernel) {
    case DEV_CONV_EMPTY: put(b, "empty result, nothing to compute"); return;
    case DEV_CONV_DEPTHWISE:
        put(b, "depthwise, ");
        dw_words(b, &plan->dw);
        layout_words(b, plan, s);
        return;
    case DEV_CONV_SCALE:
        put(b, "depthwise 1x1, each plane scaled");
        return;
    case DEV_CONV_FEWCH:
        put(b, "few input channels, bands of %lld output rows, %s", (long long)plan->fc.rows,
            dev_fc_isa_name(&plan->fc));
        return;
    case DEV_CONV_F32:
        put(b, "%s, %s", plan->cf.kind == DEV_CF_WINO ? "Winograd F(2x2, 3x3)"
                         : plan->cf.kind == DEV_CF_FLAT ? "direct f32 kernel, flat"
                         : plan->cf.kind == DEV_CF_CHAN ? "direct f32 kernel, output channels in vectors"
                                                        : "direct f32 kernel by rows",
            dev_cf_isa_name(&plan->cf));
        break;
    case DEV_CONV_TPROD:
        if (plan->out_last)
            put(b, "transposed product y = x^T @ w^T, 1 image a product");
        else if (batch_known)
            put(b, "transposed product y = col^T @ w^T, %lld image%s a product", (long long)plan->timgs,
                plan->timgs == 1 ? "" : "s");
        else
            put(b, "transposed product y = col^T @ w^T, images stacked");
        break;
    case DEV_CONV_PANELS:
        put(b, "im2col in panels of %lld output row%s", (long long)plan->prows, plan->prows == 1 ? "" : "s");
        break;
    case DEV_CONV_DIRECT: put(b, "1x1 product w @ x"); break;
    case DEV_CONV_WIDE:
        put(b, "wide product w @ col on %lld x %lld", (long long)s->OH, (long long)(s->W + s->p[3] + s->p[5]));
        break;
    default: put(b, "im2col, w @ col"); break;
    }
    if (plan->kernel != DEV_CONV_F32)
        put(b, ", %s", gemm_name(plan->gemm));
    if (G > 1)
        put(b, ", %lld groups", (long long)G);
    layout_words(b, plan, s);
}

void dev_conv_par_loop(const dev_conv_plan *plan, const dev_conv_shape *s, int64_t *n, int64_t *cost, int64_t *least)
{
    const int64_t G = s->p[8], CKK = s->Cg * s->KH * s->KW, OHW = s->OH * s->OW;
    const int64_t macs = s->O / G * OHW * (CKK ? CKK : 1);
    *n = plan->items;
    *least = DEV_KPAR_MACS;
    switch (plan->kernel) {
    case DEV_CONV_DEPTHWISE: *cost = dev_dw_item_cost(&plan->dw); break;
    case DEV_CONV_FEWCH: *cost = s->N * s->O * OHW * CKK / (*n ? *n : 1); break;
    case DEV_CONV_SCALE: *cost = OHW, *least = DEV_CONV_SCALE_LEAST; break;
    case DEV_CONV_TPROD: *cost = macs * plan->timgs; break;
    case DEV_CONV_PANELS: *cost = macs / plan->panels; break;
    case DEV_CONV_F32:
        /* the f32 kernels run an image's multiply-adds some 2x faster than
         * the gemm (Winograd does fewer): half the gemm's least per chunk */
        if (plan->split)
            *n = dev_cf_parts(&plan->cf), *cost = macs / *n;
        else
            *cost = macs, *least = DEV_KPAR_MACS / 2;
        break;
    default: *cost = macs; break;
    }
}

/* Whether the plan's work splits over its threads at all (a small layer
 * runs whole on the thread that fires it): a gemm plan that splits each
 * image, its product by matmul.c's rule; any other, its parallel loop by
 * dev_kgrain's (conv.c runs both) */
static bool plan_splits(const dev_conv_plan *plan, const dev_conv_shape *s)
{
    if (!plan->split || plan->kernel == DEV_CONV_F32) {
        int64_t n, cost, least;
        dev_conv_par_loop(plan, s, &n, &cost, &least);
        return dev_kpieces(n, cost, least, plan->threads) > 1;
    }
    const int64_t G = s->p[8], Og = s->O / G, CKK = s->Cg * s->KH * s->KW, OHW = s->OH * s->OW;
    dev_kmm mm = {.dtype = s->dtype, .M = Og, .N = OHW, .K = CKK};
    bool packed = false;
    if (plan->kernel == DEV_CONV_TPROD)
        mm = (dev_kmm){.dtype = s->dtype, .tb = true, .M = plan->timgs * OHW, .N = Og, .K = CKK}, packed = true;
    else if (plan->kernel == DEV_CONV_WIDE)
        mm.N = s->OH * (s->W + s->p[3] + s->p[5]);
    return dev_kmm_splits(&mm, packed, plan->threads);
}

static void conv_thread_words(sbuf *b, const dev_conv_plan *plan, const dev_conv_shape *s)
{
    const long long items = (long long)plan->items;
    if (plan->threads == 1) {
        put(b, "; 1 thread");
        return;
    }
    if (!plan_splits(plan, s)) {
        put(b, "; 1 of %u threads: too little work to split", plan->threads);
        return;
    }
    put(b, "; %u threads: ", plan->threads);
    const char *what = s->p[8] > 1 ? "image-group pairs" : "images";
    switch (plan->kernel) {
    case DEV_CONV_DEPTHWISE:
        put(b, "%lld %s in parallel", items, dw_items_words(&plan->dw, "output planes"));
        break;
    case DEV_CONV_F32:
        if (plan->split)
            put(b, "each image's %lld %s shared out", (long long)dev_cf_parts(&plan->cf), cf_parts_name(&plan->cf));
        else
            put(b, "%lld %s in parallel", items, what);
        break;
    case DEV_CONV_TPROD:
    case DEV_CONV_PANELS: {
        const bool panels = plan->kernel == DEV_CONV_PANELS;
        if (plan->split)
            put(b, "each %s split", panels ? "panel's product" : "product");
        else
            put(b, "%lld %s in parallel", items, panels ? "panels" : "products");
        break;
    }
    case DEV_CONV_FEWCH: put(b, "%lld bands in parallel", items); break;
    case DEV_CONV_SCALE: put(b, "%lld planes in parallel", items); break;
    default:
        if (plan->split)
            put(b, "each product split");
        else
            put(b, "%lld %s in parallel", items, what);
        break;
    }
}

const char *dev_conv_plan_str(const dev_conv_plan *plan, const dev_conv_shape *s, bool batch_known, char *buf,
                              size_t size)
{
    sbuf b = {buf, size, 0};
    if (size)
        buf[0] = '\0';
    conv_kernel_words(&b, plan, s, batch_known);
    if (batch_known && plan->kernel != DEV_CONV_EMPTY)
        conv_thread_words(&b, plan, s);
    return buf;
}

const char *dev_pool_plan_str(const dev_pool_plan *plan, bool batch_known, char *buf, size_t size)
{
    sbuf b = {buf, size, 0};
    if (size)
        buf[0] = '\0';
    switch (plan->kernel) {
    case DEV_POOL_EMPTY: put(&b, "empty result, nothing to compute"); break;
    case DEV_POOL_2X2:
        put(&b, "2x2 windows at stride 2, %s", plan->avx512 ? "AVX-512" : plan->avx2 ? "AVX2" : "portable");
        break;
    case DEV_POOL_3X3: put(&b, "3x3 max windows at stride 2, %s", plan->avx512 ? "AVX-512" : "AVX2"); break;
    case DEV_POOL_GRID:
        put(&b, "depthwise max, ");
        dw_words(&b, &plan->dw);
        break;
    case DEV_POOL_AVG:
        put(&b, "average windows on a padded plane, %s", plan->avx512 ? "AVX-512" : plan->avx2 ? "AVX2" : "portable");
        break;
    case DEV_POOL_GENERAL: put(&b, "general window loop"); break;
    default: put(&b, "window loop"); break;
    }
    const bool parallel = plan->kernel == DEV_POOL_2X2 || plan->kernel == DEV_POOL_3X3 || plan->kernel == DEV_POOL_AVG ||
                          plan->kernel == DEV_POOL_GRID;
    if (plan->kernel == DEV_POOL_EMPTY)
        return buf;
    if (plan->threads == 1 || !parallel) {
        put(&b, "; 1 thread");
        return buf;
    }
    if (!batch_known) /* how it splits depends on the batch */
        return buf;
    const bool splits = plan->kernel == DEV_POOL_GRID
                            ? dw_splits(&plan->dw, plan->threads)
                            : dev_kpieces(plan->planes, plan->plane, DEV_POOL2_LEAST, plan->threads) > 1;
    if (!splits)
        put(&b, "; 1 of %u threads: too little work to split", plan->threads);
    else
        put(&b, "; %u threads: %s in parallel", plan->threads,
            plan->kernel == DEV_POOL_GRID ? dw_items_words(&plan->dw, "planes") : "planes");
    return buf;
}

/* ---- Counting, for tests ------------------------------------------------------------ */

static atomic_bool counting;
static atomic_uint_least64_t counts[DEV_CONV_KERNELS];

void dev_conv_count(bool on)
{
    for (int k = 0; k < DEV_CONV_KERNELS; k++)
        atomic_store(&counts[k], 0);
    atomic_store(&counting, on);
}

uint64_t dev_conv_counted(dev_conv_kernel k) { return atomic_load(&counts[k]); }

void dev_conv_took(dev_conv_kernel k)
{
    if (atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add(&counts[k], 1);
}
