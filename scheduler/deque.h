/* scheduler/deque.h — a Chase–Lev work-stealing deque of 32-byte items
 * (Lê, Pop, Cohen, Zappa Nardelli, "Correct and efficient work-stealing for
 * weak memory models", PPoPP 2013). The owner pushes and pops at the bottom
 * (LIFO: depth-first, cache-warm); thieves steal from the top (FIFO: the
 * oldest, biggest pieces of work). Items are copied word by word with
 * relaxed atomics so that a thief racing the owner never reads torn data
 * without noticing: its CAS on `top` fails and it discards what it read. */
#ifndef TFVM_DEQUE_H
#define TFVM_DEQUE_H

#include <stdatomic.h>

#include "util/util.h"

typedef struct sched_item {
    uint64_t w[4];
} sched_item;

typedef struct dq_array dq_array;

typedef struct sched_deque {
    _Alignas(64) atomic_llong top;      /* thieves' end */
    _Alignas(64) atomic_llong bottom;   /* owner's end */
    _Atomic(dq_array *) array;
    dq_array *retired;                  /* older arrays, kept until fini (thieves may read them) */
    const tfvm_allocator *alloc;
} sched_deque;

enum { DQ_EMPTY = 0, DQ_OK = 1, DQ_ABORT = -1 };

bool dq_init(sched_deque *d, const tfvm_allocator *a);
void dq_fini(sched_deque *d);
/* Owner only. false: out of memory growing the array. */
bool dq_push(sched_deque *d, const sched_item *it);
/* Owner only. false: empty. */
bool dq_pop(sched_deque *d, sched_item *it);
/* Any thread. DQ_OK, DQ_EMPTY, or DQ_ABORT (lost a race: try again). */
int dq_steal(sched_deque *d, sched_item *it);
/* Approximate number of items (any thread). */
long long dq_size(const sched_deque *d);
/* Owner only, while no thief runs: visits items from bottom to top. */
void dq_each(const sched_deque *d, void (*fn)(void *ud, const void *item), void *ud);

#endif
