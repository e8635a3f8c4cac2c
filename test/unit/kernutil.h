/* test/unit/kernutil.h — what the CPU kernel suites share (test_kernels_shape,
 * test_kernels_bits, test_kernels_image): a counting allocator, operands
 * made from literals (T, IV, ...), calls through dev_cpu_tensor, and the OK /
 * FAILS checks of an exact result or an exact message. One copy per suite. */
#ifndef TFVM_TEST_KERNUTIL_H
#define TFVM_TEST_KERNUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "devices/cpu/kern.h"
#include "testutil.h"

static tu_alloc ta; /* reset by setup() before each test */
static tfvm_allocator alloc = {tu_alloc_fn, &ta};
static char msg[512];

enum { B = TFVM_BOOL, I32 = TFVM_I32, I64 = TFVM_I64, F32 = TFVM_F32, F64 = TFVM_F64, U8 = TFVM_U8, I8 = TFVM_I8 };

/* ---- Making operands ---------------------------------------------------------- */
static inline dev_value tens(tfvm_tensor *t)
{
    ck_assert_ptr_nonnull(t);
    return (dev_value){.dtype = t->dtype, .is_tensor = 1, .u.t = t};
}

static inline void put(uint8_t dt, void *p, int64_t i, double v)
{
    switch (dt) {
    case B: ((uint8_t *)p)[i] = v != 0; break;
    case U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case F32: ((float *)p)[i] = (float)v; break;
    default: ((double *)p)[i] = v; break;
    }
}

/* A tensor of dtype dt from nv doubles (bool: != 0); none: all zeros. */
static inline dev_value tf(uint8_t dt, int rank, const int64_t *dims, const double *v, int64_t nv)
{
    tfvm_tensor *t = tfvm_tensor_new((tfvm_dtype)dt, rank, dims, &alloc);
    ck_assert_ptr_nonnull(t);
    ck_assert_msg(nv == 0 || nv == t->count, "test bug: %lld values for %lld elements", (long long)nv,
                  (long long)t->count);
    for (int64_t i = 0; i < nv; i++)
        put(dt, t->data, i, v[i]);
    return tens(t);
}

static inline dev_value ivec(const int64_t *v, int64_t n)
{
    tfvm_tensor *t = tfvm_tensor_new(TFVM_I64, 1, &n, &alloc);
    ck_assert_ptr_nonnull(t);
    for (int64_t i = 0; i < n; i++) /* not memcpy: IV0 passes NULL, and gcc warns through the inlining */
        ((int64_t *)t->data)[i] = v[i];
    return tens(t);
}

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define NDIMS(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define VALS(...) ((const double[]){0, __VA_ARGS__} + 1)
#define NVALS(...) ((int64_t)(sizeof((const double[]){0, __VA_ARGS__}) / sizeof(double)) - 1)
/* T(dtype, (dims...), values...): no values means zeros */
#define T(dt, dims, ...) tf(dt, NDIMS dims, DIMS dims, VALS(__VA_ARGS__), NVALS(__VA_ARGS__))
#define IV(...) ivec(DIMS(__VA_ARGS__), NDIMS(__VA_ARGS__))
#define IV0 ivec(NULL, 0)
#define FV0 T(F32, (0))

static inline dev_value sc(uint8_t dt, double v)
{
    dev_value d = {.dtype = dt};
    put(dt, &d.u, 0, v);
    return d;
}
static inline dev_value sc64(int64_t v) { return (dev_value){.dtype = I64, .u.i64 = v}; }
static const dev_value NONE = {0};

/* ---- Calling ------------------------------------------------------------------ */
/* Runs op on in[0..n_in-1] (n_in from the op's row), releasing the inputs. */
static inline tfvm_status callv(isa_op op, int32_t attr, dev_value *in, dev_value *out)
{
    const int n = isa_ops[op].n_in;
    msg[0] = '\0';
    *out = (dev_value){.dtype = 99};
    tfvm_status st = dev_cpu_tensor(op, (uint32_t)attr, in, (uint32_t)n, out, &alloc, msg, sizeof msg);
    for (int k = 0; k < DEV_KMAX_IN; k++)
        dev_value_release(&in[k]);
    if (st != TFVM_OK)
        ck_assert_msg(out->dtype == 99, "%s: out written on failure", isa_ops[op].name);
    return st;
}

/* C(op, attr, &out, inputs...) */
#define C(op, attr, out, ...) callv(op, attr, (dev_value[DEV_KMAX_IN]){__VA_ARGS__}, out)

static inline double elem(const dev_value *v, int64_t i)
{
    const void *p = v->is_tensor ? v->u.t->data : (const void *)&v->u;
    switch (v->dtype) {
    case B:
    case U8: return ((const uint8_t *)p)[i];
    case I8: return ((const int8_t *)p)[i];
    case I32: return ((const int32_t *)p)[i];
    case I64: return (double)((const int64_t *)p)[i];
    case F32: return ((const float *)p)[i];
    default: return ((const double *)p)[i];
    }
}

/* out must have dtype dt, shape dims (rank 0: a scalar) and values v
 * (within tol relative, 0 = exact; NaN matches NaN). Releases out. */
static inline void expect(dev_value *out, uint8_t dt, int rank, const int64_t *dims, const double *v,
                   double tol, const char *label)
{
    ck_assert_msg(out->dtype == dt, "%s: dtype %d, want %d", label, out->dtype, dt);
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
        ck_assert_uint_eq(out->u.t->nbytes, (size_t)count * tfvm_dtype_size((tfvm_dtype)dt));
    }
    for (int64_t i = 0; i < count; i++) {
        double g = elem(out, i), w = v[i];
        bool ok = (isnan(g) && isnan(w)) || g == w || fabs(g - w) <= tol * (1 + fabs(w));
        ck_assert_msg(ok, "%s: element %lld is %.17g, want %.17g", label, (long long)i, g, w);
    }
    dev_value_release(out);
}

#define UT_STR(x) UT_STR2(x)
#define UT_STR2(x) #x
#define HERE __FILE__ ":" UT_STR(__LINE__)
/* OK(op, attr, (inputs...), dtype, (dims...), values...) */
#define OK(op, attr, ins, dt, dims, ...)                                                   \
    do {                                                                                   \
        dev_value o_;                                                                      \
        tfvm_status st_ = callv(op, attr, (dev_value[DEV_KMAX_IN]){UT_UNPAREN ins}, &o_);  \
        ck_assert_msg(st_ == TFVM_OK, "%s: %s (%s)", HERE, tfvm_status_name(st_), msg);    \
        expect(&o_, dt, NDIMS dims, DIMS dims, VALS(__VA_ARGS__), 1e-6, HERE);             \
    } while (0)
/* the same for a scalar result */
#define OK0(op, attr, ins, dt, v)                                                          \
    do {                                                                                   \
        dev_value o_;                                                                      \
        tfvm_status st_ = callv(op, attr, (dev_value[DEV_KMAX_IN]){UT_UNPAREN ins}, &o_);  \
        ck_assert_msg(st_ == TFVM_OK, "%s: %s (%s)", HERE, tfvm_status_name(st_), msg);    \
        expect(&o_, dt, 0, NULL, VALS(v), 1e-6, HERE);                                     \
    } while (0)
#define UT_UNPAREN(...) __VA_ARGS__

/* The call must fail with code and exactly this message. */
#define FAILS(op, attr, ins, code, want)                                                   \
    do {                                                                                   \
        dev_value o_;                                                                      \
        tfvm_status st_ = callv(op, attr, (dev_value[DEV_KMAX_IN]){UT_UNPAREN ins}, &o_);  \
        ck_assert_msg(st_ == (code), "%s: got %s (%s), want %s", HERE, tfvm_status_name(st_), msg, \
                      tfvm_status_name(code));                                             \
        ck_assert_msg(strcmp(msg, want) == 0, "%s\n got  %s\n want %s", HERE, msg, want);  \
    } while (0)

#define SH TFVM_ERR_SHAPE
#define TY TFVM_ERR_TYPE
#define AR TFVM_ERR_ARGUMENT

#endif
