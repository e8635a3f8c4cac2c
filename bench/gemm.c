/* bench/gemm.c — `make bench`: f32 products of the sizes models have, run as
 * a MATMUL through the VM (tfvm's own kernel below 2^28 multiply-adds,
 * OpenBLAS above) against cblas_sgemm called directly with as many OpenBLAS
 * threads as the VM has workers; 1 and 2 threads, best of interleaved runs;
 * "W^T": b stored transposed ([N, K], MATMUL tb, as ONNX Gemm transB=1 and
 * the recurrent layers keep their weights). Prints GFLOP/s and tfvm's time
 * over OpenBLAS's (below 1: tfvm faster).
 *
 *   build/bench/gemm [RUNS]      (default 30; OPENBLAS_CORETYPE as set)
 */
#include <cblas.h>
#include <math.h>
#include <stdbool.h>
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
                              "}\n"
                              "entry main_tb(a: f32[], b: f32[]) -> (c: f32[]) {\n"
                              "    a = ARG 0\n"
                              "    b = ARG 1\n"
                              "    c = MATMUL tb (a, b)\n"
                              "        RESULT 0 (c)\n"
                              "}\n";

static const struct shape {
    int M, K, N;
    bool tb;
} shapes[] = {
    {1, 128, 512, false},   {32, 128, 128, false},     {64, 784, 512, false}, {256, 512, 512, false},
    {1024, 1024, 1024, false}, {1, 128, 512, true}, {32, 128, 128, true},   {64, 784, 512, true},
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, const char *why)
{
    fprintf(stderr, "bench/gemm: %s: %s\n", what, why);
    return 1;
}

/* best seconds per product of tfvm (a VM of `threads` workers) and of
 * cblas_sgemm (`threads` OpenBLAS threads), interleaved; each timed run
 * repeats the product enough to last about a millisecond */
static int measure(const tfvm_program *prog, const struct shape *s, int threads, int runs, double *t_vm,
                   double *t_blas)
{
    const int64_t da[2] = {s->M, s->K}, db[2] = {s->tb ? s->N : s->K, s->tb ? s->K : s->N};
    tfvm_tensor *a = tfvm_tensor_new(TFVM_F32, 2, da, NULL), *b = tfvm_tensor_new(TFVM_F32, 2, db, NULL);
    float *c = malloc((size_t)s->M * (size_t)s->N * sizeof *c);
    if (!a || !b || !c)
        return fail("setup", "out of memory");
    float *ad = tfvm_tensor_data(a), *bd = tfvm_tensor_data(b);
    srand(1);
    for (int64_t i = 0; i < (int64_t)s->M * s->K; i++)
        ad[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    for (int64_t i = 0; i < (int64_t)s->K * s->N; i++)
        bd[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.threads = threads;
    tfvm_vm *vm;
    if (tfvm_vm_new(prog, &cfg, &vm) != TFVM_OK)
        return fail("vm", "cannot create");
    const double flop = 2.0 * s->M * (double)s->N * s->K;
    const int reps = flop >= 2e6 ? 1 : (int)(2e6 / flop);
    tfvm_value args[2] = {tfvm_tensor_value(a), tfvm_tensor_value(b)}, res;
    *t_vm = *t_blas = INFINITY;
    int rc = 0;
    for (int r = -1; r < runs && !rc; r++) {
        openblas_set_num_threads(threads);
        double t0 = now();
        for (int i = 0; i < reps; i++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, s->M, s->N, s->K, 1.0f, ad, s->K,
                        bd, s->tb ? s->K : s->N, 0.0f, c, s->N);
        double t1 = now();
        for (int i = 0; i < reps && !rc; i++) {
            if (tfvm_run(vm, s->tb ? "main_tb" : "main", args, 2, &res, 1) != TFVM_OK)
                rc = fail("run", tfvm_errmsg(vm));
            else if (i + 1 < reps)
                tfvm_value_release(&res);
        }
        double t2 = now();
        if (rc)
            break;
        if (r >= 0) {
            *t_blas = fmin(*t_blas, (t1 - t0) / reps);
            *t_vm = fmin(*t_vm, (t2 - t1) / reps);
        }
        const float *rd = tfvm_tensor_cdata(res.tensor);
        double maxdiff = 0;
        for (int64_t i = 0; i < (int64_t)s->M * s->N; i++)
            maxdiff = fmax(maxdiff, fabs((double)rd[i] - (double)c[i]));
        tfvm_value_release(&res);
        if (maxdiff > 1e-3)
            rc = fail("check", "tfvm and cblas_sgemm disagree");
    }
    tfvm_vm_free(vm);
    free(c);
    tfvm_tensor_free(a);
    tfvm_tensor_free(b);
    return rc;
}

int main(int argc, char **argv)
{
    const int runs = argc > 1 ? atoi(argv[1]) : 30;
    if (runs < 1)
        return fail("usage", "gemm [RUNS >= 1]");
    tfvm_error err;
    tfvm_program *prog;
    if (tfvm_program_assemble(program, strlen(program), "gemm.tfasm", NULL, &prog, &err) != TFVM_OK)
        return fail("assemble", err.message);
    const char *core = getenv("OPENBLAS_CORETYPE");
    printf("f32 MATMUL through the VM vs cblas_sgemm, best of %d runs (%s, OPENBLAS_CORETYPE=%s)\n", runs,
           openblas_get_config(), core && *core ? core : "(unset)");
    printf("  %-18s %7s %10s %10s %10s %12s\n", "M x K x N", "threads", "tfvm us", "tfvm GF/s", "BLAS GF/s",
           "tfvm/BLAS");
    int rc = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes && !rc; i++)
        for (int threads = 1; threads <= 2 && !rc; threads++) {
            const struct shape *s = &shapes[i];
            double tv, tb;
            if ((rc = measure(prog, s, threads, s->M >= 1024 ? runs / 5 + 1 : runs, &tv, &tb)))
                break;
            const double flop = 2.0 * s->M * (double)s->N * s->K;
            char dims[32];
            snprintf(dims, sizeof dims, "%dx%dx%d%s", s->M, s->K, s->N, s->tb ? " W^T" : "");
            printf("  %-18s %7d %10.2f %10.1f %10.1f %11.2fx\n", dims, threads, tv * 1e6, flop / tv * 1e-9,
                   flop / tb * 1e-9, tv / tb);
        }
    tfvm_program_free(prog);
    return rc;
}
