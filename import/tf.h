/* import/tf.h — shared by the TensorFlow importer's files: the graph model
 * (a GraphDef or a FunctionDef body with its inputs resolved), one emission
 * instance of such a graph into IR blocks, and the op converters (tf_ops.c). */
#ifndef TFVM_IMPORT_TF_H
#define TFVM_IMPORT_TF_H

#include "compiler/build.h"
#include "tf.pb-c.h"

typedef TfvmTf__NodeDef tf_nodedef;
typedef TfvmTf__AttrValue tf_attr;

/* A value: output k of node `node`, or (node < 0) argument -1 - node of a
 * function (a Placeholder of the main graph is a node). */
typedef struct imp_tf_ref {
    int32_t node;
    uint32_t k;
} imp_tf_ref;

typedef struct imp_tf_node {
    const tf_nodedef *def;
    const char *name, *op;
    uint32_t n_in, n_ctl;
    imp_tf_ref *in;      /* data inputs */
    uint32_t *ctl;       /* control inputs (^name): nodes */
    uint32_t n_out;
} imp_tf_node;

typedef struct imp_tf_graph {
    const char *what;    /* "graph" or "function 'f'" for messages */
    uint32_t n_nodes, n_args;
    imp_tf_node *nodes;
    const char **arg_names;
    tfvm_dtype *arg_types;
    uint32_t n_rets;
    imp_tf_ref *rets;     /* a function's results, in signature order */
    const char **ret_names;
    tfvm_dtype *ret_types;
} imp_tf_graph;

typedef struct imp_tf_st imp_tf_st; /* the importer (tf.c) */
typedef struct imp_tf_inst imp_tf_inst;

/* What an op converter sees: the node, its inputs' values, the block. */
typedef struct imp_tf_opctx {
    imp_tf_st *T;
    cc *C;
    imp_tf_inst *I;
    const imp_tf_node *n;
    cc_blk *b;
    cc_irval *in;        /* n->n_in values */
    cc_irval *out;       /* n->n_out values to fill */
} imp_tf_opctx;

/* tf.c, for tf_ops.c */
_Noreturn void imp_tf_error(cc *C, tfvm_status code, const char *fmt, ...) UT_PRINTF(3, 4);
_Noreturn void imp_tf_fail(imp_tf_opctx *X, const char *fmt, ...) UT_PRINTF(2, 3);
const tf_attr *imp_tf_attr(const tf_nodedef *d, const char *key);
tfvm_dtype imp_tf_dtype(int dt); /* 0 when tfvm has none */
cc_irval imp_tf_tensor(imp_tf_opctx *X, const TfvmTf__TensorProto *t);
cc_ifn *imp_tf_function(imp_tf_st *T, const char *name, const imp_tf_node *caller);
/* Inlines function `name` into block b with the given arguments; fills
 * outs[0 .. n_out-1] with its results (their count must be n_out). */
void imp_tf_inline(imp_tf_opctx *X, const char *name, cc_blk *b, const cc_irval *args, uint32_t n_args,
                   cc_irval *outs, uint32_t n_out);
/* The graph's function library: is `name` a function; its output count;
 * the index of its output `arg` (FunctionDef "node:arg:idx"), -1 if none. */
bool imp_tf_is_function(imp_tf_st *T, const char *name);
uint32_t imp_tf_function_n_outputs(imp_tf_st *T, const char *fname);
int imp_tf_function_output(imp_tf_st *T, const char *fname, const char *arg, size_t len, uint32_t idx);
/* Does function fname return its argument k unchanged (through Identity)?
 * A While body that does passes a loop invariant. */
bool imp_tf_passes_through(imp_tf_st *T, const char *fname, uint32_t k);
/* Is variable k of a While with these functions a counter nothing reads:
 * unused by cond, and in body only `k + constant` (through Identity) as its
 * own next value? (tf.while_loop's loop_counter.) */
bool imp_tf_dead_counter(imp_tf_st *T, const char *cond, const char *body, uint32_t k);
/* Does anything in X's graph (or its results) read output k of X's node? */
bool imp_tf_output_used(const imp_tf_opctx *X, uint32_t k);
/* "graph" or "function 'f'": where X's node is. */
const char *imp_tf_where(const imp_tf_opctx *X);

/* tf_ops.c: converts one ordinary node (not control flow). */
void imp_tf_convert(imp_tf_opctx *X);
/* The number of outputs of a node, and output k's index for a FunctionDef
 * reference "node:arg:idx" (-1 when the op has no such output). */
uint32_t imp_tf_n_outputs(imp_tf_st *T, const tf_nodedef *d);
int imp_tf_output_index(imp_tf_st *T, const tf_nodedef *d, const char *arg, size_t arg_len, uint32_t idx);
/* The dtype of output k as the node's attributes say (0 when they do not). */
tfvm_dtype imp_tf_out_dtype(const tf_nodedef *d, uint32_t k);

/* What a SavedModel signature (import/tf_saved.c) asks of its graph: the
 * Placeholders it feeds ("x:0") and the tensors it fetches, in order, with
 * the names the parameters and results take; and the variables' values by
 * the VarHandleOp node that holds each. */
typedef struct imp_tf_sig {
    uint32_t n_in, n_out, n_vars;
    const char **in_tensors, **in_names;
    const char **out_tensors, **out_names;
    const char **var_nodes;
    const TfvmTf__TensorProto **var_values;
} imp_tf_sig;

/* A parsed GraphDef into a program (imp_tf's work): sig NULL for a plain
 * frozen graph (then `outputs` as for imp_tf). Notes (Placeholders left
 * out) go to cfg->log at TFVM_LOG_WARN when the import succeeds. */
tfvm_status imp_tf_graph_def(const TfvmTf__GraphDef *gd, const char *name, const char *outputs, const imp_tf_sig *sig,
                             int opt_level, const tfvm_config *cfg, const tfvm_allocator *a, isa_program *out,
                             tfvm_error *err);
/* tf_saved.c: do these bytes parse as a SavedModel (a saved_model.pb)? */
bool imp_tf_is_saved_model(const void *data, size_t len);
/* The value of the variable VarHandleOp node `name` holds (a SavedModel's),
 * or NULL. */
const TfvmTf__TensorProto *imp_tf_variable(imp_tf_st *T, const char *name);

#endif
