/* devices/pool.c — size-class pools of host or device memory, a lock and a
 * stack of free blocks per class; reference counted by their blocks, so that
 * tensors may outlive the VM whose pool made them. */
/* Classes step by a quarter of a power of two (64, 80, 96, 112, 128, 160,
 * ...), so a block wastes at most a fifth of itself. */
#include "devices/pool.h"

#include <pthread.h>
#include <string.h>

#define POOL_MIN_SHIFT 6  /* smallest class: 64 bytes */
#define POOL_MAX_SHIFT 30 /* blocks above 1 GiB are not pooled */
#define POOL_CLASSES ((POOL_MAX_SHIFT - POOL_MIN_SHIFT) * 4 + 1)

typedef struct pool_class {
    pthread_mutex_t lock;
    void **free;       /* cached blocks (a stack) */
    uint32_t n, cap;
    bool closed;       /* the owner let go: nothing is cached any more */
    uint64_t hits, misses;
} pool_class;

struct dev_pool {
    tfvm_allocator under;       /* host blocks and the pool's own memory */
    const dev_device *dev;      /* device pools: where blocks come from */
    atomic_size_t refs;         /* 1 for the owner + 1 per block handed out */
    atomic_uint_fast64_t cached;/* bytes on free lists */
    atomic_uint_fast64_t big;   /* allocations above the largest class */
    pool_class cls[POOL_CLASSES];
};

/* Class index of n bytes and the class's size; -1 above the largest. */
static int pool_class_of(size_t n, size_t *size)
{
    if (n <= ((size_t)1 << POOL_MIN_SHIFT)) {
        *size = (size_t)1 << POOL_MIN_SHIFT;
        return 0;
    }
    if (n > ((size_t)1 << POOL_MAX_SHIFT)) {
        *size = n;
        return -1;
    }
    /* n - 1 lies in [2^e, 2^(e+1)); its class is 2^e + k * 2^(e-2), k = 1..4 */
    int e = 63 - __builtin_clzll((unsigned long long)(n - 1));
    size_t step = (size_t)1 << (e - 2);
    size_t k = (n - 1 - ((size_t)1 << e)) / step + 1;
    *size = ((size_t)1 << e) + k * step;
    return (e - POOL_MIN_SHIFT) * 4 + (int)k;
}

/* Size of class c (the inverse of pool_class_of). */
static size_t pool_index_size(int c)
{
    if (c == 0)
        return (size_t)1 << POOL_MIN_SHIFT;
    int e = POOL_MIN_SHIFT + (c - 1) / 4;
    return ((size_t)1 << e) + (size_t)((c - 1) % 4 + 1) * ((size_t)1 << (e - 2));
}

size_t dev_pool_class_size(size_t n)
{
    size_t s;
    pool_class_of(n, &s);
    return s;
}

tfvm_status dev_pool_new(const tfvm_allocator *under, const dev_device *dev, dev_pool **out)
{
    *out = NULL;
    dev_pool *p = ut_alloc(under, sizeof *p);
    if (!p)
        return TFVM_ERR_NOMEM;
    memset(p, 0, sizeof *p);
    p->under = under ? *under : (tfvm_allocator){0};
    p->dev = dev;
    atomic_init(&p->refs, 1);
    atomic_init(&p->cached, 0);
    atomic_init(&p->big, 0);
    for (int c = 0; c < POOL_CLASSES; c++)
        pthread_mutex_init(&p->cls[c].lock, NULL);
    *out = p;
    return TFVM_OK;
}

dev_id dev_pool_device(const dev_pool *p) { return p->dev ? p->dev->id : DEV_CPU; }

static void *pool_raw_alloc(dev_pool *p, size_t n)
{
    if (!p->dev)
        return ut_alloc(&p->under, n);
    char msg[160];
    return p->dev->iface->alloc(p->dev, n, msg, sizeof msg);
}

static void pool_raw_free(dev_pool *p, void *b, size_t n)
{
    if (!p->dev)
        ut_free(&p->under, b, n);
    else
        p->dev->iface->free(p->dev, b, n);
}

static void pool_destroy(dev_pool *p)
{
    for (int c = 0; c < POOL_CLASSES; c++)
        pthread_mutex_destroy(&p->cls[c].lock);
    tfvm_allocator a = p->under;
    ut_free(&a, p, sizeof *p);
}

static void pool_unref(dev_pool *p)
{
    /* acq_rel: whoever frees the pool sees every other thread's last use. */
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
        pool_destroy(p);
}

/* Empties class c's free list (close: and its array); frees outside the lock. */
static void pool_drain(dev_pool *p, int c, bool closing)
{
    pool_class *k = &p->cls[c];
    size_t size = pool_index_size(c);
    pthread_mutex_lock(&k->lock);
    void **list = k->free;
    uint32_t n = k->n, cap = k->cap;
    if (closing) {
        k->closed = true;
        k->free = NULL;
        k->cap = 0;
        k->n = 0;
    } else {
        /* keep the array: the next frees reuse it */
        list = NULL;
        for (uint32_t i = 0; i < k->n; i++)
            pool_raw_free(p, k->free[i], size);
        k->n = 0;
    }
    if (n)
        atomic_fetch_sub_explicit(&p->cached, (uint64_t)n * size, memory_order_relaxed);
    pthread_mutex_unlock(&k->lock);
    if (list) {
        for (uint32_t i = 0; i < n; i++)
            pool_raw_free(p, list[i], size);
        ut_free(&p->under, list, (size_t)cap * sizeof *list);
    }
}

void dev_pool_trim(dev_pool *p)
{
    for (int c = 0; c < POOL_CLASSES; c++)
        pool_drain(p, c, false);
}

void dev_pool_close(dev_pool *p)
{
    if (!p)
        return;
    for (int c = 0; c < POOL_CLASSES; c++)
        pool_drain(p, c, true);
    pool_unref(p);
}

void *dev_pool_get(dev_pool *p, size_t n)
{
    size_t size;
    int c = pool_class_of(n ? n : 1, &size);
    if (c >= 0) {
        pool_class *k = &p->cls[c];
        pthread_mutex_lock(&k->lock);
        if (k->n) {
            void *b = k->free[--k->n];
            k->hits++;
            pthread_mutex_unlock(&k->lock);
            atomic_fetch_sub_explicit(&p->cached, size, memory_order_relaxed);
            atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
            return b;
        }
        k->misses++;
        pthread_mutex_unlock(&k->lock);
    } else {
        atomic_fetch_add_explicit(&p->big, 1, memory_order_relaxed);
    }
    void *b = pool_raw_alloc(p, size);
    if (!b && p->dev) { /* device memory is scarce: what we hold may be the reason */
        dev_pool_trim(p);
        b = pool_raw_alloc(p, size);
    }
    if (b)
        atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return b;
}

void dev_pool_put(dev_pool *p, void *b, size_t n)
{
    if (!b)
        return;
    size_t size;
    int c = pool_class_of(n ? n : 1, &size);
    bool kept = false;
    if (c >= 0) {
        pool_class *k = &p->cls[c];
        pthread_mutex_lock(&k->lock);
        if (!k->closed && atomic_load_explicit(&p->cached, memory_order_relaxed) + size <= DEV_POOL_MAX_CACHED) {
            if (k->n == k->cap) {
                uint32_t cap = k->cap ? k->cap * 2 : 8;
                void **grown = ut_realloc(&p->under, k->free, (size_t)k->cap * sizeof *grown,
                                          (size_t)cap * sizeof *grown);
                if (grown) { /* else the block is simply freed */
                    k->free = grown;
                    k->cap = cap;
                }
            }
            if (k->n < k->cap) {
                k->free[k->n++] = b;
                atomic_fetch_add_explicit(&p->cached, size, memory_order_relaxed);
                kept = true;
            }
        }
        pthread_mutex_unlock(&k->lock);
    }
    if (!kept)
        pool_raw_free(p, b, size);
    pool_unref(p);
}

static void *pool_hook(void *ud, void *ptr, size_t old, size_t n)
{
    dev_pool *p = ud;
    if (!ptr)
        return n ? dev_pool_get(p, n) : NULL;
    if (n == 0) {
        dev_pool_put(p, ptr, old);
        return NULL;
    }
    if (dev_pool_class_size(old) == dev_pool_class_size(n))
        return ptr; /* the block already has room */
    void *q = dev_pool_get(p, n);
    if (!q)
        return NULL;
    memcpy(q, ptr, old < n ? old : n);
    dev_pool_put(p, ptr, old);
    return q;
}

tfvm_allocator dev_pool_allocator(dev_pool *p) { return (tfvm_allocator){pool_hook, p}; }

void dev_pool_get_stats(dev_pool *p, dev_pool_stats *s)
{
    memset(s, 0, sizeof *s);
    for (int c = 0; c < POOL_CLASSES; c++) {
        pool_class *k = &p->cls[c];
        pthread_mutex_lock(&k->lock);
        s->hits += k->hits;
        s->misses += k->misses;
        pthread_mutex_unlock(&k->lock);
    }
    s->misses += atomic_load_explicit(&p->big, memory_order_relaxed);
    s->cached = atomic_load_explicit(&p->cached, memory_order_relaxed);
}
