/* test/fuzz/fuzz_session.c — libFuzzer target for the session API
 * (docs/coexec.md) driven from two host threads at once: the input is a
 * script, even bytes for one thread and odd bytes for the other, of feeds
 * (right and wrong type, unknown channel), fetches (right and wrong
 * direction), finishes and cancels, on one VM whose sessions follow each
 * other. Every call must return a documented status with a one-line message;
 * nothing may crash, leak, hang or race. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tfvm.h"
#include "test/unit/sum_feed.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tfvm_program *prog;
static tfvm_vm *vm;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    tfvm_error err;
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.threads = 2;
    if (tfvm_program_assemble(SUM_FEED, strlen(SUM_FEED), "sum.tfasm", NULL, &prog, &err) != TFVM_OK ||
        tfvm_vm_new(prog, &cfg, &vm) != TFVM_OK)
        abort();
    return 0;
}

typedef struct script {
    tfvm_session *s;
    const uint8_t *ops;
    size_t n;
} script;

static void check(tfvm_status st, const tfvm_session *s, bool ok_allowed)
{
    if (st == TFVM_OK) {
        if (!ok_allowed)
            __builtin_trap();
        return;
    }
    /* what a host meets: misuse, an ended session or run, a failed run */
    if (st != TFVM_ERR_ARGUMENT && st != TFVM_ERR_TYPE && st != TFVM_ERR_STUCK && st != TFVM_ERR_INTERRUPTED)
        __builtin_trap();
    const char *m = tfvm_session_errmsg(s);
    if (!m || strlen(m) >= 512)
        __builtin_trap();
}

static void *host(void *ud)
{
    script *sc = ud;
    for (size_t k = 0; k < sc->n; k++) {
        const uint8_t b = sc->ops[k];
        tfvm_value v = tfvm_i32(b >> 3), out;
        switch (b & 7) {
        case 0:
        case 1: check(tfvm_feed(sc->s, "x", &v), sc->s, true); break;
        case 2:
            v = tfvm_f32(1.5f);
            check(tfvm_feed(sc->s, "x", &v), sc->s, false);
            break;
        case 3: check(tfvm_feed(sc->s, b & 8 ? "nope" : "s", &v), sc->s, false); break;
        case 4:
        case 5:
            if (tfvm_fetch(sc->s, "s", &out) == TFVM_OK)
                tfvm_value_release(&out);
            break;
        case 6: check(tfvm_fetch(sc->s, b & 8 ? "x" : "nope", &out), sc->s, false); break;
        case 7:
            if (b & 8) {
                tfvm_session_cancel(sc->s);
            } else {
                tfvm_value r;
                tfvm_status st = tfvm_session_finish(sc->s, &r, 1);
                if (st != TFVM_OK && st != TFVM_ERR_ARGUMENT && st != TFVM_ERR_STUCK && st != TFVM_ERR_INTERRUPTED)
                    __builtin_trap();
            }
            break;
        }
    }
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    tfvm_value n = tfvm_i32(data[0] % 64);
    tfvm_session *s;
    if (tfvm_session_start(vm, NULL, &n, 1, &s) != TFVM_OK)
        __builtin_trap();
    /* even bytes for one thread, odd for the other */
    const size_t len = size - 1;
    uint8_t *even = malloc(len / 2 + 1), *odd = malloc(len / 2 + 1);
    script a = {s, even, 0}, b = {s, odd, 0};
    for (size_t k = 0; k < len; k++) {
        if (k % 2)
            odd[b.n++] = data[1 + k];
        else
            even[a.n++] = data[1 + k];
    }
    pthread_t t;
    if (pthread_create(&t, NULL, host, &b) != 0)
        __builtin_trap();
    host(&a);
    pthread_join(t, NULL);
    tfvm_session_cancel(s); /* whatever is left: the VM is ready for the next input */
    free(even);
    free(odd);
    return 0;
}
