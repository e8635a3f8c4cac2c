/* import/onnx_flow.c — If, Loop and Scan as the IR's If and While, so they
 * lower to SWITCH/MERGE and ENTER/NEXTITER/EXIT in the one static graph
 * (never a host loop). Subgraph bodies are built into the loop's or
 * branch's block and may read any value of an enclosing graph. */
#include <stdio.h>
#include <string.h>

#include "import/onnx_int.h"

static const Onnx__GraphProto *graph_attr(ox_node *N, const char *name)
{
    const Onnx__AttributeProto *a = ox_attr(N, name);
    if (!a || !a->g)
        ox_fail(N, TFVM_ERR_FORMAT, "no '%s' graph", name);
    return a->g;
}

/* a bool or i64 scalar from a one-element tensor (ONNX's conditions and
 * trip counts are often [1]) */
static ox_val scalar_of(ox_node *N, const ox_val *v)
{
    if (v->rank == 0)
        return *v;
    ox_val e = ox_i64s(N, 0, NULL);
    return ox_op2(N, ISA_RESHAPE, 0, v, &e);
}

static bool count_of1(const ox_val *v)
{
    if (v->rank < 0)
        return false;
    for (int k = 0; k < v->rank; k++)
        if (v->dims[k] != 1)
            return false;
    return true;
}

static ox_val plain(cc_irval v, uint8_t dtype, int rank)
{
    ox_val r = {0};
    r.v = v;
    r.dtype = dtype;
    r.rank = (int8_t)rank;
    for (int k = 0; k < TFVM_MAX_RANK; k++)
        r.dims[k] = -1;
    return r;
}

/* binds a subgraph input name to a value */
static void bind_input(ox_node *N, const Onnx__GraphProto *g, size_t k, const ox_val *v)
{
    const Onnx__ValueInfoProto *vi = g->input[k];
    if (!vi || !vi->name || !vi->name[0])
        ox_fail(N, TFVM_ERR_FORMAT, "subgraph input %zu has no name", k);
    ox_bind(N->X, vi->name, ox_new_val(N->C, v));
}

/* a scan output's dtype when the body declares it (else a guess that
 * stack_init corrects once the body is built) */
static uint8_t output_dtype(const Onnx__GraphProto *g, size_t k)
{
    ox_val v;
    return ox_value_info(NULL, g->output[k], &v) ? v.dtype : TFVM_F32;
}


/* The empty stack a scan output starts from, of the dtype the body gave it
 * (known only once the body is built): a constant moved before the loop. */
static void stack_init(ox_node *N, cc_blk *outer, cc_node *w, uint32_t var, uint8_t dtype)
{
    int64_t zero = 0;
    cc_irval c = cc_const_new(N->C, outer, (tfvm_dtype)dtype, 1, &zero, &zero, 0, false);
    cc_node *n = c.n;
    cc_node_unlink(n);
    n->prev = w->prev;
    n->next = w;
    if (w->prev)
        w->prev->next = n;
    else
        outer->first = n;
    w->prev = n;
    w->in[var] = c;
    cc_vtype t = cc_tensor_t((tfvm_dtype)dtype, -1);
    w->types[var] = t;
    w->u.loop.lvars[var]->types[0] = t;
}

void ox_op_if(ox_node *N)
{
    ox *X = N->X;
    const Onnx__GraphProto *tg = graph_attr(N, "then_branch"), *eg = graph_attr(N, "else_branch");
    uint32_t n = N->n_out;
    if (tg->n_output != n || eg->n_output != n)
        ox_fail(N, TFVM_ERR_FORMAT, "branches give %zu and %zu outputs for %u", tg->n_output, eg->n_output, n);
    if (tg->n_input || eg->n_input)
        ox_fail(N, TFVM_ERR_FORMAT, "a branch graph has inputs");
    ox_val c = scalar_of(N, N->in[0] ? N->in[0] : (ox_fail(N, TFVM_ERR_FORMAT, "no condition"), NULL));
    cc_vtype *types = cc_array(N->C, n + 1, sizeof *types);
    for (uint32_t k = 0; k < n; k++)
        types[k] = cc_tensor_t(TFVM_F32, -1);
    cc_node *node = cc_if_new(N->C, N->b, c.v, n, types, NULL);
    ox_val **to = cc_array(N->C, n + 1, sizeof *to), **eo = cc_array(N->C, n + 1, sizeof *eo);
    ox_ent *mark = X->top;
    ox_graph_nodes(X, tg, node->u.cond.then, to);
    ox_scope_pop(X, mark);
    ox_graph_nodes(X, eg, node->u.cond.els, eo);
    ox_scope_pop(X, mark);
    cc_irval *tr = cc_array(N->C, n + 1, sizeof *tr), *er = cc_array(N->C, n + 1, sizeof *er);
    for (uint32_t k = 0; k < n; k++) {
        tr[k] = to[k]->v;
        er[k] = eo[k]->v;
        int rank = to[k]->rank == eo[k]->rank ? to[k]->rank : -1;
        N->out[k] = plain(cc_out(node, k), to[k]->dtype, rank);
        if (rank > 0)
            for (int d = 0; d < rank; d++)
                N->out[k].dims[d] = to[k]->dims[d] == eo[k]->dims[d] ? to[k]->dims[d] : -1;
        node->types[k] = ox_vtype(&N->out[k]);
    }
    cc_block_results(N->C, node->u.cond.then, n, tr);
    cc_block_results(N->C, node->u.cond.els, n, er);
}

/* names of one loop's variables: unique in the program */
static const char **var_names(ox_node *N, uint32_t id, uint32_t n, uint32_t n_carried, const char *what)
{
    const char **names = cc_array(N->C, n + 1, sizeof *names);
    for (uint32_t k = 0; k < n; k++) {
        char buf[48];
        if (k == 0)
            snprintf(buf, sizeof buf, "%s%u_i", what, id);
        else if (k <= n_carried)
            snprintf(buf, sizeof buf, "%s%u_v%u", what, id, k - 1);
        else
            snprintf(buf, sizeof buf, "%s%u_scan%u", what, id, k - 1 - n_carried);
        names[k] = cc_strndup(N->C, buf, strlen(buf));
    }
    return names;
}

/* The ONNX Loop: variables (i, cond, v..., one stack per scan output); the
 * head tests (M absent or i < M) and cond; the body is the body graph with
 * iter_num = i and STACK_PUTs row i of each scan output. */
void ox_op_loop(ox_node *N)
{
    ox *X = N->X;
    cc *C = N->C;
    const Onnx__GraphProto *g = graph_attr(N, "body");
    if (N->n_in < 2)
        ox_fail(N, TFVM_ERR_FORMAT, "needs M and cond inputs (either may be empty)");
    uint32_t nv = N->n_in - 2;
    if (g->n_input != nv + 2 || g->n_output < nv + 1)
        ox_fail(N, TFVM_ERR_FORMAT, "body has %zu inputs and %zu outputs for %u loop-carried values", g->n_input,
                g->n_output, nv);
    uint32_t ns = (uint32_t)g->n_output - 1 - nv;
    if (N->n_out > nv + ns)
        ox_fail(N, TFVM_ERR_FORMAT, "%u outputs for %u values and %u scan outputs", N->n_out, nv, ns);
    uint32_t nvar = 2 + nv + ns;
    ox_val *init = cc_array(C, nvar, sizeof *init);
    init[0] = ox_scalar(N, TFVM_I64, 0, 0);
    init[1] = N->in[1] ? scalar_of(N, N->in[1]) : ox_scalar(N, TFVM_BOOL, 1, 1);
    for (uint32_t k = 0; k < nv; k++) {
        if (!N->in[2 + k])
            ox_fail(N, TFVM_ERR_FORMAT, "loop-carried value %u has no initial value", k);
        init[2 + k] = *N->in[2 + k];
    }
    for (uint32_t k = 0; k < ns; k++) {
        uint8_t d = output_dtype(g, 1 + nv + k);
        int64_t zero = 0;
        init[2 + nv + k] = plain(cc_const_new(C, N->b, (tfvm_dtype)d, 1, &zero, &zero, 0, false), d, 1);
    }
    ox_val M = {0};
    if (N->in[0])
        M = scalar_of(N, N->in[0]);
    cc_irval *iv = cc_array(C, nvar, sizeof *iv);
    cc_vtype *types = cc_array(C, nvar, sizeof *types);
    ox_val *lv = cc_array(C, nvar, sizeof *lv);
    for (uint32_t k = 0; k < nvar; k++) {
        iv[k] = init[k].v;
        lv[k] = plain(iv[k], init[k].dtype, init[k].rank);
        types[k] = ox_vtype(&lv[k]);
    }
    uint32_t id = X->n_loops++;
    char label[32];
    snprintf(label, sizeof label, "loop%u", id);
    cc_node *w = cc_while_new(C, N->b, nvar, iv, types, var_names(N, id, nvar, 1 + nv, "loop"), label);
    for (uint32_t k = 0; k < nvar; k++)
        lv[k].v = cc_lvar(w, k);

    cc_blk *outer = N->b;
    cc_blk *body = w->u.loop.body;
    N->b = body;
    ox_ent *mark = X->top;
    for (uint32_t k = 0; k < 2 + nv; k++)
        bind_input(N, g, k, &lv[k]);
    /* i + 1 first: the lowering routes i into the body for it, and the
     * body's own uses of iter_num then take that routed value instead of
     * routing another variable (one token less per iteration) */
    cc_irval *next = cc_array(C, nvar, sizeof *next);
    ox_val one = ox_scalar(N, TFVM_I64, 0, 1);
    next[0] = ox_op2(N, ISA_ADD, 0, &lv[0], &one).v;
    ox_val **out = cc_array(C, g->n_output + 1, sizeof *out);
    ox_graph_nodes(X, g, body, out);
    ox_scope_pop(X, mark);
    next[1] = scalar_of(N, out[0]).v;
    for (uint32_t k = 0; k < nv; k++)
        next[2 + k] = out[1 + k]->v;
    for (uint32_t k = 0; k < ns; k++) {
        const ox_val *v = out[1 + nv + k];
        if (v->dtype != init[2 + nv + k].dtype)
            stack_init(N, outer, w, 2 + nv + k, v->dtype);
        lv[2 + nv + k].dtype = v->dtype;
        ox_val put = ox_op3(N, ISA_STACK_PUT, 0, &lv[2 + nv + k], &lv[0], v);
        next[2 + nv + k] = put.v;
    }
    cc_block_results(C, body, nvar, next);

    /* the head, once the body is known: a condition that starts true and
     * that the body passes through unchanged (exporters' counted loops)
     * needs no test */
    N->b = w->u.loop.head;
    bool init_true = !N->in[1] || (N->in[1]->cdata && N->in[1]->dtype == TFVM_BOOL && count_of1(N->in[1]) &&
                                   *(const uint8_t *)N->in[1]->cdata);
    bool cond_fixed = init_true && out[0]->v.n == lv[1].v.n && out[0]->v.k == lv[1].v.k;
    ox_val c = lv[1];
    if (N->in[0]) {
        ox_val lt = ox_op2(N, ISA_LESS, 0, &lv[0], &M);
        c = cond_fixed ? lt : ox_op2(N, ISA_AND, 0, &lt, &c);
    }
    cc_block_results(C, w->u.loop.head, 1, &c.v);
    N->b = outer;
    for (uint32_t k = 0; k < N->n_out; k++) {
        uint32_t var = 2 + k;
        N->out[k] = plain(cc_out(w, var), lv[var].dtype, k < nv ? lv[var].rank : -1);
        if (k >= nv)
            N->out[k].rank = out[1 + k]->rank >= 0 ? (int8_t)(out[1 + k]->rank + 1) : -1;
    }
}

/* A scan over explicit inputs (states then scan inputs), results into out:
 * the body of Scan-9+ and of each batch element of Scan-8. */
typedef struct scan_spec {
    uint32_t nst, nsi, nso;
    ox_val *const *in;
    const int64_t *in_axes, *in_dirs, *out_axes, *out_dirs;
} scan_spec;

static void scan_core(ox_node *N, const Onnx__GraphProto *g, const scan_spec *S, ox_val *outv)
{
    ox *X = N->X;
    cc *C = N->C;
    uint32_t nst = S->nst, nsi = S->nsi, nso = S->nso;
    const int64_t *in_axes = S->in_axes, *in_dirs = S->in_dirs, *out_axes = S->out_axes, *out_dirs = S->out_dirs;
    /* the trip count */
    const ox_val *s0 = S->in[nst];
    int a0 = (int)in_axes[0];
    if (a0 < 0 && s0->rank >= 0)
        a0 += s0->rank;
    ox_val T;
    if (a0 >= 0 && s0->rank > a0 && s0->dims[a0] >= 0) {
        T = ox_scalar(N, TFVM_I64, 0, s0->dims[a0]);
    } else {
        ox_val sh = ox_op1(N, ISA_SHAPE, 0, s0);
        ox_val ai = ox_scalar(N, TFVM_I64, 0, in_axes[0]);
        T = ox_op2(N, ISA_GATHER, 0, &sh, &ai);
    }
    uint32_t nvar = 1 + nst + nso;
    ox_val *lv = cc_array(C, nvar, sizeof *lv);
    cc_irval *iv = cc_array(C, nvar, sizeof *iv);
    cc_vtype *types = cc_array(C, nvar, sizeof *types);
    lv[0] = ox_scalar(N, TFVM_I64, 0, 0);
    for (uint32_t k = 0; k < nst; k++)
        lv[1 + k] = plain(S->in[k]->v, S->in[k]->dtype, S->in[k]->rank);
    for (uint32_t k = 0; k < nso; k++) {
        uint8_t d = output_dtype(g, nst + k);
        int64_t zero = 0;
        lv[1 + nst + k] = plain(cc_const_new(C, N->b, (tfvm_dtype)d, 1, &zero, &zero, 0, false), d, 1);
    }
    for (uint32_t k = 0; k < nvar; k++) {
        iv[k] = lv[k].v;
        lv[k].cdata = NULL;
        lv[k].dv = NULL;
        types[k] = ox_vtype(&lv[k]);
    }
    uint32_t id = X->n_loops++;
    char label[32];
    snprintf(label, sizeof label, "scan%u", id);
    cc_blk *outer;
    cc_node *w = ox_count_loop(N, nvar, iv, types, var_names(N, id, nvar, nst, "scan"), label, &T, lv, &outer);
    cc_blk *body = w->u.loop.body;
    ox_ent *mark = X->top;
    for (uint32_t k = 0; k < nst; k++)
        bind_input(N, g, k, &lv[1 + k]);
    ox_val one = ox_scalar(N, TFVM_I64, 0, 1);
    ox_val rev = {0};
    for (uint32_t j = 0; j < nsi; j++) {
        const ox_val *x = S->in[nst + j];
        ox_val idx = lv[0];
        if (in_dirs[j]) {
            if (!rev.v.n) {
                ox_val t1 = ox_op2(N, ISA_SUB, 0, &T, &one);
                rev = ox_op2(N, ISA_SUB, 0, &t1, &lv[0]);
            }
            idx = rev;
        }
        ox_val e = ox_op2(N, ISA_GATHER, (uint32_t)in_axes[j], x, &idx);
        bind_input(N, g, nst + j, &e);
    }
    cc_irval *next = cc_array(C, nvar, sizeof *next);
    next[0] = ox_op2(N, ISA_ADD, 0, &lv[0], &one).v; /* first: see ox_op_loop */
    ox_val **out = cc_array(C, g->n_output + 1, sizeof *out);
    ox_graph_nodes(X, g, body, out);
    ox_scope_pop(X, mark);
    for (uint32_t k = 0; k < nst; k++)
        next[1 + k] = out[k]->v;
    for (uint32_t k = 0; k < nso; k++) {
        const ox_val *v = out[nst + k];
        if (v->dtype != lv[1 + nst + k].dtype)
            stack_init(N, outer, w, 1 + nst + k, v->dtype);
        lv[1 + nst + k].dtype = v->dtype;
        ox_val put = ox_op3(N, ISA_STACK_PUT, 0, &lv[1 + nst + k], &lv[0], v);
        next[1 + nst + k] = put.v;
    }
    cc_block_results(C, body, nvar, next);
    N->b = outer;
    for (uint32_t k = 0; k < nst; k++)
        outv[k] = plain(cc_out(w, 1 + k), lv[1 + k].dtype, lv[1 + k].rank);
    for (uint32_t k = 0; k < nso; k++) {
        const ox_val *e = out[nst + k];
        int r = e->rank >= 0 ? e->rank + 1 : -1;
        ox_val y = plain(cc_out(w, 1 + nst + k), e->dtype, r);
        if (out_dirs[k]) {
            int64_t st = -1, en = INT64_MIN, ax = 0, sp = -1;
            ox_val vs = ox_i64s(N, 1, &st), ve = ox_i64s(N, 1, &en), va = ox_i64s(N, 1, &ax), vp = ox_i64s(N, 1, &sp);
            y = ox_op(N, ISA_STRIDED_SLICE, 0, 5, (const ox_val *[]){&y, &vs, &ve, &va, &vp});
        }
        int64_t a = out_axes[k];
        if (a != 0) {
            if (r < 0)
                ox_unsupported(N, "scan_output_axes on an output of unknown rank");
            if (a < 0)
                a += r;
            if (a < 0 || a >= r)
                ox_fail(N, TFVM_ERR_FORMAT, "scan_output_axes %lld out of range", (long long)out_axes[k]);
            int64_t perm[TFVM_MAX_RANK];
            for (int d = 0; d < r; d++)
                perm[d] = d < a ? d + 1 : d == a ? 0 : d;
            ox_val pv = ox_i64s(N, r, perm);
            y = ox_op2(N, ISA_TRANSPOSE, 0, &y, &pv);
        }
        outv[nst + k] = y;
    }
}

/* Scan (opset 9+): T = the scan inputs' length along their axis; variables
 * (i, state..., one stack per scan output); each iteration reads element i
 * (or T-1-i, reversed) of every scan input with GATHER. */
void ox_op_scan(ox_node *N)
{
    const Onnx__GraphProto *g = graph_attr(N, "body");
    int64_t m = ox_attr_i(N, "num_scan_inputs", -1);
    bool v8 = N->X->opset < 9; /* Scan-8: sequence_lens first, a batch axis on everything */
    uint32_t first = v8 ? 1 : 0;
    if (m < 1 || m > (int64_t)N->n_in - first)
        ox_fail(N, TFVM_ERR_FORMAT, "num_scan_inputs %lld for %u inputs", (long long)m, N->n_in);
    uint32_t nst = N->n_in - first - (uint32_t)m, nsi = (uint32_t)m;
    if (g->n_input != nst + nsi || g->n_output < nst)
        ox_fail(N, TFVM_ERR_FORMAT, "body has %zu inputs and %zu outputs", g->n_input, g->n_output);
    uint32_t nso = (uint32_t)g->n_output - nst;
    if (N->n_out != nst + nso)
        ox_fail(N, TFVM_ERR_FORMAT, "%u outputs, the body gives %zu", N->n_out, g->n_output);
    if (nsi > OX_MAX_IO || nso > OX_MAX_IO)
        ox_unsupported(N, "more than %d scan inputs or outputs", OX_MAX_IO);
    if (v8 && N->in[0])
        ox_unsupported(N, "sequence_lens");
    int64_t ia[OX_MAX_IO] = {0}, id[OX_MAX_IO] = {0}, oa[OX_MAX_IO] = {0}, od[OX_MAX_IO] = {0};
    if (v8) {
        ox_attr_ints(N, "directions", id, OX_MAX_IO);
    } else {
        ox_attr_ints(N, "scan_input_axes", ia, OX_MAX_IO);
        ox_attr_ints(N, "scan_input_directions", id, OX_MAX_IO);
        ox_attr_ints(N, "scan_output_axes", oa, OX_MAX_IO);
        ox_attr_ints(N, "scan_output_directions", od, OX_MAX_IO);
    }
    for (uint32_t k = first; k < N->n_in; k++)
        if (!N->in[k])
            ox_fail(N, TFVM_ERR_FORMAT, "input %u is empty", k);
    scan_spec S = {.nst = nst, .nsi = nsi, .nso = nso, .in = N->in + first, .in_axes = ia, .in_dirs = id,
                   .out_axes = oa, .out_dirs = od};
    if (!v8) {
        scan_core(N, g, &S, N->out);
        return;
    }
    /* Scan-8: a loop over the batch (axis 0 of everything); each element
     * is a Scan-9 of its rows, its results stacked */
    cc *C = N->C;
    uint32_t nout = nst + nso, nvar = 1 + nout;
    const ox_val *b0 = N->in[first];
    ox_val sh = ox_op1(N, ISA_SHAPE, 0, b0), z = ox_scalar(N, TFVM_I64, 0, 0);
    ox_val B = ox_op2(N, ISA_GATHER, 0, &sh, &z);
    ox_val *lv = cc_array(C, nvar, sizeof *lv);
    cc_irval *iv = cc_array(C, nvar, sizeof *iv);
    cc_vtype *types = cc_array(C, nvar, sizeof *types);
    lv[0] = ox_scalar(N, TFVM_I64, 0, 0);
    for (uint32_t k = 0; k < nout; k++) {
        uint8_t d = k < nst ? N->in[first + k]->dtype : output_dtype(g, k);
        int64_t zero = 0;
        lv[1 + k] = plain(cc_const_new(C, N->b, (tfvm_dtype)d, 1, &zero, &zero, 0, false), d, 1);
    }
    for (uint32_t k = 0; k < nvar; k++) {
        iv[k] = lv[k].v;
        types[k] = ox_vtype(&lv[k]);
    }
    uint32_t lid = N->X->n_loops++;
    char label[32];
    snprintf(label, sizeof label, "batch%u", lid);
    cc_blk *outer;
    cc_node *w = ox_count_loop(N, nvar, iv, types, var_names(N, lid, nvar, 0, "batch"), label, &B, lv, &outer);
    ox_val **rows = cc_array(C, nst + nsi + 1, sizeof *rows);
    for (uint32_t k = 0; k < nst + nsi; k++) {
        const ox_val *x = N->in[first + k];
        ox_val r = ox_op2(N, ISA_GATHER, 0, x, &lv[0]);
        rows[k] = ox_new_val(C, &r);
    }
    S.in = rows;
    ox_val *res = cc_array(C, nout + 1, sizeof *res);
    scan_core(N, g, &S, res);
    cc_irval *next = cc_array(C, nvar, sizeof *next);
    ox_val one = ox_scalar(N, TFVM_I64, 0, 1);
    next[0] = ox_op2(N, ISA_ADD, 0, &lv[0], &one).v;
    for (uint32_t k = 0; k < nout; k++) {
        if (res[k].dtype != lv[1 + k].dtype)
            stack_init(N, outer, w, 1 + k, res[k].dtype);
        lv[1 + k].dtype = res[k].dtype;
        next[1 + k] = ox_op3(N, ISA_STACK_PUT, 0, &lv[1 + k], &lv[0], &res[k])
                          .v;
    }
    cc_block_results(C, w->u.loop.body, nvar, next);
    N->b = outer;
    for (uint32_t k = 0; k < nout; k++)
        N->out[k] = plain(cc_out(w, 1 + k), res[k].dtype, res[k].rank >= 0 ? res[k].rank + 1 : -1);
}
