/* analysis/facts.h — a static analyser on the ISA graph (the TFDeploy
 * report's, section 2): dtype, shape and value facts per instruction output,
 * propagated forward and backward to a fixpoint through loops and calls,
 * and the definite conflicts they prove (docs/check.md). It computes known
 * values with the CPU kernels, so it sits above devices/ and loader/, and
 * every front end finishes its program through it (an_program_finish). */
#ifndef TFVM_ANALYSIS_FACTS_H
#define TFVM_ANALYSIS_FACTS_H

#include "devices/value.h"
#include "isa/isa.h"
#include "loader/loader.h"

/* What is known of every live token an output sends. Unknown parts are
 * "top"; an output that never sends a live token (a SWITCH side a known
 * predicate never takes, what only such a side feeds) is `none`. */
typedef struct isa_fact {
    bool none;                    /* no live token ever: nothing else is meaningful */
    uint8_t dtype;                /* tfvm_dtype; 0 = unknown */
    int8_t rank;                  /* -1 = unknown; 0 = scalar */
    int64_t dims[TFVM_MAX_RANK];  /* per dim < rank: its size, -1 = unknown (`?`) */
    dev_value value;              /* dtype 0 = unknown; else the one value (scalar
                                     or a tensor of at most ISA_FACTS_MAX_VALUE elements) */
} isa_fact;

/* Values are tracked for scalars and tensors up to this many elements: what
 * shape computations need (SHAPE, CONCAT of dims, RESHAPE targets), and small
 * enough that evaluating an op on them costs nothing at load time. */
#define ISA_FACTS_MAX_VALUE 64

/* A definite conflict: instruction `inst` fails whenever it fires on a live
 * token (forward facts only, never an assumption of a later consumer).
 * `always` when it fires on every run of an entry that reaches it
 * unconditionally (no SWITCH, loop body or function body in between). */
typedef struct isa_conflict {
    uint32_t inst;
    tfvm_status code;             /* TFVM_ERR_SHAPE, TFVM_ERR_TYPE, TFVM_ERR_ARITH, ... */
    bool always;
    char msg[240];                /* "inner dims differ: f32[64, 784] @ f32[512, 10]" */
} isa_conflict;

typedef struct isa_facts {
    const isa_program *p;
    tfvm_allocator alloc;
    uint32_t *first;              /* per instruction: index of its output 0 in out[] */
    isa_fact *out;                /* per output port */
    uint32_t n_out;
    isa_conflict *conflicts;
    uint32_t n_conflicts, cap_conflicts;
    uint32_t rounds;              /* forward/backward rounds until nothing changed */
    uint32_t passes;              /* forward passes over the graph, all rounds */
} isa_facts;

/* Analyses p (verified) into *F. TFVM_ERR_NOMEM when memory runs out (with
 * nothing left allocated); conflicts are results, not errors. */
tfvm_status isa_facts_analyse(const isa_program *p, const tfvm_allocator *a, isa_facts *F, tfvm_error *err);
void isa_facts_free(isa_facts *F);
/* The fact of output `k` of instruction i. */
static inline const isa_fact *isa_facts_of(const isa_facts *F, uint32_t i, uint32_t k)
{
    return &F->out[F->first[i] + k];
}

/* The fact of instruction i's input port k: the join of its producers'
 * outputs (a constant operand: that constant's). Release it with
 * isa_fact_release. */
void isa_facts_input(const isa_facts *F, uint32_t i, uint32_t k, isa_fact *out);
void isa_fact_release(isa_fact *f);
/* The integers of f's known value (a scalar or a vector of at most max):
 * how many, or -1 when it is unknown or not integers. */
int isa_fact_ints(const isa_fact *f, int64_t *out, int max);

/* "f32[64, ?]", "i32" (a scalar), "f32[..]" (unknown rank), "?" (nothing
 * known), "none" (never live). */
const char *isa_fact_str(const isa_fact *f, char *buf, size_t size);
/* The known value in NumPy's form ("[1, 8, 1, 1]", "3", "2.5"), "" if none. */
const char *isa_fact_value_str(const isa_fact *f, char *buf, size_t size);

/* How the CPU backend computes instruction i, a CONV2D, FUSED_CONV2D,
 * MAXPOOL or AVGPOOL without a conflict whose operands' shapes are known (a
 * batch dim may not be), on `threads` threads: the kernels' own plan
 * (devices/cpu/convplan.h) in words into buf; "" for any other instruction.
 * analysis/plan.c. Returns buf. */
const char *an_kernel_plan(const isa_facts *F, uint32_t i, unsigned threads, char *buf, size_t size);

/* The load-time check (loader/api.c, after verification): the first conflict
 * of an instruction that runs unconditionally and whose shapes conflict,
 * as TFVM_ERR_SHAPE "NAME: LABEL (OP): message"; TFVM_OK when there is none
 * (a program is never rejected for what it might do). */
tfvm_status isa_facts_check(const isa_program *p, const tfvm_allocator *a, tfvm_error *err);

/* Every front end's last step (.tfvm and .tfasm in front/load.c, .tfg in
 * compiler/api.c, the importers in import/api.c): when st is TFVM_OK and
 * `check`, the load-time check (isa_facts_check), then ld_program_finish.
 * (check false: tfvm_open_options.unchecked, for `tfvm check`.) */
tfvm_status an_program_finish(tfvm_program *p, tfvm_status st, bool check, tfvm_program **out, tfvm_error *err);

#endif
