/* compiler/opt.c — optimizations on the structured IR: constant folding
 * (with the VM's own kernels, so folded and run-time results agree) and
 * algebraic simplification, common-subexpression elimination (pure ops and
 * calls of pure functions), and dead-code elimination, which also finds the
 * parameters a function reads and the functions still called. */
#include <string.h>

#include "compiler.h"
#include "devices/cpu/cpu.h"

/* Visits every block of a function, parents before children. */
typedef void (*blk_fn)(cc *C, cc_blk *b, void *ud);

static void each_block(cc *C, cc_blk *b, blk_fn f, void *ud)
{
    f(C, b, ud);
    for (cc_node *n = b->first; n; n = n->next) {
        if (n->kind == CC_N_IF) {
            each_block(C, n->u.cond.then, f, ud);
            each_block(C, n->u.cond.els, f, ud);
        } else if (n->kind == CC_N_WHILE) {
            each_block(C, n->u.loop.head, f, ud);
            each_block(C, n->u.loop.body, f, ud);
        }
    }
}

static void forward(cc *C, cc_node *n, uint32_t k, cc_irval to)
{
    if (!n->fwd)
        n->fwd = cc_array(C, n->n_out, sizeof *n->fwd);
    n->fwd[k] = to;
}

static void resolve_inputs(cc_node *n)
{
    for (uint32_t k = 0; k < n->n_in; k++)
        n->in[k] = cc_resolve(n->in[k]);
}

static void resolve_block(cc *C, cc_blk *b, void *ud)
{
    (void)C;
    (void)ud;
    for (cc_node *n = b->first; n; n = n->next)
        resolve_inputs(n);
    for (uint32_t k = 0; k < b->n_res; k++)
        b->res[k] = cc_resolve(b->res[k]);
}

/* ---- Constants ------------------------------------------------------------------------ */

static bool is_const(cc_irval v) { return cc_resolve(v).n->kind == CC_N_CONST; }
static const cc_cval *cval(cc_irval v) { return &cc_resolve(v).n->u.c; }

static bool cval_eq(const cc_cval *a, const cc_cval *b)
{
    return a->dtype == b->dtype && a->rank == b->rank && memcmp(a->dims, b->dims, sizeof a->dims) == 0 &&
           a->nbytes == b->nbytes && memcmp(a->data, b->data, a->nbytes) == 0;
}

/* Scalar value of a constant as int64 (integers and bool) for simplifications. */
static bool const_int(cc_irval v, int64_t *out)
{
    if (!is_const(v))
        return false;
    const cc_cval *c = cval(v);
    if (c->rank)
        return false;
    switch (c->dtype) {
    case TFVM_BOOL: *out = *(const uint8_t *)c->data; return true;
    case TFVM_I32: { int32_t x; memcpy(&x, c->data, 4); *out = x; return true; }
    case TFVM_I64: memcpy(out, c->data, 8); return true;
    case TFVM_U8: *out = *(const uint8_t *)c->data; return true;
    case TFVM_I8: *out = *(const int8_t *)c->data; return true;
    default: return false;
    }
}

static cc_irval new_const(cc *C, cc_node *at, const dev_value *v)
{
    cc_node *n = cc_node_new(C, NULL, CC_N_CONST, 0, 1, at->pos);
    n->blk = at->blk;
    n->types[0] = (cc_vtype){.dtype = v->dtype};
    size_t sz = tfvm_dtype_size((tfvm_dtype)v->dtype);
    void *p = cc_alloc(C, sz);
    memcpy(p, &v->u, sz);
    n->u.c = (cc_cval){.dtype = v->dtype, .nbytes = sz, .data = p};
    return (cc_irval){n, 0};
}

static dev_value to_dev(const cc_cval *c)
{
    dev_value v = {.dtype = c->dtype};
    memcpy(&v.u, c->data, c->nbytes);
    return v;
}

/* Folds an elementwise op on scalar constants; kernel failures (division by
 * zero, unrepresentable casts) stay in the program as run-time errors. */
static bool fold_op(cc *C, cc_node *n)
{
    dev_value in[4];
    if (n->n_in > 4)
        return false;
    for (uint32_t k = 0; k < n->n_in; k++) {
        if (!is_const(n->in[k]) || cval(n->in[k])->rank)
            return false;
        in[k] = to_dev(cval(n->in[k]));
    }
    if (n->types[0].tensor)
        return false;
    dev_value out;
    char msg[128];
    if (dev_cpu_elementwise((isa_op)n->op, n->attr, in, &out, NULL, msg, sizeof msg) != TFVM_OK)
        return false;
    if (out.is_tensor) {
        dev_value_release(&out);
        return false;
    }
    forward(C, n, 0, new_const(C, n, &out));
    return true;
}

static bool same_type(cc_irval v, const cc_node *n)
{
    v = cc_resolve(v);
    return cc_vtype_eq(&v.n->types[v.k], &n->types[0]);
}

static bool int_dtype(const cc_node *n) { return isa_dtype_int(n->types[0].dtype); }

/* x+0, x-0, x*1, x/1, b&&true, b||false, !!b, select(true, a, b), ... on
 * integers and bools (float identities break on -0.0 and NaN). */
static bool simplify_op(cc *C, cc_node *n)
{
    int64_t c;
    cc_irval a = n->in[0], b = n->n_in > 1 ? n->in[1] : a;
    switch (n->op) {
    case ISA_ADD:
        if (!int_dtype(n))
            return false;
        if (const_int(b, &c) && c == 0 && same_type(a, n))
            return forward(C, n, 0, cc_resolve(a)), true;
        if (const_int(a, &c) && c == 0 && same_type(b, n))
            return forward(C, n, 0, cc_resolve(b)), true;
        return false;
    case ISA_SUB:
        if (int_dtype(n) && const_int(b, &c) && c == 0 && same_type(a, n))
            return forward(C, n, 0, cc_resolve(a)), true;
        return false;
    case ISA_MUL:
        if (!int_dtype(n))
            return false;
        if (const_int(b, &c) && c == 1 && same_type(a, n))
            return forward(C, n, 0, cc_resolve(a)), true;
        if (const_int(a, &c) && c == 1 && same_type(b, n))
            return forward(C, n, 0, cc_resolve(b)), true;
        return false;
    case ISA_DIV:
        if (int_dtype(n) && const_int(b, &c) && c == 1 && same_type(a, n))
            return forward(C, n, 0, cc_resolve(a)), true;
        return false;
    case ISA_AND:
        if (const_int(b, &c) && c == 1 && same_type(a, n))
            return forward(C, n, 0, cc_resolve(a)), true;
        if (const_int(a, &c) && c == 1 && same_type(b, n))
            return forward(C, n, 0, cc_resolve(b)), true;
        return false;
    case ISA_OR:
        if (const_int(b, &c) && c == 0 && same_type(a, n))
            return forward(C, n, 0, cc_resolve(a)), true;
        if (const_int(a, &c) && c == 0 && same_type(b, n))
            return forward(C, n, 0, cc_resolve(b)), true;
        return false;
    case ISA_NOT: {
        cc_irval x = cc_resolve(a);
        if (x.n->kind == CC_N_OP && x.n->op == ISA_NOT && same_type(x.n->in[0], n))
            return forward(C, n, 0, cc_resolve(x.n->in[0])), true;
        return false;
    }
    case ISA_SELECT:
        if (const_int(a, &c) && same_type(n->in[c ? 1 : 2], n))
            return forward(C, n, 0, cc_resolve(n->in[c ? 1 : 2])), true;
        return false;
    default: return false;
    }
}

/* Moves the nodes of `from` into the block of `at`, before `at`. */
static void splice(cc_blk *from, cc_node *at)
{
    cc_blk *to = at->blk;
    cc_node *n = from->first;
    while (n) {
        cc_node *nx = n->next;
        n->blk = to;
        n->prev = at->prev;
        n->next = at;
        if (at->prev)
            at->prev->next = n;
        else
            to->first = n;
        at->prev = n;
        if (n->kind == CC_N_IF) {
            n->u.cond.then->parent = to;
            n->u.cond.els->parent = to;
        } else if (n->kind == CC_N_WHILE) {
            n->u.loop.head->parent = to;
        }
        n = nx;
    }
    from->first = from->last = NULL;
}

static bool pure_block(const cc_blk *b)
{
    for (const cc_node *n = b->first; n; n = n->next)
        if (n->kind == CC_N_CALL || n->kind == CC_N_IF || n->kind == CC_N_WHILE || cc_op_may_fail(n))
            return false;
    return true;
}

typedef struct fold_state {
    uint32_t changes;
} fold_state;

static void fold_block(cc *C, cc_blk *b, fold_state *S);

static void fold_node(cc *C, cc_node *n, fold_state *S, cc_node **next)
{
    resolve_inputs(n);
    switch (n->kind) {
    case CC_N_OP:
        if (fold_op(C, n) || simplify_op(C, n)) {
            cc_node_unlink(n);
            S->changes++;
        }
        break;
    case CC_N_IF: {
        int64_t c;
        if (const_int(n->in[0], &c)) {
            /* a known condition: the taken branch replaces the If */
            cc_blk *taken = c ? n->u.cond.then : n->u.cond.els;
            *next = taken->first ? taken->first : n->next;
            for (uint32_t k = 0; k < n->n_out; k++)
                forward(C, n, k, cc_resolve(taken->res[k]));
            splice(taken, n);
            cc_node_unlink(n);
            S->changes++;
            return;
        }
        fold_block(C, n->u.cond.then, S);
        fold_block(C, n->u.cond.els, S);
        /* Both branches give the same value: it can only come from outside
         * the If (or be a constant), so it replaces the If's output. */
        for (uint32_t k = 0; k < n->n_out; k++) {
            if (n->fwd && n->fwd[k].n)
                continue;
            cc_irval a = cc_resolve(n->u.cond.then->res[k]), e = cc_resolve(n->u.cond.els->res[k]);
            if ((a.n == e.n && a.k == e.k) || (a.n->kind == CC_N_CONST && e.n->kind == CC_N_CONST &&
                                               cval_eq(&a.n->u.c, &e.n->u.c))) {
                forward(C, n, k, a);
                S->changes++;
            }
        }
        break;
    }
    case CC_N_WHILE: {
        fold_block(C, n->u.loop.head, S);
        int64_t c;
        if (const_int(n->u.loop.head->res[0], &c) && c == 0 && pure_block(n->u.loop.head)) {
            /* the loop never runs its body: its results are the initial values */
            for (uint32_t k = 0; k < n->n_out; k++)
                forward(C, n, k, cc_resolve(n->in[k]));
            cc_node_unlink(n);
            S->changes++;
            return;
        }
        fold_block(C, n->u.loop.body, S);
        break;
    }
    default: break;
    }
}

static void fold_block(cc *C, cc_blk *b, fold_state *S)
{
    for (cc_node *n = b->first; n;) {
        cc_node *next = n->next;
        fold_node(C, n, S, &next);
        n = next;
    }
    for (uint32_t k = 0; k < b->n_res; k++)
        b->res[k] = cc_resolve(b->res[k]);
}

/* ---- Common subexpressions ------------------------------------------------------------------ */

/* Scoped value numbering: a node may be replaced by an identical one of its
 * own block or an enclosing block that came before it. Constants are first
 * made canonical (one node per value and function) so that inputs compare by
 * identity. */
typedef struct cse_ent {
    uint64_t h;
    cc_node *n;
    uint32_t prev; /* previous entry in the same bucket, or UINT32_MAX */
} cse_ent;

typedef struct cse {
    uint32_t *buckets; /* head entry per bucket */
    uint32_t n_buckets;
    cse_ent *stack;
    uint32_t n, cap;
    uint32_t changes;
} cse;

static uint64_t hmix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xBF58476D1CE4E5B9ull;
}

static bool commutative(uint16_t op)
{
    return op == ISA_ADD || op == ISA_MUL || op == ISA_MIN || op == ISA_MAX || op == ISA_EQUAL ||
           op == ISA_NOT_EQUAL || op == ISA_AND || op == ISA_OR;
}

static uint64_t val_key(cc_irval v) { return (uint64_t)v.n->id << 8 | v.k; }

static uint64_t node_hash(const cc_node *n)
{
    uint64_t h = hmix(n->kind, n->kind == CC_N_OP ? (uint64_t)n->op << 32 | n->attr : n->u.call.callee->src->index);
    if (n->kind == CC_N_OP && commutative(n->op) && n->n_in == 2) {
        uint64_t a = val_key(n->in[0]), b = val_key(n->in[1]);
        return hmix(hmix(h, a < b ? a : b), a < b ? b : a);
    }
    for (uint32_t k = 0; k < n->n_in; k++)
        h = hmix(h, val_key(n->in[k]));
    return h;
}

static bool same_val(cc_irval a, cc_irval b) { return a.n == b.n && a.k == b.k; }

static bool node_same(const cc_node *a, const cc_node *b)
{
    if (a->kind != b->kind || a->n_in != b->n_in)
        return false;
    if (a->kind == CC_N_OP) {
        if (a->op != b->op || a->attr != b->attr)
            return false;
        if (commutative(a->op) && a->n_in == 2 && same_val(a->in[0], b->in[1]) && same_val(a->in[1], b->in[0]))
            return true;
    } else if (a->u.call.callee != b->u.call.callee) {
        return false;
    }
    for (uint32_t k = 0; k < a->n_in; k++)
        if (!same_val(a->in[k], b->in[k]))
            return false;
    return true;
}

/* Doubles the buckets; chains are rebuilt in stack order, so popping a
 * scope (which restores each bucket's previous head) still works. */
static void cse_rehash(cc *C, cse *S)
{
    uint32_t nb = S->n_buckets * 2;
    uint32_t *b = cc_array(C, nb, sizeof *b);
    memset(b, 0xff, nb * sizeof *b);
    for (uint32_t i = 0; i < S->n; i++) {
        uint32_t k = (uint32_t)(S->stack[i].h & (nb - 1));
        S->stack[i].prev = b[k];
        b[k] = i;
    }
    S->buckets = b;
    S->n_buckets = nb;
}

static void cse_block(cc *C, cse *S, cc_blk *b)
{
    uint32_t mark = S->n;
    for (cc_node *n = b->first; n;) {
        cc_node *next = n->next;
        resolve_inputs(n);
        if (n->kind == CC_N_IF) {
            cse_block(C, S, n->u.cond.then);
            cse_block(C, S, n->u.cond.els);
        } else if (n->kind == CC_N_WHILE) {
            cse_block(C, S, n->u.loop.head);
            cse_block(C, S, n->u.loop.body);
        } else if (n->kind == CC_N_OP || n->kind == CC_N_CALL) {
            uint64_t h = node_hash(n);
            uint32_t bk = (uint32_t)(h & (S->n_buckets - 1));
            cc_node *hit = NULL;
            for (uint32_t e = S->buckets[bk]; e != UINT32_MAX; e = S->stack[e].prev)
                if (S->stack[e].h == h && node_same(S->stack[e].n, n)) {
                    hit = S->stack[e].n;
                    break;
                }
            if (hit) {
                for (uint32_t k = 0; k < n->n_out; k++)
                    forward(C, n, k, (cc_irval){hit, k});
                cc_node_unlink(n);
                S->changes++;
            } else {
                if (S->n + 1 > S->n_buckets / 2)
                    cse_rehash(C, S);
                bk = (uint32_t)(h & (S->n_buckets - 1));
                S->stack = cc_grow(C, S->stack, S->n, &S->cap, sizeof *S->stack);
                S->stack[S->n] = (cse_ent){h, n, S->buckets[bk]};
                S->buckets[bk] = S->n++;
            }
        }
        n = next;
    }
    for (uint32_t k = 0; k < b->n_res; k++)
        b->res[k] = cc_resolve(b->res[k]);
    /* leave the scope: pop this block's entries */
    while (S->n > mark) {
        cse_ent *e = &S->stack[--S->n];
        S->buckets[(uint32_t)(e->h & (S->n_buckets - 1))] = e->prev;
    }
}

typedef struct const_canon {
    cc_node **table;   /* open addressing by value hash */
    uint32_t n, cap;
} const_canon;

static uint64_t cval_hash(const cc_cval *c)
{
    uint64_t h = hmix(c->dtype, c->rank);
    const unsigned char *p = c->data;
    for (size_t i = 0; i < c->nbytes; i++)
        h = hmix(h, p[i]);
    for (int i = 0; i < c->rank; i++)
        h = hmix(h, (uint64_t)c->dims[i]);
    return h;
}

static cc_node *canon_const(cc *C, const_canon *K, cc_node *c)
{
    if ((K->n + 1) * 2 > K->cap) {
        uint32_t cap = K->cap ? K->cap * 2 : 64;
        cc_node **t = cc_array(C, cap, sizeof *t);
        for (uint32_t i = 0; i < K->cap; i++) {
            if (!K->table[i])
                continue;
            uint32_t j = (uint32_t)cval_hash(&K->table[i]->u.c) & (cap - 1);
            while (t[j])
                j = (j + 1) & (cap - 1);
            t[j] = K->table[i];
        }
        K->table = t;
        K->cap = cap;
    }
    uint32_t j = (uint32_t)cval_hash(&c->u.c) & (K->cap - 1);
    while (K->table[j]) {
        if (cval_eq(&K->table[j]->u.c, &c->u.c))
            return K->table[j];
        j = (j + 1) & (K->cap - 1);
    }
    K->table[j] = c;
    K->n++;
    return c;
}

static void canon_block(cc *C, cc_blk *b, void *ud)
{
    const_canon *K = ud;
    for (cc_node *n = b->first; n; n = n->next) {
        for (uint32_t k = 0; k < n->n_in; k++) {
            cc_irval v = cc_resolve(n->in[k]);
            if (v.n->kind == CC_N_CONST)
                n->in[k] = (cc_irval){canon_const(C, K, v.n), 0};
        }
    }
}

/* ---- Dead code ---------------------------------------------------------------------------- */

/* Output liveness of If/While nodes: one flag per output (or loop variable). */
static bool *olive(cc *C, cc_node *n)
{
    if (!n->olive)
        n->olive = cc_array(C, n->n_out + 1, sizeof(bool));
    return n->olive;
}

/* Marking walks data dependencies, which can be as long as the program:
 * an explicit work list instead of recursion keeps the C stack small. */
typedef struct marker {
    cc *C;
    cc_irval *work;
    uint32_t n, cap;
} marker;

static void push_val(marker *M, cc_irval v)
{
    M->work = cc_grow(M->C, M->work, M->n, &M->cap, sizeof *M->work);
    M->work[M->n++] = v;
}

/* A node is live: its inputs, the structure around it and (for a loop) its
 * condition and first variable are needed. */
static void mark_node(marker *M, cc_node *n)
{
    cc *C = M->C;
    while (n && !n->live) {
        n->live = true;
        if (n->kind == CC_N_IF || n->kind == CC_N_WHILE)
            olive(C, n); /* live for its effects: no output used until marked */
        for (uint32_t k = 0; k < n->n_in; k++)
            if (n->kind != CC_N_WHILE) /* a loop's initial values are marked per live variable */
                push_val(M, n->in[k]);
        if (n->kind == CC_N_WHILE) {
            push_val(M, n->u.loop.head->res[0]);
            push_val(M, (cc_irval){n->u.loop.lvars[0], 0}); /* a loop needs one variable */
        }
        n = n->blk ? n->blk->owner : NULL; /* the structure around a live node runs */
    }
}

static void mark_lvar(marker *M, cc_node *w, uint32_t k)
{
    bool *ol = olive(M->C, w);
    if (ol[k])
        return;
    ol[k] = true;
    mark_node(M, w->u.loop.lvars[k]);
    push_val(M, w->in[k]);
    push_val(M, w->u.loop.body->res[k]);
}

static void mark_all(marker *M)
{
    while (M->n) {
        cc_irval v = cc_resolve(M->work[--M->n]);
        cc_node *n = v.n;
        mark_node(M, n);
        if (n->kind == CC_N_IF) {
            bool *ol = olive(M->C, n);
            if (!ol[v.k]) {
                ol[v.k] = true;
                push_val(M, n->u.cond.then->res[v.k]);
                push_val(M, n->u.cond.els->res[v.k]);
            }
        } else if (n->kind == CC_N_WHILE) {
            mark_lvar(M, n, v.k);
        } else if (n->kind == CC_N_LVAR) {
            mark_lvar(M, n->owner, n->u.index);
        }
    }
}

/* Calls, loops and ops that may fail run even when their results are unused
 * (docs/language.md, "Evaluation"): they are the roots, with the results. */
static void mark_roots(cc *C, cc_blk *b, void *ud)
{
    (void)C;
    marker *M = ud;
    for (cc_node *n = b->first; n; n = n->next)
        if (n->kind == CC_N_CALL || n->kind == CC_N_WHILE || cc_op_may_fail(n))
            mark_node(M, n);
}

static void sweep_block(cc *C, cc_blk *b, void *ud)
{
    (void)C;
    (void)ud;
    for (cc_node *n = b->first; n;) {
        cc_node *next = n->next;
        if (!n->live && n->kind != CC_N_PARAM && n->kind != CC_N_LVAR)
            cc_node_unlink(n);
        n = next;
    }
}

static void clear_marks(cc *C, cc_blk *b, void *ud)
{
    (void)C;
    (void)ud;
    for (cc_node *n = b->first; n; n = n->next) {
        n->live = false;
        if (n->kind == CC_N_IF || n->kind == CC_N_WHILE)
            n->olive = NULL;
    }
}

static void reach_calls(cc *C, cc_blk *b, void *ud)
{
    (void)C;
    bool *changed = ud;
    for (cc_node *n = b->first; n; n = n->next)
        if (n->kind == CC_N_CALL && n->u.call.callee->dropped) {
            n->u.call.callee->dropped = false;
            *changed = true;
        }
}

static void entry_calls(cc *C, cc_blk *b, void *ud)
{
    (void)ud;
    for (cc_node *n = b->first; n; n = n->next)
        if (n->kind == CC_N_CALL && n->u.call.callee == C->entry_ifn)
            C->entry_wrapped = true;
}

void cc_dce(cc *C)
{
    for (uint32_t i = 0; i < C->n_ifns; i++) {
        cc_ifn *fn = C->ifns[i];
        each_block(C, fn->top, clear_marks, NULL);
        for (uint32_t k = 0; k < fn->n_params; k++)
            fn->params[k]->live = false;
        marker M = {C, NULL, 0, 0};
        for (uint32_t k = 0; k < fn->top->n_res; k++)
            push_val(&M, fn->top->res[k]);
        each_block(C, fn->top, mark_roots, &M);
        mark_all(&M);
        each_block(C, fn->top, sweep_block, NULL);
        fn->gate_param = 0;
        bool found = false;
        for (uint32_t k = 0; k < fn->n_params; k++) {
            fn->param_live[k] = fn->params[k]->live;
            if (fn->param_live[k] && !found) {
                fn->gate_param = k;
                found = true;
            }
        }
    }
    /* functions still called from the entry */
    for (uint32_t i = 0; i < C->n_ifns; i++)
        C->ifns[i]->dropped = C->ifns[i] != C->entry_ifn;
    bool changed = true;
    while (changed) {
        changed = false;
        for (uint32_t i = 0; i < C->n_ifns; i++)
            if (!C->ifns[i]->dropped)
                each_block(C, C->ifns[i]->top, reach_calls, &changed);
    }
    C->entry_wrapped = false;
    for (uint32_t i = 0; i < C->n_ifns; i++)
        if (!C->ifns[i]->dropped)
            each_block(C, C->ifns[i]->top, entry_calls, NULL);
}

void cc_optimize(cc *C)
{
    for (uint32_t i = 0; i < C->n_ifns; i++) {
        cc_ifn *fn = C->ifns[i];
        for (int round = 0; round < 4; round++) {
            const_canon K = {0};
            each_block(C, fn->top, canon_block, &K);
            fold_state S = {0};
            fold_block(C, fn->top, &S);
            cse X = {0};
            X.n_buckets = 256;
            X.buckets = cc_array(C, X.n_buckets, sizeof *X.buckets);
            memset(X.buckets, 0xff, X.n_buckets * sizeof *X.buckets);
            cse_block(C, &X, fn->top);
            each_block(C, fn->top, resolve_block, NULL);
            if (!S.changes && !X.changes)
                break;
        }
    }
    cc_dce(C);
}
