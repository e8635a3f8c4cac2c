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

void cc_error(cc *C, cc_pos pos, tfvm_status code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    C->status = code;
    if (C->err) {
        tfvm_error *e = C->err;
        e->code = code;
        e->instr[0] = e->tag[0] = '\0';
        if (pos.line) {
            ut_fmt(e->message, sizeof e->message, "%s:%u:%u: %s", C->name, pos.line, pos.col, msg);
            quote_line(C, pos, e->message, sizeof e->message);
        } else {
            ut_fmt(e->message, sizeof e->message, "%s: %s", C->name, msg);
        }
    }
    longjmp(*C->jb, 1);
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

tfvm_status cc_compile(const char *src, size_t len, const char *name, const char *entry, int opt_level,
                       const tfvm_allocator *a, isa_program *out, tfvm_error *err)
{
    isa_program_init(out, a);
    ut_err_clear(err);
    cc C;
    cc_init(&C, src, len, name, &out->alloc, err);
    C.opt = opt_level;
    run_guarded(&C, entry, out);
    tfvm_status st = C.status;
    ut_arena_free(&C.ar);
    if (st != TFVM_OK)
        isa_program_release(out);
    return st;
}
