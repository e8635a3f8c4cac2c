/* test/fuzz/fuzz_npy.c — libFuzzer target for the .npy reader: any bytes must
 * decode or fail with a one-line FORMAT error, never crash, leak or hit UB.
 *   clang -fsanitize=fuzzer,address,undefined (see the Makefile's fuzz-npy) */
#include <stdint.h>
#include <string.h>

#include "devices/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfvm_tensor *t = NULL;
    tfvm_error err;
    tfvm_status st = dev_npy_decode(data, size, "fuzz.npy", NULL, &t, &err);
    if (st != TFVM_OK) {
        /* NOMEM only for sizes the file itself holds, which libFuzzer keeps small */
        if (t || st != TFVM_ERR_FORMAT || err.code != st || !err.message[0] ||
            strchr(err.message, '\n') || strncmp(err.message, "fuzz.npy: ", 10) != 0)
            __builtin_trap();
        return 0;
    }
    /* What we read, we can write: our header for it parses back the same. */
    unsigned char hdr[DEV_NPY_WRITE_MAX];
    size_t n = dev_npy_header_write(t, hdr);
    dev_npy_header h;
    if (!t || n > sizeof hdr || dev_npy_parse(hdr, n, "fuzz.npy", &h, &err) != TFVM_OK ||
        h.dtype != t->dtype || h.rank != t->rank || h.nbytes != t->nbytes ||
        memcmp(h.dims, t->dims, sizeof(int64_t) * t->rank) != 0)
        __builtin_trap();
    tfvm_tensor_free(t);
    return 0;
}
