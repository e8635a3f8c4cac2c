/* test/unit/test_fused.c — FUSED_MATMUL and FUSED_CONV2D against naive
 * references (exact: small integer operands keep every f32 sum exact), bit
 * for bit against MATMUL/CONV2D + ADD + activation on arbitrary floats, their
 * messages, the asm round trip of their options, and the chunked paths of
 * the product and pooling kernels under a test-only intra-op runner. */
#include <pthread.h>
#include <stdatomic.h>

#include "devices/cpu/act.h"
#include "devices/cpu/convf32.h"
#include "devices/cpu/convplan.h"
#include "devices/cpu/dwconv.h"
#include "devices/cpu/fewch.h"
#include "devices/cpu/par.h"
#include "devices/cpu/sgemm.h"
#include "kernutil.h"
#include "loader/loader.h"

static void setup(void) { ta = (tu_alloc){.countdown = -1}; }
static void teardown(void)
{
    ck_assert_msg(ta.live == 0, "%ld bytes leaked", ta.live);
}

#define RELU ISA_OPT_ACT_RELU
#define SIG ISA_OPT_ACT_SIGMOID
#define TANH ISA_OPT_ACT_TANH
#define SILU ISA_OPT_ACT_SILU
#define GELU ISA_OPT_ACT_GELU
#define HSIG ISA_OPT_ACT_HARDSIGMOID
#define HSWISH ISA_OPT_ACT_HARDSWISH
#define RELU6 ISA_OPT_ACT_RELU6
#define GELUT ISA_OPT_ACT_GELU_TANH
#define GELUN ISA_OPT_ACT_GELU_NEW
#define GELU_C 0.7978845608028654 /* sqrt(2 / pi) */

/* MIN and MAX as elementwise.c spells them (NaN wins) */
static double fmin_nan(double x, double y) { return (x < y || isnan(x)) ? x : y; }
static double fmax_nan(double x, double y) { return (x > y || isnan(x)) ? x : y; }
static float hsigf(float x)
{
    const float t = x * (float)(1.0 / 6);
    const float u = t + 0.5f;
    return (float)fmax_nan(fmin_nan(u, 1), 0);
}
static double hsig(double x)
{
    const double t = x * (1.0 / 6);
    const double u = t + 0.5;
    return fmax_nan(fmin_nan(u, 1), 0);
}
static float act1f(void (*fn)(float *, const float *, size_t), float x)
{
    float r;
    fn(&r, &x, 1);
    return r;
}

/* The activations as the elementwise ops they replace compute them (act.c's
 * functions for f32 SIGMOID, TANH, ERF). */
static double act_ref(uint8_t dt, uint32_t act, double x)
{
    if (dt == F32) {
        const float f = (float)x;
        switch (act) {
        case RELU: return f < 0 ? 0 : f;
        case SIG: return act1f(dev_sigmoidf_n, f);
        case TANH: return act1f(dev_tanhf_n, f);
        case SILU: return f * act1f(dev_sigmoidf_n, f);
        case GELU: return (f * (act1f(dev_erff_n, f / 0x1.6a09e6p0f) + 1)) * 0.5f;
        case HSIG: return hsigf(f);
        case HSWISH: return f * hsigf(f);
        case RELU6: return (float)fmin_nan(fmax_nan(f, 0), 6);
        case GELUT: {
            const float x2 = f * f;
            const float x3 = f * x2;
            const float k = x3 * 0.044715f;
            const float a = f + k;
            const float t = act1f(dev_tanhf_n, a * (float)GELU_C);
            const float p = t + 1;
            const float y = f * p;
            return y * 0.5f;
        }
        case GELUN: {
            const float p = powf(f, 3.0f);
            const float k = p * 0.044715f;
            const float a = f + k;
            const float t = act1f(dev_tanhf_n, a * (float)GELU_C);
            const float h = f * 0.5f;
            return h * (t + 1);
        }
        default: return f;
        }
    }
    const double s = x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
    switch (act) {
    case RELU: return x < 0 ? 0 : x;
    case SIG: return s;
    case TANH: return tanh(x);
    case SILU: return x * s;
    case GELU: return (x * (erf(x / M_SQRT2) + 1)) * 0.5;
    case HSIG: return hsig(x);
    case HSWISH: return x * hsig(x);
    case RELU6: return fmin_nan(fmax_nan(x, 0), 6);
    case GELUT: return (x * (tanh((x + x * (x * x) * 0.044715) * GELU_C) + 1)) * 0.5;
    case GELUN: return (x * 0.5) * (tanh((x + pow(x, 3.0) * 0.044715) * GELU_C) + 1);
    default: return x;
    }
}

/* A tensor of dtype dt whose element i is small integer pattern(i). */
static dev_value pattern(uint8_t dt, int rank, const int64_t *dims, int seed)
{
    dev_value v = tf(dt, rank, dims, NULL, 0);
    for (int64_t i = 0; i < v.u.t->count; i++)
        put(dt, v.u.t->data, i, (double)((i * 7 + seed * 3) % 11) - 5);
    return v;
}

/* TANH of one f32, as act.c computes it */
static float tanh1(float x)
{
    float r;
    dev_tanhf_n(&r, &x, 1);
    return r;
}

/* ---- FUSED_MATMUL by hand ------------------------------------------------------ */
START_TEST(test_matmul_hand)
{
    /* [[1,2,3],[4,5,6]] @ [[1,-1],[0,2],[-1,0]] = [[-2, 3], [-2, 6]]; + [1, -4] */
    for (int dt = F32; dt <= F64; dt++) {
        OK(ISA_FUSED_MATMUL, 0, (T(dt, (2, 3), 1, 2, 3, 4, 5, 6), T(dt, (3, 2), 1, -1, 0, 2, -1, 0), T(dt, (2), 1, -4)),
           dt, (2, 2), -1, -1, -1, 2);
        OK(ISA_FUSED_MATMUL, RELU,
           (T(dt, (2, 3), 1, 2, 3, 4, 5, 6), T(dt, (3, 2), 1, -1, 0, 2, -1, 0), T(dt, (2), 1, -4)), dt, (2, 2), 0, 0,
           0, 2);
    }
    OK(ISA_FUSED_MATMUL, SIG, (T(F64, (1, 2), 1, 2), T(F64, (2, 2), 1, 0, 0, -1), T(F64, (2), 0, 0)), F64, (1, 2),
       1 / (1 + exp(-1.0)), exp(-2.0) / (1 + exp(-2.0)));
    OK(ISA_FUSED_MATMUL, TANH, (T(F32, (1, 2), 1, 2), T(F32, (2, 2), 1, 0, 0, -1), T(F32, (2), 0, 0)), F32, (1, 2),
       tanh1(1), tanh1(-2));
    /* ta, tb: a [3, 2] read as [2, 3], b [2, 3] read as [3, 2] */
    OK(ISA_FUSED_MATMUL, ISA_OPT_TRANS_A | ISA_OPT_TRANS_B | RELU,
       (T(F32, (3, 2), 1, 4, 2, 5, 3, 6), T(F32, (2, 3), 1, 0, -1, -1, 2, 0), T(F32, (2), 1, -4)), F32, (2, 2), 0, 0,
       0, 2);
    /* bias shapes: [M, 1] per row, a scalar, [1, N], the full [M, N] */
    OK(ISA_FUSED_MATMUL, 0, (T(F32, (2, 1), 1, 2), T(F32, (1, 2), 3, 4), T(F32, (2, 1), 10, 20)), F32, (2, 2), 13,
       14, 26, 28);
    OK(ISA_FUSED_MATMUL, 0, (T(F32, (2, 1), 1, 2), T(F32, (1, 2), 3, 4), sc(F32, 0.5)), F32, (2, 2), 3.5, 4.5, 6.5,
       8.5);
    OK(ISA_FUSED_MATMUL, 0, (T(F32, (2, 1), 1, 2), T(F32, (1, 2), 3, 4), T(F32, (1, 2), 1, 2)), F32, (2, 2), 4, 6, 7,
       10);
    OK(ISA_FUSED_MATMUL, RELU, (T(F32, (2, 1), 1, 2), T(F32, (1, 2), 3, 4), T(F32, (2, 2), -4, 0, -7, 1)), F32,
       (2, 2), 0, 4, 0, 9);
    /* vectors: a [K] gives [N]; b [K] gives [M]; both give a scalar */
    OK(ISA_FUSED_MATMUL, 0, (T(F32, (2), 1, 2), T(F32, (2, 3), 1, 2, 3, 4, 5, 6), T(F32, (3), 1, 1, 1)), F32, (3),
       10, 13, 16);
    OK(ISA_FUSED_MATMUL, RELU, (T(F32, (3, 2), 1, 2, 3, 4, -5, -6), T(F32, (2), 1, 1), T(F32, (3), 0, -7, 0)), F32,
       (3), 3, 0, 0);
    OK0(ISA_FUSED_MATMUL, TANH, (T(F64, (2), 1, 2), T(F64, (2), 3, -2), sc(F64, 0.25)), F64, tanh(-0.75));
    /* batched: a [2, 1, 2] against a shared b (one gemm), bias [2, 1, 1] per matrix */
    OK(ISA_FUSED_MATMUL, 0, (T(F32, (2, 1, 2), 1, 2, 3, 4), T(F32, (2, 2), 1, 0, 0, 1), T(F32, (2, 1, 1), 10, 20)),
       F32, (2, 1, 2), 11, 12, 23, 24);
    /* batched with b's batch (the per-matrix loop), bias [2] broadcast over both */
    OK(ISA_FUSED_MATMUL, RELU,
       (T(F32, (2, 1, 2), 1, 2, 3, 4), T(F32, (2, 2, 2), 1, 0, 0, 1, -1, 0, 0, -1), T(F32, (2), 0, 1)), F32,
       (2, 1, 2), 1, 3, 0, 0);
    /* batched a [2, 2, 2] with ta: the loop, bias [2, 1, 2] */
    OK(ISA_FUSED_MATMUL, ISA_OPT_TRANS_A,
       (T(F32, (2, 2, 2), 1, 0, 0, 1, 0, 1, 1, 0), T(F32, (2, 2), 1, 2, 3, 4), T(F32, (2, 1, 2), 0, 0, 10, 10)), F32,
       (2, 2, 2), 1, 2, 3, 4, 13, 14, 11, 12);
    /* empty: K = 0 gives act(bias) */
    OK(ISA_FUSED_MATMUL, RELU, (T(F32, (2, 0)), T(F32, (0, 2)), T(F32, (2), -1, 3)), F32, (2, 2), 0, 3, 0, 3);
    OK(ISA_FUSED_MATMUL, RELU, (T(F32, (0, 3)), T(F32, (3, 2)), T(F32, (2), -1, 3)), F32, (0, 2));
}
END_TEST

/* Products big enough to be cut into sgemm tiles (matmul.c), with every
 * transpose, against a naive sum (exact: small integers). */
START_TEST(test_matmul_tiled)
{
    const int64_t M = 40, K = 300, N = 200;
    static double want[40 * 200];
    for (int dt = F32; dt <= F64; dt++)
        for (uint32_t t = 0; t < 4; t++) {
            const bool tA = t & ISA_OPT_TRANS_A, tB = t & ISA_OPT_TRANS_B;
            dev_value a = pattern(dt, 2, tA ? DIMS(K, M) : DIMS(M, K), 1);
            dev_value b = pattern(dt, 2, tB ? DIMS(N, K) : DIMS(K, N), 2), bias = pattern(dt, 1, DIMS(N), 3);
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double sum = elem(&bias, j);
                    for (int64_t k = 0; k < K; k++)
                        sum += elem(&a, tA ? k * M + i : i * K + k) * elem(&b, tB ? j * K + k : k * N + j);
                    want[i * N + j] = act_ref(dt, RELU, sum);
                }
            dev_value o;
            ck_assert_int_eq(C(ISA_FUSED_MATMUL, (int32_t)(t | RELU), &o, a, b, bias), TFVM_OK);
            expect(&o, dt, 2, DIMS(M, N), want, 0, "tiled fused_matmul");
        }
}
END_TEST

START_TEST(test_matmul_errors)
{
    FAILS(ISA_FUSED_MATMUL, 0, (T(F32, (2, 3)), T(F32, (3, 2)), T(F32, (3))), SH,
          "fused_matmul: bias [3] does not broadcast to the product [2, 2]");
    FAILS(ISA_FUSED_MATMUL, 0, (T(F32, (2, 3)), T(F32, (3, 2)), T(F32, (1, 2, 2))), SH,
          "fused_matmul: bias [1, 2, 2] does not broadcast to the product [2, 2]");
    FAILS(ISA_FUSED_MATMUL, 0, (T(F32, (3)), T(F32, (3)), T(F32, (1))), SH,
          "fused_matmul: bias [1] does not broadcast to the product []");
    FAILS(ISA_FUSED_MATMUL, 0, (T(F32, (2, 3)), T(F32, (3, 2)), T(F64, (2))), TY,
          "fused_matmul: dtype mismatch: f32 [2, 3] and bias f64 [2]");
    FAILS(ISA_FUSED_MATMUL, RELU | TANH, (T(F32, (2, 3)), T(F32, (3, 2)), T(F32, (2))), AR,
          "fused_matmul: more than one activation (options 0x14)");
    FAILS(ISA_FUSED_MATMUL, 0, (T(I32, (2, 3)), T(I32, (3, 2)), T(I32, (2))), TY,
          "fused_matmul: not defined on i32 (floats only)");
    FAILS(ISA_FUSED_MATMUL, 0, (T(F32, (2, 3)), T(F64, (3, 2)), T(F32, (2))), TY,
          "fused_matmul: dtype mismatch: f32 [2, 3] and f64 [3, 2]");
    FAILS(ISA_FUSED_MATMUL, ISA_OPT_TRANS_A, (T(F32, (2, 3)), T(F32, (3, 5)), T(F32, (5))), SH,
          "fused_matmul: inner dims differ: [2, 3] (transposed) and [3, 5]");
    FAILS(ISA_FUSED_MATMUL, 0, (T(F32, (2, 2, 3)), T(F32, (3, 3, 2)), T(F32, (2))), SH,
          "fused_matmul: batch dims do not broadcast: [2, 2, 3] and [3, 3, 2]");
    /* the option names, for asm and dis */
    ck_assert_str_eq(isa_opt_name(ISA_FUSED_MATMUL, RELU), "relu");
    ck_assert_str_eq(isa_opt_name(ISA_FUSED_MATMUL, SIG), "sigmoid");
    ck_assert_str_eq(isa_opt_name(ISA_FUSED_MATMUL, TANH), "tanh");
    ck_assert_str_eq(isa_opt_name(ISA_FUSED_MATMUL, ISA_OPT_TRANS_B), "tb");
    ck_assert_str_eq(isa_opt_name(ISA_FUSED_CONV2D, RELU), "relu");
    ck_assert_ptr_null(isa_opt_name(ISA_FUSED_CONV2D, ISA_OPT_TRANS_A));
    ck_assert_ptr_null(isa_opt_name(ISA_FUSED_MATMUL, 4096));
    ck_assert_str_eq(isa_opt_name(ISA_FUSED_CONV2D, ISA_OPT_NHWC_IN), "nhwc_in");
    ck_assert_str_eq(isa_opt_name(ISA_FUSED_CONV2D, ISA_OPT_NHWC_OUT), "nhwc_out");
    ck_assert_ptr_null(isa_opt_name(ISA_FUSED_CONV2D_ADD, ISA_OPT_NHWC_IN));
    ck_assert_ptr_null(isa_opt_name(ISA_FUSED_MATMUL, ISA_OPT_NHWC_OUT));
}
END_TEST

/* ---- Against the unfused instructions on arbitrary floats ----------------------- */
static dev_value randt(uint8_t dt, int rank, const int64_t *dims, unsigned seed)
{
    dev_value v = tf(dt, rank, dims, NULL, 0);
    for (int64_t i = 0; i < v.u.t->count; i++) {
        seed = seed * 1103515245u + 12345u;
        put(dt, v.u.t->data, i, ((double)(seed >> 8 & 0xFFFF) - 32768.0) / 9973.0);
    }
    return v;
}

static dev_value ref(dev_value v) { dev_value_retain(&v); return v; }

/* out must equal want element for element, bit for bit (NaN as NaN); releases both. */
static void same_bits(dev_value *out, dev_value *want, const char *what)
{
    ck_assert_int_eq(out->dtype, want->dtype);
    ck_assert_int_eq(out->is_tensor, want->is_tensor);
    if (out->is_tensor) {
        ck_assert_int_eq(out->u.t->rank, want->u.t->rank);
        for (int i = 0; i < out->u.t->rank; i++)
            ck_assert_int_eq(out->u.t->dims[i], want->u.t->dims[i]);
        if (memcmp(out->u.t->data, want->u.t->data, out->u.t->nbytes) != 0) {
            int64_t first = 0;
            const size_t esz = tfvm_dtype_size((tfvm_dtype)out->dtype);
            while (memcmp((char *)out->u.t->data + first * esz, (char *)want->u.t->data + first * esz, esz) == 0)
                first++;
            ck_abort_msg("%s: results differ, first at element %lld of %lld: %.9g, want %.9g", what, (long long)first,
                         (long long)out->u.t->count, elem(out, first), elem(want, first));
        }
    } else {
        ck_assert_msg(memcmp(&out->u, &want->u, tfvm_dtype_size((tfvm_dtype)out->dtype)) == 0, "%s: results differ",
                      what);
    }
    dev_value_release(out);
    dev_value_release(want);
}

/* op(a, b) through the elementwise kernels; releases a (and b) */
static dev_value ew(isa_op op, dev_value a, dev_value b)
{
    dev_value in[2] = {a, b}, r;
    const tfvm_status st = dev_cpu_elementwise(op, 0, in, &r, &alloc, msg, sizeof msg);
    ck_assert_msg(st == TFVM_OK, "%s: %s", isa_ops[op].name, msg);
    dev_value_release(&a);
    if (isa_ops[op].n_in == 2)
        dev_value_release(&b);
    return r;
}

static dev_value num(uint8_t dt, double v) { return sc(dt, v); }

/* hardsigmoid(x) as the ONNX importer spells it; releases x */
static dev_value unfused_hsig(dev_value x, uint8_t dt)
{
    dev_value t = ew(ISA_MUL, x, num(dt, 1.0 / 6));
    t = ew(ISA_ADD, t, num(dt, 0.5));
    t = ew(ISA_MIN, t, num(dt, 1));
    return ew(ISA_MAX, t, num(dt, 0));
}

/* act(ADD(x, bias)) through the elementwise kernels, in the order of the
 * spelling the optimiser fuses (compiler/opt.c); releases x. */
static dev_value unfused_tail(dev_value x, const dev_value *bias, uint32_t act)
{
    const uint8_t dt = x.dtype;
    dev_value s = ew(ISA_ADD, x, ref(*bias)), t;
    switch (act) {
    case RELU: return ew(ISA_RELU, s, s);
    case SIG: return ew(ISA_SIGMOID, s, s);
    case TANH: return ew(ISA_TANH, s, s);
    case SILU:
        t = ew(ISA_SIGMOID, ref(s), s);
        return ew(ISA_MUL, s, t);
    case GELU:
        t = ew(ISA_DIV, ref(s), num(dt, M_SQRT2));
        t = ew(ISA_ERF, t, t);
        t = ew(ISA_ADD, t, num(dt, 1));
        t = ew(ISA_MUL, s, t);
        return ew(ISA_MUL, t, num(dt, 0.5));
    case GELUN: {
        dev_value h = ew(ISA_MUL, ref(s), num(dt, 0.5));
        t = ew(ISA_POW, ref(s), num(dt, 3));
        t = ew(ISA_MUL, t, num(dt, 0.044715));
        t = ew(ISA_ADD, s, t);
        t = ew(ISA_MUL, t, num(dt, GELU_C));
        t = ew(ISA_TANH, t, t);
        t = ew(ISA_ADD, t, num(dt, 1));
        return ew(ISA_MUL, h, t);
    }
    case HSIG: return unfused_hsig(s, dt);
    case HSWISH:
        t = unfused_hsig(ref(s), dt);
        return ew(ISA_MUL, s, t);
    case RELU6:
        t = ew(ISA_MAX, s, num(dt, 0));
        return ew(ISA_MIN, t, num(dt, 6));
    case GELUT:
        t = ew(ISA_MUL, ref(s), ref(s));
        t = ew(ISA_MUL, ref(s), t);
        t = ew(ISA_MUL, t, num(dt, 0.044715));
        t = ew(ISA_ADD, ref(s), t);
        t = ew(ISA_MUL, t, num(dt, GELU_C));
        t = ew(ISA_TANH, t, t);
        t = ew(ISA_ADD, t, num(dt, 1));
        t = ew(ISA_MUL, s, t);
        return ew(ISA_MUL, t, num(dt, 0.5));
    default: return s;
    }
}

static const uint32_t acts[] = {0, RELU, SIG, TANH, SILU, GELU, HSIG, HSWISH, RELU6, GELUT, GELUN};

/* on every path of act.c the CPU has (AVX-512, AVX2, portable) */
START_TEST(test_same_as_unfused)
{
    for (int isa = DEV_ACT_PORTABLE; isa <= DEV_ACT_AVX512; isa++) {
        if (!dev_act_force((dev_act_isa)isa))
            continue;
        for (int dt = F32; dt <= F64; dt++) {
            for (size_t ai = 0; ai < UT_COUNTOF(acts); ai++) {
                const uint32_t act = acts[ai];
                /* an MLP layer, tb, bias [N] */
                dev_value a = randt(dt, 2, DIMS(5, 7), 1), b = randt(dt, 2, DIMS(6, 7), 2);
                dev_value bias = randt(dt, 1, DIMS(6), 3);
                dev_value m, f;
                ck_assert_int_eq(C(ISA_MATMUL, ISA_OPT_TRANS_B, &m, ref(a), ref(b)), TFVM_OK);
                dev_value want = unfused_tail(m, &bias, act);
                ck_assert_int_eq(C(ISA_FUSED_MATMUL, ISA_OPT_TRANS_B | act, &f, a, b, ref(bias)), TFVM_OK);
                same_bits(&f, &want, "matmul");
                dev_value_release(&bias);
                /* a convolution with groups, stride and padding, bias [O] as [O, 1, 1] */
                dev_value x = randt(dt, 4, DIMS(2, 4, 6, 5), 4), w = randt(dt, 4, DIMS(6, 2, 3, 2), 5);
                dev_value cb = randt(dt, 1, DIMS(6), 6), cbr = tf(dt, 3, DIMS(6, 1, 1), NULL, 0);
                memcpy(cbr.u.t->data, cb.u.t->data, cb.u.t->nbytes);
                ck_assert_int_eq(C(ISA_CONV2D, 0, &m, ref(x), ref(w), IV(2, 1, 1, 0, 0, 1, 1, 1, 2)), TFVM_OK);
                want = unfused_tail(m, &cbr, act);
                ck_assert_int_eq(C(ISA_FUSED_CONV2D, act, &f, x, w, IV(2, 1, 1, 0, 0, 1, 1, 1, 2), cb), TFVM_OK);
                same_bits(&f, &want, "conv2d");
                dev_value_release(&cbr);
            }
        }
    }
    dev_act_force(DEV_ACT_AUTO);
}
END_TEST

/* FUSED_CONV2D_ADD against FUSED_CONV2D, an ADD of r and the activation,
 * bit for bit, on every path of act.c and every kind of convolution kernel
 * (the residual goes in each one's epilogue): grouped products, Winograd
 * (3x3), a 1x1 x as the column matrix, the transposed product (7x7, 64
 * channels), a depthwise layer (its kernel adds the bias, the epilogue r
 * and the activation), im2col panels (a 7x7 stem), the wide grid (5x5). */

/* A convolution case of the tables below: x's dims, w's dims and p. */
typedef struct conv_dims {
    int64_t x[4], w[4], p[9];
} conv_dims;

static const conv_dims res_cases[] = {
    {{2, 4, 6, 5}, {6, 2, 3, 2}, {1, 1, 0, 0, 1, 1, 1, 1, 2}},
    {{1, 8, 10, 9}, {8, 8, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}},
    {{2, 16, 6, 7}, {24, 16, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}},
    {{2, 64, 7, 7}, {64, 64, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}},
    {{1, 64, 7, 7}, {96, 64, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}},
    {{1, 16, 9, 9}, {16, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 16}},
    {{1, 3, 130, 130}, {8, 3, 7, 7}, {2, 2, 3, 3, 3, 3, 1, 1, 1}},
    {{1, 4, 12, 24}, {6, 4, 5, 5}, {1, 1, 2, 2, 2, 2, 1, 1, 1}},
    /* 1x1 in and out (squeeze-excite): the epilogue's rows of one element as one */
    {{3, 144, 1, 1}, {96, 144, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}},
    /* w @ x with K one block of the kernel's and 256 (a block's edge): the result over r */
    {{2, 32, 16, 17}, {40, 32, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}},
    {{1, 256, 9, 9}, {24, 256, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}},
    /* ... and K of two blocks: a new result */
    {{1, 300, 9, 9}, {24, 300, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}},
    /* groups of 16 channels, stride 2: output channels in vectors */
    {{1, 32, 9, 9}, {32, 16, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 2}},
};
/* The cases whose f32 result, with at most a RELU, is written over r when
 * the call holds r alone (conv.c's conv_in_place): Winograd's, the
 * channels kernel's and w @ x's */
static bool res_in_place(size_t ci) { return ci == 1 || ci == 2 || ci == 9 || ci == 10 || ci == 12; }

START_TEST(test_conv_residual)
{
    for (int isa = DEV_ACT_PORTABLE; isa <= DEV_ACT_AVX512; isa++) {
        if (!dev_act_force((dev_act_isa)isa))
            continue;
        dev_cf_force(DEV_ACT_AVX512 - isa); /* (the convolutions' kernels the same instruction set) */
        for (int dt = F32; dt <= F64; dt++)
            for (size_t ci = 0; ci < UT_COUNTOF(res_cases); ci++)
                for (size_t ai = 0; ai < UT_COUNTOF(acts); ai++) {
                    const int64_t *xd = res_cases[ci].x, *wd = res_cases[ci].w, *p = res_cases[ci].p;
                    dev_value x = randt(dt, 4, xd, 51), w = randt(dt, 4, wd, 52), b = randt(dt, 1, wd, 53), t, f;
                    ck_assert_int_eq(C(ISA_FUSED_CONV2D, 0, &t, ref(x), ref(w), ivec(p, 9), ref(b)), TFVM_OK);
                    dev_value r = randt(dt, 4, t.u.t->dims, 54);
                    dev_value want = unfused_tail(t, &r, acts[ai]);
                    char what[64];
                    snprintf(what, sizeof what, "case %zu act %u dtype %d", ci, (unsigned)acts[ai], dt);
                    /* r held here too: a new result, r as it was */
                    const tfvm_tensor *rt = r.u.t;
                    dev_value r0 = randt(dt, 4, r.u.t->dims, 54), f2;
                    ck_assert_int_eq(C(ISA_FUSED_CONV2D_ADD, (int32_t)acts[ai], &f2, ref(x), ref(w), ivec(p, 9),
                                       ref(b), ref(r)),
                                     TFVM_OK);
                    ck_assert_msg(f2.u.t != rt, "%s: over an r held elsewhere", what);
                    ck_assert_msg(memcmp(r.u.t->data, r0.u.t->data, r.u.t->nbytes) == 0, "%s: r changed", what);
                    dev_value want2 = ref(want);
                    same_bits(&f2, &want2, what);
                    /* r held by the call alone: over r where the kernel can */
                    ck_assert_int_eq(C(ISA_FUSED_CONV2D_ADD, (int32_t)acts[ai], &f, x, w, ivec(p, 9), b, r), TFVM_OK);
                    const bool over = dt == F32 && (acts[ai] == 0 || acts[ai] == RELU) && res_in_place(ci);
                    ck_assert_msg((f.u.t == rt) == over, "%s: %s r", what, over ? "not over" : "over");
                    same_bits(&f, &want, what);
                    dev_value_release(&r0);
                }
    }
    dev_act_force(DEV_ACT_AUTO);
    dev_cf_force(0);
    /* r of another shape or dtype */
    FAILS(ISA_FUSED_CONV2D_ADD, 0,
          (T(F32, (1, 2, 4, 4)), T(F32, (2, 2, 1, 1)), IV(1, 1, 0, 0, 0, 0, 1, 1, 1), T(F32, (2)), T(F32, (1, 2, 4, 3))),
          SH, "fused_conv2d_add: r [1, 2, 4, 3] must have the result's shape [1, 2, 4, 4]");
    FAILS(ISA_FUSED_CONV2D_ADD, 0,
          (T(F32, (1, 2, 4, 4)), T(F32, (2, 2, 1, 1)), IV(1, 1, 0, 0, 0, 0, 1, 1, 1), T(F32, (2)), T(F64, (1, 2, 4, 4))),
          TY, "fused_conv2d_add: dtype mismatch: f32 [1, 2, 4, 4] and r f64 [1, 2, 4, 4]");
}
END_TEST

/* f32 MAXPOOL through the depthwise kernels (dwconv.c) on each path and
 * both layouts (planes on the wide grid, channel blocks by strips), against
 * the f64 pool loops (conv.c): max is exact in either, so every element
 * must match, NaN where a window holds one and -0 kept. Windows of 3x3 and
 * 2x3 with strides 1-3, pads, dilation 2, ceil mode, a last block of fewer
 * channels, rows wide enough for several strips; an empty batch (the grid's
 * work per item once divided by its 0 items: SIGFPE). */
/* A pool case: x's dims and p */
typedef struct pool_dims {
    int64_t x[4], p[12];
} pool_dims;

static const pool_dims mp_cases[] = {
    {{1, 3, 112, 112}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0}},
    {{2, 5, 13, 9}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
    {{1, 4, 13, 13}, {3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0}},
    {{1, 2, 17, 20}, {2, 3, 3, 2, 1, 2, 0, 1, 2, 2, 0, 0}},
    {{1, 1, 7, 7}, {7, 7, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0}},
    {{1, 18, 40, 300}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0}},
    {{0, 3, 9, 9}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0}},
};

/* every max pool of mp_cases through f32 and f64, element by element */
static void maxpool_cases(const char *what, int path, int layout)
{
    for (size_t ci = 0; ci < UT_COUNTOF(mp_cases); ci++) {
        dev_value x = randt(F32, 4, mp_cases[ci].x, 41), xd = tf(F64, 4, mp_cases[ci].x, NULL, 0), o, od;
        float *xv = x.u.t->data;
        for (int64_t i = 0; i < x.u.t->count; i += 97)
            xv[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? -0.0f : -INFINITY;
        for (int64_t i = 0; i < x.u.t->count; i++)
            ((double *)xd.u.t->data)[i] = xv[i];
        ck_assert_int_eq(C(ISA_MAXPOOL, 0, &o, x, ivec(mp_cases[ci].p, 12)), TFVM_OK);
        ck_assert_int_eq(C(ISA_MAXPOOL, 0, &od, xd, ivec(mp_cases[ci].p, 12)), TFVM_OK);
        ck_assert_int_eq(o.u.t->count, od.u.t->count);
        for (int64_t i = 0; i < o.u.t->count; i++) {
            const float got = ((float *)o.u.t->data)[i];
            const double want = ((double *)od.u.t->data)[i];
            ck_assert_msg(isnan(want) ? isnan(got) : got == want && !signbit(got) == !signbit(want),
                          "%s, case %zu path %d layout %d: element %lld is %.9g, want %.9g", what, ci, path, layout,
                          (long long)i, (double)got, want);
        }
        dev_value_release(&o);
        dev_value_release(&od);
    }
}

START_TEST(test_maxpool_grid)
{
    dev_pool_force_grid(true); /* the 3x3 stride-2 cases too */
    for (int pl = 0; pl <= 5; pl++) {
        const int path = pl % 3, layout = 1 + pl / 3;
        dev_dw_force(path);
        dev_dw_force_layout(layout);
        maxpool_cases("depthwise grid", path, layout);
    }
    dev_dw_force(0);
    dev_dw_force_layout(0);
    dev_pool_force_grid(false);
}
END_TEST

/* The 3x3 stride-2 max pools of mp_cases (and one below: pads of 2 and 1,
 * ceil mode, rows of 7) on the planes as they lie, on each vector build
 * the CPU has (AVX-512, AVX2; without either the depthwise kernel, which
 * the plan says), against the f64 pool loops. */
START_TEST(test_maxpool_3x3)
{
    const int64_t p[12] = {3, 3, 2, 2, 2, 1, 2, 0, 1, 1, 1, 0}, xs[4] = {2, 3, 9, 7};
    for (int path = 0; path <= 2; path++) {
        dev_pool_force(path);
        const int took = dev_kpath(path);
        if (path && took != path)
            continue; /* the CPU's best was checked as path 0 */
        dev_pool_plan plan;
        dev_pool_plan_make(F32, false, DIMS(1, 64, 112, 112), DIMS(3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0), 56, 56, 1,
                           &plan);
        ck_assert_int_eq(plan.kernel, took < 2 ? DEV_POOL_3X3 : DEV_POOL_GRID);
        ck_assert_int_eq(plan.avx512, took == 0);
        char what[32];
        snprintf(what, sizeof what, "3x3 path %d", took);
        maxpool_cases(what, 0, 0);
        dev_value x = randt(F32, 4, xs, 7), xd = tf(F64, 4, xs, NULL, 0), o, od;
        for (int64_t i = 0; i < x.u.t->count; i++)
            ((double *)xd.u.t->data)[i] = ((float *)x.u.t->data)[i];
        ck_assert_int_eq(C(ISA_MAXPOOL, 0, &o, x, ivec(p, 12)), TFVM_OK);
        ck_assert_int_eq(C(ISA_MAXPOOL, 0, &od, xd, ivec(p, 12)), TFVM_OK);
        ck_assert_int_eq(o.u.t->count, od.u.t->count);
        for (int64_t i = 0; i < o.u.t->count; i++)
            ck_assert_msg(((float *)o.u.t->data)[i] == ((double *)od.u.t->data)[i], "%s, pads 2: element %lld", what,
                          (long long)i);
        dev_value_release(&o);
        dev_value_release(&od);
    }
    dev_pool_force(0);
}
END_TEST

/* AVGPOOL without dilations by rows of outputs (conv.c, DEV_POOL_AVG) on
 * f32 (AVX-512 at unit strides and AVX2 where the CPU has them, and the
 * portable code) and f64, against the plain window loop
 * here in the same dtype: each output sums its window's elements inside x
 * in row-major order and divides by their count, or with
 * count_include_pad by the window's positions inside the padded input, so
 * every element must have the same bits (NaN and infinities where a window
 * holds them). Windows 1x1 to 7x7, strides 1-3, pads, ceil mode, rows of
 * more than the 256 outputs summed at a time, 2 and 1 output rows. */
static const pool_dims ap_cases[] = {
    {{1, 5, 25, 25}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1}}, /* inception's */
    {{1, 5, 25, 25}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
    {{2, 3, 13, 9}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0}},
    {{1, 4, 13, 13}, {3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1}},
    {{1, 2, 17, 20}, {2, 3, 3, 2, 1, 2, 0, 1, 1, 1, 0, 1}},
    {{1, 1, 7, 7}, {7, 7, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0}},
    {{1, 2, 9, 11}, {5, 4, 1, 3, 2, 3, 4, 1, 1, 1, 1, 1}},
    {{1, 3, 4, 600}, {1, 3, 1, 1, 0, 1, 0, 1, 1, 1, 0, 1}},
    {{1, 2, 6, 700}, {3, 5, 2, 3, 1, 2, 1, 2, 1, 1, 1, 0}},
    {{2, 2, 8, 8}, {1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0}},
    {{1, 3, 2, 5}, {2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0, 1}},
    /* unit strides, rows of 16 outputs and a tail: 3x3 and 5x3 windows */
    {{1, 3, 6, 37}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
    {{1, 2, 9, 21}, {5, 3, 1, 1, 2, 0, 1, 2, 1, 1, 0, 1}},
};

#define AVG_REF(T)                                                                                          \
    do {                                                                                                    \
        const T *xs = xv;                                                                                   \
        T *os = ov;                                                                                         \
        for (int64_t pi = 0; pi < N * Cc; pi++)                                                             \
            for (int64_t oh = 0; oh < OH; oh++)                                                             \
                for (int64_t ow = 0; ow < OW; ow++) {                                                       \
                    T acc = 0;                                                                              \
                    int64_t n = 0, ph = 0, pw = 0;                                                          \
                    for (int64_t i = 0; i < p[0]; i++) {                                                    \
                        const int64_t h = oh * p[2] - p[4] + i;                                             \
                        ph += h < H + p[6];                                                                 \
                        for (int64_t j = 0; j < p[1]; j++) {                                                \
                            const int64_t w = ow * p[3] - p[5] + j;                                         \
                            if (i == 0)                                                                     \
                                pw += w < W + p[7];                                                         \
                            if (h >= 0 && h < H && w >= 0 && w < W)                                         \
                                acc += xs[(pi * H + h) * W + w], n++;                                       \
                        }                                                                                   \
                    }                                                                                       \
                    os[(pi * OH + oh) * OW + ow] = acc / (T)(p[11] ? ph * pw : n);                          \
                }                                                                                           \
    } while (0)

START_TEST(test_avgpool_rows)
{
    for (size_t ci = 0; ci < UT_COUNTOF(ap_cases); ci++)
        for (int di = 0; di < 4; di++) {
            const uint8_t dt = di == 3 ? F64 : F32;
            dev_pool_force(di < 3 ? di : 0);
            const int64_t *p = ap_cases[ci].p, N = ap_cases[ci].x[0], Cc = ap_cases[ci].x[1];
            const int64_t H = ap_cases[ci].x[2], W = ap_cases[ci].x[3];
            dev_pool_plan plan;
            dev_value x = randt(dt, 4, ap_cases[ci].x, 43 + (unsigned)ci), o;
            for (int64_t i = 5; i < x.u.t->count; i += 89)
                put(dt, x.u.t->data, i, i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -0.0);
            ck_assert_int_eq(C(ISA_AVGPOOL, 0, &o, ref(x), ivec(p, 12)), TFVM_OK);
            const int64_t OH = o.u.t->dims[2], OW = o.u.t->dims[3];
            dev_pool_plan_make(dt, true, ap_cases[ci].x, p, OH, OW, 1, &plan);
            ck_assert_int_eq(plan.kernel, DEV_POOL_AVG);
            dev_value want = tf(dt, 4, o.u.t->dims, NULL, 0);
            const void *xv = x.u.t->data;
            void *ov = want.u.t->data;
            if (dt == F32)
                AVG_REF(float);
            else
                AVG_REF(double);
            char what[64];
            snprintf(what, sizeof what, "avgpool case %zu %s", ci,
                     (const char *[]){"f32", "f32 AVX2", "f32 portable", "f64"}[di]);
            same_bits(&o, &want, what);
            dev_value_release(&x);
        }
    dev_pool_force(0);
}
END_TEST

/* ---- Recurrent cells (rnncell.c) ---------------------------------------------------- */
/* Columns [k*H, (k+1)*H) of the [NB, G*H] value g, as a new [NB, H] one. */
static dev_value gate_of(const dev_value *g, int64_t k, int64_t NB, int64_t H)
{
    dev_value r = tf(g->dtype, 2, DIMS(NB, H), NULL, 0);
    const int64_t G = g->u.t->dims[1] / H;
    for (int64_t b = 0; b < NB; b++)
        for (int64_t j = 0; j < H; j++)
            put(g->dtype, r.u.t->data, b * H + j, elem(g, b * G * H + k * H + j));
    return r;
}

/* Each cell against the unfused instructions it replaces (ADD of the two
 * products, the gates' columns, SIGMOID, TANH, MUL, SUB, ADD), bit for bit. */
START_TEST(test_rnn_cells_same_as_unfused)
{
    const int64_t NB = 3, H = 37; /* tanh's vector path and its tail */
    for (int dt = F32; dt <= F64; dt++) {
        dev_value xw = randt(dt, 2, DIMS(NB, 4 * H), 31), hr = randt(dt, 2, DIMS(NB, 4 * H), 32);
        dev_value c = randt(dt, 2, DIMS(NB, H), 33), ones = tf(dt, 2, DIMS(NB, H), NULL, 0), cn, hn;
        for (int64_t i = 0; i < NB * H; i++)
            put(dt, ones.u.t->data, i, 1.0);
        /* LSTM, gates i o f c */
        dev_value g = ew(ISA_ADD, ref(xw), ref(hr));
        dev_value gi = gate_of(&g, 0, NB, H), go = gate_of(&g, 1, NB, H), gf = gate_of(&g, 2, NB, H);
        dev_value gc = gate_of(&g, 3, NB, H);
        dev_value si = ew(ISA_SIGMOID, ref(gi), NONE), so = ew(ISA_SIGMOID, ref(go), NONE), sf = ew(ISA_SIGMOID, ref(gf), NONE);
        dev_value tc = ew(ISA_TANH, ref(gc), NONE), a = ew(ISA_MUL, ref(sf), ref(c)), b = ew(ISA_MUL, ref(si), ref(tc));
        dev_value want_c = ew(ISA_ADD, ref(a), ref(b)), tn = ew(ISA_TANH, ref(want_c), NONE), want_h = ew(ISA_MUL, ref(so), ref(tn));
        ck_assert_int_eq(C(ISA_LSTM_CELL_C, 0, &cn, ref(xw), ref(hr), ref(c)), TFVM_OK);
        ck_assert_int_eq(C(ISA_LSTM_CELL_H, 0, &hn, ref(xw), ref(hr), ref(cn)), TFVM_OK);
        same_bits(&cn, &want_c, "lstm_cell_c");
        same_bits(&hn, &want_h, "lstm_cell_h");
        dev_value *tmp[] = {&g, &gi, &go, &gf, &gc, &si, &so, &sf, &tc, &a, &b, &tn};
        for (size_t i = 0; i < UT_COUNTOF(tmp); i++)
            dev_value_release(tmp[i]);
        /* GRU (linear before reset), gates z r h of the first 3H columns */
        dev_value gx = gate_of(&xw, 0, NB, 3 * H), gh = gate_of(&hr, 0, NB, 3 * H);
        dev_value xz = gate_of(&gx, 0, NB, H), xr = gate_of(&gx, 1, NB, H), xh = gate_of(&gx, 2, NB, H);
        dev_value hz = gate_of(&gh, 0, NB, H), hrr = gate_of(&gh, 1, NB, H), hh = gate_of(&gh, 2, NB, H);
        dev_value zs = ew(ISA_ADD, ref(xz), ref(hz)), rs = ew(ISA_ADD, ref(xr), ref(hrr));
        dev_value z = ew(ISA_SIGMOID, ref(zs), NONE), r = ew(ISA_SIGMOID, ref(rs), NONE), rh = ew(ISA_MUL, ref(r), ref(hh));
        dev_value ns = ew(ISA_ADD, ref(xh), ref(rh)), n = ew(ISA_TANH, ref(ns), NONE), omz = ew(ISA_SUB, ref(ones), ref(z));
        dev_value ga = ew(ISA_MUL, ref(omz), ref(n)), gb = ew(ISA_MUL, ref(z), ref(c)), want = ew(ISA_ADD, ref(ga), ref(gb)), got;
        ck_assert_int_eq(C(ISA_GRU_CELL, 0, &got, ref(gx), ref(gh), ref(c)), TFVM_OK);
        same_bits(&got, &want, "gru_cell");
        dev_value *tmp2[] = {&gx, &gh, &xz, &xr, &xh, &hz, &hrr, &hh, &zs, &rs, &z, &r, &rh, &ns, &n, &omz, &ga, &gb,
                             &xw, &hr, &c, &ones};
        for (size_t i = 0; i < UT_COUNTOF(tmp2); i++)
            dev_value_release(tmp2[i]);
    }
}
END_TEST

/* h @ r^T + rb row by row as the steps define it: f32 with FMA in order
 * within the blocks of H that sgemm.c cuts (even pieces of at most 256), the
 * blocks' sums added in order; f64 in order; then the bias. */
static dev_value step_hr(const dev_value *h, const dev_value *r, const dev_value *rb, int64_t NB, int64_t N, int64_t K)
{
    dev_value hr = tf(h->dtype, 2, DIMS(NB, N), NULL, 0);
    const int64_t step = (K + (K + 255) / 256 - 1) / ((K + 255) / 256);
    for (int64_t b = 0; b < NB; b++)
        for (int64_t j = 0; j < N; j++) {
            double sum;
            if (h->dtype == F32) {
                const float *x = (const float *)h->u.t->data + b * K, *w = (const float *)r->u.t->data + j * K;
                float tot = 0;
                for (int64_t pc = 0; pc < K; pc += step) {
                    float acc = 0;
                    for (int64_t p = pc; p < pc + step && p < K; p++)
                        acc = fmaf(x[p], w[p], acc);
                    tot = pc == 0 ? acc : tot + acc;
                }
                sum = (float)(tot + ((const float *)rb->u.t->data)[j]);
            } else {
                const double *x = (const double *)h->u.t->data + b * K, *w = (const double *)r->u.t->data + j * K;
                double acc = 0;
                for (int64_t p = 0; p < K; p++)
                    acc += x[p] * w[p];
                sum = acc + ((const double *)rb->u.t->data)[j];
            }
            put(h->dtype, hr.u.t->data, b * N + j, sum);
        }
    return hr;
}

/* Row t of xw [T, NB, n] as a new [NB, n] value. */
static dev_value rows_at(const dev_value *xw, int64_t t)
{
    const int64_t NB = xw->u.t->dims[1], n = xw->u.t->dims[2];
    dev_value r = tf(xw->dtype, 2, DIMS(NB, n), NULL, 0);
    memcpy(r.u.t->data, (const char *)xw->u.t->data + (size_t)(t * NB * n) * tfvm_dtype_size((tfvm_dtype)xw->dtype),
           r.u.t->nbytes);
    return r;
}

/* LSTM_STEP and GRU_STEP against the product as they define it and the
 * cells, bit for bit: one row (the row product) and several (the packed
 * gemm), a hidden size whose 4H columns take every chunk size of the
 * packing, one of more than 256 (two blocks of the sum), and again on the
 * weights' kept packed form; at an even step and at an odd one (whose
 * product runs its blocks last first). Exact on f32 where the products use
 * FMA. */
START_TEST(test_rnn_steps_same_as_cells)
{
    static const struct {
        int64_t NB, H;
    } cases[] = {{1, 37}, {3, 37}, {1, 130}, {2, 5}, {1, 300}, {3, 300}};
    const bool fma_paths = dev_sg_best() != DEV_SG_PORTABLE;
    for (size_t ci = 0; ci < UT_COUNTOF(cases); ci++)
        for (int dt = F32; dt <= F64; dt++)
            for (int lstm = 0; lstm < 2; lstm++)
                for (int64_t t = 1; t <= 2; t++) {
                    const int64_t NB = cases[ci].NB, H = cases[ci].H, G = lstm ? 4 : 3, T = 3;
                    char what[64];
                    snprintf(what, sizeof what, "%s B=%lld H=%lld t=%lld %s", lstm ? "lstm_step" : "gru_step",
                             (long long)NB, (long long)H, (long long)t, dt == F32 ? "f32" : "f64");
                    dev_value xw = randt(dt, 3, DIMS(T, NB, G * H), 41), r = randt(dt, 2, DIMS(G * H, H), 42);
                    dev_value rb = randt(dt, 1, DIMS(G * H), 43), h = randt(dt, 2, DIMS(NB, H), 44);
                    dev_value c = randt(dt, 2, DIMS(NB, H), 45);
                    for (int64_t i = 0; i < r.u.t->count; i++) /* weights of a trained layer's size */
                        put(dt, r.u.t->data, i, elem(&r, i) / 16);
                    dev_value hr = step_hr(&h, &r, &rb, NB, G * H, H), x = rows_at(&xw, t), want, s;
                    if (lstm) {
                        dev_value cn, hn;
                        ck_assert_int_eq(C(ISA_LSTM_CELL_C, 0, &cn, ref(x), ref(hr), ref(c)), TFVM_OK);
                        ck_assert_int_eq(C(ISA_LSTM_CELL_H, 0, &hn, ref(x), ref(hr), ref(cn)), TFVM_OK);
                        want = tf(dt, 3, DIMS(2, NB, H), NULL, 0);
                        s = tf(dt, 3, DIMS(2, NB, H), NULL, 0);
                        const size_t half = hn.u.t->nbytes;
                        memcpy(want.u.t->data, hn.u.t->data, half);
                        memcpy((char *)want.u.t->data + half, cn.u.t->data, half);
                        memcpy(s.u.t->data, h.u.t->data, half);
                        memcpy((char *)s.u.t->data + half, c.u.t->data, half);
                        dev_value_release(&cn);
                        dev_value_release(&hn);
                    } else {
                        ck_assert_int_eq(C(ISA_GRU_CELL, 0, &want, ref(x), ref(hr), ref(h)), TFVM_OK);
                        s = ref(h);
                    }
                    for (int again = 0; again < 2; again++) { /* the second time from r's kept packed form */
                        dev_value got, w2 = ref(want);
                        ck_assert_int_eq(C(lstm ? ISA_LSTM_STEP : ISA_GRU_STEP, 0, &got, ref(xw), sc64(t), ref(s),
                                           ref(r), ref(rb)),
                                         TFVM_OK);
                        if (fma_paths || dt == F64) {
                            same_bits(&got, &w2, what);
                        } else {
                            for (int64_t i = 0; i < got.u.t->count; i++)
                                ck_assert_msg(fabs(elem(&got, i) - elem(&w2, i)) <= 1e-5, "%s: element %lld", what,
                                              (long long)i);
                            dev_value_release(&got);
                            dev_value_release(&w2);
                        }
                    }
                    dev_value *tmp[] = {&xw, &r, &rb, &h, &c, &hr, &x, &want, &s};
                    for (size_t i = 0; i < UT_COUNTOF(tmp); i++)
                        dev_value_release(tmp[i]);
                }
}
END_TEST

START_TEST(test_rnn_cells_errors)
{
    FAILS(ISA_LSTM_CELL_C, 0, (T(F32, (1, 8)), T(F32, (1, 8)), T(F32, (1, 3))), SH,
          "lstm_cell_c: gates [1, 8] must be [1, 12] (4 gates of the state [1, 3])");
    FAILS(ISA_LSTM_CELL_H, 0, (T(F32, (1, 8)), T(F32, (2, 8)), T(F32, (1, 2))), SH,
          "lstm_cell_h: gates [2, 8] must be [1, 8] (4 gates of the state [1, 2])");
    FAILS(ISA_GRU_CELL, 0, (T(F32, (1, 8)), T(F32, (1, 8)), T(F32, (1, 2))), SH,
          "gru_cell: gates [1, 8] must be [1, 6] (3 gates of the state [1, 2])");
    FAILS(ISA_GRU_CELL, 0, (T(F32, (6)), T(F32, (6)), T(F32, (2))), SH,
          "gru_cell: the state must be [B, H] (rank 2), got [2]");
    FAILS(ISA_GRU_CELL, 0, (T(F32, (1, 6)), T(F64, (1, 6)), T(F32, (1, 2))), TY,
          "gru_cell: dtype mismatch: f32 [1, 6] and f64 [1, 6]");
    FAILS(ISA_LSTM_CELL_C, 0, (T(I32, (1, 4)), T(I32, (1, 4)), T(I32, (1, 1))), TY,
          "lstm_cell_c: not defined on i32 (floats only)");
    /* the steps: xw [T, B, G*H], t, s, r [G*H, H], rb [G*H] */
    FAILS(ISA_LSTM_STEP, 0, (T(F32, (3, 1, 8)), sc64(3), T(F32, (2, 1, 2)), T(F32, (8, 2)), T(F32, (8))), SH,
          "lstm_step: step 3 out of range for input gates [3, 1, 8]");
    FAILS(ISA_LSTM_STEP, 0, (T(F32, (3, 1, 8)), sc64(-1), T(F32, (2, 1, 2)), T(F32, (8, 2)), T(F32, (8))), SH,
          "lstm_step: step -1 out of range for input gates [3, 1, 8]");
    FAILS(ISA_LSTM_STEP, 0, (T(F32, (3, 1, 8)), sc64(0), T(F32, (1, 2)), T(F32, (8, 2)), T(F32, (8))), SH,
          "lstm_step: the state must be [2, B, H] (h and c), got [1, 2]");
    FAILS(ISA_GRU_STEP, 0, (T(F32, (3, 1, 6)), sc64(0), T(F32, (2, 1, 2)), T(F32, (6, 2)), T(F32, (6))), SH,
          "gru_step: the state must be [B, H], got [2, 1, 2]");
    FAILS(ISA_GRU_STEP, 0, (T(F32, (3, 1, 8)), sc64(0), T(F32, (1, 2)), T(F32, (6, 2)), T(F32, (6))), SH,
          "gru_step: input gates [3, 1, 8] must be [T, 1, 6] (3 gates of the state [1, 2])");
    FAILS(ISA_GRU_STEP, 0, (T(F32, (3, 1, 6)), sc64(0), T(F32, (1, 2)), T(F32, (6, 3)), T(F32, (6))), SH,
          "gru_step: weights [6, 3] must be [6, 2] (3 gates of the state [1, 2])");
    FAILS(ISA_GRU_STEP, 0, (T(F32, (3, 1, 6)), sc64(0), T(F32, (1, 2)), T(F32, (6, 2)), T(F32, (3))), SH,
          "gru_step: bias [3] must be [6] (3 gates of the state [1, 2])");
    FAILS(ISA_GRU_STEP, 0, (T(F32, (3, 1, 6)), sc64(0), T(F32, (1, 2)), T(F64, (6, 2)), T(F32, (6))), TY,
          "gru_step: dtype mismatch: f32 [3, 1, 6] and f64 [6, 2]");
    FAILS(ISA_GRU_STEP, 0, (T(F32, (3, 1, 6)), T(F32, (1), 0), T(F32, (1, 2)), T(F32, (6, 2)), T(F32, (6))), TY,
          "gru_step: the step must be an integer scalar, got f32 [1]");
}
END_TEST

/* ---- FUSED_CONV2D ------------------------------------------------------------------ */
/* Naive convolution of integer-valued operands, then bias and act. */
static void conv_ref(const dev_value *x, const dev_value *w, const int64_t *p, const double *bias, uint32_t act,
                     double *out, int64_t *od)
{
    const int64_t *xd = x->u.t->dims, *wd = w->u.t->dims;
    const int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], O = wd[0], Cg = wd[1], KH = wd[2], KW = wd[3];
    const int64_t G = p[8], Og = O / G;
    const int64_t OH = (H + p[2] + p[4] - p[6] * (KH - 1) - 1) / p[0] + 1;
    const int64_t OW = (W + p[3] + p[5] - p[7] * (KW - 1) - 1) / p[1] + 1;
    od[0] = N, od[1] = O, od[2] = OH, od[3] = OW;
    int64_t q = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double s = 0;
                    const int64_t g = o / Og;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t i = 0; i < KH; i++)
                            for (int64_t j = 0; j < KW; j++) {
                                const int64_t h = oh * p[0] - p[2] + i * p[6], ww = ow * p[1] - p[3] + j * p[7];
                                if (h < 0 || h >= H || ww < 0 || ww >= W)
                                    continue;
                                s += elem(x, ((n * C + g * Cg + c) * H + h) * W + ww) *
                                     elem(w, ((o * Cg + c) * KH + i) * KW + j);
                            }
                    out[q++] = act_ref(x->dtype, act, s + bias[o]);
                }
    (void)C;
}

static void conv_case(uint8_t dt, uint32_t act, const int64_t *xd, const int64_t *wd, const int64_t *p)
{
    /* integers: CONV2D itself (the same paths; FUSED_CONV2D takes floats only) */
    const bool fused = dev_kfloat(dt);
    dev_value x = pattern(dt, 4, xd, 1), w = pattern(dt, 4, wd, 2), bias = tf(dt, 1, wd, NULL, 0);
    double bv[512];
    static double want[32768];
    const int64_t OH = (xd[2] + p[2] + p[4] - p[6] * (wd[2] - 1) - 1) / p[0] + 1;
    const int64_t OW = (xd[3] + p[3] + p[5] - p[7] * (wd[3] - 1) - 1) / p[1] + 1;
    ck_assert_msg(xd[0] * wd[0] * OH * OW <= (int64_t)UT_COUNTOF(want) && wd[0] <= (int64_t)UT_COUNTOF(bv),
                  "conv_case: a case bigger than the reference's buffers");
    for (int64_t o = 0; o < wd[0]; o++) {
        bv[o] = fused ? (double)(o % 5) - 2 : 0;
        put(dt, bias.u.t->data, o, bv[o]);
    }
    int64_t od[4];
    conv_ref(&x, &w, p, bv, act, want, od);
    dev_value o;
    tfvm_status st;
    if (fused) {
        st = C(ISA_FUSED_CONV2D, (int32_t)act, &o, x, w, ivec(p, 9), bias);
    } else {
        dev_value_release(&bias);
        st = C(ISA_CONV2D, 0, &o, x, w, ivec(p, 9));
    }
    ck_assert_msg(st == TFVM_OK, "%s", msg);
    expect(&o, dt, 4, od, want, 0, fused ? "fused_conv2d" : "conv2d");
}

START_TEST(test_conv_exact)
{
    for (int dt = F32; dt <= F64; dt++)
        for (size_t ai = 0; ai < UT_COUNTOF(acts); ai++) {
            /* 3x3 pad 1 */
            conv_case(dt, acts[ai], DIMS(2, 3, 5, 4), DIMS(4, 3, 3, 3), DIMS(1, 1, 1, 1, 1, 1, 1, 1, 1));
            /* 1x1 direct */
            conv_case(dt, acts[ai], DIMS(2, 3, 4, 4), DIMS(5, 3, 1, 1), DIMS(1, 1, 0, 0, 0, 0, 1, 1, 1));
            /* a depthwise 1x1 (f32: each plane scaled) */
            conv_case(dt, acts[ai], DIMS(2, 5, 4, 7), DIMS(5, 1, 1, 1), DIMS(1, 1, 0, 0, 0, 0, 1, 1, 5));
            /* unit strides on a wide enough x: the padded wide grid (conv.c), with
             * uneven pads, groups, a 5x5 window */
            conv_case(dt, acts[ai], DIMS(2, 3, 9, 10), DIMS(4, 3, 3, 3), DIMS(1, 1, 1, 1, 1, 1, 1, 1, 1));
            conv_case(dt, acts[ai], DIMS(1, 4, 6, 10), DIMS(6, 2, 3, 3), DIMS(1, 1, 0, 2, 1, 0, 1, 1, 2));
            conv_case(dt, acts[ai], DIMS(1, 2, 7, 16), DIMS(3, 2, 5, 5), DIMS(1, 1, 2, 2, 2, 2, 1, 1, 1));
            /* groups, stride 2, dilation 2, uneven pads */
            conv_case(dt, acts[ai], DIMS(1, 4, 7, 6), DIMS(6, 2, 2, 3), DIMS(2, 1, 1, 0, 2, 1, 2, 1, 2));
            /* more channels: odd and even output sizes, uneven pads, 12 images */
            conv_case(dt, acts[ai], DIMS(2, 8, 9, 10), DIMS(8, 8, 3, 3), DIMS(1, 1, 1, 1, 1, 1, 1, 1, 1));
            conv_case(dt, acts[ai], DIMS(1, 9, 7, 6), DIMS(10, 9, 3, 3), DIMS(1, 1, 0, 2, 1, 0, 1, 1, 1));
            conv_case(dt, acts[ai], DIMS(12, 8, 6, 6), DIMS(8, 8, 3, 3), DIMS(1, 1, 0, 0, 0, 0, 1, 1, 1));
            /* column matrices past convplan.c's CONV_PANEL_FLOATS: im2col by panels of
             * output rows (a resnet-like 7x7 stride-2 stem; two images of two
             * groups, the last panel shorter) */
            conv_case(dt, acts[ai], DIMS(1, 3, 61, 61), DIMS(2, 3, 7, 7), DIMS(2, 2, 3, 3, 3, 3, 1, 1, 1));
            conv_case(dt, acts[ai], DIMS(2, 4, 73, 73), DIMS(4, 2, 7, 7), DIMS(2, 2, 3, 3, 3, 3, 1, 1, 2));
            /* stride 2 on rows wide enough for im2col's vector shuffles (a
             * 3x3 and a 7x7 stem, pads 1 and 3; a row whose last pair is
             * cut by the edge; i32 below takes the same macro scalar) */
            conv_case(dt, acts[ai], DIMS(1, 3, 11, 70), DIMS(4, 3, 3, 3), DIMS(2, 2, 1, 1, 1, 1, 1, 1, 1));
            conv_case(dt, acts[ai], DIMS(1, 3, 20, 51), DIMS(2, 3, 7, 7), DIMS(2, 2, 3, 3, 3, 3, 1, 1, 1));
            /* (f32 with 3 channels takes fewch.c: these keep im2col's shuffles and panels on f32) */
            conv_case(dt, acts[ai], DIMS(1, 5, 11, 70), DIMS(4, 5, 3, 3), DIMS(2, 2, 1, 1, 1, 1, 1, 1, 1));
            conv_case(dt, acts[ai], DIMS(1, 5, 61, 61), DIMS(2, 5, 7, 7), DIMS(2, 2, 3, 3, 3, 3, 1, 1, 1));
            /* weights past 2 MiB: panels at least as wide as the layer has
             * output channels (10 rows of 10 for 96), dilated */
            if (ai == 0)
                conv_case(dt, acts[ai], DIMS(1, 600, 10, 10), DIMS(96, 600, 3, 3), DIMS(1, 1, 2, 2, 2, 2, 2, 2, 1));
            conv_case(dt, acts[ai], DIMS(1, 2, 5, 67), DIMS(3, 2, 1, 3), DIMS(1, 2, 0, 0, 0, 0, 1, 1, 1));
            /* few output positions, many channels: the transposed product
             * (7x7 outputs at stride 2; 256 channels on 7x7, where
             * Winograd's weights would outweigh its tiles) */
            conv_case(dt, acts[ai], DIMS(1, 8, 13, 13), DIMS(64, 8, 3, 3), DIMS(2, 2, 1, 1, 1, 1, 1, 1, 1));
            conv_case(dt, acts[ai], DIMS(1, 256, 7, 7), DIMS(256, 256, 3, 3), DIMS(1, 1, 1, 1, 1, 1, 1, 1, 1));
            /* at stride 2 up to 256 positions: 14x14 (rows in panels of
             * 7 and 8), two images of 9x9 from uneven pads */
            conv_case(dt, acts[ai], DIMS(1, 8, 27, 27), DIMS(64, 8, 3, 3), DIMS(2, 2, 1, 1, 1, 1, 1, 1, 1));
            conv_case(dt, acts[ai], DIMS(2, 8, 18, 17), DIMS(64, 8, 3, 3), DIMS(2, 2, 1, 1, 0, 1, 1, 1, 1));
            /* one image of a 1x1 window there: its rows packed straight
             * from x, the bias of each column and the activation in the
             * product's blocks */
            conv_case(dt, acts[ai], DIMS(1, 64, 7, 7), DIMS(96, 64, 1, 1), DIMS(1, 1, 0, 0, 0, 0, 1, 1, 1));
            /* no input channels on the wide grid: act(bias) */
            conv_case(dt, acts[ai], DIMS(1, 0, 4, 8), DIMS(2, 0, 3, 3), DIMS(1, 1, 1, 1, 1, 1, 1, 1, 1));
        }
    /* the same paths on integers (wrapping gemm loop), through CONV2D */
    for (int dt = I32; dt <= I64; dt++) {
        conv_case(dt, 0, DIMS(2, 3, 9, 10), DIMS(4, 3, 3, 3), DIMS(1, 1, 1, 1, 1, 1, 1, 1, 1));
        conv_case(dt, 0, DIMS(1, 4, 6, 10), DIMS(6, 2, 3, 3), DIMS(1, 1, 0, 2, 1, 0, 1, 1, 2));
        conv_case(dt, 0, DIMS(1, 4, 7, 6), DIMS(6, 2, 2, 3), DIMS(2, 1, 1, 0, 2, 1, 2, 1, 2));
        conv_case(dt, 0, DIMS(2, 3, 4, 4), DIMS(5, 3, 1, 1), DIMS(1, 1, 0, 0, 0, 0, 1, 1, 1));
        conv_case(dt, 0, DIMS(1, 3, 11, 70), DIMS(4, 3, 3, 3), DIMS(2, 2, 1, 1, 1, 1, 1, 1, 1));
    }
}
END_TEST

/* ---- Channels last (nhwc_in, nhwc_out) ---------------------------------------------------- */
/* v [N, C, H, W] as [N, H, W, C] (to_last) or back; v released */
static dev_value relayout(dev_value v, bool to_last)
{
    const tfvm_tensor *t = v.u.t;
    const int64_t N = t->dims[0], outer = to_last ? t->dims[1] : t->dims[1] * t->dims[2];
    const int64_t inner = to_last ? t->dims[2] * t->dims[3] : t->dims[3];
    const int64_t d[4] = {N, to_last ? t->dims[2] : t->dims[3], to_last ? t->dims[3] : t->dims[1],
                          to_last ? t->dims[1] : t->dims[2]};
    dev_value o = tf(v.dtype, 4, d, NULL, 0);
    const size_t esz = tfvm_dtype_size((tfvm_dtype)v.dtype);
    for (int64_t n = 0; n < N; n++)
        for (int64_t a = 0; a < outer; a++)
            for (int64_t b = 0; b < inner; b++)
                memcpy((char *)o.u.t->data + ((n * inner + b) * outer + a) * esz,
                       (const char *)t->data + ((n * outer + a) * inner + b) * esz, esz);
    dev_value_release(&v);
    return o;
}

/* FUSED_CONV2D with x and/or the result channels last: the bits of the
 * NCHW instruction on the transposed x, transposed. A 1x1 layer's result
 * straight from its product (one image split, several in parallel), a
 * depthwise layer reading its channel blocks from x (strides 1 and 2, a
 * last block of 8 channels), each activation; and what no kernel reads or
 * writes that way (a 3x3 or grouped layer, both options, f64) through NCHW. */
START_TEST(test_conv_channels_last)
{
    static const struct {
        int64_t x[4], w[4], p[9];
        uint32_t lay;
        uint8_t dt;
    } cases[] = {
        {{1, 24, 14, 14}, {72, 24, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}, ISA_OPT_NHWC_OUT, F32},
        {{3, 16, 9, 7}, {40, 16, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}, ISA_OPT_NHWC_OUT, F32},
        {{1, 40, 15, 15}, {40, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 40}, ISA_OPT_NHWC_IN, F32},
        {{2, 72, 14, 13}, {72, 1, 5, 5}, {2, 2, 2, 2, 2, 2, 1, 1, 72}, ISA_OPT_NHWC_IN, F32},
        {{1, 8, 9, 9}, {16, 8, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, ISA_OPT_NHWC_OUT, F32},
        /* a 3x3 layer the transposed product takes (7x7, 320 channels): not the 1x1 kernel */
        {{1, 320, 7, 7}, {320, 320, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, ISA_OPT_NHWC_OUT, F32},
        {{1, 8, 9, 9}, {16, 4, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 2}, ISA_OPT_NHWC_IN, F32},
        {{2, 8, 6, 6}, {8, 8, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}, ISA_OPT_NHWC_IN | ISA_OPT_NHWC_OUT, F32},
        {{1, 16, 7, 7}, {32, 16, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}, ISA_OPT_NHWC_OUT, F64},
        {{1, 16, 7, 7}, {16, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 16}, ISA_OPT_NHWC_IN, F64},
    };
    /* every depthwise path: the channel blocks' copy from x differs by its width */
    for (int path = 0; path < 3; path++) {
        dev_dw_force(path);
        for (size_t ci = 0; ci < UT_COUNTOF(cases); ci++)
            for (size_t ai = 0; ai < UT_COUNTOF(acts); ai++) {
                    const uint8_t dt = cases[ci].dt;
                const uint32_t lay = cases[ci].lay, act = acts[ai];
                dev_value x = randt(dt, 4, cases[ci].x, 61), w = randt(dt, 4, cases[ci].w, 62);
                dev_value b = randt(dt, 1, cases[ci].w, 63), want, got;
                ck_assert_int_eq(C(ISA_FUSED_CONV2D, (int32_t)act, &want, ref(x), ref(w), ivec(cases[ci].p, 9), ref(b)),
                                 TFVM_OK);
                if (lay & ISA_OPT_NHWC_OUT)
                    want = relayout(want, true);
                if (lay & ISA_OPT_NHWC_IN)
                    x = relayout(x, true);
                ck_assert_msg(C(ISA_FUSED_CONV2D, (int32_t)(act | lay), &got, x, w, ivec(cases[ci].p, 9), b) == TFVM_OK,
                              "%s", msg);
                char what[64];
                snprintf(what, sizeof what, "path %d case %zu act %u", path, ci, (unsigned)act);
                same_bits(&got, &want, what);
            }
    }
    dev_dw_force(0);
    /* the kernels the plan names: the product for a 1x1 result channels
     * last, channel blocks for a depthwise x */
    static const struct {
        uint32_t lay;
        int64_t x[4], w[4], p[9];
        int chans; /* the result's channel dim */
        dev_conv_kernel took;
    } kernels[] = {
        {ISA_OPT_NHWC_OUT, {1, 24, 14, 14}, {72, 24, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}, 3, DEV_CONV_TPROD},
        {ISA_OPT_NHWC_IN, {1, 14, 14, 72}, {72, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 72}, 1, DEV_CONV_DEPTHWISE},
    };
    dev_value out;
    for (size_t ki = 0; ki < UT_COUNTOF(kernels); ki++) {
        dev_conv_count(true);
        ck_assert_int_eq(C(ISA_FUSED_CONV2D, (int32_t)kernels[ki].lay, &out, randt(F32, 4, kernels[ki].x, 1),
                           randt(F32, 4, kernels[ki].w, 2), ivec(kernels[ki].p, 9), randt(F32, 1, DIMS(72), 3)),
                         TFVM_OK);
        ck_assert_int_eq(out.u.t->dims[kernels[ki].chans], 72);
        dev_value_release(&out);
        ck_assert_uint_eq(dev_conv_counted(kernels[ki].took), 1);
        dev_conv_count(false);
    }
    /* x's channels are its last dim: the message names them */
    ck_assert_int_eq(C(ISA_FUSED_CONV2D, ISA_OPT_NHWC_IN, &out, randt(F32, 4, DIMS(1, 72, 14, 14), 1),
                       randt(F32, 4, DIMS(72, 1, 3, 3), 2), IV(1, 1, 1, 1, 1, 1, 1, 1, 72), randt(F32, 1, DIMS(72), 3)),
                     TFVM_ERR_SHAPE);
    ck_assert_str_eq(msg, "fused_conv2d: x [1, 72, 14, 14] has 14 channels, w [72, 1, 3, 3] takes 72 (groups 72)");
}
END_TEST

/* Few output positions: the transposed product stacks the positions of
 * several images in one product (convplan.c, TPROD_ROWS): 11 images of 5x5
 * outputs make two stacks (6 and 5 images), through a 1x1 convolution (x
 * transposed) and a 3x3 stride-2 one (windows as rows); images of 1x1 (x
 * and the result as they lie). Exact on small integers, and on arbitrary
 * floats every image of several positions gets the bits it gets alone. */
START_TEST(test_conv_tprod_stacks)
{
    static const conv_dims cases[] = {
        {{11, 64, 5, 5}, {64, 64, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}},
        {{11, 8, 9, 9}, {64, 8, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 1}},
        /* 1x1 in and out (squeeze-excite): x and the result as they lie */
        {{5, 144, 1, 1}, {480, 144, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}},
    };
    for (size_t ci = 0; ci < UT_COUNTOF(cases); ci++) {
        const int64_t *xd = cases[ci].x, one[4] = {1, xd[1], xd[2], xd[3]};
        conv_case(F32, RELU, xd, cases[ci].w, cases[ci].p);
        dev_value x = randt(F32, 4, xd, 31), w = randt(F32, 4, cases[ci].w, 32);
        dev_value bias = randt(F32, 1, cases[ci].w, 33), all;
        ck_assert_int_eq(C(ISA_FUSED_CONV2D, RELU, &all, ref(x), ref(w), ivec(cases[ci].p, 9), ref(bias)), TFVM_OK);
        const int64_t in = xd[1] * xd[2] * xd[3], out = all.u.t->count / xd[0];
        /* (an image of one position alone is a product of one row: the dot
         * products, which sum in another order than the stack's tiles) */
        for (int64_t n = 0; n < xd[0] && out > cases[ci].w[0]; n++) {
            dev_value x1 = tf(F32, 4, one, NULL, 0), o1;
            memcpy(x1.u.t->data, (const float *)x.u.t->data + n * in, (size_t)in * sizeof(float));
            ck_assert_int_eq(C(ISA_FUSED_CONV2D, RELU, &o1, x1, ref(w), ivec(cases[ci].p, 9), ref(bias)), TFVM_OK);
            ck_assert_int_eq(o1.u.t->count, out);
            ck_assert_msg(memcmp(o1.u.t->data, (const float *)all.u.t->data + n * out, (size_t)out * sizeof(float)) == 0,
                          "case %zu: image %lld differs from its result alone", ci, (long long)n);
            dev_value_release(&o1);
        }
        dev_value_release(&all);
        dev_value_release(&x);
        dev_value_release(&w);
        dev_value_release(&bias);
    }
    /* a stack's rows stay on our own kernel: 2^31 multiply-adds at most */
    ck_assert_int_eq(dev_kmm_own_rows(512, 4608), 910);
    ck_assert_int_eq(dev_kmm_own_rows(64, 64), 524288);
    ck_assert_int_eq(dev_kmm_own_rows(INT64_C(1) << 20, INT64_C(1) << 20), 1);
    ck_assert_int_eq(dev_kmm_own_rows(0, 0), INT32_MAX); /* (rows are int-sized) */
    ck_assert_int_eq(dev_kmm_who(F32, false, false, 197, 3072, 768, 3072), DEV_KMM_OWN);
    ck_assert_int_eq(dev_kmm_who(F32, false, false, 2048, 2048, 513, 2048), DEV_KMM_BLAS);
    /* ... and their products at most 2^28 (resnet's 512-channel 3x3 on
     * 7x7 at batch 8: 2 images a product) */
    const int64_t st_p[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    dev_conv_shape st = {.dtype = F32, .N = 8, .C = 512, .H = 7, .W = 7, .O = 512, .Cg = 512, .KH = 3, .KW = 3,
                         .OH = 7, .OW = 7};
    memcpy(st.p, st_p, sizeof st.p);
    dev_conv_plan plan;
    dev_conv_plan_make(&st, 1, &plan);
    ck_assert_int_eq(plan.kernel, DEV_CONV_TPROD);
    ck_assert_int_eq(plan.timgs, 2);
    /* im2col's panels: of weights past 2 MiB (DeepLabV3's dilated 3x3, 960
     * -> 256 channels on 16x16) at least as many positions as output
     * channels (then evened out: 2 panels of 8 rows); of smaller weights
     * (32 output channels) the panel's own bound, a row of 16 */
    const int64_t dl_p[9] = {1, 1, 12, 12, 12, 12, 12, 12, 1};
    dev_conv_shape dl = {.dtype = F32, .N = 1, .C = 960, .H = 16, .W = 16, .O = 256, .Cg = 960, .KH = 3, .KW = 3,
                         .OH = 16, .OW = 16};
    memcpy(dl.p, dl_p, sizeof dl.p);
    dev_conv_plan_make(&dl, 1, &plan);
    ck_assert_int_eq(plan.kernel, DEV_CONV_PANELS);
    ck_assert_int_eq(plan.prows, 8);
    dl.O = 32;
    dev_conv_plan_make(&dl, 1, &plan);
    ck_assert_int_eq(plan.kernel, DEV_CONV_PANELS);
    ck_assert_int_eq(plan.prows, 1);
}
END_TEST

/* The f32 kernels without im2col (convf32.c), on AVX-512 where the CPU has it
 * and on the portable code: Winograd (3x3, >= 8 channels) with odd and even
 * sizes, rows wider than a vector, channels and outputs that are not whole
 * vectors, groups; flat and rows (small windows over few channels) with
 * runs of output wider than one block, uneven pads. */
static const conv_dims cf_cases[] = {
    {{2, 16, 14, 14}, {32, 16, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}},
    {{1, 17, 13, 15}, {33, 17, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}},
    {{1, 8, 20, 37}, {5, 8, 3, 3}, {1, 1, 0, 2, 1, 0, 1, 1, 1}},
    {{3, 16, 9, 9}, {12, 8, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 2}},
    {{1, 9, 3, 3}, {4, 9, 3, 3}, {1, 1, 0, 0, 0, 0, 1, 1, 1}},
    {{1, 1, 28, 28}, {16, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}},
    {{1, 1, 5, 40}, {3, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}},
    {{1, 2, 7, 19}, {9, 2, 5, 5}, {1, 1, 2, 2, 2, 2, 1, 1, 1}},
    {{1, 4, 6, 10}, {6, 2, 3, 3}, {1, 1, 0, 2, 1, 0, 1, 1, 2}},
    /* narrower than x (rows; the cases above as wide as x run flat) */
    {{2, 3, 7, 9}, {4, 3, 3, 3}, {1, 1, 0, 0, 0, 0, 1, 1, 1}},
    {{1, 2, 6, 11}, {5, 2, 5, 5}, {1, 1, 2, 1, 2, 1, 1, 1, 1}},
    {{1, 1, 4, 37}, {3, 1, 2, 2}, {1, 1, 1, 0, 0, 0, 1, 1, 1}},
    /* wide rows of many channels: the scratch holds bands of tile rows */
    {{1, 64, 8, 600}, {2, 64, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}},
    /* few tile rows, output channels not a whole block: parts of channels */
    {{1, 40, 7, 7}, {50, 40, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}},
    /* the last block of channels one vector, not two: alone (48 channels)
     * and in groups of 16 (RegNet's) */
    {{1, 24, 7, 7}, {48, 24, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}},
    {{1, 64, 9, 9}, {64, 16, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 4}},
    /* groups of many channels, output channels in vectors: strides (RegNet's
     * 3x3 /2), a half vector of channels, a vector and a half, uneven pads,
     * dilations, a 5x5 window at unit strides, two images */
    {{1, 32, 14, 14}, {32, 16, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 2}},
    {{2, 40, 11, 13}, {40, 8, 3, 3}, {2, 1, 1, 0, 2, 1, 1, 1, 5}},
    {{1, 48, 10, 9}, {48, 24, 3, 3}, {1, 1, 2, 2, 2, 2, 2, 2, 2}},
    {{1, 96, 9, 9}, {96, 48, 5, 5}, {2, 2, 2, 2, 2, 2, 1, 1, 2}},
    {{1, 32, 9, 9}, {32, 16, 5, 5}, {1, 1, 2, 2, 2, 2, 1, 1, 2}},
    {{1, 16, 5, 7}, {16, 8, 2, 3}, {3, 2, 0, 4, 0, 0, 1, 2, 2}},
    /* not convf32's: 8x8 patches of 3 channels (a ViT's first layer), the
     * transposed product with rows of runs of 8 columns, not of 3 channels */
    {{1, 3, 32, 32}, {64, 3, 8, 8}, {8, 8, 0, 0, 0, 0, 1, 1, 1}},
};

START_TEST(test_conv_f32_kernels)
{
    static const char *const paths[] = {"", " (AVX2 at most)", " (portable)"};
    for (int path = 0; path <= 2; path++) {
        dev_cf_force(path);
        for (size_t ci = 0; ci < UT_COUNTOF(cf_cases); ci++)
            for (size_t ai = 0; ai < UT_COUNTOF(acts); ai++) {
                /* exact on small integers */
                conv_case(F32, acts[ai], cf_cases[ci].x, cf_cases[ci].w, cf_cases[ci].p);
                /* arbitrary floats against the double sums, within 1e-5 of the sum of |x w| */
                dev_value x = randt(F32, 4, cf_cases[ci].x, 11), w = randt(F32, 4, cf_cases[ci].w, 12);
                dev_value bias = randt(F32, 1, cf_cases[ci].w, 13), o, ax = tf(F64, 4, cf_cases[ci].x, NULL, 0);
                dev_value aw = tf(F64, 4, cf_cases[ci].w, NULL, 0);
                for (int64_t i = 0; i < x.u.t->count; i++)
                    ((double *)ax.u.t->data)[i] = fabs(elem(&x, i));
                for (int64_t i = 0; i < w.u.t->count; i++)
                    ((double *)aw.u.t->data)[i] = fabs(elem(&w, i));
                static double want[16384], bound[16384];
                double bv[128], zero[128] = {0};
                for (int64_t i = 0; i < cf_cases[ci].w[0]; i++)
                    bv[i] = elem(&bias, i);
                int64_t od[4];
                conv_ref(&x, &w, cf_cases[ci].p, bv, 0, want, od);
                conv_ref(&ax, &aw, cf_cases[ci].p, zero, 0, bound, od);
                ck_assert_int_eq(C(ISA_FUSED_CONV2D, (int32_t)acts[ai], &o, x, w, ivec(cf_cases[ci].p, 9), bias),
                                 TFVM_OK);
                for (int64_t i = 0; i < o.u.t->count; i++) {
                    const double got = elem(&o, i), sum = want[i], tol = 1e-5 * (bound[i] + fabs(bv[0]) + 1);
                    /* the activation of the double sum, and of the sums within tol */
                    const double a0 = act_ref(F64, acts[ai], sum - tol), a1 = act_ref(F64, acts[ai], sum + tol);
                    double lo = fmin(a0, a1);
                    const double hi = fmax(a0, a1);
                    /* silu, gelu and hardswish fall, then rise: where the sums
                     * straddle their least value, the least within tol */
                    if (got < lo - 1e-6)
                        for (int k = 1; k < 64; k++)
                            lo = fmin(lo, act_ref(F64, acts[ai], sum - tol + tol * k / 32));
                    ck_assert_msg(got >= lo - 1e-6 && got <= hi + 1e-6,
                                  "case %zu act %u%s: element %lld is %.9g, expected act(%.9g) within %.3g", ci,
                                  (unsigned)acts[ai], paths[path], (long long)i, got, sum, tol);
                }
                dev_value_release(&o);
                dev_value_release(&ax);
                dev_value_release(&aw);
            }
    }
    dev_cf_force(0);
}
END_TEST

/* Depthwise convolutions (dwconv.c) on each instruction set the CPU has
 * and the portable code: narrow planes (channels-last blocks, a last block
 * of fewer channels), wide planes (rows of vectors), strides of 2 and 3,
 * dilations, uneven pads, two images, two outputs per channel, 1x1 outputs. */
static const conv_dims dw_cases[] = {
    {{1, 20, 9, 13}, {20, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 20}},
    {{2, 18, 11, 11}, {18, 1, 5, 5}, {2, 2, 2, 2, 2, 2, 1, 1, 18}},
    {{1, 4, 20, 60}, {4, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 4}},
    {{1, 3, 17, 101}, {3, 1, 3, 3}, {2, 2, 1, 0, 0, 1, 1, 1, 3}},
    {{1, 3, 10, 70}, {6, 1, 3, 3}, {1, 1, 2, 2, 2, 2, 2, 2, 3}},
    {{1, 5, 6, 50}, {5, 1, 1, 7}, {1, 3, 0, 3, 0, 3, 1, 1, 5}},
    {{1, 17, 3, 3}, {17, 1, 3, 3}, {1, 1, 0, 0, 0, 0, 1, 1, 17}},
    {{1, 2, 30, 7}, {2, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 2}},
    /* wide rows: channel blocks go a few output rows at a time (strips of
     * 1 to 18 rows, by path), pads at the first and last strip */
    {{1, 2, 24, 300}, {2, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 2}},
    {{1, 2, 30, 250}, {2, 1, 5, 5}, {2, 2, 2, 2, 2, 2, 1, 1, 2}},
    {{1, 2, 20, 400}, {2, 1, 3, 3}, {1, 1, 2, 2, 2, 2, 2, 2, 2}},
    /* the usual windows by whole rows of outputs (dw_rows): 5x5 at stride
     * 1, rows shorter than one row block, a last block of a few outputs */
    {{1, 20, 7, 7}, {20, 1, 5, 5}, {1, 1, 2, 2, 2, 2, 1, 1, 20}},
    {{1, 33, 14, 14}, {33, 1, 5, 5}, {1, 1, 2, 2, 2, 2, 1, 1, 33}},
    {{2, 16, 14, 15}, {16, 1, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 16}},
};

START_TEST(test_conv_depthwise)
{
    for (int pl = 0; pl <= 5; pl++) {
        const int path = pl % 3, layout = 1 + pl / 3;
        dev_dw_force(path);
        dev_dw_force_layout(layout);
        for (size_t ci = 0; ci < UT_COUNTOF(dw_cases); ci++)
            for (size_t ai = 0; ai < UT_COUNTOF(acts); ai++) {
                conv_case(F32, acts[ai], dw_cases[ci].x, dw_cases[ci].w, dw_cases[ci].p);
                dev_value x = randt(F32, 4, dw_cases[ci].x, 21), w = randt(F32, 4, dw_cases[ci].w, 22);
                dev_value bias = randt(F32, 1, dw_cases[ci].w, 23), o;
                static double want[16384];
                double bv[64];
                for (int64_t i = 0; i < dw_cases[ci].w[0]; i++)
                    bv[i] = elem(&bias, i);
                int64_t od[4];
                conv_ref(&x, &w, dw_cases[ci].p, bv, 0, want, od);
                ck_assert_int_eq(C(ISA_FUSED_CONV2D, (int32_t)acts[ai], &o, ref(x), ref(w), ivec(dw_cases[ci].p, 9),
                                   ref(bias)),
                                 TFVM_OK);
                ck_assert_int_eq(o.u.t->count, od[0] * od[1] * od[2] * od[3]);
                for (int64_t i = 0; i < o.u.t->count; i++) {
                    const double got = elem(&o, i), tol = 1e-5 * (fabs(want[i]) + 1);
                    /* the activation at both ends (SiLU and GELU fall somewhere) */
                    const double a0 = act_ref(F64, acts[ai], want[i] - tol), a1 = act_ref(F64, acts[ai], want[i] + tol);
                    const double lo = a0 < a1 ? a0 : a1, hi = a0 < a1 ? a1 : a0;
                    ck_assert_msg(got >= lo - 1e-6 && got <= hi + 1e-6,
                                  "case %zu act %u path %d layout %d: element %lld is %.9g, expected act(%.9g)", ci,
                                  (unsigned)acts[ai], path, layout, (long long)i, got, want[i]);
                }
                /* planes and channel blocks sum in the same order: the same bits */
                dev_dw_force_layout(3 - layout);
                dev_value other;
                ck_assert_int_eq(C(ISA_FUSED_CONV2D, (int32_t)acts[ai], &other, x, w, ivec(dw_cases[ci].p, 9), bias),
                                 TFVM_OK);
                dev_dw_force_layout(layout);
                ck_assert_msg(memcmp(o.u.t->data, other.u.t->data, (size_t)o.u.t->count * sizeof(float)) == 0,
                              "case %zu act %u path %d: planes and channel blocks differ", ci, (unsigned)acts[ai], path);
                dev_value_release(&other);
                dev_value_release(&o);
            }
    }
    dev_dw_force(0);
    dev_dw_force_layout(0);
}
END_TEST

/* Few input channels (fewch.c) on each instruction set the CPU has and the
 * portable code: stems of 3 channels (3x3 and 7x7, stride 2), 1 to 4
 * channels at strides 1 to 3, a dilation, uneven pads, windows wider than
 * tall, output channels not a whole block, rows not a whole vector, two
 * images, bands cut short by the last output row. Exact on small integers;
 * on arbitrary floats CONV2D gives the bits of the sums in w's order with
 * the gemm's multiply-add on that path (fused but on the portable code),
 * im2col's zeros at the pads included. Rows narrower than a vector are not
 * taken, nor at unit strides rows under 4 vectors (the unit-stride cases
 * are 70 wide: 64 is AVX-512's 4 vectors). */
static const conv_dims fc_cases[] = {
    {{2, 3, 33, 70}, {16, 3, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 1}},
    {{1, 3, 40, 41}, {20, 3, 7, 7}, {2, 2, 3, 3, 3, 3, 1, 1, 1}},
    {{1, 3, 6, 70}, {5, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}},
    {{1, 4, 15, 50}, {9, 4, 3, 2}, {3, 3, 0, 2, 1, 0, 1, 1, 1}},
    {{2, 2, 18, 40}, {6, 2, 3, 3}, {1, 2, 2, 2, 2, 2, 2, 2, 1}},
    {{1, 3, 12, 70}, {33, 3, 1, 9}, {1, 1, 0, 2, 0, 2, 1, 1, 1}},
    {{1, 1, 30, 70}, {8, 1, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 1}},
    {{1, 3, 6, 70}, {32, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}},
};

START_TEST(test_conv_fewch)
{
    for (int force = 0; force <= 2; force++) {
        dev_fc_force(force);
        for (size_t ci = 0; ci < UT_COUNTOF(fc_cases); ci++) {
            const int64_t *xd = fc_cases[ci].x, *wd = fc_cases[ci].w, *p = fc_cases[ci].p;
            dev_conv_shape sh = {.dtype = F32, .N = xd[0], .C = xd[1], .H = xd[2], .W = xd[3], .O = wd[0],
                                 .Cg = wd[1], .KH = wd[2], .KW = wd[3],
                                 .OH = (xd[2] + p[2] + p[4] - p[6] * (wd[2] - 1) - 1) / p[0] + 1,
                                 .OW = (xd[3] + p[3] + p[5] - p[7] * (wd[3] - 1) - 1) / p[1] + 1};
            memcpy(sh.p, p, sizeof sh.p);
            dev_conv_plan plan;
            dev_conv_plan_make(&sh, 1, &plan);
            ck_assert_msg(plan.kernel == DEV_CONV_FEWCH, "case %zu path %d: planned kernel %d", ci, force,
                          (int)plan.kernel);
            for (size_t ai = 0; ai < UT_COUNTOF(acts); ai++)
                conv_case(F32, acts[ai], xd, wd, p);
            dev_value x = randt(F32, 4, xd, 41), w = randt(F32, 4, wd, 42), o;
            ck_assert_int_eq(C(ISA_CONV2D, 0, &o, ref(x), ref(w), ivec(p, 9)), TFVM_OK);
            const bool fused = plan.fc.path != 2;
            const float *xv = x.u.t->data, *wv = w.u.t->data, *ov = o.u.t->data;
            int64_t q = 0;
            for (int64_t n = 0; n < sh.N; n++)
                for (int64_t oc = 0; oc < sh.O; oc++)
                    for (int64_t oh = 0; oh < sh.OH; oh++)
                        for (int64_t ow = 0; ow < sh.OW; ow++, q++) {
                            float acc = 0.0f;
                            for (int64_t c = 0, k = 0; c < sh.C; c++)
                                for (int64_t i = 0; i < sh.KH; i++)
                                    for (int64_t j = 0; j < sh.KW; j++, k++) {
                                        const int64_t h = oh * p[0] - p[2] + i * p[6];
                                        const int64_t ww = ow * p[1] - p[3] + j * p[7];
                                        const float a = wv[oc * sh.C * sh.KH * sh.KW + k];
                                        const float b = h >= 0 && h < sh.H && ww >= 0 && ww < sh.W
                                                            ? xv[((n * sh.C + c) * sh.H + h) * sh.W + ww]
                                                            : 0.0f;
                                        acc = fused ? fmaf(a, b, acc) : a * b + acc;
                                    }
                            ck_assert_msg(memcmp(&acc, &ov[q], sizeof acc) == 0,
                                          "case %zu path %d: element %lld is %.9g, the sums in order %.9g", ci,
                                          plan.fc.path, (long long)q, (double)ov[q], (double)acc);
                        }
            dev_value_release(&o);
            dev_value_release(&x);
            dev_value_release(&w);
        }
        /* rows narrower than the path's vector (stride 2): another kernel */
        const int64_t narrow = force == 0 && dev_sg_best() == DEV_SG_AVX512 ? 15 : force <= 1 ? 7 : 3;
        dev_conv_shape sh = {.dtype = F32, .N = 1, .C = 3, .H = 9, .W = narrow, .O = 8, .Cg = 3, .KH = 3, .KW = 3,
                             .OH = 9, .OW = narrow, .p = {2, 2, 1, 1, 1, 1, 1, 1, 1}};
        dev_conv_plan plan;
        dev_conv_plan_make(&sh, 1, &plan);
        ck_assert_int_ne(plan.kernel, DEV_CONV_FEWCH);
        /* rows so long that a band's split input would pass 16 Mi floats: another kernel */
        sh.W = 3000000, sh.OW = 1500000;
        dev_conv_plan_make(&sh, 1, &plan);
        ck_assert_int_ne(plan.kernel, DEV_CONV_FEWCH);
        sh.W = 300000, sh.OW = 150000;
        dev_conv_plan_make(&sh, 1, &plan);
        ck_assert_int_eq(plan.kernel, DEV_CONV_FEWCH);
    }
    dev_fc_force(0);
}
END_TEST

START_TEST(test_conv_errors)
{
    const int64_t P[9] = {1, 1, 0, 0, 0, 0, 1, 1, 1};
    FAILS(ISA_FUSED_CONV2D, 0, (T(F32, (1, 1, 3, 3)), T(F32, (2, 1, 3, 3)), ivec(P, 9), T(F32, (3))), SH,
          "fused_conv2d: bias must be [2] (the output channels of w [2, 1, 3, 3]), got [3]");
    FAILS(ISA_FUSED_CONV2D, 0, (T(F32, (1, 1, 3, 3)), T(F32, (2, 1, 3, 3)), ivec(P, 9), T(F32, (2, 1))), SH,
          "fused_conv2d: bias must be [2] (the output channels of w [2, 1, 3, 3]), got [2, 1]");
    FAILS(ISA_FUSED_CONV2D, 0, (T(F32, (1, 1, 3, 3)), T(F32, (2, 1, 3, 3)), ivec(P, 9), T(F64, (2))), TY,
          "fused_conv2d: dtype mismatch: f32 [1, 1, 3, 3] and bias f64 [2]");
    FAILS(ISA_FUSED_CONV2D, SIG | RELU, (T(F32, (1, 1, 3, 3)), T(F32, (2, 1, 3, 3)), ivec(P, 9), T(F32, (2))), AR,
          "fused_conv2d: more than one activation (options 0xc)");
    FAILS(ISA_FUSED_CONV2D, 0, (T(I64, (1, 1, 3, 3)), T(I64, (2, 1, 3, 3)), ivec(P, 9), T(I64, (2))), TY,
          "fused_conv2d: not defined on i64 (floats only)");
    FAILS(ISA_FUSED_CONV2D, 0, (T(F32, (1, 3, 5, 5)), T(F32, (2, 2, 3, 3)), ivec(P, 9), T(F32, (2))), SH,
          "fused_conv2d: x [1, 3, 5, 5] has 3 channels, w [2, 2, 3, 3] takes 2 (groups 1)");
    /* C = 0: the bias alone */
    OK(ISA_FUSED_CONV2D, RELU, (T(F32, (1, 0, 1, 1)), T(F32, (2, 0, 1, 1)), ivec(P, 9), T(F32, (2), -1, 2)), F32,
       (1, 2, 1, 1), 0, 2);
}
END_TEST

/* ---- asm round trip ---------------------------------------------------------------- */
START_TEST(test_asm_round_trip)
{
    static const char src[] = "const #0 = i64[9] [1, 1, 0, 0, 0, 0, 1, 1, 1]\n"
                              "entry main(a: f32[], b: f32[], c: f32[]) -> (r: f32[], s: f32[]) {\n"
                              "    a = ARG 0\n"
                              "    b = ARG 1\n"
                              "    c = ARG 2\n"
                              "    m = FUSED_MATMUL tb relu (a, b, c)\n"
                              "    v = FUSED_CONV2D sigmoid (a, b, #0, c)\n"
                              "        RESULT 0 (m)\n"
                              "        RESULT 1 (v)\n"
                              "}\n";
    isa_program p;
    tfvm_error err;
    ck_assert_msg(ld_assemble(src, strlen(src), "f.tfasm", NULL, &p, &err) == TFVM_OK, "%s", err.message);
    ut_buf b;
    ut_buf_init(&b, NULL);
    ck_assert_msg(ld_disassemble(&p, &b, &err) == TFVM_OK, "%s", err.message);
    ut_buf_append(&b, "", 1);
    ck_assert_msg(strstr((const char *)b.data, "= FUSED_MATMUL tb relu (a, b, c)\n"), "%s", (const char *)b.data);
    ck_assert_msg(strstr((const char *)b.data, "= FUSED_CONV2D sigmoid (a, b, i64[9] [1, 1, 0, 0, 0, 0, 1, 1, 1], c)\n"),
                  "%s", (const char *)b.data);
    ut_buf_free(&b);
    isa_program_release(&p);
    static const char bad[] = "entry main(a: f32[]) -> (r: f32[]) {\n"
                              "    a = ARG 0\n"
                              "    m = FUSED_CONV2D ta (a, a, a, a)\n"
                              "        RESULT 0 (m)\n"
                              "}\n";
    ck_assert_int_eq(ld_assemble(bad, strlen(bad), "g.tfasm", NULL, &p, &err), TFVM_ERR_SYNTAX);
    ck_assert_msg(strstr(err.message, "unknown FUSED_CONV2D option"), "%s", err.message);
}
END_TEST

/* ---- Chunked paths under a test runner ------------------------------------------------
 * The runner splits [0, n) into chunks of `grain` and runs them on its
 * width of threads, 2 or RUN_THREADS (this one included: some kernels
 * split differently on 2, a product's shared op(A) is packed only on
 * more); it counts the loops it split, so each case can prove that it took
 * the chunked path. */
#define RUN_THREADS 3

typedef struct run_job {
    dev_par_fn fn;
    void *arg;
    size_t n, grain;
    atomic_size_t next;
} run_job;

static atomic_int split_loops, chunks_run;

static void *run_worker(void *p)
{
    run_job *j = p;
    for (;;) {
        size_t b = atomic_fetch_add(&j->next, j->grain);
        if (b >= j->n)
            break;
        size_t e = j->n - b < j->grain ? j->n : b + j->grain;
        j->fn(j->arg, b, e);
        atomic_fetch_add(&chunks_run, 1);
    }
    return NULL;
}

static void run_chunks(void *self, size_t n, size_t grain, dev_par_fn fn, void *arg);

static const dev_par_runner runner = {run_chunks, NULL, RUN_THREADS}, runner2 = {run_chunks, NULL, 2};

static void run_chunks(void *self, size_t n, size_t grain, dev_par_fn fn, void *arg)
{
    (void)self;
    run_job j = {fn, arg, n, grain, 0};
    pthread_t t[RUN_THREADS - 1];
    const unsigned others = dev_par_width() - 1;
    atomic_fetch_add(&split_loops, 1);
    for (unsigned i = 0; i < others; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, run_worker, &j), 0);
    run_worker(&j);
    for (unsigned i = 0; i < others; i++)
        pthread_join(t[i], NULL);
}

/* op on in[] (not released) with and without the runner: the same bytes,
 * and with it the loop was split. Threads allocate, so the system allocator. */
static void par_case(isa_op op, uint32_t attr, const dev_value *in, const char *what)
{
    dev_value serial, par, held[8];
    ck_assert_int_eq(dev_par_width(), 1);
    /* held across the calls, which may otherwise write over an input that
     * only one reference holds (dev_cpu_in_place) */
    const uint32_t n_in = (uint32_t)isa_ops[op].n_in;
    for (uint32_t k = 0; k < n_in; k++) {
        held[k] = in[k];
        dev_value_retain(&held[k]);
    }
    tfvm_status st = dev_cpu_tensor(op, attr, in, n_in, &serial, NULL, msg, sizeof msg);
    ck_assert_msg(st == TFVM_OK, "%s: %s", what, msg);
    const dev_par_runner *const runners[] = {&runner2, &runner};
    for (size_t ri = 0; ri < UT_COUNTOF(runners); ri++) {
        const dev_par_runner *r = runners[ri];
        dev_par_set_runner(r);
        ck_assert_int_eq(dev_par_width(), r->width);
        atomic_store(&split_loops, 0);
        atomic_store(&chunks_run, 0);
        dev_par_tune_force(1); /* a recurrent step splits whatever its timings said */
        st = dev_cpu_tensor(op, attr, in, (uint32_t)isa_ops[op].n_in, &par, NULL, msg, sizeof msg);
        dev_par_tune_force(-1);
        dev_par_set_runner(NULL);
        ck_assert_msg(st == TFVM_OK, "%s on %u threads: %s", what, r->width, msg);
        ck_assert_msg(atomic_load(&split_loops) >= 1 && atomic_load(&chunks_run) >= 2,
                      "%s on %u threads: not split (%d loops, %d chunks)", what, r->width,
                      atomic_load(&split_loops), atomic_load(&chunks_run));
        dev_value want = serial;
        dev_value_retain(&want);
        same_bits(&par, &want, what); /* (releases both) */
    }
    dev_value_release(&serial);
    for (uint32_t k = 0; k < n_in; k++)
        dev_value_release(&held[k]);
}

/* par_case for an elementwise op (elementwise.c's float chunks) */
static void par_case_ew(isa_op op, const dev_value *in, const char *what)
{
    dev_value serial, par;
    ck_assert_int_eq(dev_cpu_elementwise(op, 0, in, &serial, NULL, msg, sizeof msg), TFVM_OK);
    dev_par_set_runner(&runner);
    atomic_store(&split_loops, 0);
    atomic_store(&chunks_run, 0);
    tfvm_status st = dev_cpu_elementwise(op, 0, in, &par, NULL, msg, sizeof msg);
    dev_par_set_runner(NULL);
    ck_assert_msg(st == TFVM_OK, "%s: %s", what, msg);
    ck_assert_msg(atomic_load(&split_loops) >= 1 && atomic_load(&chunks_run) >= 2,
                  "%s: not split (%d loops, %d chunks)", what, atomic_load(&split_loops), atomic_load(&chunks_run));
    same_bits(&par, &serial, what);
}

static dev_value big(uint8_t dt, int rank, const int64_t *dims, int seed)
{
    tfvm_tensor *t = tfvm_tensor_new((tfvm_dtype)dt, rank, dims, NULL);
    ck_assert_ptr_nonnull(t);
    for (int64_t i = 0; i < t->count; i++)
        put(dt, t->data, i, (double)((i * 7 + seed * 3) % 11) - 5);
    return tens(t);
}

static void release_all(dev_value *v, int n)
{
    for (int i = 0; i < n; i++)
        dev_value_release(&v[i]);
}

START_TEST(test_parallel_paths)
{
    for (int dt = F32; dt <= F64; dt++) {
        /* rows of M: [96, 256] @ [256, 128], bias [128] */
        dev_value in[4] = {big(dt, 2, DIMS(96, 256), 1), big(dt, 2, DIMS(256, 128), 2), big(dt, 1, DIMS(128), 3)};
        par_case(ISA_MATMUL, 0, in, "matmul rows");
        par_case(ISA_FUSED_MATMUL, RELU, in, "fused_matmul rows");
        release_all(in, 3);
        /* arbitrary floats: the same tiles, the same bits, for any thread count */
        dev_value fin[3] = {randt(dt, 2, DIMS(96, 256), 7), randt(dt, 2, DIMS(256, 128), 8),
                            randt(dt, 1, DIMS(128), 9)};
        par_case(ISA_FUSED_MATMUL, TANH, fin, "fused_matmul, arbitrary floats");
        release_all(fin, 3);
        dev_value xf[4] = {randt(dt, 4, DIMS(1, 16, 20, 20), 7), randt(dt, 4, DIMS(32, 16, 3, 3), 8),
                           IV(1, 1, 1, 1, 1, 1, 1, 1, 1),
                           randt(dt, 1, DIMS(32), 9)};
        par_case(ISA_FUSED_CONV2D, SIG, xf, "fused_conv2d one image, arbitrary floats");
        release_all(xf, 4);
        /* a global average pool's planes (reduce.c's rows) and a sum over the last axis */
        dev_value planes[2] = {randt(dt, 4, DIMS(2, 40, 33, 33), 5), IV(2, 3)};
        par_case(ISA_REDUCE_MEAN, 0, planes, "reduce_mean of planes, arbitrary floats");
        release_all(planes, 2);
        dev_value rows[2] = {randt(dt, 2, DIMS(300, 700), 6), IV(-1)};
        par_case(ISA_REDUCE_SUM, 0, rows, "reduce_sum of rows, arbitrary floats");
        release_all(rows, 2);
        if (dt == F32) { /* attention's scores, every other one masked as GPT-2 masks them */
            dev_value sc = randt(dt, 3, DIMS(4, 64, 64), 4);
            float *d = sc.u.t->data;
            for (int64_t i = 0; i < sc.u.t->count; i += 2)
                d[i] = -0x1.fffffep127f;
            par_case(ISA_SOFTMAX, (uint32_t)-1, &sc, "softmax of rows, half of them masked");
            dev_value_release(&sc);
        }
        /* columns of N (few rows), ta and tb */
        dev_value cin[3] = {big(dt, 2, DIMS(512, 4), 1), big(dt, 2, DIMS(1024, 512), 2), big(dt, 2, DIMS(4, 1), 3)};
        par_case(ISA_FUSED_MATMUL, ISA_OPT_TRANS_A | ISA_OPT_TRANS_B | TANH, cin, "fused_matmul columns");
        release_all(cin, 3);
        /* a batch of products, each with its own b */
        dev_value bin[3] = {big(dt, 3, DIMS(6, 64, 64), 1), big(dt, 3, DIMS(6, 64, 96), 2), big(dt, 1, DIMS(96), 3)};
        par_case(ISA_MATMUL, 0, bin, "batched matmul");
        par_case(ISA_FUSED_MATMUL, SIG, bin, "batched fused_matmul");
        release_all(bin, 3);
        /* convolutions: many images (items), one image (its product split) */
        const int64_t P[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
        dev_value xin[4] = {big(dt, 4, DIMS(8, 16, 14, 14), 1), big(dt, 4, DIMS(32, 16, 3, 3), 2), ivec(P, 9),
                            big(dt, 1, DIMS(32), 3)};
        par_case(ISA_CONV2D, 0, xin, "conv2d images");
        par_case(ISA_FUSED_CONV2D, RELU, xin, "fused_conv2d images");
        release_all(xin, 4);
        dev_value one[4] = {big(dt, 4, DIMS(1, 32, 28, 28), 1), big(dt, 4, DIMS(64, 32, 3, 3), 2), ivec(P, 9),
                            big(dt, 1, DIMS(64), 3)};
        par_case(ISA_FUSED_CONV2D, TANH, one, "fused_conv2d one image");
        release_all(one, 4);
        /* one image through the f32 row kernel (few channels): bands of rows */
        dev_value few[4] = {big(dt, 4, DIMS(1, 2, 64, 64), 1), big(dt, 4, DIMS(16, 2, 3, 3), 2), ivec(P, 9),
                            big(dt, 1, DIMS(16), 3)};
        par_case(ISA_FUSED_CONV2D, RELU, few, "fused_conv2d one image, two channels");
        par_case(ISA_FUSED_CONV2D, SIG, few, "fused_conv2d one image, two channels, sigmoid");
        release_all(few, 4);
        /* a 1-D convolution (one row of outputs, stride 2): im2col's one
         * panel, its product split over the threads */
        dev_value row1[4] = {big(dt, 4, DIMS(1, 64, 1, 700), 1), big(dt, 4, DIMS(32, 64, 1, 3), 2),
                             IV(1, 2, 0, 0, 0, 0, 1, 1, 1), big(dt, 1, DIMS(32), 3)};
        par_case(ISA_FUSED_CONV2D, RELU, row1, "fused_conv2d, one row of outputs");
        release_all(row1, 4);
        /* f32, few output positions: the transposed product of one image
         * (windows as rows built in parallel; by rows, and by columns
         * against weights bigger than a core's L2) and stacks of images */
        if (dt == F32) {
            const int64_t P0[9] = {1, 1, 0, 0, 0, 0, 1, 1, 1};
            dev_value t1[4] = {randt(dt, 4, DIMS(1, 256, 7, 7), 1), randt(dt, 4, DIMS(512, 256, 1, 1), 2), ivec(P0, 9),
                               randt(dt, 1, DIMS(512), 3)};
            par_case(ISA_FUSED_CONV2D, RELU, t1, "transposed product, 1x1, one image");
            release_all(t1, 4);
            dev_value t3[4] = {randt(dt, 4, DIMS(1, 64, 13, 13), 1), randt(dt, 4, DIMS(512, 64, 3, 3), 2),
                               IV(2, 2, 1, 1, 1, 1, 1, 1, 1), randt(dt, 1, DIMS(512), 3)};
            par_case(ISA_FUSED_CONV2D, SIG, t3, "transposed product, 3x3 stride 2, one image, big weights");
            release_all(t3, 4);
            dev_value ts[4] = {randt(dt, 4, DIMS(11, 64, 5, 5), 1), randt(dt, 4, DIMS(64, 64, 1, 1), 2), ivec(P0, 9),
                               randt(dt, 1, DIMS(64), 3)};
            par_case(ISA_FUSED_CONV2D, TANH, ts, "transposed product, stacks of images");
            release_all(ts, 4);
        }
        /* a recurrent step of one row and of several: its product and gate math by blocks of units (f32) */
        if (dt == F32) {
            dev_value rin[5] = {randt(dt, 3, DIMS(2, 1, 512), 1), sc64(1), randt(dt, 3, DIMS(2, 1, 128), 2),
                                randt(dt, 2, DIMS(512, 128), 3), randt(dt, 1, DIMS(512), 4)};
            par_case(ISA_LSTM_STEP, 0, rin, "lstm_step one row");
            release_all(rin, 5);
            dev_value gin[5] = {randt(dt, 3, DIMS(2, 1, 480), 1), sc64(0), randt(dt, 2, DIMS(1, 160), 2),
                                randt(dt, 2, DIMS(480, 160), 3), randt(dt, 1, DIMS(480), 4)};
            par_case(ISA_GRU_STEP, 0, gin, "gru_step one row");
            release_all(gin, 5);
            dev_value bin4[5] = {randt(dt, 3, DIMS(2, 4, 400), 1), sc64(1), randt(dt, 3, DIMS(2, 4, 100), 2),
                                 randt(dt, 2, DIMS(400, 100), 3), randt(dt, 1, DIMS(400), 4)};
            par_case(ISA_LSTM_STEP, 0, bin4, "lstm_step four rows");
            release_all(bin4, 5);
        }
        /* CONCAT by pieces of the result: rows of both inputs (of sizes no
         * piece divides) across pieces; the serial result element by element */
        dev_value kin[2] = {big(dt, 4, DIMS(5, 100, 37, 11), 1), big(dt, 4, DIMS(5, 7, 37, 11), 2)}, cat;
        par_case(ISA_CONCAT, 1, kin, "concat");
        ck_assert_int_eq(dev_cpu_tensor(ISA_CONCAT, 1, kin, 2, &cat, NULL, msg, sizeof msg), TFVM_OK);
        for (int64_t i = 0, ra = 100 * 37 * 11, rb = 7 * 37 * 11; i < cat.u.t->count; i++) {
            const int64_t n = i / (ra + rb), at = i % (ra + rb);
            const double want = at < ra ? elem(&kin[0], n * ra + at) : elem(&kin[1], n * rb + at - ra);
            ck_assert_msg(elem(&cat, i) == want, "concat: element %lld", (long long)i);
        }
        dev_value_release(&cat);
        release_all(kin, 2);
        /* pooling planes */
        dev_value pin[2] = {big(dt, 4, DIMS(16, 64, 28, 28), 1), IV(2, 2, 2, 2, 0, 0, 0, 0)};
        par_case(ISA_MAXPOOL, 0, pin, "maxpool");
        par_case(ISA_AVGPOOL, 0, pin, "avgpool");
        release_all(pin, 2);
        /* f32: the grid's max pool and depthwise planes, an activation per plane */
        if (dt == F32) {
            dev_value gin[2] = {randt(dt, 4, DIMS(1, 64, 112, 112), 5), IV(3, 3, 2, 2, 1, 1, 1, 1)};
            par_case(ISA_MAXPOOL, 0, gin, "maxpool 3x3 stride 2");
            release_all(gin, 2);
            dev_value din[4] = {randt(dt, 4, DIMS(1, 64, 112, 112), 1), randt(dt, 4, DIMS(64, 1, 3, 3), 2),
                                IV(2, 2, 1, 1, 1, 1, 1, 1, 64), randt(dt, 1, DIMS(64), 3)};
            par_case(ISA_FUSED_CONV2D, SIG, din, "depthwise, sigmoid per plane");
            /* one image's transposed product split by columns, its rows
             * packed once for both (a 3x3 stride-2 layer onto 14x14) */
            dev_value tin[4] = {randt(dt, 4, DIMS(1, 128, 28, 28), 1), randt(dt, 4, DIMS(256, 128, 3, 3), 2),
                                IV(2, 2, 1, 1, 1, 1, 1, 1, 1), randt(dt, 1, DIMS(256), 3)};
            par_case(ISA_FUSED_CONV2D, RELU, tin, "transposed product, one image split");
            release_all(tin, 4);
            par_case(ISA_FUSED_CONV2D, RELU, din, "depthwise, relu");
            release_all(din, 4);
            /* one channel block an image (16 channels): its row strips split;
             * with a residual, each strip's epilogue on its own rows */
            dev_value sin[5] = {randt(dt, 4, DIMS(1, 16, 112, 112), 4), randt(dt, 4, DIMS(16, 1, 3, 3), 5),
                                IV(1, 1, 1, 1, 1, 1, 1, 1, 16), randt(dt, 1, DIMS(16), 6),
                                randt(dt, 4, DIMS(1, 16, 112, 112), 7)};
            par_case(ISA_FUSED_CONV2D, SIG, sin, "depthwise, one channel block, sigmoid");
            par_case(ISA_FUSED_CONV2D_ADD, RELU, sin, "depthwise, one channel block, + r, relu");
            release_all(sin, 5);
        }
        /* elementwise on floats: one run, and rows of a per-channel broadcast */
        dev_value ein[2] = {randt(dt, 2, DIMS(64, 2048), 1), randt(dt, 2, DIMS(64, 2048), 2)};
        par_case_ew(ISA_ADD, ein, "add, one run");
        par_case_ew(ISA_SIGMOID, ein, "sigmoid, one run");
        release_all(ein, 2);
        dev_value cin2[2] = {randt(dt, 4, DIMS(1, 64, 32, 32), 1), randt(dt, 3, DIMS(64, 1, 1), 2)};
        par_case_ew(ISA_MUL, cin2, "mul by a per-channel vector");
        release_all(cin2, 2);
        /* squeeze-excite at 7x7, small work that still splits: its mean,
         * its products (one row against weights streamed from memory), its
         * scale */
        dev_value sm[2] = {randt(dt, 4, DIMS(1, 576, 7, 7), 1), IV(2, 3)};
        par_case(ISA_REDUCE_MEAN, 0, sm, "squeeze-excite's mean");
        dev_value ss[2] = {sm[0], randt(dt, 4, DIMS(1, 576, 1, 1), 2)};
        par_case_ew(ISA_MUL, ss, "squeeze-excite's scale");
        release_all(sm, 2);
        dev_value_release(&ss[1]);
        if (dt == F32) { /* (f64 products are OpenBLAS's, by rows) */
            dev_value sf[4] = {randt(dt, 4, DIMS(1, 144, 1, 1), 3), randt(dt, 4, DIMS(576, 144, 1, 1), 4),
                               IV(1, 1, 0, 0, 0, 0, 1, 1, 1), randt(dt, 1, DIMS(576), 5)};
            par_case(ISA_FUSED_CONV2D, RELU, sf, "squeeze-excite's product");
            release_all(sf, 4);
        }
    }
}
END_TEST

/* A depthwise 1x1 at unit strides (DEV_CONV_SCALE, a batch norm on its
 * own): CONV2D is each element times its channel's weight summed from
 * zero (-0 products give +0, as the depthwise kernels' sums of one tap),
 * bit for bit; FUSED_CONV2D the same then its bias and activation, and
 * FUSED_CONV2D_ADD r, against the unfused instructions on every path of
 * act.c; planes enough for two chunks on two threads. */
START_TEST(test_conv_scale)
{
    const int64_t xd[4] = {2, 24, 30, 31}, wd[4] = {24, 1, 1, 1}, p[9] = {1, 1, 0, 0, 0, 0, 1, 1, 24};
    for (int threaded = 0; threaded <= 1; threaded++)
        for (int isa = DEV_ACT_PORTABLE; isa <= DEV_ACT_AVX512; isa++) {
            if (!dev_act_force((dev_act_isa)isa))
                continue;
            if (threaded)
                dev_par_set_runner(&runner);
            dev_value x = randt(F32, 4, xd, 51), w = randt(F32, 4, wd, 52), bias = randt(F32, 1, wd, 53);
            dev_value r = randt(F32, 4, xd, 54), m;
            float *xv = x.u.t->data, *wv = w.u.t->data;
            for (int64_t i = 0; i < x.u.t->count; i += 37)
                xv[i] = i % 2 ? -0.0f : 0.0f;
            wv[3] = -0.0f;
            ck_assert_int_eq(C(ISA_CONV2D, 0, &m, ref(x), ref(w), ivec(p, 9)), TFVM_OK);
            for (int64_t i = 0; i < m.u.t->count; i++) {
                const float want = 0.0f + xv[i] * wv[i / (xd[2] * xd[3]) % xd[1]], got = ((float *)m.u.t->data)[i];
                ck_assert_msg(memcmp(&got, &want, sizeof got) == 0, "conv2d element %lld: %.9g, want %.9g",
                              (long long)i, (double)got, (double)want);
            }
            dev_value br = tf(F32, 3, DIMS(24, 1, 1), NULL, 0);
            memcpy(br.u.t->data, bias.u.t->data, bias.u.t->nbytes);
            for (size_t ai = 0; ai < UT_COUNTOF(acts); ai++) {
                dev_value f, want = unfused_tail(ref(m), &br, acts[ai]);
                ck_assert_int_eq(C(ISA_FUSED_CONV2D, (int32_t)acts[ai], &f, ref(x), ref(w), ivec(p, 9), ref(bias)),
                                 TFVM_OK);
                same_bits(&f, &want, "fused_conv2d");
                dev_value s = ew(ISA_ADD, ref(m), ref(br));
                s = ew(ISA_ADD, s, ref(r));
                dev_value zero = tf(F32, 3, DIMS(24, 1, 1), NULL, 0);
                want = unfused_tail(s, &zero, acts[ai]);
                dev_value_release(&zero);
                ck_assert_int_eq(C(ISA_FUSED_CONV2D_ADD, (int32_t)acts[ai], &f, ref(x), ref(w), ivec(p, 9), ref(bias),
                                   ref(r)),
                                 TFVM_OK);
                same_bits(&f, &want, "fused_conv2d_add");
            }
            dev_par_set_runner(NULL);
            release_all((dev_value[]){x, w, bias, r, m, br}, 6);
        }
    dev_act_force(DEV_ACT_AUTO);
}
END_TEST

/* The planner's choice (convplan.c) is the kernel that runs: a convolution
 * of each kind, on one thread and under the runner (where fewer images than
 * threads split each one), counts one first item in the kernel it planned
 * and none in any other. `threaded`: the kernel under the runner where it
 * differs (im2col's column matrix in panels of rows shared out when there
 * are fewer images and groups than threads; SAME where it does not). */
#define SAME DEV_CONV_EMPTY
static const struct {
    const char *name;
    dev_conv_kernel kernel;
    uint8_t dt;
    int64_t x[4], w[4], p[9];
    dev_conv_kernel threaded;
} plan_cases[] = {
    {"empty batch", DEV_CONV_EMPTY, F32, {0, 3, 5, 5}, {2, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, SAME},
    {"depthwise", DEV_CONV_DEPTHWISE, F32, {1, 20, 9, 13}, {20, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 20}, SAME},
    {"depthwise 1x1", DEV_CONV_SCALE, F32, {2, 24, 30, 31}, {24, 1, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 24}, SAME},
    {"depthwise 1x1 /2", DEV_CONV_DEPTHWISE, F32, {1, 24, 30, 31}, {24, 1, 1, 1}, {2, 2, 0, 0, 0, 0, 1, 1, 24}, SAME},
    {"winograd", DEV_CONV_F32, F32, {2, 16, 14, 14}, {32, 16, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, SAME},
    {"flat", DEV_CONV_F32, F32, {1, 5, 28, 28}, {16, 5, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, SAME},
    {"channels /2", DEV_CONV_F32, F32, {1, 32, 14, 14}, {32, 16, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 2}, SAME},
    {"few channels", DEV_CONV_FEWCH, F32, {1, 3, 8, 66}, {16, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, SAME},
    {"few channels, few taps", DEV_CONV_F32, F32, {1, 1, 28, 28}, {16, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, SAME},
    {"few channels /2", DEV_CONV_FEWCH, F32, {1, 3, 61, 61}, {2, 3, 7, 7}, {2, 2, 3, 3, 3, 3, 1, 1, 1}, SAME},
    {"tprod 1x1", DEV_CONV_TPROD, F32, {11, 64, 5, 5}, {64, 64, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}, SAME},
    {"tprod 3x3 /2", DEV_CONV_TPROD, F32, {2, 8, 9, 9}, {64, 8, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 1}, SAME},
    {"tprod 3x3 /2, 256 positions", DEV_CONV_TPROD, F32, {1, 8, 32, 32}, {64, 8, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 1}, SAME},
    {"im2col 3x3 /2, 289 positions", DEV_CONV_IM2COL, F32, {1, 8, 34, 34}, {64, 8, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 1}, DEV_CONV_PANELS},
    {"im2col 1x1 /2, 196 positions", DEV_CONV_IM2COL, F32, {1, 64, 28, 28}, {128, 64, 1, 1}, {2, 2, 0, 0, 0, 0, 1, 1, 1}, DEV_CONV_PANELS},
    {"panels", DEV_CONV_PANELS, F32, {1, 5, 61, 61}, {2, 5, 7, 7}, {2, 2, 3, 3, 3, 3, 1, 1, 1}, SAME},
    {"1x1", DEV_CONV_DIRECT, F32, {2, 3, 4, 4}, {5, 3, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}, SAME},
    {"wide 5x5", DEV_CONV_WIDE, F32, {1, 8, 7, 16}, {3, 8, 5, 5}, {1, 1, 2, 2, 2, 2, 1, 1, 1}, SAME},
    {"wide f64", DEV_CONV_WIDE, F64, {2, 3, 9, 10}, {4, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, SAME},
    {"wide i32", DEV_CONV_WIDE, I32, {2, 3, 9, 10}, {4, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, SAME},
    {"im2col /2", DEV_CONV_IM2COL, F32, {1, 5, 11, 70}, {4, 5, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 1}, DEV_CONV_PANELS},
    {"im2col /2, 3 images", DEV_CONV_IM2COL, F32, {3, 5, 11, 70}, {4, 5, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 1}, SAME},
    {"im2col groups", DEV_CONV_IM2COL, F64, {1, 4, 7, 6}, {6, 2, 2, 3}, {2, 1, 1, 0, 2, 1, 2, 1, 2}, DEV_CONV_PANELS},
};

static int64_t out_dim(int64_t in, int64_t p0, int64_t p1, int64_t k, int64_t d, int64_t s)
{
    return (in + p0 + p1 - (d * (k - 1) + 1)) / s + 1;
}

START_TEST(test_conv_plan_taken)
{
    for (int threaded = 0; threaded <= 1; threaded++)
        for (size_t ci = 0; ci < UT_COUNTOF(plan_cases); ci++) {
            const int64_t *xd = plan_cases[ci].x, *wd = plan_cases[ci].w, *p = plan_cases[ci].p;
            dev_conv_shape sh = {.dtype = plan_cases[ci].dt, .N = xd[0], .C = xd[1], .H = xd[2], .W = xd[3],
                                 .O = wd[0], .Cg = wd[1], .KH = wd[2], .KW = wd[3],
                                 .OH = out_dim(xd[2], p[2], p[4], wd[2], p[6], p[0]),
                                 .OW = out_dim(xd[3], p[3], p[5], wd[3], p[7], p[1])};
            memcpy(sh.p, p, sizeof sh.p);
            if (threaded)
                dev_par_set_runner(&runner);
            dev_conv_plan plan;
            dev_conv_plan_make(&sh, dev_par_width(), &plan);
            const dev_conv_kernel want =
                threaded && plan_cases[ci].threaded ? plan_cases[ci].threaded : plan_cases[ci].kernel;
            ck_assert_msg(plan.kernel == want, "%s%s: planned kernel %d, want %d", plan_cases[ci].name,
                          threaded ? " (threads)" : "", (int)plan.kernel, (int)want);
            dev_value in[3] = {big(sh.dtype, 4, xd, 1), big(sh.dtype, 4, wd, 2), ivec(p, 9)}, o;
            dev_conv_count(true);
            const tfvm_status st = dev_cpu_tensor(ISA_CONV2D, 0, in, 3, &o, NULL, msg, sizeof msg);
            dev_par_set_runner(NULL);
            ck_assert_msg(st == TFVM_OK, "%s: %s", plan_cases[ci].name, msg);
            for (int k = 0; k < DEV_CONV_KERNELS; k++)
                ck_assert_msg(dev_conv_counted((dev_conv_kernel)k) == (k == (int)plan.kernel),
                              "%s%s: kernel %d ran %llu times (planned %d)", plan_cases[ci].name,
                              threaded ? " (threads)" : "", k,
                              (unsigned long long)dev_conv_counted((dev_conv_kernel)k), (int)plan.kernel);
            dev_conv_count(false);
            dev_value_release(&o);
            release_all(in, 3);
        }
}
END_TEST

/* What `tfvm check` says of a layer on 2 threads is what its loop does:
 * a depthwise layer splits when its work, taps and elements moved both
 * counted, is worth two chunks (72 channels of 56x56 at stride 2: 0.5 M
 * taps, 45 us on one thread; counted by taps alone it ran whole), 16
 * channels of 7x7 do not; a split product only where it splits at all
 * (matmul.c's rule): squeeze-excite's 16 -> 8 on 1x1 runs whole, 16 -> 72
 * on 56x56 splits. */
START_TEST(test_split_words)
{
    static const struct {
        int64_t N, C, O, H, K, s, G;
        dev_conv_kernel kernel;
        const char *words;
    } cases[] = {{1, 72, 72, 56, 3, 2, 72, DEV_CONV_DEPTHWISE, "2 threads: 5 channel blocks in parallel"},
                 {1, 16, 16, 7, 3, 1, 16, DEV_CONV_DEPTHWISE, "1 of 2 threads: too little work to split"},
                 {1, 16, 8, 1, 1, 1, 1, DEV_CONV_DIRECT, "1 of 2 threads: too little work to split"},
                 {1, 16, 72, 56, 1, 1, 1, DEV_CONV_DIRECT, "2 threads: each product split"},
                 /* images in parallel, when each is worth a piece */
                 {4, 64, 64, 56, 1, 1, 1, DEV_CONV_DIRECT, "2 threads: 4 images in parallel"},
                 {4, 8, 8, 6, 1, 1, 1, DEV_CONV_DIRECT, "1 of 2 threads: too little work to split"},
                 {4, 64, 64, 28, 3, 1, 1, DEV_CONV_F32, "2 threads: 4 images in parallel"},
                 {4, 4, 4, 8, 3, 1, 1, DEV_CONV_F32, "1 of 2 threads: too little work to split"}};
    for (size_t ci = 0; ci < UT_COUNTOF(cases); ci++) {
        const int64_t C = cases[ci].C, H = cases[ci].H, K = cases[ci].K, s = cases[ci].s, pad = K / 2;
        const int64_t OH = (H + 2 * pad - K) / s + 1;
        dev_conv_shape sh = {.dtype = F32, .N = cases[ci].N, .C = C, .H = H, .W = H, .O = cases[ci].O, .Cg = C / cases[ci].G,
                             .KH = K, .KW = K, .OH = OH, .OW = OH, .p = {s, s, pad, pad, pad, pad, 1, 1, cases[ci].G}};
        dev_conv_plan plan;
        dev_conv_plan_make(&sh, 2, &plan);
        ck_assert_int_eq(plan.kernel, cases[ci].kernel);
        if (plan.kernel == DEV_CONV_DEPTHWISE) {
            if (plan.dw.cb != 16)
                continue; /* (the words count blocks of 16: AVX-512) */
            const int64_t taps = C * OH * OH * K * K, cost = dev_dw_item_cost(&plan.dw) * plan.items;
            ck_assert_msg(cost > taps, "case %zu: cost %lld", ci, (long long)cost);
        }
        char buf[256];
        dev_conv_plan_str(&plan, &sh, true, buf, sizeof buf);
        ck_assert_msg(strstr(buf, cases[ci].words) != NULL, "case %zu: %s", ci, buf);
    }
    ck_assert_int_eq(dev_kpieces(5, 101606, DEV_KPAR_MACS, 2), 1); /* the taps alone, 72 channels */
    ck_assert_int_eq(dev_kpieces(5, 600000, DEV_KPAR_MACS, 2), 5);
    ck_assert_int_eq(dev_kpieces(100, 1 << 20, DEV_KPAR_MACS, 2), 8);
    ck_assert_int_eq(dev_kpieces(100, 1 << 20, DEV_KPAR_MACS, 1), 1);
    const dev_kmm small = {.dtype = F32, .M = 8, .N = 1, .K = 16}, big = {.dtype = F32, .M = 72, .N = 3136, .K = 16};
    ck_assert(!dev_kmm_splits(&small, false, 2));
    ck_assert(dev_kmm_splits(&big, false, 2));
    ck_assert(!dev_kmm_splits(&big, false, 1));
}
END_TEST

/* Depthwise layers with fewer channel blocks than threads, or fewer than
 * two a thread that do not share out evenly, split by row strips (each
 * strip an item), the others by blocks; either way the items' spans cover
 * the output once. */
START_TEST(test_dw_strips)
{
    /* strips16 where the blocks are 16 channels (AVX-512), strips8 where
     * they are 8 (AVX2): the same rule over a different count of blocks */
    static const struct {
        int64_t N, C;
        unsigned threads;
        bool strips16, strips8;
    } cases[] = {{1, 16, 1, false, false}, {1, 16, 2, true, false},  {1, 32, 2, false, false},
                 {1, 32, 4, true, false},  {2, 16, 2, false, false}, {1, 40, 4, true, true},
                 {1, 48, 2, true, false},  {1, 48, 1, false, false}, {1, 64, 4, false, false},
                 {1, 80, 4, true, false},  {1, 80, 2, false, false}, {3, 16, 2, true, false},
                 {1, 8, 2, true, true},    {1, 24, 2, false, true}};
    unsigned checked = 0;
    for (int path = 0; path < 2; path++) {
        dev_dw_force(path);
        for (size_t ci = 0; ci < UT_COUNTOF(cases); ci++) {
            const int64_t N = cases[ci].N, C = cases[ci].C;
            dev_conv_shape sh = {.dtype = F32, .N = N, .C = C, .H = 112, .W = 112, .O = C, .Cg = 1, .KH = 3, .KW = 3,
                                 .OH = 112, .OW = 112, .p = {1, 1, 1, 1, 1, 1, 1, 1, C}};
            dev_conv_plan plan;
            dev_conv_plan_make(&sh, cases[ci].threads, &plan);
            ck_assert_int_eq(plan.kernel, DEV_CONV_DEPTHWISE);
            if (!plan.dw.cb || (plan.dw.vl != 16 && plan.dw.vl != 8))
                continue; /* (a layout forced elsewhere, or no vectors here) */
            if (path == 0 && plan.dw.vl == 8)
                break; /* (no AVX-512 here: path 1 checks these) */
            const bool strips = plan.dw.vl == 16 ? cases[ci].strips16 : cases[ci].strips8;
            ck_assert_msg(plan.dw.strips == strips, "case %zu, %d lanes: strips %d", ci, (int)plan.dw.vl,
                          (int)plan.dw.strips);
            const int64_t blocks = N * ((C + plan.dw.cb - 1) / plan.dw.cb);
            const int64_t per = strips ? (112 + plan.dw.strip - 1) / plan.dw.strip : 1;
            ck_assert_int_eq(plan.items, blocks * per);
            char buf[256];
            dev_conv_plan_str(&plan, &sh, true, buf, sizeof buf);
            if (cases[ci].threads > 1)
                ck_assert_msg(strstr(buf, strips ? "row strips of channel blocks in parallel"
                                                 : " channel blocks in parallel") != NULL,
                              "case %zu: %s", ci, buf);
            /* every output element in exactly one item's span */
            static unsigned char seen[2 * 48 * 112 * 112];
            memset(seen, 0, sizeof seen);
            for (int64_t it = 0; it < plan.items; it++) {
                int64_t row0, n, col0, ncols;
                dev_dw_item_span(&plan.dw, it, &row0, &n, &col0, &ncols);
                for (int64_t r = row0; r < row0 + n; r++)
                    for (int64_t c = col0; c < col0 + ncols; c++)
                        seen[r * 112 * 112 + c]++;
            }
            for (int64_t i = 0; i < N * C * 112 * 112; i++)
                ck_assert_msg(seen[i] == 1, "case %zu: element %lld in %d items", ci, (long long)i, seen[i]);
            checked++;
        }
    }
    dev_dw_force(0);
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        ck_assert_uint_ge(checked, UT_COUNTOF(cases));
#endif
}
END_TEST

/* The 2x2 stride-2 pooling path against the general one (a 12-entry p with
 * explicit dilation 1 takes the same shape through the general loop only
 * when ceil_mode is set, so compare with hand values instead). */
START_TEST(test_pool2)
{
    OK(ISA_MAXPOOL, 0, (T(F32, (1, 1, 2, 5), 1, 5, -2, 0, 9, 3, 2, -0.5, -1, 7), IV(2, 2, 2, 2, 0, 0, 0, 0)), F32,
       (1, 1, 1, 2), 5, 0);
    OK(ISA_MAXPOOL, 0, (T(F64, (1, 2, 2, 2), 1, NAN, 2, 3, -1, -2, -3, -4), IV(2, 2, 2, 2, 0, 0, 0, 0)), F64,
       (1, 2, 1, 1), NAN, -1);
    OK(ISA_AVGPOOL, 0, (T(F32, (1, 1, 3, 4), 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 9), IV(2, 2, 2, 2, 0, 0, 0, 0)), F32,
       (1, 1, 1, 2), 3.5, 5.5);
}
END_TEST

/* The 2x2 stride-2 windows on f32 (on each vector build the CPU has:
 * AVX-512, AVX2, portable) against the loop's rules, bit for bit: the
 * first of equal elements (+0 and -0), NaN when the window holds one, sums
 * in order; odd widths, rows of more than 16 outputs, rows of 1 to 7. */
START_TEST(test_pool2_f32)
{
    static const int64_t shapes[][4] = {{2, 3, 6, 40}, {1, 2, 5, 33}, {1, 1, 4, 4},  {3, 2, 14, 14},
                                        {1, 1, 2, 66}, {1, 3, 6, 3},  {2, 2, 4, 11}, {1, 2, 8, 18}};
    for (int path = 0; path <= 2; path++)
        for (size_t si = 0; si < UT_COUNTOF(shapes); si++)
            for (int avg = 0; avg <= 1; avg++) {
                dev_pool_force(path);
                dev_pool_plan plan;
                dev_pool_plan_make(F32, avg, shapes[si], DIMS(2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0), shapes[si][2] / 2,
                                   shapes[si][3] / 2, 1, &plan);
                ck_assert_int_eq(plan.kernel, DEV_POOL_2X2);
                ck_assert_int_eq(plan.avx512, dev_kpath(path) == 0);
                ck_assert_int_eq(plan.avx2, dev_kpath(path) == 1);
                dev_value x = randt(F32, 4, shapes[si], (unsigned)si + 20), o;
                float *xv = x.u.t->data;
                for (int64_t i = 0; i < x.u.t->count; i++)
                    if (si % 3 == 0) /* windows of +0, -0 and -1: which zero comes first decides */
                        xv[i] = (i * 7 / 3) % 3 == 0 ? -0.0f : (i * 5 / 2) % 3 == 1 ? 0.0f : -1.0f;
                    else if (i % 13 == 5)
                        xv[i] = NAN;
                    else if (i % 7 == 2)
                        xv[i] = i % 2 ? -0.0f : 0.0f;
                const int64_t H = shapes[si][2], W = shapes[si][3], OH = H / 2, OW = W / 2;
                const int64_t planes = shapes[si][0] * shapes[si][1];
                static float want[8192];
                for (int64_t pl = 0; pl < planes; pl++)
                    for (int64_t oh = 0; oh < OH; oh++)
                        for (int64_t ow = 0; ow < OW; ow++) {
                            const float *r0 = xv + (pl * H + 2 * oh) * W + 2 * ow, *r1 = r0 + W;
                            const float x0 = r0[0], x1 = r0[1], x2 = r1[0], x3 = r1[1];
                            float m = x0;
                            if (avg) {
                                m = (((x0 + x1) + x2) + x3) / 4;
                            } else {
                                m = x1 > m ? x1 : m;
                                m = x2 > m ? x2 : m;
                                m = x3 > m ? x3 : m;
                                if (isnan(x0) || isnan(x1) || isnan(x2) || isnan(x3))
                                    m = NAN;
                            }
                            want[(pl * OH + oh) * OW + ow] = m;
                        }
                ck_assert_int_eq(C(avg ? ISA_AVGPOOL : ISA_MAXPOOL, 0, &o, x, IV(2, 2, 2, 2, 0, 0, 0, 0)), TFVM_OK);
                ck_assert_int_eq(o.u.t->count, planes * OH * OW);
                ck_assert_msg(memcmp(o.u.t->data, want, (size_t)o.u.t->count * sizeof(float)) == 0,
                              "path %d shape %zu %s: results differ", path, si, avg ? "avgpool" : "maxpool");
                dev_value_release(&o);
            }
    dev_pool_force(0);
}
END_TEST

static Suite *fused_suite(void)
{
    Suite *s = suite_create("fused");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_matmul_hand);
    tcase_add_test(tc, test_matmul_tiled);
    tcase_add_test(tc, test_matmul_errors);
    tcase_add_test(tc, test_same_as_unfused);
    tcase_add_test(tc, test_conv_exact);
    tcase_add_test(tc, test_conv_residual);
    tcase_add_test(tc, test_conv_tprod_stacks);
    tcase_add_test(tc, test_conv_channels_last);
    tcase_add_test(tc, test_conv_f32_kernels);
    tcase_add_test(tc, test_conv_depthwise);
    tcase_add_test(tc, test_conv_fewch);
    tcase_add_test(tc, test_rnn_cells_same_as_unfused);
    tcase_add_test(tc, test_rnn_steps_same_as_cells);
    tcase_add_test(tc, test_rnn_cells_errors);
    tcase_add_test(tc, test_maxpool_grid);
    tcase_add_test(tc, test_maxpool_3x3);
    tcase_add_test(tc, test_avgpool_rows);
    tcase_add_test(tc, test_conv_scale);
    tcase_add_test(tc, test_conv_errors);
    tcase_add_test(tc, test_asm_round_trip);
    tcase_add_test(tc, test_parallel_paths);
    tcase_add_test(tc, test_conv_plan_taken);
    tcase_add_test(tc, test_dw_strips);
    tcase_add_test(tc, test_split_words);
    tcase_add_test(tc, test_pool2);
    tcase_add_test(tc, test_pool2_f32);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(fused_suite()); }
