/* devices/cpu/blas.c — OpenBLAS loaded on first use (blas.h), and how its
 * threads share the cores with the VM's workers (docs/devices.md, "CPU
 * threads"). */
#include "devices/cpu/blas.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/cpu/cpu.h"

#define BLAS_LIB "libopenblas.so.0"

static dev_blas_fns fns;
static const dev_blas_fns *loaded; /* written once, under the pthread_once */
static char error[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_int workers = 1;     /* what the last VM asked for */
static atomic_int budget, current; /* OpenBLAS's own thread count at load; the one set */

#if defined(__SANITIZE_THREAD__)
#define CPU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CPU_TSAN 1
#endif
#endif

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

static void load(int flags)
{
    const char *path = getenv("TFVM_BLAS_LIB");
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
    int mine = fns.get_num_threads();
    atomic_store(&budget, mine < 1 ? 1 : mine);
    loaded = &fns;
}

static void load_now(void) { load(RTLD_NOW | RTLD_LOCAL); }

/* ---- Threads --------------------------------------------------------------------
 * The budget is the thread count OpenBLAS has when it is loaded (its default:
 * OPENBLAS_NUM_THREADS or one per core); each VM worker may run a gemm at the
 * same time, so each gets budget / workers threads, at least 1. Under
 * ThreadSanitizer OpenBLAS stays on the calling thread: its own pool
 * synchronises in code TSan cannot see, which it would report as races. */
static void apply_threads(const dev_blas_fns *b)
{
    int w = atomic_load(&workers);
#ifdef CPU_TSAN
    w = INT_MAX;
#endif
    int want = w > 1 ? atomic_load(&budget) / w : atomic_load(&budget);
    if (want < 1)
        want = 1;
    /* a load first: this runs before every gemm, and the exchange is a
     * locked instruction on a line every worker reads */
    if (atomic_load_explicit(&current, memory_order_relaxed) != want && atomic_exchange(&current, want) != want)
        b->set_num_threads(want);
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
            p->insts[i].op == ISA_FUSED_CONV2D) {
            dev_blas(); /* a failure is reported by the kernel that needs it */
            return;
        }
}

void dev_cpu_set_threads(int vm_workers)
{
    atomic_store(&workers, vm_workers < 1 ? 1 : vm_workers);
    const dev_blas_fns *b = dev_blas_if_loaded();
    if (b)
        apply_threads(b);
}
