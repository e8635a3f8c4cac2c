/* test/unit/test_kernels_shape.c — the CPU kernels of the shape, index and
 * reduction tensor ops (LOG_SOFTMAX .. STACK_PUT: reductions and scans,
 * squeeze/expand/tile/slices, gathers, TOPK, ONEHOT, stacks, RESIZE, LRN and
 * the 12-parameter pools): exact outputs
 * worked out by hand (or with NumPy / ONNX's reference implementation, noted
 * where so), every error message word for word, every allocation failure. */
#include "kernutil.h"


/* ---- Reductions and scans --------------------------------------------------------- */
START_TEST(test_log_softmax)
{
    /* NumPy: x - log(sum(exp(x))) */
    OK(ISA_LOG_SOFTMAX, -1, (T(F64, (1, 3), 1, 2, 3)), F64, (1, 3), -2.40760596444438, -1.4076059644443801,
       -0.40760596444438013);
    /* stable at 1000; equal inputs: -log 2 */
    OK(ISA_LOG_SOFTMAX, 0, (T(F32, (2, 1), 1000, 1000)), F32, (2, 1), -0.6931472, -0.6931472);
    OK(ISA_LOG_SOFTMAX, 1, (T(F32, (2, 0))), F32, (2, 0), 0);
    OK(ISA_LOG_SOFTMAX, 0, (T(F64, (2), 1, NAN)), F64, (2), NAN, NAN);
    FAILS(ISA_LOG_SOFTMAX, 0, (T(I32, (2))), TY, "log_softmax: not defined on i32 (floats only)");
    FAILS(ISA_LOG_SOFTMAX, 2, (T(F32, (2, 3))), SH, "log_softmax: axis 2 out of range for shape [2, 3]");
}
END_TEST

START_TEST(test_reduce_min_prod)
{
    OK(ISA_REDUCE_MIN, 0, (T(I32, (2, 2), 1, -2, 3, -4), IV(1)), I32, (2), -2, -4);
    OK(ISA_REDUCE_MIN, ISA_OPT_KEEPDIMS, (T(F32, (2, 2), 1, -2, 3, -4), IV(0)), F32, (1, 2), 1, -4);
    OK0(ISA_REDUCE_MIN, 0, (T(F64, (3), 2, NAN, 1), IV0), F64, NAN);
    OK0(ISA_REDUCE_MIN, 0, (T(I64, (2), 4611686018427387904.0, 7), IV0), I64, 7);
    OK(ISA_REDUCE_MIN, 0, (T(B, (2, 2), 1, 0, 1, 1), IV(1)), B, (2), 0, 1); /* all */
    OK(ISA_REDUCE_MAX, 0, (T(B, (2, 2), 1, 0, 0, 0), IV(1)), B, (2), 1, 0); /* any */
    OK(ISA_REDUCE_PROD, 0, (T(I64, (2, 3), 1, 2, 3, 4, 5, 6), IV(0)), I64, (3), 4, 10, 18);
    OK0(ISA_REDUCE_PROD, 0, (T(I64, (2, 3), 1, 2, 3, 4, 5, 6), IV0), I64, 720);
    OK(ISA_REDUCE_PROD, ISA_OPT_KEEPDIMS, (T(F32, (2, 2), 0.5, 4, 3, -1), IV(-1)), F32, (2, 1), 2, -3);
    OK0(ISA_REDUCE_PROD, 0, (T(I32, (2), 65536, 65536), IV0), I32, 0); /* wraps */
    OK0(ISA_REDUCE_PROD, 0, (T(F64, (0)), IV0), F64, 1);                /* of nothing */
    OK(ISA_REDUCE_PROD, 0, (T(F32, (0, 2)), IV(0)), F32, (2), 1, 1);
    FAILS(ISA_REDUCE_MIN, 0, (T(I64, (0)), IV0), SH, "reduce_min: min over no elements: axes [] of shape [0]");
    FAILS(ISA_REDUCE_MIN, 0, (T(F32, (2)), IV(0, -1)), AR, "reduce_min: axis -1 repeated in axes [0, -1]");
    FAILS(ISA_REDUCE_PROD, 0, (T(B, (2)), IV0), TY, "reduce_prod: not defined on bool");
    FAILS(ISA_REDUCE_PROD, 0, (T(F32, (2)), IV(1)), SH, "reduce_prod: axis 1 out of range for shape [2]");
}
END_TEST

START_TEST(test_argmin)
{
    OK0(ISA_ARGMIN, 0, (T(I32, (3), 3, 1, 1)), I64, 1);
    OK(ISA_ARGMIN, 0, (T(F32, (2, 2), 1, 5, 7, 2)), I64, (2), 0, 1);
    OK(ISA_ARGMIN, -1, (T(F64, (2, 3), 1, NAN, -1, 4, -3, -3)), I64, (2), 1, 1);
    OK0(ISA_ARGMIN, 0, (T(B, (4), 1, 1, 0, 0)), I64, 2);
    OK0(ISA_ARGMIN, 0, (T(I64, (2), INT64_MIN, INT64_MIN)), I64, 0);
    FAILS(ISA_ARGMIN, 1, (T(F32, (2, 0))), SH, "argmin: axis 1 of shape [2, 0] is empty");
}
END_TEST

START_TEST(test_cumsum)
{
    OK(ISA_CUMSUM, 0, (T(I32, (4), 1, 2, 3, 4), sc(I32, 0)), I32, (4), 1, 3, 6, 10);
    OK(ISA_CUMSUM, ISA_OPT_EXCLUSIVE, (T(I64, (4), 1, 2, 3, 4), sc64(0)), I64, (4), 0, 1, 3, 6);
    OK(ISA_CUMSUM, ISA_OPT_REVERSE, (T(F32, (4), 1, 2, 3, 4), sc64(-1)), F32, (4), 10, 9, 7, 4);
    OK(ISA_CUMSUM, ISA_OPT_EXCLUSIVE | ISA_OPT_REVERSE, (T(F64, (4), 1, 2, 3, 4), sc64(0)), F64, (4), 9, 7, 4, 0);
    OK(ISA_CUMSUM, 0, (T(I32, (2, 3), 1, 2, 3, 4, 5, 6), sc(I32, 1)), I32, (2, 3), 1, 3, 6, 4, 9, 15);
    OK(ISA_CUMSUM, 0, (T(F32, (2, 3), 1, 2, 3, 4, 5, 6), IV(-2)), F32, (2, 3), 1, 2, 3, 5, 7, 9);
    OK(ISA_CUMSUM, 0, (T(I32, (2), 2147483647, 1), sc64(0)), I32, (2), 2147483647, -2147483648.0);
    OK(ISA_CUMSUM, 0, (T(F32, (0, 2)), sc64(0)), F32, (0, 2), 0);
    FAILS(ISA_CUMSUM, 0, (T(F32, (2)), sc64(1)), SH, "cumsum: axis 1 out of range for shape [2]");
    FAILS(ISA_CUMSUM, 0, (T(F32, (2)), sc(F32, 0)), TY, "cumsum: axis must be an integer scalar, got f32 []");
    FAILS(ISA_CUMSUM, 0, (T(F32, (2)), IV(0, 0)), TY, "cumsum: axis must be an integer scalar, got i64 [2]");
    FAILS(ISA_CUMSUM, 0, (T(B, (2)), sc64(0)), TY, "cumsum: not defined on bool");
    FAILS(ISA_CUMSUM, 0, (sc(F32, 1), sc64(0)), SH, "cumsum: axis 0 out of range for shape []");
}
END_TEST

/* ---- Reshapes ------------------------------------------------------------------------- */
START_TEST(test_squeeze_unsqueeze_flatten)
{
    OK(ISA_SQUEEZE, 0, (T(I32, (1, 3, 1, 2), 1, 2, 3, 4, 5, 6), IV0), I32, (3, 2), 1, 2, 3, 4, 5, 6);
    OK(ISA_SQUEEZE, 0, (T(F32, (1, 3, 1, 2), 1, 2, 3, 4, 5, 6), IV(-2)), F32, (1, 3, 2), 1, 2, 3, 4, 5, 6);
    OK0(ISA_SQUEEZE, 0, (T(B, (1, 1), 1), IV(0, 1)), B, 1);
    OK0(ISA_SQUEEZE, 0, (sc(F64, 2.5), IV0), F64, 2.5);
    OK(ISA_SQUEEZE, 0, (T(F32, (0, 1)), IV0), F32, (0), 0);
    FAILS(ISA_SQUEEZE, 0, (T(F32, (1, 3, 1, 2)), IV(1)), SH, "squeeze: axis 1 of shape [1, 3, 1, 2] is not of size 1");
    FAILS(ISA_SQUEEZE, 0, (T(F32, (1, 3, 1, 2)), IV(4)), SH, "squeeze: axis 4 out of range for shape [1, 3, 1, 2]");
    FAILS(ISA_SQUEEZE, 0, (T(F32, (1, 3, 1, 2)), IV(0, -4)), AR, "squeeze: axis -4 repeated in axes [0, -4]");

    OK(ISA_UNSQUEEZE, 0, (T(I64, (3), 1, 2, 3), IV(0, -1)), I64, (1, 3, 1), 1, 2, 3);
    OK(ISA_UNSQUEEZE, 0, (T(F32, (2, 2), 1, 2, 3, 4), IV(1)), F32, (2, 1, 2), 1, 2, 3, 4);
    OK(ISA_UNSQUEEZE, 0, (sc(I32, 7), IV(0)), I32, (1), 7);
    OK0(ISA_UNSQUEEZE, 0, (sc(I32, 7), IV0), I32, 7);
    FAILS(ISA_UNSQUEEZE, 0, (T(F32, (2, 2)), IV(3)), SH, "unsqueeze: axis 3 out of range for result rank 3 (x [2, 2])");
    FAILS(ISA_UNSQUEEZE, 0, (T(F32, (2, 2)), IV(0, -4)), AR, "unsqueeze: axis -4 repeated in axes [0, -4]");
    FAILS(ISA_UNSQUEEZE, 0, (T(F32, (1, 1, 1, 1, 1, 1, 1, 1)), IV(0)), SH,
          "unsqueeze: result would have rank 9 (x [1, 1, 1, 1, 1, 1, 1, 1], axes [0]), more than 8");

    OK(ISA_FLATTEN, 1, (T(I32, (2, 1, 2), 1, 2, 3, 4)), I32, (2, 2), 1, 2, 3, 4);
    OK(ISA_FLATTEN, 0, (T(I32, (2, 1, 2), 1, 2, 3, 4)), I32, (1, 4), 1, 2, 3, 4);
    OK(ISA_FLATTEN, 3, (T(I32, (2, 1, 2), 1, 2, 3, 4)), I32, (4, 1), 1, 2, 3, 4);
    OK(ISA_FLATTEN, -1, (T(F64, (2, 1, 2), 1, 2, 3, 4)), F64, (2, 2), 1, 2, 3, 4);
    OK(ISA_FLATTEN, 0, (sc(F32, 3)), F32, (1, 1), 3);
    OK(ISA_FLATTEN, 1, (T(B, (0, 3))), B, (0, 3), 0);
    FAILS(ISA_FLATTEN, 4, (T(F32, (2, 3, 4))), SH, "flatten: axis 4 out of range for shape [2, 3, 4] (0..3)");
    FAILS(ISA_FLATTEN, -4, (T(F32, (2, 3, 4))), SH, "flatten: axis -4 out of range for shape [2, 3, 4] (0..3)");
    FAILS(ISA_FLATTEN, 2, (T(B, (INT64_C(1) << 40, INT64_C(1) << 40, 0))), SH,
          "flatten: result for shape [1099511627776, 1099511627776, 0] at axis 2 is too large");
}
END_TEST

/* A reshape of a tensor nobody else holds relabels it (no allocation, the
 * same data); one another token still holds is copied, and that one keeps
 * its dims and values. So does a TRANSPOSE that moves only axes of size 1. */
START_TEST(test_reshape_in_place)
{
    static const struct {
        isa_op op;
        int32_t attr;
    } ops[] = {{ISA_RESHAPE, 0}, {ISA_SQUEEZE, 0}, {ISA_UNSQUEEZE, 0}, {ISA_FLATTEN, 1}, {ISA_TRANSPOSE, 0}};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        const isa_op op = ops[i].op;
        dev_value x = T(F32, (2, 1, 3), 1, 2, 3, 4, 5, 6), out;
        dev_value arg = op == ISA_RESHAPE     ? IV(3, 2)
                        : op == ISA_SQUEEZE   ? IV(1)
                        : op == ISA_UNSQUEEZE ? IV(0)
                        : op == ISA_TRANSPOSE ? IV(1, 0, 2)
                                              : NONE;
        const void *data = x.u.t->data;
        const long a0 = ta.allocs;
        dev_value_retain(&arg);
        ck_assert_int_eq(C(op, ops[i].attr, &out, x, arg), TFVM_OK);
        ck_assert_msg(out.u.t->data == data && ta.allocs == a0, "%s: not in place", isa_ops[op].name);
        ck_assert_int_eq(out.u.t->count, 6);
        ck_assert(((float *)out.u.t->data)[5] == 6);
        dev_value_release(&out);
        x = T(F32, (2, 1, 3), 1, 2, 3, 4, 5, 6);
        dev_value_retain(&x);
        ck_assert_int_eq(C(op, ops[i].attr, &out, x, arg), TFVM_OK);
        ck_assert_msg(out.u.t->data != x.u.t->data, "%s: a held tensor changed", isa_ops[op].name);
        ck_assert_int_eq(x.u.t->rank, 3);
        ck_assert_int_eq(x.u.t->dims[1], 1);
        ck_assert(((float *)out.u.t->data)[5] == 6);
        dev_value_release(&out);
        dev_value_release(&x);
    }
    /* the result's dims, as each op defines them; a TRANSPOSE that moves an
     * axis larger than 1 past another still transposes */
    OK(ISA_RESHAPE, 0, (T(F32, (2, 1, 3), 1, 2, 3, 4, 5, 6), IV(3, -1)), F32, (3, 2), 1, 2, 3, 4, 5, 6);
    OK(ISA_TRANSPOSE, 0, (T(F32, (2, 1, 3), 1, 2, 3, 4, 5, 6), IV(1, 0, 2)), F32, (1, 2, 3), 1, 2, 3, 4, 5, 6);
    OK(ISA_TRANSPOSE, 0, (T(F32, (2, 1, 3), 1, 2, 3, 4, 5, 6), IV(2, 1, 0)), F32, (3, 1, 2), 1, 4, 2, 5, 3, 6);
    OK(ISA_TRANSPOSE, 0, (T(F32, (1, 2, 1, 3), 1, 2, 3, 4, 5, 6), IV(2, 1, 3, 0)), F32, (1, 2, 3, 1), 1, 2, 3, 4, 5, 6);
}
END_TEST

/* ---- Layout ------------------------------------------------------------------------------ */
START_TEST(test_expand_tile)
{
    OK(ISA_EXPAND, 0, (T(I32, (3, 1), 1, 2, 3), IV(2, 1, 2)), I32, (2, 3, 2), 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3);
    OK(ISA_EXPAND, 0, (T(F32, (1), 7), IV(3)), F32, (3), 7, 7, 7);
    OK(ISA_EXPAND, 0, (T(F64, (2, 2), 1, 2, 3, 4), IV(1, 1)), F64, (2, 2), 1, 2, 3, 4);
    OK(ISA_EXPAND, 0, (sc(B, 1), IV(2)), B, (2), 1, 1);
    OK(ISA_EXPAND, 0, (T(I64, (1, 2), 5, 6), IV(0, 1)), I64, (0, 2), 0);
    OK0(ISA_EXPAND, 0, (sc(I32, 4), IV0), I32, 4);
    FAILS(ISA_EXPAND, 0, (T(F32, (2, 3)), IV(4)), SH, "expand: shapes [2, 3] and [4] do not broadcast");
    FAILS(ISA_EXPAND, 0, (T(F32, (2, 3)), IV(-1)), AR, "expand: bad shape [-1]: dims must be >= 0");

    OK(ISA_TILE, 0, (T(I32, (2), 1, 2), IV(3)), I32, (6), 1, 2, 1, 2, 1, 2);
    OK(ISA_TILE, 0, (T(F32, (2, 2), 1, 2, 3, 4), IV(2, 1)), F32, (4, 2), 1, 2, 3, 4, 1, 2, 3, 4);
    OK(ISA_TILE, 0, (T(I64, (2, 2), 1, 2, 3, 4), IV(1, 2)), I64, (2, 4), 1, 2, 1, 2, 3, 4, 3, 4);
    OK(ISA_TILE, 0, (T(B, (1, 2, 1), 1, 0), IV(2, 1, 2)), B, (2, 2, 2), 1, 1, 0, 0, 1, 1, 0, 0);
    OK(ISA_TILE, 0, (T(F64, (2, 2)), IV(0, 2)), F64, (0, 4), 0);
    OK0(ISA_TILE, 0, (sc(F64, 1.5), IV0), F64, 1.5);
    FAILS(ISA_TILE, 0, (T(F32, (2, 2)), IV(2)), SH, "tile: repeats [2] must have one entry per axis of [2, 2]");
    FAILS(ISA_TILE, 0, (T(F32, (2, 2)), IV(-1, 1)), AR, "tile: bad repeats [-1, 1]: each must be in 0..2^40");
    FAILS(ISA_TILE, 0, (T(F32, (1, 1)), IV(INT64_C(1) << 40, INT64_C(1) << 40)), SH,
          "tile: result of tiling [1, 1] by [1099511627776, 1099511627776] is too large");
}
END_TEST

START_TEST(test_strided_slice)
{
#define X10 T(I32, (10), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
    OK(ISA_STRIDED_SLICE, 0, (X10, IV(8), IV(INT64_MIN), IV0, IV(-3)), I32, (3), 8, 5, 2);
    OK(ISA_STRIDED_SLICE, 0, (X10, IV(-1), IV(INT64_MIN), IV0, IV(-1)), I32, (10), 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    OK(ISA_STRIDED_SLICE, 0, (X10, IV(1), IV(INT64_MAX), IV0, IV(2)), I32, (5), 1, 3, 5, 7, 9);
    OK(ISA_STRIDED_SLICE, 0, (X10, IV(-3), IV(100), IV(0), IV0), I32, (3), 7, 8, 9);
    OK(ISA_STRIDED_SLICE, 0, (X10, IV(5), IV(1), IV0, IV0), I32, (0), 0);
    OK(ISA_STRIDED_SLICE, 0, (X10, IV(20), IV(-20), IV0, IV(-4)), I32, (3), 9, 5, 1);
    /* a start below -d with a negative step: nothing (NumPy, ONNX's reference) */
    OK(ISA_STRIDED_SLICE, 0, (X10, IV(-11), IV(INT64_MIN), IV0, IV(-1)), I32, (0), 0);
    OK(ISA_STRIDED_SLICE, 0, (X10, IV(-10), IV(INT64_MIN), IV0, IV(-1)), I32, (1), 0);
#define X34 T(F32, (3, 4), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
    OK(ISA_STRIDED_SLICE, 0, (X34, IV(0, 3), IV(INT64_MAX, 0), IV(0, 1), IV(2, -1)), F32, (2, 3), 3, 2, 1, 11, 10, 9);
    OK(ISA_STRIDED_SLICE, 0, (X34, IV(1), IV(3), IV(-1), IV0), F32, (3, 2), 1, 2, 5, 6, 9, 10);
    OK(ISA_STRIDED_SLICE, 0, (X34, IV(1, 1), IV(2, 2), IV0, IV0), F32, (1, 1), 5);
    OK(ISA_STRIDED_SLICE, 0, (X34, IV0, IV0, IV0, IV0), F32, (3, 4), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
    OK(ISA_STRIDED_SLICE, 0, (T(B, (0, 2)), IV(-1), IV(INT64_MIN), IV0, IV(-1)), B, (0, 2), 0);
    OK0(ISA_STRIDED_SLICE, 0, (sc(I64, 9), IV0, IV0, IV0, IV0), I64, 9);
    FAILS(ISA_STRIDED_SLICE, 0, (X10, IV(0), IV(5), IV0, IV(0)), AR, "strided_slice: step 0 for axis 0 in steps [0]");
    FAILS(ISA_STRIDED_SLICE, 0, (X10, IV(0), IV(1, 2), IV0, IV0), SH, "strided_slice: starts [0] and ends [1, 2] differ in length");
    FAILS(ISA_STRIDED_SLICE, 0, (X34, IV(0), IV(1), IV(0, 1), IV0), SH, "strided_slice: axes [0, 1] and starts [0] differ in length");
    FAILS(ISA_STRIDED_SLICE, 0, (X34, IV(0), IV(1), IV0, IV(1, 1)), SH, "strided_slice: steps [1, 1] and starts [0] differ in length");
    FAILS(ISA_STRIDED_SLICE, 0, (X34, IV(0), IV(1), IV(2), IV0), SH, "strided_slice: axis 2 out of range for shape [3, 4]");
    FAILS(ISA_STRIDED_SLICE, 0, (X34, IV(0, 0), IV(1, 1), IV(0, -2), IV0), AR, "strided_slice: axis -2 repeated in axes [0, -2]");
    FAILS(ISA_STRIDED_SLICE, 0, (X34, IV(0, 0, 0), IV(1, 1, 1), IV0, IV0), SH,
          "strided_slice: starts [0, 0, 0] has more entries than [3, 4] has axes");
    FAILS(ISA_STRIDED_SLICE, 0, (X34, IV(0), IV(1), T(I32, (1), 0), IV0), TY, "strided_slice: axes must be an i64 vector, got i32 [1]");
#undef X10
#undef X34
}
END_TEST

START_TEST(test_trilu)
{
#define M33 T(I32, (3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9)
    OK(ISA_TRILU, 0, (M33, sc64(0)), I32, (3, 3), 1, 0, 0, 4, 5, 0, 7, 8, 9);
    OK(ISA_TRILU, ISA_OPT_UPPER, (M33, sc64(0)), I32, (3, 3), 1, 2, 3, 0, 5, 6, 0, 0, 9);
    OK(ISA_TRILU, ISA_OPT_UPPER, (M33, IV(1)), I32, (3, 3), 0, 2, 3, 0, 0, 6, 0, 0, 0);
    OK(ISA_TRILU, 0, (M33, sc(I32, -1)), I32, (3, 3), 0, 0, 0, 4, 0, 0, 7, 8, 0);
    OK(ISA_TRILU, 0, (M33, sc64(INT64_MAX)), I32, (3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9);
    OK(ISA_TRILU, ISA_OPT_UPPER, (M33, sc64(INT64_MIN)), I32, (3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9);
    OK(ISA_TRILU, 0, (M33, sc64(-5)), I32, (3, 3), 0, 0, 0, 0, 0, 0, 0, 0, 0);
    OK(ISA_TRILU, ISA_OPT_UPPER, (T(F32, (2, 3, 2), 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6), sc64(-1)), F32, (2, 3, 2),
       1, 2, 3, 4, 0, 6, 1, 2, 3, 4, 0, 6);
    OK(ISA_TRILU, 0, (T(B, (2, 0)), sc64(0)), B, (2, 0), 0);
    FAILS(ISA_TRILU, 0, (T(F32, (3)), sc64(0)), SH, "trilu: x must have rank >= 2, got [3]");
    FAILS(ISA_TRILU, 0, (M33, sc(F32, 0)), TY, "trilu: k must be an integer scalar, got f32 []");
#undef M33
}
END_TEST

START_TEST(test_padv)
{
    OK(ISA_PADV, 0, (T(I32, (2), 1, 2), IV(1, 2), sc(I32, 9)), I32, (5), 9, 1, 2, 9, 9);
    OK(ISA_PADV, ISA_OPT_REFLECT, (T(F32, (3), 1, 2, 3), IV(2, 2), sc(F32, 0)), F32, (7), 3, 2, 1, 2, 3, 2, 1);
    OK(ISA_PADV, ISA_OPT_EDGE, (T(F32, (3), 1, 2, 3), IV(2, 2), sc(I32, 0)), F32, (7), 1, 1, 1, 2, 3, 3, 3);
    OK(ISA_PADV, ISA_OPT_WRAP, (T(I64, (3), 1, 2, 3), IV(2, 2), sc(F32, 0)), I64, (7), 2, 3, 1, 2, 3, 1, 2);
    /* NumPy 'reflect' repeats the mirror for pads wider than the axis */
    OK(ISA_PADV, ISA_OPT_REFLECT, (T(I32, (3), 1, 2, 3), IV(3, 0), sc(F32, 0)), I32, (6), 2, 3, 2, 1, 2, 3);
    OK(ISA_PADV, ISA_OPT_REFLECT, (T(I32, (1), 5), IV(2, 1), sc(F32, 0)), I32, (4), 5, 5, 5, 5);
    OK(ISA_PADV, ISA_OPT_WRAP, (T(I32, (2), 1, 2), IV(-1, 3), sc(F32, 0)), I32, (4), 2, 1, 2, 1);
    OK(ISA_PADV, 0, (T(F64, (4), 1, 2, 3, 4), IV(-1, 1), sc(F64, 0)), F64, (4), 2, 3, 4, 0);
    OK(ISA_PADV, ISA_OPT_EDGE, (T(I32, (2, 2), 1, 2, 3, 4), IV(1, 0, 0, 1), sc(F32, 0)), I32, (3, 3), 1, 2, 2, 1, 2, 2, 3, 4, 4);
    OK(ISA_PADV, 0, (T(B, (1, 2), 1, 0), IV(0, 1, 1, 0), sc(B, 1)), B, (2, 3), 1, 1, 0, 1, 1, 1);
    OK(ISA_PADV, 0, (T(F32, (2, 2), 1, 2, 3, 4), IV(-2, 0, 0, 0), sc(F32, 0)), F32, (0, 2), 0);
    OK0(ISA_PADV, 0, (sc(F32, 3), IV0, sc(F32, 0)), F32, 3);
    FAILS(ISA_PADV, 0, (T(F32, (2)), IV(1), sc(F32, 0)), SH, "padv: pads [1] must have 2 entries per axis of [2]");
    FAILS(ISA_PADV, 0, (T(F32, (2)), IV(1, 1), sc(I32, 0)), TY, "padv: value must be a scalar of x's dtype (f32), got i32 []");
    FAILS(ISA_PADV, 0, (T(F32, (2)), IV(1, 1), T(F32, (1))), TY, "padv: value must be a scalar of x's dtype (f32), got f32 [1]");
    FAILS(ISA_PADV, 0, (T(F32, (2)), IV(-3, 0), sc(F32, 0)), SH, "padv: pads [-3, 0] crop more than axis 0 of [2] holds");
    FAILS(ISA_PADV, ISA_OPT_EDGE, (T(F32, (0)), IV(1, 0), sc(F32, 0)), SH, "padv: cannot pad empty axis 0 of [0] from its elements");
    FAILS(ISA_PADV, ISA_OPT_EDGE | ISA_OPT_WRAP, (T(F32, (2)), IV(1, 0), sc(F32, 0)), AR, "padv: options 6 name more than one mode");
    FAILS(ISA_PADV, 0, (T(F32, (2)), IV(INT64_C(1) << 41, 0), sc(F32, 0)), AR,
          "padv: bad pads [2199023255552, 0]: each must be in -2^40..2^40");
}
END_TEST

/* ---- Indices ------------------------------------------------------------------------------- */
START_TEST(test_gather_elements)
{
    /* ONNX's examples */
    OK(ISA_GATHER_ELEMENTS, 1, (T(F32, (2, 2), 1, 2, 3, 4), T(I64, (2, 2), 0, 0, 1, 0)), F32, (2, 2), 1, 1, 4, 3);
    OK(ISA_GATHER_ELEMENTS, 0, (T(I32, (3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9), T(I32, (2, 3), 1, 2, 0, 2, 0, 0)), I32, (2, 3),
       4, 8, 3, 7, 2, 3);
    OK(ISA_GATHER_ELEMENTS, -1, (T(B, (1, 3), 1, 0, 0), T(I64, (1, 2), -3, -1)), B, (1, 2), 1, 0);
    OK(ISA_GATHER_ELEMENTS, 0, (T(F64, (2)), T(I64, (0))), F64, (0), 0);
    FAILS(ISA_GATHER_ELEMENTS, 1, (T(F32, (2, 2)), T(I64, (2, 2), 0, 2, 0, 0)), SH,
          "gather_elements: index 2 out of range for axis 1 of [2, 2]");
    FAILS(ISA_GATHER_ELEMENTS, 1, (T(F32, (2, 2)), T(I64, (3, 2))), SH,
          "gather_elements: indices [3, 2] do not fit x [2, 2] outside axis 1");
    FAILS(ISA_GATHER_ELEMENTS, 0, (T(F32, (2, 2)), T(I64, (2))), SH,
          "gather_elements: indices [2] do not fit x [2, 2] outside axis 0");
    FAILS(ISA_GATHER_ELEMENTS, 0, (T(F32, (2)), T(F32, (1))), TY, "gather_elements: indices must be i32 or i64, got f32 [1]");
    FAILS(ISA_GATHER_ELEMENTS, 0, (sc(F32, 1), sc64(0)), SH, "gather_elements: axis 0 out of range for shape []");
}
END_TEST

START_TEST(test_topk)
{
    OK(ISA_TOPK, 0, (T(I32, (5), 1, 3, 2, 3, 5), sc64(3), sc(B, 1)), I64, (3), 4, 1, 3);
    OK(ISA_TOPK, 0, (T(I32, (5), 1, 3, 2, 3, 5), IV(2), sc(B, 0)), I64, (2), 0, 2);
    OK(ISA_TOPK, -1, (T(F32, (2, 3), 1, 5, 3, 6, 4, 6), sc64(2), sc(B, 1)), I64, (2, 2), 1, 2, 0, 2);
    OK(ISA_TOPK, 0, (T(F64, (2, 3), 1, 5, 3, 6, 4, 6), sc64(1), sc(B, 1)), I64, (1, 3), 1, 0, 1);
    OK(ISA_TOPK, 0, (T(F32, (3), 1, NAN, 3), sc64(2), sc(B, 1)), I64, (2), 1, 2);
    OK(ISA_TOPK, 0, (T(F32, (3), 1, NAN, 3), sc64(3), sc(B, 0)), I64, (3), 0, 2, 1);
    OK(ISA_TOPK, 0, (T(I64, (3), 7, 7, 7), sc64(3), sc(B, 0)), I64, (3), 0, 1, 2);
    OK(ISA_TOPK, 0, (T(B, (4), 0, 1, 0, 1), sc(I32, 2), sc(B, 1)), I64, (2), 1, 3);
    OK(ISA_TOPK, 0, (T(F32, (3), 1, 2, 3), sc64(0), sc(B, 1)), I64, (0), 0);
    /* a longer line: the merge sort's odd tails; values 11 - (i * 7 % 11) */
    OK(ISA_TOPK, 0, (T(I32, (11), 11, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7), sc64(11), sc(B, 0)), I64, (11), 3, 6, 9, 1, 4, 7, 10,
       2, 5, 8, 0);
    FAILS(ISA_TOPK, 0, (T(F32, (3)), sc64(5), sc(B, 1)), AR, "topk: k 5 out of range for axis 0 of [3]");
    FAILS(ISA_TOPK, 0, (T(F32, (3)), sc64(-1), sc(B, 1)), AR, "topk: k -1 out of range for axis 0 of [3]");
    FAILS(ISA_TOPK, 0, (T(F32, (3)), sc64(1), sc(I32, 1)), TY, "topk: largest must be a bool scalar, got i32 []");
    FAILS(ISA_TOPK, 0, (T(F32, (3)), sc(F32, 1), sc(B, 1)), TY, "topk: k must be an integer scalar, got f32 []");
    FAILS(ISA_TOPK, 1, (T(F32, (3)), sc64(1), sc(B, 1)), SH, "topk: axis 1 out of range for shape [3]");
}
END_TEST

START_TEST(test_onehot)
{
    OK(ISA_ONEHOT, -1, (T(I64, (4), 0, 2, -1, 5), sc(I32, 3), T(F32, (2), 0, 1)), F32, (4, 3),
       1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0);
    OK(ISA_ONEHOT, 0, (T(I64, (4), 0, 2, -1, 5), sc64(3), T(F32, (2), 0, 1)), F32, (3, 4),
       1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0);
    /* float indices and depth are truncated; the values' dtype is the result's */
    OK(ISA_ONEHOT, -1, (T(F32, (1), 1.7), sc(F32, 2.9), T(I64, (2), 5, 7)), I64, (1, 2), 5, 7);
    OK(ISA_ONEHOT, 0, (sc(I32, 1), sc64(3), T(B, (2), 0, 1)), B, (3), 0, 1, 0);
    OK(ISA_ONEHOT, 1, (T(I32, (2, 2), 0, 1, 1, 0), IV(2), T(I32, (2), -1, 1)), I32, (2, 2, 2), 1, -1, -1, 1, -1, 1, 1, -1);
    OK(ISA_ONEHOT, -1, (T(F64, (2), NAN, -3), sc64(2), T(F64, (2), 0, 1)), F64, (2, 2), 0, 0, 0, 0);
    OK(ISA_ONEHOT, -1, (T(I32, (2), 0, 1), sc64(0), T(F32, (2), 0, 1)), F32, (2, 0), 0);
    FAILS(ISA_ONEHOT, -1, (T(I32, (2)), sc64(3), T(F32, (3))), SH, "onehot: values must be a vector [off, on], got f32 [3]");
    FAILS(ISA_ONEHOT, -1, (T(I32, (2)), sc64(-1), T(F32, (2))), AR, "onehot: depth -1 must be in 0..2^40");
    FAILS(ISA_ONEHOT, 2, (T(I32, (3)), sc64(3), T(F32, (2))), SH, "onehot: axis 2 out of range for result rank 2 (indices [3])");
    FAILS(ISA_ONEHOT, -1, (T(B, (1)), sc64(3), T(F32, (2))), TY, "onehot: indices must be numeric, got bool [1]");
    FAILS(ISA_ONEHOT, -1, (T(I32, (1)), T(F32, (2)), T(F32, (2))), TY, "onehot: depth must be a numeric scalar, got f32 [2]");
    FAILS(ISA_ONEHOT, -1, (T(I32, (1)), sc(F64, NAN), T(F32, (2))), AR, "onehot: depth nan is not a valid integer");
}
END_TEST

/* Bilinear RESIZE over the last two axes (its own loop) gives what the
 * general n-linear walk gives over the same axes placed first ([H, W, C]
 * with C kept): element for element, bit for bit, inf and NaN among the
 * inputs, in every coordinate mode, f32 and f64; x's rows W wide scaled by
 * sx, on f32's best rows (AVX-512's where the CPU has it), AVX2's at most
 * (path 1) or the portable ones (path 2). */
static void resize_last_two_case(int dt, uint32_t mode, uint32_t seed, int64_t W, float sx, int path)
{
    static const char *const paths[] = {"", " (AVX2 at most)", " (portable)"};
    const int64_t C = 3, H = 5;
    dev_resize_force(path);
    const int64_t fd[3] = {H, W, C}, ld[3] = {C, H, W};
    dev_value first = tf(dt ? F64 : F32, 3, fd, NULL, 0), last = tf(dt ? F64 : F32, 3, ld, NULL, 0);
    for (int64_t c = 0; c < C; c++)
        for (int64_t y = 0; y < H; y++)
            for (int64_t x = 0; x < W; x++) {
                seed = seed * 1103515245u + 12345u;
                double v = ((double)(seed >> 8 & 0xFFFF) - 32768.0) / 331.0;
                if (seed % 23 == 0)
                    v = INFINITY;
                if (seed % 29 == 0)
                    v = NAN;
                const int64_t f = (y * W + x) * C + c, l = (c * H + y) * W + x;
                if (dt) {
                    ((double *)first.u.t->data)[f] = ((double *)last.u.t->data)[l] = v;
                } else {
                    ((float *)first.u.t->data)[f] = ((float *)last.u.t->data)[l] = (float)v;
                }
            }
    dev_value a, b;
    ck_assert_int_eq(C(ISA_RESIZE, mode, &a, first, T(F32, (3), 2.5f, sx, 1), IV0), TFVM_OK);
    ck_assert_int_eq(C(ISA_RESIZE, mode, &b, last, T(F32, (3), 1, 2.5f, sx), IV0), TFVM_OK);
    const int64_t OH = a.u.t->dims[0], OW = a.u.t->dims[1];
    ck_assert(b.u.t->dims[1] == OH && b.u.t->dims[2] == OW);
    const size_t es = dt ? 8 : 4;
    for (int64_t c = 0; c < C; c++)
        for (int64_t y = 0; y < OH; y++)
            for (int64_t x = 0; x < OW; x++) {
                const char *pa = (const char *)a.u.t->data + (size_t)((y * OW + x) * C + c) * es;
                const char *pb = (const char *)b.u.t->data + (size_t)((c * OH + y) * OW + x) * es;
                ck_assert_msg(memcmp(pa, pb, es) == 0, "width %lld%s dtype %d mode %u: (%lld, %lld, %lld) differs",
                              (long long)W, paths[path], dt, (unsigned)mode, (long long)c,
                              (long long)y, (long long)x);
            }
    dev_value_release(&a);
    dev_value_release(&b);
    dev_resize_force(0);
}

START_TEST(test_resize_bilinear_last_two)
{
    const uint32_t modes[] = {ISA_OPT_LINEAR, ISA_OPT_LINEAR | ISA_OPT_ALIGN_CORNERS, ISA_OPT_LINEAR | ISA_OPT_ASYMMETRIC,
                              ISA_OPT_LINEAR | ISA_OPT_PYTORCH_HALF_PIXEL};
    /* 4 wide scaled by 0.75; 13 wide by 2.5 (blocks of 8 output columns and
     * a last one of 0 < n < 8; AVX2's vectors of 4, the last of 1 < n < 4)
     * and 37 wide by 0.3 (AVX-512 blocks whose columns spread past 16 take
     * the scalar row; AVX2 gathers them) */
    static const struct {
        int64_t W;
        float sx;
    } widths[] = {{4, 0.75f}, {13, 2.5f}, {37, 0.3f}};
    for (int path = 0; path <= 2; path++)
        for (size_t wi = 0; wi < UT_COUNTOF(widths); wi++)
            for (int dt = 0; dt < 2; dt++)
                for (size_t mo = 0; mo < 4; mo++)
                    resize_last_two_case(dt, modes[mo], 3 + (uint32_t)mo, widths[wi].W, widths[wi].sx, path);
}
END_TEST

/* SOFTMAX over the last axis of f32 writes its rows over x when the call
 * holds x alone, and leaves a shared x as it was */
START_TEST(test_softmax_in_place)
{
    dev_value x = T(F32, (2, 2), 0, 0, 1, 1), out;
    tfvm_tensor *t = x.u.t;
    ck_assert_int_eq(C(ISA_SOFTMAX, (uint32_t)-1, &out, x), TFVM_OK);
    ck_assert_ptr_eq(out.u.t, t);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(((float *)out.u.t->data)[i], 0.5f);
    dev_value_release(&out);
    dev_value y = T(F32, (1, 2), 0, 0);
    dev_value_retain(&y);
    ck_assert_int_eq(C(ISA_SOFTMAX, (uint32_t)-1, &out, y), TFVM_OK);
    ck_assert_ptr_ne(out.u.t, y.u.t);
    ck_assert(((float *)y.u.t->data)[0] == 0 && ((float *)y.u.t->data)[1] == 0);
    ck_assert(((float *)out.u.t->data)[0] == 0.5f && ((float *)out.u.t->data)[1] == 0.5f);
    dev_value_release(&out);
    dev_value_release(&y);
}
END_TEST

/* SCATTER_ROWS: rows replaced in order (the later of two updates of a row
 * stays), x itself untouched; an update's inf or NaN only in its own row. */
START_TEST(test_scatter_rows)
{
    OK(ISA_SCATTER_ROWS, 0, (T(F32, (3, 2), 1, 2, 3, 4, 5, 6), T(I64, (2), 2, 0), T(F32, (2, 2), 7, 8, 9, 10)), F32,
       (3, 2), 9, 10, 3, 4, 7, 8);
    OK(ISA_SCATTER_ROWS, 0, (T(I32, (3), 1, 2, 3), T(I64, (3), 1, 1, 0), T(I32, (3), 5, 6, 7)), I32, (3), 7, 6, 3);
    OK(ISA_SCATTER_ROWS, 0, (T(F64, (2, 1), 1, 2), T(I64, (1), 1), T(F64, (1, 1), INFINITY)), F64, (2, 1), 1, INFINITY);
    OK(ISA_SCATTER_ROWS, 0, (T(F32, (2, 2), 1, 2, 3, 4), IV0, T(F32, (0, 2))), F32, (2, 2), 1, 2, 3, 4);
    OK(ISA_SCATTER_ROWS, 0, (T(B, (2), 0, 0), T(I64, (1), 0), T(B, (1), 1)), B, (2), 1, 0);
    FAILS(ISA_SCATTER_ROWS, 0, (T(F32, (2, 2)), T(I64, (1), 2), T(F32, (1, 2))), AR,
          "scatter_rows: index 2 out of range for 2 rows");
    FAILS(ISA_SCATTER_ROWS, 0, (T(F32, (2, 2)), T(I64, (1), -1), T(F32, (1, 2))), AR,
          "scatter_rows: index -1 out of range for 2 rows");
    FAILS(ISA_SCATTER_ROWS, 0, (T(F32, (2, 2)), T(I32, (1), 0), T(F32, (1, 2))), TY,
          "scatter_rows: indices must be an i64 vector, got i32 [1]");
    FAILS(ISA_SCATTER_ROWS, 0, (T(F32, (2, 2)), sc64(0), T(F32, (1, 2))), TY,
          "scatter_rows: indices must be an i64 vector, got i64 []");
    FAILS(ISA_SCATTER_ROWS, 0, (T(F32, (2, 2)), T(I64, (1), 0), T(F64, (1, 2))), TY,
          "scatter_rows: dtype mismatch: x f32 [2, 2] and v f64 [1, 2]");
    FAILS(ISA_SCATTER_ROWS, 0, (T(F32, (2, 2)), T(I64, (1), 0), T(F32, (1, 3))), SH,
          "scatter_rows: v [1, 3] must be 1 rows like those of x [2, 2]");
    FAILS(ISA_SCATTER_ROWS, 0, (T(F32, (2, 2)), T(I64, (2), 0, 1), T(F32, (1, 2))), SH,
          "scatter_rows: v [1, 2] must be 2 rows like those of x [2, 2]");
    FAILS(ISA_SCATTER_ROWS, 0, (sc(F32, 1), T(I64, (1), 0), T(F32, (1))), SH,
          "scatter_rows: x must have rows (rank >= 1), got []");
    /* x stays as it was */
    dev_value x = T(I32, (2), 1, 2), out;
    dev_value_retain(&x);
    ck_assert_int_eq(C(ISA_SCATTER_ROWS, 0, &out, x, T(I64, (1), 0), T(I32, (1), 9)), TFVM_OK);
    ck_assert_int_eq(((int32_t *)x.u.t->data)[0], 1);
    ck_assert_int_eq(((int32_t *)out.u.t->data)[0], 9);
    dev_value_release(&out);
    dev_value_release(&x);
}
END_TEST

/* STACK_PUT: new stacks, growth, overwrites; in place only when unshared. */
START_TEST(test_stack_put)
{
    OK(ISA_STACK_PUT, 0, (IV0, sc64(0), T(F32, (2), 1, 2)), F32, (1, 2), 1, 2);
    OK(ISA_STACK_PUT, 0, (T(B, (0)), sc(I32, 2), T(I32, (2), 5, 6)), I32, (3, 2), 0, 0, 0, 0, 5, 6);
    OK(ISA_STACK_PUT, 0, (T(F64, (2, 1), 1, 2), sc64(0), T(F64, (1), 9)), F64, (2, 1), 9, 2);
    OK(ISA_STACK_PUT, 0, (T(I64, (1), 4), sc64(1), sc64(5)), I64, (2), 4, 5);
    OK(ISA_STACK_PUT, 0, (IV0, sc64(1), sc(B, 1)), B, (2), 0, 1);
    FAILS(ISA_STACK_PUT, 0, (T(F32, (2, 3)), sc64(0), T(F32, (2))), SH, "stack_put: rows of [2, 3] cannot hold [2]");
    FAILS(ISA_STACK_PUT, 0, (T(F32, (1, 2)), sc64(0), T(F64, (2))), TY, "stack_put: dtype mismatch: f32 [1, 2] and f64 [2]");
    FAILS(ISA_STACK_PUT, 0, (IV0, sc64(-1), T(F64, (2))), AR, "stack_put: index -1 out of range 0..2^40-1");
    FAILS(ISA_STACK_PUT, 0, (IV0, sc(F32, 0), T(F64, (2))), TY, "stack_put: index must be an integer scalar, got f32 []");
    FAILS(ISA_STACK_PUT, 0, (sc(F32, 0), sc64(0), T(F64, (2))), SH, "stack_put: rows of [] cannot hold [2]");
    FAILS(ISA_STACK_PUT, 0, (IV0, sc64(0), T(F64, (1, 1, 1, 1, 1, 1, 1, 1))), SH,
          "stack_put: row [1, 1, 1, 1, 1, 1, 1, 1] has rank 8: a stack of it would exceed rank 8");

    /* A shared acc is copied and stays as it was. */
    dev_value acc = T(I32, (2), 1, 2), out;
    dev_value_retain(&acc);
    ck_assert_int_eq(C(ISA_STACK_PUT, 0, &out, acc, sc64(0), sc(I32, 7)), TFVM_OK);
    ck_assert_ptr_ne(out.u.t, acc.u.t);
    ck_assert_int_eq(((int32_t *)acc.u.t->data)[0], 1);
    ck_assert_int_eq(((int32_t *)out.u.t->data)[0], 7);
    dev_value_release(&out);
    dev_value_release(&acc);
    /* A caller's buffer (tfvm_tensor_wrap) held by nobody else is still copied:
     * tensors passed to a run are immutable, and the VM cannot know its room. */
    int32_t buf[4] = {1, 2, 3, 4};
    int64_t two = 2;
    acc = (dev_value){.dtype = TFVM_I32, .is_tensor = 1,
                      .u.t = tfvm_tensor_wrap(TFVM_I32, 1, &two, buf, NULL, NULL, NULL)};
    ck_assert_ptr_nonnull(acc.u.t);
    ck_assert_int_eq(C(ISA_STACK_PUT, 0, &out, acc, sc64(2), sc(I32, 7)), TFVM_OK);
    ck_assert_ptr_ne(out.u.t, acc.u.t);
    ck_assert(buf[0] == 1 && buf[1] == 2 && buf[2] == 3 && buf[3] == 4);
    ck_assert_int_eq(out.u.t->dims[0], 3);
    ck_assert(((int32_t *)out.u.t->data)[0] == 1 && ((int32_t *)out.u.t->data)[1] == 2 &&
              ((int32_t *)out.u.t->data)[2] == 7);
    dev_value_release(&out);
    /* The loop a scan makes: acc passed on, held by no one else. 1000 puts
     * make O(log n) tensors (capacity doubles), most of them in place. */
    acc = IV0;
    const long before = ta.allocs;
    for (int i = 0; i < 1000; i++) {
        dev_value row = T(I64, (2), i, -i);
        const long a0 = ta.allocs;
        const tfvm_tensor *prev = acc.is_tensor ? acc.u.t : NULL;
        ck_assert_int_eq(C(ISA_STACK_PUT, 0, &out, acc, sc64(i), row), TFVM_OK);
        if (ta.allocs == a0 && i > 0)
            ck_assert_ptr_eq(out.u.t, prev); /* no allocation: it was written in place */
        acc = out;
    }
    ck_assert_msg(ta.allocs - before < 1000 + 20, "%ld allocations for 1000 puts", ta.allocs - before);
    /* the rows are right after all the growing */
    ck_assert_int_eq(acc.u.t->dims[0], 1000);
    ck_assert_int_eq(acc.u.t->count, 2000);
    for (int i = 0; i < 1000; i++)
        ck_assert(((int64_t *)acc.u.t->data)[2 * i] == i && ((int64_t *)acc.u.t->data)[2 * i + 1] == -i);
    dev_value_release(&acc);
}
END_TEST

/* Growth in place, counted: only the stacks themselves (not the rows). */
START_TEST(test_stack_put_growth)
{
    dev_value acc = IV0, out;
    dev_value row = T(F32, (3), 1, 2, 3); /* one row, shared by every put */
    long made = 0;
    for (int i = 0; i < 1000; i++) {
        const long a0 = ta.allocs;
        dev_value_retain(&row);
        ck_assert_int_eq(C(ISA_STACK_PUT, 0, &out, acc, sc64(i), row), TFVM_OK);
        made += ta.allocs - a0;
        acc = out;
    }
    /* 1, 2, 4, ..., 1024 rows: 11 tensors (fewer when an allocation's
       alignment slack holds rows more: 8 with today's tensor header) */
    ck_assert_int_le(made, 11);
    ck_assert_int_ge(made, 8);
    ck_assert_int_eq(acc.u.t->dims[0], 1000);
    ck_assert(((float *)acc.u.t->data)[2997] == 1 && ((float *)acc.u.t->data)[2999] == 3);
    /* an overwrite of a held stack copies only the used rows */
    dev_value_retain(&acc);
    ck_assert_int_eq(C(ISA_STACK_PUT, 0, &out, acc, sc64(5), T(F32, (3), 7, 8, 9)), TFVM_OK);
    ck_assert_int_eq(out.u.t->dims[0], 1000);
    ck_assert(((float *)out.u.t->data)[15] == 7 && ((float *)acc.u.t->data)[15] == 1);
    dev_value_release(&out);
    dev_value_release(&acc);
    dev_value_release(&row);
}
END_TEST

/* ---- Resampling, normalization, pooling ----------------------------------------------- */
START_TEST(test_resize)
{
    const int NEAR_FLOOR = ISA_OPT_NEAREST_FLOOR;
#define X22 T(F32, (1, 1, 2, 2), 1, 2, 3, 4)
    /* half_pixel, round_prefer_floor: rows from -0.25, 0.25, 0.75, 1.25 */
    OK(ISA_RESIZE, 0, (X22, T(F32, (4), 1, 1, 2, 2), IV0), F32, (1, 1, 4, 4), 1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4);
    /* ONNX's test_resize_upsample_scales_linear */
    OK(ISA_RESIZE, ISA_OPT_LINEAR, (X22, T(F32, (4), 1, 1, 2, 2), IV0), F32, (1, 1, 4, 4), 1, 1.25, 1.75, 2, 1.5, 1.75,
       2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4);
    OK(ISA_RESIZE, ISA_OPT_ASYMMETRIC, (T(I32, (1, 1, 1, 4), 1, 2, 3, 4), FV0, IV(1, 1, 1, 2)), I32, (1, 1, 1, 2), 1, 3);
    OK(ISA_RESIZE, ISA_OPT_LINEAR | ISA_OPT_ALIGN_CORNERS, (T(F64, (1, 3), 0, 10, 20), FV0, IV(1, 5)), F64, (1, 5), 0, 5, 10,
       15, 20);
    /* align_corners uses the length before flooring: 4 * 0.6 = 2.4 maps output 1 to 3 / 1.4 (ONNX's
       test_resize_downsample_scales_linear_align_corners) */
    OK(ISA_RESIZE, ISA_OPT_LINEAR | ISA_OPT_ALIGN_CORNERS, (T(F32, (1, 1, 2, 4), 1, 2, 3, 4, 5, 6, 7, 8),
                                                            T(F32, (4), 1, 1, 0.6f, 0.6f), IV0),
       F32, (1, 1, 1, 2), 1, 3.142857143);
    /* nearest modes at 3 -> 2 (asymmetric: x / 0.5 ... ) and tf_half_pixel_for_nn */
    OK(ISA_RESIZE, ISA_OPT_ASYMMETRIC | NEAR_FLOOR, (T(I64, (5), 0, 1, 2, 3, 4), T(F32, (1), 0.8f), IV0), I64, (4), 0, 1, 2, 3);
    OK(ISA_RESIZE, ISA_OPT_ASYMMETRIC | ISA_OPT_NEAREST_CEIL, (T(I64, (5), 0, 1, 2, 3, 4), T(F32, (1), 0.8f), IV0), I64, (4), 0, 2,
       3, 4);
    /* (i + 0.5) / 2 = 0.25, 0.75, ... 2.75 rounds to 0, 1, 1, 2, 2, 3 (clamped to 2) */
    OK(ISA_RESIZE, ISA_OPT_TF_HALF_PIXEL_NN, (T(B, (3), 1, 0, 1), FV0, IV(6)), B, (6), 1, 0, 0, 1, 1, 1);
    /* a half at 0.5 rounds down by default, up with prefer_ceil: 1 -> 2, asymmetric: 0, 0.5 */
    OK(ISA_RESIZE, ISA_OPT_ASYMMETRIC, (T(F32, (2), 1, 2), T(F32, (1), 4), IV0), F32, (8), 1, 1, 1, 2, 2, 2, 2, 2);
    OK(ISA_RESIZE, ISA_OPT_ASYMMETRIC | ISA_OPT_PREFER_CEIL, (T(F32, (2), 1, 2), T(F32, (1), 4), IV0), F32, (8), 1, 1, 2, 2, 2,
       2, 2, 2);
    OK(ISA_RESIZE, ISA_OPT_LINEAR | ISA_OPT_PYTORCH_HALF_PIXEL, (T(F32, (3), 1, 2, 4), FV0, IV(1)), F32, (1), 1);
    OK(ISA_RESIZE, 0, (T(F32, (2, 0)), FV0, IV(3, 0)), F32, (3, 0), 0);
    OK0(ISA_RESIZE, 0, (sc(F32, 2), FV0, IV0), F32, 2);
    FAILS(ISA_RESIZE, ISA_OPT_LINEAR, (T(I32, (2)), T(F32, (1), 2), IV0), TY, "resize: linear mode is not defined on i32 (floats only)");
    FAILS(ISA_RESIZE, 0, (X22, T(F32, (4), 1, 1, 2, 2), IV(1, 1, 4, 4)), SH,
          "resize: exactly one of scales (4 entries) and sizes (4 entries) must be given, one entry per axis of [1, 1, 2, 2]");
    FAILS(ISA_RESIZE, 0, (X22, T(F32, (2), 2, 2), IV0), SH,
          "resize: exactly one of scales (2 entries) and sizes (0 entries) must be given, one entry per axis of [1, 1, 2, 2]");
    FAILS(ISA_RESIZE, 0, (X22, T(F32, (4), 1, 1, 0, 2), IV0), AR, "resize: scale 0 for axis 2 must be finite and > 0");
    FAILS(ISA_RESIZE, 0, (X22, T(F64, (4), 1, 1, 2, 2), IV0), TY, "resize: scales must be an f32 vector, got f64 [4]");
    FAILS(ISA_RESIZE, ISA_OPT_NEAREST_FLOOR | ISA_OPT_NEAREST_CEIL, (X22, T(F32, (4), 1, 1, 2, 2), IV0), AR,
          "resize: bad options 96: one coordinate mode and one rounding mode at most");
    FAILS(ISA_RESIZE, 0, (X22, FV0, IV(1, 1, -1, 2)), AR, "resize: bad sizes [1, 1, -1, 2]: each must be in 0..2^40");
    FAILS(ISA_RESIZE, 0, (T(F32, (0)), FV0, IV(2)), SH, "resize: cannot resize empty axis 0 of [0] to [2]");
#undef X22
}
END_TEST

START_TEST(test_lrn)
{
    /* alpha / size = 1, beta 1, bias 1: y = x / (1 + sum of squares) */
    OK(ISA_LRN, 0, (T(F32, (1, 3, 1, 1), 1, 2, 3), T(F32, (4), 3, 3, 1, 1)), F32, (1, 3, 1, 1), 1.0 / 6, 2.0 / 15, 3.0 / 14);
    /* size 2: channels c .. c + 1 */
    OK(ISA_LRN, 0, (T(F64, (1, 3), 1, 2, 3), T(F32, (4), 2, 2, 1, 1)), F64, (1, 3), 1.0 / 6, 2.0 / 14, 3.0 / 10);
    /* beta 0.5, bias 2, two images of two pixels */
    OK(ISA_LRN, 0, (T(F32, (2, 1, 2), 1, 2, 3, 4), T(F32, (4), 1, 2, 0.5f, 2)), F32, (2, 1, 2), 1 / sqrt(4), 2 / sqrt(10),
       3 / sqrt(20), 4 / sqrt(34));
    FAILS(ISA_LRN, 0, (T(F32, (1, 3)), T(F32, (4), 0, 1, 1, 1)), AR, "lrn: size 0 must be a whole number in 1..65536");
    FAILS(ISA_LRN, 0, (T(F32, (1, 3)), T(F32, (4), 1.5f, 1, 1, 1)), AR, "lrn: size 1.5 must be a whole number in 1..65536");
    FAILS(ISA_LRN, 0, (T(F32, (1, 3)), T(F32, (3))), TY,
          "lrn: parameters must be an f32 vector [size, alpha, beta, bias], got f32 [3]");
    FAILS(ISA_LRN, 0, (T(I32, (1, 3)), T(F32, (4))), TY, "lrn: not defined on i32 (floats only)");
    FAILS(ISA_LRN, 0, (T(F32, (3)), T(F32, (4), 1, 1, 1, 1)), SH, "lrn: x must be [N, C, ...] (rank >= 2), got [3]");
}
END_TEST

/* LAYER_NORM: rows over the dims from the axis on, one-element scale and
 * bias, and every error */
START_TEST(test_layer_norm)
{
    const double r2 = sqrt(2), s12 = sqrt(12.75);
    /* rows [1 2 3 4] (mean 2.5, variance 1.25) and [0 0 0 8] (2, 12); eps 0.75 */
    OK(ISA_LAYER_NORM, -1,
       (T(F32, (2, 4), 1, 2, 3, 4, 0, 0, 0, 8), T(F32, (4), 1, 2, 1, 1), T(F32, (4), 0, 0, 0, 1), sc(F32, 0.75)), F32,
       (2, 4), -1.5 / r2, -1 / r2, 0.5 / r2, 1.5 / r2 + 1, -2 / s12, -4 / s12, -2 / s12, 6 / s12 + 1);
    /* axis 0 of [2, 2]: one row of 4; one-element scale and bias; eps 0 */
    OK(ISA_LAYER_NORM, 0, (T(F64, (2, 2), 1, 2, 3, 4), sc(F64, 2), T(F64, (1), -1), sc(F64, 0)), F64, (2, 2),
       -3 / sqrt(1.25) - 1, -1 / sqrt(1.25) - 1, 1 / sqrt(1.25) - 1, 3 / sqrt(1.25) - 1);
    /* scale [1, 2] against the last axis (a leading 1), rows of one element */
    OK(ISA_LAYER_NORM, 1, (T(F32, (2, 2), 1, 5, 2, 2), T(F32, (1, 2), 1, 1), T(F32, (2), 3, 4), sc(F32, 1)), F32, (2, 2),
       -2 / sqrt(5) + 3, 2 / sqrt(5) + 4, 3, 4);
    OK(ISA_LAYER_NORM, -1, (T(F32, (2, 1), 7, -7), sc(F32, 1), sc(F32, 0.5f), sc(F32, 1)), F32, (2, 1), 0.5, 0.5);
    OK(ISA_LAYER_NORM, -1, (T(F32, (0, 3)), T(F32, (3)), T(F32, (3)), sc(F32, 1)), F32, (0, 3));
    FAILS(ISA_LAYER_NORM, -1, (T(I32, (2)), T(I32, (2)), T(I32, (2)), sc(I32, 1)), TY,
          "layer_norm: not defined on i32 (floats only)");
    FAILS(ISA_LAYER_NORM, -1, (T(F32, (2)), T(F64, (2)), T(F32, (2)), sc(F32, 1)), TY,
          "layer_norm: dtype mismatch: f32 [2] and f64 [2]");
    FAILS(ISA_LAYER_NORM, -1, (T(F32, (2, 4)), T(F32, (3)), T(F32, (4)), sc(F32, 1)), SH,
          "layer_norm: scale [3] must be one element or x's dims from axis 1 on (x [2, 4])");
    FAILS(ISA_LAYER_NORM, 1, (T(F32, (2, 4)), T(F32, (4)), T(F32, (2, 4)), sc(F32, 1)), SH,
          "layer_norm: bias [2, 4] must be one element or x's dims from axis 1 on (x [2, 4])");
    FAILS(ISA_LAYER_NORM, 0, (T(F32, (2, 4)), T(F32, (4)), T(F32, (2, 4)), sc(F32, 1)), SH,
          "layer_norm: scale [4] must be one element or x's dims from axis 0 on (x [2, 4])");
    FAILS(ISA_LAYER_NORM, -1, (T(F32, (2)), T(F32, (2)), T(F32, (2)), T(F32, (2))), SH,
          "layer_norm: eps must be one element, got [2]");
    FAILS(ISA_LAYER_NORM, 2, (T(F32, (2, 2)), T(F32, (2)), T(F32, (2)), sc(F32, 1)), SH,
          "layer_norm: axis 2 out of range for shape [2, 2]");
    /* RMS_NORM: rows [3 4] (mean square 12.5) and [-1 0] (0.5); eps 0.5 */
    OK(ISA_RMS_NORM, -1, (T(F32, (2, 2), 3, 4, -1, 0), T(F32, (2), 1, -2), sc(F32, 0.5)), F32, (2, 2), 3 / sqrt(13),
       -8 / sqrt(13), -1.0, -0.0);
    OK(ISA_RMS_NORM, 0, (T(F64, (2, 2), 1, 1, 1, 1), sc(F64, 3), sc(F64, 0)), F64, (2, 2), 3, 3, 3, 3);
    FAILS(ISA_RMS_NORM, -1, (T(F32, (2, 4)), T(F32, (3)), sc(F32, 1)), SH,
          "rms_norm: scale [3] must be one element or x's dims from axis 1 on (x [2, 4])");
    FAILS(ISA_RMS_NORM, -1, (T(F32, (2)), T(F32, (2)), T(F32, (2))), SH, "rms_norm: eps must be one element, got [2]");
    FAILS(ISA_RMS_NORM, -1, (T(F32, (2)), T(F32, (2)), sc(F64, 1)), TY, "rms_norm: dtype mismatch: f32 [2] and f64 []");
}
END_TEST

/* LAYER_NORM against the instructions it replaces (REDUCE_MEAN, SUB, MUL,
 * REDUCE_MEAN, ADD, SQRT, DIV, MUL, MUL, ADD), and RMS_NORM against POW,
 * REDUCE_MEAN, ADD, SQRT, DIV, MUL, MUL, bit for bit: rows of 77 (the
 * sums' eight lanes and a tail) and 768, f32 and f64, values around 1000
 * (where a sum in another order rounds differently) */
static dev_value ew(isa_op op, dev_value a, dev_value b)
{
    dev_value in[2] = {a, b}, out;
    ck_assert_msg(dev_cpu_elementwise(op, 0, in, &out, &alloc, msg, sizeof msg) == TFVM_OK, "%s", msg);
    dev_value_release(&a);
    dev_value_release(&b);
    return out;
}

static dev_value rms_by_parts(dev_value x, dev_value s, dev_value eps)
{
    dev_value v;
    dev_value_retain(&x);
    ck_assert_int_eq(C(ISA_REDUCE_MEAN, ISA_OPT_KEEPDIMS, &v, ew(ISA_POW, x, sc(x.dtype, 2)), IV(1)), TFVM_OK);
    dev_value inv = ew(ISA_DIV, sc(x.dtype, 1), ew(ISA_SQRT, ew(ISA_ADD, v, eps), NONE));
    return ew(ISA_MUL, s, ew(ISA_MUL, x, inv));
}

static dev_value ln_by_parts(dev_value x, dev_value s, dev_value b, dev_value eps)
{
    dev_value m, v;
    dev_value_retain(&x);
    ck_assert_int_eq(C(ISA_REDUCE_MEAN, ISA_OPT_KEEPDIMS, &m, x, IV(1)), TFVM_OK);
    dev_value c = ew(ISA_SUB, x, m);
    dev_value_retain(&c);
    dev_value_retain(&c);
    ck_assert_int_eq(C(ISA_REDUCE_MEAN, ISA_OPT_KEEPDIMS, &v, ew(ISA_MUL, c, c), IV(1)), TFVM_OK);
    dev_value inv = ew(ISA_DIV, sc(x.dtype, 1), ew(ISA_SQRT, ew(ISA_ADD, v, eps), NONE));
    return ew(ISA_ADD, ew(ISA_MUL, ew(ISA_MUL, c, inv), s), b);
}

START_TEST(test_layer_norm_bits)
{
    static const int64_t lens[2] = {77, 768};
    for (int dt = 0; dt < 2; dt++)
        for (int li = 0; li < 2; li++) {
            const uint8_t d = dt ? F64 : F32;
            const int64_t n = lens[li], dims[2] = {3, n};
            dev_value x = tf(d, 2, dims, NULL, 0), s = tf(d, 1, &n, NULL, 0), b = tf(d, 1, &n, NULL, 0);
            uint32_t r = 12345;
            for (int64_t i = 0; i < 3 * n; i++) {
                r = r * 1103515245u + 12345u;
                put(d, x.u.t->data, i, 1000 + (double)(r >> 8) / (1 << 24) * (i % 7 == 0 ? 50 : 1));
                if (i < n) {
                    put(d, s.u.t->data, i, 0.5 + (double)(r >> 20) / 4096);
                    put(d, b.u.t->data, i, (double)(r >> 16) / 65536 - 0.5);
                }
            }
            for (int k = 0; k < 3; k++) { /* each call takes a reference: x and s are passed four times */
                dev_value_retain(&x);
                dev_value_retain(&s);
            }
            dev_value_retain(&b);
            dev_value want = ln_by_parts(x, s, b, sc(d, 1e-5)), got;
            ck_assert_int_eq(C(ISA_LAYER_NORM, -1, &got, x, s, b, sc(d, 1e-5)), TFVM_OK);
            ck_assert_int_eq(got.u.t->nbytes, want.u.t->nbytes);
            ck_assert_msg(memcmp(got.u.t->data, want.u.t->data, got.u.t->nbytes) == 0, "%s rows of %lld differ",
                          d == F32 ? "f32" : "f64", (long long)n);
            dev_value_release(&got);
            dev_value_release(&want);
            want = rms_by_parts(x, s, sc(d, 1e-5));
            ck_assert_int_eq(C(ISA_RMS_NORM, -1, &got, x, s, sc(d, 1e-5)), TFVM_OK);
            ck_assert_msg(memcmp(got.u.t->data, want.u.t->data, got.u.t->nbytes) == 0, "rms: %s rows of %lld differ",
                          d == F32 ? "f32" : "f64", (long long)n);
            dev_value_release(&got);
            dev_value_release(&want);
        }
}
END_TEST

START_TEST(test_pool12)
{
#define X44 T(F32, (1, 1, 4, 4), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
    /* ONNX's test_maxpool_2d_ceil and test_averagepool_2d_ceil: 3x3 windows at stride 2 */
    OK(ISA_MAXPOOL, 0, (X44, IV(3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0)), F32, (1, 1, 2, 2), 11, 12, 15, 16);
    OK(ISA_AVGPOOL, 0, (X44, IV(3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0)), F32, (1, 1, 2, 2), 6, 7.5, 12, 13.5);
    /* without ceil mode: one window */
    OK(ISA_MAXPOOL, 0, (X44, IV(3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0)), F32, (1, 1, 1, 1), 11);
    /* ONNX's test_maxpool_2d_dilations: 2x2 window dilated by 2 */
    OK(ISA_MAXPOOL, 0, (X44, IV(2, 2, 1, 1, 0, 0, 0, 0, 2, 2, 0, 0)), F32, (1, 1, 2, 2), 11, 12, 15, 16);
    OK(ISA_MAXPOOL, 0, (T(I64, (1, 1, 1, 5), 5, -1, 2, 9, 0), IV(1, 2, 1, 1, 0, 0, 0, 0, 1, 3, 0, 0)), I64, (1, 1, 1, 2), 9, 0);
    /* count_include_pad: every window of 2x2 over 2x2 padded by 1 divides by 4 */
    OK(ISA_AVGPOOL, 0, (T(F64, (1, 1, 2, 2), 1, 2, 3, 4), IV(2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1)), F64, (1, 1, 3, 3), 0.25,
       0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1);
    /* ceil mode's last window reaches past the padding: it counts what lies
       in x (cip 0) or in the padded input (cip 1); 5 -> 3 windows of 2 */
    OK(ISA_AVGPOOL, 0, (T(F32, (1, 1, 1, 5), 1, 2, 3, 4, 5), IV(1, 2, 1, 2, 0, 0, 0, 0, 1, 1, 1, 0)), F32, (1, 1, 1, 3), 1.5,
       3.5, 5);
    OK(ISA_AVGPOOL, 0, (T(F32, (1, 1, 1, 5), 1, 2, 3, 4, 5), IV(1, 2, 1, 2, 0, 0, 0, 0, 1, 1, 1, 1)), F32, (1, 1, 1, 3), 1.5,
       3.5, 5);
    OK(ISA_AVGPOOL, 0, (T(F32, (1, 1, 1, 5), 1, 2, 3, 4, 5), IV(1, 2, 1, 2, 0, 0, 0, 1, 1, 1, 1, 1)), F32, (1, 1, 1, 3), 1.5,
       3.5, 2.5);
    /* ceil mode drops a window that would start in the end padding: 4 + 1 pad, window 2 at stride 2 */
    OK(ISA_MAXPOOL, 0, (T(F32, (1, 1, 1, 4), 1, 2, 3, 4), IV(1, 2, 1, 2, 0, 0, 0, 1, 1, 1, 1, 0)), F32, (1, 1, 1, 2), 2, 4);
    OK(ISA_MAXPOOL, 0, (T(F32, (1, 1, 1, 3), 1, NAN, 3), IV(1, 2, 1, 1, 0, 0, 0, 0, 1, 2, 0, 0)), F32, (1, 1, 1, 1), 3);
    OK(ISA_MAXPOOL, 0, (T(F32, (1, 1, 1, 3), NAN, 1, 3), IV(1, 2, 1, 1, 0, 0, 0, 0, 1, 2, 0, 0)), F32, (1, 1, 1, 1), NAN);
    FAILS(ISA_MAXPOOL, 0, (X44, IV(2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 2, 0)), AR,
          "maxpool: bad parameters [2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 2, 0]: window, strides and dilations must be >= 1, pads >= 0 and smaller than the window, ceil_mode and count_include_pad 0 or 1");
    FAILS(ISA_AVGPOOL, 0, (X44, IV(2, 2, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0)), AR,
          "avgpool: bad parameters [2, 2, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0]: window, strides and dilations must be >= 1, pads >= 0 and smaller than the window, ceil_mode and count_include_pad 0 or 1");
    FAILS(ISA_MAXPOOL, 0, (X44, IV(2, 2, 1, 1, 0, 0, 0, 0, 4, 4, 0, 0)), SH, "maxpool: window [2, 2] does not fit x [1, 1, 4, 4] padded by [0, 0, 0, 0]");
    FAILS(ISA_MAXPOOL, 0, (X44, IV(2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 0)), SH,
          "maxpool: parameters must be [kh, kw, sh, sw, pt, pl, pb, pr] and optionally [dh, dw, ceil_mode, count_include_pad], got 11 entries");
#undef X44
}
END_TEST

/* ---- The 8-bit integer dtypes ----------------------------------------------------------------- */
START_TEST(test_small_ints)
{
    OK0(ISA_REDUCE_SUM, 0, (T(U8, (2), 200, 100), IV0), U8, 44); /* wraps */
    OK0(ISA_REDUCE_PROD, 0, (T(I8, (2), -16, 8), IV0), I8, -128);
    OK0(ISA_REDUCE_MIN, 0, (T(I8, (3), -5, 3, -7), IV0), I8, -7);
    OK0(ISA_REDUCE_MAX, 0, (T(U8, (3), 5, 255, 7), IV0), U8, 255);
    OK0(ISA_ARGMIN, 0, (T(I8, (3), 5, -128, 7)), I64, 1);
    OK0(ISA_ARGMAX, 0, (T(U8, (3), 5, 200, 200)), I64, 1);
    OK(ISA_CUMSUM, 0, (T(U8, (3), 255, 1, 2), sc64(0)), U8, (3), 255, 0, 2);
    OK(ISA_CUMSUM, 0, (T(I8, (2), 127, 1), sc(U8, 0)), I8, (2), 127, -128);
    OK(ISA_TOPK, 0, (T(I8, (3), -1, 5, 0), sc64(2), sc(B, 1)), I64, (2), 1, 2);
    OK(ISA_PADV, 0, (T(I8, (1), -3), IV(1, 1), sc(I8, 4)), I8, (3), 4, -3, 4);
    OK(ISA_STACK_PUT, 0, (IV0, sc(I8, 1), T(U8, (1), 9)), U8, (2, 1), 0, 9);
    OK(ISA_MAXPOOL, 0, (T(I8, (1, 1, 1, 3), -5, -2, -9), IV(1, 2, 1, 1, 0, 0, 0, 0)), I8, (1, 1, 1, 2), -2, -2);
    OK(ISA_MAXPOOL, 0, (T(U8, (1, 1, 1, 3), 5, 2, 9), IV(1, 2, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0)), U8, (1, 1, 1, 2), 5, 9);
    OK(ISA_ONEHOT, -1, (T(U8, (2), 1, 0), sc(I8, 2), T(I8, (2), 0, -1)), I8, (2, 2), 0, -1, -1, 0);
    OK(ISA_RESIZE, 0, (T(U8, (2), 3, 4), T(F32, (1), 2), IV0), U8, (4), 3, 3, 4, 4);
    OK(ISA_EXPAND, 0, (T(I8, (1), -1), IV(2)), I8, (2), -1, -1);
    OK(ISA_FILL, 0, (IV(2), sc(U8, 200)), U8, (2), 200, 200);
    OK(ISA_FILL, 0, (IV(1), sc(I8, -3)), I8, (1), -3);
    FAILS(ISA_MATMUL, 0, (T(U8, (1, 1)), T(U8, (1, 1))), TY, "matmul: not defined on u8");
    FAILS(ISA_AVGPOOL, 0, (T(U8, (1, 1, 2, 2)), IV(1, 1, 1, 1, 0, 0, 0, 0)), TY, "avgpool: not defined on u8 (floats only)");
}
END_TEST

/* ---- Allocation failures ---------------------------------------------------------------
 * Each call, with its n-th allocation failing for every n until it succeeds,
 * must end in TFVM_ERR_NOMEM with nothing leaked. */
/* Valid operands for op whose x (the operand ops.def's `types` speaks of)
 * has dtype dt. */
static void nm_inputs(isa_op op, uint8_t dt, dev_value in[DEV_KMAX_IN])
{
    for (int k = 0; k < DEV_KMAX_IN; k++)
        in[k] = NONE;
    switch (op) {
    case ISA_LOG_SOFTMAX:
    case ISA_ARGMIN:
    case ISA_FLATTEN: in[0] = T(dt, (2, 2), 1, 0, 1, 1); break;
    case ISA_REDUCE_MIN:
    case ISA_REDUCE_PROD: in[0] = T(dt, (2, 2), 1, 0, 1, 1); in[1] = IV(0); break;
    case ISA_CUMSUM: in[0] = T(dt, (2, 2), 1, 0, 1, 1); in[1] = IV(1); break;
    case ISA_SQUEEZE: in[0] = T(dt, (2, 1), 1, 0); in[1] = IV(1); break;
    case ISA_UNSQUEEZE: in[0] = T(dt, (2), 1, 0); in[1] = IV(0); break;
    case ISA_EXPAND: in[0] = T(dt, (2), 1, 0); in[1] = IV(2, 2); break;
    case ISA_TILE: in[0] = T(dt, (2), 1, 0); in[1] = IV(2); break;
    case ISA_STRIDED_SLICE: in[0] = T(dt, (4), 1, 0, 1, 1); in[1] = IV(3); in[2] = IV(0); in[3] = IV0; in[4] = IV(-1); break;
    case ISA_TRILU: in[0] = T(dt, (2, 2), 1, 0, 1, 1); in[1] = sc64(0); break;
    case ISA_PADV: in[0] = T(dt, (2), 1, 0); in[1] = IV(1, 1); in[2] = sc(dt, 0); break;
    case ISA_GATHER_ELEMENTS: in[0] = T(dt, (2), 1, 0); in[1] = T(I64, (2), 1, 0); break;
    case ISA_TOPK: in[0] = T(dt, (3), 1, 0, 1); in[1] = sc64(2); in[2] = sc(B, 1); break;
    case ISA_ONEHOT: in[0] = T(dt, (2), 0, 1); in[1] = sc64(2); in[2] = T(F32, (2), 0, 1); break;
    case ISA_RESIZE: in[0] = T(dt, (2, 2), 1, 0, 1, 1); in[1] = T(F32, (2), 2, 2); in[2] = IV0; break;
    case ISA_LRN: in[0] = T(dt, (1, 2), 1, 0); in[1] = T(F32, (4), 1, 1, 1, 1); break;
    case ISA_STACK_PUT: in[0] = T(dt, (1, 2), 1, 0); in[1] = sc64(40); in[2] = T(dt, (2), 1, 0); break;
    case ISA_SCATTER_ROWS: in[0] = T(dt, (2), 1, 0); in[1] = T(I64, (1), 1); in[2] = T(dt, (1), 1); break;
    case ISA_LAYER_NORM: in[0] = T(dt, (2), 1, 0); in[1] = sc(dt, 2); in[2] = sc(dt, 1); in[3] = sc(dt, 1); break;
    case ISA_RMS_NORM: in[0] = T(dt, (2), 1, 0); in[1] = sc(dt, 2); in[2] = sc(dt, 1); break;
    case ISA_MAXPOOL:
    case ISA_AVGPOOL: in[0] = T(dt, (1, 1, 2, 2), 1, 0, 1, 1); in[1] = IV(2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1); break;
    /* the tensor ops before issue 10 */
    case ISA_MATMUL: in[0] = T(dt, (2, 2), 1, 0, 1, 1); in[1] = T(dt, (2), 1, 1); break;
    case ISA_CONV2D: in[0] = T(dt, (1, 1, 2, 2), 1, 0, 1, 1); in[1] = T(dt, (1, 1, 1, 1), 1); in[2] = IV(1, 1, 0, 0, 0, 0, 1, 1, 1); break;
    case ISA_SOFTMAX:
    case ISA_ARGMAX:
    case ISA_SHAPE:
    case ISA_WORKERS: in[0] = T(dt, (2, 2), 1, 0, 1, 1); break;
    case ISA_REDUCE_SUM:
    case ISA_REDUCE_MEAN:
    case ISA_REDUCE_MAX: in[0] = T(dt, (2, 2), 1, 0, 1, 1); in[1] = IV(0); break;
    case ISA_RESHAPE: in[0] = T(dt, (2, 2), 1, 0, 1, 1); in[1] = IV(4); break;
    case ISA_TRANSPOSE: in[0] = T(dt, (2, 2), 1, 0, 1, 1); in[1] = IV(1, 0); break;
    case ISA_CONCAT: in[0] = T(dt, (2), 1, 0); in[1] = T(dt, (1), 1); break;
    case ISA_SLICE: in[0] = T(dt, (3), 1, 0, 1); in[1] = IV(1); in[2] = IV(3); break;
    case ISA_GATHER: in[0] = T(dt, (3), 1, 0, 1); in[1] = T(I32, (2), 2, 0); break;
    case ISA_PAD: in[0] = T(dt, (1), 1); in[1] = IV(1, 1); break;
    case ISA_FILL: in[0] = IV(3); in[1] = sc(dt, 1); break;
    case ISA_RANGE: in[0] = sc(dt, 0); in[1] = sc(dt, 3); in[2] = sc(dt, 1); break;
    /* the ONNX long tail (bits.c; test_kernels_bits.c tests them) */
    case ISA_BITCAST: in[0] = T(dt, (2), 1, 0); break;
    case ISA_NONZERO: in[0] = T(dt, (2), 1, 0); break;
    case ISA_UNIQUE:
    case ISA_UNIQUE_INDEX: in[0] = T(dt, (3), 1, 0, 1); in[1] = sc64(0); break;
    case ISA_DET: in[0] = T(dt, (2, 2), 1, 0, 1, 1); break;
    /* the ONNX image ops (resize.c, image.c; test_kernels_image.c tests them) */
    case ISA_RESIZE2: in[0] = T(dt, (2, 2), 1, 0, 1, 1); in[1] = T(F32, (2), 2, 2); in[2] = IV0; in[3] = T(F32, (2), -0.75, 0); break;
    case ISA_GRID_SAMPLE: in[0] = T(dt, (1, 1, 2, 2), 1, 0, 1, 1); in[1] = T(dt, (1, 1, 1, 2), 0, 0); break;
    case ISA_NMS: in[0] = T(dt, (1, 2, 4), 0, 0, 1, 1, 0, 0, 1, 1); in[1] = T(dt, (1, 1, 2), 0.9, 0.8); in[2] = IV(1); in[3] = T(F32, (1), 0.5); in[4] = FV0; break;
    case ISA_AFFINE_GRID: in[0] = T(dt, (1, 2, 3), 1, 0, 0, 0, 1, 0); in[1] = IV(1, 1, 2, 2); break;
    case ISA_COL2IM: in[0] = T(dt, (1, 2, 2), 1, 2, 3, 4); in[1] = IV(3); in[2] = IV(2); in[3] = IV(1, 0, 0, 1); break;
    case ISA_ROI_ALIGN: in[0] = T(dt, (1, 1, 2, 2), 1, 0, 1, 1); in[1] = T(dt, (1, 4), 0, 0, 1, 1); in[2] = T(I64, (1), 0); in[3] = T(F32, (4), 1, 1, 1, 1); break;
    case ISA_DEFORM_CONV: in[0] = T(dt, (1, 1, 2, 2), 1, 2, 3, 4); in[1] = T(dt, (1, 1, 1, 1), 1); in[2] = T(dt, (1, 2, 2, 2)); in[3] = T(dt, (0)); in[4] = IV(1, 1, 0, 0, 0, 0, 1, 1, 1, 1); break;
    /* issue 12's fused products (test_fused.c tests them) */
    case ISA_FUSED_MATMUL: in[0] = T(dt, (2, 2), 1, 0, 1, 1); in[1] = T(dt, (2, 2), 1, 1, 0, 1); in[2] = T(dt, (2), 1, -1); break;
    case ISA_FUSED_CONV2D: in[0] = T(dt, (1, 1, 2, 2), 1, 0, 1, 1); in[1] = T(dt, (1, 1, 2, 1), 1, 2); in[2] = IV(1, 1, 0, 0, 0, 0, 1, 1, 1); in[3] = T(dt, (1), 3); break;
    case ISA_FUSED_CONV2D_ADD: in[0] = T(dt, (1, 1, 2, 2), 1, 0, 1, 1); in[1] = T(dt, (1, 1, 2, 1), 1, 2); in[2] = IV(1, 1, 0, 0, 0, 0, 1, 1, 1); in[3] = T(dt, (1), 3); in[4] = T(dt, (1, 1, 1, 2), -4, 1); break;
    /* issue 24's recurrent cells (test_fused.c tests them) */
    case ISA_LSTM_CELL_C:
    case ISA_LSTM_CELL_H: in[0] = T(dt, (1, 4), 1, 0, 1, 1); in[1] = T(dt, (1, 4), 1, 1, 0, 1); in[2] = T(dt, (1, 1), 2); break;
    case ISA_GRU_CELL: in[0] = T(dt, (1, 3), 1, 0, 1); in[1] = T(dt, (1, 3), 1, 1, 0); in[2] = T(dt, (1, 1), 2); break;
    case ISA_LSTM_STEP: in[0] = T(dt, (1, 1, 4), 1, 0, 1, 1); in[1] = sc64(0); in[2] = T(dt, (2, 1, 1), 1, 2); in[3] = T(dt, (4, 1), 1, 0, 1, 1); in[4] = T(dt, (4), 0, 1, 0, 1); break;
    case ISA_GRU_STEP: in[0] = T(dt, (1, 1, 3), 1, 0, 1); in[1] = sc64(0); in[2] = T(dt, (1, 1), 2); in[3] = T(dt, (3, 1), 1, 0, 1); in[4] = T(dt, (3), 0, 1, 0); break;
    default: ck_abort_msg("no inputs for %s", isa_ops[op].name);
    }
}

static const isa_op nm_ops[] = {
    ISA_LOG_SOFTMAX, ISA_REDUCE_MIN, ISA_REDUCE_PROD, ISA_ARGMIN, ISA_CUMSUM, ISA_SQUEEZE, ISA_UNSQUEEZE,
    ISA_FLATTEN, ISA_EXPAND, ISA_TILE, ISA_STRIDED_SLICE, ISA_TRILU, ISA_PADV, ISA_GATHER_ELEMENTS,
    ISA_TOPK, ISA_ONEHOT, ISA_RESIZE, ISA_LRN, ISA_STACK_PUT, ISA_MAXPOOL, ISA_AVGPOOL,
    ISA_RESIZE2, ISA_GRID_SAMPLE, ISA_NMS, ISA_AFFINE_GRID, ISA_COL2IM, ISA_ROI_ALIGN, ISA_DEFORM_CONV,
    ISA_FUSED_MATMUL, ISA_FUSED_CONV2D, ISA_FUSED_CONV2D_ADD, ISA_LSTM_CELL_C, ISA_LSTM_CELL_H, ISA_GRU_CELL, ISA_LSTM_STEP, ISA_GRU_STEP,
};

START_TEST(test_nomem)
{
    const isa_op op = nm_ops[_i];
    /* the reshapes relabel an input nobody else holds: held here, it is copied */
    const bool relabels = op == ISA_RESHAPE || op == ISA_SQUEEZE || op == ISA_UNSQUEEZE || op == ISA_FLATTEN;
    for (long n = 0;; n++) {
        dev_value in[DEV_KMAX_IN], out;
        ta.countdown = -1;
        nm_inputs(op, F32, in);
        dev_value held = relabels ? in[0] : NONE;
        dev_value_retain(&held);
        ta.countdown = n;
        tfvm_status st = callv(op, 0, in, &out);
        ta.countdown = -1;
        dev_value_release(&held);
        if (st == TFVM_OK) {
            ck_assert_msg(n > 0, "%s allocates nothing", isa_ops[op].name);
            dev_value_release(&out);
            break;
        }
        ck_assert_msg(st == TFVM_ERR_NOMEM, "%s, allocation %ld fails: %s (%s)", isa_ops[op].name, n,
                      tfvm_status_name(st), msg);
        ck_assert_msg(strstr(msg, "out of memory") != NULL, "%s: message '%s'", isa_ops[op].name, msg);
        ck_assert_msg(ta.live == 0, "%s, allocation %ld fails: %ld bytes leaked", isa_ops[op].name, n, ta.live);
    }
    ck_assert_int_eq(ta.live, 0);
}
END_TEST

/* Every tensor op of ops.def, on every dtype its `types` lets through (the
 * compiler checks programs against it), has a CPU kernel: the call
 * succeeds. A new tensor row without a case in nm_inputs fails here. */
START_TEST(test_table_types)
{
    const isa_op op = (isa_op)_i;
    if (isa_ops[op].cls != ISA_CLASS_TENSOR)
        return;
    for (uint32_t d = TFVM_BOOL; d <= ISA_DTYPE_LAST; d++) {
        if (!isa_takes(op, d))
            continue;
        dev_value in[DEV_KMAX_IN], out;
        nm_inputs(op, (uint8_t)d, in);
        tfvm_status st = callv(op, op == ISA_BITCAST ? (int32_t)d : 0, in, &out); /* BITCAST: to its own dtype */
        ck_assert_msg(st == TFVM_OK, "%s on %s: %s (%s)", isa_ops[op].name, tfvm_dtype_name((tfvm_dtype)d),
                      tfvm_status_name(st), msg);
        dev_value_release(&out);
    }
}
END_TEST

/* Every op issue 10 added to the tensor class has a CPU kernel: a row of
 * ops.def after BRANCH of class TENSOR reaches a kernel (the internal
 * "not a tensor op" error would say otherwise). */
START_TEST(test_every_new_tensor_op_has_a_kernel)
{
    int seen = 0;
    for (int op = ISA_BRANCH + 1; op < ISA_OP_COUNT; op++) {
        if (isa_ops[op].cls != ISA_CLASS_TENSOR)
            continue;
        dev_value in[DEV_KMAX_IN] = {NONE, NONE, NONE, NONE, NONE}, out;
        for (int k = 0; k < isa_ops[op].n_in; k++)
            in[k] = sc(F32, 1);
        msg[0] = '\0';
        tfvm_status st = dev_cpu_tensor((isa_op)op, 0, in, (uint32_t)isa_ops[op].n_in, &out, &alloc, msg, sizeof msg);
        ck_assert_msg(st != TFVM_ERR_INTERNAL, "%s: %s", isa_ops[op].name, msg);
        if (st == TFVM_OK)
            dev_value_release(&out);
        seen++;
    }
    ck_assert_int_ge(seen, 19);
}
END_TEST

/* ---- Through the VM ---------------------------------------------------------------------
 * A loop stacking i at row i (a scan output), then a 5-input STRIDED_SLICE of
 * the stack: every other row from the end. (The stack is passed from
 * iteration to iteration through one token, so STACK_PUT grows it in place;
 * the VM's tensor pool hides that from an allocation count, so the kernel
 * tests above are what prove it.) */
static const char stack_prog[] =
    "entry main(n: i64) -> (r: i64[]) {\n"
    "    n     = ARG 0\n"
    "    zero  = CONST i64 0\n"
    "    one   = CONST i64 1\n"
    "    empty = CONST i64[0] []\n"
    "    e_i   = ENTER L (zero)\n"
    "    e_a   = ENTER L (empty)\n"
    "    e_n   = ENTER L const (n)\n"
    "    e_one = ENTER L const (one)\n"
    "    st    = CONST i64[1] [-1]\n"
    "    en    = CONST i64[1] [-100000000]\n"
    "    ax    = CONST i64[0] []\n"
    "    sp    = CONST i64[1] [-2]\n"
    "    r     = STRIDED_SLICE (L.a_out, st, en, ax, sp)\n"
    "            RESULT 0 (r)\n"
    "}\n"
    "loop L in main {\n"
    "    i      = MERGE (e_i, i_next)\n"
    "    a      = MERGE (e_a, a_next)\n"
    "    lt     = LESS (i, e_n)\n"
    "    p      = LOOPCOND (lt)\n"
    "    si     = SWITCH (i, p)\n"
    "    sa     = SWITCH (a, p)\n"
    "    a2     = STACK_PUT (sa:1, si:1, si:1)\n"
    "    i2     = ADD (si:1, e_one)\n"
    "    i_next = NEXTITER (i2)\n"
    "    a_next = NEXTITER (a2)\n"
    "    a_out  = EXIT L (sa)\n"
    "}\n";

static void stack_run(tfvm_program *prog, const tfvm_config *cfg, int64_t n)
{
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(prog, cfg, &vm), TFVM_OK);
    tfvm_value arg = tfvm_i64(n), res;
    tfvm_status st = tfvm_run(vm, "main", &arg, 1, &res, 1);
    ck_assert_msg(st == TFVM_OK, "%s", tfvm_errmsg(vm));
    const tfvm_tensor *t = res.tensor;
    ck_assert_int_eq(tfvm_tensor_rank(t), 1);
    ck_assert_int_eq(tfvm_tensor_count(t), (n + 1) / 2);
    const int64_t *d = tfvm_tensor_cdata(t);
    for (int64_t k = 0; k < (n + 1) / 2; k++)
        ck_assert(d[k] == n - 1 - 2 * k);
    tfvm_value_release(&res);
    tfvm_vm_free(vm);
}

START_TEST(test_vm_stack_loop)
{
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.allocator = alloc;
    cfg.deterministic = true;
    tfvm_program *prog;
    tfvm_error err;
    ck_assert_msg(tfvm_program_assemble(stack_prog, sizeof stack_prog - 1, "stack.tfasm", &cfg, &prog, &err) == TFVM_OK,
                  "%s", err.message);
    stack_run(prog, &cfg, 1000);
    stack_run(prog, &cfg, 7);
    stack_run(prog, &cfg, 0); /* the empty stack itself, sliced */
    cfg.deterministic = false;
    cfg.threads = 2;
    stack_run(prog, &cfg, 999);
    tfvm_program_free(prog);
}
END_TEST

static void setup(void)
{
    ta = (tu_alloc){.countdown = -1, .fresh_only = true};
}

static void teardown(void)
{
    ck_assert_msg(ta.live == 0, "%ld bytes leaked", ta.live);
}

static Suite *suite(void)
{
    Suite *s = suite_create("kernels_shape");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_log_softmax);
    tcase_add_test(tc, test_reduce_min_prod);
    tcase_add_test(tc, test_argmin);
    tcase_add_test(tc, test_cumsum);
    tcase_add_test(tc, test_squeeze_unsqueeze_flatten);
    tcase_add_test(tc, test_reshape_in_place);
    tcase_add_test(tc, test_expand_tile);
    tcase_add_test(tc, test_strided_slice);
    tcase_add_test(tc, test_trilu);
    tcase_add_test(tc, test_padv);
    tcase_add_test(tc, test_gather_elements);
    tcase_add_test(tc, test_topk);
    tcase_add_test(tc, test_onehot);
    tcase_add_test(tc, test_stack_put);
    tcase_add_test(tc, test_softmax_in_place);
    tcase_add_test(tc, test_resize_bilinear_last_two);
    tcase_add_test(tc, test_scatter_rows);
    tcase_add_test(tc, test_stack_put_growth);
    tcase_add_test(tc, test_resize);
    tcase_add_test(tc, test_lrn);
    tcase_add_test(tc, test_layer_norm);
    tcase_add_test(tc, test_layer_norm_bits);
    tcase_add_test(tc, test_pool12);
    tcase_add_test(tc, test_small_ints);
    tcase_add_loop_test(tc, test_nomem, 0, (int)UT_COUNTOF(nm_ops));
    tcase_add_loop_test(tc, test_table_types, 0, (int)ISA_OP_COUNT);
    tcase_add_test(tc, test_every_new_tensor_op_has_a_kernel);
    tcase_add_test(tc, test_vm_stack_loop);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(suite()); }
