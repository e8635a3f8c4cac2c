/* devices/cpu/matmul.c — MATMUL (NumPy matmul with batch broadcasting and
 * ta/tb transposes) and the gemm every CPU kernel uses: f32 by our own
 * kernel (sgemm.c) or OpenBLAS by size, f64 by OpenBLAS, integers by a
 * wrapping loop; a product split over the VM's workers. */
#include "devices/cpu/vec.h"
#include "devices/cpu/kern.h"

#include "devices/cpu/blas.h"
#include "devices/cpu/par.h"
#include "devices/cpu/sgemm.h"
#include "devices/tensor.h"
#include <limits.h>
#include <stdatomic.h>
#include <string.h>

/* ---- gemm ------------------------------------------------------------------------
 * Floats need OpenBLAS, loaded on first use (blas.h): the kernels that call
 * dev_kgemm check for it first, so a missing library is one clear error. */
tfvm_status dev_kgemm_ready(dev_kctx *k, uint8_t dtype)
{
    if (!dev_kfloat(dtype) || dev_blas())
        return TFVM_OK;
    return dev_kfail(k, TFVM_ERR_UNSUPPORTED, "needs OpenBLAS, which %s", dev_blas_error());
}

/* ---- gemm ------------------------------------------------------------------------ */
bool dev_kgemm_fits(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* Integer gemm: unsigned arithmetic so that products and sums wrap. The
 * i-k-j order streams rows of B and C when B is not transposed. */
#define KGEMM_INT(T, U)                                                                   \
    do {                                                                                  \
        const T *a = A, *b = B;                                                           \
        T *c = C;                                                                         \
        const int64_t ars = ta ? 1 : lda, acs = ta ? lda : 1;                             \
        const int64_t brs = tb ? 1 : ldb, bcs = tb ? ldb : 1;                             \
        for (int64_t i = 0; i < M; i++) {                                                 \
            T *ci = c + i * ldc;                                                          \
            for (int64_t j = 0; j < N; j++)                                               \
                ci[j] = 0;                                                                \
            for (int64_t p = 0; p < K; p++) {                                             \
                const U x = (U)a[i * ars + p * acs];                                      \
                const T *bp = b + p * brs;                                                \
                if (bcs == 1)                                                             \
                    for (int64_t j = 0; j < N; j++)                                       \
                        ci[j] = (T)((U)ci[j] + x * (U)bp[j]);                             \
                else                                                                      \
                    for (int64_t j = 0; j < N; j++)                                       \
                        ci[j] = (T)((U)ci[j] + x * (U)bp[j * bcs]);                       \
            }                                                                             \
        }                                                                                 \
    } while (0)

/* Which code computes an f32 product. Chosen from the dims of the whole
 * product, so that the chunks it is split into (dev_kmm_run) use the same
 * code, and every element has the same bits at any thread count.
 * - Up to 2^31 multiply-adds: tfvm's own (sgemm.c). On this project's
 *   machine (Zen 4, one thread) it ran 104-111 GFLOP/s from 32x128x128 to
 *   256x512x512 and [1,128]x[128,512] in 2.7 us, where OpenBLAS 0.3.21 ran
 *   99-116 with its own kernel choice and 89-109 under
 *   OPENBLAS_CORETYPE=Haswell, and 2.3 us (14 us) for the row: the table in
 *   docs/devices.md ("Kernel notes"). On an AVX-512 Intel Xeon, from 302 M
 *   to 2.1 G multiply-adds (a ViT's [197, 768] x [768, 3072], 1024^3,
 *   2048 x 2048 x 512), 132-174 GFLOP/s against OpenBLAS's 124-156, more
 *   with B prepacked (the limit had been 2^28: a transformer's MLP ran
 *   1.22x ORT's time on OpenBLAS, 1.00x on ours). One row against B stored transposed
 *   (x @ W^T, an RNN step), or one dense column of A @ b, is a dot product
 *   per element over rows read where they lie (packing would cost 16x the
 *   product); one dense column from A stored transposed is the row C^T =
 *   op(B)^T @ A, whose B is A as it lies.
 * - Larger, or a column of C with a stride: OpenBLAS (1024^3 on Zen 4:
 *   as fast as ours or up to 20% faster). */
typedef enum kgemm_code { KGEMM_OWN, KGEMM_OWN_T, KGEMM_DOTS, KGEMM_DOTS_T, KGEMM_GEMV, KGEMM_BLAS } kgemm_code;
#define KGEMM_OWN_MAX (INT64_C(1) << 31)

static kgemm_code kgemm_code_for(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t ldc)
{
    if ((double)M * (double)N * (double)K > (double)KGEMM_OWN_MAX) /* each dim may be up to INT_MAX */
        return KGEMM_BLAS;
    if (N == 1)
        return ldc != 1 ? KGEMM_GEMV : ta ? KGEMM_OWN_T : KGEMM_DOTS_T;
    return M == 1 && tb ? KGEMM_DOTS : KGEMM_OWN;
}

dev_kmm_code dev_kmm_who(uint8_t dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t ldc)
{
    if (!dev_kfloat(dtype))
        return DEV_KMM_LOOP;
    if (dtype != TFVM_F32)
        return DEV_KMM_BLAS;
    const kgemm_code code = kgemm_code_for(ta, tb, M, N, K, ldc);
    return code == KGEMM_BLAS || code == KGEMM_GEMV ? DEV_KMM_BLAS : DEV_KMM_OWN;
}

int64_t dev_kmm_own_rows(int64_t N, int64_t K)
{
    const double per_row = (double)(N > 0 ? N : 1) * (double)(K > 0 ? K : 1);
    const double rows = (double)KGEMM_OWN_MAX / per_row;
    return rows < 1 ? 1 : rows > (double)INT32_MAX ? INT32_MAX : (int64_t)rows;
}

/* An f32 product by `code`; ours falls back to OpenBLAS when its packing
 * buffer cannot be allocated. */
static void kgemm_f32(kgemm_code code, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float *C, int64_t ldc)
{
    switch (code) {
    case KGEMM_OWN:
        if (dev_sgemm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, NULL))
            return;
        break;
    case KGEMM_OWN_T:
        if (dev_sgemm(!tb, false, 1, M, K, B, ldb, A, lda, C, M, NULL))
            return;
        break;
    case KGEMM_DOTS: /* C[0][j] = op(A)[0, :] . B[j] */
        if (dev_sdots(N, K, A, ta ? lda : 1, B, ldb, C))
            return;
        break;
    case KGEMM_DOTS_T: /* C[i][0] = A[i] . op(B)[:, 0] */
        if (dev_sdots(M, K, B, tb ? 1 : ldb, A, lda, C))
            return;
        break;
    default: break;
    }
    const dev_blas_fns *blas = dev_blas(); /* loaded: the kernels check dev_kgemm_ready first */
    /* A single row or column is a matrix-vector product; OpenBLAS's gemm
     * does not forward those to gemv itself. The vector op(A)[0, :] steps by
     * lda when A is transposed, op(B)[:, 0] by ldb when B is not; C is then
     * one dense row, or one column of stride ldc. */
    if (M == 1 && N > 1)
        blas->sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, (int)(tb ? N : K), (int)(tb ? K : N), 1.0f, B,
                    (int)ldb, A, ta ? (int)lda : 1, 0.0f, C, 1);
    else if (N == 1)
        blas->sgemv(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, (int)(ta ? K : M), (int)(ta ? M : K), 1.0f, A,
                    (int)lda, B, tb ? 1 : (int)ldb, 0.0f, C, (int)ldc);
    else
        blas->sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                    (int)K, 1.0f, A, (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
}

/* dev_kgemm, with the f32 code chosen by the caller */
static void kgemm(kgemm_code code, uint8_t dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                  int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc)
{
    if (M == 0 || N == 0)
        return;
    const size_t esz = dev_kesize(dtype);
    if (K == 0) {
        for (int64_t i = 0; i < M; i++)
            memset((char *)C + (size_t)(i * ldc) * esz, 0, (size_t)N * esz);
        return;
    }
    const enum CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans;
    const enum CBLAS_TRANSPOSE opb = tb ? CblasTrans : CblasNoTrans;
    const int xa = ta ? (int)lda : 1, xb = tb ? 1 : (int)ldb;
    switch (dtype) {
    case TFVM_F32: kgemm_f32(code, ta, tb, M, N, K, A, lda, B, ldb, C, ldc); break;
    case TFVM_F64: {
        const dev_blas_fns *blas = dev_blas();
        if (M == 1 && N > 1)
            blas->dgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, (int)(tb ? N : K),
                        (int)(tb ? K : N), 1.0, B, (int)ldb, A, xa, 0.0, C, 1);
        else if (N == 1)
            blas->dgemv(CblasRowMajor, opa, (int)(ta ? K : M), (int)(ta ? M : K), 1.0, A,
                        (int)lda, B, xb, 0.0, C, (int)ldc);
        else
            blas->dgemm(CblasRowMajor, opa, opb, (int)M, (int)N, (int)K, 1.0, A, (int)lda, B,
                        (int)ldb, 0.0, C, (int)ldc);
        break;
    }
    case TFVM_I32: KGEMM_INT(int32_t, uint32_t); break;
    default: KGEMM_INT(int64_t, uint64_t); break;
    }
}

void dev_kgemm(uint8_t dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
               int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc)
{
    kgemm(kgemm_code_for(ta, tb, M, N, K, ldc), dtype, ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
}

/* ---- Parallel gemm ------------------------------------------------------------------
 * One product split into row blocks of op(A) (or, when it has few rows,
 * column blocks of op(B)); each chunk runs one single-threaded gemm, by the
 * code chosen for the whole product, and then the epilogue of the block it
 * wrote, while that block is in cache. */
typedef struct kmm_job {
    dev_kmm m;
    kgemm_code code;
    const float *bp; /* op(B) prepacked (dev_kmm_prepack_b), or NULL */
    const float *abp; /* with bp, column blocks: op(A) packed for this call (dev_sgemm_abpacked), or NULL */
} kmm_job;

/* The epilogue of a block of C that sgemm has finished: C's (0, 0) is
 * element (row0, col0) of the result at base. */
typedef struct kmm_epi {
    const dev_kepi *ep;
    void *base;
    int64_t row0, col0;
} kmm_epi;

static void kmm_epi_block(const void *ctx, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols)
{
    const kmm_epi *e = ctx;
    dev_kepi_apply(e->ep, e->base, e->row0 + row0, nrows, e->col0 + col0, ncols);
}

/* ep as the micro-kernel's epilogue (dev_sg_kepi) of M rows of C, row
 * stride ldc, whose (0, 0) is the result's element (row0, col0): f32, at
 * most a RELU, a bias along C's rows (a convolution's channels) or along
 * its columns, r laid out as C; false where it is not that simple (or
 * does nothing) */
static bool kmm_kepi(const dev_kepi *ep, int64_t row0, int64_t col0, int64_t M, int64_t ldc, dev_sg_kepi *k)
{
    const int r = ep->rank;
    if (ep->dtype != TFVM_F32 || (ep->act && ep->act != ISA_OPT_ACT_RELU) || r < 1 || ep->len != ldc ||
        (!ep->bias && !ep->res && !ep->act))
        return false;
    *k = (dev_sg_kepi){.relu = ep->act == ISA_OPT_ACT_RELU, .ldr = ldc};
    if (ep->res)
        k->res = (const float *)(const void *)ep->res + row0 * ep->len + col0;
    if (!ep->bias)
        return true;
    int along = -1; /* the one dim the bias runs along */
    for (int j = 0; j < r; j++)
        if (ep->bstr[j] && (along >= 0 || ep->bstr[j] != 1 || j < r - 2))
            return false;
        else if (ep->bstr[j])
            along = j;
    const float *b = (const float *)(const void *)ep->bias;
    if (along == r - 1)
        k->bcol = b + col0;
    else if (along == r - 2 && ep->dims[r - 2] > 0 && row0 % ep->dims[r - 2] + M <= ep->dims[r - 2])
        k->brow = b + row0 % ep->dims[r - 2];
    else
        return false; /* (a bias that is one number: dev_kepi_apply's) */
    return true;
}

/* Whether m can be computed over its r (dev_kmm.in_place), but for the
 * epilogue's form (kmm_kepi) */
static bool kmm_over_r(const dev_kmm *m)
{
    return m->dtype == TFVM_F32 && !m->tb && !m->arows && m->ep && m->ep->res && dev_sgemm_one_kblock(m->K) &&
           kgemm_code_for(m->ta, m->tb, m->M, m->N, m->K, m->ldc) == KGEMM_OWN;
}

bool dev_kmm_in_place_ok(const dev_kmm *m)
{
    dev_sg_kepi k;
    return kmm_over_r(m) && kmm_kepi(m->ep, m->ep_row0, m->ep_col0, m->M, m->ldc, &k);
}

/* Rows [lo, lo + M) and columns [col0, col0 + N) of m's product by `code`,
 * single-threaded (A, B, C already offset to them), and their epilogue:
 * by our kernel block by block while each is in cache (from op(B) prepacked
 * when bp, whose column col0 this is, and then from op(A) packed for the
 * call when abp: rows [0, m->M) only), else over the whole block after. */
static void kmm_block(const dev_kmm *m, kgemm_code code, const float *bp, const float *abp, int64_t lo, int64_t M,
                      int64_t col0, int64_t N, const char *A, const char *B, char *C)
{
    const kmm_epi ctx = {m->ep, m->ep_base, m->ep_row0 + lo, m->ep_col0 + col0};
    /* (the epilogue in the kernel's stores only where C is r's memory: as a
     * pass over each block of C while it is in cache it costs the same,
     * 0.93-1.05x on 1x1 layers' products alone, and networks ran up to 5%
     * slower with it in the kernel) */
    dev_sg_kepi kep;
    const bool in_kernel = m->in_place && m->ep && kmm_kepi(m->ep, ctx.row0, ctx.col0, M, m->ldc, &kep);
    const dev_sg_epi epi = {kmm_epi_block, &ctx, in_kernel ? &kep : NULL}, *ep = m->ep ? &epi : NULL;
    const float *fa = (const float *)(const void *)A;
    float *fc = (float *)(void *)C;
    if (m->in_place) { /* (what dev_kmm_in_place_ok promised) */
        if (in_kernel && !bp && !abp && kmm_over_r(m) &&
            ((m->ap && dev_sgemm_apacked(m->ap, lo, m->M, M, N, m->K, (const float *)(const void *)B, m->ldb, fc,
                                         m->ldc, ep)) ||
             dev_sgemm(m->ta, false, M, N, m->K, fa, m->lda, (const float *)(const void *)B, m->ldb, fc, m->ldc,
                       ep)))
            return;
        if (m->failed)
            atomic_store(m->failed, true);
        return;
    }
    if (m->dtype == TFVM_F32 && code == KGEMM_OWN) {
        /* a block starting inside a panel of a prepacked operand computes
         * from the operand itself, with the same bits */
        if (abp && dev_sgemm_abpacked(abp, M, bp, col0, m->N, N, m->K, fc, m->ldc, ep))
            return;
        if (m->arows) { /* rows [lo, lo + M) of op(A) where they lie: there is no A to fall back on */
            const dev_sg_rows ar = {m->arows->base, m->arows->row + lo, m->arows->tap, m->arows->C};
            if ((!bp || !dev_sgemm_packed_rows(&ar, M, N, m->K, bp, col0, m->N, fc, m->ldc, ep)) && m->failed)
                atomic_store(m->failed, true);
            return;
        }
        if (bp && dev_sgemm_packed(m->ta, M, N, m->K, fa, m->lda, bp, col0, m->N, fc, m->ldc, ep))
            return;
        if (m->failed) { /* op(B) is there only packed */
            atomic_store(m->failed, true);
            return;
        }
        if (m->ap && !m->tb &&
            dev_sgemm_apacked(m->ap, lo, m->M, M, N, m->K, (const float *)(const void *)B, m->ldb, fc, m->ldc, ep))
            return;
        if (dev_sgemm(m->ta, m->tb, M, N, m->K, fa, m->lda, (const float *)(const void *)B, m->ldb, fc, m->ldc, ep))
            return;
    }
    kgemm(code, m->dtype, m->ta, m->tb, M, N, m->K, A, m->lda, B, m->ldb, C, m->ldc);
    if (m->ep)
        dev_kepi_apply(m->ep, m->ep_base, m->ep_row0 + lo, M, m->ep_col0 + col0, N);
}


static void kmm_chunk(void *arg, size_t b, size_t e)
{
    const kmm_job *j = arg;
    const dev_kmm *m = &j->m;
    const size_t esz = dev_kesize(m->dtype);
    const int64_t lo = (int64_t)b, n = (int64_t)(e - b);
    if (m->by_cols)
        kmm_block(m, j->code, j->bp, j->abp, 0, m->M, lo, n, m->A, m->B + (size_t)(m->tb ? lo * m->ldb : lo) * esz,
                  m->C + (size_t)lo * esz);
    else
        kmm_block(m, j->code, j->bp, NULL, lo, n, 0, m->N, m->A + (size_t)(m->ta ? lo : lo * m->lda) * esz, m->B,
                  m->C + (size_t)(lo * m->ldc) * esz);
}

/* A prepacked B bigger than this many floats (1 MiB, a core's L2) is split
 * by columns too: by rows every thread streamed all of it from L3 against
 * its few rows (resnet18's last 3x3 layers, 49 rows against 9 MiB of
 * weights, ran 1.55-1.63x faster on 2 threads than on 1) */
#define KMM_SHARED_B (INT64_C(1) << 18)
/* ... unless it has fewer than this many times as many columns as rows:
 * then by columns every thread packed all of A (a convolution's rows,
 * gathered again) for less B than it would have read by rows (resnet's 3x3
 * stride-2 layer onto 14x14, 196 rows against [1152, 256] of weights, 2
 * threads: 0.46 -> 0.40 ms by rows; its 49-row layers, 10x as many columns
 * as rows, unchanged) */
#define KMM_COLS_RATIO 4

/* How a product splits over `width` threads: by columns (true) or rows, n
 * of them at `cost` work units each. Columns when the product is wider than
 * tall and either has fewer than 8 rows per thread or a B packed on every
 * call (a convolution's activations): each chunk then packs only its own
 * columns of B, where row blocks would each pack all of it; else rows (a
 * prepacked weight B on the right, an MLP's). By columns, each column of B
 * is read by one chunk alone: with fewer than 8 rows that read, not the
 * multiply-adds, is the work (a squeeze-excite product, [1, 144] @ [144,
 * 576] from L3: 15-24 us for 83K multiply-adds, which counted as such ran
 * on one thread). */
static bool kmm_axis(const dev_kmm *m, bool packed_b, unsigned width, int64_t *n, int64_t *cost)
{
    const int64_t K = m->K ? m->K : 1;
    const bool by_cols =
        width > 1 && m->N > m->M &&
        (m->M < 8 * (int64_t)width || !packed_b || (m->N * K > KMM_SHARED_B && m->N >= KMM_COLS_RATIO * m->M));
    const int64_t other = by_cols ? m->M : m->N;
    *n = by_cols ? m->N : m->M;
    *cost = (by_cols && other < 8 ? 8 : other) * K;
    return by_cols;
}

bool dev_kmm_splits(const dev_kmm *m, bool packed_b, unsigned width)
{
    int64_t n, cost;
    kmm_axis(m, packed_b, width, &n, &cost);
    return dev_kpieces(n, cost, DEV_KPAR_MACS, width) > 1;
}

/* Panels [b, e) of a shared op(A) packed by the threads together */
typedef struct kmm_pack_rows {
    const dev_kmm *m;
    float *out;
} kmm_pack_rows;

static void kmm_pack_rows_chunk(void *arg, size_t b, size_t e)
{
    const kmm_pack_rows *t = arg;
    if (t->m->arows)
        dev_sgemm_pack_a_panels_rows(t->m->arows, t->m->M, t->m->K, (int64_t)b, (int64_t)e, t->out);
    else
        dev_sgemm_pack_a_panels(t->m->ta, true, t->m->M, t->m->K, (const float *)(const void *)t->m->A, t->m->lda,
                                (int64_t)b, (int64_t)e, t->out);
}

static void kmm_run(const dev_kmm *m, const float *bp)
{
    kmm_job job = {*m, kgemm_code_for(m->ta, m->tb, m->M, m->N, m->K, m->ldc), bp, NULL};
    const unsigned width = dev_par_width();
    int64_t n, cost;
    job.m.by_cols = kmm_axis(m, bp != NULL, width, &n, &cost);
    /* in blocks of whole tiles of our kernel (8 x 32 with AVX-512) */
    const int64_t tile = job.m.by_cols ? 32 : 8;
    size_t grain = dev_kgrain(n, cost, DEV_KPAR_MACS, tile);
    /* Column blocks each read all of op(A), row blocks each pack all of an
     * op(B) not packed before: one block a thread, not dev_kgrain's
     * shrinking blocks (2 threads: resnet's 512-channel 3x3 on 7x7 5%
     * faster, squeezenet's classifier, [1000, 512] @ [512, 169], 4% of the
     * network). Row blocks of a prepacked B, which they read where it lies,
     * were no faster so. */
    if ((job.m.by_cols || !bp) && grain < (size_t)n)
        grain = (size_t)(((n + width - 1) / width + tile - 1) / tile * tile);
    /* Column blocks of a prepacked B against an A packed on every call
     * (a convolution's rows): on more than 2 threads they pack A's panels
     * once, together, into the calling thread's kept buffer
     * (dev_sgemm_a_take), where each block's product packed all of A. On
     * 2, each block packs its own: reading the half the other core packed
     * cost more than packing it (resnet's 512-channel 3x3 on 7x7 8% slower
     * shared here; on a 16-core Xeon shared was 5-10% slower on 2 threads,
     * 5-15% faster on 4 to 16). */
    float *ap = NULL;
    if (width > 2 && job.m.by_cols && bp && !m->ap && m->dtype == TFVM_F32 && job.code == KGEMM_OWN &&
        dev_kpieces(n, cost, DEV_KPAR_MACS, width) > 1 &&
        (ap = dev_sgemm_a_take(dev_sgemm_packed_a_floats(m->M, m->K)))) {
        const int64_t mr = dev_sgemm_mr(), panels = (m->M + mr - 1) / mr;
        kmm_pack_rows pr = {m, ap};
        dev_par_for((size_t)panels, dev_kgrain(panels, mr * m->K, DEV_KPAR_MACS / 4, 1), kmm_pack_rows_chunk, &pr);
        job.abp = ap;
    }
    dev_par_for((size_t)n, grain, kmm_chunk, &job);
    if (ap)
        dev_sgemm_a_give(ap);
}

void dev_kmm_packed(const dev_kmm *m, const float *bp, bool split)
{
    if (split)
        kmm_run(m, bp);
    else
        kmm_block(m, kgemm_code_for(m->ta, m->tb, m->M, m->N, m->K, m->ldc), bp, NULL, 0, m->M, 0, m->N, m->A, m->B,
                  m->C);
}

void dev_kmm_run(const dev_kmm *m) { dev_kmm_packed(m, NULL, true); }

void dev_kmm_one(const dev_kmm *m) { dev_kmm_packed(m, NULL, false); }

/* ---- Prepacked weights --------------------------------------------------------------
 * An f32 product whose op(B) our kernel would pack (B transposed, or more
 * than a few rows) packs it once and keeps it with B's tensor
 * (dev_tensor_prep): weights are then packed once, not on every run; a B
 * that changes every run is packed once per run, as it was. NULL when it
 * does not apply or the tensor keeps no prepared form. */
/* op(B) packed as it lies, or (T > 0: B^T a convolution's weights [N, C *
 * T]) with K reordered tap-major */
typedef struct kmm_pack_job {
    bool tb;
    int64_t N, K, ldb, C, T;
    const float *B;
} kmm_pack_job;

static void kmm_pack_make(void *ctx, void *out)
{
    const kmm_pack_job *j = ctx;
    if (j->T)
        dev_sgemm_pack_taps(j->N, j->C, j->T, j->B, out);
    else
        dev_sgemm_pack(j->tb, j->N, j->K, j->B, j->ldb, out);
}

/* A B our kernel would read where it lies (dev_sgemm_packs_b: few rows of
 * A) is packed all the same when it is one of the program's constants
 * (dev_tensor_borrowed), packed once for every run: read where it lies, a
 * panel's rows are a row of B apart, a page or more for a layer's weights
 * [K, N] (GPT-2's, which multiply as they lie), which the prefetchers do
 * not follow ([32, 256] @ [256, 1024]: 138 -> 88 us, as fast as its
 * transposed twin). */
static const float *prepack_b(const dev_kmm *m, const dev_kview *b, int64_t C, int64_t T)
{
    if (m->dtype != TFVM_F32 || !b->t || m->ta || m->M == 0 || m->N == 0 || m->K == 0 ||
        kgemm_code_for(m->ta, m->tb, m->M, m->N, m->K, m->ldc) != KGEMM_OWN ||
        (!dev_sgemm_packs_b(m->tb, m->M, m->K, m->ldb) && !dev_tensor_borrowed(b->t)))
        return NULL;
    const struct {
        int64_t tag, nr, tb, N, K, ldb, C, T, offset;
    } key = {0x73674230 /* "sgB0" */, dev_sgemm_nr(), m->tb, m->N, m->K, m->ldb, C, T,
             (const char *)b->data - (const char *)b->t->data};
    kmm_pack_job job = {m->tb, m->N, m->K, m->ldb, C, T, (const float *)b->data};
    return dev_tensor_prep(b->t, &key, sizeof key, dev_sgemm_packed_floats(m->N, m->K) * sizeof(float),
                           kmm_pack_make, &job);
}

const float *dev_kmm_prepack_b(const dev_kmm *m, const dev_kview *b) { return prepack_b(m, b, 0, 0); }

const float *dev_kmm_prepack_b_taps(const dev_kmm *m, const dev_kview *b, int64_t C, int64_t T)
{
    return m->tb && T > 0 && m->K == C * T && m->ldb == m->K ? prepack_b(m, b, C, T) : NULL;
}

typedef struct kmm_pack_a_job {
    int64_t M, K, lda;
    const float *A;
} kmm_pack_a_job;

static void kmm_pack_a_make(void *ctx, void *out)
{
    const kmm_pack_a_job *j = ctx;
    dev_sgemm_pack_a(j->M, j->K, j->A, j->lda, out);
}

const float *dev_kmm_prepack_a(const dev_kmm *m, const dev_kview *a)
{
    if (m->dtype != TFVM_F32 || !a->t || m->ta || m->M == 0 || m->N == 0 || m->K == 0 ||
        kgemm_code_for(m->ta, m->tb, m->M, m->N, m->K, m->ldc) != KGEMM_OWN)
        return NULL;
    const struct {
        int64_t tag, mr, M, K, lda, offset;
    } key = {0x73674130 /* "sgA0" */, dev_sgemm_mr(), m->M, m->K, m->lda,
             (const char *)a->data - (const char *)a->t->data};
    kmm_pack_a_job job = {m->M, m->K, m->lda, (const float *)a->data};
    return dev_tensor_prep(a->t, &key, sizeof key, dev_sgemm_packed_a_floats(m->M, m->K) * sizeof(float),
                           kmm_pack_a_make, &job);
}

/* A batch of products: matrices [b, e) of it, each at the offsets of its batch index. */
typedef struct mm_batch {
    dev_kmm mm; /* matrix 0 */
    int nbat;
    int64_t bd[TFVM_MAX_RANK], sa[TFVM_MAX_RANK], sb[TFVM_MAX_RANK];
    bool split; /* fewer matrices than threads: one at a time, each split */
} mm_batch;

static void mm_batch_chunk(void *arg, size_t b, size_t e)
{
    const mm_batch *j = arg;
    const bool split = j->split;
    const dev_kmm *m = &j->mm;
    const size_t esz = dev_kesize(m->dtype);
    int64_t idx[TFVM_MAX_RANK] = {0}, oa = 0, ob = 0, rest = (int64_t)b;
    for (int d = j->nbat - 1; d >= 0; d--) {
        idx[d] = rest % j->bd[d];
        rest /= j->bd[d];
        oa += idx[d] * j->sa[d];
        ob += idx[d] * j->sb[d];
    }
    for (int64_t t = (int64_t)b; t < (int64_t)e; t++) {
        char *cp = m->C + (size_t)(t * m->M * m->N) * esz;
        /* matrix t is rows [t*M, t*M + M) of the result */
        dev_kmm one = *m;
        one.A += (size_t)oa * esz;
        one.B += (size_t)ob * esz;
        one.C = cp;
        one.ep_row0 = t * m->M;
        if (split)
            dev_kmm_run(&one);
        else
            dev_kmm_one(&one);
        for (int d = j->nbat - 1; d >= 0; d--) {
            oa += j->sa[d];
            ob += j->sb[d];
            if (++idx[d] < j->bd[d])
                break;
            oa -= j->sa[d] * j->bd[d];
            ob -= j->sb[d] * j->bd[d];
            idx[d] = 0;
        }
    }
}

/* ---- MATMUL ---------------------------------------------------------------------
 * A rank-1 a is a row [1, K] and a rank-1 b a column [K, 1], and that dim is
 * dropped from the result (NumPy); ta/tb do not apply to them. Other leading
 * dims are batch dims and broadcast. */
tfvm_status dev_cpu_matmul(dev_kctx *k, const dev_kview *in, dev_value *out)
{
    const dev_kview *a = &in[0], *b = &in[1];
    char s1[DEV_KSHAPE], s2[DEV_KSHAPE];
    if (a->dtype != b->dtype)
        return dev_kfail(k, TFVM_ERR_TYPE, "dtype mismatch: %s and %s", dev_kdesc(a, s1),
                         dev_kdesc(b, s2));
    if (a->dtype == TFVM_BOOL)
        return dev_kfail(k, TFVM_ERR_TYPE, "not defined on bool");
    tfvm_status ready = dev_kgemm_ready(k, a->dtype);
    if (ready)
        return ready;
    if (a->rank == 0 || b->rank == 0)
        return dev_kfail(k, TFVM_ERR_SHAPE, "operands need rank >= 1, got %s and %s",
                         dev_kshape(a, s1), dev_kshape(b, s2));
    const bool va = a->rank == 1, vb = b->rank == 1;
    const bool ta = !va && (k->attr & ISA_OPT_TRANS_A), tb = !vb && (k->attr & ISA_OPT_TRANS_B);
    /* Stored matrix shapes (rows x cols) and the product's M, K, N. */
    const int64_t ar = va ? 1 : a->dims[a->rank - 2], ac = a->dims[a->rank - 1];
    const int64_t br = vb ? b->dims[0] : b->dims[b->rank - 2], bc = vb ? 1 : b->dims[b->rank - 1];
    const int64_t M = ta ? ac : ar, Ka = ta ? ar : ac;
    const int64_t Kb = tb ? bc : br, N = tb ? br : bc;
    if (Ka != Kb)
        return dev_kfail(k, TFVM_ERR_SHAPE, "inner dims differ: %s%s and %s%s", dev_kshape(a, s1),
                         ta ? " (transposed)" : "", dev_kshape(b, s2), tb ? " (transposed)" : "");
    const int64_t K = Ka;

    /* Batch dims, right-aligned and broadcast; sa/sb step a and b by whole
     * matrices (0 where broadcast). */
    const int na = a->rank > 2 ? a->rank - 2 : 0, nb = b->rank > 2 ? b->rank - 2 : 0;
    const int nbat = na > nb ? na : nb;
    int64_t bd[TFVM_MAX_RANK], sa[TFVM_MAX_RANK], sb[TFVM_MAX_RANK];
    int64_t acc_a = ar * ac, acc_b = br * bc;
    for (int j = nbat - 1; j >= 0; j--) {
        const int ja = j - (nbat - na), jb = j - (nbat - nb);
        const int64_t da = ja >= 0 ? a->dims[ja] : 1, db = jb >= 0 ? b->dims[jb] : 1;
        if (da != db && da != 1 && db != 1)
            return dev_kfail(k, TFVM_ERR_SHAPE, "batch dims do not broadcast: %s and %s",
                             dev_kshape(a, s1), dev_kshape(b, s2));
        bd[j] = da == 1 ? db : da;
        sa[j] = da == 1 ? 0 : acc_a;
        sb[j] = db == 1 ? 0 : acc_b;
        acc_a *= da;
        acc_b *= db;
    }
    int64_t od[TFVM_MAX_RANK];
    int orank = 0;
    for (int j = 0; j < nbat; j++)
        od[orank++] = bd[j];
    if (!va)
        od[orank++] = M;
    if (!vb)
        od[orank++] = N;
    int64_t batch;
    if (!dev_kcount(nbat, bd, &batch))
        return dev_kfail(k, TFVM_ERR_SHAPE, "result too large: %s and %s", dev_kshape(a, s1),
                         dev_kshape(b, s2));
    if (!dev_kgemm_fits(M) || !dev_kgemm_fits(N) || !dev_kgemm_fits(K))
        return dev_kfail(k, TFVM_ERR_SHAPE, "dims too large for BLAS: %s and %s", dev_kshape(a, s1),
                         dev_kshape(b, s2));

    /* FUSED_MATMUL: the bias and activation, applied to each gemm's rows */
    dev_kepi epi, *ep = NULL;
    tfvm_status st;
    if (k->op == ISA_FUSED_MATMUL) {
        if ((st = dev_kepi_init(k, &epi, a, &in[2], in[2].rank, in[2].dims, orank, od)))
            return st;
        ep = &epi;
    }
    dev_value r;
    void *c;
    if ((st = dev_kresult(k, a->dtype, orank, od, &r, &c)))
        return st;
    /* the result's rows (of its last dim), for the epilogue */
    const int64_t epi_all = ep && epi.len ? batch * (va ? 1 : M) * (vb ? 1 : N) / epi.len : 0;
    bool b_shared = true, a_full = !ta;
    for (int j = 0; j < nbat; j++) {
        b_shared &= sb[j] == 0;
        a_full &= bd[j] == 1 || sa[j] != 0;
    }
    if (batch > 0 && b_shared && a_full && batch <= INT_MAX && dev_kgemm_fits(batch * M)) {
        /* Every a matrix meets the same b and the a matrices lie back to back:
         * one gemm of [batch * M, K] @ [K, N] (an MLP's hot case). Its rows
         * are the result's rows unless b is a vector (then the epilogue runs
         * once at the end, over the [batch * M] result). */
        const dev_kmm mm = {.dtype = a->dtype, .tb = tb, .M = batch * M, .N = N, .K = K, .A = a->data, .lda = ac,
                            .B = b->data, .ldb = bc, .C = c, .ldc = N, .ep = vb ? NULL : ep, .ep_base = c};
        kmm_run(&mm, dev_kmm_prepack_b(&mm, b));
        if (ep && vb)
            dev_kepi_apply(ep, c, 0, epi_all, 0, ep->len);
    } else if (batch > 0) {
        mm_batch job = {{.dtype = a->dtype, .ta = ta, .tb = tb, .M = M, .N = N, .K = K, .A = a->data, .lda = ac,
                         .B = b->data, .ldb = bc, .C = c, .ldc = N, .ep = va || vb ? NULL : ep, .ep_base = c},
                        nbat, {0}, {0}, {0}, batch < (int64_t)dev_par_width()};
        memcpy(job.bd, bd, sizeof bd);
        memcpy(job.sa, sa, sizeof sa);
        memcpy(job.sb, sb, sizeof sb);
        /* whole matrices per chunk */
        if (job.split)
            mm_batch_chunk(&job, 0, (size_t)batch);
        else
            dev_par_for((size_t)batch, dev_kgrain(batch, M * N * (K ? K : 1), DEV_KPAR_MACS, 1), mm_batch_chunk, &job);
        if (ep && (va || vb))
            dev_kepi_apply(ep, c, 0, epi_all, 0, ep->len);
    }
    *out = r;
    return TFVM_OK;
}
