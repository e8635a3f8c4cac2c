/* bench/act.c — `make bench`: the f32 activations EXP, SIGMOID, ERF, TANH, LOG
 * run through the VM (ARG, op, RESULT on one worker) against glibc's expf,
 * the same sigmoid formula on expf, erff, tanhf and logf called in a loop in
 * the same process, on the same N random floats (normal, sd 4: random signs;
 * LOG on their absolute values), interleaved, best of several runs. Prints ns per element and the ratio.
 *
 *   build/bench/act [N [RUNS]]     (default 1M, 15; target: tfvm <= 0.25x libm
 *                                   for exp, sigmoid and erf; tanh, log <= 0.5x)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tfvm.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, const char *why)
{
    fprintf(stderr, "bench/act: %s: %s\n", what, why);
    return 1;
}

static void ref_exp(float *o, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        o[i] = expf(x[i]);
}
static void ref_sigmoid(float *o, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        o[i] = x[i] >= 0 ? 1 / (1 + expf(-x[i])) : expf(x[i]) / (1 + expf(x[i]));
}
static void ref_erf(float *o, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        o[i] = erff(x[i]);
}
static void ref_log(float *o, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        o[i] = logf(x[i]);
}
static void ref_tanh(float *o, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        o[i] = tanhf(x[i]);
}

static const struct {
    const char *op;
    void (*ref)(float *, const float *, size_t);
    double target; /* tfvm / libm at most */
    int positive;  /* on |x| */
} cases[] = {
    {"EXP", ref_exp, 0.25, 0},
    {"SIGMOID", ref_sigmoid, 0.25, 0},
    {"ERF", ref_erf, 0.25, 0},
    {"TANH", ref_tanh, 0.5, 0},
    {"LOG", ref_log, 0.5, 1},
};

int main(int argc, char **argv)
{
    const long n = argc > 1 ? atol(argv[1]) : 1L << 20;
    const int runs = argc > 2 ? atoi(argv[2]) : 15;
    if (n < 1 || runs < 1)
        return fail("usage", "act [N >= 1 [RUNS >= 1]]");
    const int64_t dims[1] = {n};
    tfvm_tensor *x = tfvm_tensor_new(TFVM_F32, 1, dims, NULL), *xa = tfvm_tensor_new(TFVM_F32, 1, dims, NULL);
    float *want = malloc((size_t)n * sizeof *want);
    if (!x || !xa || !want)
        return fail("setup", "out of memory");
    float *xd = tfvm_tensor_data(x);
    srand(1);
    for (long i = 0; i < n; i += 2) { /* Box-Muller */
        const double u = ((double)rand() + 1) / ((double)RAND_MAX + 2), v = (double)rand() / RAND_MAX;
        xd[i] = (float)(4 * sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
        if (i + 1 < n)
            xd[i + 1] = (float)(4 * sqrt(-2 * log(u)) * sin(6.283185307179586 * v));
    }
    float *xad = tfvm_tensor_data(xa);
    for (long i = 0; i < n; i++)
        xad[i] = fabsf(xd[i]);
    printf("f32 activations on %ld random floats, best of %d runs, one worker\n", n, runs);
    printf("  %-8s %12s %12s %12s  %s\n", "op", "libm ns/el", "tfvm ns/el", "tfvm/libm", "(target)");
    int rc = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0] && !rc; c++) {
        char src[256];
        snprintf(src, sizeof src,
                 "entry main(x: f32[?]) -> (y: f32[?]) {\n    x = ARG 0\n    y = %s (x)\n        RESULT 0 (y)\n}\n",
                 cases[c].op);
        tfvm_error err;
        tfvm_program *prog;
        if (tfvm_program_assemble(src, strlen(src), "act.tfasm", NULL, &prog, &err) != TFVM_OK)
            return fail("assemble", err.message);
        tfvm_config cfg;
        tfvm_config_init(&cfg);
        cfg.threads = 1;
        tfvm_vm *vm;
        if (tfvm_vm_new(prog, &cfg, &vm) != TFVM_OK)
            return fail("vm", "cannot create");
        double best_ref = INFINITY, best_vm = INFINITY, maxdiff = 0;
        tfvm_value arg = tfvm_tensor_value(cases[c].positive ? xa : x), res;
        const float *in = cases[c].positive ? xad : xd;
        for (int r = -1; r < runs && !rc; r++) {
            const double t0 = now();
            cases[c].ref(want, in, (size_t)n);
            const double t1 = now();
            if (tfvm_run(vm, "main", &arg, 1, &res, 1) != TFVM_OK) {
                rc = fail("run", tfvm_errmsg(vm));
                break;
            }
            const double t2 = now();
            if (r >= 0) {
                best_ref = fmin(best_ref, t1 - t0);
                best_vm = fmin(best_vm, t2 - t1);
            }
            const float *rd = tfvm_tensor_cdata(res.tensor);
            for (long i = 0; i < n; i++)
                if (!(isnan(rd[i]) && isnan(want[i])))
                    maxdiff = fmax(maxdiff, fabs((double)rd[i] - (double)want[i]) / (fabs((double)want[i]) + 1e-30));
            tfvm_value_release(&res);
        }
        if (!rc && maxdiff > 1e-5)
            rc = fail(cases[c].op, "tfvm and libm disagree by more than 1e-5 relative");
        if (!rc) {
            const double ratio = best_vm / best_ref;
            printf("  %-8s %12.2f %12.2f %11.2fx  (<= %.2fx)%s\n", cases[c].op, best_ref / (double)n * 1e9,
                   best_vm / (double)n * 1e9, ratio, cases[c].target, ratio <= cases[c].target ? "" : "  below target");
        }
        tfvm_vm_free(vm);
        tfvm_program_free(prog);
    }
    free(want);
    tfvm_tensor_free(x);
    tfvm_tensor_free(xa);
    return rc;
}
