/* test/unit/test_isa.c — the op table is the single source of truth: its
 * generated pieces agree with each other and with docs/isa.md. */
#include <stdio.h>
#include <string.h>

#include "isa/isa.h"
#include "testutil.h"

static const char *class_name(isa_class c)
{
    static const char *const names[] = {"source", "sink", "control", "binary", "unary", "compare", "logic", "select", "tensor"};
    return names[c];
}

static const char *attr_name(isa_attr a)
{
    static const char *const names[] = {"", "k", "c", "f [const] [parallel=N]", "f", "s", "dtype", "axis=N", "options", "op c"};
    return names[a];
}

/* The table docs/isa.md must contain, rendered from ops.def. */
static void render_table(ut_buf *b)
{
    ut_buf_printf(b, "| op | class | inputs | outputs | attributes | meaning |\n");
    ut_buf_printf(b, "|---|---|---|---|---|---|\n");
    for (int i = 0; i < ISA_OP_COUNT; i++) {
        const isa_op_info *o = &isa_ops[i];
        char in[16];
        if (o->n_in < 0)
            snprintf(in, sizeof in, "n");
        else
            snprintf(in, sizeof in, "%d", o->n_in);
        ut_buf_printf(b, "| %s | %s | %s | %d | %s | %s |\n", o->name, class_name(o->cls), in, o->n_out,
                      attr_name(o->attr), o->synopsis);
    }
    ut_buf_append(b, "", 1);
}

START_TEST(names_round_trip)
{
    for (int i = 0; i < ISA_OP_COUNT; i++)
        ck_assert_int_eq(isa_op_by_name(isa_ops[i].name, strlen(isa_ops[i].name)), i);
    ck_assert_int_eq(isa_op_by_name("NOPE", 4), -1);
    for (int d = TFVM_BOOL; d <= TFVM_F64; d++) {
        const char *n = tfvm_dtype_name((tfvm_dtype)d);
        ck_assert_int_eq(isa_dtype_by_name(n, strlen(n)), d);
    }
    ck_assert_int_eq(isa_dtype_by_name("f16", 3), 0);
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
    if (!strstr(doc, (const char *)b.data))
        ck_abort_msg("docs/isa.md does not contain the op table generated from isa/ops.def; "
                     "replace its table with:\n%s",
                     (const char *)b.data);
    free(doc);
    ut_buf_free(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("isa");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, names_round_trip);
    tcase_add_test(tc, docs_table_matches_ops_def);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
