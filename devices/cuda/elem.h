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

/* What the kernel of an op computes from its operands. */
enum { TC_K_BINARY, TC_K_COMPARE, TC_K_UNARY };
TC_FN int tc_kind(int op)
{
    if ((op >= TC_LESS && op <= TC_NOT_EQUAL))
        return TC_K_COMPARE;
    if (op <= TC_OR || op == TC_XOR || op >= TC_POW)
        return TC_K_BINARY;
    return TC_K_UNARY;
}

/* Semantics match devices/cpu/elementwise.c: integers wrap (computed in the
 * unsigned type); MIN/MAX follow NumPy (a NaN operand wins, equal operands
 * give y); MOD is fmod (sign of a); FLOOR_MOD is NumPy's mod (fmod moved to
 * b's sign, a zero signed as b); RELU keeps NaN and -0; SIGN keeps NaN and
 * gives +0 for either zero (NumPy); ROUND halves to even (rint in the default rounding mode);
 * SIGMOID takes the branch whose exp cannot overflow. x != x tests NaN
 * without <cmath>/<math.h> differences between C and CUDA C++. Integer DIV,
 * MOD, POW, FLOOR_DIV and FLOOR_MOD never reach the GPU (division by zero and
 * negative exponents must be errors; the CPU does them). */
#define TC_FLOAT_BINARY(NAME, T, SUF)                        \
    TC_FN T NAME(int op, T x, T y)                           \
    {                                                        \
        switch (op) {                                        \
        case TC_ADD: return x + y;                           \
        case TC_SUB: return x - y;                           \
        case TC_MUL: return x * y;                           \
        case TC_DIV: return x / y;                           \
        case TC_MOD: return fmod##SUF(x, y);                 \
        case TC_MIN: return (x < y || x != x) ? x : y;       \
        case TC_POW: /* as ISA_FPOW (isa/isa.h) */           \
            return y == 3 ? x * x * x : y == 2 ? x * x : pow##SUF(x, y); \
        case TC_FLOOR_DIV: return floor##SUF(x / y);         \
        case TC_FLOOR_MOD: {                                 \
            T r = fmod##SUF(x, y);                           \
            if (r != 0)                                      \
                return (r < 0) != (y < 0) ? r + y : r;       \
            return copysign##SUF((T)0, y);                   \
        }                                                    \
        default: return (x > y || x != x) ? x : y;           \
        }                                                    \
    }
TC_FLOAT_BINARY(tc_binary_f32, float, f)
TC_FLOAT_BINARY(tc_binary_f64, double, )

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
    case TC_XOR: return (uint8_t)((x != 0) ^ (y != 0));
    default: return (uint8_t)(x == 0); /* TC_NOT */
    }
}

#define TC_FLOAT_UNARY(NAME, T, SUF)                         \
    TC_FN T NAME(int op, T x)                                \
    {                                                        \
        switch (op) {                                        \
        case TC_NEG: return -x;                              \
        case TC_ABS: return fabs##SUF(x);                    \
        case TC_RELU: return x < 0 ? (T)0 : x;               \
        case TC_SIGMOID:                                     \
            return x >= 0 ? (T)1 / ((T)1 + exp##SUF(-x))     \
                          : exp##SUF(x) / ((T)1 + exp##SUF(x)); \
        case TC_TANH: return tanh##SUF(x);                   \
        case TC_EXP: return exp##SUF(x);                     \
        case TC_LOG: return log##SUF(x);                     \
        case TC_FLOOR: return floor##SUF(x);                 \
        case TC_CEIL: return ceil##SUF(x);                   \
        case TC_ROUND: return rint##SUF(x);                  \
        case TC_SIN: return sin##SUF(x);                     \
        case TC_COS: return cos##SUF(x);                     \
        case TC_ERF: return erf##SUF(x);                     \
        case TC_SIGN: return x > 0 ? (T)1 : x < 0 ? (T)-1 : x == 0 ? (T)0 : x; \
        default: return sqrt##SUF(x); /* TC_SQRT */          \
        }                                                    \
    }
TC_FLOAT_UNARY(tc_unary_f32, float, f)
TC_FLOAT_UNARY(tc_unary_f64, double, )

#define TC_INT_UNARY(NAME, T, U)                             \
    TC_FN T NAME(int op, T x)                                \
    {                                                        \
        switch (op) {                                        \
        case TC_NEG: return (T)(0 - (U)x);                   \
        case TC_ABS: return x < 0 ? (T)(0 - (U)x) : x;       \
        case TC_SIGN: return (T)((x > 0) - (x < 0));         \
        default: return x < 0 ? 0 : x; /* TC_RELU */         \
        }                                                    \
    }
TC_INT_UNARY(tc_unary_i32, int32_t, uint32_t)
TC_INT_UNARY(tc_unary_i64, int64_t, uint64_t)

/* Which (op, dtype) pairs the backend has; libtfvm sends nothing else. None
 * of u8, i8 or the storage dtypes (i16, u16, u32, u64, f16, bf16: only CAST,
 * on the CPU, computes on them). */
TC_FN int tc_has(int op, int dtype)
{
    const int flt = dtype == TC_F32 || dtype == TC_F64, num = flt || dtype == TC_I32 || dtype == TC_I64;
    if (op >= TC_ADD && op <= TC_MAX)
        return flt || (num && op != TC_DIV && op != TC_MOD);
    if (op >= TC_LESS && op <= TC_NOT_EQUAL)
        return dtype >= TC_BOOL && dtype <= TC_F64;
    if (op == TC_AND || op == TC_OR || op == TC_NOT || op == TC_XOR)
        return dtype == TC_BOOL;
    if (op == TC_NEG || op == TC_ABS || op == TC_RELU || op == TC_SIGN)
        return num;
    if ((op >= TC_SIGMOID && op <= TC_SQRT) || (op >= TC_FLOOR && op <= TC_ERF))
        return flt;
    if (op >= TC_POW && op <= TC_FLOOR_MOD)
        return flt;
    return 0;
}

#endif
