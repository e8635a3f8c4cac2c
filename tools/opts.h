/* tools/opts.h — the one option parser of every `tfvm` subcommand: a table of
 * the options a command takes; the same spellings, the same `--name=value`
 * form, the same `--`, `-h/--help` and messages everywhere. */
#ifndef TFVM_TOOLS_OPTS_H
#define TFVM_TOOLS_OPTS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cli_opt {
    const char *shrt;    /* "-e", or NULL */
    const char *lng;     /* "--entry", or NULL; "--entry=NAME" works too */
    const char *missing; /* NULL: a flag; else it takes a value, and this ends
                            the message when none follows: "needs an entry name" */
} cli_opt;

#define CLI_MAX_OPTS 16

/* One occurrence of an option, in command-line order. */
typedef struct cli_hit {
    int opt;             /* index in the table */
    const char *as;      /* how it was spelled ("-e") */
    const char *value;   /* its value; NULL for a flag */
} cli_hit;

typedef struct cli_args {
    const char *val[CLI_MAX_OPTS]; /* each option's last value ("" for a flag), NULL if absent */
    cli_hit *hits;       /* every occurrence (repeatable options such as run -o) */
    size_t n_hits;
    char **pos;          /* FILE and the ARGs after it: pointers into argv */
    size_t n_pos;
} cli_args;

enum {
    CLI_ONE_FILE = 1,    /* exactly one word besides the options: FILE */
    CLI_FILE_ARGS = 2,   /* FILE [ARG...]: after FILE a word that is no known
                            option is an ARG (so -3 passes); `--` ends options */
    CLI_NO_FILE = 4      /* no words at all */
};

/* Parses argv[1..argc) (argv[0] is the command's name) by `opts` (n of them,
 * at most CLI_MAX_OPTS). Returns 0 with *out filled (release it with
 * cli_args_free); -1 after printing `usage` for -h/--help (exit 0); or, after
 * printing one line "tfvm: ... (see 'tfvm CMD --help')", the usage exit
 * status 2: an unknown option, a missing value, a missing FILE, two FILEs. */
int cli_parse(const char *cmd, const char *usage, const cli_opt *opts, size_t n, int flags, int argc, char **argv,
              cli_args *out);
void cli_args_free(cli_args *a);

/* The worker threads: the --threads value when given, else TFVM_THREADS,
 * else 0 (one per core). Returns 0, or the usage exit status after a message
 * ("--threads needs an integer from 1 to 1024"). */
int cli_threads(const char *cmd, const char *given, int *threads);
/* Where tensor work runs (a tfvm_device): the --device value when given,
 * else TFVM_DEVICE, else the CPU. Returns 0, or the usage exit status after
 * a message ("--device takes cpu, cuda or auto, got 'x'"). */
int cli_device(const char *cmd, const char *given, int *device);

#endif
