/* front/load.c — tfvm_program_load_memory and tfvm_program_assemble
 * (include/tfvm.h): .tfvm bytes and .tfasm text through the loader; .tfasm
 * then gets the analyser's load-time check (analysis/facts.h), as every
 * program compiled from source does, .tfvm bytes only when asked. */
#include "analysis/facts.h"
#include "front/front.h"
#include "loader/loader.h"

tfvm_status tfvm_program_load_memory(const void *data, size_t size, const char *name, const tfvm_config *cfg,
                                     tfvm_program **out, tfvm_error *err)
{
    return fr_load(data, size, name, false, cfg, out, err); /* bytecode: verified, not analysed */
}

tfvm_status fr_load(const void *data, size_t size, const char *name, bool check, const tfvm_config *cfg,
                    tfvm_program **out, tfvm_error *err)
{
    if (!out || (!data && size))
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_load_memory: NULL argument");
    *out = NULL;
    tfvm_program *p = ld_program_new(cfg);
    if (!p)
        return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory", name ? name : "<memory>");
    return an_program_finish(p, ld_read(data, size, name ? name : "<memory>", &p->alloc, &p->isa, err), check,
                             out, err);
}

tfvm_status tfvm_program_assemble(const char *text, size_t len, const char *name, const tfvm_config *cfg,
                                  tfvm_program **out, tfvm_error *err)
{
    return fr_assemble(text, len, name, true, cfg, out, err);
}

tfvm_status fr_assemble(const char *text, size_t len, const char *name, bool check, const tfvm_config *cfg,
                        tfvm_program **out, tfvm_error *err)
{
    if (!out || (!text && len))
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_assemble: NULL argument");
    *out = NULL;
    tfvm_program *p = ld_program_new(cfg);
    if (!p)
        return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory", name ? name : "<text>");
    const char *nm = name ? name : "<text>";
    return an_program_finish(p, ld_assemble(text ? text : "", len, nm, &p->alloc, &p->isa, err), check,
                             out, err);
}
