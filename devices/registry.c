/* devices/registry.c — the process-wide device table: the CPU (always ready)
 * and CUDA (ready when libtfvm_cuda.so loads and finds a GPU), each set up
 * once on first request; and the CPU device's vtable. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "devices/cpu/blas.h"
#include "devices/cpu/cpu.h"
#include "devices/device.h"

static const char *const dev_names[DEV_COUNT] = {[DEV_CPU] = "cpu", [DEV_CUDA] = "cuda"};

const char *dev_name(dev_id id) { return (unsigned)id < DEV_COUNT ? dev_names[id] : "?"; }

int dev_by_name(const char *name)
{
    for (int i = 0; name && i < DEV_COUNT; i++)
        if (strcmp(name, dev_names[i]) == 0)
            return i;
    return -1;
}

_Static_assert((int)DEV_CPU == (int)TFVM_DEVICE_CPU && (int)DEV_CUDA == (int)TFVM_DEVICE_CUDA,
               "a device's id is its tfvm_device");

const char *tfvm_device_name(size_t i) { return i < DEV_COUNT ? dev_names[i] : NULL; }

int tfvm_device_by_name(const char *name)
{
    return name && strcmp(name, "auto") == 0 ? TFVM_DEVICE_AUTO : dev_by_name(name);
}

/* ---- The CPU device ----------------------------------------------------------- */
static tfvm_status cpu_run(const dev_device *d, const dev_ctx *x, isa_op op, uint32_t attr, const dev_value *in,
                           uint32_t n_in, dev_value *out, char *msg, size_t msg_size)
{
    (void)d;
    return isa_ops[op].cls == ISA_CLASS_TENSOR ? dev_cpu_tensor(op, attr, in, n_in, out, x->host, msg, msg_size)
                                                : dev_cpu_elementwise(op, attr, in, out, x->host, msg, msg_size);
}

const dev_iface dev_cpu_iface = {
    .name = "cpu",
    .fits = NULL, /* the CPU has every kernel */
    .run = cpu_run,
};

/* "OpenBLAS 0.3.21" (loading it: `tfvm devices` is where one asks). */
static void cpu_blas(char *buf, size_t size)
{
    const dev_blas_fns *b = dev_blas();
    const char *cfg = b ? b->get_config() : NULL;
    if (!cfg) {
        snprintf(buf, size, "no BLAS: %s", dev_blas_error());
        return;
    }
    /* "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the name and version */
    const char *sp = strchr(cfg, ' ');
    const char *end = sp ? strchr(sp + 1, ' ') : NULL;
    int len = end ? (int)(end - cfg) : (int)strlen(cfg);
    snprintf(buf, size, "%.*s", len > 60 ? 60 : len, cfg);
}

static dev_device devices[DEV_COUNT];
static pthread_once_t once[DEV_COUNT] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};

static void init_cpu(void)
{
    dev_device *d = &devices[DEV_CPU];
    ut_topo *topo = ut_topo_load();
    unsigned cores = ut_topo_cores(topo);
    ut_topo_free(topo);
    char blas[64];
    cpu_blas(blas, sizeof blas);
    d->iface = &dev_cpu_iface;
    d->id = DEV_CPU;
    d->ready = true;
    snprintf(d->state, sizeof d->state, "ready (%u core%s, %s)", cores, cores == 1 ? "" : "s", blas);
}

static void init_cuda(void) { dev_cuda_open(NULL, &devices[DEV_CUDA]); }

const dev_device *dev_get(dev_id id)
{
    static void (*const init[DEV_COUNT])(void) = {[DEV_CPU] = init_cpu, [DEV_CUDA] = init_cuda};
    if ((unsigned)id >= DEV_COUNT)
        return NULL;
    pthread_once(&once[id], init[id]);
    return &devices[id];
}

tfvm_status tfvm_device_status(const char *name, char *buf, size_t size)
{
    int id = dev_by_name(name);
    if (id < 0) {
        if (buf && size)
            snprintf(buf, size, "no device named '%s' (devices: cpu, cuda)", name ? name : "(null)");
        return TFVM_ERR_ARGUMENT;
    }
    const dev_device *d = dev_get((dev_id)id);
    if (buf && size)
        snprintf(buf, size, "%s", d->state);
    return d->ready ? TFVM_OK : TFVM_ERR_DEVICE;
}
