/* vm/run.c — a run's lifecycle: arguments in, sources fired at the root
 * tag, stepping, results out, and everything of the run freed (tfvm_run is
 * vm_begin, vm_step until done, vm_end; the debugger steps). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/place.h"
#include "vm.h"
#include "vm/signature.h"

static double now_seconds(void) { return (double)ut_now_ns() * 1e-9; }

/* ---- Runs ---------------------------------------------------------------------------- */

/* scalar: the parameter is a scalar, which a 0-d tensor (as .npy files and
 * other frameworks hold scalars) gives too (vm/signature.c lets it fit). */
static dev_value from_api(const tfvm_value *v, bool scalar)
{
    dev_value d = {.dtype = (uint8_t)v->dtype};
    if (v->tensor && scalar) {
        d.dtype = (uint8_t)tfvm_tensor_dtype(v->tensor);
        memcpy(&d.u, tfvm_tensor_cdata(v->tensor), tfvm_dtype_size(tfvm_tensor_dtype(v->tensor)));
        return d;
    }
    if (v->tensor) {
        d.is_tensor = 1;
        d.dtype = (uint8_t)tfvm_tensor_dtype(v->tensor);
        d.u.t = tfvm_tensor_ref(v->tensor);
        return d;
    }
    /* every member of both unions starts at its first byte */
    memcpy(&d.u, &v->as, tfvm_dtype_size(v->dtype));
    return d;
}

static void teardown(tfvm_vm *vm);

static bool run_in_progress(const tfvm_vm *vm)
{
    uint64_t ctxs, loops;
    vm_count_live(vm, &ctxs, &loops);
    return vm->root || vm->results || ctxs || loops;
}

tfvm_status vm_begin(tfvm_vm *vm, uint32_t entry, const tfvm_value *args, size_t n_args)
{
    const isa_program *p = vm->prog;
    const isa_entry *en = &p->entries[entry];
    /* A previous run that was stepped but never ended (a debugger that
     * stopped early) is discarded, so that nothing of it leaks. */
    if (run_in_progress(vm))
        teardown(vm);
    ut_err_clear(&vm->err);
    vm->iter_order = false;
    memset(&vm->stats, 0, sizeof vm->stats);
    for (uint32_t i = 0; i < vm->n_workers; i++) {
        memset(&vm->w[i].st, 0, sizeof vm->w[i].st);
        vm->w[i].sw.parks = vm->w[i].sw.steals = vm->w[i].inline_runs = vm->w[i].shares = 0;
    }
    atomic_store(&vm->live_peak, 0);
    sched_run_reset(&vm->run);
    vm_io_begin(vm);
    atomic_store(&vm->state, VM_RUNNING);
    atomic_store(&vm->interrupted, 0);
    vm->has_paused = false;
    vm->entry = entry;
    vm->t_start = now_seconds();
    if (vm->profiling && !vm->prof_t0) {
        vm->prof_t0 = vm_ticks();
        vm->prof_s0 = vm->t_start;
    }

    tfvm_status sig = vm_sig_check_args(en, args, n_args, &vm->err);
    if (sig != TFVM_OK) {
        atomic_store(&vm->state, VM_FAILED);
        return sig;
    }
    vm->results = ut_calloc(&vm->alloc, en->n_results + 1, sizeof(dev_value));
    vm->result_set = ut_calloc(&vm->alloc, en->n_results + 1, 1);
    if (!vm->results || !vm->result_set) {
        teardown(vm);
        atomic_store(&vm->state, VM_FAILED);
        return ut_err(&vm->err, TFVM_ERR_NOMEM, "out of memory starting a run");
    }
    vm_worker *w = &vm->w[0];
    vm->root = vm_ctx_new(w, NULL, en->region, VM_CTX_ROOT, 0);
    if (!vm->root) {
        tfvm_status st = vm->err.code;
        teardown(vm);
        return st;
    }
    atomic_store(&vm->root->refs, 1); /* the run's own hold, dropped in vm_end */
    /* Sources fire once at the root tag: every ARG, and CONSTs without
     * control inputs. Pushed in order, so the LIFO fires the last first:
     * each source's work runs depth first, and the first ARG's last. A
     * function called with several arguments then has them all before its
     * body runs on the first one (which usually decides the recursion):
     * in the other order, an argument that is only passed along would wait
     * at the bottom of the stack while the whole recursion ran, holding
     * every context it made. */
    const vm_rplan *rp = &vm->plan.regions[en->region];
    for (uint32_t i = rp->first; i < rp->end && !vm_failed(vm); i++) {
        const isa_inst *in = &p->insts[i];
        if (in->op == ISA_ARG) {
            const isa_param *q = &en->params[in->a];
            dev_value v;
            if (tfvm_is_default(&args[in->a])) { /* its default (checked above): the VM's constant */
                v = vm->consts[q->dflt];
                dev_value_retain(&v);
            } else {
                v = from_api(&args[in->a], q->rank == 0);
            }
            vm_push(w, vm->root, i, 0, &v, false); /* takes v, even when it fails */
        } else if (in->op == ISA_CONST && in->n_ctl == 0) {
            vm_push(w, vm->root, i, 0, NULL, false);
        }
    }
    return vm_failed(vm) ? vm->err.code : TFVM_OK;
}

void vm_value_to_api(const dev_value *d, tfvm_value *v)
{
    memset(v, 0, sizeof *v);
    v->dtype = (tfvm_dtype)d->dtype;
    if (d->is_tensor) {
        v->tensor = d->u.t;
        return;
    }
    memcpy(&v->as, &d->u, tfvm_dtype_size((tfvm_dtype)d->dtype));
}

void vm_count_live(const tfvm_vm *vm, uint64_t *contexts, uint64_t *loops)
{
    *contexts = *loops = 0;
    for (uint32_t i = 0; vm->w && i < vm->n_workers; i++) {
        for (const vm_ctx *c = vm->w[i].blocks; c; c = c->next_block)
            *contexts += c->live;
        for (const vm_loop *l = vm->w[i].loops; l; l = l->next_block)
            *loops += l->live;
    }
}

vm_loop *vm_any_live_loop(const tfvm_vm *vm)
{
    for (uint32_t i = 0; i < vm->n_workers; i++)
        for (vm_loop *l = vm->w[i].loops; l; l = l->next_block)
            if (l->live)
                return l;
    return NULL;
}


static void drop_act(void *ud, const void *item)
{
    (void)ud;
    vm_act a;
    memcpy(&a, item, sizeof a);
    dev_value_release(&a.v);
}

/* Frees every context, loop and queued activation of the run (one thread:
 * the workers have stopped). Context and loop memory stays with the
 * workers for the next run. */
static void teardown(tfvm_vm *vm)
{
    for (uint32_t i = 0; i < vm->n_workers; i++) {
        vm_worker *w = &vm->w[i];
        if (w->has_next)
            dev_value_release(&w->next.v);
        w->has_next = false;
        if (vm->multi) {
            dq_each(&w->sw.dq, drop_act, NULL);
            sched_item it;
            while (dq_pop(&w->sw.dq, &it))
                ;
        }
        for (size_t k = w->sw.lo_stack; k < w->sw.n_stack; k++)
            drop_act(NULL, &w->sw.stack[k]);
        w->sw.n_stack = w->sw.lo_stack = 0;
    }
    if (vm->has_paused) {
        dev_value_release(&vm->paused.v);
        vm->has_paused = false;
    }
    sched_inbox_clear(&vm->run, drop_act, NULL); /* FEEDs the host completed, not yet fired */
    vm_io_teardown(vm);
    for (uint32_t i = 0; i < vm->n_workers; i++) {
        vm_worker *w = &vm->w[i];
        for (vm_loop *l = w->loops; l; l = l->next_block)
            if (l->live)
                vm_loop_destroy(&vm->w[0], l);
        for (vm_ctx *c = w->blocks; c; c = c->next_block) {
            if (!c->live)
                continue;
            const vm_rplan *rp = &vm->plan.regions[c->region];
            for (uint32_t k = 0; k < rp->n_slots; k++)
                dev_value_release(&c->slots[k]);
            vm_ctx_recycle(w, c);
        }
        atomic_store(&w->live, 0);
    }
    if (vm->results) {
        const isa_entry *en = &vm->prog->entries[vm->entry];
        for (uint32_t k = 0; k < en->n_results; k++)
            dev_value_release(&vm->results[k]);
        ut_free(&vm->alloc, vm->results, (en->n_results + 1) * sizeof(dev_value));
        vm->results = NULL;
    }
    if (vm->result_set) {
        ut_free(&vm->alloc, vm->result_set, vm->prog->entries[vm->entry].n_results + 1);
        vm->result_set = NULL;
    }
    vm->root = NULL;
    vm->n_seq_waiting = 0;
    /* Each worker's free contexts and loops are again those it made. One
     * that another worker released went onto that worker's free list: a
     * worker that makes more than it releases (the one running the layer
     * below of a recurrent pipeline) would otherwise make new ones run
     * after run, and every run's walks of them grow. */
    for (uint32_t i = 0; i < vm->n_workers; i++) {
        vm_worker *w = &vm->w[i];
        memset(w->free_ctx, 0, vm->prog->n_regions * sizeof *w->free_ctx);
        w->free_loops = NULL;
    }
    for (uint32_t i = 0; i < vm->n_workers; i++) {
        vm_worker *w = &vm->w[i];
        for (vm_ctx *c = w->blocks; c; c = c->next_block) {
            c->parent = w->free_ctx[c->region];
            w->free_ctx[c->region] = c;
        }
        for (vm_loop *l = w->loops; l; l = l->next_block) {
            l->next_free = w->free_loops;
            w->free_loops = l;
        }
    }
}

static void sum_stats(tfvm_vm *vm)
{
    tfvm_stats *s = &vm->stats;
    memset(s, 0, sizeof *s);
    for (uint32_t i = 0; i < vm->n_workers; i++) {
        const tfvm_stats *t = &vm->w[i].st;
        s->fired += t->fired;
        s->tokens += t->tokens;
        s->matches += t->matches;
        s->contexts_created += t->contexts_created;
        s->steals += vm->w[i].sw.steals;
        s->parks += vm->w[i].sw.parks;
        s->inline_runs += vm->w[i].inline_runs;
        s->shared += vm->w[i].shares;
    }
    s->workers = vm->n_workers;
    s->contexts_peak = (uint64_t)atomic_load(&vm->live_peak);
    /* several workers sample the peak (every VM_PEAK_SAMPLE contexts made):
     * a run that made any had at least one live, never "peak 0" */
    if (!s->contexts_peak && s->contexts_created)
        s->contexts_peak = 1;
}

tfvm_status vm_end(tfvm_vm *vm, tfvm_value *results, size_t n_results)
{
    const isa_entry *en = &vm->prog->entries[vm->entry];
    tfvm_status st = TFVM_OK;
    int state = atomic_load(&vm->state);
    if (state == VM_DONE) {
        st = vm_check_results(vm);
        if (st == TFVM_OK) {
            tfvm_error se;
            if ((st = vm_sig_check_results(en, vm->results, &se)) != TFVM_OK)
                vm_fail(vm, st, NULL, ISA_NONE, "%s", se.message);
        }
        if (st == TFVM_OK && n_results != en->n_results)
            vm_fail(vm, st = TFVM_ERR_ARGUMENT, NULL, ISA_NONE, "entry '%s' has %u result%s, caller asked for %zu",
                    en->name, en->n_results, en->n_results == 1 ? "" : "s", n_results);
        if (st == TFVM_OK) {
            for (uint32_t k = 0; k < en->n_results; k++) {
                vm_value_to_api(&vm->results[k], &results[k]);
                vm->results[k].is_tensor = 0; /* ownership moved to the caller */
            }
        }
    } else if (state == VM_FAILED) {
        st = vm->err.code;
    } else if (state == VM_RUNNING || state == VM_PAUSED) {
        st = ut_err(&vm->err, TFVM_ERR_INTERRUPTED, "run abandoned before it finished");
    }
    if (vm->root && !vm_failed(vm)) {
        vm_ctx *root = vm->root;
        vm->root = NULL;
        vm_ctx_unref(&vm->w[0], root);
    }
    sum_stats(vm);
    teardown(vm);
    vm->stats.wall_seconds = now_seconds() - vm->t_start;
    if (vm->profiling) {
        vm->prof_t1 = vm_ticks();
        vm->prof_s1 = now_seconds();
    }
    atomic_store(&vm->state, st == TFVM_OK ? VM_IDLE : VM_FAILED);
    return st;
}

