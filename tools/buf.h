/* tools/buf.h — a growable text buffer for the tools, which use only the
 * public headers (tfvm.h, tfvm_debug.h) and so not the library's own. */
#ifndef TFVM_TOOLS_BUF_H
#define TFVM_TOOLS_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct tb_buf {
    char *data;  /* NUL-terminated once anything was written */
    size_t len, cap;
    bool failed; /* an allocation failed: the text is incomplete */
} tb_buf;

void tb_init(tb_buf *b);
void tb_append(tb_buf *b, const char *s, size_t n);
void tb_printf(tb_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tb_free(tb_buf *b);
/* s as a JSON string: quotes, backslashes and control characters escaped,
 * and '<' (so that it may sit inside an HTML <script>). */
void tb_json_str(FILE *f, const char *s);

#endif
