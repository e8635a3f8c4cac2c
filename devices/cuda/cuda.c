/* devices/cuda/cuda.c — the CUDA device in libtfvm: loads libtfvm_cuda.so with
 * dlopen (libtfvm never links CUDA) and implements the device vtable on its
 * raw functions: shapes, broadcasting, MATMUL's mapping onto cuBLAS, the
 * convolutions as im2col and cuBLAS, the other tensor ops' plans. A tensor
 * op's checks and result shape are the CPU kernel's own
 * (dev_cpu_tensor_shape), so the GPU takes exactly what the CPU would. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices/cpu/cpu.h"
#include "devices/cuda/abi.h"
#include "devices/cuda/tens.h"
#include "devices/device.h"
#include "devices/pool.h"

#define CUDA_LIB "libtfvm_cuda.so"

static const tc_backend *cu_backend(const dev_device *d) { return d->ctx; }

/* ---- Finding and loading the library -------------------------------------------- */

/* dir/rel/libtfvm_cuda.so into buf, if that file exists. `file` is a path
 * whose directory is meant (an executable or a library). */
static bool cu_look(const char *file, const char *rel, char *buf, size_t size)
{
    const char *slash = file ? strrchr(file, '/') : NULL;
    if (!slash)
        return false;
    int n = snprintf(buf, size, "%.*s/%s" CUDA_LIB, (int)(slash - file), file, rel);
    return n > 0 && (size_t)n < size && access(buf, F_OK) == 0;
}

/* The library's path by the search order of device.h; false when none exists. */
static bool cu_find(char *buf, size_t size)
{
    Dl_info info;
    /* a data address inside libtfvm: names libtfvm.so, or the program that
     * linked libtfvm.a */
    if (dladdr((const void *)&dev_cpu_iface, &info) && info.dli_fname &&
        (cu_look(info.dli_fname, "", buf, size) || cu_look(info.dli_fname, "../lib/", buf, size)))
        return true;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        if (cu_look(exe, "", buf, size) || cu_look(exe, "../lib/", buf, size))
            return true;
    }
    return false;
}

static const dev_iface cuda_iface;

void dev_cuda_open(const char *path, dev_device *d)
{
    memset(d, 0, sizeof *d);
    d->iface = &cuda_iface;
    d->id = DEV_CUDA;
    char found[PATH_MAX + 32];
    const char *env = getenv("TFVM_CUDA_LIB");
    if (!path && env && *env)
        path = env;
    if (!path && cu_find(found, sizeof found))
        path = found;
    /* Last: the dynamic linker's own search (LD_LIBRARY_PATH, ld.so.cache). */
    void *lib = dlopen(path ? path : CUDA_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        if (path)
            ut_fmt(d->state, sizeof d->state, "unavailable: cannot load %s", dlerror()); /* names the path */
#ifdef TFVM_CUDA_BUILT
        else
            snprintf(d->state, sizeof d->state, "unavailable: " CUDA_LIB " not found (set TFVM_CUDA_LIB)");
#else
        else
            snprintf(d->state, sizeof d->state, "unavailable: " CUDA_LIB " not built (no nvcc at build time)");
#endif
        return;
    }
    /* The library is never closed: the CUDA runtime does not expect to be
     * unloaded before the process ends. */
    void *sym = dlsym(lib, TC_ENTRY_SYMBOL);
    tc_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* object to function pointer, as POSIX allows */
    const tc_backend *b = sym ? entry() : NULL;
    if (!b || b->abi_version != TC_ABI_VERSION || b->size < sizeof *b) {
        ut_fmt(d->state, sizeof d->state, "unavailable: %s: not a tfvm CUDA backend of ABI version %d",
               path ? path : CUDA_LIB, TC_ABI_VERSION);
        return;
    }
    char why[160];
    if (b->init(why, sizeof why) != 0) {
        snprintf(d->state, sizeof d->state, "unavailable: %s", why);
        return;
    }
    char desc[160];
    b->describe(desc, sizeof desc);
    d->ctx = (void *)(uintptr_t)b;
    d->ready = true;
    snprintf(d->state, sizeof d->state, "ready (%s)", desc);
}

/* ---- Memory and copies ---------------------------------------------------------- */
static void *cu_alloc(const dev_device *d, size_t n, char *msg, size_t ms)
{
    void *p = NULL;
    return cu_backend(d)->alloc(&p, n, msg, ms) == 0 ? p : NULL;
}

static void cu_free(const dev_device *d, void *p, size_t n)
{
    (void)n;
    cu_backend(d)->release(p);
}

static tfvm_status cu_copy_in(const dev_device *d, void *dst, const void *src, size_t n, char *msg, size_t ms)
{
    return cu_backend(d)->to_device(dst, src, n, msg, ms) == 0 ? TFVM_OK : TFVM_ERR_DEVICE;
}

static tfvm_status cu_copy_out(const dev_device *d, void *dst, const void *src, size_t n, char *msg, size_t ms)
{
    return cu_backend(d)->to_host(dst, src, n, msg, ms) == 0 ? TFVM_OK : TFVM_ERR_DEVICE;
}

static tfvm_status cu_sync(const dev_device *d, char *msg, size_t ms)
{
    return cu_backend(d)->sync(msg, ms) == 0 ? TFVM_OK : TFVM_ERR_DEVICE;
}

/* ---- Elementwise ------------------------------------------------------------------ */
/* The libtfvm_cuda.so kernel of each op: ops.def's `cuda` column. The
 * elementwise ones are the library's op ids; the others are this file's own
 * (never sent to the library as an op id): GEMM (cuBLAS), CONV (im2col and
 * cuBLAS), POOL, REDUCE, SOFTMAX, COPY (the layout ops: copies with strides),
 * GATHER, CAST and LAYER_NORM, the library's functions of those names. */
enum {
    TC_NONE = -1, TC_GEMM = -2, TC_CONV = -3, TC_POOL = -4, TC_REDUCE = -5, TC_SOFTMAX = -6, TC_COPY = -7,
    TC_GATHER = -8, TC_CAST = -9, TC_LAYER_NORM = -10
};
static const int cu_tc[ISA_OP_COUNT] = {
#define OP(name, cls, in, out, attrs, types, res, fails, cuda, syn) [ISA_##name] = TC_##cuda,
#include "isa/ops.def"
#undef OP
};

static int cu_rank(const dev_value *v) { return v->is_tensor ? v->u.t->rank : 0; }
static const int64_t *cu_dims(const dev_value *v) { return v->is_tensor ? v->u.t->dims : NULL; }

/* NumPy broadcasting of n operands into D[*R]; false when they do not. */
static bool cu_broadcast(const dev_value *in, uint32_t n, int *R, int64_t *D)
{
    int r = 0;
    for (uint32_t k = 0; k < n; k++)
        if (cu_rank(&in[k]) > r)
            r = cu_rank(&in[k]);
    for (int j = 0; j < r; j++) {
        D[j] = 1;
        for (uint32_t k = 0; k < n; k++) {
            int jj = j - (r - cu_rank(&in[k]));
            if (jj < 0)
                continue;
            int64_t s = cu_dims(&in[k])[jj];
            if (s == 1)
                continue;
            if (D[j] == 1)
                D[j] = s;
            else if (D[j] != s)
                return false;
        }
    }
    *R = r;
    return true;
}

/* The rules of the CPU kernels' type check (ops.def's `types`): what they
 * would reject is DEV_FIT_INVALID, so the CPU reports it. */
/* Shape arithmetic stays on the host: integer vectors of at most this many
 * elements (a shape, axes, a perm) are what the GPU's kernels read there as
 * parameters, so computing them on the GPU would cost a copy back each. */
#define CU_SHAPE_MAX 16
static bool cu_shape_like(int dtype, int rank, const int64_t *dims)
{
    return (dtype == TFVM_I32 || dtype == TFVM_I64) && rank == 1 && dims[0] <= CU_SHAPE_MAX;
}

static dev_fit cu_fits_elem(isa_op op, const dev_value *in, uint32_t n)
{
    const int tc = cu_tc[op];
    const int dt = in[0].dtype;
    if (n == 2 && in[1].dtype != dt)
        return DEV_FIT_INVALID;
    if (!isa_takes(op, (uint32_t)dt))
        return DEV_FIT_INVALID;
    if (!tc_has(tc, dt))
        return DEV_FIT_NO;
    int R;
    int64_t D[TFVM_MAX_RANK];
    if (!cu_broadcast(in, n, &R, D))
        return DEV_FIT_INVALID;
    /* A rank-0 result is a host scalar: not worth a trip to the GPU. */
    return R == 0 || cu_shape_like(dt, R, D) ? DEV_FIT_NO : DEV_FIT_OK;
}

static tfvm_status cu_fail(char *msg, size_t ms, tfvm_status code, const char *what)
{
    if (msg && ms)
        snprintf(msg, ms, "%s", what);
    return code;
}

static tfvm_status cu_new_tensor(const dev_ctx *x, tfvm_dtype dt, int rank, const int64_t *dims, tfvm_tensor **t,
                                 char *msg, size_t ms)
{
    tfvm_status st;
    *t = dev_tensor_alloc_on(x->host, x->pool, dt, rank, dims, &st);
    if (st == TFVM_ERR_DEVICE) {
        tfvm_tensor shape = {.rank = (uint8_t)rank};
        memcpy(shape.dims, dims, (size_t)rank * sizeof *dims);
        char s[200];
        ut_fmt(msg, ms, "cuda: out of device memory for a %s %s tensor", tfvm_dtype_name(dt),
               dev_shape_str(&shape, s, sizeof s));
        return TFVM_ERR_DEVICE;
    }
    return st == TFVM_OK ? TFVM_OK : cu_fail(msg, ms, st, "out of memory");
}

/* The operand as the kernel reads it through the output shape D[R]. */
static void cu_operand(const dev_value *v, int R, const int64_t *D, tc_operand *o)
{
    memset(o, 0, sizeof *o);
    if (!v->is_tensor) {
        switch (v->dtype) {
        case TFVM_BOOL: o->scalar.b = v->u.b; break;
        case TFVM_I32: o->scalar.i32 = v->u.i32; break;
        case TFVM_I64: o->scalar.i64 = v->u.i64; break;
        case TFVM_F32: o->scalar.f32 = v->u.f32; break;
        default: o->scalar.f64 = v->u.f64; break;
        }
        return;
    }
    const tfvm_tensor *t = v->u.t;
    o->data = t->data;
    int64_t acc = 1;
    for (int j = R - 1; j >= 0; j--) {
        int jj = j - (R - t->rank);
        if (jj < 0) {
            o->strides[j] = 0;
            continue;
        }
        o->strides[j] = t->dims[jj] == 1 && D[j] != 1 ? 0 : acc;
        acc *= t->dims[jj];
    }
}

static tfvm_status cu_run_elem(const dev_device *d, const dev_ctx *x, isa_op op, const dev_value *in, uint32_t n,
                               dev_value *out, char *msg, size_t ms)
{
    int R;
    int64_t D[TFVM_MAX_RANK];
    if (!cu_broadcast(in, n, &R, D))
        return cu_fail(msg, ms, TFVM_ERR_INTERNAL, "cuda: operands do not broadcast");
    const uint8_t dt[3] = {in[0].dtype, n > 1 ? in[1].dtype : 0, 0};
    const tfvm_dtype rd = (tfvm_dtype)isa_result_dtype(op, dt, 0);
    tfvm_tensor *t;
    tfvm_status st = cu_new_tensor(x, rd, R, D, &t, msg, ms);
    if (st)
        return st;
    if (t->count > 0) {
        tc_operand a, b;
        cu_operand(&in[0], R, D, &a);
        cu_operand(n > 1 ? &in[1] : &in[0], R, D, &b);
        char why[200];
        if (cu_backend(d)->elementwise(cu_tc[op], in[0].dtype, R, D, t->count, t->data, &a, &b, why,
                                       sizeof why) != 0) {
            tfvm_tensor_free(t);
            snprintf(msg, ms, "cuda: %s", why);
            return TFVM_ERR_DEVICE;
        }
    }
    *out = (dev_value){.dtype = (uint8_t)rd, .is_tensor = 1, .u.t = t};
    return TFVM_OK;
}

/* ---- MATMUL --------------------------------------------------------------------------
 * NumPy's matmul: a 1-D a is [1, k] and b [k, 1], that dimension dropped from
 * the result; leading (batch) dimensions broadcast; ta/tb transpose a's and
 * b's last two dimensions. */
typedef struct cu_mm {
    int64_t m, n, k;
    int ob;                          /* batch rank of the result */
    int64_t bd[TFVM_MAX_RANK];       /* batch dims of the result */
    int64_t sa[TFVM_MAX_RANK], sb[TFVM_MAX_RANK]; /* a's and b's batch strides (elements; 0 = broadcast) */
    int rank;
    int64_t dims[TFVM_MAX_RANK];     /* the result's shape */
} cu_mm;

static dev_fit cu_mm_plan(uint32_t opts, const dev_value *in, cu_mm *p)
{
    if (!in[0].is_tensor || !in[1].is_tensor || in[0].dtype != in[1].dtype)
        return DEV_FIT_INVALID;
    const tfvm_tensor *a = in[0].u.t, *b = in[1].u.t;
    if (a->rank < 1 || b->rank < 1)
        return DEV_FIT_INVALID;
    const bool ta = opts & ISA_OPT_TRANS_A, tb = opts & ISA_OPT_TRANS_B;
    if ((a->rank == 1 && ta) || (b->rank == 1 && tb))
        return DEV_FIT_NO; /* transposing a vector: the CPU's rule decides */
    int64_t am, ak, bk, bn;
    if (a->rank == 1) {
        am = 1;
        ak = a->dims[0];
    } else {
        int64_t r = a->dims[a->rank - 2], c = a->dims[a->rank - 1];
        am = ta ? c : r;
        ak = ta ? r : c;
    }
    if (b->rank == 1) {
        bk = b->dims[0];
        bn = 1;
    } else {
        int64_t r = b->dims[b->rank - 2], c = b->dims[b->rank - 1];
        bk = tb ? c : r;
        bn = tb ? r : c;
    }
    if (ak != bk)
        return DEV_FIT_INVALID;
    p->m = am;
    p->n = bn;
    p->k = ak;
    int ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0;
    p->ob = ra > rb ? ra : rb;
    int64_t acc_a = am * ak, acc_b = ak * bn;
    for (int j = p->ob - 1; j >= 0; j--) {
        int ja = j - (p->ob - ra), jb = j - (p->ob - rb);
        int64_t da = ja >= 0 ? a->dims[ja] : 1, db = jb >= 0 ? b->dims[jb] : 1;
        if (da != db && da != 1 && db != 1)
            return DEV_FIT_INVALID;
        p->bd[j] = da == 1 ? db : da;
        p->sa[j] = da == 1 ? 0 : acc_a;
        p->sb[j] = db == 1 ? 0 : acc_b;
        acc_a *= da;
        acc_b *= db;
    }
    p->rank = 0;
    for (int j = 0; j < p->ob; j++)
        p->dims[p->rank++] = p->bd[j];
    if (a->rank > 1)
        p->dims[p->rank++] = am;
    if (b->rank > 1)
        p->dims[p->rank++] = bn;
    if (a->dtype != TFVM_F32 && a->dtype != TFVM_F64)
        return DEV_FIT_NO;
    if (p->rank == 0)
        return DEV_FIT_NO; /* a dot product's scalar: the CPU's */
    /* cuBLAS takes int sizes and leading dimensions */
    if (p->m > INT_MAX || p->n > INT_MAX || p->k > INT_MAX)
        return DEV_FIT_NO;
    return DEV_FIT_OK;
}

static tfvm_status cu_run_matmul(const dev_device *d, const dev_ctx *x, uint32_t opts, const dev_value *in,
                                 dev_value *out, char *msg, size_t ms)
{
    cu_mm p;
    if (cu_mm_plan(opts, in, &p) != DEV_FIT_OK)
        return cu_fail(msg, ms, TFVM_ERR_INTERNAL, "cuda: MATMUL sent with operands it cannot take");
    const tfvm_tensor *a = in[0].u.t, *b = in[1].u.t;
    const bool ta = opts & ISA_OPT_TRANS_A, tb = opts & ISA_OPT_TRANS_B;
    tfvm_tensor *t;
    tfvm_status st = cu_new_tensor(x, (tfvm_dtype)a->dtype, p.rank, p.dims, &t, msg, ms);
    if (st)
        return st;
    int64_t batch = 1;
    for (int j = 0; j < p.ob; j++)
        batch *= p.bd[j];
    if (t->count > 0) {
        /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
         * column-major view of a row-major matrix is its transpose, so cuBLAS
         * gets b's data as its A and a's as its B, with sizes (n, m, k). b as
         * stored is k x n row-major (n x k when tb): seen column-major that is
         * B^T (ld n) -- no transpose -- or B (ld k) -- transpose. Likewise a. */
        const int m = (int)p.m, n = (int)p.n, k = (int)p.k;
        /* (cuBLAS wants leading dimensions >= 1 even when k == 0) */
        const int lda_cu = (tb ? k : n) > 1 ? (tb ? k : n) : 1, ldb_cu = (ta ? m : k) > 1 ? (ta ? m : k) : 1;
        const size_t es = tfvm_dtype_size((tfvm_dtype)a->dtype);
        /* One strided-batched call when each operand's batch is either one
         * matrix for all (stride 0) or dense; else a call per batch. */
        bool dense_a = true, dense_b = true, zero_a = true, zero_b = true;
        int64_t acc = 1;
        for (int j = p.ob - 1; j >= 0; j--) {
            dense_a &= p.sa[j] == acc * p.m * p.k;
            dense_b &= p.sb[j] == acc * p.k * p.n;
            zero_a &= p.sa[j] == 0;
            zero_b &= p.sb[j] == 0;
            acc *= p.bd[j];
        }
        const tc_backend *be = cu_backend(d);
        char why[200];
        int rc = 0;
        if ((dense_a || zero_a) && (dense_b || zero_b) && batch <= INT_MAX) {
            rc = be->gemm(a->dtype, tb, ta, n, m, k, b->data, lda_cu, zero_b ? 0 : p.k * p.n, a->data, ldb_cu,
                          zero_a ? 0 : p.m * p.k, t->data, n, p.m * p.n, (int)batch, why, sizeof why);
        } else {
            for (int64_t i = 0; i < batch && rc == 0; i++) {
                int64_t oa = 0, ob = 0, rem = i;
                for (int j = p.ob - 1; j >= 0; j--) {
                    int64_t idx = rem % p.bd[j];
                    rem /= p.bd[j];
                    oa += idx * p.sa[j];
                    ob += idx * p.sb[j];
                }
                rc = be->gemm(a->dtype, tb, ta, n, m, k, (const char *)b->data + ob * (int64_t)es, lda_cu, 0,
                              (const char *)a->data + oa * (int64_t)es, ldb_cu, 0,
                              (char *)t->data + i * p.m * p.n * (int64_t)es, n, 0, 1, why, sizeof why);
            }
        }
        if (rc != 0) {
            tfvm_tensor_free(t);
            snprintf(msg, ms, "cuda: %s", why);
            return TFVM_ERR_DEVICE;
        }
    }
    *out = (dev_value){.dtype = a->dtype, .is_tensor = 1, .u.t = t};
    return TFVM_OK;
}


/* ---- Tensor ops ------------------------------------------------------------------------ */
/* The inputs a kernel reads on the host (bit k: input k): the parameter
 * vectors (CONV2D's p, the pools' p, axes, shapes, perms). Placement leaves
 * them there (dev_iface.host_inputs). */
static uint32_t cu_host_mask(isa_op op)
{
    switch (cu_tc[op]) {
    case TC_CONV: return 1u << 2;
    case TC_POOL: case TC_REDUCE: return 1u << 1;
    case TC_LAYER_NORM: return op == ISA_LAYER_NORM ? 1u << 3 : 1u << 2; /* eps */
    case TC_COPY: return op == ISA_CONCAT || op == ISA_FLATTEN ? 0 : 1u << 1;
    default: return 0;
    }
}

static uint32_t cu_host_inputs(const dev_device *d, isa_op op)
{
    (void)d;
    return cu_host_mask(op);
}

/* The elements of a host i64 vector the CPU's checks have accepted. */
static int cu_vec(const dev_value *v, int64_t *out, int max)
{
    const tfvm_tensor *t = v->u.t;
    int n = t->count < max ? (int)t->count : max;
    memcpy(out, t->data, (size_t)n * sizeof *out);
    return n;
}

static int cu_axis(int32_t a, int rank) { return a < 0 ? a + rank : a; }

static bool cu_gpu_dtype(int dt) { return dt >= TFVM_BOOL && dt <= TFVM_F64; }
static bool cu_float(int dt) { return dt == TFVM_F32 || dt == TFVM_F64; }

static int cu_act(uint32_t attr)
{
    static const uint32_t bits[TC_ACT_COUNT] = {
        0, ISA_OPT_ACT_RELU, ISA_OPT_ACT_SIGMOID, ISA_OPT_ACT_TANH, ISA_OPT_ACT_SILU, ISA_OPT_ACT_GELU,
        ISA_OPT_ACT_HARDSIGMOID, ISA_OPT_ACT_HARDSWISH, ISA_OPT_ACT_RELU6, ISA_OPT_ACT_GELU_TANH, ISA_OPT_ACT_GELU_NEW};
    for (int a = 1; a < TC_ACT_COUNT; a++)
        if ((attr & ISA_OPT_ACT_MASK) == bits[a])
            return a;
    return TC_ACT_NONE;
}

static int cu_red_op(isa_op op)
{
    switch (op) {
    case ISA_REDUCE_SUM: return TC_RED_SUM;
    case ISA_REDUCE_MEAN: return TC_RED_MEAN;
    case ISA_REDUCE_MAX: return TC_RED_MAX;
    default: return TC_RED_MIN;
    }
}

/* A tensor op's result: its dtype and shape by the CPU kernel's checks. */
typedef struct cu_shape {
    uint8_t dtype;
    int rank;
    int64_t dims[TFVM_MAX_RANK];
} cu_shape;

/* GATHER: the CPU's checks read the indices, which are on the GPU; these
 * are its checks but the index range (the kernel reports that). */
static dev_fit cu_gather_plan(uint32_t attr, const dev_value *in, cu_shape *sh)
{
    if (!in[0].is_tensor || !in[1].is_tensor)
        return DEV_FIT_NO; /* a scalar x or index: the CPU's */
    const tfvm_tensor *x = in[0].u.t, *ix = in[1].u.t;
    const int axis = cu_axis((int32_t)attr, x->rank);
    if (axis < 0 || axis >= x->rank || (ix->dtype != TFVM_I32 && ix->dtype != TFVM_I64) ||
        x->rank - 1 + ix->rank > TFVM_MAX_RANK || (ISA_TYPES_STORE >> x->dtype & 1))
        return DEV_FIT_INVALID;
    sh->dtype = x->dtype;
    sh->rank = 0;
    for (int i = 0; i < axis; i++)
        sh->dims[sh->rank++] = x->dims[i];
    for (int i = 0; i < ix->rank; i++)
        sh->dims[sh->rank++] = ix->dims[i];
    for (int i = axis + 1; i < x->rank; i++)
        sh->dims[sh->rank++] = x->dims[i];
    return sh->rank == 0 ? DEV_FIT_NO : DEV_FIT_OK;
}

/* Whether the kernel takes what the CPU's checks accepted. */
static bool cu_tensor_has(isa_op op, uint32_t attr, const dev_value *in, const cu_shape *sh)
{
    const int dt = in[0].dtype;
    switch (cu_tc[op]) {
    case TC_GEMM: /* FUSED_MATMUL: the product as MATMUL's */ {
        cu_mm p;
        return cu_mm_plan(attr & (ISA_OPT_TRANS_A | ISA_OPT_TRANS_B), in, &p) == DEV_FIT_OK;
    }
    case TC_CONV: {
        if (attr & (ISA_OPT_NHWC_IN | ISA_OPT_NHWC_OUT))
            return false; /* channels last: the CPU's kernels alone */
        const tfvm_tensor *w = in[1].u.t;
        const int64_t groups = in[2].u.t->count == 9 ? ((const int64_t *)in[2].u.t->data)[8] : 1;
        const int64_t K = w->dims[1] * w->dims[2] * w->dims[3], P = sh->dims[2] * sh->dims[3];
        return cu_float(dt) && K <= INT_MAX && P <= INT_MAX && w->dims[0] / groups <= INT_MAX;
    }
    case TC_POOL: return op == ISA_AVGPOOL ? cu_float(dt) : dt >= TFVM_I32 && dt <= TFVM_F64;
    case TC_REDUCE: return tc_reduce_has(cu_red_op(op), dt);
    case TC_SOFTMAX: case TC_LAYER_NORM: return cu_float(dt);
    default: return true; /* COPY and GATHER move elements of any size */
    }
}

static dev_fit cu_fits_tensor(isa_op op, uint32_t attr, const dev_value *in, uint32_t n, cu_shape *sh)
{
    const uint32_t host = cu_host_mask(op);
    for (uint32_t k = 0; k < n; k++)
        if ((host >> k & 1) && in[k].is_tensor && in[k].u.t->device != DEV_CPU)
            return DEV_FIT_NO; /* a parameter vector made on the GPU: the CPU's */
    if (cu_tc[op] == TC_GATHER) {
        dev_fit f = cu_gather_plan(attr, in, sh);
        return f == DEV_FIT_OK && cu_shape_like(sh->dtype, sh->rank, sh->dims) ? DEV_FIT_NO : f;
    }
    char why[256];
    if (dev_cpu_tensor_shape(op, attr, in, n, host, &sh->dtype, &sh->rank, sh->dims, why, sizeof why) != TFVM_OK)
        return DEV_FIT_INVALID;
    if (sh->rank == 0 || cu_shape_like(sh->dtype, sh->rank, sh->dims))
        return DEV_FIT_NO; /* a host scalar, shape arithmetic */
    return cu_tensor_has(op, attr, in, sh) ? DEV_FIT_OK : DEV_FIT_NO;
}

/* CAST between the GPU dtypes. */
static dev_fit cu_fits_cast(uint32_t attr, const dev_value *in, uint32_t n)
{
    if (n != 1 || !isa_dtype_valid(attr) || !isa_takes(ISA_CAST, in[0].dtype))
        return DEV_FIT_INVALID;
    if (!cu_gpu_dtype(in[0].dtype) || !cu_gpu_dtype((int)attr) || !in[0].is_tensor || in[0].u.t->rank == 0 ||
        cu_shape_like((int)attr, in[0].u.t->rank, in[0].u.t->dims))
        return DEV_FIT_NO;
    return DEV_FIT_OK;
}

/* What a backend call's failure becomes: the message, the result freed. */
static tfvm_status cu_failed(tfvm_tensor *t, const char *why, char *msg, size_t ms)
{
    tfvm_tensor_free(t);
    snprintf(msg, ms, "cuda: %s", why);
    return TFVM_ERR_DEVICE;
}

/* A kernel found bad data (TC_DATA_ERROR): the CPU runs the instruction on
 * host copies of the inputs to say what is wrong, in its words. */
static tfvm_status cu_cpu_says(const dev_device *d, isa_op op, uint32_t attr, const dev_value *in, uint32_t n,
                               char *msg, size_t ms)
{
    dev_value h[5];
    tfvm_status st = TFVM_OK;
    uint32_t k = 0;
    for (; k < n && st == TFVM_OK; k++) {
        h[k] = in[k];
        if (!in[k].is_tensor || in[k].u.t->device == DEV_CPU) {
            if (in[k].is_tensor)
                tfvm_tensor_ref(in[k].u.t);
            continue;
        }
        const tfvm_tensor *t = in[k].u.t;
        h[k].u.t = dev_tensor_alloc(NULL, (tfvm_dtype)t->dtype, t->rank, t->dims);
        if (!h[k].u.t)
            st = cu_fail(msg, ms, TFVM_ERR_NOMEM, "out of memory");
        else if (t->nbytes)
            st = cu_copy_out(d, h[k].u.t->data, t->data, t->nbytes, msg, ms);
    }
    if (st == TFVM_OK) {
        dev_value out = {0};
        st = isa_ops[op].cls == ISA_CLASS_TENSOR ? dev_cpu_tensor(op, attr, h, n, &out, NULL, msg, ms)
                                                 : dev_cpu_elementwise(op, attr, h, &out, NULL, msg, ms);
        if (st == TFVM_OK) {
            dev_value_release(&out);
            st = cu_fail(msg, ms, TFVM_ERR_INTERNAL, "cuda: the GPU found bad data where the CPU found none");
        }
    }
    for (uint32_t j = 0; j < k; j++)
        if (h[j].is_tensor && h[j].u.t)
            tfvm_tensor_free(h[j].u.t);
    return st;
}

/* C-order element strides */
static void cu_strides(int rank, const int64_t *dims, int64_t *s)
{
    int64_t acc = 1;
    for (int j = rank - 1; j >= 0; j--) {
        s[j] = acc;
        acc *= dims[j];
    }
}

/* CONV2D and FUSED_CONV2D: per group, y_g [O/G, OH*OW] = w_g [O/G, K] @
 * col_g [K, OH*OW] for each image, K = C/G * KH * KW, col the im2col of
 * the image (x itself for a 1x1 window at stride 1 without padding), as one
 * strided-batched GEMM over a chunk of images; then the bias and activation. */
int64_t dev_cuda_col_bytes = (int64_t)256 << 20;
static int cu_conv(const dev_device *d, const dev_ctx *x, isa_op op, uint32_t attr, const dev_value *in,
                   tfvm_tensor *y, char *why, size_t ws)
{
    const tc_backend *be = cu_backend(d);
    const tfvm_tensor *X = in[0].u.t, *w = in[1].u.t;
    int64_t p[9];
    cu_vec(&in[2], p, 9);
    const int dt = X->dtype;
    const size_t es = tfvm_dtype_size((tfvm_dtype)dt);
    const tc_conv c = {.N = X->dims[0], .C = X->dims[1], .H = X->dims[2], .W = X->dims[3], .KH = w->dims[2],
                       .KW = w->dims[3], .OH = y->dims[2], .OW = y->dims[3], .sh = p[0], .sw = p[1], .pt = p[2],
                       .pl = p[3], .dh = p[6], .dw = p[7]};
    const int64_t G = p[8], O = w->dims[0], Og = O / G, Cg = c.C / G, K = Cg * c.KH * c.KW, P = c.OH * c.OW;
    const bool direct = c.KH == 1 && c.KW == 1 && c.sh == 1 && c.sw == 1 && !p[2] && !p[3] && !p[4] && !p[5];
    const int64_t img = c.C * c.KH * c.KW * P; /* column elements of one image */
    int64_t chunk = c.N;
    tfvm_tensor *col = NULL;
    if (!direct && K > 0) {
        chunk = dev_cuda_col_bytes / (img * (int64_t)es);
        chunk = chunk < 1 ? 1 : chunk > c.N ? c.N : chunk;
        char m[160];
        const int64_t n = chunk * img;
        if (cu_new_tensor(x, (tfvm_dtype)dt, 1, &n, &col, m, sizeof m) != TFVM_OK) {
            snprintf(why, ws, "%s", m + (strncmp(m, "cuda: ", 6) == 0 ? 6 : 0));
            return 1;
        }
    }
    int rc = 0;
    for (int64_t n0 = 0; n0 < c.N && rc == 0; n0 += chunk) {
        const int64_t nimg = c.N - n0 < chunk ? c.N - n0 : chunk;
        const char *src = direct ? (const char *)X->data + n0 * c.C * P * (int64_t)es : col ? col->data : NULL;
        if (col)
            rc = be->im2col(dt, &c, n0, nimg, X->data, col->data, why, ws);
        for (int64_t g = 0; g < G && rc == 0; g++)
            rc = be->gemm(dt, 0, 0, (int)P, (int)Og, (int)K, src ? src + g * K * P * (int64_t)es : NULL, (int)P,
                          direct ? c.C * P : img, (const char *)w->data + g * Og * K * (int64_t)es,
                          K > 1 ? (int)K : 1, 0, (char *)y->data + (n0 * O + g * Og) * P * (int64_t)es, (int)P,
                          O * P, (int)nimg, why, ws);
    }
    tfvm_tensor_free(col);
    /* the bias and activation; FUSED_CONV2D_ADD's r between them (an
     * elementwise "bias" of the result's strides), the CPU's roundings */
    const int64_t dims[3] = {c.N, O, P};
    if (rc == 0 && (op == ISA_FUSED_CONV2D || op == ISA_FUSED_CONV2D_ADD)) {
        tc_operand b = {.data = in[3].u.t->data, .strides = {0, 1, 0}};
        rc = be->bias_act(dt, op == ISA_FUSED_CONV2D ? cu_act(attr) : TC_ACT_NONE, 3, dims, y->count, y->data, &b,
                          why, ws);
    }
    if (rc == 0 && op == ISA_FUSED_CONV2D_ADD) {
        tc_operand r = {.data = in[4].u.t->data, .strides = {O * P, P, 1}};
        rc = be->bias_act(dt, cu_act(attr), 3, dims, y->count, y->data, &r, why, ws);
    }
    return rc;
}

static int cu_pool(const dev_device *d, isa_op op, const dev_value *in, tfvm_tensor *y, char *why, size_t ws)
{
    const tfvm_tensor *X = in[0].u.t;
    int64_t p[12] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0};
    cu_vec(&in[1], p, 12);
    const tc_pool q = {.N = X->dims[0], .C = X->dims[1], .H = X->dims[2], .W = X->dims[3], .OH = y->dims[2],
                       .OW = y->dims[3], .kh = p[0], .kw = p[1], .sh = p[2], .sw = p[3], .pt = p[4], .pl = p[5],
                       .pb = p[6], .pr = p[7], .dh = p[8], .dw = p[9], .avg = op == ISA_AVGPOOL,
                       .count_include_pad = (int32_t)p[11]};
    return cu_backend(d)->pool(X->dtype, &q, X->data, y->data, why, ws);
}

static int cu_reduce(const dev_device *d, isa_op op, const dev_value *in, tfvm_tensor *y, char *why, size_t ws)
{
    const tfvm_tensor *X = in[0].u.t;
    int64_t axes[TFVM_MAX_RANK], xs[TFVM_MAX_RANK];
    const int na = cu_vec(&in[1], axes, TFVM_MAX_RANK);
    bool red[TFVM_MAX_RANK] = {false};
    for (int i = 0; i < na; i++)
        red[axes[i] < 0 ? axes[i] + X->rank : axes[i]] = true;
    cu_strides(X->rank, X->dims, xs);
    tc_reduce r = {.kept = 1, .rcount = 1};
    for (int i = 0; i < X->rank; i++) {
        if (na == 0 || red[i]) {
            r.rdims[r.nr] = X->dims[i];
            r.rstrides[r.nr++] = xs[i];
            r.rcount *= X->dims[i];
        } else {
            r.kdims[r.nk] = X->dims[i];
            r.kstrides[r.nk++] = xs[i];
            r.kept *= X->dims[i];
        }
    }
    return cu_backend(d)->reduce(cu_red_op(op), X->dtype, &r, X->data, y->data, why, ws);
}

/* x's dims before and after an axis, as outer and inner element counts */
static void cu_split(const tfvm_tensor *x, int axis, int64_t *outer, int64_t *inner)
{
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= x->dims[i];
    for (int i = axis + 1; i < x->rank; i++)
        *inner *= x->dims[i];
}

static int cu_softmax(const dev_device *d, isa_op op, uint32_t attr, const dev_value *in, tfvm_tensor *y, char *why,
                      size_t ws)
{
    const tfvm_tensor *X = in[0].u.t;
    const int axis = cu_axis((int32_t)attr, X->rank);
    int64_t outer, inner;
    cu_split(X, axis, &outer, &inner);
    return cu_backend(d)->softmax(X->dtype, op == ISA_LOG_SOFTMAX, outer, X->dims[axis], inner, X->data, y->data,
                                  why, ws);
}

/* LAYER_NORM and RMS_NORM (no centring; its bias a scalar -0, which adds
 * nothing): rows over x's dims from the axis on, scale and bias read
 * through x's shape (the CPU's checks have accepted them), eps on the host */
static int cu_layer_norm(const dev_device *d, isa_op op, uint32_t attr, const dev_value *in, tfvm_tensor *y,
                         char *why, size_t ws)
{
    const tfvm_tensor *X = in[0].u.t;
    const bool ln = op == ISA_LAYER_NORM, f32 = X->dtype == TFVM_F32;
    int64_t dn = 1;
    for (int i = cu_axis((int32_t)attr, X->rank); i < X->rank; i++)
        dn *= X->dims[i];
    const dev_value nz = f32 ? (dev_value){.dtype = TFVM_F32, .u.f32 = -0.0f}
                             : (dev_value){.dtype = TFVM_F64, .u.f64 = -0.0};
    tc_operand s, b;
    cu_operand(&in[1], X->rank, X->dims, &s);
    cu_operand(ln ? &in[2] : &nz, X->rank, X->dims, &b);
    const dev_value *e = &in[ln ? 3 : 2];
    const double eps = e->is_tensor ? (f32 ? ((const float *)e->u.t->data)[0] : ((const double *)e->u.t->data)[0])
                                    : (f32 ? e->u.f32 : e->u.f64);
    return cu_backend(d)->layer_norm(X->dtype, ln, X->rank, X->dims, dn, X->data, &s, &b, eps, y->data, why, ws);
}

/* The layout ops: RESHAPE, FLATTEN, SQUEEZE, UNSQUEEZE copy the elements as
 * they are; TRANSPOSE reads x through permuted strides; CONCAT copies a and b
 * into their parts of each outer row. */
static int cu_copy(const dev_device *d, isa_op op, uint32_t attr, const dev_value *in, tfvm_tensor *y, char *why,
                   size_t ws)
{
    const tc_backend *be = cu_backend(d);
    const tfvm_tensor *X = in[0].u.t;
    const int es = (int)tfvm_dtype_size((tfvm_dtype)X->dtype);
    if (op == ISA_TRANSPOSE) {
        int64_t perm[TFVM_MAX_RANK], xs[TFVM_MAX_RANK], ss[TFVM_MAX_RANK], ds[TFVM_MAX_RANK];
        const int n = cu_vec(&in[1], perm, TFVM_MAX_RANK);
        cu_strides(X->rank, X->dims, xs);
        for (int i = 0; i < n; i++)
            ss[i] = xs[perm[i] < 0 ? perm[i] + n : perm[i]];
        cu_strides(y->rank, y->dims, ds);
        return be->copy(es, y->rank, y->dims, y->count, y->data, ds, X->data, ss, why, ws);
    }
    if (op == ISA_CONCAT) {
        const int axis = cu_axis((int32_t)attr, X->rank);
        int64_t outer, inner;
        cu_split(X, axis, &outer, &inner);
        const int64_t row = y->dims[axis] * inner;
        int64_t done = 0; /* elements of a row already written */
        int rc = 0;
        for (int k = 0; k < 2 && rc == 0; k++) {
            const tfvm_tensor *t = in[k].u.t;
            const int64_t part = t->dims[axis] * inner, dims[2] = {outer, part}, ds[2] = {row, 1}, ss[2] = {part, 1};
            rc = be->copy(es, 2, dims, outer * part, (char *)y->data + done * es, ds, t->data, ss, why, ws);
            done += part;
        }
        return rc;
    }
    const int64_t one = 1;
    return be->copy(es, 1, &y->count, y->count, y->data, &one, X->data, &one, why, ws);
}

static int cu_gather(const dev_device *d, uint32_t attr, const dev_value *in, tfvm_tensor *y, char *why, size_t ws)
{
    const tfvm_tensor *X = in[0].u.t, *ix = in[1].u.t;
    const int axis = cu_axis((int32_t)attr, X->rank);
    int64_t outer, inner;
    cu_split(X, axis, &outer, &inner);
    return cu_backend(d)->gather((int)tfvm_dtype_size((tfvm_dtype)X->dtype), ix->dtype, outer, X->dims[axis], inner,
                                 ix->count, X->data, ix->data, y->data, why, ws);
}

/* Runs a tensor op (or CAST) whose fit is OK on the GPU. */
static tfvm_status cu_run_tensor(const dev_device *d, const dev_ctx *x, isa_op op, uint32_t attr, const dev_value *in,
                                 uint32_t n, const cu_shape *sh, dev_value *out, char *msg, size_t ms)
{
    if (cu_tc[op] == TC_GEMM) { /* FUSED_MATMUL: the product, then bias and activation in place */
        tfvm_status st = cu_run_matmul(d, x, attr & (ISA_OPT_TRANS_A | ISA_OPT_TRANS_B), in, out, msg, ms);
        if (st != TFVM_OK)
            return st;
        tfvm_tensor *t = out->u.t;
        tc_operand b;
        cu_operand(&in[2], t->rank, t->dims, &b);
        char why[200];
        if (cu_backend(d)->bias_act(t->dtype, cu_act(attr), t->rank, t->dims, t->count, t->data, &b, why,
                                    sizeof why) != 0) {
            *out = (dev_value){0};
            return cu_failed(t, why, msg, ms);
        }
        return TFVM_OK;
    }
    tfvm_tensor *t;
    tfvm_status st = cu_new_tensor(x, (tfvm_dtype)sh->dtype, sh->rank, sh->dims, &t, msg, ms);
    if (st)
        return st;
    char why[200];
    int rc = 0;
    if (t->count > 0) {
        switch (cu_tc[op]) {
        case TC_CONV: rc = cu_conv(d, x, op, attr, in, t, why, sizeof why); break;
        case TC_POOL: rc = cu_pool(d, op, in, t, why, sizeof why); break;
        case TC_REDUCE: rc = cu_reduce(d, op, in, t, why, sizeof why); break;
        case TC_SOFTMAX: rc = cu_softmax(d, op, attr, in, t, why, sizeof why); break;
        case TC_LAYER_NORM: rc = cu_layer_norm(d, op, attr, in, t, why, sizeof why); break;
        case TC_COPY: rc = cu_copy(d, op, attr, in, t, why, sizeof why); break;
        case TC_GATHER: rc = cu_gather(d, attr, in, t, why, sizeof why); break;
        default: rc = cu_backend(d)->cast(in[0].dtype, (int)attr, t->count, in[0].u.t->data, t->data, why, sizeof why);
        }
    }
    if (rc == TC_DATA_ERROR) {
        tfvm_tensor_free(t);
        return cu_cpu_says(d, op, attr, in, n, msg, ms);
    }
    if (rc != 0)
        return cu_failed(t, why, msg, ms);
    *out = (dev_value){.dtype = sh->dtype, .is_tensor = 1, .u.t = t};
    return TFVM_OK;
}

/* ---- The vtable ------------------------------------------------------------------------ */
static dev_fit cu_fits_shape(isa_op op, uint32_t attr, const dev_value *in, uint32_t n, cu_shape *sh)
{
    if (op == ISA_CAST) {
        dev_fit f = cu_fits_cast(attr, in, n);
        if (f == DEV_FIT_OK) {
            sh->dtype = (uint8_t)attr;
            sh->rank = in[0].u.t->rank;
            memcpy(sh->dims, in[0].u.t->dims, (size_t)sh->rank * sizeof *sh->dims);
        }
        return f;
    }
    if (cu_tc[op] == TC_GEMM && op == ISA_MATMUL) {
        cu_mm p;
        return n == 2 ? cu_mm_plan(attr, in, &p) : DEV_FIT_INVALID;
    }
    if (cu_tc[op] == TC_NONE)
        return DEV_FIT_NO;
    if ((int)n != isa_ops[op].n_in)
        return DEV_FIT_INVALID;
    if (isa_ops[op].cls == ISA_CLASS_TENSOR)
        return cu_fits_tensor(op, attr, in, n, sh);
    return cu_fits_elem(op, in, n);
}

static dev_fit cu_fits(const dev_device *d, isa_op op, uint32_t attr, const dev_value *in, uint32_t n)
{
    (void)d;
    cu_shape sh;
    return cu_fits_shape(op, attr, in, n, &sh);
}

static tfvm_status cu_run(const dev_device *d, const dev_ctx *x, isa_op op, uint32_t attr, const dev_value *in,
                          uint32_t n, dev_value *out, char *msg, size_t ms)
{
    cu_shape sh;
    if (cu_fits_shape(op, attr, in, n, &sh) != DEV_FIT_OK)
        return cu_fail(msg, ms, TFVM_ERR_UNSUPPORTED, "cuda: no kernel for these operands");
    const uint32_t host = cu_host_mask(op);
    for (uint32_t k = 0; k < n; k++)
        if (in[k].is_tensor && in[k].u.t->device != ((host >> k & 1) ? DEV_CPU : DEV_CUDA))
            return cu_fail(msg, ms, TFVM_ERR_INTERNAL, "cuda: an input is not where the kernel reads it");
    if (op == ISA_MATMUL)
        return cu_run_matmul(d, x, attr, in, out, msg, ms);
    if (op == ISA_CAST || isa_ops[op].cls == ISA_CLASS_TENSOR)
        return cu_run_tensor(d, x, op, attr, in, n, &sh, out, msg, ms);
    return cu_run_elem(d, x, op, in, n, out, msg, ms);
}

static const dev_iface cuda_iface = {
    .name = "cuda",
    .fits = cu_fits,
    .host_inputs = cu_host_inputs,
    .run = cu_run,
    .alloc = cu_alloc,
    .free = cu_free,
    .copy_in = cu_copy_in,
    .copy_out = cu_copy_out,
    .sync = cu_sync,
};
