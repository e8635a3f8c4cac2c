/* tools/debug.c — `tfvm debug`: a gdb-like REPL over one deterministic run.
 * The VM pauses before a firing when the hook says so (tfvm_debug.h), so the
 * debugger always stops *before* an activation fires; vm/inspect.c gives the
 * read-only views (ready activations, contexts, partial matches). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#ifdef TFVM_HAVE_LIBEDIT
#include <histedit.h>
#include <wchar.h>
#endif

#include "tfvm.h"
#include "tfvm_debug.h"
#include "tools/buf.h"
#include "tools/debug.h"
#include "tools/debug_vars.h"
#include "tools/opts.h"

#define DBG_NONE UINT32_MAX

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
    "  --feed NAME=V1,V2,...  values for the FEEDs of channel NAME, queued each\n"
    "                         time the run starts (as for `tfvm run`; repeatable);\n"
    "                         `feed NAME V` at the prompt queues more\n"
    "  -h, --help             show this help\n"
    "\n"
    "exit status: 0 after quit or the end of input, 1 bad input file, 2 bad usage\n";

#define PROMPT "(tfvm) "
#define BRIEF_VALUE 48 /* longer tensor values print as their type in one-line views */
#define QUEUE_SHOWN 8  /* a channel's one-line view lists this many queued values */

/* ---- Breakpoints and tag patterns ------------------------------------------------ */

typedef enum pat_kind {
    PAT_ONE,  /* `*`: any one element */
    PAT_ANY,  /* `...`: any number of elements, none included */
    PAT_CALL, /* NAME@N: a call of function NAME at site N (either may be `*`) */
    PAT_ITER  /* NAME#N: iteration N of loop NAME (either may be `*`) */
} pat_kind;

typedef struct pat_elem {
    pat_kind kind;
    uint32_t region; /* DBG_NONE: any */
    bool any_num;
    uint64_t num;
} pat_elem;

typedef enum bp_kind { BP_BREAK, BP_WATCH } bp_kind;

typedef struct bp {
    int id;
    bp_kind kind;
    uint32_t inst;  /* DBG_NONE: every instruction of opcode `op` (not NULL), of
                       source line `line` (line > 0) or every CALL of `func` */
    const char *op;
    uint32_t line;  /* break FILE:LINE */
    uint32_t func;  /* break FUNCTION: its FUNC region, else DBG_NONE */
    pat_elem *pat;  /* NULL: no condition */
    size_t n_pat;
    char *pat_text; /* as written, for listing */
    char *var;      /* watch NAME of a source variable: stop when its value arrives */
    uint64_t hits;
} bp;

/* ---- Session state ---------------------------------------------------------------- */

typedef enum run_state {
    RUN_NONE,   /* no run: not started yet, or the last one finished and was collected */
    RUN_ACTIVE, /* paused before an activation (vm->paused) */
    RUN_ENDED   /* stuck or failed: contexts kept for inspection until the next start */
} run_state;

typedef enum go_mode { GO_CONTINUE, GO_STEP, GO_FINISH, GO_NEXT } go_mode;
typedef enum stop_kind { STOP_NONE, STOP_STEP, STOP_BREAK, STOP_INTERRUPT, STOP_FINISH, STOP_NEXT, STOP_VAR } stop_kind;

typedef enum region_kind { R_ENTRY, R_FUNC, R_LOOP } region_kind;

/* --feed NAME=V1,V2,...: values queued on a FEED channel whenever a run starts. */
typedef struct feed_arg {
    const char *name; /* the channel's (lives as long as the VM) */
    tfvm_value *vals;
    size_t n;
} feed_arg;

typedef struct dbg {
    tfvm_program *prog;
    tfvm_vm *vm;
    tfvm_debug_hook hook;
    /* the program, read once through tfvm_debug.h */
    uint32_t n_insts, n_regions, n_sites;
    tfvm_inst_info *ins;
    tfvm_region_info *reg;
    region_kind *rkind;
    tfvm_site_info *site;
    tfvm_edge_info *edge;  /* every instruction's out-edges: edge[edge_at[i] .. edge_at[i+1]) */
    uint32_t *edge_at;
    uint32_t entry;
    tfvm_entry_info e;
    tfvm_value *args;
    const char **arg_text; /* the argument of each parameter, as typed */
    size_t n_args;
    feed_arg *feeds;       /* --feed, in command-line order */
    size_t n_feeds;
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
    const tfvm_debug_ctx *fctx;
    uint64_t fserial;
    uint32_t fsite, freturned;
    char **fvals;     /* per RETURN of the site (program order): what it sent, as printed */
    uint32_t n_fvals;

    const tfvm_debug_ctx **chain; /* scratch: a tag's elements, outermost first */
    size_t cap_chain;

    uint32_t next_line; /* GO_NEXT: the source line being left */

    /* the program's source file (list), read at the first need */
    const char *file;   /* the program file as given */
    bool src_tried;
    char *src;          /* its text, lines NUL-terminated */
    char **src_line;    /* line k (1-based) at src_line[k - 1] */
    uint32_t n_src;
    uint32_t list_next; /* `list` again: the line to go on from (0: around the current one) */

    dv_state *vars;     /* the source variables and the values they had */
    const char *var_value, *var_tag; /* STOP_VAR: the value that arrived, and where */
    char **displays;    /* display NAME: shown at every stop */
    size_t n_displays;
} dbg;

static volatile sig_atomic_t dbg_sigint;

static void on_sigint(int sig)
{
    (void)sig;
    dbg_sigint = 1;
}

__attribute__((format(printf, 1, 2))) static void derr(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
}

/* Prints and empties a line buffer (adds the newline). */
static void emit(tb_buf *b)
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

/* ---- The program, read once ----------------------------------------------------------- */

static bool op_is(const dbg *d, uint32_t i, const char *op) { return strcmp(d->ins[i].op, op) == 0; }
static bool is_switch(const dbg *d, uint32_t i) { return op_is(d, i, "SWITCH") || op_is(d, i, "BRANCH"); }
static uint32_t n_ports(const dbg *d, uint32_t i) { return d->ins[i].n_in + d->ins[i].n_ctl; }
static const char *region_name(const dbg *d, uint32_t r) { return d->reg[r].name; }

/* Reads instructions, regions, call sites and edges (tfvm_debug.h). */
static bool read_program(dbg *d)
{
    const tfvm_program *p = d->prog;
    d->n_insts = (uint32_t)tfvm_program_inst_count(p);
    d->n_regions = (uint32_t)tfvm_program_region_count(p);
    d->n_sites = (uint32_t)tfvm_program_site_count(p);
    d->ins = calloc((size_t)d->n_insts + 1, sizeof *d->ins);
    d->reg = calloc((size_t)d->n_regions + 1, sizeof *d->reg);
    d->rkind = calloc((size_t)d->n_regions + 1, sizeof *d->rkind);
    d->site = calloc((size_t)d->n_sites + 1, sizeof *d->site);
    d->edge_at = calloc((size_t)d->n_insts + 1, sizeof *d->edge_at);
    if (!d->ins || !d->reg || !d->rkind || !d->site || !d->edge_at)
        return false;
    size_t n_edges = 0;
    for (uint32_t i = 0; i < d->n_insts; i++) {
        tfvm_program_inst(p, i, &d->ins[i]);
        d->edge_at[i] = (uint32_t)n_edges;
        n_edges += d->ins[i].n_edges;
    }
    d->edge_at[d->n_insts] = (uint32_t)n_edges;
    d->edge = calloc(n_edges + 1, sizeof *d->edge);
    if (!d->edge)
        return false;
    for (uint32_t i = 0; i < d->n_insts; i++)
        tfvm_program_edges(p, i, d->edge + d->edge_at[i], d->ins[i].n_edges);
    for (uint32_t r = 0; r < d->n_regions; r++) {
        tfvm_program_region(p, r, &d->reg[r]);
        d->rkind[r] = strcmp(d->reg[r].kind, "loop") == 0 ? R_LOOP : strcmp(d->reg[r].kind, "func") == 0 ? R_FUNC : R_ENTRY;
    }
    for (uint32_t k = 0; k < d->n_sites; k++)
        tfvm_program_site(p, k, &d->site[k]);
    return true;
}

static void free_program(dbg *d)
{
    free(d->ins);
    free(d->reg);
    free(d->rkind);
    free(d->site);
    free(d->edge);
    free(d->edge_at);
}

/* ---- Printing pieces ---------------------------------------------------------------- */

static void put_shape(tb_buf *b, const tfvm_tensor *t)
{
    tb_printf(b, "%s[", tfvm_dtype_name(tfvm_tensor_dtype(t)));
    for (int k = 0; k < tfvm_tensor_rank(t); k++)
        tb_printf(b, "%s%lld", k ? ", " : "", (long long)tfvm_tensor_dims(t)[k]);
    tb_printf(b, "]");
}

static void put_formatted(tb_buf *b, const tfvm_value *v)
{
    char small[256];
    size_t n = tfvm_value_format(v, small, sizeof small);
    if (n < sizeof small) {
        tb_append(b, small, n);
        return;
    }
    char *big = malloc(n + 1);
    if (!big) {
        b->failed = true;
        return;
    }
    tfvm_value_format(v, big, n + 1);
    tb_append(b, big, n);
    free(big);
}

/* A token as `tfvm run` prints values ("<dead>" for a dead one, "?" for
 * none); in one-line views (brief) a long tensor is shown by its dtype and
 * shape. */
static void put_value(tb_buf *b, tfvm_debug_token tok, const tfvm_value *v, bool brief)
{
    if (tok == TFVM_TOKEN_NONE) {
        tb_printf(b, "?");
        return;
    }
    if (tok == TFVM_TOKEN_DEAD) {
        tb_printf(b, "<dead>");
        return;
    }
    if (brief && v->tensor) {
        tb_buf t;
        tb_init(&t);
        put_formatted(&t, v);
        if (!t.failed && t.len <= BRIEF_VALUE)
            tb_append(b, t.data, t.len);
        else
            put_shape(b, v->tensor);
        tb_free(&t);
        return;
    }
    put_formatted(b, v);
}

static const char *region_kind_name(region_kind kind)
{
    return kind == R_LOOP ? "loop" : kind == R_FUNC ? "func" : "entry";
}

/* An instruction's name as seen from region `from`: qualified by its region
 * when it lives elsewhere (as .tfasm writes references); anonymous ones are %N. */
static void put_inst_ref(tb_buf *b, const dbg *d, uint32_t i, uint32_t from)
{
    char label[160];
    if (d->ins[i].region_index != from && d->ins[i].name)
        tb_printf(b, "%s.", region_name(d, d->ins[i].region_index));
    tb_printf(b, "%s", tfvm_inst_label(d->prog, i, label, sizeof label));
}

/* Input ports: data ports by number, control ports "ctl" (ctl0, ctl1... when
 * there are several). */
static void put_port_name(tb_buf *b, const tfvm_inst_info *in, uint32_t port)
{
    if (port < in->n_in)
        tb_printf(b, "%u", port);
    else if (in->n_ctl == 1)
        tb_printf(b, "ctl");
    else
        tb_printf(b, "ctl%u", port - in->n_in);
}

/* A consumer's port: "[0]", "[ctl]" */
static void put_port(tb_buf *b, const tfvm_inst_info *in, uint32_t port)
{
    tb_printf(b, "[");
    put_port_name(b, in, port);
    tb_printf(b, "]");
}

static void put_loc(tb_buf *b, const tfvm_inst_info *in)
{
    if (in->line)
        tb_printf(b, " @%u:%u", in->line, in->col);
}

/* "name (OP)" */
static void put_inst(tb_buf *b, const dbg *d, uint32_t i)
{
    char label[160];
    tb_printf(b, "%s (%s)", tfvm_inst_label(d->prog, i, label, sizeof label), d->ins[i].op);
}

static void put_tag(tb_buf *b, const dbg *d, const tfvm_debug_ctx *c)
{
    char tag[4096];
    tb_printf(b, "%s", tfvm_debug_tag(d->vm, c, tag, sizeof tag));
}

/* The tag of c with one more element: "[fib@2, fib@0]". */
static void put_tag_plus(tb_buf *b, const dbg *d, const tfvm_debug_ctx *c, const char *elem)
{
    size_t at = b->len;
    put_tag(b, d, c);
    if (b->failed || b->len == at)
        return;
    b->len--; /* the closing bracket */
    tb_printf(b, "%s%s]", b->len - at > 1 ? ", " : "", elem);
}

static const char *output_name(const dbg *d, uint32_t i, uint32_t o, char *buf, size_t size)
{
    if (is_switch(d, i))
        return o ? "true" : "false";
    if (op_is(d, i, "MERGE"))
        return o ? "index" : "value";
    snprintf(buf, size, "out%u", o);
    return buf;
}

/* The consumers of every output of instruction i: "a[0], b[ctl]", outputs
 * named and separated by "; " when there are several. `dead_out` marks the
 * untaken output of a SWITCH (a dead token, or none when pruned), or -1. */
static void put_consumers(tb_buf *b, const dbg *d, uint32_t i, int dead_out)
{
    const tfvm_inst_info *in = &d->ins[i];
    uint32_t n_out = in->n_out;
    bool any = false;
    for (uint32_t o = 0; o < n_out; o++) {
        bool first = true;
        for (uint32_t k = d->edge_at[i]; k < d->edge_at[i + 1]; k++) {
            const tfvm_edge_info *e = &d->edge[k];
            if (e->out != o)
                continue;
            if (first) {
                if (any)
                    tb_printf(b, ";");
                if (n_out > 1) {
                    char nb[16];
                    bool pruned = o ? in->prune_true : in->prune_false;
                    tb_printf(b, " %s%s:", output_name(d, i, o, nb, sizeof nb),
                              (int)o != dead_out ? ""
                              : pruned           ? " (no token)"
                                                 : " (dead)");
                }
            }
            tb_printf(b, "%s ", first ? "" : ",");
            put_inst_ref(b, d, e->inst, in->region_index);
            put_port(b, &d->ins[e->inst], e->port);
            first = false;
            any = true;
        }
    }
    if (!any)
        tb_printf(b, " nothing");
}

/* ---- Channels (FEED and FETCH) ----------------------------------------------------------- */

/* "i32", "f32[]": a FEED channel's type. */
static void put_chan_type(tb_buf *b, const tfvm_debug_chan_info *c)
{
    tb_printf(b, "%s%s", tfvm_dtype_name(c->dtype), c->is_tensor ? "[]" : "");
}

/* Queued value j of channel k, as put_value prints it. */
static void put_chan_value(tb_buf *b, const dbg *d, size_t k, size_t j, bool brief)
{
    tfvm_value v;
    tfvm_debug_token tok = tfvm_debug_chan_value(d->vm, k, j, &v);
    put_value(b, tok, &v, brief);
}

/* The number of channel c's queued value j: a FEED's next value is the one
 * after those taken and those its waiting firings will take; a FETCH keeps
 * its last `queued` values. */
static uint64_t chan_number(const tfvm_debug_chan_info *c, size_t j)
{
    return c->fetch ? c->count - c->queued + j + 1 : c->count + c->waiting + j + 1;
}

/* One channel on one line:
 *   feed x (i32): 2 queued [3, 4], 1 taken
 *   feed stop (bool): none queued, 1 waiting: x at [train#2], 1 taken
 *   fetch s: 3 made [1, 3, 6]
 * The list stops after QUEUE_SHOWN values ("..."); `list` false leaves it out. */
static void put_chan(tb_buf *b, const dbg *d, size_t k, bool list)
{
    tfvm_debug_chan_info c;
    if (tfvm_debug_channel(d->vm, k, &c) != TFVM_OK)
        return;
    tb_printf(b, "%s %s", c.fetch ? "fetch" : "feed", c.name);
    if (c.fetch) {
        if (!c.count)
            tb_printf(b, ": none made");
        else
            tb_printf(b, ": %" PRIu64 " made", c.count);
        if (c.queued != c.count) /* a host took some (a session) */
            tb_printf(b, ", %zu kept", c.queued);
    } else {
        tb_printf(b, " (");
        put_chan_type(b, &c);
        if (!c.queued)
            tb_printf(b, "): none queued");
        else
            tb_printf(b, "): %zu queued", c.queued);
    }
    if (list && c.queued) {
        tb_printf(b, " [");
        for (size_t j = 0; j < c.queued && j < QUEUE_SHOWN; j++) {
            tb_printf(b, "%s", j ? ", " : "");
            put_chan_value(b, d, k, j, true);
        }
        tb_printf(b, "%s]", c.queued > QUEUE_SHOWN ? ", ..." : "");
    }
    if (c.fetch)
        return;
    if (c.waiting) {
        tb_printf(b, ", %zu waiting", c.waiting);
        for (size_t j = 0; list && j < c.waiting; j++) {
            const tfvm_debug_ctx *ctx;
            uint32_t inst;
            if (!tfvm_debug_chan_waiting(d->vm, k, j, &ctx, &inst))
                break;
            char lab[160];
            tb_printf(b, "%s%s at ", j ? ", " : ": ", tfvm_inst_label(d->prog, inst, lab, sizeof lab));
            put_tag(b, d, ctx);
        }
    }
    tb_printf(b, ", %" PRIu64 " taken", c.count);
}

/* What a FEED or FETCH about to fire does with its channel: "; takes x #2 =
 * 6", "; x is empty: no value #2 to take" (the run fails), "; makes s #3". */
static void put_chan_firing(tb_buf *b, const dbg *d, uint32_t i)
{
    int k = tfvm_debug_inst_channel(d->vm, i);
    tfvm_debug_chan_info c;
    if (k < 0 || tfvm_debug_channel(d->vm, (size_t)k, &c) != TFVM_OK)
        return;
    if (c.fetch) {
        tb_printf(b, "; makes %s #%" PRIu64, c.name, c.count + 1);
    } else if (c.queued) {
        tb_printf(b, "; takes %s #%" PRIu64 " = ", c.name, chan_number(&c, 0));
        put_chan_value(b, d, (size_t)k, 0, true);
    } else {
        tb_printf(b, "; %s is empty: no value #%" PRIu64 " to take", c.name, chan_number(&c, 0));
    }
}

/* One firing (about to happen): instruction, opcode, tag, input values and
 * where its outputs go (with the tag they land at when it changes). */
static void put_firing(tb_buf *b, const dbg *d, const tfvm_debug_act *a, bool dests)
{
    uint32_t i = tfvm_debug_act_inst(a);
    const tfvm_inst_info *in = &d->ins[i];
    const tfvm_debug_ctx *c = tfvm_debug_act_ctx(a);
    put_inst(b, d, i);
    tb_printf(b, " at ");
    put_tag(b, d, c);
    bool dead = tfvm_debug_act_dead(d->vm, a);
    tfvm_value v;
    tfvm_debug_token tok;
    if (op_is(d, i, "ARG")) {
        tb_printf(b, ": value ");
        tok = tfvm_debug_act_input(d->vm, a, 0, &v);
        put_value(b, tok, &v, true);
    } else if (op_is(d, i, "CONST")) {
        tb_printf(b, ": value ");
        if (dead)
            put_value(b, TFVM_TOKEN_DEAD, NULL, true);
        else
            put_value(b, tfvm_debug_inst_const(d->vm, i, &v) ? TFVM_TOKEN_LIVE : TFVM_TOKEN_NONE, &v, true);
        if (dead)
            tb_printf(b, " (a dead control input)");
    } else if (op_is(d, i, "MERGE")) {
        uint32_t chosen = tfvm_debug_act_merge_input(a);
        tb_printf(b, ": in ");
        tok = tfvm_debug_act_input(d->vm, a, chosen, &v);
        put_value(b, tok, &v, true);
        tb_printf(b, " (input %u)", chosen);
    } else if (in->n_in) {
        tb_printf(b, ": in ");
        for (uint32_t k = 0; k < in->n_in; k++) {
            if (k)
                tb_printf(b, ", ");
            tok = tfvm_debug_act_input(d->vm, a, k, &v);
            put_value(b, tok, &v, true);
        }
    }
    /* SWITCH and BRANCH: the way the token goes, in words */
    int way = tfvm_debug_act_way(d->vm, a);
    int dead_out = way >= 0 ? 1 - way : -1;
    if (way >= 0)
        tb_printf(b, "; goes %s", way ? "true" : "false");
    if (!dests)
        return;
    if (!dead && strcmp(in->op_class, "host") == 0) /* only the next firing: the ready list's later ones may not */
        put_chan_firing(b, d, i);
    tb_printf(b, " ->");
    char lab[160];
    tfvm_debug_ctx_info ci;
    tfvm_debug_ctx_get(c, &ci);
    if (op_is(d, i, "RESULT")) {
        tb_printf(b, " result %u '%s'", in->attr, d->e.results[in->attr].name);
        return;
    } else if (op_is(d, i, "CALL")) {
        if (dead) {
            tb_printf(b, " no call (dead): each RETURN %s answers <dead>",
                      tfvm_site_label(d->prog, in->attr, lab, sizeof lab));
            return;
        }
        tb_printf(b, " ");
        put_tag_plus(b, d, c, tfvm_site_label(d->prog, in->attr, lab, sizeof lab));
    } else if (op_is(d, i, "ENTER")) {
        if (dead) {
            tb_printf(b, " no loop (dead): each EXIT %s answers <dead>", region_name(d, in->attr));
            return;
        }
        tb_printf(b, " ");
        snprintf(lab, sizeof lab, "%s#%s", region_name(d, in->attr), in->enter_const ? "*" : "0");
        put_tag_plus(b, d, c, lab);
    } else if (op_is(d, i, "NEXTITER") || op_is(d, i, "EXIT")) {
        if (dead) {
            tb_printf(b, " dropped (dead)");
            return;
        }
        tb_printf(b, " ");
        if (op_is(d, i, "EXIT")) {
            put_tag(b, d, tfvm_debug_parent(c));
        } else {
            snprintf(lab, sizeof lab, "%s#%" PRIu64, region_name(d, ci.region), ci.iter + 1);
            put_tag_plus(b, d, tfvm_debug_parent(c), lab);
        }
    } else if (op_is(d, i, "RETURN")) {
        tb_printf(b, " ");
        put_tag(b, d, tfvm_debug_parent(c));
    }
    put_consumers(b, d, i, dead_out);
}

/* ---- Resolving names ------------------------------------------------------------------ */

static int find_region(const dbg *d, const char *name, size_t len)
{
    for (uint32_t r = 0; r < d->n_regions; r++)
        if (strlen(d->reg[r].name) == len && memcmp(d->reg[r].name, name, len) == 0)
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
 * case). Sets *inst (DBG_NONE for an opcode) and *op; prints an error and
 * returns false when it names nothing, or several instructions. */
/* vars: WHAT could have been a source variable too (print, watch), which
 * the message says. */
static bool resolve(const dbg *d, const char *what, uint32_t *inst, const char **op, bool vars)
{
    *inst = DBG_NONE;
    *op = NULL;
    uint64_t k;
    if (what[0] == '%' && parse_u64_text(what + 1, &k)) {
        if (k >= d->n_insts) {
            derr("no instruction %%%" PRIu64 " (the program has %u)", k, d->n_insts);
            return false;
        }
        *inst = (uint32_t)k;
        *op = d->ins[k].op;
        return true;
    }
    const char *dot = strchr(what, '.');
    if (dot) {
        int r = find_region(d, what, (size_t)(dot - what));
        if (r < 0) {
            derr("no region named '%.*s'", (int)(dot - what), what);
            return false;
        }
        for (uint32_t i = 0; i < d->n_insts; i++)
            if (d->ins[i].region_index == (uint32_t)r && d->ins[i].name && strcmp(d->ins[i].name, dot + 1) == 0) {
                *inst = i;
                *op = d->ins[i].op;
                return true;
            }
        derr("no instruction named '%s' in %s %s", dot + 1, region_kind_name(d->rkind[r]), region_name(d, (uint32_t)r));
        return false;
    }
    uint32_t found = 0, first = DBG_NONE;
    for (uint32_t i = 0; i < d->n_insts; i++)
        if (d->ins[i].name && strcmp(d->ins[i].name, what) == 0) {
            if (!found++)
                first = i;
        }
    if (found == 1) {
        *inst = first;
        *op = d->ins[first].op;
        return true;
    }
    if (found > 1) {
        tb_buf b;
        tb_init(&b);
        tb_printf(&b, "error: '%s' names %u instructions:", what, found);
        uint32_t shown = 0;
        for (uint32_t i = 0; i < d->n_insts && shown < 6; i++)
            if (d->ins[i].name && strcmp(d->ins[i].name, what) == 0)
                tb_printf(&b, "%s %s.%s", shown++ ? "," : "", region_name(d, d->ins[i].region_index), what);
        tb_printf(&b, "%s (write REGION.NAME)", found > shown ? ", ..." : "");
        emit(&b);
        tb_free(&b);
        return false;
    }
    for (size_t o = 0; tfvm_op_name(o); o++)
        if (strcasecmp(tfvm_op_name(o), what) == 0) {
            *op = tfvm_op_name(o);
            return true;
        }
    derr("no %sinstruction or opcode named '%s'", vars && dv_count(d->vars) ? "variable, " : "", what);
    return false;
}

/* "n_sw (SWITCH) in func fib @12:5" or "every ADD" */
static void put_bp_what(tb_buf *b, const dbg *d, const bp *x)
{
    const char *src = tfvm_program_source(d->prog);
    if (x->var) {
        tb_printf(b, "variable %s (stops when a value of it arrives)", x->var);
    } else if (x->line) {
        tb_printf(b, "line %u of %s", x->line, src ? src : "the source");
    } else if (x->func != DBG_NONE) {
        tb_printf(b, "every call of function %s", region_name(d, x->func));
    } else if (x->inst == DBG_NONE) {
        tb_printf(b, "every %s", x->op);
    } else {
        uint32_t r = d->ins[x->inst].region_index;
        put_inst(b, d, x->inst);
        tb_printf(b, " in %s %s", region_kind_name(d->rkind[r]), region_name(d, r));
        put_loc(b, &d->ins[x->inst]);
    }
    if (x->pat_text)
        tb_printf(b, " if %s", x->pat_text);
}

/* Parses "[ELEM, ...]" into b->pat. ELEM: `...`, `*`, NAME@N, NAME#N, where
 * NAME or N may be `*`. */
static bool parse_pattern(const dbg *d, const char *text, bp *x)
{
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
        pe->region = DBG_NONE;
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
                int r = find_region(d, q, (size_t)(m - q));
                region_kind want = pe->kind == PAT_CALL ? R_FUNC : R_LOOP;
                if (r < 0 || d->rkind[r] != want) {
                    derr("no %s named '%.*s' (in tag pattern %s)", want == R_FUNC ? "function" : "loop",
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
static size_t tag_chain(dbg *d, const tfvm_debug_ctx *c)
{
    size_t n = 0;
    for (const tfvm_debug_ctx *x = c; x && tfvm_debug_parent(x); x = tfvm_debug_parent(x))
        n++;
    if (n > d->cap_chain) {
        size_t cap = n * 2;
        const tfvm_debug_ctx **m = realloc(d->chain, cap * sizeof *m);
        if (!m)
            return SIZE_MAX;
        d->chain = m;
        d->cap_chain = cap;
    }
    size_t k = n;
    for (const tfvm_debug_ctx *x = c; x && tfvm_debug_parent(x); x = tfvm_debug_parent(x))
        d->chain[--k] = x;
    return n;
}

static bool elem_matches(const dbg *d, const pat_elem *pe, const tfvm_debug_ctx *c)
{
    tfvm_debug_ctx_info ci;
    tfvm_debug_ctx_get(c, &ci);
    switch (pe->kind) {
    case PAT_ONE:
        return true;
    case PAT_CALL:
        return ci.kind == TFVM_CTX_CALL && (pe->region == DBG_NONE || d->site[ci.site].callee == pe->region) &&
               (pe->any_num || d->site[ci.site].id == pe->num);
    case PAT_ITER:
        return ci.kind == TFVM_CTX_ITER && (pe->region == DBG_NONE || ci.region == pe->region) &&
               (pe->any_num || ci.iter == pe->num);
    case PAT_ANY:
        break;
    }
    return false;
}

static bool pat_matches(const dbg *d, const pat_elem *pe, size_t np, const tfvm_debug_ctx *const *c, size_t nc)
{
    while (np && pe->kind != PAT_ANY) {
        if (!nc || !elem_matches(d, pe, c[0]))
            return false;
        pe++, np--, c++, nc--;
    }
    if (!np)
        return nc == 0;
    for (size_t k = 0; k <= nc; k++) /* `...` takes k elements */
        if (pat_matches(d, pe + 1, np - 1, c + k, nc - k))
            return true;
    return false;
}

static bool bp_matches(dbg *d, const bp *x, const tfvm_debug_act *a)
{
    uint32_t i = tfvm_debug_act_inst(a);
    const tfvm_inst_info *in = &d->ins[i];
    if (x->var) { /* a variable's watchpoint: dv_record decides */
        return false;
    } else if (x->inst != DBG_NONE) {
        if (i != x->inst)
            return false;
    } else if (x->line) {
        if (in->line != x->line)
            return false;
    } else if (x->func != DBG_NONE) {
        if (!op_is(d, i, "CALL") || d->site[in->attr].callee != x->func)
            return false;
    } else if (strcmp(in->op, x->op) != 0) {
        return false;
    }
    if (!x->pat)
        return true;
    size_t n = tag_chain(d, tfvm_debug_act_ctx(a));
    return n != SIZE_MAX && pat_matches(d, x->pat, x->n_pat, d->chain, n);
}

static void bp_free(bp *x)
{
    free(x->var);
    free(x->pat);
    free(x->pat_text);
}

/* ---- Feeding ------------------------------------------------------------------------------ */

/* The FEED channel named by name[0..len), or -1 with *why set: "the program
 * has no FEED channel 'y' (its FEED channels: 'x')". */
static int find_feed_chan(const dbg *d, const char *name, size_t len, char *why, size_t size)
{
    size_t n = tfvm_debug_channels(d->vm), at = 0;
    char list[256] = "";
    for (size_t k = 0; k < n; k++) {
        tfvm_debug_chan_info c;
        if (tfvm_debug_channel(d->vm, k, &c) != TFVM_OK || c.fetch)
            continue;
        if (strlen(c.name) == len && memcmp(c.name, name, len) == 0)
            return (int)k;
        if (at < sizeof list)
            at += (size_t)snprintf(list + at, sizeof list - at, "%s'%s'", at ? ", " : "", c.name);
    }
    snprintf(why, size, "the program has no FEED channel '%.*s' (its FEED channels: %s)", (int)len, name,
             at ? list : "none");
    return -1;
}

/* V1,V2,... as values of FEED channel k into f (f->vals owned). false with
 * the reason in msg ("expected i32, got 'a'"). */
static bool parse_feed_list(const dbg *d, size_t k, const char *text, feed_arg *f, char *msg, size_t size)
{
    tfvm_debug_chan_info c;
    tfvm_debug_channel(d->vm, k, &c);
    f->name = c.name;
    f->n = 1;
    for (const char *t = text; *t; t++)
        f->n += *t == ',';
    f->vals = calloc(f->n, sizeof *f->vals);
    if (!f->vals) {
        snprintf(msg, size, "out of memory");
        return false;
    }
    const char *at = text;
    for (size_t j = 0; j < f->n; j++) {
        size_t len = strcspn(at, ",");
        char *item = malloc(len + 1);
        if (!item) {
            snprintf(msg, size, "out of memory");
            return false;
        }
        memcpy(item, at, len);
        item[len] = '\0';
        bool ok = cli_parse_value(c.dtype, c.is_tensor, item, &f->vals[j], msg, size); /* as run --feed */
        free(item);
        if (!ok)
            return false;
        at += len + (at[len] == ',');
    }
    return true;
}

static void feed_arg_free(feed_arg *f)
{
    for (size_t j = 0; f->vals && j < f->n; j++)
        tfvm_value_release(&f->vals[j]);
    free(f->vals);
    f->vals = NULL;
}

/* --feed NAME=V1,V2,...: each checked and parsed once, before the REPL.
 * Returns 0, or an exit status after one line on stderr ("tfvm: --feed x:
 * expected i32, got 'a'"): 2, as `tfvm run` says of a bad --feed. */
static int parse_feeds(dbg *d, const cli_args *o, int opt)
{
    for (size_t h = 0; h < o->n_hits; h++)
        d->n_feeds += o->hits[h].opt == opt;
    d->feeds = calloc(d->n_feeds + 1, sizeof *d->feeds);
    if (!d->feeds) {
        fprintf(stderr, "tfvm: out of memory\n");
        return 1;
    }
    size_t n = 0;
    for (size_t h = 0; h < o->n_hits; h++) {
        if (o->hits[h].opt != opt)
            continue;
        const char *v = o->hits[h].value, *eq = strchr(v, '=');
        if (!eq || eq == v)
            return cli_usage_error("debug", "--feed expects NAME=V1,V2,..., got '%s'", v);
        char msg[512];
        int k = find_feed_chan(d, v, (size_t)(eq - v), msg, sizeof msg);
        feed_arg *f = &d->feeds[n++];
        if (k < 0 || !parse_feed_list(d, (size_t)k, eq + 1, f, msg, sizeof msg)) {
            fprintf(stderr, "tfvm: --feed %.*s: %s\n", (int)(eq - v), v, msg);
            return 2;
        }
    }
    return 0;
}

/* ---- Running ---------------------------------------------------------------------------- */

/* The RETURNs of call site s, in program order: which one is i (or DBG_NONE), and how many. */
static uint32_t return_index(const dbg *d, uint32_t s, uint32_t i, uint32_t *n)
{
    uint32_t k = 0, at = DBG_NONE;
    for (uint32_t j = 0; j < d->n_insts; j++)
        if (op_is(d, j, "RETURN") && d->ins[j].attr == s) {
            if (j == i)
                at = k;
            k++;
        }
    if (n)
        *n = k;
    return at;
}

static void finish_note(dbg *d, const tfvm_debug_act *a)
{
    uint32_t i = tfvm_debug_act_inst(a);
    if (!op_is(d, i, "RETURN") || d->ins[i].attr != d->fsite || tfvm_debug_act_ctx(a) != d->fctx ||
        !tfvm_debug_ctx_alive(d->fctx, d->fserial))
        return;
    uint32_t k = return_index(d, d->fsite, i, NULL);
    if (k == DBG_NONE || k >= d->n_fvals || d->fvals[k])
        return;
    tb_buf b;
    tb_init(&b);
    tfvm_value v;
    tfvm_debug_token tok = tfvm_debug_act_input(d->vm, a, 0, &v);
    put_value(&b, tok, &v, true);
    if (b.failed) {
        tb_free(&b);
        return;
    }
    d->fvals[k] = b.data; /* taken */
    d->freturned++;
}

static bool finish_reached(const dbg *d)
{
    return !tfvm_debug_ctx_alive(d->fctx, d->fserial) || d->freturned >= d->n_fvals;
}

/* A firing that is about to happen and will not be stopped: printed when
 * stepping or watched, and noted for finish. */
static void observe(dbg *d, const tfvm_debug_act *a)
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
        tb_buf b;
        tb_init(&b);
        if (watched && !show)
            tb_printf(&b, "[watch %d] ", watched->id);
        put_firing(&b, d, a, true);
        emit(&b);
        tb_free(&b);
    }
    if (d->mode == GO_STEP && d->left)
        d->left--;
    if (d->mode == GO_FINISH)
        finish_note(d, a);
}

/* watch NAME: the watchpoint of variable `name`, if one is set. */
static bp *var_watch(dbg *d, const char *name)
{
    for (size_t k = 0; name && k < d->n_bps; k++)
        if (d->bps[k].var && strcmp(d->bps[k].var, name) == 0)
            return &d->bps[k];
    return NULL;
}

static bool on_fire(void *ud, tfvm_vm *vm, const tfvm_debug_act *a)
{
    dbg *d = ud;
    bp *w = var_watch(d, dv_record(d->vars, vm, a, &d->var_value, &d->var_tag));
    if (w) {
        w->hits++;
        d->hit = w;
        d->stop = STOP_VAR;
        return true;
    }
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
    uint32_t line = d->ins[tfvm_debug_act_inst(a)].line;
    if (d->mode == GO_NEXT && line && line != d->next_line) {
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
        for (uint32_t k = 0; k < d->n_fvals; k++)
            free(d->fvals[k]);
        free(d->fvals);
        d->fvals = NULL;
        d->n_fvals = 0;
    }
    d->fctx = NULL;
}

/* Partial matches held in context c. */
static size_t waiting_in(const dbg *d, const tfvm_debug_ctx *c)
{
    tfvm_debug_ctx_info ci;
    tfvm_debug_ctx_get(c, &ci);
    size_t n = 0;
    for (uint32_t i = d->reg[ci.region].first_inst; i < d->reg[ci.region].end_inst; i++)
        n += tfvm_debug_match_state(d->vm, c, i) == TFVM_MATCH_WAITING;
    return n;
}

/* Partial matches in every live context. */
static size_t count_waiting(const dbg *d)
{
    const tfvm_debug_ctx **all;
    size_t n, waiting = 0;
    if (tfvm_debug_contexts(d->vm, &all, &n) != TFVM_OK)
        return 0;
    for (size_t k = 0; k < n; k++)
        waiting += waiting_in(d, all[k]);
    tfvm_debug_contexts_free(d->vm, all, n);
    return waiting;
}

/* The run went quiescent: either every result arrived (collect and print
 * them, the run is over) or it is stuck (keep it to inspect). */
static void report_done(dbg *d)
{
    tfvm_vm *vm = d->vm;
    const tfvm_entry_info *en = &d->e;
    for (uint32_t k = 0; k < en->n_results; k++) {
        tfvm_debug_token got = tfvm_debug_result(vm, k, NULL);
        if (got == TFVM_TOKEN_LIVE)
            continue;
        d->run = RUN_ENDED;
        d->ended_why = "stuck";
        if (got == TFVM_TOKEN_DEAD) {
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
    /* the channels' queues go with the run: show what the FETCHes made first,
     * as `tfvm run` does, and fed values no FEED took */
    tb_buf f;
    tb_init(&f);
    for (size_t k = 0; k < tfvm_debug_channels(vm); k++) {
        tfvm_debug_chan_info c;
        if (tfvm_debug_channel(vm, k, &c) == TFVM_OK && (c.fetch || c.queued)) {
            put_chan(&f, d, k, true);
            emit(&f);
        }
    }
    tb_free(&f);
    tfvm_status st = tfvm_debug_end(vm, res, en->n_results);
    d->run = RUN_NONE;
    if (st != TFVM_OK) {
        printf("Run failed: %s\n", tfvm_errmsg(vm));
        free(res);
        return;
    }
    tb_buf b;
    tb_init(&b);
    tb_printf(&b, "Run finished:");
    for (uint32_t k = 0; k < en->n_results; k++) {
        tb_printf(&b, "%s %s = ", k ? "," : "", en->results[k].name);
        put_value(&b, TFVM_TOKEN_LIVE, &res[k], false);
        tfvm_value_release(&res[k]);
    }
    emit(&b);
    tb_free(&b);
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
    const char *name = tfvm_program_source(d->prog);
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
    tb_buf b;
    tb_init(&b);
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        tb_append(&b, chunk, got);
    fclose(f);
    tb_append(&b, "", 1);
    if (b.failed) {
        tb_free(&b);
        return;
    }
    size_t len = b.len;
    d->src = b.data; /* taken */
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
    tb_buf b;
    tb_init(&b);
    tb_printf(&b, "%s", prefix);
    put_firing(&b, d, tfvm_debug_paused(d->vm), true);
    emit(&b);
    tb_free(&b);
}

/* display NAME...: each, at the current tag, after every stop. */
static void show_displays(dbg *d)
{
    const tfvm_debug_act *a = tfvm_debug_paused(d->vm);
    for (size_t k = 0; a && k < d->n_displays; k++) {
        tb_buf b;
        tb_init(&b);
        tb_printf(&b, "%zu: ", k + 1);
        dv_print(d->vars, d->vm, tfvm_debug_act_ctx(a), d->displays[k], NULL, &b);
        emit(&b);
        tb_free(&b);
    }
}

static void report(dbg *d, tfvm_debug_state st)
{
    tb_buf b;
    tb_init(&b);
    if (st == TFVM_DEBUG_PAUSED) {
        switch (d->stop) {
        case STOP_BREAK:
            tb_printf(&b, "Breakpoint %d, ", d->hit->id);
            put_firing(&b, d, tfvm_debug_paused(d->vm), true);
            emit(&b);
            break;
        case STOP_INTERRUPT:
            report_next(d, d->tty ? "\nInterrupted. Next: " : "Interrupted. Next: "); /* after the echoed ^C */
            break;
        case STOP_FINISH: {
            char lab[160];
            tb_printf(&b, "Returned from %s:", tfvm_site_label(d->prog, d->fsite, lab, sizeof lab));
            for (uint32_t k = 0; k < d->n_fvals; k++) {
                tb_printf(&b, "%s ", k ? "," : "");
                if (d->fvals[k])
                    tb_printf(&b, "%s", d->fvals[k]);
                else
                    tb_printf(&b, "(no token)");
            }
            emit(&b);
            report_next(d, "Next: ");
            break;
        }
        case STOP_NEXT: {
            const tfvm_inst_info *in = &d->ins[tfvm_debug_act_inst(tfvm_debug_paused(d->vm))];
            const char *text = source_line(d, in->line);
            if (text)
                printf("%u\t%s\n", in->line, text);
            else
                printf("line %u\n", in->line);
            report_next(d, "Next: ");
            break;
        }
        case STOP_VAR:
            tb_printf(&b, "Watchpoint %d: %s = %s at %s", d->hit->id, d->hit->var, d->var_value, d->var_tag);
            emit(&b);
            report_next(d, "Next: ");
            break;
        case STOP_STEP:
        case STOP_NONE:
            break;
        }
        show_displays(d);
    } else if (st == TFVM_DEBUG_DONE) {
        report_done(d);
    } else if (st == TFVM_DEBUG_FAILED) {
        d->run = RUN_ENDED;
        d->ended_why = "failed";
        printf("Run failed: %s\n", tfvm_errmsg(d->vm));
    }
    tb_free(&b);
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
    if (tfvm_debug_paused(d->vm))
        observe(d, tfvm_debug_paused(d->vm));
    fflush(stdout);
    tfvm_debug_state st = tfvm_debug_step(d->vm, 0);
    report(d, st);
}

static bool start(dbg *d)
{
    finish_clear(d);
    tfvm_status st = tfvm_debug_begin(d->vm, d->e.name, d->args, d->n_args);
    if (st != TFVM_OK) {
        d->run = RUN_ENDED;
        d->ended_why = "failed";
        derr("cannot start the run: %s", tfvm_errmsg(d->vm));
        return false;
    }
    d->run = RUN_ACTIVE;
    dv_reset(d->vars);
    printf("Starting %s(", d->e.name);
    for (size_t k = 0; k < d->n_args; k++)
        printf("%s%s", k ? ", " : "", d->arg_text[k]);
    printf(")\n");
    /* before the first firing: no FEED can find its channel empty yet */
    if (tfvm_debug_channels(d->vm) && tfvm_debug_keep_fetched(d->vm) != TFVM_OK)
        derr("%s", tfvm_errmsg(d->vm));
    for (size_t f = 0; f < d->n_feeds; f++)
        for (size_t j = 0; j < d->feeds[f].n; j++)
            if (tfvm_debug_feed(d->vm, d->feeds[f].name, &d->feeds[f].vals[j]) != TFVM_OK) {
                derr("--feed %s: %s", d->feeds[f].name, tfvm_errmsg(d->vm));
                break;
            }
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
    const tfvm_debug_act *a = tfvm_debug_paused(d->vm);
    d->next_line = a ? d->ins[tfvm_debug_act_inst(a)].line : 0;
    go(d, GO_NEXT, 0);
    return true;
}

/* list [LINE | FUNCTION]: source lines around the current instruction's line
 * (or LINE, or the function's first line); `list` again goes on below. */
#define LIST_LINES 10
static bool cmd_list(dbg *d, char *args)
{
    const char *src = tfvm_program_source(d->prog);
    source_load(d);
    if (!d->src) {
        if (!src)
            derr("the program names no source file (compile it from .tfg, .onnx or .pb to have one)");
        else
            derr("cannot read the source file %s", src);
        return true;
    }
    uint32_t mark = 0, center = 0;
    const tfvm_debug_act *a = tfvm_debug_paused(d->vm);
    if (d->run == RUN_ACTIVE && a)
        mark = d->ins[tfvm_debug_act_inst(a)].line;
    if (*args) {
        uint64_t line;
        int r = find_region(d, args, strlen(args));
        if (parse_u64_text(args, &line)) {
            if (line == 0 || line > d->n_src) {
                derr("line %" PRIu64 " is out of range: %s has %u lines", line, src, d->n_src);
                return true;
            }
            center = (uint32_t)line;
        } else if (r >= 0) {
            for (uint32_t i = 0; i < d->n_insts; i++)
                if (d->ins[i].region_index == (uint32_t)r && d->ins[i].line && (!center || d->ins[i].line < center))
                    center = d->ins[i].line;
            if (!center) {
                derr("%s %s has no source lines", region_kind_name(d->rkind[r]), region_name(d, (uint32_t)r));
                return true;
            }
        } else {
            derr("list takes a line number or a function name, got '%s'", args);
            return true;
        }
    } else if (d->list_next) {
        if (d->list_next > d->n_src) {
            derr("line %u is out of range: %s has %u lines", d->list_next, src, d->n_src);
            return true;
        }
        center = d->list_next + LIST_LINES / 2;
    } else if (mark) {
        center = mark;
    } else {
        /* not running: around the first line of the entry */
        for (uint32_t i = 0; i < d->n_insts; i++)
            if (d->reg[d->ins[i].region_index].entry == (int)d->entry && d->ins[i].line &&
                (!center || d->ins[i].line < center))
                center = d->ins[i].line;
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
    const tfvm_debug_ctx *here = tfvm_debug_act_ctx(tfvm_debug_paused(d->vm)), *c = here;
    tfvm_debug_ctx_info ci;
    for (; c; c = tfvm_debug_parent(c)) {
        tfvm_debug_ctx_get(c, &ci);
        if (ci.kind == TFVM_CTX_CALL)
            break;
    }
    if (!c) {
        tb_buf b;
        tb_init(&b);
        tb_printf(&b, "error: finish: the current tag ");
        put_tag(&b, d, here);
        tb_printf(&b, " is not inside a call");
        emit(&b);
        tb_free(&b);
        return true;
    }
    d->fctx = c;
    d->fserial = ci.serial;
    d->fsite = ci.site;
    d->freturned = 0;
    return_index(d, ci.site, DBG_NONE, &d->n_fvals);
    d->fvals = calloc(d->n_fvals + 1, sizeof *d->fvals);
    if (!d->fvals) {
        derr("out of memory");
        return true;
    }
    tb_buf b;
    tb_init(&b);
    tb_printf(&b, "Run till exit from ");
    put_tag(&b, d, c);
    emit(&b);
    tb_free(&b);
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
    const char *colon = strrchr(what, ':');
    uint64_t line;
    if (colon && parse_u64_text(colon + 1, &line)) {
        size_t flen = (size_t)(colon - what);
        const char *src = tfvm_program_source(d->prog);
        if (flen && src && !(strlen(src) == flen && strncmp(src, what, flen) == 0) &&
            !(strlen(base_name(src)) == flen && strncmp(base_name(src), what, flen) == 0)) {
            derr("no source file '%.*s' (the program's source is %s)", (int)flen, what, src);
            return false;
        }
        uint32_t n = 0;
        for (uint32_t i = 0; i < d->n_insts; i++)
            n += d->ins[i].line == line;
        if (line == 0 || line > UINT32_MAX || n == 0) {
            derr("no instruction comes from line %" PRIu64 "%s%s", line, src ? " of " : "", src ? src : "");
            return false;
        }
        x->line = (uint32_t)line;
        return true;
    }
    int r = find_region(d, what, strlen(what));
    if (r >= 0 && d->rkind[r] == R_FUNC) {
        x->func = (uint32_t)r;
        return true;
    }
    if (r >= 0 && d->rkind[r] == R_ENTRY) {
        derr("%s is an entry point: nothing calls it (break at one of its lines or instructions)", what);
        return false;
    }
    return resolve(d, what, &x->inst, &x->op, x->kind == BP_WATCH);
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
    x->func = DBG_NONE;
    x->inst = DBG_NONE;
    x->op = NULL;
    if (kind == BP_WATCH && dv_is_var(d->vars, what)) { /* a source variable: stop when its value arrives */
        if (cond) {
            derr("watch %s: a variable's watchpoint takes no 'if PATTERN'", what);
            return;
        }
        if (var_watch(d, what)) {
            derr("watch %s: watchpoint %d watches it already", what, var_watch(d, what)->id);
            return;
        }
        if (!(x->var = strdup(what))) {
            derr("out of memory");
            return;
        }
        dv_watch(d->vars, what, 1);
    } else if (!resolve_where(d, what, x) || (cond && !parse_pattern(d, cond, x))) {
        bp_free(x);
        return;
    }
    x->id = ++d->next_id;
    d->n_bps++;
    tb_buf b;
    tb_init(&b);
    tb_printf(&b, "%s %d: ", kind == BP_BREAK ? "Breakpoint" : "Watchpoint", x->id);
    put_bp_what(&b, d, x);
    emit(&b);
    tb_free(&b);
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
        for (size_t k = 0; k < d->n_bps; k++) {
            if (d->bps[k].var)
                dv_watch(d->vars, d->bps[k].var, -1);
            bp_free(&d->bps[k]);
        }
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
        if (d->bps[k].var)
            dv_watch(d->vars, d->bps[k].var, -1);
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
    tb_buf b;
    tb_init(&b);
    for (size_t k = 0; k < d->n_bps; k++) {
        const bp *x = &d->bps[k];
        tb_printf(&b, "%-3d %s  ", x->id, x->kind == BP_BREAK ? "break" : "watch");
        put_bp_what(&b, d, x);
        tb_printf(&b, "  (hit %" PRIu64 " time%s)", x->hits, x->hits == 1 ? "" : "s");
        emit(&b);
    }
    tb_free(&b);
    return true;
}

typedef struct ready_ctx {
    dbg *d;
    tb_buf *b;
    size_t k;
} ready_ctx;

static void print_ready(void *ud, const tfvm_debug_act *a)
{
    ready_ctx *r = ud;
    tb_printf(r->b, "  %zu. ", ++r->k);
    put_firing(r->b, r->d, a, false);
    emit(r->b);
}

static bool cmd_ready(dbg *d, char *args)
{
    if (!need_args_none("ready", args) || !need_state(d))
        return true;
    tb_buf b;
    tb_init(&b);
    size_t n = tfvm_debug_ready(d->vm, NULL, NULL);
    printf("Ready to fire (%zu, next first):\n", n);
    if (!n)
        printf("  none\n");
    ready_ctx r = {d, &b, 0};
    tfvm_debug_ready(d->vm, print_ready, &r);
    /* Tokens held back by a loop's parallel=N bound, by loop instance. */
    const tfvm_debug_ctx **all;
    size_t nc, deferred = 0;
    if (tfvm_debug_contexts(d->vm, &all, &nc) != TFVM_OK) {
        derr("out of memory");
        tb_free(&b);
        return true;
    }
    for (size_t k = 0; k < nc; k++)
        for (uint32_t f = 0; f < tfvm_debug_loop_slots(d->vm, all[k]); f++) {
            tfvm_debug_loop_info l;
            if (!tfvm_debug_loop(d->vm, all[k], f, &l))
                continue;
            for (uint32_t j = 0; j < l.deferred; j++) {
                if (!deferred++)
                    printf("Waiting for the parallel=%u bound of their loop:\n", l.parallel);
                char lab[160];
                snprintf(lab, sizeof lab, "%s#%" PRIu64, region_name(d, l.frame), l.next);
                uint32_t inst = 0;
                tfvm_value v;
                tfvm_debug_token tok = tfvm_debug_loop_deferred(d->vm, all[k], f, j, &inst, &v);
                tb_printf(&b, "  ");
                put_inst(&b, d, inst);
                tb_printf(&b, " into ");
                put_tag_plus(&b, d, all[k], lab);
                tb_printf(&b, ": ");
                put_value(&b, tok, &v, true);
                emit(&b);
            }
        }
    tfvm_debug_contexts_free(d->vm, all, nc);
    tb_free(&b);
    return true;
}

/* Producers of input `port` of instruction i, as .tfasm writes them. */
static void put_producers(tb_buf *b, const dbg *d, uint32_t i, uint32_t port)
{
    if ((int)port == d->ins[i].const_port) {
        tfvm_value v;
        tb_printf(b, "the constant ");
        put_value(b, tfvm_debug_inst_const(d->vm, i, &v) ? TFVM_TOKEN_LIVE : TFVM_TOKEN_NONE, &v, true);
        return;
    }
    bool first = true;
    for (uint32_t s = 0; s < d->n_insts; s++) {
        for (uint32_t k = d->edge_at[s]; k < d->edge_at[s + 1]; k++) {
            const tfvm_edge_info *e = &d->edge[k];
            if (e->inst != i || e->port != port)
                continue;
            tb_printf(b, "%s", first ? "" : ", ");
            /* qualified when in another region (a RETURN's producers are in the callee) */
            put_inst_ref(b, d, s, d->ins[i].region_index);
            if (e->out)
                tb_printf(b, ":%u", e->out);
            first = false;
        }
    }
    if (first)
        tb_printf(b, "nothing");
}

/* A waiting input's value; a waiting MERGE keeps none: its inputs are dead. */
static void put_waiting(tb_buf *b, const dbg *d, const tfvm_debug_ctx *c, uint32_t i, uint32_t port)
{
    tfvm_value v;
    tfvm_debug_token tok = tfvm_debug_port_get(d->vm, c, i, port, &v);
    put_value(b, tok == TFVM_TOKEN_NONE ? TFVM_TOKEN_DEAD : tok, &v, true);
}

/* One partial (or complete) match: which ports have arrived, with what, and
 * which are missing, with who would send them. */
static void put_match(tb_buf *b, const dbg *d, const tfvm_debug_ctx *c, uint32_t i, tfvm_debug_match m)
{
    const tfvm_inst_info *in = &d->ins[i];
    uint32_t ports = n_ports(d, i);
    put_inst(b, d, i);
    tb_printf(b, " at ");
    put_tag(b, d, c);
    if (m == TFVM_MATCH_FIRED) {
        tb_printf(b, ": fired at this tag (later tokens are absorbed)");
        return;
    }
    tb_printf(b, m == TFVM_MATCH_READY ? ": complete, ready to fire;" : ":");
    const char *sep = " has ";
    for (uint32_t k = 0; k < ports; k++) {
        if (!tfvm_debug_port_arrived(d->vm, c, i, k))
            continue;
        tb_printf(b, "%s", sep);
        sep = ", ";
        if (k < in->n_in) {
            tb_printf(b, "%u = ", k);
            put_waiting(b, d, c, i, k);
            if ((int)k == in->const_port)
                tb_printf(b, " (constant)");
        } else {
            put_port_name(b, in, k);
        }
    }
    sep = "; missing ";
    for (uint32_t k = 0; k < ports; k++) {
        if (tfvm_debug_port_arrived(d->vm, c, i, k))
            continue;
        tb_printf(b, "%s", sep);
        sep = "; ";
        put_port_name(b, in, k);
        tb_printf(b, " (from ");
        put_producers(b, d, i, k);
        tb_printf(b, ")");
    }
}

static uint32_t ctx_region(const tfvm_debug_ctx *c)
{
    tfvm_debug_ctx_info ci;
    tfvm_debug_ctx_get(c, &ci);
    return ci.region;
}

static bool cmd_match(dbg *d, char *args)
{
    uint32_t want = DBG_NONE;
    const char *op = NULL;
    if (*args) {
        if (!resolve(d, args, &want, &op, false))
            return true;
        if (want != DBG_NONE && !tfvm_debug_inst_matched(d->vm, want)) {
            tb_buf b;
            tb_init(&b);
            put_inst(&b, d, want);
            tb_printf(&b, " waits for one token only: it fires as soon as that arrives (see `ready`)");
            emit(&b);
            tb_free(&b);
            return true;
        }
    }
    if (!need_state(d))
        return true;
    const tfvm_debug_ctx **all;
    size_t n, shown = 0;
    if (tfvm_debug_contexts(d->vm, &all, &n) != TFVM_OK) {
        derr("out of memory");
        return true;
    }
    tb_buf b;
    tb_init(&b);
    for (size_t k = 0; k < n; k++) {
        const tfvm_region_info *rg = &d->reg[ctx_region(all[k])];
        for (uint32_t i = rg->first_inst; i < rg->end_inst; i++) {
            if (want != DBG_NONE ? i != want : op && strcmp(d->ins[i].op, op) != 0)
                continue;
            tfvm_debug_match m = tfvm_debug_match_state(d->vm, all[k], i);
            /* all: the partial matches; one instruction (or opcode): every state */
            if (m == TFVM_MATCH_NONE || (m != TFVM_MATCH_WAITING && !*args))
                continue;
            put_match(&b, d, all[k], i, m);
            emit(&b);
            shown++;
        }
    }
    if (!shown)
        printf(*args ? "No tokens waiting at %s.\n" : "No partial matches.%s\n", *args ? args : "");
    tfvm_debug_contexts_free(d->vm, all, n);
    tb_free(&b);
    return true;
}

/* tokens: every token waiting in a partial match (an instruction that has
 * some inputs and lacks others), oldest context first: what `ready` does not
 * show, because none of them can fire yet. */
static bool cmd_tokens(dbg *d, char *args)
{
    if (!need_args_none("tokens", args) || !need_state(d))
        return true;
    const tfvm_debug_ctx **all;
    size_t n, shown = 0;
    if (tfvm_debug_contexts(d->vm, &all, &n) != TFVM_OK) {
        derr("out of memory");
        return true;
    }
    tb_buf b;
    tb_init(&b);
    for (size_t k = 0; k < n; k++) {
        const tfvm_region_info *rg = &d->reg[ctx_region(all[k])];
        for (uint32_t i = rg->first_inst; i < rg->end_inst; i++) {
            if (tfvm_debug_match_state(d->vm, all[k], i) != TFVM_MATCH_WAITING)
                continue;
            const tfvm_inst_info *in = &d->ins[i];
            for (uint32_t port = 0; port < n_ports(d, i); port++) {
                if ((int)port == in->const_port || !tfvm_debug_port_arrived(d->vm, all[k], i, port))
                    continue;
                if (!shown++)
                    printf("Tokens waiting for the other inputs of their instruction (oldest tag first):\n");
                tb_printf(&b, "  ");
                put_inst_ref(&b, d, i, DBG_NONE);
                put_port(&b, in, port);
                tb_printf(&b, " at ");
                put_tag(&b, d, all[k]);
                tb_printf(&b, " = ");
                put_waiting(&b, d, all[k], i, port);
                const char *sep = ", waits for ";
                for (uint32_t q = 0; q < n_ports(d, i); q++)
                    if (!tfvm_debug_port_arrived(d->vm, all[k], i, q)) {
                        tb_printf(&b, "%s", sep);
                        sep = ", ";
                        put_port(&b, in, q);
                    }
                emit(&b);
            }
        }
    }
    if (!shown)
        printf("No tokens waiting in partial matches (`ready` lists what fires next).\n");
    tfvm_debug_contexts_free(d->vm, all, n);
    tb_free(&b);
    return true;
}

typedef struct count_ready {
    const tfvm_debug_ctx *c;
    size_t n;
} count_ready;

static void count_ready_at(void *ud, const tfvm_debug_act *a)
{
    count_ready *r = ud;
    r->n += tfvm_debug_act_ctx(a) == r->c;
}

static void print_ctx_tree(dbg *d, const tfvm_debug_ctx **all, size_t n, const tfvm_debug_ctx *c, int depth,
                           tb_buf *b)
{
    count_ready r = {c, 0};
    tfvm_debug_ready(d->vm, count_ready_at, &r);
    tfvm_debug_ctx_info ci;
    tfvm_debug_ctx_get(c, &ci);
    tb_printf(b, "%*s", depth * 2, "");
    put_tag(b, d, c);
    if (ci.kind == TFVM_CTX_ROOT)
        tb_printf(b, " entry %s", d->e.name);
    tb_printf(b, ": %zu waiting, %zu ready", waiting_in(d, c), r.n);
    emit(b);
    /* loop instances, each with its live iterations */
    for (uint32_t f = 0; f < tfvm_debug_loop_slots(d->vm, c); f++) {
        tfvm_debug_loop_info l;
        if (!tfvm_debug_loop(d->vm, c, f, &l))
            continue;
        tb_printf(b, "%*sloop %s: %" PRIu64 " iteration%s started, %" PRIu64 " live", depth * 2 + 2, "",
                  region_name(d, l.frame), l.started, l.started == 1 ? "" : "s", l.live);
        if (l.deferred)
            tb_printf(b, ", %u token%s deferred", l.deferred, l.deferred == 1 ? "" : "s");
        emit(b);
        for (size_t k = 0; k < n; k++) {
            tfvm_debug_ctx_info ki;
            tfvm_debug_ctx_get(all[k], &ki);
            if (tfvm_debug_parent(all[k]) == c && ki.kind == TFVM_CTX_ITER && ki.region == l.frame)
                print_ctx_tree(d, all, n, all[k], depth + 2, b);
        }
    }
    for (size_t k = 0; k < n; k++) {
        tfvm_debug_ctx_info ki;
        tfvm_debug_ctx_get(all[k], &ki);
        if (tfvm_debug_parent(all[k]) == c && ki.kind == TFVM_CTX_CALL)
            print_ctx_tree(d, all, n, all[k], depth + 1, b);
    }
}

static bool cmd_contexts(dbg *d, char *args)
{
    if (!need_args_none("contexts", args) || !need_state(d))
        return true;
    const tfvm_debug_ctx **all;
    size_t n;
    if (tfvm_debug_contexts(d->vm, &all, &n) != TFVM_OK) {
        derr("out of memory");
        return true;
    }
    uint64_t n_ctx, n_loops;
    tfvm_debug_live(d->vm, &n_ctx, &n_loops);
    tb_buf b;
    tb_init(&b);
    for (size_t k = 0; k < n; k++)
        if (!tfvm_debug_parent(all[k]))
            print_ctx_tree(d, all, n, all[k], 0, &b);
    printf("%" PRIu64 " context%s, %" PRIu64 " loop instance%s\n", n_ctx, n_ctx == 1 ? "" : "s", n_loops,
           n_loops == 1 ? "" : "s");
    tb_free(&b);
    tfvm_debug_contexts_free(d->vm, all, n);
    return true;
}

/* A call's (or the entry's) arguments, when the variable table names them:
 * "; args: x = 2, y = 3". */
static void put_args(tb_buf *b, dbg *d, const tfvm_debug_ctx *c)
{
    tb_buf a;
    tb_init(&a);
    dv_call_args(d->vars, d->vm, c, &a);
    if (a.len)
        tb_printf(b, "; args: %s", a.data);
    tb_free(&a);
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
    const tfvm_debug_act *a = tfvm_debug_paused(d->vm);
    uint32_t ai = tfvm_debug_act_inst(a);
    tb_buf b;
    tb_init(&b);
    tb_printf(&b, "#0  ");
    put_inst(&b, d, ai);
    tb_printf(&b, " at ");
    put_tag(&b, d, tfvm_debug_act_ctx(a));
    put_loc(&b, &d->ins[ai]);
    emit(&b);
    int depth = 1;
    for (const tfvm_debug_ctx *c = tfvm_debug_act_ctx(a); c; c = tfvm_debug_parent(c), depth++) {
        tfvm_debug_ctx_info ci;
        tfvm_debug_ctx_get(c, &ci);
        tb_printf(&b, "#%-2d ", depth);
        if (ci.kind == TFVM_CTX_ROOT) {
            tb_printf(&b, "[] entry %s", d->e.name);
            put_args(&b, d, c);
            emit(&b);
            break;
        }
        uint32_t by = DBG_NONE;
        if (ci.kind == TFVM_CTX_CALL) {
            const tfvm_site_info *s = &d->site[ci.site];
            for (uint32_t i = 0; i < d->n_insts && by == DBG_NONE; i++)
                if (op_is(d, i, "CALL") && d->ins[i].attr == ci.site)
                    by = i;
            char lab[160];
            tb_printf(&b, "%s: %s called from its call site %u, ", tfvm_site_label(d->prog, ci.site, lab, sizeof lab),
                      region_name(d, s->callee), s->id);
            if (by != DBG_NONE) {
                put_inst(&b, d, by);
                tb_printf(&b, " in ");
                put_tag(&b, d, tfvm_debug_parent(c));
                put_loc(&b, &d->ins[by]);
            }
            put_args(&b, d, c);
        } else {
            /* where the loop is in the source: its predicate (LOOPCOND), else its first ENTER */
            for (uint32_t i = 0; i < d->n_insts && by == DBG_NONE; i++)
                if (op_is(d, i, "LOOPCOND") && d->ins[i].region_index == ci.region)
                    by = i;
            for (uint32_t i = 0; i < d->n_insts && by == DBG_NONE; i++)
                if (op_is(d, i, "ENTER") && d->ins[i].attr == ci.region)
                    by = i;
            tb_printf(&b, "%s#%" PRIu64 ": iteration %" PRIu64 " of loop %s", region_name(d, ci.region), ci.iter,
                      ci.iter, region_name(d, ci.region));
            if (by != DBG_NONE)
                put_loc(&b, &d->ins[by]);
        }
        emit(&b);
    }
    tb_free(&b);
    return true;
}

/* The values waiting on i's inputs now, in full (tensors NumPy-like,
 * summarised past 1000 elements): in the paused activation when it is i,
 * else at the innermost enclosing tag of the paused one where i lives. */
static void print_values(const dbg *d, uint32_t i, tb_buf *b)
{
    const tfvm_inst_info *in = &d->ins[i];
    const tfvm_debug_act *a = tfvm_debug_paused(d->vm);
    if (d->run == RUN_NONE || !a || in->n_in == 0)
        return;
    const tfvm_debug_ctx *c = tfvm_debug_act_ctx(a);
    while (c && ctx_region(c) != in->region_index)
        c = tfvm_debug_parent(c);
    if (!c)
        return;
    bool here = tfvm_debug_act_inst(a) == i;
    tb_printf(b, "  %s at ", here ? "about to fire" : "now");
    put_tag(b, d, c);
    tb_printf(b, ":");
    emit(b);
    bool any = false;
    for (uint32_t k = 0; k < in->n_in; k++) {
        tfvm_value v;
        tfvm_debug_token tok = here                                 ? tfvm_debug_act_input(d->vm, a, k, &v)
                               : tfvm_debug_inst_matched(d->vm, i) ? tfvm_debug_port_get(d->vm, c, i, k, &v)
                                                                   : TFVM_TOKEN_NONE;
        if (tok == TFVM_TOKEN_NONE)
            continue;
        tb_printf(b, "    input %u = ", k);
        put_value(b, tok, &v, false);
        emit(b);
        any = true;
    }
    if (!any) {
        tb_printf(b, "    no input values held%s", here ? "" : " (it has not received tokens at this tag)");
        emit(b);
    }
}

/* Instruction i as `tfvm dis` writes it: the one instruction printer. */
static void put_dis(tb_buf *b, const dbg *d, uint32_t i)
{
    char small[256];
    size_t n = tfvm_inst_format(d->prog, i, small, sizeof small);
    if (n < sizeof small) {
        tb_append(b, small, n);
        return;
    }
    char *big = malloc(n + 1);
    if (!big) {
        b->failed = true;
        return;
    }
    tfvm_inst_format(d->prog, i, big, n + 1);
    tb_append(b, big, n);
    free(big);
}

static void print_one_inst(const dbg *d, uint32_t i)
{
    const tfvm_inst_info *in = &d->ins[i];
    uint32_t r = in->region_index;
    tb_buf b;
    tb_init(&b);
    put_dis(&b, d, i);
    emit(&b);
    tb_printf(&b, "  instruction %%%u in %s %s", i, region_kind_name(d->rkind[r]), region_name(d, r));
    if (d->rkind[r] == R_LOOP)
        tb_printf(&b, " (in %s)", region_name(d, d->reg[r].parent));
    if (in->line)
        tb_printf(&b, ", source line %u column %u", in->line, in->col);
    if (in->origin)
        tb_printf(&b, ", from node '%s' (%s)", in->origin, in->origin_op ? in->origin_op : "?");
    emit(&b);
    tb_printf(&b, "  %s: %s", in->op, in->synopsis);
    emit(&b);
    for (uint32_t k = 0; k < n_ports(d, i); k++) {
        tb_printf(&b, "  input ");
        put_port_name(&b, in, k);
        tb_printf(&b, " <- ");
        put_producers(&b, d, i, k);
        emit(&b);
    }
    if (op_is(d, i, "RESULT") && d->reg[r].entry >= 0) {
        tfvm_entry_info e;
        if (tfvm_program_entry(d->prog, (size_t)d->reg[r].entry, &e) == TFVM_OK && in->attr < e.n_results) {
            tb_printf(&b, "  output: result %u '%s' of entry %s", in->attr, e.results[in->attr].name, e.name);
            emit(&b);
        }
    }
    for (uint32_t o = 0; o < in->n_out; o++) {
        char nb[16];
        tb_printf(&b, "  %s ->", in->n_out > 1 ? output_name(d, i, o, nb, sizeof nb) : "output");
        bool any = false;
        for (uint32_t k = d->edge_at[i]; k < d->edge_at[i + 1]; k++) {
            const tfvm_edge_info *e = &d->edge[k];
            if (e->out != o)
                continue;
            tb_printf(&b, "%s ", any ? "," : "");
            put_inst_ref(&b, d, e->inst, r);
            put_port(&b, &d->ins[e->inst], e->port);
            any = true;
        }
        if (!any)
            tb_printf(&b, " nothing");
        emit(&b);
    }
    print_values(d, i, &b);
    tb_free(&b);
}

/* The context the paused run is at, or NULL. */
static const tfvm_debug_ctx *current_ctx(const dbg *d)
{
    const tfvm_debug_act *a = d->run == RUN_ACTIVE ? tfvm_debug_paused(d->vm) : NULL;
    return a ? tfvm_debug_act_ctx(a) : NULL;
}

/* print NAME or NAME@TAG of a source variable; false when args is none. */
static bool print_var(dbg *d, char *args)
{
    char *at = strstr(args, "@["); /* a model's tensor name may hold an '@' */
    if (at)
        *at = '\0';
    bool is = dv_is_var(d->vars, args);
    if (!is && at)
        *at = '@';
    if (!is)
        return false;
    tb_buf b;
    tb_init(&b);
    if (!dv_print(d->vars, d->vm, current_ctx(d), args, at ? at + 1 : NULL, &b))
        derr("%s", b.data ? b.data : "out of memory");
    else
        emit(&b);
    tb_free(&b);
    return true;
}

static bool cmd_print(dbg *d, char *args)
{
    if (!*args) {
        derr("print needs a variable, an instruction or an opcode: print NAME[@TAG] or print WHAT (NAME, "
             "REGION.NAME, %%N or OPCODE)");
        return true;
    }
    if (print_var(d, args))
        return true;
    uint32_t i;
    const char *op;
    if (!resolve(d, args, &i, &op, true))
        return true;
    if (i != DBG_NONE) {
        print_one_inst(d, i);
        return true;
    }
    size_t n = 0;
    tb_buf b;
    tb_init(&b);
    for (uint32_t k = 0; k < d->n_insts; k++)
        if (strcmp(d->ins[k].op, op) == 0) {
            uint32_t r = d->ins[k].region_index;
            tb_printf(&b, "%%%-4u %s %s: ", k, region_kind_name(d->rkind[r]), region_name(d, r));
            put_dis(&b, d, k);
            emit(&b);
            n++;
        }
    printf("%zu %s instruction%s\n", n, op, n == 1 ? "" : "s");
    tb_free(&b);
    return true;
}

static bool cmd_info(dbg *d, char *args)
{
    bool args_ = strcmp(args, "args") == 0;
    if (!args_ && strcmp(args, "locals") != 0) {
        derr("info needs what to show: info locals or info args");
        return true;
    }
    if (!current_ctx(d)) {
        derr("the program is not running (use run, step or restart)");
        return true;
    }
    tb_buf b;
    tb_init(&b);
    dv_info(d->vars, d->vm, current_ctx(d), args_, &b);
    emit(&b);
    tb_free(&b);
    return true;
}

static bool cmd_display(dbg *d, char *args)
{
    if (!*args) {
        show_displays(d);
        if (!d->n_displays)
            printf("No displays.\n");
        return true;
    }
    if (!dv_is_var(d->vars, args)) {
        derr("no variable named '%s'", args);
        return true;
    }
    char **m = realloc(d->displays, (d->n_displays + 1) * sizeof *m);
    if (!m || !(m[d->n_displays] = strdup(args))) {
        if (m)
            d->displays = m;
        derr("out of memory");
        return true;
    }
    d->displays = m;
    d->n_displays++;
    tb_buf b;
    tb_init(&b);
    tb_printf(&b, "%zu: ", d->n_displays);
    if (current_ctx(d))
        dv_print(d->vars, d->vm, current_ctx(d), args, NULL, &b);
    else
        tb_printf(&b, "%s (shown at every stop)", args);
    emit(&b);
    tb_free(&b);
    return true;
}

static bool cmd_undisplay(dbg *d, char *args)
{
    if (!*args) {
        printf("Deleted all displays (%zu)\n", d->n_displays);
        while (d->n_displays)
            free(d->displays[--d->n_displays]);
        return true;
    }
    uint64_t k;
    if (!parse_u64_text(args, &k) || k == 0 || k > d->n_displays) {
        derr("no display %s (display lists them)", args);
        return true;
    }
    printf("Deleted display %" PRIu64 ": %s\n", k, d->displays[k - 1]);
    free(d->displays[k - 1]);
    memmove(&d->displays[k - 1], &d->displays[k], (d->n_displays - k) * sizeof *d->displays);
    d->n_displays--;
    return true;
}

static bool cmd_stats(dbg *d, char *args)
{
    if (!need_args_none("stats", args))
        return true;
    tfvm_stats s;
    if (d->run == RUN_NONE)
        tfvm_vm_stats(d->vm, &s); /* the last finished run */
    else
        tfvm_debug_stats(d->vm, &s);
    printf("fired %" PRIu64 ", tokens %" PRIu64 ", matches %" PRIu64 ", contexts created %" PRIu64
           ", contexts peak %" PRIu64 "\n",
           s.fired, s.tokens, s.matches, s.contexts_created, s.contexts_peak);
    if (d->run != RUN_NONE) {
        uint64_t n_ctx, n_loops;
        tfvm_debug_live(d->vm, &n_ctx, &n_loops);
        size_t w = count_waiting(d);
        printf("live now: %" PRIu64 " context%s, %" PRIu64 " loop instance%s, %zu ready, %zu partial match%s\n", n_ctx,
               n_ctx == 1 ? "" : "s", n_loops, n_loops == 1 ? "" : "s", tfvm_debug_ready(d->vm, NULL, NULL), w,
               w == 1 ? "" : "es");
    }
    return true;
}

/* queues [CHANNEL]: every channel on one line (put_chan); one channel in
 * full: each queued value with its number, each waiting FEED. */
static bool cmd_queues(dbg *d, char *args)
{
    size_t n = tfvm_debug_channels(d->vm);
    if (!n) {
        printf("The program feeds and fetches nothing (no FEED or FETCH instructions).\n");
        return true;
    }
    size_t only = SIZE_MAX;
    if (*args) {
        for (size_t k = 0; k < n && only == SIZE_MAX; k++) {
            tfvm_debug_chan_info c;
            if (tfvm_debug_channel(d->vm, k, &c) == TFVM_OK && strcmp(c.name, args) == 0)
                only = k;
        }
        if (only == SIZE_MAX) {
            derr("no channel named '%s' (`queues` lists them)", args);
            return true;
        }
    }
    if (!need_state(d))
        return true;
    tb_buf b;
    tb_init(&b);
    for (size_t k = 0; k < n; k++) {
        if (only != SIZE_MAX && k != only)
            continue;
        put_chan(&b, d, k, only == SIZE_MAX);
        emit(&b);
        tfvm_debug_chan_info c;
        if (only == SIZE_MAX || tfvm_debug_channel(d->vm, k, &c) != TFVM_OK)
            continue;
        for (size_t j = 0; j < c.queued; j++) {
            tb_printf(&b, "  #%" PRIu64 " = ", chan_number(&c, j));
            put_chan_value(&b, d, k, j, false);
            emit(&b);
        }
        const tfvm_debug_ctx *ctx;
        uint32_t inst;
        for (size_t j = 0; tfvm_debug_chan_waiting(d->vm, k, j, &ctx, &inst); j++) {
            tb_printf(&b, "  waiting: ");
            put_inst(&b, d, inst);
            tb_printf(&b, " at ");
            put_tag(&b, d, ctx);
            tb_printf(&b, " for #%" PRIu64, c.count + j + 1);
            emit(&b);
        }
    }
    tb_free(&b);
    return true;
}

/* feed CHANNEL V1[,V2...]: more values for a FEED channel of the paused run
 * (until it starts again: --feed's values are what a start queues). */
static bool cmd_feed(dbg *d, char *args)
{
    char *name = args, *vals = args;
    while (*vals && !isspace((unsigned char)*vals))
        vals++;
    if (*vals)
        *vals++ = '\0';
    while (isspace((unsigned char)*vals))
        vals++;
    if (!*name || !*vals) {
        derr("feed needs a channel and a value: feed CHANNEL V1[,V2...]");
        return true;
    }
    char msg[512];
    int k = find_feed_chan(d, name, strlen(name), msg, sizeof msg);
    if (k < 0) {
        derr("feed %s: %s", name, msg);
        return true;
    }
    if (!need_active(d, false))
        return true;
    feed_arg f = {0};
    if (!parse_feed_list(d, (size_t)k, vals, &f, msg, sizeof msg)) {
        derr("feed %s: %s", name, msg);
        feed_arg_free(&f);
        return true;
    }
    for (size_t j = 0; j < f.n; j++)
        if (tfvm_debug_feed(d->vm, f.name, &f.vals[j]) != TFVM_OK) {
            derr("feed %s: %s", name, tfvm_errmsg(d->vm));
            break;
        }
    feed_arg_free(&f);
    tb_buf b;
    tb_init(&b);
    put_chan(&b, d, (size_t)k, true);
    emit(&b);
    tb_free(&b);
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
    const char *more; /* `help COMMAND`: the command in full, lines ending in \n */
};

static const dbg_cmd dbg_cmds[] = {
    {"run", "r", cmd_run, "run", "start from the beginning; stop at a breakpoint or the end",
         "Starts the run from the beginning (again, if one is going): queues the\n"
         "--feed values, then fires until a breakpoint, the end, a stuck run or an\n"
         "error. A run that finishes prints its results (Run finished: r0 = 5) and\n"
         "is gone; a stuck or failed one is kept for match, contexts, tokens, ready\n"
         "and stats.\n"},
    {"continue", "c", cmd_continue, "continue", "go on to the next breakpoint or the end (starts a run)",
         "Goes on to the next breakpoint or the end; starts the run when none is\n"
         "going. Watchpoints print their firings on the way. An empty line repeats\n"
         "it.\n"},
    {"step", "s", cmd_step, "step [N]", "fire the next N instructions (default 1), printing each",
         "Fires the next N activations (default 1), printing each firing in the\n"
         "one-line format (name (OP) at [tag]: in VALUES -> consumers); stops early\n"
         "at a breakpoint. An empty line repeats it.\n"},
    {"next", "n", cmd_next, "next", "run until an instruction of another source line is about to fire",
         "Runs until an instruction of another source line is about to fire\n"
         "(instructions without a line do not count) and prints that line and the\n"
         "firing. Unlike gdb's next it may stop inside a call made from the line:\n"
         "firings of many tags interleave.\n"},
    {"finish", "fin", cmd_finish, "finish", "run until the current call returns; print what it returned",
         "Runs until the call the current tag is in has returned (all its RETURNs\n"
         "fired, or its context is gone) and prints the returned values. An empty\n"
         "line repeats it.\n"},
    {"break", "b", cmd_break, "break WHERE [if PATTERN]", "stop before WHERE fires (at tags matching PATTERN)",
         "Stops before WHERE fires, at tags matching PATTERN. WHERE is WHAT,\n"
         "FILE:LINE (every instruction compiled from that source line; FILE is the\n"
         "program's source file, its whole name or its last part), or a function\n"
         "name (every CALL of it: the firing shows the argument values and the new\n"
         "tag).\n"},
    {"watch", "w", cmd_watch, "watch WHAT [if PATTERN]", "print every firing of WHAT; a variable: stop when it changes",
         "watch NAME, a source variable: stops when a value of it arrives at a tag\n"
         "(the first token at each tag, or one that differs from the last), before\n"
         "the instruction it arrives at fires: Watchpoint 2: i = 1 at\n"
         "[main_for_i#1]. watch WHAT, an instruction or opcode: prints every firing\n"
         "of WHAT ([watch N] ...) at tags matching PATTERN, and goes on.\n"},
    {"delete", "d", cmd_delete, "delete [N...]", "delete breakpoints and watchpoints (all without N)",
         "Deletes breakpoints and watchpoints by number (as breakpoints lists them);\n"
         "all of them without N.\n"},
    {"breakpoints", "bl", cmd_breakpoints, "breakpoints", "list breakpoints and watchpoints, with hit counts",
         "Lists breakpoints and watchpoints with their numbers, patterns and how\n"
         "often each was hit.\n"},
    {"ready", "", cmd_ready, "ready", "ready activations (next first), tokens held by a loop bound",
         "The ready activations in the order they would fire (the current one\n"
         "first), and the tokens a loop's parallel=N bound holds back.\n"},
    {"tokens", "t", cmd_tokens, "tokens", "tokens waiting in partial matches for their other inputs",
         "The tokens waiting in partial matches, one per line: fib.add_12_39[1] at\n"
         "[fib@2] = 2, waits for [0] (the instruction and input port, the tag, the\n"
         "value, the inputs still missing). They cannot fire yet, so ready does not\n"
         "list them.\n"},
    {"match", "m", cmd_match, "match [WHAT]", "partial matches: the inputs each waiting instruction has, lacks",
         "Partial matches: for each waiting instruction and tag, the inputs it has\n"
         "(with values) and those it is missing (with their producers); with WHAT,\n"
         "only that instruction's, complete matches too.\n"},
    {"contexts", "ctx", cmd_contexts, "contexts", "the live tag tree (calls, loops, iterations) with counts",
         "The live tag tree: calls, loop instances (iterations started, live, tokens\n"
         "deferred) and iterations, each with its counts of partial matches and\n"
         "ready activations.\n"},
    {"queues", "", cmd_queues, "queues [CHANNEL]", "FEED/FETCH channels: values queued, taken, made",
         "The FEED and FETCH channels in name order, one line each: feed x (i32): 1\n"
         "queued [7], 2 taken; fetch sum: 2 made [5, 17]. With CHANNEL, that one\n"
         "with each queued value in full (#3 = 7) and each FEED waiting. Needs a run\n"
         "(going, paused, stuck or failed).\n"},
    {"feed", "", cmd_feed, "feed CHANNEL V1[,V2...]", "queue more values on a FEED channel of the paused run",
         "Queues more values on a FEED channel while the run is paused, parsed as\n"
         "--feed parses them (by the channel's type; tensors as @file.npy), after\n"
         "those queued before; prints the channel's queues line. They last until the\n"
         "run starts again.\n"},
    {"where", "bt backtrace", cmd_where, "where", "the current tag as a chain of calls and iterations",
         "The current tag as a chain of calls and iterations, innermost first, each\n"
         "with the instruction that made it and its source position; a call (and\n"
         "the entry) with its arguments' values when the program names them (its\n"
         "variable table): ; args: x = 2.\n"},
    {"print", "p", cmd_print, "print WHAT[@TAG]", "a variable's value; an instruction's text, producers, consumers",
         "print NAME, a source variable (a .tfg let, var, parameter or loop variable;\n"
         "an ONNX or TensorFlow tensor): its value at the current tag, or at the\n"
         "innermost enclosing tag where it lives (i = 3 (at [])); NAME@TAG: its value\n"
         "at that tag, [main_for_i#0], as long as the debugger keeps it (the newest\n"
         "1024 tags per variable; after the run ended too). A variable's name comes\n"
         "before an instruction's: REGION.NAME or %N reaches the instruction.\n"
         "print WHAT, an instruction or opcode: the instruction's .tfasm text,\n"
         "region, source position, opcode synopsis, the producers of each input and\n"
         "the consumers of each output. While a run is paused, also the values on its\n"
         "inputs in full: in the current activation when WHAT is the one about to\n"
         "fire (about to fire at [tag]:), else those waiting at the innermost tag\n"
         "around the current one where WHAT lives (now at [tag]:). Tensors print\n"
         "NumPy-like, past 1000 elements summarised by their first and last three\n"
         "along each axis. For an opcode, every instruction of it.\n"},
    {"info", "i", cmd_info, "info locals|args", "the source variables here, or the call's arguments",
         "info locals: every source variable of the current tag's function or loop\n"
         "body with its value at that tag (<no value yet> before one arrives); info\n"
         "args: the arguments of the call the current tag is in (the entry's at the\n"
         "root), as the CALLs passed them. Needs the program's variable table\n"
         "(programs compiled from .tfg, ONNX or TensorFlow have one).\n"},
    {"display", "disp", cmd_display, "display [NAME]", "show variable NAME at every stop (without NAME: now)",
         "Adds NAME, a source variable, to the list shown after every stop, as\n"
         "print NAME shows it (K: i = 3); without NAME, shows the list now.\n"
         "undisplay N removes one.\n"},
    {"undisplay", "", cmd_undisplay, "undisplay [N]", "stop showing display N (all without N)",
         "Removes display N (its number as display shows it; those after it move\n"
         "up one), or every display without N.\n"},
    {"list", "l", cmd_list, "list [LINE|FUNCTION]", "source lines around the current one (again: the next ones)",
         "Ten lines of the program's source file around the current instruction's\n"
         "line (marked =>), around LINE, or from a function's first line; list again\n"
         "shows the next ten. The file is the one the program names (source\n"
         "\"examples/fib.tfg\"), read relative to the working directory, else next to\n"
         "the program file.\n"},
    {"stats", "", cmd_stats, "stats", "counters of the run so far (no times)",
         "Counters of the run so far: fired, tokens, matches, contexts created and\n"
         "peak, and what is live now (no times, so transcripts stay stable).\n"},
    {"restart", "", cmd_restart, "restart", "start again and stop before the first firing",
         "Starts the run again (the --feed values queued anew) and stops before its\n"
         "first firing.\n"},
    {"help", "h ?", cmd_help, "help [COMMAND]", "this list, or one command in full",
         "Lists the commands, or explains COMMAND (a name, an alias or a unique\n"
         "prefix) in full.\n"},
    {"quit", "q exit", cmd_quit, "quit", "leave the debugger (also Ctrl-D)",
         "Leaves the debugger, whatever the run's state; Ctrl-D and the end of input\n"
         "do too (exit status 0).\n"},
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
    for (size_t k = 0; k < (sizeof dbg_cmds / sizeof dbg_cmds[0]); k++)
        if (strcmp(dbg_cmds[k].name, word) == 0 || word_in(word, dbg_cmds[k].aliases))
            return &dbg_cmds[k];
    const dbg_cmd *found = NULL;
    size_t n = strlen(word);
    for (size_t k = 0; k < (sizeof dbg_cmds / sizeof dbg_cmds[0]); k++)
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
        printf("usage: %s\n", c->usage); /* then the command in full (its summary is in `help`) */
        for (const char *l = c->more; *l;) { /* indented like the rest */
            const char *e = strchr(l, '\n');
            printf("  %.*s\n", (int)(e - l), l);
            l = e + 1;
        }
        if (*c->aliases)
            printf("  aliases: %s\n", c->aliases);
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
    for (size_t k = 0; k < (sizeof dbg_cmds / sizeof dbg_cmds[0]); k++) {
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

/* Tab completes the first word from the command names, the channel after
 * `feed` (FEED channels) and `queues`, other later words from instruction
 * names (NAME and REGION.NAME) and opcodes; when nothing can be added and
 * several fit, it lists them. */
typedef struct completion {
    const char *word;
    size_t len;
    char common[128]; /* longest common extension so far */
    size_t n;
    tb_buf list;
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
    for (const char *at = c->list.data; at && (at = strstr(at, full));) { /* offered already (a variable */
        if ((at == c->list.data || at[-1] == ' ') && at[strlen(full)] == ' ') /* named like an instruction) */
            return;
        at += strlen(full);
    }
    if (c->n++ == 0) {
        snprintf(c->common, sizeof c->common, "%s", full + c->len);
    } else {
        size_t k = 0;
        while (c->common[k] && c->common[k] == full[c->len + k])
            k++;
        c->common[k] = '\0';
    }
    if (c->list.len < 2000)
        tb_printf(&c->list, "%s  ", full);
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
    tb_init(&c.list);
    /* the command's name, for what its arguments complete to */
    char word[32] = "";
    const char *w = first;
    size_t wl = 0;
    while (w + wl < li->lastchar && !isspace((unsigned char)w[wl]) && wl + 1 < sizeof word)
        wl++;
    memcpy(word, w, wl);
    word[wl] = '\0';
    bool amb;
    const dbg_cmd *cmd = first == start ? NULL : find_cmd(word, &amb);
    /* only the first argument names a channel */
    bool arg1 = cmd && (cmd->fn == cmd_feed || cmd->fn == cmd_queues);
    for (const char *q = first + wl; arg1 && q < start; q++)
        arg1 = isspace((unsigned char)*q);
    if (first == start) {
        for (size_t k = 0; k < (sizeof dbg_cmds / sizeof dbg_cmds[0]); k++)
            offer(&c, dbg_cmds[k].name, NULL);
    } else if (cmd && (cmd->fn == cmd_feed || cmd->fn == cmd_queues)) {
        for (size_t k = 0; d && arg1 && k < tfvm_debug_channels(d->vm); k++) {
            tfvm_debug_chan_info ci;
            if (tfvm_debug_channel(d->vm, k, &ci) == TFVM_OK && (!ci.fetch || cmd->fn == cmd_queues))
                offer(&c, ci.name, NULL);
        }
    } else if (cmd && cmd->fn == cmd_info) {
        offer(&c, "locals", NULL);
        offer(&c, "args", NULL);
    } else if (d && cmd && cmd->fn == cmd_display) {
        for (size_t k = 0; k < dv_count(d->vars); k++)
            offer(&c, dv_name(d->vars, k), NULL);
    } else if (d) {
        /* print and watch take a source variable too, and every command an
         * instruction or an opcode */
        for (size_t k = 0; cmd && (cmd->fn == cmd_print || cmd->fn == cmd_watch) && k < dv_count(d->vars); k++)
            offer(&c, dv_name(d->vars, k), NULL);
        for (uint32_t i = 0; i < d->n_insts; i++)
            if (d->ins[i].name) {
                offer(&c, d->ins[i].name, NULL);
                offer(&c, d->ins[i].name, region_name(d, d->ins[i].region_index));
            }
        for (size_t o = 0; tfvm_op_name(o); o++)
            offer(&c, tfvm_op_name(o), NULL);
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
    tb_free(&c.list);
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
                                   {NULL, "--outputs", "needs a list of tensor names (a,b:1)"},
                                   {NULL, "--feed", "needs NAME=V1,V2,..."}};
    cli_args o; /* as for `tfvm run`: options before or after FILE; `--` ends them */
    int prc = cli_parse("debug", cli_usage_debug, opts, (sizeof opts / sizeof opts[0]), CLI_FILE_ARGS, argc, argv, &o);
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
    if (!read_program(&d) || !(d.vars = dv_new(d.prog))) {
        fprintf(stderr, "tfvm: out of memory\n");
        goto out;
    }
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
    if ((rc = parse_feeds(&d, &o, 2)) != 0)
        goto out;
    rc = 1;
    d.hook = (tfvm_debug_hook){on_fire, &d};
    tfvm_debug_set_hook(d.vm, &d.hook);

    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: Ctrl-C at the prompt interrupts the read */
    sigaction(SIGINT, &sa, &old);

    tb_buf b;
    tb_init(&b);
    tb_printf(&b, "%s: entry %s(", file, d.e.name);
    char ty[160];
    for (size_t k = 0; k < d.e.n_params; k++)
        tb_printf(&b, cli_param_fmt(d.e.params[k].name), k ? ", " : "", d.e.params[k].name,
                      cli_param_type(&d.e.params[k], ty, sizeof ty), "");
    tb_printf(&b, "), %u instructions in %u regions. Type `help` for the commands.", d.n_insts, d.n_regions);
    emit(&b);
    tb_free(&b);
    fflush(stdout);
    repl(&d);
    sigaction(SIGINT, &old, NULL);
    rc = 0;
out:
    finish_clear(&d);
    for (size_t k = 0; k < d.n_bps; k++)
        bp_free(&d.bps[k]);
    free(d.bps);
    for (size_t k = 0; d.feeds && k < d.n_feeds; k++)
        feed_arg_free(&d.feeds[k]);
    free(d.feeds);
    free(d.chain);
    free(d.src);
    free(d.src_line);
    tfvm_vm_free(d.vm);
    if (d.args)
        for (size_t k = 0; k < d.n_args; k++)
            tfvm_value_release(&d.args[k]);
    free(d.args);
    free_program(&d);
    dv_free(d.vars);
    for (size_t k = 0; k < d.n_displays; k++)
        free(d.displays[k]);
    free(d.displays);
    tfvm_program_free(d.prog);
    free(d.arg_text);
    cli_args_free(&o);
    fflush(stdout);
    return rc;
}
