/* vm/api.c — the public VM functions of tfvm.h: configuration, VM lifetime,
 * runs, errors and counters. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>
#include <string.h>

#include "util/half.h"
#include "devices/cpu/cpu.h"
#include "devices/place.h"
#include "vm.h"

#define FREE_PAD 8 /* pointers: 64 bytes */

void tfvm_config_init(tfvm_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->threads = 0;
    cfg->deterministic = false;
}

/* Constants of at least this many bytes are borrowed from the program, not
 * copied: a model's weights had been held twice for every VM (ViT-B/16:
 * 344 MB more) */
#define VM_BORROW_BYTES 4096

/* Builds every program constant as a value: small ones copied, large ones
 * borrowed (dev_tensor_borrow; the program outlives the VM). */
static tfvm_status make_consts(tfvm_vm *vm)
{
    const isa_program *p = vm->prog;
    vm->consts = ut_calloc(&vm->alloc, p->n_consts + 1, sizeof(dev_value));
    if (!vm->consts)
        return TFVM_ERR_NOMEM;
    for (uint32_t i = 0; i < p->n_consts; i++) {
        const isa_const *k = &p->consts[i];
        dev_value *v = &vm->consts[i];
        if (k->rank == 0) {
            const unsigned char *b = k->data;
            v->dtype = k->dtype;
            switch ((tfvm_dtype)k->dtype) {
            case TFVM_BOOL: v->u.b = b[0] != 0; break;
            case TFVM_I32: v->u.i32 = (int32_t)ut_le32(b); break;
            case TFVM_I64: v->u.i64 = (int64_t)ut_le64(b); break;
            case TFVM_F32: { uint32_t w = ut_le32(b); memcpy(&v->u.f32, &w, 4); break; }
            case TFVM_F64: { uint64_t w = ut_le64(b); memcpy(&v->u.f64, &w, 8); break; }
            case TFVM_U8: v->u.u8 = b[0]; break;
            case TFVM_I8: v->u.i8 = (int8_t)b[0]; break;
            case TFVM_I16: case TFVM_U16: case TFVM_F16: case TFVM_BF16: v->u.u16 = ut_le16(b); break;
            case TFVM_U32: v->u.u32 = ut_le32(b); break;
            case TFVM_U64: v->u.u64 = ut_le64(b); break;
            }
            continue;
        }
        /* (hosts are little-endian, checked at build: the bytes are the elements) */
        tfvm_tensor *t = k->nbytes >= VM_BORROW_BYTES
                             ? dev_tensor_borrow(&vm->alloc, (tfvm_dtype)k->dtype, k->rank, k->dims, k->data)
                             : NULL;
        if (!t && (t = dev_tensor_alloc(&vm->alloc, (tfvm_dtype)k->dtype, k->rank, k->dims)) && k->nbytes)
            memcpy(t->data, k->data, k->nbytes);
        if (!t)
            return TFVM_ERR_NOMEM;
        v->dtype = k->dtype;
        v->is_tensor = 1;
        v->u.t = t;
    }
    return TFVM_OK;
}

/* A quarter of the memory available when the VM is made, in contexts (or
 * sequential frames) of its largest region, and at least ten million: far
 * more than a bounded recursion uses (even(10^7) fits), while an endless
 * one stops with "recursion too deep" long before the machine runs out;
 * under an address-space limit (ulimit -v), at most a quarter of what it
 * leaves, so that the bound comes before the limit. */
/* The address space the process may still take under its limit (ulimit -v),
 * or UINT64_MAX when there is none. */
static uint64_t address_space_left(long page)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return UINT64_MAX;
    unsigned long long size = 0; /* the process's size now, in pages (Linux) */
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%llu", &size) != 1)
            size = 0;
        fclose(f);
    }
    uint64_t used = (uint64_t)size * (uint64_t)(page > 0 ? page : 4096);
    return (uint64_t)rl.rlim_cur > used ? (uint64_t)rl.rlim_cur - used : 0;
}

static uint64_t default_bound(const tfvm_vm *vm)
{
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t mem = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : (uint64_t)4 << 30;
    uint64_t left = address_space_left(page);
    size_t biggest = 64;
    for (uint32_t r = 0; vm->plan.regions && r < vm->prog->n_regions; r++) {
        const vm_rplan *rp = &vm->plan.regions[r];
        size_t frame = 96 + (size_t)rp->n_regs * (sizeof(dev_value) + 1);
        size_t size = (rp->ctx_size > frame ? rp->ctx_size : frame) + 32; /* and the allocator's */
        if (size > biggest)
            biggest = size;
    }
    uint64_t n = mem / 4 / biggest;
    if (n < 10000000)
        n = 10000000;
    /* under a memory limit the bound comes first: a quarter of what is left
     * for the contexts, as the frames' stacks and the matching take more */
    return left / 4 / biggest < n ? left / 4 / biggest : n;
}

tfvm_status tfvm_vm_new(const tfvm_program *prog, const tfvm_config *cfg, tfvm_vm **out)
{
    if (!out)
        return TFVM_ERR_ARGUMENT;
    *out = NULL;
    if (!prog)
        return TFVM_ERR_ARGUMENT;
    tfvm_config defaults;
    if (!cfg) {
        tfvm_config_init(&defaults);
        cfg = &defaults;
    }
    tfvm_vm *vm = ut_alloc(&cfg->allocator, sizeof *vm);
    if (!vm)
        return TFVM_ERR_NOMEM;
    memset(vm, 0, sizeof *vm);
    vm->prog = &prog->isa;
    vm->cfg = *cfg;
    vm->alloc = cfg->allocator;
    pthread_mutex_init(&vm->err_lock, NULL);
    /* The policy: by name, or deterministic for one worker and work
     * stealing for more. Workers: the shared pool's threads, or one per
     * physical core, unless told otherwise. */
    const sched_policy *pol = NULL;
    if (cfg->sched && !(pol = sched_policy_find(cfg->sched))) {
        ut_free(&cfg->allocator, vm, sizeof *vm);
        return TFVM_ERR_ARGUMENT;
    }
    uint32_t n = 1;
    if (!cfg->deterministic && (!pol || pol->multi)) {
        if (cfg->threads > 0)
            n = (uint32_t)cfg->threads;
        else if (cfg->pool)
            n = sched_pool_threads(cfg->pool->pool);
        else {
            vm->topo = ut_topo_load();
            n = ut_topo_cores(vm->topo);
        }
        if (cfg->pool && n > sched_pool_threads(cfg->pool->pool))
            n = sched_pool_threads(cfg->pool->pool);
        if (n > 1 && !vm->topo && !cfg->pool)
            vm->topo = ut_topo_load();
    }
    if (n > 1024)
        n = 1024;
    if (!pol)
        pol = sched_policy_find(n > 1 ? "workstealing" : "deterministic");
    vm->n_workers = n;
    vm->policy = pol;
    vm->multi = pol->multi;
    if (cfg->pool)
        vm->pool = cfg->pool->pool;
    dev_cpu_set_threads((int)n); /* OpenBLAS threads share the cores with the workers */
    dev_cpu_prepare(vm->prog);
    tfvm_status st = vm_plan_build(vm->prog, &vm->alloc, true, &vm->plan);
    if (st == TFVM_OK) {
        /* the allocator's alignment may be less than a worker's (a cache line) */
        vm->w_mem = ut_calloc(&vm->alloc, n + 1, sizeof *vm->w);
        if (vm->w_mem)
            vm->w = ut_align_up(vm->w_mem, _Alignof(vm_worker));
        vm->sw = ut_calloc(&vm->alloc, n, sizeof *vm->sw);
        if (!vm->w || !vm->sw)
            st = TFVM_ERR_NOMEM;
        else
            st = sched_run_init(&vm->run, vm->sw, n, &vm->alloc);
    }
    for (uint32_t i = 0; st == TFVM_OK && i < n; i++) {
        vm_worker *w = &vm->w[i];
        w->vm = vm;
        w->id = i;
        /* the live total: looked at on every creation, or sampled with several
         * workers and no max_contexts (vm_ctx_note_new) */
        w->count_every = vm->multi && !cfg->max_contexts ? VM_PEAK_SAMPLE : 1;
        w->count_left = w->count_every;
        w->sw.id = i;
        vm->sw[i] = &w->sw;
        /* Written on every context made or freed: a cache line of padding on
         * each side, or two workers' lists share a line and every context
         * costs both of them a miss. */
        w->free_ctx = ut_calloc(&vm->alloc, vm->prog->n_regions + 2 * FREE_PAD, sizeof(void *));
        if (w->free_ctx)
            w->free_ctx += FREE_PAD;
        if (!w->free_ctx || (vm->multi && !dq_init(&w->sw.dq, &vm->alloc)))
            st = TFVM_ERR_NOMEM;
    }
    if (st == TFVM_OK)
        st = make_consts(vm);
    vm->ctx_bound = cfg->max_contexts ? cfg->max_contexts : default_bound(vm);
    if (st == TFVM_OK)
        st = dev_vm_new(vm->prog, cfg, &vm->alloc, &vm->dev);
    if (st == TFVM_OK)
        st = vm_io_new(vm);
    if (st != TFVM_OK) {
        tfvm_vm_free(vm);
        return st;
    }
    *out = vm;
    return TFVM_OK;
}

static void worker_free(tfvm_vm *vm, vm_worker *w)
{
    vm_seq_free(w);
    vm_ctx *c = w->blocks;
    while (c) {
        vm_ctx *next = c->next_block;
        ut_free(&vm->alloc, c, vm->plan.regions[c->region].ctx_size);
        c = next;
    }
    vm_loop *l = w->loops;
    while (l) {
        vm_loop *next = l->next_block;
        pthread_mutex_destroy(&l->lock);
        ut_free(&vm->alloc, l, sizeof *l);
        l = next;
    }
    if (vm->multi && atomic_load_explicit(&w->sw.dq.array, memory_order_relaxed))
        dq_fini(&w->sw.dq);
    ut_free(&vm->alloc, w->sw.stack, w->sw.cap_stack * sizeof *w->sw.stack);
    if (w->free_ctx)
        ut_free(&vm->alloc, w->free_ctx - FREE_PAD, (vm->prog->n_regions + 2 * FREE_PAD) * sizeof(void *));
}

void tfvm_vm_free(tfvm_vm *vm)
{
    if (!vm)
        return;
    vm_session_free(vm);
    /* A run that was begun and not ended, whatever its state (a run that
     * failed while being stepped is VM_FAILED with its contexts still live). */
    int state = atomic_load(&vm->state);
    if (vm->w && (vm->root || vm->results || state == VM_RUNNING || state == VM_PAUSED || state == VM_DONE))
        vm_end(vm, NULL, 0);
    vm_profile(vm, false);
    vm_trace(vm, 0);
    for (uint32_t i = 0; vm->w && i < vm->n_workers; i++)
        worker_free(vm, &vm->w[i]);
    ut_free(&vm->alloc, vm->w_mem, (vm->n_workers + 1) * sizeof *vm->w);
    if (vm->sw) {
        sched_run_fini(&vm->run);
        ut_free(&vm->alloc, vm->sw, vm->n_workers * sizeof *vm->sw);
    }
    if (vm->own_pool)
        sched_pool_free(vm->pool);
    if (vm->consts) {
        for (uint32_t i = 0; i < vm->prog->n_consts; i++)
            dev_value_release(&vm->consts[i]);
        ut_free(&vm->alloc, vm->consts, (vm->prog->n_consts + 1) * sizeof(dev_value));
    }
    vm_io_free(vm);
    dev_vm_free(vm->dev); /* after every tensor of the VM went back to its pool */
    vm_plan_free(&vm->plan);
    ut_topo_free(vm->topo);
    pthread_mutex_destroy(&vm->err_lock);
    tfvm_allocator a = vm->alloc;
    ut_free(&a, vm, sizeof *vm);
}

tfvm_status vm_run_prepare(tfvm_vm *vm, const char *entry, size_t n_args, const tfvm_value *args,
                           uint32_t *entry_index)
{
    int state = atomic_load(&vm->state);
    if (state == VM_RUNNING || state == VM_PAUSED || vm_session_busy(vm))
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "a run is already in progress on this VM");
    const isa_program *p = vm->prog;
    uint32_t e = 0;
    if (entry) {
        while (e < p->n_entries && strcmp(p->entries[e].name, entry) != 0)
            e++;
        if (e == p->n_entries)
            return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "no entry point named '%s'", entry);
    } else if (p->n_entries == 0) {
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "the program has no entry point");
    }
    if (n_args && !args)
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "args is NULL");
    *entry_index = e;
    return TFVM_OK;
}

tfvm_status tfvm_run(tfvm_vm *vm, const char *entry, const tfvm_value *args, size_t n_args,
                     tfvm_value *results, size_t n_results)
{
    if (!vm)
        return TFVM_ERR_ARGUMENT;
    const isa_program *p = vm->prog;
    uint32_t e = 0;
    tfvm_status pst = vm_run_prepare(vm, entry, n_args, args, &e);
    if (pst != TFVM_OK)
        return pst;
    if (n_results && !results)
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "results is NULL");
    if (n_results != p->entries[e].n_results)
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "entry '%s' has %u result%s, caller asked for %zu",
                      p->entries[e].name, p->entries[e].n_results, p->entries[e].n_results == 1 ? "" : "s",
                      n_results);
    tfvm_status st = vm_begin(vm, e, args, n_args);
    if (st != TFVM_OK) {
        if (vm->root || vm->results)
            vm_end(vm, NULL, 0);
        atomic_store(&vm->state, VM_IDLE);
        return st;
    }
    vm_step(vm, 0);
    return vm_end(vm, results, n_results);
}

tfvm_pool *tfvm_pool_new(int threads)
{
    tfvm_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (threads <= 0 || threads > 1) {
        p->topo = ut_topo_load();
        if (threads <= 0)
            threads = (int)ut_topo_cores(p->topo);
    }
    if (threads > 1024)
        threads = 1024;
    if (!(p->pool = sched_pool_new((unsigned)threads))) {
        ut_topo_free(p->topo);
        free(p);
        return NULL;
    }
    return p;
}

void tfvm_pool_free(tfvm_pool *p)
{
    if (!p)
        return;
    sched_pool_free(p->pool);
    ut_topo_free(p->topo);
    free(p);
}

const char *tfvm_sched_name(size_t i, const char **summary)
{
    const sched_policy *p = sched_policy_at(i);
    if (summary)
        *summary = p ? p->summary : NULL;
    return p ? p->name : NULL;
}

void tfvm_interrupt(tfvm_vm *vm)
{
    if (vm)
        atomic_store(&vm->interrupted, 1); /* lock-free: async-signal-safe */
}

const char *tfvm_errmsg(const tfvm_vm *vm)
{
    if (!vm)
        return "no VM";
    return vm->err.code == TFVM_OK ? "no error" : vm->err.message;
}

const tfvm_error *tfvm_last_error(const tfvm_vm *vm) { return vm ? &vm->err : NULL; }

void tfvm_vm_stats(const tfvm_vm *vm, tfvm_stats *out)
{
    if (!out)
        return;
    if (!vm) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = vm->stats;
}

tfvm_value tfvm_f16(double v)
{
    tfvm_value x = {TFVM_F16, NULL, {0}};
    x.as.u16 = ut_f64_to_f16(v);
    return x;
}

tfvm_value tfvm_bf16(double v)
{
    tfvm_value x = {TFVM_BF16, NULL, {0}};
    x.as.u16 = ut_f64_to_bf16(v);
    return x;
}

double tfvm_half_value(tfvm_value v)
{
    if (v.tensor || (v.dtype != TFVM_F16 && v.dtype != TFVM_BF16))
        return NAN;
    return v.dtype == TFVM_F16 ? ut_f16_to_f32(v.as.u16) : ut_bf16_to_f32(v.as.u16);
}
