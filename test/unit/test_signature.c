/* test/unit/test_signature.c — program signatures (issue 14): declared shapes
 * in .tfasm, in the .tfvm 1.1 shape and source tables, in the C API, and the
 * run-time checks of arguments and results (vm/signature.c). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "isa/isa.h"
#include "loader/loader.h"
#include "tfvm_debug.h"
#include "testutil.h"

static tfvm_program *assemble(const char *text)
{
    tfvm_program *p = NULL;
    tfvm_error err;
    ck_assert_msg(tfvm_program_assemble(text, strlen(text), "t.tfasm", NULL, &p, &err) == TFVM_OK, "%s", err.message);
    return p;
}

static char *dis(const tfvm_program *p)
{
    ut_buf b;
    ut_buf_init(&b, NULL);
    tfvm_error err;
    ck_assert_int_eq(ld_disassemble(&p->isa, &b, &err), TFVM_OK);
    size_t n;
    return ut_buf_take(&b, &n);
}

static void dis_free(char *s) { ut_free(NULL, s, strlen(s) + 1); }

static const char shaped[] = "source \"m.tfg\"\n\n"
                             "entry main(x: f32[?, 3], s: i32, z: f32[()], a: f32[...]) -> (r: f32[?, 3], q: i64[2, ?, 4]) {\n"
                             "    x = ARG 0 @2:5\n"
                             "    s = ARG 1\n"
                             "    z = ARG 2\n"
                             "    a = ARG 3\n"
                             "    k = SHAPE (a)\n"
                             "        RESULT 0 (x)\n"
                             "        RESULT 1 (k)\n"
                             "}\n";

/* .tfasm -> program -> .tfasm is the identity, and .tfvm bytes round-trip. */
START_TEST(asm_round_trip)
{
    tfvm_program *p = assemble(shaped);
    char *text = dis(p);
    ck_assert_str_eq(text, shaped);
    dis_free(text);
    const isa_param *x = &p->isa.entries[0].params[0];
    ck_assert(x->shaped);
    ck_assert_uint_eq(x->ndim, 2);
    ck_assert_int_eq(x->dims[0], -1);
    ck_assert_int_eq(x->dims[1], 3);
    ck_assert(!p->isa.entries[0].params[1].shaped);
    ck_assert(p->isa.entries[0].params[2].shaped && p->isa.entries[0].params[2].ndim == 0);
    ck_assert(!p->isa.entries[0].params[3].shaped);
    ck_assert_str_eq(p->isa.source, "m.tfg");

    void *bytes;
    size_t n;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_save_memory(p, &bytes, &n, &err), TFVM_OK);
    const unsigned char *d = bytes;
    ck_assert_uint_eq(ut_le16(d + 10), 1);  /* minor 1: the shape and source tables */
    ck_assert_uint_eq(ut_le32(d + 28), 12); /* twelve sections */
    tfvm_program *q = NULL;
    ck_assert_msg(tfvm_program_load_memory(bytes, n, "t.tfvm", NULL, &q, &err) == TFVM_OK, "%s", err.message);
    text = dis(q);
    ck_assert_str_eq(text, shaped);
    dis_free(text);
    void *again;
    size_t m;
    ck_assert_int_eq(tfvm_program_save_memory(q, &again, &m, &err), TFVM_OK);
    ck_assert(m == n && memcmp(again, bytes, n) == 0);
    tfvm_program_buffer_free(q, again, m);
    tfvm_program_buffer_free(p, bytes, n);
    tfvm_program_free(q);
    tfvm_program_free(p);
}
END_TEST

/* A program without shapes or a source is the 1.0 file it always was; the
 * committed 1.0 files written before 1.1 still load. */
START_TEST(old_format)
{
    tfvm_program *p = assemble("entry main(n: i32, t: f32[]) -> (r: i32) {\n    n = ARG 0\n    t = ARG 1\n"
                               "        RESULT 0 (n)\n}\n");
    void *bytes;
    size_t n;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_save_memory(p, &bytes, &n, &err), TFVM_OK);
    ck_assert_uint_eq(ut_le16((const unsigned char *)bytes + 10), 0);
    ck_assert_uint_eq(ut_le32((const unsigned char *)bytes + 28), 10);
    tfvm_program_buffer_free(p, bytes, n);
    tfvm_program_free(p);

    const char *old[] = {"test/fuzz/seeds/tiny.tfvm", "test/fuzz/seeds/tiny_anonymous.tfvm",
                         "test/fuzz/seeds/empty_program.tfvm"};
    for (size_t k = 0; k < sizeof old / sizeof *old; k++) {
        ck_assert_msg(tfvm_program_load_file(old[k], NULL, &p, &err) == TFVM_OK, "%s", err.message);
        tfvm_program_free(p);
    }
    /* and the committed 1.1 seed of the loader's fuzz target (examples/matmul.tfg) */
    ck_assert_msg(tfvm_program_load_file("test/fuzz/seeds/shaped.tfvm", NULL, &p, &err) == TFVM_OK, "%s", err.message);
    char ty[64];
    ck_assert_str_eq(isa_param_type(&p->isa.entries[0].params[0], ty, sizeof ty), "f32[?, ?]");
    ck_assert_str_eq(p->isa.source, "examples/matmul.tfg");
    tfvm_program_free(p);
}
END_TEST

static void put16(unsigned char *d, size_t at, uint16_t v) { d[at] = (unsigned char)v; d[at + 1] = (unsigned char)(v >> 8); }
static void put32(unsigned char *d, size_t at, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        d[at + k] = (unsigned char)(v >> 8 * k);
}
static void put64(unsigned char *d, size_t at, uint64_t v)
{
    for (int k = 0; k < 8; k++)
        d[at + k] = (unsigned char)(v >> 8 * k);
}
static void fix_crc(unsigned char *d, size_t n) { put32(d, 24, ut_crc32(0, d + 28, n - 28)); }

/* The section-table entry of section id (sections are in id order). */
static size_t sec_entry(const unsigned char *d, uint32_t id)
{
    for (uint32_t i = 0; i < ut_le32(d + 28); i++)
        if (ut_le32(d + 32 + 24 * i) == id)
            return 32 + 24 * i;
    ck_abort_msg("no section %u", id);
    return 0;
}

static void expect_bad(const unsigned char *d, size_t n, const char *want)
{
    tfvm_program *p = NULL;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_load_memory(d, n, "t.tfvm", NULL, &p, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, want);
    ck_assert_ptr_null(p);
}

/* Every check of the shape and source tables, with its exact message. */
START_TEST(bad_tables)
{
    tfvm_program *p = assemble(shaped);
    void *bytes;
    size_t n;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_save_memory(p, &bytes, &n, &err), TFVM_OK);
    unsigned char *d = malloc(n);
    char want[256];
    size_t shp = sec_entry(bytes, 11), src = sec_entry(bytes, 12);
    size_t rec0 = ut_le64((const unsigned char *)bytes + shp + 8); /* x: f32[?, 3] */

    memcpy(d, bytes, n); /* as a 1.0 file the new sections are unknown */
    put16(d, 10, 0);
    fix_crc(d, n);
    snprintf(want, sizeof want, "t.tfvm: bad .tfvm file (unknown section 11 at byte %zu)", shp);
    expect_bad(d, n, want);

    memcpy(d, bytes, n);
    put64(d, shp + 16, 5);
    fix_crc(d, n);
    snprintf(want, sizeof want, "t.tfvm: bad .tfvm file (shape table has 5 records for 6 parameters and results at byte %zu)",
             shp + 16);
    expect_bad(d, n, want);

    memcpy(d, bytes, n);
    put64(d, src + 16, 2);
    fix_crc(d, n);
    snprintf(want, sizeof want, "t.tfvm: bad .tfvm file (truncated source table (2 records from byte %zu) at byte %zu)",
             (size_t)ut_le64(d + src + 8), n);
    expect_bad(d, n, want);

    memcpy(d, bytes, n);
    d[rec0] = 9;
    fix_crc(d, n);
    snprintf(want, sizeof want, "t.tfvm: bad .tfvm file (shape of parameter 0: rank 9 exceeds 8 at byte %zu)", rec0);
    expect_bad(d, n, want);

    memcpy(d, bytes, n);
    put64(d, rec0 + 8, (uint64_t)-2);
    fix_crc(d, n);
    snprintf(want, sizeof want, "t.tfvm: bad .tfvm file (shape of parameter 0: dimension 0 is -2 (-1 is '?') at byte %zu)",
             rec0 + 8);
    expect_bad(d, n, want);

    memcpy(d, bytes, n);
    put64(d, rec0 + 8 + 16, 7);
    fix_crc(d, n);
    snprintf(want, sizeof want,
             "t.tfvm: bad .tfvm file (shape of parameter 0: dimension 2 is beyond its rank but not 0 at byte %zu)",
             rec0 + 24);
    expect_bad(d, n, want);

    memcpy(d, bytes, n);
    d[rec0 + 72] = 1; /* parameter 1 's' is a scalar */
    fix_crc(d, n);
    snprintf(want, sizeof want, "t.tfvm: bad .tfvm file (shape of parameter 1: a scalar has rank 0, not 1 at byte %zu)",
             rec0 + 72);
    expect_bad(d, n, want);

    memcpy(d, bytes, n);
    d[rec0 + 3] = 1;
    fix_crc(d, n);
    snprintf(want, sizeof want, "t.tfvm: bad .tfvm file (nonzero padding at byte %zu)", rec0 + 3);
    expect_bad(d, n, want);

    free(d);
    tfvm_program_buffer_free(p, bytes, n);
    tfvm_program_free(p);
}
END_TEST

START_TEST(asm_errors)
{
    static const struct {
        const char *type, *message;
    } cases[] = {
        {"f32[?, -]", "t.tfasm:1:22: expected a dimension (an integer, '?' or a name), got '-'"},
        {"f32[..]", "t.tfasm:1:21: expected '.' in f32[...], a tensor of any rank, got ']'"},
        {"f32[b_0123456789012345678901234567890123456789012345678901234567890123]",
         "t.tfasm:1:19: a dimension's name is a letter or '_' then up to 63 letters, digits or '_'"},
        {"f32[(]", "t.tfasm:1:20: expected ')' in f32[()], a tensor of rank 0, got ']'"},
        {"f32[1, 2, 3, 4, 5, 6, 7, 8, 9]", "t.tfasm:1:43: a tensor has at most 8 dimensions"},
        {"f32[3 4]", "t.tfasm:1:21: expected ']' after the dimensions (f32[...] is any rank, f32[?, 3] a shape), got '4'"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char text[256];
        snprintf(text, sizeof text, "entry main(x: %s) -> (r: i32) {\n    c = CONST i32 1\n        RESULT 0 (c)\n}\n",
                 cases[k].type);
        tfvm_program *p = NULL;
        tfvm_error err;
        ck_assert_msg(tfvm_program_assemble(text, strlen(text), "t.tfasm", NULL, &p, &err) == TFVM_ERR_SYNTAX,
                      "%s: assembled", cases[k].type);
        ck_assert_msg(strcmp(err.message, cases[k].message) == 0, "%s: got '%s'", cases[k].type, err.message);
    }
}
END_TEST

/* Identity on a tensor: the declared result shape differs from the
 * parameter's, so a run shows the result check. */
static const char ident[] = "entry main(x: f32[], w: f32[784, ?]) -> (r: f32[?, ?]) {\n"
                            "    x = ARG 0\n    w = ARG 1\n        RESULT 0 (x)\n}\n";

static tfvm_tensor *tensor(int rank, const int64_t *dims)
{
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, rank, dims, NULL);
    ck_assert_ptr_nonnull(t);
    return t;
}

START_TEST(run_checks)
{
    tfvm_program *p = assemble(ident);
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.deterministic = true;
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(p, &cfg, &vm), TFVM_OK);
    int64_t d2[2] = {2, 3}, dw[2] = {784, 5}, bad[2] = {10, 512}, d4[4] = {1, 2, 3, 4};
    tfvm_tensor *a = tensor(2, d2), *w = tensor(2, dw), *b = tensor(2, bad), *r4 = tensor(4, d4);
    tfvm_value args[2] = {tfvm_tensor_value(a), tfvm_tensor_value(w)}, res;

    ck_assert_int_eq(tfvm_run(vm, "main", args, 2, &res, 1), TFVM_OK);
    ck_assert_ptr_eq(res.tensor, a);
    tfvm_value_release(&res);

    args[1] = tfvm_tensor_value(b);
    ck_assert_int_eq(tfvm_run(vm, "main", args, 2, &res, 1), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "argument 2 'w' of entry 'main': expected f32[784, ?], got f32[10, 512]");

    args[1] = tfvm_i32(3);
    ck_assert_int_eq(tfvm_run(vm, "main", args, 2, &res, 1), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "argument 2 'w' of entry 'main': expected f32[784, ?], got i32");

    args[1] = tfvm_tensor_value(r4);
    ck_assert_int_eq(tfvm_run(vm, "main", args, 2, &res, 1), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "argument 2 'w' of entry 'main': expected f32[784, ?], got f32[1, 2, 3, 4]");

    args[0] = tfvm_tensor_value(r4);
    args[1] = tfvm_tensor_value(w);
    ck_assert_int_eq(tfvm_run(vm, "main", args, 2, &res, 1), TFVM_ERR_TYPE);
    ck_assert_str_eq(tfvm_errmsg(vm), "result 0 'r' of entry 'main': declared f32[?, ?], got a rank-4 tensor");
    ck_assert_int_eq(tfvm_run(vm, "main", args, 1, &res, 1), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "entry 'main' takes 2 arguments, got 1");

    tfvm_tensor_free(a);
    tfvm_tensor_free(w);
    tfvm_tensor_free(b);
    tfvm_tensor_free(r4);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* A 0-d tensor is a scalar parameter's argument (.npy files and other
 * frameworks hold scalars so); its dtype must match, and rank 1 does not fit. */
START_TEST(scalar_from_0d_tensor)
{
    tfvm_program *p;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_load_file("examples/asm/fib.tfasm", NULL, &p, &err), TFVM_OK);
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new(p, NULL, &vm), TFVM_OK);
    int64_t one = 1;
    tfvm_tensor *n = tfvm_tensor_new(TFVM_I32, 0, NULL, NULL), *f = tfvm_tensor_new(TFVM_F32, 0, NULL, NULL),
                *v = tfvm_tensor_new(TFVM_I32, 1, &one, NULL);
    *(int32_t *)tfvm_tensor_data(n) = 20;
    tfvm_value arg = tfvm_tensor_value(n), res;
    ck_assert_int_eq(tfvm_run(vm, NULL, &arg, 1, &res, 1), TFVM_OK);
    ck_assert_ptr_null(res.tensor);
    ck_assert_int_eq(res.as.i32, 10946);
    arg = tfvm_tensor_value(f);
    ck_assert_int_eq(tfvm_run(vm, NULL, &arg, 1, &res, 1), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "argument 1 'n' of entry 'main': expected i32, got f32[()]");
    arg = tfvm_tensor_value(v);
    ck_assert_int_eq(tfvm_run(vm, NULL, &arg, 1, &res, 1), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_errmsg(vm), "argument 1 'n' of entry 'main': expected i32, got i32[1]");
    tfvm_tensor_free(n);
    tfvm_tensor_free(f);
    tfvm_tensor_free(v);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* The C API reports declared ranks and dimensions; the .tfg compiler makes
 * them from the declared types, and keeps the source file for positions. */
START_TEST(api_and_compiler)
{
    const char *src = "fn main(w: f32[784, ?], x: f32[?, 784], n: i32) -> (y: f32[?, ?]) {\n"
                      "    matmul(x, w) * 2.0\n}\n";
    tfvm_program *p = NULL;
    tfvm_error err;
    ck_assert_msg(tfvm_program_compile(src, strlen(src), "mlp.tfg", NULL, NULL, &p, &err) == TFVM_OK, "%s",
                  err.message);
    tfvm_entry_info e;
    ck_assert_int_eq(tfvm_program_entry(p, 0, &e), TFVM_OK);
    ck_assert_int_eq(e.params[0].rank, 2);
    ck_assert(e.params[0].is_tensor);
    ck_assert_int_eq(e.params[0].dims[0], 784);
    ck_assert_int_eq(e.params[0].dims[1], -1);
    ck_assert_int_eq(e.params[1].dims[0], -1);
    ck_assert_int_eq(e.params[2].rank, 0);
    ck_assert(!e.params[2].is_tensor);
    ck_assert_ptr_null(e.params[2].dims);
    ck_assert_int_eq(e.results[0].rank, 2);
    ck_assert_str_eq(p->isa.source, "mlp.tfg");
    char where[64];
    uint32_t mm = UINT32_MAX;
    for (uint32_t i = 0; i < p->isa.n_insts; i++)
        if (p->isa.insts[i].op == ISA_MATMUL)
            mm = i;
    ck_assert_uint_ne(mm, UINT32_MAX);
    ck_assert_str_eq(isa_inst_where(&p->isa, mm, where, sizeof where), "mlp.tfg:2:5");
    tfvm_program_free(p);

    p = assemble(ident);
    ck_assert_int_eq(tfvm_program_entry(p, 0, &e), TFVM_OK);
    ck_assert_int_eq(e.params[0].rank, -1);
    ck_assert(e.params[0].is_tensor);
    ck_assert_ptr_null(e.params[0].dims);
    ck_assert_str_eq(isa_inst_where(&p->isa, 0, where, sizeof where), ""); /* no position */
    tfvm_program_free(p);
}
END_TEST

START_TEST(labels)
{
    char b[32];
    ck_assert_str_eq(isa_site_label("fib", 2, b, sizeof b), "fib@2");
    isa_param q = {.dtype = TFVM_F32, .rank = ISA_RANK_ANY};
    ck_assert_str_eq(isa_param_type(&q, b, sizeof b), "f32[...]");
    q.rank = 0;
    ck_assert_str_eq(isa_param_type(&q, b, sizeof b), "f32");
    ck_assert(isa_source_ok("examples/mlp.tfg"));
    ck_assert(!isa_source_ok("my model.tfg"));
    ck_assert(!isa_source_ok(""));
}
END_TEST

/* A run-time error carries its instruction's source position. */
START_TEST(error_position)
{
    const char *src = "fn main(a: i32, b: i32) -> i32 {\n    a / b\n}\n";
    tfvm_program *p = NULL;
    tfvm_error err;
    ck_assert_msg(tfvm_program_compile(src, strlen(src), "d.tfg", NULL, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new_ex(p, NULL, &vm, &err), TFVM_OK);
    tfvm_value args[2] = {tfvm_i32(7), tfvm_i32(0)}, r;
    ck_assert_int_eq(tfvm_run(vm, "main", args, 2, &r, 1), TFVM_ERR_ARITH);
    const tfvm_error *e = tfvm_last_error(vm);
    ck_assert_str_eq(e->where, "d.tfg:2:7");
    ck_assert_str_eq(e->message, "div_2_7 (DIV) at []: integer division by zero");
    ck_assert_int_eq(tfvm_run(vm, "main", args, 1, &r, 1), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(tfvm_last_error(vm)->where, ""); /* not about an instruction */
    tfvm_vm_free(vm);
    tfvm_program_free(p);
}
END_TEST

/* Imported models declare their inputs' shapes: ONNX graph inputs (symbolic
 * dims are `?`), TensorFlow Placeholder shapes; results keep only dtypes. */
START_TEST(imported_signatures)
{
    static const struct {
        const char *path, *sig, *bad;
    } cases[] = {
        {"test/onnx/models/mlp.onnx", "x: f32[2, 4] -> y: f32[2, 2]",
         "argument 1 'x' of entry 'main': expected f32[2, 4], got f32[3, 4]"},
        {"test/tf/fixtures/cond_nested_00.pb", "x: f32[3] -> cond/Merge: f32[...]", NULL},
        {"test/e2e/dyn/bert_dyn.onnx", "ids: i64[batch, seq] -> hidden: f32[batch, seq, 16]", NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tfvm_program *p = NULL;
        tfvm_error err;
        ck_assert_msg(tfvm_program_open(cases[k].path, NULL, NULL, &p, &err) == TFVM_OK, "%s", err.message);
        const isa_entry *en = &p->isa.entries[0];
        const isa_param *x = NULL;
        for (uint32_t i = 0; i < en->n_params; i++)
            if (strncmp(en->params[i].name, cases[k].sig, strlen(en->params[i].name)) == 0)
                x = &en->params[i];
        ck_assert_ptr_nonnull(x);
        char a[64], b[64], sig[200];
        snprintf(sig, sizeof sig, "%s: %s -> %s: %s", x->name, isa_param_type(x, a, sizeof a), en->results[0].name,
                 isa_param_type(&en->results[0], b, sizeof b));
        ck_assert_str_eq(sig, cases[k].sig);
        if (cases[k].bad) {
            tfvm_vm *vm;
            ck_assert_int_eq(tfvm_vm_new_ex(p, NULL, &vm, &err), TFVM_OK);
            int64_t d[2] = {3, 4};
            tfvm_tensor *t = tensor(2, d);
            tfvm_value v[2] = {tfvm_tensor_value(t), tfvm_default()}, r; /* (mlp's W1 has a default) */
            ck_assert_int_eq(tfvm_run(vm, NULL, v, en->n_params, &r, 1), TFVM_ERR_ARGUMENT);
            ck_assert_str_eq(tfvm_errmsg(vm), cases[k].bad);
            tfvm_tensor_free(t);
            tfvm_vm_free(vm);
        }
        tfvm_program_free(p);
    }
}
END_TEST

/* ---- Issue 25: named dims and the model's nodes (.tfvm 1.2) ------------------------ */

static const char named[] = "entry main(ids: i64[batch, seq], m: f32[...]) -> (h: f32[batch, seq, 16]) {\n"
                            "    ids = ARG 0\n"
                            "    m   = ARG 1\n"
                            "    h   = CAST f32 (ids) from \"/m/embeddings/Cast_1\" \"Cast\"\n"
                            "          RESULT 0 (h)\n"
                            "}\n";

/* .tfasm -> .tfvm 1.2 -> .tfasm is the identity; the C API and the
 * signature show the names. */
START_TEST(named_dims_round_trip)
{
    tfvm_program *p = assemble(named);
    void *bytes;
    size_t n;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_save_memory(p, &bytes, &n, &err), TFVM_OK);
    const unsigned char *d = bytes;
    ck_assert_uint_eq(ut_le16(d + 10), 2);  /* minor 2: the dim-name and origin tables */
    ck_assert_uint_eq(ut_le32(d + 28), 13); /* shapes, dim names, origins; no source */
    tfvm_program *q = NULL;
    ck_assert_msg(tfvm_program_load_memory(bytes, n, "t.tfvm", NULL, &q, &err) == TFVM_OK, "%s", err.message);
    char *text = dis(q);
    ck_assert_str_eq(text, named);
    dis_free(text);
    tfvm_entry_info e;
    ck_assert_int_eq(tfvm_program_entry(q, 0, &e), TFVM_OK);
    ck_assert_int_eq(e.params[0].rank, 2);
    ck_assert_int_eq(e.params[0].dims[0], -1);
    ck_assert_str_eq(e.params[0].dim_names[0], "batch");
    ck_assert_str_eq(e.params[0].dim_names[1], "seq");
    ck_assert_int_eq(e.params[1].rank, -1);
    ck_assert_ptr_null(e.params[1].dim_names);
    ck_assert_int_eq(e.results[0].rank, 3);
    ck_assert_ptr_null(e.results[0].dim_names[2]);
    char ty[64];
    ck_assert_str_eq(isa_param_type(&q->isa.entries[0].results[0], ty, sizeof ty), "f32[batch, seq, 16]");
    ck_assert_str_eq(isa_param_type(&q->isa.entries[0].params[1], ty, sizeof ty), "f32[...]");
    tfvm_inst_info in;
    ck_assert_int_eq(tfvm_program_inst(q, 2, &in), TFVM_OK);
    ck_assert_str_eq(in.origin, "/m/embeddings/Cast_1");
    ck_assert_str_eq(in.origin_op, "Cast");
    ck_assert_int_eq(tfvm_program_inst(q, 0, &in), TFVM_OK);
    ck_assert_ptr_null(in.origin);
    /* a named dim fits any size, like '?' */
    tfvm_vm *vm;
    ck_assert_int_eq(tfvm_vm_new_ex(q, NULL, &vm, &err), TFVM_OK);
    int64_t dims[2] = {3, 5};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_I64, 2, dims, NULL), *m = tfvm_tensor_new(TFVM_F32, 1, dims, NULL);
    tfvm_value a[2] = {tfvm_tensor_value(t), tfvm_tensor_value(m)}, r;
    ck_assert_int_eq(tfvm_run(vm, NULL, a, 2, &r, 1), TFVM_ERR_TYPE);
    ck_assert_str_eq(tfvm_errmsg(vm), "result 0 'h' of entry 'main': declared f32[batch, seq, 16], got a rank-2 tensor");
    tfvm_tensor_free(t);
    tfvm_tensor_free(m);
    tfvm_vm_free(vm);
    tfvm_program_buffer_free(p, bytes, n);
    tfvm_program_free(q);
    tfvm_program_free(p);
}
END_TEST

/* d (n bytes, changed) must fail to load with the message fmt makes */
static void bad_after(unsigned char *d, size_t n, const char *fmt, ...) UT_PRINTF(3, 4);
static void bad_after(unsigned char *d, size_t n, const char *fmt, ...)
{
    char want[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    fix_crc(d, n);
    expect_bad(d, n, want);
}

/* Every check of the dim-name and origin tables, with its exact message. */
START_TEST(bad_named_tables)
{
    tfvm_program *p = assemble(named);
    void *bytes;
    size_t n;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_save_memory(p, &bytes, &n, &err), TFVM_OK);
    unsigned char *d = malloc(n);
    size_t dn = sec_entry(bytes, 13), org = sec_entry(bytes, 14);
    size_t rec0 = ut_le64((const unsigned char *)bytes + dn + 8), orec0 = ut_le64((const unsigned char *)bytes + org + 8);

    memcpy(d, bytes, n); /* as a 1.1 file the new sections are unknown */
    put16(d, 10, 1);
    bad_after(d, n, "t.tfvm: bad .tfvm file (unknown section 13 at byte %zu)", dn);
    memcpy(d, bytes, n);
    put64(d, dn + 16, 2);
    bad_after(d, n, "t.tfvm: bad .tfvm file (dim-name table has 2 records for 3 parameters and results at byte %zu)",
              dn + 16);
    memcpy(d, bytes, n);
    put64(d, org + 16, 2);
    bad_after(d, n, "t.tfvm: bad .tfvm file (origin table has 2 records for 4 instructions at byte %zu)", org + 16);
    memcpy(d, bytes, n); /* the 3rd dim of h is 16, not a '?' */
    memcpy(d + rec0 + 64 + 8, d + rec0, 4);
    bad_after(d, n, "t.tfvm: bad .tfvm file (dim-name table: parameter 2 dimension 2 is named but is not a '?' of its "
              "shape at byte %zu)", rec0 + 72);
    memcpy(d, bytes, n); /* name ids[0] by the origin's "/m/embeddings/Cast_1" */
    memcpy(d + rec0, d + orec0 + 16, 4);
    bad_after(d, n, "t.tfvm: bad .tfvm file (dim-name table: parameter 0 dimension 0: '/m/embeddings/Cast_1' is not a "
              "name (a letter or '_', then letters, digits or '_') at byte %zu)", rec0);
    memcpy(d, bytes, n); /* an op type without a node */
    memcpy(d + orec0 + 4, d + orec0 + 16 + 4, 4);
    bad_after(d, n, "t.tfvm: bad .tfvm file (origin of instruction 0 has an op type but no node at byte %zu)", orec0);

    free(d);
    tfvm_program_buffer_free(p, bytes, n);
    tfvm_program_free(p);
}
END_TEST

/* ---- Issue 30: the variable table (.tfvm 1.3) ---------------------------------------- */

static const char with_vars[] = "entry main(n: i32) -> (r: i32) {\n"
                                "    n = ARG 0 var \"n\"\n"
                                "    m = ADD (n, i32 1) var \"k\" var \"m\"\n"
                                "        RESULT 0 (m)\n"
                                "}\n";

/* .tfasm -> .tfvm 1.3 -> .tfasm is the identity; the C API lists the
 * records; every check of the table has its exact message. */
START_TEST(variable_table)
{
    tfvm_program *p = assemble(with_vars);
    void *bytes;
    size_t n;
    tfvm_error err;
    ck_assert_int_eq(tfvm_program_save_memory(p, &bytes, &n, &err), TFVM_OK);
    const unsigned char *d0 = bytes;
    ck_assert_uint_eq(ut_le16(d0 + 10), 3);  /* minor 3: the variable table */
    ck_assert_uint_eq(ut_le32(d0 + 28), 11); /* the ten, and variables */
    tfvm_program *q = NULL;
    ck_assert_msg(tfvm_program_load_memory(bytes, n, "t.tfvm", NULL, &q, &err) == TFVM_OK, "%s", err.message);
    char *text = dis(q);
    ck_assert_str_eq(text, with_vars);
    dis_free(text);
    ck_assert_uint_eq(tfvm_program_var_count(q), 3);
    tfvm_var_info v;
    ck_assert_int_eq(tfvm_program_var(q, 1, &v), TFVM_OK);
    ck_assert_str_eq(v.name, "k");
    ck_assert_uint_eq(v.inst, 1);
    ck_assert_uint_eq(v.out, 0);
    ck_assert_uint_eq(v.region, 0);
    ck_assert_int_eq(tfvm_program_var(q, 3, &v), TFVM_ERR_ARGUMENT);

    unsigned char *d = malloc(n);
    size_t vs = sec_entry(bytes, 15), rec0 = ut_le64(d0 + vs + 8);
    memcpy(d, bytes, n); /* as a 1.2 file the section is unknown */
    put16(d, 10, 2);
    bad_after(d, n, "t.tfvm: bad .tfvm file (unknown section 15 at byte %zu)", vs);
    memcpy(d, bytes, n);
    put32(d, rec0, 0xFFFFFFFFu);
    bad_after(d, n, "t.tfvm: bad .tfvm file (variable 0 has no name at byte %zu)", rec0);
    memcpy(d, bytes, n);
    put32(d, rec0 + 4, 7);
    bad_after(d, n, "t.tfvm: bad .tfvm file (variable 0 'n': instruction 7 does not exist (3 instructions))");
    memcpy(d, bytes, n);
    put32(d, rec0 + 8, 1);
    bad_after(d, n, "t.tfvm: bad .tfvm file (variable 0 'n': instruction 0 'n' has no output 1 (ARG has 1))");
    memcpy(d, bytes, n); /* "k" becomes " " */
    size_t strs = ut_le64(d0 + sec_entry(bytes, 1) + 8);
    d[strs + ut_le32(d0 + rec0 + 12)] = ' ';
    bad_after(d, n, "t.tfvm: bad .tfvm file (variable 1: name ' ' is not a variable name (printable ASCII without "
              "spaces or '\"'))");
    memcpy(d, bytes, n); /* k and m swapped */
    memcpy(d + rec0 + 12, d0 + rec0 + 24, 4);
    memcpy(d + rec0 + 24, d0 + rec0 + 12, 4);
    bad_after(d, n, "t.tfvm: bad .tfvm file (variable 2 'k': out of order or repeated (after 'm' of instruction 1 "
              "'m', output 0))");
    /* random damage inside the table (checksum fixed, so the checks see
     * it): a clean rejection or a program, never a crash (ASan) */
    srand(30);
    for (int k = 0; k < 3000; k++) {
        memcpy(d, bytes, n);
        size_t at = rec0 + (size_t)rand() % (3 * 12);
        d[at] = (unsigned char)rand();
        fix_crc(d, n);
        tfvm_program *r = NULL;
        tfvm_status st = tfvm_program_load_memory(d, n, "t.tfvm", NULL, &r, &err);
        ck_assert_msg(st == TFVM_OK || st == TFVM_ERR_FORMAT, "byte %zu: status %d", at, (int)st);
        tfvm_program_free(r);
    }
    free(d);
    tfvm_program_buffer_free(p, bytes, n);
    tfvm_program_free(q);
    tfvm_program_free(p);
}
END_TEST

/* ---- The C API additions of issue 14 ---------------------------------------------- */
static void count_release(void *ud, void *data)
{
    int *n = ud;
    ck_assert_ptr_nonnull(data);
    ++*n;
}

/* A caller's buffer goes through a run without a copy and is handed back once,
 * when the last reference goes. */
START_TEST(tensor_wrap)
{
    float buf[6] = {1, 2, 3, 4, 5, 6};
    int64_t dims[2] = {2, 3};
    int released = 0;
    ck_assert_ptr_null(tfvm_tensor_wrap(TFVM_F32, 2, dims, NULL, count_release, &released, NULL));
    ck_assert_ptr_null(tfvm_tensor_wrap(TFVM_F32, 2, dims, (char *)buf + 1, count_release, &released, NULL));
    int64_t neg[2] = {2, -3};
    ck_assert_ptr_null(tfvm_tensor_wrap(TFVM_F32, 2, neg, buf, count_release, &released, NULL));
    ck_assert_int_eq(released, 0);
    tfvm_tensor *t = tfvm_tensor_wrap(TFVM_F32, 2, dims, buf, count_release, &released, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(tfvm_tensor_data(t), buf);
    ck_assert_int_eq(tfvm_tensor_count(t), 6);

    tfvm_program *p = assemble("entry main(x: f32[?, 3]) -> (r: f32[?, 3]) {\n    x = ARG 0\n"
                               "    r = ADD (x, x)\n        RESULT 0 (r)\n}\n");
    tfvm_vm *vm;
    tfvm_error err;
    ck_assert_int_eq(tfvm_vm_new_ex(p, NULL, &vm, &err), TFVM_OK);
    tfvm_value a = tfvm_tensor_value(t), r;
    ck_assert_int_eq(tfvm_run(vm, "main", &a, 1, &r, 1), TFVM_OK);
    ck_assert(((const float *)tfvm_tensor_cdata(r.tensor))[5] == 12.0f);
    tfvm_value_release(&r);
    tfvm_vm_free(vm);
    tfvm_program_free(p);
    ck_assert_int_eq(released, 0);
    tfvm_tensor_free(t);
    ck_assert_int_eq(released, 1);
}
END_TEST

START_TEST(vm_new_ex_and_version)
{
    ck_assert(TFVM_VERSION_OK());
    ck_assert_str_eq(tfvm_version(), TFVM_VERSION_STRING);
    ck_assert_int_eq(tfvm_version_number(), TFVM_VERSION_NUMBER);
    tfvm_program *p = assemble(ident);
    tfvm_vm *vm = (tfvm_vm *)1;
    tfvm_error err;
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.sched = "nope";
    ck_assert_int_eq(tfvm_vm_new_ex(p, &cfg, &vm, &err), TFVM_ERR_ARGUMENT);
    ck_assert_ptr_null(vm);
    ck_assert_str_eq(err.message, "no scheduling policy named 'nope'");
    ck_assert_int_eq(tfvm_vm_new_ex(NULL, NULL, &vm, &err), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(err.message, "tfvm_vm_new: NULL argument");
    /* no GPU here (or a backend that cannot load): the reason, not "out of memory" */
    setenv("TFVM_CUDA_LIB", "/nonexistent/libtfvm_cuda.so", 1);
    char state[256];
    if (tfvm_device_status("cuda", state, sizeof state) != TFVM_OK) {
        tfvm_config_init(&cfg);
        cfg.device = TFVM_DEVICE_CUDA;
        ck_assert_int_eq(tfvm_vm_new_ex(p, &cfg, &vm, &err), TFVM_ERR_DEVICE);
        char want[300];
        snprintf(want, sizeof want, "cuda: %s", state);
        ck_assert_str_eq(err.message, want);
    }
    tfvm_program_free(p);
}
END_TEST

/* tfvm_program_load_file reads .tfg like the command does */
START_TEST(load_file_any_format)
{
    tfvm_program *p = NULL;
    tfvm_error err;
    ck_assert_msg(tfvm_program_load_file("examples/fib.tfg", NULL, &p, &err) == TFVM_OK, "%s", err.message);
    ck_assert_str_eq(p->isa.source, "examples/fib.tfg");
    tfvm_program_free(p);
    ck_assert_int_eq(tfvm_program_load_file("examples/nope.tfg", NULL, &p, &err), TFVM_ERR_IO);
    ck_assert_ptr_null(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("signature");
    TCase *tc = tcase_create("signature");
    tcase_add_test(tc, asm_round_trip);
    tcase_add_test(tc, old_format);
    tcase_add_test(tc, bad_tables);
    tcase_add_test(tc, asm_errors);
    tcase_add_test(tc, run_checks);
    tcase_add_test(tc, scalar_from_0d_tensor);
    tcase_add_test(tc, api_and_compiler);
    tcase_add_test(tc, labels);
    tcase_add_test(tc, error_position);
    tcase_add_test(tc, imported_signatures);
    tcase_add_test(tc, named_dims_round_trip);
    tcase_add_test(tc, bad_named_tables);
    tcase_add_test(tc, variable_table);
    tcase_add_test(tc, tensor_wrap);
    tcase_add_test(tc, vm_new_ex_and_version);
    tcase_add_test(tc, load_file_any_format);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
