/* isa/shape.h — the shape rule of every instruction, in one table beside
 * isa/ops.def: what an op's result shape is, given what is known of its
 * operands' shapes, its shape operands' values (axes, permutations, targets,
 * parameter vectors) and its attribute. The analyser (analysis/facts.c), the
 * compiler's guaranteed shapes (compiler/opt.c), the .tfg type checker
 * (compiler/builtins.c) and the importers' shape helpers (compiler/shape.c)
 * all ask it; test_oprules checks it against the CPU kernels' results.
 *
 * A dimension is an int64_t: >= 0 its size, ISA_DIM_ANY (-1) unknown, and
 * <= -2 a symbol: a size fixed for the run but known only by name (an ONNX
 * dim_param; compiler/shape.h numbers them). Two equal symbols are equal
 * sizes. Rules copy symbols through and never compute with them. */
#ifndef TFVM_ISA_SHAPE_H
#define TFVM_ISA_SHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfvm.h"

#define ISA_DIM_ANY (-1)

static inline bool isa_dim_is_sym(int64_t d) { return d <= -2; }

/* What is known of one operand. */
typedef struct isa_shape {
    uint8_t dtype;                /* tfvm_dtype, 0 unknown: named in messages only */
    int8_t rank;                  /* -1 unknown; 0 a scalar */
    int64_t dims[TFVM_MAX_RANK];  /* per dim < rank, as above */
    int n_vals;                   /* an integer scalar's or vector's values: how many are known, -1 none */
    const int64_t *vals;          /* n_vals of them (the operand's elements, C order) */
    const int64_t *syms;          /* NULL: every value known; else per value 0 (known), a symbol or
                                     ISA_DIM_ANY (unknown): a shape vector computed from symbols */
} isa_shape;

/* The rule of op with attribute a on operands in[0 .. n_in): the result's
 * shape into *out (unknown parts ISA_DIM_ANY; out->dtype and values are left
 * to the caller: isa_result_dtype, the kernels). TFVM_OK when the op may
 * succeed; TFVM_ERR_SHAPE when the operands prove it fails, with the reason
 * in msg ("inner dims differ: f32[64, 784] @ f32[512, 10]"), or msg "" when
 * only the kernel can say (a bad permutation or RESHAPE target: its own
 * message). *out holds the best shape either way. Ops without a rule
 * (isa_shape_has_rule false) give an unknown shape and TFVM_OK. */
tfvm_status isa_shape_rule(uint32_t op, uint32_t a, const isa_shape *in, uint32_t n_in, isa_shape *out, char *msg,
                           size_t size);
bool isa_shape_has_rule(uint32_t op);
/* Whether op's result may be far larger than its operands (a padded,
 * tiled, filled or expanded tensor): the analyser evaluates such an op only
 * when the rule says its result is small. */
bool isa_shape_grows(uint32_t op);

/* NumPy broadcasting of two dims: a known size other than 1 wins over a
 * symbol or an unknown dim (the other must be 1 or equal, or the op fails);
 * ISA_DIM_ANY when it cannot be told. Not checked: see isa_shape_rule. */
int64_t isa_dim_bcast(int64_t a, int64_t b);

/* NumPy broadcasting of n shapes into *o (isa_dim_bcast per dim); false when
 * two known sizes other than 1 differ (those dims ISA_DIM_ANY). */
bool isa_shape_bcast(const isa_shape *const *x, uint32_t n, isa_shape *o);

/* LAYER_NORM's and RMS_NORM's operands, for their kernel and for the
 * importer and optimizer that make them. The first of the last n axes of
 * rank r when axes[0 .. n) (negative from the end) are exactly those, each
 * once; -1 otherwise. */
int isa_last_axes(const int64_t *axes, int n, int r);
/* Whether a scale or bias of dims pd[0 .. pr) fits x's dims xd[0 .. xr) from
 * axis on: one element, or after leading 1s those dims. pd must be known;
 * an unknown dim of x (< 0) fits any dim but 1 when x_unknown_ok (the run
 * checks it), none otherwise. */
bool isa_norm_param_fits(int pr, const int64_t *pd, int xr, const int64_t *xd, int axis, bool x_unknown_ok);

/* "f32[64, ?]", "i32" (a scalar), "f32[..]" (unknown rank), "?" (nothing
 * known); a symbol prints as "?". */
const char *isa_shape_str(const isa_shape *s, char *buf, size_t size);
/* The dims alone: "[64, ?]", "[]", "[..]". */
const char *isa_dims_str(const isa_shape *s, char *buf, size_t size);

#endif
