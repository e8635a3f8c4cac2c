/* compiler/prune.c — marks the SWITCH outputs whose dead tokens nobody needs
 * (ISA_FLAG_PRUNE_FALSE / _TRUE), so a branch that is not taken costs no
 * firing at all instead of a wave of dead tokens through its body.
 *
 * Output o of SWITCH S may go silent when the instructions it feeds form a
 * closed set D: every input of a member comes only from S:o or from other
 * members, and every token a member (or S:o) sends goes to a member or to a
 * MERGE (a join, which takes the live token of the other branch and never
 * waits for the dead one). Then, at a tag where o is not taken, no member
 * would have received anything but dead tokens, and nothing outside D can
 * tell the difference. A CALL belongs with the RETURNs of its site (they
 * fire dead when every CALL of the site does), an ENTER with the EXITs of
 * its frame; the callee's and the loop's own instructions are never reached. */
#include <string.h>

#include "compiler.h"

typedef struct pr {
    const isa_program *p;
    uint32_t *prod_first;  /* producers of instruction i: src[prod_first[i] .. prod_first[i+1]) */
    uint32_t *prod_src;
    uint32_t *prod_out;
    uint32_t *mark;        /* == stamp: a member of the current candidate set */
    uint32_t *stack;
    uint32_t stamp;
    /* per site / frame: the CALL / ENTER instructions (CSR) */
    uint32_t *site_first, *site_calls;
    uint32_t *frame_first, *frame_enters;
} pr;

static bool is_member(const pr *P, uint32_t i) { return P->mark[i] == P->stamp; }

/* The instructions that receive the tokens member i sends (through `visit`). */
static void each_consumer(const pr *P, uint32_t i, void (*visit)(pr *, uint32_t, void *), void *ud, pr *Pm)
{
    const isa_program *p = P->p;
    const isa_inst *in = &p->insts[i];
    if (in->op == ISA_CALL) { /* its tokens go into the callee: what comes out is its site's RETURNs */
        for (uint32_t k = 0; k < p->n_insts; k++)
            if (p->insts[k].op == ISA_RETURN && p->insts[k].a == in->a)
                visit(Pm, k, ud);
        return;
    }
    if (in->op == ISA_ENTER) { /* likewise the loop's EXITs */
        for (uint32_t k = 0; k < p->n_insts; k++)
            if (p->insts[k].op == ISA_EXIT && p->insts[k].a == in->a)
                visit(Pm, k, ud);
        return;
    }
    for (uint32_t e = in->edge_first; e < in->edge_first + in->n_edges; e++)
        visit(Pm, p->edges[e].inst, ud);
}

static void push_new(pr *P, uint32_t k, void *ud)
{
    uint32_t *n = ud;
    if (P->mark[k] != P->stamp) {
        P->mark[k] = P->stamp;
        P->stack[(*n)++] = k;
    }
}

/* Is every producer of member i inside D (or S:o)? */
static bool closed_inputs(const pr *P, uint32_t i, uint32_t s, uint32_t o)
{
    const isa_program *p = P->p;
    const isa_inst *in = &p->insts[i];
    /* A RETURN (EXIT) also fires, dead, when its site's CALLs (its frame's
     * ENTERs) do; if all of them are members, it receives nothing at all. */
    if (in->op == ISA_RETURN || in->op == ISA_EXIT) {
        const uint32_t *first = in->op == ISA_RETURN ? P->site_first : P->frame_first;
        const uint32_t *items = in->op == ISA_RETURN ? P->site_calls : P->frame_enters;
        bool all = true;
        for (uint32_t k = first[in->a]; k < first[in->a + 1] && all; k++)
            all = is_member(P, items[k]);
        if (all)
            return true;
    }
    if (in->op == ISA_ARG || (in->op == ISA_CONST && in->n_ctl == 0))
        return false; /* fires on its own */
    for (uint32_t k = P->prod_first[i]; k < P->prod_first[i + 1]; k++) {
        uint32_t src = P->prod_src[k];
        if (src == s ? P->prod_out[k] != o : !is_member(P, src))
            return false;
    }
    return true;
}

typedef struct leak_check {
    bool ok;
} leak_check;

static void check_dest(pr *P, uint32_t k, void *ud)
{
    leak_check *lc = ud;
    if (!is_member(P, k) && P->p->insts[k].op != ISA_MERGE)
        lc->ok = false;
}

static bool prunable(pr *P, uint32_t s, uint32_t o)
{
    const isa_program *p = P->p;
    /* candidates: everything reachable from S:o */
    P->stamp++;
    uint32_t n = 0;
    const isa_inst *sw = &p->insts[s];
    for (uint32_t e = sw->edge_first; e < sw->edge_first + sw->n_edges; e++)
        if (p->edges[e].out == o)
            push_new(P, p->edges[e].inst, &n);
    for (uint32_t top = 0; top < n; top++)
        each_consumer(P, P->stack[top], push_new, &n, P);
    /* drop candidates with an input from outside until none is left: the
     * greatest closed set */
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t i = P->stack[k];
            if (is_member(P, i) && !closed_inputs(P, i, s, o)) {
                P->mark[i] = 0;
                changed = true;
            }
        }
    }
    /* S:o and every member send only into D or to MERGEs */
    leak_check lc = {true};
    for (uint32_t e = sw->edge_first; e < sw->edge_first + sw->n_edges && lc.ok; e++)
        if (p->edges[e].out == o)
            check_dest(P, p->edges[e].inst, &lc);
    for (uint32_t k = 0; k < n && lc.ok; k++)
        if (is_member(P, P->stack[k]))
            each_consumer(P, P->stack[k], check_dest, &lc, P);
    return lc.ok;
}

static uint32_t *csr(cc *C, uint32_t n_keys, uint32_t n, const uint32_t *key, uint32_t **first_out)
{
    uint32_t *first = cc_array(C, (size_t)n_keys + 1, sizeof *first);
    uint32_t *items = cc_array(C, n ? n : 1, sizeof *items);
    for (uint32_t i = 0; i < n; i++)
        if (key[i] != ISA_NONE)
            first[key[i] + 1]++;
    for (uint32_t k = 0; k < n_keys; k++)
        first[k + 1] += first[k];
    uint32_t *at = cc_array(C, (size_t)n_keys + 1, sizeof *at);
    memcpy(at, first, ((size_t)n_keys + 1) * sizeof *at);
    for (uint32_t i = 0; i < n; i++)
        if (key[i] != ISA_NONE)
            items[at[key[i]]++] = i;
    *first_out = first;
    return items;
}

void cc_prune_switches(cc *C, isa_program *p)
{
    uint32_t n = p->n_insts;
    if (!n)
        return;
    pr P = {.p = p};
    P.mark = cc_array(C, n, sizeof *P.mark);
    P.stack = cc_array(C, n, sizeof *P.stack);
    /* producers, by destination */
    P.prod_first = cc_array(C, (size_t)n + 1, sizeof *P.prod_first);
    for (uint32_t e = 0; e < p->n_edges; e++)
        P.prod_first[p->edges[e].inst + 1]++;
    for (uint32_t i = 0; i < n; i++)
        P.prod_first[i + 1] += P.prod_first[i];
    uint32_t *at = cc_array(C, (size_t)n + 1, sizeof *at);
    memcpy(at, P.prod_first, ((size_t)n + 1) * sizeof *at);
    P.prod_src = cc_array(C, p->n_edges ? p->n_edges : 1, sizeof *P.prod_src);
    P.prod_out = cc_array(C, p->n_edges ? p->n_edges : 1, sizeof *P.prod_out);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t e = p->insts[i].edge_first; e < p->insts[i].edge_first + p->insts[i].n_edges; e++) {
            uint32_t d = p->edges[e].inst;
            P.prod_src[at[d]] = i;
            P.prod_out[at[d]++] = p->edges[e].out;
        }
    /* CALLs by site, ENTERs by frame */
    uint32_t *site_key = cc_array(C, n, sizeof *site_key), *frame_key = cc_array(C, n, sizeof *frame_key);
    for (uint32_t i = 0; i < n; i++) {
        site_key[i] = p->insts[i].op == ISA_CALL ? p->insts[i].a : ISA_NONE;
        frame_key[i] = p->insts[i].op == ISA_ENTER ? p->insts[i].a : ISA_NONE;
    }
    P.site_calls = csr(C, p->n_sites, n, site_key, &P.site_first);
    P.frame_enters = csr(C, p->n_regions, n, frame_key, &P.frame_first);

    for (uint32_t i = 0; i < n; i++) {
        if (p->insts[i].op != ISA_SWITCH)
            continue;
        if (prunable(&P, i, 0))
            p->insts[i].flags |= ISA_FLAG_PRUNE_FALSE;
        if (prunable(&P, i, 1))
            p->insts[i].flags |= ISA_FLAG_PRUNE_TRUE;
    }
}
