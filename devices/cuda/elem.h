/* devices/cuda/elem.h — what one element of each CUDA elementwise op computes,
 * shared by the GPU kernels (backend.cu) and the host stand-in the tests run
 * (test/unit/fake_cuda.c), so tests check it without a GPU. C11 and CUDA C++. */
#ifndef TFVM_CUDA_ELEM_H
#define TFVM_CUDA_ELEM_H

#include <math.h>
#include <stdint.h>

#include "devices/cuda/abi.h"

#if defined(__CUDACC__)
#define TC_FN static __host__ __device__ __forceinline__
#else
#define TC_FN static inline
#endif

/* Offset of output element i (C order over dims) in an operand with the
 * given per-dimension strides. */
TC_FN int64_t tc_offset(int64_t i, int rank, const int64_t *dims, const int64_t *strides)
{
    int64_t off = 0;
    for (int j = rank - 1; j >= 0; j--) {
        int64_t q = i / dims[j];
        off += (i - q * dims[j]) * strides[j];
        i = q;
    }
    return off;
}

/* Semantics match devices/cpu/elementwise.c: integers wrap (computed in the
 * unsigned type); MIN/MAX follow NumPy (a NaN operand wins, equal operands
 * give y); MOD is fmod (sign of a); RELU keeps NaN and -0; SIGMOID takes
 * the branch whose exp cannot overflow. x != x tests NaN
 * without <cmath>/<math.h> differences between C and CUDA C++. Integer DIV and
 * MOD never reach the GPU (division by zero must be an error; the CPU does them). */
#define TC_FLOAT_BINARY(NAME, T, FMOD)                       \
    TC_FN T NAME(int op, T x, T y)                           \
    {                                                        \
        switch (op) {                                        \
        case TC_ADD: return x + y;                           \
        case TC_SUB: return x - y;                           \
        case TC_MUL: return x * y;                           \
        case TC_DIV: return x / y;                           \
        case TC_MOD: return FMOD(x, y);                      \
        case TC_MIN: return (x < y || x != x) ? x : y;       \
        default: return (x > y || x != x) ? x : y;           \
        }                                                    \
    }
TC_FLOAT_BINARY(tc_binary_f32, float, fmodf)
TC_FLOAT_BINARY(tc_binary_f64, double, fmod)

#define TC_INT_BINARY(NAME, T, U)                            \
    TC_FN T NAME(int op, T x, T y)                           \
    {                                                        \
        switch (op) {                                        \
        case TC_ADD: return (T)((U)x + (U)y);                \
        case TC_SUB: return (T)((U)x - (U)y);                \
        case TC_MUL: return (T)((U)x * (U)y);                \
        case TC_MIN: return x < y ? x : y;                   \
        default: return x > y ? x : y;                       \
        }                                                    \
    }
TC_INT_BINARY(tc_binary_i32, int32_t, uint32_t)
TC_INT_BINARY(tc_binary_i64, int64_t, uint64_t)

#define TC_COMPARE(NAME, T)                                  \
    TC_FN uint8_t NAME(int op, T x, T y)                     \
    {                                                        \
        switch (op) {                                        \
        case TC_LESS: return (uint8_t)(x < y);               \
        case TC_LESS_EQUAL: return (uint8_t)(x <= y);        \
        case TC_GREATER: return (uint8_t)(x > y);            \
        case TC_GREATER_EQUAL: return (uint8_t)(x >= y);     \
        case TC_EQUAL: return (uint8_t)(x == y);             \
        default: return (uint8_t)(x != y);                   \
        }                                                    \
    }
TC_COMPARE(tc_compare_b, uint8_t)
TC_COMPARE(tc_compare_i32, int32_t)
TC_COMPARE(tc_compare_i64, int64_t)
TC_COMPARE(tc_compare_f32, float)
TC_COMPARE(tc_compare_f64, double)

/* Bool tensors hold 0/1 bytes; != 0 keeps results 0/1 whatever they hold. */
TC_FN uint8_t tc_logic(int op, uint8_t x, uint8_t y)
{
    switch (op) {
    case TC_AND: return (uint8_t)((x != 0) & (y != 0));
    case TC_OR: return (uint8_t)((x != 0) | (y != 0));
    default: return (uint8_t)(x == 0); /* TC_NOT */
    }
}

#define TC_FLOAT_UNARY(NAME, T, ABS, EXP, TANH, LOG, SQRT)   \
    TC_FN T NAME(int op, T x)                                \
    {                                                        \
        switch (op) {                                        \
        case TC_NEG: return -x;                              \
        case TC_ABS: return ABS(x);                          \
        case TC_RELU: return x < 0 ? (T)0 : x;               \
        case TC_SIGMOID:                                     \
            return x >= 0 ? (T)1 / ((T)1 + EXP(-x))          \
                          : EXP(x) / ((T)1 + EXP(x));        \
        case TC_TANH: return TANH(x);                        \
        case TC_EXP: return EXP(x);                          \
        case TC_LOG: return LOG(x);                          \
        default: return SQRT(x);                             \
        }                                                    \
    }
TC_FLOAT_UNARY(tc_unary_f32, float, fabsf, expf, tanhf, logf, sqrtf)
TC_FLOAT_UNARY(tc_unary_f64, double, fabs, exp, tanh, log, sqrt)

#define TC_INT_UNARY(NAME, T, U)                             \
    TC_FN T NAME(int op, T x)                                \
    {                                                        \
        switch (op) {                                        \
        case TC_NEG: return (T)(0 - (U)x);                   \
        case TC_ABS: return x < 0 ? (T)(0 - (U)x) : x;       \
        default: return x < 0 ? 0 : x; /* TC_RELU */         \
        }                                                    \
    }
TC_INT_UNARY(tc_unary_i32, int32_t, uint32_t)
TC_INT_UNARY(tc_unary_i64, int64_t, uint64_t)

/* Which (op, dtype) pairs the backend has; libtfvm sends nothing else. */
TC_FN int tc_has(int op, int dtype)
{
    if (op >= TC_ADD && op <= TC_MAX)
        return dtype == TC_F32 || dtype == TC_F64 ||
               ((dtype == TC_I32 || dtype == TC_I64) && op != TC_DIV && op != TC_MOD);
    if (op >= TC_LESS && op <= TC_NOT_EQUAL)
        return dtype >= TC_BOOL && dtype <= TC_F64;
    if (op == TC_AND || op == TC_OR || op == TC_NOT)
        return dtype == TC_BOOL;
    if (op == TC_NEG || op == TC_ABS || op == TC_RELU)
        return dtype >= TC_I32 && dtype <= TC_F64;
    if (op >= TC_SIGMOID && op <= TC_SQRT)
        return dtype == TC_F32 || dtype == TC_F64;
    return 0;
}

#endif
