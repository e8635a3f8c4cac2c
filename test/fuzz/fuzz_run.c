/* test/fuzz/fuzz_run.c — libFuzzer target that imports *and runs* a model:
 * the bytes as an ONNX ModelProto, else as a TensorFlow GraphDef; a model
 * that imports runs its first entry on zero arguments (unknown dims are 2)
 * for at most 20,000 firings, deterministic, on an allocator that refuses
 * single blocks over 16 MB (a model may ask for 100 GB: it must say so,
 * not crash; the bound keeps one kernel's work under a few seconds in the
 * sanitized build: at 64 MB a GraphDef's bilinear resize to [1, 2752519,
 * 3, 2] took 17 s, test/fuzz/run_seeds/resize_64mb.pb). Any outcome but a
 * crash, leak, hang or UB is fine; an error must be one line. Seeds:
 * test/onnx/models, test/tf/fixtures and test/fuzz/run_seeds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vm/vm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void *capped(void *ud, void *p, size_t old, size_t n)
{
    (void)ud;
    (void)old;
    if (n == 0) {
        free(p);
        return NULL;
    }
    return n > ((size_t)16 << 20) ? NULL : realloc(p, n);
}

static void one_line(const tfvm_error *err, tfvm_status st)
{
    if (err->code != st || !err->message[0] || strchr(err->message, '\n'))
        __builtin_trap();
}

/* A zero argument of parameter q (NULL tensor: too big, skip the run). */
static bool zero_arg(const tfvm_param_info *q, const tfvm_allocator *a, tfvm_value *v)
{
    memset(v, 0, sizeof *v);
    v->dtype = q->dtype;
    if (!q->is_tensor)
        return true;
    int rank = q->rank < 0 ? 1 : q->rank;
    int64_t dims[TFVM_MAX_RANK], count = 1;
    for (int k = 0; k < rank; k++) {
        dims[k] = q->dims && q->dims[k] >= 0 ? q->dims[k] : 2;
        if (dims[k] > 4096 || (count *= dims[k] ? dims[k] : 1) > 65536)
            return false;
    }
    v->tensor = tfvm_tensor_new(q->dtype, rank, dims, a);
    return v->tensor != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.allocator = (tfvm_allocator){capped, NULL};
    cfg.deterministic = true;
    cfg.max_contexts = 10000;
    tfvm_program *p = NULL;
    tfvm_error err;
    tfvm_status st = tfvm_program_import_onnx(data, size, "fuzz.onnx", NULL, &cfg, &p, &err);
    if (st != TFVM_OK) {
        one_line(&err, st);
        st = tfvm_program_import_tf(data, size, "fuzz.pb", NULL, &cfg, &p, &err);
        if (st != TFVM_OK) {
            one_line(&err, st);
            return 0;
        }
    }
    tfvm_entry_info e;
    tfvm_vm *vm = NULL;
    if (tfvm_program_entry(p, 0, &e) != TFVM_OK || e.n_params > 16 || tfvm_vm_new(p, &cfg, &vm) != TFVM_OK) {
        tfvm_program_free(p);
        return 0;
    }
    tfvm_value args[16], *res = calloc(e.n_results + 1, sizeof *res);
    size_t made = 0;
    bool ok = res != NULL;
    for (; ok && made < e.n_params; made++)
        ok = zero_arg(&e.params[made], &cfg.allocator, &args[made]);
    if (ok && vm_begin(vm, 0, args, e.n_params) == TFVM_OK) {
        vm_step(vm, 20000);
        st = vm_end(vm, res, e.n_results);
        if (st == TFVM_OK) {
            for (size_t k = 0; k < e.n_results; k++)
                tfvm_value_release(&res[k]);
        } else {
            one_line(tfvm_last_error(vm), st);
        }
    }
    for (size_t k = 0; k < made; k++)
        tfvm_value_release(&args[k]);
    free(res);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
    return 0;
}
