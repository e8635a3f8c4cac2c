/* tools/check.h — the `tfvm check` command (tools/check.c). */
#ifndef TFVM_TOOLS_CHECK_H
#define TFVM_TOOLS_CHECK_H

extern const char *const cli_usage_check;
int cli_check(int argc, char **argv);

#endif
