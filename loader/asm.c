/* loader/asm.c — the .tfasm assembler (docs/asm.md): text -> verified isa_program.
 * The text is tokenized, parsed into flat temporary records, and only then
 * resolved (names, regions, sites), so forward references work everywhere. */
#include "util/half.h"
#include "loader.h"

#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Tokens ----------------------------------------------------------------
 * Punctuation tokens use their character as kind; the named kinds are below
 * every printable character. Newlines are tokens only outside ( ) and [ ], so
 * long input lists and tensor values may span lines. */
enum { TK_EOF = 0, TK_NL, TK_IDENT, TK_NUM, TK_LABEL, TK_ARROW, TK_QNAME };

typedef struct as_tok {
    int kind;
    uint32_t len;
    const char *s;
    uint32_t line, col;
} as_tok;

/* A source variable an instruction's output carries: `var "i"`, `var "x":1`. */
typedef struct as_var {
    uint32_t inst, out;  /* parse index of the instruction, its output */
    as_tok name;
} as_var;

/* A growable array of fixed-size records, allocated through the user's hook. */
typedef struct as_vec {
    void *data;
    size_t n, cap, elem;
} as_vec;

/* Every name that is defined: what kind of name, in which scope (a region
 * for instruction names), and what it names. Sorted once the text is read and
 * then searched: no input can make that quadratic (as colliding hashes could). */
enum { NS_REGION = 1, NS_ENTRY, NS_LABEL, NS_INST };

typedef struct as_name {
    const char *s;
    uint32_t len, kind, scope, value; /* value: region or instruction, in textual order */
} as_name;

typedef struct as_region {
    uint8_t kind;
    uint32_t parent;     /* region index; ISA_NONE for ROOT/FUNC or not yet resolved */
    as_tok kw;           /* "entry"/"func"/"loop": position of the header */
    as_tok name;         /* region name */
    as_tok entry;        /* ROOT: the entry's name (usually equal to name) */
    as_tok parent_name;  /* top-level loop: `in PARENT` (kind TK_EOF if none) */
    as_tok index_tok;    /* ROOT: `entry #K`, the entry's index (kind TK_EOF if none) */
    uint32_t index;
    uint32_t param_first, n_params, result_first, n_results; /* into params */
} as_region;

typedef struct as_param {
    as_tok name;
    uint8_t dtype, rank;
    bool shaped;         /* f32[?, 3] or f32[()]: rank ndim; f32[]: any rank */
    uint8_t ndim;
    int64_t dims[TFVM_MAX_RANK]; /* -1 = ? */
    as_tok dim_names[TFVM_MAX_RANK]; /* f32[batch, 3]: a symbolic dim's name (len 0 = none) */
    uint32_t seen_line, seen_col; /* results: where its RESULT is (0 = none yet) */
    bool has_default;    /* w: f32[2] = #K: a parameter's default, declared constant K */
    uint32_t dflt;
    as_tok dflt_tok;
} as_param;

typedef struct as_inst {
    uint16_t op, flags;
    uint32_t region;
    uint32_t n_in, n_ctl, port_first; /* ports[port_first .. +n_in+n_ctl) */
    uint32_t a, b;
    uint32_t site;       /* CALL/RETURN: the printed site id */
    uint32_t line, col;  /* debug location (the @L:C suffix) */
    as_tok origin, origin_op; /* from "NODE" "OP": the model's node (len 0 = none) */
    uint32_t final;      /* index in the program */
    bool ctab;           /* CONST #K: a = K, an entry of the declared constant table */
    bool imm_ctab;       /* constant operand #K: b = K (else b indexes P->consts) */
    uint32_t shape;      /* FEED: 1 + its shape's constant (P->consts, or the table when
                            shape_ctab); 0: none */
    bool shape_ctab;
    as_tok label;        /* TK_IDENT (a name), TK_LABEL (%N) or TK_EOF (none) */
    as_tok optok;        /* where messages about the instruction point */
    as_tok target;       /* ENTER/EXIT: the frame; CALL/RETURN: the callee */
} as_inst;

typedef struct as_port {
    uint32_t first, n;   /* refs[first .. first+n) */
} as_port;

typedef struct as_ref {
    as_tok at;           /* the reference's first token, for messages */
    as_tok qual;         /* region qualifier (kind TK_EOF if none) */
    as_tok name;         /* TK_IDENT or TK_LABEL */
    uint32_t out;
} as_ref;

typedef struct as_const {
    uint8_t dtype, rank;
    int64_t dims[TFVM_MAX_RANK];
    size_t off, nbytes;  /* into the data buffer */
} as_const;

typedef struct as_use {  /* one CALL/RETURN, for grouping by site id */
    uint32_t id, inst;
} as_use;

typedef struct as_edge {
    uint32_t src, out, dst, port, ref;
} as_edge;

typedef struct as_parser {
    const tfvm_allocator *alloc;
    const char *name;
    const char *text;
    size_t len;
    tfvm_error *err;
    tfvm_status st;
    size_t pos;          /* next token */
    unsigned depth;      /* nesting of loop blocks (bounded: recursion) */
    as_vec toks, regions, params, insts, ports, refs, consts, uses, edges, sites;
    as_vec decls;        /* declared constant table: `const #K` -> index into consts */
    as_vec names;        /* as_name, sorted by index_names() */
    as_vec vars;         /* as_var: `var "NAME"[:OUT]` suffixes */
    ut_buf data;         /* constant element bytes */
    uint32_t *order;     /* final index -> parse index */
    uint32_t *site_of;   /* parse index of a CALL/RETURN -> site index */
    uint32_t *entry_at;  /* entry index -> its ROOT region */
    as_tok source;       /* `source "FILE"` (kind TK_EOF if none) */
} as_parser;

#define AS_MAX_NAME 127
#define AS_MAX_NEST 200
#define AS_MAX_PORTS 65535u

static const as_tok no_tok = {TK_EOF, 0, "", 0, 0};

/* ---- Errors ------------------------------------------------------------------ */
static bool failv(as_parser *P, uint32_t line, uint32_t col, const char *fmt, va_list ap)
{
    if (P->st != TFVM_OK)
        return false;
    char msg[400];
    vsnprintf(msg, sizeof msg, fmt, ap);
    P->st = ut_err(P->err, TFVM_ERR_SYNTAX, "%s:%u:%u: %s", P->name, line, col, msg);
    return false;
}

static bool UT_PRINTF(3, 4) fail(as_parser *P, const as_tok *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    failv(P, at->line, at->col, fmt, ap);
    va_end(ap);
    return false;
}

static bool UT_PRINTF(4, 5) fail_at(as_parser *P, uint32_t line, uint32_t col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    failv(P, line, col, fmt, ap);
    va_end(ap);
    return false;
}

static bool nomem(as_parser *P)
{
    if (P->st == TFVM_OK)
        P->st = ut_err(P->err, TFVM_ERR_NOMEM, "%s: out of memory while assembling", P->name);
    return false;
}

/* A token as messages quote it: 'text' (shortened, escaped), or what it stands for. */
static const char *tdesc(const as_tok *t, char *buf, size_t size)
{
    if (t->kind == TK_EOF)
        return "end of file";
    if (t->kind == TK_NL)
        return "end of line";
    size_t o = 0;
    buf[o++] = '\'';
    for (uint32_t i = 0; i < t->len && o + 8 < size; i++) {
        unsigned char c = (unsigned char)t->s[i];
        if (i == 40) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (c >= 0x20 && c < 0x7f)
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
    }
    buf[o++] = '\'';
    buf[o] = '\0';
    return buf;
}
#define TDESC(t) tdesc((t), (char[64]){0}, 64)

/* ---- Arrays and the name table ---------------------------------------------- */
static void vec_init(as_vec *v, size_t elem)
{
    v->data = NULL;
    v->n = v->cap = 0;
    v->elem = elem;
}

static void vec_free(as_parser *P, as_vec *v)
{
    ut_free(P->alloc, v->data, v->cap * v->elem);
    v->data = NULL;
    v->n = v->cap = 0;
}

/* Appends one zeroed record; NULL (and P->st = NOMEM) on failure. The pointer
 * is only valid until the next push onto the same array. */
static void *vec_push(as_parser *P, as_vec *v)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 16, bytes;
        if (cap > UINT32_MAX || !ut_mul_ok(cap, v->elem, &bytes)) {
            nomem(P);
            return NULL;
        }
        void *d = ut_realloc(P->alloc, v->data, v->cap * v->elem, bytes);
        if (!d) {
            nomem(P);
            return NULL;
        }
        v->data = d;
        v->cap = cap;
    }
    void *e = (char *)v->data + v->n++ * v->elem;
    memset(e, 0, v->elem);
    return e;
}

#define VEC_AT(v, type, i) (&((type *)(v).data)[i])
#define TOK(i) VEC_AT(P->toks, as_tok, i)
#define REG(i) VEC_AT(P->regions, as_region, i)
#define PRM(i) VEC_AT(P->params, as_param, i)
#define INS(i) VEC_AT(P->insts, as_inst, i)
#define PORT(i) VEC_AT(P->ports, as_port, i)
#define REF(i) VEC_AT(P->refs, as_ref, i)
#define CST(i) VEC_AT(P->consts, as_const, i)

static bool name_add(as_parser *P, uint32_t kind, uint32_t scope, const as_tok *t, uint32_t value)
{
    as_name *n = vec_push(P, &P->names);
    if (n)
        *n = (as_name){t->s, t->len, kind, scope, value};
    return n != NULL;
}

static int cmp_key(const as_name *x, const as_name *y)
{
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (x->scope != y->scope)
        return x->scope < y->scope ? -1 : 1;
    int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
    if (c)
        return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

static int cmp_name(const void *a, const void *b)
{
    const as_name *x = a, *y = b;
    int c = cmp_key(x, y);
    if (c)
        return c;
    return x->value < y->value ? -1 : x->value > y->value;
}

static const as_name *name_get(const as_parser *P, uint32_t kind, uint32_t scope, const as_tok *t)
{
    as_name key = {t->s, t->len, kind, scope, 0};
    const as_name *v = P->names.data;
    size_t lo = 0, hi = P->names.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_key(&v[mid], &key);
        if (c == 0)
            return &v[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- Lexer ---------------------------------------------------------------------- */
static bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }
static bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static bool push_tok(as_parser *P, int kind, const char *s, size_t len, uint32_t line, uint32_t col)
{
    as_tok *t = vec_push(P, &P->toks);
    if (!t)
        return false;
    *t = (as_tok){kind, len > UINT32_MAX ? UINT32_MAX : (uint32_t)len, s, line, col};
    return true;
}

static bool lex(as_parser *P)
{
    const char *s = P->text;
    size_t n = P->len, i = 0;
    uint32_t line = 1, col = 1;
    unsigned depth = 0; /* ( and [ nesting: newlines inside are not tokens */
    while (i < n) {
        char c = s[i];
        if (c == ' ' || c == '\t' || c == '\r') {
            i++, col++;
            continue;
        }
        if (c == ';') {
            while (i < n && s[i] != '\n')
                i++;
            continue;
        }
        if (c == '\n') {
            if (depth == 0 && P->toks.n && TOK(P->toks.n - 1)->kind != TK_NL &&
                !push_tok(P, TK_NL, s + i, 1, line, col))
                return false;
            i++;
            if (line < UINT32_MAX)
                line++;
            col = 1;
            continue;
        }
        size_t j = i + 1;
        int kind;
        if (is_ident_start(c)) {
            while (j < n && is_ident_char(s[j]))
                j++;
            kind = TK_IDENT;
        } else if (is_digit(c)) {
            kind = TK_NUM;
            if (c == '0' && j < n && (s[j] == 'x' || s[j] == 'X')) {
                j++;
                while (j < n && is_hex(s[j]))
                    j++;
            } else {
                while (j < n && is_digit(s[j]))
                    j++;
                if (j < n && s[j] == '.')
                    for (j++; j < n && is_digit(s[j]); j++) {
                    }
                if (j < n && (s[j] == 'e' || s[j] == 'E')) {
                    size_t k = j + 1;
                    if (k < n && (s[k] == '+' || s[k] == '-'))
                        k++;
                    if (k < n && is_digit(s[k])) {
                        for (j = k; j < n && is_digit(s[j]); j++) {
                        }
                    }
                }
            }
            if (j < n && (is_ident_char(s[j]) || s[j] == '.')) {
                while (j < n && (is_ident_char(s[j]) || s[j] == '.'))
                    j++;
                as_tok t = {TK_NUM, (uint32_t)(j - i > 64 ? 64 : j - i), s + i, line, col};
                return fail(P, &t, "malformed number %s", TDESC(&t));
            }
        } else if (c == '%') {
            while (j < n && is_digit(s[j]))
                j++;
            if (j == i + 1) {
                as_tok t = {TK_LABEL, 1, s + i, line, col};
                return fail(P, &t, "expected a number after '%%' (an anonymous label is %%N)");
            }
            if (j < n && is_ident_char(s[j])) {
                while (j < n && is_ident_char(s[j]))
                    j++;
                as_tok t = {TK_LABEL, (uint32_t)(j - i > 64 ? 64 : j - i), s + i, line, col};
                return fail(P, &t, "malformed label %s (an anonymous label is %%N)", TDESC(&t));
            }
            kind = TK_LABEL;
        } else if (c == '-' && j < n && s[j] == '>') {
            j++;
            kind = TK_ARROW;
        } else if (c == '"') {
            /* a quoted parameter or result name ("x:0"): printable ASCII, no
             * spaces, no escapes (docs/asm.md); the token is what is inside */
            while (j < n && s[j] > ' ' && s[j] <= '~' && s[j] != '"')
                j++;
            if (j == n || s[j] != '"' || j == i + 1)
                return fail_at(P, line, col, "a quoted name is '\"' then printable characters (no spaces) then '\"'");
            if (!push_tok(P, TK_QNAME, s + i + 1, j - i - 1, line, col))
                return false;
            j++;
            col += (uint32_t)(j - i);
            i = j;
            continue;
        } else {
            switch (c) {
            case '(': case '[':
                depth++;
                break;
            case ')': case ']':
                if (depth)
                    depth--;
                break;
            case '{': case '}': case ',': case ':': case '=': case '|': case '.': case '@': case '-': case '#':
            case '?':
                break;
            default: {
                unsigned char u = (unsigned char)c;
                if (u >= 0x20 && u < 0x7f)
                    return fail_at(P, line, col, "unexpected character '%c'", c);
                return fail_at(P, line, col, "unexpected byte 0x%02x", u);
            }
            }
            kind = (unsigned char)c;
        }
        if (!push_tok(P, kind, s + i, j - i, line, col))
            return false;
        uint64_t nc = (uint64_t)col + (j - i);
        col = nc > UINT32_MAX ? UINT32_MAX : (uint32_t)nc;
        i = j;
    }
    if (P->toks.n && TOK(P->toks.n - 1)->kind != TK_NL && !push_tok(P, TK_NL, s + n, 0, line, col))
        return false;
    return push_tok(P, TK_EOF, s + n, 0, line, col);
}

/* ---- Parser helpers ------------------------------------------------------------ */
static as_tok *peek(as_parser *P) { return TOK(P->pos); }
static as_tok *peek2(as_parser *P) { return TOK(P->pos + 1 < P->toks.n ? P->pos + 1 : P->pos); }
static as_tok *next(as_parser *P)
{
    as_tok *t = TOK(P->pos);
    if (t->kind != TK_EOF)
        P->pos++;
    return t;
}
static bool is_p(const as_tok *t, char c) { return t->kind == (unsigned char)c; }
static bool is_kw(const as_tok *t, const char *kw)
{
    return t->kind == TK_IDENT && strlen(kw) == t->len && memcmp(t->s, kw, t->len) == 0;
}
static bool tok_eq(const as_tok *a, const as_tok *b) { return a->len == b->len && memcmp(a->s, b->s, a->len) == 0; }
static bool is_end(const as_tok *t) { return t->kind == TK_NL || t->kind == TK_EOF || is_p(t, '}'); }

static bool expect(as_parser *P, char c, const char *what)
{
    as_tok *t = peek(P);
    if (!is_p(t, c))
        return fail(P, t, "expected '%c' %s, got %s", c, what, TDESC(t));
    next(P);
    return true;
}

/* A decimal integer token; false when it is not one or exceeds max. */
static bool tok_uint(const as_tok *t, uint64_t max, uint64_t *v)
{
    if (t->kind != TK_NUM)
        return false;
    uint64_t x = 0;
    for (uint32_t i = 0; i < t->len; i++) {
        char c = t->s[i];
        if (!is_digit(c) || x > (UINT64_MAX - (uint64_t)(c - '0')) / 10) /* u64's maximum fits */
            return false;
        x = x * 10 + (uint64_t)(c - '0');
        if (x > max)
            return false;
    }
    *v = x;
    return true;
}

static bool tok_is_int(const as_tok *t)
{
    if (t->kind != TK_NUM)
        return false;
    for (uint32_t i = 0; i < t->len; i++)
        if (!is_digit(t->s[i]))
            return false;
    return true;
}

/* Parses an unsigned decimal no greater than max; `what` names it in messages. */
static bool parse_uint(as_parser *P, uint64_t max, const char *what, uint64_t *v)
{
    as_tok *t = next(P);
    if (!tok_is_int(t))
        return fail(P, t, "expected %s, got %s", what, TDESC(t));
    if (!tok_uint(t, max, v))
        return fail(P, t, "%s %.*s is too large (at most %llu)", what, (int)t->len, t->s,
                    (unsigned long long)max);
    return true;
}

static bool parse_u32(as_parser *P, const char *what, uint32_t *v)
{
    uint64_t x = 0;
    if (!parse_uint(P, UINT32_MAX, what, &x))
        return false;
    *v = (uint32_t)x;
    return true;
}

static bool check_name(as_parser *P, const as_tok *t)
{
    if (t->len > AS_MAX_NAME)
        return fail(P, t, "name is longer than %d characters", AS_MAX_NAME);
    return true;
}

static bool parse_name(as_parser *P, const char *what, as_tok *out)
{
    as_tok *t = next(P);
    if (t->kind != TK_IDENT)
        return fail(P, t, "expected %s, got %s", what, TDESC(t));
    *out = *t;
    return check_name(P, t);
}

/* "entry 'main'", "func 'fib'", "loop 'body'" */
static const char *region_desc(const as_parser *P, uint32_t r, char *buf, size_t size)
{
    const as_region *g = REG(r);
    static const char *kinds[] = {"entry", "loop", "func"};
    const as_tok *n = g->kind == ISA_REGION_ROOT ? &g->entry : &g->name;
    snprintf(buf, size, "%s '%.*s'", kinds[g->kind], (int)n->len, n->s);
    return buf;
}
#define RDESC(r) region_desc(P, (r), (char[160]){0}, 160)
#define RNAME(r) (int)REG(r)->name.len, REG(r)->name.s

/* ---- Types and constants --------------------------------------------------------- */
static bool parse_dtype(as_parser *P, uint8_t *dt)
{
    as_tok *t = next(P);
    if (t->kind != TK_IDENT)
        return fail(P, t, "expected a type (bool, i32, i64, f32, f64, u8, i8, i16, u16, u32, u64, f16, bf16), got %s", TDESC(t));
    tfvm_dtype d = isa_dtype_by_name(t->s, t->len);
    if (!d)
        return fail(P, t, "unknown type %s", TDESC(t));
    *dt = (uint8_t)d;
    return true;
}

static void put_bits(as_parser *P, uint8_t dt, uint64_t bits)
{
    switch (tfvm_dtype_size((tfvm_dtype)dt)) {
    case 1: ut_buf_u8(&P->data, (uint8_t)bits); break;
    case 2: ut_buf_u16(&P->data, (uint16_t)bits); break;
    case 4: ut_buf_u32(&P->data, (uint32_t)bits); break;
    default: ut_buf_u64(&P->data, bits); break;
    }
}

/* nan(0xBITS): the exact bit pattern of a NaN, so that payloads round-trip. */
static bool parse_nan_bits(as_parser *P, uint8_t dt, uint64_t *bits)
{
    bool f32 = dt == TFVM_F32;
    next(P); /* ( */
    as_tok *t = next(P);
    uint64_t x = 0;
    bool ok = t->kind == TK_NUM && t->len > 2 && t->s[0] == '0' && (t->s[1] == 'x' || t->s[1] == 'X') &&
              t->len <= (f32 ? 10u : 18u);
    for (uint32_t i = 2; ok && i < t->len; i++) {
        char c = t->s[i];
        x = x << 4 | (uint64_t)(is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    if (!ok)
        return fail(P, t, "expected the %s bit pattern of a NaN (nan(0x%s)), got %s",
                    f32 ? "32-bit" : "64-bit", f32 ? "7fc00001" : "7ff8000000000001", TDESC(t));
    bool is_nan = f32 ? (x & 0x7f800000u) == 0x7f800000u && (x & 0x007fffffu)
                      : (x & 0x7ff0000000000000u) == 0x7ff0000000000000u && (x & 0x000fffffffffffffu);
    if (!is_nan)
        return fail(P, t, "%.*s is not a NaN bit pattern for %s", (int)t->len, t->s, f32 ? "f32" : "f64");
    *bits = x;
    return expect(P, ')', "after the NaN bit pattern");
}

static bool is_decimal(const as_tok *t)
{
    return t->kind == TK_NUM && !(t->len > 1 && (t->s[1] == 'x' || t->s[1] == 'X'));
}

/* A decimal number's text, for strtod; false (with the error) when it is too long. */
static bool decimal_text(as_parser *P, const as_tok *t, char *buf, size_t size)
{
    if (t->len >= size)
        return fail(P, t, "number %s is too long", TDESC(t));
    memcpy(buf, t->s, t->len);
    buf[t->len] = '\0';
    return true;
}

/* An f16 or bf16 literal: a number rounded to nearest even (one that
 * rounds to infinity is out of range), inf or nan. */
static bool parse_half(as_parser *P, uint8_t dt, const as_tok *t, const as_tok *sign, bool neg)
{
    const bool f16 = dt == TFVM_F16;
    uint16_t bits;
    if (is_kw(t, "inf")) {
        bits = f16 ? 0x7c00 : 0x7f80;
    } else if (is_kw(t, "nan")) {
        bits = f16 ? 0x7e00 : 0x7fc0;
    } else if (is_decimal(t)) {
        char buf[80];
        if (!decimal_text(P, t, buf, sizeof buf))
            return false;
        bits = f16 ? ut_f64_to_f16(strtod(buf, NULL)) : ut_f64_to_bf16(strtod(buf, NULL));
        if ((bits & 0x7fff) == (f16 ? 0x7c00 : 0x7f80))
            return fail(P, neg ? sign : t, "number %s%s out of range for %s", neg ? "-" : "", buf,
                        tfvm_dtype_name((tfvm_dtype)dt));
    } else {
        return fail(P, t, "expected a number for %s (or inf, nan), got %s", tfvm_dtype_name((tfvm_dtype)dt), TDESC(t));
    }
    put_bits(P, dt, neg ? bits ^ 0x8000u : bits);
    return true;
}

static bool parse_scalar(as_parser *P, uint8_t dt)
{
    as_tok *t = peek(P);
    bool neg = false;
    if (is_p(t, '-') && dt != TFVM_BOOL) {
        neg = true;
        next(P);
    }
    const as_tok *sign = t;
    t = next(P);
    const char *dn = tfvm_dtype_name((tfvm_dtype)dt);
    if (dt == TFVM_BOOL) {
        if (!is_kw(t, "true") && !is_kw(t, "false"))
            return fail(P, t, "expected true or false for bool, got %s", TDESC(t));
        ut_buf_u8(&P->data, is_kw(t, "true"));
        return true;
    }
    if (isa_dtype_int(dt) || (!isa_dtype_float(dt) && !isa_dtype_half(dt))) {
        if (!tok_is_int(t))
            return fail(P, t, "expected an integer for %s, got %s", dn, TDESC(t));
        uint64_t lim = dt == TFVM_I32 ? (neg ? 0x80000000u : 0x7fffffffu)
                     : dt == TFVM_U8  ? (neg ? 0 : 0xffu)
                     : dt == TFVM_I8  ? (neg ? 0x80u : 0x7fu)
                     : dt == TFVM_I16 ? (neg ? 0x8000u : 0x7fffu)
                     : dt == TFVM_U16 ? (neg ? 0 : 0xffffu)
                     : dt == TFVM_U32 ? (neg ? 0 : 0xffffffffu)
                     : dt == TFVM_U64 ? (neg ? 0 : UINT64_MAX)
                                      : (neg ? 0x8000000000000000u : 0x7fffffffffffffffu);
        uint64_t v = 0;
        if (!tok_uint(t, lim, &v))
            return fail(P, neg ? sign : t, "integer %s%.*s out of range for %s", neg ? "-" : "",
                        (int)(t->len > 60 ? 60 : t->len), t->s, dn);
        put_bits(P, dt, neg ? 0 - v : v);
        return true;
    }
    if (isa_dtype_half(dt))
        return parse_half(P, dt, t, sign, neg);
    /* f32 / f64 */
    bool f32 = dt == TFVM_F32;
    uint64_t bits = 0;
    if (is_kw(t, "inf")) {
        bits = f32 ? 0x7f800000u : 0x7ff0000000000000u;
    } else if (is_kw(t, "nan")) {
        bits = f32 ? 0x7fc00000u : 0x7ff8000000000000u;
        if (is_p(peek(P), '(') && !parse_nan_bits(P, dt, &bits))
            return false;
    } else if (is_decimal(t)) {
        char buf[80];
        if (!decimal_text(P, t, buf, sizeof buf))
            return false;
        if (f32) {
            float f = strtof(buf, NULL);
            if (isinf(f))
                return fail(P, neg ? sign : t, "number %s%s out of range for f32", neg ? "-" : "", buf);
            uint32_t u;
            memcpy(&u, &f, 4);
            bits = u;
        } else {
            double d = strtod(buf, NULL);
            if (isinf(d))
                return fail(P, neg ? sign : t, "number %s%s out of range for f64", neg ? "-" : "", buf);
            memcpy(&bits, &d, 8);
        }
    } else {
        return fail(P, t, "expected a number for %s (or inf, nan), got %s", dn, TDESC(t));
    }
    if (neg)
        bits ^= f32 ? 0x80000000u : 0x8000000000000000u;
    put_bits(P, dt, bits);
    return true;
}

static bool parse_nested(as_parser *P, const as_const *c, unsigned axis)
{
    if (!expect(P, '[', axis ? "for the next row of the value" : "to start the CONST value"))
        return false;
    for (int64_t k = 0; k < c->dims[axis]; k++) {
        if (k > 0) {
            as_tok *t = peek(P);
            if (is_p(t, ']'))
                return fail(P, t, "too few elements along axis %u (expected %lld, got %lld)", axis,
                            (long long)c->dims[axis], (long long)k);
            if (!is_p(t, ','))
                return fail(P, t, "expected ',' or ']' in the CONST value, got %s", TDESC(t));
            next(P);
        }
        if (axis + 1 == c->rank ? !parse_scalar(P, c->dtype) : !parse_nested(P, c, axis + 1))
            return false;
        if (P->data.failed)
            return nomem(P);
    }
    as_tok *t = peek(P);
    if (is_p(t, ','))
        return fail(P, t, "too many elements along axis %u (expected %lld)", axis, (long long)c->dims[axis]);
    return expect(P, ']', "to end this row of the CONST value");
}

/* TYPE VALUE: a scalar type with a scalar, or dtype[d0, d1, ...] with a nested
 * list (NumPy style); a tensor without elements is written []. *index receives
 * the record's index in P->consts. */
static bool parse_const_value(as_parser *P, uint32_t *index)
{
    as_const c;
    memset(&c, 0, sizeof c);
    if (!parse_dtype(P, &c.dtype))
        return false;
    size_t count = 1;
    bool zero = false;
    if (is_p(peek(P), '[')) {
        as_tok *open = next(P);
        if (is_p(peek(P), ']'))
            return fail(P, open, "a CONST tensor type needs its dimensions, as in f32[2, 3] (a scalar is just f32)");
        for (;;) {
            if (c.rank == TFVM_MAX_RANK)
                return fail(P, peek(P), "a CONST has at most %d dimensions", TFVM_MAX_RANK);
            uint64_t d = 0;
            if (!parse_uint(P, INT64_MAX, "a dimension", &d))
                return false;
            c.dims[c.rank++] = (int64_t)d;
            if (d == 0)
                zero = true;
            else if (!zero && !ut_mul_ok(count, (size_t)d, &count))
                return fail(P, open, "CONST tensor is too large");
            as_tok *t = next(P);
            if (is_p(t, ']'))
                break;
            if (!is_p(t, ','))
                return fail(P, t, "expected ',' or ']' in the dimensions, got %s", TDESC(t));
        }
    }
    size_t esize = tfvm_dtype_size((tfvm_dtype)c.dtype);
    if (zero)
        count = 0;
    if (!ut_mul_ok(count, esize, &c.nbytes) || c.nbytes > SIZE_MAX / 2)
        return fail(P, peek(P), "CONST tensor is too large");
    c.off = P->data.len;
    if (c.rank == 0) {
        if (!parse_scalar(P, c.dtype))
            return false;
    } else if (count == 0) {
        if (!expect(P, '[', "(a CONST without elements is written [])") ||
            !expect(P, ']', "(a CONST without elements is written [])"))
            return false;
    } else if (!parse_nested(P, &c, 0)) {
        return false;
    }
    if (P->data.failed)
        return nomem(P);
    *index = (uint32_t)P->consts.n;
    as_const *slot = vec_push(P, &P->consts);
    if (!slot)
        return false;
    *slot = c;
    return true;
}

/* CONST TYPE VALUE, or CONST #K: entry K of the declared constant table. */
static bool parse_const(as_parser *P, as_inst *in)
{
    if (!is_p(peek(P), '#'))
        return parse_const_value(P, &in->a);
    next(P);
    in->ctab = true;
    return parse_u32(P, "a constant table index after '#'", &in->a);
}

/* "?, 784" (after '['): up to TFVM_MAX_RANK dimensions, -1 for '?'. */
/* The dims of f32[?, 784]; with names (a parameter's), f32[batch, 3] too: a
 * named '?' whose name goes to names[i]. */
static bool parse_dims(as_parser *P, uint8_t *ndim, int64_t dims[TFVM_MAX_RANK], as_tok *names)
{
    for (*ndim = 0;;) {
        if (*ndim == TFVM_MAX_RANK)
            return fail(P, peek(P), "a tensor has at most %d dimensions", TFVM_MAX_RANK);
        uint64_t d = 0;
        if (is_p(peek(P), '?')) {
            next(P);
            dims[(*ndim)++] = -1;
        } else if (names && peek(P)->kind == TK_IDENT) {
            if (!isa_dim_name_ok(peek(P)->s, peek(P)->len))
                return fail(P, peek(P), "a dimension's name is a letter or '_' then up to %d letters, digits or '_'",
                            ISA_MAX_DIM_NAME - 1);
            names[*ndim] = *next(P);
            dims[(*ndim)++] = -1;
        } else if (parse_uint(P, INT64_MAX,
                              names ? "a dimension (an integer, '?' or a name)" : "a dimension (an integer or '?')",
                              &d)) {
            dims[(*ndim)++] = (int64_t)d;
        } else {
            return false;
        }
        if (!is_p(peek(P), ','))
            return true;
        next(P);
    }
}

/* FEED "name" TYPE, FETCH "name": the channel's name becomes a u8[n]
 * constant (#K instead of the quoted name: entry K of the declared table);
 * FEED's TYPE is a dtype, with [...] (or []) for a tensor of any rank,
 * [?, 8] or [#K] for a declared shape. */
static bool parse_chan(as_parser *P, as_inst *in)
{
    as_tok *t = peek(P);
    if (is_p(t, '#')) {
        next(P);
        in->ctab = true;
        if (!parse_u32(P, "a constant table index after '#'", &in->a))
            return false;
    } else if (t->kind == TK_QNAME) {
        next(P);
        as_const c;
        memset(&c, 0, sizeof c);
        c.dtype = TFVM_U8;
        c.rank = 1;
        c.dims[0] = (int64_t)t->len;
        c.nbytes = t->len;
        c.off = P->data.len;
        ut_buf_append(&P->data, t->s, t->len);
        if (P->data.failed)
            return nomem(P);
        isa_const k = {.dtype = TFVM_U8, .rank = 1, .dims = {(int64_t)t->len}, .nbytes = t->len, .data = t->s};
        if (!isa_chan_ok(&k))
            return fail(P, t, "a channel name is 1 to %d letters, digits and _.:/-, got %s", ISA_MAX_CHAN, TDESC(t));
        in->a = (uint32_t)P->consts.n;
        as_const *slot = vec_push(P, &P->consts);
        if (!slot)
            return false;
        *slot = c;
    } else {
        return fail(P, t, "expected the channel's name in quotes after %s (%s \"x\"), got %s", isa_ops[in->op].name,
                    isa_ops[in->op].name, TDESC(t));
    }
    if (in->op != ISA_FEED)
        return true;
    uint8_t d = 0;
    if (!parse_dtype(P, &d))
        return false;
    in->b = d;
    if (!is_p(peek(P), '['))
        return true;
    next(P);
    in->b |= ISA_CHAN_TENSOR;
    if (is_p(peek(P), '.')) { /* f32[...]: any rank, as f32[] */
        for (int k = 0; k < 3; k++)
            if (!expect(P, '.', "in f32[...], a tensor of any rank"))
                return false;
    } else if (is_p(peek(P), '#')) { /* f32[#K]: the shape is entry K of the declared table */
        next(P);
        uint32_t k;
        if (!parse_u32(P, "a constant table index after '#'", &k))
            return false;
        in->shape = k + 1;
        in->shape_ctab = true;
    } else if (!is_p(peek(P), ']')) { /* f32[?, 8]: a declared shape, as an i64 constant */
        uint8_t ndim;
        int64_t dims[TFVM_MAX_RANK];
        if (!parse_dims(P, &ndim, dims, NULL))
            return false;
        as_const c;
        memset(&c, 0, sizeof c);
        c.dtype = TFVM_I64;
        c.rank = 1;
        c.dims[0] = ndim;
        c.nbytes = ndim * sizeof *dims;
        c.off = P->data.len;
        ut_buf_append(&P->data, dims, c.nbytes);
        if (P->data.failed)
            return nomem(P);
        in->shape = (uint32_t)P->consts.n + 1;
        as_const *slot = vec_push(P, &P->consts);
        if (!slot)
            return false;
        *slot = c;
    }
    return expect(P, ']', "after '[' (a FEED of a tensor of any rank is TYPE[], of a shape TYPE[?, 8])");
}

/* const #K = TYPE VALUE (top level): the explicit constant table, for programs
 * whose CONSTs share entries or whose table is not in instruction order. */
static bool parse_const_decl(as_parser *P)
{
    next(P); /* const */
    if (!expect(P, '#', "after 'const' (const #0 = i32 1)"))
        return false;
    as_tok *kt = peek(P);
    uint32_t k = 0, index = 0;
    if (!parse_u32(P, "a constant table index", &k))
        return false;
    if (k != P->decls.n)
        return fail(P, kt, "expected const #%zu here (the table is declared in order), got #%u", P->decls.n, k);
    if (!expect(P, '=', "after the constant's index") || !parse_const_value(P, &index))
        return false;
    uint32_t *d = vec_push(P, &P->decls);
    if (!d)
        return false;
    *d = index;
    as_tok *t = peek(P);
    if (t->kind != TK_NL && t->kind != TK_EOF)
        return fail(P, t, "expected end of line after the constant, got %s", TDESC(t));
    return true;
}

/* ---- Instructions ------------------------------------------------------------------- */
static bool parse_ref(as_parser *P)
{
    as_ref *r = vec_push(P, &P->refs);
    if (!r)
        return false;
    r->qual = no_tok;
    as_tok *t = next(P);
    r->at = *t;
    if (t->kind == TK_IDENT && is_p(peek(P), '.')) {
        r->qual = *t;
        next(P);
        t = next(P);
        if (t->kind != TK_IDENT)
            return fail(P, t, "expected an instruction name after '%.*s.', got %s", (int)r->qual.len,
                        r->qual.s, TDESC(t));
    } else if (t->kind != TK_IDENT && t->kind != TK_LABEL) {
        return fail(P, t, "expected an input (name, region.name or %%N), got %s", TDESC(t));
    }
    r->name = *t;
    if (is_p(peek(P), ':')) {
        next(P);
        if (!parse_u32(P, "an output port number after ':'", &r->out))
            return false;
    }
    return true;
}

/* A constant operand where an input is expected: `i32 2`, `f32[2] [1, 2]` or #K. */
static bool at_const_operand(as_parser *P)
{
    as_tok *t = peek(P), *u = peek2(P);
    if (is_p(t, '#'))
        return true;
    return t->kind == TK_IDENT && isa_dtype_by_name(t->s, t->len) && !is_p(u, ',') && !is_p(u, ')') &&
           !is_p(u, '|') && !is_p(u, ':') && !is_p(u, '.');
}

static bool parse_const_operand(as_parser *P, size_t ii, uint32_t port)
{
    as_tok *t = peek(P);
    as_inst *in = INS(ii);
    const isa_op_info *info = &isa_ops[in->op];
    if (!isa_is_compute(info->cls) || info->n_in < 2)
        return fail(P, t, "%s takes no constant operands (only compute instructions with 2+ inputs do)", info->name);
    if (in->flags & ISA_FLAG_IMM_MASK)
        return fail(P, t, "only one input of an instruction may be a constant");
    if (port > 2)
        return fail(P, t, "only inputs 0 to 2 may be constants");
    uint32_t k = 0;
    bool ctab = is_p(t, '#');
    if (ctab) {
        next(P);
        if (!parse_u32(P, "a constant table index after '#'", &k))
            return false;
    } else if (!parse_const_value(P, &k)) {
        return false;
    }
    in = INS(ii);
    in->flags |= (uint16_t)((port + 1) << ISA_FLAG_IMM_SHIFT);
    in->b = k;
    in->imm_ctab = ctab;
    return true;
}

/* ( a, b | c ) or [ ... ]: ports separated by ',', producers of one port by '|';
 * in ( ), an input may be a constant (parse_const_operand). */
static bool parse_ports(as_parser *P, char close, uint32_t *count, size_t ii)
{
    next(P); /* ( or [ */
    *count = 0;
    if (is_p(peek(P), close)) {
        next(P);
        return true;
    }
    for (;;) {
        if (*count == UINT32_MAX)
            return fail(P, peek(P), "too many inputs");
        as_port *port = vec_push(P, &P->ports);
        if (!port)
            return false;
        size_t pi = P->ports.n - 1;
        uint32_t first = (uint32_t)P->refs.n, n = 0;
        if (close == ')' && at_const_operand(P)) {
            if (!parse_const_operand(P, ii, *count))
                return false;
        } else for (;;) {
            if (!parse_ref(P))
                return false;
            n++;
            if (!is_p(peek(P), '|'))
                break;
            next(P);
        }
        *PORT(pi) = (as_port){first, n};
        ++*count;
        as_tok *t = next(P);
        if (is_p(t, close))
            return true;
        if (!is_p(t, ','))
            return fail(P, t, close == ')' ? "expected ')' after inputs, got %s"
                                           : "expected ']' after control inputs, got %s",
                        TDESC(t));
    }
}

static bool parse_attrs(as_parser *P, as_inst *in, uint32_t r)
{
    const isa_op_info *info = &isa_ops[in->op];
    const as_region *g = REG(r);
    uint64_t v = 0;
    switch (info->attr) {
    case ISA_ATTR_NONE:
        break;
    case ISA_ATTR_INDEX: {
        bool arg = in->op == ISA_ARG;
        if (!parse_uint(P, UINT32_MAX, arg ? "a parameter index after ARG" : "a result index after RESULT", &v))
            return false;
        in->a = (uint32_t)v;
        if (g->kind != ISA_REGION_ROOT)
            return fail(P, &in->optok, "%s is only allowed in an entry's region (this is %s)", info->name,
                        RDESC(r));
        uint32_t n = arg ? g->n_params : g->n_results;
        if (v >= n)
            return fail(P, &in->optok, "%s %u out of range: entry '%.*s' has %u %s%s", info->name, in->a,
                        (int)g->entry.len, g->entry.s, n, arg ? "parameter" : "result", n == 1 ? "" : "s");
        if (!arg) {
            as_param *res = PRM(g->result_first + in->a);
            if (res->seen_line)
                return fail(P, &in->optok, "RESULT %u is already given at %u:%u", in->a, res->seen_line,
                            res->seen_col);
            res->seen_line = in->optok.line;
            res->seen_col = in->optok.col;
        }
        return true;
    }
    case ISA_ATTR_CONST:
        return parse_const(P, in);
    case ISA_ATTR_ENTER:
        if (!parse_name(P, "a loop name after ENTER", &in->target))
            return false;
        for (;;) {
            as_tok *t = peek(P);
            if (is_kw(t, "const")) {
                if (in->flags & ISA_FLAG_CONST)
                    return fail(P, t, "'const' given twice");
                in->flags |= ISA_FLAG_CONST;
                next(P);
            } else if (is_kw(t, "parallel")) {
                if (in->b)
                    return fail(P, t, "'parallel' given twice");
                next(P);
                if (!expect(P, '=', "after 'parallel'"))
                    return false;
                as_tok *nt = peek(P);
                if (!parse_uint(P, UINT64_MAX, "a number after 'parallel='", &v))
                    return false;
                if (v < 1 || v > ISA_MAX_PARALLEL)
                    return fail(P, nt, "parallel must be 1..%d, got %.*s", ISA_MAX_PARALLEL, (int)nt->len, nt->s);
                in->b = (uint32_t)v;
            } else if (t->kind == TK_IDENT) {
                return fail(P, t, "unknown ENTER option %s (expected const or parallel=N)", TDESC(t));
            } else {
                return true;
            }
        }
    case ISA_ATTR_FRAME:
        if (!parse_name(P, "a loop name after EXIT", &in->target))
            return false;
        if (g->kind != ISA_REGION_LOOP || !tok_eq(&in->target, &g->name))
            return fail(P, &in->target, "EXIT %.*s must be in loop '%.*s' (this is %s)", (int)in->target.len,
                        in->target.s, (int)in->target.len, in->target.s, RDESC(r));
        in->a = r;
        return true;
    case ISA_ATTR_SITE: {
        if (!parse_name(P, "a callee after CALL/RETURN (fib@3)", &in->target))
            return false;
        if (!expect(P, '@', "and a call site number after the callee (fib@3)"))
            return false;
        as_use *u = vec_push(P, &P->uses);
        if (!u)
            return false;
        u->inst = (uint32_t)P->insts.n - 1;
        if (!parse_u32(P, "a call site number", &in->site))
            return false;
        u = VEC_AT(P->uses, as_use, P->uses.n - 1);
        u->id = in->site;
        return true;
    }
    case ISA_ATTR_DTYPE: {
        uint8_t d = 0;
        if (!parse_dtype(P, &d))
            return false;
        in->a = d;
        break;
    }
    case ISA_ATTR_AXIS: {
        as_tok *t = peek(P);
        if (!is_kw(t, "axis"))
            return fail(P, t, "expected axis=N after %s, got %s", info->name, TDESC(t));
        next(P);
        if (!expect(P, '=', "after 'axis'"))
            return false;
        bool neg = is_p(peek(P), '-');
        if (neg)
            next(P);
        as_tok *nt = peek(P);
        if (!parse_uint(P, UINT32_MAX, "an axis number after 'axis='", &v))
            return false;
        int64_t axis = neg ? -(int64_t)v : (int64_t)v;
        if (axis < -ISA_MAX_AXIS || axis >= ISA_MAX_AXIS)
            return fail(P, nt, "axis must be -%d..%d, got %" PRId64, ISA_MAX_AXIS, ISA_MAX_AXIS - 1, axis);
        in->a = (uint32_t)(int32_t)axis;
        break;
    }
    case ISA_ATTR_CMP: {
        as_tok *t = next(P);
        int op = t->kind == TK_IDENT ? isa_op_by_name(t->s, t->len) : -1;
        if (op < 0 || isa_ops[op].cls != ISA_CLASS_COMPARE)
            return fail(P, t, "expected a comparison (LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, EQUAL, NOT_EQUAL) "
                              "after BRANCH, got %s", TDESC(t));
        in->a = (uint32_t)op;
        as_tok *ct = peek(P);
        uint32_t k = 0;
        if (is_p(ct, '#')) {
            next(P);
            if (!parse_u32(P, "a constant table index after '#'", &k))
                return false;
            in->imm_ctab = true;
        } else if (!parse_const_value(P, &k)) {
            return false;
        } else if (CST(k)->rank != 0) {
            return fail(P, ct, "the constant of BRANCH must be a scalar");
        }
        in->b = k;
        break;
    }
    case ISA_ATTR_OPTS:
        for (;;) {
            as_tok *t = peek(P);
            if (t->kind != TK_IDENT || is_kw(t, "on"))
                break;
            uint32_t bit = 1;
            while (bit && !(isa_opt_name((isa_op)in->op, bit) && is_kw(t, isa_opt_name((isa_op)in->op, bit))))
                bit <<= 1;
            if (!bit)
                return fail(P, t, "unknown %s option %s", info->name, TDESC(t));
            if (in->a & bit)
                return fail(P, t, "'%s' given twice", isa_opt_name((isa_op)in->op, bit));
            in->a |= bit;
            next(P);
        }
        break;
    case ISA_ATTR_CHAN:
        return parse_chan(P, in);
    }
    while (is_kw(peek(P), "prune_false") || is_kw(peek(P), "prune_true")) {
        as_tok *t = next(P);
        if (!isa_is_switch(in->op))
            return fail(P, t, "%s is an option of SWITCH and BRANCH, not of %s", TDESC(t), info->name);
        uint16_t f = is_kw(t, "prune_false") ? ISA_FLAG_PRUNE_FALSE : ISA_FLAG_PRUNE_TRUE;
        if (in->flags & f)
            return fail(P, t, "%s given twice", TDESC(t));
        in->flags |= f;
    }
    if (is_kw(peek(P), "on")) {
        as_tok *t = next(P);
        if (!isa_is_compute(info->cls))
            return fail(P, t, "%s cannot be placed on a device (only compute instructions can)", info->name);
        t = peek(P);
        if (is_kw(t, "cpu"))
            in->flags |= ISA_FLAG_DEV_CPU;
        else if (is_kw(t, "cuda"))
            in->flags |= ISA_FLAG_DEV_CUDA;
        else
            return fail(P, t, "expected a device after 'on' (cpu or cuda), got %s", TDESC(t));
        next(P);
    }
    return true;
}

/* var "NAME"[:OUT]: output OUT (default 0) of instruction ii carries the
 * source variable NAME (the .tfvm variable table). */
static bool parse_var(as_parser *P, size_t ii)
{
    next(P);
    if (peek(P)->kind != TK_QNAME)
        return fail(P, peek(P), "expected the variable's quoted name after 'var', got %s", TDESC(peek(P)));
    as_var v = {(uint32_t)ii, 0, *next(P)};
    if (is_p(peek(P), ':')) {
        next(P);
        if (!parse_u32(P, "an output number after ':'", &v.out))
            return false;
    }
    as_var *slot = vec_push(P, &P->vars);
    if (!slot)
        return false;
    *slot = v;
    return true;
}

static bool parse_inst(as_parser *P, uint32_t r)
{
    as_inst *in = vec_push(P, &P->insts);
    if (!in)
        return false;
    size_t ii = P->insts.n - 1;
    in->region = r;
    in->label = no_tok;
    in->target = no_tok;
    as_tok *t = peek(P);
    if ((t->kind == TK_IDENT || t->kind == TK_LABEL) && is_p(peek2(P), '=')) {
        in->label = *t;
        if (t->kind == TK_IDENT && !check_name(P, t))
            return false;
        next(P);
        next(P);
    } else if (t->kind == TK_LABEL) {
        return fail(P, peek2(P), "expected '=' after label %s, got %s", TDESC(t), TDESC(peek2(P)));
    }
    t = next(P);
    if (t->kind != TK_IDENT)
        return fail(P, t, "expected an instruction, got %s", TDESC(t));
    int op = isa_op_by_name(t->s, t->len);
    if (op < 0)
        return fail(P, t, "unknown instruction %s", TDESC(t));
    in->op = (uint16_t)op;
    in->optok = *t;
    const isa_op_info *info = &isa_ops[op];

    /* names: unique within the region; %N labels: unique in the file */
    if (in->label.kind != TK_EOF) {
        bool lab = in->label.kind == TK_LABEL;
        if (!name_add(P, lab ? NS_LABEL : NS_INST, lab ? 0 : r, &in->label, (uint32_t)ii))
            return false;
    }
    if (!parse_attrs(P, INS(ii), r))
        return false;
    in = INS(ii);
    uint32_t n_in = 0, n_ctl = 0;
    in->port_first = (uint32_t)P->ports.n;
    if (is_p(peek(P), '(') && !parse_ports(P, ')', &n_in, ii))
        return false;
    if (is_p(peek(P), '[') && !parse_ports(P, ']', &n_ctl, ii))
        return false;
    in = INS(ii);
    if (is_p(peek(P), '@')) {
        next(P);
        if (!parse_u32(P, "a line number after '@'", &in->line) ||
            !expect(P, ':', "between the line and column of '@LINE:COL'") ||
            !parse_u32(P, "a column number", &in->col))
            return false;
    }
    if (is_kw(peek(P), "from")) { /* from "NODE" "OP": the model's node it came from */
        next(P);
        if (peek(P)->kind != TK_QNAME)
            return fail(P, peek(P), "expected the node's quoted name after 'from', got %s", TDESC(peek(P)));
        in->origin = *next(P);
        if (peek(P)->kind == TK_QNAME)
            in->origin_op = *next(P);
    }
    while (is_kw(peek(P), "var"))
        if (!parse_var(P, ii))
            return false;
    t = peek(P);
    if (is_kw(t, "on") && isa_is_compute(info->cls))
        return fail(P, t, "'on DEVICE' goes before the inputs, as in %s on cpu (...)", info->name);
    if (!is_end(t))
        return fail(P, t, "expected end of line after the instruction, got %s", TDESC(t));

    if (info->n_in >= 0 && n_in != (uint32_t)info->n_in)
        return fail(P, &in->optok, "%s takes %d input%s, got %u", info->name, info->n_in,
                    info->n_in == 1 ? "" : "s", n_in);
    if (info->n_in < 0 && n_in == 0)
        return fail(P, &in->optok, "%s needs at least 1 input", info->name);
    if (n_in > AS_MAX_PORTS)
        return fail(P, &in->optok, "%s takes at most %u inputs, got %u", info->name, AS_MAX_PORTS, n_in);
    if (n_ctl > AS_MAX_PORTS)
        return fail(P, &in->optok, "at most %u control inputs, got %u", AS_MAX_PORTS, n_ctl);
    in->n_in = n_in;
    in->n_ctl = n_ctl;
    const as_region *g = REG(r);
    if ((op == ISA_NEXTITER || op == ISA_EXIT) && g->kind != ISA_REGION_LOOP)
        return fail(P, &in->optok, "%s is only allowed in a loop (this is %s)", info->name, RDESC(r));
    if (op == ISA_CONST && g->kind != ISA_REGION_ROOT && n_ctl == 0)
        return fail(P, &in->optok,
                    "CONST in %s needs a control input, as in CONST i32 1 [x]: it fires at that input's tag",
                    RDESC(r));
    return true;
}

/* ---- Blocks ------------------------------------------------------------------------------ */
static bool parse_params(as_parser *P, bool results, uint32_t *first, uint32_t *count)
{
    next(P); /* ( */
    *first = (uint32_t)P->params.n;
    *count = 0;
    if (is_p(peek(P), ')')) {
        next(P);
        return true;
    }
    for (;;) {
        as_param *pa = vec_push(P, &P->params);
        if (!pa)
            return false;
        size_t pi = P->params.n - 1;
        as_tok name;
        uint8_t dt = 0, rank = 0;
        if (peek(P)->kind == TK_QNAME) {
            name = *next(P);
            if (!check_name(P, &name))
                return false;
        } else if (!parse_name(P, "a parameter name", &name)) {
            return false;
        }
        if (!expect(P, ':', "after the parameter name") ||
            !parse_dtype(P, &dt))
            return false;
        bool shaped = false;
        uint8_t ndim = 0;
        int64_t dims[TFVM_MAX_RANK] = {0};
        as_tok dnames[TFVM_MAX_RANK];
        memset(dnames, 0, sizeof dnames);
        if (is_p(peek(P), '[')) {
            next(P);
            rank = ISA_RANK_ANY;
            if (is_p(peek(P), '.')) { /* f32[...]: any rank, as f32[] */
                for (int k = 0; k < 3; k++)
                    if (!expect(P, '.', "in f32[...], a tensor of any rank"))
                        return false;
            } else if (is_p(peek(P), '(')) { /* f32[()]: a tensor of rank 0 */
                next(P);
                if (!expect(P, ')', "in f32[()], a tensor of rank 0"))
                    return false;
                shaped = true;
            } else if (!is_p(peek(P), ']')) {
                shaped = true;
                if (!parse_dims(P, &ndim, dims, dnames))
                    return false;
            }
            if (!expect(P, ']', "after the dimensions (f32[...] is any rank, f32[?, 3] a shape)"))
                return false;
        }
        as_tok dtok = no_tok;
        uint32_t dflt = 0;
        if (is_p(peek(P), '=')) { /* = #K: the default, a declared constant */
            dtok = *next(P);
            if (results)
                return fail(P, &dtok, "a result has no default (only a parameter has: w: f32[2] = #0)");
            if (!expect(P, '#', "after '=' (a parameter's default is a declared constant: w: f32[2] = #0)") ||
                !parse_u32(P, "a constant table index after '#'", &dflt))
                return false;
        }
        pa = PRM(pi);
        pa->has_default = dtok.len != 0;
        pa->dflt = dflt;
        pa->dflt_tok = dtok;
        pa->name = name;
        pa->dtype = dt;
        pa->rank = rank;
        pa->shaped = shaped;
        pa->ndim = ndim;
        memcpy(pa->dims, dims, sizeof dims);
        memcpy(pa->dim_names, dnames, sizeof dnames);
        ++*count;
        as_tok *t = next(P);
        if (is_p(t, ')'))
            return true;
        if (!is_p(t, ','))
            return fail(P, t, "expected ',' or ')' after a parameter, got %s", TDESC(t));
    }
}

static bool parse_block(as_parser *P, uint32_t enclosing);

static bool parse_body(as_parser *P, uint32_t r)
{
    for (;;) {
        as_tok *t = peek(P);
        if (t->kind == TK_NL) {
            next(P);
            continue;
        }
        if (is_p(t, '}')) {
            next(P);
            return true;
        }
        if (t->kind == TK_EOF)
            return fail(P, t, "expected '}' to close %s (opened at %u:%u), got end of file", RDESC(r),
                        REG(r)->kw.line, REG(r)->kw.col);
        if (!is_p(peek2(P), '=') && (is_kw(t, "entry") || is_kw(t, "func")))
            return fail(P, t, "'%.*s' blocks cannot be nested (close %s first)", (int)t->len, t->s, RDESC(r));
        if (!is_p(peek2(P), '=') && is_kw(t, "loop")) {
            if (!parse_block(P, r))
                return false;
            continue;
        }
        if (!parse_inst(P, r))
            return false;
    }
}

static bool parse_block(as_parser *P, uint32_t enclosing)
{
    as_tok kw = *next(P);
    as_region g;
    memset(&g, 0, sizeof g);
    g.kw = kw;
    g.parent = ISA_NONE;
    g.parent_name = no_tok;
    g.kind = is_kw(&kw, "entry") ? ISA_REGION_ROOT : is_kw(&kw, "func") ? ISA_REGION_FUNC : ISA_REGION_LOOP;
    g.index_tok = no_tok;
    if (g.kind == ISA_REGION_ROOT && is_p(peek(P), '#')) {
        /* entry #K NAME: the entry's index, when entries are not in region order */
        next(P);
        g.index_tok = *peek(P);
        if (!parse_u32(P, "an entry index after '#'", &g.index))
            return false;
    }
    char what[48];
    snprintf(what, sizeof what, "a %s name after '%s'", g.kind == ISA_REGION_ROOT ? "entry" : "region",
             g.kind == ISA_REGION_ROOT ? "entry" : g.kind == ISA_REGION_FUNC ? "func" : "loop");
    if (!parse_name(P, what, &g.name))
        return false;
    g.entry = g.name;
    if (g.kind == ISA_REGION_ROOT) {
        if (!is_p(peek(P), '('))
            return fail(P, peek(P), "expected '(' and the parameters after entry '%.*s', got %s", (int)g.name.len,
                        g.name.s, TDESC(peek(P)));
        if (!parse_params(P, false, &g.param_first, &g.n_params))
            return false;
        g.result_first = (uint32_t)P->params.n;
        if (peek(P)->kind == TK_ARROW) {
            next(P);
            if (!is_p(peek(P), '('))
                return fail(P, peek(P), "expected '(' and the results after '->', got %s", TDESC(peek(P)));
            if (!parse_params(P, true, &g.result_first, &g.n_results))
                return false;
        }
        if (is_kw(peek(P), "region")) {
            next(P);
            if (!parse_name(P, "a region name after 'region'", &g.name))
                return false;
        }
    } else if (g.kind == ISA_REGION_LOOP) {
        if (is_kw(peek(P), "in")) {
            next(P);
            if (!parse_name(P, "the parent region's name after 'in'", &g.parent_name))
                return false;
            if (enclosing != ISA_NONE && !tok_eq(&g.parent_name, &REG(enclosing)->name))
                return fail(P, &g.parent_name, "a loop written inside %s has that region as its parent, not '%.*s'",
                            RDESC(enclosing), (int)g.parent_name.len, g.parent_name.s);
        } else if (enclosing == ISA_NONE) {
            return fail(P, peek(P), "expected 'in PARENT' after loop '%.*s' (a top-level loop names its parent), got %s",
                        (int)g.name.len, g.name.s, TDESC(peek(P)));
        }
        if (enclosing != ISA_NONE) {
            g.parent = enclosing;
            g.parent_name = no_tok;
        }
    }
    if (!expect(P, '{', "to open the block"))
        return false;

    uint32_t r = (uint32_t)P->regions.n;
    if (!name_add(P, NS_REGION, 0, &g.name, r) || (g.kind == ISA_REGION_ROOT && !name_add(P, NS_ENTRY, 0, &g.entry, r)))
        return false;
    as_region *slot = vec_push(P, &P->regions);
    if (!slot)
        return false;
    *slot = g;
    if (++P->depth > AS_MAX_NEST)
        return fail(P, &kw, "loops nested more than %d deep (write them as 'loop NAME in PARENT')", AS_MAX_NEST);
    bool ok = parse_body(P, r);
    P->depth--;
    if (!ok)
        return false;
    as_tok *t = peek(P);
    if (!is_end(t))
        return fail(P, t, "expected end of line after '}', got %s", TDESC(t));
    return true;
}

static bool parse_file(as_parser *P)
{
    for (;;) {
        as_tok *t = peek(P);
        if (t->kind == TK_EOF)
            return true;
        if (t->kind == TK_NL) {
            next(P);
            continue;
        }
        if (is_kw(t, "entry") || is_kw(t, "func") || is_kw(t, "loop")) {
            if (!parse_block(P, ISA_NONE))
                return false;
            continue;
        }
        if (is_kw(t, "const")) {
            if (!parse_const_decl(P))
                return false;
            continue;
        }
        if (is_kw(t, "source") && peek2(P)->kind == TK_QNAME) { /* source "mlp.tfg" */
            if (P->source.kind != TK_EOF)
                return fail(P, t, "a second 'source' line");
            next(P);
            P->source = *next(P);
            continue;
        }
        return fail(P, t, "expected 'entry', 'func', 'loop' or 'const', got %s", TDESC(t));
    }
}

/* ---- Resolution --------------------------------------------------------------------------- */
static const as_tok *name_tok(const as_parser *P, const as_name *n)
{
    switch (n->kind) {
    case NS_REGION: return &REG(n->value)->name;
    case NS_ENTRY: return &REG(n->value)->entry;
    default: return &INS(n->value)->label;
    }
}

/* Sorts the names; a name defined twice in one scope is an error at its
 * second definition (the one earliest in the text, if there are several). */
static bool index_names(as_parser *P)
{
    as_name *v = P->names.data;
    size_t n = P->names.n;
    if (n)
        qsort(v, n, sizeof *v, cmp_name);
    const as_name *first = NULL, *dup = NULL;
    for (size_t k = 1; k < n; k++) {
        if (cmp_key(&v[k - 1], &v[k]) != 0)
            continue;
        size_t g = k - 1;
        while (g > 0 && cmp_key(&v[g - 1], &v[k]) == 0)
            g--;
        const as_tok *t = name_tok(P, &v[k]), *bt = dup ? name_tok(P, dup) : NULL;
        if (!dup || t->line < bt->line || (t->line == bt->line && t->col < bt->col)) {
            first = &v[g];
            dup = &v[k];
        }
        while (k + 1 < n && cmp_key(&v[k], &v[k + 1]) == 0)
            k++;
    }
    if (!dup)
        return true;
    const as_tok *t = name_tok(P, dup), *ft = name_tok(P, first);
    switch (dup->kind) {
    case NS_REGION:
        return fail(P, t, "duplicate region name %s (first at %u:%u)", TDESC(t), ft->line, ft->col);
    case NS_ENTRY:
        return fail(P, t, "duplicate entry name %s (first at %u:%u)", TDESC(t), ft->line, ft->col);
    case NS_LABEL:
        return fail(P, t, "duplicate label %s (first at %u:%u)", TDESC(t), ft->line, ft->col);
    default:
        return fail(P, t, "duplicate name %s in %s (first at %u:%u)", TDESC(t), RDESC(dup->scope), ft->line,
                    ft->col);
    }
}

static bool resolve_regions(as_parser *P)
{
    for (uint32_t r = 0; r < P->regions.n; r++) {
        as_region *g = REG(r);
        if (g->kind != ISA_REGION_LOOP || g->parent != ISA_NONE)
            continue;
        const as_name *s = name_get(P, NS_REGION, 0, &g->parent_name);
        if (!s)
            return fail(P, &g->parent_name, "region %s is not defined", TDESC(&g->parent_name));
        if (s->value >= r)
            return fail(P, &g->parent_name, "loop '%.*s' must come after its parent region '%.*s'", RNAME(r),
                        (int)g->parent_name.len, g->parent_name.s);
        g->parent = s->value;
    }
    return true;
}

static int cmp_use(const void *a, const void *b)
{
    const as_use *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->inst < y->inst ? -1 : x->inst > y->inst;
}

static bool lookup_region(as_parser *P, const as_tok *t, uint32_t *r)
{
    *r = 0;
    const as_name *s = name_get(P, NS_REGION, 0, t);
    if (!s)
        return fail(P, t, "region %s is not defined", TDESC(t));
    *r = s->value;
    return true;
}

/* ENTER frames, and the sites table: uses grouped by id must agree on the
 * callee and on the calling region, and each site needs a CALL. */
static bool resolve_attrs(as_parser *P)
{
    for (uint32_t i = 0; i < P->insts.n; i++) {
        as_inst *in = INS(i);
        if (in->op != ISA_ENTER)
            continue;
        uint32_t f = 0;
        if (!lookup_region(P, &in->target, &f))
            return false;
        if (REG(f)->kind != ISA_REGION_LOOP)
            return fail(P, &in->target, "ENTER needs a loop, but %s is not one", RDESC(f));
        if (REG(f)->parent != in->region)
            return fail(P, &in->target, "ENTER %.*s must be in region '%.*s' (the loop's parent), not in %s",
                        RNAME(f), RNAME(REG(f)->parent), RDESC(in->region));
        in->a = f;
    }
    size_t n = P->uses.n;
    as_use *u = P->uses.data;
    if (n)
        qsort(u, n, sizeof *u, cmp_use);
    P->site_of = ut_calloc(P->alloc, P->insts.n ? P->insts.n : 1, sizeof *P->site_of);
    if (!P->site_of)
        return nomem(P);
    uint32_t s = 0;
    for (size_t k = 0; k < n;) {
        size_t end = k;
        while (end < n && u[end].id == u[k].id)
            end++;
        const as_inst *first = INS(u[k].inst);
        uint32_t callee = 0;
        if (!lookup_region(P, &first->target, &callee))
            return false;
        if (REG(callee)->kind != ISA_REGION_FUNC)
            return fail(P, &first->target, "%s calls %s, which is not a func", first->op == ISA_CALL ? "CALL" : "RETURN",
                        RDESC(callee));
        bool has_call = false;
        for (size_t j = k; j < end; j++) {
            const as_inst *in = INS(u[j].inst);
            if (!tok_eq(&in->target, &first->target))
                return fail(P, &in->target, "site %u calls '%.*s' here but '%.*s' at %u:%u", in->site,
                            (int)in->target.len, in->target.s, (int)first->target.len, first->target.s,
                            first->target.line, first->target.col);
            if (in->region != first->region)
                return fail(P, &in->optok, "site %u is used in %s here but in region '%.*s' at %u:%u", in->site,
                            RDESC(in->region), RNAME(first->region), first->optok.line, first->optok.col);
            has_call |= in->op == ISA_CALL;
        }
        if (!has_call)
            return fail(P, &first->optok, "site %u has no CALL (each call site needs at least one CALL)", first->site);
        isa_site *site = vec_push(P, &P->sites);
        if (!site)
            return false;
        *site = (isa_site){u[k].id, callee};
        /* until build(), a CALL/RETURN's `a` is its callee: lands() needs it */
        for (size_t j = k; j < end; j++) {
            INS(u[j].inst)->a = callee;
            P->site_of[u[j].inst] = s;
        }
        s++;
        k = end;
    }
    return true;
}

/* entry #K: all entries or none carry an index, and the indices are 0..n-1. */
static bool check_entry_index(as_parser *P)
{
    size_t nr = P->regions.n ? P->regions.n : 1;
    uint32_t *entry_at = P->entry_at = ut_alloc(P->alloc, nr * sizeof *entry_at);
    if (!entry_at)
        return nomem(P);
    memset(entry_at, 0xff, nr * sizeof *entry_at);
    uint32_t n = 0, with = 0;
    for (uint32_t r = 0; r < P->regions.n; r++) {
        const as_region *g = REG(r);
        if (g->kind == ISA_REGION_ROOT) {
            n++;
            with += g->index_tok.kind != TK_EOF;
        }
    }
    uint32_t k = 0;
    for (uint32_t r = 0; r < P->regions.n; r++) {
        const as_region *g = REG(r);
        if (g->kind != ISA_REGION_ROOT)
            continue;
        if (!with) {
            entry_at[k++] = r;
            continue;
        }
        if (g->index_tok.kind == TK_EOF)
            return fail(P, &g->entry, "entry '%.*s' needs an index (entry #K %.*s) like the other entries",
                        (int)g->entry.len, g->entry.s, (int)g->entry.len, g->entry.s);
        if (g->index >= n)
            return fail(P, &g->index_tok, "entry #%u out of range (%u entr%s)", g->index, n, n == 1 ? "y" : "ies");
        if (entry_at[g->index] != ISA_NONE) {
            const as_region *o = REG(entry_at[g->index]);
            return fail(P, &g->index_tok, "entry #%u is already '%.*s' (at %u:%u)", g->index, (int)o->entry.len,
                        o->entry.s, o->index_tok.line, o->index_tok.col);
        }
        entry_at[g->index] = r;
    }
    return true;
}

static bool check_regions(as_parser *P)
{
    for (uint32_t i = 0; i < P->insts.n; i++) {
        const as_inst *in = INS(i);
        if ((in->op == ISA_CONST || isa_ops[in->op].attr == ISA_ATTR_CHAN) && in->ctab && in->a >= P->decls.n)
            return fail(P, &in->optok, "const #%u is not declared (%zu declared)", in->a, P->decls.n);
        if (in->imm_ctab && in->b >= P->decls.n)
            return fail(P, &in->optok, "const #%u is not declared (%zu declared)", in->b, P->decls.n);
        if (in->shape_ctab && in->shape - 1 >= P->decls.n)
            return fail(P, &in->optok, "const #%u is not declared (%zu declared)", in->shape - 1, P->decls.n);
    }
    /* each loop needs a non-const ENTER; each entry result needs its RESULT */
    bool *entered = ut_calloc(P->alloc, P->regions.n ? P->regions.n : 1, sizeof *entered);
    if (!entered)
        return nomem(P);
    for (uint32_t i = 0; i < P->insts.n; i++) {
        const as_inst *in = INS(i);
        if (in->op == ISA_ENTER && !(in->flags & ISA_FLAG_CONST))
            entered[in->a] = true;
    }
    bool ok = true;
    for (uint32_t r = 0; ok && r < P->regions.n; r++) {
        const as_region *g = REG(r);
        if (g->kind == ISA_REGION_LOOP && !entered[r])
            ok = fail(P, &g->name, "loop '%.*s' has no ENTER (a loop needs at least one ENTER without const)",
                      RNAME(r));
        for (uint32_t k = 0; ok && g->kind == ISA_REGION_ROOT && k < g->n_results; k++)
            if (!PRM(g->result_first + k)->seen_line)
                ok = fail(P, &g->entry, "entry '%.*s' has no RESULT %u", (int)g->entry.len, g->entry.s, k);
    }
    ut_free(P->alloc, entered, (P->regions.n ? P->regions.n : 1) * sizeof *entered);
    return ok;
}

/* Final order: grouped by region index, textual order within a region. */
static bool order_insts(as_parser *P)
{
    size_t n = P->insts.n, nr = P->regions.n;
    P->order = ut_calloc(P->alloc, n ? n : 1, sizeof *P->order);
    uint32_t *start = ut_calloc(P->alloc, nr + 1, sizeof *start);
    if (!P->order || !start) {
        ut_free(P->alloc, start, (nr + 1) * sizeof *start);
        return nomem(P);
    }
    for (size_t i = 0; i < n; i++)
        start[INS(i)->region + 1]++;
    for (size_t r = 0; r < nr; r++)
        start[r + 1] += start[r];
    for (uint32_t i = 0; i < n; i++) {
        as_inst *in = INS(i);
        in->final = start[in->region]++;
        P->order[in->final] = i;
    }
    ut_free(P->alloc, start, (nr + 1) * sizeof *start);
    return true;
}

/* Where the tokens of S arrive (lands) and where D reads from (docs/isa.md). */
static uint32_t lands(const as_parser *P, const as_inst *s)
{
    switch (s->op) {
    case ISA_ENTER: return s->a;
    case ISA_EXIT: return REG(s->region)->parent;
    case ISA_CALL: return s->a; /* the callee region until build() */
    default: return s->region;
    }
}

static bool resolve_ref(as_parser *P, const as_inst *d, const as_ref *ref, uint32_t *src)
{
    const as_name *s;
    if (ref->qual.kind != TK_EOF) {
        uint32_t r = 0;
        if (!lookup_region(P, &ref->qual, &r))
            return false;
        s = name_get(P, NS_INST, r, &ref->name);
        if (!s)
            return fail(P, &ref->name, "%s is not defined in region '%.*s'", TDESC(&ref->name), RNAME(r));
    } else if (ref->name.kind == TK_LABEL) {
        s = name_get(P, NS_LABEL, 0, &ref->name);
        if (!s)
            return fail(P, &ref->name, "label %s is not defined", TDESC(&ref->name));
    } else {
        s = NULL;
        for (uint32_t r = d->region; !s && r != ISA_NONE; r = REG(r)->parent)
            s = name_get(P, NS_INST, r, &ref->name);
        if (!s)
            return fail(P, &ref->name, "%s is not defined in region '%.*s' or its parents", TDESC(&ref->name),
                        RNAME(d->region));
    }
    *src = s->value;
    return true;
}

static int cmp_edge(const void *a, const void *b)
{
    const as_edge *x = a, *y = b;
    if (x->src != y->src) return x->src < y->src ? -1 : 1;
    if (x->out != y->out) return x->out < y->out ? -1 : 1;
    if (x->dst != y->dst) return x->dst < y->dst ? -1 : 1;
    if (x->port != y->port) return x->port < y->port ? -1 : 1;
    return x->ref < y->ref ? -1 : x->ref > y->ref;
}

static bool resolve_edges(as_parser *P)
{
    for (uint32_t i = 0; i < P->insts.n; i++) {
        const as_inst *d = INS(i);
        uint32_t from = d->op == ISA_RETURN ? d->a : d->region;
        for (uint32_t p = 0; p < d->n_in + d->n_ctl; p++) {
            const as_port *port = PORT(d->port_first + p);
            for (uint32_t k = 0; k < port->n; k++) {
                uint32_t ri = port->first + k, si = 0;
                const as_ref *ref = REF(ri);
                if (!resolve_ref(P, d, ref, &si))
                    return false;
                const as_inst *s = INS(si);
                const isa_op_info *sinfo = &isa_ops[s->op];
                if (sinfo->n_out == 0)
                    return fail(P, &ref->name, "%s is a %s and has no outputs", TDESC(&ref->name), sinfo->name);
                if (ref->out >= (uint32_t)sinfo->n_out)
                    return fail(P, &ref->name, "%s has no output %u (%s has %d output%s)", TDESC(&ref->name),
                                ref->out, sinfo->name, sinfo->n_out, sinfo->n_out == 1 ? "" : "s");
                uint32_t to = lands(P, s);
                if (to != from) {
                    char src[200], dst[200];
                    if (s->op == ISA_ENTER || s->op == ISA_EXIT || s->op == ISA_CALL)
                        snprintf(src, sizeof src, "%s (%s) delivers into region '%.*s'", TDESC(&ref->name),
                                 sinfo->name, RNAME(to));
                    else
                        snprintf(src, sizeof src, "%s is in region '%.*s'", TDESC(&ref->name), RNAME(to));
                    if (d->op == ISA_RETURN)
                        snprintf(dst, sizeof dst, "RETURN reads from its callee '%.*s'", RNAME(from));
                    else
                        snprintf(dst, sizeof dst, "this %s is in region '%.*s'", isa_ops[d->op].name, RNAME(from));
                    return fail(P, &ref->at, "%s, but %s (only ENTER, EXIT, CALL and RETURN cross regions)", src,
                                dst);
                }
                as_edge *e = vec_push(P, &P->edges);
                if (!e)
                    return false;
                *e = (as_edge){s->final, ref->out, d->final, p, ri};
            }
        }
    }
    as_edge *e = P->edges.data;
    size_t n = P->edges.n;
    if (n)
        qsort(e, n, sizeof *e, cmp_edge);
    for (size_t k = 1; k < n; k++) {
        if (e[k].src == e[k - 1].src && e[k].out == e[k - 1].out && e[k].dst == e[k - 1].dst &&
            e[k].port == e[k - 1].port) {
            const as_ref *ref = REF(e[k].ref);
            const as_inst *d = INS(P->order[e[k].dst]);
            bool ctl = e[k].port >= d->n_in;
            return fail(P, &ref->at, "%s already feeds %sinput %u of this instruction", TDESC(&ref->name),
                        ctl ? "control " : "", ctl ? e[k].port - d->n_in : e[k].port);
        }
    }
    return true;
}

/* ---- Building the program ------------------------------------------------------------------ */
static const char *dup_tok(isa_program *p, const as_tok *t)
{
    return ut_arena_strndup(&p->arena, t->s, t->len);
}

/* The variable table: each `var` suffix at its instruction's final index,
 * sorted; an output the instruction does not have is the verifier's to
 * report. */
static bool build_vars(as_parser *P, isa_program *p)
{
    if (!P->vars.n)
        return true;
    p->vars = ut_arena_array(&p->arena, P->vars.n, sizeof *p->vars);
    if (!p->vars)
        return nomem(P);
    for (size_t k = 0; k < P->vars.n; k++) {
        const as_var *v = VEC_AT(P->vars, as_var, k);
        p->vars[k] = (isa_var){dup_tok(p, &v->name), INS(v->inst)->final, v->out};
        if (!p->vars[k].name)
            return nomem(P);
    }
    p->n_vars = (uint32_t)P->vars.n;
    isa_vars_sort(p);
    return true;
}

/* the names of pa's symbolic dims (f32[batch, 3]) into d; false: no memory */
static bool set_dim_names(isa_program *p, isa_param *d, const as_param *pa)
{
    const char *names[TFVM_MAX_RANK] = {0};
    bool any = false;
    for (unsigned k = 0; k < pa->ndim; k++)
        if (pa->dim_names[k].len) {
            if (!(names[k] = dup_tok(p, &pa->dim_names[k])))
                return false;
            any = true;
        }
    return !any || isa_param_set_dim_names(p, d, names);
}

static bool put_const(as_parser *P, isa_program *p, const as_const *c)
{
    isa_const *dc = &p->consts[p->n_consts++];
    dc->dtype = c->dtype;
    dc->rank = c->rank;
    memcpy(dc->dims, c->dims, sizeof dc->dims);
    dc->nbytes = c->nbytes;
    void *data = ut_arena_alloc(&p->arena, c->nbytes);
    if (!data)
        return nomem(P);
    if (c->nbytes)
        memcpy(data, P->data.data + c->off, c->nbytes);
    dc->data = data;
    return true;
}

static bool build(as_parser *P, isa_program *p)
{
    ut_arena *ar = &p->arena;
    size_t nr = P->regions.n, ni = P->insts.n, ne = P->edges.n, nc = P->consts.n;
    if (ni >= UINT32_MAX || ne >= UINT32_MAX)
        return fail_at(P, 1, 1, "program is too large");
    p->n_regions = (uint32_t)nr;
    p->regions = ut_arena_array(ar, nr ? nr : 1, sizeof *p->regions);
    p->insts = ut_arena_array(ar, ni ? ni : 1, sizeof *p->insts);
    p->edges = ut_arena_array(ar, ne ? ne : 1, sizeof *p->edges);
    p->consts = ut_arena_array(ar, nc ? nc : 1, sizeof *p->consts);
    p->sites = ut_arena_array(ar, P->sites.n ? P->sites.n : 1, sizeof *p->sites);
    if (!p->regions || !p->insts || !p->edges || !p->consts || !p->sites)
        return nomem(P);
    uint32_t n_entries = 0;
    const uint32_t *entry_at = P->entry_at;
    for (uint32_t r = 0; r < nr; r++) {
        const as_region *g = REG(r);
        isa_region *d = &p->regions[r];
        d->kind = g->kind;
        d->parent = g->kind == ISA_REGION_LOOP ? g->parent : ISA_NONE;
        if (!(d->name = dup_tok(p, &g->name)))
            return nomem(P);
        n_entries += g->kind == ISA_REGION_ROOT;
    }
    p->entries = ut_arena_array(ar, n_entries ? n_entries : 1, sizeof *p->entries);
    if (!p->entries)
        return nomem(P);
    for (uint32_t ei = 0; ei < n_entries; ei++) {
        uint32_t r = entry_at[ei];
        const as_region *g = REG(r);
        isa_entry *e = &p->entries[p->n_entries++];
        e->region = r;
        e->n_params = g->n_params;
        e->n_results = g->n_results;
        e->params = ut_arena_array(ar, g->n_params ? g->n_params : 1, sizeof *e->params);
        e->results = ut_arena_array(ar, g->n_results ? g->n_results : 1, sizeof *e->results);
        if (!(e->name = dup_tok(p, &g->entry)) || !e->params || !e->results)
            return nomem(P);
        for (uint32_t k = 0; k < g->n_params + g->n_results; k++) {
            const as_param *pa = PRM(g->param_first + k);
            isa_param *d = k < g->n_params ? &e->params[k] : &e->results[k - g->n_params];
            d->dtype = pa->dtype;
            d->rank = pa->rank;
            if (!(d->name = dup_tok(p, &pa->name)))
                return nomem(P);
            if (pa->shaped && !isa_param_set_shape(p, d, pa->ndim, pa->dims))
                return nomem(P);
            if (pa->shaped && !set_dim_names(p, d, pa))
                return nomem(P);
            if (pa->has_default && pa->dflt >= P->decls.n)
                return fail(P, &pa->dflt_tok, "default #%" PRIu32 " of '%.*s' is not a declared constant (%zu declared)",
                            pa->dflt, (int)pa->name.len, pa->name.s, P->decls.n);
            d->has_default = pa->has_default;
            d->dflt = pa->dflt;
        }
    }
    if (P->sites.n)
        memcpy(p->sites, P->sites.data, P->sites.n * sizeof *p->sites);
    p->n_sites = (uint32_t)P->sites.n;
    /* constants: the declared table first, then one per inline CONST in order */
    for (size_t k = 0; k < P->decls.n; k++)
        if (!put_const(P, p, CST(VEC_AT(P->decls, uint32_t, k)[0])))
            return false;
    uint32_t edge_at = 0;
    const as_edge *edges = P->edges.data;
    for (uint32_t f = 0; f < ni; f++) {
        const as_inst *in = INS(P->order[f]);
        isa_inst *d = &p->insts[f];
        d->op = in->op;
        d->flags = in->flags;
        d->region = in->region;
        d->n_in = in->n_in;
        d->n_ctl = in->n_ctl;
        d->a = in->a;
        d->b = in->b;
        d->line = in->line;
        d->col = in->col;
        if ((in->origin.len && !(d->origin = dup_tok(p, &in->origin))) ||
            (in->origin_op.len && !(d->origin_op = dup_tok(p, &in->origin_op))))
            return nomem(P);
        if (in->op == ISA_CALL || in->op == ISA_RETURN)
            d->a = P->site_of[P->order[f]];
        if ((in->op == ISA_CONST || isa_ops[in->op].attr == ISA_ATTR_CHAN) && !in->ctab) {
            d->a = p->n_consts;
            if (!put_const(P, p, CST(in->a)))
                return false;
        }
        if (in->shape_ctab) {
            d->b |= in->shape << ISA_CHAN_SHAPE_SHIFT;
        } else if (in->shape) {
            d->b |= (p->n_consts + 1) << ISA_CHAN_SHAPE_SHIFT;
            if (!put_const(P, p, CST(in->shape - 1)))
                return false;
        }
        if (((in->flags & ISA_FLAG_IMM_MASK) || in->op == ISA_BRANCH) && !in->imm_ctab) {
            d->b = p->n_consts;
            if (!put_const(P, p, CST(in->b)))
                return false;
        }
        if (in->label.kind == TK_IDENT && !(d->name = dup_tok(p, &in->label)))
            return nomem(P);
        d->edge_first = edge_at;
        while (edge_at < ne && edges[edge_at].src == f) {
            p->edges[edge_at] = (isa_edge){edges[edge_at].out, edges[edge_at].dst, edges[edge_at].port};
            edge_at++;
        }
        d->n_edges = edge_at - d->edge_first;
    }
    p->n_insts = (uint32_t)ni;
    p->n_edges = (uint32_t)ne;
    return build_vars(P, p);
}

tfvm_status ld_assemble(const char *text, size_t len, const char *name, const tfvm_allocator *a,
                        isa_program *out, tfvm_error *err)
{
    isa_program_init(out, a);
    ut_err_clear(err);
    as_parser P;
    memset(&P, 0, sizeof P);
    P.source = no_tok;
    P.alloc = &out->alloc;
    P.name = name ? name : "<tfasm>";
    P.text = text ? text : "";
    P.len = text ? len : 0;
    P.err = err;
    vec_init(&P.toks, sizeof(as_tok));
    vec_init(&P.regions, sizeof(as_region));
    vec_init(&P.params, sizeof(as_param));
    vec_init(&P.insts, sizeof(as_inst));
    vec_init(&P.ports, sizeof(as_port));
    vec_init(&P.refs, sizeof(as_ref));
    vec_init(&P.consts, sizeof(as_const));
    vec_init(&P.uses, sizeof(as_use));
    vec_init(&P.edges, sizeof(as_edge));
    vec_init(&P.sites, sizeof(isa_site));
    vec_init(&P.decls, sizeof(uint32_t));
    vec_init(&P.names, sizeof(as_name));
    vec_init(&P.vars, sizeof(as_var));
    ut_buf_init(&P.data, P.alloc);

    bool ok = lex(&P) && parse_file(&P) && index_names(&P) && resolve_regions(&P) && resolve_attrs(&P) && order_insts(&P) &&
              resolve_edges(&P) && check_regions(&P) && check_entry_index(&P) && build(&P, out);
    if (ok)
        out->name = ut_arena_strdup(&out->arena, P.name);
    if (ok && P.source.kind != TK_EOF && !(out->source = ut_arena_strndup(&out->arena, P.source.s, P.source.len)))
        ok = nomem(&P);
    if (ok && !out->name)
        ok = nomem(&P);

    ut_free(P.alloc, P.order, (P.insts.n ? P.insts.n : 1) * sizeof *P.order);
    ut_free(P.alloc, P.entry_at, (P.regions.n ? P.regions.n : 1) * sizeof *P.entry_at);
    ut_free(P.alloc, P.site_of, (P.insts.n ? P.insts.n : 1) * sizeof *P.site_of);
    ut_buf_free(&P.data);
    as_vec *vecs[] = {&P.toks, &P.regions, &P.params, &P.insts, &P.ports, &P.refs, &P.consts, &P.uses, &P.edges,
                       &P.sites, &P.decls, &P.names, &P.vars};
    for (size_t k = 0; k < UT_COUNTOF(vecs); k++)
        vec_free(&P, vecs[k]);

    tfvm_status st = ok ? ld_verify(out, err) : P.st;
    if (st != TFVM_OK)
        isa_program_release(out);
    return st;
}
