/* scheduler/deque.c — the Chase–Lev deque. Memory orders follow Lê et al.,
 * with the two standalone seq_cst fences replaced by seq_cst accesses of
 * `bottom` and `top` (same guarantees on x86 and ARM, and ThreadSanitizer
 * understands them). */
#include "deque.h"

#include <string.h>

struct dq_array {
    long long size; /* power of two */
    dq_array *next_retired;
    _Atomic uint64_t slots[][4];
};

static dq_array *array_new(const tfvm_allocator *a, long long size)
{
    size_t bytes = sizeof(dq_array) + (size_t)size * sizeof(((dq_array *)0)->slots[0]);
    dq_array *arr = ut_alloc(a, bytes);
    if (arr) {
        arr->size = size;
        arr->next_retired = NULL;
    }
    return arr;
}

static size_t array_bytes(const dq_array *arr) { return sizeof(dq_array) + (size_t)arr->size * sizeof arr->slots[0]; }

static inline void slot_put(dq_array *a, long long i, const sched_item *it)
{
    _Atomic uint64_t *s = a->slots[i & (a->size - 1)];
    for (int k = 0; k < 4; k++)
        atomic_store_explicit(&s[k], it->w[k], memory_order_relaxed);
}

static inline void slot_get(dq_array *a, long long i, sched_item *it)
{
    _Atomic uint64_t *s = a->slots[i & (a->size - 1)];
    for (int k = 0; k < 4; k++)
        it->w[k] = atomic_load_explicit(&s[k], memory_order_relaxed);
}

bool dq_init(sched_deque *d, const tfvm_allocator *a)
{
    atomic_init(&d->top, 0);
    atomic_init(&d->bottom, 0);
    d->alloc = a;
    d->retired = NULL;
    dq_array *arr = array_new(a, 256);
    atomic_init(&d->array, arr);
    return arr != NULL;
}

void dq_fini(sched_deque *d)
{
    dq_array *arr = atomic_load_explicit(&d->array, memory_order_relaxed);
    if (arr)
        ut_free(d->alloc, arr, array_bytes(arr));
    while (d->retired) {
        dq_array *next = d->retired->next_retired;
        ut_free(d->alloc, d->retired, array_bytes(d->retired));
        d->retired = next;
    }
    atomic_store_explicit(&d->array, NULL, memory_order_relaxed);
}

static dq_array *grow(sched_deque *d, dq_array *old, long long t, long long b)
{
    dq_array *arr = array_new(d->alloc, old->size * 2);
    if (!arr)
        return NULL;
    for (long long i = t; i < b; i++) {
        sched_item it;
        slot_get(old, i, &it);
        slot_put(arr, i, &it);
    }
    old->next_retired = d->retired; /* a thief may still be reading it */
    d->retired = old;
    atomic_store_explicit(&d->array, arr, memory_order_release);
    return arr;
}

bool dq_push(sched_deque *d, const sched_item *it)
{
    long long b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    long long t = atomic_load_explicit(&d->top, memory_order_acquire);
    dq_array *a = atomic_load_explicit(&d->array, memory_order_relaxed);
    if (b - t > a->size - 1) {
        a = grow(d, a, t, b);
        if (!a)
            return false;
    }
    slot_put(a, b, it);
    atomic_store_explicit(&d->bottom, b + 1, memory_order_release);
    return true;
}

bool dq_pop(sched_deque *d, sched_item *it)
{
    long long b = atomic_load_explicit(&d->bottom, memory_order_relaxed) - 1;
    dq_array *a = atomic_load_explicit(&d->array, memory_order_relaxed);
    atomic_store_explicit(&d->bottom, b, memory_order_seq_cst);
    long long t = atomic_load_explicit(&d->top, memory_order_seq_cst);
    if (t > b) { /* empty */
        atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
        return false;
    }
    slot_get(a, b, it);
    if (t == b) {
        /* the last item: race the thieves for it */
        bool won = atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1, memory_order_seq_cst,
                                                           memory_order_relaxed);
        atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
        return won;
    }
    return true;
}

int dq_steal(sched_deque *d, sched_item *it)
{
    long long t = atomic_load_explicit(&d->top, memory_order_seq_cst);
    long long b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
    if (t >= b)
        return DQ_EMPTY;
    dq_array *a = atomic_load_explicit(&d->array, memory_order_acquire);
    slot_get(a, t, it);
    if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1, memory_order_seq_cst, memory_order_relaxed))
        return DQ_ABORT;
    return DQ_OK;
}

long long dq_size(const sched_deque *d)
{
    long long b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    long long t = atomic_load_explicit(&d->top, memory_order_relaxed);
    return b > t ? b - t : 0;
}

void dq_each(const sched_deque *d, void (*fn)(void *ud, const void *item), void *ud)
{
    long long b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    long long t = atomic_load_explicit(&d->top, memory_order_relaxed);
    dq_array *a = atomic_load_explicit(&d->array, memory_order_relaxed);
    for (long long i = b - 1; i >= t; i--) {
        sched_item it;
        slot_get(a, i, &it);
        fn(ud, &it);
    }
}
