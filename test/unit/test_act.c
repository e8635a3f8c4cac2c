/* test_act.c — f32 tanh (devices/cpu/act.c): the vector path (AVX2+FMA where
 * the CPU has them) and the scalar one (dev_tanhf, every CPU) both agree
 * with the correctly rounded tanh but for rare near-ties, at every length
 * (the last 1-3 elements go through the vector path too) and in place. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "devices/cpu/act.h"
#include "testutil.h"

static float from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* Whether r is (float)tanh(x) or one ulp from it (a near-tie). */
static bool close_to_tanh(float x, float r, bool *exact)
{
    float want = (float)tanh((double)x);
    *exact = memcmp(&want, &r, sizeof r) == 0;
    return *exact || nextafterf(want, INFINITY) == r || nextafterf(want, -INFINITY) == r;
}

/* Every 4099th bit pattern of the positive and negative floats. */
START_TEST(matches_tanh)
{
    enum { N = 4096 };
    static float in[N], out[N];
    long n = 0, vec_off = 0, scal_off = 0;
    for (uint64_t b = 0; b < 0x100000000u; b += (uint64_t)N * 4099) {
        for (int j = 0; j < N; j++)
            in[j] = from_bits((uint32_t)(b + (uint64_t)j * 4099));
        dev_tanhf_n(out, in, N);
        for (int j = 0; j < N; j++) {
            bool exact;
            if (isnan(in[j])) {
                ck_assert(isnan(out[j]) && isnan(dev_tanhf(in[j])));
                continue;
            }
            n++;
            ck_assert_msg(close_to_tanh(in[j], out[j], &exact), "tanh(%a): %a", (double)in[j], (double)out[j]);
            vec_off += !exact;
            ck_assert_msg(close_to_tanh(in[j], dev_tanhf(in[j]), &exact), "scalar tanh(%a)", (double)in[j]);
            scal_off += !exact;
        }
    }
    ck_assert_int_gt(n, 1000000);
    /* 24 (vector) and 12 (scalar) of all 2^32 are off by an ulp */
    ck_assert_int_le(vec_off, 2);
    ck_assert_int_le(scal_off, 2);
}
END_TEST

/* Lengths 0..37 in place, the signs of zero, the ends, NaN. */
START_TEST(lengths_and_edges)
{
    float x[40], y[40];
    for (int n = 0; n <= 37; n++) {
        for (int i = 0; i < 40; i++)
            x[i] = y[i] = (float)(i - 20) * 0.37f;
        dev_tanhf_n(x, x, (size_t)n);
        for (int i = 0; i < 40; i++) {
            bool exact;
            if (i < n)
                ck_assert(close_to_tanh(y[i], x[i], &exact));
            else
                ck_assert(x[i] == y[i]); /* untouched past n */
        }
    }
    float e[6] = {0.0f, -0.0f, 20.0f, -INFINITY, NAN, 1e-30f}, r[6];
    dev_tanhf_n(r, e, 6);
    ck_assert(r[0] == 0 && !signbit(r[0]));
    ck_assert(r[1] == 0 && signbit(r[1]));
    ck_assert(r[2] == 1.0f && r[3] == -1.0f);
    ck_assert(isnan(r[4]));
    ck_assert(r[5] == 1e-30f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("act");
    TCase *tc = tcase_create("tanh");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, matches_tanh);
    tcase_add_test(tc, lengths_and_edges);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
