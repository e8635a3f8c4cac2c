/* devices/cuda/abi.h — the plain-C interface between libtfvm (devices/cuda/cuda.c)
 * and libtfvm_cuda.so, which libtfvm loads with dlopen: raw device pointers
 * only, so the library stays small and its ABI stable. C11 and CUDA C++. */
#ifndef TFVM_CUDA_ABI_H
#define TFVM_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TC_ABI_VERSION 2 /* 2: the ops from TC_FLOOR on */
/* The one symbol the library exports: returns its function table. */
#define TC_ENTRY_SYMBOL "tfvm_cuda_backend_v1"

/* dtypes: the values of tfvm_dtype */
enum { TC_BOOL = 1, TC_I32 = 2, TC_I64 = 3, TC_F32 = 4, TC_F64 = 5 };

/* Elementwise ops. Binary: operands and result of one dtype. Compare: result
 * bool (a 0/1 byte). Logic: bool. Unary: result of the operand's dtype.
 * isa/ops.def's `cuda` column names them (ADD is TC_ADD); which kind each is
 * and which dtypes it has: devices/cuda/elem.h, tc_kind and tc_has. New ids
 * go last (the values are the ABI). */
enum {
    TC_ADD, TC_SUB, TC_MUL, TC_DIV, TC_MOD, TC_MIN, TC_MAX,                    /* binary  */
    TC_LESS, TC_LESS_EQUAL, TC_GREATER, TC_GREATER_EQUAL, TC_EQUAL, TC_NOT_EQUAL, /* compare */
    TC_AND, TC_OR,                                                              /* logic   */
    TC_NEG, TC_ABS, TC_RELU, TC_SIGMOID, TC_TANH, TC_EXP, TC_LOG, TC_SQRT,      /* unary   */
    TC_NOT,                                                                     /* logic, unary */
    TC_FLOOR, TC_CEIL, TC_ROUND, TC_SIN, TC_COS, TC_ERF, TC_SIGN,               /* unary   */
    TC_XOR,                                                                     /* logic   */
    TC_POW, TC_FLOOR_DIV, TC_FLOOR_MOD,                                         /* binary  */
    TC_OP_COUNT
};

#define TC_MAX_RANK 8

/* One input of an elementwise kernel, seen through the output's shape:
 * element (i0, .., i{r-1}) of the output reads data[sum(i_j * strides[j])]
 * (strides in elements; 0 along broadcast dimensions). data NULL: every
 * element reads `scalar` instead (a host value passed by value). */
typedef struct tc_operand {
    const void *data;
    int64_t strides[TC_MAX_RANK];
    union {
        uint8_t b;
        int32_t i32;
        int64_t i64;
        float f32;
        double f64;
    } scalar;
} tc_operand;

/* The library's function table. Every function returns 0 on success; on
 * failure it writes one line into msg (e.g. "cudaMalloc: out of memory") and
 * returns non-zero. All may be called from several threads at once; the work
 * is queued on one stream in call order. */
typedef struct tc_backend {
    uint32_t abi_version; /* TC_ABI_VERSION */
    uint32_t size;        /* sizeof(tc_backend) */
    /* Finds and opens GPU 0. Returns 1 with msg "no device found" when there is
     * none (or no driver), another non-zero with the CUDA error otherwise. */
    int (*init)(char *msg, size_t msg_size);
    /* "NVIDIA H100 80GB HBM3, 79.1 GiB, compute 9.0, CUDA 13.0" */
    void (*describe)(char *buf, size_t size);
    int (*alloc)(void **p, size_t n, char *msg, size_t msg_size);
    void (*release)(void *p);
    int (*to_device)(void *dst, const void *src, size_t n, char *msg, size_t msg_size);
    /* Returns when the bytes are on the host. */
    int (*to_host)(void *dst, const void *src, size_t n, char *msg, size_t msg_size);
    int (*sync)(char *msg, size_t msg_size);
    /* out[count elements, C order over dims[0..rank)] = op(a, b) for an op and
     * operand dtype (b is ignored by unary ops). */
    int (*elementwise)(int op, int dtype, int rank, const int64_t *dims, int64_t count, void *out,
                       const tc_operand *a, const tc_operand *b, char *msg, size_t msg_size);
    /* cuBLAS's column-major strided batched GEMM with alpha 1 and beta 0:
     * C_i = op(A_i) op(B_i), op(A) m x k, op(B) k x n, C m x n (ldc), for
     * i < batch, X_i = X + i * strideX elements (a stride may be 0). k == 0
     * writes zeros. dtype TC_F32 or TC_F64. */
    int (*gemm)(int dtype, int trans_a, int trans_b, int m, int n, int k, const void *a, int lda,
                int64_t stride_a, const void *b, int ldb, int64_t stride_b, void *c, int ldc, int64_t stride_c,
                int batch, char *msg, size_t msg_size);
} tc_backend;

typedef const tc_backend *(*tc_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
