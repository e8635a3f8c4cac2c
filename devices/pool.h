/* devices/pool.h — per-VM memory pools, one per device: freed blocks wait on
 * size-class free lists, so a run in steady state calls neither malloc nor
 * cudaMalloc for its tensors; large host blocks are reused by recency, the
 * block given back last first, so that what a layer writes lands in memory
 * still in the caches (pool.c). Thread-safe (the VM's workers share a pool). */
#ifndef TFVM_POOL_H
#define TFVM_POOL_H

#include "devices/device.h"

typedef struct dev_pool dev_pool;

/* A host pool whose blocks come from `under` (dev NULL), or a pool of device
 * memory of `dev`; its own bookkeeping comes from `under`. */
tfvm_status dev_pool_new(const tfvm_allocator *under, const dev_device *dev, dev_pool **out);
/* The owner lets go (at VM destroy): every cached block is freed now; blocks
 * still out (tensors a caller holds) are freed when they come back, and the
 * pool itself with the last of them. NULL is a no-op. */
void dev_pool_close(dev_pool *p);
/* n bytes (n > 0; rounded up to a size class; a host block above 64 KiB may
 * be up to twice that); NULL when memory runs out.
 * A device pool that cannot get memory frees its cache and tries once more. */
void *dev_pool_get(dev_pool *p, size_t n);
/* Gives back a block of dev_pool_get(p, n). */
void dev_pool_put(dev_pool *p, void *block, size_t n);
/* Frees every cached block. */
void dev_pool_trim(dev_pool *p);
/* A host pool as an allocation hook: tensors made through it keep it in
 * their `alloc` and come back to it when freed. */
tfvm_allocator dev_pool_allocator(dev_pool *p);
dev_id dev_pool_device(const dev_pool *p);

typedef struct dev_pool_stats {
    uint64_t hits;        /* blocks handed out from a free list          */
    uint64_t misses;      /* blocks that had to be allocated             */
    uint64_t cached;      /* bytes waiting on free lists now             */
} dev_pool_stats;
void dev_pool_get_stats(dev_pool *p, dev_pool_stats *s);

/* Bytes of the size class that n falls in (n itself above the largest class). */
size_t dev_pool_class_size(size_t n);
/* Most bytes a pool keeps cached; a block given back beyond it is freed. */
#define DEV_POOL_MAX_CACHED ((uint64_t)1 << 31)

#endif
