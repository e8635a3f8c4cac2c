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

#define TC_ABI_VERSION 4 /* 2: the ops from TC_FLOOR on; 3: the tensor kernels from copy on; 4: layer_norm */
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

/* The activation of bias_act (docs/isa.md, FUSED_MATMUL), each composed of
 * the elementwise ops of elem.h. New ids go last. */
enum {
    TC_ACT_NONE, TC_ACT_RELU, TC_ACT_SIGMOID, TC_ACT_TANH, TC_ACT_SILU, TC_ACT_GELU, TC_ACT_HARDSIGMOID,
    TC_ACT_HARDSWISH, TC_ACT_RELU6, TC_ACT_GELU_TANH, TC_ACT_GELU_NEW, TC_ACT_COUNT
};

/* The reductions of reduce. */
enum { TC_RED_SUM, TC_RED_MEAN, TC_RED_MAX, TC_RED_MIN };

/* A 2-d convolution's geometry (CONV2D: x [N, C, H, W], w [O, C/groups, KH,
 * KW], y [N, O, OH, OW]): what im2col needs. */
typedef struct tc_conv {
    int64_t N, C, H, W, KH, KW, OH, OW;
    int64_t sh, sw, pt, pl, dh, dw;
} tc_conv;

/* MAXPOOL / AVGPOOL: x [N, C, H, W] -> y [N, C, OH, OW] (docs/isa.md). */
typedef struct tc_pool {
    int64_t N, C, H, W, OH, OW;
    int64_t kh, kw, sh, sw, pt, pl, pb, pr, dh, dw;
    int32_t avg, count_include_pad;
} tc_pool;

/* A reduction seen as kept and reduced dims of x, each with x's element
 * strides: output element o (C order over kdims) folds the rcount elements
 * base(o) + offset(r) for r in C order over rdims. */
typedef struct tc_reduce {
    int32_t nk, nr;
    int64_t kept, rcount;
    int64_t kdims[TC_MAX_RANK], kstrides[TC_MAX_RANK];
    int64_t rdims[TC_MAX_RANK], rstrides[TC_MAX_RANK];
} tc_reduce;

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
    /* ---- ABI 3: the tensor kernels (strides in elements) ---- */
    /* dst[offset(i, dst_strides)] = src[offset(i, src_strides)] for count
     * elements i, C order over dims[0..rank); elements of esize bytes (1, 2,
     * 4 or 8). Transposes, concatenations, reshapes. */
    int (*copy)(int esize, int rank, const int64_t *dims, int64_t count, void *dst, const int64_t *dst_strides,
                const void *src, const int64_t *src_strides, char *msg, size_t msg_size);
    /* y = act(y + bias) in place, bias read through y's shape as an
     * elementwise operand (tc_operand); TC_F32 or TC_F64. */
    int (*bias_act)(int dtype, int act, int rank, const int64_t *dims, int64_t count, void *y, const tc_operand *bias,
                    char *msg, size_t msg_size);
    /* The columns of images [n0, n0 + nimg) of x: col [nimg][C * KH * KW]
     * [OH * OW], 0 where the window lies in the padding. */
    int (*im2col)(int dtype, const tc_conv *c, int64_t n0, int64_t nimg, const void *x, void *col, char *msg,
                  size_t msg_size);
    int (*pool)(int dtype, const tc_pool *p, const void *x, void *y, char *msg, size_t msg_size);
    /* y[kept] = the TC_RED_* of x over the reduced dims */
    int (*reduce)(int op, int dtype, const tc_reduce *r, const void *x, void *y, char *msg, size_t msg_size);
    /* softmax (log_softmax when log) of x [outer, n, inner] along n */
    int (*softmax)(int dtype, int log, int64_t outer, int64_t n, int64_t inner, const void *x, void *y, char *msg,
                   size_t msg_size);
    /* y [outer, nidx, inner] = x [outer, d, inner] at idx (TC_I32 or TC_I64;
     * negative from the end); TC_DATA_ERROR for an index outside [-d, d). */
    int (*gather)(int esize, int idx_dtype, int64_t outer, int64_t d, int64_t inner, int64_t nidx, const void *x,
                  const void *idx, void *y, char *msg, size_t msg_size);
    /* y = x converted from dtype `from` to `to` (TC_BOOL..TC_F64) as CAST;
     * TC_DATA_ERROR for a float that does not fit the integer dtype. */
    int (*cast)(int from, int to, int64_t count, const void *x, void *y, char *msg, size_t msg_size);
    /* LAYER_NORM (RMS_NORM when !center) of x [rows, d] (rows * d
     * elements of x's dims, rank of them): each row normalized, scale and
     * bias read through x's dims as elementwise operands (tc_operand);
     * TC_F32 or TC_F64. */
    int (*layer_norm)(int dtype, int center, int rank, const int64_t *dims, int64_t d, const void *x,
                      const tc_operand *scale, const tc_operand *bias, double eps, void *y, char *msg,
                      size_t msg_size);
} tc_backend;

typedef const tc_backend *(*tc_entry_fn)(void);

/* A backend function's return value when the data itself is wrong (a GATHER
 * index out of range, a float CAST to an integer it does not fit): the
 * caller lets the CPU compute it, which says what is wrong in its words. */
#define TC_DATA_ERROR 2

#ifdef __cplusplus
}
#endif
#endif
