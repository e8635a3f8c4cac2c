/* vm/seq.c — sequential frames (docs/frames.md): a call of a function body,
 * or an instance of a loop, whose instructions are scalar control and
 * arithmetic (with one worker, tensor work too) runs as a frame of registers
 * instead of contexts and tokens.
 *
 * This file runs the steps that the plan (vm/seq_plan.c) made of each such
 * body. A site's last CALL pushes the callee's frame on a per-worker stack
 * (recursion depth costs memory, not C stack); a loop frame runs its
 * iterations one after the other. It is the graph's own firing rule in an
 * order fixed in advance: the same instructions fire with the same values,
 * and the counters (firings, tokens, matches, contexts) agree with a
 * dataflow run's. */

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/place.h"
#include "seq.h"

/* ---- Frame memory ---------------------------------------------------------------- */

typedef struct seq_chunk {
    struct seq_chunk *prev, *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} seq_chunk;

#define SEQ_CHUNK (256u * 1024u)

/* Chunks form a list; w->seq_mem is the one frames are taken from now.
 * Frames are freed in the reverse order (frames_run), so a chunk whose last
 * frame goes hands back to the one before it; chunks stay for the next call.
 * frame_alloc_next: the current chunk has no room. */
static void *frame_alloc_next(vm_worker *w, size_t bytes)
{
    seq_chunk *c = w->seq_mem;
    seq_chunk *n = c ? c->next : NULL;
    if (n && n->size < bytes) { /* too small: drop it and the ones after it */
        while (n) {
            seq_chunk *next = n->next;
            ut_free(&w->vm->alloc, n, sizeof *n + n->size);
            n = next;
        }
        c->next = NULL;
    }
    if (!n) {
        size_t size = bytes > SEQ_CHUNK ? bytes : SEQ_CHUNK;
        n = ut_alloc(&w->vm->alloc, sizeof *n + size);
        if (!n)
            return NULL;
        n->size = size;
        n->prev = c;
        n->next = NULL;
        if (c)
            c->next = n;
    }
    n->used = bytes;
    w->seq_mem = n;
    return n->data;
}

static inline void *frame_alloc(vm_worker *w, size_t bytes)
{
    seq_chunk *c = w->seq_mem;
    if (c && c->used + bytes <= c->size) {
        void *m = c->data + c->used;
        c->used += bytes;
        return m;
    }
    return frame_alloc_next(w, bytes);
}

static inline void frame_release(vm_worker *w, size_t bytes)
{
    seq_chunk *c = w->seq_mem;
    c->used -= bytes;
    if (c->used == 0 && c->prev)
        w->seq_mem = c->prev;
}

void vm_seq_free(vm_worker *w)
{
    seq_chunk *c = w->seq_mem;
    if (!c)
        return;
    while (c->prev)
        c = c->prev;
    while (c) {
        seq_chunk *next = c->next;
        ut_free(&w->vm->alloc, c, sizeof *c + c->size);
        c = next;
    }
    w->seq_mem = NULL;
}

/* ---- Frames ----------------------------------------------------------------------
 * A frame is one call's registers: a value and a present flag per register.
 * The body's instructions are visited in their order; one whose every input
 * is present fires and writes its outputs' registers; one with none present
 * (the untaken side of a pruned branch) is passed over. A site's last CALL
 * pushes the callee's frame and runs it first; at its end the RETURNs of its
 * site read their producers' registers in it and write their own in the
 * caller's frame (or send their tokens into the dataflow context). The
 * frame's layout is in seq.h (the plan sizes it). */

/* The counters of the steps that fire, kept in the step loop's registers
 * (frames_run adds them to the worker's when it ends). */
typedef struct seq_count {
    uint64_t fired, tokens, matches;
} seq_count;

typedef struct seq_run {
    vm_worker *w;
    tfvm_vm *vm;
    const isa_program *p;
    vm_ctx *ctx;            /* the dataflow context that made the first call */
    bool failed;
    bool counted;           /* the first frame's context was counted (a gathered call) */
    uint32_t polls;         /* firings since the last look at interrupts */
} seq_run;

/* A frame is a context for the counters and the bound. On one worker the
 * count is this worker's alone: inline, no call (ctx.c does the rest). */
static inline bool count_new(vm_worker *w)
{
    tfvm_vm *vm = w->vm;
    if (vm->multi)
        return vm_ctx_count_new(w);
    int64_t live = atomic_load_explicit(&w->live, memory_order_relaxed) + 1;
    atomic_store_explicit(&w->live, live, memory_order_relaxed);
    w->st.contexts_created++;
    if (live > atomic_load_explicit(&vm->live_peak, memory_order_relaxed))
        atomic_store_explicit(&vm->live_peak, live, memory_order_relaxed);
    return (uint64_t)live <= vm->ctx_bound;
}

static inline void count_free(vm_worker *w)
{
    atomic_store_explicit(&w->live, atomic_load_explicit(&w->live, memory_order_relaxed) - 1, memory_order_relaxed);
}

static seq_frame *frame_push_region(seq_run *s, seq_frame *up, const vm_splan *sp, const vm_rplan *rp);

/* Walks the tag of frame f (NULL: of the dataflow context alone): one
 * element per frame, innermost first, then the context's. */
static void frame_walk(const seq_run *s, const seq_frame *f, vm_tag_walk *t)
{
    vm_tag_walk_init(t);
    for (const seq_frame *g = f; g; g = g->up) {
        if (g->loop)
            vm_tag_walk_add(t, false, (uint32_t)(g->rp - s->vm->plan.regions), g->iter);
        else
            vm_tag_walk_add(t, true, (uint32_t)(g->sp - s->vm->plan.sites), 0);
    }
    vm_tag_walk_ctx(t, s->ctx);
}

/* The context bound was exceeded making a frame under `up` (NULL: under the
 * dataflow context): the depth, the innermost call and the tag's ends, in
 * one walk up the frames. */
static void frame_bound_fail(seq_run *s, const seq_frame *up)
{
    vm_tag_walk t;
    frame_walk(s, up, &t);
    vm_ctx_bound_fail(s->vm, &t);
    s->failed = true;
}

static seq_frame *frame_push(seq_run *s, seq_frame *up, uint32_t site)
{
    const vm_splan *sp = &s->vm->plan.sites[site];
    return frame_push_region(s, up, sp, sp->callee_plan);
}

/* A frame could not be made: the context bound, or no memory. */
static seq_frame *frame_push_failed(seq_run *s, seq_frame *up, bool count, bool bound)
{
    if (count)
        count_free(s->w);
    if (bound)
        frame_bound_fail(s, up);
    else {
        vm_fail(s->vm, TFVM_ERR_NOMEM, s->ctx, ISA_NONE, "out of memory creating a context");
        s->failed = true;
    }
    return NULL;
}

static UT_INLINE seq_frame *frame_push_region(seq_run *s, seq_frame *up, const vm_splan *sp, const vm_rplan *rp)
{
    uint32_t n = rp->n_regs, bytes = rp->frame_bytes;
    bool count = up || !s->counted;
    if (count && !count_new(s->w))
        return frame_push_failed(s, up, true, true);
    seq_frame *f = frame_alloc(s->w, bytes);
    if (!f)
        return frame_push_failed(s, up, count, false);
    f->up = up;
    f->sp = sp;
    f->rp = rp;
    f->pc = 0;
    f->tensors = false;
    f->loop = !sp;
    if (!sp) { /* a loop's first iteration */
        f->again = false;
        f->iter = 0;
    }
    f->v = (dev_value *)(f + 1);
    f->has = (uint8_t *)(f->v + n);
    if (n <= 32) /* small frames: a constant size, stores instead of a call */
        memset(f->has, 0, 32);
    else if (n <= 64)
        memset(f->has, 0, 64);
    else
        memset(f->has, 0, n);
    return f;
}

/* Frees a frame and the tensor references its registers hold. */
static UT_INLINE void frame_pop(seq_run *s, seq_frame *f)
{
    if (f->tensors)
        for (uint32_t k = 0; k < f->rp->n_regs; k++)
            if (f->has[k])
                dev_value_release(&f->v[k]);
    if (f->up || !s->counted)
        count_free(s->w);
    frame_release(s->w, f->rp->frame_bytes);
}

/* Register k of f takes v and the reference the caller gives up with it */
static inline void frame_take(seq_frame *f, uint32_t k, const dev_value *v)
{
    f->v[k] = *v;
    f->has[k] = 1;
    f->tensors |= v->is_tensor;
}

/* Writes register k of f (taking a reference on a tensor). */
static inline void frame_set(seq_frame *f, uint32_t k, const dev_value *v)
{
    frame_take(f, k, v);
    if (v->is_tensor)
        dev_value_retain(&f->v[k]);
}

/* The tag of frame f as text, as vm_tag_str writes a context's: the
 * dataflow context's elements, then one per frame, outermost first. */
static const char *frame_tag(const seq_run *s, const seq_frame *f, char *buf, size_t size)
{
    vm_tag_walk t;
    frame_walk(s, f, &t);
    return vm_tag_walk_str(s->vm, &t, buf, size);
}

static void frame_fail(seq_run *s, const seq_frame *f, tfvm_status code, uint32_t inst, const char *msg)
{
    char tag[256];
    vm_fail_tag(s->vm, code, frame_tag(s, f, tag, sizeof tag), inst, "%s", msg);
    s->failed = true;
}


/* Output `out` of f's instruction si: its register, and the tokens the graph
 * would send along its edges. */
static inline void frame_out(seq_run *s, seq_frame *f, const vm_sinst *si, uint32_t out, const dev_value *v)
{
    frame_set(f, si->reg + out, v);
    s->w->st.tokens += si->tokens[out];
}

/* frame_out of a result whose reference the caller gives up: the register
 * takes it as it is (a retain and a release, two atomic operations, saved
 * on every tensor result) */
static inline void frame_out_take(seq_run *s, seq_frame *f, const vm_sinst *si, uint32_t out, const dev_value *v)
{
    frame_take(f, si->reg + out, v);
    s->w->st.tokens += si->tokens[out];
}

/* The side of a SWITCH or BRANCH that sends v along n edges: with none, no
 * step reads the register's value (guards look only at whether it is set),
 * so it keeps no reference: a loop's stack that the loop variable's SWITCH
 * passes to a side without consumers stays the STACK_PUT's alone, which
 * then grows it in place instead of copying it on every step. */
static inline void frame_side(seq_frame *f, uint32_t k, uint32_t n, const dev_value *v)
{
    if (n == 0 && v->is_tensor) {
        f->v[k] = (dev_value){.dtype = v->dtype};
        f->has[k] = 1;
    } else {
        frame_set(f, k, v);
    }
}

static inline void frame_route(seq_run *s, seq_frame *f, const vm_sinst *si, uint32_t taken, const dev_value *v)
{
    frame_side(f, si->reg + taken, si->tokens[taken], v);
    s->w->st.tokens += si->tokens[taken];
    if (vm_rule_dead_other(si->flags, taken)) {
        dev_value dead = dev_dead();
        frame_out(s, f, si, 1 - taken, &dead);
    }
}

/* A call ends with a RETURN that got no token, so its caller may wait for
 * ever; a frame keeps nothing once it ends, so its instructions left with
 * some inputs but not all are noted now for the diagnosis of a stuck run
 * (diag.c), as a context's partial matches are found when it is stuck. */
static __attribute__((noinline)) void frame_note_waiting(seq_run *s, const seq_frame *f)
{
    const vm_rplan *rp = f->rp;
    char tag[256];
    bool tagged = false;
    for (uint32_t local = 0; local < rp->end - rp->first; local++) {
        const vm_sinst *si = &rp->sinsts[local];
        const vm_sport *ports = &rp->sports[si->src_at];
        uint32_t got = 0, live = 0, want = si->ports - (si->imm >= 0);
        uint64_t has = 0;
        for (uint32_t k = 0; k < si->ports && si->op != ISA_RETURN; k++)
            for (uint32_t q = 0; q < ports[k].n; q++) {
                uint32_t reg = rp->sregs[ports[k].first + q];
                if (f->has[reg]) {
                    has |= k < 64 ? (uint64_t)1 << k : 0;
                    got++;
                    live += !f->v[reg].dead;
                    break;
                }
            }
        if (!got || vm_rule_fires(si->op, live, got, want))
            continue; /* not reached, or fired */
        if (!tagged)
            frame_tag(s, f, tag, sizeof tag), tagged = true;
        vm_note_waiting(s->vm, si->inst, tag, has);
    }
}

/* Frame f's call is over: each RETURN of its site whose producer ran fires,
 * into the caller's frame or, for the first frame, the dataflow context. */
static UT_INLINE void frame_return(seq_run *s, seq_count *count, seq_frame *f)
{
    const vm_splan *sp = f->sp;
    seq_frame *up = f->up;
    if (sp->ret_one && up) { /* the common case: one RETURN, one of two producers ran */
        uint32_t reg = f->has[sp->ret1[0]] ? sp->ret1[0] : sp->ret1[1];
        if (f->has[reg]) {
            frame_set(up, sp->ret_out[0], &f->v[reg]);
            count->fired++;
            count->tokens += sp->ret_tokens[0];
        } else {
            frame_note_waiting(s, f);
        }
        return;
    }
    bool noted = false;
    for (uint32_t k = 0; k < sp->n_returns; k++) {
        const vm_sport *src = &sp->rets[k];
        const dev_value *v = NULL;
        for (uint32_t q = 0; q < src->n; q++) {
            uint32_t reg = sp->ret_regs[src->first + q];
            if (f->has[reg]) {
                v = &f->v[reg];
                break;
            }
        }
        if (!v) { /* no token for this RETURN */
            if (!noted)
                frame_note_waiting(s, f);
            noted = true;
            continue;
        }
        count->fired++;
        if (up) {
            frame_set(up, sp->ret_out[k], v);
            count->tokens += sp->ret_tokens[k];
        } else {
            vm_send(s->w, s->ctx, sp->returns[k], 0, v);
        }
    }
}

/* A call whose arguments are all dead: nothing runs, its RETURNs send dead
 * tokens; some dead and some live: an error, as in the graph. */
static void frame_call_dead(seq_run *s, seq_frame *f, uint32_t site, uint32_t inst, uint32_t dead)
{
    const vm_splan *sp = &s->vm->plan.sites[site];
    const vm_rplan *rp = f->rp;
    if (dead != sp->n_call) {
        char msg[160];
        snprintf(msg, sizeof msg, "call of '%s' entered with live and dead tokens at one tag",
                 s->p->regions[sp->callee].name);
        frame_fail(s, f, TFVM_ERR_DEADNESS, inst, msg);
        return;
    }
    dev_value d = dev_dead();
    for (uint32_t k = 0; k < sp->n_returns; k++)
        frame_out(s, f, &rp->sinsts[sp->returns[k] - rp->first], 0, &d);
}

/* The site's call with all its arguments in f's argument registers: every
 * one dead (the RETURNs say so, nothing runs), every one live (a new frame),
 * or both (an error, as in the graph). NULL: no new frame. */
static UT_INLINE seq_frame *frame_call(seq_run *s, seq_count *count, seq_frame *f, uint32_t site, uint32_t inst)
{
    const vm_splan *sp = &s->vm->plan.sites[site];
    const dev_value *args = &f->v[sp->arg_slot];
    uint32_t dead = 0;
    for (uint32_t k = 0; k < sp->n_call; k++)
        dead += args[k].dead;
    if (dead) {
        frame_call_dead(s, f, site, inst, dead);
        return NULL;
    }
    seq_frame *g = frame_push_region(s, f, sp, sp->callee_plan);
    if (g)
        for (uint32_t k = 0; k < sp->n_call; k++) {
            g->v[k] = args[k];
            g->has[k] = 1;
            if (args[k].is_tensor) {
                dev_value_retain(&g->v[k]);
                g->tensors = true;
            }
        }
    count->tokens += sp->call_tokens;
    return g;
}

/* What a step that may fail returns: the frame to run first (or NULL), or
 * SEQ_STOP when the run failed, so the step loop need not look at s->failed
 * after every step. */
#define SEQ_STOP ((seq_frame *)1)
#define SEQ_END ((seq_frame *)2) /* the frame's last step is done */
static inline seq_frame *stop_or(const seq_run *s, seq_frame *next)
{
    return s->failed ? SEQ_STOP : next;
}

/* Visits f's instruction at `local`: fires it if its inputs are there.
 * Returns a frame to run first (a call), or NULL. */
static seq_frame *frame_visit(seq_run *s, seq_frame *f, const vm_rplan *rp, uint32_t local)
{
    tfvm_vm *vm = s->vm;
    const vm_sinst *si = &rp->sinsts[local];
    if (si->op == ISA_RETURN)
        return NULL; /* written by its callee's frame (frame_return) */
    /* Each port's token: the one present producer (two are a program error). */
    const dev_value *x[8];
    const vm_sport *ports = &rp->sports[si->src_at];
    uint32_t got = 0, live = 0, want = si->ports - (si->imm >= 0);
    bool dead = false;
    for (uint32_t k = 0; k < si->ports; k++) {
        const vm_sport *pt = &ports[k];
        const dev_value *v = NULL;
        for (uint32_t q = 0; q < pt->n; q++) {
            uint32_t reg = rp->sregs[pt->first + q];
            if (f->has[reg]) {
                if (v) {
                    char msg[64];
                    snprintf(msg, sizeof msg, "two tokens for input %u at one tag", k);
                    frame_fail(s, f, TFVM_ERR_PORT, si->inst, msg);
                    return NULL;
                }
                v = &f->v[reg];
            }
        }
        if (k < 8)
            x[k] = v;
        if (v) {
            got++;
            dead |= v->dead;
            live += !v->dead;
        }
    }
    if (!vm_rule_fires(si->op, live, got, want))
        return NULL; /* no token (not reached), or a partial match that waits forever */
    if (si->imm >= 0 && si->imm < 8)
        x[si->imm] = &vm->consts[si->b];
    s->w->st.fired++;
    s->w->st.matches += si->matched;
    seq_frame *next = NULL;
    switch ((isa_op)si->op) {
    case ISA_CONST: {
        dev_value v = dead ? dev_dead() : vm->consts[si->a];
        frame_out(s, f, si, 0, &v);
        break;
    }
    case ISA_IDENTITY:
    case ISA_LOOPCOND:
        frame_out(s, f, si, 0, x[0]);
        break;
    case ISA_BRANCH: {
        if (dead) {
            frame_out(s, f, si, 0, x[0]);
            frame_out(s, f, si, 1, x[0]);
            break;
        }
        uint32_t taken;
        char msg[256];
        tfvm_status st = vm_branch_predicate(vm, &s->p->insts[si->inst], x[0], &taken, msg, sizeof msg);
        if (st != TFVM_OK)
            frame_fail(s, f, st, si->inst, msg);
        else
            frame_route(s, f, si, taken, x[0]);
        break;
    }
    case ISA_SWITCH: {
        vm_route_to to = vm_rule_switch(x[0], x[1]);
        if (to == VM_ROUTE_DEAD) {
            dev_value d = dev_dead();
            frame_out(s, f, si, 0, &d);
            frame_out(s, f, si, 1, &d);
        } else if (to == VM_ROUTE_BAD) {
            char msg[96];
            vm_rule_bad_predicate(x[1], msg, sizeof msg);
            frame_fail(s, f, TFVM_ERR_TYPE, si->inst, msg);
        } else {
            frame_route(s, f, si, to, x[0]);
        }
        break;
    }
    case ISA_MERGE: {
        uint32_t k = 0;
        while (k < si->n_in && k < 8 && !(x[k] && !x[k]->dead))
            k++;
        if (!live) {
            dev_value d = dev_dead();
            frame_out(s, f, si, 0, &d);
            frame_out(s, f, si, 1, &d);
        } else {
            dev_value index = vm_rule_merge_index(k);
            frame_out(s, f, si, 0, x[k]);
            frame_out(s, f, si, 1, &index);
        }
        break;
    }
    case ISA_CALL: {
        const vm_splan *sp = &vm->plan.sites[si->a];
        frame_set(f, sp->arg_slot + si->arg, x[0]);
        uint32_t have = 0;
        for (uint32_t k = 0; k < sp->n_call; k++)
            have += f->has[sp->arg_slot + k];
        if (have == sp->n_call) {
            seq_count count = {0};
            next = frame_call(s, &count, f, si->a, si->inst);
            s->w->st.tokens += count.tokens;
        }
        break;
    }
    case ISA_NEXTITER: /* into the next iteration's register; dead tokens end the chain */
        if (!dead) {
            frame_set(f, si->reg + 1, x[0]);
            s->w->st.tokens += si->tokens[0];
            f->again = true;
        }
        break;
    case ISA_EXIT: /* out of the loop, into the context that entered it; dead tokens dropped */
        if (!dead)
            vm_send(s->w, s->ctx, si->inst, 0, x[0]);
        break;
    default: { /* compute */
        dev_value out = dev_dead();
        if (!dead && !(si->n_in == 2 && vm_scalar_op(si->op, x[0], x[1], &out))) {
            dev_value in[5] = {{0}};
            for (uint32_t k = 0; k < si->n_in && k < 5; k++)
                in[k] = *x[k];
            if (si->hold)
                dev_value_retain(&in[si->hold_at]);
            char msg[256];
            tfvm_status st = dev_vm_fire(vm->dev, &s->p->insts[si->inst], in, &out, msg, sizeof msg);
            if (si->hold)
                dev_value_release(&in[si->hold_at]);
            if (st != TFVM_OK) {
                frame_fail(s, f, st, si->inst, msg);
                break;
            }
        }
        frame_out_take(s, f, si, 0, &out);
        break;
    }
    }
    return next;
}

/* A nested loop's last ENTER fired in f: with every entry value there, a
 * frame for its iteration 0 (NULL: all dead, the EXITs said so; or an
 * error). */
static seq_frame *frame_enter(seq_run *s, seq_frame *f, uint32_t frame, uint32_t inst)
{
    const vm_rplan *lr = &s->vm->plan.regions[frame];
    const vm_fplan *fp = &s->vm->plan.frames[frame];
    dev_value *entry = &f->v[fp->entry_reg];
    uint32_t got = 0, dead = 0;
    for (uint32_t k = 0; k < lr->n_args; k++) {
        got += f->has[fp->entry_reg + k];
        dead += f->has[fp->entry_reg + k] && entry[k].dead;
    }
    if (got < lr->n_args)
        return NULL; /* an ENTER not reached: the loop waits forever, as in the graph */
    if (dead) {
        if (dead != lr->n_args) {
            char msg[160];
            snprintf(msg, sizeof msg, "loop '%s' entered with live and dead tokens at one tag",
                     s->p->regions[frame].name);
            frame_fail(s, f, TFVM_ERR_DEADNESS, inst, msg);
            return NULL;
        }
        dev_value d = dev_dead(); /* a dead token never enters a loop: each EXIT says "dead" once */
        for (uint32_t x = lr->first; x < lr->end; x++)
            if (s->p->insts[x].op == ISA_EXIT) {
                frame_set(f, s->vm->plan.insts[x].preg, &d);
                s->w->st.tokens += s->p->insts[x].n_edges;
            }
        return NULL;
    }
    seq_frame *g = frame_push_region(s, f, NULL, lr);
    if (!g)
        return NULL;
    for (uint32_t k = 0; k < lr->n_args; k++) {
        frame_set(g, k, &entry[k]);
        if (f->tensors)
            dev_value_release(&entry[k]);
        f->has[fp->entry_reg + k] = 0;
    }
    s->w->st.tokens += fp->entry_tokens + fp->const_tokens;
    return g;
}

/* The token on an input fed by registers r (and r2): NULL when none is
 * there; `two` when both are (a program error the general visit reports). */
static inline const dev_value *pick(const seq_frame *f, uint32_t r, uint32_t r2, bool *two)
{
    if (f->has[r]) {
        *two |= r2 != ISA_NONE && f->has[r2];
        return &f->v[r];
    }
    return r2 != ISA_NONE && f->has[r2] ? &f->v[r2] : NULL;
}

/* A CALL fires: its argument x goes into register k, where the site's
 * arguments are gathered. */
static inline void frame_gather(seq_count *n, seq_frame *f, uint32_t k, const dev_value *x)
{
    frame_set(f, k, x);
    n->fired++;
}

/* The SWITCHes of a SWITCHN step from route r on, by the general visit (a
 * predicate or value the step does not route itself). SEQ_STOP: the run
 * failed. */
static seq_frame *switch_group_visit(seq_run *s, seq_frame *f, const vm_sroute *r, const vm_sroute *end)
{
    for (; r < end; r++) {
        frame_visit(s, f, f->rp, r->local);
        if (s->failed)
            return SEQ_STOP;
    }
    return NULL;
}

/* A SWITCHN step from route r on, once a value there is dead or a tensor
 * (or, when y is NULL, the predicate is not a live bool): those SWITCHes by
 * the general visit, live scalars as the step routes them. */
static __attribute__((noinline)) seq_frame *switch_group_rest(seq_run *s, seq_count *n, seq_frame *f, dev_value *v,
                                                              uint8_t *has, const vm_sroute *r,
                                                              const vm_sroute *end, const dev_value *y)
{
    if (!y)
        return switch_group_visit(s, f, r, end);
    unsigned taken = y->u.b;
    for (; r < end; r++) {
        if (!has[r->src])
            continue;
        if (!vm_plain(&v[r->src])) {
            if (switch_group_visit(s, f, r, r + 1))
                return SEQ_STOP;
            continue;
        }
        v[r->out + taken] = v[r->src];
        has[r->out + taken] = 1;
        n->fired++, n->matches++, n->tokens += r->tokens[taken];
    }
    return NULL;
}

/* A SWITCHN step (out of line: the step loop's own code stays as it is for
 * bodies without one; anything but live scalars goes on in
 * switch_group_rest, so this part needs no registers saved). NULL, or
 * SEQ_STOP when the run failed. */
static __attribute__((noinline)) seq_frame *switch_group(seq_run *s, seq_count *n, seq_frame *f, dev_value *v,
                                                         uint8_t *has, const vm_sop *op)
{
    if (!has[op->b])
        return NULL;
    const dev_value *y = &v[op->b];
    const vm_sroute *r = &f->rp->routes[op->a], *end = r + op->a2;
    if (vm_rule_predicate(y) > VM_ROUTE_TRUE)
        return switch_group_rest(s, n, f, v, has, r, end, NULL);
    unsigned taken = y->u.b;
    uint32_t fired = 0, tokens = 0;
    for (; r < end; r++) {
        uint32_t src = r->src, o = r->out + taken;
        if (!has[src])
            continue; /* not reached: this SWITCH does not fire */
        if (!vm_plain(&v[src]))
            break;
        v[o] = v[src];
        has[o] = 1;
        fired++;
        tokens += r->tokens[taken];
    }
    n->fired += fired, n->matches += fired, n->tokens += tokens;
    return r == end ? NULL : switch_group_rest(s, n, f, v, has, r, end, y);
}

/* A BRANCH or SWITCH step sends x to its taken side, and a dead token to
 * the other unless that side is pruned. */
static inline void step_route(seq_count *n, seq_frame *f, const vm_sop *op, bool taken, const dev_value *x)
{
    frame_side(f, op->out + taken, taken ? op->tokens1 : op->tokens, x);
    n->tokens += taken ? op->tokens1 : op->tokens;
    if (vm_rule_dead_other(op->flags, taken)) {
        f->v[op->out + !taken] = dev_dead();
        f->has[op->out + !taken] = 1;
        n->tokens += taken ? op->tokens : op->tokens1;
    }
}

/* step_route for a live scalar x (no reference to take), into the step
 * loop's v and has; both sides pruned (the common case) cost one compare. */
static inline void route_scalar(seq_count *n, dev_value *v, uint8_t *has, const vm_sop *op, bool taken,
                                const dev_value *x)
{
    v[op->out + taken] = *x;
    has[op->out + taken] = 1;
    n->tokens += taken ? op->tokens1 : op->tokens;
    if (op->flags != (ISA_FLAG_PRUNE_FALSE | ISA_FLAG_PRUNE_TRUE) && vm_rule_dead_other(op->flags, taken)) {
        v[op->out + !taken] = dev_dead();
        has[op->out + !taken] = 1;
        n->tokens += taken ? op->tokens : op->tokens1;
    }
}

/* The integer steps (VM_SOP_ARITH, VM_SOP_CMPS): i32 and i64 here, any
 * other token through the general binary step or BRANCH. INT_OPERANDS reads
 * a step's two operands (two registers, or a register and a constant), goes
 * to the general step unless they are live scalars of one dtype, and on at
 * N##_go; a constant is a live i32 or i64 scalar (seq_specialise), so there
 * only the register's value needs a look, and a BRANCH on it needs no third
 * case. */
#define INT_OPERANDS(N)                                                                                 \
    case VM_SOP_##N##_RR:                                                                               \
        if (!has[op->a] || !has[op->b])                                                                 \
            return NULL;                                                                                \
        x = &v[op->a], y = &v[op->b];                                                                   \
        if (x->dtype != y->dtype || (vm_flags(x) | vm_flags(y)))                                           \
            goto binary;                                                                                \
        goto N##_go;                                                                                    \
    case VM_SOP_##N##_RK:                                                                               \
        if (!has[op->a])                                                                                \
            return NULL;                                                                                \
        x = &v[op->a], y = &consts[op->b];                                                              \
        if (x->dtype != y->dtype || vm_flags(x))                                                        \
            goto binary;                                                                                \
    N##_go:
#define ARITH_STEPS(N, OP, E) /* (E: isa/isa.h, ISA_INT_ARITH) */                                     \
    INT_OPERANDS(N)                                                                                     \
        if (x->dtype == TFVM_I32)                                                                       \
            v[op->out] = (dev_value){.dtype = TFVM_I32, .u.i32 = E(int32_t, uint32_t, x->u.i32, y->u.i32)}; \
        else if (x->dtype == TFVM_I64)                                                                  \
            v[op->out] = (dev_value){.dtype = TFVM_I64, .u.i64 = E(int64_t, uint64_t, x->u.i64, y->u.i64)}; \
        else                                                                                            \
            goto binary;                                                                                \
        has[op->out] = 1;                                                                               \
        n->fired++, n->matches += op->matched, n->tokens += op->tokens;                                 \
        return NULL;
#define CMP_STEPS(N, OP, C)                                                                             \
    INT_OPERANDS(N)                                                                                     \
        if (x->dtype == TFVM_I32)                                                                       \
            c = x->u.i32 C y->u.i32;                                                                    \
        else if (x->dtype == TFVM_I64)                                                                  \
            c = x->u.i64 C y->u.i64;                                                                    \
        else                                                                                            \
            goto binary;                                                                                \
        v[op->out] = (dev_value){.dtype = TFVM_BOOL, .u.b = c};                                         \
        has[op->out] = 1;                                                                               \
        n->fired++, n->matches += op->matched, n->tokens += op->tokens;                                 \
        return NULL;                                                                                    \
    case VM_SOP_##N##_BR:                                                                               \
        if (!has[op->a])                                                                                \
            return NULL;                                                                                \
        x = &v[op->a], y = &consts[op->b];                                                              \
        if (x->dtype != y->dtype || vm_flags(x))                                                        \
            goto branch;                                                                                \
        c = x->dtype == TFVM_I32 ? x->u.i32 C y->u.i32 : x->u.i64 C y->u.i64;                          \
        n->fired++;                                                                                     \
        route_scalar(n, v, has, op, c, x);                                                              \
        return NULL;

/* One step of f's order; NULL, a frame to run first, SEQ_STOP or SEQ_END. */
static UT_INLINE seq_frame *frame_step(seq_run *s, seq_count *n, const dev_value *consts, seq_frame *f,
                                       dev_value *v, uint8_t *has, const vm_rplan *rp, const vm_sop **next)
{
    const vm_sop *op = (*next)++;
    const dev_value *x, *y;
    bool two = false, c;
    switch (op->kind) {
    case VM_SOP_GUARD:
        if (!has[op->a])
            *next = rp->sops + op->skip; /* that side of its branch was not taken */
        return NULL;
    case VM_SOP_END:
        return SEQ_END;
        VM_SOP_ARITH(ARITH_STEPS)
        VM_SOP_CMPS(CMP_STEPS)
    case VM_SOP_BIN_RR:
        x = pick(f, op->a, op->a2, &two), y = pick(f, op->b, op->b2, &two);
        if (!x || !y)
            return NULL; /* not reached (or a partial match) */
        goto binary;
    case VM_SOP_BIN_RK:
        if (!(x = pick(f, op->a, op->a2, &two)))
            return NULL;
        y = &consts[op->b];
        goto binary;
    case VM_SOP_BIN_KR:
        if (!(y = pick(f, op->b, op->b2, &two)))
            return NULL;
        x = &consts[op->a];
    binary:
        if (two)
            break;
        if (x->dead || y->dead) /* a dead input: a dead output, no kernel */
            v[op->out] = dev_dead();
        else if (!vm_scalar_op(op->op, x, y, &v[op->out]))
            break;
        has[op->out] = 1;
        n->fired++, n->matches += op->matched, n->tokens += op->tokens;
        return NULL;
    case VM_SOP_BRANCH: {
        if (!(x = pick(f, op->a, op->a2, &two)))
            return NULL;
        if (two)
            break;
    branch:;
        if (x->dead) { /* both sides hear it */
            n->fired++;
            frame_out(s, f, &rp->sinsts[op->local], 0, x);
            frame_out(s, f, &rp->sinsts[op->local], 1, x);
            return NULL;
        }
        vm_route_to to = vm_rule_branch_int(op->op, x, &consts[op->b]);
        if (to == VM_ROUTE_BAD)
            break; /* the general visit asks the kernel */
        n->fired++;
        step_route(n, f, op, to, x);
        return NULL;
    }
    case VM_SOP_SWITCH1: {
        if (!has[op->a] || !has[op->b])
            return NULL;
        x = &v[op->a], y = &v[op->b];
        if (vm_rule_switch_plain(x, y)) { /* no reference to take */
            n->fired++, n->matches++;
            route_scalar(n, v, has, op, y->u.b, x);
            return NULL;
        }
        goto switch_general;
    }
    case VM_SOP_SWITCH: {
        x = pick(f, op->a, op->a2, &two), y = pick(f, op->b, op->b2, &two);
        if (!x || !y)
            return NULL;
        if (two)
            break;
    switch_general:;
        vm_route_to to = vm_rule_switch(x, y);
        if (to == VM_ROUTE_DEAD) { /* both outputs dead */
            dev_value d = dev_dead();
            n->fired++, n->matches++;
            frame_out(s, f, &rp->sinsts[op->local], 0, &d);
            frame_out(s, f, &rp->sinsts[op->local], 1, &d);
            return NULL;
        }
        if (to == VM_ROUTE_BAD)
            break; /* the general visit fails the run */
        n->fired++, n->matches++;
        step_route(n, f, op, to, x);
        return NULL;
    }
    case VM_SOP_MERGE: { /* two inputs: the live one, or dead once both are dead */
        x = pick(f, op->a, op->a2, &two), y = pick(f, op->b, op->b2, &two);
        if (two)
            break;
        const dev_value *live = x && !x->dead ? x : y && !y->dead ? y : NULL;
        if (!VM_RULE_MERGE_FIRES(live, x && y))
            return NULL; /* no token, or only a dead one so far */
        const vm_sinst *si = &rp->sinsts[op->local];
        n->fired++, n->matches++;
        if (live) {
            dev_value index = vm_rule_merge_index(live == x ? 0 : 1);
            frame_out(s, f, si, 0, live);
            frame_out(s, f, si, 1, &index);
        } else {
            dev_value d = dev_dead();
            frame_out(s, f, si, 0, &d);
            frame_out(s, f, si, 1, &d);
        }
        return NULL;
    }
    case VM_SOP_COPY:
        if (!(x = pick(f, op->a, op->a2, &two)))
            return NULL;
        if (two)
            break;
        n->fired++;
        frame_out(s, f, &rp->sinsts[op->local], 0, x);
        return NULL;
    case VM_SOP_NEXTITER:
        if (!(x = pick(f, op->a, op->a2, &two)))
            return NULL;
        if (two)
            break;
        n->fired++;
        if (!x->dead) { /* into the next iteration's register; dead tokens end the chain */
            frame_set(f, op->out + 1, x);
            n->tokens += op->tokens;
            f->again = true;
        }
        return NULL;
    case VM_SOP_EXIT:
        if (!(x = pick(f, op->a, op->a2, &two)))
            return NULL;
        if (two)
            break;
        n->fired++;
        if (x->dead) /* dead tokens are dropped */
            return NULL;
        if (f->up) { /* into the parent's frame */
            frame_set(f->up, op->out, x);
            s->w->st.tokens += s->p->insts[op->b].n_edges;
        } else { /* into the context that entered the loop */
            vm_send(s->w, s->ctx, op->b, 0, x);
        }
        return NULL;
    case VM_SOP_ENTER:
    case VM_SOP_ENTER_LAST:
        if (!(x = pick(f, op->a, op->a2, &two)))
            return NULL;
        if (two)
            break;
        frame_set(f, op->out, x);
        n->fired++;
        return op->kind == VM_SOP_ENTER_LAST ? stop_or(s, frame_enter(s, f, op->b, rp->sinsts[op->local].inst)) : NULL;
    case VM_SOP_CONST:
        if (!has[op->a])
            return NULL;
        v[op->out] = v[op->a].dead ? dev_dead() : consts[op->b];
        if (v[op->out].is_tensor) {
            dev_value_retain(&v[op->out]);
            f->tensors = true;
        }
        has[op->out] = 1;
        n->fired++, n->tokens += op->tokens;
        return NULL;
    case VM_SOP_CALL:
    case VM_SOP_CALL_LAST: {
        if (!has[op->a])
            return NULL;
        const vm_splan *sp = &s->vm->plan.sites[op->b];
        frame_gather(n, f, sp->arg_slot + op->out, &v[op->a]); /* (each step fires once a frame: never a second) */
        if (op->kind == VM_SOP_CALL)
            return NULL; /* the site's last CALL makes the call */
        uint32_t have = 0;
        for (uint32_t k = 0; k < sp->n_call; k++)
            have += has[sp->arg_slot + k];
        return have == sp->n_call ? stop_or(s, frame_call(s, n, f, op->b, rp->sinsts[op->local].inst)) : NULL;
    }
    case VM_SOP_CALL1: {
        if (!has[op->a])
            return NULL;
        const vm_splan *sp = &s->vm->plan.sites[op->b];
        x = &v[op->a];
        if (!(x->dead | x->is_tensor)) { /* a live scalar: straight into the callee's frame */
            seq_frame *g = frame_push_region(s, f, sp, sp->callee_plan);
            if (!g)
                return SEQ_STOP;
            g->v[0] = *x;
            g->has[0] = 1;
            n->fired++, n->tokens += sp->call_tokens;
            return g;
        }
        frame_gather(n, f, sp->arg_slot, x);
        return stop_or(s, frame_call(s, n, f, op->b, rp->sinsts[op->local].inst));
    }
    case VM_SOP_CALLN: {
        const vm_splan *sp = &s->vm->plan.sites[op->b];
        const uint32_t *src = sp->arg_src;
        uint32_t other = 0; /* an argument absent, dead or a tensor (an absent one's value bytes are
                               stale: read, never used) */
        for (uint32_t k = 0; k < sp->n_call; k++)
            other |= (has[src[k]] ^ 1) | v[src[k]].dead | v[src[k]].is_tensor;
        if (!other) { /* live scalars: straight into the callee's frame */
            seq_frame *g = frame_push_region(s, f, sp, sp->callee_plan);
            if (!g)
                return SEQ_STOP;
            for (uint32_t k = 0; k < sp->n_call; k++) {
                g->v[k] = v[src[k]];
                g->has[k] = 1;
            }
            n->fired += sp->n_call, n->tokens += sp->call_tokens;
            return g;
        }
        uint32_t have = 0;
        for (uint32_t k = 0; k < sp->n_call; k++) /* else as the CALLs one by one would */
            if (has[src[k]]) {
                frame_gather(n, f, sp->arg_slot + k, &v[src[k]]);
                have++;
            }
        return have == sp->n_call ? stop_or(s, frame_call(s, n, f, op->b, rp->sinsts[op->local].inst)) : NULL;
    }
    case VM_SOP_SWITCHN:
        return switch_group(s, n, f, v, has, op);
    case VM_SOP_GENERIC:
    case VM_SOP_SKIP: /* (never left in an order) */
        break;
    default: /* every kind has its case: no range check before the jump */
#if defined(__GNUC__)
        __builtin_unreachable();
#endif
        break;
    }
    return stop_or(s, frame_visit(s, f, rp, op->local));
}

/* A loop frame's iteration ended with NEXTITER tokens: the next iteration
 * starts with them (and the `ENTER const` values); everything else of the
 * last one goes. As the graph does, every iteration is a context. */
static bool next_iteration(seq_run *s, seq_frame *f)
{
    const vm_rplan *rp = f->rp;
    const vm_fplan *fp = &s->vm->plan.frames[rp - s->vm->plan.regions];
    count_free(s->w);
    if (!count_new(s->w)) { /* the bound */
        frame_bound_fail(s, f);
        return false;
    }
    if (!f->tensors && fp->n_nexts <= 64) {
        /* scalars only: nothing to release, so clear the registers in one
         * go and put the NEXTITER values back */
        uint64_t moved = 0;
        for (uint32_t k = 0; k < fp->n_nexts; k++) {
            uint32_t cur = fp->nexts[k];
            f->v[cur] = f->v[cur + 1];
            moved |= (uint64_t)f->has[cur + 1] << k;
        }
        for (uint32_t k = 0; k < rp->n_args; k++)
            f->has[k] &= rp->keep[k];
        memset(f->has + rp->n_args, 0, rp->n_regs - rp->n_args);
        for (uint32_t k = 0; k < fp->n_nexts; k++)
            f->has[fp->nexts[k]] = (moved >> k) & 1;
    } else {
        for (uint32_t k = 0; k < fp->n_nexts; k++) { /* each NEXTITER's value moves in */
            uint32_t cur = fp->nexts[k], nxt = cur + 1;
            if (f->has[cur])
                dev_value_release(&f->v[cur]);
            f->has[cur] = f->has[nxt];
            f->v[cur] = f->v[nxt];
            f->has[nxt] = 0;
        }
        for (uint32_t k = 0; k < rp->n_regs; k++) /* the rest goes, but the constant entry values */
            if (f->has[k] && !rp->keep[k]) {
                dev_value_release(&f->v[k]);
                f->has[k] = 0;
            }
    }
    f->pc = 0;
    f->again = false;
    f->iter++;
    s->w->st.tokens += fp->const_tokens;
    return true;
}

/* Every 1024 calls or iterations: an interrupt, or the end of the run that
 * an error on another worker decided, stops the frames. An interrupt says
 * where: frame f (a call's first step or an iteration's) and its tag. */
static void seq_poll(seq_run *s, const seq_frame *f)
{
    tfvm_vm *vm = s->vm;
    if (atomic_load_explicit(&vm->interrupted, memory_order_relaxed) && atomic_exchange(&vm->interrupted, 0)) {
        vm_tag_walk t;
        frame_walk(s, f, &t);
        const vm_rplan *rp = f->rp;
        uint32_t pc = f->pc < rp->n_sops ? f->pc : 0;
        vm_fail_interrupted(vm, &t, rp->n_sops ? rp->sinsts[rp->sops[pc].local].inst : ISA_NONE);
    }
    if (atomic_load_explicit(&vm->run.done, memory_order_relaxed))
        s->failed = true;
}

/* Runs frames from `top` until it returns (or the run stops). Interrupts
 * and the end of the run are looked at every 1024 calls. */
static void frames_run(seq_run *s, seq_frame *top)
{
    tfvm_vm *vm = s->vm;
    seq_frame *f = top;
    seq_count count = {0};
    const dev_value *consts = vm->consts;
    while (f) {
        const vm_rplan *rp = f->rp;
        const vm_sop *next = rp->sops + f->pc;
        seq_frame *call;
        dev_value *v = f->v; /* (f->v and f->has once: stores through has would make the steps reload them) */
        uint8_t *has = f->has;
        while (!(call = frame_step(s, &count, consts, f, v, has, rp, &next)))
            ;
        if (call == SEQ_END && !f->loop) { /* a call is over (no step failed: that ends in SEQ_STOP) */
            frame_return(s, &count, f);
            seq_frame *up = f->up;
            bool last = f == top;
            frame_pop(s, f);
            f = last ? NULL : up;
            continue;
        }
        if (call == SEQ_STOP || call == SEQ_END)
            call = NULL; /* (SEQ_STOP: s->failed is set) */
        if (call) {
            f->pc = (uint32_t)(next - rp->sops);
            f = call;
            if ((++s->polls & 1023) != 0)
                continue;
            seq_poll(s, f);
            if (!s->failed)
                continue;
        }
        if (f->loop && f->again && !s->failed && next_iteration(s, f)) {
            /* between iterations, as between firings: another worker may
             * wait to share a context of ours (the next chunk of a layer
             * below, beside this loop of the layer above) */
            vm_serve_shares(s->w);
            if ((++s->polls & 1023) == 0)
                seq_poll(s, f);
            if (!s->failed)
                continue;
        }
        if (s->failed) { /* every frame of this call goes */
            for (bool last = false; !last;) {
                seq_frame *up = f->up;
                last = f == top;
                frame_pop(s, f);
                f = up;
            }
            break;
        }
        seq_frame *up = f->up;
        bool last = f == top;
        frame_pop(s, f);
        f = last ? NULL : up;
    }
    s->w->st.fired += count.fired;
    s->w->st.tokens += count.tokens;
    s->w->st.matches += count.matches;
}

void vm_seq_call(vm_worker *w, vm_ctx *c, uint32_t site, dev_value *args, bool counted)
{
    tfvm_vm *vm = w->vm;
    seq_run s = {.w = w, .vm = vm, .p = vm->prog, .ctx = c, .counted = counted};
    const vm_splan *sp = &vm->plan.sites[site];
    seq_frame *f = frame_push(&s, NULL, site);
    for (uint32_t k = 0; k < sp->n_call; k++) {
        if (f) {
            frame_set(f, k, &args[k]);
            w->st.tokens += vm->prog->insts[sp->calls[k]].n_edges;
        }
        dev_value_release(&args[k]);
    }
    if (f)
        frames_run(&s, f);
}

void vm_seq_loop(vm_worker *w, vm_ctx *c, uint32_t frame, dev_value *entry)
{
    tfvm_vm *vm = w->vm;
    seq_run s = {.w = w, .vm = vm, .p = vm->prog, .ctx = c, .counted = false};
    const vm_fplan *fp = &vm->plan.frames[frame];
    uint32_t n = vm->plan.regions[frame].n_args;
    seq_frame *f = frame_push_region(&s, NULL, NULL, &vm->plan.regions[frame]);
    for (uint32_t k = 0; k < n; k++) {
        if (f)
            frame_set(f, k, &entry[k]);
        dev_value_release(&entry[k]);
    }
    if (!f)
        return;
    w->st.tokens += fp->entry_tokens + fp->const_tokens;
    frames_run(&s, f);
}
