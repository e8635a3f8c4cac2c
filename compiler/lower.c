/* compiler/lower.c — lowers the structured IR to ISA instructions and emits a
 * verified isa_program: gates and SWITCHes for branches, ENTER/MERGE/SWITCH/
 * NEXTITER/EXIT for loops, CALL/RETURN per argument/result and call site
 * (Yaghi's transformation), then a last dead-instruction sweep and the
 * canonical ordering of regions, instructions, edges and sites.
 *
 * Liveness discipline (why the graph is correct): every block has a *gate*,
 * a token that is live exactly at the tags where the block runs. A value is
 * *strict* in block B when it is live exactly where B runs (dead elsewhere in
 * B's region); every value computed in B from at least one strict input is
 * strict. CALL, ENTER, NEXTITER and MERGE inputs, and CONST control inputs,
 * are always strict. An elementwise op needs only one strict input: a dead
 * input makes its output dead, so its other inputs may be *loose* (taken
 * from an enclosing block of the same region without a SWITCH); likewise the
 * data input of a SWITCH whose predicate is strict. This rests on every
 * instruction getting exactly one token per input at every tag of its region
 * (live or dead), which the strict inputs of ENTER and CALL guarantee: a loop
 * or callee is entered all-live or all-dead, never partly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "loader/loader.h"

#define LG_VIRT 0xFFFFu /* a placeholder: its port 0 lists the real producers */

typedef struct lg_ref {
    uint32_t inst, out;
} lg_ref;

typedef struct lg_port {
    uint32_t n, cap;
    lg_ref *refs;
} lg_port;

typedef struct lg_inst {
    uint16_t op, flags;
    uint32_t region;
    uint32_t a, b;
    uint32_t n_in, n_ctl;
    lg_port *ports;
    const char *name;       /* preferred name; made unique at emission */
    cc_pos pos;
    const cc_origin *origin; /* the model's node (lower.origin when made) */
    uint32_t site;          /* CALL/RETURN: printed site id */
    const cc_cval *cval;    /* CONST; a compute op's constant operand (flags ISA_FLAG_IMM_*) */
    const cc_cval *shape;   /* FEED of a declared shape: an i64 vector, the constant after cval */
    bool may_fail;          /* elementwise that can stop a run: never removed */
    bool param;             /* LG_VIRT of a function parameter */
    cc_ifn *callee;         /* CALL/RETURN */
    bool removed;
    uint32_t uses;
    uint32_t final;         /* emission index */
} lg_inst;

typedef struct lg_region {
    uint8_t kind;
    uint32_t parent;        /* LG region index or ISA_NONE */
    const char *name;
    uint32_t final;
} lg_region;

/* Memo tables: (kind, owner id, key) -> instruction. */
typedef struct memo_ent {
    uint64_t k1, k2;
    uint32_t val;
    bool used;
} memo_ent;

typedef struct memo {
    memo_ent *t;
    uint32_t n, cap;
} memo;

enum { M_SWITCH = 1, M_ENTER, M_CONST };

typedef struct lblk lblk;

typedef struct lif {        /* state of one If being lowered */
    cc_node *node;
    lg_ref cond;            /* strict in the If's block */
    uint32_t any_switch;    /* some SWITCH on cond, or ISA_NONE */
} lif;

typedef struct lloop {      /* state of one While being lowered */
    cc_node *node;
    uint32_t region;
    lblk *head;
    lg_ref pred;            /* LOOPCOND output */
    uint32_t *vars;         /* per loop variable: the virtual (or MERGE) instruction */
} lloop;

struct lblk {
    cc_blk *b;
    lblk *parent;
    uint8_t role;
    uint32_t region;
    bool has_gate;
    lg_ref gate;
    lif *ifs;               /* THEN/ELSE */
    lloop *loop;            /* HEAD/BODY */
    uint32_t id;
};

typedef struct home {      /* where an IR value lives after lowering */
    lg_ref ref;
    lblk *blk;
} home;

typedef struct pending_ret {
    uint32_t inst;
    cc_ifn *callee;
    uint32_t k;
} pending_ret;

typedef struct lower {
    cc *C;
    lg_inst *insts;
    uint32_t n_insts, cap_insts;
    lg_region *regions;
    uint32_t n_regions, cap_regions;
    memo memo;
    uint32_t next_blk_id;
    cc_ifn *fn;                 /* being lowered */
    bool opt;
    pending_ret *rets;
    uint32_t n_rets, cap_rets;
    uint32_t wrap_site;
    const cc_origin *origin;    /* of the IR node being lowered */
    uint32_t cap_vars;          /* of the variable table being gathered */
} lower;

/* ---- Instructions ---------------------------------------------------------------- */

static uint32_t new_inst(lower *L, uint16_t op, uint32_t region, uint32_t n_in, uint32_t n_ctl, const char *name,
                         cc_pos pos)
{
    cc *C = L->C;
    L->insts = cc_grow(C, L->insts, L->n_insts, &L->cap_insts, sizeof *L->insts);
    uint32_t i = L->n_insts++;
    lg_inst *in = &L->insts[i];
    memset(in, 0, sizeof *in);
    in->op = op;
    in->region = region;
    in->n_in = n_in;
    in->n_ctl = n_ctl;
    in->ports = n_in + n_ctl ? cc_array(C, n_in + n_ctl, sizeof(lg_port)) : NULL;
    in->name = name;
    in->pos = pos;
    in->origin = L->origin;
    return i;
}

static void add_ref(lower *L, uint32_t inst, uint32_t port, lg_ref r)
{
    lg_port *p = &L->insts[inst].ports[port];
    p->refs = cc_grow(L->C, p->refs, p->n, &p->cap, sizeof *p->refs);
    p->refs[p->n++] = r;
}

static lg_ref ref(uint32_t inst, uint32_t out) { return (lg_ref){inst, out}; }

static const char *fmt_name(lower *L, const char *fmt, ...) UT_PRINTF(2, 3);
static const char *fmt_name(lower *L, const char *fmt, ...)
{
    char buf[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return cc_strndup(L->C, buf, strlen(buf));
}

/* The preferred name of a producer, to derive the names of what routes it. */
static const char *inst_name(lower *L, lg_ref r)
{
    const char *n = L->insts[r.inst].name;
    return n ? n : "v";
}

/* ---- Memo ----------------------------------------------------------------------- */

static uint64_t mix(uint64_t a, uint64_t b)
{
    uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
    h ^= h >> 31;
    return h * 0xBF58476D1CE4E5B9ull;
}

static uint32_t *memo_slot(lower *L, uint64_t k1, uint64_t k2, bool insert)
{
    memo *m = &L->memo;
    if (insert && (m->n + 1) * 2 > m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 64;
        memo_ent *t = cc_array(L->C, cap, sizeof *t);
        for (uint32_t i = 0; i < m->cap; i++) {
            if (!m->t[i].used)
                continue;
            uint32_t j = (uint32_t)mix(m->t[i].k1, m->t[i].k2) & (cap - 1);
            while (t[j].used)
                j = (j + 1) & (cap - 1);
            t[j] = m->t[i];
        }
        m->t = t;
        m->cap = cap;
    }
    if (!m->cap)
        return NULL;
    uint32_t j = (uint32_t)mix(k1, k2) & (m->cap - 1);
    while (m->t[j].used) {
        if (m->t[j].k1 == k1 && m->t[j].k2 == k2)
            return &m->t[j].val;
        j = (j + 1) & (m->cap - 1);
    }
    if (!insert)
        return NULL;
    m->t[j] = (memo_ent){k1, k2, ISA_NONE, true};
    m->n++;
    return &m->t[j].val;
}

static uint64_t rkey(lg_ref r) { return (uint64_t)r.inst << 2 | r.out; }
static uint64_t okey(int kind, uint32_t id) { return (uint64_t)kind << 32 | id; }

/* ---- Regions --------------------------------------------------------------------- */

static bool region_name_taken(lower *L, const char *name)
{
    for (uint32_t i = 0; i < L->n_regions; i++)
        if (strcmp(L->regions[i].name, name) == 0)
            return true;
    for (uint32_t i = 0; i < L->C->n_ifns; i++)
        if (strcmp(L->C->ifns[i]->name, name) == 0)
            return true;
    return false;
}

static uint32_t new_region(lower *L, uint8_t kind, uint32_t parent, const char *name)
{
    L->regions = cc_grow(L->C, L->regions, L->n_regions, &L->cap_regions, sizeof *L->regions);
    L->regions[L->n_regions] = (lg_region){kind, parent, name, 0};
    return L->n_regions++;
}

/* ---- Blocks, gates, imports ----------------------------------------------------------- */

static lblk *new_lblk(lower *L, cc_blk *b, lblk *parent, uint32_t region)
{
    lblk *B = cc_alloc(L->C, sizeof *B);
    B->b = b;
    B->parent = parent;
    B->role = b->role;
    B->region = region;
    B->id = L->next_blk_id++;
    b->low = B;
    return B;
}

static lblk *region_top(lblk *B)
{
    while (B->role != CC_B_TOP && B->role != CC_B_HEAD)
        B = B->parent;
    return B;
}

static bool is_root_region(lower *L, uint32_t region) { return L->regions[region].kind == ISA_REGION_ROOT; }

static lg_ref gate(lower *L, lblk *B);
static lg_ref if_switch(lower *L, lblk *B, lg_ref data);
static lg_ref body_switch(lower *L, lloop *lp, lg_ref data, uint32_t side);

static bool cval_eq(const cc_cval *a, const cc_cval *b)
{
    return a->dtype == b->dtype && a->rank == b->rank && memcmp(a->dims, b->dims, sizeof a->dims) == 0 &&
           a->nbytes == b->nbytes && memcmp(a->data, b->data, a->nbytes) == 0;
}

static uint64_t cval_hash(const cc_cval *c)
{
    uint64_t h = (c->dtype * 31u + c->rank) ^ ut_hash_bytes(c->data, c->nbytes);
    for (int i = 0; i < c->rank; i++)
        h = mix(h, (uint64_t)c->dims[i]);
    return h;
}

static const char *const_name(lower *L, const cc_cval *c)
{
    if (c->rank)
        return "ct";
    switch (c->dtype) {
    case TFVM_BOOL: return *(const uint8_t *)c->data ? "ctrue" : "cfalse";
    case TFVM_I32: {
        int32_t v;
        memcpy(&v, c->data, 4);
        return v < 0 ? fmt_name(L, "cm%lld", -(long long)v) : fmt_name(L, "c%d", v);
    }
    case TFVM_I64: {
        int64_t v;
        memcpy(&v, c->data, 8);
        return v < 0 ? fmt_name(L, "cm%llu", 0ull - (unsigned long long)v) : fmt_name(L, "c%lld", (long long)v);
    }
    default: return "cf";
    }
}

/* A constant at block B. Strict: CONST with B's gate as control input (in a
 * root region's top block, no control input: it fires once per run). Loose:
 * the constant of B's region top, which for a loop body is hoisted out of
 * the loop through `ENTER const` (one firing per loop instance instead of
 * one per iteration). */
static lg_ref const_ref(lower *L, lblk *B, const cc_cval *c, cc_pos pos, bool strict)
{
    if (!strict && L->opt)
        B = region_top(B);
    /* A region top's constants are strict there by construction. */
    /* Hash collisions are resolved by comparing values; the memo keeps the
     * first constant with a given hash, a colliding one is not shared. */
    uint64_t h = cval_hash(c);
    uint32_t *slot = memo_slot(L, okey(M_CONST, B->id), h, false);
    if (slot && *slot != ISA_NONE && cval_eq(L->insts[*slot].cval, c))
        return ref(*slot, 0);
    uint32_t i;
    if (B->role == CC_B_HEAD && L->opt) {
        lg_ref w = const_ref(L, B->parent, c, pos, true);
        i = new_inst(L, ISA_ENTER, B->parent->region, 1, 0, fmt_name(L, "%s_in", inst_name(L, w)), pos);
        L->insts[i].a = B->region;
        L->insts[i].flags = ISA_FLAG_CONST;
        L->insts[i].cval = c;
        add_ref(L, i, 0, w);
    } else {
        bool free_const = B->role == CC_B_TOP && is_root_region(L, B->region);
        i = new_inst(L, ISA_CONST, B->region, 0, free_const ? 0 : 1, const_name(L, c), pos);
        L->insts[i].cval = c;
        if (!free_const)
            add_ref(L, i, 0, gate(L, B));
    }
    slot = memo_slot(L, okey(M_CONST, B->id), h, true);
    if (*slot == ISA_NONE)
        *slot = i;
    return ref(i, 0);
}

static home *homes(cc_node *n) { return n->low; }

/* FEED, FETCH: attribute a is the constant that names the channel. */
static bool chan_inst(const lg_inst *in) { return in->op != LG_VIRT && isa_ops[in->op].attr == ISA_ATTR_CHAN; }

/* Does the instruction put a constant in the program's table? (A const
 * ENTER keeps its value only to be found again.) */
static bool has_const(const lg_inst *in)
{
    return in->op == ISA_CONST || (in->op != LG_VIRT && (in->flags & ISA_FLAG_IMM_MASK)) || chan_inst(in);
}

/* Routes a value living at `h` (strict there) into block B. */
static lg_ref import_ref(lower *L, home h, lblk *B, bool strict)
{
    if (h.blk == B)
        return h.ref;
    if (!L->opt)
        strict = true;
    switch (B->role) {
    case CC_B_HEAD: {
        lg_ref w = import_ref(L, h, B->parent, true);
        uint32_t *slot = memo_slot(L, okey(M_ENTER, B->loop->node->id), rkey(w), true);
        if (*slot == ISA_NONE) {
            uint32_t i = new_inst(L, ISA_ENTER, B->parent->region, 1, 0, fmt_name(L, "%s_in", inst_name(L, w)),
                                  B->loop->node->pos);
            L->insts[i].a = B->region;
            L->insts[i].flags = ISA_FLAG_CONST;
            add_ref(L, i, 0, w);
            *slot = i;
        }
        return ref(*slot, 0);
    }
    case CC_B_BODY: {
        lg_ref w = import_ref(L, h, B->parent, false);
        return strict ? body_switch(L, B->loop, w, 1) : w;
    }
    case CC_B_THEN:
    case CC_B_ELSE: {
        /* A SWITCH's data may be loose (its predicate is strict), except in
         * a branch of an enclosing if: there a loose value would reach the
         * SWITCH at tags where that branch does not run, and the enclosing
         * if's untaken side could not go without dead tokens (prune.c). */
        bool nested = B->parent->role == CC_B_THEN || B->parent->role == CC_B_ELSE;
        lg_ref w = import_ref(L, h, B->parent, nested && strict);
        return strict ? if_switch(L, B, w) : w;
    }
    default:
        cc_error(L->C, (cc_pos){0, 0}, TFVM_ERR_INTERNAL, "internal error: value crosses a function boundary");
    }
}

static lg_ref import(lower *L, cc_irval v, lblk *B, bool strict)
{
    v = cc_resolve(v);
    if (v.n->kind == CC_N_CONST)
        return const_ref(L, B, &v.n->u.c, v.n->pos, strict);
    home *h = homes(v.n);
    if (!h || !h[v.k].blk)
        cc_error(L->C, v.n->pos, TFVM_ERR_INTERNAL, "internal error: value used before it is lowered");
    return import_ref(L, h[v.k], B, strict);
}

/* import_ref without creating anything: true (and *out) when every
 * instruction the route needs exists already. */
static bool find_ref(lower *L, home h, lblk *B, bool strict, lg_ref *out)
{
    if (h.blk == B) {
        *out = h.ref;
        return true;
    }
    lg_ref w;
    uint32_t *slot;
    switch (B->role) {
    case CC_B_HEAD:
        if (!find_ref(L, h, B->parent, true, &w))
            return false;
        slot = memo_slot(L, okey(M_ENTER, B->loop->node->id), rkey(w), false);
        if (!slot || *slot == ISA_NONE)
            return false;
        *out = ref(*slot, 0);
        return true;
    case CC_B_BODY:
    case CC_B_THEN:
    case CC_B_ELSE:
        if (!find_ref(L, h, B->parent, false, &w))
            return false;
        if (!strict) {
            *out = w;
            return true;
        }
        slot = memo_slot(L, okey(M_SWITCH, B->role == CC_B_BODY ? B->loop->node->id : B->ifs->node->id), rkey(w),
                         false);
        if (!slot || *slot == ISA_NONE)
            return false;
        *out = ref(*slot, B->role == CC_B_ELSE ? 0 : 1);
        return true;
    default: return false;
    }
}

static bool strict_exists(lower *L, cc_irval v, lblk *B)
{
    v = cc_resolve(v);
    lg_ref r;
    return v.n->kind != CC_N_CONST && homes(v.n) && find_ref(L, homes(v.n)[v.k], B, true, &r);
}

/* Is v strict in B without any routing? */
static bool local_in(cc_irval v, lblk *B)
{
    v = cc_resolve(v);
    if (v.n->kind == CC_N_CONST)
        return false;
    home *h = homes(v.n);
    return h && h[v.k].blk == B;
}

static lg_ref if_switch(lower *L, lblk *B, lg_ref data)
{
    lif *f = B->ifs;
    uint32_t *slot = memo_slot(L, okey(M_SWITCH, f->node->id), rkey(data), true);
    if (*slot == ISA_NONE) {
        uint32_t i = new_inst(L, ISA_SWITCH, B->parent->region, 2, 0, fmt_name(L, "%s_sw", inst_name(L, data)),
                              f->node->pos);
        add_ref(L, i, 0, data);
        add_ref(L, i, 1, f->cond);
        *slot = i;
        if (f->any_switch == ISA_NONE)
            f->any_switch = i;
    }
    return ref(*slot, B->role == CC_B_THEN ? 1 : 0);
}

static lg_ref body_switch(lower *L, lloop *lp, lg_ref data, uint32_t side)
{
    uint32_t *slot = memo_slot(L, okey(M_SWITCH, lp->node->id), rkey(data), true);
    if (*slot == ISA_NONE) {
        uint32_t i = new_inst(L, ISA_SWITCH, lp->region, 2, 0, fmt_name(L, "%s_sw", inst_name(L, data)),
                              lp->node->pos);
        add_ref(L, i, 0, data);
        add_ref(L, i, 1, lp->pred);
        *slot = i;
    }
    return ref(*slot, side);
}

static lg_ref gate(lower *L, lblk *B)
{
    if (B->has_gate)
        return B->gate;
    lg_ref g;
    switch (B->role) {
    case CC_B_TOP:
        if (is_root_region(L, B->region)) {
            if (L->fn->src->n_params && homes(L->fn->params[0])) {
                g = homes(L->fn->params[0])[0].ref; /* ARG 0 */
            } else {
                /* a CONST without control input fires once at the start */
                static const uint8_t yes = 1;
                cc_cval *c = cc_alloc(L->C, sizeof *c);
                *c = (cc_cval){.dtype = TFVM_BOOL, .nbytes = 1, .data = &yes};
                uint32_t i = new_inst(L, ISA_CONST, B->region, 0, 0, "start", (cc_pos){0, 0});
                L->insts[i].cval = c;
                g = ref(i, 0);
            }
        } else {
            g = ref(L->fn->pvirt[L->fn->gate_param], 0);
        }
        break;
    case CC_B_THEN:
    case CC_B_ELSE: {
        lif *f = B->ifs;
        if (f->any_switch != ISA_NONE)
            g = ref(f->any_switch, B->role == CC_B_THEN ? 1 : 0);
        else
            g = if_switch(L, B, gate(L, region_top(B)));
        break;
    }
    case CC_B_HEAD: g = ref(B->loop->vars[0], 0); break;
    default: g = body_switch(L, B->loop, ref(B->loop->vars[0], 0), 1); break;
    }
    B->has_gate = true;
    B->gate = g;
    return g;
}

/* ---- Nodes ----------------------------------------------------------------------------- */

static void set_home(lower *L, cc_node *n, uint32_t k, lg_ref r, lblk *B)
{
    if (!n->low)
        n->low = cc_array(L->C, n->n_out ? n->n_out : 1, sizeof(home));
    homes(n)[k] = (home){r, B};
}

static const char *lower_name(lower *L, uint16_t op)
{
    char buf[32];
    const char *s = isa_ops[op].name;
    size_t n = strlen(s);
    for (size_t i = 0; i <= n && i < sizeof buf; i++)
        buf[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
    buf[sizeof buf - 1] = '\0';
    return cc_strndup(L->C, buf, strlen(buf));
}

static void lower_block(lower *L, lblk *B);

/* FEED and FETCH: every input strict (the order token must arrive exactly
 * where the block runs, live or dead, like a CALL's); the channel's name is
 * the constant of attribute a, FEED's value type b. */
static void lower_host(lower *L, lblk *B, cc_node *n, const char *name)
{
    const cc_chan *ch = &L->C->chans[n->attr];
    uint32_t i = new_inst(L, n->op, B->region, n->n_in, 0, name, n->pos);
    L->insts[i].cval = &ch->cname;
    L->insts[i].may_fail = true;
    const cc_vtype *t = &n->types[0];
    if (n->op == ISA_FEED)
        L->insts[i].b = t->dtype | (t->tensor ? ISA_CHAN_TENSOR : 0);
    if (n->op == ISA_FEED && t->tensor && t->rank != ISA_RANK_ANY) { /* checked when fed (vm/io.c) */
        cc_cval *c = cc_alloc(L->C, sizeof *c);
        *c = (cc_cval){.dtype = TFVM_I64, .rank = 1, .dims = {t->rank}, .nbytes = t->rank * sizeof(int64_t),
                       .data = t->dims};
        L->insts[i].shape = c;
    }
    for (uint32_t k = 0; k < n->n_in; k++)
        add_ref(L, i, k, import(L, n->in[k], B, true));
    set_home(L, n, 0, ref(i, 0), B);
    set_home(L, n, 1, ref(i, 1), B);
}

static void lower_op(lower *L, lblk *B, cc_node *n)
{
    const char *name = n->names[0] ? n->names[0]
                                   : fmt_name(L, "%s_%u_%u", lower_name(L, n->op), n->pos.line, n->pos.col);
    if (isa_ops[n->op].cls == ISA_CLASS_HOST) {
        lower_host(L, B, n, name);
        return;
    }
    uint32_t i = new_inst(L, n->op, B->region, n->n_in, 0, name, n->pos);
    L->insts[i].a = n->attr;
    L->insts[i].may_fail = cc_op_may_fail(n);
    /* One strict input suffices (see the top of this file): prefer an input
     * already strict here, then one already routed here, else route the
     * first non-constant one. */
    int strict_k = -1;
    if (L->opt) {
        for (uint32_t k = 0; k < n->n_in && strict_k < 0; k++)
            if (local_in(n->in[k], B))
                strict_k = (int)k;
        for (uint32_t k = 0; k < n->n_in && strict_k < 0; k++)
            if (strict_exists(L, n->in[k], B))
                strict_k = (int)k;
        /* in a loop body, a variable of that loop: it is switched for its
         * next value anyway, where an invariant would need its own SWITCH */
        for (uint32_t k = 0; B->role == CC_B_BODY && k < n->n_in && strict_k < 0; k++) {
            cc_irval v = cc_resolve(n->in[k]);
            if (v.n->kind == CC_N_LVAR && v.n->owner == B->loop->node)
                strict_k = (int)k;
        }
        for (uint32_t k = 0; k < n->n_in && strict_k < 0; k++)
            if (cc_resolve(n->in[k]).n->kind != CC_N_CONST)
                strict_k = (int)k;
        if (strict_k < 0)
            strict_k = 0;
    }
    for (uint32_t k = 0; k < n->n_in; k++) {
        cc_irval v = cc_resolve(n->in[k]);
        /* A loose constant is live at every tag of the region: the same as a
         * constant operand, which costs no firing and no token. */
        if (L->opt && (int)k != strict_k && k < 3 && v.n->kind == CC_N_CONST && !(L->insts[i].flags & ISA_FLAG_IMM_MASK) &&
            isa_is_compute(isa_ops[n->op].cls) && isa_ops[n->op].n_in >= 2) {
            L->insts[i].flags |= (uint16_t)((k + 1) << ISA_FLAG_IMM_SHIFT);
            L->insts[i].cval = &v.n->u.c;
            continue;
        }
        add_ref(L, i, k, import(L, n->in[k], B, !L->opt || (int)k == strict_k));
    }
    set_home(L, n, 0, ref(i, 0), B);
}

/* Which parameters a call passes: the ones the callee reads, and always the
 * one that gates its body (every call site needs at least one CALL). */
static bool passes(lower *L, const cc_ifn *g, uint32_t k)
{
    return !L->opt || g->param_live[k] || k == g->gate_param;
}

static void emit_call(lower *L, lblk *B, cc_ifn *g, uint32_t site, const lg_ref *args, cc_pos pos,
                      home *outs)
{
    if (g->n_params == 0) {
        uint32_t i = new_inst(L, ISA_CALL, B->region, 1, 0, fmt_name(L, "%s_%u_call", g->name, site), pos);
        L->insts[i].site = site;
        L->insts[i].callee = g;
        add_ref(L, i, 0, gate(L, B));
        add_ref(L, g->pvirt[0], 0, ref(i, 0));
    }
    for (uint32_t k = 0; k < g->n_params; k++) {
        if (!passes(L, g, k))
            continue;
        uint32_t i = new_inst(L, ISA_CALL, B->region, 1, 0,
                              fmt_name(L, "%s_%u_%s", g->name, site, g->params[k]->names[0]), pos);
        L->insts[i].site = site;
        L->insts[i].callee = g;
        add_ref(L, i, 0, args[k]);
        add_ref(L, g->pvirt[k], 0, ref(i, 0));
    }
    for (uint32_t k = 0; k < g->n_results; k++) {
        /* a hidden result (an order token) is named after its channel: F_S_x_order_ret */
        bool hidden = k >= g->src->n_results;
        const char *rn = g->src->results[k].name;
        const char *name = hidden ? fmt_name(L, "%s_%u_%s_ret", g->name, site,
                                             L->C->chans[g->hidden[k - g->src->n_results]].order)
                           : g->src->n_results == 1 ? fmt_name(L, "%s_%u", g->name, site)
                           : rn                     ? fmt_name(L, "%s_%u_%s", g->name, site, rn)
                                                    : fmt_name(L, "%s_%u_r%u", g->name, site, k);
        uint32_t r = new_inst(L, ISA_RETURN, B->region, 1, 0, name, pos);
        L->insts[r].site = site;
        L->insts[r].callee = g;
        L->rets = cc_grow(L->C, L->rets, L->n_rets, &L->cap_rets, sizeof *L->rets);
        L->rets[L->n_rets++] = (pending_ret){r, g, k};
        outs[k] = (home){ref(r, 0), B};
    }
}

static void lower_call(lower *L, lblk *B, cc_node *n)
{
    cc_ifn *g = n->u.call.callee;
    lg_ref *args = cc_array(L->C, g->n_params + 1, sizeof *args);
    for (uint32_t k = 0; k < g->n_params; k++)
        if (passes(L, g, k))
            args[k] = import(L, n->in[k], B, true);
    home *outs = cc_array(L->C, g->n_results + 1, sizeof *outs);
    emit_call(L, B, g, n->u.call.site, args, n->pos, outs);
    for (uint32_t k = 0; k < n->n_out; k++)
        set_home(L, n, k, outs[k].ref, B);
}

static void lower_if(lower *L, lblk *B, cc_node *n)
{
    lif *f = cc_alloc(L->C, sizeof *f);
    f->node = n;
    f->cond = import(L, n->in[0], B, true);
    f->any_switch = ISA_NONE;
    lblk *T = new_lblk(L, n->u.cond.then, B, B->region);
    lblk *E = new_lblk(L, n->u.cond.els, B, B->region);
    T->ifs = E->ifs = f;
    lower_block(L, T);
    lower_block(L, E);
    for (uint32_t k = 0; k < n->n_out; k++) {
        if (n->olive && !n->olive[k])
            continue; /* nobody reads this result */
        lg_ref a = import(L, T->b->res[k], T, true);
        lg_ref b = import(L, E->b->res[k], E, true);
        const char *name = n->names[k] ? n->names[k] : fmt_name(L, "if_%u_%u", n->pos.line, n->pos.col);
        uint32_t m = new_inst(L, ISA_MERGE, B->region, 2, 0, name, n->pos);
        add_ref(L, m, 0, a);
        add_ref(L, m, 1, b);
        set_home(L, n, k, ref(m, 0), B);
    }
}

static const char *loop_name(lower *L, cc_node *n)
{
    if (n->u.loop.label && !region_name_taken(L, n->u.loop.label))
        return n->u.loop.label;
    /* `for i in ...`: after its function and counter, main_for_i (then
     * main_for_i_2, ... for more loops of the same counter) */
    for (uint32_t k = 1; n->u.loop.for_var; k++) {
        const char *name = k == 1 ? fmt_name(L, "%s_for_%s", L->fn->name, n->u.loop.for_var)
                                  : fmt_name(L, "%s_for_%s_%u", L->fn->name, n->u.loop.for_var, k);
        if (!region_name_taken(L, name))
            return name;
    }
    for (;;) {
        const char *name = fmt_name(L, "%s_while%u", L->fn->name, ++L->fn->n_loops);
        if (!region_name_taken(L, name))
            return name;
    }
}

static void lower_while(lower *L, lblk *B, cc_node *n)
{
    cc *C = L->C;
    uint32_t nv = n->n_in;
    uint32_t region = new_region(L, ISA_REGION_LOOP, B->region, loop_name(L, n));
    lloop *lp = cc_alloc(C, sizeof *lp);
    lp->node = n;
    lp->region = region;
    lp->vars = cc_array(C, nv, sizeof *lp->vars);
    lblk *H = new_lblk(L, n->u.loop.head, B, region);
    H->loop = lp;
    lp->head = H;
    for (uint32_t k = 0; k < nv; k++) {
        cc_node *lv = n->u.loop.lvars[k];
        lp->vars[k] = ISA_NONE;
        if (n->olive && !n->olive[k])
            continue; /* a variable nothing reads */
        lg_ref init = import(L, n->in[k], B, true);
        uint32_t e = new_inst(L, ISA_ENTER, B->region, 1, 0, fmt_name(L, "%s_enter", lv->names[0]), lv->pos);
        L->insts[e].a = region;
        L->insts[e].b = n->u.loop.parallel;
        add_ref(L, e, 0, init);
        /* ENTER and NEXTITER tokens never share a tag: with optimization the
         * variable's readers take both directly (no MERGE to fire). */
        uint32_t v = L->opt ? new_inst(L, LG_VIRT, region, 1, 0, lv->names[0], lv->pos)
                            : new_inst(L, ISA_MERGE, region, 2, 0, lv->names[0], lv->pos);
        add_ref(L, v, 0, ref(e, 0));
        lp->vars[k] = v;
        set_home(L, lv, 0, ref(v, 0), H);
    }
    lower_block(L, H);
    lg_ref pred = import(L, H->b->res[0], H, true);
    uint32_t lc = new_inst(L, ISA_LOOPCOND, region, 1, 0, fmt_name(L, "%s_cond", L->regions[region].name), n->pos);
    add_ref(L, lc, 0, pred);
    lp->pred = ref(lc, 0);
    lblk *Bd = new_lblk(L, n->u.loop.body, H, region);
    Bd->loop = lp;
    lower_block(L, Bd);
    for (uint32_t k = 0; k < nv; k++) {
        cc_node *lv = n->u.loop.lvars[k];
        if (lp->vars[k] == ISA_NONE)
            continue;
        lg_ref next = import(L, Bd->b->res[k], Bd, true);
        uint32_t ni = new_inst(L, ISA_NEXTITER, region, 1, 0, fmt_name(L, "%s_next", lv->names[0]), lv->pos);
        add_ref(L, ni, 0, next);
        add_ref(L, lp->vars[k], L->opt ? 0 : 1, ref(ni, 0));
    }
    for (uint32_t k = 0; k < nv; k++) {
        cc_node *lv = n->u.loop.lvars[k];
        if (lp->vars[k] == ISA_NONE)
            continue;
        cc_irval ex = cc_resolve(cc_loop_exit(n, k));
        lg_ref sw = body_switch(L, lp, ex.n == lv ? ref(lp->vars[k], 0) : import(L, ex, H, true), 0);
        uint32_t x = new_inst(L, ISA_EXIT, region, 1, 0, fmt_name(L, "%s_out", lv->names[0]), n->pos);
        L->insts[x].a = region;
        add_ref(L, x, 0, sw);
        set_home(L, n, k, ref(x, 0), B);
    }
}

static void lower_block(lower *L, lblk *B)
{
    const cc_origin *outer = L->origin;
    for (cc_node *n = B->b->first; n; n = n->next) {
        L->origin = n->origin;
        switch (n->kind) {
        case CC_N_OP: lower_op(L, B, n); break;
        case CC_N_CALL: lower_call(L, B, n); break;
        case CC_N_IF: lower_if(L, B, n); break;
        case CC_N_WHILE: lower_while(L, B, n); break;
        default: break; /* parameters, loop variables: placed by their owner; constants: on use */
        }
    }
    L->origin = outer;
}

/* ---- Functions ---------------------------------------------------------------------------- */

/* The value an entry's order tokens start with. */
static const cc_cval *token_zero(lower *L)
{
    static const int32_t zero = 0;
    cc_cval *c = cc_alloc(L->C, sizeof *c);
    *c = (cc_cval){.dtype = TFVM_I32, .nbytes = sizeof zero, .data = &zero};
    return c;
}

static void lower_function(lower *L, cc_ifn *fn)
{
    L->fn = fn;
    lblk *B = new_lblk(L, fn->top, NULL, fn->region);
    bool root = is_root_region(L, fn->region);
    for (uint32_t k = 0; k < fn->n_params; k++) {
        cc_node *p = fn->params[k];
        if (root && k >= fn->src->n_params) {
            /* an order token of an entry no longer called: it starts at 0 */
            set_home(L, p, 0, const_ref(L, B, token_zero(L), p->pos, true), B);
        } else if (root) {
            uint32_t a = new_inst(L, ISA_ARG, fn->region, 0, 0, p->names[0], p->pos);
            L->insts[a].a = k;
            set_home(L, p, 0, ref(a, 0), B);
        } else {
            set_home(L, p, 0, ref(fn->pvirt[k], 0), B);
        }
    }
    lower_block(L, B);
    lg_ref *res = cc_array(L->C, fn->n_results, sizeof *res);
    for (uint32_t k = 0; k < fn->n_results; k++) {
        res[k] = import(L, B->b->res[k], B, true);
        if (root && k < fn->src->n_results) { /* an entry's final order tokens are dropped */
            uint32_t r = new_inst(L, ISA_RESULT, fn->region, 1, 0, NULL, fn->src->pos);
            L->insts[r].a = k;
            add_ref(L, r, 0, res[k]);
        }
    }
    fn->res = res;
}

/* The entry is also called from the program: its body is a FUNC region and
 * the ROOT region only passes the arguments in and the results out. */
static void lower_wrapper(lower *L, cc_ifn *fn, uint32_t region)
{
    cc *C = L->C;
    lg_ref *args = cc_array(C, fn->n_params + 1, sizeof *args);
    lblk *B = cc_alloc(C, sizeof *B);
    B->role = CC_B_TOP;
    B->region = region;
    B->id = L->next_blk_id++;
    L->fn = fn;
    for (uint32_t k = 0; k < fn->n_params; k++) {
        if (k >= fn->src->n_params) { /* an order token: the run's start at 0 */
            args[k] = const_ref(L, B, token_zero(L), fn->src->pos, true);
            continue;
        }
        uint32_t a = new_inst(L, ISA_ARG, region, 0, 0, fn->params[k]->names[0], fn->params[k]->pos);
        L->insts[a].a = k;
        args[k] = ref(a, 0);
        if (k == 0) {
            B->has_gate = true;
            B->gate = args[0];
        }
    }
    home *outs = cc_array(C, fn->n_results + 1, sizeof *outs);
    emit_call(L, B, fn, L->wrap_site, args, fn->src->pos, outs);
    for (uint32_t k = 0; k < fn->src->n_results; k++) {
        uint32_t r = new_inst(L, ISA_RESULT, region, 1, 0, NULL, fn->src->pos);
        L->insts[r].a = k;
        add_ref(L, r, 0, outs[k].ref);
    }
}

/* ---- Last sweep: instructions nobody reads ------------------------------------------------ */

static bool removable(const lg_inst *in)
{
    if (in->op == LG_VIRT)
        return true;
    switch ((isa_op)in->op) {
    case ISA_CONST:
    case ISA_SWITCH:
    case ISA_MERGE:
    case ISA_IDENTITY:
    case ISA_LOOPCOND:
    case ISA_EXIT:
    case ISA_RETURN: return true;
    case ISA_ENTER: return (in->flags & ISA_FLAG_CONST) != 0;
    default: break;
    }
    isa_class c = isa_ops[in->op].cls;
    return (c == ISA_CLASS_BINARY || c == ISA_CLASS_UNARY || c == ISA_CLASS_COMPARE || c == ISA_CLASS_LOGIC ||
            c == ISA_CLASS_SELECT) &&
           !in->may_fail;
}

static void sweep(lower *L)
{
    cc *C = L->C;
    for (uint32_t i = 0; i < L->n_insts; i++) {
        const lg_inst *in = &L->insts[i];
        for (uint32_t p = 0; p < in->n_in + in->n_ctl; p++)
            for (uint32_t r = 0; r < in->ports[p].n; r++)
                L->insts[in->ports[p].refs[r].inst].uses++;
    }
    uint32_t *work = cc_array(C, L->n_insts + 1, sizeof *work), n = 0;
    for (uint32_t i = 0; i < L->n_insts; i++)
        if (!L->insts[i].uses && removable(&L->insts[i]))
            work[n++] = i;
    while (n) {
        uint32_t i = work[--n];
        lg_inst *in = &L->insts[i];
        if (in->removed)
            continue;
        in->removed = true;
        for (uint32_t p = 0; p < in->n_in + in->n_ctl; p++)
            for (uint32_t r = 0; r < in->ports[p].n; r++) {
                lg_inst *s = &L->insts[in->ports[p].refs[r].inst];
                if (--s->uses == 0 && removable(s) && !s->removed)
                    work[n++] = (uint32_t)(s - L->insts);
            }
    }
}

/* ---- Emission ------------------------------------------------------------------------------ */


typedef struct emitter {
    lower *L;
    cc_edge *edges;
    uint32_t n_edges, cap_edges;
} emitter;

static void add_edges(emitter *E, lg_ref r, uint32_t dst, uint32_t port, uint32_t depth)
{
    lower *L = E->L;
    const lg_inst *s = &L->insts[r.inst];
    if (s->op == LG_VIRT) {
        if (depth > 4)
            cc_error(L->C, s->pos, TFVM_ERR_INTERNAL, "internal error: placeholder cycle");
        for (uint32_t k = 0; k < s->ports[0].n; k++)
            add_edges(E, s->ports[0].refs[k], dst, port, depth + 1);
        return;
    }
    if (s->removed)
        cc_error(L->C, s->pos, TFVM_ERR_INTERNAL, "internal error: a removed instruction is still read");
    E->edges = cc_grow(L->C, E->edges, E->n_edges, &E->cap_edges, sizeof *E->edges);
    E->edges[E->n_edges++] = (cc_edge){s->final, r.out, dst, port};
}

/* Numbers region r and then its loops, depth first, in creation order. */
static void order_regions(lower *L, uint32_t r, const uint32_t *first_child, const uint32_t *next_sibling,
                          uint32_t *next)
{
    L->regions[r].final = (*next)++;
    for (uint32_t c = first_child[r]; c != ISA_NONE; c = next_sibling[c])
        order_regions(L, c, first_child, next_sibling, next);
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Makes instruction names unique within their region: name, name_1, ...
 * Names from imported models ("dense/BiasAdd:0", "input.1") become
 * identifiers first ('_' for every other character), as .tfasm labels must
 * be. Each base name keeps the next suffix to try, so n instructions named
 * alike (every Add of an ONNX model) cost n tries, not n^2/2. */
static const char *unique_name(lower *L, uint32_t region, const char *name)
{
    char base[112], cand[128];
    ut_fmt(base, sizeof base, "%s%s", name[0] >= '0' && name[0] <= '9' ? "_" : "", name);
    for (char *c = base; *c; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')))
            *c = '_';
    uint32_t *next = memo_slot(L, okey(8, region) ^ ((uint64_t)1 << 60), name_hash(base), true);
    uint32_t k = *next == ISA_NONE ? 0 : *next;
    for (;; k++) {
        if (k)
            snprintf(cand, sizeof cand, "%s_%u", base, k);
        else
            memcpy(cand, base, strlen(base) + 1);
        /* taken is by the candidate's own hash: "a_1" made from "a" must
         * collide with an "a_1" given as is (or sanitized from "a:1") */
        uint32_t *slot = memo_slot(L, okey(7, region) ^ ((uint64_t)1 << 60), name_hash(cand), true);
        if (*slot == ISA_NONE) {
            *slot = 0;
            break;
        }
    }
    /* the insertion above may have moved the table: look the counter up again */
    *memo_slot(L, okey(8, region) ^ ((uint64_t)1 << 60), name_hash(base), true) = k + 1;
    return cc_strndup(L->C, cand, strlen(cand));
}

/* -O0: a parameter is an explicit MERGE with one input per CALL that feeds
 * it (with optimization its readers take the CALLs directly). */
static void materialize_params(lower *L)
{
    for (uint32_t i = 0; i < L->n_insts; i++) {
        lg_inst *in = &L->insts[i];
        if (in->op != LG_VIRT || !in->param || in->ports[0].n == 0)
            continue;
        lg_port p = in->ports[0];
        in->op = ISA_MERGE;
        in->n_in = p.n;
        in->ports = cc_array(L->C, p.n, sizeof(lg_port));
        for (uint32_t k = 0; k < p.n; k++)
            add_ref(L, i, k, p.refs[k]);
    }
}

/* Constant c into the program's table entry k (its data copied into ar). */
static void emit_const(cc *C, ut_arena *ar, isa_const *k, const cc_cval *c)
{
    k->dtype = c->dtype;
    k->rank = c->rank;
    memcpy(k->dims, c->dims, sizeof k->dims);
    k->nbytes = c->nbytes;
    void *data = ut_arena_alloc(ar, c->nbytes ? c->nbytes : 1);
    if (!data)
        cc_nomem(C);
    memcpy(data, c->data, c->nbytes);
    k->data = data;
}

/* A name the variable table can keep: 1 to 127 printable characters
 * without spaces or '"' (what .tfasm quotes), not a compiler's own
 * (an order token, "x.order", is the only dotted .tfg name). */
static bool var_name_ok(const cc *C, const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 127 || !isa_source_ok(s))
        return false;
    for (uint32_t c = 0; c < C->n_chans; c++)
        if (strcmp(C->chans[c].order, s) == 0)
            return false;
    return true;
}

/* The instructions that carry r once placeholders are resolved: r itself,
 * or each producer a placeholder stands for (a loop variable's ENTER and
 * NEXTITER, a parameter's CALLs); removed ones carry nothing. */
static void add_var_refs(lower *L, isa_program *out, const char *name, lg_ref r, uint32_t depth)
{
    const lg_inst *s = &L->insts[r.inst];
    if (s->op == LG_VIRT) {
        for (uint32_t k = 0; depth < 4 && k < s->ports[0].n; k++)
            add_var_refs(L, out, name, s->ports[0].refs[k], depth + 1);
        return;
    }
    if (s->removed)
        return;
    out->vars = cc_grow(L->C, out->vars, out->n_vars, &L->cap_vars, sizeof *out->vars);
    out->vars[out->n_vars++] = (isa_var){name, s->final, r.out};
}

/* The variable table: each source variable whose value was lowered (a
 * folded or unused one has no home), at the outputs that carry it. */
static void emit_vars(lower *L, isa_program *out)
{
    cc *C = L->C;
    for (uint32_t j = 0; j < C->n_vars; j++) {
        cc_irval v = cc_resolve(C->vars[j].v);
        if (!v.n || !v.n->low || !homes(v.n)[v.k].blk || !var_name_ok(C, C->vars[j].name))
            continue;
        add_var_refs(L, out, C->vars[j].name, homes(v.n)[v.k].ref, 0);
    }
    isa_var *vars = out->vars;
    out->vars = out->n_vars ? ut_arena_array(&out->arena, out->n_vars, sizeof *vars) : NULL;
    if (out->n_vars && !out->vars)
        cc_nomem(C);
    for (uint32_t j = 0; j < out->n_vars; j++)
        if (!(out->vars[j] = vars[j], out->vars[j].name = ut_arena_strdup(&out->arena, vars[j].name)))
            cc_nomem(C);
    isa_vars_sort(out);
}

static void emit(lower *L, isa_program *out)
{
    cc *C = L->C;
    if (!L->opt)
        materialize_params(L);
    /* regions: each ROOT/FUNC followed by its loops, depth first */
    uint32_t nr = L->n_regions;
    uint32_t *first_child = cc_array(C, nr, sizeof(uint32_t)), *next_sibling = cc_array(C, nr, sizeof(uint32_t));
    for (uint32_t r = 0; r < nr; r++)
        first_child[r] = next_sibling[r] = ISA_NONE;
    for (uint32_t r = nr; r-- > 0;) /* prepend in reverse: lists in creation order */
        if (L->regions[r].kind == ISA_REGION_LOOP) {
            next_sibling[r] = first_child[L->regions[r].parent];
            first_child[L->regions[r].parent] = r;
        }
    uint32_t next = 0;
    for (uint32_t r = 0; r < nr; r++)
        if (L->regions[r].kind != ISA_REGION_LOOP)
            order_regions(L, r, first_child, next_sibling, &next);
    /* instructions: by final region, then creation order (a counting sort) */
    uint32_t *start = cc_array(C, nr + 1, sizeof *start);
    uint32_t n_live = 0;
    for (uint32_t i = 0; i < L->n_insts; i++) {
        const lg_inst *in = &L->insts[i];
        if (!in->removed && in->op != LG_VIRT) {
            start[L->regions[in->region].final + 1]++;
            n_live++;
        }
    }
    for (uint32_t r = 0; r < nr; r++)
        start[r + 1] += start[r];
    uint32_t *order = cc_array(C, n_live + 1, sizeof *order);
    for (uint32_t i = 0; i < L->n_insts; i++) {
        lg_inst *in = &L->insts[i];
        if (!in->removed && in->op != LG_VIRT) {
            in->final = start[L->regions[in->region].final]++;
            order[in->final] = i;
        }
    }
    /* sites */
    uint32_t *ids = cc_array(C, n_live + 1, sizeof *ids), n_ids = 0;
    for (uint32_t j = 0; j < n_live; j++)
        if (L->insts[order[j]].op == ISA_CALL)
            ids[n_ids++] = L->insts[order[j]].site;
    qsort(ids, n_ids, sizeof *ids, u32_cmp);
    uint32_t n_sites = 0;
    for (uint32_t j = 0; j < n_ids; j++)
        if (!n_sites || ids[n_sites - 1] != ids[j])
            ids[n_sites++] = ids[j];
    /* edges */
    emitter E = {L, NULL, 0, 0};
    for (uint32_t j = 0; j < n_live; j++) {
        const lg_inst *in = &L->insts[order[j]];
        for (uint32_t p = 0; p < in->n_in + in->n_ctl; p++)
            for (uint32_t r = 0; r < in->ports[p].n; r++)
                add_edges(&E, in->ports[p].refs[r], j, p, 0);
    }
    if (E.n_edges)
        qsort(E.edges, E.n_edges, sizeof *E.edges, cc_edge_cmp);
    for (uint32_t k = 1; k < E.n_edges; k++)
        if (cc_edge_cmp(&E.edges[k - 1], &E.edges[k]) == 0)
            cc_error(C, (cc_pos){0, 0}, TFVM_ERR_INTERNAL, "internal error: duplicate edge");

    ut_arena *ar = &out->arena;
#define OUT_ARRAY(ptr, count) \
    do { \
        (ptr) = ut_arena_array(ar, (size_t)(count) + 1, sizeof *(ptr)); \
        if (!(ptr)) \
            cc_nomem(C); \
    } while (0)
    out->name = ut_arena_strdup(ar, C->name);
    if (!out->name)
        cc_nomem(C);
    out->n_regions = L->n_regions;
    OUT_ARRAY(out->regions, L->n_regions);
    for (uint32_t r = 0; r < L->n_regions; r++) {
        const lg_region *g = &L->regions[r];
        isa_region *d = &out->regions[g->final];
        d->kind = g->kind;
        d->parent = g->parent == ISA_NONE ? ISA_NONE : L->regions[g->parent].final;
        d->name = ut_arena_strdup(ar, g->name);
        if (!d->name)
            cc_nomem(C);
    }
    out->n_sites = n_sites;
    OUT_ARRAY(out->sites, n_sites);
    for (uint32_t s = 0; s < n_sites; s++)
        out->sites[s].id = ids[s];
    out->n_insts = n_live;
    OUT_ARRAY(out->insts, n_live);
    uint32_t n_consts = 0;
    for (uint32_t j = 0; j < n_live; j++)
        n_consts += has_const(&L->insts[order[j]]) + (L->insts[order[j]].shape != NULL);
    const cc_func *ef = C->entry_ifn->src;
    for (uint32_t k = 0; k < ef->n_params; k++) /* parameters' defaults: after the instructions' */
        n_consts += ef->params[k].dflt != NULL;
    out->n_consts = n_consts;
    OUT_ARRAY(out->consts, n_consts);
    out->n_edges = E.n_edges;
    OUT_ARRAY(out->edges, E.n_edges);
    uint32_t ci = 0, ei = 0;
    L->memo = (memo){0}; /* reused for the name table */
    for (uint32_t j = 0; j < n_live; j++) {
        const lg_inst *in = &L->insts[order[j]];
        isa_inst *d = &out->insts[j];
        d->op = in->op;
        d->flags = in->flags;
        d->region = L->regions[in->region].final;
        d->n_in = in->n_in;
        d->n_ctl = in->n_ctl;
        d->a = in->a;
        d->b = in->b;
        d->line = in->pos.line;
        d->col = in->pos.col;
        if (in->origin && (!(d->origin = ut_arena_strdup(ar, in->origin->node)) ||
                           (in->origin->op && !(d->origin_op = ut_arena_strdup(ar, in->origin->op)))))
            cc_nomem(C);
        switch ((isa_op)in->op) {
        case ISA_ENTER:
        case ISA_EXIT: d->a = L->regions[in->a].final; break;
        case ISA_CALL:
        case ISA_RETURN: {
            uint32_t *hit = bsearch(&in->site, ids, n_sites, sizeof *ids, u32_cmp);
            if (!hit)
                cc_error(C, in->pos, TFVM_ERR_INTERNAL, "internal error: RETURN of a site without CALL");
            d->a = (uint32_t)(hit - ids);
            out->sites[d->a].callee = L->regions[in->callee->region].final;
            break;
        }
        default: break;
        }
        if (has_const(in)) {
            emit_const(C, ar, &out->consts[ci], in->cval);
            if (in->op == ISA_CONST || chan_inst(in))
                d->a = ci++;
            else
                d->b = ci++;
        }
        if (in->shape) { /* right after the channel's name */
            emit_const(C, ar, &out->consts[ci], in->shape);
            d->b |= ++ci << ISA_CHAN_SHAPE_SHIFT;
        }
        if (in->name) {
            d->name = ut_arena_strdup(ar, unique_name(L, d->region, in->name));
            if (!d->name)
                cc_nomem(C);
        }
        d->edge_first = ei;
        while (ei < E.n_edges && E.edges[ei].src == j) {
            out->edges[ei] = (isa_edge){E.edges[ei].out, E.edges[ei].dst, E.edges[ei].port};
            ei++;
        }
        d->n_edges = ei - d->edge_first;
    }
    /* the entry */
    cc_ifn *fn = C->entry_ifn;
    cc_func *f = fn->src;
    out->n_entries = 1;
    OUT_ARRAY(out->entries, 1);
    isa_entry *en = &out->entries[0];
    en->name = ut_arena_strdup(ar, f->name);
    en->region = 0;
    en->n_params = f->n_params;
    en->n_results = f->n_results;
    OUT_ARRAY(en->params, f->n_params);
    OUT_ARRAY(en->results, f->n_results);
    if (!en->name)
        cc_nomem(C);
    for (uint32_t k = 0; k < f->n_params + f->n_results; k++) {
        bool is_res = k >= f->n_params;
        const cc_param *p = is_res ? &f->results[k - f->n_params] : &f->params[k];
        isa_param *d = is_res ? &en->results[k - f->n_params] : &en->params[k];
        char rn[16];
        ut_fmt(rn, sizeof rn, "r%u", k - f->n_params);
        d->name = ut_arena_strdup(ar, p->name ? p->name : rn);
        if (!d->name)
            cc_nomem(C);
        d->dtype = p->type.dtype;
        d->rank = p->type.tensor ? ISA_RANK_ANY : 0;
        /* the declared shape, checked on every run (vm/signature.c) */
        if (p->type.tensor && p->type.rank <= TFVM_MAX_RANK && !isa_param_set_shape(out, d, p->type.rank, p->type.dims))
            cc_nomem(C);
        if (d->shaped && p->dim_names && !isa_param_set_dim_names(out, d, p->dim_names))
            cc_nomem(C);
        if (!is_res && p->dflt) {
            emit_const(C, ar, &out->consts[ci], p->dflt);
            d->has_default = true;
            d->dflt = ci++;
        }
    }
    /* the file the @line:col positions refer to (issue 14), when there are
     * some (imported models have none) and .tfasm can spell its name */
    bool lines = false;
    for (uint32_t i = 0; i < out->n_insts && !lines; i++)
        lines = out->insts[i].line != 0;
    if (lines && C->name[0] != '<' && strcmp(C->name, "-") != 0 && isa_source_ok(C->name) &&
        !(out->source = ut_arena_strdup(ar, C->name)))
        cc_nomem(C);
    emit_vars(L, out);
#undef OUT_ARRAY
}

void cc_lower(cc *C, isa_program *out)
{
    lower L = {.C = C, .opt = C->opt > 0, .wrap_site = C->mod.n_sites};
    /* regions: the entry's ROOT first, then every function */
    cc_ifn *entry = C->entry_ifn;
    const char *root_name = entry->name;
    if (C->entry_wrapped) {
        root_name = fmt_name(&L, "%s_entry", entry->name);
        for (uint32_t k = 1; region_name_taken(&L, root_name); k++)
            root_name = fmt_name(&L, "%s_entry%u", entry->name, k);
    }
    uint32_t root = new_region(&L, ISA_REGION_ROOT, ISA_NONE, root_name);
    for (uint32_t i = 0; i < C->n_ifns; i++) {
        cc_ifn *fn = C->ifns[i];
        if (fn->dropped)
            continue;
        if (fn == entry && !C->entry_wrapped) {
            fn->region = root;
            continue;
        }
        fn->region = new_region(&L, ISA_REGION_FUNC, ISA_NONE, fn->name);
        fn->pvirt = cc_array(C, fn->n_params + 1, sizeof *fn->pvirt);
        for (uint32_t k = 0; k < (fn->n_params ? fn->n_params : 1); k++)
        {
            fn->pvirt[k] = new_inst(&L, LG_VIRT, fn->region, 1, 0,
                                    fn->n_params ? fn->params[k]->names[0] : "trigger", fn->src->pos);
            L.insts[fn->pvirt[k]].param = true;
        }
    }
    if (C->entry_wrapped)
        lower_wrapper(&L, entry, root);
    for (uint32_t i = 0; i < C->n_ifns; i++)
        if (!C->ifns[i]->dropped)
            lower_function(&L, C->ifns[i]);
    for (uint32_t k = 0; k < L.n_rets; k++) {
        const pending_ret *p = &L.rets[k];
        add_ref(&L, p->inst, 0, ((lg_ref *)p->callee->res)[p->k]);
    }
    if (L.opt)
        sweep(&L);
    emit(&L, out);
}
