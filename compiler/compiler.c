/* compiler/compiler.c — the compiler's driver: runs the passes (lex, parse,
 * check, IR, optimize, lower, verify), formats errors with the source line
 * and a caret, and owns the arena every pass allocates from. */
#include <stdio.h>
#include <string.h>

#include "compiler.h"
#include "loader/loader.h"

/* ---- Memory: everything lives in C->ar; a failure unwinds ------------------------- */

_Noreturn void cc_nomem(cc *C)
{
    C->fatal = true;
    C->n_errors++;
    C->status = ut_err(C->err, TFVM_ERR_NOMEM, "%s: out of memory compiling", C->name);
    longjmp(*C->jb, 1);
}

void *cc_alloc(cc *C, size_t n)
{
    void *p = ut_arena_alloc(&C->ar, n);
    if (!p)
        cc_nomem(C);
    return p;
}

void *cc_array(cc *C, size_t count, size_t size)
{
    void *p = ut_arena_array(&C->ar, count ? count : 1, size);
    if (!p)
        cc_nomem(C);
    return p;
}

char *cc_strndup(cc *C, const char *s, size_t n)
{
    char *p = ut_arena_strndup(&C->ar, s, n);
    if (!p)
        cc_nomem(C);
    return p;
}

void *cc_grow(cc *C, void *p, uint32_t n, uint32_t *cap, size_t size)
{
    if (n < *cap)
        return p;
    if (*cap > UINT32_MAX / 4)
        cc_nomem(C);
    uint32_t nc = *cap ? *cap * 2 : 8;
    void *q = cc_array(C, nc, size);
    if (n)
        memcpy(q, p, (size_t)n * size);
    *cap = nc;
    return q; /* the old array stays in the arena until the end */
}

/* ---- Errors -------------------------------------------------------------------------- */

/* Appends " L | text" and "   |    ^" for the source line of pos. */
static void quote_line(const cc *C, cc_pos pos, char *buf, size_t size)
{
    size_t i = 0;
    for (uint32_t l = 1; l < pos.line && i < C->len; i++)
        if (C->src[i] == '\n')
            l++;
    size_t end = i;
    while (end < C->len && C->src[end] != '\n' && C->src[end] != '\r')
        end++;
    size_t caret = pos.col ? pos.col - 1 : 0;
    if (i + caret > end)
        caret = end - i;
    /* long lines: a window around the caret */
    size_t from = i, to = end;
    bool cut_left = false, cut_right = false;
    if (caret > 120) {
        from = i + caret - 80;
        cut_left = true;
    }
    if (to - from > 200) {
        to = from + 200;
        cut_right = true;
    }
    char num[16];
    int w = snprintf(num, sizeof num, "%u", pos.line);
    size_t n = strlen(buf);
    ut_fmt(buf + n, size - n, "\n %s | %s%.*s%s\n %*s | %s", num, cut_left ? "..." : "", (int)(to - from),
           C->src + from, cut_right ? "..." : "", w, "", cut_left ? "   " : "");
    n = strlen(buf);
    for (size_t k = from; k < i + caret && n + 2 < size; k++) {
        unsigned char c = (unsigned char)C->src[k];
        if ((c & 0xC0) == 0x80)
            continue; /* a UTF-8 continuation byte takes no column on screen */
        buf[n++] = c == '\t' ? '\t' : ' ';
    }
    if (n + 2 < size) {
        buf[n++] = '^';
        buf[n] = '\0';
    }
}

/* At most this many errors are reported: later ones are mostly echoes. */
#define CC_MAX_ERRORS 8

void cc_error(cc *C, cc_pos pos, tfvm_status code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (C->n_errors == 0)
        C->status = code;
    if (C->err && C->n_errors < CC_MAX_ERRORS) {
        tfvm_error *e = C->err;
        char one[sizeof e->message];
        if (pos.line) {
            ut_fmt(one, sizeof one, "%s:%u:%u: %s", C->name, pos.line, pos.col, msg);
            quote_line(C, pos, one, sizeof one);
        } else {
            ut_fmt(one, sizeof one, "%s: %s", C->name, msg);
        }
        /* the same error again (a loop body is checked once per pass) is dropped */
        bool dup = strstr(e->message, one) != NULL && C->n_errors > 0;
        size_t n = strlen(one);
        if (!dup && C->n_errors == 0) {
            e->code = code;
            e->instr[0] = e->tag[0] = e->where[0] = '\0';
            memcpy(e->message, one, n + 1);
            C->msg_len = n;
            C->n_errors++;
        } else if (!dup && C->msg_len + 1 + n < sizeof e->message) {
            e->message[C->msg_len] = '\n';
            memcpy(e->message + C->msg_len + 1, one, n + 1);
            C->msg_len += 1 + n;
            C->n_errors++;
        } else if (!dup) {
            C->n_errors = CC_MAX_ERRORS; /* no room: stop collecting */
        }
    } else {
        C->n_errors++;
    }
    if (C->n_errors >= CC_MAX_ERRORS)
        C->fatal = true;
    longjmp(*C->jb, 1);
}

void cc_quiet(cc *C)
{
    if (C->n_errors == 0) { /* cannot happen: poison follows an error */
        C->status = TFVM_ERR_INTERNAL;
        C->n_errors = 1;
    }
    longjmp(*C->jb, 1);
}

void cc_warn(cc *C, cc_pos pos, const char *fmt, ...)
{
    char msg[400], one[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ut_fmt(one, sizeof one, "%s:%u:%u: warning: %s", C->name, pos.line, pos.col, msg);
    size_t n = strlen(one);
    /* a statement checked twice (loop passes, a duplicated continuation) warns once */
    for (size_t i = 0; C->warnings && i < C->warn_len;) {
        size_t e = i;
        while (e < C->warn_len && C->warnings[e] != '\n')
            e++;
        if (e - i == n && memcmp(C->warnings + i, one, n) == 0)
            return;
        i = e + 1;
    }
    size_t need = C->warn_len + n + 2;
    if (need > C->warn_cap) {
        size_t cap = need * 2;
        char *p = ut_arena_alloc(&C->ar, cap);
        if (!p)
            cc_nomem(C);
        if (C->warn_len)
            memcpy(p, C->warnings, C->warn_len);
        C->warnings = p;
        C->warn_cap = cap;
    }
    memcpy(C->warnings + C->warn_len, one, n);
    C->warn_len += n;
    C->warnings[C->warn_len++] = '\n';
    C->warnings[C->warn_len] = '\0';
    C->n_warnings++;
}

/* Levenshtein distance with adjacent transpositions (fbi -> fib is 1). */
static uint32_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return UINT32_MAX;
    uint8_t d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (uint8_t)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (uint8_t)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            uint32_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1u < best)
                best = d[i - 1][j] + 1u;
            if (d[i][j - 1] + 1u < best)
                best = d[i][j - 1] + 1u;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1u < best)
                best = d[i - 2][j - 2] + 1u;
            d[i][j] = (uint8_t)best;
        }
    }
    return d[la][lb];
}

const char *cc_suggest(const char *name, const char *const *cands, uint32_t n)
{
    const char *best = NULL;
    uint32_t bd = 3, len = (uint32_t)strlen(name);
    for (uint32_t i = 0; i < n; i++) {
        if (!cands[i] || strchr(cands[i], '.') || strcmp(cands[i], name) == 0 || strcmp(cands[i], "_") == 0)
            continue;
        uint32_t d = edit_distance(name, cands[i]);
        if (d < bd && d * 2 <= len) {
            bd = d;
            best = cands[i];
        }
    }
    return best;
}

/* ---- Driver -------------------------------------------------------------------------- */

void cc_finish(cc *C, isa_program *out)
{
    if (C->opt > 0) {
        cc_optimize(C);
    } else {
        for (uint32_t i = 0; i < C->n_ifns; i++) {
            cc_ifn *fn = C->ifns[i];
            for (uint32_t k = 0; k < fn->n_params; k++)
                fn->param_live[k] = true;
        }
    }
    cc_lower(C, out);
    if (C->opt > 0) {
        cc_fuse_branches(C, out);
        cc_prune_switches(C, out);
        cc_elide_merges(C, out);
    }
    tfvm_error verr;
    tfvm_status st = ld_verify(out, &verr);
    if (st == TFVM_ERR_NOMEM)
        cc_nomem(C);
    if (st != TFVM_OK)
        cc_error(C, (cc_pos){0, 0}, TFVM_ERR_INTERNAL, "internal error: the compiled graph does not verify: %s",
                 verr.message);
}

static void run(cc *C, const char *entry, isa_program *out)
{
    cc_lex(C);
    cc_parse(C);
    cc_check(C, entry);
    if (C->n_errors)
        return;
    cc_build_ir(C);
    cc_finish(C, out);
}

/* setjmp lives here, apart from the state it protects: *C is in the
 * caller's frame, so its members keep their values across the longjmp. */
static void run_guarded(cc *C, const char *entry, isa_program *out)
{
    jmp_buf jb;
    C->jb = &jb;
    if (setjmp(jb) == 0) {
        if (out) {
            run(C, entry, out);
        } else {
            cc_lex(C);
            cc_parse(C);
            cc_check(C, entry);
        }
    }
    C->jb = NULL;
}

void cc_init(cc *C, const char *src, size_t len, const char *name, const tfvm_allocator *a, tfvm_error *err)
{
    memset(C, 0, sizeof *C);
    ut_arena_init(&C->ar, a);
    C->src = src ? src : "";
    C->len = src ? len : 0;
    C->name = name ? name : "<tfg>";
    C->err = err;
    C->status = TFVM_OK;
    /* load("w.npy") reads relative to the source file's directory */
    const char *slash = strrchr(C->name, '/');
    C->dir = slash ? ut_arena_strndup(&C->ar, C->name, (size_t)(slash - C->name) + 1) : "";
    if (!C->dir)
        C->dir = "";
}

tfvm_status cc_front(cc *C, const char *src, size_t len, const char *name, const char *entry,
                     const tfvm_allocator *a, tfvm_error *err)
{
    ut_err_clear(err);
    cc_init(C, src, len, name, a, err);
    run_guarded(C, entry, NULL);
    if (C->status != TFVM_OK)
        ut_arena_free(&C->ar);
    return C->status;
}

void cc_release(cc *C) { ut_arena_free(&C->ar); }

tfvm_status cc_compile(const char *src, size_t len, const char *name, const cc_options *o,
                       const tfvm_allocator *a, isa_program *out, tfvm_error *err)
{
    isa_program_init(out, a);
    ut_err_clear(err);
    cc C;
    cc_init(&C, src, len, name, &out->alloc, err);
    C.opt = o->opt_level;
    C.overflow_trap = o->overflow_trap;
    run_guarded(&C, o->entry, out);
    tfvm_status st = C.status;
    if (st == TFVM_OK && o->warn && C.warnings) {
        char *w = C.warnings;
        for (char *nl; (nl = strchr(w, '\n')) != NULL; w = nl + 1) {
            *nl = '\0';
            o->warn(o->warn_ud, w);
        }
    }
    ut_arena_free(&C.ar);
    if (st != TFVM_OK)
        isa_program_release(out);
    return st;
}
