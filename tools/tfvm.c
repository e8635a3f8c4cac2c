/* tools/tfvm.c — the `tfvm` command: run, asm, dis, compile, devices, and the
 * file loading and argument binding that debug, dot and profile share. Every error ends the
 * command with one line on stderr ("tfvm: ...", plus the quoted source line
 * and a caret for .tfg compile errors) and a non-zero status: 1 for a failed
 * run or bad input file, 2 for bad usage. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "tfvm.h"
#include "tfvm_debug.h"
#include "tools/check.h"
#include "tools/debug.h"
#include "tools/opts.h"
#include "tools/profile.h"

#define COUNTOF(a) (sizeof(a) / sizeof((a)[0]))
/* Room for a channel's name (at most 64 bytes, docs/isa.md) and a prefix. */
#define CHAN_TEXT 96

#define EXIT_RUN 1
#define EXIT_USAGE 2

static const char *const usage_main =
    "usage: tfvm <command> [options] [args]\n"
    "\n"
    "tfvm runs tagged-token dataflow programs: .tfvm bytecode, .tfasm text,\n"
    ".tfg graph-language source, ONNX models (.onnx) and frozen TensorFlow\n"
    "graphs (.pb); every command that takes a FILE compiles the last four in memory.\n"
    "\n"
    "commands:\n"
    "  run FILE [ARG...] [NAME=VALUE...]\n"
    "                         run an entry point and print its results\n"
    "  asm FILE [-o OUT]      assemble .tfasm text into .tfvm bytecode\n"
    "  dis FILE [-o OUT]      print a program as .tfasm text\n"
    "  compile FILE           compile .tfg, .onnx or .pb to .tfvm (or .tfasm)\n"
    "  info FILE              the program's entry points with their signatures, and sizes\n"
    "  devices                list the devices (cpu, cuda) and their state\n"
    "  debug FILE [ARG...]    step through a run in an interactive debugger\n"
    "  dot FILE [-o OUT]      draw the program's graph (Graphviz; --svg renders it)\n"
    "  profile FILE [ARG...]  time repeated runs; the costliest opcodes and instructions\n"
    "  help [COMMAND]         show help for a command\n"
    "\n"
    "options:\n"
    "  -h, --help             show this help\n"
    "  --version              print the version\n"
    "\n"
    "Run `tfvm help COMMAND` for a command's options. Every command reads them\n"
    "the same way: a long option's value follows it or an '=' (--threads 2,\n"
    "--threads=2), and `--` ends the options.\n";

static const char *const usage_run =
    "usage: tfvm run [options] FILE [ARG...] [NAME=VALUE...]\n"
    "\n"
    "Runs an entry point of FILE and prints each result on its own line, as\n"
    "`name: value` when there are several (one result: its value alone):\n"
    "integers in decimal, floats with full precision, bools as true/false,\n"
    "tensors in NumPy's bracketed form. FILE is .tfvm bytecode (recognised by\n"
    "its content, whatever its name; '-' reads it from stdin), or, compiled in\n"
    "memory: .tfasm text, .tfg source, an ONNX model (.onnx; external data next\n"
    "to it), a frozen TensorFlow GraphDef (.pb; see --outputs) or a TensorFlow\n"
    "SavedModel directory (see --signature).\n"
    "\n"
    "Arguments bind by position (ARG), then by name (NAME=VALUE, NAME a\n"
    "parameter's name, which may hold '.', ':', '/', '-'; x also finds a\n"
    "parameter called x:0 and x:0 one called x, as TensorFlow spells them):\n"
    "    tfvm run model.onnx x=@x.npy n=5\n"
    "Each is parsed by the type of its parameter:\n"
    "  i32, i64, u8, i8  decimal integer (range-checked)\n"
    "  f32, f64          decimal or hexadecimal float, inf, nan\n"
    "  bool              true or false\n"
    "  tensor            @path.npy\n"
    "  (a scalar also takes @path.npy holding a 0-d array of its dtype)\n"
    "\n"
    "options:\n"
    "  -e, --entry NAME       entry point to run (default: the first); for .tfg,\n"
    "                         the function compiled as the entry (default: main)\n"
    "  -o NAME=PATH           write result NAME (or its 0-based position, when no\n"
    "                         result has that name; #N is always position N) to\n"
    "                         the .npy file PATH instead of printing it;\n"
    "                         repeatable. NAME ends at the first '=' (y:0 and a/b\n"
    "                         work)\n"
    "  --save-outputs DIR     write every result (but those of -o) to DIR/NAME.npy\n"
    "                         instead of printing it (DIR made when missing; in\n"
    "                         NAME every character but letters, digits, '.', '-'\n"
    "                         and '_' becomes '_'; a name taken by an earlier\n"
    "                         result gets _K, K its position)\n"
    "  --outputs A,B:1        .pb: the tensors that become the results, in order\n"
    "                         (default: every output no node consumes); a usage\n"
    "                         error for any other file\n"
    "  --signature NAME       a SavedModel directory: the signature to run\n"
    "                         (default: serving_default); its input and output\n"
    "                         keys name the parameters and results\n"
    "  --stats                print counters to stderr after the run (and, with\n"
    "                         several threads, the scheduler's steals and parks)\n"
    "  --max-contexts N       fail when more than N tags are alive at once\n"
    "  --threads N            worker threads (default: one per physical core, or\n"
    "                         the TFVM_THREADS environment variable)\n"
    "  --deterministic        one thread, the same firing order every run\n"
    "  --sched POLICY         the scheduling policy: workstealing (the default with\n"
    "                         several threads) or deterministic (one thread)\n"
    "  --overflow=trap        .tfg: integer + - * that overflow stop the run (default: wrap)\n"
    "  --device DEV           where tensor work runs: cpu (default), cuda (the GPU\n"
    "                         wherever it has the kernel; an error without one) or\n"
    "                         auto (MATMUL and large tensors on the GPU when there\n"
    "                         is one); or the TFVM_DEVICE environment variable.\n"
    "                         Instructions marked `on cpu`/`on cuda` stay there.\n"
    "  --feed NAME=V1,V2,...  values for the program's FEEDs of channel NAME, in\n"
    "                         order (docs/coexec.md), each parsed by the channel's\n"
    "                         type as an ARG is; repeatable, and values add up.\n"
    "                         A FEED still waiting when they run out fails the run;\n"
    "                         values never taken are said on stderr.\n"
    "                         Each value a FETCH hands out is printed before the\n"
    "                         results as `fetch NAME: VALUE` (channels by name)\n"
    "  -h, --help             show this help\n"
    "\n"
    "Options may also follow FILE; `--` ends them (then every word is an ARG).\n"
    "exit status: 0 success, 1 failed run or bad input file, 2 bad usage (an\n"
    "unknown option, a wrong number of arguments, an unknown NAME, a parameter\n"
    "given twice or not at all)\n";

static const char *const usage_devices =
    "usage: tfvm devices\n"
    "\n"
    "Lists each device and its state, one per line, e.g.\n"
    "  cpu: ready (2 cores, OpenBLAS 0.3.21)\n"
    "  cuda: unavailable: no device found\n"
    "Asking about cuda loads the CUDA backend (libtfvm_cuda.so; TFVM_CUDA_LIB\n"
    "names it explicitly) and opens the GPU. docs/devices.md tells more.\n";

static const char *const usage_asm =
    "usage: tfvm asm [options] FILE\n"
    "\n"
    "Assembles .tfasm text (FILE, or '-' for stdin) into .tfvm bytecode.\n"
    "Errors name FILE:LINE:COL. The syntax is in docs/asm.md.\n"
    "\n"
    "options:\n"
    "  -o OUT                 output file ('-' = stdout); default: FILE with\n"
    "                         its .tfasm suffix replaced by .tfvm\n"
    "  -h, --help             show this help\n";

static const char *const usage_dis =
    "usage: tfvm dis [options] FILE\n"
    "\n"
    "Prints a program (FILE: .tfvm, '-' for .tfvm bytes on stdin, or, compiled\n"
    "in memory, .tfasm, .tfg, .onnx or .pb) as the .tfasm text that `tfvm asm`\n"
    "turns back into the same bytes.\n"
    "\n"
    "options:\n"
    "  -o OUT                 output file (default: stdout)\n"
    "  --outputs A,B:1        .pb: the tensors that become results (as for run)\n"
    "  -h, --help             show this help\n";

static const char *const usage_compile =
    "usage: tfvm compile [options] FILE\n"
    "\n"
    "Compiles FILE into one static dataflow graph, written as .tfvm bytecode or\n"
    "as its .tfasm text. FILE is graph-language source (.tfg, docs/language.md;\n"
    "'-' reads it from stdin), an ONNX model (.onnx, docs/onnx.md; external\n"
    "data files are read from its directory), a frozen TensorFlow GraphDef\n"
    "(.pb, docs/tensorflow.md) or a SavedModel directory; .tfasm and .tfvm\n"
    "files are taken too. A\n"
    "compiled program has one entry point: main (or -e's function). .tfg\n"
    "errors name FILE:LINE:COL and quote the line with a caret under the column.\n"
    "    tfvm compile model.onnx -o model.tfvm\n"
    "    tfvm compile graph.pb -o g.tfvm --outputs logits,split:1\n"
    "\n"
    "options:\n"
    "  -o OUT                 output file ('-' = stdout); default: FILE with its\n"
    "                         .tfg/.onnx/.pb suffix replaced by .tfvm\n"
    "                         (--emit=tfvm), or stdout (--emit=asm)\n"
    "  --emit=tfvm            write .tfvm bytecode (the default)\n"
    "  --emit=asm             write .tfasm text\n"
    "  -e, --entry NAME       .tfg: the function that becomes the entry point\n"
    "                         (default: main)\n"
    "  --outputs A,B:1        .pb: the tensors that become the results, in order,\n"
    "                         each a node name or NODE:INDEX (default: every\n"
    "                         output no node consumes)\n"
    "  --signature NAME       a SavedModel directory: the signature compiled\n"
    "                         (default: serving_default)\n"
    "  -O0                    no optimization (a plain lowering; to compare against)\n"
    "  --overflow=trap        .tfg: integer + - * that overflow stop the run (default: wrap)\n"
    "  -h, --help             show this help\n";

__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tfvm: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_RUN;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tfvm: ", stderr);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see 'tfvm %s --help')\n", cmd);
    va_end(ap);
    return EXIT_USAGE;
}

static bool is_help(const char *a) { return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0; }

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Every command that takes a program file reads it through here:
 * tfvm_program_open, so .tfvm, .tfasm, .tfg, .onnx and .pb all work
 * (compiled in memory). entry: the .tfg function that becomes the entry
 * point (NULL = main); outputs: a .pb file's results (NULL = its unconsumed
 * outputs; any other file refuses it rather than ignore it). */
/* .tfg: --overflow=trap (run, compile); warnings of the compiler go to stderr */
static bool cli_overflow_trap;
/* a SavedModel directory: --signature NAME (run, compile, info) */
static const char *cli_signature;

static void cli_warning(void *ud, tfvm_log_level level, const char *message)
{
    (void)ud;
    if (level == TFVM_LOG_WARN)
        fprintf(stderr, "%s\n", message);
}

static int cli_overflow(const char *cmd, const char *v)
{
    if (v && strcmp(v, "trap") != 0 && strcmp(v, "wrap") != 0)
        return cli_usage_error(cmd, "--overflow takes trap or wrap, got '%s'", v);
    cli_overflow_trap = v && strcmp(v, "trap") == 0;
    return 0;
}

/* A usage error of the command's own, as the library reports its errors:
 * TFVM_ERR_ARGUMENT and the message in *err. */
__attribute__((format(printf, 2, 3))) static tfvm_status cli_err(tfvm_error *err, const char *fmt, ...)
{
    memset(err, 0, sizeof *err);
    err->code = TFVM_ERR_ARGUMENT;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return err->code;
}

static tfvm_status load_program(const char *path, const char *entry, const char *outputs, int opt_level,
                                tfvm_format format, tfvm_program **out, tfvm_error *err)
{
    if (outputs && !has_suffix(path, ".pb") && format != TFVM_FORMAT_TF)
        return cli_err(err, "--outputs %s: only a TensorFlow graph (.pb) takes --outputs, not %s", outputs, path);
    struct stat sb;
    if (cli_signature && (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        return cli_err(err, "--signature %s: only a SavedModel directory takes --signature, not %s", cli_signature,
                       path);
    tfvm_open_options o;
    tfvm_open_options_init(&o);
    o.format = format;
    o.entry = entry;
    o.outputs = outputs;
    o.signature = cli_signature;
    o.opt_level = opt_level;
    o.overflow_trap = cli_overflow_trap;
    tfvm_config cfg; /* .tfg compile warnings to stderr, as "file:line:col: warning: ..." */
    tfvm_config_init(&cfg);
    cfg.log = cli_warning;
    return tfvm_program_open(path, &o, &cfg, out, err);
}

int cli_run_failed(const tfvm_vm *vm)
{
    const tfvm_error *e = tfvm_last_error(vm);
    if (e->where[0]) /* "fib.tfg:12:39: add_12_39 (ADD) at [fib@2]: ..." like a compile error */
        return fail("%s: %s", e->where, e->message);
    return fail("%s", e->message);
}

int cli_load_failed(const tfvm_error *err)
{
    fail("%s", err->message);
    return err->code == TFVM_ERR_ARGUMENT ? EXIT_USAGE : EXIT_RUN;
}

/* ---- run --------------------------------------------------------------------- */

static tfvm_vm *volatile running_vm;

static volatile sig_atomic_t sigint_seen;
#define EXIT_SIGINT 130 /* 128 + SIGINT, as shells report a Ctrl-C */

/* Ctrl-C stops the run in progress; one that comes before the run starts
 * (while the program loads, or just before tfvm_run) is remembered, so that
 * the run is skipped or its results dropped: either way the command exits
 * 130 as if the run had been interrupted. */
static void on_sigint(int sig)
{
    (void)sig;
    sigint_seen = 1;
    if (running_vm)
        tfvm_interrupt(running_vm);
}

typedef struct out_spec {
    const char *name; /* result name, decimal position, or '#' and a position */
    const char *path;
    int index;        /* the result it names */
} out_spec;

static bool parse_u64(const char *s, uint64_t *out)
{
    if (!*s || *s == '-' || *s == '+')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* ---- Arguments by position and by name -------------------------------------- */

/* Whether `given` (len bytes) names `name`: the same text, or the same but
 * for a ":0" on one side (TensorFlow names a node's first output both ways:
 * "x" and "x:0"). */
static bool name_is(const char *name, const char *given, size_t len)
{
    size_t n = strlen(name);
    if (n == len && memcmp(name, given, len) == 0)
        return true;
    if (n == len + 2 && memcmp(name, given, len) == 0 && strcmp(name + len, ":0") == 0)
        return true;
    return len == n + 2 && memcmp(name, given, n) == 0 && memcmp(given + n, ":0", 2) == 0;
}

/* Index of the parameter (results = false) or result named by given[0..len),
 * an exact name first; -1 if none. */
static int find_named(const tfvm_entry_info *e, bool results, const char *given, size_t len)
{
    size_t n = results ? e->n_results : e->n_params;
    const tfvm_param_info *ps = results ? e->results : e->params;
    for (size_t i = 0; i < n; i++)
        if (strlen(ps[i].name) == len && memcmp(ps[i].name, given, len) == 0)
            return (int)i;
    for (size_t i = 0; i < n; i++)
        if (name_is(ps[i].name, given, len))
            return (int)i;
    return -1;
}

/* The length of NAME when text is "NAME=VALUE" with NAME a name-like token
 * ([A-Za-z_][A-Za-z0-9_.:/-]*: ONNX and TensorFlow names hold '.', ':', '/',
 * '-'); 0 when text is a positional argument. No positional value starts like
 * that: numbers, true/false and @path do not (an @path may hold '='). */
static size_t named_len(const char *text)
{
    const char *c = text;
    if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || *c == '_'))
        return 0;
    while ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
           (*c && strchr("_.:/-", *c)))
        c++;
    return *c == '=' ? (size_t)(c - text) : 0;
}

static void print_signature(const tfvm_entry_info *e, FILE *f);

/* "tfvm: main(n: i32)<what>" on stderr; returns the usage exit status. */
__attribute__((format(printf, 2, 3))) static int sig_error(const tfvm_entry_info *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tfvm: ", stderr);
    print_signature(e, stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_USAGE;
}

const char cli_default_arg[] = "default";

int cli_bind_args(const tfvm_entry_info *e, char *const *texts, size_t n, const char **bound)
{
    for (size_t k = 0; k < e->n_params; k++)
        bound[k] = NULL;
    size_t positional = 0, named = 0;
    for (size_t i = 0; i < n; i++) {
        if (named_len(texts[i])) {
            named++;
        } else if (named) {
            fprintf(stderr, "tfvm: argument '%s' follows a named argument: positional arguments come first\n",
                    texts[i]);
            return EXIT_USAGE;
        } else {
            positional++;
        }
    }
    bool defaults = false; /* then the parameters left out are named below */
    for (size_t k = 0; k < e->n_params; k++)
        defaults |= e->params[k].has_default;
    if (positional > e->n_params || (!named && !defaults && positional != e->n_params))
        return sig_error(e, " takes %zu argument%s, got %zu", e->n_params, e->n_params == 1 ? "" : "s", n);
    for (size_t i = 0; i < positional; i++)
        bound[i] = texts[i];
    for (size_t i = positional; i < n; i++) {
        size_t len = named_len(texts[i]);
        int k = find_named(e, false, texts[i], len);
        if (k < 0)
            return sig_error(e, " has no parameter named '%.*s'", (int)len, texts[i]);
        if (bound[k])
            return sig_error(e, ": parameter '%s' is given twice%s", e->params[k].name,
                             (size_t)k < positional ? " (by position and by name)" : "");
        bound[k] = texts[i] + len + 1;
    }
    size_t missing = 0; /* a parameter with a default may be left out (parse_arg) */
    for (size_t k = 0; k < e->n_params; k++)
        missing += !bound[k] && !e->params[k].has_default;
    if (missing) {
        fputs("tfvm: ", stderr);
        print_signature(e, stderr);
        fprintf(stderr, ": no argument for parameter%s ", missing == 1 ? "" : "s");
        for (size_t k = 0, m = 0; k < e->n_params; k++)
            if (!bound[k] && !e->params[k].has_default)
                fprintf(stderr, "%s'%s'", m++ ? ", " : "", e->params[k].name);
        fputc('\n', stderr);
        return EXIT_USAGE;
    }
    for (size_t k = 0; k < e->n_params; k++)
        if (!bound[k])
            bound[k] = cli_default_arg;
    return 0;
}

/* The value of the 0-d .npy file at path, which must hold one dtype. */
static bool npy_scalar(tfvm_dtype dtype, const char *path, tfvm_value *v, char *msg, size_t size)
{
    tfvm_tensor *t;
    tfvm_error err;
    if (tfvm_npy_load(path, NULL, &t, &err) != TFVM_OK) {
        snprintf(msg, size, "%s", err.message);
        return false;
    }
    char ty[160];
    bool ok = tfvm_tensor_dtype(t) == dtype && tfvm_tensor_rank(t) == 0;
    if (ok)
        memcpy(&v->as, tfvm_tensor_cdata(t), tfvm_dtype_size(dtype));
    else {
        tfvm_param_info q = {.dtype = tfvm_tensor_dtype(t), .is_tensor = true, .rank = tfvm_tensor_rank(t),
                             .dims = tfvm_tensor_dims(t)};
        snprintf(msg, size, "expected %s (a 0-d array), %s holds %s", tfvm_dtype_name(dtype), path,
                 tfvm_param_type(&q, ty, sizeof ty));
    }
    tfvm_tensor_free(t);
    return ok;
}

/* Shared with `tfvm debug --feed` (tools/debug.h). */
bool cli_parse_value(tfvm_dtype dtype, bool is_tensor, const char *text, tfvm_value *v, char *msg, size_t size)
{
#define BAD(...) do { snprintf(msg, size, __VA_ARGS__); return false; } while (0)
    const char *tname = tfvm_dtype_name(dtype);
    memset(v, 0, sizeof *v);
    if (is_tensor) {
        if (text[0] != '@')
            BAD("expected a tensor (@path.npy), got '%s'", text);
        tfvm_error err;
        if (tfvm_npy_load(text + 1, NULL, &v->tensor, &err) != TFVM_OK)
            BAD("%s", err.message);
        v->dtype = tfvm_tensor_dtype(v->tensor);
        if (v->dtype != dtype) {
            tfvm_tensor_free(v->tensor);
            v->tensor = NULL;
            BAD("expected a %s tensor, %s holds %s", tname, text + 1, tfvm_dtype_name(v->dtype));
        }
        return true;
    }
    v->dtype = dtype;
    if (text[0] == '@') /* a 0-d array, as NumPy, ONNX and TF tools save a scalar */
        return npy_scalar(dtype, text + 1, v, msg, size);
    char *end;
    errno = 0;
    switch (dtype) {
    case TFVM_BOOL:
        if (strcmp(text, "true") == 0)
            v->as.b = true;
        else if (strcmp(text, "false") == 0)
            v->as.b = false;
        else
            BAD("expected bool (true or false), got '%s'", text);
        return true;
    case TFVM_I32:
    case TFVM_I64:
    case TFVM_U8:
    case TFVM_I8:
    case TFVM_I16:
    case TFVM_U16:
    case TFVM_U32: {
        long long x = strtoll(text, &end, 10);
        if (!*text || *end || end == text)
            BAD("expected %s, got '%s'", tname, text);
        const long long lo = dtype == TFVM_I32 ? INT32_MIN : dtype == TFVM_I8 ? INT8_MIN
                           : dtype == TFVM_I16 ? INT16_MIN : dtype == TFVM_I64 ? INT64_MIN : 0;
        const long long hi = dtype == TFVM_I32 ? INT32_MAX : dtype == TFVM_U8 ? UINT8_MAX
                           : dtype == TFVM_I8  ? INT8_MAX  : dtype == TFVM_I16 ? INT16_MAX
                           : dtype == TFVM_U16 ? UINT16_MAX : dtype == TFVM_U32 ? (long long)UINT32_MAX : INT64_MAX;
        if (errno == ERANGE || x < lo || x > hi)
            BAD("%s out of range for %s", text, tname);
        switch (dtype) {
        case TFVM_I32: v->as.i32 = (int32_t)x; break;
        case TFVM_U8: v->as.u8 = (uint8_t)x; break;
        case TFVM_I8: v->as.i8 = (int8_t)x; break;
        case TFVM_I16: v->as.i16 = (int16_t)x; break;
        case TFVM_U16: v->as.u16 = (uint16_t)x; break;
        case TFVM_U32: v->as.u32 = (uint32_t)x; break;
        default: v->as.i64 = x; break;
        }
        return true;
    }
    case TFVM_U64: {
        unsigned long long x = strtoull(text, &end, 10);
        if (!*text || *end || end == text || text[0] == '-')
            BAD("expected %s, got '%s'", tname, text);
        if (errno == ERANGE)
            BAD("%s out of range for %s", text, tname);
        v->as.u64 = x;
        return true;
    }
    case TFVM_F32:
    case TFVM_F64:
    case TFVM_F16:
    case TFVM_BF16: {
        double x = strtod(text, &end);
        if (!*text || *end || end == text)
            BAD("expected %s, got '%s'", tname, text);
        if (dtype == TFVM_F32)
            v->as.f32 = (float)x;
        else if (dtype == TFVM_F64)
            v->as.f64 = x;
        else
            *v = dtype == TFVM_F16 ? tfvm_f16(x) : tfvm_bf16(x);
        return true;
    }
    }
    BAD("unsupported type");
#undef BAD
}

/* text as a value of p's type; `what` names it in messages ("argument 1 'n'"). */
static int parse_value(const char *what, const tfvm_param_info *p, const char *text, tfvm_value *v)
{
    char msg[512];
    if (!cli_parse_value(p->dtype, p->is_tensor, text, v, msg, sizeof msg))
        return fail("%s: %s", what, msg);
    return 0;
}

/* text cli_default_arg: the parameter was left out (cli_bind_args allows
 * that only for one with a default), and the run takes its default. */
static int parse_arg(const tfvm_entry_info *e, size_t i, const char *text, tfvm_value *v)
{
    if (text == cli_default_arg) {
        *v = tfvm_default();
        return 0;
    }
    char what[160];
    snprintf(what, sizeof what, "argument %zu '%s'", i + 1, e->params[i].name);
    return parse_value(what, &e->params[i], text, v);
}

/* A parameter's name as .tfasm writes it: quoted unless an identifier
 * (imported models' names: "x:0"). */
const char *cli_param_fmt(const char *name)
{
    bool ident = (*name >= 'A' && *name <= 'Z') || (*name >= 'a' && *name <= 'z') || *name == '_';
    for (const char *c = name; ident && *c; c++)
        ident = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_';
    return ident ? "%s%s: %s%s" : "%s\"%s\": %s%s";
}

const char *cli_param_type(const tfvm_param_info *p, char *buf, size_t size)
{
    return tfvm_param_type(p, buf, size);
}

/* "(x: f32[2, 4], W1: f32[4, 3] = default)": after `open`, a parameter with
 * a default says so (it may be left out). */
static void print_params(FILE *f, const char *open, const tfvm_param_info *ps, size_t n)
{
    char ty[160];
    fputs(open, f);
    for (size_t k = 0; k < n; k++)
        fprintf(f, cli_param_fmt(ps[k].name), k ? ", " : "", ps[k].name, cli_param_type(&ps[k], ty, sizeof ty),
                ps[k].has_default ? " = default" : "");
    fputs(")", f);
}

static void print_signature(const tfvm_entry_info *e, FILE *f)
{
    fputs(e->name, f);
    print_params(f, "(", e->params, e->n_params);
}

/* Shared with `tfvm debug`, `tfvm dot` and `tfvm profile` (tools/debug.h). */
tfvm_status cli_load_program(const char *path, const char *entry, const char *outputs, tfvm_program **out,
                             tfvm_error *err)
{
    return load_program(path, entry, outputs, 1, TFVM_FORMAT_AUTO, out, err);
}
int cli_parse_arg(const tfvm_entry_info *e, size_t i, const char *text, tfvm_value *v)
{
    return parse_arg(e, i, text, v);
}
void cli_print_signature(const tfvm_entry_info *e, FILE *f) { print_signature(e, f); }

/* A result by name (as for arguments: "y" also finds "y:0"), else by 0-based
 * position; -1 if neither. */
static int find_result(const tfvm_entry_info *e, const char *name)
{
    uint64_t k;
    if (name[0] == '#') /* a position, whatever the names are */
        return parse_u64(name + 1, &k) && k < e->n_results ? (int)k : -1;
    int i = find_named(e, true, name, strlen(name));
    if (i >= 0)
        return i;
    if (parse_u64(name, &k) && k < e->n_results)
        return (int)k;
    return -1;
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;
}

static void print_stats(const tfvm_vm *vm)
{
    tfvm_stats s;
    tfvm_vm_stats(vm, &s);
    fprintf(stderr,
            "stats: fired %llu, tokens %llu, matches %llu, contexts created %llu, contexts peak %llu, "
            "wall %.6f s, peak memory %.1f MB\n",
            (unsigned long long)s.fired, (unsigned long long)s.tokens, (unsigned long long)s.matches,
            (unsigned long long)s.contexts_created, (unsigned long long)s.contexts_peak, s.wall_seconds,
            (double)peak_rss_kb() / 1024.0);
    if (s.workers > 1)
        fprintf(stderr, "scheduler: %u workers, steals %llu, parks %llu, inline runs %llu, contexts shared %llu\n",
                s.workers, (unsigned long long)s.steals, (unsigned long long)s.parks,
                (unsigned long long)s.inline_runs, (unsigned long long)s.shared);
    /* Memory pools and copies, once there was tensor work */
    char line[512];
    if (tfvm_debug_device_stats(vm, line, sizeof line))
        fprintf(stderr, "%s\n", line);
}

enum { RUN_ENTRY, RUN_OUT, RUN_OUTPUTS, RUN_STATS, RUN_MAX_CONTEXTS, RUN_THREADS, RUN_DETERMINISTIC, RUN_DEVICE,
       RUN_OVERFLOW, RUN_SCHED, RUN_FEED, RUN_SIGNATURE, RUN_SAVE_OUTPUTS };
static const cli_opt run_opts[] = {
    [RUN_ENTRY] = {"-e", "--entry", "needs an entry name"},
    [RUN_OUT] = {"-o", NULL, "needs NAME=PATH"},
    [RUN_OUTPUTS] = {NULL, "--outputs", "needs a list of tensor names (a,b:1)"},
    [RUN_STATS] = {NULL, "--stats", NULL},
    [RUN_MAX_CONTEXTS] = {NULL, "--max-contexts", "needs a positive integer"},
    [RUN_THREADS] = {NULL, "--threads", "needs an integer from 1 to 1024"},
    [RUN_DETERMINISTIC] = {NULL, "--deterministic", NULL},
    [RUN_DEVICE] = {NULL, "--device", "takes cpu, cuda or auto"},
    [RUN_OVERFLOW] = {NULL, "--overflow", "takes trap or wrap"},
    [RUN_SCHED] = {NULL, "--sched", "takes workstealing or deterministic"},
    [RUN_FEED] = {NULL, "--feed", "needs NAME=V1,V2,..."},
    [RUN_SIGNATURE] = {NULL, "--signature", "needs a signature name"},
    [RUN_SAVE_OUTPUTS] = {NULL, "--save-outputs", "needs a directory"},
};

/* Prints a value as results are printed; false: stdout failed. */
static bool print_value(const tfvm_value *v, const char *prefix)
{
    size_t n = tfvm_value_format(v, NULL, 0);
    char *text = malloc(n + 1);
    if (!text)
        return false;
    tfvm_value_format(v, text, n + 1);
    bool ok = fputs(prefix, stdout) >= 0 && fwrite(text, 1, n, stdout) == n && putchar('\n') != EOF;
    free(text);
    return ok;
}

/* FEED channel name[0..len) of vm's program into *c; false if it has none. */
static bool feed_chan(const tfvm_vm *vm, const char *name, size_t len, tfvm_debug_chan_info *c)
{
    for (size_t k = 0; tfvm_debug_channel(vm, k, c) == TFVM_OK; k++)
        if (!c->fetch && strlen(c->name) == len && memcmp(c->name, name, len) == 0)
            return true;
    return false;
}

/* A run with a host: every --feed value queued up front, every channel a
 * FETCH hands values to printed as they come (channels by name), then the
 * results. */
static tfvm_status run_session(tfvm_vm *vm, const tfvm_entry_info *e, const cli_args *o, const tfvm_value *args,
                               tfvm_value *results, bool *usage)
{
    tfvm_session *s;
    tfvm_status st = tfvm_session_start(vm, e->name, args, e->n_params, &s);
    if (st != TFVM_OK)
        return st;
    tfvm_debug_chan_info c;
    for (size_t h = 0; h < o->n_hits && st == TFVM_OK; h++) {
        if (o->hits[h].opt != RUN_FEED)
            continue;
        const char *v = o->hits[h].value, *eq = strchr(v, '=');
        feed_chan(vm, v, (size_t)(eq - v), &c); /* there is one: cmd_run checked */
        char what[CHAN_TEXT];
        snprintf(what, sizeof what, "--feed %s", c.name);
        tfvm_param_info q = {.name = c.name, .dtype = c.dtype, .is_tensor = c.is_tensor, .rank = -1};
        for (const char *at = eq + 1; st == TFVM_OK;) {
            size_t len = strcspn(at, ",");
            char *text = strndup(at, len);
            tfvm_value x;
            memset(&x, 0, sizeof x);
            if (!text || parse_value(what, &q, text, &x) != 0)
                st = TFVM_ERR_ARGUMENT;
            else if ((st = tfvm_feed(s, c.name, &x)) != TFVM_OK)
                fail("--feed %s: %s", c.name, tfvm_session_errmsg(s));
            tfvm_value_release(&x);
            free(text);
            if (!at[len])
                break;
            at += len + 1;
        }
    }
    if (st != TFVM_OK) {
        tfvm_session_cancel(s);
        *usage = true;
        return TFVM_ERR_ARGUMENT;
    }
    for (size_t k = 0; tfvm_debug_channel(vm, k, &c) == TFVM_OK; k++) { /* the FETCH channels, by name */
        if (!c.fetch)
            continue;
        char prefix[CHAN_TEXT];
        snprintf(prefix, sizeof prefix, "fetch %s: ", c.name);
        tfvm_value x;
        while (tfvm_fetch(s, c.name, &x) == TFVM_OK) {
            bool ok = print_value(&x, prefix);
            tfvm_value_release(&x);
            if (!ok) {
                tfvm_session_cancel(s);
                fail("cannot write results");
                return TFVM_ERR_IO;
            }
        }
    }
    st = tfvm_session_finish(s, results, e->n_results);
    for (size_t k = 0; st == TFVM_OK && tfvm_debug_channel(vm, k, &c) == TFVM_OK; k++) /* nothing lost unsaid */
        if (!c.fetch && c.host > c.count)
            fprintf(stderr, "tfvm: warning: --feed %s: %llu of %llu values %s not taken\n", c.name,
                    (unsigned long long)(c.host - c.count), (unsigned long long)c.host,
                    c.host - c.count == 1 ? "was" : "were");
    return st;
}

/* A scheduling policy the library has (tfvm_sched_name). */
static bool sched_known(const char *name)
{
    const char *n;
    for (size_t i = 0; (n = tfvm_sched_name(i, NULL)) != NULL; i++)
        if (strcmp(n, name) == 0)
            return true;
    return false;
}

/* Writes v to the .npy file at path (a scalar as a 0-d array); false
 * after a message. */
static bool save_result(const tfvm_value *v, const char *path)
{
    tfvm_tensor *t = v->tensor;
    tfvm_error err;
    if (!t) {
        t = tfvm_tensor_new(v->dtype, 0, NULL, NULL);
        if (t)
            memcpy(tfvm_tensor_data(t), &v->as, tfvm_dtype_size(v->dtype));
    }
    bool ok = t && tfvm_npy_save(path, t, &err) == TFVM_OK;
    if (!ok)
        fail("%s", t ? err.message : "out of memory");
    if (t != v->tensor)
        tfvm_tensor_free(t);
    return ok;
}

/* DIR/NAME.npy for --save-outputs: NAME with every character but letters,
 * digits, '.', '-' and '_' as '_' ("a/b:1" is a_b_1.npy), and a name of
 * dots only as '_'; NAME_K.npy when k >= 0 (result k, whose name another
 * result's already took). malloc'd; NULL when memory runs out. */
static char *output_file(const char *dir, const char *name, long k)
{
    size_t nd = strlen(dir), nn = strlen(name);
    char *p = malloc(nd + nn + 32);
    if (!p)
        return NULL;
    memcpy(p, dir, nd);
    p[nd] = '/';
    char *f = p + nd + 1;
    bool dots = true;
    for (size_t i = 0; i < nn; i++) {
        char c = name[i];
        bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '-' || c == '_';
        f[i] = safe ? c : '_';
        dots = dots && c == '.';
    }
    if (dots) { /* "", ".", "..": never a hidden file, the directory or its parent */
        nn = nn ? nn : 1;
        memset(f, '_', nn);
    }
    snprintf(f + nn, 28, k >= 0 ? "_%ld.npy" : ".npy", k);
    return p;
}

/* Result k's --save-outputs file: output_file, made unique among the
 * results before it. */
static char *result_file(const char *dir, const tfvm_entry_info *e, size_t k)
{
    char *f = output_file(dir, e->results[k].name, -1);
    for (size_t j = 0; f && j < k; j++) {
        char *o = output_file(dir, e->results[j].name, -1);
        bool clash = !o || strcmp(o, f) == 0;
        free(o);
        if (clash) {
            free(f);
            return output_file(dir, e->results[k].name, (long)k);
        }
    }
    return f;
}

/* The results: each to its -o file, else to save_dir/NAME.npy, else
 * printed, as `name: value` when the entry has more than one (a single
 * result prints as its value alone, as it always has). Returns the exit
 * status. */
static int write_results(const tfvm_entry_info *e, const tfvm_value *results, const out_spec *outs, size_t n_outs,
                         const char *save_dir)
{
    int rc = 0;
    if (save_dir && mkdir(save_dir, 0777) != 0 && errno != EEXIST)
        return fail("--save-outputs %s: %s", save_dir, strerror(errno));
    for (size_t k = 0; k < e->n_results; k++) {
        const char *path = NULL;
        for (size_t j = 0; j < n_outs; j++)
            if (outs[j].index == (int)k)
                path = outs[j].path;
        char *file = !path && save_dir ? result_file(save_dir, e, k) : NULL;
        if (!path && save_dir && !file) {
            rc = fail("out of memory");
        } else if (path || file) {
            if (!save_result(&results[k], path ? path : file))
                rc = EXIT_RUN;
        } else {
            char prefix[512] = "";
            if (e->n_results > 1)
                snprintf(prefix, sizeof prefix, "%s: ", e->results[k].name);
            if (!print_value(&results[k], prefix))
                rc = fail("cannot write results");
        }
        free(file);
    }
    return rc;
}

static int cmd_run(int argc, char **argv)
{
    cli_args o;
    int rc_usage = cli_parse("run", usage_run, run_opts, COUNTOF(run_opts), CLI_FILE_ARGS, argc, argv, &o);
    if (rc_usage)
        return rc_usage < 0 ? 0 : rc_usage;
    const char *entry = o.val[RUN_ENTRY], *file = o.pos[0], *outputs = o.val[RUN_OUTPUTS];
    cli_signature = o.val[RUN_SIGNATURE];
    bool stats = o.val[RUN_STATS] != NULL, deterministic = o.val[RUN_DETERMINISTIC] != NULL;
    int threads = 0;
    uint64_t max_contexts = 0;
    /* where tensor work runs: --device, else TFVM_DEVICE, else the CPU */
    int device = TFVM_DEVICE_CPU;
    out_spec *outs = calloc(o.n_hits + 1, sizeof *outs); /* every -o, however many */
    size_t n_outs = 0;
    char **arg_text = o.pos + 1;
    int n_args = (int)o.n_pos - 1;
    if ((rc_usage = cli_threads("run", o.val[RUN_THREADS], &threads)) != 0 ||
        (rc_usage = cli_overflow("run", o.val[RUN_OVERFLOW])) != 0 ||
        (rc_usage = cli_device("run", o.val[RUN_DEVICE], &device)) != 0) {
    } else if (o.val[RUN_MAX_CONTEXTS] && (!parse_u64(o.val[RUN_MAX_CONTEXTS], &max_contexts) || max_contexts == 0)) {
        rc_usage = cli_usage_error("run", "--max-contexts needs a positive integer");
    } else if (o.val[RUN_SCHED] && !sched_known(o.val[RUN_SCHED])) {
        rc_usage = cli_usage_error("run", "--sched takes workstealing or deterministic, got '%s'", o.val[RUN_SCHED]);
    } else if (!outs) {
        rc_usage = fail("out of memory");
    }
    for (size_t h = 0; h < o.n_hits && !rc_usage; h++) {
        if (o.hits[h].opt == RUN_FEED) {
            const char *v = o.hits[h].value, *eq = strchr(v, '=');
            if (!eq || eq == v)
                rc_usage = cli_usage_error("run", "--feed expects NAME=V1,V2,..., got '%s'", v);
            continue;
        }
        if (o.hits[h].opt != RUN_OUT)
            continue;
        char *v = (char *)o.hits[h].value, *eq = strchr(v, '=');
        if (!eq || eq == v || !eq[1]) {
            rc_usage = cli_usage_error("run", "-o expects NAME=PATH, got '%s'", v);
        } else {
            *eq = '\0';
            outs[n_outs++] = (out_spec){v, eq + 1, -1};
        }
    }
    if (rc_usage) {
        free(outs);
        cli_args_free(&o);
        return rc_usage;
    }

    struct sigaction sa, old_sa;
    bool handling = false;
    if (device == TFVM_DEVICE_CUDA) { /* no GPU: say so before anything else */
        char state[256];
        if (tfvm_device_status("cuda", state, sizeof state) != TFVM_OK) {
            free(outs);
            cli_args_free(&o);
            return fail("cuda: %s", state);
        }
    }
    tfvm_error err;
    tfvm_program *prog;
    if (load_program(file, entry, outputs, 1, TFVM_FORMAT_AUTO, &prog, &err) != TFVM_OK) {
        free(outs);
        cli_args_free(&o);
        return cli_load_failed(&err);
    }

    int rc = EXIT_RUN;
    tfvm_vm *vm = NULL;
    tfvm_value *args = NULL, *results = NULL;
    const char **bound = NULL;
    tfvm_entry_info e;
    int ei = entry ? tfvm_program_find_entry(prog, entry) : 0;
    if (ei < 0 || tfvm_program_entry(prog, (size_t)ei, &e) != TFVM_OK) {
        if (entry)
            fail("%s: no entry point named '%s'", file, entry);
        else
            fail("%s: the program has no entry point", file);
        goto out;
    }
    bound = calloc(e.n_params + 1, sizeof *bound);
    if (!bound) {
        fail("out of memory");
        goto out;
    }
    if (cli_bind_args(&e, arg_text, (size_t)n_args, bound) != 0) {
        rc = EXIT_USAGE;
        goto out;
    }
    for (size_t k = 0; k < n_outs; k++) {
        outs[k].index = find_result(&e, outs[k].name);
        uint64_t pos;
        const char *num = outs[k].name + (outs[k].name[0] == '#');
        if (outs[k].index < 0 && parse_u64(num, &pos)) {
            fail("-o %s: entry '%s' has no result %s (it has %zu, numbered from 0)", outs[k].name, e.name, num,
                 e.n_results);
            rc = EXIT_USAGE;
            goto out;
        }
        if (outs[k].index < 0) {
            fail("-o %s: entry '%s' has no result named '%s'", outs[k].name, e.name, outs[k].name);
            rc = EXIT_USAGE;
            goto out;
        }
    }
    args = calloc(e.n_params + 1, sizeof *args);
    results = calloc(e.n_results + 1, sizeof *results);
    if (!args || !results) {
        fail("out of memory");
        goto out;
    }
    for (size_t k = 0; k < e.n_params; k++)
        if (parse_arg(&e, k, bound[k], &args[k]) != 0)
            goto out;
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.max_contexts = max_contexts;
    cfg.threads = threads;
    cfg.deterministic = deterministic || threads == 1;
    cfg.device = (tfvm_device)device;
    cfg.sched = o.val[RUN_SCHED];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    handling = sigaction(SIGINT, &sa, &old_sa) == 0;
    tfvm_status vst = tfvm_vm_new(prog, &cfg, &vm);
    if (vst == TFVM_ERR_DEVICE) {
        char state[256];
        tfvm_device_status("cuda", state, sizeof state);
        fail("cuda: %s", state);
        goto out;
    } else if (vst != TFVM_OK) {
        fail("%s creating the VM", vst == TFVM_ERR_NOMEM ? "out of memory" : tfvm_status_name(vst));
        goto out;
    }
    for (size_t h = 0; h < o.n_hits; h++) { /* every --feed names a FEED channel */
        const char *v = o.hits[h].value, *eq = v ? strchr(v, '=') : NULL;
        tfvm_debug_chan_info c;
        if (o.hits[h].opt != RUN_FEED || feed_chan(vm, v, (size_t)(eq - v), &c))
            continue;
        char list[256] = "";
        size_t n = 0;
        for (size_t k = 0; tfvm_debug_channel(vm, k, &c) == TFVM_OK && n < sizeof list; k++)
            if (!c.fetch)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s'%s'", n ? ", " : "", c.name);
        fail("--feed %.*s: the program has no FEED channel '%.*s' (its FEED channels: %s)", (int)(eq - v), v,
             (int)(eq - v), v, n ? list : "none");
        rc = EXIT_USAGE;
        goto out;
    }
    running_vm = vm;
    bool bad_feed = false; /* the program feeds or fetches: a session */
    tfvm_status st = sigint_seen          ? TFVM_ERR_INTERRUPTED
                     : tfvm_debug_channels(vm) ? run_session(vm, &e, &o, args, results, &bad_feed)
                                          : tfvm_run(vm, e.name, args, e.n_params, results, e.n_results);
    running_vm = NULL;
    if (bad_feed) { /* a bad --feed value, said */
        rc = EXIT_USAGE;
        goto out;
    }
    if (st == TFVM_OK && sigint_seen) { /* came as the run started, and did not stop it */
        for (size_t k = 0; k < e.n_results; k++)
            tfvm_value_release(&results[k]);
        st = TFVM_ERR_INTERRUPTED;
    }
    if (st == TFVM_ERR_INTERRUPTED) { /* where the run was, when it had started */
        if (tfvm_last_error(vm)->code == TFVM_ERR_INTERRUPTED)
            cli_run_failed(vm);
        else
            fail("interrupted");
        rc = EXIT_SIGINT;
        goto out;
    }
    if (st != TFVM_OK) {
        cli_run_failed(vm);
        goto out;
    }
    rc = write_results(&e, results, outs, n_outs, o.val[RUN_SAVE_OUTPUTS]);
    if (fflush(stdout) != 0)
        rc = fail("cannot write results: %s", strerror(errno));
out:
    if (stats && vm)
        print_stats(vm);
    if (args)
        for (size_t k = 0; k < e.n_params; k++)
            tfvm_value_release(&args[k]);
    if (results)
        for (size_t k = 0; k < e.n_results; k++)
            tfvm_value_release(&results[k]);
    free(args);
    free(results);
    free(bound);
    free(outs);
    cli_args_free(&o);
    tfvm_vm_free(vm);
    tfvm_program_free(prog);
    if (handling)
        sigaction(SIGINT, &old_sa, NULL);
    return sigint_seen ? EXIT_SIGINT : rc;
}

/* ---- asm / dis ------------------------------------------------------------------ */

/* FILE and -o OUT; outputs != NULL also takes --outputs (dis reads .pb). */
static int parse_io(const char *cmd, const char *usage, int argc, char **argv, const char **in, const char **out,
                    const char **outputs)
{
    static const cli_opt opts[] = {{"-o", NULL, "needs a file name"},
                                   {NULL, "--outputs", "needs a list of tensor names (a,b:1)"}};
    cli_args o;
    int rc = cli_parse(cmd, usage, opts, outputs ? 2 : 1, CLI_ONE_FILE, argc, argv, &o);
    if (rc)
        return rc;
    *in = o.pos[0];
    *out = o.val[0];
    if (outputs)
        *outputs = o.val[1];
    cli_args_free(&o); /* the strings live in argv */
    return 0;
}

static int cmd_asm(int argc, char **argv)
{
    const char *in, *out;
    int rc = parse_io("asm", usage_asm, argc, argv, &in, &out, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    char *default_out = NULL;
    if (!out) {
        size_t n = strlen(in);
        if (strcmp(in, "-") == 0)
            return cli_usage_error("asm", "reading stdin needs -o OUT");
        size_t stem = n >= 6 && strcmp(in + n - 6, ".tfasm") == 0 ? n - 6 : n;
        default_out = malloc(stem + 6);
        if (!default_out)
            return fail("out of memory");
        memcpy(default_out, in, stem);
        memcpy(default_out + stem, ".tfvm", 6);
        out = default_out;
    }
    tfvm_error err;
    tfvm_open_options opts;
    tfvm_open_options_init(&opts);
    opts.format = TFVM_FORMAT_TFASM;
    tfvm_program *prog = NULL;
    rc = 0;
    if (tfvm_program_open(in, &opts, NULL, &prog, &err) != TFVM_OK ||
        tfvm_program_save_file(prog, out, &err) != TFVM_OK)
        rc = fail("%s", err.message);
    tfvm_program_free(prog);
    free(default_out);
    return rc;
}

static int cmd_dis(int argc, char **argv)
{
    const char *in, *out, *outputs = NULL;
    int rc = parse_io("dis", usage_dis, argc, argv, &in, &out, &outputs);
    if (rc)
        return rc < 0 ? 0 : rc;
    tfvm_error err;
    tfvm_program *prog;
    if (load_program(in, NULL, outputs, 1, TFVM_FORMAT_AUTO, &prog, &err) != TFVM_OK)
        return cli_load_failed(&err);
    if (tfvm_program_disassemble_file(prog, out ? out : "-", &err) != TFVM_OK)
        rc = fail("%s", err.message);
    tfvm_program_free(prog);
    return rc;
}

/* The default output of `compile IN`: IN with its source suffix replaced by .tfvm. */
static char *default_output(const char *in)
{
    static const char *const sources[] = {".tfg", ".onnx", ".pb", ".tfasm"};
    size_t n = strlen(in), stem = n;
    while (stem > 1 && in[stem - 1] == '/') /* a SavedModel directory "m/" makes m.tfvm */
        stem--;
    for (size_t i = 0; i < COUNTOF(sources); i++)
        if (has_suffix(in, sources[i]))
            stem = n - strlen(sources[i]);
    char *o = malloc(stem + 6);
    if (o) {
        memcpy(o, in, stem);
        memcpy(o + stem, ".tfvm", 6);
    }
    return o;
}

static int cmd_compile(int argc, char **argv)
{
    enum { C_OUT, C_ENTRY, C_OUTPUTS, C_EMIT, C_O0, C_O1, C_O, C_OVERFLOW, C_SIGNATURE };
    static const cli_opt opts[] = {
        [C_OUT] = {"-o", NULL, "needs a file name"},
        [C_ENTRY] = {"-e", "--entry", "needs a function name"},
        [C_OUTPUTS] = {NULL, "--outputs", "needs a list of tensor names (a,b:1)"},
        [C_EMIT] = {NULL, "--emit", "takes asm or tfvm"},
        [C_O0] = {"-O0", NULL, NULL},
        [C_O1] = {"-O1", NULL, NULL},
        [C_O] = {"-O", NULL, NULL},
        [C_OVERFLOW] = {NULL, "--overflow", "takes trap or wrap"},
        [C_SIGNATURE] = {NULL, "--signature", "needs a signature name"},
    };
    cli_args o;
    int rc = cli_parse("compile", usage_compile, opts, COUNTOF(opts), CLI_ONE_FILE, argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    const char *in = o.pos[0], *out = o.val[C_OUT], *entry = o.val[C_ENTRY], *outputs = o.val[C_OUTPUTS];
    cli_signature = o.val[C_SIGNATURE];
    bool asm_text = false;
    int opt = 1;
    for (size_t h = 0; h < o.n_hits; h++) { /* the last of -O0/-O1/-O and of --emit wins */
        if (o.hits[h].opt == C_O0)
            opt = 0;
        else if (o.hits[h].opt == C_O1 || o.hits[h].opt == C_O)
            opt = 1;
        else if (o.hits[h].opt == C_EMIT && strcmp(o.hits[h].value, "asm") != 0 && strcmp(o.hits[h].value, "tfvm") != 0)
            rc = cli_usage_error("compile", "--emit takes asm or tfvm, got '%s'", o.hits[h].value);
        else if (o.hits[h].opt == C_EMIT)
            asm_text = strcmp(o.hits[h].value, "asm") == 0;
        else if (o.hits[h].opt == C_OVERFLOW && !rc)
            rc = cli_overflow("compile", o.hits[h].value);
    }
    cli_args_free(&o);
    if (rc)
        return rc;

    char *default_out = NULL;
    if (!out && asm_text) {
        out = "-";
    } else if (!out) {
        if (strcmp(in, "-") == 0)
            return cli_usage_error("compile", "reading stdin needs -o OUT");
        if (!(default_out = default_output(in)))
            return fail("out of memory");
        out = default_out;
    }
    tfvm_error err;
    tfvm_program *prog = NULL;
    /* standard input holds graph-language source, as it always has */
    tfvm_format format = strcmp(in, "-") == 0 ? TFVM_FORMAT_TFG : TFVM_FORMAT_AUTO;
    if (load_program(in, entry, outputs, opt, format, &prog, &err) != TFVM_OK) {
        rc = cli_load_failed(&err);
    } else if (asm_text) {
        if (tfvm_program_disassemble_file(prog, out, &err) != TFVM_OK)
            rc = fail("%s", err.message);
    } else if (tfvm_program_save_file(prog, out, &err) != TFVM_OK) {
        rc = fail("%s", err.message);
    }
    tfvm_program_free(prog);
    free(default_out);
    return rc;
}

/* ---- devices ---------------------------------------------------------------------- */

static int cmd_devices(int argc, char **argv)
{
    cli_args o;
    int rc = cli_parse("devices", usage_devices, NULL, 0, CLI_NO_FILE, argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    cli_args_free(&o);
    const char *name;
    for (size_t i = 0; (name = tfvm_device_name(i)) != NULL; i++) {
        char state[256];
        tfvm_device_status(name, state, sizeof state);
        printf("%s: %s\n", name, state);
    }
    return fflush(stdout) == 0 ? 0 : fail("cannot write: %s", strerror(errno));
}

/* ---- info ------------------------------------------------------------------------- */

static const char *const usage_info =
    "usage: tfvm info [options] FILE\n"
    "\n"
    "Describes a program (FILE: .tfvm, or, compiled in memory, .tfasm, .tfg,\n"
    ".onnx, .pb or a SavedModel directory): its size as .tfvm bytecode, the source file its positions\n"
    "refer to, its regions, instructions, edges, call sites and constants, and\n"
    "each entry point with its declared signature, e.g.\n"
    "  entry main(w1: f32[784, 512], x: f32[?, 784]) -> (logits: f32[?, 10])\n"
    "(f32[...] is a tensor of any rank, ? a dimension of any size, a name such\n"
    "as batch one of any size that an imported model names; every run checks\n"
    "its arguments and results against these), then the channels a host feeds\n"
    "and fetches (docs/coexec.md), by name, e.g.\n"
    "  channel loss: fetched\n"
    "  channel x: fed f32[...] (2 FEEDs)\n"
    "\n"
    "options:\n"
    "  -e, --entry NAME       .tfg: the function compiled as the entry (default: main)\n"
    "  --outputs A,B:1        .pb: the tensors that become results (as for run)\n"
    "  --signature NAME       a SavedModel directory: its signature (as for run)\n"
    "  -h, --help             show this help\n";

static int cmd_info(int argc, char **argv)
{
    static const cli_opt opts[] = {{"-e", "--entry", "needs a function name"},
                                   {NULL, "--outputs", "needs a list of tensor names (a,b:1)"},
                                   {NULL, "--signature", "needs a signature name"}};
    cli_args o;
    int rc = cli_parse("info", usage_info, opts, COUNTOF(opts), CLI_ONE_FILE, argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    const char *in = o.pos[0], *entry = o.val[0], *outputs = o.val[1];
    cli_signature = o.val[2];
    cli_args_free(&o);
    tfvm_error err;
    tfvm_program *prog;
    if (load_program(in, entry, outputs, 1, TFVM_FORMAT_AUTO, &prog, &err) != TFVM_OK)
        return cli_load_failed(&err);
    void *bytes = NULL;
    size_t size = 0;
    if (tfvm_program_save_memory(prog, &bytes, &size, &err) != TFVM_OK) {
        tfvm_program_free(prog);
        return fail("%s", err.message);
    }
    unsigned minor = size >= 12 ? ((const unsigned char *)bytes)[10] : 0;
    tfvm_program_buffer_free(prog, bytes, size);
    size_t n_regions = tfvm_program_region_count(prog), loops = 0, funcs = 0;
    for (uint32_t r = 0; r < n_regions; r++) {
        tfvm_region_info ri;
        tfvm_program_region(prog, r, &ri);
        loops += strcmp(ri.kind, "loop") == 0;
        funcs += strcmp(ri.kind, "func") == 0;
    }
    size_t n_insts = tfvm_program_inst_count(prog), n_edges = 0, n_sites = tfvm_program_site_count(prog);
    for (uint32_t i = 0; i < n_insts; i++)
        n_edges += tfvm_program_edges(prog, i, NULL, 0);
    size_t cbytes, n_consts = tfvm_program_const_count(prog, &cbytes);
    printf("file:         %s (%zu bytes as .tfvm 1.%u)\n", in, size, minor);
    if (tfvm_program_source(prog))
        printf("source:       %s\n", tfvm_program_source(prog));
    printf("instructions: %zu in %zu region%s (%zu loop%s, %zu function%s), %zu edges, %zu call site%s\n", n_insts,
           n_regions, n_regions == 1 ? "" : "s", loops, loops == 1 ? "" : "s", funcs, funcs == 1 ? "" : "s", n_edges,
           n_sites, n_sites == 1 ? "" : "s");
    printf("constants:    %zu (%zu bytes of data)\n", n_consts, cbytes);
    for (size_t k = 0; k < tfvm_program_entry_count(prog); k++) {
        tfvm_entry_info en;
        tfvm_program_entry(prog, k, &en);
        printf("entry %s", en.name);
        print_params(stdout, "(", en.params, en.n_params);
        print_params(stdout, " -> (", en.results, en.n_results);
        putchar('\n');
    }
    tfvm_channel_info c;
    for (size_t k = 0; tfvm_program_channel(prog, k, &c) == TFVM_OK; k++) {
        printf("channel %s: %s", c.name, c.fetch ? "fetched" : "fed ");
        if (!c.fetch)
            printf("%s%s", tfvm_dtype_name(c.dtype), c.is_tensor ? "[...]" : "");
        if (c.uses > 1)
            printf(" (%u %s)", c.uses, c.fetch ? "FETCHes" : "FEEDs");
        putchar('\n');
    }
    tfvm_program_free(prog);
    return fflush(stdout) == 0 ? 0 : fail("cannot write: %s", strerror(errno));
}

/* ---- main ------------------------------------------------------------------------- */

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *const *usage;
} command;

static const command commands[] = {
    {"run", cmd_run, &usage_run},
    {"asm", cmd_asm, &usage_asm},
    {"dis", cmd_dis, &usage_dis},
    {"compile", cmd_compile, &usage_compile},
    {"devices", cmd_devices, &usage_devices},
    {"info", cmd_info, &usage_info},
    {"debug", cli_debug, &cli_usage_debug},
    {"dot", cli_dot, &cli_usage_dot},
    {"profile", cli_profile, &cli_usage_profile},
    {"check", cli_check, &cli_usage_check},
};

static const char *usage_of(const char *name)
{
    for (size_t i = 0; i < COUNTOF(commands); i++)
        if (strcmp(commands[i].name, name) == 0)
            return *commands[i].usage;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (is_help(cmd)) {
        fputs(usage_main, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("tfvm %s (bytecode format 1.1)\n", tfvm_version());
        return 0;
    }
    if (strcmp(cmd, "help") == 0) {
        if (argc < 3) {
            fputs(usage_main, stdout);
            return 0;
        }
        const char *u = usage_of(argv[2]);
        if (!u) {
            fprintf(stderr, "tfvm: no command '%s' (see 'tfvm --help')\n", argv[2]);
            return EXIT_USAGE;
        }
        fputs(u, stdout);
        return 0;
    }
    for (size_t i = 0; i < COUNTOF(commands); i++)
        if (strcmp(commands[i].name, cmd) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "tfvm: no command '%s' (see 'tfvm --help')\n", cmd);
    return EXIT_USAGE;
}
