/* devices/cpu/sgemm.c — tfvm's own f32 matrix product (sgemm.h): op(A) and
 * op(B) packed into panels, a register-blocked micro-kernel per instruction
 * set (sgemm_body.h), blocks sized for the caches (docs/devices.md, "Kernel
 * notes"). */
#include "devices/cpu/sgemm.h"
#include "devices/cpu/f4.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* One micro-kernel: see sgemm_body.h. */
typedef void sg_kern_fn(int64_t kc, const float *restrict a, const float *restrict b, int64_t ldb,
                        float *restrict c, int64_t ldc, int64_t nr, bool add, bool ahead, const float *pf,
                        int64_t npf, const dev_sg_kepi *e);

/* dev_sg_kepi on element (i, j) of a tile (a tile cut by C's edge) */
static inline float sg_eps(const dev_sg_kepi *e, float y, int64_t i, int64_t j)
{
    if (e->brow)
        y += e->brow[i];
    else if (e->bcol)
        y += e->bcol[j];
    if (e->res)
        y += e->res[i * e->ldr + j];
    else if (e->relu && !e->brow && !e->bcol)
        y += 0.0f;
    return e->relu && y < 0.0f ? 0.0f : y;
}

/* Rows [0, m) x columns [0, kc) of src (row stride ld, 0 < m <= 8) into
 * columns [0, 8) of dst (row stride nr): dst[p][j] = src[j][p], columns
 * [m, 8) holding row m - 1 again. */
typedef void sg_t8_fn(const float *src, int64_t ld, int64_t kc, int64_t m, float *dst, int64_t nr);
/* The same from eight row pointers (rows repeated where there are fewer) */
typedef void sg_t8r_fn(const float *const *row, int64_t kc, float *dst, int64_t nr);
/* y[j] = x . R[j], j < n: see sgemm_body.h */
typedef void sg_dots_fn(int64_t n, int64_t K, const float *restrict x, const float *restrict R, int64_t ldr,
                        float *restrict y);
/* a recurrent step's product by blocks of units: see sgemm_body.h */
typedef void sg_gates_fn(int64_t G, int64_t H, int64_t K, int64_t kc_step, const float *restrict x,
                         const float *restrict b, float *restrict y, int64_t b0, int64_t b1, bool down);
#define SG_MR_MAX 8
typedef struct sg_impl {
    int64_t mr, nr;                    /* the tile: rows of op(A) x columns of op(B) */
    sg_kern_fn *kern[SG_MR_MAX + 1];   /* by rows, 1..mr */
    sg_kern_fn *half[SG_MR_MAX + 1];   /* by rows, one vector wide (nr / 2 columns) */
    int64_t w1;                        /* columns of wide[1] */
    sg_kern_fn *wide[3];               /* 1 row by w1 columns, 2 rows by 2 * nr */
    sg_t8_fn *t8;                      /* NULL: packing op(B) = B^T goes element by element */
    sg_dots_fn *dots;
    sg_gates_fn *gemv_gates;
    const char *name;
    sg_t8r_fn *t8r;                    /* NULL: packing op(A) from row pointers goes element by element */
} sg_impl;

/* ---- Portable: GCC vector extensions (SSE2 on x86-64), 4 x 8 tiles ---- */
typedef dev_f4 sg_v4;

#define SG_VF sg_v4
#define SG_VL 4
#define SG_MR 4
#define SG_NV 2
#define SG_W1 8
#define SG_TARGET
#define SG_SFX(n) n##_v4
#define VLD(p) dev_f4_ld(p)
#define VST(p, v) dev_f4_st(p, v)
#define VBC(x) ((sg_v4){(x), (x), (x), (x)})
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VADD(a, b) ((a) + (b))
#define VZERO() ((sg_v4){0, 0, 0, 0})
#define VHSUM(v) (((v)[0] + (v)[2]) + ((v)[1] + (v)[3]))
typedef int32_t sg_i4 __attribute__((vector_size(16)));
#define VRELU(x) ((sg_v4)((sg_i4)(x) & ~((x) < VZERO())))
#include "devices/cpu/sgemm_body.h"
#undef SG_VF
#undef SG_VL
#undef SG_MR
#undef SG_NV
#undef SG_W1
#undef SG_TARGET
#undef SG_SFX
#undef VLD
#undef VST
#undef VBC
#undef VFMA
#undef VADD
#undef VZERO
#undef VHSUM
#undef VRELU

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "devices/cpu/chw.h"
#define SG_X86 1

/* the 8 lanes' sum: halves, then pairs, then the last two */
__attribute__((target("avx2"))) static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- AVX2 + FMA: 6 x 16 tiles (12 accumulators of the 16 registers) ---- */
#define SG_VF __m256
#define SG_VL 8
#define SG_MR 6
#define SG_NV 2
#define SG_W1 8
#define SG_TARGET __attribute__((target("avx2,fma")))
#define SG_SFX(n) n##_avx2
#define VLD(p) _mm256_loadu_ps(p)
#define VST(p, v) _mm256_storeu_ps(p, v)
#define VBC(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VADD(a, b) _mm256_add_ps(a, b)
#define VZERO() _mm256_setzero_ps()
#define VHSUM(v) hsum8(v)
#define VRELU(x) _mm256_blendv_ps(x, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ))
#include "devices/cpu/sgemm_body.h"
#undef SG_VF
#undef SG_VL
#undef SG_MR
#undef SG_NV
#undef SG_W1
#undef SG_TARGET
#undef SG_SFX
#undef VLD
#undef VST
#undef VBC
#undef VFMA
#undef VADD
#undef VZERO
#undef VHSUM
#undef VRELU

/* Eight rows at a time, 8 x 8 blocks transposed in registers (chw.h's
 * tr8), each column stored 8 lanes wide in column order: with nr < 8 (the
 * 6-row panels of A for AVX2's tiles) a column's lanes past nr land on the
 * next column's first ones, which it then overwrites, and the panel's last
 * column is stored nr wide; the last kc % 8 columns one by one. */
__attribute__((target("avx2"))) static void t8r_avx2(const float *const *row, int64_t kc, float *dst, int64_t nr)
{
    int64_t p = 0;
    for (; p + 8 <= kc; p += 8) {
        __m256 r[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            r[j] = _mm256_loadu_ps(row[j] + p);
        tr8(r);
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++)
            if (nr >= 8 || p + q + 1 < kc)
                _mm256_storeu_ps(dst + (p + q) * nr, r[q]);
            else
                _mm256_maskstore_ps(dst + (p + q) * nr, v8_mask(nr), r[q]);
    }
    for (; p < kc; p++)
        for (int j = 0; j < (nr < 8 ? nr : 8); j++)
            dst[p * nr + j] = row[j][p];
}

__attribute__((target("avx2"))) static void t8_avx2(const float *src, int64_t ld, int64_t kc, int64_t m, float *dst,
                                                    int64_t nr)
{
    const float *row[8];
    for (int j = 0; j < 8; j++)
        row[j] = src + (j < m ? j : m - 1) * ld;
    t8r_avx2(row, kc, dst, nr);
}

/* ---- AVX-512: 8 x 32 tiles (16 accumulators of the 32 registers) ---- */
#define SG_VF __m512
#define SG_VL 16
#define SG_MR 8
#define SG_NV 2
#define SG_W1 16
#define SG_TARGET __attribute__((target("avx512f")))
#define SG_SFX(n) n##_avx512
#define VLD(p) _mm512_loadu_ps(p)
#define VST(p, v) _mm512_storeu_ps(p, v)
#define VBC(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VADD(a, b) _mm512_add_ps(a, b)
#define VZERO() _mm512_setzero_ps()
#define VHSUM(v) _mm512_reduce_add_ps(v)
#define VRELU(x) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), x, _mm512_setzero_ps())
#include "devices/cpu/sgemm_body.h"
#undef SG_VF
#undef SG_VL
#undef SG_MR
#undef SG_NV
#undef SG_W1
#undef SG_TARGET
#undef SG_SFX
#undef VLD
#undef VST
#undef VBC
#undef VFMA
#undef VADD
#undef VZERO
#undef VHSUM
#undef VRELU
#endif

static const sg_impl impls[DEV_SG_N_ISA] = {
    [DEV_SG_PORTABLE] = {4, 8, {NULL, k1_v4, k2_v4, k3_v4, k4_v4}, {NULL, h1_v4, h2_v4, h3_v4, h4_v4}, 32,
                         {NULL, w1_v4, w2_v4}, NULL, dots_v4, gemv_gates_v4, "portable", NULL},
#ifdef SG_X86
    [DEV_SG_AVX2] = {6, 16, {NULL, k1_avx2, k2_avx2, k3_avx2, k4_avx2, k5_avx2, k6_avx2},
                     {NULL, h1_avx2, h2_avx2, h3_avx2, h4_avx2, h5_avx2, h6_avx2}, 64, {NULL, w1_avx2, w2_avx2},
                     t8_avx2, dots_avx2, gemv_gates_avx2, "avx2", t8r_avx2},
    [DEV_SG_AVX512] = {8, 32, {NULL, k1_avx512, k2_avx512, k3_avx512, k4_avx512, k5_avx512, k6_avx512, k7_avx512, k8_avx512},
                       {NULL, h1_avx512, h2_avx512, h3_avx512, h4_avx512, h5_avx512, h6_avx512, h7_avx512, h8_avx512},
                       256, {NULL, w1_avx512, w2_avx512}, t8_avx2, dots_avx512, gemv_gates_avx512,
                       "avx512", t8r_avx2},
#else
    [DEV_SG_AVX2] = {.name = "avx2"},
    [DEV_SG_AVX512] = {.name = "avx512"},
#endif
};

bool dev_sg_have(dev_sg_isa isa)
{
    switch (isa) {
    case DEV_SG_PORTABLE: return true;
#ifdef SG_X86
    case DEV_SG_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case DEV_SG_AVX512: /* its B^T packing is AVX2's */
        return __builtin_cpu_supports("avx512f") && dev_sg_have(DEV_SG_AVX2);
#endif
    default: return false;
    }
}

dev_sg_isa dev_sg_best(void)
{
    return dev_sg_have(DEV_SG_AVX512) ? DEV_SG_AVX512 : dev_sg_have(DEV_SG_AVX2) ? DEV_SG_AVX2 : DEV_SG_PORTABLE;
}

const char *dev_sg_name(dev_sg_isa isa) { return (unsigned)isa < DEV_SG_N_ISA ? impls[isa].name : "?"; }

/* ---- Scratch ------------------------------------------------------------------------
 * The packed panels live in one buffer per thread, kept for the thread's
 * next product and freed when the thread ends (a VM's workers call this
 * from every chunk of a split product). */
typedef struct sg_buf {
    size_t cap; /* floats */
    float *data;
} sg_buf;

static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static bool buf_ok;

static void buf_free(void *p)
{
    sg_buf *b = p;
    free(b->data);
    free(b);
}

/* A second one holds an op(A) packed once for the threads of a split
 * product (dev_sgemm_a_take): a buffer malloc'd on every call had its
 * pages faulted in again each time (a 7x7 layer's 0.9 MB: 10% of it) */
static pthread_key_t a_key;
static bool a_ok;

static void buf_init(void)
{
    buf_ok = pthread_key_create(&buf_key, buf_free) == 0;
    a_ok = pthread_key_create(&a_key, buf_free) == 0;
}

/* The buffer of `key` for this thread, of at least `floats` */
static float *thread_buf(pthread_key_t key, bool ok, size_t floats)
{
    if (!ok)
        return NULL;
    sg_buf *b = pthread_getspecific(key);
    if (b && b->cap >= floats)
        return b->data;
    if (!b) {
        if (!(b = calloc(1, sizeof *b)))
            return NULL;
        if (pthread_setspecific(key, b) != 0) {
            free(b);
            return NULL;
        }
    }
    free(b->data);
    b->cap = 0;
    if (!(b->data = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64)))
        return NULL;
    b->cap = floats;
    return b->data;
}

static float *scratch(size_t floats)
{
    pthread_once(&buf_once, buf_init);
    return thread_buf(buf_key, buf_ok, floats);
}

/* Whether this thread's shared-A buffer is lent out (a product this thread
 * runs while it waits for the threads of another gets its own) */
static _Thread_local bool a_taken;

float *dev_sgemm_a_take(size_t floats)
{
    pthread_once(&buf_once, buf_init);
    if (a_taken)
        return aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    float *p = thread_buf(a_key, a_ok, floats);
    a_taken = p != NULL;
    return p;
}

void dev_sgemm_a_give(float *p)
{
    const sg_buf *b = a_ok ? pthread_getspecific(a_key) : NULL;
    if (b && p == b->data)
        a_taken = false;
    else
        free(p);
}

/* ---- Packing ------------------------------------------------------------------------
 * A block of op(A), rows [i0, i0 + mc) x [p0, p0 + kc), as panels of mr
 * rows: ap[panel][p][i] (an edge panel's rows past the end are never read;
 * a prepacked A has them 0). A block of op(B), [p0, p0 +
 * kc) x columns [j0, j0 + nc), as panels of nr columns: bp[panel][p][j],
 * columns past the end 0. op(X)[r][c] is X[c][r] when transposed. */
/* The row panels of a block of mc rows of op(A): with `even`,
 * ceil(mc / mr) panels whose heights differ by one at most (49 rows as 7
 * of 7, not 6 of 8 and one of 1, whose tile keeps too few sums in flight
 * to hide the multiply-adds' latency: resnet's 7x7 layers spent 5% of
 * their time in it); else mr rows each (a prepacked A's), the last
 * shorter. Panel i starts at row panel_row(q, i) and is stored at i * kc
 * * mr of the packed block. */
typedef struct sg_panels {
    int64_t n, base, extra, mc;
} sg_panels;

static sg_panels panels_of(int64_t mc, int64_t mr, bool even)
{
    const int64_t n = (mc + mr - 1) / mr;
    return even && n > 0 ? (sg_panels){n, mc / n, mc % n, mc} : (sg_panels){n, mr, 0, mc};
}

static int64_t panel_row(const sg_panels *q, int64_t i)
{
    const int64_t r = i * q->base + (i < q->extra ? i : q->extra);
    return r < q->mc ? r : q->mc;
}

/* Panels [pa, pb) of q (ap: panel pa's place) */
static void pack_a(bool ta, const float *A, int64_t lda, int64_t i0, const sg_panels *q, int64_t pa, int64_t pb,
                   int64_t p0, int64_t kc, int64_t mr, float *ap, sg_t8_fn *t8)
{
    for (int64_t pi = pa; pi < pb; pi++, ap += kc * mr) {
        const int64_t ir = panel_row(q, pi), m = panel_row(q, pi + 1) - ir;
        if (ta) { /* (a convolution's image as A: a row's m floats a copy, of a constant size for a whole
                   * panel, inlined: with a call each, [196, 288] @ [288, 96] took 145 us, not 121) */
            const float *src = A + p0 * lda + i0 + ir;
#define PACK_TA(W)                                                                                             \
    for (int64_t p = 0; p < kc; p++, src += lda)                                                               \
        memcpy(ap + p * mr, src, (size_t)(W) * sizeof *src);
            switch (m) {
            case 4: PACK_TA(4) break;
            case 6: PACK_TA(6) break;
            case 8: PACK_TA(8) break;
            default: PACK_TA(m) break;
            }
#undef PACK_TA
            continue;
        }
        if (t8 && (mr == 8 || mr == 6) && m >= 4) { /* (AVX2's 6-row panels: 0.40 -> 0.20 ns a float) */
            t8(A + (i0 + ir) * lda + p0, lda, kc, m, ap, mr);
            continue;
        }
        /* rows m..mr of an edge panel are never read (a tile of m rows
         * reads a[0..m)): no zeros for them, which for M = 1 cost more than
         * the product */
        for (int64_t i = 0; i < m; i++) {
            const float *src = A + (i0 + ir + i) * lda + p0;
            for (int64_t p = 0; p < kc; p++)
                ap[p * mr + i] = src[p];
        }
    }
}

/* The same, op(A)'s rows given by ar (dev_sg_rows): a panel's columns
 * [p0, p0 + kc) go a tap's run at a time, eight row pointers each */
static void pack_a_rows(const dev_sg_rows *ar, int64_t i0, const sg_panels *q, int64_t pa, int64_t pb, int64_t p0,
                        int64_t kc, int64_t mr, float *ap, sg_t8r_fn *t8r)
{
    const int64_t C = ar->C;
    for (int64_t pi = pa; pi < pb; pi++, ap += kc * mr) {
        const int64_t ir = i0 + panel_row(q, pi), m = panel_row(q, pi + 1) - panel_row(q, pi);
        for (int64_t k = p0; k < p0 + kc;) {
            const int64_t t = k / C, c = k - t * C, n = (t + 1) * C < p0 + kc ? (t + 1) * C - k : p0 + kc - k;
            const float *row[8];
            for (int64_t j = 0; j < 8; j++)
                row[j] = ar->base + ar->row[ir + (j < m ? j : m - 1)] + ar->tap[t] + c;
            float *dst = ap + (k - p0) * mr;
            if (t8r && (mr == 8 || mr == 6))
                t8r(row, n, dst, mr);
            else
                for (int64_t i = 0; i < m; i++)
                    for (int64_t p = 0; p < n; p++)
                        dst[p * mr + i] = row[i][p];
            k += n;
        }
    }
}

/* B's rows [p0, p0 + kc), columns [j0, j0 + nc), into the panels at bp,
 * a row of B at a time: one stream read in order. Going a panel at a time
 * read the kc rows a panel's width each, kc streams a row of B apart (a
 * plane of a convolution's x), more than the prefetchers follow: the copy
 * took 9% of a SiLU network's time. Whole panels go by copies of a
 * constant size (a call each, otherwise). */
#define PACK_ROWS(W)                                                                                           \
    for (int64_t p = 0; p < kc; p++)                                                                           \
        for (int64_t jr = 0; jr < nfull; jr += (W))                                                            \
            memcpy(bp + jr * kc + p * (W), B + (p0 + p) * ldb + j0 + jr, (size_t)(W) * sizeof *bp)
static void pack_b_rows(const float *B, int64_t ldb, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr,
                        float *bp)
{
    const int64_t nfull = nc / nr * nr, n = nc - nfull;
    if (nr == 16)
        PACK_ROWS(16);
    else if (nr == 32)
        PACK_ROWS(32);
    else if (nr == 8)
        PACK_ROWS(8);
    else
        PACK_ROWS(nr);
    if (n == 0)
        return;
    bp += nfull * kc;
    for (int64_t p = 0; p < kc; p++) {
        memcpy(bp + p * nr, B + (p0 + p) * ldb + j0 + nfull, (size_t)n * sizeof *bp);
        memset(bp + p * nr + n, 0, (size_t)(nr - n) * sizeof *bp);
    }
}
#undef PACK_ROWS

static void pack_b(bool tb, const float *B, int64_t ldb, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr,
                   float *bp, sg_t8_fn *t8)
{
    if (!tb) {
        pack_b_rows(B, ldb, p0, kc, j0, nc, nr, bp);
        return;
    }
    for (int64_t jr = 0; jr < nc; jr += nr, bp += kc * nr) {
        const int64_t n = nc - jr < nr ? nc - jr : nr;
        const float *src = B + (j0 + jr) * ldb + p0;
        int64_t j = 0;
        if (t8)
            for (; j + 8 <= n; j += 8)
                t8(src + j * ldb, ldb, kc, 8, bp + j, nr);
        for (; j < nr; j++)
            for (int64_t p = 0; p < kc; p++)
                bp[p * nr + j] = j < n ? src[j * ldb + p] : 0;
    }
}

/* ---- The product ----------------------------------------------------------------------
 * Blocks: mc x kc of op(A) (in L2), kc x nc of op(B) (in L2 or L3). K is
 * cut into even blocks of at most SG_KC that depend on K alone (the sums
 * of an element, in order, are then the same in any row or column block of
 * C). With few rows (at most SG_DIRECT_M), each panel of B would be read
 * once: the micro-kernel reads B where it lies instead, and only a last
 * partial panel is packed (unless B's rows alias in L1: sg_rows_alias).
 *
 * Within a block the tiles go a row of tiles at a time (mr rows of C,
 * left to right): C is written as mr sequential streams, and an epilogue
 * follows each row of tiles while it is in L1. Going down a column of
 * tiles first (the classic order, which keeps a kc x nr panel of B in L1)
 * writes mc streams at once: where C does not fit in the caches (a 1x1
 * convolution's [96, 12544] result at batch 8) that took up to twice as
 * long (37 against 85 GFLOP/s for K = 16); this core reads B's block from
 * L2 or L3 as fast as the micro-kernel uses it. But with few rows (at most
 * SG_DIRECT_M) against prepacked weights, each row of tiles read the whole
 * block of B again, which a wide block does not leave in L2 ([49, 512] @
 * [512, 2048], a 1x1 layer onto 7x7: 123 GFLOP/s, 98 with B from memory),
 * and the first row read it from memory at the kernel's pace: there a
 * column of tiles at a time reads each panel of B once (159 and 136
 * GFLOP/s; resnet50 b1 5% faster), its C as small as its rows are few.
 * Each tile is the same call in either order: the same bits. The last
 * partial panel of a packed B goes through half-wide tiles when it holds
 * at most half a tile's columns. */
#define SG_KC 256
#define SG_MC 120
#define SG_NC 2048
#define SG_STEP_NC 128
/* A block of B, where the product packs it or reads it prepacked, holds at
 * most this many floats (1 MiB, half a core's L2): each row of tiles reads
 * all of it again, and a block of 2 MiB (K = 256 by 2048 columns) came
 * from L3 slower than the micro-kernel uses it (a 1x1 layer 256 -> 128
 * channels on 56x56, resnet50's, 1.65-1.82 -> 1.50 ms) */
#define SG_B_FLOATS (INT64_C(1) << 18)
#define SG_DIRECT_M 64
/* A direct product over at most this many steps of K goes a row of tiles
 * at a time too: its tiles are short, and a column of them keeps mc
 * streams of C open, one store each per few steps (a 1x1 layer 16 -> 48
 * channels on 112x112: 63 -> 75 GFLOP/s, 32 -> 16 54 -> 69; at K = 24
 * 5-7% faster; at K = 32 the same; from K = 40 on 5-10% slower, where a
 * row of tiles reads more of B again than L2 keeps) */
#define SG_DIRECT_ROWS_K 32
/* With an epilogue, a direct product's block of C is at most this many
 * floats (L2-resident when the epilogue reads it back) */
#define SG_EPI_FLOATS (INT64_C(1) << 16)
/* A block of C at most this many floats stays in L1 for its epilogue */
#define SG_EPI_L1 4096

/* Whether a panel of kc rows of B read where it lies, ldb floats apart,
 * falls into fewer of L1's sets than hold it. An x86 L1 has 64 sets of
 * 64-byte lines (its size over its ways is one 4 KiB page), 8 ways or more:
 * rows a multiple of 2^k lines apart use 64 / 2^k of the sets. A row
 * stride of 1024 floats (a 1x1 layer on 32x32, or any [.., 1024] matrix)
 * puts every row's line in one set, and the kernel's tiles thrashed it:
 * packing B first (each panel then shared by the tiles of every row
 * panel) took [36, 64] x [64, 2048] from 54 to 69 GFLOP/s, [48, 32] x [32,
 * 1024] 57 -> 72, [32, 128] x [128, 4096] 44 -> 63, [32, 64] x [64,
 * 12544] (112x112, rows in 4 sets) 57 -> 66; with 16 rows ([16, 64] x
 * [64, 1024]: three row panels) 4% slower, so not below SG_ALIAS_M rows. */
#define SG_ALIAS_M 24
static bool sg_rows_alias(int64_t ldb, int64_t kc)
{
    const int64_t bytes = ldb * (int64_t)sizeof(float);
    if (bytes % 64)
        return false; /* (rows at varying offsets in their lines: spread over the sets) */
    int64_t apart = 1; /* the largest power of two, up to 64, dividing the stride in lines */
    while (apart < 64 && bytes / 64 % (2 * apart) == 0)
        apart *= 2;
    return 64 / apart * 8 < kc;
}

static int64_t even(int64_t n, int64_t most)
{
    const int64_t pieces = (n + most - 1) / most;
    return (n + pieces - 1) / pieces;
}

static int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

/* The prepacked operands of a product, or NULLs: op(B) packed whole
 * (dev_sgemm_pack, Np columns rounded up to NR), C's column 0 being its
 * column bj0, a multiple of NR; A packed whole (dev_sgemm_pack_a, Mp rows
 * rounded up to MR), C's row 0 being its row ai0, a multiple of MR. */
typedef struct sg_pre {
    const float *b;
    int64_t bj0, Np;
    const float *a;
    int64_t ai0, Mp;
    bool a_even; /* A's panels even in each block of rows, as sg_run packs them (ai0 0, M all of A) */
    bool steps, down; /* steps of a loop (dev_sgemm_packed_down); down: B's blocks and panels last first */
    const dev_sg_rows *ar; /* op(A)'s rows where they lie (dev_sgemm_packed_rows), or NULL */
} sg_pre;

/* The in-kernel epilogue k (at C's (0, 0)) at C's element (i, j) into buf,
 * or NULL without one */
static const dev_sg_kepi *kepi_at(const dev_sg_kepi *k, int64_t i, int64_t j, dev_sg_kepi *buf)
{
    if (!k)
        return NULL;
    *buf = *k;
    buf->brow = k->brow ? k->brow + i : NULL;
    buf->bcol = k->bcol ? k->bcol + j : NULL;
    buf->res = k->res ? k->res + i * k->ldr + j : NULL;
    return buf;
}

/* The tile of mr rows (ap: their packed A) and the nr <= NR columns of C
 * from jr on: from B where it lies (direct, a whole panel: b, ldb at the
 * block's first column), else from the packed block bp (direct: only its
 * last partial panel, there) */
static inline void sg_tile(const sg_impl *im, int64_t kc, int64_t mr, const float *ap, bool direct, bool whole,
                           const float *b, int64_t ldb, const float *bp, int64_t jr, int64_t nc, float *c,
                           int64_t ldc, bool acc, bool ahead, const float *pf, int64_t npf, const dev_sg_kepi *e)
{
    const int64_t NR = im->nr, nr = nc - jr < NR ? nc - jr : NR;
    dev_sg_kepi at;
    e = kepi_at(e, 0, jr, &at); /* (e is at c's (0, 0): to the tile's) */
    if (direct && whole)
        im->kern[mr](kc, ap, b + jr, ldb, c + jr, ldc, nr, acc, true, pf, npf, e);
    else
        (nr <= NR / 2 ? im->half : im->kern)[mr](kc, ap, direct ? bp : bp + jr * kc, NR, c + jr, ldc, nr, acc, ahead,
                                                pf, npf, e);
}

/* Few rows against prepacked weights go a column of tiles at a time, each
 * panel of B (kc x NR) read once, from L3 or memory when the weights are
 * bigger than the caches (a network's last layers, 2-9 MiB each). The
 * hardware prefetchers do not run that far ahead of a panel read at the
 * kernel's pace: resnet18's 512-channel 3x3 layers on 7x7, six in a row,
 * took 1.2x ORT's time against 1.0x for one alone. So the tiles of a panel
 * ask for the next panel's lines into L2 as they go, one line per step,
 * the panel's lines shared out over its tiles (six of those layers 10.4
 * -> 8.0 ms; one alone 1.45 -> 1.25 ms). The panel that comes next is
 * the next in the block's order, else the first of the next block of K
 * (a product split by columns: its own columns'). */
#define SG_FAR_FLOATS (INT64_C(1) << 18)

/* The panel read after panel jt of nt of the block bp (kc rows): the next
 * in the block's order, else the first of the next block of K (nextb, kc2
 * rows; NULL after the last) */
static const float *sg_next_panel(const float *bp, int64_t kc, const float *nextb, int64_t kc2, int64_t jt, int64_t nt,
                                  int64_t NR, bool down)
{
    if (jt + 1 < nt)
        return bp + (down ? nt - 2 - jt : jt + 1) * NR * kc;
    return nextb ? nextb + (down ? nt - 1 : 0) * NR * kc2 : NULL;
}

static bool sg_run(const sg_impl *im, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                   const float *B, int64_t ldb, const sg_pre *pre, float *C, int64_t ldc, const dev_sg_epi *epi)
{
    const float *bpre = pre ? pre->b : NULL, *apre = pre ? pre->a : NULL;
    const bool a_even = !apre || pre->a_even, steps = pre && pre->steps, down = steps && pre->down;
    if (M <= 0 || N <= 0)
        return true;
    if (K <= 0) {
        for (int64_t i = 0; i < M; i++)
            memset(C + i * ldc, 0, (size_t)N * sizeof *C);
        if (epi)
            epi->fn(epi->ctx, 0, M, 0, N);
        return true;
    }
    const int64_t MR = im->mr, NR = im->nr;
    const int64_t kc_step = even(K, SG_KC), mc_step = round_up(even(M, SG_MC), MR);
    const bool direct = !bpre && !dev_sgemm_packs_b(tb, M, K, ldb);
    /* an epilogue reads a direct product's finished block of C back: blocks that stay in cache */
    /* a loop's steps that alternate their direction start on the blocks of
     * B the step before read last, still in cache, when a block is B's
     * columns over all of K: blocks of SG_STEP_NC columns when K is blocked */
    int64_t nc_most = steps && K > kc_step ? SG_STEP_NC : SG_NC;
    if (!direct && nc_most * kc_step > SG_B_FLOATS)
        nc_most = SG_B_FLOATS / kc_step / NR * NR < 4 * NR ? 4 * NR : SG_B_FLOATS / kc_step / NR * NR;
    /* (the micro-kernel's epilogue ek, where there is one, reads nothing back) */
    const dev_sg_kepi *const ek = epi ? epi->k : NULL;
    if (epi && !ek && direct && SG_EPI_FLOATS / mc_step < nc_most)
        nc_most = SG_EPI_FLOATS / mc_step < 4 * NR ? 4 * NR : SG_EPI_FLOATS / mc_step;
    const int64_t nc_step = round_up(even(N, nc_most), NR);
    const int64_t a_floats = round_up(mc_step * kc_step, 16);
    float *const abuf = scratch((size_t)(a_floats + (bpre ? 0 : direct ? NR : nc_step) * kc_step));
    if (!abuf)
        return false;
    float *const bbuf = abuf + a_floats; /* B's block, packed here unless bpre */
    const float *bp = bbuf;
    for (int64_t jb = 0, nb = (N + nc_step - 1) / nc_step; jb < nb; jb++) {
        const int64_t jc = (down ? nb - 1 - jb : jb) * nc_step, nc = N - jc < nc_step ? N - jc : nc_step,
                      nfull = nc / NR * NR;
        for (int64_t pc = 0; pc < K; pc += kc_step) {
            const int64_t kc = K - pc < kc_step ? K - pc : kc_step;
            /* Many rows against big prepacked weights: the first row of tiles
             * reads each block of B from L3 or memory, the others from L2; the
             * tiles of a block ask for the next block's lines into L2 as they
             * go, shared out over all of them (see sg_next_panel) */
            const int64_t kc2 = K - pc - kc < kc_step ? K - pc - kc : kc_step;
            const bool far = bpre && pre->Np * K >= SG_FAR_FLOATS;
            const float *nextb = far && kc2 > 0 ? bpre + (pc + kc) * pre->Np + (pre->bj0 + jc) * kc2 : NULL;
            const int64_t tiles = (M + MR - 1) / MR * ((nc + NR - 1) / NR), nlines = nextb ? kc2 * round_up(nc, NR) / 16 : 0;
            const int64_t nper = (nlines + tiles - 1) / tiles < kc ? (nlines + tiles - 1) / tiles : kc;
            int64_t tix = 0;
            /* the last block of K: the micro-kernel applies ek as it stores */
            const dev_sg_kepi *const ekb = pc + kc == K ? ek : NULL;
            dev_sg_kepi kb;
            if (bpre)
                bp = bpre + pc * pre->Np + (pre->bj0 + jc) * kc;
            else if (!direct)
                pack_b(tb, B, ldb, pc, kc, jc, nc, NR, bbuf, im->t8);
            else if (nfull < nc)
                pack_b(false, B, ldb, pc, kc, jc + nfull, nc - nfull, NR, bbuf, NULL);
            for (int64_t ic = 0; ic < M; ic += mc_step) {
                const int64_t mc = M - ic < mc_step ? M - ic : mc_step;
                const float *ap = abuf;
                const sg_panels q = panels_of(mc, MR, a_even);
                if (apre)
                    ap = apre + pc * pre->Mp + (pre->ai0 + ic) * kc;
                else if (pre && pre->ar)
                    pack_a_rows(pre->ar, ic, &q, 0, q.n, pc, kc, MR, abuf, im->t8r);
                else
                    pack_a(ta, A, lda, ic, &q, 0, q.n, pc, kc, MR, abuf, im->t8);
                if (direct) { /* B where it lies: wide tiles for 1 or 2 rows, then a column of
                                 * tiles at a time, or a row with few steps of K */
                    const int64_t wide = mc == 1 ? im->w1 : 2 * NR;
                    int64_t j0 = 0;
                    for (; mc <= 2 && j0 + wide <= nfull; j0 += wide)
                        im->wide[mc](kc, ap, B + pc * ldb + jc + j0, ldb, C + ic * ldc + jc + j0, ldc, wide, pc > 0,
                                     false, NULL, 0, kepi_at(ekb, ic, jc + j0, &kb));
                    const bool by_row = kc <= SG_DIRECT_ROWS_K;
                    const int64_t nt = (nc - j0 + NR - 1) / NR, outer = by_row ? q.n : nt, inner = by_row ? nt : q.n;
                    for (int64_t o = 0; o < outer; o++)
                        for (int64_t in = 0; in < inner; in++) {
                            const int64_t pi = by_row ? o : in, jr = j0 + (by_row ? in : o) * NR;
                            const int64_t ir = panel_row(&q, pi);
                            sg_tile(im, kc, panel_row(&q, pi + 1) - ir, ap + pi * MR * kc, true, jr < nfull,
                                    B + pc * ldb + jc, ldb, bp, jr, nc, C + (ic + ir) * ldc + jc, ldc, pc > 0, true,
                                    NULL, 0, kepi_at(ekb, ic + ir, jc, &kb));
                        }
                    if (epi && !ek && pc + kc == K)
                        epi->fn(epi->ctx, ic, mc, jc, nc);
                    continue;
                }
                /* the epilogue by rows of tiles, or once for a block that stays in L1 anyway
                 * (a squeeze-excite's [576, 1] took 5% longer by rows: a call per 8 elements) */
                const bool last = epi && !ek && pc + kc == K, by_rows = last && mc * nc > SG_EPI_L1;
                if (bpre && mc <= SG_DIRECT_M) { /* few rows against prepacked weights: a column of tiles at a time */
                    /* (the next panel's lines: 64 bytes, 16 floats each; not for weights
                     * of less than SG_FAR_FLOATS, which stay in L2 from run to run: a [32,
                     * 128] @ [128, 128] product took 10% longer asking for them) */
                    const int64_t lines = kc * NR / 16, per = (lines + q.n - 1) / q.n < kc ? (lines + q.n - 1) / q.n : kc;
                    for (int64_t jt = 0, nt = (nc + NR - 1) / NR; jt < nt; jt++) {
                        const int64_t jr = (down ? nt - 1 - jt : jt) * NR;
                        const float *next = far && ic + mc >= M ? sg_next_panel(bp, kc, nextb, kc2, jt, nt, NR, down)
                                                                : NULL;
                        for (int64_t pi = 0; pi < q.n; pi++) {
                            const int64_t ir = panel_row(&q, pi), mr = panel_row(&q, pi + 1) - ir;
                            const int64_t first = pi * per, npf = !next || first >= lines ? 0
                                                                  : lines - first < per ? lines - first
                                                                                         : per;
                            sg_tile(im, kc, mr, ap + pi * MR * kc, false, false, NULL, 0, bp, jr, nc,
                                    C + (ic + ir) * ldc + jc, ldc, pc > 0, !far, next ? next + first * 16 : NULL,
                                    npf, kepi_at(ekb, ic + ir, jc, &kb));
                        }
                    }
                    if (last)
                        epi->fn(epi->ctx, ic, mc, jc, nc);
                    continue;
                }
                /* Big weights on the left (a convolution's, prepacked): each row
                 * panel of A comes from L3 or memory in its first tile, in the
                 * order it lies; the tiles of a row ask for the next panel's lines
                 * as they go (resnet50's 1x1 layers on 14x14, 1 MiB of weights
                 * each, 8.2 -> 7.3 ms in all at batch 1) */
                const int64_t nt = (nc + NR - 1) / NR, aper = (MR * kc / 16 + nt - 1) / nt < kc ? (MR * kc / 16 + nt - 1) / nt : kc;
                const bool afar = apre && !nextb && pre->Mp * K >= SG_FAR_FLOATS;
                for (int64_t pi = 0; pi < q.n; pi++) {
                    const int64_t ir = panel_row(&q, pi), mr = panel_row(&q, pi + 1) - ir;
                    for (int64_t jt = 0; jt < nt; jt++, tix++) {
                        const int64_t jr = (down ? nt - 1 - jt : jt) * NR, first = tix * nper;
                        int64_t npf = first >= nlines ? 0 : nlines - first < nper ? nlines - first : nper;
                        const float *pf = npf ? nextb + first * 16 : NULL;
                        if (afar) /* (the panels lie one after another, blocks of rows and of K too) */
                            pf = ap + (pi + 1) * MR * kc + jt * aper * 16, npf = jt * aper < MR * kc / 16 ? aper : 0;
                        sg_tile(im, kc, mr, ap + pi * MR * kc, false, false, NULL, 0, bp, jr, nc,
                                C + (ic + ir) * ldc + jc, ldc, pc > 0, true, pf, npf,
                                kepi_at(ekb, ic + ir, jc, &kb));
                    }
                    if (by_rows)
                        epi->fn(epi->ctx, ic + ir, mr, jc, nc);
                }
                if (last && !by_rows)
                    epi->fn(epi->ctx, ic, mc, jc, nc);
            }
        }
    }
    return true;
}

bool dev_sgemm_on(dev_sg_isa isa, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                  const float *B, int64_t ldb, float *C, int64_t ldc)
{
    return dev_sgemm_on_epi(isa, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, NULL);
}

bool dev_sgemm_on_epi(dev_sg_isa isa, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float *C, int64_t ldc, const dev_sg_epi *epi)
{
    if (!dev_sg_have(isa))
        return false;
    return sg_run(&impls[isa], ta, tb, M, N, K, A, lda, B, ldb, NULL, C, ldc, epi);
}

static const sg_impl *best_impl(void)
{
    static const sg_impl *best;
    const sg_impl *im = __atomic_load_n(&best, __ATOMIC_RELAXED);
    if (!im) {
        im = &impls[dev_sg_best()];
        __atomic_store_n(&best, im, __ATOMIC_RELAXED);
    }
    return im;
}

bool dev_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
               int64_t ldb, float *C, int64_t ldc, const dev_sg_epi *epi)
{
    return sg_run(best_impl(), ta, tb, M, N, K, A, lda, B, ldb, NULL, C, ldc, epi);
}

/* ---- Prepacked B ---------------------------------------------------------------------
 * op(B) packed whole, as sg_run packs it block by block: for each block of
 * K (at row pc), its Np / NR panels of kc x NR, at pc * Np floats. */
int64_t dev_sgemm_nr(void) { return best_impl()->nr; }

bool dev_sgemm_packs_b(bool tb, int64_t M, int64_t K, int64_t ldb)
{
    return tb || M > SG_DIRECT_M || (M >= SG_ALIAS_M && sg_rows_alias(ldb, even(K, SG_KC)));
}

bool dev_sgemm_one_kblock(int64_t K) { return K > 0 && even(K, SG_KC) == K; }

size_t dev_sgemm_packed_floats(int64_t N, int64_t K) { return (size_t)(K * round_up(N, best_impl()->nr)); }

void dev_sgemm_pack(bool tb, int64_t N, int64_t K, const float *B, int64_t ldb, float *out)
{
    const sg_impl *im = best_impl();
    const int64_t kc_step = even(K, SG_KC), Np = round_up(N, im->nr);
    for (int64_t pc = 0; pc < K; pc += kc_step)
        pack_b(tb, B, ldb, pc, K - pc < kc_step ? K - pc : kc_step, 0, N, im->nr, out + pc * Np, im->t8);
}

/* dev_sgemm_pack's layout (blocks of K, panels of nr columns), written
 * element by element: once per model, at load */
void dev_sgemm_pack_taps(int64_t N, int64_t C, int64_t T, const float *W, float *out)
{
    const sg_impl *im = best_impl();
    const int64_t K = C * T, nr = im->nr, kc_step = even(K, SG_KC), Np = round_up(N, nr);
    for (int64_t pc = 0; pc < K; pc += kc_step) {
        const int64_t kc = K - pc < kc_step ? K - pc : kc_step;
        float *bp = out + pc * Np;
        for (int64_t jr = 0; jr < Np; jr += nr, bp += kc * nr)
            for (int64_t p = 0; p < kc; p++) {
                const int64_t k = pc + p, col = k % C * T + k / C; /* W's column of packed row k */
                for (int64_t j = 0; j < nr; j++)
                    bp[p * nr + j] = jr + j < N ? W[(jr + j) * K + col] : 0;
            }
    }
}

/* ---- A recurrent step's product by blocks of units -----------------------------------
 * Whole block after whole block, each DEV_SG_GATE_UNITS / nr sub-blocks
 * [K][G * nr] (column g * nr + j is row g * H + unit of R), then a last
 * block of n < DEV_SG_GATE_UNITS units as one chunk [K][W], W = G * n
 * rounded up to nr, column g * n + u row g * H + unit (a GRU of 200 units
 * streams 3% more weights than it has, not 12%); columns past those 0. */
int64_t dev_sgemv_gates_blocks(int64_t H) { return (H + DEV_SG_GATE_UNITS - 1) / DEV_SG_GATE_UNITS; }

/* The first column of block b (b <= blocks), its last block's columns
 * rounded up to `round` */
static int64_t gates_col(int64_t G, int64_t H, int64_t b, int64_t round)
{
    const int64_t U = DEV_SG_GATE_UNITS, whole = H / U;
    return b <= whole ? b * G * U : whole * G * U + round_up(G * (H - whole * U), round);
}

/* rounded up to the widest panel, so that y's size is the same on every
 * instruction set */
size_t dev_sgemv_gates_floats(int64_t G, int64_t H, int64_t K)
{
    return (size_t)(gates_col(G, H, dev_sgemv_gates_blocks(H), 32) * K);
}

/* op(B)[p][q] of the last block's chunk: gate q / n of its unit q % n */
static float gates_last(int64_t G, int64_t H, int64_t K, const float *R, int64_t p, int64_t q)
{
    const int64_t u0 = H / DEV_SG_GATE_UNITS * DEV_SG_GATE_UNITS, n = H - u0;
    return q < G * n ? R[(q / n * H + u0 + q % n) * K + p] : 0;
}

static void gates_pack(int64_t nr, int64_t G, int64_t H, int64_t K, const float *R, float *out)
{
    const int64_t whole = H / DEV_SG_GATE_UNITS, units = whole * DEV_SG_GATE_UNITS;
    const int64_t W = gates_col(G, H, dev_sgemv_gates_blocks(H), nr) - gates_col(G, H, whole, nr);
    for (int64_t u0 = 0; u0 < units; u0 += nr)
        for (int64_t p = 0; p < K; p++)
            for (int64_t g = 0; g < G; g++)
                for (int64_t j = 0; j < nr; j++)
                    *out++ = R[(g * H + u0 + j) * K + p];
    for (int64_t p = 0; p < K; p++)
        for (int64_t q = 0; q < W; q++)
            *out++ = gates_last(G, H, K, R, p, q);
}

void dev_sgemv_gates_pack(int64_t G, int64_t H, int64_t K, const float *R, float *out)
{
    gates_pack(best_impl()->nr, G, H, K, R, out);
}

void dev_sgemv_gates_part(int64_t G, int64_t H, int64_t K, const float *x, const float *bp, float *y, int64_t b0,
                          int64_t b1, bool down)
{
    if (K > 0)
        best_impl()->gemv_gates(G, H, K, even(K, SG_KC), x, bp, y, b0, b1, down);
    else if (b1 > b0)
        memset(y, 0, (size_t)(gates_col(G, H, b1, 32) - gates_col(G, H, b0, 32)) * sizeof *y);
}

void dev_sgemm_pack_gates(int64_t G, int64_t H, int64_t K, const float *R, float *out)
{
    const sg_impl *im = best_impl();
    const int64_t U = DEV_SG_GATE_UNITS, nb = dev_sgemv_gates_blocks(H), Np = gates_col(G, H, nb, 32);
    const int64_t kc_step = even(K, SG_KC), c_last = gates_col(G, H, H / U, 32);
    for (int64_t pc = 0; pc < K; pc += kc_step) {
        const int64_t kc = K - pc < kc_step ? K - pc : kc_step;
        float *o = out + pc * Np;
        for (int64_t u0 = 0; u0 + U <= H; u0 += U)
            for (int64_t g = 0; g < G; g++, o += kc * U)
                pack_b(true, R + (g * H + u0) * K, K, pc, kc, 0, U, im->nr, o, im->t8);
        for (int64_t j0 = c_last; j0 < Np; j0 += im->nr, o += kc * im->nr) /* the last block's panels */
            for (int64_t p = 0; p < kc; p++)
                for (int64_t j = 0; j < im->nr; j++)
                    o[p * im->nr + j] = gates_last(G, H, K, R, pc + p, j0 - c_last + j);
    }
}

bool dev_sgemv_gates_on(dev_sg_isa isa, int64_t G, int64_t H, int64_t K, const float *x, const float *R, float *y)
{
    if (!dev_sg_have(isa))
        return false;
    const sg_impl *im = &impls[isa];
    const int64_t nb = dev_sgemv_gates_blocks(H);
    if (K <= 0) {
        memset(y, 0, dev_sgemv_gates_floats(G, H, 1) * sizeof *y);
        return true;
    }
    float *bp = malloc(dev_sgemv_gates_floats(G, H, K) * sizeof *bp);
    if (!bp)
        return false;
    gates_pack(im->nr, G, H, K, R, bp);
    im->gemv_gates(G, H, K, even(K, SG_KC), x, bp, y, 0, nb, false);
    free(bp);
    return true;
}

/* dev_sgemm_packed, as a loop's step (steps: see sg_run) */
static bool packed(bool steps, bool down, bool ta, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                   const float *bp, int64_t j0, int64_t Ntot, float *C, int64_t ldc, const dev_sg_epi *epi)
{
    const sg_impl *im = best_impl();
    if (j0 % im->nr)
        return false;
    const sg_pre pre = {bp, j0, round_up(Ntot, im->nr), NULL, 0, 0, false, steps, down, NULL};
    return sg_run(im, ta, false, M, N, K, A, lda, NULL, 0, &pre, C, ldc, epi);
}

bool dev_sgemm_packed(bool ta, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *bp,
                      int64_t j0, int64_t Ntot, float *C, int64_t ldc, const dev_sg_epi *epi)
{
    return packed(false, false, ta, M, N, K, A, lda, bp, j0, Ntot, C, ldc, epi);
}

bool dev_sgemm_packed_rows(const dev_sg_rows *ar, int64_t M, int64_t N, int64_t K, const float *bp, int64_t j0,
                           int64_t Ntot, float *C, int64_t ldc, const dev_sg_epi *epi)
{
    const sg_impl *im = best_impl();
    if (j0 % im->nr)
        return false;
    const sg_pre pre = {.b = bp, .bj0 = j0, .Np = round_up(Ntot, im->nr), .ar = ar};
    return sg_run(im, false, false, M, N, K, NULL, 0, NULL, 0, &pre, C, ldc, epi);
}

bool dev_sgemm_packed_down(bool down, bool ta, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                           const float *bp, int64_t j0, int64_t Ntot, float *C, int64_t ldc, const dev_sg_epi *epi)
{
    return packed(true, down, ta, M, N, K, A, lda, bp, j0, Ntot, C, ldc, epi);
}

/* ---- Prepacked A ---------------------------------------------------------------------
 * A packed whole, as sg_run packs it block by block: for each block of K
 * (at column pc), its Mp / MR panels of kc x MR, at pc * Mp floats. */
size_t dev_sgemm_packed_a_floats(int64_t M, int64_t K) { return (size_t)(K * round_up(M, best_impl()->mr)); }

int64_t dev_sgemm_mr(void) { return best_impl()->mr; }

static void pack_a_panels(bool ta, bool balanced, int64_t M, int64_t K, const float *A, int64_t lda,
                          const dev_sg_rows *ar, int64_t p0, int64_t p1, float *out)
{
    const sg_impl *im = best_impl();
    const int64_t MR = im->mr, kc_step = even(K, SG_KC), Mp = round_up(M, MR);
    const int64_t mc_step = balanced ? round_up(even(M, SG_MC), MR) : Mp, per = mc_step / MR;
    for (int64_t pc = 0; pc < K; pc += kc_step) {
        const int64_t kc = K - pc < kc_step ? K - pc : kc_step;
        for (int64_t b = p0 / per; b * per < p1; b++) { /* blocks of rows as sg_run's */
            const int64_t ic = b * mc_step, mc = M - ic < mc_step ? M - ic : mc_step;
            const sg_panels q = panels_of(mc, MR, balanced);
            const int64_t pa = p0 > b * per ? p0 - b * per : 0, pb = p1 - b * per < q.n ? p1 - b * per : q.n;
            float *o = out + pc * Mp + (ic + pa * MR) * kc;
            if (!balanced) /* an edge panel's rows past M, as prepacked weights have them (never read) */
                memset(o, 0, (size_t)((pb - pa) * kc * MR) * sizeof *out);
            if (ar)
                pack_a_rows(ar, ic, &q, pa, pb, pc, kc, MR, o, im->t8r);
            else
                pack_a(ta, A, lda, ic, &q, pa, pb, pc, kc, MR, o, im->t8);
        }
    }
}

void dev_sgemm_pack_a_panels(bool ta, bool balanced, int64_t M, int64_t K, const float *A, int64_t lda, int64_t p0,
                             int64_t p1, float *out)
{
    pack_a_panels(ta, balanced, M, K, A, lda, NULL, p0, p1, out);
}

void dev_sgemm_pack_a_panels_rows(const dev_sg_rows *ar, int64_t M, int64_t K, int64_t p0, int64_t p1, float *out)
{
    pack_a_panels(false, true, M, K, NULL, 0, ar, p0, p1, out);
}

void dev_sgemm_pack_a(int64_t M, int64_t K, const float *A, int64_t lda, float *out)
{
    dev_sgemm_pack_a_panels(false, false, M, K, A, lda, 0, (M + dev_sgemm_mr() - 1) / dev_sgemm_mr(), out);
}

bool dev_sgemm_abpacked(const float *ap, int64_t M, const float *bp, int64_t j0, int64_t Ntot, int64_t N, int64_t K,
                        float *C, int64_t ldc, const dev_sg_epi *epi)
{
    const sg_impl *im = best_impl();
    if (j0 % im->nr)
        return false;
    const sg_pre pre = {bp, j0, round_up(Ntot, im->nr), ap, 0, round_up(M, im->mr), true, false, false, NULL};
    return sg_run(im, false, false, M, N, K, NULL, 0, NULL, 0, &pre, C, ldc, epi);
}

bool dev_sgemm_apacked(const float *ap, int64_t i0, int64_t Mtot, int64_t M, int64_t N, int64_t K, const float *B,
                       int64_t ldb, float *C, int64_t ldc, const dev_sg_epi *epi)
{
    const sg_impl *im = best_impl();
    if (i0 % im->mr)
        return false;
    const sg_pre pre = {NULL, 0, 0, ap, i0, round_up(Mtot, im->mr), false, false, false, NULL};
    return sg_run(im, false, false, M, N, K, NULL, 0, B, ldb, &pre, C, ldc, epi);
}

/* x is copied when it is strided (into the thread's buffer, as packing) */
static bool sg_dots(const sg_impl *im, int64_t n, int64_t K, const float *x, int64_t incx, const float *R, int64_t ldr,
                    float *y)
{
    if (n <= 0)
        return true;
    if (K <= 0) {
        memset(y, 0, (size_t)n * sizeof *y);
        return true;
    }
    if (incx != 1) {
        float *xc = scratch((size_t)K);
        if (!xc)
            return false;
        for (int64_t p = 0; p < K; p++)
            xc[p] = x[p * incx];
        x = xc;
    }
    im->dots(n, K, x, R, ldr, y);
    return true;
}

bool dev_sdots_on(dev_sg_isa isa, int64_t n, int64_t K, const float *x, int64_t incx, const float *R, int64_t ldr,
                  float *y)
{
    if (!dev_sg_have(isa))
        return false;
    return sg_dots(&impls[isa], n, K, x, incx, R, ldr, y);
}

bool dev_sdots(int64_t n, int64_t K, const float *x, int64_t incx, const float *R, int64_t ldr, float *y)
{
    return sg_dots(best_impl(), n, K, x, incx, R, ldr, y);
}
