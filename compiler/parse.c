/* compiler/parse.c — recursive-descent parser: tokens to the AST of
 * compiler.h (grammar in docs/language.md). Syntax errors say what was
 * expected and what was found, at the found token. */
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
    case CC_T_WHILE: return parse_while(C);
    case CC_T_LET:
        cc_error(C, t->pos, TFVM_ERR_SYNTAX, "'let' is only allowed at the start of a block, before its value");
    default: expected(C, "an expression");
    }
}

static cc_expr *parse_unary(cc *C)
{
    const cc_tok *t = cur(C);
    if (t->kind != CC_T_MINUS && t->kind != CC_T_NOT) {
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

typedef enum { P_OR = 1, P_AND, P_CMP, P_ADD, P_MUL } prec;

static int binary_prec(cc_tk k)
{
    switch (k) {
    case CC_T_OR: return P_OR;
    case CC_T_AND: return P_AND;
    case CC_T_LT: case CC_T_LE: case CC_T_GT: case CC_T_GE: case CC_T_EQ: case CC_T_NE: return P_CMP;
    case CC_T_PLUS: case CC_T_MINUS: return P_ADD;
    case CC_T_STAR: case CC_T_SLASH: case CC_T_PERCENT: return P_MUL;
    default: return 0;
    }
}

/* Precedence climbing; comparisons do not chain (a < b < c is an error). */
static cc_expr *parse_binary(cc *C, int min_prec)
{
    cc_expr *lhs = parse_unary(C);
    for (;;) {
        const cc_tok *t = cur(C);
        int p = binary_prec((cc_tk)t->kind);
        if (!p || p < min_prec)
            return lhs;
        next(C);
        enter(C);
        cc_expr *rhs = parse_binary(C, p + 1);
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

static cc_expr *parse_expr(cc *C)
{
    enter(C);
    cc_expr *e = parse_binary(C, P_OR);
    leave(C);
    return e;
}

/* ---- Blocks and functions ------------------------------------------------------------ */

static void parse_let(cc *C, cc_let *l)
{
    l->pos = next(C)->pos; /* 'let' */
    uint32_t cap = 0, cap2 = 0;
    if (accept(C, CC_T_LPAREN)) {
        for (;;) {
            const cc_tok *n = expect_name(C, "a name in the 'let' pattern");
            l->names = cc_grow(C, l->names, l->n_names, &cap, sizeof *l->names);
            l->name_pos = cc_grow(C, l->name_pos, l->n_names, &cap2, sizeof *l->name_pos);
            l->names[l->n_names] = tok_str(C, n);
            l->name_pos[l->n_names++] = n->pos;
            if (accept(C, CC_T_RPAREN))
                break;
            expect(C, CC_T_COMMA, "',' or ')' in the 'let' pattern");
        }
    } else {
        const cc_tok *n = expect_name(C, "a name or '(' after 'let'");
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
    expect(C, CC_T_ASSIGN, "'=' in 'let'");
    l->value = parse_expr(C);
    expect(C, CC_T_SEMI, "';' after the 'let' value");
}

static cc_ablock *parse_block(cc *C, const char *what)
{
    cc_ablock *b = cc_alloc(C, sizeof *b);
    b->pos = expect(C, CC_T_LBRACE, what)->pos;
    enter(C);
    uint32_t cap = 0;
    while (at(C, CC_T_LET)) {
        b->lets = cc_grow(C, b->lets, b->n_lets, &cap, sizeof *b->lets);
        parse_let(C, &b->lets[b->n_lets++]);
    }
    if (at(C, CC_T_RBRACE))
        cc_error(C, cur(C)->pos, TFVM_ERR_SYNTAX, "expected the block's value before '}' (a block ends with an expression)");
    b->result = parse_expr(C);
    if (at(C, CC_T_SEMI))
        cc_error(C, cur(C)->pos, TFVM_ERR_SYNTAX, "unexpected ';' after the block's value (only 'let' ends with ';')");
    expect(C, CC_T_RBRACE, "'}' after the block's value");
    leave(C);
    return b;
}

static void parse_fn(cc *C)
{
    if (!at(C, CC_T_FN))
        expected(C, "'fn' (a function definition)");
    next(C);
    const cc_tok *n = expect_name(C, "the function's name");
    cc_func *f = cc_alloc(C, sizeof *f);
    f->name = tok_str(C, n);
    f->pos = n->pos;
    expect(C, CC_T_LPAREN, "'(' and the parameters");
    uint32_t cap = 0;
    if (!accept(C, CC_T_RPAREN)) {
        for (;;) {
            const cc_tok *p = expect_name(C, "a parameter name");
            f->params = cc_grow(C, f->params, f->n_params, &cap, sizeof *f->params);
            cc_param *q = &f->params[f->n_params++];
            q->name = tok_str(C, p);
            q->pos = p->pos;
            expect(C, CC_T_COLON, "':' and the parameter's type");
            q->type = parse_type(C);
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
    f->body = parse_block(C, "'{' to start the function body");
    cc_module *m = &C->mod;
    m->funcs = cc_grow(C, m->funcs, m->n_funcs, &C->funcs_cap, sizeof *m->funcs);
    f->index = m->n_funcs;
    m->funcs[m->n_funcs++] = f;
}

void cc_parse(cc *C)
{
    C->tp = 0;
    while (!at(C, CC_T_EOF))
        parse_fn(C);
}
