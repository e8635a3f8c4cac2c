/* analysis/facts.c — the static analyser of analysis/facts.h: per-output dtype, shape
 * and value facts, a forward least fixpoint (joins over producers: loop
 * variables over iterations, parameters over call sites) and backward
 * requirements of consumers, in rounds, then the conflicts the forward facts
 * prove. Values of small constants are computed with the CPU kernels, so a
 * folded value and a run-time one never disagree. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "devices/cpu/cpu.h"
#include "devices/tensor.h"
#include "analysis/facts.h"
#include "isa/shape.h"
#include "util/half.h"

#define MAX_IN 8        /* data inputs an op of ops.def takes, at most (MERGE aside) */
#define MAX_ROUNDS 4    /* TFDeploy saw at most 4 forward/backward rounds on real graphs */
#define MAX_PASSES 256  /* per forward fixpoint; the lattice's height bounds it far below */

typedef struct an {
    isa_facts *F;
    const isa_program *p;
    uint32_t *pfirst;       /* per instruction: index of its port 0 in the port arrays */
    uint32_t *prod_first;   /* per port (+1): its producers in prod[] */
    uint32_t *prod;         /* producer output indices into F->out */
    isa_fact *req;          /* per output: what its consumers require (backward) */
    bool *uncond;           /* per instruction: fires on every run that reaches its region */
    bool nomem, record, changed;
} an;

/* ---- Facts ---------------------------------------------------------------------------- */

static void fact_release(isa_fact *f) { dev_value_release(&f->value); }

static isa_fact fact_top(void)
{
    isa_fact f;
    memset(&f, 0, sizeof f);
    f.rank = -1;
    return f;
}

static isa_fact fact_none(void)
{
    isa_fact f = fact_top();
    f.none = true;
    return f;
}

static void fact_copy(isa_fact *dst, const isa_fact *src)
{
    fact_release(dst);
    *dst = *src;
    dev_value_retain(&dst->value);
}

static int64_t count_of(const isa_fact *f)
{
    if (f->rank < 0)
        return -1;
    int64_t n = 1;
    for (int i = 0; i < f->rank; i++) {
        if (f->dims[i] < 0)
            return -1;
        if (f->dims[i] && n > INT64_MAX / f->dims[i])
            return -1;
        n *= f->dims[i];
    }
    return n;
}

static bool value_eq(const dev_value *a, const dev_value *b)
{
    if (a->dtype != b->dtype || a->is_tensor != b->is_tensor)
        return false;
    if (!a->is_tensor)
        return memcmp(&a->u, &b->u, tfvm_dtype_size((tfvm_dtype)a->dtype)) == 0;
    const tfvm_tensor *x = a->u.t, *y = b->u.t;
    return x->rank == y->rank && memcmp(x->dims, y->dims, sizeof(int64_t) * x->rank) == 0 &&
           x->nbytes == y->nbytes && memcmp(x->data, y->data, x->nbytes) == 0;
}

static bool fact_eq(const isa_fact *a, const isa_fact *b)
{
    if (a->none != b->none)
        return false;
    if (a->none)
        return true;
    if (a->dtype != b->dtype || a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    if ((a->value.dtype != 0) != (b->value.dtype != 0))
        return false;
    return !a->value.dtype || value_eq(&a->value, &b->value);
}

/* a := a ⊔ b, the least fact covering both (a port fed by several producers,
 * a loop variable over iterations). */
static void fact_join(isa_fact *a, const isa_fact *b)
{
    if (b->none)
        return;
    if (a->none) {
        fact_copy(a, b);
        return;
    }
    if (a->dtype != b->dtype)
        a->dtype = 0;
    if (a->rank != b->rank) {
        a->rank = -1;
    } else {
        for (int i = 0; i < a->rank; i++)
            if (a->dims[i] != b->dims[i])
                a->dims[i] = -1;
    }
    if (a->value.dtype && !(b->value.dtype && value_eq(&a->value, &b->value))) {
        dev_value_release(&a->value);
        a->value.dtype = 0;
    }
}

/* f := f ⊓ r for the parts r knows and f does not (a consumer's requirement);
 * a contradiction leaves f as it is: requirements are never conflicts. */
static void fact_meet(isa_fact *f, const isa_fact *r)
{
    if (f->none || r->none)
        return;
    if (!f->dtype)
        f->dtype = r->dtype;
    if (f->rank < 0 && r->rank >= 0) {
        f->rank = r->rank;
        memcpy(f->dims, r->dims, sizeof f->dims);
    } else if (f->rank == r->rank) {
        for (int i = 0; i < f->rank; i++)
            if (f->dims[i] < 0)
                f->dims[i] = r->dims[i];
    }
}

static int ints_of(const isa_fact *f, int64_t *out, int max);

/* What the shape rules (isa/shape.h) know of a fact; vals holds its integers. */
static isa_shape shape_of(const isa_fact *f, int64_t vals[ISA_FACTS_MAX_VALUE])
{
    isa_shape s = {.dtype = f->dtype, .rank = f->rank, .vals = vals};
    memcpy(s.dims, f->dims, sizeof s.dims);
    s.n_vals = ints_of(f, vals, ISA_FACTS_MAX_VALUE);
    return s;
}

const char *isa_fact_str(const isa_fact *f, char *buf, size_t size)
{
    if (f->none) {
        ut_fmt(buf, size, "none");
        return buf;
    }
    isa_shape s = {.dtype = f->dtype, .rank = f->rank};
    memcpy(s.dims, f->dims, sizeof s.dims);
    return isa_shape_str(&s, buf, size);
}

static void elem_str(uint8_t dtype, const void *p, char *buf, size_t size)
{
    switch (dtype) {
    case TFVM_BOOL: ut_fmt(buf, size, "%s", *(const uint8_t *)p ? "true" : "false"); break;
    case TFVM_I32: { int32_t v; memcpy(&v, p, 4); ut_fmt(buf, size, "%d", (int)v); break; }
    case TFVM_I64: { int64_t v; memcpy(&v, p, 8); ut_fmt(buf, size, "%lld", (long long)v); break; }
    case TFVM_U8: ut_fmt(buf, size, "%u", (unsigned)*(const uint8_t *)p); break;
    case TFVM_I8: ut_fmt(buf, size, "%d", (int)*(const int8_t *)p); break;
    case TFVM_F32: { float v; memcpy(&v, p, 4); ut_fmt(buf, size, "%.9g", (double)v); break; }
    case TFVM_F64: { double v; memcpy(&v, p, 8); ut_fmt(buf, size, "%.17g", v); break; }
    case TFVM_I16: { int16_t v; memcpy(&v, p, 2); ut_fmt(buf, size, "%d", (int)v); break; }
    case TFVM_U16: { uint16_t v; memcpy(&v, p, 2); ut_fmt(buf, size, "%u", (unsigned)v); break; }
    case TFVM_U32: { uint32_t v; memcpy(&v, p, 4); ut_fmt(buf, size, "%u", (unsigned)v); break; }
    case TFVM_U64: { uint64_t v; memcpy(&v, p, 8); ut_fmt(buf, size, "%llu", (unsigned long long)v); break; }
    case TFVM_F16: { uint16_t v; memcpy(&v, p, 2); ut_fmt(buf, size, "%.5g", (double)ut_f16_to_f32(v)); break; }
    case TFVM_BF16: { uint16_t v; memcpy(&v, p, 2); ut_fmt(buf, size, "%.4g", (double)ut_bf16_to_f32(v)); break; }
    default: ut_fmt(buf, size, "?");
    }
}

/* Appends to buf (size bytes, len used so far), never past its end: a
 * value too long for it is cut off, and ends in "..." where that happened. */
static void put(char *buf, size_t size, size_t *len, const char *s)
{
    size_t n = strlen(s);
    if (*len + n + 1 > size) {
        if (size >= 4 && *len + 4 <= size)
            memcpy(buf + size - 4, "...", 4);
        *len = size;
        return;
    }
    memcpy(buf + *len, s, n + 1);
    *len += n;
}

const char *isa_fact_value_str(const isa_fact *f, char *buf, size_t size)
{
    if (!size)
        return buf;
    buf[0] = '\0';
    const dev_value *v = &f->value;
    if (f->none || !v->dtype)
        return buf;
    char e[48];
    size_t len = 0;
    if (!v->is_tensor) {
        elem_str(v->dtype, &v->u, e, sizeof e);
        put(buf, size, &len, e);
        return buf;
    }
    const tfvm_tensor *t = v->u.t;
    size_t es = tfvm_dtype_size((tfvm_dtype)t->dtype);
    /* NumPy's nesting: a '[' where an index rolls over to 0, a ']' where it ends */
    int64_t idx[TFVM_MAX_RANK] = {0};
    for (int i = 0; i < t->rank; i++)
        put(buf, size, &len, "[");
    for (int64_t k = 0; k < t->count && len < size; k++) {
        elem_str(t->dtype, (const char *)t->data + (size_t)k * es, e, sizeof e);
        put(buf, size, &len, e);
        int closed = 0;
        for (int d = t->rank - 1; d >= 0; d--) {
            if (++idx[d] < t->dims[d])
                break;
            idx[d] = 0;
            closed++;
        }
        for (int c = 0; c < closed; c++)
            put(buf, size, &len, "]");
        if (k + 1 < t->count) {
            put(buf, size, &len, ", ");
            for (int c = 0; c < closed; c++)
                put(buf, size, &len, "[");
        }
    }
    if (t->count == 0) /* "[]" for an empty vector, "[[]]" for [1, 0] */
        for (int i = 0; i < t->rank; i++)
            put(buf, size, &len, "]");
    return buf;
}

/* ---- Values ---------------------------------------------------------------------------- */

/* The fact of a constant: its dtype and shape, and its value when small. */
static isa_fact const_fact(an *A, const isa_const *c)
{
    isa_fact f = fact_top();
    f.dtype = c->dtype;
    f.rank = (int8_t)c->rank;
    memcpy(f.dims, c->dims, sizeof f.dims);
    if (c->rank == 0) {
        f.value.dtype = c->dtype;
        memcpy(&f.value.u, c->data, tfvm_dtype_size((tfvm_dtype)c->dtype));
    } else if (count_of(&f) >= 0 && count_of(&f) <= ISA_FACTS_MAX_VALUE) {
        tfvm_tensor *t = tfvm_tensor_new((tfvm_dtype)c->dtype, c->rank, c->dims, &A->F->alloc);
        if (!t) {
            A->nomem = true;
            return f;
        }
        if (c->nbytes)
            memcpy(t->data, c->data, c->nbytes);
        f.value = (dev_value){.dtype = c->dtype, .is_tensor = 1, .u.t = t};
    }
    return f;
}

/* Sets f's shape from its value (a scalar, or the tensor's dims). */
static void shape_from_value(isa_fact *f)
{
    f->dtype = f->value.dtype;
    if (!f->value.is_tensor) {
        f->rank = 0;
        return;
    }
    f->rank = (int8_t)f->value.u.t->rank;
    memcpy(f->dims, f->value.u.t->dims, sizeof f->dims);
}

/* The integers of a known integer value (a scalar or a vector), at most max;
 * -1 when unknown or not integers. */
static int ints_of(const isa_fact *f, int64_t *out, int max)
{
    const dev_value *v = &f->value;
    if (f->none || !v->dtype || !isa_dtype_int(v->dtype))
        return -1;
    if (!v->is_tensor) {
        switch (v->dtype) {
        case TFVM_I32: out[0] = v->u.i32; break;
        case TFVM_I64: out[0] = v->u.i64; break;
        case TFVM_U8: out[0] = v->u.u8; break;
        default: out[0] = v->u.i8; break;
        }
        return 1;
    }
    const tfvm_tensor *t = v->u.t;
    if (t->rank > 1 || t->count > max)
        return -1;
    for (int64_t i = 0; i < t->count; i++) {
        const char *p = (const char *)t->data;
        switch (t->dtype) {
        case TFVM_I32: { int32_t x; memcpy(&x, p + 4 * i, 4); out[i] = x; break; }
        case TFVM_I64: memcpy(&out[i], p + 8 * i, 8); break;
        case TFVM_U8: out[i] = ((const uint8_t *)p)[i]; break;
        default: out[i] = ((const int8_t *)p)[i]; break;
        }
    }
    return (int)t->count;
}

/* ---- Conflicts ---------------------------------------------------------------------------- */

static void conflict(an *A, uint32_t inst, tfvm_status code, const char *fmt, ...) UT_PRINTF(4, 5);
static void conflict(an *A, uint32_t inst, tfvm_status code, const char *fmt, ...)
{
    if (!A->record)
        return;
    isa_facts *F = A->F;
    if (F->n_conflicts && F->conflicts[F->n_conflicts - 1].inst == inst)
        return; /* one per instruction: the first reason */
    if (F->n_conflicts == F->cap_conflicts) {
        uint32_t cap = F->cap_conflicts ? F->cap_conflicts * 2 : 16;
        isa_conflict *c = ut_realloc(&F->alloc, F->conflicts, F->cap_conflicts * sizeof *c, cap * sizeof *c);
        if (!c) {
            A->nomem = true;
            return;
        }
        F->conflicts = c;
        F->cap_conflicts = cap;
    }
    isa_conflict *c = &F->conflicts[F->n_conflicts++];
    c->inst = inst;
    c->code = code;
    c->always = A->uncond[inst];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
}

/* ---- Transfer functions ---------------------------------------------------------------- */

typedef struct op_ctx {
    an *A;
    uint32_t i;
    const isa_inst *in;
    const isa_fact *x[MAX_IN];
    isa_fact *out; /* output 0 */
} op_ctx;


static void lower_name(uint32_t op, char *buf, size_t size)
{
    size_t n = 0;
    for (const char *s = isa_ops[op].name; *s && n + 1 < size; s++)
        buf[n++] = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
    buf[n] = '\0';
}

/* Runs the op's CPU kernel on known values: the result's value (when
 * small) and shape, or a definite conflict with the kernel's own message. */
static bool evaluate(op_ctx *c)
{
    const isa_inst *in = c->in;
    dev_value v[MAX_IN];
    for (uint32_t k = 0; k < in->n_in; k++) {
        if (!c->x[k]->value.dtype)
            return false;
        v[k] = c->x[k]->value;
    }
    dev_value r = {0};
    char msg[200];
    const isa_class cls = isa_ops[in->op].cls;
    /* held for the call: a kernel changes an input only one reference
     * holds (STACK_PUT's row, a reshape's dims), and the facts keep theirs */
    dev_value held[MAX_IN];
    for (uint32_t k = 0; k < in->n_in; k++) {
        held[k] = v[k];
        dev_value_retain(&held[k]);
    }
    tfvm_status st = cls == ISA_CLASS_TENSOR
                         ? dev_cpu_tensor((isa_op)in->op, in->a, v, in->n_in, &r, &c->A->F->alloc, msg, sizeof msg)
                         : dev_cpu_elementwise((isa_op)in->op, in->a, v, &r, &c->A->F->alloc, msg, sizeof msg);
    for (uint32_t k = 0; k < in->n_in; k++)
        dev_value_release(&held[k]);
    if (st == TFVM_ERR_NOMEM) {
        c->A->nomem = true;
        return false;
    }
    if (st != TFVM_OK) {
        char lname[32];
        lower_name(in->op, lname, sizeof lname);
        size_t n = strlen(lname);
        const char *m = strncmp(msg, lname, n) == 0 && msg[n] == ':' ? msg + n + 2 : msg;
        conflict(c->A, c->i, st, "%s", m);
        return false;
    }
    isa_fact f = fact_top();
    f.value = r;
    shape_from_value(&f);
    if (r.is_tensor && r.u.t->count > ISA_FACTS_MAX_VALUE) {
        dev_value_release(&f.value);
        f.value.dtype = 0;
    }
    fact_copy(c->out, &f);
    fact_release(&f);
    return true;
}

/* A dtype the op takes, else a definite type conflict. Only the elementwise
 * ops' `types` are exactly what their kernels take; a tensor op's kernel may
 * take more (docs/isa.md), so there only a kernel that fails on known values
 * proves anything. */
static bool takes(op_ctx *c, const isa_fact *x)
{
    if (!x->dtype || isa_takes(c->in->op, x->dtype) || isa_ops[c->in->op].cls == ISA_CLASS_TENSOR)
        return true;
    char lname[32], list[64];
    lower_name(c->in->op, lname, sizeof lname);
    conflict(c->A, c->i, TFVM_ERR_TYPE, "%s is not defined on %s (it takes %s)", lname,
             tfvm_dtype_name((tfvm_dtype)x->dtype), isa_types_list(isa_ops[c->in->op].types, list, sizeof list));
    return false;
}

static bool same_dtype(op_ctx *c, const isa_fact *a, const isa_fact *b)
{
    if (!a->dtype || !b->dtype || a->dtype == b->dtype)
        return true;
    conflict(c->A, c->i, TFVM_ERR_TYPE, "dtype mismatch: %s and %s", tfvm_dtype_name((tfvm_dtype)a->dtype),
             tfvm_dtype_name((tfvm_dtype)b->dtype));
    return false;
}

static bool shape_rule(op_ctx *c);

static void elementwise(op_ctx *c)
{
    const isa_inst *in = c->in;
    isa_fact *o = c->out;
    uint32_t first = in->op == ISA_SELECT ? 1 : 0;
    if (in->op == ISA_SELECT && c->x[0]->dtype && c->x[0]->dtype != TFVM_BOOL) {
        conflict(c->A, c->i, TFVM_ERR_TYPE, "select: condition must be bool, got %s",
                 tfvm_dtype_name((tfvm_dtype)c->x[0]->dtype));
        return;
    }
    uint8_t dt[MAX_IN] = {0};
    for (uint32_t k = first; k < in->n_in; k++) {
        if (!takes(c, c->x[k]) || (k > first && !same_dtype(c, c->x[first], c->x[k])))
            return;
        if (!dt[first])
            dt[first] = c->x[k]->dtype;
    }
    for (uint32_t k = 0; k < in->n_in; k++)
        if (!dt[k])
            dt[k] = dt[first];
    isa_result rr = isa_ops[in->op].result;
    if (rr != ISA_RESULT_SAME && rr != ISA_RESULT_IN1 && rr != ISA_RESULT_IN2)
        o->dtype = isa_result_dtype(in->op, dt, in->a);
    else
        o->dtype = dt[first];
    if (!shape_rule(c))
        return;
    evaluate(c);
}

/* The op's shape rule (isa/shape.h) on the facts of its operands: false
 * when it proves a conflict (reported). */
static bool shape_rule(op_ctx *c)
{
    const isa_inst *in = c->in;
    isa_shape x[MAX_IN], o;
    int64_t vals[MAX_IN][ISA_FACTS_MAX_VALUE];
    for (uint32_t k = 0; k < in->n_in; k++)
        x[k] = shape_of(c->x[k], vals[k]);
    char msg[sizeof c->A->F->conflicts->msg];
    tfvm_status st = isa_shape_rule(in->op, in->a, x, in->n_in, &o, msg, sizeof msg);
    c->out->rank = o.rank;
    memcpy(c->out->dims, o.dims, sizeof o.dims);
    if (st != TFVM_OK && msg[0]) {
        conflict(c->A, c->i, st, "%s", msg);
        return false;
    }
    return true; /* a failure only the kernel can name: evaluating says it */
}

/* The operands beyond x that must have x's dtype (bit k: operand k). */
static uint32_t same_dtype_operands(uint32_t op)
{
    switch (op) {
    case ISA_MATMUL:
    case ISA_CONV2D:
    case ISA_CONCAT:
        return 1u << 1;
    case ISA_FUSED_MATMUL:
    case ISA_LSTM_CELL_C:
    case ISA_LSTM_CELL_H:
    case ISA_GRU_CELL:
        return 1u << 1 | 1u << 2;
    case ISA_FUSED_CONV2D:
        return 1u << 1 | 1u << 3;
    case ISA_FUSED_CONV2D_ADD:
        return 1u << 1 | 1u << 3 | 1u << 4;
    case ISA_LSTM_STEP:
    case ISA_GRU_STEP:
        return 1u << 2 | 1u << 3 | 1u << 4;
    default:
        return 0;
    }
}

static void tensor_op(op_ctx *c)
{
    const isa_inst *in = c->in;
    isa_fact *o = c->out;
    const isa_fact *x = c->x[0];
    uint8_t dt[MAX_IN] = {0};
    for (uint32_t k = 0; k < in->n_in && k < MAX_IN; k++)
        dt[k] = c->x[k]->dtype;
    isa_result rr = isa_ops[in->op].result;
    if ((rr == ISA_RESULT_SAME && dt[0]) || (rr == ISA_RESULT_IN1 && dt[1]) || (rr == ISA_RESULT_IN2 && dt[2]) ||
        rr == ISA_RESULT_I64 || rr == ISA_RESULT_ATTR || rr == ISA_RESULT_BOOL)
        o->dtype = isa_result_dtype(in->op, dt, in->a);
    uint32_t same = same_dtype_operands(in->op);
    for (uint32_t k = 1; k < in->n_in; k++)
        if ((same >> k & 1) && !same_dtype(c, x, c->x[k]))
            return;
    if (!shape_rule(c))
        return;
    if (in->op == ISA_SHAPE) { /* the value from x's dims alone, when all are known */
        if (x->rank < 0)
            return;
        for (int k = 0; k < x->rank; k++)
            if (x->dims[k] < 0)
                return;
        int64_t d1 = x->rank;
        tfvm_tensor *t = tfvm_tensor_new(TFVM_I64, 1, &d1, &c->A->F->alloc);
        if (!t) {
            c->A->nomem = true;
            return;
        }
        if (x->rank)
            memcpy(t->data, x->dims, sizeof(int64_t) * (size_t)x->rank);
        fact_release(o);
        o->value = (dev_value){.dtype = TFVM_I64, .is_tensor = 1, .u.t = t};
        return;
    }
    int64_t n = count_of(o);
    if (!isa_shape_grows(in->op) || (n >= 0 && n <= ISA_FACTS_MAX_VALUE))
        evaluate(c);
}

/* Computes the output facts of instruction i from its inputs' (in[] holds
 * each port's join over its producers). */
static void transfer(an *A, uint32_t i, const isa_fact *in, isa_fact *out)
{
    const isa_program *p = A->p;
    const isa_inst *ins = &p->insts[i];
    uint32_t no = isa_outs(ins), np = isa_ports(ins);
    for (uint32_t k = 0; k < no; k++) {
        fact_release(&out[k]);
        out[k] = fact_top();
    }
    /* nothing fires live while an input never gets a live token (MERGE: all) */
    bool any = false, all = true;
    for (uint32_t k = 0; k < np; k++) {
        any = any || !in[k].none;
        all = all && !in[k].none;
    }
    if (ins->op == ISA_MERGE ? !any : !all) {
        for (uint32_t k = 0; k < no; k++)
            out[k].none = true;
        return;
    }
    switch (ins->op) {
    case ISA_ARG: {
        const isa_entry *e = NULL;
        for (uint32_t k = 0; k < p->n_entries; k++)
            if (p->entries[k].region == ins->region)
                e = &p->entries[k];
        if (e && ins->a < e->n_params) {
            const isa_param *q = &e->params[ins->a];
            out[0].dtype = q->dtype;
            out[0].rank = q->rank == 0 ? 0 : -1;
            if (q->rank != 0 && q->shaped && q->ndim <= TFVM_MAX_RANK) { /* the signature's shape, `?` unknown */
                out[0].rank = (int8_t)q->ndim;
                memcpy(out[0].dims, q->dims, sizeof(int64_t) * q->ndim);
            }
        }
        return;
    }
    case ISA_CONST:
        out[0] = const_fact(A, &p->consts[ins->a]);
        return;
    case ISA_RESULT:
        return;
    case ISA_FEED: /* the declared type; and its number */
        out[0].dtype = ISA_CHAN_DTYPE(ins->b);
        out[0].rank = ins->b & ISA_CHAN_TENSOR ? -1 : 0;
        out[1].dtype = TFVM_I32;
        out[1].rank = 0;
        return;
    case ISA_FETCH:
        fact_copy(&out[0], &in[0]);
        out[1].dtype = TFVM_I32;
        out[1].rank = 0;
        return;
    case ISA_IDENTITY:
    case ISA_LOOPCOND:
    case ISA_ENTER:
    case ISA_EXIT:
    case ISA_NEXTITER:
    case ISA_CALL:
    case ISA_RETURN:
        fact_copy(&out[0], &in[0]);
        return;
    case ISA_SWITCH:
    case ISA_BRANCH: {
        fact_copy(&out[0], &in[0]);
        fact_copy(&out[1], &in[0]);
        /* a known predicate: the other side never gets a live token */
        const isa_fact *pred = ins->op == ISA_SWITCH ? &in[1] : NULL;
        int taken = -1;
        if (pred && pred->value.dtype == TFVM_BOOL && !pred->value.is_tensor)
            taken = pred->value.u.b ? 1 : 0;
        if (ins->op == ISA_BRANCH && in[0].value.dtype && !in[0].value.is_tensor && ins->a < ISA_OP_COUNT &&
            isa_ops[ins->a].cls == ISA_CLASS_COMPARE) { /* data <op> c on a known scalar */
            dev_value v[2] = {in[0].value, {0}}, r = {0};
            const isa_const *c = &p->consts[ins->b];
            v[1].dtype = c->dtype;
            memcpy(&v[1].u, c->data, tfvm_dtype_size((tfvm_dtype)c->dtype));
            char msg[120];
            if (c->rank == 0 && dev_cpu_elementwise((isa_op)ins->a, 0, v, &r, &A->F->alloc, msg, sizeof msg) == TFVM_OK &&
                !r.is_tensor)
                taken = r.u.b ? 1 : 0;
            dev_value_release(&r);
        }
        if (taken >= 0) {
            fact_release(&out[1 - taken]);
            out[1 - taken] = fact_none();
        }
        if (pred && pred->dtype && (pred->dtype != TFVM_BOOL || pred->rank > 0)) {
            char s[96];
            conflict(A, i, TFVM_ERR_TYPE, "predicate must be a bool scalar, got %s", isa_fact_str(pred, s, sizeof s));
        }
        return;
    }
    case ISA_MERGE: {
        out[0] = fact_none();
        uint32_t live = 0, which = 0;
        for (uint32_t k = 0; k < ins->n_in; k++) {
            fact_join(&out[0], &in[k]);
            if (!in[k].none) {
                live++;
                which = k;
            }
        }
        out[1].dtype = TFVM_I32;
        out[1].rank = 0;
        if (live == 1) /* only one input ever live: the index is known */
            out[1].value = (dev_value){.dtype = TFVM_I32, .u.i32 = (int32_t)which};
        return;
    }
    default:
        break;
    }
    if (ins->n_in > MAX_IN)
        return;
    op_ctx c = {.A = A, .i = i, .in = ins, .out = &out[0]};
    for (uint32_t k = 0; k < ins->n_in; k++)
        c.x[k] = &in[k];
    if (isa_ops[ins->op].cls == ISA_CLASS_TENSOR)
        tensor_op(&c);
    else if (isa_is_compute(isa_ops[ins->op].cls))
        elementwise(&c);
}

/* ---- The fixpoint ------------------------------------------------------------------------- */

/* The fact of each input port: the join of its producers' outputs (a port
 * holding a constant operand: that constant). */
static void input_facts(an *A, uint32_t i, isa_fact *in)
{
    const isa_inst *ins = &A->p->insts[i];
    uint32_t np = isa_ports(ins);
    int imm = isa_imm_port(ins);
    for (uint32_t k = 0; k < np; k++) {
        fact_release(&in[k]);
        if ((int)k == imm) {
            in[k] = const_fact(A, &A->p->consts[ins->b]);
            continue;
        }
        in[k] = fact_none();
        uint32_t port = A->pfirst[i] + k;
        for (uint32_t e = A->prod_first[port]; e < A->prod_first[port + 1]; e++)
            fact_join(&in[k], &A->F->out[A->prod[e]]);
    }
}

void isa_facts_input(const isa_facts *F, uint32_t i, uint32_t k, isa_fact *out)
{
    const isa_program *p = F->p;
    const isa_inst *ins = &p->insts[i];
    if ((int)k == isa_imm_port(ins)) {
        an A = {.F = (isa_facts *)F, .p = p};
        *out = const_fact(&A, &p->consts[ins->b]);
        return;
    }
    *out = fact_none();
    for (uint32_t j = 0; j < p->n_insts; j++) {
        const isa_inst *src = &p->insts[j];
        for (uint32_t e = src->edge_first; e < src->edge_first + src->n_edges; e++)
            if (p->edges[e].inst == i && p->edges[e].port == k)
                fact_join(out, &F->out[F->first[j] + p->edges[e].out]);
    }
}

void isa_fact_release(isa_fact *f) { fact_release(f); }

int isa_fact_ints(const isa_fact *f, int64_t *out, int max) { return ints_of(f, out, max); }

static uint32_t max_ports(const isa_program *p)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < p->n_insts; i++)
        if (isa_ports(&p->insts[i]) > m)
            m = isa_ports(&p->insts[i]);
    return m;
}

/* One pass in instruction order; output facts only grow (joined with what
 * they were), so the passes reach the least fixpoint. With `final`, each
 * output is recomputed from its inputs alone, to find the conflicts. */
static void forward_pass(an *A, isa_fact *in, isa_fact *tmp, bool final)
{
    isa_facts *F = A->F;
    for (uint32_t i = 0; i < A->p->n_insts && !A->nomem; i++) {
        const isa_inst *ins = &A->p->insts[i];
        uint32_t no = isa_outs(ins);
        input_facts(A, i, in);
        transfer(A, i, in, tmp);
        for (uint32_t k = 0; k < no; k++) {
            isa_fact *o = &F->out[F->first[i] + k];
            fact_meet(&tmp[k], &A->req[F->first[i] + k]);
            if (final)
                continue;
            isa_fact j;
            memset(&j, 0, sizeof j);
            fact_copy(&j, o);
            fact_join(&j, &tmp[k]);
            if (!fact_eq(&j, o)) {
                fact_copy(o, &j);
                A->changed = true;
            }
            fact_release(&j);
        }
    }
}

/* Requirement r on the tokens of port `port` (instruction i's input k):
 * every producer must meet it (each of its tokens reaches this consumer). */
static void require(an *A, uint32_t i, uint32_t k, const isa_fact *r)
{
    uint32_t port = A->pfirst[i] + k;
    for (uint32_t e = A->prod_first[port]; e < A->prod_first[port + 1]; e++) {
        isa_fact *q = &A->req[A->prod[e]];
        isa_fact before = *q;
        fact_meet(q, r);
        if (memcmp(&before, q, sizeof before) != 0)
            A->changed = true;
    }
}

/* What instruction i's kind needs of its inputs, given the current facts:
 * the same dtype for the operands of an elementwise op, bool for logic and
 * predicates, the declared type of a result, a unary op's input shaped as its
 * output, a pass-through's input as its output, MATMUL's inner dims. */
static void backward(an *A, uint32_t i, const isa_fact *in)
{
    const isa_program *p = A->p;
    const isa_inst *ins = &p->insts[i];
    const isa_fact *o = isa_outs(ins) ? &A->F->out[A->F->first[i]] : NULL;
    isa_fact r = fact_top();
    const isa_class cls = isa_ops[ins->op].cls;
    switch (ins->op) {
    case ISA_RESULT:
        for (uint32_t k = 0; k < p->n_entries; k++)
            if (p->entries[k].region == ins->region && ins->a < p->entries[k].n_results) {
                const isa_param *q = &p->entries[k].results[ins->a];
                r.dtype = q->dtype;
                r.rank = q->rank == 0 ? 0 : -1;
                if (q->rank != 0 && q->shaped && q->ndim <= TFVM_MAX_RANK) {
                    r.rank = (int8_t)q->ndim;
                    memcpy(r.dims, q->dims, sizeof(int64_t) * q->ndim);
                }
                require(A, i, 0, &r);
            }
        return;
    case ISA_IDENTITY:
    case ISA_LOOPCOND:
    case ISA_ENTER:
    case ISA_CALL: /* every token of the input goes out */
        if (o && !o->none) {
            r.dtype = o->dtype;
            r.rank = o->rank;
            memcpy(r.dims, o->dims, sizeof r.dims);
            require(A, i, 0, &r);
        }
        return;
    case ISA_SWITCH:
        r.dtype = TFVM_BOOL;
        r.rank = 0;
        require(A, i, 1, &r);
        return;
    case ISA_MATMUL:
    case ISA_FUSED_MATMUL:
        if (in[0].rank == 2 && in[1].rank == 2) {
            bool ta = ins->a & ISA_OPT_TRANS_A, tb = ins->a & ISA_OPT_TRANS_B;
            int64_t ka = in[0].dims[ta ? 0 : 1], kb = in[1].dims[tb ? 1 : 0];
            if (ka < 0 && kb >= 0) {
                r.rank = 2;
                r.dims[0] = r.dims[1] = -1;
                r.dims[ta ? 0 : 1] = kb;
                require(A, i, 0, &r);
            } else if (kb < 0 && ka >= 0) {
                r.rank = 2;
                r.dims[0] = r.dims[1] = -1;
                r.dims[tb ? 1 : 0] = ka;
                require(A, i, 1, &r);
            }
        }
        return;
    default:
        break;
    }
    if (!isa_is_compute(cls) || cls == ISA_CLASS_TENSOR || ins->n_in > MAX_IN)
        return;
    /* elementwise: one operand dtype (SELECT: its condition is bool) */
    uint32_t first = ins->op == ISA_SELECT ? 1 : 0;
    uint8_t d = 0;
    for (uint32_t k = first; k < ins->n_in; k++)
        if (in[k].dtype)
            d = in[k].dtype;
    if (ins->op == ISA_CAST || ins->op == ISA_BITCAST)
        d = 0;
    if (isa_ops[ins->op].types == ISA_TYPES_BOOL)
        d = TFVM_BOOL;
    if (ins->op == ISA_SELECT) {
        r.dtype = TFVM_BOOL;
        require(A, i, 0, &r);
    }
    r = fact_top();
    r.dtype = d;
    if ((cls == ISA_CLASS_UNARY) && o && !o->none) {
        r.rank = o->rank;
        memcpy(r.dims, o->dims, sizeof r.dims);
    }
    for (uint32_t k = first; k < ins->n_in; k++)
        if ((int)k != isa_imm_port(ins))
            require(A, i, k, &r);
}

/* Which instructions fire on every run that reaches their region's entry:
 * not behind a SWITCH side, a loop exit or a return (those may never come). */
static void find_uncond(an *A)
{
    const isa_program *p = A->p;
    bool changed = true;
    while (changed) {
        changed = false;
        for (uint32_t i = 0; i < p->n_insts; i++) {
            if (A->uncond[i])
                continue;
            const isa_inst *ins = &p->insts[i];
            bool u;
            if (ins->op == ISA_ARG) {
                u = true;
            } else if (ins->op == ISA_EXIT || ins->op == ISA_RETURN || ins->op == ISA_NEXTITER) {
                u = false;
            } else {
                u = ins->op != ISA_MERGE;
                bool any = false;
                int imm = isa_imm_port(ins);
                for (uint32_t k = 0; k < isa_ports(ins); k++) {
                    if ((int)k == imm)
                        continue;
                    uint32_t port = A->pfirst[i] + k;
                    bool pu = false;
                    for (uint32_t e = A->prod_first[port]; e < A->prod_first[port + 1]; e++) {
                        /* the producer instruction and output of entry e */
                        uint32_t o = A->prod[e], lo = 0, hi = p->n_insts;
                        while (hi - lo > 1) {
                            uint32_t mid = (lo + hi) / 2;
                            if (A->F->first[mid] <= o)
                                lo = mid;
                            else
                                hi = mid;
                        }
                        bool side = isa_is_switch(p->insts[lo].op);
                        pu = pu || (A->uncond[lo] && !side);
                    }
                    if (ins->op == ISA_MERGE)
                        any = any || pu;
                    else
                        u = u && pu;
                }
                if (ins->op == ISA_MERGE)
                    u = any;
                if (ins->op == ISA_CONST && isa_ports(ins) == 0)
                    u = p->regions[ins->region].kind == ISA_REGION_ROOT;
            }
            if (u) {
                A->uncond[i] = true;
                changed = true;
            }
        }
    }
}

static tfvm_status build_index(an *A)
{
    const isa_program *p = A->p;
    isa_facts *F = A->F;
    const tfvm_allocator *a = &F->alloc;
    uint32_t n_ports = 0;
    F->first = ut_calloc(a, (size_t)p->n_insts + 1, sizeof *F->first);
    A->pfirst = ut_calloc(a, (size_t)p->n_insts + 1, sizeof *A->pfirst);
    A->uncond = ut_calloc(a, (size_t)p->n_insts + 1, sizeof *A->uncond);
    if (!F->first || !A->pfirst || !A->uncond)
        return TFVM_ERR_NOMEM;
    for (uint32_t i = 0; i < p->n_insts; i++) {
        F->first[i] = F->n_out;
        A->pfirst[i] = n_ports;
        F->n_out += isa_outs(&p->insts[i]);
        n_ports += isa_ports(&p->insts[i]);
    }
    F->first[p->n_insts] = F->n_out;
    A->pfirst[p->n_insts] = n_ports;
    F->out = ut_calloc(a, (size_t)F->n_out + 1, sizeof *F->out);
    A->req = ut_calloc(a, (size_t)F->n_out + 1, sizeof *A->req);
    A->prod_first = ut_calloc(a, (size_t)n_ports + 2, sizeof *A->prod_first);
    A->prod = ut_calloc(a, (size_t)p->n_edges + 1, sizeof *A->prod);
    if (!F->out || !A->req || !A->prod_first || !A->prod)
        return TFVM_ERR_NOMEM;
    for (uint32_t o = 0; o < F->n_out; o++) {
        F->out[o] = fact_none();
        A->req[o] = fact_top();
    }
    for (uint32_t e = 0; e < p->n_edges; e++)
        A->prod_first[A->pfirst[p->edges[e].inst] + p->edges[e].port + 1]++;
    for (uint32_t k = 0; k < n_ports; k++)
        A->prod_first[k + 1] += A->prod_first[k];
    uint32_t *fill = ut_calloc(a, (size_t)n_ports + 1, sizeof *fill);
    if (!fill)
        return TFVM_ERR_NOMEM;
    for (uint32_t i = 0; i < p->n_insts; i++) {
        const isa_inst *ins = &p->insts[i];
        for (uint32_t e = ins->edge_first; e < ins->edge_first + ins->n_edges; e++) {
            uint32_t port = A->pfirst[p->edges[e].inst] + p->edges[e].port;
            A->prod[A->prod_first[port] + fill[port]++] = F->first[i] + p->edges[e].out;
        }
    }
    ut_free(a, fill, ((size_t)n_ports + 1) * sizeof *fill);
    return TFVM_OK;
}

static void free_facts(const tfvm_allocator *a, isa_fact *f, uint32_t n)
{
    if (!f)
        return;
    for (uint32_t k = 0; k < n; k++)
        fact_release(&f[k]);
    ut_free(a, f, ((size_t)n + 1) * sizeof *f);
}

void isa_facts_free(isa_facts *F)
{
    if (!F)
        return;
    const isa_program *p = F->p;
    const tfvm_allocator *a = &F->alloc;
    if (p) {
        ut_free(a, F->first, ((size_t)p->n_insts + 1) * sizeof *F->first);
        free_facts(a, F->out, F->n_out);
    }
    ut_free(a, F->conflicts, F->cap_conflicts * sizeof *F->conflicts);
    memset(F, 0, sizeof *F);
}

static void an_free(an *A, uint32_t n_ports, isa_fact *in, isa_fact *tmp, uint32_t mp)
{
    const tfvm_allocator *a = &A->F->alloc;
    const isa_program *p = A->p;
    ut_free(a, A->pfirst, ((size_t)p->n_insts + 1) * sizeof *A->pfirst);
    ut_free(a, A->uncond, ((size_t)p->n_insts + 1) * sizeof *A->uncond);
    ut_free(a, A->prod_first, ((size_t)n_ports + 2) * sizeof *A->prod_first);
    ut_free(a, A->prod, ((size_t)p->n_edges + 1) * sizeof *A->prod);
    free_facts(a, A->req, A->F->n_out);
    free_facts(a, in, mp);
    free_facts(a, tmp, mp);
}

tfvm_status isa_facts_analyse(const isa_program *p, const tfvm_allocator *alloc, isa_facts *F, tfvm_error *err)
{
    memset(F, 0, sizeof *F);
    F->p = p;
    F->alloc = alloc ? *alloc : (tfvm_allocator){0};
    an A = {.F = F, .p = p};
    uint32_t mp = max_ports(p) + 3; /* MERGE's two outputs, at least */
    isa_fact *in = ut_calloc(&F->alloc, (size_t)mp + 1, sizeof *in);
    isa_fact *tmp = ut_calloc(&F->alloc, (size_t)mp + 1, sizeof *tmp);
    tfvm_status st = in && tmp ? build_index(&A) : TFVM_ERR_NOMEM;
    uint32_t n_ports = A.pfirst ? A.pfirst[p->n_insts] : 0;
    if (st == TFVM_OK) {
        find_uncond(&A);
        for (uint32_t round = 0; round < MAX_ROUNDS && !A.nomem; round++) {
            F->rounds = round + 1;
            for (uint32_t o = 0; o < F->n_out; o++) {
                fact_release(&F->out[o]);
                F->out[o] = fact_none();
            }
            A.changed = true;
            for (uint32_t pass = 0; A.changed && pass < MAX_PASSES && !A.nomem; pass++) {
                A.changed = false;
                forward_pass(&A, in, tmp, false);
                F->passes++;
            }
            if (round == 0) {
                /* conflicts from forward facts alone: true of every token */
                A.record = true;
                forward_pass(&A, in, tmp, true);
                A.record = false;
            }
            A.changed = false;
            for (uint32_t i = p->n_insts; i-- > 0 && !A.nomem;) {
                input_facts(&A, i, in);
                backward(&A, i, in);
            }
            if (!A.changed)
                break;
        }
    }
    if (A.nomem)
        st = TFVM_ERR_NOMEM;
    an_free(&A, n_ports, in, tmp, mp);
    if (st != TFVM_OK) {
        isa_facts_free(F);
        return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory analysing the program", p->name ? p->name : "program");
    }
    return TFVM_OK;
}

tfvm_status isa_facts_check(const isa_program *p, const tfvm_allocator *a, tfvm_error *err)
{
    isa_facts F;
    tfvm_status st = isa_facts_analyse(p, a, &F, err);
    if (st != TFVM_OK)
        return st;
    for (uint32_t k = 0; k < F.n_conflicts; k++) {
        const isa_conflict *c = &F.conflicts[k];
        if (!c->always || c->code != TFVM_ERR_SHAPE)
            continue;
        char label[96];
        st = ut_err(err, TFVM_ERR_SHAPE, "%s: %s (%s): %s", p->name ? p->name : "program",
                    isa_inst_label(p, c->inst, label, sizeof label), isa_ops[p->insts[c->inst].op].name, c->msg);
        break;
    }
    isa_facts_free(&F);
    return st;
}

tfvm_status an_program_finish(tfvm_program *p, tfvm_status st, bool check, tfvm_program **out, tfvm_error *err)
{
    if (st == TFVM_OK && check) /* shapes that conflict wherever the program runs: refused now, not mid-run */
        st = isa_facts_check(&p->isa, &p->alloc, err);
    return ld_program_finish(p, st, out, err);
}
