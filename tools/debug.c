/* tools/debug.c — `tfvm debug`: a gdb-like REPL over one deterministic run.
 * The VM pauses before a firing when the hook says so (vm_hook_fn), so the
 * debugger always stops *before* an activation fires; vm/inspect.c gives the
 * read-only views (ready activations, contexts, partial matches). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#ifdef TFVM_HAVE_LIBEDIT
#include <histedit.h>
#include <wchar.h>
#endif

#include "isa/isa.h"
#include "loader/loader.h"
#include "tools/debug.h"
#include "tools/opts.h"
#include "vm/vm.h"

const char *const cli_usage_debug =
    "usage: tfvm debug [options] FILE [ARG...] [NAME=VALUE...]\n"
    "\n"
    "Runs an entry point of FILE (.tfvm, .tfasm, .tfg, .onnx or .pb; all but\n"
    ".tfvm compiled in memory) under an interactive\n"
    "debugger: one thread, the deterministic firing order, stopping before an\n"
    "instruction fires at breakpoints, after steps, or on Ctrl-C. Type `help`\n"
    "at the (tfvm) prompt for the commands (docs/debugger.md).\n"
    "\n"
    "Commands come from stdin: with line editing and history when it is a\n"
    "terminal; read plainly and echoed after the prompt when it is not, so that\n"
    "sessions can be scripted:  tfvm debug examples/fib.tfg 5 < script\n"
    "Arguments are given and parsed as for `tfvm run`: by position, then by name.\n"
    "\n"
    "options:\n"
    "  -e, --entry NAME       entry point to run (default: the first); for .tfg,\n"
    "                         the function compiled as the entry (default: main)\n"
    "  --outputs A,B:1        .pb: the tensors that become results (default: the\n"
    "                         outputs no node consumes)\n"
    "  -h, --help             show this help\n"
    "\n"
    "exit status: 0 after quit or the end of input, 1 bad input file, 2 bad usage\n";

#define PROMPT "(tfvm) "
#define BRIEF_VALUE 48 /* longer tensor values print as their type in one-line views */

/* ---- Breakpoints and tag patterns ------------------------------------------------ */

typedef enum pat_kind {
    PAT_ONE,  /* `*`: any one element */
    PAT_ANY,  /* `...`: any number of elements, none included */
    PAT_CALL, /* NAME@N: a call of function NAME at site N (either may be `*`) */
    PAT_ITER  /* NAME#N: iteration N of loop NAME (either may be `*`) */
} pat_kind;

typedef struct pat_elem {
    pat_kind kind;
    uint32_t region; /* ISA_NONE: any */
    bool any_num;
    uint64_t num;
} pat_elem;

typedef enum bp_kind { BP_BREAK, BP_WATCH } bp_kind;

typedef struct bp {
    int id;
    bp_kind kind;
    uint32_t inst;  /* ISA_NONE: every instruction of opcode `op` (op >= 0), of
                       source line `line` (line > 0) or every CALL of `func` */
    int op;
    uint32_t line;  /* break FILE:LINE */
    uint32_t func;  /* break FUNCTION: its FUNC region, else ISA_NONE */
    pat_elem *pat;  /* NULL: no condition */
    size_t n_pat;
    char *pat_text; /* as written, for listing */
    uint64_t hits;
} bp;

/* ---- Session state ---------------------------------------------------------------- */

typedef enum run_state {
    RUN_NONE,   /* no run: not started yet, or the last one finished and was collected */
    RUN_ACTIVE, /* paused before an activation (vm->paused) */
    RUN_ENDED   /* stuck or failed: contexts kept for inspection until the next start */
} run_state;

typedef enum go_mode { GO_CONTINUE, GO_STEP, GO_FINISH, GO_NEXT } go_mode;
typedef enum stop_kind { STOP_NONE, STOP_STEP, STOP_BREAK, STOP_INTERRUPT, STOP_FINISH, STOP_NEXT } stop_kind;

typedef struct dbg {
    tfvm_program *prog;
    const isa_program *p;
    tfvm_vm *vm;
    uint32_t entry;
    tfvm_entry_info e;
    tfvm_value *args;
    const char **arg_text; /* the argument of each parameter, as typed */
    size_t n_args;
    run_state run;
    const char *ended_why; /* RUN_ENDED: "stuck" or "failed" */
    bool tty;

    bp *bps;
    size_t n_bps, cap_bps;
    int next_id;

    /* the current go (run, continue, step, finish) */
    go_mode mode;
    uint64_t left;  /* GO_STEP: firings still to print */
    stop_kind stop;
    bp *hit;
    /* GO_FINISH: the call context being finished and what its RETURNs sent */
    const vm_ctx *fctx;
    uint64_t fserial;
    uint32_t fsite, freturned;
    dev_value *fvals; /* per RETURN of the site (vm_splan.returns order) */

    const vm_ctx **chain; /* scratch: a tag's elements, outermost first */
    size_t cap_chain;

    uint32_t next_line; /* GO_NEXT: the source line being left */

    /* the program's source file (list), read at the first need */
    const char *file;   /* the program file as given */
    bool src_tried;
    char *src;          /* its text, lines NUL-terminated */
    char **src_line;    /* line k (1-based) at src_line[k - 1] */
    uint32_t n_src;
    uint32_t list_next; /* `list` again: the line to go on from (0: around the current one) */
} dbg;

static volatile sig_atomic_t dbg_sigint;

static void on_sigint(int sig)
{
    (void)sig;
    dbg_sigint = 1;
}

UT_PRINTF(1, 2) static void derr(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
}

/* Prints and empties a line buffer (adds the newline). */
static void emit(ut_buf *b)
{
    if (b->failed)
        fputs("error: out of memory\n", stdout);
    else {
        fwrite(b->data, 1, b->len, stdout);
        fputc('\n', stdout);
    }
    b->len = 0;
    b->failed = false;
}

/* ---- Printing pieces ---------------------------------------------------------------- */

static void put_shape(ut_buf *b, const tfvm_tensor *t)
{
    ut_buf_printf(b, "%s[", tfvm_dtype_name((tfvm_dtype)t->dtype));
    for (int k = 0; k < t->rank; k++)
        ut_buf_printf(b, "%s%lld", k ? ", " : "", (long long)t->dims[k]);
    ut_buf_printf(b, "]");
}

/* A value as `tfvm run` prints it; in one-line views (brief) a long tensor
 * is shown by its dtype and shape. */
static void put_value(ut_buf *b, const dev_value *v, bool brief)
{
    if (!v || (!v->dtype && !v->dead)) {
        ut_buf_printf(b, "?");
        return;
    }
    if (brief && v->is_tensor && !v->dead) {
        ut_buf t;
        ut_buf_init(&t, NULL);
        vm_format_value(v, &t);
        if (!t.failed && t.len <= BRIEF_VALUE)
            ut_buf_append(b, t.data, t.len);
        else
            put_shape(b, v->u.t);
        ut_buf_free(&t);
        return;
    }
    vm_format_value(v, b);
}

static const char *region_kind_name(uint8_t kind)
{
    return kind == ISA_REGION_LOOP ? "loop" : kind == ISA_REGION_FUNC ? "func" : "entry";
}

/* An instruction's name as seen from region `from`: qualified by its region
 * when it lives elsewhere (as .tfasm writes references); anonymous ones are %N. */
static void put_inst_ref(ut_buf *b, const isa_program *p, uint32_t i, uint32_t from)
{
    char label[160];
    if (p->insts[i].region != from && p->insts[i].name)
        ut_buf_printf(b, "%s.", p->regions[p->insts[i].region].name);
    ut_buf_printf(b, "%s", isa_inst_label(p, i, label, sizeof label));
}

/* Input ports: data ports by number, control ports "ctl" (ctl0, ctl1... when
 * there are several). */
static void put_port_name(ut_buf *b, const isa_inst *in, uint32_t port)
{
    if (port < in->n_in)
        ut_buf_printf(b, "%u", port);
    else if (in->n_ctl == 1)
        ut_buf_printf(b, "ctl");
    else
        ut_buf_printf(b, "ctl%u", port - in->n_in);
}

/* A consumer's port: "[0]", "[ctl]" */
static void put_port(ut_buf *b, const isa_inst *in, uint32_t port)
{
    ut_buf_printf(b, "[");
    put_port_name(b, in, port);
    ut_buf_printf(b, "]");
}

static void put_loc(ut_buf *b, const isa_inst *in)
{
    if (in->line)
        ut_buf_printf(b, " @%u:%u", in->line, in->col);
}

/* "name (OP)" */
static void put_inst(ut_buf *b, const isa_program *p, uint32_t i)
{
    char label[160];
    ut_buf_printf(b, "%s (%s)", isa_inst_label(p, i, label, sizeof label), isa_ops[p->insts[i].op].name);
}

static void put_tag(ut_buf *b, const dbg *d, const vm_ctx *c) { vm_format_tag(d->vm, c, b); }

/* The tag of c with one more element: "[fib@2, fib@0]". */
static void put_tag_plus(ut_buf *b, const dbg *d, const vm_ctx *c, const char *elem)
{
    size_t at = b->len;
    put_tag(b, d, c);
    if (b->failed || b->len == at)
        return;
    b->len--; /* the closing bracket */
    ut_buf_printf(b, "%s%s]", b->len - at > 1 ? ", " : "", elem);
}

static const char *output_name(const isa_inst *in, uint32_t o, char *buf, size_t size)
{
    if (isa_is_switch(in->op))
        return o ? "true" : "false";
    if (in->op == ISA_MERGE)
        return o ? "index" : "value";
    snprintf(buf, size, "out%u", o);
    return buf;
}

/* The consumers of every output of instruction i: "a[0], b[ctl]", outputs
 * named and separated by "; " when there are several. `dead_out` marks the
 * untaken output of a SWITCH (a dead token, or none when pruned), or -1. */
static void put_consumers(ut_buf *b, const isa_program *p, uint32_t i, int dead_out)
{
    const isa_inst *in = &p->insts[i];
    uint32_t n_out = isa_outs(in);
    bool any = false;
    for (uint32_t o = 0; o < n_out; o++) {
        bool first = true;
        for (uint32_t k = in->edge_first; k < in->edge_first + in->n_edges; k++) {
            const isa_edge *e = &p->edges[k];
            if (e->out != o)
                continue;
            if (first) {
                if (any)
                    ut_buf_printf(b, ";");
                if (n_out > 1) {
                    char nb[16];
                    bool pruned = in->flags & (o ? ISA_FLAG_PRUNE_TRUE : ISA_FLAG_PRUNE_FALSE);
                    ut_buf_printf(b, " %s%s:", output_name(in, o, nb, sizeof nb),
                                  (int)o != dead_out ? ""
                                  : pruned       ? " (no token)"
                                                 : " (dead)");
                }
            }
            ut_buf_printf(b, "%s ", first ? "" : ",");
            put_inst_ref(b, p, e->inst, in->region);
            put_port(b, &p->insts[e->inst], e->port);
            first = false;
            any = true;
        }
    }
    if (!any)
        ut_buf_printf(b, " nothing");
}

/* A scalar as a number, for comparing; false for a tensor, a dead or no value. */
static bool scalar_num(const dev_value *v, long double *out)
{
    if (!v || v->dead || v->is_tensor)
        return false;
    switch ((tfvm_dtype)v->dtype) {
    case TFVM_BOOL: *out = v->u.b; return true;
    case TFVM_I32: *out = v->u.i32; return true;
    case TFVM_I64: *out = (long double)v->u.i64; return true;
    case TFVM_F32: *out = v->u.f32; return true;
    case TFVM_F64: *out = v->u.f64; return true;
    case TFVM_U8: *out = v->u.u8; return true;
    case TFVM_I8: *out = v->u.i8; return true;
    }
    return false;
}

/* Which way a BRANCH goes, `x OP k` as the VM compares them: 1 true, 0
 * false, -1 unknown (a tensor or dead value: the firing says what happens). */
static int branch_taken(const dev_value *x, const dev_value *k, isa_op op)
{
    long double a, c;
    if (!scalar_num(x, &a) || !scalar_num(k, &c) || x->dtype != k->dtype)
        return -1;
    switch (op) {
    case ISA_LESS: return a < c;
    case ISA_LESS_EQUAL: return a <= c;
    case ISA_GREATER: return a > c;
    case ISA_GREATER_EQUAL: return a >= c;
    case ISA_EQUAL: return a == c;
    case ISA_NOT_EQUAL: return a != c;
    default: return -1;
    }
}

/* One firing (about to happen): instruction, opcode, tag, input values and
 * where its outputs go (with the tag they land at when it changes). */
static void put_firing(ut_buf *b, const dbg *d, const vm_act *a, bool dests)
{
    const isa_program *p = d->p;
    const isa_inst *in = &p->insts[a->inst];
    const vm_iplan *ip = &d->vm->plan.insts[a->inst];
    put_inst(b, p, a->inst);
    ut_buf_printf(b, " at ");
    put_tag(b, d, a->ctx);
    /* dead: a control port (or, for a matched instruction, any port) is dead */
    bool dead = false;
    if (ip->matched && in->op != ISA_MERGE)
        for (uint32_t k = 0; k < ip->ports; k++)
            dead |= a->ctx->slots[ip->slot + k].dead;
    else
        dead = a->v.dead;
    if (in->op == ISA_ARG) {
        ut_buf_printf(b, ": value ");
        put_value(b, &a->v, true);
    } else if (in->op == ISA_CONST) {
        dev_value none = dev_dead();
        ut_buf_printf(b, ": value ");
        put_value(b, dead ? &none : &d->vm->consts[in->a], true);
        if (dead)
            ut_buf_printf(b, " (a dead control input)");
    } else if (in->op == ISA_MERGE) {
        ut_buf_printf(b, ": in ");
        put_value(b, &a->v, true);
        ut_buf_printf(b, " (input %u)", a->aux);
    } else if (in->n_in) {
        ut_buf_printf(b, ": in ");
        for (uint32_t k = 0; k < in->n_in; k++) {
            if (k)
                ut_buf_printf(b, ", ");
            put_value(b, vm_act_input(d->vm, a, k), true);
        }
    }
    /* SWITCH and BRANCH: the way the token goes, in words */
    int dead_out = -1;
    if (in->op == ISA_SWITCH && !dead) {
        const dev_value *pred = vm_act_input(d->vm, a, 1);
        if (pred && !pred->is_tensor && pred->dtype == TFVM_BOOL)
            dead_out = pred->u.b ? 0 : 1;
    } else if (in->op == ISA_BRANCH && !dead) {
        int taken = branch_taken(vm_act_input(d->vm, a, 0), &d->vm->consts[in->b], (isa_op)in->a);
        if (taken >= 0)
            dead_out = taken ? 0 : 1;
    }
    if (dead_out >= 0)
        ut_buf_printf(b, "; goes %s", dead_out ? "false" : "true");
    if (!dests)
        return;
    ut_buf_printf(b, " ->");
    const vm_ctx *c = a->ctx;
    char lab[160];
    switch ((isa_op)in->op) {
    case ISA_RESULT:
        ut_buf_printf(b, " result %u '%s'", in->a, p->entries[d->entry].results[in->a].name);
        return;
    case ISA_CALL:
        if (dead) {
            ut_buf_printf(b, " no call (dead): each RETURN %s answers <dead>",
                          isa_site_label(p->regions[p->sites[in->a].callee].name, p->sites[in->a].id, lab, sizeof lab));
            return;
        }
        ut_buf_printf(b, " ");
        put_tag_plus(b, d, c, isa_site_label(p->regions[p->sites[in->a].callee].name, p->sites[in->a].id, lab, sizeof lab));
        break;
    case ISA_ENTER:
        if (dead) {
            ut_buf_printf(b, " no loop (dead): each EXIT %s answers <dead>", p->regions[in->a].name);
            return;
        }
        ut_buf_printf(b, " ");
        snprintf(lab, sizeof lab, "%s#%s", p->regions[in->a].name, (in->flags & ISA_FLAG_CONST) ? "*" : "0");
        put_tag_plus(b, d, c, lab);
        break;
    case ISA_NEXTITER:
    case ISA_EXIT:
        if (dead) {
            ut_buf_printf(b, " dropped (dead)");
            return;
        }
        ut_buf_printf(b, " ");
        if (in->op == ISA_EXIT) {
            put_tag(b, d, c->parent);
        } else {
            snprintf(lab, sizeof lab, "%s#%" PRIu64, p->regions[c->elem].name, c->iter + 1);
            put_tag_plus(b, d, c->parent, lab);
        }
        break;
    case ISA_RETURN:
        ut_buf_printf(b, " ");
        put_tag(b, d, c->parent);
        break;
    default:
        break;
    }
    put_consumers(b, p, a->inst, dead_out);
}

/* ---- Resolving names ------------------------------------------------------------------ */

static int find_region(const isa_program *p, const char *name, size_t len)
{
    for (uint32_t r = 0; r < p->n_regions; r++)
        if (strlen(p->regions[r].name) == len && memcmp(p->regions[r].name, name, len) == 0)
            return (int)r;
    return -1;
}

static bool parse_u64_text(const char *s, uint64_t *out)
{
    if (!isdigit((unsigned char)*s))
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* WHAT is %N, REGION.NAME, NAME (unique in the program) or an opcode (any
 * case). Sets *inst (ISA_NONE for an opcode) and *op; prints an error and
 * returns false when it names nothing, or several instructions. */
static bool resolve(const dbg *d, const char *what, uint32_t *inst, int *op)
{
    const isa_program *p = d->p;
    *inst = ISA_NONE;
    *op = -1;
    uint64_t k;
    if (what[0] == '%' && parse_u64_text(what + 1, &k)) {
        if (k >= p->n_insts) {
            derr("no instruction %%%" PRIu64 " (the program has %u)", k, p->n_insts);
            return false;
        }
        *inst = (uint32_t)k;
        *op = p->insts[k].op;
        return true;
    }
    const char *dot = strchr(what, '.');
    if (dot) {
        int r = find_region(p, what, (size_t)(dot - what));
        if (r < 0) {
            derr("no region named '%.*s'", (int)(dot - what), what);
            return false;
        }
        for (uint32_t i = 0; i < p->n_insts; i++)
            if (p->insts[i].region == (uint32_t)r && p->insts[i].name && strcmp(p->insts[i].name, dot + 1) == 0) {
                *inst = i;
                *op = p->insts[i].op;
                return true;
            }
        derr("no instruction named '%s' in %s %s", dot + 1, region_kind_name(p->regions[r].kind), p->regions[r].name);
        return false;
    }
    uint32_t found = 0, first = ISA_NONE;
    for (uint32_t i = 0; i < p->n_insts; i++)
        if (p->insts[i].name && strcmp(p->insts[i].name, what) == 0) {
            if (!found++)
                first = i;
        }
    if (found == 1) {
        *inst = first;
        *op = p->insts[first].op;
        return true;
    }
    if (found > 1) {
        ut_buf b;
        ut_buf_init(&b, NULL);
        ut_buf_printf(&b, "error: '%s' names %u instructions:", what, found);
        uint32_t shown = 0;
        for (uint32_t i = 0; i < p->n_insts && shown < 6; i++)
            if (p->insts[i].name && strcmp(p->insts[i].name, what) == 0)
                ut_buf_printf(&b, "%s %s.%s", shown++ ? "," : "", p->regions[p->insts[i].region].name, what);
        ut_buf_printf(&b, "%s (write REGION.NAME)", found > shown ? ", ..." : "");
        emit(&b);
        ut_buf_free(&b);
        return false;
    }
    for (int o = 0; o < ISA_OP_COUNT; o++)
        if (strcasecmp(isa_ops[o].name, what) == 0) {
            *op = o;
            return true;
        }
    derr("no instruction or opcode named '%s'", what);
    return false;
}

/* "n_sw (SWITCH) in func fib @12:5" or "every ADD" */
static void put_bp_what(ut_buf *b, const dbg *d, const bp *x)
{
    if (x->line) {
        ut_buf_printf(b, "line %u of %s", x->line, d->p->source ? d->p->source : "the source");
    } else if (x->func != ISA_NONE) {
        ut_buf_printf(b, "every call of function %s", d->p->regions[x->func].name);
    } else if (x->inst == ISA_NONE) {
        ut_buf_printf(b, "every %s", isa_ops[x->op].name);
    } else {
        const isa_region *r = &d->p->regions[d->p->insts[x->inst].region];
        put_inst(b, d->p, x->inst);
        ut_buf_printf(b, " in %s %s", region_kind_name(r->kind), r->name);
        put_loc(b, &d->p->insts[x->inst]);
    }
    if (x->pat_text)
        ut_buf_printf(b, " if %s", x->pat_text);
}

/* Parses "[ELEM, ...]" into b->pat. ELEM: `...`, `*`, NAME@N, NAME#N, where
 * NAME or N may be `*`. */
static bool parse_pattern(const dbg *d, const char *text, bp *x)
{
    const isa_program *p = d->p;
    const char *s = text;
    while (isspace((unsigned char)*s))
        s++;
    size_t len = strlen(s);
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    if (len < 2 || s[0] != '[' || s[len - 1] != ']') {
        derr("a tag pattern is written in brackets, like [fib@*, ...] or [outer#2, inner#*]");
        return false;
    }
    size_t cap = 1;
    for (size_t k = 0; k < len; k++)
        cap += s[k] == ',';
    x->pat = calloc(cap, sizeof *x->pat);
    x->pat_text = malloc(len + 1);
    if (!x->pat || !x->pat_text) {
        derr("out of memory");
        return false;
    }
    memcpy(x->pat_text, s, len);
    x->pat_text[len] = '\0';
    const char *q = s + 1, *end = s + len - 1;
    x->n_pat = 0;
    while (q < end) {
        while (q < end && isspace((unsigned char)*q))
            q++;
        const char *e = q;
        while (e < end && *e != ',')
            e++;
        const char *t = e;
        while (t > q && isspace((unsigned char)t[-1]))
            t--;
        size_t n = (size_t)(t - q);
        if (n == 0) {
            if (x->n_pat == 0 && e == end)
                break; /* "[]": the root tag */
            derr("empty element in tag pattern %s", x->pat_text);
            return false;
        }
        pat_elem *pe = &x->pat[x->n_pat++];
        pe->region = ISA_NONE;
        pe->any_num = true;
        if (n == 3 && memcmp(q, "...", 3) == 0) {
            pe->kind = PAT_ANY;
        } else if (n == 1 && *q == '*') {
            pe->kind = PAT_ONE;
        } else {
            const char *m = q;
            while (m < t && *m != '@' && *m != '#')
                m++;
            if (m == t || m == q || m + 1 == t) {
                derr("bad tag pattern element '%.*s' (want NAME@SITE, NAME#ITERATION, * or ...)", (int)n, q);
                return false;
            }
            pe->kind = *m == '@' ? PAT_CALL : PAT_ITER;
            if (!(m - q == 1 && *q == '*')) {
                int r = find_region(p, q, (size_t)(m - q));
                uint8_t want = pe->kind == PAT_CALL ? ISA_REGION_FUNC : ISA_REGION_LOOP;
                if (r < 0 || p->regions[r].kind != want) {
                    derr("no %s named '%.*s' (in tag pattern %s)", want == ISA_REGION_FUNC ? "function" : "loop",
                         (int)(m - q), q, x->pat_text);
                    return false;
                }
                pe->region = (uint32_t)r;
            }
            char num[32];
            size_t nl = (size_t)(t - m - 1);
            if (!(nl == 1 && m[1] == '*')) {
                if (nl >= sizeof num) {
                    derr("bad number '%.*s' in tag pattern", (int)nl, m + 1);
                    return false;
                }
                memcpy(num, m + 1, nl);
                num[nl] = '\0';
                if (!parse_u64_text(num, &pe->num)) {
                    derr("bad number '%s' in tag pattern (want digits or *)", num);
                    return false;
                }
                pe->any_num = false;
            }
        }
        q = e + 1;
    }
    return true;
}

/* The elements of c's tag, outermost first, into d->chain; returns how many. */
static size_t tag_chain(dbg *d, const vm_ctx *c)
{
    size_t n = 0;
    for (const vm_ctx *x = c; x && x->kind != VM_CTX_ROOT; x = x->parent)
        n++;
    if (n > d->cap_chain) {
        size_t cap = n * 2;
        const vm_ctx **m = realloc(d->chain, cap * sizeof *m);
        if (!m)
            return SIZE_MAX;
        d->chain = m;
        d->cap_chain = cap;
    }
    size_t k = n;
    for (const vm_ctx *x = c; x && x->kind != VM_CTX_ROOT; x = x->parent)
        d->chain[--k] = x;
    return n;
}

static bool elem_matches(const isa_program *p, const pat_elem *pe, const vm_ctx *c)
{
    switch (pe->kind) {
    case PAT_ONE:
        return true;
    case PAT_CALL:
        return c->kind == VM_CTX_CALL && (pe->region == ISA_NONE || p->sites[c->elem].callee == pe->region) &&
               (pe->any_num || p->sites[c->elem].id == pe->num);
    case PAT_ITER:
        return c->kind == VM_CTX_ITER && (pe->region == ISA_NONE || c->elem == pe->region) &&
               (pe->any_num || c->iter == pe->num);
    case PAT_ANY:
        break;
    }
    return false;
}

static bool pat_matches(const isa_program *p, const pat_elem *pe, size_t np, const vm_ctx *const *c, size_t nc)
{
    while (np && pe->kind != PAT_ANY) {
        if (!nc || !elem_matches(p, pe, c[0]))
            return false;
        pe++, np--, c++, nc--;
    }
    if (!np)
        return nc == 0;
    for (size_t k = 0; k <= nc; k++) /* `...` takes k elements */
        if (pat_matches(p, pe + 1, np - 1, c + k, nc - k))
            return true;
    return false;
}

static bool bp_matches(dbg *d, const bp *x, const vm_act *a)
{
    const isa_inst *in = &d->p->insts[a->inst];
    if (x->inst != ISA_NONE) {
        if (a->inst != x->inst)
            return false;
    } else if (x->line) {
        if (in->line != x->line)
            return false;
    } else if (x->func != ISA_NONE) {
        if (in->op != ISA_CALL || d->p->sites[in->a].callee != x->func)
            return false;
    } else if (in->op != x->op) {
        return false;
    }
    if (!x->pat)
        return true;
    size_t n = tag_chain(d, a->ctx);
    return n != SIZE_MAX && pat_matches(d->p, x->pat, x->n_pat, d->chain, n);
}

static void bp_free(bp *x)
{
    free(x->pat);
    free(x->pat_text);
}

/* ---- Running ---------------------------------------------------------------------------- */

static void finish_note(dbg *d, const vm_act *a)
{
    const isa_inst *in = &d->p->insts[a->inst];
    if (in->op != ISA_RETURN || in->a != d->fsite || a->ctx != d->fctx || !vm_ctx_same(d->fctx, d->fserial))
        return;
    const vm_splan *sp = &d->vm->plan.sites[d->fsite];
    for (uint32_t k = 0; k < sp->n_returns; k++)
        if (sp->returns[k] == a->inst && !d->fvals[k].dtype && !d->fvals[k].dead) {
            d->fvals[k] = a->v;
            dev_value_retain(&d->fvals[k]);
            d->freturned++;
        }
}

static bool finish_reached(const dbg *d)
{
    return !vm_ctx_same(d->fctx, d->fserial) || d->freturned >= d->vm->plan.sites[d->fsite].n_returns;
}

/* A firing that is about to happen and will not be stopped: printed when
 * stepping or watched, and noted for finish. */
static void observe(dbg *d, const vm_act *a)
{
    bool show = d->mode == GO_STEP;
    bp *watched = NULL;
    for (size_t k = 0; k < d->n_bps; k++)
        if (d->bps[k].kind == BP_WATCH && bp_matches(d, &d->bps[k], a)) {
            d->bps[k].hits++;
            if (!watched)
                watched = &d->bps[k];
        }
    if (show || watched) {
        ut_buf b;
        ut_buf_init(&b, NULL);
        if (watched && !show)
            ut_buf_printf(&b, "[watch %d] ", watched->id);
        put_firing(&b, d, a, true);
        emit(&b);
        ut_buf_free(&b);
    }
    if (d->mode == GO_STEP && d->left)
        d->left--;
    if (d->mode == GO_FINISH)
        finish_note(d, a);
}

static bool on_fire(void *ud, tfvm_vm *vm, const vm_act *a)
{
    (void)vm;
    dbg *d = ud;
    if (dbg_sigint) {
        dbg_sigint = 0;
        d->stop = STOP_INTERRUPT;
        return true;
    }
    if (d->mode == GO_STEP && d->left == 0) {
        d->stop = STOP_STEP;
        return true;
    }
    if (d->mode == GO_FINISH && finish_reached(d)) {
        d->stop = STOP_FINISH;
        return true;
    }
    if (d->mode == GO_NEXT && d->p->insts[a->inst].line && d->p->insts[a->inst].line != d->next_line) {
        d->stop = STOP_NEXT;
        return true;
    }
    for (size_t k = 0; k < d->n_bps; k++)
        if (d->bps[k].kind == BP_BREAK && bp_matches(d, &d->bps[k], a)) {
            d->bps[k].hits++;
            d->hit = &d->bps[k];
            d->stop = STOP_BREAK;
            return true;
        }
    observe(d, a);
    return false;
}

static void finish_clear(dbg *d)
{
    if (d->fvals) {
        uint32_t n = d->vm->plan.sites[d->fsite].n_returns;
        for (uint32_t k = 0; k < n; k++)
            dev_value_release(&d->fvals[k]);
        free(d->fvals);
        d->fvals = NULL;
    }
    d->fctx = NULL;
}

/* Partial matches held in context c. */
static size_t waiting_in(const dbg *d, const vm_ctx *c)
{
    const vm_rplan *rp = &d->vm->plan.regions[c->region];
    size_t n = 0;
    for (uint32_t i = rp->first; i < rp->end; i++)
        n += vm_match_state(d->vm, c, i) == VM_MATCH_WAITING;
    return n;
}

/* Partial matches in every live context. */
static size_t count_waiting(const dbg *d)
{
    vm_ctx **all;
    size_t n, waiting = 0;
    if (vm_live_contexts(d->vm, &all, &n) != TFVM_OK)
        return 0;
    for (size_t k = 0; k < n; k++)
        waiting += waiting_in(d, all[k]);
    vm_contexts_free(d->vm, all, n);
    return waiting;
}

/* The run went quiescent: either every result arrived (collect and print
 * them, the run is over) or it is stuck (keep it to inspect). */
static void report_done(dbg *d)
{
    tfvm_vm *vm = d->vm;
    const isa_entry *en = &d->p->entries[d->entry];
    for (uint32_t k = 0; k < en->n_results; k++) {
        bool set = atomic_load(&vm->result_set[k]);
        if (set && !vm->results[k].dead)
            continue;
        d->run = RUN_ENDED;
        d->ended_why = "stuck";
        if (set) {
            printf("Run stuck: result %u '%s' of entry '%s' received a dead token (no branch produced it)\n", k,
                   en->results[k].name, en->name);
            return;
        }
        size_t w = count_waiting(d);
        if (w)
            printf("Run stuck: result %u '%s' never arrived; %zu instruction%s hold%s a partial match (see `match`)\n", k,
                   en->results[k].name, w, w == 1 ? "" : "s", w == 1 ? "s" : "");
        else
            printf("Run stuck: result %u '%s' never arrived, and no instruction holds a partial match\n", k,
                   en->results[k].name);
        return;
    }
    tfvm_value *res = calloc(en->n_results + 1, sizeof *res);
    if (!res) {
        derr("out of memory");
        return;
    }
    tfvm_status st = vm_end(vm, res, en->n_results);
    d->run = RUN_NONE;
    if (st != TFVM_OK) {
        printf("Run failed: %s\n", tfvm_errmsg(vm));
        free(res);
        return;
    }
    ut_buf b;
    ut_buf_init(&b, NULL);
    ut_buf_printf(&b, "Run finished:");
    for (uint32_t k = 0; k < en->n_results; k++) {
        dev_value dv = {.dtype = (uint8_t)res[k].dtype};
        if (res[k].tensor) {
            dv.is_tensor = 1;
            dv.u.t = res[k].tensor;
        } else {
            memcpy(&dv.u, &res[k].as, sizeof res[k].as);
        }
        ut_buf_printf(&b, "%s %s = ", k ? "," : "", en->results[k].name);
        put_value(&b, &dv, false);
        tfvm_value_release(&res[k]);
    }
    emit(&b);
    ut_buf_free(&b);
    free(res);
}

/* ---- The source file ---------------------------------------------------------------- */

/* Reads the program's source file once: its name as recorded (relative to
 * the working directory), else next to the program file. */
static void source_load(dbg *d)
{
    if (d->src_tried)
        return;
    d->src_tried = true;
    const char *name = d->p->source;
    if (!name)
        return;
    FILE *f = fopen(name, "rb");
    if (!f && name[0] != '/' && strchr(d->file, '/')) {
        char path[4096];
        const char *slash = strrchr(d->file, '/');
        snprintf(path, sizeof path, "%.*s/%s", (int)(slash - d->file), d->file, name);
        f = fopen(path, "rb");
    }
    if (!f)
        return;
    ut_buf b;
    ut_buf_init(&b, NULL);
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        ut_buf_append(&b, chunk, got);
    fclose(f);
    ut_buf_append(&b, "", 1);
    if (b.failed) {
        ut_buf_free(&b);
        return;
    }
    size_t len;
    d->src = ut_buf_take(&b, &len);
    uint32_t n = 1;
    for (size_t k = 0; k + 1 < len; k++)
        n += d->src[k] == '\n' && k + 2 < len;
    d->src_line = calloc(n, sizeof *d->src_line);
    if (!d->src || !d->src_line) {
        free(d->src);
        free(d->src_line);
        d->src = NULL;
        d->src_line = NULL;
        return;
    }
    char *at = d->src;
    for (uint32_t k = 0; k < n; k++) {
        d->src_line[k] = at;
        char *nl = strchr(at, '\n');
        if (!nl)
            break;
        *nl = '\0';
        if (nl > at && nl[-1] == '\r')
            nl[-1] = '\0';
        at = nl + 1;
    }
    d->n_src = n;
}

/* Line `line` (1-based) of the source, or NULL. */
static const char *source_line(dbg *d, uint32_t line)
{
    source_load(d);
    return line && line <= d->n_src ? d->src_line[line - 1] : NULL;
}

static void report_next(dbg *d, const char *prefix)
{
    ut_buf b;
    ut_buf_init(&b, NULL);
    ut_buf_printf(&b, "%s", prefix);
    put_firing(&b, d, &d->vm->paused, true);
    emit(&b);
    ut_buf_free(&b);
}

static void report(dbg *d, vm_state st)
{
    ut_buf b;
    ut_buf_init(&b, NULL);
    if (st == VM_PAUSED) {
        switch (d->stop) {
        case STOP_BREAK:
            ut_buf_printf(&b, "Breakpoint %d, ", d->hit->id);
            put_firing(&b, d, &d->vm->paused, true);
            emit(&b);
            break;
        case STOP_INTERRUPT:
            report_next(d, d->tty ? "\nInterrupted. Next: " : "Interrupted. Next: "); /* after the echoed ^C */
            break;
        case STOP_FINISH: {
            const vm_splan *sp = &d->vm->plan.sites[d->fsite];
            char lab[160];
            ut_buf_printf(&b, "Returned from %s:", isa_site_label(d->p->regions[d->p->sites[d->fsite].callee].name,
                                                                   d->p->sites[d->fsite].id, lab, sizeof lab));
            for (uint32_t k = 0; k < sp->n_returns; k++) {
                ut_buf_printf(&b, "%s ", k ? "," : "");
                if (d->fvals[k].dtype || d->fvals[k].dead)
                    put_value(&b, &d->fvals[k], true);
                else
                    ut_buf_printf(&b, "(no token)");
            }
            emit(&b);
            report_next(d, "Next: ");
            break;
        }
        case STOP_NEXT: {
            const isa_inst *in = &d->p->insts[d->vm->paused.inst];
            const char *text = source_line(d, in->line);
            if (text)
                printf("%u\t%s\n", in->line, text);
            else
                printf("line %u\n", in->line);
            report_next(d, "Next: ");
            break;
        }
        case STOP_STEP:
        case STOP_NONE:
            break;
        }
    } else if (st == VM_DONE) {
        report_done(d);
    } else if (st == VM_FAILED) {
        d->run = RUN_ENDED;
        d->ended_why = "failed";
        printf("Run failed: %s\n", tfvm_errmsg(d->vm));
    }
    ut_buf_free(&b);
    finish_clear(d);
}

/* Runs until the hook stops it or the run ends. The paused activation (if
 * any) fires first, without the hook: it was already looked at. */
static void go(dbg *d, go_mode mode, uint64_t steps)
{
    d->mode = mode;
    d->left = steps;
    d->list_next = 0;
    d->stop = STOP_NONE;
    d->hit = NULL;
    dbg_sigint = 0;
    if (d->vm->has_paused)
        observe(d, &d->vm->paused);
    fflush(stdout);
    vm_state st = vm_step(d->vm, 0);
    report(d, st);
}

static bool start(dbg *d)
{
    finish_clear(d);
    tfvm_status st = vm_begin(d->vm, d->entry, d->args, d->n_args);
    if (st != TFVM_OK) {
        d->run = RUN_ENDED;
        d->ended_why = "failed";
        derr("cannot start the run: %s", tfvm_errmsg(d->vm));
        return false;
    }
    d->run = RUN_ACTIVE;
    printf("Starting %s(", d->e.name);
    for (size_t k = 0; k < d->n_args; k++)
        printf("%s%s", k ? ", " : "", d->arg_text[k]);
    printf(")\n");
    return true;
}

/* ---- Commands ----------------------------------------------------------------------------- */

typedef struct dbg_cmd dbg_cmd;
typedef bool (*cmd_fn)(dbg *d, char *args); /* false: quit */

static bool need_args_none(const char *name, const char *args)
{
    if (*args) {
        derr("%s takes no arguments", name);
        return false;
    }
    return true;
}

/* The run must be paused (or not started, when `start_ok`: then it starts). */
static bool need_active(dbg *d, bool start_ok)
{
    if (d->run == RUN_ACTIVE)
        return true;
    if (d->run == RUN_ENDED) {
        derr("the run has ended (%s); `run` or `restart` starts it again", d->ended_why);
        return false;
    }
    if (start_ok)
        return start(d);
    derr("the program is not running (use run, step or restart)");
    return false;
}

/* Views of the run's state: a paused or ended run. */
static bool need_state(const dbg *d)
{
    if (d->run != RUN_NONE)
        return true;
    derr("the program is not running (use run, step or restart)");
    return false;
}

static bool cmd_run(dbg *d, char *args)
{
    if (!need_args_none("run", args))
        return true;
    if (start(d))
        go(d, GO_CONTINUE, 0);
    return true;
}

static bool cmd_restart(dbg *d, char *args)
{
    if (!need_args_none("restart", args))
        return true;
    if (!start(d))
        return true;
    go(d, GO_STEP, 0); /* stops before the first firing */
    if (d->run == RUN_ACTIVE)
        report_next(d, "Next: ");
    return true;
}

static bool cmd_continue(dbg *d, char *args)
{
    if (need_args_none("continue", args) && need_active(d, true))
        go(d, GO_CONTINUE, 0);
    return true;
}

static bool cmd_step(dbg *d, char *args)
{
    uint64_t n = 1;
    if (*args && (!parse_u64_text(args, &n) || n == 0)) {
        derr("step takes a positive count, got '%s'", args);
        return true;
    }
    if (need_active(d, true))
        go(d, GO_STEP, n);
    return true;
}

/* next: fire until an instruction of another source line is about to fire
 * (instructions without a line do not count). */
static bool cmd_next(dbg *d, char *args)
{
    if (!need_args_none("next", args) || !need_active(d, true))
        return true;
    d->next_line = d->p->insts[d->vm->paused.inst].line;
    if (!d->vm->has_paused)
        d->next_line = 0;
    go(d, GO_NEXT, 0);
    return true;
}

/* list [LINE | FUNCTION]: source lines around the current instruction's line
 * (or LINE, or the function's first line); `list` again goes on below. */
#define LIST_LINES 10
static bool cmd_list(dbg *d, char *args)
{
    const isa_program *p = d->p;
    source_load(d);
    if (!d->src) {
        if (!p->source)
            derr("the program names no source file (compile it from .tfg, .onnx or .pb to have one)");
        else
            derr("cannot read the source file %s", p->source);
        return true;
    }
    uint32_t mark = 0, center = 0;
    if (d->run == RUN_ACTIVE && d->vm->has_paused)
        mark = p->insts[d->vm->paused.inst].line;
    if (*args) {
        uint64_t line;
        int r = find_region(p, args, strlen(args));
        if (parse_u64_text(args, &line)) {
            if (line == 0 || line > d->n_src) {
                derr("line %" PRIu64 " is out of range: %s has %u lines", line, p->source, d->n_src);
                return true;
            }
            center = (uint32_t)line;
        } else if (r >= 0) {
            for (uint32_t i = 0; i < p->n_insts; i++)
                if (p->insts[i].region == (uint32_t)r && p->insts[i].line && (!center || p->insts[i].line < center))
                    center = p->insts[i].line;
            if (!center) {
                derr("%s %s has no source lines", region_kind_name(p->regions[r].kind), p->regions[r].name);
                return true;
            }
        } else {
            derr("list takes a line number or a function name, got '%s'", args);
            return true;
        }
    } else if (d->list_next) {
        if (d->list_next > d->n_src) {
            derr("line %u is out of range: %s has %u lines", d->list_next, p->source, d->n_src);
            return true;
        }
        center = d->list_next + LIST_LINES / 2;
    } else if (mark) {
        center = mark;
    } else {
        /* not running: around the first line of the entry */
        for (uint32_t i = 0; i < p->n_insts; i++)
            if (p->insts[i].region == p->entries[d->entry].region && p->insts[i].line &&
                (!center || p->insts[i].line < center))
                center = p->insts[i].line;
        if (!center)
            center = 1;
    }
    uint32_t first = center > LIST_LINES / 2 ? center - LIST_LINES / 2 : 1;
    uint32_t last = first + LIST_LINES - 1 < d->n_src ? first + LIST_LINES - 1 : d->n_src;
    for (uint32_t k = first; k <= last; k++)
        printf("%s%-4u %s\n", k == mark ? "=> " : "   ", k, d->src_line[k - 1]);
    d->list_next = last + 1;
    return true;
}

static bool cmd_finish(dbg *d, char *args)
{
    if (!need_args_none("finish", args) || !need_active(d, false))
        return true;
    const vm_ctx *c = d->vm->paused.ctx;
    while (c && c->kind != VM_CTX_CALL)
        c = c->parent;
    if (!c) {
        ut_buf b;
        ut_buf_init(&b, NULL);
        ut_buf_printf(&b, "error: finish: the current tag ");
        put_tag(&b, d, d->vm->paused.ctx);
        ut_buf_printf(&b, " is not inside a call");
        emit(&b);
        ut_buf_free(&b);
        return true;
    }
    d->fctx = c;
    d->fserial = c->serial;
    d->fsite = c->elem;
    d->freturned = 0;
    d->fvals = calloc(d->vm->plan.sites[c->elem].n_returns + 1, sizeof *d->fvals);
    if (!d->fvals) {
        derr("out of memory");
        return true;
    }
    ut_buf b;
    ut_buf_init(&b, NULL);
    ut_buf_printf(&b, "Run till exit from ");
    put_tag(&b, d, c);
    emit(&b);
    ut_buf_free(&b);
    go(d, GO_FINISH, 0);
    return true;
}

/* The last path element of a file name. */
static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* What a breakpoint stops at: FILE:LINE (or :LINE), a function (every call
 * of it), else an instruction or an opcode (resolve). */
static bool resolve_where(const dbg *d, const char *what, bp *x)
{
    const isa_program *p = d->p;
    const char *colon = strrchr(what, ':');
    uint64_t line;
    if (colon && parse_u64_text(colon + 1, &line)) {
        size_t flen = (size_t)(colon - what);
        const char *src = p->source;
        if (flen && src && !(strlen(src) == flen && strncmp(src, what, flen) == 0) &&
            !(strlen(base_name(src)) == flen && strncmp(base_name(src), what, flen) == 0)) {
            derr("no source file '%.*s' (the program's source is %s)", (int)flen, what, src);
            return false;
        }
        uint32_t n = 0;
        for (uint32_t i = 0; i < p->n_insts; i++)
            n += p->insts[i].line == line;
        if (line == 0 || line > UINT32_MAX || n == 0) {
            derr("no instruction comes from line %" PRIu64 "%s%s", line, src ? " of " : "", src ? src : "");
            return false;
        }
        x->line = (uint32_t)line;
        return true;
    }
    int r = find_region(p, what, strlen(what));
    if (r >= 0 && p->regions[r].kind == ISA_REGION_FUNC) {
        x->func = (uint32_t)r;
        return true;
    }
    if (r >= 0 && p->regions[r].kind == ISA_REGION_ROOT) {
        derr("%s is an entry point: nothing calls it (break at one of its lines or instructions)", what);
        return false;
    }
    return resolve(d, what, &x->inst, &x->op);
}

static bp *bp_new(dbg *d)
{
    if (d->n_bps == d->cap_bps) {
        size_t cap = d->cap_bps ? d->cap_bps * 2 : 8;
        bp *m = realloc(d->bps, cap * sizeof *m);
        if (!m)
            return NULL;
        d->bps = m;
        d->cap_bps = cap;
    }
    bp *x = &d->bps[d->n_bps];
    memset(x, 0, sizeof *x);
    return x;
}

/* break|watch WHAT [if PATTERN] */
static void add_bp(dbg *d, char *args, bp_kind kind)
{
    const char *name = kind == BP_BREAK ? "break" : "watch";
    if (!*args) {
        derr("%s needs an instruction or an opcode: %s WHAT [if PATTERN]", name, name);
        return;
    }
    char *what = args, *rest = args;
    while (*rest && !isspace((unsigned char)*rest))
        rest++;
    if (*rest)
        *rest++ = '\0';
    while (isspace((unsigned char)*rest))
        rest++;
    const char *cond = NULL;
    if (*rest) {
        if (strncmp(rest, "if", 2) != 0 || (rest[2] && !isspace((unsigned char)rest[2]))) {
            derr("after %s %s: expected 'if PATTERN', got '%s'", name, what, rest);
            return;
        }
        cond = rest + 2;
    }
    bp *x = bp_new(d);
    if (!x) {
        derr("out of memory");
        return;
    }
    x->kind = kind;
    x->func = ISA_NONE;
    x->inst = ISA_NONE;
    x->op = -1;
    if (!resolve_where(d, what, x) || (cond && !parse_pattern(d, cond, x))) {
        bp_free(x);
        return;
    }
    x->id = ++d->next_id;
    d->n_bps++;
    ut_buf b;
    ut_buf_init(&b, NULL);
    ut_buf_printf(&b, "%s %d: ", kind == BP_BREAK ? "Breakpoint" : "Watchpoint", x->id);
    put_bp_what(&b, d, x);
    emit(&b);
    ut_buf_free(&b);
}

static bool cmd_break(dbg *d, char *args)
{
    add_bp(d, args, BP_BREAK);
    return true;
}

static bool cmd_watch(dbg *d, char *args)
{
    add_bp(d, args, BP_WATCH);
    return true;
}

static bool cmd_delete(dbg *d, char *args)
{
    if (!*args) {
        size_t n = d->n_bps;
        for (size_t k = 0; k < d->n_bps; k++)
            bp_free(&d->bps[k]);
        d->n_bps = 0;
        printf("Deleted all breakpoints and watchpoints (%zu)\n", n);
        return true;
    }
    for (char *tok = strtok(args, " \t"); tok; tok = strtok(NULL, " \t")) {
        uint64_t id;
        size_t k = 0;
        if (parse_u64_text(tok, &id))
            while (k < d->n_bps && (uint64_t)d->bps[k].id != id)
                k++;
        if (!parse_u64_text(tok, &id) || k == d->n_bps) {
            derr("no breakpoint or watchpoint %s", tok);
            return true;
        }
        printf("Deleted %s %" PRIu64 "\n", d->bps[k].kind == BP_BREAK ? "breakpoint" : "watchpoint", id);
        bp_free(&d->bps[k]);
        memmove(&d->bps[k], &d->bps[k + 1], (d->n_bps - k - 1) * sizeof *d->bps);
        d->n_bps--;
    }
    return true;
}

static bool cmd_breakpoints(dbg *d, char *args)
{
    if (!need_args_none("breakpoints", args))
        return true;
    if (!d->n_bps) {
        printf("No breakpoints or watchpoints.\n");
        return true;
    }
    ut_buf b;
    ut_buf_init(&b, NULL);
    for (size_t k = 0; k < d->n_bps; k++) {
        const bp *x = &d->bps[k];
        ut_buf_printf(&b, "%-3d %s  ", x->id, x->kind == BP_BREAK ? "break" : "watch");
        put_bp_what(&b, d, x);
        ut_buf_printf(&b, "  (hit %" PRIu64 " time%s)", x->hits, x->hits == 1 ? "" : "s");
        emit(&b);
    }
    ut_buf_free(&b);
    return true;
}

typedef struct ready_ctx {
    dbg *d;
    ut_buf *b;
    size_t k;
} ready_ctx;

static void print_ready(void *ud, const vm_act *a)
{
    ready_ctx *r = ud;
    ut_buf_printf(r->b, "  %zu. ", ++r->k);
    put_firing(r->b, r->d, a, false);
    emit(r->b);
}

static bool cmd_ready(dbg *d, char *args)
{
    if (!need_args_none("ready", args) || !need_state(d))
        return true;
    ut_buf b;
    ut_buf_init(&b, NULL);
    size_t n = vm_ready_each(d->vm, NULL, NULL);
    printf("Ready to fire (%zu, next first):\n", n);
    if (!n)
        printf("  none\n");
    ready_ctx r = {d, &b, 0};
    vm_ready_each(d->vm, print_ready, &r);
    /* Tokens held back by a loop's parallel=N bound, by loop instance. */
    vm_ctx **all;
    size_t nc, deferred = 0;
    if (vm_live_contexts(d->vm, &all, &nc) != TFVM_OK) {
        derr("out of memory");
        ut_buf_free(&b);
        return true;
    }
    for (size_t k = 0; k < nc; k++)
        for (uint32_t f = 0; f < d->vm->plan.regions[all[k]->region].n_frames; f++) {
            const vm_loop *l = vm_ctx_loop(d->vm, all[k], f);
            for (uint32_t j = 0; l && j < l->n_deferred; j++) {
                if (!deferred++)
                    printf("Waiting for the parallel=%u bound of their loop:\n", d->vm->plan.frames[l->frame].parallel);
                char lab[160];
                snprintf(lab, sizeof lab, "%s#%" PRIu64, d->p->regions[l->frame].name, l->next);
                ut_buf_printf(&b, "  ");
                put_inst(&b, d->p, l->deferred[j].inst);
                ut_buf_printf(&b, " into ");
                put_tag_plus(&b, d, all[k], lab);
                ut_buf_printf(&b, ": ");
                put_value(&b, &l->deferred[j].v, true);
                emit(&b);
            }
        }
    vm_contexts_free(d->vm, all, nc);
    ut_buf_free(&b);
    return true;
}

/* Producers of input `port` of instruction i, as .tfasm writes them. */
static void put_producers(ut_buf *b, const dbg *d, uint32_t i, uint32_t port)
{
    const isa_program *p = d->p;
    if ((int)port == isa_imm_port(&p->insts[i])) {
        ut_buf_printf(b, "the constant ");
        put_value(b, &d->vm->consts[p->insts[i].b], true);
        return;
    }
    bool first = true;
    for (uint32_t s = 0; s < p->n_insts; s++) {
        const isa_inst *src = &p->insts[s];
        for (uint32_t k = src->edge_first; k < src->edge_first + src->n_edges; k++) {
            const isa_edge *e = &p->edges[k];
            if (e->inst != i || e->port != port)
                continue;
            ut_buf_printf(b, "%s", first ? "" : ", ");
            /* qualified when in another region (a RETURN's producers are in the callee) */
            put_inst_ref(b, p, s, p->insts[i].region);
            if (e->out)
                ut_buf_printf(b, ":%u", e->out);
            first = false;
        }
    }
    if (first)
        ut_buf_printf(b, "nothing");
}

/* One partial (or complete) match: which ports have arrived, with what, and
 * which are missing, with who would send them. */
static void put_match(ut_buf *b, const dbg *d, const vm_ctx *c, uint32_t i, vm_match m)
{
    const isa_program *p = d->p;
    const isa_inst *in = &p->insts[i];
    uint32_t ports = isa_ports(in);
    put_inst(b, p, i);
    ut_buf_printf(b, " at ");
    put_tag(b, d, c);
    if (m == VM_MATCH_FIRED) {
        ut_buf_printf(b, ": fired at this tag (later tokens are absorbed)");
        return;
    }
    ut_buf_printf(b, m == VM_MATCH_READY ? ": complete, ready to fire;" : ":");
    const char *sep = " has ";
    for (uint32_t k = 0; k < ports; k++) {
        if (!vm_port_arrived(d->vm, c, i, k))
            continue;
        ut_buf_printf(b, "%s", sep);
        sep = ", ";
        if (k < in->n_in) {
            ut_buf_printf(b, "%u = ", k);
            const dev_value *v = vm_port_value(d->vm, c, i, k);
            if (v)
                put_value(b, v, true);
            else
                ut_buf_printf(b, "<dead>"); /* a waiting MERGE has only dead inputs */
            if ((int)k == isa_imm_port(in))
                ut_buf_printf(b, " (constant)");
        } else {
            put_port_name(b, in, k);
        }
    }
    sep = "; missing ";
    for (uint32_t k = 0; k < ports; k++) {
        if (vm_port_arrived(d->vm, c, i, k))
            continue;
        ut_buf_printf(b, "%s", sep);
        sep = "; ";
        put_port_name(b, in, k);
        ut_buf_printf(b, " (from ");
        put_producers(b, d, i, k);
        ut_buf_printf(b, ")");
    }
}

static bool cmd_match(dbg *d, char *args)
{
    uint32_t want = ISA_NONE;
    int op = -1;
    if (*args) {
        if (!resolve(d, args, &want, &op))
            return true;
        if (want != ISA_NONE && !d->vm->plan.insts[want].matched) {
            ut_buf b;
            ut_buf_init(&b, NULL);
            put_inst(&b, d->p, want);
            ut_buf_printf(&b, " waits for one token only: it fires as soon as that arrives (see `ready`)");
            emit(&b);
            ut_buf_free(&b);
            return true;
        }
    }
    if (!need_state(d))
        return true;
    vm_ctx **all;
    size_t n, shown = 0;
    if (vm_live_contexts(d->vm, &all, &n) != TFVM_OK) {
        derr("out of memory");
        return true;
    }
    ut_buf b;
    ut_buf_init(&b, NULL);
    for (size_t k = 0; k < n; k++) {
        const vm_rplan *rp = &d->vm->plan.regions[all[k]->region];
        for (uint32_t i = rp->first; i < rp->end; i++) {
            if (want != ISA_NONE ? i != want : op >= 0 && d->p->insts[i].op != op)
                continue;
            vm_match m = vm_match_state(d->vm, all[k], i);
            /* all: the partial matches; one instruction (or opcode): every state */
            if (m == VM_MATCH_NONE || (m != VM_MATCH_WAITING && !*args))
                continue;
            put_match(&b, d, all[k], i, m);
            emit(&b);
            shown++;
        }
    }
    if (!shown)
        printf(*args ? "No tokens waiting at %s.\n" : "No partial matches.%s\n", *args ? args : "");
    vm_contexts_free(d->vm, all, n);
    ut_buf_free(&b);
    return true;
}

/* tokens: every token waiting in a partial match (an instruction that has
 * some inputs and lacks others), oldest context first: what `ready` does not
 * show, because none of them can fire yet. */
static bool cmd_tokens(dbg *d, char *args)
{
    if (!need_args_none("tokens", args) || !need_state(d))
        return true;
    vm_ctx **all;
    size_t n, shown = 0;
    if (vm_live_contexts(d->vm, &all, &n) != TFVM_OK) {
        derr("out of memory");
        return true;
    }
    ut_buf b;
    ut_buf_init(&b, NULL);
    for (size_t k = 0; k < n; k++) {
        const vm_rplan *rp = &d->vm->plan.regions[all[k]->region];
        for (uint32_t i = rp->first; i < rp->end; i++) {
            if (vm_match_state(d->vm, all[k], i) != VM_MATCH_WAITING)
                continue;
            const isa_inst *in = &d->p->insts[i];
            for (uint32_t port = 0; port < isa_ports(in); port++) {
                if ((int)port == isa_imm_port(in) || !vm_port_arrived(d->vm, all[k], i, port))
                    continue;
                if (!shown++)
                    printf("Tokens waiting for the other inputs of their instruction (oldest tag first):\n");
                ut_buf_printf(&b, "  ");
                put_inst_ref(&b, d->p, i, ISA_NONE);
                put_port(&b, in, port);
                ut_buf_printf(&b, " at ");
                put_tag(&b, d, all[k]);
                const dev_value *v = vm_port_value(d->vm, all[k], i, port);
                ut_buf_printf(&b, " = ");
                if (v)
                    put_value(&b, v, true);
                else
                    ut_buf_printf(&b, "<dead>");
                const char *sep = ", waits for ";
                for (uint32_t q = 0; q < isa_ports(in); q++)
                    if (!vm_port_arrived(d->vm, all[k], i, q)) {
                        ut_buf_printf(&b, "%s", sep);
                        sep = ", ";
                        put_port(&b, in, q);
                    }
                emit(&b);
            }
        }
    }
    if (!shown)
        printf("No tokens waiting in partial matches (`ready` lists what fires next).\n");
    vm_contexts_free(d->vm, all, n);
    ut_buf_free(&b);
    return true;
}

typedef struct count_ready {
    const vm_ctx *c;
    size_t n;
} count_ready;

static void count_ready_at(void *ud, const vm_act *a)
{
    count_ready *r = ud;
    r->n += a->ctx == r->c;
}

static void print_ctx_tree(dbg *d, vm_ctx **all, size_t n, const vm_ctx *c, int depth, ut_buf *b)
{
    count_ready r = {c, 0};
    vm_ready_each(d->vm, count_ready_at, &r);
    ut_buf_printf(b, "%*s", depth * 2, "");
    put_tag(b, d, c);
    if (c->kind == VM_CTX_ROOT)
        ut_buf_printf(b, " entry %s", d->p->entries[d->entry].name);
    ut_buf_printf(b, ": %zu waiting, %zu ready", waiting_in(d, c), r.n);
    emit(b);
    /* loop instances, each with its live iterations */
    for (uint32_t f = 0; f < d->vm->plan.regions[c->region].n_frames; f++) {
        const vm_loop *l = vm_ctx_loop(d->vm, c, f);
        if (!l)
            continue;
        uint64_t live = 0;
        for (const vm_ctx *it = l->first; it; it = it->next_iter)
            live++;
        ut_buf_printf(b, "%*sloop %s: %" PRIu64 " iteration%s started, %" PRIu64 " live", depth * 2 + 2, "",
                      d->p->regions[l->frame].name, l->next, l->next == 1 ? "" : "s", live);
        if (l->n_deferred)
            ut_buf_printf(b, ", %u token%s deferred", l->n_deferred, l->n_deferred == 1 ? "" : "s");
        emit(b);
        for (size_t k = 0; k < n; k++)
            if (all[k]->parent == c && all[k]->kind == VM_CTX_ITER && all[k]->elem == l->frame)
                print_ctx_tree(d, all, n, all[k], depth + 2, b);
    }
    for (size_t k = 0; k < n; k++)
        if (all[k]->parent == c && all[k]->kind == VM_CTX_CALL)
            print_ctx_tree(d, all, n, all[k], depth + 1, b);
}

static bool cmd_contexts(dbg *d, char *args)
{
    if (!need_args_none("contexts", args) || !need_state(d))
        return true;
    vm_ctx **all;
    size_t n;
    if (vm_live_contexts(d->vm, &all, &n) != TFVM_OK) {
        derr("out of memory");
        return true;
    }
    uint64_t n_ctx, n_loops;
    vm_count_live(d->vm, &n_ctx, &n_loops);
    ut_buf b;
    ut_buf_init(&b, NULL);
    for (size_t k = 0; k < n; k++)
        if (all[k]->kind == VM_CTX_ROOT)
            print_ctx_tree(d, all, n, all[k], 0, &b);
    printf("%" PRIu64 " context%s, %" PRIu64 " loop instance%s\n", n_ctx, n_ctx == 1 ? "" : "s", n_loops,
           n_loops == 1 ? "" : "s");
    ut_buf_free(&b);
    vm_contexts_free(d->vm, all, n);
    return true;
}

static bool cmd_where(dbg *d, char *args)
{
    if (!need_args_none("where", args))
        return true;
    if (d->run != RUN_ACTIVE) {
        if (d->run == RUN_ENDED)
            derr("the run has ended (%s): nothing is about to fire (see `match`, `contexts`)", d->ended_why);
        else
            derr("the program is not running (use run, step or restart)");
        return true;
    }
    const isa_program *p = d->p;
    const vm_act *a = &d->vm->paused;
    ut_buf b;
    ut_buf_init(&b, NULL);
    ut_buf_printf(&b, "#0  ");
    put_inst(&b, p, a->inst);
    ut_buf_printf(&b, " at ");
    put_tag(&b, d, a->ctx);
    put_loc(&b, &p->insts[a->inst]);
    emit(&b);
    int depth = 1;
    for (const vm_ctx *c = a->ctx; c; c = c->parent, depth++) {
        ut_buf_printf(&b, "#%-2d ", depth);
        if (c->kind == VM_CTX_ROOT) {
            ut_buf_printf(&b, "[] entry %s", p->entries[d->entry].name);
            emit(&b);
            break;
        }
        uint32_t by = ISA_NONE;
        if (c->kind == VM_CTX_CALL) {
            const isa_site *s = &p->sites[c->elem];
            for (uint32_t i = 0; i < p->n_insts && by == ISA_NONE; i++)
                if (p->insts[i].op == ISA_CALL && p->insts[i].a == c->elem)
                    by = i;
            char lab[160];
            ut_buf_printf(&b, "%s: %s called from its call site %u, ", isa_site_label(p->regions[s->callee].name, s->id, lab, sizeof lab),
                          p->regions[s->callee].name, s->id);
            if (by != ISA_NONE) {
                put_inst(&b, p, by);
                ut_buf_printf(&b, " in ");
                put_tag(&b, d, c->parent);
                put_loc(&b, &p->insts[by]);
            }
        } else {
            /* where the loop is in the source: its predicate (LOOPCOND), else its first ENTER */
            for (uint32_t i = 0; i < p->n_insts && by == ISA_NONE; i++)
                if (p->insts[i].op == ISA_LOOPCOND && p->insts[i].region == c->elem)
                    by = i;
            for (uint32_t i = 0; i < p->n_insts && by == ISA_NONE; i++)
                if (p->insts[i].op == ISA_ENTER && p->insts[i].a == c->elem)
                    by = i;
            ut_buf_printf(&b, "%s#%" PRIu64 ": iteration %" PRIu64 " of loop %s", p->regions[c->elem].name, c->iter,
                          c->iter, p->regions[c->elem].name);
            if (by != ISA_NONE)
                put_loc(&b, &p->insts[by]);
        }
        emit(&b);
    }
    ut_buf_free(&b);
    return true;
}

/* The values waiting on i's inputs now, in full (tensors NumPy-like,
 * summarised past 1000 elements): in the paused activation when it is i,
 * else at the innermost enclosing tag of the paused one where i lives. */
static void print_values(const dbg *d, uint32_t i, ut_buf *b)
{
    const isa_inst *in = &d->p->insts[i];
    if (d->run == RUN_NONE || !d->vm->has_paused || in->n_in == 0)
        return;
    const vm_act *a = &d->vm->paused;
    const vm_ctx *c = a->ctx;
    while (c && c->region != in->region)
        c = c->parent;
    if (!c)
        return;
    bool here = a->inst == i;
    ut_buf_printf(b, "  %s at ", here ? "about to fire" : "now");
    put_tag(b, d, c);
    ut_buf_printf(b, ":");
    emit(b);
    bool any = false;
    for (uint32_t k = 0; k < in->n_in; k++) {
        const dev_value *v = here ? vm_act_input(d->vm, a, k)
                             : d->vm->plan.insts[i].matched ? vm_port_value(d->vm, c, i, k) : NULL;
        if (!v)
            continue;
        ut_buf_printf(b, "    input %u = ", k);
        put_value(b, v, false);
        emit(b);
        any = true;
    }
    if (!any) {
        ut_buf_printf(b, "    no input values held%s", here ? "" : " (it has not received tokens at this tag)");
        emit(b);
    }
}

static void print_one_inst(const dbg *d, uint32_t i)
{
    const isa_program *p = d->p;
    const isa_inst *in = &p->insts[i];
    const isa_region *r = &p->regions[in->region];
    ut_buf b;
    ut_buf_init(&b, NULL);
    ld_format_inst(p, i, &b);
    emit(&b);
    ut_buf_printf(&b, "  instruction %%%u in %s %s", i, region_kind_name(r->kind), r->name);
    if (r->kind == ISA_REGION_LOOP)
        ut_buf_printf(&b, " (in %s)", p->regions[r->parent].name);
    if (in->line)
        ut_buf_printf(&b, ", source line %u column %u", in->line, in->col);
    emit(&b);
    ut_buf_printf(&b, "  %s: %s", isa_ops[in->op].name, isa_ops[in->op].synopsis);
    emit(&b);
    for (uint32_t k = 0; k < isa_ports(in); k++) {
        ut_buf_printf(&b, "  input ");
        put_port_name(&b, in, k);
        ut_buf_printf(&b, " <- ");
        put_producers(&b, d, i, k);
        emit(&b);
    }
    for (uint32_t e = 0; in->op == ISA_RESULT && e < p->n_entries; e++)
        if (p->entries[e].region == in->region) {
            ut_buf_printf(&b, "  output: result %u '%s' of entry %s", in->a, p->entries[e].results[in->a].name,
                          p->entries[e].name);
            emit(&b);
        }
    for (uint32_t o = 0; o < isa_outs(in); o++) {
        char nb[16];
        ut_buf_printf(&b, "  %s ->", isa_outs(in) > 1 ? output_name(in, o, nb, sizeof nb) : "output");
        bool any = false;
        for (uint32_t k = in->edge_first; k < in->edge_first + in->n_edges; k++) {
            const isa_edge *e = &p->edges[k];
            if (e->out != o)
                continue;
            ut_buf_printf(&b, "%s ", any ? "," : "");
            put_inst_ref(&b, p, e->inst, in->region);
            put_port(&b, &p->insts[e->inst], e->port);
            any = true;
        }
        if (!any)
            ut_buf_printf(&b, " nothing");
        emit(&b);
    }
    print_values(d, i, &b);
    ut_buf_free(&b);
}

static bool cmd_print(dbg *d, char *args)
{
    if (!*args) {
        derr("print needs an instruction or an opcode: print WHAT (NAME, REGION.NAME, %%N or OPCODE)");
        return true;
    }
    uint32_t i;
    int op;
    if (!resolve(d, args, &i, &op))
        return true;
    if (i != ISA_NONE) {
        print_one_inst(d, i);
        return true;
    }
    size_t n = 0;
    ut_buf b;
    ut_buf_init(&b, NULL);
    for (uint32_t k = 0; k < d->p->n_insts; k++)
        if (d->p->insts[k].op == op) {
            ut_buf_printf(&b, "%%%-4u %s %s: ", k, region_kind_name(d->p->regions[d->p->insts[k].region].kind),
                          d->p->regions[d->p->insts[k].region].name);
            ld_format_inst(d->p, k, &b);
            emit(&b);
            n++;
        }
    printf("%zu %s instruction%s\n", n, isa_ops[op].name, n == 1 ? "" : "s");
    ut_buf_free(&b);
    return true;
}

static bool cmd_stats(dbg *d, char *args)
{
    if (!need_args_none("stats", args))
        return true;
    tfvm_stats s;
    if (d->run == RUN_NONE) {
        tfvm_vm_stats(d->vm, &s); /* the last finished run */
    } else {
        s = d->vm->w[0].st;
        s.contexts_peak = (uint64_t)atomic_load(&d->vm->live_peak);
    }
    printf("fired %" PRIu64 ", tokens %" PRIu64 ", matches %" PRIu64 ", contexts created %" PRIu64
           ", contexts peak %" PRIu64 "\n",
           s.fired, s.tokens, s.matches, s.contexts_created, s.contexts_peak);
    if (d->run != RUN_NONE) {
        uint64_t n_ctx, n_loops;
        vm_count_live(d->vm, &n_ctx, &n_loops);
        size_t w = count_waiting(d);
        printf("live now: %" PRIu64 " context%s, %" PRIu64 " loop instance%s, %zu ready, %zu partial match%s\n", n_ctx,
               n_ctx == 1 ? "" : "s", n_loops, n_loops == 1 ? "" : "s", vm_ready_each(d->vm, NULL, NULL), w,
               w == 1 ? "" : "es");
    }
    return true;
}

static bool cmd_quit(dbg *d, char *args)
{
    (void)d;
    (void)args;
    return false;
}

static bool cmd_help(dbg *d, char *args);

struct dbg_cmd {
    const char *name;
    const char *aliases; /* space-separated */
    cmd_fn fn;
    const char *usage;
    const char *help;
};

static const dbg_cmd dbg_cmds[] = {
    {"run", "r", cmd_run, "run", "start from the beginning; stop at a breakpoint or the end"},
    {"continue", "c", cmd_continue, "continue", "go on to the next breakpoint or the end (starts a run)"},
    {"step", "s", cmd_step, "step [N]", "fire the next N instructions (default 1), printing each"},
    {"next", "n", cmd_next, "next", "run until an instruction of another source line is about to fire"},
    {"finish", "fin", cmd_finish, "finish", "run until the current call returns; print what it returned"},
    {"break", "b", cmd_break, "break WHERE [if PATTERN]", "stop before WHERE fires (at tags matching PATTERN)"},
    {"watch", "w", cmd_watch, "watch WHAT [if PATTERN]", "print every firing of WHAT (at tags matching PATTERN)"},
    {"delete", "d", cmd_delete, "delete [N...]", "delete breakpoints and watchpoints (all without N)"},
    {"breakpoints", "bl", cmd_breakpoints, "breakpoints", "list breakpoints and watchpoints, with hit counts"},
    {"ready", "", cmd_ready, "ready", "ready activations (next first), tokens held by a loop bound"},
    {"tokens", "t", cmd_tokens, "tokens", "tokens waiting in partial matches for their other inputs"},
    {"match", "m", cmd_match, "match [WHAT]", "partial matches: the inputs each waiting instruction has, lacks"},
    {"contexts", "ctx", cmd_contexts, "contexts", "the live tag tree (calls, loops, iterations) with counts"},
    {"where", "bt backtrace", cmd_where, "where", "the current tag as a chain of calls and iterations"},
    {"print", "p", cmd_print, "print WHAT", "disassembly, source, producers, consumers; values waiting now"},
    {"list", "l", cmd_list, "list [LINE|FUNCTION]", "source lines around the current one (again: the next ones)"},
    {"stats", "", cmd_stats, "stats", "counters of the run so far (no times)"},
    {"restart", "", cmd_restart, "restart", "start again and stop before the first firing"},
    {"help", "h ?", cmd_help, "help [COMMAND]", "this list, or one command in full"},
    {"quit", "q exit", cmd_quit, "quit", "leave the debugger (also Ctrl-D)"},
};

static bool word_in(const char *word, const char *list)
{
    size_t n = strlen(word);
    for (const char *s = list; *s;) {
        while (*s == ' ')
            s++;
        const char *e = s;
        while (*e && *e != ' ')
            e++;
        if ((size_t)(e - s) == n && n && strncmp(s, word, n) == 0)
            return true;
        s = e;
    }
    return false;
}

/* Exact name, alias, or a unique prefix of a name. */
static const dbg_cmd *find_cmd(const char *word, bool *ambiguous)
{
    *ambiguous = false;
    for (size_t k = 0; k < UT_COUNTOF(dbg_cmds); k++)
        if (strcmp(dbg_cmds[k].name, word) == 0 || word_in(word, dbg_cmds[k].aliases))
            return &dbg_cmds[k];
    const dbg_cmd *found = NULL;
    size_t n = strlen(word);
    for (size_t k = 0; k < UT_COUNTOF(dbg_cmds); k++)
        if (strncmp(dbg_cmds[k].name, word, n) == 0) {
            if (found)
                *ambiguous = true;
            found = &dbg_cmds[k];
        }
    return *ambiguous ? NULL : found;
}

static bool cmd_help(dbg *d, char *args)
{
    (void)d;
    if (*args) {
        bool amb;
        const dbg_cmd *c = find_cmd(args, &amb);
        if (!c) {
            derr("no command '%s'%s", args, amb ? " (ambiguous)" : "");
            return true;
        }
        printf("usage: %s\n  %s\n", c->usage, c->help);
        if (*c->aliases)
            printf("  aliases: %s\n", c->aliases);
        if (c->fn == cmd_break)
            printf("  WHERE: FILE:LINE (every instruction of that source line), a function\n"
                   "  (every call of it), or WHAT as for watch.\n");
        if (c->fn == cmd_break || c->fn == cmd_watch)
            printf("  WHAT: an instruction (NAME, REGION.NAME or %%N) or an opcode (ADD, CALL...: every\n"
                   "  instruction of it). PATTERN: [ELEM, ...], ELEM: NAME@SITE (a call) or\n"
                   "  NAME#ITERATION (a loop iteration), either part may be *; * alone is any one\n"
                   "  element, ... any number of them; [] is the root tag. fib@2 is call site 2\n"
                   "  of fib (one place in the program that calls it), not fib(2).\n"
                   "  e.g.  break add_12_39 if [fib@*, ...]    watch ADD if [..., inner#0]\n");
        return true;
    }
    printf("Commands (aliases in parentheses; a unique prefix also works):\n");
    for (size_t k = 0; k < UT_COUNTOF(dbg_cmds); k++) {
        char left[64];
        snprintf(left, sizeof left, "%s%s%s%s", dbg_cmds[k].usage, *dbg_cmds[k].aliases ? " (" : "",
                 dbg_cmds[k].aliases, *dbg_cmds[k].aliases ? ")" : "");
        printf("  %-28s %s\n", left, dbg_cmds[k].help);
    }
    printf("WHAT: an instruction (NAME, REGION.NAME or %%N) or an opcode (every instruction of it).\n"
           "WHERE: WHAT, FILE:LINE or a function (every call of it).\n"
           "PATTERN: a tag pattern, e.g. [fib@*, ...] or [..., inner#0] (`help break`).\n"
           "Tags: fib@2 is call site 2 of fib (not fib(2)); loop#3 is iteration 3 of loop.\n"
           "Stops are before a firing; Ctrl-C stops a long run.\n");
    return true;
}

/* Runs one command line; false when the session ends. */
static bool execute(dbg *d, char *line)
{
    char *s = line;
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    if (!*s || *s == '#')
        return true;
    char *args = s;
    while (*args && !isspace((unsigned char)*args))
        args++;
    if (*args)
        *args++ = '\0';
    while (isspace((unsigned char)*args))
        args++;
    bool amb;
    const dbg_cmd *c = find_cmd(s, &amb);
    if (!c) {
        derr("%s command '%s' (try help)", amb ? "ambiguous" : "unknown", s);
        return true;
    }
    bool go_on = c->fn(d, args);
    fflush(stdout);
    return go_on;
}

/* ---- Reading lines ---------------------------------------------------------------------- */

#ifdef TFVM_HAVE_LIBEDIT
static char *el_prompt(EditLine *el)
{
    (void)el;
    return (char *)PROMPT;
}

/* Tab completes the first word from the command names, later words from
 * instruction names (NAME and REGION.NAME) and opcodes; when nothing can be
 * added and several fit, it lists them. */
typedef struct completion {
    const char *word;
    size_t len;
    char common[128]; /* longest common extension so far */
    size_t n;
    ut_buf list;
} completion;

static void offer(completion *c, const char *cand, const char *region)
{
    char full[160];
    if (region)
        snprintf(full, sizeof full, "%s.%s", region, cand);
    else
        snprintf(full, sizeof full, "%s", cand);
    if (strncmp(full, c->word, c->len) != 0)
        return;
    if (c->n++ == 0) {
        snprintf(c->common, sizeof c->common, "%s", full + c->len);
    } else {
        size_t k = 0;
        while (c->common[k] && c->common[k] == full[c->len + k])
            k++;
        c->common[k] = '\0';
    }
    if (c->list.len < 2000)
        ut_buf_printf(&c->list, "%s  ", full);
}

static unsigned char el_complete(EditLine *el, int ch)
{
    (void)ch;
    dbg *d = NULL;
    el_get(el, EL_CLIENTDATA, &d);
    const LineInfo *li = el_line(el);
    const char *start = li->cursor;
    while (start > li->buffer && !isspace((unsigned char)start[-1]))
        start--;
    const char *first = li->buffer;
    while (first < start && isspace((unsigned char)*first))
        first++;
    completion c = {.word = start, .len = (size_t)(li->cursor - start)};
    ut_buf_init(&c.list, NULL);
    if (first == start) {
        for (size_t k = 0; k < UT_COUNTOF(dbg_cmds); k++)
            offer(&c, dbg_cmds[k].name, NULL);
    } else if (d) {
        for (uint32_t i = 0; i < d->p->n_insts; i++)
            if (d->p->insts[i].name) {
                offer(&c, d->p->insts[i].name, NULL);
                offer(&c, d->p->insts[i].name, d->p->regions[d->p->insts[i].region].name);
            }
        for (int o = 0; o < ISA_OP_COUNT; o++)
            offer(&c, isa_ops[o].name, NULL);
    }
    unsigned char rc = CC_REFRESH;
    if (c.n == 0) {
        rc = CC_REFRESH_BEEP;
    } else if (c.common[0]) {
        if (c.n == 1)
            strncat(c.common, " ", sizeof c.common - strlen(c.common) - 1);
        el_insertstr(el, c.common);
    } else if (c.n > 1 && !c.list.failed) { /* nothing to add: show the choices */
        fputc('\n', stdout);
        fwrite(c.list.data, 1, c.list.len, stdout);
        fputc('\n', stdout);
        rc = CC_REDISPLAY;
    }
    ut_buf_free(&c.list);
    return rc;
}
#endif

static void repl(dbg *d)
{
    char *line = NULL;
    size_t cap = 0;
    char last[32] = ""; /* at a terminal an empty line repeats step/continue/finish */
#ifdef TFVM_HAVE_LIBEDIT
    EditLine *el = NULL;
    History *hist = NULL;
    HistEvent ev;
    if (d->tty) {
        el = el_init("tfvm", stdin, stdout, stderr);
        hist = history_init();
        if (el && hist) {
            history(hist, &ev, H_SETSIZE, 1000);
            el_set(el, EL_PROMPT, el_prompt);
            el_set(el, EL_EDITOR, "emacs");
            el_set(el, EL_HIST, history, hist);
            el_set(el, EL_CLIENTDATA, d);
            /* the wide form: el_set's narrow EL_ADDFN leaks its copies of both strings */
            el_wset(el, EL_ADDFN, L"tfvm-complete", L"complete a command or instruction name", el_complete);
            el_set(el, EL_BIND, "^I", "tfvm-complete", NULL);
            el_source(el, NULL);
        }
    }
#endif
    for (;;) {
        const char *got = NULL;
#ifdef TFVM_HAVE_LIBEDIT
        if (el && hist) {
            int count = 0;
            got = el_gets(el, &count);
            if (!got || count <= 0) {
                if (dbg_sigint) { /* Ctrl-C at the prompt: a fresh prompt */
                    dbg_sigint = 0;
                    fputs("^C\n", stdout);
                    el_reset(el);
                    continue;
                }
                fputc('\n', stdout);
                break;
            }
            if (got[0] && got[0] != '\n')
                history(hist, &ev, H_ENTER, got);
        } else
#endif
        {
            if (d->tty) {
                fputs(PROMPT, stdout);
                fflush(stdout);
            }
            errno = 0;
            ssize_t n = getline(&line, &cap, stdin);
            if (n < 0) {
                if (dbg_sigint && errno == EINTR) {
                    dbg_sigint = 0;
                    clearerr(stdin);
                    fputc('\n', stdout);
                    continue;
                }
                if (d->tty)
                    fputc('\n', stdout);
                break;
            }
            got = line;
            if (!d->tty) /* scripted: the transcript shows each command after its prompt */
                printf(PROMPT "%s%s", line, n && line[n - 1] == '\n' ? "" : "\n");
        }
        char buf[4096];
        snprintf(buf, sizeof buf, "%s", got);
        const char *t = buf;
        while (isspace((unsigned char)*t))
            t++;
        if (!*t && d->tty && last[0])
            snprintf(buf, sizeof buf, "%s", last);
        else if (*t) {
            char word[32];
            size_t k = 0;
            while (t[k] && !isspace((unsigned char)t[k]) && k + 1 < sizeof word) {
                word[k] = t[k];
                k++;
            }
            word[k] = '\0';
            bool amb;
            const dbg_cmd *c = find_cmd(word, &amb);
            last[0] = '\0';
            if (c && (c->fn == cmd_step || c->fn == cmd_continue || c->fn == cmd_finish))
                snprintf(last, sizeof last, "%s", c->name);
        }
        if (strlen(got) >= sizeof buf - 1) {
            derr("line too long (at most %zu characters)", sizeof buf - 2);
            continue;
        }
        if (!execute(d, buf))
            break;
    }
#ifdef TFVM_HAVE_LIBEDIT
    if (hist)
        history_end(hist);
    if (el)
        el_end(el);
#endif
    free(line);
}

/* ---- The command ------------------------------------------------------------------------ */

int cli_debug(int argc, char **argv)
{
    static const cli_opt opts[] = {{"-e", "--entry", "needs an entry name"},
                                   {NULL, "--outputs", "needs a list of tensor names (a,b:1)"}};
    cli_args o; /* as for `tfvm run`: options before or after FILE; `--` ends them */
    int prc = cli_parse("debug", cli_usage_debug, opts, UT_COUNTOF(opts), CLI_FILE_ARGS, argc, argv, &o);
    if (prc)
        return prc < 0 ? 0 : prc;
    const char *entry = o.val[0], *file = o.pos[0], *outputs = o.val[1];
    char **arg_text = o.pos + 1;
    size_t n_args = o.n_pos - 1;

    dbg d;
    memset(&d, 0, sizeof d);
    d.file = file;
    d.tty = isatty(STDIN_FILENO);
    int rc = 1;
    tfvm_error err;
    if (cli_load_program(file, entry, outputs, &d.prog, &err) != TFVM_OK) {
        cli_args_free(&o);
        return cli_load_failed(&err);
    }
    d.p = &d.prog->isa;
    int ei = entry ? tfvm_program_find_entry(d.prog, entry) : 0;
    if (ei < 0 || tfvm_program_entry(d.prog, (size_t)ei, &d.e) != TFVM_OK) {
        if (entry)
            fprintf(stderr, "tfvm: %s: no entry point named '%s'\n", file, entry);
        else
            fprintf(stderr, "tfvm: %s: the program has no entry point\n", file);
        goto out;
    }
    d.entry = (uint32_t)ei;
    d.args = calloc(d.e.n_params + 1, sizeof *d.args);
    d.arg_text = calloc(d.e.n_params + 1, sizeof *d.arg_text);
    if (!d.args || !d.arg_text) {
        fprintf(stderr, "tfvm: out of memory\n");
        goto out;
    }
    if (cli_bind_args(&d.e, arg_text, n_args, d.arg_text) != 0) {
        rc = 2;
        goto out;
    }
    d.n_args = d.e.n_params;
    for (size_t k = 0; k < d.n_args; k++)
        if (cli_parse_arg(&d.e, k, d.arg_text[k], &d.args[k]) != 0)
            goto out;
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.deterministic = true;
    cfg.threads = 1;
    if (tfvm_vm_new(d.prog, &cfg, &d.vm) != TFVM_OK) {
        fprintf(stderr, "tfvm: out of memory creating the VM\n");
        goto out;
    }
    d.vm->hook = on_fire;
    d.vm->hook_ud = &d;

    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: Ctrl-C at the prompt interrupts the read */
    sigaction(SIGINT, &sa, &old);

    ut_buf b;
    ut_buf_init(&b, NULL);
    ut_buf_printf(&b, "%s: entry %s(", file, d.e.name);
    char ty[160];
    for (size_t k = 0; k < d.e.n_params; k++)
        ut_buf_printf(&b, cli_param_fmt(d.e.params[k].name), k ? ", " : "", d.e.params[k].name,
                      cli_param_type(&d.e.params[k], ty, sizeof ty), "");
    ut_buf_printf(&b, "), %u instructions in %u regions. Type `help` for the commands.", d.p->n_insts, d.p->n_regions);
    emit(&b);
    ut_buf_free(&b);
    fflush(stdout);
    repl(&d);
    sigaction(SIGINT, &old, NULL);
    rc = 0;
out:
    finish_clear(&d);
    for (size_t k = 0; k < d.n_bps; k++)
        bp_free(&d.bps[k]);
    free(d.bps);
    free(d.chain);
    free(d.src);
    free(d.src_line);
    tfvm_vm_free(d.vm);
    if (d.args)
        for (size_t k = 0; k < d.n_args; k++)
            tfvm_value_release(&d.args[k]);
    free(d.args);
    tfvm_program_free(d.prog);
    free(d.arg_text);
    cli_args_free(&o);
    fflush(stdout);
    return rc;
}
