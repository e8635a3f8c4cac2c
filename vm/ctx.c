/* vm/ctx.c — contexts: making, recycling and releasing them (reference
 * counts), the live-context count and bound, and sharing a context between
 * workers (owner-biased contexts, vm.h). */
#include <sched.h>
#include <string.h>

#include "vm.h"

/* ---- Contexts ------------------------------------------------------------------ */

static int64_t live_total(const tfvm_vm *vm)
{
    int64_t n = 0;
    for (uint32_t i = 0; i < vm->n_workers; i++)
        n += atomic_load_explicit(&vm->w[i].live, memory_order_relaxed);
    return n;
}

/* Tracks the peak of live contexts and enforces max_contexts: exactly in the
 * deterministic mode; with several workers max_contexts is checked against the
 * sum of the workers' counts on every creation, and without a limit the peak
 * is sampled (vm_ctx_note_new comes here every VM_PEAK_SAMPLE creations). */
bool vm_ctx_count_check(vm_worker *w, const vm_ctx *parent, bool fail)
{
    tfvm_vm *vm = w->vm;
    int64_t total = vm->multi ? live_total(vm) : atomic_load_explicit(&w->live, memory_order_relaxed);
    long long peak = atomic_load_explicit(&vm->live_peak, memory_order_relaxed);
    while (total > peak && !atomic_compare_exchange_weak(&vm->live_peak, &peak, total))
        ;
    if ((uint64_t)total <= vm->ctx_bound)
        return true;
    if (fail) {
        vm_tag_walk t;
        vm_tag_walk_init(&t);
        vm_tag_walk_ctx(&t, parent);
        vm_ctx_bound_fail(vm, &t);
    }
    return false;
}

/* "in 'f' at depth 812345 (the call at fib.tfg:3:9)": the function whose
 * call was being made (the innermost call site's callee), how deep the tag
 * is, and where the call is in the source (when the program says). */
static void where_str(const tfvm_vm *vm, const vm_tag_walk *t, char *buf, size_t size)
{
    const isa_program *p = vm->prog;
    uint32_t site = t->call_site;
    if (site >= p->n_sites) {
        ut_fmt(buf, size, " at depth %llu", (unsigned long long)t->depth);
        return;
    }
    char pos[160] = "";
    const vm_splan *sp = &vm->plan.sites[site];
    if (sp->n_call)
        isa_inst_where(p, sp->calls[0], pos, sizeof pos);
    ut_fmt(buf, size, " in '%s' at depth %llu%s%s%s", p->regions[p->sites[site].callee].name,
           (unsigned long long)t->depth, pos[0] ? " (the call at " : "", pos, pos[0] ? ")" : "");
}

void vm_ctx_bound_fail(tfvm_vm *vm, const vm_tag_walk *t)
{
    char where[320];
    where_str(vm, t, where, sizeof where);
    if (vm->cfg.max_contexts) {
        vm_fail(vm, TFVM_ERR_LIMIT, NULL, ISA_NONE, "more than %llu live contexts (max_contexts)%s",
                (unsigned long long)vm->cfg.max_contexts, where);
    } else { /* the default bound: almost always a recursion without end */
        char tag[200];
        vm_fail(vm, TFVM_ERR_LIMIT, NULL, ISA_NONE,
                "recursion too deep%s: more than %llu live contexts (the bound for the memory available; "
                "max_contexts sets another) at %s",
                where, (unsigned long long)vm->ctx_bound, vm_tag_walk_str(vm, t, tag, sizeof tag));
    }
}

static UT_INLINE vm_ctx *ctx_new(vm_worker *w, vm_ctx *parent, uint32_t region, vm_ctx_kind kind, uint32_t elem)
{
    tfvm_vm *vm = w->vm;
    const vm_rplan *rp = &vm->plan.regions[region];
    vm_ctx *c = w->free_ctx[region];
    vm_ctx *block_link;
    if (c) {
        w->free_ctx[region] = c->parent;
        block_link = c->next_block;
    } else {
        c = ut_alloc(&vm->alloc, rp->ctx_size);
        if (!c) {
            vm_fail(vm, TFVM_ERR_NOMEM, NULL, ISA_NONE, "out of memory creating a context");
            return NULL;
        }
        block_link = w->blocks;
        w->blocks = c;
    }
    memset(c, 0, rp->ctx_size);
    c->next_block = block_link;
    c->parent = parent;
    c->depth = parent ? parent->depth + 1 : 0;
    c->region = region;
    c->kind = (uint8_t)kind;
    c->elem = elem;
    c->live = 1;
    c->serial = (w->st.contexts_created << 10) | w->id;
    /* an iteration of a loop whose loops overlap is shared from the start:
     * tokens come from a worker running the next iteration while this one
     * runs a loop, and would wait for that loop to end to share it */
    const bool shared = vm_loops_overlap(vm, region);
    atomic_store_explicit(&c->owner, shared ? VM_CTX_SHARED : w->id, memory_order_relaxed);
    c->slots = (dev_value *)(c + 1);
    c->children = (_Atomic(void *) *)(c->slots + rp->n_slots);
    c->words = (_Atomic uint64_t *)(c->children + rp->n_children);
    if (kind == VM_CTX_CALL)
        vm_ctx_ref(w, parent);
    if (!vm_ctx_note_new(w, parent, true)) {
        vm_ctx_discard(w, c);
        return NULL;
    }
    return c;
}

vm_ctx *vm_ctx_new(vm_worker *w, vm_ctx *parent, uint32_t region, vm_ctx_kind kind, uint32_t elem)
{
    return ctx_new(w, parent, region, kind, elem);
}

void vm_ctx_recycle(vm_worker *w, vm_ctx *c)
{
    c->live = 0;
    atomic_store_explicit(&w->live, atomic_load_explicit(&w->live, memory_order_relaxed) - 1, memory_order_relaxed);
    c->parent = w->free_ctx[c->region];
    w->free_ctx[c->region] = c;
}

void vm_ctx_discard(vm_worker *w, vm_ctx *c)
{
    vm_ctx *parent = c->kind == VM_CTX_CALL ? c->parent : NULL;
    vm_ctx_recycle(w, c);
    if (parent)
        vm_ctx_unref(w, parent);
}

/* A context whose last reference went; returns the context that loses a
 * reference because of it. */
static vm_ctx *ctx_release(vm_worker *w, vm_ctx *c)
{
    vm_ctx *next = NULL;
    switch (c->kind) {
    case VM_CTX_CALL:
        atomic_store_explicit(&c->parent->children[c->child], NULL, memory_order_relaxed);
        next = c->parent;
        vm_ctx_recycle(w, c);
        break;
    case VM_CTX_ITER:
        next = vm_iter_release(w, c);
        break;
    default:
        vm_ctx_recycle(w, c);
        break;
    }
    return next;
}

void vm_ctx_unref(vm_worker *w, vm_ctx *c)
{
    while (c) {
        unsigned old;
        if (vm_ctx_atomic(w, c)) {
            old = atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel);
        } else {
            old = atomic_load_explicit(&c->refs, memory_order_relaxed);
            atomic_store_explicit(&c->refs, old - 1, memory_order_relaxed);
        }
        if (old != 1)
            return;
        c = ctx_release(w, c);
    }
}

/* ---- Sharing contexts (vm_ctx_atomic) ------------------------------------------------ */

/* One turn of waiting for another worker: answer our own requests (it may
 * be waiting for us), and after a while give the core away: with more
 * workers than cores the one we wait for may not be running at all. */
static void share_wait(vm_worker *w, unsigned spins)
{
    vm_serve_shares(w);
    if (spins >= 64)
        sched_yield();
}

bool vm_ctx_share(vm_worker *w, vm_ctx *c)
{
    tfvm_vm *vm = w->vm;
    uint32_t owner = atomic_load_explicit(&c->owner, memory_order_acquire);
    for (;;) {
        if (owner == VM_CTX_SHARED)
            return true;
        if (owner & VM_CTX_SHARING) { /* another worker's handshake (or ours to answer) */
            for (unsigned spins = 0; atomic_load_explicit(&c->owner, memory_order_acquire) != VM_CTX_SHARED; spins++)
                share_wait(w, spins);
            return true;
        }
        if (atomic_compare_exchange_weak_explicit(&c->owner, &owner, owner | VM_CTX_SHARING, memory_order_seq_cst,
                                                  memory_order_acquire))
            break;
    }
    w->shares++;
    vm_worker *o = &vm->w[owner];
    unsigned req = atomic_fetch_add_explicit(&o->sw.share_req, 1, memory_order_seq_cst) + 1;
    /* An idle owner runs nothing, and sees the flag when it runs again
     * (leaving find_work fences). While waiting, answer others: the owner
     * may be waiting for us. */
    for (unsigned spins = 0; (int)(atomic_load_explicit(&o->sw.share_ack, memory_order_acquire) - req) < 0 &&
                             atomic_load_explicit(&o->sw.busy, memory_order_seq_cst);
         spins++)
        share_wait(w, spins);
    atomic_store_explicit(&c->owner, VM_CTX_SHARED, memory_order_release);
    return true;
}

void vm_ctx_count_free(vm_worker *w)
{
    atomic_store_explicit(&w->live, atomic_load_explicit(&w->live, memory_order_relaxed) - 1, memory_order_relaxed);
}
