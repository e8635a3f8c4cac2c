/* test/unit/test_compiler.c — the graph compiler (compiler/): the shapes the
 * lowering produces, each optimization's instruction-count drop (-O0 against
 * -O1), firings per call, debug names, the compile-error suite (exact
 * messages with the quoted line and caret), and clean failure when any
 * allocation fails. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"
#include "loader/loader.h"
#include "testutil.h"
#include "tfvm.h"

/* ---- Helpers ----------------------------------------------------------------------- */

static tfvm_program *compile_opt(const char *src, int opt, const char *entry)
{
    tfvm_compile_options o;
    tfvm_compile_options_init(&o);
    o.opt_level = opt;
    o.entry = entry;
    tfvm_program *p = NULL;
    tfvm_error err;
    tfvm_status st = tfvm_program_compile(src, strlen(src), "t.tfg", &o, NULL, &p, &err);
    ck_assert_msg(st == TFVM_OK, "compile failed: %s", err.message);
    return p;
}

static tfvm_program *compile(const char *src) { return compile_opt(src, 1, NULL); }

static int region_of(const isa_program *p, const char *name)
{
    for (uint32_t r = 0; r < p->n_regions; r++)
        if (strcmp(p->regions[r].name, name) == 0)
            return (int)r;
    return -1;
}

/* Instructions with op `op` in region `region` (NULL = anywhere). */
static uint32_t count(const tfvm_program *prog, isa_op op, const char *region)
{
    const isa_program *p = &prog->isa;
    int r = region ? region_of(p, region) : -1;
    if (region)
        ck_assert_msg(r >= 0, "no region '%s'", region);
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->n_insts; i++)
        if (p->insts[i].op == op && (r < 0 || p->insts[i].region == (uint32_t)r))
            n++;
    return n;
}

static uint32_t count_flags(const tfvm_program *prog, isa_op op, uint16_t flags)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < prog->isa.n_insts; i++)
        if (prog->isa.insts[i].op == op && prog->isa.insts[i].flags == flags)
            n++;
    return n;
}

static int find_inst(const tfvm_program *prog, const char *name)
{
    for (uint32_t i = 0; i < prog->isa.n_insts; i++)
        if (prog->isa.insts[i].name && strcmp(prog->isa.insts[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* Producers feeding input `port` of instruction `dst`. */
static uint32_t producers(const tfvm_program *prog, uint32_t dst, uint32_t port)
{
    const isa_program *p = &prog->isa;
    uint32_t n = 0;
    for (uint32_t e = 0; e < p->n_edges; e++)
        if (p->edges[e].inst == dst && p->edges[e].port == port)
            n++;
    return n;
}

typedef struct run_out {
    tfvm_status st;
    tfvm_value r[4];
    tfvm_stats stats;
    char msg[512];
} run_out;

static run_out run(const tfvm_program *p, const tfvm_value *args, size_t n_args)
{
    run_out o;
    memset(&o, 0, sizeof o);
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(p, NULL, &vm), TFVM_OK);
    tfvm_entry_info e;
    ck_assert_int_eq(tfvm_program_entry(p, 0, &e), TFVM_OK);
    o.st = tfvm_run(vm, NULL, args, n_args, o.r, e.n_results);
    if (o.st != TFVM_OK)
        snprintf(o.msg, sizeof o.msg, "%s", tfvm_errmsg(vm));
    tfvm_vm_stats(vm, &o.stats);
    tfvm_vm_free(vm);
    return o;
}

static int64_t run_i(const tfvm_program *p, const tfvm_value *args, size_t n_args)
{
    run_out o = run(p, args, n_args);
    ck_assert_msg(o.st == TFVM_OK, "run failed: %s", o.msg);
    return o.r[0].dtype == TFVM_I64 ? o.r[0].as.i64 : o.r[0].as.i32;
}

static const char *fib_src = "fn fib(n: i32) -> i32 {\n"
                             "    if n <= 1 { 1 } else { fib(n - 1) + fib(n - 2) }\n"
                             "}\n"
                             "fn main(n: i32) -> i32 { fib(n) }\n";

static const char *sum_src = "fn main(n: i64) -> i64 {\n"
                             "    let (i, s) = while sum_loop (i = 1, s = 0; i <= n) { (i + 1, s + i) };\n"
                             "    s\n"
                             "}\n";

/* ---- Lowering shapes ------------------------------------------------------------------ */

START_TEST(fib_shape)
{
    tfvm_program *p = compile(fib_src);
    const isa_program *ip = &p->isa;
    ck_assert_uint_eq(ip->n_entries, 1);
    ck_assert_str_eq(ip->entries[0].name, "main");
    ck_assert_int_eq(ip->regions[ip->entries[0].region].kind, ISA_REGION_ROOT);
    int fr = region_of(ip, "fib");
    ck_assert_int_ge(fr, 0);
    ck_assert_int_eq(ip->regions[fr].kind, ISA_REGION_FUNC);
    /* one CALL per argument and one RETURN per result, per site */
    ck_assert_uint_eq(count(p, ISA_CALL, NULL), 3);
    ck_assert_uint_eq(count(p, ISA_RETURN, NULL), 3);
    /* call sites numbered in textual order: fib's two, then main's */
    ck_assert_uint_eq(ip->n_sites, 3);
    for (uint32_t s = 0; s < 3; s++)
        ck_assert_uint_eq(ip->sites[s].id, s);
    ck_assert_uint_eq(count(p, ISA_CALL, "main"), 1);
    int c = find_inst(p, "fib_2_n");
    ck_assert_int_ge(c, 0);
    ck_assert_uint_eq(ip->sites[ip->insts[c].a].id, 2);
    /* the if on n <= 1: one BRANCH (the comparison and the SWITCH in one),
     * pruned on both sides, so no dead token exists in fib and the if needs
     * no MERGE (the RETURNs take both branches); the parameter needs neither
     * MERGE nor IDENTITY: its readers take the three CALLs directly */
    ck_assert_uint_eq(count(p, ISA_SWITCH, "fib"), 0);
    ck_assert_uint_eq(count(p, ISA_LESS_EQUAL, "fib"), 0);
    ck_assert_uint_eq(count(p, ISA_BRANCH, "fib"), 1);
    ck_assert_uint_eq(count(p, ISA_MERGE, "fib"), 0);
    ck_assert_uint_eq(count(p, ISA_IDENTITY, NULL), 0);
    int br = find_inst(p, "n_sw");
    ck_assert_int_ge(br, 0);
    ck_assert_uint_eq(ip->insts[br].a, ISA_LESS_EQUAL);
    ck_assert_uint_eq(producers(p, (uint32_t)br, 0), 3);
    ck_assert_int_eq(run_i(p, (tfvm_value[]){tfvm_i32(20)}, 1), 10946);
    tfvm_program_free(p);
}
END_TEST

/* The main lever on recursion speed: instructions fired per call. */
START_TEST(fib_firings_per_call)
{
    tfvm_program *p = compile(fib_src);
    run_out o = run(p, (tfvm_value[]){tfvm_i32(20)}, 1);
    ck_assert_int_eq(o.st, TFVM_OK);
    ck_assert_int_eq(o.r[0].as.i32, 10946);
    uint64_t calls = 2 * 10946 - 1, leaves = 10946, inner = calls - leaves;
    /* a leaf: BRANCH, CONST 1, its RETURN in the caller; an inner call:
     * BRANCH, two SUBs (constant operands), two CALLs, ADD, its RETURN (pruned
     * branches, no MERGE); main: ARG, CALL, RESULT */
    ck_assert_msg(o.stats.fired == 3 * leaves + 7 * inner + 3, "fib fires %llu instructions for %llu calls",
                  (unsigned long long)o.stats.fired, (unsigned long long)calls);
    tfvm_program *q = compile_opt(fib_src, 0, NULL);
    run_out o0 = run(q, (tfvm_value[]){tfvm_i32(20)}, 1);
    ck_assert_int_eq(o0.r[0].as.i32, 10946);
    ck_assert_uint_gt(o0.stats.fired, o.stats.fired + calls); /* -O0: more than one extra firing per call */
    tfvm_program_free(p);
    tfvm_program_free(q);
}
END_TEST

START_TEST(while_shape)
{
    tfvm_program *p = compile(sum_src);
    ck_assert_int_ge(region_of(&p->isa, "sum_loop"), 0);
    ck_assert_int_eq(p->isa.regions[region_of(&p->isa, "sum_loop")].kind, ISA_REGION_LOOP);
    ck_assert_uint_eq(count_flags(p, ISA_ENTER, 0), 2);              /* i, s */
    ck_assert_uint_ge(count_flags(p, ISA_ENTER, ISA_FLAG_CONST), 1); /* the invariant n */
    ck_assert_uint_eq(count(p, ISA_LOOPCOND, "sum_loop"), 1);
    ck_assert_uint_eq(count(p, ISA_NEXTITER, "sum_loop"), 2);
    ck_assert_uint_eq(count(p, ISA_EXIT, "sum_loop"), 1); /* only s leaves the loop */
    ck_assert_uint_eq(count(p, ISA_SWITCH, "sum_loop"), 2);
    ck_assert_int_eq(run_i(p, (tfvm_value[]){tfvm_i64(100000)}, 1), 5000050000LL);
    ck_assert_int_eq(run_i(p, (tfvm_value[]){tfvm_i64(0)}, 1), 0);
    tfvm_program_free(p);
}
END_TEST

/* Deadness through a branch holding a loop and a call: every value entering
 * the branch is gated, so the untaken side never enters the loop or callee. */
START_TEST(branch_with_loop_and_call)
{
    const char *src = "fn sq(x: i64) -> i64 { x * x }\n"
                      "fn main(x: i64) -> i64 {\n"
                      "    if x > 0 {\n"
                      "        let (i, s) = while (i = 1i64, s = 0i64; i <= x) { (i + 1, s + i) };\n"
                      "        s\n"
                      "    } else {\n"
                      "        sq(x)\n"
                      "    }\n"
                      "}\n";
    tfvm_program *p = compile(src);
    ck_assert_int_eq(run_i(p, (tfvm_value[]){tfvm_i64(5)}, 1), 15);
    ck_assert_int_eq(run_i(p, (tfvm_value[]){tfvm_i64(-4)}, 1), 16);
    ck_assert_int_eq(run_i(p, (tfvm_value[]){tfvm_i64(1000)}, 1), 500500);
    /* the loop's non-const ENTERs read the branch's SWITCH outputs or constants gated by them */
    const isa_program *ip = &p->isa;
    for (uint32_t i = 0; i < ip->n_insts; i++) {
        if (ip->insts[i].op != ISA_ENTER)
            continue;
        for (uint32_t e = 0; e < ip->n_edges; e++) {
            if (ip->edges[e].inst != i)
                continue;
            uint32_t src_i = 0;
            while (!(e >= ip->insts[src_i].edge_first && e < ip->insts[src_i].edge_first + ip->insts[src_i].n_edges))
                src_i++;
            uint16_t op = ip->insts[src_i].op;
            ck_assert_msg(isa_is_switch(op) || (op == ISA_CONST && ip->insts[src_i].n_ctl == 1),
                          "an ENTER of the branch's loop reads an ungated %s", isa_ops[op].name);
        }
    }
    tfvm_program_free(p);
}
END_TEST

START_TEST(mutual_recursion_and_entry)
{
    const char *src = "fn even(n: i32) -> bool { if n == 0 { true } else { odd(n - 1) } }\n"
                      "fn odd(n: i32) -> bool { if n == 0 { false } else { even(n - 1) } }\n"
                      "fn unused(n: i32) -> i32 { n }\n"
                      "fn main(n: i32) -> bool { even(n) }\n";
    tfvm_program *p = compile(src);
    ck_assert_int_ge(region_of(&p->isa, "even"), 0);
    ck_assert_int_ge(region_of(&p->isa, "odd"), 0);
    ck_assert_int_lt(region_of(&p->isa, "unused"), 0); /* unreachable: dropped */
    run_out o = run(p, (tfvm_value[]){tfvm_i32(1001)}, 1);
    ck_assert_int_eq(o.st, TFVM_OK);
    ck_assert(!o.r[0].as.b);
    tfvm_program_free(p);
    /* another entry */
    p = compile_opt(src, 1, "odd");
    ck_assert_str_eq(p->isa.entries[0].name, "odd");
    ck_assert_int_lt(region_of(&p->isa, "main"), 0);
    o = run(p, (tfvm_value[]){tfvm_i32(7)}, 1);
    ck_assert(o.r[0].as.b);
    tfvm_program_free(p);
}
END_TEST

START_TEST(recursive_entry_is_wrapped)
{
    const char *src = "fn main(n: i32) -> i32 { if n > 0 { main(n - 1) + 2 } else { 0 } }\n";
    tfvm_program *p = compile(src);
    const isa_program *ip = &p->isa;
    ck_assert_str_eq(ip->regions[ip->entries[0].region].name, "main_entry");
    ck_assert_int_eq(ip->regions[region_of(ip, "main")].kind, ISA_REGION_FUNC);
    ck_assert_int_eq(run_i(p, (tfvm_value[]){tfvm_i32(50)}, 1), 100);
    tfvm_program_free(p);
}
END_TEST

START_TEST(zero_parameters_and_results)
{
    const char *src = "fn seven() -> i32 { 7 }\n"
                      "fn divmod(a: i32, b: i32) -> (q: i32, r: i32) { (a / b, a % b) }\n"
                      "fn main() -> (a: i32, b: i32, c: i32) {\n"
                      "    let (q, r) = divmod(seven() * 6, 5);\n"
                      "    (q, r, seven())\n"
                      "}\n";
    tfvm_program *p = compile(src);
    const isa_program *ip = &p->isa;
    ck_assert_uint_eq(ip->entries[0].n_params, 0);
    ck_assert_uint_eq(ip->entries[0].n_results, 3);
    ck_assert_str_eq(ip->entries[0].results[1].name, "b");
    /* seven() twice with the same (no) arguments: one call (calls of pure
     * functions are common subexpressions); its CALL carries a trigger */
    ck_assert_uint_eq(count(p, ISA_CALL, NULL), 3);
    ck_assert_uint_eq(count(p, ISA_RETURN, NULL), 3); /* seven, q, r */
    run_out o = run(p, NULL, 0);
    ck_assert_int_eq(o.st, TFVM_OK);
    ck_assert_int_eq(o.r[0].as.i32, 8);
    ck_assert_int_eq(o.r[1].as.i32, 2);
    ck_assert_int_eq(o.r[2].as.i32, 7);
    tfvm_program_free(p);
}
END_TEST

/* The variable table (issue 30): each let, var, parameter and loop variable
 * at the outputs that carry it, as dis writes them; for loops are named
 * after their counter. */
START_TEST(source_variables)
{
    const char *src = "fn sq(x: i32) -> i32 {\n"
                      "    let d = x * x;\n"
                      "    d + 1\n"
                      "}\n"
                      "fn main(n: i32) -> i32 {\n"
                      "    var s = 0;\n"
                      "    for i in 0..n { s += sq(i); }\n"
                      "    for i in 0..n { s += 1; }\n"
                      "    s\n"
                      "}\n";
    tfvm_program *p = compile(src);
    ck_assert_int_ge(region_of(&p->isa, "main_for_i"), 0);
    ck_assert_int_ge(region_of(&p->isa, "main_for_i_2"), 0);
    /* name@instruction:output, in table order */
    char got[1024] = "";
    for (uint32_t j = 0; j < p->isa.n_vars; j++) {
        const isa_var *v = &p->isa.vars[j];
        char one[96];
        snprintf(one, sizeof one, "%s%s@%s:%u", j ? " " : "", v->name,
                 p->isa.insts[v->inst].name ? p->isa.insts[v->inst].name : "?", v->out);
        strncat(got, one, sizeof got - strlen(got) - 1);
    }
    ck_assert_str_eq(got, "n@n:0 i@i_enter:0 s@s_enter:0 i@i_enter_1:0 s@s_enter_1:0 x@sq_0_x:0 s@s:0 "
                          "i@i_next:0 s@s_next:0 s@s_out:0 s@s:0 i@i_next:0 s@s_next:0 s@s_out:0 d@d:0");
    tfvm_program_free(p);
}
END_TEST

START_TEST(debug_names_and_locations)
{
    const char *src = "fn main(x: i32, y: i32) -> i32 {\n"
                      "    let q = x / y;\n"
                      "    let (i, s) = while (i = 0, s = 0; i < x) { (i + 1, s + q) };\n"
                      "    s + y * 2\n"
                      "}\n";
    tfvm_program *p = compile(src);
    int q = find_inst(p, "q");
    ck_assert_int_ge(q, 0);
    ck_assert_int_eq(p->isa.insts[q].op, ISA_DIV);
    ck_assert_uint_eq(p->isa.insts[q].line, 2);
    ck_assert_uint_eq(p->isa.insts[q].col, 15);
    int m = find_inst(p, "mul_4_11");
    ck_assert_int_ge(m, 0);
    ck_assert_uint_eq(p->isa.insts[m].line, 4);
    ck_assert_int_ge(find_inst(p, "x"), 0); /* ARG named after the parameter */
    ck_assert_int_ge(region_of(&p->isa, "main_while1"), 0);
    /* run-time errors name the instruction, so they point back to source */
    run_out o = run(p, (tfvm_value[]){tfvm_i32(3), tfvm_i32(0)}, 2);
    ck_assert_int_eq(o.st, TFVM_ERR_ARITH);
    ck_assert_str_eq(o.msg, "q (DIV) at []: integer division by zero");
    tfvm_program_free(p);
}
END_TEST

START_TEST(tensors)
{
    const char *src = "fn scale(t: f32[3], k: f32) -> f32[3] { t * k }\n"
                      "fn main() -> (t: f32[3], any: bool) {\n"
                      "    let t = scale([1.0, 2.0, 3.0], 2.0) + [[0.5, 0.5, 0.5]][0 - 0];\n"
                      "    (t, true)\n"
                      "}\n";
    tfvm_error err;
    tfvm_program *p = NULL;
    /* indexing a literal is a GATHER like any other, on constants: folded (compiler/opt.c) */
    ck_assert_msg(tfvm_program_compile(src, strlen(src), "t.tfg", NULL, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    ck_assert_uint_eq(count(p, ISA_GATHER, "main"), 0);
    tfvm_program_free(p);
    const char *ok = "fn scale(t: f32[3], k: f32) -> f32[3] { t * k }\n"
                     "fn main(u: f32[?]) -> (t: f32[3], v: f32[?]) {\n"
                     "    (scale([1.0, 2.0, 3.0], 2.0) + [0.5, 0.5, 0.5], u * 2.0)\n"
                     "}\n";
    p = compile(ok);
    ck_assert_int_eq(p->isa.entries[0].params[0].rank, ISA_RANK_ANY);
    tfvm_entry_info e;
    ck_assert_int_eq(tfvm_program_entry(p, 0, &e), TFVM_OK);
    ck_assert_int_eq(e.results[0].rank, 1); /* t: f32[3], declared */
    ck_assert(e.results[0].is_tensor);
    ck_assert_int_eq(e.results[0].dims[0], 3);
    ck_assert_int_eq(e.params[0].dims[0], -1); /* u: f32[?] */
    int64_t d = 2;
    tfvm_tensor *u = tfvm_tensor_new(TFVM_F32, 1, &d, NULL);
    ((float *)tfvm_tensor_data(u))[0] = 1.5f;
    ((float *)tfvm_tensor_data(u))[1] = -1.0f;
    run_out o = run(p, (tfvm_value[]){tfvm_tensor_value(u)}, 1);
    ck_assert_msg(o.st == TFVM_OK, "%s", o.msg);
    const float *t = tfvm_tensor_cdata(o.r[0].tensor);
    ck_assert(t[0] == 2.5f && t[1] == 4.5f && t[2] == 6.5f);
    const float *v = tfvm_tensor_cdata(o.r[1].tensor);
    ck_assert(v[0] == 3.0f && v[1] == -2.0f);
    tfvm_value_release(&o.r[0]);
    tfvm_value_release(&o.r[1]);
    tfvm_tensor_free(u);
    tfvm_program_free(p);
}
END_TEST

/* dis -> asm gives back the same bytes for compiled programs too. */
START_TEST(round_trip)
{
    const char *srcs[] = {fib_src, sum_src};
    for (size_t k = 0; k < 2; k++) {
        for (int opt = 0; opt < 2; opt++) {
            tfvm_program *p = compile_opt(srcs[k], opt, NULL);
            ut_buf a, b, text;
            ut_buf_init(&a, NULL);
            ut_buf_init(&b, NULL);
            ut_buf_init(&text, NULL);
            tfvm_error err;
            ck_assert_int_eq(ld_write(&p->isa, &a, &err), TFVM_OK);
            ck_assert_int_eq(ld_disassemble(&p->isa, &text, &err), TFVM_OK);
            isa_program q;
            ck_assert_msg(ld_assemble((const char *)text.data, text.len, "t.tfasm", NULL, &q, &err) == TFVM_OK, "%s",
                          err.message);
            ck_assert_int_eq(ld_write(&q, &b, &err), TFVM_OK);
            ck_assert_uint_eq(a.len, b.len);
            ck_assert(memcmp(a.data, b.data, a.len) == 0);
            isa_program_release(&q);
            ut_buf_free(&a);
            ut_buf_free(&b);
            ut_buf_free(&text);
            tfvm_program_free(p);
        }
    }
}
END_TEST

/* An if routes each value it uses through its own SWITCH; they share one
 * predicate, so they take one side together and are pruned as a group: in
 * takeuchi all three SWITCHes are pruned both ways and the if has no MERGE. */
START_TEST(switch_groups_prune_together)
{
    const char *src = "fn tak(x: i32, y: i32, z: i32) -> i32 {\n"
                      "    if y < x { tak(tak(x - 1, y, z), tak(y - 1, z, x), tak(z - 1, x, y)) } else { z }\n"
                      "}\n"
                      "fn main(x: i32, y: i32, z: i32) -> i32 { tak(x, y, z) }\n";
    tfvm_program *p = compile(src);
    const isa_program *ip = &p->isa;
    ck_assert_uint_eq(count(p, ISA_SWITCH, "tak"), 3);
    for (uint32_t i = 0; i < ip->n_insts; i++)
        if (ip->insts[i].op == ISA_SWITCH)
            ck_assert_uint_eq(ip->insts[i].flags & (ISA_FLAG_PRUNE_FALSE | ISA_FLAG_PRUNE_TRUE),
                              ISA_FLAG_PRUNE_FALSE | ISA_FLAG_PRUNE_TRUE);
    ck_assert_uint_eq(count(p, ISA_MERGE, "tak"), 0);
    tfvm_value args[3] = {tfvm_i32(18), tfvm_i32(12), tfvm_i32(6)}, r;
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(p, NULL, &vm), TFVM_OK);
    ck_assert_int_eq(tfvm_run(vm, "main", args, 3, &r, 1), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 7);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* What `tfvm compile --emit=asm examples/fib.tfg` prints for the if: at -O1
 * a BRANCH (comparison and SWITCH in one) pruned on both sides, and the loose
 * constants are constant
 * operands; at -O0 neither. */
static char *fib_example_asm(int opt)
{
    char *src;
    size_t len;
    tfvm_error err;
    ck_assert_msg(ut_read_file("examples/fib.tfg", NULL, &src, &len, &err) == TFVM_OK, "%s", err.message);
    tfvm_compile_options o;
    tfvm_compile_options_init(&o);
    o.opt_level = opt;
    tfvm_program *p = NULL;
    ck_assert_msg(tfvm_program_compile(src, len, "examples/fib.tfg", &o, NULL, &p, &err) == TFVM_OK, "%s",
                  err.message);
    ut_buf text;
    ut_buf_init(&text, NULL);
    ck_assert_int_eq(ld_disassemble(&p->isa, &text, &err), TFVM_OK);
    size_t n;
    char *asm_text = ut_buf_take(&text, &n);
    ck_assert_ptr_nonnull(asm_text);
    tfvm_program_free(p);
    free(src);
    return asm_text;
}

START_TEST(fib_example_emits_operands_and_pruning)
{
    char *t = fib_example_asm(1);
    ck_assert_msg(strstr(t, "    n_sw      = BRANCH LESS_EQUAL i32 1 prune_false prune_true "
                            "(main.fib_2_n | fib_0_n | fib_1_n) @12:5\n"),
                  "%s", t);
    ck_assert_msg(strstr(t, "    sub_12_34 = SUB (n_sw, i32 1) @12:34\n"), "%s", t);
    ck_assert_msg(strstr(t, "    sub_12_47 = SUB (n_sw, i32 2) @12:47\n"), "%s", t);
    ck_assert_msg(strstr(t, "LESS_EQUAL (") == NULL, "%s", t);
    free(t);
    t = fib_example_asm(0);
    ck_assert_msg(strstr(t, "prune_") == NULL && strstr(t, ", i32 ") == NULL, "%s", t);
    ck_assert_msg(strstr(t, "= SWITCH (n, less_equal_12_10) @12:5\n"), "%s", t);
    free(t);
}
END_TEST

/* ---- Tensor ops: inferred types and lowering ---------------------------------------------- */

/* Each expression's type, as the checker infers it (shapes known at compile
 * time included): the message of a mismatch with a declared bool result
 * names it. */
static const struct {
    const char *expr, *type;
} tensor_types[] = {
    {"matmul(x, y)", "f32[2, 4]"},
    {"matmul(x, x, tb = true)", "f32[2, 2]"},
    {"matmul(x, x, ta = true)", "f32[3, 3]"},
    {"matmul(z, y)", "f32[?, 4]"},
    {"matmul(reshape(x, [1, 2, 3]), b3)", "f32[2, 2, 4]"},
    {"conv2d(im, k)", "f32[1, 4, 6, 6]"},
    {"conv2d(im, k, padding = 1)", "f32[1, 4, 8, 8]"},
    {"conv2d(im, k, stride = 2, padding = [1, 1])", "f32[1, 4, 4, 4]"},
    {"conv2d(im, k, dilation = 2)", "f32[1, 4, 4, 4]"},
    {"conv2d(im, k, 1, [0, 1, 2, 3], 1, 1)", "f32[1, 4, 8, 10]"},
    {"maxpool(im, 2)", "f32[1, 3, 4, 4]"},
    {"avgpool(im, kernel = 3, stride = 1, padding = 1)", "f32[1, 3, 8, 8]"},
    {"maxpool(im, [2, 4], stride = [2, 1])", "f32[1, 3, 4, 5]"},
    {"softmax(x)", "f32[2, 3]"},
    {"softmax(x, 0)", "f32[2, 3]"},
    {"reduce_sum(x)", "f32"},
    {"reduce_sum(x, 1)", "f32[2]"},
    {"reduce_mean(x, [0, 1], keepdims = true)", "f32[1, 1]"},
    {"reduce_max(z, axes = -1)", "f32[?]"},
    {"argmax(x)", "i64[2]"},
    {"argmax(y, axis = 0)", "i64[4]"},
    {"reshape(x, [3, 2])", "f32[3, 2]"},
    {"reshape(x, [-1])", "f32[6]"},
    {"reshape(z, [-1, 3, 1])", "f32[?, 3, 1]"},
    {"reshape(x, shape(y))", "f32[?, ?]"},
    {"reshape(n, [1, 1])", "i32[1, 1]"},
    {"transpose(im)", "f32[8, 8, 3, 1]"},
    {"transpose(im, [0, 2, 3, 1])", "f32[1, 8, 8, 3]"},
    {"concat(x, x)", "f32[4, 3]"},
    {"concat(x, z, axis = 0)", "f32[?, 3]"},
    {"concat(x, x, axis = -1)", "f32[2, 6]"},
    {"slice(x, [0, 1], [2, 10])", "f32[2, 2]"},
    {"slice(x, [-1, 0], [2, -1])", "f32[1, 2]"},
    {"slice(x, shape(x), shape(y))", "f32[?, ?]"},
    {"gather(y, v)", "f32[?, 4]"},
    {"gather(y, [[0, 1]], axis = 1)", "f32[3, 1, 2]"},
    {"x[1]", "f32[3]"},
    {"x[1, 2]", "f32"},
    {"x[:, 0]", "f32[2]"},
    {"x[-1][2]", "f32"},
    {"x[:, :]", "f32[2, 3]"},
    {"y[v]", "f32[?, 4]"},
    {"y[:, v]", "f32[3, ?]"},
    {"v[s]", "i64"},
    {"pad(x, [1, 0, 1, 2])", "f32[4, 5]"},
    {"pad(x, shape(im))", "f32[?, ?]"},
    {"shape(im)", "i64[4]"},
    {"shape(n)", "i64[0]"},
    {"fill([2, 3], 1.5)", "f64[2, 3]"},
    {"fill(shape(x), 0i32)", "i32[?, ?]"},
    {"range(0, 5)", "i32[5]"},
    {"range(0.0, 1.0, 0.25)", "f64[4]"},
    {"range(s, 10)", "i64[?]"},
    {"range(10, 0, -3)", "i32[4]"},
    {"relu(n)", "i32"},
    {"tanh(x)", "f32[2, 3]"},
    {"exp(z)", "f32[?, 3]"},
    {"where(x > 0.0, x, 0.0)", "f32[2, 3]"},
};

START_TEST(tensor_op_types)
{
    for (size_t i = 0; i < UT_COUNTOF(tensor_types); i++) {
        char src[512], want[128];
        snprintf(src, sizeof src,
                 "fn main(x: f32[2, 3], y: f32[3, 4], b3: f32[2, 3, 4], z: f32[?, 3], im: f32[1, 3, 8, 8],\n"
                 "        k: f32[4, 3, 3, 3], v: i64[?], s: i64, n: i32) -> bool {\n"
                 "    %s\n}\n",
                 tensor_types[i].expr);
        snprintf(want, sizeof want, "'main' returns bool but its body gives %s\n", tensor_types[i].type);
        tfvm_program *p = NULL;
        tfvm_error err;
        tfvm_status st = tfvm_program_compile(src, strlen(src), "t.tfg", NULL, NULL, &p, &err);
        ck_assert_msg(st == TFVM_ERR_TYPE && strstr(err.message, want), "%s: want %s, got %s", tensor_types[i].expr,
                      tensor_types[i].type, err.message);
    }
}
END_TEST

/* The constant operand (b) of instruction `name`, which must be an i64 vector. */
static void check_vec_operand(const tfvm_program *p, const char *name, int port, const int64_t *want, uint32_t n)
{
    int i = find_inst(p, name);
    ck_assert_msg(i >= 0, "no instruction '%s'", name);
    const isa_inst *in = &p->isa.insts[i];
    ck_assert_int_eq(isa_imm_port(in), port);
    const isa_const *c = &p->isa.consts[in->b];
    ck_assert_int_eq(c->dtype, TFVM_I64);
    ck_assert_int_eq(c->rank, 1);
    ck_assert_int_eq(c->dims[0], n);
    ck_assert(n == 0 || memcmp(c->data, want, n * sizeof *want) == 0);
}

START_TEST(tensor_op_lowering)
{
    const char *src = "fn main(x: f32[?, 3, 8, 8], w: f32[4, 3, 3, 3], a: f32[?, ?], v: i64[?]) ->\n"
                      "        (c: f32[?, 4, 4, 4], p: f32[?, 3, 4, 4], m: f32[?, ?], s: f32[?, ?], r: f32[?, 1],\n"
                      "         t: f32[?], g: f32[?, ?, 8], f: f32[2, 2]) {\n"
                      "    let c = conv2d(x, w, stride = 2, padding = 1);\n"
                      "    let p = avgpool(x, [2, 2]);\n"
                      "    let m = matmul(a, a, ta = true, tb = true);\n"
                      "    let s = softmax(a);\n"
                      "    let r = reduce_max(a, 1, keepdims = true);\n"
                      "    let t = reduce_sum(a, [0]);\n"
                      "    let g = x[1, :, v];\n"
                      "    let f = fill([2, 2], 0.5f32);\n"
                      "    (c, p, m, s, r, t, g, f)\n"
                      "}\n";
    tfvm_program *p = compile(src);
    check_vec_operand(p, "c", 2, (int64_t[]){2, 2, 1, 1, 1, 1, 1, 1, 1}, 9);
    check_vec_operand(p, "p", 1, (int64_t[]){2, 2, 2, 2, 0, 0, 0, 0}, 8);
    check_vec_operand(p, "r", 1, (int64_t[]){1}, 1);
    check_vec_operand(p, "t", 1, (int64_t[]){0}, 1);
    ck_assert_uint_eq(p->isa.insts[find_inst(p, "m")].a, ISA_OPT_TRANS_A | ISA_OPT_TRANS_B);
    ck_assert_uint_eq(p->isa.insts[find_inst(p, "s")].a, (uint32_t)-1);
    ck_assert_uint_eq(p->isa.insts[find_inst(p, "r")].a, ISA_OPT_KEEPDIMS);
    ck_assert_uint_eq(p->isa.insts[find_inst(p, "t")].a, 0);
    /* x[1, :, v]: GATHER axis 0 by the constant 1, then GATHER axis 1 by v */
    ck_assert_uint_eq(count(p, ISA_GATHER, "main"), 2);
    const isa_inst *g = &p->isa.insts[find_inst(p, "g")];
    ck_assert_int_eq(g->op, ISA_GATHER);
    ck_assert_uint_eq(g->a, 1);
    ck_assert_uint_eq(producers(p, (uint32_t)find_inst(p, "g"), 0), 1);
    ck_assert_uint_eq(producers(p, (uint32_t)find_inst(p, "g"), 1), 1);
    /* a fill of constants is folded into one small constant (compiler/opt.c) */
    ck_assert_uint_eq(count(p, ISA_FILL, NULL), 0);
    tfvm_program_free(p);
    /* x[:] is x */
    p = compile("fn main(a: f32[?, ?]) -> f32[?, ?] { a[:] + a[:, :] }");
    ck_assert_uint_eq(count(p, ISA_GATHER, NULL), 0);
    ck_assert_uint_eq(count(p, ISA_ADD, NULL), 1);
    tfvm_program_free(p);
    /* unused tensor ops stay when they may fail at run time (inner dims
     * unknown), and go when they cannot (a transpose of a rank-2 argument) */
    p = compile("fn main(a: f32[?, ?]) -> i32 { let u = matmul(a, a); let v = transpose(a); 1 }");
    ck_assert_uint_eq(count(p, ISA_MATMUL, NULL), 1);
    ck_assert_uint_eq(count(p, ISA_TRANSPOSE, NULL), 0);
    tfvm_program_free(p);
}
END_TEST

/* ---- Optimizations: each one's instruction-count drop ---------------------------------- */

static void both(const char *src, tfvm_program **o0, tfvm_program **o1)
{
    *o0 = compile_opt(src, 0, NULL);
    *o1 = compile_opt(src, 1, NULL);
}

START_TEST(opt_constant_folding)
{
    const char *src = "fn main(x: i32) -> i32 {\n"
                      "    let k = 2 * 3 - (10 - 4) * 1 + cast<i32>(2.5);\n"
                      "    if 1 < 2 { x + k } else { x * 100 }\n"
                      "}\n";
    tfvm_program *a, *b;
    both(src, &a, &b);
    ck_assert_uint_gt(count(a, ISA_MUL, NULL), 0);
    ck_assert_uint_eq(count(b, ISA_MUL, NULL), 0);    /* folded */
    ck_assert_uint_eq(count(b, ISA_CAST, NULL), 0);
    ck_assert_uint_eq(count(b, ISA_SWITCH, NULL), 0); /* known condition: no branch */
    ck_assert_uint_eq(count(b, ISA_MERGE, NULL), 0);
    ck_assert_uint_lt(b->isa.n_insts, a->isa.n_insts);
    ck_assert_int_eq(run_i(a, (tfvm_value[]){tfvm_i32(5)}, 1), 7);
    ck_assert_int_eq(run_i(b, (tfvm_value[]){tfvm_i32(5)}, 1), 7);
    /* division by a constant zero stays a run-time error */
    tfvm_program *c = compile("fn main(x: i32) -> i32 { x + 1 / 0 }\n");
    ck_assert_uint_eq(count(c, ISA_DIV, NULL), 1);
    ck_assert_int_eq(run(c, (tfvm_value[]){tfvm_i32(1)}, 1).st, TFVM_ERR_ARITH);
    tfvm_program_free(a);
    tfvm_program_free(b);
    tfvm_program_free(c);
}
END_TEST

START_TEST(opt_cse)
{
    const char *src = "fn f(x: i32) -> i32 { x * 3 }\n"
                      "fn main(x: i32, y: i32) -> i32 { (x * y) + (y * x) + f(x) + f(x) }\n";
    tfvm_program *a, *b;
    both(src, &a, &b);
    ck_assert_uint_eq(count(a, ISA_MUL, "main"), 2);
    ck_assert_uint_eq(count(b, ISA_MUL, "main"), 1); /* commutative: x*y == y*x */
    ck_assert_uint_eq(count(a, ISA_CALL, NULL), 2);
    ck_assert_uint_eq(count(b, ISA_CALL, NULL), 1); /* pure function, same argument */
    ck_assert_uint_lt(b->isa.n_insts, a->isa.n_insts);
    ck_assert_int_eq(run_i(a, (tfvm_value[]){tfvm_i32(3), tfvm_i32(4)}, 2), 42);
    ck_assert_int_eq(run_i(b, (tfvm_value[]){tfvm_i32(3), tfvm_i32(4)}, 2), 42);
    tfvm_program_free(a);
    tfvm_program_free(b);
}
END_TEST

START_TEST(opt_dce)
{
    const char *src = "fn f(a: i32, b: i32) -> i32 { a + 1 }\n"
                      "fn main(x: i32, y: i32) -> i32 {\n"
                      "    let unused = x * 7;\n"
                      "    let also = unused - y;\n"
                      "    let q = x / y;\n"
                      "    f(x, also)\n"
                      "}\n";
    tfvm_program *a, *b;
    both(src, &a, &b);
    ck_assert_uint_eq(count(a, ISA_MUL, NULL), 1);
    ck_assert_uint_eq(count(b, ISA_MUL, NULL), 0);
    ck_assert_uint_eq(count(b, ISA_SUB, NULL), 0);
    ck_assert_uint_eq(count(b, ISA_DIV, NULL), 1); /* may fail: kept, so errors do not depend on use */
    ck_assert_uint_eq(count(a, ISA_CALL, NULL), 2);
    ck_assert_uint_eq(count(b, ISA_CALL, NULL), 1); /* the unused parameter is not passed */
    ck_assert_uint_lt(b->isa.n_insts, a->isa.n_insts);
    ck_assert_int_eq(run_i(b, (tfvm_value[]){tfvm_i32(3), tfvm_i32(4)}, 2), 4);
    ck_assert_int_eq(run(b, (tfvm_value[]){tfvm_i32(3), tfvm_i32(0)}, 2).st, TFVM_ERR_ARITH);
    ck_assert_int_eq(run(a, (tfvm_value[]){tfvm_i32(3), tfvm_i32(0)}, 2).st, TFVM_ERR_ARITH);
    tfvm_program_free(a);
    tfvm_program_free(b);
}
END_TEST

/* MERGE elision: loop variables (ENTER and NEXTITER never share a tag) and
 * parameters (the CALLs of different sites never share a tag). */
START_TEST(opt_merge_elision)
{
    tfvm_program *a, *b;
    both(sum_src, &a, &b);
    ck_assert_uint_eq(count(a, ISA_MERGE, "sum_loop"), 2);
    ck_assert_uint_eq(count(b, ISA_MERGE, "sum_loop"), 0);
    run_out ra = run(a, (tfvm_value[]){tfvm_i64(1000)}, 1), rb = run(b, (tfvm_value[]){tfvm_i64(1000)}, 1);
    ck_assert_int_eq(ra.r[0].as.i64, 500500);
    ck_assert_int_eq(rb.r[0].as.i64, 500500);
    ck_assert_uint_ge(ra.stats.fired, rb.stats.fired + 2 * 1000); /* two firings per iteration fewer */
    tfvm_program_free(a);
    tfvm_program_free(b);
    both(fib_src, &a, &b);
    ck_assert_uint_eq(count(a, ISA_MERGE, "fib"), 2); /* the parameter's MERGE and the if's */
    ck_assert_uint_eq(count(b, ISA_MERGE, "fib"), 0); /* the if's too: fib has no dead tokens */
    tfvm_program_free(a);
    tfvm_program_free(b);
}
END_TEST

/* One strict input is enough for an elementwise op in a branch: the others
 * are read without a SWITCH. */
START_TEST(opt_switch_elision)
{
    const char *src = "fn main(c: bool, x: i32, y: i32) -> i32 { if c { x + y } else { 0 } }\n";
    tfvm_program *a, *b;
    both(src, &a, &b);
    ck_assert_uint_eq(count(a, ISA_SWITCH, NULL), 2);
    ck_assert_uint_eq(count(b, ISA_SWITCH, NULL), 1);
    ck_assert_int_eq(run_i(b, (tfvm_value[]){tfvm_bool(true), tfvm_i32(3), tfvm_i32(4)}, 3), 7);
    ck_assert_int_eq(run_i(b, (tfvm_value[]){tfvm_bool(false), tfvm_i32(3), tfvm_i32(4)}, 3), 0);
    tfvm_program_free(a);
    tfvm_program_free(b);
}
END_TEST

/* Constants of a loop body come in once per loop instance (ENTER const)
 * instead of firing in every iteration. */
START_TEST(opt_constant_hoisting)
{
    tfvm_program *a, *b;
    both(sum_src, &a, &b);
    ck_assert_uint_gt(count(a, ISA_CONST, "sum_loop"), 0);
    ck_assert_uint_eq(count(b, ISA_CONST, "sum_loop"), 0);
    tfvm_program_free(a);
    tfvm_program_free(b);
}
END_TEST

/* ---- The compile-error suite ------------------------------------------------------------- */

static const struct {
    const char *src, *msg;
} bad[] = {
    {"fn main(n: i32) -> i32 {\n    fib(n - 1;\n}\n",
     "bad.tfg:2:14: expected ',' or ')' after an argument, got ';'\n 2 |     fib(n - 1;\n   |              ^"},
    {"fn main(n: i32) -> i32 {\n    n +\n}\n",
     "bad.tfg:3:1: expected an expression, got '}'\n 3 | }\n   | ^"},
    {"fn main(n: i32) -> i32 {\n    let x = 3\n    x\n}\n",
     "bad.tfg:3:5: expected ';' after the 'let' value, got 'x'\n 3 |     x\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    if n > 0 { 1 }\n}\n",
     "bad.tfg:3:1: expected 'else' ('if' is an expression: both branches must give a value)\n 3 | }\n   | ^"},
    {"fn main(n: i32) -> i32 {\n    n # 2\n}\n",
     "bad.tfg:2:7: unexpected character '#'\n 2 |     n # 2\n   |       ^"},
    {"fn main(n: i32) -> i32 {\n    m + 1\n}\n",
     "bad.tfg:2:5: 'm' is not defined\n 2 |     m + 1\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    foo(n)\n}\n",
     "bad.tfg:2:5: no function or built-in op named 'foo'\n 2 |     foo(n)\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    n + 1i64\n}\n",
     "bad.tfg:2:7: operands of '+' have different types: i32 and i64 (convert with cast<T>(x))\n 2 |     n + 1i64\n   |       ^"},
    {"fn main(n: i32) -> i64 {\n    n * 2\n}\n",
     "bad.tfg:2:5: 'main' returns i64 but its body gives i32\n 2 |     n * 2\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    if n { 1 } else { 2 }\n}\n",
     "bad.tfg:2:8: the condition of 'if' must be a bool scalar, got i32\n 2 |     if n { 1 } else { 2 }\n   |        ^"},
    {"fn main(n: i32) -> i32 {\n    if n > 0 { 1 } else { true }\n}\n",
     "bad.tfg:2:5: the branches of 'if' give different types: i32 and bool\n 2 |     if n > 0 { 1 } else { true }\n   |     ^"},
    {"fn f(a: i32, b: i32) -> i32 { a + b }\nfn main(n: i32) -> i32 {\n    f(n)\n}\n",
     "bad.tfg:3:5: 'f' takes 2 arguments, got 1\n 3 |     f(n)\n   |     ^"},
    {"fn f(a: i32) -> i32 { a }\nfn main(n: i64) -> i32 {\n    f(n)\n}\n",
     "bad.tfg:3:7: argument 1 of 'f' ('a') must be i32, got i64\n 3 |     f(n)\n   |       ^"},
    {"fn main(n: i32) -> i32 {\n    let (a, b) = n;\n    a\n}\n",
     "bad.tfg:2:5: the pattern has 2 names but the value has 1\n 2 |     let (a, b) = n;\n   |     ^"},
    {"fn f(a: i32) -> (i32, i32) { (a, a) }\nfn main(n: i32) -> i32 {\n    f(n) + 1\n}\n",
     "bad.tfg:3:5: an operand must be a single value, not a tuple of 2\n 3 |     f(n) + 1\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    let k = while (i = 0; i < n) { (i + 1, 2) };\n    k\n}\n",
     "bad.tfg:2:36: the loop body must give the next values of its 1 loop variable, got 2 values\n 2 |     let k = while (i = 0; i < n) { (i + 1, 2) };\n   |                                    ^"},
    {"fn main(n: i64) -> i64 {\n    let (i, s) = while (i = 0, s: i32 = 0; i < n) { (i + 1, s + i) };\n    s\n}\n",
     "bad.tfg:2:63: operands of '+' have different types: i32 and i64 (convert with cast<T>(x)); 'i' is i64 because of its use at 2:44\n 2 |     let (i, s) = while (i = 0, s: i32 = 0; i < n) { (i + 1, s + i) };\n   |                                                               ^"},
    {"fn main(n: i32) -> i32 {\n    3000000000\n}\n",
     "bad.tfg:2:5: integer 3000000000 does not fit in i32 (an i64 literal has the suffix i64: 3000000000i64)\n 2 |     3000000000\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    true + 1\n}\n",
     "bad.tfg:2:10: operands of '+' have different types: bool and i32 (convert with cast<T>(x))\n 2 |     true + 1\n   |          ^"},
    {"fn main(n: i32) -> bool {\n    !n\n}\n",
     "bad.tfg:2:5: '!' needs a bool operand, got i32\n 2 |     !n\n   |     ^"},
    {"fn main(n: i32) -> bool {\n    n > 0 && 1\n}\n",
     "bad.tfg:2:11: operands of '&&' have different types: bool and i32 (convert with cast<T>(x))\n 2 |     n > 0 && 1\n   |           ^"},
    {"fn main(n: i32) -> i32 {\n    min(n)\n}\n",
     "bad.tfg:2:5: 'min' takes 2 arguments, got 1\n 2 |     min(n)\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    cast(n)\n}\n",
     "bad.tfg:2:5: 'cast' needs a target type: cast<f32>(x)\n 2 |     cast(n)\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    switch(n, true)\n}\n",
     "bad.tfg:2:5: 'switch' is a control instruction and cannot be called (use if, while and function calls)\n 2 |     switch(n, true)\n   |     ^"},
    {"fn f(n: i32) -> i32 { n }\nfn f(n: i32) -> i32 { n }\nfn main(n: i32) -> i32 { f(n) }\n",
     "bad.tfg:2:4: function 'f' is defined twice (first at 1:4)\n 2 | fn f(n: i32) -> i32 { n }\n   |    ^"},
    {"fn main(n: i32, n: i32) -> i32 {\n    n\n}\n",
     "bad.tfg:1:17: parameter 'n' is declared twice\n 1 | fn main(n: i32, n: i32) -> i32 {\n   |                 ^"},
    {"fn helper(n: i32) -> i32 { n }\n",
     "bad.tfg: no function 'main' to use as the entry point (name another with --entry NAME)"},
    {"fn main(n: i32) -> i32 {\n    1 < n < 3\n}\n",
     "bad.tfg:2:11: comparisons do not chain (write a < b && b < c)\n 2 |     1 < n < 3\n   |           ^"},
    {"fn main(n: i32) -> i32 {\n    let i32 = 4;\n    n\n}\n",
     "bad.tfg:2:9: 'i32' is a type name and cannot be used as a name\n 2 |     let i32 = 4;\n   |         ^"},
    {"fn main(n: f32[2, 3]) -> f32[2, 3] {\n    n + [1.0, 2.0]\n}\n",
     "bad.tfg:2:7: shapes of '+' do not broadcast: f32[2, 3] and f32[2]\n 2 |     n + [1.0, 2.0]\n   |       ^"},
    {"fn main(n: i32) -> i32 {\n    let x = [1, 2, true];\n    n\n}\n",
     "bad.tfg:2:13: a tensor literal cannot mix bool and number elements\n 2 |     let x = [1, 2, true];\n   |             ^"},
    {"fn main(n: i32) -> i32 {\n    let x = [[1, 2], [3]];\n    n\n}\n",
     "bad.tfg:2:22: ragged tensor literal: a row of 1 where the first had 2\n 2 |     let x = [[1, 2], [3]];\n   |                      ^"},
    {"fn main(n: i32) -> i32 {\n    while (i = 0; i) { i + 1 }\n}\n",
     "bad.tfg:2:19: the loop condition must be a bool scalar, got i32\n 2 |     while (i = 0; i) { i + 1 }\n   |                   ^"},
    {"fn main(n: i32) -> i32 {\n    /* never closed\n    n\n}\n",
     "bad.tfg:2:5: unterminated comment\n 2 |     /* never closed\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    n = 3\n}\n",
     "bad.tfg:2:5: cannot assign to 'n': it is not a var (declare it with 'var n = ...')\n 2 |     n = 3\n   |     ^"},
    {"fn main(n: i32) -> i32 {\n    n;\n}\n",
     "bad.tfg:3:1: expected the function's value before '}' (the ';' after the last expression drops its value)\n 3 | }\n   | ^"},
    {"fn main(n: i32) -> i32 {\n    let a = 1;\n}\n",
     "bad.tfg:3:1: expected the function's value or 'return' before '}' (a function ends with its value)\n 3 | }\n   | ^"},
    {"fn main(n: i32) -> i32 {\n    while lp (i = 0; i < n) { i + 1 } + while lp (j = 0; j < n) { j + 1 }\n}\n",
     "bad.tfg:2:47: loop name 'lp' is already used (at 2:11)\n 2 |     while lp (i = 0; i < n) { i + 1 } + while lp (j = 0; j < n) { j + 1 }\n   |                                               ^"},
    {"fn main(n: i32) -> i32 {\n    let f = 2;\n    f(n)\n}\n",
     "bad.tfg:3:5: 'f' is a variable, not a function\n 3 |     f(n)\n   |     ^"},
    {"fn main(n: i32) -> {\n    n\n}\n",
     "bad.tfg:1:20: expected a type (bool, i32, i64, u8, i8, f32, f64), got '{'\n 1 | fn main(n: i32) -> {\n   |                    ^"},
    {"fn main(n: i32) -> i32 {\n    let (a, a) = (n, n);\n    a\n}\n",
     "bad.tfg:2:13: 'a' appears twice in the pattern\n 2 |     let (a, a) = (n, n);\n   |             ^"},
    {"fn main(x: f64) -> i32 {\n    1.5i32\n}\n",
     "bad.tfg:2:5: a number with a fraction or exponent cannot be i32\n 2 |     1.5i32\n   |     ^"},    /* tensor ops: dtypes and the shapes known at compile time */
    {"fn main(x: f32[2, 3], y: f32[4, 5]) -> bool {\n    matmul(x, y)\n}\n",
     "bad.tfg:2:5: matmul: inner dimensions differ: f32[2, 3] and f32[4, 5]\n 2 |     matmul(x, y)\n   |     ^"},
    {"fn main(x: f32[2, 3], y: f32[3, 4]) -> bool {\n    matmul(x, y, ta = true)\n}\n",
     "bad.tfg:2:5: matmul: inner dimensions differ: f32[2, 3] and f32[3, 4] (ta)\n 2 |     matmul(x, y, ta = true)\n   |     ^"},
    {"fn main(x: f32[2, 3], v: i64[?]) -> bool {\n    matmul(x, v)\n}\n",
     "bad.tfg:2:5: matmul: operands need 2 or more dimensions, got f32[2, 3] and i64[?]\n 2 |     matmul(x, v)\n   |     ^"},
    {"fn main(x: f32[2, 3], y: f64[3, 4]) -> bool {\n    matmul(x, y)\n}\n",
     "bad.tfg:2:5: matmul: operands have different dtypes: f32[2, 3] and f64[3, 4] (convert with cast<T>(x))\n 2 |     matmul(x, y)\n   |     ^"},
    {"fn main(x: i32[2, 3], y: i32[3, 4]) -> bool {\n    matmul(x, y)\n}\n",
     "bad.tfg:2:5: matmul: needs f32 or f64 operands, got i32[2, 3] and i32[3, 4]\n 2 |     matmul(x, y)\n   |     ^"},
    {"fn main(x: f32[2, 3], y: f32[3, 4]) -> bool {\n    matmul(x, y, tb = 1)\n}\n",
     "bad.tfg:2:23: matmul: tb must be true or false\n 2 |     matmul(x, y, tb = 1)\n   |                       ^"},
    {"fn main(x: f32[2, 3], y: f32[3, 4]) -> bool {\n    matmul(x, y, transpose = true)\n}\n",
     "bad.tfg:2:18: 'matmul' has no parameter 'transpose' (it has a, b, ta, tb)\n 2 |     matmul(x, y, transpose = true)\n   |                  ^"},
    {"fn main(x: f32[2, 3], y: f32[3, 4]) -> bool {\n    matmul(x, y, ta = true, ta = false)\n}\n",
     "bad.tfg:2:29: 'matmul' is given 'ta' twice\n 2 |     matmul(x, y, ta = true, ta = false)\n   |                             ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    matmul(x)\n}\n",
     "bad.tfg:2:5: 'matmul' is missing its argument 'b'\n 2 |     matmul(x)\n   |     ^"},
    {"fn main(x: f32[2, 3], y: f32[3, 4]) -> bool {\n    matmul(x, y, true, false, true)\n}\n",
     "bad.tfg:2:5: 'matmul' takes 2 to 4 arguments, got 5\n 2 |     matmul(x, y, true, false, true)\n   |     ^"},
    {"fn main(x: f32[2, 3], y: f32[3, 4]) -> bool {\n    matmul(a = x, y)\n}\n",
     "bad.tfg:2:19: a positional argument cannot follow a keyword argument\n 2 |     matmul(a = x, y)\n   |                   ^"},
    {"fn main(x: f32[3, 2, 3], y: f32[2, 3, 4]) -> bool {\n    matmul(x, y)\n}\n",
     "bad.tfg:2:5: matmul: batch dimensions do not broadcast: f32[3, 2, 3] and f32[2, 3, 4]\n 2 |     matmul(x, y)\n   |     ^"},
    {"fn main(im: f32[1, 3, 8, 8], k: f32[4, 3, 3, 3]) -> bool {\n    conv2d(im, k, groups = 2)\n}\n",
     "bad.tfg:2:5: conv2d: channels differ: f32[1, 3, 8, 8] has 3 input channels, f32[4, 3, 3, 3] with 2 groups takes 6\n 2 |     conv2d(im, k, groups = 2)\n   |     ^"},
    {"fn main(im: f32[1, 3, 8, 8], k: f32[4, 3, 3, 3]) -> bool {\n    conv2d(im, k, stride = 0)\n}\n",
     "bad.tfg:2:28: conv2d: stride must be positive, got 0\n 2 |     conv2d(im, k, stride = 0)\n   |                            ^"},
    {"fn main(im: f32[1, 3, 8, 8], k: f32[4, 3, 3, 3]) -> bool {\n    conv2d(im, k, padding = [1, 2, 3])\n}\n",
     "bad.tfg:2:29: conv2d: padding takes 1, 2 or 4 values, got 3\n 2 |     conv2d(im, k, padding = [1, 2, 3])\n   |                             ^"},
    {"fn main(im: f32[1, 3, 8, 8], k: f32[4, 3, 3, 3], s: i64) -> bool {\n    conv2d(im, k, stride = s)\n}\n",
     "bad.tfg:2:28: conv2d: stride must be an integer or a list of integers written out (2, [1, 2])\n 2 |     conv2d(im, k, stride = s)\n   |                            ^"},
    {"fn main(im: f32[1, 3, 8, 8], k: f32[4, 3, 9, 1]) -> bool {\n    conv2d(im, k)\n}\n",
     "bad.tfg:2:5: conv2d: the kernel is larger than the padded input: f32[1, 3, 8, 8] and f32[4, 3, 9, 1]\n 2 |     conv2d(im, k)\n   |     ^"},
    {"fn main(x: f32[2, 3], k: f32[4, 3, 3, 3]) -> bool {\n    conv2d(x, k)\n}\n",
     "bad.tfg:2:12: conv2d: x must be NCHW (4 dimensions), got f32[2, 3]\n 2 |     conv2d(x, k)\n   |            ^"},
    {"fn main(im: f32[1, 3, 8, 8]) -> bool {\n    maxpool(im, 10)\n}\n",
     "bad.tfg:2:5: maxpool: the 10-wide window is larger than the padded input f32[1, 3, 8, 8]\n 2 |     maxpool(im, 10)\n   |     ^"},
    {"fn main(im: i32[1, 3, 8, 8]) -> bool {\n    avgpool(im, 2)\n}\n",
     "bad.tfg:2:13: avgpool: needs f32 or f64, got i32[1, 3, 8, 8]\n 2 |     avgpool(im, 2)\n   |             ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    softmax(x, axis = 2)\n}\n",
     "bad.tfg:2:23: softmax: axis 2 is out of range for f32[2, 3]\n 2 |     softmax(x, axis = 2)\n   |                       ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    reduce_sum(x, [1, -1])\n}\n",
     "bad.tfg:2:19: reduce_sum: axis -1 appears twice\n 2 |     reduce_sum(x, [1, -1])\n   |                   ^"},
    {"fn main(n: i32) -> bool {\n    reduce_sum(n)\n}\n",
     "bad.tfg:2:16: reduce_sum: x must be a tensor, got i32\n 2 |     reduce_sum(n)\n   |                ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    argmax(x, axis = [0])\n}\n",
     "bad.tfg:2:22: argmax: axis must be an integer written out\n 2 |     argmax(x, axis = [0])\n   |                      ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    reshape(x, [4, 2])\n}\n",
     "bad.tfg:2:5: reshape: f32[2, 3] has 6 elements, the shape [4, 2] has 8\n 2 |     reshape(x, [4, 2])\n   |     ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    reshape(x, [4, -1])\n}\n",
     "bad.tfg:2:5: reshape: f32[2, 3] (6 elements) does not fit the shape [4, -1]\n 2 |     reshape(x, [4, -1])\n   |     ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    reshape(x, [-1, -1])\n}\n",
     "bad.tfg:2:16: reshape: bad shape [-1, -1] (sizes, and at most one -1)\n 2 |     reshape(x, [-1, -1])\n   |                ^"},
    {"fn main(x: f32[2, 3], v: i32[2]) -> bool {\n    reshape(x, v)\n}\n",
     "bad.tfg:2:16: reshape: the shape must be an i64 vector, got i32[2] (convert with cast<i64>(x))\n 2 |     reshape(x, v)\n   |                ^"},
    {"fn main(x: f32[2, 3], v: i64[?]) -> bool {\n    reshape(x, v)\n}\n",
     "bad.tfg:2:16: reshape: the length of the shape must be known at compile time, got i64[?]\n 2 |     reshape(x, v)\n   |                ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    transpose(x, [0, 0])\n}\n",
     "bad.tfg:2:18: transpose: [0, 0] is not a permutation of the 2 axes of f32[2, 3]\n 2 |     transpose(x, [0, 0])\n   |                  ^"},
    {"fn main(x: f32[2, 3], y: f32[3, 4]) -> bool {\n    concat(x, y)\n}\n",
     "bad.tfg:2:5: concat: dimensions differ outside axis 0: f32[2, 3] and f32[3, 4]\n 2 |     concat(x, y)\n   |     ^"},
    {"fn main(x: f32[2, 3], y: f32[6]) -> bool {\n    concat(x, y)\n}\n",
     "bad.tfg:2:5: concat: ranks differ: f32[2, 3] and f32[6]\n 2 |     concat(x, y)\n   |     ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    slice(x, [0], [1])\n}\n",
     "bad.tfg:2:14: slice: starts has 1 value but f32[2, 3] has 2 axes\n 2 |     slice(x, [0], [1])\n   |              ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    gather(x, 1.0)\n}\n",
     "bad.tfg:2:15: gather: indices must be i32 or i64, got f64\n 2 |     gather(x, 1.0)\n   |               ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    x[3]\n}\n",
     "bad.tfg:2:7: indexing: index 3 is out of range for axis 0 of f32[2, 3]\n 2 |     x[3]\n   |       ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    x[0, 0, 0]\n}\n",
     "bad.tfg:2:6: too many indices for f32[2, 3]: 3 for 2 axes\n 2 |     x[0, 0, 0]\n   |      ^"},
    {"fn main(n: i32) -> bool {\n    n[0]\n}\n",
     "bad.tfg:2:6: cannot index i32: it is a scalar\n 2 |     n[0]\n   |      ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    x[]\n}\n",
     "bad.tfg:2:7: expected an index (an integer expression or ':'), got ']'\n 2 |     x[]\n   |       ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    pad(x, [1, 1])\n}\n",
     "bad.tfg:2:12: pad: pads needs 4 values (before and after each axis of f32[2, 3]), got 2\n 2 |     pad(x, [1, 1])\n   |            ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    fill([2, -3], 0.0)\n}\n",
     "bad.tfg:2:10: fill: bad shape [2, -3] (sizes must be at least 0)\n 2 |     fill([2, -3], 0.0)\n   |          ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    fill([2], x)\n}\n",
     "bad.tfg:2:15: fill: the value must be a scalar, got f32[2, 3]\n 2 |     fill([2], x)\n   |               ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    range(0, 5, 0)\n}\n",
     "bad.tfg:2:17: range: delta is 0\n 2 |     range(0, 5, 0)\n   |                 ^"},
    {"fn main(n: i32) -> bool {\n    tanh(n)\n}\n",
     "bad.tfg:2:5: 'tanh' needs f32 or f64, got i32\n 2 |     tanh(n)\n   |     ^"},
    {"fn main(x: f32[2, 3], y: f32[2, 3]) -> bool {\n    min(x, y = y)\n}\n",
     "bad.tfg:2:12: 'min' takes no keyword arguments\n 2 |     min(x, y = y)\n   |            ^"},
    {"fn main(x: f32[2, 3]) -> bool {\n    matmul<f32>(x, x)\n}\n",
     "bad.tfg:2:5: 'matmul' takes no type argument\n 2 |     matmul<f32>(x, x)\n   |     ^"},
};

START_TEST(compile_errors)
{
    ck_assert_uint_ge(UT_COUNTOF(bad), 30);
    for (size_t i = 0; i < UT_COUNTOF(bad); i++) {
        tfvm_program *p = NULL;
        tfvm_error err;
        tfvm_status st = tfvm_program_compile(bad[i].src, strlen(bad[i].src), "bad.tfg", NULL, NULL, &p, &err);
        ck_assert_msg(st == TFVM_ERR_SYNTAX || st == TFVM_ERR_TYPE, "case %zu: status %s", i, tfvm_status_name(st));
        ck_assert_ptr_null(p);
        ck_assert_msg(strcmp(err.message, bad[i].msg) == 0, "case %zu:\nwant: %s\ngot:  %s", i, bad[i].msg,
                      err.message);
    }
}
END_TEST

START_TEST(error_codes)
{
    tfvm_program *p = NULL;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_compile("fn main(", 8, "a.tfg", NULL, NULL, &p, &err), TFVM_ERR_SYNTAX);
    ck_assert_str_eq(err.message, "a.tfg:1:9: expected a parameter name, got end of file\n 1 | fn main(\n   |         ^");
    const char *t = "fn main(x: i32) -> bool { x }";
    ck_assert_int_eq(tfvm_program_compile(t, strlen(t), "a.tfg", NULL, NULL, &p, &err), TFVM_ERR_TYPE);
    ck_assert_int_eq(tfvm_program_compile(NULL, 3, "a.tfg", NULL, NULL, &p, &err), TFVM_ERR_ARGUMENT);
    ck_assert_int_eq(tfvm_program_compile("", 0, "a.tfg", NULL, NULL, NULL, &err), TFVM_ERR_ARGUMENT);
    ck_assert_int_eq(tfvm_program_compile("", 0, "a.tfg", NULL, NULL, &p, &err), TFVM_ERR_TYPE);
    ck_assert_str_eq(err.message, "a.tfg: no functions: the entry point 'main' is missing");
    tfvm_compile_options o;
    tfvm_compile_options_init(&o);
    o.entry = "nope";
    const char *f = "fn main() -> i32 { 1 }";
    ck_assert_int_eq(tfvm_program_compile(f, strlen(f), "a.tfg", &o, NULL, &p, &err), TFVM_ERR_TYPE);
    ck_assert_str_eq(err.message, "a.tfg: no function 'nope' to use as the entry point");
    /* tabs and long lines in the quote */
    const char *tab = "fn main() -> i32 {\n\t\tzz\n}";
    ck_assert_int_eq(tfvm_program_compile(tab, strlen(tab), "a.tfg", NULL, NULL, &p, &err), TFVM_ERR_TYPE);
    ck_assert_str_eq(err.message, "a.tfg:2:3: 'zz' is not defined\n 2 | \t\tzz\n   | \t\t^");
}
END_TEST

/* ---- Allocation failures ---------------------------------------------------------------------- */

typedef struct fail_alloc {
    long countdown; /* allocations left before failing; < 0 = never */
    long live;
} fail_alloc;

static void *fail_fn(void *ud, void *p, size_t old, size_t n)
{
    fail_alloc *f = ud;
    if (n == 0) {
        if (p)
            f->live--;
        free(p);
        return NULL;
    }
    if (f->countdown == 0)
        return NULL;
    if (f->countdown > 0)
        f->countdown--;
    void *q = realloc(p, n);
    if (q && !p)
        f->live++;
    (void)old;
    return q;
}

static void nomem_loop(const char *src, tfvm_status want)
{
    long n;
    for (n = 0;; n++) {
        fail_alloc fa = {n, 0};
        tfvm_config cfg;
        tfvm_config_init(&cfg);
        cfg.allocator = (tfvm_allocator){fail_fn, &fa};
        tfvm_program *p = NULL;
        tfvm_error err;
        tfvm_status st = tfvm_program_compile(src, strlen(src), "a.tfg", NULL, &cfg, &p, &err);
        if (st == TFVM_ERR_NOMEM) {
            ck_assert_ptr_null(p);
            ck_assert_int_eq(fa.live, 0);
            continue;
        }
        ck_assert_msg(st == want, "allocation %ld: status %s (%s)", n, tfvm_status_name(st), err.message);
        tfvm_program_free(p);
        ck_assert_int_eq(fa.live, 0);
        break;
    }
    ck_assert_int_gt(n, 0);
}

START_TEST(allocation_failures)
{
    const char *src = "fn f(n: i64, t: f32[2]) -> (a: i64, b: f32[2]) {\n"
                      "    if n <= 1 { (1, t) } else {\n"
                      "        let (x, y) = f(n - 1, t * 2.0);\n"
                      "        let (i, s) = while lp (i = 0i64, s = x; i < n) { (i + 1, s + i) };\n"
                      "        (s, y + [1.0, 2.0])\n"
                      "    }\n"
                      "}\n"
                      "fn main(n: i64) -> i64 { let (a, b) = f(n, [0.5, 0.25]); a }\n";
    nomem_loop(src, TFVM_OK);
    nomem_loop("fn main(x: f32[?, 1, 8, 8], w: f32[2, 1, 3, 3], v: i64[?]) -> f32[?, ?] {\n"
               "    let c = maxpool(relu(conv2d(x, w, padding = [1, 1])), kernel = 2, stride = 2);\n"
               "    softmax(reshape(c, [-1, 32]) + reduce_sum(c[:, 0], [1, 2])[v[0]], axis = 1)\n"
               "}\n",
               TFVM_OK);
    /* Constant folding runs kernels on constant tensors: a failure while
     * their result became a constant left the kernel's tensors allocated
     * (issue 27 row 14). A result over 4 KB takes a fresh arena chunk, so
     * some allocation fails exactly there. */
    char big[8192];
    size_t len = (size_t)snprintf(big, sizeof big, "fn main(x: f64[600]) -> f64[600] {\n    x + [");
    for (int i = 0; i < 600; i++)
        len += (size_t)snprintf(big + len, sizeof big - len, "%s%d.0", i ? ", " : "", i % 10);
    snprintf(big + len, sizeof big - len, "] * 3.0\n}\n");
    nomem_loop(big, TFVM_OK);
    nomem_loop("fn main(n: i32) -> i32 { let x = n + true; x }", TFVM_ERR_TYPE);
    nomem_loop("fn main(n: i32) -> i32 { let x = n + ; x }", TFVM_ERR_SYNTAX);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("compiler");
    TCase *tc = tcase_create("compiler");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, fib_shape);
    tcase_add_test(tc, fib_firings_per_call);
    tcase_add_test(tc, switch_groups_prune_together);
    tcase_add_test(tc, while_shape);
    tcase_add_test(tc, branch_with_loop_and_call);
    tcase_add_test(tc, mutual_recursion_and_entry);
    tcase_add_test(tc, recursive_entry_is_wrapped);
    tcase_add_test(tc, zero_parameters_and_results);
    tcase_add_test(tc, debug_names_and_locations);
    tcase_add_test(tc, source_variables);
    tcase_add_test(tc, tensors);
    tcase_add_test(tc, round_trip);
    tcase_add_test(tc, tensor_op_types);
    tcase_add_test(tc, tensor_op_lowering);
    tcase_add_test(tc, fib_example_emits_operands_and_pruning);
    tcase_add_test(tc, opt_constant_folding);
    tcase_add_test(tc, opt_cse);
    tcase_add_test(tc, opt_dce);
    tcase_add_test(tc, opt_merge_elision);
    tcase_add_test(tc, opt_switch_elision);
    tcase_add_test(tc, opt_constant_hoisting);
    tcase_add_test(tc, compile_errors);
    tcase_add_test(tc, error_codes);
    tcase_add_test(tc, allocation_failures);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
