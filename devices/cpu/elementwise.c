/* devices/cpu/elementwise.c — the elementwise classes on the CPU: a switch for
 * all-scalar operands (the VM's hot path, no allocation) and, for tensors,
 * NumPy broadcasting over coalesced dimensions with per-(op, dtype) kernels. */
#include "devices/cpu/cpu.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* What a kernel can run into; the caller turns it into a message. */
enum { EW_OK, EW_DIV0, EW_MOD0, EW_CAST };

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
 * because INT_MIN / -1 traps on x86. Division by zero is checked before. */
#define I_ADD(T, U) ((T)((U)x + (U)y))
#define I_SUB(T, U) ((T)((U)x - (U)y))
#define I_MUL(T, U) ((T)((U)x * (U)y))
#define I_DIV(T, U) (y == -1 ? (T)(0 - (U)x) : (T)(x / y))
#define I_MOD(T, U) (y == -1 ? (T)0 : (T)(x % y))
#define I_NEG(T, U) ((T)(0 - (U)x))
#define I_ABS(T, U) (x < 0 ? (T)(0 - (U)x) : x)
#define X_MIN (x < y ? x : y)
#define X_MAX (x > y ? x : y)
/* NumPy minimum/maximum: a NaN operand wins; equal operands give y. */
#define F_MIN ((x < y || isnan(x)) ? x : y)
#define F_MAX ((x > y || isnan(x)) ? x : y)
/* Float to integer: truncation must land in range; NaN fails both tests. */
#define FITS_I32 ((double)x > -2147483649.0 && (double)x < 2147483648.0)
#define FITS_I64 ((double)x >= -9223372036854775808.0 && (double)x < 9223372036854775808.0)
/* RELU keeps NaN (NumPy maximum(x, 0) does); SIGMOID takes the branch whose
 * exp cannot overflow, so large |x| gives 0 or 1 instead of inf/inf. */
#define X_RELU (x < 0 ? 0 : x)
#define F_SIGMOID(EXP) (x >= 0 ? 1 / (1 + EXP(-x)) : EXP(x) / (1 + EXP(x)))

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

#define EW_KERNEL1(NAME, TA, TO, PRE, EXPR)                                                 \
    static int NAME(void *o_, const void *const *in, const ptrdiff_t *st, ptrdiff_t n,      \
                    ew_fault *f)                                                            \
    {                                                                                       \
        TO *restrict o = o_;                                                                \
        const TA *a = in[0];                                                                \
        const ptrdiff_t sa = st[0];                                                         \
        (void)f;                                                                            \
        if (sa == 1) {                                                                      \
            for (ptrdiff_t i = 0; i < n; i++) {                                             \
                const TA x = a[i];                                                          \
                PRE;                                                                        \
                o[i] = (EXPR);                                                              \
            }                                                                               \
        } else {                                                                            \
            for (ptrdiff_t i = 0; i < n; i++) {                                             \
                const TA x = a[i * sa];                                                     \
                PRE;                                                                        \
                o[i] = (EXPR);                                                              \
            }                                                                               \
        }                                                                                   \
        return EW_OK;                                                                       \
    }

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

#define INT_KERNELS(S, T, U)                                         \
    EW_KERNEL2(k_add_##S, T, T, , I_ADD(T, U))                       \
    EW_KERNEL2(k_sub_##S, T, T, , I_SUB(T, U))                       \
    EW_KERNEL2(k_mul_##S, T, T, , I_MUL(T, U))                       \
    EW_KERNEL2(k_div_##S, T, T, DIV_CHECK, I_DIV(T, U))              \
    EW_KERNEL2(k_mod_##S, T, T, MOD_CHECK, I_MOD(T, U))              \
    EW_KERNEL2(k_min_##S, T, T, , X_MIN)                             \
    EW_KERNEL2(k_max_##S, T, T, , X_MAX)                             \
    EW_KERNEL1(k_neg_##S, T, T, , I_NEG(T, U))                       \
    EW_KERNEL1(k_abs_##S, T, T, , I_ABS(T, U))                       \
    EW_KERNEL1(k_relu_##S, T, T, , X_RELU)

#define FLOAT_KERNELS(S, T, FMOD, FABS, EXP, TANH, LOG, SQRT)        \
    EW_KERNEL2(k_add_##S, T, T, , x + y)                             \
    EW_KERNEL2(k_sub_##S, T, T, , x - y)                             \
    EW_KERNEL2(k_mul_##S, T, T, , x * y)                             \
    EW_KERNEL2(k_div_##S, T, T, , x / y)                             \
    EW_KERNEL2(k_mod_##S, T, T, , FMOD(x, y))                        \
    EW_KERNEL2(k_min_##S, T, T, , F_MIN)                             \
    EW_KERNEL2(k_max_##S, T, T, , F_MAX)                             \
    EW_KERNEL1(k_neg_##S, T, T, , -x)                                \
    EW_KERNEL1(k_abs_##S, T, T, , FABS(x))                           \
    EW_KERNEL1(k_relu_##S, T, T, , X_RELU)                           \
    EW_KERNEL1(k_sigmoid_##S, T, T, , F_SIGMOID(EXP))                \
    EW_KERNEL1(k_tanh_##S, T, T, , TANH(x))                          \
    EW_KERNEL1(k_exp_##S, T, T, , EXP(x))                            \
    EW_KERNEL1(k_log_##S, T, T, , LOG(x))                            \
    EW_KERNEL1(k_sqrt_##S, T, T, , SQRT(x))

#define CMP_KERNELS(S, T)                                            \
    EW_KERNEL2(k_lt_##S, T, uint8_t, , (uint8_t)(x < y))             \
    EW_KERNEL2(k_le_##S, T, uint8_t, , (uint8_t)(x <= y))            \
    EW_KERNEL2(k_gt_##S, T, uint8_t, , (uint8_t)(x > y))             \
    EW_KERNEL2(k_ge_##S, T, uint8_t, , (uint8_t)(x >= y))            \
    EW_KERNEL2(k_eq_##S, T, uint8_t, , (uint8_t)(x == y))            \
    EW_KERNEL2(k_ne_##S, T, uint8_t, , (uint8_t)(x != y))

INT_KERNELS(i32, int32_t, uint32_t)
INT_KERNELS(i64, int64_t, uint64_t)
FLOAT_KERNELS(f32, float, fmodf, fabsf, expf, tanhf, logf, sqrtf)
FLOAT_KERNELS(f64, double, fmod, fabs, exp, tanh, log, sqrt)
CMP_KERNELS(b, uint8_t)
CMP_KERNELS(i32, int32_t)
CMP_KERNELS(i64, int64_t)
CMP_KERNELS(f32, float)
CMP_KERNELS(f64, double)
/* Bool tensors hold 0/1 bytes; the != 0 keeps results 0/1 regardless. */
EW_KERNEL2(k_and, uint8_t, uint8_t, , (uint8_t)((x != 0) & (y != 0)))
EW_KERNEL2(k_or, uint8_t, uint8_t, , (uint8_t)((x != 0) | (y != 0)))
EW_KERNEL1(k_not, uint8_t, uint8_t, , (uint8_t)(x == 0))
EW_SELECT(k_sel1, uint8_t)
EW_SELECT(k_sel4, uint32_t)
EW_SELECT(k_sel8, uint64_t)

/* CAST kernels, k_cast_FROM_TO. Integers narrow by wrapping (like NumPy's
 * astype); floats to integers must fit after truncation toward zero. */
#define F2I_CHECK(FITS)                         \
    if (!(FITS)) {                              \
        f->value = (double)x;                   \
        return EW_CAST;                         \
    }
EW_KERNEL1(k_cast_b_i32, uint8_t, int32_t, , (int32_t)(x != 0))
EW_KERNEL1(k_cast_b_i64, uint8_t, int64_t, , (int64_t)(x != 0))
EW_KERNEL1(k_cast_b_f32, uint8_t, float, , (float)(x != 0))
EW_KERNEL1(k_cast_b_f64, uint8_t, double, , (double)(x != 0))
EW_KERNEL1(k_cast_i32_b, int32_t, uint8_t, , (uint8_t)(x != 0))
EW_KERNEL1(k_cast_i32_i64, int32_t, int64_t, , (int64_t)x)
EW_KERNEL1(k_cast_i32_f32, int32_t, float, , (float)x)
EW_KERNEL1(k_cast_i32_f64, int32_t, double, , (double)x)
EW_KERNEL1(k_cast_i64_b, int64_t, uint8_t, , (uint8_t)(x != 0))
EW_KERNEL1(k_cast_i64_i32, int64_t, int32_t, , (int32_t)(uint32_t)x)
EW_KERNEL1(k_cast_i64_f32, int64_t, float, , (float)x)
EW_KERNEL1(k_cast_i64_f64, int64_t, double, , (double)x)
EW_KERNEL1(k_cast_f32_b, float, uint8_t, , (uint8_t)(x != 0))
EW_KERNEL1(k_cast_f32_i32, float, int32_t, F2I_CHECK(FITS_I32), (int32_t)x)
EW_KERNEL1(k_cast_f32_i64, float, int64_t, F2I_CHECK(FITS_I64), (int64_t)x)
EW_KERNEL1(k_cast_f32_f64, float, double, , (double)x)
EW_KERNEL1(k_cast_f64_b, double, uint8_t, , (uint8_t)(x != 0))
EW_KERNEL1(k_cast_f64_i32, double, int32_t, F2I_CHECK(FITS_I32), (int32_t)x)
EW_KERNEL1(k_cast_f64_i64, double, int64_t, F2I_CHECK(FITS_I64), (int64_t)x)
EW_KERNEL1(k_cast_f64_f32, double, float, , (float)x)

enum { B = TFVM_BOOL, I32 = TFVM_I32, I64 = TFVM_I64, F32 = TFVM_F32, F64 = TFVM_F64 };

/* Kernel by opcode and operand dtype (SELECT: by the dtype of a and b). */
#define NUM4(k) {[I32] = k##_i32, [I64] = k##_i64, [F32] = k##_f32, [F64] = k##_f64}
#define ALL5(k) {[B] = k##_b, [I32] = k##_i32, [I64] = k##_i64, [F32] = k##_f32, [F64] = k##_f64}
#define FLT2(k) {[F32] = k##_f32, [F64] = k##_f64}
static const ew_kernel ew_kernels[ISA_OP_COUNT][F64 + 1] = {
    [ISA_ADD] = NUM4(k_add), [ISA_SUB] = NUM4(k_sub), [ISA_MUL] = NUM4(k_mul),
    [ISA_DIV] = NUM4(k_div), [ISA_MOD] = NUM4(k_mod), [ISA_MIN] = NUM4(k_min),
    [ISA_MAX] = NUM4(k_max), [ISA_NEG] = NUM4(k_neg), [ISA_ABS] = NUM4(k_abs),
    [ISA_LESS] = ALL5(k_lt), [ISA_LESS_EQUAL] = ALL5(k_le), [ISA_GREATER] = ALL5(k_gt),
    [ISA_GREATER_EQUAL] = ALL5(k_ge), [ISA_EQUAL] = ALL5(k_eq), [ISA_NOT_EQUAL] = ALL5(k_ne),
    [ISA_AND] = {[B] = k_and}, [ISA_OR] = {[B] = k_or}, [ISA_NOT] = {[B] = k_not},
    [ISA_SELECT] = {[B] = k_sel1, [I32] = k_sel4, [I64] = k_sel8, [F32] = k_sel4, [F64] = k_sel8},
    [ISA_RELU] = NUM4(k_relu), [ISA_SIGMOID] = FLT2(k_sigmoid), [ISA_TANH] = FLT2(k_tanh),
    [ISA_EXP] = FLT2(k_exp), [ISA_LOG] = FLT2(k_log), [ISA_SQRT] = FLT2(k_sqrt),
};
/* [from][to]; the diagonal is never used (a same-dtype CAST shares its input). */
static const ew_kernel ew_casts[F64 + 1][F64 + 1] = {
    [B] = {[I32] = k_cast_b_i32, [I64] = k_cast_b_i64, [F32] = k_cast_b_f32, [F64] = k_cast_b_f64},
    [I32] = {[B] = k_cast_i32_b, [I64] = k_cast_i32_i64, [F32] = k_cast_i32_f32, [F64] = k_cast_i32_f64},
    [I64] = {[B] = k_cast_i64_b, [I32] = k_cast_i64_i32, [F32] = k_cast_i64_f32, [F64] = k_cast_i64_f64},
    [F32] = {[B] = k_cast_f32_b, [I32] = k_cast_f32_i32, [I64] = k_cast_f32_i64, [F64] = k_cast_f32_f64},
    [F64] = {[B] = k_cast_f64_b, [I32] = k_cast_f64_i32, [I64] = k_cast_f64_i64, [F32] = k_cast_f64_f32},
};

/* ---- Type rules (the one place that decides result dtypes and type errors) ---- */
/* The elementwise math ops defined on floats only (RELU takes integers too). */
static bool ew_float_only(isa_op op)
{
    return op == ISA_SIGMOID || op == ISA_TANH || op == ISA_EXP || op == ISA_LOG ||
           op == ISA_SQRT;
}

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
    char lname[32];
    for (int k = 0; k < info->n_in; k++)
        if (!isa_dtype_valid(dt[k]))
            return ut_msg(msg, ms, TFVM_ERR_INTERNAL, "invalid operand dtype %u", dt[k]);
    switch (info->cls) {
    case ISA_CLASS_BINARY:
        if (dt[0] != dt[1])
            break;
        if (dt[0] == B)
            return ut_msg(msg, ms, TFVM_ERR_TYPE, "arithmetic on bool is not defined");
        *res = dt[0];
        return TFVM_OK;
    case ISA_CLASS_UNARY:
        if (op == ISA_CAST) {
            if (!isa_dtype_valid(attr))
                return ut_msg(msg, ms, TFVM_ERR_INTERNAL, "invalid CAST target dtype %u", attr);
            *res = (uint8_t)attr;
            return TFVM_OK;
        }
        if (ew_float_only(op) && dt[0] != F32 && dt[0] != F64)
            return ut_msg(msg, ms, TFVM_ERR_TYPE, "%s needs a float operand (f32 or f64), got %s",
                           ew_lower(info->name, lname, sizeof lname), ew_name(dt[0]));
        if (dt[0] == B)
            return ut_msg(msg, ms, TFVM_ERR_TYPE, "arithmetic on bool is not defined");
        *res = dt[0];
        return TFVM_OK;
    case ISA_CLASS_COMPARE:
        if (dt[0] != dt[1])
            break;
        *res = B;
        return TFVM_OK;
    case ISA_CLASS_LOGIC:
        if (info->n_in == 2 && dt[0] != dt[1])
            break;
        if (dt[0] != B)
            return ut_msg(msg, ms, TFVM_ERR_TYPE, "logic needs bool operands, got %s",
                           ew_name(dt[0]));
        *res = B;
        return TFVM_OK;
    case ISA_CLASS_SELECT:
        if (dt[0] != B)
            return ut_msg(msg, ms, TFVM_ERR_TYPE, "condition must be bool, got %s", ew_name(dt[0]));
        if (dt[1] != dt[2])
            return ut_msg(msg, ms, TFVM_ERR_TYPE, "dtype mismatch: %s and %s", ew_name(dt[1]),
                           ew_name(dt[2]));
        *res = dt[1];
        return TFVM_OK;
    default:
        return ut_msg(msg, ms, TFVM_ERR_INTERNAL, "%s is not an elementwise op", info->name);
    }
    return ut_msg(msg, ms, TFVM_ERR_TYPE, "dtype mismatch: %s and %s", ew_name(dt[0]),
                   ew_name(dt[1]));
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
    default: return ew_cast_fail(msg, ms, from, f->value, to);
    }
}

/* ---- Scalars ------------------------------------------------------------------------ */
#define SCALAR_INT(F, T, U)                                                            \
    do {                                                                               \
        const T x = in[0].u.F, y = in[1].u.F;                                          \
        switch (op) {                                                                  \
        case ISA_ADD: r.u.F = I_ADD(T, U); break;                                      \
        case ISA_SUB: r.u.F = I_SUB(T, U); break;                                      \
        case ISA_MUL: r.u.F = I_MUL(T, U); break;                                      \
        case ISA_DIV:                                                                  \
            if (y == 0)                                                                \
                return ew_fault_msg(EW_DIV0, NULL, 0, 0, msg, ms);                     \
            r.u.F = I_DIV(T, U);                                                       \
            break;                                                                     \
        case ISA_MOD:                                                                  \
            if (y == 0)                                                                \
                return ew_fault_msg(EW_MOD0, NULL, 0, 0, msg, ms);                     \
            r.u.F = I_MOD(T, U);                                                       \
            break;                                                                     \
        case ISA_MIN: r.u.F = X_MIN; break;                                            \
        default: r.u.F = X_MAX; break;                                                 \
        }                                                                              \
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

#define SCALAR_CMP(F, T)                                                               \
    do {                                                                               \
        const T x = in[0].u.F, y = in[1].u.F;                                          \
        switch (op) {                                                                  \
        case ISA_LESS: r.u.b = x < y; break;                                           \
        case ISA_LESS_EQUAL: r.u.b = x <= y; break;                                    \
        case ISA_GREATER: r.u.b = x > y; break;                                        \
        case ISA_GREATER_EQUAL: r.u.b = x >= y; break;                                 \
        case ISA_EQUAL: r.u.b = x == y; break;                                         \
        default: r.u.b = x != y; break;                                                \
        }                                                                              \
    } while (0)

static tfvm_status ew_scalar_cast(const dev_value *a, uint8_t to, dev_value *r, char *msg,
                                  size_t ms)
{
    /* Through int64 or double: both hold every value of the narrower types
     * exactly, so converting from there rounds or wraps exactly once. */
    bool is_float = a->dtype == F32 || a->dtype == F64;
    int64_t iv = 0;
    double x = 0;
    switch (a->dtype) {
    case B: iv = a->u.b; break;
    case I32: iv = a->u.i32; break;
    case I64: iv = a->u.i64; break;
    case F32: x = a->u.f32; break;
    default: x = a->u.f64; break;
    }
    switch (to) {
    case B: r->u.b = is_float ? x != 0 : iv != 0; break;
    case I32:
        if (!is_float)
            r->u.i32 = (int32_t)(uint32_t)iv;
        else if (FITS_I32)
            r->u.i32 = (int32_t)x;
        else
            return ew_cast_fail(msg, ms, a->dtype, x, to);
        break;
    case I64:
        if (!is_float)
            r->u.i64 = iv;
        else if (FITS_I64)
            r->u.i64 = (int64_t)x;
        else
            return ew_cast_fail(msg, ms, a->dtype, x, to);
        break;
    case F32: r->u.f32 = is_float ? (float)x : (float)iv; break;
    default: r->u.f64 = is_float ? x : (double)iv; break;
    }
    return TFVM_OK;
}

/* RELU .. SQRT on one scalar; false when the dtype is not theirs (ew_types
 * then says why). */
static bool ew_scalar_math(isa_op op, const dev_value *a, dev_value *r)
{
    if (op == ISA_RELU && (a->dtype == I32 || a->dtype == I64)) {
        if (a->dtype == I32)
            r->u.i32 = a->u.i32 < 0 ? 0 : a->u.i32;
        else
            r->u.i64 = a->u.i64 < 0 ? 0 : a->u.i64;
        return true;
    }
    if (a->dtype == F32) {
        const float x = a->u.f32;
        switch (op) {
        case ISA_RELU: r->u.f32 = X_RELU; break;
        case ISA_SIGMOID: r->u.f32 = F_SIGMOID(expf); break;
        case ISA_TANH: r->u.f32 = tanhf(x); break;
        case ISA_EXP: r->u.f32 = expf(x); break;
        case ISA_LOG: r->u.f32 = logf(x); break;
        case ISA_SQRT: r->u.f32 = sqrtf(x); break;
        default: return false;
        }
        return true;
    }
    if (a->dtype == F64) {
        const double x = a->u.f64;
        switch (op) {
        case ISA_RELU: r->u.f64 = X_RELU; break;
        case ISA_SIGMOID: r->u.f64 = F_SIGMOID(exp); break;
        case ISA_TANH: r->u.f64 = tanh(x); break;
        case ISA_EXP: r->u.f64 = exp(x); break;
        case ISA_LOG: r->u.f64 = log(x); break;
        case ISA_SQRT: r->u.f64 = sqrt(x); break;
        default: return false;
        }
        return true;
    }
    return false;
}

/* The hot path: every operand a scalar, so no allocation and no loops. The
 * checks here are the fast form of ew_types, which reports what they reject. */
static tfvm_status ew_scalar(isa_op op, uint32_t attr, const dev_value *in, dev_value *out,
                             char *msg, size_t ms)
{
    const uint8_t d = in[0].dtype;
    dev_value r = {.dtype = d};
    switch (isa_ops[op].cls) {
    case ISA_CLASS_BINARY:
        if (in[1].dtype != d || d < I32 || d > F64)
            goto type_error;
        switch (d) {
        case I32: SCALAR_INT(i32, int32_t, uint32_t); break;
        case I64: SCALAR_INT(i64, int64_t, uint64_t); break;
        case F32: SCALAR_FLOAT(f32, float, fmodf); break;
        default: SCALAR_FLOAT(f64, double, fmod); break;
        }
        break;
    case ISA_CLASS_COMPARE:
        if (in[1].dtype != d || !isa_dtype_valid(d))
            goto type_error;
        r.dtype = B;
        switch (d) {
        case B: SCALAR_CMP(b, bool); break;
        case I32: SCALAR_CMP(i32, int32_t); break;
        case I64: SCALAR_CMP(i64, int64_t); break;
        case F32: SCALAR_CMP(f32, float); break;
        default: SCALAR_CMP(f64, double); break;
        }
        break;
    case ISA_CLASS_LOGIC:
        if (d != B || (op != ISA_NOT && in[1].dtype != B))
            goto type_error;
        r.u.b = op == ISA_NOT ? !in[0].u.b
              : op == ISA_AND ? (in[0].u.b && in[1].u.b)
                              : (in[0].u.b || in[1].u.b);
        break;
    case ISA_CLASS_SELECT:
        if (d != B || in[1].dtype != in[2].dtype || !isa_dtype_valid(in[1].dtype))
            goto type_error;
        r.dtype = in[1].dtype;
        r.u = in[0].u.b ? in[1].u : in[2].u;
        break;
    default: /* UNARY */
        if (op == ISA_CAST) {
            if (!isa_dtype_valid(d) || !isa_dtype_valid(attr))
                goto type_error;
            r.dtype = (uint8_t)attr;
            tfvm_status st = ew_scalar_cast(&in[0], r.dtype, &r, msg, ms);
            if (st)
                return st;
            break;
        }
        if (op != ISA_NEG && op != ISA_ABS) {
            if (!ew_scalar_math(op, &in[0], &r))
                goto type_error;
            break;
        }
        switch (d) {
        case I32: {
            const int32_t x = in[0].u.i32;
            r.u.i32 = op == ISA_NEG ? I_NEG(int32_t, uint32_t) : I_ABS(int32_t, uint32_t);
            break;
        }
        case I64: {
            const int64_t x = in[0].u.i64;
            r.u.i64 = op == ISA_NEG ? I_NEG(int64_t, uint64_t) : I_ABS(int64_t, uint64_t);
            break;
        }
        case F32: r.u.f32 = op == ISA_NEG ? -in[0].u.f32 : fabsf(in[0].u.f32); break;
        case F64: r.u.f64 = op == ISA_NEG ? -in[0].u.f64 : fabs(in[0].u.f64); break;
        default: goto type_error;
        }
        break;
    }
    *out = r;
    return TFVM_OK;

type_error:;
    uint8_t dt[3] = {d, 0, 0}, rd;
    for (int k = 1; k < isa_ops[op].n_in; k++)
        dt[k] = in[k].dtype;
    tfvm_status st = ew_types(op, attr, dt, &rd, msg, ms);
    return st ? st : ut_msg(msg, ms, TFVM_ERR_INTERNAL, "scalar type check disagrees");
}

/* ---- Tensors ------------------------------------------------------------------------ */
static void ew_shape_of(const dev_value *v, char *buf, size_t size)
{
    if (v->is_tensor)
        dev_shape_str(v->u.t, buf, size);
    else
        snprintf(buf, size, "[]");
}

static tfvm_status ew_tensor(isa_op op, uint32_t attr, const dev_value *in, int n, dev_value *out,
                             const tfvm_allocator *alloc, char *msg, size_t ms)
{
    /* Scalar operands become rank-0 tensors backed by this storage. */
    union { uint8_t b; int32_t i32; int64_t i64; float f32; double f64; } sbuf[3];
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
            dt[k] = v->dtype;
            switch (v->dtype) {
            case B: sbuf[k].b = v->u.b; break;
            case I32: sbuf[k].i32 = v->u.i32; break;
            case I64: sbuf[k].i64 = v->u.i64; break;
            case F32: sbuf[k].f32 = v->u.f32; break;
            default: sbuf[k].f64 = v->u.f64; break;
            }
            base[k] = (const char *)&sbuf[k];
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

    /* NumPy broadcasting: align shapes on the right; each output dimension is
     * the inputs' common size, where size 1 stretches (and 0 stays 0). */
    int64_t D[TFVM_MAX_RANK];
    for (int j = 0; j < R; j++) {
        D[j] = 1;
        for (int k = 0; k < n; k++) {
            int jj = j - (R - rank[k]);
            if (jj < 0 || dims[k][jj] == 1)
                continue;
            if (D[j] == 1) {
                D[j] = dims[k][jj];
            } else if (D[j] != dims[k][jj]) {
                char s[3][200]; /* rank 8 of 19-digit dims fits */
                for (int i = 0; i < n; i++)
                    ew_shape_of(&in[i], s[i], sizeof s[i]);
                if (n == 2)
                    return ut_msg(msg, ms, TFVM_ERR_SHAPE, "shapes %s and %s do not broadcast",
                                   s[0], s[1]);
                return ut_msg(msg, ms, TFVM_ERR_SHAPE, "shapes %s, %s and %s do not broadcast",
                               s[0], s[1], s[2]);
            }
        }
    }
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

    ew_kernel kern = op == ISA_CAST ? ew_casts[dt[0]][rd]
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
