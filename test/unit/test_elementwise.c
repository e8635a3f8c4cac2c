/* test/unit/test_elementwise.c — the CPU elementwise kernels. Every expected
 * value is written by hand (or made by NumPy: test/data/npy/bc_*.npy); each
 * hand-written case also runs through the tensor kernels in several
 * broadcasting layouts, so scalar and tensor paths must agree with it. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "devices/cpu/cpu.h"
#include "testutil.h"

/* ---- An allocator that counts, so that every test can check for leaks ---- */
static tu_alloc ta; /* reset by setup() before each test */
static tfvm_allocator alloc = {tu_alloc_fn, &ta};

/* ---- Test values ------------------------------------------------------------ */
typedef struct tv {
    uint8_t dt; /* 0 = no operand */
    int64_t i;  /* bool, i32, i64, u8, i8 */
    double f;   /* f32 (must be exact in float, or the rounding is the point), f64 */
} tv;

#define B_(v) {TFVM_BOOL, (v), 0}
#define I32_(v) {TFVM_I32, (v), 0}
#define I64_(v) {TFVM_I64, (v), 0}
#define F32_(v) {TFVM_F32, 0, (v)}
#define F64_(v) {TFVM_F64, 0, (v)}
#define U8_(v) {TFVM_U8, (v), 0}
#define I8_(v) {TFVM_I8, (v), 0}

static dev_value scalar(tv v)
{
    dev_value d = {.dtype = v.dt};
    switch (v.dt) {
    case TFVM_BOOL: d.u.b = v.i != 0; break;
    case TFVM_I32: d.u.i32 = (int32_t)v.i; break;
    case TFVM_I64: d.u.i64 = v.i; break;
    case TFVM_F32: d.u.f32 = (float)v.f; break;
    case TFVM_F64: d.u.f64 = v.f; break;
    case TFVM_U8: d.u.u8 = (uint8_t)v.i; break;
    case TFVM_I8: d.u.i8 = (int8_t)v.i; break;
    }
    return d;
}

static void put(uint8_t dt, void *data, int64_t k, tv v)
{
    switch (dt) {
    case TFVM_BOOL: ((uint8_t *)data)[k] = v.i != 0; break;
    case TFVM_I32: ((int32_t *)data)[k] = (int32_t)v.i; break;
    case TFVM_I64: ((int64_t *)data)[k] = v.i; break;
    case TFVM_F32: ((float *)data)[k] = (float)v.f; break;
    case TFVM_F64: ((double *)data)[k] = v.f; break;
    case TFVM_U8: ((uint8_t *)data)[k] = (uint8_t)v.i; break;
    case TFVM_I8: ((int8_t *)data)[k] = (int8_t)v.i; break;
    }
}

static tfvm_tensor *filled(tv v, int rank, const int64_t *dims)
{
    tfvm_tensor *t = tfvm_tensor_new((tfvm_dtype)v.dt, rank, dims, &alloc);
    ck_assert_ptr_nonnull(t);
    for (int64_t k = 0; k < t->count; k++)
        put(v.dt, t->data, k, v);
    return t;
}

static dev_value tens(tfvm_tensor *t)
{
    return (dev_value){.dtype = t->dtype, .is_tensor = 1, .u.t = t};
}

/* Element k of a result (scalar when v is not a tensor) equals want: same
 * bits for floats except that any NaN matches NaN; the sign of zero counts. */
static void check_elem(const dev_value *v, int64_t k, tv want, const char *label)
{
    ck_assert_msg(v->dtype == want.dt, "%s: dtype %s, want %s", label,
                  tfvm_dtype_name((tfvm_dtype)v->dtype), tfvm_dtype_name((tfvm_dtype)want.dt));
    int64_t gi = 0;
    double gf = 0;
    if (v->is_tensor) {
        const void *d = v->u.t->data;
        switch (want.dt) {
        case TFVM_BOOL: gi = ((const uint8_t *)d)[k]; break;
        case TFVM_I32: gi = ((const int32_t *)d)[k]; break;
        case TFVM_I64: gi = ((const int64_t *)d)[k]; break;
        case TFVM_F32: gf = ((const float *)d)[k]; break;
        case TFVM_F64: gf = ((const double *)d)[k]; break;
        case TFVM_U8: gi = ((const uint8_t *)d)[k]; break;
        case TFVM_I8: gi = ((const int8_t *)d)[k]; break;
        }
    } else {
        switch (want.dt) {
        case TFVM_BOOL: gi = v->u.b; break;
        case TFVM_I32: gi = v->u.i32; break;
        case TFVM_I64: gi = v->u.i64; break;
        case TFVM_F32: gf = v->u.f32; break;
        case TFVM_F64: gf = v->u.f64; break;
        case TFVM_U8: gi = v->u.u8; break;
        case TFVM_I8: gi = v->u.i8; break;
        }
    }
    if (want.dt == TFVM_F32 || want.dt == TFVM_F64) {
        double w = want.dt == TFVM_F32 ? (double)(float)want.f : want.f;
        if (isnan(w))
            ck_assert_msg(isnan(gf), "%s: element %lld is %g, want nan", label, (long long)k, gf);
        else
            ck_assert_msg(gf == w && !signbit(gf) == !signbit(w),
                          "%s: element %lld is %.17g, want %.17g", label, (long long)k, gf, w);
    } else {
        ck_assert_msg(gi == want.i, "%s: element %lld is %lld, want %lld", label, (long long)k,
                      (long long)gi, (long long)want.i);
    }
}

/* ---- The table of hand-computed cases -------------------------------------------- */
typedef struct ecase {
    isa_op op;
    uint32_t attr;
    tv in[3];
    tv want;
    tfvm_status code;
    const char *msg;
} ecase;

#define OK TFVM_OK
#define ARITH TFVM_ERR_ARITH
#define TYPE TFVM_ERR_TYPE
#define R2(op, a, b, w) {ISA_##op, 0, {a, b}, w, OK, NULL}
#define R1(op, a, w) {ISA_##op, 0, {a}, w, OK, NULL}
#define E2(op, a, b, code, m) {ISA_##op, 0, {a, b}, {0}, code, m}
#define E1(op, a, code, m) {ISA_##op, 0, {a}, {0}, code, m}
#define CAST(a, to, w) {ISA_CAST, TFVM_##to, {a}, w, OK, NULL}
#define CASTE(a, to, m) {ISA_CAST, TFVM_##to, {a}, {0}, ARITH, m}
#define SEL(c, a, b, w) {ISA_SELECT, 0, {c, a, b}, w, OK, NULL}
#define SELE(c, a, b, m) {ISA_SELECT, 0, {c, a, b}, {0}, TYPE, m}

#define I32MIN INT32_MIN
#define I32MAX INT32_MAX
#define I64MIN INT64_MIN
#define I64MAX INT64_MAX
#define inf INFINITY
#define nan_ NAN

static const ecase cases[] = {
    /* i32 arithmetic: wraparound, C division, the INT_MIN / -1 corner */
    R2(ADD, I32_(2), I32_(3), I32_(5)),
    R2(ADD, I32_(-5), I32_(-7), I32_(-12)),
    R2(ADD, I32_(I32MAX), I32_(1), I32_(I32MIN)),
    R2(ADD, I32_(I32MIN), I32_(-1), I32_(I32MAX)),
    R2(SUB, I32_(3), I32_(5), I32_(-2)),
    R2(SUB, I32_(I32MIN), I32_(1), I32_(I32MAX)),
    R2(SUB, I32_(0), I32_(I32MIN), I32_(I32MIN)),
    R2(MUL, I32_(-6), I32_(7), I32_(-42)),
    R2(MUL, I32_(65536), I32_(65536), I32_(0)),
    R2(MUL, I32_(I32MAX), I32_(2), I32_(-2)),
    R2(MUL, I32_(46341), I32_(46341), I32_(-2147479015)),
    R2(MUL, I32_(I32MIN), I32_(-1), I32_(I32MIN)),
    R2(DIV, I32_(7), I32_(2), I32_(3)),
    R2(DIV, I32_(-7), I32_(2), I32_(-3)),
    R2(DIV, I32_(7), I32_(-2), I32_(-3)),
    R2(DIV, I32_(-7), I32_(-2), I32_(3)),
    R2(DIV, I32_(0), I32_(5), I32_(0)),
    R2(DIV, I32_(I32MIN), I32_(-1), I32_(I32MIN)),
    R2(DIV, I32_(I32MIN), I32_(1), I32_(I32MIN)),
    R2(DIV, I32_(I32MAX), I32_(-1), I32_(-2147483647)),
    E2(DIV, I32_(5), I32_(0), ARITH, "integer division by zero"),
    E2(DIV, I32_(0), I32_(0), ARITH, "integer division by zero"),
    R2(MOD, I32_(7), I32_(3), I32_(1)),
    R2(MOD, I32_(-7), I32_(3), I32_(-1)),
    R2(MOD, I32_(7), I32_(-3), I32_(1)),
    R2(MOD, I32_(-7), I32_(-3), I32_(-1)),
    R2(MOD, I32_(6), I32_(3), I32_(0)),
    R2(MOD, I32_(I32MIN), I32_(-1), I32_(0)),
    R2(MOD, I32_(I32MIN), I32_(7), I32_(-2)),
    E2(MOD, I32_(5), I32_(0), ARITH, "integer modulo by zero"),
    R2(MIN, I32_(-3), I32_(2), I32_(-3)),
    R2(MIN, I32_(I32MAX), I32_(I32MIN), I32_(I32MIN)),
    R2(MAX, I32_(-3), I32_(2), I32_(2)),
    R2(MAX, I32_(I32MIN), I32_(I32MAX), I32_(I32MAX)),
    R1(NEG, I32_(5), I32_(-5)),
    R1(NEG, I32_(0), I32_(0)),
    R1(NEG, I32_(I32MIN), I32_(I32MIN)),
    R1(ABS, I32_(-7), I32_(7)),
    R1(ABS, I32_(7), I32_(7)),
    R1(ABS, I32_(I32MAX), I32_(I32MAX)),
    R1(ABS, I32_(I32MIN), I32_(I32MIN)),
    /* i64 */
    R2(ADD, I64_(1000000000000000000), I64_(1000000000000000000), I64_(2000000000000000000)),
    R2(ADD, I64_(I64MAX), I64_(1), I64_(I64MIN)),
    R2(SUB, I64_(I64MIN), I64_(1), I64_(I64MAX)),
    R2(SUB, I64_(5), I64_(9), I64_(-4)),
    R2(MUL, I64_(-3), I64_(5), I64_(-15)),
    R2(MUL, I64_(4294967296), I64_(4294967296), I64_(0)),
    R2(MUL, I64_(3037000500), I64_(3037000500), I64_(-9223372036709301616)),
    R2(DIV, I64_(-9), I64_(4), I64_(-2)),
    R2(DIV, I64_(9000000000), I64_(2), I64_(4500000000)),
    R2(DIV, I64_(I64MIN), I64_(-1), I64_(I64MIN)),
    E2(DIV, I64_(1), I64_(0), ARITH, "integer division by zero"),
    R2(MOD, I64_(-9), I64_(4), I64_(-1)),
    R2(MOD, I64_(9), I64_(-4), I64_(1)),
    R2(MOD, I64_(I64MIN), I64_(-1), I64_(0)),
    R2(MOD, I64_(I64MIN), I64_(10), I64_(-8)),
    E2(MOD, I64_(I64MIN), I64_(0), ARITH, "integer modulo by zero"),
    R2(MIN, I64_(I64MIN), I64_(I64MAX), I64_(I64MIN)),
    R2(MAX, I64_(I64MIN), I64_(I64MAX), I64_(I64MAX)),
    R1(NEG, I64_(I64MIN), I64_(I64MIN)),
    R1(NEG, I64_(-12), I64_(12)),
    R1(ABS, I64_(I64MIN), I64_(I64MIN)),
    R1(ABS, I64_(-5), I64_(5)),
    /* f32: IEEE, fmod, NaN-propagating min/max (NumPy minimum/maximum) */
    R2(ADD, F32_(0.5), F32_(0.25), F32_(0.75)),
    R2(ADD, F32_(16777216.0), F32_(1.0), F32_(16777216.0)),
    R2(ADD, F32_(3e38), F32_(3e38), F32_(inf)),
    R2(SUB, F32_(1.0), F32_(1.0), F32_(0.0)),
    R2(MUL, F32_(-2.0), F32_(0.5), F32_(-1.0)),
    R2(DIV, F32_(3.0), F32_(2.0), F32_(1.5)),
    R2(DIV, F32_(1.0), F32_(0.0), F32_(inf)),
    R2(DIV, F32_(-1.0), F32_(0.0), F32_(-inf)),
    R2(DIV, F32_(0.0), F32_(0.0), F32_(nan_)),
    R2(MOD, F32_(-7.5), F32_(2.0), F32_(-1.5)),
    R2(MOD, F32_(7.5), F32_(-2.0), F32_(1.5)),
    R2(MOD, F32_(1.0), F32_(0.0), F32_(nan_)),
    R2(MIN, F32_(2.0), F32_(-3.0), F32_(-3.0)),
    R2(MIN, F32_(1.0), F32_(nan_), F32_(nan_)),
    R2(MIN, F32_(nan_), F32_(1.0), F32_(nan_)),
    R2(MIN, F32_(-0.0), F32_(0.0), F32_(0.0)),
    R2(MIN, F32_(0.0), F32_(-0.0), F32_(-0.0)),
    R2(MAX, F32_(2.0), F32_(-3.0), F32_(2.0)),
    R2(MAX, F32_(nan_), F32_(1.0), F32_(nan_)),
    R2(MAX, F32_(1.0), F32_(nan_), F32_(nan_)),
    R2(MAX, F32_(-0.0), F32_(0.0), F32_(0.0)),
    R1(NEG, F32_(0.0), F32_(-0.0)),
    R1(NEG, F32_(-inf), F32_(inf)),
    R1(NEG, F32_(nan_), F32_(nan_)),
    R1(ABS, F32_(-0.0), F32_(0.0)),
    R1(ABS, F32_(-2.5), F32_(2.5)),
    R1(ABS, F32_(-inf), F32_(inf)),
    /* f64 */
    R2(ADD, F64_(0.1), F64_(0.2), F64_(0.30000000000000004)),
    R2(ADD, F64_(1e308), F64_(1e308), F64_(inf)),
    R2(ADD, F64_(inf), F64_(-inf), F64_(nan_)),
    R2(SUB, F64_(0.5), F64_(2.0), F64_(-1.5)),
    R2(MUL, F64_(1e200), F64_(-1e200), F64_(-inf)),
    R2(MUL, F64_(0.0), F64_(inf), F64_(nan_)),
    R2(DIV, F64_(7.0), F64_(2.0), F64_(3.5)),
    R2(DIV, F64_(-0.0), F64_(5.0), F64_(-0.0)),
    R2(DIV, F64_(1.0), F64_(-0.0), F64_(-inf)),
    R2(MOD, F64_(7.5), F64_(2.0), F64_(1.5)),
    R2(MOD, F64_(5.0), F64_(inf), F64_(5.0)),
    R2(MOD, F64_(inf), F64_(1.0), F64_(nan_)),
    R2(MOD, F64_(-6.0), F64_(3.0), F64_(-0.0)),
    R2(MIN, F64_(nan_), F64_(-inf), F64_(nan_)),
    R2(MIN, F64_(-inf), F64_(1.0), F64_(-inf)),
    R2(MAX, F64_(-inf), F64_(nan_), F64_(nan_)),
    R2(MAX, F64_(1e-300), F64_(-1e-300), F64_(1e-300)),
    R1(NEG, F64_(1.5), F64_(-1.5)),
    R1(ABS, F64_(-1e308), F64_(1e308)),
    R1(ABS, F64_(nan_), F64_(nan_)),
    /* type errors */
    E2(ADD, I32_(1), F32_(1.0), TYPE, "dtype mismatch: i32 and f32"),
    E2(SUB, I64_(1), I32_(1), TYPE, "dtype mismatch: i64 and i32"),
    E2(MAX, F64_(1.0), F32_(1.0), TYPE, "dtype mismatch: f64 and f32"),
    E2(MOD, B_(1), I32_(1), TYPE, "dtype mismatch: bool and i32"),
    E2(ADD, B_(1), B_(1), TYPE, "arithmetic on bool is not defined"),
    E2(SUB, B_(1), B_(0), TYPE, "arithmetic on bool is not defined"),
    E2(MUL, B_(1), B_(0), TYPE, "arithmetic on bool is not defined"),
    E2(DIV, B_(1), B_(1), TYPE, "arithmetic on bool is not defined"),
    E2(MOD, B_(1), B_(1), TYPE, "arithmetic on bool is not defined"),
    E2(MIN, B_(1), B_(0), TYPE, "arithmetic on bool is not defined"),
    E2(MAX, B_(1), B_(0), TYPE, "arithmetic on bool is not defined"),
    E1(NEG, B_(1), TYPE, "arithmetic on bool is not defined"),
    E1(ABS, B_(0), TYPE, "arithmetic on bool is not defined"),
    E2(LESS, I32_(1), I64_(1), TYPE, "dtype mismatch: i32 and i64"),
    E2(EQUAL, B_(1), F64_(1.0), TYPE, "dtype mismatch: bool and f64"),
    /* logic */
    R2(AND, B_(0), B_(0), B_(0)), R2(AND, B_(0), B_(1), B_(0)),
    R2(AND, B_(1), B_(0), B_(0)), R2(AND, B_(1), B_(1), B_(1)),
    R2(OR, B_(0), B_(0), B_(0)), R2(OR, B_(0), B_(1), B_(1)),
    R2(OR, B_(1), B_(0), B_(1)), R2(OR, B_(1), B_(1), B_(1)),
    R1(NOT, B_(0), B_(1)), R1(NOT, B_(1), B_(0)),
    E2(AND, I32_(1), I32_(1), TYPE, "logic needs bool operands, got i32"),
    E2(OR, F64_(1.0), F64_(0.0), TYPE, "logic needs bool operands, got f64"),
    E2(AND, B_(1), I32_(1), TYPE, "dtype mismatch: bool and i32"),
    E1(NOT, I64_(0), TYPE, "logic needs bool operands, got i64"),
    /* select */
    SEL(B_(1), I32_(5), I32_(7), I32_(5)),
    SEL(B_(0), I32_(5), I32_(7), I32_(7)),
    SEL(B_(1), B_(0), B_(1), B_(0)),
    SEL(B_(0), I64_(I64MIN), I64_(I64MAX), I64_(I64MAX)),
    SEL(B_(1), F32_(-0.0), F32_(1.0), F32_(-0.0)),
    SEL(B_(0), F64_(1.0), F64_(nan_), F64_(nan_)),
    SELE(I32_(1), I32_(5), I32_(7), "condition must be bool, got i32"),
    SELE(B_(1), I32_(5), I64_(7), "dtype mismatch: i32 and i64"),
    SELE(B_(1), F32_(5.0), F64_(7.0), "dtype mismatch: f32 and f64"),
    /* cast: float to int truncates and must fit; ints narrow by wrapping */
    CAST(F64_(2.7), I32, I32_(2)),
    CAST(F64_(-2.7), I32, I32_(-2)),
    CAST(F64_(-0.5), I32, I32_(0)),
    CAST(F64_(2147483647.9), I32, I32_(I32MAX)),
    CAST(F64_(-2147483648.9), I32, I32_(I32MIN)),
    CASTE(F64_(2147483648.0), I32, "cannot cast f64 2.14748e+09 to i32 (out of range)"),
    CASTE(F64_(-2147483649.0), I32, "cannot cast f64 -2.14748e+09 to i32 (out of range)"),
    CASTE(F64_(3e10), I32, "cannot cast f64 3e+10 to i32 (out of range)"),
    CASTE(F64_(nan_), I32, "cannot cast f64 nan to i32"),
    CASTE(F64_(-nan_), I32, "cannot cast f64 nan to i32"),
    CASTE(F64_(inf), I64, "cannot cast f64 inf to i64 (out of range)"),
    CASTE(F64_(-inf), I64, "cannot cast f64 -inf to i64 (out of range)"),
    CASTE(F64_(9223372036854775808.0), I64, "cannot cast f64 9.22337e+18 to i64 (out of range)"),
    CAST(F64_(-9223372036854775808.0), I64, I64_(I64MIN)),
    CAST(F64_(9007199254740993.0), I64, I64_(9007199254740992)), /* the literal rounds */
    CASTE(F32_(nan_), I64, "cannot cast f32 nan to i64"),
    CASTE(F32_(3e10), I32, "cannot cast f32 3e+10 to i32 (out of range)"),
    CAST(F32_(3e10), I64, I64_(30000001024)), /* the f32 nearest 3e10 */
    CAST(F32_(-1.75), I64, I64_(-1)),
    CASTE(F32_(2147483648.0), I32, "cannot cast f32 2.14748e+09 to i32 (out of range)"),
    CAST(F32_(-2147483648.0), I32, I32_(I32MIN)),
    CAST(I64_(4294967297), I32, I32_(1)),
    CAST(I64_(2147483648), I32, I32_(I32MIN)),
    CAST(I64_(-1), I32, I32_(-1)),
    CAST(I32_(-5), I64, I64_(-5)),
    CAST(I32_(16777217), F32, F32_(16777216.0)),
    CAST(I64_(9007199254740993), F64, F64_(9007199254740992.0)),
    CAST(I64_(I64MIN), F32, F32_(-9223372036854775808.0)),
    CAST(F64_(1e300), F32, F32_(inf)),
    CAST(F64_(0.1), F32, F32_(0.1)),
    CAST(F32_(0.1), F64, F64_(0.100000001490116119384765625)),
    CAST(I32_(0), BOOL, B_(0)),
    CAST(I32_(-5), BOOL, B_(1)),
    CAST(I64_(4294967296), BOOL, B_(1)),
    CAST(F64_(nan_), BOOL, B_(1)),
    CAST(F64_(-0.0), BOOL, B_(0)),
    CAST(F32_(1e-45), BOOL, B_(1)),
    CAST(B_(1), F32, F32_(1.0)),
    CAST(B_(0), F64, F64_(0.0)),
    CAST(B_(1), I64, I64_(1)),
    CAST(B_(1), I32, I32_(1)),
    CAST(B_(1), BOOL, B_(1)),
    CAST(I32_(I32MIN), I32, I32_(I32MIN)),
    CAST(F64_(-0.0), F64, F64_(-0.0)),
    /* u8 and i8: arithmetic wraps, division truncates, casts wrap or must fit */
    R2(ADD, U8_(200), U8_(100), U8_(44)),
    R2(SUB, U8_(3), U8_(5), U8_(254)),
    R2(MUL, U8_(16), U8_(17), U8_(16)),
    R2(DIV, U8_(255), U8_(2), U8_(127)),
    R2(MOD, U8_(255), U8_(7), U8_(3)),
    E2(DIV, U8_(1), U8_(0), ARITH, "integer division by zero"),
    E2(MOD, U8_(1), U8_(0), ARITH, "integer modulo by zero"),
    R2(MIN, U8_(255), U8_(0), U8_(0)),
    R2(MAX, U8_(255), U8_(0), U8_(255)),
    R1(NEG, U8_(1), U8_(255)),
    R1(NEG, U8_(0), U8_(0)),
    R1(ABS, U8_(200), U8_(200)),
    R1(RELU, U8_(200), U8_(200)),
    R2(ADD, I8_(127), I8_(1), I8_(-128)),
    R2(SUB, I8_(-128), I8_(1), I8_(127)),
    R2(MUL, I8_(-128), I8_(-1), I8_(-128)),
    R2(MUL, I8_(16), I8_(9), I8_(-112)),
    R2(DIV, I8_(-128), I8_(-1), I8_(-128)),
    R2(DIV, I8_(-7), I8_(2), I8_(-3)),
    R2(MOD, I8_(-7), I8_(2), I8_(-1)),
    R2(MOD, I8_(-128), I8_(-1), I8_(0)),
    E2(DIV, I8_(5), I8_(0), ARITH, "integer division by zero"),
    R1(NEG, I8_(-128), I8_(-128)),
    R1(ABS, I8_(-128), I8_(-128)),
    R1(ABS, I8_(-5), I8_(5)),
    R1(RELU, I8_(-5), I8_(0)),
    R2(LESS, U8_(200), U8_(100), B_(0)),
    R2(LESS, I8_(-56), I8_(100), B_(1)),
    R2(EQUAL, U8_(7), U8_(7), B_(1)),
    SEL(B_(0), U8_(1), U8_(250), U8_(250)),
    SEL(B_(1), I8_(-3), I8_(4), I8_(-3)),
    E2(ADD, U8_(1), I8_(1), TYPE, "dtype mismatch: u8 and i8"),
    E2(ADD, U8_(1), I32_(1), TYPE, "dtype mismatch: u8 and i32"),
    E1(EXP, U8_(1), TYPE, "exp needs a float operand (f32 or f64), got u8"),
    E1(NOT, I8_(0), TYPE, "logic needs bool operands, got i8"),
    CAST(I32_(300), U8, U8_(44)),
    CAST(I32_(-1), U8, U8_(255)),
    CAST(I64_(-129), I8, I8_(127)),
    CAST(I32_(200), I8, I8_(-56)),
    CAST(U8_(200), I8, I8_(-56)),
    CAST(I8_(-56), U8, U8_(200)),
    CAST(I8_(-1), I64, I64_(-1)),
    CAST(I8_(-1), I32, I32_(-1)),
    CAST(U8_(255), I32, I32_(255)),
    CAST(U8_(255), I64, I64_(255)),
    CAST(U8_(255), F32, F32_(255.0)),
    CAST(I8_(-128), F64, F64_(-128.0)),
    CAST(U8_(0), BOOL, B_(0)),
    CAST(I8_(-1), BOOL, B_(1)),
    CAST(B_(1), U8, U8_(1)),
    CAST(B_(1), I8, I8_(1)),
    CAST(F64_(255.9), U8, U8_(255)),
    CAST(F64_(-0.9), U8, U8_(0)),
    CAST(F32_(-128.9), I8, I8_(-128)),
    CAST(F32_(127.5), I8, I8_(127)),
    CASTE(F64_(256.0), U8, "cannot cast f64 256 to u8 (out of range)"),
    CASTE(F64_(-1.0), U8, "cannot cast f64 -1 to u8 (out of range)"),
    CASTE(F32_(128.0), I8, "cannot cast f32 128 to i8 (out of range)"),
    CASTE(F32_(-129.0), I8, "cannot cast f32 -129 to i8 (out of range)"),
    CASTE(F64_(nan_), U8, "cannot cast f64 nan to u8"),
    CAST(U8_(9), U8, U8_(9)),
    /* FLOOR CEIL ROUND (halves to even) SIN COS ERF on floats */
    R1(FLOOR, F32_(-1.5), F32_(-2.0)),
    R1(FLOOR, F64_(2.999), F64_(2.0)),
    R1(FLOOR, F64_(-0.0), F64_(-0.0)),
    R1(FLOOR, F64_(inf), F64_(inf)),
    R1(FLOOR, F64_(nan_), F64_(nan_)),
    R1(CEIL, F32_(-1.5), F32_(-1.0)),
    R1(CEIL, F64_(-0.5), F64_(-0.0)),
    R1(CEIL, F64_(1.0000001), F64_(2.0)),
    R1(ROUND, F32_(0.5), F32_(0.0)),
    R1(ROUND, F32_(1.5), F32_(2.0)),
    R1(ROUND, F32_(2.5), F32_(2.0)),
    R1(ROUND, F64_(-2.5), F64_(-2.0)),
    R1(ROUND, F64_(-3.5), F64_(-4.0)),
    R1(ROUND, F64_(2.5000001), F64_(3.0)),
    R1(ROUND, F64_(-0.4), F64_(-0.0)),
    R1(SIN, F64_(0.0), F64_(0.0)),
    R1(SIN, F64_(-0.0), F64_(-0.0)),
    R1(SIN, F64_(1.0), F64_(0.8414709848078965)),
    R1(SIN, F64_(inf), F64_(nan_)),
    R1(COS, F64_(0.0), F64_(1.0)),
    R1(COS, F64_(1.0), F64_(0.5403023058681398)),
    R1(COS, F32_(0.0), F32_(1.0)),
    R1(ERF, F64_(0.0), F64_(0.0)),
    R1(ERF, F64_(0.5), F64_(0.5204998778130465)),
    R1(ERF, F64_(-inf), F64_(-1.0)),
    R1(ERF, F32_(10.0), F32_(1.0)),
    E1(FLOOR, I32_(1), TYPE, "floor needs a float operand (f32 or f64), got i32"),
    E1(ROUND, I64_(1), TYPE, "round needs a float operand (f32 or f64), got i64"),
    E1(ERF, B_(1), TYPE, "erf needs a float operand (f32 or f64), got bool"),
    /* SIGN: NaN stays, either zero gives +0 (NumPy) */
    R1(SIGN, F32_(-2.5), F32_(-1.0)),
    R1(SIGN, F32_(0.001), F32_(1.0)),
    R1(SIGN, F64_(-0.0), F64_(0.0)),
    R1(SIGN, F64_(nan_), F64_(nan_)),
    R1(SIGN, F64_(-inf), F64_(-1.0)),
    R1(SIGN, I32_(I32MIN), I32_(-1)),
    R1(SIGN, I32_(0), I32_(0)),
    R1(SIGN, I64_(I64MAX), I64_(1)),
    R1(SIGN, I8_(-128), I8_(-1)),
    R1(SIGN, U8_(200), U8_(1)),
    R1(SIGN, U8_(0), U8_(0)),
    E1(SIGN, B_(1), TYPE, "arithmetic on bool is not defined"),
    /* POW: floats as C pow, but exponents 3 and 2 as products (ISA_FPOW: the
     * correctly rounded cubes of these x are 3.4554264545440674 and
     * 2.4728430245040895); integers b >= 0, wrapping; 0 ** 0 = 1 */
    R2(POW, F32_(1.5118216276168823), F32_(3.0), F32_(3.4554266929626465)),
    R2(POW, F64_(1.352276547398239), F64_(3.0), F64_(2.47284302450409)),
    R2(POW, F32_(1.5118216276168823), F32_(2.0), F32_(2.28560471534729)),
    R2(POW, F32_(-0.0), F32_(3.0), F32_(-0.0)),
    R2(POW, F64_(2.0), F64_(10.0), F64_(1024.0)),
    R2(POW, F64_(2.0), F64_(-1.0), F64_(0.5)),
    R2(POW, F64_(-8.0), F64_(1.0 / 3.0), F64_(nan_)),
    R2(POW, F32_(4.0), F32_(0.5), F32_(2.0)),
    R2(POW, F64_(0.0), F64_(0.0), F64_(1.0)),
    R2(POW, I32_(3), I32_(4), I32_(81)),
    R2(POW, I32_(-2), I32_(3), I32_(-8)),
    R2(POW, I32_(0), I32_(0), I32_(1)),
    R2(POW, I32_(2), I32_(31), I32_(I32MIN)),
    R2(POW, I32_(2), I32_(32), I32_(0)),
    R2(POW, I64_(3), I64_(40), I64_(-6289078614652622815)), /* 3 ** 40 - 2 ** 64 */
    R2(POW, I64_(-1), I64_(I64MAX), I64_(-1)),
    R2(POW, U8_(3), U8_(5), U8_(243)),
    R2(POW, U8_(2), U8_(9), U8_(0)),
    R2(POW, I8_(-2), I8_(7), I8_(-128)),
    E2(POW, I32_(2), I32_(-1), ARITH, "integer power with a negative exponent"),
    E2(POW, I64_(1), I64_(-5), ARITH, "integer power with a negative exponent"),
    E2(POW, I8_(1), I8_(-1), ARITH, "integer power with a negative exponent"),
    E2(POW, B_(1), B_(1), TYPE, "arithmetic on bool is not defined"),
    E2(POW, F32_(1.0), F64_(1.0), TYPE, "dtype mismatch: f32 and f64"),
    /* FLOOR_DIV, FLOOR_MOD: Python's // and % (result of % has b's sign) */
    R2(FLOOR_DIV, I32_(7), I32_(2), I32_(3)),
    R2(FLOOR_DIV, I32_(-7), I32_(2), I32_(-4)),
    R2(FLOOR_DIV, I32_(7), I32_(-2), I32_(-4)),
    R2(FLOOR_DIV, I32_(-7), I32_(-2), I32_(3)),
    R2(FLOOR_DIV, I32_(-6), I32_(2), I32_(-3)),
    R2(FLOOR_DIV, I32_(I32MIN), I32_(-1), I32_(I32MIN)),
    R2(FLOOR_DIV, I64_(-1), I64_(I64MAX), I64_(-1)),
    R2(FLOOR_DIV, I8_(-128), I8_(3), I8_(-43)),
    R2(FLOOR_DIV, U8_(255), U8_(16), U8_(15)),
    E2(FLOOR_DIV, I32_(1), I32_(0), ARITH, "integer division by zero"),
    E2(FLOOR_DIV, U8_(1), U8_(0), ARITH, "integer division by zero"),
    R2(FLOOR_MOD, I32_(7), I32_(3), I32_(1)),
    R2(FLOOR_MOD, I32_(-7), I32_(3), I32_(2)),
    R2(FLOOR_MOD, I32_(7), I32_(-3), I32_(-2)),
    R2(FLOOR_MOD, I32_(-7), I32_(-3), I32_(-1)),
    R2(FLOOR_MOD, I32_(-6), I32_(3), I32_(0)),
    R2(FLOOR_MOD, I32_(I32MIN), I32_(-1), I32_(0)),
    R2(FLOOR_MOD, I64_(I64MIN), I64_(I64MAX), I64_(9223372036854775806)),
    R2(FLOOR_MOD, I8_(-128), I8_(3), I8_(1)),
    R2(FLOOR_MOD, U8_(255), U8_(16), U8_(15)),
    E2(FLOOR_MOD, I64_(1), I64_(0), ARITH, "integer modulo by zero"),
    E2(FLOOR_MOD, I8_(1), I8_(0), ARITH, "integer modulo by zero"),
    R2(FLOOR_DIV, F64_(7.0), F64_(2.0), F64_(3.0)),
    R2(FLOOR_DIV, F64_(-7.0), F64_(2.0), F64_(-4.0)),
    R2(FLOOR_DIV, F32_(7.5), F32_(-2.0), F32_(-4.0)),
    R2(FLOOR_DIV, F64_(1.0), F64_(0.0), F64_(inf)),
    R2(FLOOR_DIV, F64_(0.0), F64_(0.0), F64_(nan_)),
    R2(FLOOR_MOD, F64_(7.5), F64_(2.0), F64_(1.5)),
    R2(FLOOR_MOD, F64_(-7.5), F64_(2.0), F64_(0.5)),
    R2(FLOOR_MOD, F64_(7.5), F64_(-2.0), F64_(-0.5)),
    R2(FLOOR_MOD, F32_(-7.5), F32_(-2.0), F32_(-1.5)),
    R2(FLOOR_MOD, F64_(6.0), F64_(-3.0), F64_(-0.0)),
    R2(FLOOR_MOD, F64_(-6.0), F64_(3.0), F64_(0.0)),
    R2(FLOOR_MOD, F64_(1.0), F64_(0.0), F64_(nan_)),
    R2(FLOOR_MOD, F64_(-1.0), F64_(inf), F64_(inf)),
    /* XOR */
    R2(XOR, B_(0), B_(0), B_(0)), R2(XOR, B_(0), B_(1), B_(1)),
    R2(XOR, B_(1), B_(0), B_(1)), R2(XOR, B_(1), B_(1), B_(0)),
    E2(XOR, I32_(1), I32_(1), TYPE, "logic needs bool operands, got i32"),
};

/* Layouts each case runs in: how each operand is passed. */
enum { M_SCALAR, M_ONE, M_ROW, M_RANK0, M_GRID, M_COUNT };
static const char *const mode_name[] = {"scalars", "[1] tensors", "[3] with scalars",
                                        "rank-0 with [2, 2]", "[1, 2] with [3, 1]"};

static void run_case(const ecase *c, int ci, int mode)
{
    int n = isa_ops[c->op].n_in;
    dev_value in[3];
    int64_t out_count = 1;
    for (int k = 0; k < n; k++) {
        tv v = c->in[k];
        switch (mode) {
        case M_SCALAR: in[k] = scalar(v); break;
        case M_ONE: in[k] = tens(filled(v, 1, (int64_t[]){1})); break;
        case M_ROW: in[k] = k == 0 ? tens(filled(v, 1, (int64_t[]){3})) : scalar(v); out_count = 3; break;
        case M_RANK0:
            in[k] = k == 0 ? tens(filled(v, 0, NULL)) : tens(filled(v, 2, (int64_t[]){2, 2}));
            out_count = n > 1 ? 4 : 1;
            break;
        default:
            in[k] = k == n - 1 ? tens(filled(v, 2, (int64_t[]){3, 1}))
                               : tens(filled(v, 2, (int64_t[]){1, 2}));
            out_count = n > 1 ? 6 : 3;
            break;
        }
    }
    char label[160];
    snprintf(label, sizeof label, "case %d (%s, %s)", ci, isa_ops[c->op].name, mode_name[mode]);
    char msg[256] = "";
    dev_value out = {.dtype = 99};
    tfvm_status st = dev_cpu_elementwise(c->op, c->attr, in, &out, &alloc, msg, sizeof msg);
    ck_assert_msg(st == c->code, "%s: got %s (%s)", label, tfvm_status_name(st), msg);
    if (st != TFVM_OK) {
        ck_assert_msg(strcmp(msg, c->msg) == 0, "%s:\n got  %s\n want %s", label, msg, c->msg);
        ck_assert_int_eq(out.dtype, 99); /* untouched */
    } else {
        ck_assert_int_eq(out.dead, 0);
        ck_assert_msg(out.is_tensor == (mode != M_SCALAR), "%s: is_tensor", label);
        if (out.is_tensor) {
            ck_assert_int_eq(out.u.t->dtype, out.dtype);
            ck_assert_msg(out.u.t->count == out_count, "%s: %lld elements", label,
                          (long long)out.u.t->count);
        }
        for (int64_t k = 0; k < out_count; k++)
            check_elem(&out, k, c->want, label);
        dev_value_release(&out);
    }
    for (int k = 0; k < n; k++)
        dev_value_release(&in[k]);
    ck_assert_msg(ta.live == 0, "%s: %ld bytes leaked", label, ta.live);
}

START_TEST(test_cases)
{
    for (int mode = 0; mode < M_COUNT; mode++)
        run_case(&cases[_i], _i, mode);
}
END_TEST

/* Comparisons: every op on every dtype, truth tables by hand. */
START_TEST(test_compare)
{
    static const isa_op ops[6] = {ISA_LESS, ISA_LESS_EQUAL, ISA_GREATER, ISA_GREATER_EQUAL,
                                  ISA_EQUAL, ISA_NOT_EQUAL};
    static const struct { tv a, b; int want[6]; /* < <= > >= == != */ } rows[] = {
        {B_(0), B_(1), {1, 1, 0, 0, 0, 1}},
        {B_(1), B_(1), {0, 1, 0, 1, 1, 0}},
        {B_(1), B_(0), {0, 0, 1, 1, 0, 1}},
        {I32_(1), I32_(2), {1, 1, 0, 0, 0, 1}},
        {I32_(2), I32_(2), {0, 1, 0, 1, 1, 0}},
        {I32_(I32MAX), I32_(I32MIN), {0, 0, 1, 1, 0, 1}},
        {I64_(I64MIN), I64_(I64MAX), {1, 1, 0, 0, 0, 1}},
        /* differ only beyond double precision: compared as integers */
        {I64_(9007199254740993), I64_(9007199254740992), {0, 0, 1, 1, 0, 1}},
        {I64_(-4), I64_(-4), {0, 1, 0, 1, 1, 0}},
        {F32_(1.5), F32_(2.5), {1, 1, 0, 0, 0, 1}},
        {F32_(-0.0), F32_(0.0), {0, 1, 0, 1, 1, 0}},
        {F32_(nan_), F32_(1.0), {0, 0, 0, 0, 0, 1}},
        {F32_(inf), F32_(inf), {0, 1, 0, 1, 1, 0}},
        {F64_(nan_), F64_(nan_), {0, 0, 0, 0, 0, 1}},
        {F64_(2.0), F64_(-inf), {0, 0, 1, 1, 0, 1}},
        {F64_(0.1), F64_(0.1), {0, 1, 0, 1, 1, 0}},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        for (int o = 0; o < 6; o++) {
            ecase c = {ops[o], 0, {rows[r].a, rows[r].b}, B_(rows[r].want[o]), OK, NULL};
            for (int mode = 0; mode < M_COUNT; mode++)
                run_case(&c, (int)r, mode);
        }
    }
}
END_TEST

START_TEST(test_bad_op_and_attr)
{
    char msg[128];
    dev_value in[3] = {scalar((tv)I32_(1)), scalar((tv)I32_(2)), scalar((tv)I32_(3))}, out;
    ck_assert_int_eq(dev_cpu_elementwise(ISA_SWITCH, 0, in, &out, NULL, msg, sizeof msg),
                     TFVM_ERR_INTERNAL);
    ck_assert_int_eq(dev_cpu_elementwise(ISA_MERGE, 0, in, &out, NULL, msg, sizeof msg),
                     TFVM_ERR_INTERNAL);
    ck_assert_int_eq(dev_cpu_elementwise(ISA_OP_COUNT, 0, in, &out, NULL, msg, sizeof msg),
                     TFVM_ERR_INTERNAL);
    ck_assert_int_eq(dev_cpu_elementwise(ISA_CAST, 14, in, &out, NULL, msg, sizeof msg),
                     TFVM_ERR_INTERNAL);
    ck_assert_str_eq(msg, "invalid CAST target dtype 14");
    ck_assert_int_eq(dev_cpu_elementwise(ISA_CAST, 0, in, &out, NULL, msg, sizeof msg),
                     TFVM_ERR_INTERNAL);
    in[1].dtype = 0;
    ck_assert_int_eq(dev_cpu_elementwise(ISA_ADD, 0, in, &out, NULL, msg, sizeof msg),
                     TFVM_ERR_INTERNAL);
    /* no message buffer at all is fine */
    in[1] = scalar((tv)I32_(0));
    ck_assert_int_eq(dev_cpu_elementwise(ISA_DIV, 0, in, &out, NULL, NULL, 0), TFVM_ERR_ARITH);
}
END_TEST

/* ---- Tensors --------------------------------------------------------------------- */
static tfvm_tensor *mk_i32(int rank, const int64_t *dims, const int32_t *vals)
{
    tfvm_tensor *t = tfvm_tensor_new(TFVM_I32, rank, dims, &alloc);
    ck_assert_ptr_nonnull(t);
    if (t->nbytes)
        memcpy(t->data, vals, t->nbytes);
    return t;
}

static tfvm_tensor *mk_f64(int rank, const int64_t *dims, const double *vals)
{
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F64, rank, dims, &alloc);
    ck_assert_ptr_nonnull(t);
    if (t->nbytes)
        memcpy(t->data, vals, t->nbytes);
    return t;
}

/* Runs op on a, b (tensors or scalars; tensors are consumed) and checks the
 * shape of the result; returns it for the caller to inspect and release. */
static dev_value run2(isa_op op, dev_value a, dev_value b, int rank, const int64_t *dims)
{
    dev_value in[2] = {a, b}, out;
    char msg[256] = "";
    tfvm_status st = dev_cpu_elementwise(op, 0, in, &out, &alloc, msg, sizeof msg);
    ck_assert_msg(st == TFVM_OK, "%s", msg);
    ck_assert_int_eq(out.is_tensor, 1);
    ck_assert_int_eq(out.u.t->rank, rank);
    for (int i = 0; i < rank; i++)
        ck_assert_int_eq(out.u.t->dims[i], dims[i]);
    dev_value_release(&in[0]);
    dev_value_release(&in[1]);
    return out;
}

static void expect_i32(dev_value *out, const int32_t *want, int64_t n)
{
    ck_assert_int_eq(out->u.t->count, n);
    const int32_t *d = out->u.t->data;
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(d[i] == want[i], "element %lld: %d, want %d", (long long)i, d[i], want[i]);
    dev_value_release(out);
    ck_assert_int_eq(ta.live, 0);
}

START_TEST(test_broadcast_basic)
{
    /* [2, 3] + [3] */
    tfvm_tensor *a = mk_i32(2, (int64_t[]){2, 3}, (int32_t[]){1, 2, 3, 4, 5, 6});
    tfvm_tensor *b = mk_i32(1, (int64_t[]){3}, (int32_t[]){10, 20, 30});
    dev_value r = run2(ISA_ADD, tens(a), tens(b), 2, (int64_t[]){2, 3});
    expect_i32(&r, (int32_t[]){11, 22, 33, 14, 25, 36}, 6);
    /* [3] - [2, 3]: order matters */
    a = mk_i32(2, (int64_t[]){2, 3}, (int32_t[]){1, 2, 3, 4, 5, 6});
    b = mk_i32(1, (int64_t[]){3}, (int32_t[]){10, 20, 30});
    r = run2(ISA_SUB, tens(b), tens(a), 2, (int64_t[]){2, 3});
    expect_i32(&r, (int32_t[]){9, 18, 27, 6, 15, 24}, 6);
    /* [2, 1] + [1, 3]: an outer sum */
    a = mk_i32(2, (int64_t[]){2, 1}, (int32_t[]){1, 2});
    b = mk_i32(2, (int64_t[]){1, 3}, (int32_t[]){10, 20, 30});
    r = run2(ISA_ADD, tens(a), tens(b), 2, (int64_t[]){2, 3});
    expect_i32(&r, (int32_t[]){11, 21, 31, 12, 22, 32}, 6);
    /* [3, 1] * [2] */
    a = mk_i32(2, (int64_t[]){3, 1}, (int32_t[]){1, 2, 3});
    b = mk_i32(1, (int64_t[]){2}, (int32_t[]){-1, 10});
    r = run2(ISA_MUL, tens(a), tens(b), 2, (int64_t[]){3, 2});
    expect_i32(&r, (int32_t[]){-1, 10, -2, 20, -3, 30}, 6);
    /* same shape, long enough for the vector loops and their tails */
    enum { N = 1003 };
    static int32_t va[N], vb[N], vw[N];
    for (int i = 0; i < N; i++) {
        va[i] = i;
        vb[i] = 2 * i;
        vw[i] = 3 * i;
    }
    a = mk_i32(1, (int64_t[]){N}, va);
    b = mk_i32(1, (int64_t[]){N}, vb);
    r = run2(ISA_ADD, tens(a), tens(b), 1, (int64_t[]){N});
    expect_i32(&r, vw, N);
}
END_TEST

START_TEST(test_broadcast_scalars)
{
    /* rank-0 tensor with a [3] tensor */
    tfvm_tensor *a = mk_i32(0, NULL, (int32_t[]){100});
    tfvm_tensor *b = mk_i32(1, (int64_t[]){3}, (int32_t[]){1, 2, 3});
    dev_value r = run2(ISA_SUB, tens(a), tens(b), 1, (int64_t[]){3});
    expect_i32(&r, (int32_t[]){99, 98, 97}, 3);
    /* a plain scalar with a tensor */
    b = mk_i32(1, (int64_t[]){3}, (int32_t[]){1, 2, 3});
    r = run2(ISA_SUB, tens(b), scalar((tv)I32_(1)), 1, (int64_t[]){3});
    expect_i32(&r, (int32_t[]){0, 1, 2}, 3);
    /* rank-0 tensor with a scalar: a rank-0 tensor, not a scalar */
    a = mk_i32(0, NULL, (int32_t[]){7});
    r = run2(ISA_MUL, scalar((tv)I32_(6)), tens(a), 0, NULL);
    expect_i32(&r, (int32_t[]){42}, 1);
    /* size-1 dims are kept */
    a = mk_i32(3, (int64_t[]){1, 1, 3}, (int32_t[]){1, 2, 3});
    b = mk_i32(1, (int64_t[]){3}, (int32_t[]){1, 1, 1});
    r = run2(ISA_ADD, tens(a), tens(b), 3, (int64_t[]){1, 1, 3});
    expect_i32(&r, (int32_t[]){2, 3, 4}, 3);
    a = mk_i32(1, (int64_t[]){1}, (int32_t[]){5});
    b = mk_i32(2, (int64_t[]){1, 1}, (int32_t[]){6});
    r = run2(ISA_MAX, tens(a), tens(b), 2, (int64_t[]){1, 1});
    expect_i32(&r, (int32_t[]){6}, 1);
}
END_TEST

START_TEST(test_broadcast_empty)
{
    tfvm_tensor *a = mk_i32(2, (int64_t[]){0, 3}, NULL);
    tfvm_tensor *b = mk_i32(1, (int64_t[]){3}, (int32_t[]){1, 2, 3});
    dev_value r = run2(ISA_ADD, tens(a), tens(b), 2, (int64_t[]){0, 3});
    expect_i32(&r, NULL, 0);
    a = mk_i32(2, (int64_t[]){2, 0}, NULL);
    b = mk_i32(2, (int64_t[]){2, 1}, (int32_t[]){1, 2});
    r = run2(ISA_MUL, tens(a), tens(b), 2, (int64_t[]){2, 0});
    expect_i32(&r, NULL, 0);
    a = mk_i32(1, (int64_t[]){0}, NULL);
    b = mk_i32(1, (int64_t[]){1}, (int32_t[]){4});
    r = run2(ISA_DIV, tens(a), tens(b), 1, (int64_t[]){0});
    expect_i32(&r, NULL, 0);
    /* nothing to divide, so no division by zero */
    a = mk_i32(1, (int64_t[]){0}, NULL);
    r = run2(ISA_DIV, tens(a), scalar((tv)I32_(0)), 1, (int64_t[]){0});
    expect_i32(&r, NULL, 0);
}
END_TEST

static void expect_fail(isa_op op, uint32_t attr, dev_value *in, int n, tfvm_status code,
                        const char *want)
{
    char msg[256] = "";
    dev_value out = {.dtype = 99};
    tfvm_status st = dev_cpu_elementwise(op, attr, in, &out, &alloc, msg, sizeof msg);
    ck_assert_msg(st == code, "got %s (%s)", tfvm_status_name(st), msg);
    ck_assert_str_eq(msg, want);
    ck_assert_int_eq(out.dtype, 99);
    for (int k = 0; k < n; k++)
        dev_value_release(&in[k]);
    ck_assert_int_eq(ta.live, 0);
}

START_TEST(test_broadcast_errors)
{
    dev_value in[3];
    in[0] = tens(mk_i32(2, (int64_t[]){2, 3}, (int32_t[]){1, 2, 3, 4, 5, 6}));
    in[1] = tens(mk_i32(1, (int64_t[]){4}, (int32_t[]){1, 2, 3, 4}));
    expect_fail(ISA_ADD, 0, in, 2, TFVM_ERR_SHAPE, "shapes [2, 3] and [4] do not broadcast");
    in[0] = tens(mk_i32(1, (int64_t[]){0}, NULL));
    in[1] = tens(mk_i32(1, (int64_t[]){2}, (int32_t[]){1, 2}));
    expect_fail(ISA_LESS, 0, in, 2, TFVM_ERR_SHAPE, "shapes [0] and [2] do not broadcast");
    in[0] = tens(mk_i32(3, (int64_t[]){2, 1, 3}, (int32_t[]){1, 2, 3, 4, 5, 6}));
    in[1] = tens(mk_i32(2, (int64_t[]){2, 2}, (int32_t[]){1, 2, 3, 4}));
    expect_fail(ISA_MAX, 0, in, 2, TFVM_ERR_SHAPE, "shapes [2, 1, 3] and [2, 2] do not broadcast");
    /* dtype is checked before shape */
    in[0] = tens(mk_i32(1, (int64_t[]){2}, (int32_t[]){1, 2}));
    in[1] = scalar((tv)F32_(1.0));
    expect_fail(ISA_ADD, 0, in, 2, TFVM_ERR_TYPE, "dtype mismatch: i32 and f32");
    in[0] = tens(mk_f64(1, (int64_t[]){2}, (double[]){1, 2}));
    in[1] = tens(mk_i32(1, (int64_t[]){3}, (int32_t[]){1, 2, 3}));
    expect_fail(ISA_EQUAL, 0, in, 2, TFVM_ERR_TYPE, "dtype mismatch: f64 and i32");
    /* faults inside a tensor free the half-made result */
    in[0] = tens(mk_i32(1, (int64_t[]){3}, (int32_t[]){1, 2, 3}));
    in[1] = tens(mk_i32(1, (int64_t[]){3}, (int32_t[]){1, 0, 3}));
    expect_fail(ISA_DIV, 0, in, 2, TFVM_ERR_ARITH, "integer division by zero");
    in[0] = tens(mk_i32(2, (int64_t[]){2, 2}, (int32_t[]){1, 2, 3, 4}));
    in[1] = tens(mk_i32(1, (int64_t[]){2}, (int32_t[]){3, 0}));
    expect_fail(ISA_MOD, 0, in, 2, TFVM_ERR_ARITH, "integer modulo by zero");
    in[0] = tens(mk_f64(1, (int64_t[]){3}, (double[]){1.0, NAN, 2.0}));
    expect_fail(ISA_CAST, TFVM_I32, in, 1, TFVM_ERR_ARITH, "cannot cast f64 nan to i32");
    in[0] = tens(mk_f64(1, (int64_t[]){3}, (double[]){1.0, 2.0, -1e19}));
    expect_fail(ISA_CAST, TFVM_I64, in, 1, TFVM_ERR_ARITH,
                "cannot cast f64 -1e+19 to i64 (out of range)");
}
END_TEST

START_TEST(test_select_broadcast)
{
    /* c [2, 1], a [3], b scalar -> [2, 3] */
    tfvm_tensor *c = tfvm_tensor_new(TFVM_BOOL, 2, (int64_t[]){2, 1}, &alloc);
    ((uint8_t *)c->data)[0] = 1;
    tfvm_tensor *a = mk_f64(1, (int64_t[]){3}, (double[]){1.5, 2.5, 3.5});
    dev_value in[3] = {tens(c), tens(a), scalar((tv)F64_(-1.0))}, out;
    char msg[256] = "";
    ck_assert_int_eq(dev_cpu_elementwise(ISA_SELECT, 0, in, &out, &alloc, msg, sizeof msg), TFVM_OK);
    ck_assert_int_eq(out.dtype, TFVM_F64);
    ck_assert_int_eq(out.u.t->rank, 2);
    ck_assert_int_eq(out.u.t->dims[0], 2);
    ck_assert_int_eq(out.u.t->dims[1], 3);
    const double want[6] = {1.5, 2.5, 3.5, -1.0, -1.0, -1.0};
    for (int i = 0; i < 6; i++)
        ck_assert(((double *)out.u.t->data)[i] == want[i]);
    dev_value_release(&out);
    /* c scalar, a [2], b [3, 1] -> [3, 2], all from a */
    dev_value in2[3] = {scalar((tv)B_(1)), tens(mk_i32(1, (int64_t[]){2}, (int32_t[]){7, 8})),
                        tens(mk_i32(2, (int64_t[]){3, 1}, (int32_t[]){0, 0, 0}))};
    ck_assert_int_eq(dev_cpu_elementwise(ISA_SELECT, 0, in2, &out, &alloc, msg, sizeof msg), TFVM_OK);
    ck_assert_int_eq(out.u.t->dims[0], 3);
    ck_assert_int_eq(out.u.t->dims[1], 2);
    const int32_t want2[6] = {7, 8, 7, 8, 7, 8};
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(((int32_t *)out.u.t->data)[i], want2[i]);
    dev_value_release(&out);
    /* c [4] alternating with contiguous a, b of the same shape */
    tfvm_tensor *c4 = tfvm_tensor_new(TFVM_BOOL, 1, (int64_t[]){4}, &alloc);
    ((uint8_t *)c4->data)[1] = ((uint8_t *)c4->data)[3] = 1;
    dev_value in3[3] = {tens(c4), tens(mk_i32(1, (int64_t[]){4}, (int32_t[]){1, 2, 3, 4})),
                        tens(mk_i32(1, (int64_t[]){4}, (int32_t[]){-1, -2, -3, -4}))};
    ck_assert_int_eq(dev_cpu_elementwise(ISA_SELECT, 0, in3, &out, &alloc, msg, sizeof msg), TFVM_OK);
    for (int k = 0; k < 3; k++) {
        dev_value_release(&in[k]);
        dev_value_release(&in2[k]);
        dev_value_release(&in3[k]);
    }
    expect_i32(&out, (int32_t[]){-1, 2, -3, 4}, 4); /* also checks that nothing leaked */
    /* three shapes that do not broadcast together */
    dev_value bad[3] = {tens(tfvm_tensor_new(TFVM_BOOL, 2, (int64_t[]){2, 1}, &alloc)),
                        tens(mk_i32(1, (int64_t[]){3}, (int32_t[]){1, 2, 3})),
                        tens(mk_i32(1, (int64_t[]){4}, (int32_t[]){1, 2, 3, 4}))};
    expect_fail(ISA_SELECT, 0, bad, 3, TFVM_ERR_SHAPE, "shapes [2, 1], [3] and [4] do not broadcast");
}
END_TEST

START_TEST(test_cast_tensors)
{
    tfvm_tensor *a = mk_f64(1, (int64_t[]){4}, (double[]){1.5, -2.5, 3e9, -0.0});
    dev_value in = tens(a), out;
    char msg[128];
    ck_assert_int_eq(dev_cpu_elementwise(ISA_CAST, TFVM_I64, &in, &out, &alloc, msg, sizeof msg),
                     TFVM_OK);
    const int64_t *d = out.u.t->data;
    ck_assert_int_eq(d[0], 1);
    ck_assert_int_eq(d[1], -2);
    ck_assert_int_eq(d[2], 3000000000);
    ck_assert_int_eq(d[3], 0);
    dev_value_release(&out);
    /* same dtype: the (immutable) input is shared, with its own reference */
    ck_assert_int_eq(dev_cpu_elementwise(ISA_CAST, TFVM_F64, &in, &out, &alloc, msg, sizeof msg),
                     TFVM_OK);
    ck_assert_ptr_eq(out.u.t, a);
    ck_assert_int_eq(out.is_tensor, 1);
    ck_assert_uint_eq(atomic_load(&a->refs), 2);
    dev_value_release(&out);
    dev_value_release(&in);
    ck_assert_int_eq(ta.live, 0);
}
END_TEST

START_TEST(test_nomem)
{
    tfvm_tensor *a = mk_i32(1, (int64_t[]){3}, (int32_t[]){1, 2, 3});
    dev_value in[2] = {tens(a), scalar((tv)I32_(1))}, out = {.dtype = 99};
    char msg[128];
    ta.countdown = 0; /* the next allocation fails */
    ck_assert_int_eq(dev_cpu_elementwise(ISA_ADD, 0, in, &out, &alloc, msg, sizeof msg),
                     TFVM_ERR_NOMEM);
    ck_assert_str_eq(msg, "out of memory");
    ck_assert_int_eq(out.dtype, 99);
    ta.countdown = -1;
    dev_value_release(&in[0]);
    ck_assert_int_eq(ta.live, 0);
}
END_TEST

/* ---- NumPy-made broadcasting results (test/data/npy/make_fixtures.py) ------- */
static dev_value load(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "test/data/npy/%s", name);
    tfvm_tensor *t = NULL;
    tfvm_error err;
    ck_assert_msg(tfvm_npy_load(path, &alloc, &t, &err) == TFVM_OK, "%s", err.message);
    return tens(t);
}

static void against_numpy(isa_op op, const char *a, const char *b, const char *want)
{
    dev_value in[2] = {load(a), load(b)}, w = load(want), out;
    char msg[256] = "";
    ck_assert_msg(dev_cpu_elementwise(op, 0, in, &out, &alloc, msg, sizeof msg) == TFVM_OK, "%s", msg);
    ck_assert_int_eq(out.u.t->dtype, w.u.t->dtype);
    ck_assert_int_eq(out.u.t->rank, w.u.t->rank);
    ck_assert_mem_eq(out.u.t->dims, w.u.t->dims, sizeof(int64_t) * w.u.t->rank);
    ck_assert_uint_eq(out.u.t->nbytes, w.u.t->nbytes);
    ck_assert_msg(memcmp(out.u.t->data, w.u.t->data, w.u.t->nbytes) == 0, "%s differs", want);
    dev_value_release(&out);
    dev_value_release(&w);
    dev_value_release(&in[0]);
    dev_value_release(&in[1]);
    ck_assert_int_eq(ta.live, 0);
}

START_TEST(test_numpy_fixtures)
{
    against_numpy(ISA_ADD, "bc_a.npy", "bc_c.npy", "bc_add.npy");
    against_numpy(ISA_MAX, "bc_a.npy", "bc_c.npy", "bc_max.npy");
    against_numpy(ISA_MUL, "bc_ia.npy", "bc_ib.npy", "bc_imul.npy");
    against_numpy(ISA_DIV, "bc_ia.npy", "bc_ib.npy", "bc_idiv.npy");
    against_numpy(ISA_MOD, "bc_ia.npy", "bc_ib.npy", "bc_imod.npy");
    against_numpy(ISA_LESS, "bc_ia.npy", "bc_ib.npy", "bc_iless.npy");
}
END_TEST

/* ---- The op table (isa/ops.def) against the kernels ---------------------------
 * Iterates the table, so a new row is checked without touching this file:
 * every elementwise op on every dtype, as scalars and as a [2] tensor. What
 * `types` allows must run (a kernel exists: never INTERNAL or UNSUPPORTED)
 * and give `result`'s dtype, the scalar and tensor paths agreeing; anything
 * else is a type error. Operands are 1 (true), valid for every op. */
static bool elementwise_op(int op)
{
    return isa_is_compute(isa_ops[op].cls) && isa_ops[op].cls != ISA_CLASS_TENSOR;
}

static void table_one(isa_op op, uint32_t attr, const uint8_t *dt, int *ran)
{
    const int n = isa_ops[op].n_in;
    const uint8_t d = isa_ops[op].cls == ISA_CLASS_SELECT ? dt[1] : dt[0];
    const bool takes = isa_takes(op, d) && (isa_ops[op].cls != ISA_CLASS_SELECT || dt[0] == TFVM_BOOL);
    char label[96];
    snprintf(label, sizeof label, "%s on %s%s%s", isa_ops[op].name, tfvm_dtype_name((tfvm_dtype)d),
             op == ISA_CAST ? " to " : "", op == ISA_CAST ? tfvm_dtype_name((tfvm_dtype)attr) : "");
    dev_value got[2];
    for (int mode = 0; mode < 2; mode++) {
        dev_value in[3];
        for (int k = 0; k < n; k++) {
            tv one = {dt[k], 1, 1.0};
            in[k] = mode == 0 ? scalar(one) : tens(filled(one, 1, (int64_t[]){2}));
        }
        char msg[256] = "";
        got[mode] = (dev_value){.dtype = 99};
        tfvm_status st = dev_cpu_elementwise(op, attr, in, &got[mode], &alloc, msg, sizeof msg);
        for (int k = 0; k < n; k++)
            dev_value_release(&in[k]);
        if (!takes) {
            ck_assert_msg(st == TFVM_ERR_TYPE, "%s: got %s (%s), want a type error", label,
                          tfvm_status_name(st), msg);
            ck_assert_int_eq(got[mode].dtype, 99);
            continue;
        }
        ck_assert_msg(st == TFVM_OK, "%s (%s): %s: %s", label, mode ? "tensor" : "scalar",
                      tfvm_status_name(st), msg);
        ck_assert_msg(got[mode].dtype == isa_result_dtype(op, dt, attr), "%s: result %s, ops.def says %s",
                      label, tfvm_dtype_name((tfvm_dtype)got[mode].dtype), isa_result_name(isa_ops[op].result));
        ck_assert_int_eq(got[mode].is_tensor, mode);
    }
    if (!takes)
        return;
    const size_t es = tfvm_dtype_size((tfvm_dtype)got[0].dtype);
    const tfvm_tensor *t = got[1].u.t;
    ck_assert_int_eq(t->dtype, got[0].dtype);
    ck_assert_int_eq(t->count, 2);
    for (int i = 0; i < 2; i++)
        ck_assert_msg(memcmp((const char *)t->data + i * (ptrdiff_t)es, &got[0].u, es) == 0,
                      "%s: the tensor kernel and the scalar path differ", label);
    dev_value_release(&got[1]);
    ck_assert_msg(ta.live == 0, "%s: %ld bytes leaked", label, ta.live);
    (*ran)++;
}

START_TEST(test_table_kernels)
{
    int ran = 0, ops = 0;
    for (int op = 0; op < ISA_OP_COUNT; op++) {
        if (!elementwise_op(op))
            continue;
        ops++;
        ck_assert_msg(isa_ops[op].types != 0, "%s takes no dtype", isa_ops[op].name);
        for (int d = TFVM_BOOL; d <= ISA_DTYPE_LAST; d++) {
            if (op == ISA_CAST) {
                for (int to = TFVM_BOOL; to <= ISA_DTYPE_LAST; to++)
                    table_one((isa_op)op, (uint32_t)to, (uint8_t[3]){(uint8_t)d}, &ran);
            } else if (isa_ops[op].cls == ISA_CLASS_SELECT) {
                table_one((isa_op)op, 0, (uint8_t[3]){TFVM_BOOL, (uint8_t)d, (uint8_t)d}, &ran);
                table_one((isa_op)op, 0, (uint8_t[3]){(uint8_t)d, (uint8_t)d, (uint8_t)d}, &ran);
            } else {
                table_one((isa_op)op, 0, (uint8_t[3]){(uint8_t)d, (uint8_t)d, (uint8_t)d}, &ran);
            }
        }
    }
    /* 7 dtypes: 49 casts, SELECT's 7 with a bool condition (and bool as both) */
    printf("test_elementwise: %d elementwise ops of ops.def, %d (op, dtype) kernels run\n", ops, ran);
    ck_assert_int_ge(ran, 49 + 7 + 1);
}
END_TEST

/* A type error from the table's sets names what the op takes. */
START_TEST(test_table_messages)
{
    char msg[256];
    dev_value in[2] = {scalar((tv)B_(1)), scalar((tv)B_(1))}, out;
    ck_assert_int_eq(dev_cpu_elementwise(ISA_SIGMOID, 0, in, &out, NULL, msg, sizeof msg), TFVM_ERR_TYPE);
    ck_assert_str_eq(msg, "sigmoid needs a float operand (f32 or f64), got bool");
    ck_assert_int_eq(dev_cpu_elementwise(ISA_FLOOR_MOD, 0, in, &out, NULL, msg, sizeof msg), TFVM_ERR_TYPE);
    ck_assert_str_eq(msg, "arithmetic on bool is not defined");
    char list[64];
    ck_assert_str_eq(isa_types_list(ISA_TYPES_NUM, list, sizeof list), "i32, i64, u8, i8, f32 or f64");
    ck_assert_str_eq(isa_types_list(ISA_TYPES_BOOL, list, sizeof list), "bool");
    ck_assert_str_eq(isa_types_list(ISA_TYPES_FLT, list, sizeof list), "f32 or f64");
}
END_TEST

static void setup(void)
{
    ta = (tu_alloc){.countdown = -1, .fresh_only = true};
}

static Suite *suite(void)
{
    Suite *s = suite_create("elementwise");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_loop_test(tc, test_cases, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, test_compare);
    tcase_add_test(tc, test_bad_op_and_attr);
    tcase_add_test(tc, test_broadcast_basic);
    tcase_add_test(tc, test_broadcast_scalars);
    tcase_add_test(tc, test_broadcast_empty);
    tcase_add_test(tc, test_broadcast_errors);
    tcase_add_test(tc, test_select_broadcast);
    tcase_add_test(tc, test_cast_tensors);
    tcase_add_test(tc, test_nomem);
    tcase_add_test(tc, test_numpy_fixtures);
    tcase_add_test(tc, test_table_kernels);
    tcase_add_test(tc, test_table_messages);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(suite()); }
