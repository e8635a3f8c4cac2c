/* devices/cpu/sgemm.h — tfvm's own packed f32 matrix product (sgemm.c):
 * register-blocked micro-kernels for AVX-512, AVX2+FMA and portable vector
 * code, chosen once at run time from what the CPU has. */
#ifndef TFVM_CPU_SGEMM_H
#define TFVM_CPU_SGEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum dev_sg_isa {
    DEV_SG_PORTABLE, /* GCC vector extensions, 4 lanes, no FMA */
    DEV_SG_AVX2,     /* AVX2 + FMA, 6 x 16 tiles */
    DEV_SG_AVX512,   /* AVX-512F, 6 x 32 tiles */
    DEV_SG_N_ISA
} dev_sg_isa;

/* Work on C done as each block of it is final, while the block is in cache
 * (a bias and activation): fn(ctx, row0, nrows, col0, ncols) for rows
 * [row0, row0 + nrows) and columns [col0, col0 + ncols) of C. Blocks are
 * disjoint and cover C; each is called once, after its last product. */
typedef struct dev_sg_kepi dev_sg_kepi;
typedef struct dev_sg_epi {
    void (*fn)(const void *ctx, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols);
    const void *ctx;
    /* or NULL; else the same work done by the micro-kernel as it stores
     * each tile for the last time, and fn is called only where no tile
     * could (K = 0) */
    const dev_sg_kepi *k;
} dev_sg_epi;
/* An epilogue simple enough for the micro-kernel's registers: element
 * (i, j) of C becomes relu?((C + brow[i] or bcol[j]) + res[i * ldr + j]),
 * each part only where given (non-NULL, relu true), the roundings of
 * dev_kepi_apply's ADDs and RELU (a RELU alone adds 0 first); brow, bcol
 * and res at C's element (0, 0). */
struct dev_sg_kepi {
    const float *brow, *bcol, *res;
    int64_t ldr;
    bool relu;
};

/* C[M, N] = op(A) @ op(B), row-major, op(X) = X^T when ta (tb); C is
 * overwritten (beta 0). Every element is summed in K order, in blocks of
 * K that depend on K only, so a row or column block of C computed alone has
 * the bits it has in the whole product. false when the per-thread packing
 * buffer cannot be allocated; C is then untouched. Thread-safe. */
bool dev_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
               int64_t ldb, float *C, int64_t ldc, const dev_sg_epi *epi /* or NULL */);
/* The same on a given instruction set (tests, benchmarks); false also when
 * the CPU lacks it. */
bool dev_sgemm_on(dev_sg_isa isa, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                  const float *B, int64_t ldb, float *C, int64_t ldc);
bool dev_sgemm_on_epi(dev_sg_isa isa, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float *C, int64_t ldc, const dev_sg_epi *epi /* or NULL */);
/* op(B) [K, N] packed once for dev_sgemm_packed (weights kept across runs):
 * dev_sgemm_packed_floats(N, K) floats, written by dev_sgemm_pack. Whether
 * dev_sgemm would pack op(B) for a product of M rows over K, B's rows ldb
 * floats apart (else it reads B where it lies, and packing it first gains
 * nothing); the width of its column panels. */
size_t dev_sgemm_packed_floats(int64_t N, int64_t K);
void dev_sgemm_pack(bool tb, int64_t N, int64_t K, const float *B, int64_t ldb, float *out);
/* The same for B^T = W [N, K] (a convolution's weights, K = C * T: channel
 * c's T taps together) with K reordered tap-major: packed row t * C + c is
 * W's column c * T + t (so that a row of the column matrix is T runs of C
 * channels, each one copy). */
void dev_sgemm_pack_taps(int64_t N, int64_t C, int64_t T, const float *W, float *out);
bool dev_sgemm_packs_b(bool tb, int64_t M, int64_t K, int64_t ldb);
/* Whether a product over K sums it in one block (each tile of C stored
 * once: an epilogue in the kernel's stores may then read what C
 * overwrites) */
bool dev_sgemm_one_kblock(int64_t K);
int64_t dev_sgemm_nr(void);
/* C[M, N] = op(A) @ op(B), op(A) = A^T when ta, op(B) being columns [j0,
 * j0 + N) of a packed [K, Ntot]; the bits of dev_sgemm. false when j0 is
 * not a multiple of dev_sgemm_nr() or the packing buffer of A cannot be
 * had; C is then untouched. */
bool dev_sgemm_packed(bool ta, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *bp,
                      int64_t j0, int64_t Ntot, float *C, int64_t ldc, const dev_sg_epi *epi /* or NULL */);
/* op(A) [M, K] where its rows lie in runs of C: element (r, k) at base +
 * row[r] + tap[k / C] + k % C (a convolution's positions, each tap a run of
 * C channels of a channels-last image: no column matrix is made) */
typedef struct dev_sg_rows {
    const float *base;
    const int64_t *row, *tap;
    int64_t C;
} dev_sg_rows;
/* dev_sgemm_packed with op(A) given so, packed from where it lies */
bool dev_sgemm_packed_rows(const dev_sg_rows *ar, int64_t M, int64_t N, int64_t K, const float *bp, int64_t j0,
                           int64_t Ntot, float *C, int64_t ldc, const dev_sg_epi *epi /* or NULL */);
/* The same as a step of a loop that calls it with down alternating:
 * the columns' tiles last first when down (the same C; see
 * dev_sgemv_gates_part), B's blocks then narrow enough to stay in cache
 * from one step to the next when K is blocked */
bool dev_sgemm_packed_down(bool down, bool ta, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                           const float *bp, int64_t j0, int64_t Ntot, float *C, int64_t ldc,
                           const dev_sg_epi *epi /* or NULL */);
/* A recurrent step's product, y = x [K] @ R^T for R [G * H, K] (G gates of
 * H units, G <= 4, rows as ONNX's LSTM and GRU have them), by
 * dev_sgemv_gates_blocks(H) blocks of DEV_SG_GATE_UNITS units (U), the G
 * gates of a block together, so that a block's gate math can follow its
 * product at once (and blocks split over threads): gate g of unit b * U +
 * u of a whole block at y[(b * G + g) * U + u]; a last block of n = H % U
 * units follows the whole ones, its gate g of unit u at g * n + u (what
 * lies after it up to dev_sgemv_gates_floats(G, H, 1), y's size, is
 * unspecified). R packed once,
 * dev_sgemv_gates_floats(G, H, K) floats written by dev_sgemv_gates_pack;
 * blocks [b0, b1) of the product alone, block b0 first in y. Each element
 * has dev_sgemm's bits for that one row (the sums of each block of K in
 * order, the blocks' sums added in order). down computes the blocks last
 * first, with the same results: a loop that alternates the direction step
 * by step starts each step on the weights the step before read last, the
 * ones still in cache (weights larger than a cache level stream from the
 * next one down otherwise: all of them, every step). */
#define DEV_SG_GATE_UNITS 32
int64_t dev_sgemv_gates_blocks(int64_t H);
size_t dev_sgemv_gates_floats(int64_t G, int64_t H, int64_t K);
void dev_sgemv_gates_pack(int64_t G, int64_t H, int64_t K, const float *R, float *out);
void dev_sgemv_gates_part(int64_t G, int64_t H, int64_t K, const float *x, const float *bp, float *y, int64_t b0,
                          int64_t b1, bool down);
/* R packed for several rows' product (dev_sgemm_packed) in the same
 * order (op(B)'s columns where y has the gates), Ntot =
 * dev_sgemv_gates_floats(G, H, 1) columns, dev_sgemm_packed_floats(Ntot,
 * K) floats; block b's columns start at b * G * DEV_SG_GATE_UNITS. */
void dev_sgemm_pack_gates(int64_t G, int64_t H, int64_t K, const float *R, float *out);
/* The same on a given instruction set, every block, R packed here for
 * that set (tests); false when the CPU lacks it or memory is short. */
bool dev_sgemv_gates_on(dev_sg_isa isa, int64_t G, int64_t H, int64_t K, const float *x, const float *R, float *y);
/* A [M, K] (not transposed) packed once for dev_sgemm_apacked (weights on
 * the left, as a convolution's): dev_sgemm_packed_a_floats(M, K) floats,
 * written by dev_sgemm_pack_a; the height of its row panels. Then C[M, N]
 * = rows [i0, i0 + M) of that A @ B, B [K, N] as it lies; the bits of
 * dev_sgemm. false when i0 is not a multiple of dev_sgemm_mr() or B's
 * packing buffer cannot be had; C is then untouched. */
size_t dev_sgemm_packed_a_floats(int64_t M, int64_t K);
void dev_sgemm_pack_a(int64_t M, int64_t K, const float *A, int64_t lda, float *out);
int64_t dev_sgemm_mr(void);
bool dev_sgemm_apacked(const float *ap, int64_t i0, int64_t Mtot, int64_t M, int64_t N, int64_t K, const float *B,
                       int64_t ldb, float *C, int64_t ldc, const dev_sg_epi *epi /* or NULL */);
/* Panels [p0, p1) of op(A) (A^T when ta) packed for dev_sgemm_apacked
 * (balanced false) or dev_sgemm_abpacked (true: in each block of rows the
 * product takes, panels whose heights differ by one at most), so that
 * threads can pack a shared A's panels in parallel:
 * ceil(M / dev_sgemm_mr()) panels, dev_sgemm_packed_a_floats(M, K) floats
 * in all. */
void dev_sgemm_pack_a_panels(bool ta, bool balanced, int64_t M, int64_t K, const float *A, int64_t lda, int64_t p0,
                             int64_t p1, float *out);
/* The same (balanced) for an op(A) given as rows where they lie */
void dev_sgemm_pack_a_panels_rows(const dev_sg_rows *ar, int64_t M, int64_t K, int64_t p0, int64_t p1, float *out);
/* A buffer of `floats` for an op(A) packed once and read by every thread of
 * one split product: the calling thread's, kept for its next product, or
 * (while that one is lent out, or NULL when memory is short) a new one;
 * dev_sgemm_a_give returns it, on the thread that took it. */
float *dev_sgemm_a_take(size_t floats);
void dev_sgemm_a_give(float *p);
/* C[M, N] = op(A) packed balanced (dev_sgemm_pack_a_panels, all M rows)
 * @ columns [j0, j0 + N) of a packed op(B) of Ntot columns
 * (dev_sgemm_pack); the bits of dev_sgemm. false when j0 is not a
 * multiple of dev_sgemm_nr(); C is then untouched. */
bool dev_sgemm_abpacked(const float *ap, int64_t M, const float *bp, int64_t j0, int64_t Ntot, int64_t N, int64_t K,
                        float *C, int64_t ldc, const dev_sg_epi *epi /* or NULL */);
/* y[j] = sum over p < K of x[p * incx] * R[j * ldr + p], j < n: a row
 * against B stored transposed (x @ B^T) or a column (A @ x), as dot
 * products of R's rows read where they lie. A row of y has the same bits
 * whatever n and the rows around it. false when a strided x cannot be
 * copied (the per-thread buffer); y is then untouched. Thread-safe. */
bool dev_sdots(int64_t n, int64_t K, const float *x, int64_t incx, const float *R, int64_t ldr, float *y);
bool dev_sdots_on(dev_sg_isa isa, int64_t n, int64_t K, const float *x, int64_t incx, const float *R, int64_t ldr,
                  float *y);
bool dev_sg_have(dev_sg_isa isa);
dev_sg_isa dev_sg_best(void); /* what dev_sgemm uses */
const char *dev_sg_name(dev_sg_isa isa);

#endif
