/* test/unit/test_build.c — the IR builder that the importers use
 * (compiler/build.h): loops, branches and recursive calls built without
 * source run as the .tfg compiler's own would. */
#include <string.h>

#include "compiler/build.h"
#include "testutil.h"

static tfvm_status run1(const isa_program *ip, tfvm_value arg, tfvm_value *res)
{
    tfvm_program *p = calloc(1, sizeof *p);
    p->isa = *ip;
    /* a bare wrapper: entries are read by the VM from isa */
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.deterministic = true;
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    tfvm_status st = tfvm_run(vm, NULL, &arg, 1, res, 1);
    tfvm_vm_free(vm);
    free(p);
    return st;
}

/* sum(n) = 0 + 1 + ... + (n - 1), as a While */
static cc_ifn *sum_loop(cc *C, void *ud)
{
    (void)ud;
    cc_vtype i64 = cc_scalar_t(TFVM_I64);
    const char *pn[] = {"n"};
    cc_ifn *f = cc_func_new(C, "sum", 1, pn, &i64, 1, NULL, &i64);
    cc_blk *top = cc_fn_top(f);
    cc_irval init[2] = {cc_const_scalar(C, top, TFVM_I64, 0, 0), cc_const_scalar(C, top, TFVM_I64, 0, 0)};
    cc_vtype ts[2] = {i64, i64};
    const char *names[] = {"i", "s"};
    cc_node *w = cc_while_new(C, top, 2, init, ts, names, "loop");
    cc_irval lt[2] = {cc_lvar(w, 0), cc_param_val(f, 0)};
    cc_irval cond = cc_op_new(C, w->u.loop.head, ISA_LESS, 0, 2, lt, cc_scalar_t(TFVM_BOOL), NULL);
    cc_block_results(C, w->u.loop.head, 1, &cond);
    cc_blk *body = w->u.loop.body;
    cc_irval one = cc_const_scalar(C, body, TFVM_I64, 1, 1);
    cc_irval a[2] = {cc_lvar(w, 0), one}, b[2] = {cc_lvar(w, 1), cc_lvar(w, 0)};
    cc_irval next[2] = {cc_op_new(C, body, ISA_ADD, 0, 2, a, i64, NULL), cc_op_new(C, body, ISA_ADD, 0, 2, b, i64, NULL)};
    cc_block_results(C, body, 2, next);
    cc_irval r = cc_out(w, 1);
    cc_block_results(C, top, 1, &r);
    return f;
}

/* fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2), an If and two recursive calls */
static cc_ifn *fib(cc *C, void *ud)
{
    (void)ud;
    cc_vtype i32 = cc_scalar_t(TFVM_I32);
    const char *pn[] = {"n"};
    cc_ifn *f = cc_func_new(C, "fib", 1, pn, &i32, 1, NULL, &i32);
    cc_blk *top = cc_fn_top(f);
    cc_irval n = cc_param_val(f, 0);
    cc_irval lt[2] = {n, cc_const_scalar(C, top, TFVM_I32, 2, 2)};
    cc_irval c = cc_op_new(C, top, ISA_LESS, 0, 2, lt, cc_scalar_t(TFVM_BOOL), NULL);
    cc_node *x = cc_if_new(C, top, c, 1, &i32, NULL);
    cc_block_results(C, x->u.cond.then, 1, &n);
    cc_blk *e = x->u.cond.els;
    cc_irval m1[2] = {n, cc_const_scalar(C, e, TFVM_I32, 1, 1)}, m2[2] = {n, cc_const_scalar(C, e, TFVM_I32, 2, 2)};
    cc_irval a1 = cc_op_new(C, e, ISA_SUB, 0, 2, m1, i32, NULL), a2 = cc_op_new(C, e, ISA_SUB, 0, 2, m2, i32, NULL);
    cc_irval s[2] = {cc_out(cc_call_new(C, e, f, &a1), 0), cc_out(cc_call_new(C, e, f, &a2), 0)};
    cc_irval r = cc_op_new(C, e, ISA_ADD, 0, 2, s, i32, NULL);
    cc_block_results(C, e, 1, &r);
    r = cc_out(x, 0);
    cc_block_results(C, top, 1, &r);
    return f;
}

static cc_ifn *fails(cc *C, void *ud)
{
    (void)ud;
    cc_error(C, (cc_pos){0, 0}, TFVM_ERR_UNSUPPORTED, "node 'x': op 'Foo' (opset 13) is not supported");
}

START_TEST(loop_runs)
{
    for (int opt = 0; opt <= 1; opt++) {
        isa_program p;
        tfvm_error err;
        ck_assert_int_eq(cc_build_program("sum", NULL, opt, sum_loop, NULL, &p, &err), TFVM_OK);
        tfvm_value r;
        ck_assert_int_eq(run1(&p, tfvm_i64(100000), &r), TFVM_OK);
        ck_assert_int_eq(r.as.i64, 4999950000LL);
        isa_program_release(&p);
    }
}
END_TEST

START_TEST(recursion_runs)
{
    for (int opt = 0; opt <= 1; opt++) {
        isa_program p;
        tfvm_error err;
        ck_assert_int_eq(cc_build_program("fib", NULL, opt, fib, NULL, &p, &err), TFVM_OK);
        tfvm_value r;
        ck_assert_int_eq(run1(&p, tfvm_i32(20), &r), TFVM_OK);
        ck_assert_int_eq(r.as.i32, 6765);
        isa_program_release(&p);
    }
}
END_TEST

START_TEST(errors_unwind)
{
    isa_program p;
    tfvm_error err;
    ck_assert_int_eq(cc_build_program("m.onnx", NULL, 1, fails, NULL, &p, &err), TFVM_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.message, "m.onnx: node 'x': op 'Foo' (opset 13) is not supported");
}
END_TEST

START_TEST(nomem_at_every_allocation)
{
    for (long n = 0;; n++) {
        tu_alloc ta = {.countdown = n};
        tfvm_allocator a = tu_allocator(&ta);
        isa_program p;
        tfvm_error err;
        tfvm_status st = cc_build_program("fib", &a, 1, fib, NULL, &p, &err);
        if (st == TFVM_OK) {
            isa_program_release(&p);
            ck_assert_int_eq(ta.live, 0);
            break;
        }
        ck_assert_int_eq(st, TFVM_ERR_NOMEM);
        ck_assert_int_eq(ta.live, 0);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("build");
    TCase *tc = tcase_create("build");
    tcase_add_test(tc, loop_runs);
    tcase_add_test(tc, recursion_runs);
    tcase_add_test(tc, errors_unwind);
    tcase_add_test(tc, nomem_at_every_allocation);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
