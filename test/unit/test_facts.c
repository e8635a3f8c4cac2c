/* test/unit/test_facts.c — the static analyser (analysis/facts.h): exact facts of
 * small assembled programs (straight-line tensor code, a loop, recursion),
 * exact conflict messages, the load-time check, and memory failures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/facts.h"
#include "loader/loader.h"
#include "testutil.h"
#include "tfvm_debug.h"

static isa_program prog;
static isa_facts facts;

static void analyse(const char *text)
{
    tfvm_error err;
    tfvm_status st = ld_assemble(text, strlen(text), "t.tfasm", NULL, &prog, &err);
    ck_assert_msg(st == TFVM_OK, "%s", err.message);
    st = isa_facts_analyse(&prog, NULL, &facts, &err);
    ck_assert_msg(st == TFVM_OK, "%s", err.message);
}

static void done(void)
{
    isa_facts_free(&facts);
    isa_program_release(&prog);
}

static uint32_t inst(const char *name)
{
    for (uint32_t i = 0; i < prog.n_insts; i++)
        if (prog.insts[i].name && strcmp(prog.insts[i].name, name) == 0)
            return i;
    ck_abort_msg("no instruction %s", name);
    return 0;
}

/* "dtype[shape] = value" of output k of the named instruction */
static const char *fact(const char *name, uint32_t k)
{
    static char buf[600];
    char f[160], v[400];
    const isa_fact *x = isa_facts_of(&facts, inst(name), k);
    isa_fact_str(x, f, sizeof f);
    isa_fact_value_str(x, v, sizeof v);
    snprintf(buf, sizeof buf, "%s%s%s", f, v[0] ? " = " : "", v);
    return buf;
}

#define FACT(name, want) ck_assert_str_eq(fact(name, 0), want)

START_TEST(tensor_rules)
{
    analyse("entry main(x: f32[]) -> (y: f32[], z: i64[]) {\n"
            "    x  = ARG 0\n"
            "    a  = CONST f32[2, 3] [[1, 2, 3], [4, 5, 6]]\n"
            "    w  = CONST f32[3, 4] [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]\n"
            "    mm = MATMUL (x, w)\n"
            "    k  = MATMUL (a, w)\n"
            "    b  = CONST f32[4] [1, 1, 1, 1]\n"
            "    s  = ADD (mm, b)\n"
            "    r  = RELU (s)\n"
            "    sh = SHAPE (k)\n"
            "    n  = CONST i64[2] [-1, 2]\n"
            "    rs = RESHAPE (k, n)\n"
            "    t  = TRANSPOSE (rs, i64[2] [1, 0])\n"
            "    c  = CONCAT axis=0 (t, t)\n"
            "    m  = REDUCE_SUM keepdims (c, i64[1] [1])\n"
            "    sm = SOFTMAX axis=-1 (r)\n"
            "    e  = EQUAL (sh, sh)\n"
            "         RESULT 0 (sm)\n"
            "         RESULT 1 (sh)\n"
            "}\n");
    FACT("x", "f32[..]");
    FACT("mm", "f32[..]");
    FACT("k", "f32[2, 4] = [[1, 2, 3, 0], [4, 5, 6, 0]]");
    FACT("s", "f32[..]");
    FACT("sh", "i64[2] = [2, 4]");
    FACT("rs", "f32[4, 2] = [[1, 2], [3, 0], [4, 5], [6, 0]]");
    FACT("t", "f32[2, 4] = [[1, 3, 4, 6], [2, 0, 5, 0]]");
    FACT("c", "f32[4, 4] = [[1, 3, 4, 6], [2, 0, 5, 0], [1, 3, 4, 6], [2, 0, 5, 0]]");
    FACT("m", "f32[4, 1] = [[14], [7], [14], [7]]");
    FACT("e", "bool[2] = [true, true]");
    ck_assert_uint_eq(facts.n_conflicts, 0);
    done();
}
END_TEST

/* shapes without values: too big to track, but every dim known */
START_TEST(shapes_only)
{
    char text[4096];
    snprintf(text, sizeof text,
             "entry main() -> (y: f32[]) {\n"
             "    one = CONST f32 1\n"
             "    x  = FILL (i64[2] [64, 784], one)\n"
             "    w  = FILL (i64[2] [784, 512], one)\n"
             "    b  = FILL (i64[1] [512], one)\n"
             "    h  = FUSED_MATMUL relu (x, w, b)\n"
             "    v  = FILL (i64[4] [16, 1, 28, 28], one)\n"
             "    cw = FILL (i64[4] [8, 1, 3, 3], one)\n"
             "    cb = FILL (i64[1] [8], one)\n"
             "    cv = FUSED_CONV2D relu (v, cw, i64[9] [1, 1, 1, 1, 1, 1, 1, 1, 1], cb)\n"
             "    p  = MAXPOOL (cv, i64[8] [2, 2, 2, 2, 0, 0, 0, 0])\n"
             "    f  = FLATTEN axis=1 (p)\n"
             "    g  = REDUCE_MEAN (f, i64[0] [])\n"
             "         RESULT 0 (h)\n"
             "}\n");
    analyse(text);
    FACT("x", "f32[64, 784]");
    FACT("h", "f32[64, 512]");
    FACT("cv", "f32[16, 8, 28, 28]");
    FACT("p", "f32[16, 8, 14, 14]");
    FACT("f", "f32[16, 1568]");
    FACT("g", "f32");
    ck_assert_uint_eq(facts.n_conflicts, 0);
    done();
}
END_TEST

/* a loop variable's fact is the join over its iterations */
START_TEST(through_a_loop)
{
    analyse("entry main(n: i64) -> (s: i64, v: f32[]) {\n"
            "    n     = ARG 0\n"
            "    zero  = CONST i64 0\n"
            "    one   = CONST i64 1\n"
            "    v0    = CONST f32[1, 3] [[1, 2, 3]]\n"
            "    e_i   = ENTER lp (zero)\n"
            "    e_v   = ENTER lp (v0)\n"
            "    e_n   = ENTER lp const (n)\n"
            "    e_one = ENTER lp const (one)\n"
            "    e_row = ENTER lp const (v0)\n"
            "            RESULT 0 (lp.i_out)\n"
            "            RESULT 1 (lp.v_out)\n"
            "}\n"
            "loop lp in main {\n"
            "    i      = MERGE (e_i, i_next)\n"
            "    v      = MERGE (e_v, v_next)\n"
            "    lt     = LESS (i, e_n)\n"
            "    p      = LOOPCOND (lt)\n"
            "    si     = SWITCH (i, p)\n"
            "    sv     = SWITCH (v, p)\n"
            "    i2     = ADD (si:1, e_one)\n"
            "    v2     = CONCAT axis=0 (sv:1, e_row)\n"
            "    i_next = NEXTITER (i2)\n"
            "    v_next = NEXTITER (v2)\n"
            "    i_out  = EXIT lp (si)\n"
            "    v_out  = EXIT lp (sv)\n"
            "}\n");
    FACT("i", "i64");
    FACT("v", "f32[?, 3]");
    FACT("v2", "f32[?, 3]");
    FACT("v_out", "f32[?, 3]");
    FACT("e_row", "f32[1, 3] = [[1, 2, 3]]");
    ck_assert_str_eq(fact("i", 1), "i32");
    ck_assert_uint_eq(facts.n_conflicts, 0);
    done();
}
END_TEST

/* a parameter's fact is the join over its call sites; results flow back */
START_TEST(through_recursion)
{
    analyse("entry main(n: i32) -> (r: i32) {\n"
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
            "    n1   = SUB (sn, one)\n"
            "    c1   = CALL fib@1 (n1)\n"
            "    n2   = SUB (sn, two)\n"
            "    c2   = CALL fib@2 (n2)\n"
            "    r1   = RETURN fib@1 (res)\n"
            "    r2   = RETURN fib@2 (res)\n"
            "    sum  = ADD (r1, r2)\n"
            "    res  = MERGE (base, sum)\n"
            "}\n");
    FACT("n", "i32");
    FACT("base", "i32 = 1");
    FACT("res", "i32");
    FACT("r", "i32");
    FACT("le", "bool");
    ck_assert_uint_eq(facts.n_conflicts, 0);
    done();
}
END_TEST

/* backward: a consumer's needs refine what its producer is known to send */
START_TEST(backward)
{
    analyse("entry main(x: f32[?, ?], c: i32) -> (y: f32[]) {\n"
            "    x  = ARG 0\n"
            "    c  = ARG 1\n"
            "    ix = IDENTITY (x)\n"
            "    w  = CONST f32[3, 2] [[1, 2], [3, 4], [5, 6]]\n"
            "    mm = MATMUL (ix, w)\n"
            "         RESULT 0 (mm)\n"
            "}\n");
    FACT("ix", "f32[?, 3]");
    FACT("x", "f32[?, 3]");
    FACT("mm", "f32[?, 2]");
    ck_assert_uint_ge(facts.rounds, 2);
    done();
}
END_TEST

/* a known predicate: the untaken side never gets a live token */
START_TEST(known_branch)
{
    analyse("entry main(x: f32[]) -> (y: f32[]) {\n"
            "    x  = ARG 0\n"
            "    k  = CONST i32 3\n"
            "    br = BRANCH LESS i32 5 (k)\n"
            "    a  = CONST f32[2] [1, 2] [br:0]\n"
            "    b  = CONST f32[3] [1, 2, 3] [br:1]\n"
            "    m  = MERGE (a, b)\n"
            "    c  = CONST f32[3, 3] [[1, 0, 0], [0, 1, 0], [0, 0, 1]]\n"
            "    mm = MATMUL (a, c)\n"
            "    s  = ADD (m, x)\n"
            "         RESULT 0 (s)\n"
            "}\n");
    ck_assert_str_eq(fact("br", 0), "none");
    ck_assert_str_eq(fact("br", 1), "i32 = 3");
    FACT("a", "none");
    FACT("m", "f32[3] = [1, 2, 3]");
    ck_assert_str_eq(fact("m", 1), "i32 = 1");
    FACT("mm", "none");
    ck_assert_uint_eq(facts.n_conflicts, 0); /* [2] @ [3, 3] never runs */
    done();
}
END_TEST

START_TEST(conflicts)
{
    analyse("entry main(x: f32[], p: bool) -> (y: f32[], z: f32[]) {\n"
            "    x  = ARG 0\n"
            "    p  = ARG 1\n"
            "    one = CONST f32 1\n"
            "    a  = FILL (i64[2] [64, 784], one)\n"
            "    w  = FILL (i64[2] [512, 10], one)\n"
            "    matmul_10_19 = MATMUL (a, w)\n"
            "    b  = CONST f32[2] [1, 2]\n"
            "    c  = CONST f32[3] [1, 2, 3]\n"
            "    s  = SWITCH (b, p)\n"
            "    bad = ADD (s:1, c)\n"
            "    i  = CONST i32 1\n"
            "    ty = ADD (i, x)\n"
            "    rs = RESHAPE (a, i64[2] [100, 7])\n"
            "         RESULT 0 (matmul_10_19)\n"
            "         RESULT 1 (bad)\n"
            "}\n");
    ck_assert_uint_eq(facts.n_conflicts, 4);
    const char *want[4] = {"inner dims differ: f32[64, 784] @ f32[512, 10]", "shapes [2] and [3] do not broadcast",
                           "dtype mismatch: i32 and f32",
                           "cannot reshape [64, 784] (50176 elements) into [100, 7]"};
    const char *who[4] = {"matmul_10_19", "bad", "ty", "rs"};
    const bool always[4] = {true, false, true, true};
    const tfvm_status code[4] = {TFVM_ERR_SHAPE, TFVM_ERR_SHAPE, TFVM_ERR_TYPE, TFVM_ERR_SHAPE};
    for (int k = 0; k < 4; k++) {
        ck_assert_str_eq(facts.conflicts[k].msg, want[k]);
        ck_assert_uint_eq(facts.conflicts[k].inst, inst(who[k]));
        ck_assert_int_eq(facts.conflicts[k].always, always[k]);
        ck_assert_int_eq(facts.conflicts[k].code, code[k]);
    }
    tfvm_error err;
    ck_assert_int_eq(isa_facts_check(&prog, NULL, &err), TFVM_ERR_SHAPE);
    ck_assert_str_eq(err.message,
                     "t.tfasm: matmul_10_19 (MATMUL): inner dims differ: f32[64, 784] @ f32[512, 10]");
    done();
}
END_TEST

/* the loader refuses what fails wherever it runs, not what might */
START_TEST(load_time)
{
    const char *bad = "entry main() -> (y: f32[]) {\n"
                      "    a  = CONST f32[2, 3] [[1, 2, 3], [4, 5, 6]]\n"
                      "    mm = MATMUL (a, a)\n"
                      "         RESULT 0 (mm)\n"
                      "}\n";
    tfvm_program *p = NULL;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_assemble(bad, strlen(bad), "bad.tfasm", NULL, &p, &err), TFVM_ERR_SHAPE);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err.message, "bad.tfasm: mm (MATMUL): inner dims differ: f32[2, 3] @ f32[2, 3]");
    /* the same product behind a switch, or in a function: loads */
    const char *maybe = "entry main(q: bool) -> (y: f32[]) {\n"
                        "    q  = ARG 0\n"
                        "    a  = CONST f32[2, 3] [[1, 2, 3], [4, 5, 6]]\n"
                        "    s  = SWITCH (a, q)\n"
                        "    mm = MATMUL (s:1, a)\n"
                        "         RESULT 0 (mm)\n"
                        "}\n";
    ck_assert_int_eq(tfvm_program_assemble(maybe, strlen(maybe), "ok.tfasm", NULL, &p, &err), TFVM_OK);
    tfvm_program_free(p);
}
END_TEST

/* The public checking call (tfvm_debug.h): a program the load-time check
 * refuses opens unchecked, and shows the same lines and conflict as tfvm check. */
START_TEST(public_call)
{
    const char *path = "test/e2e/check/conflict.tfasm";
    tfvm_program *p = NULL;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_open(path, NULL, NULL, &p, &err), TFVM_ERR_SHAPE);
    ck_assert_str_eq(err.message, "test/e2e/check/conflict.tfasm: mm (MATMUL): inner dims differ: f32[?, 784] @ "
                                  "f32[2, 3]");
    tfvm_open_options o;
    tfvm_open_options_init(&o);
    o.unchecked = true;
    ck_assert_int_eq(tfvm_program_open(path, &o, NULL, &p, &err), TFVM_OK);
    tfvm_facts *f;
    ck_assert_int_eq(tfvm_program_facts(p, &f, &err), TFVM_OK);
    static const char *const lines[] = {"f32[?, 784]", "f32[2, 3] = [[1, 2, 3], [4, 5, 6]]", "f32[..]",
                                        "i64[2] = [2, 3]", "-"};
    ck_assert_uint_eq(tfvm_program_inst_count(p), 5);
    for (uint32_t i = 0; i < 5; i++) {
        char buf[200];
        ck_assert_msg(strcmp(tfvm_facts_line(f, i, buf, sizeof buf), lines[i]) == 0, "instruction %u: %s, want %s",
                      i, buf, lines[i]);
    }
    ck_assert_uint_eq(tfvm_facts_conflict_count(f), 1);
    const char *msg;
    ck_assert_uint_eq(tfvm_facts_conflict(f, 0, &msg), 2);
    ck_assert_str_eq(msg, "inner dims differ: f32[?, 784] @ f32[2, 3]");
    ck_assert_uint_eq(tfvm_facts_conflict(f, 1, &msg), UINT32_MAX);
    ck_assert_ptr_null(msg);
    tfvm_facts_free(f);
    tfvm_program_free(p);
    ck_assert_int_eq(tfvm_program_facts(NULL, &f, &err), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(err.message, "tfvm_program_facts: NULL argument");
}
END_TEST

/* The CPU backend's plan (tfvm_facts_kernel, docs/check.md): for a
 * convolution or pool whose shapes are known, on the threads asked for, the
 * batch's part left out where it is `?`; nothing for other instructions, a
 * convolution of unknown shapes or one that conflicts (an_kernel_plan, and
 * the public call). f64, so that no line depends on the CPU's instruction
 * set. */
START_TEST(kernel_plans)
{
    analyse("entry main(x: f64[2, 3, 9, 10], u: f64[?, 3, 9, 10], w: f64[4, 3, 3, 3], v: f64[...]) "
            "-> (a: f64[], b: f64[], c: f64[], d: f64[], e: f64[]) {\n"
            "    x  = ARG 0\n"
            "    u  = ARG 1\n"
            "    w  = ARG 2\n"
            "    v  = ARG 3\n"
            "    p  = CONST i64[9] [1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
            "    s2 = CONST i64[9] [2, 2, 1, 1, 1, 1, 1, 1, 1]\n"
            "    pp = CONST i64[8] [3, 3, 1, 1, 1, 1, 1, 1]\n"
            "    c1 = CONV2D (x, w, p)\n"
            "    c2 = CONV2D (u, w, s2)\n"
            "    c3 = CONV2D (x, v, p)\n"
            "    c4 = CONV2D (c1, w, p)\n"
            "    ap = AVGPOOL (x, pp)\n"
            "         RESULT 0 (c1)\n"
            "         RESULT 1 (c2)\n"
            "         RESULT 2 (c3)\n"
            "         RESULT 3 (c4)\n"
            "         RESULT 4 (ap)\n"
            "}\n");
    static const struct {
        const char *name;
        unsigned threads;
        const char *want;
    } cases[] = {
        {"c1", 1, "wide product w @ col on 9 x 12, OpenBLAS; 1 thread"},
        {"c1", 2, "wide product w @ col on 9 x 12, OpenBLAS; 1 of 2 threads: too little work to split"},
        {"c1", 3, "wide product w @ col on 9 x 12, OpenBLAS; 1 of 3 threads: too little work to split"},
        {"c2", 2, "im2col, w @ col, OpenBLAS"},
        {"c3", 1, ""}, /* w of unknown rank */
        {"c4", 1, ""}, /* 4 channels into a convolution over 3: a conflict */
        {"ap", 2, "average windows on a padded plane, portable; 1 of 2 threads: too little work to split"},
        {"x", 1, ""},
        {"p", 1, ""},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char buf[256];
        an_kernel_plan(&facts, inst(cases[k].name), cases[k].threads, buf, sizeof buf);
        ck_assert_msg(strcmp(buf, cases[k].want) == 0, "%s on %u threads: '%s', want '%s'", cases[k].name,
                      cases[k].threads, buf, cases[k].want);
    }
    done();
    /* through the public header, cut to the buffer */
    static const char one[] = "entry main(x: f64[2, 16, 30, 30], w: f64[16, 16, 3, 3]) -> (a: f64[]) {\n"
                              "    x  = ARG 0\n"
                              "    w  = ARG 1\n"
                              "    p  = CONST i64[9] [1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
                              "    c1 = CONV2D (x, w, p)\n"
                              "         RESULT 0 (c1)\n"
                              "}\n";
    tfvm_program *p = NULL;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_assemble(one, strlen(one), "one.tfasm", NULL, &p, &err), TFVM_OK);
    tfvm_facts *f;
    ck_assert_int_eq(tfvm_program_facts(p, &f, &err), TFVM_OK);
    char buf[256], tiny[8];
    ck_assert_str_eq(tfvm_facts_kernel(f, 3, 2, buf, sizeof buf),
                     "wide product w @ col on 30 x 32, OpenBLAS; 2 threads: 2 images in parallel");
    ck_assert_str_eq(tfvm_facts_kernel(f, 3, 1, tiny, sizeof tiny), "wide pr");
    ck_assert_str_eq(tfvm_facts_kernel(f, 0, 1, buf, sizeof buf), "");
    ck_assert_str_eq(tfvm_facts_kernel(f, 99, 1, buf, sizeof buf), "");
    tfvm_facts_free(f);
    tfvm_program_free(p);
}
END_TEST

/* Bytecode is verified on load, not analysed: the conflicting program's
 * .tfvm bytes load (the run would fail at mm), and the load-time check runs
 * only when asked (tfvm_open_options.check_bytecode; unchecked wins). */
START_TEST(bytecode_not_analysed)
{
    tfvm_open_options o;
    tfvm_open_options_init(&o);
    ck_assert(!o.check_bytecode);
    o.unchecked = true;
    tfvm_program *p = NULL, *q = NULL;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_open("test/e2e/check/conflict.tfasm", &o, NULL, &p, &err), TFVM_OK);
    void *data;
    size_t size;
    ck_assert_int_eq(tfvm_program_save_memory(p, &data, &size, &err), TFVM_OK);
    ck_assert_int_eq(tfvm_program_load_memory(data, size, "conflict.tfvm", NULL, &q, &err), TFVM_OK);
    ck_assert_uint_eq(tfvm_program_inst_count(q), 5);
    tfvm_program_free(q);
    char path[] = "/tmp/test_facts_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, data, size), (ssize_t)size);
    close(fd);
    tfvm_program_buffer_free(p, data, size);
    tfvm_program_free(p);
    struct {
        bool check, unchecked;
        tfvm_status want;
    } cases[] = {{false, false, TFVM_OK}, {true, false, TFVM_ERR_SHAPE}, {true, true, TFVM_OK}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tfvm_open_options_init(&o);
        o.check_bytecode = cases[k].check;
        o.unchecked = cases[k].unchecked;
        q = NULL;
        tfvm_status st = tfvm_program_open(path, &o, NULL, &q, &err);
        ck_assert_msg(st == cases[k].want, "case %zu (check_bytecode %d, unchecked %d): status %d, want %d: %s", k,
                      cases[k].check, cases[k].unchecked, st, cases[k].want, st ? err.message : "");
        if (st == TFVM_ERR_SHAPE) {
            char want[160];
            snprintf(want, sizeof want, "%s: mm (MATMUL): inner dims differ: f32[?, 784] @ f32[2, 3]", path);
            ck_assert_str_eq(err.message, want);
        }
        tfvm_program_free(q);
    }
    unlink(path);
}
END_TEST

START_TEST(nomem)
{
    const char *text = "entry main(n: i64) -> (s: i64) {\n"
                       "    n  = ARG 0\n"
                       "    a  = CONST i64[2, 2] [[1, 2], [3, 4]]\n"
                       "    t  = MATMUL (a, a)\n"
                       "    sh = SHAPE (t)\n"
                       "    bad = MATMUL (sh, a)\n"
                       "         RESULT 0 (n)\n"
                       "}\n";
    tfvm_error err;
    ck_assert_int_eq(ld_assemble(text, strlen(text), "t.tfasm", NULL, &prog, &err), TFVM_OK);
    bool ok = false;
    for (long fail = 0; !ok; fail++) {
        tu_alloc ta = {.countdown = fail};
        tfvm_allocator a = tu_allocator(&ta);
        tfvm_status st = isa_facts_analyse(&prog, &a, &facts, &err);
        if (st == TFVM_OK) {
            ck_assert_uint_eq(facts.n_conflicts, 0);
            isa_facts_free(&facts);
            ok = true;
        } else {
            ck_assert_int_eq(st, TFVM_ERR_NOMEM);
            ck_assert_str_eq(err.message, "t.tfasm: out of memory analysing the program");
        }
        ck_assert_int_eq(ta.live, 0);
        ck_assert_int_eq(ta.blocks, 0);
    }
    isa_program_release(&prog);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("facts");
    TCase *tc = tcase_create("facts");
    tcase_add_test(tc, tensor_rules);
    tcase_add_test(tc, shapes_only);
    tcase_add_test(tc, through_a_loop);
    tcase_add_test(tc, through_recursion);
    tcase_add_test(tc, backward);
    tcase_add_test(tc, known_branch);
    tcase_add_test(tc, conflicts);
    tcase_add_test(tc, load_time);
    tcase_add_test(tc, public_call);
    tcase_add_test(tc, kernel_plans);
    tcase_add_test(tc, bytecode_not_analysed);
    tcase_add_test(tc, nomem);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
