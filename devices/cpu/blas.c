/* devices/cpu/blas.c — OpenBLAS loaded on first use (blas.h), without its thread pool, on the
 * calling thread only (docs/devices.md, "CPU threads"). */
#include "devices/cpu/blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/cpu/cpu.h"

#define BLAS_LIB "libopenblas.so.0"

static dev_blas_fns fns;
static const dev_blas_fns *loaded; /* written once, under the pthread_once */
static char error[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static bool sym(void *lib, const char *name, void *slot)
{
    void *p = dlsym(lib, name);
    if (!p) {
        snprintf(error, sizeof error, "%s: no symbol %s", BLAS_LIB, name);
        return false;
    }
    memcpy(slot, &p, sizeof p); /* object to function pointer, as POSIX allows */
    return true;
}

/* OpenBLAS starts its thread pool when it loads, and each of those threads
 * spins (sched_yield) for about 2^28 cycles before it sleeps: on a 2-core
 * machine one took a core from the VM's second worker for the first ~0.1 s
 * of every process that loads it, longer than a whole benchmark of a small
 * model. tfvm gives OpenBLAS one thread, so the pool never gets work: when
 * the library was not in the process before (nobody else can be using it),
 * its pool is shut down at once (blas_thread_shutdown_, what OpenBLAS does
 * before a fork; a later threaded call by someone else starts it again). */
static void stop_pool(void *lib, bool was_loaded)
{
    void (*shutdown)(void);
    void *p = dlsym(lib, "blas_thread_shutdown_");
    if (was_loaded || !p)
        return;
    memcpy(&shutdown, &p, sizeof p);
    fns.set_num_threads(1);
    shutdown();
}

static void load(int flags)
{
    const char *path = getenv("TFVM_BLAS_LIB");
    void *before = dlopen(path && *path ? path : BLAS_LIB, RTLD_NOW | RTLD_NOLOAD);
    if (before)
        dlclose(before);
    void *lib = dlopen(path && *path ? path : BLAS_LIB, flags);
    if (!lib) {
        if (!(flags & RTLD_NOLOAD)) {
            const char *why = dlerror();
            snprintf(error, sizeof error, "cannot load %s: %s", path && *path ? path : BLAS_LIB,
                     why ? why : "unknown error");
        }
        return;
    }
    if (!sym(lib, "cblas_sgemm", &fns.sgemm) || !sym(lib, "cblas_dgemm", &fns.dgemm) ||
        !sym(lib, "cblas_sgemv", &fns.sgemv) || !sym(lib, "cblas_dgemv", &fns.dgemv) ||
        !sym(lib, "openblas_set_num_threads", &fns.set_num_threads) ||
        !sym(lib, "openblas_get_num_threads", &fns.get_num_threads) ||
        !sym(lib, "openblas_get_config", &fns.get_config))
        return; /* the handle stays open: a library once loaded is not unloaded */
    stop_pool(lib, before != NULL);
    loaded = &fns;
}

static void load_now(void) { load(RTLD_NOW | RTLD_LOCAL); }

/* ---- Threads --------------------------------------------------------------------
 * OpenBLAS runs on the thread that calls it, with no threads of its own: a
 * VM's threads are its workers (tfvm_config.threads, --threads) and no
 * more, and a product big enough to share is split over them
 * (dev_kmm_run). OpenBLAS 0.3.21's thread count is one number for the
 * process (no per-thread or per-call setting): it is set to 1 when tfvm
 * loads it, and again before a gemm whenever something else in the
 * process changed it. Reading it is a load of one global in OpenBLAS. */
static void apply_threads(const dev_blas_fns *b)
{
    if (b->get_num_threads() != 1)
        b->set_num_threads(1);
}

const dev_blas_fns *dev_blas(void)
{
    pthread_once(&once, load_now);
    if (loaded)
        apply_threads(loaded);
    return loaded;
}

const dev_blas_fns *dev_blas_if_loaded(void)
{
    void *lib = dlopen(BLAS_LIB, RTLD_NOW | RTLD_NOLOAD);
    if (!lib)
        return NULL;
    dlclose(lib);
    return dev_blas();
}

const char *dev_blas_error(void) { return error[0] ? error : "not loaded"; }

void dev_cpu_prepare(const isa_program *p)
{
    for (uint32_t i = 0; i < p->n_insts; i++)
        if (p->insts[i].op == ISA_MATMUL || p->insts[i].op == ISA_CONV2D || p->insts[i].op == ISA_FUSED_MATMUL ||
            p->insts[i].op == ISA_FUSED_CONV2D || p->insts[i].op == ISA_FUSED_CONV2D_ADD) {
            dev_blas(); /* a failure is reported by the kernel that needs it */
            return;
        }
}

void dev_cpu_set_threads(int vm_workers)
{
    (void)vm_workers; /* OpenBLAS gets one thread, the caller's, with any number of workers */
    const dev_blas_fns *b = dev_blas_if_loaded();
    if (b)
        apply_threads(b);
}
