/* test/unit/test_devices.c — the device registry, and every CUDA kernel checked
 * against the CPU's: on the host stand-in (test/unit/fake_cuda.c) always, on a
 * real GPU when there is one (else "SKIP: no CUDA device"). From the repo root. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "devices/cpu/cpu.h"
#include "devices/device.h"
#include "devices/pool.h"
#include "testutil.h"
#include "util/half.h"

/* ---- Setup ------------------------------------------------------------------------- */

/* dir of this executable + name */
static void beside_exe(const char *name, char *buf, size_t size)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ck_assert_int_gt(n, 0);
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    *slash = '\0';
    snprintf(buf, size, "%s/%s", exe, name);
}

static dev_device fake;
static const dev_device *load_fake(void)
{
    if (!fake.ready) {
        char path[4200];
        beside_exe("libtfvm_fakecuda.so", path, sizeof path);
        dev_cuda_open(path, &fake);
        ck_assert_msg(fake.ready, "fake CUDA: %s", fake.state);
    }
    return &fake;
}

/* ---- Values ------------------------------------------------------------------------ */
static unsigned rng = 12345;
static unsigned next_rand(void)
{
    rng = rng * 1103515245u + 12345u;
    return rng >> 8;
}

static void fill(tfvm_tensor *t, bool positive)
{
    for (int64_t i = 0; i < t->count; i++) {
        unsigned r = next_rand();
        double v = ((double)(r % 2001) - 1000.0) / 250.0; /* -4 .. 4 */
        if (positive)
            v = fabs(v) + 0.01;
        switch (t->dtype) {
        case TFVM_BOOL: ((uint8_t *)t->data)[i] = r & 1; break;
        case TFVM_I32: {
            static const int32_t edge[] = {0, 1, -1, INT32_MAX, INT32_MIN, 7, -7};
            ((int32_t *)t->data)[i] = r % 5 == 0 ? edge[r % 7] : (int32_t)(r % 201) - 100;
            break;
        }
        case TFVM_I64: {
            static const int64_t edge[] = {0, 1, -1, INT64_MAX, INT64_MIN, 7, -7};
            ((int64_t *)t->data)[i] = r % 5 == 0 ? edge[r % 7] : (int64_t)(r % 201) - 100;
            break;
        }
        case TFVM_U8: ((uint8_t *)t->data)[i] = (uint8_t)r; break;
        case TFVM_I8: ((int8_t *)t->data)[i] = (int8_t)(uint8_t)r; break;
        case TFVM_I16: ((int16_t *)t->data)[i] = (int16_t)(uint16_t)r; break;
        case TFVM_U16: ((uint16_t *)t->data)[i] = (uint16_t)r; break;
        case TFVM_U32: ((uint32_t *)t->data)[i] = r; break;
        case TFVM_U64: ((uint64_t *)t->data)[i] = (uint64_t)r << 40 | r; break;
        case TFVM_F16: ((uint16_t *)t->data)[i] = ut_f64_to_f16(v); break;
        case TFVM_BF16: ((uint16_t *)t->data)[i] = ut_f64_to_bf16(v); break;
        case TFVM_F32: ((float *)t->data)[i] = r % 23 == 0 ? NAN : r % 19 == 0 ? 0.0f : (float)v; break;
        default: ((double *)t->data)[i] = r % 23 == 0 ? NAN : r % 19 == 0 ? -0.0 : v; break;
        }
    }
}

/* rank -1 = a scalar operand */
static dev_value make_value(tfvm_dtype dt, int rank, const int64_t *dims, bool positive)
{
    dev_value v = {.dtype = (uint8_t)dt};
    if (rank < 0) {
        tfvm_tensor *t = tfvm_tensor_new(dt, 0, NULL, NULL);
        fill(t, positive);
        memcpy(&v.u, t->data, t->nbytes); /* every member of the union starts at its first byte */
        tfvm_tensor_free(t);
        return v;
    }
    v.is_tensor = 1;
    v.u.t = tfvm_tensor_new(dt, rank, dims, NULL);
    ck_assert_ptr_nonnull(v.u.t);
    fill(v.u.t, positive);
    return v;
}

/* Most inputs of the ops compared here (FUSED_CONV2D_ADD's) */
#define TK_MAX_IN 5

/* Runs op on device d: tensor inputs copied in, the result copied back. */
static tfvm_status run_on(const dev_device *d, dev_pool *pool, isa_op op, uint32_t attr, const dev_value *in,
                          uint32_t n, dev_value *out, char *msg, size_t ms)
{
    dev_ctx x = {.host = NULL, .pool = pool};
    dev_value args[TK_MAX_IN] = {{0}};
    ck_assert_uint_le(n, TK_MAX_IN);
    /* parameter vectors stay on the host, as the VM leaves them */
    const uint32_t host = d->iface->host_inputs ? d->iface->host_inputs(d, op) : 0;
    for (uint32_t k = 0; k < n; k++) {
        args[k] = in[k];
        if (!in[k].is_tensor || (host >> k & 1))
            continue;
        tfvm_status st;
        const tfvm_tensor *h = in[k].u.t;
        tfvm_tensor *t = dev_tensor_alloc_on(NULL, pool, (tfvm_dtype)h->dtype, h->rank, h->dims, &st);
        ck_assert_int_eq(st, TFVM_OK);
        ck_assert_int_eq(t->device, DEV_CUDA);
        if (h->nbytes)
            ck_assert_int_eq(d->iface->copy_in(d, t->data, h->data, h->nbytes, msg, ms), TFVM_OK);
        args[k].u.t = t;
    }
    tfvm_status st = d->iface->run(d, &x, op, attr, args, n, out, msg, ms);
    for (uint32_t k = 0; k < n; k++)
        if (args[k].is_tensor && !(host >> k & 1))
            tfvm_tensor_free(args[k].u.t);
    if (st != TFVM_OK || !out->is_tensor)
        return st;
    tfvm_tensor *t = out->u.t;
    ck_assert_int_eq(t->device, DEV_CUDA);
    tfvm_tensor *h = dev_tensor_alloc(NULL, (tfvm_dtype)t->dtype, t->rank, t->dims);
    if (t->nbytes)
        ck_assert_int_eq(d->iface->copy_out(d, h->data, t->data, t->nbytes, msg, ms), TFVM_OK);
    ck_assert_int_eq(d->iface->sync(d, msg, ms), TFVM_OK);
    tfvm_tensor_free(t);
    out->u.t = h;
    return TFVM_OK;
}

static bool same_float(double x, double y, double tol)
{
    if (isnan(x) || isnan(y))
        return isnan(x) && isnan(y);
    if (isinf(x) || isinf(y))
        return x == y;
    return fabs(x - y) <= tol * (1.0 + fabs(x));
}

/* Element-by-element; floats within tol (relative), everything else exact. */
static void check_same(const char *what, const tfvm_tensor *want, const tfvm_tensor *got, double tol)
{
    ck_assert_msg(want->dtype == got->dtype && want->rank == got->rank, "%s: dtype/rank differ", what);
    for (int j = 0; j < want->rank; j++)
        ck_assert_msg(want->dims[j] == got->dims[j], "%s: dim %d: %lld vs %lld", what, j,
                      (long long)want->dims[j], (long long)got->dims[j]);
    for (int64_t i = 0; i < want->count; i++) {
        bool ok;
        double wv = 0, gv = 0;
        switch (want->dtype) {
        case TFVM_F32:
            wv = ((const float *)want->data)[i];
            gv = ((const float *)got->data)[i];
            ok = same_float(wv, gv, tol);
            break;
        case TFVM_F64:
            wv = ((const double *)want->data)[i];
            gv = ((const double *)got->data)[i];
            ok = same_float(wv, gv, tol);
            break;
        default: {
            size_t es = tfvm_dtype_size((tfvm_dtype)want->dtype);
            ok = memcmp((const char *)want->data + i * (int64_t)es, (const char *)got->data + i * (int64_t)es, es) == 0;
            break;
        }
        }
        ck_assert_msg(ok, "%s: element %lld: want %.17g, got %.17g", what, (long long)i, wv, gv);
    }
}

/* ---- Elementwise against the CPU ---------------------------------------------------- */
typedef struct shape {
    int rank; /* -1 = scalar */
    int64_t dims[5];
} shape;

static const shape pairs[][2] = {
    {{2, {2, 3}}, {2, {2, 3}}},          /* same shape */
    {{2, {2, 3}}, {1, {3}}},             /* a row */
    {{3, {4, 1, 3}}, {2, {2, 1}}},       /* both stretch */
    {{2, {2, 3}}, {-1, {0}}},            /* tensor and scalar */
    {{-1, {0}}, {1, {5}}},               /* scalar and tensor */
    {{1, {1}}, {1, {7}}},                /* size-1 dim */
    {{2, {0, 3}}, {1, {3}}},             /* empty */
    {{3, {3, 1, 5}}, {3, {1, 4, 1}}},    /* outer product-like */
    {{4, {2, 1, 2, 3}}, {3, {3, 2, 1}}}, /* ranks differ */
    {{1, {1000}}, {1, {1000}}},          /* long enough for several blocks */
};
static const shape singles[] = {{2, {2, 3}}, {1, {7}}, {1, {0}}, {5, {2, 1, 2, 1, 2}}, {1, {1000}}};

/* Elementwise ops with a CUDA kernel: ops.def's `cuda` column, read from the
 * table so that a new row is tested without touching this file. */
static bool cuda_elementwise(isa_op op)
{
    return isa_ops[op].cls != ISA_CLASS_TENSOR && strcmp(isa_ops[op].cuda, "NONE") != 0 &&
           strcmp(isa_ops[op].cuda, "CAST") != 0;
}

/* Compares op on d with the CPU for these operands; returns whether d took it. */
static bool compare_one(const dev_device *d, dev_pool *pool, isa_op op, const dev_value *in, uint32_t n)
{
    char msg[256], what[128];
    dev_fit fit = d->iface->fits(d, op, 0, in, n);
    if (fit != DEV_FIT_OK)
        return false;
    dev_value want = {0}, got = {0};
    ck_assert_int_eq(dev_cpu_elementwise(op, 0, in, &want, NULL, msg, sizeof msg), TFVM_OK);
    tfvm_status st = run_on(d, pool, op, 0, in, n, &got, msg, sizeof msg);
    ck_assert_msg(st == TFVM_OK, "%s on %s: %s", isa_ops[op].name, d->state, msg);
    ck_assert(want.is_tensor && got.is_tensor);
    /* a GPU's libm may differ from the host's in the last bits */
    double tol = want.dtype == TFVM_F32 ? 2e-6 : 1e-14;
    snprintf(what, sizeof what, "%s %s", isa_ops[op].name, tfvm_dtype_name((tfvm_dtype)in[0].dtype));
    check_same(what, want.u.t, got.u.t, tol);
    dev_value_release(&want);
    dev_value_release(&got);
    return true;
}

/* Every elementwise kernel the device has (every op of ops.def with a CUDA
 * id, on every dtype), on every shape above. Each such op must run for at
 * least one dtype: an id the device never takes is a bug in tc_has or fits.
 * Returns how many comparisons ran. */
static int compare_elementwise(const dev_device *d)
{
    dev_pool *pool;
    ck_assert_int_eq(dev_pool_new(NULL, d, &pool), TFVM_OK);
    int ran = 0;
    for (int op = 0; op < ISA_OP_COUNT; op++) {
        if (!cuda_elementwise((isa_op)op))
            continue;
        const int n = isa_ops[op].n_in;
        ck_assert_msg(n == 1 || n == 2, "%s: a CUDA elementwise op with %d inputs", isa_ops[op].name, n);
        int ran_op = 0;
        for (int dt = TFVM_BOOL; dt <= ISA_DTYPE_LAST; dt++) {
            if (n == 2) {
                for (size_t si = 0; si < UT_COUNTOF(pairs); si++) {
                    dev_value in[2] = {make_value((tfvm_dtype)dt, pairs[si][0].rank, pairs[si][0].dims, false),
                                       make_value((tfvm_dtype)dt, pairs[si][1].rank, pairs[si][1].dims, false)};
                    ran_op += compare_one(d, pool, (isa_op)op, in, 2);
                    dev_value_release(&in[0]);
                    dev_value_release(&in[1]);
                }
                continue;
            }
            for (size_t si = 0; si < UT_COUNTOF(singles); si++) {
                for (int positive = 0; positive < 2; positive++) {
                    dev_value in = make_value((tfvm_dtype)dt, singles[si].rank, singles[si].dims, positive);
                    ran_op += compare_one(d, pool, (isa_op)op, &in, 1);
                    dev_value_release(&in);
                }
            }
        }
        ck_assert_msg(ran_op > 0, "%s has CUDA kernel %s but %s runs it on no dtype", isa_ops[op].name,
                      isa_ops[op].cuda, d->state);
        ran += ran_op;
    }
    dev_pool_close(pool);
    return ran;
}

/* ---- MATMUL against a triple loop (NumPy's rules) --------------------------------------- */
typedef struct mm_case {
    int ra;
    int64_t a[4];
    int rb;
    int64_t b[4];
    uint32_t opts;
} mm_case;

static const mm_case mm_cases[] = {
    {2, {2, 3}, 2, {3, 4}, 0},
    {2, {3, 2}, 2, {3, 4}, ISA_OPT_TRANS_A},
    {2, {2, 3}, 2, {4, 3}, ISA_OPT_TRANS_B},
    {2, {3, 2}, 2, {4, 3}, ISA_OPT_TRANS_A | ISA_OPT_TRANS_B},
    {3, {5, 2, 3}, 3, {5, 3, 4}, 0},                /* batched */
    {3, {5, 2, 3}, 2, {3, 4}, 0},                   /* b shared */
    {2, {2, 3}, 3, {5, 3, 4}, 0}, /* a shared */
    {3, {5, 3, 2}, 3, {1, 4, 3}, ISA_OPT_TRANS_A | ISA_OPT_TRANS_B},
    {4, {2, 1, 2, 3}, 3, {3, 3, 4}, 0},             /* batch dims both stretch: one call per batch */
    {3, {3, 2, 3}, 4, {2, 3, 3, 4}, 0},
    {1, {3}, 2, {3, 4}, 0},                         /* vector @ matrix */
    {2, {2, 3}, 1, {3}, 0},                         /* matrix @ vector */
    {3, {5, 2, 3}, 1, {3}, 0},
    {2, {2, 0}, 2, {0, 3}, 0},                      /* k = 0: zeros */
    {2, {0, 3}, 2, {3, 4}, 0},                      /* empty result */
    {2, {17, 33}, 2, {33, 9}, 0},
};

/* The expected product, computed the plain way. */
static tfvm_tensor *mm_reference(const tfvm_tensor *a, const tfvm_tensor *b, uint32_t opts)
{
    bool ta = opts & ISA_OPT_TRANS_A, tb = opts & ISA_OPT_TRANS_B;
    int64_t ar = a->rank >= 2 ? a->dims[a->rank - 2] : 1, ac = a->dims[a->rank - 1];
    int64_t br = b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0], bc = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    int64_t m = ta ? ac : ar, k = ta ? ar : ac, n = tb ? br : bc;
    int na = a->rank > 2 ? a->rank - 2 : 0, nb = b->rank > 2 ? b->rank - 2 : 0, nr = na > nb ? na : nb;
    int64_t dims[8];
    int r = 0;
    for (int j = 0; j < nr; j++) {
        int ja = j - (nr - na), jb = j - (nr - nb);
        int64_t da = ja >= 0 ? a->dims[ja] : 1, db = jb >= 0 ? b->dims[jb] : 1;
        dims[r++] = da > db ? da : db;
    }
    int64_t batch = 1;
    for (int j = 0; j < nr; j++)
        batch *= dims[j];
    if (a->rank >= 2)
        dims[r++] = m;
    if (b->rank >= 2)
        dims[r++] = n;
    tfvm_tensor *c = tfvm_tensor_new((tfvm_dtype)a->dtype, r, dims, NULL);
    for (int64_t s = 0; s < batch; s++) {
        int64_t oa = 0, ob = 0, rem = s, sa = 1, sb = 1;
        for (int j = nr - 1; j >= 0; j--) {
            int64_t idx = rem % dims[j];
            rem /= dims[j];
            int ja = j - (nr - na), jb = j - (nr - nb);
            if (ja >= 0) {
                oa += (a->dims[ja] == 1 ? 0 : idx) * sa;
                sa *= a->dims[ja];
            }
            if (jb >= 0) {
                ob += (b->dims[jb] == 1 ? 0 : idx) * sb;
                sb *= b->dims[jb];
            }
        }
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double acc = 0;
                for (int64_t p = 0; p < k; p++) {
                    int64_t ia = oa * ar * ac + (ta ? p * ac + i : i * ac + p);
                    int64_t ib = ob * br * bc + (tb ? j * bc + p : p * bc + j);
                    if (a->dtype == TFVM_F32)
                        acc += (double)((const float *)a->data)[ia] * ((const float *)b->data)[ib];
                    else
                        acc += ((const double *)a->data)[ia] * ((const double *)b->data)[ib];
                }
                int64_t ic = s * m * n + i * n + j;
                if (a->dtype == TFVM_F32)
                    ((float *)c->data)[ic] = (float)acc;
                else
                    ((double *)c->data)[ic] = acc;
            }
    }
    return c;
}

static int compare_matmul(const dev_device *d)
{
    dev_pool *pool;
    ck_assert_int_eq(dev_pool_new(NULL, d, &pool), TFVM_OK);
    int ran = 0, cpu_ran = 0;
    for (size_t i = 0; i < UT_COUNTOF(mm_cases); i++) {
        for (tfvm_dtype dt = TFVM_F32; dt <= TFVM_F64; dt++) {
            const mm_case *c = &mm_cases[i];
            dev_value in[2] = {make_value(dt, c->ra, c->a, false), make_value(dt, c->rb, c->b, false)};
            /* NaN-free operands: a NaN would spread over whole rows */
            for (int k = 0; k < 2; k++)
                for (int64_t e = 0; e < in[k].u.t->count; e++) {
                    if (dt == TFVM_F32 && isnan(((float *)in[k].u.t->data)[e]))
                        ((float *)in[k].u.t->data)[e] = 0.5f;
                    if (dt == TFVM_F64 && isnan(((double *)in[k].u.t->data)[e]))
                        ((double *)in[k].u.t->data)[e] = 0.5;
                }
            char msg[256], what[96];
            snprintf(what, sizeof what, "MATMUL case %zu %s", i, tfvm_dtype_name(dt));
            ck_assert_msg(d->iface->fits(d, ISA_MATMUL, c->opts, in, 2) == DEV_FIT_OK, "%s: not taken", what);
            dev_value got = {0};
            tfvm_status st = run_on(d, pool, ISA_MATMUL, c->opts, in, 2, &got, msg, sizeof msg);
            ck_assert_msg(st == TFVM_OK, "%s: %s", what, msg);
            tfvm_tensor *want = mm_reference(in[0].u.t, in[1].u.t, c->opts);
            double tol = dt == TFVM_F32 ? 1e-5 : 1e-12;
            check_same(what, want, got.u.t, tol);
            /* the CPU's kernel agrees too, once it has one */
            dev_value cpu = {0};
            if (dev_cpu_tensor(ISA_MATMUL, c->opts, in, 2, &cpu, NULL, msg, sizeof msg) == TFVM_OK) {
                check_same(what, want, cpu.u.t, tol);
                dev_value_release(&cpu);
                cpu_ran++;
            }
            tfvm_tensor_free(want);
            dev_value_release(&got);
            dev_value_release(&in[0]);
            dev_value_release(&in[1]);
            ran++;
        }
    }
    dev_pool_close(pool);
    printf("test_devices: %s: %d MATMUL cases, %d also checked on the CPU\n", d->state, ran, cpu_ran);
    return ran;
}


/* ---- Tensor ops (and CAST) against the CPU ------------------------------------------------ */
/* One input of a case: 'x' random data of the dtype under test, 'p' an i64
 * vector of the values v, 'i' / 'j' an i64 / i32 index tensor of dims
 * holding the values v in turn. */
typedef struct tk_in {
    char kind;
    int rank;
    int64_t dims[4];
    int n;
    int64_t v[12];
} tk_in;

typedef struct tk_case {
    const char *what;
    isa_op op;
    uint32_t attr;
    int n;
    tk_in in[TK_MAX_IN];
} tk_case;

#define X(...) {'x', sizeof((int64_t[]){__VA_ARGS__}) / 8, {__VA_ARGS__}, 0, {0}}
#define P(...) {'p', 1, {sizeof((int64_t[]){__VA_ARGS__}) / 8}, sizeof((int64_t[]){__VA_ARGS__}) / 8, {__VA_ARGS__}}
#define EMPTY {'p', 1, {0}, 0, {0}}
static const tk_case tk_cases[] = {
    {"conv 3x2", ISA_CONV2D, 0, 3, {X(2, 3, 7, 6), X(4, 3, 3, 2), P(1, 1, 0, 0, 0, 0, 1, 1, 1)}},
    {"conv strides pads dilations groups", ISA_CONV2D, 0, 3, {X(1, 4, 9, 8), X(6, 2, 3, 3), P(2, 1, 1, 2, 0, 1, 2, 1, 2)}},
    {"conv 1x1", ISA_CONV2D, 0, 3, {X(2, 4, 5, 5), X(3, 4, 1, 1), P(1, 1, 0, 0, 0, 0, 1, 1, 1)}},
    {"conv depthwise", ISA_CONV2D, 0, 3, {X(1, 3, 6, 6), X(3, 1, 3, 3), P(1, 1, 1, 1, 1, 1, 1, 1, 3)}},
    {"conv no channels", ISA_CONV2D, 0, 3, {X(1, 0, 4, 4), X(2, 0, 3, 3), P(1, 1, 0, 0, 0, 0, 1, 1, 1)}},
    {"fused conv relu", ISA_FUSED_CONV2D, ISA_OPT_ACT_RELU, 4,
     {X(2, 3, 7, 6), X(4, 3, 3, 3), P(2, 2, 1, 1, 1, 1, 1, 1, 1), X(4)}},
    {"fused conv 1x1 gelu", ISA_FUSED_CONV2D, ISA_OPT_ACT_GELU, 4,
     {X(2, 4, 3, 3), X(5, 4, 1, 1), P(1, 1, 0, 0, 0, 0, 1, 1, 1), X(5)}},
    {"fused conv", ISA_FUSED_CONV2D, 0, 4, {X(1, 2, 5, 5), X(2, 2, 2, 2), P(1, 1, 0, 0, 0, 0, 1, 1, 1), X(2)}},
    {"fused conv add relu", ISA_FUSED_CONV2D_ADD, ISA_OPT_ACT_RELU, 5,
     {X(2, 3, 7, 6), X(4, 3, 3, 3), P(2, 2, 1, 1, 1, 1, 1, 1, 1), X(4), X(2, 4, 4, 3)}},
    {"fused conv add", ISA_FUSED_CONV2D_ADD, 0, 5,
     {X(1, 4, 5, 5), X(4, 4, 1, 1), P(1, 1, 0, 0, 0, 0, 1, 1, 1), X(4), X(1, 4, 5, 5)}},
    {"fused matmul gelu", ISA_FUSED_MATMUL, ISA_OPT_ACT_GELU, 3, {X(3, 5), X(5, 4), X(4)}},
    {"fused matmul tb sigmoid", ISA_FUSED_MATMUL, ISA_OPT_TRANS_B | ISA_OPT_ACT_SIGMOID, 3, {X(3, 5), X(4, 5), X(3, 1)}},
    {"fused matmul batched hardswish", ISA_FUSED_MATMUL, ISA_OPT_ACT_HARDSWISH, 3, {X(2, 3, 5), X(5, 4), X(4)}},
    {"fused matmul silu", ISA_FUSED_MATMUL, ISA_OPT_ACT_SILU, 3, {X(3, 5), X(5, 4), X(4)}},
    {"fused matmul tanh", ISA_FUSED_MATMUL, ISA_OPT_ACT_TANH, 3, {X(3, 5), X(5, 4), X(4)}},
    {"fused matmul hardsigmoid", ISA_FUSED_MATMUL, ISA_OPT_ACT_HARDSIGMOID, 3, {X(3, 5), X(5, 4), X(4)}},
    {"fused matmul relu6", ISA_FUSED_MATMUL, ISA_OPT_ACT_RELU6, 3, {X(3, 5), X(5, 4), X(4)}},
    {"fused matmul gelu_tanh", ISA_FUSED_MATMUL, ISA_OPT_ACT_GELU_TANH, 3, {X(3, 5), X(5, 4), X(4)}},
    {"fused matmul gelu_new", ISA_FUSED_MATMUL, ISA_OPT_ACT_GELU_NEW, 3, {X(3, 5), X(5, 4), X(4)}},
    {"maxpool", ISA_MAXPOOL, 0, 2, {X(2, 3, 7, 6), P(3, 3, 2, 2, 1, 1, 1, 1)}},
    {"maxpool dilated ceil", ISA_MAXPOOL, 0, 2, {X(1, 2, 7, 8), P(2, 3, 2, 2, 0, 1, 1, 0, 2, 1, 1, 0)}},
    {"avgpool", ISA_AVGPOOL, 0, 2, {X(2, 3, 7, 6), P(3, 3, 2, 2, 1, 1, 1, 1)}},
    {"avgpool count_include_pad ceil", ISA_AVGPOOL, 0, 2, {X(1, 2, 7, 8), P(3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1)}},
    {"reduce_sum", ISA_REDUCE_SUM, 0, 2, {X(2, 3, 4), P(1)}},
    {"reduce_mean keepdims", ISA_REDUCE_MEAN, ISA_OPT_KEEPDIMS, 2, {X(2, 3, 4), P(2, 0)}},
    {"reduce_mean global pool", ISA_REDUCE_MEAN, ISA_OPT_KEEPDIMS, 2, {X(2, 3, 4, 5), P(2, 3)}},
    {"reduce_max", ISA_REDUCE_MAX, 0, 2, {X(2, 3, 4), P(-1)}},
    {"reduce_min all keepdims", ISA_REDUCE_MIN, ISA_OPT_KEEPDIMS, 2, {X(2, 3, 4), EMPTY}},
    {"reduce_sum empty axis", ISA_REDUCE_SUM, 0, 2, {X(2, 0, 4), P(1)}},
    {"softmax last", ISA_SOFTMAX, 2, 1, {X(2, 3, 5)}},
    {"softmax middle", ISA_SOFTMAX, 1, 1, {X(2, 3, 5)}},
    {"softmax first", ISA_SOFTMAX, (uint32_t)-3, 1, {X(2, 3, 5)}},
    {"log_softmax", ISA_LOG_SOFTMAX, 1, 1, {X(2, 3, 5)}},
    {"layer_norm last", ISA_LAYER_NORM, (uint32_t)-1, 4, {X(2, 3, 9), X(9), X(9), X(1)}},
    {"layer_norm two axes, one-element scale", ISA_LAYER_NORM, 1, 4, {X(2, 3, 4), X(1), X(1, 3, 4), X(1)}},
    {"rms_norm last", ISA_RMS_NORM, (uint32_t)-1, 3, {X(2, 3, 9), X(9), X(1)}},
    {"reshape", ISA_RESHAPE, 0, 2, {X(2, 3, 4), P(4, -1)}},
    {"flatten", ISA_FLATTEN, 2, 1, {X(2, 3, 4)}},
    {"squeeze", ISA_SQUEEZE, 0, 2, {X(2, 1, 3), P(1)}},
    {"unsqueeze", ISA_UNSQUEEZE, 0, 2, {X(2, 3), P(0, 3)}},
    {"transpose", ISA_TRANSPOSE, 0, 2, {X(2, 3, 4), P(2, 0, 1)}},
    {"transpose heads", ISA_TRANSPOSE, 0, 2, {X(2, 3, 4, 5), P(0, 2, -1, 1)}},
    {"concat", ISA_CONCAT, 1, 2, {X(2, 3, 4), X(2, 5, 4)}},
    {"concat last", ISA_CONCAT, (uint32_t)-1, 2, {X(2, 3, 4), X(2, 3, 1)}},
    {"concat first", ISA_CONCAT, 0, 2, {X(2, 3), X(1, 3)}},
    {"gather", ISA_GATHER, 0, 2, {X(5, 3), {'i', 2, {2, 2}, 4, {0, -1, 4, 2}}}},
    {"gather i32 middle", ISA_GATHER, 1, 2, {X(2, 5, 3), {'j', 1, {4}, 4, {1, -5, 3, 0}}}},
    {"gather bad index", ISA_GATHER, 0, 2, {X(5, 3), {'i', 1, {2}, 2, {1, 5}}}},
    {"cast to bool", ISA_CAST, TFVM_BOOL, 1, {X(2, 3)}},
    {"cast to i32", ISA_CAST, TFVM_I32, 1, {X(4, 5)}},
    {"cast to i64", ISA_CAST, TFVM_I64, 1, {X(4, 5)}},
    {"cast to f32", ISA_CAST, TFVM_F32, 1, {X(2, 3)}},
    {"cast to f64", ISA_CAST, TFVM_F64, 1, {X(2, 3)}},
};
#undef X
#undef P
#undef EMPTY

static dev_value tk_value(const tk_in *t, tfvm_dtype dt)
{
    if (t->kind == 'x')
        return make_value(dt, t->rank, t->dims, false);
    const tfvm_dtype it = t->kind == 'j' ? TFVM_I32 : TFVM_I64;
    dev_value v = {.dtype = (uint8_t)it, .is_tensor = 1, .u.t = tfvm_tensor_new(it, t->rank, t->dims, NULL)};
    for (int64_t e = 0; e < v.u.t->count; e++) {
        if (it == TFVM_I32)
            ((int32_t *)v.u.t->data)[e] = (int32_t)t->v[e % t->n];
        else
            ((int64_t *)v.u.t->data)[e] = t->v[e % t->n];
    }
    return v;
}

/* A finite float x (a case whose floats must all be numbers) */
static void tk_no_nan(dev_value *v)
{
    if (!v->is_tensor)
        return;
    for (int64_t e = 0; e < v->u.t->count; e++) {
        if (v->dtype == TFVM_F32 && isnan(((float *)v->u.t->data)[e]))
            ((float *)v->u.t->data)[e] = 0.25f;
        if (v->dtype == TFVM_F64 && isnan(((double *)v->u.t->data)[e]))
            ((double *)v->u.t->data)[e] = 0.25;
    }
}

/* Every case on every GPU dtype the device takes, against the CPU: the same
 * result, or the same error (bad data found on the GPU is said by the CPU).
 * Each case must run on at least one dtype. Returns the comparisons. */
static int compare_tensor_ops(const dev_device *d)
{
    dev_pool *pool;
    ck_assert_int_eq(dev_pool_new(NULL, d, &pool), TFVM_OK);
    int ran = 0, failed = 0;
    for (size_t c = 0; c < UT_COUNTOF(tk_cases); c++) {
        const tk_case *k = &tk_cases[c];
        int ran_case = 0;
        for (int dt = TFVM_BOOL; dt <= TFVM_F64; dt++) {
            for (int finite = 0; finite < 2; finite++) {
                dev_value in[TK_MAX_IN];
                for (int j = 0; j < k->n; j++) {
                    in[j] = tk_value(&k->in[j], (tfvm_dtype)dt);
                    if (finite)
                        tk_no_nan(&in[j]);
                }
                char what[160], msg[256], cmsg[256];
                snprintf(what, sizeof what, "%s %s%s", k->what, tfvm_dtype_name((tfvm_dtype)dt),
                         finite ? " (no NaN)" : "");
                if (d->iface->fits(d, k->op, k->attr, in, (uint32_t)k->n) == DEV_FIT_OK) {
                    dev_value want = {0}, got = {0};
                    /* held for the CPU's call, which may change an input only one
                     * reference holds (a reshape relabels it): the device reads them next */
                    dev_value held[TK_MAX_IN];
                    for (int j = 0; j < k->n; j++) {
                        held[j] = in[j];
                        dev_value_retain(&held[j]);
                    }
                    tfvm_status cst = isa_ops[k->op].cls == ISA_CLASS_TENSOR
                                          ? dev_cpu_tensor(k->op, k->attr, in, (uint32_t)k->n, &want, NULL, cmsg, sizeof cmsg)
                                          : dev_cpu_elementwise(k->op, k->attr, in, &want, NULL, cmsg, sizeof cmsg);
                    for (int j = 0; j < k->n; j++)
                        dev_value_release(&held[j]);
                    tfvm_status st = run_on(d, pool, k->op, k->attr, in, (uint32_t)k->n, &got, msg, sizeof msg);
                    ck_assert_msg(st == cst, "%s: status %d, the CPU's %d (%s)", what, st, cst, st ? msg : cmsg);
                    if (st == TFVM_OK) {
                        check_same(what, want.u.t, got.u.t, want.dtype == TFVM_F32 ? 2e-5 : 1e-12);
                        dev_value_release(&want);
                        dev_value_release(&got);
                    } else {
                        ck_assert_str_eq(msg, cmsg);
                        failed++;
                    }
                    ran_case++;
                }
                for (int j = 0; j < k->n; j++)
                    dev_value_release(&in[j]);
            }
        }
        ck_assert_msg(ran_case > 0, "%s: %s runs it on no dtype", k->what, d->state);
        ran += ran_case;
    }
    dev_pool_close(pool);
    printf("test_devices: %s: %d tensor op comparisons, %d of them the same error\n", d->state, ran, failed);
    return ran;
}

/* ---- Tests --------------------------------------------------------------------------- */
START_TEST(test_registry)
{
    const dev_device *cpu = dev_get(DEV_CPU);
    ck_assert(cpu->ready);
    ck_assert_msg(strncmp(cpu->state, "ready (", 7) == 0 && strstr(cpu->state, " core"), "%s", cpu->state);
    ck_assert_int_eq(dev_by_name("cpu"), DEV_CPU);
    ck_assert_int_eq(dev_by_name("cuda"), DEV_CUDA);
    ck_assert_int_eq(dev_by_name("gpu"), -1);
    ck_assert_str_eq(dev_name(DEV_CUDA), "cuda");
    char buf[256];
    ck_assert_int_eq(tfvm_device_status("cpu", buf, sizeof buf), TFVM_OK);
    ck_assert_str_eq(buf, cpu->state);
    ck_assert_int_eq(tfvm_device_status("gpu", buf, sizeof buf), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(buf, "no device named 'gpu' (devices: cpu, cuda)");

    /* the real CUDA backend, found the way a program finds it */
    const dev_device *cuda = dev_get(DEV_CUDA);
    ck_assert_ptr_eq(cuda, dev_get(DEV_CUDA)); /* set up once */
    ck_assert_int_eq(tfvm_device_status("cuda", buf, sizeof buf), cuda->ready ? TFVM_OK : TFVM_ERR_DEVICE);
    ck_assert_str_eq(buf, cuda->state);
    char lib[4200];
    beside_exe("../lib/libtfvm_cuda.so", lib, sizeof lib);
    bool built = access(lib, F_OK) == 0, gpu = access("/dev/nvidia0", F_OK) == 0;
    printf("test_devices: cuda: %s\n", cuda->state);
    if (cuda->ready) {
        ck_assert_msg(strncmp(cuda->state, "ready (", 7) == 0, "%s", cuda->state);
    } else if (built && !gpu) {
        ck_assert_str_eq(cuda->state, "unavailable: no device found");
    } else if (!built) {
        ck_assert_msg(strncmp(cuda->state, "unavailable: libtfvm_cuda.so not ", 33) == 0, "%s", cuda->state);
    } else {
        ck_assert_msg(strncmp(cuda->state, "unavailable: ", 13) == 0 && cuda->state[13], "%s", cuda->state);
    }
}
END_TEST

START_TEST(test_load_errors)
{
    dev_device d;
    dev_cuda_open("/no/such/libtfvm_cuda.so", &d);
    ck_assert(!d.ready);
    ck_assert_msg(strncmp(d.state, "unavailable: cannot load /no/such/libtfvm_cuda.so", 49) == 0, "%s", d.state);
    /* a library that is not a backend: libm has no entry point */
    dev_cuda_open("libm.so.6", &d);
    ck_assert(!d.ready);
    ck_assert_str_eq(d.state, "unavailable: libm.so.6: not a tfvm CUDA backend of ABI version 4");
}
END_TEST

START_TEST(test_fits)
{
    const dev_device *d = load_fake();
    int64_t d23[2] = {2, 3}, d4[1] = {4}, d34[2] = {3, 4}, d43[2] = {4, 3};
    dev_value f23 = make_value(TFVM_F32, 2, d23, false), f4 = make_value(TFVM_F32, 1, d4, false);
    dev_value i23 = make_value(TFVM_I32, 2, d23, false), b23 = make_value(TFVM_BOOL, 2, d23, false);
    dev_value f34 = make_value(TFVM_F32, 2, d34, false), f43 = make_value(TFVM_F32, 2, d43, false);
    dev_value i34 = make_value(TFVM_I32, 2, d34, false), s = make_value(TFVM_F32, -1, NULL, false);
    dev_value t0 = {.dtype = TFVM_F32, .is_tensor = 1, .u.t = tfvm_tensor_new(TFVM_F32, 0, NULL, NULL)};
    const dev_iface *f = d->iface;
    ck_assert_int_eq(f->fits(d, ISA_ADD, 0, (dev_value[]){f23, s}, 2), DEV_FIT_OK);
    ck_assert_int_eq(f->fits(d, ISA_ADD, 0, (dev_value[]){f23, f4}, 2), DEV_FIT_INVALID); /* [2,3] + [4] */
    ck_assert_int_eq(f->fits(d, ISA_ADD, 0, (dev_value[]){f23, i23}, 2), DEV_FIT_INVALID);
    ck_assert_int_eq(f->fits(d, ISA_ADD, 0, (dev_value[]){b23, b23}, 2), DEV_FIT_INVALID);
    ck_assert_int_eq(f->fits(d, ISA_AND, 0, (dev_value[]){i23, i23}, 2), DEV_FIT_INVALID);
    ck_assert_int_eq(f->fits(d, ISA_DIV, 0, (dev_value[]){i23, i23}, 2), DEV_FIT_NO); /* x / 0 must fail */
    ck_assert_int_eq(f->fits(d, ISA_MOD, 0, (dev_value[]){i23, i23}, 2), DEV_FIT_NO);
    ck_assert_int_eq(f->fits(d, ISA_EXP, 0, &i23, 1), DEV_FIT_INVALID); /* the CPU says why */
    ck_assert_int_eq(f->fits(d, ISA_POW, 0, (dev_value[]){i23, i23}, 2), DEV_FIT_NO); /* b < 0 must fail */
    ck_assert_int_eq(f->fits(d, ISA_FLOOR_DIV, 0, (dev_value[]){f23, f23}, 2), DEV_FIT_OK);
    ck_assert_int_eq(f->fits(d, ISA_CAST, TFVM_F64, &f23, 1), DEV_FIT_OK);
    ck_assert_int_eq(f->fits(d, ISA_CAST, TFVM_F16, &f23, 1), DEV_FIT_NO); /* a storage dtype */
    ck_assert_int_eq(f->fits(d, ISA_SELECT, 0, (dev_value[]){b23, f23, f23}, 3), DEV_FIT_NO);
    ck_assert_int_eq(f->fits(d, ISA_ADD, 0, (dev_value[]){t0, s}, 2), DEV_FIT_NO); /* rank 0 result */
    ck_assert_int_eq(f->fits(d, ISA_MATMUL, 0, (dev_value[]){f23, f34}, 2), DEV_FIT_OK);
    ck_assert_int_eq(f->fits(d, ISA_MATMUL, 0, (dev_value[]){f23, f43}, 2), DEV_FIT_INVALID);
    ck_assert_int_eq(f->fits(d, ISA_MATMUL, ISA_OPT_TRANS_B, (dev_value[]){f23, f43}, 2), DEV_FIT_OK);
    ck_assert_int_eq(f->fits(d, ISA_MATMUL, 0, (dev_value[]){i23, i34}, 2), DEV_FIT_NO);
    ck_assert_int_eq(f->fits(d, ISA_MATMUL, 0, (dev_value[]){f23, i34}, 2), DEV_FIT_INVALID);
    ck_assert_int_eq(f->fits(d, ISA_MATMUL, 0, (dev_value[]){f23, s}, 2), DEV_FIT_INVALID);
    /* shape arithmetic (integer vectors of up to 16) stays on the host */
    dev_value l3 = make_value(TFVM_I64, 1, (int64_t[]){3}, false), l17 = make_value(TFVM_I64, 1, (int64_t[]){17}, false);
    ck_assert_int_eq(f->fits(d, ISA_ADD, 0, (dev_value[]){l3, l3}, 2), DEV_FIT_NO);
    ck_assert_int_eq(f->fits(d, ISA_ADD, 0, (dev_value[]){l17, l17}, 2), DEV_FIT_OK);
    ck_assert_int_eq(f->fits(d, ISA_CONCAT, 0, (dev_value[]){l3, l3}, 2), DEV_FIT_NO);
    ck_assert_int_eq(f->fits(d, ISA_CAST, TFVM_I64, &f4, 1), DEV_FIT_NO);
    ck_assert_int_eq(f->fits(d, ISA_CAST, TFVM_F64, &l3, 1), DEV_FIT_OK);
    dev_value_release(&l3);
    dev_value_release(&l17);
    ck_assert_int_eq(f->fits(d, ISA_SOFTMAX, 0, &f23, 1), DEV_FIT_OK);
    ck_assert_int_eq(f->fits(d, ISA_SOFTMAX, 2, &f23, 1), DEV_FIT_INVALID); /* axis 2 of a matrix */
    ck_assert_int_eq(f->fits(d, ISA_SOFTMAX, 0, &i23, 1), DEV_FIT_INVALID); /* floats only */
    ck_assert_int_eq(f->fits(d, ISA_REDUCE_PROD, 0, (dev_value[]){f23, f4}, 2), DEV_FIT_NO);
    ck_assert_int_eq(f->fits(d, ISA_CONCAT, 0, (dev_value[]){f23, f34}, 2), DEV_FIT_INVALID); /* [2, 3] and [3, 4] */
    ck_assert_int_eq(f->fits(d, ISA_CONCAT, 1, (dev_value[]){f23, f23}, 2), DEV_FIT_OK);
    dev_value all[] = {f23, f4, i23, b23, f34, f43, i34, t0};
    for (size_t i = 0; i < UT_COUNTOF(all); i++)
        dev_value_release(&all[i]);
}
END_TEST

START_TEST(test_fake_elementwise)
{
    int ran = compare_elementwise(load_fake());
    printf("test_devices: fake CUDA: %d elementwise comparisons\n", ran);
    ck_assert_int_gt(ran, 500);
}
END_TEST

START_TEST(test_fake_matmul)
{
    int ran = compare_matmul(load_fake());
    ck_assert_int_eq(ran, (int)UT_COUNTOF(mm_cases) * 2);
}
END_TEST

START_TEST(test_fake_tensor_ops)
{
    int ran = compare_tensor_ops(load_fake());
    ck_assert_int_gt(ran, 150);
    /* convolutions over images in chunks: columns for one image at a time */
    const int64_t saved = dev_cuda_col_bytes;
    dev_cuda_col_bytes = 1;
    ck_assert_int_eq(compare_tensor_ops(load_fake()), ran);
    dev_cuda_col_bytes = saved;
}
END_TEST

START_TEST(test_fake_memory)
{
    const dev_device *d = load_fake();
    /* device memory: host pointers are refused, copies round-trip */
    char msg[256];
    void *p = d->iface->alloc(d, 64, msg, sizeof msg);
    ck_assert_ptr_nonnull(p);
    double in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8] = {0};
    ck_assert_int_eq(d->iface->copy_in(d, in, p, 64, msg, sizeof msg), TFVM_ERR_DEVICE); /* backwards */
    ck_assert_str_eq(msg, "cudaMemcpy to device: invalid argument");
    ck_assert_int_eq(d->iface->copy_in(d, p, in, 64, msg, sizeof msg), TFVM_OK);
    ck_assert_int_eq(d->iface->copy_out(d, out, p, 64, msg, sizeof msg), TFVM_OK);
    ck_assert_mem_eq(in, out, sizeof in);
    d->iface->free(d, p, 64);
}
END_TEST

/* The real GPU, when there is one. */
START_TEST(test_cuda_kernels)
{
    const dev_device *d = dev_get(DEV_CUDA);
    if (!d->ready) {
        printf("SKIP: no CUDA device (cuda: %s): the CUDA kernel comparisons did not run\n", d->state);
        return;
    }
    int ran = compare_elementwise(d);
    ran += compare_matmul(d);
    ran += compare_tensor_ops(d);
    printf("test_devices: %s: %d comparisons with the CPU\n", d->state, ran);
}
END_TEST

int main(void)
{
    /* the registry test looks for the real library the way a program does */
    unsetenv("TFVM_CUDA_LIB");
    setvbuf(stdout, NULL, _IOLBF, 0);
    Suite *s = suite_create("devices");
    TCase *tc = tcase_create("devices");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_registry);
    tcase_add_test(tc, test_load_errors);
    tcase_add_test(tc, test_fits);
    tcase_add_test(tc, test_fake_elementwise);
    tcase_add_test(tc, test_fake_matmul);
    tcase_add_test(tc, test_fake_tensor_ops);
    tcase_add_test(tc, test_fake_memory);
    tcase_add_test(tc, test_cuda_kernels);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
