/* devices/device.h — the device interface (a vtable per device, as in ggml's
 * backends) and the process-wide registry: "cpu" always, "cuda" when its
 * backend library loads and a GPU exists. docs/devices.md tells the rules. */
#ifndef TFVM_DEVICE_H
#define TFVM_DEVICE_H

#include "devices/value.h"
#include "isa/isa.h"

/* Device ids; tfvm_tensor.device holds one (0 = host memory). */
typedef enum dev_id {
    DEV_CPU = 0,
    DEV_CUDA = 1,
    DEV_COUNT
} dev_id;

struct dev_pool;
typedef struct dev_device dev_device;

/* What a kernel call may allocate from: tensor headers (and every byte of a
 * host tensor) through `host`, device data from `pool` (NULL for the CPU). */
typedef struct dev_ctx {
    const tfvm_allocator *host;
    struct dev_pool *pool;
} dev_ctx;

/* Whether a device takes an instruction with these inputs. */
typedef enum dev_fit {
    DEV_FIT_OK,      /* it has the kernel                                         */
    DEV_FIT_NO,      /* no kernel for this op or dtype: another device must run it */
    DEV_FIT_INVALID  /* the inputs are wrong (dtype/shape mismatch): the CPU runs it
                        and reports the error in its words                         */
} dev_fit;

/* The vtable. Slots a device does not need are NULL (the CPU has no device
 * memory: alloc/free/copies/sync NULL). Every slot may be called from several
 * VM workers at once. Messages are one line, without instruction or tag. */
typedef struct dev_iface {
    const char *name; /* "cpu", "cuda" */
    /* NULL = every op (the CPU). Inputs are live; tensors may be on any device
     * (only dtypes and shapes are looked at). */
    dev_fit (*fits)(const dev_device *d, isa_op op, uint32_t attr, const dev_value *in, uint32_t n_in);
    /* The inputs of op the device's kernel reads on the host (bit k: input
     * k), such as parameter vectors: the VM leaves them there. NULL = none. */
    uint32_t (*host_inputs)(const dev_device *d, isa_op op);
    /* The kernel table by opcode, behind one entry point: the contract of
     * dev_cpu_elementwise / dev_cpu_tensor (devices/cpu/cpu.h), except that
     * tensor inputs are on this device but those of host_inputs, which are
     * on the host (the VM copies, never the kernels, but to find the CPU's
     * words for bad data) and
     * tensor results are made on it. A result of rank 0 is a host scalar. */
    tfvm_status (*run)(const dev_device *d, const dev_ctx *x, isa_op op, uint32_t attr, const dev_value *in,
                       uint32_t n_in, dev_value *out, char *msg, size_t msg_size);
    /* Raw device memory; alloc returns NULL on failure and says why in msg. */
    void *(*alloc)(const dev_device *d, size_t n, char *msg, size_t msg_size);
    void (*free)(const dev_device *d, void *p, size_t n);
    /* host -> device and device -> host; copy_out returns once the bytes are
     * on the host (it waits for the kernels that write them). */
    tfvm_status (*copy_in)(const dev_device *d, void *dst, const void *src, size_t n, char *msg, size_t msg_size);
    tfvm_status (*copy_out)(const dev_device *d, void *dst, const void *src, size_t n, char *msg,
                            size_t msg_size);
    /* Waits for everything queued on the device. */
    tfvm_status (*sync)(const dev_device *d, char *msg, size_t msg_size);
} dev_iface;

struct dev_device {
    const dev_iface *iface;
    void *ctx;          /* the device's own state */
    dev_id id;
    bool ready;
    char state[200];    /* "ready (2 cores, OpenBLAS 0.3.21)" or "unavailable: no device found" */
};

/* ---- Registry (devices/registry.c) --------------------------------------------
 * Devices are process-wide: each is initialised the first time it is asked
 * for (thread-safe) and stays until the process ends. Asking for "cuda" is
 * what loads the CUDA backend library; nothing else does. */
const dev_device *dev_get(dev_id id);
/* Id of a device name ("cpu", "cuda"); -1 if none. */
int dev_by_name(const char *name);
const char *dev_name(dev_id id);

/* ---- The CUDA backend (devices/cuda/cuda.c) ---------------------------------- */
/* Where libtfvm_cuda.so is looked for, in order: $TFVM_CUDA_LIB (only that,
 * when set); next to the object holding libtfvm (libtfvm.so, or the program
 * it is linked into) and in ../lib from there; next to /proc/self/exe and in
 * ../lib from there; then the dynamic linker's own search. Loads the first
 * that exists (path NULL) or `path`, and initialises the GPU; d->ready says
 * whether it worked and d->state why not ("unavailable: no device found"). */
void dev_cuda_open(const char *path, dev_device *d);
/* The most bytes of im2col columns a convolution makes at once (256 MiB; a
 * convolution over more images goes in chunks of images). Tests lower it. */
extern int64_t dev_cuda_col_bytes;

/* ---- The CPU device (devices/registry.c) ---------------------------------- */
extern const dev_iface dev_cpu_iface;

#endif
