/* tfvm_debug.h — inspecting programs and runs: the one instruction printer,
 * source positions, runs stepped under a hook, the ready list, live contexts
 * with their tags, partial matches, the FEED/FETCH channels' queues, value
 * formatting and firing counters.
 * What `tfvm debug`, `tfvm dot` and `tfvm profile` are built on. */
#ifndef TFVM_DEBUG_H
#define TFVM_DEBUG_H

#include "tfvm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Programs ------------------------------------------------------------
 * Instructions are numbered 0 .. tfvm_program_inst_count() - 1. */
typedef struct tfvm_inst_info {
    const char *op;          /* opcode name, "ADD" */
    const char *name;        /* debug name, or NULL */
    const char *region;      /* the entry, function or loop body it belongs to */
    const char *region_kind; /* "entry", "func" or "loop" */
    const char *op_class;    /* "source" (ARG, CONST), "sink" (RESULT), "control"
                                (routing and tags) or "compute" */
    const char *synopsis;    /* what the opcode does, one line */
    uint32_t attr;           /* ARG, RESULT: the index; CALL, RETURN: the call site
                                (tfvm_program_site); ENTER, EXIT: the loop's region */
    int const_port;          /* the data input that is a constant operand, or -1 */
    bool enter_const;        /* ENTER const: the value reaches every iteration */
    bool prune_false, prune_true; /* SWITCH, BRANCH: that output sends no token at all */
    uint32_t region_index;   /* tfvm_program_region */
    uint32_t n_in, n_ctl, n_out;  /* inputs: data ports 0..n_in-1, then control ports */
    uint32_t n_edges;        /* tfvm_program_edges */
    uint32_t line, col;      /* source position; 0 = unknown */
    /* The model's node the instruction came from, for a program imported
     * from ONNX or TensorFlow (kept in the .tfvm file): its name
     * ("/m/encoder/Cast_1", the ONNX node's name or its first output's when
     * it has none; the TF NodeDef's name) and op type ("Cast"); NULL when
     * not known (.tfg and .tfasm programs, instructions the optimizer made
     * from several nodes). Run-time errors name it first: "node
     * '/m/encoder/Cast_1' (Cast): cast_0_0_1 (CAST) at []: ...". */
    const char *origin, *origin_op;
} tfvm_inst_info;

TFVM_API size_t tfvm_program_inst_count(const tfvm_program *p);
/* TFVM_ERR_ARGUMENT when i is out of range. Strings live as long as p. */
TFVM_API tfvm_status tfvm_program_inst(const tfvm_program *p, uint32_t i, tfvm_inst_info *out);
/* Regions: an entry's body, a function's, a loop's (inside its parent). */
typedef struct tfvm_region_info {
    const char *name;
    const char *kind;        /* "entry", "func" or "loop" */
    uint32_t parent;         /* a loop's enclosing region; UINT32_MAX otherwise */
    int entry;               /* an entry's body: the entry's index; -1 otherwise */
    uint32_t first_inst, end_inst; /* its instructions: first_inst .. end_inst - 1 */
} tfvm_region_info;
TFVM_API size_t tfvm_program_region_count(const tfvm_program *p);
TFVM_API tfvm_status tfvm_program_region(const tfvm_program *p, uint32_t r, tfvm_region_info *out);
/* Where instruction i's outputs go: output `out` feeds input `port` of
 * instruction `inst`. Fills up to max edges, returns how many there are. */
typedef struct tfvm_edge_info {
    uint32_t out, inst, port;
} tfvm_edge_info;
TFVM_API size_t tfvm_program_edges(const tfvm_program *p, uint32_t i, tfvm_edge_info *out, size_t max);
/* Source variables (the .tfvm variable table, docs/format.md): output `out`
 * of instruction `inst` carries values of the source's variable `name` (a
 * .tfg let, var, parameter or loop variable; an ONNX or TensorFlow tensor).
 * A name may have several records (each definition; a loop variable's ENTER
 * and NEXTITER). Its tokens live in region `region`: the callee for a CALL,
 * the loop for an ENTER, the loop's parent for an EXIT, else the
 * instruction's own. Records are in instruction order. */
typedef struct tfvm_var_info {
    const char *name;        /* lives as long as the program */
    uint32_t inst, out;
    uint32_t region;
} tfvm_var_info;
TFVM_API size_t tfvm_program_var_count(const tfvm_program *p);
/* TFVM_ERR_ARGUMENT when j is out of range. */
TFVM_API tfvm_status tfvm_program_var(const tfvm_program *p, size_t j, tfvm_var_info *out);
/* Call sites: site s calls function region `callee`; printed "fib@2" (id 2). */
typedef struct tfvm_site_info {
    uint32_t id;
    uint32_t callee;
} tfvm_site_info;
TFVM_API size_t tfvm_program_site_count(const tfvm_program *p);
TFVM_API tfvm_status tfvm_program_site(const tfvm_program *p, uint32_t s, tfvm_site_info *out);
/* "fib@2": call site 2 of fib, not fib(2). Returns buf. */
TFVM_API const char *tfvm_site_label(const tfvm_program *p, uint32_t s, char *buf, size_t size);
/* Opcode names, for completion and lookups: NULL past the last. */
TFVM_API const char *tfvm_op_name(size_t k);
/* The source file the instructions' line:col refer to, or NULL. */
TFVM_API const char *tfvm_program_source(const tfvm_program *p);
/* The one instruction printer (dis, dot, the debugger, errors): instruction
 * i as `tfvm dis` writes it, "n_sw = SWITCH (n, p) @12:5", into buf (always
 * terminated when size > 0). Returns the length of the whole text, like
 * snprintf: a return >= size means it was cut. */
TFVM_API size_t tfvm_inst_format(const tfvm_program *p, uint32_t i, char *buf, size_t size);
/* "name" or "%index". Returns buf. */
TFVM_API const char *tfvm_inst_label(const tfvm_program *p, uint32_t i, char *buf, size_t size);
/* "fib.tfg:12:39", "12:39" (file unknown) or "" (position unknown). Returns buf. */
TFVM_API const char *tfvm_inst_where(const tfvm_program *p, uint32_t i, char *buf, size_t size);
/* The whole program as .tfasm text, as `tfvm dis` writes it: *text holds
 * *len bytes and a NUL; free it with tfvm_program_buffer_free(p, *text,
 * *len). */
TFVM_API tfvm_status tfvm_program_disassemble(const tfvm_program *p, char **text, size_t *len, tfvm_error *err);
/* The same text written to path ("-": standard output), as
 * tfvm_program_save_file writes: a file is replaced only once whole. */
TFVM_API tfvm_status tfvm_program_disassemble_file(const tfvm_program *p, const char *path, tfvm_error *err);
/* The program's constants: how many, and (when bytes is not NULL) the bytes
 * of their data. */
TFVM_API size_t tfvm_program_const_count(const tfvm_program *p, size_t *bytes);

/* ---- The static analyser (docs/check.md) -----------------------------------
 * What every live token of each instruction output has in common (dtype,
 * shape, value), and the definite conflicts: instructions that fail whenever
 * they fire. tfvm_program_facts analyses p (TFVM_ERR_NOMEM when memory runs
 * out; conflicts are results, not errors); free with tfvm_facts_free. A
 * program the load-time check refuses opens with tfvm_open_options.unchecked. */
typedef struct tfvm_facts tfvm_facts;
TFVM_API tfvm_status tfvm_program_facts(const tfvm_program *p, tfvm_facts **out, tfvm_error *err);
TFVM_API void tfvm_facts_free(tfvm_facts *f);
/* Instruction i's outputs' facts as `tfvm check` prints them: "f32[2, ?]",
 * "i32 = 5", one per output joined by "; ", "-" for no outputs. */
TFVM_API const char *tfvm_facts_line(const tfvm_facts *f, uint32_t i, char *buf, size_t size);
/* How the CPU backend will compute instruction i when it is a CONV2D,
 * FUSED_CONV2D, MAXPOOL or AVGPOOL whose operands' shapes are known: the
 * kernel and layout its kernels choose, and how they split the work over
 * `threads` threads (0: one per physical core, as tfvm_config.threads),
 * "Winograd F(2x2, 3x3), AVX-512; 2 threads: 4 images in parallel"
 * (docs/check.md lists them); "" for other instructions or unknown shapes.
 * Returns buf. */
TFVM_API const char *tfvm_facts_kernel(const tfvm_facts *f, uint32_t i, int threads, char *buf, size_t size);
/* The conflicts, in instruction order: how many, and conflict k's
 * instruction (its message into *message, valid as long as f). */
TFVM_API size_t tfvm_facts_conflict_count(const tfvm_facts *f);
TFVM_API uint32_t tfvm_facts_conflict(const tfvm_facts *f, size_t k, const char **message);

/* ---- Runs under control ----------------------------------------------------
 * Needs a VM with one thread (tfvm_config.threads = 1, deterministic). A
 * stepped or hooked run fires every instruction through the general dataflow
 * path, so the hook sees every firing (plain runs execute some function
 * bodies and loops as sequential frames, which no hook sees). */
typedef struct tfvm_debug_ctx tfvm_debug_ctx; /* a live context (a tag) */
/* An activation: an instruction ready to fire in a context. Valid during a
 * hook or ready-list callback, and while the run stays paused before it. */
typedef struct tfvm_debug_act tfvm_debug_act;

typedef enum tfvm_debug_state {
    TFVM_DEBUG_IDLE,    /* no run */
    TFVM_DEBUG_RUNNING, /* the step count ran out; more to fire */
    TFVM_DEBUG_PAUSED,  /* the hook paused before a firing (tfvm_debug_paused) */
    TFVM_DEBUG_DONE,    /* nothing left to fire: finished, or stuck (tfvm_debug_end says) */
    TFVM_DEBUG_FAILED   /* a run-time error (tfvm_errmsg) */
} tfvm_debug_state;

/* Called before each firing. Returning true pauses the run before it fires;
 * the next tfvm_debug_step fires it first, without calling the hook again. */
typedef struct tfvm_debug_hook {
    bool (*fn)(void *ud, tfvm_vm *vm, const tfvm_debug_act *act);
    void *ud;
} tfvm_debug_hook;
/* The VM keeps the pointer: *hook must live while set. NULL removes it. */
TFVM_API void tfvm_debug_set_hook(tfvm_vm *vm, const tfvm_debug_hook *hook);

/* Starts a run of entry `entry` (NULL: the first) and fires nothing yet.
 * Its firings follow the deterministic order (depth first), except that a
 * NEXTITER waits while anything else is ready and waiting NEXTITERs fire
 * oldest first: loops run iteration by iteration, 0 first, rather than a
 * loop's counter running ahead to its last iteration (tfvm_run's order).
 * TFVM_ERR_ARGUMENT when the VM has several threads or the entry is unknown. */
TFVM_API tfvm_status tfvm_debug_begin(tfvm_vm *vm, const char *entry, const tfvm_value *args, size_t n_args);
/* Fires up to max activations (0: until the hook pauses or the run ends). */
TFVM_API tfvm_debug_state tfvm_debug_step(tfvm_vm *vm, uint64_t max);
/* Ends the run (whatever its state): its results when it finished (the
 * caller releases them), the stuck or failure status otherwise;
 * TFVM_ERR_ARGUMENT when no run was begun. */
TFVM_API tfvm_status tfvm_debug_end(tfvm_vm *vm, tfvm_value *results, size_t n_results);
/* The activation the hook paused before, or NULL when not paused. */
TFVM_API const tfvm_debug_act *tfvm_debug_paused(const tfvm_vm *vm);
/* Ready activations in firing order (the paused one first); fn may be NULL.
 * Returns how many. */
TFVM_API size_t tfvm_debug_ready(const tfvm_vm *vm, void (*fn)(void *ud, const tfvm_debug_act *act), void *ud);

/* What an input holds: nothing, a live value, or a dead token. */
typedef enum tfvm_debug_token { TFVM_TOKEN_NONE, TFVM_TOKEN_LIVE, TFVM_TOKEN_DEAD } tfvm_debug_token;

TFVM_API uint32_t tfvm_debug_act_inst(const tfvm_debug_act *act);
TFVM_API const tfvm_debug_ctx *tfvm_debug_act_ctx(const tfvm_debug_act *act);
/* MERGE: the input it fires on. */
TFVM_API uint32_t tfvm_debug_act_merge_input(const tfvm_debug_act *act);
/* The value on data input `port` (a MERGE: only its chosen input; an ARG:
 * port 0 is its argument). *out is borrowed: valid while the activation is. */
TFVM_API tfvm_debug_token tfvm_debug_act_input(const tfvm_vm *vm, const tfvm_debug_act *act, uint32_t port,
                                               tfvm_value *out);
/* Whether it fires dead (a dead input makes dead outputs). */
TFVM_API bool tfvm_debug_act_dead(const tfvm_vm *vm, const tfvm_debug_act *act);
/* SWITCH or BRANCH: the output the token goes to (0 false, 1 true), or -1
 * (another opcode, dead, or a predicate it will reject). */
TFVM_API int tfvm_debug_act_way(const tfvm_vm *vm, const tfvm_debug_act *act);
/* The constant of instruction i: a CONST's value, else its constant
 * operand's; false when it has none. *out is borrowed from the VM. */
TFVM_API bool tfvm_debug_inst_const(const tfvm_vm *vm, uint32_t inst, tfvm_value *out);
/* Result k of the run: NONE until it arrives. *out is borrowed. */
TFVM_API tfvm_debug_token tfvm_debug_result(const tfvm_vm *vm, uint32_t k, tfvm_value *out);

/* Whether instruction i gathers several tokens per context (a partial match
 * can hold it); false for one that fires on its one token. */
TFVM_API bool tfvm_debug_inst_matched(const tfvm_vm *vm, uint32_t inst);
/* The counters of the run so far (tfvm_vm_stats has them once it ended). */
TFVM_API void tfvm_debug_stats(const tfvm_vm *vm, tfvm_stats *out);

/* ---- Contexts and tags ---------------------------------------------------- */
/* Every live context, oldest first, into a new array (free it with
 * tfvm_debug_contexts_free). TFVM_ERR_NOMEM when that fails. */
TFVM_API tfvm_status tfvm_debug_contexts(const tfvm_vm *vm, const tfvm_debug_ctx ***out, size_t *n);
TFVM_API void tfvm_debug_contexts_free(const tfvm_vm *vm, const tfvm_debug_ctx **list, size_t n);
/* The tag: "[]", "[fib@2, fib@0]" (fib@2 is call site 2 of fib, not fib(2)),
 * "[main_loop#3]" (iteration 3). Long tags are cut in the middle. Returns buf. */
TFVM_API const char *tfvm_debug_tag(const tfvm_vm *vm, const tfvm_debug_ctx *ctx, char *buf, size_t size);
/* The enclosing context (the tag without its last element), NULL for the root. */
TFVM_API const tfvm_debug_ctx *tfvm_debug_parent(const tfvm_debug_ctx *ctx);
typedef enum tfvm_debug_ctx_kind { TFVM_CTX_ROOT, TFVM_CTX_CALL, TFVM_CTX_ITER } tfvm_debug_ctx_kind;
typedef struct tfvm_debug_ctx_info {
    tfvm_debug_ctx_kind kind;
    uint32_t region;         /* the region whose instructions run in it */
    uint32_t site;           /* CALL: its call site */
    uint64_t iter;           /* ITER: its iteration */
    uint64_t serial;         /* creation order; with tfvm_debug_ctx_alive, its identity */
} tfvm_debug_ctx_info;
TFVM_API void tfvm_debug_ctx_get(const tfvm_debug_ctx *ctx, tfvm_debug_ctx_info *out);
/* Whether ctx is still the live context that had `serial` (contexts are reused). */
TFVM_API bool tfvm_debug_ctx_alive(const tfvm_debug_ctx *ctx, uint64_t serial);
/* Contexts and loop instances alive now. */
TFVM_API void tfvm_debug_live(const tfvm_vm *vm, uint64_t *contexts, uint64_t *loops);

/* Loop instances: the loops a context's region runs have slots 0..n-1; a
 * slot holds an instance once the loop was entered there. */
typedef struct tfvm_debug_loop_info {
    uint32_t frame;          /* the loop's region */
    uint64_t started;        /* iterations created */
    uint64_t live;           /* iterations alive */
    uint32_t deferred;       /* tokens held back by its parallel=N bound */
    uint32_t parallel;       /* that bound */
    uint64_t next;           /* the iteration the held tokens wait for */
} tfvm_debug_loop_info;
TFVM_API uint32_t tfvm_debug_loop_slots(const tfvm_vm *vm, const tfvm_debug_ctx *ctx);
TFVM_API bool tfvm_debug_loop(const tfvm_vm *vm, const tfvm_debug_ctx *ctx, uint32_t slot, tfvm_debug_loop_info *out);
/* Held token j of a slot's instance: the NEXTITER that sent it, its value. */
TFVM_API tfvm_debug_token tfvm_debug_loop_deferred(const tfvm_vm *vm, const tfvm_debug_ctx *ctx, uint32_t slot,
                                                   uint32_t j, uint32_t *inst, tfvm_value *out);

/* ---- Matching: which inputs of an instruction arrived in a context --------- */
typedef enum tfvm_debug_match {
    TFVM_MATCH_NONE,    /* nothing arrived (or the instruction takes one token) */
    TFVM_MATCH_WAITING, /* some inputs arrived, some missing: a partial match */
    TFVM_MATCH_READY,   /* every input arrived: it is on the ready list */
    TFVM_MATCH_FIRED    /* a MERGE that fired in this context */
} tfvm_debug_match;
TFVM_API tfvm_debug_match tfvm_debug_match_state(const tfvm_vm *vm, const tfvm_debug_ctx *ctx, uint32_t inst);
/* Whether input `port` arrived (a constant operand always has). */
TFVM_API bool tfvm_debug_port_arrived(const tfvm_vm *vm, const tfvm_debug_ctx *ctx, uint32_t inst, uint32_t port);
/* The token waiting on an arrived data input (borrowed); a MERGE keeps none. */
TFVM_API tfvm_debug_token tfvm_debug_port_get(const tfvm_vm *vm, const tfvm_debug_ctx *ctx, uint32_t inst,
                                              uint32_t port, tfvm_value *out);
/* The value waiting on an arrived input, formatted as tfvm_value_format does,
 * into buf; false (buf "") when none is held there. */
TFVM_API bool tfvm_debug_port_value(const tfvm_vm *vm, const tfvm_debug_ctx *ctx, uint32_t inst, uint32_t port,
                                    char *buf, size_t size);

/* ---- Channels: what a host feeds and fetches (docs/coexec.md) --------------
 * A program's FEED and FETCH channels are numbered 0 .. tfvm_debug_channels()
 * - 1, in name order. Their queues belong to the run: empty when
 * tfvm_debug_begin starts it, readable while it is paused or stopped, dropped
 * by tfvm_debug_end. A stepped run has no host: a FEED that finds its channel
 * empty fails the run ("channel 'x' waits for value #2, but the host feeds no
 * more values"), so its values are queued with tfvm_debug_feed before it
 * fires. */
typedef struct tfvm_debug_chan_info {
    const char *name;        /* lives as long as the VM */
    bool fetch;              /* FETCH: the graph hands values out; else FEED: it takes them in */
    tfvm_dtype dtype;        /* FEED: the value type its FEEDs declare; FETCH: 0 (any) */
    bool is_tensor;          /* FEED: a tensor of dtype, of any rank */
    uint32_t inst;           /* its first FEED or FETCH instruction */
    size_t queued;           /* FEED: fed, not yet taken; FETCH: made and kept, not yet taken */
    size_t waiting;          /* FEED: firings waiting for a value (only in a session) */
    uint64_t count;          /* values its FEEDs took / its FETCHes made so far (after a
                                run ended: in that run, until the next begins) */
    uint64_t host;           /* values the host fed / took so far (the same) */
} tfvm_debug_chan_info;
TFVM_API size_t tfvm_debug_channels(const tfvm_vm *vm);
/* TFVM_ERR_ARGUMENT when k is out of range. */
TFVM_API tfvm_status tfvm_debug_channel(const tfvm_vm *vm, size_t k, tfvm_debug_chan_info *out);
/* The channel FEED or FETCH instruction i uses, or -1 (another opcode). */
TFVM_API int tfvm_debug_inst_channel(const tfvm_vm *vm, uint32_t inst);
/* Queued value j of channel k, oldest first (j < queued). *out is borrowed:
 * valid until the run fires again or ends. NONE past the end. */
TFVM_API tfvm_debug_token tfvm_debug_chan_value(const tfvm_vm *vm, size_t k, size_t j, tfvm_value *out);
/* The same value formatted as tfvm_value_format does, into buf; false (buf
 * "") past the end. */
TFVM_API bool tfvm_debug_chan_value_format(const tfvm_vm *vm, size_t k, size_t j, char *buf, size_t size);
/* FEED firing j waiting on channel k, oldest first (j < waiting): its context
 * and instruction; false past the end. */
TFVM_API bool tfvm_debug_chan_waiting(const tfvm_vm *vm, size_t k, size_t j, const tfvm_debug_ctx **ctx,
                                      uint32_t *inst);
/* Queues v on FEED channel `name` of the run tfvm_debug_begin started, after
 * the values queued before it; its FEEDs take them in tag order. A tensor is
 * taken by reference: do not change it afterwards. TFVM_ERR_ARGUMENT: no run,
 * no FEED channel of that name ("channel 's' is fetched, not fed"), v NULL,
 * a FEED of the channel waits (a session's: its host feeds with tfvm_feed);
 * TFVM_ERR_TYPE: v is not of the channel's type ("channel 'x' takes i32, got
 * f32"); TFVM_ERR_NOMEM. The message is in tfvm_errmsg, except after the run
 * failed: then TFVM_ERR_ARGUMENT, and tfvm_errmsg keeps the run's error. */
TFVM_API tfvm_status tfvm_debug_feed(tfvm_vm *vm, const char *name, const tfvm_value *v);
/* From now until tfvm_debug_end, the run keeps every value its FETCHes make
 * as queued values of their channel (with no host they are dropped).
 * TFVM_ERR_ARGUMENT when no run was begun. */
TFVM_API tfvm_status tfvm_debug_keep_fetched(tfvm_vm *vm);

/* ---- Values and counters ---------------------------------------------------- */
/* A value as `tfvm run` prints it: scalars "3", "2.5", "true"; tensors
 * NumPy-like, "[[1, 2], [3, 4]]", with more than 1000 elements summarised by
 * their first and last 3 along each axis ("[0, 1, 2, ..., 997, 998, 999]").
 * Returns the length of the whole text, like snprintf. */
TFVM_API size_t tfvm_value_format(const tfvm_value *v, char *buf, size_t size);
/* `tfvm run --stats`'s line on the VM's memory pools and the copies between
 * devices, "devices: host pool 10 hits, 2 misses, 0.1 MB cached; ...", into
 * buf like snprintf; 0 (buf "") while no tensor work has used a pool. */
TFVM_API size_t tfvm_debug_device_stats(const tfvm_vm *vm, char *buf, size_t size);
/* Per-instruction counters: when on, every firing of the general path is
 * counted and timed (turning it on again clears them). NOMEM on failure. */
TFVM_API tfvm_status tfvm_debug_profile(tfvm_vm *vm, bool on);
/* count[i] firings and ns[i] nanoseconds of instruction i over the runs since
 * profiling was turned on; both arrays have tfvm_program_inst_count entries. */
TFVM_API void tfvm_debug_profile_read(const tfvm_vm *vm, uint64_t *count, double *ns);
/* A timeline of firings (`tfvm profile --trace`): while profiling is on,
 * each worker also records every firing, up to max_events per worker (0:
 * off; later firings are counted as dropped). Calling it drops the records
 * kept so far. TFVM_ERR_ARGUMENT for a NULL vm (a worker whose buffer cannot
 * grow drops the firings it cannot record). */
typedef struct tfvm_debug_trace_ev {
    uint32_t worker;         /* the worker thread that fired it, 0 .. workers - 1 */
    uint32_t inst;           /* the instruction */
    double start_ns;         /* from the earliest firing recorded */
    double dur_ns;
    const char *tag;         /* its context's tag, "[main_loop#3]" (cut in the middle when long) */
    const char *inputs;      /* its data inputs' types, "f32[2, 4], i32" ("-": not held, a MERGE's others) */
} tfvm_debug_trace_ev;
TFVM_API tfvm_status tfvm_debug_trace(tfvm_vm *vm, size_t max_events);
/* Hands every recorded firing to fn (worker by worker, in firing order; the
 * strings live during the call), and returns how many there are; *dropped
 * (may be NULL): the firings not recorded. */
TFVM_API size_t tfvm_debug_trace_read(const tfvm_vm *vm, void (*fn)(void *ud, const tfvm_debug_trace_ev *ev),
                                      void *ud, uint64_t *dropped);

#ifdef __cplusplus
}
#endif
#endif
