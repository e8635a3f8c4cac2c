/* test/fuzz/fuzz_loader.c — libFuzzer target for the .tfvm reader and the verifier.
 * Any input must load or fail cleanly (ASan/UBSan watch); what loads must round-trip:
 * write(read(x)) reads back to a program that writes the same bytes. `make fuzz` runs it
 * (the seeds in test/fuzz/seeds come from test/bad/gen_bad.c). */
#include "loader/loader.h"

#include <stdlib.h>
#include <string.h>

static unsigned char *write_or_trap(const isa_program *p, size_t *len)
{
    ut_buf b;
    tfvm_error err;
    ut_buf_init(&b, NULL);
    if (ld_write(p, &b, &err) != TFVM_OK)
        __builtin_trap();
    return (unsigned char *)ut_buf_take(&b, len);
}

static void one(const uint8_t *data, size_t size)
{
    isa_program p, q;
    tfvm_error err;
    tfvm_status st = ld_read(data, size, "fuzz.tfvm", NULL, &p, &err);
    if (st != TFVM_OK) {
        /* Every failure is a format error with the standard prefix. */
        if (st != TFVM_ERR_FORMAT || strncmp(err.message, "fuzz.tfvm: bad .tfvm file (", 27) != 0)
            __builtin_trap();
        return;
    }
    size_t n1, n2;
    unsigned char *a = write_or_trap(&p, &n1);
    if (!a)
        __builtin_trap();
    if (ld_read(a, n1, "fuzz.tfvm", NULL, &q, &err) != TFVM_OK)
        __builtin_trap();
    unsigned char *b = write_or_trap(&q, &n2);
    if (!b || n1 != n2 || memcmp(a, b, n1) != 0)
        __builtin_trap();
    /* Only the second generation must be a fixed point: valid but
     * non-canonical inputs exist (gaps between sections, unused string
     * bytes, newer-minor additions), and the writer normalises them. */
    free(a);
    free(b);
    isa_program_release(&q);
    isa_program_release(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one(data, size);
    /* Almost every mutation breaks the checksum; run the input again with
     * the checksum fixed so that mutations reach the sections and the verifier. */
    if (size >= 32) {
        uint8_t *c = malloc(size);
        if (!c)
            return 0;
        memcpy(c, data, size);
        uint32_t crc = ut_crc32(0, c + 28, size - 28);
        for (int k = 0; k < 4; k++)
            c[24 + k] = (uint8_t)(crc >> (8 * k));
        one(c, size);
        free(c);
    }
    return 0;
}
