/* vm/run.c — the firing loop: contexts and their lifetimes, token delivery and
 * matching (explicit token store), firing, quiescence, results and the
 * diagnosis of a stuck run. Control instructions are in control.c. */
#include "vm.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "devices/cpu/cpu.h"

#define MERGE_FIRED 0x80000000u

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline bool slot_present(const dev_value *v) { return v->dtype != 0 || v->dead; }

/* ---- Errors ------------------------------------------------------------------ */

void vm_fail(tfvm_vm *vm, tfvm_status code, const vm_ctx *ctx, uint32_t inst, const char *fmt, ...)
{
    if (vm->state == VM_FAILED)
        return;
    vm->state = VM_FAILED;
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
        ut_fmt(e->message, sizeof e->message, "%s (%s) at %s: %s", e->instr,
                 isa_ops[vm->prog->insts[inst].op].name, ctx ? e->tag : "[]", msg);
    } else {
        ut_fmt(e->message, sizeof e->message, "%s", msg);
    }
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
 * also when memory has run out (and every allocation of the library must go
 * through the configured allocator). A tag that does not fit ends in "...". */
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
            fits = tag_put(buf, size, &len, "%s@%u", p->regions[p->sites[c->elem].callee].name,
                           p->sites[c->elem].id);
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

vm_ctx *vm_ctx_new(tfvm_vm *vm, vm_ctx *parent, uint32_t region, vm_ctx_kind kind, uint32_t elem)
{
    const vm_rplan *rp = &vm->plan.regions[region];
    if (vm->cfg.max_contexts && vm->n_live >= vm->cfg.max_contexts) {
        vm_fail(vm, TFVM_ERR_LIMIT, NULL, ISA_NONE, "more than %llu live contexts (max_contexts)",
                (unsigned long long)vm->cfg.max_contexts);
        return NULL;
    }
    vm_ctx *c = vm->free_ctx[region];
    if (c) {
        vm->free_ctx[region] = c->parent;
    } else {
        c = ut_alloc(&vm->alloc, rp->ctx_size);
        if (!c) {
            vm_fail(vm, TFVM_ERR_NOMEM, NULL, ISA_NONE, "out of memory creating a context");
            return NULL;
        }
    }
    memset(c, 0, rp->ctx_size);
    c->parent = parent;
    c->region = region;
    c->kind = (uint8_t)kind;
    c->elem = elem;
    c->slots = (dev_value *)(c + 1);
    c->children = (void **)(c->slots + rp->n_slots);
    c->counts = (uint32_t *)(c->children + rp->n_children);
    /* link into the live list */
    c->next_live = vm->live.next_live;
    c->prev_live = &vm->live;
    vm->live.next_live->prev_live = c;
    vm->live.next_live = c;
    vm->stats.contexts_created++;
    if (++vm->n_live > vm->stats.contexts_peak)
        vm->stats.contexts_peak = vm->n_live;
    if (kind == VM_CTX_CALL)
        parent->refs++;
    return c;
}

/* Returns a context's memory to its region's free list. */
static void ctx_recycle(tfvm_vm *vm, vm_ctx *c)
{
    c->prev_live->next_live = c->next_live;
    c->next_live->prev_live = c->prev_live;
    vm->n_live--;
    c->parent = vm->free_ctx[c->region];
    vm->free_ctx[c->region] = c;
}

vm_ctx *vm_ctx_release(tfvm_vm *vm, vm_ctx *c)
{
    vm_ctx *next = NULL;
    switch (c->kind) {
    case VM_CTX_CALL:
        c->parent->children[c->child] = NULL;
        next = c->parent;
        ctx_recycle(vm, c);
        break;
    case VM_CTX_ITER:
        next = vm_iter_release(vm, c);
        break;
    default:
        ctx_recycle(vm, c);
        break;
    }
    return next;
}

void vm_ctx_unref(tfvm_vm *vm, vm_ctx *c)
{
    while (c && --c->refs == 0)
        c = vm_ctx_release(vm, c);
}

/* Recycles an iteration context (called from vm_iter_release in control.c). */
void vm_iter_recycle(tfvm_vm *vm, vm_ctx *c);
void vm_iter_recycle(tfvm_vm *vm, vm_ctx *c) { ctx_recycle(vm, c); }

/* ---- Tokens --------------------------------------------------------------------- */

/* The activation takes over *v (its tensor reference), also when queueing
 * fails: then the reference is released here, so no caller leaks it. */
static inline bool push_act(tfvm_vm *vm, vm_ctx *ctx, uint32_t inst, uint32_t aux, const dev_value *v)
{
    vm_act a = {.ctx = ctx, .inst = inst, .aux = aux};
    if (v)
        a.v = *v;
    if (!sched_push(&vm->queue, &a)) {
        dev_value_release(&a.v);
        vm_fail(vm, TFVM_ERR_NOMEM, ctx, inst, "out of memory queueing an activation");
        return false;
    }
    ctx->refs++;
    return true;
}

bool vm_push(tfvm_vm *vm, vm_ctx *ctx, uint32_t inst, uint32_t aux, const dev_value *v)
{
    return push_act(vm, ctx, inst, aux, v);
}

static void port_error(tfvm_vm *vm, vm_ctx *c, uint32_t inst, uint32_t port)
{
    vm_fail(vm, TFVM_ERR_PORT, c, inst, "two tokens for input %u at one tag", port);
}

/* MERGE: fires on its first live input; on all-dead once every input is in.
 * Only presence is stored (to catch a second token on one port). */
static void merge_arrive(tfvm_vm *vm, vm_ctx *c, uint32_t inst, uint32_t port, dev_value v)
{
    const isa_inst *in = &vm->prog->insts[inst];
    const vm_iplan *ip = &vm->plan.insts[inst];
    uint32_t *cnt = &c->counts[ip->match];
    dev_value *slot = &c->slots[ip->slot + port];
    if (slot_present(slot)) {
        dev_value_release(&v);
        port_error(vm, c, inst, port);
        return;
    }
    slot->dead = 1;
    bool was_partial = (*cnt & ~MERGE_FIRED) > 0 && !(*cnt & MERGE_FIRED);
    uint32_t n = (*cnt & ~MERGE_FIRED) + 1;
    *cnt = (*cnt & MERGE_FIRED) | n;
    if (*cnt & MERGE_FIRED) {
        dev_value_release(&v); /* absorbed: never fires twice */
        return;
    }
    if (!v.dead || n == isa_ports(in)) {
        *cnt |= MERGE_FIRED;
        vm->stats.matches++;
        /* The activation takes over the partial match's reference; if it
         * could not be queued the partial match keeps it (the run has failed
         * and teardown frees the context), so refs never undercounts. */
        if (push_act(vm, c, inst, port, &v) && was_partial)
            c->refs--;
    } else if (!was_partial) {
        c->refs++; /* a partial match holds its context */
    }
}

static void deliver(tfvm_vm *vm, vm_ctx *c, uint32_t inst, uint32_t port, dev_value v)
{
    const isa_inst *in = &vm->prog->insts[inst];
    vm->stats.tokens++;
    if (in->op == ISA_MERGE) {
        merge_arrive(vm, c, inst, port, v);
        return;
    }
    uint32_t ports = isa_ports(in);
    if (ports == 1) {
        /* RETURN dispatch by call site (docs/isa.md, "Implementation freedom"):
         * a token of activation t.C(s') is only for the RETURNs of s'. */
        if (in->op == ISA_RETURN && (c->kind != VM_CTX_CALL || c->elem != in->a)) {
            dev_value_release(&v);
            return;
        }
        push_act(vm, c, inst, 0, &v);
        return;
    }
    const vm_iplan *ip = &vm->plan.insts[inst];
    uint32_t *cnt = &c->counts[ip->match];
    dev_value *slot = &c->slots[ip->slot + port];
    if (*cnt >= ports || slot_present(slot)) {
        dev_value_release(&v);
        port_error(vm, c, inst, port);
        return;
    }
    *slot = v;
    if (++*cnt == 1)
        c->refs++; /* partial match */
    if (*cnt == ports) {
        vm->stats.matches++;
        if (push_act(vm, c, inst, 0, NULL))
            c->refs--; /* the activation takes over the partial match's reference */
    }
}

void vm_send(tfvm_vm *vm, vm_ctx *ctx, uint32_t inst, uint32_t out, const dev_value *v)
{
    const vm_iplan *ip = &vm->plan.insts[inst];
    const isa_edge *e = vm->prog->edges;
    uint32_t first = ip->out_at[out], end = ip->out_at[out + 1];
    for (uint32_t k = first; k < end && vm->state != VM_FAILED; k++) {
        dev_value copy = *v;
        dev_value_retain(&copy);
        deliver(vm, ctx, e[k].inst, e[k].port, copy);
    }
}

/* ---- Firing ----------------------------------------------------------------------- */

static void fire_result(tfvm_vm *vm, const vm_act *a, dev_value *v)
{
    uint32_t k = vm->prog->insts[a->inst].a;
    dev_value *r = &vm->results[k];
    if (slot_present(r)) {
        vm_fail(vm, TFVM_ERR_PORT, a->ctx, a->inst, "result %u produced twice", k);
        return;
    }
    *r = *v;
    v->is_tensor = 0; /* moved */
}

static void fire(tfvm_vm *vm, vm_act *a)
{
    const isa_inst *in = &vm->prog->insts[a->inst];
    const isa_op_info *info = &isa_ops[in->op];
    vm_ctx *c = a->ctx;
    uint32_t ports = isa_ports(in);
    dev_value inputs[3] = {{0}};
    bool dead = false;

    vm->stats.fired++;
    if (ports <= 1 || in->op == ISA_MERGE) {
        inputs[0] = a->v;
        dead = a->v.dead;
    } else if (ports > 1) {
        const vm_iplan *ip = &vm->plan.insts[a->inst];
        dev_value *s = &c->slots[ip->slot];
        for (uint32_t p = 0; p < ports; p++) {
            dead |= s[p].dead;
            if (p < in->n_in && p < 3)
                inputs[p] = s[p];
            else
                dev_value_release(&s[p]);
            s[p] = (dev_value){0};
        }
    }

    switch (info->cls) {
    case ISA_CLASS_SOURCE:
        if (in->op == ISA_ARG) {
            vm_send(vm, c, a->inst, 0, &inputs[0]);
        } else {
            dev_value v = dead ? dev_dead() : vm->consts[in->a];
            vm_send(vm, c, a->inst, 0, &v);
            dev_value_release(&inputs[0]);
        }
        break;
    case ISA_CLASS_SINK:
        fire_result(vm, a, &inputs[0]);
        break;
    case ISA_CLASS_CONTROL:
        vm_fire_control(vm, a, inputs);
        break;
    default: {
        dev_value out = dev_dead();
        if (!dead) {
            char msg[256];
            tfvm_status st = dev_cpu_elementwise((isa_op)in->op, in->a, inputs, &out, &vm->alloc, msg,
                                                 sizeof msg);
            if (st != TFVM_OK) {
                vm_fail(vm, st, c, a->inst, "%s", msg);
                break;
            }
        }
        vm_send(vm, c, a->inst, 0, &out);
        dev_value_release(&out);
        break;
    }
    }
    for (int i = 0; i < 3; i++)
        dev_value_release(&inputs[i]);
    vm_ctx_unref(vm, c);
}

vm_state vm_step(tfvm_vm *vm, uint64_t max)
{
    if (vm->state != VM_RUNNING && vm->state != VM_PAUSED)
        return vm->state;
    vm->state = VM_RUNNING;
    uint64_t n = 0;
    vm_act a;
    while (max == 0 || n < max) {
        if (atomic_load_explicit(&vm->interrupted, memory_order_relaxed) &&
            atomic_exchange(&vm->interrupted, 0)) {
            vm_fail(vm, TFVM_ERR_INTERRUPTED, NULL, ISA_NONE, "interrupted");
            break;
        }
        if (vm->has_paused) {
            a = vm->paused;
            vm->has_paused = false;
        } else {
            if (!sched_pop(&vm->queue, &a)) {
                vm->state = VM_DONE;
                break;
            }
            if (vm->hook && vm->hook(vm->hook_ud, vm, &a)) {
                vm->paused = a;
                vm->has_paused = true;
                vm->state = VM_PAUSED;
                return vm->state;
            }
        }
        fire(vm, &a);
        n++;
        if (vm->state == VM_FAILED)
            break;
    }
    return vm->state;
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
    }
    return d;
}

static void teardown(tfvm_vm *vm);

tfvm_status vm_begin(tfvm_vm *vm, uint32_t entry, const tfvm_value *args, size_t n_args)
{
    const isa_program *p = vm->prog;
    const isa_entry *en = &p->entries[entry];
    /* A previous run that was stepped but never ended (a debugger that
     * stopped early) is discarded, so that nothing of it leaks. */
    if (vm->root || vm->results || vm->live.next_live != &vm->live)
        teardown(vm);
    ut_err_clear(&vm->err);
    memset(&vm->stats, 0, sizeof vm->stats);
    vm->state = VM_RUNNING;
    atomic_store(&vm->interrupted, 0);
    vm->has_paused = false;
    vm->entry = entry;
    vm->t_start = now_seconds();

    if (n_args != en->n_params) {
        vm->state = VM_FAILED;
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "entry '%s' takes %u argument%s, got %zu", en->name,
                      en->n_params, en->n_params == 1 ? "" : "s", n_args);
    }
    for (size_t i = 0; i < n_args; i++) {
        if (!type_matches(&en->params[i], &args[i])) {
            char want[32], got[32];
            describe_type(&en->params[i], want, sizeof want);
            describe_value_type(&args[i], got, sizeof got);
            vm->state = VM_FAILED;
            return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "argument %zu '%s' of entry '%s': expected %s, got %s",
                          i + 1, en->params[i].name, en->name, want, got);
        }
    }
    vm->results = ut_calloc(&vm->alloc, en->n_results + 1, sizeof(dev_value));
    if (!vm->results) {
        vm->state = VM_FAILED;
        return ut_err(&vm->err, TFVM_ERR_NOMEM, "out of memory starting a run");
    }
    vm->root = vm_ctx_new(vm, NULL, en->region, VM_CTX_ROOT, 0);
    if (!vm->root) {
        tfvm_status st = vm->err.code;
        teardown(vm);
        vm->state = VM_FAILED;
        return st;
    }
    vm->root->refs = 1; /* the run's own hold, dropped in vm_end */
    /* Sources fire once at the root tag: every ARG, and CONSTs without
     * control inputs. Pushed in reverse so the LIFO fires them in order. */
    const vm_rplan *rp = &vm->plan.regions[en->region];
    for (uint32_t i = rp->end; i-- > rp->first && vm->state == VM_RUNNING;) {
        const isa_inst *in = &p->insts[i];
        if (in->op == ISA_ARG) {
            dev_value v = from_api(&args[in->a]);
            push_act(vm, vm->root, i, 0, &v); /* takes v, even when it fails */
        } else if (in->op == ISA_CONST && in->n_ctl == 0) {
            push_act(vm, vm->root, i, 0, NULL);
        }
    }
    return vm->state == VM_FAILED ? vm->err.code : TFVM_OK;
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
    }
}

/* Names the instructions holding partial matches, for a stuck run. */
static void diagnose(tfvm_vm *vm, ut_buf *out, size_t *n_waiting)
{
    const isa_program *p = vm->prog;
    *n_waiting = 0;
    for (vm_ctx *c = vm->live.prev_live; c != &vm->live; c = c->prev_live) {
        const vm_rplan *rp = &vm->plan.regions[c->region];
        for (uint32_t i = rp->first; i < rp->end; i++) {
            const isa_inst *in = &p->insts[i];
            uint32_t ports = isa_ports(in);
            if (ports < 2)
                continue;
            const vm_iplan *ip = &vm->plan.insts[i];
            uint32_t cnt = c->counts[ip->match];
            if (cnt == 0 || (cnt & MERGE_FIRED) || (in->op != ISA_MERGE && cnt >= ports))
                continue;
            char label[128];
            if ((*n_waiting)++)
                ut_buf_append(out, "; ", 2);
            ut_buf_printf(out, "%s (%s) at ", isa_inst_label(p, i, label, sizeof label), isa_ops[in->op].name);
            vm_format_tag(vm, c, out);
            ut_buf_append(out, " has input", 10);
            const char *sep = " ";
            for (uint32_t k = 0; k < ports; k++)
                if (slot_present(&c->slots[ip->slot + k])) {
                    ut_buf_printf(out, "%s%u", sep, k);
                    sep = ", ";
                }
            ut_buf_append(out, ", missing input", 15);
            sep = " ";
            for (uint32_t k = 0; k < ports; k++)
                if (!slot_present(&c->slots[ip->slot + k])) {
                    ut_buf_printf(out, "%s%u", sep, k);
                    sep = ", ";
                }
        }
    }
}

static tfvm_status check_results(tfvm_vm *vm)
{
    const isa_entry *en = &vm->prog->entries[vm->entry];
    for (uint32_t k = 0; k < en->n_results; k++) {
        const dev_value *r = &vm->results[k];
        if (r->dead) {
            vm_fail(vm, TFVM_ERR_STUCK, NULL, ISA_NONE,
                    "result %u '%s' of entry '%s' received a dead token (no branch produced it)", k,
                    en->results[k].name, en->name);
            return vm->err.code;
        }
        if (slot_present(r))
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

/* Frees every context, loop and queued activation of the run. */
static void teardown(tfvm_vm *vm)
{
    if (vm->queue.policy) {
        vm->queue.policy->each(&vm->queue, drop_act, NULL);
        sched_fini(&vm->queue);
        sched_init(&vm->queue, vm->policy, sizeof(vm_act), &vm->alloc);
    }
    if (vm->has_paused) {
        dev_value_release(&vm->paused.v);
        vm->has_paused = false;
    }
    while (vm->live_loops.next_live != &vm->live_loops)
        vm_loop_destroy(vm, vm->live_loops.next_live);
    while (vm->live.next_live != &vm->live) {
        vm_ctx *c = vm->live.next_live;
        const vm_rplan *rp = &vm->plan.regions[c->region];
        for (uint32_t k = 0; k < rp->n_slots; k++)
            dev_value_release(&c->slots[k]);
        ctx_recycle(vm, c);
    }
    if (vm->results) {
        const isa_entry *en = &vm->prog->entries[vm->entry];
        for (uint32_t k = 0; k < en->n_results; k++)
            dev_value_release(&vm->results[k]);
        ut_free(&vm->alloc, vm->results, (en->n_results + 1) * sizeof(dev_value));
        vm->results = NULL;
    }
    vm->root = NULL;
}

tfvm_status vm_end(tfvm_vm *vm, tfvm_value *results, size_t n_results)
{
    const isa_entry *en = &vm->prog->entries[vm->entry];
    tfvm_status st = TFVM_OK;
    if (vm->state == VM_DONE) {
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
    } else if (vm->state == VM_FAILED) {
        st = vm->err.code;
    } else if (vm->state == VM_RUNNING || vm->state == VM_PAUSED) {
        st = ut_err(&vm->err, TFVM_ERR_INTERRUPTED, "run abandoned before it finished");
    }
    if (vm->root && vm->state != VM_FAILED) {
        vm_ctx *root = vm->root;
        vm->root = NULL;
        vm_ctx_unref(vm, root);
    }
    teardown(vm);
    vm->stats.wall_seconds = now_seconds() - vm->t_start;
    vm->state = st == TFVM_OK ? VM_IDLE : VM_FAILED;
    return st;
}
