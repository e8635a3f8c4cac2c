/* vm/trace.c — a timeline of firings for `tfvm profile --trace`: while
 * profiling and tracing, each worker records every firing it times (the
 * instruction, its tag and its inputs' types, when it started and how long
 * it took) into a buffer of its own, so recording needs no locks. The tag
 * and types are formatted before the firing, while its inputs are still
 * there; a context may be reused later, so nothing refers back to it. */
#include <stdio.h>
#include <string.h>

#include "devices/tensor.h"
#include "tfvm_debug.h"
#include "vm/vm.h"

/* "f32[2, 3]", "i32" or "dead" */
static size_t type_str(const dev_value *v, char *buf, size_t size)
{
    if (v->dead)
        return (size_t)snprintf(buf, size, "dead");
    const char *dt = tfvm_dtype_name((tfvm_dtype)v->dtype);
    if (!v->is_tensor)
        return (size_t)snprintf(buf, size, "%s", dt);
    char shape[64];
    return (size_t)snprintf(buf, size, "%s%s", dt, dev_shape_str(v->u.t, shape, sizeof shape));
}

/* Every data input's type, ", "-separated; "-" for one not held here
 * (a MERGE's other inputs), "dead" for a dead token. */
static void inputs_str(const tfvm_vm *vm, const vm_act *a, char *buf, size_t size)
{
    const isa_inst *in = &vm->prog->insts[a->inst];
    size_t len = 0;
    buf[0] = '\0';
    uint32_t n = in->op == ISA_ARG ? 1 : in->n_in;
    for (uint32_t p = 0; p < n && len + 1 < size; p++) {
        const dev_value *v = in->op == ISA_ARG ? &a->v : vm_act_input(vm, a, p);
        if (p)
            len += (size_t)snprintf(buf + len, size - len, ", ");
        if (len + 1 >= size)
            break;
        len += v && (v->dtype || v->dead) ? type_str(v, buf + len, size - len) : (size_t)snprintf(buf + len, size - len, "-");
    }
}

vm_trace_ev *vm_trace_open(vm_worker *w, const vm_act *a)
{
    tfvm_vm *vm = w->vm;
    if (w->n_trace == w->cap_trace) {
        if (w->cap_trace >= vm->trace_max) {
            w->trace_dropped++;
            return NULL;
        }
        size_t cap = w->cap_trace ? 2 * w->cap_trace : 256;
        if (cap > vm->trace_max)
            cap = vm->trace_max;
        vm_trace_ev *t = ut_realloc(&vm->alloc, w->trace, w->cap_trace * sizeof *t, cap * sizeof *t);
        if (!t) {
            w->trace_dropped++;
            return NULL;
        }
        w->trace = t;
        w->cap_trace = cap;
    }
    vm_trace_ev *ev = &w->trace[w->n_trace++];
    ev->inst = a->inst;
    vm_tag_str(vm, a->ctx, ev->tag, sizeof ev->tag);
    inputs_str(vm, a, ev->inputs, sizeof ev->inputs);
    return ev;
}

static void trace_clear(tfvm_vm *vm)
{
    for (uint32_t i = 0; vm->w && i < vm->n_workers; i++) {
        vm_worker *w = &vm->w[i];
        ut_free(&vm->alloc, w->trace, w->cap_trace * sizeof *w->trace);
        w->trace = NULL;
        w->n_trace = w->cap_trace = 0;
        w->trace_dropped = 0;
    }
}

void vm_trace(tfvm_vm *vm, size_t max_events)
{
    trace_clear(vm);
    vm->trace_max = max_events;
}

size_t vm_trace_read(const tfvm_vm *vm, void (*fn)(void *ud, const tfvm_debug_trace_ev *ev), void *ud,
                     uint64_t *dropped)
{
    /* ticks to nanoseconds as vm_profile_read does; times from the earliest firing */
    double scale = vm->prof_t1 > vm->prof_t0 ? (vm->prof_s1 - vm->prof_s0) * 1e9 / (double)(vm->prof_t1 - vm->prof_t0)
                                             : 0;
    uint64_t t0 = UINT64_MAX, lost = 0;
    size_t n = 0;
    for (uint32_t i = 0; i < vm->n_workers; i++) {
        const vm_worker *w = &vm->w[i];
        lost += w->trace_dropped;
        n += w->n_trace;
        for (size_t k = 0; k < w->n_trace; k++)
            if (w->trace[k].t0 < t0)
                t0 = w->trace[k].t0;
    }
    for (uint32_t i = 0; fn && i < vm->n_workers; i++) {
        const vm_worker *w = &vm->w[i];
        for (size_t k = 0; k < w->n_trace; k++) {
            const vm_trace_ev *e = &w->trace[k];
            tfvm_debug_trace_ev ev = {i, e->inst, (double)(e->t0 - t0) * scale, (double)e->ticks * scale, e->tag,
                                      e->inputs};
            fn(ud, &ev);
        }
    }
    if (dropped)
        *dropped = lost;
    return n;
}
