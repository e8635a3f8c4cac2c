/* import/onnx.c — ONNX ModelProto to the structured IR (docs/onnx.md): the
 * model's checks, its values and their scopes, graphs and nodes; the ops
 * themselves are in onnx_ops.c, Loop/If/Scan in onnx_flow.c, tensors in
 * onnx_tensor.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/import.h"
#include "import/pb.h"
#include "import/onnx_int.h"

/* ---- Errors ---------------------------------------------------------------------- */

_Noreturn void ox_fail(ox_node *N, tfvm_status code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cc_error(N->C, (cc_pos){0, 0}, code, "node %s (%s): %s", N->id, N->n->op_type ? N->n->op_type : "?", msg);
}

_Noreturn void ox_unsupported(ox_node *N, const char *fmt, ...)
{
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cc_error(N->C, (cc_pos){0, 0}, TFVM_ERR_UNSUPPORTED, "node %s: op '%s' (opset %lld): %s is not supported", N->id,
             N->n->op_type ? N->n->op_type : "?", (long long)N->X->opset, msg);
}

/* ---- Values and scopes ---------------------------------------------------------- */

static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % OX_BUCKETS;
}

ox_val *ox_lookup(ox *X, const char *name)
{
    for (ox_ent *e = X->buckets[hash_name(name)]; e; e = e->chain)
        if (strcmp(e->name, name) == 0)
            return e->val;
    return NULL;
}

void ox_bind(ox *X, const char *name, ox_val *v)
{
    ox_ent *e = cc_alloc(X->C, sizeof *e);
    e->name = name;
    e->val = v;
    e->bucket = hash_name(name);
    e->chain = X->buckets[e->bucket];
    X->buckets[e->bucket] = e;
    e->below = X->top;
    X->top = e;
}

void ox_scope_pop(ox *X, ox_ent *mark)
{
    while (X->top != mark) {
        ox_ent *e = X->top;
        X->buckets[e->bucket] = e->chain;
        X->top = e->below;
    }
}

ox_val *ox_new_val(cc *C, const ox_val *v)
{
    ox_val *p = cc_alloc(C, sizeof *p);
    *p = *v;
    return p;
}

cc_vtype ox_vtype(const ox_val *v)
{
    if (v->rank == 0)
        return cc_scalar_t((tfvm_dtype)v->dtype);
    cc_vtype t = cc_tensor_t((tfvm_dtype)v->dtype, v->rank);
    if (v->rank > 0)
        for (int k = 0; k < v->rank; k++)
            t.dims[k] = v->dims[k] >= 0 ? v->dims[k] : -1; /* the IR has no symbols */
    return t;
}

bool ox_dtype(int32_t t, uint8_t *dtype)
{
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: *dtype = TFVM_F32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: *dtype = TFVM_F64; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *dtype = TFVM_I32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *dtype = TFVM_I64; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *dtype = TFVM_BOOL; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: *dtype = TFVM_U8; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: *dtype = TFVM_I8; return true;
    default: return false;
    }
}

const char *ox_onnx_type_name(int32_t t)
{
    static const char *const names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32",
                                        "int64", "string", "bool", "float16", "double", "uint32", "uint64",
                                        "complex64", "complex128", "bfloat16"};
    return t >= 0 && (size_t)t < UT_COUNTOF(names) ? names[t] : "an unknown type";
}

/* the symbol of dim_param `name` (interned in X), or -1 past OX_MAX_SYMS;
 * NULL: a new symbol without a name (a dim the model leaves unnamed: `?`,
 * but equal to itself wherever shape arithmetic carries it) */
static int64_t dim_symbol(ox *X, const char *name)
{
    uint32_t k = 0;
    while (name && k < X->n_syms && (!X->syms[k] || strcmp(X->syms[k], name) != 0))
        k++;
    k = name ? k : X->n_syms;
    if (k == OX_MAX_SYMS)
        return CC_DIM_ANY;
    if (k == X->n_syms)
        X->syms[X->n_syms++] = name;
    return cc_dim_sym(k);
}

bool ox_value_info(ox *X, const Onnx__ValueInfoProto *vi, ox_val *v)
{
    memset(v, 0, sizeof *v);
    v->rank = -1;
    for (int k = 0; k < TFVM_MAX_RANK; k++)
        v->dims[k] = -1;
    if (!vi || !vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type)
        return false;
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    if (!tt->has_elem_type || !ox_dtype(tt->elem_type, &v->dtype))
        return false;
    if (tt->shape && tt->shape->n_dim <= TFVM_MAX_RANK) {
        v->rank = (int8_t)tt->shape->n_dim;
        for (size_t k = 0; k < tt->shape->n_dim; k++) {
            const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
            /* a dim beyond 2^40 is as good as unknown (and keeps the arithmetic on dims exact) */
            if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0 &&
                d->dim_value <= ((int64_t)1 << 40))
                v->dims[k] = d->dim_value;
            else if (X && d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
                     isa_dim_name_ok(d->dim_param, strlen(d->dim_param)))
                v->dims[k] = dim_symbol(X, d->dim_param);
            else if (X)
                v->dims[k] = dim_symbol(X, NULL);
        }
    }
    return true;
}

/* ---- Attributes ------------------------------------------------------------------ */

const Onnx__AttributeProto *ox_attr(const ox_node *N, const char *name)
{
    for (size_t k = 0; k < N->n->n_attribute; k++) {
        const Onnx__AttributeProto *a = N->n->attribute[k];
        if (a && a->name && strcmp(a->name, name) == 0)
            return a;
    }
    return NULL;
}

int64_t ox_attr_i(const ox_node *N, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = ox_attr(N, name);
    return a && a->has_i ? a->i : def;
}

float ox_attr_f(const ox_node *N, const char *name, float def)
{
    const Onnx__AttributeProto *a = ox_attr(N, name);
    return a && a->has_f ? a->f : def;
}

const char *ox_attr_s(const ox_node *N, const char *name, const char *def, char *buf, size_t size)
{
    const Onnx__AttributeProto *a = ox_attr(N, name);
    if (!a || !a->has_s)
        return def;
    size_t n = a->s.len < size - 1 ? a->s.len : size - 1;
    if (n)
        memcpy(buf, a->s.data, n);
    buf[n] = 0;
    return buf;
}

int ox_attr_ints(const ox_node *N, const char *name, int64_t *out, int max)
{
    const Onnx__AttributeProto *a = ox_attr(N, name);
    if (!a)
        return -1;
    if (a->n_ints > (size_t)max)
        ox_unsupported((ox_node *)N, "attribute '%s' with %zu entries", name, a->n_ints);
    if (a->n_ints)
        memcpy(out, a->ints, a->n_ints * sizeof *out);
    return (int)a->n_ints;
}

/* ---- Graphs and nodes ------------------------------------------------------------ */

static void node_id(ox_node *N, const Onnx__NodeProto *n, size_t index)
{
    if (n->name && n->name[0])
        snprintf(N->id, sizeof N->id, "'%.80s'", n->name);
    else
        snprintf(N->id, sizeof N->id, "#%zu", index);
}

/* What the graph's value_info says of an output the op rules left unknown
 * (exporters record intermediate shapes there): its rank and dims. */
static void refine_from_value_info(const Onnx__GraphProto *g, const char *name, ox_val *v)
{
    if (v->rank >= 0 || !g)
        return;
    for (size_t k = 0; k < g->n_value_info; k++) {
        const Onnx__ValueInfoProto *vi = g->value_info[k];
        if (!vi || !vi->name || strcmp(vi->name, name) != 0)
            continue;
        ox_val t;
        if (ox_value_info(NULL, vi, &t) && t.dtype == v->dtype && t.rank >= 0) {
            v->rank = t.rank;
            memcpy(v->dims, t.dims, sizeof v->dims);
        }
        return;
    }
}

static void translate_node(ox *X, const Onnx__GraphProto *g, const Onnx__NodeProto *n, size_t index, cc_blk *b)
{
    ox_node *N = cc_alloc(X->C, sizeof *N);
    N->X = X;
    N->C = X->C;
    N->b = b;
    N->n = n;
    node_id(N, n, index);
    if (!n->op_type)
        ox_fail(N, TFVM_ERR_FORMAT, "no op type");
    bool preview = n->domain && strcmp(n->domain, "ai.onnx.preview") == 0 && ox_find_preview_op(n->op_type);
    bool other = n->domain && ox_find_domain_op(n->domain, n->op_type); /* onnx_bits.c */
    if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0 && !preview && !other)
        cc_error(X->C, (cc_pos){0, 0}, TFVM_ERR_UNSUPPORTED,
                 "node %s: op '%s' of domain '%.60s' is not supported (only the default domain is)", N->id,
                 n->op_type, n->domain);
    int64_t min_opset = 0;
    ox_handler h = preview    ? ox_find_preview_op(n->op_type)
                   : other    ? ox_find_domain_op(n->domain, n->op_type)
                              : ox_find_op(n->op_type, X->opset, &min_opset);
    if (!h) {
        if (min_opset)
            cc_error(X->C, (cc_pos){0, 0}, TFVM_ERR_UNSUPPORTED,
                     "node %s: op '%.60s' (opset %lld) is not supported (from opset %lld)", N->id, n->op_type,
                     (long long)X->opset, (long long)min_opset);
        cc_error(X->C, (cc_pos){0, 0}, TFVM_ERR_UNSUPPORTED, "node %s: op '%.60s' (opset %lld) is not supported",
                 N->id, n->op_type, (long long)X->opset);
    }
    if (n->n_input > UINT32_MAX / 2 || n->n_output > UINT32_MAX / 2)
        ox_fail(N, TFVM_ERR_FORMAT, "too many inputs or outputs");
    N->n_in = (uint32_t)n->n_input;
    N->n_out = (uint32_t)n->n_output;
    N->in = cc_array(X->C, N->n_in + 1, sizeof *N->in);
    N->out = cc_array(X->C, N->n_out + 1, sizeof *N->out);
    for (uint32_t k = 0; k < N->n_in; k++) {
        const char *in = n->input[k];
        if (!in || !in[0])
            continue;
        N->in[k] = ox_lookup(X, in);
        if (!N->in[k])
            ox_fail(N, TFVM_ERR_FORMAT, "input '%.80s' is not defined before the node", in);
    }
    for (uint32_t k = 0; k < N->n_out; k++) {
        N->out[k].rank = -1;
        for (int d = 0; d < TFVM_MAX_RANK; d++)
            N->out[k].dims[d] = -1;
    }
    const cc_origin *outer = X->C->origin; /* a subgraph's nodes are inside their If/Loop */
    cc_set_origin(X->C, n->name && n->name[0] ? n->name : n->output && n->n_output && n->output[0] ? n->output[0] : "?",
                  n->op_type);
    if (!ox_try_fold(N)) {
        h(N);
        ox_keep_facts(N);
    }
    X->C->origin = outer;
    for (uint32_t k = 0; k < N->n_out; k++) {
        const char *o = n->output[k];
        if (!o || !o[0])
            continue;
        if (!N->out[k].v.n)
            ox_unsupported(N, "output %u", k);
        refine_from_value_info(g, o, &N->out[k]);
        ox_bind(X, o, ox_new_val(X->C, &N->out[k]));
    }
}

void ox_graph_nodes(ox *X, const Onnx__GraphProto *g, cc_blk *b, ox_val **out)
{
    cc *C = X->C;
    if (++X->depth > 64)
        cc_error(C, (cc_pos){0, 0}, TFVM_ERR_UNSUPPORTED, "subgraphs nested more than 64 deep are not supported");
    for (size_t k = 0; k < g->n_initializer; k++) {
        const Onnx__TensorProto *t = g->initializer[k];
        if (!t || !t->name)
            cc_error(C, (cc_pos){0, 0}, TFVM_ERR_FORMAT, "initializer #%zu has no name", k);
        ox_val v;
        ox_tensor_const(X, NULL, b, t, &v);
        ox_bind(X, t->name, ox_new_val(C, &v));
    }
    if (g->n_sparse_initializer)
        cc_error(C, (cc_pos){0, 0}, TFVM_ERR_UNSUPPORTED, "sparse initializers are not supported");
    for (size_t k = 0; k < g->n_node; k++) {
        if (!g->node[k])
            cc_error(C, (cc_pos){0, 0}, TFVM_ERR_FORMAT, "node #%zu is empty", k);
        translate_node(X, g, g->node[k], k, b);
    }
    for (size_t k = 0; k < g->n_output; k++) {
        const Onnx__ValueInfoProto *o = g->output[k];
        const char *name = o && o->name ? o->name : "";
        out[k] = name[0] ? ox_lookup(X, name) : NULL;
        if (!out[k])
            cc_error(C, (cc_pos){0, 0}, TFVM_ERR_FORMAT, "graph output '%.80s' is not computed by any node", name);
    }
    X->depth--;
}

/* ---- The model ------------------------------------------------------------------- */

typedef struct ox_build {
    ox X;
    const Onnx__ModelProto *m;
} ox_build;

static int cmp_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The graph's initializer names, sorted (for is_initializer), *n of them. */
static const char **initializer_names(cc *C, const Onnx__GraphProto *g, size_t *n)
{
    const char **names = cc_array(C, g->n_initializer + 1, sizeof *names);
    *n = 0;
    for (size_t k = 0; k < g->n_initializer; k++)
        if (g->initializer[k] && g->initializer[k]->name)
            names[(*n)++] = g->initializer[k]->name;
    qsort(names, *n, sizeof *names, cmp_name);
    return names;
}

/* A binary search, not a scan per input: an exporter that lists 50,000
 * weights as inputs too took 6.8 s of strcmp. */
static bool is_initializer(const char *const *names, size_t n, const char *name)
{
    return bsearch(&name, names, n, sizeof *names, cmp_name) != NULL;
}

/* The names of v's symbolic dims (X's symbols), or NULL when it has none */
static const char **dim_names(ox *X, const ox_val *v)
{
    const char **names = NULL;
    for (int k = 0; k < v->rank; k++)
        if (cc_dim_is_sym(v->dims[k]) && cc_dim_sym_id(v->dims[k]) < X->n_syms && X->syms[cc_dim_sym_id(v->dims[k])]) {
            if (!names)
                names = cc_array(X->C, (size_t)v->rank, sizeof *names);
            names[k] = X->syms[cc_dim_sym_id(v->dims[k])];
        }
    return names;
}

/* What a result's signature promises (checked on every run,
 * vm/signature.c): the graph's declared output type when it has a rank
 * (exporters write it, symbolic dims named), else the rank the import
 * found; dims the model does not declare stay `?`. */
static void result_type(ox *X, const Onnx__ValueInfoProto *vi, const ox_val *got, cc_param *r)
{
    ox_val d;
    r->type = ox_vtype(got);
    if (!r->type.tensor)
        return;
    if (ox_value_info(X, vi, &d) && d.dtype == got->dtype && d.rank > 0 && (got->rank < 0 || got->rank == d.rank)) {
        r->type = ox_vtype(&d);
        r->dim_names = dim_names(X, &d);
        return;
    }
    r->type = cc_tensor_t((tfvm_dtype)r->type.dtype, got->rank);
}

static cc_ifn *build_model(cc *C, void *ud)
{
    ox_build *B = ud;
    ox *X = &B->X;
    X->C = C;
    const Onnx__ModelProto *m = B->m;
    const Onnx__GraphProto *g = m->graph;
    X->opset = -1;
    for (size_t k = 0; k < m->n_opset_import; k++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[k];
        if (!o)
            continue;
        if (!o->domain || !o->domain[0] || strcmp(o->domain, "ai.onnx") == 0)
            X->opset = o->has_version ? o->version : 1;
    }
    if (X->opset < 0)
        X->opset = 1; /* IR version 1-2 models have no opset_import: opset 1 */
    if (X->opset < 1 || X->opset > OX_MAX_OPSET)
        cc_error(C, (cc_pos){0, 0}, TFVM_ERR_UNSUPPORTED, "opset %lld of the default domain is not supported (1 to %d are)",
                 (long long)X->opset, OX_MAX_OPSET);
    if (!g)
        cc_error(C, (cc_pos){0, 0}, TFVM_ERR_FORMAT, "bad .onnx file (no graph)");

    uint32_t np = 0;
    size_t n_inits;
    const char **inits = initializer_names(C, g, &n_inits);
    const char **pn = cc_array(C, g->n_input + 1, sizeof *pn);
    cc_vtype *pt = cc_array(C, g->n_input + 1, sizeof *pt);
    ox_val *pv = cc_array(C, g->n_input + 1, sizeof *pv);
    for (size_t k = 0; k < g->n_input; k++) {
        const Onnx__ValueInfoProto *vi = g->input[k];
        if (!vi || !vi->name || !vi->name[0])
            cc_error(C, (cc_pos){0, 0}, TFVM_ERR_FORMAT, "graph input #%zu has no name", k);
        if (is_initializer(inits, n_inits, vi->name))
            continue; /* exporters list weights as inputs too: they stay constants */
        if (!ox_value_info(X, vi, &pv[np])) {
            const Onnx__TypeProto *t = vi->type;
            if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && t->tensor_type &&
                t->tensor_type->has_elem_type)
                cc_error(C, (cc_pos){0, 0}, TFVM_ERR_UNSUPPORTED, "graph input '%.80s': element type %s is not supported",
                         vi->name, ox_onnx_type_name(t->tensor_type->elem_type));
            cc_error(C, (cc_pos){0, 0}, TFVM_ERR_UNSUPPORTED,
                     "graph input '%.80s' is not a tensor of a known element type", vi->name);
        }
        pn[np] = vi->name;
        pt[np] = ox_vtype(&pv[np]);
        np++;
    }
    uint32_t nr = (uint32_t)g->n_output;
    const char **rn = cc_array(C, nr + 1, sizeof *rn);
    cc_vtype *rt = cc_array(C, nr + 1, sizeof *rt);
    for (uint32_t k = 0; k < nr; k++) {
        const Onnx__ValueInfoProto *vi = g->output[k];
        rn[k] = vi && vi->name ? vi->name : "";
        ox_val v;
        if (!ox_value_info(X, vi, &v))
            v.dtype = TFVM_F32;
        rt[k] = ox_vtype(&v);
    }
    cc_ifn *fn = cc_func_new(C, "main", np, pn, pt, nr, rn, rt);
    cc_blk *top = cc_fn_top(fn);
    for (uint32_t k = 0; k < np; k++) {
        fn->src->params[k].dim_names = dim_names(X, &pv[k]);
        pv[k].v = cc_param_val(fn, k);
        ox_bind(X, pn[k], &pv[k]);
    }
    ox_val **out = cc_array(C, nr + 1, sizeof *out);
    ox_graph_nodes(X, g, top, out);
    cc_irval *res = cc_array(C, nr + 1, sizeof *res);
    for (uint32_t k = 0; k < nr; k++) {
        res[k] = out[k]->v;
        result_type(X, g->output[k], out[k], &fn->src->results[k]);
    }
    cc_block_results(C, top, nr, res);
    return fn;
}

tfvm_status imp_onnx(const void *data, size_t len, const char *name, const char *dir, int opt_level,
                     const tfvm_allocator *a, isa_program *out, tfvm_error *err)
{
    tfvm_allocator al = a ? *a : (tfvm_allocator){0};
    imp_pb pb;
    imp_pb_init(&pb, &al);
    ProtobufCAllocator *pa = &pb.pa;
    isa_program_init(out, a);
    ut_err_clear(err);
    size_t at;
    if (!imp_pb_depth_ok(&onnx__model_proto__descriptor, data, len, &at))
        return ut_err(err, TFVM_ERR_FORMAT, "%s: bad .onnx file (messages nested deeper than %d at byte %zu)", name,
                      IMP_PB_MAX_DEPTH, at);
    Onnx__ModelProto *m = onnx__model_proto__unpack(pa, len, data);
    if (!m) {
        if (pb.failed)
            return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory reading the model", name);
        return ut_err(err, TFVM_ERR_FORMAT, "%s: bad .onnx file (not a valid ModelProto: truncated or corrupt protobuf)",
                      name);
    }
    if (!m->graph) {
        onnx__model_proto__free_unpacked(m, pa);
        return ut_err(err, TFVM_ERR_FORMAT, "%s: bad .onnx file (no graph)", name);
    }
    ox_build *B = ut_calloc(&al, 1, sizeof *B);
    if (!B) {
        onnx__model_proto__free_unpacked(m, pa);
        return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory", name);
    }
    B->m = m;
    B->X.dir = dir;
    tfvm_status st = cc_build_program(name, a, opt_level, build_model, B, out, err);
    if (st != TFVM_OK && err) /* names in messages come from the file */
        imp_one_line(err->message);
    ut_free(&al, B, sizeof *B);
    onnx__model_proto__free_unpacked(m, pa);
    return st;
}
