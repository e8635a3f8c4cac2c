/* test/unit/test_vm_stress.c — stress and corner cases of the VM core: context
 * lifetimes (calls, loop instances, late ENTERs, the parallel bound), deadness
 * through loops and calls, tensors through loops and calls (no reference may
 * leak), errors deep in a recursion, interrupts, reuse, limits and allocation
 * failure. Every run checks that a finished run leaves no context behind. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "tfvm.h"
#include "vm/vm.h"

/* ---- One program and one VM on a counting allocator -------------------------
 * Every VM, program and tensor of this suite allocates through tu_alloc_fn
 * (testutil.h), so "no bytes live after everything was freed" means no
 * context, loop or tensor reference leaked. */
typedef struct env {
    tu_alloc mem;
    tfvm_config cfg;
    tfvm_program *p;
    tfvm_vm *vm;
} env;

static void env_open(env *e, const char *text, uint64_t max_contexts)
{
    memset(e, 0, sizeof *e);
    e->mem.countdown = -1;
    tfvm_config_init(&e->cfg);
    e->cfg.allocator = tu_allocator(&e->mem);
    e->cfg.max_contexts = max_contexts;
    e->cfg.deterministic = true; /* these tests inspect states and firing orders */
    tfvm_error err;
    tfvm_status st = tfvm_program_assemble(text, strlen(text), "t.tfasm", &e->cfg, &e->p, &err);
    ck_assert_msg(st == TFVM_OK, "assemble: %s", err.message);
    ck_assert_int_eq(tfvm_vm_new(e->p, &e->cfg, &e->vm), TFVM_OK);
}

static void env_close(env *e)
{
    tfvm_vm_free(e->vm);
    tfvm_program_free(e->p);
    ck_assert_msg(e->mem.live == 0, "%ld bytes leaked", e->mem.live);
}

static tfvm_tensor *tensor_f64(env *e, int64_t n, const double *v)
{
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F64, 1, &n, &e->cfg.allocator);
    ck_assert_ptr_nonnull(t);
    memcpy(tfvm_tensor_data(t), v, (size_t)n * sizeof *v);
    return t;
}

static tfvm_tensor *tensor_i64(env *e, int64_t n, const int64_t *v)
{
    tfvm_tensor *t = tfvm_tensor_new(TFVM_I64, 1, &n, &e->cfg.allocator);
    ck_assert_ptr_nonnull(t);
    memcpy(tfvm_tensor_data(t), v, (size_t)n * sizeof *v);
    return t;
}

static uint64_t live_contexts(const tfvm_vm *vm)
{
    uint64_t c, l;
    vm_count_live(vm, &c, &l);
    return c;
}

static uint64_t live_loops(const tfvm_vm *vm)
{
    uint64_t c, l;
    vm_count_live(vm, &c, &l);
    return l;
}

/* Runs the first entry like tfvm_run, through the resumable API so that the
 * quiescent state can be inspected: when every result arrived live, the only
 * context left must be the root, held once (by the run itself), and no loop
 * instance may be left. Afterwards no context at all may be live. */
static tfvm_status run(env *e, const tfvm_value *args, size_t n_args, tfvm_value *res, size_t n_res)
{
    tfvm_vm *vm = e->vm;
    ck_assert_uint_eq(vm->prog->entries[0].n_results, n_res);
    tfvm_status st = vm_begin(vm, 0, args, n_args);
    if (st != TFVM_OK) {
        vm_end(vm, NULL, 0);
        return st;
    }
    vm_state s = vm_step(vm, 0);
    if (s == VM_DONE) {
        bool all_live = true;
        for (size_t k = 0; k < n_res; k++)
            all_live &= vm->results[k].dtype != 0 && !vm->results[k].dead;
        if (all_live) {
            ck_assert_msg(live_contexts(vm) == 1, "%llu contexts alive at quiescence",
                          (unsigned long long)live_contexts(vm));
            ck_assert_uint_eq(atomic_load(&vm->root->refs), 1);
            ck_assert_uint_eq(live_loops(vm), 0);
        }
    }
    st = vm_end(vm, res, n_res);
    ck_assert_uint_eq(live_contexts(vm), 0);
    ck_assert_uint_eq(live_loops(vm), 0);
    return st;
}

static tfvm_status run1(env *e, tfvm_value arg, tfvm_value *res)
{
    return run(e, &arg, 1, res, 1);
}

static void expect_msg(env *e, tfvm_status got, tfvm_status want, const char *msg)
{
    ck_assert_msg(got == want, "status %s, want %s (%s)", tfvm_status_name(got), tfvm_status_name(want),
                  tfvm_errmsg(e->vm));
    ck_assert_str_eq(tfvm_errmsg(e->vm), msg);
}

static tfvm_stats stats(env *e)
{
    tfvm_stats s;
    tfvm_vm_stats(e->vm, &s);
    return s;
}

/* ---- Programs ------------------------------------------------------------------ */

/* fib(n) = 1 if n <= 1 else fib(n - 1) + fib(n - 2) */
#define FIB_FUNC(CALLER)                                                                              \
    "func fib {\n"                                                                                    \
    "    n    = IDENTITY (" CALLER " | c1 | c2)\n"                                                    \
    "    one  = CONST i32 1 [n]\n"                                                                    \
    "    two  = CONST i32 2 [n]\n"                                                                    \
    "    le   = LESS_EQUAL (n, one)\n"                                                                \
    "    sn   = SWITCH (n, le)\n"                                                                     \
    "    base = CONST i32 1 [sn:1]\n"                                                                 \
    "    n1   = SUB (sn:0, one)\n"                                                                    \
    "    c1   = CALL fib@1 (n1)\n"                                                                    \
    "    n2   = SUB (sn:0, two)\n"                                                                    \
    "    c2   = CALL fib@2 (n2)\n"                                                                    \
    "    r1   = RETURN fib@1 (res)\n"                                                                 \
    "    r2   = RETURN fib@2 (res)\n"                                                                 \
    "    sum  = ADD (r1, r2)\n"                                                                       \
    "    res  = MERGE (base, sum)\n"                                                                  \
    "}\n"

static const char *FIB = "entry main(n: i32) -> (r: i32) {\n"
                         "    a    = ARG 0\n"
                         "    c    = CALL fib@0 (a)\n"
                         "    r    = RETURN fib@0 (fib.res)\n"
                         "           RESULT 0 (r)\n"
                         "}\n" FIB_FUNC("main.c");

static int32_t fib_ref(int n) { return n <= 1 ? 1 : fib_ref(n - 1) + fib_ref(n - 2); }

/* 1 + ... + n; %s = options of the first ENTER */
static const char *SUM_LOOP = "entry main(n: i64) -> (s: i64) {\n"
                              "    n     = ARG 0\n"
                              "    zero  = CONST i64 0\n"
                              "    one   = CONST i64 1\n"
                              "    ei    = ENTER lp%s (one)\n"
                              "    es    = ENTER lp (zero)\n"
                              "    en    = ENTER lp const (n)\n"
                              "    e1    = ENTER lp const (one)\n"
                              "            RESULT 0 (lp.out)\n"
                              "}\n"
                              "loop lp in main {\n"
                              "    i    = MERGE (ei, ni)\n"
                              "    s    = MERGE (es, ns)\n"
                              "    p    = LESS_EQUAL (i, en)\n"
                              "    c    = LOOPCOND (p)\n"
                              "    si   = SWITCH (i, c)\n"
                              "    ss   = SWITCH (s, c)\n"
                              "    i2   = ADD (si:1, e1)\n"
                              "    s2   = ADD (ss:1, si:1)\n"
                              "    ni   = NEXTITER (i2)\n"
                              "    ns   = NEXTITER (s2)\n"
                              "    out  = EXIT lp (ss:0)\n"
                              "}\n";

/* ---- Recursion and long loops: memory follows live work ------------------------ */

START_TEST(fib25_peak_in_the_tens)
{
    env e;
    env_open(&e, FIB, 0);
    tfvm_value r;
    ck_assert_int_eq(run1(&e, tfvm_i32(25), &r), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 121393);
    tfvm_stats s = stats(&e);
    ck_assert_uint_gt(s.contexts_created, 200000);
    ck_assert_uint_le(s.contexts_peak, 60);
    env_close(&e);
}
END_TEST

START_TEST(million_iterations_bounded)
{
    char text[2048];
    snprintf(text, sizeof text, SUM_LOOP, " parallel=3");
    env e;
    env_open(&e, text, 0);
    tfvm_value r;
    ck_assert_int_eq(run1(&e, tfvm_i64(1000000), &r), TFVM_OK);
    ck_assert_int_eq(r.as.i64, 500000500000LL);
    tfvm_stats s = stats(&e);
    ck_assert_uint_eq(s.contexts_created, 1 + 1000001);
    ck_assert_uint_le(s.contexts_peak, 1 + 3);
    env_close(&e);
}
END_TEST

/* ---- Late ENTERs ---------------------------------------------------------------
 * The ENTER const `ek` is fed from the loop's own EXIT of the i chain, so it
 * arrives after every iteration has started: n iterations wait for it (held
 * by iteration 0, which is held until every ENTER arrived). s = n * n^2. */
static const char *LATE_CONST = "entry main(n: i64) -> (s: i64, k: i64) {\n"
                                "    n    = ARG 0\n"
                                "    zero = CONST i64 0\n"
                                "    ei   = ENTER lp%s (zero)\n"
                                "    es   = ENTER lp (zero)\n"
                                "    en   = ENTER lp const (n)\n"
                                "    k    = MUL (lp.iout, lp.iout)\n"
                                "    ek   = ENTER lp const (k)\n"
                                "           RESULT 0 (lp.sout)\n"
                                "           RESULT 1 (k)\n"
                                "}\n"
                                "loop lp in main {\n"
                                "    i    = MERGE (ei, ni)\n"
                                "    s    = MERGE (es, ns)\n"
                                "    lt   = LESS (i, en)\n"
                                "    p    = LOOPCOND (lt)\n"
                                "    si   = SWITCH (i, p)\n"
                                "    ss   = SWITCH (s, p)\n"
                                "    one  = CONST i64 1 [si:1]\n"
                                "    i2   = ADD (si:1, one)\n"
                                "    ni   = NEXTITER (i2)\n"
                                "    s2   = ADD (ss:1, ek)\n"
                                "    ns   = NEXTITER (s2)\n"
                                "    iout = EXIT lp (si:0)\n"
                                "    sout = EXIT lp (ss:0)\n"
                                "}\n";

/* LATE_CONST with parallel=8 (filled in by main), for the sweeps */
static char LATE_CONST_P8[2048];

START_TEST(late_enter_const_after_iterations)
{
    char text[2048];
    snprintf(text, sizeof text, LATE_CONST, " parallel=64");
    env e;
    env_open(&e, text, 0);
    for (int64_t n = 0; n <= 40; n += 5) {
        tfvm_value r[2];
        ck_assert_int_eq(run(&e, (tfvm_value[]){tfvm_i64(n)}, 1, r, 2), TFVM_OK);
        ck_assert_int_eq(r[0].as.i64, n * n * n);
        ck_assert_int_eq(r[1].as.i64, n * n);
        /* every iteration was alive when the constant came */
        ck_assert_uint_eq(stats(&e).contexts_peak, 1 + (uint64_t)n + 1);
    }
    env_close(&e);

    /* The parallel bound cannot release iteration 2 while iteration 0 waits
     * for the constant, which waits for the loop's exit: a real deadlock,
     * reported as such, with every context and deferred token released. */
    snprintf(text, sizeof text, LATE_CONST, " parallel=2");
    env_open(&e, text, 0);
    tfvm_value r[2];
    tfvm_status st = run(&e, (tfvm_value[]){tfvm_i64(3)}, 1, r, 2);
    expect_msg(&e, st, TFVM_ERR_STUCK,
               "run stuck: result 0 's' never arrived; waiting: s2 (ADD) at [lp#0] has input 0, missing input 1; "
               "ss (SWITCH) at [lp#1] has input 1, missing input 0");
    /* with n = 1 two iterations suffice */
    ck_assert_int_eq(run(&e, (tfvm_value[]){tfvm_i64(1)}, 1, r, 2), TFVM_OK);
    ck_assert_int_eq(r[0].as.i64, 1);
    env_close(&e);
}
END_TEST

/* A non-const ENTER (the start value of s) fed from the loop's own exit:
 * s = n + (0 + 1 + ... + n-1). */
static const char *LATE_ENTER = "entry main(n: i64) -> (s: i64) {\n"
                                "    n    = ARG 0\n"
                                "    zero = CONST i64 0\n"
                                "    ei   = ENTER lp (zero)\n"
                                "    en   = ENTER lp const (n)\n"
                                "    es   = ENTER lp (lp.iout)\n"
                                "           RESULT 0 (lp.sout)\n"
                                "}\n"
                                "loop lp in main {\n"
                                "    i    = MERGE (ei, ni)\n"
                                "    s    = MERGE (es, ns)\n"
                                "    lt   = LESS (i, en)\n"
                                "    p    = LOOPCOND (lt)\n"
                                "    si   = SWITCH (i, p)\n"
                                "    ss   = SWITCH (s, p)\n"
                                "    one  = CONST i64 1 [si:1]\n"
                                "    i2   = ADD (si:1, one)\n"
                                "    ni   = NEXTITER (i2)\n"
                                "    s2   = ADD (ss:1, si:1)\n"
                                "    ns   = NEXTITER (s2)\n"
                                "    iout = EXIT lp (si:0)\n"
                                "    sout = EXIT lp (ss:0)\n"
                                "}\n";

START_TEST(late_enter_of_a_loop_variable)
{
    env e;
    env_open(&e, LATE_ENTER, 0);
    for (int64_t n = 0; n <= 9; n++) {
        tfvm_value r;
        ck_assert_int_eq(run1(&e, tfvm_i64(n), &r), TFVM_OK);
        ck_assert_int_eq(r.as.i64, n + n * (n - 1) / 2);
    }
    env_close(&e);
}
END_TEST

/* ---- Nesting: loops in loops in a recursive function; calls in loops ------------ */

/* g(n) = 0 if n == 0 else g(n - 1) + T(n), T(n) = sum_{i<n} sum_{j<i} 1 =
 * n(n-1)/2, by two nested loops in g's body; so g(n) = (n+1)n(n-1)/6. */
static const char *NESTED_IN_RECURSION =
    "entry main(n: i64) -> (r: i64) {\n"
    "    n    = ARG 0\n"
    "    c    = CALL g@0 (n)\n"
    "    r    = RETURN g@0 (g.res)\n"
    "           RESULT 0 (r)\n"
    "}\n"
    "func g {\n"
    "    n    = IDENTITY (main.c | c1)\n"
    "    zero = CONST i64 0 [n]\n"
    "    z    = EQUAL (n, zero)\n"
    "    sn   = SWITCH (n, z)\n"
    "    base = CONST i64 0 [sn:1]\n"
    "    one  = CONST i64 1 [sn:0]\n"
    "    n1   = SUB (sn:0, one)\n"
    "    c1   = CALL g@1 (n1)\n"
    "    r1   = RETURN g@1 (res)\n"
    "    z0   = CONST i64 0 [sn:0]\n"
    "    oi   = ENTER outer parallel=3 (z0)\n"
    "    oa   = ENTER outer (z0)\n"
    "    on   = ENTER outer const (sn:0)\n"
    "    loop outer {\n"
    "        i   = MERGE (oi, ni)\n"
    "        a   = MERGE (oa, na)\n"
    "        lt  = LESS (i, on)\n"
    "        p   = LOOPCOND (lt)\n"
    "        si  = SWITCH (i, p)\n"
    "        sa  = SWITCH (a, p)\n"
    "        zj  = CONST i64 0 [si:1]\n"
    "        ij  = ENTER inner parallel=2 (zj)\n"
    "        ia  = ENTER inner (sa:1)\n"
    "        ii  = ENTER inner const (si:1)\n"
    "        loop inner {\n"
    "            j   = MERGE (ij, nj)\n"
    "            b   = MERGE (ia, nb)\n"
    "            lt  = LESS (j, ii)\n"
    "            p   = LOOPCOND (lt)\n"
    "            sj  = SWITCH (j, p)\n"
    "            sb  = SWITCH (b, p)\n"
    "            k1  = CONST i64 1 [sj:1]\n"
    "            j2  = ADD (sj:1, k1)\n"
    "            b2  = ADD (sb:1, k1)\n"
    "            nj  = NEXTITER (j2)\n"
    "            nb  = NEXTITER (b2)\n"
    "            bo  = EXIT inner (sb:0)\n"
    "        }\n"
    "        k1  = CONST i64 1 [si:1]\n"
    "        i2  = ADD (si:1, k1)\n"
    "        ni  = NEXTITER (i2)\n"
    "        na  = NEXTITER (inner.bo)\n"
    "        ao  = EXIT outer (sa:0)\n"
    "    }\n"
    "    sum  = ADD (r1, outer.ao)\n"
    "    res  = MERGE (base, sum)\n"
    "}\n";

START_TEST(nested_loops_in_recursion)
{
    env e;
    env_open(&e, NESTED_IN_RECURSION, 0);
    for (int64_t n = 0; n <= 12; n++) {
        tfvm_value r;
        ck_assert_int_eq(run1(&e, tfvm_i64(n), &r), TFVM_OK);
        ck_assert_int_eq(r.as.i64, (n + 1) * n * (n - 1) / 6);
    }
    tfvm_value r;
    ck_assert_int_eq(run1(&e, tfvm_i64(40), &r), TFVM_OK);
    ck_assert_int_eq(r.as.i64, 41 * 40 * 39 / 6);
    /* 41 activations, each with at most 3 outer and 3 * 2 inner iterations:
     * the LIFO runs one activation's loops at a time */
    ck_assert_uint_le(stats(&e).contexts_peak, 2 * 41 + 3 + 6 + 2);
    env_close(&e);
}
END_TEST

/* s = fib(0) + ... + fib(n - 1), the call inside the loop body */
static const char *CALL_IN_LOOP = "entry main(n: i32) -> (s: i32) {\n"
                                  "    n    = ARG 0\n"
                                  "    zero = CONST i32 0\n"
                                  "    ei   = ENTER lp parallel=3 (zero)\n"
                                  "    es   = ENTER lp (zero)\n"
                                  "    en   = ENTER lp const (n)\n"
                                  "           RESULT 0 (lp.so)\n"
                                  "}\n"
                                  "loop lp in main {\n"
                                  "    i    = MERGE (ei, ni)\n"
                                  "    s    = MERGE (es, ns)\n"
                                  "    lt   = LESS (i, en)\n"
                                  "    p    = LOOPCOND (lt)\n"
                                  "    si   = SWITCH (i, p)\n"
                                  "    ss   = SWITCH (s, p)\n"
                                  "    c    = CALL fib@0 (si:1)\n"
                                  "    f    = RETURN fib@0 (fib.res)\n"
                                  "    s2   = ADD (ss:1, f)\n"
                                  "    one  = CONST i32 1 [si:1]\n"
                                  "    i2   = ADD (si:1, one)\n"
                                  "    ni   = NEXTITER (i2)\n"
                                  "    ns   = NEXTITER (s2)\n"
                                  "    so   = EXIT lp (ss:0)\n"
                                  "}\n" FIB_FUNC("lp.c");

START_TEST(call_in_loop_body)
{
    env e;
    env_open(&e, CALL_IN_LOOP, 0);
    int32_t want = 0;
    for (int n = 0; n <= 16; n++) {
        tfvm_value r;
        ck_assert_int_eq(run1(&e, tfvm_i32(n), &r), TFVM_OK);
        ck_assert_int_eq(r.as.i32, want);
        want += fib_ref(n);
    }
    /* at most 3 iterations, each with one recursion of depth <= 16 */
    ck_assert_uint_le(stats(&e).contexts_peak, 1 + 3 * (1 + 2 * 16));
    env_close(&e);
}
END_TEST

static const char *EVEN_ODD = "entry main(n: i32) -> (even: bool) {\n"
                              "    n    = ARG 0\n"
                              "    c    = CALL is_even@0 (n)\n"
                              "    r    = RETURN is_even@0 (is_even.res)\n"
                              "           RESULT 0 (r)\n"
                              "}\n"
                              "func is_even {\n"
                              "    n    = IDENTITY (main.c | is_odd.c)\n"
                              "    zero = CONST i32 0 [n]\n"
                              "    one  = CONST i32 1 [n]\n"
                              "    z    = EQUAL (n, zero)\n"
                              "    sn   = SWITCH (n, z)\n"
                              "    yes  = CONST bool true [sn:1]\n"
                              "    m    = SUB (sn, one)\n"
                              "    c    = CALL is_odd@1 (m)\n"
                              "    r    = RETURN is_odd@1 (is_odd.res)\n"
                              "    res  = MERGE (yes, r)\n"
                              "}\n"
                              "func is_odd {\n"
                              "    n    = IDENTITY (is_even.c)\n"
                              "    zero = CONST i32 0 [n]\n"
                              "    one  = CONST i32 1 [n]\n"
                              "    z    = EQUAL (n, zero)\n"
                              "    sn   = SWITCH (n, z)\n"
                              "    no   = CONST bool false [sn:1]\n"
                              "    m    = SUB (sn, one)\n"
                              "    c    = CALL is_even@2 (m)\n"
                              "    r    = RETURN is_even@2 (is_even.res)\n"
                              "    res  = MERGE (no, r)\n"
                              "}\n";

START_TEST(mutual_recursion)
{
    env e;
    env_open(&e, EVEN_ODD, 0);
    for (int n = 0; n <= 7; n++) {
        tfvm_value r;
        ck_assert_int_eq(run1(&e, tfvm_i32(n), &r), TFVM_OK);
        ck_assert_int_eq(r.dtype, TFVM_BOOL);
        ck_assert_int_eq(r.as.b, n % 2 == 0);
    }
    tfvm_value r;
    ck_assert_int_eq(run1(&e, tfvm_i32(3001), &r), TFVM_OK);
    ck_assert_int_eq(r.as.b, false);
    ck_assert_uint_le(stats(&e).contexts_peak, 1 + 3002 + 2);
    env_close(&e);
}
END_TEST

/* ---- Functions: unused parameters, CALL straight into RETURN, dispatch --------- */

/* f(a, b) = a + a: b (a tensor) goes nowhere and must still be released */
static const char *UNUSED_PARAM = "entry main(x: f64[], y: f64[]) -> (r: f64[]) {\n"
                                  "    x  = ARG 0\n"
                                  "    y  = ARG 1\n"
                                  "    c0 = CALL f@0 (x)\n"
                                  "    c1 = CALL f@0 (y)\n"
                                  "    r  = RETURN f@0 (f.d)\n"
                                  "         RESULT 0 (r)\n"
                                  "}\n"
                                  "func f {\n"
                                  "    a  = IDENTITY (main.c0)\n"
                                  "    d  = ADD (a, a)\n"
                                  "}\n";

START_TEST(unused_parameter_releases_its_tensor)
{
    env e;
    env_open(&e, UNUSED_PARAM, 0);
    tfvm_tensor *x = tensor_f64(&e, 3, (double[]){1.0, 2.5, -4.0});
    tfvm_tensor *y = tensor_f64(&e, 2, (double[]){7.0, 8.0});
    tfvm_value args[2] = {tfvm_tensor_value(x), tfvm_tensor_value(y)}, r;
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(run(&e, args, 2, &r, 1), TFVM_OK);
        ck_assert_ptr_nonnull(r.tensor);
        const double *d = tfvm_tensor_cdata(r.tensor);
        ck_assert(d[0] == 2.0 && d[1] == 5.0 && d[2] == -8.0);
        tfvm_value_release(&r);
        /* the run kept no reference to its arguments */
        ck_assert_uint_eq(atomic_load(&x->refs), 1);
        ck_assert_uint_eq(atomic_load(&y->refs), 1);
    }
    tfvm_tensor_free(x);
    tfvm_tensor_free(y);
    env_close(&e);
}
END_TEST

/* id has an empty body: each CALL feeds the RETURNs directly. Both RETURNs
 * read both CALLs; a token is only for the RETURN of its own site. */
static const char *IDENTITY_FUNC = "entry main(x: f64[], y: f64[]) -> (a: f64[], b: f64[]) {\n"
                                   "    x  = ARG 0\n"
                                   "    y  = ARG 1\n"
                                   "    c1 = CALL id@1 (x)\n"
                                   "    c2 = CALL id@2 (y)\n"
                                   "    r1 = RETURN id@1 (c1 | c2)\n"
                                   "    r2 = RETURN id@2 (c1 | c2)\n"
                                   "         RESULT 0 (r1)\n"
                                   "         RESULT 1 (r2)\n"
                                   "}\n"
                                   "func id {\n"
                                   "}\n";

START_TEST(call_feeding_return_directly)
{
    env e;
    env_open(&e, IDENTITY_FUNC, 0);
    tfvm_tensor *x = tensor_f64(&e, 1, (double[]){1.0});
    tfvm_tensor *y = tensor_f64(&e, 1, (double[]){2.0});
    tfvm_value args[2] = {tfvm_tensor_value(x), tfvm_tensor_value(y)}, r[2];
    ck_assert_int_eq(run(&e, args, 2, r, 2), TFVM_OK);
    ck_assert_ptr_eq(r[0].tensor, x); /* the same tensor, passed through */
    ck_assert_ptr_eq(r[1].tensor, y);
    ck_assert_uint_eq(atomic_load(&x->refs), 2);
    tfvm_value_release(&r[0]);
    tfvm_value_release(&r[1]);
    ck_assert_uint_eq(atomic_load(&x->refs), 1);
    ck_assert_uint_eq(atomic_load(&y->refs), 1);
    tfvm_tensor_free(x);
    tfvm_tensor_free(y);
    env_close(&e);
}
END_TEST

/* one function, two sites at the same tag: each RETURN gets its own site's value */
static const char *TWO_SITES = "entry main(x: i32) -> (a: i32, b: i32) {\n"
                               "    x   = ARG 0\n"
                               "    one = CONST i32 1\n"
                               "    y   = ADD (x, one)\n"
                               "    c1  = CALL sq@1 (x)\n"
                               "    c2  = CALL sq@2 (y)\n"
                               "    r1  = RETURN sq@1 (sq.m)\n"
                               "    r2  = RETURN sq@2 (sq.m)\n"
                               "          RESULT 0 (r1)\n"
                               "          RESULT 1 (r2)\n"
                               "}\n"
                               "func sq {\n"
                               "    n   = IDENTITY (main.c1 | main.c2)\n"
                               "    m   = MUL (n, n)\n"
                               "}\n";

START_TEST(return_dispatch_by_site)
{
    env e;
    env_open(&e, TWO_SITES, 0);
    tfvm_value r[2];
    ck_assert_int_eq(run(&e, (tfvm_value[]){tfvm_i32(3)}, 1, r, 2), TFVM_OK);
    ck_assert_int_eq(r[0].as.i32, 9);
    ck_assert_int_eq(r[1].as.i32, 16);
    env_close(&e);
}
END_TEST

/* ---- Deadness ---------------------------------------------------------------- */

START_TEST(partly_dead_call)
{
    env e;
    env_open(&e,
             "entry main(x: i32) -> (r: i32) {\n"
             "    x  = ARG 0\n"
             "    t  = CONST bool true\n"
             "    s  = SWITCH (x, t)\n"
             "    c1 = CALL f@4 (s:1)\n"
             "    c2 = CALL f@4 (s:0)\n"
             "    r  = RETURN f@4 (f.d)\n"
             "         RESULT 0 (r)\n"
             "}\n"
             "func f {\n"
             "    a  = IDENTITY (main.c1)\n"
             "    b  = IDENTITY (main.c2)\n"
             "    d  = ADD (a, b)\n"
             "}\n",
             0);
    tfvm_value r;
    expect_msg(&e, run1(&e, tfvm_i32(1), &r), TFVM_ERR_DEADNESS,
               "c1 (CALL) at []: call of 'f' entered with live and dead tokens at one tag");
    expect_msg(&e, run1(&e, tfvm_i32(2), &r), TFVM_ERR_DEADNESS,
               "c1 (CALL) at []: call of 'f' entered with live and dead tokens at one tag");
    env_close(&e);
}
END_TEST

/* h(n) recurses down to 0; every activation enters loop lp with n and, as a
 * const, the n of the recursive side, which is dead in the base case. */
START_TEST(partly_dead_loop_deep_in_recursion)
{
    env e;
    env_open(&e,
             "entry main(n: i32) -> (r: i32) {\n"
             "    n    = ARG 0\n"
             "    c    = CALL h@0 (n)\n"
             "    r    = RETURN h@0 (h.res)\n"
             "           RESULT 0 (r)\n"
             "}\n"
             "func h {\n"
             "    n    = IDENTITY (main.c | c1)\n"
             "    zero = CONST i32 0 [n]\n"
             "    z    = EQUAL (n, zero)\n"
             "    sn   = SWITCH (n, z)\n"
             "    one  = CONST i32 1 [sn:0]\n"
             "    n1   = SUB (sn:0, one)\n"
             "    c1   = CALL h@1 (n1)\n"
             "    r1   = RETURN h@1 (res)\n"
             "    e1   = ENTER lp (n)\n"
             "    e2   = ENTER lp const (sn:0)\n"
             "    loop lp {\n"
             "        a = ADD (e1, e2)\n"
             "        o = EXIT lp (a)\n"
             "    }\n"
             "    res  = MERGE (r1, lp.o)\n"
             "}\n",
             0);
    tfvm_value r;
    for (int k = 0; k < 2; k++)
        expect_msg(&e, run1(&e, tfvm_i32(3), &r), TFVM_ERR_DEADNESS,
                   "e2 (ENTER) at [h@0, h@1, h@1, h@1]: loop 'lp' entered with live and dead tokens at one tag");
    ck_assert_str_eq(tfvm_last_error(e.vm)->tag, "[h@0, h@1, h@1, h@1]");
    ck_assert_str_eq(tfvm_last_error(e.vm)->instr, "e2");
    env_close(&e);
}
END_TEST

/* x > 0 ? (loop with two EXITs) + (call with two RETURNs) : -1. When x <= 0
 * the loop and the call each answer exactly one dead token per EXIT/RETURN
 * (a second one would be a port error at s1/s2), and neither body runs. */
static const char *DEAD_BRANCH = "entry main(x: i32) -> (r: i32) {\n"
                                 "    x    = ARG 0\n"
                                 "    zero = CONST i32 0\n"
                                 "    pos  = GREATER (x, zero)\n"
                                 "    sx   = SWITCH (x, pos)\n"
                                 "    neg  = CONST i32 -1 [sx:0]\n"
                                 "    e    = ENTER lp (sx:1)\n"
                                 "    ek   = ENTER lp const (sx:1)\n"
                                 "    c    = CALL two@0 (sx:1)\n"
                                 "    ra   = RETURN two@0 (two.a)\n"
                                 "    rb   = RETURN two@0 (two.b)\n"
                                 "    s1   = ADD (lp.o1, lp.o2)\n"
                                 "    s2   = ADD (ra, rb)\n"
                                 "    sum  = ADD (s1, s2)\n"
                                 "    r    = MERGE (neg, sum)\n"
                                 "           RESULT 0 (r)\n"
                                 "}\n"
                                 "loop lp in main {\n"
                                 "    v    = MERGE (e, nv)\n"
                                 "    k0   = CONST i32 0 [v]\n"
                                 "    k1   = CONST i32 1 [v]\n"
                                 "    p    = GREATER (v, k0)\n"
                                 "    sv   = SWITCH (v, p)\n"
                                 "    sk   = SWITCH (ek, p)\n"
                                 "    d    = SUB (sv:1, k1)\n"
                                 "    nv   = NEXTITER (d)\n"
                                 "    o1   = EXIT lp (sv:0)\n"
                                 "    o2   = EXIT lp (sk:0)\n"
                                 "}\n"
                                 "func two {\n"
                                 "    n    = IDENTITY (main.c)\n"
                                 "    a    = ADD (n, n)\n"
                                 "    b    = ADD (a, n)\n"
                                 "}\n";

START_TEST(dead_loop_and_call_answer_once_per_exit)
{
    env e;
    env_open(&e, DEAD_BRANCH, 0);
    tfvm_value r;
    ck_assert_int_eq(run1(&e, tfvm_i32(7), &r), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 7 + 14 + 21);
    ck_assert_uint_eq(stats(&e).contexts_created, 1 + 8 + 1);
    ck_assert_int_eq(run1(&e, tfvm_i32(-3), &r), TFVM_OK);
    ck_assert_int_eq(r.as.i32, -1);
    ck_assert_uint_eq(stats(&e).contexts_created, 1); /* the root: a dead token needs no callee */
    env_close(&e);
}
END_TEST

START_TEST(merge_index_and_all_dead)
{
    env e;
    env_open(&e,
             "entry main(x: i32) -> (v: i32, k: i32) {\n"
             "    x    = ARG 0\n"
             "    zero = CONST i32 0\n"
             "    f    = CONST bool false\n"
             "    pos  = GREATER (x, zero)\n"
             "    s    = SWITCH (x, pos)\n"
             "    d    = SWITCH (x, f)\n"
             "    m    = MERGE (d:1, s:0, s:1)\n"
             "           RESULT 0 (m)\n"
             "           RESULT 1 (m:1)\n"
             "}\n",
             0);
    tfvm_value r[2];
    ck_assert_int_eq(run(&e, (tfvm_value[]){tfvm_i32(5)}, 1, r, 2), TFVM_OK);
    ck_assert_int_eq(r[0].as.i32, 5);
    ck_assert_int_eq(r[1].dtype, TFVM_I32);
    ck_assert_int_eq(r[1].as.i32, 2);
    ck_assert_int_eq(run(&e, (tfvm_value[]){tfvm_i32(-5)}, 1, r, 2), TFVM_OK);
    ck_assert_int_eq(r[0].as.i32, -5);
    ck_assert_int_eq(r[1].as.i32, 1);
    env_close(&e);

    /* all inputs dead: both outputs dead */
    env_open(&e,
             "entry main(x: i32) -> (v: i32, k: i32) {\n"
             "    x    = ARG 0\n"
             "    f    = CONST bool false\n"
             "    d    = SWITCH (x, f)\n"
             "    m    = MERGE (d:1, d:1, d:1)\n"
             "           RESULT 0 (m)\n"
             "           RESULT 1 (m:1)\n"
             "}\n",
             0);
    expect_msg(&e, run(&e, (tfvm_value[]){tfvm_i32(5)}, 1, r, 2), TFVM_ERR_STUCK,
               "result 0 'v' of entry 'main' received a dead token (no branch produced it)");
    env_close(&e);
}
END_TEST

/* A MERGE with one input has matching state of its own: it must neither
 * share another instruction's (here y's) nor write past the slots of a region
 * without other multi-input instructions (f). */
START_TEST(single_input_merge)
{
    env e;
    env_open(&e,
             "entry main(x: i32) -> (r: i32, k: i32) {\n"
             "    x  = ARG 0\n"
             "    y  = ADD (x, m)\n"
             "    m  = MERGE (x)\n"
             "    c  = CALL f@0 (y)\n"
             "    r  = RETURN f@0 (f.m)\n"
             "         RESULT 0 (r)\n"
             "         RESULT 1 (m:1)\n"
             "}\n"
             "func f {\n"
             "    n  = IDENTITY (main.c)\n"
             "    m  = MERGE (n)\n"
             "}\n",
             0);
    tfvm_value r[2];
    ck_assert_int_eq(run(&e, (tfvm_value[]){tfvm_i32(21)}, 1, r, 2), TFVM_OK);
    ck_assert_int_eq(r[0].as.i32, 42);
    ck_assert_int_eq(r[1].as.i32, 0);
    env_close(&e);
}
END_TEST

START_TEST(switch_on_a_tensor_predicate)
{
    env e;
    env_open(&e,
             "entry main(x: i32) -> (r: i32) {\n"
             "    x  = ARG 0\n"
             "    t  = CONST bool[1] [true]\n"
             "    s  = SWITCH (x, t)\n"
             "         RESULT 0 (s:1)\n"
             "}\n",
             0);
    tfvm_value r;
    expect_msg(&e, run1(&e, tfvm_i32(1), &r), TFVM_ERR_TYPE,
               "s (SWITCH) at []: predicate must be a bool scalar, got bool tensor");
    env_close(&e);
}
END_TEST

/* ---- Errors deep in a recursion, with tensors in flight ---------------------------
 * f(x, n) = 100 / x if n == 0 else f(x + 1, n - 1), on i64 tensors: a zero
 * element of x + n is a division by zero n calls deep. */
static const char *DEEP_DIV = "entry main(x: i64[], n: i64) -> (r: i64[]) {\n"
                              "    x    = ARG 0\n"
                              "    n    = ARG 1\n"
                              "    c0   = CALL f@0 (x)\n"
                              "    c1   = CALL f@0 (n)\n"
                              "    r    = RETURN f@0 (f.res)\n"
                              "           RESULT 0 (r)\n"
                              "}\n"
                              "func f {\n"
                              "    x    = IDENTITY (main.c0 | cx)\n"
                              "    n    = IDENTITY (main.c1 | cn)\n"
                              "    zero = CONST i64 0 [n]\n"
                              "    one  = CONST i64 1 [n]\n"
                              "    z    = EQUAL (n, zero)\n"
                              "    sx   = SWITCH (x, z)\n"
                              "    sn   = SWITCH (n, z)\n"
                              "    k    = CONST i64 100 [sx:1]\n"
                              "    q    = DIV (k, sx:1)\n"
                              "    n1   = SUB (sn:0, one)\n"
                              "    x1   = ADD (sx:0, one)\n"
                              "    cx   = CALL f@1 (x1)\n"
                              "    cn   = CALL f@1 (n1)\n"
                              "    r1   = RETURN f@1 (res)\n"
                              "    res  = MERGE (q, r1)\n"
                              "}\n";

START_TEST(error_deep_in_recursion_releases_everything)
{
    env e;
    env_open(&e, DEEP_DIV, 0);
    tfvm_tensor *good = tensor_i64(&e, 3, (int64_t[]){1, 2, 3});
    tfvm_tensor *bad = tensor_i64(&e, 3, (int64_t[]){-5, 1, 2});
    tfvm_tensor *deep = tensor_i64(&e, 2, (int64_t[]){-300, 1});
    tfvm_value r;

    ck_assert_int_eq(run(&e, (tfvm_value[]){tfvm_tensor_value(good), tfvm_i64(5)}, 2, &r, 1), TFVM_OK);
    const int64_t *d = tfvm_tensor_cdata(r.tensor);
    ck_assert(d[0] == 16 && d[1] == 14 && d[2] == 12);
    tfvm_value_release(&r);

    expect_msg(&e, run(&e, (tfvm_value[]){tfvm_tensor_value(bad), tfvm_i64(5)}, 2, &r, 1), TFVM_ERR_ARITH,
               "q (DIV) at [f@0, f@1, f@1, f@1, f@1, f@1]: integer division by zero");

    /* 300 calls deep: the tag keeps its 16 outermost and 16 innermost
     * elements and counts the rest; the run still ends cleanly */
    tfvm_status st = run(&e, (tfvm_value[]){tfvm_tensor_value(deep), tfvm_i64(300)}, 2, &r, 1);
    ck_assert_int_eq(st, TFVM_ERR_ARITH);
    const tfvm_error *err = tfvm_last_error(e.vm);
    ck_assert_str_eq(err->instr, "q");
    char want[512] = "[f@0";
    for (int k = 0; k < 15; k++)
        strcat(want, ", f@1");
    strcat(want, ", ... 269 more ..."); /* 301 deep: main's call and 300 more */
    for (int k = 0; k < 16; k++)
        strcat(want, ", f@1");
    strcat(want, "]");
    ck_assert_str_eq(err->tag, want);
    char msg[600];
    snprintf(msg, sizeof msg, "q (DIV) at %s: integer division by zero", want);
    ck_assert_str_eq(err->message, msg);
    ck_assert_uint_ge(stats(&e).contexts_peak, 301);

    /* the VM works again, with the same answers */
    ck_assert_int_eq(run(&e, (tfvm_value[]){tfvm_tensor_value(good), tfvm_i64(5)}, 2, &r, 1), TFVM_OK);
    d = tfvm_tensor_cdata(r.tensor);
    ck_assert(d[0] == 16 && d[1] == 14 && d[2] == 12);
    tfvm_value_release(&r);
    ck_assert_uint_eq(atomic_load(&good->refs), 1);
    ck_assert_uint_eq(atomic_load(&bad->refs), 1);
    ck_assert_uint_eq(atomic_load(&deep->refs), 1);
    tfvm_tensor_free(good);
    tfvm_tensor_free(bad);
    tfvm_tensor_free(deep);
    env_close(&e);
}
END_TEST

/* ---- Tensors through a loop and a call, with a late tensor ENTER const -------------
 * r = x * w^n (elementwise), k = n. w's ENTER const comes after the i chain
 * has started (w is the last root source, so it fires last) and after the
 * parallel=2 bound deferred a NEXTITER. */
/* w is the first source, so it fires last (sources fire last first): its
 * const ENTER comes late. */
static const char *TENSOR_LOOP = "entry main(x: f64[], n: i32) -> (r: f64[], k: i32) {\n"
                                 "    w    = CONST f64[2] [0.5, 1.5]\n"
                                 "    x    = ARG 0\n"
                                 "    n    = ARG 1\n"
                                 "    zero = CONST i32 0\n"
                                 "    ei   = ENTER lp parallel=2 (zero)\n"
                                 "    ex   = ENTER lp (x)\n"
                                 "    en   = ENTER lp const (n)\n"
                                 "    ew   = ENTER lp const (w)\n"
                                 "           RESULT 0 (lp.xo)\n"
                                 "           RESULT 1 (lp.io)\n"
                                 "}\n"
                                 "loop lp in main {\n"
                                 "    i    = MERGE (ei, ni)\n"
                                 "    v    = MERGE (ex, nx)\n"
                                 "    lt   = LESS (i, en)\n"
                                 "    p    = LOOPCOND (lt)\n"
                                 "    si   = SWITCH (i, p)\n"
                                 "    sv   = SWITCH (v, p)\n"
                                 "    sw   = SWITCH (ew, p)\n"
                                 "    c    = CALL scale@0 (sv:1)\n"
                                 "    c2   = CALL scale@0 (sw:1)\n"
                                 "    r    = RETURN scale@0 (scale.m)\n"
                                 "    one  = CONST i32 1 [si:1]\n"
                                 "    i2   = ADD (si:1, one)\n"
                                 "    ni   = NEXTITER (i2)\n"
                                 "    nx   = NEXTITER (r)\n"
                                 "    xo   = EXIT lp (sv:0)\n"
                                 "    io   = EXIT lp (si:0)\n"
                                 "}\n"
                                 "func scale {\n"
                                 "    a    = IDENTITY (lp.c)\n"
                                 "    b    = IDENTITY (lp.c2)\n"
                                 "    m    = MUL (a, b)\n"
                                 "}\n";

static void check_tensor_loop(const tfvm_value *r, int n)
{
    ck_assert_ptr_nonnull(r[0].tensor);
    ck_assert_int_eq(tfvm_tensor_count(r[0].tensor), 2);
    const double *d = tfvm_tensor_cdata(r[0].tensor);
    double a = 1.0, b = 2.0;
    for (int i = 0; i < n; i++)
        a *= 0.5, b *= 1.5;
    ck_assert(d[0] == a && d[1] == b);
    ck_assert_int_eq(r[1].as.i32, n);
}

/* hook: records how many iterations existed when the const ENTER `ew` fired */
typedef struct late_probe {
    uint32_t ew;
    uint64_t iterations, deferred;
} late_probe;

static bool probe_hook(void *ud, tfvm_vm *vm, const vm_act *act)
{
    late_probe *lp = ud;
    vm_loop *l = vm_any_live_loop(vm);
    if (act->inst == lp->ew && l) {
        lp->iterations = l->next;
        lp->deferred = l->n_deferred;
    }
    return false;
}

START_TEST(tensors_through_loop_and_call)
{
    env e;
    env_open(&e, TENSOR_LOOP, 0);
    tfvm_tensor *x = tensor_f64(&e, 2, (double[]){1.0, 2.0});
    late_probe lp = {0};
    for (uint32_t i = 0; i < e.p->isa.n_insts; i++)
        if (e.p->isa.insts[i].name && strcmp(e.p->isa.insts[i].name, "ew") == 0)
            lp.ew = i;
    e.vm->hook = probe_hook;
    e.vm->hook_ud = &lp;
    long after_first = 0;
    for (int n = 0; n <= 12; n++) {
        tfvm_value r[2];
        ck_assert_int_eq(run(&e, (tfvm_value[]){tfvm_tensor_value(x), tfvm_i32(n)}, 2, r, 2), TFVM_OK);
        check_tensor_loop(r, n);
        tfvm_value_release(&r[0]);
        ck_assert_uint_eq(atomic_load(&x->refs), 1);
        if (n >= 2) {
            /* the constant really came late: two iterations, one deferred */
            ck_assert_uint_eq(lp.iterations, 2);
            ck_assert_uint_eq(lp.deferred, 1);
        }
        if (n == 12)
            after_first = e.mem.live;
    }
    /* the same VM, many times: memory stays where it was */
    for (int k = 0; k < 50; k++) {
        tfvm_value r[2];
        ck_assert_int_eq(run(&e, (tfvm_value[]){tfvm_tensor_value(x), tfvm_i32(12)}, 2, r, 2), TFVM_OK);
        check_tensor_loop(r, 12);
        tfvm_value_release(&r[0]);
        ck_assert_int_eq(e.mem.live, after_first);
    }
    ck_assert_uint_le(stats(&e).contexts_peak, 1 + 2 + 2);
    tfvm_tensor_free(x);
    env_close(&e);
}
END_TEST

/* A loop's ENTER const receiving a second token at one tag (two producers
 * that are not disjoint) is a port error, and the first value is not leaked. */
START_TEST(second_token_for_enter_const)
{
    env e;
    env_open(&e,
             "entry main(x: f64[]) -> (r: f64[]) {\n"
             "    x  = ARG 0\n"
             "    a  = IDENTITY (x)\n"
             "    b  = IDENTITY (a)\n"
             "    ei = ENTER lp (b)\n"
             "    ek = ENTER lp const (x | a)\n"
             "         RESULT 0 (lp.o)\n"
             "}\n"
             "loop lp in main {\n"
             "    d  = ADD (ei, ek)\n"
             "    o  = EXIT lp (d)\n"
             "}\n",
             0);
    tfvm_tensor *x = tensor_f64(&e, 1, (double[]){1.0});
    tfvm_value r;
    expect_msg(&e, run1(&e, tfvm_tensor_value(x), &r), TFVM_ERR_PORT,
               "ek (ENTER) at []: two tokens for input 0 at one tag");
    ck_assert_uint_eq(atomic_load(&x->refs), 1);
    tfvm_tensor_free(x);
    env_close(&e);
}
END_TEST

/* ---- The integer steps of frames (vm/seq.c) ----------------------------------
 * A sequential function with every integer step: ADD/SUB/MUL and the
 * comparisons on two registers, on a register and a constant, with the
 * constant on the left (moved right: 3 * a, 5 < a as a > 5, 4 != b; 7 - b
 * stays general), and a BRANCH on a comparison. %s is the dtype. */
static const char *INT_STEPS = "entry main(x: %1$s, y: %1$s) -> (add: %1$s, sub: %1$s, ksub: %1$s, kmul: %1$s, "
                               "mul: %1$s, lt: bool, kgt: bool, ge: bool, eq: bool, kne: bool, le: bool, br: %1$s) {\n"
                               "    x   = ARG 0\n"
                               "    y   = ARG 1\n"
                               "    cx  = CALL f@0 (x)\n"
                               "    cy  = CALL f@0 (y)\n"
                               "    r0  = RETURN f@0 (f.add)\n"
                               "    r1  = RETURN f@0 (f.sub)\n"
                               "    r2  = RETURN f@0 (f.ksub)\n"
                               "    r3  = RETURN f@0 (f.kmul)\n"
                               "    r4  = RETURN f@0 (f.mul)\n"
                               "    r5  = RETURN f@0 (f.lt)\n"
                               "    r6  = RETURN f@0 (f.kgt)\n"
                               "    r7  = RETURN f@0 (f.ge)\n"
                               "    r8  = RETURN f@0 (f.eq)\n"
                               "    r9  = RETURN f@0 (f.kne)\n"
                               "    r10 = RETURN f@0 (f.le)\n"
                               "    r11 = RETURN f@0 (f.br)\n"
                               "          RESULT 0 (r0)\n"
                               "          RESULT 1 (r1)\n"
                               "          RESULT 2 (r2)\n"
                               "          RESULT 3 (r3)\n"
                               "          RESULT 4 (r4)\n"
                               "          RESULT 5 (r5)\n"
                               "          RESULT 6 (r6)\n"
                               "          RESULT 7 (r7)\n"
                               "          RESULT 8 (r8)\n"
                               "          RESULT 9 (r9)\n"
                               "          RESULT 10 (r10)\n"
                               "          RESULT 11 (r11)\n"
                               "}\n"
                               "func f {\n"
                               "    a    = IDENTITY (main.cx)\n"
                               "    b    = IDENTITY (main.cy)\n"
                               "    add  = ADD (a, b)\n"
                               "    sub  = SUB (a, %1$s 7)\n"
                               "    ksub = SUB (%1$s 7, b)\n"
                               "    kmul = MUL (%1$s 3, a)\n"
                               "    mul  = MUL (a, b)\n"
                               "    lt   = LESS (a, b)\n"
                               "    kgt  = LESS (%1$s 5, a)\n"
                               "    ge   = GREATER_EQUAL (b, %1$s -2)\n"
                               "    eq   = EQUAL (a, b)\n"
                               "    kne  = NOT_EQUAL (%1$s 4, b)\n"
                               "    le   = LESS_EQUAL (a, b)\n"
                               "    sa   = BRANCH GREATER %1$s 0 prune_false prune_true (a)\n"
                               "    pos  = ADD (sa:1, %1$s 100)\n"
                               "    neg  = SUB (sa:0, %1$s 100)\n"
                               "    br   = MERGE (pos, neg)\n"
                               "}\n";

/* Runs entry 0 to the end, as frames (a plain run) or as contexts (stepped
 * as a debugger does: frames are not used then). */
static tfvm_status run_stepped(env *e, const tfvm_value *args, size_t n_args, tfvm_value *res, size_t n_res,
                               bool stepped)
{
    tfvm_status st = vm_begin(e->vm, 0, args, n_args);
    if (st == TFVM_OK)
        while (vm_step(e->vm, stepped ? 1000 : 0) == VM_RUNNING)
            ;
    return vm_end(e->vm, st == TFVM_OK ? res : NULL, st == TFVM_OK ? n_res : 0);
}

/* A frame fires what the graph fires: the counters of a run as frames (a)
 * and of the same run as contexts (b). */
static void expect_same_counters(const tfvm_stats *a, const tfvm_stats *b)
{
    ck_assert_uint_eq(a->fired, b->fired);
    ck_assert_uint_eq(a->tokens, b->tokens);
    ck_assert_uint_eq(a->matches, b->matches);
}

START_TEST(integer_steps_as_frames_and_contexts)
{
    static const int64_t pairs[][2] = {{0, 0},       {5, 5},          {6, -2},         {-3, 4},
                                       {INT32_MAX, 1}, {INT32_MIN, -1}, {100000, 70000}, {-7, -7}};
    for (int wide = 0; wide < 2; wide++) {
        char text[4096];
        snprintf(text, sizeof text, INT_STEPS, wide ? "i64" : "i32");
        env e;
        env_open(&e, text, 0);
        for (size_t q = 0; q < sizeof pairs / sizeof pairs[0]; q++) {
            int64_t x = pairs[q][0], y = pairs[q][1];
            tfvm_value args[2] = {wide ? tfvm_i64(x) : tfvm_i32((int32_t)x), wide ? tfvm_i64(y) : tfvm_i32((int32_t)y)};
            tfvm_value r[2][12];
            tfvm_stats st[2];
            for (int stepped = 0; stepped < 2; stepped++) {
                ck_assert_int_eq(run_stepped(&e, args, 2, r[stepped], 12, stepped), TFVM_OK);
                st[stepped] = stats(&e);
            }
            /* what C computes (integers wrap) */
            int64_t want[5];
            if (wide) {
                uint64_t a = (uint64_t)x, b = (uint64_t)y;
                int64_t w[5] = {(int64_t)(a + b), (int64_t)(a - 7), (int64_t)(7 - b), (int64_t)(3 * a), (int64_t)(a * b)};
                memcpy(want, w, sizeof w);
            } else {
                uint32_t a = (uint32_t)x, b = (uint32_t)y;
                int64_t w[5] = {(int32_t)(a + b), (int32_t)(a - 7), (int32_t)(7 - b), (int32_t)(3 * a), (int32_t)(a * b)};
                memcpy(want, w, sizeof w);
            }
            bool cmp[6] = {x < y, 5 < x, y >= -2, x == y, 4 != y, x <= y};
            int64_t br = x > 0 ? x + 100 : x - 100;
            for (int stepped = 0; stepped < 2; stepped++) {
                for (int k = 0; k < 5; k++)
                    ck_assert_msg((wide ? r[stepped][k].as.i64 : r[stepped][k].as.i32) == want[k],
                                  "%s (%lld, %lld) result %d%s", wide ? "i64" : "i32", (long long)x, (long long)y, k,
                                  stepped ? " stepped" : "");
                for (int k = 0; k < 6; k++) {
                    ck_assert_int_eq(r[stepped][5 + k].dtype, TFVM_BOOL);
                    ck_assert_msg(r[stepped][5 + k].as.b == cmp[k], "(%lld, %lld) comparison %d%s", (long long)x,
                                  (long long)y, k, stepped ? " stepped" : "");
                }
                ck_assert_int_eq(wide ? r[stepped][11].as.i64 : r[stepped][11].as.i32,
                                 wide ? br : (int32_t)(uint32_t)(uint64_t)br);
            }
            expect_same_counters(&st[0], &st[1]);
            ck_assert_uint_eq(st[0].contexts_created, st[1].contexts_created);
        }
        env_close(&e);
    }
}
END_TEST

/* The integer steps meet tokens they do not compute themselves: f64
 * scalars (the kernels add them), and dead tokens from a BRANCH that does
 * not prune (a dead result), each as the graph would. */
static const char *INT_STEPS_OTHER = "entry main(x: f64, y: f64) -> (s: f64, l: bool, r: f64) {\n"
                                     "    x   = ARG 0\n"
                                     "    y   = ARG 1\n"
                                     "    cx  = CALL f@0 (x)\n"
                                     "    cy  = CALL f@0 (y)\n"
                                     "    r0  = RETURN f@0 (f.s)\n"
                                     "    r1  = RETURN f@0 (f.l)\n"
                                     "    r2  = RETURN f@0 (f.r)\n"
                                     "          RESULT 0 (r0)\n"
                                     "          RESULT 1 (r1)\n"
                                     "          RESULT 2 (r2)\n"
                                     "}\n"
                                     "func f {\n"
                                     "    a   = IDENTITY (main.cx)\n"
                                     "    b   = IDENTITY (main.cy)\n"
                                     "    s   = ADD (a, b)\n"
                                     "    l   = LESS (a, b)\n"
                                     "    sa  = BRANCH GREATER f64 0 (a)\n"
                                     "    d   = ADD (sa:0, sa:0)\n"
                                     "    u   = MUL (sa:1, b)\n"
                                     "    r   = MERGE (d, u)\n"
                                     "}\n";

START_TEST(integer_steps_other_tokens)
{
    env e;
    env_open(&e, INT_STEPS_OTHER, 0);
    static const double pairs[][2] = {{1.5, 2.25}, {-3.0, 0.5}};
    for (size_t q = 0; q < 2; q++) {
        tfvm_value args[2] = {tfvm_f64(pairs[q][0]), tfvm_f64(pairs[q][1])};
        tfvm_value r[2][3];
        tfvm_stats st[2];
        for (int stepped = 0; stepped < 2; stepped++) {
            ck_assert_int_eq(run_stepped(&e, args, 2, r[stepped], 3, stepped), TFVM_OK);
            st[stepped] = stats(&e);
            double a = pairs[q][0], b = pairs[q][1];
            ck_assert_double_eq(r[stepped][0].as.f64, a + b);
            ck_assert_int_eq(r[stepped][1].as.b, a < b);
            ck_assert_double_eq(r[stepped][2].as.f64, a > 0 ? a * b : a + a);
        }
        expect_same_counters(&st[0], &st[1]);
    }
    env_close(&e);
}
END_TEST

/* Tensors of the integer steps' dtypes (i32 and i64 vectors) take the
 * general step: the steps compute on scalars only, and a tensor's register
 * holds a pointer, not the number. */
static const char *INT_STEPS_TENSORS = "entry main(x: i32[], y: i64[]) -> (d: i32[], s: i32[], l: bool[], e: i64[]) {\n"
                                       "    x   = ARG 0\n"
                                       "    y   = ARG 1\n"
                                       "    cx  = CALL f@0 (x)\n"
                                       "    cy  = CALL f@0 (y)\n"
                                       "    r0  = RETURN f@0 (f.d)\n"
                                       "    r1  = RETURN f@0 (f.s)\n"
                                       "    r2  = RETURN f@0 (f.l)\n"
                                       "    r3  = RETURN f@0 (f.e)\n"
                                       "          RESULT 0 (r0)\n"
                                       "          RESULT 1 (r1)\n"
                                       "          RESULT 2 (r2)\n"
                                       "          RESULT 3 (r3)\n"
                                       "}\n"
                                       "func f {\n"
                                       "    a   = IDENTITY (main.cx)\n"
                                       "    b   = IDENTITY (main.cy)\n"
                                       "    d   = SUB (a, i32 1)\n"
                                       "    s   = ADD (a, a)\n"
                                       "    l   = LESS (a, i32 3)\n"
                                       "    e   = MUL (b, i64 3)\n"
                                       "}\n";

/* A BRANCH on a comparison of a tensor with a constant: no scalar
 * predicate, an error in frames as in contexts. */
static const char *INT_BRANCH_TENSOR = "entry main(x: i32[]) -> (r: i32[]) {\n"
                                       "    x   = ARG 0\n"
                                       "    cx  = CALL f@0 (x)\n"
                                       "    r0  = RETURN f@0 (f.r)\n"
                                       "          RESULT 0 (r0)\n"
                                       "}\n"
                                       "func f {\n"
                                       "    a   = IDENTITY (main.cx)\n"
                                       "    sa  = BRANCH LESS i32 3 prune_false prune_true (a)\n"
                                       "    r   = MERGE (sa:0, sa:1)\n"
                                       "}\n";

START_TEST(integer_steps_on_tensors)
{
    env e;
    env_open(&e, INT_STEPS_TENSORS, 0);
    int64_t n = 3;
    tfvm_tensor *x = tfvm_tensor_new(TFVM_I32, 1, &n, &e.cfg.allocator);
    ck_assert_ptr_nonnull(x);
    memcpy(tfvm_tensor_data(x), (int32_t[]){2, 3, -7}, 3 * sizeof(int32_t));
    tfvm_tensor *y = tensor_i64(&e, 3, (int64_t[]){5, -1, INT64_MAX});
    tfvm_value args[2] = {tfvm_tensor_value(x), tfvm_tensor_value(y)};
    tfvm_stats st[2];
    for (int stepped = 0; stepped < 2; stepped++) {
        tfvm_value r[4];
        ck_assert_int_eq(run_stepped(&e, args, 2, r, 4, stepped), TFVM_OK);
        st[stepped] = stats(&e);
        for (int k = 0; k < 4; k++)
            ck_assert_msg(r[k].tensor && tfvm_tensor_count(r[k].tensor) == 3, "result %d%s: not a 3-vector", k,
                          stepped ? " stepped" : "");
        const int32_t *d = tfvm_tensor_cdata(r[0].tensor), *sum = tfvm_tensor_cdata(r[1].tensor);
        const bool *l = tfvm_tensor_cdata(r[2].tensor);
        const int64_t *m = tfvm_tensor_cdata(r[3].tensor);
        static const int32_t want_d[] = {1, 2, -8}, want_s[] = {4, 6, -14};
        static const bool want_l[] = {true, false, true};
        const int64_t want_m[] = {15, -3, (int64_t)((uint64_t)INT64_MAX * 3u)};
        for (int i = 0; i < 3; i++) {
            ck_assert_int_eq(d[i], want_d[i]);
            ck_assert_int_eq(sum[i], want_s[i]);
            ck_assert_int_eq(l[i], want_l[i]);
            ck_assert_int_eq(m[i], want_m[i]);
        }
        for (int k = 0; k < 4; k++)
            tfvm_value_release(&r[k]);
    }
    expect_same_counters(&st[0], &st[1]);
    tfvm_tensor_free(x);
    tfvm_tensor_free(y);
    env_close(&e);
    env_open(&e, INT_BRANCH_TENSOR, 0);
    x = tfvm_tensor_new(TFVM_I32, 1, &n, &e.cfg.allocator);
    ck_assert_ptr_nonnull(x);
    memset(tfvm_tensor_data(x), 0, 3 * sizeof(int32_t));
    args[0] = tfvm_tensor_value(x);
    char msg[2][512];
    for (int stepped = 0; stepped < 2; stepped++) {
        tfvm_value r;
        ck_assert_int_eq(run_stepped(&e, args, 1, &r, 1, stepped), TFVM_ERR_TYPE);
        snprintf(msg[stepped], sizeof msg[stepped], "%s", tfvm_errmsg(e.vm));
    }
    ck_assert_str_eq(msg[0], msg[1]);
    tfvm_tensor_free(x);
    env_close(&e);
}
END_TEST

/* SWITCHes of several values on one predicate run as one step in a frame;
 * a dead value among them (from a BRANCH that does not prune) takes the
 * general visit's rules. Frames and contexts must agree on the results, the
 * errors and the counters. */
static const char *SWITCH_GROUP = "entry main(x: i32, y: i32) -> (a: i32, b: i32, c: i32) {\n"
                                  "    x  = ARG 0\n"
                                  "    y  = ARG 1\n"
                                  "    cx = CALL f@0 (x)\n"
                                  "    cy = CALL f@0 (y)\n"
                                  "    ra = RETURN f@0 (f.ma)\n"
                                  "    rb = RETURN f@0 (f.mb)\n"
                                  "    rc = RETURN f@0 (f.mc)\n"
                                  "         RESULT 0 (ra)\n"
                                  "         RESULT 1 (rb)\n"
                                  "         RESULT 2 (rc)\n"
                                  "}\n"
                                  "func f {\n"
                                  "    a  = IDENTITY (main.cx)\n"
                                  "    b  = IDENTITY (main.cy)\n"
                                  "    sa = BRANCH GREATER i32 0 (a)\n"
                                  "    p  = LESS (b, i32 10)\n"
                                  "    s1 = SWITCH prune_false prune_true (sa:1, p)\n"
                                  "    s2 = SWITCH prune_false prune_true (b, p)\n"
                                  "    s3 = SWITCH prune_false prune_true (a, p)\n"
                                  "    ma = MERGE (s1:0, s1:1)\n"
                                  "    mb = MERGE (s2:0, s2:1)\n"
                                  "    mc = MERGE (s3:0, s3:1)\n"
                                  "    u  = ADD (sa:0, i32 1)\n"
                                  "}\n";

START_TEST(switch_group_as_frames_and_contexts)
{
    env e;
    env_open(&e, SWITCH_GROUP, 0);
    const vm_rplan *rp = &e.vm->plan.regions[1];
    uint32_t groups = 0;
    for (uint32_t q = 0; q < rp->n_sops; q++)
        groups += rp->sops[q].kind == VM_SOP_SWITCHN;
    ck_assert_uint_eq(groups, 1); /* s1, s2 and s3 are one step */
    static const int32_t pairs[][2] = {{5, 3}, {-5, 3}, {5, 20}, {-5, 20}};
    for (size_t q = 0; q < 4; q++) {
        tfvm_value args[2] = {tfvm_i32(pairs[q][0]), tfvm_i32(pairs[q][1])}, r[2][3];
        tfvm_status st[2];
        tfvm_stats stats_[2];
        char msg[2][512];
        for (int stepped = 0; stepped < 2; stepped++) {
            st[stepped] = run_stepped(&e, args, 2, r[stepped], 3, stepped);
            snprintf(msg[stepped], sizeof msg[stepped], "%s", tfvm_errmsg(e.vm));
            stats_[stepped] = stats(&e);
        }
        ck_assert_int_eq(st[0], st[1]);
        ck_assert_str_eq(msg[0], msg[1]);
        expect_same_counters(&stats_[0], &stats_[1]);
        if (pairs[q][0] > 0) { /* all live */
            ck_assert_int_eq(st[0], TFVM_OK);
            for (int stepped = 0; stepped < 2; stepped++) {
                ck_assert_int_eq(r[stepped][0].as.i32, pairs[q][0]);
                ck_assert_int_eq(r[stepped][1].as.i32, pairs[q][1]);
                ck_assert_int_eq(r[stepped][2].as.i32, pairs[q][0]);
            }
        } else { /* s1 routes a dead token: result 0 is dead */
            ck_assert_int_ne(st[0], TFVM_OK);
        }
    }
    env_close(&e);
}
END_TEST

/* ---- Limits, interrupts, abandoned runs ------------------------------------------ */

START_TEST(max_contexts_limit)
{
    env e;
    env_open(&e, FIB, 10);
    tfvm_value r;
    expect_msg(&e, run1(&e, tfvm_i32(20), &r), TFVM_ERR_LIMIT,
               "more than 10 live contexts (max_contexts) in 'fib' at depth 9");
    ck_assert_int_eq(run1(&e, tfvm_i32(4), &r), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 5);
    ck_assert_uint_le(stats(&e).contexts_peak, 10);
    expect_msg(&e, run1(&e, tfvm_i32(20), &r), TFVM_ERR_LIMIT,
               "more than 10 live contexts (max_contexts) in 'fib' at depth 9");
    env_close(&e);
}
END_TEST

/* A recursion without end (f calls itself with its own argument). With no
 * max_contexts it stops at the VM's default bound (set small here, as the
 * memory of a smaller machine would): "recursion too deep", with the
 * function, the depth and the tag (a .tfasm without positions: no source). */
static const char *ENDLESS = "entry main(x: i32) -> (r: i32) {\n"
                             "    x  = ARG 0\n"
                             "    c  = CALL f@1 (x)\n"
                             "    r  = RETURN f@1 (f.y)\n"
                             "         RESULT 0 (r)\n"
                             "}\n"
                             "func f {\n"
                             "    n  = IDENTITY (main.c | c2)\n"
                             "    c2 = CALL f@2 (n)\n"
                             "    y  = RETURN f@2 (y)\n"
                             "}\n";

START_TEST(endless_recursion_default_bound)
{
    for (int stepped = 0; stepped < 2; stepped++) { /* as frames, and as contexts (a debugger's run) */
        env e;
        env_open(&e, ENDLESS, 0);
        e.vm->ctx_bound = 200;
        tfvm_value arg = tfvm_i32(1), r;
        ck_assert_int_eq(vm_begin(e.vm, 0, &arg, 1), TFVM_OK);
        while (vm_step(e.vm, stepped ? 1000 : 0) == VM_RUNNING)
            ;
        tfvm_status st = vm_end(e.vm, &r, 1);
        ck_assert_int_eq(st, TFVM_ERR_LIMIT);
        const char *msg = tfvm_errmsg(e.vm);
        const char *want = "recursion too deep in 'f' at depth 199: more than 200 live contexts (the bound for the "
                           "memory available; max_contexts sets another) at [f@1, f@2, f@2, ";
        ck_assert_msg(strncmp(msg, want, strlen(want)) == 0, "%s", msg);
        env_close(&e);
    }
}
END_TEST

/* A stuck recursion 4000 calls deep (issue 14: its diagnosis took 31 s when
 * it was cubic in the depth): every level holds a partial match. The
 * diagnosis counts them and lists the oldest 4 (it is linear in the
 * depth: each listed tag is cut, and nothing is formatted for the others);
 * 4001 ADDs wait for their callee, and the leaf's z for itself. */
static const char *STUCK_DEEP = "entry main(x: i32) -> (r: i32) {\n"
                                "    x  = ARG 0\n"
                                "    c  = CALL f@1 (x)\n"
                                "    r  = RETURN f@1 (f.y)\n"
                                "         RESULT 0 (r)\n"
                                "}\n"
                                "func f {\n"
                                "    n  = IDENTITY (main.c | c2)\n"
                                "    sw = BRANCH EQUAL i32 0 prune_false prune_true (n)\n"
                                "    m  = SUB (sw, i32 1)\n"
                                "    c2 = CALL f@2 (m)\n"
                                "    r2 = RETURN f@2 (y)\n"
                                "    y  = ADD (n, r2)\n"
                                "    z  = ADD (sw:1, z)\n"
                                "}\n";

START_TEST(stuck_deep_recursion_diagnosis_is_capped)
{
    env e;
    env_open(&e, STUCK_DEEP, 0);
    tfvm_value r;
    ck_assert_int_eq(run1(&e, tfvm_i32(4000), &r), TFVM_ERR_STUCK);
    const char *msg = tfvm_errmsg(e.vm);
    const char *want = "run stuck: result 0 'r' never arrived; waiting (4002, the oldest 4 shown): "
                       "y (ADD) at [f@1] has input 0, missing input 1; "
                       "y (ADD) at [f@1, f@2] has input 0, missing input 1; ";
    ck_assert_msg(strncmp(msg, want, strlen(want)) == 0, "%s", msg);
    env_close(&e);
}
END_TEST

static const char *FOREVER = "entry main(x: i64) -> (r: i64) {\n"
                             "    x   = ARG 0\n"
                             "    e   = ENTER lp (x)\n"
                             "          RESULT 0 (lp.o)\n"
                             "}\n"
                             "loop lp in main {\n"
                             "    v   = MERGE (e, nv)\n"
                             "    t   = CONST bool true [v]\n"
                             "    p   = LOOPCOND (t)\n"
                             "    sv  = SWITCH (v, p)\n"
                             "    one = CONST i64 1 [v]\n"
                             "    v2  = ADD (sv:1, one)\n"
                             "    nv  = NEXTITER (v2)\n"
                             "    o   = EXIT lp (sv:0)\n"
                             "}\n"
                             "entry twice(x: i64) -> (r: i64) {\n"
                             "    x   = ARG 0\n"
                             "    r   = ADD (x, x)\n"
                             "          RESULT 0 (r)\n"
                             "}\n";

/* An interrupt says where the run was: the instruction next to fire (a
 * debugger's stepped run: activations, in a fixed order), the innermost
 * call's function and how many calls deep, the innermost loop and its
 * iteration; the error's tag keeps both ends of a deep one. */
START_TEST(interrupt_says_where)
{
    const struct {
        const char *name, *text, *message, *tag;
    } cases[] = {
        {"loop", FOREVER, "interrupted at v2 (ADD) in 'main' at depth 0, iteration #124 of loop 'lp'",
         "[lp#124]"},
        {"recursion", ENDLESS, "interrupted at n (IDENTITY) in 'f' at depth 500",
         "[f@1, f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2, ... 468 more ..., f@2, "
         "f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2, f@2]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        env e;
        env_open(&e, cases[i].text, 0);
        tfvm_value arg = tfvm_i64(0), r;
        if (cases[i].text == ENDLESS)
            arg = tfvm_i32(1);
        ck_assert_int_eq(vm_begin(e.vm, 0, &arg, 1), TFVM_OK);
        ck_assert_int_eq(vm_step(e.vm, 1000), VM_RUNNING);
        tfvm_interrupt(e.vm);
        ck_assert_int_eq(vm_step(e.vm, 0), VM_FAILED);
        ck_assert_int_eq(vm_end(e.vm, &r, 1), TFVM_ERR_INTERRUPTED);
        const tfvm_error *err = tfvm_last_error(e.vm);
        ck_assert_msg(strcmp(err->message, cases[i].message) == 0, "%s: %s", cases[i].name, err->message);
        ck_assert_msg(strcmp(err->tag, cases[i].tag) == 0, "%s: %s", cases[i].name, err->tag);
        env_close(&e);
    }
}
END_TEST

typedef struct interrupter {
    tfvm_vm *vm;
    atomic_int done;
} interrupter;

static void *interrupt_thread(void *arg)
{
    interrupter *it = arg;
    /* (the first interrupt 10 ms in: one that lands before the run's first
     * firing stops it at its ARG, which a loaded machine made happen under
     * TSan) */
    struct timespec ts = {0, 1000000}, start = {0, 10000000};
    nanosleep(&start, NULL);
    while (!atomic_load(&it->done)) {
        tfvm_interrupt(it->vm);
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* msg with each iteration number ("#5120") written "#N": where a run
 * interrupted from another thread stops varies. */
static const char *iterations_as_n(const char *msg, char *buf, size_t size)
{
    size_t n = 0;
    for (const char *c = msg; *c && n + 2 < size; c++) {
        buf[n++] = *c;
        if (*c == '#' && c[1] >= '0' && c[1] <= '9') {
            buf[n++] = 'N';
            while (c[1] >= '0' && c[1] <= '9')
                c++;
        }
    }
    buf[n] = '\0';
    return buf;
}

START_TEST(interrupt_from_another_thread)
{
    env e;
    env_open(&e, FOREVER, 0);
    for (int k = 0; k < 2; k++) {
        interrupter it = {.vm = e.vm};
        atomic_init(&it.done, 0);
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, interrupt_thread, &it), 0);
        tfvm_value a = tfvm_i64(0), r;
        tfvm_status st = tfvm_run(e.vm, "main", &a, 1, &r, 1);
        atomic_store(&it.done, 1);
        pthread_join(t, NULL);
        ck_assert_int_eq(st, TFVM_ERR_INTERRUPTED);
        char msg[512]; /* a frame of the loop's iterations, at its first step */
        ck_assert_str_eq(iterations_as_n(tfvm_errmsg(e.vm), msg, sizeof msg),
                         "interrupted at v (MERGE) in 'main' at depth 0, iteration #N of loop 'lp'");
        ck_assert_uint_le(stats(&e).contexts_peak, 1 + 10);
        ck_assert_uint_eq(live_contexts(e.vm), 0);
        /* the VM is usable again */
        a = tfvm_i64(21);
        ck_assert_int_eq(tfvm_run(e.vm, "twice", &a, 1, &r, 1), TFVM_OK);
        ck_assert_int_eq(r.as.i64, 42);
    }
    env_close(&e);
}
END_TEST

/* A run stepped by hand (as a debugger does) and abandoned in any state:
 * freeing the VM releases everything. */
START_TEST(abandoned_runs_are_released)
{
    env e;
    tfvm_tensor *x;
    /* running, with tensors and deferred tokens in flight */
    env_open(&e, TENSOR_LOOP, 0);
    x = tensor_f64(&e, 2, (double[]){1.0, 2.0});
    ck_assert_int_eq(vm_begin(e.vm, 0, (tfvm_value[]){tfvm_tensor_value(x), tfvm_i32(50)}, 2), TFVM_OK);
    ck_assert_int_eq(vm_step(e.vm, 100), VM_RUNNING);
    tfvm_tensor_free(x);
    env_close(&e);

    /* failed, but not ended; a new run on the VM discards it */
    env_open(&e, DEEP_DIV, 0);
    x = tensor_i64(&e, 2, (int64_t[]){-9, 1});
    ck_assert_int_eq(vm_begin(e.vm, 0, (tfvm_value[]){tfvm_tensor_value(x), tfvm_i64(9)}, 2), TFVM_OK);
    ck_assert_int_eq(vm_step(e.vm, 0), VM_FAILED);
    tfvm_value r;
    ck_assert_int_eq(run(&e, (tfvm_value[]){tfvm_tensor_value(x), tfvm_i64(10)}, 2, &r, 1), TFVM_OK);
    const int64_t *d = tfvm_tensor_cdata(r.tensor);
    ck_assert(d[0] == 100 && d[1] == 9);
    tfvm_value_release(&r);
    ck_assert_int_eq(vm_begin(e.vm, 0, (tfvm_value[]){tfvm_tensor_value(x), tfvm_i64(9)}, 2), TFVM_OK);
    ck_assert_int_eq(vm_step(e.vm, 0), VM_FAILED);
    tfvm_tensor_free(x);
    env_close(&e);

    /* finished, results not collected */
    env_open(&e, TENSOR_LOOP, 0);
    x = tensor_f64(&e, 2, (double[]){1.0, 2.0});
    ck_assert_int_eq(vm_begin(e.vm, 0, (tfvm_value[]){tfvm_tensor_value(x), tfvm_i32(3)}, 2), TFVM_OK);
    ck_assert_int_eq(vm_step(e.vm, 0), VM_DONE);
    tfvm_tensor_free(x);
    env_close(&e);
}
END_TEST

/* ---- Sweeps: every limit, every stopping point --------------------------------- */

typedef struct sweep_prog {
    const char *text;
    size_t n_args, n_res;
    tfvm_value args[2];
    tfvm_dtype tensor_arg; /* when not 0, args[0] is a tensor [1, 2] of this dtype */
} sweep_prog;

/* The arguments of one sweep program; *t receives the tensor to free. */
static void sweep_args(env *e, const sweep_prog *sp, tfvm_value *args, tfvm_tensor **t)
{
    memcpy(args, sp->args, sizeof sp->args);
    *t = NULL;
    if (sp->tensor_arg == TFVM_F64)
        *t = tensor_f64(e, 2, (double[]){1.0, 2.0});
    else if (sp->tensor_arg == TFVM_I64)
        *t = tensor_i64(e, 2, (int64_t[]){1, 2});
    if (*t)
        args[0] = tfvm_tensor_value(*t);
}

static const sweep_prog *sweep_progs(size_t *n)
{
    static sweep_prog progs[5];
    progs[0] = (sweep_prog){CALL_IN_LOOP, 1, 1, {tfvm_i32(6)}, 0};
    progs[1] = (sweep_prog){NESTED_IN_RECURSION, 1, 1, {tfvm_i64(4)}, 0};
    progs[2] = (sweep_prog){TENSOR_LOOP, 2, 2, {{0}, tfvm_i32(4)}, TFVM_F64};
    progs[3] = (sweep_prog){LATE_CONST_P8, 1, 2, {tfvm_i64(5)}, 0};
    progs[4] = (sweep_prog){DEEP_DIV, 2, 1, {{0}, tfvm_i64(3)}, TFVM_I64};
    *n = 5;
    return progs;
}

/* max_contexts = 1, 2, ...: each run either succeeds or stops with
 * TFVM_ERR_LIMIT, and leaves nothing behind. */
START_TEST(max_contexts_sweep)
{
    size_t n_progs;
    const sweep_prog *progs = sweep_progs(&n_progs);
    for (size_t i = 0; i < n_progs; i++) {
        bool ok = false;
        for (uint64_t max = 1; !ok; max++) {
            ck_assert_uint_lt(max, 200);
            env e;
            env_open(&e, progs[i].text, max);
            tfvm_value args[2], r[2];
            tfvm_tensor *t;
            sweep_args(&e, &progs[i], args, &t);
            tfvm_status st = run(&e, args, progs[i].n_args, r, progs[i].n_res);
            if (st == TFVM_OK) {
                ok = true;
                ck_assert_uint_le(stats(&e).contexts_peak, max);
                for (size_t k = 0; k < progs[i].n_res; k++)
                    tfvm_value_release(&r[k]);
            } else {
                char want[64]; /* then where: the function, the depth */
                snprintf(want, sizeof want, "more than %llu live contexts (max_contexts)", (unsigned long long)max);
                ck_assert_int_eq(st, TFVM_ERR_LIMIT);
                ck_assert_msg(strncmp(tfvm_errmsg(e.vm), want, strlen(want)) == 0, "%s", tfvm_errmsg(e.vm));
            }
            tfvm_tensor_free(t);
            env_close(&e);
        }
    }
}
END_TEST

/* Stops every run after k activations, for every k: by tfvm_interrupt, by
 * abandoning it (vm_end before the end), and by pausing before every firing
 * (a debugger's single steps), which must not change the answer. */
static bool pause_always(void *ud, tfvm_vm *vm, const vm_act *act)
{
    (void)vm, (void)act;
    ++*(uint64_t *)ud;
    return true;
}

START_TEST(stop_at_every_step)
{
    size_t n_progs;
    const sweep_prog *progs = sweep_progs(&n_progs);
    for (size_t i = 0; i < n_progs; i++) {
        env e;
        env_open(&e, progs[i].text, 0);
        tfvm_value args[2], r[2], want[2];
        tfvm_tensor *t;
        sweep_args(&e, &progs[i], args, &t);
        ck_assert_int_eq(run(&e, args, progs[i].n_args, want, progs[i].n_res), TFVM_OK);
        uint64_t total = stats(&e).fired;
        for (uint64_t k = 0; k < total; k++) {
            ck_assert_int_eq(vm_begin(e.vm, 0, args, progs[i].n_args), TFVM_OK);
            if (k) /* (vm_step with 0 means no limit) */
                ck_assert_int_eq(vm_step(e.vm, k), VM_RUNNING);
            if (k % 2) {
                tfvm_interrupt(e.vm);
                ck_assert_int_eq(vm_step(e.vm, 0), VM_FAILED);
                ck_assert_int_eq(vm_end(e.vm, r, progs[i].n_res), TFVM_ERR_INTERRUPTED);
                ck_assert_msg(strncmp(tfvm_errmsg(e.vm), "interrupted at ", 15) == 0, "%s", tfvm_errmsg(e.vm));
            } else {
                ck_assert_int_eq(vm_end(e.vm, r, progs[i].n_res), TFVM_ERR_INTERRUPTED);
                ck_assert_str_eq(tfvm_errmsg(e.vm), "run abandoned before it finished");
            }
            ck_assert_uint_eq(live_contexts(e.vm), 0);
        }
        /* single steps through the debugger hook */
        uint64_t hooks = 0;
        e.vm->hook = pause_always;
        e.vm->hook_ud = &hooks;
        ck_assert_int_eq(vm_begin(e.vm, 0, args, progs[i].n_args), TFVM_OK);
        uint64_t pauses = 0;
        while (vm_step(e.vm, 0) == VM_PAUSED)
            pauses++;
        ck_assert_uint_eq(pauses, total);
        ck_assert_uint_eq(hooks, total);
        ck_assert_int_eq(vm_end(e.vm, r, progs[i].n_res), TFVM_OK);
        for (size_t k = 0; k < progs[i].n_res; k++) {
            if (want[k].tensor) {
                ck_assert_int_eq(tfvm_tensor_count(r[k].tensor), tfvm_tensor_count(want[k].tensor));
                ck_assert_mem_eq(tfvm_tensor_cdata(r[k].tensor), tfvm_tensor_cdata(want[k].tensor),
                                 r[k].tensor->nbytes);
            } else {
                ck_assert_int_eq(r[k].as.i64, want[k].as.i64);
            }
            tfvm_value_release(&r[k]);
            tfvm_value_release(&want[k]);
        }
        e.vm->hook = NULL;
        tfvm_tensor_free(t);
        env_close(&e);
    }
}
END_TEST

/* ---- Two VMs, one program, one shared input tensor, two threads ------------------ */
typedef struct shared_run {
    const tfvm_program *p;
    tfvm_tensor *x;
} shared_run;

static void *tensor_loop_thread(void *arg)
{
    shared_run *s = arg;
    tfvm_vm *vm;
    if (tfvm_vm_new(s->p, NULL, &vm) != TFVM_OK)
        return (void *)1;
    intptr_t bad = 0;
    for (int i = 0; i < 20; i++) {
        tfvm_value args[2] = {tfvm_tensor_value(s->x), tfvm_i32(10)}, r[2];
        if (tfvm_run(vm, "main", args, 2, r, 2) != TFVM_OK) {
            bad = 1;
            continue;
        }
        const double *d = tfvm_tensor_cdata(r[0].tensor);
        if (d[0] != 1.0 / 1024 || r[1].as.i32 != 10)
            bad = 1;
        tfvm_value_release(&r[0]);
    }
    tfvm_vm_free(vm);
    return (void *)bad;
}

START_TEST(two_vms_share_program_and_tensor)
{
    tfvm_program *p = NULL;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_assemble(TENSOR_LOOP, strlen(TENSOR_LOOP), "t.tfasm", NULL, &p, &err), TFVM_OK);
    int64_t two = 2;
    tfvm_tensor *x = tfvm_tensor_new(TFVM_F64, 1, &two, NULL);
    ((double *)tfvm_tensor_data(x))[0] = 1.0;
    shared_run s = {p, x};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, tensor_loop_thread, &s), 0);
    for (int i = 0; i < 2; i++) {
        void *bad;
        pthread_join(t[i], &bad);
        ck_assert_ptr_null(bad);
    }
    ck_assert_uint_eq(atomic_load(&x->refs), 1);
    tfvm_tensor_free(x);
    tfvm_program_free(p);
}
END_TEST

/* ---- Allocation failure: loops, tensors, late const ENTERs, calls ---------------- */

/* Runs `text` twice on one VM with its allocator failing at the n-th
 * allocation, for n = 0, 1, ... until both runs succeed: every failure must be
 * a clean TFVM_ERR_NOMEM, with no byte and no tensor reference leaked. */
typedef void (*alloc_case_fn)(tfvm_vm *vm, tfvm_tensor *x, tfvm_status *st);

static void allocation_failure_loop(const char *text, alloc_case_fn fn, long min_points)
{
    int64_t two = 2;
    tfvm_tensor *x = tfvm_tensor_new(TFVM_F64, 1, &two, NULL); /* not subject to failure */
    ((double *)tfvm_tensor_data(x))[0] = 1.0;
    ((double *)tfvm_tensor_data(x))[1] = 2.0;
    bool succeeded = false;
    long n;
    for (n = 0; n < 100000 && !succeeded; n++) {
        tu_alloc f = {.countdown = n};
        tfvm_config cfg;
        tfvm_config_init(&cfg);
        cfg.allocator = tu_allocator(&f);
        cfg.deterministic = true; /* tu_alloc_fn is not thread-safe */
        tfvm_error err;
        tfvm_program *p = NULL;
        tfvm_vm *vm = NULL;
        tfvm_status st = tfvm_program_assemble(text, strlen(text), "t.tfasm", &cfg, &p, &err);
        if (st == TFVM_OK)
            st = tfvm_vm_new(p, &cfg, &vm);
        /* twice on one VM: the second run starts from recycled contexts */
        for (int k = 0; k < 2 && st == TFVM_OK; k++) {
            fn(vm, x, &st);
            if (st == TFVM_OK)
                succeeded = k == 1;
            else
                ck_assert_msg(strstr(tfvm_errmsg(vm), "out of memory"), "n=%ld: %s", n, tfvm_errmsg(vm));
        }
        ck_assert_msg(st == TFVM_OK || st == TFVM_ERR_NOMEM, "n=%ld: status %s (%s)", n, tfvm_status_name(st),
                      vm ? tfvm_errmsg(vm) : err.message);
        ck_assert_msg(st == TFVM_OK || f.failures > 0, "n=%ld: failed without an allocation failure", n);
        tfvm_vm_free(vm);
        tfvm_program_free(p);
        ck_assert_msg(f.live == 0, "n=%ld: %ld bytes leaked", n, f.live);
        ck_assert_msg(atomic_load(&x->refs) == 1, "n=%ld: input tensor has %u references", n,
                      atomic_load(&x->refs));
    }
    ck_assert(succeeded);
    ck_assert_int_gt(n, min_points);
    tfvm_tensor_free(x);
}

static void tensor_loop_case(tfvm_vm *vm, tfvm_tensor *x, tfvm_status *st)
{
    tfvm_value args[2] = {tfvm_tensor_value(x), tfvm_i32(5)}, r[2];
    *st = tfvm_run(vm, "main", args, 2, r, 2);
    if (*st == TFVM_OK) {
        check_tensor_loop(r, 5);
        tfvm_value_release(&r[0]);
    }
}

START_TEST(allocation_failure_tensor_loop)
{
    allocation_failure_loop(TENSOR_LOOP, tensor_loop_case, 50);
}
END_TEST

/* 300 MERGEs in a function, each first hearing a dead token, then the tensor:
 * the 300 activations made by one firing grow the activation queue, so an
 * allocation fails while a token (holding a tensor reference) is being queued,
 * and while MERGEs hand their partial match over to an activation. */
#define FANOUT 300
static char *fanout_text(void)
{
    size_t cap = 64 * FANOUT + 1024, len = 0;
    char *t = malloc(cap);
    ck_assert_ptr_nonnull(t);
    len += (size_t)snprintf(t + len, cap - len,
                            "entry main(x: f64[]) -> (r: f64[]) {\n"
                            "    x  = ARG 0\n"
                            "    c  = CALL g@0 (x)\n"
                            "    r  = RETURN g@0 (g.m%d)\n"
                            "         RESULT 0 (r)\n"
                            "}\n"
                            "func g {\n"
                            "    x  = IDENTITY (main.c)\n"
                            "    f  = CONST bool false [x]\n"
                            "    d  = SWITCH (x, f)\n"
                            "    y  = IDENTITY (d:0)\n",
                            FANOUT - 1);
    for (int k = 0; k < FANOUT; k++)
        len += (size_t)snprintf(t + len, cap - len, "    m%d = MERGE (d:1, y)\n", k);
    snprintf(t + len, cap - len, "}\n");
    return t;
}

static void fanout_case(tfvm_vm *vm, tfvm_tensor *x, tfvm_status *st)
{
    tfvm_value a = tfvm_tensor_value(x), r;
    *st = tfvm_run(vm, "main", &a, 1, &r, 1);
    if (*st == TFVM_OK) {
        ck_assert_ptr_eq(r.tensor, x);
        tfvm_value_release(&r);
    }
}

START_TEST(allocation_failure_fanout)
{
    char *text = fanout_text();
    allocation_failure_loop(text, fanout_case, 10);
    free(text);
}
END_TEST

int main(void)
{
    snprintf(LATE_CONST_P8, sizeof LATE_CONST_P8, LATE_CONST, " parallel=8");
    Suite *s = suite_create("vm_stress");
    TCase *tc = tcase_create("stress");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, fib25_peak_in_the_tens);
    tcase_add_test(tc, million_iterations_bounded);
    tcase_add_test(tc, late_enter_const_after_iterations);
    tcase_add_test(tc, late_enter_of_a_loop_variable);
    tcase_add_test(tc, nested_loops_in_recursion);
    tcase_add_test(tc, call_in_loop_body);
    tcase_add_test(tc, mutual_recursion);
    tcase_add_test(tc, unused_parameter_releases_its_tensor);
    tcase_add_test(tc, call_feeding_return_directly);
    tcase_add_test(tc, return_dispatch_by_site);
    tcase_add_test(tc, partly_dead_call);
    tcase_add_test(tc, partly_dead_loop_deep_in_recursion);
    tcase_add_test(tc, dead_loop_and_call_answer_once_per_exit);
    tcase_add_test(tc, merge_index_and_all_dead);
    tcase_add_test(tc, single_input_merge);
    tcase_add_test(tc, switch_on_a_tensor_predicate);
    tcase_add_test(tc, error_deep_in_recursion_releases_everything);
    tcase_add_test(tc, tensors_through_loop_and_call);
    tcase_add_test(tc, second_token_for_enter_const);
    tcase_add_test(tc, max_contexts_limit);
    tcase_add_test(tc, endless_recursion_default_bound);
    tcase_add_test(tc, stuck_deep_recursion_diagnosis_is_capped);
    tcase_add_test(tc, interrupt_from_another_thread);
    tcase_add_test(tc, interrupt_says_where);
    tcase_add_test(tc, abandoned_runs_are_released);
    tcase_add_test(tc, integer_steps_as_frames_and_contexts);
    tcase_add_test(tc, integer_steps_other_tokens);
    tcase_add_test(tc, integer_steps_on_tensors);
    tcase_add_test(tc, switch_group_as_frames_and_contexts);
    tcase_add_test(tc, max_contexts_sweep);
    tcase_add_test(tc, stop_at_every_step);
    tcase_add_test(tc, two_vms_share_program_and_tensor);
    tcase_add_test(tc, allocation_failure_tensor_loop);
    tcase_add_test(tc, allocation_failure_fanout);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
