/* tools/opts.c — the table-driven option parser every subcommand uses
 * (tools/opts.h). */
#include "tools/opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/debug.h"

/* The option `a` names: its index, and where an attached `=value` starts. */
static int find(const cli_opt *opts, size_t n, const char *a, const char **attached)
{
    *attached = NULL;
    for (size_t k = 0; k < n; k++) {
        if (opts[k].shrt && strcmp(a, opts[k].shrt) == 0)
            return (int)k;
        if (!opts[k].lng)
            continue;
        size_t len = strlen(opts[k].lng);
        if (strncmp(a, opts[k].lng, len) == 0 && (a[len] == '\0' || (a[len] == '=' && opts[k].missing))) {
            if (a[len] == '=')
                *attached = a + len + 1;
            return (int)k;
        }
    }
    return -1;
}

static bool is_help(const char *a) { return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0; }

void cli_args_free(cli_args *a)
{
    free(a->hits);
    free(a->pos);
    memset(a, 0, sizeof *a);
}

int cli_parse(const char *cmd, const char *usage, const cli_opt *opts, size_t n, int flags, int argc, char **argv,
              cli_args *out)
{
    memset(out, 0, sizeof *out);
    if (n > CLI_MAX_OPTS) { /* a table too long for cli_args.val: a bug in the command */
        fprintf(stderr, "tfvm %s: internal error: %zu options, at most %d\n", cmd, n, CLI_MAX_OPTS);
        return 1;
    }
    out->hits = calloc((size_t)argc + 1, sizeof *out->hits);
    out->pos = calloc((size_t)argc + 1, sizeof *out->pos);
    if (!out->hits || !out->pos) {
        cli_args_free(out);
        fprintf(stderr, "tfvm: out of memory\n");
        return 1;
    }
    bool options_done = false;
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i], *attached;
        bool file_seen = out->n_pos > 0;
        int k = options_done ? -1 : find(opts, n, a, &attached);
        if (options_done && (flags & CLI_ONE_FILE) && file_seen) {
            rc = cli_usage_error(cmd, "more than one input file ('%s' and '%s')", out->pos[0], a);
        } else if (options_done && (flags & CLI_NO_FILE)) {
            rc = cli_usage_error(cmd, "unexpected argument '%s'", a);
        } else if (options_done) {
            out->pos[out->n_pos++] = argv[i];
        } else if (is_help(a)) {
            fputs(usage, stdout);
            rc = -1;
        } else if (k >= 0) {
            const char *v = opts[k].missing ? attached : "";
            if (opts[k].missing && !v) {
                if (++i == argc) {
                    rc = cli_usage_error(cmd, "%s %s", a, opts[k].missing);
                    break;
                }
                v = argv[i];
            }
            out->val[k] = v;
            out->hits[out->n_hits++] = (cli_hit){k, a, opts[k].missing ? v : NULL};
        } else if (strcmp(a, "--") == 0) {
            options_done = true;
        } else if ((flags & CLI_NO_FILE)) {
            rc = cli_usage_error(cmd, "unexpected argument '%s'", a);
        } else if (a[0] == '-' && a[1] != '\0' && !((flags & CLI_FILE_ARGS) && file_seen)) {
            rc = cli_usage_error(cmd, "unknown option '%s'", a);
        } else if ((flags & CLI_ONE_FILE) && file_seen) {
            rc = cli_usage_error(cmd, "more than one input file ('%s' and '%s')", out->pos[0], a);
        } else {
            out->pos[out->n_pos++] = argv[i];
        }
    }
    if (!rc && !(flags & CLI_NO_FILE) && out->n_pos == 0)
        rc = cli_usage_error(cmd, "missing FILE");
    if (rc)
        cli_args_free(out);
    return rc;
}

int cli_threads(const char *cmd, const char *given, int *threads)
{
    const char *env = getenv("TFVM_THREADS");
    const char *s = given ? given : env && *env ? env : NULL;
    *threads = 0;
    if (!s)
        return 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > 1024) {
        if (given)
            return cli_usage_error(cmd, "--threads needs an integer from 1 to 1024");
        return cli_usage_error(cmd, "TFVM_THREADS=%s: expected an integer from 1 to 1024", s);
    }
    *threads = (int)v;
    return 0;
}

int cli_device(const char *cmd, const char *given, int *device)
{
    const char *env = getenv("TFVM_DEVICE");
    const char *s = given ? given : env && *env ? env : NULL;
    *device = TFVM_DEVICE_CPU;
    if (!s)
        return 0;
    int d = tfvm_device_by_name(s);
    if (d < 0) {
        if (given)
            return cli_usage_error(cmd, "--device takes cpu, cuda or auto, got '%s'", s);
        return cli_usage_error(cmd, "TFVM_DEVICE=%s: expected cpu, cuda or auto", s);
    }
    *device = d;
    return 0;
}
