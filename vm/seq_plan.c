/* vm/seq_plan.c — the plan of sequential frames (docs/frames.md): which
 * bodies run as frames, and for each a firing order in which producers come
 * before consumers (a call site's RETURNs after its CALLs, a nested loop's
 * results after its ENTERs), compiled into specialised steps over registers
 * (one per instruction output), with the steps of each side of a pruned
 * branch ordered contiguously behind a guard register, so a frame jumps over
 * the side that was not taken. vm/seq.c runs the steps. Built once per VM;
 * its scratch memory comes from the VM's allocation hook. */

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "devices/cpu/cpu.h"
#include "seq.h"

/* ---- Plan ---------------------------------------------------------------------- */

/* The plan's scratch arrays: n zeroed 32-bit words from the VM's allocation
 * hook (the plan arena's), NULL when there is no memory; each is given back
 * (words_free, with the same n) before vm_seq_plan returns. */
static uint32_t *words(const vm_plan *plan, size_t n) { return ut_calloc(&plan->arena.alloc, n, sizeof(uint32_t)); }
static void words_free(const vm_plan *plan, uint32_t *w, size_t n) { ut_free(&plan->arena.alloc, w, n * sizeof *w); }

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
    uint32_t *indeg = words(plan, n + 1), *queue = words(plan, n + 1);
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
    words_free(plan, indeg, n + 1);
    words_free(plan, queue, n + 1);
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
    uint32_t *seen, *stack, top, n; /* seen, stack: n words */
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
    t->n = rp->end - rp->first + 1;
    t->seen = words(plan, t->n);
    t->stack = words(plan, t->n);
    return t->seen && t->stack;
}

static void walk_close(tag_walk *t)
{
    words_free(t->plan, t->seen, t->n);
    words_free(t->plan, t->stack, t->n);
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

/* Gives back an array of seq_guards' size: a word per instruction of rp. */
static void guards_free(const vm_plan *plan, const vm_rplan *rp, uint32_t *g)
{
    words_free(plan, g, rp->end - rp->first + 1);
}

static uint32_t *seq_guards(const isa_program *p, vm_plan *plan, vm_rplan *rp)
{
    uint32_t n = rp->end - rp->first;
    uint32_t *owner = words(plan, rp->n_regs + 1), *guard = words(plan, n + 1);
    uint32_t *rep = words(plan, 2 * (size_t)rp->n_regs + 2);
    uint32_t *indeg = words(plan, n + 1), *ready = words(plan, n + 1), *order = words(plan, n + 1);
    if (!owner || !guard || !rep || !indeg || !ready || !order) {
        words_free(plan, guard, n + 1), words_free(plan, indeg, n + 1);
        words_free(plan, ready, n + 1), words_free(plan, order, n + 1);
        words_free(plan, owner, rp->n_regs + 1), words_free(plan, rep, 2 * (size_t)rp->n_regs + 2);
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
    words_free(plan, owner, rp->n_regs + 1), words_free(plan, rep, 2 * (size_t)rp->n_regs + 2);
    words_free(plan, indeg, n + 1), words_free(plan, ready, n + 1), words_free(plan, order, n + 1);
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
    uint32_t *at = words(plan, n + 1); /* each step's new place (its GUARD's, if any) */
    if (!out || !at) {
        words_free(plan, at, n + 1);
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
    words_free(plan, at, n + 1);
    rp->sops = out;
    rp->n_sops = w;
    return true;
}


/* A STACK_PUT grows its stack in place when the stack is its own (one
 * reference), a reshape relabels its input's dims, FUSED_CONV2D_ADD writes
 * over r (dev_cpu_in_place): in a frame, that register's value. A step
 * later in the order that reads that register, or another input of the
 * same step, would then see the change: such an instruction holds a
 * reference of its own while it fires (vm_sinst.hold), as one on a loop's
 * invariant (every iteration reads it). Steps whose place the order does
 * not show count as later. false: no memory. */
static bool seq_holds(vm_plan *plan, vm_rplan *rp)
{
    const uint32_t n = rp->end - rp->first;
    bool any = false;
    for (uint32_t l = 0; l < n; l++)
        any |= dev_cpu_in_place((isa_op)rp->sinsts[l].op) >= 0;
    if (!any)
        return true;
    uint32_t *at = words(plan, n + 1); /* each instruction's step, + 1 (0: none) */
    if (!at)
        return false;
    for (uint32_t q = 0; q < rp->n_sops; q++) {
        const vm_sop *op = &rp->sops[q];
        if (op->kind == VM_SOP_SWITCHN)
            for (uint32_t k = 0; k < op->a2; k++)
                at[rp->routes[op->a + k].local] = q + 1;
        else if (op->kind != VM_SOP_GUARD && op->kind != VM_SOP_END)
            at[op->local] = q + 1;
    }
    for (uint32_t l = 0; l < n; l++) {
        vm_sinst *si = &rp->sinsts[l];
        const int port = dev_cpu_in_place((isa_op)si->op);
        if (port < 0 || (uint32_t)port >= si->ports)
            continue;
        si->hold_at = (uint8_t)port;
        const vm_sport *stack = &rp->sports[si->src_at + (uint32_t)port];
        for (uint32_t b = 0; b < stack->n && rp->keep; b++) { /* a loop's invariant: every iteration reads it */
            const uint32_t reg = rp->sregs[stack->first + b];
            si->hold |= reg < rp->n_args && rp->keep[reg];
        }
        for (uint32_t j = 0; j < n && !si->hold; j++) {
            if (j != l && at[j] && at[j] < at[l])
                continue;
            const vm_sinst *sj = &rp->sinsts[j];
            for (uint32_t k = 0; k < sj->ports && !si->hold; k++) {
                if (j == l && k == (uint32_t)port) /* (its own other inputs, not this one) */
                    continue;
                const vm_sport *pt = &rp->sports[sj->src_at + k];
                for (uint32_t a = 0; a < pt->n; a++)
                    for (uint32_t b = 0; b < stack->n; b++)
                        si->hold |= rp->sregs[pt->first + a] == rp->sregs[stack->first + b];
            }
        }
    }
    words_free(plan, at, n + 1);
    return true;
}

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
        uint32_t entered = ISA_NONE; /* a loop it enters */
        for (uint32_t i = rp->first; rp->seq && i < rp->end; i++) {
            const isa_inst *in = &p->insts[i];
            rp->seq = seq_op_ok(in, loop, tensors) && in->n_in + in->n_ctl <= 8;
            rp->calls |= in->op == ISA_CALL;
            if (loop && in->op == ISA_ENTER) {
                rp->loops |= entered != ISA_NONE && in->a != entered;
                entered = in->a;
            }
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
        guards_free(plan, rp, guard);
        mark_last(rp, VM_SOP_ENTER, VM_SOP_ENTER_LAST); /* a loop's last ENTER starts it */
        mark_last(rp, VM_SOP_CALL, VM_SOP_CALL_LAST);   /* a site's last CALL makes the call */
        if (!seq_call_steps(plan, rp) || !seq_switch_groups(plan, rp) || !seq_guard_steps(plan, rp) ||
            !seq_holds(plan, rp))
            return TFVM_ERR_NOMEM;
    }
    return TFVM_OK;
}
