/* compiler/build.h — the structured IR (compiler.h) built by another front
 * end: the ONNX and TensorFlow importers (import/) make functions, constants,
 * ops, Ifs, Whiles and calls with these calls, and cc_build_program runs the
 * same optimizations, lowering and verification as a .tfg program gets. One
 * IR, one lowering: Loop, If, While and recursive functions of every front
 * end become the same ENTER/MERGE/SWITCH/NEXTITER/EXIT and CALL/RETURN.
 *
 * Every call below allocates from the compiler's arena and unwinds to
 * cc_build_program on failure (out of memory, or cc_error from the
 * importer), so an importer needs no cleanup paths of its own for IR. */
#ifndef TFVM_COMPILER_BUILD_H
#define TFVM_COMPILER_BUILD_H

#include "compiler.h"

/* Makes the program: runs fn(C, ud), which builds every function and returns
 * the entry function (called from no one, or from itself: both work), then
 * optimizes (opt_level 1) and lowers it into *out. Errors: whatever fn
 * reported with cc_error (its message as is: "NAME: message" where name is
 * `name`), TFVM_ERR_NOMEM, or TFVM_ERR_INTERNAL when the lowered graph does
 * not verify. On failure *out is released. */
typedef cc_ifn *(*cc_build_fn)(cc *C, void *ud);
tfvm_status cc_build_program(const char *name, const tfvm_allocator *a, int opt_level, cc_build_fn fn, void *ud,
                             isa_program *out, tfvm_error *err);

/* Type shorthands: a scalar, and a tensor of unknown rank (rank < 0) or of
 * known rank with unknown dims. */
cc_vtype cc_scalar_t(tfvm_dtype d);
cc_vtype cc_tensor_t(tfvm_dtype d, int rank);

/* A new function. Names are copied; pnames/rnames entries may not be NULL
 * (results: NULL array = "r0", "r1", ...). The parameters are nodes of the
 * top block: cc_param_val(fn, k). Set its results with cc_block_results on
 * cc_fn_top(fn). Call sites of every function are numbered program-wide by
 * cc_call. */
cc_ifn *cc_func_new(cc *C, const char *name, uint32_t n_params, const char *const *pnames, const cc_vtype *ptypes,
                    uint32_t n_results, const char *const *rnames, const cc_vtype *rtypes);
cc_blk *cc_fn_top(cc_ifn *fn);
cc_irval cc_param_val(cc_ifn *fn, uint32_t k);

/* The results of a block: a function's top block (its results), an If's
 * then/else blocks (n = the If's outputs), a While's head block (one bool
 * scalar: the condition) or its body block (the next value of every loop
 * variable, in order). */
void cc_block_results(cc *C, cc_blk *b, uint32_t n, const cc_irval *v);

/* A constant in block b. data is copied unless `borrow` (then it must outlive
 * cc_build_program: an importer's input buffer). nbytes = count * dtype size. */
cc_irval cc_const_new(cc *C, cc_blk *b, tfvm_dtype dtype, int rank, const int64_t *dims, const void *data,
                      size_t nbytes, bool borrow);
/* A scalar constant from a double or an int64 (converted to dtype). */
cc_irval cc_const_scalar(cc *C, cc_blk *b, tfvm_dtype dtype, double f, int64_t i);
/* An i64 vector constant. */
cc_irval cc_const_i64s(cc *C, cc_blk *b, uint32_t n, const int64_t *v);

/* An instruction (any compute op of isa/ops.def) with its inputs in port
 * order and attribute a; `type` is what the importer knows of the result;
 * name (copied; may be NULL) becomes the instruction's debug name and must
 * be unique among named values of the program, or NULL. Inputs may come from
 * b or from any block enclosing b in the same function. */
cc_irval cc_op_new(cc *C, cc_blk *b, isa_op op, uint32_t attr, uint32_t n_in, const cc_irval *in, cc_vtype type,
                   const char *name);

/* The model's node that the instructions made from now on come from: its
 * name and op type (copied; NULL node = none). Kept in the program as each
 * instruction's origin (isa_inst, the .tfvm origin table), so run-time
 * errors, profiles, `tfvm dot` and the debugger name the model's node. */
void cc_set_origin(cc *C, const char *node, const char *op);

/* An If on a bool scalar: its then and else blocks are n->u.cond.then/els,
 * each must get n_out results (cc_block_results); the If's outputs are
 * cc_out(n, k). */
cc_node *cc_if_new(cc *C, cc_blk *b, cc_irval cond, uint32_t n_out, const cc_vtype *types, const char *const *names);
/* A While over n_vars loop variables starting at init[k]: the head block
 * n->u.loop.head computes the condition from cc_lvar(n, k) (one result), the
 * body block n->u.loop.body (inside the head) the next values (n_vars
 * results); the outputs cc_out(n, k) are the values when the condition is
 * false. label names the loop region (NULL = automatic); names[k] name the
 * variables (required). */
cc_node *cc_while_new(cc *C, cc_blk *b, uint32_t n_vars, const cc_irval *init, const cc_vtype *types,
                      const char *const *names, const char *label);
cc_irval cc_lvar(cc_node *loop, uint32_t k);
/* A call of fn with its n_params arguments; outputs cc_out(n, k). */
cc_node *cc_call_new(cc *C, cc_blk *b, cc_ifn *fn, const cc_irval *args);
cc_irval cc_out(cc_node *n, uint32_t k);

#endif
