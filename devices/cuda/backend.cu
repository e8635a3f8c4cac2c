/* devices/cuda/backend.cu — libtfvm_cuda.so: GPU memory, copies, elementwise
 * and tensor kernels and cuBLAS GEMM behind the table of devices/cuda/abi.h.
 * What an element computes is elem.h's and tens.h's (shared with the host
 * stand-in the tests run); the kernels here are grid-stride loops over them. GPU 0, one
 * stream (work runs in queue order); every CUDA call's error is returned as text. */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "devices/cuda/tens.h"

namespace {

struct tc_state {
    cudaStream_t stream;
    cublasHandle_t blas;
    pthread_mutex_t blas_lock; /* a cuBLAS handle is not meant for several threads at once */
    int *flag;                 /* device memory: set by a kernel that meets bad data */
    pthread_mutex_t flag_lock; /* one kernel at a time uses it */
    cudaDeviceProp prop;
    int runtime_version;
};
tc_state g;

int tc_cuda_error(char *msg, size_t ms, const char *what, cudaError_t e)
{
    snprintf(msg, ms, "%s: %s", what, cudaGetErrorString(e));
    return 1;
}

int tc_blas_error(char *msg, size_t ms, const char *what, cublasStatus_t s)
{
    snprintf(msg, ms, "%s: %s", what, cublasGetStatusString(s));
    return 1;
}

#define TC_CHECK(call, what)                                   \
    do {                                                       \
        cudaError_t e_ = (call);                               \
        if (e_ != cudaSuccess)                                 \
            return tc_cuda_error(msg, msg_size, what, e_);     \
    } while (0)

/* ---- Kernels ----------------------------------------------------------------------- */
struct tc_args {
    int op, rank;
    int contiguous_a, contiguous_b; /* the operand reads element i at offset i */
    int64_t count;
    int64_t dims[TC_MAX_RANK];
    tc_operand a, b;
};

template <typename T> __device__ __forceinline__ T tc_scalar(const tc_operand &o);
template <> __device__ __forceinline__ uint8_t tc_scalar<uint8_t>(const tc_operand &o) { return o.scalar.b; }
template <> __device__ __forceinline__ int32_t tc_scalar<int32_t>(const tc_operand &o) { return o.scalar.i32; }
template <> __device__ __forceinline__ int64_t tc_scalar<int64_t>(const tc_operand &o) { return o.scalar.i64; }
template <> __device__ __forceinline__ float tc_scalar<float>(const tc_operand &o) { return o.scalar.f32; }
template <> __device__ __forceinline__ double tc_scalar<double>(const tc_operand &o) { return o.scalar.f64; }

template <typename T>
__device__ __forceinline__ T tc_load(const tc_operand &o, int contiguous, int64_t i, const tc_args &p)
{
    if (!o.data)
        return tc_scalar<T>(o);
    int64_t off = contiguous ? i : tc_offset(i, p.rank, p.dims, o.strides);
    return static_cast<const T *>(o.data)[off];
}

__device__ __forceinline__ float tc_bin(int op, float x, float y) { return tc_binary_f32(op, x, y); }
__device__ __forceinline__ double tc_bin(int op, double x, double y) { return tc_binary_f64(op, x, y); }
__device__ __forceinline__ int32_t tc_bin(int op, int32_t x, int32_t y) { return tc_binary_i32(op, x, y); }
__device__ __forceinline__ int64_t tc_bin(int op, int64_t x, int64_t y) { return tc_binary_i64(op, x, y); }
__device__ __forceinline__ uint8_t tc_bin(int op, uint8_t x, uint8_t y) { return tc_logic(op, x, y); }

__device__ __forceinline__ uint8_t tc_cmp(int op, uint8_t x, uint8_t y) { return tc_compare_b(op, x, y); }
__device__ __forceinline__ uint8_t tc_cmp(int op, int32_t x, int32_t y) { return tc_compare_i32(op, x, y); }
__device__ __forceinline__ uint8_t tc_cmp(int op, int64_t x, int64_t y) { return tc_compare_i64(op, x, y); }
__device__ __forceinline__ uint8_t tc_cmp(int op, float x, float y) { return tc_compare_f32(op, x, y); }
__device__ __forceinline__ uint8_t tc_cmp(int op, double x, double y) { return tc_compare_f64(op, x, y); }

__device__ __forceinline__ float tc_un(int op, float x) { return tc_unary_f32(op, x); }
__device__ __forceinline__ double tc_un(int op, double x) { return tc_unary_f64(op, x); }
__device__ __forceinline__ int32_t tc_un(int op, int32_t x) { return tc_unary_i32(op, x); }
__device__ __forceinline__ int64_t tc_un(int op, int64_t x) { return tc_unary_i64(op, x); }
__device__ __forceinline__ uint8_t tc_un(int op, uint8_t x) { return tc_logic(op, x, 0); }

/* Grid-stride loop: any count fits any grid. */
template <typename T, typename R, int KIND>
__global__ void tc_kernel(tc_args p, R *out)
{
    const int64_t step = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += step) {
        T x = tc_load<T>(p.a, p.contiguous_a, i, p);
        if (KIND == TC_K_UNARY) {
            out[i] = (R)tc_un(p.op, x);
        } else {
            T y = tc_load<T>(p.b, p.contiguous_b, i, p);
            if (KIND == TC_K_COMPARE)
                out[i] = (R)tc_cmp(p.op, x, y);
            else
                out[i] = (R)tc_bin(p.op, x, y);
        }
    }
}

/* Threads per block, and blocks for n elements of a grid-stride loop (at
 * most 2^18 blocks: the loop covers the rest). */
const int tc_threads = 256;
unsigned tc_blocks(int64_t n)
{
    int64_t blocks = (n + tc_threads - 1) / tc_threads;
    return (unsigned)(blocks > 65535 * 4 ? 65535 * 4 : blocks < 1 ? 1 : blocks);
}

template <typename T, typename R, int KIND>
int tc_launch(const tc_args &p, void *out, char *msg, size_t msg_size)
{
    tc_kernel<T, R, KIND><<<tc_blocks(p.count), tc_threads, 0, g.stream>>>(p, static_cast<R *>(out));
    TC_CHECK(cudaGetLastError(), "kernel launch");
    return 0;
}

template <typename T>
int tc_dispatch(int kind, const tc_args &p, void *out, char *msg, size_t msg_size)
{
    switch (kind) {
    case TC_K_BINARY: return tc_launch<T, T, TC_K_BINARY>(p, out, msg, msg_size);
    case TC_K_COMPARE: return tc_launch<T, uint8_t, TC_K_COMPARE>(p, out, msg, msg_size);
    default: return tc_launch<T, T, TC_K_UNARY>(p, out, msg, msg_size);
    }
}

/* ---- The tensor kernels: grid-stride loops over tens.h ------------------------------- */
#define TC_FOR(i, n)                                                                                  \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

struct tc_copy_args {
    int rank;
    int64_t count;
    int64_t dims[TC_MAX_RANK], ds[TC_MAX_RANK], ss[TC_MAX_RANK];
};

template <typename T> __global__ void tc_copy_kernel(tc_copy_args a, T *dst, const T *src)
{
    TC_FOR(i, a.count)
    dst[tc_offset(i, a.rank, a.dims, a.ds)] = src[tc_offset(i, a.rank, a.dims, a.ss)];
}

struct tc_bias_args {
    int act, rank;
    int64_t count;
    int64_t dims[TC_MAX_RANK];
    tc_operand b;
};

__device__ __forceinline__ float tc_act_one(int act, float y) { return tc_act_f32(act, y); }
__device__ __forceinline__ double tc_act_one(int act, double y) { return tc_act_f64(act, y); }

template <typename T> __global__ void tc_bias_act_kernel(tc_bias_args a, T *y)
{
    TC_FOR(i, a.count)
    {
        const T b = a.b.data ? static_cast<const T *>(a.b.data)[tc_offset(i, a.rank, a.dims, a.b.strides)]
                             : tc_scalar<T>(a.b);
        y[i] = tc_act_one(a.act, y[i] + b);
    }
}

template <typename T> __global__ void tc_im2col_kernel(tc_conv c, int64_t n0, int64_t count, const T *x, T *col)
{
    TC_FOR(i, count)
    {
        const int64_t off = tc_im2col_src(&c, n0, i);
        col[i] = off < 0 ? (T)0 : x[off];
    }
}

__device__ __forceinline__ float tc_pool_one(const tc_pool *p, const float *x, int64_t i) { return tc_pool_f32(p, x, i); }
__device__ __forceinline__ double tc_pool_one(const tc_pool *p, const double *x, int64_t i) { return tc_pool_f64(p, x, i); }
__device__ __forceinline__ int32_t tc_pool_one(const tc_pool *p, const int32_t *x, int64_t i) { return tc_pool_i32(p, x, i); }
__device__ __forceinline__ int64_t tc_pool_one(const tc_pool *p, const int64_t *x, int64_t i) { return tc_pool_i64(p, x, i); }

template <typename T> __global__ void tc_pool_kernel(tc_pool p, int64_t count, const T *x, T *y)
{
    TC_FOR(i, count)
    y[i] = tc_pool_one(&p, x, i);
}

__device__ __forceinline__ uint8_t tc_red_one(int op, const tc_reduce *r, const uint8_t *x, int64_t o) { return tc_reduce_b(op, r, x, o); }
__device__ __forceinline__ int32_t tc_red_one(int op, const tc_reduce *r, const int32_t *x, int64_t o) { return tc_reduce_i32(op, r, x, o); }
__device__ __forceinline__ int64_t tc_red_one(int op, const tc_reduce *r, const int64_t *x, int64_t o) { return tc_reduce_i64(op, r, x, o); }
__device__ __forceinline__ float tc_red_one(int op, const tc_reduce *r, const float *x, int64_t o) { return tc_reduce_f32(op, r, x, o); }
__device__ __forceinline__ double tc_red_one(int op, const tc_reduce *r, const double *x, int64_t o) { return tc_reduce_f64(op, r, x, o); }

/* one thread per output element, folding its elements in order */
template <typename T> __global__ void tc_reduce_kernel(int op, tc_reduce r, const T *x, T *y)
{
    TC_FOR(o, r.kept)
    y[o] = tc_red_one(op, &r, x, o);
}

__device__ __forceinline__ void tc_softmax_one(int l, int64_t n, int64_t in, const float *x, float *y, int64_t j) { tc_softmax_f32(l, n, in, x, y, j); }
__device__ __forceinline__ void tc_softmax_one(int l, int64_t n, int64_t in, const double *x, double *y, int64_t j) { tc_softmax_f64(l, n, in, x, y, j); }

/* one thread per row */
template <typename T>
__global__ void tc_softmax_kernel(int log_of, int64_t rows, int64_t n, int64_t inner, const T *x, T *y)
{
    TC_FOR(j, rows)
    tc_softmax_one(log_of, n, inner, x, y, j);
}

struct tc_lnorm_args {
    int center, rank;
    int64_t rows, d;
    int64_t dims[TC_MAX_RANK];
    tc_operand s, b;
    double eps;
};

__device__ __forceinline__ void tc_lnorm_one(const tc_lnorm_args &a, const float *x, float *y, int64_t j)
{
    tc_layer_norm_f32(a.center, a.rank, a.dims, a.d, x, static_cast<const float *>(a.s.data), a.s.strides, a.s.scalar.f32,
                      static_cast<const float *>(a.b.data), a.b.strides, a.b.scalar.f32, (float)a.eps, y, j);
}
__device__ __forceinline__ void tc_lnorm_one(const tc_lnorm_args &a, const double *x, double *y, int64_t j)
{
    tc_layer_norm_f64(a.center, a.rank, a.dims, a.d, x, static_cast<const double *>(a.s.data), a.s.strides, a.s.scalar.f64,
                      static_cast<const double *>(a.b.data), a.b.strides, a.b.scalar.f64, a.eps, y, j);
}

/* one thread a row, as the softmax */
template <typename T> __global__ void tc_lnorm_kernel(tc_lnorm_args a, const T *x, T *y)
{
    TC_FOR(j, a.rows)
    tc_lnorm_one(a, x, y, j);
}

/* *bad is set (to 1) by any thread that meets an index out of range */
template <typename T>
__global__ void tc_gather_kernel(int idx_dtype, int64_t d, int64_t inner, int64_t nidx, int64_t count, const T *x,
                                 const void *idx, T *y, int *bad)
{
    TC_FOR(i, count)
    {
        const int64_t off = tc_gather_src(idx_dtype, d, inner, nidx, idx, i);
        if (off < 0)
            *bad = 1;
        else
            y[i] = x[off];
    }
}

__global__ void tc_cast_kernel(int from, int to, int64_t count, const void *x, void *y, int *bad)
{
    TC_FOR(i, count)
    {
        int b = 0;
        tc_cast_one(from, to, x, y, i, &b);
        if (b)
            *bad = 1;
    }
}

/* A kernel's arguments zeroed, with the shape it runs over. */
template <typename A> void tc_shape(A &a, int rank, const int64_t *dims, int64_t count)
{
    memset(&a, 0, sizeof a);
    a.rank = rank;
    a.count = count;
    for (int j = 0; j < rank; j++)
        a.dims[j] = dims[j];
}

bool tc_contiguous(const tc_operand *o, int rank, const int64_t *dims)
{
    int64_t acc = 1;
    for (int j = rank - 1; j >= 0; j--) {
        if (dims[j] != 1 && o->strides[j] != acc)
            return false;
        acc *= dims[j];
    }
    return true;
}

/* ---- The function table -------------------------------------------------------------- */
int tc_init(char *msg, size_t msg_size)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice) {
        /* No driver at all reads as "insufficient driver": there is no GPU to use. */
        int driver = 0;
        cudaDriverGetVersion(&driver);
        if (e == cudaErrorNoDevice || driver == 0) {
            snprintf(msg, msg_size, "no device found");
            return 1;
        }
    }
    TC_CHECK(e, "cudaGetDeviceCount");
    if (n == 0) {
        snprintf(msg, msg_size, "no device found");
        return 1;
    }
    TC_CHECK(cudaSetDevice(0), "cudaSetDevice");
    TC_CHECK(cudaGetDeviceProperties(&g.prop, 0), "cudaGetDeviceProperties");
    TC_CHECK(cudaRuntimeGetVersion(&g.runtime_version), "cudaRuntimeGetVersion");
    TC_CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    cublasStatus_t s = cublasCreate(&g.blas);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cudaStreamDestroy(g.stream);
        return tc_blas_error(msg, msg_size, "cublasCreate", s);
    }
    s = cublasSetStream(g.blas, g.stream);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(g.blas);
        cudaStreamDestroy(g.stream);
        return tc_blas_error(msg, msg_size, "cublasSetStream", s);
    }
    pthread_mutex_init(&g.blas_lock, NULL);
    pthread_mutex_init(&g.flag_lock, NULL);
    TC_CHECK(cudaMalloc((void **)&g.flag, sizeof(int)), "cudaMalloc");
    return 0;
}

void tc_describe(char *buf, size_t size)
{
    snprintf(buf, size, "%s, %.1f GiB, compute %d.%d, CUDA %d.%d", g.prop.name,
             (double)g.prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), g.prop.major, g.prop.minor,
             g.runtime_version / 1000, g.runtime_version % 1000 / 10);
}

int tc_alloc(void **p, size_t n, char *msg, size_t msg_size)
{
    *p = NULL;
    TC_CHECK(cudaMalloc(p, n), "cudaMalloc");
    return 0;
}

void tc_release(void *p)
{
    /* cudaFree waits for the kernels that may still use p; an error here has
     * nowhere to go (the next call reports a broken context anyway). */
    if (p)
        cudaFree(p);
}

/* The host side of a copy may be pageable memory the caller reuses as soon
 * as we return, so both directions wait for the copy to finish. */
int tc_to_device(void *dst, const void *src, size_t n, char *msg, size_t msg_size)
{
    TC_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, g.stream), "cudaMemcpy to device");
    TC_CHECK(cudaStreamSynchronize(g.stream), "cudaMemcpy to device");
    return 0;
}

int tc_to_host(void *dst, const void *src, size_t n, char *msg, size_t msg_size)
{
    TC_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, g.stream), "cudaMemcpy to host");
    TC_CHECK(cudaStreamSynchronize(g.stream), "cudaMemcpy to host");
    return 0;
}

int tc_sync(char *msg, size_t msg_size)
{
    TC_CHECK(cudaStreamSynchronize(g.stream), "cudaStreamSynchronize");
    return 0;
}

int tc_elementwise(int op, int dtype, int rank, const int64_t *dims, int64_t count, void *out, const tc_operand *a,
                   const tc_operand *b, char *msg, size_t msg_size)
{
    if (op < 0 || op >= TC_OP_COUNT || !tc_has(op, dtype) || rank < 0 || rank > TC_MAX_RANK) {
        snprintf(msg, msg_size, "no kernel for op %d on dtype %d", op, dtype);
        return 1;
    }
    if (count == 0)
        return 0;
    tc_args p;
    tc_shape(p, rank, dims, count);
    p.op = op;
    p.a = *a;
    p.b = *b;
    p.contiguous_a = tc_contiguous(a, rank, dims);
    p.contiguous_b = tc_contiguous(b, rank, dims);
    int kind = tc_kind(op);
    switch (dtype) {
    case TC_BOOL: return tc_dispatch<uint8_t>(kind, p, out, msg, msg_size);
    case TC_I32: return tc_dispatch<int32_t>(kind, p, out, msg, msg_size);
    case TC_I64: return tc_dispatch<int64_t>(kind, p, out, msg, msg_size);
    case TC_F32: return tc_dispatch<float>(kind, p, out, msg, msg_size);
    default: return tc_dispatch<double>(kind, p, out, msg, msg_size);
    }
}

int tc_gemm(int dtype, int trans_a, int trans_b, int m, int n, int k, const void *a, int lda, int64_t stride_a,
            const void *b, int ldb, int64_t stride_b, void *c, int ldc, int64_t stride_c, int batch, char *msg,
            size_t msg_size)
{
    if (m <= 0 || n <= 0 || batch <= 0)
        return 0;
    const size_t es = dtype == TC_F32 ? 4 : 8;
    if (k == 0) { /* cuBLAS would leave C alone; the product of nothing is 0 */
        for (int i = 0; i < batch; i++)
            TC_CHECK(cudaMemset2DAsync(static_cast<char *>(c) + (size_t)i * (size_t)stride_c * es, (size_t)ldc * es, 0,
                                       (size_t)m * es, (size_t)n, g.stream),
                     "cudaMemset");
        return 0;
    }
    const cublasOperation_t oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t s;
    pthread_mutex_lock(&g.blas_lock);
    if (dtype == TC_F32) {
        const float one = 1.0f, zero = 0.0f;
        s = cublasSgemmStridedBatched(g.blas, oa, ob, m, n, k, &one, static_cast<const float *>(a), lda, stride_a,
                                      static_cast<const float *>(b), ldb, stride_b, &zero, static_cast<float *>(c),
                                      ldc, stride_c, batch);
    } else {
        const double one = 1.0, zero = 0.0;
        s = cublasDgemmStridedBatched(g.blas, oa, ob, m, n, k, &one, static_cast<const double *>(a), lda, stride_a,
                                      static_cast<const double *>(b), ldb, stride_b, &zero,
                                      static_cast<double *>(c), ldc, stride_c, batch);
    }
    pthread_mutex_unlock(&g.blas_lock);
    if (s != CUBLAS_STATUS_SUCCESS)
        return tc_blas_error(msg, msg_size, dtype == TC_F32 ? "cublasSgemm" : "cublasDgemm", s);
    return 0;
}

/* ---- The tensor kernels' entry points ---------------------------------------------------- */
int tc_bad_args(char *msg, size_t msg_size, const char *what)
{
    snprintf(msg, msg_size, "%s: bad arguments", what);
    return 1;
}

int tc_copy(int esize, int rank, const int64_t *dims, int64_t count, void *dst, const int64_t *dst_strides,
            const void *src, const int64_t *src_strides, char *msg, size_t msg_size)
{
    if (rank < 0 || rank > TC_MAX_RANK)
        return tc_bad_args(msg, msg_size, "copy");
    if (count == 0)
        return 0;
    tc_copy_args a;
    memset(&a, 0, sizeof a);
    a.rank = rank;
    a.count = count;
    for (int j = 0; j < rank; j++) {
        a.dims[j] = dims[j];
        a.ds[j] = dst_strides[j];
        a.ss[j] = src_strides[j];
    }
    const unsigned b = tc_blocks(count);
    switch (esize) {
    case 1: tc_copy_kernel<uint8_t><<<b, tc_threads, 0, g.stream>>>(a, (uint8_t *)dst, (const uint8_t *)src); break;
    case 2: tc_copy_kernel<uint16_t><<<b, tc_threads, 0, g.stream>>>(a, (uint16_t *)dst, (const uint16_t *)src); break;
    case 4: tc_copy_kernel<uint32_t><<<b, tc_threads, 0, g.stream>>>(a, (uint32_t *)dst, (const uint32_t *)src); break;
    case 8: tc_copy_kernel<uint64_t><<<b, tc_threads, 0, g.stream>>>(a, (uint64_t *)dst, (const uint64_t *)src); break;
    default: return tc_bad_args(msg, msg_size, "copy");
    }
    TC_CHECK(cudaGetLastError(), "kernel launch");
    return 0;
}

int tc_bias_act(int dtype, int act, int rank, const int64_t *dims, int64_t count, void *y, const tc_operand *bias,
                char *msg, size_t msg_size)
{
    if ((dtype != TC_F32 && dtype != TC_F64) || act < 0 || act >= TC_ACT_COUNT || rank < 0 || rank > TC_MAX_RANK)
        return tc_bad_args(msg, msg_size, "bias_act");
    if (count == 0)
        return 0;
    tc_bias_args a;
    tc_shape(a, rank, dims, count);
    a.act = act;
    a.b = *bias;
    if (dtype == TC_F32)
        tc_bias_act_kernel<float><<<tc_blocks(count), tc_threads, 0, g.stream>>>(a, (float *)y);
    else
        tc_bias_act_kernel<double><<<tc_blocks(count), tc_threads, 0, g.stream>>>(a, (double *)y);
    TC_CHECK(cudaGetLastError(), "kernel launch");
    return 0;
}

int tc_im2col(int dtype, const tc_conv *c, int64_t n0, int64_t nimg, const void *x, void *col, char *msg,
              size_t msg_size)
{
    const int64_t count = nimg * c->C * c->KH * c->KW * c->OH * c->OW;
    if (count == 0)
        return 0;
    if (dtype == TC_F32)
        tc_im2col_kernel<float><<<tc_blocks(count), tc_threads, 0, g.stream>>>(*c, n0, count, (const float *)x, (float *)col);
    else if (dtype == TC_F64)
        tc_im2col_kernel<double><<<tc_blocks(count), tc_threads, 0, g.stream>>>(*c, n0, count, (const double *)x, (double *)col);
    else
        return tc_bad_args(msg, msg_size, "im2col");
    TC_CHECK(cudaGetLastError(), "kernel launch");
    return 0;
}

int tc_pool_run(int dtype, const tc_pool *p, const void *x, void *y, char *msg, size_t msg_size)
{
    const int64_t count = p->N * p->C * p->OH * p->OW;
    if (count == 0)
        return 0;
    const unsigned b = tc_blocks(count);
    switch (dtype) {
    case TC_I32: tc_pool_kernel<int32_t><<<b, tc_threads, 0, g.stream>>>(*p, count, (const int32_t *)x, (int32_t *)y); break;
    case TC_I64: tc_pool_kernel<int64_t><<<b, tc_threads, 0, g.stream>>>(*p, count, (const int64_t *)x, (int64_t *)y); break;
    case TC_F32: tc_pool_kernel<float><<<b, tc_threads, 0, g.stream>>>(*p, count, (const float *)x, (float *)y); break;
    case TC_F64: tc_pool_kernel<double><<<b, tc_threads, 0, g.stream>>>(*p, count, (const double *)x, (double *)y); break;
    default: return tc_bad_args(msg, msg_size, "pool");
    }
    TC_CHECK(cudaGetLastError(), "kernel launch");
    return 0;
}

int tc_reduce_run(int op, int dtype, const tc_reduce *r, const void *x, void *y, char *msg, size_t msg_size)
{
    if (!tc_reduce_has(op, dtype) || r->nk < 0 || r->nk > TC_MAX_RANK || r->nr < 0 || r->nr > TC_MAX_RANK)
        return tc_bad_args(msg, msg_size, "reduce");
    if (r->kept == 0)
        return 0;
    const unsigned b = tc_blocks(r->kept);
    switch (dtype) {
    case TC_BOOL: tc_reduce_kernel<uint8_t><<<b, tc_threads, 0, g.stream>>>(op, *r, (const uint8_t *)x, (uint8_t *)y); break;
    case TC_I32: tc_reduce_kernel<int32_t><<<b, tc_threads, 0, g.stream>>>(op, *r, (const int32_t *)x, (int32_t *)y); break;
    case TC_I64: tc_reduce_kernel<int64_t><<<b, tc_threads, 0, g.stream>>>(op, *r, (const int64_t *)x, (int64_t *)y); break;
    case TC_F32: tc_reduce_kernel<float><<<b, tc_threads, 0, g.stream>>>(op, *r, (const float *)x, (float *)y); break;
    default: tc_reduce_kernel<double><<<b, tc_threads, 0, g.stream>>>(op, *r, (const double *)x, (double *)y); break;
    }
    TC_CHECK(cudaGetLastError(), "kernel launch");
    return 0;
}

int tc_softmax_run(int dtype, int log_of, int64_t outer, int64_t n, int64_t inner, const void *x, void *y, char *msg,
                   size_t msg_size)
{
    const int64_t rows = outer * inner;
    if (rows == 0 || n == 0)
        return 0;
    if (dtype == TC_F32)
        tc_softmax_kernel<float><<<tc_blocks(rows), tc_threads, 0, g.stream>>>(log_of, rows, n, inner, (const float *)x, (float *)y);
    else if (dtype == TC_F64)
        tc_softmax_kernel<double><<<tc_blocks(rows), tc_threads, 0, g.stream>>>(log_of, rows, n, inner, (const double *)x, (double *)y);
    else
        return tc_bad_args(msg, msg_size, "softmax");
    TC_CHECK(cudaGetLastError(), "kernel launch");
    return 0;
}

/* The flag's protocol: cleared, the kernel queued, the flag read back (which
 * waits for the kernel). Returns TC_DATA_ERROR when the kernel set it. */
int tc_flag_begin(char *msg, size_t msg_size)
{
    pthread_mutex_lock(&g.flag_lock);
    cudaError_t e = cudaMemsetAsync(g.flag, 0, sizeof(int), g.stream);
    if (e != cudaSuccess) {
        pthread_mutex_unlock(&g.flag_lock);
        return tc_cuda_error(msg, msg_size, "cudaMemset", e);
    }
    return 0;
}

int tc_flag_end(char *msg, size_t msg_size)
{
    int bad = 0;
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(&bad, g.flag, sizeof bad, cudaMemcpyDeviceToHost, g.stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(g.stream);
    pthread_mutex_unlock(&g.flag_lock);
    if (e != cudaSuccess)
        return tc_cuda_error(msg, msg_size, "kernel launch", e);
    return bad ? TC_DATA_ERROR : 0;
}

int tc_gather(int esize, int idx_dtype, int64_t outer, int64_t d, int64_t inner, int64_t nidx, const void *x,
              const void *idx, void *y, char *msg, size_t msg_size)
{
    const int64_t count = outer * nidx * inner;
    if ((idx_dtype != TC_I32 && idx_dtype != TC_I64) || (esize != 1 && esize != 2 && esize != 4 && esize != 8))
        return tc_bad_args(msg, msg_size, "gather");
    if (count == 0)
        return 0;
    if (tc_flag_begin(msg, msg_size))
        return 1;
    const unsigned b = tc_blocks(count);
    switch (esize) {
    case 1: tc_gather_kernel<uint8_t><<<b, tc_threads, 0, g.stream>>>(idx_dtype, d, inner, nidx, count, (const uint8_t *)x, idx, (uint8_t *)y, g.flag); break;
    case 2: tc_gather_kernel<uint16_t><<<b, tc_threads, 0, g.stream>>>(idx_dtype, d, inner, nidx, count, (const uint16_t *)x, idx, (uint16_t *)y, g.flag); break;
    case 4: tc_gather_kernel<uint32_t><<<b, tc_threads, 0, g.stream>>>(idx_dtype, d, inner, nidx, count, (const uint32_t *)x, idx, (uint32_t *)y, g.flag); break;
    default: tc_gather_kernel<uint64_t><<<b, tc_threads, 0, g.stream>>>(idx_dtype, d, inner, nidx, count, (const uint64_t *)x, idx, (uint64_t *)y, g.flag); break;
    }
    return tc_flag_end(msg, msg_size);
}

int tc_cast(int from, int to, int64_t count, const void *x, void *y, char *msg, size_t msg_size)
{
    if (from < TC_BOOL || from > TC_F64 || to < TC_BOOL || to > TC_F64)
        return tc_bad_args(msg, msg_size, "cast");
    if (count == 0)
        return 0;
    const bool checked = (from == TC_F32 || from == TC_F64) && (to == TC_I32 || to == TC_I64);
    if (checked && tc_flag_begin(msg, msg_size))
        return 1;
    tc_cast_kernel<<<tc_blocks(count), tc_threads, 0, g.stream>>>(from, to, count, x, y, g.flag);
    if (checked)
        return tc_flag_end(msg, msg_size);
    TC_CHECK(cudaGetLastError(), "kernel launch");
    return 0;
}

int tc_layer_norm(int dtype, int center, int rank, const int64_t *dims, int64_t d, const void *x,
                  const tc_operand *scale, const tc_operand *bias, double eps, void *y, char *msg, size_t msg_size)
{
    if ((dtype != TC_F32 && dtype != TC_F64) || rank < 0 || rank > TC_MAX_RANK || d <= 0)
        return tc_bad_args(msg, msg_size, "layer_norm");
    tc_lnorm_args a;
    memset(&a, 0, sizeof a);
    a.center = center;
    a.rank = rank;
    a.d = d;
    a.rows = 1;
    for (int i = 0; i < rank; i++) {
        a.dims[i] = dims[i];
        a.rows *= dims[i];
    }
    a.rows /= d;
    a.s = *scale;
    a.b = *bias;
    a.eps = eps;
    if (a.rows == 0)
        return 0;
    if (dtype == TC_F32)
        tc_lnorm_kernel<float><<<tc_blocks(a.rows), tc_threads, 0, g.stream>>>(a, (const float *)x, (float *)y);
    else
        tc_lnorm_kernel<double><<<tc_blocks(a.rows), tc_threads, 0, g.stream>>>(a, (const double *)x, (double *)y);
    TC_CHECK(cudaGetLastError(), "kernel launch");
    return 0;
}

const tc_backend tc_table = {
    TC_ABI_VERSION, sizeof(tc_backend), tc_init,        tc_describe, tc_alloc, tc_release, tc_to_device,
    tc_to_host,     tc_sync,            tc_elementwise, tc_gemm,  tc_copy,    tc_bias_act,  tc_im2col,
    tc_pool_run,    tc_reduce_run,      tc_softmax_run, tc_gather, tc_cast,  tc_layer_norm,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const tc_backend *tfvm_cuda_backend_v1(void) { return &tc_table; }
