/* compiler/shape.h — what a front end knows of shapes: symbolic dimensions,
 * the dimension vectors computed from them, and the front ends' entries to
 * the instructions' shape rules (isa/shape.h, where the rules themselves
 * live: broadcasting, RESHAPE's -1, EXPAND).
 *
 * A dimension is an int64_t: >= 0 its size, CC_DIM_ANY (-1) unknown, and
 * <= -2 a symbol: a size fixed for the run but known only by name (an ONNX
 * dim_param such as `batch`, or an unnamed `?n`). Symbols are numbered by
 * the front end (cc_dim_sym); two dims with the same symbol are equal.
 *
 * A dimension vector (cc_dimvec) is what is known of the elements of a
 * small integer scalar or vector computed from shapes (Shape -> Gather ->
 * Unsqueeze -> Concat -> Reshape/Expand): each element a known value, a
 * symbol, or unknown. Its length is always known. */
#ifndef TFVM_COMPILER_SHAPE_H
#define TFVM_COMPILER_SHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "isa/shape.h"
#include "tfvm.h"

#define CC_DIM_ANY ISA_DIM_ANY
#define CC_DV_MAX 64 /* elements: shapes, not data */

static inline int64_t cc_dim_sym(uint32_t id) { return -2 - (int64_t)id; }
static inline bool cc_dim_is_sym(int64_t d) { return d <= -2; }
static inline uint32_t cc_dim_sym_id(int64_t d) { return (uint32_t)(-2 - d); }

/* The element kinds of a dimension vector: sym[k] == CC_EL_KNOWN: v[k] is
 * the value; CC_EL_UNKNOWN: nothing is known; else the symbol (a dim <= -2). */
#define CC_EL_KNOWN 0
#define CC_EL_UNKNOWN (-1)
typedef struct cc_dimvec {
    int rank;                 /* 0 (a scalar, n = 1) or 1 */
    int n;
    int64_t v[CC_DV_MAX];
    int64_t sym[CC_DV_MAX];
} cc_dimvec;

/* Whether every element is a known value. */
bool cc_dv_known(const cc_dimvec *a);
/* Element k as a dimension: a known value >= 0, a symbol, else CC_DIM_ANY. */
int64_t cc_dv_dim(const cc_dimvec *a, int k);
/* The vector of a tensor's dims (what Shape gives); false for an unknown rank. */
bool cc_dv_of_dims(int rank, const int64_t *dims, cc_dimvec *out);
/* Elementwise Add, Sub, Mul, Div ('+', '-', '*', '/') with broadcasting of
 * one-element vectors: known op known is computed (integers wrap; a division
 * by zero is left to the run: false), x*1, x+0, x-0, x/1 keep x's symbol,
 * anything else is unknown. False when the lengths do not broadcast. */
bool cc_dv_arith(char op, const cc_dimvec *a, const cc_dimvec *b, cc_dimvec *r);
/* Equal: known == known; the same symbol is equal; a symbol (a size, >= 0)
 * never equals a negative value; otherwise unknown. */
bool cc_dv_equal(const cc_dimvec *a, const cc_dimvec *b, cc_dimvec *r);
/* Where(c, a, b) where c's elements are known; false otherwise. */
bool cc_dv_where(const cc_dimvec *c, const cc_dimvec *a, const cc_dimvec *b, cc_dimvec *r);

/* NumPy broadcasting of two dims; CC_DIM_ANY when it cannot be told. */
int64_t cc_dim_bcast(int64_t a, int64_t b);
/* The broadcast shape of two shapes (ranks >= 0) into out; its rank. */
int cc_shape_bcast(int ra, const int64_t *a, int rb, const int64_t *b, int64_t *out);
/* Reshape of x (rank rx >= 0, or -1 unknown) to the target t: 0 copies x's
 * dim (unless allowzero), -1 is what is left when every other size is known.
 * out gets t->n dims. */
void cc_shape_reshape(int rx, const int64_t *x, const cc_dimvec *t, bool allowzero, int64_t *out);
/* Expand of x (rank rx >= 0) to the target t: the rank is the larger one;
 * returns it (out gets that many dims), -1 when it exceeds TFVM_MAX_RANK. */
int cc_shape_expand(int rx, const int64_t *x, const cc_dimvec *t, int64_t *out);

#endif
