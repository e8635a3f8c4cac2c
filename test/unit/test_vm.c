/* test/unit/test_vm.c — the VM's token semantics through the public API:
 * recursion, loops, deadness, the parallel bound, every runtime error with its
 * exact message, context reclamation, two VMs at once, and a run that fails
 * the Nth allocation for every N. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "tfvm.h"

static const char *FIB =
    "entry main(n: i32) -> (r: i32) {\n"
    "    a    = ARG 0\n"
    "    c    = CALL fib@0 (a)\n"
    "    r    = RETURN fib@0 (fib.res)\n"
    "           RESULT 0 (r)\n"
    "}\n"
    "func fib {\n"
    "    n    = IDENTITY (main.c | c1 | c2)\n"
    "    one  = CONST i32 1 [n]\n"
    "    two  = CONST i32 2 [n]\n"
    "    le   = LESS_EQUAL (n, one)\n"
    "    sn   = SWITCH (n, le)\n"
    "    base = CONST i32 1 [sn:1]\n"
    "    n1   = SUB (sn:0, one)\n"
    "    c1   = CALL fib@1 (n1)\n"
    "    n2   = SUB (sn:0, two)\n"
    "    c2   = CALL fib@2 (n2)\n"
    "    r1   = RETURN fib@1 (res)\n"
    "    r2   = RETURN fib@2 (res)\n"
    "    sum  = ADD (r1, r2)\n"
    "    res  = MERGE (base, sum)\n"
    "}\n";

/* sum of 1..n with a while loop; PAR is replaced by the ENTER options */
static const char *SUM_LOOP =
    "entry main(n: i64) -> (s: i64) {\n"
    "    n     = ARG 0\n"
    "    zero  = CONST i64 0\n"
    "    one   = CONST i64 1\n"
    "    ei    = ENTER sum_loop%s (one)\n"
    "    es    = ENTER sum_loop (zero)\n"
    "    en    = ENTER sum_loop const (n)\n"
    "           RESULT 0 (sum_loop.out)\n"
    "}\n"
    "loop sum_loop in main {\n"
    "    i    = MERGE (ei, ni)\n"
    "    s    = MERGE (es, ns)\n"
    "    k1   = CONST i64 1 [i]\n"
    "    p    = LESS_EQUAL (i, en)\n"
    "    c    = LOOPCOND (p)\n"
    "    si   = SWITCH (i, c)\n"
    "    ss   = SWITCH (s, c)\n"
    "    i2   = ADD (si:1, k1)\n"
    "    s2   = ADD (ss:1, si:1)\n"
    "    ni   = NEXTITER (i2)\n"
    "    ns   = NEXTITER (s2)\n"
    "    out  = EXIT sum_loop (ss:0)\n"
    "}\n";

static tfvm_program *assemble(const char *text, const tfvm_config *cfg)
{
    tfvm_program *p = NULL;
    tfvm_error err;
    tfvm_status st = tfvm_program_assemble(text, strlen(text), "t.tfasm", cfg, &p, &err);
    ck_assert_msg(st == TFVM_OK, "assemble: %s", err.message);
    return p;
}

/* Which scheduler run1 uses: the semantic tests run once per policy
 * (loop index 0: deterministic, 1: work stealing on 2 threads). */
static bool run_deterministic = true;
static int run_threads = 1;

static void use_policy(int i)
{
    run_deterministic = i == 0;
    run_threads = i == 0 ? 1 : 2;
}

/* Runs entry main with one argument; returns the status, fills *out and the
 * VM's message. */
static tfvm_status run1(const char *text, tfvm_value arg, tfvm_value *out, char *msg, size_t msg_size,
                        tfvm_stats *stats)
{
    tfvm_program *p = assemble(text, NULL);
    tfvm_vm *vm;
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.deterministic = run_deterministic;
    cfg.threads = run_threads;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    tfvm_status st = tfvm_run(vm, "main", &arg, 1, out, 1);
    if (msg)
        snprintf(msg, msg_size, "%s", tfvm_errmsg(vm));
    if (stats)
        tfvm_vm_stats(vm, stats);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
    return st;
}

START_TEST(fib_recursion)
{
    use_policy(_i);
    static const int32_t want[] = {1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89};
    for (int n = 0; n <= 10; n++) {
        tfvm_value r;
        ck_assert_int_eq(run1(FIB, tfvm_i32(n), &r, NULL, 0, NULL), TFVM_OK);
        ck_assert_int_eq(r.dtype, TFVM_I32);
        ck_assert_int_eq(r.as.i32, want[n]);
    }
    tfvm_value r;
    tfvm_stats s;
    ck_assert_int_eq(run1(FIB, tfvm_i32(20), &r, NULL, 0, &s), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 10946);
    /* depth-first: live contexts follow the recursion depth, not the call count */
    ck_assert_uint_gt(s.contexts_created, 20000);
    ck_assert_uint_le(s.contexts_peak, run_threads * (2 * 20 + 2));
}
END_TEST

START_TEST(loop_sum_and_parallel_bound)
{
    use_policy(_i);
    char text[2048];
    snprintf(text, sizeof text, SUM_LOOP, "");
    tfvm_value r;
    tfvm_stats s;
    ck_assert_int_eq(run1(text, tfvm_i64(100000), &r, NULL, 0, &s), TFVM_OK);
    ck_assert_int_eq(r.as.i64, 5000050000LL);
    ck_assert_uint_le(s.contexts_peak, 1 + 10); /* root + at most parallel=10 iterations */
    ck_assert_uint_eq(s.fired, 1200019);           /* the same work under every policy */
    ck_assert_int_eq(run1(text, tfvm_i64(0), &r, NULL, 0, NULL), TFVM_OK);
    ck_assert_int_eq(r.as.i64, 0);

    /* parallel=1: one iteration at a time, same answer */
    snprintf(text, sizeof text, SUM_LOOP, " parallel=1");
    ck_assert_int_eq(run1(text, tfvm_i64(1000), &r, NULL, 0, &s), TFVM_OK);
    ck_assert_int_eq(r.as.i64, 500500);
    ck_assert_uint_le(s.contexts_peak, 1 + 2);
}
END_TEST

/* if x > 0 then fib(x) else -1: the untaken branch holds a call and a loop */
static const char *COND =
    "entry main(x: i32) -> (r: i32) {\n"
    "    x    = ARG 0\n"
    "    zero = CONST i32 0\n"
    "    m1   = CONST i32 -1\n"
    "    pos  = GREATER (x, zero)\n"
    "    sx   = SWITCH (x, pos)\n"
    "    neg  = CONST i32 -1 [sx:0]\n"
    "    c    = CALL fib@0 (sx:1)\n"
    "    f    = RETURN fib@0 (fib.res)\n"
    "    e    = ENTER lp (sx:1)\n"
    "    sum  = ADD (f, lp.out)\n"
    "    r    = MERGE (neg, sum)\n"
    "           RESULT 0 (r)\n"
    "}\n"
    "loop lp in main {\n"
    "    v    = MERGE (e, nv)\n"
    "    k    = CONST i32 0 [v]\n"
    "    p    = GREATER (v, k)\n"
    "    sv   = SWITCH (v, p)\n"
    "    one  = CONST i32 1 [v]\n"
    "    d    = SUB (sv:1, one)\n"
    "    nv   = NEXTITER (d)\n"
    "    out  = EXIT lp (sv:0)\n"
    "}\n"
    "func fib {\n"
    "    n    = IDENTITY (main.c | c1 | c2)\n"
    "    one  = CONST i32 1 [n]\n"
    "    two  = CONST i32 2 [n]\n"
    "    le   = LESS_EQUAL (n, one)\n"
    "    sn   = SWITCH (n, le)\n"
    "    base = CONST i32 1 [sn:1]\n"
    "    n1   = SUB (sn:0, one)\n"
    "    c1   = CALL fib@1 (n1)\n"
    "    n2   = SUB (sn:0, two)\n"
    "    c2   = CALL fib@2 (n2)\n"
    "    r1   = RETURN fib@1 (res)\n"
    "    r2   = RETURN fib@2 (res)\n"
    "    sum  = ADD (r1, r2)\n"
    "    res  = MERGE (base, sum)\n"
    "}\n";

/* The end of an entry that returns the sum of loop L's result, and the
 * head of L: while ei | ni < en, si:1 the counter */
#define SUM_THEN_LOOP                                                                                              \
    "    r    = REDUCE_SUM (L.out, all)\n"                                                                          \
    "           RESULT 0 (r)\n"                                                                                     \
    "}\n"                                                                                                           \
    "loop L in main {\n"                                                                                            \
    "    p    = LESS (ei | ni, en)\n"                                                                               \
    "    c    = LOOPCOND (p)\n"                                                                                     \
    "    si   = SWITCH (ei | ni, c)\n"

/* A loop's stack (STACK_PUT) that a later step of the same iteration reads
 * again: a_{i+1} = CONCAT(a_i, STACK_PUT(a_i, i, i)). The STACK_PUT may grow
 * a stack in place only when nothing reads it after: here the CONCAT must
 * see a_i as it was (a sum of 3 for n = 3, 9 for n = 4; with a_i grown
 * under it, 4 and 12). The loop variable's SWITCH sends it, while looping,
 * to a side without consumers. */
static const char *STACK_REREAD =
    "entry main(n: i64) -> (r: i64) {\n"
    "    n    = ARG 0\n"
    "    zero = CONST i64 0\n"
    "    one  = CONST i64 1\n"
    "    acc  = CONST i64[0] []\n"
    "    ei   = ENTER L (zero)\n"
    "    ea   = ENTER L (acc)\n"
    "    en   = ENTER L const (n)\n"
    "    e1   = ENTER L const (one)\n"
    "    all  = CONST i64[1] [0]\n"
    SUM_THEN_LOOP
    "    put  = STACK_PUT (ea | na, si:1, si:1)\n"
    "    late = CONCAT axis=0 (ea | na, put)\n"
    "    i2   = ADD (si:1, e1)\n"
    "    ni   = NEXTITER (i2)\n"
    "    na   = NEXTITER (late)\n"
    "    sa   = SWITCH (ea | na, c)\n"
    "    out  = EXIT L (sa:0)\n"
    "}\n";

START_TEST(stack_reread_after_put)
{
    use_policy(_i);
    const int64_t want[][2] = {{0, 0}, {1, 0}, {2, 1}, {3, 3}, {4, 9}};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        tfvm_value r;
        char msg[256];
        ck_assert_msg(run1(STACK_REREAD, tfvm_i64(want[k][0]), &r, msg, sizeof msg, NULL) == TFVM_OK, "n=%lld: %s",
                      (long long)want[k][0], msg);
        ck_assert_int_eq(r.dtype, TFVM_I64);
        ck_assert_msg(r.as.i64 == want[k][1], "n=%lld: sum %lld, want %lld", (long long)want[k][0],
                      (long long)r.as.i64, (long long)want[k][1]);
    }
}
END_TEST

/* A SOFTMAX whose input a later step of the same iteration reads again:
 * d_{i+1} = SUB(d_i, SOFTMAX(d_i)) + 1 on rows of two equal values. The
 * SOFTMAX may write over its input only when nothing reads it after: the SUB
 * must see d_i as it was (each element i after i steps; over d_i it would
 * read 0.5 and give 1). */
static const char *SOFTMAX_REREAD =
    "entry main(n: i64) -> (r: f32) {\n"
    "    n    = ARG 0\n"
    "    zero = CONST i64 0\n"
    "    one  = CONST i64 1\n"
    "    d0   = CONST f32[2, 2] [[0, 0], [0, 0]]\n"
    "    ei   = ENTER L (zero)\n"
    "    ed   = ENTER L (d0)\n"
    "    en   = ENTER L const (n)\n"
    "    e1   = ENTER L const (one)\n"
    "    all  = CONST i64[2] [0, 1]\n"
    SUM_THEN_LOOP
    "    sd   = SWITCH (ed | nd, c)\n"
    "    d2   = ADD (sd:1, f32 0.5)\n"
    "    sm   = SOFTMAX axis=-1 (d2)\n"
    "    late = SUB (d2, sm)\n"
    "    d3   = ADD (late, f32 1)\n"
    "    i2   = ADD (si:1, e1)\n"
    "    ni   = NEXTITER (i2)\n"
    "    nd   = NEXTITER (d3)\n"
    "    out  = EXIT L (sd:0)\n"
    "}\n";

START_TEST(softmax_reread_after)
{
    use_policy(_i);
    for (int64_t n = 0; n < 5; n++) {
        tfvm_value r;
        char msg[256];
        ck_assert_msg(run1(SOFTMAX_REREAD, tfvm_i64(n), &r, msg, sizeof msg, NULL) == TFVM_OK, "n=%lld: %s",
                      (long long)n, msg);
        ck_assert_int_eq(r.dtype, TFVM_F32);
        ck_assert_msg(r.as.f32 == 4.0f * (float)n, "n=%lld: sum %g, want %g", (long long)n, (double)r.as.f32,
                      4.0 * (double)n);
    }
}
END_TEST

/* WORKERS: the run's worker threads, inside a loop as at the root (a loop
 * body runs as a frame on one worker, as dataflow on several) */
static const char *WORKERS_LOOP =
    "entry main(n: i64) -> (r: i64) {\n"
    "    n    = ARG 0\n"
    "    w0   = WORKERS (n)\n"
    "    zero = CONST i64 0\n"
    "    ei   = ENTER L (zero)\n"
    "    ea   = ENTER L (zero)\n"
    "    en   = ENTER L const (n)\n"
    "    r    = MUL (w0, L.out)\n"
    "           RESULT 0 (r)\n"
    "}\n"
    "loop L in main {\n"
    "    p    = LESS (ei | ni, en)\n"
    "    c    = LOOPCOND (p)\n"
    "    si   = SWITCH (ei | ni, c)\n"
    "    w    = WORKERS (si:1)\n"
    "    a2   = ADD (ea | na, w)\n"
    "    i2   = ADD (si:1, i64 1)\n"
    "    ni   = NEXTITER (i2)\n"
    "    na   = NEXTITER (a2)\n"
    "    sa   = SWITCH (ea | na, c)\n"
    "    out  = EXIT L (sa:0)\n"
    "}\n";

START_TEST(workers_of_the_run)
{
    const struct {
        bool deterministic;
        uint32_t threads;
        int64_t want;
    } cases[] = {{true, 1, 1}, {false, 1, 1}, {false, 2, 2}, {false, 3, 3}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        run_deterministic = cases[k].deterministic;
        run_threads = cases[k].threads;
        tfvm_value r;
        char msg[256];
        ck_assert_msg(run1(WORKERS_LOOP, tfvm_i64(5), &r, msg, sizeof msg, NULL) == TFVM_OK, "%s", msg);
        ck_assert_int_eq(r.dtype, TFVM_I64);
        /* w0 * (5 iterations adding w) */
        ck_assert_msg(r.as.i64 == 5 * cases[k].want * cases[k].want, "%u threads: %lld", cases[k].threads,
                      (long long)r.as.i64);
    }
}
END_TEST

START_TEST(deadness_skips_loops_and_calls)
{
    use_policy(_i);
    tfvm_value r;
    tfvm_stats s;
    ck_assert_int_eq(run1(COND, tfvm_i32(10), &r, NULL, 0, &s), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 89); /* fib(10) + (loop counts 10 down to 0) */
    ck_assert_int_eq(run1(COND, tfvm_i32(-3), &r, NULL, 0, &s), TFVM_OK);
    ck_assert_int_eq(r.as.i32, -1);
    /* neither the loop nor the function body ran: only the root and the
     * (dead) call's context were ever made */
    ck_assert_uint_le(s.contexts_created, 2);
}
END_TEST

static void expect_error(const char *text, tfvm_value arg, tfvm_status code, const char *message)
{
    tfvm_value r;
    char msg[512];
    tfvm_status st = run1(text, arg, &r, msg, sizeof msg, NULL);
    ck_assert_msg(st == code, "status %s, want %s (%s)", tfvm_status_name(st), tfvm_status_name(code), msg);
    if (message) /* NULL: which of two racing tokens is reported depends on timing */
        ck_assert_str_eq(msg, message);
}

START_TEST(runtime_errors_name_instruction_and_tag)
{
    use_policy(_i);
    /* a loop entered with one live and one dead token */
    expect_error("entry main(x: i32) -> (r: i32) {\n"
                 "    x  = ARG 0\n"
                 "    t  = CONST bool true\n"
                 "    s  = SWITCH (x, t)\n"
                 "    e1 = ENTER lp (s:1)\n"
                 "    e2 = ENTER lp (s:0)\n"
                 "         RESULT 0 (lp.o)\n"
                 "}\n"
                 "loop lp in main {\n"
                 "    a  = ADD (e1, e2)\n"
                 "    o  = EXIT lp (a)\n"
                 "}\n",
                 tfvm_i32(1), TFVM_ERR_DEADNESS,
                 run_deterministic ? "e1 (ENTER) at []: loop 'lp' entered with live and dead tokens at one tag"
                                   : NULL);
    /* two tokens for one port at one tag */
    expect_error("entry main(x: i32) -> (r: i32) {\n"
                 "    x  = ARG 0\n"
                 "    a  = IDENTITY (x)\n"
                 "    b  = IDENTITY (x)\n"
                 "    s  = ADD (a | b, x)\n"
                 "         RESULT 0 (s)\n"
                 "}\n",
                 tfvm_i32(1), TFVM_ERR_PORT, "s (ADD) at []: two tokens for input 0 at one tag");
    /* integer division by zero, deep in a recursion */
    expect_error("entry main(x: i32) -> (r: i32) {\n"
                 "    x  = ARG 0\n"
                 "    c  = CALL f@7 (x)\n"
                 "    r  = RETURN f@7 (f.q)\n"
                 "         RESULT 0 (r)\n"
                 "}\n"
                 "func f {\n"
                 "    n  = IDENTITY (main.c)\n"
                 "    z  = CONST i32 0 [n]\n"
                 "    q  = DIV (n, z)\n"
                 "}\n",
                 tfvm_i32(1), TFVM_ERR_ARITH, "q (DIV) at [f@7]: integer division by zero");
    /* a predicate that is not a bool */
    expect_error("entry main(x: i32) -> (r: i32) {\n"
                 "    x  = ARG 0\n"
                 "    s  = SWITCH (x, x)\n"
                 "         RESULT 0 (s:1)\n"
                 "}\n",
                 tfvm_i32(1), TFVM_ERR_TYPE, "s (SWITCH) at []: predicate must be a bool scalar, got i32");
    /* a result from the untaken branch */
    expect_error("entry main(x: i32) -> (r: i32) {\n"
                 "    x  = ARG 0\n"
                 "    f  = CONST bool false\n"
                 "    s  = SWITCH (x, f)\n"
                 "         RESULT 0 (s:1)\n"
                 "}\n",
                 tfvm_i32(1), TFVM_ERR_STUCK,
                 "result 0 'r' of entry 'main' received a dead token (no branch produced it)");
}
END_TEST

START_TEST(stuck_run_diagnosis)
{
    use_policy(_i);
    /* y waits for itself: the result can never arrive */
    expect_error("entry main(x: i32) -> (r: i32) {\n"
                 "    x  = ARG 0\n"
                 "    c  = CALL f@3 (x)\n"
                 "    r  = RETURN f@3 (f.y)\n"
                 "         RESULT 0 (r)\n"
                 "}\n"
                 "func f {\n"
                 "    n  = IDENTITY (main.c)\n"
                 "    y  = ADD (n, y)\n"
                 "}\n",
                 tfvm_i32(1), TFVM_ERR_STUCK,
                 "run stuck: result 0 'r' never arrived; waiting: y (ADD) at [f@3] has input 0, missing input 1");
    /* Bodies without a cycle run as sequential frames (on one worker
     * always): g's a waits for the pruned side of s, so f's b waits for g's
     * RETURN. A frame keeps nothing once it ends, yet the diagnosis names
     * both, as it does for contexts (issue 27 row 15: "no instruction holds
     * a partial match"). Contexts list the oldest first; frames in the order
     * they ended, the innermost first. */
    expect_error("entry main(x: i32) -> (r: i32) {\n"
                 "    x  = ARG 0\n"
                 "    c  = CALL f@0 (x)\n"
                 "    r  = RETURN f@0 (f.b)\n"
                 "         RESULT 0 (r)\n"
                 "}\n"
                 "func f {\n"
                 "    n  = IDENTITY (main.c)\n"
                 "    c  = CALL g@1 (n)\n"
                 "    r  = RETURN g@1 (g.a)\n"
                 "    b  = SUB (n, r)\n"
                 "}\n"
                 "func g {\n"
                 "    n  = IDENTITY (f.c)\n"
                 "    t  = CONST bool false [n]\n"
                 "    s  = SWITCH prune_true (n, t)\n"
                 "    a  = ADD (s:1, n)\n"
                 "}\n",
                 tfvm_i32(1), TFVM_ERR_STUCK,
                 _i == 0 ? "run stuck: result 0 'r' never arrived; waiting: a (ADD) at [f@0, g@1] has input 1, missing "
                           "input 0; b (SUB) at [f@0] has input 0, missing input 1"
                         : "run stuck: result 0 'r' never arrived; waiting: b (SUB) at [f@0] has input 0, missing "
                           "input 1; a (ADD) at [f@0, g@1] has input 1, missing input 0");
}
END_TEST

/* ---- constant operands and pruned SWITCH outputs ----------------------------- */
/* A constant on each data port of SELECT (0: the condition, 1, 2), and on
 * both ports of SUB; each SELECT's result is weighted so that a constant
 * read from the wrong port shows. */
static const char *IMM_PORTS =
    "entry main(x: i32) -> (r: i32) {\n"
    "    x  = ARG 0\n"
    "    a  = SUB (i32 100, x)\n"           /* port 0; one token left: no matching */
    "    b  = SUB (a, i32 1)\n"             /* port 1 */
    "    p  = GREATER (x, i32 0)\n"
    "    s0 = SELECT (bool false, a, b)\n"  /* b */
    "    s1 = SELECT (p, i32 7, a)\n"       /* p ? 7 : a */
    "    s2 = SELECT (p, b, i32 -5)\n"      /* p ? b : -5 */
    "    t  = MUL (s1, i32 1000)\n"
    "    u  = MUL (i32 1000000, s2)\n"
    "    v  = ADD (s0, t)\n"
    "    r  = ADD (v, u)\n"
    "         RESULT 0 (r)\n"
    "}\n";

/* Dead tokens pass through instructions with a constant operand, matched
 * (SELECT: two tokens) or not (SUB: one). */
static const char *IMM_DEAD =
    "entry main(x: i32) -> (r: i32) {\n"
    "    x  = ARG 0\n"
    "    p  = GREATER (x, i32 0)\n"
    "    s  = SWITCH (x, p)\n"
    "    a  = SELECT (p, s:1, i32 -1)\n"
    "    b  = SUB (i32 0, s:0)\n"
    "    r  = MERGE (a, b)\n"
    "         RESULT 0 (r)\n"
    "}\n";

/* FIB with its CONSTs turned into constant operands: live at every tag of
 * the function, and two firings per call fewer. */
static const char *FIB_IMM =
    "entry main(n: i32) -> (r: i32) {\n"
    "    a    = ARG 0\n"
    "    c    = CALL fib@0 (a)\n"
    "    r    = RETURN fib@0 (fib.res)\n"
    "           RESULT 0 (r)\n"
    "}\n"
    "func fib {\n"
    "    n    = IDENTITY (main.c | c1 | c2)\n"
    "    le   = LESS_EQUAL (n, i32 1)\n"
    "    sn   = SWITCH (n, le)\n"
    "    base = CONST i32 1 [sn:1]\n"
    "    n1   = SUB (sn:0, i32 1)\n"
    "    c1   = CALL fib@1 (n1)\n"
    "    n2   = SUB (sn:0, i32 2)\n"
    "    c2   = CALL fib@2 (n2)\n"
    "    r1   = RETURN fib@1 (res)\n"
    "    r2   = RETURN fib@2 (res)\n"
    "    sum  = ADD (r1, r2)\n"
    "    res  = MERGE (base, sum)\n"
    "}\n";

/* BRANCH OP c: every comparison, on both sides of c; the data, not the
 * predicate, is what comes out; a dead input makes both outputs dead. */
static const char *BRANCH_OPS = "entry main(n: i64) -> (r: i64) {\n"
                                "    n  = ARG 0\n"
                                "    b0 = BRANCH LESS i64 3 (n)\n"
                                "    b1 = BRANCH LESS_EQUAL i64 3 (n)\n"
                                "    b2 = BRANCH GREATER i64 3 (n)\n"
                                "    b3 = BRANCH GREATER_EQUAL i64 3 (n)\n"
                                "    b4 = BRANCH EQUAL i64 3 (n)\n"
                                "    b5 = BRANCH NOT_EQUAL i64 3 (n)\n"
                                "    t0 = MERGE (b0:1, c0)\n"
                                "    c0 = CONST i64 0 [b0:0]\n"
                                "    t1 = MERGE (b1:1, c1)\n"
                                "    c1 = CONST i64 0 [b1:0]\n"
                                "    t2 = MERGE (b2:1, c2)\n"
                                "    c2 = CONST i64 0 [b2:0]\n"
                                "    t3 = MERGE (b3:1, c3)\n"
                                "    c3 = CONST i64 0 [b3:0]\n"
                                "    t4 = MERGE (b4:1, c4)\n"
                                "    c4 = CONST i64 0 [b4:0]\n"
                                "    t5 = MERGE (b5:1, c5)\n"
                                "    c5 = CONST i64 0 [b5:0]\n"
                                "    w1 = MUL (t1, i64 10)\n"
                                "    w2 = MUL (t2, i64 100)\n"
                                "    w3 = MUL (t3, i64 1000)\n"
                                "    w4 = MUL (t4, i64 10000)\n"
                                "    w5 = MUL (t5, i64 100000)\n"
                                "    s1 = ADD (t0, w1)\n"
                                "    s2 = ADD (s1, w2)\n"
                                "    s3 = ADD (s2, w3)\n"
                                "    s4 = ADD (s3, w4)\n"
                                "    s5 = ADD (s4, w5)\n"
                                "         RESULT 0 (s5)\n"
                                "}\n";

/* A float BRANCH (the kernels' path), deadness, and a tensor's error. */
static const char *BRANCH_F64 = "entry main(x: f64) -> (r: f64) {\n"
                                "    x = ARG 0\n"
                                "    s = SWITCH (x, t)\n"
                                "    t = GREATER (x, f64 -100)\n"
                                "    b = BRANCH LESS f64 0.5 prune_true (s:1)\n"
                                "    n = NEG (b:0)\n"
                                "    m = MERGE (b:1, n, s:0)\n"
                                "        RESULT 0 (m)\n"
                                "}\n";

START_TEST(branch)
{
    use_policy(_i);
    tfvm_value r;
    /* n = 3: LESS no, LESS_EQUAL yes, GREATER no, GREATER_EQUAL yes, EQUAL yes, NOT_EQUAL no */
    ck_assert_int_eq(run1(BRANCH_OPS, tfvm_i64(3), &r, NULL, 0, NULL), TFVM_OK);
    ck_assert_int_eq(r.as.i64, 3 * 10 + 3 * 1000 + 3 * 10000);
    ck_assert_int_eq(run1(BRANCH_OPS, tfvm_i64(2), &r, NULL, 0, NULL), TFVM_OK);
    ck_assert_int_eq(r.as.i64, 2 + 2 * 10 + 2 * 100000);
    ck_assert_int_eq(run1(BRANCH_OPS, tfvm_i64(7), &r, NULL, 0, NULL), TFVM_OK);
    ck_assert_int_eq(r.as.i64, 7 * 100 + 7 * 1000 + 7 * 100000);
    ck_assert_int_eq(run1(BRANCH_F64, tfvm_f64(0.25), &r, NULL, 0, NULL), TFVM_OK);
    ck_assert(r.as.f64 == 0.25);
    ck_assert_int_eq(run1(BRANCH_F64, tfvm_f64(2.0), &r, NULL, 0, NULL), TFVM_OK);
    ck_assert(r.as.f64 == -2.0);
    /* x <= -100: the BRANCH gets a dead token and says dead on both sides */
    ck_assert_int_eq(run1(BRANCH_F64, tfvm_f64(-200.0), &r, NULL, 0, NULL), TFVM_OK);
    ck_assert(r.as.f64 == -200.0);
    /* a dtype that does not match the constant is the comparison's error */
    char msg[256];
    ck_assert_int_eq(run1("entry main(n: i32) -> (r: i32) {\n"
                          "    n = ARG 0\n"
                          "    b = BRANCH LESS i64 3 (n)\n"
                          "    m = MERGE (b:0, b:1)\n"
                          "        RESULT 0 (m)\n"
                          "}\n",
                          tfvm_i32(1), &r, msg, sizeof msg, NULL),
                     TFVM_ERR_TYPE);
    ck_assert_str_eq(msg, "b (BRANCH) at []: dtype mismatch: i32 and i64");
    /* a tensor's comparison is a bool tensor, not a predicate: in the graph,
     * and in a function (a sequential frame with one thread) */
    static const struct {
        const char *text, *want;
    } tensor_cases[] = {
        {"entry main(n: i32) -> (r: i32[]) {\n"
         "    n = ARG 0\n"
         "    t = MUL (i32[2] [1, 2], n)\n"
         "    b = BRANCH LESS i32 3 (t)\n"
         "    m = MERGE (b:0, b:1)\n"
         "        RESULT 0 (m)\n"
         "}\n",
         "b (BRANCH) at []: predicate must be a bool scalar, got a bool tensor"},
        {"entry main(n: i32) -> (r: i32[]) {\n"
         "    n = ARG 0\n"
         "    c = CALL f@1 (n)\n"
         "    r = RETURN f@1 (f.m)\n"
         "        RESULT 0 (r)\n"
         "}\n"
         "func f {\n"
         "    a = IDENTITY (main.c)\n"
         "    t = MUL (i32[2] [1, 2], a)\n"
         "    b = BRANCH LESS i32 3 (t)\n"
         "    m = MERGE (b:0, b:1)\n"
         "}\n",
         "b (BRANCH) at [f@1]: predicate must be a bool scalar, got a bool tensor"},
    };
    for (size_t k = 0; k < sizeof tensor_cases / sizeof tensor_cases[0]; k++) {
        tfvm_status st = run1(tensor_cases[k].text, tfvm_i32(1), &r, msg, sizeof msg, NULL);
        ck_assert_msg(st == TFVM_ERR_TYPE, "case %zu: %s", k, tfvm_status_name(st));
        ck_assert_msg(strcmp(msg, tensor_cases[k].want) == 0, "case %zu: %s", k, msg);
    }
}
END_TEST

START_TEST(constant_operands)
{
    use_policy(_i);
    tfvm_value r;
    ck_assert_int_eq(run1(IMM_PORTS, tfvm_i32(5), &r, NULL, 0, NULL), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 94 + 7 * 1000 + 94 * 1000000);
    ck_assert_int_eq(run1(IMM_PORTS, tfvm_i32(-3), &r, NULL, 0, NULL), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 102 + 103 * 1000 - 5 * 1000000);
    ck_assert_int_eq(run1(IMM_DEAD, tfvm_i32(4), &r, NULL, 0, NULL), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 4);
    ck_assert_int_eq(run1(IMM_DEAD, tfvm_i32(-2), &r, NULL, 0, NULL), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 2);

    /* a tensor constant operand broadcasts like any operand */
    ck_assert_int_eq(run1("entry main(x: i32) -> (r: i32[]) {\n"
                          "    x = ARG 0\n"
                          "    m = MUL (i32[3] [1, 2, 3], x)\n"
                          "    RESULT 0 (m)\n"
                          "}\n",
                          tfvm_i32(7), &r, NULL, 0, NULL),
                     TFVM_OK);
    ck_assert_ptr_nonnull(r.tensor);
    ck_assert_int_eq(tfvm_tensor_count(r.tensor), 3);
    const int32_t *v = tfvm_tensor_cdata(r.tensor);
    ck_assert(v[0] == 7 && v[1] == 14 && v[2] == 21);
    tfvm_value_release(&r);

    /* in a recursive function: same values, 2 firings fewer per call */
    tfvm_stats s, s_imm;
    ck_assert_int_eq(run1(FIB, tfvm_i32(20), &r, NULL, 0, &s), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 10946);
    ck_assert_int_eq(run1(FIB_IMM, tfvm_i32(20), &r, NULL, 0, &s_imm), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 10946);
    uint64_t calls = 2 * 10946 - 1;
    ck_assert_uint_eq(s.fired - s_imm.fired, 2 * calls);
    for (int n = 0; n <= 10; n++) {
        tfvm_value r0;
        ck_assert_int_eq(run1(FIB, tfvm_i32(n), &r0, NULL, 0, NULL), TFVM_OK);
        ck_assert_int_eq(run1(FIB_IMM, tfvm_i32(n), &r, NULL, 0, NULL), TFVM_OK);
        ck_assert_int_eq(r.as.i32, r0.as.i32);
    }
}
END_TEST

START_TEST(pruned_switch)
{
    use_policy(_i);
    /* the untaken output feeds a RESULT through an ADD: a dead token makes a
     * dead result, no token at all makes a stuck run */
    static const char *UNTAKEN = "entry main(x: i32) -> (r: i32) {\n"
                                 "    x  = ARG 0\n"
                                 "    f  = CONST bool false\n"
                                 "    s  = SWITCH%s (x, f)\n"
                                 "    a  = ADD (s:1, x)\n"
                                 "         RESULT 0 (a)\n"
                                 "}\n";
    char text[512];
    snprintf(text, sizeof text, UNTAKEN, "");
    expect_error(text, tfvm_i32(1), TFVM_ERR_STUCK,
                 "result 0 'r' of entry 'main' received a dead token (no branch produced it)");
    snprintf(text, sizeof text, UNTAKEN, " prune_false"); /* prunes the taken side: no change */
    expect_error(text, tfvm_i32(1), TFVM_ERR_STUCK,
                 "result 0 'r' of entry 'main' received a dead token (no branch produced it)");
    snprintf(text, sizeof text, UNTAKEN, " prune_true");
    expect_error(text, tfvm_i32(1), TFVM_ERR_STUCK,
                 "run stuck: result 0 'r' never arrived; waiting: a (ADD) at [] has input 1, missing input 0");
    snprintf(text, sizeof text, UNTAKEN, " prune_false prune_true");
    expect_error(text, tfvm_i32(1), TFVM_ERR_STUCK,
                 "run stuck: result 0 'r' never arrived; waiting: a (ADD) at [] has input 1, missing input 0");
    /* the diagnosis does not list a constant operand among the missing inputs */
    expect_error("entry main(x: i32) -> (r: i32) {\n"
                 "    x  = ARG 0\n"
                 "    f  = CONST bool false\n"
                 "    s  = SWITCH prune_true (x, f)\n"
                 "    a  = SELECT (f, s:1, i32 1)\n"
                 "         RESULT 0 (a)\n"
                 "}\n",
                 tfvm_i32(1), TFVM_ERR_STUCK,
                 "run stuck: result 0 'r' never arrived; waiting: a (SELECT) at [] has input 0, missing input 1");
    /* with nothing else waiting, the diagnosis says so */
    expect_error("entry main(x: i32) -> (r: i32) {\n"
                 "    x  = ARG 0\n"
                 "    f  = CONST bool false\n"
                 "    s  = SWITCH prune_true (x, f)\n"
                 "         RESULT 0 (s:1)\n"
                 "}\n",
                 tfvm_i32(1), TFVM_ERR_STUCK, "run stuck: result 0 'r' never arrived, and no instruction holds a partial match");

    /* where both sides are closed (each ends in the MERGE), pruning changes
     * nothing but the work: the untaken call and loop are never entered */
    const char *sw = strstr(COND, "SWITCH (x, pos)");
    ck_assert_ptr_nonnull(sw);
    char pruned[4096];
    snprintf(pruned, sizeof pruned, "%.*sSWITCH prune_false prune_true%s", (int)(sw - COND), COND,
             sw + strlen("SWITCH"));
    static const int32_t args[] = {10, 1, 0, -3};
    for (size_t k = 0; k < sizeof args / sizeof args[0]; k++) {
        tfvm_value r0, r1;
        tfvm_stats s0, s1;
        ck_assert_int_eq(run1(COND, tfvm_i32(args[k]), &r0, NULL, 0, &s0), TFVM_OK);
        ck_assert_int_eq(run1(pruned, tfvm_i32(args[k]), &r1, NULL, 0, &s1), TFVM_OK);
        ck_assert_int_eq(r1.as.i32, r0.as.i32);
        ck_assert_uint_lt(s1.fired, s0.fired);
        ck_assert_uint_lt(s1.tokens, s0.tokens);
        if (args[k] <= 0)
            ck_assert_uint_eq(s1.contexts_created, 1); /* only the root: no dead call */
    }
}
END_TEST

/* The compiler prunes the SWITCHes of an `if` at -O1 (compiler/prune.c) and
 * not at -O0; both give the same answers under every policy. */
static tfvm_program *compile_at(const char *src, int opt)
{
    tfvm_compile_options o;
    tfvm_compile_options_init(&o);
    o.opt_level = opt;
    tfvm_program *p = NULL;
    tfvm_error err;
    tfvm_status st = tfvm_program_compile(src, strlen(src), "t.tfg", &o, NULL, &p, &err);
    ck_assert_msg(st == TFVM_OK, "compile -O%d: %s", opt, err.message);
    return p;
}

static tfvm_status run_prog(const tfvm_program *p, tfvm_value arg, tfvm_value *out, tfvm_stats *stats)
{
    tfvm_vm *vm;
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.deterministic = run_deterministic;
    cfg.threads = run_threads;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    tfvm_status st = tfvm_run(vm, NULL, &arg, 1, out, 1);
    ck_assert_msg(st == TFVM_OK, "%s", tfvm_errmsg(vm));
    tfvm_vm_stats(vm, stats);
    tfvm_vm_free(vm);
    return st;
}

START_TEST(compiled_if_with_and_without_pruning)
{
    use_policy(_i);
    static const char *srcs[] = {
        "fn sq(x: i64) -> i64 { x * x }\n"
        "fn main(x: i64) -> i64 {\n"
        "    if x > 0 {\n"
        "        let (i, s) = while (i = 1i64, s = 0i64; i <= x) { (i + 1, s + i) };\n"
        "        s\n"
        "    } else {\n"
        "        sq(x) - 1\n"
        "    }\n"
        "}\n",
        "fn fib(n: i64) -> i64 {\n"
        "    if n <= 1 { 1 } else { fib(n - 1) + fib(n - 2) }\n"
        "}\n"
        "fn main(n: i64) -> i64 { if n < 0 { 0 - n } else { fib(n) } }\n",
    };
    static const int64_t args[] = {-4, 0, 1, 5, 15};
    for (size_t k = 0; k < sizeof srcs / sizeof srcs[0]; k++) {
        tfvm_program *p0 = compile_at(srcs[k], 0), *p1 = compile_at(srcs[k], 1);
        for (size_t a = 0; a < sizeof args / sizeof args[0]; a++) {
            tfvm_value r0, r1;
            tfvm_stats s0, s1;
            run_prog(p0, tfvm_i64(args[a]), &r0, &s0);
            run_prog(p1, tfvm_i64(args[a]), &r1, &s1);
            ck_assert_msg(r0.as.i64 == r1.as.i64, "program %zu, x = %lld: -O0 gives %lld, -O1 %lld", k,
                          (long long)args[a], (long long)r0.as.i64, (long long)r1.as.i64);
            ck_assert_uint_le(s1.fired, s0.fired);
        }
        tfvm_program_free(p0);
        tfvm_program_free(p1);
    }
}
END_TEST

START_TEST(argument_checks)
{
    tfvm_program *p = assemble(FIB, NULL);
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(p, NULL, &vm), TFVM_OK);
    tfvm_value r, a = tfvm_f64(2.0);
    ck_assert_int_eq(tfvm_run(vm, "main", &a, 1, &r, 1), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "argument 1 'n' of entry 'main': expected i32, got f64");
    ck_assert_int_eq(tfvm_run(vm, "main", NULL, 0, &r, 1), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "entry 'main' takes 1 argument, got 0");
    ck_assert_int_eq(tfvm_run(vm, "nope", &a, 1, &r, 1), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "no entry point named 'nope'");
    /* the VM is still usable after errors, and NULL entry = the first */
    a = tfvm_i32(15);
    ck_assert_int_eq(tfvm_run(vm, NULL, &a, 1, &r, 1), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 987);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
    tfvm_vm_free(NULL);
    tfvm_program_free(NULL);
}
END_TEST

/* Two VMs on one shared program, on two threads at once. */
static void *fib_thread(void *arg)
{
    tfvm_vm *vm;
    if (tfvm_vm_new(arg, NULL, &vm) != TFVM_OK)
        return (void *)1;
    intptr_t bad = 0;
    for (int i = 0; i < 5; i++) {
        tfvm_value a = tfvm_i32(18), r;
        if (tfvm_run(vm, "main", &a, 1, &r, 1) != TFVM_OK || r.as.i32 != 4181)
            bad = 1;
    }
    tfvm_vm_free(vm);
    return (void *)bad;
}

START_TEST(two_vms_in_one_process)
{
    tfvm_program *p = assemble(FIB, NULL);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, fib_thread, p), 0);
    for (int i = 0; i < 2; i++) {
        void *bad;
        pthread_join(t[i], &bad);
        ck_assert_ptr_null(bad);
    }
    tfvm_program_free(p);
}
END_TEST

/* ---- allocation failure: every failure point ends in a clean NOMEM --------- */
START_TEST(allocation_failure_loop)
{
    int succeeded = 0;
    for (long n = 0; n < 100000 && !succeeded; n++) {
        tu_alloc f = {.countdown = n};
        tfvm_config cfg;
        tfvm_config_init(&cfg);
        cfg.allocator = tu_allocator(&f);
        cfg.deterministic = true; /* tu_alloc_fn is not thread-safe */
        tfvm_error err;
        tfvm_program *p = NULL;
        tfvm_vm *vm = NULL;
        tfvm_status st = tfvm_program_assemble(FIB, strlen(FIB), "fib.tfasm", &cfg, &p, &err);
        if (st == TFVM_OK)
            st = tfvm_vm_new(p, &cfg, &vm);
        if (st == TFVM_OK) {
            tfvm_value a = tfvm_i32(12), r;
            st = tfvm_run(vm, "main", &a, 1, &r, 1);
            if (st == TFVM_OK) {
                ck_assert_int_eq(r.as.i32, 233);
                succeeded = 1;
            }
        }
        ck_assert_msg(st == TFVM_OK || st == TFVM_ERR_NOMEM, "n=%ld: status %s", n, tfvm_status_name(st));
        ck_assert_msg(st == TFVM_OK || f.failures > 0, "n=%ld: failed without an allocation failure", n);
        tfvm_vm_free(vm);
        tfvm_program_free(p);
        ck_assert_msg(f.live == 0, "n=%ld: %ld bytes leaked", n, f.live);
    }
    ck_assert(succeeded);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("vm");
    TCase *tc = tcase_create("semantics");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, fib_recursion, 0, 2);
    tcase_add_loop_test(tc, loop_sum_and_parallel_bound, 0, 2);
    tcase_add_loop_test(tc, stack_reread_after_put, 0, 2);
    tcase_add_loop_test(tc, softmax_reread_after, 0, 2);
    tcase_add_test(tc, workers_of_the_run);
    tcase_add_loop_test(tc, deadness_skips_loops_and_calls, 0, 2);
    tcase_add_loop_test(tc, runtime_errors_name_instruction_and_tag, 0, 2);
    tcase_add_loop_test(tc, stuck_run_diagnosis, 0, 2);
    tcase_add_loop_test(tc, constant_operands, 0, 2);
    tcase_add_loop_test(tc, branch, 0, 2);
    tcase_add_loop_test(tc, pruned_switch, 0, 2);
    tcase_add_loop_test(tc, compiled_if_with_and_without_pruning, 0, 2);
    tcase_add_test(tc, argument_checks);
    tcase_add_test(tc, two_vms_in_one_process);
    tcase_add_test(tc, allocation_failure_loop);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
