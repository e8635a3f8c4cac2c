/* vm/debug_api.c — the public inspection interface (include/tfvm_debug.h):
 * thin, checked wrappers over the VM's own stepping and read-only walks
 * (vm/run.c, vm/fire.c, vm/inspect.c, vm/io.c) so that tools need no VM
 * internals. */
#include <stdio.h>
#include <string.h>

#include "devices/cpu/cpu.h"
#include "devices/place.h"
#include "loader/loader.h"
#include "tfvm_debug.h"
#include "vm.h"

/* A public context is a vm_ctx; the type stays opaque outside. */
static const vm_ctx *dbg_ctx(const tfvm_debug_ctx *c) { return (const vm_ctx *)(const void *)c; }
static const tfvm_debug_ctx *dbg_pub(const vm_ctx *c) { return (const tfvm_debug_ctx *)(const void *)c; }

/* Copies a formatted buffer out like snprintf: the whole length, cut to size. */
static size_t dbg_copy_out(ut_buf *b, char *buf, size_t size)
{
    size_t len = b->failed ? 0 : b->len;
    if (size) {
        size_t n = len < size - 1 ? len : size - 1;
        if (n)
            memcpy(buf, b->data, n);
        buf[n] = '\0';
    }
    ut_buf_free(b);
    return len;
}

/* ---- Programs ------------------------------------------------------------------- */

static const char *dbg_region_kind(uint8_t kind);

size_t tfvm_program_inst_count(const tfvm_program *p) { return p ? p->isa.n_insts : 0; }

tfvm_status tfvm_program_inst(const tfvm_program *p, uint32_t i, tfvm_inst_info *out)
{
    if (!p || !out || i >= p->isa.n_insts)
        return TFVM_ERR_ARGUMENT;
    const isa_inst *in = &p->isa.insts[i];
    const isa_region *r = &p->isa.regions[in->region];
    out->op = isa_ops[in->op].name;
    out->name = in->name;
    out->region = r->name;
    out->region_kind = dbg_region_kind(r->kind);
    isa_class cls = isa_ops[in->op].cls;
    out->op_class = cls == ISA_CLASS_SOURCE ? "source" : cls == ISA_CLASS_SINK ? "sink"
                  : cls == ISA_CLASS_CONTROL ? "control" : cls == ISA_CLASS_HOST ? "host" : "compute";
    out->synopsis = isa_ops[in->op].synopsis;
    out->attr = (in->op == ISA_ARG || in->op == ISA_RESULT || in->op == ISA_CALL || in->op == ISA_RETURN ||
                 in->op == ISA_ENTER || in->op == ISA_EXIT) ? in->a : 0;
    out->const_port = isa_imm_port(in);
    out->enter_const = in->op == ISA_ENTER && (in->flags & ISA_FLAG_CONST);
    out->prune_false = isa_is_switch(in->op) && (in->flags & ISA_FLAG_PRUNE_FALSE);
    out->prune_true = isa_is_switch(in->op) && (in->flags & ISA_FLAG_PRUNE_TRUE);
    out->region_index = in->region;
    out->n_edges = in->n_edges;
    out->n_in = in->n_in;
    out->n_ctl = in->n_ctl;
    out->n_out = isa_outs(in);
    out->line = in->line;
    out->col = in->col;
    out->origin = in->origin;
    out->origin_op = in->origin_op;
    return TFVM_OK;
}

static const char *dbg_region_kind(uint8_t kind)
{
    return kind == ISA_REGION_LOOP ? "loop" : kind == ISA_REGION_FUNC ? "func" : "entry";
}

size_t tfvm_program_var_count(const tfvm_program *p) { return p ? p->isa.n_vars : 0; }

tfvm_status tfvm_program_var(const tfvm_program *p, size_t j, tfvm_var_info *out)
{
    if (!p || !out || j >= p->isa.n_vars)
        return TFVM_ERR_ARGUMENT;
    const isa_program *g = &p->isa;
    const isa_var *v = &g->vars[j];
    const isa_inst *in = &g->insts[v->inst];
    out->name = v->name;
    out->inst = v->inst;
    out->out = v->out;
    switch ((isa_op)in->op) { /* where the output's tokens land (verify.c's rule) */
    case ISA_ENTER: out->region = in->a; break;
    case ISA_EXIT: out->region = g->regions[in->a].parent; break;
    case ISA_CALL: out->region = g->sites[in->a].callee; break;
    default: out->region = in->region; break;
    }
    return TFVM_OK;
}

size_t tfvm_program_region_count(const tfvm_program *p) { return p ? p->isa.n_regions : 0; }

tfvm_status tfvm_program_region(const tfvm_program *p, uint32_t r, tfvm_region_info *out)
{
    if (!p || !out || r >= p->isa.n_regions)
        return TFVM_ERR_ARGUMENT;
    const isa_region *g = &p->isa.regions[r];
    out->name = g->name;
    out->kind = dbg_region_kind(g->kind);
    out->parent = g->kind == ISA_REGION_LOOP ? g->parent : UINT32_MAX;
    out->entry = -1;
    out->first_inst = out->end_inst = 0;
    for (uint32_t i = 0; i < p->isa.n_insts; i++)
        if (p->isa.insts[i].region == r) { /* a region's instructions are contiguous (verify.c) */
            if (out->end_inst == 0)
                out->first_inst = i;
            out->end_inst = i + 1;
        }
    for (uint32_t e = 0; e < p->isa.n_entries; e++)
        if (p->isa.entries[e].region == r)
            out->entry = (int)e;
    return TFVM_OK;
}

size_t tfvm_program_edges(const tfvm_program *p, uint32_t i, tfvm_edge_info *out, size_t max)
{
    if (!p || i >= p->isa.n_insts)
        return 0;
    const isa_inst *in = &p->isa.insts[i];
    for (uint32_t k = 0; k < in->n_edges && k < max; k++) {
        const isa_edge *e = &p->isa.edges[in->edge_first + k];
        out[k] = (tfvm_edge_info){e->out, e->inst, e->port};
    }
    return in->n_edges;
}

size_t tfvm_program_site_count(const tfvm_program *p) { return p ? p->isa.n_sites : 0; }

tfvm_status tfvm_program_site(const tfvm_program *p, uint32_t s, tfvm_site_info *out)
{
    if (!p || !out || s >= p->isa.n_sites)
        return TFVM_ERR_ARGUMENT;
    out->id = p->isa.sites[s].id;
    out->callee = p->isa.sites[s].callee;
    return TFVM_OK;
}

const char *tfvm_site_label(const tfvm_program *p, uint32_t s, char *buf, size_t size)
{
    if (!p || s >= p->isa.n_sites) {
        if (size)
            snprintf(buf, size, "?");
        return buf;
    }
    const isa_site *x = &p->isa.sites[s];
    return isa_site_label(p->isa.regions[x->callee].name, x->id, buf, size);
}

const char *tfvm_op_name(size_t k) { return k < ISA_OP_COUNT ? isa_ops[k].name : NULL; }

const char *tfvm_program_source(const tfvm_program *p) { return p ? p->isa.source : NULL; }

size_t tfvm_inst_format(const tfvm_program *p, uint32_t i, char *buf, size_t size)
{
    ut_buf b;
    ut_buf_init(&b, NULL);
    ld_format_inst(p ? &p->isa : NULL, i, &b);
    return dbg_copy_out(&b, buf, size);
}

const char *tfvm_inst_label(const tfvm_program *p, uint32_t i, char *buf, size_t size)
{
    if (!p || i >= p->isa.n_insts) {
        if (size)
            snprintf(buf, size, "?");
        return buf;
    }
    return isa_inst_label(&p->isa, i, buf, size);
}

const char *tfvm_inst_where(const tfvm_program *p, uint32_t i, char *buf, size_t size)
{
    if (!p || i >= p->isa.n_insts) {
        if (size)
            buf[0] = '\0';
        return buf;
    }
    return isa_inst_where(&p->isa, i, buf, size);
}

/* ---- Runs under control ------------------------------------------------------------ */

static bool dbg_trampoline(void *ud, struct tfvm_vm *vm, const vm_act *a)
{
    const tfvm_debug_hook *h = ud;
    return h->fn(h->ud, vm, (const tfvm_debug_act *)(const void *)a);
}

void tfvm_debug_set_hook(tfvm_vm *vm, const tfvm_debug_hook *hook)
{
    if (!vm)
        return;
    vm->hook = hook && hook->fn ? dbg_trampoline : NULL;
    vm->hook_ud = hook && hook->fn ? (void *)(uintptr_t)hook : NULL;
}

tfvm_status tfvm_debug_begin(tfvm_vm *vm, const char *entry, const tfvm_value *args, size_t n_args)
{
    if (!vm)
        return TFVM_ERR_ARGUMENT;
    if (vm->n_workers != 1) {
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "debugging needs a VM of one thread (it has %u)", vm->n_workers);
    }
    uint32_t e = 0;
    if (entry) {
        for (e = 0; e < vm->prog->n_entries && strcmp(vm->prog->entries[e].name, entry) != 0; e++)
            ;
        if (e == vm->prog->n_entries) {
            return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "no entry point named '%s'", entry);
        }
    }
    tfvm_status st = vm_begin(vm, e, args, n_args);
    vm->iter_order = st == TFVM_OK; /* loops stop first at iteration 0 (fire.c) */
    return st;
}

static tfvm_debug_state dbg_state(vm_state s)
{
    switch (s) {
    case VM_RUNNING: return TFVM_DEBUG_RUNNING;
    case VM_PAUSED: return TFVM_DEBUG_PAUSED;
    case VM_DONE: return TFVM_DEBUG_DONE;
    case VM_FAILED: return TFVM_DEBUG_FAILED;
    default: return TFVM_DEBUG_IDLE;
    }
}

tfvm_debug_state tfvm_debug_step(tfvm_vm *vm, uint64_t max)
{
    if (!vm)
        return TFVM_DEBUG_IDLE;
    return dbg_state(vm_step(vm, max));
}

tfvm_status tfvm_debug_end(tfvm_vm *vm, tfvm_value *results, size_t n_results)
{
    if (!vm)
        return TFVM_ERR_ARGUMENT;
    if (atomic_load(&vm->state) == VM_IDLE)
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "no run to end (tfvm_debug_begin starts one)");
    return vm_end(vm, results, n_results);
}

static const vm_act *dbg_act(const tfvm_debug_act *a) { return (const vm_act *)(const void *)a; }

const tfvm_debug_act *tfvm_debug_paused(const tfvm_vm *vm)
{
    if (!vm || !vm->has_paused || atomic_load(&vm->state) != VM_PAUSED)
        return NULL;
    return (const tfvm_debug_act *)(const void *)&vm->paused;
}

typedef struct dbg_ready {
    void (*fn)(void *ud, const tfvm_debug_act *act);
    void *ud;
} dbg_ready;

static void dbg_ready_one(void *ud, const vm_act *a)
{
    const dbg_ready *r = ud;
    r->fn(r->ud, (const tfvm_debug_act *)(const void *)a);
}

/* A VM value as a public one, borrowed (no reference taken). */
static tfvm_debug_token dbg_token(const dev_value *v, tfvm_value *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!v || (!v->dtype && !v->dead))
        return TFVM_TOKEN_NONE;
    if (v->dead)
        return TFVM_TOKEN_DEAD;
    if (out) {
        out->dtype = (tfvm_dtype)v->dtype;
        if (v->is_tensor)
            out->tensor = v->u.t;
        else
            memcpy(&out->as, &v->u, sizeof out->as);
    }
    return TFVM_TOKEN_LIVE;
}

uint32_t tfvm_debug_act_inst(const tfvm_debug_act *act) { return dbg_act(act)->inst; }
const tfvm_debug_ctx *tfvm_debug_act_ctx(const tfvm_debug_act *act) { return dbg_pub(dbg_act(act)->ctx); }
uint32_t tfvm_debug_act_merge_input(const tfvm_debug_act *act) { return dbg_act(act)->aux; }

tfvm_debug_token tfvm_debug_act_input(const tfvm_vm *vm, const tfvm_debug_act *act, uint32_t port, tfvm_value *out)
{
    if (!vm || !act)
        return dbg_token(NULL, out);
    const vm_act *a = dbg_act(act);
    if (vm->prog->insts[a->inst].op == ISA_ARG) /* no inputs: it carries its argument */
        return dbg_token(port == 0 ? &a->v : NULL, out);
    return dbg_token(vm_act_input(vm, a, port), out);
}

bool tfvm_debug_act_dead(const tfvm_vm *vm, const tfvm_debug_act *act)
{
    const vm_act *a = dbg_act(act);
    const vm_iplan *ip = &vm->plan.insts[a->inst];
    /* a matched instruction is dead when any port is (MERGE: the chosen value) */
    if (ip->matched && vm->prog->insts[a->inst].op != ISA_MERGE) {
        for (uint32_t k = 0; k < ip->ports; k++)
            if (a->ctx->slots[ip->slot + k].dead)
                return true;
        return false;
    }
    return a->v.dead;
}

int tfvm_debug_act_way(const tfvm_vm *vm, const tfvm_debug_act *act)
{
    const vm_act *a = dbg_act(act);
    const isa_inst *in = &vm->prog->insts[a->inst];
    if (!isa_is_switch(in->op) || tfvm_debug_act_dead(vm, act))
        return -1;
    if (in->op == ISA_SWITCH) { /* the engines' rule (vm/rules.h) */
        const dev_value *pred = vm_act_input(vm, a, 1);
        vm_route_to to = pred ? vm_rule_predicate(pred) : VM_ROUTE_BAD;
        return to <= VM_ROUTE_TRUE ? (int)to : -1;
    }
    /* BRANCH: data OP constant, by the comparison's kernel on scalars (no
     * allocation); a tensor's predicate is not a bool scalar */
    const dev_value *x = vm_act_input(vm, a, 0);
    if (!x || x->is_tensor)
        return -1;
    dev_value args[2] = {*x, vm->consts[in->b]}, pred;
    if (dev_cpu_elementwise((isa_op)in->a, 0, args, &pred, &vm->alloc, NULL, 0) != TFVM_OK || pred.is_tensor)
        return -1;
    return pred.u.b;
}

bool tfvm_debug_inst_const(const tfvm_vm *vm, uint32_t inst, tfvm_value *out)
{
    if (!vm || inst >= vm->prog->n_insts)
        return false;
    const isa_inst *in = &vm->prog->insts[inst];
    if (in->op == ISA_CONST)
        return dbg_token(&vm->consts[in->a], out) == TFVM_TOKEN_LIVE;
    if (isa_imm_port(in) >= 0)
        return dbg_token(&vm->consts[in->b], out) == TFVM_TOKEN_LIVE;
    return false;
}

tfvm_debug_token tfvm_debug_result(const tfvm_vm *vm, uint32_t k, tfvm_value *out)
{
    if (!vm || !vm->results || !vm->result_set || k >= vm->prog->entries[vm->entry].n_results ||
        !atomic_load(&vm->result_set[k]))
        return dbg_token(NULL, out);
    return dbg_token(&vm->results[k], out);
}

size_t tfvm_debug_ready(const tfvm_vm *vm, void (*fn)(void *ud, const tfvm_debug_act *act), void *ud)
{
    if (!vm)
        return 0;
    dbg_ready r = {fn, ud};
    return vm_ready_each(vm, fn ? dbg_ready_one : NULL, &r);
}

bool tfvm_debug_inst_matched(const tfvm_vm *vm, uint32_t inst)
{
    return vm && inst < vm->prog->n_insts && vm->plan.insts[inst].matched;
}

void tfvm_debug_stats(const tfvm_vm *vm, tfvm_stats *out)
{
    if (!vm || !vm->root) { /* no run going, or ended */
        tfvm_vm_stats(vm, out);
        return;
    }
    *out = vm->w[0].st; /* one worker: a debugged run */
    out->contexts_peak = (uint64_t)atomic_load(&vm->live_peak);
}

/* ---- Contexts and tags ------------------------------------------------------------------ */

tfvm_status tfvm_debug_contexts(const tfvm_vm *vm, const tfvm_debug_ctx ***out, size_t *n)
{
    vm_ctx **all;
    tfvm_status st = vm_live_contexts(vm, &all, n);
    *out = (const tfvm_debug_ctx **)(void *)all;
    return st;
}

void tfvm_debug_contexts_free(const tfvm_vm *vm, const tfvm_debug_ctx **list, size_t n)
{
    if (list)
        vm_contexts_free(vm, (vm_ctx **)(void *)list, n);
}

const char *tfvm_debug_tag(const tfvm_vm *vm, const tfvm_debug_ctx *ctx, char *buf, size_t size)
{
    return vm_tag_str(vm, dbg_ctx(ctx), buf, size);
}

const tfvm_debug_ctx *tfvm_debug_parent(const tfvm_debug_ctx *ctx) { return ctx ? dbg_pub(dbg_ctx(ctx)->parent) : NULL; }

void tfvm_debug_ctx_get(const tfvm_debug_ctx *ctx, tfvm_debug_ctx_info *out)
{
    const vm_ctx *c = dbg_ctx(ctx);
    memset(out, 0, sizeof *out);
    out->kind = c->kind == VM_CTX_CALL ? TFVM_CTX_CALL : c->kind == VM_CTX_ITER ? TFVM_CTX_ITER : TFVM_CTX_ROOT;
    out->region = c->region;
    out->site = c->kind == VM_CTX_CALL ? c->elem : 0;
    out->iter = c->kind == VM_CTX_ITER ? c->iter : 0;
    out->serial = c->serial;
}

bool tfvm_debug_ctx_alive(const tfvm_debug_ctx *ctx, uint64_t serial) { return vm_ctx_same(dbg_ctx(ctx), serial); }

void tfvm_debug_live(const tfvm_vm *vm, uint64_t *contexts, uint64_t *loops)
{
    uint64_t c = 0, l = 0;
    if (vm)
        vm_count_live(vm, &c, &l);
    if (contexts)
        *contexts = c;
    if (loops)
        *loops = l;
}

uint32_t tfvm_debug_loop_slots(const tfvm_vm *vm, const tfvm_debug_ctx *ctx)
{
    return vm && ctx ? vm->plan.regions[dbg_ctx(ctx)->region].n_frames : 0;
}

bool tfvm_debug_loop(const tfvm_vm *vm, const tfvm_debug_ctx *ctx, uint32_t slot, tfvm_debug_loop_info *out)
{
    const vm_loop *l = vm && ctx ? vm_ctx_loop(vm, dbg_ctx(ctx), slot) : NULL;
    if (!l)
        return false;
    uint64_t live = 0;
    for (const vm_ctx *it = l->first; it; it = it->next_iter)
        live++;
    out->frame = l->frame;
    out->started = l->next;
    out->live = live;
    out->deferred = l->n_deferred;
    out->parallel = vm->plan.frames[l->frame].parallel;
    out->next = l->next;
    return true;
}

tfvm_debug_token tfvm_debug_loop_deferred(const tfvm_vm *vm, const tfvm_debug_ctx *ctx, uint32_t slot, uint32_t j,
                                          uint32_t *inst, tfvm_value *out)
{
    const vm_loop *l = vm && ctx ? vm_ctx_loop(vm, dbg_ctx(ctx), slot) : NULL;
    if (!l || j >= l->n_deferred)
        return dbg_token(NULL, out);
    if (inst)
        *inst = l->deferred[j].inst;
    return dbg_token(&l->deferred[j].v, out);
}

/* ---- Matching ----------------------------------------------------------------------------- */

tfvm_debug_match tfvm_debug_match_state(const tfvm_vm *vm, const tfvm_debug_ctx *ctx, uint32_t inst)
{
    if (!vm || !ctx || inst >= vm->prog->n_insts)
        return TFVM_MATCH_NONE;
    switch (vm_match_state(vm, dbg_ctx(ctx), inst)) {
    case VM_MATCH_WAITING: return TFVM_MATCH_WAITING;
    case VM_MATCH_READY: return TFVM_MATCH_READY;
    case VM_MATCH_FIRED: return TFVM_MATCH_FIRED;
    default: return TFVM_MATCH_NONE;
    }
}

bool tfvm_debug_port_arrived(const tfvm_vm *vm, const tfvm_debug_ctx *ctx, uint32_t inst, uint32_t port)
{
    if (!vm || !ctx || inst >= vm->prog->n_insts)
        return false;
    return vm_port_arrived(vm, dbg_ctx(ctx), inst, port);
}

tfvm_debug_token tfvm_debug_port_get(const tfvm_vm *vm, const tfvm_debug_ctx *ctx, uint32_t inst, uint32_t port,
                                     tfvm_value *out)
{
    const dev_value *v = NULL;
    if (vm && ctx && inst < vm->prog->n_insts)
        v = vm_port_value(vm, dbg_ctx(ctx), inst, port);
    return dbg_token(v, out);
}

/* v formatted as the debugger prints values into buf; false (and "") when
 * there is none: NULL, or an empty slot. */
static bool dbg_format(const dev_value *v, char *buf, size_t size)
{
    if (!v || (!v->dtype && !v->dead)) {
        if (size)
            buf[0] = '\0';
        return false;
    }
    ut_buf b;
    ut_buf_init(&b, NULL);
    vm_format_value(v, &b);
    dbg_copy_out(&b, buf, size);
    return true;
}

bool tfvm_debug_port_value(const tfvm_vm *vm, const tfvm_debug_ctx *ctx, uint32_t inst, uint32_t port, char *buf,
                           size_t size)
{
    const dev_value *v = NULL;
    if (vm && ctx && inst < vm->prog->n_insts)
        v = vm_port_value(vm, dbg_ctx(ctx), inst, port);
    return dbg_format(v, buf, size);
}

/* ---- Channels (vm/io.c's view of them) ------------------------------------------------------ */

size_t tfvm_debug_channels(const tfvm_vm *vm) { return vm ? vm_io_channels(vm) : 0; }

tfvm_status tfvm_debug_channel(const tfvm_vm *vm, size_t k, tfvm_debug_chan_info *out)
{
    vm_chan_view c;
    if (!vm || !out || !vm_io_channel(vm, k, &c))
        return TFVM_ERR_ARGUMENT;
    *out = (tfvm_debug_chan_info){.name = c.name, .fetch = c.fetch, .inst = c.inst, .queued = c.queued,
                                  .waiting = c.waiting, .count = c.count, .host = c.host};
    if (!c.fetch) { /* a FETCH's b is no type: it passes any value on */
        out->dtype = (tfvm_dtype)ISA_CHAN_DTYPE(c.type);
        out->is_tensor = (c.type & ISA_CHAN_TENSOR) != 0;
    }
    return TFVM_OK;
}

/* The channel named `name`, or -1. */
static int dbg_chan_find(const tfvm_vm *vm, const char *name)
{
    vm_chan_view c;
    for (size_t k = 0; vm_io_channel(vm, k, &c); k++)
        if (strcmp(c.name, name) == 0)
            return (int)k;
    return -1;
}

int tfvm_debug_inst_channel(const tfvm_vm *vm, uint32_t inst)
{
    if (!vm || inst >= vm->prog->n_insts || isa_ops[vm->prog->insts[inst].op].cls != ISA_CLASS_HOST)
        return -1;
    char name[ISA_MAX_CHAN + 1];
    return dbg_chan_find(vm, isa_chan_name(vm->prog, inst, name));
}

tfvm_debug_token tfvm_debug_chan_value(const tfvm_vm *vm, size_t k, size_t j, tfvm_value *out)
{
    return dbg_token(vm ? vm_io_queued(vm, k, j) : NULL, out);
}

bool tfvm_debug_chan_value_format(const tfvm_vm *vm, size_t k, size_t j, char *buf, size_t size)
{
    return dbg_format(vm ? vm_io_queued(vm, k, j) : NULL, buf, size);
}

bool tfvm_debug_chan_waiting(const tfvm_vm *vm, size_t k, size_t j, const tfvm_debug_ctx **ctx, uint32_t *inst)
{
    const vm_ctx *c = NULL;
    uint32_t i = 0;
    if (!vm || !vm_io_waiting(vm, k, j, &c, &i))
        return false;
    if (ctx)
        *ctx = dbg_pub(c);
    if (inst)
        *inst = i;
    return true;
}

tfvm_status tfvm_debug_feed(tfvm_vm *vm, const char *name, const tfvm_value *v)
{
    if (!vm)
        return TFVM_ERR_ARGUMENT;
    if (atomic_load(&vm->state) == VM_FAILED) /* vm->err holds the run's error: keep it */
        return TFVM_ERR_ARGUMENT;
    if (!vm->root) /* vm_io_begin empties the queues: a value fed before it would be lost */
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "no run to feed (tfvm_debug_begin starts one)");
    if (!name || !v)
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "feed: the channel name or the value is NULL");
    int k = dbg_chan_find(vm, name);
    vm_chan_view c;
    if (k >= 0 && vm_io_channel(vm, (size_t)k, &c) && c.fetch)
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "channel '%s' is fetched, not fed", name);
    /* vm_io_queue only queues: a parked FEED (a session's) would be passed
     * over, and take the host's next value out of order */
    if (k >= 0 && c.waiting)
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "a FEED of channel '%s' waits for the host: feed it with tfvm_feed",
                      name);
    if (k < 0) { /* the session's wording (vm/io.c find_chan) */
        char list[256] = "";
        size_t n = 0;
        for (size_t j = 0; vm_io_channel(vm, j, &c) && n < sizeof list; j++)
            if (!c.fetch)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s'%s'", n ? ", " : "", c.name);
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "the program has no FEED channel '%s' (%s%s)", name,
                      n ? "it has " : "it has none", list);
    }
    char msg[256];
    tfvm_status st = vm_io_queue(vm, name, v, msg, sizeof msg);
    return st == TFVM_OK ? st : ut_err(&vm->err, st, "%s", msg);
}

tfvm_status tfvm_debug_keep_fetched(tfvm_vm *vm)
{
    if (!vm)
        return TFVM_ERR_ARGUMENT;
    if (!vm->root) /* vm_io_begin clears the flag */
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "no run to keep values of (tfvm_debug_begin starts one)");
    vm_io_keep(vm);
    return TFVM_OK;
}

/* ---- Values and counters ---------------------------------------------------------------- */

size_t tfvm_value_format(const tfvm_value *v, char *buf, size_t size)
{
    ut_buf b;
    ut_buf_init(&b, NULL);
    if (!v) {
        ut_buf_printf(&b, "?");
        return dbg_copy_out(&b, buf, size);
    }
    dev_value d = {.dtype = (uint8_t)v->dtype};
    if (v->tensor) {
        d.is_tensor = 1;
        d.dtype = (uint8_t)tfvm_tensor_dtype(v->tensor);
        d.u.t = v->tensor; /* borrowed: vm_format_value only reads it */
    } else {
        memcpy(&d.u, &v->as, sizeof v->as);
    }
    vm_format_value(&d, &b);
    return dbg_copy_out(&b, buf, size);
}

tfvm_status tfvm_debug_profile(tfvm_vm *vm, bool on) { return vm ? vm_profile(vm, on) : TFVM_ERR_ARGUMENT; }

void tfvm_debug_profile_read(const tfvm_vm *vm, uint64_t *count, double *ns)
{
    if (vm)
        vm_profile_read(vm, count, ns);
}

tfvm_status tfvm_debug_trace(tfvm_vm *vm, size_t max_events)
{
    if (!vm)
        return TFVM_ERR_ARGUMENT;
    vm_trace(vm, max_events);
    return TFVM_OK;
}

size_t tfvm_debug_trace_read(const tfvm_vm *vm, void (*fn)(void *ud, const tfvm_debug_trace_ev *ev), void *ud,
                             uint64_t *dropped)
{
    if (!vm) {
        if (dropped)
            *dropped = 0;
        return 0;
    }
    return vm_trace_read(vm, fn, ud, dropped);
}

size_t tfvm_debug_device_stats(const tfvm_vm *vm, char *buf, size_t size)
{
    if (buf && size)
        buf[0] = '\0';
    if (!vm)
        return 0;
    dev_vm_stats s;
    dev_vm_get_stats(vm->dev, &s);
    if (!(s.pool[DEV_CPU].hits + s.pool[DEV_CPU].misses + s.pool[DEV_CUDA].hits + s.pool[DEV_CUDA].misses))
        return 0;
    char line[512];
    dev_vm_stats_line(vm->dev, line, sizeof line);
    return (size_t)snprintf(buf, size, "%s", line);
}
