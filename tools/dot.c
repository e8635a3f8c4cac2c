/* tools/dot.c — `tfvm dot`: a program's one static graph as Graphviz text.
 * Regions are clusters (loop frames nested in their parent), control
 * instructions are drawn apart from compute, edges are labelled by port. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "devices/value.h"
#include "isa/isa.h"
#include "loader/loader.h"
#include "tools/debug.h"
#include "tools/opts.h"
#include "vm/vm.h"

const char *const cli_usage_dot =
    "usage: tfvm dot [options] FILE\n"
    "\n"
    "Writes the program's graph (FILE: .tfvm, .tfasm, .tfg, .onnx or .pb) in Graphviz's dot\n"
    "language: entry, function and loop regions as clusters (loops inside their\n"
    "parent), control instructions (ENTER, EXIT, NEXTITER, SWITCH, MERGE, CALL,\n"
    "RETURN...) as shaded hexagons, compute as boxes, sources and results as\n"
    "houses; each edge is labelled by the input port it feeds (and the output\n"
    "it leaves, for SWITCH and MERGE); control inputs are dashed. Hovering a\n"
    "node in the SVG shows its .tfasm text.\n"
    "    tfvm dot examples/fib.tfg | dot -Tsvg > fib.svg\n"
    "\n"
    "options:\n"
    "  -o OUT                 output file (default: stdout)\n"
    "  --svg                  render to SVG through Graphviz's `dot` (must be in PATH)\n"
    "  -e, --entry NAME       for .tfg: the function compiled as the entry (default: main)\n"
    "  --outputs A,B:1        for .pb: the tensors that become results (default: the\n"
    "                         outputs no node consumes)\n"
    "  -h, --help             show this help\n";

/* A string inside double quotes, escaped for dot. */
static void put_escaped(ut_buf *b, const char *s, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        char c = s[k];
        if (c == '"' || c == '\\')
            ut_buf_printf(b, "\\%c", c);
        else if (c == '\n')
            ut_buf_printf(b, "\\n");
        else
            ut_buf_append(b, &c, 1);
    }
}

/* A scalar constant as `tfvm run` prints it; a tensor as its type. */
static void put_const(ut_buf *b, const isa_const *k)
{
    if (k->rank) {
        ut_buf_printf(b, "%s[", tfvm_dtype_name((tfvm_dtype)k->dtype));
        for (int d = 0; d < k->rank; d++)
            ut_buf_printf(b, "%s%lld", d ? ", " : "", (long long)k->dims[d]);
        ut_buf_printf(b, "]");
        return;
    }
    const unsigned char *p = k->data;
    dev_value v = {.dtype = k->dtype};
    switch ((tfvm_dtype)k->dtype) {
    case TFVM_BOOL: v.u.b = p[0] != 0; break;
    case TFVM_I32: v.u.i32 = (int32_t)ut_le32(p); break;
    case TFVM_I64: v.u.i64 = (int64_t)ut_le64(p); break;
    case TFVM_F32: { uint32_t w = ut_le32(p); memcpy(&v.u.f32, &w, 4); break; }
    case TFVM_F64: { uint64_t w = ut_le64(p); memcpy(&v.u.f64, &w, 8); break; }
    case TFVM_U8: v.u.u8 = p[0]; break;
    case TFVM_I8: v.u.i8 = (int8_t)p[0]; break;
    }
    vm_format_value(&v, b);
}

/* The node's label: name, then opcode and the attribute that says most
 * (the full .tfasm text is the tooltip). */
static void put_label(ut_buf *b, const isa_program *p, uint32_t i)
{
    const isa_inst *in = &p->insts[i];
    char label[160];
    ut_buf_printf(b, "%s\\n%s", isa_inst_label(p, i, label, sizeof label), isa_ops[in->op].name);
    switch (isa_ops[in->op].attr) {
    case ISA_ATTR_INDEX: ut_buf_printf(b, " %u", in->a); break;
    case ISA_ATTR_CONST: ut_buf_printf(b, " "); put_const(b, &p->consts[in->a]); break;
    case ISA_ATTR_ENTER:
        ut_buf_printf(b, " %s%s", p->regions[in->a].name, (in->flags & ISA_FLAG_CONST) ? " const" : "");
        break;
    case ISA_ATTR_FRAME: ut_buf_printf(b, " %s", p->regions[in->a].name); break;
    case ISA_ATTR_SITE: {
        char lab[160];
        ut_buf_printf(b, " %s", isa_site_label(p->regions[p->sites[in->a].callee].name, p->sites[in->a].id, lab, sizeof lab));
        break;
    }
    case ISA_ATTR_DTYPE: ut_buf_printf(b, " %s", tfvm_dtype_name((tfvm_dtype)in->a)); break;
    default: break; /* the rest show in the tooltip */
    }
    int imm = isa_imm_port(in);
    if (imm >= 0) { /* a constant operand: "SUB (_, 1)" */
        ut_buf_printf(b, " (");
        for (uint32_t k = 0; k < in->n_in; k++) {
            ut_buf_printf(b, "%s", k ? ", " : "");
            if ((int)k == imm)
                put_const(b, &p->consts[in->b]);
            else
                ut_buf_printf(b, "_");
        }
        ut_buf_printf(b, ")");
    }
}

static const char *node_style(const isa_inst *in)
{
    switch (isa_ops[in->op].cls) {
    case ISA_CLASS_SOURCE:
        return in->op == ISA_ARG ? "shape=invhouse, fillcolor=\"#dbeafe\"" : "fillcolor=\"#f1f5f9\"";
    case ISA_CLASS_SINK:
        return "shape=house, fillcolor=\"#dbeafe\"";
    case ISA_CLASS_CONTROL:
        switch ((isa_op)in->op) {
        case ISA_CALL:
        case ISA_RETURN: return "shape=hexagon, fillcolor=\"#fbcfe8\"";
        case ISA_ENTER:
        case ISA_EXIT:
        case ISA_NEXTITER:
        case ISA_LOOPCOND: return "shape=hexagon, fillcolor=\"#bbf7d0\"";
        default: return "shape=hexagon, fillcolor=\"#fde68a\"";
        }
    default:
        return "fillcolor=white";
    }
}

static void put_region(ut_buf *b, const isa_program *p, uint32_t r, int depth)
{
    const isa_region *g = &p->regions[r];
    int ind = depth * 2 + 2;
    ut_buf_printf(b, "%*ssubgraph cluster_%u {\n", ind, "", r);
    ut_buf_printf(b, "%*slabel=\"", ind + 2, "");
    if (g->kind == ISA_REGION_ROOT) {
        const isa_entry *e = NULL;
        for (uint32_t k = 0; k < p->n_entries; k++)
            if (p->entries[k].region == r)
                e = &p->entries[k];
        ut_buf_printf(b, "entry %s(", e ? e->name : g->name);
        char ty[160];
        for (uint32_t k = 0; e && k < e->n_params; k++)
            ut_buf_printf(b, "%s%s: %s", k ? ", " : "", e->params[k].name, isa_param_type(&e->params[k], ty, sizeof ty));
        ut_buf_printf(b, ") -> (");
        for (uint32_t k = 0; e && k < e->n_results; k++)
            ut_buf_printf(b, "%s%s: %s", k ? ", " : "", e->results[k].name, isa_param_type(&e->results[k], ty, sizeof ty));
        ut_buf_printf(b, ")\";\n%*sstyle=rounded; color=\"#1e3a8a\";\n", ind + 2, "");
    } else if (g->kind == ISA_REGION_FUNC) {
        ut_buf_printf(b, "func %s\";\n%*sstyle=rounded; color=\"#9d174d\";\n", g->name, ind + 2, "");
    } else {
        ut_buf_printf(b, "loop %s\";\n%*sstyle=\"rounded,dashed,filled\"; color=\"#047857\"; fillcolor=\"#f0fdf4\";\n",
                      g->name, ind + 2, "");
    }
    for (uint32_t i = 0; i < p->n_insts; i++) {
        const isa_inst *in = &p->insts[i];
        if (in->region != r)
            continue;
        ut_buf_printf(b, "%*si%u [label=\"", ind + 2, "", i);
        put_label(b, p, i);
        ut_buf_printf(b, "\", %s, tooltip=\"", node_style(in));
        ut_buf t;
        ut_buf_init(&t, NULL);
        ld_format_inst(p, i, &t);
        if (!t.failed)
            put_escaped(b, (const char *)t.data, t.len);
        ut_buf_free(&t);
        ut_buf_printf(b, "\"];\n");
    }
    for (uint32_t c = 0; c < p->n_regions; c++)
        if (p->regions[c].kind == ISA_REGION_LOOP && p->regions[c].parent == r)
            put_region(b, p, c, depth + 1);
    ut_buf_printf(b, "%*s}\n", ind, "");
}

static void put_graph(ut_buf *b, const isa_program *p)
{
    ut_buf_printf(b, "digraph tfvm {\n  graph [label=\"");
    put_escaped(b, p->name ? p->name : "program", strlen(p->name ? p->name : "program"));
    ut_buf_printf(b, "\", labelloc=t, fontname=\"Helvetica\", fontsize=12, newrank=true];\n"
                     "  node [fontname=\"Helvetica\", fontsize=10, shape=box, style=\"rounded,filled\"];\n"
                     "  edge [fontname=\"Helvetica\", fontsize=8, arrowsize=0.6];\n");
    for (uint32_t r = 0; r < p->n_regions; r++)
        if (p->regions[r].kind != ISA_REGION_LOOP)
            put_region(b, p, r, 0);
    for (uint32_t i = 0; i < p->n_insts; i++) {
        const isa_inst *src = &p->insts[i];
        for (uint32_t k = src->edge_first; k < src->edge_first + src->n_edges; k++) {
            const isa_edge *e = &p->edges[k];
            const isa_inst *dst = &p->insts[e->inst];
            ut_buf_printf(b, "  i%u -> i%u [label=\"", i, e->inst);
            if (isa_is_switch(src->op))
                ut_buf_printf(b, "%s:", e->out ? "T" : "F");
            else if (src->op == ISA_MERGE)
                ut_buf_printf(b, "%s:", e->out ? "i" : "v");
            else if (isa_outs(src) > 1)
                ut_buf_printf(b, "%u:", e->out);
            if (e->port < dst->n_in)
                ut_buf_printf(b, "%u\"", e->port);
            else if (dst->n_ctl == 1)
                ut_buf_printf(b, "ctl\", style=dashed");
            else
                ut_buf_printf(b, "ctl%u\", style=dashed", e->port - dst->n_in);
            /* tokens that change tag: calls pink, loops green */
            if (src->op == ISA_CALL || dst->op == ISA_RETURN)
                ut_buf_printf(b, ", color=\"#be185d\"");
            else if (src->op == ISA_ENTER || src->op == ISA_EXIT || src->op == ISA_NEXTITER)
                ut_buf_printf(b, ", color=\"#047857\"");
            ut_buf_printf(b, "];\n");
        }
    }
    ut_buf_printf(b, "}\n");
}

/* Is `name` an executable file in one of PATH's directories? */
static bool in_path(const char *name)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        return false;
    for (const char *s = path;;) {
        const char *e = strchr(s, ':');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        char full[4096];
        if (n + strlen(name) + 2 < sizeof full) {
            snprintf(full, sizeof full, "%.*s/%s", (int)n, n ? s : ".", name);
            if (access(full, X_OK) == 0)
                return true;
        }
        if (!e)
            return false;
        s = e + 1;
    }
}

/* Pipes the text through `dot -Tsvg` (to `out`, or stdout). */
static int render_svg(const ut_buf *b, const char *out)
{
    if (!in_path("dot")) {
        fprintf(stderr, "tfvm: --svg needs Graphviz's `dot` in PATH (install graphviz, or leave out --svg and "
                        "render the dot text yourself)\n");
        return 1;
    }
    int fd[2];
    if (pipe(fd) != 0) {
        fprintf(stderr, "tfvm: cannot run dot: %s\n", strerror(errno));
        return 1;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "tfvm: cannot run dot: %s\n", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return 1;
    }
    if (pid == 0) {
        dup2(fd[0], STDIN_FILENO);
        close(fd[0]);
        close(fd[1]);
        if (out && strcmp(out, "-") != 0)
            execlp("dot", "dot", "-Tsvg", "-o", out, (char *)NULL);
        else
            execlp("dot", "dot", "-Tsvg", (char *)NULL);
        _exit(127);
    }
    close(fd[0]);
    void (*old)(int) = signal(SIGPIPE, SIG_IGN); /* dot may stop reading on an error */
    size_t done = 0;
    while (done < b->len) {
        ssize_t n = write(fd[1], b->data + done, b->len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    close(fd[1]);
    signal(SIGPIPE, old);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
            fprintf(stderr, "tfvm: cannot run dot\n");
        else
            fprintf(stderr, "tfvm: dot -Tsvg failed (%s %d)\n", WIFEXITED(status) ? "exit status" : "signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return 1;
    }
    return 0;
}

int cli_dot(int argc, char **argv)
{
    enum { D_OUT, D_ENTRY, D_OUTPUTS, D_SVG };
    static const cli_opt opts[] = {
        [D_OUT] = {"-o", NULL, "needs a file name"},
        [D_ENTRY] = {"-e", "--entry", "needs a function name"},
        [D_OUTPUTS] = {NULL, "--outputs", "needs a list of tensor names (a,b:1)"},
        [D_SVG] = {NULL, "--svg", NULL},
    };
    cli_args o;
    int prc = cli_parse("dot", cli_usage_dot, opts, UT_COUNTOF(opts), CLI_ONE_FILE, argc, argv, &o);
    if (prc)
        return prc < 0 ? 0 : prc;
    const char *in = o.pos[0], *out = o.val[D_OUT], *entry = o.val[D_ENTRY], *outputs = o.val[D_OUTPUTS];
    bool svg = o.val[D_SVG] != NULL;
    cli_args_free(&o); /* the strings live in argv */
    tfvm_error err;
    tfvm_program *prog;
    if (cli_load_program(in, entry, outputs, &prog, &err) != TFVM_OK)
        return cli_load_failed(&err);
    ut_buf b;
    ut_buf_init(&b, NULL);
    put_graph(&b, &prog->isa);
    int rc = 0;
    if (b.failed) {
        fprintf(stderr, "tfvm: out of memory\n");
        rc = 1;
    } else if (svg) {
        rc = render_svg(&b, out);
    } else if (ut_write_file(out ? out : "-", b.data, b.len, &err) != TFVM_OK) {
        fprintf(stderr, "tfvm: %s\n", err.message);
        rc = 1;
    }
    ut_buf_free(&b);
    tfvm_program_free(prog);
    return rc;
}
