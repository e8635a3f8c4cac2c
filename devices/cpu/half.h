/* devices/cpu/half.h — f16 and bf16 arrays to and from f32 (CAST's
 * contiguous runs): x86's F16C and AVX-512 where the CPU has them, else
 * util/half.h one element at a time; every path gives the same bits. */
#ifndef TFVM_CPU_HALF_H
#define TFVM_CPU_HALF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void dev_f16_to_f32_n(float *o, const uint16_t *x, size_t n);
void dev_f32_to_f16_n(uint16_t *o, const float *x, size_t n);
void dev_bf16_to_f32_n(float *o, const uint16_t *x, size_t n);
void dev_f32_to_bf16_n(uint16_t *o, const float *x, size_t n);

/* Which code converts: the best the CPU has (AUTO), or one forced for tests;
 * false (and nothing changes) when the CPU lacks it. Process-wide. */
typedef enum { DEV_HALF_AUTO, DEV_HALF_PORTABLE, DEV_HALF_F16C } dev_half_isa;
bool dev_half_force(dev_half_isa isa);
dev_half_isa dev_half_current(void);

#endif
