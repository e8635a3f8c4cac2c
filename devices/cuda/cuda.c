/* devices/cuda/cuda.c — the CUDA device in libtfvm: loads libtfvm_cuda.so with
 * dlopen (libtfvm never links CUDA) and implements the device vtable on its
 * raw functions: shapes, broadcasting, MATMUL's mapping onto cuBLAS. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices/cuda/abi.h"
#include "devices/cuda/elem.h"
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
/* The libtfvm_cuda.so kernel of each op: ops.def's `cuda` column. NONE and
 * GEMM are this file's own (never sent to the library as an op id). */
enum { TC_NONE = -1, TC_GEMM = -2 };
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
    return R == 0 ? DEV_FIT_NO : DEV_FIT_OK;
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

/* ---- The vtable ------------------------------------------------------------------------ */
static dev_fit cu_fits(const dev_device *d, isa_op op, uint32_t attr, const dev_value *in, uint32_t n)
{
    (void)d;
    if (cu_tc[op] == TC_GEMM) {
        cu_mm p;
        return n == 2 ? cu_mm_plan(attr, in, &p) : DEV_FIT_INVALID;
    }
    if (cu_tc[op] == TC_NONE)
        return DEV_FIT_NO;
    if ((int)n != isa_ops[op].n_in)
        return DEV_FIT_INVALID;
    return cu_fits_elem(op, in, n);
}

static tfvm_status cu_run(const dev_device *d, const dev_ctx *x, isa_op op, uint32_t attr, const dev_value *in,
                          uint32_t n, dev_value *out, char *msg, size_t ms)
{
    if (cu_fits(d, op, attr, in, n) != DEV_FIT_OK)
        return cu_fail(msg, ms, TFVM_ERR_UNSUPPORTED, "cuda: no kernel for these operands");
    for (uint32_t k = 0; k < n; k++)
        if (in[k].is_tensor && in[k].u.t->device != DEV_CUDA)
            return cu_fail(msg, ms, TFVM_ERR_INTERNAL, "cuda: an input is not in device memory");
    if (cu_tc[op] == TC_GEMM)
        return cu_run_matmul(d, x, attr, in, out, msg, ms);
    return cu_run_elem(d, x, op, in, n, out, msg, ms);
}

static const dev_iface cuda_iface = {
    .name = "cuda",
    .fits = cu_fits,
    .run = cu_run,
    .alloc = cu_alloc,
    .free = cu_free,
    .copy_in = cu_copy_in,
    .copy_out = cu_copy_out,
    .sync = cu_sync,
};
