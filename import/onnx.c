/* import/onnx.c — ONNX ModelProto to the structured IR (placeholder until
 * the importer lands). */
#include "import/import.h"

tfvm_status imp_onnx(const void *data, size_t len, const char *name, const char *dir, int opt_level,
                     const tfvm_allocator *a, isa_program *out, tfvm_error *err)
{
    (void)data, (void)len, (void)dir, (void)opt_level, (void)a, (void)out;
    return ut_err(err, TFVM_ERR_UNSUPPORTED, "%s: ONNX import is not built yet", name);
}
