/* front/open.c — the front door: a file of any kind (.tfvm bytecode, .tfasm,
 * .tfg, .onnx, TensorFlow .pb) into a program handle, the kind told by the
 * caller, the .tfvm magic or the name. It sits above the loader, the
 * compiler and the importers, which never call up into it. */
#include <string.h>
#include <sys/stat.h>

#include "compiler/compiler.h"
#include "front/front.h"
#include "import/import.h"
#include "loader/loader.h"

void tfvm_open_options_init(tfvm_open_options *o)
{
    if (o) {
        o->format = TFVM_FORMAT_AUTO;
        o->entry = NULL;
        o->outputs = NULL;
        o->opt_level = 1;
        o->overflow_trap = false;
        o->signature = NULL;
        o->unchecked = false;
        o->check_bytecode = false;
    }
}

static bool fr_has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The .tfvm magic (docs/format.md) decides first, so that bytecode loads
 * whatever its name; then the name. Bytes that are only the start of the
 * magic (an empty or cut-off file) go to the .tfvm reader too, whose message
 * says what is missing. TFVM_FORMAT_AUTO: unknown. */
static tfvm_format fr_detect(const char *path, const char *data, size_t len)
{
    if (ld_has_magic(data, len, false))
        return TFVM_FORMAT_TFVM;
    static const struct {
        const char *suffix;
        tfvm_format fmt;
    } by_name[] = {
        {".tfvm", TFVM_FORMAT_TFVM}, {".tfasm", TFVM_FORMAT_TFASM}, {".tfg", TFVM_FORMAT_TFG},
        {".onnx", TFVM_FORMAT_ONNX}, {".pb", TFVM_FORMAT_TF},
    };
    for (size_t i = 0; i < UT_COUNTOF(by_name); i++)
        if (fr_has_suffix(path, by_name[i].suffix))
            return by_name[i].fmt;
    if (ld_has_magic(data, len, true))
        return TFVM_FORMAT_TFVM;
    return TFVM_FORMAT_AUTO;
}

/* The directory part of path, for external ONNX data: "a/b/m.onnx" -> "a/b",
 * "m.onnx" and "-" -> ".", "/m.onnx" -> "/". NULL when memory runs out;
 * free it with ut_free(a, dir, strlen(dir) + 1). */
static char *fr_dir_of(const char *path, const tfvm_allocator *a)
{
    const char *slash = strrchr(path, '/');
    const char *src = slash ? path : ".";
    size_t n = slash && slash > path ? (size_t)(slash - path) : 1;
    char *d = ut_alloc(a, n + 1);
    if (d) {
        memcpy(d, src, n);
        d[n] = '\0';
    }
    return d;
}

/* The bytes fr_open read, freed by the importer once it has parsed them
 * (imp_release) or by fr_open at the end */
typedef struct fr_bytes {
    const tfvm_allocator *a;
    char *data;
    size_t len;
} fr_bytes;

static void fr_bytes_free(void *ctx)
{
    fr_bytes *b = ctx;
    ut_free(b->a, b->data, b->len + 1);
    b->data = NULL;
}

/* Reads path with cfg's allocator (so that an allocation-failure test walks
 * the read too) and hands it to the front end of o->format (or the detected
 * one). path is the name in messages. */
static tfvm_status fr_open(const char *path, const tfvm_open_options *o, const tfvm_config *cfg,
                            tfvm_program **out, tfvm_error *err)
{
    const tfvm_allocator *a = cfg ? &cfg->allocator : NULL;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) /* a SavedModel is a directory */
        return imp_program_saved_model(path, o->signature, o->opt_level, !o->unchecked, cfg, out, err);
    char *data;
    size_t len;
    tfvm_status st = ut_read_file(path, a, &data, &len, err);
    if (st != TFVM_OK)
        return st;
    fr_bytes bytes = {a, data, len};
    tfvm_format fmt = o->format != TFVM_FORMAT_AUTO ? o->format : fr_detect(path, data, len);
    const bool check = !o->unchecked;
    switch (fmt) {
    case TFVM_FORMAT_AUTO:
        st = ut_err(err, TFVM_ERR_FORMAT,
                    "%s: unknown format (not .tfvm bytecode, and the name does not end in .tfvm, .tfasm, .tfg, "
                    ".onnx or .pb)",
                    path);
        break;
    case TFVM_FORMAT_TFVM: st = fr_load(data, len, path, check && o->check_bytecode, cfg, out, err); break;
    case TFVM_FORMAT_TFASM: st = fr_assemble(data, len, path, check, cfg, out, err); break;
    case TFVM_FORMAT_TFG: {
        tfvm_compile_options co;
        tfvm_compile_options_init(&co);
        co.entry = o->entry;
        co.opt_level = o->opt_level;
        co.overflow_trap = o->overflow_trap;
        st = cc_program(data, len, path, &co, check, cfg, out, err);
        break;
    }
    case TFVM_FORMAT_ONNX: {
        char *dir = fr_dir_of(path, a);
        st = dir ? imp_program(fmt, data, len, (imp_release){fr_bytes_free, &bytes}, path, dir, o->opt_level, check,
                               cfg, out, err)
                 : ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory", path);
        if (dir)
            ut_free(a, dir, strlen(dir) + 1);
        break;
    }
    case TFVM_FORMAT_TF:
        st = imp_program(fmt, data, len, (imp_release){0}, path, o->outputs, o->opt_level, check, cfg, out, err);
        break;
    }
    if (bytes.data)
        fr_bytes_free(&bytes);
    return st;
}

tfvm_status tfvm_program_open(const char *path, const tfvm_open_options *opts, const tfvm_config *cfg,
                              tfvm_program **out, tfvm_error *err)
{
    if (out)
        *out = NULL;
    if (!out || !path)
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_open: NULL argument");
    tfvm_open_options o;
    tfvm_open_options_init(&o);
    if (opts)
        o = *opts;
    if ((unsigned)o.format > TFVM_FORMAT_TF)
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_open: format %d is not a tfvm_format", (int)o.format);
    return fr_open(path, &o, cfg, out, err);
}

tfvm_status tfvm_program_import_onnx_file(const char *path, const tfvm_config *cfg, tfvm_program **out,
                                          tfvm_error *err)
{
    if (out)
        *out = NULL;
    if (!out || !path)
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_import_onnx_file: NULL argument");
    tfvm_open_options o;
    tfvm_open_options_init(&o);
    o.format = TFVM_FORMAT_ONNX;
    return fr_open(path, &o, cfg, out, err);
}

tfvm_status tfvm_program_import_tf_file(const char *path, const char *outputs, const tfvm_config *cfg,
                                        tfvm_program **out, tfvm_error *err)
{
    if (out)
        *out = NULL;
    if (!out || !path)
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_import_tf_file: NULL argument");
    tfvm_open_options o;
    tfvm_open_options_init(&o);
    o.format = TFVM_FORMAT_TF;
    o.outputs = outputs;
    return fr_open(path, &o, cfg, out, err);
}

/* Every format, as the tfvm command reads it. */
tfvm_status tfvm_program_load_file(const char *path, const tfvm_config *cfg, tfvm_program **out,
                                   tfvm_error *err)
{
    if (!out || !path)
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_program_load_file: NULL argument");
    return tfvm_program_open(path, NULL, cfg, out, err);
}
