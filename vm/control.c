/* vm/control.c — the control instructions of docs/isa.md: how tokens change
 * tags (ENTER, EXIT, NEXTITER, CALL, RETURN), how branches route them
 * (SWITCH, MERGE), the deadness rules, and the parallel=N bound on the
 * iterations of one loop instance in flight.
 *
 * Calls are lock-free (the callee context is created once with a CAS, the
 * arrivals counted atomically). A loop instance changes once per iteration,
 * not once per firing, so it has a mutex (taken only when several workers run).
 * Nothing is unreferenced while a loop's lock is held: an unref can end an
 * iteration, which takes the lock again. */
#include <sched.h>
#include <string.h>

#include "devices/place.h"
#include "vm.h"

static const dev_value dead_token = {.dead = 1};

static void deadness_error(vm_worker *w, vm_ctx *ctx, uint32_t inst, const char *what, const char *name)
{
    vm_fail(w->vm, TFVM_ERR_DEADNESS, ctx, inst, "%s '%s' entered with live and dead tokens at one tag", what, name);
}

/* Loop instances are shared by the iterations' workers. Waiting for one
 * answers sharing requests (vm_ctx_share): its holder may be waiting for us. */
static inline void loop_lock(vm_worker *w, vm_loop *l)
{
    if (!w->vm->multi)
        return;
    for (unsigned spins = 0; pthread_mutex_trylock(&l->lock) != 0; spins++) {
        vm_serve_shares(w);
        if (spins >= 64)
            sched_yield(); /* with more workers than cores, the holder may not be running */
    }
}
static inline void loop_unlock(vm_worker *w, vm_loop *l)
{
    if (w->vm->multi)
        pthread_mutex_unlock(&l->lock);
}

/* ---- Loop instances ------------------------------------------------------------ */

static vm_loop *loop_alloc(vm_worker *w, uint32_t frame)
{
    tfvm_vm *vm = w->vm;
    const vm_fplan *f = &vm->plan.frames[frame];
    vm_loop *l = w->free_loops;
    if (l) {
        w->free_loops = l->next_free;
    } else {
        l = ut_alloc(&vm->alloc, sizeof *l);
        if (!l)
            return NULL;
        memset(l, 0, sizeof *l);
        if (pthread_mutex_init(&l->lock, NULL) != 0) {
            ut_free(&vm->alloc, l, sizeof *l);
            return NULL;
        }
        l->next_block = w->loops;
        w->loops = l;
    }
    dev_value *consts = f->n_const ? ut_calloc(&vm->alloc, f->n_const, sizeof(dev_value)) : NULL;
    if (f->n_const && !consts) {
        l->next_free = w->free_loops;
        w->free_loops = l;
        return NULL;
    }
    l->frame = frame;
    l->consts = consts;
    l->arrived = 0;
    l->entered = VM_ENTERED_NONE;
    l->holding = 0;
    l->next = 0;
    l->first = l->last = NULL;
    l->deferred = NULL;
    l->n_deferred = l->cap_deferred = 0;
    l->live = 1;
    return l;
}

void vm_loop_destroy(vm_worker *w, vm_loop *l)
{
    tfvm_vm *vm = w->vm;
    const vm_fplan *f = &vm->plan.frames[l->frame];
    for (uint32_t k = 0; k < f->n_const; k++)
        dev_value_release(&l->consts[k]);
    for (uint32_t k = 0; k < l->n_deferred; k++)
        dev_value_release(&l->deferred[k].v);
    if (l->entry) {
        for (uint32_t k = 0; k < l->n_entry; k++)
            dev_value_release(&l->entry[k]);
        ut_free(&vm->alloc, l->entry, (l->n_entry + 1) * sizeof(dev_value));
        l->entry = NULL;
        l->n_entry = 0;
    }
    l->seq = false;
    ut_free(&vm->alloc, l->deferred, l->cap_deferred * sizeof *l->deferred);
    ut_free(&vm->alloc, l->consts, f->n_const * sizeof(dev_value));
    l->consts = NULL;
    l->deferred = NULL;
    l->n_deferred = l->cap_deferred = 0;
    l->live = 0;
    l->next_free = w->free_loops;
    w->free_loops = l;
}

/* The loop instance of `frame` at the tag of `parent`, made on first use:
 * the ENTERs of one instance, on any thread, land in the same one. */
static vm_loop *loop_get(vm_worker *w, vm_ctx *parent, uint32_t frame, uint32_t child)
{
    tfvm_vm *vm = w->vm;
    vm_loop *l = atomic_load_explicit(&parent->children[child], memory_order_acquire);
    if (l)
        return l;
    l = loop_alloc(w, frame);
    if (!l) {
        vm_fail(vm, TFVM_ERR_NOMEM, parent, ISA_NONE, "out of memory entering loop '%s'",
                vm->prog->regions[frame].name);
        return NULL;
    }
    l->parent = parent;
    if (vm_seq_loop_ok(w, parent, frame)) {
        uint32_t n = vm->plan.regions[frame].n_args;
        l->entry = ut_calloc(&vm->alloc, n + 1, sizeof(dev_value));
        if (l->entry) {
            l->seq = true;
            l->n_entry = n;
        }
    }
    void *expected = NULL;
    if (!atomic_compare_exchange_strong_explicit(&parent->children[child], &expected, l, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        vm_loop_destroy(w, l); /* another thread made it first */
        return expected;
    }
    vm_ctx_ref(w, parent);
    return l;
}

/* A loop instance ends when every ENTER has arrived and no iteration is
 * alive or waiting. Called with the lock held. */
static bool loop_ended(const tfvm_vm *vm, const vm_loop *l)
{
    return l->arrived >= vm->plan.frames[l->frame].n_enter && !l->first && !l->n_deferred;
}

/* After loop_ended said so (and the lock is released): no token can reach
 * the instance any more. Returns the parent, which loses a reference. */
static vm_ctx *loop_end(vm_worker *w, vm_loop *l)
{
    vm_ctx *parent = l->parent;
    atomic_store_explicit(&parent->children[w->vm->plan.regions[l->frame].frame_child], NULL, memory_order_release);
    vm_loop_destroy(w, l);
    return parent;
}

/* Creates iteration `l->next` (lock held), with one temporary reference for
 * the caller (release it with vm_ctx_unref after sending its tokens and
 * unlocking). The previous iteration, while alive, holds the new one:
 * iterations end in order, so "iteration i finished" is simply "the oldest
 * live iteration is past i". */
static vm_ctx *iter_new(vm_worker *w, vm_loop *l)
{
    tfvm_vm *vm = w->vm;
    vm_ctx *c = vm_ctx_new(w, l->parent, l->frame, VM_CTX_ITER, l->frame);
    if (!c)
        return NULL;
    c->iter = l->next++;
    c->loop = l;
    unsigned refs = 1;
    if (l->last) {
        l->last->next_iter = c;
        refs++;
    } else {
        l->first = c;
    }
    l->last = c;
    if (c->iter == 0 && l->arrived < vm->plan.frames[l->frame].n_enter) {
        l->holding = 1; /* more ENTER tokens are coming for iteration 0 */
        refs++;
    }
    atomic_store_explicit(&c->refs, refs, memory_order_relaxed);
    /* `ENTER const` values are visible in every iteration. */
    const vm_fplan *f = &vm->plan.frames[l->frame];
    for (uint32_t k = 0; k < f->n_const; k++)
        if (l->consts[k].dtype)
            vm_send(w, c, f->const_enters[k], 0, &l->consts[k]);
    return c;
}

static bool defer(tfvm_vm *vm, vm_loop *l, uint32_t inst, const dev_value *v)
{
    if (l->n_deferred == l->cap_deferred) {
        uint32_t cap = l->cap_deferred ? l->cap_deferred * 2 : 4;
        void *p = ut_realloc(&vm->alloc, l->deferred, l->cap_deferred * sizeof *l->deferred, cap * sizeof *l->deferred);
        if (!p)
            return false;
        l->deferred = p;
        l->cap_deferred = cap;
    }
    l->deferred[l->n_deferred].inst = inst;
    l->deferred[l->n_deferred].v = *v;
    l->n_deferred++;
    return true;
}

/* Starts the deferred iteration once the parallel bound allows it (lock
 * held). Returns the new iteration's temporary reference, or NULL. */
static vm_ctx *release_deferred(vm_worker *w, vm_loop *l)
{
    const vm_fplan *f = &w->vm->plan.frames[l->frame];
    uint64_t oldest = l->first ? l->first->iter : l->next;
    if (!l->n_deferred || l->next - oldest >= f->parallel)
        return NULL;
    vm_ctx *c = iter_new(w, l);
    if (!c)
        return NULL;
    for (uint32_t k = 0; k < l->n_deferred; k++) {
        vm_send(w, c, l->deferred[k].inst, 0, &l->deferred[k].v);
        dev_value_release(&l->deferred[k].v);
    }
    l->n_deferred = 0;
    return c;
}

vm_ctx *vm_iter_release(vm_worker *w, vm_ctx *c)
{
    tfvm_vm *vm = w->vm;
    vm_loop *l = c->loop;
    loop_lock(w, l);
    /* Only the oldest iteration can end: every other one is held by its
     * predecessor. */
    vm_ctx *succ = c->next_iter;
    l->first = succ;
    if (!succ)
        l->last = NULL;
    vm_ctx_recycle(w, c);
    vm_ctx *started = l->n_deferred ? release_deferred(w, l) : NULL;
    bool ended = !succ && !started && loop_ended(vm, l);
    loop_unlock(w, l);
    if (started)
        vm_ctx_unref(w, started);
    if (succ)
        return succ; /* drop the hold c had on it */
    return ended ? loop_end(w, l) : NULL;
}

/* An ENTER token arrives at its loop instance (lock held): counted, and the
 * deadness rules applied. A dead token never enters a loop: the first makes
 * each EXIT say "dead" once; live and dead at one instance are an error
 * (then the lock is released and false returned). */
static bool enter_arrives(vm_worker *w, const vm_act *a, vm_loop *l, const dev_value *v)
{
    tfvm_vm *vm = w->vm;
    const isa_inst *in = &vm->prog->insts[a->inst];
    const vm_fplan *f = &vm->plan.frames[in->a];
    l->arrived++;
    unsigned char want = v->dead ? VM_ENTERED_DEAD : VM_ENTERED_LIVE;
    if (l->entered != VM_ENTERED_NONE && l->entered != want) {
        loop_unlock(w, l);
        deadness_error(w, a->ctx, a->inst, "loop", vm->prog->regions[in->a].name);
        return false;
    }
    bool first_dead = v->dead && l->entered == VM_ENTERED_NONE;
    l->entered = want;
    if (first_dead)
        for (uint32_t k = 0; k < f->n_exits; k++)
            vm_send(w, a->ctx, f->exits[k], 0, &dead_token);
    return true;
}

/* ENTER of a loop run as a frame: the value waits in the instance until
 * every ENTER has arrived; then the whole loop runs (seq.c), its EXIT tokens
 * going into the context that entered it, and the instance ends. */
static void seq_enter(vm_worker *w, const vm_act *a, vm_loop *l, dev_value *v)
{
    tfvm_vm *vm = w->vm;
    const isa_inst *in = &vm->prog->insts[a->inst];
    const vm_fplan *f = &vm->plan.frames[in->a];
    bool run = false, ended = false;
    loop_lock(w, l);
    if (!enter_arrives(w, a, l, v))
        return;
    if (!v->dead) {
        dev_value *slot = &l->entry[vm->plan.insts[a->inst].arg];
        if (slot->dtype || slot->dead) {
            loop_unlock(w, l);
            vm_fail(vm, TFVM_ERR_PORT, a->ctx, a->inst, "two tokens for input 0 at one tag");
            return;
        }
        *slot = *v;
        v->is_tensor = 0; /* the instance keeps the reference */
    }
    if (l->arrived == f->n_enter) {
        run = l->entered == VM_ENTERED_LIVE;
        ended = true;
    }
    loop_unlock(w, l);
    if (run) {
        /* in an iteration of a loop whose iterations' loops overlap
         * (vm_loops_overlap), all the work beside this loop goes to the
         * deque before it runs (no firing inside it offers any), and what
         * its EXITs made ready after: the next chunk of a recurrent layer
         * below is a handful of activations, the layer above's chunk more */
        void (*offer_all)(sched_run *, sched_worker *) =
            vm_loops_overlap(vm, a->ctx->region) ? vm->policy->offer_all : NULL;
        if (offer_all)
            offer_all(&vm->run, &w->sw);
        vm_seq_loop(w, a->ctx, in->a, l->entry); /* consumes the entry values */
        memset(l->entry, 0, l->n_entry * sizeof *l->entry);
        if (offer_all)
            offer_all(&vm->run, &w->sw);
    }
    if (ended)
        vm_ctx_unref(w, loop_end(w, l));
}

static void fire_enter(vm_worker *w, const vm_act *a, dev_value *v)
{
    tfvm_vm *vm = w->vm;
    const isa_inst *in = &vm->prog->insts[a->inst];
    const vm_fplan *f = &vm->plan.frames[in->a];
    vm_loop *l = loop_get(w, a->ctx, in->a, vm->plan.insts[a->inst].child);
    if (!l)
        return;
    if (l->seq) {
        seq_enter(w, a, l, v);
        return;
    }
    vm_ctx *to_unref[2] = {NULL, NULL};
    bool ended = false;
    loop_lock(w, l);
    if (!enter_arrives(w, a, l, v))
        return;
    if (!v->dead) {
        if (in->flags & ISA_FLAG_CONST) {
            uint32_t k = vm->plan.insts[a->inst].k;
            if (l->consts[k].dtype) {
                /* A second token for this ENTER at one tag: overwriting would
                 * leak the first value and count one ENTER twice. */
                loop_unlock(w, l);
                vm_fail(vm, TFVM_ERR_PORT, a->ctx, a->inst, "two tokens for input 0 at one tag");
                return;
            }
            l->consts[k] = *v;
            v->is_tensor = 0; /* the loop instance keeps the reference */
            for (vm_ctx *it = l->first; it && !vm_failed(vm); it = it->next_iter)
                vm_send(w, it, a->inst, 0, &l->consts[k]);
        } else if (l->next == 0) {
            vm_ctx *c = iter_new(w, l);
            if (c) {
                vm_send(w, c, a->inst, 0, v);
                to_unref[0] = c;
            }
        } else {
            /* iteration 0 is held alive until every ENTER has arrived */
            vm_send(w, l->first, a->inst, 0, v);
        }
    }
    if (l->arrived == f->n_enter) {
        if (l->holding) {
            l->holding = 0; /* may end iteration 0, and with it the instance */
            to_unref[1] = l->first;
        } else {
            ended = loop_ended(vm, l);
        }
    }
    loop_unlock(w, l);
    vm_ctx_unref(w, to_unref[0]);
    vm_ctx_unref(w, to_unref[1]);
    if (ended)
        vm_ctx_unref(w, loop_end(w, l));
}

static void fire_nextiter(vm_worker *w, const vm_act *a, dev_value *v)
{
    if (v->dead)
        return; /* dead tokens end the body's chain */
    tfvm_vm *vm = w->vm;
    vm_ctx *c = a->ctx;
    vm_loop *l = c->loop;
    vm_ctx *fresh = NULL;
    loop_lock(w, l);
    if (c->next_iter) {
        vm_send(w, c->next_iter, a->inst, 0, v);
    } else if (l->next - l->first->iter >= vm->plan.frames[l->frame].parallel) {
        /* c is the newest iteration and parallel iterations are in flight:
         * wait for the oldest to finish. */
        if (defer(vm, l, a->inst, v))
            v->is_tensor = 0; /* the deferred token keeps the reference */
        else
            vm_fail(vm, TFVM_ERR_NOMEM, c, a->inst, "out of memory deferring an iteration");
    } else if ((fresh = iter_new(w, l)) != NULL) {
        vm_send(w, fresh, a->inst, 0, v);
    }
    loop_unlock(w, l);
    vm_ctx_unref(w, fresh);
}

void vm_fire_call(vm_worker *w, const vm_act *a, dev_value *v)
{
    tfvm_vm *vm = w->vm;
    const isa_inst *in = &vm->prog->insts[a->inst];
    const isa_site *site = &vm->prog->sites[in->a];
    const vm_splan *sp = &vm->plan.sites[in->a];
    uint32_t child = vm->plan.insts[a->inst].child;
    vm_ctx *c = a->ctx;
    vm_ctx *callee = atomic_load_explicit(&c->children[child], memory_order_acquire);
    if (!callee) {
        vm_ctx *made = vm_ctx_new(w, c, site->callee, VM_CTX_CALL, in->a);
        if (!made)
            return;
        made->child = child;
        atomic_store_explicit(&made->refs, 1, memory_order_relaxed); /* held until every CALL of the site arrived */
        void *expected = NULL;
        if (atomic_compare_exchange_strong_explicit(&c->children[child], &expected, made, memory_order_acq_rel,
                                                    memory_order_acquire)) {
            callee = made;
        } else {
            vm_ctx_discard(w, made); /* another thread made it first */
            callee = expected;
        }
    }
    const char *fname = vm->prog->regions[site->callee].name;
    unsigned char none = VM_ENTERED_NONE, want = v->dead ? VM_ENTERED_DEAD : VM_ENTERED_LIVE;
    if (!atomic_compare_exchange_strong(&callee->entered, &none, want) && none != want) {
        deadness_error(w, c, a->inst, "call of", fname);
        return;
    }
    const vm_rplan *rp = &vm->plan.regions[site->callee];
    if (v->dead) {
        if (none == VM_ENTERED_NONE) {
            /* A dead token never enters a function: each RETURN of the site
             * says "dead" once, in the caller. */
            for (uint32_t k = 0; k < sp->n_returns; k++)
                vm_send(w, c, sp->returns[k], 0, &dead_token);
        }
    } else if (sp->strict) {
        /* gathered: the argument waits in the callee's context for the rest */
        dev_value *slot = &callee->slots[rp->param_slot + vm->plan.insts[a->inst].arg];
        *slot = *v;
        dev_value_retain(slot);
    } else {
        vm_send(w, callee, a->inst, 0, v);
    }
    /* Counted only after this CALL's tokens are in: the last CALL of the
     * site drops the hold, and with it maybe the callee, which must not
     * happen while another CALL is still delivering into it. */
    unsigned arrived = atomic_fetch_add_explicit(&callee->arrived, 1, memory_order_acq_rel) + 1;
    if (arrived != sp->n_call)
        return;
    if (sp->strict && atomic_load(&callee->entered) == VM_ENTERED_LIVE) {
        /* every argument is here: the call runs as a frame, or its
         * arguments go in at once */
        dev_value *args = &callee->slots[rp->param_slot];
        if (vm_seq_call_ok(w, c, site->callee)) {
            vm_seq_call(w, c, in->a, args, true);
            for (uint32_t k = 0; k < sp->n_call; k++)
                args[k] = (dev_value){0};
        } else {
            for (uint32_t k = 0; k < sp->n_call; k++) {
                dev_value arg = args[k];
                args[k] = (dev_value){0};
                vm_send(w, callee, sp->calls[k], 0, &arg);
                dev_value_release(&arg);
            }
        }
    }
    vm_ctx_unref(w, callee);
}

tfvm_status vm_branch_predicate(tfvm_vm *vm, const isa_inst *branch, const dev_value *x, uint32_t *taken, char *msg,
                                size_t size)
{
    const dev_value *k = &vm->consts[branch->b];
    vm_route_to to = vm_rule_branch_int((uint16_t)branch->a, x, k);
    if (to != VM_ROUTE_BAD) {
        *taken = to;
        return TFVM_OK;
    }
    /* the comparison as an instruction of its own, on the device that
     * placement picks for it (a tensor x may live on a GPU) */
    isa_inst cmp = {.op = (uint16_t)branch->a, .flags = branch->flags & ISA_FLAG_DEV_MASK, .region = branch->region,
                    .n_in = 2, .edge_first = ISA_NONE, .line = branch->line, .col = branch->col};
    dev_value in[2] = {*x, *k}, pred = dev_dead();
    tfvm_status st = dev_vm_fire(vm->dev, &cmp, in, &pred, msg, size);
    if (st != TFVM_OK)
        return st;
    if (pred.is_tensor) {
        dev_value_release(&pred);
        return ut_msg(msg, size, TFVM_ERR_TYPE, "predicate must be a bool scalar, got a bool tensor");
    }
    *taken = pred.u.b;
    return TFVM_OK;
}

/* BRANCH: a SWITCH whose predicate is the data compared with a constant.
 * (fire() does a live integer against its constant itself.) */
void vm_fire_branch(vm_worker *w, const vm_act *a, dev_value *v)
{
    tfvm_vm *vm = w->vm;
    const isa_inst *inst = &vm->prog->insts[a->inst];
    vm_ctx *c = a->ctx;
    if (v->dead) {
        vm_send(w, c, a->inst, 0, &dead_token);
        vm_send(w, c, a->inst, 1, &dead_token);
        return;
    }
    uint32_t taken;
    char msg[256];
    tfvm_status st = vm_branch_predicate(vm, inst, v, &taken, msg, sizeof msg);
    if (st != TFVM_OK) {
        vm_fail(vm, st, c, a->inst, "%s", msg);
        return;
    }
    vm_route(w, c, a->inst, inst->flags, taken, v);
}

void vm_fire_control(vm_worker *w, const vm_act *a, dev_value *in)
{
    tfvm_vm *vm = w->vm;
    const isa_inst *inst = &vm->prog->insts[a->inst];
    vm_ctx *c = a->ctx;
    switch ((isa_op)inst->op) {
    case ISA_IDENTITY:
    case ISA_LOOPCOND:
        vm_send(w, c, a->inst, 0, &in[0]);
        break;
    case ISA_BRANCH:
        vm_fire_branch(w, a, &in[0]);
        break;
    case ISA_SWITCH: {
        vm_route_to to = vm_rule_switch(&in[0], &in[1]);
        if (to == VM_ROUTE_DEAD) {
            vm_send(w, c, a->inst, 0, &dead_token);
            vm_send(w, c, a->inst, 1, &dead_token);
        } else if (to == VM_ROUTE_BAD) {
            char msg[96];
            vm_rule_bad_predicate(&in[1], msg, sizeof msg);
            vm_fail(vm, TFVM_ERR_TYPE, c, a->inst, "%s", msg);
        } else {
            vm_route(w, c, a->inst, inst->flags, to, &in[0]);
        }
        break;
    }
    case ISA_MERGE:
        if (in[0].dead) {
            vm_send(w, c, a->inst, 0, &dead_token);
            vm_send(w, c, a->inst, 1, &dead_token);
        } else {
            dev_value index = vm_rule_merge_index(a->aux);
            vm_send(w, c, a->inst, 0, &in[0]);
            vm_send(w, c, a->inst, 1, &index);
        }
        break;
    case ISA_ENTER:
        fire_enter(w, a, &in[0]);
        break;
    case ISA_EXIT:
        if (!in[0].dead)
            vm_send(w, c->loop->parent, a->inst, 0, &in[0]);
        break;
    case ISA_NEXTITER:
        fire_nextiter(w, a, &in[0]);
        break;
    case ISA_RETURN:
        vm_send(w, c->parent, a->inst, 0, &in[0]);
        break;
    default:
        vm_fail(vm, TFVM_ERR_INTERNAL, c, a->inst, "not a control instruction");
        break;
    }
}
