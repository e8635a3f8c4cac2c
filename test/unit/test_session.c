/* test_session.c — a host feeding and fetching while the graph runs
 * (tfvm_session_*, docs/coexec.md): order, waits, every error the host can
 * meet, cancellation, tensors, on 1 and 2 worker threads. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "test/unit/sum_feed.h"


/* train: a Case Select. Each step first takes "stop" (bool); while it is
 * false, it takes a batch (f32 tensor), adds it to acc and fetches acc. */
static const char *const TRAIN =
    "entry main(acc0: f32[]) -> (acc: f32[], steps: i32) {\n"
    "    a     = ARG 0\n"
    "    zero  = CONST i32 0\n"
    "    e_a   = ENTER train (a)\n"
    "    e_k   = ENTER train (zero)\n"
    "    e_so  = ENTER train (zero)\n"
    "    e_bo  = ENTER train (zero)\n"
    "    e_fo  = ENTER train (zero)\n"
    "            RESULT 0 (train.a_out)\n"
    "            RESULT 1 (train.k_out)\n"
    "}\n"
    "loop train in main {\n"
    "    acc   = MERGE (e_a, a_next)\n"
    "    k     = MERGE (e_k, k_next)\n"
    "    so    = MERGE (e_so, so_next)\n"
    "    bo    = MERGE (e_bo, bo_next)\n"
    "    fo    = MERGE (e_fo, fo_next)\n"
    "    stop  = FEED \"stop\" bool (so)\n"
    "    go    = NOT (stop)\n"
    "    p     = LOOPCOND (go)\n"
    "    sa    = SWITCH (acc, p)\n"
    "    sk    = SWITCH (k, p)\n"
    "    sbo   = SWITCH (bo, p)\n"
    "    sfo   = SWITCH (fo, p)\n"
    "    sso   = SWITCH (stop:1, p)\n"
    "    x     = FEED \"batch\" f32[] (sbo:1)\n"
    "    a2    = ADD (sa:1, x)\n"
    "    f     = FETCH \"acc\" (a2, sfo:1)\n"
    "    one   = CONST i32 1 [sk:1]\n"
    "    k2    = ADD (sk:1, one)\n"
    "    a_next = NEXTITER (f)\n"
    "    k_next = NEXTITER (k2)\n"
    "    so_next = NEXTITER (sso:1)\n"
    "    bo_next = NEXTITER (x:1)\n"
    "    fo_next = NEXTITER (f:1)\n"
    "    a_out = EXIT train (sa)\n"
    "    k_out = EXIT train (sk)\n"
    "}\n";

/* quotient: 100 / a fed value, fetched. */
static const char *const DIV =
    "entry main() -> (q: i32) {\n"
    "    zero  = CONST i32 0\n"
    "    x     = FEED \"x\" i32 (zero)\n"
    "    h     = CONST i32 100\n"
    "    q     = DIV (h, x)\n"
    "    f     = FETCH \"q\" (q, x:1)\n"
    "            RESULT 0 (f)\n"
    "}\n";

static tfvm_program *assemble(const char *text)
{
    tfvm_program *p = NULL;
    tfvm_error err;
    tfvm_status st = tfvm_program_assemble(text, strlen(text), "session.tfasm", NULL, &p, &err);
    ck_assert_msg(st == TFVM_OK, "%s", err.message);
    return p;
}

static tfvm_vm *new_vm(const tfvm_program *p, int threads)
{
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.threads = threads;
    cfg.deterministic = threads == 1;
    tfvm_vm *vm = NULL;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    return vm;
}

static void feed_i32(tfvm_session *s, const char *name, int32_t v)
{
    tfvm_value x = tfvm_i32(v);
    ck_assert_msg(tfvm_feed(s, name, &x) == TFVM_OK, "%s", tfvm_session_errmsg(s));
}

static int32_t fetch_i32(tfvm_session *s, const char *name)
{
    tfvm_value x;
    ck_assert_msg(tfvm_fetch(s, name, &x) == TFVM_OK, "%s", tfvm_session_errmsg(s));
    ck_assert_int_eq(x.dtype, TFVM_I32);
    ck_assert_ptr_null(x.tensor);
    return x.as.i32;
}

/* The host feeds everything first, then fetches: values in tag order. */
START_TEST(feed_ahead_then_fetch)
{
    tfvm_program *p = assemble(SUM_FEED);
    tfvm_vm *vm = new_vm(p, _i + 1);
    for (int round = 0; round < 2; round++) { /* a VM runs one session after another */
        tfvm_value n = tfvm_i32(100);
        tfvm_session *s;
        ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &s), TFVM_OK);
        for (int k = 1; k <= 100; k++)
            feed_i32(s, "x", k);
        for (int k = 1; k <= 100; k++)
            ck_assert_int_eq(fetch_i32(s, "s"), k * (k + 1) / 2);
        tfvm_value r;
        ck_assert_int_eq(tfvm_session_finish(s, &r, 1), TFVM_OK);
        ck_assert_int_eq(r.as.i32, 5050);
    }
    tfvm_value n = tfvm_i32(1), r;
    tfvm_status st = tfvm_run(vm, NULL, &n, 1, &r, 1); /* a plain run feeds nothing */
    ck_assert_int_eq(st, TFVM_ERR_STUCK);
    ck_assert_str_eq(tfvm_errmsg(vm), "x (FEED) at [sum#0]: channel 'x' waits for value #1, but the host feeds no more values");
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* Step by step: the host feeds one value and waits for its sum each time,
 * so the graph waits for the host in every iteration. */
START_TEST(lockstep)
{
    tfvm_program *p = assemble(SUM_FEED);
    tfvm_vm *vm = new_vm(p, _i + 1);
    tfvm_value n = tfvm_i32(2000);
    tfvm_session *s;
    ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &s), TFVM_OK);
    int32_t sum = 0;
    for (int k = 1; k <= 2000; k++) {
        feed_i32(s, "x", k % 7);
        sum += k % 7;
        ck_assert_int_eq(fetch_i32(s, "s"), sum);
    }
    tfvm_value r;
    ck_assert_int_eq(tfvm_session_finish(s, &r, 1), TFVM_OK);
    ck_assert_int_eq(r.as.i32, sum);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* Many lockstep sessions on 2 workers: each step hands a FEED back to an
 * idle worker while the other may be deciding that the run is over. A race
 * there once ended runs under a waiting FEED, about once in 250,000 steps
 * (bench: a stress loop); this makes 240,000. */
START_TEST(lockstep_many)
{
    tfvm_program *p = assemble(SUM_FEED);
    for (int round = 0; round < 400; round++) { /* a new VM: new workers, each joining late */
        tfvm_vm *vm = new_vm(p, 2);
        tfvm_value n = tfvm_i32(600), r;
        tfvm_session *s;
        ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &s), TFVM_OK);
        for (int k = 1; k <= 600; k++) {
            feed_i32(s, "x", 1);
            ck_assert_int_eq(fetch_i32(s, "s"), k);
        }
        ck_assert_int_eq(tfvm_session_finish(s, &r, 1), TFVM_OK);
        ck_assert_int_eq(r.as.i32, 600);
        tfvm_vm_free(vm);
    }
    tfvm_program_free(p);
}
END_TEST

/* A feeder thread and the fetching host at once. A fetch that finds the
 * graph waiting for the feeder says so (the deadlock check assumes one host
 * thread) and may simply be retried: the run goes on. */
static atomic_int fed;

static void *feeder(void *ud)
{
    tfvm_session *s = ud;
    for (int k = 1; k <= 3000; k++) {
        tfvm_value x = tfvm_i32(k);
        if (tfvm_feed(s, "x", &x) != TFVM_OK)
            return (void *)1;
        atomic_store(&fed, k);
    }
    return NULL;
}

START_TEST(feeder_thread)
{
    tfvm_program *p = assemble(SUM_FEED);
    tfvm_vm *vm = new_vm(p, _i + 1);
    tfvm_value n = tfvm_i32(3000);
    tfvm_session *s;
    ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &s), TFVM_OK);
    pthread_t t;
    atomic_store(&fed, 0);
    ck_assert_int_eq(pthread_create(&t, NULL, feeder, s), 0);
    int64_t sum = 0;
    for (int k = 1; k <= 3000; k++) {
        sum += k;
        tfvm_value x;
        tfvm_status st;
        for (;;) { /* stuck only while value k was not yet fed when the fetch began */
            const int before = atomic_load(&fed);
            if ((st = tfvm_fetch(s, "s", &x)) != TFVM_ERR_STUCK || before >= k)
                break;
            sched_yield();
        }
        ck_assert_msg(st == TFVM_OK, "%s", tfvm_session_errmsg(s));
        ck_assert_int_eq(x.as.i32, (int32_t)sum);
    }
    void *rc;
    pthread_join(t, &rc);
    ck_assert_ptr_null(rc);
    tfvm_value r;
    ck_assert_int_eq(tfvm_session_finish(s, &r, 1), TFVM_OK);
    ck_assert_int_eq(r.as.i32, (int32_t)sum);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* A fetch the graph cannot answer before the host feeds returns at once,
 * naming both sides; the host may then feed and go on. */
START_TEST(fetch_while_graph_waits)
{
    tfvm_program *p = assemble(SUM_FEED);
    tfvm_vm *vm = new_vm(p, _i + 1);
    tfvm_value n = tfvm_i32(2), x;
    tfvm_session *s;
    ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &s), TFVM_OK);
    feed_i32(s, "x", 5);
    ck_assert_int_eq(fetch_i32(s, "s"), 5);
    ck_assert_int_eq(tfvm_fetch(s, "s", &x), TFVM_ERR_STUCK);
    ck_assert_str_eq(tfvm_session_errmsg(s), "FETCH 's' (f) waits for value #2, but the graph waits for the host: "
                                             "FEED 'x' (x) at [sum#1] waits for value #2");
    feed_i32(s, "x", 6);
    ck_assert_int_eq(fetch_i32(s, "s"), 11);
    ck_assert_int_eq(tfvm_fetch(s, "s", &x), TFVM_ERR_STUCK); /* the run ended */
    ck_assert_str_eq(tfvm_session_errmsg(s), "FETCH 's' (f) waits for value #3, but the run ended after 2");
    tfvm_value r;
    ck_assert_int_eq(tfvm_session_finish(s, &r, 1), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 11);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* Finishing while a FEED waits fails the run, naming it. */
START_TEST(finish_while_feed_waits)
{
    tfvm_program *p = assemble(SUM_FEED);
    tfvm_vm *vm = new_vm(p, _i + 1);
    tfvm_value n = tfvm_i32(3), r;
    tfvm_session *s;
    ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &s), TFVM_OK);
    feed_i32(s, "x", 1);
    ck_assert_int_eq(tfvm_session_finish(s, &r, 1), TFVM_ERR_STUCK);
    ck_assert_str_eq(tfvm_errmsg(vm), "x (FEED) at [sum#1]: channel 'x' waits for value #2, but the host feeds no more values");
    /* the VM is ready for the next run */
    ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &s), TFVM_OK);
    for (int k = 0; k < 3; k++)
        feed_i32(s, "x", 2);
    ck_assert_int_eq(tfvm_session_finish(s, &r, 1), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 6);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* A fed tensor is checked against the FEED's declared shape when it is fed
 * (issue 27 row 10): the compiler typed everything after the FEED by it, so
 * a tensor of another rank or size used to run on and fail later, about
 * something else, or not at all. */
START_TEST(fed_shape_checked)
{
    tfvm_program *p = assemble("entry main() -> (r: f32) {\n"
                               "    o = CONST i32 0\n"
                               "    m = FEED \"m\" f32[?, 3] (o)\n"
                               "    s = REDUCE_SUM (m, i64[2] [0, 1])\n"
                               "    RESULT 0 (s)\n"
                               "}\n");
    tfvm_vm *vm = new_vm(p, _i + 1);
    tfvm_value r;
    tfvm_session *s;
    static const struct {
        int rank;
        int64_t dims[2];
        const char *message; /* NULL: taken */
    } cases[] = {
        {1, {3, 0}, "channel 'm' takes f32[?, 3], got f32[3]"},
        {2, {3, 2}, "channel 'm' takes f32[?, 3], got f32[3, 2]"},
        {2, {0, 3}, NULL},
    };
    ck_assert_int_eq(tfvm_session_start(vm, NULL, NULL, 0, &s), TFVM_OK);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, cases[k].rank, cases[k].dims, NULL);
        tfvm_value x = tfvm_tensor_value(t);
        tfvm_status st = tfvm_feed(s, "m", &x);
        if (cases[k].message) {
            ck_assert_msg(st == TFVM_ERR_TYPE, "case %zu: %s", k, tfvm_status_name(st));
            ck_assert_str_eq(tfvm_session_errmsg(s), cases[k].message);
        } else {
            ck_assert_msg(st == TFVM_OK, "case %zu: %s", k, tfvm_session_errmsg(s));
        }
        tfvm_tensor_free(t);
    }
    ck_assert_int_eq(tfvm_session_finish(s, &r, 1), TFVM_OK);
    ck_assert(r.dtype == TFVM_F32 && r.as.f32 == 0.0f);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* What the host can get wrong, each with its message; none harms the run. */
START_TEST(host_errors)
{
    tfvm_program *p = assemble(SUM_FEED);
    tfvm_vm *vm = new_vm(p, _i + 1);
    tfvm_value n = tfvm_i32(1), r, x;
    tfvm_session *s, *s2;
    ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &s), TFVM_OK);
    ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &s2), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "a run is already in progress on this VM");
    x = tfvm_i32(1);
    ck_assert_int_eq(tfvm_feed(s, "y", &x), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_session_errmsg(s), "the program has no FEED channel 'y' (it has 'x')");
    ck_assert_int_eq(tfvm_feed(s, "s", &x), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_session_errmsg(s), "channel 's' is fetched, not fed");
    ck_assert_int_eq(tfvm_fetch(s, "x", &x), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_session_errmsg(s), "channel 'x' is fed, not fetched");
    x = tfvm_f32(1.5f);
    ck_assert_int_eq(tfvm_feed(s, "x", &x), TFVM_ERR_TYPE);
    ck_assert_str_eq(tfvm_session_errmsg(s), "channel 'x' takes i32, got f32");
    int64_t dims[1] = {2};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_I32, 1, dims, NULL);
    x = tfvm_tensor_value(t);
    ck_assert_int_eq(tfvm_feed(s, "x", &x), TFVM_ERR_TYPE);
    ck_assert_str_eq(tfvm_session_errmsg(s), "channel 'x' takes i32, got i32[2]");
    tfvm_tensor_free(t);
    feed_i32(s, "x", 7);
    ck_assert_int_eq(fetch_i32(s, "s"), 7);
    ck_assert_int_eq(tfvm_session_finish(s, &r, 1), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 7);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* A run error reaches the host at its next fetch, and at finish. */
START_TEST(run_error_reaches_host)
{
    tfvm_program *p = assemble(DIV);
    tfvm_vm *vm = new_vm(p, _i + 1);
    tfvm_session *s;
    tfvm_value x, r;
    ck_assert_int_eq(tfvm_session_start(vm, NULL, NULL, 0, &s), TFVM_OK);
    feed_i32(s, "x", 0);
    ck_assert_int_eq(tfvm_fetch(s, "q", &x), TFVM_ERR_ARITH);
    ck_assert_str_eq(tfvm_session_errmsg(s), "q (DIV) at []: integer division by zero");
    x = tfvm_i32(1);
    ck_assert_int_eq(tfvm_feed(s, "x", &x), TFVM_ERR_ARITH);
    ck_assert_int_eq(tfvm_session_finish(s, &r, 1), TFVM_ERR_ARITH);
    ck_assert_int_eq(tfvm_session_start(vm, NULL, NULL, 0, &s), TFVM_OK);
    feed_i32(s, "x", 7);
    ck_assert_int_eq(fetch_i32(s, "q"), 14);
    ck_assert_int_eq(tfvm_session_finish(s, &r, 1), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 14);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* Cancelling a run that waits for the host, one that computes, and one
 * with values queued both ways frees everything (ASan). */
START_TEST(cancel)
{
    tfvm_program *p = assemble(SUM_FEED);
    tfvm_vm *vm = new_vm(p, _i + 1);
    tfvm_value n = tfvm_i32(1000000);
    tfvm_session *s;
    ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &s), TFVM_OK);
    tfvm_session_cancel(s);
    ck_assert_str_eq(tfvm_errmsg(vm), "session cancelled");
    ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &s), TFVM_OK);
    for (int k = 0; k < 500; k++)
        feed_i32(s, "x", k);
    ck_assert_int_eq(fetch_i32(s, "s"), 0);
    tfvm_session_cancel(s);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* Tensors both ways, and a Case Select: the host decides when to stop. The
 * fetched tensor is the host's own copy. */
START_TEST(case_select_tensors)
{
    tfvm_program *p = assemble(TRAIN);
    tfvm_vm *vm = new_vm(p, _i + 1);
    int64_t dims[1] = {3};
    tfvm_tensor *a0 = tfvm_tensor_new(TFVM_F32, 1, dims, NULL);
    tfvm_value a = tfvm_tensor_value(a0), x, r[2];
    tfvm_session *s;
    ck_assert_int_eq(tfvm_session_start(vm, NULL, &a, 1, &s), TFVM_OK);
    tfvm_tensor_free(a0);
    float expect = 0;
    for (int step = 0;; step++) {
        x = tfvm_bool(step == 5);
        ck_assert_int_eq(tfvm_feed(s, "stop", &x), TFVM_OK);
        if (step == 5)
            break;
        tfvm_tensor *b = tfvm_tensor_new(TFVM_F32, 1, dims, NULL);
        float *bd = tfvm_tensor_data(b);
        for (int k = 0; k < 3; k++)
            bd[k] = (float)(step + k);
        x = tfvm_tensor_value(b);
        ck_assert_int_eq(tfvm_feed(s, "batch", &x), TFVM_OK);
        tfvm_tensor_free(b);
        expect += (float)step;
        ck_assert_int_eq(tfvm_fetch(s, "acc", &x), TFVM_OK);
        ck_assert_int_eq(x.dtype, TFVM_F32);
        ck_assert_ptr_nonnull(x.tensor);
        float *got = tfvm_tensor_data(x.tensor);
        ck_assert_float_eq(got[0], expect);
        got[0] = -1000; /* the host's copy: the graph's value stays */
        tfvm_value_release(&x);
    }
    ck_assert_int_eq(tfvm_session_finish(s, r, 2), TFVM_OK);
    ck_assert_int_eq(r[1].as.i32, 5);
    const float *acc = tfvm_tensor_cdata(r[0].tensor);
    ck_assert_float_eq(acc[0], 10);
    ck_assert_float_eq(acc[2], 20);
    tfvm_value_release(&r[0]);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* A VM's channel table (two FEEDs of one channel, a FETCH) and a run that
 * fails at an unfed FEED give back every byte, each block with its size. */
START_TEST(channels_freed_exactly)
{
    static const char *const TWICE =
        "entry main() -> (r: i32) {\n"
        "    zero  = CONST i32 0\n"
        "    a     = FEED \"x\" i32 (zero)\n"
        "    b     = FEED \"x\" i32 (a:1)\n"
        "    s     = ADD (a, b)\n"
        "    f     = FETCH \"s\" (s, zero)\n"
        "            RESULT 0 (f)\n"
        "}\n";
    tu_alloc counts = {.countdown = -1};
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.allocator = tu_allocator(&counts);
    cfg.deterministic = true;
    tfvm_program *p = assemble(TWICE);
    tfvm_vm *vm = NULL;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    tfvm_value r;
    ck_assert_int_eq(tfvm_run(vm, NULL, NULL, 0, &r, 1), TFVM_ERR_STUCK);
    ck_assert_str_eq(tfvm_errmsg(vm), "a (FEED) at []: channel 'x' waits for value #1, but the host feeds no more values");
    tfvm_vm_free(vm);
    ck_assert_int_eq(counts.live, 0);
    ck_assert_int_eq(counts.blocks, 0);
    tfvm_program_free(p);
}
END_TEST


/* count: a loop to n that computes a while, then fetches its count on "r";
 * a fetch of "r" blocks for that while. */
static const char *const COUNT =
    "entry main(n: i32) -> (r: i32) {\n"
    "    n     = ARG 0\n"
    "    zero  = CONST i32 0\n"
    "    e_i   = ENTER cnt (zero)\n"
    "    e_n   = ENTER cnt const (n)\n"
    "    f     = FETCH \"r\" (cnt.i_out, zero)\n"
    "            RESULT 0 (f)\n"
    "}\n"
    "loop cnt in main {\n"
    "    i     = MERGE (e_i, i_next)\n"
    "    lt    = LESS (i, e_n)\n"
    "    p     = LOOPCOND (lt)\n"
    "    si    = SWITCH (i, p)\n"
    "    one   = CONST i32 1 [si:1]\n"
    "    i2    = ADD (si:1, one)\n"
    "    i_next = NEXTITER (i2)\n"
    "    i_out = EXIT cnt (si)\n"
    "}\n";

/* A host thread that fetches "r" until a call fails other than by
 * TFVM_ERR_STUCK; what it saw. */
typedef struct fetcher_log {
    tfvm_session *s;
    const char *chan;
    bool no_msg;       /* the handle may be gone when the fetch returns (tfvm_vm_free) */
    atomic_int inside; /* 1 once it has called tfvm_fetch */
    int ok;            /* values fetched */
    tfvm_status last;
    char msg[256];
} fetcher_log;

static void *fetcher(void *ud)
{
    fetcher_log *f = ud;
    for (;;) {
        tfvm_value v;
        atomic_store(&f->inside, 1);
        tfvm_status st = tfvm_fetch(f->s, f->chan, &v);
        if (st == TFVM_OK) {
            f->ok++;
            continue;
        }
        if (st == TFVM_ERR_STUCK && !f->no_msg && strstr(tfvm_session_errmsg(f->s), "graph waits for the host")) {
            sched_yield(); /* a feeder thread is late */
            continue;
        }
        f->last = st;
        if (!f->no_msg)
            snprintf(f->msg, sizeof f->msg, "%s", tfvm_session_errmsg(f->s));
        return NULL;
    }
}

static void wait_inside(fetcher_log *f)
{
    while (!atomic_load(&f->inside))
        sched_yield();
    nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL); /* most often: blocked in tfvm_fetch by now */
}

/* Cancel while another thread blocks in tfvm_fetch: the fetcher wakes with
 * the run's error, and the session is freed only after it has left (it
 * once read the freed session: ASan, about 3 runs in 4). */
START_TEST(cancel_while_fetching)
{
    tfvm_program *p = assemble(COUNT);
    tfvm_vm *vm = new_vm(p, _i + 1);
    for (int round = 0; round < 20; round++) {
        tfvm_value n = tfvm_i32(2000000000);
        fetcher_log f = {.chan = "r"};
        ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &f.s), TFVM_OK);
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, fetcher, &f), 0);
        wait_inside(&f);
        tfvm_session_cancel(f.s);
        pthread_join(t, NULL);
        ck_assert_int_eq(f.ok, 0);
        ck_assert_int_eq(f.last, TFVM_ERR_INTERRUPTED);
        ck_assert_str_eq(f.msg, "session cancelled");
        ck_assert_str_eq(tfvm_errmsg(vm), "session cancelled");
    }
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* Finish while another thread blocks in tfvm_fetch: the fetcher gets the
 * value the run makes, then hears that the run ended or the session did. */
START_TEST(finish_while_fetching)
{
    tfvm_program *p = assemble(COUNT);
    tfvm_vm *vm = new_vm(p, _i + 1);
    for (int round = 0; round < 10; round++) {
        tfvm_value n = tfvm_i32(20000), r;
        fetcher_log f = {.chan = "r"};
        ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &f.s), TFVM_OK);
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, fetcher, &f), 0);
        wait_inside(&f);
        ck_assert_int_eq(tfvm_session_finish(f.s, &r, 1), TFVM_OK);
        ck_assert_int_eq(r.as.i32, 20000);
        pthread_join(t, NULL);
        ck_assert_int_le(f.ok, 1);
        if (f.last == TFVM_ERR_STUCK)
            ck_assert_str_eq(f.msg, "FETCH 'r' (f) waits for value #2, but the run ended after 1");
        else
            ck_assert_msg(f.last == TFVM_ERR_ARGUMENT && !strcmp(f.msg, "fetch of channel 'r': the session has ended"),
                          "%d %s", f.last, f.msg);
    }
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* Calls on a handle after finish or cancel are answered (they were a use
 * after free): the handle is the VM's until tfvm_vm_free. A second finish
 * or cancel is harmless, and no run starts beside an unfinished session. */
START_TEST(calls_after_end)
{
    tfvm_program *p = assemble(SUM_FEED);
    tfvm_vm *vm = new_vm(p, _i + 1);
    tfvm_value n = tfvm_i32(2), r, x = tfvm_i32(1);
    tfvm_session *s;
    ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &s), TFVM_OK);
    feed_i32(s, "x", 1);
    feed_i32(s, "x", 2);
    ck_assert_int_eq(fetch_i32(s, "s"), 1);
    ck_assert_int_eq(fetch_i32(s, "s"), 3);
    ck_assert_int_eq(tfvm_fetch(s, "s", &x), TFVM_ERR_STUCK); /* the run is over, the session is not */
    ck_assert_int_eq(tfvm_run(vm, NULL, &n, 1, &r, 1), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "a run is already in progress on this VM");
    ck_assert_int_eq(tfvm_session_finish(s, &r, 1), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 3);
    x = tfvm_i32(1);
    ck_assert_int_eq(tfvm_feed(s, "x", &x), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_session_errmsg(s), "feed of channel 'x': the session has ended");
    ck_assert_int_eq(tfvm_fetch(s, "s", &x), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_session_errmsg(s), "fetch of channel 's': the session has ended");
    ck_assert_int_eq(tfvm_session_finish(s, &r, 1), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_session_errmsg(s), "finish: the session has ended");
    tfvm_session_cancel(s);
    ck_assert_int_eq(tfvm_run(vm, NULL, &n, 1, &r, 1), TFVM_ERR_STUCK); /* the VM runs again */
    tfvm_session_cancel(s);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* tfvm_vm_free with a live session cancels it: the thread blocked in
 * tfvm_fetch returns TFVM_ERR_INTERRUPTED, and every byte comes back (it
 * once freed the VM under the running session). */
START_TEST(vm_free_with_live_session)
{
    tu_alloc counts = {.countdown = -1};
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.allocator = tu_allocator(&counts); /* not thread-safe: one worker */
    cfg.deterministic = true;
    tfvm_program *p = assemble(COUNT);
    tfvm_vm *vm = NULL;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    tfvm_value n = tfvm_i32(2000000000);
    fetcher_log f = {.chan = "r", .no_msg = true};
    ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &f.s), TFVM_OK);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, fetcher, &f), 0);
    wait_inside(&f);
    nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL); /* it must be inside: the handle dies with the VM */
    tfvm_vm_free(vm);
    pthread_join(t, NULL);
    ck_assert_int_eq(f.last, TFVM_ERR_INTERRUPTED); /* "session cancelled", gone with the VM */
    ck_assert_int_eq(counts.live, 0);
    ck_assert_int_eq(counts.blocks, 0);
    tfvm_program_free(p);
}
END_TEST

/* Feeders, fetchers with misuse (unknown channel, wrong direction) and a
 * host that finishes or cancels at a random moment, many times on one VM:
 * every call returns one of the documented answers, and TSan sees no race
 * (make tsan). */
typedef struct storm {
    tfvm_session *s;
    unsigned seed;
    atomic_int fed;
} storm;

static void *storm_feeder(void *ud)
{
    storm *g = ud;
    for (int k = 0;; k++) {
        tfvm_value x = tfvm_i32(1);
        const char *name = rand_r(&g->seed) % 50 == 0 ? "s" : rand_r(&g->seed) % 50 == 0 ? "nope" : "x";
        tfvm_status st = tfvm_feed(g->s, name, &x);
        if (name[0] != 'x') {
            ck_assert_int_eq(st, TFVM_ERR_ARGUMENT);
            continue;
        }
        if (st != TFVM_OK) {
            ck_assert(st == TFVM_ERR_ARGUMENT || st == TFVM_ERR_INTERRUPTED || st == TFVM_ERR_STUCK);
            return NULL;
        }
        atomic_fetch_add(&g->fed, 1);
        if (k % 64 == 0)
            sched_yield();
    }
}

static void *storm_fetcher(void *ud)
{
    storm *g = ud;
    for (;;) {
        tfvm_value v;
        tfvm_status st = tfvm_fetch(g->s, rand_r(&g->seed) % 100 == 0 ? "x" : "s", &v);
        if (st == TFVM_OK || st == TFVM_ERR_STUCK) {
            if (st == TFVM_ERR_STUCK)
                sched_yield();
            continue;
        }
        ck_assert_msg(st == TFVM_ERR_ARGUMENT || st == TFVM_ERR_INTERRUPTED, "fetch: %d", st);
        return NULL;
    }
}

static void *cancel_thread(void *ud)
{
    tfvm_session_cancel(ud);
    return NULL;
}

START_TEST(session_storm)
{
    tfvm_program *p = assemble(SUM_FEED);
    tfvm_vm *vm = new_vm(p, _i + 1);
    unsigned seed = 27;
    for (int round = 0; round < 40; round++) {
        tfvm_value n = tfvm_i32(1 << 30), r;
        storm g = {.seed = seed + (unsigned)round};
        ck_assert_int_eq(tfvm_session_start(vm, NULL, &n, 1, &g.s), TFVM_OK);
        pthread_t t[4];
        for (int k = 0; k < 4; k++)
            ck_assert_int_eq(pthread_create(&t[k], NULL, k < 2 ? storm_feeder : storm_fetcher, &g), 0);
        int wait = rand_r(&seed) % 200;
        while (atomic_load(&g.fed) < wait)
            sched_yield();
        int how = rand_r(&seed) % 2;
        if (how == 0) {
            tfvm_session_cancel(g.s);
            ck_assert_str_eq(tfvm_errmsg(vm), "session cancelled");
        } else if (how == 1) { /* the loop never ends: finish waits, a cancel from a thread stops it */
            pthread_t c;
            ck_assert_int_eq(pthread_create(&c, NULL, cancel_thread, g.s), 0);
            tfvm_status st = tfvm_session_finish(g.s, &r, 1);
            ck_assert(st == TFVM_ERR_INTERRUPTED || st == TFVM_ERR_ARGUMENT || st == TFVM_ERR_STUCK);
            pthread_join(c, NULL);
        }
        for (int k = 0; k < 4; k++)
            pthread_join(t[k], NULL);
    }
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("session");
    TCase *tc = tcase_create("session");
    tcase_set_timeout(tc, 60);
    /* each on 1 worker (deterministic) and 2 */
    tcase_add_loop_test(tc, feed_ahead_then_fetch, 0, 2);
    tcase_add_loop_test(tc, lockstep, 0, 2);
    tcase_add_test(tc, lockstep_many);
    tcase_add_loop_test(tc, feeder_thread, 0, 2);
    tcase_add_loop_test(tc, fetch_while_graph_waits, 0, 2);
    tcase_add_loop_test(tc, finish_while_feed_waits, 0, 2);
    tcase_add_loop_test(tc, host_errors, 0, 2);
    tcase_add_loop_test(tc, fed_shape_checked, 0, 2);
    tcase_add_loop_test(tc, run_error_reaches_host, 0, 2);
    tcase_add_loop_test(tc, cancel, 0, 2);
    tcase_add_loop_test(tc, case_select_tensors, 0, 2);
    tcase_add_test(tc, channels_freed_exactly);
    tcase_add_loop_test(tc, cancel_while_fetching, 0, 2);
    tcase_add_loop_test(tc, finish_while_fetching, 0, 2);
    tcase_add_loop_test(tc, calls_after_end, 0, 2);
    tcase_add_test(tc, vm_free_with_live_session);
    tcase_add_loop_test(tc, session_storm, 0, 2);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
