/* devices/place.h — a VM's devices: which device runs each compute firing,
 * the copies a consumer on another device needs, the VM's memory pools
 * (vm/run.c calls dev_vm_fire and dev_vm_result; docs/devices.md). */
#ifndef TFVM_PLACE_H
#define TFVM_PLACE_H

#include "devices/cpu/cpu.h"
#include "devices/device.h"
#include "devices/pool.h"

/* AUTO placement sends elementwise work to the GPU from this many elements of
 * its largest operand on (MATMUL always, inputs already there always). */
#define DEV_AUTO_MIN_ELEMENTS 65536

typedef struct dev_vm {
    bool multi;                 /* another device may run something: place each firing */
    tfvm_device mode;           /* tfvm_config.device */
    const dev_device *cuda;     /* ready, or NULL */
    const char *cuda_state;     /* the registry's "unavailable: ..." when not ready */
    tfvm_allocator under;       /* the VM's allocator */
    dev_pool *pool[DEV_COUNT];  /* pool[DEV_CPU]: host memory of every tensor a kernel makes */
    tfvm_allocator host;        /* pool[DEV_CPU] as an allocation hook */
    dev_ctx ctx[DEV_COUNT];
    atomic_uint_fast64_t copies[DEV_COUNT], copy_bytes[DEV_COUNT]; /* copies made to each device */
} dev_vm;

/* Sets up the devices of a VM for program p: TFVM_ERR_DEVICE when cfg->device
 * is TFVM_DEVICE_CUDA and no GPU is ready (tfvm_device_status says why),
 * TFVM_ERR_ARGUMENT for an unknown cfg->device, TFVM_ERR_NOMEM. */
tfvm_status dev_vm_new(const isa_program *p, const tfvm_config *cfg, const tfvm_allocator *a, dev_vm **out);
/* Closes the pools (blocks of tensors still held elsewhere come back later). */
void dev_vm_free(dev_vm *d);

tfvm_status dev_vm_fire_placed(dev_vm *d, const isa_inst *in, const dev_value *inputs, dev_value *out, char *msg,
                               size_t msg_size);

/* Runs a compute instruction (classes BINARY..TENSOR) on the device that the
 * placement rules pick, copying tensor inputs that live elsewhere; the
 * contract of dev_cpu_elementwise otherwise. Runs with only the CPU in play go
 * straight to the CPU kernels. */
static inline tfvm_status dev_vm_fire(dev_vm *d, const isa_inst *in, const dev_value *inputs, dev_value *out,
                                      char *msg, size_t msg_size)
{
    if (!d->multi)
        return isa_ops[in->op].cls == ISA_CLASS_TENSOR
                   ? dev_cpu_tensor((isa_op)in->op, in->a, inputs, in->n_in, out, &d->host, msg, msg_size)
                   : dev_cpu_elementwise((isa_op)in->op, in->a, inputs, out, &d->host, msg, msg_size);
    return dev_vm_fire_placed(d, in, inputs, out, msg, msg_size);
}

/* A value about to become a run's result: a device tensor is replaced by a
 * host copy, and the tensor is marked as the caller's (who may write it, so
 * no cached copy of it is trusted again). On failure *v is unchanged. */
tfvm_status dev_vm_result(dev_vm *d, dev_value *v, char *msg, size_t msg_size);

/* A host (to == DEV_CPU) or device copy of t, holding one reference: t's
 * cached mirror when it has one there, else a new copy that becomes the
 * mirror. */
tfvm_status dev_vm_copy(dev_vm *d, tfvm_tensor *t, dev_id to, tfvm_tensor **out, char *msg, size_t msg_size);

typedef struct dev_vm_stats {
    dev_pool_stats pool[DEV_COUNT];      /* zero for a device not in use */
    uint64_t copies[DEV_COUNT];          /* copies made to each device */
    uint64_t copy_bytes[DEV_COUNT];
} dev_vm_stats;
void dev_vm_get_stats(dev_vm *d, dev_vm_stats *s);
/* One line for --stats: "devices: host pool 10 hits, 2 misses, 0.1 MB cached; ..." */
void dev_vm_stats_line(dev_vm *d, char *buf, size_t size);

#endif
