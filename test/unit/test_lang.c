/* test/unit/test_lang.c — the .tfg statement forms and operators of issue 15:
 * var/assignment/+=, statement if, while and for, return anywhere (each
 * compiled to the same graph as its hand-threaded equivalent: equal firing
 * and instruction counts), short-circuit && ||, bitwise operators, literal
 * typing, --overflow=trap, several errors per compile, warnings, "did you
 * mean", and load() of .npy/.npz constants; and issue 16's feed and fetch:
 * the graphs their order tokens make, what the optimizer keeps, the errors;
 * and issue 32's third pass: break and continue (the hand-threaded graph's
 * counts; Python's results on 1 and 2 threads), loop-carried dtype
 * inference in any statement order, the new compound operators and literals. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"
#include "loader/loader.h"
#include "testutil.h"
#include "tfvm.h"

/* ---- Helpers ----------------------------------------------------------------------------- */

static tfvm_program *compile_with(const char *src, bool trap)
{
    tfvm_compile_options o;
    tfvm_compile_options_init(&o);
    o.overflow_trap = trap;
    tfvm_program *p = NULL;
    tfvm_error err;
    tfvm_status st = tfvm_program_compile(src, strlen(src), "t.tfg", &o, NULL, &p, &err);
    ck_assert_msg(st == TFVM_OK, "compile failed: %s\n%s", err.message, src);
    return p;
}

static tfvm_program *compile(const char *src) { return compile_with(src, false); }

typedef struct run_out {
    tfvm_status st;
    tfvm_value r[12];
    uint64_t fired;
    char msg[512];
} run_out;

/* threads 0: the deterministic mode */
static run_out run_threads(const tfvm_program *p, const tfvm_value *args, size_t n_args, int threads)
{
    run_out o;
    memset(&o, 0, sizeof o);
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.deterministic = threads == 0;
    cfg.threads = threads;
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    tfvm_entry_info e;
    ck_assert_int_eq(tfvm_program_entry(p, 0, &e), TFVM_OK);
    ck_assert_uint_le(e.n_results, 12);
    o.st = tfvm_run(vm, NULL, args, n_args, o.r, e.n_results);
    if (o.st != TFVM_OK)
        snprintf(o.msg, sizeof o.msg, "%s", tfvm_errmsg(vm));
    tfvm_stats s;
    tfvm_vm_stats(vm, &s);
    o.fired = s.fired;
    tfvm_vm_free(vm);
    return o;
}

static run_out run(const tfvm_program *p, const tfvm_value *args, size_t n_args)
{
    return run_threads(p, args, n_args, 0);
}

static int64_t as_int(const tfvm_value *v)
{
    switch (v->dtype) {
    case TFVM_I64: return v->as.i64;
    case TFVM_I32: return v->as.i32;
    case TFVM_BOOL: return v->as.b;
    default: ck_abort_msg("not an integer result"); return 0;
    }
}

/* The integer (or bool) results of main(args) */
static void expect_ints(const char *src, const tfvm_value *args, size_t n_args, const int64_t *want, size_t n)
{
    tfvm_program *p = compile(src);
    run_out o = run(p, args, n_args);
    ck_assert_msg(o.st == TFVM_OK, "run failed: %s\n%s", o.msg, src);
    for (size_t k = 0; k < n; k++)
        ck_assert_msg(as_int(&o.r[k]) == want[k], "result %zu: %lld, want %lld\n%s", k, (long long)as_int(&o.r[k]),
                      (long long)want[k], src);
    tfvm_program_free(p);
}

static uint32_t n_insts(const tfvm_program *p) { return p->isa.n_insts; }

/* ---- Acceptance: the new forms cost what the hand-threaded ones do ------------------------- */

static const struct {
    const char *what, *sugar, *plain;
    tfvm_value args[2];
    size_t n_args;
    int64_t result;
    uint64_t fired;
} pairs[] = {
    {"fib with early return",
     "fn fib(n: i32) -> i32 {\n"
     "    if n <= 1 { return 1; }\n"
     "    return fib(n - 1) + fib(n - 2);\n"
     "}\n"
     "fn main(n: i32) -> i32 { fib(n) }\n",
     "fn fib(n: i32) -> i32 {\n"
     "    if n <= 1 { 1 } else { fib(n - 1) + fib(n - 2) }\n"
     "}\n"
     "fn main(n: i32) -> i32 { fib(n) }\n",
     {{TFVM_I32, NULL, {.i32 = 15}}}, 1, 987, 9866},
    {"nested loops with +=",
     "fn main(n: i32) -> i32 {\n"
     "    var s = 0;\n"
     "    for i in 0..n {\n"
     "        for j in 0..i {\n"
     "            s += i * j;\n"
     "        }\n"
     "    }\n"
     "    s\n"
     "}\n",
     "fn main(n: i32) -> i32 {\n"
     "    let (_, s) = while (i = 0, s = 0; i < n) {\n"
     "        let (_, s2) = while (j = 0, s2 = s; j < i) { (j + 1, s2 + i * j) };\n"
     "        (i + 1, s2)\n"
     "    };\n"
     "    s\n"
     "}\n",
     {{TFVM_I32, NULL, {.i32 = 30}}}, 1, 90335, 4998},
    {"early-return search (found)",
     "fn main(n: i32, t: i32) -> i32 {\n"
     "    for i in 0..n {\n"
     "        if i * i == t {\n"
     "            return i;\n"
     "        }\n"
     "    }\n"
     "    return -1;\n"
     "}\n",
     "fn main(n: i32, t: i32) -> i32 {\n"
     "    let (_, go, r) = while (i = 0, go = true, r = 0; go && i < n) {\n"
     "        if i * i == t { (i, false, i) } else { (i + 1, true, r) }\n"
     "    };\n"
     "    if go { -1 } else { r }\n"
     "}\n",
     {{TFVM_I32, NULL, {.i32 = 100}}, {TFVM_I32, NULL, {.i32 = 49}}}, 2, 7, 192},
    {"early-return search (not found)", NULL, NULL, {{TFVM_I32, NULL, {.i32 = 100}}, {TFVM_I32, NULL, {.i32 = 50}}},
     2, -1, 2034},
    {"while statement",
     "fn main(n: i64) -> i64 {\n"
     "    var x = n;\n"
     "    var steps = 0;\n"
     "    while x != 1 {\n"
     "        if x % 2 == 0 { x /= 2; } else { x = 3 * x + 1; }\n"
     "        steps += 1;\n"
     "    }\n"
     "    steps\n"
     "}\n",
     "fn main(n: i64) -> i64 {\n"
     "    let (x, steps) = while (x = n, steps = 0i64; x != 1) {\n"
     "        let x2 = if x % 2 == 0 { x / 2 } else { 3 * x + 1 };\n"
     "        (x2, steps + 1)\n"
     "    };\n"
     "    steps\n"
     "}\n",
     {{TFVM_I64, NULL, {.i64 = 27}}}, 1, 111, 1393},
    /* issue 32: a break is a flag loop variable the condition tests first */
    {"for with break",
     "fn main(n: i32, t: i32) -> i32 {\n"
     "    var s = 0;\n"
     "    for i in 0..n {\n"
     "        if i == t { break; }\n"
     "        s += i;\n"
     "    }\n"
     "    s\n"
     "}\n",
     "fn main(n: i32, t: i32) -> i32 {\n"
     "    let (_, s, _) = while (i = 0, s = 0, go = true; go && i < n) {\n"
     "        if i == t { (i, s, false) } else { (i + 1, s + i, true) }\n"
     "    };\n"
     "    s\n"
     "}\n",
     {{TFVM_I32, NULL, {.i32 = 100}}, {TFVM_I32, NULL, {.i32 = 10}}}, 2, 45, 217},
    {"for with break (never taken)", NULL, NULL, {{TFVM_I32, NULL, {.i32 = 20}}, {TFVM_I32, NULL, {.i32 = -1}}},
     2, 190, 369},
    {"skip-odd loop with continue",
     "fn main(n: i32) -> i32 {\n"
     "    var s = 0;\n"
     "    for i in 0..n {\n"
     "        if i % 2 == 1 { continue; }\n"
     "        s += i;\n"
     "    }\n"
     "    s\n"
     "}\n",
     "fn main(n: i32) -> i32 {\n"
     "    let (_, s) = while (i = 0, s = 0; i < n) {\n"
     "        if i % 2 == 1 { (i + 1, s) } else { (i + 1, s + i) }\n"
     "    };\n"
     "    s\n"
     "}\n",
     {{TFVM_I32, NULL, {.i32 = 100}}}, 1, 2450, 1472},
    /* issue 32: a bare-literal var fixed by a use after its assignment */
    {"loop-carried inference (issue 32's snippet)",
     "fn main(n: i64) -> i64 {\n"
     "    var x = 1; var h = n; for i in 0..3 { x = x + 1; h = h + x; }\n"
     "    h\n"
     "}\n",
     "fn main(n: i64) -> i64 {\n"
     "    var x: i64 = 1; var h = n; for i in 0..3 { x = x + 1; h = h + x; }\n"
     "    h\n"
     "}\n",
     {{TFVM_I64, NULL, {.i64 = 10}}}, 1, 19, 52},
    {"loop-carried inference, statements swapped",
     "fn main(n: i64) -> i64 {\n"
     "    var x = 1; var h = n; for i in 0..3 { h = h + x; x = x + 1; }\n"
     "    h\n"
     "}\n",
     "fn main(n: i64) -> i64 {\n"
     "    var x: i64 = 1; var h = n; for i in 0..3 { h = h + x; x = x + 1; }\n"
     "    h\n"
     "}\n",
     {{TFVM_I64, NULL, {.i64 = 10}}}, 1, 16, 52},
    {"loop-carried inference, nested loops and a branch",
     "fn main(n: i64) -> i64 {\n"
     "    var x = 1; var h = n;\n"
     "    for i in 0..3 { for j in 0..4 { if j % 2 == 0 { x = x + 1; } h = h + x; } }\n"
     "    h\n"
     "}\n",
     "fn main(n: i64) -> i64 {\n"
     "    var x: i64 = 1; var h = n;\n"
     "    for i in 0..3 { for j in 0..4 { if j % 2 == 0 { x = x + 1; } h = h + x; } }\n"
     "    h\n"
     "}\n",
     {{TFVM_I64, NULL, {.i64 = 10}}}, 1, 64, 309},
    {"loop-carried inference, while",
     "fn main(n: i64) -> i64 {\n"
     "    var x = 1; var h = n; var k = 0;\n"
     "    while k < 5 { x = x * 3; k += 1; h = h + x; }\n"
     "    h\n"
     "}\n",
     "fn main(n: i64) -> i64 {\n"
     "    var x: i64 = 1; var h = n; var k: i32 = 0;\n"
     "    while k < 5 { x = x * 3; k += 1; h = h + x; }\n"
     "    h\n"
     "}\n",
     {{TFVM_I64, NULL, {.i64 = 10}}}, 1, 373, 74},
};

START_TEST(same_firings_as_hand_threaded)
{
    for (size_t c = 0; c < UT_COUNTOF(pairs); c++) {
        size_t s = pairs[c].sugar ? c : c - 1; /* a second run of the previous pair */
        tfvm_program *a = compile(pairs[s].sugar), *b = compile(pairs[s].plain);
        ck_assert_msg(n_insts(a) == n_insts(b), "%s: %u instructions, hand-threaded %u", pairs[c].what, n_insts(a),
                      n_insts(b));
        run_out ra = run(a, pairs[c].args, pairs[c].n_args), rb = run(b, pairs[c].args, pairs[c].n_args);
        ck_assert_msg(ra.st == TFVM_OK && rb.st == TFVM_OK, "%s: %s %s", pairs[c].what, ra.msg, rb.msg);
        ck_assert_int_eq(as_int(&ra.r[0]), pairs[c].result);
        ck_assert_int_eq(as_int(&rb.r[0]), pairs[c].result);
        printf("%s: %llu firings, hand-threaded %llu; %u instructions each\n", pairs[c].what,
               (unsigned long long)ra.fired, (unsigned long long)rb.fired, n_insts(a));
        ck_assert_uint_eq(ra.fired, rb.fired);
        ck_assert_uint_eq(ra.fired, pairs[c].fired);
        tfvm_program_free(a);
        tfvm_program_free(b);
    }
}
END_TEST

/* ---- Statements ---------------------------------------------------------------------------- */

START_TEST(statements)
{
    tfvm_value n5 = tfvm_i32(5), n0 = tfvm_i32(0);
    /* every compound assignment */
    expect_ints("fn main(n: i32) -> i32 {\n"
                "    var x = n;\n"
                "    x += 10; x -= 3; x *= 4; x /= 3; x %= 7;\n"
                "    x\n"
                "}\n",
                &n5, 1, (int64_t[]){((5 + 10 - 3) * 4 / 3) % 7}, 1);
    /* if without else; else-if chains that assign; the value of an if */
    const char *sign = "fn main(n: i32) -> (i32, i32) {\n"
                       "    var s = 0;\n"
                       "    var t = 100;\n"
                       "    if n > 0 { s = 1; }\n"
                       "    if n < 0 { s = -1; t = 0; } else if n == 0 { t = 50; } else { t += n; }\n"
                       "    (s, t)\n"
                       "}\n";
    expect_ints(sign, &n5, 1, (int64_t[]){1, 105}, 2);
    expect_ints(sign, &n0, 1, (int64_t[]){0, 50}, 2);
    tfvm_value m3 = tfvm_i32(-3);
    expect_ints(sign, &m3, 1, (int64_t[]){-1, 0}, 2);
    /* return from an inner loop; several results; an expression statement */
    const char *pair = "fn find(n: i32, t: i32) -> (i32, i32) {\n"
                       "    for i in 0..n {\n"
                       "        var j = 0;\n"
                       "        while j < n {\n"
                       "            if i * j == t { return (i, j); }\n"
                       "            j += 1;\n"
                       "        }\n"
                       "    }\n"
                       "    (-1, -1)\n"
                       "}\n"
                       "fn main(n: i32) -> (i32, i32) {\n"
                       "    find(n, 0);\n"
                       "    let (a, b) = find(n, 12);\n"
                       "    (a, b)\n"
                       "}\n";
    tfvm_value n10 = tfvm_i32(10);
    expect_ints(pair, &n10, 1, (int64_t[]){2, 6}, 2);
    expect_ints(pair, &n5, 1, (int64_t[]){3, 4}, 2);
    tfvm_value n2 = tfvm_i32(2);
    expect_ints(pair, &n2, 1, (int64_t[]){-1, -1}, 2);
    /* return in both branches; statements after a returning if */
    expect_ints("fn f(n: i32) -> i32 {\n"
                "    if n > 3 { return 1; } else if n > 1 { var k = n; k *= 10; return k; }\n"
                "    let z = n - 7;\n"
                "    z\n"
                "}\n"
                "fn main(n: i32) -> (i32, i32, i32) { (f(n), f(2), f(0)) }\n",
                &n5, 1, (int64_t[]){1, 20, -7}, 3);
    /* a for loop over a computed range; the counter is read-only */
    expect_ints("fn main(n: i32) -> i32 {\n"
                "    var p = 1;\n"
                "    for k in n - 2..n + 1 { p *= k; }\n"
                "    p\n"
                "}\n",
                &n5, 1, (int64_t[]){3 * 4 * 5}, 1);
    /* var patterns and shadowing by let */
    expect_ints("fn dm(a: i32, b: i32) -> (i32, i32) { (a / b, a % b) }\n"
                "fn main(n: i32) -> i32 {\n"
                "    var (q, r) = dm(n * 7, 3);\n"
                "    q += r;\n"
                "    let q = q * 2;\n"
                "    q\n"
                "}\n",
                &n5, 1, (int64_t[]){(35 / 3 + 35 % 3) * 2}, 1);
}
END_TEST

/* ---- break and continue (issue 32) --------------------------------------------------------- */

/* search with an early exit from nested loops */
static const char *SEARCH = "fn main(n: i32, t: i32) -> (i32, i32, i32) {\n"
                            "    var fi = -1;\n"
                            "    var fj = -1;\n"
                            "    var steps = 0;\n"
                            "    for i in 0..n {\n"
                            "        for j in 0..n {\n"
                            "            steps += 1;\n"
                            "            if i * j == t { fi = i; fj = j; break; }\n"
                            "        }\n"
                            "        if fi >= 0 { break; }\n"
                            "    }\n"
                            "    (fi, fj, steps)\n"
                            "}\n";
/* a while loop that skips odd numbers and stops early */
static const char *SKIP_ODD = "fn main(n: i32) -> (i32, i32) {\n"
                              "    var s = 0;\n"
                              "    var c = 0;\n"
                              "    var i = 0;\n"
                              "    while i < n {\n"
                              "        i += 1;\n"
                              "        if i % 2 == 1 { continue; }\n"
                              "        if i > 50 { break; }\n"
                              "        s += i;\n"
                              "        c += 1;\n"
                              "    }\n"
                              "    (s, c)\n"
                              "}\n";
/* continue in the outer for, break and continue in an inner `while true`,
 * break in an if ... else */
static const char *INNER_WHILE = "fn main(n: i32) -> (i32, i32) {\n"
                                 "    var s = 0;\n"
                                 "    var k = 0;\n"
                                 "    for i in 0..n {\n"
                                 "        if i % 3 == 0 { continue; }\n"
                                 "        var j = 0;\n"
                                 "        while true {\n"
                                 "            j += 1;\n"
                                 "            if j > i { break; }\n"
                                 "            if j % 2 == 0 { continue; }\n"
                                 "            s += j;\n"
                                 "        }\n"
                                 "        if s > 1000 { k = i; break; } else { k -= 1; }\n"
                                 "    }\n"
                                 "    (s, k)\n"
                                 "}\n";
/* return, break and continue in one loop, also in one if (the flagged if
 * of several jumps: an i32 code) */
static const char *MIXED = "fn m(n: i32) -> i32 {\n"
                           "    var s = 0;\n"
                           "    for i in 0..n {\n"
                           "        if i % 5 == 0 { continue; }\n"
                           "        if i * i > n * 3 { break; }\n"
                           "        if s > 200 { return -s; }\n"
                           "        s += i;\n"
                           "    }\n"
                           "    s\n"
                           "}\n"
                           "fn p(n: i32) -> i32 {\n"
                           "    var s = 0;\n"
                           "    for i in 0..n {\n"
                           "        if i % 7 == 0 {\n"
                           "            if i > 40 { break; }\n"
                           "            if s > 2500 { return -s; }\n"
                           "            if i % 2 == 0 { continue; }\n"
                           "            s += 1000;\n"
                           "        }\n"
                           "        s += i;\n"
                           "    }\n"
                           "    s\n"
                           "}\n"
                           "fn main(n: i32) -> (i32, i32) { (m(n), p(n)) }\n";

/* Expected values computed by the same programs in Python. */
static const struct {
    const char *const *src;
    int32_t args[2];
    size_t n_args;
    int64_t want[3];
    size_t n_want;
} jumps[] = {
    {&SEARCH, {10, 12}, 2, {2, 6, 27}, 3},
    {&SEARCH, {10, 7}, 2, {1, 7, 18}, 3},
    {&SEARCH, {10, 1000}, 2, {-1, -1, 100}, 3},
    {&SEARCH, {30, 551}, 2, {19, 29, 600}, 3},
    {&SKIP_ODD, {100}, 1, {650, 25}, 2},
    {&SKIP_ODD, {7}, 1, {12, 3}, 2},
    {&SKIP_ODD, {0}, 1, {0, 0}, 2},
    {&INNER_WHILE, {100}, 1, {1154, 26}, 2},
    {&INNER_WHILE, {10}, 1, {47, -6}, 2},
    {&INNER_WHILE, {0}, 1, {0, 0}, 2},
    {&MIXED, {10}, 1, {10, 1045}, 2},
    {&MIXED, {30}, 1, {40, 2393}, 2},
    {&MIXED, {100}, 1, {123, -2553}, 2},
    {&MIXED, {1000}, 1, {-203, -2553}, 2},
};

START_TEST(break_continue)
{
    for (size_t c = 0; c < UT_COUNTOF(jumps); c++) {
        tfvm_program *p = compile(*jumps[c].src);
        tfvm_value args[2];
        for (size_t k = 0; k < jumps[c].n_args; k++)
            args[k] = tfvm_i32(jumps[c].args[k]);
        for (int threads = 1; threads <= 2; threads++) {
            run_out o = run_threads(p, args, jumps[c].n_args, threads);
            ck_assert_msg(o.st == TFVM_OK, "case %zu, %d threads: %s", c, threads, o.msg);
            for (size_t k = 0; k < jumps[c].n_want; k++)
                ck_assert_msg(as_int(&o.r[k]) == jumps[c].want[k],
                              "case %zu, %d threads: result %zu is %lld, want %lld", c, threads, k,
                              (long long)as_int(&o.r[k]), (long long)jumps[c].want[k]);
        }
        tfvm_program_free(p);
    }
}
END_TEST

START_TEST(compound_and_literals)
{
    tfvm_value n = tfvm_i32(1000);
    expect_ints("fn main(n: i32) -> (i32, i32, i32, i32, i32) {\n"
                "    var a = n; a &= 0xF0;\n"
                "    var b = n; b |= 0b1;\n"
                "    var c = n; c ^= 1_0;\n"
                "    var d = n; d <<= 3;\n"
                "    var e = n; e >>= 2;\n"
                "    (a, b, c, d, e)\n"
                "}\n",
                &n, 1, (int64_t[]){224, 1001, 994, 8000, 250}, 5);
    /* hex and binary literals are typed like decimal ones: wider than i32 is i64 */
    tfvm_program *p = compile("fn main() -> (i32, i64, i64, i32, i64, i32) {\n"
                              "    (0x7FFF_FFFF, 0xFFFFFFFF, 1_000_000_000_000, 0b1010_1010, 0x1i64, 0XaB)\n"
                              "}\n");
    run_out o = run(p, NULL, 0);
    ck_assert_int_eq(o.st, TFVM_OK);
    ck_assert_int_eq(o.r[0].dtype, TFVM_I32);
    ck_assert_int_eq(o.r[1].dtype, TFVM_I64);
    int64_t want[] = {2147483647, 4294967295ll, 1000000000000ll, 170, 1, 171};
    for (size_t k = 0; k < UT_COUNTOF(want); k++)
        ck_assert_msg(as_int(&o.r[k]) == want[k], "literal %zu: %lld", k, (long long)as_int(&o.r[k]));
    tfvm_program_free(p);
    expect_ints("fn main() -> i64 { let x = 0xFFFFFFFF; x }", NULL, 0, (int64_t[]){4294967295ll}, 1);
    /* a 10^6-iteration LCG written the natural way (issue 32) */
    tfvm_value iters = tfvm_i64(1000);
    expect_ints("fn main(n: i64) -> i64 {\n"
                "    var s = 12345;\n"
                "    for i in 0..n { s = (s * 1103515245 + 12345) % 0x8000_0000; }\n"
                "    s\n"
                "}\n",
                &iters, 1, (int64_t[]){1603858065}, 1);
}
END_TEST

/* ---- Operators and literals --------------------------------------------------------------- */

START_TEST(short_circuit)
{
    const char *src = "fn even(n: i32) -> bool { n == 0 || odd(n - 1) }\n"
                      "fn odd(n: i32) -> bool { n != 0 && even(n - 1) }\n"
                      "fn main(n: i32) -> (bool, bool) { (odd(n), even(n)) }\n";
    tfvm_value n7 = tfvm_i32(7), n10 = tfvm_i32(10);
    expect_ints(src, &n7, 1, (int64_t[]){1, 0}, 2);
    expect_ints(src, &n10, 1, (int64_t[]){0, 1}, 2);
    /* the right side does not run when the left side decides: no division by zero */
    const char *guard = "fn main(n: i32) -> (bool, bool) { (n != 0 && 10 / n > 2, n == 0 || 10 % n == 1) }\n";
    tfvm_value z = tfvm_i32(0), three = tfvm_i32(3);
    expect_ints(guard, &z, 1, (int64_t[]){0, 1}, 2);
    expect_ints(guard, &three, 1, (int64_t[]){1, 1}, 2);
    /* a cheap right side stays one AND; a call or a division makes a branch */
    tfvm_program *p = compile("fn main(a: i32, b: i32) -> bool { a < b && b > 0 }");
    uint32_t ands = 0, switches = 0;
    for (uint32_t i = 0; i < p->isa.n_insts; i++) {
        ands += p->isa.insts[i].op == ISA_AND;
        switches += p->isa.insts[i].op == ISA_SWITCH || p->isa.insts[i].op == ISA_BRANCH;
    }
    ck_assert_uint_eq(ands, 1);
    ck_assert_uint_eq(switches, 0);
    tfvm_program_free(p);
    p = compile("fn main(a: i32, b: i32) -> bool { a != 0 && b / a > 0 }");
    ands = switches = 0;
    for (uint32_t i = 0; i < p->isa.n_insts; i++) {
        ands += p->isa.insts[i].op == ISA_AND;
        switches += p->isa.insts[i].op == ISA_SWITCH || p->isa.insts[i].op == ISA_BRANCH;
    }
    ck_assert_uint_eq(ands, 0);
    ck_assert_uint_gt(switches, 0);
    tfvm_program_free(p);
}
END_TEST

START_TEST(bitwise)
{
    const char *src = "fn main(a: i32, b: i32) -> (i32, i32, i32, i32, i32, i32, i64, bool, bool, bool, bool, i32) {\n"
                      "    let p = a > b;\n"
                      "    let q = b > 0;\n"
                      "    (a & b, a | b, a ^ b, a << 3, a >> 2, ~a, cast<i64>(a) << 40,\n"
                      "     p & q, p | q, p ^ q, ~p, (a ^ b ^ 5) & 7 | 1 << 4)\n"
                      "}\n";
    tfvm_value args[2] = {tfvm_i32(-100), tfvm_i32(7)};
    int64_t want[] = {-100 & 7, -100 | 7, -100 ^ 7, -800, -25, 99, -100 * (1ll << 40), 0, 1, 1, 1,
                      ((-100 ^ 7 ^ 5) & 7) | 16};
    expect_ints(src, args, 2, want, UT_COUNTOF(want));
    /* shifts by a count outside [0, bits) are defined (isa.md): SHL gives 0 */
    tfvm_value s[2] = {tfvm_i32(1), tfvm_i32(33)};
    expect_ints("fn main(a: i32, k: i32) -> (i32, i32) { (a << k, -a >> k) }", s, 2, (int64_t[]){0, -1}, 2);
}
END_TEST

START_TEST(literal_typing)
{
    expect_ints("fn main() -> i64 { let x = 5000050000; x }", NULL, 0, (int64_t[]){5000050000ll}, 1);
    expect_ints("fn main() -> i64 { let x: i64 = 0; x - 3000000000 }", NULL, 0, (int64_t[]){-3000000000ll}, 1);
    /* a counter started at 0 takes the dtype its uses give it */
    tfvm_value n = tfvm_i64(100000);
    expect_ints("fn main(n: i64) -> i64 {\n"
                "    var s = 0;\n"
                "    for i in 0..n { s += i; }\n"
                "    s\n"
                "}\n",
                &n, 1, (int64_t[]){4999950000ll}, 1);
    expect_ints("fn main(n: i64) -> i64 { let k = 0; k + n }", &n, 1, (int64_t[]){100000}, 1);
    /* constants may name earlier ones; each function binds the ones it uses */
    expect_ints("const N = 10;\nconst M = N * 3;\nconst K = M + 1;\n"
                "fn main(x: i64) -> (i64, i32) { (x + K, small()) }\nfn small() -> i32 { N }\n",
                &n, 1, (int64_t[]){100031, 10}, 2);
}
END_TEST

START_TEST(overflow_trap)
{
    const char *src = "fn fact(n: i32) -> i32 { if n <= 1 { 1 } else { n * fact(n - 1) } }\n"
                      "fn main(n: i32) -> i32 { fact(n) }\n";
    tfvm_value n13 = tfvm_i32(13), n12 = tfvm_i32(12);
    tfvm_program *wrap = compile(src), *trap = compile_with(src, true);
    run_out o = run(wrap, &n13, 1);
    ck_assert_int_eq(o.st, TFVM_OK);
    ck_assert_int_eq(o.r[0].as.i32, 1932053504);
    o = run(trap, &n12, 1);
    ck_assert_int_eq(o.st, TFVM_OK);
    ck_assert_int_eq(o.r[0].as.i32, 479001600);
    o = run(trap, &n13, 1);
    ck_assert_int_eq(o.st, TFVM_ERR_ARITH);
    ck_assert_str_eq(o.msg, "mul_ov_1_51 (MUL_OV) at [fact@1]: i32 overflow");
    tfvm_program_free(wrap);
    tfvm_program_free(trap);
    /* + and - too, and a constant that would overflow is not folded away */
    trap = compile_with("fn main(a: i64) -> (i64, i64) { (a + 9223372036854775807, 0 - 9223372036854775807 - a) }",
                        true);
    tfvm_value one = tfvm_i64(1), zero = tfvm_i64(0), two = tfvm_i64(2);
    o = run(trap, &zero, 1);
    ck_assert_int_eq(o.st, TFVM_OK);
    o = run(trap, &one, 1);
    ck_assert_int_eq(o.st, TFVM_ERR_ARITH);
    ck_assert_str_eq(o.msg, "add_ov_1_36 (ADD_OV) at []: i64 overflow");
    tfvm_program_free(trap);
    trap = compile_with("fn main(a: i64) -> i64 { 0 - 9223372036854775807 - a }", true);
    o = run(trap, &two, 1);
    ck_assert_int_eq(o.st, TFVM_ERR_ARITH);
    ck_assert_str_eq(o.msg, "sub_ov_1_50 (SUB_OV) at []: i64 overflow");
    tfvm_program_free(trap);
}
END_TEST

/* ---- Errors and warnings ------------------------------------------------------------------- */

static const struct {
    const char *src, *msg;
} bad[] = {
    /* several errors in one compile, in the order found */
    {"fn main(n: i32) -> i32 {\n    let count = 3;\n    let y = cuont + 1;\n    var z = 0;\n    z = true;\n"
     "    n + y\n}\n",
     "bad.tfg:3:13: 'cuont' is not defined; did you mean 'count'?\n 3 |     let y = cuont + 1;\n   |             ^\n"
     "bad.tfg:5:9: cannot assign bool to 'z' (a var of type i32)\n 5 |     z = true;\n   |         ^"},
    {"fn main(n: i32) -> i32 {\n    let a = n +;\n    let b = ;\n    a\n}\n",
     "bad.tfg:2:16: expected an expression, got ';'\n 2 |     let a = n +;\n   |                ^\n"
     "bad.tfg:3:13: expected an expression, got ';'\n 3 |     let b = ;\n   |             ^"},
    {"fn fib(n: i32) -> i32 { n }\nfn main(n: i32) -> i32 { fbi(n) }\n",
     "bad.tfg:2:26: no function or built-in op named 'fbi'; did you mean 'fib'?\n"
     " 2 | fn main(n: i32) -> i32 { fbi(n) }\n   |                          ^"},
    {"fn main(n: i32) -> i32 {\n    let total = n;\n    totl += 1;\n    total\n}\n",
     "bad.tfg:3:5: 'totl' is not defined; did you mean 'total'?\n 3 |     totl += 1;\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    n += 1;\n    n\n}\n",
     "bad.tfg:2:5: cannot assign to 'n': it is not a var (declare it with 'var n = ...')\n 2 |     n += 1;\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    for i in 0..n { i = 2; }\n    n\n}\n",
     "bad.tfg:2:21: cannot assign to 'i': it is not a var (declare it with 'var i = ...')\n"
     " 2 |     for i in 0..n { i = 2; }\n   |                     ^"},
    {"fn main(n: i32) -> i32 {\n    var s = 0;\n    let k = if n > 0 { s = 1; 2 } else { 3 };\n    k\n}\n",
     "bad.tfg:3:24: cannot assign to 's' inside an expression (it is declared outside it)\n"
     " 3 |     let k = if n > 0 { s = 1; 2 } else { 3 };\n   |                        ^"},
    {"fn main(n: i32) -> i32 {\n    let k = if n > 0 { return 1; } else { 3 };\n    k\n}\n",
     "bad.tfg:2:24: 'return' cannot be used inside an expression (only in a function's statements)\n"
     " 2 |     let k = if n > 0 { return 1; } else { 3 };\n   |                        ^"},
    {"fn main(n: i32) -> i32 {\n    while n > 0 { n + 1; }\n    n\n}\n",
     "bad.tfg:2:5: this loop assigns no variable declared before it, so its condition can never change\n"
     " 2 |     while n > 0 { n + 1; }\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    var s = 0;\n    while s < n { s += 1; s }\n    s\n}\n",
     "bad.tfg:3:27: a loop body gives no value (end the expression with ';')\n"
     " 3 |     while s < n { s += 1; s }\n   |                           ^"},
    {"fn main(n: i64) -> i64 {\n    var s: i32 = 0;\n    s += n;\n    n\n}\n",
     "bad.tfg:3:7: operands of '+' have different types: i32 and i64 (convert with cast<T>(x))\n"
     " 3 |     s += n;\n   |       ^"},
    {"fn main(x: f32) -> f32 {\n    x & 1.0\n}\n",
     "bad.tfg:2:7: '&' needs integers or bools, got f32\n 2 |     x & 1.0\n   |       ^"},
    {"fn main(p: bool) -> bool {\n    p << p\n}\n",
     "bad.tfg:2:7: '<<' needs integers, got bool\n 2 |     p << p\n   |       ^"},
    {"fn main(x: f64) -> f64 {\n    ~x\n}\n",
     "bad.tfg:2:5: '~' needs an integer or bool operand, got f64\n 2 |     ~x\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    if n > 0 { return 1; }\n}\n",
     "bad.tfg:3:1: expected the function's value or 'return' before '}' (a function ends with its value)\n"
     " 3 | }\n   | ^"},
    {"fn main(n: i32) -> i32 {\n    let x = 5000050000;\n    x\n}\n",
     "bad.tfg:3:5: 'main' returns i32 but its body gives i64\n 3 |     x\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    let x = 'a';\n    x\n}\n",
     "bad.tfg:2:13: unexpected character '''\n 2 |     let x = 'a';\n   |             ^"},
    {"fn main(n: i32) -> i32 {\n    softplus(n)\n}\n",
     "bad.tfg:2:5: 'softplus' needs f32 or f64, got i32\n 2 |     softplus(n)\n   |     ^"},
    {"fn main(x: f32) -> f32 {\n    elu(x, beta = 1.0)\n}\n",
     "bad.tfg:2:12: 'elu' has no parameter 'beta'\n 2 |     elu(x, beta = 1.0)\n   |            ^"},
    {"fn main(x: f32, a: f32) -> f32 {\n    elu(x, a)\n}\n",
     "bad.tfg:2:12: 'elu': alpha must be a number written out\n 2 |     elu(x, a)\n   |            ^"},
    {"fn main(x: f32) -> f32 {\n    selu(x, 1.0, 2.0, 3.0)\n}\n",
     "bad.tfg:2:5: 'selu' takes x and up to 2 parameters, got 4 arguments\n 2 |     selu(x, 1.0, 2.0, 3.0)\n"
     "   |     ^"},
    {"fn main(x: f32) -> f32 {\n    softplus()\n}\n",
     "bad.tfg:2:5: 'softplus' takes 1 argument, got 0\n 2 |     softplus()\n   |     ^"},
    /* issue 32 */
    {"fn main(n: i32) -> i32 {\n    if n > 0 { break; }\n    n\n}\n",
     "bad.tfg:2:16: 'break' outside a loop (it can only be used in a while or for body)\n"
     " 2 |     if n > 0 { break; }\n   |                ^"},
    {"fn main(n: i32) -> i32 {\n    var s = 0;\n    for i in 0..n { s += if i > 2 { continue; } else { 1 }; }\n    s\n}\n",
     "bad.tfg:3:37: 'continue' cannot be used inside an expression (only in a loop's statements)\n"
     " 3 |     for i in 0..n { s += if i > 2 { continue; } else { 1 }; }\n   |                                     ^"},
    {"fn main(n: i64, m: i32) -> i64 {\n    var x = 1; var h = n; var g = m;\n"
     "    for i in 0..3 { x = x + 1; h = h + x; g = g + x; }\n    h\n}\n",
     "bad.tfg:3:49: operands of '+' have different types: i32 and i64 (convert with cast<T>(x)); "
     "'x' is i64 because of its use at 3:40\n"
     " 3 |     for i in 0..3 { x = x + 1; h = h + x; g = g + x; }\n   |                                                 ^"},
    {"fn main(n: i64) -> i64 {\n    var x = 0;\n    var g: i32 = 1;\n    while x < n { x += 1; g = x; }\n    x\n}\n",
     "bad.tfg:4:31: cannot assign i64 to 'g' (a var of type i32); 'x' is i64 because of its use at 4:11\n"
     " 4 |     while x < n { x += 1; g = x; }\n   |                               ^"},
    {"fn main(n: i32) -> i32 {\n    1__000 + n\n}\n", "bad.tfg:2:5: bad number '1__000'\n 2 |     1__000 + n\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    n + 0x\n}\n", "bad.tfg:2:9: bad number '0x'\n 2 |     n + 0x\n   |         ^"},
    {"fn main(n: i32) -> i32 {\n    n + 0b12\n}\n", "bad.tfg:2:9: bad number '0b12'\n 2 |     n + 0b12\n   |         ^"},
    {"fn main(n: i32) -> f32 {\n    let w = load(\"no_such_file.npy\");\n    w[0]\n}\n",
     "bad.tfg:2:18: load: no_such_file.npy: No such file or directory\n"
     " 2 |     let w = load(\"no_such_file.npy\");\n   |                  ^"},
};

/* The composite ops of compiler/decomp.h, called by name with parameters by
 * position or keyword (each row's numerics: test_decomp.c). */
static const struct {
    const char *name, *src;
    double x, want;
} composites[] = {
    {"softplus f32 at 100", "fn main(x: f32) -> f32 { softplus(x) }", 100, 100},
    {"softsign f32", "fn main(x: f32) -> f32 { softsign(x) }", 3, 0.75},
    {"elu alpha by keyword", "fn main(x: f64) -> f64 { elu(x, alpha = 0.5) }", -1, -0.31606027941427883},
    {"leaky_relu alpha by position", "fn main(x: f64) -> f64 { leaky_relu(x, 0.25) }", -2, -0.5},
    {"hard_sigmoid negative beta", "fn main(x: f64) -> f64 { hard_sigmoid(x, beta = -0.25) }", 2, 0.15},
    {"gelu f64", "fn main(x: f64) -> f64 { gelu(x) }", 1, 0.8413447460685429},
    {"mish of an expression", "fn main(x: f64) -> f64 { mish(x * 2.0) - 1.0 }", 0.5, -0.13490161173268966},
    {"a function named like a row hides it", "fn elu(x: f64) -> f64 { x }\nfn main(x: f64) -> f64 { elu(x) }", -1, -1},
};

START_TEST(composite_ops)
{
    for (size_t i = 0; i < UT_COUNTOF(composites); i++) {
        tfvm_program *p = compile(composites[i].src);
        bool f32 = strstr(composites[i].src, "f32") != NULL;
        tfvm_value a = f32 ? tfvm_f32((float)composites[i].x) : tfvm_f64(composites[i].x);
        run_out o = run(p, &a, 1);
        ck_assert_msg(o.st == TFVM_OK, "%s: %s", composites[i].name, o.msg);
        double got = f32 ? o.r[0].as.f32 : o.r[0].as.f64;
        double want = composites[i].want;
        ck_assert_msg(fabs(got - want) <= 1e-6 * fmax(1, fabs(want)), "%s: got %.12g, want %.12g", composites[i].name,
                      got, want);
        tfvm_program_free(p);
    }
}
END_TEST

START_TEST(compile_errors)
{
    for (size_t i = 0; i < UT_COUNTOF(bad); i++) {
        tfvm_program *p = NULL;
        tfvm_error err;
        tfvm_status st = tfvm_program_compile(bad[i].src, strlen(bad[i].src), "bad.tfg", NULL, NULL, &p, &err);
        ck_assert_ptr_null(p);
        ck_assert_msg(st == TFVM_ERR_SYNTAX || st == TFVM_ERR_TYPE, "case %zu: status %s", i, tfvm_status_name(st));
        ck_assert_msg(strcmp(err.message, bad[i].msg) == 0, "case %zu:\nwant: %s\ngot:  %s", i, bad[i].msg,
                      err.message);
    }
}
END_TEST

typedef struct warn_log {
    char text[1024];
    int n;
} warn_log;

static void collect(void *ud, tfvm_log_level level, const char *message)
{
    warn_log *w = ud;
    ck_assert_int_eq(level, TFVM_LOG_WARN);
    size_t used = strlen(w->text);
    snprintf(w->text + used, sizeof w->text - used, "%s\n", message);
    w->n++;
}

START_TEST(warnings)
{
    const char *src = "fn helper(n: i32) -> i32 { n }\n"
                      "fn main(n: i32) -> i32 {\n"
                      "    let unused = 3;\n"
                      "    let _quiet = 4;\n"
                      "    var k = 0;\n"
                      "    k = 5;\n"
                      "    if n > 0 {\n"
                      "        return 1;\n"
                      "        let z = 2;\n"
                      "    }\n"
                      "    n\n"
                      "}\n";
    warn_log w = {"", 0};
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.log = collect;
    cfg.log_ud = &w;
    tfvm_program *p = NULL;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_compile(src, strlen(src), "w.tfg", NULL, &cfg, &p, &err), TFVM_OK);
    ck_assert_str_eq(w.text, "w.tfg:9:9: warning: unreachable code\n"
                             "w.tfg:3:9: warning: unused variable 'unused'\n"
                             "w.tfg:5:9: warning: unused variable 'k'\n"
                             "w.tfg:1:4: warning: function 'helper' is never used\n");
    tfvm_program_free(p);
    /* a statement after break or continue never runs */
    w.text[0] = '\0';
    w.n = 0;
    const char *jump = "fn main(n: i32) -> i32 {\n"
                       "    var s = 0;\n"
                       "    for i in 0..n {\n"
                       "        if i > 3 { break; s += 1; } else { continue; }\n"
                       "        s += i;\n"
                       "    }\n"
                       "    s\n"
                       "}\n";
    ck_assert_int_eq(tfvm_program_compile(jump, strlen(jump), "j.tfg", NULL, &cfg, &p, &err), TFVM_OK);
    ck_assert_str_eq(w.text, "j.tfg:4:27: warning: unreachable code\n"
                             "j.tfg:5:9: warning: unreachable code\n");
    tfvm_program_free(p);
    /* a clean program warns about nothing; a failed compile prints no warnings */
    w.text[0] = '\0';
    w.n = 0;
    const char *clean = "fn main(n: i32) -> i32 { var s = 0; for i in 0..n { s += i; } s }";
    ck_assert_int_eq(tfvm_program_compile(clean, strlen(clean), "c.tfg", NULL, &cfg, &p, &err), TFVM_OK);
    ck_assert_int_eq(w.n, 0);
    tfvm_program_free(p);
    const char *broken = "fn main(n: i32) -> i32 { let x = 1; n + true }";
    ck_assert_int_eq(tfvm_program_compile(broken, strlen(broken), "b.tfg", NULL, &cfg, &p, &err), TFVM_ERR_TYPE);
    ck_assert_int_eq(w.n, 0);
}
END_TEST

/* ---- load() ------------------------------------------------------------------------------- */

START_TEST(load_constants)
{
    /* test/data/lang/load.tfg: W = load("w.npy") (f32 [2, 3] of 1..6), B = load("w.npz", "b") (i64 10, 20, 30) */
    tfvm_program *p = NULL;
    tfvm_error err;
    ck_assert_msg(tfvm_program_open("test/data/lang/load.tfg", NULL, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    tfvm_value x = tfvm_f32(2.0f);
    run_out o = run(p, &x, 1);
    ck_assert_msg(o.st == TFVM_OK, "%s", o.msg);
    ck_assert(o.r[0].as.f32 == 42.0f);
    ck_assert_int_eq(o.r[1].as.i64, 60);
    tfvm_program_free(p);
    static const struct {
        const char *src, *msg;
    } errs[] = {
        {"fn main() -> f32 { reduce_sum(load(\"wz.npz\", \"w\")) }",
         "test/data/lang/e.tfg:1:46: load: test/data/lang/wz.npz: 'w' is compressed (zip method 8); only stored "
         "members are supported (write it with np.savez, not np.savez_compressed)"},
        {"fn main() -> f32 { reduce_sum(load(\"w.npz\", \"v\")) }",
         "test/data/lang/e.tfg:1:45: load: test/data/lang/w.npz has no array 'v' (it has w, b)"},
        {"fn main() -> f32 { reduce_sum(load(\"w.npz\")) }",
         "test/data/lang/e.tfg:1:36: load: w.npz is a .npz archive: name the array, load(\"w.npz\", \"name\")"},
        {"fn main() -> f32 { reduce_sum(load(\"w.npy\", \"w\")) }",
         "test/data/lang/e.tfg:1:45: load: only a .npz archive has named arrays (w.npy is not one)"},
        {"fn main() -> f32 { reduce_sum(load(\"load.tfg\")) }",
         "test/data/lang/e.tfg:1:36: load: test/data/lang/load.tfg: not a .npy file (bad magic)"},
    };
    for (size_t i = 0; i < UT_COUNTOF(errs); i++) {
        tfvm_status st = tfvm_program_compile(errs[i].src, strlen(errs[i].src), "test/data/lang/e.tfg", NULL, NULL,
                                              &p, &err);
        ck_assert_int_eq(st, TFVM_ERR_TYPE);
        char *nl = strchr(err.message, '\n');
        if (nl)
            *nl = '\0';
        ck_assert_msg(strcmp(err.message, errs[i].msg) == 0, "case %zu:\nwant: %s\ngot:  %s", i, errs[i].msg,
                      err.message);
    }
}
END_TEST

/* ---- Allocation failures -------------------------------------------------------------------- */

typedef struct fail_alloc {
    long left;
    long live;
} fail_alloc;

static void *fail_fn(void *ud, void *ptr, size_t old, size_t n)
{
    fail_alloc *f = ud;
    if (n == 0) {
        if (ptr)
            f->live -= (long)old;
        free(ptr);
        return NULL;
    }
    if (f->left-- <= 0)
        return NULL;
    void *q = realloc(ptr, n);
    if (q)
        f->live += (long)n - (long)old;
    return q;
}

START_TEST(allocation_failures)
{
    const char *srcs[] = {
        "const W = load(\"w.npy\");\n"
        "fn main(n: i32, x: f32) -> (i32, f32) {\n"
        "    var s = 0;\n"
        "    for i in 0..n { if i & 1 == 1 { s += i; } }\n"
        "    while s > 100 { s /= 2; if s == 7 { return (s, x); } }\n"
        "    (s, reduce_sum(W * x))\n"
        "}\n",
        "fn main(n: i32) -> i32 { let a = n +; let b = c; a }\n",
        "fn f(n: i32) -> i32 { if n < 2 { fetch(\"y\", n) } else { f(n - 1) + f(n - 2) } }\n"
        "fn main(n: i32) -> i32 {\n"
        "    var s = 0;\n"
        "    while feed<bool>(\"more\") { s += f(feed<i32>(\"x\")); }\n"
        "    s\n"
        "}\n",
    };
    tfvm_status want[] = {TFVM_OK, TFVM_ERR_SYNTAX, TFVM_OK};
    for (size_t k = 0; k < UT_COUNTOF(srcs); k++) {
        long n;
        for (n = 0;; n++) {
            fail_alloc fa = {n, 0};
            tfvm_config cfg;
            tfvm_config_init(&cfg);
            cfg.allocator = (tfvm_allocator){fail_fn, &fa};
            tfvm_program *p = NULL;
            tfvm_error err;
            tfvm_status st = tfvm_program_compile(srcs[k], strlen(srcs[k]), "test/data/lang/a.tfg", NULL, &cfg, &p,
                                                  &err);
            if (st == TFVM_ERR_NOMEM) {
                ck_assert_ptr_null(p);
                ck_assert_int_eq(fa.live, 0);
                continue;
            }
            ck_assert_msg(st == want[k], "allocation %ld: status %s (%s)", n, tfvm_status_name(st), err.message);
            tfvm_program_free(p);
            ck_assert_int_eq(fa.live, 0);
            break;
        }
        ck_assert_int_gt(n, 0);
    }
}
END_TEST

/* ---- feed and fetch (issue 16) ------------------------------------------------------------ */

/* The program as `tfvm dis` prints it, NUL-terminated (free it). */
static char *disassembly(const tfvm_program *p)
{
    ut_buf b;
    ut_buf_init(&b, NULL);
    tfvm_error err;
    ck_assert_int_eq(ld_disassemble(&p->isa, &b, &err), TFVM_OK);
    char *text = malloc(b.len + 1);
    ck_assert_ptr_nonnull(text);
    memcpy(text, b.data, b.len);
    text[b.len] = '\0';
    ut_buf_free(&b);
    return text;
}

static uint32_t count_op(const tfvm_program *p, isa_op op)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->isa.n_insts; i++)
        n += p->isa.insts[i].op == op;
    return n;
}

static tfvm_program *compile_level(const char *src, int opt)
{
    tfvm_compile_options o;
    tfvm_compile_options_init(&o);
    o.opt_level = opt;
    tfvm_program *p = NULL;
    tfvm_error err;
    tfvm_status st = tfvm_program_compile(src, strlen(src), "t.tfg", &o, NULL, &p, &err);
    ck_assert_msg(st == TFVM_OK, "compile -O%d failed: %s\n%s", opt, err.message, src);
    return p;
}

static void expect_dis(const char *src, const char *want)
{
    tfvm_program *p = compile(src);
    char *got = disassembly(p);
    ck_assert_msg(strcmp(got, want) == 0, "want:\n%s\ngot:\n%s", want, got);
    free(got);
    tfvm_program_free(p);
}

/* A feed and a fetch in a loop: each channel's order token is a loop
 * variable (x_order, s_order) that starts at 0, goes through its FEED or
 * FETCH once per iteration and is dropped at the end of the entry; the fed
 * value is used directly, and the fetched value is s itself. */
START_TEST(host_loop_graph)
{
    expect_dis("fn main(n: i32) -> i32 {\n"
               "    var s = 0;\n"
               "    for i in 0..n {\n"
               "        s += feed<i32>(\"x\");\n"
               "        fetch(\"s\", s);\n"
               "    }\n"
               "    s\n"
               "}\n",
               "source \"t.tfg\"\n"
               "\n"
               "entry main(n: i32) -> (r0: i32) {\n"
               "    n             = ARG 0 @1:9 var \"n\"\n"
               "    c0            = CONST i32 0 @3:14\n"
               "    i_enter       = ENTER main_for_i (c0) @3:9 var \"i\"\n"
               "    s_enter       = ENTER main_for_i (c0) @3:5 var \"s\"\n"
               "    x_order_enter = ENTER main_for_i (c0) @3:5\n"
               "    s_order_enter = ENTER main_for_i (c0) @3:5\n"
               "    n_in          = ENTER main_for_i const (n) @3:5\n"
               "                    RESULT 0 (main_for_i.s_out) @1:4\n"
               "}\n"
               "\n"
               "loop main_for_i in main {\n"
               "    less_3_9        = LESS (i_enter | i_next, n_in) @3:9\n"
               "    main_for_i_cond = LOOPCOND (less_3_9) @3:5\n"
               "    feed_4_14       = FEED \"x\" i32 (x_order_sw:1) @4:14\n"
               "    x_order_sw      = SWITCH prune_false (x_order_enter | x_order_next, main_for_i_cond) @3:5\n"
               "    s               = ADD (s_enter | s_next, feed_4_14) @4:11 var \"s\"\n"
               "    fetch_5_9       = FETCH \"s\" (s, s_order_sw:1) @5:9\n"
               "    s_order_sw      = SWITCH prune_false (s_order_enter | s_order_next, main_for_i_cond) @3:5\n"
               "    add_3_9         = ADD (i_sw:1, i32 1) @3:9\n"
               "    i_sw            = SWITCH prune_false (i_enter | i_next, main_for_i_cond) @3:5\n"
               "    i_next          = NEXTITER (add_3_9) @3:9 var \"i\"\n"
               "    s_next          = NEXTITER (s) @3:5 var \"s\"\n"
               "    x_order_next    = NEXTITER (feed_4_14:1) @3:5\n"
               "    s_order_next    = NEXTITER (fetch_5_9:1) @3:5\n"
               "    s_sw            = SWITCH prune_false (s_enter | s_next, main_for_i_cond) @3:5\n"
               "    s_out           = EXIT main_for_i (s_sw) @3:5 var \"s\"\n"
               "}\n");
}
END_TEST

/* Recursion: fib takes the token as a hidden parameter (CALL fib_S_calls_order)
 * and gives the new one back (RETURN fib_S_calls_order_ret); the second call
 * takes what the first gave back, so the fetches come in call order. */
START_TEST(host_recursion_graph)
{
    expect_dis("fn fib(n: i32) -> i32 {\n"
               "    fetch(\"calls\", n);\n"
               "    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }\n"
               "}\n"
               "fn main(n: i32) -> i32 { fib(n) }\n",
               "source \"t.tfg\"\n"
               "\n"
               "entry main(n: i32) -> (r0: i32) {\n"
               "    n       = ARG 0 @5:9 var \"n\"\n"
               "    c0      = CONST i32 0 @5:4\n"
               "    fib_2_n = CALL fib@2 (n) @5:26 var \"n\"\n"
               "    fib_2_calls_order = CALL fib@2 (c0) @5:26\n"
               "    fib_2   = RETURN fib@2 (fib.n_sw:1 | fib.add_3_38) @5:26\n"
               "              RESULT 0 (fib_2) @5:4\n"
               "}\n"
               "\n"
               "func fib {\n"
               "    fetch_2_5    = FETCH \"calls\" (main.fib_2_n | fib_0_n | fib_1_n, main.fib_2_calls_order | "
               "fib_0_calls_order | fib_1_calls_order) @2:5\n"
               "    less_3_10    = LESS (main.fib_2_n | fib_0_n | fib_1_n, i32 2) @3:10\n"
               "    sub_3_33     = SUB (n_sw, i32 1) @3:33\n"
               "    n_sw         = SWITCH prune_false prune_true (main.fib_2_n | fib_0_n | fib_1_n, less_3_10) @3:5\n"
               "    fetch_2_5_sw = SWITCH prune_false prune_true (fetch_2_5:1, less_3_10) @3:5\n"
               "    fib_0_n      = CALL fib@0 (sub_3_33) @3:27 var \"n\"\n"
               "    fib_0_calls_order = CALL fib@0 (fetch_2_5_sw) @3:27\n"
               "    fib_0        = RETURN fib@0 (n_sw:1 | add_3_38) @3:27\n"
               "    fib_0_calls_order_ret = RETURN fib@0 (fetch_2_5_sw:1 | fib_1_calls_order_ret) @3:27\n"
               "    sub_3_46     = SUB (n_sw, i32 2) @3:46\n"
               "    fib_1_n      = CALL fib@1 (sub_3_46) @3:40 var \"n\"\n"
               "    fib_1_calls_order = CALL fib@1 (fib_0_calls_order_ret) @3:40\n"
               "    fib_1        = RETURN fib@1 (n_sw:1 | add_3_38) @3:40\n"
               "    fib_1_calls_order_ret = RETURN fib@1 (fetch_2_5_sw:1 | fib_1_calls_order_ret) @3:40\n"
               "    add_3_38     = ADD (fib_0, fib_1) @3:38\n"
               "}\n");
}
END_TEST

/* What the optimizer may not do to FEED and FETCH: drop an unused one, merge
 * two alike, or merge two calls of a function that fetches; what it still
 * may: drop a loop body that never runs. Counts at -O0 and -O1. */
static const struct {
    const char *what, *src;
    uint32_t feeds[2], fetches[2], sites[2];
} kept[] = {
    {"alike and unused",
     "fn main(x: i32) -> i32 {\n    fetch(\"y\", 1);\n    fetch(\"y\", 1);\n    feed<i32>(\"a\");\n"
     "    feed<i32>(\"a\") + 0;\n    x\n}\n",
     {2, 2}, {2, 2}, {0, 0}},
    {"two calls of a function that fetches",
     "fn f(n: i32) -> i32 { fetch(\"y\", n) }\nfn main(x: i32) -> i32 { f(x) + f(x) }\n", {0, 0}, {1, 1}, {2, 2}},
    {"two calls of a pure function (merged)",
     "fn f(n: i32) -> i32 { n * 2 }\nfn main(x: i32) -> i32 { fetch(\"y\", f(x) + f(x)) }\n", {0, 0}, {1, 1},
     {2, 1}},
    {"through a call chain",
     "fn a() -> i32 { b() }\nfn b() -> i32 { feed<i32>(\"x\") }\nfn main() -> i32 { a() + a() }\n", {1, 1}, {0, 0},
     {3, 3}},
    {"a branch that is always taken",
     "fn main(x: i32) -> i32 {\n    if true { fetch(\"y\", x); }\n    x\n}\n", {0, 0}, {1, 1}, {0, 0}},
    {"a loop that never runs",
     "fn main(x: i32) -> i32 {\n    let k = while (k = x; false) { fetch(\"y\", k) + 1 };\n    k\n}\n", {0, 0},
     {1, 0}, {0, 0}},
    {"fed in the loop condition",
     "fn main() -> i32 {\n    while feed<bool>(\"go\") { fetch(\"y\", 1); }\n    0\n}\n", {1, 1}, {1, 1}, {0, 0}},
};

START_TEST(host_kept)
{
    for (size_t i = 0; i < UT_COUNTOF(kept); i++) {
        for (int opt = 0; opt < 2; opt++) {
            tfvm_program *p = compile_level(kept[i].src, opt);
            ck_assert_msg(count_op(p, ISA_FEED) == kept[i].feeds[opt] &&
                              count_op(p, ISA_FETCH) == kept[i].fetches[opt] && p->isa.n_sites == kept[i].sites[opt],
                          "%s at -O%d: %u FEED, %u FETCH, %u sites; want %u, %u, %u", kept[i].what, opt,
                          count_op(p, ISA_FEED), count_op(p, ISA_FETCH), p->isa.n_sites, kept[i].feeds[opt],
                          kept[i].fetches[opt], kept[i].sites[opt]);
            tfvm_program_free(p);
        }
    }
    /* a tensor: the FEED's type is the dtype, ISA_CHAN_TENSOR and its
     * declared shape, the constant after the channel's name */
    tfvm_program *p = compile("fn main() -> f32 { reduce_sum(feed<f32[?, 3]>(\"m\")) }\n");
    for (uint32_t i = 0; i < p->isa.n_insts; i++)
        if (p->isa.insts[i].op == ISA_FEED) {
            const isa_inst *in = &p->isa.insts[i];
            ck_assert_uint_eq(in->b, TFVM_F32 | ISA_CHAN_TENSOR | (in->a + 2) << ISA_CHAN_SHAPE_SHIFT);
            char t[64];
            ck_assert_str_eq(isa_chan_type(&p->isa, in->b, t, sizeof t), "f32[?, 3]");
        }
    tfvm_program_free(p);
}
END_TEST

/* Runs through a session (tfvm_feed / tfvm_fetch), at -O0 and -O1, on 1
 * and 2 threads: every value fed up front, each fetched one in the order a
 * sequential reading of the program reaches the fetches. */
static const struct {
    const char *what, *src;
    int32_t arg;
    const char *chan[3];     /* fed channels */
    uint8_t dtype[3];
    int n[3];
    int32_t fed[3][8];
    const char *out;         /* the fetched channel */
    int n_out;
    int32_t want[16];
    int32_t result;
} sessions[] = {
    {"nested loops, lexicographic",
     "fn main(n: i32) -> i32 {\n    var s = 0;\n    for i in 0..n {\n        for j in 0..i + 1 {\n"
     "            s += feed<i32>(\"w\") * (10 * i + j);\n            fetch(\"ij\", 10 * i + j);\n        }\n    }\n"
     "    s\n}\n",
     3, {"w"}, {TFVM_I32}, {6}, {{1, 2, 3, 4, 5, 6}}, "ij", 6, {0, 10, 11, 20, 21, 22}, 370},
    {"case select, a fed loop condition, an early return",
     "fn main(limit: i32) -> i32 {\n    var s = 0;\n    while feed<bool>(\"more\") {\n"
     "        if feed<bool>(\"double\") { s *= 2; fetch(\"log\", -s); }\n"
     "        else { s += feed<i32>(\"add\"); fetch(\"log\", s); }\n"
     "        if s > limit { return s; }\n    }\n    s\n}\n",
     100, {"more", "double", "add"}, {TFVM_BOOL, TFVM_BOOL, TFVM_I32}, {4, 3, 2}, {{1, 1, 1, 0}, {0, 1, 0}, {3, 4}},
     "log", 3, {3, -6, 10}, 10},
    {"recursion, in call order",
     "fn fib(n: i32) -> i32 {\n    fetch(\"n\", n);\n    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }\n}\n"
     "fn main(n: i32) -> i32 { fib(n) }\n",
     5, {NULL}, {0}, {0}, {{0}}, "n", 15, {5, 4, 3, 2, 1, 0, 1, 2, 1, 0, 3, 2, 1, 0, 1}, 5},
};

START_TEST(host_sessions)
{
    for (size_t i = 0; i < UT_COUNTOF(sessions); i++) {
        for (int opt = 0; opt < 2; opt++) {
            tfvm_program *p = compile_level(sessions[i].src, opt);
            for (int threads = 1; threads <= 2; threads++) {
                tfvm_config cfg;
                tfvm_config_init(&cfg);
                cfg.threads = threads;
                tfvm_vm *vm;
                ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
                tfvm_value arg = {TFVM_I32, NULL, {.i32 = sessions[i].arg}};
                tfvm_session *ss;
                ck_assert_int_eq(tfvm_session_start(vm, NULL, &arg, 1, &ss), TFVM_OK);
                for (int c = 0; c < 3 && sessions[i].chan[c]; c++)
                    for (int k = 0; k < sessions[i].n[c]; k++) {
                        tfvm_value v = {(tfvm_dtype)sessions[i].dtype[c], NULL, {.i32 = 0}};
                        if (v.dtype == TFVM_BOOL)
                            v.as.b = sessions[i].fed[c][k] != 0;
                        else
                            v.as.i32 = sessions[i].fed[c][k];
                        ck_assert_int_eq(tfvm_feed(ss, sessions[i].chan[c], &v), TFVM_OK);
                    }
                for (int k = 0; k < sessions[i].n_out; k++) {
                    tfvm_value got;
                    tfvm_status st = tfvm_fetch(ss, sessions[i].out, &got);
                    ck_assert_msg(st == TFVM_OK, "%s: fetch %d: %s", sessions[i].what, k, tfvm_session_errmsg(ss));
                    ck_assert_msg(got.dtype == TFVM_I32 && got.as.i32 == sessions[i].want[k],
                                  "%s (-O%d, %d threads): fetch %d is %d, want %d", sessions[i].what, opt, threads, k,
                                  got.as.i32, sessions[i].want[k]);
                    tfvm_value_release(&got);
                }
                tfvm_value r;
                ck_assert_msg(tfvm_session_finish(ss, &r, 1) == TFVM_OK, "%s: %s", sessions[i].what, tfvm_errmsg(vm));
                ck_assert_int_eq(r.as.i32, sessions[i].result);
                tfvm_vm_free(vm);
            }
            tfvm_program_free(p);
        }
    }
}
END_TEST

static const struct {
    const char *src, *msg;
} host_bad[] = {
    {"fn main() -> i32 { feed<i32>(\"a b\") }\n",
     "bad.tfg:1:30: a channel name is 1 to 64 letters, digits and _ . : / -, got \"a b\"\n"
     " 1 | fn main() -> i32 { feed<i32>(\"a b\") }\n   |                              ^"},
    {"fn main(x: i32) -> i32 {\n    let y = feed<i32>(\"x\");\n    fetch(\"x\", y)\n}\n",
     "bad.tfg:3:5: channel 'x' is both fed and fetched (fed at 2:13)\n 3 |     fetch(\"x\", y)\n   |     ^"},
    {"fn g(n: i32) -> i32 { fetch(\"x\", n) }\nfn main() -> i32 { g(feed<i32>(\"x\")) }\n",
     "bad.tfg:2:22: channel 'x' is both fed and fetched (fetched at 1:23)\n"
     " 2 | fn main() -> i32 { g(feed<i32>(\"x\")) }\n   |                      ^"},
    {"fn main() -> i32 {\n    let a = feed<i32>(\"x\");\n    let b = feed<f32[?]>(\"x\");\n    a\n}\n",
     "bad.tfg:3:13: channel 'x' is fed as f32[?] here and as i32 at 2:13\n"
     " 3 |     let b = feed<f32[?]>(\"x\");\n   |             ^"},
    {"fn main() -> i32 { feed(\"x\") }\n",
     "bad.tfg:1:20: 'feed' needs the type of the value: feed<T>(\"x\")\n"
     " 1 | fn main() -> i32 { feed(\"x\") }\n   |                    ^"},
    {"fn main() -> i32 { feed<i32>(\"x\", 1) }\n",
     "bad.tfg:1:35: 'feed' takes the channel's name only: feed<T>(\"x\")\n"
     " 1 | fn main() -> i32 { feed<i32>(\"x\", 1) }\n   |                                   ^"},
    {"fn main() -> i32 { fetch<i32>(\"y\", 1) }\n",
     "bad.tfg:1:20: 'fetch' takes no type argument (the value's type is its own): fetch(\"y\", v)\n"
     " 1 | fn main() -> i32 { fetch<i32>(\"y\", 1) }\n   |                    ^"},
    {"fn main() -> i32 { fetch(\"y\") }\n",
     "bad.tfg:1:20: 'fetch' takes the channel's name and one value: fetch(\"y\", v)\n"
     " 1 | fn main() -> i32 { fetch(\"y\") }\n   |                    ^"},
    {"fn main(n: i32) -> i32 { fetch(n, 1) }\n",
     "bad.tfg:1:26: the channel's name must be a string: fetch(\"y\", v)\n"
     " 1 | fn main(n: i32) -> i32 { fetch(n, 1) }\n   |                          ^"},
    {"fn main(n: i32) -> i32 { fech(\"y\", n) }\n",
     "bad.tfg:1:26: 'fech' takes no string (only load, feed and fetch do); did you mean 'fetch'?\n"
     " 1 | fn main(n: i32) -> i32 { fech(\"y\", n) }\n   |                          ^"},
    {"fn main(n: i32) -> i32 { fetch(\"y\", (n, n)) }\n",
     "bad.tfg:1:37: the fetched value must be a single value, not a tuple of 2\n"
     " 1 | fn main(n: i32) -> i32 { fetch(\"y\", (n, n)) }\n   |                                     ^"},
    /* only what it is fed can end a loop that assigns nothing */
    {"fn main(n: i32) -> i32 {\n    while n > 0 { fetch(\"y\", n); }\n    n\n}\n",
     "bad.tfg:2:5: this loop assigns no variable declared before it, so its condition can never change\n"
     " 2 |     while n > 0 { fetch(\"y\", n); }\n   |     ^"},
};

START_TEST(host_errors)
{
    for (size_t i = 0; i < UT_COUNTOF(host_bad); i++) {
        tfvm_program *p = NULL;
        tfvm_error err;
        tfvm_status st =
            tfvm_program_compile(host_bad[i].src, strlen(host_bad[i].src), "bad.tfg", NULL, NULL, &p, &err);
        ck_assert_ptr_null(p);
        ck_assert_msg(st == TFVM_ERR_SYNTAX || st == TFVM_ERR_TYPE, "case %zu: status %s", i, tfvm_status_name(st));
        ck_assert_msg(strcmp(err.message, host_bad[i].msg) == 0, "case %zu:\nwant: %s\ngot:  %s", i, host_bad[i].msg,
                      err.message);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lang");
    TCase *tc = tcase_create("lang");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, same_firings_as_hand_threaded);
    tcase_add_test(tc, statements);
    tcase_add_test(tc, break_continue);
    tcase_add_test(tc, compound_and_literals);
    tcase_add_test(tc, short_circuit);
    tcase_add_test(tc, bitwise);
    tcase_add_test(tc, literal_typing);
    tcase_add_test(tc, overflow_trap);
    tcase_add_test(tc, composite_ops);
    tcase_add_test(tc, compile_errors);
    tcase_add_test(tc, warnings);
    tcase_add_test(tc, load_constants);
    tcase_add_test(tc, allocation_failures);
    tcase_add_test(tc, host_loop_graph);
    tcase_add_test(tc, host_recursion_graph);
    tcase_add_test(tc, host_kept);
    tcase_add_test(tc, host_errors);
    tcase_add_test(tc, host_sessions);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
