/* compiler/ir.c — builds the structured graph IR (compiler.h) from the typed
 * AST: every reachable function becomes a tree of blocks whose nodes are
 * constants, elementwise ops, calls, and If/While nodes owning sub-blocks.
 * The order tokens of feed and fetch are threaded here, as hidden vars. */
#include <string.h>

#include "compiler.h"
#include "decomp.h"

cc_irval cc_resolve(cc_irval v)
{
    while (v.n && v.n->fwd && v.n->fwd[v.k].n)
        v = v.n->fwd[v.k];
    return v;
}

/* .tfg names: identifiers; the desugarings' own ("for.end.1") are not. */
static void add_src_var(cc *C, cc_irval v, const char *name)
{
    for (const char *c = name; c && *c; c++)
        if (!(*c == '_' || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (c > name && *c >= '0' && *c <= '9')))
            return;
    cc_add_var(C, v, name);
}

void cc_add_var(cc *C, cc_irval v, const char *name)
{
    if (!v.n || !name)
        return;
    C->vars = cc_grow(C, C->vars, C->n_vars, &C->cap_vars, sizeof *C->vars);
    C->vars[C->n_vars++] = (cc_srcvar){v, name};
}

cc_node *cc_node_new(cc *C, cc_blk *b, cc_nk kind, uint32_t n_in, uint32_t n_out, cc_pos pos)
{
    cc_node *n = cc_alloc(C, sizeof *n);
    n->kind = (uint8_t)kind;
    n->blk = b;
    n->n_in = n_in;
    n->in = n_in ? cc_array(C, n_in, sizeof *n->in) : NULL;
    n->n_out = n_out;
    n->types = n_out ? cc_array(C, n_out, sizeof *n->types) : NULL;
    n->names = n_out ? cc_array(C, n_out, sizeof *n->names) : NULL;
    n->pos = pos;
    n->origin = C->origin;
    n->id = C->next_node_id++;
    if (b) {
        n->prev = b->last;
        if (b->last)
            b->last->next = n;
        else
            b->first = n;
        b->last = n;
    }
    return n;
}

void cc_node_unlink(cc_node *n)
{
    cc_blk *b = n->blk;
    if (n->prev)
        n->prev->next = n->next;
    else
        b->first = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        b->last = n->prev;
    n->prev = n->next = NULL;
}

/* Ops that can stop a run, by ops.def's `fails`: the tensor ops (YES),
 * integer DIV/MOD/FLOOR_DIV/FLOOR_MOD unless the divisor is a nonzero
 * constant (DIV0), integer POW unless the exponent is a constant >= 0
 * (NEGEXP), CAST from a float to an integer (F2I), and anything on tensors
 * (shapes are only fully known at run time). Dead-code elimination keeps
 * them, so a program fails the same way whether or not a result is used. */
bool cc_op_may_fail(const cc_node *n)
{
    if (n->kind != CC_N_OP)
        return false;
    const isa_fails fails = isa_ops[n->op].fails;
    if (fails == ISA_FAILS_YES)
        return true;
    for (uint32_t k = 0; k < n->n_in; k++) {
        cc_irval v = cc_resolve(n->in[k]);
        if (v.n->types[v.k].tensor)
            return true;
    }
    if (fails == ISA_FAILS_NO)
        return false;
    cc_irval x = cc_resolve(n->in[0]);
    const uint8_t d = x.n->types[x.k].dtype;
    if (fails == ISA_FAILS_F2I)
        return isa_dtype_float(d) && isa_dtype_int(n->attr);
    if (!isa_dtype_int(d))
        return false;
    /* DIV0, NEGEXP: operand b decides; only a constant is known */
    cc_irval y = cc_resolve(n->in[1]);
    /* a constant of another dtype (an importer's malformed input) is read by its own size: not at all */
    if (y.n->kind != CC_N_CONST || y.n->u.c.dtype != d || y.n->u.c.rank)
        return true;
    const void *p = y.n->u.c.data;
    int64_t v;
    switch (d) {
    case TFVM_I32: { int32_t w; memcpy(&w, p, 4); v = w; break; }
    case TFVM_U8: v = *(const uint8_t *)p; break;
    case TFVM_I8: v = *(const int8_t *)p; break;
    default: memcpy(&v, p, 8); break;
    }
    return fails == ISA_FAILS_DIV0 ? v == 0 : v < 0;
}

/* ---- Building ---------------------------------------------------------------------- */

/* Order tokens (docs/coexec.md): every channel a function feeds or
 * fetches has one, threaded like a var that each feed and fetch assigns:
 * through the branches of an if (an extra result), a loop (an extra loop
 * variable) and calls (a hidden parameter and result). tok[c] is channel c's
 * current token, {NULL} where the function has none. */
typedef struct builder {
    cc *C;
    cc_ifn *fn;
    cc_blk *blk;   /* where new nodes go */
    cc_irval *tok; /* per channel (C->n_chans) */
} builder;

cc_irval cc_loop_exit(const cc_node *w, uint32_t k)
{
    const cc_blk *h = w->u.loop.head;
    return k + 1 < h->n_res ? h->res[k + 1] : (cc_irval){w->u.loop.lvars[k], 0};
}

static bool same_val(cc_irval a, cc_irval b) { return a.n == b.n && a.k == b.k; }

static cc_irval *tok_copy(builder *B)
{
    cc_irval *t = cc_array(B->C, B->C->n_chans, sizeof *t);
    memcpy(t, B->tok, B->C->n_chans * sizeof *t);
    return t;
}

/* Gives node n `extra` more outputs (the order tokens an If passes on). */
static void add_outputs(cc *C, cc_node *n, uint32_t extra)
{
    uint32_t m = n->n_out + extra;
    cc_vtype *types = cc_array(C, m, sizeof *types);
    const char **names = cc_array(C, m, sizeof *names);
    if (n->n_out) {
        memcpy(types, n->types, n->n_out * sizeof *types);
        memcpy(names, n->names, n->n_out * sizeof *names);
    }
    n->types = types;
    n->names = names;
    n->n_out = m;
}

static void add_results(cc *C, cc_blk *b, uint32_t extra)
{
    cc_irval *res = cc_array(C, b->n_res + extra, sizeof *res);
    if (b->n_res)
        memcpy(res, b->res, b->n_res * sizeof *res);
    b->res = res;
    b->n_res += extra;
}

static const cc_vtype tok_type = {.dtype = TFVM_I32};

static cc_blk *new_blk(builder *B, cc_blk *parent, cc_node *owner, cc_role role)
{
    cc_blk *b = cc_alloc(B->C, sizeof *b);
    b->parent = parent;
    b->owner = owner;
    b->role = (uint8_t)role;
    b->fn = B->fn;
    b->depth = parent ? parent->depth + 1 : 0;
    return b;
}

static cc_irval val(cc_node *n, uint32_t k) { return (cc_irval){n, k}; }

static cc_irval make_const(builder *B, const cc_vtype *t, const void *data, size_t nbytes, cc_pos pos)
{
    cc_node *n = cc_node_new(B->C, B->blk, CC_N_CONST, 0, 1, pos);
    n->types[0] = *t;
    n->u.c.dtype = t->dtype;
    n->u.c.rank = t->tensor ? t->rank : 0;
    memcpy(n->u.c.dims, t->dims, sizeof n->u.c.dims);
    n->u.c.nbytes = nbytes;
    void *p = cc_alloc(B->C, nbytes ? nbytes : 1);
    if (nbytes)
        memcpy(p, data, nbytes);
    n->u.c.data = p;
    return val(n, 0);
}

/* Writes a literal leaf as dtype d (little-endian host). */
static void literal_bytes(const cc_expr *e, uint8_t d, unsigned char *out)
{
    if (e->kind == CC_E_BOOL) {
        out[0] = e->u.lit.b ? 1 : 0;
        return;
    }
    double f;
    int64_t i = 0;
    if (e->kind == CC_E_INT) {
        i = e->u.lit.neg ? (int64_t)(0 - e->u.lit.mag) : (int64_t)e->u.lit.mag;
        f = e->u.lit.neg ? -(double)e->u.lit.mag : (double)e->u.lit.mag;
    } else {
        f = e->u.lit.f;
    }
    switch (d) {
    case TFVM_I32: { int32_t v = (int32_t)i; memcpy(out, &v, 4); break; }
    case TFVM_I64: memcpy(out, &i, 8); break;
    case TFVM_F32: { float v = (float)f; memcpy(out, &v, 4); break; }
    case TFVM_F64: memcpy(out, &f, 8); break;
    case TFVM_U8: out[0] = (unsigned char)i; break;
    case TFVM_I8: out[0] = (unsigned char)(int8_t)i; break;
    default: out[0] = 0; break;
    }
}

static cc_irval *build(builder *B, const cc_expr *e);
static cc_irval *one(builder *B, cc_irval v);

static void build_block(builder *B, const cc_ablock *ab, cc_blk *b)
{
    cc_blk *saved = B->blk;
    B->blk = b;
    for (uint32_t i = 0; i < ab->n_lets; i++) {
        const cc_let *l = &ab->lets[i];
        cc_irval *v = build(B, l->value);
        for (uint32_t k = 0; k < l->n_names; k++) {
            if (!l->vars[k])
                continue;
            l->vars[k]->ir = &v[k];
            add_src_var(B->C, v[k], l->names[k]);
            cc_irval r = cc_resolve(v[k]);
            if (!r.n->names[r.k] && r.n->kind != CC_N_CONST)
                r.n->names[r.k] = l->names[k];
        }
    }
    b->n_res = ab->result->type.n;
    b->res = build(B, ab->result);
    B->blk = saved;
}

/* The instruction of operator tk on operands of dtype d: & | ^ on bools are
 * the logic ops; with --overflow=trap, integer + - * are the checked ones. */
static isa_op binary_op(cc *C, uint8_t tk, uint8_t d)
{
    bool b = d == TFVM_BOOL, trap = C->overflow_trap && isa_dtype_int(d);
    switch (tk) {
    case CC_T_PLUS: return trap ? ISA_ADD_OV : ISA_ADD;
    case CC_T_MINUS: return trap ? ISA_SUB_OV : ISA_SUB;
    case CC_T_STAR: return trap ? ISA_MUL_OV : ISA_MUL;
    case CC_T_SLASH: return ISA_DIV;
    case CC_T_PERCENT: return ISA_MOD;
    case CC_T_LT: return ISA_LESS;
    case CC_T_LE: return ISA_LESS_EQUAL;
    case CC_T_GT: return ISA_GREATER;
    case CC_T_GE: return ISA_GREATER_EQUAL;
    case CC_T_EQ: return ISA_EQUAL;
    case CC_T_NE: return ISA_NOT_EQUAL;
    case CC_T_AND: return ISA_AND;
    case CC_T_BAND: return b ? ISA_AND : ISA_BITAND;
    case CC_T_BOR: return b ? ISA_OR : ISA_BITOR;
    case CC_T_XOR: return b ? ISA_XOR : ISA_BITXOR;
    case CC_T_SHL: return ISA_SHL;
    case CC_T_SHR: return ISA_SHR;
    default: return ISA_OR;
    }
}

static cc_irval *one(builder *B, cc_irval v)
{
    cc_irval *r = cc_alloc(B->C, sizeof *r);
    *r = v;
    return r;
}

/* feed<T>("x"): FEED (token) -> (value, token). fetch("y", v): FETCH (v,
 * token) -> (v, token); the expression's value is v itself, so that what
 * uses it need not wait for the fetch's turn. The node's attribute is the
 * channel. */
static cc_irval *build_host(builder *B, const cc_expr *e)
{
    cc *C = B->C;
    const cc_host *h = e->u.call.host;
    cc_irval v = {NULL, 0};
    if (!h->feed)
        v = build(B, e->u.call.args[0])[0];
    cc_node *n = cc_node_new(C, B->blk, CC_N_OP, h->feed ? 1 : 2, 2, e->u.call.name_pos);
    n->op = h->feed ? ISA_FEED : ISA_FETCH;
    n->attr = h->chan;
    if (!h->feed)
        n->in[0] = v;
    n->in[h->feed ? 0 : 1] = B->tok[h->chan];
    n->types[0] = e->type.t[0];
    n->types[1] = tok_type;
    B->tok[h->chan] = val(n, 1);
    return one(B, h->feed ? val(n, 0) : v);
}

static cc_irval *build(builder *B, const cc_expr *e)
{
    cc *C = B->C;
    switch (e->kind) {
    case CC_E_INT:
    case CC_E_FLOAT:
    case CC_E_BOOL: {
        unsigned char bytes[8];
        const cc_vtype *t = &e->type.t[0];
        literal_bytes(e, t->dtype, bytes);
        return one(B, make_const(B, t, bytes, tfvm_dtype_size((tfvm_dtype)t->dtype), e->pos));
    }
    case CC_E_TENSOR: {
        const cc_vtype *t = &e->type.t[0];
        if (e->u.tensor.raw) /* load("w.npy") */
            return one(B, make_const(B, t, e->u.tensor.raw, e->u.tensor.raw_bytes, e->pos));
        size_t es = tfvm_dtype_size((tfvm_dtype)t->dtype);
        unsigned char *data = cc_array(C, e->u.tensor.n, es);
        for (uint32_t i = 0; i < e->u.tensor.n; i++)
            literal_bytes(e->u.tensor.elems[i], t->dtype, data + i * es);
        return one(B, make_const(B, t, data, e->u.tensor.n * es, e->pos));
    }
    case CC_E_VAR: return one(B, *e->u.var.var->ir);
    case CC_E_UNARY: {
        cc_irval a = build(B, e->u.op.a)[0];
        cc_node *n = cc_node_new(C, B->blk, CC_N_OP, 1, 1, e->pos);
        n->op = e->u.op.op == CC_T_NOT                                       ? ISA_NOT
              : e->u.op.op == CC_T_TILDE && e->type.t[0].dtype == TFVM_BOOL ? ISA_NOT
              : e->u.op.op == CC_T_TILDE                                     ? ISA_BITNOT
                                                                             : ISA_NEG;
        n->in[0] = a;
        n->types[0] = e->type.t[0];
        return one(B, val(n, 0));
    }
    case CC_E_BINARY: {
        cc_irval a = build(B, e->u.op.a)[0];
        cc_irval b = build(B, e->u.op.b)[0];
        cc_node *n = cc_node_new(C, B->blk, CC_N_OP, 2, 1, e->pos);
        n->op = (uint16_t)binary_op(C, e->u.op.op, e->u.op.a->type.t[0].dtype);
        n->in[0] = a;
        n->in[1] = b;
        n->types[0] = e->type.t[0];
        return one(B, val(n, 0));
    }
    case CC_E_CALL: {
        if (e->u.call.sugar)
            return build(B, e->u.call.sugar);
        if (e->u.call.host)
            return build_host(B, e);
        if (e->u.call.decomp)
            return one(B, cc_decompose(C, B->blk, (cc_decomp)(e->u.call.decomp - 1), build(B, e->u.call.args[0])[0],
                                       e->u.call.dparams));
        /* a built-in op takes its operands (builtins.c), a function its arguments */
        uint32_t na = e->u.call.fn ? e->u.call.n_args : e->u.call.n_ops;
        cc_expr **src = e->u.call.fn ? e->u.call.args : e->u.call.ops;
        cc_ifn *g = e->u.call.fn ? e->u.call.fn->ir : NULL;
        uint32_t nh = g ? g->n_hidden : 0;
        cc_irval *args = cc_array(C, na + nh + 1, sizeof *args);
        for (uint32_t k = 0; k < na; k++)
            args[k] = build(B, src[k])[0];
        cc_node *n;
        if (g) {
            /* the callee's order tokens go in after the arguments, and come
             * back after the results */
            for (uint32_t j = 0; j < nh; j++)
                args[na + j] = B->tok[g->hidden[j]];
            n = cc_node_new(C, B->blk, CC_N_CALL, na + nh, e->type.n + nh, e->u.call.name_pos);
            n->u.call.callee = g;
            n->u.call.site = e->u.call.site;
            for (uint32_t j = 0; j < nh; j++) {
                n->types[e->type.n + j] = tok_type;
                B->tok[g->hidden[j]] = val(n, e->type.n + j);
            }
            na += nh;
        } else {
            n = cc_node_new(C, B->blk, CC_N_OP, na, 1, e->u.call.name_pos);
            n->op = (uint16_t)e->u.call.builtin;
            n->attr = e->u.call.attr;
        }
        if (na)
            memcpy(n->in, args, na * sizeof *args);
        cc_irval *out = cc_array(C, e->type.n, sizeof *out);
        for (uint32_t k = 0; k < e->type.n; k++) {
            n->types[k] = e->type.t[k];
            out[k] = val(n, k);
        }
        return out;
    }
    case CC_E_IF: {
        cc_irval c = build(B, e->u.cond.cond)[0];
        cc_node *n = cc_node_new(C, B->blk, CC_N_IF, 1, e->type.n, e->pos);
        n->in[0] = c;
        n->u.cond.then = new_blk(B, B->blk, n, CC_B_THEN);
        n->u.cond.els = new_blk(B, B->blk, n, CC_B_ELSE);
        cc_irval *before = C->n_chans ? tok_copy(B) : NULL, *after_then = NULL;
        build_block(B, e->u.cond.then, n->u.cond.then);
        if (before) {
            after_then = tok_copy(B);
            memcpy(B->tok, before, C->n_chans * sizeof *before);
        }
        build_block(B, e->u.cond.els, n->u.cond.els);
        cc_irval *out = cc_array(C, e->type.n, sizeof *out);
        for (uint32_t k = 0; k < e->type.n; k++) {
            n->types[k] = e->type.t[k];
            out[k] = val(n, k);
        }
        /* a token either branch moved: the If gives the one its taken branch left */
        uint32_t moved = 0;
        for (uint32_t ch = 0; before && ch < C->n_chans; ch++)
            moved += !same_val(after_then[ch], before[ch]) || !same_val(B->tok[ch], before[ch]);
        if (!moved)
            return out;
        uint32_t k = n->n_out;
        add_outputs(C, n, moved);
        add_results(C, n->u.cond.then, moved);
        add_results(C, n->u.cond.els, moved);
        for (uint32_t ch = 0; ch < C->n_chans; ch++) {
            if (same_val(after_then[ch], before[ch]) && same_val(B->tok[ch], before[ch]))
                continue;
            n->types[k] = tok_type;
            n->names[k] = C->chans[ch].order;
            n->u.cond.then->res[k] = after_then[ch];
            n->u.cond.els->res[k] = B->tok[ch];
            B->tok[ch] = val(n, k++);
        }
        return out;
    }
    case CC_E_WHILE: {
        uint32_t nv = e->u.loop.n_vars, nt = 0, *toks = NULL;
        cc_irval *inits = cc_array(C, nv, sizeof *inits);
        for (uint32_t k = 0; k < nv; k++)
            inits[k] = build(B, e->u.loop.vars[k].init)[0];
        if (C->n_chans) { /* the order tokens of what the loop feeds or fetches are loop variables too */
            uint64_t *set = cc_array(C, cc_chan_words(C), sizeof *set);
            cc_chan_uses(C, e->u.loop.cond, set);
            cc_chan_uses_block(C, e->u.loop.body, set);
            toks = cc_array(C, C->n_chans, sizeof *toks);
            for (uint32_t ch = 0; ch < C->n_chans; ch++)
                if (set[ch / 64] >> (ch % 64) & 1)
                    toks[nt++] = ch;
        }
        cc_node *n = cc_node_new(C, B->blk, CC_N_WHILE, nv + nt, nv + nt, e->pos);
        memcpy(n->in, inits, nv * sizeof *inits);
        for (uint32_t j = 0; j < nt; j++)
            n->in[nv + j] = B->tok[toks[j]];
        n->u.loop.label = e->u.loop.label;
        n->u.loop.label_pos = e->u.loop.label_pos;
        n->u.loop.for_var = e->u.loop.for_var;
        cc_blk *head = n->u.loop.head = new_blk(B, B->blk, n, CC_B_HEAD);
        n->u.loop.lvars = cc_array(C, nv + nt, sizeof(cc_node *));
        cc_blk *saved = B->blk;
        B->blk = head;
        for (uint32_t k = 0; k < nv; k++) {
            const cc_loopvar *lv = &e->u.loop.vars[k];
            cc_node *l = cc_node_new(C, head, CC_N_LVAR, 0, 1, lv->pos);
            l->u.index = k;
            l->owner = n;
            l->types[0] = lv->type;
            l->names[0] = lv->name;
            add_src_var(C, val(l, 0), lv->name);
            n->u.loop.lvars[k] = l;
            n->types[k] = lv->type;
            n->names[k] = lv->name;
            lv->var->ir = cc_alloc(C, sizeof(cc_irval));
            *lv->var->ir = val(l, 0);
        }
        for (uint32_t j = 0; j < nt; j++) {
            cc_node *l = cc_node_new(C, head, CC_N_LVAR, 0, 1, e->pos);
            l->u.index = nv + j;
            l->owner = n;
            l->types[0] = n->types[nv + j] = tok_type;
            l->names[0] = n->names[nv + j] = C->chans[toks[j]].order;
            n->u.loop.lvars[nv + j] = l;
            B->tok[toks[j]] = val(l, 0);
        }
        head->n_res = 1;
        head->res = build(B, e->u.loop.cond);
        B->blk = saved;
        if (nt) {
            /* a token the condition moved leaves the loop as the condition
             * left it (the last feed said stop) */
            add_results(C, head, nv + nt);
            for (uint32_t k = 0; k < nv + nt; k++)
                head->res[1 + k] = k < nv ? val(n->u.loop.lvars[k], 0) : B->tok[toks[k - nv]];
        }
        n->u.loop.body = new_blk(B, head, n, CC_B_BODY);
        build_block(B, e->u.loop.body, n->u.loop.body);
        if (nt) {
            add_results(C, n->u.loop.body, nt);
            for (uint32_t j = 0; j < nt; j++) {
                n->u.loop.body->res[nv + j] = B->tok[toks[j]];
                B->tok[toks[j]] = val(n, nv + j);
            }
        }
        cc_irval *out = cc_array(C, nv, sizeof *out);
        for (uint32_t k = 0; k < nv; k++)
            out[k] = val(n, k);
        return out;
    }
    case CC_E_TUPLE: {
        cc_irval *out = cc_array(C, e->u.tuple.n, sizeof *out);
        for (uint32_t k = 0; k < e->u.tuple.n; k++)
            out[k] = build(B, e->u.tuple.elems[k])[0];
        return out;
    }
    }
    return NULL;
}

void cc_build_ir(cc *C)
{
    cc_module *m = &C->mod;
    /* Reachable functions, the entry first, the others in source order. */
    C->ifns = cc_array(C, m->n_funcs + 1, sizeof(cc_ifn *));
    for (uint32_t pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < m->n_funcs; i++) {
            cc_func *f = m->funcs[i];
            if (!f->reachable || (pass == 0) != (f == m->entry))
                continue;
            cc_ifn *fn = cc_alloc(C, sizeof *fn);
            fn->src = f;
            fn->name = f->name;
            /* the entry's tokens start at 0, unless it is called too */
            if (f->chans && (f != m->entry || f->called)) {
                fn->hidden = cc_array(C, C->n_chans, sizeof *fn->hidden);
                for (uint32_t c = 0; c < C->n_chans; c++)
                    if (f->chans[c / 64] >> (c % 64) & 1)
                        fn->hidden[fn->n_hidden++] = c;
            }
            fn->n_params = f->n_params + fn->n_hidden;
            fn->n_results = f->n_results + fn->n_hidden;
            fn->params = cc_array(C, fn->n_params + 1, sizeof(cc_node *));
            fn->param_live = cc_array(C, fn->n_params + 1, sizeof(bool));
            f->ir = fn;
            C->ifns[C->n_ifns++] = fn;
        }
    }
    C->entry_ifn = m->entry->ir;
    C->entry_wrapped = m->entry->called;
    for (uint32_t i = 0; i < C->n_ifns; i++) {
        cc_ifn *fn = C->ifns[i];
        cc_func *f = fn->src;
        builder B = {C, fn, NULL, NULL};
        fn->top = new_blk(&B, NULL, NULL, CC_B_TOP);
        for (uint32_t k = 0; k < f->n_params; k++) {
            cc_node *p = cc_node_new(C, fn->top, CC_N_PARAM, 0, 1, f->params[k].pos);
            p->u.index = k;
            p->types[0] = f->params[k].type;
            p->names[0] = f->params[k].name;
            add_src_var(C, val(p, 0), f->params[k].name);
            fn->params[k] = p;
            f->params[k].var->ir = cc_alloc(C, sizeof(cc_irval));
            *f->params[k].var->ir = val(p, 0);
        }
        if (C->n_chans) {
            B.tok = cc_array(C, C->n_chans, sizeof *B.tok);
            for (uint32_t j = 0; j < fn->n_hidden; j++) {
                uint32_t k = f->n_params + j;
                cc_node *p = cc_node_new(C, fn->top, CC_N_PARAM, 0, 1, f->pos);
                p->u.index = k;
                p->types[0] = tok_type;
                p->names[0] = C->chans[fn->hidden[j]].order;
                fn->params[k] = p;
                B.tok[fn->hidden[j]] = val(p, 0);
            }
            static const int32_t zero = 0;
            B.blk = fn->top;
            for (uint32_t c = 0; c < C->n_chans && !fn->n_hidden; c++)
                if (f->chans[c / 64] >> (c % 64) & 1)
                    B.tok[c] = make_const(&B, &tok_type, &zero, sizeof zero, f->pos);
        }
        build_block(&B, f->body, fn->top);
        if (fn->n_hidden) { /* the tokens as they end go back to the caller */
            add_results(C, fn->top, fn->n_hidden);
            for (uint32_t j = 0; j < fn->n_hidden; j++)
                fn->top->res[f->n_results + j] = B.tok[fn->hidden[j]];
        }
    }
}
