/* vm/token.c — delivering tokens: an instruction with one input becomes an
 * activation at once; one with several goes through matching (match.h) in
 * its context, and the token that completes the set makes the activation.
 * The newest activation waits in the worker's `next` slot (run right after
 * the current firing, no queue round trip on a chain); older ones go on the
 * worker's private stack (scheduler/sched.h), exactly LIFO. */
#include "match.h"

/* A reference on ctx for something new (an activation, a partial match).
 * On one worker that is the firing activation's own, when it is on ctx and
 * still unclaimed: nothing else runs before the firing ends, so the context
 * stays alive for the rest of it. Not with several workers: the new
 * activation may be stolen and finish first, and the firing still uses ctx. */
static inline void take_ref(vm_worker *w, vm_ctx *ctx, bool par)
{
    if (ctx == w->held && w->spare && !w->vm->multi) /* for partial matches: see push for activations */
        w->spare = false;
    else
        vm_ctx_ref_as(ctx, par); /* as the delivery decided (vm_ctx_ref_as): asking again could answer
                                    a sharing request halfway through it */
}

/* An activation's reference: the firing's own, lent, when the new
 * activation is on the firing's context and the reference is unclaimed. The
 * activation then waits in `next` (or, pushed down by a newer one, in the
 * private stack), which no other worker sees before the firing ends. */
static UT_INLINE bool push(vm_worker *w, vm_ctx *ctx, uint32_t inst, uint32_t aux, const dev_value *v, bool owned)
{
    if (w->has_next) {
        /* A lent reference may move with it: the private stack is not seen
         * by other workers before this firing ends (the policy's offer
         * runs between firings). */
        if (!sched_stack_push(&w->sw, &w->vm->alloc, (const sched_item *)(const void *)&w->next)) {
            dev_value dropped = v ? *v : (dev_value){0};
            dev_value_release(&dropped);
            dev_value_release(&w->next.v);
            w->has_next = false; /* the run fails; teardown frees every context */
            vm_fail(w->vm, TFVM_ERR_NOMEM, ctx, inst, "out of memory queueing an activation");
            return false;
        }
    }
    if (!owned) {
        if (ctx == w->held && w->spare) {
            w->spare = false; /* lent */
        } else {
            vm_ctx_ref(w, ctx);
        }
    }
    /* Field by field into place: building a vm_act on the stack and copying
     * it made the copy's wide loads wait on the narrow stores (a store
     * forwarding stall that cost more than the rest of the push). */
    w->next.ctx = ctx;
    w->next.inst = inst;
    w->next.aux = aux;
    if (v)
        w->next.v = *v;
    else
        w->next.v = (dev_value){0};
    w->has_next = true;
    return true;
}

bool vm_push(vm_worker *w, vm_ctx *ctx, uint32_t inst, uint32_t aux, const dev_value *v, bool owned)
{
    return push(w, ctx, inst, aux, v, owned);
}

/* ---- Tokens --------------------------------------------------------------------- */

static void port_error(vm_worker *w, vm_ctx *c, uint32_t inst, uint32_t port, dev_value *v, bool unref)
{
    dev_value_release(v);
    vm_fail(w->vm, TFVM_ERR_PORT, c, inst, "two tokens for input %u at one tag", port);
    if (unref)
        vm_ctx_unref(w, c);
}

/* MERGE: fires on its first live input; on all-dead once every input is in.
 * Later tokens are absorbed. Only presence is recorded (claim bits). The
 * partial match's reference is the one of the first token that did not fire
 * it; it goes when the MERGE fires. */
static void merge_arrive(vm_worker *w, vm_ctx *c, uint32_t inst, uint32_t port, dev_value v)
{
    tfvm_vm *vm = w->vm;
    bool par = vm_ctx_atomic(w, c);
    const vm_iplan *ip = &vm->plan.insts[inst];
    /* Deterministic mode (and a context private to this worker): a token for the firing activation's own context
     * needs no reference of its own while it is delivered (the activation
     * holds the context). Parallel mode: every token takes a reference
     * before its arrival is counted, and that reference becomes the partial
     * match's when the token is the first; counting first and referencing
     * after let a completing token on another thread use a reference that
     * did not exist yet, and free the context under its owner. */
    bool held = !par && c == w->held;
    if (!held)
        vm_ctx_ref_as(c, par);
    uint64_t bit = 1ull << (port % 64);
    if (word_or(par, claim_word(c, ip, port), bit) & bit) {
        port_error(w, c, inst, port, &v, !held);
        return;
    }
    _Atomic uint64_t *st = status_word(c, ip);
    uint64_t s = atomic_load_explicit(st, memory_order_relaxed), ns;
    for (;;) {
        ns = s + 1;
        if (!(s & MERGE_FIRED) && VM_RULE_MERGE_FIRES(!v.dead, (s & ~MERGE_FIRED) + 1 == ip->ports))
            ns |= MERGE_FIRED;
        if (!par) {
            atomic_store_explicit(st, ns, memory_order_relaxed);
            break;
        }
        if (atomic_compare_exchange_weak_explicit(st, &s, ns, memory_order_acq_rel, memory_order_relaxed))
            break;
    }
    bool partial_before = (s & ~MERGE_FIRED) > 0 && !(s & MERGE_FIRED);
    if (s & MERGE_FIRED) { /* absorbed: a MERGE never fires twice at one tag */
        dev_value_release(&v);
        if (!held)
            vm_ctx_unref(w, c);
    } else if (ns & MERGE_FIRED) {
        w->st.matches++;
        if (partial_before) { /* the activation takes the partial match's reference */
            push(w, c, inst, port, &v, true);
            if (!held)
                vm_ctx_unref(w, c);
        } else {
            push(w, c, inst, port, &v, !held); /* the token's reference, or a new one */
        }
    } else if (!partial_before) {
        if (held)
            take_ref(w, c, par); /* the partial match holds its context */
        /* else the token's reference is the partial match's */
    } else if (!held) {
        vm_ctx_unref(w, c);
    }
}

/* Instructions that only route a token fire inside its delivery, without
 * an activation (no push, no pop, no dispatch): RETURN, IDENTITY,
 * LOOPCOND and a CONST fired by its one control token. They still count as
 * firings. A chain of them (a tail call's RETURN into the caller's RETURN,
 * ...) is followed at most w->fwd_room deep, so the C stack stays bounded
 * however deep the recursion; a debugger that steps and the profiler that
 * times firings set the room to 0 and see every activation. The destination
 * context is alive throughout: whoever delivers into a context holds it. */
static bool forward(vm_worker *w, vm_ctx *c, uint32_t inst, const vm_iplan *ip, dev_value *v)
{
    if (!w->fwd_room)
        return false;
    tfvm_vm *vm = w->vm;
    switch (ip->op) {
    case ISA_RETURN:
        w->fwd_room--;
        vm_send(w, c->parent, inst, 0, v);
        break;
    case ISA_IDENTITY:
    case ISA_LOOPCOND:
        w->fwd_room--;
        vm_send(w, c, inst, 0, v);
        break;
    case ISA_CONST: {
        if (ip->imm >= 0 || vm->prog->insts[inst].n_in)
            return false;
        w->fwd_room--;
        dev_value k = v->dead ? dev_dead() : vm->consts[vm->prog->insts[inst].a];
        vm_send(w, c, inst, 0, &k);
        break;
    }
    default:
        return false;
    }
    w->fwd_room++;
    w->st.fired++;
    dev_value_release(v);
    return true;
}

/* CALL of a site's only CALL: nobody else looks for the callee or races to
 * make it, and a dead token needs no context to say "dead" (each RETURN of
 * the site says it once, in the caller). */
void vm_call_one(vm_worker *w, vm_ctx *c, uint32_t inst, const dev_value *v)
{
    tfvm_vm *vm = w->vm;
    const isa_inst *in = &vm->prog->insts[inst];
    const vm_iplan *ip = &vm->plan.insts[inst];
    if (v->dead) {
        const vm_splan *sp = &vm->plan.sites[in->a];
        dev_value dead = dev_dead();
        for (uint32_t k = 0; k < sp->n_returns; k++)
            vm_send(w, c, sp->returns[k], 0, &dead);
        return;
    }
    if (vm_seq_call_ok(w, c, vm->prog->sites[in->a].callee)) {
        dev_value arg = *v;
        dev_value_retain(&arg);
        vm_seq_call(w, c, in->a, &arg, false);
        return;
    }
    if (atomic_load_explicit(&c->children[ip->child], memory_order_relaxed)) {
        vm_fail(vm, TFVM_ERR_PORT, c, inst, "two tokens for input 0 at one tag");
        return;
    }
    vm_ctx *callee = vm_ctx_new(w, c, vm->prog->sites[in->a].callee, VM_CTX_CALL, in->a);
    if (!callee)
        return;
    callee->child = ip->child;
    callee->entered = VM_ENTERED_LIVE;
    callee->arrived = 1;
    atomic_store_explicit(&callee->refs, 1, memory_order_relaxed); /* held while the token goes in */
    atomic_store_explicit(&c->children[ip->child], callee, memory_order_release);
    vm_send(w, callee, inst, 0, v);
    vm_ctx_unref(w, callee);
}

static UT_INLINE void deliver(vm_worker *w, vm_ctx *c, uint32_t inst, uint32_t port, dev_value v)
{
    tfvm_vm *vm = w->vm;
    const vm_iplan *ip = &vm->plan.insts[inst];
    w->st.tokens++;
    if (!ip->matched) {
        /* RETURN dispatch by call site (docs/isa.md, "Implementation freedom"):
         * a token of activation t.C(s') is only for the RETURNs of s'. */
        if (ip->op == ISA_RETURN && (c->kind != VM_CTX_CALL || c->elem != ip->k)) {
            dev_value_release(&v);
            return;
        }
        if (!forward(w, c, inst, ip, &v))
            push(w, c, inst, 0, &v, false);
        return;
    }
    if (ip->op == ISA_MERGE) {
        merge_arrive(w, c, inst, port, v);
        return;
    }
    bool par = vm_ctx_atomic(w, c);
    bool held = !par && c == w->held; /* see merge_arrive */
    if (!held)
        vm_ctx_ref_as(c, par);
    uint64_t bit = 1ull << (port % 64);
    if (word_or(par, claim_word(c, ip, port), bit) & bit) {
        port_error(w, c, inst, port, &v, !held);
        return;
    }
    c->slots[ip->slot + port] = v;
    uint64_t n = word_add(par, status_word(c, ip), 1) + 1;
    if (n == 1) {
        if (held)
            take_ref(w, c, par); /* the partial match holds its context */
        return;                  /* else the token's reference is the partial match's */
    }
    if (n == ip->need) {
        w->st.matches++;
        push(w, c, inst, 0, NULL, true); /* takes the partial match's reference */
    }
    if (!held)
        vm_ctx_unref(w, c);
}

void vm_send(vm_worker *w, vm_ctx *ctx, uint32_t inst, uint32_t out, const dev_value *v)
{
    tfvm_vm *vm = w->vm;
    const vm_iplan *ip = &vm->plan.insts[inst];
    const isa_edge *e = vm->prog->edges;
    uint32_t first = ip->out_at[out], end = ip->out_at[out + 1];
    if (vm_failed(vm))
        return;
    for (uint32_t k = first; k < end; k++) {
        dev_value copy = *v;
        dev_value_retain(&copy);
        deliver(w, ctx, e[k].inst, e[k].port, copy);
    }
}
