/* isa/isa.h — the instruction set (generated from ops.def) and the in-memory
 * program model that the loader builds, the verifier checks and the VM runs.
 * docs/isa.md is the authoritative description of what each op does. */
#ifndef TFVM_ISA_H
#define TFVM_ISA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfvm.h"
#include "util/util.h"

typedef enum isa_op {
#define OP(name, cls, in, out, attrs, types, res, fails, cuda, syn) ISA_##name,
#include "ops.def"
#undef OP
    ISA_OP_COUNT
} isa_op;

/* What each comparison instruction computes, one row each: X(short name,
 * opcode, C operator). The one definition of a scalar comparison: the CPU
 * kernels' scalar path, the VM's scalar fast paths, both engines' BRANCH and
 * the sequential frames' comparison steps (vm/vm.h, VM_SOP_CMPS) are made
 * from it. */
#define ISA_COMPARISONS(X) ISA_COMPARISONS_WITH(ISA_COMPARISON_DROP_, X, )
/* The same rows with two more arguments passed to each: X(N, OP, C, A, B)
 * (the CPU kernels make one kernel per row and dtype from it). */
#define ISA_COMPARISONS_WITH(X, A, B)                                                                    \
    X(LT, ISA_LESS, <, A, B) X(LE, ISA_LESS_EQUAL, <=, A, B) X(GT, ISA_GREATER, >, A, B)               \
    X(GE, ISA_GREATER_EQUAL, >=, A, B) X(EQ, ISA_EQUAL, ==, A, B) X(NE, ISA_NOT_EQUAL, !=, A, B)
#define ISA_COMPARISON_DROP_(N, OP, C, X, UNUSED) X(N, OP, C)
/* isa_compare_S(op, x, y): comparison op on two scalars of C type T (false
 * for an op that is not a comparison); with a constant op, one compare. */
#define ISA_COMPARE_CASE(N, OP, C) case OP: return x C y;
#define ISA_COMPARE_FN(S, T)                                                                             \
    static inline bool isa_compare_##S(uint16_t op, T x, T y)                                           \
    {                                                                                                    \
        switch (op) {                                                                                    \
            ISA_COMPARISONS(ISA_COMPARE_CASE)                                                            \
        default: return false;                                                                           \
        }                                                                                                \
    }
ISA_COMPARE_FN(b, bool)
ISA_COMPARE_FN(i32, int32_t)
ISA_COMPARE_FN(i64, int64_t)
ISA_COMPARE_FN(f32, float)
ISA_COMPARE_FN(f64, double)
#undef ISA_COMPARE_FN
#undef ISA_COMPARE_CASE
/* ISA_COMPARISONS(ISA_COMPARISON_LABEL): a case label for every comparison. */
#define ISA_COMPARISON_LABEL(N, OP, C) case OP:

/* What each integer arithmetic instruction computes on two signed integers
 * x and y of type T (U: its unsigned twin), one row each: X(short name,
 * opcode, E), E(T, U, x, y) the expression. Overflow wraps (computed in U,
 * converted back: modular on every compiler tfvm supports); DIV and MOD by
 * -1 are spelled out, since INT_MIN / -1 traps on x86; a division by zero
 * is the caller's to refuse first. The one definition of scalar integer
 * arithmetic: the CPU kernels (tensor and scalar), the VM's scalar fast path
 * (vm_scalar_op) and the sequential frames' steps (VM_SOP_ARITH) are made
 * from it. */
#define ISA_IADD(T, U, x, y) ((T)((U)(x) + (U)(y)))
#define ISA_ISUB(T, U, x, y) ((T)((U)(x) - (U)(y)))
#define ISA_IMUL(T, U, x, y) ((T)((U)(x) * (U)(y)))
#define ISA_IDIV(T, U, x, y) ((y) == -1 ? (T)(0 - (U)(x)) : (T)((x) / (y)))
#define ISA_IMOD(T, U, x, y) ((y) == -1 ? (T)0 : (T)((x) % (y)))
#define ISA_IMIN(T, U, x, y) ((x) < (y) ? (x) : (y))
#define ISA_IMAX(T, U, x, y) ((x) > (y) ? (x) : (y))
#define ISA_INT_ARITH(X)                                                                                 \
    X(ADD, ISA_ADD, ISA_IADD) X(SUB, ISA_SUB, ISA_ISUB) X(MUL, ISA_MUL, ISA_IMUL) X(DIV, ISA_DIV, ISA_IDIV) \
    X(MOD, ISA_MOD, ISA_IMOD) X(MIN, ISA_MIN, ISA_IMIN) X(MAX, ISA_MAX, ISA_IMAX)
/* f32 and f64 POW: x * x * x where the exponent is 3 and x * x where it is 2,
 * as ONNX Runtime and PyTorch compute those powers (their results bit for
 * bit; a square rounds once, so it is C's pow exactly), C's pow otherwise
 * (POW: powf or pow). GELU_NEW's cube is this one. */
#define ISA_FPOW(x, y, POW) ((y) == 3 ? (x) * (x) * (x) : (y) == 2 ? (x) * (x) : POW(x, y))
/* isa_arith_S(op, x, y, &r): r = op of ISA_INT_ARITH on two scalars of C
 * type T; false for another op, and for DIV or MOD by 0 (r untouched). */
/* ISA_INT_ARITH(ISA_ARITH_CASE) in a scope with types T and U and values
 * x, y: a case per row that sets *r, or returns false for a division by 0. */
#define ISA_ARITH_CASE(N, OP, E)                                                                         \
    case OP:                                                                                             \
        if (((OP) == ISA_DIV || (OP) == ISA_MOD) && y == 0)                                              \
            return false;                                                                                \
        *r = E(T, U, x, y);                                                                              \
        return true;
#define ISA_ARITH_FN(S, TT, UU)                                                                          \
    static inline bool isa_arith_##S(uint16_t op, TT x, TT y, TT *r)                                     \
    {                                                                                                    \
        typedef TT T;                                                                                    \
        typedef UU U;                                                                                    \
        switch (op) {                                                                                    \
            ISA_INT_ARITH(ISA_ARITH_CASE)                                                                \
        default: return false;                                                                           \
        }                                                                                                \
    }
ISA_ARITH_FN(i32, int32_t, uint32_t)
ISA_ARITH_FN(i64, int64_t, uint64_t)
#undef ISA_ARITH_FN

typedef enum isa_class {
    ISA_CLASS_SOURCE,
    ISA_CLASS_SINK,
    ISA_CLASS_CONTROL,
    ISA_CLASS_HOST,    /* FEED and FETCH: values to and from the host (docs/coexec.md) */
    ISA_CLASS_BINARY,  /* arithmetic: result dtype = operand dtype       */
    ISA_CLASS_UNARY,
    ISA_CLASS_COMPARE, /* result bool                                     */
    ISA_CLASS_LOGIC,   /* bool operands, bool result                      */
    ISA_CLASS_SELECT,
    ISA_CLASS_TENSOR   /* shape-changing tensor ops (devices/cpu/cpu.h)    */
} isa_class;

/* Which attribute fields an instruction carries (isa_inst.a/.b/.flags). */
typedef enum isa_attr {
    ISA_ATTR_NONE,
    ISA_ATTR_INDEX, /* a = entry parameter/result index                  */
    ISA_ATTR_CONST, /* a = constant index                                 */
    ISA_ATTR_ENTER, /* a = frame (loop region index), b = parallel (0 = default),
                       flags & ISA_FLAG_CONST                             */
    ISA_ATTR_FRAME, /* a = frame (loop region index)                      */
    ISA_ATTR_SITE,  /* a = call site (index into isa_program.sites)       */
    ISA_ATTR_DTYPE, /* a = tfvm_dtype                                      */
    ISA_ATTR_AXIS,  /* a = axis, an int32 in two's complement, -8..7 (negative
                       counts from the last axis)                          */
    ISA_ATTR_OPTS,  /* a = option bits named by isa_opt_name (ISA_OPT_*)   */
    ISA_ATTR_CMP,   /* a = a COMPARE opcode, b = a scalar constant (BRANCH) */
    ISA_ATTR_CHAN   /* a = constant index of the channel's name (a u8[n] tensor),
                       b = FEED: the value's type (ISA_CHAN_*); FETCH: 0      */
} isa_attr;

/* Sets of dtypes (ops.def's `types`): bit d is dtype d. */
#define ISA_DT(d) (1u << (d))
#define ISA_TYPES_BOOL ISA_DT(TFVM_BOOL)
#define ISA_TYPES_INT (ISA_DT(TFVM_I32) | ISA_DT(TFVM_I64) | ISA_DT(TFVM_U8) | ISA_DT(TFVM_I8))
#define ISA_TYPES_FLT (ISA_DT(TFVM_F32) | ISA_DT(TFVM_F64))
#define ISA_TYPES_NUM (ISA_TYPES_INT | ISA_TYPES_FLT)
#define ISA_TYPES_ALL (ISA_TYPES_NUM | ISA_TYPES_BOOL)
/* the storage dtypes: values, CAST and control flow take them, nothing computes on them */
#define ISA_TYPES_STORE                                                                                     \
    (ISA_DT(TFVM_I16) | ISA_DT(TFVM_U16) | ISA_DT(TFVM_U32) | ISA_DT(TFVM_U64) | ISA_DT(TFVM_F16) |       \
     ISA_DT(TFVM_BF16))
#define ISA_TYPES_ANY (ISA_TYPES_ALL | ISA_TYPES_STORE)
/* what the typed tensor kernels of wave 1 take: no 8-bit integers */
#define ISA_TYPES_WIDE (ISA_DT(TFVM_I32) | ISA_DT(TFVM_I64) | ISA_TYPES_FLT)

/* The result dtype rule (ops.def's `result`). */
typedef enum isa_result {
    ISA_RESULT_NONE, /* given by the program: ARG's parameter, CONST's constant */
    ISA_RESULT_SAME, /* input 0's dtype */
    ISA_RESULT_BOOL,
    ISA_RESULT_I64,
    ISA_RESULT_ATTR, /* attribute a is the dtype (CAST) */
    ISA_RESULT_IN1,  /* input 1's dtype */
    ISA_RESULT_IN2   /* input 2's dtype */
} isa_result;

/* When a firing on operands of accepted dtypes can stop a run (ops.def's
 * `fails`). Any op on a tensor may fail (shapes, memory); these say what
 * scalars can do. Dead-code elimination keeps what may fail. */
typedef enum isa_fails {
    ISA_FAILS_NO,
    ISA_FAILS_DIV0,   /* integer operands and b == 0 */
    ISA_FAILS_NEGEXP, /* integer operands and b < 0 */
    ISA_FAILS_F2I,    /* CAST of a float to an integer dtype: out of range, NaN */
    ISA_FAILS_YES
} isa_fails;

typedef struct isa_op_info {
    const char *name;     /* "ADD" */
    isa_class cls;
    int n_in;             /* data inputs; -1 = variable (MERGE) */
    int n_out;
    isa_attr attr;
    uint32_t types;       /* ISA_TYPES_*: the dtypes its operands take */
    isa_result result;
    isa_fails fails;
    const char *cuda;     /* the CUDA kernel as ops.def names it ("ADD" is TC_ADD,
                             "GEMM" cuBLAS), "NONE" if it has none */
    const char *synopsis;
} isa_op_info;

extern const isa_op_info isa_ops[ISA_OP_COUNT];
/* Opcode by (case-sensitive) name; -1 if none. */
int isa_op_by_name(const char *name, size_t len);
/* tfvm_dtype by name ("i32"); 0 if none. */
tfvm_dtype isa_dtype_by_name(const char *name, size_t len);
/* Name of option bit `bit` (1, 2, 4...) of an OPTS op ("ta"), NULL if it has none. */
const char *isa_opt_name(isa_op op, uint32_t bit);
/* SWITCH and BRANCH: two outputs, the data on the taken one. */
static inline bool isa_is_switch(uint32_t op) { return op == ISA_SWITCH || op == ISA_BRANCH; }
/* Compute instructions: the ones that may carry a device (ISA_FLAG_DEV_*). */
static inline bool isa_is_compute(isa_class c) { return c >= ISA_CLASS_BINARY; }
#define ISA_DTYPE_LAST TFVM_BF16 /* dtypes are TFVM_BOOL .. ISA_DTYPE_LAST */
static inline bool isa_dtype_valid(uint32_t d) { return d >= TFVM_BOOL && d <= ISA_DTYPE_LAST; }
static inline bool isa_dtype_float(uint32_t d) { return d == TFVM_F32 || d == TFVM_F64; }
/* f16 and bf16: floats that are stored, not computed on */
static inline bool isa_dtype_half(uint32_t d) { return d == TFVM_F16 || d == TFVM_BF16; }
static inline bool isa_dtype_int(uint32_t d) { return (ISA_TYPES_INT >> d & 1) && d <= ISA_DTYPE_LAST; }
/* Whether op's operands may have dtype d (ops.def's `types`). */
static inline bool isa_takes(uint32_t op, uint32_t d) { return isa_dtype_valid(d) && (isa_ops[op].types >> d & 1); }
/* The result dtype of op on operand dtypes dt[] (n_in of them) and attribute
 * a, for operands it takes; 0 for ISA_RESULT_NONE. */
static inline uint8_t isa_result_dtype(uint32_t op, const uint8_t *dt, uint32_t a)
{
    switch (isa_ops[op].result) {
    case ISA_RESULT_SAME: return dt[0];
    case ISA_RESULT_BOOL: return TFVM_BOOL;
    case ISA_RESULT_I64: return TFVM_I64;
    case ISA_RESULT_ATTR: return (uint8_t)a;
    case ISA_RESULT_IN1: return dt[1];
    case ISA_RESULT_IN2: return dt[2];
    case ISA_RESULT_NONE: break;
    }
    return 0;
}
/* Names of a dtype set and of a result rule, as ops.def spells them ("NUM",
 * "SAME"), for docs and messages; "?" for a set ops.def has no name for. */
const char *isa_types_name(uint32_t types);
const char *isa_result_name(isa_result r);
const char *isa_fails_name(isa_fails f);
/* The dtypes of set `types` as "i32, i64, f32 or f64" into buf. */
const char *isa_types_list(uint32_t types, char *buf, size_t size);

#define ISA_NONE UINT32_MAX
#define ISA_RANK_ANY 0xFF          /* parameter/result: tensor of any rank */
#define ISA_DEFAULT_PARALLEL 10    /* ENTER parallel=N default, as in TensorFlow */
#define ISA_MAX_PARALLEL 65536
#define ISA_FLAG_CONST 1u          /* ENTER const */
/* Placement of a compute instruction (classes BINARY..TENSOR): which device
 * runs it. 0 = wherever the run's --device puts it. */
#define ISA_FLAG_DEV_MASK 6u
#define ISA_FLAG_DEV_CPU  2u
#define ISA_FLAG_DEV_CUDA 4u
/* Constant operand of a compute instruction with 2+ data inputs: data input
 * port ((flags & ISA_FLAG_IMM_MASK) >> ISA_FLAG_IMM_SHIFT) - 1 has no
 * producer and always holds constant b, live (one firing and one token per
 * use fewer than a CONST instruction). */
#define ISA_FLAG_IMM_SHIFT 3
#define ISA_FLAG_IMM_MASK (3u << ISA_FLAG_IMM_SHIFT)
/* SWITCH: the untaken output gets no token at all instead of a dead one.
 * Sound when everything fed by that output is only ever fed from it (and
 * ends in MERGEs that receive a live token from elsewhere); the compiler
 * proves this for the branches it makes. */
#define ISA_FLAG_PRUNE_FALSE 32u   /* output 0 */
#define ISA_FLAG_PRUNE_TRUE  64u   /* output 1 */
/* Option bits of ISA_ATTR_OPTS instructions */
#define ISA_OPT_TRANS_A  1u        /* MATMUL: a's last two dims transposed */
#define ISA_OPT_TRANS_B  2u        /* MATMUL: b's last two dims transposed */
/* FUSED_MATMUL, FUSED_CONV2D: the activation applied last (at most one;
 * none: the identity), each exactly the elementwise ops it replaces (docs/
 * isa.md): SILU x * sigmoid(x); GELU (x * (erf(x / sqrt(2)) + 1)) * 0.5;
 * HARDSIGMOID max(min(x * (1/6) + 0.5, 1), 0); HARDSWISH x * hardsigmoid(x);
 * RELU6 min(max(x, 0), 6); GELU_TANH (x * (tanh(sqrt(2/pi) * (x + 0.044715 *
 * (x * (x * x)))) + 1)) * 0.5; GELU_NEW (x * 0.5) * (tanh(sqrt(2/pi) * (x +
 * pow(x, 3) * 0.044715)) + 1), transformers' NewGELUActivation (GPT-2).
 * FUSED_MATMUL also takes ta/tb. */
#define ISA_OPT_ACT_RELU        4u
#define ISA_OPT_ACT_SIGMOID     8u
#define ISA_OPT_ACT_TANH        16u
#define ISA_OPT_ACT_SILU        32u
#define ISA_OPT_ACT_GELU        64u
#define ISA_OPT_ACT_HARDSIGMOID 128u
#define ISA_OPT_ACT_HARDSWISH   256u
#define ISA_OPT_ACT_RELU6       512u
#define ISA_OPT_ACT_GELU_TANH   1024u
#define ISA_OPT_ACT_GELU_NEW    2048u
#define ISA_OPT_ACT_MASK                                                                                    \
    (ISA_OPT_ACT_RELU | ISA_OPT_ACT_SIGMOID | ISA_OPT_ACT_TANH | ISA_OPT_ACT_SILU | ISA_OPT_ACT_GELU |       \
     ISA_OPT_ACT_HARDSIGMOID | ISA_OPT_ACT_HARDSWISH | ISA_OPT_ACT_RELU6 | ISA_OPT_ACT_GELU_TANH |          \
     ISA_OPT_ACT_GELU_NEW)
/* FUSED_CONV2D: x is [N, H, W, C] (channels last) instead of NCHW; the
 * result is [N, OH, OW, O]. The optimizer sets them on a 1x1 convolution
 * whose only use is a depthwise one (docs/isa.md): the pair then passes its
 * activations channels last, as the depthwise kernel reads them. */
#define ISA_OPT_NHWC_IN  4096u
#define ISA_OPT_NHWC_OUT 8192u
#define ISA_OPT_KEEPDIMS 1u        /* REDUCE_*: reduced axes stay, size 1 */
#define ISA_OPT_UPPER 1u           /* TRILU: the upper triangle */
#define ISA_OPT_EXCLUSIVE 1u       /* CUMSUM: element i sums the ones before it */
#define ISA_OPT_REVERSE 2u         /* CUMSUM: from the end of the axis */
#define ISA_OPT_REFLECT 1u         /* PADV: mirror without the edge */
#define ISA_OPT_EDGE 2u            /* PADV: repeat the edge */
#define ISA_OPT_WRAP 4u            /* PADV: wrap around */
/* RESIZE: mode (nearest unless LINEAR), ONNX's coordinate_transformation_mode
 * (half_pixel unless one of the next four) and nearest_mode
 * (round_prefer_floor unless one of the last three). */
#define ISA_OPT_LINEAR 1u
#define ISA_OPT_ASYMMETRIC 2u
#define ISA_OPT_ALIGN_CORNERS 4u
#define ISA_OPT_PYTORCH_HALF_PIXEL 8u
#define ISA_OPT_TF_HALF_PIXEL_NN 16u
#define ISA_OPT_NEAREST_FLOOR 32u
#define ISA_OPT_NEAREST_CEIL 64u
#define ISA_OPT_PREFER_CEIL 128u
/* RESIZE2: RESIZE's bits, plus mode cubic, antialias, exclude_outside, two
 * more coordinate modes, keep_aspect_ratio_policy (with sizes) over the axes
 * of bits 16..23. */
#define ISA_OPT_CUBIC 256u
#define ISA_OPT_ANTIALIAS 512u
#define ISA_OPT_EXCLUDE_OUTSIDE 1024u
#define ISA_OPT_HALF_PIXEL_SYMMETRIC 2048u
#define ISA_OPT_TF_CROP_AND_RESIZE 4096u
#define ISA_OPT_NOT_LARGER 8192u
#define ISA_OPT_NOT_SMALLER 16384u
#define ISA_OPT_KEEP_AXIS0 65536u
#define ISA_OPT_KEEP_AXES (255u * ISA_OPT_KEEP_AXIS0)
/* GRID_SAMPLE: mode (linear unless one of the first two), padding (zeros
 * unless one of the next two), align_corners. */
#define ISA_OPT_GS_NEAREST 1u
#define ISA_OPT_GS_CUBIC 2u
#define ISA_OPT_GS_BORDER 4u
#define ISA_OPT_GS_REFLECTION 8u
#define ISA_OPT_GS_ALIGN_CORNERS 16u
#define ISA_OPT_CENTER_POINT_BOX 1u /* NMS: boxes as [x_center, y_center, width, height] */
#define ISA_OPT_AG_ALIGN_CORNERS 1u /* AFFINE_GRID: -1 and 1 at the corner pixels' centres */
#define ISA_OPT_ROI_MAX 1u        /* ROI_ALIGN: max instead of average */
#define ISA_OPT_ROI_HALF_PIXEL 2u /* ROI_ALIGN: roi corners shifted by -0.5 */
/* UNIQUE: sorted output; UNIQUE_INDEX: which of its outputs (neither bit:
 * the first-occurrence indices) */
#define ISA_OPT_SORTED 1u
#define ISA_OPT_UQ_INVERSE 2u
#define ISA_OPT_UQ_COUNTS 4u
#define ISA_MAX_AXIS 8             /* axis attributes lie in -8..7 */
/* FEED's b: the dtype in the low 8 bits, whether the value is a tensor or
 * a scalar, and for a tensor of a declared shape (bits 12 and up) 1 + the
 * index of the constant that holds it: an i64 vector of at most
 * TFVM_MAX_RANK dimensions, -1 for `?` (0: a tensor of any rank). The value
 * fed is checked against it (vm/io.c). */
#define ISA_CHAN_TENSOR 0x100u
#define ISA_CHAN_DTYPE(b) ((uint8_t)((b) & 0xFFu))
#define ISA_CHAN_SHAPE_SHIFT 12
#define ISA_CHAN_SHAPE(b) ((uint32_t)(b) >> ISA_CHAN_SHAPE_SHIFT)
/* A channel name (FEED, FETCH): 1 to ISA_MAX_CHAN bytes of letters, digits
 * and _ . : / - (it is written in quotes in .tfasm and .tfg, and in
 * messages). */
#define ISA_MAX_CHAN 64

/* ---- Program model --------------------------------------------------------
 * Names are NUL-terminated strings owned by the program's arena; a NULL
 * instruction name means "anonymous". Every index below has been checked by
 * the verifier before the VM sees the program. */
typedef enum isa_region_kind {
    ISA_REGION_ROOT = 0, /* an entry point's body                  */
    ISA_REGION_LOOP = 1, /* a while-loop body (frame)              */
    ISA_REGION_FUNC = 2  /* the one copy of a function's body      */
} isa_region_kind;

typedef struct isa_region {
    uint8_t kind;
    uint32_t parent;   /* LOOP: the enclosing region; ROOT/FUNC: ISA_NONE */
    const char *name;  /* unique among regions */
} isa_region;

typedef struct isa_param {
    const char *name;
    uint8_t dtype;     /* tfvm_dtype */
    uint8_t rank;      /* 0 = scalar, ISA_RANK_ANY = tensor */
    /* A tensor's declared shape (the .tfvm shape table): when `shaped`, the
     * tensor has rank ndim and dimension k is dims[k], -1 for `?`; when not,
     * any rank. Always false for scalars. dims lives in the program's arena
     * (out of line: a hostile file's parameter records stay small in memory). */
    bool shaped;
    uint8_t ndim;
    const int64_t *dims;
    /* when shaped: NULL, or ndim names, the name of a symbolic dimension
     * (`batch`) where dims[k] is -1 and the model named it, else NULL (the
     * .tfvm dim-name table; a name is any size, the same name is not checked
     * to be the same size). */
    const char *const *dim_names;
    /* A parameter only (the .tfvm default table): when has_default, constant
     * dflt is its value in a run not given this argument (an ONNX initializer
     * named like a graph input, IR >= 4: an overridable default). */
    bool has_default;
    uint32_t dflt;
} isa_param;

typedef struct isa_entry {
    const char *name;  /* unique among entries */
    uint32_t region;   /* a ROOT region; each ROOT region belongs to exactly one entry */
    uint32_t n_params, n_results;
    isa_param *params, *results;
} isa_entry;

typedef struct isa_site {
    uint32_t id;       /* printed id ("fib@3"): unique, any value */
    uint32_t callee;   /* a FUNC region */
} isa_site;

typedef struct isa_const {
    uint8_t dtype;     /* tfvm_dtype */
    uint8_t rank;      /* 0..TFVM_MAX_RANK; 0 = scalar */
    int64_t dims[TFVM_MAX_RANK];
    size_t nbytes;     /* = product(dims) * dtype size */
    const void *data;  /* little-endian element bytes, C order; bool = 1 byte 0/1 */
} isa_const;

typedef struct isa_edge {
    uint32_t out;      /* output port of the source instruction */
    uint32_t inst;     /* destination instruction */
    uint32_t port;     /* destination input port */
} isa_edge;

typedef struct isa_inst {
    uint16_t op;       /* isa_op */
    uint16_t flags;    /* ISA_FLAG_* */
    uint32_t region;
    uint32_t n_in;     /* data inputs (= isa_ops[op].n_in unless variable) */
    uint32_t n_ctl;    /* control inputs: ports n_in .. n_in+n_ctl-1 */
    uint32_t a, b;     /* attributes, meaning by isa_ops[op].attr */
    uint32_t edge_first, n_edges; /* this instruction's out-edges, sorted by
                                     (out, inst, port), no duplicates */
    const char *name;  /* debug name or NULL */
    uint32_t line, col;/* debug source location, 0 = unknown */
    /* The model's node the instruction came from (imported programs; the
     * .tfvm origin table): its name ("/m/encoder/Cast_1") and op type
     * ("Cast", may be NULL), or NULL. isa_inst_origin writes them. */
    const char *origin, *origin_op;
} isa_inst;

/* A source variable (the .tfvm variable table): output `out` of instruction
 * `inst` carries the values of the source's variable `name` (a .tfg `let`,
 * `var`, parameter or loop variable; an ONNX or TensorFlow tensor). One name
 * may have several records: each definition of it, each producer of a loop
 * variable (its ENTER and NEXTITER). Sorted by (inst, out, name), no
 * duplicates. */
typedef struct isa_var {
    const char *name;
    uint32_t inst, out;
} isa_var;

typedef struct isa_program {
    ut_arena arena;    /* owns every array and string below */
    tfvm_allocator alloc;
    const char *name;  /* file name for messages */
    const char *source;/* the source file the instructions' line:col refer to
                          (a .tfg, .onnx or .pb file), or NULL */
    uint32_t n_regions, n_insts, n_edges, n_consts, n_sites, n_entries;
    isa_region *regions;
    isa_inst *insts;
    isa_edge *edges;
    isa_const *consts;
    isa_site *sites;   /* sorted by id */
    isa_entry *entries;
    uint32_t n_vars;   /* the variable table (debug info; 0 when none) */
    isa_var *vars;
} isa_program;

/* The public handle is a verified program. */
struct tfvm_program {
    isa_program isa;
    tfvm_allocator alloc;     /* what allocated this handle */
    tfvm_entry_info *entries; /* public view of isa.entries (loader/api.c) */
    struct tfvm_channel_info *channels; /* its FEED and FETCH channels, by name (loader/api.c) */
    size_t n_channels;
};

/* Empty program whose arena uses `alloc` (may be NULL). */
void isa_program_init(isa_program *p, const tfvm_allocator *alloc);
void isa_program_release(isa_program *p);

/* Total input ports of an instruction. */
static inline uint32_t isa_ports(const isa_inst *in) { return in->n_in + in->n_ctl; }
/* The data input port that holds constant b, or -1. */
static inline int isa_imm_port(const isa_inst *in)
{
    return (int)((in->flags & ISA_FLAG_IMM_MASK) >> ISA_FLAG_IMM_SHIFT) - 1;
}
static inline uint32_t isa_outs(const isa_inst *in) { return (uint32_t)isa_ops[in->op].n_out; }

/* Sorts p's variable table by (inst, out, name) and drops repeated records,
 * as the .tfvm format wants them (the compiler and the assembler call it). */
void isa_vars_sort(isa_program *p);
/* The index of the first variable record of instruction i (p's table
 * sorted), or p->n_vars when it has none: its records follow it. */
uint32_t isa_vars_of(const isa_program *p, uint32_t i);

/* Writes "name" or "%index" for instruction i into buf. */
const char *isa_inst_label(const isa_program *p, uint32_t i, char *buf, size_t size);
/* The model's node of instruction i as messages write it, into buf:
 * "node '/m/Cast_1' (Cast)", or "" when it has none. Returns buf. */
const char *isa_inst_origin(const isa_program *p, uint32_t i, char *buf, size_t size);
/* Where instruction i came from, into buf: "mlp.tfg:10:19" (source file,
 * line, column), "10:19" when the file is unknown, "" when the line is.
 * Returns buf. */
const char *isa_inst_where(const isa_program *p, uint32_t i, char *buf, size_t size);
/* Whether s can be a program's source file name (isa_program.source): 1 to
 * ISA_MAX_SOURCE printable ASCII characters without spaces or '"', so that
 * .tfasm writes it as `source "NAME"`. Front ends leave other names out. */
#define ISA_MAX_SOURCE 1023
bool isa_source_ok(const char *s);
/* The printed form of call site `id` of function `callee`: "fib@2" (call
 * site 2 of fib, not fib(2)). The one place the label format is written. */
const char *isa_site_label(const char *callee, uint32_t id, char *buf, size_t size);
/* Declares tensor parameter q's shape: ndim (<= TFVM_MAX_RANK) dimensions,
 * -1 for `?`, copied into p's arena. False when memory runs out. */
bool isa_param_set_shape(isa_program *p, isa_param *q, unsigned ndim, const int64_t *dims);
/* Whether s[0..len) can name a symbolic dimension (`batch`): a letter or
 * '_', then up to ISA_MAX_DIM_NAME - 1 letters, digits or '_' (so .tfasm
 * reads it back). Front ends leave other names out (the dim stays `?`). */
#define ISA_MAX_DIM_NAME 64
bool isa_dim_name_ok(const char *s, size_t len);
/* Names q's dims (q shaped): names[k] for dim k < q->ndim, NULL = unnamed;
 * copied into p's arena. False when memory runs out. */
bool isa_param_set_dim_names(isa_program *p, isa_param *q, const char *const *names);
/* Whether constant c can name a channel (ISA_MAX_CHAN above). */
bool isa_chan_ok(const isa_const *c);
/* The channel name of FEED or FETCH instruction i, NUL-terminated, into buf
 * (at least ISA_MAX_CHAN + 1 bytes). Returns buf. */
const char *isa_chan_name(const isa_program *p, uint32_t i, char *buf);
/* Whether constant c can hold a FEED's declared shape (ISA_CHAN_SHAPE). */
bool isa_chan_shape_ok(const isa_const *c);
/* FEED value type b of (verified) program p as a declaration, its dims
 * copied into `dims`. */
isa_param isa_chan_param(const isa_program *p, uint32_t b, int64_t dims[TFVM_MAX_RANK]);
/* FEED's value type as .tfasm writes it: "f32", "f32[]" (any rank) or
 * "f32[?, 8]". */
const char *isa_chan_type(const isa_program *p, uint32_t b, char *buf, size_t size);
/* Whether two FEED value types of p declare the same type (their shapes
 * may be different constants of equal contents). */
bool isa_chan_type_eq(const isa_program *p, uint32_t b1, uint32_t b2);
/* A parameter's declared type as .tfasm and messages write it: "i32",
 * "f32[...]" (a tensor of any rank), "f32[?, 784]", "f32[batch, 784]" (a
 * named dim), "f32[()]" (rank 0). */
const char *isa_param_type(const isa_param *q, char *buf, size_t size);

#endif
