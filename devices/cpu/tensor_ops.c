/* devices/cpu/tensor_ops.c — placeholder until the tensor kernels land (issue 5). */
#include "devices/cpu/cpu.h"

#include <stdio.h>

tfvm_status dev_cpu_tensor(isa_op op, uint32_t attr, const dev_value *in, uint32_t n_in, dev_value *out,
                           const tfvm_allocator *alloc, char *msg, size_t msg_size)
{
    (void)attr, (void)in, (void)n_in, (void)out, (void)alloc;
    snprintf(msg, msg_size, "%s is not implemented on the CPU yet", isa_ops[op].name);
    return TFVM_ERR_UNSUPPORTED;
}
