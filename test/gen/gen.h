/* test/gen/gen.h — a random .tfg program generator for differential testing:
 * a few mutually recursive integer functions with nested ifs, lets, while
 * loops (several variables, some unused) and calls inside branches and loop
 * bodies; bitwise operators and short-circuit && || (whose right side may
 * call or divide); and function bodies written as statements: var,
 * assignment and += -= *= /= %= &= |= ^= <<= >>=, if with and without
 * else, while and for statements with break and continue (in any branch),
 * return anywhere, expression statements, vars of i64 started by a bare
 * literal (their dtype comes from a later use, inside loops too); hex,
 * binary and _-separated literals; top-level constants (i64 ones by their
 * size too). Every program
 * terminates: each function takes a fuel parameter d, calls only happen
 * where d > 0 and pass d - 1, and every loop counts a variable up to a small
 * literal bound (a while loop's first statement counts, so that a continue
 * cannot skip it). */
#ifndef TFVM_TEST_GEN_H
#define TFVM_TEST_GEN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { G_I32, G_I64, G_BOOL };

typedef struct gen_fn {
    int n_params;        /* besides d */
    int ptype[3];
    int n_results;       /* 1 or 2 */
    int rtype[2];
} gen_fn;

typedef struct gen_var {
    char name[16];
    int type;
    bool mut;            /* a var the statements may assign */
} gen_var;

typedef struct gen {
    uint64_t rng;
    char *buf;
    size_t len, cap;
    int n_fns;
    gen_fn fns[4];
    gen_var vars[96];
    int n_vars;
    int next_name;
    bool calls_ok;       /* inside a d > 0 branch */
    bool in_main;
    int call_budget;
    int loop_depth;
    int depth;
    int stmt_depth;      /* nesting of statement blocks */
    int stmt_loops;      /* statement loops around the statements (break, continue) */
    int n_consts;        /* K0, K1, ...: top-level constants */
    int const_type[3];
    const gen_fn *fn;    /* whose body the statements are in (NULL: main) */
} gen;

static uint32_t gen_rand(gen *G)
{
    /* splitmix64: reproducible from the seed on every platform */
    uint64_t z = (G->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static int gen_pick(gen *G, int n) { return (int)(gen_rand(G) % (uint32_t)n); }
static bool gen_chance(gen *G, int percent) { return gen_pick(G, 100) < percent; }

static void gen_emit(gen *G, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(G->buf + G->len, G->cap - G->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (G->len + (size_t)n < G->cap) {
            G->len += (size_t)n;
            return;
        }
        size_t cap = (G->cap + (size_t)n + 1) * 2;
        char *p = realloc(G->buf, cap);
        if (!p)
            abort(); /* test tool: out of memory is fatal */
        G->buf = p;
        G->cap = cap;
    }
}

static const char *gen_tname(int t) { return t == G_I32 ? "i32" : t == G_I64 ? "i64" : "bool"; }

static void gen_literal(gen *G, int t, bool bare_ok)
{
    if (t == G_BOOL) {
        gen_emit(G, gen_chance(G, 50) ? "true" : "false");
        return;
    }
    long long v;
    int r = gen_pick(G, 20);
    if (r == 0)
        v = t == G_I32 ? 2147483647LL : 9223372036854775807LL;
    else if (r == 1)
        v = t == G_I32 ? -2147483647LL - 1 : -9223372036854775807LL - 1;
    else if (r == 2)
        v = (long long)gen_pick(G, 100000) * 1000;
    else
        v = gen_pick(G, 21) - 10;
    const char *suffix = t == G_I64 && !(bare_ok && gen_chance(G, 40)) ? "i64" : "";
    unsigned long long mag = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    char digits[80];
    int form = gen_pick(G, 8);
    if (form == 0) { /* hex, in groups of 4 with '_' now and then */
        char hex[20];
        snprintf(hex, sizeof hex, "%llX", mag);
        size_t n = strlen(hex), k = 0;
        bool sep = gen_chance(G, 50);
        k += (size_t)snprintf(digits, sizeof digits, "0x");
        for (size_t i = 0; i < n; i++) {
            if (sep && i && (n - i) % 4 == 0)
                digits[k++] = '_';
            digits[k++] = hex[i];
        }
        digits[k] = '\0';
    } else if (form == 1 && mag < 4096) { /* binary */
        size_t k = (size_t)snprintf(digits, sizeof digits, "0b");
        int top = 0;
        while (top < 12 && (mag >> (top + 1)))
            top++;
        for (int b = top; b >= 0; b--)
            digits[k++] = (char)('0' + ((mag >> b) & 1));
        digits[k] = '\0';
    } else if (form == 2 && mag >= 1000) { /* 1_000_000 */
        char dec[24];
        snprintf(dec, sizeof dec, "%llu", mag);
        size_t n = strlen(dec), k = 0;
        for (size_t i = 0; i < n; i++) {
            if (i && (n - i) % 3 == 0)
                digits[k++] = '_';
            digits[k++] = dec[i];
        }
        digits[k] = '\0';
    } else {
        snprintf(digits, sizeof digits, "%llu", mag);
    }
    if (v < 0)
        gen_emit(G, "(-%s%s)", digits, suffix);
    else
        gen_emit(G, "%s%s", digits, suffix);
}

static const char *gen_new_name(gen *G, const char *prefix, char *buf, size_t size)
{
    snprintf(buf, size, "%s%d", prefix, G->next_name++);
    return buf;
}

static void gen_push_var(gen *G, const char *name, int t)
{
    if (G->n_vars < (int)(sizeof G->vars / sizeof G->vars[0])) {
        snprintf(G->vars[G->n_vars].name, sizeof G->vars[0].name, "%s", name);
        G->vars[G->n_vars].mut = false;
        G->vars[G->n_vars++].type = t;
    }
}

static void gen_expr(gen *G, int t, bool bare_ok);
static void gen_block(gen *G, int t);

static bool gen_var_of(gen *G, int t)
{
    int hits[96], n = 0;
    for (int i = 0; i < G->n_vars; i++)
        if (G->vars[i].type == t)
            hits[n++] = i;
    if (!n)
        return false;
    gen_emit(G, "%s", G->vars[hits[gen_pick(G, n)]].name);
    return true;
}

/* A call of a function whose (first) result is t, if the budget allows. */
static bool gen_call(gen *G, int t)
{
    if (!G->calls_ok || G->call_budget <= 0 || G->n_fns == 0)
        return false;
    int cand[4], n = 0;
    for (int i = 0; i < G->n_fns; i++)
        if (G->fns[i].n_results == 1 && G->fns[i].rtype[0] == t)
            cand[n++] = i;
    if (!n)
        return false;
    int f = cand[gen_pick(G, n)];
    G->call_budget--;
    if (G->in_main)
        gen_emit(G, "f%d(%d", f, gen_pick(G, 4));
    else
        gen_emit(G, "f%d(d - 1", f);
    for (int k = 0; k < G->fns[f].n_params; k++) {
        gen_emit(G, ", ");
        gen_expr(G, G->fns[f].ptype[k], false);
    }
    gen_emit(G, ")");
    return true;
}

static void gen_expr(gen *G, int t, bool bare_ok)
{
    G->depth++;
    bool leaf = G->depth > 3 || gen_chance(G, 35);
    if (leaf) {
        if (!(gen_chance(G, 70) && gen_var_of(G, t)))
            gen_literal(G, t, bare_ok);
        G->depth--;
        return;
    }
    if (t == G_BOOL) {
        switch (gen_pick(G, 6)) {
        case 0:
        case 1:
        case 2: {
            static const char *const cmp[] = {"<", "<=", ">", ">=", "==", "!="};
            int ot = gen_pick(G, 2);
            gen_emit(G, "(");
            gen_expr(G, ot, false);
            gen_emit(G, " %s ", cmp[gen_pick(G, 6)]);
            gen_expr(G, ot, true);
            gen_emit(G, ")");
            break;
        }
        case 3:
            gen_emit(G, "(");
            gen_expr(G, G_BOOL, false);
            gen_emit(G, gen_chance(G, 50) ? " && " : " || ");
            gen_expr(G, G_BOOL, false);
            gen_emit(G, ")");
            break;
        case 4:
            if (gen_chance(G, 50)) {
                gen_emit(G, gen_chance(G, 70) ? "!" : "~");
                gen_expr(G, G_BOOL, false);
            } else { /* & | ^ on bools: both sides run */
                static const char *const ops[] = {" & ", " | ", " ^ "};
                gen_emit(G, "(");
                gen_expr(G, G_BOOL, false);
                gen_emit(G, "%s", ops[gen_pick(G, 3)]);
                gen_expr(G, G_BOOL, false);
                gen_emit(G, ")");
            }
            break;
        default:
            gen_emit(G, "if ");
            gen_expr(G, G_BOOL, false);
            gen_emit(G, " ");
            gen_block(G, G_BOOL);
            gen_emit(G, " else ");
            gen_block(G, G_BOOL);
            break;
        }
        G->depth--;
        return;
    }
    switch (gen_pick(G, 14)) {
    case 12: { /* bitwise; shift counts may fall outside [0, bits) */
        static const char *const ops[] = {"&", "|", "^", "<<", ">>"};
        gen_emit(G, "(");
        gen_expr(G, t, false);
        gen_emit(G, " %s ", ops[gen_pick(G, 5)]);
        gen_expr(G, t, true);
        gen_emit(G, ")");
        break;
    }
    case 13:
        gen_emit(G, "~");
        if (!gen_var_of(G, t)) {
            gen_emit(G, "(");
            gen_expr(G, t, false);
            gen_emit(G, ")");
        }
        break;
    case 0:
    case 1:
    case 2:
    case 3: {
        static const char *const ops[] = {"+", "-", "*", "+", "-", "*", "/", "%"};
        int op = gen_pick(G, 8);
        gen_emit(G, "(");
        gen_expr(G, t, false);
        gen_emit(G, " %s ", ops[op]);
        if (op >= 6 && gen_chance(G, 60)) {
            long long v = gen_pick(G, 9) + 1;
            gen_emit(G, gen_chance(G, 50) ? "%lld" : "(-%lld)", v);
        } else {
            gen_expr(G, t, true);
        }
        gen_emit(G, ")");
        break;
    }
    case 4: {
        static const char *const fns[] = {"min", "max"};
        gen_emit(G, "%s(", fns[gen_pick(G, 2)]);
        gen_expr(G, t, false);
        gen_emit(G, ", ");
        gen_expr(G, t, true);
        gen_emit(G, ")");
        break;
    }
    case 5:
        /* `-` only in front of a variable: -(literal) is itself a literal,
         * and -(-2147483648) would not fit in i32 */
        if (gen_chance(G, 30)) {
            gen_emit(G, "-");
            if (!gen_var_of(G, t))
                gen_emit(G, t == G_I64 ? "abs(0i64)" : "abs(0)");
        } else {
            gen_emit(G, gen_chance(G, 50) ? "abs(" : "neg(");
            gen_expr(G, t, false);
            gen_emit(G, ")");
        }
        break;
    case 6:
        gen_emit(G, "cast<%s>(", gen_tname(t));
        gen_expr(G, t == G_I32 ? G_I64 : G_I32, false);
        gen_emit(G, ")");
        break;
    case 7:
    case 8:
        gen_emit(G, "if ");
        gen_expr(G, G_BOOL, false);
        gen_emit(G, " ");
        gen_block(G, t);
        gen_emit(G, " else ");
        gen_block(G, t);
        break;
    case 9:
        gen_emit(G, "select(");
        gen_expr(G, G_BOOL, false);
        gen_emit(G, ", ");
        gen_expr(G, t, false);
        gen_emit(G, ", ");
        gen_expr(G, t, true);
        gen_emit(G, ")");
        break;
    default:
        if (!gen_call(G, t)) {
            if (!gen_var_of(G, t))
                gen_literal(G, t, bare_ok);
        }
        break;
    }
    G->depth--;
}

/* let x = e;  let (a, b) = f(...);  let (k, v) = while (k = 0, v = e; k < N) { ... }; */
static void gen_let(gen *G)
{
    char name[16], k[16], v[16], w[16];
    int r = gen_pick(G, 10);
    if (r < 5 || G->depth > 2) {
        int t = gen_pick(G, 3);
        gen_new_name(G, "v", name, sizeof name);
        if (t != G_BOOL && gen_chance(G, 30))
            gen_emit(G, "let %s: %s = ", name, gen_tname(t));
        else
            gen_emit(G, "let %s = ", name);
        gen_expr(G, t, false);
        gen_emit(G, "; ");
        gen_push_var(G, name, t);
        return;
    }
    if (r < 7 && G->calls_ok && G->call_budget > 0) {
        int cand[4], n = 0;
        for (int i = 0; i < G->n_fns; i++)
            if (G->fns[i].n_results == 2)
                cand[n++] = i;
        if (n) {
            int f = cand[gen_pick(G, n)];
            G->call_budget--;
            char a[16], b[16];
            gen_new_name(G, "p", a, sizeof a);
            gen_new_name(G, "q", b, sizeof b);
            bool skip = gen_chance(G, 25);
            gen_emit(G, "let (%s, %s) = f%d(", skip ? "_" : a, b, f);
            if (G->in_main)
                gen_emit(G, "%d", gen_pick(G, 4));
            else
                gen_emit(G, "d - 1");
            for (int j = 0; j < G->fns[f].n_params; j++) {
                gen_emit(G, ", ");
                gen_expr(G, G->fns[f].ptype[j], false);
            }
            gen_emit(G, "); ");
            if (!skip)
                gen_push_var(G, a, G->fns[f].rtype[0]);
            gen_push_var(G, b, G->fns[f].rtype[1]);
            return;
        }
    }
    if (G->loop_depth >= 2) {
        gen_new_name(G, "v", name, sizeof name);
        gen_emit(G, "let %s = ", name);
        gen_expr(G, G_I32, false);
        gen_emit(G, "; ");
        gen_push_var(G, name, G_I32);
        return;
    }
    /* a loop: k counts to a small bound; v (and maybe w) carry values */
    gen_new_name(G, "k", k, sizeof k);
    gen_new_name(G, "v", v, sizeof v);
    gen_new_name(G, "w", w, sizeof w);
    int tv = gen_pick(G, 2), tw = gen_pick(G, 3);
    bool two = gen_chance(G, 40);
    int bound = gen_pick(G, 4);
    char label[24] = "";
    if (gen_chance(G, 20))
        snprintf(label, sizeof label, "lp%d ", G->next_name++);
    gen_emit(G, "let (%s, %s%s%s) = while %s(%s = 0, ", gen_chance(G, 30) ? k : "_", v, two ? ", " : "",
             two ? w : "", label, k);
    if (tv == G_I64 && gen_chance(G, 50))
        gen_emit(G, "%s: i64 = ", v);
    else
        gen_emit(G, "%s = ", v);
    gen_expr(G, tv, false);
    if (two) {
        gen_emit(G, ", %s%s = ", w, tw == G_I64 ? ": i64" : tw == G_BOOL ? ": bool" : "");
        gen_expr(G, tw, false);
    }
    gen_emit(G, "; %s < %d", k, bound);
    int saved = G->n_vars;
    gen_push_var(G, k, G_I32);
    gen_push_var(G, v, tv);
    if (two)
        gen_push_var(G, w, tw);
    if (gen_chance(G, 25)) {
        gen_emit(G, " && ");
        gen_expr(G, G_BOOL, false);
    }
    gen_emit(G, ") { ");
    G->loop_depth++;
    int lets = gen_pick(G, 2);
    for (int i = 0; i < lets; i++)
        gen_let(G);
    gen_emit(G, "(%s + 1, ", k);
    gen_expr(G, tv, false);
    if (two) {
        gen_emit(G, ", ");
        gen_expr(G, tw, false);
    }
    gen_emit(G, ") }; ");
    G->loop_depth--;
    G->n_vars = saved;
    gen_push_var(G, v, tv);
    if (two)
        gen_push_var(G, w, tw);
}

static void gen_block_inner(gen *G, int t)
{
    int lets = G->depth < 2 ? gen_pick(G, 3) : 0;
    for (int i = 0; i < lets; i++)
        gen_let(G);
    gen_expr(G, t, false);
}

static void gen_block(gen *G, int t)
{
    int saved = G->n_vars;
    gen_emit(G, "{ ");
    gen_block_inner(G, t);
    gen_emit(G, " }");
    G->n_vars = saved;
}

/* ---- Statements ---- */

static void gen_stmts(gen *G, int n);

static void gen_return(gen *G)
{
    gen_emit(G, "return ");
    if (!G->fn || G->fn->n_results == 1) {
        gen_expr(G, G->fn ? G->fn->rtype[0] : G_I32, false);
    } else {
        gen_emit(G, "(");
        gen_expr(G, G->fn->rtype[0], false);
        gen_emit(G, ", ");
        gen_expr(G, G->fn->rtype[1], false);
        gen_emit(G, ")");
    }
    gen_emit(G, "; ");
}

static bool gen_assign(gen *G)
{
    int hits[96], n = 0;
    for (int i = 0; i < G->n_vars; i++)
        if (G->vars[i].mut)
            hits[n++] = i;
    if (!n)
        return false;
    const gen_var *v = &G->vars[hits[gen_pick(G, n)]];
    if (v->type == G_BOOL) {
        static const char *const bops[] = {"=", "=", "&=", "|=", "^="};
        gen_emit(G, "%s %s ", v->name, bops[gen_pick(G, 5)]);
        gen_expr(G, G_BOOL, false);
    } else {
        static const char *const ops[] = {"=", "+=", "-=", "*=", "/=", "%=", "+=", "=", "&=", "|=", "^=", "<<=", ">>="};
        int op = gen_pick(G, 13);
        gen_emit(G, "%s %s ", v->name, ops[op]);
        if ((op == 4 || op == 5) && gen_chance(G, 60))
            gen_emit(G, "%d", gen_pick(G, 5) + 1);
        else
            gen_expr(G, v->type, true);
    }
    gen_emit(G, "; ");
    return true;
}

static void gen_stmt_block(gen *G)
{
    int saved = G->n_vars;
    G->stmt_depth++;
    gen_emit(G, "{ ");
    gen_stmts(G, 1 + gen_pick(G, 3));
    gen_emit(G, "} ");
    G->stmt_depth--;
    G->n_vars = saved;
}

static void gen_stmt(gen *G)
{
    char name[16];
    int r = gen_pick(G, 100);
    if (r < 25 || G->stmt_depth > 3) {
        int t = gen_pick(G, 3);
        gen_new_name(G, "m", name, sizeof name);
        if (t == G_I64 && gen_chance(G, 25)) {
            /* a bare literal: a later use (in a loop, after an assignment:
             * issue 32) gives the var its dtype, here at once */
            gen_emit(G, "var %s = %d; ", name, gen_pick(G, 10));
            if (gen_chance(G, 50)) { /* fixed by a version of the loop variable */
                char q[16];
                gen_new_name(G, "q", q, sizeof q);
                gen_emit(G, "for %s in 0..%d { %s += 1; %s = %s + ", q, gen_pick(G, 3), name, name, name);
                gen_expr(G, t, false);
                gen_emit(G, "; }");
            } else {
                gen_emit(G, "%s = %s + ", name, name);
                gen_expr(G, t, false);
                gen_emit(G, ";");
            }
        } else {
            if (t == G_I64 && gen_chance(G, 40))
                gen_emit(G, "var %s: i64 = ", name);
            else
                gen_emit(G, "var %s = ", name);
            gen_expr(G, t, t == G_I32);
            gen_emit(G, ";");
        }
        gen_emit(G, " ");
        gen_push_var(G, name, t);
        G->vars[G->n_vars - 1].mut = true;
        return;
    }
    if (r < 55) {
        if (!gen_assign(G))
            gen_let(G);
        return;
    }
    if (r < 60 && G->stmt_loops > 0) {
        gen_emit(G, gen_chance(G, 50) ? "break; " : "continue; ");
        return;
    }
    if (r < 72) {
        gen_emit(G, "if ");
        gen_expr(G, G_BOOL, false);
        gen_emit(G, " ");
        gen_stmt_block(G);
        if (gen_chance(G, 50)) {
            gen_emit(G, "else ");
            if (gen_chance(G, 30)) {
                gen_emit(G, "if ");
                gen_expr(G, G_BOOL, false);
                gen_emit(G, " ");
                gen_stmt_block(G);
                gen_emit(G, "else ");
            }
            gen_stmt_block(G);
        }
        return;
    }
    if (r < 86 && G->loop_depth < 2) {
        G->loop_depth++;
        int bound = gen_pick(G, 4);
        if (gen_chance(G, 50)) {
            gen_new_name(G, "ix", name, sizeof name);
            gen_emit(G, "for %s in %d..%d ", name, gen_pick(G, 2), bound);
            int saved = G->n_vars;
            gen_push_var(G, name, G_I32);
            G->stmt_loops++;
            gen_stmt_block(G);
            G->stmt_loops--;
            G->n_vars = saved;
        } else {
            /* the counter is the generator's: the statements never assign it */
            gen_new_name(G, "c", name, sizeof name);
            gen_emit(G, "var %s = 0; while %s < %d", name, name, bound);
            int saved = G->n_vars;
            gen_push_var(G, name, G_I32);
            if (gen_chance(G, 30)) {
                gen_emit(G, gen_chance(G, 50) ? " && " : " || false && ");
                gen_expr(G, G_BOOL, false);
            }
            gen_emit(G, " { %s += 1; ", name);
            G->stmt_depth++;
            G->stmt_loops++;
            gen_stmts(G, 1 + gen_pick(G, 3));
            G->stmt_loops--;
            G->stmt_depth--;
            gen_emit(G, "} ");
            G->n_vars = saved;
        }
        G->loop_depth--;
        return;
    }
    if (r < 92 && G->stmt_depth > 0) {
        gen_return(G);
        return;
    }
    if (G->calls_ok && G->call_budget > 0 && G->n_fns > 0) { /* a call for its effect */
        int f = gen_pick(G, G->n_fns);
        G->call_budget--;
        gen_emit(G, "f%d(", f);
        if (G->in_main)
            gen_emit(G, "%d", gen_pick(G, 4));
        else
            gen_emit(G, "d - 1");
        for (int k = 0; k < G->fns[f].n_params; k++) {
            gen_emit(G, ", ");
            gen_expr(G, G->fns[f].ptype[k], false);
        }
        gen_emit(G, "); ");
        return;
    }
    gen_let(G);
}

static void gen_stmts(gen *G, int n)
{
    for (int i = 0; i < n; i++) {
        gen_stmt(G);
        if (G->len > 0 && strncmp(G->buf + G->len - 9, "; return ", 9) == 0)
            break;
        if ((G->len >= 7 && strcmp(G->buf + G->len - 7, "break; ") == 0) ||
            (G->len >= 10 && strcmp(G->buf + G->len - 10, "continue; ") == 0))
            break; /* what follows could not run */
    }
}

/* A function body as statements: the fuel check returns early. */
static void gen_stmt_body(gen *G, const gen_fn *f)
{
    int saved = G->n_vars;
    G->fn = f;
    G->stmt_depth = 0;
    gen_emit(G, "{\n    if d <= 0 { ");
    G->calls_ok = false;
    G->stmt_depth = 1;
    gen_return(G);
    G->stmt_depth = 0;
    gen_emit(G, "}\n    ");
    G->calls_ok = true;
    G->call_budget = 3;
    gen_stmts(G, 1 + gen_pick(G, 5));
    if (gen_chance(G, 30)) {
        gen_return(G);
    } else if (f->n_results == 1) {
        gen_expr(G, f->rtype[0], false);
    } else {
        gen_emit(G, "(");
        gen_expr(G, f->rtype[0], false);
        gen_emit(G, ", ");
        gen_expr(G, f->rtype[1], false);
        gen_emit(G, ")");
    }
    gen_emit(G, "\n}\n\n");
    G->n_vars = saved;
    G->fn = NULL;
}

static void gen_result(gen *G, const gen_fn *f)
{
    if (f->n_results == 1) {
        gen_block(G, f->rtype[0]);
        return;
    }
    int saved = G->n_vars;
    gen_emit(G, "{ ");
    int lets = gen_pick(G, 3);
    for (int i = 0; i < lets; i++)
        gen_let(G);
    gen_emit(G, "(");
    gen_expr(G, f->rtype[0], false);
    gen_emit(G, ", ");
    gen_expr(G, f->rtype[1], false);
    gen_emit(G, ") }");
    G->n_vars = saved;
}

/* Writes one program into G->buf (NUL-terminated). main(x: i32, y: i32) -> i32. */
static void gen_program(gen *G, uint64_t seed)
{
    G->rng = seed;
    G->len = 0;
    G->next_name = 0;
    if (!G->cap) {
        G->cap = 4096;
        G->buf = malloc(G->cap);
        if (!G->buf)
            abort();
    }
    G->buf[0] = '\0';
    G->n_fns = 1 + gen_pick(G, 4);
    for (int i = 0; i < G->n_fns; i++) {
        gen_fn *f = &G->fns[i];
        f->n_params = gen_pick(G, 3) + (i == 0);
        for (int k = 0; k < f->n_params; k++)
            f->ptype[k] = gen_pick(G, 4) == 0 ? G_BOOL : gen_pick(G, 2);
        f->n_results = gen_chance(G, 20) ? 2 : 1;
        f->rtype[0] = gen_pick(G, 2);
        f->rtype[1] = gen_pick(G, 3);
    }
    /* constants: an i32, or an i64 by its type, its suffix or its size */
    G->n_consts = gen_pick(G, 4);
    for (int i = 0; i < G->n_consts; i++) {
        int t = G->const_type[i] = gen_pick(G, 2);
        if (t == G_I32)
            gen_emit(G, "const K%d = %d;\n", i, gen_pick(G, 2001) - 1000);
        else if (gen_chance(G, 50))
            gen_emit(G, "const K%d = %lld;\n", i, 3000000000LL + gen_pick(G, 1000) * 7919LL);
        else
            gen_emit(G, "const K%d: i64 = %d;\n", i, gen_pick(G, 100));
    }
    for (int i = 0; i < G->n_fns; i++) {
        const gen_fn *f = &G->fns[i];
        gen_emit(G, "fn f%d(d: i32", i);
        G->n_vars = 0;
        for (int k = 0; k < G->n_consts; k++) {
            char name[16];
            snprintf(name, sizeof name, "K%d", k);
            gen_push_var(G, name, G->const_type[k]);
        }
        for (int k = 0; k < f->n_params; k++) {
            char name[16];
            snprintf(name, sizeof name, "a%d", k);
            gen_emit(G, ", %s: %s", name, gen_tname(f->ptype[k]));
            gen_push_var(G, name, f->ptype[k]);
        }
        if (f->n_results == 1)
            gen_emit(G, ") -> %s ", gen_tname(f->rtype[0]));
        else
            gen_emit(G, ") -> (%s, %s) ", gen_tname(f->rtype[0]), gen_tname(f->rtype[1]));
        G->in_main = false;
        G->calls_ok = false;
        G->depth = 0;
        if (gen_chance(G, 50)) {
            gen_stmt_body(G, f);
            continue;
        }
        gen_emit(G, "{\n    if d <= 0 ");
        gen_result(G, f);
        gen_emit(G, "\n    else ");
        G->calls_ok = true;
        G->call_budget = 3;
        gen_result(G, f);
        gen_emit(G, "\n}\n\n");
    }
    gen_emit(G, "fn main(x: i32, y: i32) -> i32 ");
    G->n_vars = 0;
    for (int k = 0; k < G->n_consts; k++) {
        char name[16];
        snprintf(name, sizeof name, "K%d", k);
        gen_push_var(G, name, G->const_type[k]);
    }
    gen_push_var(G, "x", G_I32);
    gen_push_var(G, "y", G_I32);
    G->in_main = true;
    G->calls_ok = true;
    G->call_budget = 4;
    G->depth = 0;
    /* main always calls f0 once, so the functions are reached */
    const gen_fn *f0 = &G->fns[0];
    gen_emit(G, f0->n_results == 1 ? "{ let r = f0(%d" : "{ let (r, rr) = f0(%d", 1 + gen_pick(G, 3));
    for (int k = 0; k < f0->n_params; k++) {
        gen_emit(G, ", ");
        gen_expr(G, f0->ptype[k], false);
    }
    gen_emit(G, "); ");
    gen_push_var(G, "r", f0->rtype[0]);
    if (f0->n_results == 2)
        gen_push_var(G, "rr", f0->rtype[1]);
    if (gen_chance(G, 50)) {
        G->fn = NULL;
        G->stmt_depth = 0;
        gen_stmts(G, gen_pick(G, 5));
    }
    gen_block_inner(G, G_I32);
    gen_emit(G, " }\n");
}

#endif
