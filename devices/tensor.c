/* devices/tensor.c — dense tensors: one allocation per host tensor (header and
 * 64-byte-aligned data), or a header and a block of device memory from a
 * pool; atomic reference counts; the public tensor API. */
#include "devices/tensor.h"

#include <stdio.h>
#include <string.h>

#include "devices/pool.h"
#include "isa/isa.h"

#define DEV_TENSOR_ALIGN 64

/* Element count and byte size of a shape; false when it is invalid. */
static bool tensor_size(tfvm_dtype dtype, int rank, const int64_t *dims, int64_t *count_out,
                        size_t *nbytes)
{
    if (!isa_dtype_valid((uint32_t)dtype) || rank < 0 || rank > TFVM_MAX_RANK ||
        (rank > 0 && !dims))
        return false;
    /* count must fit an int64_t and the byte size a size_t; a zero dimension
     * makes the count 0 whatever the others are (each is still validated). */
    int64_t count = 1;
    bool zero = false, overflow = false;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return false;
        if (dims[i] == 0)
            zero = true;
        else if (!overflow) /* not count > INT64_MAX / dims[i]: a division per dim per tensor */
            overflow = __builtin_mul_overflow(count, dims[i], &count);
    }
    if (zero)
        count = 0;
    else if (overflow)
        return false;
    if ((uint64_t)count > SIZE_MAX || !ut_mul_ok((size_t)count, tfvm_dtype_size(dtype), nbytes))
        return false;
    *count_out = count;
    return true;
}

static void tensor_init(tfvm_tensor *t, const tfvm_allocator *a, size_t block, tfvm_dtype dtype, int rank,
                        const int64_t *dims, int64_t count, size_t nbytes)
{
    atomic_init(&t->refs, 1u);
    t->dtype = (uint8_t)dtype;
    t->rank = (uint8_t)rank;
    t->device = 0;
    atomic_init(&t->exposed, 0);
    for (int i = 0; i < TFVM_MAX_RANK; i++)
        t->dims[i] = i < rank ? dims[i] : 0;
    t->count = count;
    t->nbytes = nbytes;
    t->alloc = a ? *a : (tfvm_allocator){0};
    t->block = block;
    t->data = NULL;
    t->pool = NULL;
    atomic_init(&t->mirror, NULL);
    atomic_init(&t->prep, NULL);
    t->release = NULL;
    t->release_ud = NULL;
}

tfvm_tensor *dev_tensor_alloc(const tfvm_allocator *a, tfvm_dtype dtype, int rank,
                              const int64_t *dims)
{
    int64_t count;
    size_t nbytes;
    if (!tensor_size(dtype, rank, dims, &count, &nbytes))
        return NULL;
    /* Slack of ALIGN-1 bytes lets the data start on a 64-byte boundary
     * whatever alignment the allocator gives the block. */
    size_t head = sizeof(tfvm_tensor) + DEV_TENSOR_ALIGN - 1;
    if (nbytes > SIZE_MAX - head)
        return NULL;
    size_t block = head + nbytes;
    tfvm_tensor *t = ut_alloc(a, block);
    if (!t)
        return NULL;
    tensor_init(t, a, block, dtype, rank, dims, count, nbytes);
    t->data = ut_align_up(t + 1, DEV_TENSOR_ALIGN);
    return t;
}

tfvm_tensor *dev_tensor_alloc_on(const tfvm_allocator *a, dev_pool *pool, tfvm_dtype dtype, int rank,
                                 const int64_t *dims, tfvm_status *st)
{
    int64_t count;
    size_t nbytes;
    *st = TFVM_ERR_ARGUMENT;
    if (!tensor_size(dtype, rank, dims, &count, &nbytes))
        return NULL;
    *st = TFVM_ERR_NOMEM;
    tfvm_tensor *t = ut_alloc(a, sizeof *t);
    if (!t)
        return NULL;
    tensor_init(t, a, sizeof *t, dtype, rank, dims, count, nbytes);
    t->device = (uint8_t)dev_pool_device(pool);
    if (nbytes) { /* an empty tensor has no data anywhere */
        t->data = dev_pool_get(pool, nbytes);
        if (!t->data) {
            ut_free(a, t, sizeof *t);
            *st = TFVM_ERR_DEVICE;
            return NULL;
        }
        t->pool = pool;
    }
    *st = TFVM_OK;
    return t;
}

const char *dev_shape_str(const tfvm_tensor *t, char *buf, size_t size)
{
    if (!buf || size == 0)
        return "";
    size_t len = 0;
    int rank = t ? t->rank : 0;
    buf[0] = '\0';
    for (int i = -1; i <= rank; i++) {
        int n;
        size_t room = len < size ? size - len : 0;
        if (i < 0)
            n = snprintf(buf + len, room, "[");
        else if (i == rank)
            n = snprintf(buf + len, room, "]");
        else
            n = snprintf(buf + len, room, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
        if (n < 0 || (size_t)n >= room) /* truncated: keep what fits */
            return buf;
        len += (size_t)n;
    }
    return buf;
}

/* ---- Public API ------------------------------------------------------------ */
tfvm_tensor *tfvm_tensor_new(tfvm_dtype dtype, int rank, const int64_t *dims,
                             const tfvm_allocator *alloc)
{
    tfvm_tensor *t = dev_tensor_alloc(alloc, dtype, rank, dims);
    if (t && t->nbytes)
        memset(t->data, 0, t->nbytes);
    return t;
}

tfvm_tensor *tfvm_tensor_wrap(tfvm_dtype dtype, int rank, const int64_t *dims, void *data,
                              void (*release)(void *ud, void *data), void *ud, const tfvm_allocator *alloc)
{
    int64_t count;
    size_t nbytes;
    if (!tensor_size(dtype, rank, dims, &count, &nbytes) || (nbytes && !data) ||
        (uintptr_t)data % tfvm_dtype_size(dtype) != 0)
        return NULL;
    tfvm_tensor *t = ut_alloc(alloc, sizeof *t);
    if (!t)
        return NULL;
    tensor_init(t, alloc, sizeof *t, dtype, rank, dims, count, nbytes);
    t->data = data;
    t->release = release;
    t->release_ud = ud;
    return t;
}

tfvm_tensor *dev_tensor_clone(const tfvm_allocator *a, const tfvm_tensor *t)
{
    tfvm_tensor *c = dev_tensor_alloc(a, (tfvm_dtype)t->dtype, t->rank, t->dims);
    if (c && t->nbytes)
        memcpy(c->data, t->data, t->nbytes);
    return c;
}

/* (the mark of a borrowed tensor: nothing to hand back) */
static void borrowed_release(void *ud, void *data) { (void)ud, (void)data; }

tfvm_tensor *dev_tensor_borrow(const tfvm_allocator *a, tfvm_dtype dtype, int rank, const int64_t *dims,
                               const void *data)
{
    return tfvm_tensor_wrap(dtype, rank, dims, (void *)(uintptr_t)data, borrowed_release, NULL, a);
}

bool dev_tensor_borrowed(const tfvm_tensor *t) { return t->release == borrowed_release; }

tfvm_tensor *tfvm_tensor_ref(tfvm_tensor *t)
{
    if (t)
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    return t;
}

/* ---- Prepared forms ------------------------------------------------------------------
 * A list pushed at its head with a compare-and-swap and never shortened
 * while the tensor lives, so readers walk it without a lock. */
typedef struct dev_prep {
    struct dev_prep *next;
    tfvm_allocator alloc;
    size_t block;
    size_t key_len;
    unsigned char key[DEV_PREP_KEY];
    void *data; /* 64-byte aligned, inside the block */
} dev_prep;

static void prep_free_all(dev_prep *p)
{
    while (p) {
        dev_prep *next = p->next;
        tfvm_allocator a = p->alloc;
        ut_free(&a, p, p->block);
        p = next;
    }
}

static const dev_prep *prep_find(const dev_prep *p, const void *key, size_t key_len)
{
    for (; p; p = p->next)
        if (p->key_len == key_len && memcmp(p->key, key, key_len) == 0)
            return p;
    return NULL;
}

const void *dev_tensor_prep(const tfvm_tensor *ct, const void *key, size_t key_len, size_t bytes,
                            void (*make)(void *ctx, void *out), void *ctx)
{
    /* the list is the tensor's bookkeeping, not its elements: a const
     * tensor's list still grows */
    tfvm_tensor *t = (tfvm_tensor *)(uintptr_t)ct;
    if (!t || t->device != DEV_CPU || key_len > DEV_PREP_KEY ||
        atomic_load_explicit(&t->exposed, memory_order_relaxed))
        return NULL;
    dev_prep *head = atomic_load_explicit(&t->prep, memory_order_acquire);
    const dev_prep *found = prep_find(head, key, key_len);
    if (found)
        return found->data;
    size_t block;
    if (__builtin_add_overflow(sizeof(dev_prep) + 64, bytes, &block))
        return NULL;
    dev_prep *p = ut_alloc(&t->alloc, block);
    if (!p)
        return NULL;
    p->alloc = t->alloc;
    p->block = block;
    p->key_len = key_len;
    memcpy(p->key, key, key_len);
    p->data = ut_align_up((char *)(p + 1), 64);
    make(ctx, p->data);
    for (;;) {
        p->next = head;
        if (atomic_compare_exchange_weak_explicit(&t->prep, &head, p, memory_order_acq_rel,
                                                  memory_order_acquire))
            return p->data;
        /* another thread pushed first: it may have made the same form */
        if ((found = prep_find(head, key, key_len))) {
            ut_free(&p->alloc, p, p->block);
            return found->data;
        }
    }
}

bool dev_tensor_mine(const tfvm_tensor *t)
{
    tfvm_tensor *m = (tfvm_tensor *)(uintptr_t)t;
    const bool own_block = (uintptr_t)t->data - (uintptr_t)t < t->block;
    return own_block && t->device == DEV_CPU && !t->pool && atomic_load_explicit(&m->refs, memory_order_acquire) == 1 &&
           !atomic_load_explicit(&m->exposed, memory_order_relaxed) &&
           !atomic_load_explicit(&m->mirror, memory_order_acquire);
}

bool tfvm_tensor_unique(const tfvm_tensor *t)
{
    /* acquire: pairs with the release of other holders' tfvm_tensor_free, whose
     * reads of the data then happen before the caller's writes */
    return t && atomic_load_explicit(&((tfvm_tensor *)t)->refs, memory_order_acquire) == 1;
}

void tfvm_tensor_free(tfvm_tensor *t)
{
    if (!t)
        return;
    /* acq_rel: the last releaser must see every other holder's writes to the
     * data before the block goes back to the allocator. */
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
        return;
    tfvm_tensor *m = atomic_load_explicit(&t->mirror, memory_order_acquire);
    if (m)
        tfvm_tensor_free(m);
    prep_free_all(atomic_load_explicit(&t->prep, memory_order_acquire));
    if (t->pool)
        dev_pool_put(t->pool, t->data, t->nbytes);
    if (t->release)
        t->release(t->release_ud, t->data);
    tfvm_allocator a = t->alloc;
    ut_free(&a, t, t->block);
}

tfvm_dtype tfvm_tensor_dtype(const tfvm_tensor *t) { return t ? (tfvm_dtype)t->dtype : (tfvm_dtype)0; }
int tfvm_tensor_rank(const tfvm_tensor *t) { return t ? t->rank : -1; }
const int64_t *tfvm_tensor_dims(const tfvm_tensor *t) { return t ? t->dims : NULL; }
int64_t tfvm_tensor_count(const tfvm_tensor *t) { return t ? t->count : 0; }
/* Device data is not the caller's to touch (results reach the API on the host). */
void *tfvm_tensor_data(tfvm_tensor *t) { return t && t->device == DEV_CPU ? t->data : NULL; }
const void *tfvm_tensor_cdata(const tfvm_tensor *t) { return t && t->device == DEV_CPU ? t->data : NULL; }

void tfvm_value_release(tfvm_value *v)
{
    if (v && v->tensor) {
        tfvm_tensor_free(v->tensor);
        v->tensor = NULL;
    }
}
