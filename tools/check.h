/* tools/check.h — the `tfvm check` command (tools/check.c). */
#ifndef TFVM_TOOLS_CHECK_H
#define TFVM_TOOLS_CHECK_H

#include <stddef.h>

#include "tfvm.h"

extern const char *const cli_usage_check;
/* What the static analyser proves of each instruction's outputs, as `tfvm
 * check` prints it ("f32[2, ?]; i32 = 5", "-" for none): one string per
 * instruction (free with cli_facts_free(lines, instruction count)); NULL
 * when the analysis fails or memory runs out. */
char **cli_facts(const tfvm_program *prog);
void cli_facts_free(char **lines, size_t n);
int cli_check(int argc, char **argv);

#endif
