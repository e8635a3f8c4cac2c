/* import/api.c — the public entry points of the importers (include/tfvm.h):
 * ONNX and TensorFlow models from bytes into a program handle. Files of any
 * kind are opened a layer above, by front/open.c. */
#include "import/import.h"
#include "analysis/facts.h"
#include "loader/loader.h"

tfvm_status imp_program(tfvm_format fmt, const void *data, size_t size, imp_release rel, const char *name,
                        const char *extra, int opt_level, bool check, const tfvm_config *cfg, tfvm_program **out,
                        tfvm_error *err)
{
    tfvm_program *p = ld_program_new(cfg);
    if (!p) {
        if (rel.fn)
            rel.fn(rel.ctx);
        return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory", name);
    }
    const void *d = data ? data : "";
    tfvm_status st;
    if (fmt == TFVM_FORMAT_ONNX) {
        st = imp_onnx_release(d, size, rel, name, extra, opt_level, &p->alloc, &p->isa, err);
    } else {
        st = imp_tf_logged(d, size, name, extra, opt_level, cfg, &p->alloc, &p->isa, err);
        if (rel.fn)
            rel.fn(rel.ctx);
    }
    return an_program_finish(p, st, check, out, err);
}

tfvm_status imp_program_saved_model(const char *dir, const char *signature, int opt_level, bool check,
                                    const tfvm_config *cfg, tfvm_program **out, tfvm_error *err)
{
    tfvm_program *p = ld_program_new(cfg);
    if (!p)
        return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory", dir);
    tfvm_status st = imp_saved_model(dir, signature, opt_level, cfg, &p->alloc, &p->isa, err);
    return an_program_finish(p, st, check, out, err);
}

tfvm_status tfvm_program_import_onnx(const void *data, size_t size, const char *name, const char *base_dir,
                                     const tfvm_config *cfg, tfvm_program **out, tfvm_error *err)
{
    if (out)
        *out = NULL;
    if (!out || (!data && size))
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_import_onnx: NULL argument");
    return imp_program(TFVM_FORMAT_ONNX, data, size, (imp_release){0}, name ? name : "<onnx>", base_dir, 1, true, cfg,
                       out, err);
}

tfvm_status tfvm_program_import_tf(const void *data, size_t size, const char *name, const char *outputs,
                                   const tfvm_config *cfg, tfvm_program **out, tfvm_error *err)
{
    if (out)
        *out = NULL;
    if (!out || (!data && size))
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_import_tf: NULL argument");
    return imp_program(TFVM_FORMAT_TF, data, size, (imp_release){0}, name ? name : "<pb>", outputs, 1, true, cfg, out,
                       err);
}
