/* tools/dot.c — `tfvm dot`: a program's one static graph as Graphviz text.
 * Regions are clusters (loop frames nested in their parent), control
 * instructions are drawn apart from compute, edges are labelled by port. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tfvm.h"
#include "tfvm_debug.h"
#include "tools/buf.h"
#include "tools/debug.h"
#include "tools/dot_html.h"
#include "tools/opts.h"

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
    "  --html FILE            write one self-contained page to FILE: the SVG, a panel\n"
    "                         showing the node clicked (opcode, instruction, dtype and\n"
    "                         shape, source, inputs, consumers) and buttons that fold\n"
    "                         each function and loop cluster (needs `dot` too)\n"
    "  -e, --entry NAME       for .tfg: the function compiled as the entry (default: main)\n"
    "  --outputs A,B:1        for .pb: the tensors that become results (default: the\n"
    "                         outputs no node consumes)\n"
    "  -h, --help             show this help\n";

/* A string inside double quotes, escaped for dot. */
static void put_escaped(tb_buf *b, const char *s, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        char c = s[k];
        if (c == '"' || c == '\\')
            tb_printf(b, "\\%c", c);
        else if (c == '\n')
            tb_printf(b, "\\n");
        else
            tb_append(b, &c, 1);
    }
}

/* Instruction i as the shared printer writes it (tfvm_inst_format), in a
 * new string (NULL when out of memory). */
static char *inst_text(const tfvm_program *p, uint32_t i)
{
    char small[256];
    size_t n = tfvm_inst_format(p, i, small, sizeof small);
    char *t = malloc(n + 1);
    if (t)
        tfvm_inst_format(p, i, t, n + 1);
    return t;
}

#define DOT_LABEL_MAX 40

/* The node's label: the model's node it came from (an imported model's
 * name and op type), its name, then the instruction as dis writes it
 * without the name, the source position and the origin (the full text is
 * the tooltip): the one instruction printer, as everywhere. */
static void put_label(tb_buf *b, const tfvm_program *p, uint32_t i, const char *text)
{
    char label[160];
    tfvm_inst_info in;
    if (tfvm_program_inst(p, i, &in) == TFVM_OK && in.origin) {
        put_escaped(b, in.origin, strlen(in.origin));
        tb_printf(b, " (");
        put_escaped(b, in.origin_op ? in.origin_op : "?", strlen(in.origin_op ? in.origin_op : "?"));
        tb_printf(b, ")\\n");
    }
    tfvm_inst_label(p, i, label, sizeof label);
    put_escaped(b, label, strlen(label));
    tb_printf(b, "\\n");
    const char *body = text;
    size_t ll = strlen(label);
    if (strncmp(text, label, ll) == 0 && strncmp(text + ll, " = ", 3) == 0)
        body = text + ll + 3;
    const char *from = strstr(body, " from \"");
    size_t n = from ? (size_t)(from - body) : strlen(body);
    const char *at = strrchr(body, '@');
    if (at && at > body && at < body + n && at[-1] == ' ' && strspn(at + 1, "0123456789:") == (size_t)(body + n - at - 1))
        n = (size_t)(at - 1 - body);
    /* a long operand list (a MERGE of many producers) makes a wide node: the
     * edges show the operands, the tooltip the whole text */
    const char *ops = strstr(body, " (");
    if (n > DOT_LABEL_MAX && ops && (size_t)(ops - body) < n) {
        put_escaped(b, body, (size_t)(ops - body));
        tb_printf(b, " (...)");
        return;
    }
    put_escaped(b, body, n);
}

static const char *node_style(const tfvm_inst_info *in)
{
    if (strcmp(in->op_class, "source") == 0)
        return strcmp(in->op, "ARG") == 0 ? "shape=invhouse, fillcolor=\"#dbeafe\"" : "fillcolor=\"#f1f5f9\"";
    if (strcmp(in->op_class, "sink") == 0)
        return "shape=house, fillcolor=\"#dbeafe\"";
    if (strcmp(in->op_class, "control") == 0) {
        if (strcmp(in->op, "CALL") == 0 || strcmp(in->op, "RETURN") == 0)
            return "shape=hexagon, fillcolor=\"#fbcfe8\"";
        if (strcmp(in->op, "ENTER") == 0 || strcmp(in->op, "EXIT") == 0 || strcmp(in->op, "NEXTITER") == 0 ||
            strcmp(in->op, "LOOPCOND") == 0)
            return "shape=hexagon, fillcolor=\"#bbf7d0\"";
        return "shape=hexagon, fillcolor=\"#fde68a\"";
    }
    return "fillcolor=white";
}

static void put_region(tb_buf *b, const tfvm_program *p, uint32_t r, int depth)
{
    tfvm_region_info g;
    tfvm_program_region(p, r, &g);
    int ind = depth * 2 + 2;
    tb_printf(b, "%*ssubgraph cluster_%u {\n", ind, "", r);
    tb_printf(b, "%*slabel=\"", ind + 2, "");
    if (strcmp(g.kind, "entry") == 0) {
        tfvm_entry_info e;
        bool has = g.entry >= 0 && tfvm_program_entry(p, (size_t)g.entry, &e) == TFVM_OK;
        tb_printf(b, "entry %s(", has ? e.name : g.name);
        char ty[160];
        for (size_t k = 0; has && k < e.n_params; k++)
            tb_printf(b, "%s%s: %s", k ? ", " : "", e.params[k].name, cli_param_type(&e.params[k], ty, sizeof ty));
        tb_printf(b, ") -> (");
        for (size_t k = 0; has && k < e.n_results; k++)
            tb_printf(b, "%s%s: %s", k ? ", " : "", e.results[k].name, cli_param_type(&e.results[k], ty, sizeof ty));
        tb_printf(b, ")\";\n%*sstyle=rounded; color=\"#1e3a8a\";\n", ind + 2, "");
    } else if (strcmp(g.kind, "func") == 0) {
        tb_printf(b, "func %s\";\n%*sstyle=rounded; color=\"#9d174d\";\n", g.name, ind + 2, "");
    } else {
        tb_printf(b, "loop %s\";\n%*sstyle=\"rounded,dashed,filled\"; color=\"#047857\"; fillcolor=\"#f0fdf4\";\n",
                   g.name, ind + 2, "");
    }
    uint32_t n = (uint32_t)tfvm_program_inst_count(p);
    for (uint32_t i = 0; i < n; i++) {
        tfvm_inst_info in;
        tfvm_program_inst(p, i, &in);
        if (in.region_index != r)
            continue;
        char *text = inst_text(p, i);
        if (!text) {
            b->failed = true;
            return;
        }
        tb_printf(b, "%*si%u [label=\"", ind + 2, "", i);
        put_label(b, p, i, text);
        tb_printf(b, "\", %s, tooltip=\"", node_style(&in));
        put_escaped(b, text, strlen(text));
        tb_printf(b, "\"];\n");
        free(text);
    }
    for (uint32_t c = 0; c < tfvm_program_region_count(p); c++) {
        tfvm_region_info sub;
        tfvm_program_region(p, c, &sub);
        if (strcmp(sub.kind, "loop") == 0 && sub.parent == r)
            put_region(b, p, c, depth + 1);
    }
    tb_printf(b, "%*s}\n", ind, "");
}

static bool op_is(const tfvm_inst_info *in, const char *op) { return strcmp(in->op, op) == 0; }

static void put_graph(tb_buf *b, const tfvm_program *p, const char *name)
{
    tb_printf(b, "digraph tfvm {\n  graph [label=\"");
    put_escaped(b, name, strlen(name));
    tb_printf(b, "\", labelloc=t, fontname=\"Helvetica\", fontsize=12, newrank=true];\n"
                  "  node [fontname=\"Helvetica\", fontsize=10, shape=box, style=\"rounded,filled\"];\n"
                  "  edge [fontname=\"Helvetica\", fontsize=8, arrowsize=0.6];\n");
    for (uint32_t r = 0; r < tfvm_program_region_count(p); r++) {
        tfvm_region_info g;
        tfvm_program_region(p, r, &g);
        if (strcmp(g.kind, "loop") != 0)
            put_region(b, p, r, 0);
    }
    uint32_t n = (uint32_t)tfvm_program_inst_count(p);
    for (uint32_t i = 0; i < n && !b->failed; i++) {
        tfvm_inst_info src;
        tfvm_program_inst(p, i, &src);
        tfvm_edge_info *edges = calloc((size_t)src.n_edges + 1, sizeof *edges);
        if (!edges) {
            b->failed = true;
            return;
        }
        tfvm_program_edges(p, i, edges, src.n_edges);
        for (uint32_t k = 0; k < src.n_edges; k++) {
            const tfvm_edge_info *e = &edges[k];
            tfvm_inst_info dst;
            tfvm_program_inst(p, e->inst, &dst);
            tb_printf(b, "  i%u -> i%u [label=\"", i, e->inst);
            if (op_is(&src, "SWITCH") || op_is(&src, "BRANCH"))
                tb_printf(b, "%s:", e->out ? "T" : "F");
            else if (op_is(&src, "MERGE"))
                tb_printf(b, "%s:", e->out ? "i" : "v");
            else if (src.n_out > 1)
                tb_printf(b, "%u:", e->out);
            if (e->port < dst.n_in)
                tb_printf(b, "%u\"", e->port);
            else if (dst.n_ctl == 1)
                tb_printf(b, "ctl\", style=dashed");
            else
                tb_printf(b, "ctl%u\", style=dashed", e->port - dst.n_in);
            /* tokens that change tag: calls pink, loops green */
            if (op_is(&src, "CALL") || op_is(&dst, "RETURN"))
                tb_printf(b, ", color=\"#be185d\"");
            else if (op_is(&src, "ENTER") || op_is(&src, "EXIT") || op_is(&src, "NEXTITER"))
                tb_printf(b, ", color=\"#047857\"");
            tb_printf(b, "];\n");
        }
        free(edges);
    }
    tb_printf(b, "}\n");
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
static int render_svg(const tb_buf *b, const char *out)
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

/* The SVG of the graph as a string (free it), through a temporary file;
 * NULL after a message. */
static char *svg_text(const tb_buf *b)
{
    char tmp[] = "/tmp/tfvm-dot-XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) {
        fprintf(stderr, "tfvm: cannot make a temporary file: %s\n", strerror(errno));
        return NULL;
    }
    close(fd);
    char *svg = NULL;
    if (render_svg(b, tmp) == 0) {
        FILE *f = fopen(tmp, "rb");
        long n = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (svg = malloc((size_t)n + 1)) != NULL) {
            svg[fread(svg, 1, (size_t)n, f)] = '\0';
        } else {
            fprintf(stderr, "tfvm: cannot read dot's SVG\n");
        }
        if (f)
            fclose(f);
    }
    unlink(tmp);
    return svg;
}

int cli_dot(int argc, char **argv)
{
    enum { D_OUT, D_ENTRY, D_OUTPUTS, D_SVG, D_HTML };
    static const cli_opt opts[] = {
        [D_OUT] = {"-o", NULL, "needs a file name"},
        [D_ENTRY] = {"-e", "--entry", "needs a function name"},
        [D_OUTPUTS] = {NULL, "--outputs", "needs a list of tensor names (a,b:1)"},
        [D_SVG] = {NULL, "--svg", NULL},
        [D_HTML] = {NULL, "--html", "needs a file name"},
    };
    cli_args o;
    int prc = cli_parse("dot", cli_usage_dot, opts, (sizeof opts / sizeof opts[0]), CLI_ONE_FILE, argc, argv, &o);
    if (prc)
        return prc < 0 ? 0 : prc;
    const char *in = o.pos[0], *out = o.val[D_OUT], *entry = o.val[D_ENTRY], *outputs = o.val[D_OUTPUTS];
    bool svg = o.val[D_SVG] != NULL;
    const char *html = o.val[D_HTML];
    cli_args_free(&o); /* the strings live in argv */
    tfvm_error err;
    tfvm_program *prog;
    if (cli_load_program(in, entry, outputs, &prog, &err) != TFVM_OK)
        return cli_load_failed(&err);
    tb_buf b;
    tb_init(&b);
    put_graph(&b, prog, in);
    int rc = 0;
    if (b.failed) {
        fprintf(stderr, "tfvm: out of memory\n");
        rc = 1;
    } else if (html) {
        char *text = svg_text(&b);
        rc = text ? cli_dot_html(prog, in, text, html) : 1;
        free(text);
    } else if (svg) {
        rc = render_svg(&b, out);
    } else {
        bool to_stdout = !out || strcmp(out, "-") == 0;
        FILE *f = to_stdout ? stdout : fopen(out, "wb");
        if (!f || fwrite(b.data, 1, b.len, f) != b.len || (to_stdout ? fflush(f) : fclose(f)) != 0) {
            fprintf(stderr, "tfvm: cannot write %s: %s\n", to_stdout ? "the output" : out, strerror(errno));
            if (f && !to_stdout)
                fclose(f);
            rc = 1;
        }
    }
    free(b.data);
    tfvm_program_free(prog);
    return rc;
}
