/* test/unit/fake_cuda.c — a host stand-in for libtfvm_cuda.so (built as
 * $(BUILD)/test/libtfvm_fakecuda.so, loaded through TFVM_CUDA_LIB), so the
 * device layer is tested where no GPU exists. */
/* Its "device pointers" have bit 62 set: the CPU touching one faults at once,
 * and every function checks that it got device and host pointers where it
 * should. Elements are computed by devices/cuda/elem.h and tens.h, as on
 * the GPU; GEMM is cuBLAS's column-major contract, argument checks included.
 *   FAKE_CUDA_NODEVICE=1   init fails with "no device found"
 *   FAKE_CUDA_MEM=N        at most N bytes of device memory at once */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/cuda/tens.h"

#define FAKE_TAG ((uintptr_t)1 << 62)

static atomic_llong fake_live;     /* device bytes allocated now */
static atomic_llong fake_allocs;   /* cudaMalloc calls that succeeded */
static long long fake_limit = -1;  /* FAKE_CUDA_MEM */

/* Counters for the tests (found with dlsym). */
__attribute__((visibility("default"))) long long fake_cuda_live(void) { return atomic_load(&fake_live); }
__attribute__((visibility("default"))) long long fake_cuda_allocs(void) { return atomic_load(&fake_allocs); }

static bool is_dev(const void *p) { return ((uintptr_t)p & FAKE_TAG) != 0; }
static void *host_of(const void *p) { return (void *)((uintptr_t)p & ~FAKE_TAG); }

static int fail(char *msg, size_t ms, const char *what)
{
    snprintf(msg, ms, "%s", what);
    return 1;
}

static int fake_init(char *msg, size_t ms)
{
    const char *e = getenv("FAKE_CUDA_NODEVICE");
    if (e && *e == '1')
        return fail(msg, ms, "no device found");
    e = getenv("FAKE_CUDA_MEM");
    if (e && *e)
        fake_limit = atoll(e);
    return 0;
}

static void fake_describe(char *buf, size_t size) { snprintf(buf, size, "fake CUDA device in host memory, for tests"); }

/* Each block remembers its size in a 16-byte prefix, for the live count. */
static int fake_alloc(void **p, size_t n, char *msg, size_t ms)
{
    *p = NULL;
    if (fake_limit >= 0 && atomic_load(&fake_live) + (long long)n > fake_limit)
        return fail(msg, ms, "cudaMalloc: out of memory");
    unsigned char *b = malloc(n + 16);
    if (!b)
        return fail(msg, ms, "cudaMalloc: out of memory");
    memcpy(b, &n, sizeof n);
    atomic_fetch_add(&fake_live, (long long)n);
    atomic_fetch_add(&fake_allocs, 1);
    *p = (void *)((uintptr_t)(b + 16) | FAKE_TAG);
    return 0;
}

static void fake_release(void *p)
{
    if (!p)
        return;
    if (!is_dev(p))
        abort(); /* a host pointer freed as device memory: a bug in the caller */
    unsigned char *b = (unsigned char *)host_of(p) - 16;
    size_t n;
    memcpy(&n, b, sizeof n);
    atomic_fetch_sub(&fake_live, (long long)n);
    free(b);
}

static int fake_to_device(void *dst, const void *src, size_t n, char *msg, size_t ms)
{
    if (!is_dev(dst) || is_dev(src))
        return fail(msg, ms, "cudaMemcpy to device: invalid argument");
    memcpy(host_of(dst), src, n);
    return 0;
}

static int fake_to_host(void *dst, const void *src, size_t n, char *msg, size_t ms)
{
    if (is_dev(dst) || !is_dev(src))
        return fail(msg, ms, "cudaMemcpy to host: invalid argument");
    memcpy(dst, host_of(src), n);
    return 0;
}

static int fake_sync(char *msg, size_t ms)
{
    (void)msg, (void)ms;
    return 0;
}

#define FAKE_LOAD(T, FIELD, o, i)                                                                         \
    ((o)->data ? ((const T *)host_of((o)->data))[tc_offset((i), rank, dims, (o)->strides)] : (o)->scalar.FIELD)

static int fake_elementwise(int op, int dtype, int rank, const int64_t *dims, int64_t count, void *out,
                            const tc_operand *a, const tc_operand *b, char *msg, size_t ms)
{
    if (op < 0 || op >= TC_OP_COUNT || !tc_has(op, dtype) || rank < 0 || rank > TC_MAX_RANK)
        return fail(msg, ms, "no kernel for this op and dtype");
    if (count == 0)
        return 0;
    if (!is_dev(out) || (a->data && !is_dev(a->data)) || (b->data && !is_dev(b->data)))
        return fail(msg, ms, "kernel launch: a host pointer where device memory belongs");
    void *o = host_of(out);
    const bool compare = tc_kind(op) == TC_K_COMPARE;
    const bool unary = tc_kind(op) == TC_K_UNARY;
    for (int64_t i = 0; i < count; i++) {
        switch (dtype) {
        case TC_BOOL: {
            uint8_t x = FAKE_LOAD(uint8_t, b, a, i), y = unary ? 0 : FAKE_LOAD(uint8_t, b, b, i);
            ((uint8_t *)o)[i] = compare ? tc_compare_b(op, x, y) : tc_logic(op, x, y);
            break;
        }
#define FAKE_NUM(TC, T, FIELD, SUF)                                                             \
    case TC: {                                                                                  \
        T x = FAKE_LOAD(T, FIELD, a, i);                                                        \
        if (unary)                                                                              \
            ((T *)o)[i] = tc_unary_##SUF(op, x);                                                \
        else if (compare)                                                                       \
            ((uint8_t *)o)[i] = tc_compare_##SUF(op, x, FAKE_LOAD(T, FIELD, b, i));             \
        else                                                                                    \
            ((T *)o)[i] = tc_binary_##SUF(op, x, FAKE_LOAD(T, FIELD, b, i));                    \
        break;                                                                                  \
    }
            FAKE_NUM(TC_I32, int32_t, i32, i32)
            FAKE_NUM(TC_I64, int64_t, i64, i64)
            FAKE_NUM(TC_F32, float, f32, f32)
            FAKE_NUM(TC_F64, double, f64, f64)
        default:
            return fail(msg, ms, "bad dtype");
        }
    }
    return 0;
}

/* cuBLAS: C = op(A) op(B), column-major, with its argument rules. */
static int fake_gemm(int dtype, int trans_a, int trans_b, int m, int n, int k, const void *a, int lda,
                     int64_t stride_a, const void *b, int ldb, int64_t stride_b, void *c, int ldc, int64_t stride_c,
                     int batch, char *msg, size_t ms)
{
    if (dtype != TC_F32 && dtype != TC_F64)
        return fail(msg, ms, "cublasGemm: unsupported dtype");
    if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < (trans_a ? (k > 1 ? k : 1) : (m > 1 ? m : 1)) ||
        ldb < (trans_b ? (n > 1 ? n : 1) : (k > 1 ? k : 1)) || ldc < (m > 1 ? m : 1))
        return fail(msg, ms, "cublasGemm: CUBLAS_STATUS_INVALID_VALUE");
    if (m == 0 || n == 0 || batch == 0)
        return 0;
    if (!is_dev(c) || (k > 0 && (!is_dev(a) || !is_dev(b))))
        return fail(msg, ms, "cublasGemm: a host pointer where device memory belongs");
    for (int64_t s = 0; s < batch; s++) {
        for (int j = 0; j < n; j++) {
            for (int i = 0; i < m; i++) {
                double acc = 0;
                for (int p = 0; p < k; p++) {
                    int64_t ia = s * stride_a + (trans_a ? p + (int64_t)i * lda : i + (int64_t)p * lda);
                    int64_t ib = s * stride_b + (trans_b ? j + (int64_t)p * ldb : p + (int64_t)j * ldb);
                    if (dtype == TC_F32)
                        acc += (double)((const float *)host_of(a))[ia] * ((const float *)host_of(b))[ib];
                    else
                        acc += ((const double *)host_of(a))[ia] * ((const double *)host_of(b))[ib];
                }
                int64_t ic = s * stride_c + i + (int64_t)j * ldc;
                if (dtype == TC_F32)
                    ((float *)host_of(c))[ic] = (float)acc;
                else
                    ((double *)host_of(c))[ic] = acc;
            }
        }
    }
    return 0;
}

/* ---- The tensor kernels: tens.h's elements in plain loops ---------------------------- */
static bool fake_esize_ok(int esize) { return esize == 1 || esize == 2 || esize == 4 || esize == 8; }

static int fake_copy(int esize, int rank, const int64_t *dims, int64_t count, void *dst, const int64_t *dst_strides,
                     const void *src, const int64_t *src_strides, char *msg, size_t ms)
{
    if (!fake_esize_ok(esize) || rank < 0 || rank > TC_MAX_RANK)
        return fail(msg, ms, "copy: bad arguments");
    if (count == 0)
        return 0;
    if (!is_dev(dst) || !is_dev(src))
        return fail(msg, ms, "kernel launch: a host pointer where device memory belongs");
    char *d = host_of(dst);
    const char *s = host_of(src);
    for (int64_t i = 0; i < count; i++)
        memcpy(d + tc_offset(i, rank, dims, dst_strides) * esize, s + tc_offset(i, rank, dims, src_strides) * esize,
               (size_t)esize);
    return 0;
}

static int fake_bias_act(int dtype, int act, int rank, const int64_t *dims, int64_t count, void *y,
                         const tc_operand *bias, char *msg, size_t ms)
{
    if ((dtype != TC_F32 && dtype != TC_F64) || act < 0 || act >= TC_ACT_COUNT || rank < 0 || rank > TC_MAX_RANK)
        return fail(msg, ms, "bias_act: bad arguments");
    if (count == 0)
        return 0;
    if (!is_dev(y) || (bias->data && !is_dev(bias->data)))
        return fail(msg, ms, "kernel launch: a host pointer where device memory belongs");
    const tc_operand *b = bias;
    for (int64_t i = 0; i < count; i++) {
        if (dtype == TC_F32) {
            float *o = host_of(y);
            o[i] = tc_act_f32(act, o[i] + FAKE_LOAD(float, f32, b, i));
        } else {
            double *o = host_of(y);
            o[i] = tc_act_f64(act, o[i] + FAKE_LOAD(double, f64, b, i));
        }
    }
    return 0;
}

static int fake_im2col(int dtype, const tc_conv *c, int64_t n0, int64_t nimg, const void *x, void *col, char *msg,
                       size_t ms)
{
    if (dtype != TC_F32 && dtype != TC_F64)
        return fail(msg, ms, "im2col: bad dtype");
    const int64_t count = nimg * c->C * c->KH * c->KW * c->OH * c->OW;
    if (count == 0)
        return 0;
    if (!is_dev(x) || !is_dev(col))
        return fail(msg, ms, "kernel launch: a host pointer where device memory belongs");
    for (int64_t i = 0; i < count; i++) {
        const int64_t off = tc_im2col_src(c, n0, i);
        if (dtype == TC_F32)
            ((float *)host_of(col))[i] = off < 0 ? 0.0f : ((const float *)host_of(x))[off];
        else
            ((double *)host_of(col))[i] = off < 0 ? 0.0 : ((const double *)host_of(x))[off];
    }
    return 0;
}

static int fake_pool(int dtype, const tc_pool *p, const void *x, void *y, char *msg, size_t ms)
{
    if (dtype < TC_I32 || dtype > TC_F64 || (p->avg && dtype != TC_F32 && dtype != TC_F64))
        return fail(msg, ms, "pool: bad dtype");
    const int64_t count = p->N * p->C * p->OH * p->OW;
    if (count == 0)
        return 0;
    if (!is_dev(x) || !is_dev(y))
        return fail(msg, ms, "kernel launch: a host pointer where device memory belongs");
    const void *xs = host_of(x);
    void *ys = host_of(y);
    for (int64_t i = 0; i < count; i++) {
        switch (dtype) {
        case TC_I32: ((int32_t *)ys)[i] = tc_pool_i32(p, xs, i); break;
        case TC_I64: ((int64_t *)ys)[i] = tc_pool_i64(p, xs, i); break;
        case TC_F32: ((float *)ys)[i] = tc_pool_f32(p, xs, i); break;
        default: ((double *)ys)[i] = tc_pool_f64(p, xs, i); break;
        }
    }
    return 0;
}

static int fake_reduce(int op, int dtype, const tc_reduce *r, const void *x, void *y, char *msg, size_t ms)
{
    if (!tc_reduce_has(op, dtype) || r->nk < 0 || r->nk > TC_MAX_RANK || r->nr < 0 || r->nr > TC_MAX_RANK)
        return fail(msg, ms, "reduce: bad arguments");
    if (r->kept == 0)
        return 0;
    if (!is_dev(y) || (r->rcount > 0 && !is_dev(x)))
        return fail(msg, ms, "kernel launch: a host pointer where device memory belongs");
    const void *xs = host_of(x);
    void *ys = host_of(y);
    for (int64_t o = 0; o < r->kept; o++) {
        switch (dtype) {
        case TC_BOOL: ((uint8_t *)ys)[o] = tc_reduce_b(op, r, xs, o); break;
        case TC_I32: ((int32_t *)ys)[o] = tc_reduce_i32(op, r, xs, o); break;
        case TC_I64: ((int64_t *)ys)[o] = tc_reduce_i64(op, r, xs, o); break;
        case TC_F32: ((float *)ys)[o] = tc_reduce_f32(op, r, xs, o); break;
        default: ((double *)ys)[o] = tc_reduce_f64(op, r, xs, o); break;
        }
    }
    return 0;
}

static int fake_layer_norm(int dtype, int center, int rank, const int64_t *dims, int64_t d, const void *x,
                           const tc_operand *scale, const tc_operand *bias, double eps, void *y, char *msg, size_t ms)
{
    if ((dtype != TC_F32 && dtype != TC_F64) || rank < 0 || rank > TC_MAX_RANK || d <= 0)
        return fail(msg, ms, "layer_norm: bad arguments");
    int64_t count = 1;
    for (int i = 0; i < rank; i++)
        count *= dims[i];
    if (count == 0)
        return 0;
    if (!is_dev(x) || !is_dev(y) || (scale->data && !is_dev(scale->data)) || (bias->data && !is_dev(bias->data)))
        return fail(msg, ms, "kernel launch: a host pointer where device memory belongs");
    const void *sd = scale->data ? host_of(scale->data) : NULL, *bd = bias->data ? host_of(bias->data) : NULL;
    for (int64_t j = 0; j < count / d; j++) {
        if (dtype == TC_F32)
            tc_layer_norm_f32(center, rank, dims, d, host_of(x), sd, scale->strides, scale->scalar.f32, bd, bias->strides,
                              bias->scalar.f32, (float)eps, host_of(y), j);
        else
            tc_layer_norm_f64(center, rank, dims, d, host_of(x), sd, scale->strides, scale->scalar.f64, bd, bias->strides,
                              bias->scalar.f64, eps, host_of(y), j);
    }
    return 0;
}

static int fake_softmax(int dtype, int log_of, int64_t outer, int64_t n, int64_t inner, const void *x, void *y,
                        char *msg, size_t ms)
{
    if (dtype != TC_F32 && dtype != TC_F64)
        return fail(msg, ms, "softmax: bad dtype");
    if (outer * n * inner == 0)
        return 0;
    if (!is_dev(x) || !is_dev(y))
        return fail(msg, ms, "kernel launch: a host pointer where device memory belongs");
    for (int64_t j = 0; j < outer * inner; j++) {
        if (dtype == TC_F32)
            tc_softmax_f32(log_of, n, inner, host_of(x), host_of(y), j);
        else
            tc_softmax_f64(log_of, n, inner, host_of(x), host_of(y), j);
    }
    return 0;
}

static int fake_gather(int esize, int idx_dtype, int64_t outer, int64_t d, int64_t inner, int64_t nidx,
                       const void *x, const void *idx, void *y, char *msg, size_t ms)
{
    if (!fake_esize_ok(esize) || (idx_dtype != TC_I32 && idx_dtype != TC_I64))
        return fail(msg, ms, "gather: bad arguments");
    const int64_t count = outer * nidx * inner;
    if (count == 0)
        return 0;
    if (!is_dev(x) || !is_dev(idx) || !is_dev(y))
        return fail(msg, ms, "kernel launch: a host pointer where device memory belongs");
    int bad = 0;
    for (int64_t i = 0; i < count; i++) {
        const int64_t off = tc_gather_src(idx_dtype, d, inner, nidx, host_of(idx), i);
        if (off < 0)
            bad = 1;
        else
            memcpy((char *)host_of(y) + i * esize, (const char *)host_of(x) + off * esize, (size_t)esize);
    }
    return bad ? TC_DATA_ERROR : 0;
}

static int fake_cast(int from, int to, int64_t count, const void *x, void *y, char *msg, size_t ms)
{
    if (from < TC_BOOL || from > TC_F64 || to < TC_BOOL || to > TC_F64)
        return fail(msg, ms, "cast: bad dtypes");
    if (count == 0)
        return 0;
    if (!is_dev(x) || !is_dev(y))
        return fail(msg, ms, "kernel launch: a host pointer where device memory belongs");
    int bad = 0;
    for (int64_t i = 0; i < count; i++)
        tc_cast_one(from, to, host_of(x), host_of(y), i, &bad);
    return bad ? TC_DATA_ERROR : 0;
}

static const tc_backend fake_table = {
    .abi_version = TC_ABI_VERSION,
    .size = sizeof(tc_backend),
    .init = fake_init,
    .describe = fake_describe,
    .alloc = fake_alloc,
    .release = fake_release,
    .to_device = fake_to_device,
    .to_host = fake_to_host,
    .sync = fake_sync,
    .elementwise = fake_elementwise,
    .gemm = fake_gemm,
    .copy = fake_copy,
    .bias_act = fake_bias_act,
    .im2col = fake_im2col,
    .pool = fake_pool,
    .reduce = fake_reduce,
    .softmax = fake_softmax,
    .gather = fake_gather,
    .cast = fake_cast,
    .layer_norm = fake_layer_norm,
};

__attribute__((visibility("default"))) const tc_backend *tfvm_cuda_backend_v1(void) { return &fake_table; }
