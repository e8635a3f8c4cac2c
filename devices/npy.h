/* devices/npy.h — the .npy reader's internals, exposed so that the file loader,
 * an in-memory decoder and the fuzz target (test/fuzz/fuzz_npy.c) share them. */
#ifndef TFVM_NPY_H
#define TFVM_NPY_H

#include "devices/tensor.h"
#include "util/util.h"

/* Longest header (preamble + dict text) we read; NumPy's own files need a few
 * hundred bytes, so anything near this is hostile or not ours. */
#define DEV_NPY_MAX_HEADER (1u << 20)
/* Bytes before the header length is known: magic, version, length field. */
#define DEV_NPY_PREAMBLE 12

typedef struct dev_npy_header {
    int major, minor;              /* format version: 1.0, 2.0 or 3.0 */
    size_t header_len;             /* bytes before the data (preamble + dict) */
    tfvm_dtype dtype;
    int rank;
    int64_t dims[TFVM_MAX_RANK];
    int64_t count;                 /* elements */
    size_t nbytes;                 /* bytes of data that must follow */
} dev_npy_header;

/* Checks magic and version in the first min(size, DEV_NPY_PREAMBLE) bytes of
 * a file and stores the total header length (preamble + dict) in h. Errors
 * (TFVM_ERR_FORMAT) are "name: ..." one-liners. */
tfvm_status dev_npy_preamble(const void *data, size_t size, const char *name,
                             dev_npy_header *h, tfvm_error *err);
/* Parses a whole header: `data` holds at least the header (size may be
 * larger; bytes past h->header_len are not read). Calls dev_npy_preamble
 * itself. Every length is bounded and every product overflow-checked, so any
 * input is safe. */
tfvm_status dev_npy_parse(const void *data, size_t size, const char *name,
                          dev_npy_header *h, tfvm_error *err);
/* Checks that bool data holds only 0 and 1 bytes. */
tfvm_status dev_npy_check_data(const dev_npy_header *h, const void *data, const char *name,
                               tfvm_error *err);
/* Decodes a whole .npy image from memory into a new tensor (*out holds one
 * reference). The data must be exactly h.nbytes long. */
tfvm_status dev_npy_decode(const void *data, size_t size, const char *name,
                           const tfvm_allocator *alloc, tfvm_tensor **out, tfvm_error *err);
/* Longest header dev_npy_header_write produces: rank <= 8 keeps the dict
 * under 300 bytes, so tfvm always writes format 1.0. */
#define DEV_NPY_WRITE_MAX 512
/* Writes the header NumPy 2.x itself writes for t (same padding, so files are
 * byte-identical to np.save's) into buf; returns its length. */
size_t dev_npy_header_write(const tfvm_tensor *t, unsigned char buf[DEV_NPY_WRITE_MAX]);

#endif
