/* front/front.h — the front door's own loaders (front/load.c), with the
 * analyser's load-time check only when `check`: tfvm_program_assemble
 * passes true, tfvm_program_load_memory false (bytecode is verified, not
 * analysed), tfvm_program_open !opts->unchecked (and for .tfvm
 * opts->check_bytecode). */
#ifndef TFVM_FRONT_H
#define TFVM_FRONT_H

#include "tfvm.h"

tfvm_status fr_load(const void *data, size_t size, const char *name, bool check, const tfvm_config *cfg,
                    tfvm_program **out, tfvm_error *err);
tfvm_status fr_assemble(const char *text, size_t len, const char *name, bool check, const tfvm_config *cfg,
                        tfvm_program **out, tfvm_error *err);

#endif
