/* test/unit/test_kernels_bits.c — the CPU kernels of the ONNX long tail's
 * bit and dynamic-shape instructions (BITAND .. SHR, BITCAST, NONZERO,
 * UNIQUE, UNIQUE_INDEX, DET): exact outputs worked out by hand (NumPy where
 * noted), every error message word for word, allocation failures. */
#include "kernutil.h"


/* ---- Reductions and scans --------------------------------------------------------- */

/* An elementwise op on in[0..n_in-1] (releasing them). */
static tfvm_status ew(isa_op op, dev_value *in, dev_value *out)
{
    msg[0] = '\0';
    *out = (dev_value){.dtype = 99};
    tfvm_status st = dev_cpu_elementwise(op, 0, in, out, &alloc, msg, sizeof msg);
    for (int k = 0; k < isa_ops[op].n_in; k++)
        dev_value_release(&in[k]);
    return st;
}
#define EW(op, ins, dt, dims, ...)                                                         \
    do {                                                                                   \
        dev_value o_;                                                                      \
        tfvm_status st_ = ew(op, (dev_value[3]){UT_UNPAREN ins}, &o_);                     \
        ck_assert_msg(st_ == TFVM_OK, "%s: %s (%s)", HERE, tfvm_status_name(st_), msg);    \
        expect(&o_, dt, NDIMS dims, DIMS dims, VALS(__VA_ARGS__), 0, HERE);                \
    } while (0)
#define EW0(op, ins, dt, v)                                                                \
    do {                                                                                   \
        dev_value o_;                                                                      \
        tfvm_status st_ = ew(op, (dev_value[3]){UT_UNPAREN ins}, &o_);                     \
        ck_assert_msg(st_ == TFVM_OK, "%s: %s (%s)", HERE, tfvm_status_name(st_), msg);    \
        expect(&o_, dt, 0, NULL, VALS(v), 0, HERE);                                        \
    } while (0)

/* ---- BITAND .. SHR ---------------------------------------------------------------------- */
START_TEST(test_bitwise)
{
    EW(ISA_BITAND, (T(I32, (3), 12, -1, 5), T(I32, (3), 10, 7, 0)), I32, (3), 8, 7, 0);
    EW(ISA_BITOR, (T(U8, (2, 2), 1, 2, 128, 0), T(U8, (2), 2, 1)), U8, (2, 2), 3, 3, 130, 1);
    EW(ISA_BITXOR, (T(I64, (2), 6, -1), sc(I64, 3)), I64, (2), 5, -4);
    EW(ISA_BITNOT, (T(I8, (3), 0, -1, 127)), I8, (3), -1, 0, -128);
    EW(ISA_BITNOT, (T(U8, (2), 0, 15)), U8, (2), 255, 240);
    EW0(ISA_BITAND, (sc(I64, 6), sc(I64, 3)), I64, 2);
    EW0(ISA_BITNOT, (sc(I32, 5)), I32, -6);
    /* shifts: counts outside [0, bits) are 0 (SHL) or the sign fill (SHR) */
    EW(ISA_SHL, (T(U8, (4), 16, 4, 1, 1), T(U8, (4), 1, 2, 7, 8)), U8, (4), 32, 16, 128, 0);
    EW(ISA_SHL, (T(I32, (3), 1, 1, -1), T(I32, (3), 31, -1, 4)), I32, (3), -2147483648.0, 0, -16);
    EW(ISA_SHR, (T(I32, (4), -16, 16, -1, 5), T(I32, (4), 2, 2, 40, 40)), I32, (4), -4, 4, -1, 0);
    EW(ISA_SHR, (T(U8, (3), 255, 128, 7), T(U8, (3), 4, 7, 9)), U8, (3), 15, 1, 0);
    EW(ISA_SHR, (T(I8, (2), -128, 64), T(I8, (2), 7, -3)), I8, (2), -1, 0);
    EW(ISA_SHL, (T(I64, (2), 3, 1), T(I64, (2), 62, 64)), I64, (2), -4611686018427387904.0, 0);
    dev_value o;
    ck_assert_int_eq(ew(ISA_BITAND, (dev_value[3]){T(F32, (1), 1), T(F32, (1), 1)}, &o), TFVM_ERR_TYPE);
    ck_assert_str_eq(msg, "bitand needs i32, i64, u8 or i8, got f32");
    ck_assert_int_eq(ew(ISA_SHL, (dev_value[3]){T(B, (1), 1), T(B, (1), 1)}, &o), TFVM_ERR_TYPE);
    ck_assert_str_eq(msg, "shl needs i32, i64, u8 or i8, got bool");
    ck_assert_int_eq(ew(ISA_BITOR, (dev_value[3]){T(I32, (1), 1), T(I64, (1), 1)}, &o), TFVM_ERR_TYPE);
    ck_assert_str_eq(msg, "dtype mismatch: i32 and i64");
}
END_TEST

/* ---- BITCAST ---------------------------------------------------------------------------- */
START_TEST(test_bitcast)
{
    OK(ISA_BITCAST, I32, (T(F32, (2), 1, -2)), I32, (2), 1065353216, -1073741824);
    OK(ISA_BITCAST, F32, (T(I32, (1, 2), 1065353216, 0)), F32, (1, 2), 1, 0);
    OK(ISA_BITCAST, I64, (T(F64, (1), 1)), I64, (1), 4607182418800017408.0);
    OK(ISA_BITCAST, U8, (T(I8, (3), -1, 0, -128)), U8, (3), 255, 0, 128);
    OK(ISA_BITCAST, U8, (T(B, (2), 1, 0)), U8, (2), 1, 0);
    OK(ISA_BITCAST, B, (T(U8, (2), 1, 0)), B, (2), 1, 0);
    OK0(ISA_BITCAST, I32, (sc(F32, 1)), I32, 1065353216);
    OK(ISA_BITCAST, I32, (T(F32, (0, 3))), I32, (0, 3), 0);
    FAILS(ISA_BITCAST, I32, (T(F64, (1), 1)), TY, "bitcast: f64 and i32 differ in size");
    FAILS(ISA_BITCAST, B, (T(U8, (3), 0, 1, 2)), AR, "bitcast: byte 2 at element 2 is not a bool");
    FAILS(ISA_BITCAST, 0, (T(U8, (1), 0)), AR, "bitcast: invalid target dtype 0");
}
END_TEST

/* ---- NONZERO ---------------------------------------------------------------------------- */
START_TEST(test_nonzero)
{
    OK(ISA_NONZERO, 0, (T(I32, (2, 3), 0, 5, 0, -1, 0, 2)), I64, (2, 3), 0, 1, 1, 1, 0, 2);
    OK(ISA_NONZERO, 0, (T(F64, (4), -0.0, NAN, 0, 3)), I64, (1, 2), 1, 3);
    OK(ISA_NONZERO, 0, (T(B, (2, 1, 2), 1, 0, 0, 1)), I64, (3, 2), 0, 1, 0, 0, 0, 1);
    OK(ISA_NONZERO, 0, (T(F32, (2), 0, 0)), I64, (1, 0), 0);
    OK(ISA_NONZERO, 0, (sc(I64, 7)), I64, (0, 1), 0);
}
END_TEST

/* ---- UNIQUE / UNIQUE_INDEX ------------------------------------------------------------------
 * ONNX's examples (Unique operator docs), checked with numpy.unique. */
START_TEST(test_unique)
{
    /* x = [2, 1, 1, 3, 4, 3]: sorted [1, 2, 3, 4], first [1, 0, 3, 4],
     * inverse [1, 0, 0, 2, 3, 2], counts [2, 1, 2, 1] */
#define X6 T(F32, (6), 2, 1, 1, 3, 4, 3)
    OK(ISA_UNIQUE, ISA_OPT_SORTED, (X6, sc64(0)), F32, (4), 1, 2, 3, 4);
    OK(ISA_UNIQUE_INDEX, ISA_OPT_SORTED, (X6, sc64(0)), I64, (4), 1, 0, 3, 4);
    OK(ISA_UNIQUE_INDEX, ISA_OPT_SORTED | ISA_OPT_UQ_INVERSE, (X6, sc64(0)), I64, (6), 1, 0, 0, 2, 3, 2);
    OK(ISA_UNIQUE_INDEX, ISA_OPT_SORTED | ISA_OPT_UQ_COUNTS, (X6, sc64(0)), I64, (4), 2, 1, 2, 1);
    /* unsorted: order of first occurrence */
    OK(ISA_UNIQUE, 0, (X6, sc64(0)), F32, (4), 2, 1, 3, 4);
    OK(ISA_UNIQUE_INDEX, 0, (X6, sc64(0)), I64, (4), 0, 1, 3, 4);
    OK(ISA_UNIQUE_INDEX, ISA_OPT_UQ_INVERSE, (X6, sc64(0)), I64, (6), 0, 1, 1, 2, 3, 2);
    OK(ISA_UNIQUE_INDEX, ISA_OPT_UQ_COUNTS, (X6, sc64(0)), I64, (4), 1, 2, 2, 1);
#undef X6
    /* rows of [[1, 0, 0], [1, 0, 0], [2, 3, 4]] along axis 0; columns of
     * [[1, 1], [0, 1], [2, 1], [0, 1]] along axis -1 (lexicographic) */
    OK(ISA_UNIQUE, ISA_OPT_SORTED, (T(I32, (3, 3), 1, 0, 0, 1, 0, 0, 2, 3, 4), sc64(0)), I32, (2, 3), 1, 0, 0, 2, 3, 4);
    OK(ISA_UNIQUE_INDEX, ISA_OPT_SORTED | ISA_OPT_UQ_COUNTS, (T(I32, (3, 3), 1, 0, 0, 1, 0, 0, 2, 3, 4), sc64(0)), I64,
       (2), 2, 1);
    OK(ISA_UNIQUE, ISA_OPT_SORTED, (T(I64, (4, 2), 1, 1, 0, 1, 2, 1, 0, 1), sc64(-1)), I64, (4, 2), 1, 1, 0, 1, 2, 1,
       0, 1);
    OK(ISA_UNIQUE, ISA_OPT_SORTED, (T(U8, (2, 3), 3, 1, 3, 0, 9, 0), sc64(1)), U8, (2, 2), 1, 3, 9, 0);
    OK(ISA_UNIQUE_INDEX, ISA_OPT_SORTED | ISA_OPT_UQ_INVERSE, (T(U8, (2, 3), 3, 1, 3, 0, 9, 0), sc64(1)), I64, (3), 1,
       0, 1);
    OK(ISA_UNIQUE, ISA_OPT_SORTED, (T(B, (0)), sc64(0)), B, (0), 0);
    OK(ISA_UNIQUE_INDEX, ISA_OPT_UQ_COUNTS, (T(B, (0)), sc64(0)), I64, (0), 0);
    /* empty slices are all equal */
    OK(ISA_UNIQUE_INDEX, ISA_OPT_UQ_INVERSE, (T(F64, (3, 0)), sc64(0)), I64, (3), 0, 0, 0);
    FAILS(ISA_UNIQUE, 0, (T(F32, (2, 2)), sc64(2)), SH, "unique: axis 2 out of range for shape [2, 2]");
    FAILS(ISA_UNIQUE, 0, (sc(F32, 1), sc64(0)), SH, "unique: axis 0 out of range for shape []");
    FAILS(ISA_UNIQUE, 0, (T(F32, (2)), sc(F32, 0)), TY, "unique: axis must be an integer scalar, got f32 []");
    FAILS(ISA_UNIQUE_INDEX, ISA_OPT_UQ_INVERSE | ISA_OPT_UQ_COUNTS, (T(F32, (2)), sc64(0)), AR,
          "unique_index: options inverse and counts together name two outputs");
}
END_TEST

/* ---- DET -------------------------------------------------------------------------------- */
START_TEST(test_det)
{
    OK0(ISA_DET, 0, (T(F64, (2, 2), 1, 2, 3, 4)), F64, -2);
    /* a pivot swap: [[0, 1], [1, 0]] = -1; a singular matrix; numpy.linalg.det */
    OK(ISA_DET, 0, (T(F32, (3, 2, 2), 0, 1, 1, 0, 1, 2, 2, 4, 2, 0, 0, 3)), F32, (3), -1, 0, 6);
    OK0(ISA_DET, 0, (T(F64, (3, 3), 2, -3, 1, 2, 0, -1, 1, 4, 5)), F64, 49);
    OK0(ISA_DET, 0, (T(F64, (0, 0))), F64, 1);
    OK(ISA_DET, 0, (T(F32, (0, 2, 2))), F32, (0), 0);
    FAILS(ISA_DET, 0, (T(F32, (2, 3))), SH, "det: needs square matrices in the last two dims, got [2, 3]");
    FAILS(ISA_DET, 0, (T(F32, (2))), SH, "det: needs square matrices in the last two dims, got [2]");
    FAILS(ISA_DET, 0, (T(I32, (1, 1), 1)), TY, "det: not defined on i32 (floats only)");
}
END_TEST

/* Each call with its n-th allocation failing, for every n until it
 * succeeds: TFVM_ERR_NOMEM, nothing leaked. */
static void nm_case(int i, dev_value in[DEV_KMAX_IN], isa_op *op, int32_t *attr)
{
    for (int k = 0; k < DEV_KMAX_IN; k++)
        in[k] = NONE;
    switch (i) {
    case 0: *op = ISA_BITCAST, *attr = I32; in[0] = T(F32, (2), 1, 2); break;
    case 1: *op = ISA_NONZERO, *attr = 0; in[0] = T(I32, (3), 1, 0, 2); break;
    case 2: *op = ISA_UNIQUE, *attr = 0; in[0] = T(I32, (4), 2, 1, 2, 3); in[1] = sc64(0); break;
    case 3: *op = ISA_UNIQUE_INDEX, *attr = ISA_OPT_UQ_COUNTS; in[0] = T(I32, (4), 2, 1, 2, 3); in[1] = sc64(0); break;
    default: *op = ISA_DET, *attr = 0; in[0] = T(F64, (2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8); break;
    }
}

START_TEST(test_nomem)
{
    for (long n = 0;; n++) {
        dev_value in[DEV_KMAX_IN], out;
        isa_op op;
        int32_t attr;
        ta.countdown = -1;
        nm_case(_i, in, &op, &attr);
        ta.countdown = n;
        tfvm_status st = callv(op, attr, in, &out);
        ta.countdown = -1;
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
}
END_TEST

static void setup(void) { ta = (tu_alloc){.countdown = -1, .fresh_only = true}; }
static void teardown(void) { ck_assert_msg(ta.live == 0, "%ld bytes leaked", ta.live); }

int main(void)
{
    Suite *s = suite_create("kernels_bits");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_bitwise);
    tcase_add_test(tc, test_bitcast);
    tcase_add_test(tc, test_nonzero);
    tcase_add_test(tc, test_unique);
    tcase_add_test(tc, test_det);
    tcase_add_loop_test(tc, test_nomem, 0, 5);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
