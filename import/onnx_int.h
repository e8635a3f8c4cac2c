/* import/onnx_int.h — what the ONNX importer's files share: the values of a
 * graph as the importer knows them (IR value, dtype, what is known of the
 * shape, the elements of a constant), the scoped name table, and one node
 * being translated. */
#ifndef TFVM_IMPORT_ONNX_INT_H
#define TFVM_IMPORT_ONNX_INT_H

#include "compiler/build.h"
#include "compiler/decomp.h"
#include "compiler/shape.h"
#include "onnx.pb-c.h"

#define OX_MAX_IO 64          /* entries of the per-input/output attributes we read (Scan's axes, Split's sizes) */
#define OX_MAX_OPSET 27       /* the newest default-domain opset accepted */
#define OX_MAX_SYMS 64        /* named dims kept as symbols; later names are unknown dims */

/* A value: rank -1 = unknown; dims[k] as compiler/shape.h writes them (-1
 * unknown, <= -2 a symbol such as `batch`). cdata: the elements of a
 * constant (C order, the dtype's little-endian layout), else NULL. dv: what
 * is known of the elements of a small integer value computed from shapes
 * (onnx_fold.c), else NULL; a handler that makes a new value from a copy
 * clears both. */
struct ox_seq;

typedef struct ox_val {
    cc_irval v;            /* none for a sequence */
    uint8_t dtype;
    uint8_t store; /* the ONNX element type's storage dtype where it is not dtype
                      (ox_store_dtype: a u16 computed in i32), else 0 */
    int8_t rank;
    int64_t dims[TFVM_MAX_RANK];
    const void *cdata;
    const cc_dimvec *dv;
    const struct ox_seq *seq; /* an ONNX sequence (onnx_list.c): its elements, else NULL */
} ox_val;

/* A sequence the importer holds: n tensors of one dtype */
typedef struct ox_seq {
    uint32_t n;
    uint8_t dtype;
    ox_val **items;
} ox_seq;

typedef struct ox_ent {
    const char *name;
    ox_val *val;
    struct ox_ent *chain;  /* next in the bucket */
    struct ox_ent *below;  /* the scope stack */
    uint32_t bucket;
} ox_ent;

#define OX_BUCKETS 4096u

typedef struct ox {
    cc *C;
    const char *dir;
    int64_t opset;
    ox_ent *buckets[OX_BUCKETS];
    ox_ent *top;
    uint32_t n_loops;
    uint32_t depth;         /* subgraph nesting (a guard against hostile depth) */
    /* the symbolic dims (compiler/shape.h) of the graph's inputs and
     * outputs: their dim_param names (`batch`, NULL for a dim without
     * one), in first-seen order */
    const char *syms[OX_MAX_SYMS];
    uint32_t n_syms;
    struct ox_done *done;   /* nodes an earlier node's translation made (onnx_rnn.c) */
} ox;

struct ox_node;

/* A node whose translation an earlier node arranged (stacked recurrent
 * layers, onnx_rnn.c): at its turn make(N, ctx) translates it instead of
 * its handler, or (make NULL) its outputs are bound to out */
typedef struct ox_done {
    const Onnx__NodeProto *n;
    ox_val out[3];
    void (*make)(struct ox_node *N, void *ctx);
    void *ctx;
    struct ox_done *next;
} ox_done;

/* One node being translated: in[k] NULL = absent (""). Handlers set out[k]
 * for every output the node lists (n_out). */
typedef struct ox_node {
    ox *X;
    cc *C;
    cc_blk *b;
    const Onnx__NodeProto *n;
    const Onnx__GraphProto *g; /* the graph that holds n, as its node #index */
    size_t index;
    char id[96];            /* 'name' or #index, for messages */
    uint32_t n_in, n_out;
    ox_val **in;            /* n_in entries */
    ox_val *out;            /* n_out entries */
    cc_dimvec *dv;          /* what onnx_fold.c knows of out[0]'s elements, or NULL */
} ox_node;

/* onnx.c */
uint8_t ox_store_dtype(int32_t onnx_type); /* TFVM_F16 for FLOAT16...; 0: ox_dtype's own */
ox_val ox_narrow(ox_node *N, const ox_val *x, uint8_t store);
_Noreturn void ox_fail(ox_node *N, tfvm_status code, const char *fmt, ...) UT_PRINTF(3, 4);
_Noreturn void ox_unsupported(ox_node *N, const char *what, ...) UT_PRINTF(2, 3);
ox_val *ox_lookup(ox *X, const char *name);
/* node #index of g as its handler sees it, its inputs as far as they are
 * defined by now (NULL: absent or not yet) */
ox_node *ox_node_at(ox *X, const Onnx__GraphProto *g, size_t index, cc_blk *b);
void ox_bind(ox *X, const char *name, ox_val *v);
ox_val *ox_new_val(cc *C, const ox_val *v);
void ox_scope_pop(ox *X, ox_ent *mark);
/* Builds graph g's nodes into block b (its inputs already bound); the
 * values of its outputs into out[0..n_output-1]. */
void ox_graph_nodes(ox *X, const Onnx__GraphProto *g, cc_blk *b, ox_val **out);
cc_vtype ox_vtype(const ox_val *v);
bool ox_dtype(int32_t onnx_type, uint8_t *dtype);
const char *ox_onnx_type_name(int32_t t);
/* A value's type from a ValueInfoProto (dtype and shape, a named dim as
 * X's symbol of that name; X NULL: unknown); false if not a tensor. */
bool ox_value_info(ox *X, const Onnx__ValueInfoProto *vi, ox_val *v);

/* onnx_tensor.c: a TensorProto as a constant value in block b (external
 * data read relative to X->dir). */
void ox_tensor_const(ox *X, ox_node *N, cc_blk *b, const Onnx__TensorProto *t, ox_val *out);
/* A TensorProto's value without making a constant: out's dtype, rank, dims
 * and cdata; returns its bytes. */
size_t ox_tensor_value(ox *X, const Onnx__TensorProto *t, ox_val *out);

/* onnx_ops.c (the ops of issue 10) and onnx_extra.c (the long tail): one
 * row per op type, its first opset and its translation */
typedef void (*ox_handler)(ox_node *N);
typedef struct ox_opdef {
    const char *name;
    int64_t since;
    ox_handler h;
} ox_opdef;
extern const ox_opdef ox_extra_ops[];
extern const size_t ox_n_extra_ops;
extern const ox_opdef ox_bits_ops[];  /* onnx_bits.c: bitwise ops, BitCast, NonZero, Compress, Unique, Det */
extern const size_t ox_n_bits_ops;
void ox_bn_training(ox_node *N);      /* onnx_bits.c: BatchNormalization's training mode */
void ox_maxpool_indices(ox_node *N);  /* onnx_bits.c: MaxPool with its Indices output */
bool ox_einsum_diag(ox_node *N, const char *eq); /* onnx_bits.c: Einsum '...ii->...i' */
void ox_unblock(ox_node *N);          /* onnx_bits.c: blocked (De)QuantizeLinear's scale, zero point per element */
void ox_dropout_training(ox_node *N); /* onnx_bits.c: Dropout with a training_mode input */
void ox_convtranspose3d(ox_node *N);  /* onnx_bits.c: ConvTranspose with 3 spatial dims */
/* onnx_bits.c: Conv with 3 spatial dims (strides s, pads pb/pe, dilations d) */
ox_val ox_conv3d(ox_node *N, const ox_val *x, const ox_val *w, const ox_val *bias, const int64_t *s, const int64_t *pb,
                 const int64_t *pe, const int64_t *d, int64_t group);
/* onnx_bits.c: ops of domains ai.onnx.preview.training and ai.onnx.ml, NULL if none */
ox_handler ox_find_domain_op(const char *domain, const char *op_type);
extern const ox_opdef ox_rnn_ops[];   /* onnx_rnn.c: RNN, GRU, LSTM */
extern const size_t ox_n_rnn_ops;
extern const ox_opdef ox_seq_ops[];   /* onnx_seq.c: LinearAttention, CausalConvWithState, DFT, STFT */
extern const size_t ox_n_seq_ops;
extern const ox_opdef ox_list_ops[];  /* onnx_list.c: SequenceConstruct, SequenceAt, ... */
extern const size_t ox_n_list_ops;
bool ox_is_list_op(const char *op_type); /* takes sequences (onnx_list.c's ops and Identity) */
ox_handler ox_find_preview_op(const char *op_type); /* domain ai.onnx.preview: FlexAttention */
ox_handler ox_find_op(const char *op_type, int64_t opset, int64_t *min_opset);
bool ox_op_supported(const char *op_type);

/* Attributes */
const Onnx__AttributeProto *ox_attr(const ox_node *N, const char *name);
int64_t ox_attr_i(const ox_node *N, const char *name, int64_t def);
float ox_attr_f(const ox_node *N, const char *name, float def);
/* a string attribute into buf (def when absent) */
const char *ox_attr_s(const ox_node *N, const char *name, const char *def, char *buf, size_t size);
/* an ints attribute: count (-1 when absent), up to max into out */
int ox_attr_ints(const ox_node *N, const char *name, int64_t *out, int max);

/* Building blocks (onnx_ops.c). ox_op: an instruction on the operands'
 * values, its result's dtype and shape what the instruction's rules say
 * (isa/ops.def, isa/shape.h: symbolic dims included). */
ox_val ox_op(ox_node *N, isa_op op, uint32_t attr, uint32_t n, const ox_val *const *in);
ox_val ox_op1(ox_node *N, isa_op op, uint32_t attr, const ox_val *a);
ox_val ox_op2(ox_node *N, isa_op op, uint32_t attr, const ox_val *a, const ox_val *b);
ox_val ox_op3(ox_node *N, isa_op op, uint32_t attr, const ox_val *a, const ox_val *b, const ox_val *c);
/* ox_op where the caller knows the result's rank and the shape rule cannot:
 * an instruction without one (NONZERO, UNIQUE and UNIQUE_INDEX, NMS,
 * RESIZE2, GRID_SAMPLE, AFFINE_GRID, COL2IM, ROI_ALIGN, DEFORM_CONV), or
 * operands the rule cannot see through (a Reshape target rebuilt at run
 * time, Squeeze's run-time axes). */
ox_val ox_op_rank(ox_node *N, isa_op op, uint32_t attr, uint32_t n, const ox_val *const *in, int rank);
ox_val ox_i64s(ox_node *N, int n, const int64_t *v);
ox_val ox_scalar(ox_node *N, uint8_t dtype, double f, int64_t i);
/* the elements of a constant integer value (i32/i64), or -1 when not constant */
int ox_const_ints(const ox_val *v, int64_t *out, int max);
ox_val ox_shape_of(ox_node *N, const ox_val *x);
/* row d of compiler/decomp.h on x, parameters p (NULL: the row's defaults): x's shape */
ox_val ox_decompose(ox_node *N, cc_decomp d, const ox_val *x, const double *p);
void ox_unknown_shape(ox_val *v, int rank);
ox_val ox_empty_vec(ox_node *N, uint8_t dtype);
ox_val ox_fscalar(ox_node *N, uint8_t dtype, double f);
int64_t ox_count_of(const ox_val *v);                   /* elements, -1 when not known */
ox_val ox_as_i64_scalar(ox_node *N, const ox_val *v);   /* from any integer scalar or [1] */
ox_val ox_as_i64_vec(ox_node *N, const ox_val *v);
ox_val *ox_need(ox_node *N, uint32_t k);                 /* input k, or a FORMAT error */
ox_val *ox_opt_in(ox_node *N, uint32_t k);               /* input k or NULL */
int ox_norm_axis(ox_node *N, int64_t axis, int rank, bool allow_end);
int ox_need_rank(ox_node *N, const ox_val *x);           /* or UNSUPPORTED */
/* elementwise with NumPy broadcasting: ox_op2, whose shape rule broadcasts */
ox_val ox_ew2(ox_node *N, isa_op op, const ox_val *a, const ox_val *b);
ox_val ox_where(ox_node *N, const ox_val *c, const ox_val *a, const ox_val *b); /* SELECT, shapes broadcast */
/* A While made in N->b whose head is lv[0] < bound (lv[0] an i64 counter):
 * its variables' initial values, types and names, their values inside the
 * loop into lv[k].v; N->b is then its body, *outer the block it is in */
cc_node *ox_count_loop(ox_node *N, uint32_t nvar, const cc_irval *init, const cc_vtype *types,
                       const char *const *names, const char *label, const ox_val *bound, ox_val *lv, cc_blk **outer);
ox_val ox_ew1(ox_node *N, isa_op op, const ox_val *a);
ox_val ox_to_dtype(ox_node *N, const ox_val *v, uint8_t want);
ox_val ox_spread_axes(ox_node *N, const ox_val *v, const ox_val *axes, int r, uint8_t dtype);
/* Resize's scales and sizes (an empty input counts as absent) as RESIZE takes
 * them, f32 scales and i64 sizes; with axes (not NULL, x of rank r) the
 * listed axes' values spread over all r, the other axes keeping their size. */
void ox_resize_targets(ox_node *N, const ox_val *x, const ox_val *scales, const ox_val *sizes, const ox_val *axes_v,
                       int r, ox_val *sc, ox_val *sz);
ox_val ox_spatial_axes(ox_node *N, int r);               /* [2, ..., r-1] */
ox_val ox_per_channel(ox_node *N, const ox_val *v, int r); /* [C] as [C, 1, ...] */
/* (x - mean) / sqrt(var + eps) over axes (keepdims); the mean and 1/sqrt(var + eps) */
ox_val ox_normalize(ox_node *N, const ox_val *x, const ox_val *axes, double epsilon, ox_val *mean_out,
                    ox_val *inv_out);

/* onnx_fold.c: a node of small integer constants (shape arithmetic)
 * computed now; false when it is not one (then N->dv says what is known of
 * its result, if anything, and ox_keep_facts gives it to out[0] once the
 * handler made it). The element facts of a value (dims of `x` when x is a
 * dimension vector) are in v->dv or, for a constant, in its elements. */
bool ox_try_fold(ox_node *N);
void ox_keep_facts(ox_node *N);
/* what is known of the elements of v (a constant or v->dv), false if nothing */
bool ox_dims_of(const ox_val *v, cc_dimvec *out);

/* onnx_image.c: Resize in RESIZE2's modes; false when RESIZE does it */
bool ox_resize2(ox_node *N);
extern const ox_opdef ox_image_ops[]; /* onnx_image.c: GridSample, ... */
extern const size_t ox_n_image_ops;

/* onnx_flow.c */
void ox_op_if(ox_node *N);
void ox_op_loop(ox_node *N);
void ox_op_scan(ox_node *N);

#endif
