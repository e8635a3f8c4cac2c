/* devices/cpu/tensor_ops.c — dev_cpu_tensor: checks the call, turns operands
 * into views and hands them to the op's kernel; and the helpers the kernels
 * share (devices/cpu/kern.h): messages, results, scratch memory, nd copies. */
#include "devices/cpu/vec.h"
#include "devices/cpu/kern.h"
#include "devices/tensor.h"
#include "isa/shape.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static const dev_kernel kernels[ISA_OP_COUNT];

/* The first word of k's messages: its op in lower case ("tensor" for an op
 * without a kernel), written only when a message is, not on every call. */
static const char *kname(const dev_kctx *k, char buf[24])
{
    if ((unsigned)k->op >= ISA_OP_COUNT || !kernels[k->op])
        return "tensor";
    size_t i = 0;
    for (const char *s = isa_ops[k->op].name; *s && i + 1 < 24; s++)
        buf[i++] = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
    buf[i] = '\0';
    return buf;
}

tfvm_status dev_kfail(dev_kctx *k, tfvm_status code, const char *fmt, ...)
{
    if (k->msg && k->msg_size) {
        char name[24];
        int n = snprintf(k->msg, k->msg_size, "%s: ", kname(k, name));
        if (n >= 0 && (size_t)n < k->msg_size) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(k->msg + n, k->msg_size - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return code;
}

const char *dev_kdims(int rank, const int64_t *dims, char *buf)
{
    size_t len = 0;
    buf[len++] = '[';
    for (int i = 0; i < rank; i++) {
        int n = snprintf(buf + len, DEV_KSHAPE - len, "%s%lld", i ? ", " : "", (long long)dims[i]);
        if (n < 0 || (size_t)n >= DEV_KSHAPE - len - 1)
            break; /* cannot happen for rank <= 8; keep the buffer sound */
        len += (size_t)n;
    }
    buf[len++] = ']';
    buf[len] = '\0';
    return buf;
}

const char *dev_kshape(const dev_kview *v, char *buf) { return dev_kdims(v->rank, v->dims, buf); }

const char *dev_kdesc(const dev_kview *v, char *buf)
{
    size_t n = (size_t)snprintf(buf, DEV_KSHAPE, "%s ", tfvm_dtype_name((tfvm_dtype)v->dtype));
    char s[DEV_KSHAPE];
    snprintf(buf + n, DEV_KSHAPE - n, "%s", dev_kshape(v, s));
    return buf;
}

bool dev_kcount(int rank, const int64_t *dims, int64_t *count)
{
    int64_t c = 1;
    bool zero = false;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return false;
        if (dims[i] == 0)
            zero = true;
        else if (c > INT64_MAX / dims[i])
            return false;
        else
            c *= dims[i];
    }
    *count = zero ? 0 : c;
    return true;
}

tfvm_status dev_kvec(dev_kctx *k, const dev_kview *v, const char *what, int64_t *out, int max,
                     int *n)
{
    char s[DEV_KSHAPE];
    if (v->dtype != TFVM_I64 || v->rank != 1)
        return dev_kfail(k, TFVM_ERR_TYPE, "%s must be an i64 vector, got %s", what, dev_kdesc(v, s));
    if (v->count > max)
        return dev_kfail(k, TFVM_ERR_SHAPE, "%s has %lld entries, at most %d allowed", what,
                         (long long)v->count, max);
    if (v->count)
        memcpy(out, v->data, (size_t)v->count * sizeof(int64_t));
    *n = (int)v->count;
    return TFVM_OK;
}

tfvm_status dev_krule(dev_kctx *k, const dev_kview *in, uint32_t n, uint32_t vals_of, isa_shape *o)
{
    isa_shape x[DEV_KMAX_IN], r;
    int64_t vals[DEV_KMAX_IN][16];
    for (uint32_t i = 0; i < n && i < DEV_KMAX_IN; i++) {
        const dev_kview *v = &in[i];
        x[i] = (isa_shape){.dtype = v->dtype, .rank = (int8_t)v->rank, .n_vals = -1, .vals = vals[i]};
        memcpy(x[i].dims, v->dims, sizeof(int64_t) * (size_t)v->rank);
        bool ints = v->dtype == TFVM_I32 || v->dtype == TFVM_I64;
        if ((vals_of >> i & 1) && ints && v->rank <= 1 && v->count <= 16) {
            x[i].n_vals = (int)v->count;
            for (int64_t e = 0; e < v->count; e++)
                dev_kget_i64(v, e, &vals[i][e]);
        }
    }
    char why[200];
    if (n <= DEV_KMAX_IN && isa_shape_rule(k->op, k->attr, x, n, &r, why, sizeof why) != TFVM_OK && why[0])
        return dev_kfail(k, TFVM_ERR_SHAPE, "%s", why);
    if (o)
        *o = r;
    return TFVM_OK;
}

tfvm_status dev_kaxis(dev_kctx *k, const dev_kview *v, int *axis)
{
    int32_t a = (int32_t)k->attr;
    int64_t r = a < 0 ? (int64_t)a + v->rank : a;
    if (r < 0 || r >= v->rank) {
        char s[DEV_KSHAPE];
        return dev_kfail(k, TFVM_ERR_SHAPE, "axis %d out of range for shape %s", (int)a,
                         dev_kshape(v, s));
    }
    *axis = (int)r;
    return TFVM_OK;
}

tfvm_status dev_kresult(dev_kctx *k, uint8_t dtype, int rank, const int64_t *dims, dev_value *r,
                        void **data)
{
    if (k->shape_only) { /* the kernel stops here: its checks are done */
        k->shaped = true;
        k->shape_dtype = dtype;
        k->shape_rank = rank;
        memcpy(k->shape_dims, dims, (size_t)rank * sizeof *dims);
        return TFVM_ERR_INTERNAL;
    }
    if (rank == 0) {
        *r = (dev_value){.dtype = dtype};
        *data = &r->u;
        return TFVM_OK;
    }
    tfvm_tensor *t = dev_tensor_alloc(k->alloc, (tfvm_dtype)dtype, rank, dims);
    if (!t)
        return dev_kfail(k, TFVM_ERR_NOMEM, "out of memory");
    *r = (dev_value){.dtype = dtype, .is_tensor = 1, .u.t = t};
    *data = t->data;
    return TFVM_OK;
}

tfvm_tensor *dev_kview_overwritable(const dev_kctx *k, const dev_kview *v)
{
    tfvm_tensor *t = (tfvm_tensor *)(uintptr_t)v->t;
    return !k->shape_only && t && v->data == t->data && t->count == v->count && dev_tensor_mine(t) &&
                   !atomic_load_explicit(&t->prep, memory_order_acquire)
               ? t
               : NULL;
}

void *dev_ktemp(dev_kctx *k, size_t count, size_t size)
{
    size_t n;
    void *p = NULL;
    if (ut_mul_ok(count, size, &n))
        p = ut_alloc(k->alloc, n ? n : 1);
    if (!p)
        dev_kfail(k, TFVM_ERR_NOMEM, "out of memory");
    return p;
}

void dev_ktemp_free(dev_kctx *k, void *p, size_t count, size_t size)
{
    size_t n = count * size;
    ut_free(k->alloc, p, n ? n : 1);
}

void dev_kstrides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t acc = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = acc;
        acc *= dims[i];
    }
}

bool dev_kget_i64(const dev_kview *v, int64_t i, int64_t *out)
{
    double f;
    switch (v->dtype) {
    case TFVM_BOOL:
    case TFVM_U8: *out = ((const uint8_t *)v->data)[i]; return true;
    case TFVM_I8: *out = ((const int8_t *)v->data)[i]; return true;
    case TFVM_I32: *out = ((const int32_t *)v->data)[i]; return true;
    case TFVM_I64: *out = ((const int64_t *)v->data)[i]; return true;
    case TFVM_F32: f = ((const float *)v->data)[i]; break;
    default: f = ((const double *)v->data)[i]; break;
    }
    /* -2^63 <= f < 2^63, or the conversion is undefined */
    if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0))
        return false;
    *out = (int64_t)f;
    return true;
}

double dev_kget_f64(const dev_kview *v, int64_t i)
{
    switch (v->dtype) {
    case TFVM_BOOL:
    case TFVM_U8: return ((const uint8_t *)v->data)[i];
    case TFVM_I8: return ((const int8_t *)v->data)[i];
    case TFVM_I32: return ((const int32_t *)v->data)[i];
    case TFVM_I64: return (double)((const int64_t *)v->data)[i];
    case TFVM_F32: return ((const float *)v->data)[i];
    default: return ((const double *)v->data)[i];
    }
}

tfvm_status dev_kscalar_i64(dev_kctx *k, const dev_kview *v, const char *what, bool any_numeric,
                            int64_t *out)
{
    char s[DEV_KSHAPE];
    const bool integer = v->dtype == TFVM_I32 || v->dtype == TFVM_I64 || v->dtype == TFVM_U8 ||
                         v->dtype == TFVM_I8;
    if ((v->rank != 0 && !(v->rank == 1 && v->count == 1)) ||
        !(integer || (any_numeric && dev_kfloat(v->dtype))))
        return dev_kfail(k, TFVM_ERR_TYPE, "%s must be %s scalar, got %s", what,
                         any_numeric ? "a numeric" : "an integer", dev_kdesc(v, s));
    if (!dev_kget_i64(v, 0, out))
        return dev_kfail(k, TFVM_ERR_ARGUMENT, "%s %g is not a valid integer", what, dev_kget_f64(v, 0));
    return TFVM_OK;
}

/* ---- nd copy ------------------------------------------------------------------ */
#define KCOPY_TILE 32

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* d[i][j] = s[j][i] for 4-byte elements, i < rows, j < cols (d's rows dr
 * apart, s's sc apart): 8 x 8 blocks transposed in registers (eight rows of
 * s loaded, unpacked by pairs, by quads, then halves swapped), the edges
 * one by one. A channels-first value to channels last (ConvNeXt's permutes
 * around each block's LayerNorm, [1, 96, 56, 56] -> [1, 56, 56, 96]) had
 * gone element by element at 3-4 ns each. */
__attribute__((target("avx2"))) static void transpose32_avx2(uint32_t *d, int64_t dr, const uint32_t *s, int64_t sc,
                                                             int64_t rows, int64_t cols)
{
    int64_t i0 = 0;
    for (; i0 + 8 <= rows; i0 += 8) {
        int64_t j0 = 0;
        for (; j0 + 8 <= cols; j0 += 8) {
            __m256 r[8], t[8];
            for (int k = 0; k < 8; k++) /* row j0 + k of s: d's column j0 + k, rows i0.. */
                r[k] = _mm256_loadu_ps((const float *)(s + (j0 + k) * sc + i0));
            for (int k = 0; k < 8; k += 2) {
                t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
                t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
            }
            for (int k = 0; k < 8; k += 4) {
                r[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
                r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
                r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
                r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
            }
            for (int k = 0; k < 4; k++) {
                _mm256_storeu_ps((float *)(d + (i0 + k) * dr + j0), _mm256_permute2f128_ps(r[k], r[k + 4], 0x20));
                _mm256_storeu_ps((float *)(d + (i0 + k + 4) * dr + j0), _mm256_permute2f128_ps(r[k], r[k + 4], 0x31));
            }
        }
        for (int64_t i = i0; i < i0 + 8; i++)
            for (int64_t j = j0; j < cols; j++)
                d[i * dr + j] = s[j * sc + i];
    }
    for (int64_t i = i0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            d[i * dr + j] = s[j * sc + i];
}

static bool have_avx2(void) { return __builtin_cpu_supports("avx2"); }
#else
static void transpose32_avx2(uint32_t *d, int64_t dr, const uint32_t *s, int64_t sc, int64_t rows, int64_t cols)
{
    (void)d, (void)dr, (void)s, (void)sc, (void)rows, (void)cols;
}
static bool have_avx2(void) { return false; }
#endif

static atomic_bool transpose_portable;

void dev_kcopy_force_portable(bool on) { atomic_store(&transpose_portable, on); }

/* One 2-d block rows x cols; elements of esz bytes. */
static void kcopy2(char *dst, int64_t dr, int64_t dc, const char *src, int64_t sr, int64_t sc,
                   int64_t rows, int64_t cols, size_t esz)
{
    if (esz == 4 && dc == 1 && sr == 1 && rows >= 8 && cols >= 8 && have_avx2() &&
        !atomic_load_explicit(&transpose_portable, memory_order_relaxed)) {
        /* a transposition in tiles of 64 x 64 (16 KB each way, in L1) */
        for (int64_t i0 = 0; i0 < rows; i0 += 64)
            for (int64_t j0 = 0; j0 < cols; j0 += 64)
                transpose32_avx2((uint32_t *)(void *)dst + i0 * dr + j0, dr, (const uint32_t *)(const void *)src + j0 * sc + i0,
                                 sc, rows - i0 < 64 ? rows - i0 : 64, cols - j0 < 64 ? cols - j0 : 64);
        return;
    }
    if (dc == 1 && sc == 1) {
        for (int64_t i = 0; i < rows; i++)
            memcpy(dst + (ptrdiff_t)(i * dr) * (ptrdiff_t)esz, src + (ptrdiff_t)(i * sr) * (ptrdiff_t)esz,
                   (size_t)cols * esz);
        return;
    }
#define KCOPY_LOOP(T)                                                                      \
    do {                                                                                   \
        T *d = (T *)(void *)dst;                                                           \
        const T *s = (const T *)(const void *)src;                                         \
        for (int64_t i0 = 0; i0 < rows; i0 += KCOPY_TILE)                                  \
            for (int64_t j0 = 0; j0 < cols; j0 += KCOPY_TILE) {                            \
                int64_t i1 = i0 + KCOPY_TILE < rows ? i0 + KCOPY_TILE : rows;              \
                int64_t j1 = j0 + KCOPY_TILE < cols ? j0 + KCOPY_TILE : cols;              \
                for (int64_t i = i0; i < i1; i++)                                          \
                    for (int64_t j = j0; j < j1; j++)                                      \
                        d[i * dr + j * dc] = s[i * sr + j * sc];                           \
            }                                                                              \
    } while (0)
    switch (esz) {
    case 1: KCOPY_LOOP(uint8_t); break;
    case 4: KCOPY_LOOP(uint32_t); break;
    default: KCOPY_LOOP(uint64_t); break;
    }
#undef KCOPY_LOOP
}

void dev_kcopy(void *dst, const int64_t *ds, const void *src, const int64_t *ss, int rank,
               const int64_t *dims, size_t esz)
{
    /* Drop size-1 dims, merge a dim into the previous one when both sides
     * step through the pair as one run; a size-0 dim means nothing to do. */
    int64_t d[TFVM_MAX_RANK + 2], a[TFVM_MAX_RANK + 2], b[TFVM_MAX_RANK + 2];
    int m = 0;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 0)
            return;
        if (dims[i] == 1)
            continue;
        if (m > 0 && a[m - 1] == ds[i] * dims[i] && b[m - 1] == ss[i] * dims[i]) {
            d[m - 1] *= dims[i];
            a[m - 1] = ds[i];
            b[m - 1] = ss[i];
            continue;
        }
        d[m] = dims[i];
        a[m] = ds[i];
        b[m] = ss[i];
        m++;
    }
    /* At least two dims (rows, cols) for kcopy2: pad in front with 1s. */
    while (m < 2) {
        memmove(d + 1, d, (size_t)m * sizeof *d);
        memmove(a + 1, a, (size_t)m * sizeof *a);
        memmove(b + 1, b, (size_t)m * sizeof *b);
        d[0] = 1, a[0] = 0, b[0] = 0;
        m++;
    }
    if (m == 2 && d[1] == 1) { /* everything was size 1: one element */
        memcpy(dst, src, esz);
        return;
    }
    int64_t idx[TFVM_MAX_RANK] = {0};
    int64_t od = 0, os = 0;
    char *dp = dst;
    const char *sp = src;
    for (;;) {
        kcopy2(dp + (ptrdiff_t)od * (ptrdiff_t)esz, a[m - 2], a[m - 1], sp + (ptrdiff_t)os * (ptrdiff_t)esz,
               b[m - 2], b[m - 1], d[m - 2], d[m - 1], esz);
        int j = m - 3;
        for (; j >= 0; j--) {
            od += a[j];
            os += b[j];
            if (++idx[j] < d[j])
                break;
            od -= a[j] * d[j];
            os -= b[j] * d[j];
            idx[j] = 0;
        }
        if (j < 0)
            break;
    }
}

/* ---- Dispatch ------------------------------------------------------------------- */
static const dev_kernel kernels[ISA_OP_COUNT] = {
    [ISA_MATMUL] = dev_cpu_matmul,       [ISA_CONV2D] = dev_cpu_conv2d,
    [ISA_MAXPOOL] = dev_cpu_pool,        [ISA_AVGPOOL] = dev_cpu_pool,
    [ISA_SOFTMAX] = dev_cpu_softmax,     [ISA_REDUCE_SUM] = dev_cpu_reduce,
    [ISA_REDUCE_MEAN] = dev_cpu_reduce,  [ISA_REDUCE_MAX] = dev_cpu_reduce,
    [ISA_ARGMAX] = dev_cpu_argmax,       [ISA_RESHAPE] = dev_cpu_reshape,
    [ISA_TRANSPOSE] = dev_cpu_transpose, [ISA_CONCAT] = dev_cpu_concat,
    [ISA_SLICE] = dev_cpu_slice,         [ISA_GATHER] = dev_cpu_gather,
    [ISA_PAD] = dev_cpu_pad,             [ISA_SHAPE] = dev_cpu_shape,       [ISA_WORKERS] = dev_cpu_workers,
    [ISA_FILL] = dev_cpu_fill,           [ISA_RANGE] = dev_cpu_range,
    [ISA_LOG_SOFTMAX] = dev_cpu_softmax,     [ISA_REDUCE_MIN] = dev_cpu_reduce,
    [ISA_REDUCE_PROD] = dev_cpu_reduce,  [ISA_ARGMIN] = dev_cpu_argmax,
    [ISA_SQUEEZE] = dev_cpu_squeeze,     [ISA_UNSQUEEZE] = dev_cpu_unsqueeze,
    [ISA_FLATTEN] = dev_cpu_flatten,     [ISA_EXPAND] = dev_cpu_expand,
    [ISA_TILE] = dev_cpu_tile,           [ISA_STRIDED_SLICE] = dev_cpu_strided_slice,
    [ISA_GATHER_ELEMENTS] = dev_cpu_gather_elements, [ISA_TOPK] = dev_cpu_topk,
    [ISA_TRILU] = dev_cpu_trilu,         [ISA_CUMSUM] = dev_cpu_cumsum,
    [ISA_ONEHOT] = dev_cpu_onehot,       [ISA_RESIZE] = dev_cpu_resize, [ISA_RESIZE2] = dev_cpu_resize2,
    [ISA_GRID_SAMPLE] = dev_cpu_grid_sample, [ISA_NMS] = dev_cpu_nms, [ISA_AFFINE_GRID] = dev_cpu_affine_grid,
    [ISA_COL2IM] = dev_cpu_col2im, [ISA_ROI_ALIGN] = dev_cpu_roi_align,
    [ISA_DEFORM_CONV] = dev_cpu_deform_conv,
    [ISA_PADV] = dev_cpu_padv,           [ISA_LRN] = dev_cpu_lrn,
    [ISA_LAYER_NORM] = dev_cpu_layer_norm, [ISA_RMS_NORM] = dev_cpu_layer_norm,
    [ISA_STACK_PUT] = dev_cpu_stack_put,     [ISA_SCATTER_ROWS] = dev_cpu_scatter_rows,
    [ISA_LSTM_CELL_C] = dev_cpu_rnn_cell, [ISA_LSTM_CELL_H] = dev_cpu_rnn_cell, [ISA_GRU_CELL] = dev_cpu_rnn_cell,
    [ISA_LSTM_STEP] = dev_cpu_rnn_step, [ISA_GRU_STEP] = dev_cpu_rnn_step,
    [ISA_BITCAST] = dev_cpu_bitcast,     [ISA_NONZERO] = dev_cpu_nonzero,
    [ISA_UNIQUE] = dev_cpu_unique,       [ISA_UNIQUE_INDEX] = dev_cpu_unique_index,
    [ISA_DET] = dev_cpu_det,
    [ISA_FUSED_MATMUL] = dev_cpu_matmul, [ISA_FUSED_CONV2D] = dev_cpu_conv2d,
    [ISA_FUSED_CONV2D_ADD] = dev_cpu_conv2d,
};

static const bool table_gated[ISA_OP_COUNT] = {
    [ISA_MATMUL] = true, [ISA_CONV2D] = true, [ISA_RANGE] = true,
    [ISA_FUSED_MATMUL] = true, [ISA_FUSED_CONV2D] = true, [ISA_FUSED_CONV2D_ADD] = true,
};

/* dev_cpu_tensor and dev_cpu_tensor_shape: k set up, views made, the kernel
 * called. Device tensors are refused but in shape-only mode, where their
 * data is NULL (inputs of host_mask must be on the host even then). */
static tfvm_status tensor_call(dev_kctx *k, const dev_value *in, uint32_t n_in, uint32_t host_mask, dev_value *out)
{
    const isa_op op = k->op;
    if ((unsigned)op >= ISA_OP_COUNT || !kernels[op])
        return dev_kfail(k, TFVM_ERR_INTERNAL, "op %u is not a tensor op", (unsigned)op);
    if (n_in != (uint32_t)isa_ops[op].n_in)
        return dev_kfail(k, TFVM_ERR_INTERNAL, "takes %d inputs, got %u", isa_ops[op].n_in, n_in);
    dev_kview v[DEV_KMAX_IN];
    if (n_in > DEV_KMAX_IN)
        return dev_kfail(k, TFVM_ERR_INTERNAL, "takes %u inputs, at most %d supported", n_in, DEV_KMAX_IN);
    for (uint32_t j = 0; j < n_in; j++) {
        const dev_value *x = &in[j];
        if (x->dead || !isa_dtype_valid(x->dtype))
            return dev_kfail(k, TFVM_ERR_INTERNAL, "input %u has no value", j);
        if (ISA_TYPES_STORE >> x->dtype & 1) /* no tensor kernel computes on them */
            return dev_kfail(k, TFVM_ERR_TYPE, "not defined on %s (a storage dtype: CAST it to a wide one)",
                             tfvm_dtype_name((tfvm_dtype)x->dtype));
        if (!x->is_tensor) { /* (field by field, as below) */
            v[j].dtype = x->dtype;
            v[j].rank = 0;
            v[j].count = 1;
            v[j].data = &x->u;
            v[j].t = NULL;
            memset(v[j].dims, 0, sizeof v[j].dims);
            continue;
        }
        const tfvm_tensor *t = x->u.t;
        /* placement copies device data to the host first */
        if (t->device != 0 && (!k->shape_only || (host_mask >> j & 1)))
            return dev_kfail(k, TFVM_ERR_INTERNAL, "input %u lives on a device, not the host", j);
        /* field by field: a compound literal cleared the view first (a
         * `rep stos` of 96 bytes; a tenth of a small recurrent step) */
        v[j].dtype = t->dtype;
        v[j].rank = t->rank;
        v[j].count = t->count;
        v[j].data = t->device ? NULL : t->data;
        v[j].t = t;
        memcpy(v[j].dims, t->dims, sizeof v[j].dims);
    }
    /* ops.def's types gate input 0's dtype for the kernels whose dtype switch
     * ends in a `default:` of another width (u8/i8 must not reach it). The
     * others check every operand's dtype themselves, with their own messages,
     * and may take more dtypes than the table lets the compiler through. */
    if (table_gated[op] && !isa_takes(op, v[0].dtype))
        return dev_kfail(k, TFVM_ERR_TYPE, "not defined on %s%s", tfvm_dtype_name((tfvm_dtype)v[0].dtype),
                         isa_ops[op].types == ISA_TYPES_FLT ? " (floats only)" : "");
    dev_value r;
    tfvm_status st = kernels[op](k, v, &r);
    if (st == TFVM_OK)
        *out = r;
    return st;
}

int dev_cpu_in_place(isa_op op)
{
    if (op == ISA_STACK_PUT || op == ISA_RESHAPE || op == ISA_SQUEEZE || op == ISA_UNSQUEEZE || op == ISA_FLATTEN ||
        op == ISA_TRANSPOSE || op == ISA_SOFTMAX)
        return 0;
    return op == ISA_FUSED_CONV2D_ADD ? 4 : -1;
}

tfvm_status dev_cpu_tensor(isa_op op, uint32_t attr, const dev_value *in, uint32_t n_in, dev_value *out,
                           const tfvm_allocator *alloc, char *msg, size_t msg_size)
{
    dev_kctx k = {.op = op, .attr = attr, .alloc = alloc, .msg = msg, .msg_size = msg_size};
    return tensor_call(&k, in, n_in, 0, out);
}

tfvm_status dev_cpu_tensor_shape(isa_op op, uint32_t attr, const dev_value *in, uint32_t n_in, uint32_t host_mask,
                                 uint8_t *dtype, int *rank, int64_t *dims, char *msg, size_t msg_size)
{
    dev_kctx k = {.op = op, .attr = attr, .msg = msg, .msg_size = msg_size, .shape_only = true};
    dev_value r;
    tfvm_status st = tensor_call(&k, in, n_in, host_mask, &r);
    if (st == TFVM_OK) { /* a kernel that made no result (none should) */
        dev_value_release(&r);
        return ut_msg(msg, msg_size, TFVM_ERR_INTERNAL, "%s: no result shape", isa_ops[op].name);
    }
    if (!k.shaped)
        return st;
    *dtype = k.shape_dtype;
    *rank = k.shape_rank;
    memcpy(dims, k.shape_dims, (size_t)k.shape_rank * sizeof *dims);
    return TFVM_OK;
}
