/* compiler/parse.c — recursive-descent parser: tokens to the AST of
 * compiler.h (grammar in docs/language.md), with statements (var, =, +=,
 * if, while, for, return) lowered to its expression forms as they are read.
 * Syntax errors say what was expected and what was found, at the found
 * token; parsing resumes at the next statement. */
#include <string.h>

#include "compiler.h"

static const cc_tok *peek(cc *C, uint32_t k)
{
    uint32_t i = C->tp + k;
    return &C->toks[i < C->n_toks ? i : C->n_toks - 1];
}
static const cc_tok *cur(cc *C) { return peek(C, 0); }
static bool at(cc *C, cc_tk k) { return cur(C)->kind == k; }
static const cc_tok *next(cc *C)
{
    const cc_tok *t = cur(C);
    if (C->tp < C->n_toks - 1)
        C->tp++;
    return t;
}
static bool accept(cc *C, cc_tk k)
{
    if (!at(C, k))
        return false;
    next(C);
    return true;
}

/* "'x'" for the found token, as messages quote it. */
static const char *found(cc *C, const cc_tok *t, char *buf, size_t size)
{
    switch (t->kind) {
    case CC_T_EOF: return "end of file";
    case CC_T_IDENT:
    case CC_T_INT:
    case CC_T_FLOAT: ut_fmt(buf, size, "'%.*s'", (int)(t->len > 40 ? 40 : t->len), t->text); return buf;
    default: (void)C; return cc_tk_name((cc_tk)t->kind);
    }
}

_Noreturn static void expected(cc *C, const char *what)
{
    char buf[64];
    const cc_tok *t = cur(C);
    cc_error(C, t->pos, TFVM_ERR_SYNTAX, "expected %s, got %s", what, found(C, t, buf, sizeof buf));
}

static const cc_tok *expect(cc *C, cc_tk k, const char *what)
{
    if (!at(C, k))
        expected(C, what);
    return next(C);
}

static const char *tok_str(cc *C, const cc_tok *t) { return cc_strndup(C, t->text, t->len); }

static uint8_t tok_dtype(const cc_tok *t)
{
    return t->kind == CC_T_IDENT ? (uint8_t)isa_dtype_by_name(t->text, t->len) : 0;
}

static void enter(cc *C)
{
    if (++C->depth > CC_MAX_DEPTH)
        cc_error(C, cur(C)->pos, TFVM_ERR_SYNTAX, "expressions and blocks nested too deeply");
}
static void leave(cc *C) { C->depth--; }

/* An identifier that names a value (not a keyword, not a type name). */
static const cc_tok *expect_name(cc *C, const char *what)
{
    const cc_tok *t = cur(C);
    if (t->kind != CC_T_IDENT)
        expected(C, what);
    if (tok_dtype(t))
        cc_error(C, t->pos, TFVM_ERR_SYNTAX, "'%.*s' is a type name and cannot be used as a name", (int)t->len,
                 t->text);
    return next(C);
}

/* ---- Types ---------------------------------------------------------------------- */

static cc_vtype parse_type(cc *C)
{
    const cc_tok *t = cur(C);
    uint8_t d = tok_dtype(t);
    if (!d)
        expected(C, "a type (bool, i32, i64, u8, i8, f32, f64)");
    next(C);
    cc_vtype ty = {.dtype = d};
    if (!accept(C, CC_T_LBRACK))
        return ty;
    ty.tensor = 1;
    for (;;) {
        if (ty.rank == TFVM_MAX_RANK)
            cc_error(C, cur(C)->pos, TFVM_ERR_SYNTAX, "a tensor has at most %d dimensions", TFVM_MAX_RANK);
        if (accept(C, CC_T_QUESTION)) {
            ty.dims[ty.rank++] = -1;
        } else if (at(C, CC_T_INT)) {
            const cc_tok *n = next(C);
            if (n->suffix || n->big || n->ival > ((uint64_t)1 << 40))
                cc_error(C, n->pos, TFVM_ERR_SYNTAX, "bad dimension '%.*s'", (int)n->len, n->text);
            ty.dims[ty.rank++] = (int64_t)n->ival;
        } else {
            expected(C, "a dimension (an integer or '?')");
        }
        if (accept(C, CC_T_RBRACK))
            break;
        expect(C, CC_T_COMMA, "',' or ']' in the tensor type");
    }
    return ty;
}

/* ---- Expressions ------------------------------------------------------------------ */

static cc_expr *new_expr(cc *C, cc_ek kind, cc_pos pos)
{
    cc_expr *e = cc_alloc(C, sizeof *e);
    e->kind = (uint8_t)kind;
    e->pos = e->start = pos;
    return e;
}

static cc_expr *parse_expr(cc *C);
static cc_ablock *parse_block(cc *C, const char *what);
static cc_expr *parse_load(cc *C);
static cc_expr *parse_host(cc *C);
static bool is_host(const cc_tok *t);

/* `while (i = ...` or `while NAME (i = ...`: the loop expression; anything
 * else after 'while' is the statement form `while COND { ... }`. */
static bool old_while(cc *C)
{
    uint32_t k = 1;
    if (peek(C, k)->kind == CC_T_IDENT && peek(C, k + 1)->kind == CC_T_LPAREN)
        k++;
    return peek(C, k)->kind == CC_T_LPAREN && peek(C, k + 1)->kind == CC_T_IDENT &&
           (peek(C, k + 2)->kind == CC_T_ASSIGN || peek(C, k + 2)->kind == CC_T_COLON);
}

static cc_expr *parse_if(cc *C)
{
    cc_pos pos = next(C)->pos; /* 'if' */
    cc_expr *e = new_expr(C, CC_E_IF, pos);
    e->u.cond.cond = parse_expr(C);
    e->u.cond.then = parse_block(C, "'{' after the condition of 'if'");
    if (!at(C, CC_T_ELSE))
        cc_error(C, cur(C)->pos, TFVM_ERR_SYNTAX,
                 "expected 'else' ('if' is an expression: both branches must give a value)");
    next(C);
    if (at(C, CC_T_IF)) {
        /* else if: a block holding just the nested if */
        cc_ablock *b = cc_alloc(C, sizeof *b);
        b->pos = cur(C)->pos;
        enter(C);
        b->result = parse_if(C);
        leave(C);
        e->u.cond.els = b;
    } else {
        e->u.cond.els = parse_block(C, "'{' or 'if' after 'else'");
    }
    return e;
}

static cc_expr *parse_while(cc *C)
{
    cc_pos pos = next(C)->pos; /* 'while' */
    cc_expr *e = new_expr(C, CC_E_WHILE, pos);
    if (at(C, CC_T_IDENT)) {
        const cc_tok *l = expect_name(C, "a loop name");
        e->u.loop.label = tok_str(C, l);
        e->u.loop.label_pos = l->pos;
    }
    expect(C, CC_T_LPAREN, "'(' after 'while' (while (i = 0, ...; condition) { ... })");
    uint32_t cap = 0;
    for (;;) {
        const cc_tok *n = expect_name(C, "a loop variable (while (i = 0, ...; condition))");
        e->u.loop.vars = cc_grow(C, e->u.loop.vars, e->u.loop.n_vars, &cap, sizeof *e->u.loop.vars);
        cc_loopvar *v = &e->u.loop.vars[e->u.loop.n_vars++];
        v->name = tok_str(C, n);
        v->pos = n->pos;
        if (accept(C, CC_T_COLON)) {
            v->has_type = true;
            v->type = parse_type(C);
        }
        expect(C, CC_T_ASSIGN, "'=' and the initial value of the loop variable");
        v->init = parse_expr(C);
        if (accept(C, CC_T_SEMI))
            break;
        expect(C, CC_T_COMMA, "',' or ';' after a loop variable");
    }
    e->u.loop.cond = parse_expr(C);
    expect(C, CC_T_RPAREN, "')' after the loop condition");
    e->u.loop.body = parse_block(C, "'{' to start the loop body");
    return e;
}

/* A tensor literal; its leaves are number or bool literals. */
static cc_expr *parse_leaf(cc *C)
{
    const cc_tok *t = cur(C);
    bool neg = false;
    if (t->kind == CC_T_MINUS) {
        neg = true;
        next(C);
        t = cur(C);
    }
    cc_expr *e;
    if (t->kind == CC_T_INT) {
        e = new_expr(C, CC_E_INT, t->pos);
        e->u.lit.mag = t->ival;
        e->u.lit.big = t->big;
    } else if (t->kind == CC_T_FLOAT) {
        e = new_expr(C, CC_E_FLOAT, t->pos);
        e->u.lit.f = t->fval;
    } else if (!neg && (t->kind == CC_T_TRUE || t->kind == CC_T_FALSE)) {
        e = new_expr(C, CC_E_BOOL, t->pos);
        e->u.lit.b = t->kind == CC_T_TRUE;
    } else {
        expected(C, "a number, true or false (tensor literals hold only literals)");
    }
    e->u.lit.neg = neg;
    e->u.lit.suffix = t->suffix;
    if (neg && t->kind == CC_T_FLOAT)
        e->u.lit.f = -e->u.lit.f;
    next(C);
    return e;
}

/* Parses one nesting level of a tensor literal into lit: leaves are appended
 * in C order; the first row completed at each level fixes that dimension. */
static void parse_rows(cc *C, cc_expr *lit, uint32_t level, uint32_t *cap)
{
    cc_pos pos = expect(C, CC_T_LBRACK, "'['")->pos;
    if (level >= TFVM_MAX_RANK)
        cc_error(C, pos, TFVM_ERR_SYNTAX, "a tensor has at most %d dimensions", TFVM_MAX_RANK);
    enter(C);
    int64_t count = 0;
    bool nested = at(C, CC_T_LBRACK);
    if (at(C, CC_T_RBRACK))
        cc_error(C, cur(C)->pos, TFVM_ERR_SYNTAX, "empty tensor literal");
    for (;;) {
        if (nested != at(C, CC_T_LBRACK))
            cc_error(C, cur(C)->pos, TFVM_ERR_SYNTAX, "ragged tensor literal: rows must all be lists or all be values");
        if (nested) {
            parse_rows(C, lit, level + 1, cap);
        } else {
            lit->u.tensor.elems = cc_grow(C, lit->u.tensor.elems, lit->u.tensor.n, cap, sizeof(cc_expr *));
            lit->u.tensor.elems[lit->u.tensor.n++] = parse_leaf(C);
        }
        count++;
        if (accept(C, CC_T_RBRACK))
            break;
        expect(C, CC_T_COMMA, "',' or ']' in the tensor literal");
    }
    /* The first completed row at each level fixes the rank and that dimension. */
    if (!nested) {
        if (lit->u.tensor.rank == 0)
            lit->u.tensor.rank = (uint8_t)(level + 1);
        else if (lit->u.tensor.rank != level + 1)
            cc_error(C, pos, TFVM_ERR_SYNTAX, "ragged tensor literal: rows nest to different depths");
    } else if (lit->u.tensor.rank <= level + 1) {
        cc_error(C, pos, TFVM_ERR_SYNTAX, "ragged tensor literal: rows nest to different depths");
    }
    if (lit->u.tensor.dims[level] == 0)
        lit->u.tensor.dims[level] = count;
    else if (lit->u.tensor.dims[level] != count)
        cc_error(C, pos, TFVM_ERR_SYNTAX, "ragged tensor literal: a row of %lld where the first had %lld",
                 (long long)count, (long long)lit->u.tensor.dims[level]);
    leave(C);
}

static cc_expr *parse_call(cc *C)
{
    const cc_tok *n = next(C);
    cc_expr *e = new_expr(C, CC_E_CALL, n->pos);
    e->u.call.name = tok_str(C, n);
    e->u.call.name_pos = n->pos;
    if (at(C, CC_T_LT)) {
        next(C);
        const cc_tok *t = cur(C);
        e->u.call.targ = tok_dtype(t);
        if (!e->u.call.targ)
            expected(C, "a dtype (bool, i32, i64, u8, i8, f32, f64) in '<...>'");
        next(C);
        e->u.call.has_targ = true;
        expect(C, CC_T_GT, "'>' after the type argument");
        if (!at(C, CC_T_LPAREN))
            expected(C, "'(' and the arguments");
    }
    next(C); /* '(' */
    uint32_t cap = 0, cap_names = 0, cap_pos = 0;
    if (!accept(C, CC_T_RPAREN)) {
        for (;;) {
            uint32_t k = e->u.call.n_args;
            e->u.call.args = cc_grow(C, e->u.call.args, k, &cap, sizeof(cc_expr *));
            /* a keyword argument: NAME = value */
            if (at(C, CC_T_IDENT) && peek(C, 1)->kind == CC_T_ASSIGN) {
                if (!e->u.call.arg_names) { /* the arguments before were positional: NULL */
                    cap_names = cap_pos = cap;
                    e->u.call.arg_names = cc_array(C, cap, sizeof(const char *));
                    e->u.call.arg_pos = cc_array(C, cap, sizeof(cc_pos));
                }
                const cc_tok *kw = expect_name(C, "a parameter name");
                next(C); /* '=' */
                e->u.call.arg_names = cc_grow(C, e->u.call.arg_names, k, &cap_names, sizeof(const char *));
                e->u.call.arg_pos = cc_grow(C, e->u.call.arg_pos, k, &cap_pos, sizeof(cc_pos));
                e->u.call.arg_names[k] = tok_str(C, kw);
                e->u.call.arg_pos[k] = kw->pos;
            } else if (e->u.call.arg_names) {
                e->u.call.arg_names = cc_grow(C, e->u.call.arg_names, k, &cap_names, sizeof(const char *));
                e->u.call.arg_pos = cc_grow(C, e->u.call.arg_pos, k, &cap_pos, sizeof(cc_pos));
                e->u.call.arg_names[k] = NULL;
            }
            e->u.call.args[e->u.call.n_args++] = parse_expr(C);
            if (accept(C, CC_T_RPAREN))
                break;
            expect(C, CC_T_COMMA, "',' or ')' after an argument");
        }
    }
    return e;
}

/* x[i, :, j]: a call of the indexing op (types.c turns it into GATHERs);
 * args = x then the index expressions, colons marks the ':' items. */
static cc_expr *parse_index(cc *C, cc_expr *x)
{
    cc_pos pos = next(C)->pos; /* '[' */
    cc_expr *e = new_expr(C, CC_E_CALL, pos);
    e->start = x->start;
    e->u.call.name = "[]";
    e->u.call.name_pos = pos;
    uint32_t cap = 0;
    e->u.call.args = cc_grow(C, NULL, 0, &cap, sizeof(cc_expr *));
    e->u.call.args[e->u.call.n_args++] = x;
    for (;;) {
        if (e->u.call.n_index == TFVM_MAX_RANK)
            cc_error(C, cur(C)->pos, TFVM_ERR_SYNTAX, "at most %d indices (a tensor has at most %d dimensions)",
                     TFVM_MAX_RANK, TFVM_MAX_RANK);
        if (accept(C, CC_T_COLON)) {
            e->u.call.colons |= (uint8_t)(1u << e->u.call.n_index);
        } else {
            if (at(C, CC_T_RBRACK) || at(C, CC_T_COMMA))
                expected(C, "an index (an integer expression or ':')");
            e->u.call.args = cc_grow(C, e->u.call.args, e->u.call.n_args, &cap, sizeof(cc_expr *));
            e->u.call.args[e->u.call.n_args++] = parse_expr(C);
        }
        e->u.call.n_index++;
        if (accept(C, CC_T_RBRACK))
            break;
        expect(C, CC_T_COMMA, "',' or ']' after an index");
    }
    return e;
}

static cc_expr *parse_primary(cc *C)
{
    const cc_tok *t = cur(C);
    cc_expr *e;
    switch (t->kind) {
    case CC_T_INT:
        e = new_expr(C, CC_E_INT, t->pos);
        e->u.lit.mag = t->ival;
        e->u.lit.big = t->big;
        e->u.lit.suffix = t->suffix;
        next(C);
        return e;
    case CC_T_FLOAT:
        e = new_expr(C, CC_E_FLOAT, t->pos);
        e->u.lit.f = t->fval;
        e->u.lit.suffix = t->suffix;
        next(C);
        return e;
    case CC_T_TRUE:
    case CC_T_FALSE:
        e = new_expr(C, CC_E_BOOL, t->pos);
        e->u.lit.b = t->kind == CC_T_TRUE;
        next(C);
        return e;
    case CC_T_IDENT:
        if (t->len == 4 && memcmp(t->text, "load", 4) == 0 && peek(C, 1)->kind == CC_T_LPAREN &&
            peek(C, 2)->kind == CC_T_STRING)
            return parse_load(C);
        if (is_host(t) && ((peek(C, 1)->kind == CC_T_LPAREN && peek(C, 2)->kind == CC_T_STRING) ||
                           (peek(C, 1)->kind == CC_T_LT && tok_dtype(peek(C, 2)))))
            return parse_host(C);
        if (peek(C, 1)->kind == CC_T_LPAREN && peek(C, 2)->kind == CC_T_STRING) {
            /* strings name files and channels only */
            static const char *const takers[] = {"load", "feed", "fetch"};
            const char *name = tok_str(C, t), *near = cc_suggest(name, takers, 3);
            if (near)
                cc_error(C, t->pos, TFVM_ERR_SYNTAX,
                         "'%s' takes no string (only load, feed and fetch do); did you mean '%s'?", name, near);
            cc_error(C, t->pos, TFVM_ERR_SYNTAX, "'%s' takes no string (only load, feed and fetch do)", name);
        }
        /* name(, or name<dtype>( : a call */
        if (peek(C, 1)->kind == CC_T_LPAREN ||
            (peek(C, 1)->kind == CC_T_LT && tok_dtype(peek(C, 2)) && peek(C, 3)->kind == CC_T_GT))
            return parse_call(C);
        if (tok_dtype(t))
            cc_error(C, t->pos, TFVM_ERR_SYNTAX, "'%.*s' is a type, not a value (convert with cast<%.*s>(x))",
                     (int)t->len, t->text, (int)t->len, t->text);
        e = new_expr(C, CC_E_VAR, t->pos);
        e->u.var.name = tok_str(C, t);
        next(C);
        return e;
    case CC_T_LPAREN: {
        next(C);
        cc_expr *first = parse_expr(C);
        if (accept(C, CC_T_RPAREN))
            return first; /* parenthesised */
        if (!at(C, CC_T_COMMA))
            expected(C, "')' or ','");
        e = new_expr(C, CC_E_TUPLE, t->pos);
        uint32_t cap = 0;
        e->u.tuple.elems = cc_grow(C, NULL, 0, &cap, sizeof(cc_expr *));
        e->u.tuple.elems[e->u.tuple.n++] = first;
        while (accept(C, CC_T_COMMA)) {
            if (at(C, CC_T_RPAREN))
                break; /* trailing comma */
            e->u.tuple.elems = cc_grow(C, e->u.tuple.elems, e->u.tuple.n, &cap, sizeof(cc_expr *));
            e->u.tuple.elems[e->u.tuple.n++] = parse_expr(C);
        }
        expect(C, CC_T_RPAREN, "',' or ')' in the tuple");
        return e;
    }
    case CC_T_LBRACK: {
        e = new_expr(C, CC_E_TENSOR, t->pos);
        uint32_t cap = 0;
        parse_rows(C, e, 0, &cap);
        return e;
    }
    case CC_T_IF: return parse_if(C);
    case CC_T_WHILE:
        if (!old_while(C))
            cc_error(C, t->pos, TFVM_ERR_SYNTAX,
                     "'while COND { ... }' is a statement and gives no value (the loop expression is "
                     "while (i = 0, ...; COND) { ... })");
        return parse_while(C);
    case CC_T_LET:
    case CC_T_VAR:
    case CC_T_RETURN:
    case CC_T_FOR:
        cc_error(C, t->pos, TFVM_ERR_SYNTAX, "%s is a statement and cannot be used inside an expression",
                 cc_tk_name((cc_tk)t->kind));
    default: expected(C, "an expression");
    }
}

static cc_expr *parse_unary(cc *C)
{
    const cc_tok *t = cur(C);
    if (t->kind != CC_T_MINUS && t->kind != CC_T_NOT && t->kind != CC_T_TILDE) {
        enter(C);
        cc_expr *e = parse_primary(C);
        uint32_t levels = 0; /* x[i][j]... nests like parentheses */
        for (; at(C, CC_T_LBRACK); levels++) {
            enter(C);
            e = parse_index(C, e);
        }
        C->depth -= levels;
        leave(C);
        return e;
    }
    next(C);
    enter(C);
    cc_expr *a = parse_unary(C);
    leave(C);
    if (t->kind == CC_T_MINUS && (a->kind == CC_E_INT || a->kind == CC_E_FLOAT)) {
        /* -literal is a literal: -2147483648 is a valid i32 */
        a->u.lit.neg = !a->u.lit.neg;
        if (a->kind == CC_E_FLOAT)
            a->u.lit.f = -a->u.lit.f;
        a->pos = a->start = t->pos;
        return a;
    }
    cc_expr *e = new_expr(C, CC_E_UNARY, t->pos);
    e->u.op.op = t->kind;
    e->u.op.a = a;
    return e;
}

typedef enum { P_OR = 1, P_AND, P_CMP, P_BOR, P_XOR, P_BAND, P_SHIFT, P_ADD, P_MUL } prec;

static int binary_prec(cc_tk k)
{
    switch (k) {
    case CC_T_OR: return P_OR;
    case CC_T_AND: return P_AND;
    case CC_T_LT: case CC_T_LE: case CC_T_GT: case CC_T_GE: case CC_T_EQ: case CC_T_NE: return P_CMP;
    case CC_T_BOR: return P_BOR;
    case CC_T_XOR: return P_XOR;
    case CC_T_BAND: return P_BAND;
    case CC_T_SHL: case CC_T_SHR: return P_SHIFT;
    case CC_T_PLUS: case CC_T_MINUS: return P_ADD;
    case CC_T_STAR: case CC_T_SLASH: case CC_T_PERCENT: return P_MUL;
    default: return 0;
    }
}

/* Precedence climbing from an operand already parsed; comparisons do not
 * chain (a < b < c is an error). */
static cc_expr *parse_binary_from(cc *C, cc_expr *lhs, int min_prec)
{
    for (;;) {
        const cc_tok *t = cur(C);
        int p = binary_prec((cc_tk)t->kind);
        if (!p || p < min_prec)
            return lhs;
        next(C);
        enter(C);
        cc_expr *rhs = parse_binary_from(C, parse_unary(C), p + 1);
        leave(C);
        cc_expr *e = new_expr(C, CC_E_BINARY, t->pos);
        e->start = lhs->start;
        e->u.op.op = t->kind;
        e->u.op.a = lhs;
        e->u.op.b = rhs;
        lhs = e;
        if (p == P_CMP && binary_prec((cc_tk)cur(C)->kind) == P_CMP)
            cc_error(C, cur(C)->pos, TFVM_ERR_SYNTAX,
                     "comparisons do not chain (write a < b && b < c)");
    }
}

static cc_expr *parse_binary(cc *C, int min_prec) { return parse_binary_from(C, parse_unary(C), min_prec); }

static cc_expr *parse_expr(cc *C)
{
    enter(C);
    cc_expr *e = parse_binary(C, P_OR);
    leave(C);
    return e;
}

/* ---- Copies ---------------------------------------------------------------------------
 * Statement lowering may place the rest of a block in both branches of an
 * `if` that returns on one path, so expressions are copied before use. */

cc_ablock *cc_clone_block(cc *C, const cc_ablock *b)
{
    cc_ablock *r = cc_alloc(C, sizeof *r);
    *r = *b;
    r->lets = cc_array(C, b->n_lets, sizeof *r->lets);
    for (uint32_t i = 0; i < b->n_lets; i++) {
        r->lets[i] = b->lets[i];
        r->lets[i].value = cc_clone(C, b->lets[i].value);
    }
    r->result = cc_clone(C, b->result);
    return r;
}

static cc_expr **clone_list(cc *C, cc_expr *const *v, uint32_t n)
{
    cc_expr **r = cc_array(C, n, sizeof *r);
    for (uint32_t i = 0; i < n; i++)
        r[i] = cc_clone(C, v[i]);
    return r;
}

cc_expr *cc_clone(cc *C, const cc_expr *e)
{
    cc_expr *r = cc_alloc(C, sizeof *r);
    *r = *e;
    switch (e->kind) {
    case CC_E_TENSOR: r->u.tensor.elems = clone_list(C, e->u.tensor.elems, e->u.tensor.n); break;
    case CC_E_UNARY: r->u.op.a = cc_clone(C, e->u.op.a); break;
    case CC_E_BINARY:
        r->u.op.a = cc_clone(C, e->u.op.a);
        r->u.op.b = cc_clone(C, e->u.op.b);
        break;
    case CC_E_CALL: r->u.call.args = clone_list(C, e->u.call.args, e->u.call.n_args); break;
    case CC_E_IF:
        r->u.cond.cond = cc_clone(C, e->u.cond.cond);
        r->u.cond.then = cc_clone_block(C, e->u.cond.then);
        r->u.cond.els = cc_clone_block(C, e->u.cond.els);
        break;
    case CC_E_WHILE:
        r->u.loop.vars = cc_array(C, e->u.loop.n_vars, sizeof *r->u.loop.vars);
        for (uint32_t k = 0; k < e->u.loop.n_vars; k++) {
            r->u.loop.vars[k] = e->u.loop.vars[k];
            r->u.loop.vars[k].init = cc_clone(C, e->u.loop.vars[k].init);
        }
        r->u.loop.cond = cc_clone(C, e->u.loop.cond);
        r->u.loop.body = cc_clone_block(C, e->u.loop.body);
        break;
    case CC_E_TUPLE: r->u.tuple.elems = clone_list(C, e->u.tuple.elems, e->u.tuple.n); break;
    default: break;
    }
    return r;
}

/* ---- load("w.npy"), load("w.npz", "name") ----------------------------------------------- */

static const char *string_value(cc *C, const cc_tok *t) { return cc_strndup(C, t->text + 1, t->len - 2); }

static cc_expr *parse_load(cc *C)
{
    const cc_tok *n = next(C); /* 'load' */
    next(C);                   /* '(' */
    const cc_tok *path = next(C);
    const char *member = NULL;
    cc_pos member_pos = path->pos;
    if (accept(C, CC_T_COMMA)) {
        member_pos = cur(C)->pos;
        member = string_value(C, expect(C, CC_T_STRING, "the array's name in the .npz file (a string)"));
    }
    expect(C, CC_T_RPAREN, "')' after load's arguments");
    cc_expr *e = new_expr(C, CC_E_TENSOR, n->pos);
    cc_load(C, e, string_value(C, path), path->pos, member, member_pos);
    return e;
}

/* ---- feed<T>("x"), fetch("y", v) ------------------------------------------------------------
 * The channel's name is a string literal; what it may hold, and what the
 * arguments must be, the checker says (types.c), so that a call written
 * almost right gets a message about feed or fetch rather than a syntax error. */

static bool is_host(const cc_tok *t)
{
    return (t->len == 4 && memcmp(t->text, "feed", 4) == 0) || (t->len == 5 && memcmp(t->text, "fetch", 5) == 0);
}

static cc_expr *parse_host(cc *C)
{
    const cc_tok *n = next(C); /* 'feed' or 'fetch' */
    cc_expr *e = new_expr(C, CC_E_CALL, n->pos);
    cc_host *h = cc_alloc(C, sizeof *h);
    e->u.call.name = tok_str(C, n);
    e->u.call.name_pos = n->pos;
    e->u.call.host = h;
    h->feed = n->len == 4;
    if (accept(C, CC_T_LT)) {
        h->has_type = true;
        h->type = parse_type(C);
        expect(C, CC_T_GT, "'>' after the type argument");
    }
    expect(C, CC_T_LPAREN, "'(' and the channel's name");
    const cc_tok *s = cur(C);
    if (s->kind != CC_T_STRING)
        expected(C, h->feed ? "the channel's name, a string (feed<T>(\"x\"))"
                            : "the channel's name, a string (fetch(\"y\", v))");
    next(C);
    h->name = cc_strndup(C, s->text + 1, s->len - 2);
    h->name_pos = s->pos;
    uint32_t cap = 0;
    while (accept(C, CC_T_COMMA)) {
        e->u.call.args = cc_grow(C, e->u.call.args, e->u.call.n_args, &cap, sizeof(cc_expr *));
        e->u.call.args[e->u.call.n_args++] = parse_expr(C);
    }
    expect(C, CC_T_RPAREN, h->feed ? "')' after the channel's name" : "',' or ')' after an argument");
    return e;
}

/* ---- Statements -------------------------------------------------------------------------
 * A block is a list of statements and an optional value. The statements
 * (var, assignment, if without else, while/for statements, return, break,
 * continue) are lowered to the expression forms the rest of the compiler
 * knows: an assignment is a `let` of the same name (SSA), a statement `if`
 * or loop gives the new values of the outer variables it assigns as a
 * tuple that a `let` unpacks, `return` makes the rest of the function the
 * other branch, and `break`/`continue` end the loop body's block with the
 * next values of the loop variables (a break also a false flag that the
 * loop condition tests). Nothing new reaches the checker or the graph
 * builder. */

typedef enum { S_LET, S_ASSIGN, S_EXPR, S_IF, S_WHILE, S_FOR, S_RETURN, S_BREAK, S_CONTINUE } ps_sk;

/* The jumps out of a statement: bits of ps_stmt.jumps and .own. */
enum { J_BRK = 1, J_CONT = 2 };

typedef struct ps_names {
    uint32_t n, cap;
    const char **v;
} ps_names;

typedef struct ps_list ps_list;

typedef struct ps_stmt {
    uint8_t kind;       /* ps_sk */
    bool returns;       /* a `return` inside, at any depth */
    uint8_t jumps;      /* BREAK, CONTINUE, IF: a break/continue (J_*) inside that leaves it */
    uint8_t own;        /* WHILE, FOR: the break/continue (J_*) that end it or its iteration */
    bool value;         /* IF: the last item of its block; its branches give the block's value */
    cc_pos pos;
    cc_let let;         /* LET; ASSIGN: names[0] and the new value */
    cc_expr *e;         /* EXPR, RETURN: the value; IF, WHILE: the condition */
    ps_list *a, *b;     /* IF: then, else (NULL: none); WHILE, FOR: the body */
    ps_names assigned;  /* IF, WHILE, FOR: variables from outside that it assigns */
    const char *ivar;   /* FOR: the counter, from .. to */
    cc_pos ivar_pos;
    cc_expr *from, *to;
} ps_stmt;

struct ps_list {
    cc_pos pos, end;    /* '{' and '}' */
    uint32_t n, cap;
    ps_stmt **s;
    cc_expr *value;     /* the block's value, or NULL */
};

typedef struct ps_ent {  /* a name in scope while parsing: may it be assigned? */
    const char *name;
    bool mut;
    uint32_t level;      /* frames open when it was declared */
} ps_ent;

typedef struct ps_frame { /* a statement whose body is being parsed */
    bool barrier;         /* an expression's block: no assignment out, no return */
    ps_stmt *s;
} ps_frame;

typedef struct ps_const {
    cc_let let;
    uint32_t from, to;    /* its value's tokens (a constant may name earlier ones) */
    bool used;            /* by the function being parsed */
} ps_const;

typedef struct ps {
    ps_ent *ents;
    uint32_t n_ents, cap_ents;
    ps_frame *frames;
    uint32_t n_frames, cap_frames;
    cc_func *fn;
    uint32_t hidden;      /* hidden-name counter */
    ps_const *consts;
    uint32_t n_consts, cap_consts;
} ps;

static ps *P_of(cc *C) { return (ps *)C->parse_state; }

static void declare_name(cc *C, const char *name, bool mut)
{
    ps *P = P_of(C);
    P->ents = cc_grow(C, P->ents, P->n_ents, &P->cap_ents, sizeof *P->ents);
    P->ents[P->n_ents++] = (ps_ent){name, mut, P->n_frames};
}

static void push_frame(cc *C, bool barrier, ps_stmt *s)
{
    ps *P = P_of(C);
    P->frames = cc_grow(C, P->frames, P->n_frames, &P->cap_frames, sizeof *P->frames);
    P->frames[P->n_frames++] = (ps_frame){barrier, s};
}

static void add_name(cc *C, ps_names *l, const char *name)
{
    for (uint32_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], name) == 0)
            return;
    l->v = cc_grow(C, l->v, l->n, &l->cap, sizeof *l->v);
    l->v[l->n++] = name;
}

static const char *hidden(cc *C, const char *what)
{
    char buf[48];
    ut_fmt(buf, sizeof buf, "%s.%u", what, ++P_of(C)->hidden);
    return cc_strndup(C, buf, strlen(buf));
}

/* `x = ...`: x must be a var in scope; every statement between its
 * declaration and here assigns it. */
static void note_assign(cc *C, const cc_tok *t)
{
    ps *P = P_of(C);
    const char *name = tok_str(C, t);
    uint32_t i = P->n_ents;
    while (i > 0 && strcmp(P->ents[i - 1].name, name) != 0)
        i--;
    if (i == 0) {
        const char **cands = cc_array(C, P->n_ents, sizeof *cands);
        for (uint32_t k = 0; k < P->n_ents; k++)
            cands[k] = P->ents[k].name;
        const char *near = cc_suggest(name, cands, P->n_ents);
        if (near)
            cc_error(C, t->pos, TFVM_ERR_TYPE, "'%s' is not defined; did you mean '%s'?", name, near);
        cc_error(C, t->pos, TFVM_ERR_TYPE, "'%s' is not defined", name);
    }
    const ps_ent *v = &P->ents[i - 1];
    if (!v->mut)
        cc_error(C, t->pos, TFVM_ERR_TYPE, "cannot assign to '%s': it is not a var (declare it with 'var %s = ...')",
                 name, name);
    for (uint32_t f = P->n_frames; f-- > v->level;) {
        if (P->frames[f].barrier)
            cc_error(C, t->pos, TFVM_ERR_TYPE,
                     "cannot assign to '%s' inside an expression (it is declared outside it)", name);
        add_name(C, &P->frames[f].s->assigned, name);
    }
}

static ps_list *parse_list(cc *C, const char *what);

static void parse_let(cc *C, cc_let *l)
{
    bool mut = cur(C)->kind == CC_T_VAR;
    l->pos = next(C)->pos; /* 'let' or 'var' */
    uint32_t cap = 0, cap2 = 0;
    if (accept(C, CC_T_LPAREN)) {
        for (;;) {
            const cc_tok *n = expect_name(C, mut ? "a name in the 'var' pattern" : "a name in the 'let' pattern");
            l->names = cc_grow(C, l->names, l->n_names, &cap, sizeof *l->names);
            l->name_pos = cc_grow(C, l->name_pos, l->n_names, &cap2, sizeof *l->name_pos);
            l->names[l->n_names] = tok_str(C, n);
            l->name_pos[l->n_names++] = n->pos;
            if (accept(C, CC_T_RPAREN))
                break;
            expect(C, CC_T_COMMA, mut ? "',' or ')' in the 'var' pattern" : "',' or ')' in the 'let' pattern");
        }
    } else {
        const cc_tok *n = expect_name(C, mut ? "a name or '(' after 'var'" : "a name or '(' after 'let'");
        l->names = cc_alloc(C, sizeof *l->names);
        l->name_pos = cc_alloc(C, sizeof *l->name_pos);
        l->names[0] = tok_str(C, n);
        l->name_pos[0] = n->pos;
        l->n_names = 1;
        if (accept(C, CC_T_COLON)) {
            l->has_type = true;
            l->type_pos = cur(C)->pos;
            l->type = parse_type(C);
        }
    }
    expect(C, CC_T_ASSIGN, mut ? "'=' in 'var'" : "'=' in 'let'");
    l->value = parse_expr(C);
    expect(C, CC_T_SEMI, mut ? "';' after the 'var' value" : "';' after the 'let' value");
    for (uint32_t k = 0; k < l->n_names; k++)
        declare_name(C, l->names[k], mut);
}

static ps_stmt *new_stmt(cc *C, ps_sk kind, cc_pos pos)
{
    ps_stmt *s = cc_alloc(C, sizeof *s);
    s->kind = (uint8_t)kind;
    s->pos = pos;
    return s;
}

/* A block (list) that cannot fall through its end: every path returns,
 * breaks or continues. */
static bool always_jumps(const ps_list *L);

static bool stmt_always_jumps(const ps_stmt *s)
{
    if (s->kind == S_RETURN || s->kind == S_BREAK || s->kind == S_CONTINUE)
        return true;
    return s->kind == S_IF && s->b && always_jumps(s->a) && always_jumps(s->b);
}

static bool always_jumps(const ps_list *L)
{
    for (uint32_t i = 0; i < L->n; i++)
        if (stmt_always_jumps(L->s[i]))
            return true;
    return false;
}

/* A return, or a break or continue of a loop outside the statement. */
static bool jumps_out(const ps_stmt *s) { return s->returns || s->jumps; }

/* Whether a branch ends with a value (or with an if whose branches do). */
static bool gives_value(const ps_list *L)
{
    return L && (L->value || (L->n && L->s[L->n - 1]->kind == S_IF && L->s[L->n - 1]->value));
}

static ps_stmt *parse_if_stmt(cc *C)
{
    ps_stmt *s = new_stmt(C, S_IF, next(C)->pos); /* 'if' */
    s->e = parse_expr(C);
    push_frame(C, false, s);
    s->a = parse_list(C, "'{' after the condition of 'if'");
    if (accept(C, CC_T_ELSE)) {
        if (at(C, CC_T_IF)) {
            ps_list *b = cc_alloc(C, sizeof *b);
            b->pos = cur(C)->pos;
            enter(C);
            ps_stmt *inner = parse_if_stmt(C);
            leave(C);
            inner->value = gives_value(inner->a) || gives_value(inner->b);
            b->s = cc_alloc(C, sizeof *b->s);
            b->s[0] = inner;
            b->n = b->cap = 1;
            b->end = cur(C)->pos;
            s->b = b;
        } else {
            s->b = parse_list(C, "'{' or 'if' after 'else'");
        }
    } else if (gives_value(s->a)) {
        cc_error(C, cur(C)->pos, TFVM_ERR_SYNTAX,
                 "expected 'else' ('if' is an expression: both branches must give a value)");
    }
    P_of(C)->n_frames--;
    return s;
}

/* Loop bodies: one frame around the body, the counter of `for` inside it. */
static ps_stmt *parse_loop_stmt(cc *C)
{
    bool is_for = at(C, CC_T_FOR);
    ps_stmt *s = new_stmt(C, is_for ? S_FOR : S_WHILE, next(C)->pos);
    ps *P = P_of(C);
    uint32_t mark = P->n_ents;
    if (is_for) {
        const cc_tok *n = expect_name(C, "the loop counter (for i in a..b)");
        s->ivar = tok_str(C, n);
        s->ivar_pos = n->pos;
        expect(C, CC_T_IN, "'in' after the loop counter (for i in a..b)");
        s->from = parse_expr(C);
        expect(C, CC_T_DOTDOT, "'..' in the range (for i in a..b)");
        s->to = parse_expr(C);
        push_frame(C, false, s);
        declare_name(C, s->ivar, false);
    } else {
        s->e = parse_expr(C);
        push_frame(C, false, s);
    }
    s->a = parse_list(C, is_for ? "'{' to start the loop body" : "'{' after the loop condition");
    P->n_ents = mark;
    P->n_frames--;
    if (s->a->value)
        cc_error(C, s->a->value->start, TFVM_ERR_SYNTAX,
                 "a loop body gives no value (end the expression with ';')");
    return s;
}

/* The operator of a compound assignment (`x <<= k` is `x = x << k`). */
static const struct {
    cc_tk assign, op;
} compound_ops[] = {
    {CC_T_PLUS_EQ, CC_T_PLUS},   {CC_T_MINUS_EQ, CC_T_MINUS}, {CC_T_STAR_EQ, CC_T_STAR}, {CC_T_SLASH_EQ, CC_T_SLASH},
    {CC_T_PERCENT_EQ, CC_T_PERCENT}, {CC_T_BAND_EQ, CC_T_BAND}, {CC_T_BOR_EQ, CC_T_BOR}, {CC_T_XOR_EQ, CC_T_XOR},
    {CC_T_SHL_EQ, CC_T_SHL},     {CC_T_SHR_EQ, CC_T_SHR},
};

static cc_tk compound_op(cc_tk k)
{
    for (size_t i = 0; i < UT_COUNTOF(compound_ops); i++)
        if (compound_ops[i].assign == k)
            return compound_ops[i].op;
    return CC_T_EOF;
}

static bool is_compound(cc_tk k) { return k == CC_T_ASSIGN || compound_op(k) != CC_T_EOF; }

/* `break;` or `continue;`: the innermost loop (a statement while or for)
 * ends, or goes on with its next iteration; the statements between here
 * and it learn that a jump leaves them. */
static ps_stmt *parse_jump(cc *C)
{
    ps *P = P_of(C);
    const cc_tok *t = next(C);
    bool brk = t->kind == CC_T_BREAK;
    ps_stmt *s = new_stmt(C, brk ? S_BREAK : S_CONTINUE, t->pos);
    s->jumps = brk ? J_BRK : J_CONT;
    const char *word = brk ? "break" : "continue";
    uint32_t f = P->n_frames;
    while (f > 0 && !P->frames[f - 1].barrier && P->frames[f - 1].s->kind == S_IF)
        f--;
    if (f == 0)
        cc_error(C, t->pos, TFVM_ERR_SYNTAX, "'%s' outside a loop (it can only be used in a while or for body)",
                 word);
    if (P->frames[f - 1].barrier)
        cc_error(C, t->pos, TFVM_ERR_SYNTAX, "'%s' cannot be used inside an expression (only in a loop's statements)",
                 word);
    P->frames[f - 1].s->own |= s->jumps;
    for (uint32_t k = f; k < P->n_frames; k++)
        P->frames[k].s->jumps |= s->jumps;
    expect(C, CC_T_SEMI, brk ? "';' after 'break'" : "';' after 'continue'");
    return s;
}

static cc_expr *if_expr(cc *C, ps_stmt *s);

/* One item of a block: a statement (*out) or the block's value (*value). */
static void parse_item(cc *C, ps_stmt **out, cc_expr **value)
{
    const cc_tok *t = cur(C);
    ps *P = P_of(C);
    ps_stmt *s;
    switch (t->kind) {
    case CC_T_LET:
    case CC_T_VAR:
        s = new_stmt(C, S_LET, t->pos);
        parse_let(C, &s->let);
        *out = s;
        return;
    case CC_T_RETURN: {
        s = new_stmt(C, S_RETURN, next(C)->pos);
        for (uint32_t f = P->n_frames; f-- > 0;) {
            if (P->frames[f].barrier)
                cc_error(C, t->pos, TFVM_ERR_SYNTAX,
                         "'return' cannot be used inside an expression (only in a function's statements)");
        }
        if (at(C, CC_T_SEMI))
            expected(C, "the value to return");
        s->e = parse_expr(C);
        expect(C, CC_T_SEMI, "';' after the returned value");
        s->returns = true;
        for (uint32_t f = 0; f < P->n_frames; f++)
            P->frames[f].s->returns = true;
        *out = s;
        return;
    }
    case CC_T_BREAK:
    case CC_T_CONTINUE: *out = parse_jump(C); return;
    case CC_T_FOR: *out = parse_loop_stmt(C); return;
    case CC_T_WHILE:
        if (!old_while(C)) {
            *out = parse_loop_stmt(C);
            return;
        }
        break;
    case CC_T_IF: {
        s = parse_if_stmt(C);
        bool v = gives_value(s->a) || gives_value(s->b);
        if (at(C, CC_T_RBRACE) && v) {
            s->value = true;
            *out = s;
            return;
        }
        if (binary_prec((cc_tk)cur(C)->kind) && v) {
            /* `if a { 1 } else { 2 } + 3`: the if is an operand */
            cc_expr *e = parse_binary_from(C, if_expr(C, s), P_OR);
            if (at(C, CC_T_RBRACE)) {
                *value = e;
                return;
            }
            s = new_stmt(C, S_EXPR, e->start);
            s->e = e;
            expect(C, CC_T_SEMI, "';' or '}' after the expression");
            *out = s;
            return;
        }
        accept(C, CC_T_SEMI);
        *out = s;
        return;
    }
    case CC_T_IDENT:
        if (is_compound((cc_tk)peek(C, 1)->kind)) {
            s = new_stmt(C, S_ASSIGN, t->pos);
            if (tok_dtype(t))
                expect_name(C, "a name");
            note_assign(C, t);
            next(C);
            const cc_tok *op = next(C);
            cc_expr *v = parse_expr(C);
            if (op->kind != CC_T_ASSIGN) {
                /* x += e is x = x + e; the read of x is not a use for warnings */
                cc_expr *x = new_expr(C, CC_E_VAR, t->pos);
                x->u.var.name = tok_str(C, t);
                x->u.var.synth = true;
                cc_expr *b = new_expr(C, CC_E_BINARY, op->pos);
                b->start = t->pos;
                b->u.op.op = (uint8_t)compound_op((cc_tk)op->kind);
                b->u.op.a = x;
                b->u.op.b = v;
                v = b;
            }
            s->let.pos = t->pos;
            s->let.n_names = 1;
            s->let.names = cc_alloc(C, sizeof *s->let.names);
            s->let.name_pos = cc_alloc(C, sizeof *s->let.name_pos);
            s->let.names[0] = tok_str(C, t);
            s->let.name_pos[0] = t->pos;
            s->let.value = v;
            s->let.assign = true;
            expect(C, CC_T_SEMI, "';' after the assignment");
            *out = s;
            return;
        }
        break;
    default: break;
    }
    cc_expr *e = parse_expr(C);
    if (at(C, CC_T_RBRACE)) {
        *value = e;
        return;
    }
    if (!at(C, CC_T_SEMI)) {
        if (at(C, CC_T_ASSIGN) || is_compound((cc_tk)cur(C)->kind))
            expected(C, "';' or '}' (only a var name can be assigned)");
        expected(C, "';' or '}' after the expression");
    }
    next(C);
    s = new_stmt(C, S_EXPR, e->start);
    s->e = e;
    *out = s;
}

/* Skips to the end of the statement where an error happened: past the next
 * ';' of this block, or to its '}'. */
static void skip_statement(cc *C, uint32_t depth)
{
    for (;;) {
        const cc_tok *t = cur(C);
        if (t->kind == CC_T_EOF || (t->kind == CC_T_RBRACE && t->depth <= depth))
            return;
        if (t->kind == CC_T_SEMI && t->depth == depth + 1) {
            next(C);
            return;
        }
        if (t->kind == CC_T_FN && t->depth == 0)
            return;
        next(C);
    }
}

/* Parses one item; false after an error (recorded; the scope and depth are
 * as before the item, so parsing goes on after it). */
static bool guarded_item(cc *C, ps_stmt **s, cc_expr **v)
{
    ps *P = P_of(C);
    jmp_buf jb, *outer = C->jb;
    uint32_t ents = P->n_ents, frames = P->n_frames, depth = C->depth;
    C->jb = &jb;
    if (setjmp(jb) == 0) {
        parse_item(C, s, v);
        C->jb = outer;
        return true;
    }
    C->jb = outer;
    if (C->fatal)
        longjmp(*outer, 1);
    if (P->fn)
        P->fn->broken = true;
    P->n_ents = ents;
    P->n_frames = frames;
    C->depth = depth;
    return false;
}

static ps_list *parse_list(cc *C, const char *what)
{
    ps *P = P_of(C);
    ps_list *L = cc_alloc(C, sizeof *L);
    const cc_tok *open = expect(C, CC_T_LBRACE, what);
    L->pos = open->pos;
    enter(C);
    uint32_t mark = P->n_ents;
    bool dead = false;
    while (!at(C, CC_T_RBRACE)) {
        if (at(C, CC_T_EOF) || (at(C, CC_T_FN) && cur(C)->depth == 0))
            expected(C, "'}' to close the block");
        ps_stmt *s = NULL;
        cc_expr *v = NULL;
        if (!guarded_item(C, &s, &v)) {
            skip_statement(C, open->depth);
            continue;
        }
        if (dead)
            cc_warn(C, s ? s->pos : v->start, "unreachable code");
        dead = false;
        if (v) {
            L->value = v;
            break;
        }
        L->s = cc_grow(C, L->s, L->n, &L->cap, sizeof *L->s);
        L->s[L->n++] = s;
        if (stmt_always_jumps(s) && !s->value)
            dead = true;
    }
    L->end = cur(C)->pos;
    if (!at(C, CC_T_RBRACE))
        expected(C, "'}' after the block's value");
    next(C);
    P->n_ents = mark;
    leave(C);
    return L;
}

/* ---- Lowering statements to expressions ------------------------------------------------- */

typedef enum { K_VALUE, K_FUNC, K_TAIL, K_SEQ } ps_kk;

typedef struct ps_k {     /* what follows the end of a statement list */
    uint8_t kind;         /* K_VALUE/K_FUNC: its value; K_TAIL: the tuple; K_SEQ: more statements */
    const ps_list *rest;  /* K_SEQ: rest->s[from..] then up */
    uint32_t from;
    const struct ps_k *up;
    cc_expr **tail;       /* K_TAIL: templates (copied at each use) */
    uint32_t n_tail;
} ps_k;

typedef enum { R_NONE, R_FUNC, R_LOOP } ps_rk;

typedef struct ps_jt {    /* what a break or continue gives: a tuple (templates) */
    cc_expr **tail;
    uint32_t n;
} ps_jt;

typedef struct ps_r {     /* what `return v`, `break` and `continue` become */
    uint8_t kind;
    cc_expr **tail;       /* R_LOOP: the loop variables' values before the returned ones */
    uint32_t n_tail;
    uint32_t n_rv;        /* R_LOOP: how many values a return gives */
    const ps_jt *brk, *cont; /* in a loop body: the block's value for a break, a continue */
} ps_r;

typedef struct ps_blk {
    cc_ablock *b;
    uint32_t cap;
} ps_blk;

static cc_expr *var_ref(cc *C, const char *name, cc_pos pos)
{
    cc_expr *e = new_expr(C, CC_E_VAR, pos);
    e->u.var.name = name;
    e->u.var.synth = true;
    return e;
}

static cc_expr *bool_lit(cc *C, bool b, cc_pos pos)
{
    cc_expr *e = new_expr(C, CC_E_BOOL, pos);
    e->u.lit.b = b;
    return e;
}

static cc_expr *tuple_of(cc *C, cc_expr **v, uint32_t n, cc_pos pos)
{
    if (n == 1)
        return v[0];
    cc_expr *e = new_expr(C, CC_E_TUPLE, pos);
    e->u.tuple.n = n;
    e->u.tuple.elems = v;
    return e;
}

static cc_expr **clone_tail(cc *C, cc_expr *const *t, uint32_t n, uint32_t extra)
{
    cc_expr **v = cc_array(C, n + extra, sizeof *v);
    for (uint32_t i = 0; i < n; i++)
        v[i] = cc_clone(C, t[i]);
    return v;
}

static void push_let(cc *C, ps_blk *B, const cc_let *l)
{
    B->b->lets = cc_grow(C, B->b->lets, B->b->n_lets, &B->cap, sizeof *B->b->lets);
    B->b->lets[B->b->n_lets++] = *l;
}

/* let (names...) = value, rebinding vars (assign) or new hidden names. */
static void push_bind(cc *C, ps_blk *B, const char **names, uint32_t n, cc_expr *value, bool assign, cc_pos pos)
{
    cc_let l = {.pos = pos, .n_names = n, .names = names, .value = value, .assign = assign};
    l.name_pos = cc_array(C, n, sizeof *l.name_pos);
    for (uint32_t i = 0; i < n; i++)
        l.name_pos[i] = pos;
    push_let(C, B, &l);
}

static void conv_into(cc *C, ps_blk *B, const ps_list *L, uint32_t from, const ps_k *K, const ps_r *R);

static cc_ablock *conv(cc *C, const ps_list *L, const ps_k *K, const ps_r *R)
{
    ps_blk B = {cc_alloc(C, sizeof(cc_ablock)), 0};
    B.b->pos = L->pos;
    conv_into(C, &B, L, 0, K, R);
    return B.b;
}

static const ps_list empty_list;

/* `return v`: the function's value, or (in a loop) the loop's values with
 * its go flag false and v as the returned values. */
static void conv_return(cc *C, ps_blk *B, cc_expr *v, cc_pos pos, const ps_r *R)
{
    if (R->kind == R_NONE)
        cc_error(C, pos, TFVM_ERR_SYNTAX, "'return' cannot be used inside an expression");
    if (R->kind == R_FUNC) {
        B->b->result = v;
        return;
    }
    cc_expr **t = clone_tail(C, R->tail, R->n_tail, R->n_rv);
    if (R->n_rv == 1) {
        t[R->n_tail] = v;
    } else if (v->kind == CC_E_TUPLE && v->u.tuple.n == R->n_rv) {
        for (uint32_t k = 0; k < R->n_rv; k++)
            t[R->n_tail + k] = v->u.tuple.elems[k];
    } else {
        const char **names = cc_array(C, R->n_rv, sizeof *names);
        for (uint32_t k = 0; k < R->n_rv; k++) {
            names[k] = hidden(C, "ret.part");
            t[R->n_tail + k] = var_ref(C, names[k], pos);
        }
        push_bind(C, B, names, R->n_rv, v, false, pos);
    }
    B->b->result = tuple_of(C, t, R->n_tail + R->n_rv, pos);
}

/* `break` or `continue`: the block gives what the loop (or the flagged if
 * around it, conv_if_flag) takes for it. */
static void conv_jump(cc *C, ps_blk *B, const ps_jt *j, cc_pos pos)
{
    B->b->result = tuple_of(C, clone_tail(C, j->tail, j->n, 0), j->n, pos);
}

/* The end of a statement list, reached by falling through. */
static void conv_end(cc *C, ps_blk *B, const ps_list *L, const ps_k *K, const ps_r *R)
{
    cc_expr *v = L->value ? cc_clone(C, L->value) : NULL;
    switch (K->kind) {
    case K_VALUE:
    case K_FUNC:
        if (!v && L->n && L->s[L->n - 1]->kind == S_EXPR)
            cc_error(C, L->end, TFVM_ERR_SYNTAX,
                     "expected the %s value before '}' (the ';' after the last expression drops its value)",
                     K->kind == K_FUNC && R->kind == R_FUNC ? "function's" : "block's");
        if (!v)
            cc_error(C, L->end, TFVM_ERR_SYNTAX,
                     K->kind == K_FUNC && R->kind == R_FUNC
                         ? "expected the function's value or 'return' before '}' (a function ends with its value)"
                         : "expected the block's value before '}' (a block ends with an expression)");
        B->b->result = v;
        return;
    case K_TAIL:
        if (v)
            cc_error(C, v->start, TFVM_ERR_SYNTAX, "this value is not used (end the expression with ';')");
        B->b->result = tuple_of(C, clone_tail(C, K->tail, K->n_tail, 0), K->n_tail, L->end);
        return;
    case K_SEQ:
        if (v)
            cc_error(C, v->start, TFVM_ERR_SYNTAX, "this value is not used (end the expression with ';')");
        conv_into(C, B, K->rest, K->from, K->up, R);
        return;
    }
}

/* A literal-only expression (0, -1, 2 * 8): used in place rather than bound,
 * so that it takes its dtype from where it is used. */
static bool lit_only(const cc_expr *e)
{
    switch (e->kind) {
    case CC_E_INT:
    case CC_E_FLOAT: return true;
    case CC_E_UNARY: return lit_only(e->u.op.a);
    case CC_E_BINARY: return lit_only(e->u.op.a) && lit_only(e->u.op.b);
    default: return false;
    }
}

static cc_expr *zero_of(cc *C, const cc_vtype *t, cc_pos pos)
{
    if (t->dtype == TFVM_BOOL)
        return bool_lit(C, false, pos);
    cc_expr *e = new_expr(C, isa_dtype_float(t->dtype) ? CC_E_FLOAT : CC_E_INT, pos);
    e->u.lit.suffix = t->dtype;
    return e;
}

/* `FLAG && cond` (the loop's own flags: no break happened, no return). */
static cc_expr *and_flag(cc *C, const char *flag, cc_expr *cond)
{
    cc_expr *a = new_expr(C, CC_E_BINARY, cond->start);
    a->start = cond->start;
    a->u.op.op = CC_T_AND;
    a->u.op.a = var_ref(C, flag, cond->start);
    a->u.op.b = cond;
    return a;
}

/* Loop variable k of loop e: a bool flag, true at first; its value after
 * an iteration that goes on, returns, breaks (tails[0..2][k]) is vals[..]. */
static const char *flag_var(cc *C, cc_expr *e, uint32_t k, const char *what, cc_expr **const tails[3],
                            const bool vals[3], cc_pos pos)
{
    cc_loopvar *v = &e->u.loop.vars[k];
    v->name = hidden(C, what);
    v->pos = pos;
    v->init = bool_lit(C, true, pos);
    for (int t = 0; t < 3; t++)
        tails[t][k] = bool_lit(C, vals[t], pos);
    return v->name;
}

/* while COND { body } / for i in a..b { body } as a loop expression whose
 * variables are [i,] the outer vars the body assigns [, brk] [, go, returned
 * values]: `brk` is false after a break, `go` after a return, and the
 * condition tests them first, so the loop leaves by its one EXIT. */
static void conv_loop(cc *C, ps_blk *B, const ps_list *L, uint32_t i, const ps_k *K, const ps_r *R)
{
    const ps_stmt *s = L->s[i];
    ps *P = P_of(C);
    cc_func *fn = P->fn;
    bool is_for = s->kind == S_FOR, ret = s->returns, brk = s->own & J_BRK;
    uint32_t na = s->assigned.n, nr = ret ? fn->n_results : 0;
    uint32_t nv = (is_for ? 1 : 0) + na + (brk ? 1 : 0) + (ret ? 1 + nr : 0);
    /* nv == 0: a bare loop; only a feed (in it, or in what it calls) can end
     * it, which the checker knows after the calls are resolved (host.c) */
    if (ret)
        for (uint32_t k = 0; k < nr; k++)
            if (fn->results[k].type.tensor)
                cc_error(C, s->pos, TFVM_ERR_TYPE,
                         "'return' inside a loop needs scalar results ('%s' returns a tensor)", fn->name);
    cc_expr *end = NULL;
    if (is_for) {
        end = cc_clone(C, s->to);
        if (!lit_only(end)) { /* the bound is computed once, before the loop */
            const char **nm = cc_array(C, 1, sizeof *nm);
            nm[0] = hidden(C, "for.end");
            push_bind(C, B, nm, 1, end, false, s->to->start);
            end = var_ref(C, nm[0], s->to->start);
        }
    }
    cc_expr *e = new_expr(C, CC_E_WHILE, s->pos);
    e->u.loop.n_vars = nv;
    e->u.loop.bare = nv == 0;
    e->u.loop.for_var = is_for ? s->ivar : NULL;
    e->u.loop.vars = cc_array(C, nv, sizeof(cc_loopvar));
    const char **names = cc_array(C, nv, sizeof *names);
    cc_expr **tail = cc_array(C, nv, sizeof *tail), **rtail = cc_array(C, nv, sizeof *rtail);
    cc_expr **btail = cc_array(C, nv, sizeof *btail);
    uint32_t k = 0;
    const char *go = NULL, *bgo = NULL;
    if (is_for) {
        cc_loopvar *v = &e->u.loop.vars[k];
        v->name = s->ivar;
        v->pos = s->ivar_pos;
        v->init = cc_clone(C, s->from);
        names[k] = "_";
        cc_expr *inc = new_expr(C, CC_E_BINARY, s->ivar_pos);
        inc->u.op.op = CC_T_PLUS;
        inc->u.op.a = var_ref(C, s->ivar, s->ivar_pos);
        inc->u.op.b = new_expr(C, CC_E_INT, s->ivar_pos);
        inc->u.op.b->u.lit.mag = 1;
        tail[k] = inc;
        rtail[k] = var_ref(C, s->ivar, s->ivar_pos);
        btail[k] = var_ref(C, s->ivar, s->ivar_pos);
        k++;
    }
    for (uint32_t j = 0; j < na; j++, k++) {
        cc_loopvar *v = &e->u.loop.vars[k];
        v->name = names[k] = s->assigned.v[j];
        v->pos = s->pos;
        v->init = var_ref(C, v->name, s->pos);
        v->assign = true;
        tail[k] = var_ref(C, v->name, s->pos);
        rtail[k] = var_ref(C, v->name, s->pos);
        btail[k] = var_ref(C, v->name, s->pos);
    }
    cc_expr **tails[3] = {tail, rtail, btail};
    if (brk) { /* dropped after the loop */
        bgo = flag_var(C, e, k, "brk.go", tails, (const bool[3]){true, true, false}, s->pos);
        names[k++] = "_";
    }
    if (ret) {
        go = names[k] = flag_var(C, e, k, "ret.go", tails, (const bool[3]){true, false, true}, s->pos);
        k++;
        for (uint32_t j = 0; j < nr; j++, k++) {
            cc_loopvar *v = &e->u.loop.vars[k];
            v->name = names[k] = hidden(C, "ret.val");
            v->pos = s->pos;
            v->has_type = true;
            v->type = fn->results[j].type;
            v->init = zero_of(C, &fn->results[j].type, s->pos);
            tail[k] = var_ref(C, v->name, s->pos);
            btail[k] = var_ref(C, v->name, s->pos);
        }
    }
    cc_expr *cond;
    if (is_for) {
        cond = new_expr(C, CC_E_BINARY, s->ivar_pos);
        cond->u.op.op = CC_T_LT;
        cond->u.op.a = var_ref(C, s->ivar, s->ivar_pos);
        cond->u.op.b = end;
    } else {
        cond = cc_clone(C, s->e);
    }
    /* brk && go && COND: COND is not evaluated after a break or a return */
    if (ret)
        cond = and_flag(C, go, cond);
    if (brk)
        cond = and_flag(C, bgo, cond);
    e->u.loop.cond = cond;
    ps_k bk = {.kind = K_TAIL, .tail = tail, .n_tail = nv};
    ps_jt jb = {btail, nv}, jc = {tail, nv};
    ps_r br = {.kind = R_LOOP, .tail = rtail, .n_tail = nv - nr, .n_rv = nr};
    if (!ret)
        br = *R;
    br.brk = brk ? &jb : NULL;
    br.cont = s->own & J_CONT ? &jc : NULL;
    e->u.loop.body = conv(C, s->a, &bk, &br);
    push_bind(C, B, names, nv, e, true, s->pos);
    if (!ret) {
        conv_into(C, B, L, i + 1, K, R);
        return;
    }
    /* after the loop: the rest of the block if it ended normally, else the return */
    cc_expr *sel = new_expr(C, CC_E_IF, s->pos);
    sel->u.cond.cond = var_ref(C, go, s->pos);
    ps_blk Bt = {cc_alloc(C, sizeof(cc_ablock)), 0}, Be = {cc_alloc(C, sizeof(cc_ablock)), 0};
    Bt.b->pos = Be.b->pos = s->pos;
    conv_into(C, &Bt, L, i + 1, K, R);
    cc_expr **rv = cc_array(C, nr, sizeof *rv);
    for (uint32_t j = 0; j < nr; j++)
        rv[j] = var_ref(C, names[nv - nr + j], s->pos);
    conv_return(C, &Be, tuple_of(C, rv, nr, s->pos), s->pos, R);
    sel->u.cond.then = Bt.b;
    sel->u.cond.els = Be.b;
    B->b->result = sel;
}

static bool has_jump(const ps_list *L)
{
    for (uint32_t i = 0; L && i < L->n; i++)
        if (jumps_out(L->s[i]))
            return true;
    return false;
}

/* A branch that jumps (returns, breaks, continues) on some paths and falls
 * through on others: the rest of the block would have to follow it in two
 * places. */
static bool partial_jump(const ps_stmt *s)
{
    return (has_jump(s->a) && !always_jumps(s->a)) || (has_jump(s->b) && !always_jumps(s->b));
}

static bool scalar_results(const cc_func *f)
{
    for (uint32_t k = 0; f && k < f->n_results; k++)
        if (f->results[k].type.tensor)
            return false;
    return f != NULL;
}

static cc_expr *i32_lit(cc *C, uint64_t v, cc_pos pos)
{
    cc_expr *e = new_expr(C, CC_E_INT, pos);
    e->u.lit.mag = v;
    e->u.lit.suffix = TFVM_I32;
    return e;
}

/* The jumps out of a flagged if (conv_if_flag), by their code (0 = none). */
enum { F_RET = 1, F_BRK, F_CONT, F_KINDS };

/* After a flagged if: the block's value for the jump of code `kind`. */
static void conv_flag_jump(cc *C, ps_blk *B, int kind, cc_expr *retval, cc_pos pos, const ps_r *R)
{
    if (kind == F_RET)
        conv_return(C, B, retval, pos, R);
    else
        conv_jump(C, B, kind == F_BRK ? R->brk : R->cont, pos);
}

/* `if c { ... return v; ... }` (or break, continue) where a branch may fall
 * through: the if gives the outer variables it assigns, a flag and the
 * returned values (as a loop with return does), and the rest of the block
 * runs once, when the flag says no jump happened. The flag is a bool (true:
 * none) when one kind of jump can happen, else an i32 code (0: none, then
 * F_RET, F_BRK, F_CONT), which the rest of the block tests in turn. */
static void conv_if_flag(cc *C, ps_blk *B, const ps_list *L, uint32_t i, const ps_k *K, const ps_r *R)
{
    const ps_stmt *s = L->s[i];
    cc_func *fn = P_of(C)->fn;
    bool has[F_KINDS] = {false, s->returns, s->jumps & J_BRK, s->jumps & J_CONT};
    int n_kinds = has[F_RET] + has[F_BRK] + has[F_CONT];
    uint32_t na = s->assigned.n, nr = has[F_RET] ? fn->n_results : 0, nv = na + 1 + nr;
    const char **names = cc_array(C, nv, sizeof *names);
    cc_expr **tail[F_KINDS];
    for (int j = 0; j < F_KINDS; j++)
        tail[j] = cc_array(C, nv, sizeof **tail);
    for (uint32_t j = 0; j < na; j++) {
        names[j] = s->assigned.v[j];
        for (int f = 0; f < F_KINDS; f++)
            tail[f][j] = var_ref(C, names[j], s->pos);
    }
    const char *flag = names[na] = hidden(C, n_kinds == 1 && has[F_RET] ? "ret.go" : "jump.go");
    for (int f = 0; f < F_KINDS; f++) {
        tail[f][na] = n_kinds == 1 ? bool_lit(C, f == 0, s->pos) : i32_lit(C, (uint64_t)f, s->pos);
        for (uint32_t j = 0; j < nr && f != F_RET; j++) /* no value returned: zeros */
            tail[f][na + 1 + j] = zero_of(C, &fn->results[j].type, s->pos);
    }
    for (uint32_t j = 0; j < nr; j++)
        names[na + 1 + j] = hidden(C, "ret.val");
    cc_expr *e = new_expr(C, CC_E_IF, s->pos);
    e->u.cond.cond = cc_clone(C, s->e);
    ps_k k = {.kind = K_TAIL, .tail = tail[0], .n_tail = nv};
    ps_jt jb = {tail[F_BRK], nv}, jc = {tail[F_CONT], nv};
    ps_r r = {.kind = R_LOOP, .tail = tail[F_RET], .n_tail = na + 1, .n_rv = nr,
              .brk = has[F_BRK] ? &jb : NULL, .cont = has[F_CONT] ? &jc : NULL};
    e->u.cond.then = conv(C, s->a, &k, &r);
    e->u.cond.els = conv(C, s->b ? s->b : &empty_list, &k, &r);
    if (!s->b)
        e->u.cond.els->pos = s->pos;
    push_bind(C, B, names, nv, e, true, s->pos);
    cc_expr **rv = cc_array(C, nr ? nr : 1, sizeof *rv);
    for (uint32_t j = 0; j < nr; j++)
        rv[j] = var_ref(C, names[na + 1 + j], s->pos);
    cc_expr *retval = nr ? tuple_of(C, rv, nr, s->pos) : NULL;
    /* if no jump { rest } else if code == F_RET { return } else if ... */
    int cases[F_KINDS], n_cases = 0;
    for (int f = 0; f < F_KINDS; f++)
        if (f == 0 || has[f])
            cases[n_cases++] = f;
    ps_blk at_b = *B;
    for (int c = 0; c < n_cases; c++) {
        int f = cases[c];
        if (c == n_cases - 1) { /* the last case needs no test */
            conv_flag_jump(C, &at_b, f, retval, s->pos, R);
            break;
        }
        cc_expr *test = var_ref(C, flag, s->pos);
        if (n_kinds > 1) {
            test = new_expr(C, CC_E_BINARY, s->pos);
            test->u.op.op = CC_T_EQ;
            test->u.op.a = var_ref(C, flag, s->pos);
            test->u.op.b = i32_lit(C, (uint64_t)f, s->pos);
        }
        cc_expr *sel = new_expr(C, CC_E_IF, s->pos);
        sel->u.cond.cond = test;
        ps_blk Bt = {cc_alloc(C, sizeof(cc_ablock)), 0}, Be = {cc_alloc(C, sizeof(cc_ablock)), 0};
        Bt.b->pos = Be.b->pos = s->pos;
        if (f == 0)
            conv_into(C, &Bt, L, i + 1, K, R);
        else
            conv_flag_jump(C, &Bt, f, retval, s->pos, R);
        sel->u.cond.then = Bt.b;
        sel->u.cond.els = Be.b;
        at_b.b->result = sel;
        at_b = Be;
    }
}

static void conv_into(cc *C, ps_blk *B, const ps_list *L, uint32_t from, const ps_k *K, const ps_r *R)
{
    for (uint32_t i = from; i < L->n; i++) {
        const ps_stmt *s = L->s[i];
        switch (s->kind) {
        case S_LET:
        case S_ASSIGN: {
            cc_let l = s->let;
            l.value = cc_clone(C, s->let.value);
            push_let(C, B, &l);
            break;
        }
        case S_EXPR: {
            const char **nm = cc_array(C, 1, sizeof *nm);
            nm[0] = "_";
            push_bind(C, B, nm, 1, cc_clone(C, s->e), false, s->pos);
            break;
        }
        case S_RETURN: conv_return(C, B, cc_clone(C, s->e), s->pos, R); return;
        case S_BREAK: conv_jump(C, B, R->brk, s->pos); return;
        case S_CONTINUE: conv_jump(C, B, R->cont, s->pos); return;
        case S_WHILE:
        case S_FOR: conv_loop(C, B, L, i, K, R); return;
        case S_IF: {
            if (!s->value && jumps_out(s) && partial_jump(s) && (!s->returns || scalar_results(P_of(C)->fn))) {
                conv_if_flag(C, B, L, i, K, R);
                return;
            }
            cc_expr *e = new_expr(C, CC_E_IF, s->pos);
            e->u.cond.cond = cc_clone(C, s->e);
            if (s->value || jumps_out(s)) {
                /* the rest of the block goes into both branches (a returning
                 * branch never reaches it) */
                ps_k rest = {.kind = K_SEQ, .rest = L, .from = i + 1, .up = K};
                const ps_k *k = s->value ? K : &rest;
                e->u.cond.then = conv(C, s->a, k, R);
                e->u.cond.els = conv(C, s->b ? s->b : &empty_list, k, R);
                if (!s->b)
                    e->u.cond.els->pos = s->pos;
                B->b->result = e;
                return;
            }
            uint32_t n = s->assigned.n;
            cc_expr **tail = cc_array(C, n ? n : 1, sizeof *tail);
            const char **names = cc_array(C, n ? n : 1, sizeof *names);
            for (uint32_t j = 0; j < n; j++) {
                names[j] = s->assigned.v[j];
                tail[j] = var_ref(C, names[j], s->pos);
            }
            if (!n) { /* nothing assigned: the if runs for what it calls */
                names[0] = "_";
                tail[0] = bool_lit(C, false, s->pos);
            }
            ps_k k = {.kind = K_TAIL, .tail = tail, .n_tail = n ? n : 1};
            e->u.cond.then = conv(C, s->a, &k, R);
            e->u.cond.els = conv(C, s->b ? s->b : &empty_list, &k, R);
            push_bind(C, B, names, n ? n : 1, e, n > 0, s->pos);
            break;
        }
        }
    }
    conv_end(C, B, L, K, R);
}

/* An `if` statement used as an operand (`if a { 1 } else { 2 } + 3`). */
static cc_expr *if_expr(cc *C, ps_stmt *s)
{
    if (s->assigned.n || jumps_out(s))
        cc_error(C, s->pos, TFVM_ERR_SYNTAX,
                 "an 'if' used as a value cannot assign variables declared outside it, return, break or continue");
    s->value = true;
    ps_list L = {.pos = s->pos, .end = s->pos, .n = 1, .cap = 1, .s = &s};
    ps_k k = {.kind = K_VALUE};
    ps_r r = {.kind = R_NONE};
    cc_ablock *b = conv(C, &L, &k, &r);
    return b->result;
}

/* A block inside an expression (if/while expression): no assignment to
 * names outside it, no return. */
static cc_ablock *parse_block(cc *C, const char *what)
{
    ps_stmt holder = {0};
    push_frame(C, true, &holder);
    uint32_t errors = C->n_errors;
    ps_list *L = parse_list(C, what);
    P_of(C)->n_frames--;
    ps_k k = {.kind = K_VALUE};
    ps_r r = {.kind = R_NONE};
    if (C->n_errors != errors) { /* a statement was skipped: its function is not checked */
        cc_ablock *b = cc_alloc(C, sizeof *b);
        b->pos = L->pos;
        b->result = bool_lit(C, false, L->pos);
        return b;
    }
    return conv(C, L, &k, &r);
}

/* ---- Functions and constants -------------------------------------------------------------- */

/* Whether tokens [from, to) name `name`. */
static bool mentions(const cc *C, uint32_t from, uint32_t to, const char *name)
{
    size_t n = strlen(name);
    for (uint32_t t = from; t < to; t++)
        if (C->toks[t].kind == CC_T_IDENT && C->toks[t].len == n && memcmp(C->toks[t].text, name, n) == 0)
            return true;
    return false;
}

static void parse_fn(cc *C)
{
    ps *P = P_of(C);
    if (!at(C, CC_T_FN))
        expected(C, "'fn' (a function definition) or 'const'");
    next(C);
    const cc_tok *n = expect_name(C, "the function's name");
    cc_func *f = cc_alloc(C, sizeof *f);
    f->name = tok_str(C, n);
    f->pos = n->pos;
    P->fn = f;
    expect(C, CC_T_LPAREN, "'(' and the parameters");
    uint32_t cap = 0;
    P->n_ents = 0;
    P->n_frames = 0;
    for (uint32_t k = 0; k < P->n_consts; k++)
        declare_name(C, P->consts[k].let.names[0], false);
    if (!accept(C, CC_T_RPAREN)) {
        for (;;) {
            const cc_tok *p = expect_name(C, "a parameter name");
            f->params = cc_grow(C, f->params, f->n_params, &cap, sizeof *f->params);
            cc_param *q = &f->params[f->n_params++];
            q->name = tok_str(C, p);
            q->pos = p->pos;
            expect(C, CC_T_COLON, "':' and the parameter's type");
            q->type = parse_type(C);
            declare_name(C, q->name, false);
            if (accept(C, CC_T_RPAREN))
                break;
            expect(C, CC_T_COMMA, "',' or ')' after a parameter");
        }
    }
    expect(C, CC_T_ARROW, "'->' and the result type");
    cap = 0;
    if (accept(C, CC_T_LPAREN)) {
        for (;;) {
            f->results = cc_grow(C, f->results, f->n_results, &cap, sizeof *f->results);
            cc_param *r = &f->results[f->n_results++];
            r->pos = cur(C)->pos;
            if (at(C, CC_T_IDENT) && peek(C, 1)->kind == CC_T_COLON) {
                const cc_tok *rn = expect_name(C, "a result name");
                r->name = tok_str(C, rn);
                next(C);
            }
            r->type = parse_type(C);
            if (accept(C, CC_T_RPAREN))
                break;
            expect(C, CC_T_COMMA, "',' or ')' after a result type");
        }
    } else {
        f->results = cc_alloc(C, sizeof *f->results);
        f->results[0].pos = cur(C)->pos;
        f->results[0].type = parse_type(C);
        f->n_results = 1;
    }
    P->fn = f;
    uint32_t first_tok = C->tp;
    ps_list *L = parse_list(C, "'{' to start the function body");
    ps_k k = {.kind = K_FUNC};
    ps_r r = {.kind = R_FUNC};
    if (f->broken) { /* a statement was skipped: the function is not checked */
        f->body = cc_alloc(C, sizeof *f->body);
        f->body->pos = L->pos;
        f->body->result = bool_lit(C, false, L->pos);
    } else {
        f->body = conv(C, L, &k, &r);
    }
    /* constants: a binding at the top of each function that mentions them
     * (or mentions a constant whose value names them), in their order */
    uint32_t n_used = 0;
    for (uint32_t c = 0; c < P->n_consts; c++)
        P->consts[c].used = mentions(C, first_tok, C->tp, P->consts[c].let.names[0]);
    for (uint32_t c = P->n_consts; c-- > 0;)
        for (uint32_t e = 0; P->consts[c].used && e < c; e++)
            P->consts[e].used |= mentions(C, P->consts[c].from, P->consts[c].to, P->consts[e].let.names[0]);
    for (uint32_t c = 0; c < P->n_consts; c++)
        n_used += P->consts[c].used;
    if (n_used) {
        cc_ablock *b = f->body;
        cc_let *lets = cc_array(C, b->n_lets + n_used, sizeof *lets);
        uint32_t j = 0;
        for (uint32_t c = 0; c < P->n_consts; c++) {
            if (!P->consts[c].used)
                continue;
            lets[j] = P->consts[c].let;
            lets[j].value = cc_clone(C, P->consts[c].let.value);
            lets[j].synth = true;
            j++;
        }
        if (b->n_lets)
            memcpy(lets + j, b->lets, b->n_lets * sizeof *lets);
        b->lets = lets;
        b->n_lets += n_used;
    }
    cc_module *m = &C->mod;
    m->funcs = cc_grow(C, m->funcs, m->n_funcs, &C->funcs_cap, sizeof *m->funcs);
    f->index = m->n_funcs;
    m->funcs[m->n_funcs++] = f;
}

/* const NAME [: TYPE] = VALUE;  (a literal, a tensor literal or load(...)) */
static void parse_const(cc *C)
{
    ps *P = P_of(C);
    const cc_tok *kw = next(C);
    P->fn = NULL;
    P->n_ents = 0;
    P->n_frames = 0;
    ps_stmt holder = {0};
    push_frame(C, true, &holder); /* no function around: nothing to assign, no return */
    cc_let l = {.pos = kw->pos};
    const cc_tok *n = expect_name(C, "the constant's name");
    l.names = cc_alloc(C, sizeof *l.names);
    l.name_pos = cc_alloc(C, sizeof *l.name_pos);
    l.names[0] = tok_str(C, n);
    l.name_pos[0] = n->pos;
    l.n_names = 1;
    if (accept(C, CC_T_COLON)) {
        l.has_type = true;
        l.type_pos = cur(C)->pos;
        l.type = parse_type(C);
    }
    expect(C, CC_T_ASSIGN, "'=' and the constant's value");
    for (uint32_t k = 0; k < P->n_consts; k++) /* a constant may use the earlier ones */
        declare_name(C, P->consts[k].let.names[0], false);
    uint32_t from = C->tp;
    l.value = parse_expr(C);
    uint32_t to = C->tp;
    expect(C, CC_T_SEMI, "';' after the constant's value");
    P->n_frames = 0;
    for (uint32_t k = 0; k < P->n_consts; k++)
        if (strcmp(P->consts[k].let.names[0], l.names[0]) == 0)
            cc_error(C, n->pos, TFVM_ERR_TYPE, "constant '%s' is defined twice", l.names[0]);
    P->consts = cc_grow(C, P->consts, P->n_consts, &P->cap_consts, sizeof *P->consts);
    P->consts[P->n_consts++] = (ps_const){l, from, to, false};
}

static bool guarded_def(cc *C)
{
    jmp_buf jb, *outer = C->jb;
    uint32_t depth = C->depth;
    C->jb = &jb;
    if (setjmp(jb) == 0) {
        if (at(C, CC_T_CONST))
            parse_const(C);
        else
            parse_fn(C);
        C->jb = outer;
        return true;
    }
    C->jb = outer;
    if (C->fatal)
        longjmp(*outer, 1);
    C->depth = depth;
    C->defs_broken = true;
    return false;
}

void cc_parse(cc *C)
{
    ps P = {0};
    C->parse_state = &P;
    C->tp = 0;
    while (!at(C, CC_T_EOF)) {
        if (guarded_def(C))
            continue;
        /* skip to the next definition */
        next(C);
        while (!at(C, CC_T_EOF) && !((at(C, CC_T_FN) || at(C, CC_T_CONST)) && cur(C)->depth == 0))
            next(C);
    }
    C->parse_state = NULL;
}
