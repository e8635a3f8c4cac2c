/* devices/cpu/par.h — intra-op parallelism: a kernel splits its work into
 * chunks that the VM's idle workers take (one thread pool in the process:
 * OpenBLAS runs single-threaded inside each chunk). The VM installs a runner
 * on each of its worker threads; without one (tests, tools, one worker) the
 * chunks run in order on the calling thread. */
#ifndef TFVM_PAR_H
#define TFVM_PAR_H

#include <stddef.h>

/* Work on items [begin, end) of a parallel loop. */
typedef void (*dev_par_fn)(void *arg, size_t begin, size_t end);

/* What the VM provides: runs fn over [0, n) in chunks of whole multiples of
 * `grain` items (but the last), on the calling thread and any idle worker,
 * and returns when every chunk is done. `self` is the runner's own state. */
typedef struct dev_par_runner {
    void (*run)(void *self, size_t n, size_t grain, dev_par_fn fn, void *arg);
    void *self;
    unsigned width; /* threads that may take part (1: run serially) */
} dev_par_runner;

/* Installs (or, with NULL, removes) the runner of the calling thread. */
void dev_par_set_runner(const dev_par_runner *r);
/* Threads a parallel loop on this thread may use right now (1 without a runner). */
unsigned dev_par_width(void);
/* Runs fn over [0, n): through the thread's runner when it has one and the
 * loop has more than one grain, else fn(arg, 0, n) here. */
void dev_par_for(size_t n, size_t grain, dev_par_fn fn, void *arg);

/* A repeated loop split or run whole, chosen by timing both (a recurrent
 * layer's step: where a handoff between cores costs about what a split
 * saves, a 2-thread step took 3-10% longer split than whole; on another
 * machine the split had paid). The loop's `key` (its weights' tensor, say)
 * names it across calls: its first DEV_PAR_TUNE_TRIALS calls each way
 * alternate, timed, then the way with the lower median is kept. Both ways
 * must give the same bits. A key that finds no free slot (of a fixed few)
 * splits, untimed. Thread-safe. */
#define DEV_PAR_TUNE_TRIALS 16
typedef struct dev_par_trial {
    struct dev_par_slot *slot; /* NULL: not timed */
    int way;    /* 1: split */
    long long t0;
} dev_par_trial;
/* Whether to split this call of the loop `key`; dev_par_tune_done(tr) after it */
int dev_par_tune_split(const void *key, dev_par_trial *tr);
void dev_par_tune_done(const dev_par_trial *tr);
/* A timing of `ns` for one way of `key`'s loop, as dev_par_tune_done
 * records it (tests give their own) */
void dev_par_tune_record(const void *key, int way, long long ns);
/* Tests: every key's way from now on (0 whole, 1 split), or (-1) timed again */
void dev_par_tune_force(int way);
/* The way with the lower median of n timings each (ties: whole, 0) */
int dev_par_tune_pick(const long long *whole, const long long *split, unsigned n);

#endif
