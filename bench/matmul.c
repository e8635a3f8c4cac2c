/* bench/matmul.c — `make bench`: an N x N x N f32 MATMUL run through the VM
 * (a program of ARG, ARG, MATMUL, RESULT) against cblas_sgemm called directly
 * in the same process, with as many OpenBLAS threads as the VM has workers;
 * best of several runs.
 *
 *   build/bench/matmul [N [RUNS]]      (default 1024, 10; target: tfvm >= 95%)
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tfvm.h>

static const char program[] = "entry main(a: f32[], b: f32[]) -> (c: f32[]) {\n"
                              "    a = ARG 0\n"
                              "    b = ARG 1\n"
                              "    c = MATMUL (a, b)\n"
                              "        RESULT 0 (c)\n"
                              "}\n";

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, const char *why)
{
    fprintf(stderr, "bench/matmul: %s: %s\n", what, why);
    return 1;
}

/* Best times of `runs` interleaved runs of cblas_sgemm and of the VM, after
 * one warm-up of each, so that both see the same machine; the best run of
 * each is the one least disturbed by whatever else the machine does. */
static int measure(tfvm_vm *vm, int n, int runs, int threads, tfvm_tensor *a, tfvm_tensor *b, float *c,
                   double *best_blas, double *best_vm)
{
    const float *ad = tfvm_tensor_cdata(a), *bd = tfvm_tensor_cdata(b);
    tfvm_value args[2] = {tfvm_tensor_value(a), tfvm_tensor_value(b)}, res;
    *best_vm = *best_blas = INFINITY;
    for (int r = -1; r < runs; r++) {
        openblas_set_num_threads(threads); /* the VM sets it back to 1 for its own calls */
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, ad, n, bd, n, 0.0f, c, n);
        double t1 = now();
        if (tfvm_run(vm, "main", args, 2, &res, 1) != TFVM_OK)
            return fail("run", tfvm_errmsg(vm));
        double t2 = now();
        if (r >= 0) {
            *best_blas = t1 - t0 < *best_blas ? t1 - t0 : *best_blas;
            *best_vm = t2 - t1 < *best_vm ? t2 - t1 : *best_vm;
        }
        const float *rd = tfvm_tensor_cdata(res.tensor);
        if (!rd || tfvm_tensor_rank(res.tensor) != 2 || tfvm_tensor_count(res.tensor) != (int64_t)n * n)
            return fail("run", "the result is not an n x n tensor");
        double maxdiff = 0;
        for (size_t i = 0; i < (size_t)n * (size_t)n; i++)
            maxdiff = fmax(maxdiff, fabs((double)rd[i] - (double)c[i]));
        tfvm_value_release(&res);
        if (maxdiff > 1e-3)
            return fail("check", "tfvm and cblas_sgemm disagree");
    }
    return 0;
}

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : 1024, runs = argc > 2 ? atoi(argv[2]) : 10;
    if (n < 1 || runs < 1)
        return fail("usage", "matmul [N >= 1 [RUNS >= 1]]");
    tfvm_error err;
    tfvm_program *prog;
    if (tfvm_program_assemble(program, strlen(program), "matmul.tfasm", NULL, &prog, &err) != TFVM_OK)
        return fail("assemble", err.message);
    const int64_t dims[2] = {n, n};
    tfvm_tensor *a = tfvm_tensor_new(TFVM_F32, 2, dims, NULL), *b = tfvm_tensor_new(TFVM_F32, 2, dims, NULL);
    float *c = malloc((size_t)n * (size_t)n * sizeof *c);
    if (!a || !b || !c)
        return fail("setup", "out of memory");
    float *ad = tfvm_tensor_data(a), *bd = tfvm_tensor_data(b);
    srand(1);
    for (size_t i = 0; i < (size_t)n * (size_t)n; i++) {
        ad[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        bd[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    }

    /* A VM's workers are its threads; OpenBLAS runs on one of them at a
     * time (docs/devices.md, "CPU threads"). The direct calls get as many
     * OpenBLAS threads as the VM has workers. */
    const int cores = openblas_get_num_threads();
    const double flop = 2.0 * n * (double)n * n;
    printf("matmul %dx%dx%d f32, best of %d runs (%s)\n", n, n, n, runs, openblas_get_config());
    printf("  %7s %7s %11s %11s %9s %9s %12s\n", "workers", "BLAS", "direct ms", "tfvm ms", "direct", "tfvm",
           "tfvm/direct");
    printf("  %7s %7s %11s %11s %9s %9s %12s\n", "", "threads", "", "", "GFLOP/s", "GFLOP/s", "(>= 95%)");
    int rc = 0;
    for (int workers = 1; workers <= cores && !rc; workers = workers == 1 && cores > 1 ? cores : cores + 1) {
        tfvm_config cfg;
        tfvm_config_init(&cfg);
        cfg.threads = workers;
        tfvm_vm *vm;
        if (tfvm_vm_new(prog, &cfg, &vm) != TFVM_OK)
            return fail("vm", "cannot create");
        double tb, tv;
        rc = measure(vm, n, runs, workers, a, b, c, &tb, &tv);
        if (!rc)
            printf("  %7d %7d %11.2f %11.2f %9.1f %9.1f %11.1f%%%s\n", workers, workers,
                   tb * 1e3, tv * 1e3, flop / tb * 1e-9, flop / tv * 1e-9, tb / tv * 100,
                   tb / tv >= 0.95 ? "" : "  (below target)");
        tfvm_vm_free(vm);
    }
    free(c);
    tfvm_tensor_free(a);
    tfvm_tensor_free(b);
    tfvm_program_free(prog);
    return rc;
}
