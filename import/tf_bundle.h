/* import/tf_bundle.h — a minimal TensorBundle (TensorFlow checkpoint) reader
 * for SavedModel variables (import/tf_bundle.c). */
#ifndef TFVM_IMPORT_TF_BUNDLE_H
#define TFVM_IMPORT_TF_BUNDLE_H

#include "import/pb.h"
#include "savedmodel.pb-c.h"

#define IMP_BUNDLE_MAX_SHARDS 64

typedef struct imp_bundle {
    const tfvm_allocator *a;
    char prefix[1024];    /* "DIR/variables/variables" */
    char *index;          /* PREFIX.index */
    size_t index_len;
    int n_shards;
    char *shards[IMP_BUNDLE_MAX_SHARDS]; /* PREFIX.data-*, read when first needed */
    size_t shard_len[IMP_BUNDLE_MAX_SHARDS];
    imp_pb pb;            /* the entries unpacked so far, freed at close */
    void **msgs;
    size_t n_msgs, cap_msgs;
} imp_bundle;

/* One saved tensor: its dtype (TensorFlow's DataType), shape and bytes,
 * valid until imp_bundle_close. */
typedef struct imp_bundle_tensor {
    int dtype;
    const TfvmTf__TensorShapeProto *shape;
    const uint8_t *data;
    size_t size;
} imp_bundle_tensor;

/* Reads PREFIX.index (and its header). On failure nothing is left to close. */
tfvm_status imp_bundle_open(imp_bundle *b, const char *prefix, const tfvm_allocator *a, tfvm_error *err);
/* The tensor saved under key. */
tfvm_status imp_bundle_get(imp_bundle *b, const char *key, imp_bundle_tensor *out, tfvm_error *err);
/* The bytes of a scalar string tensor saved under key. */
tfvm_status imp_bundle_string(imp_bundle *b, const char *key, const uint8_t **data, size_t *len, tfvm_error *err);
void imp_bundle_close(imp_bundle *b);

#endif
