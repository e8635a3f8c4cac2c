/* import/tf_saved.c — a TensorFlow SavedModel directory (tf.saved_model.save)
 * to a program: saved_model.pb's MetaGraphDef holds a GraphDef whose
 * signature call (StatefulPartitionedCall) takes the Placeholders and the
 * variables' resource handles (VarHandleOp); the variables' values are in
 * the TensorBundle variables/variables. Which checkpoint key a handle holds
 * is said by the saved object graph: the call's function captures its
 * handles as bound_inputs, object graph node ids, and the checkpoint's own
 * object graph (the bundle's _CHECKPOINTABLE_OBJECT_GRAPH, with the same
 * ids) names each variable's key. The graph then imports as a frozen one,
 * each handle its variable's value (docs/tensorflow.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/import.h"
#include "import/tf.h"
#include "import/tf_bundle.h"

#define DEFAULT_SIGNATURE "serving_default"

bool imp_tf_is_saved_model(const void *data, size_t len)
{
    imp_pb pb;
    imp_pb_init(&pb, NULL);
    size_t at;
    if (!imp_pb_depth_ok(&tfvm_tf__saved_model__descriptor, data, len, &at))
        return false;
    TfvmTf__SavedModel *sm = tfvm_tf__saved_model__unpack(&pb.pa, len, data);
    bool yes = sm && sm->n_meta_graphs > 0 && sm->meta_graphs[0]->graph_def;
    if (sm)
        tfvm_tf__saved_model__free_unpacked(sm, &pb.pa);
    return yes;
}

/* Everything one import holds, released by sm_release. */
typedef struct sm_state {
    const tfvm_allocator *a;
    const char *dir;
    ut_arena ar;
    imp_pb pb;
    char *bytes;          /* saved_model.pb */
    size_t len;
    TfvmTf__SavedModel *sm;
    TfvmTf__TrackableObjectGraph *objects;
    bool have_bundle;
    imp_bundle bundle;
    imp_tf_sig sig;
} sm_state;

static void sm_release(sm_state *S)
{
    if (S->objects)
        tfvm_tf__trackable_object_graph__free_unpacked(S->objects, &S->pb.pa);
    if (S->sm)
        tfvm_tf__saved_model__free_unpacked(S->sm, &S->pb.pa);
    if (S->bytes)
        ut_free(S->a, S->bytes, S->len + 1);
    if (S->have_bundle)
        imp_bundle_close(&S->bundle);
    ut_arena_free(&S->ar);
}

static tfvm_status nomem(sm_state *S, tfvm_error *err) { return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory", S->dir); }

static int by_key(const void *a, const void *b)
{
    return strcmp((*(TfvmTf__TensorInfoEntry *const *)a)->key, (*(TfvmTf__TensorInfoEntry *const *)b)->key);
}

/* The tensors of a signature's inputs or outputs, in key order, named by key. */
static tfvm_status sig_side(sm_state *S, TfvmTf__TensorInfoEntry **ents, size_t n, const char ***tensors,
                            const char ***names, tfvm_error *err)
{
    TfvmTf__TensorInfoEntry **sorted = ut_arena_array(&S->ar, n + 1, sizeof *sorted);
    *tensors = ut_arena_array(&S->ar, n + 1, sizeof **tensors);
    *names = ut_arena_array(&S->ar, n + 1, sizeof **names);
    if (!sorted || !*tensors || !*names)
        return nomem(S, err);
    if (n)
        memcpy(sorted, ents, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_key);
    for (size_t k = 0; k < n; k++) {
        if (!sorted[k]->value || !sorted[k]->value->name[0])
            return ut_err(err, TFVM_ERR_UNSUPPORTED, "%s: signature tensor '%s' is not a plain tensor", S->dir,
                          sorted[k]->key);
        (*tensors)[k] = sorted[k]->value->name;
        (*names)[k] = sorted[k]->key;
    }
    return TFVM_OK;
}

/* The meta graph that has signature `name` and the signature, or an error
 * listing the signatures there are. */
static tfvm_status find_signature(sm_state *S, const char *name, TfvmTf__MetaGraphDef **mg,
                                  TfvmTf__SignatureDef **sd, tfvm_error *err)
{
    char have[256] = "";
    size_t at = 0;
    for (size_t i = 0; i < S->sm->n_meta_graphs; i++) {
        TfvmTf__MetaGraphDef *m = S->sm->meta_graphs[i];
        for (size_t j = 0; j < m->n_signature_def; j++) {
            const char *key = m->signature_def[j]->key;
            if (strcmp(key, name) == 0 && m->signature_def[j]->value && m->graph_def) {
                *mg = m;
                *sd = m->signature_def[j]->value;
                return TFVM_OK;
            }
            if (key[0] != '_' && at < sizeof have)
                at += (size_t)snprintf(have + at, sizeof have - at, "%s%s", at ? ", " : "", key);
        }
    }
    return ut_err(err, TFVM_ERR_ARGUMENT, "%s: no signature '%s' (the SavedModel has: %s)", S->dir, name,
                  at ? have : "none");
}

static const TfvmTf__NodeDef *node_named(const TfvmTf__GraphDef *gd, const char *name, size_t len)
{
    for (size_t i = 0; i < gd->n_node; i++)
        if (strlen(gd->node[i]->name) == len && memcmp(gd->node[i]->name, name, len) == 0)
            return gd->node[i];
    return NULL;
}

static const TfvmTf__SavedConcreteFunction *concrete(const TfvmTf__MetaGraphDef *mg, const char *fname)
{
    const TfvmTf__SavedObjectGraph *og = mg->object_graph_def;
    for (size_t i = 0; og && i < og->n_concrete_functions; i++)
        if (strcmp(og->concrete_functions[i]->key, fname) == 0)
            return og->concrete_functions[i]->value;
    return NULL;
}

/* The checkpoint key of object graph node id (its VARIABLE_VALUE), or NULL. */
static const char *checkpoint_key(const sm_state *S, int32_t id)
{
    if (!S->objects || id < 0 || (size_t)id >= S->objects->n_nodes)
        return NULL;
    const TfvmTf__TrackableObjectGraph__TrackableObject *o = S->objects->nodes[id];
    for (size_t k = 0; k < o->n_attributes; k++)
        if (strcmp(o->attributes[k]->name, "VARIABLE_VALUE") == 0)
            return o->attributes[k]->checkpoint_key;
    return NULL;
}

/* Opens the bundle and its object graph, once. */
static tfvm_status open_bundle(sm_state *S, tfvm_error *err)
{
    if (S->have_bundle)
        return TFVM_OK;
    char prefix[1024];
    snprintf(prefix, sizeof prefix, "%s/variables/variables", S->dir);
    tfvm_status st = imp_bundle_open(&S->bundle, prefix, S->a, err);
    if (st != TFVM_OK)
        return st;
    S->have_bundle = true;
    const uint8_t *og;
    size_t len;
    st = imp_bundle_string(&S->bundle, "_CHECKPOINTABLE_OBJECT_GRAPH", &og, &len, err);
    if (st != TFVM_OK)
        return st;
    S->objects = tfvm_tf__trackable_object_graph__unpack(&S->pb.pa, len, og);
    if (!S->objects)
        return S->pb.failed ? nomem(S, err)
                            : ut_err(err, TFVM_ERR_FORMAT, "%s: the checkpoint's object graph does not parse", prefix);
    return TFVM_OK;
}

/* Adds VarHandleOp node `name` (len bytes) with the value of object id. */
static tfvm_status add_variable(sm_state *S, const char *name, size_t len, int32_t id, tfvm_error *err)
{
    imp_tf_sig *g = &S->sig;
    for (uint32_t k = 0; k < g->n_vars; k++)
        if (strlen(g->var_nodes[k]) == len && memcmp(g->var_nodes[k], name, len) == 0)
            return TFVM_OK;
    const char *key = checkpoint_key(S, id);
    if (!key)
        return ut_err(err, TFVM_ERR_FORMAT, "%s: variable '%.*s' has no value in the checkpoint", S->dir, (int)len,
                      name);
    imp_bundle_tensor t;
    tfvm_status st = imp_bundle_get(&S->bundle, key, &t, err);
    if (st != TFVM_OK)
        return st;
    TfvmTf__TensorProto *v = ut_arena_alloc(&S->ar, sizeof *v);
    const char **nodes = ut_arena_array(&S->ar, g->n_vars + 1, sizeof *nodes);
    const TfvmTf__TensorProto **vals = ut_arena_array(&S->ar, g->n_vars + 1, sizeof *vals);
    char *nm = ut_arena_strndup(&S->ar, name, len);
    if (!v || !nodes || !vals || !nm)
        return nomem(S, err);
    tfvm_tf__tensor_proto__init(v);
    v->dtype = t.dtype;
    v->tensor_shape = (TfvmTf__TensorShapeProto *)t.shape;
    v->tensor_content.data = (uint8_t *)t.data;
    v->tensor_content.len = t.size;
    if (g->n_vars) {
        memcpy(nodes, g->var_nodes, g->n_vars * sizeof *nodes);
        memcpy(vals, g->var_values, g->n_vars * sizeof *vals);
    }
    nodes[g->n_vars] = nm;
    vals[g->n_vars] = v;
    g->var_nodes = nodes;
    g->var_values = vals;
    g->n_vars++;
    return TFVM_OK;
}

/* The variables every call of the main graph captures: its last
 * len(bound_inputs) data inputs, when they are VarHandleOps. */
static tfvm_status collect_variables(sm_state *S, const TfvmTf__MetaGraphDef *mg, tfvm_error *err)
{
    const TfvmTf__GraphDef *gd = mg->graph_def;
    for (size_t i = 0; i < gd->n_node; i++) {
        const TfvmTf__NodeDef *n = gd->node[i];
        const tf_attr *f = imp_tf_attr(n, "f");
        if (!f || f->value_case != TFVM_TF__ATTR_VALUE__VALUE_FUNC || !f->func->name)
            continue;
        const TfvmTf__SavedConcreteFunction *cf = concrete(mg, f->func->name);
        size_t n_data = 0;
        while (n_data < n->n_input && n->input[n_data][0] != '^')
            n_data++;
        if (!cf || !cf->n_bound_inputs || cf->n_bound_inputs > n_data)
            continue;
        for (size_t j = 0; j < cf->n_bound_inputs; j++) {
            const char *in = n->input[n_data - cf->n_bound_inputs + j];
            const char *colon = strchr(in, ':');
            size_t len = colon ? (size_t)(colon - in) : strlen(in);
            const TfvmTf__NodeDef *h = node_named(gd, in, len);
            if (!h || strcmp(h->op, "VarHandleOp") != 0)
                continue;
            tfvm_status st = open_bundle(S, err);
            if (st == TFVM_OK)
                st = add_variable(S, in, len, cf->bound_inputs[j], err);
            if (st != TFVM_OK)
                return st;
        }
    }
    return TFVM_OK;
}

static tfvm_status read_saved_model(sm_state *S, tfvm_error *err)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/saved_model.pb", S->dir);
    tfvm_status st = ut_read_file(path, S->a, &S->bytes, &S->len, err);
    if (st != TFVM_OK)
        return st == TFVM_ERR_IO ? ut_err(err, TFVM_ERR_IO, "%s: not a SavedModel directory (no saved_model.pb)",
                                          S->dir)
                                 : st;
    size_t at;
    if (!imp_pb_depth_ok(&tfvm_tf__saved_model__descriptor, S->bytes, S->len, &at))
        return ut_err(err, TFVM_ERR_FORMAT, "%s: bad SavedModel (messages nested deeper than %d at byte %zu)", path,
                      IMP_PB_MAX_DEPTH, at);
    S->sm = tfvm_tf__saved_model__unpack(&S->pb.pa, S->len, (const uint8_t *)S->bytes);
    if (!S->sm)
        return S->pb.failed ? nomem(S, err)
                            : ut_err(err, TFVM_ERR_FORMAT, "%s: not a SavedModel (protobuf parse failed)", path);
    return TFVM_OK;
}

tfvm_status imp_saved_model(const char *dir, const char *signature, int opt_level, const tfvm_config *cfg,
                            const tfvm_allocator *a, isa_program *out, tfvm_error *err)
{
    sm_state S = {.a = a, .dir = dir};
    ut_arena_init(&S.ar, a);
    imp_pb_init(&S.pb, a);
    TfvmTf__MetaGraphDef *mg = NULL;
    TfvmTf__SignatureDef *sd = NULL;
    tfvm_status st = read_saved_model(&S, err);
    if (st == TFVM_OK)
        st = find_signature(&S, signature ? signature : DEFAULT_SIGNATURE, &mg, &sd, err);
    if (st == TFVM_OK)
        st = sig_side(&S, sd->inputs, sd->n_inputs, &S.sig.in_tensors, &S.sig.in_names, err);
    if (st == TFVM_OK)
        st = sig_side(&S, sd->outputs, sd->n_outputs, &S.sig.out_tensors, &S.sig.out_names, err);
    if (st == TFVM_OK)
        st = collect_variables(&S, mg, err);
    if (st == TFVM_OK) {
        S.sig.n_in = (uint32_t)sd->n_inputs;
        S.sig.n_out = (uint32_t)sd->n_outputs;
        st = imp_tf_graph_def(mg->graph_def, dir, NULL, &S.sig, opt_level, cfg, a, out, err);
    } else {
        isa_program_init(out, a);
    }
    sm_release(&S);
    return st;
}
