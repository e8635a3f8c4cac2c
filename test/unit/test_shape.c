/* test/unit/test_shape.c — the shape rules of compiler/shape.h on known,
 * symbolic (`B`, `S` below) and unknown dims: each table row names its case
 * in the failure message. */
#include <stdio.h>
#include <string.h>

#include "compiler/shape.h"
#include "testutil.h"

#define B (-2) /* cc_dim_sym(0): checked in dimension_vectors */
#define S (-3) /* cc_dim_sym(1) */
#define U CC_DIM_ANY

/* A dimension vector from dims (a symbol or U stays one; a value >= 0 is known) */
static cc_dimvec dv(int n, const int64_t *d)
{
    cc_dimvec v;
    ck_assert(cc_dv_of_dims(n, d, &v));
    return v;
}

/* known values (negative ones too: Reshape's -1) */
static cc_dimvec kv(int n, const int64_t *x)
{
    cc_dimvec v = {.rank = 1, .n = n};
    memcpy(v.v, x, (size_t)n * sizeof *x);
    return v;
}

/* "[B, S, 16]" */
static const char *str(int n, const int64_t *d, char *buf, size_t size)
{
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int k = 0; k < n && at < size; k++) {
        const char *sep = k ? ", " : "";
        if (d[k] == B || d[k] == S)
            at += (size_t)snprintf(buf + at, size - at, "%s%s", sep, d[k] == B ? "B" : "S");
        else if (d[k] == U)
            at += (size_t)snprintf(buf + at, size - at, "%s?", sep);
        else
            at += (size_t)snprintf(buf + at, size - at, "%s%lld", sep, (long long)d[k]);
    }
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

static void want_dims(const char *name, int n, const int64_t *got, int wn, const int64_t *want)
{
    char g[128], w[128];
    ck_assert_msg(n == wn && memcmp(got, want, (size_t)n * sizeof *got) == 0, "%s: got %s, want %s", name,
                  str(n, got, g, sizeof g), str(wn, want, w, sizeof w));
}

static const struct {
    const char *name;
    int rx;
    int64_t x[4];
    int nt;
    int64_t t[4];      /* known values, except where tsym marks a dim */
    int64_t tsym[4];   /* 0: t[k] is a value; else the dim (a symbol or U) */
    int nr;
    int64_t want[4];
} reshapes[] = {
    {"[B, S, 16] to [B, S, 2, 8]", 3, {B, S, 16}, 4, {0, 0, 2, 8}, {B, S}, 4, {B, S, 2, 8}},
    {"[B, S, 16] to [0, -1, 8]: 0 copies, -1 is S*2", 3, {B, S, 16}, 3, {0, -1, 8}, {0}, 3, {B, U, 8}},
    {"[B, S, 16] to [-1, 16]: B*S unknown", 3, {B, S, 16}, 2, {-1, 16}, {0}, 2, {U, 16}},
    {"[B, S, 2, 8] to [B, -1, 16]: -1 is S", 4, {B, S, 2, 8}, 3, {0, -1, 16}, {B}, 3, {B, S, 16}},
    {"[6, 4] to [-1, 8]: -1 is 3", 2, {6, 4}, 2, {-1, 8}, {0}, 2, {3, 8}},
    {"[6, 4] to [0, 0]: 0 copies", 2, {6, 4}, 2, {0, 0}, {0}, 2, {6, 4}},
    {"[?, 4] to [-1, 2]: unknown stays", 2, {U, 4}, 2, {-1, 2}, {0}, 2, {U, 2}},
};

START_TEST(reshape_rule)
{
    cc_dimvec t = kv(reshapes[_i].nt, reshapes[_i].t);
    for (int k = 0; k < t.n; k++)
        if (reshapes[_i].tsym[k])
            t.sym[k] = reshapes[_i].tsym[k];
    int64_t out[8];
    cc_shape_reshape(reshapes[_i].rx, reshapes[_i].x, &t, false, out);
    want_dims(reshapes[_i].name, t.n, out, reshapes[_i].nr, reshapes[_i].want);
}
END_TEST

START_TEST(expand_and_broadcast)
{
    /* Expand [1, S] to [B, 1] (the target a dimension vector) gives [B, S] */
    int64_t x[] = {1, S}, t[] = {B, 1}, out[8];
    cc_dimvec tv = dv(2, t);
    int r = cc_shape_expand(2, x, &tv, out);
    want_dims("expand [1, S] to [B, 1]", r, out, 2, (int64_t[]){B, S});
    /* a target element of unknown size keeps x's size when x's is not 1 */
    int64_t x2[] = {B, S, 16}, t2[] = {U, U, U, U}, out2[8];
    tv = dv(4, t2);
    r = cc_shape_expand(3, x2, &tv, out2);
    want_dims("expand [B, S, 16] to [?, ?, ?, ?]", r, out2, 4, (int64_t[]){U, U, U, 16});
    int64_t a[] = {B, S, 16}, b[] = {S, 1}, o[8];
    r = cc_shape_bcast(3, a, 2, b, o);
    want_dims("broadcast [B, S, 16] with [S, 1]", r, o, 3, (int64_t[]){B, S, 16});
    int64_t c[] = {B, 1}, d[] = {S, 7};
    r = cc_shape_bcast(2, c, 2, d, o);
    want_dims("broadcast [B, 1] with [S, 7]", r, o, 2, (int64_t[]){U, 7});
}
END_TEST

START_TEST(dimension_vectors)
{
    ck_assert(cc_dim_sym(0) == B && cc_dim_sym(1) == S && cc_dim_is_sym(S) && !cc_dim_is_sym(U));
    /* torch's Expand pattern: where(shape == -1, 1, shape) keeps the shape */
    int64_t s[] = {B, S}, m1[] = {-1, -1}, ones[] = {1, 1};
    cc_dimvec sv = dv(2, s), eq, w;
    cc_dimvec minus = kv(2, m1), one = kv(2, ones);
    ck_assert(cc_dv_equal(&sv, &minus, &eq));
    ck_assert_msg(cc_dv_known(&eq) && eq.v[0] == 0 && eq.v[1] == 0, "a size never equals -1");
    ck_assert(cc_dv_where(&eq, &one, &sv, &w));
    int64_t got[2] = {cc_dv_dim(&w, 0), cc_dv_dim(&w, 1)};
    want_dims("where(shape == -1, 1, shape)", 2, got, 2, s);
    /* B == B, B vs S unknown */
    int64_t bs[] = {B, B}, bb[] = {B, S};
    cc_dimvec l = dv(2, bs), r = dv(2, bb);
    ck_assert(cc_dv_equal(&l, &r, &eq));
    ck_assert_msg(eq.sym[0] == CC_EL_KNOWN && eq.v[0] == 1 && eq.sym[1] == CC_EL_UNKNOWN, "B == B, B ? S");
    /* arithmetic: S * 1 is S, S * 2 unknown, 3 * 4 known, division by 0 left to the run */
    int64_t one1[] = {1}, two1[] = {2}, zero1[] = {0};
    cc_dimvec sc = dv(1, (int64_t[]){S}), k1 = kv(1, one1), k2 = kv(1, two1), k0 = kv(1, zero1), o;
    ck_assert(cc_dv_arith('*', &sc, &k1, &o));
    ck_assert_msg(cc_dv_dim(&o, 0) == S, "S * 1 is S");
    ck_assert(cc_dv_arith('*', &sc, &k2, &o));
    ck_assert_msg(o.sym[0] == CC_EL_UNKNOWN, "S * 2 is unknown");
    ck_assert(cc_dv_arith('*', &k2, &k2, &o));
    ck_assert_msg(o.sym[0] == CC_EL_KNOWN && o.v[0] == 4, "2 * 2 is 4");
    ck_assert_msg(!cc_dv_arith('/', &k2, &k0, &o), "2 / 0 is the run's to report");
    /* lengths that do not broadcast */
    cc_dimvec three = dv(3, (int64_t[]){1, 2, 3});
    ck_assert(!cc_dv_arith('+', &sv, &three, &o));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shape");
    TCase *tc = tcase_create("shape");
    tcase_add_loop_test(tc, reshape_rule, 0, (int)(sizeof reshapes / sizeof reshapes[0]));
    tcase_add_test(tc, expand_and_broadcast);
    tcase_add_test(tc, dimension_vectors);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
