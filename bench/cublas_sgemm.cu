// bench/cublas_sgemm.cu — make gpu-check's reference: cuBLAS's SGEMM called
// directly, C = A B on n x n f32 matrices already on the GPU, timed with CUDA
// events over k calls after one warm-up call. Prints "MS_PER_SGEMM GFLOPS".
// The VM's side of the comparison is test/gpu/sgemm.tfg (the same product
// k times in a loop whose state stays on the GPU).
//
//   build/gpu-check/bin/cublas_sgemm N K
#include <cstdio>
#include <cstdlib>
#include <cublas_v2.h>
#include <cuda_runtime.h>

static int fail(const char *what, const char *why)
{
    std::fprintf(stderr, "cublas_sgemm: %s: %s\n", what, why);
    return 1;
}

__global__ void fill(float *x, size_t n, float scale)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = scale * (float)((i * 2654435761u) % 1000) / 1000.0f;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return std::fprintf(stderr, "usage: cublas_sgemm N K\n"), 2;
    const int n = std::atoi(argv[1]), k = std::atoi(argv[2]);
    if (n < 1 || k < 1)
        return std::fprintf(stderr, "cublas_sgemm: N and K must be positive\n"), 2;
    const size_t elems = (size_t)n * n;
    float *a, *b, *c;
    cudaError_t e;
    if ((e = cudaMalloc(&a, elems * 4)) != cudaSuccess || (e = cudaMalloc(&b, elems * 4)) != cudaSuccess ||
        (e = cudaMalloc(&c, elems * 4)) != cudaSuccess)
        return fail("cudaMalloc", cudaGetErrorString(e));
    const unsigned blocks = (unsigned)((elems + 255) / 256);
    fill<<<blocks, 256>>>(a, elems, 1.0f / n);
    fill<<<blocks, 256>>>(b, elems, 1.0f);
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
        return fail("cublasCreate", "failed");
    const float one = 1, zero = 0;
    cudaEvent_t t0, t1;
    cudaEventCreate(&t0);
    cudaEventCreate(&t1);
    for (int r = -1; r < k; r++) {
        if (r == 0)
            cudaEventRecord(t0);
        if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b, n, a, n, &zero, c, n) != CUBLAS_STATUS_SUCCESS)
            return fail("cublasSgemm", "failed");
    }
    cudaEventRecord(t1);
    if ((e = cudaEventSynchronize(t1)) != cudaSuccess)
        return fail("cudaEventSynchronize", cudaGetErrorString(e));
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    ms /= (float)k;
    std::printf("%.4f %.1f\n", ms, 2.0 * n * n * (double)n / (ms * 1e-3) / 1e9);
    cublasDestroy(h);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    return 0;
}
