/* compiler/opt.c — optimizations on the structured IR: constant folding
 * (with the VM's own kernels, so folded and run-time results agree; tensors
 * under a size heuristic) and algebraic simplification, common-subexpression
 * elimination (pure ops and calls of pure functions; a call that feeds or
 * fetches takes an order token no other call takes), transpositions that
 * cancel or that a product can read with its ta/tb, fusion of MATMUL/CONV2D
 * with a bias ADD and an activation, and dead-code elimination, which also
 * finds the parameters a function reads and the functions still called. */
#include <math.h>
#include <string.h>

#include "compiler.h"
#include "devices/cpu/cpu.h"
#include "devices/tensor.h"
#include "isa/shape.h"

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

typedef struct fold_state {
    uint32_t changes;
    bool params_sure; /* the entry is called from nowhere: its parameters are the run's arguments */
} fold_state;

static bool proven_safe(cc *C, const fold_state *S, const cc_node *n);
static int const_perm(const cc_node *n, int64_t *p);

#define MAX_SURE_IN 4

/* The ops whose guaranteed shapes follow from their operands': the
 * elementwise ones and what exporters put between a parameter and a SHAPE. */
static bool sure_rule(uint32_t op)
{
    switch (isa_ops[op].cls) {
    case ISA_CLASS_BINARY:
    case ISA_CLASS_UNARY:
    case ISA_CLASS_COMPARE:
    case ISA_CLASS_LOGIC:
    case ISA_CLASS_SELECT:
        return true;
    default:
        return op == ISA_TRANSPOSE || op == ISA_RESHAPE || op == ISA_MATMUL || op == ISA_FUSED_MATMUL ||
               op == ISA_CONV2D || op == ISA_FUSED_CONV2D || op == ISA_FUSED_CONV2D_ADD || op == ISA_MAXPOOL ||
               op == ISA_AVGPOOL;
    }
}

/* ---- Shapes the run guarantees ----------------------------------------------------------- *
 * A SHAPE whose operand's dims are all known is a constant, and so is what
 * exporters compute from it (TensorFlow's SAME padding, ONNX's Shape ->
 * Gather -> Concat -> Reshape chains: the TFDeploy report's Figure 7). Only
 * dims the run guarantees count: a constant's, an entry parameter's (every
 * argument is checked against its declared shape, vm/signature.c), and what
 * TRANSPOSE, RESHAPE, MATMUL and the elementwise ops make of those when they
 * succeed (a SHAPE after one that fails never runs). A type an importer wrote
 * is a claim, not a guarantee, and is not used. The rank, or -1. */
static int sure_dims(cc *C, const fold_state *S, cc_irval v, int64_t *dims, int depth)
{
    v = cc_resolve(v);
    const cc_node *n = v.n;
    if (depth <= 0)
        return -1;
    if (n->kind == CC_N_CONST) {
        memcpy(dims, n->u.c.dims, sizeof(int64_t) * n->u.c.rank);
        return n->u.c.rank;
    }
    if (n->kind == CC_N_PARAM) {
        cc_ifn *fn = n->blk ? n->blk->fn : NULL;
        if (!S->params_sure || fn != C->entry_ifn || !fn->src || n->u.index >= fn->src->n_params)
            return -1;
        const cc_vtype *t = &fn->src->params[n->u.index].type;
        if (!t->tensor)
            return 0;
        if (t->rank > TFVM_MAX_RANK)
            return -1;
        memcpy(dims, t->dims, sizeof(int64_t) * t->rank);
        return t->rank;
    }
    if (n->kind != CC_N_OP || n->n_in > MAX_SURE_IN || !sure_rule(n->op))
        return -1;
    /* the op's rule (isa/shape.h) on its operands' guaranteed dims and the
     * values of its constant i64 operands (permutations, targets, parameters);
     * a rule that proves a failure gives nothing */
    isa_shape x[MAX_SURE_IN], o;
    int64_t vals[MAX_SURE_IN][16];
    for (uint32_t k = 0; k < n->n_in; k++) {
        x[k] = (isa_shape){.n_vals = -1, .vals = vals[k]};
        x[k].rank = (int8_t)sure_dims(C, S, n->in[k], x[k].dims, depth - 1);
        const cc_cval *c = is_const(n->in[k]) ? cval(n->in[k]) : NULL;
        if (c && c->dtype == TFVM_I64 && c->rank <= 1 && c->nbytes <= sizeof vals[k]) {
            x[k].n_vals = (int)(c->nbytes / sizeof(int64_t));
            memcpy(vals[k], c->data, c->nbytes);
        }
    }
    char msg[1];
    if (isa_shape_rule(n->op, n->attr, x, n->n_in, &o, msg, sizeof msg) != TFVM_OK || o.rank < 0)
        return -1;
    memcpy(dims, o.dims, sizeof(int64_t) * (size_t)o.rank);
    return o.rank;
}

/* SHAPE of a value whose dims the run guarantees: an i64 vector constant. */
static bool fold_shape(cc *C, const fold_state *S, cc_node *n)
{
    int64_t dims[TFVM_MAX_RANK];
    int r = sure_dims(C, S, n->in[0], dims, 32);
    if (r < 0)
        return false;
    for (int k = 0; k < r; k++)
        if (dims[k] < 0)
            return false;
    cc_node *k = cc_node_new(C, NULL, CC_N_CONST, 0, 1, n->pos);
    k->blk = n->blk;
    k->types[0] = (cc_vtype){.dtype = TFVM_I64, .tensor = 1, .rank = 1, .dims = {r}};
    void *p = cc_alloc(C, r ? sizeof(int64_t) * (size_t)r : 1);
    memcpy(p, dims, sizeof(int64_t) * (size_t)r);
    k->u.c = (cc_cval){.dtype = TFVM_I64, .rank = 1, .dims = {r}, .nbytes = sizeof(int64_t) * (size_t)r, .data = p};
    forward(C, n, 0, (cc_irval){k, 0});
    return true;
}

/* ---- Folding tensors ------------------------------------------------------------------ *
 * A folded result becomes a constant of the program file, so folding trades
 * run time for file size. TFDeploy's report (section 2.4) shows the trap: a
 * ConstantOfShape, Tile or Expand of a few bytes to a large shape would
 * store megabytes of zeros instead of three small nodes. A tensor result is
 * folded only when it is at most FOLD_SMALL bytes (shape vectors, small
 * tables: what later folding and the analyser feed on; 4 KiB is about what
 * the instructions it replaces cost in a .tfvm file) or no larger than its
 * constant inputs together (a RESHAPE or TRANSPOSE of a weight: the inputs
 * usually die, so the file does not grow). The kernel runs with an allocator
 * that refuses any block beyond that bound (plus the tensor header), so a
 * huge result is never even computed. */
#define FOLD_SMALL 4096
#define FOLD_SLACK 256 /* the tensor header and alignment in the same block */

typedef struct fold_alloc {
    const tfvm_allocator *base;
    size_t cap;
    bool refused, failed;
} fold_alloc;

static void *fold_alloc_fn(void *ud, void *ptr, size_t old_size, size_t new_size)
{
    fold_alloc *fa = ud;
    if (new_size == 0) {
        ut_free(fa->base, ptr, old_size);
        return NULL;
    }
    if (new_size > fa->cap) {
        fa->refused = true;
        return NULL;
    }
    void *p = ptr ? ut_realloc(fa->base, ptr, old_size, new_size) : ut_alloc(fa->base, new_size);
    if (!p)
        fa->failed = true;
    return p;
}

/* A constant node for c, whose data is already in the arena. */
static cc_irval new_tensor_const(cc *C, cc_node *at, const cc_cval *c)
{
    cc_node *n = cc_node_new(C, NULL, CC_N_CONST, 0, 1, at->pos);
    n->blk = at->blk;
    cc_vtype ty = {.dtype = c->dtype, .tensor = 1, .rank = c->rank};
    memcpy(ty.dims, c->dims, sizeof(int64_t) * c->rank);
    n->types[0] = ty;
    n->u.c = *c;
    return (cc_irval){n, 0};
}

/* The folded result as a constant: its elements copied into the arena
 * (false: no memory), its shape and dtype; a scalar's value in *c's place. */
static bool fold_result(cc *C, const dev_value *out, cc_cval *c)
{
    if (!out->is_tensor)
        return true;
    const tfvm_tensor *t = out->u.t;
    void *p = ut_arena_alloc(&C->ar, t->nbytes ? t->nbytes : 1); /* no unwinding: tensors are held */
    if (!p)
        return false;
    if (t->nbytes)
        memcpy(p, t->data, t->nbytes);
    *c = (cc_cval){.dtype = t->dtype, .rank = t->rank, .nbytes = t->nbytes, .data = p};
    memcpy(c->dims, t->dims, sizeof(int64_t) * t->rank);
    return true;
}

/* Compute op `op` on constants c[0..n) (at most 8), at least one a tensor:
 * its kernel run under the size bound (the result at most max(the inputs'
 * bytes, FOLD_SMALL)); true with the result in *result (arena memory), false
 * when the kernel fails or the result would be larger. The kernel's tensors
 * are not arena memory, so they are all released before anything that may
 * unwind (cc_nomem) runs. *scalar is the result when it is not a tensor
 * (scalar->is_tensor then 0), else scalar->is_tensor is 1. */
static bool fold_eval(cc *C, uint16_t op, uint32_t attr, const cc_cval *const *c, uint32_t n, cc_cval *result,
                      dev_value *scalar)
{
    const isa_class cls = isa_ops[op].cls;
    dev_value in[8];
    uint32_t k = 0;
    size_t in_bytes = 0;
    bool ok = true;
    fold_alloc fa = {.base = &C->ar.alloc};
    tfvm_allocator alloc = {.fn = fold_alloc_fn, .ud = &fa};
    for (; k < n && ok; k++) {
        in[k] = (dev_value){.dtype = c[k]->dtype};
        if (!c[k]->rank) {
            memcpy(&in[k].u, c[k]->data, c[k]->nbytes);
            continue;
        }
        fa.cap = SIZE_MAX;
        tfvm_tensor *t = dev_tensor_alloc(&alloc, (tfvm_dtype)c[k]->dtype, c[k]->rank, c[k]->dims);
        if (!t) {
            ok = false;
            break;
        }
        if (c[k]->nbytes)
            memcpy(t->data, c[k]->data, c[k]->nbytes);
        in[k].is_tensor = 1;
        in[k].u.t = t;
        in_bytes += c[k]->nbytes;
    }
    bool folded = false, nomem = false;
    dev_value out = {0};
    if (ok) {
        fa.cap = (in_bytes > FOLD_SMALL ? in_bytes : FOLD_SMALL) + FOLD_SLACK;
        char msg[160];
        tfvm_status st = cls == ISA_CLASS_TENSOR
                             ? dev_cpu_tensor((isa_op)op, attr, in, n, &out, &alloc, msg, sizeof msg)
                             : dev_cpu_elementwise((isa_op)op, attr, in, &out, &alloc, msg, sizeof msg);
        if (st == TFVM_OK) {
            folded = !out.is_tensor || out.u.t->nbytes <= fa.cap - FOLD_SLACK;
            nomem = folded && !fold_result(C, &out, result);
        }
    }
    for (uint32_t j = 0; j < k; j++)
        dev_value_release(&in[j]);
    *scalar = out.is_tensor ? (dev_value){.is_tensor = 1} : out;
    dev_value_release(&out); /* a scalar result keeps its value */
    if (fa.failed || nomem)
        cc_nomem(C);
    return folded;
}

/* A compute op whose operands are all constants, one of them a tensor:
 * folded by fold_eval into a constant its uses take instead. */
static bool fold_tensor_op(cc *C, cc_node *n)
{
    if (!isa_is_compute(isa_ops[n->op].cls) || n->n_in > 8 || n->n_out != 1)
        return false;
    const cc_cval *c[8];
    for (uint32_t k = 0; k < n->n_in; k++)
        c[k] = cval(n->in[k]);
    cc_cval result = {0};
    dev_value scalar = {0};
    if (!fold_eval(C, n->op, n->attr, c, n->n_in, &result, &scalar))
        return false;
    forward(C, n, 0, scalar.is_tensor ? new_tensor_const(C, n, &result) : new_const(C, n, &scalar));
    return true;
}

/* Folds an op on constants; kernel failures (division by zero,
 * unrepresentable casts, shapes that do not fit) stay in the program as
 * run-time errors. */
static bool fold_op(cc *C, const fold_state *S, cc_node *n)
{
    dev_value in[4];
    if (n->n_in > 8 || n->n_out != 1 || n->op == ISA_WORKERS) /* the run's, not the compiler's */
        return false;
    if (n->op == ISA_SHAPE && !is_const(n->in[0]))
        return fold_shape(C, S, n);
    bool tensors = n->types[0].tensor;
    for (uint32_t k = 0; k < n->n_in; k++) {
        if (!is_const(n->in[k]))
            return false;
        tensors = tensors || cval(n->in[k])->rank;
    }
    if (tensors)
        return n->kind == CC_N_OP && fold_tensor_op(C, n);
    if (n->n_in > 4)
        return false;
    for (uint32_t k = 0; k < n->n_in; k++)
        in[k] = to_dev(cval(n->in[k]));
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


static void fold_block(cc *C, cc_blk *b, fold_state *S);

/* Whether every variable of While w leaves the loop as itself (not as an
 * order token its condition moved). */
static bool exits_are_vars(const cc_node *w)
{
    for (uint32_t k = 0; k < w->n_out; k++)
        if (cc_resolve(cc_loop_exit(w, k)).n != w->u.loop.lvars[k])
            return false;
    return true;
}

/* FEED and FETCH are the program's dialogue with its host: each one is kept
 * where it is, once (never folded, merged with another, or moved). */
static bool is_host(const cc_node *n) { return n->kind == CC_N_OP && isa_ops[n->op].cls == ISA_CLASS_HOST; }

static void fold_node(cc *C, cc_node *n, fold_state *S, cc_node **next)
{
    resolve_inputs(n);
    switch (n->kind) {
    case CC_N_OP:
        if (!is_host(n) && (fold_op(C, S, n) || simplify_op(C, n))) {
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
        if (const_int(n->u.loop.head->res[0], &c) && c == 0 && pure_block(n->u.loop.head) && exits_are_vars(n)) {
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

/* Ops whose two operands may swap without changing any bit of the result.
 * Not MIN and MAX: of two zeros of opposite sign they give the second. */
static bool commutative(uint16_t op)
{
    return op == ISA_ADD || op == ISA_MUL || op == ISA_EQUAL || op == ISA_NOT_EQUAL || op == ISA_AND ||
           op == ISA_OR;
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
        } else if ((n->kind == CC_N_OP && !is_host(n)) || n->kind == CC_N_CALL) {
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
    uint64_t h = hmix(hmix(c->dtype, c->rank), ut_hash_bytes(c->data, c->nbytes));
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

static void find_entry_calls(cc *C, cc_blk *b, void *ud)
{
    bool *found = ud;
    for (cc_node *n = b->first; n; n = n->next)
        if (n->kind == CC_N_CALL && n->u.call.callee == C->entry_ifn)
            *found = true;
}

/* Whether some function calls the entry (then its parameters also take
 * values other than the run's checked arguments). */
static bool entry_called(cc *C)
{
    bool found = false;
    for (uint32_t i = 0; i < C->n_ifns; i++)
        each_block(C, C->ifns[i]->top, find_entry_calls, &found);
    return found;
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
    fold_state S; /* what proven_safe may assume */
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
    push_val(M, cc_loop_exit(w, k));
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
        if (n->kind == CC_N_CALL || n->kind == CC_N_WHILE || (cc_op_may_fail(n) && !proven_safe(M->C, &M->S, n)))
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
    bool params_sure = !entry_called(C);
    for (uint32_t i = 0; i < C->n_ifns; i++) {
        cc_ifn *fn = C->ifns[i];
        each_block(C, fn->top, clear_marks, NULL);
        for (uint32_t k = 0; k < fn->n_params; k++)
            fn->params[k]->live = false;
        marker M = {C, NULL, 0, 0, {.params_sure = params_sure}};
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

/* A FILL of a constant shape (dims >= 0, their product an int64) with a
 * constant scalar */
static bool fill_safe(const cc_node *n)
{
    if (!is_const(n->in[0]) || !is_const(n->in[1]))
        return false;
    const cc_cval *s = cval(n->in[0]), *v = cval(n->in[1]);
    if (v->rank != 0 || s->dtype != TFVM_I64 || s->rank != 1 || s->dims[0] > TFVM_MAX_RANK)
        return false;
    int64_t count = 1;
    for (int64_t k = 0; k < s->dims[0]; k++) {
        int64_t d;
        memcpy(&d, (const char *)s->data + 8 * k, 8);
        if (d < 0 || (d > 0 && count > INT64_MAX / d))
            return false;
        count *= d;
    }
    return true;
}

/* A tensor op that may fail in general (ops.def: YES) but provably does not
 * here, so that dead-code elimination may drop it when nothing uses it:
 * SHAPE (never fails), FILL of a constant shape, TRANSPOSE by a constant
 * permutation of its input's guaranteed rank, RESHAPE whose guaranteed input count its constant target
 * takes. (Memory running out is not a failure a program is kept for.) */
static bool proven_safe(cc *C, const fold_state *S, const cc_node *n)
{
    int64_t d[TFVM_MAX_RANK], o[TFVM_MAX_RANK];
    if (n->kind != CC_N_OP)
        return false;
    if (n->op == ISA_SHAPE)
        return true;
    if (n->op == ISA_FILL)
        return fill_safe(n);
    if (n->op != ISA_TRANSPOSE && n->op != ISA_RESHAPE)
        return false;
    if (n->op == ISA_TRANSPOSE) {
        /* a permutation of its input's rank, which its type says (a FEED's
         * type is checked when the value comes), cannot fail */
        cc_irval x = cc_resolve(n->in[0]);
        const cc_vtype *t = &x.n->types[x.k];
        int64_t p[TFVM_MAX_RANK];
        if (t->tensor && t->rank != ISA_RANK_ANY && const_perm(n, p) == (int)t->rank) {
            bool seen[TFVM_MAX_RANK] = {false};
            int k = 0;
            while (k < (int)t->rank && !seen[p[k]])
                seen[p[k++]] = true;
            if (k == (int)t->rank)
                return true;
        }
    }
    const cc_cval *c = is_const(n->in[1]) ? cval(n->in[1]) : NULL;
    if (!c || c->dtype != TFVM_I64 || c->rank != 1 || c->dims[0] > TFVM_MAX_RANK)
        return false; /* the rule knows the permutation or target */
    int r = sure_dims(C, S, n->in[0], d, 32);
    if (r < 0)
        return false;
    if (n->op == ISA_RESHAPE)
        for (int k = 0; k < r; k++)
            if (d[k] < 0)
                return false;
    /* sure_dims of the op itself is -1 for a bad permutation or target */
    return sure_dims(C, S, (cc_irval){(cc_node *)n, 0}, o, 33) >= 0;
}

/* ---- Transposes ------------------------------------------------------------------------------ *
 * Front ends with a layout of their own (TensorFlow's NHWC) wrap every
 * convolution and pool in TRANSPOSEs to and from NCHW. A TRANSPOSE of a
 * TRANSPOSE that undoes it is its input; so is one that undoes a TRANSPOSE
 * under a unary elementwise op (relu(T(x)) transposed back is relu(x): the
 * same elements, each computed the same way). */
typedef struct tp_state {
    uint32_t *uses;
    uint32_t changes;
} tp_state;

static void count_uses_tp(cc *C, cc_blk *b, void *ud)
{
    (void)C;
    tp_state *T = ud;
    for (cc_node *n = b->first; n; n = n->next)
        for (uint32_t k = 0; k < n->n_in; k++)
            T->uses[cc_resolve(n->in[k]).n->id]++;
    for (uint32_t k = 0; k < b->n_res; k++)
        T->uses[cc_resolve(b->res[k]).n->id]++;
}

/* The permutation of a TRANSPOSE node with a constant one, into p; its length or -1. */
static int const_perm(const cc_node *n, int64_t *p)
{
    if (n->kind != CC_N_OP || n->op != ISA_TRANSPOSE || !is_const(n->in[1]))
        return -1;
    const cc_cval *c = cval(n->in[1]);
    if (c->dtype != TFVM_I64 || c->rank != 1 || c->dims[0] < 1 || c->dims[0] > TFVM_MAX_RANK)
        return -1;
    int m = (int)c->dims[0];
    memcpy(p, c->data, sizeof(int64_t) * (size_t)m);
    for (int k = 0; k < m; k++) {
        if (p[k] < 0)
            p[k] += m;
        if (p[k] < 0 || p[k] >= m)
            return -1;
    }
    return m;
}

/* Whether TRANSPOSE q after TRANSPOSE p is the identity. */
static bool undoes(const int64_t *p, int np, const int64_t *q, int nq)
{
    if (np != nq)
        return false;
    for (int i = 0; i < np; i++)
        if (p[q[i]] != i)
            return false;
    return true;
}

/* The operand of chain op x that is not a constant (the chain's value), or
 * -1 when x cannot carry a transposition: a unary op, or an arithmetic one
 * whose other operand is a constant that the transposition only reshapes. */
#define SINK_MAX 16
static int chain_operand(const cc_node *x, int r, const int64_t *q)
{
    if (x->kind != CC_N_OP || x->n_out != 1)
        return -1;
    if (isa_ops[x->op].cls == ISA_CLASS_UNARY && x->n_in == 1 && x->op != ISA_CAST)
        return 0;
    if (isa_ops[x->op].cls != ISA_CLASS_BINARY || x->n_in != 2)
        return -1;
    int k = is_const(x->in[0]) ? 1 : is_const(x->in[1]) ? 0 : -1;
    if (k < 0 || is_const(x->in[k]))
        return -1;
    /* the constant, expanded to rank r from the left: its dims > 1 must keep
     * their order under q, so that its data stays as it is */
    const cc_cval *c = cval(x->in[1 - k]);
    if (c->rank > r)
        return -1;
    int64_t e[TFVM_MAX_RANK];
    for (int i = 0; i < r; i++)
        e[i] = i < r - c->rank ? 1 : c->dims[i - (r - c->rank)];
    int last = -1;
    for (int i = 0; i < r; i++)
        if (e[q[i]] != 1) {
            if (q[i] < last)
                return -1;
            last = (int)q[i];
        }
    return k;
}

/* TRANSPOSE n (permutation q) that undoes a TRANSPOSE p a chain of
 * elementwise ops before it (unary ones, or arithmetic with a constant, as
 * TensorFlow's NHWC bias, batch norm and activation between NCHW layers):
 * both transpositions go, the chain computes in p's input's layout, and
 * each constant gets the dims of that layout (its data unchanged). Every
 * op of the chain has one use, in block b. */
static bool sink_chain(cc *C, tp_state *T, cc_blk *b, cc_node *n, const int64_t *q, int nq, cc_node **next)
{
    cc_node *chain[SINK_MAX];
    int len = 0, at[SINK_MAX];
    cc_node *x = cc_resolve(n->in[0]).n;
    int64_t p[TFVM_MAX_RANK];
    for (;;) {
        if (x->blk != b || T->uses[x->id] != 1)
            return false;
        int np = const_perm(x, p);
        if (np >= 0) {
            if (len == 0 || !undoes(p, np, q, nq))
                return false;
            break;
        }
        int k = len < SINK_MAX ? chain_operand(x, nq, q) : -1;
        if (k < 0)
            return false;
        chain[len] = x;
        at[len++] = k;
        x = cc_resolve(x->in[k]).n;
    }
    cc_node *t = x; /* TRANSPOSE p */
    for (int j = 0; j < len; j++) {
        cc_node *y = chain[j];
        cc_irval *in = cc_array(C, y->n_in, sizeof *in);
        for (uint32_t i = 0; i < y->n_in; i++)
            in[i] = cc_resolve(y->in[i]);
        if (j == len - 1)
            in[at[j]] = cc_resolve(t->in[0]);
        if (y->n_in == 2) {
            const cc_cval *c = cval(in[1 - at[j]]);
            if (c->rank > 0) {
                cc_node *k = cc_node_new(C, NULL, CC_N_CONST, 0, 1, y->pos);
                k->blk = b;
                cc_cval nc = *c;
                int64_t e[TFVM_MAX_RANK];
                for (int i = 0; i < nq; i++)
                    e[i] = i < nq - c->rank ? 1 : c->dims[i - (nq - c->rank)];
                nc.rank = (uint8_t)nq;
                for (int i = 0; i < nq; i++)
                    nc.dims[i] = e[q[i]];
                k->u.c = nc;
                k->types[0] = (cc_vtype){.dtype = c->dtype, .tensor = 1, .rank = (uint8_t)nq};
                memcpy(k->types[0].dims, nc.dims, sizeof nc.dims);
                in[1 - at[j]] = (cc_irval){k, 0};
            }
        }
        y->in = in;
        /* its result in the new layout: what TRANSPOSE q made of it */
        cc_vtype *ty = &y->types[0];
        if (ty->tensor && ty->rank != ISA_RANK_ANY && ty->rank == nq) {
            int64_t d[TFVM_MAX_RANK];
            for (int i = 0; i < nq; i++)
                d[i] = ty->dims[q[i]];
            memcpy(ty->dims, d, sizeof(int64_t) * (size_t)nq);
        }
    }
    forward(C, n, 0, (cc_irval){chain[0], 0});
    T->uses[chain[0]->id] += T->uses[n->id] - 1;
    if (*next == t)
        *next = t->next;
    cc_node_unlink(t);
    cc_node_unlink(n);
    return true;
}

static void transpose_block(cc *C, cc_blk *b, void *ud)
{
    tp_state *T = ud;
    for (cc_node *n = b->first; n;) {
        cc_node *next = n->next;
        int64_t q[TFVM_MAX_RANK], p[TFVM_MAX_RANK];
        int nq = const_perm(n, q);
        if (nq < 0) {
            n = next;
            continue;
        }
        resolve_inputs(n);
        cc_node *x = n->in[0].n;
        int np = const_perm(x, p);
        if (np >= 0 && undoes(p, np, q, nq)) {
            cc_irval x0 = cc_resolve(x->in[0]);
            forward(C, n, 0, x0);
            T->uses[x0.n->id] += T->uses[n->id]; /* n's users now use x0 */
            T->uses[x->id]--;
            cc_node_unlink(n);
            T->changes++;
        } else if (sink_chain(C, T, b, n, q, nq, &next)) {
            T->changes++;
        }
        n = next;
    }
}

/* A product of a TRANSPOSE that swaps its operand's last two dims (x.T @ w,
 * the backward passes' h.T @ g) reads the TRANSPOSE's input with MATMUL's
 * ta/tb instead: the kernel packs the operand either way, and the transposed
 * copy (a strided pass over the whole operand) is gone once nothing else
 * reads it (dead-code elimination). Within one block only, as sink_chain. */
static bool swaps_last_two(const int64_t *p, int n)
{
    if (n < 2 || p[n - 2] != n - 1 || p[n - 1] != n - 2)
        return false;
    for (int i = 0; i < n - 2; i++)
        if (p[i] != i)
            return false;
    return true;
}

static void transposed_operands_block(cc *C, cc_blk *b, void *ud)
{
    (void)C;
    tp_state *T = ud;
    for (cc_node *n = b->first; n; n = n->next) {
        if (n->kind != CC_N_OP || (n->op != ISA_MATMUL && n->op != ISA_FUSED_MATMUL))
            continue;
        for (uint32_t k = 0; k < 2; k++) {
            cc_node *x = cc_resolve(n->in[k]).n;
            int64_t p[TFVM_MAX_RANK];
            int np = const_perm(x, p);
            if (x->blk != b || !swaps_last_two(p, np))
                continue;
            n->in[k] = cc_resolve(x->in[0]);
            n->attr ^= k == 0 ? ISA_OPT_TRANS_A : ISA_OPT_TRANS_B;
            T->changes++;
        }
    }
}

static void transposes(cc *C, cc_ifn *fn)
{
    tp_state T = {0};
    T.uses = cc_array(C, C->next_node_id + 1, sizeof *T.uses);
    each_block(C, fn->top, count_uses_tp, &T);
    each_block(C, fn->top, transpose_block, &T);
    each_block(C, fn->top, resolve_block, NULL);
    each_block(C, fn->top, transposed_operands_block, &T);
}

/* ---- Fusion ------------------------------------------------------------------------------ *
 * MATMUL (CONV2D) whose only use is an ADD of a bias, and that ADD's only use
 * an activation (RELU, SIGMOID, TANH, or one spelled in several ops: below;
 * optional), become one FUSED_MATMUL (FUSED_CONV2D): one pass over the
 * result instead of several, and fewer firings and tensors. The fused op
 * computes exactly what the ops did
 * (docs/isa.md). Only within one block (moving a product into a branch
 * would change whether its failure can happen), only f32/f64 (the fused
 * kernels' dtypes), and only a bias of the shape the fused op takes: one
 * that broadcasts to MATMUL's product without growing it, or CONV2D's [O]. */
typedef struct fuse_state {
    uint32_t *uses;    /* per node id: uses of its outputs (resolved) */
    cc_node **user;    /* per node id: its last user (the only one when uses == 1) */
    uint32_t fused;
} fuse_state;

static void count_uses(cc *C, cc_blk *b, void *ud)
{
    (void)C;
    fuse_state *S = ud;
    for (cc_node *n = b->first; n; n = n->next)
        for (uint32_t k = 0; k < n->n_in; k++) {
            cc_irval v = cc_resolve(n->in[k]);
            S->uses[v.n->id]++;
            S->user[v.n->id] = n;
        }
    for (uint32_t k = 0; k < b->n_res; k++) {
        cc_irval v = cc_resolve(b->res[k]);
        S->uses[v.n->id]++;
        S->user[v.n->id] = NULL; /* a block result: not an op to fuse into */
    }
}

/* A single-use op of kind `op` in block b producing v, or NULL. */
static cc_node *sole_op(const fuse_state *S, cc_irval v, uint16_t op, const cc_blk *b)
{
    v = cc_resolve(v);
    cc_node *n = v.n;
    return n->kind == CC_N_OP && n->op == op && n->blk == b && S->uses[n->id] == 1 ? n : NULL;
}

static const cc_vtype *vtype(cc_irval v)
{
    v = cc_resolve(v);
    return &v.n->types[v.k];
}

static bool known_rank(const cc_vtype *t) { return t->tensor && t->rank != ISA_RANK_ANY; }

/* The dims of value v as far as known (-1: unknown): its type's, completed
 * from its producer where the type lacks them (importers often know only
 * ranks, or not even those): a unary op has its input's shape; a product
 * (MATMUL, FUSED_MATMUL) of matrices is batch + [M, N] with M and N from its
 * operands. The rank, or -1 when unknown. `depth` bounds the walk. */
static int known_dims(cc_irval v, int64_t *dims, int depth)
{
    v = cc_resolve(v);
    const cc_node *n = v.n;
    const cc_vtype *o = &n->types[v.k];
    if (!o->tensor)
        return 0;
    for (int k = 0; k < TFVM_MAX_RANK; k++)
        dims[k] = known_rank(o) ? o->dims[k] : -1;
    int r = known_rank(o) ? o->rank : -1;
    if (n->kind != CC_N_OP || depth <= 0)
        return r;
    if (isa_ops[n->op].cls == ISA_CLASS_UNARY && n->op != ISA_CAST && r < 0)
        return known_dims(n->in[0], dims, depth - 1);
    if (n->op == ISA_MATMUL || n->op == ISA_FUSED_MATMUL) {
        int64_t a[TFVM_MAX_RANK], b[TFVM_MAX_RANK];
        int ra = known_dims(n->in[0], a, depth - 1), rb = known_dims(n->in[1], b, depth - 1);
        if (ra < 2 || rb < 2) /* a vector operand drops a dim: leave it to the type */
            return r;
        int pr = ra > rb ? ra : rb;
        if (r >= 0 && r != pr)
            return r;
        r = pr;
        bool ta = n->attr & ISA_OPT_TRANS_A, tb = n->attr & ISA_OPT_TRANS_B;
        if (dims[r - 2] < 0)
            dims[r - 2] = a[ta ? ra - 1 : ra - 2];
        if (dims[r - 1] < 0)
            dims[r - 1] = b[tb ? rb - 2 : rb - 1];
    }
    return r;
}

/* Whether bias broadcasts to MATMUL's product without changing its shape:
 * each of its dims is 1 or the product's (known) dim there, and the product
 * is of matrices (no vector operand dropping a dim). */
static bool matmul_bias_fits(const cc_node *mm, cc_irval bias)
{
    int64_t pd[TFVM_MAX_RANK], bd[TFVM_MAX_RANK], x[TFVM_MAX_RANK];
    int r = known_dims((cc_irval){(cc_node *)mm, 0}, pd, 8), br = known_dims(bias, bd, 8);
    if (known_dims(mm->in[0], x, 8) < 2 || known_dims(mm->in[1], x, 8) < 2)
        return false;
    if (br == 0)
        return true;
    if (r < 2 || br < 0 || br > r)
        return false;
    for (int i = 0; i < br; i++) {
        int64_t d = bd[i], e = pd[r - br + i];
        if (d != 1 && (d < 0 || d != e))
            return false;
    }
    return true;
}

/* The [O] vector that CONV2D's ADD operand `v` adds per output channel, or
 * {NULL}: a RESHAPE of an [O] vector to [1, O, 1, 1] or [O, 1, 1] (-1 for O
 * allowed), or a constant of one of those shapes. *reshape gets the RESHAPE
 * when v's only use is this ADD (it goes with the fusion). */
static cc_irval conv_bias(cc *C, const fuse_state *S, cc_irval v, int64_t O, cc_node *at, cc_node **reshape)
{
    v = cc_resolve(v);
    cc_node *n = v.n;
    const cc_vtype *t = &n->types[v.k];
    *reshape = NULL;
    if (n->kind == CC_N_OP && n->op == ISA_RESHAPE && is_const(n->in[1])) {
        const cc_vtype *x = vtype(n->in[0]);
        const cc_cval *s = cval(n->in[1]);
        if (!x->tensor || x->rank != 1 || x->dims[0] != O || s->dtype != TFVM_I64 || s->rank != 1 ||
            s->dims[0] < 3 || s->dims[0] > 4)
            return (cc_irval){NULL, 0};
        int64_t sh[4];
        memcpy(sh, s->data, (size_t)s->dims[0] * sizeof *sh);
        int L = (int)s->dims[0];
        for (int i = 0; i < L; i++)
            if (i == L - 3 ? sh[i] != O && sh[i] != -1 : sh[i] != 1)
                return (cc_irval){NULL, 0};
        if (S->uses[n->id] == 1)
            *reshape = n;
        return cc_resolve(n->in[0]);
    }
    if (n->kind == CC_N_CONST && (n->u.c.rank == 3 || n->u.c.rank == 4) && t->dtype == n->u.c.dtype) {
        const cc_cval *c = &n->u.c;
        for (int i = 0; i < c->rank; i++)
            if (i == c->rank - 3 ? c->dims[i] != O : c->dims[i] != 1)
                return (cc_irval){NULL, 0};
        cc_node *k = cc_node_new(C, NULL, CC_N_CONST, 0, 1, at->pos);
        k->blk = at->blk;
        k->types[0] = (cc_vtype){.dtype = c->dtype, .tensor = 1, .rank = 1, .dims = {O}};
        k->u.c = (cc_cval){.dtype = c->dtype, .rank = 1, .dims = {O}, .nbytes = c->nbytes, .data = c->data};
        return (cc_irval){k, 0};
    }
    return (cc_irval){NULL, 0};
}

/* ---- Activations after the sum ---------------------------------------------------------- *
 * The activation is matched backwards from its last op F, as the importers
 * and exporters spell it, with every op between the sum y and F used once
 * (y itself only by the pattern), in y's block, and its constants one
 * element of y's dtype with exactly the value below (-0 is not 0: MAX and
 * MIN keep the sign of zero as they get it). Only spellings whose every op
 * the fused kernel repeats in the same order are matched, so that the
 * result is the same bits (ADD and MUL commute exactly; MIN and MAX do not):
 *   RELU/SIGMOID/TANH (y)
 *   SILU         MUL (y, SIGMOID (y))                                 either order
 *   GELU         MUL (MUL (y, ADD (ERF (DIV (y, sqrt2)), 1)), 0.5)     torch.onnx.export
 *   HARDSIGMOID  MAX (MIN (ADD (MUL (y, 1/6), 0.5), 1), 0)            ONNX HardSigmoid as imported,
 *   HARDSWISH    MUL (y, HARDSIGMOID (y))                              with torch's alpha 1/6
 *   RELU6        MIN (MAX (y, 0), 6)                                   ONNX Clip(0, 6) as imported
 *   GELU_TANH    MUL (MUL (y, ADD (TANH (MUL (ADD (y, MUL (MUL (y, MUL (y, y)), 0.044715)),
 *                sqrt(2/pi))), 1)), 0.5)                               torch's GELU(approximate='tanh')
 *   GELU_NEW     MUL (MUL (y, 0.5), ADD (TANH (MUL (ADD (y, MUL (POW (y, 3), 0.044715)), sqrt(2/pi))), 1))
 *                                                                      transformers' NewGELU (GPT-2) */
typedef struct act_match {
    uint32_t act;
    cc_irval y;         /* the activation's input */
    uint32_t y_uses;    /* how often the pattern uses y */
    cc_node *inner[8];  /* the pattern's ops but F, removed with the fusion */
    int n_inner;
} act_match;

/* c as a constant of one element of float dtype d that cannot make an op
 * with y larger than y (scalar, or rank <= y's); NULL when it is not */
static const cc_cval *one_const(cc_irval c, uint8_t d, cc_irval y)
{
    if (!is_const(c))
        return NULL;
    const cc_cval *k = cval(c);
    if (k->dtype != d || (d != TFVM_F32 && d != TFVM_F64) || !k->data)
        return NULL;
    for (int i = 0; i < k->rank; i++)
        if (k->dims[i] != 1)
            return NULL;
    const cc_vtype *t = vtype(y);
    return k->rank > 0 && (!known_rank(t) || t->rank < k->rank) ? NULL : k;
}

/* Whether c is such a constant, bit for bit v (as d) */
static bool const_is(cc_irval c, uint8_t d, double v, cc_irval y)
{
    const cc_cval *k = one_const(c, d, y);
    if (!k)
        return false;
    if (d == TFVM_F32) {
        const float want = (float)v;
        return memcmp(k->data, &want, sizeof want) == 0;
    }
    return memcmp(k->data, &v, sizeof v) == 0;
}

/* A single-use binary op `op` in b producing v, with operand k (0 or 1) the
 * constant `c`; *x gets its other operand. commute: either operand. */
static cc_node *op_const(const fuse_state *S, cc_irval v, uint16_t op, const cc_blk *b, uint8_t d, double c,
                         bool commute, cc_irval *x)
{
    cc_node *n = sole_op(S, v, op, b);
    if (!n || n->n_in != 2)
        return NULL;
    for (int k = 1; k >= (commute ? 0 : 1); k--)
        if (const_is(n->in[k], d, c, n->in[1 - k])) {
            *x = cc_resolve(n->in[1 - k]);
            return n;
        }
    return NULL;
}

/* MAX (MIN (ADD (MUL (y, 1/6), 0.5), 1), 0) ending in F (any uses) */
static bool match_hsig(const fuse_state *S, cc_node *F, const cc_blk *b, uint8_t d, act_match *m)
{
    cc_irval u, t, x;
    if (F->kind != CC_N_OP || F->op != ISA_MAX || F->n_in != 2 || !const_is(F->in[1], d, 0, F->in[0]))
        return false;
    cc_node *mn = op_const(S, F->in[0], ISA_MIN, b, d, 1, false, &u);
    cc_node *ad = mn ? op_const(S, u, ISA_ADD, b, d, 0.5, true, &t) : NULL;
    cc_node *ml = ad ? op_const(S, t, ISA_MUL, b, d, 1.0 / 6, true, &x) : NULL;
    if (!ml)
        return false;
    m->y = x;
    m->inner[m->n_inner++] = mn;
    m->inner[m->n_inner++] = ad;
    m->inner[m->n_inner++] = ml;
    return true;
}

static bool same_irval(cc_irval a, cc_irval b)
{
    a = cc_resolve(a);
    b = cc_resolve(b);
    return a.n == b.n && a.k == b.k;
}

/* The activation that ends in F (in block b, dtype d), or false. */
static bool match_act(const fuse_state *S, cc_node *F, const cc_blk *b, uint8_t d, act_match *m)
{
    *m = (act_match){0};
    if (F->kind != CC_N_OP || F->blk != b)
        return false;
    const uint16_t op = F->op;
    if ((op == ISA_RELU || op == ISA_SIGMOID || op == ISA_TANH) && F->n_in == 1) {
        m->act = op == ISA_RELU ? ISA_OPT_ACT_RELU : op == ISA_SIGMOID ? ISA_OPT_ACT_SIGMOID : ISA_OPT_ACT_TANH;
        m->y = cc_resolve(F->in[0]);
        m->y_uses = 1;
        return true;
    }
    if (F->n_in != 2)
        return false;
    if (op == ISA_MAX && match_hsig(S, F, b, d, m)) {
        m->act = ISA_OPT_ACT_HARDSIGMOID;
        m->y_uses = 1;
        return true;
    }
    cc_irval x;
    if (op == ISA_MIN && const_is(F->in[1], d, 6, F->in[0])) {
        cc_node *mx = op_const(S, F->in[0], ISA_MAX, b, d, 0, false, &x);
        if (!mx)
            return false;
        *m = (act_match){.act = ISA_OPT_ACT_RELU6, .y = x, .y_uses = 1, .inner = {mx}, .n_inner = 1};
        return true;
    }
    if (op != ISA_MUL)
        return false;
    for (int k = 0; k < 2; k++) {
        cc_irval other = cc_resolve(F->in[1 - k]);
        cc_node *s = sole_op(S, F->in[k], ISA_SIGMOID, b);
        if (s && same_irval(s->in[0], other)) {
            *m = (act_match){.act = ISA_OPT_ACT_SILU, .y = other, .y_uses = 2, .inner = {s}, .n_inner = 1};
            return true;
        }
        cc_node *h = sole_op(S, F->in[k], ISA_MAX, b);
        act_match hm = {0};
        if (h && match_hsig(S, h, b, d, &hm) && same_irval(hm.y, other)) {
            *m = hm;
            m->inner[m->n_inner++] = h;
            m->act = ISA_OPT_ACT_HARDSWISH;
            m->y_uses = 2;
            return true;
        }
    }
    /* GELU_NEW: F = MUL (h, p), h = MUL (y, 0.5), p = ADD (TANH (MUL (ADD (y, MUL (POW (y, 3), k)), c)), 1) */
    for (int k = 0; k < 2; k++) {
        cc_irval y, tv, av, kv, pv;
        cc_node *h = op_const(S, F->in[k], ISA_MUL, b, d, 0.5, true, &y);
        cc_node *p = h ? op_const(S, F->in[1 - k], ISA_ADD, b, d, 1, true, &tv) : NULL;
        cc_node *t = p ? sole_op(S, tv, ISA_TANH, b) : NULL;
        cc_node *mc = t ? op_const(S, t->in[0], ISA_MUL, b, d, 0.7978845608028654, true, &av) : NULL;
        cc_node *a = mc ? sole_op(S, av, ISA_ADD, b) : NULL;
        for (int i = 0; a && a->n_in == 2 && i < 2; i++) {
            cc_node *mk = same_irval(a->in[i], y) ? op_const(S, a->in[1 - i], ISA_MUL, b, d, 0.044715, true, &kv)
                                                  : NULL;
            cc_node *pw = mk ? op_const(S, kv, ISA_POW, b, d, 3, false, &pv) : NULL;
            if (pw && same_irval(pv, y)) {
                *m = (act_match){.act = ISA_OPT_ACT_GELU_NEW, .y = y, .y_uses = 3,
                                 .inner = {h, p, t, mc, a, mk, pw}, .n_inner = 7};
                return true;
            }
        }
    }
    /* GELU: F = MUL (mm, 0.5), mm = MUL (y, p), p = ADD (e, 1), e = ERF (q), q = DIV (y, sqrt2) */
    cc_irval ev;
    cc_node *mm = NULL;
    for (int k = 1; k >= 0 && !mm; k--)
        if (const_is(F->in[k], d, 0.5, F->in[1 - k]))
            mm = sole_op(S, F->in[1 - k], ISA_MUL, b);
    if (!mm || mm->n_in != 2)
        return false;
    for (int j = 0; j < 2; j++) {
        cc_irval y = cc_resolve(mm->in[1 - j]);
        cc_node *p = op_const(S, mm->in[j], ISA_ADD, b, d, 1, true, &ev);
        cc_node *e = p ? sole_op(S, ev, ISA_ERF, b) : NULL;
        cc_node *q = e ? op_const(S, e->in[0], ISA_DIV, b, d, M_SQRT2, false, &x) : NULL;
        if (q && same_irval(x, y)) {
            *m = (act_match){.act = ISA_OPT_ACT_GELU, .y = y, .y_uses = 2, .inner = {mm, p, e, q}, .n_inner = 4};
            return true;
        }
        /* the tanh form: e = TANH (MUL (ADD (y, MUL (MUL (y, MUL (y, y)), k)), c)) */
        cc_node *t = p ? sole_op(S, ev, ISA_TANH, b) : NULL;
        cc_irval av, kv;
        cc_node *mc = t ? op_const(S, t->in[0], ISA_MUL, b, d, 0.7978845608028654, true, &av) : NULL;
        cc_node *a = mc ? sole_op(S, av, ISA_ADD, b) : NULL;
        for (int i = 0; a && a->n_in == 2 && i < 2; i++) {
            if (!same_irval(a->in[i], y))
                continue;
            cc_node *mk = op_const(S, a->in[1 - i], ISA_MUL, b, d, 0.044715, true, &kv);
            cc_node *x3 = mk ? sole_op(S, kv, ISA_MUL, b) : NULL;
            for (int h = 0; x3 && x3->n_in == 2 && h < 2; h++) {
                cc_node *x2 = same_irval(x3->in[h], y) ? sole_op(S, x3->in[1 - h], ISA_MUL, b) : NULL;
                if (x2 && x2->n_in == 2 && same_irval(x2->in[0], y) && same_irval(x2->in[1], y)) {
                    *m = (act_match){.act = ISA_OPT_ACT_GELU_TANH, .y = y, .y_uses = 5,
                                     .inner = {mm, p, t, mc, a, mk, x3, x2}, .n_inner = 8};
                    return true;
                }
            }
        }
    }
    return false;
}

/* Unlinks n, moving *next past it first */
static void unlink_past(cc_node *n, cc_node **next)
{
    if (*next == n)
        *next = n->next;
    cc_node_unlink(n);
}

/* The activation of sum n (whose dtype is d), if any: its last op is n's
 * user, or a single-use chain of up to 4 ops above it; NULL when none. */
static cc_node *sum_activation(const fuse_state *S, cc_node *n, const cc_blk *b, uint8_t d, act_match *am)
{
    cc_node *u = S->user[n->id];
    for (int depth = 0; u && depth < 5; depth++) {
        if (match_act(S, u, b, d, am) && same_irval(am->y, (cc_irval){n, 0}) && S->uses[n->id] == am->y_uses)
            return u;
        u = S->uses[u->id] == 1 ? S->user[u->id] : NULL;
    }
    return NULL;
}

/* Ops that only relabel their input's elements (an activation, elementwise,
 * may be taken before them as well as after) */
static bool relabels(const cc_node *r)
{
    return r->kind == CC_N_OP && (r->op == ISA_RESHAPE || r->op == ISA_TRANSPOSE || r->op == ISA_FLATTEN ||
                                  r->op == ISA_SQUEEZE || r->op == ISA_UNSQUEEZE);
}

enum { RELABEL_MOST = 3 };

/* The activation of sum n seen through a chain of up to RELABEL_MOST ops
 * that relabel it, each the only use of the value before it (an exporter's
 * product of [M, N] viewed as [B, T, N] before its activation: transformers'
 * Conv1D in GPT-2, a Keras Dense on a sequence; SegFormer's depthwise
 * convolution flattened and transposed before its GELU): *act, and the
 * chain's length (its ops in chain[]); 0 when none. */
static int relabeled_activation(const fuse_state *S, cc_node *n, const cc_blk *b, uint8_t d, act_match *am,
                                cc_node **act, cc_node **chain)
{
    cc_node *prev = n;
    for (int len = 1; len <= RELABEL_MOST; len++) {
        cc_node *r = S->uses[prev->id] == 1 ? S->user[prev->id] : NULL;
        if (!r || !relabels(r) || r->blk != b || !same_irval(r->in[0], (cc_irval){prev, 0}))
            return 0;
        chain[len - 1] = r;
        if ((*act = sum_activation(S, r, b, d, am)))
            return len;
        prev = r;
    }
    return 0;
}

/* Value y = (n, 0) (a sum of a product and its bias, or a product with no
 * bias) with its activation taken into the fused op that replaces it: the
 * node that is to become that op. The activation (am, none: am->act 0)
 * directly on y: its inner ops go and its last op is returned, the fused
 * op's place; through relabelling ops (relabeled_activation): n itself is
 * returned, the chain stays on n but for its last op, and the activation's
 * last op becomes that one. */
static cc_node *take_activation(cc *C, fuse_state *S, cc_node *n, const cc_blk *b, uint8_t d, act_match *am,
                                cc_node **next)
{
    cc_node *chain[RELABEL_MOST];
    cc_node *act = sum_activation(S, n, b, d, am);
    const int len = act ? 0 : relabeled_activation(S, n, b, d, am, &act, chain);
    if (!act) {
        *am = (act_match){0};
        return n;
    }
    for (int k = 0; k < am->n_inner; k++)
        unlink_past(am->inner[k], next);
    if (!len) {
        if (*next == act)
            *next = act->next;
        return act;
    }
    cc_node *last = chain[len - 1];
    cc_irval *rin = cc_array(C, last->n_in, sizeof *rin);
    rin[0] = (cc_irval){len > 1 ? chain[len - 2] : n, 0};
    for (uint32_t k = 1; k < last->n_in; k++)
        rin[k] = last->in[k];
    act->op = last->op;
    act->attr = last->attr;
    act->in = rin;
    act->n_in = last->n_in;
    unlink_past(last, next);
    return n;
}

static void fuse_block(cc *C, cc_blk *b, void *ud)
{
    fuse_state *S = ud;
    for (cc_node *n = b->first; n;) {
        cc_node *next = n->next;
        uint8_t d = n->n_out ? n->types[0].dtype : 0;
        if (n->kind != CC_N_OP || n->op != ISA_ADD || n->n_in != 2 || !isa_dtype_float(d)) {
            n = next;
            continue;
        }
        cc_node *prod = NULL, *reshape = NULL;
        cc_irval bias = {NULL, 0};
        for (uint32_t k = 0; k < 2 && !bias.n; k++) {
            cc_irval other = n->in[1 - k];
            if ((prod = sole_op(S, n->in[k], ISA_MATMUL, b)) && vtype(other)->dtype == d &&
                matmul_bias_fits(prod, other)) {
                bias = cc_resolve(other);
            } else if ((prod = sole_op(S, n->in[k], ISA_CONV2D, b))) {
                const cc_vtype *w = vtype(prod->in[1]);
                int64_t O = known_rank(w) && w->rank == 4 && w->dims[0] >= 0 ? w->dims[0]
                            : known_rank(&prod->types[0]) && prod->types[0].rank == 4 ? prod->types[0].dims[1]
                                                                                       : -1;
                if (O >= 0)
                    bias = conv_bias(C, S, other, O, n, &reshape);
                if (bias.n && vtype(bias)->dtype != d)
                    bias.n = NULL;
            }
        }
        if (!bias.n) {
            n = next;
            continue;
        }
        act_match am = {0};
        bool conv = prod->op == ISA_CONV2D;
        cc_irval *in = cc_array(C, conv ? 4 : 3, sizeof *in);
        for (uint32_t k = 0; k < prod->n_in; k++)
            in[k] = cc_resolve(prod->in[k]);
        in[prod->n_in] = bias;
        cc_node *target = take_activation(C, S, n, b, d, &am, &next);
        if (target != n)
            cc_node_unlink(n);
        target->attr = (conv ? 0 : prod->attr) | am.act;
        target->op = conv ? ISA_FUSED_CONV2D : ISA_FUSED_MATMUL;
        target->in = in;
        target->n_in = prod->n_in + 1;
        if (next == prod)
            next = prod->next;
        cc_node_unlink(prod);
        if (reshape && reshape->blk == b) {
            if (next == reshape)
                next = reshape->next;
            cc_node_unlink(reshape);
        }
        S->fused++;
        n = next;
    }
}

/* A MATMUL or CONV2D with no bias whose value only an activation uses
 * (T5's and Llama's bias-free Linear layers before ReLU or SiLU; Wav2Vec2's
 * and HuBERT's bias-free 1-D convolutions before GELU, through the SQUEEZE
 * that makes them 1-D again): one FUSED_MATMUL or FUSED_CONV2D whose bias is
 * -0 (a scalar, or O of them per output channel), which adds nothing to any
 * element (x + -0 is x, -0 included), so the bits of the activation on the
 * product. */
static cc_irval neg_zero_bias(cc *C, cc_node *at, uint8_t d, int64_t O)
{
    const dev_value z = d == TFVM_F32 ? (dev_value){.dtype = TFVM_F32, .u.f32 = -0.0f}
                                      : (dev_value){.dtype = TFVM_F64, .u.f64 = -0.0};
    if (O < 0)
        return new_const(C, at, &z);
    const size_t esz = tfvm_dtype_size((tfvm_dtype)d);
    char *p = cc_alloc(C, (size_t)O * esz);
    for (int64_t o = 0; o < O; o++)
        memcpy(p + o * (int64_t)esz, &z.u, esz);
    const cc_cval c = {.dtype = d, .rank = 1, .dims = {O}, .nbytes = (size_t)O * esz, .data = p};
    return new_tensor_const(C, at, &c);
}

static void fuse_unbiased_block(cc *C, cc_blk *b, void *ud)
{
    fuse_state *S = ud;
    for (cc_node *n = b->first; n;) {
        cc_node *next = n->next;
        const uint8_t d = n->n_out ? n->types[0].dtype : 0;
        const bool mm = n->kind == CC_N_OP && n->op == ISA_MATMUL && n->n_in == 2;
        const bool conv = n->kind == CC_N_OP && n->op == ISA_CONV2D && n->n_in == 3 && n->attr == 0;
        const cc_vtype *w = conv ? vtype(n->in[1]) : NULL;
        const int64_t O = conv && known_rank(w) && w->rank == 4 ? w->dims[0] : -1;
        if ((!mm && !(conv && O > 0)) || !isa_dtype_float(d)) {
            n = next;
            continue;
        }
        act_match am = {0};
        cc_node *target = take_activation(C, S, n, b, d, &am, &next);
        if (!am.act) {
            n = next;
            continue;
        }
        cc_irval *in = cc_array(C, n->n_in + 1, sizeof *in);
        for (uint32_t k = 0; k < n->n_in; k++)
            in[k] = cc_resolve(n->in[k]);
        in[n->n_in] = neg_zero_bias(C, n, d, conv ? O : -1);
        const uint32_t attr = n->attr | am.act, n_in = n->n_in + 1;
        if (target != n) {
            if (next == n)
                next = n->next;
            cc_node_unlink(n);
        }
        target->attr = attr;
        target->op = conv ? ISA_FUSED_CONV2D : ISA_FUSED_MATMUL;
        target->in = in;
        target->n_in = n_in;
        S->fused++;
        n = next;
    }
}

/* ---- Residual sums -----------------------------------------------------------------------
 * A FUSED_CONV2D without an activation whose only use is an ADD of a value
 * of exactly its type (a ResNet block's shortcut, an inverted residual's
 * input), and that sum's activation if any (as above), become one
 * FUSED_CONV2D_ADD: the shortcut and the activation go in the product's
 * epilogue, while each block of the result is in cache, instead of two
 * more passes over it. The same bits: the epilogue adds the bias, then r,
 * then applies the activation, each rounded as the ops were. */
static bool same_type_known(const cc_vtype *a, const cc_vtype *t)
{
    if (!a->tensor || !t->tensor || a->dtype != t->dtype || a->rank != 4 || t->rank != 4)
        return false;
    for (int k = 0; k < 4; k++)
        if (a->dims[k] == ISA_DIM_ANY || a->dims[k] != t->dims[k])
            return false;
    return true;
}

static void fuse_residual_block(cc *C, cc_blk *b, void *ud)
{
    fuse_state *S = ud;
    for (cc_node *n = b->first; n;) {
        cc_node *next = n->next, *conv = NULL;
        cc_irval r = {NULL, 0};
        const bool sum = n->kind == CC_N_OP && n->op == ISA_ADD && n->n_in == 2;
        for (uint32_t k = 0; k < 2 && sum && !conv; k++) {
            cc_node *c = sole_op(S, n->in[k], ISA_FUSED_CONV2D, b);
            r = cc_resolve(n->in[1 - k]);
            if (c && !(c->attr & ISA_OPT_ACT_MASK) && r.n != c && same_type_known(&r.n->types[r.k], &c->types[0]))
                conv = c;
        }
        if (!conv) {
            n = next;
            continue;
        }
        act_match am = {0};
        cc_node *act = sum_activation(S, n, b, n->types[0].dtype, &am), *target = act ? act : n;
        cc_irval *in = cc_array(C, 5, sizeof *in);
        for (uint32_t k = 0; k < 4; k++)
            in[k] = cc_resolve(conv->in[k]);
        in[4] = r;
        if (act) { /* the sum and the activation's inner ops go; its last op becomes the fused op */
            for (int k = 0; k < am.n_inner; k++)
                unlink_past(am.inner[k], &next);
            unlink_past(n, &next);
        }
        target->op = ISA_FUSED_CONV2D_ADD;
        target->attr = act ? am.act : 0;
        target->in = in;
        target->n_in = 5;
        unlink_past(conv, &next);
        S->fused++;
        n = next;
    }
}

/* ---- Affine chains after a convolution ---------------------------------------------------
 * CONV2D with constant weights whose only use is a chain of ADD, SUB (x - c)
 * and MUL by constants per output channel (a scalar, or dims [.., O, 1, 1]):
 * a bias and a batch norm in inference form, as TensorFlow spells BiasAdd +
 * FusedBatchNorm and ONNX an unfolded BatchNormalization. y = conv * a + b
 * per channel: the MULs go into the weights (w[o] * a[o]) and the chain
 * becomes one ADD of b[o], which the fusion below then takes as the bias.
 * Two passes over the output fewer per layer; the products round as with
 * scaled weights (ONNX Runtime folds the same way). */
static bool chan_values(const cc_cval *c, uint8_t dtype, int64_t O, double *out)
{
    if (c->dtype != dtype)
        return false;
    int64_t count = 1;
    for (int i = 0; i < c->rank; i++)
        count *= c->dims[i];
    if (count != 1) {
        if (c->rank < 3 || c->dims[c->rank - 3] != O)
            return false;
        for (int i = 0; i < c->rank; i++)
            if (i != c->rank - 3 && c->dims[i] != 1)
                return false;
    }
    for (int64_t o = 0; o < O; o++) {
        const int64_t i = count == 1 ? 0 : o;
        out[o] = dtype == TFVM_F32 ? ((const float *)c->data)[i] : ((const double *)c->data)[i];
    }
    return true;
}

/* Whether n, a MUL, begins a HARDSIGMOID (match_hsig) that the fusion
 * below takes whole: folded into the weights, its MUL and ADD would leave
 * the MIN and MAX as ops of their own after the product */
static bool hsig_begins(const fuse_state *S, cc_node *n, const cc_blk *b, uint8_t d)
{
    cc_node *f = n;
    for (int k = 0; k < 3; k++)
        if (S->uses[f->id] != 1 || !(f = S->user[f->id]))
            return false;
    act_match m = {0};
    return match_hsig(S, f, b, d, &m) && m.inner[2] == n;
}

/* One op of an affine chain (ADD, SUB x - c or MUL by c[o]) on y = x * a + b */
static void affine_step(uint16_t op, const double *c, int64_t O, double *a, double *b)
{
    for (int64_t o = 0; o < O; o++) {
        if (op == ISA_MUL)
            a[o] *= c[o], b[o] *= c[o];
        else
            b[o] += op == ISA_ADD ? c[o] : -c[o];
    }
}

/* The chain's last op becomes ADD (src, bias), chain[from, len - 1) go */
static void affine_finish(cc *C, fuse_state *S, cc_node *src, cc_irval bias, cc_node *const *chain, int from,
                          int len)
{
    cc_node *last = chain[len - 1];
    cc_irval *lin = cc_array(C, 2, sizeof *lin);
    lin[0] = (cc_irval){src, 0};
    lin[1] = bias;
    last->op = ISA_ADD;
    last->attr = 0;
    last->in = lin;
    for (int j = from; j < len - 1; j++)
        cc_node_unlink(chain[j]);
    S->user[src->id] = last;
    S->fused++;
}

static void fold_affine_block(cc *C, cc_blk *blk, void *ud)
{
    fuse_state *S = ud;
    for (cc_node *conv = blk->first; conv; conv = conv->next) {
        if (conv->kind != CC_N_OP || conv->op != ISA_CONV2D || !is_const(conv->in[1]))
            continue;
        const cc_cval *w = cval(conv->in[1]);
        const uint8_t d = w->dtype;
        if (!isa_dtype_float(d) || w->rank != 4 || conv->types[0].dtype != d)
            continue;
        const int64_t O = w->dims[0], per = w->nbytes / tfvm_dtype_size((tfvm_dtype)d) / (O ? (size_t)O : 1);
        const cc_node *first = S->uses[conv->id] == 1 ? S->user[conv->id] : NULL;
        if (O < 1 || O > 65536 || !first || first->kind != CC_N_OP ||
            (first->op != ISA_ADD && first->op != ISA_SUB && first->op != ISA_MUL))
            continue; /* no chain: nothing to allocate for */
        double *a = cc_array(C, (size_t)O, sizeof *a), *b = cc_array(C, (size_t)O, sizeof *b);
        double *c = cc_array(C, (size_t)O, sizeof *c);
        for (int64_t o = 0; o < O; o++)
            a[o] = 1, b[o] = 0;
        cc_node *chain[16], *cur = conv;
        int len = 0, muls = 0;
        while (len < 16 && S->uses[cur->id] == 1) {
            cc_node *n = S->user[cur->id];
            if (!n || n->kind != CC_N_OP || n->blk != blk || n->n_in != 2 || n->types[0].dtype != d ||
                (n->op != ISA_ADD && n->op != ISA_SUB && n->op != ISA_MUL))
                break;
            const int k = cc_resolve(n->in[0]).n == cur ? 0 : 1;
            if (cc_resolve(n->in[k]).n != cur || (n->op == ISA_SUB && k != 0) || !is_const(n->in[1 - k]) ||
                !chan_values(cval(n->in[1 - k]), d, O, c) || (n->op == ISA_MUL && hsig_begins(S, n, blk, d)))
                break;
            affine_step(n->op, c, O, a, b);
            muls += n->op == ISA_MUL;
            chain[len++] = cur = n;
        }
        if (!muls)
            continue;
        /* the weights scaled per output channel, and the chain's last op the one ADD */
        const size_t esz = tfvm_dtype_size((tfvm_dtype)d);
        void *wd = cc_alloc(C, w->nbytes), *bd = cc_alloc(C, (size_t)O * esz);
        for (int64_t o = 0; o < O; o++)
            for (int64_t i = 0; i < per; i++) {
                const int64_t j = o * per + i;
                if (d == TFVM_F32)
                    ((float *)wd)[j] = (float)(((const float *)w->data)[j] * a[o]);
                else
                    ((double *)wd)[j] = ((const double *)w->data)[j] * a[o];
            }
        for (int64_t o = 0; o < O; o++) {
            if (d == TFVM_F32)
                ((float *)bd)[o] = (float)b[o];
            else
                ((double *)bd)[o] = b[o];
        }
        cc_node *wn = cc_node_new(C, NULL, CC_N_CONST, 0, 1, conv->pos), *bn = cc_node_new(C, NULL, CC_N_CONST, 0, 1, conv->pos);
        wn->blk = bn->blk = blk;
        wn->u.c = *w;
        wn->u.c.data = wd;
        wn->types[0] = (cc_vtype){.dtype = d, .tensor = 1, .rank = 4};
        memcpy(wn->types[0].dims, w->dims, sizeof w->dims);
        bn->u.c = (cc_cval){.dtype = d, .rank = 3, .dims = {O, 1, 1}, .nbytes = (size_t)O * esz, .data = bd};
        bn->types[0] = (cc_vtype){.dtype = d, .tensor = 1, .rank = 3, .dims = {O, 1, 1}};
        cc_irval *cin = cc_array(C, conv->n_in, sizeof *cin);
        for (uint32_t k = 0; k < conv->n_in; k++)
            cin[k] = cc_resolve(conv->in[k]);
        cin[1] = (cc_irval){wn, 0};
        conv->in = cin;
        affine_finish(C, S, conv, (cc_irval){bn, 0}, chain, 0, len);
    }
}

/* ---- Affine chains on their own ----------------------------------------------------------
 * The same chains (at least two ops, every constant per channel: [C, 1, 1]
 * or [1, C, 1, 1]) on a value [N, C, H, W] that no convolution takes them
 * from: a batch norm before its activation, as DenseNet's layers and
 * pre-activation ResNets begin (BN, RELU, then the convolution). Each op
 * was a pass over the value, and the RELU another. y = x * a + b per
 * channel is a depthwise 1x1 convolution with weights a and bias b: the
 * chain's first op becomes that CONV2D and its last the ADD of b, which the
 * fusion below takes as the bias, with the activation after it. One pass;
 * the products round as ONNX Runtime's and PyTorch's inference batch norm
 * (x * a + b). Scalar constants are left alone (a hard sigmoid's x / 6 +
 * 0.5 is the activations' to take). */
static void affine_alone_block(cc *C, cc_blk *blk, void *ud)
{
    fuse_state *S = ud;
    for (cc_node *n = blk->first; n; n = n->next) {
        if (n->kind != CC_N_OP || n->n_in != 2 || (n->op != ISA_ADD && n->op != ISA_SUB && n->op != ISA_MUL))
            continue;
        const uint8_t d = n->types[0].dtype;
        const int kx = is_const(n->in[0]) ? 1 : 0; /* x's input */
        const cc_vtype *xt = vtype(n->in[kx]);
        if (!isa_dtype_float(d) || is_const(n->in[kx]) || !known_rank(xt) || xt->rank != 4 || xt->dtype != d ||
            xt->dims[1] < 2 || xt->dims[1] > 65536 || (n->op == ISA_SUB && kx != 0))
            continue;
        const cc_node *src = cc_resolve(n->in[kx]).n, *next = S->uses[n->id] == 1 ? S->user[n->id] : NULL;
        if (src->kind == CC_N_OP && src->op == ISA_CONV2D && S->uses[src->id] == 1)
            continue; /* fold_affine_block's, if anybody's */
        if (!next || next->kind != CC_N_OP || (next->op != ISA_ADD && next->op != ISA_SUB && next->op != ISA_MUL))
            continue; /* no chain of two: nothing to allocate for */
        const int64_t O = xt->dims[1];
        double *a = cc_array(C, (size_t)O, sizeof *a), *b = cc_array(C, (size_t)O, sizeof *b);
        double *c = cc_array(C, (size_t)O, sizeof *c);
        for (int64_t o = 0; o < O; o++)
            a[o] = 1, b[o] = 0;
        cc_node *chain[16], *cur = NULL;
        int len = 0;
        for (cc_node *m = n; m && len < 16; m = S->uses[m->id] == 1 ? S->user[m->id] : NULL) {
            if (m->kind != CC_N_OP || m->blk != blk || m->n_in != 2 || m->types[0].dtype != d ||
                (m->op != ISA_ADD && m->op != ISA_SUB && m->op != ISA_MUL))
                break;
            const int k = !cur ? kx : cc_resolve(m->in[0]).n == cur ? 0 : 1;
            if ((cur && cc_resolve(m->in[k]).n != cur) || (m->op == ISA_SUB && k != 0) || !is_const(m->in[1 - k]))
                break;
            const cc_cval *cv = cval(m->in[1 - k]);
            if (cv->nbytes != (size_t)O * tfvm_dtype_size((tfvm_dtype)d) || !chan_values(cv, d, O, c))
                break;
            affine_step(m->op, c, O, a, b);
            chain[len++] = cur = m;
        }
        if (len < 2)
            continue;
        const size_t esz = tfvm_dtype_size((tfvm_dtype)d);
        void *wd = cc_alloc(C, (size_t)O * esz), *bd = cc_alloc(C, (size_t)O * esz);
        int64_t *pd = cc_alloc(C, 9 * sizeof *pd);
        for (int64_t o = 0; o < O; o++) {
            if (d == TFVM_F32)
                ((float *)wd)[o] = (float)a[o], ((float *)bd)[o] = (float)b[o];
            else
                ((double *)wd)[o] = a[o], ((double *)bd)[o] = b[o];
        }
        const int64_t params[9] = {1, 1, 0, 0, 0, 0, 1, 1, O}; /* strides, pads, dilations, groups */
        memcpy(pd, params, sizeof params);
        const cc_cval wc = {.dtype = d, .rank = 4, .dims = {O, 1, 1, 1}, .nbytes = (size_t)O * esz, .data = wd};
        const cc_cval bc = {.dtype = d, .rank = 3, .dims = {O, 1, 1}, .nbytes = (size_t)O * esz, .data = bd};
        const cc_cval pc = {.dtype = TFVM_I64, .rank = 1, .dims = {9}, .nbytes = sizeof params, .data = pd};
        cc_irval *cin = cc_array(C, 3, sizeof *cin);
        cin[0] = cc_resolve(n->in[kx]);
        cin[1] = new_tensor_const(C, n, &wc);
        cin[2] = new_tensor_const(C, n, &pc);
        n->op = ISA_CONV2D;
        n->attr = 0;
        n->in = cin;
        n->n_in = 3;
        n->types[0] = *xt;
        affine_finish(C, S, n, new_tensor_const(C, chain[len - 1], &bc), chain, 1, len);
    }
}

/* ---- Rows of a table through a product ---------------------------------------------------
 * A product (MATMUL, FUSED_MATMUL: its bias and activation act row by row)
 * of rows GATHERed from a constant table E [V, K] by a run-time index, with
 * constant weights, is the GATHER of those rows of E's product: an
 * embedding and the linear layer after it (a decoder's token, fed back
 * each step). The table's rows are computed here, each as the product of
 * that one row of the shape the GATHER gives (the kernel a one-row product
 * takes, so the same bits), and the step's product becomes a copy of a
 * row. Only for a table of at most FOLD_TABLE_MACS multiply-adds whose
 * result is no larger than its inputs (fold_eval's bound), the GATHER
 * along axis 0, its only use the product, in the product's block. */
#define FOLD_TABLE_MACS (INT64_C(1) << 24)

static bool table_rows(cc *C, cc_node *f, const cc_cval *E, const cc_vtype *row_t, cc_cval *T)
{
    const cc_vtype *ft = &f->types[0];
    if (!known_rank(row_t) || !known_rank(ft) || row_t->rank < 1 || ft->rank != row_t->rank)
        return false;
    const int64_t V = E->dims[0], K = E->dims[1], N = ft->dims[ft->rank - 1];
    /* one row: the index's dims, where the type knows them, all 1 (an
     * index the type does not size is taken as one element: a bigger one
     * gets the same values, each row with the one-row product's rounding) */
    int64_t dims[TFVM_MAX_RANK];
    for (int k = 0; k < row_t->rank - 1; k++) {
        if (row_t->dims[k] > 1)
            return false;
        dims[k] = 1;
    }
    dims[row_t->rank - 1] = K;
    const size_t esz = tfvm_dtype_size((tfvm_dtype)E->dtype);
    if (row_t->dims[row_t->rank - 1] != K || N < 1 || V < 1 || (double)V * K * N > FOLD_TABLE_MACS)
        return false;
    char *out = ut_arena_alloc(&C->ar, (size_t)(V * N) * esz);
    if (!out)
        cc_nomem(C);
    const cc_cval *c[8];
    for (uint32_t k = 1; k < f->n_in; k++)
        c[k] = cval(f->in[k]);
    for (int64_t v = 0; v < V; v++) {
        cc_cval row = {.dtype = E->dtype, .rank = row_t->rank, .nbytes = (size_t)K * esz,
                       .data = (const char *)E->data + (size_t)(v * K) * esz};
        memcpy(row.dims, dims, sizeof(int64_t) * row_t->rank);
        c[0] = &row;
        cc_cval r = {0};
        dev_value scalar;
        if (!fold_eval(C, f->op, f->attr, c, f->n_in, &r, &scalar) || r.nbytes != (size_t)N * esz)
            return false;
        memcpy(out + (size_t)(v * N) * esz, r.data, r.nbytes);
    }
    *T = (cc_cval){.dtype = E->dtype, .rank = 2, .dims = {V, N}, .nbytes = (size_t)(V * N) * esz, .data = out};
    return true;
}

static void gather_first_block(cc *C, cc_blk *b, void *ud)
{
    fuse_state *S = ud;
    for (cc_node *f = b->first; f;) {
        cc_node *next = f->next, *g;
        bool all_const = f->kind == CC_N_OP && f->n_in >= 2 && f->n_in <= 8;
        for (uint32_t k = 1; all_const && k < f->n_in; k++)
            all_const = is_const(f->in[k]);
        if (!all_const || (f->op != ISA_MATMUL && f->op != ISA_FUSED_MATMUL) || (f->attr & ISA_OPT_TRANS_A) ||
            f->n_out != 1 || !isa_dtype_float(f->types[0].dtype) || !(g = sole_op(S, f->in[0], ISA_GATHER, b)) ||
            !is_const(g->in[0]) || cval(g->in[0])->rank != 2 || ((int32_t)g->attr != 0 && (int32_t)g->attr != -2) ||
            cval(g->in[0])->dtype != f->types[0].dtype) {
            f = next;
            continue;
        }
        cc_cval T;
        if (table_rows(C, f, cval(g->in[0]), &g->types[0], &T)) {
            /* the GATHER takes the table's rows and stands for the product */
            g->in[0] = new_tensor_const(C, g, &T);
            g->types[0] = f->types[0];
            forward(C, f, 0, (cc_irval){g, 0});
            cc_node_unlink(f);
        }
        f = next;
    }
}

/* ---- Channels last between a 1x1 convolution and a depthwise one -------------------------
 * A FUSED_CONV2D with a 1x1 window (unit strides, no pads, one group) whose
 * only use is a depthwise FUSED_CONV2D (groups = channels, one output
 * each), on f32: the first writes its result channels last (nhwc_out) and
 * the second reads it so (nhwc_in). The CPU kernels transposed that value
 * on the way (the product wrote planes, the depthwise kernel turned each 16
 * of them into channel blocks); now the product's rows are the positions
 * and each block copies a position's channels (docs/devices.md). The same
 * bits; the value between them is [N, H, W, C]. */
/* Where it pays, timed pair by pair (1x1 + relu, depthwise + relu, batch
 * 1): an image's value between the two of at most this many floats (half
 * a core's L2), its channels a multiple of 16 (a channel block's 16
 * floats of a position then fill one cache line: with 72 or 88 channels
 * the pair took 1.3x the time channels last, with 240 on 28x28 as long);
 * on 14x14 and 7x7 (288 and 576 channels) 0.85-0.9x. Bigger values come
 * from L3 or memory whichever way they lie, and a position's channels,
 * every C floats, came slower than 16 planes' rows (16 -> 96 on 112x112,
 * 24 -> 144 on 56x56: 1.1-1.4x). */
#define CHANNELS_LAST_MOST (INT64_C(1) << 17)

static bool conv_params(cc_irval v, int64_t *p)
{
    if (!is_const(v))
        return false;
    const cc_cval *c = cval(v);
    if (c->dtype != TFVM_I64 || c->rank != 1 || c->dims[0] != 9)
        return false;
    memcpy(p, c->data, 9 * sizeof *p);
    return true;
}

static void channels_last_block(cc *C, cc_blk *b, void *ud)
{
    (void)C;
    fuse_state *S = ud;
    const uint32_t lay = ISA_OPT_NHWC_IN | ISA_OPT_NHWC_OUT;
    for (cc_node *d = b->first; d; d = d->next) {
        if (d->kind != CC_N_OP || d->op != ISA_FUSED_CONV2D || (d->attr & lay) || d->types[0].dtype != TFVM_F32)
            continue;
        cc_node *e = sole_op(S, d->in[0], ISA_FUSED_CONV2D, b);
        if (!e || (e->attr & lay))
            continue;
        int64_t pe[9], pd[9];
        const cc_vtype *we = vtype(e->in[1]), *wd = vtype(d->in[1]);
        cc_vtype *t = &e->types[0];
        if (!conv_params(e->in[2], pe) || !conv_params(d->in[2], pd) || !known_rank(we) || we->rank != 4 ||
            !known_rank(wd) || wd->rank != 4 || !known_rank(t) || t->rank != 4 || t->dtype != TFVM_F32)
            continue;
        const int64_t O = we->dims[0];
        const bool ones = we->dims[2] == 1 && we->dims[3] == 1 && pe[0] == 1 && pe[1] == 1 && !pe[2] && !pe[3] &&
                          !pe[4] && !pe[5] && pe[8] == 1;
        if (!ones || O % 16 || pd[8] != O || wd->dims[0] != O || wd->dims[1] != 1 || t->dims[2] < 0 ||
            t->dims[3] < 0 || t->dims[2] * t->dims[3] * O > CHANNELS_LAST_MOST)
            continue;
        e->attr |= ISA_OPT_NHWC_OUT;
        d->attr |= ISA_OPT_NHWC_IN;
        const int64_t c = t->dims[1];
        t->dims[1] = t->dims[2];
        t->dims[2] = t->dims[3];
        t->dims[3] = c;
        S->fused++;
    }
}

/* The uses of every node of fn as they are now (arrays sized for the ids there are) */
static fuse_state counted_uses(cc *C, cc_ifn *fn)
{
    fuse_state S = {0};
    S.uses = cc_array(C, C->next_node_id + 1, sizeof *S.uses);
    S.user = cc_array(C, C->next_node_id + 1, sizeof *S.user);
    each_block(C, fn->top, count_uses, &S);
    return S;
}

/* ---- RMSNorm ------------------------------------------------------------------------------
 * MUL (w, MUL (x, DIV (1, SQRT (ADD (REDUCE_MEAN (POW (x, 2) or MUL (x, x),
 * axes; keepdims), eps))))), the MULs and the ADD in either order: T5's and
 * Llama's RMSNorm (`x * rsqrt(mean(x^2) + eps) * weight`) as torch.onnx
 * exports it, seven passes over the tensor. One RMS_NORM does a row at a
 * time with the same bits, where the axes are x's last ones, w is one
 * element or x's dims from the first of them on, eps is one element, and
 * every op but the last is used only by the next (x may have other uses:
 * the residual stream). */
static bool rms_axes(cc_irval axes, const cc_vtype *x, int *axis)
{
    if (!is_const(axes) || !known_rank(x))
        return false;
    const cc_cval *c = cval(axes);
    if (c->dtype != TFVM_I64 || c->rank != 1)
        return false;
    *axis = isa_last_axes(c->data, (int)c->dims[0], x->rank);
    return *axis >= 0;
}

/* w as RMS_NORM's scale (the kernel's rule, every dim known), of no more
 * dims than x (a MUL by more dims grows the result) */
static bool rms_scale(const cc_vtype *w, const cc_vtype *x, int axis, uint8_t d)
{
    if (w->dtype != d)
        return false;
    return !w->tensor || (w->rank != ISA_RANK_ANY && w->rank <= x->rank &&
                          isa_norm_param_fits(w->rank, w->dims, x->rank, x->dims, axis, false));
}

static void rms_norm_block(cc *C, cc_blk *b, void *ud)
{
    fuse_state *S = ud;
    for (cc_node *n = b->first; n;) {
        cc_node *next = n->next;
        const uint8_t d = n->n_out ? n->types[0].dtype : 0;
        if (n->kind != CC_N_OP || n->op != ISA_MUL || n->n_in != 2 || !isa_dtype_float(d)) {
            n = next;
            continue;
        }
        cc_node *y = NULL, *inv = NULL, *sq = NULL, *add = NULL, *mean = NULL, *pw = NULL;
        cc_irval x = {NULL, 0}, w = {NULL, 0}, eps = {NULL, 0};
        for (int k = 0; k < 2 && !inv; k++) { /* n = MUL (w, y), y = MUL (x, inv) */
            if (!(y = sole_op(S, n->in[k], ISA_MUL, b)))
                continue;
            w = cc_resolve(n->in[1 - k]);
            for (int j = 0; j < 2 && !inv; j++)
                if ((inv = sole_op(S, y->in[j], ISA_DIV, b)))
                    x = cc_resolve(y->in[1 - j]);
        }
        if (inv && const_is(inv->in[0], d, 1, inv->in[1]) && (sq = sole_op(S, inv->in[1], ISA_SQRT, b)) &&
            (add = sole_op(S, sq->in[0], ISA_ADD, b)))
            for (int k = 0; k < 2 && !mean; k++)
                if ((mean = sole_op(S, add->in[k], ISA_REDUCE_MEAN, b)))
                    eps = cc_resolve(add->in[1 - k]);
        if (mean && mean->attr == ISA_OPT_KEEPDIMS && (pw = sole_op(S, mean->in[0], ISA_POW, b)) == NULL)
            pw = sole_op(S, mean->in[0], ISA_MUL, b);
        int axis = 0;
        const bool square = pw && (pw->op == ISA_POW ? same_irval(pw->in[0], x) && const_is(pw->in[1], d, 2, x)
                                                     : same_irval(pw->in[0], x) && same_irval(pw->in[1], x));
        const cc_vtype *xt = square ? vtype(x) : NULL;
        if (!square || xt->dtype != d || !rms_axes(mean->in[1], xt, &axis) || !rms_scale(vtype(w), xt, axis, d) ||
            !one_const(eps, d, x)) {
            n = next;
            continue;
        }
        cc_node *inner[6] = {y, inv, sq, add, mean, pw};
        for (int k = 0; k < 6; k++)
            unlink_past(inner[k], &next);
        cc_irval *in = cc_array(C, 3, sizeof *in);
        in[0] = x;
        in[1] = w;
        in[2] = eps;
        n->op = ISA_RMS_NORM;
        n->attr = (uint32_t)axis;
        n->in = in;
        n->n_in = 3;
        S->fused++;
        n = next;
    }
}

/* ---- Taps that only ever read padding -------------------------------------------------
 * A CONV2D's window rows (columns) at its edges that fall in the padding for
 * every output position multiply zeros: DeepLabV3's ASPP convolves a 16x16
 * map with 3x3 windows dilated by 12, 24 and 36 (pads as large), so all but
 * the middle row and column read only padding, and the layer did nine
 * times the work it needs (17 ms each of its three). The weights of the
 * live taps and pads smaller by the dead rows' (columns') extent give the
 * same output positions; the terms dropped were exact zeros (only the
 * order in which the kernels sum the rest may round otherwise). Where a new
 * pad would be negative the layer stays as it is. */
/* The first and last taps (of k, dilation d) of an axis of n at stride s and
 * pads pa, pb that some output position reads inside [0, n); false when
 * none does */
static bool live_taps(int64_t n, int64_t k, int64_t s, int64_t pa, int64_t pb, int64_t d, int64_t *first,
                      int64_t *last)
{
    const int64_t span = n + pa + pb - (k - 1) * d - 1;
    if (span < 0 || s < 1 || d < 1)
        return false;
    const int64_t outs = span / s + 1;
    *first = -1;
    for (int64_t i = 0; i < k; i++) {
        const int64_t lo = i * d - pa, hi = lo + (outs - 1) * s; /* the rows tap i reads */
        const int64_t t = lo >= 0 ? lo : lo + (-lo + s - 1) / s * s; /* its first at or after 0 */
        if (t <= hi && t < n) {
            if (*first < 0)
                *first = i;
            *last = i;
        }
    }
    return *first >= 0;
}

static cc_irval i64s_const(cc *C, cc_node *at, int n, const int64_t *v)
{
    int64_t *d = cc_alloc(C, (size_t)n * sizeof *d);
    memcpy(d, v, (size_t)n * sizeof *d);
    const cc_cval c = {.dtype = TFVM_I64, .rank = 1, .dims = {n}, .nbytes = (size_t)n * sizeof *d, .data = d};
    return new_tensor_const(C, at, &c);
}

/* The constant of w [O, C, KH, KW]'s window rows [r0, r0 + kh) and columns
 * [c0, c0 + kw) */
static cc_irval window_weights(cc *C, cc_node *at, const cc_cval *w, int64_t r0, int64_t kh, int64_t c0, int64_t kw)
{
    const int64_t KH = w->dims[2], KW = w->dims[3], planes = w->dims[0] * w->dims[1];
    const size_t esz = tfvm_dtype_size((tfvm_dtype)w->dtype);
    char *wd = cc_alloc(C, (size_t)(planes * kh * kw) * esz);
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t i = 0; i < kh; i++)
            memcpy(wd + (size_t)((pl * kh + i) * kw) * esz,
                   (const char *)w->data + (size_t)((pl * KH + r0 + i) * KW + c0) * esz, (size_t)kw * esz);
    cc_cval wc = *w;
    wc.dims[2] = kh;
    wc.dims[3] = kw;
    wc.nbytes = (size_t)(planes * kh * kw) * esz;
    wc.data = wd;
    return new_tensor_const(C, at, &wc);
}

static void dead_taps_block(cc *C, cc_blk *b, void *ud)
{
    (void)ud;
    for (cc_node *n = b->first; n; n = n->next) {
        int64_t p[9], r0, r1, c0, c1;
        if (n->kind != CC_N_OP || n->op != ISA_CONV2D || n->n_in != 3 || !is_const(n->in[1]) ||
            !conv_params(n->in[2], p))
            continue;
        const cc_vtype *xt = vtype(n->in[0]);
        const cc_cval *w = cval(n->in[1]);
        if (!known_rank(xt) || xt->rank != 4 || w->rank != 4 || !isa_dtype_float(w->dtype) || xt->dims[2] < 1 ||
            xt->dims[3] < 1)
            continue;
        const int64_t KH = w->dims[2], KW = w->dims[3];
        if (!live_taps(xt->dims[2], KH, p[0], p[2], p[4], p[6], &r0, &r1) ||
            !live_taps(xt->dims[3], KW, p[1], p[3], p[5], p[7], &c0, &c1) ||
            (r0 == 0 && r1 == KH - 1 && c0 == 0 && c1 == KW - 1))
            continue;
        int64_t q[9];
        memcpy(q, p, sizeof q);
        q[2] -= r0 * p[6];
        q[4] -= (KH - 1 - r1) * p[6];
        q[3] -= c0 * p[7];
        q[5] -= (KW - 1 - c1) * p[7];
        if (q[2] < 0 || q[3] < 0 || q[4] < 0 || q[5] < 0)
            continue;
        n->in[1] = window_weights(C, n, w, r0, r1 - r0 + 1, c0, c1 - c0 + 1);
        n->in[2] = i64s_const(C, n, 9, q);
    }
}

/* ---- Taps that read padding for some outputs ------------------------------------------
 * Where a dilated window is large against its map, most taps read padding
 * for most output positions without being dead for all of them: DeepLabV3's
 * ASPP convolves 960 channels of 16x16 with a 3x3 window dilated by 12, so
 * each outer tap reads x for a quarter of the rows (or columns) only, and
 * im2col's product multiplied zeros three times in four (6.9 ms, a third
 * of the network). Such a CONV2D becomes one 1x1 product per tap over the
 * output positions it reads x for (a SLICE of x at the tap's offset,
 * strided by the layer's stride), each PADded with zeros to the whole
 * output and summed; the terms dropped were exact zeros, the sums run in
 * another order (tap by tap). Taken where the live terms are at most a
 * third (at half, a stride-2 case, the extra ops ate the gain) and the
 * layer has at least TAP_SPLIT_MACS multiply-adds. */
#define TAP_SPLIT_MACS (INT64_C(1) << 24)

/* The output positions [*a, *b) of out whose tap at offset off (i d - pad)
 * reads inside [0, n) at stride s */
static void tap_span(int64_t n, int64_t out, int64_t s, int64_t off, int64_t *a, int64_t *b)
{
    const int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s; /* the first with q s + off >= 0 */
    int64_t end = n - 1 - off < 0 ? 0 : (n - 1 - off) / s + 1; /* past the last with q s + off < n */
    if (end > out)
        end = out;
    *a = lo;
    *b = end > lo ? end : lo;
}

/* An op node of one result (type ty) before `at`, from at's model node */
static cc_irval op_before(cc *C, cc_node *at, uint16_t op, uint32_t n_in, const cc_irval *in, const cc_vtype *ty)
{
    cc_node *k = cc_node_new(C, NULL, CC_N_OP, n_in, 1, at->pos);
    k->blk = at->blk;
    k->origin = at->origin;
    k->op = op;
    memcpy(k->in, in, n_in * sizeof *in);
    k->types[0] = *ty;
    k->prev = at->prev;
    k->next = at;
    if (at->prev)
        at->prev->next = k;
    else
        at->blk->first = k;
    at->prev = k;
    return (cc_irval){k, 0};
}

static void split_taps_block(cc *C, cc_blk *b, void *ud)
{
    (void)ud;
    for (cc_node *n = b->first; n; n = n->next) {
        int64_t p[9];
        if (n->kind != CC_N_OP || n->op != ISA_CONV2D || n->n_in != 3 || !is_const(n->in[1]) ||
            !conv_params(n->in[2], p) || p[8] != 1)
            continue;
        const cc_vtype *xt = vtype(n->in[0]);
        const cc_cval *w = cval(n->in[1]);
        if (!known_rank(xt) || xt->rank != 4 || w->rank != 4 || !isa_dtype_float(w->dtype) || xt->dtype != w->dtype)
            continue;
        const int64_t N = xt->dims[0], Cx = xt->dims[1], H = xt->dims[2], W = xt->dims[3];
        const int64_t O = w->dims[0], Cg = w->dims[1], KH = w->dims[2], KW = w->dims[3];
        if (N < 1 || Cx != Cg || H < 1 || W < 1 || KH * KW < 2 || p[0] < 1 || p[1] < 1 || p[6] < 1 || p[7] < 1)
            continue;
        const int64_t OH = (H + p[2] + p[4] - p[6] * (KH - 1) - 1) / p[0] + 1;
        const int64_t OW = (W + p[3] + p[5] - p[7] * (KW - 1) - 1) / p[1] + 1;
        if (OH < 1 || OW < 1 || KH > 64 || KW > 64)
            continue;
        int64_t ra[64], rb[64], ca[64], cb[64], live = 0, taps = 0;
        for (int64_t i = 0; i < KH; i++)
            tap_span(H, OH, p[0], i * p[6] - p[2], &ra[i], &rb[i]);
        for (int64_t j = 0; j < KW; j++)
            tap_span(W, OW, p[1], j * p[7] - p[3], &ca[j], &cb[j]);
        for (int64_t i = 0; i < KH; i++)
            for (int64_t j = 0; j < KW; j++) {
                live += (rb[i] - ra[i]) * (cb[j] - ca[j]);
                taps += rb[i] > ra[i] && cb[j] > ca[j];
            }
        const int64_t full = KH * KW * OH * OW;
        if (taps < 2 || 3 * live > full || N * O * Cg * full < TAP_SPLIT_MACS)
            continue;
        const cc_irval x = cc_resolve(n->in[0]);
        const int64_t unit[9] = {p[0], p[1], 0, 0, 0, 0, 1, 1, 1};
        const cc_irval up = i64s_const(C, n, 9, unit);
        cc_irval acc = {0};
        for (int64_t i = 0; i < KH; i++)
            for (int64_t j = 0; j < KW; j++) {
                const int64_t h = rb[i] - ra[i], v = cb[j] - ca[j];
                if (h < 1 || v < 1)
                    continue;
                /* x at the tap's offset for its live positions */
                const int64_t r0 = ra[i] * p[0] + i * p[6] - p[2], c0 = ca[j] * p[1] + j * p[7] - p[3];
                const int64_t st[4] = {0, 0, r0, c0}, en[4] = {N, Cx, r0 + (h - 1) * p[0] + 1, c0 + (v - 1) * p[1] + 1};
                cc_vtype ty = {.dtype = xt->dtype, .tensor = 1, .rank = 4, .dims = {N, Cx, en[2] - r0, en[3] - c0}};
                cc_irval xs = x;
                if (r0 || c0 || en[2] != H || en[3] != W) {
                    const cc_irval in[3] = {x, i64s_const(C, n, 4, st), i64s_const(C, n, 4, en)};
                    xs = op_before(C, n, ISA_SLICE, 3, in, &ty);
                }
                const cc_irval cin[3] = {xs, window_weights(C, n, w, i, 1, j, 1), up};
                ty.dims[1] = O, ty.dims[2] = h, ty.dims[3] = v;
                cc_irval y = op_before(C, n, ISA_CONV2D, 3, cin, &ty);
                if (h != OH || v != OW) {
                    const int64_t pads[8] = {0, 0, ra[i], ca[j], 0, 0, OH - rb[i], OW - cb[j]};
                    const cc_irval pin[2] = {y, i64s_const(C, n, 8, pads)};
                    ty.dims[2] = OH, ty.dims[3] = OW;
                    y = op_before(C, n, ISA_PAD, 2, pin, &ty);
                }
                if (!acc.n) {
                    acc = y;
                    continue;
                }
                const cc_irval ain[2] = {acc, y};
                ty.dims[2] = OH, ty.dims[3] = OW;
                acc = op_before(C, n, ISA_ADD, 2, ain, &ty);
            }
        /* the layer's node passes the sum on (its users stay as they are) */
        cc_node *last = acc.n;
        n->op = ISA_ADD;
        n->in = last->in;
        n->n_in = 2;
        n->attr = 0;
        cc_node_unlink(last);
    }
}

static void fuse(cc *C, cc_ifn *fn)
{
    each_block(C, fn->top, dead_taps_block, NULL); /* (before the counts: it makes no users) */
    each_block(C, fn->top, split_taps_block, NULL);
    fuse_state S = counted_uses(C, fn);
    each_block(C, fn->top, fold_affine_block, &S);
    each_block(C, fn->top, affine_alone_block, &S);
    each_block(C, fn->top, fuse_block, &S);
    /* counted again: the fusion replaced products and their users, and made nodes */
    fuse_state R = counted_uses(C, fn);
    each_block(C, fn->top, fuse_residual_block, &R); /* (makes no nodes) */
    each_block(C, fn->top, gather_first_block, &R);
    /* again (the residual sums took convolutions into their ADDs, gathers
     * replaced products): activations on products without a bias */
    fuse_state U = counted_uses(C, fn);
    each_block(C, fn->top, fuse_unbiased_block, &U);
    fuse_state L = counted_uses(C, fn);
    each_block(C, fn->top, channels_last_block, &L);
    fuse_state N = counted_uses(C, fn);
    each_block(C, fn->top, rms_norm_block, &N);
}

void cc_optimize(cc *C)
{
    for (uint32_t i = 0; i < C->n_ifns; i++) {
        cc_ifn *fn = C->ifns[i];
        for (int round = 0; round < 4; round++) {
            const_canon K = {0};
            each_block(C, fn->top, canon_block, &K);
            fold_state S = {.params_sure = !entry_called(C)};
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
        transposes(C, fn);
        fuse(C, fn);
    }
    cc_dce(C);
}
