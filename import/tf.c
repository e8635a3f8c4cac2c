/* import/tf.c — TensorFlow GraphDef to the structured IR (placeholder until
 * the importer lands). */
#include "import/import.h"

tfvm_status imp_tf(const void *data, size_t len, const char *name, const char *outputs, int opt_level,
                   const tfvm_allocator *a, isa_program *out, tfvm_error *err)
{
    (void)data, (void)len, (void)outputs, (void)opt_level, (void)a, (void)out;
    return ut_err(err, TFVM_ERR_UNSUPPORTED, "%s: TensorFlow import is not built yet", name);
}
