/* vm/signature.h — checking a run's arguments and results against the entry
 * point's declared signature (names, dtypes, shapes with `?`), issue 14. */
#ifndef TFVM_VM_SIGNATURE_H
#define TFVM_VM_SIGNATURE_H

#include "devices/value.h"
#include "isa/isa.h"

/* The argument count, then each argument against its parameter: dtype,
 * scalar or tensor, and a declared shape's rank and known dimensions.
 * TFVM_OK, or TFVM_ERR_ARGUMENT with one line in err:
 *   "entry 'main' takes 2 arguments, got 3"
 *   "argument 2 'w1' of entry 'main': expected f32[784, ?], got f32[10, 512]"
 * (arguments count from 1, as the command line does). */
tfvm_status vm_sig_check_args(const isa_entry *en, const tfvm_value *args, size_t n_args, tfvm_error *err);

/* Every result (en->n_results of them, all live) against its declaration.
 * TFVM_OK, or TFVM_ERR_TYPE with one line in err:
 *   "result 0 'r0' of entry 'main': declared f32[?, ?], got a rank-4 tensor"
 *   "result 0 'y' of entry 'main': declared f32[?, 10], got f32[3, 5]"
 * (results count from 0, as RESULT does). A program whose declarations are
 * right never fails here; one that lies about them fails on the run that
 * shows it, instead of handing the caller a value of another type. */
tfvm_status vm_sig_check_results(const isa_entry *en, const dev_value *results, tfvm_error *err);

/* Whether an argument of dtype dt (tensor t, or a scalar when t is NULL)
 * fits declaration q, as vm_sig_check_args checks it (also a FEED's value,
 * vm/io.c). */
bool vm_sig_fits(const isa_param *q, tfvm_dtype dt, const tfvm_tensor *t);

/* A value's type as the messages above write it: "i32", "f32[10, 512]". */
const char *vm_value_type(tfvm_dtype dtype, const tfvm_tensor *t, char *buf, size_t size);

#endif
