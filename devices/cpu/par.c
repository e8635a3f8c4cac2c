/* devices/cpu/par.c — the calling thread's intra-op runner (par.h). */
#include "devices/cpu/par.h"
#include "util/util.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local const dev_par_runner *par_runner;

void dev_par_set_runner(const dev_par_runner *r) { par_runner = r; }

unsigned dev_par_width(void) { return par_runner && par_runner->width > 1 ? par_runner->width : 1; }

void dev_par_for(size_t n, size_t grain, dev_par_fn fn, void *arg)
{
    if (grain == 0)
        grain = 1;
    if (n == 0)
        return;
    if (n <= grain || dev_par_width() == 1) {
        fn(arg, 0, n);
        return;
    }
    par_runner->run(par_runner->self, n, grain, fn, arg);
}

/* ---- Split or whole, timed --------------------------------------------------------- */
#define TUNE_SLOTS 64

typedef struct dev_par_slot {
    _Atomic(const void *) key;
    atomic_uint trials[2];                        /* timings begun each way */
    _Atomic long long ns[2][DEV_PAR_TUNE_TRIALS]; /* in the order they began */
    atomic_int choice;                            /* 0 undecided, 1 whole, 2 split */
} tune_slot;

static tune_slot tune_slots[TUNE_SLOTS];

/* key's slot, the first free one claimed when it has none (slots are
 * claimed in order and never freed: a key's is found before the first free
 * one); NULL when all are others' */
static tune_slot *tune_slot_of(const void *key)
{
    for (unsigned i = 0; i < TUNE_SLOTS; i++) {
        tune_slot *s = &tune_slots[i];
        const void *k = atomic_load_explicit(&s->key, memory_order_acquire);
        if (k == NULL && atomic_compare_exchange_strong(&s->key, &k, key))
            return s;
        if (k == key)
            return s;
    }
    return NULL;
}

static int cmp_ll(const void *a, const void *b)
{
    const long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static long long median(const long long *v, unsigned n)
{
    long long s[DEV_PAR_TUNE_TRIALS];
    n = n < DEV_PAR_TUNE_TRIALS ? n : DEV_PAR_TUNE_TRIALS;
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_ll);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

int dev_par_tune_pick(const long long *whole, const long long *split, unsigned n)
{
    return n > 0 && median(split, n) < median(whole, n);
}

static atomic_int tune_forced = -1;

void dev_par_tune_force(int way) { atomic_store(&tune_forced, way < 0 ? -1 : way != 0); }

int dev_par_tune_split(const void *key, dev_par_trial *tr)
{
    tr->slot = NULL;
    tr->way = 1;
    const int forced = atomic_load_explicit(&tune_forced, memory_order_relaxed);
    if (forced >= 0)
        return tr->way = forced;
    tune_slot *s = key ? tune_slot_of(key) : NULL;
    if (!s)
        return 1;
    const int choice = atomic_load_explicit(&s->choice, memory_order_relaxed);
    if (choice)
        return tr->way = choice == 2;
    /* the way with fewer timings begun, split first */
    const unsigned w = atomic_load_explicit(&s->trials[0], memory_order_relaxed);
    const unsigned sp = atomic_load_explicit(&s->trials[1], memory_order_relaxed);
    tr->way = sp <= w;
    tr->slot = s;
    tr->t0 = (long long)ut_now_ns();
    return tr->way;
}

/* A timing of one way of s's loop; the choice once both ways have theirs */
static void tune_record(tune_slot *s, int way, long long ns)
{
    if (atomic_load_explicit(&s->choice, memory_order_relaxed))
        return;
    const unsigned i = atomic_fetch_add(&s->trials[way != 0], 1);
    if (i < DEV_PAR_TUNE_TRIALS)
        atomic_store_explicit(&s->ns[way != 0][i], ns, memory_order_relaxed);
    if (i + 1 != DEV_PAR_TUNE_TRIALS || atomic_load(&s->trials[way == 0]) < DEV_PAR_TUNE_TRIALS)
        return;
    /* this way's last timing with all of the other's begun: choose (one
     * still being written counts as 0, for a choice that stays a guess) */
    long long t[2][DEV_PAR_TUNE_TRIALS];
    for (int k = 0; k < 2; k++)
        for (unsigned j = 0; j < DEV_PAR_TUNE_TRIALS; j++)
            t[k][j] = atomic_load_explicit(&s->ns[k][j], memory_order_relaxed);
    int none = 0;
    atomic_compare_exchange_strong(&s->choice, &none, dev_par_tune_pick(t[0], t[1], DEV_PAR_TUNE_TRIALS) ? 2 : 1);
}

void dev_par_tune_record(const void *key, int way, long long ns)
{
    tune_slot *s = key ? tune_slot_of(key) : NULL;
    if (s)
        tune_record(s, way, ns);
}

void dev_par_tune_done(const dev_par_trial *tr)
{
    if (tr->slot)
        tune_record(tr->slot, tr->way, (long long)ut_now_ns() - tr->t0);
}
