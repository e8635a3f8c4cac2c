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
#include <stdlib.h>
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
    uint32_t *in_group;    /* == gstamp: a SWITCH of the group being analysed */
    uint32_t gstamp;
    /* per site / frame: the CALL / ENTER instructions (CSR) */
    uint32_t *site_first, *site_calls;
    uint32_t *frame_first, *frame_enters;
    /* per site / frame: the RETURN / EXIT instructions, for each_consumer (a
     * scan of the program per CALL or ENTER made n loops in a row cubic) */
    uint32_t *ret_first, *site_rets;
    uint32_t *exit_first, *frame_exits;
} pr;

static bool is_member(const pr *P, uint32_t i) { return P->mark[i] == P->stamp; }

/* The instructions that receive the tokens member i sends (through `visit`). */
static void each_consumer(const pr *P, uint32_t i, void (*visit)(pr *, uint32_t, void *), void *ud, pr *Pm)
{
    const isa_program *p = P->p;
    const isa_inst *in = &p->insts[i];
    if (in->op == ISA_CALL) { /* its tokens go into the callee: what comes out is its site's RETURNs */
        for (uint32_t k = P->ret_first[in->a]; k < P->ret_first[in->a + 1]; k++)
            visit(Pm, P->site_rets[k], ud);
        return;
    }
    if (in->op == ISA_ENTER) { /* likewise the loop's EXITs */
        for (uint32_t k = P->exit_first[in->a]; k < P->exit_first[in->a + 1]; k++)
            visit(Pm, P->frame_exits[k], ud);
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

/* Producers of port `port` of instruction d, sorted, in out[] (at most max);
 * returns how many (max + 1: too many to compare). */
static size_t producers(const pr *P, uint32_t d, uint32_t port, cc_edge *out, size_t max)
{
    const isa_program *p = P->p;
    size_t n = 0;
    for (uint32_t k = P->prod_first[d]; k < P->prod_first[d + 1]; k++) {
        uint32_t src = P->prod_src[k];
        for (uint32_t e = p->insts[src].edge_first; e < p->insts[src].edge_first + p->insts[src].n_edges; e++) {
            const isa_edge *x = &p->edges[e];
            if (x->inst != d || x->port != port || x->out != P->prod_out[k])
                continue;
            if (n == max)
                return max + 1;
            out[n++] = (cc_edge){src, x->out, 0, 0};
        }
    }
    qsort(out, n, sizeof *out, cc_edge_cmp);
    /* an edge may be seen once per producer entry of its source: dedupe */
    size_t u = 0;
    for (size_t k = 0; k < n; k++)
        if (!u || cc_edge_cmp(&out[u - 1], &out[k]) != 0)
            out[u++] = out[k];
    return u;
}

/* Is every producer of member i inside D (or S:o)? */
static bool closed_inputs(const pr *P, uint32_t i, uint32_t o)
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
        if (P->in_group[src] == P->gstamp ? P->prod_out[k] != o : !is_member(P, src))
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

/* The SWITCHes of a group take one side together (one predicate at one
 * tag): output o of all of them, and what they feed, is analysed as one. */
static bool prunable(pr *P, const uint32_t *grp, uint32_t ng, uint32_t o)
{
    const isa_program *p = P->p;
    P->gstamp++;
    for (uint32_t g = 0; g < ng; g++)
        P->in_group[grp[g]] = P->gstamp;
    /* candidates: everything reachable from the group's output o */
    P->stamp++;
    uint32_t n = 0;
    for (uint32_t g = 0; g < ng; g++) {
        const isa_inst *sw = &p->insts[grp[g]];
        for (uint32_t e = sw->edge_first; e < sw->edge_first + sw->n_edges; e++)
            if (p->edges[e].out == o)
                push_new(P, p->edges[e].inst, &n);
    }
    for (uint32_t top = 0; top < n; top++)
        each_consumer(P, P->stack[top], push_new, &n, P);
    /* drop candidates with an input from outside until none is left: the
     * greatest closed set */
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t i = P->stack[k];
            if (is_member(P, i) && !closed_inputs(P, i, o)) {
                P->mark[i] = 0;
                changed = true;
            }
        }
    }
    /* the group's output o and every member send only into D or to MERGEs */
    leak_check lc = {true};
    for (uint32_t g = 0; g < ng && lc.ok; g++) {
        const isa_inst *sw = &p->insts[grp[g]];
        for (uint32_t e = sw->edge_first; e < sw->edge_first + sw->n_edges && lc.ok; e++)
            if (p->edges[e].out == o)
                check_dest(P, p->edges[e].inst, &lc);
    }
    for (uint32_t k = 0; k < n && lc.ok; k++)
        if (is_member(P, P->stack[k]))
            each_consumer(P, P->stack[k], check_dest, &lc, P);
    return lc.ok;
}

/* P->prod_*: the producers of each instruction, by destination (CSR). */
static void index_producers(cc *C, pr *P)
{
    const isa_program *p = P->p;
    uint32_t n = p->n_insts;
    P->prod_first = cc_array(C, (size_t)n + 1, sizeof *P->prod_first);
    for (uint32_t e = 0; e < p->n_edges; e++)
        P->prod_first[p->edges[e].inst + 1]++;
    for (uint32_t i = 0; i < n; i++)
        P->prod_first[i + 1] += P->prod_first[i];
    uint32_t *at = cc_array(C, (size_t)n + 1, sizeof *at);
    memcpy(at, P->prod_first, ((size_t)n + 1) * sizeof *at);
    P->prod_src = cc_array(C, p->n_edges ? p->n_edges : 1, sizeof *P->prod_src);
    P->prod_out = cc_array(C, p->n_edges ? p->n_edges : 1, sizeof *P->prod_out);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t e = p->insts[i].edge_first; e < p->insts[i].edge_first + p->insts[i].n_edges; e++) {
            uint32_t d = p->edges[e].inst;
            P->prod_src[at[d]] = i;
            P->prod_out[at[d]++] = p->edges[e].out;
        }
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
    index_producers(C, &P);
    /* CALLs by site, ENTERs by frame */
    uint32_t *site_key = cc_array(C, n, sizeof *site_key), *frame_key = cc_array(C, n, sizeof *frame_key);
    for (uint32_t i = 0; i < n; i++) {
        site_key[i] = p->insts[i].op == ISA_CALL ? p->insts[i].a : ISA_NONE;
        frame_key[i] = p->insts[i].op == ISA_ENTER ? p->insts[i].a : ISA_NONE;
    }
    P.site_calls = csr(C, p->n_sites, n, site_key, &P.site_first);
    P.frame_enters = csr(C, p->n_regions, n, frame_key, &P.frame_first);
    /* RETURNs by site, EXITs by frame (in program order, as the scan had them) */
    for (uint32_t i = 0; i < n; i++) {
        site_key[i] = p->insts[i].op == ISA_RETURN ? p->insts[i].a : ISA_NONE;
        frame_key[i] = p->insts[i].op == ISA_EXIT ? p->insts[i].a : ISA_NONE;
    }
    P.site_rets = csr(C, p->n_sites, n, site_key, &P.ret_first);
    P.frame_exits = csr(C, p->n_regions, n, frame_key, &P.exit_first);

    /* groups: the SWITCHes of one region whose predicates have the same
     * producers (an if's one SWITCH per value it routes); a BRANCH alone */
    P.in_group = cc_array(C, n, sizeof *P.in_group);
    uint8_t *done = cc_array(C, n, 1);
    uint32_t *grp = cc_array(C, n, sizeof *grp);
    enum { MAXP = 64 };
    cc_edge mine[MAXP], theirs[MAXP];
    for (uint32_t i = 0; i < n; i++) {
        if (!isa_is_switch(p->insts[i].op) || done[i])
            continue;
        uint32_t ng = 0;
        grp[ng++] = i;
        size_t np = p->insts[i].op == ISA_SWITCH ? producers(&P, i, 1, mine, MAXP) : MAXP + 1;
        if (np <= MAXP)
            for (uint32_t j = i + 1; j < n; j++)
                if (p->insts[j].op == ISA_SWITCH && !done[j] && p->insts[j].region == p->insts[i].region &&
                    producers(&P, j, 1, theirs, MAXP) == np && memcmp(mine, theirs, np * sizeof *mine) == 0)
                    grp[ng++] = j;
        uint16_t flags = (prunable(&P, grp, ng, 0) ? ISA_FLAG_PRUNE_FALSE : 0) |
                         (prunable(&P, grp, ng, 1) ? ISA_FLAG_PRUNE_TRUE : 0);
        for (uint32_t g = 0; g < ng; g++) {
            p->insts[grp[g]].flags |= flags;
            done[grp[g]] = 1;
        }
    }
}

/* ---- MERGE elision ----------------------------------------------------------------------
 * In a function or entry body whose SWITCHes are all pruned on both sides, no
 * dead token ever exists: the body is entered live, only a SWITCH makes dead
 * tokens, and a live SWITCH there sends one token to one side. An if's join
 * MERGE then receives exactly one token per tag, so its consumers can take
 * its producers directly (a port may have several producers when at most one
 * of them sends at any tag): one firing less per if. Loop regions keep their
 * MERGEs (iteration heads take a token from ENTER and from NEXTITER). */

int cc_edge_cmp(const void *a, const void *b)
{
    const cc_edge *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->out != y->out)
        return x->out < y->out ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    return x->port < y->port ? -1 : x->port > y->port;
}

/* The variable table without the dropped instructions: a variable on a
 * dropped one (an elided MERGE) moves to the producers of its inputs, which
 * now feed its consumers; numbered by map. */
static void rebuild_vars(cc *C, isa_program *p, const uint8_t *drop, const uint32_t *map)
{
    size_t cap = 0;
    for (uint32_t j = 0; j < p->n_vars; j++)
        cap += drop[p->vars[j].inst] ? p->n_edges : 1;
    isa_var *vars = ut_arena_array(&p->arena, cap + 1, sizeof *vars);
    if (!vars)
        cc_nomem(C);
    uint32_t n = 0;
    for (uint32_t j = 0; j < p->n_vars; j++) {
        const isa_var *v = &p->vars[j];
        if (!drop[v->inst]) {
            vars[n++] = (isa_var){v->name, map[v->inst], v->out};
            continue;
        }
        for (uint32_t s = 0; s < p->n_insts; s++)
            for (uint32_t e = p->insts[s].edge_first; !drop[s] && e < p->insts[s].edge_first + p->insts[s].n_edges; e++)
                if (p->edges[e].inst == v->inst)
                    vars[n++] = (isa_var){v->name, map[s], p->edges[e].out};
    }
    p->vars = vars;
    p->n_vars = n;
    isa_vars_sort(p);
}

/* Rebuilds p without the instructions marked in drop[], with the edges
 * all[0..m) (numbered as before; none may touch a dropped instruction), and
 * its constants renumbered in the order instructions first use them (what
 * the disassembler writes inline). */
static void rebuild(cc *C, isa_program *p, const uint8_t *drop, cc_edge *all, size_t m)
{
    uint32_t n = p->n_insts;
    uint32_t *map = cc_array(C, n, sizeof *map), nn = 0;
    for (uint32_t i = 0; i < n; i++)
        map[i] = drop[i] ? ISA_NONE : nn++;
    for (size_t k = 0; k < m; k++) {
        all[k].src = map[all[k].src];
        all[k].dst = map[all[k].dst];
    }
    qsort(all, m, sizeof *all, cc_edge_cmp);
    isa_inst *insts = ut_arena_array(&p->arena, (size_t)nn + 1, sizeof *insts);
    isa_edge *edges = ut_arena_array(&p->arena, m + 1, sizeof *edges);
    isa_const *consts = ut_arena_array(&p->arena, (size_t)p->n_consts + 1, sizeof *consts);
    uint32_t *cmap = cc_array(C, (size_t)p->n_consts + 1, sizeof *cmap), nc = 0;
    if (!insts || !edges || !consts)
        cc_nomem(C);
    for (uint32_t c = 0; c < p->n_consts; c++)
        cmap[c] = ISA_NONE;
    size_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (drop[i])
            continue;
        isa_inst *d = &insts[map[i]];
        *d = p->insts[i];
        uint32_t *use = d->op == ISA_CONST || isa_ops[d->op].attr == ISA_ATTR_CHAN ? &d->a
                        : d->op == ISA_BRANCH || isa_imm_port(d) >= 0                 ? &d->b
                                                                                      : NULL;
        if (use) {
            if (cmap[*use] == ISA_NONE)
                consts[cmap[*use] = nc++] = p->consts[*use];
            *use = cmap[*use];
        }
        d->edge_first = (uint32_t)k;
        while (k < m && all[k].src == map[i]) {
            edges[k] = (isa_edge){all[k].out, all[k].dst, all[k].port};
            k++;
        }
        d->n_edges = (uint32_t)k - d->edge_first;
    }
    for (uint32_t c = 0; c < p->n_consts; c++) /* unused ones keep their place after the rest */
        if (cmap[c] == ISA_NONE)
            consts[cmap[c] = nc++] = p->consts[c];
    rebuild_vars(C, p, drop, map);
    p->insts = insts;
    p->n_insts = nn;
    p->edges = edges;
    p->n_edges = (uint32_t)m;
    p->consts = consts;
}

void cc_elide_merges(cc *C, isa_program *p)
{
    uint32_t n = p->n_insts;
    if (!n)
        return;
    /* regions without dead tokens */
    uint8_t *clean = cc_array(C, p->n_regions, 1);
    for (uint32_t r = 0; r < p->n_regions; r++)
        clean[r] = p->regions[r].kind != ISA_REGION_LOOP;
    for (uint32_t i = 0; i < n; i++) {
        const isa_inst *in = &p->insts[i];
        uint16_t both = ISA_FLAG_PRUNE_FALSE | ISA_FLAG_PRUNE_TRUE;
        if (isa_is_switch(in->op) && (in->flags & both) != both)
            clean[in->region] = 0;
    }
    /* MERGEs to drop: in a clean region, index output unused */
    uint8_t *drop = cc_array(C, n, 1);
    uint32_t n_drop = 0;
    for (uint32_t i = 0; i < n; i++) {
        const isa_inst *in = &p->insts[i];
        if (in->op != ISA_MERGE || !clean[in->region] || in->n_ctl)
            continue;
        bool index_used = false;
        for (uint32_t e = in->edge_first; e < in->edge_first + in->n_edges; e++)
            index_used |= p->edges[e].out == 1;
        if (!index_used && in->n_edges) {
            drop[i] = 1;
            n_drop++;
        }
    }
    if (!n_drop)
        return;
    /* producers of each dropped MERGE (any port: a MERGE's ports are alike) */
    uint32_t *pf = cc_array(C, (size_t)n + 1, sizeof *pf);
    for (uint32_t e = 0; e < p->n_edges; e++)
        if (drop[p->edges[e].inst])
            pf[p->edges[e].inst + 1]++;
    for (uint32_t i = 0; i < n; i++)
        pf[i + 1] += pf[i];
    uint32_t *at = cc_array(C, (size_t)n + 1, sizeof *at);
    memcpy(at, pf, ((size_t)n + 1) * sizeof *at);
    cc_edge *prod = cc_array(C, pf[n] ? pf[n] : 1, sizeof *prod);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t e = p->insts[i].edge_first; e < p->insts[i].edge_first + p->insts[i].n_edges; e++)
            if (drop[p->edges[e].inst])
                prod[at[p->edges[e].inst]++] = (cc_edge){i, p->edges[e].out, 0, 0};
    /* a dropped MERGE fed by another dropped one: resolve to real producers
     * by expanding until none is left (joins nest; no cycles outside loops) */
    size_t cap = (size_t)p->n_edges * 2 + 16, m = 0;
    cc_edge *all = cc_array(C, cap, sizeof *all);
    size_t wcap = 64;
    cc_edge *work = cc_array(C, wcap, sizeof *work);
    for (uint32_t i = 0; i < n; i++) {
        if (drop[i])
            continue;
        const isa_inst *in = &p->insts[i];
        for (uint32_t e = in->edge_first; e < in->edge_first + in->n_edges; e++) {
            const isa_edge *x = &p->edges[e];
            size_t nw = 0;
            work[nw++] = (cc_edge){i, x->out, x->inst, x->port};
            while (nw) {
                cc_edge cur = work[--nw];
                if (!drop[cur.dst]) {
                    if (m == cap) {
                        size_t ncap = cap * 2;
                        cc_edge *g = cc_array(C, ncap, sizeof *g);
                        memcpy(g, all, m * sizeof *g);
                        all = g, cap = ncap;
                    }
                    all[m++] = cur;
                    continue;
                }
                /* cur feeds a dropped MERGE: it feeds that MERGE's consumers */
                const isa_inst *mi = &p->insts[cur.dst];
                for (uint32_t f = mi->edge_first; f < mi->edge_first + mi->n_edges; f++) {
                    if (nw == wcap) {
                        cc_edge *g = cc_array(C, wcap * 2, sizeof *g);
                        memcpy(g, work, nw * sizeof *g);
                        work = g, wcap *= 2;
                    }
                    work[nw++] = (cc_edge){cur.src, cur.out, p->edges[f].inst, p->edges[f].port};
                }
            }
        }
    }
    rebuild(C, p, drop, all, m);
}

/* ---- BRANCH ------------------------------------------------------------------------------
 * `if x <= 1` lowers to a comparison with a constant operand feeding the
 * predicate of a SWITCH whose data is x itself (the same producers). One
 * BRANCH LESS_EQUAL 1 does both: one firing instead of two, and no matching
 * of the predicate with the data. The comparison goes when every SWITCH it
 * feeds becomes a BRANCH. */

static isa_op reversed(isa_op op)
{
    switch (op) {
    case ISA_LESS: return ISA_GREATER;
    case ISA_LESS_EQUAL: return ISA_GREATER_EQUAL;
    case ISA_GREATER: return ISA_LESS;
    case ISA_GREATER_EQUAL: return ISA_LESS_EQUAL;
    default: return op; /* EQUAL, NOT_EQUAL */
    }
}

void cc_fuse_branches(cc *C, isa_program *p)
{
    uint32_t n = p->n_insts;
    if (!n)
        return;
    pr P = {.p = p};
    index_producers(C, &P);

    enum { MAXP = 64 };
    cc_edge want[MAXP], got[MAXP];
    uint8_t *drop = cc_array(C, n, 1), *fused = cc_array(C, n, 1);
    uint32_t n_fused = 0;
    for (uint32_t i = 0; i < n; i++) {
        const isa_inst *cmp = &p->insts[i];
        int imm = isa_imm_port(cmp);
        if (isa_ops[cmp->op].cls != ISA_CLASS_COMPARE || cmp->n_ctl || imm < 0 || !cmp->n_edges ||
            p->consts[cmp->b].rank != 0)
            continue;
        size_t nw = producers(&P, i, (uint32_t)(1 - imm), want, MAXP);
        if (nw > MAXP)
            continue;
        bool ok = true;
        for (uint32_t e = cmp->edge_first; e < cmp->edge_first + cmp->n_edges && ok; e++) {
            uint32_t s = p->edges[e].inst;
            const isa_inst *sw = &p->insts[s];
            ok = sw->op == ISA_SWITCH && !sw->n_ctl && p->edges[e].port == 1 &&
                 P.prod_first[s + 1] - P.prod_first[s] == nw + 1 && /* the data's producers and this one */
                 producers(&P, s, 1, got, MAXP) == 1 && producers(&P, s, 0, got, MAXP) == nw &&
                 memcmp(got, want, nw * sizeof *got) == 0;
        }
        if (!ok)
            continue;
        for (uint32_t e = cmp->edge_first; e < cmp->edge_first + cmp->n_edges; e++) {
            isa_inst *sw = &p->insts[p->edges[e].inst];
            sw->op = ISA_BRANCH;
            sw->n_in = 1;
            sw->a = imm == 1 ? cmp->op : reversed((isa_op)cmp->op);
            sw->b = cmp->b;
            fused[p->edges[e].inst] = 1;
        }
        drop[i] = 1;
        n_fused++;
    }
    if (!n_fused)
        return;
    size_t m = 0;
    cc_edge *all = cc_array(C, p->n_edges + 1, sizeof *all);
    for (uint32_t i = 0; i < n; i++) {
        if (drop[i])
            continue;
        for (uint32_t e = p->insts[i].edge_first; e < p->insts[i].edge_first + p->insts[i].n_edges; e++) {
            const isa_edge *x = &p->edges[e];
            if (!drop[x->inst])
                all[m++] = (cc_edge){i, x->out, x->inst, x->port};
        }
    }
    rebuild(C, p, drop, all, m);
}
