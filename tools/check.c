/* tools/check.c — `tfvm check FILE`: the static analyser's facts (tfvm_debug.h)
 * per instruction, one line each, and every definite conflict it proves, one
 * line each on stderr with exit status 1 (docs/check.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfvm_debug.h"
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
    "A convolution or pool whose shapes are known ends with how the CPU backend\n"
    "computes it: \"cpu: Winograd F(2x2, 3x3), AVX-512; 2 threads: 4 images in\n"
    "parallel\" (docs/check.md lists the kernels).\n"
    "\n"
    "options:\n"
    "  --entry NAME     .tfg: the function compiled as the entry point (default main)\n"
    "  --outputs LIST   .pb: the results (a,b:1)\n"
    "  --threads N      the threads the CPU plans are for (default: one per physical\n"
    "                   core, or TFVM_THREADS, as `tfvm run`)\n"
    "  -h, --help       show this help\n";

static void ck_print(const tfvm_program *p, const tfvm_facts *F, int threads)
{
    /* the opcode column as wide as the longest opcode here (FUSED_CONV2D_ADD
     * pushed its line's shapes out of line in a column of 14) */
    int opw = 14;
    for (uint32_t i = 0; i < tfvm_program_inst_count(p); i++) {
        tfvm_inst_info info;
        tfvm_program_inst(p, i, &info);
        const int n = (int)strlen(info.op);
        opw = n > opw ? n : opw;
    }
    for (uint32_t i = 0; i < tfvm_program_inst_count(p); i++) {
        char label[96], line[1024], plan[256];
        tfvm_inst_info info;
        tfvm_program_inst(p, i, &info);
        printf("%-24s %-*s %s", tfvm_inst_label(p, i, label, sizeof label), opw, info.op,
               tfvm_facts_line(F, i, line, sizeof line));
        if (*tfvm_facts_kernel(F, i, threads, plan, sizeof plan))
            printf("  cpu: %s", plan);
        putchar('\n');
    }
}

char **cli_facts(const tfvm_program *prog)
{
    tfvm_facts *F;
    tfvm_error err;
    if (tfvm_program_facts(prog, &F, &err) != TFVM_OK)
        return NULL;
    size_t n = tfvm_program_inst_count(prog);
    char **lines = calloc(n + 1, sizeof *lines);
    for (uint32_t i = 0; lines && i < n; i++) {
        char line[1024];
        if (!(lines[i] = strdup(tfvm_facts_line(F, i, line, sizeof line)))) {
            cli_facts_free(lines, i);
            lines = NULL;
        }
    }
    tfvm_facts_free(F);
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
                                   {NULL, "--outputs", "needs a list of tensor names (a,b:1)"},
                                   {NULL, "--threads", "needs an integer from 1 to 1024"}};
    cli_args o;
    int prc = cli_parse("check", cli_usage_check, opts, sizeof opts / sizeof opts[0], CLI_ONE_FILE, argc, argv, &o);
    if (prc)
        return prc < 0 ? 0 : prc;
    const char *in = o.pos[0], *entry = o.val[0], *outputs = o.val[1];
    int threads;
    prc = cli_threads("check", o.val[2], &threads);
    cli_args_free(&o); /* the strings live in argv */
    if (prc)
        return prc;
    tfvm_error err;
    tfvm_program *prog = NULL;
    if (cli_load_program(in, entry, outputs, &prog, &err) != TFVM_OK) {
        if (err.code != TFVM_ERR_SHAPE || strcmp(in, "-") == 0)
            return cli_load_failed(&err);
        /* refused for a conflict: analyse it anyway, to show them all */
        tfvm_open_options oo;
        tfvm_open_options_init(&oo);
        oo.entry = entry;
        oo.outputs = outputs;
        oo.unchecked = true;
        if (tfvm_program_open(in, &oo, NULL, &prog, &err) != TFVM_OK)
            return cli_load_failed(&err);
    }
    tfvm_facts *F;
    int rc = 0;
    if (tfvm_program_facts(prog, &F, &err) != TFVM_OK) {
        fprintf(stderr, "tfvm: %s\n", err.message);
        rc = 1;
    } else {
        ck_print(prog, F, threads);
        fflush(stdout);
        for (size_t k = 0; k < tfvm_facts_conflict_count(F); k++) {
            const char *msg;
            uint32_t i = tfvm_facts_conflict(F, k, &msg);
            char label[96];
            tfvm_inst_info info;
            tfvm_program_inst(prog, i, &info);
            fprintf(stderr, "tfvm: %s: %s (%s): %s\n", in, tfvm_inst_label(prog, i, label, sizeof label), info.op,
                    msg);
            rc = 1;
        }
        tfvm_facts_free(F);
    }
    tfvm_program_free(prog);
    return rc;
}
