/* test/unit/test_onnx.c — the ONNX importer on the small models of
 * test/onnx/models/ (made by test/onnx/make_models.py): an MLP, a CNN, If,
 * Loop (scalar, with scan outputs, nested, with an If inside), Scan,
 * external data, exporters' conventions, composite activations against
 * onnxruntime on extreme inputs, and its errors: exact outputs,
 * exact messages, and every allocation failure ending in NOMEM. */
#include "onnx_check.h"

#define M "test/onnx/models/"

START_TEST(mlp)
{
    tfvm_program *p = compile_ok(M "mlp.onnx");
    /* W1 is a graph input and an initializer (IR 8): an overridable default */
    ck_assert_uint_eq(p->isa.entries[0].n_params, 2);
    ck_assert_str_eq(p->isa.entries[0].params[0].name, "x");
    ck_assert_str_eq(p->isa.entries[0].params[1].name, "W1");
    ck_assert(!p->isa.entries[0].params[0].has_default && p->isa.entries[0].params[1].has_default);
    ck_assert_str_eq(p->isa.entries[0].results[0].name, "y");
    int64_t d[2] = {2, 4}, dw[2] = {4, 3};
    float x[8] = {1, 2, 3, 4, -1, 0, 1, 2}, ones[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    tfvm_tensor *t = ftensor(2, d, x), *w = ftensor(2, dw, ones);
    tfvm_value a[2] = {tfvm_tensor_value(t), tfvm_default()}, r;
    for (int mode = 0; mode < 4; mode++) {
        a[1] = mode < 2 ? tfvm_default() : tfvm_tensor_value(w); /* left out: W1's initializer; fed: ones */
        run_main(p, a, 2, &r, 1, mode % 2);
        if (mode < 2)
            check_f32(&r, 2, (int64_t[]){2, 2}, (float[]){44.5f, 50.5f, 36.5f, 34.5f});
        else
            check_f32(&r, 2, (int64_t[]){2, 2}, (float[]){24.5f, 20.5f, 8.5f, 4.5f});
        tfvm_value_release(&r);
    }
    tfvm_tensor_free(t);
    tfvm_tensor_free(w);
    tfvm_program_free(p);
}
END_TEST

START_TEST(cnn)
{
    tfvm_program *p = compile_ok(M "cnn.onnx");
    int64_t d[4] = {1, 1, 4, 4};
    float x[16] = {1, 2, 0, 1, 0, 1, 3, 1, 2, 0, 1, 0, 1, 1, 0, 2};
    tfvm_tensor *t = ftensor(4, d, x);
    tfvm_value a = tfvm_tensor_value(t), r;
    for (int mode = 0; mode < 2; mode++) {
        run_main(p, &a, 1, &r, 1, mode);
        check_f32(&r, 2, (int64_t[]){1, 3}, (float[]){-7, 1, -6});
        tfvm_value_release(&r);
    }
    tfvm_tensor_free(t);
    tfvm_program_free(p);
}
END_TEST

START_TEST(if_branches)
{
    tfvm_program *p = compile_ok(M "if.onnx");
    int64_t d[1] = {3};
    tfvm_tensor *t = ftensor(1, d, (float[]){1, 2, 3});
    for (int c = 0; c < 2; c++) {
        tfvm_value a[2] = {tfvm_bool(c == 1), tfvm_tensor_value(t)}, r;
        run_main(p, a, 2, &r, 1, c);
        check_f32(&r, 1, d, c ? (float[]){2, 3, 4} : (float[]){2, 4, 6});
        tfvm_value_release(&r);
    }
    tfvm_tensor_free(t);
    tfvm_program_free(p);
}
END_TEST

static int64_t run_i64(tfvm_program *p, const tfvm_value *args, size_t n, int mode)
{
    tfvm_value r;
    run_main(p, args, n, &r, 1, mode);
    ck_assert_ptr_null(r.tensor);
    ck_assert_int_eq(r.dtype, TFVM_I64);
    return r.as.i64;
}

START_TEST(loop_scalar_100)
{
    tfvm_program *p = compile_ok(M "loop100.onnx");
    ck_assert_uint_eq(p->isa.entries[0].n_params, 0);
    /* a counted loop is a .tfg while: no test of the constant condition
     * (no AND), two SWITCHes (counter and sum), 8 instructions per iteration */
    int switches = 0, in_loop = 0;
    for (uint32_t i = 0; i < p->isa.n_insts; i++) {
        ck_assert_int_ne(p->isa.insts[i].op, ISA_AND);
        switches += p->isa.insts[i].op == ISA_SWITCH;
        in_loop += p->isa.regions[p->isa.insts[i].region].kind == ISA_REGION_LOOP;
    }
    ck_assert_int_eq(switches, 2);
    ck_assert_int_eq(in_loop, 9); /* the 8 of an iteration and the EXIT */
    for (int mode = 0; mode < 2; mode++)
        ck_assert_int_eq(run_i64(p, NULL, 0, mode), 4950);
    tfvm_program_free(p);
}
END_TEST

START_TEST(loop_scan_outputs)
{
    tfvm_program *p = compile_ok(M "loop_scan.onnx");
    int64_t d[1] = {2};
    tfvm_tensor *t = ftensor(1, d, (float[]){1, -1});
    tfvm_value a[2] = {tfvm_tensor_value(t), tfvm_i64(4)}, r[2];
    for (int mode = 0; mode < 2; mode++) {
        run_main(p, a, 2, r, 2, mode);
        check_f32(&r[0], 1, d, (float[]){5, 3});
        check_f32(&r[1], 2, (int64_t[]){4, 2}, (float[]){0, 0, 3, 1, 8, 4, 15, 9});
        tfvm_value_release(&r[0]);
        tfvm_value_release(&r[1]);
    }
    tfvm_tensor_free(t);
    tfvm_program_free(p);
}
END_TEST

START_TEST(loop_in_loop)
{
    tfvm_program *p = compile_ok(M "nested_loop.onnx");
    for (int mode = 0; mode < 2; mode++) {
        tfvm_value m = tfvm_i64(3);
        ck_assert_int_eq(run_i64(p, &m, 1, mode), 18);
        m = tfvm_i64(0);
        ck_assert_int_eq(run_i64(p, &m, 1, mode), 0);
        m = tfvm_i64(50); /* sum_i sum_{j<4} i*j = 1225 * 6 */
        ck_assert_int_eq(run_i64(p, &m, 1, mode), 7350);
    }
    tfvm_program_free(p);
}
END_TEST

START_TEST(if_in_loop)
{
    tfvm_program *p = compile_ok(M "if_in_loop.onnx");
    for (int mode = 0; mode < 2; mode++) {
        tfvm_value m = tfvm_i64(10);
        ck_assert_int_eq(run_i64(p, &m, 1, mode), 15);
        m = tfvm_i64(1000); /* (0 + 2 + ... + 998) - 500 */
        ck_assert_int_eq(run_i64(p, &m, 1, mode), 249500 - 500);
    }
    tfvm_program_free(p);
}
END_TEST

START_TEST(loop_in_if)
{
    tfvm_program *p = compile_ok(M "loop_in_if.onnx");
    for (int mode = 0; mode < 2; mode++) {
        tfvm_value a[2] = {tfvm_bool(true), tfvm_i64(10)};
        ck_assert_int_eq(run_i64(p, a, 2, mode), 45);
        a[0] = tfvm_bool(false);
        ck_assert_int_eq(run_i64(p, a, 2, mode), -1);
    }
    tfvm_program_free(p);
}
END_TEST

/* shape arithmetic on known dims is done while importing: no SHAPE,
 * GATHER or CONCAT is left in the program, only the RESHAPE */
START_TEST(shape_chain_folded)
{
    tfvm_program *p = compile_ok(M "reshape_chain.onnx");
    int reshapes = 0;
    for (uint32_t i = 0; i < p->isa.n_insts; i++) {
        uint16_t op = p->isa.insts[i].op;
        ck_assert_msg(op != ISA_SHAPE && op != ISA_GATHER && op != ISA_CONCAT && op != ISA_SELECT,
                      "instruction %u is %s", i, isa_ops[op].name);
        reshapes += op == ISA_RESHAPE;
    }
    ck_assert_int_eq(reshapes, 1);
    float x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i;
    tfvm_tensor *t = ftensor(3, (int64_t[]){2, 3, 4}, x);
    tfvm_value a = tfvm_tensor_value(t), r;
    run_main(p, &a, 1, &r, 1, 0);
    check_f32(&r, 2, (int64_t[]){2, 12}, x);
    tfvm_value_release(&r);
    tfvm_tensor_free(t);
    tfvm_program_free(p);
}
END_TEST

/* stacked LSTM layers: the second one's length and zero state are
 * constants (its input's shape is the first one's Y's, which the importer
 * knows), so no SHAPE or FILL runs; the output is onnx's reference's */
START_TEST(stacked_lstm_shapes_folded)
{
    tfvm_program *p = compile_ok(M "stacked_lstm.onnx");
    for (uint32_t i = 0; i < p->isa.n_insts; i++) {
        uint16_t op = p->isa.insts[i].op;
        ck_assert_msg(op != ISA_SHAPE && op != ISA_FILL, "instruction %u is %s", i, isa_ops[op].name);
    }
    tfvm_tensor *x, *want;
    tfvm_error err;
    ck_assert_msg(tfvm_npy_load(M "stacked_lstm.in.npy", NULL, &x, &err) == TFVM_OK, "%s", err.message);
    ck_assert_msg(tfvm_npy_load(M "stacked_lstm.out.npy", NULL, &want, &err) == TFVM_OK, "%s", err.message);
    tfvm_value a = tfvm_tensor_value(x), r;
    for (int mode = 0; mode < 2; mode++) {
        run_main(p, &a, 1, &r, 1, mode);
        ck_assert_int_eq(tfvm_tensor_count(r.tensor), tfvm_tensor_count(want));
        const float *got = tfvm_tensor_cdata(r.tensor), *w = tfvm_tensor_cdata(want);
        for (int64_t i = 0; i < tfvm_tensor_count(want); i++)
            ck_assert_msg(fabsf(got[i] - w[i]) <= 1e-6f + 1e-5f * fabsf(w[i]), "mode %d, y[%lld] = %.9g, not %.9g",
                          mode, (long long)i, got[i], w[i]);
        tfvm_value_release(&r);
    }
    tfvm_tensor_free(x);
    tfvm_tensor_free(want);
    tfvm_program_free(p);
}
END_TEST

/* Loops of p whose parent is a loop */
static int nested_loops(const tfvm_program *p)
{
    int n = 0;
    for (uint32_t r = 0; r < p->isa.n_regions; r++)
        n += p->isa.regions[r].kind == ISA_REGION_LOOP && p->isa.regions[r].parent != ISA_NONE &&
             p->isa.regions[p->isa.regions[r].parent].kind == ISA_REGION_LOOP;
    return n;
}

/* Three stacked recurrent layers (LSTM, GRU, LSTM, each Y squeezed into
 * the next one's X) over 70 steps are one loop over chunks of steps with a
 * loop per layer in it, and no stand-in for the Ys between them is left
 * (FILL); their results are onnx's reference's and, bit for bit, those of
 * stacked_unchained.onnx, the same layers whose first Y is also an output
 * of the graph (that layer is lowered alone, the two others chained), on
 * 1 and 2 threads */
START_TEST(stacked_layers_chained)
{
    tfvm_program *p = compile_ok(M "stacked_chain.onnx"), *q = compile_ok(M "stacked_unchained.onnx");
    ck_assert_int_eq(nested_loops(p), 3);
    ck_assert_int_eq(nested_loops(q), 2);
    for (uint32_t i = 0; i < p->isa.n_insts; i++)
        ck_assert_msg(p->isa.insts[i].op != ISA_FILL, "instruction %u is FILL", i);
    static const char *const refs[3] = {M "stacked_chain.y.npy", M "stacked_chain.h1.npy", M "stacked_chain.c3.npy"};
    tfvm_tensor *x, *want[3];
    tfvm_error err;
    ck_assert_msg(tfvm_npy_load(M "stacked_chain.in.npy", NULL, &x, &err) == TFVM_OK, "%s", err.message);
    for (int k = 0; k < 3; k++)
        ck_assert_msg(tfvm_npy_load(refs[k], NULL, &want[k], &err) == TFVM_OK, "%s", err.message);
    tfvm_value a = tfvm_tensor_value(x), r[3], u[4];
    for (int mode = 0; mode < 2; mode++) {
        run_main(p, &a, 1, r, 3, mode);
        run_main(q, &a, 1, u, 4, mode);
        for (int k = 0; k < 3; k++) {
            ck_assert_int_eq(tfvm_tensor_count(r[k].tensor), tfvm_tensor_count(want[k]));
            const float *got = tfvm_tensor_cdata(r[k].tensor), *w = tfvm_tensor_cdata(want[k]);
            for (int64_t i = 0; i < tfvm_tensor_count(want[k]); i++)
                ck_assert_msg(fabsf(got[i] - w[i]) <= 1e-6f + 1e-5f * fabsf(w[i]), "mode %d, %s[%lld] = %.9g, not %.9g",
                              mode, refs[k], (long long)i, got[i], w[i]);
            char why[256];
            ck_assert_msg(ou_same(&u[k], r[k].tensor, why, sizeof why), "mode %d, result %d: %s", mode, k, why);
            tfvm_value_release(&r[k]);
            tfvm_value_release(&u[k]);
        }
        tfvm_value_release(&u[3]);
    }
    tfvm_tensor_free(x);
    for (int k = 0; k < 3; k++)
        tfvm_tensor_free(want[k]);
    tfvm_program_free(p);
    tfvm_program_free(q);
}
END_TEST

/* a token's embedding through a linear layer: with the table constant the
 * optimizer gathers rows of the table's product, computed as the one-row
 * product of each row, so the same bits as the product of the row gathered
 * at run time (the model whose table is a parameter keeps that product) */
START_TEST(embedding_product_rows)
{
    tfvm_program *p = compile_ok(M "embed_linear.onnx"), *q = compile_ok(M "embed_linear_param.onnx");
    tfvm_tensor *E;
    tfvm_error err;
    ck_assert_msg(tfvm_npy_load(M "embed_linear.E.npy", NULL, &E, &err) == TFVM_OK, "%s", err.message);
    for (uint32_t i = 0; i < p->isa.n_insts; i++) {
        uint16_t op = p->isa.insts[i].op;
        ck_assert_msg(op != ISA_MATMUL && op != ISA_FUSED_MATMUL, "instruction %u is %s", i, isa_ops[op].name);
    }
    for (int64_t v = 0; v < 6; v++) {
        tfvm_tensor *idx = tfvm_tensor_new(TFVM_I64, 1, (int64_t[]){1}, NULL);
        *(int64_t *)tfvm_tensor_data(idx) = v;
        tfvm_value a[2] = {tfvm_tensor_value(idx), tfvm_tensor_value(E)}, got, want;
        run_main(p, a, 1, &got, 1, 0);
        run_main(q, a, 2, &want, 1, 0);
        ck_assert_int_eq(tfvm_tensor_count(got.tensor), 19);
        ck_assert_int_eq(tfvm_tensor_count(want.tensor), 19);
        ck_assert_msg(memcmp(tfvm_tensor_cdata(got.tensor), tfvm_tensor_cdata(want.tensor), 19 * sizeof(float)) == 0,
                      "row %lld differs from the product at run time", (long long)v);
        tfvm_value_release(&got);
        tfvm_value_release(&want);
        tfvm_tensor_free(idx);
    }
    tfvm_tensor_free(E);
    tfvm_program_free(p);
    tfvm_program_free(q);
}
END_TEST

START_TEST(scan_reversed)
{
    tfvm_program *p = compile_ok(M "scan.onnx");
    tfvm_tensor *s0 = ftensor(1, (int64_t[]){2}, (float[]){0, 100});
    tfvm_tensor *x = ftensor(2, (int64_t[]){3, 2}, (float[]){1, 2, 3, 4, 5, 6});
    tfvm_value a[2] = {tfvm_tensor_value(s0), tfvm_tensor_value(x)}, r[2];
    for (int mode = 0; mode < 2; mode++) {
        run_main(p, a, 2, r, 2, mode);
        check_f32(&r[0], 1, (int64_t[]){2}, (float[]){9, 112});
        check_f32(&r[1], 2, (int64_t[]){3, 2}, (float[]){5, 106, 8, 110, 9, 112});
        tfvm_value_release(&r[0]);
        tfvm_value_release(&r[1]);
    }
    tfvm_tensor_free(s0);
    tfvm_tensor_free(x);
    tfvm_program_free(p);
}
END_TEST

START_TEST(external_data)
{
    tfvm_program *p = compile_ok(M "external.onnx");
    tfvm_tensor *x = ftensor(2, (int64_t[]){1, 2}, (float[]){1, 1});
    tfvm_value a = tfvm_tensor_value(x), r;
    run_main(p, &a, 1, &r, 1, 0);
    check_f32(&r, 2, (int64_t[]){1, 2}, (float[]){4, 6});
    tfvm_value_release(&r);
    tfvm_tensor_free(x);
    tfvm_program_free(p);

    tfvm_error err;
    ck_assert_int_eq(ou_compile(M "external_escape.onnx", NULL, &p, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, "external_escape.onnx: tensor 'W': external data location '../ext.bin' is "
                                  "outside the model's directory");
    /* bytes without a directory */
    char *data;
    size_t len;
    ck_assert_int_eq(ut_read_file(M "external.onnx", NULL, &data, &len, &err), TFVM_OK);
    isa_program ip;
    ck_assert_int_eq(imp_onnx(data, len, "m.onnx", NULL, 1, NULL, &ip, &err), TFVM_ERR_IO);
    ck_assert_str_eq(err.message, "m.onnx: tensor 'W': external data 'ext.bin' needs the model's directory (the "
                                  "model was given as bytes)");
    ut_free(NULL, data, len + 1);
}
END_TEST

START_TEST(unsupported_op)
{
    tfvm_program *p;
    tfvm_error err;
    ck_assert_int_eq(ou_compile(M "unsupported.onnx", NULL, &p, &err), TFVM_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.message, "unsupported.onnx: node 'bern0': op 'Bernoulli' (opset 17) is not supported");
    /* every unsupported node at once, subgraphs' too, before any is translated */
    ck_assert_int_eq(ou_compile(M "unsupported_many.onnx", NULL, &p, &err), TFVM_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.message, "unsupported_many.onnx: 3 nodes have ops that are not supported: node 'bern0': op "
                                  "'Bernoulli' (opset 17) is not supported; also node #1: RandomUniformLike (opset "
                                  "17), node 'noise': RandomNormalLike (opset 17)");
}
END_TEST

/* TorchScript's toks[step] = tok[0] in a scripted loop: ScatterND into a
 * buffer whose length is the run's n (make_torch_models.py; torch gives
 * [0, 1, 4, 6, 5] for n = 5) */
START_TEST(scripted_scatter)
{
    tfvm_program *p = compile_ok(M "scripted_scatter.onnx");
    int64_t xd[1] = {2}, xv[2] = {2, 5};
    tfvm_tensor *x = tfvm_tensor_new(TFVM_I64, 1, xd, NULL);
    memcpy(tfvm_tensor_data(x), xv, sizeof xv);
    static const struct { int64_t n; int64_t want[5]; } runs[] = {{5, {0, 1, 4, 6, 5}}, {3, {0, 1, 4}}, {1, {0}}};
    for (size_t i = 0; i < UT_COUNTOF(runs); i++)
        for (int mode = 0; mode < 2; mode++) {
            tfvm_value args[2] = {tfvm_tensor_value(x), tfvm_i64(runs[i].n)}, res;
            run_main(p, args, 2, &res, 1, mode);
            check_value(&res, TFVM_I64, 1, &runs[i].n, runs[i].want);
            tfvm_value_release(&res);
        }
    tfvm_tensor_free(x);
    tfvm_program_free(p);
}
END_TEST

/* uint64 in i64: division, remainder, logical shift, order and wrap of
 * values past 2^63, against C's own unsigned arithmetic */
START_TEST(u64_beyond_i64)
{
    tfvm_program *p = compile_ok(M "u64_ops.onnx");
    static const uint64_t a[4] = {UINT64_MAX, (UINT64_C(1) << 63) + 5, 10, UINT64_C(1) << 63};
    static const uint64_t b[4] = {3, (UINT64_C(1) << 63) + 1, UINT64_MAX - 1, 7}, s[4] = {1, 63, 0, 4};
    const int64_t d4 = 4;
    uint64_t q[4], r[4], sh[4], mx[4], sum[4];
    double f[4];
    bool lt[4];
    for (int i = 0; i < 4; i++) {
        q[i] = a[i] / b[i];
        r[i] = a[i] % b[i];
        sh[i] = a[i] >> s[i];
        lt[i] = a[i] < b[i];
        mx[i] = a[i] > b[i] ? a[i] : b[i];
        sum[i] = a[i] + b[i];
        f[i] = (double)a[i];
    }
    tfvm_tensor *t[3];
    const uint64_t *src[3] = {a, b, s};
    tfvm_value args[3], res[7];
    for (int k = 0; k < 3; k++) {
        t[k] = tfvm_tensor_new(TFVM_U64, 1, &d4, NULL);
        memcpy(tfvm_tensor_data(t[k]), src[k], sizeof a);
        args[k] = tfvm_tensor_value(t[k]);
    }
    run_main(p, args, 3, res, 7, 0);
    check_value(&res[0], TFVM_U64, 1, &d4, q);
    check_value(&res[1], TFVM_U64, 1, &d4, r);
    check_value(&res[2], TFVM_U64, 1, &d4, sh);
    check_value(&res[3], TFVM_BOOL, 1, &d4, lt);
    check_value(&res[4], TFVM_U64, 1, &d4, mx);
    check_value(&res[5], TFVM_U64, 1, &d4, sum);
    check_value(&res[6], TFVM_F64, 1, &d4, f);
    for (int k = 0; k < 7; k++)
        tfvm_value_release(&res[k]);
    for (int k = 0; k < 3; k++)
        tfvm_tensor_free(t[k]);
    tfvm_program_free(p);
}
END_TEST

/* main of p on the five tensors t (freed, as p) in both run modes: its two
 * results f32 of dims (rank 2), w0 and w1 */
static void run_two_f32(tfvm_program *p, tfvm_tensor **t, const int64_t *dims, const float *w0, const float *w1)
{
    tfvm_value args[5], res[2];
    for (int k = 0; k < 5; k++)
        args[k] = tfvm_tensor_value(t[k]);
    for (int mode = 0; mode < 2; mode++) {
        run_main(p, args, 5, res, 2, mode);
        check_f32(&res[0], 2, dims, w0);
        check_f32(&res[1], 2, dims, w1);
        tfvm_value_release(&res[0]);
        tfvm_value_release(&res[1]);
    }
    for (int k = 0; k < 5; k++)
        tfvm_tensor_free(t[k]);
    tfvm_program_free(p);
}

/* ScatterElements and ScatterND on data of symbolic dims ([n, m]): their
 * rows from the run-time shapes */
START_TEST(scatter_dynamic_shapes)
{
    tfvm_program *p = compile_ok(M "scatter_dynamic.onnx");
    const int64_t d23[2] = {2, 3}, d22[2] = {2, 2}, d2[1] = {2};
    static const float x[6] = {0, 1, 2, 3, 4, 5}, eu[4] = {10, 11, 12, 13}, nu[2] = {20, 21};
    static const int64_t ei[4] = {2, 0, -1, 1}, ni[4] = {1, 0, 0, 2};
    static const float e[6] = {11, 1, 10, 3, 13, 12}, s[6] = {0, 1, 21, 20, 4, 5};
    tfvm_tensor *t[5] = {ftensor(2, d23, x), tfvm_tensor_new(TFVM_I64, 2, d22, NULL), ftensor(2, d22, eu),
                         tfvm_tensor_new(TFVM_I64, 2, d22, NULL), ftensor(1, d2, nu)};
    memcpy(tfvm_tensor_data(t[1]), ei, sizeof ei);
    memcpy(tfvm_tensor_data(t[3]), ni, sizeof ni);
    run_two_f32(p, t, d23, e, s);
}
END_TEST

/* ScatterND and ScatterElements without a reduction on static dims: each
 * update row written once, in order (row 2 updated twice keeps the later,
 * as ONNX Runtime does), an update's inf or NaN in its own place only (the
 * one-hot product that lowered them had summed repeated rows and spread
 * 0 * inf = NaN over every row) */
/* ---- Normalizations against their spelled-out twins ----------------------------
 * Models whose outputs come in pairs: an op as the importer lowers it, then
 * the same computation spelled out in primitive ops; each pair must be
 * equal bit for bit. */
static uint32_t count_op(const tfvm_program *p, isa_op op)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->isa.n_insts; i++)
        n += p->isa.insts[i].op == op;
    return n;
}

/* path compiled without the optimizer (-O0) */
static tfvm_program *compile_o0(const char *path)
{
    setenv("TFVM_ONNX_OPT", "0", 1);
    tfvm_program *p = compile_ok(path);
    unsetenv("TFVM_ONNX_OPT");
    return p;
}

/* x[i] around base, every `every`-th element spread `wide` times wider (a
 * sum in another order rounds differently there) */
static void fill_noisy(float *x, int n, uint32_t r, float base, int every, float wide)
{
    for (int i = 0; i < n; i++) {
        r = r * 1103515245u + 12345u;
        x[i] = base + (float)(r >> 8) / (1 << 24) * (i % every == 0 ? wide : 1);
    }
}

/* Runs p on x deterministically and on 2 threads: each output pair equal;
 * the last deterministic results left in res */
static void twins_equal(tfvm_program *p, tfvm_tensor *x, tfvm_value *res, size_t n_res)
{
    const size_t bytes = (size_t)tfvm_tensor_count(x) * sizeof(float);
    tfvm_value arg = tfvm_tensor_value(x);
    for (int mode = 1; mode >= 0; mode--) {
        run_main(p, &arg, 1, res, n_res, mode);
        for (size_t k = 0; k < n_res; k += 2)
            ck_assert_msg(memcmp(tfvm_tensor_data(res[k].tensor), tfvm_tensor_data(res[k + 1].tensor), bytes) == 0,
                          "output %zu differs from its spelled-out twin (mode %d)", k, mode);
        for (size_t k = 0; mode && k < n_res; k++)
            tfvm_value_release(&res[k]);
    }
}

/* LayerNormalization is one LAYER_NORM, with and without a bias, and gives
 * the bits of the same normalization spelled out in primitive ops beside it
 * (rows of 11: the sums' eight lanes and a tail; a constant row whose
 * normalized zeros take the scale's signs, -0 kept where there is no bias) */
START_TEST(layer_norm_as_spelled)
{
    tfvm_program *p = compile_ok(M "layer_norm.onnx");
    ck_assert_uint_eq(count_op(p, ISA_LAYER_NORM), 2);
    float x[66];
    fill_noisy(x, 66, 7, 1000, 5, 40);
    for (int i = 0; i < 11; i++)
        x[i] = 3.25f;
    tfvm_tensor *t = ftensor(3, (int64_t[]){2, 3, 11}, x);
    tfvm_value res[4];
    twins_equal(p, t, res, 4);
    ck_assert(signbit(((const float *)tfvm_tensor_data(res[2].tensor))[0])); /* 0 * scale -1.5, no bias: -0 */
    for (int k = 0; k < 4; k++)
        tfvm_value_release(&res[k]);
    tfvm_tensor_free(t);
    tfvm_program_free(p);
}
END_TEST

/* InstanceNormalization normalizes with one LAYER_NORM (scale 1, bias -0)
 * and gives the bits of the ops it was lowered to before, spelled out
 * beside it in the model (rows of 20: the sums' eight lanes and a tail) */
START_TEST(instance_norm_as_spelled)
{
    tfvm_program *p = compile_ok(M "instance_norm.onnx");
    ck_assert_uint_eq(count_op(p, ISA_LAYER_NORM), 1);
    float x[120];
    fill_noisy(x, 120, 11, 500, 3, 30);
    tfvm_tensor *t = ftensor(4, (int64_t[]){2, 3, 4, 5}, x);
    tfvm_value res[2];
    twins_equal(p, t, res, 2);
    tfvm_value_release(&res[0]);
    tfvm_value_release(&res[1]);
    tfvm_tensor_free(t);
    tfvm_program_free(p);
}
END_TEST

/* 1-D convolutions take their bias and activation: Conv + bias + GELU
 * spelled out, and a bias-free Conv + Relu, are two FUSED_CONV2D (through
 * the SQUEEZE back to 1-D) with the bits of the program compiled -O0 */
START_TEST(conv1d_fused)
{
    tfvm_program *p = compile_ok(M "conv1d_act.onnx");
    ck_assert_uint_eq(count_op(p, ISA_FUSED_CONV2D), 2);
    ck_assert_uint_eq(count_op(p, ISA_ERF) + count_op(p, ISA_ADD) + count_op(p, ISA_MUL) + count_op(p, ISA_RELU) +
                          count_op(p, ISA_CONV2D),
                      0);
    tfvm_program *p0 = compile_o0(M "conv1d_act.onnx");
    const int64_t dims[3] = {1, 4, 9};
    float x[36];
    for (int i = 0; i < 36; i++)
        x[i] = (float)((i * 37) % 19 - 9) / 4;
    tfvm_tensor *t = ftensor(3, dims, x);
    tfvm_value arg = tfvm_tensor_value(t), a, b;
    run_main(p, &arg, 1, &a, 1, 0);
    run_main(p0, &arg, 1, &b, 1, 0);
    ck_assert_int_eq(tfvm_tensor_count(a.tensor), 20);
    ck_assert(memcmp(tfvm_tensor_data(a.tensor), tfvm_tensor_data(b.tensor), 20 * sizeof(float)) == 0);
    tfvm_value_release(&a);
    tfvm_value_release(&b);
    tfvm_tensor_free(t);
    tfvm_program_free(p0);
    tfvm_program_free(p);
}
END_TEST

/* A 3x3 layer dilated by 12 over 16x16 (DeepLabV3's ASPP) runs as one 1x1
 * product per tap over the positions it reads x for (compiler/opt.c's
 * split_taps_block): nine CONV2Ds, eight of them PADded (the middle tap
 * reads x everywhere), no 3x3 layer; the results those of -O0 within
 * 1e-5 of their size (the sums in another order), on 1 and 2 threads. */
START_TEST(dilated_taps_split)
{
    tfvm_program *p = compile_ok(M "aspp_dilated.onnx");
    uint32_t three = 0;
    for (uint32_t c = 0; c < p->isa.n_consts; c++)
        three += p->isa.consts[c].rank == 4 && p->isa.consts[c].dims[2] == 3;
    ck_assert_uint_eq(count_op(p, ISA_CONV2D) + count_op(p, ISA_FUSED_CONV2D) + count_op(p, ISA_FUSED_CONV2D_ADD), 9);
    ck_assert_uint_eq(count_op(p, ISA_PAD), 8);
    ck_assert_uint_eq(three, 0);
    tfvm_program *p0 = compile_o0(M "aspp_dilated.onnx");
    const int64_t dims[4] = {8, 32, 16, 16};
    static float x[8 * 32 * 16 * 16];
    fill_noisy(x, 8 * 32 * 16 * 16, 7, -0.5f, 5, 4.0f);
    tfvm_tensor *t = ftensor(4, dims, x);
    tfvm_value arg = tfvm_tensor_value(t), b;
    run_main(p0, &arg, 1, &b, 1, 0);
    const float *fb = tfvm_tensor_data(b.tensor);
    for (int mode = 0; mode <= 1; mode++) {
        tfvm_value a;
        run_main(p, &arg, 1, &a, 1, mode);
        ck_assert_int_eq(tfvm_tensor_count(a.tensor), 8 * 32 * 16 * 16);
        const float *fa = tfvm_tensor_data(a.tensor);
        for (int64_t j = 0; j < 8 * 32 * 16 * 16; j++)
            ck_assert_msg(fabsf(fa[j] - fb[j]) <= 1e-5f * (fabsf(fb[j]) + 1), "mode %d: element %lld is %g, want %g",
                          mode, (long long)j, (double)fa[j], (double)fb[j]);
        tfvm_value_release(&a);
    }
    tfvm_value_release(&b);
    tfvm_tensor_free(t);
    tfvm_program_free(p0);
    tfvm_program_free(p);
}
END_TEST

START_TEST(scatter_rows_in_order)
{
    tfvm_program *p = compile_ok(M "scatter_static.onnx");
    const int64_t d32[2] = {3, 2}, d31[2] = {3, 1}, d12[2] = {1, 2};
    static const float x[6] = {0, 1, 2, 3, 4, 5}, nu[6] = {10, 11, INFINITY, 13, 14, 15}, eu[2] = {20, NAN};
    static const int64_t ni[3] = {2, 0, 2}, ei[2] = {2, 0};
    static const float s[6] = {INFINITY, 13, 2, 3, 14, 15}, e[6] = {0, NAN, 2, 3, 20, 5};
    tfvm_tensor *t[5] = {ftensor(2, d32, x), tfvm_tensor_new(TFVM_I64, 2, d31, NULL), ftensor(2, d32, nu),
                         tfvm_tensor_new(TFVM_I64, 2, d12, NULL), ftensor(2, d12, eu)};
    memcpy(tfvm_tensor_data(t[1]), ni, sizeof ni);
    memcpy(tfvm_tensor_data(t[3]), ei, sizeof ei);
    run_two_f32(p, t, d32, s, e);
}
END_TEST

/* ScatterND of one element (an index tuple as long as data's rank) into data
 * of symbolic dims: one STACK_PUT on the data flattened, the shape put back;
 * a negative index counts from the end */
START_TEST(scatter_one_element)
{
    tfvm_program *p = compile_ok(M "scatter_one.onnx");
    const int64_t d23[2] = {2, 3}, d12[2] = {1, 2}, d1[1] = {1};
    static const float x[6] = {0, 1, 2, 3, 4, 5}, u[1] = {9};
    static const struct {
        int64_t at[2];
        float want[6];
    } cases[] = {{{1, 2}, {0, 1, 2, 3, 4, 9}}, {{0, 0}, {9, 1, 2, 3, 4, 5}}, {{-1, -3}, {0, 1, 2, 9, 4, 5}}};
    /* the caller's x is never written: the same tensor serves every run */
    tfvm_tensor *t[3] = {ftensor(2, d23, x), tfvm_tensor_new(TFVM_I64, 2, d12, NULL), ftensor(1, d1, u)};
    for (size_t c = 0; c < UT_COUNTOF(cases); c++)
        for (int mode = 0; mode < 2; mode++) {
            memcpy(tfvm_tensor_data(t[1]), cases[c].at, sizeof cases[c].at);
            tfvm_value args[3], res;
            for (int k = 0; k < 3; k++)
                args[k] = tfvm_tensor_value(t[k]);
            run_main(p, args, 3, &res, 1, mode);
            check_f32(&res, 2, d23, cases[c].want);
            tfvm_value_release(&res);
            ck_assert(memcmp(tfvm_tensor_cdata(t[0]), x, sizeof x) == 0);
        }
    for (int k = 0; k < 3; k++)
        tfvm_tensor_free(t[k]);
    tfvm_program_free(p);
}
END_TEST

typedef struct released {
    char *data;
    size_t len;
    int calls;
} released;

static void release_bytes(void *ctx)
{
    released *r = ctx;
    if (r->data) /* poisoned first: a read after the release shows */
        memset(r->data, 0xA5, r->len);
    ut_free(NULL, r->data, r->len + 1);
    r->data = NULL;
    r->calls++;
}

START_TEST(truncated_and_garbage)
{
    char *data;
    size_t len;
    tfvm_error err;
    ck_assert_int_eq(ut_read_file(M "mlp.onnx", NULL, &data, &len, &err), TFVM_OK);
    isa_program ip;
    ck_assert_int_eq(imp_onnx(data, len - 7, "model.onnx", ".", 1, NULL, &ip, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message,
                     "model.onnx: bad .onnx file (not a valid ModelProto: truncated or corrupt protobuf)");
    ck_assert_int_eq(imp_onnx("garbage!", 8, "g.onnx", ".", 1, NULL, &ip, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, "g.onnx: bad .onnx file (not a valid ModelProto: truncated or corrupt protobuf)");
    /* an empty message is a valid ModelProto without a graph */
    ck_assert_int_eq(imp_onnx("", 0, "e.onnx", ".", 1, NULL, &ip, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, "e.onnx: bad .onnx file (no graph)");
    /* the bytes released once, as soon as they are parsed (freed here: the
     * program is built from the parsed copy), or on an error */
    released r = {data, len, 0};
    ck_assert_int_eq(imp_onnx_release(data, len, (imp_release){release_bytes, &r}, "model.onnx", ".", 1, NULL, &ip,
                                      &err),
                     TFVM_OK);
    ck_assert_int_eq(r.calls, 1);
    ck_assert_ptr_null(r.data);
    isa_program_release(&ip);
    r = (released){NULL, 0, 0};
    ck_assert_int_eq(imp_onnx_release("garbage!", 8, (imp_release){release_bytes, &r}, "g.onnx", ".", 1, NULL, &ip,
                                      &err),
                     TFVM_ERR_FORMAT);
    ck_assert_int_eq(r.calls, 1);
}
END_TEST

/* The composite activations (compiler/decomp.h) against onnxruntime on
 * extreme inputs (test/onnx/make_act_models.py made act_extreme.out.npy with
 * it): within 1e-6 + 1e-5 |want| (ORT gets exp(x) right below -17 where
 * Softplus's stable form rounds to 0), NaN for NaN, infinities exactly;
 * except where ORT gives NaN and the limit exists: we give the limit. */
START_TEST(activations_match_ort)
{
    static const struct {
        const char *output;
        float x, want;
    } limits[] = {
        {"softsign", -INFINITY, -1}, {"softsign", INFINITY, 1}, {"mish", -INFINITY, 0},
    };
    tfvm_program *p = compile_ok(M "act_extreme.onnx");
    tfvm_tensor *x, *want;
    tfvm_error err;
    ck_assert_msg(tfvm_npy_load(M "act_extreme.in.npy", NULL, &x, &err) == TFVM_OK, "%s", err.message);
    ck_assert_msg(tfvm_npy_load(M "act_extreme.out.npy", NULL, &want, &err) == TFVM_OK, "%s", err.message);
    const isa_entry *e = &p->isa.entries[0];
    int64_t n = tfvm_tensor_count(x);
    ck_assert_int_eq(tfvm_tensor_rank(want), 2);
    ck_assert_int_eq(tfvm_tensor_dims(want)[0], e->n_results);
    ck_assert_int_eq(tfvm_tensor_dims(want)[1], n);
    tfvm_value a = tfvm_tensor_value(x), r[16];
    ck_assert_uint_le(e->n_results, 16);
    run_main(p, &a, 1, r, e->n_results, 0);
    const float *xs = tfvm_tensor_cdata(x), *ws = tfvm_tensor_cdata(want);
    for (uint32_t k = 0; k < e->n_results; k++) {
        const char *name = e->results[k].name;
        ck_assert_msg(r[k].tensor && tfvm_tensor_count(r[k].tensor) == n, "%s: not %lld elements", name,
                      (long long)n);
        const float *got = tfvm_tensor_cdata(r[k].tensor);
        for (int64_t i = 0; i < n; i++) {
            float w = ws[k * n + i];
            for (size_t j = 0; j < UT_COUNTOF(limits); j++)
                if (strcmp(limits[j].output, name) == 0 && limits[j].x == xs[i]) {
                    ck_assert_msg(isnan(w), "%s at %g: ORT now gives %g, not NaN", name, xs[i], w);
                    w = limits[j].want;
                }
            bool ok = isnan(w) ? isnan(got[i]) : isinf(w) ? got[i] == w : fabsf(got[i] - w) <= 1e-6f + 1e-5f * fabsf(w);
            ck_assert_msg(ok, "%s at x = %.9g: got %.9g, ORT %.9g", name, xs[i], got[i], w);
        }
        tfvm_value_release(&r[k]);
    }
    tfvm_tensor_free(x);
    tfvm_tensor_free(want);
    tfvm_program_free(p);
}
END_TEST

START_TEST(nomem_at_every_allocation)
{
    static const char *const models[] = {M "mlp.onnx", M "loop_scan.onnx", M "if_in_loop.onnx", M "external.onnx",
                                         M "reshape_chain.onnx", M "scan.onnx", M "cnn.onnx"};
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
    Suite *s = suite_create("onnx");
    TCase *tc = tcase_create("onnx");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, mlp);
    tcase_add_test(tc, cnn);
    tcase_add_test(tc, stacked_lstm_shapes_folded);
    tcase_add_test(tc, stacked_layers_chained);
    tcase_add_test(tc, embedding_product_rows);
    tcase_add_test(tc, if_branches);
    tcase_add_test(tc, loop_scalar_100);
    tcase_add_test(tc, loop_scan_outputs);
    tcase_add_test(tc, loop_in_loop);
    tcase_add_test(tc, if_in_loop);
    tcase_add_test(tc, loop_in_if);
    tcase_add_test(tc, shape_chain_folded);
    tcase_add_test(tc, scan_reversed);
    tcase_add_test(tc, external_data);
    tcase_add_test(tc, unsupported_op);
    tcase_add_test(tc, scripted_scatter);
    tcase_add_test(tc, u64_beyond_i64);
    tcase_add_test(tc, scatter_dynamic_shapes);
    tcase_add_test(tc, scatter_rows_in_order);
    tcase_add_test(tc, layer_norm_as_spelled);
    tcase_add_test(tc, conv1d_fused);
    tcase_add_test(tc, dilated_taps_split);
    tcase_add_test(tc, instance_norm_as_spelled);
    tcase_add_test(tc, scatter_one_element);
    tcase_add_test(tc, truncated_and_garbage);
    tcase_add_test(tc, activations_match_ort);
    tcase_add_test(tc, nomem_at_every_allocation);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
