/* devices/tensor.h — dense tensors: the struct behind the public tfvm_tensor,
 * and the helpers kernels and the VM use on them. A tensor's data lives on
 * the host or on a device (docs/devices.md); the public API sees host data. */
#ifndef TFVM_TENSOR_H
#define TFVM_TENSOR_H

#include <stdatomic.h>

#include "util/util.h"

struct dev_pool;
struct dev_prep;

struct tfvm_tensor {
    atomic_uint refs;
    uint8_t dtype;                 /* tfvm_dtype */
    uint8_t rank;
    uint8_t device;                /* dev_id (devices/device.h): 0 = host memory */
    atomic_uchar exposed;          /* handed to the API user, who may write it: its
                                      mirror is stale-prone and never used again */
    int64_t dims[TFVM_MAX_RANK];
    int64_t count;                 /* product of dims (1 for rank 0) */
    size_t nbytes;                 /* count * dtype size */
    tfvm_allocator alloc;          /* what allocated this block */
    size_t block;                  /* bytes of the whole allocation */
    void *data;                    /* host: 64-byte aligned, inside the same block;
                                      device: device memory from `pool` */
    struct dev_pool *pool;         /* device data: the pool its nbytes go back to */
    /* A copy of the same elements on the other side (host <-> device), made
     * the first time a consumer on that side needs it and freed with this
     * tensor; valid because tensors never change once made (devices/place.c). */
    _Atomic(struct tfvm_tensor *) mirror;
    /* Forms of these elements prepared for a kernel (weights transformed or
     * packed once for every run: dev_tensor_prep), freed with this tensor;
     * valid for the same reason. */
    _Atomic(struct dev_prep *) prep;
    /* tfvm_tensor_wrap: data is the caller's, handed back through release
     * when the last reference goes (block then covers only the header) */
    void (*release)(void *ud, void *data);
    void *release_ud;
};

/* Like tfvm_tensor_new but uninitialised data (kernels overwrite it). Returns
 * NULL when the shape is invalid or memory runs out. */
tfvm_tensor *dev_tensor_alloc(const tfvm_allocator *a, tfvm_dtype dtype, int rank,
                              const int64_t *dims);
/* A tensor whose data lives in device memory taken from `pool` (its header
 * from `a`). NULL when the shape is invalid (*st = TFVM_ERR_ARGUMENT), the
 * header cannot be allocated (TFVM_ERR_NOMEM) or device memory runs out
 * (TFVM_ERR_DEVICE). */
tfvm_tensor *dev_tensor_alloc_on(const tfvm_allocator *a, struct dev_pool *pool, tfvm_dtype dtype,
                                 int rank, const int64_t *dims, tfvm_status *st);
/* Whether the caller may change t unseen: it holds the only reference (a
 * kernel's input whose token the VM consumed), t's data lies on the host in
 * t's own block (not a caller's buffer: tfvm_tensor_wrap), and neither the
 * API user (exposed) nor a device copy (mirror) can see it. STACK_PUT
 * writes its row in place then, and the reshapes relabel the dims. */
bool dev_tensor_mine(const tfvm_tensor *t);
/* A host copy of host tensor t's elements (allocated with a), or NULL when
 * memory runs out. */
tfvm_tensor *dev_tensor_clone(const tfvm_allocator *a, const tfvm_tensor *t);
/* A tensor over a program constant's elements, borrowed (no copy): the
 * program outlives the VM that made it, but not necessarily the tensors
 * the VM hands out, so such a tensor is copied before it becomes a run's
 * result (dev_vm_result). NULL when data is not aligned to the element size
 * or memory runs out (the caller then copies). */
tfvm_tensor *dev_tensor_borrow(const tfvm_allocator *a, tfvm_dtype dtype, int rank, const int64_t *dims,
                               const void *data);
/* Whether t is such a tensor. */
bool dev_tensor_borrowed(const tfvm_tensor *t);
/* Longest key of a prepared form (dev_tensor_prep), in bytes. */
#define DEV_PREP_KEY 96
/* The form of t's elements named by key[0, key_len) (which says everything
 * the form depends on besides the elements: kernel, layout, sizes), `bytes`
 * long and 64-byte aligned, that make(ctx, out) writes: made the first time
 * a kernel asks for it and kept with t until t is freed, so that weights are
 * transformed once, not on every run. Safe from several threads at once
 * (two may both make it; one copy is kept). NULL when t is on a device, the
 * API user may write it (exposed), key_len > DEV_PREP_KEY or memory runs
 * out: the caller then prepares into memory of its own. */
const void *dev_tensor_prep(const tfvm_tensor *t, const void *key, size_t key_len, size_t bytes,
                            void (*make)(void *ctx, void *out), void *ctx);

/* Formats a shape as "[2, 3]" ("[]" for rank 0). */
const char *dev_shape_str(const tfvm_tensor *t, char *buf, size_t size);

#endif
