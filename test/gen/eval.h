/* test/gen/eval.h — a reference tree-walking evaluator of the typed .tfg AST
 * (scalar programs), written independently of the VM and its kernels. The
 * differential test (test/unit/test_diff.c) runs it next to the compiled
 * graph: both must give the same results, or both fail.
 *
 * Which failure a dataflow run reports first depends on the firing order, so
 * a failing operation does not stop this evaluator: its result is *poison*,
 * and nothing that depends on a poison value runs (as in the VM, where it
 * would never get that input): no operation, no branch of an if on a poison
 * condition, no further iteration of a loop with a poison condition. Every
 * failure found on the way is recorded; the one the VM reports must be one
 * of them (any failure whose inputs are all computed can be the first). */
#ifndef TFVM_TEST_EVAL_H
#define TFVM_TEST_EVAL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"

typedef struct ev_val {
    uint8_t dtype;
    bool poison;        /* depends on a failed operation */
    union {
        bool b;
        int32_t i32;
        int64_t i64;
        float f32;
        double f64;
    } u;
} ev_val;

enum { EV_DIV0 = 1, EV_MOD0 = 2, EV_CAST = 4, EV_OVF = 8 };

typedef struct ev {
    tfvm_status code;   /* an error that stops evaluation (limits), TFVM_OK while none */
    char msg[256];
    unsigned kinds;     /* EV_* of every failure met */
    bool trap;          /* --overflow=trap: the operators + - * on integers fail on overflow */
    uint32_t depth;
    uint64_t steps, max_steps;
} ev;

/* A failing operation: recorded, and its result is poison. */
static bool ev_poison(ev *E, unsigned kind, ev_val *out)
{
    E->kinds |= kind;
    out->poison = true;
    return true;
}

static bool ev_fail(ev *E, tfvm_status code, const char *msg)
{
    if (E->code == TFVM_OK) {
        E->code = code;
        snprintf(E->msg, sizeof E->msg, "%s", msg);
    }
    return false;
}

static bool ev_is_int(uint8_t d) { return d == TFVM_I32 || d == TFVM_I64; }

static int64_t ev_as_i64(const ev_val *v)
{
    switch (v->dtype) {
    case TFVM_BOOL: return v->u.b;
    case TFVM_I32: return v->u.i32;
    default: return v->u.i64;
    }
}

static double ev_as_f64(const ev_val *v)
{
    switch (v->dtype) {
    case TFVM_BOOL: return v->u.b;
    case TFVM_I32: return v->u.i32;
    case TFVM_I64: return (double)v->u.i64;
    case TFVM_F32: return v->u.f32;
    default: return v->u.f64;
    }
}

static ev_val ev_int(uint8_t d, int64_t x)
{
    ev_val v = {.dtype = d};
    if (d == TFVM_I32)
        v.u.i32 = (int32_t)(uint32_t)(uint64_t)x; /* two's complement wrap */
    else
        v.u.i64 = x;
    return v;
}

static ev_val ev_flt(uint8_t d, double x)
{
    ev_val v = {.dtype = d};
    if (d == TFVM_F32)
        v.u.f32 = (float)x;
    else
        v.u.f64 = x;
    return v;
}

static ev_val ev_bool(bool b)
{
    ev_val v = {.dtype = TFVM_BOOL};
    v.u.b = b;
    return v;
}

/* Integer ops computed in uint64 and wrapped to the width. */
static bool ev_int_op(ev *E, isa_op op, uint8_t d, int64_t x, int64_t y, ev_val *out)
{
    uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    int64_t min = d == TFVM_I32 ? INT32_MIN : INT64_MIN;
    switch (op) {
    case ISA_ADD: *out = ev_int(d, (int64_t)(ux + uy)); return true;
    case ISA_SUB: *out = ev_int(d, (int64_t)(ux - uy)); return true;
    case ISA_MUL: *out = ev_int(d, (int64_t)(ux * uy)); return true;
    case ISA_DIV:
        if (y == 0)
            return ev_poison(E, EV_DIV0, out);
        *out = ev_int(d, y == -1 ? (x == min ? min : -x) : x / y);
        return true;
    case ISA_MOD:
        if (y == 0)
            return ev_poison(E, EV_MOD0, out);
        *out = ev_int(d, y == -1 ? 0 : x % y);
        return true;
    case ISA_MIN: *out = ev_int(d, x < y ? x : y); return true;
    case ISA_MAX: *out = ev_int(d, x > y ? x : y); return true;
    case ISA_BITAND: *out = ev_int(d, x & y); return true;
    case ISA_BITOR: *out = ev_int(d, x | y); return true;
    case ISA_BITXOR: *out = ev_int(d, x ^ y); return true;
    case ISA_SHL: { /* a count outside [0, bits) gives 0 */
        int bits = d == TFVM_I32 ? 32 : 64;
        *out = ev_int(d, y < 0 || y >= bits ? 0 : (int64_t)(ux << y));
        return true;
    }
    case ISA_SHR: { /* arithmetic; outside [0, bits): 0 or -1 by the sign */
        int bits = d == TFVM_I32 ? 32 : 64;
        int64_t r;
        if (y < 0 || y >= bits)
            r = x < 0 ? -1 : 0;
        else
            r = x < 0 ? (int64_t)~(~ux >> y) : (int64_t)(ux >> y);
        *out = ev_int(d, r);
        return true;
    }
    default: return ev_fail(E, TFVM_ERR_INTERNAL, "bad integer op");
    }
}

static bool ev_binary(ev *E, isa_op op, const ev_val *a, const ev_val *b, ev_val *out)
{
    uint8_t d = a->dtype;
    *out = (ev_val){.dtype = d};
    if (a->poison || b->poison) {
        out->poison = true; /* never fires: an input never arrives */
        return true;
    }
    switch (isa_ops[op].cls) {
    case ISA_CLASS_BINARY:
        if (ev_is_int(d))
            return ev_int_op(E, op, d, ev_as_i64(a), ev_as_i64(b), out);
        {
            double x = ev_as_f64(a), y = ev_as_f64(b), r;
            if (d == TFVM_F32) { /* f32 arithmetic rounds each result to f32 */
                float fx = a->u.f32, fy = b->u.f32, fr;
                switch (op) {
                case ISA_ADD: fr = fx + fy; break;
                case ISA_SUB: fr = fx - fy; break;
                case ISA_MUL: fr = fx * fy; break;
                case ISA_DIV: fr = fx / fy; break;
                case ISA_MOD: fr = fmodf(fx, fy); break;
                case ISA_MIN: fr = (fx < fy || isnan(fx)) ? fx : fy; break;
                default: fr = (fx > fy || isnan(fx)) ? fx : fy; break;
                }
                *out = ev_flt(d, fr);
                return true;
            }
            switch (op) {
            case ISA_ADD: r = x + y; break;
            case ISA_SUB: r = x - y; break;
            case ISA_MUL: r = x * y; break;
            case ISA_DIV: r = x / y; break;
            case ISA_MOD: r = fmod(x, y); break;
            case ISA_MIN: r = (x < y || isnan(x)) ? x : y; break;
            default: r = (x > y || isnan(x)) ? x : y; break;
            }
            *out = ev_flt(d, r);
            return true;
        }
    case ISA_CLASS_COMPARE: {
        bool r;
        if (ev_is_int(d) || d == TFVM_BOOL) {
            int64_t x = ev_as_i64(a), y = ev_as_i64(b);
            r = op == ISA_LESS ? x < y : op == ISA_LESS_EQUAL ? x <= y : op == ISA_GREATER ? x > y
              : op == ISA_GREATER_EQUAL ? x >= y : op == ISA_EQUAL ? x == y : x != y;
        } else {
            double x = ev_as_f64(a), y = ev_as_f64(b);
            r = op == ISA_LESS ? x < y : op == ISA_LESS_EQUAL ? x <= y : op == ISA_GREATER ? x > y
              : op == ISA_GREATER_EQUAL ? x >= y : op == ISA_EQUAL ? x == y : x != y;
        }
        *out = ev_bool(r);
        return true;
    }
    case ISA_CLASS_LOGIC:
        *out = ev_bool(op == ISA_AND ? (a->u.b && b->u.b) : op == ISA_XOR ? (a->u.b != b->u.b) : (a->u.b || b->u.b));
        return true;
    default: return ev_fail(E, TFVM_ERR_INTERNAL, "bad binary op");
    }
}

static bool ev_unary(ev *E, isa_op op, uint32_t attr, const ev_val *a, ev_val *out)
{
    uint8_t d = a->dtype;
    *out = (ev_val){.dtype = d};
    if (a->poison) {
        out->poison = true;
        return true;
    }
    switch (op) {
    case ISA_NOT: *out = ev_bool(!a->u.b); return true;
    case ISA_BITNOT: *out = ev_int(d, ~ev_as_i64(a)); return true;
    case ISA_NEG:
        if (ev_is_int(d))
            *out = ev_int(d, (int64_t)(0 - (uint64_t)ev_as_i64(a)));
        else
            *out = d == TFVM_F32 ? ev_flt(d, -a->u.f32) : ev_flt(d, -a->u.f64);
        return true;
    case ISA_ABS:
        if (ev_is_int(d)) {
            int64_t x = ev_as_i64(a);
            *out = ev_int(d, x < 0 ? (int64_t)(0 - (uint64_t)x) : x);
        } else {
            *out = d == TFVM_F32 ? ev_flt(d, fabsf(a->u.f32)) : ev_flt(d, fabs(a->u.f64));
        }
        return true;
    case ISA_CAST: {
        uint8_t t = (uint8_t)attr;
        if (t == TFVM_BOOL) {
            *out = ev_bool(ev_is_int(d) || d == TFVM_BOOL ? ev_as_i64(a) != 0 : ev_as_f64(a) != 0.0);
        } else if (ev_is_int(t)) {
            if (ev_is_int(d) || d == TFVM_BOOL) {
                *out = ev_int(t, ev_as_i64(a));
            } else {
                double x = ev_as_f64(a);
                bool fits = t == TFVM_I32 ? (x > -2147483649.0 && x < 2147483648.0)
                                          : (x >= -9223372036854775808.0 && x < 9223372036854775808.0);
                if (!fits)
                    return ev_poison(E, EV_CAST, out);
                *out = ev_int(t, (int64_t)x);
            }
        } else if (d == TFVM_I64 && t == TFVM_F32) {
            *out = ev_flt(t, (float)a->u.i64);
        } else {
            *out = ev_flt(t, ev_as_f64(a));
        }
        return true;
    }
    default: return ev_fail(E, TFVM_ERR_INTERNAL, "bad unary op");
    }
}

/* The operator's instruction; & | ^ ~ on bools are the logic ops (d: the operands' dtype). */
static isa_op ev_tk_op(uint8_t tk, uint8_t d)
{
    bool b = d == TFVM_BOOL;
    switch (tk) {
    case CC_T_BAND: return b ? ISA_AND : ISA_BITAND;
    case CC_T_BOR: return b ? ISA_OR : ISA_BITOR;
    case CC_T_XOR: return b ? ISA_XOR : ISA_BITXOR;
    case CC_T_SHL: return ISA_SHL;
    case CC_T_SHR: return ISA_SHR;
    case CC_T_TILDE: return b ? ISA_NOT : ISA_BITNOT;
    case CC_T_PLUS: return ISA_ADD;
    case CC_T_MINUS: return ISA_SUB;
    case CC_T_STAR: return ISA_MUL;
    case CC_T_SLASH: return ISA_DIV;
    case CC_T_PERCENT: return ISA_MOD;
    case CC_T_LT: return ISA_LESS;
    case CC_T_LE: return ISA_LESS_EQUAL;
    case CC_T_GT: return ISA_GREATER;
    case CC_T_GE: return ISA_GREATER_EQUAL;
    case CC_T_EQ: return ISA_EQUAL;
    case CC_T_NE: return ISA_NOT_EQUAL;
    case CC_T_AND: return ISA_AND;
    default: return ISA_OR;
    }
}

static bool ev_expr(ev *E, const cc_expr *e, ev_val *frame, ev_val *out);

static bool ev_block(ev *E, const cc_ablock *b, ev_val *frame, ev_val *out)
{
    for (uint32_t i = 0; i < b->n_lets; i++) {
        const cc_let *l = &b->lets[i];
        ev_val tmp[16];
        if (l->value->type.n > 16)
            return ev_fail(E, TFVM_ERR_INTERNAL, "tuple too wide");
        if (!ev_expr(E, l->value, frame, tmp))
            return false;
        for (uint32_t k = 0; k < l->n_names; k++)
            if (l->vars[k])
                frame[l->vars[k]->slot] = tmp[k];
    }
    return ev_expr(E, b->result, frame, out);
}

static bool ev_call(ev *E, const cc_func *f, const ev_val *args, ev_val *out)
{
    if (++E->depth > 4000)
        return ev_fail(E, TFVM_ERR_LIMIT, "reference evaluator: recursion too deep");
    ev_val *frame = calloc(f->n_slots + 1, sizeof *frame);
    if (!frame)
        return ev_fail(E, TFVM_ERR_NOMEM, "out of memory");
    for (uint32_t k = 0; k < f->n_params; k++)
        frame[f->params[k].var->slot] = args[k];
    bool ok = ev_block(E, f->body, frame, out);
    free(frame);
    E->depth--;
    return ok;
}

static bool ev_expr(ev *E, const cc_expr *e, ev_val *frame, ev_val *out)
{
    if (++E->steps > E->max_steps)
        return ev_fail(E, TFVM_ERR_LIMIT, "reference evaluator: too many steps");
    const cc_vtype *t = e->type.n ? &e->type.t[0] : NULL;
    if (t && t->tensor)
        return ev_fail(E, TFVM_ERR_INTERNAL, "reference evaluator: tensors are not supported");
    switch (e->kind) {
    case CC_E_INT: {
        int64_t x = e->u.lit.neg ? (int64_t)(0 - e->u.lit.mag) : (int64_t)e->u.lit.mag;
        if (ev_is_int(t->dtype))
            *out = ev_int(t->dtype, x);
        else
            *out = ev_flt(t->dtype, e->u.lit.neg ? -(double)e->u.lit.mag : (double)e->u.lit.mag);
        return true;
    }
    case CC_E_FLOAT: *out = ev_flt(t->dtype, e->u.lit.f); return true;
    case CC_E_BOOL: *out = ev_bool(e->u.lit.b); return true;
    case CC_E_TENSOR: return ev_fail(E, TFVM_ERR_INTERNAL, "reference evaluator: tensors are not supported");
    case CC_E_VAR: *out = frame[e->u.var.var->slot]; return true;
    case CC_E_UNARY: {
        ev_val a;
        if (!ev_expr(E, e->u.op.a, frame, &a))
            return false;
        isa_op op = e->u.op.op == CC_T_NOT ? ISA_NOT : e->u.op.op == CC_T_TILDE ? ev_tk_op(CC_T_TILDE, a.dtype) : ISA_NEG;
        return ev_unary(E, op, 0, &a, out);
    }
    case CC_E_BINARY: {
        /* both operands are evaluated, left first (a short-circuit && or || whose
         * right side can fail or recurse is an if by now: types.c) */
        ev_val a, b;
        if (!ev_expr(E, e->u.op.a, frame, &a) || !ev_expr(E, e->u.op.b, frame, &b))
            return false;
        isa_op op = ev_tk_op(e->u.op.op, a.dtype);
        if (E->trap && ev_is_int(a.dtype) && !a.poison && !b.poison &&
            (op == ISA_ADD || op == ISA_SUB || op == ISA_MUL)) {
            int64_t x = ev_as_i64(&a), y = ev_as_i64(&b), r;
            bool ovf = op == ISA_ADD ? __builtin_add_overflow(x, y, &r)
                     : op == ISA_SUB ? __builtin_sub_overflow(x, y, &r)
                                     : __builtin_mul_overflow(x, y, &r);
            if (ovf || (a.dtype == TFVM_I32 && (r < INT32_MIN || r > INT32_MAX))) {
                *out = (ev_val){.dtype = a.dtype};
                return ev_poison(E, EV_OVF, out);
            }
        }
        return ev_binary(E, op, &a, &b, out);
    }
    case CC_E_CALL: {
        ev_val args[16];
        if (e->u.call.n_args > 16)
            return ev_fail(E, TFVM_ERR_INTERNAL, "too many arguments");
        for (uint32_t k = 0; k < e->u.call.n_args; k++)
            if (!ev_expr(E, e->u.call.args[k], frame, &args[k]))
                return false;
        if (e->u.call.fn)
            return ev_call(E, e->u.call.fn, args, out);
        isa_op op = (isa_op)e->u.call.builtin;
        switch (isa_ops[op].cls) {
        case ISA_CLASS_UNARY: return ev_unary(E, op, e->u.call.targ, &args[0], out);
        case ISA_CLASS_LOGIC:
            if (op == ISA_NOT)
                return ev_unary(E, op, 0, &args[0], out);
            return ev_binary(E, op, &args[0], &args[1], out);
        case ISA_CLASS_SELECT:
            if (args[0].poison || args[1].poison || args[2].poison) {
                *out = args[1];
                out->poison = true;
                return true;
            }
            *out = args[0].u.b ? args[1] : args[2];
            return true;
        default: return ev_binary(E, op, &args[0], &args[1], out);
        }
    }
    case CC_E_IF: {
        ev_val c;
        if (!ev_expr(E, e->u.cond.cond, frame, &c))
            return false;
        if (c.poison) { /* no branch runs */
            for (uint32_t k = 0; k < e->type.n; k++)
                out[k] = (ev_val){.dtype = e->type.t[k].dtype, .poison = true};
            return true;
        }
        return ev_block(E, c.u.b ? e->u.cond.then : e->u.cond.els, frame, out);
    }
    case CC_E_WHILE: {
        uint32_t n = e->u.loop.n_vars;
        ev_val next[16];
        if (n > 16)
            return ev_fail(E, TFVM_ERR_INTERNAL, "too many loop variables");
        for (uint32_t k = 0; k < n; k++)
            if (!ev_expr(E, e->u.loop.vars[k].init, frame, &next[k]))
                return false;
        for (;;) {
            for (uint32_t k = 0; k < n; k++)
                frame[e->u.loop.vars[k].var->slot] = next[k];
            ev_val c;
            if (!ev_expr(E, e->u.loop.cond, frame, &c))
                return false;
            if (c.poison) { /* the loop never ends: no EXIT fires */
                for (uint32_t k = 0; k < n; k++)
                    frame[e->u.loop.vars[k].var->slot].poison = true;
                break;
            }
            if (!c.u.b)
                break;
            if (!ev_block(E, e->u.loop.body, frame, next))
                return false;
        }
        for (uint32_t k = 0; k < n; k++)
            out[k] = frame[e->u.loop.vars[k].var->slot];
        return true;
    }
    case CC_E_TUPLE:
        for (uint32_t k = 0; k < e->u.tuple.n; k++)
            if (!ev_expr(E, e->u.tuple.elems[k], frame, &out[k]))
                return false;
        return true;
    }
    return ev_fail(E, TFVM_ERR_INTERNAL, "bad expression");
}

#endif
