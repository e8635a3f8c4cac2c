/* devices/cuda/backend.cu — libtfvm_cuda.so: GPU memory, copies, elementwise
 * kernels and cuBLAS GEMM behind the table of devices/cuda/abi.h. GPU 0, one
 * stream (work runs in queue order); every CUDA call's error is returned as text. */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "devices/cuda/elem.h"

namespace {

struct tc_state {
    cudaStream_t stream;
    cublasHandle_t blas;
    pthread_mutex_t blas_lock; /* a cuBLAS handle is not meant for several threads at once */
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

template <typename T, typename R, int KIND>
int tc_launch(const tc_args &p, void *out, char *msg, size_t msg_size)
{
    const int threads = 256;
    int64_t blocks = (p.count + threads - 1) / threads;
    if (blocks > 65535 * 4)
        blocks = 65535 * 4;
    tc_kernel<T, R, KIND><<<(unsigned)blocks, threads, 0, g.stream>>>(p, static_cast<R *>(out));
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
    memset(&p, 0, sizeof p);
    p.op = op;
    p.rank = rank;
    p.count = count;
    for (int j = 0; j < rank; j++)
        p.dims[j] = dims[j];
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

const tc_backend tc_table = {
    TC_ABI_VERSION, sizeof(tc_backend), tc_init,        tc_describe, tc_alloc, tc_release, tc_to_device,
    tc_to_host,     tc_sync,            tc_elementwise, tc_gemm,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const tc_backend *tfvm_cuda_backend_v1(void) { return &tc_table; }
