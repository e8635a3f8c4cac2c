/* devices/cpu/cpu.h — CPU kernels: the elementwise classes (BINARY, UNARY
 * incl. CAST and the float math RELU..SQRT, COMPARE, LOGIC, SELECT) with NumPy
 * broadcasting, and the TENSOR class on OpenBLAS. Kernels never see tags. */
#ifndef TFVM_CPU_H
#define TFVM_CPU_H

#include "isa/isa.h"
#include "devices/value.h"

/* Computes out = op(in[0..n-1]) for an elementwise op. `attr` is the
 * instruction's attribute a (the target dtype for CAST). Inputs are live;
 * out receives a new value (a tensor result holds one reference; scalars in,
 * scalar out). On failure returns the code and writes a one-line message
 * without instruction or tag (the VM adds those), e.g.
 *   "dtype mismatch: i32 and f32"
 *   "shapes [2, 3] and [4] do not broadcast"
 *   "integer division by zero"
 *   "cannot cast f64 nan to i32"                                        */
tfvm_status dev_cpu_elementwise(isa_op op, uint32_t attr, const dev_value *in, dev_value *out,
                                const tfvm_allocator *alloc, char *msg, size_t msg_size);

/* The input op's kernel may change in place when it holds the only
 * reference (dev_tensor_mine), or -1: STACK_PUT writes its row into input 0,
 * the reshapes (RESHAPE, SQUEEZE, UNSQUEEZE, FLATTEN, TRANSPOSE) relabel its
 * dims, SOFTMAX writes its rows over them, FUSED_CONV2D_ADD writes its
 * result over r (input 4). A caller that
 * reads that value again after the call, or passes it to another of the
 * call's inputs, holds a reference of its own across it (the VM's frames:
 * vm_sinst.hold). */
int dev_cpu_in_place(isa_op op);

/* Tensor-class ops (ISA_CLASS_TENSOR: MATMUL, CONV2D, pooling, SOFTMAX,
 * reductions, shape ops; docs/isa.md "Tensor instructions"). Same contract as
 * dev_cpu_elementwise; `n_in` inputs; a result of rank 0 is returned as a
 * scalar. Messages name both shapes/dtypes when operands disagree, e.g.
 *   "matmul: inner dims differ: [2, 3] and [4, 5]"                      */
tfvm_status dev_cpu_tensor(isa_op op, uint32_t attr, const dev_value *in, uint32_t n_in, dev_value *out,
                           const tfvm_allocator *alloc, char *msg, size_t msg_size);

/* The dtype and shape of the result dev_cpu_tensor would give for these
 * inputs, after all of its checks, without computing it (for the devices
 * that run the op: docs/devices.md). Tensors may live on a device, except
 * the inputs in host_mask (bit k: input k), whose values the checks read:
 * those must be host tensors (TFVM_ERR_INTERNAL otherwise). Not for ops
 * whose checks read the data of other inputs (GATHER reads its indices). */
tfvm_status dev_cpu_tensor_shape(isa_op op, uint32_t attr, const dev_value *in, uint32_t n_in, uint32_t host_mask,
                                 uint8_t *dtype, int *rank, int64_t *dims, char *msg, size_t msg_size);

/* Called when a VM is made: OpenBLAS, if loaded, gets one thread (the
 * caller's), whatever the number of workers, so that a VM's threads are its
 * workers alone. OpenBLAS's setting is process-wide (docs/devices.md, "CPU
 * threads"). Thread-safe. */
void dev_cpu_set_threads(int vm_workers);
/* Loads OpenBLAS now if program p has matrix products (MATMUL, CONV2D): a VM
 * is made before its runs, so the load (a few milliseconds, and the start of
 * OpenBLAS's threads) is not paid inside the first run. Others never load it. */
void dev_cpu_prepare(const isa_program *p);

#endif
