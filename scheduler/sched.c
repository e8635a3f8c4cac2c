/* scheduler/sched.c — the policies (one table) and the state of a run they
 * share: the deterministic policy (one worker, LIFO, nothing to find once
 * its stack is empty) and work stealing (private stacks, donated work,
 * Chase–Lev deques, spinning then parking, lock-free termination). */
#include "sched.h"

#include <sched.h>
#include <string.h>
#include <time.h>

#define SPINS_BEFORE_PARK 2000
/* An idle worker of a run with several and no host looks this many rounds
 * (a pause of some 25 ns each, ~0.7 ms in all) before it parks: layers
 * that leave the second core idle for 0.1-0.5 ms (a global pool, a
 * classifier, the serial ops of a squeeze-excite) had it park 4-11 times a
 * run at 2000 rounds, and each wake-up costs the next parallel loop its
 * helper (mobilenet_v3_small and efficientnet_b0 at batch 1 on 2 threads:
 * 0.87-0.91x the time with the longer look). With a host in the run (a
 * session), whose thread needs a core while the graph waits for it, the
 * workers look SPINS_BEFORE_PARK rounds. */
#define SPINS_IN_RUN 20000

static inline void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

bool sched_stack_grow(sched_worker *w, const tfvm_allocator *a)
{
    if (w->lo_stack) { /* donated from the bottom: slide down first */
        memmove(w->stack, w->stack + w->lo_stack, (w->n_stack - w->lo_stack) * sizeof *w->stack);
        w->n_stack -= w->lo_stack;
        w->lo_stack = 0;
        if (w->n_stack < w->cap_stack)
            return true;
    }
    size_t cap = w->cap_stack ? w->cap_stack * 2 : 256;
    sched_item *s = ut_realloc(a, w->stack, w->cap_stack * sizeof *s, cap * sizeof *s);
    if (!s)
        return false;
    w->stack = s;
    w->cap_stack = cap;
    return true;
}

/* ---- Runs ---------------------------------------------------------------------------- */

tfvm_status sched_run_init(sched_run *r, sched_worker **workers, uint32_t n, const tfvm_allocator *a)
{
    memset(r, 0, sizeof *r);
    r->workers = workers;
    r->n = n;
    r->alloc = a;
    pthread_mutex_init(&r->park_lock, NULL);
    pthread_cond_init(&r->park_cond, NULL);
    return TFVM_OK;
}

void sched_run_fini(sched_run *r)
{
    ut_free(r->alloc, r->inbox, r->cap_inbox * sizeof *r->inbox);
    pthread_mutex_destroy(&r->park_lock);
    pthread_cond_destroy(&r->park_cond);
}

void sched_run_reset(sched_run *r)
{
    atomic_store(&r->idle, r->n - 1);
    atomic_store(&r->done, 0);
    atomic_store(&r->job, NULL);
    atomic_store(&r->held, 0);
    atomic_store(&r->quiet, 0);
    for (uint32_t i = 0; i < r->n; i++)
        atomic_store(&r->workers[i]->busy, i == 0);
}

void sched_wake_all(sched_run *r)
{
    pthread_mutex_lock(&r->park_lock);
    r->wake_seq++;
    pthread_cond_broadcast(&r->park_cond);
    pthread_mutex_unlock(&r->park_lock);
}

void sched_wake_one(sched_run *r)
{
    pthread_mutex_lock(&r->park_lock);
    r->wake_seq++;
    pthread_cond_signal(&r->park_cond);
    pthread_mutex_unlock(&r->park_lock);
}

void sched_run_stop(sched_run *r)
{
    atomic_store(&r->done, 1);
    if (atomic_load(&r->sleepers))
        sched_wake_all(r);
}

/* ---- The host's inbox --------------------------------------------------------------------- */

bool sched_inject(sched_run *r, const sched_item *it)
{
    pthread_mutex_lock(&r->park_lock);
    if (r->inbox_head && r->n_inbox == r->cap_inbox) { /* slide down first */
        memmove(r->inbox, r->inbox + r->inbox_head, (r->n_inbox - r->inbox_head) * sizeof *r->inbox);
        r->n_inbox -= r->inbox_head;
        r->inbox_head = 0;
    }
    if (r->n_inbox == r->cap_inbox) {
        size_t cap = r->cap_inbox ? 2 * r->cap_inbox : 16;
        sched_item *a = ut_realloc(r->alloc, r->inbox, r->cap_inbox * sizeof *a, cap * sizeof *a);
        if (!a) {
            pthread_mutex_unlock(&r->park_lock);
            return false;
        }
        r->inbox = a;
        r->cap_inbox = cap;
    }
    r->inbox[r->n_inbox++] = *it;
    atomic_fetch_add(&r->inboxed, 1);
    atomic_store(&r->quiet, 0);
    r->wake_seq++;
    pthread_cond_broadcast(&r->park_cond);
    pthread_mutex_unlock(&r->park_lock);
    sched_pool_want(atomic_load_explicit(&r->pool, memory_order_relaxed));
    return true;
}

void sched_inbox_clear(sched_run *r, void (*drop)(void *ud, const void *item), void *ud)
{
    pthread_mutex_lock(&r->park_lock);
    for (size_t k = r->inbox_head; k < r->n_inbox; k++)
        drop(ud, &r->inbox[k]);
    r->inbox_head = r->n_inbox = 0;
    atomic_store(&r->inboxed, 0);
    pthread_mutex_unlock(&r->park_lock);
}

/* Under park_lock: the oldest injected activation, which ends a hold. An idle
 * worker (`was_idle`) stops being idle first, so that the run never looks
 * quiet or over while the activation is in its hands. */
static bool take_inbox_locked(sched_run *r, sched_worker *w, sched_item *out, bool was_idle)
{
    if (r->inbox_head == r->n_inbox)
        return false;
    *out = r->inbox[r->inbox_head++];
    atomic_fetch_sub(&r->inboxed, 1);
    if (r->inbox_head == r->n_inbox)
        r->inbox_head = r->n_inbox = 0;
    if (was_idle)
        atomic_fetch_sub(&r->idle, 1);
    atomic_store_explicit(&w->busy, 1, memory_order_seq_cst);
    sched_serve_as(w, memory_order_seq_cst);
    atomic_fetch_sub(&r->held, 1);
    return true;
}

/* An idle worker looks here on every round of its spinning: the lock only
 * when something is there (taking it each round made two spinning workers
 * of a session waiting for its host contend for it with each other and the
 * host's feeds). */
static bool take_inbox(sched_run *r, sched_worker *w, sched_item *out, bool was_idle)
{
    if (!atomic_load(&r->held) || !atomic_load_explicit(&r->inboxed, memory_order_acquire))
        return false;
    pthread_mutex_lock(&r->park_lock);
    bool got = take_inbox_locked(r, w, out, was_idle);
    pthread_mutex_unlock(&r->park_lock);
    return got;
}

/* Every worker is idle: the run is over, unless firings wait for the host;
 * then it is quiet (and the host hears of it). Returns whether it is over.
 * With the host in the run the decision is made under park_lock, where the
 * inbox is taken from: a worker that takes an activation stops being idle
 * and ends a hold in one step there, so `idle` and `held` are read as one
 * state (read apart, the hold could be seen ended and the worker that ended
 * it still idle: the run would end under it). */
static bool all_idle(sched_run *r)
{
    if (!r->on_quiet) { /* no host: nothing is ever held */
        atomic_store(&r->done, 1);
        sched_wake_all(r);
        return true;
    }
    pthread_mutex_lock(&r->park_lock);
    bool still = atomic_load(&r->idle) == r->n;
    bool over = still && !atomic_load(&r->held);
    bool quiet = still && !over && r->inbox_head == r->n_inbox;
    if (over) {
        atomic_store(&r->done, 1);
        r->wake_seq++;
        pthread_cond_broadcast(&r->park_cond);
    }
    if (quiet)
        atomic_store(&r->quiet, 1);
    pthread_mutex_unlock(&r->park_lock);
    if (quiet)
        r->on_quiet(r->quiet_ud);
    return over;
}

/* ---- Deterministic --------------------------------------------------------------------- */

/* The only worker's stack is empty: nothing is in flight, and the run is
 * over unless firings wait for the host; then it waits for the host's
 * activations. */
static bool serial_find_work(sched_run *r, sched_worker *w, sched_item *out)
{
    if (!atomic_load(&r->held))
        return false;
    pthread_mutex_lock(&r->park_lock);
    atomic_fetch_add(&r->sleepers, 1); /* before looking at done: sched_run_stop wakes sleepers */
    for (;;) {
        if (take_inbox_locked(r, w, out, false)) {
            atomic_fetch_sub(&r->sleepers, 1);
            pthread_mutex_unlock(&r->park_lock);
            return true;
        }
        if (atomic_load(&r->done))
            break;
        if (!atomic_load(&r->quiet)) {
            atomic_store(&r->quiet, 1);
            pthread_mutex_unlock(&r->park_lock);
            if (r->on_quiet)
                r->on_quiet(r->quiet_ud);
            /* a host that feeds each step feeds soon: look for a while
             * before sleeping (a wake-up costs tens of microseconds) */
            for (unsigned spins = 0; spins < SPINS_BEFORE_PARK && atomic_load(&r->quiet) && !atomic_load(&r->done);
                 spins++)
                spin_pause();
            pthread_mutex_lock(&r->park_lock);
            continue;
        }
        pthread_cond_wait(&r->park_cond, &r->park_lock);
    }
    atomic_fetch_sub(&r->sleepers, 1);
    pthread_mutex_unlock(&r->park_lock);
    return false;
}

/* ---- Work stealing ---------------------------------------------------------------------- */

static bool any_work(const sched_run *r)
{
    if (atomic_load_explicit(&r->job, memory_order_relaxed) || r->inbox_head != r->n_inbox)
        return true;
    for (uint32_t i = 0; i < r->n; i++)
        if (dq_size(&r->workers[i]->dq) > 0)
            return true;
    return false;
}

/* Out of local work: our deque, then steal, help with a kernel's loop, spin,
 * park. Every worker idle means no token is in flight anywhere (a worker
 * only goes idle with no work of its own, and idle workers make no tokens),
 * so quiescence is detected without any lock on the firing path. */
static bool steal_join(sched_run *r, sched_worker *w, sched_item *out);

static bool steal_find_work(sched_run *r, sched_worker *w, sched_item *out)
{
    if (dq_pop(&w->dq, out))
        return true;
    /* Idle: nothing of ours is half-updated, so sharing needs no answer. */
    atomic_store_explicit(&w->busy, 0, memory_order_seq_cst);
    sched_serve(w);
    if (atomic_fetch_add(&r->idle, 1) + 1 == r->n && all_idle(r))
        return false;
    return steal_join(r, w, out);
}

/* An idle worker (counted in r->idle) looks for work until the run ends. */
static bool steal_join(sched_run *r, sched_worker *w, sched_item *out)
{
    uint32_t n = r->n;
    const unsigned look = r->on_quiet ? SPINS_BEFORE_PARK : SPINS_IN_RUN;
    for (unsigned spins = 0;; spins++) {
        if (atomic_load_explicit(&r->done, memory_order_acquire))
            return false;
        if (sched_help_job(r))
            spins = 0;
        if (take_inbox(r, w, out, true))
            return true;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t vi = (w->victim + k) % n; /* the last victim first, then the next ones */
            sched_worker *v = r->workers[vi];
            if (v == w || dq_size(&v->dq) == 0)
                continue;
            atomic_fetch_sub(&r->idle, 1); /* not idle while holding stolen work */
            int got = dq_steal(&v->dq, out);
            if (got == DQ_OK) {
                /* busy again: requests made while idle are read now */
                atomic_store_explicit(&w->busy, 1, memory_order_seq_cst);
                sched_serve_as(w, memory_order_seq_cst);
                w->steals++;
                w->victim = vi;
                return true;
            }
            if (atomic_fetch_add(&r->idle, 1) + 1 == n && all_idle(r))
                return false;
        }
        if (spins < look) {
            spin_pause(); /* leave the core's other hardware thread its share */
            continue;
        }
        spins = 0;
        /* Park until a donation wakes us (or a bounded wait passes: a
         * wake-up that raced our going to sleep costs at most that long). */
        pthread_mutex_lock(&r->park_lock);
        atomic_fetch_add(&r->sleepers, 1);
        uint64_t seq = r->wake_seq;
        bool timed_out = false;
        if (!any_work(r) && !atomic_load(&r->done)) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += 1000000;
            if (until.tv_nsec >= 1000000000) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000;
            }
            w->parks++;
            while (seq == r->wake_seq && !atomic_load(&r->done))
                if (pthread_cond_timedwait(&r->park_cond, &r->park_lock, &until) != 0) {
                    timed_out = seq == r->wake_seq;
                    break;
                }
        }
        atomic_fetch_sub(&r->sleepers, 1);
        pthread_mutex_unlock(&r->park_lock);
        /* Nobody woke us: look once, then park again without spinning. A
         * run that waits long for its host (a session between steps) would
         * otherwise spin a few tens of microseconds every millisecond on
         * each worker, beside the host's own work. */
        if (timed_out)
            spins = look;
    }
}

/* Work went to the deque: the pool's threads are wanted, a parked worker woken */
static void offered(sched_run *r)
{
    sched_pool_want(atomic_load_explicit(&r->pool, memory_order_relaxed));
    if (atomic_load_explicit(&r->sleepers, memory_order_relaxed))
        sched_wake_one(r);
}

/* When some worker is idle and nothing waits in our deque: the oldest private
 * activation (the biggest piece of work, depth-first) goes to the deque, where
 * thieves take it, and a parked worker is woken for it. */
static void steal_offer(sched_run *r, sched_worker *w)
{
    w->since_donate = 0;
    if (w->n_stack == w->lo_stack || !atomic_load_explicit(&r->idle, memory_order_relaxed) || dq_size(&w->dq) > 0)
        return;
    if (!dq_push(&w->dq, &w->stack[w->lo_stack]))
        return; /* no memory for the deque: keep it */
    if (++w->lo_stack == w->n_stack)
        w->lo_stack = w->n_stack = 0;
    offered(r);
}

/* Before a long stretch without firings (a loop run as a frame): every
 * private activation, oldest first, goes to the deque, for a worker idle
 * now or later in the stretch (one offer would give a thief one activation
 * of the several that make up the work beside the frame), and a parked
 * worker is woken for them. */
static void steal_offer_all(sched_run *r, sched_worker *w)
{
    w->since_donate = 0;
    if (w->n_stack == w->lo_stack)
        return;
    while (w->lo_stack < w->n_stack && dq_push(&w->dq, &w->stack[w->lo_stack]))
        w->lo_stack++;
    if (w->lo_stack == w->n_stack)
        w->lo_stack = w->n_stack = 0;
    if (atomic_load_explicit(&r->idle, memory_order_relaxed))
        offered(r);
}

/* ---- The table ----------------------------------------------------------------------------- */

static const sched_policy policies[] = {
    {.name = "workstealing",
     .summary = "one worker per core, private LIFO stacks, Chase-Lev deques, thieves take the oldest",
     .multi = true,
     .find_work = steal_find_work,
     .join = steal_join,
     .offer = steal_offer,
     .offer_all = steal_offer_all},
    {.name = "deterministic",
     .summary = "one thread, LIFO (depth-first), the same firing order every run",
     .multi = false,
     .find_work = serial_find_work,
     .join = serial_find_work,
     .offer = NULL,
     .offer_all = NULL},
};

const sched_policy *sched_policy_find(const char *name)
{
    for (size_t i = 0; name && i < UT_COUNTOF(policies); i++)
        if (strcmp(policies[i].name, name) == 0)
            return &policies[i];
    return NULL;
}

const sched_policy *sched_policy_at(size_t i) { return i < UT_COUNTOF(policies) ? &policies[i] : NULL; }
