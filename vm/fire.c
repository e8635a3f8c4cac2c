/* vm/fire.c — firing an activation (the commonest instructions of recursive
 * and looping code take a short path; the rest go to the kernels and
 * control.c), and the one run loop every worker runs, whatever the policy:
 * local work first, then the policy (scheduler/sched.h) when it runs out.
 * Profiling times every firing in a separate instance of the loop. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "devices/place.h"
#include "match.h"

/* ---- Firing ----------------------------------------------------------------------- */

static void fire_result(vm_worker *w, const vm_act *a, dev_value *v)
{
    tfvm_vm *vm = w->vm;
    uint32_t k = vm->prog->insts[a->inst].a;
    if (atomic_exchange(&vm->result_set[k], 1)) {
        vm_fail(vm, TFVM_ERR_PORT, a->ctx, a->inst, "result %u produced twice", k);
        return;
    }
    if (v->is_tensor) { /* the caller gets host memory, and may write it */
        char msg[256];
        tfvm_status st = dev_vm_result(vm->dev, v, msg, sizeof msg);
        if (st != TFVM_OK) {
            vm_fail(vm, st, a->ctx, a->inst, "%s", msg);
            return;
        }
    }
    vm->results[k] = *v;
    v->is_tensor = 0; /* moved */
}

/* Compute instructions: kernels on the inputs; a dead input makes the
 * output dead. */
static void fire_compute(vm_worker *w, const vm_act *a, dev_value *inputs, bool dead)
{
    tfvm_vm *vm = w->vm;
    const isa_inst *in = &vm->prog->insts[a->inst];
    dev_value out = dev_dead();
    if (!dead) {
        char msg[256];
        tfvm_status st = dev_vm_fire(vm->dev, in, inputs, &out, msg, sizeof msg); /* devices/place.h */
        if (st != TFVM_OK) {
            vm_fail(vm, st, a->ctx, a->inst, "%s", msg);
            return;
        }
    }
    vm_send(w, a->ctx, a->inst, 0, &out);
    dev_value_release(&out);
}

/* Most data inputs of a compute instruction (STRIDED_SLICE's 5). */
#define VM_MAX_IN 5

/* Everything but the few instructions fire() handles inline. */
static void fire_general(vm_worker *w, vm_act *a, const vm_iplan *ip)
{
    tfvm_vm *vm = w->vm;
    const isa_inst *in = &vm->prog->insts[a->inst];
    vm_ctx *c = a->ctx;
    dev_value inputs[VM_MAX_IN] = {{0}};
    bool dead = false;

    if (!ip->matched || ip->op == ISA_MERGE) {
        inputs[ip->imm == 0] = a->v;
        dead = a->v.dead;
    } else {
        dev_value *s = &c->slots[ip->slot];
        for (uint32_t p = 0; p < ip->ports; p++) {
            dead |= s[p].dead;
            if (p < in->n_in && p < VM_MAX_IN)
                inputs[p] = s[p];
            else
                dev_value_release(&s[p]);
            s[p] = (dev_value){0};
        }
    }
    if (ip->imm >= 0) {
        inputs[ip->imm] = vm->consts[in->b];
        dev_value_retain(&inputs[ip->imm]);
    }
    switch (ip->cls) {
    case ISA_CLASS_SOURCE:
        if (ip->op == ISA_ARG) {
            vm_send(w, c, a->inst, 0, &inputs[0]);
        } else {
            dev_value v = dead ? dev_dead() : vm->consts[in->a];
            vm_send(w, c, a->inst, 0, &v);
        }
        break;
    case ISA_CLASS_SINK:
        fire_result(w, a, &inputs[0]);
        break;
    case ISA_CLASS_CONTROL:
        vm_fire_control(w, a, inputs);
        break;
    case ISA_CLASS_HOST:
        vm_fire_host(w, a, inputs, dead);
        break;
    default:
        fire_compute(w, a, inputs, dead);
        break;
    }
    for (int i = 0; i < VM_MAX_IN; i++)
        dev_value_release(&inputs[i]);
}

/* Scalar arithmetic and comparison on two live integer or float scalars of
 * one dtype, without the kernel library's generality (the kernels define
 * the results: integers wrap; this path leaves division, modulo and
 * everything else to them). False: not that case, nothing consumed. */
static UT_INLINE bool fire_scalar(vm_worker *w, vm_act *a, const vm_iplan *ip)
{
    tfvm_vm *vm = w->vm;
    dev_value x, y;
    dev_value *s = NULL;
    if (!ip->matched) {
        if (ip->imm < 0)
            return false;
        x = a->v;
        y = vm->consts[ip->k];
        if (ip->imm == 0) {
            dev_value t = x;
            x = y;
            y = t;
        }
    } else {
        if (ip->ports != 2)
            return false;
        s = &a->ctx->slots[ip->slot];
        x = s[0];
        y = s[1];
    }
    dev_value r;
    if (x.dead || y.dead || !vm_scalar_op(ip->op, &x, &y, &r))
        return false;
    if (s)
        s[0] = s[1] = (dev_value){0};
    vm_send(w, a->ctx, a->inst, 0, &r);
    return true;
}

/* One activation. The commonest instructions of recursive and looping code
 * (moves, RETURN, SWITCH on a scalar predicate) take a short path here; the
 * rest go through fire_general. */
static UT_INLINE void fire(vm_worker *w, vm_act *a)
{
    tfvm_vm *vm = w->vm;
    const vm_iplan *ip = &vm->plan.insts[a->inst];
    vm_ctx *c = a->ctx;

    w->st.fired++;
    w->held = c;
    w->spare = true;
    switch (ip->op) {
    case ISA_IDENTITY:
    case ISA_LOOPCOND:
        vm_send(w, c, a->inst, 0, &a->v);
        dev_value_release(&a->v);
        break;
    case ISA_RETURN:
        vm_send(w, c->parent, a->inst, 0, &a->v);
        dev_value_release(&a->v);
        break;
    case ISA_CALL:
        if (vm->plan.sites[vm->prog->insts[a->inst].a].n_call == 1)
            vm_call_one(w, c, a->inst, &a->v);
        else
            vm_fire_call(w, a, &a->v);
        dev_value_release(&a->v);
        break;
    case ISA_BRANCH: {
        /* the commonest case inline: a live integer against its constant */
        const isa_inst *in = &vm->prog->insts[a->inst];
        vm_route_to to = vm_rule_branch_int((uint16_t)in->a, &a->v, &vm->consts[in->b]);
        if (to == VM_ROUTE_BAD) {
            vm_fire_branch(w, a, &a->v);
            dev_value_release(&a->v);
            break;
        }
        vm_route(w, c, a->inst, in->flags, to, &a->v);
        break;
    }
    case ISA_FEED:
        if (!vm_feed_resumed(w, a))
            fire_general(w, a, ip);
        break;
    case ISA_CONST:
        if (ip->matched) { /* several control inputs */
            fire_general(w, a, ip);
        } else {
            dev_value v = a->v.dead ? dev_dead() : vm->consts[vm->prog->insts[a->inst].a];
            vm_send(w, c, a->inst, 0, &v);
            dev_value_release(&a->v);
        }
        break;
    case ISA_SWITCH: {
        dev_value *s = &c->slots[ip->slot];
        dev_value d = s[0], p = s[1];
        if (ip->ports != 2 || d.dead || vm_rule_predicate(&p) > VM_ROUTE_TRUE) {
            fire_general(w, a, ip); /* dead, a bad predicate, or control inputs */
            break;
        }
        s[0] = s[1] = (dev_value){0};
        vm_route(w, c, a->inst, vm->prog->insts[a->inst].flags, p.u.b, &d);
        dev_value_release(&d);
        break;
    }
    case ISA_ADD:
    case ISA_SUB:
    case ISA_MUL:
    case ISA_MIN:
    case ISA_MAX:
    ISA_COMPARISONS(ISA_COMPARISON_LABEL)
        if (!fire_scalar(w, a, ip))
            fire_general(w, a, ip);
        break;
    default:
        fire_general(w, a, ip);
        break;
    }
    w->held = NULL;
    if (w->spare)
        vm_ctx_unref(w, c);
}

/* ---- Workers ------------------------------------------------------------------------ */

static inline bool take_local(vm_worker *w, vm_act *a)
{
    if (w->has_next) {
        /* field by field, matching how vm_push stored them (a wide copy
         * would stall on store forwarding) */
        a->ctx = w->next.ctx;
        a->inst = w->next.inst;
        a->aux = w->next.aux;
        a->v = w->next.v;
        w->has_next = false;
        w->inline_runs++;
        return true;
    }
    return sched_stack_pop(&w->sw, (sched_item *)(void *)a);
}

/* The debugger's firing order (stepped runs of tfvm_debug_begin): LIFO,
 * except that a NEXTITER waits while anything else is ready, and waiting
 * NEXTITERs fire oldest context first. Depth first alone, a loop's counter
 * ran ahead to the last iteration before any body work of iteration 0
 * fired, so the first stop in a loop body was at its last iteration; this
 * way iterations run in order, 0 first. Moves `next` onto the stack, so the
 * order the stack shows (tfvm_debug_ready) is the one that fires. False
 * when memory runs out (the run has failed). Plain runs never call it. */
static bool stepped_order(vm_worker *w)
{
    if (w->has_next) {
        if (!sched_stack_push(&w->sw, &w->vm->alloc, (const sched_item *)(const void *)&w->next)) {
            vm_fail(w->vm, TFVM_ERR_NOMEM, w->next.ctx, w->next.inst, "out of memory queueing an activation");
            return false;
        }
        w->has_next = false;
    }
    /* the stack, bottom to top: the NEXTITERs, those of the newest contexts
     * first (so the oldest iteration's fire first once nothing else is
     * ready), then the rest in their order: an insertion sort, as only the
     * few activations pushed by the last firing are out of place */
    vm_act *st = (vm_act *)(void *)w->sw.stack;
    const isa_inst *insts = w->vm->prog->insts;
    size_t lo = w->sw.lo_stack, end = lo; /* st[lo .. end): the NEXTITERs, sorted */
    for (size_t k = lo; k < w->sw.n_stack; k++) {
        if (insts[st[k].inst].op != ISA_NEXTITER)
            continue;
        vm_act t = st[k];
        size_t at = end;
        while (at > lo && st[at - 1].ctx->serial < t.ctx->serial)
            at--;
        memmove(&st[at + 1], &st[at], (k - at) * sizeof *st);
        st[at] = t;
        end++;
    }
    return true;
}

/* ---- Profiling ------------------------------------------------------------------------ */

tfvm_status vm_profile(tfvm_vm *vm, bool on)
{
    size_t n = 2 * (size_t)vm->prog->n_insts + 2;
    for (uint32_t i = 0; vm->w && i < vm->n_workers; i++) {
        vm_worker *w = &vm->w[i];
        if (w->prof) {
            ut_free(&vm->alloc, w->prof, n * sizeof *w->prof);
            w->prof = NULL;
        }
        if (on && !(w->prof = ut_calloc(&vm->alloc, n, sizeof *w->prof))) {
            vm_profile(vm, false);
            return TFVM_ERR_NOMEM;
        }
    }
    vm->profiling = on;
    vm->prof_t0 = vm->prof_t1 = 0;
    return TFVM_OK;
}

void vm_profile_read(const tfvm_vm *vm, uint64_t *count, double *ns)
{
    uint32_t n = vm->prog->n_insts;
    /* ticks to nanoseconds: the clock against the tick counter over the run */
    double scale = vm->prof_t1 > vm->prof_t0 ? (vm->prof_s1 - vm->prof_s0) * 1e9 / (double)(vm->prof_t1 - vm->prof_t0)
                                             : 0;
    for (uint32_t i = 0; i < n; i++) {
        count[i] = 0;
        ns[i] = 0;
        for (uint32_t k = 0; k < vm->n_workers; k++)
            if (vm->w[k].prof) {
                count[i] += vm->w[k].prof[2 * i];
                ns[i] += (double)vm->w[k].prof[2 * i + 1] * scale;
            }
    }
}

static UT_INLINE void fire_maybe_timed(vm_worker *w, vm_act *a, bool timed)
{
    if (!timed) {
        fire(w, a);
        return;
    }
    uint32_t i = a->inst;
    vm_trace_ev *ev = w->vm->trace_max ? vm_trace_open(w, a) : NULL;
    uint64_t t = vm_ticks();
    fire(w, a);
    uint64_t d = vm_ticks() - t;
    w->prof[2 * i]++;
    w->prof[2 * i + 1] += d;
    if (ev) {
        ev->t0 = t;
        ev->ticks = d;
    }
}

/* The run was interrupted: it fails where this worker is, at its next
 * activation (`have` one, or one taken from its own work, which the caller
 * gives back), or without a place when it has none. Returns whether it has
 * one. */
static bool interrupted_at(vm_worker *w, vm_act *a, bool have)
{
    if (!have)
        have = take_local(w, a);
    if (!have) {
        vm_fail(w->vm, TFVM_ERR_INTERRUPTED, NULL, ISA_NONE, "interrupted");
        return false;
    }
    vm_tag_walk t;
    vm_tag_walk_init(&t);
    vm_tag_walk_ctx(&t, a->ctx);
    vm_fail_interrupted(w->vm, &t, a->inst);
    return true;
}

/* The run loop of every worker, whatever the policy: the worker's own work
 * first (its `next` slot, then its private stack), and when that runs out,
 * the policy's find_work (the deterministic policy: the run is over; work
 * stealing: steal, help a kernel's loop, park, or learn the run is over).
 * Between firings the worker answers sharing requests and, every
 * SCHED_OFFER_EVERY firings, lets the policy offer its oldest work.
 * A worker that starts idle (`joining`: a pool thread) asks the policy's
 * join first. `timed` (profiling) and `stepped` (the debugger: a hook
 * before each firing, at most `max` firings, one worker) are constants in
 * each instance, so a plain run pays for neither. */
static UT_INLINE void work_as(vm_worker *w, bool timed, bool stepped, uint64_t max, bool joining)
{
    tfvm_vm *vm = w->vm;
    sched_run *run = &vm->run;
    const sched_policy *pol = vm->policy;
    vm_act a;
    uint64_t n = 0;
    bool have = false;
    w->fwd_room = timed || stepped ? 0 : 8;
    w->seq_ok = !timed && !stepped;
    if (joining) {
        if (!pol->join(run, &w->sw, (sched_item *)(void *)&a))
            return;
        have = true;
    }
    for (;;) {
        /* every 1024 firings (and before the first): an interrupt, or the
         * end of the run that another worker or an error decided */
        if (atomic_load_explicit(&vm->interrupted, memory_order_relaxed) && atomic_exchange(&vm->interrupted, 0))
            have = interrupted_at(w, &a, have);
        if (atomic_load_explicit(&run->done, memory_order_relaxed)) {
            if (have) /* a joining worker's first activation, stolen, or the one an
                         interrupt named: give it back */
                w->has_next = (w->next = a, true);
            return;
        }
        for (uint32_t k = 0; k < 1024; k++) {
            if (have) {
                have = false;
            } else if (stepped && vm->has_paused) {
                a = vm->paused;
                vm->has_paused = false;
            } else {
                if (stepped && max && n == max)
                    return;
                if (stepped && vm->iter_order && !stepped_order(w))
                    return;
                if (!take_local(w, &a)) {
                    if (atomic_load_explicit(&run->done, memory_order_relaxed) ||
                        !pol->find_work(run, &w->sw, (sched_item *)(void *)&a))
                        return;
                }
                if (stepped && vm->hook && vm->hook(vm->hook_ud, vm, &a)) {
                    vm->paused = a;
                    vm->has_paused = true;
                    atomic_store(&vm->state, VM_PAUSED);
                    return;
                }
            }
            fire_maybe_timed(w, &a, timed);
            if (stepped) {
                n++;
                if (vm_failed(vm) || (vm->iter_order && !stepped_order(w)))
                    return;
            }
            vm_serve_shares(w);
            if (++w->sw.since_donate >= SCHED_OFFER_EVERY) {
                w->sw.since_donate = 0;
                if (pol->offer)
                    pol->offer(run, &w->sw);
            }
        }
    }
}

static void par_run(void *self, size_t n, size_t grain, dev_par_fn fn, void *arg)
{
    vm_worker *w = self;
    sched_run_parallel_for(&w->vm->run, &w->sw, n, grain, fn, arg);
}

/* Worker i's part of a run with several workers (on a pool thread, or the
 * caller's for worker 0). */
static void worker_body(void *ud, uint32_t i)
{
    tfvm_vm *vm = ud;
    vm_worker *w = &vm->w[i];
    w->par = (dev_par_runner){.run = par_run, .self = w, .width = vm->n_workers};
    dev_par_set_runner(&w->par);
    if (i == 0) {
        atomic_store(&w->sw.busy, 1);
        sched_serve_as(&w->sw, memory_order_seq_cst);
    }
    if (vm->profiling)
        work_as(w, true, false, 0, i != 0);
    else
        work_as(w, false, false, 0, i != 0);
    atomic_store(&w->sw.busy, 0);
    vm_serve_shares(w);
    dev_par_set_runner(NULL);
}

vm_state vm_step(tfvm_vm *vm, uint64_t max)
{
    int state = atomic_load(&vm->state);
    if (state != VM_RUNNING && state != VM_PAUSED)
        return (vm_state)state;
    atomic_store(&vm->state, VM_RUNNING);
    vm_worker *w = &vm->w[0];
    if (vm->n_workers > 1) {
        /* several workers run to the end (stepping is for one worker) */
        if (!vm->pool) {
            vm->pool = sched_pool_new(vm->n_workers);
            vm->own_pool = vm->pool != NULL;
        }
        if (!vm->pool) {
            vm_fail(vm, TFVM_ERR_NOMEM, NULL, ISA_NONE, "out of memory starting worker threads");
        } else {
            atomic_store_explicit(&vm->run.pool, vm->pool, memory_order_relaxed);
            sched_pool_run(vm->pool, vm->n_workers, worker_body, vm);
        }
    } else if (vm->hook || vm->has_paused || max) {
        work_as(w, false, true, max, false);
        if (atomic_load(&vm->state) == VM_PAUSED || (max && !vm_failed(vm) && (w->has_next || w->sw.n_stack)))
            return (vm_state)atomic_load(&vm->state);
    } else if (vm->profiling) {
        work_as(w, true, false, 0, false);
    } else {
        work_as(w, false, false, 0, false);
    }
    if (!vm_failed(vm))
        atomic_store(&vm->state, VM_DONE);
    return (vm_state)atomic_load(&vm->state);
}
