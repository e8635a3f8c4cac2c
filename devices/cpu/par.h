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

#endif
