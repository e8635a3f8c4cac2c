/* scheduler/pool.c — worker threads that persist across runs, and kernels'
 * parallel loops on a run's idle workers.
 *
 * A run is announced in one word: its generation, an "open" bit, a "wanted"
 * bit and the number of pool threads that joined it. A thread joins by a
 * CAS that keeps the bits set; the caller closes the run by clearing the
 * open bit, which also tells it how many joined, and waits for exactly
 * those to leave. A thread that wakes late finds the run closed and does
 * nothing, so a run never waits for a thread that is still asleep: workers
 * start a run idle, and one that never shows up cannot delay its end.
 *
 * Threads join only a run that wants them (sched_pool_want: the run has
 * work to share, its first offer or parallel loop). A run that never shares
 * runs on the caller's thread alone: no thread wakes for it, spins beside it
 * or has to leave before it ends, so a tiny run on the default threads
 * costs what it costs on one (a small decoder's run took 1.3x as long with
 * an idle second worker in it, that worker's wake-ups and its exit).
 *
 * A new thread is started away from its creator's CPU and then given the
 * creator's CPUs back: Linux may put a new thread on the CPU of the thread
 * that made it, and there the two share one CPU until the next load balance
 * (a 4 ms tick): a tenth of a 50 ms run on two workers, seen in one run in
 * three before this. sched_pool_new returns when every thread is running. */
#include "sched.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>

#define RUN_OPEN (1ull << 31)
#define RUN_WANTED (1ull << 30)
#define RUN_JOINED (RUN_WANTED - 1)
#define RUN_GEN(w) ((w) >> 32)
/* How long a thread stays awake after a run for the next one, in spins of
 * about 20-50 ns: back-to-back runs (an embedder's loop, `tfvm profile`)
 * find the threads awake instead of paying a wake-up each. */
#define IDLE_SPINS 20000

struct sched_pool {
    unsigned threads;            /* the caller's thread included */
    pthread_t *tids;
    unsigned started;
    _Atomic uint64_t word;       /* generation << 32 | RUN_OPEN | threads joined */
    atomic_uint left;            /* threads that finished the current run */
    atomic_uint sleeping;
    atomic_uint alive;           /* threads that started */
    atomic_bool stop;
    void (*fn)(void *ud, uint32_t i);
    void *ud;
    uint32_t n;                  /* workers of the current run */
    pthread_mutex_t lock;        /* sleeping threads */
    pthread_cond_t wake;
    pthread_mutex_t turn;        /* one run at a time */
    cpu_set_t cpus;              /* the creator's CPUs */
    bool has_cpus;
};

typedef struct pool_thread {
    sched_pool *pool;
    uint32_t index;
} pool_thread;

/* Attributes that start a thread on the creator's CPUs but its current one
 * (none when it has one CPU, or the affinity cannot be read). */
static bool start_elsewhere(const sched_pool *p, pthread_attr_t *attr)
{
    int me = sched_getcpu();
    if (!p->has_cpus || me < 0 || me >= CPU_SETSIZE || !CPU_ISSET(me, &p->cpus) || CPU_COUNT(&p->cpus) < 2)
        return false;
    cpu_set_t set = p->cpus;
    CPU_CLR(me, &set);
    if (pthread_attr_init(attr) != 0)
        return false;
    if (pthread_attr_setaffinity_np(attr, sizeof set, &set) != 0) {
        pthread_attr_destroy(attr);
        return false;
    }
    return true;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* A run this thread has not seen, open and wanting threads. */
static inline bool joinable(uint64_t w, uint64_t seen_gen)
{
    return RUN_GEN(w) != seen_gen && (w & RUN_OPEN) && (w & RUN_WANTED);
}

/* Waits for a run it has not seen that wants threads: spins a while, then
 * sleeps. Returns the run's word, or 0 when the pool is stopping. */
static uint64_t await_run(sched_pool *p, uint64_t seen_gen)
{
    for (unsigned spins = 0;; spins++) {
        uint64_t w = atomic_load_explicit(&p->word, memory_order_acquire);
        if (atomic_load_explicit(&p->stop, memory_order_acquire))
            return 0;
        if (joinable(w, seen_gen))
            return w;
        if (spins < IDLE_SPINS) {
            cpu_relax();
            continue;
        }
        pthread_mutex_lock(&p->lock);
        atomic_fetch_add(&p->sleeping, 1); /* seq_cst: sched_pool_want's change of word, then its look at sleeping */
        while (!atomic_load(&p->stop) && !joinable(atomic_load(&p->word), seen_gen))
            pthread_cond_wait(&p->wake, &p->lock);
        atomic_fetch_sub(&p->sleeping, 1);
        pthread_mutex_unlock(&p->lock);
        spins = 0;
    }
}

static void *pool_main(void *arg)
{
    pool_thread *t = arg;
    sched_pool *p = t->pool;
    uint32_t i = t->index;
    free(t);
    if (p->has_cpus) /* started elsewhere (start_elsewhere); now anywhere the creator may run */
        pthread_setaffinity_np(pthread_self(), sizeof p->cpus, &p->cpus);
    atomic_fetch_add(&p->alive, 1);
    uint64_t seen = 0;
    for (;;) {
        uint64_t w = await_run(p, seen);
        if (!w)
            return NULL;
        seen = RUN_GEN(w);
        /* join while the run is open; a closed run is over for us. Only a
         * joined thread reads the run's fn, ud and n: the caller wrote them
         * before opening the run and changes them only after every thread
         * that joined has left. */
        while ((w & RUN_OPEN) && RUN_GEN(w) == seen &&
               !atomic_compare_exchange_weak_explicit(&p->word, &w, w + 1, memory_order_acq_rel, memory_order_acquire))
            ;
        if (!(w & RUN_OPEN) || RUN_GEN(w) != seen)
            continue;
        if (i < p->n) /* (a run may have fewer workers than the pool has threads) */
            p->fn(p->ud, i);
        atomic_fetch_add_explicit(&p->left, 1, memory_order_release);
    }
}

sched_pool *sched_pool_new(unsigned threads)
{
    if (threads < 1)
        threads = 1;
    sched_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->threads = threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_mutex_init(&p->turn, NULL);
    p->has_cpus = pthread_getaffinity_np(pthread_self(), sizeof p->cpus, &p->cpus) == 0;
    p->tids = calloc(threads, sizeof *p->tids);
    if (!p->tids) {
        sched_pool_free(p);
        return NULL;
    }
    for (unsigned i = 1; i < threads; i++) {
        pool_thread *t = malloc(sizeof *t);
        if (!t)
            break;
        t->pool = p;
        t->index = i;
        pthread_attr_t attr;
        bool elsewhere = start_elsewhere(p, &attr);
        int rc = pthread_create(&p->tids[i], elsewhere ? &attr : NULL, pool_main, t);
        if (elsewhere)
            pthread_attr_destroy(&attr);
        if (rc != 0) {
            free(t);
            break;
        }
        p->started = i;
    }
    while (atomic_load(&p->alive) < p->started)
        sched_yield();
    /* fewer threads than asked: the runs use what started (the VM counts
     * the missing workers as idle; their work is stolen by the others) */
    return p;
}

void sched_pool_free(sched_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 1; i <= p->started; i++)
        pthread_join(p->tids[i], NULL);
    free(p->tids);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->turn);
    free(p);
}

unsigned sched_pool_threads(const sched_pool *p) { return p ? p->threads : 1; }

void sched_pool_run(sched_pool *p, uint32_t n, void (*fn)(void *ud, uint32_t i), void *ud)
{
    pthread_mutex_lock(&p->turn);
    p->fn = fn;
    p->ud = ud;
    p->n = n;
    atomic_store_explicit(&p->left, 0, memory_order_relaxed);
    uint64_t gen = RUN_GEN(atomic_load(&p->word)) + 1;
    atomic_store(&p->word, gen << 32 | RUN_OPEN); /* no thread joins before sched_pool_want */
    fn(ud, 0);
    /* close: no thread joins from now on; wait for those that did */
    uint64_t w = atomic_load(&p->word);
    while (!atomic_compare_exchange_weak(&p->word, &w, w & ~RUN_OPEN))
        ;
    unsigned joined = (unsigned)(w & RUN_JOINED);
    for (unsigned spins = 0; atomic_load_explicit(&p->left, memory_order_acquire) != joined; spins++)
        if (spins < 1000)
            cpu_relax();
        else
            sched_yield();
    pthread_mutex_unlock(&p->turn);
}

void sched_pool_want(sched_pool *p)
{
    if (!p || (atomic_load_explicit(&p->word, memory_order_relaxed) & RUN_WANTED))
        return;
    /* (on a closed run the bit is harmless: the next run writes a new word) */
    atomic_fetch_or(&p->word, RUN_WANTED); /* seq_cst: then the look at sleeping */
    if (atomic_load(&p->sleeping)) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }
}

/* ---- Parallel loops ------------------------------------------------------------------ */

struct sched_job {
    dev_par_fn fn;
    void *arg;
    size_t n, grain, grains;
    unsigned workers;
    /* the grains not yet taken, [front, back), as front << 32 | back: the
     * caller takes its chunks from the front, helpers from the back */
    _Atomic uint64_t ends;
    atomic_size_t done; /* grains finished */
};

/* A chunk's grains out of `left` not yet taken: an even share among the
 * workers, halved, so that chunks shrink as the two ends near each other
 * and the last ones are single grains. Whoever joined late or ran slower,
 * the caller then waits at most about a grain for the helpers (with
 * equal chunks of an eighth of the loop, it waited a tenth of every split
 * layer of mobilenet_v3_small at batch 1 on 2 threads). */
static size_t chunk_of(size_t left, unsigned workers) { return (left + 2 * workers - 1) / (2 * workers); }

static void run_chunk(sched_job *j, size_t g0, size_t g1)
{
    const size_t begin = g0 * j->grain, end = g1 * j->grain < j->n ? g1 * j->grain : j->n;
    j->fn(j->arg, begin, end);
    atomic_fetch_add_explicit(&j->done, g1 - g0, memory_order_release);
}

/* The next chunk [*g0, *g1) from the front (or the back); false when none
 * is left. The caller's chunks are then one run from the start of the loop
 * and a helper's one run from its end, about the same parts from one loop
 * to the next: a layer's result that one thread wrote, the next layer split
 * the same way reads from that thread's cache, not the other core's. */
static bool take_chunk(sched_job *j, bool back, size_t *g0, size_t *g1)
{
    uint64_t w = atomic_load_explicit(&j->ends, memory_order_relaxed);
    for (;;) {
        const uint64_t front = w >> 32, end = w & UINT32_MAX;
        if (front >= end)
            return false;
        const uint64_t size = chunk_of((size_t)(end - front), j->workers);
        const uint64_t next = back ? (front << 32 | (end - size)) : ((front + size) << 32 | end);
        if (atomic_compare_exchange_weak_explicit(&j->ends, &w, next, memory_order_relaxed, memory_order_relaxed)) {
            *g0 = (size_t)(back ? end - size : front);
            *g1 = *g0 + (size_t)size;
            return true;
        }
    }
}

/* Helpers count themselves in job_users before they look at the job, and
 * the publisher clears the job and then waits for job_users to drop to zero,
 * so no helper touches a job after its publisher returned (both sides
 * seq_cst). */

bool sched_help_job(sched_run *r)
{
    if (!atomic_load_explicit(&r->job, memory_order_relaxed))
        return false;
    bool ran = false;
    atomic_fetch_add(&r->job_users, 1);
    sched_job *j = atomic_load(&r->job);
    size_t g0, g1;
    if (j)
        while (take_chunk(j, true, &g0, &g1)) {
            run_chunk(j, g0, g1);
            ran = true;
        }
    atomic_fetch_sub(&r->job_users, 1);
    return ran;
}

void sched_run_parallel_for(sched_run *r, sched_worker *self, size_t n, size_t grain, dev_par_fn fn, void *arg)
{
    /* chunks of whole grains (a product's column chunks start on a panel of
     * its packed weights); the ends of the untaken grains fit 32 bits each */
    size_t g = grain ? grain : 1;
    if (n / g >= UINT32_MAX)
        g *= n / g / UINT32_MAX + 1;
    sched_job j = {.fn = fn, .arg = arg, .n = n, .grain = g, .grains = (n + g - 1) / g, .workers = r->n};
    /* the first chunk is the caller's before any helper looks: a loop that
     * runs again and again (a recurrent layer's steps) keeps its first part
     * on the caller's core, with the caches that hold that part's data */
    const size_t first = chunk_of(j.grains, j.workers);
    atomic_init(&j.ends, (uint64_t)first << 32 | j.grains);
    atomic_init(&j.done, 0);
    sched_job *none = NULL;
    if (j.grains < 2 || atomic_load_explicit(&r->idle, memory_order_relaxed) == 0 ||
        !atomic_compare_exchange_strong(&r->job, &none, &j)) {
        fn(arg, 0, n); /* nobody to help, or another loop has the board */
        return;
    }
    sched_pool_want(atomic_load_explicit(&r->pool, memory_order_relaxed));
    if (atomic_load_explicit(&r->sleepers, memory_order_relaxed))
        sched_wake_all(r);
    size_t g0 = 0, g1 = first;
    do
        run_chunk(&j, g0, g1);
    while (take_chunk(&j, false, &g0, &g1));
    for (unsigned spins = 0; atomic_load_explicit(&j.done, memory_order_acquire) != j.grains; spins++) {
        sched_serve(self); /* a helper may wait for us to share a context */
        if (spins >= 1000)
            sched_yield();
        else
            cpu_relax();
    }
    atomic_store(&r->job, NULL);
    while (atomic_load(&r->job_users))
        cpu_relax();
}
