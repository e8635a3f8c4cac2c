/* compiler/lex.c — .tfg source text to tokens (docs/language.md, "Lexical
 * structure"). The whole file is tokenized up front so the parser can look
 * ahead freely; positions are 1-based line and byte column. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"

static const char *const tk_names[CC_T_COUNT] = {
    [CC_T_EOF] = "end of file", [CC_T_IDENT] = "identifier", [CC_T_INT] = "integer", [CC_T_FLOAT] = "number",
    [CC_T_FN] = "'fn'", [CC_T_LET] = "'let'", [CC_T_IF] = "'if'", [CC_T_ELSE] = "'else'",
    [CC_T_WHILE] = "'while'", [CC_T_TRUE] = "'true'", [CC_T_FALSE] = "'false'",
    [CC_T_LPAREN] = "'('", [CC_T_RPAREN] = "')'", [CC_T_LBRACE] = "'{'", [CC_T_RBRACE] = "'}'",
    [CC_T_LBRACK] = "'['", [CC_T_RBRACK] = "']'", [CC_T_COMMA] = "','", [CC_T_SEMI] = "';'",
    [CC_T_COLON] = "':'", [CC_T_ASSIGN] = "'='", [CC_T_ARROW] = "'->'", [CC_T_QUESTION] = "'?'",
    [CC_T_PLUS] = "'+'", [CC_T_MINUS] = "'-'", [CC_T_STAR] = "'*'", [CC_T_SLASH] = "'/'",
    [CC_T_PERCENT] = "'%'", [CC_T_LT] = "'<'", [CC_T_LE] = "'<='", [CC_T_GT] = "'>'", [CC_T_GE] = "'>='",
    [CC_T_EQ] = "'=='", [CC_T_NE] = "'!='", [CC_T_AND] = "'&&'", [CC_T_OR] = "'||'", [CC_T_NOT] = "'!'",
    [CC_T_VAR] = "'var'", [CC_T_FOR] = "'for'", [CC_T_IN] = "'in'", [CC_T_RETURN] = "'return'",
    [CC_T_CONST] = "'const'", [CC_T_BAND] = "'&'", [CC_T_BOR] = "'|'", [CC_T_XOR] = "'^'", [CC_T_SHL] = "'<<'",
    [CC_T_SHR] = "'>>'", [CC_T_TILDE] = "'~'", [CC_T_PLUS_EQ] = "'+='", [CC_T_MINUS_EQ] = "'-='",
    [CC_T_STAR_EQ] = "'*='", [CC_T_SLASH_EQ] = "'/='", [CC_T_PERCENT_EQ] = "'%='", [CC_T_DOTDOT] = "'..'",
    [CC_T_BAND_EQ] = "'&='", [CC_T_BOR_EQ] = "'|='", [CC_T_XOR_EQ] = "'^='", [CC_T_SHL_EQ] = "'<<='",
    [CC_T_SHR_EQ] = "'>>='", [CC_T_STRING] = "string", [CC_T_BREAK] = "'break'", [CC_T_CONTINUE] = "'continue'",
};

const char *cc_tk_name(cc_tk k) { return k < CC_T_COUNT && tk_names[k] ? tk_names[k] : "token"; }

static const struct {
    const char *word;
    cc_tk kind;
} keywords[] = {
    {"fn", CC_T_FN}, {"let", CC_T_LET}, {"if", CC_T_IF}, {"else", CC_T_ELSE},
    {"while", CC_T_WHILE}, {"true", CC_T_TRUE}, {"false", CC_T_FALSE}, {"var", CC_T_VAR},
    {"for", CC_T_FOR}, {"in", CC_T_IN}, {"return", CC_T_RETURN}, {"const", CC_T_CONST},
    {"break", CC_T_BREAK}, {"continue", CC_T_CONTINUE},
};

static bool is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }

typedef struct lexer {
    cc *C;
    size_t i;
    uint32_t line, col;
    uint32_t cap;
} lexer;

static cc_pos here(const lexer *L) { return (cc_pos){L->line, L->col}; }

static void advance(lexer *L, size_t n)
{
    for (size_t k = 0; k < n && L->i < L->C->len; k++) {
        if (L->C->src[L->i] == '\n') {
            L->line++;
            L->col = 1;
        } else {
            L->col++;
        }
        L->i++;
    }
}

static int peekc(const lexer *L, size_t k)
{
    return L->i + k < L->C->len ? (unsigned char)L->C->src[L->i + k] : -1;
}

static cc_tok *push(lexer *L, cc_tk kind, cc_pos pos, size_t start, size_t len)
{
    cc *C = L->C;
    C->toks = cc_grow(C, C->toks, C->n_toks, &L->cap, sizeof *C->toks);
    cc_tok *t = &C->toks[C->n_toks++];
    t->kind = (uint8_t)kind;
    t->pos = pos;
    t->text = C->src + start;
    t->len = (uint32_t)len;
    return t;
}

/* A numeric suffix: i32, i64, f32, f64 directly after the digits. */
static uint8_t suffix_of(lexer *L, size_t *n)
{
    const char *s = L->C->src + L->i + *n;
    size_t rest = L->C->len - L->i - *n;
    if (rest >= 3 && (s[0] == 'i' || s[0] == 'f') && is_digit(s[1]) && is_digit(s[2]) &&
        (rest == 3 || !(is_alpha(s[3]) || is_digit(s[3])))) {
        tfvm_dtype d = isa_dtype_by_name(s, 3);
        if (d) {
            *n += 3;
            return (uint8_t)d;
        }
    }
    return 0;
}

/* A run of digits of the given base from offset *n, with '_' between
 * digits (1_000_000, 0xFFFF_FFFF): *n moves past it; false when a '_' does
 * not stand between two digits. `lead` allows a '_' right after a prefix. */
static bool digit_run(const lexer *L, size_t *n, int base, bool lead)
{
    bool ok = true, prev_digit = lead;
    for (;;) {
        int c = peekc(L, *n);
        bool digit = base == 16 ? (is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))
                                : c >= '0' && c < '0' + base;
        if (c == '_') {
            ok &= prev_digit;
            prev_digit = false;
        } else if (digit) {
            prev_digit = true;
        } else {
            return ok && (prev_digit || *n == 0);
        }
        ++*n;
    }
}

static int digit_value(char c)
{
    return is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* The magnitude of an integer literal's digits (saturating, with t->big). */
static void int_value(cc_tok *t, const char *s, size_t len, unsigned base)
{
    uint64_t v = 0;
    for (size_t k = 0; k < len; k++) {
        if (s[k] == '_')
            continue;
        unsigned d = (unsigned)digit_value(s[k]);
        if (v > (UINT64_MAX - d) / base) {
            t->big = true;
            v = UINT64_MAX;
            break;
        }
        v = v * base + d;
    }
    t->ival = v;
}

_Noreturn static void bad_number(lexer *L, cc_pos pos, size_t n)
{
    while (is_alpha(peekc(L, n)) || is_digit(peekc(L, n)))
        n++;
    cc_error(L->C, pos, TFVM_ERR_SYNTAX, "bad number '%.*s'", (int)n, L->C->src + L->i);
}

/* 0x1F, 0b1010 (with '_' separators): integers only, so a suffix is i32 or i64. */
static void lex_radix(lexer *L, cc_pos pos)
{
    unsigned base = (peekc(L, 1) | 0x20) == 'x' ? 16 : 2;
    size_t n = 2;
    if (!digit_run(L, &n, (int)base, true) || n == 2)
        bad_number(L, pos, n);
    size_t digits = n;
    uint8_t suffix = suffix_of(L, &n);
    if (suffix && isa_dtype_float((tfvm_dtype)suffix))
        bad_number(L, pos, n);
    if (is_alpha(peekc(L, n)) || is_digit(peekc(L, n)))
        bad_number(L, pos, n);
    cc_tok *t = push(L, CC_T_INT, pos, L->i, n);
    t->suffix = suffix;
    int_value(t, L->C->src + L->i + 2, digits - 2, base);
    advance(L, n);
}

static void lex_number(lexer *L)
{
    cc *C = L->C;
    cc_pos pos = here(L);
    if (peekc(L, 0) == '0' && ((peekc(L, 1) | 0x20) == 'x' || (peekc(L, 1) | 0x20) == 'b')) {
        lex_radix(L, pos);
        return;
    }
    size_t n = 0;
    bool is_float = false, ok = digit_run(L, &n, 10, false);
    if (peekc(L, n) == '.' && is_digit(peekc(L, n + 1))) {
        is_float = true;
        n++;
        ok &= digit_run(L, &n, 10, false);
    }
    if (peekc(L, n) == 'e' || peekc(L, n) == 'E') {
        size_t m = n + 1;
        if (peekc(L, m) == '+' || peekc(L, m) == '-')
            m++;
        if (is_digit(peekc(L, m))) {
            is_float = true;
            n = m;
            ok &= digit_run(L, &n, 10, false);
        }
    }
    size_t digits = n;
    uint8_t suffix = suffix_of(L, &n);
    if (!ok || is_alpha(peekc(L, n)) || is_digit(peekc(L, n)))
        bad_number(L, pos, n);
    cc_tok *t = push(L, is_float ? CC_T_FLOAT : CC_T_INT, pos, L->i, n);
    t->suffix = suffix;
    if (is_float) {
        char buf[128];
        size_t len = 0;
        for (size_t k = 0; k < digits; k++) /* strtod knows no '_' */
            if (C->src[L->i + k] != '_') {
                if (len + 1 >= sizeof buf)
                    cc_error(C, pos, TFVM_ERR_SYNTAX, "number too long");
                buf[len++] = C->src[L->i + k];
            }
        buf[len] = '\0';
        t->fval = strtod(buf, NULL); /* the build runs in the "C" locale */
    } else {
        int_value(t, C->src + L->i, digits, 10);
    }
    advance(L, n);
}

void cc_lex(cc *C)
{
    lexer L = {C, 0, 1, 1, 0};
    for (;;) {
        int c = peekc(&L, 0);
        if (c < 0)
            break;
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            advance(&L, 1);
            continue;
        }
        if (c == '/' && peekc(&L, 1) == '/') {
            while (peekc(&L, 0) >= 0 && peekc(&L, 0) != '\n')
                advance(&L, 1);
            continue;
        }
        if (c == '/' && peekc(&L, 1) == '*') {
            cc_pos start = here(&L);
            advance(&L, 2);
            while (!(peekc(&L, 0) == '*' && peekc(&L, 1) == '/')) {
                if (peekc(&L, 0) < 0)
                    cc_error(C, start, TFVM_ERR_SYNTAX, "unterminated comment");
                advance(&L, 1);
            }
            advance(&L, 2);
            continue;
        }
        cc_pos pos = here(&L);
        if (is_alpha(c)) {
            size_t n = 0;
            while (is_alpha(peekc(&L, n)) || is_digit(peekc(&L, n)))
                n++;
            if (n > 127)
                cc_error(C, pos, TFVM_ERR_SYNTAX, "identifier longer than 127 characters");
            cc_tk kind = CC_T_IDENT;
            for (size_t k = 0; k < UT_COUNTOF(keywords); k++)
                if (strlen(keywords[k].word) == n && memcmp(keywords[k].word, C->src + L.i, n) == 0)
                    kind = keywords[k].kind;
            push(&L, kind, pos, L.i, n);
            advance(&L, n);
            continue;
        }
        if (is_digit(c)) {
            lex_number(&L);
            continue;
        }
        int d = peekc(&L, 1);
        cc_tk kind;
        size_t n = 1;
        switch (c) {
        case '(': kind = CC_T_LPAREN; break;
        case ')': kind = CC_T_RPAREN; break;
        case '{': kind = CC_T_LBRACE; break;
        case '}': kind = CC_T_RBRACE; break;
        case '[': kind = CC_T_LBRACK; break;
        case ']': kind = CC_T_RBRACK; break;
        case ',': kind = CC_T_COMMA; break;
        case ';': kind = CC_T_SEMI; break;
        case ':': kind = CC_T_COLON; break;
        case '?': kind = CC_T_QUESTION; break;
        case '~': kind = CC_T_TILDE; break;
        case '^': kind = d == '=' ? (n = 2, CC_T_XOR_EQ) : CC_T_XOR; break;
        case '+': kind = d == '=' ? (n = 2, CC_T_PLUS_EQ) : CC_T_PLUS; break;
        case '*': kind = d == '=' ? (n = 2, CC_T_STAR_EQ) : CC_T_STAR; break;
        case '/': kind = d == '=' ? (n = 2, CC_T_SLASH_EQ) : CC_T_SLASH; break;
        case '%': kind = d == '=' ? (n = 2, CC_T_PERCENT_EQ) : CC_T_PERCENT; break;
        case '-': kind = d == '>' ? (n = 2, CC_T_ARROW) : d == '=' ? (n = 2, CC_T_MINUS_EQ) : CC_T_MINUS; break;
        case '=': kind = d == '=' ? (n = 2, CC_T_EQ) : CC_T_ASSIGN; break;
        case '<':
            kind = d == '=' ? (n = 2, CC_T_LE)
                 : d != '<' ? CC_T_LT
                 : peekc(&L, 2) == '=' ? (n = 3, CC_T_SHL_EQ)
                                       : (n = 2, CC_T_SHL);
            break;
        case '>':
            kind = d == '=' ? (n = 2, CC_T_GE)
                 : d != '>' ? CC_T_GT
                 : peekc(&L, 2) == '=' ? (n = 3, CC_T_SHR_EQ)
                                       : (n = 2, CC_T_SHR);
            break;
        case '!': kind = d == '=' ? (n = 2, CC_T_NE) : CC_T_NOT; break;
        case '&': kind = d == '&' ? (n = 2, CC_T_AND) : d == '=' ? (n = 2, CC_T_BAND_EQ) : CC_T_BAND; break;
        case '|': kind = d == '|' ? (n = 2, CC_T_OR) : d == '=' ? (n = 2, CC_T_BOR_EQ) : CC_T_BOR; break;
        case '.':
            if (d != '.')
                cc_error(C, pos, TFVM_ERR_SYNTAX, "unexpected character '.' (a range is a..b)");
            kind = CC_T_DOTDOT;
            n = 2;
            break;
        case '"': /* a string: printable ASCII, no escapes (file and channel names) */
            while (peekc(&L, n) != '"') {
                int s = peekc(&L, n);
                if (s < 0 || s == '\n')
                    cc_error(C, pos, TFVM_ERR_SYNTAX, "unterminated string");
                if (s < 0x20 || s >= 0x7f || s == '\\')
                    cc_error(C, (cc_pos){pos.line, pos.col + (uint32_t)n}, TFVM_ERR_SYNTAX,
                             "a string holds printable ASCII characters only, without escapes");
                n++;
            }
            n++;
            kind = CC_T_STRING;
            break;
        default:
            if (c >= 0x20 && c < 0x7f)
                cc_error(C, pos, TFVM_ERR_SYNTAX, "unexpected character '%c'", c);
            cc_error(C, pos, TFVM_ERR_SYNTAX, "unexpected byte 0x%02x", (unsigned)c);
        }
        push(&L, kind, pos, L.i, n);
        advance(&L, n);
    }
    push(&L, CC_T_EOF, here(&L), L.i, 0);
    /* brace depth of every token, so that the parser can skip a bad statement */
    uint32_t d = 0;
    for (uint32_t i = 0; i < C->n_toks; i++) {
        cc_tok *t = &C->toks[i];
        if (t->kind == CC_T_RBRACE && d > 0)
            d--;
        t->depth = d;
        if (t->kind == CC_T_LBRACE)
            d++;
    }
}
