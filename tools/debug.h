/* tools/debug.h — the `tfvm debug` and `tfvm dot` commands, and the helpers of
 * tools/tfvm.c they share with it (loading a program, parsing arguments), so
 * that every subcommand reads files and arguments the same way. */
#ifndef TFVM_TOOLS_DEBUG_H
#define TFVM_TOOLS_DEBUG_H

#include <stdio.h>

#include "tfvm.h"

/* ---- From tools/tfvm.c ---------------------------------------------------- */
/* FILE: .tfvm ("-" = .tfvm bytes on stdin), .tfasm (assembled in memory) or
 * .tfg (compiled in memory; its entry function is `entry`, or main). */
tfvm_status cli_load_program(const char *path, const char *entry, tfvm_program **out, tfvm_error *err);
/* Parses argument i of entry e as `tfvm run` does; on error prints one line
 * "tfvm: ..." to stderr and returns non-zero. */
int cli_parse_arg(const tfvm_entry_info *e, size_t i, const char *text, tfvm_value *v);
/* "tfvm: <message> (see 'tfvm CMD --help')" on stderr; returns the usage exit status. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "main(n: i32)" */
void cli_print_signature(const tfvm_entry_info *e, FILE *f);

/* ---- The commands (argv[0] is the command's name) ------------------------- */
extern const char *const cli_usage_debug;
extern const char *const cli_usage_dot;
int cli_debug(int argc, char **argv);
int cli_dot(int argc, char **argv);

#endif
