/* vm/diag.c — what a run says when it goes wrong: the first error (with
 * its instruction and tag), tags as text, and the diagnosis of a stuck run
 * (the instructions holding partial matches). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "match.h"

/* ---- Errors ------------------------------------------------------------------ */

/* The first error of a run wins; its tag is ctx's, or `tag` as text. */
static void fail_v(tfvm_vm *vm, tfvm_status code, const vm_ctx *ctx, const char *tag, uint32_t inst, const char *fmt,
                   va_list ap)
{
    pthread_mutex_lock(&vm->err_lock);
    if (atomic_load(&vm->state) == VM_FAILED) {
        pthread_mutex_unlock(&vm->err_lock);
        return;
    }
    char msg[384];
    vsnprintf(msg, sizeof msg, fmt, ap);
    tfvm_error *e = &vm->err;
    e->code = code;
    e->instr[0] = e->tag[0] = e->where[0] = '\0';
    if (inst != ISA_NONE) {
        isa_inst_label(vm->prog, inst, e->instr, sizeof e->instr);
        isa_inst_where(vm->prog, inst, e->where, sizeof e->where);
        if (ctx)
            vm_tag_str(vm, ctx, e->tag, sizeof e->tag);
        else if (tag)
            ut_fmt(e->tag, sizeof e->tag, "%s", tag);
        char origin[224];
        isa_inst_origin(vm->prog, inst, origin, sizeof origin);
        ut_fmt(e->message, sizeof e->message, "%s%s%s (%s) at %s: %s", origin, origin[0] ? ": " : "", e->instr,
               isa_ops[vm->prog->insts[inst].op].name, e->tag[0] ? e->tag : "[]", msg);
    } else {
        ut_fmt(e->message, sizeof e->message, "%s", msg);
    }
    atomic_store(&vm->state, VM_FAILED);
    sched_run_stop(&vm->run); /* every worker stops */
    pthread_mutex_unlock(&vm->err_lock);
    if (vm->cfg.log)
        vm->cfg.log(vm->cfg.log_ud, TFVM_LOG_ERROR, e->message);
}

void vm_fail(tfvm_vm *vm, tfvm_status code, const vm_ctx *ctx, uint32_t inst, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(vm, code, ctx, NULL, inst, fmt, ap);
    va_end(ap);
}

void vm_fail_tag(tfvm_vm *vm, tfvm_status code, const char *tag, uint32_t inst, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(vm, code, NULL, tag, inst, fmt, ap);
    va_end(ap);
}

/* ---- Tags -------------------------------------------------------------------- */

/* The outermost TAG_SHOWN elements of ctx's tag, outermost first, in one
 * walk up the chain (a ring keeps the last ones passed: the outermost).
 * Returns how many elements the tag has in all. */
#define TAG_SHOWN 64
static size_t tag_elems(const vm_ctx *ctx, const vm_ctx **out, size_t *n_out)
{
    const vm_ctx *ring[TAG_SHOWN];
    size_t depth = 0;
    for (const vm_ctx *c = ctx; c && c->kind != VM_CTX_ROOT; c = c->parent)
        ring[depth++ % TAG_SHOWN] = c;
    size_t n = depth < TAG_SHOWN ? depth : TAG_SHOWN;
    for (size_t k = 0; k < n; k++) /* ring[(depth-1-k) % SHOWN] is the k-th outermost */
        out[k] = ring[(depth - 1 - k) % TAG_SHOWN];
    *n_out = n;
    return depth;
}

static int tag_elem(const tfvm_vm *vm, const vm_ctx *c, char *buf, size_t size)
{
    const isa_program *p = vm->prog;
    if (c->kind == VM_CTX_CALL) {
        isa_site_label(p->regions[p->sites[c->elem].callee].name, p->sites[c->elem].id, buf, size);
        return (int)strlen(buf);
    }
    return snprintf(buf, size, "%s#%llu", p->regions[c->elem].name, (unsigned long long)c->iter);
}

/* Linear in the tag's depth; a tag deeper than TAG_SHOWN ends in "...". */
void vm_format_tag(const tfvm_vm *vm, const vm_ctx *ctx, ut_buf *out)
{
    const vm_ctx *elems[TAG_SHOWN];
    size_t n, depth = tag_elems(ctx, elems, &n);
    ut_buf_append(out, "[", 1);
    for (size_t k = 0; k < n; k++) {
        char e[160];
        tag_elem(vm, elems[k], e, sizeof e);
        ut_buf_printf(out, "%s%s", k ? ", " : "", e);
    }
    if (depth > n)
        ut_buf_printf(out, ", ... (%zu more)", depth - n);
    ut_buf_append(out, "]", 1);
}

/* Appends the text of a printf format to buf[*len..size); false once it no
 * longer fits (then buf holds what fitted). */
static bool tag_put(char *buf, size_t size, size_t *len, const char *fmt, ...) UT_PRINTF(4, 5);
static bool tag_put(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size - *len) {
        *len = size - 1;
        return false;
    }
    *len += (size_t)n;
    return true;
}

/* Formats straight into buf, without allocating: it runs inside vm_fail,
 * also when memory has run out. A tag that does not fit ends in "...". */
const char *vm_tag_str(const tfvm_vm *vm, const vm_ctx *ctx, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    const vm_ctx *elems[TAG_SHOWN];
    size_t n, len = 0;
    size_t depth = tag_elems(ctx, elems, &n);
    buf[0] = '\0';
    bool fits = tag_put(buf, size, &len, "[");
    for (size_t k = 0; k < n && fits; k++) {
        char e[160];
        tag_elem(vm, elems[k], e, sizeof e);
        fits = tag_put(buf, size, &len, "%s%s", k ? ", " : "", e);
    }
    if (fits && depth > n) /* only the outermost are kept: the tag does not fit */
        fits = false;
    if (fits)
        fits = tag_put(buf, size, &len, "]");
    if (!fits && size > 4) {
        if (len < size - 1) { /* fill the buffer: the tag is cut, not ended */
            memset(buf + len, ' ', size - 1 - len);
            buf[size - 1] = '\0';
        }
        memcpy(buf + size - 4, "...", 4);
    }
    return buf;
}

static int by_serial(const void *a, const void *b)
{
    const vm_ctx *x = *(const vm_ctx *const *)a, *y = *(const vm_ctx *const *)b;
    return x->serial < y->serial ? -1 : x->serial > y->serial;
}

/* The diagnosis lists this many partial matches and counts the rest, so
 * that a stuck run deep in recursion is diagnosed in time linear in its
 * contexts (each listed tag costs its depth, at most TAG_SHOWN elements). */
#define DIAG_SHOWN 4

static void diagnose_ctx(tfvm_vm *vm, vm_ctx *c, ut_buf *out, size_t *n_waiting)
{
    const isa_program *p = vm->prog;
    const vm_rplan *rp = &vm->plan.regions[c->region];
    for (uint32_t i = rp->first; i < rp->end; i++) {
        const isa_inst *in = &p->insts[i];
        const vm_iplan *ip = &vm->plan.insts[i];
        if (!ip->matched)
            continue;
        uint64_t s = atomic_load(status_word(c, ip));
        if ((s & ~MERGE_FIRED) == 0 || (s & MERGE_FIRED) || (in->op != ISA_MERGE && (s & ~MERGE_FIRED) >= ip->need))
            continue;
        char label[128];
        if ((*n_waiting)++ >= DIAG_SHOWN)
            continue; /* counted, not listed */
        if (*n_waiting > 1)
            ut_buf_append(out, "; ", 2);
        ut_buf_printf(out, "%s (%s)", isa_inst_label(p, i, label, sizeof label), isa_ops[in->op].name);
        char where[160]; /* its source position, as run-time errors give it */
        if (*isa_inst_where(p, i, where, sizeof where))
            ut_buf_printf(out, " (%s)", where);
        ut_buf_printf(out, " at ");
        vm_format_tag(vm, c, out);
        for (int has = 1; has >= 0; has--) {
            ut_buf_printf(out, has ? " has input" : ", missing input");
            const char *sep = " ";
            for (uint32_t k = 0; k < ip->ports; k++)
                if ((int)k != ip->imm && port_claimed(c, ip, k) == (has == 1)) {
                    ut_buf_printf(out, "%s%u", sep, k);
                    sep = ", ";
                }
        }
    }
}

/* Names the instructions holding partial matches, for a stuck run: oldest
 * context first, instructions in program order. */
static void diagnose(tfvm_vm *vm, ut_buf *out, size_t *n_waiting)
{
    *n_waiting = 0;
    uint64_t n_ctx, n_loops;
    vm_count_live(vm, &n_ctx, &n_loops);
    vm_ctx **all = ut_calloc(&vm->alloc, n_ctx + 1, sizeof *all);
    size_t n = 0;
    for (uint32_t wi = 0; wi < vm->n_workers; wi++)
        for (vm_ctx *c = vm->w[wi].blocks; c; c = c->next_block)
            if (c->live) {
                if (all)
                    all[n++] = c;
                else
                    diagnose_ctx(vm, c, out, n_waiting); /* no memory to sort: any order */
            }
    if (!all)
        return;
    qsort(all, n, sizeof *all, by_serial);
    for (size_t k = 0; k < n; k++)
        diagnose_ctx(vm, all[k], out, n_waiting);
    ut_free(&vm->alloc, all, (n_ctx + 1) * sizeof *all);
}

tfvm_status vm_check_results(tfvm_vm *vm)
{
    const isa_entry *en = &vm->prog->entries[vm->entry];
    for (uint32_t k = 0; k < en->n_results; k++) {
        const dev_value *r = &vm->results[k];
        if (atomic_load(&vm->result_set[k]) && r->dead) {
            vm_fail(vm, TFVM_ERR_STUCK, NULL, ISA_NONE,
                    "result %u '%s' of entry '%s' received a dead token (no branch produced it)", k,
                    en->results[k].name, en->name);
            return vm->err.code;
        }
        if (atomic_load(&vm->result_set[k]))
            continue;
        ut_buf b; /* through the VM's allocator; if it fails the list reads "?" */
        ut_buf_init(&b, &vm->alloc);
        size_t n;
        diagnose(vm, &b, &n);
        ut_buf_append(&b, "", 1);
        const char *list = b.failed ? "?" : (const char *)b.data;
        if (n > DIAG_SHOWN)
            vm_fail(vm, TFVM_ERR_STUCK, NULL, ISA_NONE,
                    "run stuck: result %u '%s' never arrived; waiting (%zu, the oldest %d shown): %s", k,
                    en->results[k].name, n, DIAG_SHOWN, list);
        else if (n)
            vm_fail(vm, TFVM_ERR_STUCK, NULL, ISA_NONE, "run stuck: result %u '%s' never arrived; waiting: %s", k,
                    en->results[k].name, list);
        else
            vm_fail(vm, TFVM_ERR_STUCK, NULL, ISA_NONE,
                    "run stuck: result %u '%s' never arrived, and no instruction holds a partial match", k,
                    en->results[k].name);
        ut_buf_free(&b);
        return vm->err.code;
    }
    return TFVM_OK;
}
