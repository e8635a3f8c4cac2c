/* devices/cpu/blas.h — OpenBLAS, loaded the first time a kernel needs it.
 * Linking it would start its thread pool in every process at load time, and
 * those threads spin for a while before they sleep: on a 2-core machine that
 * took a core from the VM's second worker in programs without any matrix
 * product. dlopen defers that to the first program with a product, and
 * tfvm then shuts the pool down (blas.c: it never gets work). */
#ifndef TFVM_CPU_BLAS_H
#define TFVM_CPU_BLAS_H

#include <cblas.h>
#include <stdbool.h>

typedef struct dev_blas_fns {
    __typeof__(cblas_sgemm) *sgemm;
    __typeof__(cblas_dgemm) *dgemm;
    __typeof__(cblas_sgemv) *sgemv;
    __typeof__(cblas_dgemv) *dgemv;
    __typeof__(openblas_set_num_threads) *set_num_threads;
    __typeof__(openblas_get_num_threads) *get_num_threads;
    __typeof__(openblas_get_config) *get_config;
} dev_blas_fns;

/* Loads OpenBLAS once (libopenblas.so.0, or $TFVM_BLAS_LIB) and applies the
 * thread rule of dev_cpu_set_threads. NULL when it cannot be loaded; then
 * dev_blas_error() says why. Thread-safe. */
const dev_blas_fns *dev_blas(void);
const char *dev_blas_error(void);
/* Already in the process (linked by the program, or loaded): no load. */
const dev_blas_fns *dev_blas_if_loaded(void);

#endif
