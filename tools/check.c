/* tools/check.c — `tfvm check FILE`: the static analyser's facts (analysis/facts.h)
 * per instruction, one line each, and every definite conflict it proves, one
 * line each on stderr with exit status 1 (docs/check.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/facts.h"
#include "compiler/compiler.h"
#include "import/import.h"
#include "loader/loader.h"
#include "tools/check.h"
#include "tools/debug.h"
#include "tools/opts.h"

const char *const cli_usage_check =
    "usage: tfvm check [options] FILE\n"
    "\n"
    "Prints what the static analyser proves of every instruction's output, one\n"
    "line each: its label, opcode, dtype and shape (f32[64, ?]: `?` an unknown\n"
    "dim, [..] an unknown rank) and, when known, its value. Then each definite\n"
    "conflict, an instruction that fails whenever it runs, one line on stderr\n"
    "(\"tfvm: FILE: matmul_10_19 (MATMUL): inner dims differ: f32[64, 784] @\n"
    "f32[512, 10]\"), and exit status 1. FILE is any format `tfvm run` takes.\n"
    "\n"
    "options:\n"
    "  --entry NAME     .tfg: the function compiled as the entry point (default main)\n"
    "  --outputs LIST   .pb: the results (a,b:1)\n"
    "  -h, --help       show this help\n";

static bool ck_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The front ends without the load-time conflict check (an_program_finish), so
 * that a program the loader refuses still shows its facts and every conflict. */
static tfvm_status ck_open_unchecked(const char *path, const char *entry, const char *outputs, isa_program *out,
                                     tfvm_error *err)
{
    char *data;
    size_t len;
    tfvm_status st = ut_read_file(path, NULL, &data, &len, err);
    if (st != TFVM_OK)
        return st;
    if (ld_has_magic(data, len, false)) {
        st = ld_read(data, len, path, NULL, out, err);
    } else if (ck_suffix(path, ".tfasm")) {
        st = ld_assemble(data, len, path, NULL, out, err);
    } else if (ck_suffix(path, ".tfg")) {
        cc_options co = {.entry = entry, .opt_level = 1};
        st = cc_compile(data, len, path, &co, NULL, out, err);
    } else if (ck_suffix(path, ".onnx")) {
        const char *slash = strrchr(path, '/');
        char dir[4096];
        ut_fmt(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        st = imp_onnx(data, len, path, dir, 1, NULL, out, err);
    } else {
        st = imp_tf(data, len, path, outputs, 1, NULL, out, err);
    }
    ut_free(NULL, data, len + 1);
    return st;
}

/* Instruction i's outputs' facts, "f32[2, ?]; i32 = 5", or "-" (no outputs). */
static const char *ck_fact_line(const isa_program *p, const isa_facts *F, uint32_t i, char *line, size_t size)
{
    char f[160], v[512];
    size_t n = 0;
    line[0] = '\0';
    uint32_t no = isa_outs(&p->insts[i]);
    for (uint32_t k = 0; k < no && n + 1 < size; k++) {
        const isa_fact *x = isa_facts_of(F, i, k);
        isa_fact_value_str(x, v, sizeof v);
        n += (size_t)snprintf(line + n, size - n, "%s%s%s%s", k ? "; " : "", isa_fact_str(x, f, sizeof f),
                              v[0] ? " = " : "", v);
    }
    return no ? line : "-";
}

static void ck_print(const isa_program *p, const isa_facts *F)
{
    for (uint32_t i = 0; i < p->n_insts; i++) {
        char label[96], line[1024];
        isa_inst_label(p, i, label, sizeof label);
        printf("%-24s %-14s %s\n", label, isa_ops[p->insts[i].op].name, ck_fact_line(p, F, i, line, sizeof line));
    }
}

char **cli_facts(const tfvm_program *prog)
{
    const isa_program *p = &prog->isa;
    isa_facts F;
    tfvm_error err;
    if (isa_facts_analyse(p, NULL, &F, &err) != TFVM_OK)
        return NULL;
    char **lines = calloc((size_t)p->n_insts + 1, sizeof *lines);
    for (uint32_t i = 0; lines && i < p->n_insts; i++) {
        char line[1024];
        if (!(lines[i] = strdup(ck_fact_line(p, &F, i, line, sizeof line)))) {
            cli_facts_free(lines, i);
            lines = NULL;
        }
    }
    isa_facts_free(&F);
    return lines;
}

void cli_facts_free(char **lines, size_t n)
{
    for (size_t i = 0; lines && i < n; i++)
        free(lines[i]);
    free(lines);
}

int cli_check(int argc, char **argv)
{
    static const cli_opt opts[] = {{"-e", "--entry", "needs a function name"},
                                   {NULL, "--outputs", "needs a list of tensor names (a,b:1)"}};
    cli_args o;
    int prc = cli_parse("check", cli_usage_check, opts, UT_COUNTOF(opts), CLI_ONE_FILE, argc, argv, &o);
    if (prc)
        return prc < 0 ? 0 : prc;
    const char *in = o.pos[0], *entry = o.val[0], *outputs = o.val[1];
    cli_args_free(&o); /* the strings live in argv */
    tfvm_error err;
    tfvm_program *prog = NULL;
    isa_program own;
    const isa_program *p;
    bool owned = false;
    if (cli_load_program(in, entry, outputs, &prog, &err) == TFVM_OK) {
        p = &prog->isa;
    } else if (err.code == TFVM_ERR_SHAPE && strcmp(in, "-") != 0) {
        /* refused for a conflict: analyse it anyway, to show them all */
        if (ck_open_unchecked(in, entry, outputs, &own, &err) != TFVM_OK)
            return cli_load_failed(&err);
        p = &own;
        owned = true;
    } else {
        return cli_load_failed(&err);
    }
    isa_facts F;
    int rc = 0;
    if (isa_facts_analyse(p, NULL, &F, &err) != TFVM_OK) {
        fprintf(stderr, "tfvm: %s\n", err.message);
        rc = 1;
    } else {
        ck_print(p, &F);
        fflush(stdout);
        for (uint32_t k = 0; k < F.n_conflicts; k++) {
            const isa_conflict *c = &F.conflicts[k];
            char label[96];
            fprintf(stderr, "tfvm: %s: %s (%s): %s\n", in, isa_inst_label(p, c->inst, label, sizeof label),
                    isa_ops[p->insts[c->inst].op].name, c->msg);
            rc = 1;
        }
        isa_facts_free(&F);
    }
    if (owned)
        isa_program_release(&own);
    tfvm_program_free(prog);
    return rc;
}
