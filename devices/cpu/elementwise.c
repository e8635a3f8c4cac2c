/* devices/cpu/elementwise.c — the elementwise classes on the CPU: a switch for
 * all-scalar operands (the VM's hot path, no allocation) and, for tensors,
 * NumPy broadcasting over coalesced dimensions with per-(op, dtype) kernels. */
#include "devices/cpu/vec.h"
#include "devices/cpu/cpu.h"
#include "devices/cpu/act.h"
#include "devices/cpu/kern.h"
#include "devices/cpu/par.h"
#include "devices/cpu/half.h"
#include "isa/shape.h"
#include "util/half.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* What a kernel can run into; the caller turns it into a message. */
enum { EW_OK, EW_DIV0, EW_MOD0, EW_NEGEXP, EW_CAST, EW_OVERFLOW };

typedef struct ew_fault {
    double value; /* EW_CAST: the value that does not fit */
} ew_fault;

/* Computes n elements of a dense output from inputs whose consecutive
 * elements are st[k] elements apart (0 = broadcast along this run). */
typedef int (*ew_kernel)(void *out, const void *const *in, const ptrdiff_t *st, ptrdiff_t n,
                         ew_fault *f);

static const char *ew_name(unsigned d) { return tfvm_dtype_name((tfvm_dtype)d); }

/* ---- Element semantics ---------------------------------------------------------
 * Each expression reads x (and y). Integers compute in the unsigned type U so
 * that overflow wraps instead of being undefined; the conversion back to T is
 * modular on every compiler tfvm supports. DIV and MOD by -1 are spelled out
 * because INT_MIN / -1 traps on x86. Division by zero is checked before.
 * Unsigned types (u8) get their own forms: x < 0 is never true there. */
#define I_ADD(T, U) ISA_IADD(T, U, x, y) /* (isa/isa.h: ISA_INT_ARITH, their one definition) */
#define I_SUB(T, U) ISA_ISUB(T, U, x, y)
#define I_MUL(T, U) ISA_IMUL(T, U, x, y)
#define I_DIV(T, U) ISA_IDIV(T, U, x, y)
#define I_MOD(T, U) ISA_IMOD(T, U, x, y)
#define I_NEG(T, U) ((T)(0 - (U)x))
#define I_ABS(T, U) (x < 0 ? (T)(0 - (U)x) : x)
#define I_SIGN(T) ((T)((x > 0) - (x < 0)))
/* Python's // and %: the quotient rounds down, the remainder has b's sign. */
#define I_FLOOR_DIV(T, U) \
    (y == -1 ? (T)(0 - (U)x) : (T)(x / y - ((x % y != 0) & ((x < 0) != (y < 0)))))
#define I_FLOOR_MOD(T, U) \
    (y == -1 ? (T)0 : (T)(x % y + (((x % y != 0) & ((x % y < 0) != (y < 0))) ? y : 0)))
/* x ** y for y >= 0 by squaring, modulo 2^64: the low bits of T are right. */
#define I_POW(T) ((T)ew_upow((uint64_t)x, (uint64_t)y))
#define U_NEG(T) ((T)(0u - (unsigned)x))
#define X_MIN ISA_IMIN(, , x, y)
#define X_MAX ISA_IMAX(, , x, y)
/* NumPy minimum/maximum: a NaN operand wins; equal operands give y. */
#define F_MIN ((x < y || isnan(x)) ? x : y)
#define F_MAX ((x > y || isnan(x)) ? x : y)
/* SIGN as NumPy's: NaN stays NaN, either zero gives +0. */
#define F_SIGN(T) (x > 0 ? (T)1 : x < 0 ? (T)-1 : x == 0 ? (T)0 : x)
/* Float to integer: truncation must land in range; NaN fails every test. */
#define FITS_I32 ((double)x > -2147483649.0 && (double)x < 2147483648.0)
#define FITS_I64 ((double)x >= -9223372036854775808.0 && (double)x < 9223372036854775808.0)
#define FITS_U8 ((double)x > -1.0 && (double)x < 256.0)
#define FITS_I8 ((double)x > -129.0 && (double)x < 128.0)
/* RELU keeps NaN (NumPy maximum(x, 0) does); SIGMOID takes the branch whose
 * exp cannot overflow, so large |x| gives 0 or 1 instead of inf/inf. */
#define X_RELU (x < 0 ? 0 : x)
#define F_SIGMOID(EXP) (x >= 0 ? 1 / (1 + EXP(-x)) : EXP(x) / (1 + EXP(x)))

static inline uint64_t ew_upow(uint64_t x, uint64_t e)
{
    uint64_t r = 1;
    while (e) {
        if (e & 1)
            r *= x;
        x *= x;
        e >>= 1;
    }
    return r;
}

/* NumPy's float mod: fmod moved into b's sign, a zero result signed as b. */
static inline double ew_floor_mod(double x, double y)
{
    double r = fmod(x, y);
    if (r != 0)
        return (r < 0) != (y < 0) ? r + y : r;
    return copysign(0.0, y);
}
static inline float ew_floor_modf(float x, float y)
{
    float r = fmodf(x, y);
    if (r != 0)
        return (r < 0) != (y < 0) ? r + y : r;
    return copysignf(0.0f, y);
}

/* ---- Kernels ---------------------------------------------------------------------
 * PRE is a statement run before each element (a check that may return a
 * fault); EXPR computes it. The contiguous and one-side-broadcast loops are
 * written out so the compiler can vectorise them. */
#define EW_KERNEL2(NAME, TA, TO, PRE, EXPR)                                                 \
    static int NAME(void *o_, const void *const *in, const ptrdiff_t *st, ptrdiff_t n,      \
                    ew_fault *f)                                                            \
    {                                                                                       \
        TO *restrict o = o_;                                                                \
        const TA *a = in[0], *b = in[1];                                                    \
        const ptrdiff_t sa = st[0], sb = st[1];                                             \
        (void)f;                                                                            \
        if (sa == 1 && sb == 1) {                                                           \
            for (ptrdiff_t i = 0; i < n; i++) {                                             \
                const TA x = a[i], y = b[i];                                                \
                PRE;                                                                        \
                o[i] = (EXPR);                                                              \
            }                                                                               \
        } else if (sa == 1 && sb == 0) {                                                    \
            const TA y = b[0];                                                              \
            for (ptrdiff_t i = 0; i < n; i++) {                                             \
                const TA x = a[i];                                                          \
                PRE;                                                                        \
                o[i] = (EXPR);                                                              \
            }                                                                               \
        } else if (sa == 0 && sb == 1) {                                                    \
            const TA x = a[0];                                                              \
            for (ptrdiff_t i = 0; i < n; i++) {                                             \
                const TA y = b[i];                                                          \
                PRE;                                                                        \
                o[i] = (EXPR);                                                              \
            }                                                                               \
        } else {                                                                            \
            for (ptrdiff_t i = 0; i < n; i++) {                                             \
                const TA x = a[i * sa], y = b[i * sb];                                      \
                PRE;                                                                        \
                o[i] = (EXPR);                                                              \
            }                                                                               \
        }                                                                                   \
        return EW_OK;                                                                       \
    }

/* x is LD(element) of type TX (LD empty: the element itself) */
#define EW_KERNEL1X(NAME, TA, TX, TO, LD, PRE, EXPR)                                       \
    static int NAME(void *o_, const void *const *in, const ptrdiff_t *st, ptrdiff_t n,      \
                    ew_fault *f)                                                            \
    {                                                                                       \
        TO *restrict o = o_;                                                                \
        const TA *a = in[0];                                                                \
        const ptrdiff_t sa = st[0];                                                         \
        (void)f;                                                                            \
        if (sa == 1) {                                                                      \
            for (ptrdiff_t i = 0; i < n; i++) {                                             \
                const TX x = LD(a[i]);                                                      \
                PRE;                                                                        \
                o[i] = (EXPR);                                                              \
            }                                                                               \
        } else {                                                                            \
            for (ptrdiff_t i = 0; i < n; i++) {                                             \
                const TX x = LD(a[i * sa]);                                                 \
                PRE;                                                                        \
                o[i] = (EXPR);                                                              \
            }                                                                               \
        }                                                                                   \
        return EW_OK;                                                                       \
    }

#define EW_KERNEL1(NAME, TA, TO, PRE, EXPR) EW_KERNEL1X(NAME, TA, TA, TO, , PRE, EXPR)

#define EW_SELECT(NAME, T)                                                                  \
    static int NAME(void *o_, const void *const *in, const ptrdiff_t *st, ptrdiff_t n,      \
                    ew_fault *f)                                                            \
    {                                                                                       \
        T *restrict o = o_;                                                                 \
        const uint8_t *c = in[0];                                                           \
        const T *a = in[1], *b = in[2];                                                     \
        const ptrdiff_t sc = st[0], sa = st[1], sb = st[2];                                 \
        (void)f;                                                                            \
        if (sc == 1 && sa == 1 && sb == 1) {                                                \
            for (ptrdiff_t i = 0; i < n; i++)                                               \
                o[i] = c[i] ? a[i] : b[i];                                                  \
        } else {                                                                            \
            for (ptrdiff_t i = 0; i < n; i++)                                               \
                o[i] = c[i * sc] ? a[i * sa] : b[i * sb];                                   \
        }                                                                                   \
        return EW_OK;                                                                       \
    }

#define DIV_CHECK if (y == 0) return EW_DIV0
#define MOD_CHECK if (y == 0) return EW_MOD0
#define EXP_CHECK if (y < 0) return EW_NEGEXP

/* Signed integers. */
#define INT_KERNELS(S, T, U)                                         \
    EW_KERNEL2(k_add_##S, T, T, , I_ADD(T, U))                       \
    EW_KERNEL2(k_sub_##S, T, T, , I_SUB(T, U))                       \
    EW_KERNEL2(k_mul_##S, T, T, , I_MUL(T, U))                       \
    EW_KERNEL2(k_div_##S, T, T, DIV_CHECK, I_DIV(T, U))              \
    EW_KERNEL2(k_mod_##S, T, T, MOD_CHECK, I_MOD(T, U))              \
    EW_KERNEL2(k_min_##S, T, T, , X_MIN)                             \
    EW_KERNEL2(k_max_##S, T, T, , X_MAX)                             \
    EW_KERNEL2(k_pow_##S, T, T, EXP_CHECK, I_POW(T))                 \
    EW_KERNEL2(k_floor_div_##S, T, T, DIV_CHECK, I_FLOOR_DIV(T, U))  \
    EW_KERNEL2(k_floor_mod_##S, T, T, MOD_CHECK, I_FLOOR_MOD(T, U))  \
    EW_KERNEL1(k_neg_##S, T, T, , I_NEG(T, U))                       \
    EW_KERNEL1(k_abs_##S, T, T, , I_ABS(T, U))                       \
    EW_KERNEL1(k_relu_##S, T, T, , X_RELU)                           \
    EW_KERNEL1(k_sign_##S, T, T, , I_SIGN(T))

/* Unsigned integers: ABS and RELU are the identity, SIGN is x != 0. */
#define UINT_KERNELS(S, T)                                           \
    EW_KERNEL2(k_add_##S, T, T, , (T)(x + y))                        \
    EW_KERNEL2(k_sub_##S, T, T, , (T)(x - y))                        \
    EW_KERNEL2(k_mul_##S, T, T, , (T)((unsigned)x * y))              \
    EW_KERNEL2(k_div_##S, T, T, DIV_CHECK, (T)(x / y))               \
    EW_KERNEL2(k_mod_##S, T, T, MOD_CHECK, (T)(x % y))               \
    EW_KERNEL2(k_min_##S, T, T, , X_MIN)                             \
    EW_KERNEL2(k_max_##S, T, T, , X_MAX)                             \
    EW_KERNEL2(k_pow_##S, T, T, , I_POW(T))                          \
    EW_KERNEL2(k_floor_div_##S, T, T, DIV_CHECK, (T)(x / y))         \
    EW_KERNEL2(k_floor_mod_##S, T, T, MOD_CHECK, (T)(x % y))         \
    EW_KERNEL1(k_neg_##S, T, T, , U_NEG(T))                          \
    EW_KERNEL1(k_abs_##S, T, T, , x)                                 \
    EW_KERNEL1(k_relu_##S, T, T, , x)                                \
    EW_KERNEL1(k_sign_##S, T, T, , (T)(x != 0))

/* POW of a run by one exponent of 2 or 3 (RMSNorm's and an older
 * LayerNorm's x^2, GELU's x^3): ISA_FPOW with the exponent a constant, its
 * products in a loop the compiler vectorizes, where the general loop took a
 * branch and a call's path for every element (Llama's five x^2 were 5.6% of
 * its run) */
#define POW_BY_PRODUCTS(S, T, SUF)                                                            \
    static int k_pow_##S(void *o_, const void *const *in, const ptrdiff_t *st, ptrdiff_t n, ew_fault *f) \
    {                                                                                         \
        const T *a = in[0], y = st[1] == 0 ? *(const T *)in[1] : 0;                           \
        T *restrict o = o_;                                                                   \
        if (st[0] != 1 || st[1] != 0 || (y != 2 && y != 3))                                  \
            return k_powg_##S(o_, in, st, n, f);                                              \
        if (y == 2)                                                                           \
            for (ptrdiff_t i = 0; i < n; i++)                                                 \
                o[i] = ISA_FPOW(a[i], (T)2, pow##SUF);                                        \
        else                                                                                  \
            for (ptrdiff_t i = 0; i < n; i++)                                                 \
                o[i] = ISA_FPOW(a[i], (T)3, pow##SUF);                                        \
        return EW_OK;                                                                         \
    }
#define FLOAT_KERNELS(S, T, SUF, FMODF)                              \
    EW_KERNEL2(k_add_##S, T, T, , x + y)                             \
    EW_KERNEL2(k_sub_##S, T, T, , x - y)                             \
    EW_KERNEL2(k_mul_##S, T, T, , x * y)                             \
    EW_KERNEL2(k_div_##S, T, T, , x / y)                             \
    EW_KERNEL2(k_mod_##S, T, T, , fmod##SUF(x, y))                   \
    EW_KERNEL2(k_min_##S, T, T, , F_MIN)                             \
    EW_KERNEL2(k_max_##S, T, T, , F_MAX)                             \
    EW_KERNEL2(k_powg_##S, T, T, , ISA_FPOW(x, y, pow##SUF))         \
    POW_BY_PRODUCTS(S, T, SUF)                                       \
    EW_KERNEL2(k_floor_div_##S, T, T, , floor##SUF(x / y))           \
    EW_KERNEL2(k_floor_mod_##S, T, T, , FMODF(x, y))                 \
    EW_KERNEL1(k_neg_##S, T, T, , -x)                                \
    EW_KERNEL1(k_abs_##S, T, T, , fabs##SUF(x))                      \
    EW_KERNEL1(k_relu_##S, T, T, , X_RELU)                           \
    EW_KERNEL1(k_sign_##S, T, T, , F_SIGN(T))                        \
    EW_KERNEL1(k_sqrt_##S, T, T, , sqrt##SUF(x))                     \
    EW_KERNEL1(k_floor_##S, T, T, , floor##SUF(x))                   \
    EW_KERNEL1(k_ceil_##S, T, T, , ceil##SUF(x))                     \
    EW_KERNEL1(k_round_##S, T, T, , nearbyint##SUF(x))               \
    EW_KERNEL1(k_sin_##S, T, T, , sin##SUF(x))                       \
    EW_KERNEL1(k_cos_##S, T, T, , cos##SUF(x))

/* k_LT_i32 .. k_NE_i8: one kernel per comparison of isa/isa.h's list */
#define CMP_KERNEL(N, OP, C, S, T) EW_KERNEL2(k_##N##_##S, T, uint8_t, , (uint8_t)(x C y))
#define CMP_KERNELS(S, T) ISA_COMPARISONS_WITH(CMP_KERNEL, S, T)

INT_KERNELS(i32, int32_t, uint32_t)
INT_KERNELS(i64, int64_t, uint64_t)
INT_KERNELS(i8, int8_t, uint8_t)
UINT_KERNELS(u8, uint8_t)
FLOAT_KERNELS(f32, float, f, ew_floor_modf)
FLOAT_KERNELS(f64, double, , ew_floor_mod)
/* f64 SIGMOID, TANH, EXP, ERF, LOG through libm; f32 through act.c (below) */
EW_KERNEL1(k_sigmoid_f64, double, double, , F_SIGMOID(exp))
EW_KERNEL1(k_tanh_f64, double, double, , tanh(x))
EW_KERNEL1(k_exp_f64, double, double, , exp(x))
EW_KERNEL1(k_erf_f64, double, double, , erf(x))
EW_KERNEL1(k_log_f64, double, double, , log(x))
CMP_KERNELS(b, uint8_t)
CMP_KERNELS(i32, int32_t)
CMP_KERNELS(i64, int64_t)
CMP_KERNELS(f32, float)
CMP_KERNELS(f64, double)
CMP_KERNELS(u8, uint8_t)
CMP_KERNELS(i8, int8_t)
/* Bitwise ops on the integer dtypes (BITAND .. SHR). A shift count outside
 * [0, bits) is defined (C leaves it undefined): SHL gives 0, SHR gives what
 * shifting one bit at a time would, 0 or -1 by the sign. Signed SHR is
 * arithmetic, as gcc and clang define >> on negative values. */
#define BW_IN(BITS) ((uint64_t)(int64_t)y < (BITS)) /* 0 <= y < BITS, one test for every dtype */
#define BW_SHL(T, U, BITS) (BW_IN(BITS) ? (T)((U)x << y) : (T)0)
#define BW_SHR(T, BITS, NEG) (BW_IN(BITS) ? (T)(x >> y) : (T)((NEG) ? -1 : 0))
#define BIT_KERNELS(S, T, U, BITS, NEG)                          \
    EW_KERNEL2(k_bitand_##S, T, T, , (T)(x & y))                 \
    EW_KERNEL2(k_bitor_##S, T, T, , (T)(x | y))                  \
    EW_KERNEL2(k_bitxor_##S, T, T, , (T)(x ^ y))                 \
    EW_KERNEL2(k_shl_##S, T, T, , BW_SHL(T, U, BITS))            \
    EW_KERNEL2(k_shr_##S, T, T, , BW_SHR(T, BITS, NEG))          \
    EW_KERNEL1(k_bitnot_##S, T, T, , (T)~x)
BIT_KERNELS(i32, int32_t, uint32_t, 32, x < 0)
BIT_KERNELS(i64, int64_t, uint64_t, 64, x < 0)
BIT_KERNELS(i8, int8_t, uint8_t, 8, x < 0)
BIT_KERNELS(u8, uint8_t, uint8_t, 8, 0)
/* Checked + - * (ADD_OV ..., the compiler's --overflow=trap; helper L, issue 15). */
#define OV_CHECK(T, OP) T ov_; if (__builtin_##OP##_overflow(x, y, &ov_)) return EW_OVERFLOW
#define OV_KERNELS(S, T)                                        \
    EW_KERNEL2(k_add_ov_##S, T, T, OV_CHECK(T, add), ov_)       \
    EW_KERNEL2(k_sub_ov_##S, T, T, OV_CHECK(T, sub), ov_)       \
    EW_KERNEL2(k_mul_ov_##S, T, T, OV_CHECK(T, mul), ov_)
OV_KERNELS(i32, int32_t)
OV_KERNELS(i64, int64_t)
OV_KERNELS(i8, int8_t)
OV_KERNELS(u8, uint8_t)
/* Bool tensors hold 0/1 bytes; the != 0 keeps results 0/1 regardless. */
EW_KERNEL2(k_and, uint8_t, uint8_t, , (uint8_t)((x != 0) & (y != 0)))
EW_KERNEL2(k_or, uint8_t, uint8_t, , (uint8_t)((x != 0) | (y != 0)))
EW_KERNEL2(k_xor, uint8_t, uint8_t, , (uint8_t)((x != 0) ^ (y != 0)))
EW_KERNEL1(k_not, uint8_t, uint8_t, , (uint8_t)(x == 0))
EW_SELECT(k_sel1, uint8_t)
EW_SELECT(k_sel4, uint32_t)
EW_SELECT(k_sel8, uint64_t)

/* CAST kernels, k_cast_FROM_TO. Integers narrow by wrapping (like NumPy's
 * astype): through the target's unsigned type, which C defines as modular.
 * Floats to integers must fit after truncation toward zero. f16 and bf16 go
 * through f32 (exact), and to them from f64 and the integers through f64 and
 * ut_f64_to_f32_odd, so that each rounds once. */
#define F2I_CHECK(FITS)                         \
    if (!(FITS)) {                              \
        f->value = (double)x;                   \
        return EW_CAST;                         \
    }
#define FITS_I16 ((double)x > -32769.0 && (double)x < 32768.0)
#define FITS_U16 ((double)x > -1.0 && (double)x < 65536.0)
#define FITS_U32 ((double)x > -1.0 && (double)x < 4294967296.0)
#define FITS_U64 ((double)x > -1.0 && (double)x < 18446744073709551616.0)
/* the value a source element stands for: a half's f32, else itself */
#define LD_F16(v) ut_f16_to_f32(v)
#define LD_BF16(v) ut_bf16_to_f32(v)
/* to every target from source FS (C type FT, element read as LD(element) of
 * type XT); I2F is how an element becomes a double for the halves */
#define CASTS_FROM_INT(FS, FT)                                                                    \
    EW_KERNEL1(k_cast_##FS##_b, FT, uint8_t, , (uint8_t)(x != 0))                                 \
    CAST_INTS(FS, FT, FT, , CAST_I2I)                                                             \
    EW_KERNEL1(k_cast_##FS##_f32, FT, float, , (float)x)                                          \
    EW_KERNEL1(k_cast_##FS##_f64, FT, double, , (double)x)                                        \
    EW_KERNEL1(k_cast_##FS##_f16, FT, uint16_t, , ut_f64_to_f16((double)x))                       \
    EW_KERNEL1(k_cast_##FS##_bf16, FT, uint16_t, , ut_f64_to_bf16((double)x))
#define CAST_I2I(FS, FT, XT, LD, TS, TT, TU, FITS) EW_KERNEL1(k_cast_##FS##_##TS, FT, TT, , (TT)(TU)x)
#define CAST_F2I(FS, FT, XT, LD, TS, TT, TU, FITS) \
    EW_KERNEL1X(k_cast_##FS##_##TS, FT, XT, TT, LD, F2I_CHECK(FITS), (TT)x)
#define CAST_INTS(FS, FT, XT, LD, M)                     \
    M(FS, FT, XT, LD, i32, int32_t, uint32_t, FITS_I32)  \
    M(FS, FT, XT, LD, i64, int64_t, uint64_t, FITS_I64)  \
    M(FS, FT, XT, LD, u8, uint8_t, uint8_t, FITS_U8)     \
    M(FS, FT, XT, LD, i8, int8_t, uint8_t, FITS_I8)      \
    M(FS, FT, XT, LD, i16, int16_t, uint16_t, FITS_I16)  \
    M(FS, FT, XT, LD, u16, uint16_t, uint16_t, FITS_U16) \
    M(FS, FT, XT, LD, u32, uint32_t, uint32_t, FITS_U32) \
    M(FS, FT, XT, LD, u64, uint64_t, uint64_t, FITS_U64)
/* from a float or half (read as XT through LD); TO_F16/TO_BF16 narrow an XT */
#define CASTS_FROM_FLOAT(FS, FT, XT, LD, TO_F16, TO_BF16)                                         \
    EW_KERNEL1X(k_cast_##FS##_b, FT, XT, uint8_t, LD, , (uint8_t)(x != 0))                        \
    CAST_INTS(FS, FT, XT, LD, CAST_F2I)                                                           \
    EW_KERNEL1X(k_cast_##FS##_f32, FT, XT, float, LD, , (float)x)                                 \
    EW_KERNEL1X(k_cast_##FS##_f64, FT, XT, double, LD, , (double)x)                               \
    EW_KERNEL1X(k_cast_##FS##_f16, FT, XT, uint16_t, LD, , TO_F16(x))                             \
    EW_KERNEL1X(k_cast_##FS##_bf16, FT, XT, uint16_t, LD, , TO_BF16(x))
CASTS_FROM_INT(b, uint8_t)
CASTS_FROM_INT(i32, int32_t)
CASTS_FROM_INT(i64, int64_t)
CASTS_FROM_INT(u8, uint8_t)
CASTS_FROM_INT(i8, int8_t)
CASTS_FROM_INT(i16, int16_t)
CASTS_FROM_INT(u16, uint16_t)
CASTS_FROM_INT(u32, uint32_t)
CASTS_FROM_INT(u64, uint64_t)
CASTS_FROM_FLOAT(f32, float, float, , ut_f32_to_f16, ut_f32_to_bf16)
CASTS_FROM_FLOAT(f64, double, double, , ut_f64_to_f16, ut_f64_to_bf16)
CASTS_FROM_FLOAT(f16, uint16_t, float, LD_F16, ut_f32_to_f16, ut_f32_to_bf16)
CASTS_FROM_FLOAT(bf16, uint16_t, float, LD_BF16, ut_f32_to_f16, ut_f32_to_bf16)
/* the casts models are full of, between the halves and f32, vectorised
 * (devices/cpu/half.c) when the operand is contiguous */
#define CAST_HALF_VEC(NAME, TA, TO, FN, SCALAR)                                                   \
    static int NAME(void *o_, const void *const *in, const ptrdiff_t *st, ptrdiff_t n, ew_fault *f) \
    {                                                                                             \
        (void)f;                                                                                  \
        TO *o = o_;                                                                               \
        const TA *a = in[0];                                                                      \
        if (st[0] == 1)                                                                           \
            FN(o, a, (size_t)n);                                                                  \
        else                                                                                      \
            for (ptrdiff_t i = 0; i < n; i++)                                                     \
                o[i] = SCALAR(a[i * st[0]]);                                                      \
        return EW_OK;                                                                             \
    }
CAST_HALF_VEC(k_castv_f16_f32, uint16_t, float, dev_f16_to_f32_n, ut_f16_to_f32)
CAST_HALF_VEC(k_castv_f32_f16, float, uint16_t, dev_f32_to_f16_n, ut_f32_to_f16)
CAST_HALF_VEC(k_castv_bf16_f32, uint16_t, float, dev_bf16_to_f32_n, ut_bf16_to_f32)
CAST_HALF_VEC(k_castv_f32_bf16, float, uint16_t, dev_f32_to_bf16_n, ut_f32_to_bf16)

enum {
    B = TFVM_BOOL, I32 = TFVM_I32, I64 = TFVM_I64, F32 = TFVM_F32, F64 = TFVM_F64,
    U8 = TFVM_U8, I8 = TFVM_I8, I16 = TFVM_I16, U16 = TFVM_U16, U32 = TFVM_U32, U64 = TFVM_U64,
    F16 = TFVM_F16, BF16 = TFVM_BF16, NDT = ISA_DTYPE_LAST + 1
};

/* TANH, EXP, SIGMOID, ERF and LOG on f32: act.c's array functions
 * (vectorised); a strided operand is gathered 256 elements at a time, so
 * that every element gets the same function whatever the layout. */
static void ew_act_f32(void (*fn)(float *, const float *, size_t), void *o_, const void *const *in,
                       const ptrdiff_t *st, ptrdiff_t n)
{
    float *o = o_;
    const float *a = in[0];
    if (st[0] == 1) {
        fn(o, a, (size_t)n);
        return;
    }
    float buf[256];
    for (ptrdiff_t i = 0; i < n; i += 256) {
        const ptrdiff_t m = n - i < 256 ? n - i : 256;
        for (ptrdiff_t j = 0; j < m; j++)
            buf[j] = a[(i + j) * st[0]];
        fn(o + i, buf, (size_t)m);
    }
}
#define EW_ACT_F32(NAME, FN)                                                                     \
    static int NAME(void *o, const void *const *in, const ptrdiff_t *st, ptrdiff_t n, ew_fault *f) \
    {                                                                                            \
        (void)f;                                                                                 \
        ew_act_f32(FN, o, in, st, n);                                                            \
        return EW_OK;                                                                            \
    }
EW_ACT_F32(k_tanhv_f32, dev_tanhf_n)
EW_ACT_F32(k_expv_f32, dev_expf_n)
EW_ACT_F32(k_sigmoidv_f32, dev_sigmoidf_n)
EW_ACT_F32(k_erfv_f32, dev_erff_n)
EW_ACT_F32(k_logv_f32, dev_logf_n)

/* Kernel by opcode and operand dtype (SELECT: by the dtype of a and b). A
 * (op, dtype) that ops.def's `types` allows must have one here:
 * test_elementwise's table_kernels checks every one. */
#define NUM(k) {[I32] = k##_i32, [I64] = k##_i64, [F32] = k##_f32, [F64] = k##_f64, [U8] = k##_u8, [I8] = k##_i8}
#define ALL(k) {[B] = k##_b, [I32] = k##_i32, [I64] = k##_i64, [F32] = k##_f32, [F64] = k##_f64, \
                [U8] = k##_u8, [I8] = k##_i8}
#define FLT(k) {[F32] = k##_f32, [F64] = k##_f64}
#define INT(k) {[I32] = k##_i32, [I64] = k##_i64, [U8] = k##_u8, [I8] = k##_i8}
static const ew_kernel ew_kernels[ISA_OP_COUNT][NDT] = {
    [ISA_ADD] = NUM(k_add), [ISA_SUB] = NUM(k_sub), [ISA_MUL] = NUM(k_mul),
    [ISA_DIV] = NUM(k_div), [ISA_MOD] = NUM(k_mod), [ISA_MIN] = NUM(k_min),
    [ISA_MAX] = NUM(k_max), [ISA_NEG] = NUM(k_neg), [ISA_ABS] = NUM(k_abs),
#define CMP_ROW(N, OP, C) [OP] = ALL(k_##N),
    ISA_COMPARISONS(CMP_ROW)
    [ISA_AND] = {[B] = k_and}, [ISA_OR] = {[B] = k_or}, [ISA_NOT] = {[B] = k_not},
    [ISA_XOR] = {[B] = k_xor},
    [ISA_SELECT] = {[B] = k_sel1, [I32] = k_sel4, [I64] = k_sel8, [F32] = k_sel4, [F64] = k_sel8,
                    [U8] = k_sel1, [I8] = k_sel1},
    [ISA_RELU] = NUM(k_relu), [ISA_SIGMOID] = {[F32] = k_sigmoidv_f32, [F64] = k_sigmoid_f64},
    [ISA_TANH] = {[F32] = k_tanhv_f32, [F64] = k_tanh_f64}, [ISA_EXP] = {[F32] = k_expv_f32, [F64] = k_exp_f64},
    [ISA_LOG] = {[F32] = k_logv_f32, [F64] = k_log_f64}, [ISA_SQRT] = FLT(k_sqrt),
    [ISA_FLOOR] = FLT(k_floor), [ISA_CEIL] = FLT(k_ceil), [ISA_ROUND] = FLT(k_round),
    [ISA_SIN] = FLT(k_sin), [ISA_COS] = FLT(k_cos), [ISA_ERF] = {[F32] = k_erfv_f32, [F64] = k_erf_f64},
    [ISA_SIGN] = NUM(k_sign), [ISA_POW] = NUM(k_pow), [ISA_FLOOR_DIV] = NUM(k_floor_div),
    [ISA_FLOOR_MOD] = NUM(k_floor_mod),
    [ISA_BITAND] = INT(k_bitand), [ISA_BITOR] = INT(k_bitor), [ISA_BITXOR] = INT(k_bitxor),
    [ISA_BITNOT] = INT(k_bitnot), [ISA_SHL] = INT(k_shl), [ISA_SHR] = INT(k_shr),
    [ISA_ADD_OV] = INT(k_add_ov), [ISA_SUB_OV] = INT(k_sub_ov), [ISA_MUL_OV] = INT(k_mul_ov),
};
/* [from][to]; the diagonal copies (unused: a same-dtype CAST shares its input). */
#define CASTS_TO(F)                                                                         \
    {[B] = k_cast_##F##_b, [I32] = k_cast_##F##_i32, [I64] = k_cast_##F##_i64,             \
     [F32] = k_cast_##F##_f32, [F64] = k_cast_##F##_f64, [U8] = k_cast_##F##_u8,           \
     [I8] = k_cast_##F##_i8, [I16] = k_cast_##F##_i16, [U16] = k_cast_##F##_u16,           \
     [U32] = k_cast_##F##_u32, [U64] = k_cast_##F##_u64, [F16] = k_cast_##F##_f16,         \
     [BF16] = k_cast_##F##_bf16}
static const ew_kernel ew_casts[NDT][NDT] = {
    [B] = CASTS_TO(b),     [I32] = CASTS_TO(i32), [I64] = CASTS_TO(i64), [F32] = CASTS_TO(f32),
    [F64] = CASTS_TO(f64), [U8] = CASTS_TO(u8),   [I8] = CASTS_TO(i8),   [I16] = CASTS_TO(i16),
    [U16] = CASTS_TO(u16), [U32] = CASTS_TO(u32), [U64] = CASTS_TO(u64), [F16] = CASTS_TO(f16),
    [BF16] = CASTS_TO(bf16),
};
static ew_kernel ew_cast_kernel(uint8_t from, uint8_t to)
{
    if (from == F16 && to == F32) return k_castv_f16_f32;
    if (from == F32 && to == F16) return k_castv_f32_f16;
    if (from == BF16 && to == F32) return k_castv_bf16_f32;
    if (from == F32 && to == BF16) return k_castv_f32_bf16;
    return ew_casts[from][to];
}

/* ---- Type rules (the one place that decides result dtypes and type errors) ----
 * What an op takes and gives is ops.def's `types` and `result`. */

/* "SIGMOID" -> "sigmoid", for messages. */
static const char *ew_lower(const char *name, char *buf, size_t size)
{
    size_t i = 0;
    for (; name[i] && i + 1 < size; i++)
        buf[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
    buf[i] = '\0';
    return buf;
}

static tfvm_status ew_types(isa_op op, uint32_t attr, const uint8_t *dt, uint8_t *res,
                            char *msg, size_t ms)
{
    const isa_op_info *info = &isa_ops[op];
    char lname[32], list[64];
    for (int k = 0; k < info->n_in; k++)
        if (!isa_dtype_valid(dt[k]))
            return ut_msg(msg, ms, TFVM_ERR_INTERNAL, "invalid operand dtype %u", dt[k]);
    if (info->cls < ISA_CLASS_BINARY || info->cls == ISA_CLASS_TENSOR)
        return ut_msg(msg, ms, TFVM_ERR_INTERNAL, "%s is not an elementwise op", info->name);
    if (info->cls == ISA_CLASS_SELECT) {
        if (dt[0] != B)
            return ut_msg(msg, ms, TFVM_ERR_TYPE, "condition must be bool, got %s", ew_name(dt[0]));
        if (dt[1] != dt[2])
            return ut_msg(msg, ms, TFVM_ERR_TYPE, "dtype mismatch: %s and %s", ew_name(dt[1]),
                          ew_name(dt[2]));
    } else if (info->n_in == 2 && dt[0] != dt[1]) {
        return ut_msg(msg, ms, TFVM_ERR_TYPE, "dtype mismatch: %s and %s", ew_name(dt[0]),
                      ew_name(dt[1]));
    }
    if (op == ISA_CAST && !isa_dtype_valid(attr))
        return ut_msg(msg, ms, TFVM_ERR_INTERNAL, "invalid CAST target dtype %u", attr);
    const uint8_t d = info->cls == ISA_CLASS_SELECT ? dt[1] : dt[0];
    if (!isa_takes(op, d)) {
        if (info->types == ISA_TYPES_BOOL)
            return ut_msg(msg, ms, TFVM_ERR_TYPE, "logic needs bool operands, got %s", ew_name(d));
        if (d == B && info->types == ISA_TYPES_NUM)
            return ut_msg(msg, ms, TFVM_ERR_TYPE, "arithmetic on bool is not defined");
        if (info->types == ISA_TYPES_FLT)
            return ut_msg(msg, ms, TFVM_ERR_TYPE, "%s needs a float operand (f32 or f64), got %s",
                          ew_lower(info->name, lname, sizeof lname), ew_name(d));
        return ut_msg(msg, ms, TFVM_ERR_TYPE, "%s needs %s, got %s",
                      ew_lower(info->name, lname, sizeof lname),
                      isa_types_list(info->types, list, sizeof list), ew_name(d));
    }
    *res = isa_result_dtype(op, dt, attr);
    return TFVM_OK;
}

static tfvm_status ew_cast_fail(char *msg, size_t ms, unsigned from, double v, unsigned to)
{
    if (isnan(v))
        return ut_msg(msg, ms, TFVM_ERR_ARITH, "cannot cast %s nan to %s", ew_name(from),
                       ew_name(to));
    return ut_msg(msg, ms, TFVM_ERR_ARITH, "cannot cast %s %g to %s (out of range)",
                   ew_name(from), v, ew_name(to));
}

static tfvm_status ew_fault_msg(int fault, const ew_fault *f, unsigned from, unsigned to,
                                char *msg, size_t ms)
{
    switch (fault) {
    case EW_DIV0: return ut_msg(msg, ms, TFVM_ERR_ARITH, "integer division by zero");
    case EW_MOD0: return ut_msg(msg, ms, TFVM_ERR_ARITH, "integer modulo by zero");
    case EW_NEGEXP: return ut_msg(msg, ms, TFVM_ERR_ARITH, "integer power with a negative exponent");
    case EW_OVERFLOW: return ut_msg(msg, ms, TFVM_ERR_ARITH, "%s overflow", ew_name(from));
    default: return ew_cast_fail(msg, ms, from, f->value, to);
    }
}

/* ---- Scalars ------------------------------------------------------------------------
 * The hot path: every operand a scalar, so no allocation and no loops. The
 * arithmetic, comparisons and logic of the wide dtypes are written out; every
 * other op and dtype runs its tensor kernel on one element. */
/* (isa/isa.h: isa_arith_S, ISA_INT_ARITH; false only for DIV or MOD by 0) */
#define SCALAR_INT(F)                                                                  \
    do {                                                                               \
        if (!isa_arith_##F(op, in[0].u.F, in[1].u.F, &r.u.F))                          \
            return ew_fault_msg(op == ISA_DIV ? EW_DIV0 : EW_MOD0, NULL, 0, 0, msg, ms); \
    } while (0)

#define SCALAR_FLOAT(F, T, FMOD)                                                       \
    do {                                                                               \
        const T x = in[0].u.F, y = in[1].u.F;                                          \
        switch (op) {                                                                  \
        case ISA_ADD: r.u.F = x + y; break;                                            \
        case ISA_SUB: r.u.F = x - y; break;                                            \
        case ISA_MUL: r.u.F = x * y; break;                                            \
        case ISA_DIV: r.u.F = x / y; break;                                            \
        case ISA_MOD: r.u.F = FMOD(x, y); break;                                       \
        case ISA_MIN: r.u.F = F_MIN; break;                                            \
        default: r.u.F = F_MAX; break;                                                 \
        }                                                                              \
    } while (0)

/* (isa/isa.h: the one definition of each comparison) */
#define SCALAR_CMP(F) (r.u.b = isa_compare_##F(op, in[0].u.F, in[1].u.F))

/* Any elementwise op on scalars: its kernel on one element. */
static tfvm_status ew_scalar_kernel(isa_op op, uint32_t attr, const dev_value *in, dev_value *out,
                                    char *msg, size_t ms)
{
    const int n = isa_ops[op].n_in;
    uint8_t dt[3] = {0}, rd = 0;
    const void *p[3] = {NULL};
    for (int k = 0; k < n; k++) {
        dt[k] = in[k].dtype;
        p[k] = &in[k].u; /* every member of the union starts at its first byte */
    }
    tfvm_status st = ew_types(op, attr, dt, &rd, msg, ms);
    if (st)
        return st;
    dev_value r = {.dtype = rd};
    if (op == ISA_CAST && rd == dt[0]) {
        r.u = in[0].u;
        *out = r;
        return TFVM_OK;
    }
    ew_kernel kern = op == ISA_CAST ? ew_cast_kernel(dt[0], rd)
                                    : ew_kernels[op][op == ISA_SELECT ? dt[1] : dt[0]];
    if (!kern)
        return ut_msg(msg, ms, TFVM_ERR_INTERNAL, "no CPU kernel for %s on %s",
                      isa_ops[op].name, ew_name(dt[0]));
    static const ptrdiff_t one[3] = {1, 1, 1};
    ew_fault fault = {0};
    int rc = kern(&r.u, p, one, 1, &fault);
    if (rc)
        return ew_fault_msg(rc, &fault, dt[0], rd, msg, ms);
    *out = r;
    return TFVM_OK;
}

static tfvm_status ew_scalar(isa_op op, uint32_t attr, const dev_value *in, dev_value *out,
                             char *msg, size_t ms)
{
    const uint8_t d = in[0].dtype;
    dev_value r = {.dtype = d};
    switch (op) {
    case ISA_ADD: case ISA_SUB: case ISA_MUL: case ISA_DIV: case ISA_MOD: case ISA_MIN: case ISA_MAX:
        if (in[1].dtype != d)
            break;
        switch (d) {
        case I32: SCALAR_INT(i32); *out = r; return TFVM_OK;
        case I64: SCALAR_INT(i64); *out = r; return TFVM_OK;
        case F32: SCALAR_FLOAT(f32, float, fmodf); *out = r; return TFVM_OK;
        case F64: SCALAR_FLOAT(f64, double, fmod); *out = r; return TFVM_OK;
        default: break;
        }
        break;
    ISA_COMPARISONS(ISA_COMPARISON_LABEL)
        if (in[1].dtype != d)
            break;
        r.dtype = B;
        switch (d) {
        case B: SCALAR_CMP(b); *out = r; return TFVM_OK;
        case I32: SCALAR_CMP(i32); *out = r; return TFVM_OK;
        case I64: SCALAR_CMP(i64); *out = r; return TFVM_OK;
        case F32: SCALAR_CMP(f32); *out = r; return TFVM_OK;
        case F64: SCALAR_CMP(f64); *out = r; return TFVM_OK;
        default: break;
        }
        break;
    case ISA_AND: case ISA_OR: case ISA_NOT:
        if (d != B || (op != ISA_NOT && in[1].dtype != B))
            break;
        r.u.b = op == ISA_NOT ? !in[0].u.b
              : op == ISA_AND ? (in[0].u.b && in[1].u.b)
                              : (in[0].u.b || in[1].u.b);
        *out = r;
        return TFVM_OK;
    case ISA_SELECT:
        if (d != B || in[1].dtype != in[2].dtype || !isa_takes(op, in[1].dtype))
            break;
        r.dtype = in[1].dtype;
        r.u = in[0].u.b ? in[1].u : in[2].u;
        *out = r;
        return TFVM_OK;
    default:
        break;
    }
    return ew_scalar_kernel(op, attr, in, out, msg, ms);
}

/* ---- Tensors ------------------------------------------------------------------------ */
#define EW_PAR_ELEMS (INT64_C(1) << 13) /* (ew_tensor: where float ops split) */

/* A float op (whose kernels never fault) over one run, or rows of one run,
 * in parallel chunks: items are elements (m == 1) or rows (m == 2). */
typedef struct ew_par {
    ew_kernel kern;
    char *o;
    const char *base[3];
    size_t isz[3], osz;
    int n, m;
    ptrdiff_t inner, outer_st[3], st_inner[3];
} ew_par;

static void ew_par_chunk(void *arg, size_t b, size_t e)
{
    const ew_par *j = arg;
    ew_fault fault = {0};
    const void *p[3] = {NULL};
    if (j->m == 1) {
        for (int k = 0; k < j->n; k++)
            p[k] = j->base[k] + (ptrdiff_t)b * j->st_inner[k] * (ptrdiff_t)j->isz[k];
        (void)j->kern(j->o + b * j->osz, p, j->st_inner, (ptrdiff_t)(e - b), &fault);
        return;
    }
    for (size_t r = b; r < e; r++) {
        for (int k = 0; k < j->n; k++)
            p[k] = j->base[k] + (ptrdiff_t)r * j->outer_st[k] * (ptrdiff_t)j->isz[k];
        (void)j->kern(j->o + r * (size_t)j->inner * j->osz, p, j->st_inner, j->inner, &fault);
    }
}

static tfvm_status ew_tensor(isa_op op, uint32_t attr, const dev_value *in, int n, dev_value *out,
                             const tfvm_allocator *alloc, char *msg, size_t ms)
{
    uint8_t dt[3] = {0}, rd = 0;
    int rank[3] = {0}, R = 0;
    const int64_t *dims[3] = {NULL};
    const char *base[3] = {NULL};
    for (int k = 0; k < n; k++) {
        const dev_value *v = &in[k];
        if (v->is_tensor) {
            dt[k] = v->u.t->dtype;
            rank[k] = v->u.t->rank;
            dims[k] = v->u.t->dims;
            base[k] = v->u.t->data;
        } else {
            /* a scalar is a rank-0 tensor backed by the value itself */
            dt[k] = v->dtype;
            base[k] = (const char *)&v->u;
        }
        if (rank[k] > R)
            R = rank[k];
    }
    tfvm_status st = ew_types(op, attr, dt, &rd, msg, ms);
    if (st)
        return st;
    if (op == ISA_CAST && rd == dt[0]) { /* tensors are immutable: share it */
        dev_value r = in[0];
        r.dtype = rd;
        r.dead = 0;
        dev_value_retain(&r);
        *out = r;
        return TFVM_OK;
    }

    /* NumPy broadcasting, by the op's shape rule (isa/shape.h): its result
     * shape, or its message when the shapes do not broadcast. */
    isa_shape xs[3], bc;
    for (int k = 0; k < n; k++) {
        xs[k] = (isa_shape){.dtype = dt[k], .rank = (int8_t)rank[k], .n_vals = -1};
        if (rank[k])
            memcpy(xs[k].dims, dims[k], sizeof(int64_t) * (size_t)rank[k]);
    }
    if (isa_shape_rule(op, attr, xs, (uint32_t)n, &bc, msg, ms) != TFVM_OK)
        return TFVM_ERR_SHAPE;
    const int64_t *D = bc.dims;
    tfvm_tensor *t = dev_tensor_alloc(alloc, (tfvm_dtype)rd, R, D);
    if (!t)
        return ut_msg(msg, ms, TFVM_ERR_NOMEM, "out of memory");
    dev_value r = {.dtype = rd, .is_tensor = 1, .u.t = t};
    if (t->count == 0) {
        *out = r;
        return TFVM_OK;
    }

    /* Element strides of each input along each output dimension (0 where it
     * is broadcast), then dimensions of size 1 are dropped and neighbours
     * merged where every input steps through them as one run: same-shape
     * operands become one contiguous run, a scalar a stride-0 run. */
    ptrdiff_t S[3][TFVM_MAX_RANK];
    for (int k = 0; k < n; k++) {
        ptrdiff_t acc = 1;
        for (int j = R - 1; j >= 0; j--) {
            int jj = j - (R - rank[k]);
            if (jj < 0) {
                S[k][j] = 0;
                continue;
            }
            S[k][j] = dims[k][jj] == 1 ? 0 : acc;
            acc *= (ptrdiff_t)dims[k][jj];
        }
    }
    int m = 0;
    int64_t cd[TFVM_MAX_RANK];
    ptrdiff_t cs[3][TFVM_MAX_RANK];
    for (int j = 0; j < R; j++) {
        if (D[j] == 1)
            continue;
        bool merge = m > 0;
        for (int k = 0; k < n && merge; k++)
            merge = cs[k][m - 1] == S[k][j] * (ptrdiff_t)D[j];
        if (merge) {
            cd[m - 1] *= D[j];
        } else {
            cd[m] = D[j];
            m++;
        }
        for (int k = 0; k < n; k++)
            cs[k][m - 1] = S[k][j];
    }
    if (m == 0) {
        cd[0] = 1;
        for (int k = 0; k < n; k++)
            cs[k][0] = 0;
        m = 1;
    }

    ew_kernel kern = op == ISA_CAST ? ew_cast_kernel(dt[0], rd)
                                    : ew_kernels[op][op == ISA_SELECT ? dt[1] : dt[0]];
    if (!kern) {
        tfvm_tensor_free(t);
        return ut_msg(msg, ms, TFVM_ERR_INTERNAL, "no CPU kernel for %s on %s", isa_ops[op].name,
                       ew_name(dt[0]));
    }
    size_t isz[3] = {0}, osz = tfvm_dtype_size((tfvm_dtype)rd);
    for (int k = 0; k < n; k++)
        isz[k] = tfvm_dtype_size((tfvm_dtype)dt[k]);
    const ptrdiff_t inner = (ptrdiff_t)cd[m - 1];
    ptrdiff_t st_inner[3] = {0}, off[3] = {0};
    int64_t idx[TFVM_MAX_RANK] = {0};
    for (int k = 0; k < n; k++)
        st_inner[k] = cs[k][m - 1];
    char *o = t->data;
    /* floats (no faults) over at most two merged dims: chunks on the VM's
     * idle workers, each element computed as the serial loop would. From 8K
     * elements (chunks of 4K at least, ~1 us): squeeze-excite's scale of
     * 576 channels of 7x7 (28K, 6 us) had run on one thread while the
     * other waited (mobilenet_v3_small at batch 1 on 2 threads: the scale,
     * the mean and the products of its squeeze-excite blocks together 0.93x;
     * from 64K before) */
    bool par_ok = m <= 2 && op != ISA_CAST && isa_dtype_float(rd) && t->count >= EW_PAR_ELEMS &&
                  dev_par_width() > 1;
    for (int k = 0; k < n && par_ok; k++)
        par_ok = isa_dtype_float(dt[k]) || (op == ISA_SELECT && k == 0);
    if (par_ok) {
        ew_par j = {.kern = kern, .o = o, .osz = osz, .n = n, .m = m, .inner = inner};
        for (int k = 0; k < n; k++) {
            j.base[k] = base[k];
            j.isz[k] = isz[k];
            j.st_inner[k] = st_inner[k];
            j.outer_st[k] = m == 2 ? cs[k][0] : 0;
        }
        const int64_t items = m == 1 ? inner : cd[0], per = m == 1 ? 1 : inner;
        dev_par_for((size_t)items, dev_kgrain(items, per, EW_PAR_ELEMS / 2, m == 1 ? 64 : 1), ew_par_chunk, &j);
        *out = r;
        return TFVM_OK;
    }
    ew_fault fault = {0};
    for (;;) {
        const void *p[3] = {NULL};
        for (int k = 0; k < n; k++)
            p[k] = base[k] + off[k] * (ptrdiff_t)isz[k];
        int rc = kern(o, p, st_inner, inner, &fault);
        if (rc) {
            tfvm_tensor_free(t);
            return ew_fault_msg(rc, &fault, dt[0], rd, msg, ms);
        }
        o += inner * (ptrdiff_t)osz;
        /* Odometer over the outer dimensions. */
        int j = m - 2;
        for (; j >= 0; j--) {
            for (int k = 0; k < n; k++)
                off[k] += cs[k][j];
            if (++idx[j] < cd[j])
                break;
            for (int k = 0; k < n; k++)
                off[k] -= cs[k][j] * (ptrdiff_t)cd[j];
            idx[j] = 0;
        }
        if (j < 0)
            break;
    }
    *out = r;
    return TFVM_OK;
}

tfvm_status dev_cpu_elementwise(isa_op op, uint32_t attr, const dev_value *in, dev_value *out,
                                const tfvm_allocator *alloc, char *msg, size_t msg_size)
{
    if ((unsigned)op >= ISA_OP_COUNT || isa_ops[op].n_in < 1 || isa_ops[op].n_in > 3 ||
        isa_ops[op].cls < ISA_CLASS_BINARY)
        return ut_msg(msg, msg_size, TFVM_ERR_INTERNAL, "op %u is not an elementwise op",
                       (unsigned)op);
    const int n = isa_ops[op].n_in;
    bool tensor = in[0].is_tensor;
    for (int k = 1; k < n; k++)
        tensor |= in[k].is_tensor;
    if (!tensor)
        return ew_scalar(op, attr, in, out, msg, msg_size);
    return ew_tensor(op, attr, in, n, out, alloc, msg, msg_size);
}
