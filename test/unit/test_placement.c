/* test/unit/test_placement.c — placement, copies, mirrors and pools through
 * whole runs, with the host stand-in for the CUDA backend loaded through
 * TFVM_CUDA_LIB (test/unit/fake_cuda.c). Run from the repository root. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "devices/place.h"
#include "testutil.h"
#include "vm/vm.h"

static char fake_path[4200];
static long long (*fake_live)(void);
static long long (*fake_allocs)(void);

/* ---- Programs ------------------------------------------------------------------------ */

/* h = tanh(w @ h), n times: w a constant, h0 an argument. */
static const char *RNN =
    "entry main(h0: f32[], n: i64) -> (h: f32[]) {\n"
    "    h0 = ARG 0\n"
    "    n = ARG 1\n"
    "    w = CONST f32[2, 2] [[0.5, -0.25], [0.125, 0.75]]\n"
    "    zero = CONST i64 0\n"
    "    one = CONST i64 1\n"
    "    e_h = ENTER rnn (h0)\n"
    "    e_i = ENTER rnn (zero)\n"
    "    e_n = ENTER rnn const (n)\n"
    "    e_w = ENTER rnn const (w)\n"
    "    e_one = ENTER rnn const (one)\n"
    "        RESULT 0 (rnn.h_out)\n"
    "}\n"
    "loop rnn in main {\n"
    "    h = MERGE (e_h, h_next)\n"
    "    i = MERGE (e_i, i_next)\n"
    "    lt = LESS (i, e_n)\n"
    "    p = LOOPCOND (lt)\n"
    "    sh = SWITCH (h, p)\n"
    "    si = SWITCH (i, p)\n"
    "    m = MATMUL (e_w, sh:1)\n"
    "    t = TANH (m)\n"
    "    i2 = ADD (si:1, e_one)\n"
    "    h_next = NEXTITER (t)\n"
    "    i_next = NEXTITER (i2)\n"
    "    h_out = EXIT rnn (sh)\n"
    "}\n";

/* Elementwise work: y = relu(x * c - x) + 1, c a tensor constant; z = x < 0. */
static const char *EW =
    "entry main(x: f32[]) -> (y: f32[], z: bool[]) {\n"
    "    x = ARG 0\n"
    "    c = CONST f32[3] [2, 0.5, -1]\n"
    "    one = CONST f32 1\n"
    "    zero = CONST f32 0\n"
    "    a = MUL (x, c)\n"
    "    b = SUB (a, x)\n"
    "    r = RELU (b)\n"
    "    y = ADD (r, one)\n"
    "    z = LESS (x, zero)\n"
    "        RESULT 0 (y)\n"
    "        RESULT 1 (z)\n"
    "}\n";

/* The same, with its instructions placed by name. */
static const char *EW_PLACED =
    "entry main(x: f32[]) -> (y: f32[], z: bool[]) {\n"
    "    x = ARG 0\n"
    "    c = CONST f32[3] [2, 0.5, -1]\n"
    "    one = CONST f32 1\n"
    "    zero = CONST f32 0\n"
    "    a = MUL on cuda (x, c)\n"
    "    b = SUB on cuda (a, x)\n"
    "    r = RELU on cpu (b)\n"
    "    y = ADD on cuda (r, one)\n"
    "    z = LESS on cpu (x, zero)\n"
    "        RESULT 0 (y)\n"
    "        RESULT 1 (z)\n"
    "}\n";

/* Tensor ops whose parameter vectors (perm, axes, shape) the GPU's kernels
 * read on the host: y = mean over the last axis of softmax(x^T), reshaped. */
static const char *TENSOR_OPS =
    "entry main(x: f32[]) -> (y: f32[]) {\n"
    "    x = ARG 0\n"
    "    perm = CONST i64[2] [1, 0]\n"
    "    axes = CONST i64[1] [-1]\n"
    "    shape = CONST i64[2] [1, -1]\n"
    "    t = TRANSPOSE (x, perm)\n"
    "    s = SOFTMAX axis=0 (t)\n"
    "    m = REDUCE_MEAN keepdims (s, axes)\n"
    "    y = RESHAPE (m, shape)\n"
    "        RESULT 0 (y)\n"
    "}\n";

typedef struct env {
    tfvm_program *p;
    tfvm_vm *vm;
    tu_alloc mem;
} env;

static void env_open(env *e, const char *src, tfvm_device device, int threads)
{
    memset(e, 0, sizeof *e);
    e->mem.countdown = -1;
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.device = device;
    if (threads > 1) {
        cfg.threads = threads; /* the counting allocator is not thread-safe: libc */
    } else {
        cfg.allocator = tu_allocator(&e->mem);
        cfg.deterministic = true;
    }
    tfvm_error err;
    ck_assert_msg(tfvm_program_assemble(src, strlen(src), "t.tfasm", &cfg, &e->p, &err) == TFVM_OK, "%s",
                  err.message);
    ck_assert_int_eq(tfvm_vm_new(e->p, &cfg, &e->vm), TFVM_OK);
}

static void env_close(env *e)
{
    tfvm_vm_free(e->vm);
    tfvm_program_free(e->p);
    ck_assert_msg(e->mem.live == 0, "%ld bytes leaked", e->mem.live);
    ck_assert_msg(fake_live() == 0, "%lld bytes of device memory leaked", fake_live());
}

static dev_vm_stats stats(env *e)
{
    dev_vm_stats s;
    dev_vm_get_stats(e->vm->dev, &s);
    return s;
}

static tfvm_tensor *vec(int64_t n, const float *v)
{
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, 1, &n, NULL);
    memcpy(tfvm_tensor_data(t), v, (size_t)n * sizeof *v);
    return t;
}

static void rnn_reference(const float *h0, int n, float *h)
{
    const float w[4] = {0.5f, -0.25f, 0.125f, 0.75f};
    h[0] = h0[0];
    h[1] = h0[1];
    for (int i = 0; i < n; i++) {
        float a = w[0] * h[0] + w[1] * h[1], b = w[2] * h[0] + w[3] * h[1];
        h[0] = tanhf(a);
        h[1] = tanhf(b);
    }
}

static void check_ew(tfvm_value *r, const float *x)
{
    const float c[3] = {2, 0.5f, -1};
    ck_assert_ptr_nonnull(r[0].tensor);
    ck_assert_ptr_nonnull(tfvm_tensor_data(r[0].tensor)); /* host memory */
    const float *y = tfvm_tensor_cdata(r[0].tensor);
    const uint8_t *z = tfvm_tensor_cdata(r[1].tensor);
    for (int i = 0; i < 3; i++) {
        float b = x[i] * c[i] - x[i];
        ck_assert_float_eq(y[i], (b < 0 ? 0 : b) + 1);
        ck_assert_int_eq(z[i], x[i] < 0);
    }
}

/* ---- Tests --------------------------------------------------------------------------- */

START_TEST(test_registry_has_fake)
{
    char buf[256];
    ck_assert_int_eq(tfvm_device_status("cuda", buf, sizeof buf), TFVM_OK);
    ck_assert_str_eq(buf, "ready (fake CUDA device in host memory, for tests)");
}
END_TEST

START_TEST(test_rnn_on_cuda)
{
    env e;
    env_open(&e, RNN, TFVM_DEVICE_CUDA, 1);
    const float h0v[2] = {0.9f, -0.4f};
    int64_t dims[2] = {2, 1};
    tfvm_tensor *h0 = tfvm_tensor_new(TFVM_F32, 2, dims, NULL);
    memcpy(tfvm_tensor_data(h0), h0v, sizeof h0v);
    long long allocs_after_first = 0;
    uint64_t host_misses = 0;
    for (int run = 0; run < 6; run++) {
        tfvm_value args[2] = {tfvm_tensor_value(h0), tfvm_i64(10)}, r;
        ck_assert_msg(tfvm_run(e.vm, NULL, args, 2, &r, 1) == TFVM_OK, "%s", tfvm_errmsg(e.vm));
        float want[2];
        rnn_reference(h0v, 10, want);
        const float *got = tfvm_tensor_cdata(r.tensor);
        ck_assert_ptr_nonnull(got);
        ck_assert_int_eq(r.tensor->device, DEV_CPU);
        for (int i = 0; i < 2; i++)
            ck_assert_msg(fabsf(got[i] - want[i]) < 1e-6f, "h[%d] = %g, want %g", i, got[i], want[i]);
        tfvm_value_release(&r);
        dev_vm_stats s = stats(&e);
        /* w and h0 went to the device once (then their mirrors served every
         * iteration and every later run); one result came back per run */
        ck_assert_uint_eq(s.copies[DEV_CUDA], 2);
        ck_assert_uint_eq(s.copies[DEV_CPU], (uint64_t)run + 1);
        if (run == 1) {
            allocs_after_first = fake_allocs();
            host_misses = s.pool[DEV_CPU].misses;
        } else if (run > 1) {
            /* steady state: no cudaMalloc, no host allocation for tensors */
            ck_assert_int_eq(fake_allocs(), allocs_after_first);
            ck_assert_uint_eq(s.pool[DEV_CPU].misses, host_misses);
            ck_assert_uint_gt(s.pool[DEV_CUDA].hits, 0);
        }
    }
    tfvm_tensor_free(h0);
    env_close(&e);
}
END_TEST

START_TEST(test_modes_agree)
{
    const float xv[3] = {1.5f, -2, 4};
    const tfvm_device modes[] = {TFVM_DEVICE_CPU, TFVM_DEVICE_CUDA, TFVM_DEVICE_AUTO};
    for (size_t m = 0; m < UT_COUNTOF(modes); m++) {
        env e;
        env_open(&e, EW, modes[m], 1);
        tfvm_tensor *x = vec(3, xv);
        tfvm_value a = tfvm_tensor_value(x), r[2];
        ck_assert_msg(tfvm_run(e.vm, NULL, &a, 1, r, 2) == TFVM_OK, "%s", tfvm_errmsg(e.vm));
        check_ew(r, xv);
        dev_vm_stats s = stats(&e);
        if (modes[m] == TFVM_DEVICE_CUDA) {
            ck_assert_uint_eq(s.copies[DEV_CUDA], 2); /* x and c */
            ck_assert_uint_eq(s.copies[DEV_CPU], 2);  /* y and z */
        } else {
            /* small tensors: AUTO keeps them on the CPU */
            ck_assert_uint_eq(s.copies[DEV_CUDA], 0);
            ck_assert_uint_eq(s.copies[DEV_CPU], 0);
        }
        tfvm_value_release(&r[0]);
        tfvm_value_release(&r[1]);
        tfvm_tensor_free(x);
        env_close(&e);
    }
}
END_TEST

START_TEST(test_auto_large)
{
    /* 120000 elements: AUTO sends the elementwise work to the GPU */
    env e;
    env_open(&e, EW, TFVM_DEVICE_AUTO, 1);
    int64_t dims[2] = {40000, 3};
    tfvm_tensor *x = tfvm_tensor_new(TFVM_F32, 2, dims, NULL);
    float *xd = tfvm_tensor_data(x);
    for (int64_t i = 0; i < dims[0] * dims[1]; i++)
        xd[i] = (float)(i % 7) - 3;
    tfvm_value a = tfvm_tensor_value(x), r[2];
    ck_assert_int_eq(tfvm_run(e.vm, NULL, &a, 1, r, 2), TFVM_OK);
    dev_vm_stats s = stats(&e);
    ck_assert_uint_ge(s.copies[DEV_CUDA], 1);
    ck_assert_uint_eq(s.copies[DEV_CPU], 2);
    const float *y = tfvm_tensor_cdata(r[0].tensor);
    ck_assert_float_eq(y[0], 1); /* relu(-3 * 2 + 3) + 1 */
    ck_assert_float_eq(y[1], 2); /* relu(-2 * 0.5 + 2) + 1 */
    ck_assert_float_eq(y[6], 4); /* relu(3 * 2 - 3) + 1 */
    tfvm_value_release(&r[0]);
    tfvm_value_release(&r[1]);
    tfvm_tensor_free(x);
    env_close(&e);
}
END_TEST

START_TEST(test_flags)
{
    const float xv[3] = {1.5f, -2, 4};
    /* CPU mode: `on cuda` still goes to the GPU, `on cpu` stays */
    const tfvm_device modes[] = {TFVM_DEVICE_CPU, TFVM_DEVICE_CUDA};
    for (size_t m = 0; m < UT_COUNTOF(modes); m++) {
        env e;
        env_open(&e, EW_PLACED, modes[m], 1);
        tfvm_tensor *x = vec(3, xv);
        tfvm_value a = tfvm_tensor_value(x), r[2];
        ck_assert_msg(tfvm_run(e.vm, NULL, &a, 1, r, 2) == TFVM_OK, "%s", tfvm_errmsg(e.vm));
        check_ew(r, xv);
        dev_vm_stats s = stats(&e);
        /* in: x, c, then r (made on the CPU) for ADD; out: b for RELU, y */
        ck_assert_uint_eq(s.copies[DEV_CUDA], 3);
        ck_assert_uint_eq(s.copies[DEV_CPU], 2);
        tfvm_value_release(&r[0]);
        tfvm_value_release(&r[1]);
        tfvm_tensor_free(x);
        env_close(&e);
    }
}
END_TEST

START_TEST(test_results_are_the_callers)
{
    /* A result fed back as an argument: the caller may have written it, so
     * the copy of it on the device is never reused. */
    static const char *TWICE = "entry main(x: f32[]) -> (y: f32[]) {\n"
                               "    x = ARG 0\n"
                               "    y = ADD (x, x)\n"
                               "        RESULT 0 (y)\n"
                               "}\n";
    env e;
    env_open(&e, TWICE, TFVM_DEVICE_CUDA, 1);
    const float xv[3] = {1, 2, 3};
    tfvm_tensor *x = vec(3, xv);
    tfvm_value a = tfvm_tensor_value(x), r1, r2;
    ck_assert_int_eq(tfvm_run(e.vm, NULL, &a, 1, &r1, 1), TFVM_OK);
    ck_assert_uint_eq(stats(&e).copies[DEV_CUDA], 1);
    float *y = tfvm_tensor_data(r1.tensor);
    ck_assert_float_eq(y[2], 6);
    a = tfvm_tensor_value(r1.tensor);
    ck_assert_int_eq(tfvm_run(e.vm, NULL, &a, 1, &r2, 1), TFVM_OK);
    ck_assert_float_eq(((const float *)tfvm_tensor_cdata(r2.tensor))[2], 12);
    tfvm_value_release(&r2);
    y[2] = 100; /* the caller's to write */
    ck_assert_int_eq(tfvm_run(e.vm, NULL, &a, 1, &r2, 1), TFVM_OK);
    ck_assert_float_eq(((const float *)tfvm_tensor_cdata(r2.tensor))[2], 200);
    ck_assert_uint_eq(stats(&e).copies[DEV_CUDA], 3); /* r1 copied on each use */
    tfvm_value_release(&r2);
    tfvm_value_release(&r1);
    tfvm_tensor_free(x);
    env_close(&e);
}
END_TEST

static void expect_error(const char *src, tfvm_device device, tfvm_status code, const char *msg)
{
    env e;
    env_open(&e, src, device, 1);
    const float xv[3] = {1, 2, 3};
    tfvm_tensor *x = vec(3, xv);
    tfvm_value a = tfvm_tensor_value(x), r[2];
    size_t nr = e.p->isa.entries[0].n_results;
    tfvm_status st = tfvm_run(e.vm, NULL, &a, 1, r, nr);
    ck_assert_msg(st == code, "%s: got %s (%s)", msg, tfvm_status_name(st), tfvm_errmsg(e.vm));
    ck_assert_str_eq(tfvm_errmsg(e.vm), msg);
    tfvm_tensor_free(x);
    env_close(&e);
}

START_TEST(test_tensor_ops_on_cuda)
{
    /* on the GPU the same numbers as on the CPU; only x goes in and y out:
     * the parameter vectors stay on the host */
    float want[3], got[3];
    const float xv[6] = {1, -2, 0.5f, 3, 0, -1};
    for (int dev = 0; dev < 2; dev++) {
        env e;
        env_open(&e, TENSOR_OPS, dev ? TFVM_DEVICE_CUDA : TFVM_DEVICE_CPU, 1);
        int64_t dims[2] = {2, 3};
        tfvm_tensor *x = tfvm_tensor_new(TFVM_F32, 2, dims, NULL);
        memcpy(tfvm_tensor_data(x), xv, sizeof xv);
        tfvm_value a = tfvm_tensor_value(x), r;
        ck_assert_int_eq(tfvm_run(e.vm, NULL, &a, 1, &r, 1), TFVM_OK);
        ck_assert_int_eq(tfvm_tensor_rank(r.tensor), 2);
        ck_assert_int_eq(tfvm_tensor_dims(r.tensor)[1], 3);
        memcpy(dev ? got : want, tfvm_tensor_cdata(r.tensor), sizeof want);
        if (dev) {
            dev_vm_stats s = stats(&e);
            ck_assert_uint_eq(s.copies[DEV_CUDA], 1);
            ck_assert_uint_eq(s.copies[DEV_CPU], 1);
        }
        tfvm_value_release(&r);
        tfvm_tensor_free(x);
        env_close(&e);
    }
    for (int i = 0; i < 3; i++)
        ck_assert_msg(fabsf(want[i] - got[i]) < 1e-6f, "y[%d]: cpu %g, cuda %g", i, want[i], got[i]);
    /* each column of s sums to 1, so the means of s's rows sum to 1 too */
    ck_assert_float_eq_tol(want[0] + want[1] + want[2], 1.0f, 1e-6f);
}
END_TEST

START_TEST(test_errors)
{
    /* bad operands on the GPU's path: the CPU reports them, in its words */
    static const char *BAD_SHAPE = "entry main(x: f32[]) -> (y: f32[]) {\n"
                                   "    x = ARG 0\n"
                                   "    c = CONST f32[2, 2] [[1, 2], [3, 4]]\n"
                                   "    y = ADD on cuda (x, c)\n"
                                   "        RESULT 0 (y)\n"
                                   "}\n";
    expect_error(BAD_SHAPE, TFVM_DEVICE_CPU, TFVM_ERR_SHAPE, "y (ADD) at []: shapes [3] and [2, 2] do not broadcast");
    expect_error(BAD_SHAPE, TFVM_DEVICE_CUDA, TFVM_ERR_SHAPE, "y (ADD) at []: shapes [3] and [2, 2] do not broadcast");
    /* no kernel on the GPU for an instruction placed there (f16 is a
     * storage dtype, which no CUDA kernel writes) */
    static const char *CAST = "entry main(x: f32[]) -> (y: f16[]) {\n"
                              "    x = ARG 0\n"
                              "    y = CAST f16 on cuda (x)\n"
                              "        RESULT 0 (y)\n"
                              "}\n";
    expect_error(CAST, TFVM_DEVICE_CPU, TFVM_ERR_UNSUPPORTED, "y (CAST) at []: cuda has no CAST kernel for f32 [3]");
    /* ...but one merely allowed there runs on the CPU */
    static const char *CAST2 = "entry main(x: f32[]) -> (y: f16[]) {\n"
                               "    x = ARG 0\n"
                               "    y = CAST f16 (x)\n"
                               "        RESULT 0 (y)\n"
                               "}\n";
    env e;
    env_open(&e, CAST2, TFVM_DEVICE_CUDA, 1);
    const float xv[3] = {1, 2, 3};
    tfvm_tensor *x = vec(3, xv);
    tfvm_value a = tfvm_tensor_value(x), r;
    ck_assert_int_eq(tfvm_run(e.vm, NULL, &a, 1, &r, 1), TFVM_OK);
    ck_assert_uint_eq(((const uint16_t *)tfvm_tensor_cdata(r.tensor))[1], 0x4000); /* 2.0 */
    tfvm_value_release(&r);
    tfvm_tensor_free(x);
    env_close(&e);
}
END_TEST

START_TEST(test_allocation_failures)
{
    /* every failing host allocation ends in a clean NOMEM, on both sides */
    int succeeded = 0;
    for (long n = 0; n < 100000 && !succeeded; n++) {
        tu_alloc f = {.countdown = n};
        tfvm_config cfg;
        tfvm_config_init(&cfg);
        cfg.allocator = tu_allocator(&f);
        cfg.deterministic = true;
        cfg.device = TFVM_DEVICE_CUDA;
        tfvm_error err;
        tfvm_program *p = NULL;
        tfvm_vm *vm = NULL;
        tfvm_tensor *x = vec(3, (const float[]){1, -2, 3});
        tfvm_status st = tfvm_program_assemble(EW, strlen(EW), "ew.tfasm", &cfg, &p, &err);
        if (st == TFVM_OK)
            st = tfvm_vm_new(p, &cfg, &vm);
        if (st == TFVM_OK) {
            tfvm_value a = tfvm_tensor_value(x), r[2];
            st = tfvm_run(vm, NULL, &a, 1, r, 2);
            if (st == TFVM_OK) {
                check_ew(r, (const float[]){1, -2, 3});
                tfvm_value_release(&r[0]);
                tfvm_value_release(&r[1]);
                succeeded = 1;
            }
        }
        ck_assert_msg(st == TFVM_OK || st == TFVM_ERR_NOMEM, "n=%ld: %s (%s)", n, tfvm_status_name(st),
                      vm ? tfvm_errmsg(vm) : "");
        tfvm_vm_free(vm);
        tfvm_program_free(p);
        tfvm_tensor_free(x); /* its device mirror goes with it */
        ck_assert_msg(f.live == 0, "n=%ld: %ld bytes leaked", n, f.live);
        ck_assert_msg(fake_live() == 0, "n=%ld: %lld device bytes leaked", n, fake_live());
    }
    ck_assert(succeeded);
}
END_TEST

START_TEST(test_device_memory_runs_out)
{
    /* a pool that cannot get device memory gives back its cache and retries */
    setenv("FAKE_CUDA_MEM", "4096", 1);
    dev_device d;
    dev_cuda_open(fake_path, &d); /* init again: the limit applies from now on */
    ck_assert(d.ready);
    dev_pool *p;
    ck_assert_int_eq(dev_pool_new(NULL, &d, &p), TFVM_OK);
    void *a = dev_pool_get(p, 3000);
    ck_assert_ptr_nonnull(a);
    dev_pool_put(p, a, 3000);                /* cached: still device memory */
    void *b = dev_pool_get(p, 2000);         /* needs the cache freed first */
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_null(dev_pool_get(p, 3000)); /* really out */
    dev_pool_put(p, b, 2000);
    dev_pool_close(p);
    ck_assert_int_eq(fake_live(), 0);
    setenv("FAKE_CUDA_MEM", "-1", 1);
    dev_cuda_open(fake_path, &d);
}
END_TEST

START_TEST(test_threads)
{
    /* several workers placing, copying and pooling at once (make tsan) */
    env e;
    env_open(&e, RNN, TFVM_DEVICE_AUTO, 4);
    int64_t dims[2] = {2, 1};
    tfvm_tensor *h0 = tfvm_tensor_new(TFVM_F32, 2, dims, NULL);
    float h0v[2] = {0.3f, 0.2f}, want[2];
    memcpy(tfvm_tensor_data(h0), h0v, sizeof h0v);
    rnn_reference(h0v, 50, want);
    for (int run = 0; run < 20; run++) {
        tfvm_value args[2] = {tfvm_tensor_value(h0), tfvm_i64(50)}, r;
        ck_assert_msg(tfvm_run(e.vm, NULL, args, 2, &r, 1) == TFVM_OK, "%s", tfvm_errmsg(e.vm));
        const float *got = tfvm_tensor_cdata(r.tensor);
        ck_assert(fabsf(got[0] - want[0]) < 1e-5f && fabsf(got[1] - want[1]) < 1e-5f);
        tfvm_value_release(&r);
    }
    tfvm_tensor_free(h0);
    env_close(&e);
}
END_TEST

/* x + n * tanh(w @ x), the products of all iterations independent of each
 * other: workers run them at once. */
static const char *PAR =
    "entry main(x: f32[], n: i64) -> (s: f32[]) {\n"
    "    x = ARG 0\n"
    "    n = ARG 1\n"
    "    w = CONST f32[2, 2] [[0.5, -0.25], [0.125, 0.75]]\n"
    "    zero = CONST i64 0\n"
    "    one = CONST i64 1\n"
    "    e_acc = ENTER par (x)\n"
    "    e_i = ENTER par (zero)\n"
    "    e_n = ENTER par const (n)\n"
    "    e_w = ENTER par const (w)\n"
    "    e_x = ENTER par const (x)\n"
    "    e_one = ENTER par const (one)\n"
    "        RESULT 0 (par.out)\n"
    "}\n"
    "loop par in main {\n"
    "    acc = MERGE (e_acc, acc_next)\n"
    "    i = MERGE (e_i, i_next)\n"
    "    lt = LESS (i, e_n)\n"
    "    p = LOOPCOND (lt)\n"
    "    sa = SWITCH (acc, p)\n"
    "    si = SWITCH (i, p)\n"
    "    m = MATMUL on cuda (e_w, e_x)\n"
    "    t = TANH (m)\n"
    "    u = ADD on cuda (sa:1, t)\n"
    "    i2 = ADD (si:1, e_one)\n"
    "    acc_next = NEXTITER (u)\n"
    "    i_next = NEXTITER (i2)\n"
    "    out = EXIT par (sa)\n"
    "}\n";

START_TEST(test_threads_parallel_iterations)
{
    env e;
    env_open(&e, PAR, TFVM_DEVICE_AUTO, 4);
    int64_t dims[2] = {2, 1};
    tfvm_tensor *x = tfvm_tensor_new(TFVM_F32, 2, dims, NULL);
    float xv[2] = {0.3f, -0.7f};
    memcpy(tfvm_tensor_data(x), xv, sizeof xv);
    float t0 = tanhf(0.5f * xv[0] - 0.25f * xv[1]), t1 = tanhf(0.125f * xv[0] + 0.75f * xv[1]);
    for (int run = 0; run < 10; run++) {
        tfvm_value args[2] = {tfvm_tensor_value(x), tfvm_i64(200)}, r;
        ck_assert_msg(tfvm_run(e.vm, NULL, args, 2, &r, 1) == TFVM_OK, "%s", tfvm_errmsg(e.vm));
        const float *got = tfvm_tensor_cdata(r.tensor);
        ck_assert_msg(fabsf(got[0] - (xv[0] + 200 * t0)) < 1e-3f && fabsf(got[1] - (xv[1] + 200 * t1)) < 1e-3f,
                      "got %g %g", got[0], got[1]);
        tfvm_value_release(&r);
    }
    tfvm_tensor_free(x);
    env_close(&e);
}
END_TEST

int main(void)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return 1;
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(fake_path, sizeof fake_path, "%s/libtfvm_fakecuda.so", exe);
    setenv("TFVM_CUDA_LIB", fake_path, 1); /* before anything asks for "cuda" */
    unsetenv("FAKE_CUDA_NODEVICE");
    unsetenv("FAKE_CUDA_MEM");
    void *lib = dlopen(fake_path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "test_placement: %s\n", dlerror());
        return 1;
    }
    void *s1 = dlsym(lib, "fake_cuda_live"), *s2 = dlsym(lib, "fake_cuda_allocs");
    memcpy(&fake_live, &s1, sizeof s1);
    memcpy(&fake_allocs, &s2, sizeof s2);

    Suite *s = suite_create("placement");
    TCase *tc = tcase_create("placement");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_registry_has_fake);
    tcase_add_test(tc, test_rnn_on_cuda);
    tcase_add_test(tc, test_modes_agree);
    tcase_add_test(tc, test_auto_large);
    tcase_add_test(tc, test_flags);
    tcase_add_test(tc, test_results_are_the_callers);
    tcase_add_test(tc, test_tensor_ops_on_cuda);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_allocation_failures);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_threads_parallel_iterations);
    tcase_add_test(tc, test_device_memory_runs_out);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
