/* vm/io.c — the host's side of a run (docs/coexec.md): channels, FEED and
 * FETCH firings, and sessions (tfvm_session_*), in which a host program
 * feeds and fetches while the graph runs on its own thread.
 *
 * One lock (io->lock) guards every channel; its order is before the
 * scheduler's park_lock (a feed hands a waiting FEED's activation to the
 * scheduler's inbox while holding it). Workers never wait on the host: a
 * FEED with nothing queued parks its firing here and holds the run open
 * (sched_hold); the host's feed completes it through the inbox. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/place.h"
#include "vm.h"
#include "vm/signature.h"

/* A FEED activation handed back by the host: aux = VM_FEED_RESUMED | its
 * value's number, v = the value. */
#define VM_FEED_RESUMED 0x80000000u

typedef struct vm_parked {
    vm_ctx *ctx; /* holds a reference */
    uint32_t inst;
} vm_parked;

typedef struct vm_chan {
    char name[ISA_MAX_CHAN + 1];
    bool fetch;         /* fetched by the host (else fed) */
    uint32_t type;      /* FEED: its value type (isa_inst.b) */
    uint32_t inst;      /* its first instruction, for messages */
    dev_value *q;       /* FEED: fed, not yet taken; FETCH: fetched, not yet taken by the host */
    size_t q_head, q_n, q_cap;
    vm_parked *wait;    /* FEED firings waiting for a value, oldest first */
    size_t w_head, w_n, w_cap;
    uint64_t count;     /* values taken by FEEDs / made by FETCHes */
    uint64_t host;      /* values fed / taken by the host */
} vm_chan;

struct vm_io {
    pthread_mutex_t lock;
    pthread_cond_t cond;  /* the host's waits: a value fetched, the run ended or quiet */
    vm_chan *chans;       /* by name */
    uint32_t n_chans;
    uint32_t n_host;      /* FEED and FETCH instructions: chans has room for that many */
    uint32_t *chan_of;    /* per instruction: its channel (HOST instructions) */
    bool open;            /* the host may still feed */
    bool keep;            /* FETCHed values are kept for the host (a session) */
    bool ended;           /* the run is over */
    atomic_uint news;     /* bumped with every broadcast of cond: a host about to wait
                             looks at it for a while first (a wake-up costs tens of µs) */
};

/* A VM's session handle: made at its first tfvm_session_start, reused by
 * every later one and freed with the VM, so a call on a finished session is
 * answered, not a use after free. `users` counts host calls inside
 * tfvm_feed and tfvm_fetch: the run's end waits until they have all left
 * before it tears the run down. Lock order: io->lock, then lock. */
typedef enum session_state {
    S_IDLE,    /* no session: never started, finished or cancelled */
    S_LIVE,    /* the run goes on; the host feeds and fetches */
    S_ENDING,  /* finish or cancel waits for the run's end: fetches still answered */
    S_CLOSING, /* the run is over: no call enters; the ender waits for users to leave */
} session_state;

struct tfvm_session {
    tfvm_vm *vm;
    pthread_t thread;
    pthread_mutex_t lock; /* state, users, joined, err */
    pthread_cond_t cond;  /* users left; the state went back to S_IDLE */
    session_state state;
    unsigned users;
    bool joined;          /* the run's thread is joined: a late cancel no longer stops it */
    tfvm_error err;       /* the last error a call on the session returned */
};

static inline void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* How long a fetching host spins for the value before it sleeps: about a
 * wake-up's cost. A bound in time, not in pauses: a pause takes 10 to 140
 * cycles by the core (20,000 were half a millisecond on an AMD EPYC, taken
 * from the workers the host waits for when cores are few). */
#define FETCH_SPIN_NS 30000

static int cmp_chan(const void *a, const void *b)
{
    return strcmp(((const vm_chan *)a)->name, ((const vm_chan *)b)->name);
}

static int cmp_chan_inst(const void *a, const void *b)
{
    const vm_chan *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : x->inst < y->inst ? -1 : x->inst > y->inst;
}

/* The channel called `name`, or NULL (none, or no channels at all). */
static vm_chan *chan_named(const vm_io *io, const char *name)
{
    if (!io || strlen(name) > ISA_MAX_CHAN)
        return NULL;
    vm_chan key;
    snprintf(key.name, sizeof key.name, "%s", name);
    return bsearch(&key, io->chans, io->n_chans, sizeof key, cmp_chan);
}

tfvm_status vm_io_new(tfvm_vm *vm)
{
    const isa_program *p = vm->prog;
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->n_insts; i++)
        n += isa_ops[p->insts[i].op].cls == ISA_CLASS_HOST;
    if (!n)
        return TFVM_OK;
    vm_io *io = ut_calloc(&vm->alloc, 1, sizeof *io);
    if (!io)
        return TFVM_ERR_NOMEM;
    vm->io = io;
    pthread_mutex_init(&io->lock, NULL);
    pthread_cond_init(&io->cond, NULL);
    io->n_host = n;
    io->chans = ut_calloc(&vm->alloc, n, sizeof *io->chans);
    io->chan_of = ut_calloc(&vm->alloc, p->n_insts, sizeof *io->chan_of);
    if (!io->chans || !io->chan_of)
        return TFVM_ERR_NOMEM;
    /* every FEED and FETCH, sorted by name (then instruction), one per name
     * (the first instruction of each), then each instruction's channel */
    for (uint32_t i = 0; i < p->n_insts; i++) {
        const isa_inst *in = &p->insts[i];
        if (isa_ops[in->op].cls != ISA_CLASS_HOST)
            continue;
        vm_chan *c = &io->chans[io->n_chans++];
        isa_chan_name(p, i, c->name);
        c->fetch = in->op == ISA_FETCH;
        c->type = in->b;
        c->inst = i;
    }
    qsort(io->chans, io->n_chans, sizeof *io->chans, cmp_chan_inst);
    uint32_t distinct = 0;
    for (uint32_t k = 0; k < io->n_chans; k++)
        if (!distinct || strcmp(io->chans[k].name, io->chans[distinct - 1].name) != 0)
            io->chans[distinct++] = io->chans[k];
    io->n_chans = distinct;
    for (uint32_t i = 0; i < p->n_insts; i++) {
        if (isa_ops[p->insts[i].op].cls != ISA_CLASS_HOST)
            continue;
        vm_chan key;
        isa_chan_name(p, i, key.name);
        io->chan_of[i] = (uint32_t)((vm_chan *)bsearch(&key, io->chans, io->n_chans, sizeof key, cmp_chan) - io->chans);
    }
    return TFVM_OK;
}

/* Drops every queued value and waiting firing (the run's contexts go with
 * its teardown); the counts too unless `keep_counts` (after a run they say
 * what it took and what the host fed, until the next run). */
static void io_clear(tfvm_vm *vm, bool keep_counts)
{
    vm_io *io = vm->io;
    for (uint32_t k = 0; k < io->n_chans; k++) {
        vm_chan *c = &io->chans[k];
        for (size_t j = c->q_head; j < c->q_n; j++)
            dev_value_release(&c->q[j]);
        c->q_head = c->q_n = c->w_head = c->w_n = 0;
        if (!keep_counts)
            c->count = c->host = 0;
    }
}

void vm_io_free(tfvm_vm *vm)
{
    vm_io *io = vm->io;
    if (!io)
        return;
    if (io->chans) {
        io_clear(vm, false);
        for (uint32_t k = 0; k < io->n_chans; k++) {
            ut_free(&vm->alloc, io->chans[k].q, io->chans[k].q_cap * sizeof(dev_value));
            ut_free(&vm->alloc, io->chans[k].wait, io->chans[k].w_cap * sizeof(vm_parked));
        }
        ut_free(&vm->alloc, io->chans, io->n_host * sizeof *io->chans);
    }
    ut_free(&vm->alloc, io->chan_of, vm->prog->n_insts * sizeof *io->chan_of);
    pthread_mutex_destroy(&io->lock);
    pthread_cond_destroy(&io->cond);
    ut_free(&vm->alloc, io, sizeof *io);
    vm->io = NULL;
}

/* A FIFO of `size`-byte items: room for one more at *n (false: no memory). */
static bool fifo_room(const tfvm_allocator *a, void **items, size_t *head, size_t *n, size_t *cap, size_t size)
{
    if (*head && *n == *cap) {
        memmove(*items, (char *)*items + *head * size, (*n - *head) * size);
        *n -= *head;
        *head = 0;
    }
    if (*n < *cap)
        return true;
    size_t c = *cap ? 2 * *cap : 8;
    void *m = ut_realloc(a, *items, *cap * size, c * size);
    if (!m)
        return false;
    *items = m;
    *cap = c;
    return true;
}

static bool q_push(tfvm_vm *vm, vm_chan *c, const dev_value *v)
{
    if (!fifo_room(&vm->alloc, (void **)&c->q, &c->q_head, &c->q_n, &c->q_cap, sizeof *c->q))
        return false;
    c->q[c->q_n++] = *v;
    return true;
}

static dev_value q_pop(vm_chan *c)
{
    dev_value v = c->q[c->q_head++];
    if (c->q_head == c->q_n)
        c->q_head = c->q_n = 0;
    return v;
}

void vm_io_begin(tfvm_vm *vm)
{
    vm_io *io = vm->io;
    vm->run.on_quiet = NULL;
    if (!io)
        return;
    pthread_mutex_lock(&io->lock);
    io_clear(vm, false);
    io->open = io->keep = io->ended = false;
    pthread_mutex_unlock(&io->lock);
    vm->run.on_quiet = vm_io_quiet;
    vm->run.quiet_ud = vm;
}

/* A session: the host may feed, and takes what FETCHes make. */
static void io_open(tfvm_vm *vm)
{
    vm_io *io = vm->io;
    if (!io)
        return;
    pthread_mutex_lock(&io->lock);
    io->open = io->keep = true;
    pthread_mutex_unlock(&io->lock);
}

void vm_io_end(tfvm_vm *vm)
{
    vm_io *io = vm->io;
    if (!io)
        return;
    pthread_mutex_lock(&io->lock);
    io->ended = true;
    io->open = false;
    atomic_fetch_add(&io->news, 1);
    pthread_cond_broadcast(&io->cond);
    pthread_mutex_unlock(&io->lock);
}

void vm_io_teardown(tfvm_vm *vm)
{
    if (!vm->io)
        return;
    pthread_mutex_lock(&vm->io->lock);
    io_clear(vm, true);
    pthread_mutex_unlock(&vm->io->lock);
}

/* ---- Firings (workers) ---------------------------------------------------------------- */

static void send_number(vm_worker *w, vm_ctx *c, uint32_t inst, uint64_t number)
{
    dev_value n = {.dtype = TFVM_I32};
    n.u.i32 = (int32_t)(uint32_t)number;
    vm_send(w, c, inst, 1, &n);
}

/* "FEED 'x' ... waits for value #4, but the host feeds no more values": a
 * waiting firing that the host will never complete. */
static void fail_unfed(tfvm_vm *vm, const vm_ctx *c, uint32_t inst, const vm_chan *ch, uint64_t number)
{
    vm_fail(vm, TFVM_ERR_STUCK, c, inst, "channel '%s' waits for value #%llu, but the host feeds no more values",
            ch->name, (unsigned long long)number);
}

/* FETCH: v goes on, and the host's own copy (tensors in host memory, made
 * outside the lock) into the channel's queue when the run keeps them. */
static void fire_fetch(vm_worker *w, const vm_act *a, vm_chan *ch, const dev_value *v)
{
    tfvm_vm *vm = w->vm;
    vm_io *io = vm->io;
    const bool keep = io->keep; /* set before the run goes on (io_open, vm_io_keep): no lock */
    dev_value copy = *v;
    char msg[256];
    tfvm_status st = TFVM_OK;
    if (keep && copy.is_tensor) {
        tfvm_tensor *t = copy.u.t, *h = NULL;
        if (t->device != 0) {
            st = dev_vm_copy(vm->dev, t, 0, &h, msg, sizeof msg);
        } else if (!(h = dev_tensor_clone(&vm->alloc, t))) {
            st = TFVM_ERR_NOMEM;
            ut_fmt(msg, sizeof msg, "out of memory copying a fetched value");
        }
        copy.u.t = h;
    }
    pthread_mutex_lock(&io->lock);
    const uint64_t number = ++ch->count;
    if (keep && st == TFVM_OK) {
        if (!q_push(vm, ch, &copy)) {
            dev_value_release(&copy);
            st = TFVM_ERR_NOMEM;
            ut_fmt(msg, sizeof msg, "out of memory keeping a fetched value");
        }
        atomic_fetch_add(&io->news, 1);
    pthread_cond_broadcast(&io->cond);
    }
    pthread_mutex_unlock(&io->lock);
    if (st != TFVM_OK) {
        vm_fail(vm, st, a->ctx, a->inst, "%s", msg);
        return;
    }
    vm_send(w, a->ctx, a->inst, 0, v);
    send_number(w, a->ctx, a->inst, number);
}

/* FEED: the oldest queued value; none: the firing waits for the host
 * (parked with a reference on its context, holding the run open), or fails
 * the run when the host feeds no more. */
static void fire_feed(vm_worker *w, const vm_act *a, vm_chan *ch)
{
    tfvm_vm *vm = w->vm;
    vm_io *io = vm->io;
    pthread_mutex_lock(&io->lock);
    if (ch->q_head < ch->q_n) {
        dev_value v = q_pop(ch);
        const uint64_t number = ++ch->count;
        pthread_mutex_unlock(&io->lock);
        vm_send(w, a->ctx, a->inst, 0, &v);
        dev_value_release(&v);
        send_number(w, a->ctx, a->inst, number);
        return;
    }
    if (!io->open) {
        const uint64_t number = ch->count + (ch->w_n - ch->w_head) + 1;
        pthread_mutex_unlock(&io->lock);
        fail_unfed(vm, a->ctx, a->inst, ch, number);
        return;
    }
    if (!fifo_room(&vm->alloc, (void **)&ch->wait, &ch->w_head, &ch->w_n, &ch->w_cap, sizeof *ch->wait)) {
        pthread_mutex_unlock(&io->lock);
        vm_fail(vm, TFVM_ERR_NOMEM, a->ctx, a->inst, "out of memory waiting for the host");
        return;
    }
    vm_ctx_ref(w, a->ctx);
    ch->wait[ch->w_n++] = (vm_parked){a->ctx, a->inst};
    sched_hold(&vm->run);
    pthread_mutex_unlock(&io->lock);
}

void vm_fire_host(vm_worker *w, const vm_act *a, dev_value *in, bool dead)
{
    vm_io *io = w->vm->io;
    vm_chan *ch = &io->chans[io->chan_of[a->inst]];
    if (dead) { /* both outputs dead, nothing taken or handed out */
        dev_value d = dev_dead();
        vm_send(w, a->ctx, a->inst, 0, &d);
        vm_send(w, a->ctx, a->inst, 1, &d);
    } else if (ch->fetch) {
        fire_fetch(w, a, ch, &in[0]);
    } else {
        fire_feed(w, a, ch);
    }
}

bool vm_feed_resumed(vm_worker *w, vm_act *a)
{
    if (!(a->aux & VM_FEED_RESUMED))
        return false;
    vm_send(w, a->ctx, a->inst, 0, &a->v);
    dev_value_release(&a->v);
    send_number(w, a->ctx, a->inst, a->aux & ~VM_FEED_RESUMED);
    return true;
}

/* Whether context a comes before b in the run: a context before those
 * inside it, an earlier iteration of a loop before a later one, a call from
 * an earlier site before one from a later; otherwise by creation (<0, 0 or
 * >0). Walks the tags, not serials: those count per worker. */
static int ctx_cmp(const vm_ctx *a, const vm_ctx *b)
{
    int deeper = 0;
    while (a->depth > b->depth) {
        a = a->parent;
        deeper = 1;
    }
    while (b->depth > a->depth) {
        b = b->parent;
        deeper = -1;
    }
    if (a == b)
        return deeper;
    while (a->parent != b->parent) {
        a = a->parent;
        b = b->parent;
    }
    if (a->kind == VM_CTX_ITER && b->kind == VM_CTX_ITER && a->elem == b->elem && a->iter != b->iter)
        return a->iter < b->iter ? -1 : 1;
    if (a->kind == VM_CTX_CALL && b->kind == VM_CTX_CALL && a->elem != b->elem)
        return a->elem < b->elem ? -1 : 1;
    return a->serial < b->serial ? -1 : a->serial > b->serial;
}

/* The waiting FEED whose value is missing first, or NULL; under the lock.
 * That is the one in the earliest context (then the first in the program):
 * a later iteration's FEED waits only because an earlier one went on
 * without its value ("x" #1 of iteration 0 is missing, not "stop" #2 of
 * iteration 1, which exists only because "stop" #1 came). *number: the
 * value it waits for. */
static const vm_parked *first_missing(const vm_io *io, const vm_chan **chan, uint64_t *number)
{
    const vm_parked *best = NULL;
    for (uint32_t k = 0; k < io->n_chans; k++) {
        const vm_chan *ch = &io->chans[k];
        for (size_t j = ch->w_head; j < ch->w_n; j++) {
            const vm_parked *pk = &ch->wait[j];
            int order = best ? ctx_cmp(pk->ctx, best->ctx) : -1;
            if (order < 0 || (order == 0 && pk->inst < best->inst)) {
                best = pk;
                *chan = ch;
                *number = ch->count + (j - ch->w_head) + 1;
            }
        }
    }
    return best;
}

/* The scheduler's on_quiet: every worker is idle and FEEDs wait. The host
 * hears of it; if it feeds no more, the FEED whose value is missing first
 * fails the run. */
void vm_io_quiet(void *ud)
{
    tfvm_vm *vm = ud;
    vm_io *io = vm->io;
    pthread_mutex_lock(&io->lock);
    const vm_chan *ch = NULL;
    uint64_t number = 0;
    const vm_parked *pk = io->open ? NULL : first_missing(io, &ch, &number);
    if (pk)
        fail_unfed(vm, pk->ctx, pk->inst, ch, number);
    atomic_fetch_add(&io->news, 1);
    pthread_cond_broadcast(&io->cond);
    pthread_mutex_unlock(&io->lock);
}

/* ---- Sessions (the host) ------------------------------------------------------------------ */

static tfvm_status serr(tfvm_session *s, tfvm_status code, const char *fmt, ...) UT_PRINTF(3, 4);
static tfvm_status serr(tfvm_session *s, tfvm_status code, const char *fmt, ...)
{
    char msg[sizeof s->err.message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&s->lock);
    s->err.code = code;
    memcpy(s->err.message, msg, sizeof msg);
    pthread_mutex_unlock(&s->lock);
    return code;
}

/* The run's error, once it failed (under the lock). */
static tfvm_status run_error(tfvm_session *s)
{
    tfvm_vm *vm = s->vm;
    if (atomic_load(&vm->state) != VM_FAILED)
        return TFVM_OK;
    pthread_mutex_lock(&vm->err_lock);
    const tfvm_error e = vm->err;
    pthread_mutex_unlock(&vm->err_lock);
    pthread_mutex_lock(&s->lock);
    s->err = e;
    pthread_mutex_unlock(&s->lock);
    return e.code;
}

/* A host call enters the session (false: it has ended, with an error). */
static bool session_enter(tfvm_session *s, const char *what, const char *name)
{
    pthread_mutex_lock(&s->lock);
    const bool in = s->state == S_LIVE || s->state == S_ENDING;
    s->users += in;
    pthread_mutex_unlock(&s->lock);
    if (!in)
        serr(s, TFVM_ERR_ARGUMENT, "%s of channel '%s': the session has ended", what, name ? name : "(null)");
    return in;
}

static void session_leave(tfvm_session *s)
{
    pthread_mutex_lock(&s->lock);
    if (--s->users == 0)
        pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static vm_chan *find_chan(tfvm_session *s, const char *name, bool fetch)
{
    vm_io *io = s->vm->io;
    const char *what = fetch ? "FETCH" : "FEED";
    if (!name) {
        serr(s, TFVM_ERR_ARGUMENT, "%s channel name is NULL", what);
        return NULL;
    }
    vm_chan *c = chan_named(io, name);
    if (c && c->fetch == fetch)
        return c;
    if (c) {
        serr(s, TFVM_ERR_ARGUMENT, "channel '%s' is %s, not %s", name, c->fetch ? "fetched" : "fed",
             fetch ? "fetched" : "fed");
        return NULL;
    }
    char list[256] = "";
    size_t n = 0;
    for (uint32_t k = 0; io && k < io->n_chans && n < sizeof list; k++)
        if (io->chans[k].fetch == fetch)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s'%s'", n ? ", " : "", io->chans[k].name);
    serr(s, TFVM_ERR_ARGUMENT, "the program has no %s channel '%s' (%s%s)", what, name, n ? "it has " : "it has none",
         list);
    return NULL;
}

static void *session_main(void *ud)
{
    tfvm_session *s = ud;
    vm_step(s->vm, 0);
    vm_io_end(s->vm);
    return NULL;
}

tfvm_status tfvm_session_start(tfvm_vm *vm, const char *entry, const tfvm_value *args, size_t n_args,
                               tfvm_session **out)
{
    if (!vm || !out)
        return TFVM_ERR_ARGUMENT;
    *out = NULL;
    uint32_t e;
    tfvm_status st = vm_run_prepare(vm, entry, n_args, args, &e);
    if (st != TFVM_OK)
        return st;
    tfvm_session *s = vm->session;
    if (!s) {
        if (!(s = ut_calloc(&vm->alloc, 1, sizeof *s)))
            return ut_err(&vm->err, TFVM_ERR_NOMEM, "out of memory starting a session");
        s->vm = vm;
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->cond, NULL);
        vm->session = s;
    }
    pthread_mutex_lock(&s->lock);
    const bool idle = s->state == S_IDLE;
    if (idle) {
        s->state = S_LIVE;
        s->joined = false;
        memset(&s->err, 0, sizeof s->err);
    }
    pthread_mutex_unlock(&s->lock);
    if (!idle)
        return ut_err(&vm->err, TFVM_ERR_ARGUMENT, "a run is already in progress on this VM");
    st = vm_begin(vm, e, args, n_args);
    if (st == TFVM_OK)
        io_open(vm);
    if (st == TFVM_OK && pthread_create(&s->thread, NULL, session_main, s) != 0)
        st = ut_err(&vm->err, TFVM_ERR_NOMEM, "cannot start the session's thread");
    if (st != TFVM_OK) {
        vm_io_end(vm);
        if (vm->root || vm->results)
            vm_end(vm, NULL, 0);
        atomic_store(&vm->state, VM_IDLE);
        pthread_mutex_lock(&s->lock);
        s->state = S_IDLE;
        pthread_mutex_unlock(&s->lock);
        return st;
    }
    *out = s;
    return TFVM_OK;
}

static bool scalar_of(dev_value *d, const tfvm_value *v)
{
    if (!isa_dtype_valid(v->dtype))
        return false;
    memcpy(&d->u, &v->as, tfvm_dtype_size(v->dtype)); /* both unions' members start at byte 0 */
    return true;
}

/* v as a value of channel ch (its type checked: dtype, scalar or tensor,
 * and a declared shape's rank and known dimensions), into *d (a tensor
 * takes a reference); false with a message. */
static bool chan_value(const tfvm_vm *vm, const vm_chan *ch, const tfvm_value *v, dev_value *d, char *msg,
                       size_t size)
{
    bool tensor = v->tensor != NULL;
    tfvm_dtype dt = tensor ? tfvm_tensor_dtype(v->tensor) : v->dtype;
    *d = (dev_value){.dtype = (uint8_t)dt};
    int64_t dims[TFVM_MAX_RANK];
    isa_param q = isa_chan_param(vm->prog, ch->type, dims);
    if (!vm_sig_fits(&q, dt, v->tensor) || (!tensor && !scalar_of(d, v))) {
        char want[160], got[160];
        snprintf(msg, size, "channel '%s' takes %s, got %s", ch->name, isa_param_type(&q, want, sizeof want),
                 vm_value_type(dt, v->tensor, got, sizeof got));
        return false;
    }
    if (tensor) {
        d->is_tensor = 1;
        d->u.t = tfvm_tensor_ref(v->tensor);
    }
    return true;
}

/* Under the lock: d to the oldest FEED that waits on ch (through the
 * scheduler's inbox), else to the end of ch's queue; *d is moved (false:
 * no memory, *d still the caller's). */
static bool chan_put(tfvm_vm *vm, vm_chan *ch, dev_value *d)
{
    if (ch->w_head < ch->w_n) {
        vm_parked pk = ch->wait[ch->w_head];
        vm_act a = {.ctx = pk.ctx, .inst = pk.inst, .aux = VM_FEED_RESUMED | (uint32_t)((ch->count + 1) & 0x7FFFFFFF),
                    .v = *d};
        sched_item it;
        memcpy(&it, &a, sizeof it);
        if (!sched_inject(&vm->run, &it))
            return false;
        ch->w_head++;
        ch->count++;
    } else if (!q_push(vm, ch, d)) {
        return false;
    }
    d->is_tensor = 0; /* moved */
    ch->host++;
    return true;
}

static tfvm_status feed(tfvm_session *s, const char *name, const tfvm_value *v);

tfvm_status tfvm_feed(tfvm_session *s, const char *name, const tfvm_value *v)
{
    if (!s)
        return TFVM_ERR_ARGUMENT;
    if (!session_enter(s, "feed", name))
        return TFVM_ERR_ARGUMENT;
    tfvm_status st = feed(s, name, v);
    session_leave(s);
    return st;
}

static tfvm_status feed(tfvm_session *s, const char *name, const tfvm_value *v)
{
    tfvm_vm *vm = s->vm;
    vm_chan *ch = find_chan(s, name, false);
    if (!ch)
        return TFVM_ERR_ARGUMENT;
    if (!v)
        return serr(s, TFVM_ERR_ARGUMENT, "feed of channel '%s': the value is NULL", name);
    dev_value d;
    char msg[160];
    if (!chan_value(vm, ch, v, &d, msg, sizeof msg))
        return serr(s, TFVM_ERR_TYPE, "%s", msg);
    vm_io *io = vm->io;
    tfvm_status st = TFVM_OK;
    pthread_mutex_lock(&io->lock);
    if ((st = run_error(s)) != TFVM_OK) {
    } else if (io->ended || !io->open) {
        st = serr(s, TFVM_ERR_ARGUMENT, "feed of channel '%s': the run has %s", name,
                  io->ended ? "ended" : "been finished");
    } else if (!chan_put(vm, ch, &d)) {
        st = serr(s, TFVM_ERR_NOMEM, "out of memory feeding channel '%s'", name);
    }
    pthread_mutex_unlock(&io->lock);
    dev_value_release(&d);
    return st;
}

static tfvm_status fetch(tfvm_session *s, const char *name, tfvm_value *out);

tfvm_status tfvm_fetch(tfvm_session *s, const char *name, tfvm_value *out)
{
    if (!s)
        return TFVM_ERR_ARGUMENT;
    if (out)
        memset(out, 0, sizeof *out);
    if (!session_enter(s, "fetch", name))
        return TFVM_ERR_ARGUMENT;
    tfvm_status st = fetch(s, name, out);
    session_leave(s);
    return st;
}

static tfvm_status fetch(tfvm_session *s, const char *name, tfvm_value *out)
{
    vm_chan *ch = find_chan(s, name, true);
    if (!ch)
        return TFVM_ERR_ARGUMENT;
    if (!out)
        return serr(s, TFVM_ERR_ARGUMENT, "fetch of channel '%s': out is NULL", name);
    tfvm_vm *vm = s->vm;
    vm_io *io = vm->io;
    tfvm_status st = TFVM_OK;
    char lab[96];
    bool spun = false;
    pthread_mutex_lock(&io->lock);
    for (;;) {
        if (ch->q_head < ch->q_n) {
            dev_value v = q_pop(ch);
            ch->host++;
            vm_value_to_api(&v, out);
            break;
        }
        if ((st = run_error(s)) != TFVM_OK)
            break;
        isa_inst_label(vm->prog, ch->inst, lab, sizeof lab);
        if (io->ended) {
            st = serr(s, TFVM_ERR_STUCK, "FETCH '%s' (%s) waits for value #%llu, but the run ended after %llu", name,
                      lab, (unsigned long long)ch->host + 1, (unsigned long long)ch->count);
            break;
        }
        const vm_chan *fw = NULL;
        uint64_t number = 0;
        const vm_parked *pk = first_missing(io, &fw, &number);
        if (atomic_load(&vm->run.quiet) && pk) {
            char flab[96], tag[256];
            isa_inst_label(vm->prog, pk->inst, flab, sizeof flab);
            vm_tag_str(vm, pk->ctx, tag, sizeof tag);
            st = serr(s, TFVM_ERR_STUCK,
                      "FETCH '%s' (%s) waits for value #%llu, but the graph waits for the host: FEED '%s' (%s) at %s "
                      "waits for value #%llu",
                      name, lab, (unsigned long long)ch->host + 1, fw->name, flab, tag, (unsigned long long)number);
            break;
        }
        if (!spun) { /* the graph is about to hand the value out, most often */
            const unsigned seen = atomic_load(&io->news);
            pthread_mutex_unlock(&io->lock);
            const uint64_t until = ut_now_ns() + FETCH_SPIN_NS;
            for (unsigned k = 1; atomic_load(&io->news) == seen && (k % 64 || ut_now_ns() < until); k++)
                spin_pause();
            pthread_mutex_lock(&io->lock);
            spun = true;
            continue;
        }
        spun = false;
        pthread_cond_wait(&io->cond, &io->lock);
    }
    pthread_mutex_unlock(&io->lock);
    return st;
}

/* The ender's part (state S_ENDING): joins the run's thread, lets no call
 * enter and waits until every call inside has left (a fetch that blocks
 * returns once the run has ended: vm_io_end woke it), then collects the
 * run's results and drops what is queued. The handle stays, S_IDLE. */
static tfvm_status session_end(tfvm_session *s, tfvm_value *results, size_t n_results)
{
    tfvm_vm *vm = s->vm;
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&s->lock);
    s->joined = true;
    s->state = S_CLOSING;
    while (s->users)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    tfvm_status st = vm_end(vm, results, n_results);
    vm_io_teardown(vm);
    pthread_mutex_lock(&s->lock);
    s->state = S_IDLE;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return st;
}

tfvm_status tfvm_session_finish(tfvm_session *s, tfvm_value *results, size_t n_results)
{
    if (!s)
        return TFVM_ERR_ARGUMENT;
    pthread_mutex_lock(&s->lock);
    const bool live = s->state == S_LIVE;
    if (live)
        s->state = S_ENDING;
    pthread_mutex_unlock(&s->lock);
    if (!live)
        return serr(s, TFVM_ERR_ARGUMENT, "finish: the session has ended");
    tfvm_vm *vm = s->vm;
    vm_io *io = vm->io;
    if (io) { /* no more feeds: a FEED that waits now, or later, fails the run */
        pthread_mutex_lock(&io->lock);
        io->open = false;
        pthread_mutex_unlock(&io->lock);
        if (atomic_load(&vm->run.quiet))
            vm_io_quiet(vm);
    }
    if (n_results && !results) {
        vm_fail(vm, TFVM_ERR_ARGUMENT, NULL, ISA_NONE, "results is NULL");
        n_results = 0;
    }
    return session_end(s, results, n_results);
}

/* Stops the run and ends the session; when another call ends it already
 * (finish, cancel, tfvm_vm_free), stops the run if it still goes on and
 * waits until that call has ended it. */
void tfvm_session_cancel(tfvm_session *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    if (s->state == S_LIVE) {
        s->state = S_ENDING;
        pthread_mutex_unlock(&s->lock);
        vm_fail(s->vm, TFVM_ERR_INTERRUPTED, NULL, ISA_NONE, "session cancelled");
        session_end(s, NULL, 0);
        return;
    }
    if (s->state != S_IDLE && !s->joined) /* under the lock: the ender has not collected the run yet */
        vm_fail(s->vm, TFVM_ERR_INTERRUPTED, NULL, ISA_NONE, "session cancelled");
    while (s->state != S_IDLE)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

void vm_session_free(tfvm_vm *vm)
{
    tfvm_session *s = vm->session;
    if (!s)
        return;
    tfvm_session_cancel(s); /* a live session: stopped, every call on it returned */
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    ut_free(&vm->alloc, s, sizeof *s);
    vm->session = NULL;
}

bool vm_session_busy(tfvm_vm *vm)
{
    tfvm_session *s = vm->session;
    if (!s)
        return false;
    pthread_mutex_lock(&s->lock);
    const bool busy = s->state != S_IDLE;
    pthread_mutex_unlock(&s->lock);
    return busy;
}

const char *tfvm_session_errmsg(const tfvm_session *s)
{
    return s ? s->err.message : "no session";
}

/* ---- The debugger's view (tools/debug.c through tfvm_debug.h) ---------------------------- */

size_t vm_io_channels(const tfvm_vm *vm) { return vm->io ? vm->io->n_chans : 0; }

bool vm_io_channel(const tfvm_vm *vm, size_t k, vm_chan_view *out)
{
    if (!vm->io || k >= vm->io->n_chans)
        return false;
    const vm_chan *c = &vm->io->chans[k];
    *out = (vm_chan_view){.name = c->name, .fetch = c->fetch, .type = c->type, .inst = c->inst,
                          .queued = c->q_n - c->q_head, .waiting = c->w_n - c->w_head, .count = c->count,
                          .host = c->host};
    return true;
}

const dev_value *vm_io_queued(const tfvm_vm *vm, size_t k, size_t j)
{
    if (!vm->io || k >= vm->io->n_chans || j >= vm->io->chans[k].q_n - vm->io->chans[k].q_head)
        return NULL;
    return &vm->io->chans[k].q[vm->io->chans[k].q_head + j];
}

bool vm_io_waiting(const tfvm_vm *vm, size_t k, size_t j, const vm_ctx **ctx, uint32_t *inst)
{
    if (!vm->io || k >= vm->io->n_chans || j >= vm->io->chans[k].w_n - vm->io->chans[k].w_head)
        return false;
    const vm_parked *p = &vm->io->chans[k].wait[vm->io->chans[k].w_head + j];
    *ctx = p->ctx;
    *inst = p->inst;
    return true;
}

tfvm_status vm_io_queue(tfvm_vm *vm, const char *name, const tfvm_value *v, char *msg, size_t size)
{
    vm_io *io = vm->io;
    vm_chan *ch = chan_named(io, name);
    if (!ch || ch->fetch) {
        snprintf(msg, size, "the program has no FEED channel '%s'", name);
        return TFVM_ERR_ARGUMENT;
    }
    dev_value d;
    if (!chan_value(vm, ch, v, &d, msg, size))
        return TFVM_ERR_TYPE;
    pthread_mutex_lock(&io->lock);
    bool ok = chan_put(vm, ch, &d);
    pthread_mutex_unlock(&io->lock);
    if (!ok) {
        dev_value_release(&d);
        snprintf(msg, size, "out of memory");
        return TFVM_ERR_NOMEM;
    }
    return TFVM_OK;
}

void vm_io_keep(tfvm_vm *vm)
{
    if (!vm->io)
        return;
    pthread_mutex_lock(&vm->io->lock);
    vm->io->keep = true;
    pthread_mutex_unlock(&vm->io->lock);
}
