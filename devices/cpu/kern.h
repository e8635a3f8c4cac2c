/* devices/cpu/kern.h — what the CPU tensor kernels (matmul.c, conv.c,
 * reduce.c, shape.c, layout.c, index.c, resize.c, norm.c) share: operand views
 * in which a scalar is a rank-0 tensor, results whose rank 0 comes back as a
 * scalar, one-line messages. */
#ifndef TFVM_CPU_KERN_H
#define TFVM_CPU_KERN_H

#include "devices/cpu/cpu.h"

#include <stdatomic.h>

/* An operand as a dense C-order array; a scalar points at its dev_value. */
typedef struct dev_kview {
    uint8_t dtype;
    int rank;
    int64_t dims[TFVM_MAX_RANK];
    int64_t count;
    const void *data;
    const tfvm_tensor *t; /* the operand's tensor; NULL for a scalar (STACK_PUT
                             looks at its reference count) */
} dev_kview;

/* Most inputs a tensor instruction takes (STRIDED_SLICE). */
#define DEV_KMAX_IN 5

/* One kernel call: what every helper needs to allocate and to report. */
typedef struct dev_kctx {
    isa_op op;
    uint32_t attr;
    const tfvm_allocator *alloc;
    char *msg;
    size_t msg_size;
    /* dev_cpu_tensor_shape: dev_kresult records the result here and stops
     * the kernel instead of allocating it */
    bool shape_only, shaped;
    uint8_t shape_dtype;
    int shape_rank;
    int64_t shape_dims[TFVM_MAX_RANK];
} dev_kctx;

/* Room for "f64 [" + 8 dims of up to 20 characters + "]". */
#define DEV_KSHAPE 200

typedef tfvm_status (*dev_kernel)(dev_kctx *k, const dev_kview *in, dev_value *out);

/* Writes "<op>: <fmt...>" as the message and returns code. */
tfvm_status dev_kfail(dev_kctx *k, tfvm_status code, const char *fmt, ...) UT_PRINTF(3, 4);
/* "[2, 3]" ("[]" for rank 0) and "f32 [2, 3]"; both return buf. */
const char *dev_kshape(const dev_kview *v, char *buf);
const char *dev_kdesc(const dev_kview *v, char *buf);
/* Formats any dims array the way dev_kshape does. */
const char *dev_kdims(int rank, const int64_t *dims, char *buf);
static inline size_t dev_kesize(uint8_t dtype) { return tfvm_dtype_size((tfvm_dtype)dtype); }
static inline bool dev_kfloat(uint8_t dtype) { return dtype == TFVM_F32 || dtype == TFVM_F64; }
/* Every dtype but bool (the ones arithmetic is defined on). */
static inline bool dev_knumeric(uint8_t dtype) { return dtype != TFVM_BOOL; }
/* Element i of a numeric view, as an int64 (floats truncated toward zero;
 * false for NaN or a float outside the int64 range) or as a double. */
bool dev_kget_i64(const dev_kview *v, int64_t i, int64_t *out);
double dev_kget_f64(const dev_kview *v, int64_t i);
/* Reads an integer operand that must be a scalar or a 1-element vector of
 * an integer dtype (any dtype when any_numeric: floats are truncated);
 * TFVM_ERR_TYPE naming `what` otherwise. */
tfvm_status dev_kscalar_i64(dev_kctx *k, const dev_kview *v, const char *what, bool any_numeric,
                            int64_t *out);

/* Calls M(T) with the C type of dtype dt (bool as uint8_t). */
#define DEV_KTYPED(dt, M)                                                                  \
    do {                                                                                   \
        switch (dt) {                                                                      \
        case TFVM_BOOL: M(uint8_t); break;                                                 \
        case TFVM_U8: M(uint8_t); break;                                                   \
        case TFVM_I8: M(int8_t); break;                                                    \
        case TFVM_I32: M(int32_t); break;                                                  \
        case TFVM_I64: M(int64_t); break;                                                  \
        case TFVM_F32: M(float); break;                                                    \
        default: M(double); break;                                                         \
        }                                                                                  \
    } while (0)

/* Reads operand `v` (named `what` in messages) as an i64 vector of at most
 * max entries into out[0..*n-1]; TFVM_ERR_TYPE when it is not a rank-1 i64
 * tensor, TFVM_ERR_SHAPE when it is longer than max. */
tfvm_status dev_kvec(dev_kctx *k, const dev_kview *v, const char *what, int64_t *out, int max,
                     int *n);
/* The op's shape rule (isa/shape.h) on the n operands (their shapes, and
 * the values of the small integer vectors of vals, bit i: operand i, which
 * must be host data as for the kernel's own reads): TFVM_ERR_SHAPE with the rule's
 * message ("concat: shapes [2, 3] and [2, 3, 1] differ in rank") when it
 * proves the op fails, so that the kernel and the analyser word one error
 * alike; else TFVM_OK (a failure the rule leaves to the kernel too), and
 * the rule's result shape into *o when o is not NULL. */
struct isa_shape;
tfvm_status dev_krule(dev_kctx *k, const dev_kview *in, uint32_t n, uint32_t vals, struct isa_shape *o);
/* Resolves axis attribute k->attr (an int32, negative from the end) against
 * rank; TFVM_ERR_SHAPE naming `v` when it is out of range. */
tfvm_status dev_kaxis(dev_kctx *k, const dev_kview *v, int *axis);
/* Product of dims; false when a dim is negative or the product overflows. */
bool dev_kcount(int rank, const int64_t *dims, int64_t *count);

/* Makes the result value: a scalar when rank is 0 (no allocation; *data
 * points into r), else a new tensor. TFVM_ERR_NOMEM (with the message) when
 * the allocation fails. On error r is untouched. */
tfvm_status dev_kresult(dev_kctx *k, uint8_t dtype, int rank, const int64_t *dims, dev_value *r,
                        void **data);
/* The tensor of input v when the kernel may write its result over it: v is
 * the whole tensor, held by this call alone (dev_tensor_mine: the VM
 * consumed the token that carried it; dev_cpu_in_place makes its frames
 * hold it for a later reader) and with no prepared forms kept with it;
 * else NULL. The caller checks the dtype and dims it needs. */
struct tfvm_tensor *dev_kview_overwritable(const dev_kctx *k, const dev_kview *v);
/* Scratch memory through the kernel's allocator (NULL with the NOMEM message
 * written when it fails or bytes overflow: count * size). */
void *dev_ktemp(dev_kctx *k, size_t count, size_t size);
void dev_ktemp_free(dev_kctx *k, void *p, size_t count, size_t size);

/* Copies the rank-dimensional block `dims` of elements of esz bytes from src
 * to dst, both addressed by element strides (ss, ds). Dimensions are merged
 * where both sides allow, and the last two are copied in tiles so that a
 * transposition stays cache friendly. */
void dev_kcopy(void *dst, const int64_t *ds, const void *src, const int64_t *ss, int rank,
               const int64_t *dims, size_t esz);
/* For tests: dev_kcopy's transpositions of 4-byte elements without AVX2
 * while on */
void dev_kcopy_force_portable(bool on);
/* For tests: RESIZE's bilinear f32 rows with the best vectors the CPU has
 * (0), AVX2's at most (1) or none (2) */
void dev_resize_force(int path);
/* C-order element strides of dims. */
void dev_kstrides(int rank, const int64_t *dims, int64_t *strides);

/* C[M, N] (dense, row stride ldc) = op(A)[M, K] @ op(B)[K, N] where A and B
 * are row-major with row strides lda and ldb, op transposing when ta/tb.
 * f32/f64 go to OpenBLAS, integers to a wrapping loop. Every size must fit a
 * BLAS int (dev_kgemm_fits); K = 0 gives zeros. */
tfvm_status dev_kgemm_ready(dev_kctx *k, uint8_t dtype); /* before dev_kgemm: OpenBLAS loads */
void dev_kgemm(uint8_t dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
               int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc);
bool dev_kgemm_fits(int64_t v);

/* The epilogue of FUSED_MATMUL and FUSED_CONV2D (fused.c): c[j] = act(c[j] +
 * bias[j * bstep]) for j < n, f32/f64; bias NULL adds nothing; act is one
 * ISA_OPT_ACT_* bit or 0 (the identity). bstep is 0 or 1. */
void dev_kepilogue(uint8_t dtype, uint32_t act, void *c, int64_t n, const void *bias, int64_t bstep);
/* A result of `rank` dims seen as rows of its last dim, with a bias of dims
 * bdims that broadcasts to it (NumPy rules, without growing it). */
typedef struct dev_kepi {
    uint8_t dtype;
    uint32_t act;
    int rank;
    int64_t len; /* elements per row: dims[rank - 1] (1 for rank 0) */
    int64_t dims[TFVM_MAX_RANK];
    int64_t bstr[TFVM_MAX_RANK]; /* the bias's element strides over dims, 0 where broadcast */
    const char *bias;
    const char *res; /* a tensor of the result's layout added after the bias, before the
                        activation (FUSED_CONV2D_ADD's r), or NULL */
} dev_kepi;
/* Checks k->attr's activation bits (at most one: TFVM_ERR_ARGUMENT), the
 * bias dtype (x's: TFVM_ERR_TYPE) and its dims (TFVM_ERR_SHAPE, "bias [5]
 * does not broadcast to the product [2, 4]"), and fills ep. */
tfvm_status dev_kepi_init(dev_kctx *k, dev_kepi *ep, const dev_kview *x, const dev_kview *bias,
                          int brank, const int64_t *bdims, int rank, const int64_t *dims);
/* Applies the epilogue to columns [col0, col0 + ncols) of rows [row0, row0 +
 * nrows) of the result at c: act(c + bias), or act((c + bias) + res), the
 * roundings of ADD, ADD and the activation. */
void dev_kepi_apply(const dev_kepi *ep, void *c, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols);

/* Intra-op parallelism (par.h): a parallel chunk is worth at least this many
 * multiply-adds (~3 us), so that taking it pays for waking a worker. */
#define DEV_KPAR_MACS (INT64_C(1) << 18)
/* The vector code a kernel with several builds runs: 0 AVX-512, 1 AVX2 with
 * FMA, 2 portable; the best this CPU has, or a slower one that a test
 * forces (force 1: AVX2 at most, 2: portable; 0: the best) */
int dev_kpath(int force);
/* The grain for dev_par_for over n items of `cost` work units each: the
 * loop is cut into pieces of at least `least` units, up to 4 per thread of
 * dev_par_width(), and the grain is a quarter of a piece, rounded up to a
 * multiple of align items; the runner's chunks, large at first, shrink to
 * a grain near the loop's end, so that a thread that joined late or ran
 * slower costs the others at most about a grain. n when the loop is not
 * worth splitting. */
size_t dev_kgrain(int64_t n, int64_t cost, int64_t least, int64_t align);
/* How many pieces dev_kgrain counts such a loop as on `width` threads (1:
 * it runs whole on its caller); for plans that say how they split. */
int64_t dev_kpieces(int64_t n, int64_t cost, int64_t least, unsigned width);
/* A product C = op(A) @ op(B) as dev_kgemm takes it, and the epilogue of its
 * rows: row i of C is row ep_row0 + i of the result at ep_base (ep NULL:
 * none). */
typedef struct dev_kmm {
    uint8_t dtype;
    bool ta, tb;
    int64_t M, N, K;
    const char *A;
    int64_t lda;
    const char *B;
    int64_t ldb;
    char *C;
    int64_t ldc;
    const dev_kepi *ep;
    void *ep_base;
    int64_t ep_row0;
    bool by_cols; /* set by dev_kmm_run */
    const float *ap; /* f32: A packed once (dev_kmm_prepack_a), or NULL */
    int64_t ep_col0; /* the epilogue's column of C's column 0 (a panel of a wider result) */
    /* f32, with B prepacked: op(A)'s rows where they lie (A unused), or NULL */
    const struct dev_sg_rows *arows;
    /* Non-NULL where op(B) counts only in its packed form
     * (dev_kmm_prepack_b_taps: B, in another order, is not read): where
     * that form cannot be used (out of memory) *failed is set and the block
     * of C left as it is */
    atomic_bool *failed;
    /* C is ep->res's memory (FUSED_CONV2D_ADD's result written over r): only
     * tfvm's kernel, the epilogue in its stores (dev_sg_kepi), reads each
     * element of r before it writes it there, K being one of its blocks
     * (dev_sgemm_one_kblock); where it cannot, *failed is set */
    bool in_place;
} dev_kmm;
/* Runs the product, split into row (or column) blocks over the threads of
 * dev_par_width() when it is big enough; each block is one single-threaded
 * gemm followed by its epilogue. */
void dev_kmm_run(const dev_kmm *m);
/* The same on this thread alone. */
void dev_kmm_one(const dev_kmm *m);
/* Whether m (its epilogue with r, ep_row0 at the first of its rows) can be
 * computed with in_place: f32 on tfvm's kernel, K one block of it, the
 * bias along its rows or columns, at most a RELU */
bool dev_kmm_in_place_ok(const dev_kmm *m);
/* m's A (not transposed: a weight matrix on the left, a convolution's)
 * packed for our kernel once and kept with its tensor a->t, when our kernel
 * computes m and a tensor is there to keep it; else NULL. */
const float *dev_kmm_prepack_a(const dev_kmm *m, const dev_kview *a);
/* The same for m's op(B) (a weight matrix on the right), and m run from it
 * (bp NULL: as dev_kmm_run / dev_kmm_one), split over the threads or not. */
const float *dev_kmm_prepack_b(const dev_kmm *m, const dev_kview *b);
void dev_kmm_packed(const dev_kmm *m, const float *bp, bool split);
/* Whether m, split (its B prepacked or not), splits at all on `width`
 * threads (a small product runs whole on its caller); for plans that say
 * how they split. */
bool dev_kmm_splits(const dev_kmm *m, bool packed_b, unsigned width);
/* dev_kmm_prepack_b for op(B) = b^T, b [N, K] a convolution's weights (K =
 * C * T, T taps a channel), with K reordered tap-major (dev_sgemm_pack_taps):
 * the product's A must then hold each row's taps in that order. */
const float *dev_kmm_prepack_b_taps(const dev_kmm *m, const dev_kview *b, int64_t C, int64_t T);
/* The most rows an f32 product with N columns and depth K may have and
 * still run on tfvm's own kernel (at least 1): callers that choose how
 * many rows to put in one product stay on it. */
int64_t dev_kmm_own_rows(int64_t N, int64_t K);
/* Which code computes a product of these dims (the choice dev_kgemm and
 * dev_kmm_run make, by dtype and size): tfvm's own f32 kernel, OpenBLAS (f64,
 * and f32 above its size threshold), or the wrapping integer loop. */
typedef enum dev_kmm_code { DEV_KMM_OWN, DEV_KMM_BLAS, DEV_KMM_LOOP } dev_kmm_code;
dev_kmm_code dev_kmm_who(uint8_t dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t ldc);

/* The kernels, by file. */
tfvm_status dev_cpu_matmul(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_conv2d(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_pool(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_softmax(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_reduce(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_argmax(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_reshape(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_transpose(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_concat(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_slice(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_gather(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_pad(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_shape(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_workers(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_fill(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_range(dev_kctx *k, const dev_kview *in, dev_value *out);
/* issue 10 */
tfvm_status dev_cpu_cumsum(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_squeeze(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_unsqueeze(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_flatten(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_expand(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_tile(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_strided_slice(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_trilu(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_padv(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_gather_elements(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_topk(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_onehot(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_stack_put(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_scatter_rows(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_resize(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_resize2(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_grid_sample(dev_kctx *k, const dev_kview *in, dev_value *out); /* image.c */
tfvm_status dev_cpu_nms(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_affine_grid(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_col2im(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_roi_align(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_deform_conv(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_lrn(dev_kctx *k, const dev_kview *in, dev_value *out);
/* LAYER_NORM, RMS_NORM (norm.c) */
tfvm_status dev_cpu_layer_norm(dev_kctx *k, const dev_kview *in, dev_value *out);
/* REDUCE_MEAN's mean of a run of n > 0 elements, and of the squares of
 * their differences from m (reduce.c): the bits of REDUCE_MEAN over the
 * run, and of REDUCE_MEAN of MUL(c, c) for c = SUB(x, m) */
float dev_mean_run_f32(const float *x, int64_t n);
float dev_mean_sq_run_f32(const float *x, float m, int64_t n);
double dev_mean_run_f64(const double *x, int64_t n);
double dev_mean_sq_run_f64(const double *x, double m, int64_t n);
/* LSTM_CELL_C, LSTM_CELL_H, GRU_CELL (rnncell.c) */
tfvm_status dev_cpu_rnn_cell(dev_kctx *k, const dev_kview *in, dev_value *out);
/* LSTM_STEP, GRU_STEP (rnncell.c) */
tfvm_status dev_cpu_rnn_step(dev_kctx *k, const dev_kview *in, dev_value *out);
/* bits.c (ONNX long tail) */
tfvm_status dev_cpu_bitcast(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_nonzero(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_unique(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_unique_index(dev_kctx *k, const dev_kview *in, dev_value *out);
tfvm_status dev_cpu_det(dev_kctx *k, const dev_kview *in, dev_value *out);

#endif
