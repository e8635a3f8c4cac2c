/* devices/cpu/sgemm_body.h — the micro-kernels of sgemm.c, included once
 * per instruction set with SG_VF (a vector of SG_VL floats), VLD/VST
 * (unaligned), VBC (broadcast), VFMA(a, b, c) = a*b + c, VADD, VZERO, the
 * tile SG_MR rows x SG_NV vectors, the one-row tile of SG_W1 vectors (at
 * least 2 * SG_NV), SG_TARGET and SG_SFX defined. */

/* C[0:R, 0:nr] = (add ? C + : ) sum over p < kc of a[p][i] * b[p][j], for
 * a tile of R rows and V vectors: a is a packed panel (SG_MR floats per p),
 * b steps ldb floats per p and has V * SG_VL readable floats at each. One
 * sum per element, in p order (the same bits in any tile); they stay in
 * registers. A tile cut by the edge of C (nr < V * SG_VL) goes through t,
 * so that nothing past the edge is written, with the same additions. A
 * macro, not an inline function with R and V as arguments: clang keeps an
 * array sized for the largest tile in memory. */
#define SG_TILE(R, V)                                                                                          \
    SG_VF acc[R][V];                                                                                           \
    _Pragma("GCC unroll 16") for (int i = 0; i < (R); i++)                                                    \
        _Pragma("GCC unroll 16") for (int v = 0; v < (V); v++) acc[i][v] = VZERO();                           \
    for (int64_t p = 0; p < kc; p++, a += SG_MR, b += ldb) {                                                  \
        SG_VF bv[V];                                                                                           \
        _Pragma("GCC unroll 16") for (int v = 0; v < (V); v++) bv[v] = VLD(b + v * SG_VL);                    \
        _Pragma("GCC unroll 16") for (int i = 0; i < (R); i++)                                                \
        {                                                                                                      \
            const SG_VF ai = VBC(a[i]);                                                                        \
            _Pragma("GCC unroll 16") for (int v = 0; v < (V); v++) acc[i][v] = VFMA(ai, bv[v], acc[i][v]);     \
        }                                                                                                      \
    }                                                                                                          \
    if (nr == (V) * SG_VL) {                                                                                   \
        _Pragma("GCC unroll 16") for (int i = 0; i < (R); i++)                                                \
            _Pragma("GCC unroll 16") for (int v = 0; v < (V); v++)                                            \
        {                                                                                                      \
            float *ci = c + i * ldc + v * SG_VL;                                                               \
            VST(ci, add ? VADD(VLD(ci), acc[i][v]) : acc[i][v]);                                               \
        }                                                                                                      \
        return;                                                                                                \
    }                                                                                                          \
    float t[(V) * SG_VL];                                                                                      \
    for (int i = 0; i < (R); i++) {                                                                            \
        _Pragma("GCC unroll 16") for (int v = 0; v < (V); v++) VST(t + v * SG_VL, acc[i][v]);                 \
        for (int64_t j = 0; j < nr; j++)                                                                       \
            c[i * ldc + j] = add ? c[i * ldc + j] + t[j] : t[j];                                               \
    }

/* One function per tile shape: SG_SFX(kR) for R rows by SG_NV vectors;
 * with one or two rows, wider tiles keep more sums in flight: SG_SFX(w1)
 * one row by SG_W1 vectors, SG_SFX(w2) two rows by 2 * SG_NV. */
#define SG_DEF(name, R, V)                                                                                     \
    SG_TARGET static void SG_SFX(name)(int64_t kc, const float *restrict a, const float *restrict b, int64_t ldb, \
                                       float *restrict c, int64_t ldc, int64_t nr, bool add)                   \
    {                                                                                                          \
        SG_TILE(R, V)                                                                                          \
    }
SG_DEF(k1, 1, SG_NV)
SG_DEF(k2, 2, SG_NV)
SG_DEF(k3, 3, SG_NV)
SG_DEF(k4, 4, SG_NV)
#if SG_MR > 4
SG_DEF(k5, 5, SG_NV)
SG_DEF(k6, 6, SG_NV)
#endif
#if SG_MR > 6
SG_DEF(k7, 7, SG_NV)
SG_DEF(k8, 8, SG_NV)
#endif
SG_DEF(w1, 1, SG_W1)
SG_DEF(w2, 2, 2 * SG_NV)
#undef SG_DEF
#undef SG_TILE
