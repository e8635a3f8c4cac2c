/* examples/coexec/coexec.c — a host that co-executes with its graph (Terra,
 * docs/coexec.md): a training loop whose steps run in the graph (train.tfg,
 * one loop in one session) while the host reads the next batch, fetches each
 * step's loss, and decides on its own when to stop, telling the graph
 * through the "stop" channel that drives the graph's loop.
 *
 *   cc -std=c11 coexec.c $(pkg-config --cflags --libs tfvm) -o coexec
 *   ./coexec train.tfg                 -> step 1: loss 4.395063 ... stop ...
 *   ./coexec train.tfg 5 --threads 1   (at most 5 steps, one worker thread)
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfvm.h>

#define FEATURES 8
#define BATCH 512
#define LEARNING_RATE 0.5f
#define TARGET_LOSS 0.001 /* stop once the loss is below this ...              */
#define PATIENCE 3        /* ... or after this many steps without a new best */
#define DEFAULT_STEPS 100

/* The model the batches come from: y = x·W_TRUE + noise. */
static const float W_TRUE[FEATURES] = {0.5f, -1.25f, 2.0f, 0.75f, -0.5f, 1.5f, -2.0f, 0.25f};

/* The "disk": a 64-bit LCG (Knuth's MMIX constants), so that every run reads
 * the same batches. */
typedef struct lcg {
    uint64_t state;
} lcg;

static uint32_t lcg_next(lcg *g)
{
    g->state = g->state * 6364136223846793005u + 1442695040888963407u;
    return (uint32_t)(g->state >> 32);
}

/* Uniform in [-1, 1): 24 random bits, exact in a float. */
static float lcg_unit(lcg *g)
{
    return (float)(lcg_next(g) >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

/* Reads the next batch: BATCH rows of features and their noisy targets, in
 * two new tensors (one reference each, the caller's). */
static int read_batch(lcg *g, tfvm_tensor **x, tfvm_tensor **y)
{
    const int64_t xdims[2] = {BATCH, FEATURES}, ydims[2] = {BATCH, 1};
    *x = tfvm_tensor_new(TFVM_F32, 2, xdims, NULL);
    *y = tfvm_tensor_new(TFVM_F32, 2, ydims, NULL);
    if (!*x || !*y) {
        tfvm_tensor_free(*x);
        tfvm_tensor_free(*y);
        return -1;
    }
    float *xd = tfvm_tensor_data(*x), *yd = tfvm_tensor_data(*y);
    for (int i = 0; i < BATCH; i++) {
        float t = 0;
        for (int j = 0; j < FEATURES; j++) {
            xd[i * FEATURES + j] = lcg_unit(g);
            t += xd[i * FEATURES + j] * W_TRUE[j];
        }
        float noise = 0; /* roughly normal: the sum of four uniforms */
        for (int k = 0; k < 4; k++)
            noise += lcg_unit(g);
        yd[i] = t + 0.02f * noise;
    }
    return 0;
}

/* Reads a batch and feeds it on "x" and "y": the session takes its own
 * references, so ours go at once. */
static tfvm_status feed_batch(tfvm_session *s, lcg *g)
{
    tfvm_tensor *x, *y;
    if (read_batch(g, &x, &y) != 0)
        return TFVM_ERR_NOMEM;
    tfvm_value vx = tfvm_tensor_value(x), vy = tfvm_tensor_value(y);
    tfvm_status st = tfvm_feed(s, "x", &vx);
    if (st == TFVM_OK)
        st = tfvm_feed(s, "y", &vy);
    tfvm_tensor_free(x);
    tfvm_tensor_free(y);
    return st;
}

/* A fetched loss: a scalar, or a tensor of one element. */
static double loss_of(const tfvm_value *v)
{
    if (!v->tensor)
        return v->dtype == TFVM_F32 ? v->as.f32 : v->dtype == TFVM_F64 ? v->as.f64 : -1;
    if (tfvm_tensor_count(v->tensor) != 1)
        return -1;
    if (v->dtype == TFVM_F32)
        return *(const float *)tfvm_tensor_cdata(v->tensor);
    if (v->dtype == TFVM_F64)
        return *(const double *)tfvm_tensor_cdata(v->tensor);
    return -1;
}

/* An integer from 1 to max, or -1. */
static long parse_count(const char *s, long max)
{
    char *end;
    errno = 0;
    long n = strtol(s, &end, 10);
    return errno || end == s || *end || n < 1 || n > max ? -1 : n;
}

static int usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s GRAPH [MAX_STEPS] [--threads N]\n"
            "  trains GRAPH (examples/coexec/train.tfg) on batches read by this program,\n"
            "  at most MAX_STEPS steps (default %d); N worker threads (default: TFVM_THREADS,\n"
            "  else one per core)\n",
            prog, DEFAULT_STEPS);
    return 2;
}

/* The training loop: one session, one graph loop. The host feeds step k's
 * stop flag and batch, then reads batch k+1 while the graph computes step k,
 * and fetches step k's loss; only then does it know whether step k+1 runs. A
 * batch read ahead for a step that never runs is freed with the session. */
static int train(tfvm_vm *vm, long max_steps)
{
    tfvm_value lr = tfvm_f32(LEARNING_RATE), no = tfvm_bool(false);
    tfvm_session *s;
    if (tfvm_session_start(vm, "main", &lr, 1, &s) != TFVM_OK) {
        fprintf(stderr, "coexec: %s\n", tfvm_errmsg(vm));
        return 1;
    }
    lcg disk = {20260101};
    double best = 0;
    long best_step = 0;
    bool done = false;
    tfvm_status st = tfvm_feed(s, "stop", &no);
    if (st == TFVM_OK)
        st = feed_batch(s, &disk);
    for (long step = 1; st == TFVM_OK && !done; step++) {
        if (step < max_steps)
            st = feed_batch(s, &disk); /* read ahead: the graph is busy with this step */
        tfvm_value v;
        if (st == TFVM_OK)
            st = tfvm_fetch(s, "loss", &v);
        if (st != TFVM_OK)
            break;
        double loss = loss_of(&v);
        tfvm_value_release(&v);
        if (loss < 0) {
            fprintf(stderr, "coexec: step %ld: the graph's loss is not one float\n", step);
            tfvm_session_cancel(s);
            return 1;
        }
        printf("step %ld: loss %.6f\n", step, loss);
        if (step == 1 || loss < best) {
            best = loss;
            best_step = step;
        }
        char line[96];
        if (loss < TARGET_LOSS)
            snprintf(line, sizeof line, "loss below %g", TARGET_LOSS);
        else if (step - best_step >= PATIENCE)
            snprintf(line, sizeof line, "no better loss than %.6f for %d steps", best, PATIENCE);
        else if (step == max_steps)
            snprintf(line, sizeof line, "%ld steps", max_steps);
        else
            line[0] = 0;
        if (line[0]) {
            printf("stop after step %ld: %s\n", step, line);
            done = true;
        }
        tfvm_value stop = tfvm_bool(done); /* the graph's next loop test */
        st = tfvm_feed(s, "stop", &stop);
    }
    if (st != TFVM_OK) {
        fprintf(stderr, "coexec: %s\n", tfvm_session_errmsg(s));
        tfvm_session_cancel(s);
        return 1;
    }
    tfvm_value w;
    if (tfvm_session_finish(s, &w, 1) != TFVM_OK) {
        fprintf(stderr, "coexec: %s\n", tfvm_errmsg(vm));
        return 1;
    }
    if (!w.tensor || w.dtype != TFVM_F32 || tfvm_tensor_count(w.tensor) != FEATURES) {
        fprintf(stderr, "coexec: the graph's result is not f32[%d, 1]\n", FEATURES);
        tfvm_value_release(&w);
        return 1;
    }
    const float *wd = tfvm_tensor_cdata(w.tensor);
    printf("w:      ");
    for (int j = 0; j < FEATURES; j++)
        printf(" %6.3f", (double)wd[j]);
    printf("\nw true: ");
    for (int j = 0; j < FEATURES; j++)
        printf(" %6.3f", (double)W_TRUE[j]);
    printf("\n");
    tfvm_value_release(&w);
    return 0;
}

int main(int argc, char **argv)
{
    const char *graph = NULL, *steps = NULL, *threads = getenv("TFVM_THREADS"), *threads_from = "TFVM_THREADS=";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = argv[++i];
            threads_from = "--threads ";
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return usage(argv[0]);
        } else if (!graph) {
            graph = argv[i];
        } else if (!steps) {
            steps = argv[i];
        } else {
            return usage(argv[0]);
        }
    }
    if (!graph)
        return usage(argv[0]);
    long max_steps = steps ? parse_count(steps, 1000000) : DEFAULT_STEPS;
    if (max_steps < 0) {
        fprintf(stderr, "coexec: MAX_STEPS %s: expected an integer from 1 to 1000000\n", steps);
        return 2;
    }
    long n_threads = threads && *threads ? parse_count(threads, 1024) : 0;
    if (n_threads < 0) {
        fprintf(stderr, "coexec: %s%s: expected an integer from 1 to 1024\n", threads_from, threads);
        return 2;
    }
    if (!TFVM_VERSION_OK()) {
        fprintf(stderr, "coexec: built for libtfvm %s, but %s is loaded\n", TFVM_VERSION_STRING, tfvm_version());
        return 1;
    }
    tfvm_error err;
    tfvm_program *prog;
    if (tfvm_program_load_file(graph, NULL, &prog, &err) != TFVM_OK) {
        fprintf(stderr, "coexec: %s\n", err.message);
        return 1;
    }
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.threads = (int)n_threads;
    tfvm_vm *vm;
    if (tfvm_vm_new_ex(prog, &cfg, &vm, &err) != TFVM_OK) {
        fprintf(stderr, "coexec: %s\n", err.message);
        tfvm_program_free(prog);
        return 1;
    }
    int rc = train(vm, max_steps);
    tfvm_vm_free(vm);
    tfvm_program_free(prog);
    return rc;
}
