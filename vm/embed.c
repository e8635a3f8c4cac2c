/* vm/embed.c — conveniences of the C API for embedders, built only on the
 * public functions: the library's version, and tfvm_vm_new with a message. */
#include <stdio.h>

#include "util/util.h"

const char *tfvm_version(void) { return TFVM_VERSION_STRING; }
int tfvm_version_number(void) { return TFVM_VERSION_NUMBER; }

tfvm_status tfvm_vm_new_ex(const tfvm_program *p, const tfvm_config *cfg, tfvm_vm **out, tfvm_error *err)
{
    if (out)
        *out = NULL;
    tfvm_status st = tfvm_vm_new(p, cfg, out);
    switch (st) {
    case TFVM_OK:
        return st;
    case TFVM_ERR_DEVICE: {
        char state[256];
        tfvm_device_status("cuda", state, sizeof state);
        return ut_err(err, st, "cuda: %s", state);
    }
    case TFVM_ERR_NOMEM:
        return ut_err(err, st, "out of memory making a VM");
    case TFVM_ERR_ARGUMENT:
        if (!p || !out)
            return ut_err(err, st, "tfvm_vm_new: NULL argument");
        if (cfg && cfg->sched)
            return ut_err(err, st, "no scheduling policy named '%s'", cfg->sched);
        return ut_err(err, st, "tfvm_vm_new: bad configuration");
    default:
        return ut_err(err, st, "cannot make a VM: %s", tfvm_status_name(st));
    }
}
