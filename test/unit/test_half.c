/* test/unit/test_half.c — f16 and bf16 (util/half.h, devices/cpu/half.c):
 * hand-checked roundings, every f16 both ways, and the F16C path against the
 * portable one through CAST (the portable path alone where the CPU has no
 * F16C). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "devices/cpu/cpu.h"
#include "devices/cpu/half.h"
#include "testutil.h"
#include "util/half.h"

START_TEST(test_f16_roundings)
{
    static const struct { float x; uint16_t want; } cases[] = {
        {0.0f, 0x0000},       {-0.0f, 0x8000},      {1.0f, 0x3c00},         {-2.0f, 0xc000},
        {65504.0f, 0x7bff},   {65519.0f, 0x7bff},   {65520.0f, 0x7c00},     {1e9f, 0x7c00},
        {INFINITY, 0x7c00},   {-INFINITY, 0xfc00},  {2049.0f, 0x6800},      {2051.0f, 0x6802},
        {0x1p-24f, 0x0001},   {0x1p-25f, 0x0000},   {0x1.8p-25f, 0x0001},   {0x1p-14f, 0x0400},
        {0x1.ff8p-15f, 0x03ff}, {0x1.ffcp-15f, 0x0400}, /* the largest subnormal; a tie above it goes up */
        {0.1f, 0x2e66},       {1.0f + 0x1p-11f, 0x3c00}, {1.0f + 0x3p-11f, 0x3c02},
    };
    for (size_t i = 0; i < UT_COUNTOF(cases); i++)
        ck_assert_msg(ut_f32_to_f16(cases[i].x) == cases[i].want, "%a: got 0x%04x, want 0x%04x", (double)cases[i].x,
                      ut_f32_to_f16(cases[i].x), cases[i].want);
    ck_assert_uint_eq(ut_f32_to_f16(NAN) & 0x7e00, 0x7e00);
    /* f64 rounds once: through f32 by plain rounding this would tie to 1.0 */
    ck_assert_uint_eq(ut_f64_to_f16(1.0 + 0x1p-11 + 0x1p-40), 0x3c01);
    ck_assert_uint_eq(ut_f64_to_f16(1.0 + 0x1p-11), 0x3c00);
}
END_TEST

START_TEST(test_bf16_roundings)
{
    static const struct { float x; uint16_t want; } cases[] = {
        {1.0f, 0x3f80}, {-1.0f, 0xbf80}, {1.0f + 0x1p-8f, 0x3f80}, {1.0f + 0x3p-8f, 0x3f82},
        {3.0e38f, 0x7f62}, {INFINITY, 0x7f80}, {0x1p-133f, 0x0001},
    };
    for (size_t i = 0; i < UT_COUNTOF(cases); i++)
        ck_assert_msg(ut_f32_to_bf16(cases[i].x) == cases[i].want, "%a: got 0x%04x, want 0x%04x", (double)cases[i].x,
                      ut_f32_to_bf16(cases[i].x), cases[i].want);
    ck_assert_uint_eq(ut_f32_to_bf16(NAN) & 0x7fc0, 0x7fc0);
    ck_assert(ut_bf16_to_f32(0x3f82) == 1.0f + 0x1p-6f);
}
END_TEST

/* Every f16 widens exactly and narrows back to itself (NaNs stay NaN). */
START_TEST(test_f16_every_value)
{
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = ut_f16_to_f32((uint16_t)h);
        const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        ck_assert_msg(nan == (bool)isnan(f), "0x%04x", h);
        if (!nan)
            ck_assert_msg(ut_f32_to_f16(f) == h, "0x%04x -> %a -> 0x%04x", h, (double)f, ut_f32_to_f16(f));
        const float b = ut_bf16_to_f32((uint16_t)h);
        if (!isnan(b))
            ck_assert_msg(ut_f32_to_bf16(b) == h, "bf16 0x%04x", h);
    }
}
END_TEST

/* CAST of a tensor on the path `isa`: f16 -> f32 of every f16, f32 -> f16 and
 * bf16 of a spread of f32 bit patterns (ties and subnormals among them). */
static void cast_all(dev_half_isa isa, float *wide, uint16_t *h16, uint16_t *hb16, size_t nf)
{
    ck_assert(dev_half_force(isa));
    static const tfvm_allocator alloc = {0};
    char msg[128];
    int64_t d16[1] = {65536}, df[1] = {(int64_t)nf};
    tfvm_tensor *h = tfvm_tensor_new(TFVM_F16, 1, d16, NULL), *f = tfvm_tensor_new(TFVM_F32, 1, df, NULL);
    for (uint32_t i = 0; i < 65536; i++)
        ((uint16_t *)h->data)[i] = (uint16_t)i;
    for (size_t i = 0; i < nf; i++) {
        uint32_t bits = (uint32_t)(i * 2654435761u) ^ (uint32_t)(i << 13);
        memcpy((float *)f->data + i, &bits, 4);
    }
    dev_value in = {.dtype = TFVM_F16, .is_tensor = 1, .u.t = h}, out;
    ck_assert_int_eq(dev_cpu_elementwise(ISA_CAST, TFVM_F32, &in, &out, &alloc, msg, sizeof msg), TFVM_OK);
    memcpy(wide, out.u.t->data, 65536 * 4);
    dev_value_release(&out);
    in = (dev_value){.dtype = TFVM_F32, .is_tensor = 1, .u.t = f};
    ck_assert_int_eq(dev_cpu_elementwise(ISA_CAST, TFVM_F16, &in, &out, &alloc, msg, sizeof msg), TFVM_OK);
    memcpy(h16, out.u.t->data, nf * 2);
    dev_value_release(&out);
    ck_assert_int_eq(dev_cpu_elementwise(ISA_CAST, TFVM_BF16, &in, &out, &alloc, msg, sizeof msg), TFVM_OK);
    memcpy(hb16, out.u.t->data, nf * 2);
    dev_value_release(&out);
    tfvm_tensor_free(h);
    tfvm_tensor_free(f);
    dev_half_force(DEV_HALF_AUTO);
}

START_TEST(test_paths_agree)
{
    enum { NF = 1 << 16 };
    static float w1[65536], w2[65536];
    static uint16_t a1[NF], a2[NF], b1[NF], b2[NF];
    cast_all(DEV_HALF_PORTABLE, w1, a1, b1, NF);
    for (uint32_t i = 0; i < 65536; i++) { /* the portable path is util/half.h's */
        const float want = ut_f16_to_f32((uint16_t)i);
        ck_assert_msg(memcmp(&w1[i], &want, 4) == 0, "f16 0x%04x", i);
    }
    if (!dev_half_force(DEV_HALF_F16C)) {
        printf("test_half: no F16C on this CPU: the portable path alone\n");
        return;
    }
    cast_all(DEV_HALF_F16C, w2, a2, b2, NF);
    for (uint32_t i = 0; i < 65536; i++)
        ck_assert_msg(memcmp(&w1[i], &w2[i], 4) == 0, "f16 0x%04x to f32: portable and F16C differ", i);
    for (uint32_t i = 0; i < NF; i++) {
        ck_assert_msg(a1[i] == a2[i], "f32 #%u to f16: portable 0x%04x, F16C 0x%04x", i, a1[i], a2[i]);
        ck_assert_msg(b1[i] == b2[i], "f32 #%u to bf16: portable 0x%04x, vector 0x%04x", i, b1[i], b2[i]);
    }
}
END_TEST

/* The public constructors and reader of half scalars */
START_TEST(test_api_scalars)
{
    tfvm_value h = tfvm_f16(2049), b = tfvm_bf16(1.0 + 0x3p-8);
    ck_assert_int_eq(h.dtype, TFVM_F16);
    ck_assert_uint_eq(h.as.u16, 0x6800);
    ck_assert(tfvm_half_value(h) == 2048.0);
    ck_assert_int_eq(b.dtype, TFVM_BF16);
    ck_assert(tfvm_half_value(b) == 1.0 + 0x1p-6);
    ck_assert(isnan(tfvm_half_value(tfvm_f32(1))));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("half");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_f16_roundings);
    tcase_add_test(tc, test_bf16_roundings);
    tcase_add_test(tc, test_f16_every_value);
    tcase_add_test(tc, test_paths_agree);
    tcase_add_test(tc, test_api_scalars);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
