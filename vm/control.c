/* vm/control.c — the control instructions of docs/isa.md: how tokens change
 * tags (ENTER, EXIT, NEXTITER, CALL, RETURN), how branches route them
 * (SWITCH, MERGE), the deadness rules, and the parallel=N bound on the
 * iterations of one loop instance in flight. */
#include "vm.h"

#include <string.h>

void vm_iter_recycle(tfvm_vm *vm, vm_ctx *c);

static const dev_value dead_token = {.dead = 1};

static void deadness_error(tfvm_vm *vm, vm_ctx *ctx, uint32_t inst, const char *what, const char *name)
{
    vm_fail(vm, TFVM_ERR_DEADNESS, ctx, inst, "%s '%s' entered with live and dead tokens at one tag", what,
            name);
}

/* ---- Loop instances ------------------------------------------------------------ */

vm_loop *vm_loop_get(tfvm_vm *vm, vm_ctx *parent, uint32_t frame, uint32_t child)
{
    vm_loop *l = parent->children[child];
    if (l)
        return l;
    const vm_fplan *f = &vm->plan.frames[frame];
    l = ut_alloc(&vm->alloc, sizeof *l);
    dev_value *consts = f->n_const ? ut_calloc(&vm->alloc, f->n_const, sizeof(dev_value)) : NULL;
    if (!l || (f->n_const && !consts)) {
        ut_free(&vm->alloc, l, sizeof *l);
        ut_free(&vm->alloc, consts, f->n_const * sizeof(dev_value));
        vm_fail(vm, TFVM_ERR_NOMEM, parent, ISA_NONE, "out of memory entering loop '%s'",
                vm->prog->regions[frame].name);
        return NULL;
    }
    memset(l, 0, sizeof *l);
    l->parent = parent;
    l->frame = frame;
    l->consts = consts;
    l->next_live = vm->live_loops.next_live;
    l->prev_live = &vm->live_loops;
    vm->live_loops.next_live->prev_live = l;
    vm->live_loops.next_live = l;
    parent->children[child] = l;
    parent->refs++;
    return l;
}

void vm_loop_destroy(tfvm_vm *vm, vm_loop *l)
{
    const vm_fplan *f = &vm->plan.frames[l->frame];
    for (uint32_t k = 0; k < f->n_const; k++)
        dev_value_release(&l->consts[k]);
    for (uint32_t k = 0; k < l->n_deferred; k++)
        dev_value_release(&l->deferred[k].v);
    ut_free(&vm->alloc, l->deferred, l->cap_deferred * sizeof *l->deferred);
    ut_free(&vm->alloc, l->consts, f->n_const * sizeof(dev_value));
    l->prev_live->next_live = l->next_live;
    l->next_live->prev_live = l->prev_live;
    ut_free(&vm->alloc, l, sizeof *l);
}

/* A loop instance ends when every ENTER has arrived and no iteration is
 * alive or waiting; returns the parent context, which loses a reference. */
static vm_ctx *loop_maybe_end(tfvm_vm *vm, vm_loop *l)
{
    const vm_fplan *f = &vm->plan.frames[l->frame];
    if (l->arrived < f->n_enter || l->first || l->n_deferred)
        return NULL;
    vm_ctx *parent = l->parent;
    parent->children[vm->plan.regions[l->frame].frame_child] = NULL;
    vm_loop_destroy(vm, l);
    return parent;
}

/* Creates iteration `l->next`, with one temporary reference for the caller
 * (release it with vm_ctx_unref after sending its tokens). The previous
 * iteration, while alive, holds the new one: iterations end in order, so
 * "iteration i finished" is simply "the oldest live iteration is past i". */
static vm_ctx *iter_new(tfvm_vm *vm, vm_loop *l)
{
    vm_ctx *c = vm_ctx_new(vm, l->parent, l->frame, VM_CTX_ITER, l->frame);
    if (!c)
        return NULL;
    c->iter = l->next++;
    c->loop = l;
    c->refs = 1;
    if (l->last) {
        l->last->next_iter = c;
        c->refs++;
    } else {
        l->first = c;
    }
    l->last = c;
    if (c->iter == 0 && l->arrived < vm->plan.frames[l->frame].n_enter) {
        l->holding = 1; /* more ENTER tokens are coming for iteration 0 */
        c->refs++;
    }
    /* `ENTER const` values are visible in every iteration. */
    const vm_fplan *f = &vm->plan.frames[l->frame];
    for (uint32_t k = 0; k < f->n_const; k++)
        if (l->consts[k].dtype)
            vm_send(vm, c, f->const_enters[k], 0, &l->consts[k]);
    return c;
}

static bool defer(tfvm_vm *vm, vm_loop *l, uint32_t inst, const dev_value *v)
{
    if (l->n_deferred == l->cap_deferred) {
        uint32_t cap = l->cap_deferred ? l->cap_deferred * 2 : 4;
        void *p = ut_realloc(&vm->alloc, l->deferred, l->cap_deferred * sizeof *l->deferred,
                             cap * sizeof *l->deferred);
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

/* Starts the deferred iteration once the parallel bound allows it. */
static void release_deferred(tfvm_vm *vm, vm_loop *l)
{
    const vm_fplan *f = &vm->plan.frames[l->frame];
    uint64_t oldest = l->first ? l->first->iter : l->next;
    if (!l->n_deferred || l->next - oldest >= f->parallel)
        return;
    vm_ctx *c = iter_new(vm, l);
    if (!c)
        return;
    for (uint32_t k = 0; k < l->n_deferred; k++) {
        vm_send(vm, c, l->deferred[k].inst, 0, &l->deferred[k].v);
        dev_value_release(&l->deferred[k].v);
    }
    l->n_deferred = 0;
    vm_ctx_unref(vm, c);
}

vm_ctx *vm_iter_release(tfvm_vm *vm, vm_ctx *c)
{
    vm_loop *l = c->loop;
    vm_ctx *succ = c->next_iter;
    /* Only the oldest iteration can end: every other one is held by its
     * predecessor. */
    l->first = succ;
    if (!succ)
        l->last = NULL;
    vm_iter_recycle(vm, c);
    if (l->n_deferred)
        release_deferred(vm, l);
    if (succ)
        return succ; /* drop the hold c had on it */
    return loop_maybe_end(vm, l);
}

static void fire_enter(tfvm_vm *vm, const vm_act *a, dev_value *v)
{
    const isa_inst *in = &vm->prog->insts[a->inst];
    const vm_fplan *f = &vm->plan.frames[in->a];
    vm_loop *l = vm_loop_get(vm, a->ctx, in->a, vm->plan.insts[a->inst].child);
    if (!l)
        return;
    l->arrived++;
    if (v->dead) {
        if (l->entered == VM_ENTERED_LIVE) {
            deadness_error(vm, a->ctx, a->inst, "loop", vm->prog->regions[in->a].name);
            return;
        }
        if (l->entered == VM_ENTERED_NONE) {
            /* A dead token never enters a loop: each EXIT says "dead" once. */
            l->entered = VM_ENTERED_DEAD;
            for (uint32_t k = 0; k < f->n_exits; k++)
                vm_send(vm, a->ctx, f->exits[k], 0, &dead_token);
        }
    } else if (l->entered == VM_ENTERED_DEAD) {
        deadness_error(vm, a->ctx, a->inst, "loop", vm->prog->regions[in->a].name);
        return;
    } else {
        l->entered = VM_ENTERED_LIVE;
        if (in->flags & ISA_FLAG_CONST) {
            uint32_t k = vm->plan.insts[a->inst].k;
            if (l->consts[k].dtype) {
                /* A second token for this ENTER at one tag: overwriting would
                 * leak the first value and count one ENTER twice (ending the
                 * instance before its other ENTERs arrived). */
                vm_fail(vm, TFVM_ERR_PORT, a->ctx, a->inst, "two tokens for input 0 at one tag");
                return;
            }
            l->consts[k] = *v;
            v->is_tensor = 0; /* the loop instance keeps the reference */
            for (vm_ctx *it = l->first; it && vm->state != VM_FAILED; it = it->next_iter)
                vm_send(vm, it, a->inst, 0, &l->consts[k]);
        } else if (l->next == 0) {
            vm_ctx *c = iter_new(vm, l);
            if (!c)
                return;
            vm_send(vm, c, a->inst, 0, v);
            vm_ctx_unref(vm, c);
        } else {
            /* iteration 0 is held alive until every ENTER has arrived */
            vm_send(vm, l->first, a->inst, 0, v);
        }
    }
    if (l->arrived == f->n_enter) {
        if (l->holding) {
            /* may end iteration 0, and with it the loop instance */
            l->holding = 0;
            vm_ctx_unref(vm, l->first);
        } else {
            vm_ctx_unref(vm, loop_maybe_end(vm, l));
        }
    }
}

static void fire_nextiter(tfvm_vm *vm, const vm_act *a, dev_value *v)
{
    if (v->dead)
        return; /* dead tokens end the body's chain */
    vm_ctx *c = a->ctx;
    vm_loop *l = c->loop;
    if (c->next_iter) {
        vm_send(vm, c->next_iter, a->inst, 0, v);
        return;
    }
    /* c is the newest iteration: start the next one, or wait for the oldest
     * to finish if parallel iterations are already in flight. */
    if (l->next - l->first->iter >= vm->plan.frames[l->frame].parallel) {
        if (!defer(vm, l, a->inst, v))
            vm_fail(vm, TFVM_ERR_NOMEM, c, a->inst, "out of memory deferring an iteration");
        else
            v->is_tensor = 0; /* the deferred token keeps the reference */
        return;
    }
    vm_ctx *n = iter_new(vm, l);
    if (!n)
        return;
    vm_send(vm, n, a->inst, 0, v);
    vm_ctx_unref(vm, n);
}

static void fire_call(tfvm_vm *vm, const vm_act *a, dev_value *v)
{
    const isa_inst *in = &vm->prog->insts[a->inst];
    const isa_site *site = &vm->prog->sites[in->a];
    const vm_splan *sp = &vm->plan.sites[in->a];
    uint32_t child = vm->plan.insts[a->inst].child;
    vm_ctx *c = a->ctx;
    vm_ctx *callee = c->children[child];
    if (!callee) {
        callee = vm_ctx_new(vm, c, site->callee, VM_CTX_CALL, in->a);
        if (!callee)
            return;
        callee->child = child;
        callee->refs = 1; /* held until every CALL of the site has arrived */
        c->children[child] = callee;
    }
    callee->arrived++;
    const char *fname = vm->prog->regions[site->callee].name;
    if (v->dead) {
        if (callee->entered == VM_ENTERED_LIVE) {
            deadness_error(vm, c, a->inst, "call of", fname);
            return;
        }
        if (callee->entered == VM_ENTERED_NONE) {
            /* A dead token never enters a function: each RETURN of the site
             * says "dead" once, in the caller. */
            callee->entered = VM_ENTERED_DEAD;
            for (uint32_t k = 0; k < sp->n_returns; k++)
                vm_send(vm, c, sp->returns[k], 0, &dead_token);
        }
    } else if (callee->entered == VM_ENTERED_DEAD) {
        deadness_error(vm, c, a->inst, "call of", fname);
        return;
    } else {
        callee->entered = VM_ENTERED_LIVE;
        vm_send(vm, callee, a->inst, 0, v);
    }
    if (callee->arrived == sp->n_call)
        vm_ctx_unref(vm, callee);
}

void vm_fire_control(tfvm_vm *vm, const vm_act *a, dev_value *in)
{
    const isa_inst *inst = &vm->prog->insts[a->inst];
    vm_ctx *c = a->ctx;
    switch ((isa_op)inst->op) {
    case ISA_IDENTITY:
    case ISA_LOOPCOND:
        vm_send(vm, c, a->inst, 0, &in[0]);
        break;
    case ISA_SWITCH: {
        if (in[0].dead || in[1].dead) {
            vm_send(vm, c, a->inst, 0, &dead_token);
            vm_send(vm, c, a->inst, 1, &dead_token);
            break;
        }
        if (in[1].is_tensor || in[1].dtype != TFVM_BOOL) {
            vm_fail(vm, TFVM_ERR_TYPE, c, a->inst, "predicate must be a bool scalar, got %s%s",
                    tfvm_dtype_name((tfvm_dtype)in[1].dtype), in[1].is_tensor ? " tensor" : "");
            break;
        }
        uint32_t taken = in[1].u.b ? 1 : 0;
        vm_send(vm, c, a->inst, taken, &in[0]);
        vm_send(vm, c, a->inst, 1 - taken, &dead_token);
        break;
    }
    case ISA_MERGE:
        if (in[0].dead) {
            vm_send(vm, c, a->inst, 0, &dead_token);
            vm_send(vm, c, a->inst, 1, &dead_token);
        } else {
            dev_value index = {.dtype = TFVM_I32, .u.i32 = (int32_t)a->aux};
            vm_send(vm, c, a->inst, 0, &in[0]);
            vm_send(vm, c, a->inst, 1, &index);
        }
        break;
    case ISA_ENTER:
        fire_enter(vm, a, &in[0]);
        break;
    case ISA_EXIT:
        if (!in[0].dead)
            vm_send(vm, c->loop->parent, a->inst, 0, &in[0]);
        break;
    case ISA_NEXTITER:
        fire_nextiter(vm, a, &in[0]);
        break;
    case ISA_CALL:
        fire_call(vm, a, &in[0]);
        break;
    case ISA_RETURN:
        vm_send(vm, c->parent, a->inst, 0, &in[0]);
        break;
    default:
        vm_fail(vm, TFVM_ERR_INTERNAL, c, a->inst, "not a control instruction");
        break;
    }
}
