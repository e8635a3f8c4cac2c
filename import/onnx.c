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
    cc_add_var(X->C, v->v, name); /* the tensor's name, for the debugger */
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
    /* the storage dtypes compute in a wide dtype that holds every value
       (u64: i64's bits; ox_u64_order keeps orderings right) */
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: *dtype = TFVM_I32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: *dtype = TFVM_I64; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: *dtype = TFVM_F32; return true;
    default: return false;
    }
}

uint8_t ox_store_dtype(int32_t t)
{
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: return TFVM_I16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: return TFVM_U16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return TFVM_U32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: return TFVM_U64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: return TFVM_F16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: return TFVM_BF16;
    default: return 0;
    }
}

/* A storage dtype's value x (its compute dtype) as the storage dtype holds
 * it: a wrapped integer, a rounded float. */
ox_val ox_narrow(ox_node *N, const ox_val *x, uint8_t store)
{
    ox_val s = ox_to_dtype(N, x, store), r = ox_to_dtype(N, &s, x->dtype);
    r.store = store;
    return r;
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
    v->store = ox_store_dtype(tt->elem_type);
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

/* How messages name node n, the index-th of its graph: 'name' or #index. */
static void node_id(const Onnx__NodeProto *n, size_t index, char *buf, size_t size)
{
    if (n->name && n->name[0])
        snprintf(buf, size, "'%.80s'", n->name);
    else
        snprintf(buf, size, "#%zu", index);
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

/* ---- Storage dtypes --------------------------------------------------------------
 * A value of ONNX type u16, f16... computes in its wide dtype (ox_dtype) and
 * remembers the storage dtype in ox_val.store. What ops need of it: */
static bool op_is(const ox_node *N, const char *const *names)
{
    for (; *names; names++)
        if (strcmp(N->n->op_type, *names) == 0)
            return true;
    return false;
}

/* ops whose integer results may leave the storage dtype's range: they wrap
   as the stored value would (i16, u16 and u32; u64 wraps in i64's bits) */
static const char *const wrapping_ops[] = {"Add", "Sub", "Mul", "Neg", "Abs", "Pow", "BitShift", "BitwiseNot",
                                           "Sum", "CumSum", "ReduceSum", "ReduceProd", "MatMul", "Gemm",
                                           "Div", "Einsum", NULL};
/* ops that order their operands, and those of them whose results are operands */
static const char *const ordering_ops[] = {"Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Max", "Min",
                                           "ReduceMax", "ReduceMin", "TopK", "ArgMax", "ArgMin", "Clip", NULL};
static const char *const ordered_results[] = {"Max", "Min", "ReduceMax", "ReduceMin", "TopK", "Clip", NULL};
/* ops whose results are never their operands' element type */
static const char *const index_ops[] = {"Shape", "Size", "NonZero", "ArgMax", "ArgMin", "Cast", "CastLike", NULL};

static uint8_t node_store(const ox_node *N)
{
    for (uint32_t k = 0; k < N->n_in; k++)
        if (N->in[k] && N->in[k]->store)
            return N->in[k]->store;
    return 0;
}

/* u64 in i64: flipping the sign bit maps unsigned order onto signed order
   (and back), so an op that orders flipped operands and flips its ordered
   results gives the unsigned answer */
static ox_val u64_flip(ox_node *N, const ox_val *x)
{
    ox_val m = ox_scalar(N, TFVM_I64, 0, INT64_MIN), r = ox_ew2(N, ISA_BITXOR, x, &m);
    r.store = x->store;
    return r;
}

/* x >=u y on u64s held in i64s */
static ox_val u64_ge(ox_node *N, const ox_val *x, const ox_val *y)
{
    ox_val fx = u64_flip(N, x), fy = u64_flip(N, y), ge = ox_ew2(N, ISA_GREATER_EQUAL, &fx, &fy);
    return ox_to_dtype(N, &ge, TFVM_I64);
}

/* x >> s, shifting in zeros (SHR is arithmetic): the sign-filled bits
   masked off, ~((-1 << (63 - s)) << 1) (0 for s >= 64, as SHL gives 0) */
static ox_val u64_shr(ox_node *N, const ox_val *x, const ox_val *s)
{
    ox_val m1 = ox_scalar(N, TFVM_I64, 0, -1), c63 = ox_scalar(N, TFVM_I64, 0, 63), one = ox_scalar(N, TFVM_I64, 0, 1);
    ox_val k = ox_ew2(N, ISA_SUB, &c63, s), m = ox_ew2(N, ISA_SHL, &m1, &k);
    m = ox_ew2(N, ISA_SHL, &m, &one);
    m = ox_ew1(N, ISA_BITNOT, &m);
    ox_val r = ox_ew2(N, ISA_SHR, x, s), big = ox_ew2(N, ISA_GREATER, s, &c63);
    ox_val zero = ox_scalar(N, TFVM_I64, 0, 0);
    r = ox_ew2(N, ISA_BITAND, &r, &m);
    return ox_where(N, &big, &zero, &r);
}

/* a /u b on u64s held in i64s: b >= 2^63 gives a >=u b; else the quotient
   of a >> 1 (logical, so signed division is right) doubled is the true one
   or one less, which the remainder tells */
static ox_val u64_div(ox_node *N, const ox_val *a, const ox_val *b)
{
    ox_val zero = ox_scalar(N, TFVM_I64, 0, 0), one = ox_scalar(N, TFVM_I64, 0, 1);
    ox_val big = ox_ew2(N, ISA_LESS, b, &zero), bs = ox_where(N, &big, &one, b);
    ox_val q = u64_shr(N, a, &one);
    q = ox_ew2(N, ISA_DIV, &q, &bs);
    q = ox_ew2(N, ISA_SHL, &q, &one);
    ox_val qb = ox_ew2(N, ISA_MUL, &q, &bs), r = ox_ew2(N, ISA_SUB, a, &qb);
    ox_val up = u64_ge(N, &r, &bs), big_q = u64_ge(N, a, b);
    q = ox_ew2(N, ISA_ADD, &q, &up);
    return ox_where(N, &big, &big_q, &q);
}

/* Div, Mod and right BitShift of u64 operands, which the signed instructions
   would get wrong: true when done */
static bool u64_unsigned_op(ox_node *N)
{
    char dir[8];
    const bool div = strcmp(N->n->op_type, "Div") == 0, mod = strcmp(N->n->op_type, "Mod") == 0;
    const bool shr = strcmp(N->n->op_type, "BitShift") == 0 &&
                     strcmp(ox_attr_s(N, "direction", "", dir, sizeof dir), "RIGHT") == 0;
    if (!(div || mod || shr) || N->n_in != 2 || N->n_out != 1 || !N->in[0] || !N->in[1] ||
        N->in[0]->dtype != TFVM_I64 || N->in[1]->dtype != TFVM_I64)
        return false;
    const ox_val *a = N->in[0], *b = N->in[1];
    if (shr) {
        N->out[0] = u64_shr(N, a, b);
    } else {
        N->out[0] = u64_div(N, a, b);
        if (mod) { /* unsigned: the remainder, whatever fmod says */
            ox_val qb = ox_ew2(N, ISA_MUL, &N->out[0], b);
            N->out[0] = ox_ew2(N, ISA_SUB, a, &qb);
        }
    }
    N->out[0].store = TFVM_U64;
    return true;
}

/* Before the op: u64 operands made to order right; true when the op is done
   here */
static bool u64_before(ox_node *N)
{
    if (node_store(N) != TFVM_U64)
        return false;
    if (u64_unsigned_op(N))
        return true;
    if (!op_is(N, ordering_ops))
        return false;
    /* the ordered operands: every one of a comparison, Max, Min and Clip; the data of the others */
    const bool all = op_is(N, (const char *const[]){"Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Max", "Min",
                                                    "Clip", NULL});
    for (uint32_t k = 0; k < (all ? N->n_in : 1); k++)
        if (N->in[k] && N->in[k]->dtype == TFVM_I64) {
            ox_val f = u64_flip(N, N->in[k]);
            N->in[k] = ox_new_val(N->C, &f);
        }
    return false;
}

/* After the op: its results' storage dtype (an operand's, where the result
 * has the operand's dtype), wrapped where it may have left the range, and
 * u64 orderings flipped back. */
static void store_after(ox_node *N, uint8_t store)
{
    if (!store || op_is(N, index_ops))
        return;
    for (uint32_t k = 0; k < N->n_out; k++) {
        ox_val *o = &N->out[k];
        if (!o->v.n || o->store || (k > 0 && op_is(N, (const char *const[]){"TopK", "Unique", NULL})))
            continue;
        bool same = false;
        for (uint32_t i = 0; i < N->n_in && !same; i++)
            same = N->in[i] && N->in[i]->store == store && N->in[i]->dtype == o->dtype;
        if (!same)
            continue;
        if (store == TFVM_U64 && op_is(N, ordered_results)) {
            *o = u64_flip(N, o);
        } else if (store != TFVM_U64 && !isa_dtype_half(store) && op_is(N, wrapping_ops)) {
            int8_t rank = o->rank;
            int64_t dims[TFVM_MAX_RANK];
            memcpy(dims, o->dims, sizeof dims);
            *o = ox_narrow(N, o, store);
            o->rank = rank;
            memcpy(o->dims, dims, sizeof dims);
        }
        o->store = store;
    }
}

/* The handler of node n (its id for messages), or NULL with why it has none. */
static ox_handler node_handler(const ox *X, const Onnx__NodeProto *n, const char *id, char *why, size_t size)
{
    bool preview = n->domain && strcmp(n->domain, "ai.onnx.preview") == 0 && ox_find_preview_op(n->op_type);
    bool other = n->domain && ox_find_domain_op(n->domain, n->op_type); /* onnx_bits.c */
    if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0 && !preview && !other) {
        snprintf(why, size, "node %s: op '%.60s' of domain '%.60s' is not supported (only the default domain is)", id,
                 n->op_type, n->domain);
        return NULL;
    }
    int64_t min_opset = 0;
    ox_handler h = preview    ? ox_find_preview_op(n->op_type)
                   : other    ? ox_find_domain_op(n->domain, n->op_type)
                              : ox_find_op(n->op_type, X->opset, &min_opset);
    if (!h && min_opset)
        snprintf(why, size, "node %s: op '%.60s' (opset %lld) is not supported (from opset %lld)", id, n->op_type,
                 (long long)X->opset, (long long)min_opset);
    else if (!h)
        snprintf(why, size, "node %s: op '%.60s' (opset %lld) is not supported", id, n->op_type, (long long)X->opset);
    return h;
}

/* Every node of g and its subgraphs without a handler, described into
 * list (as many as fit; *n counts them all). */
static void list_unsupported(const ox *X, const Onnx__GraphProto *g, char *list, size_t size, int *n)
{
    for (size_t k = 0; g && k < g->n_node; k++) {
        const Onnx__NodeProto *node = g->node[k];
        if (!node || !node->op_type)
            continue;
        char id[96], why[256], item[256];
        if (node->name && node->name[0])
            snprintf(id, sizeof id, "'%.80s'", node->name);
        else
            snprintf(id, sizeof id, "#%zu", k);
        if (!node_handler(X, node, id, why, sizeof why)) {
            /* the first in full (alone, it is the message); the rest briefly */
            const bool dom = node->domain && node->domain[0] && strcmp(node->domain, "ai.onnx") != 0;
            snprintf(item, sizeof item, "node %s: %.60s%s%.60s (opset %lld)", id, dom ? node->domain : "",
                     dom ? ":" : "", node->op_type, (long long)X->opset);
            size_t len = strlen(list);
            if (*n == 0)
                snprintf(list, size, "%s", why);
            else if (len + strlen(item) + 8 < size)
                snprintf(list + len, size - len, "%s%s", *n == 1 ? "; also " : ", ", item);
            else if (len + 6 < size && strcmp(list + len - 3, "...") != 0)
                snprintf(list + len, size - len, ", ...");
            (*n)++;
        }
        for (size_t a = 0; a < node->n_attribute; a++) {
            const Onnx__AttributeProto *at = node->attribute[a];
            if (!at)
                continue;
            list_unsupported(X, at->g, list, size, n);
            for (size_t j = 0; j < at->n_graphs; j++)
                list_unsupported(X, at->graphs[j], list, size, n);
        }
    }
}

/* One error for every unsupported op of the model, before translating any. */
static void check_ops(ox *X, const Onnx__GraphProto *g)
{
    char list[440] = "";
    int n = 0;
    list_unsupported(X, g, list, sizeof list, &n);
    if (n == 1)
        cc_error(X->C, (cc_pos){0, 0}, TFVM_ERR_UNSUPPORTED, "%s", list);
    if (n > 1)
        cc_error(X->C, (cc_pos){0, 0}, TFVM_ERR_UNSUPPORTED, "%d nodes have ops that are not supported: %s", n,
                 list);
}

ox_node *ox_node_at(ox *X, const Onnx__GraphProto *g, size_t index, cc_blk *b)
{
    const Onnx__NodeProto *n = g->node[index];
    ox_node *N = cc_alloc(X->C, sizeof *N);
    N->X = X;
    N->C = X->C;
    N->b = b;
    N->n = n;
    N->g = g;
    N->index = index;
    node_id(n, index, N->id, sizeof N->id);
    if (n->n_input > UINT32_MAX / 2 || n->n_output > UINT32_MAX / 2)
        ox_fail(N, TFVM_ERR_FORMAT, "too many inputs or outputs");
    N->n_in = (uint32_t)n->n_input;
    N->n_out = (uint32_t)n->n_output;
    N->in = cc_array(X->C, N->n_in + 1, sizeof *N->in);
    N->out = cc_array(X->C, N->n_out + 1, sizeof *N->out);
    for (uint32_t k = 0; k < N->n_in; k++)
        if (n->input[k] && n->input[k][0])
            N->in[k] = ox_lookup(X, n->input[k]);
    for (uint32_t k = 0; k < N->n_out; k++) {
        N->out[k].rank = -1;
        for (int d = 0; d < TFVM_MAX_RANK; d++)
            N->out[k].dims[d] = -1;
    }
    return N;
}

static void translate_node(ox *X, const Onnx__GraphProto *g, const Onnx__NodeProto *n, size_t index, cc_blk *b)
{
    ox_node *N = ox_node_at(X, g, index, b);
    if (!n->op_type)
        ox_fail(N, TFVM_ERR_FORMAT, "no op type");
    char why[256];
    ox_handler h = node_handler(X, n, N->id, why, sizeof why);
    if (!h)
        cc_error(X->C, (cc_pos){0, 0}, TFVM_ERR_UNSUPPORTED, "%s", why);
    for (uint32_t k = 0; k < N->n_in; k++)
        if (n->input[k] && n->input[k][0] && !N->in[k])
            ox_fail(N, TFVM_ERR_FORMAT, "input '%.80s' is not defined before the node", n->input[k]);
    const cc_origin *outer = X->C->origin; /* a subgraph's nodes are inside their If/Loop */
    cc_set_origin(X->C, n->name && n->name[0] ? n->name : n->output && n->n_output && n->output[0] ? n->output[0] : "?",
                  n->op_type);
    for (uint32_t k = 0; k < N->n_in; k++)
        if (N->in[k] && N->in[k]->seq && !ox_is_list_op(n->op_type))
            ox_unsupported(N, "a sequence as input %u", k);
    ox_done **at = &X->done; /* made ahead of its turn (taken off: a subgraph may be translated again) */
    while (*at && (*at)->n != n)
        at = &(*at)->next;
    if (*at) {
        const ox_done *done = *at;
        *at = done->next;
        if (done->make)
            done->make(N, done->ctx);
        else
            memcpy(N->out, done->out, (N->n_out < 3 ? N->n_out : 3) * sizeof *N->out);
    } else {
        if (!u64_before(N) && !ox_try_fold(N)) {
            h(N);
            ox_keep_facts(N);
        }
        store_after(N, node_store(N));
    }
    X->C->origin = outer;
    for (uint32_t k = 0; k < N->n_out; k++) {
        const char *o = n->output[k];
        if (!o || !o[0])
            continue;
        if (!N->out[k].v.n && !N->out[k].seq)
            ox_unsupported(N, "output %u", k);
        refine_from_value_info(g, o, &N->out[k]);
        ox_bind(X, o, ox_new_val(X->C, &N->out[k]));
    }
}

/* A name a graph defines: a graph input, an initializer or a node output,
 * in that order (seq). */
typedef struct ox_def {
    const char *name;
    enum { DEF_INPUT, DEF_INIT, DEF_OUTPUT } kind;
    size_t index; /* the input's, initializer's or node's */
    size_t seq;
} ox_def;

static int cmp_def(const void *a, const void *b)
{
    const ox_def *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* ONNX graphs assign each name once (ONNX Runtime refuses a model that does
 * not): no two graph inputs, initializers or node outputs of one graph share
 * a name, but an initializer may share an input's (its default). A sort of
 * every name, not a lookup per definition: both are linear in the graph. */
static void check_single_assignment(cc *C, const Onnx__GraphProto *g)
{
    size_t n = g->n_input + g->n_initializer, seq = 0;
    for (size_t k = 0; k < g->n_node; k++)
        n += g->node[k] ? g->node[k]->n_output : 0;
    ox_def *d = cc_array(C, n + 1, sizeof *d);
    for (size_t k = 0; k < g->n_input; k++)
        if (g->input[k] && g->input[k]->name && g->input[k]->name[0])
            d[seq] = (ox_def){g->input[k]->name, DEF_INPUT, k, seq}, seq++;
    for (size_t k = 0; k < g->n_initializer; k++)
        if (g->initializer[k] && g->initializer[k]->name)
            d[seq] = (ox_def){g->initializer[k]->name, DEF_INIT, k, seq}, seq++;
    for (size_t k = 0; k < g->n_node; k++)
        for (size_t o = 0; g->node[k] && o < g->node[k]->n_output; o++)
            if (g->node[k]->output[o] && g->node[k]->output[o][0])
                d[seq] = (ox_def){g->node[k]->output[o], DEF_OUTPUT, k, seq}, seq++;
    qsort(d, seq, sizeof *d, cmp_def);
    for (size_t k = 1; k < seq; k++) {
        const ox_def *a = &d[k - 1], *b = &d[k];
        if (strcmp(a->name, b->name) != 0 || (a->kind == DEF_INPUT && b->kind == DEF_INIT))
            continue;
        if (b->kind == DEF_INPUT)
            cc_error(C, (cc_pos){0, 0}, TFVM_ERR_FORMAT, "graph input '%.80s' is listed twice", b->name);
        if (b->kind == DEF_INIT)
            cc_error(C, (cc_pos){0, 0}, TFVM_ERR_FORMAT, "initializer '%.80s' is defined twice", b->name);
        const Onnx__NodeProto *nd = g->node[b->index];
        char id[96];
        node_id(nd, b->index, id, sizeof id);
        cc_error(C, (cc_pos){0, 0}, TFVM_ERR_FORMAT,
                 "node %s (%s): output '%.80s' is already defined (by %s; a graph assigns each name once)", id,
                 nd->op_type ? nd->op_type : "?", b->name,
                 a->kind == DEF_INPUT ? "a graph input" : a->kind == DEF_INIT ? "an initializer" : "another node");
    }
}

void ox_graph_nodes(ox *X, const Onnx__GraphProto *g, cc_blk *b, ox_val **out)
{
    cc *C = X->C;
    if (++X->depth > 64)
        cc_error(C, (cc_pos){0, 0}, TFVM_ERR_UNSUPPORTED, "subgraphs nested more than 64 deep are not supported");
    check_single_assignment(C, g);
    for (size_t k = 0; k < g->n_initializer; k++) {
        const Onnx__TensorProto *t = g->initializer[k];
        if (!t || !t->name)
            cc_error(C, (cc_pos){0, 0}, TFVM_ERR_FORMAT, "initializer #%zu has no name", k);
        if (X->depth == 1 && ox_lookup(X, t->name))
            continue; /* the main graph's input of that name: the initializer is its default (build_model) */
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
        if (out[k]->seq)
            cc_error(C, (cc_pos){0, 0}, TFVM_ERR_UNSUPPORTED,
                     "graph output '%.80s' is a sequence (sequences are supported inside one graph)", name);
    }
    X->depth--;
}

/* ---- The model ------------------------------------------------------------------- */

typedef struct ox_build {
    ox X;
    const Onnx__ModelProto *m;
} ox_build;

static int cmp_init(const void *a, const void *b)
{
    return strcmp((*(const Onnx__TensorProto *const *)a)->name, (*(const Onnx__TensorProto *const *)b)->name);
}

/* The graph's named initializers, sorted by name (for find_initializer), *n
 * of them. */
static const Onnx__TensorProto **sorted_initializers(cc *C, const Onnx__GraphProto *g, size_t *n)
{
    const Onnx__TensorProto **inits = cc_array(C, g->n_initializer + 1, sizeof *inits);
    *n = 0;
    for (size_t k = 0; k < g->n_initializer; k++)
        if (g->initializer[k] && g->initializer[k]->name)
            inits[(*n)++] = g->initializer[k];
    qsort(inits, *n, sizeof *inits, cmp_init);
    return inits;
}

/* The initializer called name, or NULL. A binary search, not a scan per
 * input: an exporter that lists 50,000 weights as inputs too took 6.8 s of
 * strcmp. */
static const Onnx__TensorProto *find_initializer(const Onnx__TensorProto *const *inits, size_t n, const char *name)
{
    Onnx__TensorProto key; /* only its name is read */
    key.name = (char *)name;
    const Onnx__TensorProto *kp = &key, *const *hit = bsearch(&kp, inits, n, sizeof *inits, cmp_init);
    return hit ? *hit : NULL;
}

/* An initializer named like graph input k is the input's default (ONNX IR
 * version 4 and later, as ONNX Runtime has it: the caller may feed the input
 * or leave it out): its value as the parameter's default, which must fit the
 * input's declared type. */
static const cc_cval *input_default(ox *X, const Onnx__TensorProto *t, const ox_val *input, const char *name)
{
    ox_val v;
    cc_cval *c = cc_alloc(X->C, sizeof *c);
    c->nbytes = ox_tensor_value(X, t, &v);
    bool fits = v.dtype == input->dtype && (v.rank == 0) == (input->rank == 0) &&
                (input->rank < 0 || input->rank == v.rank); /* (a rank-0 input is a scalar parameter) */
    for (int k = 0; fits && input->rank > 0 && k < v.rank; k++)
        fits = input->dims[k] < 0 || input->dims[k] == v.dims[k]; /* (a symbolic dim is negative) */
    if (!fits)
        cc_error(X->C, (cc_pos){0, 0}, TFVM_ERR_FORMAT,
                 "graph input '%.80s': its initializer (%s, rank %d) does not fit the input's declared type "
                 "(%s, rank %d)", name, tfvm_dtype_name((tfvm_dtype)v.dtype), v.rank,
                 tfvm_dtype_name((tfvm_dtype)input->dtype), input->rank);
    c->dtype = v.dtype;
    c->rank = (uint8_t)v.rank;
    for (int k = 0; k < TFVM_MAX_RANK; k++)
        c->dims[k] = k < v.rank ? v.dims[k] : 0;
    c->data = v.cdata;
    return c;
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
    if (ox_value_info(X, vi, &d) && (d.store ? d.store : d.dtype) == got->dtype && d.rank > 0 &&
        (got->rank < 0 || got->rank == d.rank)) {
        r->type = ox_vtype(&d);
        r->type.dtype = got->dtype; /* a storage dtype as stored */
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

    check_ops(X, g);
    uint32_t np = 0;
    size_t n_inits;
    const Onnx__TensorProto **inits = sorted_initializers(C, g, &n_inits);
    const bool overridable = m->has_ir_version && m->ir_version >= 4;
    const Onnx__TensorProto **defaults = cc_array(C, g->n_input + 1, sizeof *defaults);
    const char **pn = cc_array(C, g->n_input + 1, sizeof *pn);
    cc_vtype *pt = cc_array(C, g->n_input + 1, sizeof *pt);
    ox_val *pv = cc_array(C, g->n_input + 1, sizeof *pv);
    for (size_t k = 0; k < g->n_input; k++) {
        const Onnx__ValueInfoProto *vi = g->input[k];
        if (!vi || !vi->name || !vi->name[0])
            cc_error(C, (cc_pos){0, 0}, TFVM_ERR_FORMAT, "graph input #%zu has no name", k);
        const Onnx__TensorProto *init = find_initializer(inits, n_inits, vi->name);
        if (init && (!overridable || ox_store_dtype(init->has_data_type ? init->data_type : 0)))
            continue; /* before IR 4 exporters list weights as inputs too: they stay constants (and f16
                         or other storage dtypes' defaults, which arrive widened, too) */
        defaults[np] = init;
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
        if (pv[np].store)
            pt[np].dtype = pv[np].store;
        np++;
    }
    uint32_t nr = (uint32_t)g->n_output;
    const char **rn = cc_array(C, nr + 1, sizeof *rn);
    cc_vtype *rt = cc_array(C, nr + 1, sizeof *rt);
    uint8_t *rs = cc_array(C, nr + 1, sizeof *rs);
    for (uint32_t k = 0; k < nr; k++) {
        const Onnx__ValueInfoProto *vi = g->output[k];
        rn[k] = vi && vi->name ? vi->name : "";
        ox_val v;
        if (!ox_value_info(X, vi, &v))
            v.dtype = TFVM_F32;
        rs[k] = v.store;
        rt[k] = ox_vtype(&v);
        if (v.store)
            rt[k].dtype = v.store;
    }
    cc_ifn *fn = cc_func_new(C, "main", np, pn, pt, nr, rn, rt);
    cc_blk *top = cc_fn_top(fn);
    ox_node edge = {.X = X, .C = C, .b = top, .id = "(graph)"}; /* the CASTs at the graph's edges */
    for (uint32_t k = 0; k < np; k++) {
        fn->src->params[k].dim_names = dim_names(X, &pv[k]);
        pv[k].v = cc_param_val(fn, k);
        if (pv[k].store) { /* arrives as stored, computes in its wide dtype */
            ox_val s = pv[k];
            s.dtype = s.store;
            pv[k] = ox_to_dtype(&edge, &s, pv[k].dtype);
            memcpy(pv[k].dims, s.dims, sizeof s.dims);
            pv[k].store = s.store;
        }
        if (defaults[k])
            fn->src->params[k].dflt = input_default(X, defaults[k], &pv[k], pn[k]);
        ox_bind(X, pn[k], &pv[k]);
    }
    ox_val **out = cc_array(C, nr + 1, sizeof *out);
    ox_graph_nodes(X, g, top, out);
    cc_irval *res = cc_array(C, nr + 1, sizeof *res);
    for (uint32_t k = 0; k < nr; k++) {
        if (rs[k] && out[k]->dtype != rs[k]) { /* leaves as stored */
            ox_val s = ox_to_dtype(&edge, out[k], rs[k]);
            out[k] = ox_new_val(C, &s);
        }
        res[k] = out[k]->v;
        result_type(X, g->output[k], out[k], &fn->src->results[k]);
    }
    cc_block_results(C, top, nr, res);
    return fn;
}

tfvm_status imp_onnx(const void *data, size_t len, const char *name, const char *dir, int opt_level,
                     const tfvm_allocator *a, isa_program *out, tfvm_error *err)
{
    return imp_onnx_release(data, len, (imp_release){0}, name, dir, opt_level, a, out, err);
}

tfvm_status imp_onnx_release(const void *data, size_t len, imp_release rel, const char *name, const char *dir,
                             int opt_level, const tfvm_allocator *a, isa_program *out, tfvm_error *err)
{
    tfvm_allocator al = a ? *a : (tfvm_allocator){0};
    imp_pb pb;
    imp_pb_init(&pb, &al);
    ProtobufCAllocator *pa = &pb.pa;
    isa_program_init(out, a);
    ut_err_clear(err);
    size_t at;
    const bool deep = !imp_pb_depth_ok(&onnx__model_proto__descriptor, data, len, &at);
    Onnx__ModelProto *m = deep ? NULL : onnx__model_proto__unpack(pa, len, data);
    if (rel.fn) /* (the unpacked message holds copies of all it keeps) */
        rel.fn(rel.ctx);
    if (deep)
        return ut_err(err, TFVM_ERR_FORMAT, "%s: bad .onnx file (messages nested deeper than %d at byte %zu)", name,
                      IMP_PB_MAX_DEPTH, at);
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
