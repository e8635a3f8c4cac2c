/* import/import.h — the front ends for models made elsewhere: ONNX
 * (import/onnx*.c, docs/onnx.md) and TensorFlow GraphDef (import/tf*.c,
 * docs/tensorflow.md). Each parses its protobuf with protobuf-c (C generated
 * at build time) and builds the compiler's structured IR (compiler/build.h),
 * so Loop/If/While and functions lower exactly as .tfg programs do. */
#ifndef TFVM_IMPORT_H
#define TFVM_IMPORT_H

#include "isa/isa.h"

/* An ONNX ModelProto (the bytes of a .onnx file) into a verified program with
 * one entry, "main": its parameters are the graph's inputs that are not
 * initializers, in order, named as in the graph; its results the graph's
 * outputs. `name` prefixes every message ("model.onnx: ..."). `dir` is where
 * external tensor data files are looked for (NULL: a model that has some is
 * an error). opt_level as for cc_compile. Errors are one line:
 * TFVM_ERR_FORMAT for bytes that are not a valid model (never a crash),
 * TFVM_ERR_UNSUPPORTED naming node, op type and opset, TFVM_ERR_IO for an
 * unreadable external file, TFVM_ERR_NOMEM. On failure *out is released. */
tfvm_status imp_onnx(const void *data, size_t len, const char *name, const char *dir, int opt_level,
                     const tfvm_allocator *a, isa_program *out, tfvm_error *err);

/* Who frees an importer's input bytes as soon as it reads them no more (the
 * ONNX importer: once the protobuf is unpacked, which copies what it keeps),
 * so that a big model's file and its parsed copy are not both held while
 * the program is built (ViT-B/16, 346 MB: `tfvm check` peak 1.02 -> 0.68 GB); fn NULL:
 * the caller keeps them. Called at most once, on success or failure. */
typedef struct imp_release {
    void (*fn)(void *ctx);
    void *ctx;
} imp_release;

/* imp_onnx, releasing data through rel once unpacked */
tfvm_status imp_onnx_release(const void *data, size_t len, imp_release rel, const char *name, const char *dir,
                             int opt_level, const tfvm_allocator *a, isa_program *out, tfvm_error *err);

/* A frozen TensorFlow GraphDef (binary) into a verified program with one
 * entry, "main": parameters are the Placeholders (in the file's order),
 * results the tensors named in `outputs` ("a,b:1"; NULL or "" = every node
 * output no one consumes). Errors as for imp_onnx; an unsupported op names
 * node and op. */
tfvm_status imp_tf(const void *data, size_t len, const char *name, const char *outputs, int opt_level,
                   const tfvm_allocator *a, isa_program *out, tfvm_error *err);

/* imp_tf, with notes (Placeholders that no result depends on, left out of
 * the parameters) to cfg->log at TFVM_LOG_WARN; cfg may be NULL. */
tfvm_status imp_tf_logged(const void *data, size_t len, const char *name, const char *outputs, int opt_level,
                          const tfvm_config *cfg, const tfvm_allocator *a, isa_program *out, tfvm_error *err);

/* A TensorFlow SavedModel directory (tf.saved_model.save): saved_model.pb's
 * graph with the variables of variables/ (a TensorBundle) as constants; the
 * entry's parameters and results are signature `signature`'s inputs and
 * outputs (NULL: serving_default), named by its keys. Errors as imp_tf's. */
tfvm_status imp_saved_model(const char *dir, const char *signature, int opt_level, const tfvm_config *cfg,
                            const tfvm_allocator *a, isa_program *out, tfvm_error *err);

/* fmt's importer (TFVM_FORMAT_ONNX or _TF) into a new program handle made
 * with cfg (import/api.c): `extra` is ONNX's base directory or TensorFlow's
 * outputs; `check`: the load-time check (an_program_finish); data released
 * through rel as soon as the importer is done with it (ONNX; TensorFlow's
 * importer keeps it to the end). The public imports (which keep their
 * bytes: rel {0}) and front/open.c's files both come here. */
tfvm_status imp_program(tfvm_format fmt, const void *data, size_t size, imp_release rel, const char *name,
                        const char *extra, int opt_level, bool check, const tfvm_config *cfg, tfvm_program **out,
                        tfvm_error *err);

/* imp_saved_model into a new program handle made with cfg (import/api.c). */
tfvm_status imp_program_saved_model(const char *dir, const char *signature, int opt_level, bool check,
                                    const tfvm_config *cfg, tfvm_program **out, tfvm_error *err);

#endif
