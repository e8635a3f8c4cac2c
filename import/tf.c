/* import/tf.c — a frozen TensorFlow GraphDef to the structured IR: parsing,
 * the graph model, v1 control flow (Enter/Merge/Switch/NextIteration/Exit
 * frames and Switch/Merge conds) rebuilt as While and If nodes, and the
 * function library (functional While/If/Case inlined, calls as CALL/RETURN).
 * docs/tensorflow.md says what is supported and how each construct maps. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "import/import.h"
#include "import/pb.h"
#include "import/tf.h"

#define MAX_INLINE 64      /* nested inlining of While/If bodies (a body that inlines itself) */
#define MAX_INLINED 20000  /* inlined bodies in all */
#define MAX_CONST_BYTES ((size_t)1 << 28) /* one constant tensor */

struct imp_tf_st {
    cc *C;
    const TfvmTf__GraphDef *gd;
    const char *outputs;
    const imp_tf_sig *sig;  /* a SavedModel signature's feeds, fetches and variables, or NULL */
    char note[400];         /* for the log once the import succeeds: the feeds left out */
    uint32_t n_funcs;
    TfvmTf__FunctionDef **funcs;
    cc_ifn **ifns;         /* per function, once made */
    imp_tf_graph **graphs; /* per function, once parsed */
    uint32_t inline_depth;
    uint32_t n_inlined;    /* While/If bodies inlined so far (bounds a body that inlines itself twice) */
};

/* ---- Scopes: where a node's value lives in the structured IR ----------------------
 * ROOT is the instance's top block; a v1 loop frame has a HEAD (its loop
 * variables and condition) and a BODY inside it; a v1 cond has two BRANCH
 * scopes (0 = false, 1 = true). A node's scope is the deepest scope among
 * its inputs (data and control), which must lie on one chain. */
enum { SC_ROOT, SC_HEAD, SC_BODY, SC_BRANCH };
enum { NK_PLAIN, NK_ENTER, NK_LMERGE, NK_CMERGE, NK_LSWITCH, NK_CSWITCH, NK_EXIT, NK_NEXT, NK_LOOPCOND };

typedef struct frame frame;
typedef struct cnd cnd;
typedef struct sc {
    uint8_t kind, branch;
    uint32_t depth;
    struct sc *parent;
    frame *f;
    cnd *c;
} sc;

struct frame {
    const char *name;
    sc head, body;
    bool parent_done, busy, needed, creating;
    uint32_t n_merges, n_enters;
    uint32_t *merges, *enters;
    int32_t loopcond;
    int64_t parallel;
    cc_node *w;
};

struct cnd {
    imp_tf_ref pred;
    sc br[2];
    bool parent_done, busy, creating;
    uint32_t n_sw, n_merges;
    uint32_t *sw, *merges;
    cc_node *ifn;
};

struct imp_tf_inst {
    imp_tf_st *T;
    const imp_tf_graph *g;
    cc_blk *top;
    const cc_irval *args;
    sc root;
    uint8_t *state, *kind;
    sc **scope, **sw1;  /* scope of a node (output 0); sw1: a Switch's output 1 */
    frame **nframe;
    cnd **ncond;
    uint32_t *var;      /* LMERGE: loop variable; CMERGE: If output */
    uint8_t *mtrue;     /* CMERGE: the input from the true branch */
    bool *needed;
    cc_irval **vals;
    uint32_t n_fetch;
    const imp_tf_ref *fetch; /* the values asked of this instance */
    uint32_t n_frames, n_conds;
    frame **frames;
    cnd **conds;
    /* node_scope, need and emit walk a graph with this stack, not the C
     * stack: a chain of 32,600 nodes (a 1 MB GraphDef) overflowed 8 MB. A
     * walk may start inside another; each pops back to where it began. */
    struct walk_ent {
        int32_t node;
        uint32_t k;
    } *ws;
    uint32_t wn, wcap;
    uint8_t *walking;   /* on emit's walk stack */
};

static const char *S(const char *s) { return s ? s : ""; }

/* Every message leaves through here: names in a GraphDef are arbitrary
 * bytes, and a message is one printable line. */
_Noreturn void imp_tf_error(cc *C, tfvm_status code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    imp_one_line(msg);
    cc_error(C, (cc_pos){0, 0}, code, "%s", msg);
}

_Noreturn static void fail_at(cc *C, const imp_tf_graph *g, const char *fmt, ...) UT_PRINTF(3, 4);
_Noreturn static void fail_at(cc *C, const imp_tf_graph *g, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g && g->what[0] == 'f')
        imp_tf_error(C, TFVM_ERR_UNSUPPORTED, "%s: %s", g->what, msg);
    imp_tf_error(C, TFVM_ERR_UNSUPPORTED, "%s", msg);
}

const char *imp_tf_where(const imp_tf_opctx *X) { return X->I->g->what; }

_Noreturn void imp_tf_fail(imp_tf_opctx *X, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fail_at(X->C, X->I->g, "node '%s' (%s): %s", X->n->name, X->n->op, msg);
}

const tf_attr *imp_tf_attr(const tf_nodedef *d, const char *key)
{
    for (size_t i = 0; i < d->n_attr; i++)
        if (d->attr[i]->key && strcmp(d->attr[i]->key, key) == 0)
            return d->attr[i]->value;
    return NULL;
}

const TfvmTf__TensorProto *imp_tf_variable(imp_tf_st *T, const char *name)
{
    for (uint32_t k = 0; T->sig && k < T->sig->n_vars; k++)
        if (strcmp(T->sig->var_nodes[k], name) == 0)
            return T->sig->var_values[k];
    return NULL;
}

tfvm_dtype imp_tf_dtype(int dt)
{
    switch (dt) {
    case TFVM_TF__DATA_TYPE__DT_FLOAT: return TFVM_F32;
    case TFVM_TF__DATA_TYPE__DT_DOUBLE: return TFVM_F64;
    case TFVM_TF__DATA_TYPE__DT_INT32: return TFVM_I32;
    case TFVM_TF__DATA_TYPE__DT_INT64: return TFVM_I64;
    case TFVM_TF__DATA_TYPE__DT_BOOL: return TFVM_BOOL;
    case TFVM_TF__DATA_TYPE__DT_UINT8: return TFVM_U8;
    case TFVM_TF__DATA_TYPE__DT_INT8: return TFVM_I8;
    default: return 0;
    }
}

/* ---- Constants ------------------------------------------------------------------------ */

cc_irval imp_tf_tensor(imp_tf_opctx *X, const TfvmTf__TensorProto *t)
{
    if (!t)
        imp_tf_fail(X, "no tensor value");
    tfvm_dtype d = imp_tf_dtype(t->dtype);
    if (!d)
        imp_tf_fail(X, "tensor dtype %d is not supported", t->dtype);
    int64_t dims[TFVM_MAX_RANK];
    int rank = 0;
    uint64_t count = 1;
    if (t->tensor_shape) {
        if (t->tensor_shape->n_dim > TFVM_MAX_RANK)
            imp_tf_fail(X, "tensor of rank %zu (at most %d)", t->tensor_shape->n_dim, TFVM_MAX_RANK);
        for (size_t i = 0; i < t->tensor_shape->n_dim; i++) {
            int64_t s = t->tensor_shape->dim[i]->size;
            if (s < 0 || s > ((int64_t)1 << 40))
                imp_tf_fail(X, "tensor dim %lld out of range", (long long)s);
            dims[rank++] = s;
            if (s && count > ((uint64_t)1 << 40) / (uint64_t)s)
                imp_tf_fail(X, "tensor too large");
            count *= (uint64_t)s;
        }
    }
    size_t es = tfvm_dtype_size(d), nbytes = (size_t)count * es;
    if (nbytes > MAX_CONST_BYTES)
        imp_tf_fail(X, "constant of %zu bytes (at most %zu)", nbytes, MAX_CONST_BYTES);
    const void *src = NULL;
    size_t n_vals = 0;
    unsigned char *buf = cc_alloc(X->C, nbytes ? nbytes : 1);
    if (t->tensor_content.len) {
        if (t->tensor_content.len != nbytes)
            imp_tf_fail(X, "tensor_content has %zu bytes, shape and dtype need %zu", t->tensor_content.len, nbytes);
        memcpy(buf, t->tensor_content.data, nbytes);
    } else {
        switch (d) {
        case TFVM_F32: src = t->float_val, n_vals = t->n_float_val; break;
        case TFVM_F64: src = t->double_val, n_vals = t->n_double_val; break;
        case TFVM_I64: src = t->int64_val, n_vals = t->n_int64_val; break;
        case TFVM_BOOL: n_vals = t->n_bool_val; break;
        default: n_vals = t->n_int_val; break;
        }
        if (n_vals > count)
            imp_tf_fail(X, "tensor has %zu values for %llu elements", n_vals, (unsigned long long)count);
        /* TF writes a repeated last value once: fill with it */
        for (uint64_t i = 0; i < count && n_vals; i++) {
            size_t j = i < n_vals ? (size_t)i : n_vals - 1;
            unsigned char *p = buf + i * es;
            switch (d) {
            case TFVM_BOOL: p[0] = t->bool_val[j] ? 1 : 0; break;
            case TFVM_I32: memcpy(p, &t->int_val[j], 4); break;
            case TFVM_U8: p[0] = (uint8_t)t->int_val[j]; break;
            case TFVM_I8: p[0] = (uint8_t)(int8_t)t->int_val[j]; break;
            default: memcpy(p, (const unsigned char *)src + j * es, es); break;
            }
        }
    }
    return cc_const_new(X->C, X->b, d, rank, dims, buf, nbytes, false);
}

/* ---- Graphs ------------------------------------------------------------------------- */

typedef struct nmap {
    uint32_t cap;
    int32_t *slot;
    const imp_tf_node *nodes;
} nmap;

static uint32_t hash_str(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static void nmap_init(cc *C, nmap *m, const imp_tf_node *nodes, uint32_t n)
{
    m->cap = 16;
    while (m->cap < 2 * n + 2)
        m->cap *= 2;
    m->slot = cc_array(C, m->cap, sizeof *m->slot);
    m->nodes = nodes;
    for (uint32_t i = 0; i < m->cap; i++)
        m->slot[i] = -1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t h = hash_str(nodes[i].name, strlen(nodes[i].name)) & (m->cap - 1);
        while (m->slot[h] >= 0)
            h = (h + 1) & (m->cap - 1);
        m->slot[h] = (int32_t)i;
    }
}

static int32_t nmap_find(const nmap *m, const char *s, size_t n)
{
    uint32_t h = hash_str(s, n) & (m->cap - 1);
    for (; m->slot[h] >= 0; h = (h + 1) & (m->cap - 1)) {
        const char *t = m->nodes[m->slot[h]].name;
        if (strlen(t) == n && memcmp(t, s, n) == 0)
            return m->slot[h];
    }
    return -1;
}

static int32_t arg_find(const imp_tf_graph *g, const char *s, size_t n)
{
    for (uint32_t i = 0; i < g->n_args; i++)
        if (strlen(g->arg_names[i]) == n && memcmp(g->arg_names[i], s, n) == 0)
            return (int32_t)i;
    return -1;
}

static bool parse_uint(const char *s, size_t n, uint32_t *out)
{
    if (n == 0 || n > 9)
        return false;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

/* Resolves a data input: "node" or "node:k" in a GraphDef; "arg",
 * "node:out_arg:idx" (or "node:k", "node") in a FunctionDef. */
static bool resolve(imp_tf_st *T, const imp_tf_graph *g, const nmap *m, bool fn, const char *s, imp_tf_ref *out)
{
    size_t len = strlen(s);
    const char *c1 = memchr(s, ':', len);
    if (!c1) {
        int32_t a = fn ? arg_find(g, s, len) : -1;
        if (a >= 0)
            return *out = (imp_tf_ref){-1 - a, 0}, true;
        int32_t i = nmap_find(m, s, len);
        if (i < 0)
            return false;
        return *out = (imp_tf_ref){i, 0}, true;
    }
    int32_t i = nmap_find(m, s, (size_t)(c1 - s));
    if (i < 0)
        return false;
    const char *rest = c1 + 1;
    size_t rl = len - (size_t)(rest - s);
    const char *c2 = memchr(rest, ':', rl);
    uint32_t k;
    if (!c2) {
        if (!parse_uint(rest, rl, &k))
            return false;
    } else {
        uint32_t idx;
        if (!parse_uint(c2 + 1, rl - (size_t)(c2 + 1 - rest), &idx))
            return false;
        int r = imp_tf_output_index(T, g->nodes[i].def, rest, (size_t)(c2 - rest), idx);
        if (r < 0)
            return false;
        k = (uint32_t)r;
    }
    if (k >= g->nodes[i].n_out)
        return false;
    *out = (imp_tf_ref){i, k};
    return true;
}

static imp_tf_graph *graph_new(imp_tf_st *T, const char *what, tf_nodedef *const *defs, size_t n, bool fn,
                               const TfvmTf__FunctionDef *f)
{
    cc *C = T->C;
    imp_tf_graph *g = cc_alloc(C, sizeof *g);
    g->what = what;
    g->n_nodes = (uint32_t)n;
    g->nodes = cc_array(C, n + 1, sizeof *g->nodes);
    if (f) {
        const TfvmTf__OpDef *sig = f->signature;
        g->n_args = (uint32_t)sig->n_input_arg;
        g->arg_names = cc_array(C, g->n_args + 1, sizeof *g->arg_names);
        g->arg_types = cc_array(C, g->n_args + 1, sizeof *g->arg_types);
        for (uint32_t k = 0; k < g->n_args; k++) {
            g->arg_names[k] = S(sig->input_arg[k]->name);
            g->arg_types[k] = imp_tf_dtype(sig->input_arg[k]->type);
            /* a TensorList (variant) carries its contents, a resource its
             * variable's value (a SavedModel's): any dtype; f32 is a hint only */
            if (sig->input_arg[k]->type == TFVM_TF__DATA_TYPE__DT_VARIANT ||
                sig->input_arg[k]->type == TFVM_TF__DATA_TYPE__DT_RESOURCE)
                g->arg_types[k] = TFVM_F32;
            if (!g->arg_types[k])
                fail_at(C, g, "argument '%s' has an unsupported type", g->arg_names[k]);
        }
    }
    for (size_t i = 0; i < n; i++) {
        imp_tf_node *nd = &g->nodes[i];
        nd->def = defs[i];
        nd->name = S(defs[i]->name);
        nd->op = S(defs[i]->op);
        nd->n_out = imp_tf_n_outputs(T, defs[i]);
    }
    nmap m;
    nmap_init(C, &m, g->nodes, g->n_nodes);
    for (size_t i = 0; i < n; i++) {
        imp_tf_node *nd = &g->nodes[i];
        if (nmap_find(&m, nd->name, strlen(nd->name)) != (int32_t)i)
            fail_at(C, g, "two nodes are named '%s'", nd->name);
        const tf_nodedef *d = nd->def;
        nd->in = cc_array(C, d->n_input + 1, sizeof *nd->in);
        nd->ctl = cc_array(C, d->n_input + 1, sizeof *nd->ctl);
        for (size_t j = 0; j < d->n_input; j++) {
            const char *s = S(d->input[j]);
            if (s[0] == '^') {
                int32_t c = nmap_find(&m, s + 1, strlen(s + 1));
                if (c >= 0)
                    nd->ctl[nd->n_ctl++] = (uint32_t)c;
                else if (!fn || arg_find(g, s + 1, strlen(s + 1)) < 0)
                    fail_at(C, g, "node '%s': control input '%s' names no node", nd->name, s);
                continue;
            }
            if (nd->n_ctl)
                fail_at(C, g, "node '%s': data input '%s' after a control input", nd->name, s);
            if (!resolve(T, g, &m, fn, s, &nd->in[nd->n_in]))
                fail_at(C, g, "node '%s': input '%s' names no node output", nd->name, s);
            nd->n_in++;
        }
    }
    if (f) {
        const TfvmTf__OpDef *sig = f->signature;
        g->n_rets = (uint32_t)sig->n_output_arg;
        g->rets = cc_array(C, g->n_rets + 1, sizeof *g->rets);
        g->ret_names = cc_array(C, g->n_rets + 1, sizeof *g->ret_names);
        g->ret_types = cc_array(C, g->n_rets + 1, sizeof *g->ret_types);
        for (uint32_t k = 0; k < g->n_rets; k++) {
            const char *rn = S(sig->output_arg[k]->name);
            g->ret_names[k] = rn;
            g->ret_types[k] = imp_tf_dtype(sig->output_arg[k]->type);
            if (sig->output_arg[k]->type == TFVM_TF__DATA_TYPE__DT_VARIANT ||
                sig->output_arg[k]->type == TFVM_TF__DATA_TYPE__DT_RESOURCE)
                g->ret_types[k] = TFVM_F32;
            if (!g->ret_types[k])
                fail_at(C, g, "result '%s' has an unsupported type", rn);
            const char *v = NULL;
            for (size_t j = 0; j < f->n_ret; j++)
                if (strcmp(S(f->ret[j]->key), rn) == 0)
                    v = S(f->ret[j]->value);
            if (!v)
                fail_at(C, g, "result '%s' has no value in ret", rn);
            if (!resolve(T, g, &m, true, v, &g->rets[k]))
                fail_at(C, g, "result '%s': '%s' names no node output", rn, v);
        }
    }
    return g;
}

static imp_tf_graph *func_graph(imp_tf_st *T, int32_t f);

static int32_t func_find(imp_tf_st *T, const char *name)
{
    for (uint32_t i = 0; i < T->n_funcs; i++)
        if (T->funcs[i]->signature && strcmp(S(T->funcs[i]->signature->name), name) == 0)
            return (int32_t)i;
    return -1;
}

bool imp_tf_is_function(imp_tf_st *T, const char *name) { return func_find(T, name) >= 0; }

/* How many data inputs and results of g read r. */
static uint32_t uses_of(const imp_tf_graph *g, imp_tf_ref r)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        for (uint32_t j = 0; j < g->nodes[i].n_in; j++)
            n += g->nodes[i].in[j].node == r.node && g->nodes[i].in[j].k == r.k;
    for (uint32_t j = 0; j < g->n_rets; j++)
        n += g->rets[j].node == r.node && g->rets[j].k == r.k;
    return n;
}

bool imp_tf_dead_counter(imp_tf_st *T, const char *cond, const char *body, uint32_t k)
{
    int32_t fc = func_find(T, cond), fb = func_find(T, body);
    if (fc < 0 || fb < 0)
        return false;
    const imp_tf_graph *gc = func_graph(T, fc), *gb = func_graph(T, fb);
    imp_tf_ref arg = {-1 - (int32_t)k, 0};
    if (k >= gc->n_args || k >= gb->n_args || k >= gb->n_rets || uses_of(gc, arg) || uses_of(gb, arg) != 1)
        return false;
    imp_tf_ref r = gb->rets[k];
    if (uses_of(gb, r) != 1)
        return false;
    for (uint32_t guard = 0; r.node >= 0 && guard < gb->n_nodes; guard++) {
        const imp_tf_node *n = &gb->nodes[r.node];
        if (strcmp(n->op, "Identity") != 0 || n->n_in != 1)
            break;
        r = n->in[0];
        if (uses_of(gb, r) != 1)
            return false;
    }
    if (r.node < 0)
        return false;
    const imp_tf_node *n = &gb->nodes[r.node];
    if ((strcmp(n->op, "AddV2") != 0 && strcmp(n->op, "Add") != 0) || n->n_in != 2)
        return false;
    for (uint32_t j = 0; j < 2; j++) {
        imp_tf_ref a = n->in[j], b = n->in[1 - j];
        if (a.node == arg.node && b.node >= 0 && strcmp(gb->nodes[b.node].op, "Const") == 0)
            return true;
    }
    return false;
}

bool imp_tf_output_used(const imp_tf_opctx *X, uint32_t k)
{
    const imp_tf_inst *I = X->I;
    imp_tf_ref r = {(int32_t)(X->n - I->g->nodes), k};
    if (uses_of(I->g, r))
        return true;
    for (uint32_t j = 0; j < I->n_fetch; j++)
        if (I->fetch[j].node == r.node && I->fetch[j].k == r.k)
            return true;
    return false;
}

bool imp_tf_passes_through(imp_tf_st *T, const char *fname, uint32_t k)
{
    int32_t f = func_find(T, fname);
    if (f < 0)
        return false;
    const imp_tf_graph *g = func_graph(T, f);
    if (k >= g->n_rets || k >= g->n_args)
        return false;
    imp_tf_ref r = g->rets[k];
    for (uint32_t guard = 0; r.node >= 0 && guard < g->n_nodes; guard++) {
        const imp_tf_node *n = &g->nodes[r.node];
        if (strcmp(n->op, "Identity") != 0 || n->n_in != 1)
            break;
        r = n->in[0];
    }
    return r.node == -1 - (int32_t)k;
}

int imp_tf_function_output(imp_tf_st *T, const char *fname, const char *arg, size_t len, uint32_t idx)
{
    int32_t f = func_find(T, fname);
    if (f < 0)
        return -1;
    const TfvmTf__OpDef *sig = T->funcs[f]->signature;
    for (size_t k = 0; k < sig->n_output_arg; k++)
        if (strlen(S(sig->output_arg[k]->name)) == len && memcmp(sig->output_arg[k]->name, arg, len) == 0)
            return idx == 0 ? (int)k : -1;
    return -1;
}

uint32_t imp_tf_function_n_outputs(imp_tf_st *T, const char *fname)
{
    int32_t f = func_find(T, fname);
    return f < 0 ? 1 : (uint32_t)T->funcs[f]->signature->n_output_arg;
}

static imp_tf_graph *func_graph(imp_tf_st *T, int32_t f)
{
    if (!T->graphs[f]) {
        const TfvmTf__FunctionDef *fd = T->funcs[f];
        char *what = cc_alloc(T->C, strlen(S(fd->signature->name)) + 16);
        sprintf(what, "function '%s'", S(fd->signature->name));
        T->graphs[f] = graph_new(T, what, fd->node_def, fd->n_node_def, true, fd);
    }
    return T->graphs[f];
}

/* ---- One emission instance ------------------------------------------------------------ */

static void emit_fail(imp_tf_inst *I, uint32_t n, const char *fmt, ...) UT_PRINTF(3, 4);
_Noreturn static void emit_fail(imp_tf_inst *I, uint32_t n, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fail_at(I->T->C, I->g, "node '%s' (%s): %s", I->g->nodes[n].name, I->g->nodes[n].op, msg);
}

static bool is_op(const imp_tf_node *n, const char *op) { return strcmp(n->op, op) == 0; }

static bool within(const sc *s, const sc *anc)
{
    for (; s; s = s->parent)
        if (s == anc)
            return true;
    return false;
}

static frame *frame_get(imp_tf_inst *I, const char *name)
{
    for (uint32_t i = 0; i < I->n_frames; i++)
        if (strcmp(I->frames[i]->name, name) == 0)
            return I->frames[i];
    cc *C = I->T->C;
    uint32_t cap = I->n_frames;
    I->frames = cc_grow(C, I->frames, I->n_frames, &cap, sizeof *I->frames);
    frame *f = cc_alloc(C, sizeof *f);
    f->name = name;
    f->loopcond = -1;
    f->merges = cc_array(C, I->g->n_nodes + 1, sizeof *f->merges);
    f->enters = cc_array(C, I->g->n_nodes + 1, sizeof *f->enters);
    f->head.kind = SC_HEAD, f->head.f = f;
    f->body.kind = SC_BODY, f->body.f = f, f->body.parent = &f->head;
    I->frames[I->n_frames++] = f;
    return f;
}

/* A cond's predicate: through Identity nodes (tf.cond's pred_id). */
static imp_tf_ref pred_key(const imp_tf_graph *g, imp_tf_ref r)
{
    for (uint32_t guard = 0; r.node >= 0 && guard < g->n_nodes; guard++) {
        const imp_tf_node *p = &g->nodes[r.node];
        if (!is_op(p, "Identity") || p->n_in != 1)
            break;
        r = p->in[0];
    }
    return r;
}

static cnd *cond_get(imp_tf_inst *I, imp_tf_ref pred)
{
    for (uint32_t i = 0; i < I->n_conds; i++)
        if (I->conds[i]->pred.node == pred.node && I->conds[i]->pred.k == pred.k)
            return I->conds[i];
    cc *C = I->T->C;
    uint32_t cap = I->n_conds;
    I->conds = cc_grow(C, I->conds, I->n_conds, &cap, sizeof *I->conds);
    cnd *c = cc_alloc(C, sizeof *c);
    c->pred = pred;
    c->sw = cc_array(C, I->g->n_nodes + 1, sizeof *c->sw);
    c->merges = cc_array(C, I->g->n_nodes + 1, sizeof *c->merges);
    for (int b = 0; b < 2; b++)
        c->br[b] = (sc){.kind = SC_BRANCH, .branch = (uint8_t)b, .c = c};
    I->conds[I->n_conds++] = c;
    return c;
}

/* Inputs that an op reads only for their kind, never as data: the
 * TensorArray handle (the array's contents travel as its flow value). */
static bool skip_input(const imp_tf_node *n, uint32_t i)
{
    return i == 0 && strncmp(n->op, "TensorArray", 11) == 0 && strcmp(n->op, "TensorArrayV3") != 0;
}

/* Classifies the control-flow nodes and groups them into frames and conds. */
static void classify(imp_tf_inst *I)
{
    const imp_tf_graph *g = I->g;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const imp_tf_node *n = &g->nodes[i];
        if (is_op(n, "Enter") || is_op(n, "RefEnter")) {
            if (n->n_in != 1)
                emit_fail(I, i, "needs one input");
            const tf_attr *fa = imp_tf_attr(n->def, "frame_name");
            if (!fa || fa->value_case != TFVM_TF__ATTR_VALUE__VALUE_S)
                emit_fail(I, i, "has no frame_name");
            char *name = cc_strndup(I->T->C, (const char *)fa->s.data, fa->s.len);
            frame *f = frame_get(I, name);
            I->kind[i] = NK_ENTER;
            I->nframe[i] = f;
            f->enters[f->n_enters++] = i;
            const tf_attr *pa = imp_tf_attr(n->def, "parallel_iterations");
            if (pa && pa->value_case == TFVM_TF__ATTR_VALUE__VALUE_I && pa->i > f->parallel)
                f->parallel = pa->i;
        }
    }
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const imp_tf_node *n = &g->nodes[i];
        if (is_op(n, "NextIteration") || is_op(n, "RefNextIteration")) {
            I->kind[i] = NK_NEXT;
        } else if (is_op(n, "LoopCond")) {
            I->kind[i] = NK_LOOPCOND;
        } else if (is_op(n, "Merge") || is_op(n, "RefMerge")) {
            int32_t enter = -1;
            bool loop = false;
            for (uint32_t j = 0; j < n->n_in; j++) {
                int32_t p = n->in[j].node;
                if (p >= 0 && (is_op(&g->nodes[p], "NextIteration") || is_op(&g->nodes[p], "RefNextIteration")))
                    loop = true;
                else if (p >= 0 && I->kind[p] == NK_ENTER)
                    enter = p;
            }
            if (loop) {
                if (n->n_in != 2 || enter < 0)
                    emit_fail(I, i, "a loop Merge needs one Enter and one NextIteration input");
                frame *f = I->nframe[enter];
                I->kind[i] = NK_LMERGE;
                I->nframe[i] = f;
                I->var[i] = f->n_merges;
                f->merges[f->n_merges++] = i;
            } else {
                if (n->n_in != 2)
                    emit_fail(I, i, "a cond Merge needs 2 inputs, has %u", n->n_in);
                I->kind[i] = NK_CMERGE;
            }
        }
    }
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const imp_tf_node *n = &g->nodes[i];
        if (!is_op(n, "Switch") && !is_op(n, "RefSwitch"))
            continue;
        if (n->n_in != 2)
            emit_fail(I, i, "needs 2 inputs");
        int32_t p = n->in[1].node;
        if (p >= 0 && is_op(&g->nodes[p], "LoopCond")) {
            int32_t m = n->in[0].node;
            if (m < 0 || I->kind[m] != NK_LMERGE)
                emit_fail(I, i, "a loop Switch must switch a loop Merge");
            frame *f = I->nframe[m];
            if (f->loopcond >= 0 && f->loopcond != p)
                emit_fail(I, i, "frame '%s' has two LoopCond nodes", f->name);
            f->loopcond = p;
            I->kind[i] = NK_LSWITCH;
            I->nframe[i] = f;
        } else {
            cnd *c = cond_get(I, pred_key(g, n->in[1]));
            I->kind[i] = NK_CSWITCH;
            I->ncond[i] = c;
            c->sw[c->n_sw++] = i;
        }
    }
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const imp_tf_node *n = &g->nodes[i];
        if (!is_op(n, "Exit") && !is_op(n, "RefExit"))
            continue;
        int32_t s = n->n_in == 1 ? n->in[0].node : -1;
        if (s < 0 || I->kind[s] != NK_LSWITCH || n->in[0].k != 0)
            emit_fail(I, i, "an Exit must take output 0 of a loop Switch");
        I->kind[i] = NK_EXIT;
        I->nframe[i] = I->nframe[s];
    }
    for (uint32_t i = 0; i < I->n_frames; i++)
        if (I->frames[i]->loopcond < 0 && I->frames[i]->n_merges)
            fail_at(I->T->C, I->g, "frame '%s' has no LoopCond", I->frames[i]->name);
}

static void node_scope(imp_tf_inst *I, uint32_t n);

static sc *ref_scope(imp_tf_inst *I, imp_tf_ref r)
{
    if (r.node < 0)
        return &I->root;
    node_scope(I, (uint32_t)r.node);
    if (r.k == 1 && I->sw1[r.node])
        return I->sw1[r.node];
    return I->scope[r.node];
}

static sc *deeper(imp_tf_inst *I, uint32_t n, sc *a, sc *b)
{
    if (within(b, a))
        return b;
    if (within(a, b))
        return a;
    emit_fail(I, n, "mixes values of two different loop frames or cond branches");
}

/* A frame's parent scope: the deepest of its Enters' inputs (node_scope's
 * walk has placed them, and tells a frame entered from inside itself). */
static void frame_parent(imp_tf_inst *I, frame *f)
{
    if (f->parent_done)
        return;
    sc *p = &I->root;
    for (uint32_t j = 0; j < f->n_enters; j++)
        p = deeper(I, f->enters[j], p, ref_scope(I, I->g->nodes[f->enters[j]].in[0]));
    f->head.parent = p;
    f->head.depth = p->depth + 1;
    f->body.depth = p->depth + 2;
    f->parent_done = true;
    f->busy = false;
}

static void cond_parent(imp_tf_inst *I, cnd *c)
{
    if (c->parent_done)
        return;
    sc *p = ref_scope(I, c->pred);
    /* each Switch's own predicate input too: tf.cond's pred_id carries a
     * control input that places the cond in an enclosing loop's body */
    for (uint32_t j = 0; j < c->n_sw; j++)
        for (uint32_t k = 0; k < 2; k++)
            p = deeper(I, c->sw[j], p, ref_scope(I, I->g->nodes[c->sw[j]].in[k]));
    for (int b = 0; b < 2; b++) {
        c->br[b].parent = p;
        c->br[b].depth = p->depth + 1;
    }
    c->parent_done = true;
    c->busy = false;
}

/* The cond a Merge joins: one input inside branch b of cond c, the other in
 * branch 1-b (or outside the cond: a branch that returns an outer value). */
static bool merge_cond(sc *sa, sc *sb, cnd **out, int *a_branch)
{
    for (sc *x = sa; x; x = x->parent)
        if (x->kind == SC_BRANCH && within(sb, &x->c->br[1 - x->branch]))
            return *out = x->c, *a_branch = x->branch, true;
    for (sc *x = sa; x; x = x->parent)
        if (x->kind == SC_BRANCH && within(x->c->br[0].parent, sb))
            return *out = x->c, *a_branch = x->branch, true;
    for (sc *x = sb; x; x = x->parent)
        if (x->kind == SC_BRANCH && within(x->c->br[0].parent, sa))
            return *out = x->c, *a_branch = 1 - x->branch, true;
    return false;
}

/* Node n's scope, once every scope it depends on is known (scope_dep). */
static void node_scope_one(imp_tf_inst *I, uint32_t n)
{
    const imp_tf_node *nd = &I->g->nodes[n];
    sc *s = &I->root;
    switch (I->kind[n]) {
    case NK_ENTER:
    case NK_NEXT:
    case NK_LOOPCOND: s = ref_scope(I, nd->in[0]); break;
    case NK_LMERGE:
        frame_parent(I, I->nframe[n]);
        s = &I->nframe[n]->head;
        break;
    case NK_LSWITCH:
        frame_parent(I, I->nframe[n]);
        s = &I->nframe[n]->head;
        I->sw1[n] = &I->nframe[n]->body;
        break;
    case NK_EXIT:
        frame_parent(I, I->nframe[n]);
        s = I->nframe[n]->head.parent;
        break;
    case NK_CSWITCH:
        cond_parent(I, I->ncond[n]);
        s = &I->ncond[n]->br[0];
        I->sw1[n] = &I->ncond[n]->br[1];
        break;
    case NK_CMERGE: {
        sc *sa = ref_scope(I, nd->in[0]), *sb = ref_scope(I, nd->in[1]);
        cnd *c;
        int ab;
        if (!merge_cond(sa, sb, &c, &ab))
            emit_fail(I, n, "joins values that are not the two branches of one cond");
        I->ncond[n] = c;
        I->mtrue[n] = ab == 1 ? 0 : 1;
        c->merges[c->n_merges++] = n;
        s = c->br[0].parent;
        break;
    }
    default:
        for (uint32_t j = 0; j < nd->n_in; j++)
            if (!skip_input(nd, j))
                s = deeper(I, n, s, ref_scope(I, nd->in[j]));
        for (uint32_t j = 0; j < nd->n_ctl; j++)
            s = deeper(I, n, s, ref_scope(I, (imp_tf_ref){(int32_t)nd->ctl[j], 0}));
        break;
    }
    I->scope[n] = s;
    I->state[n] = 2;
}


static void walk_push(imp_tf_inst *I, int32_t node)
{
    I->ws = cc_grow(I->T->C, I->ws, I->wn, &I->wcap, sizeof *I->ws);
    I->ws[I->wn++] = (struct walk_ent){node, 0};
}

/* The k-th value whose scope node n's scope depends on (false: no more):
 * a pass-through's input, a frame's Enters' inputs, a cond's predicate and
 * its Switches' inputs, a cond Merge's inputs, else the data and control
 * inputs. A node < 0 (a function argument, a skipped input) has none. */
static bool scope_dep(imp_tf_inst *I, uint32_t n, uint32_t k, int32_t *dep)
{
    const imp_tf_node *nd = &I->g->nodes[n];
    switch (I->kind[n]) {
    case NK_ENTER:
    case NK_NEXT:
    case NK_LOOPCOND:
        if (!nd->n_in)
            emit_fail(I, n, "needs one input");
        *dep = nd->in[0].node;
        return k == 0;
    case NK_LMERGE:
    case NK_LSWITCH:
    case NK_EXIT: {
        const frame *f = I->nframe[n];
        if (f->parent_done || k >= f->n_enters)
            return false;
        *dep = I->g->nodes[f->enters[k]].in[0].node;
        return true;
    }
    case NK_CSWITCH: {
        const cnd *c = I->ncond[n];
        if (c->parent_done || k > 2 * c->n_sw)
            return false;
        *dep = k == 0 ? c->pred.node : I->g->nodes[c->sw[(k - 1) / 2]].in[(k - 1) % 2].node;
        return true;
    }
    case NK_CMERGE:
        *dep = k < 2 ? nd->in[k].node : -1;
        return k < 2;
    default:
        if (k < nd->n_in)
            *dep = skip_input(nd, k) ? -1 : nd->in[k].node;
        else if (k < nd->n_in + nd->n_ctl)
            *dep = (int32_t)nd->ctl[k - nd->n_in];
        return k < nd->n_in + nd->n_ctl;
    }
}

/* Node n goes on node_scope's walk: a node met again before its scope is
 * known is on a cycle, and a frame or cond met again before its parent
 * scope is known is entered from inside itself. */
static void scope_push(imp_tf_inst *I, uint32_t n)
{
    if (I->state[n] == 1)
        emit_fail(I, n, "is on a cycle outside any while loop");
    I->state[n] = 1;
    switch (I->kind[n]) {
    case NK_LMERGE:
    case NK_LSWITCH:
    case NK_EXIT: {
        frame *f = I->nframe[n];
        if (!f->parent_done && f->busy)
            emit_fail(I, n, "frame '%s' is entered with values computed inside it", f->name);
        f->busy = !f->parent_done;
        break;
    }
    case NK_CSWITCH: {
        cnd *c = I->ncond[n];
        if (!c->parent_done && c->busy)
            emit_fail(I, n, "a cond's Switch takes a value computed inside that cond");
        c->busy = !c->parent_done;
        break;
    }
    default: break;
    }
    walk_push(I, (int32_t)n);
}

/* The scopes of n and of everything it depends on, deepest first. */
static void node_scope(imp_tf_inst *I, uint32_t n)
{
    if (I->state[n] == 2)
        return;
    const uint32_t base = I->wn;
    scope_push(I, n);
    while (I->wn > base) {
        const uint32_t m = (uint32_t)I->ws[I->wn - 1].node;
        int32_t d = -1;
        bool pushed = false;
        while (!pushed && scope_dep(I, m, I->ws[I->wn - 1].k, &d)) {
            I->ws[I->wn - 1].k++;
            if (d >= 0 && I->state[d] != 2) {
                scope_push(I, (uint32_t)d);
                pushed = true;
            }
        }
        if (pushed)
            continue;
        node_scope_one(I, m);
        I->wn--;
    }
}

/* Marks what r needs, depth first in input order (a frame: its Merges,
 * their inputs and its LoopCond first), each node's scope found. */
static void need(imp_tf_inst *I, imp_tf_ref r)
{
    const uint32_t base = I->wn;
    walk_push(I, r.node);
    while (I->wn > base) {
        const int32_t x = I->ws[--I->wn].node;
        if (x < 0 || I->needed[x])
            continue;
        const uint32_t n = (uint32_t)x;
        I->needed[n] = true;
        node_scope(I, n);
        const imp_tf_node *nd = &I->g->nodes[n];
        /* pushed last to first: taken first to last */
        const bool all = I->kind[n] == NK_LMERGE || I->kind[n] == NK_LSWITCH || I->kind[n] == NK_EXIT;
        for (uint32_t j = nd->n_in; j-- > 0;)
            if (all || !skip_input(nd, j))
                walk_push(I, nd->in[j].node);
        if (I->kind[n] == NK_CMERGE)
            walk_push(I, I->ncond[n]->pred.node);
        frame *f = all ? I->nframe[n] : NULL;
        if (f && !f->needed) {
            f->needed = true;
            walk_push(I, f->loopcond);
            for (uint32_t j = f->n_merges; j-- > 0;) {
                const imp_tf_node *m = &I->g->nodes[f->merges[j]];
                walk_push(I, m->in[1].node);
                walk_push(I, m->in[0].node);
                walk_push(I, (int32_t)f->merges[j]);
            }
        }
    }
}

static cc_irval emit(imp_tf_inst *I, imp_tf_ref r, uint32_t user);
static void convert_chain(imp_tf_inst *I, uint32_t n);
static cc_blk *block_of(imp_tf_inst *I, sc *s);

/* Emits every value from outside scope `unit` that a needed node inside it
 * reads, so that the While or If made next comes after all of them in its
 * block (the IR's blocks list nodes in dataflow order). */
static void pre_emit(imp_tf_inst *I, const sc *u1, const sc *u2)
{
    const imp_tf_graph *g = I->g;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        if (!I->needed[i])
            continue;
        sc *s = I->scope[i];
        bool in1 = within(s, u1) || (I->sw1[i] && within(I->sw1[i], u1));
        bool in2 = u2 && (within(s, u2) || (I->sw1[i] && within(I->sw1[i], u2)));
        if (!in1 && !in2)
            continue;
        const imp_tf_node *nd = &g->nodes[i];
        for (uint32_t j = 0; j < nd->n_in; j++) {
            if (skip_input(nd, j))
                continue;
            sc *t = ref_scope(I, nd->in[j]);
            if (!within(t, u1) && !(u2 && within(t, u2)))
                emit(I, nd->in[j], i);
        }
    }
}

static cc_vtype attr_vtype(const imp_tf_node *n, uint32_t k, tfvm_dtype fallback)
{
    tfvm_dtype d = imp_tf_out_dtype(n->def, k);
    return cc_tensor_t(d ? d : fallback, -1);
}

static void ensure_frame(imp_tf_inst *I, frame *f, uint32_t at)
{
    if (f->w)
        return;
    if (f->creating)
        emit_fail(I, at, "frame '%s' depends on its own results", f->name);
    f->creating = true;
    cc *C = I->T->C;
    const imp_tf_graph *g = I->g;
    cc_blk *P = block_of(I, f->head.parent);
    pre_emit(I, &f->head, NULL);
    uint32_t nv = f->n_merges;
    cc_irval *init = cc_array(C, nv + 1, sizeof *init);
    cc_vtype *types = cc_array(C, nv + 1, sizeof *types);
    const char **names = cc_array(C, nv + 1, sizeof *names);
    for (uint32_t k = 0; k < nv; k++) {
        const imp_tf_node *m = &g->nodes[f->merges[k]];
        uint32_t e = I->kind[m->in[0].node] == NK_ENTER ? 0 : 1;
        init[k] = emit(I, m->in[e], f->merges[k]);
        types[k] = init[k].n->types[init[k].k];
        char *nm = cc_alloc(C, 16);
        snprintf(nm, 16, "v%u", k);
        names[k] = nm;
    }
    cc_node *w = cc_while_new(C, P, nv, init, types, names, NULL);
    if (f->parallel > 0)
        w->u.loop.parallel = (uint32_t)(f->parallel > ISA_MAX_PARALLEL ? ISA_MAX_PARALLEL : f->parallel);
    f->w = w;
    const imp_tf_node *lc = &g->nodes[f->loopcond];
    if (!within(&f->head, ref_scope(I, lc->in[0])))
        emit_fail(I, (uint32_t)f->loopcond, "its condition is computed outside the loop's head");
    cc_irval cond = emit(I, lc->in[0], (uint32_t)f->loopcond);
    cc_block_results(C, w->u.loop.head, 1, &cond);
    cc_irval *next = cc_array(C, nv + 1, sizeof *next);
    for (uint32_t k = 0; k < nv; k++) {
        const imp_tf_node *m = &g->nodes[f->merges[k]];
        uint32_t e = I->kind[m->in[0].node] == NK_ENTER ? 0 : 1;
        imp_tf_ref ni = m->in[1 - e];
        const imp_tf_node *nn = &g->nodes[ni.node];
        if (!within(&f->body, ref_scope(I, nn->in[0])))
            emit_fail(I, (uint32_t)ni.node, "takes a value from outside its loop's body");
        next[k] = emit(I, nn->in[0], (uint32_t)ni.node);
    }
    cc_block_results(C, w->u.loop.body, nv, next);
    f->creating = false;
}

static void ensure_cond(imp_tf_inst *I, cnd *c, uint32_t at)
{
    if (c->ifn)
        return;
    if (c->creating)
        emit_fail(I, at, "a cond depends on its own results");
    c->creating = true;
    cc *C = I->T->C;
    const imp_tf_graph *g = I->g;
    cc_blk *P = block_of(I, c->br[0].parent);
    pre_emit(I, &c->br[0], &c->br[1]);
    uint32_t n = 0;
    uint32_t *outs = cc_array(C, c->n_merges + 1, sizeof *outs);
    for (uint32_t j = 0; j < c->n_merges; j++) {
        uint32_t m = c->merges[j];
        if (!I->needed[m])
            continue;
        for (uint32_t k = 0; k < 2; k++) {
            imp_tf_ref r = g->nodes[m].in[k];
            sc *t = ref_scope(I, r);
            if (!within(t, &c->br[0]) && !within(t, &c->br[1]))
                emit(I, r, m);
        }
        I->var[m] = n;
        outs[n++] = m;
    }
    cc_irval pred = emit(I, c->pred, c->n_sw ? c->sw[0] : at);
    if (pred.n->types[pred.k].dtype != TFVM_BOOL)
        emit_fail(I, c->n_sw ? c->sw[0] : at, "the predicate is not bool");
    cc_vtype *types = cc_array(C, n + 1, sizeof *types);
    for (uint32_t j = 0; j < n; j++)
        types[j] = attr_vtype(&g->nodes[outs[j]], 0, TFVM_F32);
    cc_node *x = cc_if_new(C, P, pred, n, types, NULL);
    c->ifn = x;
    cc_irval *tv = cc_array(C, n + 1, sizeof *tv), *ev = cc_array(C, n + 1, sizeof *ev);
    for (uint32_t j = 0; j < n; j++) {
        const imp_tf_node *m = &g->nodes[outs[j]];
        tv[j] = emit(I, m->in[I->mtrue[outs[j]]], outs[j]);
        ev[j] = emit(I, m->in[1 - I->mtrue[outs[j]]], outs[j]);
    }
    cc_block_results(C, x->u.cond.then, n, tv);
    cc_block_results(C, x->u.cond.els, n, ev);
    c->creating = false;
}

static cc_blk *block_of(imp_tf_inst *I, sc *s)
{
    switch (s->kind) {
    case SC_HEAD: ensure_frame(I, s->f, s->f->merges[0]); return s->f->w->u.loop.head;
    case SC_BODY: ensure_frame(I, s->f, s->f->merges[0]); return s->f->w->u.loop.body;
    case SC_BRANCH:
        ensure_cond(I, s->c, s->c->n_sw ? s->c->sw[0] : 0);
        return s->branch ? s->c->ifn->u.cond.then : s->c->ifn->u.cond.els;
    default: return I->top;
    }
}

static cc_irval emit(imp_tf_inst *I, imp_tf_ref r, uint32_t user)
{
    if (r.node < 0)
        return I->args[-1 - r.node];
    uint32_t n = (uint32_t)r.node;
    const imp_tf_node *nd = &I->g->nodes[n];
    if (I->vals[n]) {
        if (!I->vals[n][r.k].n)
            emit_fail(I, user, "reads output %u of '%s' (%s), which has no value here", r.k, nd->name, nd->op);
        return I->vals[n][r.k];
    }
    cc *C = I->T->C;
    switch (I->kind[n]) {
    case NK_ENTER:
    case NK_LOOPCOND: return emit(I, nd->in[0], n);
    case NK_NEXT: emit_fail(I, user, "reads NextIteration '%s'", nd->name);
    case NK_LMERGE:
        if (r.k != 0)
            emit_fail(I, user, "reads the value_index of loop Merge '%s'", nd->name);
        ensure_frame(I, I->nframe[n], n);
        return cc_lvar(I->nframe[n]->w, I->var[n]);
    case NK_LSWITCH:
        if (r.k != 1)
            emit_fail(I, user, "reads the exit side of loop Switch '%s' (only an Exit may)", nd->name);
        ensure_frame(I, I->nframe[n], n);
        return cc_lvar(I->nframe[n]->w, I->var[nd->in[0].node]);
    case NK_EXIT: {
        ensure_frame(I, I->nframe[n], n);
        uint32_t sw = (uint32_t)nd->in[0].node;
        return cc_out(I->nframe[n]->w, I->var[I->g->nodes[sw].in[0].node]);
    }
    case NK_CSWITCH: return emit(I, nd->in[0], n);
    case NK_CMERGE: {
        cnd *c = I->ncond[n];
        ensure_cond(I, c, n);
        if (r.k == 0)
            return cc_out(c->ifn, I->var[n]);
        /* value_index: which input arrived */
        cc_blk *b = block_of(I, I->scope[n]);
        cc_irval sel[3] = {emit(I, c->pred, n), cc_const_scalar(C, b, TFVM_I32, 0, I->mtrue[n]),
                           cc_const_scalar(C, b, TFVM_I32, 0, 1 - I->mtrue[n])};
        return cc_op_new(C, b, ISA_SELECT, 0, 3, sel, cc_scalar_t(TFVM_I32), NULL);
    }
    default: break;
    }
    if (!I->vals[n])
        convert_chain(I, n);
    if (r.k >= nd->n_out || !I->vals[n][r.k].n)
        emit_fail(I, user, "reads output %u of '%s' (%s), which has no value here", r.k, nd->name, nd->op);
    return I->vals[n][r.k];
}

/* Converts plain node n (its inputs are converted or cheap to reach). */
static void convert_node(imp_tf_inst *I, uint32_t n)
{
    cc *C = I->T->C;
    const imp_tf_node *nd = &I->g->nodes[n];
    if (!I->needed[n])
        need(I, (imp_tf_ref){(int32_t)n, 0}); /* a value reached through an op converter only */
    cc_blk *b = block_of(I, I->scope[n]);
    imp_tf_opctx X = {.T = I->T, .C = C, .I = I, .n = nd, .b = b};
    X.in = cc_array(C, nd->n_in + 1, sizeof *X.in);
    X.out = cc_array(C, nd->n_out + 1, sizeof *X.out);
    for (uint32_t j = 0; j < nd->n_in; j++)
        if (!skip_input(nd, j))
            X.in[j] = emit(I, nd->in[j], n);
    uint32_t first_id = C->next_node_id;
    const cc_origin *outer = C->origin; /* the instructions' origin: this node */
    cc_set_origin(C, nd->name, nd->op);
    imp_tf_convert(&X);
    C->origin = outer;
    /* the node's name on the instructions it made (the lowering makes names
     * unique and identifier-like): errors and `tfvm dis` then speak TF */
    for (uint32_t k = 0; k < nd->n_out; k++) {
        cc_node *o = X.out[k].n;
        if (o && o->id >= first_id && o->kind == CC_N_OP && !o->names[X.out[k].k]) {
            char *nm = cc_alloc(C, strlen(nd->name) + 16);
            if (k)
                sprintf(nm, "%s:%u", nd->name, k);
            else
                strcpy(nm, nd->name);
            o->names[X.out[k].k] = nm;
        }
    }
    for (uint32_t k = 0; k < nd->n_out; k++)
        if (X.out[k].n && !isa_dtype_valid(X.out[k].n->types[X.out[k].k].dtype) &&
            X.out[k].n->types[X.out[k].k].dtype != TFVM_U8 && X.out[k].n->types[X.out[k].k].dtype != TFVM_I8)
            emit_fail(I, n, "output %u has an unsupported dtype", k);
    for (uint32_t k = 0; k < nd->n_out; k++) { /* the tensors' names, for the debugger */
        char *nm = cc_alloc(C, strlen(nd->name) + 16);
        sprintf(nm, k ? "%s:%u" : "%s", nd->name, k);
        cc_add_var(C, X.out[k], nm);
    }
    I->vals[n] = X.out;
}

/* The plain node an input reads, through Enters, LoopConds and cond
 * Switches (which pass their input on), or -1. */
static int32_t plain_source(const imp_tf_inst *I, imp_tf_ref r)
{
    for (uint32_t steps = 0; r.node >= 0 && steps <= I->g->n_nodes; steps++) {
        const uint8_t k = I->kind[r.node];
        if (k == NK_PLAIN)
            return r.node;
        if ((k != NK_ENTER && k != NK_LOOPCOND && k != NK_CSWITCH) || !I->g->nodes[r.node].n_in)
            return -1;
        r = I->g->nodes[r.node].in[0];
    }
    return -1;
}

/* Converts plain node n after the plain nodes it reads that are not yet
 * converted, deepest first, as emit's recursion would, but with the walk
 * stack: emit then finds each input converted. */
static void convert_chain(imp_tf_inst *I, uint32_t n)
{
    const uint32_t base = I->wn;
    I->walking[n] = 1;
    walk_push(I, (int32_t)n);
    while (I->wn > base) {
        const uint32_t m = (uint32_t)I->ws[I->wn - 1].node;
        const imp_tf_node *nd = &I->g->nodes[m];
        bool pushed = false;
        while (!pushed && I->ws[I->wn - 1].k < nd->n_in) {
            const uint32_t j = I->ws[I->wn - 1].k++;
            const int32_t p = skip_input(nd, j) ? -1 : plain_source(I, nd->in[j]);
            if (p >= 0 && !I->vals[p] && !I->walking[p]) {
                I->walking[p] = 1;
                walk_push(I, p);
                pushed = true;
            }
        }
        if (pushed)
            continue;
        I->wn--;
        if (!I->vals[m])
            convert_node(I, m);
        I->walking[m] = 0;
    }
}

static imp_tf_inst *inst_new(imp_tf_st *T, const imp_tf_graph *g, cc_blk *top, const cc_irval *args)
{
    cc *C = T->C;
    uint32_t n = g->n_nodes + 1;
    imp_tf_inst *I = cc_alloc(C, sizeof *I);
    I->T = T;
    I->g = g;
    I->top = top;
    I->args = args;
    I->root.kind = SC_ROOT;
    I->state = cc_array(C, n, 1);
    I->kind = cc_array(C, n, 1);
    I->mtrue = cc_array(C, n, 1);
    I->scope = cc_array(C, n, sizeof *I->scope);
    I->sw1 = cc_array(C, n, sizeof *I->sw1);
    I->nframe = cc_array(C, n, sizeof *I->nframe);
    I->ncond = cc_array(C, n, sizeof *I->ncond);
    I->var = cc_array(C, n, sizeof *I->var);
    I->needed = cc_array(C, n, sizeof *I->needed);
    I->vals = cc_array(C, n, sizeof *I->vals);
    I->walking = cc_array(C, n, 1);
    classify(I);
    return I;
}

/* Emits the values of `refs` at the instance's top scope. */
static void inst_results(imp_tf_inst *I, uint32_t n, const imp_tf_ref *refs, const char *const *names, cc_irval *out)
{
    I->n_fetch = n;
    I->fetch = refs;
    for (uint32_t k = 0; k < n; k++)
        need(I, refs[k]);
    for (uint32_t k = 0; k < n; k++) {
        if (ref_scope(I, refs[k]) != &I->root)
            fail_at(I->T->C, I->g, "output '%s' is computed inside a while loop or a cond branch", names[k]);
        out[k] = emit(I, refs[k], refs[k].node < 0 ? 0 : (uint32_t)refs[k].node);
    }
}

/* ---- Functions ------------------------------------------------------------------------ */

cc_ifn *imp_tf_function(imp_tf_st *T, const char *name, const imp_tf_node *caller)
{
    int32_t f = func_find(T, name);
    if (f < 0)
        imp_tf_error(T->C, TFVM_ERR_UNSUPPORTED, "node '%s' (%s): function '%s' is not in the library",
                 caller->name, caller->op, name);
    if (T->ifns[f])
        return T->ifns[f];
    cc *C = T->C;
    imp_tf_graph *g = func_graph(T, f);
    cc_vtype *pt = cc_array(C, g->n_args + 1, sizeof *pt), *rt = cc_array(C, g->n_rets + 1, sizeof *rt);
    for (uint32_t k = 0; k < g->n_args; k++)
        pt[k] = cc_tensor_t(g->arg_types[k], -1);
    for (uint32_t k = 0; k < g->n_rets; k++)
        rt[k] = cc_tensor_t(g->ret_types[k], -1);
    /* a function's name is a tfvm identifier: TF2 names such as
     * __inference_<lambda>_12 get '_' for the other characters */
    char *id = cc_strndup(C, name, strlen(name));
    for (char *c = id; *c; c++)
        if (!(*c == '_' || (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
            *c = '_';
    cc_ifn *fn = cc_func_new(C, id, g->n_args, g->arg_names, pt, g->n_rets, g->ret_names, rt);
    T->ifns[f] = fn;
    cc_irval *args = cc_array(C, g->n_args + 1, sizeof *args);
    for (uint32_t k = 0; k < g->n_args; k++) {
        args[k] = cc_param_val(fn, k);
        cc_add_var(C, args[k], g->arg_names[k]); /* for the debugger */
    }
    imp_tf_inst *I = inst_new(T, g, cc_fn_top(fn), args);
    cc_irval *res = cc_array(C, g->n_rets + 1, sizeof *res);
    inst_results(I, g->n_rets, g->rets, g->ret_names, res);
    cc_block_results(C, cc_fn_top(fn), g->n_rets, res);
    return fn;
}

void imp_tf_inline(imp_tf_opctx *X, const char *name, cc_blk *b, const cc_irval *args, uint32_t n_args,
                   cc_irval *outs, uint32_t n_out)
{
    imp_tf_st *T = X->T;
    int32_t f = func_find(T, name);
    if (f < 0)
        imp_tf_fail(X, "function '%s' is not in the library", name);
    imp_tf_graph *g = func_graph(T, f);
    if (g->n_args != n_args || g->n_rets != n_out)
        imp_tf_fail(X, "function '%s' takes %u arguments and gives %u results, not %u and %u", name, g->n_args,
                    g->n_rets, n_args, n_out);
    if (T->inline_depth >= MAX_INLINE)
        imp_tf_fail(X, "function '%s' inlines itself %d deep (recursion must go through a call)", name, MAX_INLINE);
    if (++T->n_inlined > MAX_INLINED)
        imp_tf_fail(X, "more than %d While/If bodies to inline", MAX_INLINED);
    T->inline_depth++;
    imp_tf_inst *I = inst_new(T, g, b, args);
    inst_results(I, g->n_rets, g->rets, g->ret_names, outs);
    T->inline_depth--;
}

/* ---- The main graph -------------------------------------------------------------------- */

typedef struct fetch {
    imp_tf_ref ref;
    const char *name;
} fetch;

/* One fetch "node" or "node:k" (len bytes of s), named `name`. */
static fetch fetch_one(cc *C, const imp_tf_graph *g, const nmap *m, const char *s, size_t len, const char *name)
{
    const char *colon = memchr(s, ':', len);
    size_t nl = colon ? (size_t)(colon - s) : len;
    uint32_t k = 0;
    int32_t i = nmap_find(m, s, nl);
    if (i < 0 || (colon && !parse_uint(colon + 1, len - nl - 1, &k)))
        imp_tf_error(C, TFVM_ERR_ARGUMENT, "output '%.*s' names no node", (int)len, s);
    if (k >= g->nodes[i].n_out)
        imp_tf_error(C, TFVM_ERR_ARGUMENT, "output '%.*s': node '%s' has %u outputs", (int)len, s,
                     g->nodes[i].name, g->nodes[i].n_out);
    return (fetch){(imp_tf_ref){i, k}, name ? name : cc_strndup(C, s, len)};
}

static uint32_t parse_outputs(imp_tf_st *T, imp_tf_inst *I, fetch **out)
{
    const imp_tf_graph *g = I->g;
    cc *C = T->C;
    uint32_t n = 0, cap = 0;
    fetch *f = NULL;
    nmap m;
    nmap_init(C, &m, g->nodes, g->n_nodes);
    if (T->sig) {
        for (uint32_t k = 0; k < T->sig->n_out; k++) {
            f = cc_grow(C, f, n, &cap, sizeof *f);
            const char *t = T->sig->out_tensors[k];
            f[n++] = fetch_one(C, g, &m, t, strlen(t), T->sig->out_names[k]);
        }
    } else if (T->outputs && T->outputs[0]) {
        const char *s = T->outputs;
        while (*s) {
            const char *e = strchr(s, ',');
            size_t len = e ? (size_t)(e - s) : strlen(s);
            while (len && s[0] == ' ')
                s++, len--;
            while (len && s[len - 1] == ' ')
                len--;
            f = cc_grow(C, f, n, &cap, sizeof *f);
            f[n++] = fetch_one(C, g, &m, s, len, NULL);
            s = e ? e + 1 : s + len;
        }
    } else {
        bool *used = cc_array(C, g->n_nodes + 1, sizeof *used);
        for (uint32_t i = 0; i < g->n_nodes; i++) {
            for (uint32_t j = 0; j < g->nodes[i].n_in; j++)
                if (g->nodes[i].in[j].node >= 0)
                    used[g->nodes[i].in[j].node] = true;
            for (uint32_t j = 0; j < g->nodes[i].n_ctl; j++)
                used[g->nodes[i].ctl[j]] = true;
        }
        for (uint32_t i = 0; i < g->n_nodes; i++) {
            /* values inside a loop or a branch are not results; nor are
             * Placeholders no one reads (TF2 freezes leave many) */
            if (used[i] || ref_scope(I, (imp_tf_ref){(int32_t)i, 0}) != &I->root ||
                is_op(&g->nodes[i], "Placeholder"))
                continue;
            for (uint32_t k = 0; k < g->nodes[i].n_out; k++) {
                f = cc_grow(C, f, n, &cap, sizeof *f);
                f[n].ref = (imp_tf_ref){(int32_t)i, k};
                char *nm = cc_alloc(C, strlen(g->nodes[i].name) + 16);
                if (k)
                    sprintf(nm, "%s:%u", g->nodes[i].name, k);
                else
                    strcpy(nm, g->nodes[i].name);
                f[n++].name = nm;
            }
        }
    }
    if (!n)
        imp_tf_error(C, TFVM_ERR_ARGUMENT, "the graph has no outputs");
    *out = f;
    return n;
}

/* The entry parameter a Placeholder becomes: its dtype, and its declared
 * shape (-1 = any size) as the parameter's signature. */
static cc_vtype placeholder_type(const imp_tf_node *n, tfvm_dtype d)
{
    const tf_attr *sa = imp_tf_attr(n->def, "shape");
    bool known = sa && sa->value_case == TFVM_TF__ATTR_VALUE__VALUE_SHAPE && !sa->shape->unknown_rank;
    if (known && sa->shape->n_dim == 0)
        return cc_scalar_t(d);
    cc_vtype t = cc_tensor_t(d, -1);
    if (known && sa->shape->n_dim <= TFVM_MAX_RANK) {
        t.rank = (uint8_t)sa->shape->n_dim;
        for (size_t k = 0; k < sa->shape->n_dim; k++)
            t.dims[k] = sa->shape->dim[k]->size < 0 ? -1 : sa->shape->dim[k]->size;
    }
    return t;
}

/* The signature input (a SavedModel's) that feeds Placeholder n, or -1. */
static int32_t sig_feed(const imp_tf_sig *sig, const char *node)
{
    size_t nl = strlen(node);
    for (uint32_t k = 0; sig && k < sig->n_in; k++) {
        const char *t = sig->in_tensors[k];
        if (strncmp(t, node, nl) == 0 && (t[nl] == 0 || strcmp(t + nl, ":0") == 0))
            return (int32_t)k;
    }
    return -1;
}

/* Notes the Placeholders left out (the first few by name) for the log. */
static void note_dropped(imp_tf_st *T, const imp_tf_graph *g, const int32_t *dropped, uint32_t n)
{
    if (!n)
        return;
    size_t at = (size_t)snprintf(T->note, sizeof T->note,
                                 "note: %u Placeholder%s that no result depends on %s not parameters:", n,
                                 n == 1 ? "" : "s", n == 1 ? "is" : "are");
    for (uint32_t k = 0; k < n && k < 4 && at < sizeof T->note; k++)
        at += (size_t)snprintf(T->note + at, sizeof T->note - at, "%s '%s'", k ? "," : "", g->nodes[dropped[k]].name);
    if (n > 4 && at < sizeof T->note)
        snprintf(T->note + at, sizeof T->note - at, ", ...");
    imp_one_line(T->note);
}

static cc_ifn *build(cc *C, void *ud)
{
    imp_tf_st *T = ud;
    T->C = C;
    const TfvmTf__GraphDef *gd = T->gd;
    if (gd->library) {
        T->n_funcs = (uint32_t)gd->library->n_function;
        T->funcs = gd->library->function;
        for (uint32_t i = 0; i < T->n_funcs; i++)
            if (!T->funcs[i]->signature || !T->funcs[i]->signature->name)
                imp_tf_error(C, TFVM_ERR_FORMAT, "library function %u has no signature", i);
    }
    T->ifns = cc_array(C, T->n_funcs + 1, sizeof *T->ifns);
    T->graphs = cc_array(C, T->n_funcs + 1, sizeof *T->graphs);
    imp_tf_graph *g = graph_new(T, "graph", gd->node, gd->n_node, false, NULL);
    imp_tf_inst *I = inst_new(T, g, NULL, NULL);
    fetch *fs;
    uint32_t nr = parse_outputs(T, I, &fs);
    /* what the results need (whole loops included): TensorFlow's Session
     * ignores feeds outside it, and so do we */
    for (uint32_t k = 0; k < nr; k++)
        need(I, fs[k].ref);
    const bool *dep = I->needed;
    /* Placeholders: the entry's parameters, in the file's order (a
     * signature's: in its order); those no result depends on are left out */
    uint32_t np = T->sig ? T->sig->n_in : 0, n_dropped = 0;
    int32_t *pidx = cc_array(C, g->n_nodes + 1, sizeof *pidx), *dropped = cc_array(C, g->n_nodes + 1, sizeof *dropped);
    const char **pn = cc_array(C, g->n_nodes + np + 1, sizeof *pn);
    cc_vtype *pt = cc_array(C, g->n_nodes + np + 1, sizeof *pt);
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const imp_tf_node *n = &g->nodes[i];
        pidx[i] = -1;
        if (!is_op(n, "Placeholder"))
            continue;
        const tf_attr *da = imp_tf_attr(n->def, "dtype");
        tfvm_dtype d = da ? imp_tf_dtype(da->type) : 0;
        int32_t s = sig_feed(T->sig, n->name);
        if (!dep[i]) {
            if (d && !T->sig) /* a variant or string nothing reads goes unmentioned */
                dropped[n_dropped++] = (int32_t)i;
            if (s < 0)
                continue;
        }
        if (!d)
            imp_tf_error(C, TFVM_ERR_UNSUPPORTED, "Placeholder '%s' has an unsupported dtype", n->name);
        if (T->sig && s < 0)
            imp_tf_error(C, TFVM_ERR_UNSUPPORTED, "Placeholder '%s' is not an input of the signature", n->name);
        pidx[i] = T->sig ? s : (int32_t)np++;
        pt[pidx[i]] = placeholder_type(n, d);
        pn[pidx[i]] = T->sig ? T->sig->in_names[s] : n->name;
    }
    for (uint32_t k = 0; T->sig && k < np; k++)
        if (!pn[k])
            imp_tf_error(C, TFVM_ERR_FORMAT, "signature input '%s': '%s' names no Placeholder", T->sig->in_names[k],
                         T->sig->in_tensors[k]);
    note_dropped(T, g, dropped, n_dropped);
    const char **rn = cc_array(C, nr + 1, sizeof *rn);
    cc_vtype *rt = cc_array(C, nr + 1, sizeof *rt);
    imp_tf_ref *refs = cc_array(C, nr + 1, sizeof *refs);
    for (uint32_t k = 0; k < nr; k++) {
        rn[k] = fs[k].name;
        refs[k] = fs[k].ref;
        tfvm_dtype d = imp_tf_out_dtype(g->nodes[refs[k].node].def, refs[k].k);
        rt[k] = cc_tensor_t(d ? d : TFVM_F32, -1);
    }
    cc_ifn *fn = cc_func_new(C, "main", np, pn, pt, nr, rn, rt);
    cc_irval *args = cc_array(C, np + 1, sizeof *args);
    for (uint32_t k = 0; k < np; k++) {
        args[k] = cc_param_val(fn, k);
        cc_add_var(C, args[k], pn[k]); /* for the debugger */
    }
    I->top = cc_fn_top(fn);
    I->args = args;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (pidx[i] >= 0) {
            I->vals[i] = cc_array(C, 1, sizeof(cc_irval));
            I->vals[i][0] = args[pidx[i]];
        }
    cc_irval *res = cc_array(C, nr + 1, sizeof *res);
    inst_results(I, nr, refs, rn, res);
    /* the results' dtypes: the ones the graph computes, not the guess above
     * (checked on every run, vm/signature.c); their shapes stay unknown, as
     * the importer's shape facts are not exact enough to promise */
    for (uint32_t k = 0; k < nr; k++)
        if (res[k].n && res[k].n->types)
            fn->src->results[k].type = cc_tensor_t(res[k].n->types[res[k].k].dtype, -1);
    cc_block_results(C, cc_fn_top(fn), nr, res);
    return fn;
}

tfvm_status imp_tf_graph_def(const TfvmTf__GraphDef *gd, const char *name, const char *outputs, const imp_tf_sig *sig,
                             int opt_level, const tfvm_config *cfg, const tfvm_allocator *a, isa_program *out,
                             tfvm_error *err)
{
    imp_tf_st T = {.gd = gd, .outputs = outputs, .sig = sig};
    tfvm_status st = cc_build_program(name, a, opt_level, build, &T, out, err);
    if (st == TFVM_OK && T.note[0] && cfg && cfg->log) {
        char line[512];
        snprintf(line, sizeof line, "%s: %s", name, T.note);
        cfg->log(cfg->log_ud, TFVM_LOG_WARN, line);
    }
    return st;
}

tfvm_status imp_tf_logged(const void *data, size_t len, const char *name, const char *outputs, int opt_level,
                          const tfvm_config *cfg, const tfvm_allocator *a, isa_program *out, tfvm_error *err)
{
    imp_pb pb;
    imp_pb_init(&pb, a);
    size_t at;
    if (!imp_pb_depth_ok(&tfvm_tf__graph_def__descriptor, data, len, &at)) {
        isa_program_init(out, a);
        return ut_err(err, TFVM_ERR_FORMAT, "%s: bad GraphDef (messages nested deeper than %d at byte %zu)", name,
                      IMP_PB_MAX_DEPTH, at);
    }
    TfvmTf__GraphDef *gd = tfvm_tf__graph_def__unpack(&pb.pa, len, data);
    if (!gd) {
        isa_program_init(out, a);
        if (pb.failed)
            return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory reading the GraphDef", name);
        if (imp_tf_is_saved_model(data, len))
            return ut_err(err, TFVM_ERR_FORMAT,
                          "%s: a SavedModel's saved_model.pb, not a GraphDef: give its directory (tfvm run DIR), "
                          "which holds the variables too",
                          name);
        return ut_err(err, TFVM_ERR_FORMAT, "%s: not a binary GraphDef (protobuf parse failed)", name);
    }
    tfvm_status st = imp_tf_graph_def(gd, name, outputs, NULL, opt_level, cfg, a, out, err);
    tfvm_tf__graph_def__free_unpacked(gd, &pb.pa);
    return st;
}

tfvm_status imp_tf(const void *data, size_t len, const char *name, const char *outputs, int opt_level,
                   const tfvm_allocator *a, isa_program *out, tfvm_error *err)
{
    return imp_tf_logged(data, len, name, outputs, opt_level, NULL, a, out, err);
}
