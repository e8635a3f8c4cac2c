/* analysis/api.c — the analyser through the public inspection header
 * (include/tfvm_debug.h, "The static analyser"): what `tfvm check` and
 * `tfvm dot` print, without the internal headers. */
#include <stdio.h>

#include "analysis/facts.h"
#include "tfvm_debug.h"

struct tfvm_facts {
    isa_facts F;
    tfvm_allocator alloc;
};

tfvm_status tfvm_program_facts(const tfvm_program *p, tfvm_facts **out, tfvm_error *err)
{
    if (!p || !out)
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_facts: NULL argument");
    *out = NULL;
    tfvm_facts *f = ut_alloc(&p->alloc, sizeof *f);
    if (!f)
        return ut_err(err, TFVM_ERR_NOMEM, "tfvm_program_facts: out of memory");
    f->alloc = p->alloc;
    tfvm_status st = isa_facts_analyse(&p->isa, &p->alloc, &f->F, err);
    if (st != TFVM_OK) {
        ut_free(&f->alloc, f, sizeof *f);
        return st;
    }
    *out = f;
    return TFVM_OK;
}

void tfvm_facts_free(tfvm_facts *f)
{
    if (!f)
        return;
    tfvm_allocator a = f->alloc;
    isa_facts_free(&f->F);
    ut_free(&a, f, sizeof *f);
}

const char *tfvm_facts_line(const tfvm_facts *f, uint32_t i, char *buf, size_t size)
{
    if (!size)
        return buf;
    buf[0] = '\0';
    if (!f || i >= f->F.p->n_insts)
        return buf;
    uint32_t no = isa_outs(&f->F.p->insts[i]);
    if (!no) {
        ut_fmt(buf, size, "-");
        return buf;
    }
    size_t n = 0;
    for (uint32_t k = 0; k < no && n + 1 < size; k++) {
        char s[160], v[512];
        const isa_fact *x = isa_facts_of(&f->F, i, k);
        isa_fact_value_str(x, v, sizeof v);
        n += (size_t)snprintf(buf + n, size - n, "%s%s%s%s", k ? "; " : "", isa_fact_str(x, s, sizeof s),
                              v[0] ? " = " : "", v);
    }
    return buf;
}

const char *tfvm_facts_kernel(const tfvm_facts *f, uint32_t i, int threads, char *buf, size_t size)
{
    if (!size)
        return buf;
    buf[0] = '\0';
    if (!f || i >= f->F.p->n_insts)
        return buf;
    unsigned n = threads > 0 ? (unsigned)threads : 1;
    if (threads <= 0) {
        /* one per physical core, as a VM's tfvm_config.threads 0 */
        ut_topo *t = ut_topo_load();
        n = ut_topo_cores(t);
        ut_topo_free(t);
    }
    return an_kernel_plan(&f->F, i, n > 1024 ? 1024 : n, buf, size);
}

size_t tfvm_facts_conflict_count(const tfvm_facts *f) { return f ? f->F.n_conflicts : 0; }

uint32_t tfvm_facts_conflict(const tfvm_facts *f, size_t k, const char **message)
{
    if (!f || k >= f->F.n_conflicts) {
        if (message)
            *message = NULL;
        return UINT32_MAX;
    }
    if (message)
        *message = f->F.conflicts[k].msg;
    return f->F.conflicts[k].inst;
}
