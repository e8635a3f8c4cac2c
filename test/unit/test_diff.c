/* test/unit/test_diff.c — differential testing of the graph compiler: random
 * programs (test/gen/gen.h) are run by a reference tree-walking evaluator of
 * the typed AST (test/gen/eval.h) and, compiled with and without
 * optimization, by the VM; results, or the kind of run-time error, must be
 * identical, on the deterministic scheduler and on 4 worker threads; and
 * again with --overflow=trap against the reference's checked + - *.
 * TFVM_DIFF_N programs (default 300; `make fuzz-compiler` runs 10000) from
 * seed TFVM_DIFF_SEED (default fixed). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../gen/eval.h"
#include "../gen/gen.h"
#include "testutil.h"
#include "tfvm.h"

static unsigned long env_ul(const char *name, unsigned long dflt)
{
    const char *s = getenv(name);
    return s && *s ? strtoul(s, NULL, 0) : dflt;
}

typedef struct outcome {
    tfvm_status code;
    char msg[512];
    int32_t value;
    unsigned kinds; /* reference: every failure it met (EV_*) */
} outcome;

static void run_reference(cc *C, int32_t x, int32_t y, bool trap, outcome *o)
{
    ev E = {.max_steps = 50000000, .trap = trap};
    ev_val args[2] = {{.dtype = TFVM_I32, .u.i32 = x}, {.dtype = TFVM_I32, .u.i32 = y}};
    ev_val r;
    memset(o, 0, sizeof *o);
    if (!ev_call(&E, C->mod.entry, args, &r)) {
        o->code = E.code;
        snprintf(o->msg, sizeof o->msg, "%s", E.msg);
    } else if (E.kinds) {
        o->code = TFVM_ERR_ARITH;
        o->kinds = E.kinds;
        snprintf(o->msg, sizeof o->msg, "%s%s%s%s", E.kinds & EV_DIV0 ? "integer division by zero; " : "",
                 E.kinds & EV_MOD0 ? "integer modulo by zero; " : "", E.kinds & EV_CAST ? "cannot cast; " : "",
                 E.kinds & EV_OVF ? "overflow; " : "");
    } else {
        o->code = TFVM_OK;
        o->value = r.u.i32;
    }
}

/* A watchdog interrupts a run that takes more than RUN_LIMIT seconds: a
 * compiler bug can make a loop or a recursion endless. */
#define RUN_LIMIT 20

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tfvm_vm *vm;      /* the run in progress, or NULL */
    unsigned long gen;
    bool stop;
} dog = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, false};

static void *watchdog(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&dog.mu);
    while (!dog.stop) {
        if (!dog.vm) {
            pthread_cond_wait(&dog.cv, &dog.mu);
            continue;
        }
        unsigned long g = dog.gen;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t)RUN_LIMIT;
        int rc = 0;
        while (!dog.stop && dog.gen == g && rc == 0)
            rc = pthread_cond_timedwait(&dog.cv, &dog.mu, &ts);
        if (rc == ETIMEDOUT && dog.gen == g && dog.vm) {
            tfvm_interrupt(dog.vm); /* still the same run after RUN_LIMIT seconds */
            while (!dog.stop && dog.gen == g)
                pthread_cond_wait(&dog.cv, &dog.mu);
        }
    }
    pthread_mutex_unlock(&dog.mu);
    return NULL;
}

static void dog_watch(tfvm_vm *vm)
{
    pthread_mutex_lock(&dog.mu);
    dog.vm = vm;
    dog.gen++;
    pthread_cond_broadcast(&dog.cv);
    pthread_mutex_unlock(&dog.mu);
}

/* threads 0: the deterministic single-thread scheduler; else that many workers. */
static void run_vm(const tfvm_program *p, int threads, int32_t x, int32_t y, outcome *o)
{
    memset(o, 0, sizeof *o);
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.max_contexts = 2000000;
    cfg.deterministic = threads == 0;
    cfg.threads = threads ? threads : 1;
    tfvm_vm *vm;
    if (tfvm_vm_new(p, &cfg, &vm) != TFVM_OK) {
        o->code = TFVM_ERR_NOMEM;
        return;
    }
    tfvm_value args[2] = {tfvm_i32(x), tfvm_i32(y)}, res[1];
    dog_watch(vm);
    o->code = tfvm_run(vm, NULL, args, 2, res, 1);
    dog_watch(NULL);
    if (o->code == TFVM_OK)
        o->value = res[0].as.i32;
    else
        snprintf(o->msg, sizeof o->msg, "%s", tfvm_errmsg(vm));
    tfvm_vm_free(vm);
}

/* Same value, or the same error: the code, and the kind at the end of the
 * VM's message ("div_3_7 (DIV) at [f0@2]: integer division by zero") must be
 * one of the failures the reference met (test/gen/eval.h: which one fires
 * first depends on the firing order). */
static bool same(const outcome *ref, const outcome *got, const char *src)
{
    if (ref->code != got->code)
        return false;
    if (ref->code == TFVM_OK)
        return ref->value == got->value;
    if (ref->code == TFVM_ERR_ARITH) {
        size_t n = strlen(got->msg);
        bool div = n >= 24 && strcmp(got->msg + n - 24, "integer division by zero") == 0;
        bool mod = n >= 22 && strcmp(got->msg + n - 22, "integer modulo by zero") == 0;
        bool cast = strstr(got->msg, ": cannot cast ") != NULL;
        /* The reference stops at its first error in its own evaluation order;
         * the VM fires independent instructions in another order (and in
         * parallel mode in no fixed order), so it may meet another of the
         * program's arithmetic errors first. Any of them is a right answer,
         * if the program has that operation at all. */
        bool ovf = n >= 8 && strcmp(got->msg + n - 8, "overflow") == 0;
        return (div && ((ref->kinds & EV_DIV0) || strstr(src, " / "))) ||
               (mod && ((ref->kinds & EV_MOD0) || strstr(src, " % "))) ||
               (cast && ((ref->kinds & EV_CAST) || strstr(src, "cast<"))) || (ovf && (ref->kinds & EV_OVF));
    }
    return true;
}

static const int32_t arg_pool[] = {0, 1, 2, 3, -1, -2, 5, 7, 10, -7, 100, -100, 2147483647, -2147483647 - 1};

START_TEST(differential)
{
    unsigned long n = env_ul("TFVM_DIFF_N", 1000);
    uint64_t seed = env_ul("TFVM_DIFF_SEED", 20260101);
    gen G;
    memset(&G, 0, sizeof G);
    unsigned long ok_runs = 0, err_runs = 0, trap_runs = 0;
    pthread_t dog_thread;
    ck_assert_int_eq(pthread_create(&dog_thread, NULL, watchdog, NULL), 0);
    for (unsigned long i = 0; i < n; i++) {
        uint64_t s = seed * 1000003u + i;
        gen_program(&G, s);
        cc C;
        tfvm_error err;
        if (cc_front(&C, G.buf, G.len, "gen.tfg", NULL, NULL, &err) != TFVM_OK) {
            printf("program %lu (seed %llu) does not compile: %s\n%s\n", i, (unsigned long long)s, err.message,
                   G.buf);
            fflush(stdout);
            ck_abort_msg("generated program rejected by the front end");
        }
        tfvm_program *prog[3] = {NULL, NULL, NULL}; /* -O0, -O1, -O1 --overflow=trap */
        for (int opt = 0; opt < 3; opt++) {
            tfvm_compile_options o;
            tfvm_compile_options_init(&o);
            o.opt_level = opt ? 1 : 0;
            o.overflow_trap = opt == 2;
            if (tfvm_program_compile(G.buf, G.len, "gen.tfg", &o, NULL, &prog[opt], &err) != TFVM_OK) {
                printf("program %lu (seed %llu) -O%d:\n%s\n%s\n", i, (unsigned long long)s, opt, G.buf, err.message);
                fflush(stdout);
            ck_abort_msg("compile failed");
            }
        }
        for (int a = 0; a < 3; a++) {
            uint64_t r = s * 31 + (uint64_t)a;
            int32_t x = arg_pool[r % UT_COUNTOF(arg_pool)];
            int32_t y = arg_pool[(r / 7) % UT_COUNTOF(arg_pool)];
            outcome want, got;
            run_reference(&C, x, y, false, &want);
            if (want.code == TFVM_ERR_LIMIT)
                continue; /* the reference gave up (never in practice) */
            /* -O0 and -O1 on the deterministic scheduler, -O1 on 4 worker threads */
            /* -O0 and -O1 deterministic, -O1 on 2 worker threads, and every
             * fourth program also on 4 (more workers than cores) */
            for (int v = 0; v < (i % 4 ? 3 : 4); v++) {
                int opt = v == 0 ? 0 : 1, threads = v == 2 ? 2 : v == 3 ? 4 : 0;
                run_vm(prog[opt], threads, x, y, &got);
                if (!same(&want, &got, G.buf)) {
                    printf("MISMATCH program %lu (seed %llu) -O%d %s args %d %d\n%s\nreference: %s %d %s\nvm:        "
                           "%s %d %s\n",
                           i, (unsigned long long)s, opt,
                           threads == 4 ? "4 threads" : threads ? "2 threads" : "deterministic", x, y, G.buf,
                           tfvm_status_name(want.code), want.value, want.msg, tfvm_status_name(got.code), got.value,
                           got.msg);
                    fflush(stdout);
            ck_abort_msg("the VM and the reference evaluator disagree");
                }
            }
            if (want.code == TFVM_OK)
                ok_runs++;
            else
                err_runs++;
            /* --overflow=trap: + - * that overflow are errors, deterministic -O1 */
            outcome trapped;
            run_reference(&C, x, y, true, &trapped);
            if (trapped.code == TFVM_ERR_LIMIT)
                continue;
            run_vm(prog[2], 0, x, y, &got);
            if (!same(&trapped, &got, G.buf)) {
                printf("MISMATCH program %lu (seed %llu) -O1 --overflow=trap args %d %d\n%s\nreference: %s %d %s\n"
                       "vm:        %s %d %s\n",
                       i, (unsigned long long)s, x, y, G.buf, tfvm_status_name(trapped.code), trapped.value,
                       trapped.msg, tfvm_status_name(got.code), got.value, got.msg);
                fflush(stdout);
                ck_abort_msg("the VM and the reference evaluator disagree (--overflow=trap)");
            }
            trap_runs += trapped.code == TFVM_ERR_ARITH && (trapped.kinds & EV_OVF);
        }
        tfvm_program_free(prog[0]);
        tfvm_program_free(prog[1]);
        tfvm_program_free(prog[2]);
        cc_release(&C);
    }
    pthread_mutex_lock(&dog.mu);
    dog.stop = true;
    pthread_cond_broadcast(&dog.cv);
    pthread_mutex_unlock(&dog.mu);
    pthread_join(dog_thread, NULL);
    free(G.buf);
    printf("differential: %lu programs, %lu runs with a value, %lu with a run-time error (each run -O0, -O1, -O1 on "
           "2 threads, and every fourth program -O1 on 4 threads); with --overflow=trap, %lu overflow\n",
           n, ok_runs, err_runs, trap_runs);
    ck_assert_msg(ok_runs > err_runs, "too few runs produce a value: the generator needs tuning");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("diff");
    TCase *tc = tcase_create("differential");
    unsigned long n = env_ul("TFVM_DIFF_N", 1000);
    tcase_set_timeout(tc, (double)(60 + n / 10));
    tcase_add_test(tc, differential);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
