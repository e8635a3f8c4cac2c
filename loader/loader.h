/* loader/loader.h — .tfvm reader/writer (docs/format.md), the verifier, and
 * the .tfasm assembler/disassembler (docs/asm.md). Everything that turns bytes
 * or text into an isa_program, or back, goes through here. */
#ifndef TFVM_LOADER_H
#define TFVM_LOADER_H

#include "isa/isa.h"

/* Parses and verifies a .tfvm image. `name` prefixes every message:
 *   "fib.tfvm: bad .tfvm file (truncated destination table at byte 812)".
 * On failure *out is released (nothing leaks) and err says what and where. */
tfvm_status ld_read(const void *data, size_t size, const char *name, const tfvm_allocator *a,
                    isa_program *out, tfvm_error *err);

/* Whether data starts with the .tfvm magic; with `partial`, also when all of
 * it (nothing, or a cut-off file) is the start of the magic. Lets
 * tfvm_program_open recognise bytecode whatever the file is called. */
bool ld_has_magic(const void *data, size_t len, bool partial);

/* Serialises a verified program; deterministic: the same program always
 * gives the same bytes. Appends to `out`. */
tfvm_status ld_write(const isa_program *p, ut_buf *out, tfvm_error *err);

/* The public program handle around an isa_program, shared by every front end
 * (front/load.c, compiler/api.c, import/api.c), so that they all make it the
 * same way: ld_program_new gives an empty handle whose program uses cfg's
 * allocator (NULL if that fails); the front end fills p->isa; then
 * ld_program_finish(p, its status, out, err) (through an_program_finish, which
 * runs the analyser's load-time check first) makes the public entry view and
 * stores p in *out, or, when st (or that) fails, releases p->isa and p and
 * returns the failure. */
tfvm_program *ld_program_new(const tfvm_config *cfg);
tfvm_status ld_program_finish(tfvm_program *p, tfvm_status st, tfvm_program **out, tfvm_error *err);

/* Checks every index, count, size and the region rules of docs/isa.md.
 * Messages: "<p->name>: bad .tfvm file (instruction 12 'add': ...)" */
tfvm_status ld_verify(const isa_program *p, tfvm_error *err);

/* Assembles .tfasm text into a verified program. Errors:
 *   "name:line:col: message" (TFVM_ERR_SYNTAX), or the verifier's. */
tfvm_status ld_assemble(const char *text, size_t len, const char *name, const tfvm_allocator *a,
                        isa_program *out, tfvm_error *err);

/* Prints a program as .tfasm; ld_assemble of the output followed by
 * ld_write gives back the same bytes. Appends to `out`. */
tfvm_status ld_disassemble(const isa_program *p, ut_buf *out, tfvm_error *err);

/* One instruction's text form, exactly as ld_disassemble prints it (without
 * the indentation or newline): "sum = ADD (a, b)". Shared by tfvm dis,
 * --trace, errors and the debugger. */
void ld_format_inst(const isa_program *p, uint32_t i, ut_buf *out);

#endif
