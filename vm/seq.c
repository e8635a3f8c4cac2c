/* vm/seq.c — sequential frames (docs/frames.md): a call of a function body,
 * or an instance of a loop, whose instructions are scalar control and
 * arithmetic (with one worker, tensor work too) runs as a frame of registers
 * instead of contexts and tokens.
 *
 * The plan gives each such body a firing order in which producers come
 * before consumers (a call site's RETURNs after its CALLs, a nested loop's
 * results after its ENTERs), compiles it into specialised steps over
 * registers (one per instruction output), and orders the steps of each side
 * of a pruned branch contiguously behind a guard register, so a frame jumps
 * over the side that was not taken. A site's last CALL pushes the callee's
 * frame on a per-worker stack (recursion depth costs memory, not C stack); a
 * loop frame runs its iterations one after the other. It is the graph's own
 * firing rule in an order fixed in advance: the same instructions fire with
 * the same values, and the counters (firings, tokens, matches, contexts)
 * agree with a dataflow run's. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/place.h"
#include "vm.h"

/* ---- Plan ---------------------------------------------------------------------- */

static bool seq_op_ok(const isa_inst *in, bool loop, bool tensors)
{
    switch ((isa_op)in->op) {
    case ISA_NEXTITER:
    case ISA_EXIT:
        return loop;
    case ISA_ENTER: /* a nested loop: runs as a frame of its own (when its body can) */
    case ISA_CONST:
    case ISA_IDENTITY:
    case ISA_LOOPCOND:
    case ISA_SWITCH:
    case ISA_BRANCH:
    case ISA_MERGE:
    case ISA_CALL:
    case ISA_RETURN:
        return true;
    default:
        break;
    }
    isa_class c = isa_ops[in->op].cls;
    return isa_is_compute(c) && (c != ISA_CLASS_TENSOR || tensors) && isa_ops[in->op].n_out == 1 && in->n_in <= 5;
}

/* Topological order of region r's instructions (edges inside r, and each
 * site's CALLs before its RETURNs). false: a cycle (a RETURN that feeds a
 * CALL of its own site), or no memory. */
static bool seq_order(const isa_program *p, vm_plan *plan, uint32_t r)
{
    vm_rplan *rp = &plan->regions[r];
    uint32_t first = rp->first, n = rp->end - rp->first;
    uint32_t *indeg = calloc(n + 1, sizeof *indeg), *queue = malloc((n + 1) * sizeof *queue);
    bool ok = indeg && queue;
    for (uint32_t i = first; ok && i < rp->end; i++) {
        const isa_inst *in = &p->insts[i];
        for (uint32_t e = in->edge_first; e < in->edge_first + in->n_edges; e++) {
            uint32_t d = p->edges[e].inst;
            /* a RETURN's token comes from the callee's activation, a
             * NEXTITER's goes to the next iteration: not this one */
            if (in->op != ISA_CALL && in->op != ISA_NEXTITER && p->insts[d].region == r &&
                p->insts[d].op != ISA_RETURN)
                indeg[d - first]++;
        }
        if (in->op == ISA_RETURN) /* after every CALL of its site */
            indeg[i - first] += plan->sites[in->a].n_call;
    }
    /* a child loop's results come out of its EXITs: their consumers here
     * wait for every ENTER of that loop */
    for (uint32_t x = 0; ok && x < p->n_insts; x++) {
        const isa_inst *in = &p->insts[x];
        if (in->op != ISA_EXIT || p->regions[in->region].parent != r)
            continue;
        for (uint32_t e = in->edge_first; e < in->edge_first + in->n_edges; e++)
            if (p->insts[p->edges[e].inst].region == r)
                indeg[p->edges[e].inst - first] += plan->frames[in->region].n_enter;
    }
    uint32_t head = 0, tail = 0;
    for (uint32_t k = 0; ok && k < n; k++)
        if (!indeg[k])
            queue[tail++] = first + k;
    while (ok && head < tail) {
        uint32_t i = queue[head++];
        const isa_inst *in = &p->insts[i];
        if (in->op == ISA_CALL) {
            const vm_splan *sp = &plan->sites[in->a];
            for (uint32_t k = 0; k < sp->n_returns; k++)
                if (--indeg[sp->returns[k] - first] == 0)
                    queue[tail++] = sp->returns[k];
            continue;
        }
        if (in->op == ISA_ENTER) { /* the consumers of its loop's EXITs */
            const vm_rplan *lr = &plan->regions[in->a];
            for (uint32_t x = lr->first; x < lr->end; x++)
                if (p->insts[x].op == ISA_EXIT)
                    for (uint32_t e = p->insts[x].edge_first; e < p->insts[x].edge_first + p->insts[x].n_edges; e++) {
                        uint32_t d = p->edges[e].inst;
                        if (p->insts[d].region == r && --indeg[d - first] == 0)
                            queue[tail++] = d;
                    }
            continue;
        }
        for (uint32_t e = in->edge_first; e < in->edge_first + in->n_edges && in->op != ISA_NEXTITER; e++) {
            uint32_t d = p->edges[e].inst;
            if (p->insts[d].region == r && p->insts[d].op != ISA_RETURN && --indeg[d - first] == 0)
                queue[tail++] = d;
        }
    }
    ok = ok && tail == n;
    if (ok) {
        rp->order = ut_arena_array(&plan->arena, n + 1, sizeof(uint32_t));
        if ((ok = rp->order != NULL)) {
            memcpy(rp->order, queue, n * sizeof *queue);
            rp->n_order = n;
        }
    }
    free(indeg);
    free(queue);
    return ok;
}

/* A walk over one region at one tag: from the instructions marked in
 * `seen` (and on `stack`), along edges inside the region, through calls
 * (CALL -> its site's RETURNs) and nested loops (ENTER -> its EXITs'
 * consumers), never along a NEXTITER's edges (its token is the next
 * iteration's) or into a RETURN (the caller's). True when it reaches a CALL
 * of `site` or an ENTER of `frame` (ISA_NONE: none). */
typedef struct tag_walk {
    const isa_program *p;
    const vm_plan *plan;
    uint32_t region, first;
    uint8_t *seen;
    uint32_t *stack, top;
} tag_walk;

static void walk_push(tag_walk *t, uint32_t i)
{
    if (t->p->insts[i].region == t->region && !t->seen[i - t->first]) {
        t->seen[i - t->first] = 1;
        t->stack[t->top++] = i;
    }
}

/* The consumers of an instruction's tokens at this tag. */
static void walk_edges(tag_walk *t, uint32_t i)
{
    const isa_inst *in = &t->p->insts[i];
    for (uint32_t e = in->edge_first; e < in->edge_first + in->n_edges && in->op != ISA_NEXTITER; e++)
        if (t->p->insts[t->p->edges[e].inst].op != ISA_RETURN)
            walk_push(t, t->p->edges[e].inst);
}

static bool walk_reaches(tag_walk *t, uint32_t site, uint32_t frame)
{
    const isa_program *p = t->p;
    while (t->top) {
        uint32_t i = t->stack[--t->top];
        const isa_inst *in = &p->insts[i];
        if (in->op == ISA_CALL) {
            if (in->a == site)
                return true;
            const vm_splan *o = &t->plan->sites[in->a];
            for (uint32_t k = 0; k < o->n_returns; k++)
                walk_push(t, o->returns[k]);
        } else if (in->op == ISA_ENTER) {
            if (in->a == frame)
                return true;
            const vm_rplan *lr = &t->plan->regions[in->a];
            for (uint32_t x = lr->first; x < lr->end; x++)
                if (p->insts[x].op == ISA_EXIT)
                    walk_edges(t, x);
        } else {
            walk_edges(t, i);
        }
    }
    return false;
}

static bool walk_open(tag_walk *t, const isa_program *p, const vm_plan *plan, uint32_t region)
{
    const vm_rplan *rp = &plan->regions[region];
    *t = (tag_walk){.p = p, .plan = plan, .region = region, .first = rp->first};
    t->seen = calloc(rp->end - rp->first + 1, 1);
    t->stack = malloc((rp->end - rp->first + 1) * sizeof *t->stack);
    return t->seen && t->stack;
}

static void walk_close(tag_walk *t)
{
    free(t->seen);
    free(t->stack);
}

/* Can a token leave a RETURN of `site` and reach one of its CALLs at the
 * same tag? Then the arguments cannot be gathered before the call. */
static bool returns_feed_calls(const isa_program *p, const vm_plan *plan, uint32_t site)
{
    const vm_splan *sp = &plan->sites[site];
    if (!sp->n_returns || !sp->n_call)
        return false;
    tag_walk t;
    bool hit = true; /* no memory: the safe answer */
    if (walk_open(&t, p, plan, p->insts[sp->calls[0]].region)) {
        for (uint32_t k = 0; k < sp->n_returns; k++)
            walk_push(&t, sp->returns[k]);
        hit = walk_reaches(&t, site, ISA_NONE);
    }
    walk_close(&t);
    return hit;
}

/* Can a token leave an EXIT of loop `frame` and reach one of its ENTERs at
 * the same tag (in the parent region)? Then the instance cannot gather its
 * entry values before it runs. */
static bool exits_feed_enters(const isa_program *p, const vm_plan *plan, uint32_t frame)
{
    tag_walk t;
    bool hit = true;
    if (walk_open(&t, p, plan, p->regions[frame].parent)) {
        const vm_rplan *fr = &plan->regions[frame];
        for (uint32_t x = fr->first; x < fr->end; x++)
            if (p->insts[x].op == ISA_EXIT)
                walk_edges(&t, x);
        hit = walk_reaches(&t, ISA_NONE, frame);
    }
    walk_close(&t);
    return hit;
}

/* The registers that feed port k of si when one or two do (a loop variable:
 * its entry value and its NEXTITER's); false when more do. */
static bool sources(const vm_rplan *rp, const vm_sinst *si, uint32_t k, uint32_t *r, uint32_t *r2)
{
    const vm_sport *pt = &rp->sports[si->src_at + k];
    if (k >= si->ports || pt->n == 0 || pt->n > 2)
        return false;
    *r = rp->sregs[pt->first];
    *r2 = pt->n == 2 ? rp->sregs[pt->first + 1] : ISA_NONE;
    return true;
}

static vm_sop seq_step(const vm_plan *plan, const vm_rplan *rp, uint32_t local)
{
    const vm_sinst *si = &rp->sinsts[local];
    vm_sop op = {.kind = VM_SOP_GENERIC, .matched = si->matched, .op = si->op, .local = (uint16_t)local,
                 .tokens = (uint16_t)(si->tokens[0] > 0xffff ? 0xffff : si->tokens[0]),
                 .tokens1 = (uint16_t)(si->tokens[1] > 0xffff ? 0xffff : si->tokens[1]),
                 .flags = si->flags & (ISA_FLAG_PRUNE_FALSE | ISA_FLAG_PRUNE_TRUE), .out = si->reg,
                 .a2 = ISA_NONE, .b2 = ISA_NONE};
    if (si->tokens[0] > 0xffff || si->tokens[1] > 0xffff)
        return op;
    isa_class c = isa_ops[si->op].cls;
    uint32_t s0, s0b, s1, s1b;
    bool has0 = sources(rp, si, 0, &s0, &s0b), has1 = sources(rp, si, 1, &s1, &s1b);
    if (si->op == ISA_RETURN) {
        op.kind = VM_SOP_SKIP;
    } else if ((c == ISA_CLASS_BINARY || c == ISA_CLASS_COMPARE) && si->n_in == 2 && si->ports == 2) {
        if (si->imm < 0 && has0 && has1)
            op.kind = VM_SOP_BIN_RR, op.a = s0, op.a2 = s0b, op.b = s1, op.b2 = s1b;
        else if (si->imm == 1 && has0)
            op.kind = VM_SOP_BIN_RK, op.a = s0, op.a2 = s0b, op.b = si->b;
        else if (si->imm == 0 && has1)
            op.kind = VM_SOP_BIN_KR, op.a = si->b, op.b = s1, op.b2 = s1b;
    } else if (si->op == ISA_SWITCH && si->ports == 2 && has0 && has1) {
        op.kind = VM_SOP_SWITCH, op.a = s0, op.a2 = s0b, op.b = s1, op.b2 = s1b;
    } else if (si->op == ISA_BRANCH && si->ports == 1 && has0) {
        op.kind = VM_SOP_BRANCH, op.op = (uint16_t)si->a, op.a = s0, op.a2 = s0b, op.b = si->b;
    } else if (si->op == ISA_CONST && si->n_in == 0 && si->ports == 1 && has0 && s0b == ISA_NONE) {
        op.kind = VM_SOP_CONST, op.a = s0, op.b = si->a;
    } else if (si->op == ISA_CALL && si->ports == 1 && has0 && s0b == ISA_NONE) {
        op.kind = VM_SOP_CALL, op.a = s0, op.b = si->a, op.out = si->arg; /* site, argument */
    } else if (si->op == ISA_MERGE && si->n_in == 2 && si->ports == 2 && has0 && has1) {
        op.kind = VM_SOP_MERGE, op.a = s0, op.a2 = s0b, op.b = s1, op.b2 = s1b;
    } else if ((si->op == ISA_IDENTITY || si->op == ISA_LOOPCOND) && si->ports == 1 && has0) {
        op.kind = VM_SOP_COPY, op.a = s0, op.a2 = s0b;
    } else if (si->op == ISA_NEXTITER && si->ports == 1 && has0) {
        op.kind = VM_SOP_NEXTITER, op.a = s0, op.a2 = s0b;
    } else if (si->op == ISA_EXIT && si->ports == 1 && has0) {
        /* out of the loop: into the parent's frame (its register there) or,
         * for a loop entered from the graph, as a token */
        op.kind = VM_SOP_EXIT, op.a = s0, op.a2 = s0b, op.b = si->inst, op.out = plan->insts[si->inst].preg;
    } else if (si->op == ISA_ENTER && si->ports == 1 && has0) {
        op.kind = VM_SOP_ENTER, op.a = s0, op.a2 = s0b, op.b = si->a,
        op.out = plan->frames[si->a].entry_reg + si->arg;
    }
    return op;
}

/* A step on integer scalars of its own kind (VM_SOP_ARITH, VM_SOP_CMPS),
 * where its operands come from one register each and its constant is an
 * i32 or i64 scalar: such a step computes without the general scalar code.
 * A constant on the left moves to the right (x + K, K < x as x > K). */
static vm_sop seq_specialise(const isa_program *p, vm_sop op)
{
    static const struct { uint16_t op; uint8_t rr; bool cmp; } ints[] = {
#define ARITH_ROW(N, OP, C) {OP, VM_SOP_##N##_RR, false},
#define CMP_ROW(N, OP, C) {OP, VM_SOP_##N##_RR, true},
        VM_SOP_ARITH(ARITH_ROW) VM_SOP_CMPS(CMP_ROW)
#undef ARITH_ROW
#undef CMP_ROW
    };
    /* K op x as x op' K (SUB has none) */
    static const uint16_t mirrored[][2] = {{ISA_ADD, ISA_ADD}, {ISA_MUL, ISA_MUL},
                                           {ISA_LESS, ISA_GREATER}, {ISA_LESS_EQUAL, ISA_GREATER_EQUAL},
                                           {ISA_GREATER, ISA_LESS}, {ISA_GREATER_EQUAL, ISA_LESS_EQUAL},
                                           {ISA_EQUAL, ISA_EQUAL}, {ISA_NOT_EQUAL, ISA_NOT_EQUAL}};
    if (op.kind == VM_SOP_SWITCH && op.a2 == ISA_NONE && op.b2 == ISA_NONE)
        op.kind = VM_SOP_SWITCH1;
    uint16_t code = op.op;
    uint32_t k = op.kind == VM_SOP_BIN_KR ? op.a : op.b; /* the constant, when there is one */
    bool int_const = k < p->n_consts && p->consts[k].rank == 0 &&
                     (p->consts[k].dtype == TFVM_I32 || p->consts[k].dtype == TFVM_I64);
    if (op.kind == VM_SOP_BIN_KR && op.b2 == ISA_NONE && int_const) {
        uint32_t swapped = ISA_NONE;
        for (size_t q = 0; q < sizeof mirrored / sizeof mirrored[0]; q++)
            if (mirrored[q][0] == code)
                swapped = mirrored[q][1];
        if (swapped == ISA_NONE)
            return op; /* K - x */
        op.kind = VM_SOP_BIN_RK, op.op = code = (uint16_t)swapped, op.a = op.b, op.b = k;
    }
    for (size_t q = 0; q < sizeof ints / sizeof ints[0]; q++) { /* (_RK and _BR follow _RR: vm.h) */
        if (ints[q].op != code)
            continue;
        if (op.kind == VM_SOP_BIN_RR && op.a2 == ISA_NONE && op.b2 == ISA_NONE)
            op.kind = ints[q].rr;
        else if (op.kind == VM_SOP_BIN_RK && op.a2 == ISA_NONE && int_const)
            op.kind = (uint8_t)(ints[q].rr + 1);
        else if (op.kind == VM_SOP_BRANCH && op.a2 == ISA_NONE && int_const && ints[q].cmp)
            op.kind = (uint8_t)(ints[q].rr + 2);
    }
    return op;
}

/* Orders a sequential region so that the steps depending on one side of a
 * pruned branch are contiguous, and gives each such run its guard: the
 * register that is empty when that side was not taken. A frame then jumps
 * over the untaken side in one step instead of looking at each of its
 * instructions. The guard of an instruction is the side its inputs all come
 * from (through instructions of that side); a SWITCH group on one
 * predicate shares one guard. Returns the guards by local index (or NULL:
 * no memory, keep the order as it is). */

#define GUARD_UNSET (ISA_NONE - 1) /* no input seen yet (ISA_NONE: no guard) */

static uint32_t *seq_guards(const isa_program *p, vm_plan *plan, vm_rplan *rp)
{
    uint32_t n = rp->end - rp->first;
    uint32_t *owner = malloc((rp->n_regs + 1) * sizeof *owner), *guard = malloc((n + 1) * sizeof *guard);
    uint32_t *rep = malloc((2 * (size_t)rp->n_regs + 2) * sizeof *rep);
    uint32_t *indeg = calloc(n + 1, sizeof *indeg), *ready = malloc((n + 1) * sizeof *ready);
    uint32_t *order = malloc((n + 1) * sizeof *order);
    if (!owner || !guard || !rep || !indeg || !ready || !order) {
        free(owner), free(guard), free(rep), free(indeg), free(ready), free(order);
        return NULL;
    }
    for (uint32_t k = 0; k < rp->n_regs; k++)
        owner[k] = ISA_NONE;
    for (uint32_t k = 0; k < 2 * rp->n_regs; k++)
        rep[k] = ISA_NONE;
    for (uint32_t i = 0; i < n; i++) /* (a NEXTITER's value is the last iteration's: no owner here) */
        for (uint32_t o = 0; o < isa_outs(&p->insts[rp->first + i]) && rp->sinsts[i].op != ISA_NEXTITER; o++)
            owner[rp->sinsts[i].reg + o] = i;
    /* guards, in the current (topological) order */
    for (uint32_t q = 0; q < rp->n_order; q++) {
        uint32_t i = rp->order[q];
        const vm_sinst *si = &rp->sinsts[i];
        uint32_t g = GUARD_UNSET;
        if (si->op == ISA_RETURN) { /* written when its site's CALLs are all in */
            const vm_splan *sp = &plan->sites[si->a];
            for (uint32_t c = 0; c < sp->n_call; c++) {
                uint32_t cg = guard[sp->calls[c] - rp->first];
                g = g == GUARD_UNSET || g == cg ? cg : ISA_NONE;
            }
        }
        for (uint32_t k = 0; si->op != ISA_RETURN && k < si->ports; k++) {
            const vm_sport *pt = &rp->sports[si->src_at + k];
            for (uint32_t e = 0; e < pt->n; e++) {
                uint32_t reg = rp->sregs[pt->first + e], j = owner[reg], key = ISA_NONE;
                if (j != ISA_NONE) {
                    const vm_sinst *sj = &rp->sinsts[j];
                    uint32_t o = reg - sj->reg;
                    bool exclusive = (sj->op == ISA_SWITCH || sj->op == ISA_BRANCH) &&
                                     (sj->flags & (o ? ISA_FLAG_PRUNE_TRUE : ISA_FLAG_PRUNE_FALSE));
                    if (exclusive && sj->op == ISA_SWITCH) {
                        const vm_sport *pp = &rp->sports[sj->src_at + 1];
                        uint32_t pred = pp->n == 1 ? rp->sregs[pp->first] : ISA_NONE;
                        if (pred == ISA_NONE) {
                            key = reg;
                        } else {
                            if (rep[2 * pred + o] == ISA_NONE)
                                rep[2 * pred + o] = reg;
                            key = rep[2 * pred + o];
                        }
                    } else if (exclusive) {
                        key = reg;
                    } else {
                        key = guard[j];
                    }
                }
                g = g == GUARD_UNSET || g == key ? key : ISA_NONE;
            }
        }
        guard[i] = g == GUARD_UNSET ? ISA_NONE : g;
    }
    /* the order again, preferring to stay in the last guard's run */
    for (uint32_t i = 0; i < n; i++) {
        const vm_sinst *si = &rp->sinsts[i];
        if (si->op == ISA_RETURN) {
            indeg[i] += plan->sites[si->a].n_call;
            continue;
        }
        for (uint32_t k = 0; k < si->ports; k++) {
            const vm_sport *pt = &rp->sports[si->src_at + k];
            for (uint32_t e = 0; e < pt->n; e++)
                indeg[i] += owner[rp->sregs[pt->first + e]] != ISA_NONE;
        }
    }
    bool nested = false; /* a nested loop's results: their order is seq_order's to keep */
    for (uint32_t i = 0; i < n; i++)
        nested |= rp->sinsts[i].op == ISA_ENTER;
    uint32_t n_ready = 0, n_out = 0, last = ISA_NONE;
    for (uint32_t i = 0; i < n; i++)
        if (!indeg[i])
            ready[n_ready++] = i;
    while (n_ready) {
        uint32_t pick = 0;
        for (uint32_t k = 0; k < n_ready && n <= 4096; k++)
            if (guard[ready[k]] == last && last != ISA_NONE) {
                pick = k;
                break;
            }
        uint32_t i = ready[pick];
        memmove(&ready[pick], &ready[pick + 1], (n_ready - pick - 1) * sizeof *ready);
        n_ready--;
        order[n_out++] = i;
        last = guard[i];
        const vm_sinst *si = &rp->sinsts[i];
        /* consumers: instructions reading its registers; a CALL: its site's RETURNs */
        for (uint32_t c = 0; c < n; c++) {
            const vm_sinst *sc = &rp->sinsts[c];
            if (sc->op == ISA_RETURN) {
                if (si->op == ISA_CALL && sc->a == si->a && --indeg[c] == 0)
                    ready[n_ready++] = c;
                continue;
            }
            for (uint32_t k = 0; k < sc->ports; k++) {
                const vm_sport *pt = &rp->sports[sc->src_at + k];
                for (uint32_t e = 0; e < pt->n; e++)
                    if (owner[rp->sregs[pt->first + e]] == i && --indeg[c] == 0)
                        ready[n_ready++] = c;
            }
        }
    }
    if (n_out == n && !nested)
        memcpy(rp->order, order, n * sizeof *order);
    free(owner), free(rep), free(indeg), free(ready), free(order);
    return guard;
}

/* A region that calls a function, or enters a loop, whose body does not run
 * as frames does not either (to a fixpoint). */
static void unmake_callers(const isa_program *p, vm_plan *plan)
{
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t i = 0; i < p->n_insts; i++) {
            const isa_inst *in = &p->insts[i];
            uint32_t inner = in->op == ISA_CALL ? p->sites[in->a].callee : in->op == ISA_ENTER ? in->a : ISA_NONE;
            if (inner != ISA_NONE && plan->regions[in->region].seq && !plan->regions[inner].seq) {
                plan->regions[in->region].seq = false;
                changed = true;
            }
        }
    }
}

/* The last step of `kind` for each key b (a loop, a call site) in the order
 * becomes `last`: it is the one that finds every entry value or argument. */
static void mark_last(vm_rplan *rp, uint8_t kind, uint8_t last)
{
    for (uint32_t q = rp->n_sops; q-- > 0;) {
        vm_sop *op = &rp->sops[q];
        if (op->kind != kind)
            continue;
        bool later = false;
        for (uint32_t k = q + 1; k < rp->n_sops && !later; k++)
            later = rp->sops[k].kind == last && rp->sops[k].b == op->b;
        if (!later)
            op->kind = last;
    }
}

/* A site whose CALLs are steps on one register each, all on one guard,
 * calls in one step (VM_SOP_CALLN) at its last CALL's place: the arguments
 * are read where their producers left them instead of being gathered first
 * (a CALL's token goes only into its call, so firing it later changes
 * nothing). false: no memory. */
static bool seq_call_steps(vm_plan *plan, vm_rplan *rp)
{
    for (uint32_t q = 0; q < rp->n_sops; q++) {
        vm_sop *last = &rp->sops[q];
        if (last->kind != VM_SOP_CALL_LAST)
            continue;
        vm_splan *sp = &plan->sites[last->b];
        uint32_t steps = 0;
        bool one_guard = true;
        for (uint32_t k = 0; k < rp->n_sops; k++) {
            const vm_sop *op = &rp->sops[k];
            if ((op->kind == VM_SOP_CALL || op->kind == VM_SOP_CALL_LAST) && op->b == last->b) {
                steps++;
                one_guard &= op->guard == last->guard;
            }
        }
        if (steps != sp->n_call || !one_guard)
            continue; /* a CALL the general visit fires, or CALLs on different sides */
        if (!(sp->arg_src = ut_arena_array(&plan->arena, sp->n_call, sizeof(uint32_t))))
            return false;
        for (uint32_t k = 0; k < rp->n_sops; k++) {
            vm_sop *op = &rp->sops[k];
            if ((op->kind == VM_SOP_CALL || op->kind == VM_SOP_CALL_LAST) && op->b == last->b) {
                sp->arg_src[op->out] = op->a; /* (out: the argument's index) */
                if (op != last)
                    op->kind = VM_SOP_SKIP;
            }
        }
        last->kind = sp->n_call == 1 ? VM_SOP_CALL1 : VM_SOP_CALLN; /* (local: the last CALL, for errors) */
    }
    uint32_t w = 0;
    for (uint32_t q = 0; q < rp->n_sops; q++)
        if (rp->sops[q].kind != VM_SOP_SKIP)
            rp->sops[w++] = rp->sops[q];
    rp->n_sops = w;
    return true;
}

/* Consecutive SWITCH1 steps on one predicate, with one guard and both sides
 * pruned (the SWITCHes of several variables on one condition), route their
 * values in one step (VM_SOP_SWITCHN): one look at the predicate, one
 * dispatch. false: no memory. */
static bool seq_switch_groups(vm_plan *plan, vm_rplan *rp)
{
    const uint16_t both = ISA_FLAG_PRUNE_FALSE | ISA_FLAG_PRUNE_TRUE;
    uint32_t n_routes = 0, w = 0;
    for (uint32_t q = 0; q < rp->n_sops;) {
        const vm_sop *op = &rp->sops[q];
        uint32_t end = q + 1;
        while (op->kind == VM_SOP_SWITCH1 && op->flags == both && end < rp->n_sops &&
               rp->sops[end].kind == VM_SOP_SWITCH1 && rp->sops[end].b == op->b && rp->sops[end].guard == op->guard &&
               rp->sops[end].flags == both)
            end++;
        if (end - q < 2) {
            rp->sops[w++] = rp->sops[q++];
            continue;
        }
        if (!rp->routes && !(rp->routes = ut_arena_array(&plan->arena, rp->n_sops, sizeof(vm_sroute))))
            return false;
        vm_sop group = *op;
        group.kind = VM_SOP_SWITCHN, group.a = n_routes, group.a2 = end - q;
        for (; q < end; q++)
            rp->routes[n_routes++] = (vm_sroute){.src = rp->sops[q].a, .out = rp->sops[q].out,
                                                 .tokens = {rp->sops[q].tokens, rp->sops[q].tokens1},
                                                 .local = rp->sops[q].local};
        rp->sops[w++] = group;
    }
    rp->n_sops = w;
    return true;
}

/* Each run of steps on one guard (one side of a pruned branch) gets a GUARD
 * step before it, which jumps past the run when that side was not taken,
 * and the order an END step. false: no memory. */
static bool seq_guard_steps(vm_plan *plan, vm_rplan *rp)
{
    uint32_t n = rp->n_sops, runs = 0;
    for (uint32_t q = 0; q < n; q++)
        runs += rp->sops[q].guard != ISA_NONE && (q == 0 || rp->sops[q - 1].guard != rp->sops[q].guard);
    vm_sop *out = ut_arena_array(&plan->arena, n + runs + 1, sizeof(vm_sop));
    uint32_t *at = malloc((n + 1) * sizeof *at); /* each step's new place (its GUARD's, if any) */
    if (!out || !at) {
        free(at);
        return false;
    }
    uint32_t w = 0;
    for (uint32_t q = 0; q < n; q++) {
        at[q] = w;
        if (rp->sops[q].guard != ISA_NONE && (q == 0 || rp->sops[q - 1].guard != rp->sops[q].guard)) {
            uint32_t end = q + 1;
            while (end < n && rp->sops[end].guard == rp->sops[q].guard)
                end++;
            out[w++] = (vm_sop){.kind = VM_SOP_GUARD, .a = rp->sops[q].guard, .skip = end, .local = rp->sops[q].local,
                                .a2 = ISA_NONE, .b2 = ISA_NONE, .guard = ISA_NONE};
        }
        out[w++] = rp->sops[q];
    }
    at[n] = w;
    out[w] = (vm_sop){.kind = VM_SOP_END, .a2 = ISA_NONE, .b2 = ISA_NONE, .guard = ISA_NONE};
    for (uint32_t q = 0; q < w; q++)
        if (out[q].kind == VM_SOP_GUARD)
            out[q].skip = at[out[q].skip];
    free(at);
    rp->sops = out;
    rp->n_sops = w;
    return true;
}

static uint32_t frame_size(uint32_t n_regs);

tfvm_status vm_seq_plan(const isa_program *p, bool tensors, vm_plan *plan)
{
    /* each site's CALLs by argument index */
    for (uint32_t s = 0; s < p->n_sites; s++) {
        vm_splan *sp = &plan->sites[s];
        sp->calls = ut_arena_array(&plan->arena, sp->n_call + 1, sizeof(uint32_t));
        if (!sp->calls)
            return TFVM_ERR_NOMEM;
        sp->n_call = 0;
    }
    for (uint32_t i = 0; i < p->n_insts; i++)
        if (p->insts[i].op == ISA_CALL) {
            vm_splan *sp = &plan->sites[p->insts[i].a];
            plan->insts[i].arg = (uint16_t)sp->n_call;
            sp->calls[sp->n_call++] = i;
        }
    /* Candidates: FUNC regions of sequential instructions only. */
    for (uint32_t r = 0; r < p->n_regions; r++) {
        vm_rplan *rp = &plan->regions[r];
        bool loop = p->regions[r].kind == ISA_REGION_LOOP;
        rp->seq = (p->regions[r].kind == ISA_REGION_FUNC || loop) && rp->end - rp->first < 0xffff;
        for (uint32_t i = rp->first; rp->seq && i < rp->end; i++) {
            rp->seq = seq_op_ok(&p->insts[i], loop, tensors) && p->insts[i].n_in + p->insts[i].n_ctl <= 8;
            rp->calls |= p->insts[i].op == ISA_CALL;
        }
    }
    /* A loop body runs as frames only when its instance can gather every
     * entry value first (no EXIT of it feeds one of its ENTERs). */
    for (uint32_t r = 0; r < p->n_regions; r++)
        if (plan->regions[r].seq && p->regions[r].kind == ISA_REGION_LOOP && exits_feed_enters(p, plan, r))
            plan->regions[r].seq = false;
    /* ...whose every callee is one too (to a fixpoint), and whose order exists. */
    unmake_callers(p, plan);
    for (uint32_t r = 0; r < p->n_regions; r++)
        if (plan->regions[r].seq && !seq_order(p, plan, r))
            plan->regions[r].seq = false;
    unmake_callers(p, plan); /* an order lost may unmake a caller */
    /* Loops: each ENTER's index among its frame's ENTERs (the frame's entry
     * registers). */
    for (uint32_t r = 0; r < p->n_regions; r++)
        if (p->regions[r].kind == ISA_REGION_LOOP)
            plan->regions[r].n_args = 0;
    for (uint32_t i = 0; i < p->n_insts; i++)
        if (p->insts[i].op == ISA_ENTER)
            plan->insts[i].arg = (uint16_t)plan->regions[p->insts[i].a].n_args++;
    for (uint32_t r = 0; r < p->n_regions; r++) {
        if (p->regions[r].kind != ISA_REGION_LOOP)
            continue;
        vm_fplan *fp = &plan->frames[r];
        fp->enters = ut_arena_array(&plan->arena, plan->regions[r].n_args + 1, sizeof(uint32_t));
        if (!fp->enters)
            return TFVM_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < p->n_insts; i++) {
        const isa_inst *in = &p->insts[i];
        if (in->op != ISA_ENTER)
            continue;
        vm_fplan *fp = &plan->frames[in->a];
        fp->enters[plan->insts[i].arg] = i;
        if (in->flags & ISA_FLAG_CONST)
            fp->const_tokens += in->n_edges;
        else
            fp->entry_tokens += in->n_edges;
    }
    for (uint32_t s = 0; s < p->n_sites; s++) {
        vm_splan *sp = &plan->sites[s];
        sp->call_tokens = 0;
        for (uint32_t k = 0; k < sp->n_call; k++)
            sp->call_tokens += p->insts[sp->calls[k]].n_edges;
    }
    /* Sites of sequential callees whose arguments can be gathered first: the
     * callee's contexts get one value slot per argument. */
    for (uint32_t s = 0; s < p->n_sites; s++) {
        vm_splan *sp = &plan->sites[s];
        vm_rplan *callee = &plan->regions[p->sites[s].callee];
        sp->strict = callee->seq && sp->n_call > 0 && !returns_feed_calls(p, plan, s);
        if (sp->strict && sp->n_call > callee->n_params)
            callee->n_params = sp->n_call;
    }
    for (uint32_t r = 0; r < p->n_regions; r++) {
        vm_rplan *rp = &plan->regions[r];
        rp->param_slot = rp->n_slots;
        rp->n_slots += rp->n_params;
    }
    /* Registers: the arguments (as many as the most any site passes), one
     * per output of each instruction, then each local site's arguments. */
    for (uint32_t r = 0; r < p->n_regions; r++) {
        vm_rplan *rp = &plan->regions[r];
        if (!rp->seq)
            continue;
        uint32_t n = rp->end - rp->first;
        rp->sinsts = ut_arena_array(&plan->arena, n + 1, sizeof(vm_sinst));
        if (!rp->sinsts)
            return TFVM_ERR_NOMEM;
        if (p->regions[r].kind != ISA_REGION_LOOP)
            rp->n_args = 0;
    }
    for (uint32_t s = 0; s < p->n_sites; s++) {
        vm_rplan *callee = &plan->regions[p->sites[s].callee];
        if (callee->seq && plan->sites[s].n_call > callee->n_args)
            callee->n_args = plan->sites[s].n_call;
    }
    for (uint32_t r = 0; r < p->n_regions; r++) {
        vm_rplan *rp = &plan->regions[r];
        if (!rp->seq)
            continue;
        uint32_t reg = rp->n_args, n_ports = 0;
        for (uint32_t i = rp->first; i < rp->end; i++) {
            const isa_inst *in = &p->insts[i];
            const vm_iplan *ip = &plan->insts[i];
            vm_sinst *si = &rp->sinsts[i - rp->first];
            *si = (vm_sinst){.op = in->op, .flags = in->flags, .ports = (uint16_t)ip->ports,
                             .n_in = (uint16_t)in->n_in, .imm = ip->imm, .matched = ip->matched,
                             .arg = ip->arg, .a = in->a, .b = in->b, .src_at = n_ports, .reg = reg, .inst = i};
            for (uint32_t o = 0; o < 2 && o < isa_outs(in); o++)
                si->tokens[o] = ip->out_at[o + 1] - ip->out_at[o];
            reg += isa_outs(in) + (in->op == ISA_NEXTITER); /* and the next iteration's */
            n_ports += ip->ports;
        }
        for (uint32_t i = rp->first; i < rp->end; i++)
            if (p->insts[i].op == ISA_CALL && plan->insts[i].arg == 0) {
                vm_splan *sp = &plan->sites[p->insts[i].a];
                sp->arg_slot = reg;
                reg += sp->n_call;
            }
        /* each nested loop: its entry values (gathered before it runs), then
         * one register per EXIT, where its results land */
        for (uint32_t i = rp->first; i < rp->end; i++)
            if (p->insts[i].op == ISA_ENTER && plan->insts[i].arg == 0) {
                vm_rplan *lr = &plan->regions[p->insts[i].a];
                plan->frames[p->insts[i].a].entry_reg = reg;
                reg += lr->n_args;
                for (uint32_t x = lr->first; x < lr->end; x++)
                    if (p->insts[x].op == ISA_EXIT)
                        plan->insts[x].preg = reg++;
            }
        rp->n_regs = reg;
        rp->frame_bytes = frame_size(reg);
        if (p->regions[r].kind == ISA_REGION_LOOP) {
            vm_fplan *fp = &plan->frames[r];
            rp->keep = ut_arena_array(&plan->arena, reg + 1, 1);
            fp->nexts = ut_arena_array(&plan->arena, rp->end - rp->first + 1, sizeof(uint32_t));
            if (!rp->keep || !fp->nexts)
                return TFVM_ERR_NOMEM;
            memset(rp->keep, 0, reg + 1);
            for (uint32_t k = 0; k < rp->n_args; k++)
                rp->keep[k] = (p->insts[fp->enters[k]].flags & ISA_FLAG_CONST) != 0;
            fp->n_nexts = 0;
            for (uint32_t i = rp->first; i < rp->end; i++)
                if (p->insts[i].op == ISA_NEXTITER) {
                    uint32_t cur = rp->sinsts[i - rp->first].reg;
                    fp->nexts[fp->n_nexts++] = cur;
                    rp->keep[cur] = rp->keep[cur + 1] = 1; /* moved by next_iteration itself */
                }
        }
        rp->sports = ut_arena_array(&plan->arena, n_ports + 1, sizeof(vm_sport));
        if (!rp->sports)
            return TFVM_ERR_NOMEM;
    }
    /* Each port's producers: an instruction's output register, a CALL's
     * argument (in the callee: argument register `arg`), or a RETURN's
     * (in the caller: the RETURN's output register). Two passes: count,
     * then fill. */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t r = 0; r < p->n_regions; r++) {
            vm_rplan *rp = &plan->regions[r];
            if (!rp->seq)
                continue;
            uint32_t n_ports = rp->end == rp->first ? 0
                                                    : rp->sinsts[rp->end - rp->first - 1].src_at +
                                                          rp->sinsts[rp->end - rp->first - 1].ports;
            if (pass == 0) {
                for (uint32_t k = 0; k < n_ports; k++)
                    rp->sports[k].n = 0;
            } else {
                uint32_t total = 0;
                for (uint32_t k = 0; k < n_ports; k++) {
                    rp->sports[k].first = total;
                    total += rp->sports[k].n;
                    rp->sports[k].n = 0;
                }
                rp->sregs = ut_arena_array(&plan->arena, total + 1, sizeof(uint32_t));
                if (!rp->sregs)
                    return TFVM_ERR_NOMEM;
            }
        }
        for (uint32_t i = 0; i < p->n_insts; i++) {
            const isa_inst *in = &p->insts[i];
            const vm_iplan *ip = &plan->insts[i];
            for (uint32_t e = in->edge_first; e < in->edge_first + in->n_edges; e++) {
                const isa_edge *ed = &p->edges[e];
                const isa_inst *d = &p->insts[ed->inst];
                vm_rplan *dr = &plan->regions[d->region];
                if (!dr->seq || d->op == ISA_RETURN)
                    continue; /* RETURNs: per site, below */
                uint32_t src;
                if (in->op == ISA_CALL || in->op == ISA_ENTER)
                    src = ip->arg; /* the call's argument, the loop's entry value */
                else if (in->op == ISA_EXIT && p->regions[in->region].parent == d->region)
                    src = ip->preg; /* a nested loop's result */
                else if (in->region == d->region)
                    src = plan->regions[in->region].sinsts[i - plan->regions[in->region].first].reg + ed->out;
                else
                    return TFVM_ERR_INTERNAL; /* a sequential region takes tokens only from calls */
                vm_sport *sp = &dr->sports[dr->sinsts[ed->inst - dr->first].src_at + ed->port];
                if (pass == 1) { /* the CALLs of every site feed the same argument register */
                    bool dup = false;
                    for (uint32_t q = 0; q < sp->n; q++)
                        dup |= dr->sregs[sp->first + q] == src;
                    if (dup)
                        continue;
                    dr->sregs[sp->first + sp->n] = src;
                }
                sp->n++;
            }
        }
    }
    /* RETURN producers, per site of a sequential callee: registers of the
     * callee's frame (its instructions' outputs, or an argument passed
     * straight through). */
    for (uint32_t s = 0; s < p->n_sites; s++) {
        vm_splan *sp = &plan->sites[s];
        vm_rplan *callee = &plan->regions[p->sites[s].callee];
        if (!callee->seq)
            continue;
        sp->rets = ut_arena_array(&plan->arena, sp->n_returns + 1, sizeof(vm_sport));
        if (!sp->rets)
            return TFVM_ERR_NOMEM;
        uint32_t total = 0;
        for (uint32_t k = 0; k < sp->n_returns; k++) {
            uint32_t r = sp->returns[k], n = 0;
            for (uint32_t i = callee->first; i < callee->end; i++)
                for (uint32_t e = p->insts[i].edge_first; e < p->insts[i].edge_first + p->insts[i].n_edges; e++)
                    n += p->edges[e].inst == r;
            for (uint32_t i = 0; i < p->n_insts; i++) /* the EXITs of loops nested in the callee */
                if (p->insts[i].op == ISA_EXIT && p->regions[p->insts[i].region].parent == p->sites[s].callee)
                    for (uint32_t e = p->insts[i].edge_first; e < p->insts[i].edge_first + p->insts[i].n_edges; e++)
                        n += p->edges[e].inst == r;
            for (uint32_t c = 0; c < sp->n_call; c++) {
                const isa_inst *in = &p->insts[sp->calls[c]];
                for (uint32_t e = in->edge_first; e < in->edge_first + in->n_edges; e++)
                    n += p->edges[e].inst == r;
            }
            sp->rets[k] = (vm_sport){.first = total, .n = n};
            total += n;
        }
        uint32_t *regs = ut_arena_array(&plan->arena, total + 1, sizeof(uint32_t));
        if (!regs)
            return TFVM_ERR_NOMEM;
        for (uint32_t k = 0; k < sp->n_returns; k++) {
            uint32_t r = sp->returns[k], n = 0, *out = regs + sp->rets[k].first;
            for (uint32_t i = callee->first; i < callee->end; i++)
                for (uint32_t e = p->insts[i].edge_first; e < p->insts[i].edge_first + p->insts[i].n_edges; e++)
                    if (p->edges[e].inst == r)
                        out[n++] = callee->sinsts[i - callee->first].reg + p->edges[e].out;
            for (uint32_t i = 0; i < p->n_insts; i++)
                if (p->insts[i].op == ISA_EXIT && p->regions[p->insts[i].region].parent == p->sites[s].callee)
                    for (uint32_t e = p->insts[i].edge_first; e < p->insts[i].edge_first + p->insts[i].n_edges; e++)
                        if (p->edges[e].inst == r)
                            out[n++] = plan->insts[i].preg;
            for (uint32_t c = 0; c < sp->n_call; c++) {
                const isa_inst *in = &p->insts[sp->calls[c]];
                for (uint32_t e = in->edge_first; e < in->edge_first + in->n_edges; e++)
                    if (p->edges[e].inst == r)
                        out[n++] = plan->insts[sp->calls[c]].arg;
            }
            sp->rets[k].first = (uint32_t)(out - regs);
        }
        sp->ret_regs = regs;
        /* the caller's registers of the RETURNs (a caller in the graph sends tokens instead) */
        const vm_rplan *caller = sp->n_returns ? &plan->regions[p->insts[sp->returns[0]].region] : NULL;
        if (caller && caller->seq) {
            sp->ret_out = ut_arena_array(&plan->arena, 2 * sp->n_returns, sizeof(uint32_t));
            if (!sp->ret_out)
                return TFVM_ERR_NOMEM;
            sp->ret_tokens = sp->ret_out + sp->n_returns;
            for (uint32_t k = 0; k < sp->n_returns; k++) {
                const vm_sinst *si = &caller->sinsts[sp->returns[k] - caller->first];
                sp->ret_out[k] = si->reg;
                sp->ret_tokens[k] = si->tokens[0];
            }
            if (sp->n_returns == 1 && (sp->rets[0].n == 1 || sp->rets[0].n == 2)) {
                sp->ret_one = true;
                sp->ret1[0] = regs[sp->rets[0].first];
                sp->ret1[1] = regs[sp->rets[0].first + sp->rets[0].n - 1];
            }
        }
    }
    for (uint32_t s = 0; s < p->n_sites; s++) {
        plan->sites[s].callee = p->sites[s].callee;
        plan->sites[s].callee_plan = &plan->regions[p->sites[s].callee];
    }
    for (uint32_t r = 0; r < p->n_regions; r++) {
        vm_rplan *rp = &plan->regions[r];
        if (!rp->seq)
            continue;
        rp->sops = ut_arena_array(&plan->arena, rp->n_order + 1, sizeof(vm_sop));
        if (!rp->sops)
            return TFVM_ERR_NOMEM;
        rp->n_sops = 0;
        for (uint32_t q = 0; q < rp->n_order; q++)
            rp->order[q] -= rp->first;
        uint32_t *guard = seq_guards(p, plan, rp);
        for (uint32_t q = 0; q < rp->n_order; q++) {
            vm_sop op = seq_specialise(p, seq_step(plan, rp, rp->order[q]));
            op.guard = guard ? guard[rp->order[q]] : ISA_NONE;
            if (op.kind != VM_SOP_SKIP) /* RETURNs: written by their callee's frame */
                rp->sops[rp->n_sops++] = op;
        }
        free(guard);
        mark_last(rp, VM_SOP_ENTER, VM_SOP_ENTER_LAST); /* a loop's last ENTER starts it */
        mark_last(rp, VM_SOP_CALL, VM_SOP_CALL_LAST);   /* a site's last CALL makes the call */
        if (!seq_call_steps(plan, rp) || !seq_switch_groups(plan, rp) || !seq_guard_steps(plan, rp))
            return TFVM_ERR_NOMEM;
    }
    return TFVM_OK;
}

/* ---- Frame memory ---------------------------------------------------------------- */

typedef struct seq_chunk {
    struct seq_chunk *prev, *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} seq_chunk;

#define SEQ_CHUNK (256u * 1024u)

/* Chunks form a list; w->seq_mem is the one frames are taken from now.
 * Frames are freed in the reverse order (frames_run), so a chunk whose last
 * frame goes hands back to the one before it; chunks stay for the next call.
 * frame_alloc_next: the current chunk has no room. */
static void *frame_alloc_next(vm_worker *w, size_t bytes)
{
    seq_chunk *c = w->seq_mem;
    seq_chunk *n = c ? c->next : NULL;
    if (n && n->size < bytes) { /* too small: drop it and the ones after it */
        while (n) {
            seq_chunk *next = n->next;
            ut_free(&w->vm->alloc, n, sizeof *n + n->size);
            n = next;
        }
        c->next = NULL;
    }
    if (!n) {
        size_t size = bytes > SEQ_CHUNK ? bytes : SEQ_CHUNK;
        n = ut_alloc(&w->vm->alloc, sizeof *n + size);
        if (!n)
            return NULL;
        n->size = size;
        n->prev = c;
        n->next = NULL;
        if (c)
            c->next = n;
    }
    n->used = bytes;
    w->seq_mem = n;
    return n->data;
}

static inline void *frame_alloc(vm_worker *w, size_t bytes)
{
    seq_chunk *c = w->seq_mem;
    if (c && c->used + bytes <= c->size) {
        void *m = c->data + c->used;
        c->used += bytes;
        return m;
    }
    return frame_alloc_next(w, bytes);
}

static inline void frame_release(vm_worker *w, size_t bytes)
{
    seq_chunk *c = w->seq_mem;
    c->used -= bytes;
    if (c->used == 0 && c->prev)
        w->seq_mem = c->prev;
}

void vm_seq_free(vm_worker *w)
{
    seq_chunk *c = w->seq_mem;
    if (!c)
        return;
    while (c->prev)
        c = c->prev;
    while (c) {
        seq_chunk *next = c->next;
        ut_free(&w->vm->alloc, c, sizeof *c + c->size);
        c = next;
    }
    w->seq_mem = NULL;
}

/* ---- Frames ----------------------------------------------------------------------
 * A frame is one call's registers: a value and a present flag per register.
 * The body's instructions are visited in their order; one whose every input
 * is present fires and writes its outputs' registers; one with none present
 * (the untaken side of a pruned branch) is passed over. A site's last CALL
 * pushes the callee's frame and runs it first; at its end the RETURNs of its
 * site read their producers' registers in it and write their own in the
 * caller's frame (or send their tokens into the dataflow context). */
typedef struct seq_frame {
    struct seq_frame *up;   /* the caller's frame; NULL: the caller is context `ctx` */
    const vm_splan *sp;     /* the call site this frame runs (a loop's frame: NULL) */
    const vm_rplan *rp;     /* its region's plan */
    uint32_t pc;            /* next position in the region's order */
    bool tensors;           /* a register may hold a tensor reference */
    bool loop;              /* a loop instance's frame (no site): one iteration at a time */
    bool again;             /* loop: a NEXTITER fired in this iteration */
    uint64_t iter;          /* loop: the iteration running */
    dev_value *v;           /* rp->n_regs values */
    uint8_t *has;           /* rp->n_regs: present */
} seq_frame;

/* A frame's bytes: the header, the values, the present flags (32 or 64 when
 * there are at most that many registers), rounded to 16. */
static uint32_t frame_size(uint32_t n_regs)
{
    size_t flags = n_regs <= 32 ? 32 : n_regs <= 64 ? 64 : n_regs; /* cleared in constant sizes (frame_push_region) */
    return (uint32_t)((sizeof(seq_frame) + n_regs * sizeof(dev_value) + flags + 15) & ~(size_t)15);
}

/* The counters of the steps that fire, kept in the step loop's registers
 * (frames_run adds them to the worker's when it ends). */
typedef struct seq_count {
    uint64_t fired, tokens, matches;
} seq_count;

typedef struct seq_run {
    vm_worker *w;
    tfvm_vm *vm;
    const isa_program *p;
    vm_ctx *ctx;            /* the dataflow context that made the first call */
    bool failed;
    bool counted;           /* the first frame's context was counted (a gathered call) */
    uint32_t polls;         /* firings since the last look at interrupts */
} seq_run;

/* A frame is a context for the counters and the bound. On one worker the
 * count is this worker's alone: inline, no call (ctx.c does the rest). */
static inline bool count_new(vm_worker *w)
{
    tfvm_vm *vm = w->vm;
    if (vm->multi)
        return vm_ctx_count_new(w);
    int64_t live = atomic_load_explicit(&w->live, memory_order_relaxed) + 1;
    atomic_store_explicit(&w->live, live, memory_order_relaxed);
    w->st.contexts_created++;
    if (live > atomic_load_explicit(&vm->live_peak, memory_order_relaxed))
        atomic_store_explicit(&vm->live_peak, live, memory_order_relaxed);
    return (uint64_t)live <= vm->ctx_bound;
}

static inline void count_free(vm_worker *w)
{
    atomic_store_explicit(&w->live, atomic_load_explicit(&w->live, memory_order_relaxed) - 1, memory_order_relaxed);
}

static seq_frame *frame_push_region(seq_run *s, seq_frame *up, const vm_splan *sp, const vm_rplan *rp);
static const char *frame_tag(seq_run *s, const seq_frame *f, char *buf, size_t size);

/* The context bound was exceeded making a frame under `up` (NULL: under the
 * dataflow context). */
static void frame_bound_fail(seq_run *s, const seq_frame *up)
{
    char tag[256];
    if (!up) {
        vm_ctx_bound_fail(s->vm, s->ctx, NULL, UINT32_MAX, 0);
    } else { /* the innermost call and the depth, in one walk up the frames */
        const seq_frame *call = NULL;
        uint64_t depth = s->ctx ? s->ctx->depth : 0;
        for (const seq_frame *g = up; g; g = g->up, depth++)
            if (!call && g->sp)
                call = g;
        vm_ctx_bound_fail(s->vm, NULL, frame_tag(s, up, tag, sizeof tag),
                          call ? (uint32_t)(call->sp - s->vm->plan.sites) : UINT32_MAX, depth);
    }
    s->failed = true;
}

static seq_frame *frame_push(seq_run *s, seq_frame *up, uint32_t site)
{
    const vm_splan *sp = &s->vm->plan.sites[site];
    return frame_push_region(s, up, sp, sp->callee_plan);
}

/* A frame could not be made: the context bound, or no memory. */
static seq_frame *frame_push_failed(seq_run *s, seq_frame *up, bool count, bool bound)
{
    if (count)
        count_free(s->w);
    if (bound)
        frame_bound_fail(s, up);
    else {
        vm_fail(s->vm, TFVM_ERR_NOMEM, s->ctx, ISA_NONE, "out of memory creating a context");
        s->failed = true;
    }
    return NULL;
}

static UT_INLINE seq_frame *frame_push_region(seq_run *s, seq_frame *up, const vm_splan *sp, const vm_rplan *rp)
{
    uint32_t n = rp->n_regs, bytes = rp->frame_bytes;
    bool count = up || !s->counted;
    if (count && !count_new(s->w))
        return frame_push_failed(s, up, true, true);
    seq_frame *f = frame_alloc(s->w, bytes);
    if (!f)
        return frame_push_failed(s, up, count, false);
    f->up = up;
    f->sp = sp;
    f->rp = rp;
    f->pc = 0;
    f->tensors = false;
    f->loop = !sp;
    if (!sp) { /* a loop's first iteration */
        f->again = false;
        f->iter = 0;
    }
    f->v = (dev_value *)(f + 1);
    f->has = (uint8_t *)(f->v + n);
    if (n <= 32) /* small frames: a constant size, stores instead of a call */
        memset(f->has, 0, 32);
    else if (n <= 64)
        memset(f->has, 0, 64);
    else
        memset(f->has, 0, n);
    return f;
}

/* Frees a frame and the tensor references its registers hold. */
static UT_INLINE void frame_pop(seq_run *s, seq_frame *f)
{
    if (f->tensors)
        for (uint32_t k = 0; k < f->rp->n_regs; k++)
            if (f->has[k])
                dev_value_release(&f->v[k]);
    if (f->up || !s->counted)
        count_free(s->w);
    frame_release(s->w, f->rp->frame_bytes);
}

/* Writes register k of f (taking a reference on a tensor). */
static inline void frame_set(seq_frame *f, uint32_t k, const dev_value *v)
{
    f->v[k] = *v;
    f->has[k] = 1;
    if (v->is_tensor) {
        dev_value_retain(&f->v[k]);
        f->tensors = true;
    }
}

/* The tag of frame f as text, as vm_tag_str writes a context's: the
 * dataflow context's elements, then one per frame, outermost first; a tag
 * that does not fit ends in "...". Only the outermost frames can fit, so
 * one walk up the chain keeps the last 64 it passes (the outermost). */
static const char *frame_tag(seq_run *s, const seq_frame *f, char *buf, size_t size)
{
    vm_tag_str(s->vm, s->ctx, buf, size);
    size_t len = strlen(buf);
    if (len < 2 || buf[len - 1] != ']' || len + 1 >= size)
        return buf;
    len--; /* drop the ']' */
    enum { KEEP = 64 };
    const seq_frame *ring[KEEP];
    size_t depth = 0;
    for (const seq_frame *g = f; g; g = g->up)
        ring[depth++ % KEEP] = g;
    bool first = len == 1, fits = true;
    for (size_t d = depth; d-- > 0 && fits;) { /* outermost first */
        if (depth - d > KEEP) {
            fits = false; /* more frames than can fit */
            break;
        }
        const seq_frame *g = ring[d % KEEP];
        char label[160];
        if (!g->loop)
            isa_site_label(s->p->regions[g->sp->callee].name, s->p->sites[g->sp - s->vm->plan.sites].id, label,
                           sizeof label);
        int m = g->loop ? snprintf(buf + len, size - len, "%s%s#%llu", first ? "" : ", ", s->p->regions[g->rp - s->vm->plan.regions].name,
                                   (unsigned long long)g->iter)
                        : snprintf(buf + len, size - len, "%s%s", first ? "" : ", ", label);
        if (m < 0 || (size_t)m >= size - len) {
            fits = false;
            break;
        }
        len += (size_t)m;
        first = false;
    }
    if (fits && len + 1 < size) {
        buf[len] = ']';
        buf[len + 1] = '\0';
    } else if (size > 4) {
        size_t end = strlen(buf);
        if (end < size - 1) { /* fill the buffer, as vm_tag_str does */
            memset(buf + end, ' ', size - 1 - end);
            buf[size - 1] = '\0';
        }
        memcpy(buf + size - 4, "...", 4);
    }
    return buf;
}

static void frame_fail(seq_run *s, const seq_frame *f, tfvm_status code, uint32_t inst, const char *msg)
{
    char tag[256];
    vm_fail_tag(s->vm, code, frame_tag(s, f, tag, sizeof tag), inst, "%s", msg);
    s->failed = true;
}


/* Output `out` of f's instruction si: its register, and the tokens the graph
 * would send along its edges. */
static inline void frame_out(seq_run *s, seq_frame *f, const vm_sinst *si, uint32_t out, const dev_value *v)
{
    frame_set(f, si->reg + out, v);
    s->w->st.tokens += si->tokens[out];
}

static inline void frame_route(seq_run *s, seq_frame *f, const vm_sinst *si, uint32_t taken, const dev_value *v)
{
    frame_out(s, f, si, taken, v);
    if (!(si->flags & (taken ? ISA_FLAG_PRUNE_FALSE : ISA_FLAG_PRUNE_TRUE))) {
        dev_value dead = dev_dead();
        frame_out(s, f, si, 1 - taken, &dead);
    }
}

/* Frame f's call is over: each RETURN of its site whose producer ran fires,
 * into the caller's frame or, for the first frame, the dataflow context. */
static UT_INLINE void frame_return(seq_run *s, seq_count *count, seq_frame *f)
{
    const vm_splan *sp = f->sp;
    seq_frame *up = f->up;
    if (sp->ret_one && up) { /* the common case: one RETURN, one of two producers ran */
        uint32_t reg = f->has[sp->ret1[0]] ? sp->ret1[0] : sp->ret1[1];
        if (f->has[reg]) {
            frame_set(up, sp->ret_out[0], &f->v[reg]);
            count->fired++;
            count->tokens += sp->ret_tokens[0];
        }
        return;
    }
    for (uint32_t k = 0; k < sp->n_returns; k++) {
        const vm_sport *src = &sp->rets[k];
        const dev_value *v = NULL;
        for (uint32_t q = 0; q < src->n; q++) {
            uint32_t reg = sp->ret_regs[src->first + q];
            if (f->has[reg]) {
                v = &f->v[reg];
                break;
            }
        }
        if (!v)
            continue; /* no token for this RETURN */
        count->fired++;
        if (up) {
            frame_set(up, sp->ret_out[k], v);
            count->tokens += sp->ret_tokens[k];
        } else {
            vm_send(s->w, s->ctx, sp->returns[k], 0, v);
        }
    }
}

/* A call whose arguments are all dead: nothing runs, its RETURNs send dead
 * tokens; some dead and some live: an error, as in the graph. */
static void frame_call_dead(seq_run *s, seq_frame *f, uint32_t site, uint32_t inst, uint32_t dead)
{
    const vm_splan *sp = &s->vm->plan.sites[site];
    const vm_rplan *rp = f->rp;
    if (dead != sp->n_call) {
        char msg[160];
        snprintf(msg, sizeof msg, "call of '%s' entered with live and dead tokens at one tag",
                 s->p->regions[sp->callee].name);
        frame_fail(s, f, TFVM_ERR_DEADNESS, inst, msg);
        return;
    }
    dev_value d = dev_dead();
    for (uint32_t k = 0; k < sp->n_returns; k++)
        frame_out(s, f, &rp->sinsts[sp->returns[k] - rp->first], 0, &d);
}

/* The site's call with all its arguments in f's argument registers: every
 * one dead (the RETURNs say so, nothing runs), every one live (a new frame),
 * or both (an error, as in the graph). NULL: no new frame. */
static UT_INLINE seq_frame *frame_call(seq_run *s, seq_count *count, seq_frame *f, uint32_t site, uint32_t inst)
{
    const vm_splan *sp = &s->vm->plan.sites[site];
    const dev_value *args = &f->v[sp->arg_slot];
    uint32_t dead = 0;
    for (uint32_t k = 0; k < sp->n_call; k++)
        dead += args[k].dead;
    if (dead) {
        frame_call_dead(s, f, site, inst, dead);
        return NULL;
    }
    seq_frame *g = frame_push_region(s, f, sp, sp->callee_plan);
    if (g)
        for (uint32_t k = 0; k < sp->n_call; k++) {
            g->v[k] = args[k];
            g->has[k] = 1;
            if (args[k].is_tensor) {
                dev_value_retain(&g->v[k]);
                g->tensors = true;
            }
        }
    count->tokens += sp->call_tokens;
    return g;
}

/* What a step that may fail returns: the frame to run first (or NULL), or
 * SEQ_STOP when the run failed, so the step loop need not look at s->failed
 * after every step. */
#define SEQ_STOP ((seq_frame *)1)
#define SEQ_END ((seq_frame *)2) /* the frame's last step is done */
static inline seq_frame *stop_or(const seq_run *s, seq_frame *next)
{
    return s->failed ? SEQ_STOP : next;
}

/* Visits f's instruction at `local`: fires it if its inputs are there.
 * Returns a frame to run first (a call), or NULL. */
static seq_frame *frame_visit(seq_run *s, seq_frame *f, const vm_rplan *rp, uint32_t local)
{
    tfvm_vm *vm = s->vm;
    const vm_sinst *si = &rp->sinsts[local];
    if (si->op == ISA_RETURN)
        return NULL; /* written by its callee's frame (frame_return) */
    /* Each port's token: the one present producer (two are a program error). */
    const dev_value *x[8];
    const vm_sport *ports = &rp->sports[si->src_at];
    uint32_t got = 0, live = 0, want = si->ports - (si->imm >= 0);
    bool dead = false;
    for (uint32_t k = 0; k < si->ports; k++) {
        const vm_sport *pt = &ports[k];
        const dev_value *v = NULL;
        for (uint32_t q = 0; q < pt->n; q++) {
            uint32_t reg = rp->sregs[pt->first + q];
            if (f->has[reg]) {
                if (v) {
                    char msg[64];
                    snprintf(msg, sizeof msg, "two tokens for input %u at one tag", k);
                    frame_fail(s, f, TFVM_ERR_PORT, si->inst, msg);
                    return NULL;
                }
                v = &f->v[reg];
            }
        }
        if (k < 8)
            x[k] = v;
        if (v) {
            got++;
            dead |= v->dead;
            live += !v->dead;
        }
    }
    if (si->op == ISA_MERGE ? !live && got < want : got < want)
        return NULL; /* no token (not reached), or a partial match that waits forever */
    if (si->imm >= 0 && si->imm < 8)
        x[si->imm] = &vm->consts[si->b];
    s->w->st.fired++;
    s->w->st.matches += si->matched;
    seq_frame *next = NULL;
    switch ((isa_op)si->op) {
    case ISA_CONST: {
        dev_value v = dead ? dev_dead() : vm->consts[si->a];
        frame_out(s, f, si, 0, &v);
        break;
    }
    case ISA_IDENTITY:
    case ISA_LOOPCOND:
        frame_out(s, f, si, 0, x[0]);
        break;
    case ISA_BRANCH: {
        if (dead) {
            frame_out(s, f, si, 0, x[0]);
            frame_out(s, f, si, 1, x[0]);
            break;
        }
        dev_value pred;
        if (!vm_scalar_op((uint16_t)si->a, x[0], &vm->consts[si->b], &pred)) {
            dev_value two[2] = {*x[0], vm->consts[si->b]};
            char msg[256];
            tfvm_status st = dev_cpu_elementwise((isa_op)si->a, 0, two, &pred, &vm->alloc, msg, sizeof msg);
            if (st != TFVM_OK) {
                frame_fail(s, f, st, si->inst, msg);
                break;
            }
            if (pred.is_tensor) {
                dev_value_release(&pred);
                frame_fail(s, f, TFVM_ERR_TYPE, si->inst, "predicate must be a bool scalar, got a bool tensor");
                break;
            }
        }
        frame_route(s, f, si, pred.u.b ? 1 : 0, x[0]);
        break;
    }
    case ISA_SWITCH:
        if (dead) {
            dev_value d = dev_dead();
            frame_out(s, f, si, 0, &d);
            frame_out(s, f, si, 1, &d);
        } else if (x[1]->is_tensor || x[1]->dtype != TFVM_BOOL) {
            char msg[96];
            snprintf(msg, sizeof msg, "predicate must be a bool scalar, got %s%s",
                     tfvm_dtype_name((tfvm_dtype)x[1]->dtype), x[1]->is_tensor ? " tensor" : "");
            frame_fail(s, f, TFVM_ERR_TYPE, si->inst, msg);
        } else {
            frame_route(s, f, si, x[1]->u.b ? 1 : 0, x[0]);
        }
        break;
    case ISA_MERGE: {
        uint32_t k = 0;
        while (k < si->n_in && k < 8 && !(x[k] && !x[k]->dead))
            k++;
        if (!live) {
            dev_value d = dev_dead();
            frame_out(s, f, si, 0, &d);
            frame_out(s, f, si, 1, &d);
        } else {
            dev_value index = {.dtype = TFVM_I32, .u.i32 = (int32_t)k};
            frame_out(s, f, si, 0, x[k]);
            frame_out(s, f, si, 1, &index);
        }
        break;
    }
    case ISA_CALL: {
        const vm_splan *sp = &vm->plan.sites[si->a];
        frame_set(f, sp->arg_slot + si->arg, x[0]);
        uint32_t have = 0;
        for (uint32_t k = 0; k < sp->n_call; k++)
            have += f->has[sp->arg_slot + k];
        if (have == sp->n_call) {
            seq_count count = {0};
            next = frame_call(s, &count, f, si->a, si->inst);
            s->w->st.tokens += count.tokens;
        }
        break;
    }
    case ISA_NEXTITER: /* into the next iteration's register; dead tokens end the chain */
        if (!dead) {
            frame_set(f, si->reg + 1, x[0]);
            s->w->st.tokens += si->tokens[0];
            f->again = true;
        }
        break;
    case ISA_EXIT: /* out of the loop, into the context that entered it; dead tokens dropped */
        if (!dead)
            vm_send(s->w, s->ctx, si->inst, 0, x[0]);
        break;
    default: { /* compute */
        dev_value out = dev_dead();
        if (!dead && !(si->n_in == 2 && vm_scalar_op(si->op, x[0], x[1], &out))) {
            dev_value in[5] = {{0}};
            for (uint32_t k = 0; k < si->n_in && k < 5; k++)
                in[k] = *x[k];
            char msg[256];
            tfvm_status st = dev_vm_fire(vm->dev, &s->p->insts[si->inst], in, &out, msg, sizeof msg);
            if (st != TFVM_OK) {
                frame_fail(s, f, st, si->inst, msg);
                break;
            }
        }
        frame_out(s, f, si, 0, &out);
        dev_value_release(&out);
        break;
    }
    }
    return next;
}

/* A nested loop's last ENTER fired in f: with every entry value there, a
 * frame for its iteration 0 (NULL: all dead, the EXITs said so; or an
 * error). */
static seq_frame *frame_enter(seq_run *s, seq_frame *f, uint32_t frame, uint32_t inst)
{
    const vm_rplan *lr = &s->vm->plan.regions[frame];
    const vm_fplan *fp = &s->vm->plan.frames[frame];
    dev_value *entry = &f->v[fp->entry_reg];
    uint32_t got = 0, dead = 0;
    for (uint32_t k = 0; k < lr->n_args; k++) {
        got += f->has[fp->entry_reg + k];
        dead += f->has[fp->entry_reg + k] && entry[k].dead;
    }
    if (got < lr->n_args)
        return NULL; /* an ENTER not reached: the loop waits forever, as in the graph */
    if (dead) {
        if (dead != lr->n_args) {
            char msg[160];
            snprintf(msg, sizeof msg, "loop '%s' entered with live and dead tokens at one tag",
                     s->p->regions[frame].name);
            frame_fail(s, f, TFVM_ERR_DEADNESS, inst, msg);
            return NULL;
        }
        dev_value d = dev_dead(); /* a dead token never enters a loop: each EXIT says "dead" once */
        for (uint32_t x = lr->first; x < lr->end; x++)
            if (s->p->insts[x].op == ISA_EXIT) {
                frame_set(f, s->vm->plan.insts[x].preg, &d);
                s->w->st.tokens += s->p->insts[x].n_edges;
            }
        return NULL;
    }
    seq_frame *g = frame_push_region(s, f, NULL, lr);
    if (!g)
        return NULL;
    for (uint32_t k = 0; k < lr->n_args; k++) {
        frame_set(g, k, &entry[k]);
        if (f->tensors)
            dev_value_release(&entry[k]);
        f->has[fp->entry_reg + k] = 0;
    }
    s->w->st.tokens += fp->entry_tokens + fp->const_tokens;
    return g;
}

/* The token on an input fed by registers r (and r2): NULL when none is
 * there; `two` when both are (a program error the general visit reports). */
static inline const dev_value *pick(const seq_frame *f, uint32_t r, uint32_t r2, bool *two)
{
    if (f->has[r]) {
        *two |= r2 != ISA_NONE && f->has[r2];
        return &f->v[r];
    }
    return r2 != ISA_NONE && f->has[r2] ? &f->v[r2] : NULL;
}

/* A CALL fires: its argument x goes into register k, where the site's
 * arguments are gathered. */
static inline void frame_gather(seq_count *n, seq_frame *f, uint32_t k, const dev_value *x)
{
    frame_set(f, k, x);
    n->fired++;
}

/* x's dead and is_tensor flags in one load (they are neighbours): 0 for a
 * live scalar. */
static inline uint32_t flags(const dev_value *x)
{
    _Static_assert(offsetof(dev_value, is_tensor) == offsetof(dev_value, dead) + 1, "dead, is_tensor: one 16-bit word");
    uint16_t f;
    memcpy(&f, &x->dead, sizeof f);
    return f;
}

/* Is x a live scalar (neither dead nor a tensor)? */
static inline bool plain(const dev_value *x) { return flags(x) == 0; }

/* The SWITCHes of a SWITCHN step from route r on, by the general visit (a
 * predicate or value the step does not route itself). SEQ_STOP: the run
 * failed. */
static seq_frame *switch_group_visit(seq_run *s, seq_frame *f, const vm_sroute *r, const vm_sroute *end)
{
    for (; r < end; r++) {
        frame_visit(s, f, f->rp, r->local);
        if (s->failed)
            return SEQ_STOP;
    }
    return NULL;
}

/* A SWITCHN step from route r on, once a value there is dead or a tensor
 * (or, when y is NULL, the predicate is not a live bool): those SWITCHes by
 * the general visit, live scalars as the step routes them. */
static __attribute__((noinline)) seq_frame *switch_group_rest(seq_run *s, seq_count *n, seq_frame *f, dev_value *v,
                                                              uint8_t *has, const vm_sroute *r,
                                                              const vm_sroute *end, const dev_value *y)
{
    if (!y)
        return switch_group_visit(s, f, r, end);
    unsigned taken = y->u.b;
    for (; r < end; r++) {
        if (!has[r->src])
            continue;
        if (!plain(&v[r->src])) {
            if (switch_group_visit(s, f, r, r + 1))
                return SEQ_STOP;
            continue;
        }
        v[r->out + taken] = v[r->src];
        has[r->out + taken] = 1;
        n->fired++, n->matches++, n->tokens += r->tokens[taken];
    }
    return NULL;
}

/* A SWITCHN step (out of line: the step loop's own code stays as it is for
 * bodies without one; anything but live scalars goes on in
 * switch_group_rest, so this part needs no registers saved). NULL, or
 * SEQ_STOP when the run failed. */
static __attribute__((noinline)) seq_frame *switch_group(seq_run *s, seq_count *n, seq_frame *f, dev_value *v,
                                                         uint8_t *has, const vm_sop *op)
{
    if (!has[op->b])
        return NULL;
    const dev_value *y = &v[op->b];
    const vm_sroute *r = &f->rp->routes[op->a], *end = r + op->a2;
    if (y->dtype != TFVM_BOOL || !plain(y))
        return switch_group_rest(s, n, f, v, has, r, end, NULL);
    unsigned taken = y->u.b;
    uint32_t fired = 0, tokens = 0;
    for (; r < end; r++) {
        uint32_t src = r->src, o = r->out + taken;
        if (!has[src])
            continue; /* not reached: this SWITCH does not fire */
        if (!plain(&v[src]))
            break;
        v[o] = v[src];
        has[o] = 1;
        fired++;
        tokens += r->tokens[taken];
    }
    n->fired += fired, n->matches += fired, n->tokens += tokens;
    return r == end ? NULL : switch_group_rest(s, n, f, v, has, r, end, y);
}

/* A BRANCH or SWITCH step sends x to its taken side, and a dead token to
 * the other unless that side is pruned. */
static inline void step_route(seq_count *n, seq_frame *f, const vm_sop *op, bool taken, const dev_value *x)
{
    frame_set(f, op->out + taken, x);
    n->tokens += taken ? op->tokens1 : op->tokens;
    if (!(op->flags & (taken ? ISA_FLAG_PRUNE_FALSE : ISA_FLAG_PRUNE_TRUE))) {
        f->v[op->out + !taken] = dev_dead();
        f->has[op->out + !taken] = 1;
        n->tokens += taken ? op->tokens : op->tokens1;
    }
}

/* step_route for a live scalar x (no reference to take), into the step
 * loop's v and has; both sides pruned (the common case) cost one compare. */
static inline void route_scalar(seq_count *n, dev_value *v, uint8_t *has, const vm_sop *op, bool taken,
                                const dev_value *x)
{
    v[op->out + taken] = *x;
    has[op->out + taken] = 1;
    n->tokens += taken ? op->tokens1 : op->tokens;
    if (op->flags != (ISA_FLAG_PRUNE_FALSE | ISA_FLAG_PRUNE_TRUE) &&
        !(op->flags & (taken ? ISA_FLAG_PRUNE_FALSE : ISA_FLAG_PRUNE_TRUE))) {
        v[op->out + !taken] = dev_dead();
        has[op->out + !taken] = 1;
        n->tokens += taken ? op->tokens : op->tokens1;
    }
}

/* The integer steps (VM_SOP_ARITH, VM_SOP_CMPS): i32 and i64 here, any
 * other token through the general binary step or BRANCH. INT_OPERANDS reads
 * a step's two operands (two registers, or a register and a constant), goes
 * to the general step unless they are live scalars of one dtype, and on at
 * N##_go; a constant is a live i32 or i64 scalar (seq_specialise), so there
 * only the register's value needs a look, and a BRANCH on it needs no third
 * case. */
#define INT_OPERANDS(N)                                                                                 \
    case VM_SOP_##N##_RR:                                                                               \
        if (!has[op->a] || !has[op->b])                                                                 \
            return NULL;                                                                                \
        x = &v[op->a], y = &v[op->b];                                                                   \
        if (x->dtype != y->dtype || (flags(x) | flags(y)))                                              \
            goto binary;                                                                                \
        goto N##_go;                                                                                    \
    case VM_SOP_##N##_RK:                                                                               \
        if (!has[op->a])                                                                                \
            return NULL;                                                                                \
        x = &v[op->a], y = &consts[op->b];                                                              \
        if (x->dtype != y->dtype || flags(x))                                                           \
            goto binary;                                                                                \
    N##_go:
#define ARITH_STEPS(N, OP, C)                                                                           \
    INT_OPERANDS(N)                                                                                     \
        if (x->dtype == TFVM_I32)                                                                       \
            v[op->out] = (dev_value){.dtype = TFVM_I32, .u.i32 = (int32_t)((uint32_t)x->u.i32 C (uint32_t)y->u.i32)}; \
        else if (x->dtype == TFVM_I64)                                                                  \
            v[op->out] = (dev_value){.dtype = TFVM_I64, .u.i64 = (int64_t)((uint64_t)x->u.i64 C (uint64_t)y->u.i64)}; \
        else                                                                                            \
            goto binary;                                                                                \
        has[op->out] = 1;                                                                               \
        n->fired++, n->matches += op->matched, n->tokens += op->tokens;                                 \
        return NULL;
#define CMP_STEPS(N, OP, C)                                                                             \
    INT_OPERANDS(N)                                                                                     \
        if (x->dtype == TFVM_I32)                                                                       \
            c = x->u.i32 C y->u.i32;                                                                    \
        else if (x->dtype == TFVM_I64)                                                                  \
            c = x->u.i64 C y->u.i64;                                                                    \
        else                                                                                            \
            goto binary;                                                                                \
        v[op->out] = (dev_value){.dtype = TFVM_BOOL, .u.b = c};                                         \
        has[op->out] = 1;                                                                               \
        n->fired++, n->matches += op->matched, n->tokens += op->tokens;                                 \
        return NULL;                                                                                    \
    case VM_SOP_##N##_BR:                                                                               \
        if (!has[op->a])                                                                                \
            return NULL;                                                                                \
        x = &v[op->a], y = &consts[op->b];                                                              \
        if (x->dtype != y->dtype || flags(x))                                                           \
            goto branch;                                                                                \
        c = x->dtype == TFVM_I32 ? x->u.i32 C y->u.i32 : x->u.i64 C y->u.i64;                          \
        n->fired++;                                                                                     \
        route_scalar(n, v, has, op, c, x);                                                              \
        return NULL;

/* One step of f's order; NULL, a frame to run first, SEQ_STOP or SEQ_END. */
static UT_INLINE seq_frame *frame_step(seq_run *s, seq_count *n, const dev_value *consts, seq_frame *f,
                                       dev_value *v, uint8_t *has, const vm_rplan *rp, const vm_sop **next)
{
    const vm_sop *op = (*next)++;
    const dev_value *x, *y;
    bool two = false, c;
    switch (op->kind) {
    case VM_SOP_GUARD:
        if (!has[op->a])
            *next = rp->sops + op->skip; /* that side of its branch was not taken */
        return NULL;
    case VM_SOP_END:
        return SEQ_END;
        VM_SOP_ARITH(ARITH_STEPS)
        VM_SOP_CMPS(CMP_STEPS)
    case VM_SOP_BIN_RR:
        x = pick(f, op->a, op->a2, &two), y = pick(f, op->b, op->b2, &two);
        if (!x || !y)
            return NULL; /* not reached (or a partial match) */
        goto binary;
    case VM_SOP_BIN_RK:
        if (!(x = pick(f, op->a, op->a2, &two)))
            return NULL;
        y = &consts[op->b];
        goto binary;
    case VM_SOP_BIN_KR:
        if (!(y = pick(f, op->b, op->b2, &two)))
            return NULL;
        x = &consts[op->a];
    binary:
        if (two)
            break;
        if (x->dead || y->dead) /* a dead input: a dead output, no kernel */
            v[op->out] = dev_dead();
        else if (!vm_scalar_op(op->op, x, y, &v[op->out]))
            break;
        has[op->out] = 1;
        n->fired++, n->matches += op->matched, n->tokens += op->tokens;
        return NULL;
    case VM_SOP_BRANCH: {
        if (!(x = pick(f, op->a, op->a2, &two)))
            return NULL;
        if (two)
            break;
    branch:;
        dev_value pred;
        if (x->dead) { /* both sides hear it */
            n->fired++;
            frame_out(s, f, &rp->sinsts[op->local], 0, x);
            frame_out(s, f, &rp->sinsts[op->local], 1, x);
            return NULL;
        }
        if (!vm_scalar_op(op->op, x, &consts[op->b], &pred))
            break;
        n->fired++;
        step_route(n, f, op, pred.u.b, x);
        return NULL;
    }
    case VM_SOP_SWITCH1:
        if (!has[op->a] || !has[op->b])
            return NULL;
        x = &v[op->a], y = &v[op->b];
        if (y->dtype == TFVM_BOOL && !(x->dead | x->is_tensor | y->dead | y->is_tensor)) {
            n->fired++, n->matches++;
            route_scalar(n, v, has, op, y->u.b, x);
            return NULL;
        }
        goto switch_general;
    case VM_SOP_SWITCH: {
        x = pick(f, op->a, op->a2, &two), y = pick(f, op->b, op->b2, &two);
        if (!x || !y)
            return NULL;
        if (two)
            break;
    switch_general:
        if (x->dead || y->dead) { /* both outputs dead */
            dev_value d = dev_dead();
            n->fired++, n->matches++;
            frame_out(s, f, &rp->sinsts[op->local], 0, &d);
            frame_out(s, f, &rp->sinsts[op->local], 1, &d);
            return NULL;
        }
        if (y->is_tensor || y->dtype != TFVM_BOOL)
            break;
        n->fired++, n->matches++;
        step_route(n, f, op, y->u.b, x);
        return NULL;
    }
    case VM_SOP_MERGE: { /* two inputs: the live one, or dead once both are dead */
        x = pick(f, op->a, op->a2, &two), y = pick(f, op->b, op->b2, &two);
        if (two)
            break;
        const dev_value *live = x && !x->dead ? x : y && !y->dead ? y : NULL;
        if (!live && !(x && y))
            return NULL; /* no token, or only a dead one so far */
        const vm_sinst *si = &rp->sinsts[op->local];
        n->fired++, n->matches++;
        if (live) {
            dev_value index = {.dtype = TFVM_I32, .u.i32 = live == x ? 0 : 1};
            frame_out(s, f, si, 0, live);
            frame_out(s, f, si, 1, &index);
        } else {
            dev_value d = dev_dead();
            frame_out(s, f, si, 0, &d);
            frame_out(s, f, si, 1, &d);
        }
        return NULL;
    }
    case VM_SOP_COPY:
        if (!(x = pick(f, op->a, op->a2, &two)))
            return NULL;
        if (two)
            break;
        n->fired++;
        frame_out(s, f, &rp->sinsts[op->local], 0, x);
        return NULL;
    case VM_SOP_NEXTITER:
        if (!(x = pick(f, op->a, op->a2, &two)))
            return NULL;
        if (two)
            break;
        n->fired++;
        if (!x->dead) { /* into the next iteration's register; dead tokens end the chain */
            frame_set(f, op->out + 1, x);
            n->tokens += op->tokens;
            f->again = true;
        }
        return NULL;
    case VM_SOP_EXIT:
        if (!(x = pick(f, op->a, op->a2, &two)))
            return NULL;
        if (two)
            break;
        n->fired++;
        if (x->dead) /* dead tokens are dropped */
            return NULL;
        if (f->up) { /* into the parent's frame */
            frame_set(f->up, op->out, x);
            s->w->st.tokens += s->p->insts[op->b].n_edges;
        } else { /* into the context that entered the loop */
            vm_send(s->w, s->ctx, op->b, 0, x);
        }
        return NULL;
    case VM_SOP_ENTER:
    case VM_SOP_ENTER_LAST:
        if (!(x = pick(f, op->a, op->a2, &two)))
            return NULL;
        if (two)
            break;
        frame_set(f, op->out, x);
        n->fired++;
        return op->kind == VM_SOP_ENTER_LAST ? stop_or(s, frame_enter(s, f, op->b, rp->sinsts[op->local].inst)) : NULL;
    case VM_SOP_CONST:
        if (!has[op->a])
            return NULL;
        v[op->out] = v[op->a].dead ? dev_dead() : consts[op->b];
        if (v[op->out].is_tensor) {
            dev_value_retain(&v[op->out]);
            f->tensors = true;
        }
        has[op->out] = 1;
        n->fired++, n->tokens += op->tokens;
        return NULL;
    case VM_SOP_CALL:
    case VM_SOP_CALL_LAST: {
        if (!has[op->a])
            return NULL;
        const vm_splan *sp = &s->vm->plan.sites[op->b];
        frame_gather(n, f, sp->arg_slot + op->out, &v[op->a]); /* (each step fires once a frame: never a second) */
        if (op->kind == VM_SOP_CALL)
            return NULL; /* the site's last CALL makes the call */
        uint32_t have = 0;
        for (uint32_t k = 0; k < sp->n_call; k++)
            have += has[sp->arg_slot + k];
        return have == sp->n_call ? stop_or(s, frame_call(s, n, f, op->b, rp->sinsts[op->local].inst)) : NULL;
    }
    case VM_SOP_CALL1: {
        if (!has[op->a])
            return NULL;
        const vm_splan *sp = &s->vm->plan.sites[op->b];
        x = &v[op->a];
        if (!(x->dead | x->is_tensor)) { /* a live scalar: straight into the callee's frame */
            seq_frame *g = frame_push_region(s, f, sp, sp->callee_plan);
            if (!g)
                return SEQ_STOP;
            g->v[0] = *x;
            g->has[0] = 1;
            n->fired++, n->tokens += sp->call_tokens;
            return g;
        }
        frame_gather(n, f, sp->arg_slot, x);
        return stop_or(s, frame_call(s, n, f, op->b, rp->sinsts[op->local].inst));
    }
    case VM_SOP_CALLN: {
        const vm_splan *sp = &s->vm->plan.sites[op->b];
        const uint32_t *src = sp->arg_src;
        uint32_t other = 0; /* an argument absent, dead or a tensor (an absent one's value bytes are
                               stale: read, never used) */
        for (uint32_t k = 0; k < sp->n_call; k++)
            other |= (has[src[k]] ^ 1) | v[src[k]].dead | v[src[k]].is_tensor;
        if (!other) { /* live scalars: straight into the callee's frame */
            seq_frame *g = frame_push_region(s, f, sp, sp->callee_plan);
            if (!g)
                return SEQ_STOP;
            for (uint32_t k = 0; k < sp->n_call; k++) {
                g->v[k] = v[src[k]];
                g->has[k] = 1;
            }
            n->fired += sp->n_call, n->tokens += sp->call_tokens;
            return g;
        }
        uint32_t have = 0;
        for (uint32_t k = 0; k < sp->n_call; k++) /* else as the CALLs one by one would */
            if (has[src[k]]) {
                frame_gather(n, f, sp->arg_slot + k, &v[src[k]]);
                have++;
            }
        return have == sp->n_call ? stop_or(s, frame_call(s, n, f, op->b, rp->sinsts[op->local].inst)) : NULL;
    }
    case VM_SOP_SWITCHN:
        return switch_group(s, n, f, v, has, op);
    case VM_SOP_GENERIC:
    case VM_SOP_SKIP: /* (never left in an order) */
        break;
    default: /* every kind has its case: no range check before the jump */
#if defined(__GNUC__)
        __builtin_unreachable();
#endif
        break;
    }
    return stop_or(s, frame_visit(s, f, rp, op->local));
}

/* A loop frame's iteration ended with NEXTITER tokens: the next iteration
 * starts with them (and the `ENTER const` values); everything else of the
 * last one goes. As the graph does, every iteration is a context. */
static bool next_iteration(seq_run *s, seq_frame *f)
{
    const vm_rplan *rp = f->rp;
    const vm_fplan *fp = &s->vm->plan.frames[rp - s->vm->plan.regions];
    count_free(s->w);
    if (!count_new(s->w)) { /* the bound */
        frame_bound_fail(s, f);
        return false;
    }
    if (!f->tensors && fp->n_nexts <= 64) {
        /* scalars only: nothing to release, so clear the registers in one
         * go and put the NEXTITER values back */
        uint64_t moved = 0;
        for (uint32_t k = 0; k < fp->n_nexts; k++) {
            uint32_t cur = fp->nexts[k];
            f->v[cur] = f->v[cur + 1];
            moved |= (uint64_t)f->has[cur + 1] << k;
        }
        for (uint32_t k = 0; k < rp->n_args; k++)
            f->has[k] &= rp->keep[k];
        memset(f->has + rp->n_args, 0, rp->n_regs - rp->n_args);
        for (uint32_t k = 0; k < fp->n_nexts; k++)
            f->has[fp->nexts[k]] = (moved >> k) & 1;
    } else {
        for (uint32_t k = 0; k < fp->n_nexts; k++) { /* each NEXTITER's value moves in */
            uint32_t cur = fp->nexts[k], nxt = cur + 1;
            if (f->has[cur])
                dev_value_release(&f->v[cur]);
            f->has[cur] = f->has[nxt];
            f->v[cur] = f->v[nxt];
            f->has[nxt] = 0;
        }
        for (uint32_t k = 0; k < rp->n_regs; k++) /* the rest goes, but the constant entry values */
            if (f->has[k] && !rp->keep[k]) {
                dev_value_release(&f->v[k]);
                f->has[k] = 0;
            }
    }
    f->pc = 0;
    f->again = false;
    f->iter++;
    s->w->st.tokens += fp->const_tokens;
    return true;
}

/* Every 1024 calls or iterations: an interrupt, or the end of the run that
 * an error on another worker decided, stops the frames. */
static void seq_poll(seq_run *s)
{
    tfvm_vm *vm = s->vm;
    if (atomic_load_explicit(&vm->interrupted, memory_order_relaxed) && atomic_exchange(&vm->interrupted, 0))
        vm_fail(vm, TFVM_ERR_INTERRUPTED, NULL, ISA_NONE, "interrupted");
    if (atomic_load_explicit(&vm->run.done, memory_order_relaxed))
        s->failed = true;
}

/* Runs frames from `top` until it returns (or the run stops). Interrupts
 * and the end of the run are looked at every 1024 calls. */
static void frames_run(seq_run *s, seq_frame *top)
{
    tfvm_vm *vm = s->vm;
    seq_frame *f = top;
    seq_count count = {0};
    const dev_value *consts = vm->consts;
    while (f) {
        const vm_rplan *rp = f->rp;
        const vm_sop *next = rp->sops + f->pc;
        seq_frame *call;
        dev_value *v = f->v; /* (f->v and f->has once: stores through has would make the steps reload them) */
        uint8_t *has = f->has;
        while (!(call = frame_step(s, &count, consts, f, v, has, rp, &next)))
            ;
        if (call == SEQ_END && !f->loop) { /* a call is over (no step failed: that ends in SEQ_STOP) */
            frame_return(s, &count, f);
            seq_frame *up = f->up;
            bool last = f == top;
            frame_pop(s, f);
            f = last ? NULL : up;
            continue;
        }
        if (call == SEQ_STOP || call == SEQ_END)
            call = NULL; /* (SEQ_STOP: s->failed is set) */
        if (call) {
            f->pc = (uint32_t)(next - rp->sops);
            f = call;
            if ((++s->polls & 1023) != 0)
                continue;
            seq_poll(s);
            if (!s->failed)
                continue;
        }
        if (f->loop && f->again && !s->failed && next_iteration(s, f)) {
            if ((++s->polls & 1023) == 0)
                seq_poll(s);
            if (!s->failed)
                continue;
        }
        if (s->failed) { /* every frame of this call goes */
            for (bool last = false; !last;) {
                seq_frame *up = f->up;
                last = f == top;
                frame_pop(s, f);
                f = up;
            }
            break;
        }
        seq_frame *up = f->up;
        bool last = f == top;
        frame_pop(s, f);
        f = last ? NULL : up;
    }
    s->w->st.fired += count.fired;
    s->w->st.tokens += count.tokens;
    s->w->st.matches += count.matches;
}

void vm_seq_call(vm_worker *w, vm_ctx *c, uint32_t site, dev_value *args, bool counted)
{
    tfvm_vm *vm = w->vm;
    seq_run s = {.w = w, .vm = vm, .p = vm->prog, .ctx = c, .counted = counted};
    const vm_splan *sp = &vm->plan.sites[site];
    seq_frame *f = frame_push(&s, NULL, site);
    for (uint32_t k = 0; k < sp->n_call; k++) {
        if (f) {
            frame_set(f, k, &args[k]);
            w->st.tokens += vm->prog->insts[sp->calls[k]].n_edges;
        }
        dev_value_release(&args[k]);
    }
    if (f)
        frames_run(&s, f);
}

void vm_seq_loop(vm_worker *w, vm_ctx *c, uint32_t frame, dev_value *entry)
{
    tfvm_vm *vm = w->vm;
    seq_run s = {.w = w, .vm = vm, .p = vm->prog, .ctx = c, .counted = false};
    const vm_fplan *fp = &vm->plan.frames[frame];
    uint32_t n = vm->plan.regions[frame].n_args;
    seq_frame *f = frame_push_region(&s, NULL, NULL, &vm->plan.regions[frame]);
    for (uint32_t k = 0; k < n; k++) {
        if (f)
            frame_set(f, k, &entry[k]);
        dev_value_release(&entry[k]);
    }
    if (!f)
        return;
    w->st.tokens += fp->entry_tokens + fp->const_tokens;
    frames_run(&s, f);
}
