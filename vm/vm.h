/* vm/vm.h — the VM's internal model: the static plan derived from a program,
 * contexts (one per distinct tag: Monsoon's explicit token store), loop
 * instances, activations, workers, and the resumable run used by tfvm_run
 * and the debugger. Nothing here knows about the compiler or the CLI. */
#ifndef TFVM_VM_H
#define TFVM_VM_H

#include <pthread.h>
#include <stdatomic.h>

#include "devices/value.h"
#include "isa/isa.h"
#include "rules.h"
#include "scheduler/deque.h"
#include "scheduler/sched.h"

/* ---- Plan: what the VM derives once from a verified program --------------- */
typedef struct vm_iplan {
    uint32_t out_at[3];   /* edges of output o are edges[out_at[o] .. out_at[o+1]) */
    uint32_t slot;        /* matched: first value slot in its region's contexts */
    uint32_t match;       /* matched: first matching word in its region's contexts:
                             ceil(ports/64) claim words, then one status word */
    uint32_t child;       /* CALL: child index of its site in the caller region;
                             ENTER: child index of its frame in the parent region */
    uint32_t k;           /* ENTER const: index among its frame's const ENTERs;
                             RETURN: its site; constant operand: its constant */
    uint32_t ports;       /* data + control inputs (value slots when matched) */
    uint32_t need;        /* tokens that make a match: ports less a constant operand */
    int8_t imm;           /* the data input that holds constant b, or -1 */
    uint8_t cls;          /* isa_ops[op].cls: the firing path reads only the plan */
    uint16_t op;
    uint8_t matched;      /* goes through matching (several tokens, or MERGE) */
    uint16_t arg;         /* CALL: its index among its site's CALLs */
    uint32_t preg;        /* EXIT of a loop nested in a sequential region (seq.c): its register there */
} vm_iplan;

/* A sequential region's instructions, compact (seq.c). A frame holds one
 * register per instruction output (value and a present flag), the call's
 * arguments first; an instruction reads its inputs from the registers of
 * its producers (a port may have several, on exclusive branches). */
typedef struct vm_sinst {
    uint16_t op, flags;
    uint16_t n_in, ports; /* data inputs; data and control inputs */
    int8_t imm;           /* constant operand port, or -1 */
    uint8_t matched;
    uint16_t arg;         /* CALL: argument index */
    uint32_t a, b;        /* attributes */
    uint32_t src_at;      /* port k's producers: sports[src_at + k] */
    uint32_t reg;         /* its first output register */
    uint32_t tokens[2];   /* edges of outputs 0 and 1: the tokens the graph would make */
    uint32_t inst;        /* the program's index */
    bool hold;            /* input hold_at (dev_cpu_in_place: a STACK_PUT's stack, FUSED_CONV2D_ADD's
                             r) comes from a register that a later step, or another of its own
                             inputs, reads: the firing holds a reference of its own, so that the
                             kernel copies rather than changing it under that reader (seq_plan.c) */
    uint8_t hold_at;
} vm_sinst;

/* The firing order of a sequential region as specialised steps: scalar
 * arithmetic and comparisons on registers or a constant, BRANCH, a CONST
 * fired by one token, a CALL's argument; anything else (and any case the
 * step does not cover at run time: a dead or tensor token, other dtypes)
 * goes through the instruction's general visit. */
typedef struct vm_sop {
    uint8_t kind;         /* VM_SOP_* */
    uint8_t matched;
    uint16_t op;          /* the instruction's opcode (BRANCH: its comparison) */
    uint16_t local;       /* the instruction, by index in the region */
    uint16_t tokens;      /* edges of output 0 */
    uint16_t tokens1;     /* edges of output 1 (BRANCH, SWITCH) */
    uint16_t flags;       /* the instruction's ISA_FLAG_PRUNE_* */
    uint32_t a, b;        /* input registers, or a constant (b for _RK, a for _KR) */
    uint32_t a2, b2;      /* a second producer of the same input (a loop's entry value and
                             its NEXTITER's), or ISA_NONE */
    uint32_t out;         /* its first output register */
    uint32_t guard;       /* (planning) the side of a pruned branch the step depends on: that
                             side's output register (ISA_NONE: none) */
    uint32_t skip;        /* VM_SOP_GUARD: the step after its run */
} vm_sop;
/* The integer operations a step computes itself on i32 and i64 scalars
 * (X(name, opcode, C operator)): arithmetic wraps, comparisons give a bool.
 * Each has a step on two registers (_RR) and on a register and a constant
 * (_RK); a comparison also a BRANCH on it against its constant (_BR). A
 * token the step does not cover (other dtypes, dead, a tensor) goes on to
 * the general step of its kind (VM_SOP_BIN_*, VM_SOP_BRANCH). */
#define VM_SOP_ARITH(X) X(ADD, ISA_ADD, ISA_IADD) X(SUB, ISA_SUB, ISA_ISUB) X(MUL, ISA_MUL, ISA_IMUL)
#define VM_SOP_CMPS(X) ISA_COMPARISONS(X)
/* The step kinds other than the integer ones, once (X(name)); with
 * VM_SOP_ARITH and VM_SOP_CMPS they make the enum below and the step
 * loop's dispatch table (seq.c). */
#define VM_SOP_BASE_KINDS(X)                                                                             \
    X(GENERIC) /* the instruction's general visit */                                                    \
    X(SKIP)    /* (planning: a step removed) */                                                         \
    X(BIN_RR) X(BIN_RK) X(BIN_KR) X(BRANCH) X(SWITCH) X(CONST) X(CALL) X(CALL_LAST) X(COPY) X(NEXTITER)  \
    X(EXIT) X(MERGE) X(ENTER) X(ENTER_LAST)                                                             \
    X(SWITCH1) /* a SWITCH whose inputs have one producer each */                                       \
    X(GUARD)   /* the start of a run on one side of a pruned branch: to `skip` unless register a */     \
    X(END)     /* after the last step */                                                                \
    X(CALLN)   /* a site's CALLs as one step (b: the site), reading vm_splan.arg_src */                 \
    X(CALL1)   /* the same for a site of one CALL (a: its argument) */
#define VM_SOP_BASE_ENUM(K) VM_SOP_##K,
#define VM_SOP_ARITH_ENUM(N, OP, C) VM_SOP_##N##_RR, VM_SOP_##N##_RK,
#define VM_SOP_CMP_ENUM(N, OP, C) VM_SOP_##N##_RR, VM_SOP_##N##_RK, VM_SOP_##N##_BR,
enum {
    VM_SOP_BASE_KINDS(VM_SOP_BASE_ENUM) VM_SOP_ARITH(VM_SOP_ARITH_ENUM) VM_SOP_CMPS(VM_SOP_CMP_ENUM) VM_SOP_SWITCHN, VM_SOP_N_KINDS
};
#undef VM_SOP_BASE_ENUM
#undef VM_SOP_ARITH_ENUM
#undef VM_SOP_CMP_ENUM

typedef struct vm_sroute { /* one SWITCH of a VM_SOP_SWITCHN step */
    uint32_t src, out;        /* its value's register, its first output register */
    uint16_t tokens[2];       /* edges of its outputs 0 and 1 */
    uint16_t local;           /* the instruction, by index in the region */
} vm_sroute;

typedef struct vm_sport {
    uint32_t first, n;    /* registers sregs[first .. first+n) */
} vm_sport;

typedef struct vm_rplan {
    uint32_t n_slots, n_words, n_children;
    uint32_t n_frames;    /* children [0, n_frames) are loop instances, the rest calls */
    size_t ctx_size;      /* bytes of one context of this region */
    uint32_t frame_child; /* LOOP: its child index in the parent region */
    uint32_t first, end;  /* its instructions: insts[first .. end) */
    /* FUNC regions whose calls may run as sequential frames (seq.c): */
    bool seq;             /* no loops, no tensor instructions, only such callees, acyclic */
    uint32_t *order;      /* its instructions, producers first (RETURNs after their CALLs) */
    uint32_t n_order;
    vm_sinst *sinsts;     /* by index in the region (instruction - first) */
    vm_sport *sports;
    uint32_t *sregs;
    vm_sroute *routes;    /* the SWITCHes of VM_SOP_SWITCHN steps */
    vm_sop *sops;         /* n_sops steps (the order without its RETURNs, a GUARD before each run
                             on one side of a pruned branch), then VM_SOP_END */
    uint32_t n_sops;
    uint32_t n_regs;      /* arguments, outputs, then each local site's arguments */
    uint32_t frame_bytes; /* a frame of it (seq.c) */
    uint32_t n_args;      /* registers 0 .. n_args-1: the call's arguments (a loop: its entry values) */
    uint8_t *keep;        /* a loop: registers that stay from one iteration to the next */
    bool calls;           /* it has CALL instructions */
    bool loops;           /* a loop body that enters two loops or more (ENTERs of two frames) */
    uint32_t param_slot;  /* calls buffered whole (vm_splan.strict): the first of n_params */
    uint32_t n_params;    /* value slots of a context that hold the arguments */
} vm_rplan;

typedef struct vm_fplan {   /* per LOOP region (frame) */
    uint32_t n_enter, n_const;
    uint32_t parallel;      /* in-flight iteration bound: the largest parallel=N its
                               ENTERs give; ISA_DEFAULT_PARALLEL when none gives one */
    uint32_t *exits, n_exits;
    uint32_t *const_enters; /* n_const ENTER const instructions, by k */
    /* a loop body that runs as a frame (seq.c): */
    uint32_t *enters;       /* every ENTER of the frame, by its entry register (vm_iplan.arg) */
    uint32_t *nexts, n_nexts; /* each NEXTITER's register (the next iteration's is the one after) */
    uint64_t const_tokens;  /* tokens the `ENTER const` values make in each iteration */
    uint64_t entry_tokens;  /* tokens the other ENTERs make in iteration 0 */
    uint32_t entry_reg;     /* nested in a sequential region: its entry values' registers there */
} vm_fplan;

typedef struct vm_splan {   /* per call site */
    uint32_t n_call;
    uint32_t *returns, n_returns;
    uint32_t *calls;        /* its CALLs by argument index (vm_iplan.arg) */
    uint32_t arg_slot;      /* caller is sequential: the registers of its arguments */
    vm_sport *rets;         /* callee is sequential: per RETURN, its producers' registers
                               in the callee's frame: ret_regs[first .. first+n) */
    uint32_t *ret_regs;
    uint32_t *ret_out;      /* caller and callee sequential: per RETURN, its register in the
                               caller's frame and the tokens it sends (ret_tokens) */
    uint32_t *ret_tokens;
    bool ret_one;           /* caller and callee sequential, one RETURN of one or two producers:
                               their registers ret1 (the same twice for one) */
    uint32_t ret1[2];
    uint32_t callee;        /* its callee region (isa_site.callee) */
    const vm_rplan *callee_plan; /* regions[callee] */
    uint64_t call_tokens;   /* the tokens its CALLs send into the callee */
    uint32_t *arg_src;      /* its CALLs are one step (VM_SOP_CALLN): each argument's register
                               in the caller's frame; NULL: a step per CALL */
    bool strict;            /* the callee is sequential and no RETURN of the site feeds one
                               of its CALLs: the arguments are gathered before the call */
} vm_splan;

typedef struct vm_plan {
    ut_arena arena;
    vm_iplan *insts;
    vm_rplan *regions;
    vm_fplan *frames;       /* indexed by region (only LOOP entries used) */
    vm_splan *sites;
} vm_plan;

/* `seq_tensors`: bodies with tensor instructions may run as frames too (the
 * VM passes true: a frame's big kernels still share their work out among
 * idle workers through dev_par_for; what a frame gives up is running two
 * independent tensor instructions of one iteration side by side). */
tfvm_status vm_plan_build(const isa_program *p, const tfvm_allocator *a, bool seq_tensors, vm_plan *out);
void vm_plan_free(vm_plan *plan);

/* ---- Contexts ---------------------------------------------------------------
 * A context is a tag. Its memory holds the matching state of every matched
 * instruction of its region (value slots, claim and status words) and the
 * child records (loop instances by frame, call contexts by site). Contexts
 * are reference counted: a reference is held by each queued activation, each
 * partial match, each child, and the holds described in docs/isa.md
 * ("Contexts and memory"). The last unref frees it. */
typedef enum vm_ctx_kind { VM_CTX_ROOT, VM_CTX_CALL, VM_CTX_ITER } vm_ctx_kind;

typedef struct vm_loop vm_loop;
typedef struct vm_ctx vm_ctx;

enum { VM_ENTERED_NONE, VM_ENTERED_LIVE, VM_ENTERED_DEAD };

struct vm_ctx {
    vm_ctx *parent;        /* the tag without its last element (NULL for root) */
    uint32_t region;
    uint8_t kind;          /* vm_ctx_kind */
    uint8_t live;          /* in use (not on a free list): for teardown */
    atomic_uchar entered;  /* CALL: VM_ENTERED_* once a CALL token arrived */
    uint32_t elem;         /* CALL: site index; ITER: frame (region) */
    uint64_t iter;         /* ITER: iteration index */
    uint32_t depth;        /* elements of its tag (root 0) */
    uint64_t serial;       /* creation order (per worker), to list contexts oldest first */
    atomic_uint refs;
    atomic_uint arrived;   /* CALL: CALL tokens received so far */
    atomic_uint owner;     /* the worker that made it, or VM_CTX_SHARED once other workers
                              may touch it (then every update is atomic; vm_ctx_atomic) */
    uint32_t child;        /* CALL: its index in the parent's children */
    vm_loop *loop;         /* ITER: its loop instance */
    vm_ctx *next_iter;     /* ITER: the following iteration (holds a reference) */
    vm_ctx *next_block;    /* every block its worker allocated (never unlinked) */
    dev_value *slots;
    _Atomic(void *) *children;
    _Atomic uint64_t *words;
};

struct vm_loop {
    pthread_mutex_t lock;  /* guards everything below (loops change per iteration, not per firing) */
    vm_ctx *parent;        /* holds one reference on it */
    uint32_t frame;
    uint32_t arrived;      /* ENTER tokens received so far (const and not) */
    uint8_t entered;       /* VM_ENTERED_* */
    uint8_t holding;       /* holds iteration 0 until every ENTER has arrived */
    uint8_t live;          /* for teardown */
    uint64_t next;         /* iterations created so far */
    vm_ctx *first, *last;  /* oldest and newest live iteration */
    dev_value *consts;     /* per const ENTER: its value once arrived */
    /* NEXTITER firings waiting for iteration `next` (parallel bound) */
    struct vm_deferred { uint32_t inst; dev_value v; } *deferred;
    uint32_t n_deferred, cap_deferred;
    vm_loop *next_block;   /* every loop its worker allocated */
    vm_loop *next_free;
    /* a loop run as a frame (seq.c): its entry values, gathered first */
    bool seq;
    dev_value *entry;
    uint32_t n_entry;
};

/* An activation: instruction `inst` is ready to fire in `ctx`. Single-input
 * instructions carry their token's value; matched ones read their slots,
 * except MERGE, which carries the chosen value and its input index in aux.
 * Exactly 32 bytes: it travels through the deques as a sched_item. */
typedef struct vm_act {
    vm_ctx *ctx;
    uint32_t inst;
    uint32_t aux;
    dev_value v;
} vm_act;
_Static_assert(sizeof(vm_act) == sizeof(sched_item), "an activation is one deque item");

/* ---- Workers ------------------------------------------------------------------
 * One per thread. Everything here is touched only by its own thread during a
 * run (the scheduler's deque top and sharing handshake excepted), so counters
 * and free lists need no atomics. */
/* One traced firing (trace.c). */
typedef struct vm_trace_ev {
    uint64_t t0, ticks;      /* when it started, how long it took */
    uint32_t inst;
    char tag[60];            /* vm_tag_str: its ends, when long */
    char inputs[64];         /* its data inputs' types: "f32[2, 3], i32" */
} vm_trace_ev;

typedef struct vm_worker {
    sched_worker sw;         /* queues, stealing, the sharing handshake (scheduler/sched.h) */
    struct tfvm_vm *vm;
    uint32_t id;
    bool has_next;
    bool spare;              /* the firing activation's reference on `held` is unclaimed */
    bool seq_ok;             /* a plain run: calls may run as sequential frames (seq.c) */
    struct seq_chunk *seq_mem; /* memory of sequential frames (LIFO) */
    uint8_t fwd_room;        /* routing instructions fired inside a delivery, this deep
                                at most (token.c, forward); 0: every firing is an activation */
    vm_ctx *held;            /* the context of the activation being fired */
    vm_act next;             /* the newest ready activation: run inline, never queued */
    vm_ctx **free_ctx;       /* per region: recycled contexts */
    vm_ctx *blocks;          /* every context this worker allocated */
    vm_loop *loops;          /* every loop instance this worker allocated */
    vm_loop *free_loops;
    dev_par_runner par;      /* kernels' parallel loops on this run's workers */
    /* contexts made minus freed by this worker; others read it (the peak
     * count), so it has a cache line of its own, away from the counters
     * written on every firing */
    _Alignas(64) atomic_llong live;
    char live_pad[56];
    uint64_t *prof;          /* profiling: per instruction, firings and ticks (2 words) */
    vm_trace_ev *trace;      /* tracing: this worker's firings, n_trace of cap_trace */
    size_t n_trace, cap_trace;
    uint64_t trace_dropped;  /* firings past trace_max, not recorded */
    uint32_t count_left;     /* contexts to make before the next look at the live total */
    uint32_t count_every;    /* (vm_ctx_note_new) 1, or VM_PEAK_SAMPLE when that is sampled */
    tfvm_stats st;
    uint64_t inline_runs, shares;
    char pad[64];
} vm_worker;

/* A pool of worker threads as the public API hands it out (tfvm_pool_new). */
struct tfvm_pool {
    sched_pool *pool;
    ut_topo *topo;
};

/* ---- The VM ---------------------------------------------------------------- */
typedef enum vm_state { VM_IDLE, VM_RUNNING, VM_PAUSED, VM_DONE, VM_FAILED } vm_state;

/* Debugger hook (deterministic mode): called before each firing; returning
 * true pauses the run (vm_step returns VM_PAUSED) before the activation fires. */
typedef bool (*vm_hook_fn)(void *ud, struct tfvm_vm *vm, const vm_act *act);

/* The diagnosis of a stuck run lists this many partial matches and counts
 * the rest (diag.c). */
#define VM_DIAG_SHOWN 4

/* A partial match a sequential frame left (seq.c): the instruction, its
 * frame's tag as text, and the ports that had a token (bit k: port k). */
typedef struct vm_seq_wait {
    uint32_t inst;
    uint64_t has;
    char tag[256];
} vm_seq_wait;

struct tfvm_vm {
    const isa_program *prog;
    tfvm_config cfg;
    tfvm_allocator alloc;
    vm_plan plan;
    const sched_policy *policy; /* who runs what (scheduler/sched.h) */
    bool multi;                 /* the policy runs several workers: a context may be
                                   touched by several threads (vm_ctx_atomic decides) */
    ut_topo *topo;              /* several workers: the machine's cores (may be NULL) */
    sched_pool *pool;           /* the threads of its runs: tfvm_config.pool, or its own,
                                   made at the first run that needs one */
    bool own_pool;
    tfvm_error err;
    _Atomic int state;          /* vm_state */
    pthread_mutex_t err_lock;   /* the first error wins */
    atomic_int interrupted;     /* set by tfvm_interrupt, from any thread or a signal handler */

    /* workers: w[0] runs on the thread that calls tfvm_run */
    vm_worker *w;               /* (in w_mem, aligned to a cache line as vm_worker asks) */
    void *w_mem;
    uint32_t n_workers;
    sched_worker **sw;          /* &w[i].sw, for the scheduler */
    sched_run run;              /* idle count, parking, termination, kernels' loops */

    /* the current run */
    uint32_t entry;
    vm_ctx *root;
    dev_value *results;         /* per result of the entry; dtype 0 = not arrived */
    atomic_uchar *result_set;
    dev_value *consts;          /* per program constant, made once per VM */
    struct dev_vm *dev;         /* devices, placement and memory pools (devices/place.h) */
    atomic_llong live_peak;     /* sampled peak of live contexts (parallel mode) */
    uint64_t ctx_bound;         /* live contexts allowed: max_contexts, or by default a bound
                                   from the machine's memory (an endless recursion stops with
                                   "recursion too deep" instead of exhausting it) */
    tfvm_stats stats;           /* of the last run (sum over workers) */
    double t_start;

    bool profiling;             /* time every firing (vm_profile); never on otherwise */
    uint64_t prof_t0, prof_t1;  /* ticks at the start and end of the last run */
    double prof_s0, prof_s1;    /* and seconds */
    size_t trace_max;           /* tracing (with profiling): firings kept per worker; 0 = off */

    struct vm_io *io;           /* channels of FEED and FETCH (io.c), or NULL: none */
    struct tfvm_session *session; /* the VM's session handle (io.c), once one was started */

    /* partial matches that sequential frames left behind: a frame keeps none
     * once it ends, so seq.c notes them (vm_note_waiting) when a call ends
     * with a RETURN that got no token; the stuck run's diagnosis lists them
     * after the contexts' (diag.c). Guarded by err_lock; cleared per run. */
    uint64_t n_seq_waiting;
    vm_seq_wait seq_waiting[VM_DIAG_SHOWN];

    vm_hook_fn hook;
    void *hook_ud;
    vm_act paused;              /* the activation a hook paused before */
    bool has_paused;
    /* the debugger's order (tfvm_debug_begin): in a stepped run a NEXTITER
     * waits while other work is ready, so loops run iteration by iteration
     * (fire.c, stepped_order); vm_begin clears it */
    bool iter_order;
};

/* Resumable runs (tfvm_run = begin, step until done, end). Stepping is for
 * the deterministic mode; in parallel mode vm_step runs to the end. */
tfvm_status vm_begin(tfvm_vm *vm, uint32_t entry, const tfvm_value *args, size_t n_args);
/* Fires up to `max` activations (0 = no limit). Returns the new state. */
vm_state vm_step(tfvm_vm *vm, uint64_t max);
/* Collects results (on success) and frees everything of the run. */
tfvm_status vm_end(tfvm_vm *vm, tfvm_value *results, size_t n_results);

/* Records the first runtime error of the run (later ones are ignored). */
void vm_fail(tfvm_vm *vm, tfvm_status code, const vm_ctx *ctx, uint32_t inst, const char *fmt, ...)
    UT_PRINTF(5, 6);
static inline bool vm_failed(const tfvm_vm *vm)
{
    return atomic_load_explicit(&vm->state, memory_order_relaxed) == VM_FAILED;
}
/* ---- Tags as text (diag.c) ----------------------------------------------------
 * A tag's elements are collected innermost first in one walk up a chain (a
 * context's, or a sequential run's frames and then its context): the
 * innermost and the outermost VM_TAG_ENDS of them, nothing formatted, so a
 * tag 20 million calls deep costs one pass over its chain. The walk also
 * notes where the run is: the innermost call and loop, and the calls in all.
 * As text a tag keeps both ends, as many elements of each as fit, and counts
 * the rest: "[]", "[fib@1, sum_loop#3]", "[f@1, f@2, ... 812340 more ...,
 * f@2, f@2]". */
#define VM_TAG_ENDS 16
typedef struct vm_tag_elem {
    uint32_t id;     /* a call's site, or a loop's region */
    bool call;
    uint64_t iter;   /* a loop's iteration */
} vm_tag_elem;
typedef struct vm_tag_walk {
    vm_tag_elem inner[VM_TAG_ENDS]; /* the innermost elements, innermost first */
    vm_tag_elem outer[VM_TAG_ENDS]; /* a ring of the last ones added: the outermost */
    uint64_t depth;                 /* elements in all */
    uint64_t calls;                 /* of them calls */
    uint32_t call_site;             /* the innermost call's site, or UINT32_MAX */
    uint32_t loop;                  /* the innermost loop's region, or UINT32_MAX */
    uint64_t iter;                  /* and its iteration */
} vm_tag_walk;
static inline void vm_tag_walk_init(vm_tag_walk *t)
{
    t->depth = t->calls = t->iter = 0;
    t->call_site = t->loop = UINT32_MAX;
}
/* Adds the next element out. */
static inline void vm_tag_walk_add(vm_tag_walk *t, bool call, uint32_t id, uint64_t iter)
{
    vm_tag_elem e = {.id = id, .call = call, .iter = iter};
    if (t->depth < VM_TAG_ENDS)
        t->inner[t->depth] = e;
    t->outer[t->depth % VM_TAG_ENDS] = e;
    t->depth++;
    if (call) {
        if (t->call_site == UINT32_MAX)
            t->call_site = id;
        t->calls++;
    } else if (t->loop == UINT32_MAX) {
        t->loop = id;
        t->iter = iter;
    }
}
/* Adds ctx's elements, from ctx out. */
void vm_tag_walk_ctx(vm_tag_walk *t, const vm_ctx *ctx);
const char *vm_tag_walk_str(const tfvm_vm *vm, const vm_tag_walk *t, char *buf, size_t size);
void vm_format_tag(const tfvm_vm *vm, const vm_ctx *ctx, ut_buf *out);
const char *vm_tag_str(const tfvm_vm *vm, const vm_ctx *ctx, char *buf, size_t size);
/* Fails the run as interrupted where a walked tag and the instruction next
 * to fire say it was: "interrupted at i (ADD) in 'f' at depth 3, iteration
 * #41 of loop 'f_while1'" (the error's where, instr and tag filled too). */
void vm_fail_interrupted(tfvm_vm *vm, const vm_tag_walk *t, uint32_t inst);
/* A value as the API hands it out (a tensor's reference goes with it). */
void vm_value_to_api(const dev_value *d, tfvm_value *v);
/* Prints a value as `tfvm run` does (tensors NumPy-like). */
void vm_format_value(const dev_value *v, ut_buf *out);
/* Live contexts and loop instances right now (deterministic mode, or after a run). */
void vm_count_live(const tfvm_vm *vm, uint64_t *contexts, uint64_t *loops);
/* The first live loop instance found, or NULL (tests and the debugger). */
vm_loop *vm_any_live_loop(const tfvm_vm *vm);

/* Profiling (tfvm profile): when on, every firing is timed and counted per
 * instruction, in a separate copy of the workers' loops, so a VM that is not
 * profiling pays nothing. vm_profile allocates the counters (NOMEM); turning
 * it on again clears them. vm_profile_read sums the workers: count[i] firings
 * and ns[i] nanoseconds of instruction i (its sends included), over every
 * run since. */
tfvm_status vm_profile(tfvm_vm *vm, bool on);
void vm_profile_read(const tfvm_vm *vm, uint64_t *count, double *ns);
/* Tracing (trace.c): while profiling, each timed firing is also recorded,
 * up to max_events per worker (0: off); calling it drops what was kept.
 * vm_trace_open starts the record of the firing of a (NULL past the bound),
 * vm_trace_read hands each record to fn (tfvm_debug_trace_read). */
struct tfvm_debug_trace_ev;
void vm_trace(tfvm_vm *vm, size_t max_events);
vm_trace_ev *vm_trace_open(vm_worker *w, const vm_act *a);
size_t vm_trace_read(const tfvm_vm *vm, void (*fn)(void *ud, const struct tfvm_debug_trace_ev *ev), void *ud,
                     uint64_t *dropped);

/* ---- Internals shared by the vm/ files -------------------------------------- */
/* Scalar integer arithmetic and comparisons without the kernels (isa/isa.h:
 * ISA_INT_ARITH and ISA_COMPARISONS, their one definition), with their
 * results; false: leave it to the kernels (other dtypes or ops, a division
 * by zero, whose error they report). */
#define VM_SCALAR_CMP(N, OP, C) case OP: v->dtype = TFVM_BOOL, v->u.b = x C y; return true;
/* One switch per dtype, a case per row of both lists. */
#define VM_SCALAR_FN(F, TT, UU)                                                                      \
    static UT_INLINE bool vm_scalar_##F(uint16_t op, TT x, TT y, dev_value *v)                        \
    {                                                                                                \
        typedef TT T;                                                                                \
        typedef UU U;                                                                                \
        T *r = &v->u.F;                                                                              \
        switch (op) {                                                                                \
            ISA_COMPARISONS(VM_SCALAR_CMP)                                                           \
            ISA_INT_ARITH(ISA_ARITH_CASE)                                                            \
        default: return false;                                                                       \
        }                                                                                            \
    }
VM_SCALAR_FN(i32, int32_t, uint32_t)
VM_SCALAR_FN(i64, int64_t, uint64_t)
#undef VM_SCALAR_FN
#undef VM_SCALAR_CMP
static UT_INLINE bool vm_scalar_op(uint16_t op, const dev_value *x, const dev_value *y, dev_value *r)
{
    if (x->is_tensor || y->is_tensor || x->dtype != y->dtype)
        return false;
    *r = (dev_value){.dtype = x->dtype};
    switch (x->dtype) {
    case TFVM_I32: return vm_scalar_i32(op, x->u.i32, y->u.i32, r);
    case TFVM_I64: return vm_scalar_i64(op, x->u.i64, y->u.i64, r);
    default: return false;
    }
}

/* A cycle counter for profiling (nanoseconds where there is none). */
static inline uint64_t vm_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return ut_now_ns();
#endif
}
/* After a run ended: every result arrived and is live, or the run fails as
 * stuck, naming the instructions that hold partial matches (diag.c). */
tfvm_status vm_check_results(tfvm_vm *vm);
/* Notes instruction `inst` of a sequential frame with tag `tag` as waiting
 * with the ports in `has` (bit k: port k) and no more to come. */
void vm_note_waiting(tfvm_vm *vm, uint32_t inst, const char *tag, uint64_t has);
vm_ctx *vm_ctx_new(vm_worker *w, vm_ctx *parent, uint32_t region, vm_ctx_kind kind, uint32_t elem);
/* Gives back a context that was never published (lost a creation race). */
void vm_ctx_discard(vm_worker *w, vm_ctx *c);
void vm_ctx_unref(vm_worker *w, vm_ctx *c);
/* Owner-biased contexts (parallel mode). A context is private to the worker
 * that made it until another worker touches it: its owner updates its counts
 * and matching words with plain loads and stores, as the deterministic mode
 * does, and only a shared context pays for atomic read-modify-writes. Work
 * stealing moves few activations (a thief takes the oldest, i.e. the
 * biggest, piece of work), so most contexts are never shared.
 * vm_ctx_share makes c shared: it marks c as being shared, waits until c's
 * owner, between two firings, has acknowledged (after which the owner sees
 * the mark), or is idle, and then marks it shared. A worker that finds a
 * share under way waits for it to finish. Returns true. */
bool vm_ctx_share(vm_worker *w, vm_ctx *c);
#define VM_CTX_SHARED UINT32_MAX
#define VM_CTX_SHARING 0x80000000u /* | the owner: a worker is sharing it (vm_ctx_share) */
/* Must w update c with atomic operations? (Shares c first if w is not its
 * owner, or waits for a share under way to finish.) One load and compare: in
 * the deterministic mode every context's owner is worker 0, the only one. */
static inline bool vm_ctx_atomic(vm_worker *w, vm_ctx *c)
{
    uint32_t o = atomic_load_explicit(&c->owner, memory_order_relaxed);
    if (o == w->id)
        return false;
    return o == VM_CTX_SHARED || vm_ctx_share(w, c);
}
/* Between two firings, and while waiting for anything: answer the sharing
 * requests made since the last time (scheduler/sched.h, sched_serve). */
static inline void vm_serve_shares(vm_worker *w) { sched_serve(&w->sw); }
/* A reference on c, atomic or not as vm_ctx_atomic decided (`par`). A
 * delivery decides once for all its updates of c: asking again could answer
 * a sharing request halfway (vm_ctx_share answers requests while it waits),
 * after which its plain updates would race with the requester's. */
static inline void vm_ctx_ref_as(vm_ctx *c, bool par)
{
    if (par)
        atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    else
        atomic_store_explicit(&c->refs, atomic_load_explicit(&c->refs, memory_order_relaxed) + 1,
                              memory_order_relaxed);
}
static inline void vm_ctx_ref(vm_worker *w, vm_ctx *c) { vm_ctx_ref_as(c, vm_ctx_atomic(w, c)); }
/* Delivers a token to every destination of output `out` of `inst`, in ctx. */
void vm_send(vm_worker *w, vm_ctx *ctx, uint32_t inst, uint32_t out, const dev_value *v);
/* SWITCH and BRANCH: v on output `taken`, a dead token on the other unless
 * the instruction prunes it (flags ISA_FLAG_PRUNE_*). */
static inline void vm_route(vm_worker *w, vm_ctx *ctx, uint32_t inst, uint16_t flags, uint32_t taken,
                            const dev_value *v)
{
    vm_send(w, ctx, inst, taken, v);
    if (vm_rule_dead_other(flags, taken)) {
        dev_value dead = dev_dead();
        vm_send(w, ctx, inst, 1 - taken, &dead);
    }
}
/* Queues an activation; it takes over *v (also when it fails). Takes one
 * reference on ctx unless `owned` (the caller's reference moves to it). */
bool vm_push(vm_worker *w, vm_ctx *ctx, uint32_t inst, uint32_t aux, const dev_value *v, bool owned);
/* Control instructions (vm/control.c). The activation's reference on its
 * context is released by the caller after these return. */
void vm_fire_control(vm_worker *w, const vm_act *act, dev_value *in);
/* BRANCH `branch`'s predicate on its live input x: *taken, the side its
 * value goes to (vm/rules.h: vm_rule_branch_int, else the comparison where
 * placement puts it). Else the run's error, with msg. Both engines' BRANCH. */
tfvm_status vm_branch_predicate(tfvm_vm *vm, const isa_inst *branch, const dev_value *x, uint32_t *taken, char *msg,
                                size_t size);
/* ---- Sequential frames (seq.c, docs/frames.md) ---------------------------------
 * A call of a `seq` region with all its arguments, or an instance of a `seq`
 * loop with all its entry values, runs as a frame of registers: the body's
 * instructions fire in a fixed order (producers first), nested calls and
 * loops push frames on a per-worker stack, and results go back as the site's
 * RETURN (or the loop's EXIT) tokens. The same firings, tokens, matches and
 * contexts as the graph would make (the counters agree), without
 * activations, matching or reference counts. Only in plain runs (not stepped
 * by a debugger, not profiled); with several workers a call only at tag
 * depth >= VM_SEQ_DEPTH, so that the top of a recursion stays dataflow and
 * is shared by stealing. */
#ifndef VM_SEQ_DEPTH
#define VM_SEQ_DEPTH 10
#endif
tfvm_status vm_seq_plan(const isa_program *p, bool tensors, vm_plan *plan);
static inline bool vm_seq_call_ok(vm_worker *w, const vm_ctx *caller, uint32_t callee_region);
/* Runs site `site`'s call from dataflow context c with args (one per CALL of
 * the site, by vm_iplan.arg; consumed). The RETURNs' tokens are sent in c.
 * `counted`: the call's context was counted already (its arguments were
 * gathered in one). */
void vm_seq_call(vm_worker *w, vm_ctx *c, uint32_t site, dev_value *args, bool counted);
void vm_seq_free(vm_worker *w);
/* Runs an instance of loop `frame` entered from context c with every entry
 * value (by vm_iplan.arg of its ENTERs; consumed). EXIT tokens go into c. */
void vm_seq_loop(vm_worker *w, vm_ctx *c, uint32_t frame, dev_value *entry);
/* Whether, with several workers, the iterations of region r (a loop that
 * enters two loops or more, sequential but for that) run as dataflow so
 * that the loops of one iteration may run beside the next iteration's
 * (stacked recurrent layers a chunk of steps apart, import/onnx_rnn.c).
 * Its iterations' contexts are shared from the start (ctx.c), and a
 * worker offers all its waiting work before and after one of their loops
 * runs as a frame (control.c). */
static inline bool vm_loops_overlap(const tfvm_vm *vm, uint32_t r)
{
    return vm->n_workers > 1 && vm->plan.regions[r].loops && vm->plan.regions[r].seq;
}

/* Does an instance of loop `frame` entered at `parent` run as a frame? With
 * several workers only a loop that calls nothing and whose loops do not
 * overlap does below VM_SEQ_DEPTH (its iterations are too small to share;
 * a loop that calls may not be). */
static inline bool vm_seq_loop_ok(vm_worker *w, const vm_ctx *parent, uint32_t frame)
{
    tfvm_vm *vm = w->vm;
    const vm_rplan *rp = &vm->plan.regions[frame];
    if (!w->seq_ok || !rp->seq)
        return false;
    if (vm->n_workers > 1 && (rp->calls || vm_loops_overlap(vm, frame)) && parent->depth < VM_SEQ_DEPTH)
        return false;
    return true;
}
/* vm_fail with a tag given as text (a sequential frame has no context). */
void vm_fail_tag(tfvm_vm *vm, tfvm_status code, const char *tag, uint32_t inst, const char *fmt, ...) UT_PRINTF(5, 6);
/* Context accounting: w counts a new context; false when the context bound
 * is exceeded (with `fail` the run fails then, at parent's tag; frames pass
 * false and call vm_ctx_bound_fail with their own tag). With several workers
 * and no max_contexts the live total is summed (vm_ctx_count_check, ctx.c)
 * only every VM_PEAK_SAMPLE creations (w->count_every, counted down in
 * w->count_left): the count itself is inline. */
#define VM_PEAK_SAMPLE 1024
bool vm_ctx_count_check(vm_worker *w, const vm_ctx *parent, bool fail);
static inline bool vm_ctx_note_new(vm_worker *w, const vm_ctx *parent, bool fail)
{
    /* only this thread writes its count */
    atomic_store_explicit(&w->live, atomic_load_explicit(&w->live, memory_order_relaxed) + 1, memory_order_relaxed);
    w->st.contexts_created++;
    if (--w->count_left) /* (never 0 here: tfvm_vm_new sets it to count_every, at least 1) */
        return true;
    w->count_left = w->count_every;
    return vm_ctx_count_check(w, parent, fail);
}
static inline bool vm_ctx_count_new(vm_worker *w) { return vm_ctx_note_new(w, NULL, false); }
/* Fails the run for the bound, exceeded at a walked tag (a context's, or a
 * frame's and its context's): max_contexts's message, or "recursion too
 * deep" for the default bound; both name the function of the innermost call,
 * the depth and the call's source position, and the default's the tag's
 * two ends. */
void vm_ctx_bound_fail(tfvm_vm *vm, const vm_tag_walk *t);
void vm_ctx_count_free(vm_worker *w);

/* CALL of a site's only CALL, with its token v (not consumed). */
void vm_call_one(vm_worker *w, vm_ctx *c, uint32_t inst, const dev_value *v);
/* CALL of a site with several CALLs. */
void vm_fire_call(vm_worker *w, const vm_act *a, dev_value *v);
void vm_fire_branch(vm_worker *w, const vm_act *a, dev_value *v);
/* Called when an iteration context's last reference goes (control.c);
 * returns the context that loses a reference because of it, or NULL. */
vm_ctx *vm_iter_release(vm_worker *w, vm_ctx *c);
void vm_ctx_recycle(vm_worker *w, vm_ctx *c);
void vm_loop_destroy(vm_worker *w, vm_loop *l);

/* ---- The host (vm/io.c, docs/coexec.md) ---------------------------------------------- */
typedef struct vm_io vm_io;
/* The channels of the program's FEEDs and FETCHes (none: vm->io stays NULL). */
tfvm_status vm_io_new(tfvm_vm *vm);
void vm_io_free(tfvm_vm *vm);
/* Each run starts with empty channels and a host that feeds nothing
 * (tfvm_session_start opens them); vm_io_end: the run is over (host waits
 * end); vm_io_teardown: queued values and waiting firings are dropped, the
 * counts stay (vm_io_channel: what the run took, what the host fed). */
void vm_io_begin(tfvm_vm *vm);
void vm_io_end(tfvm_vm *vm);
void vm_io_teardown(tfvm_vm *vm);
/* FEED and FETCH firings; in: the data inputs; dead: one of them is dead. */
void vm_fire_host(vm_worker *w, const vm_act *a, dev_value *in, bool dead);
/* A FEED activation the host completed (its value fed): fires it, true; false: not one. */
bool vm_feed_resumed(vm_worker *w, vm_act *a);
/* The scheduler's on_quiet hook (sched_run.on_quiet). */
void vm_io_quiet(void *ud);
/* The debugger's view, between steps (deterministic mode). Channel k, by
 * name (k < vm_io_channels): its kind and type, values queued (fed and not
 * yet taken; fetched and kept), FEED firings waiting, values taken by FEEDs
 * or made by FETCHes (count), and values the host fed or took. */
typedef struct vm_chan_view {
    const char *name;
    bool fetch;
    uint32_t type, inst;
    size_t queued, waiting;
    uint64_t count, host;
} vm_chan_view;
size_t vm_io_channels(const tfvm_vm *vm);
bool vm_io_channel(const tfvm_vm *vm, size_t k, vm_chan_view *out);
/* Queued value j of channel k (oldest first), or NULL. */
const dev_value *vm_io_queued(const tfvm_vm *vm, size_t k, size_t j);
/* Waiting FEED firing j of channel k: its context and instruction. */
bool vm_io_waiting(const tfvm_vm *vm, size_t k, size_t j, const vm_ctx **ctx, uint32_t *inst);

/* Feeds v on FEED channel `name` whatever the host's state (the debugger
 * feeds a run that has no host): to a FEED that waits, else queued; a
 * message on failure. */
tfvm_status vm_io_queue(tfvm_vm *vm, const char *name, const tfvm_value *v, char *msg, size_t size);
/* This run keeps FETCHed values (the debugger shows them). */
void vm_io_keep(tfvm_vm *vm);
/* tfvm_vm_free's first step: a live session is cancelled, and every host
 * call on it has returned, before the handle is freed. */
void vm_session_free(tfvm_vm *vm);
/* A session is live or ending: no other run may start. */
bool vm_session_busy(tfvm_vm *vm);
/* tfvm_run's checks before a run (api.c): the VM is idle, the entry exists
 * (*entry_index), args is given. */
tfvm_status vm_run_prepare(tfvm_vm *vm, const char *entry, size_t n_args, const tfvm_value *args,
                           uint32_t *entry_index);

/* ==== Inspection (vm/inspect.c) ===============================================
 * Read-only walks for the debugger over a run that is paused (vm_step
 * returned VM_PAUSED) or has stopped (quiescent, failed), in the
 * deterministic mode. Nothing here changes the run. */

/* Ready activations in the order the deterministic scheduler fires them when
 * no new ones appear: the paused one, the inline successor, then the queue
 * from its top. Calls fn for each (fn may be NULL); returns how many. */
size_t vm_ready_each(const tfvm_vm *vm, void (*fn)(void *ud, const vm_act *a), void *ud);
/* The value on data input `port` of an activation about to fire, or NULL
 * (a MERGE carries one value: its chosen input, a->aux). */
const dev_value *vm_act_input(const tfvm_vm *vm, const vm_act *a, uint32_t port);

/* Every live context, oldest first. *out comes from the VM's allocator; free
 * it with vm_contexts_free. TFVM_ERR_NOMEM when that fails. */
tfvm_status vm_live_contexts(const tfvm_vm *vm, vm_ctx ***out, size_t *n);
void vm_contexts_free(const tfvm_vm *vm, vm_ctx **list, size_t n);
/* c is still the context that had `serial` (contexts are recycled). */
static inline bool vm_ctx_same(const vm_ctx *c, uint64_t serial) { return c && c->live && c->serial == serial; }
/* The loop instance of frame child k (k < n_frames of c's region), or NULL. */
const vm_loop *vm_ctx_loop(const tfvm_vm *vm, const vm_ctx *c, uint32_t k);

/* Matching state of a matched instruction (vm_iplan.matched) in context c. */
typedef enum vm_match {
    VM_MATCH_NONE,    /* no token at this tag (or the instruction is not matched) */
    VM_MATCH_WAITING, /* some inputs arrived, some are missing: a partial match */
    VM_MATCH_READY,   /* every input arrived; its activation is queued */
    VM_MATCH_FIRED    /* a MERGE that fired at this tag (later tokens are absorbed) */
} vm_match;
vm_match vm_match_state(const tfvm_vm *vm, const vm_ctx *c, uint32_t inst);
/* A constant operand (vm_iplan.imm) counts as arrived, its value the constant. */
bool vm_port_arrived(const tfvm_vm *vm, const vm_ctx *c, uint32_t inst, uint32_t port);
/* The value waiting on an arrived data port, or NULL: a MERGE keeps no
 * values (while it waits, every input it has is dead). */
const dev_value *vm_port_value(const tfvm_vm *vm, const vm_ctx *c, uint32_t inst, uint32_t port);

/* With several workers a worker about to run a long sequential call first
 * offers its oldest waiting work to idle workers (no firings happen inside
 * the call, so the run loop's periodic offer would not). */
static inline bool vm_seq_call_ok(vm_worker *w, const vm_ctx *caller, uint32_t callee_region)
{
    tfvm_vm *vm = w->vm;
    if (!w->seq_ok || !vm->plan.regions[callee_region].seq)
        return false;
    if (vm->n_workers == 1)
        return true;
    if (caller->depth < VM_SEQ_DEPTH)
        return false;
    if (vm->policy->offer && atomic_load_explicit(&vm->run.idle, memory_order_relaxed))
        vm->policy->offer(&vm->run, &w->sw);
    return true;
}

#endif
