/* tools/debug.h — the `tfvm debug` and `tfvm dot` commands, and the helpers of
 * tools/tfvm.c they share with it (loading a program, parsing arguments), so
 * that every subcommand reads files and arguments the same way. */
#ifndef TFVM_TOOLS_DEBUG_H
#define TFVM_TOOLS_DEBUG_H

#include <stdio.h>

#include "tfvm.h"

/* ---- From tools/tfvm.c ---------------------------------------------------- */
/* Reads FILE with tfvm_program_open: .tfvm ("-" = .tfvm bytes on stdin),
 * .tfasm, .tfg (its entry function is `entry`, or main), .onnx, .pb (its
 * results are `outputs`, "a,b:1", or NULL for the tensors no node consumes);
 * every format but .tfvm is compiled in memory. */
tfvm_status cli_load_program(const char *path, const char *entry, const char *outputs, tfvm_program **out,
                             tfvm_error *err);
/* Prints err's one line ("tfvm: ...") after cli_load_program failed; returns
 * the exit status: 2 for a usage error (--outputs for a file that is not
 * .pb), else 1. */
int cli_load_failed(const tfvm_error *err);
/* Prints a failed run's error as one line "tfvm: FILE:LINE:COL: message"
 * (the position when the program has one, tfvm_error.where); returns 1. */
int cli_run_failed(const tfvm_vm *vm);
/* Binds the command line's ARGs (texts[0..n)) to e's parameters: positional
 * ones first, then NAME=VALUE ones (NAME: [A-Za-z_][A-Za-z0-9_.:/-]*, a
 * parameter's name; "x" also names "x:0"). bound (e->n_params slots) gets
 * parameter k's text in bound[k] (the VALUE of a named one; pointers into
 * texts; cli_default_arg itself, "default", for a parameter with a default
 * left out, which cli_parse_arg makes tfvm_default()). Returns 0, or prints one line "tfvm: main(a: i32, b: i32) ..." on
 * stderr (wrong count, unknown name, a parameter given twice or missing) and
 * returns the usage exit status. */
int cli_bind_args(const tfvm_entry_info *e, char *const *texts, size_t n, const char **bound);
extern const char cli_default_arg[];
/* Parses argument i of entry e as `tfvm run` does; on error prints one line
 * "tfvm: ..." to stderr and returns non-zero. */
int cli_parse_arg(const tfvm_entry_info *e, size_t i, const char *text, tfvm_value *v);
/* text as a value of that type, as `tfvm run` parses arguments and --feed
 * values (@path.npy for a tensor): true, or false with the reason in msg
 * ("expected i32, got 'a'"). */
bool cli_parse_value(tfvm_dtype dtype, bool is_tensor, const char *text, tfvm_value *v, char *msg, size_t size);
/* "tfvm: <message> (see 'tfvm CMD --help')" on stderr; returns the usage exit status. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The printf format of one parameter in a signature, given the separator,
 * name, dtype and "[]" or "": "%s%s: %s%s", or with the name in double
 * quotes when it is not an identifier ("x:0", as .tfasm writes it). */
const char *cli_param_fmt(const char *name) __attribute__((format_arg(1)));
/* A parameter's declared type: "i32", "f32[]" (any rank), "f32[?, 784]". */
const char *cli_param_type(const tfvm_param_info *p, char *buf, size_t size);
/* "main(n: i32)" */
void cli_print_signature(const tfvm_entry_info *e, FILE *f);

/* ---- The commands (argv[0] is the command's name) ------------------------- */
extern const char *const cli_usage_debug;
extern const char *const cli_usage_dot;
int cli_debug(int argc, char **argv);
int cli_dot(int argc, char **argv);

#endif
