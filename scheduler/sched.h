/* scheduler/sched.h — who runs a ready activation, and when. The VM decides
 * what is ready (matching); the scheduler owns the workers' queues, the
 * threads, and what a worker does when it runs out of work. Three pieces:
 *  - policies (sched_policy): one interface, one table (sched.c), chosen by
 *    name (--sched, tfvm_config.sched); the VM has one run loop that calls a
 *    policy only when a worker's own work runs out and, every few thousand
 *    firings, to offer work to idle workers;
 *  - the pool (pool.c): worker threads that persist across runs and may be
 *    shared by several VMs (tfvm_pool); a run wakes them, it does not make
 *    them; and the parallel loops of kernels (devices/cpu/par.h) run on them;
 *  - mechanics: deque.h (Chase–Lev) and topology.c (hwloc: physical cores). */
#ifndef TFVM_SCHED_H
#define TFVM_SCHED_H

#include <pthread.h>
#include <stdatomic.h>

#include "devices/cpu/par.h"
#include "scheduler/deque.h"
#include "util/util.h"

/* ---- A worker's scheduling state ------------------------------------------------
 * The VM's worker embeds one. Its private LIFO stack (the VM pushes and pops
 * it with plain loads and stores) and the deque it donates from belong to it;
 * other workers touch only the deque's top end and the sharing handshake. */
typedef struct sched_worker {
    sched_item *stack;       /* older ready activations, private (LIFO); work is
                                donated to the deque from lo_stack up (oldest first) */
    size_t n_stack, cap_stack, lo_stack;
    uint32_t since_donate;   /* firings since the last offer */
    uint32_t id;
    uint32_t victim;         /* next worker to try stealing from */
    sched_deque dq;          /* activations offered to thieves (stealing policies) */
    uint64_t steals, parks;
    /* Sharing handshake (vm_ctx_share): requests by other workers, the last
     * request this worker answered, and whether it is running activations. */
    atomic_uint share_req, share_ack;
    unsigned share_seen;
    atomic_int busy;
} sched_worker;

/* Between two firings, and while waiting for anything: answer the sharing
 * requests made since the last time. Reading a request (acquire) makes the
 * requester's mark visible to everything this worker does next; the answer
 * (release) makes this worker's earlier plain updates visible to the
 * requester. `order` is seq_cst where a worker becomes busy: with the
 * requester's seq_cst request and its seq_cst look at `busy`, one of the two
 * always sees the other. */
static inline void sched_serve_as(sched_worker *w, memory_order order)
{
    unsigned r = atomic_load_explicit(&w->share_req, order);
    if (r != w->share_seen) {
        w->share_seen = r;
        atomic_store_explicit(&w->share_ack, r, memory_order_release);
    }
}
static inline void sched_serve(sched_worker *w) { sched_serve_as(w, memory_order_acquire); }

/* Pushes an item on the private stack. false: out of memory. */
bool sched_stack_grow(sched_worker *w, const tfvm_allocator *a);
static inline bool sched_stack_push(sched_worker *w, const tfvm_allocator *a, const sched_item *it)
{
    if (w->n_stack == w->cap_stack && !sched_stack_grow(w, a))
        return false;
    w->stack[w->n_stack++] = *it;
    return true;
}
static inline bool sched_stack_pop(sched_worker *w, sched_item *it)
{
    if (w->n_stack == w->lo_stack)
        return false;
    *it = w->stack[--w->n_stack];
    if (w->n_stack == w->lo_stack)
        w->lo_stack = w->n_stack = 0;
    return true;
}

/* ---- A run, as the scheduler sees it ------------------------------------------- */
typedef struct sched_job sched_job; /* a kernel's parallel loop (pool.c) */
typedef struct sched_pool sched_pool;

typedef struct sched_run {
    sched_worker **workers;  /* n of them; [0] runs on the caller's thread */
    uint32_t n;
    const tfvm_allocator *alloc;
    atomic_uint idle;        /* workers that found no work anywhere */
    atomic_uint sleepers;    /* parked workers */
    atomic_int done;         /* quiescent, failed or interrupted: workers leave */
    pthread_mutex_t park_lock;
    pthread_cond_t park_cond;
    uint64_t wake_seq;       /* under park_lock */
    _Atomic(sched_job *) job; /* the parallel loop idle workers help with, or NULL */
    atomic_uint job_users;    /* workers looking at `job` right now */
    /* The host (docs/coexec.md): firings that wait for it hold the run open
     * (`held`); when every worker is idle and some are held, the run is
     * `quiet` (on_quiet is called, once each time it becomes so) until the
     * host hands in, through the inbox, the activation that ends a wait. */
    atomic_uint held;
    atomic_int quiet;
    sched_item *inbox;       /* FIFO: inbox[inbox_head .. n_inbox), under park_lock */
    size_t inbox_head, n_inbox, cap_inbox;
    atomic_size_t inboxed;   /* n_inbox - inbox_head, for looking without the lock */
    void (*on_quiet)(void *ud);
    void *quiet_ud;
    /* The pool whose threads run workers 1.. (NULL: none). They join only
     * once the run has work to share: an offer, a parallel loop, an
     * activation from the host (sched_pool_want). */
    _Atomic(sched_pool *) pool;
} sched_run;

tfvm_status sched_run_init(sched_run *r, sched_worker **workers, uint32_t n, const tfvm_allocator *a);
void sched_run_fini(sched_run *r);
/* Before each run: workers 1.. start idle (a helper thread that has not woken
 * yet must not delay termination), worker 0 busy. */
void sched_run_reset(sched_run *r);
/* Ends the run now (an error, an interrupt): every worker leaves. */
void sched_run_stop(sched_run *r);
void sched_wake_one(sched_run *r);
void sched_wake_all(sched_run *r);
/* A firing that waits for the host: the run does not end while it waits
 * (called by the busy worker that parks it). */
static inline void sched_hold(sched_run *r) { atomic_fetch_add(&r->held, 1); }
/* From any thread: hands in an activation that ends one hold; an idle worker
 * takes it (oldest first). false: no memory (nothing changed). */
bool sched_inject(sched_run *r, const sched_item *it);
/* Drops what the inbox holds (after a run): drop(ud, item) for each. */
void sched_inbox_clear(sched_run *r, void (*drop)(void *ud, const void *item), void *ud);

/* ---- Policies -------------------------------------------------------------------- */
typedef struct sched_policy {
    const char *name;
    const char *summary;
    bool multi; /* runs several workers: contexts may be touched by several threads */
    /* A worker's own work ran out: finds other work (true, *out set) or
     * learns that the run is over (false: nothing is in flight anywhere). */
    bool (*find_work)(sched_run *r, sched_worker *w, sched_item *out);
    /* The same for a worker that starts the run idle (sched_run_reset). */
    bool (*join)(sched_run *r, sched_worker *w, sched_item *out);
    /* Every SCHED_OFFER_EVERY firings: offers the worker's oldest private
     * work to idle workers. NULL when the policy never shares work. */
    void (*offer)(sched_run *r, sched_worker *w);
    /* Before a long stretch without firings: all of it. NULL as offer. */
    void (*offer_all)(sched_run *r, sched_worker *w);
} sched_policy;

/* Firings between two offers (about 0.1 ms): in a program with little
 * parallelism the owner takes most offers back itself, and each round trip
 * costs two fences (and a wake-up two system calls). */
#define SCHED_OFFER_EVERY 8192

/* The policy called `name`, or NULL if none. */
const sched_policy *sched_policy_find(const char *name);
/* The i-th policy, or NULL past the end (for --help and tests). */
const sched_policy *sched_policy_at(size_t i);

/* ---- The pool ---------------------------------------------------------------------
 * Threads that persist across runs. A run calls fn(ud, i) on worker i for i in
 * [0, n): worker 0 on the caller's thread, the others on pool threads, which
 * between runs spin a little (a run right after a run finds them awake) and
 * then sleep. A pool serves one run at a time; a VM with its own pool makes
 * one at its first parallel run. */
/* A pool of `threads` workers (the caller's thread included). NULL: out of
 * memory. The threads are not pinned to cores: worker 0 is the caller's own
 * thread, which may run on any core, and a helper pinned to the core it
 * lands on halves both (measured: the 2-thread MLP ran 0.46-0.78 ms pinned,
 * 0.39-0.42 ms not). */
sched_pool *sched_pool_new(unsigned threads);
void sched_pool_free(sched_pool *p);
unsigned sched_pool_threads(const sched_pool *p);
/* Runs fn(ud, 0) on the caller's thread and fn(ud, i) for i in [1, n)
 * (n <= threads) on the pool threads that join the run, and returns when
 * every call has returned. Threads join only after sched_pool_want (a run
 * that never shares work is the caller's alone), and a thread still asleep
 * then may miss the run: fn's workers start idle. Calls by several threads
 * at once take turns. */
void sched_pool_run(sched_pool *p, uint32_t n, void (*fn)(void *ud, uint32_t i), void *ud);
/* The current run has work for the pool's threads: they join it (a thread
 * asleep is woken). From any thread; cheap once said; NULL: nothing. */
void sched_pool_want(sched_pool *p);

/* Kernels' parallel loops (devices/cpu/par.h) on a run's workers: the calling
 * worker publishes the loop, idle workers of the run take chunks of it from
 * find_work, the caller takes chunks too and returns when all are done.
 * Another loop already running: this one runs on the caller alone. */
void sched_run_parallel_for(sched_run *r, sched_worker *self, size_t n, size_t grain, dev_par_fn fn, void *arg);
/* An idle worker's turn at the published loop, if any: true if it ran a chunk. */
bool sched_help_job(sched_run *r);

#endif
