/* devices/cpu/f4.h — four floats as one GCC vector (SSE2 on x86-64): the
 * lanes of the kernels' portable paths, loaded and stored at any alignment
 * (memcpy, which compiles to one unaligned move). */
#ifndef TFVM_CPU_F4_H
#define TFVM_CPU_F4_H

#include <string.h>

typedef float dev_f4 __attribute__((vector_size(16)));

static inline dev_f4 dev_f4_ld(const float *p)
{
    dev_f4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void dev_f4_st(float *p, dev_f4 v) { memcpy(p, &v, sizeof v); }

#endif
