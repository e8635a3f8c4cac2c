/* test_act.c — the f32 activations of devices/cpu/act.c on each of its
 * paths (AVX-512, AVX2+FMA, portable; a path the CPU lacks is skipped and
 * said so): exp, sigmoid, erf, tanh and log within their stated ulps of the exact
 * value over every 257th float (infinities, NaN, signed zeros, denormals,
 * huge |x| included), AVX-512 and AVX2 the same bits, every length and in
 * place. */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "devices/cpu/act.h"
#include "util/util.h"
#include "testutil.h"

static float from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* ---- exp, sigmoid, erf, tanh, SiLU, GELU on every path ------------------------------ */
static const char *const isa_names[] = {"auto", "portable", "avx2", "avx512"};

/* The distance of r from the exact value `want`, in units of the last place
 * of the f32 nearest to it (the smallest denormal below 2^-126); 0 when
 * both are the same infinity or NaN, huge when only one is. */
static double ulps(float r, double want)
{
    if (isnan(want))
        return isnan(r) ? 0 : 1e30;
    if (fabs(want) > 0x1.fffffeffffffffp127)
        return isinf(r) && (r > 0) == (want > 0) ? 0 : 1e30;
    if (isnan(r) || isinf(r))
        return 1e30;
    const float w = (float)want;
    int e;
    frexpf(w, &e);
    const double ulp = fabsf(w) < 0x1p-126f ? 0x1p-149 : ldexp(1.0, e - 24);
    return fabs((double)r - want) / ulp;
}

static double ref_sigmoid(double x) { return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); }

static const struct {
    const char *name;
    void (*fn)(float *, const float *, size_t);
    double (*ref)(double);
    double max_ulp; /* stated in act.c; the portable code may round a*b + c twice */
    double max_ulp_portable;
    bool odd; /* f(-0) is -0 */
} fns[] = {
    {"exp", dev_expf_n, exp, 1.0, 1.5, false},
    {"sigmoid", dev_sigmoidf_n, ref_sigmoid, 2.5, 2.5, false},
    {"erf", dev_erff_n, erf, 1.5, 2.0, true},
    {"tanh", dev_tanhf_n, tanh, 1.5, 1.5, true},
    {"log", dev_logf_n, log, 1.0, 1.0, false},
};

/* Every 257th bit pattern, and the values named, against the double
 * reference; the worst error must be within the bound, and each path must
 * be within it (an ulp bound that nothing approaches would be no test: the
 * worst is also at least half the bound) */
START_TEST(accuracy)
{
    enum { N = 4096 };
    static float in[N], out[N];
    static const float named[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0x1p-149f, -0x1p-149f, 0x1.fffffcp-127f,
                                  0x1p-126f, 0x1p-30f, 1e-8f, 0.875f, -0.875f, 3.92f, -3.92f, 88.7f, 88.73f, -87.3f,
                                  -103.0f, -104.5f, 89.0f, -89.0f, 1e30f, -1e30f, 0x1.fffffep127f, -0x1.fffffep127f,
                                  0.75f, -0.75f, 0x1.7ffffep-1f, 9.1f, -9.1f};
    for (int isa = DEV_ACT_PORTABLE; isa <= DEV_ACT_AVX512; isa++) {
        if (!dev_act_force((dev_act_isa)isa)) {
            printf("test_act: no %s on this CPU, its path skipped\n", isa_names[isa]);
            continue;
        }
        for (size_t f = 0; f < UT_COUNTOF(fns); f++) {
            const double bound = isa == DEV_ACT_PORTABLE ? fns[f].max_ulp_portable : fns[f].max_ulp;
            double worst = 0;
            float worst_x = 0;
            for (uint64_t b = 0; b < 0x100000000u + (uint64_t)N * 257; b += (uint64_t)N * 257) {
                int m = N;
                if (b >= 0x100000000u) { /* the last round: the named values */
                    m = (int)UT_COUNTOF(named);
                    memcpy(in, named, sizeof named);
                } else {
                    for (int j = 0; j < N; j++)
                        in[j] = from_bits((uint32_t)(b + (uint64_t)j * 257));
                }
                fns[f].fn(out, in, (size_t)m);
                for (int j = 0; j < m; j++) {
                    const double u = ulps(out[j], fns[f].ref((double)in[j]));
                    if (u > worst) {
                        worst = u;
                        worst_x = in[j];
                    }
                    /* (per element a plain test: check's assertions cost a system call each) */
                    if (u > bound)
                        ck_abort_msg("%s %s(%a) = %a, want %a: %.2f ulp", isa_names[isa], fns[f].name,
                                     (double)in[j], (double)out[j], fns[f].ref((double)in[j]), u);
                    if (in[j] == 0 && fns[f].odd && (out[j] != 0 || signbit(out[j]) != signbit(in[j])))
                        ck_abort_msg("%s %s(%a) = %a", isa_names[isa], fns[f].name, (double)in[j], (double)out[j]);
                }
            }
            ck_assert_msg(worst >= bound / 2, "%s %s: worst %.2f ulp, the bound %.1f is loose", isa_names[isa],
                          fns[f].name, worst, bound);
            printf("test_act: %s %s: at most %.2f ulp (at %a)\n", isa_names[isa], fns[f].name, worst, (double)worst_x);
        }
    }
    dev_act_force(DEV_ACT_AUTO);
}
END_TEST

/* AVX-512 and AVX2 compute the same fused operations: the same bits. The
 * portable path differs at most by the bounds above (checked there). */
START_TEST(paths_agree)
{
    if (!dev_act_force(DEV_ACT_AVX512) || !dev_act_force(DEV_ACT_AVX2)) {
        printf("test_act: not both AVX-512 and AVX2 on this CPU, paths_agree skipped\n");
        return;
    }
    enum { N = 4096 };
    static float in[N], a[N], b[N];
    void (*all[])(float *, const float *, size_t) = {dev_expf_n,        dev_sigmoidf_n,   dev_erff_n,
                                                     dev_siluf_n,       dev_geluf_n,      dev_tanhf_n,
                                                     dev_hardsigmoidf_n, dev_hardswishf_n, dev_relu6f_n,
                                                     dev_logf_n};
    for (size_t f = 0; f < UT_COUNTOF(all); f++)
        for (uint64_t s = 0; s < 0x100000000u; s += (uint64_t)N * 65521) {
            for (int j = 0; j < N; j++)
                in[j] = from_bits((uint32_t)(s + (uint64_t)j * 65521));
            dev_act_force(DEV_ACT_AVX512);
            all[f](a, in, N);
            dev_act_force(DEV_ACT_AVX2);
            all[f](b, in, N);
            for (int j = 0; j < N; j++)
                if (memcmp(&a[j], &b[j], sizeof a[j]) != 0 && !(isnan(a[j]) && isnan(b[j])))
                    ck_abort_msg("function %zu at %a: avx512 %a, avx2 %a", f, (double)in[j], (double)a[j],
                                 (double)b[j]);
        }
    dev_act_force(DEV_ACT_AUTO);
}
END_TEST

/* The underflow edge on every path: exp of x in (-103.97..., -87.3) is a
 * denormal, the smallest one just above -103.97; below -104 (where the
 * polynomial's input is replaced, so that no lane underflows) +0, also
 * when such lanes share a vector with others; sigmoid's negative side
 * through the same exp. */
START_TEST(underflow_edge)
{
    static const float xs[] = {-103.9f, -103.97f, -104.0f, -104.001f, -200.0f, -0x1.fffffep127f, -INFINITY,
                               -87.5f,  1.0f,     -103.9f, -1e30f,    -103.97f, -150.0f, -88.0f, -104.5f, 0.0f};
    static const uint32_t want[] = {0x00000001, 0x00000001, 0, 0, 0, 0, 0, 0x006cb2bc, 0x402df854, 0x00000001, 0,
                                    0x00000001, 0, 0x0041edc4, 0, 0x3f800000};
    for (int isa = DEV_ACT_PORTABLE; isa <= DEV_ACT_AVX512; isa++) {
        if (!dev_act_force((dev_act_isa)isa))
            continue;
        float e[16], g[16];
        dev_expf_n(e, xs, 16);
        for (int j = 0; j < 16; j++) {
            uint32_t b;
            memcpy(&b, &e[j], sizeof b);
            ck_assert_msg(b == want[j], "%s: exp(%a) = %a, want bits %08x", isa_names[isa], (double)xs[j], (double)e[j],
                          want[j]);
        }
        dev_sigmoidf_n(g, xs, 16);
        for (int j = 0; j < 16; j++)
            if (xs[j] < -104.0f)
                ck_assert_msg(g[j] == 0 && !signbit(g[j]), "%s: sigmoid(%a) = %a", isa_names[isa], (double)xs[j],
                              (double)g[j]);
    }
    dev_act_force(DEV_ACT_AUTO);
}
END_TEST

/* dev_expf_sub_sum on every path and length 0..70: the exponentials bit for
 * bit EXP of x - m (dev_expf_n on the differences), the sum the documented
 * order's (eight partial sums over whole groups of 8, paired, then the
 * rest), inf, huge and masked (-3.4e38) elements among them */
START_TEST(exp_sub_sum)
{
    float x[72], d[72], want[72], got[72];
    uint32_t seed = 5;
    for (int j = 0; j < 72; j++) {
        seed = seed * 1103515245u + 12345u;
        /* the eight lanes' exponentials some 2^10 apart (e^-24 .. e^25) */
        x[j] = (float)(j % 8) * 7.0f - 24.0f + (float)(seed >> 8 & 0xFFFF) / 65536.0f;
        if (seed % 7 == 0)
            x[j] = -0x1.fffffep127f;
    }
    x[5] = -INFINITY;
    x[40] = 1e30f;
    for (int isa = DEV_ACT_PORTABLE; isa <= DEV_ACT_AVX512; isa++) {
        if (!dev_act_force((dev_act_isa)isa))
            continue;
        for (size_t n = 0; n <= 70; n++) {
            const float m = n > 40 ? 3.5f : 0.25f;
            for (size_t j = 0; j < n; j++)
                d[j] = x[j] - m;
            dev_expf_n(want, d, n);
            double p[8] = {0}, ref;
            size_t j = 0;
            for (; j + 8 <= n; j += 8)
                for (int l = 0; l < 8; l++)
                    p[l] += (double)want[j + l];
            ref = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
            for (; j < n; j++)
                ref += (double)want[j];
            memset(got, 0x55, sizeof got);
            const double sum = dev_expf_sub_sum(got, x, m, n);
            ck_assert_msg(memcmp(&sum, &ref, sizeof sum) == 0, "%s n=%zu: sum %a, want %a", isa_names[isa], n, sum, ref);
            ck_assert_msg(memcmp(got, want, n * sizeof *got) == 0, "%s n=%zu: exponentials differ", isa_names[isa], n);
            uint32_t past;
            memcpy(&past, &got[n], sizeof past);
            ck_assert_msg(past == 0x55555555u, "%s n=%zu: wrote past n", isa_names[isa], n);
        }
    }
    dev_act_force(DEV_ACT_AUTO);
}
END_TEST

/* the same bits, or both NaN (log of a negative) */
static bool same(float a, float b) { return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b)); }

/* Every length 0..40, in place and not, on each path: element i is the same
 * whatever the length and its position (the tails go through the vector
 * code), and nothing past n is written. SiLU is x * sigmoid(x) and GELU
 * (x * (erf(x / sqrt2) + 1)) * 0.5 exactly, in f32. */
START_TEST(lengths_and_compositions)
{
    float x[48], y[48], one[48], sig[48], er[48];
    for (int isa = DEV_ACT_PORTABLE; isa <= DEV_ACT_AVX512; isa++) {
        if (!dev_act_force((dev_act_isa)isa))
            continue;
        for (size_t f = 0; f < UT_COUNTOF(fns); f++)
            for (int n = 0; n <= 40; n++) {
                for (int i = 0; i < 48; i++) {
                    x[i] = (float)(i - 20) * 0.37f;
                    y[i] = -7.0f;
                }
                for (int i = 0; i < 48; i++)
                    fns[f].fn(&one[i], &x[i], 1);
                fns[f].fn(y, x, (size_t)n);
                for (int i = 0; i < 48; i++)
                    ck_assert_msg(i < n ? same(y[i], one[i]) : y[i] == -7.0f, "%s %s n %d element %d", isa_names[isa],
                                  fns[f].name, n, i);
                fns[f].fn(x + 3, x + 3, (size_t)n); /* in place, unaligned */
                for (int i = 3; i < 3 + n; i++)
                    ck_assert_msg(same(x[i], one[i]), "%s %s in place n %d element %d", isa_names[isa], fns[f].name, n,
                                  i);
            }
        for (int i = 0; i < 48; i++) {
            x[i] = (float)(i - 24) * 0.41f;
            y[i] = x[i] / 0x1.6a09e6p0f;
        }
        dev_sigmoidf_n(sig, x, 48);
        dev_erff_n(er, y, 48);
        dev_siluf_n(one, x, 48);
        for (int i = 0; i < 48; i++)
            ck_assert_msg(one[i] == x[i] * sig[i], "%s silu(%a)", isa_names[isa], (double)x[i]);
        dev_geluf_n(one, x, 48);
        for (int i = 0; i < 48; i++)
            ck_assert_msg(one[i] == (x[i] * (er[i] + 1)) * 0.5f, "%s gelu(%a)", isa_names[isa], (double)x[i]);
    }
    dev_act_force(DEV_ACT_AUTO);
}
END_TEST

/* hardsigmoid, hardswish and relu6 are MUL, ADD, MIN and MAX as the
 * elementwise ops compute them (NaN wins, MAX (-0, 0) is +0), bit for bit
 * on every path, around their corners and on the special values. */
static float ew_min(float x, float y) { return (x < y || isnan(x)) ? x : y; }
static float ew_max(float x, float y) { return (x > y || isnan(x)) ? x : y; }
static float ref_hsig(float x)
{
    const float t = x * (float)(1.0 / 6);
    const float u = t + 0.5f;
    return ew_max(ew_min(u, 1), 0);
}

START_TEST(hard_activations)
{
    float x[64], got[64];
    int n = 0;
    static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 0x1p-149f, -0x1p-149f, 1e30f,
                                    -1e30f, 3.0f, -3.0f, 6.0f, 0x1.000002p2f, 0x1.fffffep1f, -0x1.fffffep1f};
    for (size_t i = 0; i < UT_COUNTOF(special); i++)
        x[n++] = special[i];
    while (n < 64)
        x[n] = (float)(n - 40) * 0.23f, n++;
    for (int isa = DEV_ACT_PORTABLE; isa <= DEV_ACT_AVX512; isa++) {
        if (!dev_act_force((dev_act_isa)isa))
            continue;
        for (int f = 0; f < 3; f++) {
            (f == 0 ? dev_hardsigmoidf_n : f == 1 ? dev_hardswishf_n : dev_relu6f_n)(got, x, 64);
            for (int i = 0; i < 64; i++) {
                const float want = f == 0   ? ref_hsig(x[i])
                                   : f == 1 ? x[i] * ref_hsig(x[i])
                                            : ew_min(ew_max(x[i], 0), 6);
                ck_assert_msg(memcmp(&want, &got[i], sizeof want) == 0 || (isnan(want) && isnan(got[i])),
                              "%s function %d (%a) = %a, want %a", isa_names[isa], f, (double)x[i], (double)got[i],
                              (double)want);
            }
        }
        float z = -0.0f, r;
        dev_relu6f_n(&r, &z, 1);
        ck_assert(r == 0 && !signbit(r)); /* MAX (-0, 0) is +0 */
    }
    dev_act_force(DEV_ACT_AUTO);
}
END_TEST

/* A fused epilogue's bias and activation in one pass (dev_bias_actf_n):
 * the bits of the bias added first and the activation after, on each path,
 * every length 0..40 (tails), the bias per element or one for all, in
 * place, with NaN, infinities and -0 among the values; nothing past n
 * written. */
static float relu_ref(float x) { return x < 0 ? 0.0f : x; }

START_TEST(bias_then_activation)
{
    static const char *const names[] = {"id", "relu", "sigmoid", "silu", "gelu", "hardsigmoid", "hardswish", "relu6"};
    void (*const act[])(float *, const float *, size_t) = {NULL, NULL, dev_sigmoidf_n, dev_siluf_n,
                                                            dev_geluf_n, dev_hardsigmoidf_n, dev_hardswishf_n,
                                                            dev_relu6f_n};
    static const float special[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 3.0f, -3.0f, 1e-40f, -90.0f, 88.0f};
    float c[48], want[48], b[48];
    for (int isa = DEV_ACT_PORTABLE; isa <= DEV_ACT_AVX512; isa++) {
        if (!dev_act_force((dev_act_isa)isa))
            continue;
        for (int a = 0; a < DEV_BA_COUNT; a++)
            for (int vec = 0; vec <= 1; vec++)
                for (size_t n = 0; n <= 40; n++) {
                    for (size_t i = 0; i < 48; i++) {
                        c[i] = i % 7 == 3 ? special[i % UT_COUNTOF(special)] : (float)((int)(i * 37 % 23) - 11) * 0.37f;
                        b[i] = i % 5 == 1 ? -0.0f : (float)((int)(i * 11 % 13) - 6) * 0.21f;
                    }
                    for (size_t i = 0; i < 48; i++)
                        want[i] = i < n ? c[i] + b[vec ? i : 0] : c[i];
                    if (a == DEV_BA_RELU)
                        for (size_t i = 0; i < n; i++)
                            want[i] = relu_ref(want[i]);
                    else if (act[a])
                        act[a](want, want, n);
                    dev_bias_actf_n((dev_bias_act)a, c, n, b, vec);
                    for (size_t i = 0; i < 48; i++)
                        ck_assert_msg(same(c[i], want[i]), "%s %s, bias %s, n %zu: element %zu is %a, want %a",
                                      isa_names[isa], names[a], vec ? "per element" : "one", n, i, (double)c[i],
                                      (double)want[i]);
                }
    }
    dev_act_force(DEV_ACT_AUTO);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("act");
    TCase *tv = tcase_create("vector");
    tcase_set_timeout(tv, 300);
    tcase_add_test(tv, accuracy);
    tcase_add_test(tv, paths_agree);
    tcase_add_test(tv, underflow_edge);
    tcase_add_test(tv, exp_sub_sum);
    tcase_add_test(tv, lengths_and_compositions);
    tcase_add_test(tv, hard_activations);
    tcase_add_test(tv, bias_then_activation);
    suite_add_tcase(s, tv);
    return tu_run_suite(s);
}
