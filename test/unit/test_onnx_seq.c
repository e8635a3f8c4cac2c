/* test/unit/test_onnx_seq.c — the ONNX sequence and signal ops of
 * import/onnx_seq.c on the small models of test/onnx/make_seq_models.py:
 * CausalConvWithState with a past state, DFT with a run-time axis and its
 * real inverse, FlexAttention (ai.onnx.preview) with a score graph,
 * LinearAttention's recurrence, their exact errors, and NOMEM. */
#include "onnx_check.h"

#define M "test/onnx/models/"

START_TEST(causal_conv_with_past_state)
{
    tfvm_program *p = compile_ok(M "seq_causal_conv.onnx");
    tfvm_tensor *x = ftensor(3, (int64_t[]){1, 2, 3}, (float[]){1, 2, 3, 1, 0, -1});
    tfvm_tensor *past = ftensor(3, (int64_t[]){1, 2, 1}, (float[]){1, 0});
    tfvm_value a[2] = {tfvm_tensor_value(x), tfvm_tensor_value(past)}, r[2];
    for (int mode = 0; mode < 2; mode++) {
        run_main(p, a, 2, r, 2, mode);
        /* [1 | 1 2 3] * [1 2] + 10 and [0 | 1 0 -1] * [0 -1] - 1 */
        check_f32(&r[0], 3, (int64_t[]){1, 2, 3}, (float[]){13, 15, 18, -2, -1, 0});
        check_f32(&r[1], 3, (int64_t[]){1, 2, 1}, (float[]){3, -1});
        tfvm_value_release(&r[0]);
        tfvm_value_release(&r[1]);
    }
    tfvm_tensor_free(x);
    tfvm_tensor_free(past);
    tfvm_program_free(p);
}
END_TEST

START_TEST(rfft_axis_at_run_time)
{
    tfvm_program *p = compile_ok(M "seq_rfft.onnx");
    tfvm_tensor *x = ftensor(3, (int64_t[]){1, 4, 1}, (float[]){1, 2, 3, 4});
    tfvm_value a[2] = {tfvm_tensor_value(x), tfvm_i64(1)}, r;
    for (int mode = 0; mode < 2; mode++) {
        run_main(p, a, 2, &r, 1, mode);
        check_f32(&r, 3, (int64_t[]){1, 3, 2}, (float[]){10, 0, -2, 2, -2, 0});
        tfvm_value_release(&r);
    }
    /* the same axis counted from the end */
    a[1] = tfvm_i64(-2);
    run_main(p, a, 2, &r, 1, 1);
    check_f32(&r, 3, (int64_t[]){1, 3, 2}, (float[]){10, 0, -2, 2, -2, 0});
    tfvm_value_release(&r);
    tfvm_tensor_free(x);
    tfvm_program_free(p);
}
END_TEST

START_TEST(irfft_inverts_rfft)
{
    tfvm_program *p = compile_ok(M "seq_irfft.onnx");
    tfvm_tensor *x = ftensor(3, (int64_t[]){1, 3, 2}, (float[]){10, 0, -2, 2, -2, 0});
    tfvm_value a = tfvm_tensor_value(x), r;
    for (int mode = 0; mode < 2; mode++) {
        run_main(p, &a, 1, &r, 1, mode);
        check_f32(&r, 3, (int64_t[]){1, 4, 1}, (float[]){1, 2, 3, 4});
        tfvm_value_release(&r);
    }
    tfvm_tensor_free(x);
    tfvm_program_free(p);
}
END_TEST

START_TEST(flex_attention_score_mod)
{
    tfvm_program *p = compile_ok(M "seq_flex.onnx");
    tfvm_tensor *q = ftensor(4, (int64_t[]){1, 1, 1, 2}, (float[]){0, 0});
    tfvm_tensor *k = ftensor(4, (int64_t[]){1, 1, 2, 2}, (float[]){1, 1, 1, 1});
    tfvm_tensor *v = ftensor(4, (int64_t[]){1, 1, 2, 1}, (float[]){4, 8});
    tfvm_value a[3] = {tfvm_tensor_value(q), tfvm_tensor_value(k), tfvm_tensor_value(v)}, r;
    for (int mode = 0; mode < 2; mode++) {
        run_main(p, a, 3, &r, 1, mode);
        /* equal scores plus [0, ln 3]: weights 1/4 and 3/4 */
        check_f32(&r, 4, (int64_t[]){1, 1, 1, 1}, (float[]){7});
        tfvm_value_release(&r);
    }
    tfvm_tensor_free(q);
    tfvm_tensor_free(k);
    tfvm_tensor_free(v);
    tfvm_program_free(p);
}
END_TEST

START_TEST(linear_attention_recurrence)
{
    tfvm_program *p = compile_ok(M "seq_linear_attention.onnx");
    int64_t d[3] = {1, 2, 1};
    tfvm_tensor *q = ftensor(3, d, (float[]){1, 1}), *k = ftensor(3, d, (float[]){1, 2});
    tfvm_tensor *v = ftensor(3, d, (float[]){3, 4});
    tfvm_value a[3] = {tfvm_tensor_value(q), tfvm_tensor_value(k), tfvm_tensor_value(v)}, r[2];
    for (int mode = 0; mode < 2; mode++) {
        run_main(p, a, 3, r, 2, mode);
        /* state 1*3 = 3, then 3 + 2*4 = 11; each read by q = 1 */
        check_f32(&r[0], 3, d, (float[]){3, 11});
        check_f32(&r[1], 4, (int64_t[]){1, 1, 1, 1}, (float[]){11});
        tfvm_value_release(&r[0]);
        tfvm_value_release(&r[1]);
    }
    tfvm_tensor_free(q);
    tfvm_tensor_free(k);
    tfvm_tensor_free(v);
    tfvm_program_free(p);
}
END_TEST

/* ONNX sequences inside one graph (make_seq_models.py's lists(); the values
 * are onnx.reference's) */
START_TEST(sequences_in_a_graph)
{
    tfvm_program *p = compile_ok(M "seq_lists.onnx");
    float xv[24], yv[4] = {-1, -2, -3, -4}, zv[4] = {-10, -20, -30, -40};
    for (int i = 0; i < 24; i++)
        xv[i] = (float)i;
    const int64_t xd[2] = {6, 4}, yd[2] = {1, 4}, cd[2] = {5, 4}, sd[3] = {1, 2, 4};
    tfvm_tensor *x = ftensor(2, xd, xv), *y = ftensor(2, yd, yv), *z = ftensor(2, yd, zv);
    static const float c[20] = {0, 1, 2, 3, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, -1, -2, -3, -4};
    static const float st[8] = {-1, -2, -3, -4, -10, -20, -30, -40};
    static const int64_t ks[3] = {0, 1, -1};
    for (int i = 0; i < 3; i++)
        for (int mode = 0; mode < 2; mode++) {
            tfvm_value args[4] = {tfvm_tensor_value(x), tfvm_tensor_value(y), tfvm_tensor_value(z), tfvm_i64(ks[i])};
            tfvm_value res[4];
            run_main(p, args, 4, res, 4, mode);
            check_f32(&res[0], 2, cd, c);
            ck_assert(res[1].tensor == NULL && res[1].dtype == TFVM_I64 && res[1].as.i64 == 3);
            check_f32(&res[2], 2, yd, ks[i] == 0 ? yv : zv);
            check_f32(&res[3], 3, sd, st);
            for (int k = 0; k < 4; k++)
                tfvm_value_release(&res[k]);
        }
    tfvm_tensor_free(x);
    tfvm_tensor_free(y);
    tfvm_tensor_free(z);
    tfvm_program_free(p);
}
END_TEST

START_TEST(errors)
{
    expect_error(M "seq_list_out.onnx", TFVM_ERR_UNSUPPORTED,
                 "seq_list_out.onnx: graph output 'u' is a sequence (sequences are supported inside one graph)");
    expect_error(M "seq_bad_activation.onnx", TFVM_ERR_FORMAT,
                 "seq_bad_activation.onnx: node 'cc0' (CausalConvWithState): activation 'gelu' (none, silu or swish are)");
    expect_error(M "seq_la_unknown_length.onnx", TFVM_ERR_UNSUPPORTED,
                 "seq_la_unknown_length.onnx: node 'la0': op 'LinearAttention' (opset 27): query, key or value of "
                 "unknown shape is not supported");
    expect_error(M "seq_preview_unknown.onnx", TFVM_ERR_UNSUPPORTED,
                 "seq_preview_unknown.onnx: node 'f0': op 'Foo' of domain 'ai.onnx.preview' is not supported (only "
                 "the default domain is)");
}
END_TEST

START_TEST(nomem_at_every_allocation)
{
    static const char *const models[] = {M "seq_causal_conv.onnx", M "seq_rfft.onnx", M "seq_flex.onnx",
                                         M "seq_linear_attention.onnx", M "seq_lists.onnx"};
    for (size_t m = 0; m < UT_COUNTOF(models); m++) {
        for (long n = 0;; n++) {
            tu_alloc ta = {.countdown = n};
            tfvm_allocator a = tu_allocator(&ta);
            tfvm_program *p;
            tfvm_error err;
            tfvm_status st = ou_compile(models[m], &a, &p, &err);
            if (st == TFVM_OK) {
                tfvm_program_free(p);
                ck_assert_int_eq(ta.live, 0);
                break;
            }
            ck_assert_msg(st == TFVM_ERR_NOMEM, "%s at allocation %ld: %s", models[m], n, err.message);
            ck_assert_int_eq(ta.live, 0);
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("onnx_seq");
    TCase *tc = tcase_create("onnx_seq");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, causal_conv_with_past_state);
    tcase_add_test(tc, rfft_axis_at_run_time);
    tcase_add_test(tc, irfft_inverts_rfft);
    tcase_add_test(tc, flex_attention_score_mod);
    tcase_add_test(tc, linear_attention_recurrence);
    tcase_add_test(tc, sequences_in_a_graph);
    tcase_add_test(tc, errors);
    tcase_add_test(tc, nomem_at_every_allocation);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
