/* test/unit/test_open.c — tfvm_program_open and the import functions of
 * tfvm.h: NULL arguments, formats found by content and by name, formats
 * forced, exact messages, and allocation failure at every point. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* A scratch directory for the files a test writes, removed at exit by the
 * process that made it (Check runs each test in a forked child). */
static char tmpdir[64];
static pid_t owner;

static void cleanup(void)
{
    if (getpid() != owner)
        return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "test_open: could not remove %s\n", tmpdir);
}

static const char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", tmpdir, name);
    return p;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* Runs entry `entry` (NULL = first) of p with one i32 argument; its i32
 * result (a scalar, or a one-element tensor as TensorFlow graphs return). */
static int32_t run_i32(const tfvm_program *p, const char *entry, int32_t n)
{
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.deterministic = true;
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    tfvm_value arg = tfvm_i32(n), res;
    tfvm_status st = tfvm_run(vm, entry, &arg, 1, &res, 1);
    ck_assert_msg(st == TFVM_OK, "run: %s", tfvm_errmsg(vm));
    tfvm_vm_free(vm);
    ck_assert_int_eq(res.dtype, TFVM_I32);
    if (res.tensor) {
        ck_assert_int_eq(tfvm_tensor_count(res.tensor), 1);
        int32_t v = *(const int32_t *)tfvm_tensor_cdata(res.tensor);
        tfvm_value_release(&res);
        return v;
    }
    return res.as.i32;
}

/* The .tfvm bytes of p, for comparing programs made by different paths. */
static void *bytes_of(const tfvm_program *p, size_t *n)
{
    void *data;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_save_memory(p, &data, n, &err), TFVM_OK);
    void *copy = malloc(*n);
    memcpy(copy, data, *n);
    tfvm_program_buffer_free(p, data, *n);
    return copy;
}

static const char fib_tfasm[] = "examples/asm/fib.tfasm";
static const char fib_tfg[] = "examples/fib.tfg";
/* test/e2e/onnx/gen.py: main("x:0": f32[2, 3], "scale/factor": f32) ->
 * ("y/out:0" = x * s, "z.plus" = x + x) */
static const char named_onnx[] = "test/e2e/onnx/named.onnx";
/* test/tf/gen.py: main(n: i32) -> (y) = fib(n) by a recursive FunctionDef,
 * fib(10) = 89 */
static const char fib_pb[] = "test/tf/fixtures/fib.pb";
static const char while_pb[] = "test/tf/fixtures/while_scalar.pb";

static void *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot read %s (run from the repository root)", path);
    char *buf = malloc(1 << 20);
    *n = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

/* Checks the entry of named.onnx and runs it on x = [[1, 2, 3], [4, 5, 6]], s = 2. */
static void check_named(const tfvm_program *p)
{
    tfvm_entry_info e;
    ck_assert_uint_eq(tfvm_program_entry_count(p), 1);
    ck_assert_int_eq(tfvm_program_entry(p, 0, &e), TFVM_OK);
    ck_assert_str_eq(e.name, "main");
    ck_assert_uint_eq(e.n_params, 2);
    ck_assert_uint_eq(e.n_results, 2);
    ck_assert_str_eq(e.params[0].name, "x:0");
    ck_assert_int_eq(e.params[0].dtype, TFVM_F32);
    ck_assert_str_eq(e.params[1].name, "scale/factor");
    ck_assert_int_eq(e.params[1].rank, 0);
    ck_assert_str_eq(e.results[0].name, "y/out:0");
    ck_assert_str_eq(e.results[1].name, "z.plus");
    int64_t dims[2] = {2, 3};
    tfvm_tensor *x = tfvm_tensor_new(TFVM_F32, 2, dims, NULL);
    float *xd = tfvm_tensor_data(x);
    for (int i = 0; i < 6; i++)
        xd[i] = (float)(i + 1);
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.deterministic = true;
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    tfvm_value args[2] = {tfvm_tensor_value(x), tfvm_f32(2.0f)}, res[2];
    ck_assert_msg(tfvm_run(vm, NULL, args, 2, res, 2) == TFVM_OK, "%s", tfvm_errmsg(vm));
    for (int k = 0; k < 2; k++) {
        ck_assert_ptr_nonnull(res[k].tensor);
        ck_assert_int_eq(tfvm_tensor_count(res[k].tensor), 6);
        const float *r = tfvm_tensor_cdata(res[k].tensor);
        for (int i = 0; i < 6; i++)
            ck_assert_float_eq(r[i], 2.0f * (float)(i + 1));
        tfvm_value_release(&res[k]);
    }
    tfvm_vm_free(vm);
    tfvm_tensor_free(x);
}

/* ---- Arguments ----------------------------------------------------------------------- */

START_TEST(null_arguments)
{
    tfvm_program *p = (tfvm_program *)1;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_open(NULL, NULL, NULL, &p, &err), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(err.message, "tfvm_program_open: NULL argument");
    ck_assert_int_eq(tfvm_program_open(fib_tfg, NULL, NULL, NULL, &err), TFVM_ERR_ARGUMENT);
    ck_assert_int_eq(tfvm_program_open(NULL, NULL, NULL, NULL, NULL), TFVM_ERR_ARGUMENT); /* err may be NULL */

    p = (tfvm_program *)1;
    ck_assert_int_eq(tfvm_program_import_onnx(NULL, 4, "m.onnx", NULL, NULL, &p, &err), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(err.message, "tfvm_program_import_onnx: NULL argument");
    ck_assert_ptr_null(p); /* *out is NULL after any failure */
    ck_assert_int_eq(tfvm_program_import_onnx("x", 1, "m.onnx", NULL, NULL, NULL, &err), TFVM_ERR_ARGUMENT);
    ck_assert_int_eq(tfvm_program_import_tf(NULL, 4, "g.pb", NULL, NULL, &p, &err), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(err.message, "tfvm_program_import_tf: NULL argument");
    ck_assert_int_eq(tfvm_program_import_tf("x", 1, "g.pb", NULL, NULL, NULL, &err), TFVM_ERR_ARGUMENT);
    ck_assert_int_eq(tfvm_program_import_onnx_file(NULL, NULL, &p, &err), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(err.message, "tfvm_program_import_onnx_file: NULL argument");
    ck_assert_int_eq(tfvm_program_import_onnx_file("m.onnx", NULL, NULL, &err), TFVM_ERR_ARGUMENT);
    ck_assert_int_eq(tfvm_program_import_tf_file(NULL, NULL, NULL, &p, &err), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(err.message, "tfvm_program_import_tf_file: NULL argument");
    ck_assert_int_eq(tfvm_program_import_tf_file("g.pb", "y", NULL, NULL, &err), TFVM_ERR_ARGUMENT);

    tfvm_open_options o;
    tfvm_open_options_init(&o);
    o.format = (tfvm_format)42;
    p = (tfvm_program *)1;
    ck_assert_int_eq(tfvm_program_open(fib_tfg, &o, NULL, &p, &err), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(err.message, "tfvm_program_open: format 42 is not a tfvm_format");
    ck_assert_ptr_null(p);
    tfvm_open_options_init(NULL); /* a no-op */
}
END_TEST

START_TEST(options_defaults)
{
    tfvm_open_options o;
    memset(&o, 0x5a, sizeof o);
    tfvm_open_options_init(&o);
    ck_assert_int_eq(o.format, TFVM_FORMAT_AUTO);
    ck_assert_ptr_null(o.entry);
    ck_assert_ptr_null(o.outputs);
    ck_assert_int_eq(o.opt_level, 1);
}
END_TEST

/* ---- Files that cannot be read, and unknown formats ------------------------------ */

START_TEST(missing_files)
{
    static const char *const paths[] = {"no/such/m.onnx", "no/such/g.pb", "no/such/p.tfg", "no/such/p.tfvm",
                                        "no/such/file"};
    tfvm_error err;
    tfvm_program *p;
    char want[128];
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        p = (tfvm_program *)1;
        ck_assert_int_eq(tfvm_program_open(paths[i], NULL, NULL, &p, &err), TFVM_ERR_IO);
        snprintf(want, sizeof want, "%s: No such file or directory", paths[i]);
        ck_assert_str_eq(err.message, want);
        ck_assert_ptr_null(p);
    }
    ck_assert_int_eq(tfvm_program_import_onnx_file("no/such/m.onnx", NULL, &p, &err), TFVM_ERR_IO);
    ck_assert_str_eq(err.message, "no/such/m.onnx: No such file or directory");
    ck_assert_int_eq(tfvm_program_import_tf_file("no/such/g.pb", NULL, NULL, &p, &err), TFVM_ERR_IO);
    ck_assert_str_eq(err.message, "no/such/g.pb: No such file or directory");
}
END_TEST

START_TEST(unknown_format)
{
    const char *path = tmp_path("model.bin");
    write_bytes(path, "garbage", 7);
    tfvm_error err;
    tfvm_program *p = (tfvm_program *)1;
    ck_assert_int_eq(tfvm_program_open(path, NULL, NULL, &p, &err), TFVM_ERR_FORMAT);
    char want[512];
    snprintf(want, sizeof want,
             "%s: unknown format (not .tfvm bytecode, and the name does not end in .tfvm, .tfasm, .tfg, .onnx or "
             ".pb)",
             path);
    ck_assert_str_eq(err.message, want);
    ck_assert_ptr_null(p);

    /* named .tfvm: the .tfvm reader's own message */
    path = tmp_path("bad.tfvm");
    write_bytes(path, "garbage", 7);
    ck_assert_int_eq(tfvm_program_open(path, NULL, NULL, &p, &err), TFVM_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: bad .tfvm file (wrong magic)", path);
    ck_assert_str_eq(err.message, want);

    /* empty, or the magic cut short, under any name: the .tfvm reader says what is missing */
    path = tmp_path("empty");
    write_bytes(path, "", 0);
    ck_assert_int_eq(tfvm_program_open(path, NULL, NULL, &p, &err), TFVM_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: bad .tfvm file (truncated header at byte 0)", path);
    ck_assert_str_eq(err.message, want);
    path = tmp_path("cut");
    write_bytes(path, "TFVM\r", 5);
    ck_assert_int_eq(tfvm_program_open(path, NULL, NULL, &p, &err), TFVM_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: bad .tfvm file (truncated header at byte 5)", path);
    ck_assert_str_eq(err.message, want);
}
END_TEST

/* ---- The formats tfvm has always read, through the new path ------------------------ */

START_TEST(tfg_tfasm_tfvm)
{
    tfvm_error err;
    tfvm_program *p;
    ck_assert_msg(tfvm_program_open(fib_tfg, NULL, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    ck_assert_int_eq(run_i32(p, NULL, 10), 89);
    size_t n_open, n_compile;
    void *b_open = bytes_of(p, &n_open);
    tfvm_program_free(p);

    /* the same bytes as tfvm_program_compile of the same text */
    FILE *f = fopen(fib_tfg, "rb");
    ck_assert_ptr_nonnull(f);
    char src[4096];
    size_t len = fread(src, 1, sizeof src, f);
    fclose(f);
    ck_assert_int_eq(tfvm_program_compile(src, len, fib_tfg, NULL, NULL, &p, &err), TFVM_OK);
    void *b_compile = bytes_of(p, &n_compile);
    tfvm_program_free(p);
    ck_assert_uint_eq(n_open, n_compile);
    ck_assert_mem_eq(b_open, b_compile, n_open);

    /* .tfvm bytes load whatever the file is called: the magic decides */
    static const char *const names[] = {"fib.tfvm", "fib.onnx", "fib.pb", "fib.tfg", "fib"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *path = tmp_path(names[i]);
        write_bytes(path, b_open, n_open);
        ck_assert_msg(tfvm_program_open(path, NULL, NULL, &p, &err) == TFVM_OK, "%s: %s", names[i], err.message);
        ck_assert_int_eq(run_i32(p, NULL, 12), 233);
        tfvm_program_free(p);
    }
    free(b_open);
    free(b_compile);

    /* .tfasm */
    ck_assert_msg(tfvm_program_open(fib_tfasm, NULL, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    ck_assert_int_eq(run_i32(p, "main", 20), 10946);
    tfvm_program_free(p);
}
END_TEST

START_TEST(options_reach_the_front_end)
{
    tfvm_error err;
    tfvm_program *p;
    tfvm_open_options o;
    tfvm_open_options_init(&o);
    o.entry = "fib";
    ck_assert_msg(tfvm_program_open(fib_tfg, &o, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    ck_assert_int_eq(tfvm_program_find_entry(p, "fib"), 0);
    ck_assert_int_eq(tfvm_program_find_entry(p, "main"), -1);
    ck_assert_int_eq(run_i32(p, NULL, 10), 89);
    tfvm_program_free(p);

    o.entry = "nope";
    p = (tfvm_program *)1;
    ck_assert_int_eq(tfvm_program_open(fib_tfg, &o, NULL, &p, &err), TFVM_ERR_TYPE);
    ck_assert_str_eq(err.message, "examples/fib.tfg: no function 'nope' to use as the entry point");
    ck_assert_ptr_null(p);

    /* opt_level 0 is a plain lowering: a different (bigger) program, same answer */
    size_t n0, n1;
    tfvm_open_options_init(&o);
    o.opt_level = 0;
    ck_assert_int_eq(tfvm_program_open(fib_tfg, &o, NULL, &p, &err), TFVM_OK);
    void *b0 = bytes_of(p, &n0);
    ck_assert_int_eq(run_i32(p, NULL, 10), 89);
    tfvm_program_free(p);
    ck_assert_int_eq(tfvm_program_open(fib_tfg, NULL, NULL, &p, &err), TFVM_OK);
    void *b1 = bytes_of(p, &n1);
    tfvm_program_free(p);
    ck_assert_msg(n0 > n1, "-O0 %zu bytes, -O1 %zu bytes", n0, n1);
    free(b0);
    free(b1);

    /* a forced format wins over the name */
    const char *path = tmp_path("fib.txt");
    FILE *f = fopen(fib_tfasm, "rb");
    char text[8192];
    size_t len = fread(text, 1, sizeof text, f);
    fclose(f);
    write_bytes(path, text, len);
    tfvm_open_options_init(&o);
    o.format = TFVM_FORMAT_TFASM;
    ck_assert_msg(tfvm_program_open(path, &o, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    ck_assert_int_eq(run_i32(p, NULL, 10), 89);
    tfvm_program_free(p);
    o.format = TFVM_FORMAT_TFG; /* .tfasm text is not .tfg: the compiler's message, named by path */
    ck_assert_int_eq(tfvm_program_open(path, &o, NULL, &p, &err), TFVM_ERR_SYNTAX);
    ck_assert_msg(strncmp(err.message, path, strlen(path)) == 0 && err.message[strlen(path)] == ':', "%s",
                  err.message);
    o.format = TFVM_FORMAT_TFVM;
    ck_assert_int_eq(tfvm_program_open(path, &o, NULL, &p, &err), TFVM_ERR_FORMAT);
    char want[512];
    snprintf(want, sizeof want, "%s: bad .tfvm file (wrong magic)", path);
    ck_assert_str_eq(err.message, want);
}
END_TEST

/* ---- ONNX ---------------------------------------------------------------------------- */

START_TEST(onnx_every_way)
{
    tfvm_error err;
    tfvm_program *p;
    ck_assert_msg(tfvm_program_open(named_onnx, NULL, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    check_named(p);
    size_t n_open;
    void *b_open = bytes_of(p, &n_open);
    tfvm_program_free(p);

    ck_assert_msg(tfvm_program_import_onnx_file(named_onnx, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    check_named(p);
    size_t n;
    void *b = bytes_of(p, &n);
    ck_assert_uint_eq(n, n_open);
    ck_assert_mem_eq(b, b_open, n);
    free(b);
    tfvm_program_free(p);

    size_t len;
    void *data = read_all(named_onnx, &len);
    ck_assert_msg(tfvm_program_import_onnx(data, len, "named.onnx", NULL, NULL, &p, &err) == TFVM_OK, "%s",
                  err.message);
    check_named(p);
    b = bytes_of(p, &n); /* the same program whatever the path (the name is only for messages) */
    tfvm_program_free(p);
    ck_assert_uint_eq(n, n_open);
    ck_assert_mem_eq(b, b_open, n);
    free(b);

    /* forced: an ONNX model under a name that says nothing */
    const char *path = tmp_path("model.bin");
    write_bytes(path, data, len);
    tfvm_open_options o;
    tfvm_open_options_init(&o);
    ck_assert_int_eq(tfvm_program_open(path, &o, NULL, &p, &err), TFVM_ERR_FORMAT);
    o.format = TFVM_FORMAT_ONNX;
    ck_assert_msg(tfvm_program_open(path, &o, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    check_named(p);
    tfvm_program_free(p);
    free(data);
    free(b_open);
}
END_TEST

/* test/onnx/models/external.onnx: y = x @ W, W = [[1, 2], [3, 4]] in ext.bin
 * beside it. The file functions look there; bytes need base_dir. */
static void check_external(const tfvm_program *p)
{
    int64_t dims[2] = {1, 2};
    tfvm_tensor *x = tfvm_tensor_new(TFVM_F32, 2, dims, NULL);
    float *xd = tfvm_tensor_data(x);
    xd[0] = 1, xd[1] = 1;
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.deterministic = true;
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    tfvm_value arg = tfvm_tensor_value(x), res;
    ck_assert_msg(tfvm_run(vm, NULL, &arg, 1, &res, 1) == TFVM_OK, "%s", tfvm_errmsg(vm));
    const float *r = tfvm_tensor_cdata(res.tensor);
    ck_assert_float_eq(r[0], 4.0f);
    ck_assert_float_eq(r[1], 6.0f);
    tfvm_value_release(&res);
    tfvm_vm_free(vm);
    tfvm_tensor_free(x);
}

START_TEST(onnx_external_data)
{
    static const char ext[] = "test/onnx/models/external.onnx";
    tfvm_error err;
    tfvm_program *p;
    ck_assert_msg(tfvm_program_open(ext, NULL, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    check_external(p);
    tfvm_program_free(p);
    ck_assert_msg(tfvm_program_import_onnx_file(ext, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    check_external(p);
    tfvm_program_free(p);
    size_t len;
    void *data = read_all(ext, &len);
    ck_assert_msg(tfvm_program_import_onnx(data, len, "ext.onnx", "test/onnx/models", NULL, &p, &err) == TFVM_OK, "%s",
                  err.message);
    check_external(p);
    tfvm_program_free(p);
    p = (tfvm_program *)1;
    ck_assert_int_eq(tfvm_program_import_onnx(data, len, "ext.onnx", NULL, NULL, &p, &err), TFVM_ERR_IO);
    ck_assert_ptr_null(p);
    ck_assert_msg(strncmp(err.message, "ext.onnx: ", 10) == 0 && strstr(err.message, "needs the model's directory"),
                  "%s", err.message);
    ck_assert_int_eq(tfvm_program_import_onnx(data, len, "ext.onnx", "test", NULL, &p, &err), TFVM_ERR_IO);
    ck_assert_msg(strstr(err.message, "cannot open external data file"), "%s", err.message);
    /* a copy elsewhere without its data file */
    const char *path = tmp_path("external.onnx");
    write_bytes(path, data, len);
    ck_assert_int_eq(tfvm_program_open(path, NULL, NULL, &p, &err), TFVM_ERR_IO);
    ck_assert_msg(strstr(err.message, tmpdir) && strstr(err.message, "ext.bin"), "%s", err.message);
    free(data);
}
END_TEST

START_TEST(onnx_bad_bytes)
{
    tfvm_error err;
    tfvm_program *p = (tfvm_program *)1;
    ck_assert_int_eq(tfvm_program_import_onnx("garbage", 7, "g.onnx", NULL, NULL, &p, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, "g.onnx: bad .onnx file (not a valid ModelProto: truncated or corrupt protobuf)");
    ck_assert_ptr_null(p);
    ck_assert_int_eq(tfvm_program_import_onnx("garbage", 7, NULL, NULL, NULL, &p, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, "<onnx>: bad .onnx file (not a valid ModelProto: truncated or corrupt protobuf)");
    const char *path = tmp_path("garbage.onnx");
    write_bytes(path, "garbage", 7);
    ck_assert_int_eq(tfvm_program_open(path, NULL, NULL, &p, &err), TFVM_ERR_FORMAT);
    char want[512];
    snprintf(want, sizeof want, "%s: bad .onnx file (not a valid ModelProto: truncated or corrupt protobuf)", path);
    ck_assert_str_eq(err.message, want);
    ck_assert_int_eq(tfvm_program_import_onnx_file(path, NULL, &p, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, want);
    ck_assert_ptr_null(p);

    /* every prefix of a good model fails cleanly or makes a program */
    size_t len;
    unsigned char *data = read_all(named_onnx, &len);
    for (size_t k = 0; k < len; k++) {
        tfvm_status st = tfvm_program_import_onnx(data, k, "cut.onnx", NULL, NULL, &p, &err);
        if (st == TFVM_OK)
            tfvm_program_free(p);
        else
            ck_assert_msg(strncmp(err.message, "cut.onnx: ", 10) == 0 && !strchr(err.message, '\n'), "%zu: %s", k,
                          err.message);
    }
    free(data);
}
END_TEST

/* ---- TensorFlow ------------------------------------------------------------------------ */

START_TEST(tf_every_way)
{
    tfvm_error err;
    tfvm_program *p;
    ck_assert_msg(tfvm_program_open(fib_pb, NULL, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    ck_assert_int_eq(run_i32(p, NULL, 10), 89);
    size_t n_open, n;
    void *b_open = bytes_of(p, &n_open);
    tfvm_program_free(p);
    ck_assert_msg(tfvm_program_import_tf_file(fib_pb, NULL, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    void *b = bytes_of(p, &n);
    ck_assert_uint_eq(n, n_open);
    ck_assert_mem_eq(b, b_open, n);
    free(b);
    tfvm_program_free(p);
    size_t len;
    void *data = read_all(fib_pb, &len);
    ck_assert_msg(tfvm_program_import_tf(data, len, "fib.pb", NULL, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    ck_assert_int_eq(run_i32(p, NULL, 12), 233);
    tfvm_program_free(p);
    free(data);
    free(b_open);

    /* outputs: the results, in the order given, named as given */
    tfvm_open_options o;
    tfvm_open_options_init(&o);
    o.outputs = "while/Exit_1:0,while/Exit:0";
    ck_assert_msg(tfvm_program_open(while_pb, &o, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    tfvm_entry_info e;
    ck_assert_int_eq(tfvm_program_entry(p, 0, &e), TFVM_OK);
    ck_assert_uint_eq(e.n_results, 2);
    ck_assert_str_eq(e.results[0].name, "while/Exit_1:0");
    ck_assert_str_eq(e.results[1].name, "while/Exit:0");
    tfvm_program_free(p);
    ck_assert_msg(tfvm_program_import_tf_file(while_pb, "while/Exit:0", NULL, &p, &err) == TFVM_OK, "%s",
                  err.message);
    ck_assert_int_eq(tfvm_program_entry(p, 0, &e), TFVM_OK);
    ck_assert_uint_eq(e.n_results, 1);
    ck_assert_str_eq(e.results[0].name, "while/Exit:0");
    tfvm_program_free(p);

    o.outputs = "nope";
    p = (tfvm_program *)1;
    ck_assert_int_eq(tfvm_program_open(fib_pb, &o, NULL, &p, &err), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(err.message, "test/tf/fixtures/fib.pb: output 'nope' names no node");
    ck_assert_ptr_null(p);
}
END_TEST

START_TEST(tf_bad_bytes)
{
    tfvm_error err;
    tfvm_program *p = (tfvm_program *)1;
    ck_assert_int_eq(tfvm_program_import_tf("garbage", 7, "g.pb", NULL, NULL, &p, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, "g.pb: not a binary GraphDef (protobuf parse failed)");
    ck_assert_ptr_null(p);
    ck_assert_int_eq(tfvm_program_import_tf("garbage", 7, NULL, NULL, NULL, &p, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, "<pb>: not a binary GraphDef (protobuf parse failed)");
    const char *path = tmp_path("garbage.pb");
    write_bytes(path, "garbage", 7);
    ck_assert_int_eq(tfvm_program_open(path, NULL, NULL, &p, &err), TFVM_ERR_FORMAT);
    char want[512];
    snprintf(want, sizeof want, "%s: not a binary GraphDef (protobuf parse failed)", path);
    ck_assert_str_eq(err.message, want);
    ck_assert_ptr_null(p);
}
END_TEST

/* ---- Several threads at once ---------------------------------------------------------- */

/* Each thread opens every format ten times; all must succeed and make the
 * same bytes as a single-threaded open (no shared state in the front ends). */
static const char *const every_format[] = {fib_tfg, fib_tfasm, named_onnx, fib_pb};
#define N_FORMATS (sizeof every_format / sizeof *every_format)

static void *open_many(void *arg)
{
    size_t *sizes = arg;
    for (int round = 0; round < 10; round++)
        for (size_t f = 0; f < N_FORMATS; f++) {
            tfvm_program *p;
            tfvm_error err;
            if (tfvm_program_open(every_format[f], NULL, NULL, &p, &err) != TFVM_OK)
                return (void *)every_format[f];
            void *data;
            size_t n;
            tfvm_status st = tfvm_program_save_memory(p, &data, &n, &err);
            if (st == TFVM_OK)
                tfvm_program_buffer_free(p, data, n);
            tfvm_program_free(p);
            if (st != TFVM_OK || n != sizes[f])
                return (void *)every_format[f];
        }
    return NULL;
}

START_TEST(threads)
{
    size_t sizes[N_FORMATS];
    for (size_t f = 0; f < N_FORMATS; f++) {
        tfvm_program *p;
        tfvm_error err;
        ck_assert_msg(tfvm_program_open(every_format[f], NULL, NULL, &p, &err) == TFVM_OK, "%s", err.message);
        free(bytes_of(p, &sizes[f]));
        tfvm_program_free(p);
    }
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, open_many, sizes), 0);
    for (int i = 0; i < 4; i++) {
        void *bad;
        ck_assert_int_eq(pthread_join(t[i], &bad), 0);
        ck_assert_msg(bad == NULL, "thread %d: %s", i, bad ? (const char *)bad : "");
    }
}
END_TEST

/* ---- Allocation failure at every point ----------------------------------------------- */

/* Opens path with the Nth allocation failing, for N = 0, 1, ... until it
 * succeeds: every failure is TFVM_ERR_NOMEM with nothing left allocated, and
 * the program finally made runs (fib's with arg, giving want; named.onnx's
 * when want < 0). Returns how many failure points there were. */
static long nomem_loop(const char *path, const tfvm_open_options *o, int32_t arg, int32_t want)
{
    for (long n = 0;; n++) {
        tu_alloc ta = {.countdown = n};
        tfvm_config cfg;
        tfvm_config_init(&cfg);
        cfg.allocator = tu_allocator(&ta);
        tfvm_program *p = (tfvm_program *)1;
        tfvm_error err;
        tfvm_status st = tfvm_program_open(path, o, &cfg, &p, &err);
        if (st == TFVM_OK) {
            if (want >= 0)
                ck_assert_int_eq(run_i32(p, NULL, arg), want);
            else
                check_named(p);
            tfvm_program_free(p);
            ck_assert_msg(ta.live == 0 && ta.blocks == 0, "%s: %ld bytes in %ld blocks left", path, ta.live,
                          ta.blocks);
            ck_assert_msg(n > 3, "%s: only %ld allocations", path, n);
            return n;
        }
        ck_assert_msg(st == TFVM_ERR_NOMEM, "%s: allocation %ld failed: %s (%s)", path, n, tfvm_status_name(st),
                      err.message);
        ck_assert_ptr_null(p);
        ck_assert_msg(ta.live == 0 && ta.blocks == 0, "%s: allocation %ld failed: %ld bytes in %ld blocks leaked",
                      path, n, ta.live, ta.blocks);
    }
}

START_TEST(nomem_tfg)
{
    nomem_loop(fib_tfg, NULL, 10, 89);
}
END_TEST

START_TEST(nomem_tfasm)
{
    nomem_loop(fib_tfasm, NULL, 10, 89);
}
END_TEST

START_TEST(nomem_tf)
{
    nomem_loop(fib_pb, NULL, 10, 89);
}
END_TEST

START_TEST(nomem_onnx)
{
    nomem_loop(named_onnx, NULL, 0, -1);
}
END_TEST

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tfvm_test_open.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    owner = getpid();
    atexit(cleanup);
    Suite *s = suite_create("open");
    TCase *tc = tcase_create("open");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, null_arguments);
    tcase_add_test(tc, options_defaults);
    tcase_add_test(tc, missing_files);
    tcase_add_test(tc, unknown_format);
    tcase_add_test(tc, tfg_tfasm_tfvm);
    tcase_add_test(tc, options_reach_the_front_end);
    tcase_add_test(tc, nomem_tfg);
    tcase_add_test(tc, onnx_every_way);
    tcase_add_test(tc, onnx_bad_bytes);
    tcase_add_test(tc, onnx_external_data);
    tcase_add_test(tc, tf_every_way);
    tcase_add_test(tc, tf_bad_bytes);
    tcase_add_test(tc, threads);
    tcase_add_test(tc, nomem_tfasm);
    tcase_add_test(tc, nomem_tf);
    tcase_add_test(tc, nomem_onnx);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
