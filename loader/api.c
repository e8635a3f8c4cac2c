/* loader/api.c — the program handle every front end makes (ld_program_new,
 * ld_program_finish), and the public program functions of tfvm.h that need
 * no more than the loader: save, disassemble, entry-point inspection. (Loading
 * .tfvm bytes and .tfasm text is front/load.c's: it runs the analyser's
 * load-time check, a layer above.) */
#include <stdlib.h>
#include <string.h>

#include "loader.h"

tfvm_program *ld_program_new(const tfvm_config *cfg)
{
    const tfvm_allocator *a = cfg ? &cfg->allocator : NULL;
    tfvm_program *p = ut_alloc(a, sizeof *p);
    if (p) {
        p->alloc = a ? *a : (tfvm_allocator){0};
        p->entries = NULL;
        p->channels = NULL;
        p->n_channels = 0;
        isa_program_init(&p->isa, &p->alloc);
    }
    return p;
}

/* The public view of the entry points, made once so that tfvm_program_entry
 * never allocates (programs are shared read-only between threads). */
static tfvm_status make_entry_infos(tfvm_program *p, tfvm_error *err)
{
    isa_program *ip = &p->isa;
    const char *nm = ip->name ? ip->name : "program";
    p->entries = ut_arena_array(&ip->arena, ip->n_entries + 1, sizeof(tfvm_entry_info));
    if (!p->entries)
        return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory", nm);
    for (uint32_t i = 0; i < ip->n_entries; i++) {
        const isa_entry *e = &ip->entries[i];
        tfvm_param_info *ps = ut_arena_array(&ip->arena, (size_t)e->n_params + e->n_results + 1, sizeof *ps);
        if (!ps)
            return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory", nm);
        for (uint32_t k = 0; k < e->n_params + e->n_results; k++) {
            const isa_param *q = k < e->n_params ? &e->params[k] : &e->results[k - e->n_params];
            ps[k].name = q->name;
            ps[k].dtype = (tfvm_dtype)q->dtype;
            ps[k].is_tensor = q->rank != 0;
            ps[k].rank = q->rank == 0 ? 0 : q->shaped ? q->ndim : -1;
            ps[k].dims = q->shaped && q->ndim ? q->dims : NULL;
            ps[k].dim_names = q->shaped && q->ndim ? q->dim_names : NULL;
            ps[k].has_default = q->has_default;
        }
        p->entries[i] = (tfvm_entry_info){e->name, e->n_params, e->n_results, ps, ps + e->n_params};
    }
    return TFVM_OK;
}

/* While sorting, a channel's `uses` holds its instruction's index: by name,
 * then program order (each name's first instruction first). */
static int by_channel_name(const void *a, const void *b)
{
    const tfvm_channel_info *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : x->uses < y->uses ? -1 : x->uses > y->uses;
}

/* The public view of the channels, made once as the entries' is: every FEED
 * and FETCH, sorted by name (a stable order: the first instruction of each
 * name first), then one per name with its count. */
static tfvm_status make_channel_infos(tfvm_program *p, tfvm_error *err)
{
    isa_program *ip = &p->isa;
    size_t n = 0;
    for (uint32_t i = 0; i < ip->n_insts; i++)
        n += isa_ops[ip->insts[i].op].cls == ISA_CLASS_HOST;
    p->n_channels = 0;
    p->channels = ut_arena_array(&ip->arena, n + 1, sizeof *p->channels);
    if (!p->channels)
        return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory", ip->name ? ip->name : "program");
    for (uint32_t i = 0; i < ip->n_insts; i++) {
        const isa_inst *in = &ip->insts[i];
        if (isa_ops[in->op].cls != ISA_CLASS_HOST)
            continue;
        char name[ISA_MAX_CHAN + 1];
        const char *kept = ut_arena_strdup(&ip->arena, isa_chan_name(ip, i, name));
        if (!kept)
            return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory", ip->name ? ip->name : "program");
        bool fetch = in->op == ISA_FETCH;
        p->channels[p->n_channels++] = (tfvm_channel_info){kept, fetch, fetch ? 0 : (tfvm_dtype)ISA_CHAN_DTYPE(in->b),
                                                           !fetch && (in->b & ISA_CHAN_TENSOR) != 0, i};
    }
    qsort(p->channels, p->n_channels, sizeof *p->channels, by_channel_name);
    size_t distinct = 0;
    for (size_t k = 0; k < p->n_channels; k++) {
        if (distinct && strcmp(p->channels[k].name, p->channels[distinct - 1].name) == 0) {
            p->channels[distinct - 1].uses++;
        } else {
            p->channels[distinct] = p->channels[k];
            p->channels[distinct++].uses = 1;
        }
    }
    p->n_channels = distinct;
    return TFVM_OK;
}

static void program_dealloc(tfvm_program *p)
{
    tfvm_allocator a = p->alloc;
    isa_program_release(&p->isa);
    ut_free(&a, p, sizeof *p);
}

tfvm_status ld_program_finish(tfvm_program *p, tfvm_status st, tfvm_program **out, tfvm_error *err)
{
    if (st == TFVM_OK)
        st = make_entry_infos(p, err);
    if (st == TFVM_OK)
        st = make_channel_infos(p, err);
    if (st != TFVM_OK) {
        program_dealloc(p);
        return st;
    }
    *out = p;
    return TFVM_OK;
}

tfvm_status tfvm_program_save_memory(const tfvm_program *p, void **data, size_t *size, tfvm_error *err)
{
    if (!p || !data || !size)
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_save_memory: NULL argument");
    ut_buf b;
    ut_buf_init(&b, &p->alloc);
    tfvm_status st = ld_write(&p->isa, &b, err);
    if (st != TFVM_OK) {
        ut_buf_free(&b);
        return st;
    }
    *data = ut_buf_take(&b, size);
    if (!*data)
        return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory writing program", p->isa.name);
    return TFVM_OK;
}

void tfvm_program_buffer_free(const tfvm_program *p, void *data, size_t size)
{
    if (p && data)
        ut_free(&p->alloc, data, size + 1);
}

tfvm_status tfvm_program_save_file(const tfvm_program *p, const char *path, tfvm_error *err)
{
    if (!path)
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_save_file: NULL path");
    void *data;
    size_t size;
    tfvm_status st = tfvm_program_save_memory(p, &data, &size, err);
    if (st != TFVM_OK)
        return st;
    st = ut_write_file(path, data, size, err);
    tfvm_program_buffer_free(p, data, size);
    return st;
}

void tfvm_program_free(tfvm_program *p)
{
    if (p)
        program_dealloc(p);
}

size_t tfvm_program_entry_count(const tfvm_program *p) { return p ? p->isa.n_entries : 0; }

int tfvm_program_find_entry(const tfvm_program *p, const char *name)
{
    if (!p || !name)
        return -1;
    for (uint32_t i = 0; i < p->isa.n_entries; i++)
        if (strcmp(p->isa.entries[i].name, name) == 0)
            return (int)i;
    return -1;
}

tfvm_status tfvm_program_entry(const tfvm_program *p, size_t index, tfvm_entry_info *out)
{
    if (!p || !out || index >= p->isa.n_entries)
        return TFVM_ERR_ARGUMENT;
    *out = p->entries[index];
    return TFVM_OK;
}

size_t tfvm_program_channel_count(const tfvm_program *p) { return p ? p->n_channels : 0; }

tfvm_status tfvm_program_channel(const tfvm_program *p, size_t index, tfvm_channel_info *out)
{
    if (!p || !out || index >= p->n_channels)
        return TFVM_ERR_ARGUMENT;
    *out = p->channels[index];
    return TFVM_OK;
}

const char *tfvm_param_type(const tfvm_param_info *p, char *buf, size_t size)
{
    isa_param q = {.dtype = (uint8_t)p->dtype, .rank = p->is_tensor ? ISA_RANK_ANY : 0,
                   .shaped = p->is_tensor && p->rank >= 0, .ndim = (uint8_t)(p->rank > 0 ? p->rank : 0),
                   .dims = p->dims, .dim_names = p->dim_names};
    return isa_param_type(&q, buf, size);
}

tfvm_status tfvm_program_disassemble(const tfvm_program *p, char **text, size_t *len, tfvm_error *err)
{
    if (!p || !text || !len)
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_disassemble: NULL argument");
    ut_buf b;
    ut_buf_init(&b, &p->alloc);
    tfvm_status st = ld_disassemble(&p->isa, &b, err);
    if (st != TFVM_OK) {
        ut_buf_free(&b);
        return st;
    }
    if (!(*text = ut_buf_take(&b, len))) /* (it frees b) */
        return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory disassembling", p->isa.name ? p->isa.name : "program");
    return TFVM_OK;
}

tfvm_status tfvm_program_disassemble_file(const tfvm_program *p, const char *path, tfvm_error *err)
{
    if (!path)
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_disassemble_file: NULL path");
    char *text;
    size_t len;
    tfvm_status st = tfvm_program_disassemble(p, &text, &len, err);
    if (st != TFVM_OK)
        return st;
    st = ut_write_file(path, text, len, err);
    tfvm_program_buffer_free(p, text, len);
    return st;
}

size_t tfvm_program_const_count(const tfvm_program *p, size_t *bytes)
{
    size_t n = 0;
    for (uint32_t k = 0; p && k < p->isa.n_consts; k++)
        n += p->isa.consts[k].nbytes;
    if (bytes)
        *bytes = n;
    return p ? p->isa.n_consts : 0;
}
