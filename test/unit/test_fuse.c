/* test/unit/test_fuse.c — the compiler's fusion of MATMUL/CONV2D + bias ADD
 * + activation into FUSED_MATMUL/FUSED_CONV2D, and tensor constant folding
 * under its size bound (compiler/opt.c): exact op counts after compiling,
 * the cases that must stay apart, and results bit for bit those of -O0. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "isa/isa.h"
#include "testutil.h"

static tfvm_program *compile_opt(const char *src, int opt)
{
    tfvm_compile_options o;
    tfvm_compile_options_init(&o);
    o.opt_level = opt;
    tfvm_program *p = NULL;
    tfvm_error err;
    tfvm_status st = tfvm_program_compile(src, strlen(src), "t.tfg", &o, NULL, &p, &err);
    ck_assert_msg(st == TFVM_OK, "compile failed: %s", err.message);
    return p;
}

static uint32_t count(const tfvm_program *prog, isa_op op)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < prog->isa.n_insts; i++)
        n += prog->isa.insts[i].op == op;
    return n;
}

/* The attribute of the one instruction with op `op`. */
static uint32_t attr_of(const tfvm_program *prog, isa_op op)
{
    ck_assert_uint_eq(count(prog, op), 1);
    for (uint32_t i = 0; i < prog->isa.n_insts; i++)
        if (prog->isa.insts[i].op == op)
            return prog->isa.insts[i].a;
    return 0;
}

/* Case i fused into one `op` with activation act, or (act 0) into none. */
static void one_fused(const tfvm_program *p, isa_op op, uint32_t act, size_t i)
{
    const uint32_t fused = count(p, op);
    ck_assert_msg(fused == (act ? 1u : 0u), "case %zu: %u fused", i, fused);
    if (act)
        ck_assert_msg(attr_of(p, op) == act, "case %zu: act 0x%x", i, attr_of(p, op));
}

/* A tensor of dims with deterministic values in about [-1, 1]. */
static tfvm_tensor *tensor(int rank, const int64_t *dims, uint32_t seed)
{
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, rank, dims, NULL);
    ck_assert_ptr_nonnull(t);
    float *d = tfvm_tensor_data(t);
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < tfvm_tensor_count(t); i++) {
        s = s * 1664525u + 1013904223u;
        d[i] = (float)((int32_t)(s >> 8) % 2000 - 1000) / 1000.0f;
    }
    return t;
}

/* Runs main at -O1 and at -O0 on the same arguments: the results must be
 * the same bytes. */
static void same_as_unfused(const char *src, tfvm_tensor **args, size_t n_args)
{
    tfvm_tensor *res[2];
    for (int opt = 0; opt < 2; opt++) {
        tfvm_program *p = compile_opt(src, opt);
        tfvm_config cfg;
        tfvm_config_init(&cfg);
        cfg.deterministic = true;
        tfvm_vm *vm = NULL;
        ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
        tfvm_value in[8], out;
        for (size_t k = 0; k < n_args; k++)
            in[k] = tfvm_tensor_value(args[k]);
        ck_assert_msg(tfvm_run(vm, "main", in, n_args, &out, 1) == TFVM_OK, "%s", tfvm_errmsg(vm));
        ck_assert_ptr_nonnull(out.tensor);
        res[opt] = out.tensor;
        tfvm_vm_free(vm);
        tfvm_program_free(p);
    }
    ck_assert_int_eq(tfvm_tensor_rank(res[0]), tfvm_tensor_rank(res[1]));
    ck_assert_int_eq(tfvm_tensor_count(res[0]), tfvm_tensor_count(res[1]));
    ck_assert(memcmp(tfvm_tensor_cdata(res[0]), tfvm_tensor_cdata(res[1]),
                     (size_t)tfvm_tensor_count(res[0]) * sizeof(float)) == 0);
    tfvm_tensor_free(res[0]);
    tfvm_tensor_free(res[1]);
    for (size_t k = 0; k < n_args; k++)
        tfvm_tensor_free(args[k]);
}

static const char *MLP = "fn main(w1: f32[6, 5], b1: f32[5], w2: f32[5, 3], b2: f32[3], x: f32[?, 6]) -> f32[?, 3] {\n"
                         "    let h = relu(matmul(x, w1) + b1);\n"
                         "    sigmoid(b2 + matmul(h, w2))\n"
                         "}\n";

START_TEST(mlp)
{
    tfvm_program *p = compile_opt(MLP, 0);
    ck_assert_uint_eq(count(p, ISA_MATMUL), 2);
    ck_assert_uint_eq(count(p, ISA_ADD), 2);
    ck_assert_uint_eq(count(p, ISA_RELU), 1);
    ck_assert_uint_eq(count(p, ISA_SIGMOID), 1);
    ck_assert_uint_eq(count(p, ISA_FUSED_MATMUL), 0);
    tfvm_program_free(p);
    p = compile_opt(MLP, 1);
    ck_assert_uint_eq(count(p, ISA_FUSED_MATMUL), 2);
    ck_assert_uint_eq(count(p, ISA_MATMUL) + count(p, ISA_ADD) + count(p, ISA_RELU) + count(p, ISA_SIGMOID), 0);
    uint32_t acts = 0;
    for (uint32_t i = 0; i < p->isa.n_insts; i++)
        if (p->isa.insts[i].op == ISA_FUSED_MATMUL)
            acts |= p->isa.insts[i].a;
    ck_assert_uint_eq(acts, ISA_OPT_ACT_RELU | ISA_OPT_ACT_SIGMOID);
    tfvm_program_free(p);
    tfvm_tensor *args[5] = {tensor(2, (int64_t[]){6, 5}, 1), tensor(1, (int64_t[]){5}, 2),
                            tensor(2, (int64_t[]){5, 3}, 3), tensor(1, (int64_t[]){3}, 4),
                            tensor(2, (int64_t[]){4, 6}, 5)};
    same_as_unfused(MLP, args, 5);
}
END_TEST

/* Products of transposed operands (a backward pass's x.T @ g and g @ w.T,
 * a batched swap) read the operands with MATMUL's ta/tb; a transposition
 * that also has another use stays for it, and one that is not a swap of
 * the last two dims is left alone. */
static const char *TRANSPOSED =
    "fn main(x: f32[4, 6], g: f32[4, 3], w: f32[5, 3], a: f32[2, 3, 4], b: f32[2, 3, 5]) -> f32[?] {\n"
    "    let dw = matmul(transpose(x, [1, 0]), g);\n"            /* [6, 3] */
    "    let dx = matmul(g, transpose(w, [1, 0]));\n"            /* [4, 5] */
    "    let ab = matmul(transpose(a, [0, 2, 1]), b);\n"         /* [2, 4, 5] */
    "    let gt = transpose(g, [1, 0]);\n"
    "    let gg = matmul(gt, g) + reduce_sum(gt, [0, 1], keepdims = false);\n"  /* gt read twice */
    "    let sw = transpose(a, [1, 0, 2]);\n"                   /* not a swap of the last two */
    "    let dxab = matmul(dx, transpose(reduce_sum(ab, [0], keepdims = false), [1, 0]));\n"  /* [4, 4] */
    "    concat(concat(reshape(dw, [18]), reshape(dxab, [16]), axis = 0),\n"
    "           concat(reshape(gg, [9]), reshape(sw, [24]), axis = 0), axis = 0)\n"
    "}\n";

START_TEST(transposed_operands)
{
    tfvm_program *p = compile_opt(TRANSPOSED, 0);
    ck_assert_uint_eq(count(p, ISA_TRANSPOSE), 6);
    tfvm_program_free(p);
    p = compile_opt(TRANSPOSED, 1);
    /* left: gt (a sum reads it too) and the [1, 0, 2] one; the others go, as
     * a permutation of its operand's known rank cannot fail */
    ck_assert_uint_eq(count(p, ISA_TRANSPOSE), 2);
    uint32_t flags[4] = {0};
    for (uint32_t i = 0; i < p->isa.n_insts; i++)
        if (p->isa.insts[i].op == ISA_MATMUL || p->isa.insts[i].op == ISA_FUSED_MATMUL)
            flags[p->isa.insts[i].a & (ISA_OPT_TRANS_A | ISA_OPT_TRANS_B)]++;
    /* ta: dw, ab, gg (fused with its bias); tb: dx, dxab */
    ck_assert_uint_eq(flags[ISA_OPT_TRANS_A], 3);
    ck_assert_uint_eq(flags[ISA_OPT_TRANS_B], 2);
    tfvm_program_free(p);
    tfvm_tensor *args[5] = {tensor(2, (int64_t[]){4, 6}, 9), tensor(2, (int64_t[]){4, 3}, 10),
                            tensor(2, (int64_t[]){5, 3}, 11), tensor(3, (int64_t[]){2, 3, 4}, 12),
                            tensor(3, (int64_t[]){2, 3, 5}, 13)};
    same_as_unfused(TRANSPOSED, args, 5);
}
END_TEST

/* The options of the program's `most` FUSED_CONV2Ds, in order (there are that many) */
static void conv_opts(const tfvm_program *p, uint32_t *opts, uint32_t most)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->isa.n_insts; i++)
        if (p->isa.insts[i].op == ISA_FUSED_CONV2D && n < most)
            opts[n++] = p->isa.insts[i].a;
    ck_assert_uint_eq(n, most);
}

/* A 1x1 convolution whose only use is a depthwise one passes its result
 * channels last (nhwc_out, nhwc_in), with the bits of the program without
 * them; not with another use of it, nor with channels not a multiple of 16
 * or past an image of 2^17 floats between them. */
static const char *PAIR = "fn main(x: f32[?, 8, 6, 6], w1: f32[32, 8, 1, 1], b1: f32[32], w2: f32[32, 1, 3, 3],\n"
                          "        b2: f32[32]) -> f32[?, 32, 6, 6] {\n"
                          "    let e = relu(conv2d(x, w1) + reshape(b1, [1, 32, 1, 1]));\n"
                          "    relu(conv2d(e, w2, padding = 1, groups = 32) + reshape(b2, [1, 32, 1, 1]))\n"
                          "}\n";

/* PAIR with C channels on an S x S image, compiled: the two convolutions' options */
static void pair_opts(int C, int S, uint32_t *o)
{
    char src[1024];
    snprintf(src, sizeof src,
             "fn main(x: f32[1, 8, %d, %d], w1: f32[%d, 8, 1, 1], b1: f32[%d], w2: f32[%d, 1, 3, 3]) -> f32[?, ?, ?, ?] {\n"
             "    let e = relu(conv2d(x, w1) + reshape(b1, [1, %d, 1, 1]));\n"
             "    relu(conv2d(e, w2, padding = 1, groups = %d) + reshape(b1, [1, %d, 1, 1]))\n"
             "}\n",
             S, S, C, C, C, C, C, C);
    tfvm_program *p = compile_opt(src, 1);
    conv_opts(p, o, 2);
    tfvm_program_free(p);
}

START_TEST(channels_last_pair)
{
    uint32_t o[2];
    tfvm_program *p = compile_opt(PAIR, 1);
    conv_opts(p, o, 2);
    ck_assert_uint_eq(o[0], ISA_OPT_ACT_RELU | ISA_OPT_NHWC_OUT);
    ck_assert_uint_eq(o[1], ISA_OPT_ACT_RELU | ISA_OPT_NHWC_IN);
    tfvm_program_free(p);
    tfvm_tensor *args[5] = {tensor(4, (int64_t[]){2, 8, 6, 6}, 21), tensor(4, (int64_t[]){32, 8, 1, 1}, 22),
                            tensor(1, (int64_t[]){32}, 23), tensor(4, (int64_t[]){32, 1, 3, 3}, 24),
                            tensor(1, (int64_t[]){32}, 25)};
    same_as_unfused(PAIR, args, 5);
    /* e used twice */
    const char *two = "fn main(x: f32[1, 8, 6, 6], w1: f32[32, 8, 1, 1], w2: f32[32, 1, 3, 3]) -> f32[1, 32, 6, 6] {\n"
                      "    let e = conv2d(x, w1);\n"
                      "    conv2d(e, w2, padding = 1, groups = 32) + e\n"
                      "}\n";
    p = compile_opt(two, 1);
    for (uint32_t i = 0; i < p->isa.n_insts; i++)
        ck_assert_uint_eq(p->isa.insts[i].a & (ISA_OPT_NHWC_IN | ISA_OPT_NHWC_OUT), 0);
    tfvm_program_free(p);
    /* 64 channels of 46 x 46 (135,424 floats) between them: not; of 45 x 45 (129,600): yes; 24 channels: not */
    pair_opts(64, 46, o);
    ck_assert_uint_eq(o[0], ISA_OPT_ACT_RELU);
    ck_assert_uint_eq(o[1], ISA_OPT_ACT_RELU);
    pair_opts(64, 45, o);
    ck_assert_uint_eq(o[0], ISA_OPT_ACT_RELU | ISA_OPT_NHWC_OUT);
    ck_assert_uint_eq(o[1], ISA_OPT_ACT_RELU | ISA_OPT_NHWC_IN);
    pair_opts(24, 6, o);
    ck_assert_uint_eq(o[0], ISA_OPT_ACT_RELU);
    ck_assert_uint_eq(o[1], ISA_OPT_ACT_RELU);
}
END_TEST

static const char *CNN = "fn main(x: f32[?, 2, 5, 5], w: f32[3, 2, 3, 3], b: f32[3]) -> f32[?, 3, 5, 5] {\n"
                         "    tanh(conv2d(x, w, padding = 1) + reshape(b, [1, 3, 1, 1]))\n"
                         "}\n";

START_TEST(cnn)
{
    tfvm_program *p = compile_opt(CNN, 1);
    ck_assert_uint_eq(attr_of(p, ISA_FUSED_CONV2D), ISA_OPT_ACT_TANH);
    ck_assert_uint_eq(count(p, ISA_CONV2D) + count(p, ISA_ADD) + count(p, ISA_RESHAPE) + count(p, ISA_TANH), 0);
    tfvm_program_free(p);
    tfvm_tensor *args[3] = {tensor(4, (int64_t[]){2, 2, 5, 5}, 6), tensor(4, (int64_t[]){3, 2, 3, 3}, 7),
                            tensor(1, (int64_t[]){3}, 8)};
    same_as_unfused(CNN, args, 3);
    /* a constant bias of shape [3, 1, 1], without an activation */
    const char *k = "fn main(x: f32[?, 2, 5, 5], w: f32[3, 2, 3, 3]) -> f32[?, 3, 5, 5] {\n"
                    "    conv2d(x, w, padding = 1) + [[[0.5]], [[-1.0]], [[2.0]]]\n"
                    "}\n";
    p = compile_opt(k, 1);
    ck_assert_uint_eq(attr_of(p, ISA_FUSED_CONV2D), 0);
    ck_assert_uint_eq(count(p, ISA_ADD), 0);
    tfvm_program_free(p);
    tfvm_tensor *kargs[2] = {tensor(4, (int64_t[]){1, 2, 5, 5}, 9), tensor(4, (int64_t[]){3, 2, 3, 3}, 10)};
    same_as_unfused(k, kargs, 2);
}
END_TEST

/* A HardSigmoid after a convolution with constant weights (squeeze-excite's
 * second product, as torch exports it): the affine folding leaves its
 * x * 1/6 + 0.5 to the activation, so that the whole HardSigmoid fuses
 * (folded into the weights, the MIN and MAX were left as ops of their own);
 * a batch norm's scale before it still folds. The same bits as -O0 without
 * the scale. */
START_TEST(conv_hardsigmoid)
{
    static const struct {
        const char *src;
        uint32_t muls; /* MULs by a constant left in the program */
    } cases[] = {
        {"fn main(x: f32[?, 2, 1, 1]) -> f32[?, 3, 1, 1] {\n"
         "    let s = conv2d(x, cast<f32>([[[[0.5]], [[-1.5]]], [[[2.0]], [[0.25]]], [[[-0.75]], [[1.0]]]])) + [[[0.5]], [[-1.0]], [[2.0]]];\n"
         "    max(min(s * 0.16666667 + 0.5, 1.0), 0.0)\n"
         "}\n",
         0},
        {"fn main(x: f32[?, 2, 1, 1]) -> f32[?, 3, 1, 1] {\n"
         "    let c = conv2d(x, cast<f32>([[[[0.5]], [[-1.5]]], [[[2.0]], [[0.25]]], [[[-0.75]], [[1.0]]]]));\n"
         "    let s = c * [[[3.0]], [[0.5]], [[-2.0]]] + [[[0.5]], [[-1.0]], [[2.0]]];\n"
         "    max(min(s * 0.16666667 + 0.5, 1.0), 0.0)\n"
         "}\n",
         0},
    };
    for (size_t i = 0; i < UT_COUNTOF(cases); i++) {
        tfvm_program *p = compile_opt(cases[i].src, 1);
        ck_assert_msg(count(p, ISA_FUSED_CONV2D) == 1, "case %zu", i);
        ck_assert_msg(attr_of(p, ISA_FUSED_CONV2D) == ISA_OPT_ACT_HARDSIGMOID, "case %zu: act 0x%x", i,
                      attr_of(p, ISA_FUSED_CONV2D));
        ck_assert_msg(count(p, ISA_MIN) + count(p, ISA_MAX) + count(p, ISA_ADD) + count(p, ISA_MUL) == cases[i].muls,
                      "case %zu: %u MIN, %u MAX, %u ADD, %u MUL left", i, count(p, ISA_MIN), count(p, ISA_MAX),
                      count(p, ISA_ADD), count(p, ISA_MUL));
        tfvm_program_free(p);
    }
    /* with no scale folded, the same bits as the ops one by one */
    tfvm_tensor *x = tensor(4, (int64_t[]){4, 2, 1, 1}, 31);
    float *d = tfvm_tensor_data(x);
    for (int64_t j = 0; j < 8; j++)
        d[j] *= 4.0f; /* both clamps and the slope between */
    same_as_unfused(cases[0].src, &x, 1);
}
END_TEST

/* A residual block: relu(conv(x) + bias + shortcut) is one FUSED_CONV2D_ADD
 * relu, in either order of the sum; the same bits as -O0. Only where the
 * shortcut's dims are known to be the result's (no broadcasting): an
 * unknown batch, or a broadcast shortcut, stays an ADD. */
static const char *RESBLOCK = "fn main(x: f32[2, 3, 5, 5], w: f32[3, 3, 3, 3], b: f32[3], v: f32[3, 3, 1, 1]) -> f32[2, 3, 5, 5] {\n"
                              "    let y = relu(conv2d(x, w, padding = 1) + reshape(b, [1, 3, 1, 1]) + x);\n"
                              "    y + (conv2d(y, v) + reshape(b, [1, 3, 1, 1]))\n"
                              "}\n";

START_TEST(residual)
{
    tfvm_program *p = compile_opt(RESBLOCK, 1);
    ck_assert_uint_eq(count(p, ISA_FUSED_CONV2D_ADD), 2);
    ck_assert_uint_eq(count(p, ISA_CONV2D) + count(p, ISA_FUSED_CONV2D) + count(p, ISA_ADD) + count(p, ISA_RELU), 0);
    uint32_t acts = 0;
    for (uint32_t i = 0; i < p->isa.n_insts; i++)
        acts += p->isa.insts[i].op == ISA_FUSED_CONV2D_ADD && p->isa.insts[i].a == ISA_OPT_ACT_RELU;
    ck_assert_uint_eq(acts, 1);
    tfvm_program_free(p);
    tfvm_tensor *args[4] = {tensor(4, (int64_t[]){2, 3, 5, 5}, 21), tensor(4, (int64_t[]){3, 3, 3, 3}, 22),
                            tensor(1, (int64_t[]){3}, 23), tensor(4, (int64_t[]){3, 3, 1, 1}, 24)};
    same_as_unfused(RESBLOCK, args, 4);
    static const char *const apart[] = {
        /* the batch unknown */
        "fn main(x: f32[?, 3, 5, 5], w: f32[3, 3, 3, 3], b: f32[3]) -> f32[?, 3, 5, 5] {\n"
        "    relu(conv2d(x, w, padding = 1) + reshape(b, [1, 3, 1, 1]) + x)\n"
        "}\n",
        /* a shortcut that broadcasts */
        "fn main(x: f32[2, 3, 5, 5], w: f32[3, 3, 3, 3], b: f32[3], s: f32[1, 3, 5, 5]) -> f32[2, 3, 5, 5] {\n"
        "    relu(conv2d(x, w, padding = 1) + reshape(b, [1, 3, 1, 1]) + s)\n"
        "}\n",
    };
    for (size_t i = 0; i < UT_COUNTOF(apart); i++) {
        p = compile_opt(apart[i], 1);
        ck_assert_msg(count(p, ISA_FUSED_CONV2D_ADD) == 0 && count(p, ISA_FUSED_CONV2D) == 1, "case %zu", i);
        tfvm_program_free(p);
    }
}
END_TEST

/* main of p (freed) on x, deterministic: its one result (the caller frees it) */
static tfvm_tensor *run_program(tfvm_program *p, tfvm_tensor *x)
{
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.deterministic = true;
    tfvm_vm *vm = NULL;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    tfvm_value in = tfvm_tensor_value(x), out;
    ck_assert_msg(tfvm_run(vm, "main", &in, 1, &out, 1) == TFVM_OK, "%s", tfvm_errmsg(vm));
    tfvm_vm_free(vm);
    tfvm_program_free(p);
    return out.tensor;
}

/* A TensorFlow fixture compiled at level opt. */
static tfvm_program *tf_open(const char *name, int opt)
{
    char path[128];
    snprintf(path, sizeof path, "test/tf/fixtures/%s.pb", name);
    tfvm_open_options o;
    tfvm_open_options_init(&o);
    o.opt_level = opt;
    tfvm_program *p = NULL;
    tfvm_error err;
    ck_assert_msg(tfvm_program_open(path, &o, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    return p;
}

/* Runs a TensorFlow fixture on its input at -O0 and -O1: -O1's result against -O0's: bit for bit with tol 0, else within tol of
 * the larger magnitude (folded weights round differently). */
static void tf_near_unfused(const char *name, double tol)
{
    char path[128];
    snprintf(path, sizeof path, "test/tf/fixtures/%s.in0.npy", name);
    tfvm_tensor *x = NULL;
    tfvm_error err;
    ck_assert_msg(tfvm_npy_load(path, NULL, &x, &err) == TFVM_OK, "%s", err.message);
    tfvm_tensor *res[2];
    for (int opt = 0; opt < 2; opt++)
        res[opt] = run_program(tf_open(name, opt), x);
    ck_assert_int_eq(tfvm_tensor_count(res[0]), tfvm_tensor_count(res[1]));
    if (tol == 0)
        ck_assert(memcmp(tfvm_tensor_cdata(res[0]), tfvm_tensor_cdata(res[1]),
                         (size_t)tfvm_tensor_count(res[0]) * sizeof(float)) == 0);
    const float *r0 = tfvm_tensor_cdata(res[0]), *r1 = tfvm_tensor_cdata(res[1]);
    for (int64_t i = 0; i < tfvm_tensor_count(res[0]); i++) {
        const double m = fabs(r0[i]) > fabs(r1[i]) ? fabs(r0[i]) : fabs(r1[i]);
        ck_assert_msg(fabs((double)r0[i] - r1[i]) <= tol * (m + 1), "%s: element %lld: -O0 %.9g, -O1 %.9g", name,
                      (long long)i, (double)r0[i], (double)r1[i]);
    }
    tfvm_tensor_free(res[0]);
    tfvm_tensor_free(res[1]);
    tfvm_tensor_free(x);
}

static void tf_same_as_unfused(const char *name) { tf_near_unfused(name, 0); }

/* a TensorFlow graph (MatMul, BiasAdd, Relu; the importer knows only ranks):
 * the product's dims come from its operands */
START_TEST(tensorflow_mlp)
{
    tfvm_program *p = tf_open("mlp", 0);
    ck_assert_uint_eq(count(p, ISA_MATMUL) + count(p, ISA_ADD) + count(p, ISA_RELU), 5);
    tfvm_program_free(p);
    p = tf_open("mlp", 1);
    ck_assert_uint_eq(count(p, ISA_FUSED_MATMUL), 2);
    ck_assert_uint_eq(count(p, ISA_MATMUL) + count(p, ISA_ADD) + count(p, ISA_RELU), 0);
    tfvm_program_free(p);
    tf_same_as_unfused("mlp");
}
END_TEST

/* NHWC convolutions: SAME padding's shape arithmetic folds (the input's
 * shape is its checked signature), the TRANSPOSEs to and from NCHW around
 * each conv/pool (and a relu) cancel, and what is left is the network */
START_TEST(tensorflow_convnet)
{
    tfvm_program *p = tf_open("convnet", 0);
    ck_assert_uint_eq(p->isa.n_insts, 99);
    ck_assert_uint_eq(count(p, ISA_TRANSPOSE), 10);
    tfvm_program_free(p);
    p = tf_open("convnet", 1);
    ck_assert_uint_eq(p->isa.n_insts, 15);
    ck_assert_uint_eq(count(p, ISA_SHAPE) + count(p, ISA_SLICE) + count(p, ISA_CONCAT), 0);
    ck_assert_uint_eq(count(p, ISA_TRANSPOSE), 2); /* into NCHW once, out of it once */
    tfvm_program_free(p);
    tf_same_as_unfused("convnet");
}
END_TEST

/* Keras's NHWC spelling: every conv's BiasAdd, batch norm (MUL, ADD) and
 * activation between the importer's TRANSPOSEs to NCHW and back. The
 * transpositions cancel through that chain (its constants reshaped to
 * NCHW); the batch norm and the ReLU6's scale fold into the weights, and
 * bias and activation fuse into the convolutions. */
START_TEST(tensorflow_nhwc_chain)
{
    tfvm_program *p = tf_open("convnet_bias", 0);
    ck_assert_uint_eq(count(p, ISA_TRANSPOSE), 10); /* two 4-d ones per conv and pool, two for the filters */
    tfvm_program_free(p);
    p = tf_open("convnet_bias", 1);
    ck_assert_uint_eq(count(p, ISA_TRANSPOSE), 2); /* into NCHW once, out of it once */
    ck_assert_uint_eq(count(p, ISA_FUSED_CONV2D), 2);
    ck_assert_uint_eq(count(p, ISA_CONV2D) + count(p, ISA_MUL) + count(p, ISA_ADD) + count(p, ISA_RELU), 0);
    tfvm_program_free(p);
    tf_near_unfused("convnet_bias", 1e-5);
}
END_TEST

/* A batch norm on its own before its activation (DenseNet's, a
 * pre-activation ResNet's: BN, RELU, then the convolution): the chain of
 * SUB, MUL and ADD by per-channel constants becomes one depthwise 1x1
 * FUSED_CONV2D with the RELU, y = relu(x * a + b) with a and b the chain's
 * folded in double and rounded once (the inference batch norm of ONNX
 * Runtime and PyTorch), bit for bit; a chain of scalars (a hard sigmoid's
 * slope) or of one op stays as it is. */
static const char *BN_ALONE = "fn main(x: f32[?, 3, 4, 5]) -> f32[?, 3, 4, 5] {\n"
                              "    relu((x - [[[0.5]], [[-1.25]], [[2.0]]]) * [[[1.5]], [[0.3]], [[-2.0]]] + [[[0.1]], [[-0.7]], [[0.0]]])\n"
                              "}\n";

START_TEST(batch_norm_alone)
{
    tfvm_program *p = compile_opt(BN_ALONE, 1);
    ck_assert_uint_eq(attr_of(p, ISA_FUSED_CONV2D), ISA_OPT_ACT_RELU);
    ck_assert_uint_eq(count(p, ISA_SUB) + count(p, ISA_MUL) + count(p, ISA_ADD) + count(p, ISA_RELU), 0);
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    tfvm_vm *vm = NULL;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    tfvm_tensor *x = tensor(4, (int64_t[]){2, 3, 4, 5}, 41);
    float *xd = tfvm_tensor_data(x);
    xd[0] = -0.0f;
    xd[1] = INFINITY;
    tfvm_value in = tfvm_tensor_value(x), out;
    ck_assert_msg(tfvm_run(vm, "main", &in, 1, &out, 1) == TFVM_OK, "%s", tfvm_errmsg(vm));
    const double m[3] = {0.5, -1.25, 2.0}, sc[3] = {1.5, 0.3, -2.0}, be[3] = {0.1, -0.7, 0.0};
    const float *y = tfvm_tensor_cdata(out.tensor);
    for (int64_t i = 0; i < 120; i++) {
        const int64_t c = i / 20 % 3;
        /* the constants as f32, the chain folded in double */
        const double a = (float)sc[c], b = -(double)(float)m[c] * a + (float)be[c];
        const float v = (0.0f + xd[i] * (float)a) + (float)b, want = v < 0 ? 0.0f : v;
        ck_assert_msg(memcmp(&y[i], &want, sizeof want) == 0, "element %lld: %.9g, want %.9g", (long long)i,
                      (double)y[i], (double)want);
    }
    tfvm_tensor_free(out.tensor);
    tfvm_tensor_free(x);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
    static const struct {
        const char *src;
        isa_op kept;
    } stay[] = {
        {"fn main(x: f32[?, 3, 4, 5]) -> f32[?, 3, 4, 5] { relu(x * 0.5 + 1.0) }\n", ISA_MUL},
        {"fn main(x: f32[?, 3, 4, 5]) -> f32[?, 3, 4, 5] { relu(x * [[[1.5]], [[0.3]], [[-2.0]]]) }\n", ISA_MUL},
        {"fn main(x: f32[?, 3]) -> f32[?, 3] { relu(x * [1.5, 0.3, -2.0] + [0.1, -0.7, 0.0]) }\n", ISA_MUL},
    };
    for (size_t i = 0; i < UT_COUNTOF(stay); i++) {
        p = compile_opt(stay[i].src, 1);
        ck_assert_msg(count(p, stay[i].kept) == 1 && count(p, ISA_FUSED_CONV2D) == 0, "case %zu", i);
        tfvm_program_free(p);
    }
}
END_TEST

/* A VM borrows a program's large constants instead of copying them
 * (vm/api.c): a result that is one is copied on its way out, so that it
 * outlives the VM and the program (ASan would see a read of the freed
 * program) and is the caller's alone to write; small ones stay copies. */
START_TEST(constant_results_outlive_the_program)
{
    /* a literal of 1100 elements (4400 bytes as f32) and one of 4 */
    enum { BIG = 1100 };
    static char src[BIG * 5 + 256];
    int at = snprintf(src, sizeof src, "fn main(x: f32) -> (a: f32[%d], b: f32[4], c: f32[%d]) {\n"
                                       "    let big = cast<f32>([", BIG, BIG);
    for (int i = 0; i < BIG; i++)
        at += snprintf(src + at, sizeof src - (size_t)at, i ? ", 2.5" : "2.5");
    snprintf(src + at, sizeof src - (size_t)at, "]);\n    (big, cast<f32>([1.5, 1.5, 1.5, 1.5]), big + x)\n}\n");
    tfvm_program *p = compile_opt(src, 1);
    ck_assert_uint_eq(count(p, ISA_CAST), 0); /* folded: constants */
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(p, NULL, &vm), TFVM_OK);
    tfvm_value arg = {.dtype = TFVM_F32, .as.f32 = 1.0f}, out[3];
    ck_assert_msg(tfvm_run(vm, NULL, &arg, 1, out, 3) == TFVM_OK, "%s", tfvm_errmsg(vm));
    tfvm_vm_free(vm);
    tfvm_program_free(p);
    for (int k = 0; k < 3; k++) {
        ck_assert(tfvm_tensor_unique(out[k].tensor));
        float *d = tfvm_tensor_data(out[k].tensor);
        const int64_t n = tfvm_tensor_count(out[k].tensor);
        ck_assert_int_eq(n, k == 1 ? 4 : BIG);
        for (int64_t i = 0; i < n; i++)
            ck_assert(d[i] == (k == 0 ? 2.5f : k == 1 ? 1.5f : 3.5f));
        d[0] = -1.0f; /* the caller's to write */
        tfvm_tensor_free(out[k].tensor);
    }
}
END_TEST

/* what must not fuse: a product used twice, a bias that would grow the
 * product or whose size is unknown, a bias along W instead of the channels */
START_TEST(stays_apart)
{
    static const struct {
        const char *src;
        isa_op kept;
    } cases[] = {
        {"fn main(x: f32[?, 6], w: f32[6, 5], b: f32[5]) -> (y: f32[?, 5], m: f32[?, 5]) {\n"
         "    let m = matmul(x, w);\n"
         "    (m + b, m)\n"
         "}\n",
         ISA_MATMUL},
        {"fn main(x: f32[?, 6], w: f32[6, 5], b: f32[2, 5]) -> f32[?, 5] { matmul(x, w) + b }\n", ISA_MATMUL},
        {"fn main(x: f32[?, 6], w: f32[6, ?], b: f32[5]) -> f32[?, ?] { matmul(x, w) + b }\n", ISA_MATMUL},
        {"fn main(x: f32[?, 6], w: f32[6, 5], b: f32[?]) -> f32[?, 5] { relu(matmul(x, w) + b) }\n", ISA_MATMUL},
        {"fn main(x: f32[?, 2, 5, 5], w: f32[5, 2, 3, 3], b: f32[5]) -> f32[?, 5, 5, 5] {\n"
         "    conv2d(x, w, padding = 1) + b\n"
         "}\n",
         ISA_CONV2D},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tfvm_program *p = compile_opt(cases[i].src, 1);
        ck_assert_msg(count(p, cases[i].kept) == 1, "case %zu", i);
        ck_assert_msg(count(p, ISA_FUSED_MATMUL) + count(p, ISA_FUSED_CONV2D) == 0, "case %zu", i);
        tfvm_program_free(p);
    }
    /* the sum is used again: the product and bias fuse, the activation stays */
    tfvm_program *p = compile_opt("fn main(x: f32[?, 6], w: f32[6, 5], b: f32[5]) -> (y: f32[?, 5], s: f32[?, 5]) {\n"
                                  "    let s = matmul(x, w) + b;\n"
                                  "    (relu(s), s)\n"
                                  "}\n",
                                  1);
    ck_assert_uint_eq(attr_of(p, ISA_FUSED_MATMUL), 0);
    ck_assert_uint_eq(count(p, ISA_RELU), 1);
    tfvm_program_free(p);
}
END_TEST

/* same_as_unfused of a product's three inputs scaled by 3, so that every
 * part of an activation after it is reached */
static void same_as_unfused_x3(const char *src, tfvm_tensor **args)
{
    for (int k = 0; k < 3; k++) {
        float *d = tfvm_tensor_data(args[k]);
        for (int64_t j = 0; j < tfvm_tensor_count(args[k]); j++)
            d[j] *= 3.0f;
    }
    same_as_unfused(src, args, 3);
}

/* The activations spelled in primitive ops as the importers and exporters
 * spell them fuse into the product (one instruction left besides ARGs and
 * the RESULT), with results bit for bit those of -O0; near misses fuse only
 * the bias and leave the ops. */
START_TEST(activations)
{
#define MM "fn main(x: f32[?, 6], w: f32[6, 5], b: f32[5]) -> f32[?, 5] {\n    let s = matmul(x, w) + b;\n    "
#define CV "fn main(x: f32[?, 2, 5, 5], w: f32[3, 2, 3, 3], b: f32[3]) -> f32[?, 3, 5, 5] {\n" \
           "    let s = conv2d(x, w, padding = 1) + reshape(b, [1, 3, 1, 1]);\n    "
    static const struct {
        const char *src;
        uint32_t act;  /* the fused op's activation */
        uint32_t left; /* instructions left that are neither ARG, CONST, RESULT nor the fused op */
    } cases[] = {
        {MM "s * sigmoid(s)\n}\n", ISA_OPT_ACT_SILU, 0},
        {MM "sigmoid(s) * s\n}\n", ISA_OPT_ACT_SILU, 0},
        {CV "s * sigmoid(s)\n}\n", ISA_OPT_ACT_SILU, 0},
        {MM "(s * (erf(s / 1.4142135) + 1.0)) * 0.5\n}\n", ISA_OPT_ACT_GELU, 0},
        {MM "0.5 * ((1.0 + erf(s / 1.4142135)) * s)\n}\n", ISA_OPT_ACT_GELU, 0},
        {CV "(s * (erf(s / 1.4142135) + 1.0)) * 0.5\n}\n", ISA_OPT_ACT_GELU, 0},
        {MM "max(min(s * 0.16666667 + 0.5, 1.0), 0.0)\n}\n", ISA_OPT_ACT_HARDSIGMOID, 0},
        {MM "s * max(min(0.5 + 0.16666667 * s, 1.0), 0.0)\n}\n", ISA_OPT_ACT_HARDSWISH, 0},
        {CV "max(min(s * 0.16666667 + 0.5, 1.0), 0.0) * s\n}\n", ISA_OPT_ACT_HARDSWISH, 0},
        {MM "min(max(s, 0.0), 6.0)\n}\n", ISA_OPT_ACT_RELU6, 0},
        {MM "(s * (tanh((s + (s * (s * s)) * 0.044715) * 0.7978846) + 1.0)) * 0.5\n}\n", ISA_OPT_ACT_GELU_TANH, 0},
        {CV "0.5 * ((1.0 + tanh(0.7978846 * (0.044715 * ((s * s) * s) + s))) * s)\n}\n", ISA_OPT_ACT_GELU_TANH, 0},
        {MM "(s * 0.5) * (tanh((s + pow(s, 3.0) * 0.044715) * 0.7978846) + 1.0)\n}\n", ISA_OPT_ACT_GELU_NEW, 0},
        {CV "(1.0 + tanh(0.7978846 * (0.044715 * pow(s, 3.0) + s))) * (0.5 * s)\n}\n", ISA_OPT_ACT_GELU_NEW, 0},
        {CV "min(max(s, 0.0), 6.0)\n}\n", ISA_OPT_ACT_RELU6, 0},
        /* near misses: erf(s * 1/sqrt2) rounds differently; ONNX's default
         * HardSigmoid alpha 0.2; a clip to 5; the sigmoid of another value */
        {MM "(s * (erf(s * 0.70710677) + 1.0)) * 0.5\n}\n", 0, 5},
        {MM "max(min(s * 0.2 + 0.5, 1.0), 0.0)\n}\n", 0, 4},
        {MM "min(max(s, 0.0), 5.0)\n}\n", 0, 2},
        {MM "s * sigmoid(s + 1.0)\n}\n", 0, 3},
        /* x^3 as (s * s) * t of another t: the cube must be of the sum */
        {MM "(s * (tanh((s + (s * (s * b)) * 0.044715) * 0.7978846) + 1.0)) * 0.5\n}\n", 0, 9},
        /* pow(s, 2.0): not the cube */
        {MM "(s * 0.5) * (tanh((s + pow(s, 2.0) * 0.044715) * 0.7978846) + 1.0)\n}\n", 0, 8},
    };
#undef MM
#undef CV
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tfvm_program *p = compile_opt(cases[i].src, 1);
        const bool conv = strstr(cases[i].src, "conv2d") != NULL;
        const isa_op fused = conv ? ISA_FUSED_CONV2D : ISA_FUSED_MATMUL;
        ck_assert_msg(count(p, fused) == 1, "case %zu: %u fused", i, count(p, fused));
        ck_assert_msg(attr_of(p, fused) == cases[i].act, "case %zu: act 0x%x", i, attr_of(p, fused));
        uint32_t left = 0;
        for (uint32_t k = 0; k < p->isa.n_insts; k++) {
            const isa_op op = p->isa.insts[k].op;
            left += op != ISA_ARG && op != ISA_CONST && op != ISA_RESULT && op != fused;
        }
        ck_assert_msg(left == cases[i].left, "case %zu: %u instructions left", i, left);
        tfvm_program_free(p);
        tfvm_tensor *args[3];
        if (conv) {
            args[0] = tensor(4, (int64_t[]){2, 2, 5, 5}, 11);
            args[1] = tensor(4, (int64_t[]){3, 2, 3, 3}, 12);
            args[2] = tensor(1, (int64_t[]){3}, 13);
        } else {
            args[0] = tensor(2, (int64_t[]){7, 6}, 11);
            args[1] = tensor(2, (int64_t[]){6, 5}, 12);
            args[2] = tensor(1, (int64_t[]){5}, 13);
        }
        same_as_unfused_x3(cases[i].src, args);
    }
}
END_TEST

/* An activation after a RESHAPE of the biased product (GPT-2's Conv1D views
 * its [B * T, N] product as [B, T, N] before NewGELU) fuses into the
 * product, the RESHAPE moved after it; a RESHAPE whose value is used again
 * keeps the activation apart. Bits of -O0 either way. */
START_TEST(relabeled_activation)
{
#define RS "fn main(x: f32[7, 6], w: f32[6, 5], b: f32[5]) -> f32[1, 7, 5] {\n" \
           "    let s = reshape(matmul(x, w) + b, [1, 7, 5]);\n    "
#define TS "fn main(x: f32[7, 6], w: f32[6, 5], b: f32[5]) -> f32[1, 5, 7] {\n" \
           "    let t = transpose(reshape(matmul(x, w) + b, [1, 7, 5]), [0, 2, 1]);\n    "
    static const struct {
        const char *src;
        uint32_t act, reshapes, left; /* the fused op's activation, RESHAPEs, other ops left */
    } cases[] = {
        {RS "(s * 0.5) * (tanh((s + pow(s, 3.0) * 0.044715) * 0.7978846) + 1.0)\n}\n", ISA_OPT_ACT_GELU_NEW, 1, 0},
        {RS "s * sigmoid(s)\n}\n", ISA_OPT_ACT_SILU, 1, 0},
        {RS "relu(s)\n}\n", ISA_OPT_ACT_RELU, 1, 0},
        /* s is also added to the result: the activation stays an op of its own */
        {RS "relu(s) + s\n}\n", 0, 1, 2},
        /* a chain of them (SegFormer flattens and transposes its depthwise
         * convolution's result before GELU): the chain stays, the TRANSPOSE
         * left besides the RESHAPE */
        {TS "(t * (erf(t / 1.4142135) + 1.0)) * 0.5\n}\n", ISA_OPT_ACT_GELU, 1, 1},
        {TS "relu(t)\n}\n", ISA_OPT_ACT_RELU, 1, 1},
    };
#undef RS
#undef TS
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tfvm_program *p = compile_opt(cases[i].src, 1);
        ck_assert_msg(count(p, ISA_FUSED_MATMUL) == 1, "case %zu: %u fused", i, count(p, ISA_FUSED_MATMUL));
        ck_assert_msg(attr_of(p, ISA_FUSED_MATMUL) == cases[i].act, "case %zu: act 0x%x", i,
                      attr_of(p, ISA_FUSED_MATMUL));
        ck_assert_msg(count(p, ISA_RESHAPE) == cases[i].reshapes, "case %zu: %u reshapes", i, count(p, ISA_RESHAPE));
        uint32_t left = 0;
        for (uint32_t k = 0; k < p->isa.n_insts; k++) {
            const isa_op op = p->isa.insts[k].op;
            left += op != ISA_ARG && op != ISA_CONST && op != ISA_RESULT && op != ISA_FUSED_MATMUL && op != ISA_RESHAPE;
        }
        ck_assert_msg(left == cases[i].left, "case %zu: %u instructions left", i, left);
        tfvm_program_free(p);
        tfvm_tensor *args[3] = {tensor(2, (int64_t[]){7, 6}, 11), tensor(2, (int64_t[]){6, 5}, 12),
                                tensor(1, (int64_t[]){5}, 13)};
        same_as_unfused_x3(cases[i].src, args);
    }
}
END_TEST

/* A product with no bias and an activation (T5's, Llama's bias-free Linear
 * layers) becomes one FUSED_MATMUL whose bias is a scalar -0, which adds
 * nothing to any element: results bit for bit -O0's (a zero row and negative
 * weights among the inputs). Through a RESHAPE too; a product used again
 * keeps its activation apart. */
START_TEST(unbiased_activation)
{
#define UB "fn main(x: f32[4, 6], w: f32[6, 5]) -> f32[4, 5] {\n    let s = matmul(x, w);\n    "
#define UR "fn main(x: f32[4, 6], w: f32[6, 5]) -> f32[1, 4, 5] {\n    let s = reshape(matmul(x, w), [1, 4, 5]);\n    "
    static const struct {
        const char *src;
        uint32_t act, left; /* the fused op's activation; ops left but ARG, CONST, RESULT, the fused op, RESHAPE */
    } cases[] = {
        {UB "relu(s)\n}\n", ISA_OPT_ACT_RELU, 0},
        {UB "s * sigmoid(s)\n}\n", ISA_OPT_ACT_SILU, 0},
        {UB "(s * (erf(s / 1.4142135) + 1.0)) * 0.5\n}\n", ISA_OPT_ACT_GELU, 0},
        {UR "relu(s)\n}\n", ISA_OPT_ACT_RELU, 0},
        {UB "relu(s) + s\n}\n", 0, 2},
    };
#undef UB
#undef UR
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tfvm_program *p = compile_opt(cases[i].src, 1);
        one_fused(p, ISA_FUSED_MATMUL, cases[i].act, i);
        uint32_t left = 0;
        for (uint32_t k = 0; k < p->isa.n_insts; k++) {
            const isa_op op = p->isa.insts[k].op;
            left += op != ISA_ARG && op != ISA_CONST && op != ISA_RESULT && op != ISA_FUSED_MATMUL &&
                    op != ISA_RESHAPE && op != ISA_MATMUL;
        }
        ck_assert_msg(left == cases[i].left, "case %zu: %u instructions left", i, left);
        tfvm_program_free(p);
        tfvm_tensor *args[2] = {tensor(2, (int64_t[]){4, 6}, 11), tensor(2, (int64_t[]){6, 5}, 12)};
        float *xd = tfvm_tensor_data(args[0]), *wd = tfvm_tensor_data(args[1]);
        for (int64_t j = 0; j < 24; j++)
            xd[j] = j < 6 ? 0.0f : xd[j] * 3.0f;
        for (int64_t j = 0; j < 30; j++)
            wd[j] = j % 5 == 1 ? -fabsf(wd[j]) - 1.0f : wd[j] * 3.0f;
        same_as_unfused(cases[i].src, args, 2);
    }
}
END_TEST

/* Runs main at level opt on x: its one result (the caller frees it) */
static tfvm_tensor *run_x(const char *src, int opt, tfvm_tensor *x) { return run_program(compile_opt(src, opt), x); }

/* The shape of p's one rank-4 f32 constant of 4 output channels (the weights) */
static void weight_dims(const tfvm_program *p, int64_t *kh, int64_t *kw)
{
    *kh = *kw = -1;
    for (uint32_t c = 0; c < p->isa.n_consts; c++)
        if (p->isa.consts[c].rank == 4 && p->isa.consts[c].dims[0] == 4) {
            *kh = p->isa.consts[c].dims[2];
            *kw = p->isa.consts[c].dims[3];
        }
}

/* A CONV2D whose outer window rows and columns read only padding for every
 * output (DeepLabV3's ASPP: 3x3 windows dilated past the map) keeps the
 * live taps: on an 8x8 map dilated by 9 only the middle one, a 1x1 layer
 * whose results are exactly those of the 1x1 convolution by the middle
 * weights; by 4 with padding 4 every tap is live and the layer stays; by 9
 * with pads 2 before and 9 after only the middle one is live too, but
 * trimmed the layer would need a negative pad, and it stays. */
/* A CONV2D with no bias before its activation, directly or through the
 * relabelling a 1-D convolution's exporter writes: one FUSED_CONV2D with
 * -0 biases, the bits of the ops unfused (zeros and negative sums in the
 * data, as above) */
START_TEST(unbiased_conv_activation)
{
#define CB "fn main(x: f32[1, 4, 1, 9], w: f32[6, 4, 1, 3]) -> f32[1, 6, 1, 7] {\n    let s = conv2d(x, w);\n    "
#define CR "fn main(x: f32[1, 4, 1, 9], w: f32[6, 4, 1, 3]) -> f32[1, 6, 7] {\n    let s = reshape(conv2d(x, w), [1, 6, 7]);\n    "
    static const struct {
        const char *src;
        uint32_t act;
    } cases[] = {
        {CB "relu(s)\n}\n", ISA_OPT_ACT_RELU},
        {CR "(s * (erf(s / 1.4142135) + 1.0)) * 0.5\n}\n", ISA_OPT_ACT_GELU},
        {CB "relu(s) + s\n}\n", 0},
    };
#undef CB
#undef CR
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tfvm_program *p = compile_opt(cases[i].src, 1);
        one_fused(p, ISA_FUSED_CONV2D, cases[i].act, i);
        tfvm_program_free(p);
        tfvm_tensor *args[2] = {tensor(4, (int64_t[]){1, 4, 1, 9}, 13), tensor(4, (int64_t[]){6, 4, 1, 3}, 14)};
        float *xd = tfvm_tensor_data(args[0]), *wd = tfvm_tensor_data(args[1]);
        for (int64_t j = 0; j < 36; j++)
            xd[j] = j % 9 < 3 ? 0.0f : xd[j] * 3.0f;
        for (int64_t j = 0; j < 72; j++)
            wd[j] = j / 12 == 1 ? -fabsf(wd[j]) - 1.0f : wd[j] * 3.0f;
        same_as_unfused(cases[i].src, args, 2);
    }
}
END_TEST

/* RMSNorm spelled as torch.onnx exports T5's and Llama's: one RMS_NORM,
 * in either operand order, POW or a product for the square; not where an
 * inner value has another use or the mean is not over the last axes. The
 * bits of -O0 in every case. */
START_TEST(rms_norm_spelled)
{
#define RH "fn main(x: f32[2, 3, 16], w: f32[16]) -> f32[2, 3, 16] {\n    "
    static const struct {
        const char *src;
        uint32_t fused, axis;
    } cases[] = {
        {RH "let v = reduce_mean(pow(x, 2.0), [2], keepdims = true);\n    w * (x * (1.0 / sqrt(v + 0.000001)))\n}\n",
         1, 2},
        {RH "let v = reduce_mean(x * x, [-1], keepdims = true);\n    ((1.0 / sqrt(0.5 + v)) * x) * w\n}\n", 1, 2},
        {RH "let v = reduce_mean(x * x, [-1, 1], keepdims = true);\n    w * (x * (1.0 / sqrt(v + 0.5)))\n}\n", 0, 0},
        {RH "let v = reduce_mean(x * x, [-1, 1], keepdims = true);\n    reshape(w, [1, 16]) * (x * (1.0 / sqrt(v + 0.5)))\n}\n",
         0, 0},
        {RH "let v = reduce_mean(x * x, [-1, 1], keepdims = true);\n    (x * (1.0 / sqrt(v + 0.5))) * 2.5 + w\n}\n", 1, 1},
        {RH "let r = 1.0 / sqrt(reduce_mean(x * x, [2], keepdims = true) + 0.5);\n    (w * (x * r)) + r\n}\n", 0, 0},
        {RH "let v = reduce_mean(x * x, [1], keepdims = true);\n    w * (x * (1.0 / sqrt(v + 0.5)))\n}\n", 0, 0},
        /* a scale of more dims than x grows the product: not RMS_NORM's shape */
        {"fn main(x: f32[2, 3, 16], w: f32[16]) -> f32[1, 2, 3, 16] {\n    let v = reduce_mean(x * x, [2], "
         "keepdims = true);\n    reshape(w, [1, 1, 1, 16]) * (x * (1.0 / sqrt(v + 0.5)))\n}\n",
         0, 0},
    };
#undef RH
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tfvm_program *p = compile_opt(cases[i].src, 1);
        ck_assert_msg(count(p, ISA_RMS_NORM) == cases[i].fused, "case %zu: %u fused", i, count(p, ISA_RMS_NORM));
        if (cases[i].fused)
            ck_assert_msg(attr_of(p, ISA_RMS_NORM) == cases[i].axis, "case %zu: axis %u", i, attr_of(p, ISA_RMS_NORM));
        tfvm_program_free(p);
        tfvm_tensor *args[2] = {tensor(3, (int64_t[]){2, 3, 16}, 15), tensor(1, (int64_t[]){16}, 16)};
        float *xd = tfvm_tensor_data(args[0]);
        for (int64_t j = 0; j < 96; j++)
            xd[j] = j < 16 ? 0.0f : xd[j] * (j % 7 == 0 ? 300.0f : 3.0f);
        same_as_unfused(cases[i].src, args, 2);
    }
}
END_TEST

START_TEST(dead_taps)
{
    char w[2048], src[4096], src1[4096];
    size_t at = 0;
    for (int i = 0; i < 4 * 3 * 9; i++)
        at += (size_t)snprintf(w + at, sizeof w - at, "%s%.3f", i ? ", " : "", (double)((i * 37 % 23) - 11) / 7.0);
    char mid[512];
    at = 0;
    for (int i = 0; i < 4 * 3; i++)
        at += (size_t)snprintf(mid + at, sizeof mid - at, "%s%.3f", i ? ", " : "", (double)(((i * 9 + 4) * 37 % 23) - 11) / 7.0);
    static const struct {
        const char *pad;
        int dil;
        int64_t kh; /* the weights' window rows (and columns) left */
    } cases[] = {{"9", 9, 1}, {"4", 4, 3}, {"[2, 2, 9, 9]", 9, 3}};
    tfvm_tensor *x = tensor(4, (int64_t[]){1, 3, 8, 8}, 21);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(src, sizeof src,
                 "fn main(x: f32[1, 3, 8, 8]) -> f32[1, 4, ?, ?] {\n"
                 "    conv2d(x, cast<f32>(reshape([%s], [4, 3, 3, 3])), padding = %s, dilation = %d)\n}\n",
                 w, cases[i].pad, cases[i].dil);
        tfvm_program *p = compile_opt(src, 1);
        int64_t kh, kw;
        weight_dims(p, &kh, &kw);
        ck_assert_msg(kh == cases[i].kh && kw == cases[i].kh, "case %zu: weights %lldx%lld", i, (long long)kh,
                      (long long)kw);
        tfvm_program_free(p);
        tfvm_tensor *a = run_x(src, 1, x), *b = run_x(src, 0, x);
        ck_assert_int_eq(tfvm_tensor_count(a), tfvm_tensor_count(b));
        const float *fa = tfvm_tensor_cdata(a), *fb = tfvm_tensor_cdata(b);
        for (int64_t j = 0; j < tfvm_tensor_count(a); j++)
            ck_assert_msg(fabsf(fa[j] - fb[j]) <= 1e-5f * (fabsf(fb[j]) + 1), "case %zu: element %lld", i, (long long)j);
        if (cases[i].kh == 1) { /* exactly the 1x1 convolution by the middle weights */
            snprintf(src1, sizeof src1,
                     "fn main(x: f32[1, 3, 8, 8]) -> f32[1, 4, 8, 8] {\n    conv2d(x, cast<f32>(reshape([%s], [4, 3, 1, 1])))\n}\n",
                     mid);
            tfvm_tensor *c = run_x(src1, 1, x);
            ck_assert(memcmp(tfvm_tensor_cdata(a), tfvm_tensor_cdata(c), (size_t)tfvm_tensor_count(a) * sizeof(float)) ==
                      0);
            tfvm_tensor_free(c);
        }
        tfvm_tensor_free(a);
        tfvm_tensor_free(b);
    }
    tfvm_tensor_free(x);
}
END_TEST

/* tensor folding: small results and rearranged weights fold, a big fill of
 * a small constant stays a FILL (the size heuristic of compiler/opt.c) */
START_TEST(folding)
{
    tfvm_program *p = compile_opt("fn main(x: f32[?, 4]) -> (a: f32[?, 4], b: f32[1000, 1000]) {\n"
                                  "    let w = cast<f32>(transpose(reshape([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0,\n"
                                  "                               11.0, 12.0, 13.0, 14.0, 15.0, 16.0], [4, 4]), [1, 0]));\n"
                                  "    (matmul(x, w) + fill([4], 0.5f32), fill([1000, 1000], 0.0f32))\n"
                                  "}\n",
                                  1);
    ck_assert_uint_eq(count(p, ISA_TRANSPOSE) + count(p, ISA_RESHAPE) + count(p, ISA_CAST), 0);
    ck_assert_uint_eq(count(p, ISA_FILL), 1);
    ck_assert_uint_eq(attr_of(p, ISA_FUSED_MATMUL), 0);
    size_t biggest = 0;
    for (uint32_t c = 0; c < p->isa.n_consts; c++)
        if (p->isa.consts[c].nbytes > biggest)
            biggest = p->isa.consts[c].nbytes;
    ck_assert_uint_eq(biggest, 64); /* the 4x4 weight; never the 4 MB fill */
    tfvm_program_free(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fuse");
    TCase *tc = tcase_create("fuse");
    tcase_add_test(tc, mlp);
    tcase_add_test(tc, relabeled_activation);
    tcase_add_test(tc, unbiased_activation);
    tcase_add_test(tc, unbiased_conv_activation);
    tcase_add_test(tc, rms_norm_spelled);
    tcase_add_test(tc, dead_taps);
    tcase_add_test(tc, cnn);
    tcase_add_test(tc, channels_last_pair);
    tcase_add_test(tc, residual);
    tcase_add_test(tc, conv_hardsigmoid);
    tcase_add_test(tc, transposed_operands);
    tcase_add_test(tc, tensorflow_mlp);
    tcase_add_test(tc, tensorflow_convnet);
    tcase_add_test(tc, tensorflow_nhwc_chain);
    tcase_add_test(tc, stays_apart);
    tcase_add_test(tc, batch_norm_alone);
    tcase_add_test(tc, constant_results_outlive_the_program);
    tcase_add_test(tc, activations);
    tcase_add_test(tc, folding);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
