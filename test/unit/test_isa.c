/* test/unit/test_isa.c — the op table is the single source of truth: its
 * generated pieces agree with each other and with docs/isa.md. */
#include <stdio.h>
#include <string.h>

#include "isa/isa.h"
#include "testutil.h"

static const char *class_name(isa_class c)
{
    static const char *const names[] = {"source", "sink", "control", "host", "binary", "unary", "compare", "logic", "select", "tensor"};
    return names[c];
}

static const char *attr_name(isa_attr a)
{
    static const char *const names[] = {"", "k", "c", "f [const] [parallel=N]", "f", "s", "dtype", "axis=N", "options", "op c", "\"name\" [T]"};
    return names[a];
}

/* The table docs/isa.md must contain, rendered from ops.def: the columns in
 * ops.def's order and spelling; NONE results, NO failures and NONE kernels
 * are left blank. */
static void render_table(ut_buf *b)
{
    ut_buf_printf(b, "| op | class | inputs | outputs | attributes | types | result | fails | cuda | meaning |\n");
    ut_buf_printf(b, "|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < ISA_OP_COUNT; i++) {
        const isa_op_info *o = &isa_ops[i];
        char in[16];
        if (o->n_in < 0)
            snprintf(in, sizeof in, "n");
        else
            snprintf(in, sizeof in, "%d", o->n_in);
        ut_buf_printf(b, "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", o->name, class_name(o->cls), in,
                      o->n_out, attr_name(o->attr), isa_types_name(o->types),
                      o->result == ISA_RESULT_NONE ? "" : isa_result_name(o->result),
                      o->fails == ISA_FAILS_NO ? "" : isa_fails_name(o->fails),
                      strcmp(o->cuda, "NONE") == 0 ? "" : o->cuda, o->synopsis);
    }
    ut_buf_append(b, "", 1);
}

START_TEST(names_round_trip)
{
    for (int i = 0; i < ISA_OP_COUNT; i++)
        ck_assert_int_eq(isa_op_by_name(isa_ops[i].name, strlen(isa_ops[i].name)), i);
    ck_assert_int_eq(isa_op_by_name("NOPE", 4), -1);
    for (int d = TFVM_BOOL; d <= ISA_DTYPE_LAST; d++) {
        const char *n = tfvm_dtype_name((tfvm_dtype)d);
        ck_assert_int_eq(isa_dtype_by_name(n, strlen(n)), d);
        ck_assert(isa_dtype_valid((uint32_t)d));
    }
    ck_assert_int_eq(isa_dtype_by_name("c64", 3), 0);
    ck_assert(!isa_dtype_valid(0));
    ck_assert(!isa_dtype_valid(ISA_DTYPE_LAST + 1));
    ck_assert_str_eq(tfvm_dtype_name(TFVM_U8), "u8");
    ck_assert_str_eq(tfvm_dtype_name(TFVM_I8), "i8");
    ck_assert_str_eq(tfvm_dtype_name(TFVM_BF16), "bf16");
    ck_assert_str_eq(tfvm_dtype_name((tfvm_dtype)14), "?");
    ck_assert_uint_eq(tfvm_dtype_size(TFVM_U8), 1);
    ck_assert_uint_eq(tfvm_dtype_size(TFVM_I8), 1);
    ck_assert_uint_eq(tfvm_dtype_size(TFVM_F16), 2);
    ck_assert_uint_eq(tfvm_dtype_size(TFVM_U64), 8);
    ck_assert_uint_eq(tfvm_dtype_size((tfvm_dtype)14), 0);
}
END_TEST

/* The facts of each row agree with each other (what consumers rely on). */
START_TEST(rows_are_consistent)
{
    for (int i = 0; i < ISA_OP_COUNT; i++) {
        const isa_op_info *o = &isa_ops[i];
        const char *n = o->name;
        ck_assert_msg(strcmp(isa_types_name(o->types), "?") != 0, "%s: an unnamed dtype set", n);
        ck_assert_msg((o->types & ~(uint32_t)ISA_TYPES_ANY) == 0 && o->types, "%s: bad dtype set", n);
        const bool compute = isa_is_compute(o->cls), tensor = o->cls == ISA_CLASS_TENSOR;
        /* only instructions that make values from nothing have no result rule */
        ck_assert_msg((o->result == ISA_RESULT_NONE) ==
                          (o->cls == ISA_CLASS_SOURCE || o->cls == ISA_CLASS_SINK || i == ISA_FEED),
                      "%s: result %s", n, isa_result_name(o->result));
        if (o->cls == ISA_CLASS_COMPARE || o->cls == ISA_CLASS_LOGIC)
            ck_assert_msg(o->result == ISA_RESULT_BOOL, "%s: a %s gives bool", n, class_name(o->cls));
        if (o->cls == ISA_CLASS_LOGIC)
            ck_assert_msg(o->types == ISA_TYPES_BOOL, "%s: logic takes bool", n);
        if (o->result == ISA_RESULT_ATTR)
            ck_assert_msg(o->attr == ISA_ATTR_DTYPE, "%s: result ATTR needs a dtype attribute", n);
        if (o->result == ISA_RESULT_IN1 || o->result == ISA_RESULT_IN2)
            ck_assert_msg(o->n_in > (o->result == ISA_RESULT_IN1 ? 1 : 2), "%s: result %s of %d inputs", n,
                          isa_result_name(o->result), o->n_in);
        /* fails: control never fails; tensor ops always may; DIV0/NEGEXP read
         * operand b of an op that takes integers */
        if (!compute)
            ck_assert_msg(o->fails == (o->cls == ISA_CLASS_HOST ? ISA_FAILS_YES : ISA_FAILS_NO),
                          "%s: a control instruction that fails, or a host one that cannot", n);
        if (tensor)
            ck_assert_msg(o->fails == ISA_FAILS_YES, "%s: tensor ops may fail on shapes", n);
        if (o->fails == ISA_FAILS_DIV0 || o->fails == ISA_FAILS_NEGEXP)
            ck_assert_msg(o->n_in == 2 && (o->types & ISA_TYPES_INT), "%s: %s needs integer operands a, b", n,
                          isa_fails_name(o->fails));
        if (o->fails == ISA_FAILS_F2I)
            ck_assert_msg(o->result == ISA_RESULT_ATTR, "%s: F2I is CAST's", n);
        /* a CUDA kernel: an elementwise one of one or two inputs, GEMM, CAST's,
         * or a tensor kernel (devices/cuda/cuda.c) */
        static const char *const tensor_kernels[] = {"CONV", "POOL", "REDUCE", "SOFTMAX", "COPY", "GATHER", "LAYER_NORM"};
        bool tensor_kernel = false;
        for (size_t k = 0; k < UT_COUNTOF(tensor_kernels); k++)
            tensor_kernel |= strcmp(o->cuda, tensor_kernels[k]) == 0;
        if (strcmp(o->cuda, "NONE") != 0) {
            ck_assert_msg(compute, "%s: a control instruction on CUDA", n);
            if (strcmp(o->cuda, "GEMM") == 0)
                ck_assert_msg(i == ISA_MATMUL || i == ISA_FUSED_MATMUL, "%s: GEMM is MATMUL's", n);
            else if (strcmp(o->cuda, "CAST") == 0)
                ck_assert_msg(i == ISA_CAST, "%s: CAST is CAST's", n);
            else if (tensor_kernel)
                ck_assert_msg(tensor, "%s: the CUDA tensor kernels are for tensor ops", n);
            else
                ck_assert_msg(!tensor && (o->n_in == 1 || o->n_in == 2) && o->attr == ISA_ATTR_NONE,
                              "%s: CUDA elementwise kernels take one or two operands and no attribute", n);
        }
    }
}
END_TEST

START_TEST(docs_table_matches_ops_def)
{
    ut_buf b;
    ut_buf_init(&b, NULL);
    render_table(&b);
    char *doc;
    size_t len;
    tfvm_error err;
    ck_assert_msg(ut_read_file("docs/isa.md", NULL, &doc, &len, &err) == TFVM_OK, "%s", err.message);
    if (!strstr(doc, (const char *)b.data)) {
        /* the table is longer than a Check message may be */
        printf("%s", (const char *)b.data);
        ck_abort_msg("docs/isa.md does not contain the op table generated from isa/ops.def; "
                     "replace its table with the one printed above");
    }
    free(doc);
    ut_buf_free(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("isa");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, names_round_trip);
    tcase_add_test(tc, rows_are_consistent);
    tcase_add_test(tc, docs_table_matches_ops_def);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
