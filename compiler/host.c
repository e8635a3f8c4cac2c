/* compiler/host.c — the channels of feed<T>("x") and fetch("y", v): their
 * table, the channels each function uses itself or through calls (whose
 * order tokens it passes on, ir.c), and the language's rules on them. */
#include <string.h>

#include "compiler.h"

uint32_t cc_chan_words(const cc *C) { return (C->n_chans + 63) / 64; }

static bool has_bit(const uint64_t *s, uint32_t c) { return s[c / 64] >> (c % 64) & 1; }

/* dst |= src; whether dst changed */
static bool or_into(uint64_t *dst, const uint64_t *src, uint32_t words)
{
    bool changed = false;
    for (uint32_t w = 0; w < words; w++) {
        changed |= (src[w] & ~dst[w]) != 0;
        dst[w] |= src[w];
    }
    return changed;
}

/* ---- Walking the checked AST ------------------------------------------------------------ */

typedef struct hwalk {
    cc *C;
    cc_func *fn;
    void (*visit)(struct hwalk *W, cc_expr *e);
    cc_func **callees;    /* calls_of: the functions fn calls */
    uint32_t n_callees, cap_callees;
} hwalk;

static void hw_block(hwalk *W, cc_ablock *b);

/* Every expression in textual order (a call before its arguments). */
static void hw_expr(hwalk *W, cc_expr *e)
{
    W->visit(W, e);
    switch (e->kind) {
    case CC_E_UNARY: hw_expr(W, e->u.op.a); break;
    case CC_E_BINARY:
        hw_expr(W, e->u.op.a);
        hw_expr(W, e->u.op.b);
        break;
    case CC_E_CALL:
        for (uint32_t k = 0; k < e->u.call.n_args; k++)
            hw_expr(W, e->u.call.args[k]);
        break;
    case CC_E_IF:
        hw_expr(W, e->u.cond.cond);
        hw_block(W, e->u.cond.then);
        hw_block(W, e->u.cond.els);
        break;
    case CC_E_WHILE:
        for (uint32_t k = 0; k < e->u.loop.n_vars; k++)
            hw_expr(W, e->u.loop.vars[k].init);
        hw_expr(W, e->u.loop.cond);
        hw_block(W, e->u.loop.body);
        break;
    case CC_E_TUPLE:
        for (uint32_t k = 0; k < e->u.tuple.n; k++)
            hw_expr(W, e->u.tuple.elems[k]);
        break;
    default: break;
    }
}

static void hw_block(hwalk *W, cc_ablock *b)
{
    for (uint32_t i = 0; i < b->n_lets; i++)
        hw_expr(W, b->lets[i].value);
    hw_expr(W, b->result);
}

/* ---- The channel table ---------------------------------------------------------------------- */

static uint32_t find_chan(const cc *C, const char *name)
{
    for (uint32_t c = 0; c < C->n_chans; c++)
        if (strcmp(C->chans[c].name, name) == 0)
            return c;
    return ISA_NONE;
}

/* Enters each feed and fetch in the table, in textual order, so that a
 * conflict is reported where the source contradicts what came before. */
static void enter_chan(hwalk *W, cc_expr *e)
{
    if (e->kind != CC_E_CALL || !e->u.call.host)
        return;
    cc *C = W->C;
    cc_host *h = e->u.call.host;
    uint32_t c = find_chan(C, h->name);
    if (c == ISA_NONE) {
        C->chans = cc_grow(C, C->chans, C->n_chans, &C->cap_chans, sizeof *C->chans);
        c = C->n_chans++;
        cc_chan *ch = &C->chans[c];
        size_t len = strlen(h->name);
        char order[ISA_MAX_CHAN + 8];
        ut_fmt(order, sizeof order, "%s.order", h->name);
        *ch = (cc_chan){.name = h->name, .fed = h->feed, .type = h->type, .pos = e->pos,
                        .order = cc_strndup(C, order, strlen(order))};
        ch->cname = (cc_cval){.dtype = TFVM_U8, .rank = 1, .dims = {(int64_t)len}, .nbytes = len, .data = h->name};
    }
    const cc_chan *ch = &C->chans[c];
    if (ch->fed != h->feed)
        cc_error(C, e->pos, TFVM_ERR_TYPE, "channel '%s' is both fed and fetched (%s at %u:%u)", h->name,
                 ch->fed ? "fed" : "fetched", ch->pos.line, ch->pos.col);
    if (h->feed && !cc_vtype_eq(&ch->type, &h->type)) {
        char here[96], there[96];
        cc_vtype_str(&h->type, here, sizeof here);
        cc_vtype_str(&ch->type, there, sizeof there);
        cc_error(C, e->pos, TFVM_ERR_TYPE, "channel '%s' is fed as %s here and as %s at %u:%u", h->name, here, there,
                 ch->pos.line, ch->pos.col);
    }
    h->chan = c;
}

/* ---- What each function uses ------------------------------------------------------------------ */

static void direct_uses(hwalk *W, cc_expr *e)
{
    if (e->kind != CC_E_CALL)
        return;
    if (e->u.call.host) {
        uint32_t c = e->u.call.host->chan;
        W->fn->chans[c / 64] |= 1ull << (c % 64);
    } else if (e->u.call.fn) {
        W->callees = cc_grow(W->C, W->callees, W->n_callees, &W->cap_callees, sizeof *W->callees);
        W->callees[W->n_callees++] = e->u.call.fn;
    }
}

typedef struct uses_walk {
    hwalk w;
    uint64_t *set;
} uses_walk;

static void add_uses(hwalk *W, cc_expr *e)
{
    uint64_t *set = ((uses_walk *)W)->set;
    if (e->kind != CC_E_CALL)
        return;
    if (e->u.call.host)
        set[e->u.call.host->chan / 64] |= 1ull << (e->u.call.host->chan % 64);
    else if (e->u.call.fn && e->u.call.fn->chans)
        or_into(set, e->u.call.fn->chans, cc_chan_words(W->C));
}

void cc_chan_uses(cc *C, const cc_expr *e, uint64_t *set)
{
    if (!C->n_chans)
        return;
    uses_walk U = {{C, NULL, add_uses, NULL, 0, 0}, set};
    hw_expr(&U.w, (cc_expr *)e);
}

void cc_chan_uses_block(cc *C, const cc_ablock *b, uint64_t *set)
{
    if (!C->n_chans)
        return;
    uses_walk U = {{C, NULL, add_uses, NULL, 0, 0}, set};
    hw_block(&U.w, (cc_ablock *)b);
}

/* A loop that assigns no variable from before it can end only through
 * what it is fed (a fetch changes nothing the loop reads). */
static void check_bare(hwalk *W, cc_expr *e)
{
    if (e->kind != CC_E_WHILE || !e->u.loop.bare)
        return;
    cc *C = W->C;
    uint32_t words = cc_chan_words(C);
    uint64_t *set = cc_array(C, words ? words : 1, sizeof *set);
    cc_chan_uses(C, e->u.loop.cond, set);
    cc_chan_uses_block(C, e->u.loop.body, set);
    bool any = false;
    for (uint32_t c = 0; c < C->n_chans && !any; c++)
        any = has_bit(set, c) && C->chans[c].fed;
    if (!any)
        cc_error(C, e->pos, TFVM_ERR_TYPE,
                 "this loop assigns no variable declared before it, so its condition can never change");
}

void cc_check_channels(cc *C)
{
    cc_module *m = &C->mod;
    for (uint32_t i = 0; i < m->n_funcs; i++) {
        hwalk W = {C, m->funcs[i], enter_chan, NULL, 0, 0};
        hw_block(&W, m->funcs[i]->body);
    }
    if (C->n_chans) {
        /* direct uses, then through calls until nothing changes (recursion:
         * a cycle settles once every member has the union of its uses) */
        uint32_t words = cc_chan_words(C);
        hwalk *calls = cc_array(C, m->n_funcs, sizeof *calls);
        for (uint32_t i = 0; i < m->n_funcs; i++) {
            m->funcs[i]->chans = cc_array(C, words, sizeof(uint64_t));
            calls[i] = (hwalk){C, m->funcs[i], direct_uses, NULL, 0, 0};
            hw_block(&calls[i], m->funcs[i]->body);
        }
        for (bool changed = true; changed;) {
            changed = false;
            for (uint32_t i = 0; i < m->n_funcs; i++)
                for (uint32_t k = 0; k < calls[i].n_callees; k++)
                    changed |= or_into(m->funcs[i]->chans, calls[i].callees[k]->chans, words);
        }
    }
    for (uint32_t i = 0; i < m->n_funcs; i++) {
        hwalk W = {C, m->funcs[i], check_bare, NULL, 0, 0};
        hw_block(&W, m->funcs[i]->body);
    }
}
