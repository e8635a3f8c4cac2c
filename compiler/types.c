/* compiler/types.c — the type checker: resolves names and calls, gives every
 * expression its list of value types (literals adapt to the type their
 * context expects), numbers the call sites and finds what the entry reaches.
 * Every type error is reported here, before any graph is built. */
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "decomp.h"

/* ---- Types ------------------------------------------------------------------------ */

bool cc_vtype_eq(const cc_vtype *a, const cc_vtype *b)
{
    if (a->dtype != b->dtype || a->tensor != b->tensor || a->rank != b->rank)
        return false;
    /* rank may be ISA_RANK_ANY (compiler/build.h's cc_tensor_t(d, -1)): no dims */
    for (int i = 0; i < a->rank && i < TFVM_MAX_RANK; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

void cc_vtype_str(const cc_vtype *t, char *buf, size_t size)
{
    size_t n;
    ut_fmt(buf, size, "%s", tfvm_dtype_name((tfvm_dtype)t->dtype));
    if (!t->tensor)
        return;
    for (int i = 0; i <= t->rank; i++) {
        n = strlen(buf);
        if (i == t->rank)
            ut_fmt(buf + n, size - n, "]");
        else if (t->dims[i] < 0)
            ut_fmt(buf + n, size - n, "%s?", i ? ", " : "[");
        else
            ut_fmt(buf + n, size - n, "%s%lld", i ? ", " : "[", (long long)t->dims[i]);
    }
}

static void tlist_str(const cc_tlist *l, char *buf, size_t size)
{
    if (l->n == 1) {
        cc_vtype_str(&l->t[0], buf, size);
        return;
    }
    size_t n = 0;
    ut_fmt(buf, size, "(");
    for (uint32_t i = 0; i < l->n; i++) {
        n = strlen(buf);
        if (n + 2 >= size)
            return;
        if (i)
            ut_fmt(buf + n, size - n, ", ");
        n = strlen(buf);
        cc_vtype_str(&l->t[i], buf + n, size - n);
    }
    n = strlen(buf);
    ut_fmt(buf + n, size - n, ")");
}

/* A value of type `got` may flow where `want` is declared: same dtype and
 * kind, same rank, and every known dimension of `want` matches (an unknown
 * dimension of `got` is accepted and checked at run time by the kernels). */
static bool assignable(const cc_vtype *want, const cc_vtype *got)
{
    if (want->dtype != got->dtype || want->tensor != got->tensor || want->rank != got->rank)
        return false;
    for (int i = 0; i < want->rank; i++)
        if (want->dims[i] >= 0 && got->dims[i] >= 0 && want->dims[i] != got->dims[i])
            return false;
    return true;
}

/* ---- Scopes ----------------------------------------------------------------------------- */

typedef struct checker {
    cc *C;
    cc_func *fn;          /* being checked */
    cc_var **scope;       /* visible variables, innermost last */
    uint32_t n_scope, cap_scope;
    cc_var **decls;       /* variables the user declared (unused-variable warnings) */
    uint32_t n_decls, cap_decls;
    bool refix;           /* a use fixed the dtype of a bare-literal let: check the function again */
} checker;

static bool same_pos(cc_pos a, cc_pos b) { return a.line == b.line && a.col == b.col; }

typedef struct decl_at {
    cc_var *v;
    uint32_t index; /* in checker.decls */
} decl_at;

static int cmp_decl_pos(const void *x, const void *y)
{
    const cc_var *a = ((const decl_at *)x)->v, *b = ((const decl_at *)y)->v;
    if (a->pos.line != b->pos.line)
        return a->pos.line < b->pos.line ? -1 : 1;
    return a->pos.col < b->pos.col ? -1 : a->pos.col > b->pos.col;
}

static cc_var *lookup(checker *K, const char *name)
{
    for (uint32_t i = K->n_scope; i-- > 0;)
        if (strcmp(K->scope[i]->name, name) == 0)
            return K->scope[i];
    return NULL;
}

static cc_var *declare(checker *K, const char *name, cc_pos pos, const cc_vtype *t)
{
    cc *C = K->C;
    cc_var *v = cc_alloc(C, sizeof *v);
    v->name = name;
    v->pos = pos;
    v->type = *t;
    v->origin = v;
    v->slot = K->fn->n_slots++;
    K->scope = cc_grow(C, K->scope, K->n_scope, &K->cap_scope, sizeof *K->scope);
    K->scope[K->n_scope++] = v;
    return v;
}

static cc_func *find_func(cc *C, const char *name)
{
    for (uint32_t i = 0; i < C->mod.n_funcs; i++)
        if (strcmp(C->mod.funcs[i]->name, name) == 0)
            return C->mod.funcs[i];
    return NULL;
}

/* "; did you mean 'x'?" for an unknown name, from the names in scope and the functions. */
static const char *near_name(checker *K, const char *name, bool funcs_only)
{
    cc *C = K->C;
    uint32_t n = (funcs_only ? 0 : K->n_scope) + C->mod.n_funcs;
    const char **cands = cc_array(C, n, sizeof *cands);
    uint32_t k = 0;
    for (uint32_t i = 0; !funcs_only && i < K->n_scope; i++)
        cands[k++] = K->scope[i]->name;
    for (uint32_t i = 0; i < C->mod.n_funcs; i++)
        cands[k++] = C->mod.funcs[i]->name;
    return cc_suggest(name, cands, k);
}

/* A use (at `at`) fixed the dtype of a variable first given by a bare
 * literal. A let (var x = 0) then gets that type written out, and its
 * function is checked again; a loop variable is settled by check_while: a
 * version of either (x after `x = x + 1`) fixes it too, so the order of
 * the uses in a loop body does not matter. */
static void fix_one(checker *K, cc_var *v, uint8_t d, cc_pos at)
{
    v->type.dtype = d;
    v->flex = 0;
    v->fixed = true;
    v->fixed_at = at;
    if (v->let && !v->let->has_type) {
        v->let->has_type = true;
        v->let->flexed = true;
        v->let->fixed_at = at;
        v->let->type = (cc_vtype){.dtype = d};
        K->refix = true;
    }
}

static void fix_flex(checker *K, cc_var *v, uint8_t d, cc_pos at)
{
    fix_one(K, v, d, at);
    if (v->flexsrc && v->flexsrc != v && v->flexsrc->flex)
        fix_one(K, v->flexsrc, d, at);
}

/* "; 'x' is i64 because of its use at 4:17": why a variable first given by
 * a bare literal has the dtype that conflicts (empty when none did). */
static const char *fixed_note(const cc_var *v, char *buf, size_t size)
{
    buf[0] = '\0';
    if (v && v->fixed_at.line)
        ut_fmt(buf, size, "; '%s' is %s because of its use at %u:%u", v->name,
               tfvm_dtype_name((tfvm_dtype)v->type.dtype), v->fixed_at.line, v->fixed_at.col);
    return buf;
}

static const cc_var *expr_var(const cc_expr *e) { return e->kind == CC_E_VAR ? e->u.var.var : NULL; }

/* The errors recorded so far, to forget those of a check that is redone. */
typedef struct err_mark {
    uint32_t n;
    size_t len;
    tfvm_status st;
} err_mark;

static err_mark err_save(const cc *C) { return (err_mark){C->n_errors, C->msg_len, C->status}; }

static void err_restore(cc *C, err_mark m)
{
    C->n_errors = m.n;
    C->msg_len = m.len;
    C->status = m.st;
    if (C->err)
        C->err->message[m.n ? m.len : 0] = '\0';
}

/* ---- Expressions -------------------------------------------------------------------------- */

static void check_expr(checker *K, cc_expr *e, const cc_tlist *hint);
static void check_block(checker *K, cc_ablock *b, const cc_tlist *hint);

static cc_tlist one_type(cc *C, const cc_vtype *t)
{
    cc_tlist l = {1, cc_alloc(C, sizeof(cc_vtype))};
    l.t[0] = *t;
    return l;
}

static const cc_vtype *single(checker *K, const cc_expr *e, const char *what)
{
    if (e->type.n != 1)
        cc_error(K->C, e->start, TFVM_ERR_TYPE, "%s must be a single value, not a tuple of %u", what, e->type.n);
    return &e->type.t[0];
}

/* An expression whose type comes from its context: a literal without suffix,
 * or operators/ifs/tuples built only from such. Their siblings are checked
 * first so the literal can take the sibling's type. */
static bool is_flex(checker *K, const cc_expr *e)
{
    switch (e->kind) {
    case CC_E_INT:
    case CC_E_FLOAT: return e->u.lit.suffix == 0;
    case CC_E_TENSOR: return e->u.tensor.n > 0 && is_flex(K, e->u.tensor.elems[0]);
    case CC_E_UNARY: return (e->u.op.op == CC_T_MINUS || e->u.op.op == CC_T_TILDE) && is_flex(K, e->u.op.a);
    case CC_E_BINARY:
        switch (e->u.op.op) {
        case CC_T_PLUS: case CC_T_MINUS: case CC_T_STAR: case CC_T_SLASH: case CC_T_PERCENT:
        case CC_T_BAND: case CC_T_BOR: case CC_T_XOR: case CC_T_SHL: case CC_T_SHR:
            return is_flex(K, e->u.op.a) && is_flex(K, e->u.op.b);
        default: return false;
        }
    case CC_E_VAR: {
        const cc_var *v = lookup(K, e->u.var.name);
        return v && v->flex;
    }
    case CC_E_CALL: return e->u.call.n_index && is_flex(K, e->u.call.args[0]); /* [0.5, 1.5][i] */
    case CC_E_IF:
        return e->u.cond.then->n_lets == 0 && e->u.cond.els->n_lets == 0 && is_flex(K, e->u.cond.then->result) &&
               is_flex(K, e->u.cond.els->result);
    default: return false;
    }
}

static uint8_t hint_dtype(const cc_tlist *hint)
{
    return hint && hint->n == 1 ? hint->t[0].dtype : 0;
}

static bool is_int(uint8_t d) { return isa_dtype_int(d); }
static bool is_float(uint8_t d) { return isa_dtype_float(d); }

/* An integer literal without suffix that does not fit in an i32 (-x too). */
static bool wide_int_lit(const cc_expr *e)
{
    bool neg = false;
    for (; e->kind == CC_E_UNARY && e->u.op.op == CC_T_MINUS; e = e->u.op.a)
        neg = !neg;
    if (e->kind != CC_E_INT || e->u.lit.suffix)
        return false;
    neg ^= e->u.lit.neg;
    return e->u.lit.big || e->u.lit.mag > (neg ? (uint64_t)INT32_MAX + 1 : (uint64_t)INT32_MAX);
}

/* The dtype an integer literal takes, and the range check. */
static void check_int_lit(checker *K, cc_expr *e, uint8_t d)
{
    cc *C = K->C;
    if (e->u.lit.suffix)
        d = e->u.lit.suffix;
    else if (!is_int(d) && !is_float(d)) /* no context: i32, or i64 when it does not fit */
        d = !e->u.lit.big && e->u.lit.mag <= (e->u.lit.neg ? (uint64_t)INT32_MAX + 1 : (uint64_t)INT32_MAX)
                ? TFVM_I32
                : TFVM_I64;
    /* the largest magnitude of a positive and of a negative literal */
    const uint64_t limit = d == TFVM_I32 ? (uint64_t)INT32_MAX
                         : d == TFVM_U8  ? (uint64_t)UINT8_MAX
                         : d == TFVM_I8  ? (uint64_t)INT8_MAX
                                         : (uint64_t)INT64_MAX;
    const uint64_t neg_limit = d == TFVM_U8 ? 0 : limit + 1;
    if (is_int(d) && (e->u.lit.big || e->u.lit.mag > (e->u.lit.neg ? neg_limit : limit))) {
        if (e->u.lit.big)
            cc_error(C, e->pos, TFVM_ERR_TYPE, "integer does not fit in %s", tfvm_dtype_name((tfvm_dtype)d));
        cc_error(C, e->pos, TFVM_ERR_TYPE, "integer %s%llu does not fit in %s%s", e->u.lit.neg ? "-" : "",
                 (unsigned long long)e->u.lit.mag, tfvm_dtype_name((tfvm_dtype)d),
                 d == TFVM_I32 ? " (an i64 literal has the suffix i64: 3000000000i64)" : "");
    }
    e->type = one_type(C, &(cc_vtype){.dtype = d});
}

static void check_tensor_lit(checker *K, cc_expr *e, const cc_tlist *hint)
{
    cc *C = K->C;
    if (e->u.tensor.raw) { /* load("w.npy") */
        cc_vtype t = {.dtype = e->u.tensor.raw_dtype, .tensor = e->u.tensor.rank > 0, .rank = e->u.tensor.rank};
        memcpy(t.dims, e->u.tensor.dims, sizeof t.dims);
        e->type = one_type(C, &t);
        return;
    }
    uint8_t want = hint_dtype(hint);
    bool any_float = false, any_bool = false, any_num = false;
    for (uint32_t i = 0; i < e->u.tensor.n; i++) {
        const cc_expr *l = e->u.tensor.elems[i];
        any_float |= l->kind == CC_E_FLOAT || is_float(l->u.lit.suffix);
        any_bool |= l->kind == CC_E_BOOL;
        any_num |= l->kind != CC_E_BOOL;
    }
    if (any_bool && any_num)
        cc_error(C, e->pos, TFVM_ERR_TYPE, "a tensor literal cannot mix bool and number elements");
    uint8_t d;
    if (any_bool)
        d = TFVM_BOOL;
    else if (any_float)
        d = is_float(want) ? want : TFVM_F64;
    else
        d = (is_int(want) || is_float(want)) ? want : TFVM_I32;
    for (uint32_t i = 0; i < e->u.tensor.n; i++) {
        cc_expr *l = e->u.tensor.elems[i];
        if (l->u.lit.suffix && l->u.lit.suffix != d)
            cc_error(C, l->pos, TFVM_ERR_TYPE, "element is %s but the tensor literal is %s",
                     tfvm_dtype_name((tfvm_dtype)l->u.lit.suffix), tfvm_dtype_name((tfvm_dtype)d));
        if (l->kind == CC_E_INT)
            check_int_lit(K, l, d);
        else
            l->type = one_type(C, &(cc_vtype){.dtype = d});
    }
    cc_vtype t = {.dtype = d, .tensor = 1, .rank = e->u.tensor.rank};
    memcpy(t.dims, e->u.tensor.dims, sizeof t.dims);
    e->type = one_type(C, &t);
}

/* NumPy broadcasting of static shapes; a scalar is rank 0. */
static bool broadcast(const cc_vtype *a, const cc_vtype *b, cc_vtype *out)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    cc_vtype t = {.dtype = a->dtype, .tensor = (uint8_t)(a->tensor || b->tensor), .rank = (uint8_t)r};
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da == 1)
            t.dims[i] = db;
        else if (db == 1)
            t.dims[i] = da;
        else if (da < 0 || db < 0)
            t.dims[i] = da < 0 ? db : da; /* unknown: the known one if any (checked at run time) */
        else if (da == db)
            t.dims[i] = da;
        else
            return false;
    }
    *out = t;
    return true;
}

static const char *op_text(uint8_t tk)
{
    switch (tk) {
    case CC_T_PLUS: return "+";
    case CC_T_MINUS: return "-";
    case CC_T_STAR: return "*";
    case CC_T_SLASH: return "/";
    case CC_T_PERCENT: return "%";
    case CC_T_LT: return "<";
    case CC_T_LE: return "<=";
    case CC_T_GT: return ">";
    case CC_T_GE: return ">=";
    case CC_T_EQ: return "==";
    case CC_T_NE: return "!=";
    case CC_T_AND: return "&&";
    case CC_T_OR: return "||";
    case CC_T_NOT: return "!";
    case CC_T_BAND: return "&";
    case CC_T_BOR: return "|";
    case CC_T_XOR: return "^";
    case CC_T_SHL: return "<<";
    case CC_T_SHR: return ">>";
    case CC_T_TILDE: return "~";
    default: return "?";
    }
}

_Noreturn static void operand_mismatch(cc *C, cc_pos pos, const char *what, const cc_vtype *a, const cc_vtype *b,
                                       const char *note)
{
    char ta[96], tb[96];
    cc_vtype_str(a, ta, sizeof ta);
    cc_vtype_str(b, tb, sizeof tb);
    cc_error(C, pos, TFVM_ERR_TYPE, "operands of %s have different types: %s and %s (convert with cast<T>(x))%s", what,
             ta, tb, note);
}

/* Elementwise typing shared by operators and built-in ops: `what` names the
 * operation in messages ("'+'", "min"). */
static cc_vtype elementwise(checker *K, cc_pos pos, const char *what, isa_class cls, uint32_t n,
                           const cc_vtype *const *in)
{
    cc *C = K->C;
    char ta[96], tb[96];
    cc_vtype out = *in[0];
    switch (cls) {
    case ISA_CLASS_BINARY:
    case ISA_CLASS_COMPARE:
    case ISA_CLASS_LOGIC:
    case ISA_CLASS_SELECT: {
        uint32_t first = cls == ISA_CLASS_SELECT ? 1 : 0;
        if (cls == ISA_CLASS_SELECT && in[0]->dtype != TFVM_BOOL) {
            cc_vtype_str(in[0], ta, sizeof ta);
            cc_error(C, pos, TFVM_ERR_TYPE, "the condition of %s must be bool, got %s", what, ta);
        }
        for (uint32_t k = first + 1; k < n; k++)
            if (in[k]->dtype != in[first]->dtype)
                operand_mismatch(C, pos, what, in[first], in[k], "");
        if (cls == ISA_CLASS_BINARY && in[0]->dtype == TFVM_BOOL)
            cc_error(C, pos, TFVM_ERR_TYPE, "%s needs numbers, got bool", what);
        if (cls == ISA_CLASS_LOGIC && in[0]->dtype != TFVM_BOOL) {
            cc_vtype_str(in[0], ta, sizeof ta);
            cc_error(C, pos, TFVM_ERR_TYPE, "%s needs bool operands, got %s", what, ta);
        }
        for (uint32_t k = 1; k < n; k++) {
            if (!broadcast(&out, in[k], &out)) {
                cc_vtype_str(in[k - 1], ta, sizeof ta);
                cc_vtype_str(in[k], tb, sizeof tb);
                cc_error(C, pos, TFVM_ERR_TYPE, "shapes of %s do not broadcast: %s and %s", what, ta, tb);
            }
        }
        out.dtype = cls == ISA_CLASS_COMPARE || cls == ISA_CLASS_LOGIC ? TFVM_BOOL : in[first]->dtype;
        return out;
    }
    case ISA_CLASS_UNARY:
        if (in[0]->dtype == TFVM_BOOL)
            cc_error(C, pos, TFVM_ERR_TYPE, "%s needs a number, got bool", what);
        return out;
    default: cc_error(C, pos, TFVM_ERR_TYPE, "%s has no type rule in the compiler", what);
    }
}

/* Checks operands with mutual hints: a flexible literal takes the type of
 * its sibling. */
static void check_operands(checker *K, cc_expr **ops, uint32_t n, const cc_tlist *hint, const char *what)
{
    int anchor = -1;
    for (uint32_t k = 0; k < n; k++)
        if (!is_flex(K, ops[k])) {
            anchor = (int)k;
            break;
        }
    /* all flexible, no context: a literal too wide for i32 is i64, and so
     * are its siblings (x % 0x8000_0000 with var x = 1) */
    for (uint32_t k = 0; anchor < 0 && !hint_dtype(hint) && k < n; k++)
        if (wide_int_lit(ops[k]))
            anchor = (int)k;
    if (anchor >= 0) {
        check_expr(K, ops[anchor], NULL);
        single(K, ops[anchor], what);
        hint = &ops[anchor]->type;
    }
    for (uint32_t k = 0; k < n; k++) {
        if ((int)k == anchor)
            continue;
        check_expr(K, ops[k], hint);
        single(K, ops[k], what);
    }
}

static void check_unary(checker *K, cc_expr *e, const cc_tlist *hint)
{
    cc *C = K->C;
    check_expr(K, e->u.op.a, e->u.op.op != CC_T_NOT ? hint : NULL);
    const cc_vtype *t = single(K, e->u.op.a, "the operand");
    char buf[96];
    if (e->u.op.op == CC_T_TILDE) {
        if (!is_int(t->dtype) && t->dtype != TFVM_BOOL) {
            cc_vtype_str(t, buf, sizeof buf);
            cc_error(C, e->pos, TFVM_ERR_TYPE, "'~' needs an integer or bool operand, got %s", buf);
        }
    } else if (e->u.op.op == CC_T_NOT) {
        if (t->dtype != TFVM_BOOL) {
            cc_vtype_str(t, buf, sizeof buf);
            cc_error(C, e->pos, TFVM_ERR_TYPE, "'!' needs a bool operand, got %s", buf);
        }
    } else if (t->dtype == TFVM_BOOL) {
        cc_error(C, e->pos, TFVM_ERR_TYPE, "'-' needs a number, got bool");
    }
    e->type = one_type(C, t);
}

static void check_block(checker *K, cc_ablock *b, const cc_tlist *hint);
static void join_branches(checker *K, cc_expr *e, const cc_ablock *a, const cc_ablock *b);

/* An operand small enough, and unable to fail or recurse, that evaluating it
 * always costs less than branching around it: `i < n && x > 0` stays one AND. */
static bool cheap(const cc_expr *e, uint32_t *budget)
{
    if (*budget == 0)
        return false;
    --*budget;
    switch (e->kind) {
    case CC_E_INT:
    case CC_E_FLOAT:
    case CC_E_BOOL:
    case CC_E_VAR: return true;
    case CC_E_UNARY: return cheap(e->u.op.a, budget);
    case CC_E_BINARY:
        return e->u.op.op != CC_T_SLASH && e->u.op.op != CC_T_PERCENT && e->u.op.op != CC_T_AND &&
               e->u.op.op != CC_T_OR && cheap(e->u.op.a, budget) && cheap(e->u.op.b, budget);
    default: return false;
    }
}

/* a && b, a || b: on bool scalars the right side runs only when needed (an
 * if: a ? b : false, a ? true : b), unless it is cheap; on tensors, AND/OR. */
static void check_logic(checker *K, cc_expr *e)
{
    cc *C = K->C;
    uint8_t op = e->u.op.op;
    cc_expr *a = e->u.op.a, *b = e->u.op.b;
    cc_tlist bh = {1, &(cc_vtype){.dtype = TFVM_BOOL}};
    check_expr(K, a, &bh);
    single(K, a, "an operand");
    check_expr(K, b, &bh);
    single(K, b, "an operand");
    const cc_vtype *in[2] = {&a->type.t[0], &b->type.t[0]};
    char what[8];
    ut_fmt(what, sizeof what, "'%s'", op_text(op));
    cc_vtype t = elementwise(K, e->pos, what, ISA_CLASS_LOGIC, 2, in);
    uint32_t budget = 8;
    if (t.tensor || cheap(b, &budget)) {
        e->type = one_type(C, &t);
        return;
    }
    cc_ablock *bt = cc_alloc(C, sizeof *bt), *be = cc_alloc(C, sizeof *be);
    cc_expr *lit = cc_alloc(C, sizeof *lit);
    lit->kind = CC_E_BOOL;
    lit->pos = lit->start = e->pos;
    lit->u.lit.b = op == CC_T_OR;
    lit->type = one_type(C, &(cc_vtype){.dtype = TFVM_BOOL});
    bt->pos = be->pos = b->start;
    bt->result = op == CC_T_AND ? b : lit;
    be->result = op == CC_T_AND ? lit : b;
    e->kind = CC_E_IF;
    e->u.cond.cond = a;
    e->u.cond.then = bt;
    e->u.cond.els = be;
    join_branches(K, e, bt, be);
}

static bool is_bitwise(uint8_t op)
{
    return op == CC_T_BAND || op == CC_T_BOR || op == CC_T_XOR || op == CC_T_SHL || op == CC_T_SHR;
}

static void check_binary(checker *K, cc_expr *e, const cc_tlist *hint)
{
    cc *C = K->C;
    uint8_t op = e->u.op.op;
    isa_class cls;
    switch (op) {
    case CC_T_AND:
    case CC_T_OR: check_logic(K, e); return;
    case CC_T_LT: case CC_T_LE: case CC_T_GT: case CC_T_GE: case CC_T_EQ: case CC_T_NE:
        cls = ISA_CLASS_COMPARE;
        break;
    default: cls = ISA_CLASS_BINARY; break;
    }
    char what[16];
    ut_fmt(what, sizeof what, "'%s'", op_text(op));
    cc_expr *ops[2] = {e->u.op.a, e->u.op.b};
    check_operands(K, ops, 2, cls == ISA_CLASS_BINARY ? hint : NULL, "an operand");
    const cc_vtype *in[2] = {&ops[0]->type.t[0], &ops[1]->type.t[0]};
    if (in[0]->dtype != in[1]->dtype) { /* say which use made a bare literal's variable the other dtype */
        char note[160];
        const cc_var *v = expr_var(ops[0]);
        if (!v || !v->fixed_at.line)
            v = expr_var(ops[1]);
        if (*fixed_note(v, note, sizeof note))
            operand_mismatch(C, e->pos, what, in[0], in[1], note);
    }
    if (is_bitwise(op)) {
        bool shift = op == CC_T_SHL || op == CC_T_SHR;
        if (in[0]->dtype == TFVM_BOOL && in[1]->dtype == TFVM_BOOL && !shift) {
            cls = ISA_CLASS_LOGIC; /* & | ^ on bools: and, or, xor (both sides run) */
        } else if (in[0]->dtype == in[1]->dtype && !is_int(in[0]->dtype)) {
            char ta[96];
            cc_vtype_str(in[0], ta, sizeof ta);
            cc_error(C, e->pos, TFVM_ERR_TYPE, "%s needs integers%s, got %s", what, shift ? "" : " or bools", ta);
        }
    }
    cc_vtype t = elementwise(K, e->pos, what, cls, 2, in);
    e->type = one_type(C, &t);
}

/* Built-in ops by their lower-case ISA name: min(a, b), select(c, a, b), cast<f32>(x). */
static int builtin_op(const char *name)
{
    char up[32];
    size_t n = strlen(name);
    if (n >= sizeof up)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (c >= 'A' && c <= 'Z')
            return -1; /* only the lower-case spelling */
        up[i] = (char)(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    }
    return isa_op_by_name(up, n);
}

static bool callable_class(isa_class c)
{
    return c == ISA_CLASS_BINARY || c == ISA_CLASS_UNARY || c == ISA_CLASS_COMPARE || c == ISA_CLASS_LOGIC ||
           c == ISA_CLASS_SELECT;
}

/* A keyword argument where only positional ones are allowed. */
static void no_keywords(checker *K, const cc_expr *e, const char *why)
{
    for (uint32_t k = 0; e->u.call.arg_names && k < e->u.call.n_args; k++)
        if (e->u.call.arg_names[k])
            cc_error(K->C, e->u.call.arg_pos[k], TFVM_ERR_TYPE, "'%s' %s", e->u.call.name, why);
}

/* A number written out: a literal, or - one. */
static bool lit_number(const cc_expr *a, double *out)
{
    if (a->kind == CC_E_UNARY && a->u.op.op == CC_T_MINUS && lit_number(a->u.op.a, out)) {
        *out = -*out;
        return true;
    }
    if (a->kind == CC_E_INT)
        *out = a->u.lit.neg ? -(double)a->u.lit.mag : (double)a->u.lit.mag;
    else if (a->kind == CC_E_FLOAT)
        *out = a->u.lit.f;
    else
        return false;
    return true;
}

/* A composite op (decomp.h): x, then its parameters by position or keyword,
 * each a number written out; x's type is the result's. */
static void check_decomp_call(checker *K, cc_expr *e, const cc_tlist *hint, cc_decomp d)
{
    cc *C = K->C;
    const cc_decomp_info *row = cc_decomp_row(d);
    const char *name = e->u.call.name;
    if (e->u.call.has_targ)
        cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' takes no type argument", name);
    uint32_t na = e->u.call.n_args;
    if (na < 1 || na > 1 + row->n_params) {
        if (row->n_params == 0)
            cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' takes 1 argument, got %u", name, na);
        cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' takes x and up to %u parameter%s, got %u argument%s",
                 name, row->n_params, row->n_params == 1 ? "" : "s", na, na == 1 ? "" : "s");
    }
    bool given[2] = {false, false};
    for (uint32_t k = 0; k < 2; k++)
        e->u.call.dparams[k] = row->dflt[k];
    for (uint32_t k = 1; k < e->u.call.n_args; k++) {
        const char *kw = e->u.call.arg_names ? e->u.call.arg_names[k] : NULL;
        uint32_t p = k - 1;
        if (kw) {
            for (p = 0; p < row->n_params && strcmp(row->param[p], kw) != 0; p++)
                ;
            if (p == row->n_params)
                cc_error(C, e->u.call.arg_pos[k], TFVM_ERR_TYPE, "'%s' has no parameter '%s'", name, kw);
        }
        if (given[p])
            cc_error(C, e->u.call.args[k]->start, TFVM_ERR_TYPE, "'%s': parameter '%s' given twice", name,
                     row->param[p]);
        given[p] = true;
        if (!lit_number(e->u.call.args[k], &e->u.call.dparams[p]))
            cc_error(C, e->u.call.args[k]->start, TFVM_ERR_TYPE, "'%s': %s must be a number written out", name,
                     row->param[p]);
    }
    if (e->u.call.arg_names && e->u.call.arg_names[0])
        cc_error(C, e->u.call.arg_pos[0], TFVM_ERR_TYPE, "'%s': x is positional", name);
    check_operands(K, e->u.call.args, 1, hint, "an argument");
    cc_vtype t = e->u.call.args[0]->type.t[0];
    if (!is_float(t.dtype)) {
        char ta[96];
        cc_vtype_str(&t, ta, sizeof ta);
        cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' needs f32 or f64, got %s", name, ta);
    }
    e->type = one_type(C, &t);
    e->u.call.decomp = (int)d + 1;
    e->u.call.n_ops = 1;
    e->u.call.ops = e->u.call.args;
}

/* A tensor op (builtins.c): binds positional and keyword arguments to its
 * parameters, checks each with the hint its kind asks for, then applies the
 * op's type rule. */
static void check_tensor_call(checker *K, cc_expr *e, const cc_tlist *hint, const cc_builtin *b)
{
    cc *C = K->C;
    const char *name = b->name;
    if (e->u.call.has_targ)
        cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' takes no type argument", name);
    cc_expr *bound[CC_MAX_BPARAMS] = {0};
    uint32_t n_pos = 0, n_req = 0;
    bool keywords = false;
    for (uint32_t p = 0; p < b->n_params; p++)
        n_req += !b->params[p].optional;
    for (uint32_t k = 0; k < e->u.call.n_args; k++) {
        cc_expr *a = e->u.call.args[k];
        const char *kw = e->u.call.arg_names ? e->u.call.arg_names[k] : NULL;
        if (!kw) {
            if (keywords)
                cc_error(C, a->start, TFVM_ERR_TYPE, "a positional argument cannot follow a keyword argument");
            if (n_pos == b->n_params) {
                if (n_req == b->n_params)
                    cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' takes %u argument%s, got %u", name, n_req,
                             n_req == 1 ? "" : "s", e->u.call.n_args);
                cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' takes %u %s %u arguments, got %u", name, n_req,
                         b->n_params - n_req == 1 ? "or" : "to", b->n_params, e->u.call.n_args);
            }
            bound[n_pos++] = a;
            continue;
        }
        keywords = true;
        uint32_t p = 0;
        while (p < b->n_params && strcmp(b->params[p].name, kw) != 0)
            p++;
        if (p == b->n_params) {
            char list[96] = "";
            for (uint32_t q = 0; q < b->n_params; q++) {
                size_t n = strlen(list);
                ut_fmt(list + n, sizeof list - n, "%s%s", q ? ", " : "", b->params[q].name);
            }
            cc_error(C, e->u.call.arg_pos[k], TFVM_ERR_TYPE, "'%s' has no parameter '%s' (it has %s)", name, kw, list);
        }
        if (bound[p])
            cc_error(C, e->u.call.arg_pos[k], TFVM_ERR_TYPE, "'%s' is given '%s' twice", name, kw);
        bound[p] = a;
    }
    for (uint32_t p = 0; p < b->n_params; p++)
        if (!bound[p] && !b->params[p].optional)
            cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' is missing its argument '%s'", name,
                     b->params[p].name);
    cc_tlist i64 = {1, &(cc_vtype){.dtype = TFVM_I64}};
    cc_expr *hinted[CC_MAX_BPARAMS];
    uint32_t n_hinted = 0;
    for (uint32_t p = 0; p < b->n_params; p++) {
        cc_expr *a = bound[p];
        if (!a)
            continue;
        switch (b->params[p].kind) {
        case CC_P_HINTED: hinted[n_hinted++] = a; continue;
        case CC_P_INTS:
        case CC_P_SHAPE: check_expr(K, a, &i64); break;
        default: check_expr(K, a, NULL); break;
        }
        single(K, a, "an argument");
    }
    if (n_hinted)
        check_operands(K, hinted, n_hinted, hint, "an argument");
    e->u.call.builtin = b->op;
    e->u.call.attr = 0;
    b->rule(C, b, e, bound);
}

/* x[i, :, j]: one GATHER per index (a ':' keeps its axis); each scalar index
 * removes its axis, a tensor index puts its own axes there. */
static void check_index(checker *K, cc_expr *e, const cc_tlist *hint)
{
    cc *C = K->C;
    cc_expr *x = e->u.call.args[0];
    check_expr(K, x, hint);
    const cc_vtype *t = single(K, x, "the indexed value");
    char buf[96];
    cc_vtype_str(t, buf, sizeof buf);
    if (!t->tensor)
        cc_error(C, e->pos, TFVM_ERR_TYPE, "cannot index %s: it is a scalar", buf);
    if (e->u.call.n_index > t->rank)
        cc_error(C, e->pos, TFVM_ERR_TYPE, "too many indices for %s: %u for %u ax%s", buf, e->u.call.n_index,
                 t->rank, t->rank == 1 ? "is" : "es");
    cc_expr *cur = x;
    int axis = 0;
    uint32_t next = 1;
    for (uint32_t k = 0; k < e->u.call.n_index; k++) {
        if (e->u.call.colons & (1u << k)) {
            axis++;
            continue;
        }
        cc_expr *idx = e->u.call.args[next++];
        check_expr(K, idx, NULL);
        const cc_vtype *ti = single(K, idx, "an index");
        cur = cc_gather(C, e->pos, cur, idx, axis);
        axis += ti->rank;
    }
    e->u.call.sugar = cur; /* x itself for x[:] */
    e->type = one_type(C, &cur->type.t[0]);
}

/* feed<T>("x"): a value of type T; fetch("y", v): v's value. The channel
 * table and its rules come after the whole program is checked (host.c). */
static void check_host(checker *K, cc_expr *e, const cc_tlist *hint)
{
    cc *C = K->C;
    cc_host *h = e->u.call.host;
    size_t len = strlen(h->name);
    isa_const k = {.dtype = TFVM_U8, .rank = 1, .dims = {(int64_t)len}, .nbytes = len, .data = h->name};
    if (!isa_chan_ok(&k))
        cc_error(C, h->name_pos, TFVM_ERR_TYPE, "a channel name is 1 to %d letters, digits and _ . : / -, got \"%s\"",
                 ISA_MAX_CHAN, h->name);
    if (h->feed) {
        if (!h->has_type)
            cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'feed' needs the type of the value: feed<T>(\"%s\")",
                     h->name);
        if (e->u.call.n_args)
            cc_error(C, e->u.call.args[0]->start, TFVM_ERR_TYPE,
                     "'feed' takes the channel's name only: feed<T>(\"%s\")", h->name);
        e->u.call.builtin = ISA_FEED;
        e->type = one_type(C, &h->type);
        return;
    }
    if (h->has_type)
        cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE,
                 "'fetch' takes no type argument (the value's type is its own): fetch(\"%s\", v)", h->name);
    if (e->u.call.n_args != 1)
        cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE,
                 "'fetch' takes the channel's name and one value: fetch(\"%s\", v)", h->name);
    check_expr(K, e->u.call.args[0], hint);
    const cc_vtype *t = single(K, e->u.call.args[0], "the fetched value");
    e->u.call.builtin = ISA_FETCH;
    e->type = one_type(C, t);
}

static void check_call(checker *K, cc_expr *e, const cc_tlist *hint)
{
    cc *C = K->C;
    const char *name = e->u.call.name;
    if (e->u.call.n_index) {
        check_index(K, e, hint);
        return;
    }
    if (e->u.call.host) {
        check_host(K, e, hint);
        return;
    }
    cc_func *f = find_func(C, name);
    char ta[96], tb[96];
    if (f) {
        no_keywords(K, e, "is a function: its arguments are positional");
        if (e->u.call.has_targ)
            cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' is a function and takes no type argument", name);
        if (e->u.call.n_args != f->n_params)
            cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' takes %u argument%s, got %u", name, f->n_params,
                     f->n_params == 1 ? "" : "s", e->u.call.n_args);
        for (uint32_t k = 0; k < f->n_params; k++) {
            cc_expr *a = e->u.call.args[k];
            cc_tlist h = {1, &f->params[k].type};
            check_expr(K, a, &h);
            const cc_vtype *t = single(K, a, "an argument");
            if (!assignable(&f->params[k].type, t)) {
                cc_vtype_str(&f->params[k].type, ta, sizeof ta);
                cc_vtype_str(t, tb, sizeof tb);
                cc_error(C, a->start, TFVM_ERR_TYPE, "argument %u of '%s' ('%s') must be %s, got %s", k + 1, name,
                         f->params[k].name, ta, tb);
            }
        }
        e->u.call.fn = f;
        e->type.n = f->n_results;
        e->type.t = cc_array(C, f->n_results, sizeof(cc_vtype));
        for (uint32_t k = 0; k < f->n_results; k++)
            e->type.t[k] = f->results[k].type;
        return;
    }
    if (strcmp(name, "feed") == 0 || strcmp(name, "fetch") == 0)
        cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "the channel's name must be a string: %s",
                 strcmp(name, "feed") == 0 ? "feed<T>(\"x\")" : "fetch(\"y\", v)");
    const cc_builtin *tensor_op = cc_builtin_find(name);
    if (tensor_op) {
        check_tensor_call(K, e, hint, tensor_op);
        return;
    }
    int dc = cc_decomp_find(name);
    if (dc >= 0) {
        check_decomp_call(K, e, hint, (cc_decomp)dc);
        return;
    }
    int op = strcmp(name, "where") == 0 ? ISA_SELECT : builtin_op(name);
    if (op < 0) {
        if (lookup(K, name))
            cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' is a variable, not a function", name);
        const char *near = near_name(K, name, true);
        if (near)
            cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "no function or built-in op named '%s'; did you mean '%s'?",
                     name, near);
        cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "no function or built-in op named '%s'", name);
    }
    const isa_op_info *info = &isa_ops[op];
    if (info->cls == ISA_CLASS_TENSOR)
        cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' has no type rule in the compiler", name);
    if (!callable_class(info->cls))
        cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE,
                 "'%s' is a control instruction and cannot be called (use if, while and function calls)", name);
    if (info->attr == ISA_ATTR_DTYPE && !e->u.call.has_targ)
        cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' needs a target type: %s<f32>(x)", name, name);
    if (info->attr != ISA_ATTR_DTYPE && e->u.call.has_targ)
        cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' takes no type argument", name);
    if (e->u.call.n_args != (uint32_t)info->n_in)
        cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' takes %d argument%s, got %u", name, info->n_in,
                 info->n_in == 1 ? "" : "s", e->u.call.n_args);
    no_keywords(K, e, "takes no keyword arguments");
    e->u.call.builtin = op;
    char what[48];
    ut_fmt(what, sizeof what, "'%s'", name);
    uint32_t n = e->u.call.n_args;
    const cc_vtype *in[4];
    if (info->cls == ISA_CLASS_SELECT) {
        cc_tlist bh = {1, &(cc_vtype){.dtype = TFVM_BOOL}};
        check_expr(K, e->u.call.args[0], &bh);
        single(K, e->u.call.args[0], "an argument");
        check_operands(K, e->u.call.args + 1, 2, hint, "an argument");
    } else if (op == ISA_CAST) {
        check_expr(K, e->u.call.args[0], NULL);
        single(K, e->u.call.args[0], "an argument");
    } else {
        check_operands(K, e->u.call.args, n, info->cls == ISA_CLASS_COMPARE ? NULL : hint, "an argument");
    }
    for (uint32_t k = 0; k < n && k < 4; k++)
        in[k] = &e->u.call.args[k]->type.t[0];
    cc_vtype t;
    if (op == ISA_CAST) {
        t = *in[0];
        t.dtype = e->u.call.targ;
    } else {
        if (info->types == ISA_TYPES_FLT && !is_float(in[0]->dtype)) {
            cc_vtype_str(in[0], ta, sizeof ta);
            cc_error(C, e->u.call.name_pos, TFVM_ERR_TYPE, "'%s' needs f32 or f64, got %s", name, ta);
        }
        t = elementwise(K, e->u.call.name_pos, what, info->cls, n, in);
    }
    e->type = one_type(C, &t);
    e->u.call.n_ops = n;
    e->u.call.ops = e->u.call.args;
    e->u.call.attr = op == ISA_CAST ? e->u.call.targ : 0;
}

/* Joins the types of two branches: same count, dtype, kind and rank;
 * dimensions that differ become unknown only when one side is unknown. */
static void join_branches(checker *K, cc_expr *e, const cc_ablock *a, const cc_ablock *b)
{
    cc *C = K->C;
    const cc_tlist *ta = &a->result->type, *tb = &b->result->type;
    char sa[160], sb[160];
    if (ta->n != tb->n) {
        tlist_str(ta, sa, sizeof sa);
        tlist_str(tb, sb, sizeof sb);
        cc_error(C, e->pos, TFVM_ERR_TYPE, "the branches of 'if' give different types: %s and %s", sa, sb);
    }
    e->type.n = ta->n;
    e->type.t = cc_array(C, ta->n, sizeof(cc_vtype));
    for (uint32_t k = 0; k < ta->n; k++) {
        cc_vtype x = ta->t[k];
        const cc_vtype *y = &tb->t[k];
        bool ok = x.dtype == y->dtype && x.tensor == y->tensor && x.rank == y->rank;
        for (int i = 0; ok && i < x.rank; i++) {
            if (x.dims[i] == y->dims[i])
                continue;
            if (x.dims[i] >= 0 && y->dims[i] >= 0)
                ok = false;
            x.dims[i] = -1;
        }
        if (!ok) {
            tlist_str(ta, sa, sizeof sa);
            tlist_str(tb, sb, sizeof sb);
            cc_error(C, e->pos, TFVM_ERR_TYPE, "the branches of 'if' give different types: %s and %s", sa, sb);
        }
        e->type.t[k] = x;
    }
}

static void check_cond(checker *K, cc_expr *c, const char *what)
{
    cc_tlist bh = {1, &(cc_vtype){.dtype = TFVM_BOOL}};
    check_expr(K, c, &bh);
    const cc_vtype *t = single(K, c, what);
    if (t->dtype != TFVM_BOOL || t->tensor) {
        char buf[96];
        cc_vtype_str(t, buf, sizeof buf);
        cc_error(K->C, c->start, TFVM_ERR_TYPE, "%s must be a bool scalar, got %s", what, buf);
    }
}

static void check_if(checker *K, cc_expr *e, const cc_tlist *hint)
{
    check_cond(K, e->u.cond.cond, "the condition of 'if'");
    cc_ablock *a = e->u.cond.then, *b = e->u.cond.els;
    bool else_first = !hint && is_flex(K, a->result) && !is_flex(K, b->result);
    cc_ablock *first = else_first ? b : a, *second = else_first ? a : b;
    check_block(K, first, hint);
    check_block(K, second, hint ? hint : &first->result->type);
    join_branches(K, e, a, b);
}

static void check_while(checker *K, cc_expr *e)
{
    cc *C = K->C;
    uint32_t n = e->u.loop.n_vars;
    char ta[96], tb[96];
    for (uint32_t k = 0; k < n; k++) {
        cc_loopvar *v = &e->u.loop.vars[k];
        for (uint32_t j = 0; j < k; j++)
            if (strcmp(e->u.loop.vars[j].name, v->name) == 0)
                cc_error(C, v->pos, TFVM_ERR_TYPE, "loop variable '%s' is declared twice", v->name);
        cc_tlist h = {1, &v->type};
        check_expr(K, v->init, v->has_type ? &h : NULL);
        const cc_vtype *t = single(K, v->init, "the initial value of a loop variable");
        if (v->has_type && !assignable(&v->type, t)) {
            cc_vtype_str(&v->type, ta, sizeof ta);
            cc_vtype_str(t, tb, sizeof tb);
            cc_error(C, v->init->start, TFVM_ERR_TYPE, "loop variable '%s' is %s but its initial value is %s",
                     v->name, ta, tb);
        }
        if (!v->has_type)
            v->type = *t;
    }
    /* A variable initialised by a bare literal (`i = 0`) takes its dtype
     * from its first use that expects one (`i <= n` with n: i64); the loop
     * is then checked again with the types settled. */
    uint32_t mark = K->n_scope;
    cc_tlist types = {n, cc_array(C, n, sizeof(cc_vtype))};
    uint8_t *flex = cc_array(C, n, 1);
    for (uint32_t k = 0; k < n; k++) {
        cc_loopvar *v = &e->u.loop.vars[k];
        if (!v->has_type && is_flex(K, v->init) && !v->init->type.t[0].tensor)
            flex[k] = is_float(v->init->type.t[0].dtype) && v->init->kind == CC_E_FLOAT ? 2 : 1;
    }
    for (uint32_t pass = 0;; pass++) {
        K->n_scope = mark;
        bool changed = false;
        err_mark em = err_save(C);
        for (uint32_t k = 0; k < n; k++) {
            cc_loopvar *v = &e->u.loop.vars[k];
            v->var = declare(K, v->name, v->pos, &v->type);
            v->var->flex = pass <= n ? flex[k] : 0;
            v->var->flexsrc = v->var->flex ? v->var : NULL;
            v->var->fixed_at = v->fixed_at;
            const cc_var *outer = v->init->kind == CC_E_VAR ? v->init->u.var.var : NULL;
            if (v->assign && outer) { /* a statement loop's copy */
                v->var->origin = outer->origin;
                if (!v->fixed_at.line)
                    v->var->fixed_at = outer->fixed_at;
            }
            types.t[k] = v->type;
        }
        check_cond(K, e->u.loop.cond, "the loop condition");
        check_block(K, e->u.loop.body, &types);
        /* a use fixed a variable's dtype (in any statement, any version of
         * it): the body is checked again with that dtype, until none changes
         * (a fixpoint: each pass fixes one more variable or ends) */
        for (uint32_t k = 0; k < n; k++) {
            cc_loopvar *v = &e->u.loop.vars[k];
            if (v->var->fixed) {
                v->type.dtype = v->var->type.dtype;
                v->fixed_at = v->var->fixed_at;
                cc_tlist h = {1, &v->type};
                check_expr(K, v->init, &h);
                flex[k] = 0;
                changed = true;
            }
        }
        if (!changed)
            break;
        err_restore(C, em); /* that pass's errors came from the dtype it guessed */
    }
    const cc_tlist *got = &e->u.loop.body->result->type;
    if (got->n != n)
        cc_error(C, e->u.loop.body->result->start, TFVM_ERR_TYPE,
                 "the loop body must give the next values of its %u loop variable%s, got %u value%s", n,
                 n == 1 ? "" : "s", got->n, got->n == 1 ? "" : "s");
    for (uint32_t k = 0; k < n; k++) {
        cc_loopvar *v = &e->u.loop.vars[k];
        bool ok = assignable(&v->type, &got->t[k]);
        for (int i = 0; ok && i < v->type.rank; i++)
            if (v->type.dims[i] >= 0 && got->t[k].dims[i] < 0)
                ok = false; /* the variable must be declared with '?' */
        if (!ok) {
            cc_vtype_str(&v->type, ta, sizeof ta);
            cc_vtype_str(&got->t[k], tb, sizeof tb);
            char note[160];
            cc_error(C, e->u.loop.body->result->start, TFVM_ERR_TYPE,
                     "loop variable '%s' is %s but the body gives %s (declare it: %s: T = ...)%s", v->name, ta, tb,
                     v->name, fixed_note(v->var, note, sizeof note));
        }
    }
    K->n_scope = mark;
    e->type = types;
}

static void check_expr(checker *K, cc_expr *e, const cc_tlist *hint)
{
    cc *C = K->C;
    if (++C->depth > CC_MAX_CHAIN)
        cc_error(C, e->pos, TFVM_ERR_SYNTAX, "expression too deep: more than %d nested operations (split it with let)",
                 CC_MAX_CHAIN);
    switch (e->kind) {
    case CC_E_INT: check_int_lit(K, e, hint_dtype(hint)); break;
    case CC_E_FLOAT: {
        uint8_t d = e->u.lit.suffix ? e->u.lit.suffix : hint_dtype(hint);
        if (is_int(d) && e->u.lit.suffix)
            cc_error(C, e->pos, TFVM_ERR_TYPE, "a number with a fraction or exponent cannot be %s",
                     tfvm_dtype_name((tfvm_dtype)d));
        e->type = one_type(C, &(cc_vtype){.dtype = is_float(d) ? d : TFVM_F64});
        break;
    }
    case CC_E_BOOL: e->type = one_type(C, &(cc_vtype){.dtype = TFVM_BOOL}); break;
    case CC_E_TENSOR: check_tensor_lit(K, e, hint); break;
    case CC_E_VAR: {
        cc_var *v = lookup(K, e->u.var.name);
        if (!v) {
            if (find_func(C, e->u.var.name))
                cc_error(C, e->pos, TFVM_ERR_TYPE, "'%s' is a function; call it: %s(...)", e->u.var.name,
                         e->u.var.name);
            const char *near = near_name(K, e->u.var.name, false);
            if (near)
                cc_error(C, e->pos, TFVM_ERR_TYPE, "'%s' is not defined; did you mean '%s'?", e->u.var.name, near);
            cc_error(C, e->pos, TFVM_ERR_TYPE, "'%s' is not defined", e->u.var.name);
        }
        if (v->poison)
            cc_quiet(C);
        v->uses++;
        if (!e->u.var.synth)
            v->origin->user_uses++;
        e->u.var.var = v;
        uint8_t hd = hint_dtype(hint);
        if (v->flex && hd && hd != v->type.dtype && (is_float(hd) || (v->flex == 1 && is_int(hd))))
            fix_flex(K, v, hd, e->pos); /* see check_while */
        e->type = one_type(C, &v->type);
        break;
    }
    case CC_E_UNARY: check_unary(K, e, hint); break;
    case CC_E_BINARY: check_binary(K, e, hint); break;
    case CC_E_CALL: check_call(K, e, hint); break;
    case CC_E_IF: check_if(K, e, hint); break;
    case CC_E_WHILE: check_while(K, e); break;
    case CC_E_TUPLE: {
        e->type.n = e->u.tuple.n;
        e->type.t = cc_array(C, e->u.tuple.n, sizeof(cc_vtype));
        for (uint32_t k = 0; k < e->u.tuple.n; k++) {
            cc_expr *x = e->u.tuple.elems[k];
            cc_tlist h = {1, hint && hint->n == e->u.tuple.n ? &hint->t[k] : NULL};
            check_expr(K, x, h.t ? &h : NULL);
            if (x->type.n != 1)
                cc_error(C, x->start, TFVM_ERR_TYPE, "tuples cannot be nested");
            e->type.t[k] = x->type.t[0];
        }
        break;
    }
    }
    C->depth--;
}

static bool hidden_name(const char *n) { return strcmp(n, "_") == 0 || strchr(n, '.') != NULL; }

static void check_let(checker *K, cc_let *l)
{
    cc *C = K->C;
    char ta[96], tb[96];
    cc_tlist h = {1, &l->type};
    const cc_tlist *hint = l->has_type ? &h : NULL;
    cc_tlist old_types = {0, NULL};
    cc_var **old = NULL;
    if (l->assign) { /* x = e, or the new values of a statement if/loop: each name keeps its var's type */
        old = cc_array(C, l->n_names, sizeof *old);
        old_types.n = l->n_names;
        old_types.t = cc_array(C, l->n_names, sizeof(cc_vtype));
        for (uint32_t k = 0; k < l->n_names; k++) {
            if (hidden_name(l->names[k]))
                continue;
            old[k] = lookup(K, l->names[k]);
            if (!old[k])
                cc_error(C, l->name_pos[k], TFVM_ERR_TYPE, "'%s' is not defined", l->names[k]);
            if (old[k]->poison)
                cc_quiet(C);
            old_types.t[k] = old[k]->type;
        }
        bool all = true;
        for (uint32_t k = 0; k < l->n_names; k++)
            all &= old[k] && !old[k]->flex;
        if (all)
            hint = &old_types;
    }
    bool flexible = !l->assign && !l->has_type && l->n_names == 1 && is_flex(K, l->value);
    check_expr(K, l->value, hint);
    const cc_tlist *t = &l->value->type;
    if (l->n_names == 1 && t->n != 1 && strcmp(l->names[0], "_") != 0)
        cc_error(C, l->name_pos[0], TFVM_ERR_TYPE,
                 "'%s' would hold a tuple of %u values; unpack it: let (a, b, ...) = ...", l->names[0], t->n);
    if (l->n_names != t->n && !(l->n_names == 1 && strcmp(l->names[0], "_") == 0))
        cc_error(C, l->pos, TFVM_ERR_TYPE, "the pattern has %u name%s but the value has %u", l->n_names,
                 l->n_names == 1 ? "" : "s", t->n);
    if (l->has_type && !assignable(&l->type, &t->t[0])) {
        cc_vtype_str(&l->type, ta, sizeof ta);
        cc_vtype_str(&t->t[0], tb, sizeof tb);
        cc_error(C, l->value->start, TFVM_ERR_TYPE, "'%s' is declared %s but its value is %s", l->names[0], ta, tb);
    }
    if (l->assign) {
        for (uint32_t k = 0; k < l->n_names; k++) {
            cc_var *o = old[k];
            const cc_vtype *got = &t->t[k];
            if (!o || assignable(&o->type, got))
                continue;
            if (o->flex && !got->tensor && !o->type.tensor &&
                ((o->flex == 1 && is_int(got->dtype)) || is_float(got->dtype))) {
                fix_flex(K, o, got->dtype, l->value->start);
                continue;
            }
            cc_vtype_str(&o->type, ta, sizeof ta);
            cc_vtype_str(got, tb, sizeof tb);
            char note[160];
            fixed_note(o->fixed_at.line || l->n_names != 1 ? o : expr_var(l->value), note, sizeof note);
            cc_error(C, l->value->start, TFVM_ERR_TYPE, "cannot assign %s to '%s' (a var of type %s)%s", tb,
                     l->names[k], ta, note);
        }
    }
    l->vars = cc_array(C, l->n_names, sizeof(cc_var *));
    for (uint32_t k = 0; k < l->n_names; k++) {
        if (strcmp(l->names[k], "_") == 0)
            continue;
        for (uint32_t j = 0; j < k; j++)
            if (strcmp(l->names[j], l->names[k]) == 0)
                cc_error(C, l->name_pos[k], TFVM_ERR_TYPE, "'%s' appears twice in the pattern", l->names[k]);
    }
    for (uint32_t k = 0; k < l->n_names; k++) {
        if (strcmp(l->names[k], "_") == 0)
            continue;
        cc_var *o = old ? old[k] : NULL;
        const cc_vtype *ty = o ? &o->type : l->has_type ? &l->type : &t->t[k];
        cc_var *v = l->vars[k] = declare(K, l->names[k], l->name_pos[k], ty);
        if (o) { /* a new version of the same variable */
            v->origin = o->origin;
            v->flex = o->flex;
            v->let = o->let;
            v->flexsrc = o->flexsrc;
            v->fixed_at = o->fixed_at;
        } else if (flexible && !t->t[0].tensor && (t->t[0].dtype == TFVM_I32 || t->t[0].dtype == TFVM_F64)) {
            /* a bare literal with its default dtype (a wide one is i64 for good) */
            v->flex = l->value->kind == CC_E_FLOAT || is_float(t->t[0].dtype) ? 2 : 1;
            v->let = l;
            v->flexsrc = v;
        } else if (l->flexed) {
            v->fixed_at = l->fixed_at;
        }
        /* a name of a tuple pattern is often there only to unpack the rest
         * (let (i, s) = while ...): only single names are warned about */
        if (!o && !l->synth && l->n_names == 1 && !hidden_name(l->names[k]) && l->names[k][0] != '_') {
            K->decls = cc_grow(C, K->decls, K->n_decls, &K->cap_decls, sizeof *K->decls);
            K->decls[K->n_decls++] = v;
        }
    }
}

/* Checks one let; false when it failed (the error is recorded). */
static bool guarded_let(checker *K, cc_let *l)
{
    cc *C = K->C;
    jmp_buf jb, *outer = C->jb;
    uint32_t scope = K->n_scope, depth = C->depth;
    C->jb = &jb;
    if (setjmp(jb) == 0) {
        check_let(K, l);
        C->jb = outer;
        return true;
    }
    C->jb = outer;
    if (C->fatal)
        longjmp(*outer, 1);
    K->n_scope = scope;
    C->depth = depth;
    return false;
}

static void check_block(checker *K, cc_ablock *b, const cc_tlist *hint)
{
    uint32_t mark = K->n_scope;
    for (uint32_t i = 0; i < b->n_lets; i++) {
        cc_let *l = &b->lets[i];
        /* an error ends the statement, not the check: its names become poison,
         * so that their uses say nothing more */
        if (guarded_let(K, l))
            continue;
        for (uint32_t k = 0; k < l->n_names; k++) {
            if (strcmp(l->names[k], "_") == 0)
                continue;
            cc_var *v = declare(K, l->names[k], l->name_pos[k], &(cc_vtype){.dtype = TFVM_I32});
            v->poison = true;
            v->user_uses = 1;
        }
    }
    check_expr(K, b->result, hint);
    K->n_scope = mark;
}

static void check_func_once(cc *C, cc_func *f, checker *Kp)
{
#define K (*Kp)
    char ta[96], tb[96];
    for (uint32_t k = 0; k < f->n_params; k++) {
        for (uint32_t j = 0; j < k; j++)
            if (strcmp(f->params[j].name, f->params[k].name) == 0)
                cc_error(C, f->params[k].pos, TFVM_ERR_TYPE, "parameter '%s' is declared twice", f->params[k].name);
        f->params[k].var = declare(&K, f->params[k].name, f->params[k].pos, &f->params[k].type);
    }
    for (uint32_t k = 0; k < f->n_results; k++)
        for (uint32_t j = 0; j < k; j++)
            if (f->results[k].name && f->results[j].name && strcmp(f->results[j].name, f->results[k].name) == 0)
                cc_error(C, f->results[k].pos, TFVM_ERR_TYPE, "result '%s' is declared twice", f->results[k].name);
    cc_tlist want = {f->n_results, cc_array(C, f->n_results, sizeof(cc_vtype))};
    for (uint32_t k = 0; k < f->n_results; k++)
        want.t[k] = f->results[k].type;
    check_block(&K, f->body, &want);
    const cc_expr *r = f->body->result;
    if (r->type.n != f->n_results)
        cc_error(C, r->start, TFVM_ERR_TYPE, "'%s' returns %u value%s but its body gives %u", f->name, f->n_results,
                 f->n_results == 1 ? "" : "s", r->type.n);
    for (uint32_t k = 0; k < f->n_results; k++) {
        if (!assignable(&want.t[k], &r->type.t[k])) {
            cc_vtype_str(&want.t[k], ta, sizeof ta);
            cc_vtype_str(&r->type.t[k], tb, sizeof tb);
            if (f->n_results == 1)
                cc_error(C, r->start, TFVM_ERR_TYPE, "'%s' returns %s but its body gives %s", f->name, ta, tb);
            cc_error(C, r->start, TFVM_ERR_TYPE, "result %u of '%s' is %s but the body gives %s", k + 1, f->name, ta,
                     tb);
        }
    }
}
#undef K

/* Checks f, again when a use fixed the dtype of a bare-literal let (the
 * errors of that pass are forgotten: they came from the guessed dtype);
 * then warns about its unused variables. */
static void guarded_func(cc *C, cc_func *f, checker *Kp)
{
    jmp_buf jb, *outer = C->jb;
    uint32_t depth = C->depth;
    C->jb = &jb;
    if (setjmp(jb) == 0) {
        check_func_once(C, f, Kp);
        C->jb = outer;
        return;
    }
    C->jb = outer;
    if (C->fatal)
        longjmp(*outer, 1);
    C->depth = depth;
}

static void check_func(cc *C, cc_func *f)
{
    for (int pass = 0;; pass++) {
        checker *Kp = cc_alloc(C, sizeof *Kp);
        Kp->C = C;
        Kp->fn = f;
        f->n_slots = 0;
        err_mark em = err_save(C);
        guarded_func(C, f, Kp);
        checker K = *Kp;
        if (K.refix && pass < 8) {
            err_restore(C, em);
            continue;
        }
        if (C->n_errors != em.n)
            return;
        /* a declaration checked in several loop passes is one variable:
         * used if any of its passes used it (sorted by position, not a
         * scan of every declaration per declaration: 200,000 lets took 23 s) */
        decl_at *by_pos = cc_array(C, K.n_decls + 1, sizeof *by_pos);
        bool *used = cc_array(C, K.n_decls + 1, sizeof *used);
        for (uint32_t i = 0; i < K.n_decls; i++)
            by_pos[i] = (decl_at){K.decls[i], i};
        qsort(by_pos, K.n_decls, sizeof *by_pos, cmp_decl_pos);
        for (uint32_t i = 0, j; i < K.n_decls; i = j) {
            bool any = false;
            for (j = i; j < K.n_decls && same_pos(by_pos[j].v->pos, by_pos[i].v->pos); j++)
                any |= by_pos[j].v->user_uses > 0;
            for (uint32_t k = i; k < j; k++)
                used[by_pos[k].index] = any;
        }
        for (uint32_t i = 0; i < K.n_decls; i++)
            if (!used[i])
                cc_warn(C, K.decls[i]->pos, "unused variable '%s'", K.decls[i]->name);
        return;
    }
}

/* ---- Call sites, loop names and reachability ------------------------------------------------ */

typedef struct walker {
    cc *C;
    cc_func *fn;
    void (*visit)(struct walker *W, cc_expr *e);
} walker;

static void walk_block(walker *W, cc_ablock *b);

/* Visits every expression in textual order (a call before its arguments). */
static void walk(walker *W, cc_expr *e)
{
    W->visit(W, e);
    switch (e->kind) {
    case CC_E_TENSOR:
    case CC_E_INT:
    case CC_E_FLOAT:
    case CC_E_BOOL:
    case CC_E_VAR: break;
    case CC_E_UNARY: walk(W, e->u.op.a); break;
    case CC_E_BINARY:
        walk(W, e->u.op.a);
        walk(W, e->u.op.b);
        break;
    case CC_E_CALL:
        for (uint32_t k = 0; k < e->u.call.n_args; k++)
            walk(W, e->u.call.args[k]);
        break;
    case CC_E_IF:
        walk(W, e->u.cond.cond);
        walk_block(W, e->u.cond.then);
        walk_block(W, e->u.cond.els);
        break;
    case CC_E_WHILE:
        for (uint32_t k = 0; k < e->u.loop.n_vars; k++)
            walk(W, e->u.loop.vars[k].init);
        walk(W, e->u.loop.cond);
        walk_block(W, e->u.loop.body);
        break;
    case CC_E_TUPLE:
        for (uint32_t k = 0; k < e->u.tuple.n; k++)
            walk(W, e->u.tuple.elems[k]);
        break;
    }
}

static void walk_block(walker *W, cc_ablock *b)
{
    for (uint32_t i = 0; i < b->n_lets; i++)
        walk(W, b->lets[i].value);
    walk(W, b->result);
}

static void number_site(walker *W, cc_expr *e)
{
    if (e->kind == CC_E_CALL && e->u.call.fn)
        e->u.call.site = W->C->mod.n_sites++;
}

static void mark_calls(walker *W, cc_expr *e);

static void mark_mentioned(walker *W, cc_expr *e)
{
    (void)W;
    if (e->kind == CC_E_CALL && e->u.call.fn)
        e->u.call.fn->mentioned = true;
}

static void reach(cc *C, cc_func *f)
{
    if (f->reachable)
        return;
    f->reachable = true;
    walker W = {C, f, mark_calls};
    walk_block(&W, f->body);
}

static void mark_calls(walker *W, cc_expr *e)
{
    if (e->kind == CC_E_CALL && e->u.call.fn) {
        e->u.call.fn->called = true;
        reach(W->C, e->u.call.fn);
    }
}

/* Loop names must be unique and differ from function names (both name regions). */
static void check_label(walker *W, cc_expr *e)
{
    if (e->kind != CC_E_WHILE || !e->u.loop.label)
        return;
    cc *C = W->C;
    const char *l = e->u.loop.label;
    cc_func *f = find_func(C, l);
    if (f)
        cc_error(C, e->u.loop.label_pos, TFVM_ERR_TYPE, "loop name '%s' is already the name of a function (at %u:%u)",
                 l, f->pos.line, f->pos.col);
}

typedef struct label_seen {
    const char *name;
    cc_pos pos;
} label_seen;

typedef struct label_walker {
    walker w;
    label_seen *seen;
    uint32_t n, cap;
} label_walker;

static void collect_label(walker *W, cc_expr *e)
{
    check_label(W, e);
    if (e->kind != CC_E_WHILE || !e->u.loop.label)
        return;
    label_walker *L = (label_walker *)W;
    for (uint32_t i = 0; i < L->n; i++)
        if (strcmp(L->seen[i].name, e->u.loop.label) == 0)
            cc_error(W->C, e->u.loop.label_pos, TFVM_ERR_TYPE, "loop name '%s' is already used (at %u:%u)",
                     e->u.loop.label, L->seen[i].pos.line, L->seen[i].pos.col);
    L->seen = cc_grow(W->C, L->seen, L->n, &L->cap, sizeof *L->seen);
    L->seen[L->n++] = (label_seen){e->u.loop.label, e->u.loop.label_pos};
}

void cc_check(cc *C, const char *entry)
{
    cc_module *m = &C->mod;
    if (C->defs_broken)
        return;
    for (uint32_t i = 0; i < m->n_funcs; i++)
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(m->funcs[i]->name, m->funcs[j]->name) == 0)
                cc_error(C, m->funcs[i]->pos, TFVM_ERR_TYPE, "function '%s' is defined twice (first at %u:%u)",
                         m->funcs[i]->name, m->funcs[j]->pos.line, m->funcs[j]->pos.col);
    bool parsed = C->n_errors == 0;
    for (uint32_t i = 0; i < m->n_funcs; i++)
        if (!m->funcs[i]->broken)
            check_func(C, m->funcs[i]);
    if (C->n_errors || !parsed)
        return;
    label_walker L = {{C, NULL, collect_label}, NULL, 0, 0};
    for (uint32_t i = 0; i < m->n_funcs; i++) {
        walker W = {C, m->funcs[i], number_site};
        walk_block(&W, m->funcs[i]->body);
        L.w.fn = m->funcs[i];
        walk_block(&L.w, m->funcs[i]->body);
    }
    cc_check_channels(C);
    const char *en = entry ? entry : "main";
    m->entry = find_func(C, en);
    if (!m->entry) {
        if (m->n_funcs == 0)
            cc_error(C, (cc_pos){0, 0}, TFVM_ERR_TYPE, "no functions: the entry point '%s' is missing", en);
        cc_error(C, (cc_pos){0, 0}, TFVM_ERR_TYPE, "no function '%s' to use as the entry point%s", en,
                 entry ? "" : " (name another with --entry NAME)");
    }
    reach(C, m->entry);
    /* never called anywhere and not the entry ("main" is one whatever --entry says) */
    walker W = {C, NULL, mark_mentioned};
    for (uint32_t i = 0; i < m->n_funcs; i++)
        walk_block(&W, m->funcs[i]->body);
    for (uint32_t i = 0; i < m->n_funcs; i++) {
        cc_func *f = m->funcs[i];
        if (!f->reachable && !f->mentioned && strcmp(f->name, "main") != 0)
            cc_warn(C, f->pos, "function '%s' is never used", f->name);
    }
}
