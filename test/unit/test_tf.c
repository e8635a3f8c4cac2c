/* test/unit/test_tf.c — the TensorFlow importer (import/tf*.c): every
 * fixture of test/tf/fixtures (written by test/tf/gen.py with TensorFlow)
 * runs through imp_tf and the VM, deterministic and on 2 threads, and
 * matches TensorFlow's outputs; recursive fib; composite activations at
 * +-inf, NaN and -0; exact error messages; every
 * allocation failure ends in TFVM_ERR_NOMEM with nothing leaked. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "import/import.h"
#include "testutil.h"

#define FIX "test/tf/fixtures/"

static int opt_level = 1;

static tfvm_status import_file(const char *path, const char *outputs, const tfvm_allocator *a, isa_program *p,
                               tfvm_error *err)
{
    char *data;
    size_t len;
    tfvm_status st = ut_read_file(path, a, &data, &len, err);
    if (st != TFVM_OK)
        return st;
    st = imp_tf(data, len, path, outputs, opt_level, a, p, err);
    ut_free(a, data, len + 1);
    return st;
}

/* Runs entry 0 of p; results into res. */
static tfvm_status run_prog(const isa_program *ip, const tfvm_value *args, size_t n_args, tfvm_value *res,
                            size_t n_res, bool det, const tfvm_allocator *a, char *msg, size_t msg_size)
{
    tfvm_program prog;
    memset(&prog, 0, sizeof prog);
    prog.isa = *ip;
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.deterministic = det;
    cfg.threads = det ? 1 : 2;
    if (a)
        cfg.allocator = *a;
    tfvm_vm *vm;
    tfvm_status st = tfvm_vm_new(&prog, &cfg, &vm);
    if (st != TFVM_OK)
        return st;
    st = tfvm_run(vm, NULL, args, n_args, res, n_res);
    if (st != TFVM_OK && msg)
        snprintf(msg, msg_size, "%s", tfvm_errmsg(vm));
    tfvm_vm_free(vm);
    return st;
}

static double elem(tfvm_dtype d, const void *p, int64_t i)
{
    switch (d) {
    case TFVM_BOOL: return ((const uint8_t *)p)[i];
    case TFVM_I32: return ((const int32_t *)p)[i];
    case TFVM_I64: return (double)((const int64_t *)p)[i];
    case TFVM_F32: return ((const float *)p)[i];
    case TFVM_F64: return ((const double *)p)[i];
    case TFVM_U8: return ((const uint8_t *)p)[i];
    case TFVM_I8: return ((const int8_t *)p)[i];
    default: return NAN;
    }
}

/* A value as (dtype, rank, dims, data); a scalar is rank 0. */
static void view(const tfvm_value *v, tfvm_dtype *d, int *rank, const int64_t **dims, const void **data)
{
    if (v->tensor) {
        *d = tfvm_tensor_dtype(v->tensor);
        *rank = tfvm_tensor_rank(v->tensor);
        *dims = tfvm_tensor_dims(v->tensor);
        *data = tfvm_tensor_cdata(v->tensor);
    } else {
        *d = v->dtype;
        *rank = 0;
        *dims = NULL;
        *data = &v->as;
    }
}

/* "" when got matches want within 1e-5 relative (1e-5 absolute near 0). */
static void compare(const tfvm_value *got, const tfvm_value *want, char *why, size_t size)
{
    tfvm_dtype dg, dw;
    int rg, rw;
    const int64_t *sg, *sw;
    const void *pg, *pw;
    view(got, &dg, &rg, &sg, &pg);
    view(want, &dw, &rw, &sw, &pw);
    why[0] = 0;
    if (dg != dw) {
        snprintf(why, size, "dtype %s, want %s", tfvm_dtype_name(dg), tfvm_dtype_name(dw));
        return;
    }
    if (rg != rw) {
        snprintf(why, size, "rank %d, want %d", rg, rw);
        return;
    }
    int64_t n = 1;
    for (int i = 0; i < rg; i++) {
        if (sg[i] != sw[i]) {
            snprintf(why, size, "dim %d is %lld, want %lld", i, (long long)sg[i], (long long)sw[i]);
            return;
        }
        n *= sg[i];
    }
    for (int64_t i = 0; i < n; i++) {
        double a = elem(dg, pg, i), b = elem(dw, pw, i);
        if (isnan(a) && isnan(b))
            continue;
        if (!(fabs(a - b) <= 1e-5 * fmax(1.0, fabs(b)))) {
            snprintf(why, size, "element %lld is %.9g, want %.9g", (long long)i, a, b);
            return;
        }
    }
}

/* A rank-0 .npy becomes a scalar value (what a scalar Placeholder takes). */
static tfvm_value load_value(const char *path)
{
    tfvm_tensor *t;
    tfvm_error err;
    ck_assert_msg(tfvm_npy_load(path, NULL, &t, &err) == TFVM_OK, "%s", err.message);
    if (tfvm_tensor_rank(t) > 0)
        return tfvm_tensor_value(t);
    tfvm_value v = {.dtype = tfvm_tensor_dtype(t)};
    memcpy(&v.as, tfvm_tensor_cdata(t), tfvm_dtype_size(v.dtype));
    tfvm_tensor_free(t);
    return v;
}

#define MAX_IO 40

typedef struct fixture {
    char name[64], outputs[1024];
    int n_in, n_out;
} fixture;

static int read_index(fixture *fx, int max)
{
    FILE *f = fopen(FIX "index.txt", "r");
    if (!f)
        return -1; /* fixture_runs then fails visibly */
    int n = 0;
    while (n < max && fscanf(f, "%63s %1023s %d %d", fx[n].name, fx[n].outputs, &fx[n].n_in, &fx[n].n_out) == 4)
        n++;
    fclose(f);
    return n;
}

/* A fixture named NAME_sm is a SavedModel directory (its serving_default). */
static bool is_saved_model(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && strcmp(name + n - 3, "_sm") == 0;
}

static void run_fixture(const fixture *fx)
{
    char path[256];
    isa_program p;
    tfvm_error err;
    tfvm_status st;
    const char *outs = strcmp(fx->outputs, "-") == 0 ? NULL : fx->outputs;
    if (is_saved_model(fx->name)) {
        snprintf(path, sizeof path, FIX "%s", fx->name);
        st = imp_saved_model(path, NULL, opt_level, NULL, NULL, &p, &err);
    } else {
        snprintf(path, sizeof path, FIX "%s.pb", fx->name);
        st = import_file(path, outs, NULL, &p, &err);
    }
    ck_assert_msg(st == TFVM_OK, "%s: %s", fx->name, err.message);
    ck_assert_int_le(fx->n_in, MAX_IO);
    ck_assert_int_le(fx->n_out, MAX_IO);
    tfvm_value args[MAX_IO], want[MAX_IO], got[MAX_IO];
    for (int k = 0; k < fx->n_in; k++) {
        snprintf(path, sizeof path, FIX "%s.in%d.npy", fx->name, k);
        args[k] = load_value(path);
    }
    for (int k = 0; k < fx->n_out; k++) {
        snprintf(path, sizeof path, FIX "%s.out%d.npy", fx->name, k);
        want[k] = load_value(path);
    }
    for (int det = 1; det >= 0; det--) {
        char msg[512] = "";
        st = run_prog(&p, args, (size_t)fx->n_in, got, (size_t)fx->n_out, det, NULL, msg, sizeof msg);
        ck_assert_msg(st == TFVM_OK, "%s: run failed: %s", fx->name, msg);
        for (int k = 0; k < fx->n_out; k++) {
            char why[200];
            compare(&got[k], &want[k], why, sizeof why);
            ck_assert_msg(why[0] == 0, "%s: output %d: %s (%s)", fx->name, k, why, det ? "deterministic" : "2 threads");
            tfvm_value_release(&got[k]);
        }
    }
    for (int k = 0; k < fx->n_in; k++)
        tfvm_value_release(&args[k]);
    for (int k = 0; k < fx->n_out; k++)
        tfvm_value_release(&want[k]);
    isa_program_release(&p);
}

static fixture fixtures[64];
static int n_fixtures;

START_TEST(fixture_runs)
{
    ck_assert_msg(n_fixtures > 0, "no fixtures in " FIX "index.txt (run from the repository root)");
    run_fixture(&fixtures[_i]);
}
END_TEST

/* The same without the optimizer (-O0): the lowering alone is right. */
START_TEST(fixture_runs_unoptimized)
{
    ck_assert_msg(n_fixtures > 0, "no fixtures in " FIX "index.txt (run from the repository root)");
    opt_level = 0;
    run_fixture(&fixtures[_i]);
    opt_level = 1;
}
END_TEST

/* fib(25) on the recursive GraphDef (a FunctionDef calling itself through
 * StatefulPartitionedCall under a StatelessIf): CALL/RETURN recursion. */
START_TEST(recursive_fib_25)
{
    isa_program p;
    tfvm_error err;
    ck_assert_msg(import_file(FIX "fib.pb", "y", NULL, &p, &err) == TFVM_OK, "%s", err.message);
    ck_assert_int_gt(p.n_sites, 0);
    tfvm_value arg = tfvm_i32(25), r;
    ck_assert_int_eq(run_prog(&p, &arg, 1, &r, 1, true, NULL, NULL, 0), TFVM_OK);
    ck_assert_int_eq(r.dtype, TFVM_I32);
    ck_assert_int_eq(r.as.i32, 121393);
    ck_assert_int_eq(run_prog(&p, &arg, 1, &r, 1, false, NULL, NULL, 0), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 121393);
    isa_program_release(&p);
    ck_assert_msg(import_file(FIX "ackermann.pb", NULL, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    tfvm_value two[2] = {tfvm_i32(3), tfvm_i32(4)};
    ck_assert_int_eq(run_prog(&p, two, 2, &r, 1, false, NULL, NULL, 0), TFVM_OK);
    ck_assert_int_eq(r.as.i32, 125);
    isa_program_release(&p);
}
END_TEST

/* A frame's parallel_iterations (32 in while_scalar) becomes its loop
 * variables' ENTER parallel=N; loop invariants (ENTER const) state none. */
START_TEST(parallel_iterations)
{
    isa_program p;
    tfvm_error err;
    ck_assert_msg(import_file(FIX "while_scalar.pb", NULL, NULL, &p, &err) == TFVM_OK, "%s", err.message);
    int vars = 0;
    for (uint32_t i = 0; i < p.n_insts; i++) {
        const isa_inst *in = &p.insts[i];
        if (in->op != ISA_ENTER || (in->flags & ISA_FLAG_CONST))
            continue;
        ck_assert_uint_eq(in->b, 32);
        vars++;
    }
    ck_assert_int_eq(vars, 2);
    isa_program_release(&p);
}
END_TEST

/* ---- Hand-made GraphDefs for the error cases (protobuf wire format) ----------- */

typedef struct wbuf {
    unsigned char b[4096];
    size_t n;
} wbuf;

static void w_varint(wbuf *w, uint64_t v)
{
    do {
        w->b[w->n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
}

static void w_bytes(wbuf *w, int field, const void *p, size_t n)
{
    w_varint(w, (uint64_t)field << 3 | 2);
    w_varint(w, n);
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void w_str(wbuf *w, int field, const char *s) { w_bytes(w, field, s, strlen(s)); }

/* A NodeDef with inputs; attr "dtype" = DT_FLOAT when typed. */
static void w_node(wbuf *g, const char *name, const char *op, const char *in0, const char *in1, bool typed)
{
    wbuf n = {.n = 0};
    w_str(&n, 1, name);
    w_str(&n, 2, op);
    if (in0)
        w_str(&n, 3, in0);
    if (in1)
        w_str(&n, 3, in1);
    if (typed) {
        wbuf av = {.n = 0}, e = {.n = 0};
        w_varint(&av, 6 << 3 | 0);
        w_varint(&av, 1); /* DT_FLOAT */
        w_str(&e, 1, "dtype");
        w_bytes(&e, 2, av.b, av.n);
        w_bytes(&n, 5, e.b, e.n);
    }
    w_bytes(g, 1, n.b, n.n);
}

static tfvm_status import_bytes(const wbuf *g, const char *outputs, tfvm_error *err)
{
    isa_program p;
    tfvm_status st = imp_tf(g->b, g->n, "g.pb", outputs, 1, NULL, &p, err);
    if (st == TFVM_OK)
        isa_program_release(&p);
    return st;
}

START_TEST(error_messages)
{
    tfvm_error err;
    wbuf g = {.n = 0};
    w_node(&g, "x", "Placeholder", NULL, NULL, true);
    w_node(&g, "y", "Digamma", "x", NULL, false);
    ck_assert_int_eq(import_bytes(&g, NULL, &err), TFVM_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.message, "g.pb: node 'y': op 'Digamma' is not supported");

    /* truncated: the last node's bytes cut short */
    wbuf t = g;
    t.n -= 3;
    ck_assert_int_eq(import_bytes(&t, NULL, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, "g.pb: not a binary GraphDef (protobuf parse failed)");

    /* malformed: an input naming no node */
    wbuf m = {.n = 0};
    w_node(&m, "x", "Placeholder", NULL, NULL, true);
    w_node(&m, "y", "Neg", "z:0", NULL, false);
    ck_assert_int_eq(import_bytes(&m, NULL, &err), TFVM_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.message, "g.pb: node 'y': input 'z:0' names no node output");

    /* a cycle outside any loop */
    wbuf c = {.n = 0};
    w_node(&c, "a", "Neg", "b", NULL, false);
    w_node(&c, "b", "Neg", "a", NULL, false);
    w_node(&c, "y", "Neg", "a", NULL, false);
    ck_assert_int_eq(import_bytes(&c, "y", &err), TFVM_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.message, "g.pb: node 'a' (Neg): is on a cycle outside any while loop");

    /* an unsupported op inside a library function */
    isa_program p;
    ck_assert_int_eq(import_file(FIX "bad_function_op.pb", NULL, NULL, &p, &err), TFVM_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.message, FIX "bad_function_op.pb: function 'f': node 'd': op 'Digamma' is not supported");
    /* v1: a Merge that joins no cond */
    ck_assert_int_eq(import_file(FIX "bad_merge.pb", NULL, NULL, &p, &err), TFVM_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.message,
                     FIX "bad_merge.pb: node 'm' (Merge): joins values that are not the two branches of one cond");

    /* an output naming no node */
    ck_assert_int_eq(import_bytes(&g, "nope:0", &err), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(err.message, "g.pb: output 'nope:0' names no node");
}
END_TEST

/* The composite activations (compiler/decomp.h) on extreme inputs, in a
 * GraphDef written here (TensorFlow Addons' Mish has no fixture maker):
 * within 1e-6 + 1e-6 |want| of the float64 values, NaN for NaN, limits
 * exactly at +-inf. */
START_TEST(activations_at_extremes)
{
    static const char *const ops[] = {"Softplus", "Softsign", "Addons>Mish", "Elu", "Selu", "LeakyRelu"};
    static const float x[8] = {-INFINITY, -100, -0.0f, 0, 1, 100, INFINITY, NAN};
    static const double want[6][8] = {
        {0, 3.7835e-44, 0.6931471806, 0.6931471806, 1.3132616875, 100, INFINITY, NAN},
        {-1, -0.9900990099, -0.0, 0, 0.5, 0.9900990099, 1, NAN},
        {0, -3.7835e-42, -0.0, 0, 0.8650983882, 100, INFINITY, NAN},
        {-1, -1, -0.0, 0, 1, 100, INFINITY, NAN},
        {-1.7580993408, -1.7580993408, -0.0, 0, 1.0507009874, 105.07009874, INFINITY, NAN},
        {-INFINITY, -20, -0.0, 0, 1, 100, INFINITY, NAN},
    };
    wbuf g = {.n = 0};
    w_node(&g, "x", "Placeholder", NULL, NULL, true);
    for (size_t k = 0; k < UT_COUNTOF(ops); k++)
        w_node(&g, ops[k], ops[k], "x", NULL, true);
    isa_program p;
    tfvm_error err;
    ck_assert_msg(imp_tf(g.b, g.n, "g.pb", "Softplus,Softsign,Addons>Mish,Elu,Selu,LeakyRelu", 1, NULL, &p, &err) ==
                      TFVM_OK,
                  "%s", err.message);
    int64_t dims[1] = {8};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, 1, dims, NULL);
    memcpy(tfvm_tensor_data(t), x, sizeof x);
    tfvm_value a = tfvm_tensor_value(t), r[6];
    char msg[256] = "";
    ck_assert_msg(run_prog(&p, &a, 1, r, 6, true, NULL, msg, sizeof msg) == TFVM_OK, "%s", msg);
    for (size_t k = 0; k < UT_COUNTOF(ops); k++) {
        const float *y = tfvm_tensor_cdata(r[k].tensor);
        for (int i = 0; i < 8; i++) {
            double w = want[k][i];
            bool ok = isnan(w) ? isnan(y[i]) : isinf(w) ? y[i] == w : fabs(y[i] - w) <= 1e-6 + 1e-6 * fabs(w);
            ck_assert_msg(ok, "%s at x = %g: got %.9g, want %.9g", ops[k], x[i], y[i], w);
        }
        tfvm_value_release(&r[k]);
    }
    tfvm_tensor_free(t);
    isa_program_release(&p);
}
END_TEST

START_TEST(nomem_at_every_allocation)
{
    char *data;
    size_t len;
    tfvm_error err;
    /* v1 loop with a cond; recursive functions; TF2 While over TensorLists */
    static const char *const files[] = {FIX "cond_in_loop.pb", FIX "fib.pb", FIX "v2_rnn.pb"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        ck_assert_int_eq(ut_read_file(files[f], NULL, &data, &len, &err), TFVM_OK);
        for (long n = 0;; n++) {
            tu_alloc ta = {.countdown = n};
            tfvm_allocator a = tu_allocator(&ta);
            isa_program p;
            tfvm_status st = imp_tf(data, len, "g.pb", NULL, 1, &a, &p, &err);
            if (st == TFVM_OK) {
                isa_program_release(&p);
                ck_assert_int_eq(ta.live, 0);
                break;
            }
            ck_assert_msg(st == TFVM_ERR_NOMEM, "%s: allocation %ld: %s", files[f], n, err.message);
            ck_assert_int_eq(ta.live, 0);
        }
        ut_free(NULL, data, len + 1);
    }
}
END_TEST

/* Copies SavedModel fixture `name` to a new directory with its
 * variables.index cut to `index_len` bytes (SIZE_MAX: whole); returns it. */
static char *copy_saved_model(const char *name, size_t index_len, char *dir)
{
    static const char *const parts[] = {"saved_model.pb", "variables/variables.index",
                                        "variables/variables.data-00000-of-00001"};
    strcpy(dir, "/tmp/tfvm_sm_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char sub[300];
    snprintf(sub, sizeof sub, "%s/variables", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        char from[300], to[300], *data;
        size_t len;
        tfvm_error err;
        snprintf(from, sizeof from, FIX "%s/%s", name, parts[i]);
        snprintf(to, sizeof to, "%s/%s", dir, parts[i]);
        ck_assert_int_eq(ut_read_file(from, NULL, &data, &len, &err), TFVM_OK);
        FILE *f = fopen(to, "wb");
        ck_assert_ptr_nonnull(f);
        fwrite(data, 1, i == 1 && index_len < len ? index_len : len, f);
        fclose(f);
        ut_free(NULL, data, len + 1);
    }
    return dir;
}

static void remove_saved_model(const char *dir)
{
    char path[300];
    static const char *const parts[] = {"saved_model.pb", "variables/variables.index",
                                        "variables/variables.data-00000-of-00001", "variables", ""};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, parts[i]);
        remove(path);
    }
}

/* SavedModel directories: exact messages for what is missing or broken,
 * and every allocation failure ends in TFVM_ERR_NOMEM with nothing leaked. */
START_TEST(saved_model_errors)
{
    static const struct {
        const char *dir, *sig;
        size_t cut; /* variables.index cut to this many bytes (0: not copied) */
        tfvm_status st;
        const char *msg; /* after the directory's name */
    } cases[] = {
        {FIX "nope_sm", NULL, 0, TFVM_ERR_IO, ": not a SavedModel directory (no saved_model.pb)"},
        {FIX "while_decoder_sm", "encode", 0, TFVM_ERR_ARGUMENT,
         ": no signature 'encode' (the SavedModel has: serving_default)"},
        {"while_decoder_sm", NULL, 20, TFVM_ERR_FORMAT,
         "/variables/variables.index: not a TensorBundle index (shorter than its footer)"},
        {"while_decoder_sm", NULL, 100, TFVM_ERR_FORMAT,
         "/variables/variables.index: not a TensorBundle index (no table magic)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char tmp[64], want[400];
        const char *dir = cases[i].cut ? copy_saved_model(cases[i].dir, cases[i].cut, tmp) : cases[i].dir;
        isa_program p;
        tfvm_error err;
        tfvm_status st = imp_saved_model(dir, cases[i].sig, 1, NULL, NULL, &p, &err);
        snprintf(want, sizeof want, "%s%s", dir, cases[i].msg);
        if (cases[i].cut)
            remove_saved_model(dir);
        ck_assert_msg(st == cases[i].st, "case %zu: %s", i, err.message);
        ck_assert_str_eq(err.message, want);
    }
    for (long n = 0;; n++) {
        tu_alloc ta = {.countdown = n};
        tfvm_allocator a = tu_allocator(&ta);
        isa_program p;
        tfvm_error err;
        tfvm_status st = imp_saved_model(FIX "while_decoder_sm", NULL, 1, NULL, &a, &p, &err);
        if (st == TFVM_OK) {
            isa_program_release(&p);
            ck_assert_int_eq(ta.live, 0);
            break;
        }
        ck_assert_msg(st == TFVM_ERR_NOMEM, "allocation %ld: %s", n, err.message);
        ck_assert_int_eq(ta.live, 0);
    }
}
END_TEST

int main(void)
{
    n_fixtures = read_index(fixtures, 64);
    Suite *s = suite_create("tf");
    TCase *tc = tcase_create("tf");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, fixture_runs, 0, n_fixtures > 0 ? n_fixtures : 1);
    tcase_add_loop_test(tc, fixture_runs_unoptimized, 0, n_fixtures > 0 ? n_fixtures : 1);
    tcase_add_test(tc, recursive_fib_25);
    tcase_add_test(tc, parallel_iterations);
    tcase_add_test(tc, error_messages);
    tcase_add_test(tc, activations_at_extremes);
    tcase_add_test(tc, nomem_at_every_allocation);
    tcase_add_test(tc, saved_model_errors);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
