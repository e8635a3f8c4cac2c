/* test/fuzz/fuzz_onnx.c — libFuzzer target for the ONNX importer: any bytes
 * must import or fail with one line naming the model, never crash, leak,
 * hang or hit UB. Seeds: the models of test/onnx/models. */
#include <stdint.h>
#include <string.h>

#include "import/import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    isa_program p;
    tfvm_error err;
    tfvm_status st = imp_onnx(data, size, "fuzz.onnx", NULL, 1, NULL, &p, &err);
    if (st != TFVM_OK) {
        if (err.code != st || !err.message[0] || strchr(err.message, '\n') ||
            strncmp(err.message, "fuzz.onnx: ", 11) != 0)
            __builtin_trap();
        return 0;
    }
    isa_program_release(&p);
    return 0;
}
