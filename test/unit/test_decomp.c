/* test/unit/test_decomp.c — every row of compiler/decomp.h, built into a
 * program and run by the VM in f32 and f64, against a float64 reference
 * (libm's log1p, expm1, erfc) over [-1e4, 1e4] with +-inf, NaN, -0 and
 * subnormals, with and without the optimizer, at the default parameters
 * and at others.
 *
 * Tolerance: |got - want| <= atol + rtol * |want|, with rtol 1e-6 (f32) /
 * 1e-13 (f64) for the few roundings of a composite, and atol 2e-6 (f32) /
 * 1e-14 (f64) where a form trades relative for absolute error near an
 * underflow: Softplus rounds 1 + exp(-|x|) to the dtype (then Mish multiplies
 * that by x, up to about -17 in f32 and -37 in f64), ELU's exp(x) - 1 and
 * GELU's 1 + erf(x) cancel. expm1, log1p, softsign, leaky_relu and
 * thresholded_relu get none beyond the smallest normal (exact_near_0). NaN must give NaN, +-inf exactly the limit, and
 * -0 a zero of the reference's sign. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compiler/decomp.h"
#include "testutil.h"

/* ---- The float64 references ---------------------------------------------------------- */

static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }
static double elu(double x, double a) { return x < 0 ? a * expm1(x) : x; }
static double hard_sigmoid(double x, double a, double b)
{
    return isnan(x) ? x : fmax(fmin(a * x + b, 1), 0);
}

static double ref(cc_decomp d, double x, const double *p)
{
    switch (d) {
    case CC_DC_SOFTPLUS: return softplus(x);
    case CC_DC_SOFTSIGN: return isinf(x) ? copysign(1, x) : x / (1 + fabs(x));
    case CC_DC_MISH: return x == -INFINITY ? 0 : x * tanh(softplus(x));
    case CC_DC_ELU: return elu(x, p[0]);
    case CC_DC_SELU: return p[1] * elu(x, p[0]);
    case CC_DC_CELU: return x < 0 ? p[0] * expm1(x / p[0]) : x;
    case CC_DC_LEAKY_RELU: return x < 0 ? p[0] * x : x;
    case CC_DC_THRESHOLDED_RELU: return x > p[0] ? x : 0;
    case CC_DC_HARD_SIGMOID: return hard_sigmoid(x, p[0], p[1]);
    case CC_DC_HARD_SWISH: return x == -INFINITY ? 0 : x * hard_sigmoid(x, 1.0 / 6, 0.5);
    case CC_DC_SWISH: return x == -INFINITY ? 0 : x / (1 + exp(-p[0] * x));
    case CC_DC_GELU: return x == -INFINITY ? 0 : 0.5 * x * erfc(-x * M_SQRT1_2);
    case CC_DC_GELU_TANH:
        return x == -INFINITY ? 0 : 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case CC_DC_EXPM1: return expm1(x);
    case CC_DC_LOG1P: return log1p(x);
    case CC_DC_COUNT: break;
    }
    return NAN;
}

/* Where a row knowingly gives something else than the limit: the spellings
 * that compiler/opt.c fuses multiply x = -inf by 0 (ORT's kernels do too). */
static const struct {
    cc_decomp d;
    double x, gives;
} known[] = {
    {CC_DC_HARD_SWISH, -INFINITY, NAN},
    {CC_DC_SWISH, -INFINITY, NAN},
    {CC_DC_GELU, -INFINITY, NAN},
    {CC_DC_GELU_TANH, -INFINITY, NAN},
};

/* The rows whose forms keep their relative precision down to the smallest
 * normal number (below it the dtype itself has less). */
static bool exact_near_0(cc_decomp d)
{
    return d == CC_DC_EXPM1 || d == CC_DC_LOG1P || d == CC_DC_SOFTSIGN || d == CC_DC_LEAKY_RELU ||
           d == CC_DC_THRESHOLDED_RELU;
}

/* ---- Building and running one row ---------------------------------------------------- */

typedef struct row_case {
    cc_decomp d;
    tfvm_dtype dt;
    const double *p;
} row_case;

static cc_ifn *build_row(cc *C, void *ud)
{
    const row_case *rc = ud;
    cc_vtype t = cc_tensor_t(rc->dt, 1);
    const char *pn[] = {"x"};
    cc_ifn *f = cc_func_new(C, cc_decomp_row(rc->d)->name, 1, pn, &t, 1, NULL, &t);
    cc_irval r = cc_decompose(C, cc_fn_top(f), rc->d, cc_param_val(f, 0), rc->p);
    cc_block_results(C, cc_fn_top(f), 1, &r);
    return f;
}

#define MAX_X 640

/* The inputs: specials, hand-picked edges, a linear sweep of [-10, 10] and
 * a logarithmic one of +-[1e-5, 1e4]. */
static int inputs(double *x)
{
    static const double edge[] = {1e-40, 1e-30, 1e-7, 1e-3, 0.1, 0.5, 1, 2, 3,   5,   10,  16.5,
                                  17,    20,    30,   37,   50,  88,  89, 100, 104, 710, 1e3, 1e4};
    int n = 0;
    x[n++] = 0;
    x[n++] = -0.0;
    x[n++] = INFINITY;
    x[n++] = -INFINITY;
    x[n++] = NAN;
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) {
        x[n++] = edge[i];
        x[n++] = -edge[i];
    }
    for (int i = -80; i <= 80; i++)
        x[n++] = i / 8.0;
    for (int i = -80; i <= 64; i++) {
        x[n++] = pow(10, i / 16.0);
        x[n++] = -pow(10, i / 16.0);
    }
    return n;
}

static bool known_gives(cc_decomp d, double x, double *gives)
{
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (known[i].d == d && (known[i].x == x || (isnan(known[i].x) && isnan(x)))) {
            *gives = known[i].gives;
            return true;
        }
    return false;
}

/* Runs rc at opt level opt on every input; fails naming the row, dtype, level
 * and input. */
static void check_row(const row_case *rc, int opt)
{
    const cc_decomp_info *info = cc_decomp_row(rc->d);
    const char *dn = rc->dt == TFVM_F32 ? "f32" : "f64";
    const double *p = rc->p ? rc->p : info->dflt;
    isa_program ip;
    tfvm_error err;
    ck_assert_msg(cc_build_program(info->name, NULL, opt, build_row, (void *)rc, &ip, &err) == TFVM_OK, "%s %s: %s",
                  info->name, dn, err.message);

    double xs[MAX_X];
    int n = inputs(xs);
    int64_t dims[1] = {n};
    tfvm_tensor *t = tfvm_tensor_new(rc->dt, 1, dims, NULL);
    ck_assert_ptr_nonnull(t);
    for (int i = 0; i < n; i++) {
        if (rc->dt == TFVM_F32)
            ((float *)tfvm_tensor_data(t))[i] = (float)xs[i];
        else
            ((double *)tfvm_tensor_data(t))[i] = xs[i];
    }

    tfvm_program *prog = calloc(1, sizeof *prog);
    prog->isa = ip;
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.deterministic = true;
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(prog, &cfg, &vm), TFVM_OK);
    tfvm_value arg = tfvm_tensor_value(t), res;
    tfvm_status st = tfvm_run(vm, NULL, &arg, 1, &res, 1);
    ck_assert_msg(st == TFVM_OK, "%s %s -O%d: %s", info->name, dn, opt, tfvm_errmsg(vm));
    ck_assert_ptr_nonnull(res.tensor);
    ck_assert_int_eq(tfvm_tensor_count(res.tensor), n);
    ck_assert_int_eq(tfvm_tensor_dtype(res.tensor), rc->dt);

    double rtol = rc->dt == TFVM_F32 ? 1e-6 : 1e-13, atol = rc->dt == TFVM_F32 ? 2e-6 : 1e-14;
    if (exact_near_0(rc->d))
        atol = rc->dt == TFVM_F32 ? FLT_MIN : DBL_MIN;
    for (int i = 0; i < n; i++) {
        double x = rc->dt == TFVM_F32 ? (double)((const float *)tfvm_tensor_cdata(t))[i] : xs[i];
        double got = rc->dt == TFVM_F32 ? (double)((const float *)tfvm_tensor_cdata(res.tensor))[i]
                                        : ((const double *)tfvm_tensor_cdata(res.tensor))[i];
        double want = ref(rc->d, x, p);
        bool is_known = known_gives(rc->d, x, &want);
        if (rc->dt == TFVM_F32 && fabs(want) > FLT_MAX && !isinf(want))
            want = copysign(INFINITY, want);
        bool ok;
        if (isnan(want))
            ok = isnan(got);
        else if (isinf(want))
            ok = got == want;
        else if (x == 0 && signbit(x) && want == 0)
            ok = got == 0 && signbit(got) == signbit(want);
        else
            ok = fabs(got - want) <= atol + rtol * fabs(want);
        ck_assert_msg(ok, "%s %s -O%d (params %g, %g) at x = %.9g: got %.9g, want %.9g%s", info->name, dn, opt,
                      info->n_params > 0 ? p[0] : 0.0, info->n_params > 1 ? p[1] : 0.0, x, got, want,
                      is_known ? " (a known edge)" : "");
    }
    tfvm_value_release(&res);
    tfvm_vm_free(vm);
    free(prog);
    isa_program_release(&ip);
    tfvm_tensor_free(t);
}

/* _i: row * 2 + dtype */
START_TEST(row_matches_reference)
{
    static const double other[2] = {0.7, 1.3};
    row_case rc = {.d = (cc_decomp)(_i / 2), .dt = _i % 2 ? TFVM_F64 : TFVM_F32};
    ck_assert_ptr_nonnull(cc_decomp_row(rc.d)->name);
    for (int opt = 0; opt <= 1; opt++) {
        rc.p = NULL;
        check_row(&rc, opt);
        if (cc_decomp_row(rc.d)->n_params) {
            rc.p = other;
            check_row(&rc, opt);
        }
    }
}
END_TEST

/* Softplus's stable form: [-100, 0, 10, 100] gives [0, log 2, 10, 100]
 * (log(exp(x) + 1) gave inf at 100 in f32). */
START_TEST(softplus_is_finite_at_100)
{
    row_case rc = {.d = CC_DC_SOFTPLUS, .dt = TFVM_F32};
    isa_program ip;
    tfvm_error err;
    ck_assert_int_eq(cc_build_program("softplus", NULL, 1, build_row, &rc, &ip, &err), TFVM_OK);
    int64_t dims[1] = {4};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, 1, dims, NULL);
    memcpy(tfvm_tensor_data(t), (float[]){-100, 0, 10, 100}, 4 * sizeof(float));
    tfvm_program *prog = calloc(1, sizeof *prog);
    prog->isa = ip;
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(prog, &cfg, &vm), TFVM_OK);
    tfvm_value arg = tfvm_tensor_value(t), res;
    ck_assert_int_eq(tfvm_run(vm, NULL, &arg, 1, &res, 1), TFVM_OK);
    const float *y = tfvm_tensor_cdata(res.tensor);
    ck_assert_float_eq(y[0], 0.0f);
    ck_assert_float_eq(y[1], logf(2.0f));
    ck_assert_float_eq_tol(y[2], 10.0000454f, 1e-6f);
    ck_assert_float_eq(y[3], 100.0f);
    tfvm_value_release(&res);
    tfvm_vm_free(vm);
    free(prog);
    isa_program_release(&ip);
    tfvm_tensor_free(t);
}
END_TEST

/* Every row has a name, its parameters' names, and a reference above (a new
 * row without one fails row_matches_reference with NaN wanted). */
START_TEST(rows_are_described)
{
    for (int d = 0; d < CC_DC_COUNT; d++) {
        const cc_decomp_info *r = cc_decomp_row((cc_decomp)d);
        ck_assert_msg(r && r->name, "row %d has no name", d);
        ck_assert_msg(r->n_params <= 2, "%s: %u parameters", r->name, r->n_params);
        for (uint32_t k = 0; k < r->n_params; k++)
            ck_assert_msg(r->param[k] != NULL, "%s: parameter %u has no name", r->name, k);
        ck_assert_msg(!isnan(ref((cc_decomp)d, 1.0, r->dflt)), "%s: no reference in this test", r->name);
    }
    ck_assert_ptr_null(cc_decomp_row(CC_DC_COUNT));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("decomp");
    TCase *tc = tcase_create("decomp");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, row_matches_reference, 0, 2 * CC_DC_COUNT);
    tcase_add_test(tc, softplus_is_finite_at_100);
    tcase_add_test(tc, rows_are_described);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
