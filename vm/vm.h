/* vm/vm.h — the VM's internal model: the static plan derived from a program,
 * contexts (one per distinct tag: Monsoon's explicit token store), loop
 * instances, activations, and the resumable run used by tfvm_run and the
 * debugger. Nothing here knows about the compiler or the CLI. */
#ifndef TFVM_VM_H
#define TFVM_VM_H

#include <stdatomic.h>

#include "devices/value.h"
#include "isa/isa.h"
#include "scheduler/sched.h"

/* ---- Plan: what the VM derives once from a verified program --------------- */
typedef struct vm_iplan {
    uint32_t out_at[3];   /* edges of output o are edges[out_at[o] .. out_at[o+1]) */
    uint32_t slot;        /* multi-input: first value slot in its region's contexts */
    uint32_t match;       /* multi-input: its arrival counter in its region's contexts */
    uint32_t child;       /* CALL: child index of its site in the caller region;
                             ENTER: child index of its frame in the parent region */
    uint32_t k;           /* ENTER const: index among its frame's const ENTERs */
} vm_iplan;

typedef struct vm_rplan {
    uint32_t n_slots, n_match, n_children;
    size_t ctx_size;      /* bytes of one context of this region */
    uint32_t frame_child; /* LOOP: its child index in the parent region */
    uint32_t first, end;  /* its instructions: insts[first .. end) */
} vm_rplan;

typedef struct vm_fplan {   /* per LOOP region (frame) */
    uint32_t n_enter, n_const;
    uint32_t parallel;      /* in-flight iteration bound: the largest parallel=N its
                               ENTERs give; ISA_DEFAULT_PARALLEL when none gives one */
    uint32_t *exits, n_exits;
    uint32_t *const_enters; /* n_const ENTER const instructions, by k */
} vm_fplan;

typedef struct vm_splan {   /* per call site */
    uint32_t n_call;
    uint32_t *returns, n_returns;
} vm_splan;

typedef struct vm_plan {
    ut_arena arena;
    vm_iplan *insts;
    vm_rplan *regions;
    vm_fplan *frames;       /* indexed by region (only LOOP entries used) */
    vm_splan *sites;
} vm_plan;

tfvm_status vm_plan_build(const isa_program *p, const tfvm_allocator *a, vm_plan *out);
void vm_plan_free(vm_plan *plan);

/* ---- Contexts ---------------------------------------------------------------
 * A context is a tag. Its memory holds the matching state of every
 * instruction of its region (value slots, arrival counters) and the child
 * records (call contexts by site, loop instances by frame). */
typedef enum vm_ctx_kind { VM_CTX_ROOT, VM_CTX_CALL, VM_CTX_ITER } vm_ctx_kind;

typedef struct vm_loop vm_loop;
typedef struct vm_ctx vm_ctx;

struct vm_ctx {
    vm_ctx *parent;        /* the tag without its last element (NULL for root) */
    uint32_t region;
    uint8_t kind;          /* vm_ctx_kind */
    uint8_t entered;       /* CALL: VM_ENTERED_LIVE/DEAD once a CALL token arrived */
    uint32_t elem;         /* CALL: site index; ITER: frame (region) */
    uint64_t iter;         /* ITER: iteration index */
    uint32_t refs;         /* tokens/activations/partial matches/children/holds */
    uint32_t arrived;      /* CALL: CALL tokens received so far */
    uint32_t child;        /* CALL: its index in the parent's children */
    vm_loop *loop;         /* ITER: its loop instance */
    vm_ctx *next_iter;     /* ITER: the following iteration (holds a reference) */
    vm_ctx *prev_live, *next_live; /* every live context, for teardown and `contexts` */
    dev_value *slots;
    void **children;
    uint32_t *counts;
};

struct vm_loop {
    vm_ctx *parent;        /* holds one reference on it */
    uint32_t frame;
    uint32_t arrived;      /* ENTER tokens received so far (const and not) */
    uint8_t entered;       /* VM_ENTERED_LIVE/DEAD once an ENTER token arrived */
    uint8_t holding;       /* holds iteration 0 until every ENTER has arrived */
    uint64_t next;         /* iterations created so far */
    vm_ctx *first, *last;  /* oldest and newest live iteration */
    dev_value *consts;     /* per const ENTER: its value once arrived */
    /* NEXTITER firings waiting for iteration `next` (parallel bound) */
    struct vm_deferred { uint32_t inst; dev_value v; } *deferred;
    uint32_t n_deferred, cap_deferred;
    vm_loop *prev_live, *next_live;
};

enum { VM_ENTERED_NONE, VM_ENTERED_LIVE, VM_ENTERED_DEAD };

/* An activation: instruction `inst` is ready to fire in `ctx`. Single-input
 * instructions carry their token's value; multi-input ones read their slots,
 * except MERGE, which carries the chosen value and its input index in aux. */
typedef struct vm_act {
    vm_ctx *ctx;
    uint32_t inst;
    uint32_t aux;
    dev_value v;
} vm_act;

/* ---- The VM ---------------------------------------------------------------- */
typedef enum vm_state { VM_IDLE, VM_RUNNING, VM_PAUSED, VM_DONE, VM_FAILED } vm_state;

/* Debugger hook: called before each firing; returning true pauses the run
 * (vm_step returns VM_PAUSED) before the activation fires. */
typedef bool (*vm_hook_fn)(void *ud, struct tfvm_vm *vm, const vm_act *act);

struct tfvm_vm {
    const isa_program *prog;
    tfvm_config cfg;
    tfvm_allocator alloc;
    vm_plan plan;
    const sched_policy *policy;
    sched queue;
    tfvm_error err;
    vm_state state;
    atomic_int interrupted;     /* set by tfvm_interrupt, from any thread or a signal
                                   handler: an atomic, so that is not a data race */

    /* the current run */
    uint32_t entry;
    vm_ctx *root;
    vm_ctx live;                /* sentinel of the live-context list */
    vm_loop live_loops;         /* sentinel of the live-loop list */
    dev_value *consts;          /* per program constant, made once per VM */
    const tfvm_value *args;     /* the run's arguments (borrowed during vm_begin) */
    dev_value *results;         /* per result of the entry; dtype 0 = not arrived */
    uint64_t n_live;
    void **free_ctx;            /* per region: free list of contexts */
    tfvm_stats stats;
    double t_start;

    vm_hook_fn hook;
    void *hook_ud;
    vm_act paused;              /* the activation a hook paused before */
    bool has_paused;
};

/* Resumable runs (tfvm_run = begin, step until done, end). */
tfvm_status vm_begin(tfvm_vm *vm, uint32_t entry, const tfvm_value *args, size_t n_args);
/* Fires up to `max` activations (0 = no limit). Returns the new state. */
vm_state vm_step(tfvm_vm *vm, uint64_t max);
/* Collects results (on success) and frees everything of the run. */
tfvm_status vm_end(tfvm_vm *vm, tfvm_value *results, size_t n_results);

/* Records the first runtime error of the run (later ones are ignored). */
void vm_fail(tfvm_vm *vm, tfvm_status code, const vm_ctx *ctx, uint32_t inst, const char *fmt, ...)
    UT_PRINTF(5, 6);
/* Prints a tag: "[]", "[fib@1, sum_loop#3]". */
void vm_format_tag(const tfvm_vm *vm, const vm_ctx *ctx, ut_buf *out);
const char *vm_tag_str(const tfvm_vm *vm, const vm_ctx *ctx, char *buf, size_t size);
/* Prints a value as `tfvm run` does (tensors NumPy-like). */
void vm_format_value(const dev_value *v, ut_buf *out);

/* ---- Internals shared by the vm/ files -------------------------------------- */
vm_ctx *vm_ctx_new(tfvm_vm *vm, vm_ctx *parent, uint32_t region, vm_ctx_kind kind, uint32_t elem);
void vm_ctx_unref(tfvm_vm *vm, vm_ctx *c);
/* Delivers a token to every destination of output `out` of `inst`, in ctx. */
void vm_send(tfvm_vm *vm, vm_ctx *ctx, uint32_t inst, uint32_t out, const dev_value *v);
bool vm_push(tfvm_vm *vm, vm_ctx *ctx, uint32_t inst, uint32_t aux, const dev_value *v);
/* Control instructions (vm/control.c). The activation's reference on its
 * context is released by the caller after these return. */
void vm_fire_control(tfvm_vm *vm, const vm_act *act, dev_value *in);
vm_loop *vm_loop_get(tfvm_vm *vm, vm_ctx *parent, uint32_t frame, uint32_t child);
/* Frees a context whose last reference went; returns the context that lost
 * a reference because of it (to be unreferenced next), or NULL. */
vm_ctx *vm_ctx_release(tfvm_vm *vm, vm_ctx *c);
vm_ctx *vm_iter_release(tfvm_vm *vm, vm_ctx *c);
void vm_loop_destroy(tfvm_vm *vm, vm_loop *l);

#endif
