/* devices/tensor.h — dense tensors: the struct behind the public tfvm_tensor,
 * and the helpers kernels and the VM use on them. Host memory only for now;
 * the device layer (issue 5) adds placement. */
#ifndef TFVM_TENSOR_H
#define TFVM_TENSOR_H

#include <stdatomic.h>

#include "util/util.h"

struct tfvm_tensor {
    atomic_uint refs;
    uint8_t dtype;                 /* tfvm_dtype */
    uint8_t rank;
    int64_t dims[TFVM_MAX_RANK];
    int64_t count;                 /* product of dims (1 for rank 0) */
    size_t nbytes;                 /* count * dtype size */
    tfvm_allocator alloc;          /* what allocated this block */
    size_t block;                  /* bytes of the whole allocation */
    void *data;                    /* 64-byte aligned, inside the same block */
};

/* Like tfvm_tensor_new but uninitialised data (kernels overwrite it). Returns
 * NULL when the shape is invalid or memory runs out. */
tfvm_tensor *dev_tensor_alloc(const tfvm_allocator *a, tfvm_dtype dtype, int rank,
                              const int64_t *dims);
/* Formats a shape as "[2, 3]" ("[]" for rank 0). */
const char *dev_shape_str(const tfvm_tensor *t, char *buf, size_t size);

#endif
