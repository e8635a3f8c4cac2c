/* tools/debug_vars.c — source variables in `tfvm debug` (debug_vars.h).
 *
 * A variable's value at a tag is a token of one of the outputs the variable
 * table names. Tokens are consumed when their instruction fires, so the
 * debugger keeps each value as it arrives at an instruction about to fire
 * (dv_record, from the hook), by the serial of the context it came in; a
 * value that arrived but has not been consumed yet is read where it waits
 * (a partial match, or the ready list). */
#include "tools/debug_vars.h"

#include <stdlib.h>
#include <string.h>

#define DV_KEEP 1024 /* values kept per variable: the newest contexts' */

typedef struct dv_val {
    uint64_t serial; /* the context's */
    char *tag, *text;
} dv_val;

typedef struct dv_var {
    const char *name;
    int watched;
    dv_val *vals; /* oldest first */
    size_t n, cap;
} dv_var;

/* Variable `name` arrives at input `port` of `inst`. */
typedef struct dv_port {
    uint32_t inst, port, name;
} dv_port;

struct dv_state {
    const tfvm_program *p;
    tfvm_var_info *var;
    uint32_t *var_name; /* per record: its name's index */
    size_t n_var;
    dv_var *names;     /* distinct, sorted */
    size_t n_names;
    dv_port *ports;     /* sorted by (inst, port, name) */
    uint32_t *port_at;  /* instruction i's: ports[port_at[i] .. port_at[i + 1]) */
    uint32_t n_insts;
};

static int str_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int port_cmp(const void *a, const void *b)
{
    const dv_port *x = a, *y = b;
    if (x->inst != y->inst)
        return x->inst < y->inst ? -1 : 1;
    if (x->port != y->port)
        return x->port < y->port ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name;
}

static long find_name(const dv_state *s, const char *name)
{
    size_t lo = 0, hi = s->n_names;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->names[mid].name, name);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static bool load_names(dv_state *s)
{
    const char **all = calloc(s->n_var + 1, sizeof *all);
    s->names = calloc(s->n_var + 1, sizeof *s->names);
    s->var_name = calloc(s->n_var + 1, sizeof *s->var_name);
    if (!all || !s->names || !s->var_name) {
        free(all);
        return false;
    }
    for (size_t j = 0; j < s->n_var; j++)
        all[j] = s->var[j].name;
    qsort(all, s->n_var, sizeof *all, str_cmp);
    for (size_t j = 0; j < s->n_var; j++)
        if (!s->n_names || strcmp(s->names[s->n_names - 1].name, all[j]) != 0)
            s->names[s->n_names++].name = all[j];
    free(all);
    for (size_t j = 0; j < s->n_var; j++)
        s->var_name[j] = (uint32_t)find_name(s, s->var[j].name);
    return true;
}

/* Where each variable arrives: the consumers of its outputs. */
static bool load_ports(dv_state *s)
{
    size_t n = 0, cap = 16;
    s->ports = malloc(cap * sizeof *s->ports);
    s->port_at = calloc((size_t)s->n_insts + 2, sizeof *s->port_at);
    if (!s->ports || !s->port_at)
        return false;
    for (size_t j = 0; j < s->n_var; j++) {
        size_t ne = tfvm_program_edges(s->p, s->var[j].inst, NULL, 0);
        tfvm_edge_info *e = malloc((ne + 1) * sizeof *e);
        if (!e)
            return false;
        tfvm_program_edges(s->p, s->var[j].inst, e, ne);
        for (size_t k = 0; k < ne; k++) {
            if (e[k].out != s->var[j].out)
                continue;
            if (n == cap) {
                dv_port *m = realloc(s->ports, 2 * cap * sizeof *m);
                if (!m) {
                    free(e);
                    return false;
                }
                s->ports = m;
                cap *= 2;
            }
            s->ports[n++] = (dv_port){e[k].inst, e[k].port, s->var_name[j]};
        }
        free(e);
    }
    qsort(s->ports, n, sizeof *s->ports, port_cmp);
    size_t m = 0;
    for (size_t k = 0; k < n; k++)
        if (!m || port_cmp(&s->ports[m - 1], &s->ports[k]) != 0)
            s->ports[m++] = s->ports[k];
    for (size_t k = 0; k < m; k++)
        s->port_at[s->ports[k].inst + 1]++;
    for (uint32_t i = 0; i < s->n_insts; i++)
        s->port_at[i + 1] += s->port_at[i];
    return true;
}

dv_state *dv_new(const tfvm_program *p)
{
    dv_state *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->p = p;
    s->n_insts = (uint32_t)tfvm_program_inst_count(p);
    s->n_var = tfvm_program_var_count(p);
    s->var = calloc(s->n_var + 1, sizeof *s->var);
    if (!s->var) {
        dv_free(s);
        return NULL;
    }
    for (size_t j = 0; j < s->n_var; j++)
        tfvm_program_var(p, j, &s->var[j]);
    if (!load_names(s) || !load_ports(s)) {
        dv_free(s);
        return NULL;
    }
    return s;
}

void dv_reset(dv_state *s)
{
    for (size_t k = 0; s && k < s->n_names; k++) {
        dv_var *nm = &s->names[k];
        for (size_t j = 0; j < nm->n; j++) {
            free(nm->vals[j].tag);
            free(nm->vals[j].text);
        }
        nm->n = 0;
    }
}

void dv_free(dv_state *s)
{
    if (!s)
        return;
    if (s->names) {
        dv_reset(s);
        for (size_t k = 0; k < s->n_names; k++)
            free(s->names[k].vals);
    }
    free(s->names);
    free(s->var);
    free(s->var_name);
    free(s->ports);
    free(s->port_at);
    free(s);
}

bool dv_is_var(const dv_state *s, const char *name) { return s && find_name(s, name) >= 0; }
size_t dv_count(const dv_state *s) { return s ? s->n_names : 0; }
const char *dv_name(const dv_state *s, size_t k) { return s && k < s->n_names ? s->names[k].name : NULL; }

void dv_watch(dv_state *s, const char *name, int delta)
{
    long k = find_name(s, name);
    if (k >= 0)
        s->names[k].watched += delta;
}

/* ---- Values ---------------------------------------------------------------------- */

static char *value_text(tfvm_debug_token tok, const tfvm_value *v)
{
    if (tok == TFVM_TOKEN_DEAD)
        return strdup("<dead>");
    char small[256];
    size_t n = tfvm_value_format(v, small, sizeof small);
    char *t = malloc(n + 1);
    if (t && n < sizeof small)
        memcpy(t, small, n + 1);
    else if (t)
        tfvm_value_format(v, t, n + 1);
    return t;
}

static char *tag_text(tfvm_vm *vm, const tfvm_debug_ctx *c)
{
    char buf[512];
    return strdup(tfvm_debug_tag(vm, c, buf, sizeof buf));
}

static uint64_t serial_of(const tfvm_debug_ctx *c)
{
    tfvm_debug_ctx_info ci;
    tfvm_debug_ctx_get(c, &ci);
    return ci.serial;
}

static uint32_t region_of(const tfvm_debug_ctx *c)
{
    tfvm_debug_ctx_info ci;
    tfvm_debug_ctx_get(c, &ci);
    return ci.region;
}

/* nm's kept value in the context of `serial`, or NULL. */
static dv_val *kept(const dv_var *nm, uint64_t serial)
{
    for (size_t j = nm->n; j-- > 0;)
        if (nm->vals[j].serial == serial)
            return &nm->vals[j];
    return NULL;
}

/* Keeps text (taken) as nm's value in context c; whether it is new there
 * (the first, or one that differs from the last). */
static bool keep(dv_var *nm, tfvm_vm *vm, const tfvm_debug_ctx *c, char *text)
{
    dv_val *old = kept(nm, serial_of(c));
    if (old) {
        bool changed = strcmp(old->text, text) != 0;
        free(old->text);
        old->text = text;
        return changed;
    }
    if (nm->n == DV_KEEP) { /* forget the oldest context's */
        free(nm->vals[0].tag);
        free(nm->vals[0].text);
        memmove(nm->vals, nm->vals + 1, (nm->n - 1) * sizeof *nm->vals);
        nm->n--;
    }
    char *tag = tag_text(vm, c);
    if (nm->n == nm->cap) {
        size_t cap = nm->cap ? nm->cap * 2 : 8;
        dv_val *m = tag ? realloc(nm->vals, cap * sizeof *m) : NULL;
        if (!m) {
            free(tag);
            free(text);
            return false;
        }
        nm->vals = m;
        nm->cap = cap;
    }
    nm->vals[nm->n++] = (dv_val){serial_of(c), tag, text};
    return true;
}

const char *dv_record(dv_state *s, tfvm_vm *vm, const tfvm_debug_act *a, const char **value, const char **tag)
{
    uint32_t i = tfvm_debug_act_inst(a);
    const char *hit = NULL;
    if (!s || i >= s->n_insts)
        return NULL;
    const tfvm_debug_ctx *c = tfvm_debug_act_ctx(a);
    for (uint32_t k = s->port_at[i]; k < s->port_at[i + 1]; k++) {
        tfvm_value v;
        tfvm_debug_token tok = tfvm_debug_act_input(vm, a, s->ports[k].port, &v);
        char *text = tok == TFVM_TOKEN_NONE ? NULL : value_text(tok, &v);
        dv_var *nm = &s->names[s->ports[k].name];
        if (text && keep(nm, vm, c, text) && nm->watched && !hit) {
            const dv_val *now = kept(nm, serial_of(c));
            hit = nm->name;
            *value = now->text;
            *tag = now->tag;
        }
    }
    return hit;
}

typedef struct find_ready {
    tfvm_vm *vm;
    const tfvm_debug_ctx *c;
    uint32_t inst, port;
    char *text;
} find_ready;

static void ready_value(void *ud, const tfvm_debug_act *a)
{
    find_ready *f = ud;
    tfvm_value v;
    tfvm_debug_token tok;
    if (f->text || tfvm_debug_act_inst(a) != f->inst || tfvm_debug_act_ctx(a) != f->c ||
        (tok = tfvm_debug_act_input(f->vm, a, f->port, &v)) == TFVM_TOKEN_NONE)
        return;
    f->text = value_text(tok, &v);
}

/* A value of name k waiting now in context c (arrived, not consumed). */
static char *waiting_value(dv_state *s, tfvm_vm *vm, const tfvm_debug_ctx *c, size_t k)
{
    for (size_t j = 0; j < s->n_var; j++) {
        if (s->var_name[j] != k || s->var[j].region != region_of(c))
            continue;
        size_t ne = tfvm_program_edges(s->p, s->var[j].inst, NULL, 0);
        tfvm_edge_info *e = malloc((ne + 1) * sizeof *e);
        if (!e)
            return NULL;
        tfvm_program_edges(s->p, s->var[j].inst, e, ne);
        char *text = NULL;
        tfvm_inst_info in;
        if (tfvm_program_inst(s->p, s->var[j].inst, &in) == TFVM_OK && strcmp(in.op, "ARG") == 0) {
            /* an ARG not fired yet holds its argument (port 0) */
            find_ready f = {vm, c, s->var[j].inst, 0, NULL};
            tfvm_debug_ready(vm, ready_value, &f);
            text = f.text;
        }
        for (size_t q = 0; q < ne && !text; q++) {
            tfvm_value v;
            tfvm_debug_token tok;
            if (e[q].out != s->var[j].out)
                continue;
            if (tfvm_debug_inst_matched(vm, e[q].inst)) {
                if (tfvm_debug_port_arrived(vm, c, e[q].inst, e[q].port) &&
                    (tok = tfvm_debug_port_get(vm, c, e[q].inst, e[q].port, &v)) != TFVM_TOKEN_NONE)
                    text = value_text(tok, &v);
            } else {
                find_ready f = {vm, c, e[q].inst, e[q].port, NULL};
                tfvm_debug_ready(vm, ready_value, &f);
                text = f.text;
            }
        }
        free(e);
        if (text)
            return text;
    }
    return NULL;
}

/* Name k's value in context c: the newest kept, else one waiting; NULL
 * when it has none (yet). The caller frees it. */
static char *value_at(dv_state *s, tfvm_vm *vm, const tfvm_debug_ctx *c, size_t k)
{
    const dv_val *v = kept(&s->names[k], serial_of(c));
    return v ? strdup(v->text) : waiting_value(s, vm, c, k);
}

static bool lives_in(const dv_state *s, size_t k, uint32_t region)
{
    for (size_t j = 0; j < s->n_var; j++)
        if (s->var_name[j] == k && s->var[j].region == region)
            return true;
    return false;
}

/* The text of a tag without spaces, to compare tags as users type them. */
static bool same_tag(const char *a, const char *b)
{
    for (;;) {
        while (*a == ' ')
            a++;
        while (*b == ' ')
            b++;
        if (*a != *b)
            return false;
        if (!*a)
            return true;
        a++;
        b++;
    }
}

static void put_assign(tb_buf *out, const char *name, const char *text)
{
    tb_printf(out, "%s = %s", name, text);
}

static bool print_at_tag(dv_state *s, tfvm_vm *vm, size_t k, const char *tag, tb_buf *out)
{
    const dv_var *nm = &s->names[k];
    for (size_t j = nm->n; j-- > 0;)
        if (same_tag(nm->vals[j].tag, tag)) {
            tb_printf(out, "%s at %s = %s", nm->name, nm->vals[j].tag, nm->vals[j].text);
            return true;
        }
    const tfvm_debug_ctx **all = NULL;
    size_t n = 0;
    bool found = false;
    if (vm && tfvm_debug_contexts(vm, &all, &n) == TFVM_OK) {
        for (size_t q = 0; q < n && !found; q++) {
            char *t = tag_text(vm, all[q]), *text = t && same_tag(t, tag) ? waiting_value(s, vm, all[q], k) : NULL;
            if (text) {
                tb_printf(out, "%s at %s = %s", nm->name, t, text);
                found = true;
            }
            free(t);
            free(text);
        }
        tfvm_debug_contexts_free(vm, all, n);
    }
    if (!found)
        tb_printf(out, "no value of '%s' at %s (values are kept from the tokens that reached an instruction "
                  "while the debugger ran, and those waiting now)", nm->name, tag);
    return found;
}

bool dv_print(dv_state *s, tfvm_vm *vm, const tfvm_debug_ctx *cur, const char *name, const char *tag, tb_buf *out)
{
    long k = find_name(s, name);
    if (k < 0) {
        tb_printf(out, "no variable named '%s'", name);
        return false;
    }
    if (tag) /* kept values outlive the run; waiting ones need it paused */
        return print_at_tag(s, cur ? vm : NULL, (size_t)k, tag, out);
    if (!vm || !cur) {
        tb_printf(out, "the program is not running: '%s' has no value (use run, step or restart; NAME@TAG "
                  "shows what the last run kept)", name);
        return false;
    }
    const tfvm_debug_ctx *c = cur;
    while (c && !lives_in(s, (size_t)k, region_of(c)))
        c = tfvm_debug_parent(c);
    char *here = tag_text(vm, cur);
    if (!c) {
        size_t j = 0;
        while (s->var_name[j] != (uint32_t)k)
            j++;
        tfvm_region_info r;
        tfvm_program_region(s->p, s->var[j].region, &r);
        tb_printf(out, "'%s' is not in scope at %s: it lives in %s %s", name, here ? here : "?", r.kind, r.name);
        free(here);
        return false;
    }
    char *text = value_at(s, vm, c, (size_t)k);
    if (text) {
        put_assign(out, name, text);
        if (c != cur) {
            char *t = tag_text(vm, c);
            tb_printf(out, " (at %s)", t ? t : "?");
            free(t);
        }
    } else {
        char *t = tag_text(vm, c);
        tb_printf(out, "%s has no value at %s yet", name, t ? t : "?");
        free(t);
    }
    free(here);
    free(text);
    return true;
}

/* The context of the call (or the entry) that c is in. */
static const tfvm_debug_ctx *call_of(const tfvm_debug_ctx *c)
{
    for (; c; c = tfvm_debug_parent(c)) {
        tfvm_debug_ctx_info ci;
        tfvm_debug_ctx_get(c, &ci);
        if (ci.kind != TFVM_CTX_ITER)
            return c;
    }
    return NULL;
}

/* Whether name k is an argument of call context c: a record on a CALL of
 * c's site, or, at the root, on an ARG. */
static bool is_arg(const dv_state *s, size_t k, const tfvm_debug_ctx *c)
{
    tfvm_debug_ctx_info ci;
    tfvm_debug_ctx_get(c, &ci);
    for (size_t j = 0; j < s->n_var; j++) {
        tfvm_inst_info in;
        if (s->var_name[j] != k || tfvm_program_inst(s->p, s->var[j].inst, &in) != TFVM_OK)
            continue;
        if (ci.kind == TFVM_CTX_CALL ? strcmp(in.op, "CALL") == 0 && in.attr == ci.site : strcmp(in.op, "ARG") == 0)
            return true;
    }
    return false;
}

void dv_call_args(dv_state *s, tfvm_vm *vm, const tfvm_debug_ctx *c, tb_buf *out)
{
    bool first = true;
    for (size_t k = 0; s && k < s->n_names; k++) {
        if (!is_arg(s, k, c))
            continue;
        char *text = value_at(s, vm, c, k);
        tb_printf(out, "%s%s = %s", first ? "" : ", ", s->names[k].name, text ? text : "<no value yet>");
        free(text);
        first = false;
    }
}

void dv_info(dv_state *s, tfvm_vm *vm, const tfvm_debug_ctx *cur, bool args, tb_buf *out)
{
    const tfvm_debug_ctx *c = args ? call_of(cur) : cur;
    size_t n = 0;
    for (size_t k = 0; s && c && k < s->n_names; k++) {
        if (args ? !is_arg(s, k, c) : !lives_in(s, k, region_of(c)))
            continue;
        char *text = value_at(s, vm, c, k);
        if (n++)
            tb_printf(out, "\n");
        if (text)
            put_assign(out, s->names[k].name, text);
        else
            tb_printf(out, "%s = <no value yet>", s->names[k].name);
        free(text);
    }
    if (!n)
        tb_printf(out, args ? "No arguments." : "No locals.");
}
