/* test/unit/test_optable.c — isa/ops.def's dtype facts of the tensor ops against
 * the CPU kernels: each op on each dtype, with small valid operands. What its
 * `types` column allows must run and give its `result` dtype; the rest must be
 * TFVM_ERR_TYPE (never INTERNAL or UNSUPPORTED). The elementwise rows have
 * the same check in test_elementwise (table_kernels). */
#include <stdio.h>
#include <string.h>

#include "devices/cpu/cpu.h"
#include "testutil.h"
#include "util/half.h"

/* How each operand of a sample is made. */
enum {
    S_NONE,
    S_X,    /* of the dtype under test: dims, elements k % 3 (bool: k % 2), or vals */
    S_I64,  /* an i64 tensor of rank and vals */
    S_I64S, /* an i64 scalar vals[0] */
    S_BOOLS,/* a bool scalar vals[0] */
    S_F32   /* an f32 tensor of vals */
};

typedef struct operand {
    int kind;
    int rank; /* -1: a scalar */
    int64_t dims[4];
    int n;    /* vals given (S_X: 0 = the k % 3 pattern) */
    double vals[10];
} operand;

typedef struct sample {
    isa_op op;
    uint32_t attr;
    operand in[5];
} sample;

#define X(r, ...) {S_X, r, {__VA_ARGS__}, 0, {0}}
#define XS(v) {S_X, -1, {0}, 1, {v}}
#define IV(n, ...) {S_I64, 1, {n}, n, {__VA_ARGS__}}
#define IS(v) {S_I64S, -1, {0}, 1, {v}}
#define BS(v) {S_BOOLS, -1, {0}, 1, {v}}
/* attr: the dtype under test (BITCAST to the same dtype: every dtype has one of its size) */
#define ATTR_DTYPE UINT32_MAX
#define FV(n, ...) {S_F32, 1, {n}, n, {__VA_ARGS__}}

/* One valid call of every tensor op; test_samples fails for a row without one. */
static const sample samples[] = {
    {ISA_MATMUL, 0, {X(2, 2, 3), X(2, 3, 2)}},
    {ISA_CONV2D, 0, {X(4, 1, 1, 3, 3), X(4, 1, 1, 2, 2), IV(9, 1, 1, 0, 0, 0, 0, 1, 1, 1)}},
    {ISA_MAXPOOL, 0, {X(4, 1, 1, 3, 3), IV(8, 2, 2, 1, 1, 0, 0, 0, 0)}},
    {ISA_AVGPOOL, 0, {X(4, 1, 1, 3, 3), IV(8, 2, 2, 1, 1, 0, 0, 0, 0)}},
    {ISA_SOFTMAX, 1, {X(2, 2, 3)}},
    {ISA_REDUCE_SUM, 0, {X(2, 2, 3), IV(1, 1)}},
    {ISA_REDUCE_MEAN, 0, {X(2, 2, 3), IV(1, 1)}},
    {ISA_REDUCE_MAX, 0, {X(2, 2, 3), IV(1, 1)}},
    {ISA_ARGMAX, 1, {X(2, 2, 3)}},
    {ISA_RESHAPE, 0, {X(2, 2, 3), IV(2, 3, 2)}},
    {ISA_TRANSPOSE, 0, {X(2, 2, 3), IV(2, 1, 0)}},
    {ISA_CONCAT, 0, {X(2, 2, 3), X(2, 2, 3)}},
    {ISA_SLICE, 0, {X(2, 2, 3), IV(2, 0, 1), IV(2, 2, 3)}},
    {ISA_GATHER, 0, {X(2, 2, 3), IV(2, 1, 0)}},
    {ISA_PAD, 0, {X(2, 2, 3), IV(4, 1, 0, 0, 1)}},
    {ISA_SHAPE, 0, {X(2, 2, 3)}},
    {ISA_WORKERS, 0, {X(2, 2, 3)}},
    {ISA_FILL, 0, {IV(2, 2, 2), XS(1)}},
    {ISA_RANGE, 0, {XS(0), XS(3), XS(1)}},
    {ISA_LOG_SOFTMAX, 1, {X(2, 2, 3)}},
    {ISA_REDUCE_MIN, 0, {X(2, 2, 3), IV(1, 1)}},
    {ISA_REDUCE_PROD, 0, {X(2, 2, 3), IV(1, 1)}},
    {ISA_ARGMIN, 1, {X(2, 2, 3)}},
    {ISA_SQUEEZE, 0, {X(3, 2, 1, 3), IV(1, 1)}},
    {ISA_UNSQUEEZE, 0, {X(2, 2, 3), IV(1, 0)}},
    {ISA_FLATTEN, 1, {X(3, 2, 3, 1)}},
    {ISA_EXPAND, 0, {X(2, 1, 3), IV(2, 2, 3)}},
    {ISA_TILE, 0, {X(2, 2, 3), IV(2, 2, 1)}},
    {ISA_STRIDED_SLICE, 0, {X(2, 2, 3), IV(1, 0), IV(1, 2), IV(1, 1), IV(1, 1)}},
    {ISA_GATHER_ELEMENTS, 1, {X(2, 2, 3), {S_I64, 2, {2, 3}, 6, {0, 1, 2, 2, 1, 0}}}},
    {ISA_TOPK, 1, {X(2, 2, 3), IS(2), BS(1)}},
    {ISA_TRILU, 0, {X(2, 2, 3), IS(0)}},
    {ISA_CUMSUM, 0, {X(2, 2, 3), IS(1)}},
    {ISA_ONEHOT, 0, {X(1, 3), IS(3), FV(2, 0, 1)}},
    {ISA_RESIZE, 0, {X(4, 1, 1, 2, 2), FV(4, 1, 1, 2, 2), {S_I64, 1, {0}, 0, {0}}}},
    {ISA_PADV, 0, {X(2, 2, 3), IV(4, 1, 0, 0, 1), XS(0)}},
    {ISA_LRN, 0, {X(4, 1, 2, 2, 2), FV(4, 1, 0.0001, 0.75, 1)}},
    {ISA_LSTM_CELL_C, 0, {X(2, 1, 8), X(2, 1, 8), X(2, 1, 2)}},
    {ISA_LSTM_CELL_H, 0, {X(2, 1, 8), X(2, 1, 8), X(2, 1, 2)}},
    {ISA_GRU_CELL, 0, {X(2, 1, 6), X(2, 1, 6), X(2, 1, 2)}},
    {ISA_LSTM_STEP, 0, {X(3, 2, 1, 8), IS(1), X(3, 2, 1, 2), X(2, 8, 2), X(1, 8)}},
    {ISA_GRU_STEP, 0, {X(3, 2, 1, 6), IS(0), X(2, 1, 2), X(2, 6, 2), X(1, 6)}},
    {ISA_STACK_PUT, 0, {{S_X, 1, {0}, 0, {0}}, IS(0), X(1, 3)}},
    {ISA_SCATTER_ROWS, 0, {X(2, 2, 3), IV(1, 1), X(2, 1, 3)}},
    {ISA_LAYER_NORM, 1, {X(2, 2, 3), X(1, 3), X(1, 3), XS(1)}},
    {ISA_RMS_NORM, 1, {X(2, 2, 3), X(1, 3), XS(1)}},
    {ISA_BITCAST, ATTR_DTYPE, {X(2, 2, 3)}},
    {ISA_NONZERO, 0, {X(2, 2, 3)}},
    {ISA_UNIQUE, ISA_OPT_SORTED, {X(2, 3, 2), IS(1)}},
    {ISA_UNIQUE_INDEX, ISA_OPT_UQ_COUNTS, {X(2, 3, 2), IS(0)}},
    {ISA_DET, 0, {X(3, 2, 2, 2)}},
    {ISA_RESIZE2, ISA_OPT_CUBIC, {X(2, 2, 2), FV(2, 2, 2), {S_I64, 1, {0}, 0, {0}}, FV(2, -0.75, 0)}},
    {ISA_GRID_SAMPLE, 0, {X(3, 1, 1, 2), {S_X, 3, {1, 1, 1}, 1, {0.5}}}},
    {ISA_NMS, 0, {X(3, 1, 1, 4), X(3, 1, 1, 1), IS(1), FV(1, 0.5), {S_F32, 1, {0}, 0, {0}}}},
    {ISA_AFFINE_GRID, 0, {X(3, 1, 2, 3), IV(4, 1, 1, 2, 2)}},
    {ISA_COL2IM, 0, {X(3, 1, 1, 2), IV(1, 2), IV(1, 1), IV(4, 1, 0, 0, 1)}},
    {ISA_ROI_ALIGN, 0, {X(4, 1, 1, 2, 2), {S_X, 2, {1, 4}, 4, {0, 0, 1, 1}}, IV(1, 0), FV(4, 1, 1, 0, 1)}},
    {ISA_FUSED_MATMUL, ISA_OPT_ACT_RELU, {X(2, 2, 3), X(2, 3, 2), X(1, 2)}},
    {ISA_FUSED_CONV2D, ISA_OPT_ACT_TANH, {X(4, 1, 1, 3, 3), X(4, 1, 1, 2, 2), IV(9, 1, 1, 0, 0, 0, 0, 1, 1, 1), X(1, 1)}},
    {ISA_FUSED_CONV2D_ADD, ISA_OPT_ACT_RELU,
     {X(4, 1, 1, 3, 3), X(4, 1, 1, 2, 2), IV(9, 1, 1, 0, 0, 0, 0, 1, 1, 1), X(1, 1), X(4, 1, 1, 2, 2)}},
    {ISA_DEFORM_CONV, 0, {X(4, 1, 1, 2, 2), X(4, 1, 1, 1, 1), X(4, 1, 2, 2, 2), {S_X, 1, {0}, 0, {0}}, IV(10, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1)}},
};

static void put(uint8_t dt, void *data, int64_t k, double v)
{
    switch (dt) {
    case TFVM_BOOL: ((uint8_t *)data)[k] = v != 0; break;
    case TFVM_I32: ((int32_t *)data)[k] = (int32_t)v; break;
    case TFVM_I64: ((int64_t *)data)[k] = (int64_t)v; break;
    case TFVM_F32: ((float *)data)[k] = (float)v; break;
    case TFVM_F64: ((double *)data)[k] = v; break;
    case TFVM_U8: ((uint8_t *)data)[k] = (uint8_t)v; break;
    case TFVM_I8: ((int8_t *)data)[k] = (int8_t)v; break;
    case TFVM_I16: ((int16_t *)data)[k] = (int16_t)v; break;
    case TFVM_U16: ((uint16_t *)data)[k] = (uint16_t)v; break;
    case TFVM_U32: ((uint32_t *)data)[k] = (uint32_t)v; break;
    case TFVM_U64: ((uint64_t *)data)[k] = (uint64_t)v; break;
    case TFVM_F16: ((uint16_t *)data)[k] = ut_f64_to_f16(v); break;
    case TFVM_BF16: ((uint16_t *)data)[k] = ut_f64_to_bf16(v); break;
    }
}

static dev_value make(const operand *o, uint8_t d)
{
    uint8_t dt = o->kind == S_X ? d : o->kind == S_F32 ? TFVM_F32 : o->kind == S_BOOLS ? TFVM_BOOL : TFVM_I64;
    const int rank = o->rank < 0 ? 0 : o->rank;
    tfvm_tensor *t = tfvm_tensor_new((tfvm_dtype)dt, rank, o->dims, NULL);
    ck_assert_ptr_nonnull(t);
    for (int64_t k = 0; k < t->count; k++)
        put(dt, t->data, k, o->n ? o->vals[k] : dt == TFVM_BOOL ? (double)(k % 2) : (double)(k % 3));
    if (o->rank >= 0)
        return (dev_value){.dtype = dt, .is_tensor = 1, .u.t = t};
    dev_value v = {.dtype = dt};
    memcpy(&v.u, t->data, t->nbytes); /* every member of the union starts at its first byte */
    tfvm_tensor_free(t);
    return v;
}

START_TEST(test_samples)
{
    int ran = 0, refused = 0, bad = 0;
    for (int op = 0; op < ISA_OP_COUNT; op++) {
        if (isa_ops[op].cls != ISA_CLASS_TENSOR)
            continue;
        const sample *s = NULL;
        for (size_t i = 0; i < UT_COUNTOF(samples); i++)
            if ((int)samples[i].op == op)
                s = &samples[i];
        ck_assert_msg(s != NULL, "%s: no sample operands in test_optable.c: add a row", isa_ops[op].name);
        const int n = isa_ops[op].n_in;
        for (int d = TFVM_BOOL; d <= ISA_DTYPE_LAST; d++) {
            dev_value in[5];
            uint8_t dt[5] = {0};
            for (int k = 0; k < n; k++) {
                ck_assert_msg(s->in[k].kind != S_NONE, "%s: sample has too few operands", isa_ops[op].name);
                in[k] = make(&s->in[k], (uint8_t)d);
                dt[k] = in[k].dtype;
            }
            char msg[256] = "";
            dev_value out = {.dtype = 99};
            const uint32_t attr = s->attr == ATTR_DTYPE ? (uint32_t)d : s->attr;
            tfvm_status st = dev_cpu_tensor((isa_op)op, attr, in, (uint32_t)n, &out, NULL, msg, sizeof msg);
            const char *name = tfvm_dtype_name((tfvm_dtype)d);
            /* every disagreement is printed, then the test fails once */
            if (isa_takes((uint32_t)op, (uint32_t)d)) {
                uint8_t want = isa_result_dtype((uint32_t)op, dt, attr);
                if (st != TFVM_OK)
                    bad++, printf("%s on %s (ops.def: types %s): %s: %s\n", isa_ops[op].name, name,
                                  isa_types_name(isa_ops[op].types), tfvm_status_name(st), msg);
                else if (out.dtype != want || (out.is_tensor && out.u.t->dtype != out.dtype))
                    bad++, printf("%s on %s: result %s, ops.def's %s says %s\n", isa_ops[op].name, name,
                                  tfvm_dtype_name((tfvm_dtype)out.dtype), isa_result_name(isa_ops[op].result),
                                  tfvm_dtype_name((tfvm_dtype)want));
                ran++;
            } else {
                if (st != TFVM_ERR_TYPE)
                    bad++, printf("%s on %s (ops.def: types %s): %s (%s), want a type error\n", isa_ops[op].name,
                                  name, isa_types_name(isa_ops[op].types), tfvm_status_name(st), msg);
                refused++;
            }
            if (st == TFVM_OK)
                dev_value_release(&out);
            for (int k = 0; k < n; k++)
                dev_value_release(&in[k]);
        }
    }
    printf("test_optable: %d (tensor op, dtype) pairs run, %d refused as ops.def says\n", ran, refused);
    ck_assert_msg(bad == 0, "%d (tensor op, dtype) pairs disagree with isa/ops.def (printed above)", bad);
    ck_assert_int_gt(ran, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optable");
    TCase *tc = tcase_create("tensor");
    tcase_add_test(tc, test_samples);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
