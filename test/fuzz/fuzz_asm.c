/* test/fuzz/fuzz_asm.c — libFuzzer target for the .tfasm assembler: any text
 * either fails with a message or assembles to a program that survives
 * dis -> asm with identical ld_write bytes (and a stable disassembly). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/loader.h"

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_asm: %s\n%s\n", what, detail ? detail : "");
    abort(); /* test code: libFuzzer records the input */
}

static char *dis(const isa_program *p, size_t *len)
{
    ut_buf b;
    ut_buf_init(&b, NULL);
    tfvm_error err;
    if (ld_disassemble(p, &b, &err) != TFVM_OK)
        die("ld_disassemble failed", err.message);
    return ut_buf_take(&b, len);
}

static char *bytes(const isa_program *p, size_t *len)
{
    ut_buf b;
    ut_buf_init(&b, NULL);
    tfvm_error err;
    if (ld_write(p, &b, &err) != TFVM_OK)
        die("ld_write failed", err.message);
    return ut_buf_take(&b, len);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    isa_program p, q;
    tfvm_error err;
    tfvm_status st = ld_assemble((const char *)data, size, "fuzz.tfasm", NULL, &p, &err);
    if (st != TFVM_OK) {
        if (st != TFVM_ERR_SYNTAX && st != TFVM_ERR_FORMAT)
            die("unexpected status", err.message);
        if (!memchr(err.message, '\0', sizeof err.message) || strchr(err.message, '\n'))
            die("message is not one line", err.message);
        return 0;
    }
    for (uint32_t i = 0; i < p.n_insts; i++) {
        ut_buf b;
        ut_buf_init(&b, NULL);
        ld_format_inst(&p, i, &b);
        ut_buf_free(&b);
    }
    size_t dl, dl2, wl, wl2;
    char *d = dis(&p, &dl);
    if (ld_assemble(d, dl, "dis.tfasm", NULL, &q, &err) != TFVM_OK)
        die(err.message, d);
    char *w = bytes(&p, &wl), *w2 = bytes(&q, &wl2);
    if (wl != wl2 || memcmp(w, w2, wl) != 0)
        die("ld_write bytes differ after dis -> asm", d);
    char *d2 = dis(&q, &dl2);
    if (dl != dl2 || memcmp(d, d2, dl) != 0)
        die("disassembly is not stable", d2);
    free(d);
    free(d2);
    free(w);
    free(w2);
    isa_program_release(&p);
    isa_program_release(&q);
    return 0;
}
