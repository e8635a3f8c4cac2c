/* compiler/api.c — tfvm_program_compile (include/tfvm.h): .tfg source to a
 * verified, immutable program handle. */
#include "compiler/compiler.h"
#include "analysis/facts.h"
#include "loader/loader.h"

/* Compile warnings go to the configuration's log at TFVM_LOG_WARN. */
static void api_warn(void *ud, const char *message)
{
    const tfvm_config *cfg = ud;
    cfg->log(cfg->log_ud, TFVM_LOG_WARN, message);
}

void tfvm_compile_options_init(tfvm_compile_options *o)
{
    if (o) {
        o->entry = NULL;
        o->opt_level = 1;
        o->overflow_trap = false;
    }
}

tfvm_status tfvm_program_compile(const char *src, size_t len, const char *name, const tfvm_compile_options *opts,
                                 const tfvm_config *cfg, tfvm_program **out, tfvm_error *err)
{
    return cc_program(src, len, name, opts, true, cfg, out, err);
}

tfvm_status cc_program(const char *src, size_t len, const char *name, const tfvm_compile_options *opts, bool check,
                       const tfvm_config *cfg, tfvm_program **out, tfvm_error *err)
{
    if (!out || (!src && len))
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_compile: NULL argument");
    *out = NULL;
    tfvm_compile_options o;
    tfvm_compile_options_init(&o);
    if (opts)
        o = *opts;
    const char *nm = name ? name : "<tfg>";
    tfvm_program *p = ld_program_new(cfg);
    if (!p)
        return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory", nm);
    cc_options co = {o.entry, o.opt_level, o.overflow_trap, cfg && cfg->log ? api_warn : NULL, (void *)cfg};
    return an_program_finish(p, cc_compile(src, len, nm, &co, &p->alloc, &p->isa, err), check, out, err);
}
