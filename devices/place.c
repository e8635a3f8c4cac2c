/* devices/place.c — placement of compute firings on devices, the copies
 * between host and device (cached as a tensor's mirror: tensors never change
 * once made, so one copy per side serves every consumer), and the VM's pools. */
#include "devices/place.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

tfvm_status dev_vm_new(const isa_program *p, const tfvm_config *cfg, const tfvm_allocator *a, dev_vm **out)
{
    *out = NULL;
    tfvm_device mode = cfg ? cfg->device : TFVM_DEVICE_CPU;
    if (mode != TFVM_DEVICE_CPU && mode != TFVM_DEVICE_CUDA && mode != TFVM_DEVICE_AUTO)
        return TFVM_ERR_ARGUMENT;
    bool flagged = false; /* an instruction asks for the GPU by name */
    for (uint32_t i = 0; i < p->n_insts && !flagged; i++)
        flagged = isa_is_compute(isa_ops[p->insts[i].op].cls) && (p->insts[i].flags & ISA_FLAG_DEV_CUDA);
    const dev_device *cuda = NULL;
    if (mode != TFVM_DEVICE_CPU || flagged) {
        cuda = dev_get(DEV_CUDA);
        if (!cuda->ready && mode == TFVM_DEVICE_CUDA)
            return TFVM_ERR_DEVICE;
    }
    dev_vm *d = ut_alloc(a, sizeof *d);
    if (!d)
        return TFVM_ERR_NOMEM;
    memset(d, 0, sizeof *d);
    d->mode = mode;
    d->under = a ? *a : (tfvm_allocator){0};
    d->cuda = cuda && cuda->ready ? cuda : NULL;
    d->cuda_state = cuda ? cuda->state : "unavailable: not requested";
    /* Without a ready GPU, AUTO is the CPU; flagged instructions still take
     * the slow path so that they can report the missing device. */
    d->multi = d->cuda ? true : flagged;
    for (int i = 0; i < DEV_COUNT; i++) {
        atomic_init(&d->copies[i], 0);
        atomic_init(&d->copy_bytes[i], 0);
    }
    tfvm_status st = dev_pool_new(a, NULL, &d->pool[DEV_CPU]);
    if (st == TFVM_OK && d->cuda)
        st = dev_pool_new(a, d->cuda, &d->pool[DEV_CUDA]);
    if (st != TFVM_OK) {
        dev_vm_free(d);
        return st;
    }
    d->host = dev_pool_allocator(d->pool[DEV_CPU]);
    for (int i = 0; i < DEV_COUNT; i++)
        d->ctx[i] = (dev_ctx){.host = &d->host, .pool = i == DEV_CPU ? NULL : d->pool[i]};
    *out = d;
    return TFVM_OK;
}

void dev_vm_free(dev_vm *d)
{
    if (!d)
        return;
    for (int i = DEV_COUNT - 1; i >= 0; i--)
        dev_pool_close(d->pool[i]);
    tfvm_allocator a = d->under;
    ut_free(&a, d, sizeof *d);
}

static const dev_device *place_device(const dev_vm *d, dev_id id)
{
    return id == DEV_CUDA ? d->cuda : NULL;
}

tfvm_status dev_vm_copy(dev_vm *d, tfvm_tensor *t, dev_id to, tfvm_tensor **out, char *msg, size_t ms)
{
    *out = NULL;
    /* A tensor the API's user holds may be written by them; a copy of it made
     * earlier cannot be trusted (tfvm.h: tensors passed to a run never change). */
    bool cache = !atomic_load_explicit(&t->exposed, memory_order_relaxed);
    if (cache) {
        tfvm_tensor *m = atomic_load_explicit(&t->mirror, memory_order_acquire);
        if (m && m->device == to) {
            *out = tfvm_tensor_ref(m);
            return TFVM_OK;
        }
    }
    const dev_device *src = place_device(d, (dev_id)t->device), *dst = place_device(d, to);
    if ((t->device != DEV_CPU && !src) || (to != DEV_CPU && !dst))
        return ut_msg(msg, ms, TFVM_ERR_DEVICE, "%s: %s", dev_name(to != DEV_CPU ? to : (dev_id)t->device),
                          d->cuda_state);
    tfvm_status ast = TFVM_ERR_NOMEM;
    tfvm_tensor *c = to == DEV_CPU
                         ? dev_tensor_alloc(&d->host, (tfvm_dtype)t->dtype, t->rank, t->dims)
                         : dev_tensor_alloc_on(&d->host, d->pool[to], (tfvm_dtype)t->dtype, t->rank, t->dims, &ast);
    if (!c) {
        char s[200];
        if (ast != TFVM_ERR_DEVICE)
            return ut_msg(msg, ms, TFVM_ERR_NOMEM, "out of memory");
        return ut_msg(msg, ms, TFVM_ERR_DEVICE, "%s: out of device memory for a %s %s tensor", dev_name(to),
                          tfvm_dtype_name((tfvm_dtype)t->dtype), dev_shape_str(t, s, sizeof s));
    }
    if (t->nbytes) {
        char why[200];
        tfvm_status st = to == DEV_CPU ? src->iface->copy_out(src, c->data, t->data, t->nbytes, why, sizeof why)
                                       : dst->iface->copy_in(dst, c->data, t->data, t->nbytes, why, sizeof why);
        if (st != TFVM_OK) {
            tfvm_tensor_free(c);
            return ut_msg(msg, ms, st, "%s: %s", dev_name(to == DEV_CPU ? (dev_id)t->device : to), why);
        }
    }
    atomic_fetch_add_explicit(&d->copies[to], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->copy_bytes[to], t->nbytes, memory_order_relaxed);
    if (cache) {
        /* Publish it as the mirror (one more reference, the mirror's); when
         * another thread got there first, ours serves this firing only. */
        tfvm_tensor *expected = NULL;
        tfvm_tensor_ref(c);
        if (!atomic_compare_exchange_strong_explicit(&t->mirror, &expected, c, memory_order_acq_rel,
                                                     memory_order_acquire))
            tfvm_tensor_free(c);
    }
    *out = c;
    return TFVM_OK;
}

/* "f32 [2, 3] and f32 [3]": operand dtypes and shapes, for messages. */
static void place_operands(const dev_value *in, uint32_t n, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (uint32_t k = 0; k < n && len < size; k++) {
        char s[200] = "[]";
        if (in[k].is_tensor)
            dev_shape_str(in[k].u.t, s, sizeof s);
        int w = snprintf(buf + len, size - len, "%s%s %s", k == 0 ? "" : k + 1 == n ? " and " : ", ",
                         tfvm_dtype_name((tfvm_dtype)in[k].dtype), s);
        if (w < 0)
            break;
        len += (size_t)w;
    }
}

/* Most data inputs of a compute instruction (STRIDED_SLICE's 5). */
#define PLACE_MAX_IN 5

tfvm_status dev_vm_fire_placed(dev_vm *d, const isa_inst *in, const dev_value *inputs, dev_value *out, char *msg,
                               size_t ms)
{
    const isa_op op = (isa_op)in->op;
    const uint32_t n = in->n_in < PLACE_MAX_IN ? in->n_in : PLACE_MAX_IN;
    bool tensors = false, there = false;
    int64_t largest = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (!inputs[k].is_tensor)
            continue;
        const tfvm_tensor *t = inputs[k].u.t;
        tensors = true;
        there |= t->device == DEV_CUDA;
        if (t->count > largest)
            largest = t->count;
    }
    /* Scalars stay on the host: all-scalar work is the CPU's whatever the flags. */
    dev_id target = DEV_CPU;
    const uint32_t flag = in->flags & ISA_FLAG_DEV_MASK;
    if (tensors && flag == ISA_FLAG_DEV_CUDA) {
        if (!d->cuda)
            return ut_msg(msg, ms, TFVM_ERR_DEVICE, "cuda: %s", d->cuda_state);
        dev_fit fit = d->cuda->iface->fits(d->cuda, op, in->a, inputs, n);
        if (fit == DEV_FIT_NO) {
            char ops[600];
            place_operands(inputs, n, ops, sizeof ops);
            return ut_msg(msg, ms, TFVM_ERR_UNSUPPORTED, "cuda has no %s kernel for %s", isa_ops[op].name, ops);
        }
        target = fit == DEV_FIT_OK ? DEV_CUDA : DEV_CPU; /* bad operands: the CPU says what is wrong */
    } else if (tensors && flag != ISA_FLAG_DEV_CPU && d->cuda && d->mode != TFVM_DEVICE_CPU) {
        bool want = d->mode == TFVM_DEVICE_CUDA || op == ISA_MATMUL || there || largest >= DEV_AUTO_MIN_ELEMENTS;
        if (want && d->cuda->iface->fits(d->cuda, op, in->a, inputs, n) == DEV_FIT_OK)
            target = DEV_CUDA;
    }

    /* Inputs that live elsewhere are copied (or their mirror used). */
    dev_value args[PLACE_MAX_IN] = {{0}};
    tfvm_tensor *held[PLACE_MAX_IN] = {NULL};
    tfvm_status st = TFVM_OK;
    /* the device's kernel reads these on the host (parameter vectors) */
    const uint32_t host = target != DEV_CPU && d->cuda->iface->host_inputs ? d->cuda->iface->host_inputs(d->cuda, op) : 0;
    for (uint32_t k = 0; k < n && st == TFVM_OK; k++) {
        args[k] = inputs[k];
        const dev_id want = (host >> k & 1) ? DEV_CPU : target;
        if (!args[k].is_tensor || args[k].u.t->device == want)
            continue;
        uint32_t j = 0; /* the same tensor twice (x + x): one copy */
        while (j < k && !(inputs[j].is_tensor && inputs[j].u.t == inputs[k].u.t))
            j++;
        if (j < k && held[j] && held[j]->device == want)
            held[k] = tfvm_tensor_ref(held[j]);
        else
            st = dev_vm_copy(d, args[k].u.t, want, &held[k], msg, ms);
        args[k].u.t = held[k];
    }
    if (st == TFVM_OK) {
        if (target == DEV_CPU)
            st = isa_ops[op].cls == ISA_CLASS_TENSOR
                     ? dev_cpu_tensor(op, in->a, args, in->n_in, out, &d->host, msg, ms)
                     : dev_cpu_elementwise(op, in->a, args, out, &d->host, msg, ms);
        else
            st = d->cuda->iface->run(d->cuda, &d->ctx[target], op, in->a, args, n, out, msg, ms);
    }
    for (uint32_t k = 0; k < n; k++)
        tfvm_tensor_free(held[k]);
    return st;
}

tfvm_status dev_vm_result(dev_vm *d, dev_value *v, char *msg, size_t ms)
{
    if (!v->is_tensor)
        return TFVM_OK;
    tfvm_tensor *t = v->u.t;
    if (t->device != DEV_CPU) {
        tfvm_tensor *h;
        tfvm_status st = dev_vm_copy(d, t, DEV_CPU, &h, msg, ms);
        if (st != TFVM_OK)
            return st;
        v->u.t = h;
        tfvm_tensor_free(t);
        t = h;
    }
    if (dev_tensor_borrowed(t)) { /* a program constant's elements: the result must outlive the program */
        tfvm_tensor *c = dev_tensor_clone(&d->host, t);
        if (!c)
            return ut_msg(msg, ms, TFVM_ERR_NOMEM, "out of memory");
        v->u.t = c;
        tfvm_tensor_free(t);
        t = c;
    }
    atomic_store_explicit(&t->exposed, 1, memory_order_relaxed);
    return TFVM_OK;
}

void dev_vm_get_stats(dev_vm *d, dev_vm_stats *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < DEV_COUNT; i++) {
        if (d->pool[i])
            dev_pool_get_stats(d->pool[i], &s->pool[i]);
        s->copies[i] = atomic_load_explicit(&d->copies[i], memory_order_relaxed);
        s->copy_bytes[i] = atomic_load_explicit(&d->copy_bytes[i], memory_order_relaxed);
    }
}

/* "512 B", "3.5 KB", "12.0 MB" */
static const char *place_bytes(uint64_t n, char *buf, size_t size)
{
    if (n < 1024)
        snprintf(buf, size, "%llu B", (unsigned long long)n);
    else if (n < 1024 * 1024)
        snprintf(buf, size, "%.1f KB", (double)n / 1024.0);
    else
        snprintf(buf, size, "%.1f MB", (double)n / 1048576.0);
    return buf;
}

void dev_vm_stats_line(dev_vm *d, char *buf, size_t size)
{
    char b1[32], b2[32], b3[32];
    dev_vm_stats s;
    dev_vm_get_stats(d, &s);
    size_t len = 0;
    len += (size_t)snprintf(buf, size, "devices:");
    for (int i = 0; i < DEV_COUNT && len < size; i++) {
        if (!d->pool[i])
            continue;
        len += (size_t)snprintf(buf + len, size - len, "%s %s pool %llu hits, %llu misses, %s cached",
                                i ? ";" : "", i == DEV_CPU ? "host" : dev_name((dev_id)i),
                                (unsigned long long)s.pool[i].hits, (unsigned long long)s.pool[i].misses,
                                place_bytes(s.pool[i].cached, b1, sizeof b1));
        if (i != DEV_CPU && len < size)
            len += (size_t)snprintf(buf + len, size - len, ", copies in %llu (%s), out %llu (%s)",
                                    (unsigned long long)s.copies[i], place_bytes(s.copy_bytes[i], b2, sizeof b2),
                                    (unsigned long long)s.copies[DEV_CPU],
                                    place_bytes(s.copy_bytes[DEV_CPU], b3, sizeof b3));
    }
}
