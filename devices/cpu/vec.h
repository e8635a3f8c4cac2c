/* devices/cpu/vec.h — included first by the CPU kernel files: lets GCC
 * vectorise their loops at -O2. */
#ifndef TFVM_CPU_VEC_H
#define TFVM_CPU_VEC_H

/* GCC's -O2 uses the "very cheap" vectoriser cost model, which skips every
 * loop whose trip count is not a known multiple of the vector width: all of
 * the kernels' loops. The dynamic model (-O3's) vectorises them, with a
 * scalar epilogue; RELU on f32 ran 10x faster with it. Clang vectorises at
 * -O2 already. Applies to the functions defined after the include. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

#endif
