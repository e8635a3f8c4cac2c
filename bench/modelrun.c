/* bench/modelrun.c — `make bench`: one model's time through the public API
 * (include/tfvm.h), in-process and warm, as an embedder sees it: load (and
 * import) once, a VM with T worker threads (0: the default, one per core),
 * W warm-up runs, then R timed runs
 * of tfvm_run. Prints "MEDIAN MIN PEAK_RSS_KB" (seconds; the process's peak
 * resident set, loading included) and, with -o, writes the first result;
 * with -c, compares it with REF.npy (f32: within 1e-4 + 1e-3 |ref|, as
 * bench/convnets.py's same, NaN and infinities where the reference has
 * them; other dtypes: equal), prints "max abs diff D"
 * and exits 1 when they differ. TFVM_DEVICE=cpu|cuda|auto picks the
 * placement (make gpu-check).
 *
 * Parameters after the IN.npy files take their defaults (an ONNX model's
 * overridable initializers).
 *
 *   build/bench/modelrun MODEL T R W [-o OUT.npy] [-c REF.npy] IN.npy...
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <tfvm.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define MAX_IN 16

/* The first result against ref: true when close (see above). */
static bool same_as(const tfvm_tensor *got, const char *ref_path)
{
    tfvm_tensor *ref;
    tfvm_error err;
    if (tfvm_npy_load(ref_path, NULL, &ref, &err) != TFVM_OK) {
        fprintf(stderr, "modelrun: %s\n", err.message);
        return false;
    }
    bool ok = tfvm_tensor_dtype(got) == tfvm_tensor_dtype(ref) && tfvm_tensor_rank(got) == tfvm_tensor_rank(ref) &&
              memcmp(tfvm_tensor_dims(got), tfvm_tensor_dims(ref), sizeof(int64_t) * tfvm_tensor_rank(ref)) == 0;
    if (!ok) {
        printf("shapes or dtypes differ\n");
    } else if (tfvm_tensor_dtype(got) == TFVM_F32) {
        const float *x = tfvm_tensor_cdata(got), *y = tfvm_tensor_cdata(ref);
        double worst = 0;
        for (int64_t i = 0; i < tfvm_tensor_count(ref); i++) {
            double d = x[i] == y[i] || (isnan(x[i]) && isnan(y[i])) ? 0 : fabs((double)x[i] - y[i]); /* inf, NaN alike */
            worst = d > worst || isnan(d) ? d : worst;
            ok = ok && (d == 0 || d <= 1e-4 + 1e-3 * fabs((double)y[i]));
        }
        printf("max abs diff %.3g\n", worst);
    } else {
        ok = memcmp(tfvm_tensor_cdata(got), tfvm_tensor_cdata(ref),
                    (size_t)tfvm_tensor_count(ref) * tfvm_dtype_size(tfvm_tensor_dtype(ref))) == 0;
        printf("%s\n", ok ? "equal" : "not equal");
    }
    tfvm_tensor_free(ref);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s MODEL THREADS RUNS WARMUP [-o OUT.npy] IN.npy...\n", argv[0]);
        return 2;
    }
    const char *path = argv[1], *out = NULL;
    const int threads = atoi(argv[2]), runs = atoi(argv[3]), warmup = atoi(argv[4]);
    int a = 5;
    const char *ref = NULL;
    for (; a + 1 < argc && (strcmp(argv[a], "-o") == 0 || strcmp(argv[a], "-c") == 0); a += 2)
        *(argv[a][1] == 'o' ? &out : &ref) = argv[a + 1];
    if (runs < 1 || threads < 0 || argc - a > MAX_IN) {
        fprintf(stderr, "modelrun: bad arguments\n");
        return 2;
    }
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.threads = threads;
    const char *dev = getenv("TFVM_DEVICE");
    if (dev && strcmp(dev, "cuda") == 0)
        cfg.device = TFVM_DEVICE_CUDA;
    else if (dev && strcmp(dev, "auto") == 0)
        cfg.device = TFVM_DEVICE_AUTO;
    tfvm_error err;
    tfvm_program *p = NULL;
    if (tfvm_program_load_file(path, &cfg, &p, &err) != TFVM_OK) {
        fprintf(stderr, "modelrun: %s\n", err.message);
        return 1;
    }
    tfvm_value args[MAX_IN];
    size_t n = 0;
    for (; a < argc; a++, n++) {
        tfvm_tensor *t;
        if (tfvm_npy_load(argv[a], NULL, &t, &err) != TFVM_OK) {
            fprintf(stderr, "modelrun: %s\n", err.message);
            return 1;
        }
        args[n] = tfvm_tensor_value(t);
    }
    tfvm_vm *vm;
    if (tfvm_vm_new_ex(p, &cfg, &vm, &err) != TFVM_OK) {
        fprintf(stderr, "modelrun: %s\n", err.message);
        return 1;
    }
    tfvm_entry_info info;
    if (tfvm_program_entry(p, 0, &info) != TFVM_OK || info.n_results < 1 || info.n_results > MAX_IN) {
        fprintf(stderr, "modelrun: no entry point with 1 to %d results\n", MAX_IN);
        return 1;
    }
    while (n < info.n_params && n < MAX_IN) /* inputs not given: their defaults (overridable initializers) */
        args[n++] = tfvm_default();
    double *t = calloc((size_t)runs, sizeof *t);
    if (!t)
        return 1;
    tfvm_value res[MAX_IN];
    int status = 0;
    for (int r = -warmup; r < runs; r++) {
        const double t0 = now();
        if (tfvm_run(vm, NULL, args, n, res, info.n_results) != TFVM_OK) {
            fprintf(stderr, "modelrun: %s\n", tfvm_errmsg(vm));
            return 1;
        }
        const double t1 = now();
        if (r >= 0)
            t[r] = t1 - t0;
        if (r == runs - 1 && out && res[0].tensor && tfvm_npy_save(out, res[0].tensor, &err) != TFVM_OK) {
            fprintf(stderr, "modelrun: %s\n", err.message);
            return 1;
        }
        if (r == runs - 1 && ref && (!res[0].tensor || !same_as(res[0].tensor, ref)))
            status = 1;
        for (size_t i = 0; i < info.n_results; i++)
            tfvm_value_release(&res[i]);
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%.6f %.6f %ld\n", t[runs / 2], t[0], ru.ru_maxrss);
    free(t);
    for (size_t i = 0; i < n; i++)
        tfvm_value_release(&args[i]);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
    return status;
}
