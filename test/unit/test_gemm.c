/* test/unit/test_gemm.c — tfvm's own f32 matrix product (devices/cpu/sgemm.c)
 * on each instruction set the CPU has, against a plain double-precision
 * reference: every transpose, edge sizes of each tile and cache block, leading
 * dims wider than the matrices; the same bits for row and column blocks of a
 * product as for the whole (what splitting over threads relies on); and the
 * MATMUL gemm (dev_kmm_run) split over a test runner's threads. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "devices/cpu/cpu.h"
#include "devices/cpu/kern.h"
#include "devices/cpu/par.h"
#include "devices/cpu/sgemm.h"
#include "devices/tensor.h"
#include "testutil.h"

#define CANARY 12345.0f

/* A deterministic pseudo-random float in [-1, 1) (or a small integer when exact). */
static float val(uint32_t *s, bool exact)
{
    *s = *s * 1664525u + 1013904223u;
    if (exact)
        return (float)((int)(*s >> 28) - 8); /* -8 .. 7: every sum fits a float exactly */
    return (float)(*s >> 8) / (float)(1u << 23) - 1.0f;
}

/* A stored matrix of rows x cols with row stride cols + pad, filled; the pad with CANARY. */
static float *matrix(int64_t rows, int64_t cols, int64_t pad, uint32_t seed, bool exact)
{
    const int64_t ld = cols + pad;
    float *m = malloc((size_t)(rows * ld + 1) * sizeof *m);
    ck_assert_ptr_nonnull(m);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < ld; j++)
            m[i * ld + j] = j < cols ? val(&seed, exact) : CANARY;
    return m;
}

typedef struct gemm_case {
    int64_t M, N, K;
} gemm_case;

/* Edges of every tile (8, 6 and 4 rows, 32/16/8 columns, the 1- and 2-row
 * wide kernels of up to 256 columns), of the direct-B limit (64 rows) and
 * of the blocks (K past 256 and 512, M past 120, N past 2048). */
static const gemm_case cases[] = {
    {1, 1, 1},     {1, 7, 3},      {1, 128, 128},  {1, 129, 17},  {1, 300, 40},   {2, 64, 5},     {2, 65, 70},
    {3, 33, 9},    {5, 17, 257},   {6, 16, 16},    {7, 31, 1},    {8, 32, 64},    {9, 33, 65},    {13, 100, 300},
    {16, 48, 520}, {31, 5, 12},    {33, 64, 128},  {64, 96, 33},  {65, 47, 129},  {100, 2, 3},    {121, 70, 31},
    {130, 129, 2}, {250, 40, 260}, {3, 2100, 20},  {70, 2050, 3},  {1, 1000, 7},
};

/* op(X)[r][c] of a stored matrix with row stride ld */
static double at(const float *x, int64_t ld, bool t, int64_t r, int64_t c)
{
    return (double)(t ? x[c * ld + r] : x[r * ld + c]);
}

/* C from dev_sgemm_on against the sums in double; the pad columns of C untouched. */
static void check_case(dev_sg_isa isa, const gemm_case *g, bool ta, bool tb, bool exact)
{
    const int64_t M = g->M, N = g->N, K = g->K, pad = 3;
    const int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    float *a = matrix(ar, ac, pad, (uint32_t)(M * 31 + K), exact), *b = matrix(br, bc, pad, (uint32_t)(N * 17 + K), exact);
    float *c = matrix(M, N, pad, 7, false);
    char what[160];
    snprintf(what, sizeof what, "%s %s%ldx%ldx%ld ta=%d tb=%d", dev_sg_name(isa), exact ? "exact " : "", (long)M, (long)N,
             (long)K, ta, tb);
    ck_assert_msg(dev_sgemm_on(isa, ta, tb, M, N, K, a, ac + pad, b, bc + pad, c, N + pad), "%s: failed", what);
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double sum = 0, mag = 0;
            for (int64_t p = 0; p < K; p++) {
                const double x = at(a, ac + pad, ta, i, p) * at(b, bc + pad, tb, p, j);
                sum += x;
                mag += fabs(x);
            }
            const double got = c[i * (N + pad) + j];
            /* float sums in any order stay within K ulps of the magnitude */
            const double tol = exact ? 0 : (double)(K + 2) * FLT_EPSILON * mag;
            ck_assert_msg(fabs(got - sum) <= tol, "%s: C[%ld][%ld] = %.9g, expected %.9g (tolerance %.3g)", what,
                          (long)i, (long)j, got, sum, tol);
        }
        for (int64_t j = N; j < N + pad; j++)
            ck_assert_msg(c[i * (N + pad) + j] == CANARY, "%s: wrote past row %ld", what, (long)i);
    }
    free(a);
    free(b);
    free(c);
}

/* one instruction set (the loop index), every case and transpose */
START_TEST(test_each_isa)
{
    const dev_sg_isa isa = (dev_sg_isa)_i;
    if (!dev_sg_have(isa)) {
        printf("test_gemm: %s skipped: this CPU does not have it\n", dev_sg_name(isa));
        ck_assert(!dev_sgemm_on(isa, false, false, 1, 1, 1, &(float){1}, 1, &(float){1}, 1, &(float){0}, 1));
        return;
    }
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int t = 0; t < 4; t++) {
            check_case(isa, &cases[i], t & 1, t & 2, false);
            check_case(isa, &cases[i], t & 1, t & 2, true);
        }
}
END_TEST

/* The best instruction set is what dev_sgemm uses: the same bits. */
START_TEST(test_best)
{
    const gemm_case g = {37, 75, 600};
    float *a = matrix(g.M, g.K, 0, 1, false), *b = matrix(g.K, g.N, 0, 2, false);
    float *c1 = matrix(g.M, g.N, 0, 3, false), *c2 = matrix(g.M, g.N, 0, 4, false);
    ck_assert(dev_sg_have(dev_sg_best()));
    ck_assert(dev_sgemm(false, false, g.M, g.N, g.K, a, g.K, b, g.N, c1, g.N, NULL));
    ck_assert(dev_sgemm_on(dev_sg_best(), false, false, g.M, g.N, g.K, a, g.K, b, g.N, c2, g.N));
    ck_assert_msg(memcmp(c1, c2, (size_t)(g.M * g.N) * sizeof *c1) == 0, "dev_sgemm is not %s", dev_sg_name(dev_sg_best()));
    free(a), free(b), free(c1), free(c2);
}
END_TEST

/* The epilogue sees each element of C once, after its last product: blocks
 * that tile C exactly, on shapes with several blocks of rows, columns and
 * K, with and without packed B. */
typedef struct epi_seen {
    const float *c, *want;
    int64_t ldc;
    int *count;
    bool *early;
} epi_seen;

static void epi_mark(const void *ctx, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols)
{
    const epi_seen *e = ctx;
    for (int64_t i = row0; i < row0 + nrows; i++)
        for (int64_t j = col0; j < col0 + ncols; j++) {
            e->count[i * e->ldc + j]++;
            if (e->c[i * e->ldc + j] != e->want[i * e->ldc + j])
                *e->early = true;
        }
}

static const gemm_case epi_cases[] = {{1, 40, 300}, {40, 5000, 20}, {130, 700, 600}, {8, 33, 3}, {5, 9, 0}};

START_TEST(test_epilogue_blocks)
{
    const gemm_case g = epi_cases[_i];
    const int64_t M = g.M, K = g.K, N = g.N;
    float *a = matrix(M, K ? K : 1, 0, 7, false), *b = matrix(K ? K : 1, N, 0, 8, false);
    float *want = matrix(M, N, 0, 9, false), *c = matrix(M, N, 0, 10, false);
    int *count = calloc((size_t)(M * N), sizeof *count);
    ck_assert(dev_sgemm(false, false, M, N, K, a, K ? K : 1, b, N, want, N, NULL));
    bool early = false;
    const epi_seen seen = {c, want, N, count, &early};
    const dev_sg_epi epi = {epi_mark, &seen, NULL};
    ck_assert(dev_sgemm(false, false, M, N, K, a, K ? K : 1, b, N, c, N, &epi));
    for (int64_t i = 0; i < M * N; i++)
        ck_assert_msg(count[i] == 1, "case %d (%ldx%ldx%ld): element %ld seen %d times", _i, (long)M, (long)K,
                      (long)N, (long)i, count[i]);
    ck_assert_msg(!early, "case %d: an epilogue block came before its product was final", _i);
    ck_assert_msg(memcmp(c, want, (size_t)(M * N) * sizeof *c) == 0, "case %d: other bits with an epilogue", _i);
    free(a), free(b), free(want), free(c), free(count);
}
END_TEST

/* A packed once (a convolution's weights): the bits of dev_sgemm, for the
 * whole product and for row blocks starting at a panel boundary; a block
 * starting inside a panel is refused. */
static const gemm_case apack_cases[] = {{1, 40, 300}, {37, 75, 600}, {130, 700, 20}, {96, 1000, 16}};

START_TEST(test_prepacked_a)
{
    const gemm_case g = apack_cases[_i];
    const int64_t M = g.M, N = g.N, K = g.K, mr = dev_sgemm_mr();
    float *a = matrix(M, K, 0, 15, false), *b = matrix(K, N, 0, 16, false);
    float *want = matrix(M, N, 0, 17, false), *got = matrix(M, N, 0, 18, false);
    float *ap = malloc(dev_sgemm_packed_a_floats(M, K) * sizeof *ap);
    dev_sgemm_pack_a(M, K, a, K, ap);
    ck_assert(dev_sgemm(false, false, M, N, K, a, K, b, N, want, N, NULL));
    ck_assert(dev_sgemm_apacked(ap, 0, M, M, N, K, b, N, got, N, NULL));
    ck_assert_msg(memcmp(got, want, (size_t)(M * N) * sizeof *got) == 0, "case %d: whole product differs", _i);
    if (M > mr) {
        memset(got, 0, (size_t)(M * N) * sizeof *got);
        ck_assert(dev_sgemm_apacked(ap, mr, M, M - mr, N, K, b, N, got + mr * N, N, NULL));
        ck_assert_msg(memcmp(got + mr * N, want + mr * N, (size_t)((M - mr) * N) * sizeof *got) == 0,
                      "case %d: rows from %ld differ", _i, (long)mr);
        ck_assert_msg(!dev_sgemm_apacked(ap, 1, M, M - 1, N, K, b, N, got, N, NULL),
                      "case %d: a block inside a panel was taken", _i);
    }
    free(a), free(b), free(want), free(got), free(ap);
}
END_TEST

/* B's rows a power of two of floats apart (few of L1's sets: the product
 * packs B where it would read it in place): each instruction set gives
 * the bits of the same product with B's rows 3 floats further apart, and
 * prepacked A gives them too; at 16 rows, in place. */
static const gemm_case alias_cases[] = {{40, 1024, 64}, {24, 2048, 40}, {64, 1024, 300}, {30, 4096, 16}, {16, 1024, 64}};

START_TEST(test_rows_alias)
{
    const gemm_case g = alias_cases[_i];
    const int64_t M = g.M, N = g.N, K = g.K;
    float *a = matrix(M, K, 0, 21, false), *b = matrix(K, N, 0, 22, false), *bp3 = matrix(K, N, 3, 22, false);
    float *want = matrix(M, N, 0, 23, false), *got = matrix(M, N, 0, 24, false);
    ck_assert(dev_sgemm_packs_b(false, M, K, N) == (M >= 24));
    ck_assert(!dev_sgemm_packs_b(false, M, K, N + 3));
    for (int isa = 0; isa < DEV_SG_N_ISA; isa++) {
        if (!dev_sg_have((dev_sg_isa)isa))
            continue;
        ck_assert(dev_sgemm_on((dev_sg_isa)isa, false, false, M, N, K, a, K, bp3, N + 3, want, N));
        ck_assert(dev_sgemm_on((dev_sg_isa)isa, false, false, M, N, K, a, K, b, N, got, N));
        ck_assert_msg(memcmp(got, want, (size_t)(M * N) * sizeof *got) == 0, "case %d %s: other bits", _i,
                      dev_sg_name((dev_sg_isa)isa));
    }
    float *ap = malloc(dev_sgemm_packed_a_floats(M, K) * sizeof *ap);
    dev_sgemm_pack_a(M, K, a, K, ap);
    ck_assert(dev_sgemm(false, false, M, N, K, a, K, bp3, N + 3, want, N, NULL));
    ck_assert(dev_sgemm_apacked(ap, 0, M, M, N, K, b, N, got, N, NULL));
    ck_assert_msg(memcmp(got, want, (size_t)(M * N) * sizeof *got) == 0, "case %d: prepacked A, other bits", _i);
    free(a), free(b), free(bp3), free(want), free(got), free(ap);
}
END_TEST

/* B [K, N] (or [N, K] when tb) packed for dev_sgemm_packed */
static float *packed_b(bool tb, int64_t N, int64_t K, const float *b)
{
    float *bp = malloc(dev_sgemm_packed_floats(N, K) * sizeof *bp);
    ck_assert_ptr_nonnull(bp);
    dev_sgemm_pack(tb, N, K, b, tb ? K : N, bp);
    return bp;
}

/* B packed once, A stored transposed (a convolution's image [C, H*W], whose
 * columns are the product's rows): the bits of dev_sgemm, whole and from a
 * panel of columns on; C past its columns untouched. */
START_TEST(test_packed_b_ta)
{
    const int64_t M = 49, N = 75, K = 70, nr = dev_sgemm_nr();
    float *a = matrix(K, M, 0, 21, false), *b = matrix(K, N, 0, 22, false);
    float *want = matrix(M, N, 0, 23, false), *got = matrix(M, N, 1, 24, false);
    float *bp = packed_b(false, N, K, b);
    ck_assert(dev_sgemm(true, false, M, N, K, a, M, b, N, want, N, NULL));
    ck_assert(dev_sgemm_packed(true, M, N, K, a, M, bp, 0, N, got, N + 1, NULL));
    for (int64_t i = 0; i < M; i++) {
        ck_assert_msg(memcmp(got + i * (N + 1), want + i * N, (size_t)N * sizeof *got) == 0, "row %ld differs", (long)i);
        ck_assert_msg(got[i * (N + 1) + N] == CANARY, "wrote past row %ld", (long)i);
    }
    ck_assert(dev_sgemm_packed(true, M, N - nr, K, a, M, bp, nr, N, got, N + 1, NULL));
    for (int64_t i = 0; i < M; i++)
        ck_assert_msg(memcmp(got + i * (N + 1), want + i * N + nr, (size_t)(N - nr) * sizeof *got) == 0,
                      "row %ld from column %ld differs", (long)i, (long)nr);
    free(a), free(b), free(want), free(got), free(bp);
}
END_TEST

/* A loop's steps (dev_sgemm_packed_down): up and down, the bits of
 * dev_sgemm; K of one block and of three (B then in narrow blocks), a
 * partial last panel, a range from a panel on; C past its columns
 * untouched. */
START_TEST(test_packed_down)
{
    static const int64_t ks[] = {70, 600};
    const int64_t N = 300, nr = dev_sgemm_nr();
    for (size_t kk = 0; kk < sizeof ks / sizeof *ks; kk++)
        for (int64_t M = 1; M <= 9; M += 4) {
            const int64_t K = ks[kk];
            float *a = matrix(M, K, 0, 41, false), *b = matrix(N, K, 0, 42, false);
            float *want = matrix(M, N, 0, 43, false), *got = matrix(M, N, 1, 44, false);
            float *bp = packed_b(true, N, K, b);
            ck_assert(dev_sgemm(false, true, M, N, K, a, K, b, K, want, N, NULL));
            for (int down = 0; down < 2; down++) {
                for (int64_t i = 0; i < M * (N + 1); i++)
                    got[i] = i % (N + 1) == N ? CANARY : 0;
                ck_assert(dev_sgemm_packed_down(down, false, M, N, K, a, K, bp, 0, N, got, N + 1, NULL));
                for (int64_t i = 0; i < M; i++) {
                    ck_assert_msg(memcmp(got + i * (N + 1), want + i * N, (size_t)N * sizeof *got) == 0,
                                  "K %ld M %ld down %d: row %ld differs", (long)K, (long)M, down, (long)i);
                    ck_assert_msg(got[i * (N + 1) + N] == CANARY, "K %ld M %ld down %d: wrote past row %ld", (long)K,
                                  (long)M, down, (long)i);
                }
                ck_assert(dev_sgemm_packed_down(down, false, M, N - nr, K, a, K, bp, nr, N, got, N + 1, NULL));
                for (int64_t i = 0; i < M; i++)
                    ck_assert_msg(memcmp(got + i * (N + 1), want + i * N + nr, (size_t)(N - nr) * sizeof *got) == 0,
                                  "K %ld M %ld down %d: row %ld from column %ld differs", (long)K, (long)M, down,
                                  (long)i, (long)nr);
            }
            free(a), free(b), free(want), free(got), free(bp);
        }
}
END_TEST

/* Both operands packed for one call (a product split by columns, its rows
 * packed once for every block): op(A) packed in two runs of panels, its
 * last panels of a block of rows evened out (49 rows as 7 of 7), each
 * transpose of A; the bits of dev_sgemm, whole and from a panel of
 * columns on; C past its columns untouched. */
static const int64_t abpack_rows[] = {1, 7, 9, 17, 49, 57, 121, 130, 196};

START_TEST(test_abpacked)
{
    const int64_t M = abpack_rows[_i / 2], N = 75, K = 300, nr = dev_sgemm_nr(), mr = dev_sgemm_mr();
    const bool ta = _i % 2;
    const int64_t panels = (M + mr - 1) / mr, lda = ta ? M : K;
    float *a = matrix(ta ? K : M, lda, 0, 31, false), *b = matrix(N, K, 0, 32, false);
    float *want = matrix(M, N, 0, 33, false), *got = matrix(M, N, 1, 34, false);
    float *ap = malloc(dev_sgemm_packed_a_floats(M, K) * sizeof *ap), *bp = malloc(dev_sgemm_packed_floats(N, K) * sizeof *bp);
    ck_assert(ap && bp);
    dev_sgemm_pack_a_panels(ta, true, M, K, a, lda, 0, panels / 2, ap);
    dev_sgemm_pack_a_panels(ta, true, M, K, a, lda, panels / 2, panels, ap);
    dev_sgemm_pack(true, N, K, b, K, bp);
    ck_assert(dev_sgemm(ta, true, M, N, K, a, lda, b, K, want, N, NULL));
    ck_assert(dev_sgemm_abpacked(ap, M, bp, 0, N, N, K, got, N + 1, NULL));
    for (int64_t i = 0; i < M; i++) {
        ck_assert_msg(memcmp(got + i * (N + 1), want + i * N, (size_t)N * sizeof *got) == 0, "M %ld ta %d: row %ld differs",
                      (long)M, ta, (long)i);
        ck_assert_msg(got[i * (N + 1) + N] == CANARY, "M %ld: wrote past row %ld", (long)M, (long)i);
    }
    ck_assert(dev_sgemm_abpacked(ap, M, bp, nr, N, N - nr, K, got, N + 1, NULL));
    for (int64_t i = 0; i < M; i++)
        ck_assert_msg(memcmp(got + i * (N + 1), want + i * N + nr, (size_t)(N - nr) * sizeof *got) == 0,
                      "M %ld ta %d: row %ld from column %ld differs", (long)M, ta, (long)i, (long)nr);
    ck_assert_msg(!dev_sgemm_abpacked(ap, M, bp, 1, N, N - 1, K, got, N + 1, NULL), "a block inside a panel was taken");
    free(a), free(b), free(want), free(got), free(ap), free(bp);
}
END_TEST

/* op(A)'s rows where they lie (dev_sg_rows: a convolution's positions in a
 * channels-last image, each tap a run of C channels) give the bits of the
 * same A made whole first, through dev_sgemm_packed_rows and through
 * panels packed in two runs for dev_sgemm_abpacked: runs of 5 channels
 * (K's blocks cut inside a tap), 64, 96 and 256; 1 to 196 rows (one row,
 * a part panel, more than one block of rows); rows that overlap and
 * taps out of order. */
static const int64_t rows_cases[][2] = {{5, 1}, {5, 49}, {64, 7}, {64, 196}, {96, 49}, {96, 70}, {256, 49}, {256, 130}};

START_TEST(test_packed_rows)
{
    const int64_t C = rows_cases[_i][0], M = rows_cases[_i][1], T = 9, K = T * C, N = 75, Wp = 16;
    const int64_t mr = dev_sgemm_mr(), panels = (M + mr - 1) / mr, img = (M / 4 + 12) * Wp * C;
    float *x = matrix(1, img, 0, 41, false), *a = malloc((size_t)(M * K) * sizeof *a), *b = matrix(N, K, 0, 42, false);
    int64_t *row = malloc((size_t)M * sizeof *row), tap[9];
    float *want = matrix(M, N, 0, 43, false), *got = matrix(M, N, 0, 44, false);
    float *ap = malloc(dev_sgemm_packed_a_floats(M, K) * sizeof *ap), *bp = malloc(dev_sgemm_packed_floats(N, K) * sizeof *bp);
    ck_assert(a && row && ap && bp);
    for (int64_t r = 0; r < M; r++) /* positions 2 apart on rows of Wp: windows overlap */
        row[r] = (r / 4 * Wp + r % 4 * 2) * C;
    for (int64_t t = 0; t < T; t++) /* the taps of a 3x3 window, last first */
        tap[t] = ((8 - t) / 3 * Wp + (8 - t) % 3) * C;
    for (int64_t r = 0; r < M; r++)
        for (int64_t k = 0; k < K; k++)
            a[r * K + k] = x[row[r] + tap[k / C] + k % C];
    const dev_sg_rows ar = {x, row, tap, C};
    dev_sgemm_pack(true, N, K, b, K, bp);
    ck_assert(dev_sgemm_packed(false, M, N, K, a, K, bp, 0, N, want, N, NULL));
    ck_assert(dev_sgemm_packed_rows(&ar, M, N, K, bp, 0, N, got, N, NULL));
    ck_assert_msg(memcmp(got, want, (size_t)(M * N) * sizeof *got) == 0, "C %ld M %ld: rows where they lie differ",
                  (long)C, (long)M);
    dev_sgemm_pack_a_panels_rows(&ar, M, K, 0, panels / 2, ap);
    dev_sgemm_pack_a_panels_rows(&ar, M, K, panels / 2, panels, ap);
    memset(got, 0, (size_t)(M * N) * sizeof *got);
    ck_assert(dev_sgemm_abpacked(ap, M, bp, 0, N, N, K, got, N, NULL));
    ck_assert_msg(memcmp(got, want, (size_t)(M * N) * sizeof *got) == 0, "C %ld M %ld: panels packed from rows differ",
                  (long)C, (long)M);
    free(x), free(a), free(b), free(row), free(want), free(got), free(ap), free(bp);
}
END_TEST

/* Row blocks and column blocks of a product computed alone have the bits of
 * the whole product (each element summed in the same order), for each
 * transpose: K spans three blocks, and the blocks cut tiles in the middle. */
START_TEST(test_blocks_same_bits)
{
    const dev_sg_isa isa = (dev_sg_isa)_i;
    if (!dev_sg_have(isa))
        return;
    const int64_t M = 37, N = 75, K = 600, cut_m = 13, cut_n = 40;
    for (int t = 0; t < 4; t++) {
        const bool ta = t & 1, tb = t & 2;
        const int64_t lda = ta ? M : K, ldb = tb ? K : N;
        float *a = matrix(ta ? K : M, lda, 0, 5, false), *b = matrix(tb ? N : K, ldb, 0, 6, false);
        float *whole = matrix(M, N, 0, 7, false), *rows = matrix(M, N, 0, 8, false), *cols = matrix(M, N, 0, 9, false);
        ck_assert(dev_sgemm_on(isa, ta, tb, M, N, K, a, lda, b, ldb, whole, N));
        for (int64_t r0 = 0; r0 < M; r0 = cut_m * (r0 / cut_m + 1)) {
            const int64_t r1 = r0 + cut_m < M ? r0 + cut_m : M;
            ck_assert(dev_sgemm_on(isa, ta, tb, r1 - r0, N, K, a + (ta ? r0 : r0 * lda), lda, b, ldb, rows + r0 * N, N));
        }
        ck_assert(dev_sgemm_on(isa, ta, tb, M, cut_n, K, a, lda, b, ldb, cols, N));
        ck_assert(dev_sgemm_on(isa, ta, tb, M, N - cut_n, K, a, lda, b + (tb ? cut_n * ldb : cut_n), ldb, cols + cut_n, N));
        for (int64_t i = 0; i < M * N; i++) {
            ck_assert_msg(memcmp(&rows[i], &whole[i], sizeof *rows) == 0, "%s ta=%d tb=%d: row blocks differ at %ld",
                          dev_sg_name(isa), ta, tb, (long)i);
            ck_assert_msg(memcmp(&cols[i], &whole[i], sizeof *cols) == 0, "%s ta=%d tb=%d: column blocks differ at %ld",
                          dev_sg_name(isa), ta, tb, (long)i);
        }
        free(a), free(b), free(whole), free(rows), free(cols);
    }
}
END_TEST

/* K = 0 gives zeros; an empty C is not written. */
START_TEST(test_empty)
{
    const dev_sg_isa isa = (dev_sg_isa)_i;
    if (!dev_sg_have(isa))
        return;
    float c[6] = {1, 2, 3, 4, 5, 6}, x = 1;
    ck_assert(dev_sgemm_on(isa, false, false, 2, 2, 0, &x, 1, &x, 2, c, 3));
    const float want[6] = {0, 0, 3, 0, 0, 6};
    ck_assert(memcmp(c, want, sizeof c) == 0);
    ck_assert(dev_sgemm_on(isa, true, true, 0, 2, 5, &x, 1, &x, 5, c, 3));
    ck_assert(dev_sgemm_on(isa, false, false, 2, 0, 5, &x, 5, &x, 1, c, 3));
    ck_assert(memcmp(c, want, sizeof c) == 0);
}
END_TEST

/* ---- Dot products ------------------------------------------------------------------------
 * y[j] = x . R[j] on each instruction set, x dense or strided, against the
 * sums in double; each row computed alone has the bits it has among the
 * others (the first 8 go in lockstep, the rest one by one). */
START_TEST(test_dots)
{
    const dev_sg_isa isa = (dev_sg_isa)_i;
    if (!dev_sg_have(isa))
        return;
    const int64_t ns[] = {1, 7, 8, 9, 20}, ks[] = {1, 5, 16, 17, 33, 128, 300}, incs[] = {1, 3};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof ks / sizeof *ks; b++)
            for (size_t c = 0; c < sizeof incs / sizeof *incs; c++) {
                const int64_t n = ns[a], K = ks[b], inc = incs[c], ldr = K + 2;
                float *x = matrix(K, inc, 0, (uint32_t)(n + K), false), *R = matrix(n, K, 2, (uint32_t)(n * K), false);
                float y[21], one;
                y[n] = CANARY;
                ck_assert(dev_sdots_on(isa, n, K, x, inc, R, ldr, y));
                for (int64_t j = 0; j < n; j++) {
                    double sum = 0, mag = 0;
                    for (int64_t p = 0; p < K; p++) {
                        const double t = (double)x[p * inc] * (double)R[j * ldr + p];
                        sum += t, mag += fabs(t);
                    }
                    ck_assert_msg(fabs(y[j] - sum) <= (double)(K + 2) * FLT_EPSILON * mag,
                                  "%s n=%ld K=%ld incx=%ld: y[%ld] = %.9g, expected %.9g", dev_sg_name(isa), (long)n,
                                  (long)K, (long)inc, (long)j, y[j], sum);
                    ck_assert(dev_sdots_on(isa, 1, K, x, inc, R + j * ldr, ldr, &one));
                    ck_assert_msg(memcmp(&one, &y[j], sizeof one) == 0, "%s n=%ld K=%ld: row %ld alone differs",
                                  dev_sg_name(isa), (long)n, (long)K, (long)j);
                }
                ck_assert_msg(y[n] == CANARY, "%s n=%ld K=%ld: wrote past y", dev_sg_name(isa), (long)n, (long)K);
                free(x), free(R);
            }
}
END_TEST

/* ---- A recurrent step's product by blocks of units ------------------------------------
 * dev_sgemv_gates_on on each instruction set: each gate of each unit where
 * the blocked layout puts it, with dev_sgemm_on's one-row bits (G 1 to 4;
 * H within one sub-block, one block, over a block's edge; a last block
 * whose gates take 1 to 4 panels; K in one block of the sum and in two);
 * nothing past y; on the best set, the prepacked product block by block gives the
 * same, and so does the product of several rows from R packed for the
 * gemm in that order. */
/* Element i of the blocked order: gate *g of unit *unit, or false past them */
static bool gate_at(int64_t G, int64_t H, int64_t i, int64_t *g, int64_t *unit)
{
    const int64_t U = DEV_SG_GATE_UNITS, whole = H / U, n = H - whole * U, q = i - whole * G * U;
    if (q < 0) {
        *g = i / U % G;
        *unit = i / (G * U) * U + i % U;
        return true;
    }
    if (q >= G * n)
        return false;
    *g = q / n;
    *unit = whole * U + q % n;
    return true;
}

START_TEST(test_gemv_gates)
{
    const dev_sg_isa isa = (dev_sg_isa)_i;
    if (!dev_sg_have(isa))
        return;
    const int64_t hs[] = {1, 7, 32, 45, 128, 159}, ks[] = {1, 37, 300};
    for (int64_t G = 1; G <= 4; G++)
        for (size_t a = 0; a < sizeof hs / sizeof *hs; a++)
            for (size_t b = 0; b < sizeof ks / sizeof *ks; b++) {
                const int64_t H = hs[a], K = ks[b], U = DEV_SG_GATE_UNITS,
                              ny = (int64_t)dev_sgemv_gates_floats(G, H, 1);
                float *x = matrix(1, K, 0, (uint32_t)(H + K), false),
                      *R = matrix(G * H, K, 0, (uint32_t)(G * H * K), false);
                float *got = malloc((size_t)(ny + 1) * sizeof *got), *want = malloc((size_t)(G * H) * sizeof *want);
                got[ny] = CANARY;
                ck_assert(dev_sgemv_gates_on(isa, G, H, K, x, R, got));
                ck_assert(dev_sgemm_on(isa, false, true, 1, G * H, K, x, K, R, K, want, G * H));
                for (int64_t i = 0; i < ny; i++) {
                    int64_t g = -1, unit = -1;
                    if (!gate_at(G, H, i, &g, &unit))
                        continue; /* unspecified */
                    const float w = want[g * H + unit];
                    ck_assert_msg(memcmp(&got[i], &w, sizeof w) == 0,
                                  "%s G=%ld H=%ld K=%ld: gate %ld of unit %ld = %.9g, not %.9g", dev_sg_name(isa),
                                  (long)G, (long)H, (long)K, (long)g, (long)unit, got[i], w);
                }
                ck_assert_msg(got[ny] == CANARY, "%s G=%ld H=%ld K=%ld: wrote past y", dev_sg_name(isa), (long)G,
                              (long)H, (long)K);
                if (isa == dev_sg_best()) {
                    float *bp = malloc(dev_sgemv_gates_floats(G, H, K) * sizeof *bp),
                          *part = malloc((size_t)ny * sizeof *part);
                    dev_sgemv_gates_pack(G, H, K, R, bp);
                    for (int64_t blk = dev_sgemv_gates_blocks(H) - 1; blk >= 0; blk--)
                        dev_sgemv_gates_part(G, H, K, x, bp, part + blk * G * U, blk, blk + 1, false);
                    for (int64_t i = 0, g, unit; i < ny; i++)
                        ck_assert_msg(!gate_at(G, H, i, &g, &unit) || memcmp(&part[i], &got[i], sizeof *got) == 0,
                                      "%s G=%ld H=%ld K=%ld: block by block differs at %ld", dev_sg_name(isa), (long)G,
                                      (long)H, (long)K, (long)i);
                    /* last block first, whole and from block 1 on: the same results in the same places */
                    const int64_t nb = dev_sgemv_gates_blocks(H);
                    for (int64_t b0 = 0; b0 < (nb > 1 ? 2 : 1); b0++) {
                        for (int64_t i = 0; i < ny; i++)
                            part[i] = CANARY;
                        dev_sgemv_gates_part(G, H, K, x, bp, part + b0 * G * U, b0, nb, true);
                        for (int64_t i = b0 * G * U, g, unit; i < ny; i++)
                            ck_assert_msg(!gate_at(G, H, i, &g, &unit) || memcmp(&part[i], &got[i], sizeof *got) == 0,
                                          "%s G=%ld H=%ld K=%ld: blocks %ld.. last first differ at %ld",
                                          dev_sg_name(isa), (long)G, (long)H, (long)K, (long)b0, (long)i);
                        for (int64_t i = 0; i < b0 * G * U; i++)
                            ck_assert_msg(part[i] == CANARY, "blocks %ld.. last first wrote before them", (long)b0);
                    }
                    /* several rows: the same order from the gemm, whole and by blocks, with dev_sgemm's bits */
                    enum { M = 3 };
                    float *A = matrix(M, K, 0, (uint32_t)(G + K), false),
                          *rows = malloc((size_t)(M * G * H) * sizeof *rows);
                    float *gp = malloc(dev_sgemm_packed_floats(ny, K) * sizeof *gp),
                          *c = malloc((size_t)(M * ny) * sizeof *c);
                    dev_sgemm_pack_gates(G, H, K, R, gp);
                    ck_assert(dev_sgemm(false, true, M, G * H, K, A, K, R, K, rows, G * H, NULL));
                    for (int64_t blk = 0; blk < dev_sgemv_gates_blocks(H); blk++) {
                        const int64_t c0 = blk * G * U, w = (blk + 1) * U < H ? G * U : ny - c0;
                        ck_assert(dev_sgemm_packed(false, M, w, K, A, K, gp, c0, ny, c + c0, ny, NULL));
                    }
                    for (int64_t m = 0; m < M; m++)
                        for (int64_t i = 0; i < ny; i++) {
                            int64_t g = -1, unit = -1;
                            if (!gate_at(G, H, i, &g, &unit))
                                continue;
                            const float w = rows[m * G * H + g * H + unit];
                            ck_assert_msg(memcmp(&c[m * ny + i], &w, sizeof w) == 0,
                                          "G=%ld H=%ld K=%ld: row %ld, gate %ld of unit %ld = %.9g, not %.9g", (long)G,
                                          (long)H, (long)K, (long)m, (long)g, (long)unit, c[m * ny + i], w);
                        }
                    free(bp), free(part), free(A), free(rows), free(gp), free(c);
                }
                free(x), free(R), free(got), free(want);
            }
}
END_TEST

/* ---- The MATMUL gemm split over threads -----------------------------------------------
 * A runner that runs the chunks of a loop on RUN_THREADS threads; the split
 * product has the serial product's bits, whichever code computes it. */
#define RUN_THREADS 3

typedef struct run_job {
    dev_par_fn fn;
    void *arg;
    size_t n, grain;
    atomic_size_t next;
} run_job;

static atomic_int chunks_run;

static void *run_worker(void *p)
{
    run_job *j = p;
    for (;;) {
        size_t b = atomic_fetch_add(&j->next, j->grain);
        if (b >= j->n)
            break;
        j->fn(j->arg, b, j->n - b < j->grain ? j->n : b + j->grain);
        atomic_fetch_add(&chunks_run, 1);
    }
    return NULL;
}

static void run_chunks(void *self, size_t n, size_t grain, dev_par_fn fn, void *arg)
{
    (void)self;
    run_job j = {fn, arg, n, grain, 0};
    pthread_t t[RUN_THREADS - 1];
    for (int i = 0; i < RUN_THREADS - 1; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, run_worker, &j), 0);
    run_worker(&j);
    for (int i = 0; i < RUN_THREADS - 1; i++)
        pthread_join(t[i], NULL);
}

static const dev_par_runner runner = {run_chunks, NULL, RUN_THREADS};

/* by rows, by columns (few rows), one row (ours), one row of a transposed B
 * (dot products, x dense and strided), one column (ours as a row, and dot
 * products): the serial bits; and one above our size limit, OpenBLAS's,
 * only the product: its Haswell kernel (OPENBLAS_CORETYPE=Haswell) rounds
 * a block of rows differently from the whole. */
static const struct par_case {
    int64_t M, N, K;
    bool ta, tb, same_bits;
} par_cases[] = {
    {200, 96, 300, false, false, true}, {4, 2000, 300, false, true, true},  {1, 4096, 200, false, false, true},
    {1, 4096, 200, true, true, true},   {1, 4096, 200, false, true, true},  {2000, 1, 300, true, false, true},
    {2000, 1, 300, false, true, true},  {2000, 1, 300, false, false, true}, {700, 700, 600, false, false, false},
};

START_TEST(test_split)
{
    const struct par_case *pc = &par_cases[_i];
    const int64_t M = pc->M, N = pc->N, K = pc->K, lda = pc->ta ? M : K, ldb = pc->tb ? K : N;
    float *a = matrix(pc->ta ? K : M, lda, 0, 11, false), *b = matrix(pc->tb ? N : K, ldb, 0, 12, false);
    float *serial = matrix(M, N, 0, 13, false), *par = matrix(M, N, 0, 14, false);
    ck_assert_int_eq(dev_kgemm_ready(&(dev_kctx){0}, TFVM_F32), TFVM_OK);
    dev_kmm m = {.dtype = TFVM_F32, .ta = pc->ta, .tb = pc->tb, .M = M, .N = N, .K = K, .A = (const char *)a,
                 .lda = lda, .B = (const char *)b, .ldb = ldb, .C = (char *)serial, .ldc = N};
    dev_kmm_run(&m);
    dev_par_set_runner(&runner);
    atomic_store(&chunks_run, 0);
    m.C = (char *)par;
    dev_kmm_run(&m);
    dev_par_set_runner(NULL);
    ck_assert_msg(atomic_load(&chunks_run) >= 2, "%ldx%ldx%ld: not split", (long)M, (long)N, (long)K);
    ck_assert_msg(!pc->same_bits || memcmp(serial, par, (size_t)(M * N) * sizeof *par) == 0,
                  "%ldx%ldx%ld ta=%d tb=%d: split differs", (long)M, (long)N, (long)K, pc->ta, pc->tb);
    /* and it is the product */
    for (int64_t i = 0; i < M; i += M / 7 + 1)
        for (int64_t j = 0; j < N; j += N / 7 + 1) {
            double sum = 0, mag = 0;
            for (int64_t p = 0; p < K; p++) {
                const double x = at(a, lda, pc->ta, i, p) * at(b, ldb, pc->tb, p, j);
                sum += x, mag += fabs(x);
            }
            ck_assert_msg(fabs(par[i * N + j] - sum) <= (double)(K + 2) * FLT_EPSILON * mag, "%ldx%ldx%ld: C[%ld][%ld]",
                          (long)M, (long)N, (long)K, (long)i, (long)j);
        }
    free(a), free(b), free(serial), free(par);
}
END_TEST

/* A prepacked B split by columns (a convolution's transposed product):
 * the rows packed once for all the blocks, each transpose of A, and 49
 * rows (7x7 positions); the serial bits. */
START_TEST(test_split_shared_a)
{
    const int64_t M = _i < 2 ? 49 : 17, N = 512, K = 600;
    const bool ta = _i % 2;
    const int64_t lda = ta ? M : K;
    float *a = matrix(ta ? K : M, lda, 0, 41, false), *b = matrix(N, K, 0, 42, false);
    float *want = matrix(M, N, 0, 43, false), *par = matrix(M, N, 0, 44, false);
    float *bp = malloc(dev_sgemm_packed_floats(N, K) * sizeof *bp);
    ck_assert_ptr_nonnull(bp);
    dev_sgemm_pack(true, N, K, b, K, bp);
    ck_assert(dev_sgemm(ta, true, M, N, K, a, lda, b, K, want, N, NULL));
    ck_assert_int_eq(dev_kgemm_ready(&(dev_kctx){0}, TFVM_F32), TFVM_OK);
    const dev_kmm m = {.dtype = TFVM_F32, .ta = ta, .tb = true, .M = M, .N = N, .K = K, .A = (const char *)a,
                       .lda = lda, .B = (const char *)b, .ldb = K, .C = (char *)par, .ldc = N};
    dev_par_set_runner(&runner);
    atomic_store(&chunks_run, 0);
    dev_kmm_packed(&m, bp, true);
    dev_par_set_runner(NULL);
    ck_assert_msg(atomic_load(&chunks_run) >= 2, "%ld rows: not split", (long)M);
    ck_assert_msg(memcmp(par, want, (size_t)(M * N) * sizeof *par) == 0, "%ld rows ta=%d: split differs", (long)M, ta);
    free(a), free(b), free(want), free(par), free(bp);
}
END_TEST

/* MATMUL of a tensor B that our kernel would pack: packed once and kept with
 * the tensor, the second run using that form; the bits of dev_sgemm on each
 * run, serial and split over the runner's threads. A B read where it lies
 * (few rows, not transposed) keeps no packed form, unless it is a program's
 * constant (borrowed by the VM): that one is packed once all the same. */
static const struct prep_case {
    int64_t M, K, N;
    bool tb, packs, borrowed;
} prep_cases[] = {
    {100, 70, 50, false, true, false}, {3, 40, 300, true, true, false}, {130, 300, 33, true, true, false},
    {3, 40, 300, false, false, false}, {3, 40, 300, false, true, true}, {32, 64, 200, false, true, true},
};

START_TEST(test_matmul_prepacked)
{
    const struct prep_case *pc = &prep_cases[_i];
    const int64_t M = pc->M, K = pc->K, N = pc->N, ldb = pc->tb ? K : N;
    const int64_t da[2] = {M, K}, db[2] = {pc->tb ? N : K, pc->tb ? K : N};
    float *bdata = pc->borrowed ? matrix(K, N, 0, 1, false) : NULL; /* (the constant's bytes) */
    tfvm_tensor *a = tfvm_tensor_new(TFVM_F32, 2, da, NULL);
    tfvm_tensor *b = pc->borrowed ? dev_tensor_borrow(NULL, TFVM_F32, 2, db, bdata) : tfvm_tensor_new(TFVM_F32, 2, db, NULL);
    ck_assert(a && b);
    uint32_t seed = 21;
    for (int64_t i = 0; i < M * K; i++)
        ((float *)a->data)[i] = val(&seed, false);
    for (int64_t i = 0; i < K * N; i++)
        ((float *)b->data)[i] = val(&seed, false);
    float *want = matrix(M, N, 0, 1, false);
    ck_assert(dev_sgemm(false, pc->tb, M, N, K, a->data, K, b->data, ldb, want, N, NULL));
    const dev_value in[2] = {{.dtype = TFVM_F32, .is_tensor = 1, .u.t = a}, {.dtype = TFVM_F32, .is_tensor = 1, .u.t = b}};
    char msg[256];
    for (int round = 0; round < 3; round++) {
        dev_value out;
        if (round == 2)
            dev_par_set_runner(&runner);
        const tfvm_status st = dev_cpu_tensor(ISA_MATMUL, pc->tb ? ISA_OPT_TRANS_B : 0, in, 2, &out, NULL, msg, sizeof msg);
        dev_par_set_runner(NULL);
        ck_assert_msg(st == TFVM_OK, "%s", msg);
        ck_assert_msg(memcmp(out.u.t->data, want, (size_t)(M * N) * sizeof *want) == 0,
                      "%ldx%ldx%ld tb=%d, run %d: not dev_sgemm's bits", (long)M, (long)K, (long)N, pc->tb, round);
        dev_value_release(&out);
        ck_assert_msg((atomic_load(&b->prep) != NULL) == pc->packs, "%ldx%ldx%ld tb=%d: %s packed form", (long)M,
                      (long)K, (long)N, pc->tb, pc->packs ? "no" : "a");
    }
    free(want);
    tfvm_tensor_free(a);
    tfvm_tensor_free(b);
    free(bdata);
}
END_TEST

/* The epilogue in the micro-kernel's stores (dev_sg_kepi) has the bits of
 * the block epilogue the products run otherwise (dev_kepi_apply: the ADDs of
 * the bias and r, then RELU), on each instruction set: a bias along rows or
 * columns, with r or without, RELU or not, every tile shape (full, cut by
 * C's edge, half-wide, the wide 1- and 2-row ones), B where it lies and
 * packed; -0, NaN and ties at 0 among the results. Written over r itself
 * (C = r, one block of K), the same bits again. */
typedef struct kepi_ref {
    dev_kepi ep;
    float *c;
    int *calls;
} kepi_ref;

static void kepi_apply(const void *ctx, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols)
{
    const kepi_ref *e = ctx;
    (*e->calls)++;
    dev_kepi_apply(&e->ep, e->c, row0, nrows, col0, ncols);
}

static const gemm_case kepi_cases[] = {{1, 300, 40}, {2, 70, 9}, {5, 33, 17}, {8, 32, 64}, {64, 100, 256},
                                       {65, 47, 129}, {130, 200, 300}, {3, 2100, 20}};

START_TEST(test_kernel_epilogue)
{
    const dev_sg_isa isa = (dev_sg_isa)(_i / 8);
    const gemm_case g = kepi_cases[_i % 8];
    if (!dev_sg_have(isa))
        return;
    const int64_t M = g.M, N = g.N, K = g.K;
    float *a = matrix(M, K, 0, 21, true), *b = matrix(K, N, 0, 22, true), *res = matrix(M, N, 0, 23, true);
    float *brow = matrix(1, M, 0, 24, true), *bcol = matrix(1, N, 0, 25, true);
    float *want = matrix(M, N, 0, 26, false), *got = matrix(M, N, 0, 27, false);
    /* exact small integers: many sums tie at 0 with the bias or r (+0 and
     * -0 both occur), a NaN in one row of A and one column of B */
    a[(M / 2) * K] = NAN;
    b[N - 1] = -NAN;
    for (int mode = 0; mode < 12; mode++) {
        const bool relu = mode & 1, with_res = mode & 2;
        const int bias = mode / 4; /* none, along rows, along columns */
        int calls = 0;
        const dev_kepi ep = {.dtype = TFVM_F32, .act = relu ? ISA_OPT_ACT_RELU : 0, .rank = 2, .len = N,
                             .dims = {M, N}, .bstr = {bias == 1, bias == 2},
                             .bias = bias == 1 ? (const char *)brow : bias == 2 ? (const char *)bcol : NULL,
                             .res = with_res ? (const char *)res : NULL};
        const kepi_ref ref = {ep, want, &calls}, none = {ep, got, &calls};
        const dev_sg_epi plain = {kepi_apply, &ref, NULL};
        ck_assert(dev_sgemm_on_epi(isa, false, false, M, N, K, a, K, b, N, want, N, &plain));
        const dev_sg_kepi k = {bias == 1 ? brow : NULL, bias == 2 ? bcol : NULL, with_res ? res : NULL, N, relu};
        const dev_sg_epi in_kernel = {kepi_apply, &none, &k};
        calls = 0;
        ck_assert(dev_sgemm_on_epi(isa, false, false, M, N, K, a, K, b, N, got, N, &in_kernel));
        ck_assert_msg(calls == 0, "%s %ldx%ldx%ld mode %d: the block epilogue ran too", dev_sg_name(isa), (long)M,
                      (long)K, (long)N, mode);
        ck_assert_msg(memcmp(got, want, (size_t)(M * N) * sizeof *got) == 0,
                      "%s %ldx%ldx%ld mode %d: other bits in the kernel", dev_sg_name(isa), (long)M, (long)K, (long)N,
                      mode);
        if (with_res && dev_sgemm_one_kblock(K)) { /* over r */
            memcpy(got, res, (size_t)(M * N) * sizeof *got);
            const dev_sg_kepi over = {k.brow, k.bcol, got, N, relu};
            const dev_sg_epi in_place = {kepi_apply, &none, &over};
            ck_assert(dev_sgemm_on_epi(isa, false, false, M, N, K, a, K, b, N, got, N, &in_place));
            ck_assert_msg(memcmp(got, want, (size_t)(M * N) * sizeof *got) == 0,
                          "%s %ldx%ldx%ld mode %d: other bits over r", dev_sg_name(isa), (long)M, (long)K, (long)N,
                          mode);
        }
    }
    ck_assert(!dev_sgemm_one_kblock(0) && dev_sgemm_one_kblock(256) && !dev_sgemm_one_kblock(257));
    free(a), free(b), free(res), free(brow), free(bcol), free(want), free(got);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gemm");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_each_isa, 0, DEV_SG_N_ISA);
    tcase_add_test(tc, test_best);
    tcase_add_loop_test(tc, test_prepacked_a, 0, (int)(sizeof apack_cases / sizeof *apack_cases));
    tcase_add_loop_test(tc, test_rows_alias, 0, (int)(sizeof alias_cases / sizeof *alias_cases));
    tcase_add_loop_test(tc, test_epilogue_blocks, 0, (int)(sizeof epi_cases / sizeof *epi_cases));
    tcase_add_loop_test(tc, test_kernel_epilogue, 0, 8 * DEV_SG_N_ISA);
    tcase_add_test(tc, test_packed_b_ta);
    tcase_add_test(tc, test_packed_down);
    tcase_add_loop_test(tc, test_abpacked, 0, (int)(2 * sizeof abpack_rows / sizeof *abpack_rows));
    tcase_add_loop_test(tc, test_packed_rows, 0, (int)(sizeof rows_cases / sizeof *rows_cases));
    tcase_add_loop_test(tc, test_blocks_same_bits, 0, DEV_SG_N_ISA);
    tcase_add_loop_test(tc, test_empty, 0, DEV_SG_N_ISA);
    tcase_add_loop_test(tc, test_dots, 0, DEV_SG_N_ISA);
    tcase_add_loop_test(tc, test_gemv_gates, 0, DEV_SG_N_ISA);
    tcase_add_loop_test(tc, test_split, 0, (int)(sizeof par_cases / sizeof *par_cases));
    tcase_add_loop_test(tc, test_split_shared_a, 0, 4);
    tcase_add_loop_test(tc, test_matmul_prepacked, 0, (int)(sizeof prep_cases / sizeof *prep_cases));
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(suite()); }
