/* test/fuzz/fuzz_tf.c — libFuzzer target for the TensorFlow importer: any
 * bytes must import or fail with one line naming the file, never crash,
 * leak, hang or hit UB. Seeds: test/tf/fixtures (the .pb GraphDefs). */
#include <stdint.h>
#include <string.h>

#include "import/import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    isa_program p;
    tfvm_error err;
    tfvm_status st = imp_tf(data, size, "fuzz.pb", NULL, 1, NULL, &p, &err);
    if (st != TFVM_OK) {
        if (err.code != st || !err.message[0] || strchr(err.message, '\n') ||
            strncmp(err.message, "fuzz.pb: ", 9) != 0)
            __builtin_trap();
        return 0;
    }
    isa_program_release(&p);
    return 0;
}
