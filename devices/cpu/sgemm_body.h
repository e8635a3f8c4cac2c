/* devices/cpu/sgemm_body.h — the micro-kernels of sgemm.c, included once
 * per instruction set with SG_VF (a vector of SG_VL floats), VLD/VST
 * (unaligned), VBC (broadcast), VFMA(a, b, c) = a*b + c, VADD, VZERO, VRELU
 * (x < 0 ? 0 : x, lane by lane: -0 and NaN kept), the
 * tile SG_MR rows x SG_NV vectors, the one-row tile of SG_W1 vectors (at
 * least 2 * SG_NV), VHSUM (the sum of a vector's lanes, in a fixed order),
 * SG_TARGET and SG_SFX defined. */

/* How far ahead of b (floats) a tile asks for b's rows: where B is read
 * where it lies (few rows of A), a tile reads kc rows of B, each its own
 * stream, more than the hardware prefetchers follow; asking for what the
 * tiles to the right will read (4 tiles of 32 columns ahead) took a
 * projection's [24, 96] x [96, 3136] from 31 to 71 GFLOP/s with B out of
 * cache, and cost nothing where B is packed (its next rows, in L1). */
#ifndef SG_PF
#define SG_PF 128
#endif

/* C[0:R, 0:nr] = (add ? C + : ) sum over p < kc of a[p][i] * b[p][j], for
 * a tile of R rows and V vectors: a is a packed panel (SG_MR floats per p),
 * b steps ldb floats per p and has V * SG_VL readable floats at each. One
 * sum per element, in p order (the same bits in any tile); they stay in
 * registers. A tile cut by the edge of C (nr < V * SG_VL) goes through t,
 * so that nothing past the edge is written, with the same additions. A
 * macro, not an inline function with R and V as arguments: clang keeps an
 * array sized for the largest tile in memory. */
/* One step p of the sums: b's vectors, the broadcasts of a, the
 * multiply-adds; with PFB a prefetch of b's row SG_PF floats on (B where
 * it lies), with PFN one of line p of pf (into L2). */
#define SG_STEP(R, V, PFB, PFN)                                                                                \
    {                                                                                                          \
        SG_VF bv[V];                                                                                           \
        if (PFN)                                                                                               \
            __builtin_prefetch(pf + p * 16, 0, 1);                                                             \
        _Pragma("GCC unroll 16") for (int v = 0; v < (V); v++) bv[v] = VLD(b + v * SG_VL);                    \
        if (PFB)                                                                                               \
            _Pragma("GCC unroll 16") for (int v = 0; v < (V); v++) __builtin_prefetch(b + SG_PF + v * SG_VL, 0, 3); \
        _Pragma("GCC unroll 16") for (int i = 0; i < (R); i++)                                                \
        {                                                                                                      \
            const SG_VF ai = VBC(a[i]);                                                                        \
            _Pragma("GCC unroll 16") for (int v = 0; v < (V); v++) acc[i][v] = VFMA(ai, bv[v], acc[i][v]);     \
        }                                                                                                      \
    }

/* The steps as loops that test nothing: the first npf ask for a line of
 * pf each; the others, with PF and `ahead`, for what b holds SG_PF floats
 * on (B where it lies: its rows are separate streams; a packed block read
 * from L2 a row of tiles at a time, or a column of tiles whose panel and
 * A's rows do not all stay in L1: its next rows into L1). Not where a
 * column of tiles asks for the next panel of big weights instead (six
 * 512-channel layers on 7x7 4-5% faster without; mobile networks' smaller
 * 7x7 layers on 2 threads 4% slower) */
#define SG_TILE(R, V, PF)                                                                                      \
    SG_VF acc[R][V];                                                                                           \
    _Pragma("GCC unroll 16") for (int i = 0; i < (R); i++)                                                    \
        _Pragma("GCC unroll 16") for (int v = 0; v < (V); v++) acc[i][v] = VZERO();                           \
    int64_t p = 0;                                                                                             \
    for (const int64_t pend = npf < kc ? npf : kc; p < pend; p++, a += SG_MR, b += ldb)                       \
        SG_STEP(R, V, 0, 1)                                                                                    \
    if (PF && ahead)                                                                                           \
        for (; p < kc; p++, a += SG_MR, b += ldb)                                                              \
            SG_STEP(R, V, 1, 0)                                                                                \
    else                                                                                                       \
        for (; p < kc; p++, a += SG_MR, b += ldb)                                                              \
            SG_STEP(R, V, 0, 0)                                                                                \
    if (nr == (V) * SG_VL && e) { /* (e's parts in registers: the stores may alias them) */                   \
        const float *brow = e->brow, *bcol = e->bcol, *res = e->res;                                          \
        const int64_t ldr = e->ldr;                                                                            \
        const bool relu = e->relu, zero = relu && !brow && !bcol && !res;                                      \
        SG_VF bc[V];                                                                                           \
        _Pragma("GCC unroll 16") for (int v = 0; v < (V); v++) bc[v] = bcol ? VLD(bcol + v * SG_VL) : VZERO(); \
        _Pragma("GCC unroll 16") for (int i = 0; i < (R); i++) {                                               \
            const SG_VF br = brow ? VBC(brow[i]) : VZERO();                                                    \
            _Pragma("GCC unroll 16") for (int v = 0; v < (V); v++) {                                           \
                float *ci = c + i * ldc + v * SG_VL;                                                           \
                SG_VF x = add ? VADD(VLD(ci), acc[i][v]) : acc[i][v];                                          \
                if (brow)                                                                                      \
                    x = VADD(x, br);                                                                           \
                else if (bcol)                                                                                 \
                    x = VADD(x, bc[v]);                                                                        \
                if (res)                                                                                       \
                    x = VADD(x, VLD(res + i * ldr + v * SG_VL));                                               \
                else if (zero)                                                                                 \
                    x = VADD(x, VZERO());                                                                      \
                VST(ci, relu ? VRELU(x) : x);                                                                  \
            }                                                                                                  \
        }                                                                                                      \
        return;                                                                                                \
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
    _Pragma("GCC unroll 16") for (int i = 0; i < (R); i++) {                                                   \
        _Pragma("GCC unroll 16") for (int v = 0; v < (V); v++) VST(t + v * SG_VL, acc[i][v]);                 \
        for (int64_t j = 0; j < nr; j++) {                                                                     \
            const float y = add ? c[i * ldc + j] + t[j] : t[j];                                                \
            c[i * ldc + j] = e ? sg_eps(e, y, i, j) : y;                                                       \
        }                                                                                                      \
    }

/* One function per tile shape: SG_SFX(kR) for R rows by SG_NV vectors;
 * with one or two rows, wider tiles keep more sums in flight: SG_SFX(w1)
 * one row by SG_W1 vectors, SG_SFX(w2) two rows by 2 * SG_NV. The wide
 * ones read B's rows SG_PF or more floats at a time already: no prefetch
 * (with it, a [1, 576] x [576, 1024] product took 5% longer). */
#define SG_DEF(name, R, V, PF)                                                                                 \
    SG_TARGET static void SG_SFX(name)(int64_t kc, const float *restrict a, const float *restrict b, int64_t ldb, \
                                       float *restrict c, int64_t ldc, int64_t nr, bool add, bool ahead,        \
                                       const float *pf, int64_t npf, const dev_sg_kepi *e)                      \
    {                                                                                                          \
        (void)ahead, (void)pf, (void)npf;                                                                      \
        SG_TILE(R, V, PF)                                                                                      \
    }
SG_DEF(k1, 1, SG_NV, 1)
SG_DEF(k2, 2, SG_NV, 1)
SG_DEF(k3, 3, SG_NV, 1)
SG_DEF(k4, 4, SG_NV, 1)
#if SG_MR > 4
SG_DEF(k5, 5, SG_NV, 1)
SG_DEF(k6, 6, SG_NV, 1)
#endif
#if SG_MR > 6
SG_DEF(k7, 7, SG_NV, 1)
SG_DEF(k8, 8, SG_NV, 1)
#endif
/* half-wide tiles (one vector) for the last panel of B when it holds at
 * most that many columns: a 196-column product's last 4 cost a whole
 * 32-wide tile before (20% of [288, 48] x [48, 196]) */
SG_DEF(h1, 1, 1, 1)
SG_DEF(h2, 2, 1, 1)
SG_DEF(h3, 3, 1, 1)
SG_DEF(h4, 4, 1, 1)
#if SG_MR > 4
SG_DEF(h5, 5, 1, 1)
SG_DEF(h6, 6, 1, 1)
#endif
#if SG_MR > 6
SG_DEF(h7, 7, 1, 1)
SG_DEF(h8, 8, 1, 1)
#endif
SG_DEF(w1, 1, SG_W1, 0)
SG_DEF(w2, 2, 2 * SG_NV, 0)
#undef SG_DEF
#undef SG_TILE

/* ---- Dot products: y[j] = sum over p < K of x[p] * r[j][p] ---------------------------
 * One row of A against B stored transposed (and one column, the other way
 * round): B's rows are read once, where they lie, with no packing. Each dot
 * product sums lanes of SG_VL partial sums over the first K / SG_VL * SG_VL
 * terms, then the lanes by VHSUM, then the remaining terms in order. Eight
 * rows go in lockstep, each with the operations it has alone, so a row has
 * the same bits wherever it falls. */
SG_TARGET static inline float SG_SFX(dot_end)(SG_VF acc, const float *x, const float *r, int64_t p, int64_t K)
{
    float s = VHSUM(acc);
    for (; p < K; p++)
        s += x[p] * r[p];
    return s;
}

SG_TARGET static void SG_SFX(dots)(int64_t n, int64_t K, const float *restrict x, const float *restrict R, int64_t ldr,
                                   float *restrict y)
{
    const int64_t kv = K / SG_VL * SG_VL;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const float *r = R + j * ldr;
        SG_VF acc[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            acc[i] = VZERO();
        for (int64_t p = 0; p < kv; p += SG_VL) {
            const SG_VF xv = VLD(x + p);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++)
                acc[i] = VFMA(xv, VLD(r + i * ldr + p), acc[i]);
        }
        for (int i = 0; i < 8; i++)
            y[j + i] = SG_SFX(dot_end)(acc[i], x, r + i * ldr, kv, K);
    }
    for (; j < n; j++) {
        const float *r = R + j * ldr;
        SG_VF acc = VZERO();
        for (int64_t p = 0; p < kv; p += SG_VL)
            acc = VFMA(VLD(x + p), VLD(r + p), acc);
        y[j] = SG_SFX(dot_end)(acc, x, r, kv, K);
    }
}

/* ---- One row against a chunk of G panels: t[j] = sum over p < K of x[p] * chunk[p][j] ---
 * The chunk's rows are ld floats apart, G * SG_NR columns each, so that the
 * weights stream in order. Its sums stay in registers, many FMA chains in
 * flight, the lines ahead prefetched; each element is summed in p order
 * within a block of K (kc_step high) and the blocks' sums added in order:
 * the bits of SG_TILE's one-row tile over the same blocks (sg_run). */
#define SG_NR (SG_NV * SG_VL)
/* The weights stream from L2 at its bandwidth only with each line asked
 * for this far (floats, 2 KB) ahead of its use: the hardware prefetcher
 * alone leaves some 7% of it unused (measured on Zen 4) */
#define SG_GEMV_AHEAD 512
#define SG_GEMV_CHUNK(G, base, ld)                                                                             \
    SG_VF acc[G][SG_NV], tot[G][SG_NV];                                                                        \
    _Pragma("GCC unroll 16") for (int g = 0; g < (G); g++)                                                     \
        _Pragma("GCC unroll 4") for (int v = 0; v < SG_NV; v++) tot[g][v] = VZERO();                           \
    for (int64_t pc = 0; pc < K; pc += kc_step) {                                                              \
        const int64_t kc = K - pc < kc_step ? K - pc : kc_step;                                                \
        _Pragma("GCC unroll 16") for (int g = 0; g < (G); g++)                                                 \
            _Pragma("GCC unroll 4") for (int v = 0; v < SG_NV; v++) acc[g][v] = VZERO();                       \
        for (int64_t p = pc; p < pc + kc; p++) {                                                               \
            const SG_VF xv = VBC(x[p]);                                                                        \
            const float *bq = (base) + p * (ld);                                                               \
            _Pragma("GCC unroll 16") for (int l = 0; l < (G) * SG_NR / 16; l++)                                \
                __builtin_prefetch(bq + SG_GEMV_AHEAD + l * 16);                                               \
            _Pragma("GCC unroll 16") for (int g = 0; g < (G); g++)                                             \
                _Pragma("GCC unroll 4") for (int v = 0; v < SG_NV; v++)                                        \
                    acc[g][v] = VFMA(xv, VLD(bq + g * SG_NR + v * SG_VL), acc[g][v]);                          \
        }                                                                                                      \
        _Pragma("GCC unroll 16") for (int g = 0; g < (G); g++)                                                 \
            _Pragma("GCC unroll 4") for (int v = 0; v < SG_NV; v++)                                            \
                tot[g][v] = pc == 0 ? acc[g][v] : VADD(tot[g][v], acc[g][v]);                                  \
    }                                                                                                          \
    _Pragma("GCC unroll 16") for (int g = 0; g < (G); g++)                                                     \
        _Pragma("GCC unroll 4") for (int v = 0; v < SG_NV; v++) VST(t + g * SG_NR + v * SG_VL, tot[g][v]);

/* A recurrent step's product by blocks of units (sgemm.c, gates_pack): a
 * whole block of DEV_SG_GATE_UNITS units is sub-blocks of SG_NR units, each
 * a chunk [K][G * SG_NR] (gate g's columns at g * SG_NR) that
 * SG_GEMV_CHUNK streams whole (G <= 4); a last
 * block of n < DEV_SG_GATE_UNITS units is one chunk [K][W] with gate g of
 * unit u in column g * n + u (W: G * n rounded up to whole panels, streamed
 * 4 panels at a time). Gate g of unit u of whole block b0 + i lands at y[(i * G + g) *
 * DEV_SG_GATE_UNITS + u], of the last block after the whole ones at g * n
 * + u: the same places on every instruction set. Blocks [b0, b1) of bp,
 * the last one first when down (and a block's sub-blocks last first): the
 * same results in the same places; the order only decides which weights
 * are still in cache from the step before (see dev_sgemv_gates_part). */
#define SG_GATES_CASE(G)                                                                                       \
    case G: {                                                                                                  \
        SG_GEMV_CHUNK(G, b + s * sub + c0 * SG_NR, ld)                                                         \
        break;                                                                                                 \
    }
SG_TARGET static void SG_SFX(gemv_gates)(int64_t G, int64_t H, int64_t K, int64_t kc_step, const float *restrict x,
                                         const float *restrict bp, float *restrict y0, int64_t b0, int64_t b1,
                                         bool down)
{
    enum { U = DEV_SG_GATE_UNITS, SUBS = U / SG_NR };
    float t[4 * SG_NR];
    const int64_t sub = K * G * SG_NR; /* floats of a sub-block */
    for (int64_t i = 0; i < b1 - b0; i++) {
        const int64_t blk = down ? b1 - 1 - i : b0 + i, n = H - blk * U;
        const float *b = bp + blk * SUBS * sub;
        float *y = y0 + (blk - b0) * G * U;
        /* a chunk of `panels` panels at b, rows ld floats apart */
        const int64_t panels = n < U ? (G * n + SG_NR - 1) / SG_NR : G, ld = panels * SG_NR;
        const int64_t subs = n < U ? 1 : SUBS;
        for (int64_t si = 0; si < subs; si++) {
            const int64_t s = down ? subs - 1 - si : si;
            for (int64_t c0 = 0; c0 < panels; c0 += 4) {
                const int64_t np = panels - c0 < 4 ? panels - c0 : 4;
                switch (np) {
                    SG_GATES_CASE(1)
                    SG_GATES_CASE(2)
                    SG_GATES_CASE(3)
                    SG_GATES_CASE(4)
                }
                if (n < U) {
                    memcpy(y + c0 * SG_NR, t, (size_t)(np * SG_NR) * sizeof *y);
                    continue;
                }
                for (int64_t g = 0; g < G; g++)
                    memcpy(y + g * U + s * SG_NR, t + g * SG_NR, SG_NR * sizeof *y);
            }
        }
    }
}
#undef SG_GATES_CASE
#undef SG_GEMV_CHUNK
#undef SG_GEMV_AHEAD
#undef SG_NR
