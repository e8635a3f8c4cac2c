/* test/unit/test_sched.c — the scheduler through the public API and from
 * inside: the policy table, many runs in a row on persistent workers, pools
 * shared by VMs on several threads, the CPUs a pool's threads may use,
 * kernels' parallel loops inside runs, and sched_run_parallel_for driven by
 * hand (run under TSan by `make tsan`). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "devices/cpu/par.h"
#include "scheduler/sched.h"
#include "testutil.h"
#include "tfvm.h"

/* ---- Programs -------------------------------------------------------------------- */

/* fib(n) = 1 for n <= 1, else fib(n-1) + fib(n-2); a loop; a run that can
 * fail (integer division by zero when n == 7); and a call's result meeting
 * another value in a two-input instruction, at the entry and one call down. */
static const char *FIB_SRC =
    "fn fib(n: i64) -> i64 {\n"
    "    if n <= 1 { 1 } else { fib(n - 1) + fib(n - 2) }\n"
    "}\n"
    "fn main(n: i64) -> i64 { fib(n) }\n"
    "fn sum(n: i64) -> i64 {\n"
    "    let (i, s) = while lp (i = 1i64, s = 0i64; i <= n) { (i + 1, s + i) };\n"
    "    s\n"
    "}\n"
    "fn fails_at_7(n: i64) -> i64 { sum(n) / (n - 7) }\n"
    "fn fib_plus_n(n: i64) -> i64 { fib(n) + n }\n"
    "fn nested(n: i64) -> i64 { fib_plus_n(n) * 3 }\n";

static int64_t fib_ref(int64_t n) { return n <= 1 ? 1 : fib_ref(n - 1) + fib_ref(n - 2); }

static tfvm_program *compile_entry(const char *src, const char *entry)
{
    tfvm_compile_options o;
    tfvm_compile_options_init(&o);
    o.entry = entry;
    tfvm_program *p = NULL;
    tfvm_error err;
    tfvm_status st = tfvm_program_compile(src, strlen(src), "t.tfg", &o, NULL, &p, &err);
    ck_assert_msg(st == TFVM_OK, "compile %s: %s", entry, err.message);
    return p;
}

static tfvm_vm *new_vm(const tfvm_program *p, int threads, tfvm_pool *pool)
{
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.threads = threads;
    cfg.deterministic = threads == 1;
    cfg.pool = pool;
    tfvm_vm *vm = NULL;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    return vm;
}

/* One run of an i64 -> i64 entry; false (and *out untouched) on failure. */
static bool run_i64(tfvm_vm *vm, int64_t n, int64_t *out)
{
    tfvm_value a = tfvm_i64(n), r;
    if (tfvm_run(vm, NULL, &a, 1, &r, 1) != TFVM_OK || r.dtype != TFVM_I64)
        return false;
    *out = r.as.i64;
    return true;
}

static uint32_t workers_of(const tfvm_vm *vm)
{
    tfvm_stats st;
    tfvm_vm_stats(vm, &st);
    return st.workers;
}

/* ---- The policy table ------------------------------------------------------------ */

START_TEST(policy_table)
{
    const char *summary = "unset";
    ck_assert_str_eq(tfvm_sched_name(0, &summary), "workstealing");
    ck_assert_str_eq(summary, "one worker per core, private LIFO stacks, Chase-Lev deques, thieves take the oldest");
    ck_assert_str_eq(tfvm_sched_name(1, &summary), "deterministic");
    ck_assert_str_eq(summary, "one thread, LIFO (depth-first), the same firing order every run");
    ck_assert_ptr_null(tfvm_sched_name(2, &summary));
    ck_assert_ptr_null(summary);
    ck_assert_str_eq(tfvm_sched_name(1, NULL), "deterministic");
    ck_assert_ptr_null(tfvm_sched_name((size_t)-1, NULL));
    /* the table the names come from */
    for (size_t i = 0; tfvm_sched_name(i, NULL); i++) {
        const sched_policy *p = sched_policy_find(tfvm_sched_name(i, NULL));
        ck_assert_ptr_eq(p, sched_policy_at(i));
        ck_assert_ptr_nonnull(p->find_work);
        ck_assert_ptr_nonnull(p->join);
        ck_assert_int_eq(p->multi, p->offer != NULL); /* only the multi-worker policy shares work */
    }
    ck_assert_ptr_null(sched_policy_find("nope"));
    ck_assert_ptr_null(sched_policy_find(""));
    ck_assert_ptr_null(sched_policy_find(NULL));
    ck_assert_ptr_null(sched_policy_find("Deterministic")); /* names are exact */
}
END_TEST

START_TEST(config_sched_chooses_the_policy)
{
    tfvm_program *p = compile_entry(FIB_SRC, "main");
    tfvm_config cfg;
    tfvm_vm *vm = (tfvm_vm *)&cfg; /* a failing tfvm_vm_new must set it to NULL */
    static const char *bad[] = {"nope", "", "work-stealing", "deterministic "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tfvm_config_init(&cfg);
        cfg.sched = bad[i];
        cfg.threads = 2;
        vm = (tfvm_vm *)&cfg;
        ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_ERR_ARGUMENT);
        ck_assert_ptr_null(vm);
    }
    /* named policies: deterministic is one worker whatever threads says;
     * workstealing takes the threads asked for; unnamed picks by threads */
    static const struct {
        const char *sched;
        int threads;
        uint32_t workers;
    } cases[] = {
        {"deterministic", 4, 1}, {"deterministic", 0, 1}, {"workstealing", 2, 2},
        {"workstealing", 4, 4},  {NULL, 1, 1},            {NULL, 3, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tfvm_config_init(&cfg);
        cfg.sched = cases[i].sched;
        cfg.threads = cases[i].threads;
        ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
        int64_t r = 0;
        ck_assert_msg(run_i64(vm, 15, &r), "%s/%d: %s", cases[i].sched, cases[i].threads, tfvm_errmsg(vm));
        ck_assert_int_eq(r, 987);
        ck_assert_uint_eq(workers_of(vm), cases[i].workers);
        tfvm_vm_free(vm);
    }
    tfvm_program_free(p);
}
END_TEST

/* ---- Many runs in a row on one VM: the workers persist --------------------------- */

START_TEST(many_runs_in_a_row)
{
    static const int threads[] = {2, 4};
    int t = threads[_i];
    tfvm_program *fib = compile_entry(FIB_SRC, "main"), *sum = compile_entry(FIB_SRC, "sum"),
                 *fails = compile_entry(FIB_SRC, "fails_at_7");
    tfvm_vm *vf = new_vm(fib, t, NULL), *vs = new_vm(sum, t, NULL), *vx = new_vm(fails, t, NULL);
    for (int k = 0; k < 120; k++) {
        int64_t n = k % 17, r = -1;
        ck_assert_msg(run_i64(vf, n, &r), "run %d: %s", k, tfvm_errmsg(vf));
        ck_assert_msg(r == fib_ref(n), "run %d: fib(%lld) = %lld, want %lld", k, (long long)n, (long long)r,
                      (long long)fib_ref(n));
        ck_assert_uint_eq(workers_of(vf), (uint32_t)t);
        n = (k * 37) % 300;
        ck_assert_msg(run_i64(vs, n, &r), "run %d: %s", k, tfvm_errmsg(vs));
        ck_assert_int_eq(r, n * (n + 1) / 2);
        /* a failed run ends cleanly and the next one is right */
        n = k % 3 == 0 ? 7 : 12 + k % 3;
        bool ok = run_i64(vx, n, &r);
        if (n == 7) {
            ck_assert(!ok);
            ck_assert_int_eq(tfvm_last_error(vx)->code, TFVM_ERR_ARITH);
            ck_assert_msg(strstr(tfvm_errmsg(vx), "integer division by zero") != NULL, "%s", tfvm_errmsg(vx));
        } else {
            ck_assert_msg(ok, "run %d: %s", k, tfvm_errmsg(vx));
            ck_assert_int_eq(r, n * (n + 1) / 2 / (n - 7));
        }
    }
    tfvm_vm_free(vf);
    tfvm_vm_free(vs);
    tfvm_vm_free(vx);
    tfvm_program_free(fib);
    tfvm_program_free(sum);
    tfvm_program_free(fails);
}
END_TEST

/* A call's result and an argument meet in an ADD (matching in the caller's
 * context), at the entry and in a called function, on 1, 2 and 4 workers. */
START_TEST(call_result_meets_another_value)
{
    static const int threads[] = {1, 2, 4};
    int t = threads[_i];
    tfvm_program *top = compile_entry(FIB_SRC, "fib_plus_n"), *down = compile_entry(FIB_SRC, "nested");
    tfvm_vm *vt = new_vm(top, t, NULL), *vd = new_vm(down, t, NULL);
    for (int64_t n = 0; n <= 16; n++) {
        int64_t r = -1;
        ck_assert_msg(run_i64(vt, n, &r), "%d threads, fib(%lld) + n: %s", t, (long long)n, tfvm_errmsg(vt));
        ck_assert_int_eq(r, fib_ref(n) + n);
        ck_assert_msg(run_i64(vd, n, &r), "%d threads, (fib(%lld) + n) * 3: %s", t, (long long)n, tfvm_errmsg(vd));
        ck_assert_int_eq(r, (fib_ref(n) + n) * 3);
    }
    tfvm_vm_free(vt);
    tfvm_vm_free(vd);
    tfvm_program_free(top);
    tfvm_program_free(down);
}
END_TEST

/* tfvm_interrupt from another thread stops a run on several workers (the
 * parked ones too), and the next runs on the same workers are right. */
typedef struct stopper {
    tfvm_vm *vm;
    atomic_int done;
} stopper;

static void *interrupt_until_done(void *arg)
{
    stopper *s = arg;
    /* again and again: an interrupt before the run has begun is forgotten */
    while (!atomic_load(&s->done)) {
        tfvm_interrupt(s->vm);
        struct timespec t = {0, 2000000};
        nanosleep(&t, NULL);
    }
    return NULL;
}

START_TEST(interrupt_then_run_again)
{
    static const int threads[] = {2, 4};
    int t = threads[_i];
    tfvm_program *sum = compile_entry(FIB_SRC, "sum");
    tfvm_vm *vs = new_vm(sum, t, NULL);
    for (int k = 0; k < 3; k++) {
        stopper s = {.vm = vs};
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, interrupt_until_done, &s), 0);
        int64_t r = -1;
        bool ok = run_i64(vs, INT64_C(1) << 40, &r); /* hours, unless stopped */
        atomic_store(&s.done, 1);
        pthread_join(th, NULL);
        ck_assert(!ok);
        ck_assert_int_eq(tfvm_last_error(vs)->code, TFVM_ERR_INTERRUPTED);
        /* where: in the loop (its iteration varies), or before it started */
        const char *msg = tfvm_errmsg(vs), *loop = strstr(msg, ", iteration #");
        ck_assert_msg(strncmp(msg, "interrupted at ", 15) == 0 && strstr(msg, " in 'sum' at depth 0") &&
                          (!loop || strstr(loop, " of loop 'lp'")),
                      "%s", msg);
        ck_assert_msg(run_i64(vs, 1000, &r), "after interrupt %d: %s", k, tfvm_errmsg(vs));
        ck_assert_int_eq(r, 500500);
    }
    tfvm_vm_free(vs);
    tfvm_program_free(sum);
}
END_TEST

/* ---- Pools -------------------------------------------------------------------------- */

typedef struct user {
    tfvm_vm *vm;
    int runs;
    bool loop;     /* the sum program, else fib */
    int wrong;     /* runs that failed or gave a wrong answer */
    char msg[200]; /* the first of them */
} user;

static void *use_vm(void *arg)
{
    user *u = arg;
    for (int k = 0; k < u->runs; k++) {
        int64_t n = u->loop ? 50 + k % 150 : k % 16, r = -1;
        int64_t want = u->loop ? n * (n + 1) / 2 : fib_ref(n);
        if (!run_i64(u->vm, n, &r) || r != want) {
            if (!u->wrong++)
                snprintf(u->msg, sizeof u->msg, "run %d, n = %lld: got %lld, want %lld (%s)", k, (long long)n,
                         (long long)r, (long long)want, tfvm_errmsg(u->vm));
        }
    }
    return NULL;
}

/* Two VMs on one pool, each used by its own thread at the same time: their
 * runs take turns on the pool's threads, and every answer is right. */
START_TEST(pool_shared_by_two_vms_on_two_threads)
{
    static const int shapes[][3] = {{2, 2, 2}, {4, 4, 4}, {4, 2, 3}}; /* pool, VM a, VM b threads */
    const int *s = shapes[_i];
    tfvm_program *fib = compile_entry(FIB_SRC, "main"), *sum = compile_entry(FIB_SRC, "sum");
    tfvm_pool *pool = tfvm_pool_new(s[0]);
    ck_assert_ptr_nonnull(pool);
    user u[2] = {{.vm = new_vm(fib, s[1], pool), .runs = 60}, {.vm = new_vm(sum, s[2], pool), .runs = 60, .loop = true}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, use_vm, &u[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(u[i].wrong == 0, "VM %d: %d wrong runs; first: %s", i, u[i].wrong, u[i].msg);
        ck_assert_uint_eq(workers_of(u[i].vm), (uint32_t)s[1 + i]);
    }
    /* the pool goes after the VMs */
    tfvm_vm_free(u[0].vm);
    tfvm_vm_free(u[1].vm);
    tfvm_pool_free(pool);
    tfvm_program_free(fib);
    tfvm_program_free(sum);
}
END_TEST

/* A pool's threads start away from their creator's CPU (so the two do not
 * share it until the next load balance) and then may run wherever the
 * creator may: each thread's affinity in a run is the creator's, on all of
 * its CPUs and on one. */
enum { AFF_THREADS = 3 };
typedef struct aff_seen {
    cpu_set_t cpus[AFF_THREADS];
    int got[AFF_THREADS];
    atomic_uint ran;
    sched_pool *pool;
} aff_seen;

/* Each thread's affinity; the caller's thread (0) asks for the pool's
 * threads and keeps the run open until they have joined it (a pool thread
 * that comes late sits a run out). */
static void record_affinity(void *ud, uint32_t i)
{
    aff_seen *a = ud;
    if (i == 0)
        sched_pool_want(a->pool);
    a->got[i] = pthread_getaffinity_np(pthread_self(), sizeof a->cpus[i], &a->cpus[i]) == 0;
    atomic_fetch_add(&a->ran, 1);
    for (int spins = 0; i == 0 && atomic_load(&a->ran) < AFF_THREADS && spins < 10000000; spins++)
        sched_yield();
}

START_TEST(pool_threads_keep_the_creators_cpus)
{
    cpu_set_t all, one;
    ck_assert_int_eq(pthread_getaffinity_np(pthread_self(), sizeof all, &all), 0);
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &all))
            first = c;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    const cpu_set_t *masks[] = {&all, &one};
    for (int m = 0; m < 2; m++) {
        ck_assert_int_eq(pthread_setaffinity_np(pthread_self(), sizeof *masks[m], masks[m]), 0);
        sched_pool *p = sched_pool_new(AFF_THREADS);
        ck_assert_ptr_nonnull(p);
        aff_seen seen = {.pool = p};
        sched_pool_run(p, AFF_THREADS, record_affinity, &seen);
        sched_pool_free(p);
        for (int i = 0; i < AFF_THREADS; i++) {
            ck_assert_msg(seen.got[i], "mask %d: thread %d did not run", m, i);
            ck_assert_msg(CPU_EQUAL(&seen.cpus[i], masks[m]), "mask %d: thread %d may run on %d CPUs, the creator on %d",
                          m, i, CPU_COUNT(&seen.cpus[i]), CPU_COUNT(masks[m]));
        }
    }
    ck_assert_int_eq(pthread_setaffinity_np(pthread_self(), sizeof all, &all), 0);
}
END_TEST

/* A pool with more threads than a VM's workers: the extra threads sit the
 * run out; threads = 0 takes the pool's size; more than the pool has is
 * capped; a deterministic VM does not use the pool at all. */
START_TEST(pool_wider_than_the_vm)
{
    tfvm_program *fib = compile_entry(FIB_SRC, "main");
    tfvm_pool *pool = tfvm_pool_new(4);
    ck_assert_ptr_nonnull(pool);
    static const struct {
        int threads;
        uint32_t workers;
    } cases[] = {{2, 2}, {3, 3}, {0, 4}, {8, 4}, {1, 1}, {2, 2}, {4, 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tfvm_config cfg;
        tfvm_config_init(&cfg);
        cfg.threads = cases[i].threads;
        cfg.deterministic = cases[i].threads == 1;
        cfg.pool = pool;
        tfvm_vm *vm;
        ck_assert_int_eq(tfvm_vm_new(fib, &cfg, &vm), TFVM_OK);
        for (int k = 0; k < 20; k++) {
            int64_t r = -1, n = 5 + (k + (int)i) % 11;
            ck_assert_msg(run_i64(vm, n, &r), "threads %d, run %d: %s", cases[i].threads, k, tfvm_errmsg(vm));
            ck_assert_int_eq(r, fib_ref(n));
        }
        ck_assert_uint_eq(workers_of(vm), cases[i].workers);
        tfvm_vm_free(vm); /* the pool outlives each VM and serves the next */
    }
    tfvm_pool_free(pool);
    tfvm_pool_free(NULL);
    /* a one-thread pool: every run is on the caller's thread */
    pool = tfvm_pool_new(1);
    ck_assert_ptr_nonnull(pool);
    tfvm_vm *vm = new_vm(fib, 0, pool);
    int64_t r = -1;
    ck_assert(run_i64(vm, 12, &r));
    ck_assert_int_eq(r, 233);
    ck_assert_uint_eq(workers_of(vm), 1);
    tfvm_vm_free(vm);
    tfvm_pool_free(pool);
    tfvm_program_free(fib);
}
END_TEST

/* ---- Kernels' parallel loops inside runs ----------------------------------------------
 * Pooling over many planes, a convolution over many images and a big product
 * split their work with dev_par_for (devices/cpu/conv.c, matmul.c) on the
 * run's idle workers; independent ones run at once on different workers, so
 * one loop may find the board taken and run alone. Every result must be
 * bit-identical to the one-thread run's. The inputs are small multiples of
 * 1/2, so every sum is exact whatever order a kernel adds in: a difference
 * is a chunk lost, doubled or misplaced, not rounding. */
static const char *KERNELS_SRC =
    "fn main(x: f32[?, 8, 32, 32], w: f32[16, 8, 3, 3], a: f32[?, ?], b: f32[?, ?])\n"
    "    -> (p: f32[?, 8, 16, 16], q: f32[?, 8, 16, 16], r: f32[?, 8, 8, 8], c: f32[?, 16, 32, 32],\n"
    "        m: f32[?, ?], f: f32[?, ?]) {\n"
    "    let p = maxpool(x, kernel = 2);\n"
    "    let q = avgpool(x * 0.5, kernel = 2);\n"
    "    (p, q, maxpool(p + q, kernel = 2), conv2d(x, w, padding = 1), matmul(a, b), relu(matmul(b, a) + 1.0))\n"
    "}\n";
#define KERNEL_RESULTS 6

static tfvm_tensor *halves(int rank, const int64_t *dims, uint32_t seed)
{
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, rank, dims, NULL);
    ck_assert_ptr_nonnull(t);
    float *d = tfvm_tensor_data(t);
    for (int64_t i = 0; i < tfvm_tensor_count(t); i++) {
        seed = seed * 1664525u + 1013904223u;
        d[i] = (float)((int)(seed >> 24) % 9 - 4) * 0.5f; /* -2 .. 2 by 1/2 */
    }
    return t;
}

static void run_kernels(const tfvm_program *p, int threads, tfvm_pool *pool, tfvm_tensor **in,
                        tfvm_value out[KERNEL_RESULTS])
{
    tfvm_vm *vm = new_vm(p, threads, pool);
    tfvm_value a[4];
    for (int k = 0; k < 4; k++)
        a[k] = tfvm_tensor_value(in[k]);
    tfvm_status st = tfvm_run(vm, NULL, a, 4, out, KERNEL_RESULTS);
    ck_assert_msg(st == TFVM_OK, "threads %d: %s", threads, tfvm_errmsg(vm));
    ck_assert_uint_eq(workers_of(vm), (uint32_t)threads);
    tfvm_vm_free(vm);
}

START_TEST(kernel_parallel_loops_match_one_thread)
{
    tfvm_program *p = compile_entry(KERNELS_SRC, "main");
    const int64_t dx[4] = {64, 8, 32, 32}, dw[4] = {16, 8, 3, 3}, da[2] = {256, 192}, db[2] = {192, 256};
    tfvm_tensor *in[4] = {halves(4, dx, 1), halves(4, dw, 2), halves(2, da, 3), halves(2, db, 4)};
    tfvm_value ref[KERNEL_RESULTS];
    run_kernels(p, 1, NULL, in, ref);
    tfvm_pool *pool = tfvm_pool_new(4);
    ck_assert_ptr_nonnull(pool);
    for (int round = 0; round < 3; round++) {
        for (int threads = 2; threads <= 4; threads++) {
            tfvm_value got[KERNEL_RESULTS];
            run_kernels(p, threads, round == 2 ? pool : NULL, in, got);
            for (int k = 0; k < KERNEL_RESULTS; k++) {
                int64_t n = tfvm_tensor_count(ref[k].tensor);
                ck_assert_int_eq(tfvm_tensor_count(got[k].tensor), n);
                ck_assert_msg(memcmp(tfvm_tensor_cdata(got[k].tensor), tfvm_tensor_cdata(ref[k].tensor),
                                     (size_t)n * sizeof(float)) == 0,
                              "result %d differs on %d threads (round %d)", k, threads, round);
                tfvm_value_release(&got[k]);
            }
        }
    }
    /* the results are what the kernels compute, not zeros */
    const float *m = tfvm_tensor_cdata(ref[4].tensor), *A = tfvm_tensor_cdata(in[2]), *B = tfvm_tensor_cdata(in[3]);
    for (int64_t i = 0; i < 256; i += 51)
        for (int64_t j = 0; j < 256; j += 37) {
            float s = 0;
            for (int64_t k = 0; k < 192; k++)
                s += A[i * 192 + k] * B[k * 256 + j];
            ck_assert_msg(m[i * 256 + j] == s, "matmul[%lld][%lld] = %g, want %g", (long long)i, (long long)j,
                          (double)m[i * 256 + j], (double)s);
        }
    for (int k = 0; k < KERNEL_RESULTS; k++)
        tfvm_value_release(&ref[k]);
    for (int k = 0; k < 4; k++)
        tfvm_tensor_free(in[k]);
    tfvm_pool_free(pool);
    tfvm_program_free(p);
}
END_TEST

/* ---- sched_run_parallel_for by hand --------------------------------------------------
 * A run of NW workers whose workers 1.. are test threads that do nothing but
 * help with published loops (as idle workers in find_work do). */
#define NW 4
#define MAXN 100000

typedef struct fake_run {
    sched_run run;
    sched_worker w[NW];
    sched_worker *wp[NW];
    pthread_t helpers[NW];
    atomic_int stop;
} fake_run;

static _Thread_local int my_worker; /* 0: the test's thread */

/* Loads for assertions (their text is what a failure prints). */
static unsigned ld(atomic_uint *p) { return atomic_load(p); }
static unsigned ldc(atomic_uchar *p) { return atomic_load(p); }

typedef struct loop_arg {
    fake_run *f;
    size_t n;
    atomic_uchar hits[MAXN];
    atomic_uchar owner[MAXN]; /* the worker that ran each item */
    atomic_uint calls;
    atomic_uint by_worker[NW];
    atomic_uint bad;           /* a range outside [0, n), empty, not on a grain, or a hit twice */
    size_t max_len;            /* longest range a call may get */
    size_t grain;              /* every range starts on a multiple of it */
    size_t nested;             /* > 0: each call runs a nested loop of this many */
    atomic_uint nested_calls;  /* calls of the nested loops' fn */
    atomic_uint nested_bad;    /* a nested loop that was not run whole by its caller */
    bool wait_for_helper;      /* the test thread's first chunk waits until a helper ran one */
    atomic_int first_by;       /* the worker that ran the chunk at 0 */
    atomic_size_t first_end;   /* where the chunk at 0 ended */
    size_t lens[64];           /* the lengths of the test thread's chunks, in order */
    size_t n_lens;
} loop_arg;

static void *helper_main(void *arg)
{
    fake_run *f = ((void **)arg)[0];
    my_worker = (int)(intptr_t)((void **)arg)[1];
    free(arg);
    while (!atomic_load(&f->stop))
        if (!sched_help_job(&f->run))
            sched_yield();
    return NULL;
}

static void fake_start(fake_run *f)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < NW; i++) {
        f->w[i].id = (uint32_t)i;
        f->wp[i] = &f->w[i];
    }
    ck_assert_int_eq(sched_run_init(&f->run, f->wp, NW, NULL), TFVM_OK);
    sched_run_reset(&f->run); /* workers 1.. idle: they may help */
    my_worker = 0;
    for (int i = 1; i < NW; i++) {
        void **a = malloc(2 * sizeof *a);
        ck_assert_ptr_nonnull(a);
        a[0] = f;
        a[1] = (void *)(intptr_t)i;
        ck_assert_int_eq(pthread_create(&f->helpers[i], NULL, helper_main, a), 0);
    }
}

static void fake_stop(fake_run *f)
{
    if (!atomic_exchange(&f->stop, 1))
        for (int i = 1; i < NW; i++)
            pthread_join(f->helpers[i], NULL);
    sched_run_fini(&f->run);
}

static void nested_fn(void *arg, size_t begin, size_t end)
{
    loop_arg *a = arg;
    atomic_fetch_add(&a->nested_calls, 1);
    if (begin != 0 || end != a->nested)
        atomic_fetch_add(&a->nested_bad, 1);
}

static void loop_fn(void *arg, size_t begin, size_t end)
{
    loop_arg *a = arg;
    atomic_fetch_add(&a->calls, 1);
    atomic_fetch_add(&a->by_worker[my_worker], 1);
    if (begin == 0) {
        atomic_store(&a->first_by, my_worker);
        atomic_store(&a->first_end, end);
    }
    if (my_worker == 0 && a->n_lens < 64) /* only the test's thread reads and writes them */
        a->lens[a->n_lens++] = end - begin;
    if (begin >= end || end > a->n || end - begin > a->max_len || (a->grain && begin % a->grain))
        atomic_fetch_add(&a->bad, 1);
    for (size_t i = begin; i < end && i < a->n; i++) {
        if (atomic_fetch_add(&a->hits[i], 1) != 0)
            atomic_fetch_add(&a->bad, 1);
        atomic_store(&a->owner[i], (unsigned char)my_worker);
    }
    if (a->nested) /* a loop inside a loop: the board is taken, it runs here whole */
        sched_run_parallel_for(&a->f->run, &a->f->w[my_worker], a->nested, 1, nested_fn, a);
    if (my_worker == 0 && a->wait_for_helper) { /* helpers never read the flag */
        a->wait_for_helper = false; /* only the test's thread reads and writes it */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            unsigned helped = 0;
            for (int i = 1; i < NW; i++)
                helped += atomic_load(&a->by_worker[i]);
            if (helped)
                break;
            sched_yield();
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while (t.tv_sec - t0.tv_sec < 10);
    }
}

/* What sched_run_parallel_for promises for n items and a grain: chunks of
 * whole grains, ceil(L / (2 x workers)) of the L grains not yet taken, so
 * the first (the caller's, before any helper looks) is the longest; the
 * whole loop in one call when it has fewer than two grains. */
static size_t first_chunk(size_t n, size_t grain)
{
    const size_t grains = (n + grain - 1) / grain, first = (grains + 2 * NW - 1) / (2 * NW) * grain;
    return grains < 2 ? n : first < n ? first : n;
}

static void check_loop(fake_run *f, loop_arg *a, size_t n, size_t grain, size_t nested, bool wait)
{
    memset(a, 0, sizeof *a);
    a->f = f;
    a->n = n;
    a->nested = nested;
    a->wait_for_helper = wait;
    const size_t grains = (n + grain - 1) / grain;
    a->max_len = first_chunk(n, grain);
    a->grain = grain;
    sched_run_parallel_for(&f->run, &f->w[0], n, grain, loop_fn, a);
    ck_assert_msg(ld(&a->bad) == 0, "n %zu grain %zu: %u bad ranges or double hits", n, grain,
                  ld(&a->bad));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(ldc(&a->hits[i]) == 1, "n %zu grain %zu: item %zu run %u times", n, grain, i,
                      ldc(&a->hits[i]));
    ck_assert_uint_ge(ld(&a->calls), 1);
    ck_assert_uint_le(ld(&a->calls), grains < 2 ? 1 : grains);
    /* the first chunk is always the caller's (a loop run again keeps it on one core) */
    ck_assert_msg(atomic_load(&a->first_by) == 0, "n %zu grain %zu: chunk 0 ran on worker %d", n, grain,
                  atomic_load(&a->first_by));
    ck_assert_uint_eq(atomic_load(&a->first_end), a->max_len);
    /* the caller's chunks are one run from the start, the helpers' one from
     * the end: the same parts of a loop and of the next one like it stay on
     * the caller's core */
    size_t mine = 0;
    while (mine < n && ldc(&a->owner[mine]) == 0)
        mine++;
    for (size_t i = mine; i < n; i++)
        ck_assert_msg(ldc(&a->owner[i]) != 0, "n %zu grain %zu: item %zu ran on the caller after item %zu on worker %u", n,
                      grain, i, mine, ldc(&a->owner[mine]));
    ck_assert_uint_eq(ld(&a->nested_calls), nested ? ld(&a->calls) : 0);
    ck_assert_uint_eq(ld(&a->nested_bad), 0);
    /* The loop is off the board. A helper that saw it there just before
     * may still count itself in job_users for a moment (it then finds the
     * board empty and leaves): the count drops to zero soon, not at once. */
    sched_job *left = atomic_load(&f->run.job);
    ck_assert_ptr_null(left);
    for (int spins = 0; ld(&f->run.job_users) != 0 && spins < 1000000; spins++)
        sched_yield();
    ck_assert_uint_eq(ld(&f->run.job_users), 0);
}

static loop_arg the_arg; /* big: not on the stack */

START_TEST(parallel_for_covers_every_index_once)
{
    fake_run *f = malloc(sizeof *f);
    ck_assert_ptr_nonnull(f);
    fake_start(f);
    static const size_t cases[][2] = {{1, 1},   {2, 1},    {7, 3},      {16, 1},    {17, 1},     {100, 1},
                                      {100, 7}, {1000, 7}, {4096, 64},  {5, 10},    {10, 10},    {11, 10},
                                      {333, 1}, {MAXN, 1}, {MAXN, 997}, {MAXN, MAXN / 2}, {MAXN, MAXN}};
    for (int rep = 0; rep < 5; rep++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            check_loop(f, &the_arg, cases[i][0], cases[i][1], 0, false);
    /* several threads take part: the test thread holds its first chunk until
     * a helper has run one */
    unsigned helped = 0;
    check_loop(f, &the_arg, 64, 1, 0, true);
    for (int i = 1; i < NW; i++)
        helped += ld(&the_arg.by_worker[i]);
    ck_assert_uint_gt(helped, 0);
    ck_assert_uint_gt(ld(&the_arg.by_worker[0]), 0);
    /* a loop inside a chunk of another (on any worker) runs whole on its caller */
    for (int rep = 0; rep < 5; rep++)
        check_loop(f, &the_arg, 200, 1, 50, false);
    /* a helper counted idle that never comes: the caller takes every chunk,
     * an eighth (2 x 4 workers) of what is left each time, in whole grains,
     * down to single grains at the end */
    atomic_store(&f->stop, 1);
    for (int i = 1; i < NW; i++)
        pthread_join(f->helpers[i], NULL);
    static const size_t shrink[] = {13, 11, 10, 9, 8, 7, 6, 5, 4, 4, 3, 3, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1};
    check_loop(f, &the_arg, 100, 1, 0, false);
    ck_assert_uint_eq(the_arg.n_lens, UT_COUNTOF(shrink));
    for (size_t i = 0; i < UT_COUNTOF(shrink); i++)
        ck_assert_uint_eq(the_arg.lens[i], shrink[i]);
    static const size_t shrink7[] = {14, 14, 14, 14, 7, 7, 7, 7, 7, 7, 2}; /* 100 by grains of 7 (the last one short) */
    check_loop(f, &the_arg, 100, 7, 0, false);
    ck_assert_uint_eq(the_arg.n_lens, UT_COUNTOF(shrink7));
    for (size_t i = 0; i < UT_COUNTOF(shrink7); i++)
        ck_assert_uint_eq(the_arg.lens[i], shrink7[i]);
    /* no idle worker: the caller runs the whole loop at once */
    atomic_store(&f->run.idle, 0);
    memset(&the_arg, 0, sizeof the_arg);
    the_arg.f = f;
    the_arg.n = the_arg.max_len = 1000;
    sched_run_parallel_for(&f->run, &f->w[0], 1000, 1, loop_fn, &the_arg);
    ck_assert_uint_eq(ld(&the_arg.calls), 1);
    ck_assert_uint_eq(ld(&the_arg.by_worker[0]), 1);
    ck_assert_uint_eq(ld(&the_arg.bad), 0);
    fake_stop(f);
    free(f);
}
END_TEST

/* devices/cpu/par.h's side: dev_par_for goes through the thread's runner
 * when the loop has more than one grain, and runs serially without one. */
static void fake_par_run(void *self, size_t n, size_t grain, dev_par_fn fn, void *arg)
{
    fake_run *f = self;
    sched_run_parallel_for(&f->run, &f->w[my_worker], n, grain, fn, arg);
}

START_TEST(dev_par_for_through_a_runner)
{
    fake_run *f = malloc(sizeof *f);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(dev_par_width(), 1);
    memset(&the_arg, 0, sizeof the_arg);
    the_arg.n = the_arg.max_len = 500;
    dev_par_for(500, 1, loop_fn, &the_arg); /* no runner: one call */
    ck_assert_uint_eq(ld(&the_arg.calls), 1);
    fake_start(f);
    dev_par_runner r = {.run = fake_par_run, .self = f, .width = NW};
    dev_par_set_runner(&r);
    ck_assert_uint_eq(dev_par_width(), NW);
    for (size_t n = 0; n < 3000; n = n * 3 + 1) {
        memset(&the_arg, 0, sizeof the_arg);
        the_arg.f = f;
        the_arg.n = n;
        the_arg.max_len = first_chunk(n, 8);
        dev_par_for(n, 8, loop_fn, &the_arg);
        if (n <= 8) /* one grain or none: no runner, one call (none for n 0) */
            ck_assert_uint_eq(ld(&the_arg.calls), n ? 1 : 0);
        else
            ck_assert_uint_le(ld(&the_arg.calls), (n + 7) / 8);
        ck_assert_uint_eq(ld(&the_arg.bad), 0);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(ldc(&the_arg.hits[i]) == 1, "n %zu: item %zu run %u times", n, i, ldc(&the_arg.hits[i]));
    }
    dev_par_runner one = {.run = fake_par_run, .self = f, .width = 1};
    dev_par_set_runner(&one); /* width 1: serial, the runner is not called */
    ck_assert_uint_eq(dev_par_width(), 1);
    memset(&the_arg, 0, sizeof the_arg);
    the_arg.n = the_arg.max_len = 500;
    dev_par_for(500, 1, loop_fn, &the_arg);
    ck_assert_uint_eq(ld(&the_arg.calls), 1);
    dev_par_set_runner(NULL);
    ck_assert_uint_eq(dev_par_width(), 1);
    fake_stop(f);
    free(f);
}
END_TEST

/* Split or whole, timed (par.h): the median decides, not the mean (one
 * slow timing, a preemption, does not flip it); a key's first calls
 * alternate, split first, and once each way has its timings the choice
 * stays; another key keeps its own; a key without a slot splits. */
START_TEST(par_tune_picks_the_faster_way)
{
    const long long whole[5] = {100, 101, 99, 100, 102}, split[5] = {90, 95, 9000, 91, 92}; /* mean 1874 */
    ck_assert_int_eq(dev_par_tune_pick(whole, split, 5), 1);
    ck_assert_int_eq(dev_par_tune_pick(split, whole, 5), 0);
    ck_assert_int_eq(dev_par_tune_pick(whole, whole, 5), 0); /* ties: whole */
    ck_assert_int_eq(dev_par_tune_pick(whole, split, 0), 0);
    static const char a, b;
    dev_par_trial tr;
    /* alternating until each way has DEV_PAR_TUNE_TRIALS timings */
    for (int i = 0; i < 2 * DEV_PAR_TUNE_TRIALS; i++) {
        const int way = dev_par_tune_split(&a, &tr);
        ck_assert_int_eq(way, i % 2 == 0);
        ck_assert_ptr_nonnull(tr.slot);
        /* a: splitting is slower; b, below: faster */
        dev_par_tune_record(&a, way, way ? 2000 + i : 1000 + i);
    }
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(dev_par_tune_split(&a, &tr), 0);
        ck_assert_ptr_null(tr.slot); /* decided: not timed any more */
        dev_par_tune_done(&tr);
    }
    for (int i = 0; i < 2 * DEV_PAR_TUNE_TRIALS; i++)
        dev_par_tune_record(&b, i % 2, i % 2 ? 1000 : 2000);
    ck_assert_int_eq(dev_par_tune_split(&b, &tr), 1);
    ck_assert_int_eq(dev_par_tune_split(&a, &tr), 0);
    ck_assert_int_eq(dev_par_tune_split(NULL, &tr), 1);
    ck_assert_ptr_null(tr.slot);
    dev_par_tune_force(1); /* tests' way, whatever the timings said */
    ck_assert_int_eq(dev_par_tune_split(&a, &tr), 1);
    dev_par_tune_force(0);
    ck_assert_int_eq(dev_par_tune_split(&b, &tr), 0);
    dev_par_tune_force(-1);
    ck_assert_int_eq(dev_par_tune_split(&a, &tr), 0);
}
END_TEST

/* Several threads timing one key at once (TSan: no race), one choice after */
static const char tune_key;

static void *tune_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200; i++) {
        dev_par_trial tr;
        dev_par_tune_split(&tune_key, &tr);
        dev_par_tune_done(&tr);
    }
    return NULL;
}

START_TEST(par_tune_from_threads)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, tune_thread, NULL), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    dev_par_trial tr;
    const int way = dev_par_tune_split(&tune_key, &tr);
    ck_assert_ptr_null(tr.slot);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(dev_par_tune_split(&tune_key, &tr), way);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sched");
    TCase *tc = tcase_create("sched");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, policy_table);
    tcase_add_test(tc, config_sched_chooses_the_policy);
    tcase_add_loop_test(tc, many_runs_in_a_row, 0, 2);
    tcase_add_loop_test(tc, call_result_meets_another_value, 0, 3);
    tcase_add_loop_test(tc, interrupt_then_run_again, 0, 2);
    tcase_add_loop_test(tc, pool_shared_by_two_vms_on_two_threads, 0, 3);
    tcase_add_test(tc, pool_threads_keep_the_creators_cpus);
    tcase_add_test(tc, pool_wider_than_the_vm);
    tcase_add_test(tc, kernel_parallel_loops_match_one_thread);
    tcase_add_test(tc, parallel_for_covers_every_index_once);
    tcase_add_test(tc, dev_par_for_through_a_runner);
    tcase_add_test(tc, par_tune_picks_the_faster_way);
    tcase_add_test(tc, par_tune_from_threads);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
