/* compiler/api.c — tfvm_program_compile (include/tfvm.h): .tfg source to a
 * verified, immutable program handle. */
#include <string.h>

#include "compiler.h"

void tfvm_compile_options_init(tfvm_compile_options *o)
{
    if (o) {
        o->entry = NULL;
        o->opt_level = 1;
    }
}

/* The public view of the entry points, made once so that tfvm_program_entry
 * never allocates (the loader does the same for the programs it reads). */
static tfvm_status entry_infos(tfvm_program *p, tfvm_error *err)
{
    isa_program *ip = &p->isa;
    p->entries = ut_arena_array(&ip->arena, ip->n_entries + 1, sizeof(tfvm_entry_info));
    if (!p->entries)
        return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory", ip->name);
    for (uint32_t i = 0; i < ip->n_entries; i++) {
        const isa_entry *e = &ip->entries[i];
        tfvm_param_info *ps = ut_arena_array(&ip->arena, (size_t)e->n_params + e->n_results + 1, sizeof *ps);
        if (!ps)
            return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory", ip->name);
        for (uint32_t k = 0; k < e->n_params + e->n_results; k++) {
            const isa_param *q = k < e->n_params ? &e->params[k] : &e->results[k - e->n_params];
            ps[k].name = q->name;
            ps[k].dtype = (tfvm_dtype)q->dtype;
            ps[k].rank = q->rank == ISA_RANK_ANY ? -1 : q->rank;
        }
        p->entries[i] = (tfvm_entry_info){e->name, e->n_params, e->n_results, ps, ps + e->n_params};
    }
    return TFVM_OK;
}

tfvm_status tfvm_program_compile(const char *src, size_t len, const char *name, const tfvm_compile_options *opts,
                                 const tfvm_config *cfg, tfvm_program **out, tfvm_error *err)
{
    if (!out || (!src && len))
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_compile: NULL argument");
    *out = NULL;
    tfvm_compile_options o;
    tfvm_compile_options_init(&o);
    if (opts)
        o = *opts;
    const tfvm_allocator *a = cfg ? &cfg->allocator : NULL;
    const char *nm = name ? name : "<tfg>";
    tfvm_program *p = ut_alloc(a, sizeof *p);
    if (!p)
        return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory", nm);
    memset(p, 0, sizeof *p);
    p->alloc = a ? *a : (tfvm_allocator){0};
    tfvm_status st = cc_compile(src, len, nm, o.entry, o.opt_level, &p->alloc, &p->isa, err);
    if (st == TFVM_OK) {
        st = entry_infos(p, err);
        if (st != TFVM_OK)
            isa_program_release(&p->isa);
    }
    if (st != TFVM_OK) {
        tfvm_allocator pa = p->alloc;
        ut_free(&pa, p, sizeof *p);
        return st;
    }
    *out = p;
    return TFVM_OK;
}
