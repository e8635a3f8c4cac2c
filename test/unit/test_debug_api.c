/* test/unit/test_debug_api.c — the public inspection interface (tfvm_debug.h)
 * through public headers only: the instruction printer and positions, stepped
 * and hooked runs, the ready list, contexts and tags, partial matches, value
 * formatting, firing counters, the stuck diagnosis naming positions, and the
 * FEED/FETCH channels' queues. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "tfvm.h"
#include "tfvm_debug.h"
#include "test/unit/sum_feed.h"

/* examples/fib.tfg as the compiler writes it, with its source file named */
static const char fib_asm[] = "source \"fib.tfg\"\n"
                              "entry main(n: i32) -> (r0: i32) {\n"
                              "    n       = ARG 0 @15:9\n"
                              "    fib_2_n = CALL fib@2 (n) @16:5\n"
                              "    fib_2   = RETURN fib@2 (fib.add_12_39 | fib.c1) @16:5\n"
                              "              RESULT 0 (fib_2) @15:4\n"
                              "}\n"
                              "func fib {\n"
                              "    less_equal_12_10 = LESS_EQUAL (main.fib_2_n | fib_0_n | fib_1_n, i32 1) @12:10\n"
                              "    sub_12_34        = SUB (n_sw, i32 1) @12:34\n"
                              "    n_sw             = SWITCH prune_false prune_true (main.fib_2_n | fib_0_n | fib_1_n, "
                              "less_equal_12_10) @12:5\n"
                              "    fib_0_n          = CALL fib@0 (sub_12_34) @12:28\n"
                              "    fib_0            = RETURN fib@0 (add_12_39 | c1) @12:28\n"
                              "    sub_12_47        = SUB (n_sw, i32 2) @12:47\n"
                              "    fib_1_n          = CALL fib@1 (sub_12_47) @12:41\n"
                              "    fib_1            = RETURN fib@1 (add_12_39 | c1) @12:41\n"
                              "    add_12_39        = ADD (fib_0, fib_1) @12:39\n"
                              "    c1               = CONST i32 1 [n_sw:1] @12:17\n"
                              "}\n";

static tfvm_program *load(const char *text)
{
    tfvm_program *p = NULL;
    tfvm_error err;
    ck_assert_msg(tfvm_program_assemble(text, strlen(text), "t.tfasm", NULL, &p, &err) == TFVM_OK, "%s", err.message);
    return p;
}

static tfvm_vm *one_thread(const tfvm_program *p)
{
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.threads = 1;
    cfg.deterministic = true;
    tfvm_vm *vm = NULL;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    return vm;
}

static uint32_t find(const tfvm_program *p, const char *name)
{
    for (uint32_t i = 0; i < tfvm_program_inst_count(p); i++) {
        tfvm_inst_info in;
        ck_assert_int_eq(tfvm_program_inst(p, i, &in), TFVM_OK);
        if (in.name && strcmp(in.name, name) == 0)
            return i;
    }
    ck_abort_msg("no instruction %s", name);
    return 0;
}

START_TEST(program_views)
{
    tfvm_program *p = load(fib_asm);
    ck_assert_uint_eq(tfvm_program_inst_count(p), 14);
    ck_assert_str_eq(tfvm_program_source(p), "fib.tfg");
    uint32_t sw = find(p, "n_sw");
    tfvm_inst_info in;
    ck_assert_int_eq(tfvm_program_inst(p, sw, &in), TFVM_OK);
    ck_assert_str_eq(in.op, "SWITCH");
    ck_assert_str_eq(in.region, "fib");
    ck_assert_str_eq(in.region_kind, "func");
    ck_assert_uint_eq(in.n_in, 2);
    ck_assert_uint_eq(in.n_out, 2);
    ck_assert_uint_eq(in.line, 12);
    ck_assert_uint_eq(in.col, 5);
    ck_assert_int_eq(tfvm_program_inst(p, 14, &in), TFVM_ERR_ARGUMENT);
    char buf[256];
    const char *want = "n_sw = SWITCH prune_false prune_true (main.fib_2_n | fib_0_n | fib_1_n, less_equal_12_10) @12:5";
    ck_assert_uint_eq(tfvm_inst_format(p, sw, buf, sizeof buf), strlen(want));
    ck_assert_str_eq(buf, want);
    /* cut like snprintf: the whole length comes back */
    ck_assert_uint_eq(tfvm_inst_format(p, sw, buf, 5), strlen(want));
    ck_assert_str_eq(buf, "n_sw");
    ck_assert_str_eq(tfvm_inst_where(p, sw, buf, sizeof buf), "fib.tfg:12:5");
    ck_assert_str_eq(tfvm_inst_label(p, sw, buf, sizeof buf), "n_sw");
    /* call sites and opcodes */
    ck_assert_uint_eq(tfvm_program_site_count(p), 3);
    tfvm_inst_info call;
    ck_assert_int_eq(tfvm_program_inst(p, find(p, "fib_1_n"), &call), TFVM_OK);
    ck_assert_str_eq(tfvm_site_label(p, call.attr, buf, sizeof buf), "fib@1");
    tfvm_site_info site;
    ck_assert_int_eq(tfvm_program_site(p, call.attr, &site), TFVM_OK);
    ck_assert_uint_eq(site.id, 1);
    ck_assert_uint_eq(site.callee, in.region_index);
    ck_assert_int_eq(tfvm_program_site(p, 3, &site), TFVM_ERR_ARGUMENT);
    size_t n_ops = 0;
    bool has_add = false;
    for (; tfvm_op_name(n_ops); n_ops++)
        has_add |= strcmp(tfvm_op_name(n_ops), "ADD") == 0;
    ck_assert(has_add && n_ops > 50);
    ck_assert_str_eq(tfvm_inst_where(p, 99, buf, sizeof buf), "");
    ck_assert_str_eq(in.op_class, "control");
    /* regions: main (entry 0), fib */
    ck_assert_uint_eq(tfvm_program_region_count(p), 2);
    tfvm_region_info r;
    ck_assert_int_eq(tfvm_program_region(p, in.region_index, &r), TFVM_OK);
    ck_assert_str_eq(r.name, "fib");
    ck_assert_str_eq(r.kind, "func");
    ck_assert_int_eq(r.entry, -1);
    ck_assert_uint_eq(r.parent, UINT32_MAX);
    ck_assert_int_eq(tfvm_program_region(p, 1 - in.region_index, &r), TFVM_OK);
    ck_assert_str_eq(r.name, "main");
    ck_assert_str_eq(r.kind, "entry");
    ck_assert_int_eq(r.entry, 0);
    ck_assert_int_eq(tfvm_program_region(p, 2, &r), TFVM_ERR_ARGUMENT);
    /* edges: n_sw's false output feeds both SUBs' input 0, its true output c1's control input */
    tfvm_edge_info e[4];
    ck_assert_uint_eq(in.n_edges, 3);
    ck_assert_uint_eq(tfvm_program_edges(p, sw, e, 4), 3);
    uint32_t c1 = find(p, "c1"), s1 = find(p, "sub_12_34"), s2 = find(p, "sub_12_47");
    unsigned seen = 0;
    for (int k = 0; k < 3; k++) {
        unsigned which = e[k].inst == c1 ? 1 : e[k].inst == s1 ? 2 : e[k].inst == s2 ? 4 : 0;
        ck_assert_uint_eq(e[k].out, which == 1 ? 1 : 0); /* c1 on the true side */
        ck_assert_uint_eq(e[k].port, 0);
        seen |= which;
    }
    ck_assert_uint_eq(seen, 7);
    ck_assert_uint_eq(tfvm_program_edges(p, sw, e, 1), 3); /* the count, whatever max is */
    tfvm_program_free(p);
}
END_TEST

typedef struct pause_at {
    uint32_t inst;
    unsigned seen, hits;
} pause_at;

static bool pause_on(void *ud, tfvm_vm *vm, const tfvm_debug_act *act)
{
    (void)vm;
    uint32_t inst = tfvm_debug_act_inst(act);
    pause_at *x = ud;
    x->seen++;
    if (inst != x->inst)
        return false;
    x->hits++;
    return true;
}

static void count_ready(void *ud, const tfvm_debug_act *act)
{
    (void)act;
    (*(size_t *)ud)++;
}

/* What `tfvm info`, `tfvm dis`, `tfvm devices` and `tfvm run --stats` read
 * through the public headers: the program's text, its constants, parameter
 * types, device names and the devices' statistics line. */
START_TEST(program_text_and_names)
{
    static const char text[] = "entry main(x: f32[?, 4], n: i32) -> (r: f32[]) {\n"
                               "    x = ARG 0\n"
                               "    n = ARG 1\n"
                               "    m = MUL (x, f32[4] [1, 2, 3, 4])\n"
                               "        RESULT 0 (m)\n"
                               "}\n";
    tfvm_program *p = load(text);
    tfvm_entry_info e;
    ck_assert_int_eq(tfvm_program_entry(p, 0, &e), TFVM_OK);
    char ty[64];
    ck_assert_str_eq(tfvm_param_type(&e.params[0], ty, sizeof ty), "f32[?, 4]");
    ck_assert_str_eq(tfvm_param_type(&e.params[1], ty, sizeof ty), "i32");
    ck_assert_str_eq(tfvm_param_type(&e.results[0], ty, sizeof ty), "f32[...]");
    size_t bytes = 0;
    ck_assert_uint_eq(tfvm_program_const_count(p, &bytes), 1);
    ck_assert_uint_eq(bytes, 16);
    /* the text assembles into a program whose text is the same */
    char *t1, *t2;
    size_t n1, n2;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_disassemble(p, &t1, &n1, &err), TFVM_OK);
    ck_assert_uint_eq(strlen(t1), n1);
    tfvm_program *q = load(t1);
    ck_assert_int_eq(tfvm_program_disassemble(q, &t2, &n2, &err), TFVM_OK);
    ck_assert_str_eq(t1, t2);
    ck_assert_msg(strstr(t1, "m = MUL (x, f32[4] [1.0, 2.0, 3.0, 4.0])") != NULL, "%s", t1);
    tfvm_program_buffer_free(q, t2, n2);
    tfvm_program_buffer_free(p, t1, n1);
    ck_assert_int_eq(tfvm_program_disassemble_file(p, "/nonexistent-dir/x.tfasm", &err), TFVM_ERR_IO);
    ck_assert_str_eq(err.message, "/nonexistent-dir/x.tfasm: No such file or directory");
    /* devices by index and by name */
    static const struct {
        const char *name;
        int want;
    } names[] = {{"cpu", TFVM_DEVICE_CPU}, {"cuda", TFVM_DEVICE_CUDA}, {"auto", TFVM_DEVICE_AUTO}, {"gpu", -1},
                 {"", -1}, {NULL, -1}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        ck_assert_msg(tfvm_device_by_name(names[k].name) == names[k].want, "case %zu (%s)", k,
                      names[k].name ? names[k].name : "NULL");
    ck_assert_str_eq(tfvm_device_name(0), "cpu");
    ck_assert_str_eq(tfvm_device_name(1), "cuda");
    ck_assert_ptr_null(tfvm_device_name(2));
    /* the statistics line appears once tensor work used a pool */
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(p, NULL, &vm), TFVM_OK);
    char line[256] = "x";
    ck_assert_uint_eq(tfvm_debug_device_stats(vm, line, sizeof line), 0);
    ck_assert_str_eq(line, "");
    int64_t dims[2] = {1, 4};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, 2, dims, NULL);
    tfvm_value args[2] = {tfvm_tensor_value(t), tfvm_i32(0)}, r;
    ck_assert_int_eq(tfvm_run(vm, "main", args, 2, &r, 1), TFVM_OK);
    tfvm_value_release(&r);
    tfvm_tensor_free(t);
    size_t n = tfvm_debug_device_stats(vm, line, sizeof line);
    ck_assert_uint_eq(n, strlen(line));
    ck_assert_msg(strncmp(line, "devices: host pool ", 19) == 0, "%s", line);
    tfvm_vm_free(vm);
    tfvm_program_free(q);
    tfvm_program_free(p);
}
END_TEST

START_TEST(hooked_run)
{
    tfvm_program *p = load(fib_asm);
    tfvm_vm *vm = one_thread(p);
    uint32_t add = find(p, "add_12_39");
    pause_at x = {add, 0, 0};
    tfvm_debug_hook hook = {pause_on, &x};
    tfvm_debug_set_hook(vm, &hook);
    tfvm_value arg = tfvm_i32(4);
    ck_assert_int_eq(tfvm_debug_begin(vm, "main", &arg, 1), TFVM_OK);
    ck_assert_int_eq(tfvm_debug_step(vm, 0), TFVM_DEBUG_PAUSED);
    ck_assert_uint_eq(x.hits, 1);
    const tfvm_debug_act *act = tfvm_debug_paused(vm);
    ck_assert_ptr_nonnull(act);
    ck_assert_uint_eq(tfvm_debug_act_inst(act), add);
    const tfvm_debug_ctx *ctx = tfvm_debug_act_ctx(act);
    tfvm_value in;
    ck_assert_int_eq(tfvm_debug_act_input(vm, act, 0, &in), TFVM_TOKEN_LIVE);
    ck_assert_int_eq(in.dtype, TFVM_I32);
    ck_assert_int_eq(in.as.i32, 1);
    ck_assert(!tfvm_debug_act_dead(vm, act));
    ck_assert_int_eq(tfvm_debug_act_way(vm, act), -1); /* not a SWITCH */
    tfvm_debug_ctx_info ci;
    tfvm_debug_ctx_get(ctx, &ci);
    ck_assert_int_eq(ci.kind, TFVM_CTX_CALL);
    ck_assert(tfvm_debug_ctx_alive(ctx, ci.serial));
    char tag[128];
    /* the first add: fib(2), called from fib(4) at its site 1 (fib@1 is call
     * site 1, not fib(1)) */
    ck_assert_str_eq(tfvm_debug_tag(vm, ctx, tag, sizeof tag), "[fib@2, fib@1]");
    ck_assert_str_eq(tfvm_debug_tag(vm, tfvm_debug_parent(ctx), tag, sizeof tag), "[fib@2]");
    ck_assert_str_eq(tfvm_debug_tag(vm, tfvm_debug_parent(tfvm_debug_parent(ctx)), tag, sizeof tag), "[]");
    ck_assert_ptr_null(tfvm_debug_parent(tfvm_debug_parent(tfvm_debug_parent(ctx))));
    /* both inputs arrived: it is ready; the values wait in its slots */
    ck_assert_int_eq(tfvm_debug_match_state(vm, ctx, add), TFVM_MATCH_READY);
    ck_assert(tfvm_debug_port_arrived(vm, ctx, add, 0));
    char v[64];
    ck_assert(tfvm_debug_port_value(vm, ctx, add, 0, v, sizeof v));
    ck_assert_str_eq(v, "1");
    ck_assert(tfvm_debug_port_value(vm, ctx, add, 1, v, sizeof v));
    ck_assert_str_eq(v, "1");
    ck_assert(!tfvm_debug_port_value(vm, ctx, add, 2, v, sizeof v));
    ck_assert_str_eq(v, "");
    /* in fib(4) neither call has answered yet */
    const tfvm_debug_ctx *outer = tfvm_debug_parent(ctx);
    ck_assert_int_eq(tfvm_debug_match_state(vm, outer, add), TFVM_MATCH_NONE);
    size_t n_ready = 0;
    size_t n = tfvm_debug_ready(vm, count_ready, &n_ready);
    ck_assert_uint_eq(n, n_ready);
    ck_assert_uint_ge(n, 1);
    const tfvm_debug_ctx **all;
    size_t nc;
    ck_assert_int_eq(tfvm_debug_contexts(vm, &all, &nc), TFVM_OK);
    ck_assert_uint_eq(nc, 3); /* fib@0 (fib(3)) is not called yet */
    ck_assert_str_eq(tfvm_debug_tag(vm, all[0], tag, sizeof tag), "[]");
    ck_assert_str_eq(tfvm_debug_tag(vm, all[1], tag, sizeof tag), "[fib@2]");
    ck_assert(all[2] == ctx);
    tfvm_debug_contexts_free(vm, all, nc);
    /* the counters so far, and what is alive */
    tfvm_stats st;
    tfvm_debug_stats(vm, &st);
    ck_assert_uint_ge(st.fired, 10);
    uint64_t live_ctx, live_loops;
    tfvm_debug_live(vm, &live_ctx, &live_loops);
    ck_assert_uint_eq(live_ctx, 3);
    ck_assert_uint_eq(live_loops, 0);
    ck_assert_uint_eq(tfvm_debug_loop_slots(vm, ctx), 0); /* fib has no loops */
    ck_assert_int_eq(tfvm_debug_result(vm, 0, NULL), TFVM_TOKEN_NONE);
    ck_assert(tfvm_debug_inst_matched(vm, add));
    ck_assert(!tfvm_debug_inst_matched(vm, find(p, "sub_12_34"))); /* one token: its other operand is a constant */
    /* constants: a CONST's value, a constant operand's */
    ck_assert(tfvm_debug_inst_const(vm, find(p, "c1"), &in));
    ck_assert_int_eq(in.as.i32, 1);
    ck_assert(tfvm_debug_inst_const(vm, find(p, "sub_12_47"), &in));
    ck_assert_int_eq(in.as.i32, 2);
    ck_assert(!tfvm_debug_inst_const(vm, add, &in));
    /* step fires the paused one first, without asking the hook again */
    unsigned seen = x.seen;
    ck_assert_int_eq(tfvm_debug_step(vm, 1), TFVM_DEBUG_RUNNING);
    ck_assert_uint_eq(x.seen, seen);
    /* the next add to pause at: in fib(4) add now holds fib@1's answer only */
    ck_assert_int_eq(tfvm_debug_step(vm, 0), TFVM_DEBUG_PAUSED);
    act = tfvm_debug_paused(vm);
    ctx = tfvm_debug_act_ctx(act);
    ck_assert_str_eq(tfvm_debug_tag(vm, ctx, tag, sizeof tag), "[fib@2, fib@0, fib@0]");
    ck_assert_int_eq(tfvm_debug_match_state(vm, outer, add), TFVM_MATCH_WAITING);
    ck_assert(!tfvm_debug_port_arrived(vm, outer, add, 0));
    ck_assert(tfvm_debug_port_arrived(vm, outer, add, 1));
    ck_assert(tfvm_debug_port_value(vm, outer, add, 1, v, sizeof v));
    ck_assert_str_eq(v, "2"); /* fib(2) = fib(1) + fib(0) = 1 + 1 */
    tfvm_debug_set_hook(vm, NULL);
    ck_assert_int_eq(tfvm_debug_step(vm, 0), TFVM_DEBUG_DONE);
    ck_assert_ptr_null(tfvm_debug_paused(vm));
    ck_assert_int_eq(tfvm_debug_result(vm, 0, &in), TFVM_TOKEN_LIVE);
    ck_assert_int_eq(in.as.i32, 5);
    tfvm_value r;
    ck_assert_int_eq(tfvm_debug_end(vm, &r, 1), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 5);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* step N fires exactly N; the per-instruction counters of a profiled run
 * (tfvm_run) add up to tfvm_vm_stats' firings */
START_TEST(stepping_and_counters)
{
    tfvm_program *p = load(fib_asm);
    tfvm_vm *vm = one_thread(p);
    tfvm_value arg = tfvm_i32(3);
    ck_assert_int_eq(tfvm_debug_step(vm, 1), TFVM_DEBUG_IDLE); /* nothing begun */
    ck_assert_int_eq(tfvm_debug_end(vm, NULL, 0), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "no run to end (tfvm_debug_begin starts one)");
    ck_assert_int_eq(tfvm_debug_begin(vm, NULL, &arg, 1), TFVM_OK);
    uint64_t steps = 0;
    tfvm_debug_state st;
    while ((st = tfvm_debug_step(vm, 1)) == TFVM_DEBUG_RUNNING)
        steps++;
    ck_assert_int_eq(st, TFVM_DEBUG_DONE);
    tfvm_value r;
    ck_assert_int_eq(tfvm_debug_end(vm, &r, 1), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 3);
    tfvm_stats s;
    tfvm_vm_stats(vm, &s);
    ck_assert_uint_eq(s.fired, steps + 1); /* the last step fired one and found the run over */
    ck_assert_int_eq(tfvm_debug_profile(vm, true), TFVM_OK);
    ck_assert_int_eq(tfvm_run(vm, "main", &arg, 1, &r, 1), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 3);
    tfvm_vm_stats(vm, &s);
    uint64_t count[14];
    double ns[14];
    tfvm_debug_profile_read(vm, count, ns);
    uint64_t sum = 0;
    for (int i = 0; i < 14; i++)
        sum += count[i];
    ck_assert_uint_eq(sum, s.fired);
    ck_assert_uint_eq(count[find(p, "add_12_39")], 2); /* fib(3) adds twice: fib(3) and fib(2) */
    /* errors: an unknown entry, a VM of several threads */
    ck_assert_int_eq(tfvm_debug_begin(vm, "nosuch", &arg, 1), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "no entry point named 'nosuch'");
    tfvm_vm_free(vm);
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.threads = 2;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    ck_assert_int_eq(tfvm_debug_begin(vm, NULL, &arg, 1), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "debugging needs a VM of one thread (it has 2)");
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* Collects a trace's events: their instructions, tags and inputs. */
typedef struct trace_seen {
    size_t n;
    uint32_t inst[64];
    char tag[64][64], inputs[64][64];
    double last_start;
    bool ordered, one_worker;
} trace_seen;

static void seen_ev(void *ud, const tfvm_debug_trace_ev *ev)
{
    trace_seen *t = ud;
    t->ordered &= ev->start_ns >= t->last_start && ev->dur_ns >= 0;
    t->one_worker &= ev->worker == 0;
    t->last_start = ev->start_ns;
    if (t->n < 64) {
        t->inst[t->n] = ev->inst;
        snprintf(t->tag[t->n], sizeof t->tag[0], "%s", ev->tag);
        snprintf(t->inputs[t->n], sizeof t->inputs[0], "%s", ev->inputs);
    }
    t->n++;
}

START_TEST(trace_of_firings)
{
    tfvm_program *p = load(fib_asm);
    tfvm_vm *vm = one_thread(p);
    tfvm_value arg = tfvm_i32(3), r;
    tfvm_stats s;
    ck_assert_int_eq(tfvm_debug_profile(vm, true), TFVM_OK);
    ck_assert_int_eq(tfvm_debug_trace(vm, 1000), TFVM_OK);
    ck_assert_int_eq(tfvm_run(vm, "main", &arg, 1, &r, 1), TFVM_OK);
    tfvm_vm_stats(vm, &s);
    trace_seen t = {.ordered = true, .one_worker = true};
    uint64_t dropped = 1;
    ck_assert_uint_eq(tfvm_debug_trace_read(vm, seen_ev, &t, &dropped), s.fired);
    ck_assert_uint_eq(t.n, s.fired);
    ck_assert_uint_eq(dropped, 0);
    ck_assert(t.ordered && t.one_worker);
    /* fib(3) adds twice: fib(2)'s sum inside it first, then its own */
    const char *adds[2][2] = {{"[fib@2, fib@0]", "i32, i32"}, {"[fib@2]", "i32, i32"}};
    size_t k = 0;
    for (size_t i = 0; i < t.n && i < 64; i++)
        if (t.inst[i] == find(p, "add_12_39")) {
            ck_assert_uint_lt(k, 2);
            ck_assert_str_eq(t.tag[i], adds[k][0]);
            ck_assert_str_eq(t.inputs[i], adds[k][1]);
            k++;
        }
    ck_assert_uint_eq(k, 2);
    /* a bound: the rest are counted, not kept; turning it on again clears */
    ck_assert_int_eq(tfvm_debug_trace(vm, 3), TFVM_OK);
    ck_assert_int_eq(tfvm_run(vm, "main", &arg, 1, &r, 1), TFVM_OK);
    ck_assert_uint_eq(tfvm_debug_trace_read(vm, NULL, NULL, &dropped), 3);
    ck_assert_uint_eq(dropped, s.fired - 3);
    ck_assert_int_eq(tfvm_debug_trace(vm, 0), TFVM_OK); /* off */
    ck_assert_int_eq(tfvm_run(vm, "main", &arg, 1, &r, 1), TFVM_OK);
    ck_assert_uint_eq(tfvm_debug_trace_read(vm, NULL, NULL, &dropped), 0);
    ck_assert_uint_eq(dropped, 0);
    ck_assert_int_eq(tfvm_debug_trace(NULL, 1), TFVM_ERR_ARGUMENT);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

START_TEST(value_format)
{
    char buf[256];
    tfvm_value v = tfvm_i32(-7);
    ck_assert_uint_eq(tfvm_value_format(&v, buf, sizeof buf), 2);
    ck_assert_str_eq(buf, "-7");
    v = tfvm_bool(true);
    tfvm_value_format(&v, buf, sizeof buf);
    ck_assert_str_eq(buf, "true");
    int64_t dims[2] = {2, 2};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_I32, 2, dims, NULL);
    ck_assert_ptr_nonnull(t);
    int32_t *d = tfvm_tensor_data(t);
    for (int k = 0; k < 4; k++)
        d[k] = k + 1;
    v = tfvm_tensor_value(t);
    tfvm_value_format(&v, buf, sizeof buf);
    ck_assert_str_eq(buf, "[[1, 2], [3, 4]]");
    tfvm_tensor_free(t);
    /* more than 1000 elements: NumPy's summary, 3 at each end */
    int64_t n = 2000;
    t = tfvm_tensor_new(TFVM_I32, 1, &n, NULL);
    d = tfvm_tensor_data(t);
    for (int k = 0; k < 2000; k++)
        d[k] = k;
    v = tfvm_tensor_value(t);
    tfvm_value_format(&v, buf, sizeof buf);
    ck_assert_str_eq(buf, "[0, 1, 2, ..., 1997, 1998, 1999]");
    tfvm_tensor_free(t);
}
END_TEST

/* the stuck diagnosis names each waiting instruction's source position */
START_TEST(stuck_diagnosis_positions)
{
    tfvm_program *p = load("source \"t.tfg\"\n"
                           "entry main(x: i32) -> (r: i32) {\n"
                           "    x  = ARG 0 @1:1\n"
                           "    c  = CALL f@3 (x) @2:1\n"
                           "    r  = RETURN f@3 (f.y) @2:1\n"
                           "         RESULT 0 (r) @2:1\n"
                           "}\n"
                           "func f {\n"
                           "    n  = IDENTITY (main.c) @4:3\n"
                           "    y  = ADD (n, y) @5:7\n"
                           "}\n");
    tfvm_vm *vm = one_thread(p);
    tfvm_value arg = tfvm_i32(1), r;
    ck_assert_int_eq(tfvm_run(vm, "main", &arg, 1, &r, 1), TFVM_ERR_STUCK);
    ck_assert_str_eq(tfvm_errmsg(vm),
                     "run stuck: result 0 'r' never arrived; waiting: y (ADD) (t.tfg:5:7) at [f@3] has input 0, missing input 1");
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST


static bool pause_at_feed(void *ud, tfvm_vm *vm, const tfvm_debug_act *act)
{
    (void)vm;
    return tfvm_debug_act_inst(act) == *(const uint32_t *)ud;
}

static int32_t chan_i32(const tfvm_vm *vm, size_t k, size_t j)
{
    tfvm_value v;
    ck_assert_int_eq(tfvm_debug_chan_value(vm, k, j, &v), TFVM_TOKEN_LIVE);
    ck_assert_int_eq(v.dtype, TFVM_I32);
    return v.as.i32;
}

/* channels by name, values queued before and while a stepped run goes, what
 * FEEDs took and FETCHes made (kept), the errors of feeding, a FEED that finds
 * its channel empty */
/* The program's channels through tfvm.h: one per name, in name order, with
 * the FEED's type and how many instructions use each. */
START_TEST(program_channels)
{
    static const char text[] = "entry main(n: i32) -> (r: i32) {\n"
                               "    a = ARG 0\n"
                               "    x = FEED \"x\" i32 (a)\n"
                               "    t = FEED \"batch\" f32[] (x:1)\n"
                               "    y = FEED \"x\" i32 (t:1)\n"
                               "    f = FETCH \"out\" (y, y:1)\n"
                               "    RESULT 0 (f)\n"
                               "}\n";
    tfvm_program *p = load(text);
    ck_assert_uint_eq(tfvm_program_channel_count(p), 3);
    static const struct {
        const char *name;
        bool fetch;
        tfvm_dtype dtype;
        bool is_tensor;
        uint32_t uses;
    } want[] = {{"batch", false, TFVM_F32, true, 1}, {"out", true, 0, false, 1}, {"x", false, TFVM_I32, false, 2}};
    for (size_t k = 0; k < 3; k++) {
        tfvm_channel_info c;
        ck_assert_int_eq(tfvm_program_channel(p, k, &c), TFVM_OK);
        ck_assert_str_eq(c.name, want[k].name);
        ck_assert_msg(c.fetch == want[k].fetch && c.dtype == want[k].dtype && c.is_tensor == want[k].is_tensor &&
                          c.uses == want[k].uses,
                      "channel %s", want[k].name);
    }
    tfvm_channel_info c;
    ck_assert_int_eq(tfvm_program_channel(p, 3, &c), TFVM_ERR_ARGUMENT);
    ck_assert_int_eq(tfvm_program_channel(NULL, 0, &c), TFVM_ERR_ARGUMENT);
    ck_assert_uint_eq(tfvm_program_channel_count(NULL), 0);
    tfvm_program_free(p);
    p = load(fib_asm); /* no channels */
    ck_assert_uint_eq(tfvm_program_channel_count(p), 0);
    tfvm_program_free(p);
}
END_TEST

START_TEST(channels)
{
    tfvm_program *p = load(SUM_FEED);
    tfvm_vm *vm = one_thread(p);
    ck_assert_uint_eq(tfvm_debug_channels(vm), 2);
    tfvm_debug_chan_info s, x;
    ck_assert_int_eq(tfvm_debug_channel(vm, 0, &s), TFVM_OK); /* name order */
    ck_assert_int_eq(tfvm_debug_channel(vm, 1, &x), TFVM_OK);
    ck_assert_int_eq(tfvm_debug_channel(vm, 2, &x), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(s.name, "s");
    ck_assert(s.fetch);
    ck_assert_uint_eq(s.inst, find(p, "f"));
    ck_assert_str_eq(x.name, "x");
    ck_assert(!x.fetch && !x.is_tensor);
    ck_assert_int_eq(x.dtype, TFVM_I32);
    ck_assert_uint_eq(x.inst, find(p, "x"));
    ck_assert_uint_eq(x.queued + x.waiting + x.count + x.host, 0);
    ck_assert_int_eq(tfvm_debug_inst_channel(vm, find(p, "x")), 1);
    ck_assert_int_eq(tfvm_debug_inst_channel(vm, find(p, "f")), 0);
    ck_assert_int_eq(tfvm_debug_inst_channel(vm, find(p, "s2")), -1);
    ck_assert_int_eq(tfvm_debug_inst_channel(vm, 1000), -1);

    /* no run: nothing to queue on (a start empties the queues) */
    tfvm_value v = tfvm_i32(10);
    ck_assert_int_eq(tfvm_debug_feed(vm, "x", &v), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "no run to feed (tfvm_debug_begin starts one)");
    ck_assert_int_eq(tfvm_debug_keep_fetched(vm), TFVM_ERR_ARGUMENT);

    tfvm_value n = tfvm_i32(3);
    ck_assert_int_eq(tfvm_debug_begin(vm, NULL, &n, 1), TFVM_OK);
    ck_assert_int_eq(tfvm_debug_keep_fetched(vm), TFVM_OK);
    ck_assert_int_eq(tfvm_debug_feed(vm, "x", &v), TFVM_OK);
    v = tfvm_i32(20);
    ck_assert_int_eq(tfvm_debug_feed(vm, "x", &v), TFVM_OK);
    ck_assert_int_eq(tfvm_debug_feed(vm, "y", &v), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "the program has no FEED channel 'y' (it has 'x')");
    ck_assert_int_eq(tfvm_debug_feed(vm, "s", &v), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "channel 's' is fetched, not fed");
    tfvm_value f = tfvm_f32(1.5f);
    ck_assert_int_eq(tfvm_debug_feed(vm, "x", &f), TFVM_ERR_TYPE);
    ck_assert_str_eq(tfvm_errmsg(vm), "channel 'x' takes i32, got f32");
    ck_assert_int_eq(tfvm_debug_feed(vm, "x", NULL), TFVM_ERR_ARGUMENT);
    ck_assert_int_eq(tfvm_debug_channel(vm, 1, &x), TFVM_OK);
    ck_assert_uint_eq(x.queued, 2);
    ck_assert_uint_eq(x.host, 2);
    ck_assert_uint_eq(x.count, 0);
    ck_assert_int_eq(chan_i32(vm, 1, 0), 10);
    char buf[64];
    ck_assert(tfvm_debug_chan_value_format(vm, 1, 1, buf, sizeof buf));
    ck_assert_str_eq(buf, "20");
    ck_assert_int_eq(tfvm_debug_chan_value(vm, 1, 2, &v), TFVM_TOKEN_NONE);
    ck_assert(!tfvm_debug_chan_value_format(vm, 1, 2, buf, sizeof buf));
    ck_assert_str_eq(buf, "");
    ck_assert(!tfvm_debug_chan_waiting(vm, 1, 0, NULL, NULL)); /* only a session's FEEDs wait */

    /* pause before each FEED: the first takes 10, the second 20 */
    uint32_t feed = find(p, "x");
    tfvm_debug_hook hook = {pause_at_feed, &feed};
    tfvm_debug_set_hook(vm, &hook);
    ck_assert_int_eq(tfvm_debug_step(vm, 0), TFVM_DEBUG_PAUSED);
    ck_assert_int_eq(tfvm_debug_step(vm, 0), TFVM_DEBUG_PAUSED); /* fired the first */
    ck_assert_int_eq(tfvm_debug_channel(vm, 1, &x), TFVM_OK);
    ck_assert_uint_eq(x.count, 1);
    ck_assert_uint_eq(x.queued, 1);
    ck_assert_int_eq(chan_i32(vm, 1, 0), 20);
    /* fed while paused: the third FEED takes it */
    v = tfvm_i32(30);
    ck_assert_int_eq(tfvm_debug_feed(vm, "x", &v), TFVM_OK);
    tfvm_debug_set_hook(vm, NULL);
    ck_assert_int_eq(tfvm_debug_step(vm, 0), TFVM_DEBUG_DONE);
    ck_assert_int_eq(tfvm_debug_channel(vm, 0, &s), TFVM_OK);
    ck_assert_uint_eq(s.count, 3);
    ck_assert_uint_eq(s.queued, 3); /* kept: nobody takes them */
    ck_assert_int_eq(chan_i32(vm, 0, 0), 10);
    ck_assert_int_eq(chan_i32(vm, 0, 1), 30);
    ck_assert_int_eq(chan_i32(vm, 0, 2), 60);
    ck_assert_int_eq(tfvm_debug_channel(vm, 1, &x), TFVM_OK);
    ck_assert_uint_eq(x.count, 3);
    ck_assert_uint_eq(x.queued, 0);
    tfvm_value r;
    ck_assert_int_eq(tfvm_debug_end(vm, &r, 1), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 60);
    ck_assert_int_eq(tfvm_debug_channel(vm, 0, &s), TFVM_OK); /* the queues went with the run, */
    ck_assert_uint_eq(s.queued, 0);
    ck_assert_uint_eq(s.count, 3); /* its counts stay until the next run */

    /* not kept: a FETCH's value is dropped, counted */
    n = tfvm_i32(1);
    ck_assert_int_eq(tfvm_debug_begin(vm, NULL, &n, 1), TFVM_OK);
    v = tfvm_i32(4);
    ck_assert_int_eq(tfvm_debug_feed(vm, "x", &v), TFVM_OK);
    ck_assert_int_eq(tfvm_debug_step(vm, 0), TFVM_DEBUG_DONE);
    ck_assert_int_eq(tfvm_debug_channel(vm, 0, &s), TFVM_OK);
    ck_assert_uint_eq(s.count, 1);
    ck_assert_uint_eq(s.queued, 0);
    ck_assert_int_eq(tfvm_debug_end(vm, &r, 1), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 4);

    /* nothing fed: the first FEED fails the run; a feed then keeps its error */
    ck_assert_int_eq(tfvm_debug_begin(vm, NULL, &n, 1), TFVM_OK);
    ck_assert_int_eq(tfvm_debug_step(vm, 0), TFVM_DEBUG_FAILED);
    const char *want = "x (FEED) at [sum#0]: channel 'x' waits for value #1, but the host feeds no more values";
    ck_assert_str_eq(tfvm_errmsg(vm), want);
    ck_assert_int_eq(tfvm_debug_feed(vm, "x", &v), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), want);
    ck_assert_int_eq(tfvm_debug_end(vm, &r, 1), TFVM_ERR_STUCK);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* a tensor channel: its type, a fed tensor formatted, a scalar refused */
START_TEST(channel_tensor)
{
    tfvm_program *p = load("entry main() -> (t: f32[]) {\n"
                           "    zero = CONST i32 0\n"
                           "    t    = FEED \"batch\" f32[] (zero)\n"
                           "           RESULT 0 (t)\n"
                           "}\n");
    tfvm_vm *vm = one_thread(p);
    tfvm_debug_chan_info c;
    ck_assert_int_eq(tfvm_debug_channel(vm, 0, &c), TFVM_OK);
    ck_assert(c.is_tensor && !c.fetch);
    ck_assert_int_eq(c.dtype, TFVM_F32);
    ck_assert_int_eq(tfvm_debug_begin(vm, NULL, NULL, 0), TFVM_OK);
    tfvm_value one = tfvm_f32(1);
    ck_assert_int_eq(tfvm_debug_feed(vm, "batch", &one), TFVM_ERR_TYPE);
    ck_assert_str_eq(tfvm_errmsg(vm), "channel 'batch' takes f32[...], got f32");
    int64_t dims[2] = {2, 2};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, 2, dims, NULL);
    ck_assert_ptr_nonnull(t);
    float *d = tfvm_tensor_data(t);
    for (int k = 0; k < 4; k++)
        d[k] = (float)k + 0.5f;
    tfvm_value v = tfvm_tensor_value(t);
    ck_assert_int_eq(tfvm_debug_feed(vm, "batch", &v), TFVM_OK);
    tfvm_tensor_free(t); /* the queue holds its own reference */
    char buf[64];
    ck_assert(tfvm_debug_chan_value_format(vm, 0, 0, buf, sizeof buf));
    ck_assert_str_eq(buf, "[[0.5, 1.5], [2.5, 3.5]]");
    ck_assert_int_eq(tfvm_debug_chan_value(vm, 0, 0, &v), TFVM_TOKEN_LIVE);
    ck_assert_ptr_nonnull(v.tensor);
    ck_assert_int_eq(tfvm_debug_step(vm, 0), TFVM_DEBUG_DONE);
    tfvm_value r;
    ck_assert_int_eq(tfvm_debug_end(vm, &r, 1), TFVM_OK);
    ck_assert_ptr_nonnull(r.tensor);
    ck_assert_float_eq(((float *)tfvm_tensor_data(r.tensor))[3], 3.5f);
    tfvm_value_release(&r);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* a session's FEED that waits for the host: its tag and instruction, read
 * once the run is quiet (tfvm_fetch saw it so, under the channels' lock) */
START_TEST(channel_waiting)
{
    tfvm_program *p = load(SUM_FEED);
    tfvm_vm *vm = one_thread(p);
    tfvm_session *ss;
    tfvm_value n = tfvm_i32(2), v;
    ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &ss), TFVM_OK);
    ck_assert_int_eq(tfvm_fetch(ss, "s", &v), TFVM_ERR_STUCK);
    tfvm_debug_chan_info x;
    ck_assert_int_eq(tfvm_debug_channel(vm, 1, &x), TFVM_OK);
    ck_assert_uint_eq(x.waiting, 1);
    ck_assert_uint_eq(x.queued, 0);
    const tfvm_debug_ctx *ctx = NULL;
    uint32_t inst = 0;
    ck_assert(tfvm_debug_chan_waiting(vm, 1, 0, &ctx, &inst));
    ck_assert_uint_eq(inst, find(p, "x"));
    char tag[64];
    ck_assert_str_eq(tfvm_debug_tag(vm, ctx, tag, sizeof tag), "[sum#0]");
    ck_assert(!tfvm_debug_chan_waiting(vm, 1, 1, &ctx, &inst));
    /* queueing would pass the waiting FEED over */
    v = tfvm_i32(1);
    ck_assert_int_eq(tfvm_debug_feed(vm, "x", &v), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "a FEED of channel 'x' waits for the host: feed it with tfvm_feed");
    ck_assert_int_eq(tfvm_debug_channel(vm, 1, &x), TFVM_OK);
    ck_assert_uint_eq(x.queued, 0);
    tfvm_session_cancel(ss);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("debug_api");
    TCase *tc = tcase_create("debug_api");
    tcase_add_test(tc, program_views);
    tcase_add_test(tc, program_text_and_names);
    tcase_add_test(tc, hooked_run);
    tcase_add_test(tc, stepping_and_counters);
    tcase_add_test(tc, trace_of_firings);
    tcase_add_test(tc, value_format);
    tcase_add_test(tc, stuck_diagnosis_positions);
    tcase_add_test(tc, program_channels);
    tcase_add_test(tc, channels);
    tcase_add_test(tc, channel_tensor);
    tcase_add_test(tc, channel_waiting);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
