/* test/unit/onnx_check.h — the Check-side helpers of the ONNX suites
 * (test_onnx, test_onnx_seq, test_onnx_bits): a model that must compile, a
 * run of main deterministically (mode 0) or on 2 threads (mode 1), an exact
 * import error, and results compared with onnx_util.h's ou_same. */
#ifndef TFVM_TEST_ONNX_CHECK_H
#define TFVM_TEST_ONNX_CHECK_H

#include "onnx_util.h"
#include "testutil.h"

static inline tfvm_program *compile_ok(const char *path)
{
    tfvm_program *p = NULL;
    tfvm_error err;
    tfvm_status st = ou_compile(path, NULL, &p, &err);
    ck_assert_msg(st == TFVM_OK, "%s: %s", path, err.message);
    return p;
}

static inline void run_main(tfvm_program *p, const tfvm_value *args, size_t n, tfvm_value *res, size_t nr, int mode)
{
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.deterministic = mode == 0;
    cfg.threads = mode == 0 ? 1 : 2;
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    tfvm_status st = tfvm_run(vm, "main", args, n, res, nr);
    ck_assert_msg(st == TFVM_OK, "run: %s", tfvm_errmsg(vm));
    tfvm_vm_free(vm);
}

static inline void expect_error(const char *path, tfvm_status code, const char *msg)
{
    tfvm_program *p = NULL;
    tfvm_error err;
    ck_assert_int_eq(ou_compile(path, NULL, &p, &err), code);
    ck_assert_str_eq(err.message, msg);
}

static inline tfvm_tensor *ftensor(int rank, const int64_t *dims, const float *v)
{
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, rank, dims, NULL);
    memcpy(tfvm_tensor_data(t), v, (size_t)tfvm_tensor_count(t) * sizeof *v);
    return t;
}

/* v must equal the tensor of dtype d and dims whose elements are at want. */
static inline void check_value(const tfvm_value *v, tfvm_dtype d, int rank, const int64_t *dims, const void *want)
{
    tfvm_tensor *w = tfvm_tensor_new(d, rank, dims, NULL);
    memcpy(tfvm_tensor_data(w), want, (size_t)tfvm_tensor_count(w) * tfvm_dtype_size(d));
    char why[256];
    bool ok = ou_same(v, w, why, sizeof why);
    tfvm_tensor_free(w);
    ck_assert_msg(ok, "%s", why);
}

static inline void check_f32(const tfvm_value *v, int rank, const int64_t *dims, const float *want)
{
    check_value(v, TFVM_F32, rank, dims, want);
}

#endif
