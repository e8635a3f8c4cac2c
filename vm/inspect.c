/* vm/inspect.c — read-only views of a paused or stopped run for the debugger:
 * ready activations in firing order, live contexts oldest first, and the
 * partial matches held in a context (which ports arrived, with what). */
#include <stdlib.h>

#include "vm.h"

/* The matching words of an instruction, laid out as run.c uses them (see
 * vm_iplan.match): ceil(ports/64) claim words, one bit per port, then a
 * status word counting arrivals; a MERGE marks its firing in bit 63. */
#define INSPECT_MERGE_FIRED (1ull << 63)

static uint64_t status_of(const tfvm_vm *vm, const vm_ctx *c, uint32_t inst)
{
    const vm_iplan *ip = &vm->plan.insts[inst];
    return atomic_load_explicit(&c->words[ip->match + (ip->ports + 63) / 64], memory_order_relaxed);
}

size_t vm_ready_each(const tfvm_vm *vm, void (*fn)(void *ud, const vm_act *a), void *ud)
{
    if (!vm->w || vm->multi)
        return 0;
    const vm_worker *w = &vm->w[0];
    size_t n = 0;
    if (vm->has_paused) {
        if (fn)
            fn(ud, &vm->paused);
        n++;
    }
    if (w->has_next) {
        if (fn)
            fn(ud, &w->next);
        n++;
    }
    const vm_act *stack = (const vm_act *)(const void *)w->sw.stack;
    for (size_t k = w->sw.n_stack; k-- > 0;) {
        if (fn)
            fn(ud, &stack[k]);
        n++;
    }
    return n;
}

const dev_value *vm_act_input(const tfvm_vm *vm, const vm_act *a, uint32_t port)
{
    const isa_inst *in = &vm->prog->insts[a->inst];
    const vm_iplan *ip = &vm->plan.insts[a->inst];
    if (port >= in->n_in)
        return NULL;
    if ((int)port == ip->imm)
        return &vm->consts[in->b];
    if (in->op == ISA_MERGE)
        return port == a->aux ? &a->v : NULL;
    if (!ip->matched) /* its one token: the data input that is not the constant */
        return port == (ip->imm == 0 ? 1u : 0u) ? &a->v : NULL;
    return &a->ctx->slots[ip->slot + port];
}

static int by_serial(const void *a, const void *b)
{
    const vm_ctx *x = *(const vm_ctx *const *)a, *y = *(const vm_ctx *const *)b;
    return x->serial < y->serial ? -1 : x->serial > y->serial;
}

tfvm_status vm_live_contexts(const tfvm_vm *vm, vm_ctx ***out, size_t *n)
{
    uint64_t n_ctx, n_loops;
    vm_count_live(vm, &n_ctx, &n_loops);
    *out = NULL;
    *n = 0;
    vm_ctx **all = ut_calloc(&vm->alloc, n_ctx + 1, sizeof *all);
    if (!all)
        return TFVM_ERR_NOMEM;
    /* the same walk as vm_count_live: exactly n_ctx contexts */
    size_t k = 0;
    for (uint32_t wi = 0; wi < vm->n_workers; wi++)
        for (vm_ctx *c = vm->w[wi].blocks; c && k < n_ctx; c = c->next_block)
            if (c->live)
                all[k++] = c;
    qsort(all, k, sizeof *all, by_serial);
    *out = all;
    *n = (size_t)n_ctx;
    return TFVM_OK;
}

void vm_contexts_free(const tfvm_vm *vm, vm_ctx **list, size_t n)
{
    ut_free(&vm->alloc, list, (n + 1) * sizeof *list);
}

const vm_loop *vm_ctx_loop(const tfvm_vm *vm, const vm_ctx *c, uint32_t k)
{
    if (k >= vm->plan.regions[c->region].n_frames)
        return NULL;
    return atomic_load_explicit(&c->children[k], memory_order_relaxed);
}

vm_match vm_match_state(const tfvm_vm *vm, const vm_ctx *c, uint32_t inst)
{
    const vm_iplan *ip = &vm->plan.insts[inst];
    if (!ip->matched)
        return VM_MATCH_NONE;
    uint64_t s = status_of(vm, c, inst);
    uint64_t count = s & ~INSPECT_MERGE_FIRED;
    if (vm->prog->insts[inst].op == ISA_MERGE && (s & INSPECT_MERGE_FIRED))
        return VM_MATCH_FIRED;
    if (count == 0)
        return VM_MATCH_NONE;
    return count >= ip->need ? VM_MATCH_READY : VM_MATCH_WAITING;
}

bool vm_port_arrived(const tfvm_vm *vm, const vm_ctx *c, uint32_t inst, uint32_t port)
{
    const vm_iplan *ip = &vm->plan.insts[inst];
    if (!ip->matched || port >= ip->ports)
        return false;
    if ((int)port == ip->imm)
        return true;
    uint64_t w = atomic_load_explicit(&c->words[ip->match + port / 64], memory_order_relaxed);
    return (w >> (port % 64)) & 1;
}

const dev_value *vm_port_value(const tfvm_vm *vm, const vm_ctx *c, uint32_t inst, uint32_t port)
{
    const isa_inst *in = &vm->prog->insts[inst];
    if (in->op == ISA_MERGE || port >= in->n_in || !vm_port_arrived(vm, c, inst, port))
        return NULL;
    if ((int)port == vm->plan.insts[inst].imm)
        return &vm->consts[in->b];
    return &c->slots[vm->plan.insts[inst].slot + port];
}
