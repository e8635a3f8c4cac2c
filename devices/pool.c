/* devices/pool.c — size-class pools of host or device memory, a lock and a
 * stack of free blocks per class; reference counted by their blocks, so that
 * tensors may outlive the VM whose pool made them. */
/* Classes step by a quarter of a power of two (64, 80, 96, 112, 128, 160,
 * ...), so a block wastes at most a fifth of itself.
 *
 * A large host block is taken by recency, not by class alone: a request of
 * more than POOL_NEAR_MIN bytes gets the block given back last among its
 * class and the POOL_NEAR classes above it (at most twice its size). The
 * memory a model's last layers gave back is still in the caches, while a
 * block of the request's own class may not have been touched since the
 * run before; a layer that writes megabytes into such a block waits for
 * each line to come from memory first (a 1x1 convolution's 2.4 MB result
 * in mnasnet took 540 us against 300 us into a block used just before;
 * whole convolution networks ran up to 9% faster, in less memory). Such a
 * block carries its class in a header (POOL_HEAD bytes, so that the data
 * stays 64-byte aligned), since it may serve a request of a smaller
 * class and must go back to its own. Device blocks are not touched from
 * the host: they stay with their class. */
#include "devices/pool.h"

#include <pthread.h>
#include <string.h>

#define POOL_MIN_SHIFT 6  /* smallest class: 64 bytes */
#define POOL_MAX_SHIFT 30 /* blocks above 1 GiB are not pooled */
#define POOL_CLASSES ((POOL_MAX_SHIFT - POOL_MIN_SHIFT) * 4 + 1)
#define POOL_NEAR_MIN ((size_t)64 << 10)
#define POOL_NEAR 4
#define POOL_HEAD 64

typedef struct pool_free {
    void *b;
    uint64_t seq; /* when it was given back (the pool's count of puts) */
} pool_free;

typedef struct pool_class {
    pthread_mutex_t lock;
    pool_free *free;   /* cached blocks (a stack) */
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
    atomic_uint_fast64_t puts;  /* blocks given back so far: their order */
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

/* Whether blocks of class size `size` are taken by recency (and carry a header) */
static bool pool_near(const dev_pool *p, size_t size)
{
    return !p->dev && size > POOL_NEAR_MIN && size <= ((size_t)1 << POOL_MAX_SHIFT);
}

/* A block of class c, n bytes (the class's size) */
static void *pool_raw_alloc(dev_pool *p, int c, size_t n)
{
    if (pool_near(p, n)) {
        char *h = ut_alloc(&p->under, n + POOL_HEAD);
        if (!h)
            return NULL;
        memcpy(h, &c, sizeof c);
        return h + POOL_HEAD;
    }
    if (!p->dev)
        return ut_alloc(&p->under, n);
    char msg[160];
    return p->dev->iface->alloc(p->dev, n, msg, sizeof msg);
}

static void pool_raw_free(dev_pool *p, void *b, size_t n)
{
    if (pool_near(p, n))
        ut_free(&p->under, (char *)b - POOL_HEAD, n + POOL_HEAD);
    else if (!p->dev)
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
    pool_free *list = k->free;
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
            pool_raw_free(p, k->free[i].b, size);
        k->n = 0;
    }
    if (n)
        atomic_fetch_sub_explicit(&p->cached, (uint64_t)n * size, memory_order_relaxed);
    pthread_mutex_unlock(&k->lock);
    if (list) {
        for (uint32_t i = 0; i < n; i++)
            pool_raw_free(p, list[i].b, size);
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

/* The class among c and the POOL_NEAR above it whose newest cached block
 * was given back last; c when none has one. */
static int pool_freshest(dev_pool *p, int c)
{
    int best = c;
    uint64_t newest = 0;
    for (int i = c; i <= c + POOL_NEAR && i < POOL_CLASSES; i++) {
        pool_class *k = &p->cls[i];
        pthread_mutex_lock(&k->lock);
        if (k->n && k->free[k->n - 1].seq >= newest) {
            newest = k->free[k->n - 1].seq;
            best = i;
        }
        pthread_mutex_unlock(&k->lock);
    }
    return best;
}

void *dev_pool_get(dev_pool *p, size_t n)
{
    size_t size;
    int c = pool_class_of(n ? n : 1, &size);
    if (c >= 0) {
        /* (another thread may take the block found between the look and
         * this lock: then this is a miss like any other) */
        const int from = pool_near(p, size) ? pool_freshest(p, c) : c;
        pool_class *k = &p->cls[from];
        pthread_mutex_lock(&k->lock);
        if (k->n) {
            void *b = k->free[--k->n].b;
            k->hits++;
            pthread_mutex_unlock(&k->lock);
            atomic_fetch_sub_explicit(&p->cached, pool_index_size(from), memory_order_relaxed);
            atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
            return b;
        }
        k->misses++;
        pthread_mutex_unlock(&k->lock);
    } else {
        atomic_fetch_add_explicit(&p->big, 1, memory_order_relaxed);
    }
    void *b = pool_raw_alloc(p, c, size);
    if (!b && p->dev) { /* device memory is scarce: what we hold may be the reason */
        dev_pool_trim(p);
        b = pool_raw_alloc(p, c, size);
    }
    if (b)
        atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return b;
}

/* The class of block b, handed out for a request of n bytes (its own, from
 * its header, when it may be larger than n's), and that class's size */
static int pool_block_class(const dev_pool *p, const void *b, size_t n, size_t *size)
{
    int c = pool_class_of(n ? n : 1, size);
    if (c >= 0 && pool_near(p, *size)) {
        memcpy(&c, (const char *)b - POOL_HEAD, sizeof c);
        *size = pool_index_size(c);
    }
    return c;
}

void dev_pool_put(dev_pool *p, void *b, size_t n)
{
    if (!b)
        return;
    size_t size;
    int c = pool_block_class(p, b, n, &size);
    bool kept = false;
    if (c >= 0) {
        pool_class *k = &p->cls[c];
        pthread_mutex_lock(&k->lock);
        if (!k->closed && atomic_load_explicit(&p->cached, memory_order_relaxed) + size <= DEV_POOL_MAX_CACHED) {
            if (k->n == k->cap) {
                uint32_t cap = k->cap ? k->cap * 2 : 8;
                pool_free *grown = ut_realloc(&p->under, k->free, (size_t)k->cap * sizeof *grown,
                                              (size_t)cap * sizeof *grown);
                if (grown) { /* else the block is simply freed */
                    k->free = grown;
                    k->cap = cap;
                }
            }
            if (k->n < k->cap) {
                k->free[k->n++] = (pool_free){b, atomic_fetch_add_explicit(&p->puts, 1, memory_order_relaxed) + 1};
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
    /* the block already has room: n's class is its own, or a smaller one
     * that also takes larger blocks (the block still goes back to its own) */
    size_t have, want;
    const int c = pool_block_class(p, ptr, old, &have), cn = pool_class_of(n, &want);
    if (c < 0 || cn < 0 ? have == want : cn == c || (cn < c && pool_near(p, want) && c <= cn + POOL_NEAR))
        return ptr;
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
