/* tfvm.h — the public interface of the tfvm tagged-token dataflow VM.
 *
 * Conventions (every function follows them):
 * - Handles are opaque. Every *_free(NULL) is a no-op.
 * - Errors, one convention: a call that can fail returns a tfvm_status
 *   (TFVM_OK is 0; tfvm_status_name names the others) and puts its message in
 *   one place, a tfvm_error record (code, message, and for a run's failure
 *   the instruction, tag and source position):
 *   - a call without a VM (loading, compiling, importing, saving programs,
 *     .npy files, tfvm_vm_new_ex) fills the `tfvm_error *err` it takes, when
 *     err is not NULL;
 *   - a call on a VM (a run, a session, the debugging calls of tfvm_debug.h)
 *     leaves it in the VM's record of its last failure, tfvm_last_error()
 *     (tfvm_errmsg() is its message); a session's calls also keep the last
 *     one's message in tfvm_session_errmsg() (what it meant to that host);
 *   - the few calls that take neither (tfvm_vm_new, queries such as
 *     tfvm_program_entry) return a code whose one meaning their comment gives,
 *     and tfvm_device_status writes its words into the caller's buffer.
 * - Nothing is printed from inside the library; diagnostics go to the log
 *   callback of the configuration (none by default).
 * - Process-wide state is set up once and kept for the life of the process:
 *   the devices (each opened at its first use, tfvm_device_status), OpenBLAS
 *   (loaded at the first matrix product), and OpenBLAS's thread count, which
 *   is process-global: it follows the worker count of the VM made last
 *   (tfvm_vm_new), so VMs of different worker counts running at once share
 *   one setting. Otherwise different VMs and programs may be used from
 *   different threads at the same time; one VM is used by one thread at a time.
 *   A loaded program is immutable and may be shared by many VMs concurrently.
 */
#ifndef TFVM_H
#define TFVM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TFVM_API __attribute__((visibility("default")))
#else
#define TFVM_API
#endif

#define TFVM_VERSION_MAJOR 0
#define TFVM_VERSION_MINOR 2
#define TFVM_VERSION_PATCH 0
#define TFVM_VERSION_STRING "0.2.0"
#define TFVM_VERSION_NUMBER (TFVM_VERSION_MAJOR * 10000 + TFVM_VERSION_MINOR * 100 + TFVM_VERSION_PATCH)
/* The version of the library actually loaded, "0.2.0" and 200 (its
 * TFVM_VERSION_NUMBER), which may differ from the header a program was built
 * with. TFVM_VERSION_OK() says whether the loaded library serves this header:
 * the same major version (and, while the major is 0, the same minor), and not
 * older. A program checks it once at start:
 *   if (!TFVM_VERSION_OK()) { fprintf(stderr, "need libtfvm %s, have %s\n",
 *                                     TFVM_VERSION_STRING, tfvm_version()); ... } */
#define TFVM_VERSION_OK()                                                                          \
    (tfvm_version_number() / 10000 == TFVM_VERSION_MAJOR &&                                      \
     (TFVM_VERSION_MAJOR != 0 || tfvm_version_number() / 100 % 100 == TFVM_VERSION_MINOR) &&     \
     tfvm_version_number() >= TFVM_VERSION_NUMBER)

/* Result codes. Messages say what and where; the code says what kind. */
typedef enum tfvm_status {
    TFVM_OK = 0,
    TFVM_ERR_NOMEM,     /* an allocation failed; nothing leaked           */
    TFVM_ERR_IO,        /* a file could not be read or written            */
    TFVM_ERR_FORMAT,    /* bad .tfvm/.npy file, or it fails verification   */
    TFVM_ERR_SYNTAX,    /* bad .tfasm text                                */
    TFVM_ERR_ARGUMENT,  /* bad argument to an API function or command     */
    TFVM_ERR_TYPE,      /* dtype mismatch at run time                     */
    TFVM_ERR_SHAPE,     /* shapes that do not broadcast                   */
    TFVM_ERR_ARITH,     /* integer division by zero, unrepresentable cast */
    TFVM_ERR_PORT,      /* two tokens for one input port at one tag       */
    TFVM_ERR_DEADNESS,  /* loop/call entered partly live, partly dead     */
    TFVM_ERR_STUCK,     /* quiescent, but a result never arrived          */
    TFVM_ERR_LIMIT,     /* a configured limit was exceeded                */
    TFVM_ERR_INTERRUPTED, /* stopped by tfvm_interrupt()                  */
    TFVM_ERR_INTERNAL,  /* a bug in tfvm                                  */
    TFVM_ERR_UNSUPPORTED, /* op/dtype not supported by the device running it */
    TFVM_ERR_DEVICE     /* a device is unavailable or failed              */
} tfvm_status;

/* Element types. Values are stable: they appear in .tfvm files. */
typedef enum tfvm_dtype {
    TFVM_BOOL = 1,
    TFVM_I32 = 2,
    TFVM_I64 = 3,
    TFVM_F32 = 4,
    TFVM_F64 = 5,
    TFVM_U8 = 6,  /* integers of 8 bits, arithmetic wraps like the wider ones */
    TFVM_I8 = 7,
    /* Storage dtypes (docs/isa.md, "Storage dtypes"): values, CAST and data
     * movement; imported graphs compute on them in the wide dtypes. */
    TFVM_I16 = 8,
    TFVM_U16 = 9,
    TFVM_U32 = 10,
    TFVM_U64 = 11,
    TFVM_F16 = 12,  /* IEEE binary16; scalars hold its bits (as.u16) */
    TFVM_BF16 = 13  /* bfloat16 (the top half of an f32); bits in as.u16 */
} tfvm_dtype;

#define TFVM_MAX_RANK 8

/* Name of a status code or dtype ("TFVM_ERR_NOMEM", "i32"); never NULL. */
TFVM_API const char *tfvm_status_name(tfvm_status s);
/* The loaded library's version (see TFVM_VERSION_OK above). Never NULL. */
TFVM_API const char *tfvm_version(void);
TFVM_API int tfvm_version_number(void);
TFVM_API const char *tfvm_dtype_name(tfvm_dtype d);
/* Size in bytes of one element of d (bool is 1 byte); 0 if d is invalid. */
TFVM_API size_t tfvm_dtype_size(tfvm_dtype d);

/* ---- Memory ------------------------------------------------------------
 * The allocation hook, realloc-shaped: fn(ud, NULL, 0, n) allocates,
 * fn(ud, p, old, n) resizes, fn(ud, p, old, 0) frees and returns NULL.
 * It must return NULL on failure (the library then reports TFVM_ERR_NOMEM
 * and releases what it had). fn = NULL means the C library's allocator.
 * Programs, tensors, values, contexts and the compiler's and importers' work
 * go through it; some memory does not: worker pools and their threads
 * (tfvm_pool_new), hwloc's topology, the matrix product's packing buffers
 * (one per thread that multiplies, kept for the thread's life), and what
 * OpenBLAS and the CUDA backend allocate for themselves use the C library
 * (or the GPU's allocator).
 * A VM with several worker threads calls it from all of them at once: it
 * must be thread-safe unless the configuration is deterministic. */
typedef void *(*tfvm_alloc_fn)(void *ud, void *ptr, size_t old_size, size_t new_size);
typedef struct tfvm_allocator {
    tfvm_alloc_fn fn;
    void *ud;
} tfvm_allocator;

/* ---- Errors ------------------------------------------------------------ */
typedef struct tfvm_error {
    tfvm_status code;
    char message[512]; /* one line, e.g. "fib.tfvm: bad .tfvm file (...)";
                          compile errors add the source line and a caret
                          line (tfvm_program_compile) */
    char instr[128];   /* instruction name, or "" when not about one      */
    char tag[256];     /* the tag it happened at, "[fib@1, loop#3]", or "" */
    char where[160];   /* the instruction's source position, "fib.tfg:12:39"
                          (a program compiled from .tfg), or "" when unknown;
                          tfvm prints it before the message */
} tfvm_error;

/* ---- Logging ----------------------------------------------------------- */
typedef enum tfvm_log_level { TFVM_LOG_ERROR, TFVM_LOG_WARN, TFVM_LOG_INFO, TFVM_LOG_DEBUG } tfvm_log_level;
typedef void (*tfvm_log_fn)(void *ud, tfvm_log_level level, const char *message);

/* ---- Devices -------------------------------------------------------------
 * Where compute instructions run (docs/devices.md). An instruction that
 * names a device (`on cpu`, `on cuda`) runs there whatever this says; work
 * whose operands are all scalars always runs on the host. */
typedef enum tfvm_device {
    TFVM_DEVICE_CPU = 0,  /* everything on the CPU (the default)                     */
    TFVM_DEVICE_CUDA = 1, /* tensor work on the GPU wherever it has the kernel;
                             tfvm_vm_new fails with TFVM_ERR_DEVICE without a GPU    */
    TFVM_DEVICE_AUTO = 2  /* MATMUL and large tensors on the GPU when one is ready,
                             everything on the CPU otherwise                         */
} tfvm_device;

/* State of device `name` ("cpu" or "cuda") as one line in buf, e.g.
 * "ready (2 cores, OpenBLAS 0.3.21)" or "unavailable: no device found".
 * Returns TFVM_OK when it is ready, TFVM_ERR_DEVICE when not,
 * TFVM_ERR_ARGUMENT for an unknown name. The first question about "cuda"
 * loads the CUDA backend library (libtfvm_cuda.so) and opens the GPU; devices
 * stay set up for the life of the process. Thread-safe. */
TFVM_API tfvm_status tfvm_device_status(const char *name, char *buf, size_t size);
/* The devices by index, "cpu" and "cuda" (NULL past the last); and the
 * tfvm_config.device that a name asks for: TFVM_DEVICE_CPU, TFVM_DEVICE_CUDA
 * or TFVM_DEVICE_AUTO for "cpu", "cuda" or "auto", -1 for any other name. */
TFVM_API const char *tfvm_device_name(size_t i);
TFVM_API int tfvm_device_by_name(const char *name);

/* ---- Worker pools --------------------------------------------------------
 * The threads a VM's runs use. They persist across runs: a run on an idle
 * pool wakes them (they spin briefly after each run, then sleep), it does not
 * create them. A VM makes its own pool at its first run with several workers;
 * several VMs may share one (tfvm_config.pool), and then their runs take
 * turns. Free a pool after every VM that uses it. */
typedef struct tfvm_pool tfvm_pool;

/* A pool of `threads` workers, the calling thread of each run included (0 =
 * one per physical core). The threads are not pinned to cores: the caller's
 * own thread may run anywhere, and a helper pinned beside it was measured
 * slower. NULL: out of memory. */
TFVM_API tfvm_pool *tfvm_pool_new(int threads);
TFVM_API void tfvm_pool_free(tfvm_pool *pool);

/* ---- Configuration -----------------------------------------------------
 * Always initialise with tfvm_config_init() and then set fields: new
 * fields get safe defaults that way. */
typedef struct tfvm_config {
    tfvm_allocator allocator; /* default: C library                      */
    tfvm_log_fn log;          /* default: NULL (silent)                  */
    void *log_ud;
    int threads;              /* worker threads; 0 = one per core        */
    bool deterministic;       /* single thread, fixed firing order       */
    uint64_t max_contexts;    /* 0 = unlimited; else TFVM_ERR_LIMIT      */
    tfvm_device device;       /* default: TFVM_DEVICE_CPU                */
    const char *sched;        /* scheduling policy by name (tfvm_sched_name);
                                 NULL: "deterministic" for one worker,
                                 "workstealing" for more                 */
    tfvm_pool *pool;          /* worker threads shared with other VMs;
                                 NULL: the VM's own (threads above)      */
} tfvm_config;

TFVM_API void tfvm_config_init(tfvm_config *cfg);
/* The i-th scheduling policy's name and one-line summary, or NULL past the
 * end: "workstealing", "deterministic". */
TFVM_API const char *tfvm_sched_name(size_t i, const char **summary);

/* ---- Tensors -----------------------------------------------------------
 * Dense, C-order (row-major), reference counted. A tensor returned to you
 * (tfvm_tensor_new, a run's result, tfvm_npy_load) holds one reference
 * that you release with tfvm_tensor_free. Tensors are immutable once
 * passed to a run (a VM may keep a device copy of one for as long as it
 * lives). Reference counting is thread-safe. */
typedef struct tfvm_tensor tfvm_tensor;

/* New zero-filled tensor; dims may be NULL when rank is 0. Returns NULL if
 * dtype/rank/dims are invalid (negative dims, rank > TFVM_MAX_RANK, byte
 * size overflow) or memory runs out. alloc may be NULL. */
TFVM_API tfvm_tensor *tfvm_tensor_new(tfvm_dtype dtype, int rank, const int64_t *dims,
                                      const tfvm_allocator *alloc);
/* A tensor over the caller's buffer, without a copy: data holds the
 * product(dims) elements of dtype in C order, aligned to the element size,
 * and stays valid and unchanged until release(ud, data) is called, once, when
 * the last reference goes (that may be on a VM's worker thread, after the
 * run that used it, or inside tfvm_tensor_free). release may be NULL when the
 * buffer outlives every reference anyway. Returns NULL (and never calls
 * release) for an invalid shape, NULL or misaligned data, or no memory; the
 * header is allocated with alloc (NULL = the C library). */
TFVM_API tfvm_tensor *tfvm_tensor_wrap(tfvm_dtype dtype, int rank, const int64_t *dims, void *data,
                                       void (*release)(void *ud, void *data), void *ud,
                                       const tfvm_allocator *alloc);
TFVM_API tfvm_tensor *tfvm_tensor_ref(tfvm_tensor *t); /* +1 reference */
TFVM_API void tfvm_tensor_free(tfvm_tensor *t);        /* -1 reference */
/* Whether the caller's reference is the only one, so that nobody else (a
 * program's constant, a VM, another result) sees the tensor: then the caller
 * may write its data, e.g. a run's result handed on as a writable array.
 * False for NULL. Thread-safe. */
TFVM_API bool tfvm_tensor_unique(const tfvm_tensor *t);
TFVM_API tfvm_dtype tfvm_tensor_dtype(const tfvm_tensor *t);
TFVM_API int tfvm_tensor_rank(const tfvm_tensor *t);
TFVM_API const int64_t *tfvm_tensor_dims(const tfvm_tensor *t);
TFVM_API int64_t tfvm_tensor_count(const tfvm_tensor *t); /* elements */
TFVM_API void *tfvm_tensor_data(tfvm_tensor *t);
TFVM_API const void *tfvm_tensor_cdata(const tfvm_tensor *t);

/* .npy files (format 1.0-3.0; little-endian, C order; b1 u1 i1 i4 i8 f4 f8). */
TFVM_API tfvm_status tfvm_npy_load(const char *path, const tfvm_allocator *alloc,
                                   tfvm_tensor **out, tfvm_error *err);
TFVM_API tfvm_status tfvm_npy_save(const char *path, const tfvm_tensor *t, tfvm_error *err);

/* ---- Values: what entry points take and return -------------------------
 * A scalar has tensor == NULL and its value in the union; a tensor value has
 * tensor != NULL (dtype repeats the tensor's dtype). */
typedef struct tfvm_value {
    tfvm_dtype dtype;
    tfvm_tensor *tensor;
    union {
        bool b;
        int32_t i32;
        int64_t i64;
        float f32;
        double f64;
        uint8_t u8;
        int8_t i8;
        int16_t i16;
        uint16_t u16; /* also the bits of an f16 or bf16 */
        uint32_t u32;
        uint64_t u64;
    } as;
} tfvm_value;

static inline tfvm_value tfvm_bool(bool v) { tfvm_value x = {TFVM_BOOL, NULL, {0}}; x.as.b = v; return x; }
static inline tfvm_value tfvm_i32(int32_t v) { tfvm_value x = {TFVM_I32, NULL, {0}}; x.as.i32 = v; return x; }
static inline tfvm_value tfvm_i64(int64_t v) { tfvm_value x = {TFVM_I64, NULL, {0}}; x.as.i64 = v; return x; }
static inline tfvm_value tfvm_f32(float v) { tfvm_value x = {TFVM_F32, NULL, {0}}; x.as.f32 = v; return x; }
static inline tfvm_value tfvm_f64(double v) { tfvm_value x = {TFVM_F64, NULL, {0}}; x.as.f64 = v; return x; }
static inline tfvm_value tfvm_u8(uint8_t v) { tfvm_value x = {TFVM_U8, NULL, {0}}; x.as.u8 = v; return x; }
static inline tfvm_value tfvm_i8(int8_t v) { tfvm_value x = {TFVM_I8, NULL, {0}}; x.as.i8 = v; return x; }
/* f16 and bf16 scalars of v (rounded to nearest even), and the value of one
 * (NaN for any other value). */
TFVM_API tfvm_value tfvm_f16(double v);
TFVM_API tfvm_value tfvm_bf16(double v);
TFVM_API double tfvm_half_value(tfvm_value v);
/* Borrowing wrapper: the run takes its own reference. */
static inline tfvm_value tfvm_tensor_value(tfvm_tensor *t) { tfvm_value x = {tfvm_tensor_dtype(t), t, {0}}; return x; }
/* An argument left out: its parameter's default (tfvm_param_info.has_default)
 * is used. A parameter without one refuses it (TFVM_ERR_ARGUMENT). */
static inline tfvm_value tfvm_default(void) { tfvm_value x = {(tfvm_dtype)0, NULL, {0}}; return x; }
static inline bool tfvm_is_default(const tfvm_value *v) { return v->dtype == 0 && !v->tensor; }
/* Releases the tensor of a result value (no-op for scalars). */
TFVM_API void tfvm_value_release(tfvm_value *v);

/* ---- Programs ----------------------------------------------------------
 * A program is a verified, immutable dataflow graph. Loading verifies every
 * index, count and size and the region rules, so a program that loads
 * cannot crash the VM. `name` is used in messages ("fib.tfvm: ..."). */
typedef struct tfvm_program tfvm_program;

/* The program in the file at path, in any format the tfvm command takes:
 * the same as tfvm_program_open(path, NULL, cfg, out, err) (below): .tfvm
 * bytes (by content), .tfasm text, .tfg source (entry main), .onnx, .pb. */
TFVM_API tfvm_status tfvm_program_load_file(const char *path, const tfvm_config *cfg,
                                            tfvm_program **out, tfvm_error *err);
/* .tfvm bytes: verified (above), not analysed: bytecode had the load-time
 * shape check (docs/check.md) when it was compiled or assembled, so loading
 * it runs no analysis (tfvm_open_options.check_bytecode asks for one). */
TFVM_API tfvm_status tfvm_program_load_memory(const void *data, size_t size, const char *name,
                                              const tfvm_config *cfg, tfvm_program **out,
                                              tfvm_error *err);
/* Assemble .tfasm text (docs/asm.md). Errors read "name:line:col: ...". */
TFVM_API tfvm_status tfvm_program_assemble(const char *text, size_t len, const char *name,
                                           const tfvm_config *cfg, tfvm_program **out,
                                           tfvm_error *err);
/* Compile .tfg graph-language source (docs/language.md) into a verified
 * program with one entry point. opts may be NULL (defaults: entry "main",
 * every optimization); initialise a tfvm_compile_options with
 * tfvm_compile_options_init() and then set fields. `name` prefixes messages.
 * Errors: TFVM_ERR_SYNTAX (the text does not parse) or TFVM_ERR_TYPE (a
 * name, type or entry-point error), with err->message holding three lines:
 *   "fib.tfg:2:14: expected ',' or ')' after an argument, got ';'"
 *   " 2 |     fib(n - 1;"
 *   "   |              ^"
 * (the source line and a caret under the column); TFVM_ERR_NOMEM when
 * memory runs out (nothing leaks); TFVM_ERR_ARGUMENT for NULL arguments.
 * On success *out is a new program (free it with tfvm_program_free); src is
 * not kept. Several errors are reported at once, one after another in
 * err->message (as many as fit). Warnings (unused names, unreachable code;
 * "fib.tfg:3:9: warning: ...") go to cfg->log at TFVM_LOG_WARN when the
 * compile succeeds. Safe to call from several threads at once. */
typedef struct tfvm_compile_options {
    const char *entry;  /* the function that becomes the entry point; NULL = "main" */
    int opt_level;      /* 0: no optimization (a plain lowering); 1: all (default) */
    bool overflow_trap; /* integer + - * that overflow stop the run with an error naming
                           the instruction (ADD_OV, SUB_OV, MUL_OV); false: they wrap */
} tfvm_compile_options;
TFVM_API void tfvm_compile_options_init(tfvm_compile_options *opts);
TFVM_API tfvm_status tfvm_program_compile(const char *src, size_t len, const char *name,
                                          const tfvm_compile_options *opts, const tfvm_config *cfg,
                                          tfvm_program **out, tfvm_error *err);

/* ---- Models made elsewhere (docs/onnx.md, docs/tensorflow.md) -----------
 * Each import makes a verified program with one entry point, "main".
 * Common to all four functions: `name` prefixes every message ("model.onnx:
 * ..."; NULL = "<onnx>" or "<pb>"); the bytes are not kept (weights are
 * copied into the program); every optimization is on (tfvm_program_open
 * takes an opt_level). On success *out is a new program (free it with
 * tfvm_program_free); on failure *out is NULL, nothing leaks, and err holds
 * one line. Codes: TFVM_ERR_ARGUMENT (NULL out, or NULL data with size > 0),
 * TFVM_ERR_IO (a file that cannot be read: "path: reason"), TFVM_ERR_FORMAT
 * (bytes that are not a valid model; never a crash), TFVM_ERR_UNSUPPORTED (an
 * op, opset or dtype tfvm does not have, naming the node), TFVM_ERR_NOMEM.
 * Safe to call from several threads at once.
 *
 * ONNX ModelProto bytes. The entry's parameters are the graph inputs that are
 * not initializers, in order and named as in the graph; its results are the
 * graph outputs. base_dir is the directory external tensor data files
 * (data_location = EXTERNAL) are read from, never outside it; NULL = none
 * (a model that has some then fails with TFVM_ERR_IO, as when a file is
 * missing). */
TFVM_API tfvm_status tfvm_program_import_onnx(const void *data, size_t size, const char *name,
                                              const char *base_dir, const tfvm_config *cfg,
                                              tfvm_program **out, tfvm_error *err);
/* Reads the .onnx file at path ("-" = standard input) and imports it; external
 * data is read relative to the file's directory (for "-": the current one). */
TFVM_API tfvm_status tfvm_program_import_onnx_file(const char *path, const tfvm_config *cfg,
                                                   tfvm_program **out, tfvm_error *err);
/* A frozen binary TensorFlow GraphDef (a .pb file's bytes). The entry's
 * parameters are the Placeholders, in the file's order; its results are the
 * tensors named in `outputs`, comma-separated, "node" or "node:index" (e.g.
 * "logits,split:1"), named as written there; NULL or "" = every node output
 * that no node consumes. An `outputs` entry that names no node output is
 * TFVM_ERR_ARGUMENT ("g.pb: output 'nope' names no node"). */
TFVM_API tfvm_status tfvm_program_import_tf(const void *data, size_t size, const char *name,
                                            const char *outputs, const tfvm_config *cfg,
                                            tfvm_program **out, tfvm_error *err);
TFVM_API tfvm_status tfvm_program_import_tf_file(const char *path, const char *outputs,
                                                 const tfvm_config *cfg, tfvm_program **out,
                                                 tfvm_error *err);

/* ---- Any program file ---------------------------------------------------
 * tfvm_program_open reads the file at `path` ("-" = standard input) and makes
 * a program of it, whatever its format: bytes that start with the .tfvm magic
 * are loaded as .tfvm bytecode; otherwise the name decides: .tfasm is
 * assembled, .tfg compiled, .onnx and .pb imported (above), .tfvm loaded. A
 * directory holding a saved_model.pb is a TensorFlow SavedModel (its
 * signature opts->signature, default serving_default; docs/tensorflow.md). A
 * name with none of these endings (standard input included) holding no .tfvm
 * bytes fails with TFVM_ERR_FORMAT "path: unknown format (...)"; set
 * opts->format to say what it is. opts may be NULL (every default); initialise
 * a tfvm_open_options with tfvm_open_options_init() and then set fields.
 * Messages and codes are those of the function the format leads to
 * (tfvm_program_load_memory, _assemble, _compile, _import_onnx, _import_tf:
 * their `name` is path), plus TFVM_ERR_IO "path: reason" for a file that
 * cannot be read and TFVM_ERR_ARGUMENT for a NULL path or out or a bad
 * opts->format. On success *out is a new program; on failure *out is NULL and
 * nothing leaks. Safe to call from several threads at once. */
typedef enum tfvm_format {
    TFVM_FORMAT_AUTO = 0, /* by content, then by the file name (the default) */
    TFVM_FORMAT_TFVM,     /* .tfvm bytecode (docs/format.md)                 */
    TFVM_FORMAT_TFASM,    /* .tfasm text (docs/asm.md)                       */
    TFVM_FORMAT_TFG,      /* .tfg graph-language source (docs/language.md)   */
    TFVM_FORMAT_ONNX,     /* ONNX ModelProto (docs/onnx.md)                  */
    TFVM_FORMAT_TF        /* frozen TensorFlow GraphDef (docs/tensorflow.md) */
} tfvm_format;
typedef struct tfvm_open_options {
    tfvm_format format;  /* TFVM_FORMAT_AUTO: find out (see above)               */
    const char *entry;   /* .tfg: the function compiled as the entry point;
                            NULL = "main". Other formats ignore it.             */
    const char *outputs; /* .pb: the results, as for tfvm_program_import_tf;
                            NULL = the outputs no node consumes. Others ignore it. */
    int opt_level;       /* .tfg, .onnx, .pb: 0 no optimization, 1 all (default) */
    bool overflow_trap;  /* .tfg: as tfvm_compile_options.overflow_trap */
    const char *signature; /* a SavedModel directory: the signature that becomes
                            the entry; NULL = serving_default. Others ignore it. */
    bool unchecked;      /* skip the load-time check (docs/check.md, "At load
                            time"): a program whose shapes conflict wherever it
                            runs opens anyway (tfvm check shows its conflicts) */
    bool check_bytecode; /* .tfvm: run the load-time check too (by default a
                            .tfvm is verified only: it was checked when it was
                            compiled or assembled). unchecked wins. */
} tfvm_open_options;
TFVM_API void tfvm_open_options_init(tfvm_open_options *opts);
TFVM_API tfvm_status tfvm_program_open(const char *path, const tfvm_open_options *opts,
                                       const tfvm_config *cfg, tfvm_program **out,
                                       tfvm_error *err);

/* Serialise to .tfvm bytes. *data is allocated with the program's allocator;
 * release it with tfvm_program_buffer_free. */
TFVM_API tfvm_status tfvm_program_save_memory(const tfvm_program *p, void **data, size_t *size,
                                              tfvm_error *err);
TFVM_API void tfvm_program_buffer_free(const tfvm_program *p, void *data, size_t size);
TFVM_API tfvm_status tfvm_program_save_file(const tfvm_program *p, const char *path,
                                            tfvm_error *err);
TFVM_API void tfvm_program_free(tfvm_program *p);

/* Entry points: name, parameters and results, with the shapes the program
 * declares (`x: f32[?, 784]`); every run checks its arguments and results
 * against them. Pointers stay valid for the program's lifetime. */
typedef struct tfvm_param_info {
    const char *name;
    tfvm_dtype dtype;
    int rank;             /* 0: a scalar (or a tensor declared with rank 0, see
                             is_tensor); -1: a tensor of any rank; else the
                             tensor's declared rank */
    bool is_tensor;       /* false: a scalar value (tfvm_value.tensor == NULL) */
    const int64_t *dims;  /* rank > 0: the declared dimensions, -1 where any size
                             fits (`?`); NULL otherwise */
    const char *const *dim_names; /* NULL, or rank entries: the name of a symbolic
                             dimension (`batch` in `f32[batch, 10]`, an ONNX
                             dim_param) where dims[k] is -1, else NULL. A named
                             dim fits any size, like `?` */
    bool has_default;     /* a parameter that may be left out (tfvm_default()):
                             the run then takes the program's default value
                             for it (an ONNX initializer named like a graph
                             input, docs/onnx.md; `= #K` in .tfasm) */
} tfvm_param_info;
typedef struct tfvm_entry_info {
    const char *name;
    size_t n_params, n_results;
    const tfvm_param_info *params, *results;
} tfvm_entry_info;
TFVM_API size_t tfvm_program_entry_count(const tfvm_program *p);
/* Index of entry `name`, or -1. */
TFVM_API int tfvm_program_find_entry(const tfvm_program *p, const char *name);
TFVM_API tfvm_status tfvm_program_entry(const tfvm_program *p, size_t index, tfvm_entry_info *out);
/* A parameter's type as signatures print it: "i32", "f32[?, 784]",
 * "f32[]" (a tensor of any rank). Returns buf. */
TFVM_API const char *tfvm_param_type(const tfvm_param_info *p, char *buf, size_t size);

/* Channels (docs/coexec.md): the names a program's FEEDs take values from
 * (tfvm_feed) and its FETCHes hand values to (tfvm_fetch), one per name, in
 * name order. Pointers stay valid for the program's lifetime. */
typedef struct tfvm_channel_info {
    const char *name;
    bool fetch;           /* FETCH: the graph hands values out; else FEED: it takes them in */
    tfvm_dtype dtype;     /* FEED: the value type its FEEDs declare; FETCH: 0 (any value) */
    bool is_tensor;       /* FEED: a tensor of dtype, of any rank; false: a scalar */
    uint32_t uses;        /* how many FEED (or FETCH) instructions name it */
} tfvm_channel_info;
TFVM_API size_t tfvm_program_channel_count(const tfvm_program *p);
/* TFVM_ERR_ARGUMENT when index is out of range (or p or out is NULL). */
TFVM_API tfvm_status tfvm_program_channel(const tfvm_program *p, size_t index, tfvm_channel_info *out);

/* ---- Virtual machines --------------------------------------------------
 * A VM runs entry points of one program, one run at a time. The program must
 * outlive the VM. */
typedef struct tfvm_vm tfvm_vm;

/* Returns TFVM_ERR_NOMEM, TFVM_ERR_ARGUMENT, or TFVM_ERR_DEVICE when
 * cfg->device is TFVM_DEVICE_CUDA and no GPU is ready (tfvm_device_status
 * says why). Tensors a VM made (results included) may outlive it. */
TFVM_API tfvm_status tfvm_vm_new(const tfvm_program *p, const tfvm_config *cfg, tfvm_vm **out);
/* tfvm_vm_new that also says why it failed, in err (when not NULL), e.g.
 * "cuda: unavailable: no device found" (the words of tfvm_device_status) or
 * "out of memory making a VM". Same codes; *out is NULL on failure. */
TFVM_API tfvm_status tfvm_vm_new_ex(const tfvm_program *p, const tfvm_config *cfg, tfvm_vm **out,
                                    tfvm_error *err);
/* A live session of the VM is cancelled first (as tfvm_session_cancel: calls
 * on it in other threads return), then freed with the VM. */
TFVM_API void tfvm_vm_free(tfvm_vm *vm);

/* Runs entry `entry` (NULL = the first entry) with n_args arguments and
 * stores the n_results results (which must equal the entry's counts). Each
 * argument must fit its parameter's declared type (tfvm_program_entry: dtype,
 * scalar or tensor, a declared rank and every known dimension), else the run
 * does not start: TFVM_ERR_ARGUMENT, "argument 2 'w1' of entry 'main':
 * expected f32[784, ?], got f32[10, 512]" (arguments count from 1). A result
 * that does not fit its declaration fails the run with TFVM_ERR_TYPE
 * ("result 0 'y' of entry 'main': declared f32[?, ?], got a rank-4 tensor");
 * an argument tfvm_default() takes its parameter's default, where it has one
 * ("argument 2 'w' of entry 'main' has no default: give a value");
 * a scalar fits a result declared as a tensor of any rank or of rank 0. On
 * success, tensor results are references owned by the caller. On failure
 * nothing is stored in results and tfvm_last_error(vm) says what happened:
 * the first runtime error, with its instruction, tag and source position. */
TFVM_API tfvm_status tfvm_run(tfvm_vm *vm, const char *entry, const tfvm_value *args,
                              size_t n_args, tfvm_value *results, size_t n_results);

/* ---- Sessions: the host feeds and fetches while the graph runs ----------
 * (docs/coexec.md). A session is a run of `entry` on its own thread; the
 * program's FEED instructions take the values the host feeds, per channel in
 * tag order, and its FETCH instructions hand copies back, per channel in tag
 * order. One session (or run) at a time per VM.
 *
 * tfvm_feed queues v on channel `name` and never blocks (the session takes
 * its own reference on a tensor: do not change it afterwards). tfvm_fetch
 * blocks until the channel's next value; *out is the host's (release it with
 * tfvm_value_release). A fetch that can never be satisfied returns
 * TFVM_ERR_STUCK at once, naming the FETCH and what it waits for: the run
 * ended, or every worker is idle waiting for a feed. The second assumes one
 * host thread: a host that feeds from another thread may get it while that
 * thread is late, and may fetch again (the run is not affected, and a fetch
 * after a feed finds its value). Once the run has failed,
 * each of these returns its error. tfvm_session_errmsg says what the last
 * failing call on the session meant (for one host thread; several threads
 * may feed and fetch at once, but then the message is the latest).
 * tfvm_session_finish says the host feeds no more (a FEED that still waits,
 * or waits later, fails the run: "... waits for value #4, but the host feeds
 * no more values"), waits for the run's end, stores its results as tfvm_run
 * does (tfvm_last_error(vm) has a failure) and ends the session;
 * tfvm_session_cancel stops the run and ends it. Values queued and not taken
 * are freed then. Other threads may be inside tfvm_feed and tfvm_fetch
 * meanwhile: a fetch blocked in the run gets its value or the run's end
 * (TFVM_ERR_STUCK, or the run's error: TFVM_ERR_INTERRUPTED "session
 * cancelled"), and the session ends only after every such call has returned.
 * A cancel while another thread finishes stops the run and waits for that
 * finish. The handle belongs to the VM, which gives the same handle to its
 * next session: after the end, calls on it return TFVM_ERR_ARGUMENT ("feed of
 * channel 'x': the session has ended"; tfvm_session_cancel does nothing)
 * until the VM starts another session; tfvm_vm_free frees it. */
typedef struct tfvm_session tfvm_session;
TFVM_API tfvm_status tfvm_session_start(tfvm_vm *vm, const char *entry, const tfvm_value *args, size_t n_args,
                                        tfvm_session **out);
TFVM_API tfvm_status tfvm_feed(tfvm_session *s, const char *name, const tfvm_value *v);
TFVM_API tfvm_status tfvm_fetch(tfvm_session *s, const char *name, tfvm_value *out);
TFVM_API tfvm_status tfvm_session_finish(tfvm_session *s, tfvm_value *results, size_t n_results);
TFVM_API void tfvm_session_cancel(tfvm_session *s);
TFVM_API const char *tfvm_session_errmsg(const tfvm_session *s);

/* Asks a run in progress (from another thread or a signal handler) to stop
 * with TFVM_ERR_INTERRUPTED. Async-signal-safe. The error says where the run
 * was: "interrupted at i_1 (LESS_EQUAL) in 'main' at depth 0, iteration #41
 * of loop 'sum_loop'" (the instruction next to fire, the innermost call's
 * function and how many calls deep, the innermost loop and its iteration),
 * with that instruction's `instr`, `where` and `tag` in tfvm_error; plain
 * "interrupted" when the worker that stopped had nothing in hand. */
TFVM_API void tfvm_interrupt(tfvm_vm *vm);

TFVM_API const char *tfvm_errmsg(const tfvm_vm *vm);
TFVM_API const tfvm_error *tfvm_last_error(const tfvm_vm *vm);

/* Counters of the last run. */
typedef struct tfvm_stats {
    uint64_t fired;            /* instructions fired (kernels run or dead-propagated) */
    uint64_t tokens;           /* tokens sent                                         */
    uint64_t matches;          /* tokens that completed a multi-input match           */
    uint64_t contexts_created; /* tags (call/iteration contexts) created              */
    uint64_t contexts_peak;    /* most contexts alive at once                         */
    uint64_t steals;           /* work-stealing scheduler: activations stolen         */
    uint64_t parks;            /* times a worker found no work and went to sleep      */
    uint64_t inline_runs;      /* activations run right after their producer, unqueued */
    uint64_t shared;           /* contexts touched by a worker other than their maker */
    uint32_t workers;          /* worker threads of the last run                      */
    double wall_seconds;
} tfvm_stats;
TFVM_API void tfvm_vm_stats(const tfvm_vm *vm, tfvm_stats *out);

#ifdef __cplusplus
}
#endif
#endif
