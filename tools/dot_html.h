/* tools/dot_html.h — the page `tfvm dot --html` writes (tools/dot_html.c). */
#ifndef TFVM_TOOLS_DOT_HTML_H
#define TFVM_TOOLS_DOT_HTML_H

#include "tfvm.h"

/* Writes the page for program p (called `name`) with svg, Graphviz's
 * rendering of its graph, to path. Returns 0, or 1 after one line on stderr. */
int cli_dot_html(const tfvm_program *p, const char *name, const char *svg, const char *path);

#endif
