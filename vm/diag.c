/* vm/diag.c — what a run says when it goes wrong: the first error (with
 * its instruction and tag), tags as text, and the diagnosis of a stuck run
 * (the instructions holding partial matches). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "match.h"

/* ---- Errors ------------------------------------------------------------------ */

/* The first error of a run wins; its tag is ctx's, or `tag` as text. The
 * message names the instruction first ("y (ADD) at [f@1]: ..."), unless
 * `plain` (it says where itself). */
static void fail_v(tfvm_vm *vm, tfvm_status code, const vm_ctx *ctx, const char *tag, uint32_t inst, bool plain,
                   const char *fmt, va_list ap)
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
    }
    if (inst != ISA_NONE && !plain) {
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
    fail_v(vm, code, ctx, NULL, inst, false, fmt, ap);
    va_end(ap);
}

void vm_fail_tag(tfvm_vm *vm, tfvm_status code, const char *tag, uint32_t inst, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(vm, code, NULL, tag, inst, false, fmt, ap);
    va_end(ap);
}

static void fail_plain(tfvm_vm *vm, tfvm_status code, const char *tag, uint32_t inst, const char *fmt, ...)
    UT_PRINTF(5, 6);
static void fail_plain(tfvm_vm *vm, tfvm_status code, const char *tag, uint32_t inst, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(vm, code, NULL, tag, inst, true, fmt, ap);
    va_end(ap);
}

/* "interrupted at node 'n' (Add): y (ADD) in 'f' at depth 3, iteration #41
 * of loop 'f_while1'": the instruction next to fire (its source position goes
 * to the error's `where`), the innermost call's function (the entry's when
 * there is none) and how many calls deep, the innermost loop and its
 * iteration. */
void vm_fail_interrupted(tfvm_vm *vm, const vm_tag_walk *t, uint32_t inst)
{
    const isa_program *p = vm->prog;
    char at[400] = "", loop[160] = "", tag[256];
    if (inst != ISA_NONE) {
        char origin[224], label[128];
        isa_inst_origin(p, inst, origin, sizeof origin);
        ut_fmt(at, sizeof at, " at %s%s%s (%s)", origin, origin[0] ? ": " : "", isa_inst_label(p, inst, label, sizeof label),
               isa_ops[p->insts[inst].op].name);
    }
    if (t->loop != UINT32_MAX)
        ut_fmt(loop, sizeof loop, ", iteration #%llu of loop '%s'", (unsigned long long)t->iter, p->regions[t->loop].name);
    const char *fn = t->call_site != UINT32_MAX ? p->regions[p->sites[t->call_site].callee].name
                                                : p->entries[vm->entry].name;
    fail_plain(vm, TFVM_ERR_INTERRUPTED, vm_tag_walk_str(vm, t, tag, sizeof tag), inst,
               "interrupted%s in '%s' at depth %llu%s", at, fn, (unsigned long long)t->calls, loop);
}

/* ---- Tags -------------------------------------------------------------------- */

void vm_tag_walk_ctx(vm_tag_walk *t, const vm_ctx *ctx)
{
    for (const vm_ctx *c = ctx; c && c->kind != VM_CTX_ROOT; c = c->parent)
        vm_tag_walk_add(t, c->kind == VM_CTX_CALL, c->elem, c->iter);
}

static int tag_elem(const tfvm_vm *vm, const vm_tag_elem *e, char *buf, size_t size)
{
    const isa_program *p = vm->prog;
    if (e->call) {
        isa_site_label(p->regions[p->sites[e->id].callee].name, p->sites[e->id].id, buf, size);
        return (int)strlen(buf);
    }
    return snprintf(buf, size, "%s#%llu", p->regions[e->id].name, (unsigned long long)e->iter);
}

/* The k-th element from the outside of a walked tag (k < VM_TAG_ENDS; the
 * j-th from the inside is t->inner[j]). */
static const vm_tag_elem *outer_elem(const vm_tag_walk *t, uint64_t k)
{
    return &t->outer[(t->depth - 1 - k) % VM_TAG_ENDS];
}

static size_t marker_len(uint64_t left)
{
    char m[48];
    return (size_t)snprintf(m, sizeof m, "... %llu more ..., ", (unsigned long long)left);
}

/* Formats straight into buf, without allocating: it runs inside vm_fail,
 * also when memory has run out. Outer and inner elements are taken in turn
 * while they fit, so a long tag keeps both its ends. */
const char *vm_tag_walk_str(const tfvm_vm *vm, const vm_tag_walk *t, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    char outer[VM_TAG_ENDS][96], inner[VM_TAG_ENDS][96];
    size_t n_out = 0, n_in = 0, len = 2; /* "[" and "]" */
    uint64_t n = t->depth, max_out = n < VM_TAG_ENDS ? n : VM_TAG_ENDS, max_in = max_out;
    for (bool out_side = true; n_out + n_in < n; out_side = !out_side) {
        bool can_out = n_out < max_out, can_in = n_in < max_in;
        if (!can_out && !can_in)
            break;
        bool take_out = out_side ? can_out : !can_in;
        char *e = take_out ? outer[n_out] : inner[n_in];
        size_t cost = (size_t)tag_elem(vm, take_out ? outer_elem(t, n_out) : &t->inner[n_in], e, 96) + 2;
        uint64_t left = n - n_out - n_in - 1;
        if (len + cost + (left ? marker_len(left) : 0) + 1 > size)
            break;
        len += cost;
        *(take_out ? &n_out : &n_in) += 1;
    }
    uint64_t left = n - n_out - n_in;
    size_t at = 0;
    at += (size_t)snprintf(buf + at, size - at, "[");
    for (size_t k = 0; k < n_out && at < size; k++)
        at += (size_t)snprintf(buf + at, size - at, "%s%s", k ? ", " : "", outer[k]);
    if (left && at < size)
        at += (size_t)snprintf(buf + at, size - at, "%s... %llu more ...", n_out ? ", " : "", (unsigned long long)left);
    for (size_t j = n_in; j-- > 0 && at < size;)
        at += (size_t)snprintf(buf + at, size - at, "%s%s", at > 1 ? ", " : "", inner[j]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

void vm_format_tag(const tfvm_vm *vm, const vm_ctx *ctx, ut_buf *out)
{
    char buf[512];
    ut_buf_printf(out, "%s", vm_tag_str(vm, ctx, buf, sizeof buf));
}

const char *vm_tag_str(const tfvm_vm *vm, const vm_ctx *ctx, char *buf, size_t size)
{
    vm_tag_walk t;
    vm_tag_walk_init(&t);
    vm_tag_walk_ctx(&t, ctx);
    return vm_tag_walk_str(vm, &t, buf, size);
}

static int by_serial(const void *a, const void *b)
{
    const vm_ctx *x = *(const vm_ctx *const *)a, *y = *(const vm_ctx *const *)b;
    return x->serial < y->serial ? -1 : x->serial > y->serial;
}

/* The diagnosis lists this many partial matches and counts the rest, so
 * that a stuck run deep in recursion is diagnosed in time linear in its
 * contexts (each listed tag costs its depth, at most TAG_SHOWN elements). */
#define DIAG_SHOWN VM_DIAG_SHOWN

/* "y (ADD) (t.tfg:5:7) at ": instruction i's label, op and source position,
 * after "; " unless it is the first listed. */
static void append_inst(const isa_program *p, uint32_t i, ut_buf *out, size_t n_waiting)
{
    char label[128];
    if (n_waiting > 1)
        ut_buf_append(out, "; ", 2);
    ut_buf_printf(out, "%s (%s)", isa_inst_label(p, i, label, sizeof label), isa_ops[p->insts[i].op].name);
    char where[160]; /* its source position, as run-time errors give it */
    if (*isa_inst_where(p, i, where, sizeof where))
        ut_buf_printf(out, " (%s)", where);
    ut_buf_printf(out, " at ");
}

typedef bool (*port_has_fn)(const void *arg, uint32_t port);

/* " has input 0, missing input 1": the ports but a constant operand's. */
static void append_ports(const vm_iplan *ip, port_has_fn has_fn, const void *arg, ut_buf *out)
{
    for (int has = 1; has >= 0; has--) {
        ut_buf_printf(out, has ? " has input" : ", missing input");
        const char *sep = " ";
        for (uint32_t k = 0; k < ip->ports; k++)
            if ((int)k != ip->imm && has_fn(arg, k) == (has == 1)) {
                ut_buf_printf(out, "%s%u", sep, k);
                sep = ", ";
            }
    }
}

typedef struct ctx_ports {
    vm_ctx *c;
    const vm_iplan *ip;
} ctx_ports;

static bool ctx_port_has(const void *arg, uint32_t k)
{
    const ctx_ports *cp = arg;
    return port_claimed(cp->c, cp->ip, k);
}

static bool mask_port_has(const void *arg, uint32_t k)
{
    return k < 64 && (*(const uint64_t *)arg >> k & 1);
}

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
        if ((*n_waiting)++ >= DIAG_SHOWN)
            continue; /* counted, not listed */
        append_inst(p, i, out, *n_waiting);
        vm_format_tag(vm, c, out);
        append_ports(ip, ctx_port_has, &(ctx_ports){c, ip}, out);
    }
}

void vm_note_waiting(tfvm_vm *vm, uint32_t inst, const char *tag, uint64_t has)
{
    pthread_mutex_lock(&vm->err_lock);
    if (vm->n_seq_waiting < DIAG_SHOWN) {
        vm_seq_wait *w = &vm->seq_waiting[vm->n_seq_waiting];
        w->inst = inst;
        w->has = has;
        snprintf(w->tag, sizeof w->tag, "%s", tag);
    }
    vm->n_seq_waiting++;
    pthread_mutex_unlock(&vm->err_lock);
}

/* The partial matches sequential frames noted, after the contexts'. */
static void diagnose_frames(tfvm_vm *vm, ut_buf *out, size_t *n_waiting)
{
    for (uint64_t k = 0; k < vm->n_seq_waiting; k++) {
        if ((*n_waiting)++ >= DIAG_SHOWN || k >= DIAG_SHOWN)
            continue; /* counted, not listed */
        const vm_seq_wait *w = &vm->seq_waiting[k];
        append_inst(vm->prog, w->inst, out, *n_waiting);
        ut_buf_printf(out, "%s", w->tag);
        append_ports(&vm->plan.insts[w->inst], mask_port_has, &w->has, out);
    }
}

/* Names the instructions holding partial matches, for a stuck run: oldest
 * context first, instructions in program order, then those of sequential
 * frames in the order they were left. */
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
    if (all) {
        qsort(all, n, sizeof *all, by_serial);
        for (size_t k = 0; k < n; k++)
            diagnose_ctx(vm, all[k], out, n_waiting);
        ut_free(&vm->alloc, all, (n_ctx + 1) * sizeof *all);
    }
    diagnose_frames(vm, out, n_waiting);
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
