/* vm/signature.c — arguments and results checked against the entry's declared
 * signature (vm/signature.h): the one place a run's inputs and outputs meet
 * the program's promises about them. */
#include "vm/signature.h"

#include <inttypes.h>
#include <stdio.h>

const char *vm_value_type(tfvm_dtype dtype, const tfvm_tensor *t, char *buf, size_t size)
{
    if (!t) {
        snprintf(buf, size, "%s", tfvm_dtype_name(dtype));
        return buf;
    }
    isa_param q = {.dtype = (uint8_t)tfvm_tensor_dtype(t), .rank = ISA_RANK_ANY, .shaped = true,
                   .ndim = (uint8_t)tfvm_tensor_rank(t), .dims = tfvm_tensor_dims(t)};
    return isa_param_type(&q, buf, size);
}

/* Whether a value of dtype `dt` (tensor t, or a scalar when t is NULL) fits
 * declaration q; *rank_differs says the declared rank alone is what failed.
 * A result may be a scalar where a tensor of any rank, or of rank 0, is
 * declared: the VM keeps rank-0 values of imported models as scalars; and
 * an argument a 0-d tensor where a scalar is. */
static bool fits(const isa_param *q, tfvm_dtype dt, const tfvm_tensor *t, bool is_result, bool *rank_differs)
{
    *rank_differs = false;
    if ((uint8_t)dt != q->dtype)
        return false;
    if (!t && q->rank != 0 && is_result && (!q->shaped || q->ndim == 0))
        return true;
    if (!is_result && q->rank == 0 && t && tfvm_tensor_rank(t) == 0)
        return true; /* a 0-d tensor is an argument's scalar (vm/run.c) */
    if ((q->rank == 0) != !t)
        return false;
    if (!t || !q->shaped)
        return true;
    int rank = tfvm_tensor_rank(t);
    if (rank != q->ndim) {
        *rank_differs = true;
        return false;
    }
    const int64_t *d = tfvm_tensor_dims(t);
    for (int k = 0; k < rank; k++)
        if (q->dims[k] >= 0 && q->dims[k] != d[k])
            return false;
    return true;
}

bool vm_sig_fits(const isa_param *q, tfvm_dtype dt, const tfvm_tensor *t)
{
    bool rank_differs;
    return fits(q, dt, t, false, &rank_differs);
}

tfvm_status vm_sig_check_args(const isa_entry *en, const tfvm_value *args, size_t n_args, tfvm_error *err)
{
    if (n_args != en->n_params)
        return ut_err(err, TFVM_ERR_ARGUMENT, "entry '%s' takes %" PRIu32 " argument%s, got %zu", en->name,
                      en->n_params, en->n_params == 1 ? "" : "s", n_args);
    for (size_t i = 0; i < n_args; i++) {
        const tfvm_value *v = &args[i];
        if (tfvm_is_default(v)) {
            if (en->params[i].has_default)
                continue;
            return ut_err(err, TFVM_ERR_ARGUMENT, "argument %zu '%s' of entry '%s' has no default: give a value", i + 1,
                          en->params[i].name, en->name);
        }
        tfvm_dtype dt = v->tensor ? tfvm_tensor_dtype(v->tensor) : v->dtype;
        bool rank_differs;
        if (fits(&en->params[i], dt, v->tensor, false, &rank_differs))
            continue;
        char want[160], got[160];
        isa_param_type(&en->params[i], want, sizeof want);
        vm_value_type(dt, v->tensor, got, sizeof got);
        return ut_err(err, TFVM_ERR_ARGUMENT, "argument %zu '%s' of entry '%s': expected %s, got %s", i + 1,
                      en->params[i].name, en->name, want, got);
    }
    return TFVM_OK;
}

tfvm_status vm_sig_check_results(const isa_entry *en, const dev_value *results, tfvm_error *err)
{
    for (uint32_t k = 0; k < en->n_results; k++) {
        const dev_value *v = &results[k];
        const tfvm_tensor *t = v->is_tensor ? v->u.t : NULL;
        tfvm_dtype dt = t ? tfvm_tensor_dtype(t) : (tfvm_dtype)v->dtype;
        bool rank_differs;
        if (v->dead || fits(&en->results[k], dt, t, true, &rank_differs))
            continue;
        char want[160], got[160];
        isa_param_type(&en->results[k], want, sizeof want);
        if (rank_differs)
            snprintf(got, sizeof got, "a rank-%d tensor", tfvm_tensor_rank(t));
        else
            vm_value_type(dt, t, got, sizeof got);
        return ut_err(err, TFVM_ERR_TYPE, "result %" PRIu32 " '%s' of entry '%s': declared %s, got %s", k,
                      en->results[k].name, en->name, want, got);
    }
    return TFVM_OK;
}
