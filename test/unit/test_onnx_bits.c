/* test/unit/test_onnx_bits.c — import/onnx_bits.c on the small models of
 * test/onnx/make_bits_models.py: Unique's four outputs in order of first
 * occurrence, Dropout with a run-time training_mode (off, ratio 0, ratio 1,
 * and ratio 0.5 against SplitMix64 worked out in Python), and the exact
 * errors of BitShift, BitCast, TensorScatter and MaxPool's Indices. */
#include "onnx_check.h"

#define M "test/onnx/models/"

START_TEST(unique_unsorted)
{
    tfvm_program *p = compile_ok(M "bits_unique.onnx");
    int64_t d6 = 6;
    tfvm_tensor *x = tfvm_tensor_new(TFVM_F32, 1, &d6, NULL);
    memcpy(tfvm_tensor_data(x), (float[]){2, 1, 1, 3, 4, 3}, 6 * sizeof(float));
    tfvm_value a = tfvm_tensor_value(x), r[4];
    for (int mode = 0; mode < 2; mode++) {
        run_main(p, &a, 1, r, 4, mode);
        int64_t d4 = 4;
        check_value(&r[0], TFVM_F32, 1, &d4, (float[]){2, 1, 3, 4});
        check_value(&r[1], TFVM_I64, 1, &d4, (int64_t[]){0, 1, 3, 4});
        check_value(&r[2], TFVM_I64, 1, &d6, (int64_t[]){0, 1, 1, 2, 3, 2});
        check_value(&r[3], TFVM_I64, 1, &d4, (int64_t[]){1, 2, 2, 1});
        for (int k = 0; k < 4; k++)
            tfvm_value_release(&r[k]);
    }
    tfvm_tensor_free(x);
    tfvm_program_free(p);
}
END_TEST

/* y and mask of Dropout(x, ratio, training) */
static void dropout_case(tfvm_program *p, float ratio, bool training, const float *want_y, const uint8_t *want_m)
{
    int64_t d[2] = {2, 3};
    tfvm_tensor *x = tfvm_tensor_new(TFVM_F32, 2, d, NULL);
    memcpy(tfvm_tensor_data(x), (float[]){1, -2, 3, 4, 5, -6}, 6 * sizeof(float));
    tfvm_value a[3] = {tfvm_tensor_value(x), tfvm_f32(ratio), tfvm_bool(training)}, r[2];
    for (int mode = 0; mode < 2; mode++) {
        run_main(p, a, 3, r, 2, mode);
        check_value(&r[0], TFVM_F32, 2, d, want_y);
        check_value(&r[1], TFVM_BOOL, 2, d, want_m);
        tfvm_value_release(&r[0]);
        tfvm_value_release(&r[1]);
    }
    tfvm_tensor_free(x);
}

START_TEST(dropout_run_time_training)
{
    tfvm_program *p = compile_ok(M "bits_dropout.onnx");
    static const float x[6] = {1, -2, 3, 4, 5, -6}, zeros[6] = {0};
    static const uint8_t all[6] = {1, 1, 1, 1, 1, 1}, none[6] = {0};
    dropout_case(p, 0.5f, false, x, all);
    dropout_case(p, 0.0f, true, x, all);
    dropout_case(p, 1.0f, true, zeros, none);
    /* seed 3: u = SplitMix64 of 4..9 = 0.971, 0.106, 0.327, 0.174, 0.772, 0.246 */
    dropout_case(p, 0.5f, true, (const float[]){2, 0, 0, 0, 10, 0}, (const uint8_t[]){1, 0, 0, 0, 1, 0});
    tfvm_program_free(p);
}
END_TEST

START_TEST(errors)
{
    expect_error(M "bits_bad_shift.onnx", TFVM_ERR_FORMAT,
                 "bits_bad_shift.onnx: node 'sh0' (BitShift): direction 'UP' is not LEFT or RIGHT");
    expect_error(M "bits_bad_bitcast.onnx", TFVM_ERR_TYPE,
                 "bits_bad_bitcast.onnx: node 'bc0' (BitCast): f32 and f64 differ in size");
    expect_error(M "bits_bad_scatter_mode.onnx", TFVM_ERR_FORMAT,
                 "bits_bad_scatter_mode.onnx: node 'ts0' (TensorScatter): mode 'ring' is not linear or circular");
    expect_error(M "bits_maxpool_same.onnx", TFVM_ERR_UNSUPPORTED,
                 "bits_maxpool_same.onnx: node 'mp0': op 'MaxPool' (opset 22): the Indices output with auto_pad "
                 "SAME_UPPER or ceil_mode is not supported");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("onnx_bits");
    TCase *tc = tcase_create("bits");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, unique_unsorted);
    tcase_add_test(tc, dropout_run_time_training);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
