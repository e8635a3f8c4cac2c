/* test/unit/test_kernels.c — the CPU tensor kernels (dev_cpu_tensor) and the
 * elementwise math ops RELU..SQRT: against NumPy-made fixtures
 * (test/data/kernels/, made by test/data/gen_kernels.py), against values
 * worked out by hand, every error message word for word, and every
 * allocation failure. */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "devices/cpu/cpu.h"
#include "devices/cpu/kern.h"
#include "testutil.h"

static tu_alloc ta; /* reset by setup() before each test */
static tfvm_allocator alloc = {tu_alloc_fn, &ta};
static char msg[512];

enum { B = TFVM_BOOL, I32 = TFVM_I32, I64 = TFVM_I64, F32 = TFVM_F32, F64 = TFVM_F64 };

/* ---- Making operands ---------------------------------------------------------- */
static dev_value tens(tfvm_tensor *t)
{
    ck_assert_ptr_nonnull(t);
    return (dev_value){.dtype = t->dtype, .is_tensor = 1, .u.t = t};
}

/* A tensor of dtype dt from nv doubles (bool: != 0); none: all zeros. */
static dev_value tf(uint8_t dt, int rank, const int64_t *dims, const double *v, int64_t nv)
{
    tfvm_tensor *t = tfvm_tensor_new((tfvm_dtype)dt, rank, dims, &alloc);
    ck_assert_ptr_nonnull(t);
    ck_assert_msg(nv == 0 || nv == t->count, "test bug: %lld values for %lld elements", (long long)nv,
                  (long long)t->count);
    for (int64_t i = 0; i < nv; i++) {
        switch (dt) {
        case B: ((uint8_t *)t->data)[i] = v[i] != 0; break;
        case I32: ((int32_t *)t->data)[i] = (int32_t)v[i]; break;
        case I64: ((int64_t *)t->data)[i] = (int64_t)v[i]; break;
        case F32: ((float *)t->data)[i] = (float)v[i]; break;
        default: ((double *)t->data)[i] = v[i]; break;
        }
    }
    return tens(t);
}

static dev_value ivec(const int64_t *v, int64_t n)
{
    tfvm_tensor *t = tfvm_tensor_new(TFVM_I64, 1, &n, &alloc);
    ck_assert_ptr_nonnull(t);
    if (n)
        memcpy(t->data, v, (size_t)n * sizeof *v);
    return tens(t);
}

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define NDIMS(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
/* A list of doubles that may be empty (the leading 0 is skipped). */
#define VALS(...) ((const double[]){0, __VA_ARGS__} + 1)
#define NVALS(...) ((int64_t)(sizeof((const double[]){0, __VA_ARGS__}) / sizeof(double)) - 1)
/* T(dtype, (dims...), values...): no values means zeros */
#define T(dt, dims, ...) tf(dt, NDIMS dims, DIMS dims, VALS(__VA_ARGS__), NVALS(__VA_ARGS__))
#define IV(...) ivec(DIMS(__VA_ARGS__), NDIMS(__VA_ARGS__))
#define IV0 ivec(NULL, 0)

static dev_value sc(uint8_t dt, double v)
{
    dev_value d = {.dtype = dt};
    switch (dt) {
    case B: d.u.b = v != 0; break;
    case I32: d.u.i32 = (int32_t)v; break;
    case I64: d.u.i64 = (int64_t)v; break;
    case F32: d.u.f32 = (float)v; break;
    default: d.u.f64 = v; break;
    }
    return d;
}
static dev_value sc64(int64_t v) { return (dev_value){.dtype = I64, .u.i64 = v}; }
static const dev_value NONE = {0};

/* ---- Calling ------------------------------------------------------------------ */
static tfvm_status call(isa_op op, int32_t attr, dev_value a, dev_value b, dev_value c, dev_value *out)
{
    dev_value in[3] = {a, b, c};
    int n = isa_ops[op].n_in;
    msg[0] = '\0';
    *out = (dev_value){.dtype = 99};
    tfvm_status st = isa_ops[op].cls == ISA_CLASS_TENSOR
                         ? dev_cpu_tensor(op, (uint32_t)attr, in, (uint32_t)n, out, &alloc, msg, sizeof msg)
                         : dev_cpu_elementwise(op, (uint32_t)attr, in, out, &alloc, msg, sizeof msg);
    for (int k = 0; k < 3; k++)
        dev_value_release(&in[k]);
    if (st != TFVM_OK)
        ck_assert_msg(out->dtype == 99, "%s: out written on failure", isa_ops[op].name);
    return st;
}

static double elem(const dev_value *v, int64_t i)
{
    const void *p = v->is_tensor ? v->u.t->data : (const void *)&v->u;
    switch (v->dtype) {
    case B: return ((const uint8_t *)p)[i];
    case I32: return ((const int32_t *)p)[i];
    case I64: return (double)((const int64_t *)p)[i];
    case F32: return ((const float *)p)[i];
    default: return ((const double *)p)[i];
    }
}

/* out must have dtype dt, shape dims (rank 0: a scalar) and values v
 * (within tol relative, 0 = exact; NaN matches NaN). Releases out. */
static void expect(dev_value *out, uint8_t dt, int rank, const int64_t *dims, const double *v,
                   double tol, const char *label)
{
    ck_assert_msg(out->dtype == dt, "%s: dtype %d, want %d", label, out->dtype, dt);
    ck_assert_msg(!out->dead, "%s: dead", label);
    int64_t count = 1;
    if (rank == 0) {
        ck_assert_msg(!out->is_tensor, "%s: rank 0 must come back as a scalar", label);
    } else {
        ck_assert_msg(out->is_tensor, "%s: want a tensor", label);
        ck_assert_msg(out->u.t->rank == rank, "%s: rank %d, want %d", label, out->u.t->rank, rank);
        ck_assert_int_eq(out->u.t->dtype, dt);
        for (int i = 0; i < rank; i++) {
            ck_assert_msg(out->u.t->dims[i] == dims[i], "%s: dim %d is %lld, want %lld", label, i,
                          (long long)out->u.t->dims[i], (long long)dims[i]);
            count *= dims[i];
        }
        ck_assert_int_eq(out->u.t->count, count);
    }
    for (int64_t i = 0; i < count; i++) {
        double g = elem(out, i), w = v[i];
        bool ok = (isnan(g) && isnan(w)) || g == w || fabs(g - w) <= tol * (1 + fabs(w));
        ck_assert_msg(ok, "%s: element %lld is %.17g, want %.17g", label, (long long)i, g, w);
    }
    dev_value_release(out);
}

#define EXPECT(out, dt, dims, ...) \
    expect(out, dt, NDIMS dims, DIMS dims, VALS(__VA_ARGS__), 1e-6, __FILE__ ":" UT_STR(__LINE__))
#define EXPECT0(out, dt, v) expect(out, dt, 0, NULL, VALS(v), 1e-6, __FILE__ ":" UT_STR(__LINE__))
#define UT_STR(x) UT_STR2(x)
#define UT_STR2(x) #x

/* The call must fail with code and exactly this message. */
static void fails(isa_op op, int32_t attr, dev_value a, dev_value b, dev_value c, tfvm_status code,
                  const char *want)
{
    dev_value out;
    tfvm_status st = call(op, attr, a, b, c, &out);
    ck_assert_msg(st == code, "%s: got %s (%s), want %s", want, tfvm_status_name(st), msg,
                  tfvm_status_name(code));
    ck_assert_msg(strcmp(msg, want) == 0, "\n got  %s\n want %s", msg, want);
}

/* ---- NumPy fixtures ------------------------------------------------------------- */
static dev_value load(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "test/data/kernels/%s", name);
    tfvm_tensor *t = NULL;
    tfvm_error err;
    ck_assert_msg(tfvm_npy_load(path, &alloc, &t, &err) == TFVM_OK, "%s", err.message);
    if (t->rank > 0)
        return tens(t);
    /* A 0-d array is a scalar, as the VM passes it. */
    dev_value v = {.dtype = t->dtype};
    memcpy(&v.u, t->data, t->nbytes);
    tfvm_tensor_free(t);
    return v;
}

START_TEST(test_numpy_fixtures)
{
    FILE *f = fopen("test/data/kernels/cases.txt", "r");
    ck_assert_msg(f != NULL, "test/data/kernels/cases.txt missing (run from the repository root)");
    char line[256];
    int ran = 0;
    while (fgets(line, sizeof line, f)) {
        char name[64], opname[32], file[96];
        int attr, n_in;
        double tol;
        if (line[0] == '#' || sscanf(line, "%63s %31s %d %lf %d", name, opname, &attr, &tol, &n_in) != 5)
            continue;
        int op = isa_op_by_name(opname, strlen(opname));
        ck_assert_msg(op >= 0 && n_in == isa_ops[op].n_in, "%s: bad case line", name);
        dev_value in[3] = {NONE, NONE, NONE};
        for (int k = 0; k < n_in; k++) {
            snprintf(file, sizeof file, "%s.%d.npy", name, k);
            in[k] = load(file);
        }
        snprintf(file, sizeof file, "%s.out.npy", name);
        dev_value want = load(file), out;
        tfvm_status st = call((isa_op)op, attr, in[0], in[1], in[2], &out);
        ck_assert_msg(st == TFVM_OK, "%s: %s (%s)", name, tfvm_status_name(st), msg);
        const tfvm_tensor *w = want.is_tensor ? want.u.t : NULL;
        int64_t count = w ? w->count : 1;
        double *vals = malloc((size_t)(count ? count : 1) * sizeof *vals);
        ck_assert_ptr_nonnull(vals);
        for (int64_t i = 0; i < count; i++)
            vals[i] = elem(&want, i);
        expect(&out, want.dtype, w ? w->rank : 0, w ? w->dims : NULL, vals, tol, name);
        free(vals);
        dev_value_release(&want);
        ck_assert_msg(ta.live == 0, "%s: %ld bytes leaked", name, ta.live);
        ran++;
    }
    fclose(f);
    ck_assert_int_ge(ran, 100);
}
END_TEST

/* ---- Hand-computed cases ----------------------------------------------------------- */
START_TEST(test_matmul_hand)
{
    dev_value o;
    ck_assert_int_eq(call(ISA_MATMUL, 0, T(I32, (2, 2), 1, 2, 3, 4), T(I32, (2, 2), 5, 6, 7, 8), NONE, &o), TFVM_OK);
    EXPECT(&o, I32, (2, 2), 19, 22, 43, 50);
    /* ta: [[1, 3], [2, 4]] @ b; tb: a @ [[5, 7], [6, 8]] */
    ck_assert_int_eq(call(ISA_MATMUL, ISA_OPT_TRANS_A, T(F32, (2, 2), 1, 2, 3, 4), T(F32, (2, 2), 5, 6, 7, 8), NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (2, 2), 26, 30, 38, 44);
    ck_assert_int_eq(call(ISA_MATMUL, ISA_OPT_TRANS_B, T(F64, (2, 2), 1, 2, 3, 4), T(F64, (2, 2), 5, 6, 7, 8), NONE, &o), TFVM_OK);
    EXPECT(&o, F64, (2, 2), 17, 23, 39, 53);
    /* vector . vector is a scalar; ta/tb do not apply to vectors */
    ck_assert_int_eq(call(ISA_MATMUL, 3, T(I64, (3), 1, 2, 3), T(I64, (3), 4, 5, 6), NONE, &o), TFVM_OK);
    EXPECT0(&o, I64, 32);
    ck_assert_int_eq(call(ISA_MATMUL, 0, T(F32, (3), 1, 2, 3), T(F32, (3), 4, 5, 6), NONE, &o), TFVM_OK);
    EXPECT0(&o, F32, 32);
    /* integers wrap */
    ck_assert_int_eq(call(ISA_MATMUL, 0, T(I32, (1, 2), 65536, 1), T(I32, (2, 1), 65536, 5), NONE, &o), TFVM_OK);
    EXPECT(&o, I32, (1, 1), 5);
    /* batch of 2 against one b, and one a against a batch of 2 b */
    ck_assert_int_eq(call(ISA_MATMUL, 0, T(F32, (2, 1, 2), 1, 2, 3, 4), T(F32, (2, 1), 10, 1), NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (2, 1, 1), 12, 34);
    ck_assert_int_eq(call(ISA_MATMUL, 0, T(F64, (1, 2), 1, 2), T(F64, (2, 2, 1), 1, 1, 2, 3), NONE, &o), TFVM_OK);
    EXPECT(&o, F64, (2, 1, 1), 3, 8);
    /* empty: K = 0 gives zeros, M = 0 nothing */
    ck_assert_int_eq(call(ISA_MATMUL, 0, T(F32, (2, 0)), T(F32, (0, 2)), NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (2, 2), 0, 0, 0, 0);
    ck_assert_int_eq(call(ISA_MATMUL, 0, T(I64, (0, 3)), T(I64, (3, 2), 1, 2, 3, 4, 5, 6), NONE, &o), TFVM_OK);
    EXPECT(&o, I64, (0, 2), 0);
    ck_assert_int_eq(call(ISA_MATMUL, 0, T(I32, (0)), T(I32, (0)), NONE, &o), TFVM_OK);
    EXPECT0(&o, I32, 0);
}
END_TEST

START_TEST(test_conv_pool_hand)
{
    dev_value o;
    /* identity-diagonal 2x2 window over 1..9 */
    ck_assert_int_eq(call(ISA_CONV2D, 0, T(F32, (1, 1, 3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9),
                          T(F32, (1, 1, 2, 2), 1, 0, 0, 1), IV(1, 1, 0, 0, 0, 0, 1, 1, 1), &o), TFVM_OK);
    EXPECT(&o, F32, (1, 1, 2, 2), 6, 8, 12, 14);
    /* a 3x3 box of ones over 2x2 ones padded by 1: every window holds all 4 */
    ck_assert_int_eq(call(ISA_CONV2D, 0, T(F64, (1, 1, 2, 2), 1, 1, 1, 1),
                          T(F64, (1, 1, 3, 3), 1, 1, 1, 1, 1, 1, 1, 1, 1), IV(1, 1, 1, 1, 1, 1, 1, 1, 1), &o), TFVM_OK);
    EXPECT(&o, F64, (1, 1, 2, 2), 4, 4, 4, 4);
    /* stride 2, dilation 2 picks x[0][0] + x[2][2] ... from 1..25 */
    ck_assert_int_eq(call(ISA_CONV2D, 0, T(I32, (1, 1, 5, 5), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
                                              18, 19, 20, 21, 22, 23, 24, 25),
                          T(I32, (1, 1, 2, 2), 1, 0, 0, 1), IV(2, 2, 0, 0, 0, 0, 2, 2, 1), &o), TFVM_OK);
    EXPECT(&o, I32, (1, 1, 2, 2), 1 + 13, 3 + 15, 11 + 23, 13 + 25);
    /* groups 2: each output channel sees its own input channel */
    ck_assert_int_eq(call(ISA_CONV2D, 0, T(F32, (1, 2, 1, 1), 3, 5), T(F32, (2, 1, 1, 1), 10, 100),
                          IV(1, 1, 0, 0, 0, 0, 1, 1, 2), &o), TFVM_OK);
    EXPECT(&o, F32, (1, 2, 1, 1), 30, 500);

    /* pooling over [[1, 2], [3, 4]] with 2x2 windows, stride 1, padded by 1 */
    ck_assert_int_eq(call(ISA_MAXPOOL, 0, T(F32, (1, 1, 2, 2), 1, 2, 3, 4), IV(2, 2, 1, 1, 1, 1, 1, 1), NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (1, 1, 3, 3), 1, 2, 2, 3, 4, 4, 3, 4, 4);
    ck_assert_int_eq(call(ISA_AVGPOOL, 0, T(F64, (1, 1, 2, 2), 1, 2, 3, 4), IV(2, 2, 1, 1, 1, 1, 1, 1), NONE, &o), TFVM_OK);
    EXPECT(&o, F64, (1, 1, 3, 3), 1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4);
    ck_assert_int_eq(call(ISA_MAXPOOL, 0, T(I64, (1, 1, 1, 3), -5, -2, -9), IV(1, 2, 1, 1, 0, 0, 0, 0), NONE, &o), TFVM_OK);
    EXPECT(&o, I64, (1, 1, 1, 2), -2, -2);
    ck_assert_int_eq(call(ISA_MAXPOOL, 0, T(F32, (1, 1, 1, 3), 1, NAN, 0), IV(1, 2, 1, 1, 0, 0, 0, 0), NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (1, 1, 1, 2), NAN, NAN);
    /* no images: an empty result */
    ck_assert_int_eq(call(ISA_AVGPOOL, 0, T(F32, (0, 3, 2, 2)), IV(2, 2, 2, 2, 0, 0, 0, 0), NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (0, 3, 1, 1), 0);
}
END_TEST

START_TEST(test_softmax_reduce_hand)
{
    dev_value o;
    ck_assert_int_eq(call(ISA_SOFTMAX, -1, T(F64, (1, 2), 0, log(3.0)), NONE, NONE, &o), TFVM_OK);
    EXPECT(&o, F64, (1, 2), 0.25, 0.75);
    /* stable: no overflow at 1000, equal inputs share evenly */
    ck_assert_int_eq(call(ISA_SOFTMAX, 0, T(F32, (2, 1), 1000, 1000), NONE, NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (2, 1), 0.5, 0.5);
    ck_assert_int_eq(call(ISA_SOFTMAX, 1, T(F32, (2, 0)), NONE, NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (2, 0), 0);

    ck_assert_int_eq(call(ISA_REDUCE_SUM, 0, T(I32, (2, 2), 1, 2, 3, 4), IV0, NONE, &o), TFVM_OK);
    EXPECT0(&o, I32, 10);
    ck_assert_int_eq(call(ISA_REDUCE_SUM, 0, T(I64, (2, 2), 1, 2, 3, 4), IV(0), NONE, &o), TFVM_OK);
    EXPECT(&o, I64, (2), 4, 6);
    ck_assert_int_eq(call(ISA_REDUCE_SUM, ISA_OPT_KEEPDIMS, T(F32, (2, 2), 1, 2, 3, 4), IV(-1), NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (2, 1), 3, 7);
    ck_assert_int_eq(call(ISA_REDUCE_SUM, ISA_OPT_KEEPDIMS, T(F32, (2, 2), 1, 2, 3, 4), IV0, NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (1, 1), 10);
    ck_assert_int_eq(call(ISA_REDUCE_MEAN, 0, T(F64, (2, 2), 1, 2, 3, 4), IV(0, 1), NONE, &o), TFVM_OK);
    EXPECT0(&o, F64, 2.5);
    ck_assert_int_eq(call(ISA_REDUCE_MAX, 0, T(I32, (2, 2), 1, -2, 3, -4), IV(1), NONE, &o), TFVM_OK);
    EXPECT(&o, I32, (2), 1, 3);
    ck_assert_int_eq(call(ISA_REDUCE_MAX, 0, T(F64, (3), -INFINITY, -INFINITY, -INFINITY), IV0, NONE, &o), TFVM_OK);
    EXPECT0(&o, F64, -INFINITY);
    /* i32 sums wrap */
    ck_assert_int_eq(call(ISA_REDUCE_SUM, 0, T(I32, (2), 2147483647, 1), IV0, NONE, &o), TFVM_OK);
    EXPECT0(&o, I32, -2147483648.0);
    /* a scalar is a rank-0 tensor: reducing over no axes gives it back */
    ck_assert_int_eq(call(ISA_REDUCE_MEAN, 0, sc(F32, 7.5), IV0, NONE, &o), TFVM_OK);
    EXPECT0(&o, F32, 7.5);
    /* mean of nothing is NaN (0/0), as in NumPy; sum of nothing 0 */
    ck_assert_int_eq(call(ISA_REDUCE_MEAN, 0, T(F64, (0, 2)), IV(0), NONE, &o), TFVM_OK);
    EXPECT(&o, F64, (2), NAN, NAN);
    ck_assert_int_eq(call(ISA_REDUCE_SUM, 0, T(I64, (0, 2)), IV0, NONE, &o), TFVM_OK);
    EXPECT0(&o, I64, 0);

    ck_assert_int_eq(call(ISA_ARGMAX, 0, T(I32, (3), 3, 1, 3), NONE, NONE, &o), TFVM_OK);
    EXPECT0(&o, I64, 0);
    ck_assert_int_eq(call(ISA_ARGMAX, 0, T(F32, (2, 2), 1, 5, 7, 2), NONE, NONE, &o), TFVM_OK);
    EXPECT(&o, I64, (2), 1, 0);
    ck_assert_int_eq(call(ISA_ARGMAX, 1, T(F64, (2, 3), 1, NAN, NAN, -1, -1, -3), NONE, NONE, &o), TFVM_OK);
    EXPECT(&o, I64, (2), 1, 0);
    ck_assert_int_eq(call(ISA_ARGMAX, 0, T(B, (4), 0, 0, 1, 1), NONE, NONE, &o), TFVM_OK);
    EXPECT0(&o, I64, 2);
}
END_TEST

START_TEST(test_shape_ops_hand)
{
    dev_value o;
    ck_assert_int_eq(call(ISA_RESHAPE, 0, T(I32, (6), 1, 2, 3, 4, 5, 6), IV(3, -1), NONE, &o), TFVM_OK);
    EXPECT(&o, I32, (3, 2), 1, 2, 3, 4, 5, 6);
    ck_assert_int_eq(call(ISA_RESHAPE, 0, sc(F64, 2.5), IV(1, 1), NONE, &o), TFVM_OK);
    EXPECT(&o, F64, (1, 1), 2.5);
    ck_assert_int_eq(call(ISA_RESHAPE, 0, T(B, (1, 1), 1), IV0, NONE, &o), TFVM_OK);
    EXPECT0(&o, B, 1);
    ck_assert_int_eq(call(ISA_RESHAPE, 0, T(F32, (0, 4)), IV(2, 0, 3), NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (2, 0, 3), 0);

    ck_assert_int_eq(call(ISA_TRANSPOSE, 0, T(I64, (2, 3), 1, 2, 3, 4, 5, 6), IV(1, 0), NONE, &o), TFVM_OK);
    EXPECT(&o, I64, (3, 2), 1, 4, 2, 5, 3, 6);
    ck_assert_int_eq(call(ISA_TRANSPOSE, 0, T(B, (1, 2, 2), 1, 0, 0, 1), IV(2, 1, 0), NONE, &o), TFVM_OK);
    EXPECT(&o, B, (2, 2, 1), 1, 0, 0, 1);
    ck_assert_int_eq(call(ISA_TRANSPOSE, 0, sc(I32, 4), IV0, NONE, &o), TFVM_OK);
    EXPECT0(&o, I32, 4);
    ck_assert_int_eq(call(ISA_TRANSPOSE, 0, T(F32, (0, 3)), IV(1, 0), NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (3, 0), 0);

    ck_assert_int_eq(call(ISA_CONCAT, 1, T(I32, (2, 1), 1, 2), T(I32, (2, 2), 3, 4, 5, 6), NONE, &o), TFVM_OK);
    EXPECT(&o, I32, (2, 3), 1, 3, 4, 2, 5, 6);
    ck_assert_int_eq(call(ISA_CONCAT, 0, T(F64, (0)), T(F64, (2), 7, 8), NONE, &o), TFVM_OK);
    EXPECT(&o, F64, (2), 7, 8);
    ck_assert_int_eq(call(ISA_CONCAT, -1, T(B, (0, 2)), T(B, (0, 1)), NONE, &o), TFVM_OK);
    EXPECT(&o, B, (0, 3), 0);

    ck_assert_int_eq(call(ISA_SLICE, 0, T(I32, (5), 0, 1, 2, 3, 4), IV(-2), IV(INT64_MAX), &o), TFVM_OK);
    EXPECT(&o, I32, (1 + 1), 3, 4);
    ck_assert_int_eq(call(ISA_SLICE, 0, T(F32, (2, 3), 1, 2, 3, 4, 5, 6), IV(INT64_MIN, 1), IV(1, -1), &o), TFVM_OK);
    EXPECT(&o, F32, (1, 1), 2);
    ck_assert_int_eq(call(ISA_SLICE, 0, T(F32, (2, 3), 1, 2, 3, 4, 5, 6), IV0, IV0, &o), TFVM_OK);
    EXPECT(&o, F32, (2, 3), 1, 2, 3, 4, 5, 6);
    ck_assert_int_eq(call(ISA_SLICE, 0, sc(I64, 9), IV0, IV0, &o), TFVM_OK);
    EXPECT0(&o, I64, 9);

    ck_assert_int_eq(call(ISA_GATHER, 0, T(F32, (3, 2), 1, 2, 3, 4, 5, 6), T(I32, (2), 2, -3), NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (2, 2), 5, 6, 1, 2);
    ck_assert_int_eq(call(ISA_GATHER, 1, T(I64, (2, 3), 1, 2, 3, 4, 5, 6), sc64(-1), NONE, &o), TFVM_OK);
    EXPECT(&o, I64, (2), 3, 6);
    ck_assert_int_eq(call(ISA_GATHER, 0, T(I64, (3), 1, 2, 3), sc(I32, 1), NONE, &o), TFVM_OK);
    EXPECT0(&o, I64, 2);
    ck_assert_int_eq(call(ISA_GATHER, 0, T(F64, (0, 2)), T(I64, (0)), NONE, &o), TFVM_OK);
    EXPECT(&o, F64, (0, 2), 0);
    ck_assert_int_eq(call(ISA_GATHER, 1, T(B, (2, 2), 1, 0, 0, 1), T(I64, (1, 2), 1, 1), NONE, &o), TFVM_OK);
    EXPECT(&o, B, (2, 1, 2), 0, 0, 1, 1);

    ck_assert_int_eq(call(ISA_PAD, 0, T(I32, (2), 1, 2), IV(1, 2), NONE, &o), TFVM_OK);
    EXPECT(&o, I32, (5), 0, 1, 2, 0, 0);
    ck_assert_int_eq(call(ISA_PAD, 0, T(F64, (1, 1), 5), IV(0, 1, 1, 0), NONE, &o), TFVM_OK);
    EXPECT(&o, F64, (2, 2), 0, 5, 0, 0);
    ck_assert_int_eq(call(ISA_PAD, 0, sc(F32, 3), IV0, NONE, &o), TFVM_OK);
    EXPECT0(&o, F32, 3);
    ck_assert_int_eq(call(ISA_PAD, 0, T(B, (0)), IV(1, 1), NONE, &o), TFVM_OK);
    EXPECT(&o, B, (2), 0, 0);

    ck_assert_int_eq(call(ISA_SHAPE, 0, T(B, (2, 0, 4)), NONE, NONE, &o), TFVM_OK);
    EXPECT(&o, I64, (3), 2, 0, 4);
    ck_assert_int_eq(call(ISA_SHAPE, 0, sc(F32, 1), NONE, NONE, &o), TFVM_OK);
    EXPECT(&o, I64, (0), 0);

    ck_assert_int_eq(call(ISA_FILL, 0, IV(2, 2), sc(F32, 1.5), NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (2, 2), 1.5, 1.5, 1.5, 1.5);
    ck_assert_int_eq(call(ISA_FILL, 0, IV(3), sc(B, 1), NONE, &o), TFVM_OK);
    EXPECT(&o, B, (3), 1, 1, 1);
    ck_assert_int_eq(call(ISA_FILL, 0, IV(1), sc64(INT64_MIN), NONE, &o), TFVM_OK);
    ck_assert(o.is_tensor && ((int64_t *)o.u.t->data)[0] == INT64_MIN);
    dev_value_release(&o);
    ck_assert_int_eq(call(ISA_FILL, 0, IV0, sc(I32, -7), NONE, &o), TFVM_OK);
    EXPECT0(&o, I32, -7);
    ck_assert_int_eq(call(ISA_FILL, 0, IV(0, 3), sc(F64, 1), NONE, &o), TFVM_OK);
    EXPECT(&o, F64, (0, 3), 0);

    ck_assert_int_eq(call(ISA_RANGE, 0, sc(I32, 0), sc(I32, 5), sc(I32, 2), &o), TFVM_OK);
    EXPECT(&o, I32, (3), 0, 2, 4);
    ck_assert_int_eq(call(ISA_RANGE, 0, sc(F64, 0), sc(F64, 1), sc(F64, 0.25), &o), TFVM_OK);
    EXPECT(&o, F64, (4), 0, 0.25, 0.5, 0.75);
    ck_assert_int_eq(call(ISA_RANGE, 0, sc(I32, 3), sc(I32, 0), sc(I32, 1), &o), TFVM_OK);
    EXPECT(&o, I32, (0), 0);
    /* the whole i64 range in steps of INT64_MAX: no overflow on the way */
    ck_assert_int_eq(call(ISA_RANGE, 0, sc64(INT64_MIN), sc64(INT64_MAX), sc64(INT64_MAX), &o), TFVM_OK);
    ck_assert(o.is_tensor && o.u.t->count == 3);
    ck_assert(((int64_t *)o.u.t->data)[0] == INT64_MIN && ((int64_t *)o.u.t->data)[1] == -1 &&
              ((int64_t *)o.u.t->data)[2] == INT64_MAX - 1);
    dev_value_release(&o);
    ck_assert_int_eq(call(ISA_RANGE, 0, sc64(INT64_MAX), sc64(INT64_MIN), sc64(INT64_MIN), &o), TFVM_OK);
    ck_assert(o.is_tensor && o.u.t->count == 2);
    ck_assert(((int64_t *)o.u.t->data)[1] == -1);
    dev_value_release(&o);
}
END_TEST

/* A large transposition: the tiled copy against the definition. */
START_TEST(test_transpose_large)
{
    const int64_t R = 67, C = 131;
    tfvm_tensor *t = tfvm_tensor_new(TFVM_I32, 3, DIMS(R, 2, C), &alloc);
    ck_assert_ptr_nonnull(t);
    int32_t *x = t->data;
    for (int64_t i = 0; i < t->count; i++)
        x[i] = (int32_t)i;
    dev_value o;
    ck_assert_int_eq(call(ISA_TRANSPOSE, 0, tens(t), IV(2, 1, 0), NONE, &o), TFVM_OK);
    const int32_t *y = o.u.t->data;
    for (int64_t c = 0; c < C; c++)
        for (int64_t k = 0; k < 2; k++)
            for (int64_t r = 0; r < R; r++)
                ck_assert_int_eq(y[(c * 2 + k) * R + r], (int32_t)((r * 2 + k) * C + c));
    dev_value_release(&o);
    /* channels first to last and back (4-byte elements: 8 x 8 blocks in
     * registers where the CPU has AVX2, and the element loop), sizes that
     * leave edges on both sides, NaN bits carried as they are */
    static const int64_t sh[][4] = {{1, 96, 56, 56}, {2, 13, 9, 21}, {1, 8, 8, 8}, {3, 70, 1, 130}};
    for (int port = 0; port <= 1; port++) {
        dev_kcopy_force_portable(port);
        for (size_t ci = 0; ci < UT_COUNTOF(sh); ci++)
            for (int back = 0; back <= 1; back++) {
                const int64_t N = sh[ci][0], Ch = sh[ci][1], H = sh[ci][2], W = sh[ci][3];
                tfvm_tensor *u = tfvm_tensor_new(TFVM_F32, 4, back ? DIMS(N, H, W, Ch) : DIMS(N, Ch, H, W), &alloc);
                ck_assert_ptr_nonnull(u);
                uint32_t *ux = u->data;
                for (int64_t i = 0; i < u->count; i++)
                    ux[i] = (uint32_t)(i * 2654435761u) | (i % 5 == 0 ? 0x7fc00000u : 0);
                ck_assert_int_eq(call(ISA_TRANSPOSE, 0, tens(tfvm_tensor_ref(u)), back ? IV(0, 3, 1, 2) : IV(0, 2, 3, 1),
                                      NONE, &o),
                                 TFVM_OK);
                const uint32_t *uy = o.u.t->data;
                for (int64_t n = 0; n < N; n++)
                    for (int64_t c = 0; c < Ch; c++)
                        for (int64_t p = 0; p < H * W; p++) {
                            const int64_t first = (n * Ch + c) * H * W + p, last = (n * H * W + p) * Ch + c;
                            ck_assert_msg(uy[back ? first : last] == ux[back ? last : first],
                                          "case %zu%s%s: n %lld c %lld position %lld", ci, back ? " back" : "",
                                          port ? " portable" : "", (long long)n, (long long)c, (long long)p);
                        }
                dev_value_release(&o);
                tfvm_tensor_free(u);
            }
    }
    dev_kcopy_force_portable(false);
}
END_TEST

/* ---- Elementwise math ------------------------------------------------------------- */
START_TEST(test_unary_math)
{
    dev_value o;
    ck_assert_int_eq(call(ISA_RELU, 0, sc(I32, -3), NONE, NONE, &o), TFVM_OK);
    EXPECT0(&o, I32, 0);
    ck_assert_int_eq(call(ISA_RELU, 0, sc(I64, 5), NONE, NONE, &o), TFVM_OK);
    EXPECT0(&o, I64, 5);
    ck_assert_int_eq(call(ISA_RELU, 0, sc(F32, NAN), NONE, NONE, &o), TFVM_OK);
    EXPECT0(&o, F32, NAN);
    ck_assert_int_eq(call(ISA_RELU, 0, T(F64, (4), -1, 0, 2, NAN), NONE, NONE, &o), TFVM_OK);
    EXPECT(&o, F64, (4), 0, 0, 2, NAN);
    ck_assert_int_eq(call(ISA_RELU, 0, T(I32, (3), -2147483648.0, 0, 7), NONE, NONE, &o), TFVM_OK);
    EXPECT(&o, I32, (3), 0, 0, 7);
    /* sigmoid saturates without inf/inf */
    ck_assert_int_eq(call(ISA_SIGMOID, 0, T(F32, (3), -1000, 0, 1000), NONE, NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (3), 0, 0.5, 1);
    ck_assert_int_eq(call(ISA_SIGMOID, 0, sc(F64, -800), NONE, NONE, &o), TFVM_OK);
    EXPECT0(&o, F64, 0);
    ck_assert_int_eq(call(ISA_TANH, 0, sc(F64, 0), NONE, NONE, &o), TFVM_OK);
    EXPECT0(&o, F64, 0);
    ck_assert_int_eq(call(ISA_EXP, 0, T(F32, (2), 0, 1), NONE, NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (2), 1, 2.718281828459045);
    ck_assert_int_eq(call(ISA_LOG, 0, T(F64, (3), 1, 0, -1), NONE, NONE, &o), TFVM_OK);
    EXPECT(&o, F64, (3), 0, -INFINITY, NAN);
    ck_assert_int_eq(call(ISA_SQRT, 0, sc(F32, 6.25), NONE, NONE, &o), TFVM_OK);
    EXPECT0(&o, F32, 2.5);
    ck_assert_int_eq(call(ISA_SQRT, 0, T(F32, (0, 2)), NONE, NONE, &o), TFVM_OK);
    EXPECT(&o, F32, (0, 2), 0);

    fails(ISA_EXP, 0, sc(I32, 1), NONE, NONE, TFVM_ERR_TYPE, "exp needs a float operand (f32 or f64), got i32");
    fails(ISA_SIGMOID, 0, T(I64, (2), 1, 2), NONE, NONE, TFVM_ERR_TYPE,
          "sigmoid needs a float operand (f32 or f64), got i64");
    fails(ISA_SQRT, 0, sc(B, 1), NONE, NONE, TFVM_ERR_TYPE, "sqrt needs a float operand (f32 or f64), got bool");
    fails(ISA_TANH, 0, sc(I64, 1), NONE, NONE, TFVM_ERR_TYPE, "tanh needs a float operand (f32 or f64), got i64");
    fails(ISA_LOG, 0, T(I32, (1), 1), NONE, NONE, TFVM_ERR_TYPE, "log needs a float operand (f32 or f64), got i32");
    fails(ISA_RELU, 0, sc(B, 1), NONE, NONE, TFVM_ERR_TYPE, "arithmetic on bool is not defined");
    fails(ISA_RELU, 0, T(B, (2), 1, 0), NONE, NONE, TFVM_ERR_TYPE, "arithmetic on bool is not defined");
}
END_TEST

/* ---- Errors, word for word ----------------------------------------------------------- */
START_TEST(test_errors)
{
    const tfvm_status TY = TFVM_ERR_TYPE, SH = TFVM_ERR_SHAPE, AR = TFVM_ERR_ARGUMENT;
    /* MATMUL */
    fails(ISA_MATMUL, 0, T(F32, (2, 3)), T(F64, (3, 2)), NONE, TY, "matmul: dtype mismatch: f32 [2, 3] and f64 [3, 2]");
    fails(ISA_MATMUL, 0, T(B, (2, 2)), T(B, (2, 2)), NONE, TY, "matmul: not defined on bool");
    fails(ISA_MATMUL, 0, sc(F32, 1), T(F32, (3)), NONE, SH, "matmul: operands need rank >= 1, got [] and [3]");
    fails(ISA_MATMUL, 0, T(F32, (2, 3)), T(F32, (4, 5)), NONE, SH, "matmul: inner dims differ: [2, 3] and [4, 5]");
    fails(ISA_MATMUL, ISA_OPT_TRANS_A, T(F32, (2, 3)), T(F32, (3, 5)), NONE, SH,
          "matmul: inner dims differ: [2, 3] (transposed) and [3, 5]");
    fails(ISA_MATMUL, ISA_OPT_TRANS_B, T(I32, (3)), T(I32, (3, 2)), NONE, SH,
          "matmul: inner dims differ: [3] and [3, 2] (transposed)");
    fails(ISA_MATMUL, 0, T(F32, (2, 3, 4)), T(F32, (3, 4, 5)), NONE, SH,
          "matmul: batch dims do not broadcast: [2, 3, 4] and [3, 4, 5]");

    /* CONV2D */
    const int64_t p10[10] = {1, 1, 0, 0, 0, 0, 1, 1, 1, 1};
    fails(ISA_CONV2D, 0, T(F32, (1, 1, 3, 3)), T(F32, (1, 1, 1, 1)), T(I32, (9)), TY,
          "conv2d: parameters must be an i64 vector, got i32 [9]");
    fails(ISA_CONV2D, 0, T(F32, (1, 1, 3, 3)), T(F32, (1, 1, 1, 1)), ivec(p10, 8), SH,
          "conv2d: parameters must be [sh, sw, pt, pl, pb, pr, dh, dw, groups], got 8 entries");
    fails(ISA_CONV2D, 0, T(F32, (1, 1, 3, 3)), T(F32, (1, 1, 1, 1)), ivec(p10, 10), SH,
          "conv2d: parameters has 10 entries, at most 9 allowed");
    fails(ISA_CONV2D, 0, T(F32, (1, 1, 3, 3)), T(F64, (1, 1, 1, 1)), ivec(p10, 9), TY,
          "conv2d: dtype mismatch: f32 [1, 1, 3, 3] and f64 [1, 1, 1, 1]");
    fails(ISA_CONV2D, 0, T(B, (1, 1, 3, 3)), T(B, (1, 1, 1, 1)), ivec(p10, 9), TY, "conv2d: not defined on bool");
    fails(ISA_CONV2D, 0, T(F32, (1, 3, 5)), T(F32, (2, 3, 3, 3)), ivec(p10, 9), SH,
          "conv2d: x must be NCHW and w OIHW (rank 4), got [1, 3, 5] and [2, 3, 3, 3]");
    fails(ISA_CONV2D, 0, T(F32, (1, 1, 3, 3)), T(F32, (1, 1, 1, 1)), IV(0, 1, 0, 0, 0, 0, 1, 1, 1), AR,
          "conv2d: bad parameters [0, 1, 0, 0, 0, 0, 1, 1, 1]: strides, dilations and groups must be >= 1, pads >= 0");
    fails(ISA_CONV2D, 0, T(F32, (1, 1, 3, 3)), T(F32, (1, 1, 1, 1)), IV(1, 1, 0, -1, 0, 0, 1, 1, 1), AR,
          "conv2d: bad parameters [1, 1, 0, -1, 0, 0, 1, 1, 1]: strides, dilations and groups must be >= 1, pads >= 0");
    fails(ISA_CONV2D, 0, T(F32, (1, 3, 5, 5)), T(F32, (2, 2, 3, 3)), ivec(p10, 9), SH,
          "conv2d: x [1, 3, 5, 5] has 3 channels, w [2, 2, 3, 3] takes 2 (groups 1)");
    fails(ISA_CONV2D, 0, T(F32, (1, 4, 5, 5)), T(F32, (3, 2, 3, 3)), IV(1, 1, 0, 0, 0, 0, 1, 1, 2), SH,
          "conv2d: w [3, 2, 3, 3]: 3 output channels do not split into 2 groups");
    fails(ISA_CONV2D, 0, T(F32, (1, 1, 4, 4)), T(F32, (1, 1, 3, 3)), IV(1, 1, 0, 0, 0, 0, 2, 2, 1), SH,
          "conv2d: window of w [1, 1, 3, 3] (dilation 2, 2) does not fit x [1, 1, 4, 4] padded by [0, 0, 0, 0]");
    fails(ISA_CONV2D, 0, T(F32, (1, 1, 4, 4)), T(F32, (1, 1, 0, 3)), ivec(p10, 9), SH,
          "conv2d: window of w [1, 1, 0, 3] (dilation 1, 1) does not fit x [1, 1, 4, 4] padded by [0, 0, 0, 0]");

    /* MAXPOOL / AVGPOOL */
    fails(ISA_MAXPOOL, 0, T(F32, (1, 1, 4, 4)), IV(2, 2, 1, 1, 2, 0, 0, 0), NONE, AR,
          "maxpool: bad parameters [2, 2, 1, 1, 2, 0, 0, 0]: window and strides must be >= 1, pads >= 0 and smaller than the window");
    fails(ISA_AVGPOOL, 0, T(F32, (1, 1, 4, 4)), IV(2, 2, 0, 1, 0, 0, 0, 0), NONE, AR,
          "avgpool: bad parameters [2, 2, 0, 1, 0, 0, 0, 0]: window and strides must be >= 1, pads >= 0 and smaller than the window");
    fails(ISA_MAXPOOL, 0, T(F32, (1, 1, 4, 4)), IV(2, 2, 1, 1), NONE, SH,
          "maxpool: parameters must be [kh, kw, sh, sw, pt, pl, pb, pr] and optionally [dh, dw, ceil_mode, count_include_pad], got 4 entries");
    fails(ISA_AVGPOOL, 0, T(I32, (1, 1, 4, 4)), IV(2, 2, 1, 1, 0, 0, 0, 0), NONE, TY,
          "avgpool: not defined on i32 (floats only)");
    fails(ISA_MAXPOOL, 0, T(B, (1, 1, 4, 4)), IV(2, 2, 1, 1, 0, 0, 0, 0), NONE, TY, "maxpool: not defined on bool");
    fails(ISA_MAXPOOL, 0, T(F32, (2, 2)), IV(2, 2, 1, 1, 0, 0, 0, 0), NONE, SH,
          "maxpool: x must be NCHW (rank 4), got [2, 2]");
    fails(ISA_MAXPOOL, 0, T(F32, (1, 1, 2, 2)), IV(3, 3, 1, 1, 0, 0, 0, 0), NONE, SH,
          "maxpool: window [3, 3] does not fit x [1, 1, 2, 2] padded by [0, 0, 0, 0]");
    fails(ISA_AVGPOOL, 0, T(F64, (1, 1, 0, 2)), IV(1, 1, 1, 1, 0, 0, 0, 0), NONE, SH,
          "avgpool: window [1, 1] does not fit x [1, 1, 0, 2] padded by [0, 0, 0, 0]");

    /* SOFTMAX, ARGMAX, reductions */
    fails(ISA_SOFTMAX, 0, T(I32, (2)), NONE, NONE, TY, "softmax: not defined on i32 (floats only)");
    fails(ISA_SOFTMAX, 2, T(F32, (2, 3)), NONE, NONE, SH, "softmax: axis 2 out of range for shape [2, 3]");
    fails(ISA_SOFTMAX, -3, T(F32, (2, 3)), NONE, NONE, SH, "softmax: axis -3 out of range for shape [2, 3]");
    fails(ISA_SOFTMAX, -1, sc(F64, 1), NONE, NONE, SH, "softmax: axis -1 out of range for shape []");
    fails(ISA_ARGMAX, 1, T(F32, (2, 0)), NONE, NONE, SH, "argmax: axis 1 of shape [2, 0] is empty");
    fails(ISA_ARGMAX, 0, sc(I32, 3), NONE, NONE, SH, "argmax: axis 0 out of range for shape []");
    fails(ISA_REDUCE_SUM, 0, T(F32, (2, 3)), sc64(0), NONE, TY, "reduce_sum: axes must be an i64 vector, got i64 []");
    fails(ISA_REDUCE_SUM, 0, T(F32, (2, 3)), T(I32, (1), 0), NONE, TY, "reduce_sum: axes must be an i64 vector, got i32 [1]");
    fails(ISA_REDUCE_SUM, 0, T(F32, (2, 3)), IV(3), NONE, SH, "reduce_sum: axis 3 out of range for shape [2, 3]");
    fails(ISA_REDUCE_MEAN, 0, sc(F32, 3), IV(0), NONE, SH, "reduce_mean: axis 0 out of range for shape []");
    fails(ISA_REDUCE_MAX, 0, T(F32, (2, 3)), IV(1, -1), NONE, AR, "reduce_max: axis -1 repeated in axes [1, -1]");
    fails(ISA_REDUCE_MAX, 0, T(F32, (2, 0)), IV(1), NONE, SH, "reduce_max: max over no elements: axes [1] of shape [2, 0]");
    fails(ISA_REDUCE_MAX, 0, T(I64, (0)), IV0, NONE, SH, "reduce_max: max over no elements: axes [] of shape [0]");
    fails(ISA_REDUCE_MEAN, 0, T(I32, (2)), IV0, NONE, TY, "reduce_mean: not defined on i32 (floats only)");
    fails(ISA_REDUCE_SUM, 0, T(B, (2)), IV0, NONE, TY, "reduce_sum: not defined on bool");
    fails(ISA_REDUCE_SUM, 0, T(F32, (2)), IV(0, 0, 0, 0, 0, 0, 0, 0, 0), NONE, SH,
          "reduce_sum: axes has 9 entries, at most 8 allowed");

    /* Shape ops */
    fails(ISA_RESHAPE, 0, T(F32, (2, 3)), IV(4, 2), NONE, SH, "reshape: cannot reshape [2, 3] (6 elements) into [4, 2]");
    fails(ISA_RESHAPE, 0, T(F32, (2, 3)), IV(4, -1), NONE, SH, "reshape: cannot reshape [2, 3] (6 elements) into [4, -1]");
    fails(ISA_RESHAPE, 0, T(F32, (0, 4)), IV(2, -1, 0), NONE, SH,
          "reshape: cannot reshape [0, 4] (0 elements) into [2, -1, 0]");
    fails(ISA_RESHAPE, 0, T(F32, (2, 3)), IV(-1, -1), NONE, AR, "reshape: bad shape [-1, -1]: dims must be >= 0, one may be -1");
    fails(ISA_RESHAPE, 0, T(F32, (2, 3)), IV(2, -3), NONE, AR, "reshape: bad shape [2, -3]: dims must be >= 0, one may be -1");
    fails(ISA_RESHAPE, 0, T(F32, (2, 3)), IV(1, 1, 1, 1, 1, 1, 1, 1, 6), NONE, SH,
          "reshape: shape has 9 entries, at most 8 allowed");
    fails(ISA_RESHAPE, 0, T(F32, (2, 3)), T(F64, (2), 3, 2), NONE, TY, "reshape: shape must be an i64 vector, got f64 [2]");
    fails(ISA_RESHAPE, 0, T(F32, (2, 3)), IV(INT64_C(1) << 62, 8), NONE, SH,
          "reshape: cannot reshape [2, 3] (6 elements) into [4611686018427387904, 8]");
    fails(ISA_TRANSPOSE, 0, T(F32, (2, 3)), IV(0, 0), NONE, SH,
          "transpose: perm [0, 0] is not a permutation of the axes of [2, 3]");
    fails(ISA_TRANSPOSE, 0, T(F32, (2, 3)), IV(0), NONE, SH, "transpose: perm [0] is not a permutation of the axes of [2, 3]");
    fails(ISA_TRANSPOSE, 0, T(F32, (2, 3)), IV(1, -3), NONE, SH,
          "transpose: perm [1, -3] is not a permutation of the axes of [2, 3]");
    fails(ISA_CONCAT, 0, T(F32, (2)), T(I32, (2)), NONE, TY, "concat: dtype mismatch: f32 [2] and i32 [2]");
    fails(ISA_CONCAT, 0, T(F32, (2, 3)), T(F32, (2, 4)), NONE, SH, "concat: shapes [2, 3] and [2, 4] differ outside axis 0");
    fails(ISA_CONCAT, 1, T(F32, (2, 3)), T(F32, (2, 3, 1)), NONE, SH, "concat: shapes [2, 3] and [2, 3, 1] differ in rank");
    fails(ISA_CONCAT, 0, sc(F32, 1), sc(F32, 2), NONE, SH, "concat: axis 0 out of range for shape []");
    fails(ISA_SLICE, 0, T(F32, (2, 3)), IV(0, 0), IV(1), SH, "slice: starts [0, 0] and ends [1] differ in length");
    fails(ISA_SLICE, 0, T(F32, (2, 3)), IV(0, 0, 0), IV(1, 1, 1), SH, "slice: starts [0, 0, 0] has more entries than [2, 3] has axes");
    fails(ISA_SLICE, 0, T(F32, (2, 3)), IV(0), T(I32, (1), 1), TY, "slice: ends must be an i64 vector, got i32 [1]");
    fails(ISA_GATHER, 0, T(F32, (3, 2)), T(F32, (2)), NONE, TY, "gather: indices must be i32 or i64, got f32 [2]");
    fails(ISA_GATHER, 0, T(F32, (3, 2)), T(I64, (2), 0, 3), NONE, SH, "gather: index 3 out of range for axis 0 of [3, 2]");
    fails(ISA_GATHER, -1, T(F32, (3, 2)), sc(I32, -3), NONE, SH, "gather: index -3 out of range for axis 1 of [3, 2]");
    fails(ISA_GATHER, 0, T(F32, (0)), sc64(0), NONE, SH, "gather: index 0 out of range for axis 0 of [0]");
    fails(ISA_GATHER, 0, sc(F32, 1), sc64(0), NONE, SH, "gather: axis 0 out of range for shape []");
    fails(ISA_GATHER, 0, T(F32, (1, 1, 1, 1, 1)), T(I64, (1, 1, 1, 1, 1)), NONE, SH,
          "gather: result would have rank 9 (x [1, 1, 1, 1, 1]), more than 8");
    fails(ISA_PAD, 0, T(F32, (2, 3)), IV(1, 1), NONE, SH, "pad: pads [1, 1] must have 2 entries per axis of [2, 3]");
    fails(ISA_PAD, 0, T(F32, (2, 3)), IV(1, -1, 0, 0), NONE, AR, "pad: bad pads [1, -1, 0, 0]: each must be in 0..2^40");
    fails(ISA_FILL, 0, IV(2), T(F32, (2)), NONE, SH, "fill: value must be a scalar, got f32 [2]");
    fails(ISA_FILL, 0, IV(2, -1), sc(F32, 0), NONE, AR, "fill: bad shape [2, -1]: dims must be >= 0");
    fails(ISA_FILL, 0, IV(INT64_C(1) << 40, INT64_C(1) << 40), sc(B, 0), NONE, SH,
          "fill: shape [1099511627776, 1099511627776] is too large");
    fails(ISA_FILL, 0, sc64(3), sc(B, 0), NONE, TY, "fill: shape must be an i64 vector, got i64 []");
    fails(ISA_RANGE, 0, sc(I32, 0), sc(I32, 5), sc(I32, 0), AR, "range: delta is zero");
    fails(ISA_RANGE, 0, sc(F64, 0), sc(F64, 5), sc(F64, 0), AR, "range: delta is zero");
    fails(ISA_RANGE, 0, sc(I32, 0), sc(I64, 5), sc(I32, 1), TY, "range: dtype mismatch: i32, i64 and i32");
    fails(ISA_RANGE, 0, sc(B, 0), sc(B, 1), sc(B, 1), TY, "range: not defined on bool");
    fails(ISA_RANGE, 0, T(I32, (2)), sc(I32, 1), sc(I32, 1), SH, "range: start, limit and delta must be scalars, got [2], [] and []");
    fails(ISA_RANGE, 0, sc(F64, 0), sc(F64, INFINITY), sc(F64, 1), SH, "range: 0 to inf by 1 has too many elements");
    fails(ISA_RANGE, 0, sc(F32, 0), sc(F32, NAN), sc(F32, 1), SH, "range: 0 to nan by 1 has too many elements");
    fails(ISA_RANGE, 0, sc64(0), sc64(INT64_MAX), sc64(1), SH, "range: 9223372036854775807 elements are too many");
}
END_TEST

/* Misuse by the caller (the VM) is an internal error, not a crash. */
START_TEST(test_internal_errors)
{
    dev_value in[3] = {sc(F32, 1), sc(F32, 1), sc(F32, 1)}, out;
    char want[64];
    snprintf(want, sizeof want, "tensor: op %d is not a tensor op", (int)ISA_ADD);
    ck_assert_int_eq(dev_cpu_tensor(ISA_ADD, 0, in, 2, &out, &alloc, msg, sizeof msg), TFVM_ERR_INTERNAL);
    ck_assert_str_eq(msg, want);
    ck_assert_int_eq(dev_cpu_tensor(ISA_OP_COUNT, 0, in, 2, &out, &alloc, NULL, 0), TFVM_ERR_INTERNAL);
    ck_assert_int_eq(dev_cpu_tensor(ISA_MATMUL, 0, in, 3, &out, &alloc, msg, sizeof msg), TFVM_ERR_INTERNAL);
    ck_assert_str_eq(msg, "matmul: takes 2 inputs, got 3");
    in[1] = dev_dead();
    ck_assert_int_eq(dev_cpu_tensor(ISA_MATMUL, 0, in, 2, &out, &alloc, msg, sizeof msg), TFVM_ERR_INTERNAL);
    ck_assert_str_eq(msg, "matmul: input 1 has no value");
    /* a message buffer too small is cut, never overrun */
    char small[8];
    dev_value v = T(F32, (2, 3));
    dev_value w = T(F32, (4, 5));
    dev_value in2[2] = {v, w};
    ck_assert_int_eq(dev_cpu_tensor(ISA_MATMUL, 0, in2, 2, &out, &alloc, small, sizeof small), TFVM_ERR_SHAPE);
    ck_assert_str_eq(small, "matmul:");
    dev_value_release(&v);
    dev_value_release(&w);
}
END_TEST

/* ---- Allocation failures ---------------------------------------------------------------
 * Each call, with its n-th allocation failing for every n until it succeeds,
 * must end in TFVM_ERR_NOMEM with nothing leaked. */
typedef struct nm_case {
    isa_op op;
    int32_t attr;
} nm_case;

static const nm_case nm_cases[] = {
    {ISA_MATMUL, 0}, {ISA_MATMUL, ISA_OPT_TRANS_B}, {ISA_CONV2D, 0}, {ISA_CONV2D, 1}, {ISA_MAXPOOL, 0},
    {ISA_AVGPOOL, 0}, {ISA_SOFTMAX, -1}, {ISA_REDUCE_SUM, 0}, {ISA_REDUCE_MEAN, 1},
    {ISA_REDUCE_MAX, 0}, {ISA_ARGMAX, 0}, {ISA_RESHAPE, 0}, {ISA_TRANSPOSE, 0},
    {ISA_CONCAT, 0}, {ISA_SLICE, 0}, {ISA_GATHER, 0}, {ISA_PAD, 0}, {ISA_SHAPE, 0},
    {ISA_FILL, 0}, {ISA_RANGE, 0}, {ISA_SIGMOID, 0}, {ISA_RELU, 0},
};

static void nm_inputs(const nm_case *c, dev_value in[3])
{
    in[0] = in[1] = in[2] = NONE;
    switch (c->op) {
    case ISA_MATMUL: in[0] = T(F32, (2, 1, 3), 1, 2, 3, 4, 5, 6); in[1] = T(F32, (3, 3), 1, 0, 0, 0, 1, 0, 0, 0, 1); break;
    case ISA_CONV2D:
        in[0] = T(F32, (1, 2, 3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9);
        in[1] = T(F32, (2, 1, 2, 2), 1, 1, 1, 1, 2, 2, 2, 2);
        in[2] = IV(1, 1, 1, 0, 0, 1, 1, 1, 2);
        break;
    case ISA_MAXPOOL:
    case ISA_AVGPOOL: in[0] = T(F32, (1, 1, 2, 2), 1, 2, 3, 4); in[1] = IV(2, 2, 1, 1, 1, 1, 0, 0); break;
    case ISA_SOFTMAX:
    case ISA_ARGMAX: in[0] = T(F32, (2, 2), 1, 2, 3, 4); break;
    case ISA_REDUCE_SUM:
    case ISA_REDUCE_MEAN:
    case ISA_REDUCE_MAX: in[0] = T(F32, (2, 2), 1, 2, 3, 4); in[1] = IV(0); break;
    case ISA_RESHAPE: in[0] = T(F32, (2, 2), 1, 2, 3, 4); in[1] = IV(4); break;
    case ISA_TRANSPOSE: in[0] = T(F32, (2, 2), 1, 2, 3, 4); in[1] = IV(1, 0); break;
    case ISA_CONCAT: in[0] = T(F32, (2), 1, 2); in[1] = T(F32, (1), 3); break;
    case ISA_SLICE: in[0] = T(F32, (4), 1, 2, 3, 4); in[1] = IV(1); in[2] = IV(3); break;
    case ISA_GATHER: in[0] = T(F32, (4), 1, 2, 3, 4); in[1] = T(I32, (2), 3, 0); break;
    case ISA_PAD: in[0] = T(F32, (1), 1); in[1] = IV(1, 1); break;
    case ISA_SHAPE: in[0] = T(F32, (1), 1); break;
    case ISA_FILL: in[0] = IV(3); in[1] = sc(F32, 1); break;
    case ISA_RANGE: in[0] = sc(I32, 0); in[1] = sc(I32, 3); in[2] = sc(I32, 1); break;
    default: in[0] = T(F64, (3), 1, 2, 3); break;
    }
}

START_TEST(test_nomem)
{
    const nm_case *c = &nm_cases[_i];
    for (long n = 0;; n++) {
        dev_value in[3], out;
        ta.countdown = -1;
        nm_inputs(c, in);
        /* held: a RESHAPE of an input nobody else holds relabels it, allocating nothing */
        dev_value held = in[0];
        dev_value_retain(&held);
        ta.countdown = n;
        tfvm_status st = call(c->op, c->attr, in[0], in[1], in[2], &out);
        ta.countdown = -1;
        dev_value_release(&held);
        if (st == TFVM_OK) {
            ck_assert_msg(n > 0, "%s allocates nothing", isa_ops[c->op].name);
            dev_value_release(&out);
            break;
        }
        ck_assert_msg(st == TFVM_ERR_NOMEM, "%s, allocation %ld fails: %s (%s)", isa_ops[c->op].name, n,
                      tfvm_status_name(st), msg);
        ck_assert_msg(strstr(msg, "out of memory") != NULL, "%s: message '%s'", isa_ops[c->op].name, msg);
        ck_assert_msg(ta.live == 0, "%s, allocation %ld fails: %ld bytes leaked", isa_ops[c->op].name, n, ta.live);
    }
    ck_assert_int_eq(ta.live, 0);
}
END_TEST

/* OpenBLAS gets one thread, the caller's, with any number of VM workers,
 * and again after something else in the process changed its count. */
START_TEST(test_threads)
{
    const int workers[] = {1, 2, 5, 0};
    for (size_t i = 0; i < UT_COUNTOF(workers); i++) {
        openblas_set_num_threads(2);
        dev_cpu_set_threads(workers[i]);
        ck_assert_msg(openblas_get_num_threads() == 1, "%d workers: OpenBLAS has %d threads", workers[i],
                      openblas_get_num_threads());
    }
    openblas_set_num_threads(2); /* and the matmul below sets it back */
    /* a matmul big enough to use the threads agrees with the integer loop */
    enum { N = 96 };
    tfvm_tensor *a = tfvm_tensor_new(TFVM_F64, 2, DIMS(N, N), &alloc), *b = tfvm_tensor_new(TFVM_F64, 2, DIMS(N, N), &alloc);
    tfvm_tensor *ai = tfvm_tensor_new(TFVM_I64, 2, DIMS(N, N), &alloc), *bi = tfvm_tensor_new(TFVM_I64, 2, DIMS(N, N), &alloc);
    for (int i = 0; i < N * N; i++) {
        ((double *)a->data)[i] = (double)(((int64_t *)ai->data)[i] = i % 7 - 3);
        ((double *)b->data)[i] = (double)(((int64_t *)bi->data)[i] = i % 5 - 2);
    }
    dev_value o, oi;
    ck_assert_int_eq(call(ISA_MATMUL, ISA_OPT_TRANS_B, tens(a), tens(b), NONE, &o), TFVM_OK);
    ck_assert_int_eq(call(ISA_MATMUL, ISA_OPT_TRANS_B, tens(ai), tens(bi), NONE, &oi), TFVM_OK);
    ck_assert_int_eq(openblas_get_num_threads(), 1);
    for (int i = 0; i < N * N; i++)
        ck_assert(((double *)o.u.t->data)[i] == (double)((int64_t *)oi.u.t->data)[i]);
    dev_value_release(&o);
    dev_value_release(&oi);
}
END_TEST

static void setup(void)
{
    ta = (tu_alloc){.countdown = -1, .fresh_only = true};
}

static void teardown(void)
{
    ck_assert_msg(ta.live == 0, "%ld bytes leaked", ta.live);
}

static Suite *suite(void)
{
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_numpy_fixtures);
    tcase_add_test(tc, test_matmul_hand);
    tcase_add_test(tc, test_conv_pool_hand);
    tcase_add_test(tc, test_softmax_reduce_hand);
    tcase_add_test(tc, test_shape_ops_hand);
    tcase_add_test(tc, test_transpose_large);
    tcase_add_test(tc, test_unary_math);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_internal_errors);
    tcase_add_loop_test(tc, test_nomem, 0, (int)UT_COUNTOF(nm_cases));
    tcase_add_test(tc, test_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
#ifdef TU_TSAN
    dev_cpu_set_threads(1); /* BLAS on the calling thread before any kernel runs */
#endif
    return tu_run_suite(suite());
}
