/* tools/debug_vars.h — source variables in `tfvm debug`: the program's
 * variable table (tfvm_program_var), the values each variable had at each
 * tag as the run went by, and what `print NAME`, `info locals`, `info args`,
 * `display` and `watch NAME` show of them. Public headers only. */
#ifndef TFVM_TOOLS_DEBUG_VARS_H
#define TFVM_TOOLS_DEBUG_VARS_H

#include "tools/buf.h"
#include "tfvm_debug.h"

typedef struct dv_state dv_state;

/* NULL when memory runs out. A program without a variable table has none. */
dv_state *dv_new(const tfvm_program *p);
void dv_free(dv_state *s);
/* Whether name is a source variable of the program. */
bool dv_is_var(const dv_state *s, const char *name);
/* The number of distinct names, and name k (sorted), for completion. */
size_t dv_count(const dv_state *s);
const char *dv_name(const dv_state *s, size_t k);
/* Forgets every value (a new run). */
void dv_reset(dv_state *s);
/* watch NAME on (+1) or off (-1). */
void dv_watch(dv_state *s, const char *name, int delta);
/* Called before activation a fires: keeps the values of variables on its
 * inputs. Returns the name of a watched variable that got a new value at
 * a tag (its text in *value, its tag in *tag, valid until the next call or
 * dv_reset), or NULL (*value and *tag untouched). */
const char *dv_record(dv_state *s, tfvm_vm *vm, const tfvm_debug_act *a, const char **value, const char **tag);
/* `print NAME` (tag NULL: at cur or the innermost enclosing tag where the
 * variable lives) or `print NAME@TAG` (also when cur is NULL: what the
 * last run kept): "i = 3" into out; false with the error's text in out. */
bool dv_print(dv_state *s, tfvm_vm *vm, const tfvm_debug_ctx *cur, const char *name, const char *tag, tb_buf *out);
/* `info locals` (the variables of cur's region) or `info args` (the
 * arguments of the call cur is in, or the entry's): lines into out. */
void dv_info(dv_state *s, tfvm_vm *vm, const tfvm_debug_ctx *cur, bool args, tb_buf *out);
/* The arguments of call context c as ", x = 2, y = 3" (empty when none). */
void dv_call_args(dv_state *s, tfvm_vm *vm, const tfvm_debug_ctx *c, tb_buf *out);

#endif
