/* bench/coexec.c — `make bench`: Terra's Table 2 idea on tfvm (issue 16).
 * Each training step is host work (reading a batch: a seeded LCG, several
 * rounds per element) plus graph work (two D x D x B matrix products, tanh, a
 * weight update), calibrated to cost about the same. Co-executed: one session
 * of a loop over the steps; the host reads batch k+1 while the graph computes
 * step k. Serialized: per step, the host reads the batch, then tfvm_run of a
 * one-step entry. The VM has one worker (and OpenBLAS one thread), so that
 * host and graph have one core each. Medians of RUNS runs of each, taken
 * in turns; both must give the same losses.
 *
 *   build/bench/coexec [STEPS [RUNS]]   (default 200, 5; target: co-executed
 *                                        <= 0.6 x serialized)
 */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tfvm.h>

#define B 256 /* rows of a batch          */
#define D 256 /* features, and w is D x D */
#define TARGET 0.6

/* step: the graph work of one step; main: STEPS of them in one loop, each
 * on the host's next batch, handing the loss back. */
static const char graph[] =
    "fn step(w: f32[?, ?], x: f32[?, ?]) -> (f32[?, ?], f32) {\n"
    "    let h = tanh(matmul(x, w));\n"
    "    let g = matmul(x, h * (1.0f32 - h * h), ta = true);\n"
    "    (w - 0.001f32 * g, reduce_mean(h * h))\n"
    "}\n"
    "fn main(w0: f32[?, ?], n: i32) -> (w: f32[?, ?], total: f32) {\n"
    "    var w = w0;\n"
    "    var total = 0.0f32;\n"
    "    for i in 0..n {\n"
    "        let (w2, loss) = step(w, feed<f32[?, ?]>(\"x\"));\n"
    "        w = w2;\n"
    "        total += fetch(\"loss\", loss);\n"
    "    }\n"
    "    (w, total)\n"
    "}\n";

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, const char *why)
{
    fprintf(stderr, "bench/coexec: %s: %s\n", what, why);
    return 1;
}

/* The host's work: batch k, each element the last of `rounds` steps of a
 * 64-bit LCG seeded by (k, element), so the work is a serial chain the
 * compiler cannot shorten, and the same batch every time. NULL: no memory. */
static tfvm_tensor *read_batch(int k, int rounds)
{
    const int64_t dims[2] = {B, D};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, 2, dims, NULL);
    if (!t)
        return NULL;
    float *x = tfvm_tensor_data(t);
    for (uint64_t i = 0; i < (uint64_t)B * D; i++) {
        uint64_t s = ((uint64_t)k << 32 | i) * 0x9E3779B97F4A7C15u;
        for (int r = 0; r < rounds; r++)
            s = s * 6364136223846793005u + 1442695040888963407u;
        x[i] = (float)(s >> 40) * (2.0f / 16777216.0f) - 1.0f; /* [-1, 1) */
    }
    return t;
}

static tfvm_tensor *initial_w(void)
{
    const int64_t dims[2] = {D, D};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, 2, dims, NULL);
    if (!t)
        return NULL;
    float *w = tfvm_tensor_data(t);
    for (int i = 0; i < D * D; i++)
        w[i] = (float)((i * 7919) % 201 - 100) * (0.1f / 100.0f / 16.0f); /* small: tanh stays near linear */
    return t;
}

/* (b) Serialized: per step, read the batch, then run the one-step entry and
 * wait. `rounds` 0 (no host work) measures the graph alone. *total: the sum
 * of the losses. */
static int serialized(tfvm_vm *vm, int steps, int rounds, double *seconds, double *total)
{
    tfvm_tensor *w = initial_w();
    if (!w)
        return fail("serialized", "out of memory");
    *total = 0;
    double t0 = now();
    for (int k = 0; k < steps; k++) {
        tfvm_tensor *x = read_batch(k, rounds);
        if (!x) {
            tfvm_tensor_free(w);
            return fail("serialized", "out of memory");
        }
        tfvm_value args[2] = {tfvm_tensor_value(w), tfvm_tensor_value(x)}, res[2];
        tfvm_status st = tfvm_run(vm, "step", args, 2, res, 2);
        tfvm_tensor_free(x);
        tfvm_tensor_free(w);
        if (st != TFVM_OK)
            return fail("serialized run", tfvm_errmsg(vm));
        w = res[0].tensor;
        *total += res[1].as.f32;
        tfvm_value_release(&res[1]);
    }
    *seconds = now() - t0;
    tfvm_tensor_free(w);
    return 0;
}

/* (a) Co-executed: one session runs every step; the host feeds batch 0, then
 * per step reads and feeds the next batch while the graph computes this one,
 * and fetches this step's loss. *cores: CPU time / wall time. */
static int coexecuted(tfvm_vm *vm, int steps, int rounds, double *seconds, double *cores, double *total)
{
    tfvm_tensor *w = initial_w();
    if (!w)
        return fail("co-executed", "out of memory");
    tfvm_value args[2] = {tfvm_tensor_value(w), tfvm_i32(steps)}, res[2];
    *total = 0;
    double t0 = now(), c0 = cpu_now();
    tfvm_session *s;
    tfvm_status st = tfvm_session_start(vm, "main", args, 2, &s);
    if (st != TFVM_OK) {
        tfvm_tensor_free(w);
        return fail("session", tfvm_errmsg(vm));
    }
    for (int k = 0; k <= steps && st == TFVM_OK; k++) {
        if (k < steps) {
            tfvm_tensor *x = read_batch(k, rounds);
            if (!x) {
                tfvm_session_cancel(s);
                return fail("co-executed", "out of memory");
            }
            tfvm_value v = tfvm_tensor_value(x);
            st = tfvm_feed(s, "x", &v);
            tfvm_tensor_free(x);
        }
        tfvm_value loss;
        if (k > 0 && st == TFVM_OK && (st = tfvm_fetch(s, "loss", &loss)) == TFVM_OK) {
            *total += loss.as.f32;
            tfvm_value_release(&loss);
        }
    }
    if (st != TFVM_OK) {
        fail("co-executed", tfvm_session_errmsg(s));
        tfvm_session_cancel(s);
        tfvm_tensor_free(w);
        return 1;
    }
    st = tfvm_session_finish(s, res, 2);
    *seconds = now() - t0;
    *cores = (cpu_now() - c0) / *seconds;
    tfvm_tensor_free(w);
    if (st != TFVM_OK)
        return fail("co-executed run", tfvm_errmsg(vm));
    tfvm_value_release(&res[0]);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Seconds of host work per batch at `rounds`, median of 21. */
static double host_seconds(int rounds)
{
    double t[21];
    for (int r = 0; r < 21; r++) {
        double t0 = now();
        tfvm_tensor *x = read_batch(r, rounds);
        t[r] = now() - t0;
        tfvm_tensor_free(x);
    }
    return median(t, 21);
}

static int make_vm(const char *entry, tfvm_program **prog, tfvm_vm **vm)
{
    tfvm_error err;
    tfvm_compile_options opts;
    tfvm_compile_options_init(&opts);
    opts.entry = entry;
    if (tfvm_program_compile(graph, strlen(graph), "coexec.tfg", &opts, NULL, prog, &err) != TFVM_OK)
        return fail("compile", err.message);
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.threads = 1;
    if (tfvm_vm_new_ex(*prog, &cfg, vm, &err) != TFVM_OK)
        return fail("vm", err.message);
    return 0;
}

int main(int argc, char **argv)
{
    const int steps = argc > 1 ? atoi(argv[1]) : 200, runs = argc > 2 ? atoi(argv[2]) : 5;
    if (steps < 1 || runs < 1 || runs > 99)
        return fail("usage", "coexec [STEPS >= 1 [RUNS 1..99]]");
    /* the graph's one core: OpenBLAS on the calling thread (before any VM,
     * which takes this as OpenBLAS's budget) */
    openblas_set_num_threads(1);
    tfvm_program *p_step = NULL, *p_loop = NULL;
    tfvm_vm *vm_step = NULL, *vm_loop = NULL;
    if (make_vm("step", &p_step, &vm_step) || make_vm("main", &p_loop, &vm_loop))
        return 1;

    /* Calibrate: the graph's step alone (no host work to speak of), then as
     * many LCG rounds per element as make the host's batch cost the same. */
    double t[5], total;
    if (serialized(vm_step, 3, 0, &t[0], &total))
        return 1;
    for (int r = 0; r < 5; r++)
        if (serialized(vm_step, 20, 0, &t[r], &total))
            return 1;
    const double graph_step = median(t, 5) / 20 - host_seconds(0);
    int rounds = 8;
    for (int i = 0; i < 4; i++) { /* the cost is not quite linear in rounds */
        rounds = (int)lround(rounds * graph_step / host_seconds(rounds));
        rounds = rounds < 1 ? 1 : rounds > 10000 ? 10000 : rounds;
    }
    const double host_step = host_seconds(rounds);

    printf("co-execution (Terra, Table 2): %d steps, each host work then graph work; one VM worker thread,\n"
           "OpenBLAS on 1 thread; host: a %dx%d batch, %d LCG rounds per element; graph: 2 matmuls %dx%dx%d;\n"
           "median of %d runs; 'cores': the process's CPU time / wall time while co-executing (2 = full overlap)\n",
           steps, B, D, rounds, D, D, B, runs);
    double ser[99], co[99], cores[99];
    for (int r = 0; r < runs; r++) {
        double tot_s, tot_c;
        if (serialized(vm_step, steps, rounds, &ser[r], &tot_s) ||
            coexecuted(vm_loop, steps, rounds, &co[r], &cores[r], &tot_c))
            return 1;
        if (tot_s != tot_c) { /* the same kernels on the same batches */
            char why[128];
            snprintf(why, sizeof why, "the losses differ: serialized %.9g, co-executed %.9g", tot_s, tot_c);
            return fail("check", why);
        }
    }
    const double ms = median(ser, runs) * 1e3, mc = median(co, runs) * 1e3, ratio = mc / ms;
    printf("  %9s %9s %13s %13s %6s %15s\n", "host", "graph", "serialized", "co-executed", "cores", "co-executed /");
    printf("  %9s %9s %13s %13s %6s %15s\n", "ms/step", "ms/step", "ms", "ms", "", "serialized");
    printf("  %9.3f %9.3f %13.1f %13.1f %6.2f %14.2fx\n", host_step * 1e3, graph_step * 1e3, ms, mc,
           median(cores, runs), ratio);
    printf("  %-44s %7.2fx   target <= %.1fx   %s\n", "co-executed / serialized (Terra, Table 2)", ratio, TARGET,
           ratio <= TARGET ? "PASS" : "MISS");
    if (median(cores, runs) < 1.5)
        printf("  (cores %.2f: host and graph rarely ran at once; the machine had no second core free)\n",
               median(cores, runs));
    tfvm_vm_free(vm_step);
    tfvm_vm_free(vm_loop);
    tfvm_program_free(p_step);
    tfvm_program_free(p_loop);
    return 0;
}
