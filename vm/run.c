/* vm/run.c — the firing loop: contexts and their lifetimes, token delivery and
 * matching (explicit token store), firing, workers (inline successor, deques,
 * stealing, parking, termination), results and the diagnosis of a stuck run.
 * Control instructions are in control.c.
 *
 * Matching without locks: each matched instruction owns, in its region's
 * contexts, one claim bit per input port and a status word. A token first
 * claims its port (a second token for the port finds the bit set: a program
 * error), then writes its value slot, then counts itself in the status word;
 * the token that makes the count complete fires the instruction, and the
 * acquire/release order of the count makes every slot visible to it. In the
 * deterministic mode the same words are read and written without atomic
 * read-modify-writes (one thread, no lock prefix). */
#include "vm.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devices/place.h"

#define MERGE_FIRED (1ull << 63)
#define SPINS_BEFORE_PARK 2000
#define PEAK_SAMPLE 1024 /* parallel mode: sample the live-context total every N creations */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Read-modify-write on matching words: atomic in parallel mode, plain (but
 * still through the atomic type, relaxed) in the deterministic mode. */
static inline uint64_t word_or(bool par, _Atomic uint64_t *p, uint64_t v)
{
    if (par)
        return atomic_fetch_or_explicit(p, v, memory_order_relaxed);
    uint64_t o = atomic_load_explicit(p, memory_order_relaxed);
    atomic_store_explicit(p, o | v, memory_order_relaxed);
    return o;
}

static inline uint64_t word_add(bool par, _Atomic uint64_t *p, uint64_t v)
{
    if (par)
        return atomic_fetch_add_explicit(p, v, memory_order_acq_rel);
    uint64_t o = atomic_load_explicit(p, memory_order_relaxed);
    atomic_store_explicit(p, o + v, memory_order_relaxed);
    return o;
}

static inline _Atomic uint64_t *claim_word(const vm_ctx *c, const vm_iplan *ip, uint32_t port)
{
    return &c->words[ip->match + port / 64];
}
static inline _Atomic uint64_t *status_word(const vm_ctx *c, const vm_iplan *ip)
{
    return &c->words[ip->match + (ip->ports + 63) / 64];
}
static inline bool port_claimed(const vm_ctx *c, const vm_iplan *ip, uint32_t port)
{
    return atomic_load_explicit(claim_word(c, ip, port), memory_order_relaxed) & (1ull << (port % 64));
}

/* ---- Errors ------------------------------------------------------------------ */

void vm_fail(tfvm_vm *vm, tfvm_status code, const vm_ctx *ctx, uint32_t inst, const char *fmt, ...)
{
    pthread_mutex_lock(&vm->err_lock);
    if (atomic_load(&vm->state) == VM_FAILED) {
        pthread_mutex_unlock(&vm->err_lock);
        return;
    }
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tfvm_error *e = &vm->err;
    e->code = code;
    e->instr[0] = e->tag[0] = '\0';
    if (inst != ISA_NONE) {
        isa_inst_label(vm->prog, inst, e->instr, sizeof e->instr);
        if (ctx)
            vm_tag_str(vm, ctx, e->tag, sizeof e->tag);
        ut_fmt(e->message, sizeof e->message, "%s (%s) at %s: %s", e->instr, isa_ops[vm->prog->insts[inst].op].name,
               ctx ? e->tag : "[]", msg);
    } else {
        ut_fmt(e->message, sizeof e->message, "%s", msg);
    }
    atomic_store(&vm->state, VM_FAILED);
    atomic_store(&vm->done, 1); /* every worker stops */
    pthread_mutex_unlock(&vm->err_lock);
    if (vm->cfg.log)
        vm->cfg.log(vm->cfg.log_ud, TFVM_LOG_ERROR, e->message);
}

/* ---- Tags -------------------------------------------------------------------- */

void vm_format_tag(const tfvm_vm *vm, const vm_ctx *ctx, ut_buf *out)
{
    const isa_program *p = vm->prog;
    size_t depth = 0;
    for (const vm_ctx *c = ctx; c && c->kind != VM_CTX_ROOT; c = c->parent)
        depth++;
    ut_buf_append(out, "[", 1);
    /* Outermost first: walk from the root down by repeatedly finding the
     * ancestor at each depth (tags are short; this keeps no allocation). */
    for (size_t d = depth; d > 0; d--) {
        const vm_ctx *c = ctx;
        for (size_t k = 1; k < d; k++)
            c = c->parent;
        if (d != depth)
            ut_buf_append(out, ", ", 2);
        if (c->kind == VM_CTX_CALL)
            ut_buf_printf(out, "%s@%u", p->regions[p->sites[c->elem].callee].name, p->sites[c->elem].id);
        else
            ut_buf_printf(out, "%s#%llu", p->regions[c->elem].name, (unsigned long long)c->iter);
    }
    ut_buf_append(out, "]", 1);
}

/* Appends the text of a printf format to buf[*len..size); false once it no
 * longer fits (then buf holds what fitted). */
static bool tag_put(char *buf, size_t size, size_t *len, const char *fmt, ...) UT_PRINTF(4, 5);
static bool tag_put(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size - *len) {
        *len = size - 1;
        return false;
    }
    *len += (size_t)n;
    return true;
}

/* Formats straight into buf, without allocating: it runs inside vm_fail,
 * also when memory has run out. A tag that does not fit ends in "...". */
const char *vm_tag_str(const tfvm_vm *vm, const vm_ctx *ctx, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    const isa_program *p = vm->prog;
    size_t depth = 0, len = 0;
    buf[0] = '\0';
    for (const vm_ctx *c = ctx; c && c->kind != VM_CTX_ROOT; c = c->parent)
        depth++;
    bool fits = tag_put(buf, size, &len, "[");
    for (size_t d = depth; d > 0 && fits; d--) {
        const vm_ctx *c = ctx;
        for (size_t k = 1; k < d; k++)
            c = c->parent;
        if (d != depth)
            fits = tag_put(buf, size, &len, ", ");
        if (!fits)
            break;
        if (c->kind == VM_CTX_CALL)
            fits = tag_put(buf, size, &len, "%s@%u", p->regions[p->sites[c->elem].callee].name, p->sites[c->elem].id);
        else
            fits = tag_put(buf, size, &len, "%s#%llu", p->regions[c->elem].name, (unsigned long long)c->iter);
    }
    if (fits)
        fits = tag_put(buf, size, &len, "]");
    if (!fits && size > 4)
        memcpy(buf + size - 4, "...", 4);
    return buf;
}

/* ---- Contexts ------------------------------------------------------------------ */

static int64_t live_total(const tfvm_vm *vm)
{
    int64_t n = 0;
    for (uint32_t i = 0; i < vm->n_workers; i++)
        n += atomic_load_explicit(&vm->w[i].live, memory_order_relaxed);
    return n;
}

/* Tracks the peak of live contexts and enforces max_contexts: exactly in the
 * deterministic mode; in parallel mode max_contexts is checked against the
 * sum of the workers' counts on every creation, and without a limit the peak
 * is sampled. */
static bool note_created(vm_worker *w)
{
    tfvm_vm *vm = w->vm;
    int64_t mine = atomic_load_explicit(&w->live, memory_order_relaxed) + 1;
    atomic_store_explicit(&w->live, mine, memory_order_relaxed); /* only this thread writes it */
    w->st.contexts_created++;
    int64_t total = mine;
    if (vm->parallel) {
        /* a limit is checked on every context; the peak alone is sampled */
        if (!vm->cfg.max_contexts && w->st.contexts_created % PEAK_SAMPLE)
            return true;
        total = live_total(vm);
    }
    long long peak = atomic_load_explicit(&vm->live_peak, memory_order_relaxed);
    while (total > peak && !atomic_compare_exchange_weak(&vm->live_peak, &peak, total))
        ;
    if (vm->cfg.max_contexts && (uint64_t)total > vm->cfg.max_contexts) {
        vm_fail(vm, TFVM_ERR_LIMIT, NULL, ISA_NONE, "more than %llu live contexts (max_contexts)",
                (unsigned long long)vm->cfg.max_contexts);
        return false;
    }
    return true;
}

static UT_INLINE vm_ctx *ctx_new(vm_worker *w, vm_ctx *parent, uint32_t region, vm_ctx_kind kind, uint32_t elem)
{
    tfvm_vm *vm = w->vm;
    const vm_rplan *rp = &vm->plan.regions[region];
    vm_ctx *c = w->free_ctx[region];
    vm_ctx *block_link;
    if (c) {
        w->free_ctx[region] = c->parent;
        block_link = c->next_block;
    } else {
        c = ut_alloc(&vm->alloc, rp->ctx_size);
        if (!c) {
            vm_fail(vm, TFVM_ERR_NOMEM, NULL, ISA_NONE, "out of memory creating a context");
            return NULL;
        }
        block_link = w->blocks;
        w->blocks = c;
    }
    memset(c, 0, rp->ctx_size);
    c->next_block = block_link;
    c->parent = parent;
    c->region = region;
    c->kind = (uint8_t)kind;
    c->elem = elem;
    c->live = 1;
    c->serial = (w->st.contexts_created << 10) | w->id;
    atomic_store_explicit(&c->owner, w->id, memory_order_relaxed);
    c->slots = (dev_value *)(c + 1);
    c->children = (_Atomic(void *) *)(c->slots + rp->n_slots);
    c->words = (_Atomic uint64_t *)(c->children + rp->n_children);
    if (kind == VM_CTX_CALL)
        vm_ctx_ref(w, parent);
    if (!note_created(w)) {
        vm_ctx_discard(w, c);
        return NULL;
    }
    return c;
}

vm_ctx *vm_ctx_new(vm_worker *w, vm_ctx *parent, uint32_t region, vm_ctx_kind kind, uint32_t elem)
{
    return ctx_new(w, parent, region, kind, elem);
}

void vm_ctx_recycle(vm_worker *w, vm_ctx *c)
{
    c->live = 0;
    atomic_store_explicit(&w->live, atomic_load_explicit(&w->live, memory_order_relaxed) - 1, memory_order_relaxed);
    c->parent = w->free_ctx[c->region];
    w->free_ctx[c->region] = c;
}

void vm_ctx_discard(vm_worker *w, vm_ctx *c)
{
    vm_ctx *parent = c->kind == VM_CTX_CALL ? c->parent : NULL;
    vm_ctx_recycle(w, c);
    if (parent)
        vm_ctx_unref(w, parent);
}

/* A context whose last reference went; returns the context that loses a
 * reference because of it. */
static vm_ctx *ctx_release(vm_worker *w, vm_ctx *c)
{
    vm_ctx *next = NULL;
    switch (c->kind) {
    case VM_CTX_CALL:
        atomic_store_explicit(&c->parent->children[c->child], NULL, memory_order_relaxed);
        next = c->parent;
        vm_ctx_recycle(w, c);
        break;
    case VM_CTX_ITER:
        next = vm_iter_release(w, c);
        break;
    default:
        vm_ctx_recycle(w, c);
        break;
    }
    return next;
}

void vm_ctx_unref(vm_worker *w, vm_ctx *c)
{
    while (c) {
        unsigned old;
        if (vm_ctx_atomic(w, c)) {
            old = atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel);
        } else {
            old = atomic_load_explicit(&c->refs, memory_order_relaxed);
            atomic_store_explicit(&c->refs, old - 1, memory_order_relaxed);
        }
        if (old != 1)
            return;
        c = ctx_release(w, c);
    }
}

/* ---- Queues ------------------------------------------------------------------- */

static void wake_one(tfvm_vm *vm)
{
    pthread_mutex_lock(&vm->park_lock);
    vm->wake_seq++;
    pthread_cond_signal(&vm->park_cond);
    pthread_mutex_unlock(&vm->park_lock);
}

static void wake_all(tfvm_vm *vm)
{
    pthread_mutex_lock(&vm->park_lock);
    vm->wake_seq++;
    pthread_cond_broadcast(&vm->park_cond);
    pthread_mutex_unlock(&vm->park_lock);
}

/* Moves an activation into the worker's private stack. In parallel mode
 * thieves only see what the worker donates to its deque (donate), so the
 * common push and pop cost no fence. */
static bool enqueue(vm_worker *w, const vm_act *a)
{
    tfvm_vm *vm = w->vm;
    if (w->n_stack == w->cap_stack) {
        if (w->lo_stack) { /* donated from the bottom: slide down first */
            memmove(w->stack, w->stack + w->lo_stack, (w->n_stack - w->lo_stack) * sizeof *w->stack);
            w->n_stack -= w->lo_stack;
            w->lo_stack = 0;
        }
        if (w->n_stack == w->cap_stack) {
            size_t cap = w->cap_stack ? w->cap_stack * 2 : 256;
            vm_act *s = ut_realloc(&vm->alloc, w->stack, w->cap_stack * sizeof *s, cap * sizeof *s);
            if (!s)
                return false;
            w->stack = s;
            w->cap_stack = cap;
        }
    }
    w->stack[w->n_stack++] = *a;
    return true;
}

/* Parallel mode, every DONATE_EVERY firings (about 0.1 ms), when some worker
 * is idle and nothing waits in the deque: the oldest private activation (the
 * biggest piece of work, depth-first) goes to the deque, where thieves take
 * it, and a parked worker is woken for it. Not more often: in a program with
 * little parallelism the owner takes most donations back itself, and each
 * round trip costs two fences (and a wake-up two system calls). */
#define DONATE_EVERY 8192

static inline void maybe_donate(vm_worker *w)
{
    tfvm_vm *vm = w->vm;
    if (w->n_stack == w->lo_stack || ++w->since_donate < DONATE_EVERY)
        return;
    w->since_donate = 0;
    if (!atomic_load_explicit(&vm->idle, memory_order_relaxed) || dq_size(&w->dq) > 0)
        return;
    if (!dq_push(&w->dq, (const sched_item *)(const void *)&w->stack[w->lo_stack]))
        return; /* no memory for the deque: keep it */
    if (++w->lo_stack == w->n_stack)
        w->lo_stack = w->n_stack = 0;
    if (atomic_load_explicit(&vm->sleepers, memory_order_relaxed))
        wake_one(vm);
}

/* The newest activation waits in `next` and runs right after the current
 * firing (no queue round trip on a linear chain); an older one moves to the
 * queue. The order is exactly LIFO. */
/* A reference on ctx for something new (an activation, a partial match).
 * In the deterministic mode that is the firing activation's own, when it is
 * on ctx and still unclaimed: nothing else runs before the firing ends, so
 * the context stays alive for the rest of it. Not in parallel mode: the new
 * activation may be stolen and finish first, and the firing still uses ctx. */
static inline void take_ref(vm_worker *w, vm_ctx *ctx)
{
    if (ctx == w->held && w->spare && !w->vm->parallel) /* for partial matches: see push for activations */
        w->spare = false;
    else
        vm_ctx_ref(w, ctx);
}

/* An activation's reference: the firing's own, lent, when the new
 * activation is on the firing's context and the reference is unclaimed. The
 * activation then waits in `next` (or, pushed down by a newer one, in the
 * private stack), which no other worker sees before the firing ends. */
static UT_INLINE bool push(vm_worker *w, vm_ctx *ctx, uint32_t inst, uint32_t aux, const dev_value *v, bool owned)
{
    if (w->has_next) {
        /* A lent reference may move with it: the private stack is not seen
         * by other workers before this firing ends (maybe_donate runs
         * between firings). */
        if (!enqueue(w, &w->next)) {
            dev_value dropped = v ? *v : (dev_value){0};
            dev_value_release(&dropped);
            dev_value_release(&w->next.v);
            w->has_next = false; /* the run fails; teardown frees every context */
            vm_fail(w->vm, TFVM_ERR_NOMEM, ctx, inst, "out of memory queueing an activation");
            return false;
        }
    }
    if (!owned) {
        if (ctx == w->held && w->spare) {
            w->spare = false; /* lent */
        } else {
            vm_ctx_ref(w, ctx);
        }
    }
    /* Field by field into place: building a vm_act on the stack and copying
     * it made the copy's wide loads wait on the narrow stores (a store
     * forwarding stall that cost more than the rest of the push). */
    w->next.ctx = ctx;
    w->next.inst = inst;
    w->next.aux = aux;
    if (v)
        w->next.v = *v;
    else
        w->next.v = (dev_value){0};
    w->has_next = true;
    return true;
}

bool vm_push(vm_worker *w, vm_ctx *ctx, uint32_t inst, uint32_t aux, const dev_value *v, bool owned)
{
    return push(w, ctx, inst, aux, v, owned);
}

/* ---- Tokens --------------------------------------------------------------------- */

static void port_error(vm_worker *w, vm_ctx *c, uint32_t inst, uint32_t port, dev_value *v, bool unref)
{
    dev_value_release(v);
    vm_fail(w->vm, TFVM_ERR_PORT, c, inst, "two tokens for input %u at one tag", port);
    if (unref)
        vm_ctx_unref(w, c);
}

/* MERGE: fires on its first live input; on all-dead once every input is in.
 * Later tokens are absorbed. Only presence is recorded (claim bits). The
 * partial match's reference is the one of the first token that did not fire
 * it; it goes when the MERGE fires. */
static void merge_arrive(vm_worker *w, vm_ctx *c, uint32_t inst, uint32_t port, dev_value v)
{
    tfvm_vm *vm = w->vm;
    bool par = vm_ctx_atomic(w, c);
    const vm_iplan *ip = &vm->plan.insts[inst];
    /* Deterministic mode (and a context private to this worker): a token for the firing activation's own context
     * needs no reference of its own while it is delivered (the activation
     * holds the context). Parallel mode: every token takes a reference
     * before its arrival is counted, and that reference becomes the partial
     * match's when the token is the first; counting first and referencing
     * after let a completing token on another thread use a reference that
     * did not exist yet, and free the context under its owner. */
    bool held = !par && c == w->held;
    if (!held)
        vm_ctx_ref_as(c, par);
    uint64_t bit = 1ull << (port % 64);
    if (word_or(par, claim_word(c, ip, port), bit) & bit) {
        port_error(w, c, inst, port, &v, !held);
        return;
    }
    _Atomic uint64_t *st = status_word(c, ip);
    uint64_t s = atomic_load_explicit(st, memory_order_relaxed), ns;
    for (;;) {
        ns = s + 1;
        if (!(s & MERGE_FIRED) && (!v.dead || ((s & ~MERGE_FIRED) + 1 == ip->ports)))
            ns |= MERGE_FIRED;
        if (!par) {
            atomic_store_explicit(st, ns, memory_order_relaxed);
            break;
        }
        if (atomic_compare_exchange_weak_explicit(st, &s, ns, memory_order_acq_rel, memory_order_relaxed))
            break;
    }
    bool partial_before = (s & ~MERGE_FIRED) > 0 && !(s & MERGE_FIRED);
    if (s & MERGE_FIRED) { /* absorbed: a MERGE never fires twice at one tag */
        dev_value_release(&v);
        if (!held)
            vm_ctx_unref(w, c);
    } else if (ns & MERGE_FIRED) {
        w->st.matches++;
        if (partial_before) { /* the activation takes the partial match's reference */
            push(w, c, inst, port, &v, true);
            if (!held)
                vm_ctx_unref(w, c);
        } else {
            push(w, c, inst, port, &v, !held); /* the token's reference, or a new one */
        }
    } else if (!partial_before) {
        if (held)
            take_ref(w, c); /* the partial match holds its context */
        /* else the token's reference is the partial match's */
    } else if (!held) {
        vm_ctx_unref(w, c);
    }
}

static UT_INLINE void deliver(vm_worker *w, vm_ctx *c, uint32_t inst, uint32_t port, dev_value v)
{
    tfvm_vm *vm = w->vm;
    const vm_iplan *ip = &vm->plan.insts[inst];
    w->st.tokens++;
    if (!ip->matched) {
        /* RETURN dispatch by call site (docs/isa.md, "Implementation freedom"):
         * a token of activation t.C(s') is only for the RETURNs of s'. */
        if (ip->op == ISA_RETURN && (c->kind != VM_CTX_CALL || c->elem != ip->k)) {
            dev_value_release(&v);
            return;
        }
        push(w, c, inst, 0, &v, false);
        return;
    }
    if (ip->op == ISA_MERGE) {
        merge_arrive(w, c, inst, port, v);
        return;
    }
    bool par = vm_ctx_atomic(w, c);
    bool held = !par && c == w->held; /* see merge_arrive */
    if (!held)
        vm_ctx_ref_as(c, par);
    uint64_t bit = 1ull << (port % 64);
    if (word_or(par, claim_word(c, ip, port), bit) & bit) {
        port_error(w, c, inst, port, &v, !held);
        return;
    }
    c->slots[ip->slot + port] = v;
    uint64_t n = word_add(par, status_word(c, ip), 1) + 1;
    if (n == 1) {
        if (held)
            take_ref(w, c); /* the partial match holds its context */
        return;             /* else the token's reference is the partial match's */
    }
    if (n == ip->need) {
        w->st.matches++;
        push(w, c, inst, 0, NULL, true); /* takes the partial match's reference */
    }
    if (!held)
        vm_ctx_unref(w, c);
}

void vm_send(vm_worker *w, vm_ctx *ctx, uint32_t inst, uint32_t out, const dev_value *v)
{
    tfvm_vm *vm = w->vm;
    const vm_iplan *ip = &vm->plan.insts[inst];
    const isa_edge *e = vm->prog->edges;
    uint32_t first = ip->out_at[out], end = ip->out_at[out + 1];
    if (vm_failed(vm))
        return;
    for (uint32_t k = first; k < end; k++) {
        dev_value copy = *v;
        dev_value_retain(&copy);
        deliver(w, ctx, e[k].inst, e[k].port, copy);
    }
}

/* ---- Firing ----------------------------------------------------------------------- */

static void fire_result(vm_worker *w, const vm_act *a, dev_value *v)
{
    tfvm_vm *vm = w->vm;
    uint32_t k = vm->prog->insts[a->inst].a;
    if (atomic_exchange(&vm->result_set[k], 1)) {
        vm_fail(vm, TFVM_ERR_PORT, a->ctx, a->inst, "result %u produced twice", k);
        return;
    }
    if (v->is_tensor) { /* the caller gets host memory, and may write it */
        char msg[256];
        tfvm_status st = dev_vm_result(vm->dev, v, msg, sizeof msg);
        if (st != TFVM_OK) {
            vm_fail(vm, st, a->ctx, a->inst, "%s", msg);
            return;
        }
    }
    vm->results[k] = *v;
    v->is_tensor = 0; /* moved */
}

/* Compute instructions: kernels on the inputs; a dead input makes the
 * output dead. */
static void fire_compute(vm_worker *w, const vm_act *a, dev_value *inputs, bool dead)
{
    tfvm_vm *vm = w->vm;
    const isa_inst *in = &vm->prog->insts[a->inst];
    dev_value out = dev_dead();
    if (!dead) {
        char msg[256];
        tfvm_status st = dev_vm_fire(vm->dev, in, inputs, &out, msg, sizeof msg); /* devices/place.h */
        if (st != TFVM_OK) {
            vm_fail(vm, st, a->ctx, a->inst, "%s", msg);
            return;
        }
    }
    vm_send(w, a->ctx, a->inst, 0, &out);
    dev_value_release(&out);
}

/* Most data inputs of a compute instruction (STRIDED_SLICE's 5). */
#define VM_MAX_IN 5

/* Everything but the few instructions fire() handles inline. */
static void fire_general(vm_worker *w, vm_act *a, const vm_iplan *ip)
{
    tfvm_vm *vm = w->vm;
    const isa_inst *in = &vm->prog->insts[a->inst];
    vm_ctx *c = a->ctx;
    dev_value inputs[VM_MAX_IN] = {{0}};
    bool dead = false;

    if (!ip->matched || ip->op == ISA_MERGE) {
        inputs[ip->imm == 0] = a->v;
        dead = a->v.dead;
    } else {
        dev_value *s = &c->slots[ip->slot];
        for (uint32_t p = 0; p < ip->ports; p++) {
            dead |= s[p].dead;
            if (p < in->n_in && p < VM_MAX_IN)
                inputs[p] = s[p];
            else
                dev_value_release(&s[p]);
            s[p] = (dev_value){0};
        }
    }
    if (ip->imm >= 0) {
        inputs[ip->imm] = vm->consts[in->b];
        dev_value_retain(&inputs[ip->imm]);
    }
    switch (ip->cls) {
    case ISA_CLASS_SOURCE:
        if (ip->op == ISA_ARG) {
            vm_send(w, c, a->inst, 0, &inputs[0]);
        } else {
            dev_value v = dead ? dev_dead() : vm->consts[in->a];
            vm_send(w, c, a->inst, 0, &v);
        }
        break;
    case ISA_CLASS_SINK:
        fire_result(w, a, &inputs[0]);
        break;
    case ISA_CLASS_CONTROL:
        vm_fire_control(w, a, inputs);
        break;
    default:
        fire_compute(w, a, inputs, dead);
        break;
    }
    for (int i = 0; i < VM_MAX_IN; i++)
        dev_value_release(&inputs[i]);
}

/* Scalar arithmetic and comparison on two live integer or float scalars of
 * one dtype, without the kernel library's generality (the kernels define
 * the results: integers wrap; this path leaves division, modulo and
 * everything else to them). False: not that case, nothing consumed. */
static UT_INLINE bool fire_scalar(vm_worker *w, vm_act *a, const vm_iplan *ip)
{
    tfvm_vm *vm = w->vm;
    dev_value x, y;
    dev_value *s = NULL;
    if (!ip->matched) {
        if (ip->imm < 0)
            return false;
        x = a->v;
        y = vm->consts[ip->k];
        if (ip->imm == 0) {
            dev_value t = x;
            x = y;
            y = t;
        }
    } else {
        if (ip->ports != 2)
            return false;
        s = &a->ctx->slots[ip->slot];
        x = s[0];
        y = s[1];
    }
    if (x.dead || y.dead || x.is_tensor || y.is_tensor || x.dtype != y.dtype)
        return false;
    dev_value r = {.dtype = x.dtype};
    bool cmp = false;
    switch (x.dtype) {
#define INT_CASES(T, U, F)                                                                        \
    switch (ip->op) {                                                                             \
    case ISA_ADD: r.u.F = (T)((U)x.u.F + (U)y.u.F); break;                                        \
    case ISA_SUB: r.u.F = (T)((U)x.u.F - (U)y.u.F); break;                                        \
    case ISA_MUL: r.u.F = (T)((U)x.u.F * (U)y.u.F); break;                                        \
    case ISA_MIN: r.u.F = x.u.F < y.u.F ? x.u.F : y.u.F; break;                                   \
    case ISA_MAX: r.u.F = x.u.F > y.u.F ? x.u.F : y.u.F; break;                                   \
    case ISA_LESS: cmp = true, r.u.b = x.u.F < y.u.F; break;                                      \
    case ISA_LESS_EQUAL: cmp = true, r.u.b = x.u.F <= y.u.F; break;                               \
    case ISA_GREATER: cmp = true, r.u.b = x.u.F > y.u.F; break;                                   \
    case ISA_GREATER_EQUAL: cmp = true, r.u.b = x.u.F >= y.u.F; break;                            \
    case ISA_EQUAL: cmp = true, r.u.b = x.u.F == y.u.F; break;                                    \
    case ISA_NOT_EQUAL: cmp = true, r.u.b = x.u.F != y.u.F; break;                                \
    default: return false;                                                                        \
    }                                                                                             \
    break;
    case TFVM_I32: INT_CASES(int32_t, uint32_t, i32)
    case TFVM_I64: INT_CASES(int64_t, uint64_t, i64)
#undef INT_CASES
    default:
        return false;
    }
    if (cmp)
        r.dtype = TFVM_BOOL;
    if (s)
        s[0] = s[1] = (dev_value){0};
    vm_send(w, a->ctx, a->inst, 0, &r);
    return true;
}

/* CALL of a site's only CALL: nobody else looks for the callee or races to
 * make it, and a dead token needs no context to say "dead" (each RETURN of
 * the site says it once, in the caller). */
static UT_INLINE void fire_call_one(vm_worker *w, const vm_act *a, const vm_iplan *ip)
{
    tfvm_vm *vm = w->vm;
    const isa_inst *in = &vm->prog->insts[a->inst];
    vm_ctx *c = a->ctx;
    if (a->v.dead) {
        const vm_splan *sp = &vm->plan.sites[in->a];
        dev_value dead = dev_dead();
        for (uint32_t k = 0; k < sp->n_returns; k++)
            vm_send(w, c, sp->returns[k], 0, &dead);
        return;
    }
    if (atomic_load_explicit(&c->children[ip->child], memory_order_relaxed)) {
        vm_fail(vm, TFVM_ERR_PORT, c, a->inst, "two tokens for input 0 at one tag");
        return;
    }
    vm_ctx *callee = ctx_new(w, c, vm->prog->sites[in->a].callee, VM_CTX_CALL, in->a);
    if (!callee)
        return;
    callee->child = ip->child;
    callee->entered = VM_ENTERED_LIVE;
    callee->arrived = 1;
    atomic_store_explicit(&callee->refs, 1, memory_order_relaxed); /* held while the token goes in */
    atomic_store_explicit(&c->children[ip->child], callee, memory_order_release);
    vm_send(w, callee, a->inst, 0, &a->v);
    vm_ctx_unref(w, callee);
}

/* One activation. The commonest instructions of recursive and looping code
 * (moves, RETURN, SWITCH on a scalar predicate) take a short path here; the
 * rest go through fire_general. */
static UT_INLINE void fire(vm_worker *w, vm_act *a)
{
    tfvm_vm *vm = w->vm;
    const vm_iplan *ip = &vm->plan.insts[a->inst];
    vm_ctx *c = a->ctx;

    w->st.fired++;
    w->held = c;
    w->spare = true;
    switch (ip->op) {
    case ISA_IDENTITY:
    case ISA_LOOPCOND:
        vm_send(w, c, a->inst, 0, &a->v);
        dev_value_release(&a->v);
        break;
    case ISA_RETURN:
        vm_send(w, c->parent, a->inst, 0, &a->v);
        dev_value_release(&a->v);
        break;
    case ISA_CALL:
        if (vm->plan.sites[vm->prog->insts[a->inst].a].n_call == 1)
            fire_call_one(w, a, ip);
        else
            vm_fire_call(w, a, &a->v);
        dev_value_release(&a->v);
        break;
    case ISA_BRANCH: {
        /* the commonest case inline: a live i32 against an i32 constant */
        const isa_inst *in = &vm->prog->insts[a->inst];
        const dev_value *k = &vm->consts[in->b];
        if (a->v.dead || a->v.is_tensor || a->v.dtype != TFVM_I32 || k->dtype != TFVM_I32) {
            vm_fire_branch(w, a, &a->v);
            dev_value_release(&a->v);
            break;
        }
        int32_t x = a->v.u.i32, y = k->u.i32;
        bool taken;
        switch ((isa_op)in->a) {
        case ISA_LESS: taken = x < y; break;
        case ISA_LESS_EQUAL: taken = x <= y; break;
        case ISA_GREATER: taken = x > y; break;
        case ISA_GREATER_EQUAL: taken = x >= y; break;
        case ISA_EQUAL: taken = x == y; break;
        default: taken = x != y; break;
        }
        vm_route(w, c, a->inst, in->flags, taken, &a->v);
        break;
    }
    case ISA_CONST:
        if (ip->matched) { /* several control inputs */
            fire_general(w, a, ip);
        } else {
            dev_value v = a->v.dead ? dev_dead() : vm->consts[vm->prog->insts[a->inst].a];
            vm_send(w, c, a->inst, 0, &v);
            dev_value_release(&a->v);
        }
        break;
    case ISA_SWITCH: {
        dev_value *s = &c->slots[ip->slot];
        dev_value d = s[0], p = s[1];
        if (ip->ports != 2 || d.dead || p.dead || p.is_tensor || p.dtype != TFVM_BOOL) {
            fire_general(w, a, ip); /* dead, a bad predicate, or control inputs */
            break;
        }
        s[0] = s[1] = (dev_value){0};
        uint32_t taken = p.u.b ? 1 : 0;
        vm_route(w, c, a->inst, vm->prog->insts[a->inst].flags, taken, &d);
        dev_value_release(&d);
        break;
    }
    case ISA_ADD:
    case ISA_SUB:
    case ISA_MUL:
    case ISA_MIN:
    case ISA_MAX:
    case ISA_LESS:
    case ISA_LESS_EQUAL:
    case ISA_GREATER:
    case ISA_GREATER_EQUAL:
    case ISA_EQUAL:
    case ISA_NOT_EQUAL:
        if (!fire_scalar(w, a, ip))
            fire_general(w, a, ip);
        break;
    default:
        fire_general(w, a, ip);
        break;
    }
    w->held = NULL;
    if (w->spare)
        vm_ctx_unref(w, c);
}

/* ---- Workers ------------------------------------------------------------------------ */

static inline bool take_local(vm_worker *w, vm_act *a)
{
    if (w->has_next) {
        /* field by field, matching how vm_push stored them (a wide copy
         * would stall on store forwarding) */
        a->ctx = w->next.ctx;
        a->inst = w->next.inst;
        a->aux = w->next.aux;
        a->v = w->next.v;
        w->has_next = false;
        w->inline_runs++;
        return true;
    }
    if (w->n_stack > w->lo_stack) {
        *a = w->stack[--w->n_stack];
        if (w->n_stack == w->lo_stack)
            w->lo_stack = w->n_stack = 0;
        return true;
    }
    if (w->vm->parallel)
        return dq_pop(&w->dq, (sched_item *)(void *)a);
    return false;
}

static bool any_work(const tfvm_vm *vm)
{
    for (uint32_t i = 0; i < vm->n_workers; i++)
        if (dq_size(&vm->w[i].dq) > 0)
            return true;
    return false;
}

/* Out of local work: steal, spin, park. Returns false when the run is over:
 * every worker idle means no token is in flight anywhere (a worker only goes
 * idle with an empty queue, and idle workers make no tokens), so quiescence
 * is detected without any lock on the firing path. */
static bool find_work(vm_worker *w, vm_act *a)
{
    tfvm_vm *vm = w->vm;
    uint32_t n = vm->n_workers;
    /* Idle: nothing of ours is half-updated, so sharing needs no answer. */
    atomic_store_explicit(&w->busy, 0, memory_order_seq_cst);
    vm_serve_shares(w);
    if (atomic_fetch_add(&vm->idle, 1) + 1 == n) {
        atomic_store(&vm->done, 1);
        wake_all(vm);
        return false;
    }
    for (unsigned spins = 0;; spins++) {
        if (atomic_load_explicit(&vm->done, memory_order_acquire))
            return false;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t vi = (w->victim + k) % n; /* the last victim first, then the next ones */
            vm_worker *v = &vm->w[vi];
            if (v == w || dq_size(&v->dq) == 0)
                continue;
            atomic_fetch_sub(&vm->idle, 1); /* not idle while holding stolen work */
            int r = dq_steal(&v->dq, (sched_item *)(void *)a);
            if (r == DQ_OK) {
                /* busy again: requests made while idle are read now */
                atomic_store_explicit(&w->busy, 1, memory_order_seq_cst);
                vm_serve_shares_as(w, memory_order_seq_cst);
                w->st.steals++;
                w->victim = vi;
                return true;
            }
            if (atomic_fetch_add(&vm->idle, 1) + 1 == n) {
                atomic_store(&vm->done, 1);
                wake_all(vm);
                return false;
            }
        }
        if (spins < SPINS_BEFORE_PARK)
            continue;
        spins = 0;
        /* Park until a push wakes us (or a bounded wait passes: a wake-up
         * that raced our going to sleep costs at most that long). */
        pthread_mutex_lock(&vm->park_lock);
        atomic_fetch_add(&vm->sleepers, 1);
        uint64_t seq = vm->wake_seq;
        if (!any_work(vm) && !atomic_load(&vm->done)) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += 1000000;
            if (until.tv_nsec >= 1000000000) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000;
            }
            w->parks++;
            while (seq == vm->wake_seq && !atomic_load(&vm->done))
                if (pthread_cond_timedwait(&vm->park_cond, &vm->park_lock, &until) != 0)
                    break;
        }
        atomic_fetch_sub(&vm->sleepers, 1);
        pthread_mutex_unlock(&vm->park_lock);
    }
}

/* ---- Sharing contexts (vm_ctx_atomic) ------------------------------------------------ */

/* One turn of waiting for another worker: answer our own requests (it may
 * be waiting for us), and after a while give the core away: with more
 * workers than cores the one we wait for may not be running at all. */
static void share_wait(vm_worker *w, unsigned spins)
{
    vm_serve_shares(w);
    if (spins >= 64)
        sched_yield();
}

bool vm_ctx_share(vm_worker *w, vm_ctx *c)
{
    tfvm_vm *vm = w->vm;
    uint32_t owner = atomic_load_explicit(&c->owner, memory_order_acquire);
    for (;;) {
        if (owner == VM_CTX_SHARED)
            return true;
        if (owner & VM_CTX_SHARING) { /* another worker's handshake (or ours to answer) */
            for (unsigned spins = 0; atomic_load_explicit(&c->owner, memory_order_acquire) != VM_CTX_SHARED; spins++)
                share_wait(w, spins);
            return true;
        }
        if (atomic_compare_exchange_weak_explicit(&c->owner, &owner, owner | VM_CTX_SHARING, memory_order_seq_cst,
                                                  memory_order_acquire))
            break;
    }
    w->shares++;
    vm_worker *o = &vm->w[owner];
    unsigned req = atomic_fetch_add_explicit(&o->share_req, 1, memory_order_seq_cst) + 1;
    /* An idle owner runs nothing, and sees the flag when it runs again
     * (leaving find_work fences). While waiting, answer others: the owner
     * may be waiting for us. */
    for (unsigned spins = 0; (int)(atomic_load_explicit(&o->share_ack, memory_order_acquire) - req) < 0 &&
                             atomic_load_explicit(&o->busy, memory_order_seq_cst);
         spins++)
        share_wait(w, spins);
    atomic_store_explicit(&c->owner, VM_CTX_SHARED, memory_order_release);
    return true;
}

/* ---- Profiling ------------------------------------------------------------------------ */

static inline uint64_t ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
#endif
}

tfvm_status vm_profile(tfvm_vm *vm, bool on)
{
    size_t n = 2 * (size_t)vm->prog->n_insts + 2;
    for (uint32_t i = 0; vm->w && i < vm->n_workers; i++) {
        vm_worker *w = &vm->w[i];
        if (w->prof) {
            ut_free(&vm->alloc, w->prof, n * sizeof *w->prof);
            w->prof = NULL;
        }
        if (on && !(w->prof = ut_calloc(&vm->alloc, n, sizeof *w->prof))) {
            vm_profile(vm, false);
            return TFVM_ERR_NOMEM;
        }
    }
    vm->profiling = on;
    vm->prof_t0 = vm->prof_t1 = 0;
    return TFVM_OK;
}

void vm_profile_read(const tfvm_vm *vm, uint64_t *count, double *ns)
{
    uint32_t n = vm->prog->n_insts;
    /* ticks to nanoseconds: the clock against the tick counter over the run */
    double scale = vm->prof_t1 > vm->prof_t0 ? (vm->prof_s1 - vm->prof_s0) * 1e9 / (double)(vm->prof_t1 - vm->prof_t0)
                                             : 0;
    for (uint32_t i = 0; i < n; i++) {
        count[i] = 0;
        ns[i] = 0;
        for (uint32_t k = 0; k < vm->n_workers; k++)
            if (vm->w[k].prof) {
                count[i] += vm->w[k].prof[2 * i];
                ns[i] += (double)vm->w[k].prof[2 * i + 1] * scale;
            }
    }
}

static UT_INLINE void fire_maybe_timed(vm_worker *w, vm_act *a, bool timed)
{
    if (!timed) {
        fire(w, a);
        return;
    }
    uint32_t i = a->inst;
    uint64_t t = ticks();
    fire(w, a);
    w->prof[2 * i]++;
    w->prof[2 * i + 1] += ticks() - t;
}

static UT_INLINE void worker_loop_as(vm_worker *w, bool timed)
{
    tfvm_vm *vm = w->vm;
    vm_act a;
    for (;;) {
        uint32_t k = 0;
        while (take_local(w, &a)) {
            fire_maybe_timed(w, &a, timed);
            vm_serve_shares(w);
            maybe_donate(w);
            if (++k == 1024) {
                k = 0;
                if (atomic_load_explicit(&vm->interrupted, memory_order_relaxed) &&
                    atomic_exchange(&vm->interrupted, 0))
                    vm_fail(vm, TFVM_ERR_INTERRUPTED, NULL, ISA_NONE, "interrupted");
                if (atomic_load_explicit(&vm->done, memory_order_relaxed))
                    return;
            }
        }
        if (atomic_load_explicit(&vm->done, memory_order_relaxed) || !find_work(w, &a))
            return;
        fire_maybe_timed(w, &a, timed);
        vm_serve_shares(w);
        maybe_donate(w);
    }
}

static void worker_loop(vm_worker *w)
{
    atomic_store(&w->busy, 1);
    vm_serve_shares_as(w, memory_order_seq_cst);
    if (w->vm->profiling)
        worker_loop_as(w, true);
    else
        worker_loop_as(w, false);
    atomic_store(&w->busy, 0);
    vm_serve_shares(w);
}

static void *worker_main(void *arg)
{
    vm_worker *w = arg;
    if (w->vm->topo)
        sched_topo_pin(w->vm->topo, w->id);
    worker_loop(w);
    return NULL;
}

/* Parallel mode: worker 0 is the calling thread, the others are started
 * for the run. */
static void run_parallel(tfvm_vm *vm)
{
    uint32_t started = 1;
    for (uint32_t i = 1; i < vm->n_workers; i++) {
        if (pthread_create(&vm->w[i].thread, NULL, worker_main, &vm->w[i]) != 0)
            break;
        started++;
    }
    if (started < vm->n_workers) /* fewer threads: the termination count must match */
        atomic_fetch_add(&vm->idle, vm->n_workers - started);
    worker_loop(&vm->w[0]);
    for (uint32_t i = 1; i < started; i++)
        pthread_join(vm->w[i].thread, NULL);
}

vm_state vm_step(tfvm_vm *vm, uint64_t max)
{
    int state = atomic_load(&vm->state);
    if (state != VM_RUNNING && state != VM_PAUSED)
        return (vm_state)state;
    atomic_store(&vm->state, VM_RUNNING);
    if (vm->parallel) {
        run_parallel(vm);
        if (!vm_failed(vm))
            atomic_store(&vm->state, VM_DONE);
        return (vm_state)atomic_load(&vm->state);
    }
    vm_worker *w = &vm->w[0];
    uint64_t n = 0;
    vm_act a;
    if (!vm->hook && !vm->has_paused && max == 0) {
        /* A plain run: the loop of worker_loop, without the checks a
         * debugger needs on every firing. */
        bool timed = vm->profiling;
        for (;;) {
            if (atomic_load_explicit(&vm->interrupted, memory_order_relaxed) && atomic_exchange(&vm->interrupted, 0)) {
                vm_fail(vm, TFVM_ERR_INTERRUPTED, NULL, ISA_NONE, "interrupted");
                break;
            }
            if (timed)
                for (uint32_t k = 0; k < 1024 && take_local(w, &a); k++)
                    fire_maybe_timed(w, &a, true);
            else
                for (uint32_t k = 0; k < 1024 && take_local(w, &a); k++)
                    fire(w, &a);
            if (vm_failed(vm))
                break;
            if (!w->has_next && !w->n_stack) {
                atomic_store(&vm->state, VM_DONE);
                break;
            }
        }
        return (vm_state)atomic_load(&vm->state);
    }
    while (max == 0 || n < max) {
        if (atomic_load_explicit(&vm->interrupted, memory_order_relaxed) && atomic_exchange(&vm->interrupted, 0)) {
            vm_fail(vm, TFVM_ERR_INTERRUPTED, NULL, ISA_NONE, "interrupted");
            break;
        }
        if (vm->has_paused) {
            a = vm->paused;
            vm->has_paused = false;
        } else {
            if (!take_local(w, &a)) {
                atomic_store(&vm->state, VM_DONE);
                break;
            }
            if (vm->hook && vm->hook(vm->hook_ud, vm, &a)) {
                vm->paused = a;
                vm->has_paused = true;
                atomic_store(&vm->state, VM_PAUSED);
                return VM_PAUSED;
            }
        }
        fire(w, &a);
        n++;
        if (vm_failed(vm))
            break;
    }
    return (vm_state)atomic_load(&vm->state);
}

/* ---- Runs ---------------------------------------------------------------------------- */

static bool type_matches(const isa_param *p, const tfvm_value *v)
{
    if (v->tensor)
        return p->rank == ISA_RANK_ANY && tfvm_tensor_dtype(v->tensor) == p->dtype;
    return p->rank == 0 && v->dtype == p->dtype;
}

static void describe_type(const isa_param *p, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s", tfvm_dtype_name((tfvm_dtype)p->dtype), p->rank == 0 ? "" : "[]");
}

static void describe_value_type(const tfvm_value *v, char *buf, size_t size)
{
    if (v->tensor)
        snprintf(buf, size, "%s tensor", tfvm_dtype_name(tfvm_tensor_dtype(v->tensor)));
    else
        snprintf(buf, size, "%s", tfvm_dtype_name(v->dtype));
}

static dev_value from_api(const tfvm_value *v)
{
    dev_value d = {.dtype = (uint8_t)v->dtype};
    if (v->tensor) {
        d.is_tensor = 1;
        d.dtype = (uint8_t)tfvm_tensor_dtype(v->tensor);
        d.u.t = tfvm_tensor_ref(v->tensor);
        return d;
    }
    switch (v->dtype) {
    case TFVM_BOOL: d.u.b = v->as.b; break;
    case TFVM_I32: d.u.i32 = v->as.i32; break;
    case TFVM_I64: d.u.i64 = v->as.i64; break;
    case TFVM_F32: d.u.f32 = v->as.f32; break;
    case TFVM_F64: d.u.f64 = v->as.f64; break;
    case TFVM_U8: d.u.u8 = v->as.u8; break;
    case TFVM_I8: d.u.i8 = v->as.i8; break;
    }
    return d;
}

static void teardown(tfvm_vm *vm);

static bool run_in_progress(const tfvm_vm *vm)
{
    uint64_t ctxs, loops;
    vm_count_live(vm, &ctxs, &loops);
    return vm->root || vm->results || ctxs || loops;
}

tfvm_status vm_begin(tfvm_vm *vm, uint32_t entry, const tfvm_value *args, size_t n_args)
{
    const isa_program *p = vm->prog;
    const isa_entry *en = &p->entries[entry];
    /* A previous run that was stepped but never ended (a debugger that
     * stopped early) is discarded, so that nothing of it leaks. */
    if (run_in_progress(vm))
        teardown(vm);
    ut_err_clear(&vm->err);
    memset(&vm->stats, 0, sizeof vm->stats);
    for (uint32_t i = 0; i < vm->n_workers; i++) {
        memset(&vm->w[i].st, 0, sizeof vm->w[i].st);
        vm->w[i].parks = vm->w[i].inline_runs = vm->w[i].shares = 0;
    }
    atomic_store(&vm->live_peak, 0);
    atomic_store(&vm->idle, 0);
    atomic_store(&vm->done, 0);
    atomic_store(&vm->state, VM_RUNNING);
    atomic_store(&vm->interrupted, 0);
    vm->has_paused = false;
    vm->entry = entry;
    vm->t_start = now_seconds();
    if (vm->profiling && !vm->prof_t0) {
        vm->prof_t0 = ticks();
        vm->prof_s0 = vm->t_start;
    }

    if (n_args != en->n_params) {
        atomic_store(&vm->state, VM_FAILED);
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "entry '%s' takes %u argument%s, got %zu", en->name,
                      en->n_params, en->n_params == 1 ? "" : "s", n_args);
    }
    for (size_t i = 0; i < n_args; i++) {
        if (!type_matches(&en->params[i], &args[i])) {
            char want[32], got[32];
            describe_type(&en->params[i], want, sizeof want);
            describe_value_type(&args[i], got, sizeof got);
            atomic_store(&vm->state, VM_FAILED);
            return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "argument %zu '%s' of entry '%s': expected %s, got %s", i + 1,
                          en->params[i].name, en->name, want, got);
        }
    }
    vm->results = ut_calloc(&vm->alloc, en->n_results + 1, sizeof(dev_value));
    vm->result_set = ut_calloc(&vm->alloc, en->n_results + 1, 1);
    if (!vm->results || !vm->result_set) {
        teardown(vm);
        atomic_store(&vm->state, VM_FAILED);
        return ut_err(&vm->err, TFVM_ERR_NOMEM, "out of memory starting a run");
    }
    vm_worker *w = &vm->w[0];
    vm->root = vm_ctx_new(w, NULL, en->region, VM_CTX_ROOT, 0);
    if (!vm->root) {
        tfvm_status st = vm->err.code;
        teardown(vm);
        return st;
    }
    atomic_store(&vm->root->refs, 1); /* the run's own hold, dropped in vm_end */
    /* Sources fire once at the root tag: every ARG, and CONSTs without
     * control inputs. Pushed in order, so the LIFO fires the last first:
     * each source's work runs depth first, and the first ARG's last. A
     * function called with several arguments then has them all before its
     * body runs on the first one (which usually decides the recursion):
     * in the other order, an argument that is only passed along would wait
     * at the bottom of the stack while the whole recursion ran, holding
     * every context it made. */
    const vm_rplan *rp = &vm->plan.regions[en->region];
    for (uint32_t i = rp->first; i < rp->end && !vm_failed(vm); i++) {
        const isa_inst *in = &p->insts[i];
        if (in->op == ISA_ARG) {
            dev_value v = from_api(&args[in->a]);
            vm_push(w, vm->root, i, 0, &v, false); /* takes v, even when it fails */
        } else if (in->op == ISA_CONST && in->n_ctl == 0) {
            vm_push(w, vm->root, i, 0, NULL, false);
        }
    }
    return vm_failed(vm) ? vm->err.code : TFVM_OK;
}

static void to_api(const dev_value *d, tfvm_value *v)
{
    memset(v, 0, sizeof *v);
    v->dtype = (tfvm_dtype)d->dtype;
    if (d->is_tensor) {
        v->tensor = d->u.t;
        return;
    }
    switch (d->dtype) {
    case TFVM_BOOL: v->as.b = d->u.b; break;
    case TFVM_I32: v->as.i32 = d->u.i32; break;
    case TFVM_I64: v->as.i64 = d->u.i64; break;
    case TFVM_F32: v->as.f32 = d->u.f32; break;
    case TFVM_F64: v->as.f64 = d->u.f64; break;
    case TFVM_U8: v->as.u8 = d->u.u8; break;
    case TFVM_I8: v->as.i8 = d->u.i8; break;
    }
}

void vm_count_live(const tfvm_vm *vm, uint64_t *contexts, uint64_t *loops)
{
    *contexts = *loops = 0;
    for (uint32_t i = 0; vm->w && i < vm->n_workers; i++) {
        for (const vm_ctx *c = vm->w[i].blocks; c; c = c->next_block)
            *contexts += c->live;
        for (const vm_loop *l = vm->w[i].loops; l; l = l->next_block)
            *loops += l->live;
    }
}

vm_loop *vm_any_live_loop(const tfvm_vm *vm)
{
    for (uint32_t i = 0; i < vm->n_workers; i++)
        for (vm_loop *l = vm->w[i].loops; l; l = l->next_block)
            if (l->live)
                return l;
    return NULL;
}

static int by_serial(const void *a, const void *b)
{
    const vm_ctx *x = *(const vm_ctx *const *)a, *y = *(const vm_ctx *const *)b;
    return x->serial < y->serial ? -1 : x->serial > y->serial;
}

static void diagnose_ctx(tfvm_vm *vm, vm_ctx *c, ut_buf *out, size_t *n_waiting)
{
    const isa_program *p = vm->prog;
    const vm_rplan *rp = &vm->plan.regions[c->region];
    for (uint32_t i = rp->first; i < rp->end; i++) {
        const isa_inst *in = &p->insts[i];
        const vm_iplan *ip = &vm->plan.insts[i];
        if (!ip->matched)
            continue;
        uint64_t s = atomic_load(status_word(c, ip));
        if ((s & ~MERGE_FIRED) == 0 || (s & MERGE_FIRED) || (in->op != ISA_MERGE && (s & ~MERGE_FIRED) >= ip->need))
            continue;
        char label[128];
        if ((*n_waiting)++)
            ut_buf_append(out, "; ", 2);
        ut_buf_printf(out, "%s (%s) at ", isa_inst_label(p, i, label, sizeof label), isa_ops[in->op].name);
        vm_format_tag(vm, c, out);
        for (int has = 1; has >= 0; has--) {
            ut_buf_printf(out, has ? " has input" : ", missing input");
            const char *sep = " ";
            for (uint32_t k = 0; k < ip->ports; k++)
                if ((int)k != ip->imm && port_claimed(c, ip, k) == (has == 1)) {
                    ut_buf_printf(out, "%s%u", sep, k);
                    sep = ", ";
                }
        }
    }
}

/* Names the instructions holding partial matches, for a stuck run: oldest
 * context first, instructions in program order. */
static void diagnose(tfvm_vm *vm, ut_buf *out, size_t *n_waiting)
{
    *n_waiting = 0;
    uint64_t n_ctx, n_loops;
    vm_count_live(vm, &n_ctx, &n_loops);
    vm_ctx **all = ut_calloc(&vm->alloc, n_ctx + 1, sizeof *all);
    size_t n = 0;
    for (uint32_t wi = 0; wi < vm->n_workers; wi++)
        for (vm_ctx *c = vm->w[wi].blocks; c; c = c->next_block)
            if (c->live) {
                if (all)
                    all[n++] = c;
                else
                    diagnose_ctx(vm, c, out, n_waiting); /* no memory to sort: any order */
            }
    if (!all)
        return;
    qsort(all, n, sizeof *all, by_serial);
    for (size_t k = 0; k < n; k++)
        diagnose_ctx(vm, all[k], out, n_waiting);
    ut_free(&vm->alloc, all, (n_ctx + 1) * sizeof *all);
}

static tfvm_status check_results(tfvm_vm *vm)
{
    const isa_entry *en = &vm->prog->entries[vm->entry];
    for (uint32_t k = 0; k < en->n_results; k++) {
        const dev_value *r = &vm->results[k];
        if (atomic_load(&vm->result_set[k]) && r->dead) {
            vm_fail(vm, TFVM_ERR_STUCK, NULL, ISA_NONE,
                    "result %u '%s' of entry '%s' received a dead token (no branch produced it)", k,
                    en->results[k].name, en->name);
            return vm->err.code;
        }
        if (atomic_load(&vm->result_set[k]))
            continue;
        ut_buf b; /* through the VM's allocator; if it fails the list reads "?" */
        ut_buf_init(&b, &vm->alloc);
        size_t n;
        diagnose(vm, &b, &n);
        ut_buf_append(&b, "", 1);
        const char *list = b.failed ? "?" : (const char *)b.data;
        if (n)
            vm_fail(vm, TFVM_ERR_STUCK, NULL, ISA_NONE, "run stuck: result %u '%s' never arrived; waiting: %s", k,
                    en->results[k].name, list);
        else
            vm_fail(vm, TFVM_ERR_STUCK, NULL, ISA_NONE,
                    "run stuck: result %u '%s' never arrived, and no instruction holds a partial match", k,
                    en->results[k].name);
        ut_buf_free(&b);
        return vm->err.code;
    }
    return TFVM_OK;
}

static void drop_act(void *ud, const void *item)
{
    (void)ud;
    vm_act a;
    memcpy(&a, item, sizeof a);
    dev_value_release(&a.v);
}

/* Frees every context, loop and queued activation of the run (one thread:
 * the workers have stopped). Context and loop memory stays with the
 * workers for the next run. */
static void teardown(tfvm_vm *vm)
{
    for (uint32_t i = 0; i < vm->n_workers; i++) {
        vm_worker *w = &vm->w[i];
        if (w->has_next)
            dev_value_release(&w->next.v);
        w->has_next = false;
        if (vm->parallel) {
            dq_each(&w->dq, drop_act, NULL);
            vm_act a;
            while (dq_pop(&w->dq, (sched_item *)(void *)&a))
                ;
        }
        for (size_t k = w->lo_stack; k < w->n_stack; k++)
            dev_value_release(&w->stack[k].v);
        w->n_stack = w->lo_stack = 0;
    }
    if (vm->has_paused) {
        dev_value_release(&vm->paused.v);
        vm->has_paused = false;
    }
    for (uint32_t i = 0; i < vm->n_workers; i++) {
        vm_worker *w = &vm->w[i];
        for (vm_loop *l = w->loops; l; l = l->next_block)
            if (l->live)
                vm_loop_destroy(&vm->w[0], l);
        for (vm_ctx *c = w->blocks; c; c = c->next_block) {
            if (!c->live)
                continue;
            const vm_rplan *rp = &vm->plan.regions[c->region];
            for (uint32_t k = 0; k < rp->n_slots; k++)
                dev_value_release(&c->slots[k]);
            vm_ctx_recycle(w, c);
        }
        atomic_store(&w->live, 0);
    }
    if (vm->results) {
        const isa_entry *en = &vm->prog->entries[vm->entry];
        for (uint32_t k = 0; k < en->n_results; k++)
            dev_value_release(&vm->results[k]);
        ut_free(&vm->alloc, vm->results, (en->n_results + 1) * sizeof(dev_value));
        vm->results = NULL;
    }
    if (vm->result_set) {
        ut_free(&vm->alloc, vm->result_set, vm->prog->entries[vm->entry].n_results + 1);
        vm->result_set = NULL;
    }
    vm->root = NULL;
}

static void sum_stats(tfvm_vm *vm)
{
    tfvm_stats *s = &vm->stats;
    memset(s, 0, sizeof *s);
    for (uint32_t i = 0; i < vm->n_workers; i++) {
        const tfvm_stats *t = &vm->w[i].st;
        s->fired += t->fired;
        s->tokens += t->tokens;
        s->matches += t->matches;
        s->contexts_created += t->contexts_created;
        s->steals += t->steals;
        s->parks += vm->w[i].parks;
        s->inline_runs += vm->w[i].inline_runs;
        s->shared += vm->w[i].shares;
    }
    s->workers = vm->n_workers;
    s->contexts_peak = (uint64_t)atomic_load(&vm->live_peak);
}

tfvm_status vm_end(tfvm_vm *vm, tfvm_value *results, size_t n_results)
{
    const isa_entry *en = &vm->prog->entries[vm->entry];
    tfvm_status st = TFVM_OK;
    int state = atomic_load(&vm->state);
    if (state == VM_DONE) {
        st = check_results(vm);
        if (st == TFVM_OK && n_results != en->n_results)
            vm_fail(vm, st = TFVM_ERR_ARGUMENT, NULL, ISA_NONE, "entry '%s' has %u result%s, caller asked for %zu",
                    en->name, en->n_results, en->n_results == 1 ? "" : "s", n_results);
        if (st == TFVM_OK) {
            for (uint32_t k = 0; k < en->n_results; k++) {
                to_api(&vm->results[k], &results[k]);
                vm->results[k].is_tensor = 0; /* ownership moved to the caller */
            }
        }
    } else if (state == VM_FAILED) {
        st = vm->err.code;
    } else if (state == VM_RUNNING || state == VM_PAUSED) {
        st = ut_err(&vm->err, TFVM_ERR_INTERRUPTED, "run abandoned before it finished");
    }
    if (vm->root && !vm_failed(vm)) {
        vm_ctx *root = vm->root;
        vm->root = NULL;
        vm_ctx_unref(&vm->w[0], root);
    }
    sum_stats(vm);
    teardown(vm);
    vm->stats.wall_seconds = now_seconds() - vm->t_start;
    if (vm->profiling) {
        vm->prof_t1 = ticks();
        vm->prof_s1 = now_seconds();
    }
    atomic_store(&vm->state, st == TFVM_OK ? VM_IDLE : VM_FAILED);
    return st;
}
