/* test/unit/test_asm.c — the .tfasm assembler and disassembler (docs/asm.md):
 * every example round-trips byte for byte (dis -> asm -> ld_write), bad text gets
 * its exact message, ld_format_inst matches dis, allocation failure is clean. */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/loader.h"
#include "testutil.h"

/* ---- helpers --------------------------------------------------------------- */
static void assemble_ok(const char *text, size_t len, const char *name, isa_program *p)
{
    tfvm_error err;
    tfvm_status st = ld_assemble(text, len, name, NULL, p, &err);
    ck_assert_msg(st == TFVM_OK, "%s: %s", name, err.message);
}

static char *dis_text(const isa_program *p, size_t *len)
{
    ut_buf b;
    ut_buf_init(&b, NULL);
    tfvm_error err;
    ck_assert_msg(ld_disassemble(p, &b, &err) == TFVM_OK, "%s", err.message);
    char *s = ut_buf_take(&b, len);
    ck_assert_ptr_nonnull(s);
    return s;
}

static char *write_bytes(const isa_program *p, size_t *len)
{
    ut_buf b;
    ut_buf_init(&b, NULL);
    tfvm_error err;
    ck_assert_msg(ld_write(p, &b, &err) == TFVM_OK, "%s", err.message);
    char *s = ut_buf_take(&b, len);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* P -> dis -> asm -> Q: ld_write(P) == ld_write(Q), and dis(Q) == dis(P). */
static void check_round_trip(const isa_program *p, const char *what)
{
    size_t dl, dl2, wl, wl2;
    char *d = dis_text(p, &dl);
    isa_program q;
    tfvm_error err;
    tfvm_status st = ld_assemble(d, dl, "dis.tfasm", NULL, &q, &err);
    ck_assert_msg(st == TFVM_OK, "%s: reassembling the disassembly: %s\n%s", what, err.message, d);
    char *w = write_bytes(p, &wl), *w2 = write_bytes(&q, &wl2);
    ck_assert_msg(wl == wl2 && memcmp(w, w2, wl) == 0, "%s: ld_write differs after dis -> asm\n%s", what, d);
    char *d2 = dis_text(&q, &dl2);
    ck_assert_msg(dl == dl2 && memcmp(d, d2, dl) == 0, "%s: dis is not stable:\n%s\n----\n%s", what, d, d2);
    free(d);
    free(d2);
    free(w);
    free(w2);
    isa_program_release(&q);
}

static void round_trip_text(const char *text, const char *what)
{
    isa_program p;
    assemble_ok(text, strlen(text), what, &p);
    check_round_trip(&p, what);
    isa_program_release(&p);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The paths of the .tfasm files in examples/asm, sorted. */
static char **example_paths(int *n)
{
    DIR *dir = opendir("examples/asm");
    ck_assert_msg(dir != NULL, "run the unit tests from the repository root");
    char **v = calloc(256, sizeof *v);
    *n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) && *n < 255) {
        size_t l = strlen(e->d_name);
        if (l > 6 && strcmp(e->d_name + l - 6, ".tfasm") == 0) {
            v[*n] = malloc(l + 16);
            snprintf(v[*n], l + 16, "examples/asm/%s", e->d_name);
            ++*n;
        }
    }
    closedir(dir);
    qsort(v, (size_t)*n, sizeof *v, cmp_str);
    return v;
}

static void free_paths(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static char *read_text(const char *path, size_t *len)
{
    char *t;
    tfvm_error err;
    ck_assert_msg(ut_read_file(path, NULL, &t, len, &err) == TFVM_OK, "%s", err.message);
    return t;
}

/* ---- examples --------------------------------------------------------------- */
START_TEST(examples_round_trip)
{
    int n;
    char **paths = example_paths(&n);
    ck_assert_int_ge(n, 8);
    for (int i = 0; i < n; i++) {
        size_t len;
        char *t = read_text(paths[i], &len);
        ck_assert_msg(strstr(t, "; expect: ") != NULL, "%s has no '; expect:' line", paths[i]);
        isa_program p;
        assemble_ok(t, len, paths[i], &p);
        ck_assert_uint_gt(p.n_insts, 0);
        check_round_trip(&p, paths[i]);
        isa_program_release(&p);
        free(t);
    }
    free_paths(paths, n);
}
END_TEST

/* Each instruction line of dis, without indentation and label padding, is
 * exactly ld_format_inst of that instruction. */
static void check_format_inst(const isa_program *p, const char *what)
{
    size_t dl;
    char *d = dis_text(p, &dl);
    uint32_t i = 0;
    char *save = NULL;
    for (char *line = strtok_r(d, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "    ", 4) != 0)
            continue;
        ut_buf want;
        ut_buf_init(&want, NULL);
        char *s = line + 4, *sp = strchr(s, ' ');
        if (*s == ' ') { /* no label */
            while (*s == ' ')
                s++;
            ut_buf_printf(&want, "%s", s);
        } else {
            ck_assert_ptr_nonnull(sp);
            char *rest = sp;
            while (*rest == ' ')
                rest++;
            ut_buf_printf(&want, "%.*s %s", (int)(sp - s), s, rest);
        }
        ut_buf_append(&want, "", 1);
        ut_buf b;
        ut_buf_init(&b, NULL);
        ck_assert_uint_lt(i, p->n_insts);
        ld_format_inst(p, i++, &b);
        ut_buf_append(&b, "", 1);
        ck_assert_msg(strcmp((char *)b.data, (char *)want.data) == 0, "%s: instruction %u:\n %s\n %s", what, i - 1,
                      (char *)b.data, (char *)want.data);
        ut_buf_free(&b);
        ut_buf_free(&want);
    }
    ck_assert_uint_eq(i, p->n_insts);
    free(d);
}

START_TEST(format_inst_matches_dis)
{
    int n;
    char **paths = example_paths(&n);
    for (int f = 0; f < n; f++) {
        size_t len;
        char *t = read_text(paths[f], &len);
        isa_program p;
        assemble_ok(t, len, paths[f], &p);
        check_format_inst(&p, paths[f]);
        free(t);
        isa_program_release(&p);
    }
    free_paths(paths, n);
}
END_TEST

/* A MERGE with more producers than ld_format_inst keeps on its stack. */
START_TEST(format_inst_big_merge)
{
    ut_buf t;
    ut_buf_init(&t, NULL);
    ut_buf_printf(&t, "entry main() -> (r: i32) {\n");
    for (int k = 0; k < 300; k++)
        ut_buf_printf(&t, "    c%d = CONST i32 %d\n", k, k);
    ut_buf_printf(&t, "    m = MERGE (");
    for (int k = 0; k < 300; k++)
        ut_buf_printf(&t, k ? ", c%d | c%d" : "c%d | c%d", k, (k + 1) % 300);
    ut_buf_printf(&t, ") [c7, c8 | c9]\n    RESULT 0 (m)\n}\n");
    isa_program p;
    assemble_ok((char *)t.data, t.len, "big.tfasm", &p);
    ck_assert_uint_eq(p.insts[300].n_in, 300);
    check_format_inst(&p, "big merge");
    check_round_trip(&p, "big merge");
    isa_program_release(&p);
    ut_buf_free(&t);
}
END_TEST

/* ---- the exact output of dis -------------------------------------------------- */
static const char *SMALL =
    "; a little of everything\n"
    "entry main(n: i32, t: f32[...]) -> (r: i32, u: f32[...]) {\n"
    "  n = ARG 0\n"
    "  t = ARG 1\n"
    "  c = CONST i32 -7 @3:4\n"
    "  RESULT 1 (t)\n"
    "  %9 = ADD (n, c)\n"
    "  k = ENTER body parallel=4 const (%9)\n"
    "  f = ENTER body (n)\n"
    "  RESULT 0 (body.x)\n"
    "  loop body {\n"
    "    m = MERGE (f, nx)\n"
    "    k = CONST bool true [m]\n"
    "    s = SWITCH (m, k)\n"
    "    nx = NEXTITER (s:1)\n"
    "    y = ADD (s, main.k)\n"
    "    x = EXIT body (y | s:0)\n"
    "  }\n"
    "}\n";

static const char *SMALL_DIS =
    "entry main(n: i32, t: f32[...]) -> (r: i32, u: f32[...]) {\n"
    "    n  = ARG 0\n"
    "    t  = ARG 1\n"
    "    c  = CONST i32 -7 @3:4\n"
    "         RESULT 1 (t)\n"
    "    %4 = ADD (n, c)\n"
    "    k  = ENTER body const parallel=4 (%4)\n"
    "    f  = ENTER body (n)\n"
    "         RESULT 0 (body.x)\n"
    "}\n"
    "\n"
    "loop body in main {\n"
    "    m  = MERGE (f, nx)\n"
    "    k  = CONST bool true [m]\n"
    "    s  = SWITCH (m, k)\n"
    "    nx = NEXTITER (s:1)\n"
    "    y  = ADD (s, main.k)\n"
    "    x  = EXIT body (s | y)\n"
    "}\n";

START_TEST(dis_format)
{
    isa_program p;
    assemble_ok(SMALL, strlen(SMALL), "small.tfasm", &p);
    size_t len;
    char *d = dis_text(&p, &len);
    ck_assert_str_eq(d, SMALL_DIS);
    free(d);
    ut_buf b;
    ut_buf_init(&b, NULL);
    ld_format_inst(&p, 4, &b);
    ut_buf_append(&b, "", 1);
    ck_assert_str_eq((char *)b.data, "%4 = ADD (n, c)");
    b.len = 0;
    ld_format_inst(&p, 3, &b);
    ut_buf_append(&b, "", 1);
    ck_assert_str_eq((char *)b.data, "RESULT 1 (t)");
    b.len = 0;
    ld_format_inst(&p, 999, &b);
    ut_buf_append(&b, "", 1);
    ck_assert_str_eq((char *)b.data, "?");
    ut_buf_free(&b);
    check_round_trip(&p, "small");
    check_format_inst(&p, "small");
    isa_program_release(&p);
}
END_TEST

/* ---- forms dis only prints for programs from elsewhere ---------------------- */
/* shared and unused constant-table entries, entries out of region order, an
 * entry whose region has another name */
static const char *EXPLICIT =
    "const #0 = f64[2, 2] [[1.5, -0.0], [inf, nan(0x7ff0000000000001)]]\n"
    "const #1 = i64 9223372036854775807\n"
    "const #2 = bool[3] [true, false, true]\n"
    "entry #1 first() -> (a: f64[...], b: f64[...]) region first_body {\n"
    "    x = CONST #0\n"
    "    y = CONST #0\n"
    "    RESULT 0 (x)\n"
    "    RESULT 1 (y)\n"
    "}\n"
    "entry #0 second(q: i64) -> (r: i64) {\n"
    "    k = CONST #1\n"
    "    s = CONST i32 5\n"
    "    RESULT 0 (k)\n"
    "}\n";

/* FEED and FETCH: their names become u8 constants, inline or declared (#K),
 * and both forms round-trip; the verifier's channel rules, word for word. */
static const char *const CHANNELS =
    "entry main(n: i32) -> (r: i32) {\n"
    "    a = ARG 0\n"
    "    x = FEED \"in.x\" i32 (a)\n"
    "    t = FEED \"batch/0\" f32[] (x:1)\n"
    "    f = FETCH \"out\" (x, t:1)\n"
    "    RESULT 0 (f)\n"
    "}\n";

START_TEST(channels_round_trip)
{
    isa_program p;
    assemble_ok(CHANNELS, strlen(CHANNELS), "channels.tfasm", &p);
    ck_assert_uint_eq(p.n_consts, 3);
    ck_assert_int_eq(p.consts[p.insts[1].a].dtype, TFVM_U8);
    ck_assert_uint_eq(p.insts[2].b, TFVM_F32 | ISA_CHAN_TENSOR);
    size_t len;
    char *d = dis_text(&p, &len);
    ck_assert_msg(strstr(d, "x = FEED \"in.x\" i32 (a)\n"), "%s", d);
    ck_assert_msg(strstr(d, "t = FEED \"batch/0\" f32[...] (x:1)\n"), "%s", d);
    ck_assert_msg(strstr(d, "f = FETCH \"out\" (x, t:1)\n"), "%s", d);
    free(d);
    check_round_trip(&p, "channels");
    isa_program_release(&p);
    static const char *const TABLE = "const #0 = u8[3] [111, 117, 116]\n" /* "out" */
                                     "entry main(n: i32) -> (r: i32) {\n"
                                     "    a = ARG 0\n"
                                     "    f = FETCH #0 (a, a)\n"
                                     "    g = FETCH #0 (f, f:1)\n"
                                     "    RESULT 0 (g)\n"
                                     "}\n";
    assemble_ok(TABLE, strlen(TABLE), "table.tfasm", &p);
    ck_assert_uint_eq(p.n_consts, 1);
    d = dis_text(&p, &len);
    ck_assert_msg(strstr(d, "    g = FETCH #0 (f, f:1)\n"), "%s", d);
    free(d);
    check_round_trip(&p, "channel table");
    isa_program_release(&p);
    /* a declared shape: an i64 constant after the name, inline or declared */
    static const char *const SHAPED = "entry main() -> (r: f32[]) {\n"
                                      "    o = CONST i32 0\n"
                                      "    m = FEED \"m\" f32[?, 3] (o)\n"
                                      "    RESULT 0 (m)\n"
                                      "}\n";
    assemble_ok(SHAPED, strlen(SHAPED), "shaped.tfasm", &p);
    ck_assert_uint_eq(p.insts[1].b, TFVM_F32 | ISA_CHAN_TENSOR | 3u << ISA_CHAN_SHAPE_SHIFT);
    ck_assert(p.consts[2].dtype == TFVM_I64 && p.consts[2].dims[0] == 2);
    d = dis_text(&p, &len);
    ck_assert_msg(strstr(d, "    m = FEED \"m\" f32[?, 3] (o)\n"), "%s", d);
    free(d);
    check_round_trip(&p, "shaped channel");
    isa_program_release(&p);
    static const char *const SHAPED_TABLE = "const #0 = u8[1] [109]\n" /* "m" */
                                            "const #1 = i64[2] [-1, 3]\n"
                                            "entry main() -> (r: f32[]) {\n"
                                            "    o = CONST #0\n"
                                            "    m = FEED #0 f32[#1] (o)\n"
                                            "    RESULT 0 (m)\n"
                                            "}\n";
    assemble_ok(SHAPED_TABLE, strlen(SHAPED_TABLE), "shaped_table.tfasm", &p);
    d = dis_text(&p, &len);
    ck_assert_msg(strstr(d, "    m = FEED #0 f32[#1] (o)\n"), "%s", d);
    free(d);
    check_round_trip(&p, "shaped channel table");
    isa_program_release(&p);
}
END_TEST

START_TEST(explicit_forms_round_trip)
{
    isa_program p;
    assemble_ok(EXPLICIT, strlen(EXPLICIT), "explicit.tfasm", &p);
    ck_assert_uint_eq(p.n_consts, 4);
    ck_assert_uint_eq(p.insts[0].a, 0);
    ck_assert_uint_eq(p.insts[1].a, 0);
    ck_assert_uint_eq(p.insts[5].a, 3);
    ck_assert_str_eq(p.entries[0].name, "second");
    ck_assert_uint_eq(p.entries[0].region, 1);
    ck_assert_str_eq(p.entries[1].name, "first");
    ck_assert_str_eq(p.regions[0].name, "first_body");
    size_t len;
    char *d = dis_text(&p, &len);
    ck_assert_msg(strstr(d, "const #0 = f64[2, 2] [[1.5, -0.0], [inf, nan(0x7ff0000000000001)]]\n"), "%s", d);
    ck_assert_msg(strstr(d, "entry #1 first() -> (a: f64[...], b: f64[...]) region first_body {\n"), "%s", d);
    ck_assert_msg(strstr(d, "    s = CONST #3\n"), "%s", d);
    free(d);
    check_round_trip(&p, "explicit");
    isa_program_release(&p);
}
END_TEST

START_TEST(constants_round_trip)
{
    round_trip_text("entry main() -> () {\n"
                    "    a = CONST i32 -2147483648\n"
                    "    b = CONST i32 2147483647\n"
                    "    c = CONST i64 -9223372036854775808\n"
                    "    d = CONST f32 0.1\n"
                    "    e = CONST f64 0.1\n"
                    "    f = CONST f32 -nan\n"
                    "    g = CONST f32 nan(0xffc00001)\n"
                    "    h = CONST f64 -inf\n"
                    "    i = CONST f64 1e300\n"
                    "    j = CONST f64 4.9e-324\n"
                    "    k = CONST f32 1e-45\n"
                    "    l = CONST f32[0] []\n"
                    "    m = CONST i64[3, 0, 2] []\n"
                    "    n = CONST f32[1, 1, 1, 1, 1, 1, 1, 2] [[[[[[[[1, 2]]]]]]]]\n"
                    "    o = CONST i32[2, 3] [[1, 2, 3],\n"
                    "                         [4, 5, 6]]\n"
                    "    p = CONST bool false\n"
                    "    q = CONST f64 100\n"
                    "}\n",
                    "constants");
    /* every value prints as the shortest decimal that reads back exactly */
    isa_program p;
    const char *t = "entry main() -> () {\n    x = CONST f64 100\n    y = CONST f32 0.1\n    z = CONST f64 1e21\n}\n";
    assemble_ok(t, strlen(t), "c.tfasm", &p);
    size_t len;
    char *d = dis_text(&p, &len);
    ck_assert_msg(strstr(d, "x = CONST f64 100.0\n") && strstr(d, "y = CONST f32 0.1\n") &&
                      strstr(d, "z = CONST f64 1e+21\n"),
                  "%s", d);
    free(d);
    isa_program_release(&p);
}
END_TEST

/* A parameter's default (`= #K`, a declared constant) survives dis -> asm
 * and the .tfvm file, and must be a value of the parameter's type. */
START_TEST(param_defaults_round_trip)
{
    static const char *text = "const #0 = f32[2] [1, 2]\n"
                              "entry main(x: f32[2], w: f32[2] = #0) -> (y: f32[...]) {\n"
                              "    x = ARG 0\n"
                              "    w = ARG 1\n"
                              "    y = ADD (x, w)\n"
                              "        RESULT 0 (y)\n"
                              "}\n";
    round_trip_text(text, "defaults");
    isa_program p;
    assemble_ok(text, strlen(text), "d.tfasm", &p);
    ck_assert(!p.entries[0].params[0].has_default && p.entries[0].params[1].has_default);
    ck_assert_uint_eq(p.entries[0].params[1].dflt, 0);
    isa_program_release(&p);
    static const char *bad = "const #0 = f32[3] [1, 2, 3]\n"
                             "entry main(w: f32[2] = #0) -> () {\n"
                             "    w = ARG 0\n"
                             "}\n";
    tfvm_error err;
    ck_assert_int_eq(ld_assemble(bad, strlen(bad), "d.tfasm", NULL, &p, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, "d.tfasm: bad .tfvm file (entry 0 'main': parameter 0 'w': default constant 0 is "
                                  "not a value of type f32[2])");
}
END_TEST

/* Random bit patterns (NaN payloads, subnormals, -0) survive dis -> asm. */
START_TEST(float_bits_round_trip)
{
    const char *t = "entry main() -> () {\n"
                    "    a = CONST f32[64] [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,"
                    " 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,"
                    " 0, 0, 0, 0, 0, 0, 0, 0]\n"
                    "    b = CONST f64[64] [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,"
                    " 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,"
                    " 0, 0, 0, 0, 0, 0, 0, 0]\n"
                    "}\n";
    uint64_t seed = 0x9e3779b97f4a7c15u;
    for (int round = 0; round < 50; round++) {
        isa_program p;
        assemble_ok(t, strlen(t), "bits.tfasm", &p);
        unsigned char *fa = (unsigned char *)p.consts[0].data, *fb = (unsigned char *)p.consts[1].data;
        for (int k = 0; k < 64; k++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            uint64_t v = seed;
            if (k % 8 == 1) /* exponent all ones: inf and NaNs */
                v |= 0x7ff0000000000000u;
            if (k % 8 == 2) /* subnormals */
                v &= 0x800fffffffffffffu;
            uint32_t w = (uint32_t)(v >> 16);
            if (k % 8 == 1)
                w |= 0x7f800000u;
            if (k % 8 == 2)
                w &= 0x807fffffu;
            for (int j = 0; j < 4; j++)
                fa[4 * k + j] = (unsigned char)(w >> (8 * j));
            for (int j = 0; j < 8; j++)
                fb[8 * k + j] = (unsigned char)(v >> (8 * j));
        }
        check_round_trip(&p, "float bits");
        isa_program_release(&p);
    }
}
END_TEST

/* Names: shadowing forces qualification, anonymous instructions, every
 * attribute kind, several producers on data and control ports. */
START_TEST(names_and_attributes_round_trip)
{
    round_trip_text("entry main(x: f64) -> (r: f64, s: bool) {\n"
                    "    x = ARG 0\n"
                    "    c1 = CONST f64 1\n"
                    "    e = ENTER lp (x)\n"
                    "    one = ENTER lp const (c1)\n"
                    "    RESULT 0 (lp.out)\n"
                    "    RESULT 1 (%20)\n"
                    "    loop lp {\n"
                    "        one = CONST f64 2 [e]\n"            /* shadows main.one */
                    "        m = MERGE (e, nx)\n"
                    "        a = ADD (m, main.one)\n"            /* must stay qualified */
                    "        b = ADD (a, one)\n"
                    "        c = CAST i32 (b)\n"
                    "        d = CAST f64 (c)\n"
                    "        q = LESS (d, main.one)\n"
                    "        p = LOOPCOND (q)\n"
                    "        s = SWITCH (d, p)\n"
                    "        nx = NEXTITER (s:1)\n"
                    "        out = EXIT lp (s:0)\n"
                    "        sel = SELECT (p, a, b) [m | e, s:1 | s:0]\n"
                    "        %20 = EXIT lp (q)\n"
                    "    }\n"
                    "}\n"
                    "func unused {\n"
                    "    v = IDENTITY (other.c)\n"
                    "    w = NEG (v)\n"
                    "    k = CONST i32 3 [v] @7:0\n"
                    "}\n"
                    "entry other(b: bool) -> (c: bool) {\n"
                    "    b = ARG 0\n"
                    "    n = NOT (b)\n"
                    "    mm = MERGE (b, n, b2)\n"
                    "    b2 = AND (b, n)\n"
                    "    c = CALL unused@7 (b)\n"
                    "    RESULT 0 (mm)\n"
                    "    r = RETURN unused@7 (unused.w)\n"
                    "}\n",
                    "names");
}
END_TEST

START_TEST(empty_and_minimal)
{
    round_trip_text("", "empty");
    round_trip_text("; only a comment", "comment");
    round_trip_text("entry main() -> () {\n}\n", "empty entry");
    round_trip_text("entry main() { }", "no results");
    round_trip_text("entry main() -> (r: i32) { r = CONST i32 1\n RESULT 0 (r) }", "one line");
    /* CRLF line ends and tabs */
    round_trip_text("entry main()\t-> (r: i32) {\r\n\tr = CONST i32 1\r\n\tRESULT 0 (r)\r\n}\r\n", "crlf");
}
END_TEST

/* ---- attributes, placement, constant operands, pruned switches ------------------ */
/* Every new form once; #0 and #1 come from the declared table, the other
 * constant operands are inline and get the entries after it. */
static const char *OPERANDS =
    "const #0 = i64[1] [1]\n"
    "const #1 = f32 2.5\n"
    "entry main(x: f32[...], n: i64) -> (r: f32[...], s: f32[...], t: i64, u: f32[...]) {\n"
    "    x    = ARG 0\n"
    "    n    = ARG 1\n"
    "    m    = MATMUL ta tb on cuda (x, x)\n"
    "    m2   = MATMUL tb (x, x)\n"
    "    sm   = SOFTMAX axis=-1 on cpu (m)\n"
    "    am   = ARGMAX axis=0 (sm)\n"
    "    rs   = REDUCE_SUM keepdims (x, #0)\n"
    "    rm   = REDUCE_MEAN (x, #0)\n"
    "    cc   = CONCAT axis=7 on cpu (rs, rm)\n"
    "    k    = SUB (n, i64 2)\n"
    "    k2   = SUB (i64 10, k)\n"
    "    p    = LESS (k2, i64 5)\n"
    "    sw   = SWITCH prune_false prune_true (k, p)\n"
    "    sel  = SELECT (p, i64 1, k2)\n"
    "    sel2 = SELECT on cpu (p, sel, i64 -1)\n"
    "    mg   = MERGE (sw, sw:1)\n"
    "    ad   = ADD (mg, sel2)\n"
    "    f    = MUL (x, #1)\n"
    "    c    = CAST f64 on cpu (n)\n"
    "           RESULT 0 (cc)\n"
    "           RESULT 1 (m2)\n"
    "           RESULT 2 (ad)\n"
    "           RESULT 3 (f)\n"
    "}\n";

static const isa_inst *inst_named(const isa_program *p, const char *name)
{
    for (uint32_t i = 0; i < p->n_insts; i++)
        if (p->insts[i].name && strcmp(p->insts[i].name, name) == 0)
            return &p->insts[i];
    ck_abort_msg("no instruction '%s'", name);
    return NULL;
}

#define IMM(port) ((uint16_t)(((port) + 1) << ISA_FLAG_IMM_SHIFT))

START_TEST(operands_and_options_round_trip)
{
    isa_program p;
    assemble_ok(OPERANDS, strlen(OPERANDS), "operands.tfasm", &p);
    /* the encoding (docs/format.md) */
    const isa_inst *in = inst_named(&p, "m");
    ck_assert_uint_eq(in->flags, ISA_FLAG_DEV_CUDA);
    ck_assert_uint_eq(in->a, ISA_OPT_TRANS_A | ISA_OPT_TRANS_B);
    ck_assert_uint_eq(inst_named(&p, "m2")->a, ISA_OPT_TRANS_B);
    in = inst_named(&p, "sm");
    ck_assert_uint_eq(in->a, UINT32_MAX); /* -1, two's complement */
    ck_assert_uint_eq(in->flags, ISA_FLAG_DEV_CPU);
    ck_assert_uint_eq(inst_named(&p, "am")->a, 0);
    ck_assert_uint_eq(inst_named(&p, "cc")->a, 7);
    in = inst_named(&p, "rs");
    ck_assert_uint_eq(in->a, ISA_OPT_KEEPDIMS);
    ck_assert_uint_eq(in->flags, IMM(1));
    ck_assert_uint_eq(in->b, 0);
    ck_assert_uint_eq(inst_named(&p, "rm")->b, 0); /* one entry, two users */
    ck_assert_uint_eq(inst_named(&p, "f")->b, 1);
    in = inst_named(&p, "k");
    ck_assert_uint_eq(in->flags, IMM(1));
    ck_assert_uint_eq(in->b, 2); /* inline: after the declared entries */
    ck_assert_int_eq(p.consts[2].dtype, TFVM_I64);
    ck_assert_int_eq(*(const int64_t *)p.consts[2].data, 2);
    in = inst_named(&p, "k2");
    ck_assert_uint_eq(in->flags, IMM(0));
    ck_assert_int_eq(*(const int64_t *)p.consts[in->b].data, 10);
    ck_assert_uint_eq(inst_named(&p, "sw")->flags, ISA_FLAG_PRUNE_FALSE | ISA_FLAG_PRUNE_TRUE);
    ck_assert_uint_eq(inst_named(&p, "sel")->flags, IMM(1));
    in = inst_named(&p, "sel2");
    ck_assert_uint_eq(in->flags, IMM(2) | ISA_FLAG_DEV_CPU);
    ck_assert_int_eq(*(const int64_t *)p.consts[in->b].data, -1);
    ck_assert_uint_eq(inst_named(&p, "c")->flags, ISA_FLAG_DEV_CPU);
    ck_assert_uint_eq(p.n_consts, 7);
    /* no edge lands on a constant operand's port */
    for (uint32_t e = 0; e < p.n_edges; e++)
        ck_assert_int_ne((int)p.edges[e].port, isa_imm_port(&p.insts[p.edges[e].inst]));
    /* shared entries: dis prints the table and every operand by index */
    size_t len;
    char *d = dis_text(&p, &len);
    ck_assert_msg(strstr(d, "const #0 = i64[1] [1]\nconst #1 = f32 2.5\nconst #2 = i64 2\n"), "%s", d);
    ck_assert_msg(strstr(d, "    m    = MATMUL ta tb on cuda (x, x)\n"), "%s", d);
    ck_assert_msg(strstr(d, "    sm   = SOFTMAX axis=-1 on cpu (m)\n"), "%s", d);
    ck_assert_msg(strstr(d, "    rs   = REDUCE_SUM keepdims (x, #0)\n"), "%s", d);
    ck_assert_msg(strstr(d, "    k    = SUB (n, #2)\n"), "%s", d);
    ck_assert_msg(strstr(d, "    sw   = SWITCH prune_false prune_true (k, p)\n"), "%s", d);
    ck_assert_msg(strstr(d, "    sel2 = SELECT on cpu (p, sel, #6)\n"), "%s", d);
    free(d);
    check_round_trip(&p, "operands");
    check_format_inst(&p, "operands");
    isa_program_release(&p);
}
END_TEST

/* Without a declared table every constant operand is printed inline, in the
 * form it was written; in loops and functions too, beside control inputs. */
static const char *OPERANDS_INLINE =
    "entry main(n: i32, t: f32[...]) -> (r: i32, u: f32[...]) {\n"
    "    n = ARG 0\n"
    "    t = ARG 1\n"
    "    c = CALL f@1 (n)\n"
    "    r = RETURN f@1 (f.s)\n"
    "    e = ENTER lp (n)\n"
    "    u = MUL (t, f32[2, 2] [[1.0, 2.0], [3.0, 4.0]])\n"
    "        RESULT 0 (lp.o)\n"
    "        RESULT 1 (u)\n"
    "}\n"
    "\n"
    "loop lp in main {\n"
    "    m  = MERGE (e, nx)\n"
    "    d  = SUB (m, i32 1) [m]\n"
    "    p  = GREATER (d, i32 0)\n"
    "    s  = SWITCH prune_true (d, p)\n"
    "    nx = NEXTITER (s:1)\n"
    "    o  = EXIT lp (s)\n"
    "}\n"
    "\n"
    "func f {\n"
    "    x = IDENTITY (main.c)\n"
    "    b = LESS (i32 3, x)\n"
    "    s = SELECT (b, x, i32 -2147483648)\n"
    "    w = SELECT (bool false, x, s)\n"
    "}\n";

START_TEST(operands_inline_round_trip)
{
    isa_program p;
    assemble_ok(OPERANDS_INLINE, strlen(OPERANDS_INLINE), "inline.tfasm", &p);
    size_t len;
    char *d = dis_text(&p, &len);
    ck_assert_str_eq(d, OPERANDS_INLINE); /* the text above is dis's own layout */
    free(d);
    ck_assert_uint_eq(inst_named(&p, "d")->n_ctl, 1);
    ck_assert_uint_eq(inst_named(&p, "w")->flags, IMM(0));
    ck_assert_uint_eq(p.n_consts, 6);
    check_round_trip(&p, "inline operands");
    check_format_inst(&p, "inline operands");
    isa_program_release(&p);
    /* a CONST and a constant operand sharing entry #0 */
    round_trip_text("const #0 = i32 4\n"
                    "entry main(n: i32) -> (r: i32) {\n"
                    "    n = ARG 0\n"
                    "    k = CONST #0\n"
                    "    a = ADD (n, #0)\n"
                    "    b = MUL (k, a)\n"
                    "    RESULT 0 (b)\n"
                    "}\n",
                    "shared entry");
}
END_TEST

/* Parameter and result names from imported models ("x:0", "input.1",
 * "dense/BiasAdd") are quoted in .tfasm; plain identifiers are not. */
START_TEST(quoted_parameter_names)
{
    static const char text[] = "entry main(\"x:0\": f32[...], \"input.1\": i32, plain: i32) -> (\"dense/BiasAdd\": f32[...]) {\n"
                               "    a = ARG 0\n"
                               "    RESULT 0 (a)\n"
                               "}\n";
    isa_program p;
    assemble_ok(text, strlen(text), "quoted", &p);
    ck_assert_str_eq(p.entries[0].params[0].name, "x:0");
    ck_assert_str_eq(p.entries[0].params[1].name, "input.1");
    ck_assert_str_eq(p.entries[0].params[2].name, "plain");
    ck_assert_str_eq(p.entries[0].results[0].name, "dense/BiasAdd");
    size_t len;
    char *d = dis_text(&p, &len);
    ck_assert_msg(strstr(d, "entry main(\"x:0\": f32[...], \"input.1\": i32, plain: i32) -> (\"dense/BiasAdd\": f32[...]) {\n"),
                  "%s", d);
    free(d);
    check_round_trip(&p, "quoted");
    isa_program_release(&p);
}
END_TEST

/* ---- errors ------------------------------------------------------------------- */
typedef struct bad_case {
    const char *text, *message;
} bad_case;

#define HDR "entry main(n: i32) -> (r: i32) {\n    a = ARG 0\n"
#define FTR "}\n"

static const bad_case bad_cases[] = {
    {"entry main(w: f32[2] = #0) -> () {\n}\n", "t.tfasm:1:22: default #0 of 'w' is not a declared constant (0 declared)"},
    {"entry main() -> (r: i32 = #0) {\n}\n",
     "t.tfasm:1:25: a result has no default (only a parameter has: w: f32[2] = #0)"},
    {HDR "    x = ADDD (a, a)\n" FTR, "t.tfasm:3:9: unknown instruction 'ADDD'"},
    {HDR "    x = ADD (a, a x\n" FTR, "t.tfasm:3:19: expected ')' after inputs, got 'x'"},
    {HDR "    x = ADD (a, foo)\n    RESULT 0 (x)\n" FTR, "t.tfasm:3:17: 'foo' is not defined in region 'main' or its parents"},
    {HDR "    x = ADD (a, a, a)\n" FTR, "t.tfasm:3:9: ADD takes 2 inputs, got 3"},
    {HDR "    x = NEG (a, a)\n" FTR, "t.tfasm:3:9: NEG takes 1 input, got 2"},
    {HDR "    k = CONST i32 3000000000\n" FTR, "t.tfasm:3:19: integer 3000000000 out of range for i32"},
    {HDR "    k = CONST i32 -2147483649\n" FTR, "t.tfasm:3:19: integer -2147483649 out of range for i32"},
    {HDR "    k = CONST i32 2.5\n" FTR, "t.tfasm:3:19: expected an integer for i32, got '2.5'"},
    {HDR "    c = CALL f@3 (a)\n    r = RETURN g@3 (g.y)\n    RESULT 0 (r)\n" FTR
         "func f {\n    x = IDENTITY (main.c)\n}\nfunc g {\n    y = IDENTITY (main.c)\n}\n",
     "t.tfasm:4:16: site 3 calls 'g' here but 'f' at 3:14"},
    {HDR "    a = ARG 0\n" FTR, "t.tfasm:3:5: duplicate name 'a' in entry 'main' (first at 2:5)"},
    {HDR "    RESULT 0 (a)\n" FTR "func main {\n}\n", "t.tfasm:5:6: duplicate region name 'main' (first at 1:7)"},
    {HDR "    RESULT 0 (nope.x)\n" FTR, "t.tfasm:3:15: region 'nope' is not defined"},
    {HDR "    RESULT 0 (main.zz)\n" FTR, "t.tfasm:3:20: 'zz' is not defined in region 'main'"},
    {"entry main(n: i33) -> () {\n}\n", "t.tfasm:1:15: unknown type 'i33'"},
    {"entry main(\"a b\": i32) -> () {\n}\n", "t.tfasm:1:12: a quoted name is '\"' then printable characters (no spaces) then '\"'"},
    {"entry main(\"\": i32) -> () {\n}\n", "t.tfasm:1:12: a quoted name is '\"' then printable characters (no spaces) then '\"'"},
    {HDR "    x = FEED \"x!\" i32 (a)\n" FTR, "t.tfasm:3:14: a channel name is 1 to 64 letters, digits and _.:/-, got 'x!'"},
    {HDR "    x = FEED x i32 (a)\n" FTR,
     "t.tfasm:3:14: expected the channel's name in quotes after FEED (FEED \"x\"), got 'x'"},
    {HDR "    x = FEED \"x\" (a)\n" FTR, "t.tfasm:3:18: expected a type (bool, i32, i64, f32, f64, u8, i8, i16, u16, u32, u64, f16, bf16), got '('"},
    {HDR "    x = FEED \"x\" i32[ (a)\n" FTR,
     "t.tfasm:3:23: expected a dimension (an integer or '?'), got '('"},
    {HDR "    x = FEED \"x\" i32[2 (a)\n" FTR,
     "t.tfasm:3:24: expected ']' after '[' (a FEED of a tensor of any rank is TYPE[], of a shape TYPE[?, 8]), got '('"},
    {HDR "    x = FETCH \"y\" i32 (a, a)\n" FTR, "t.tfasm:3:19: expected end of line after the instruction, got 'i32'"},
    {"entry main(\"ab: i32) -> () {\n}\n", "t.tfasm:1:12: a quoted name is '\"' then printable characters (no spaces) then '\"'"},
    {"entry \"main\"() -> () {\n}\n", "t.tfasm:1:7: expected a entry name after 'entry', got 'main'"},
    {HDR "    RESULT 0 (a)\n    e = ENTER lp cnst (a)\n" FTR, "t.tfasm:4:18: unknown ENTER option 'cnst' (expected const or parallel=N)"},
    {HDR "    m = MERGE ()\n" FTR, "t.tfasm:3:9: MERGE needs at least 1 input"},
    {HDR "    s = SWITCH (a, a)\n    RESULT 0 (s:2)\n" FTR, "t.tfasm:4:15: 's' has no output 2 (SWITCH has 2 outputs)"},
    {HDR "    q = RESULT 0 (a)\n    x = NEG (q)\n" FTR, "t.tfasm:4:14: 'q' is a RESULT and has no outputs"},
    {HDR "    x = NEG (a) $\n" FTR, "t.tfasm:3:17: unexpected character '$'"},
    {HDR "    x = NEG (a) \xc3\xa9\n" FTR, "t.tfasm:3:17: unexpected byte 0xc3"},
    {HDR "    b = ARG 1\n" FTR, "t.tfasm:3:9: ARG 1 out of range: entry 'main' has 1 parameter"},
    {HDR "    RESULT 0 (a)\n" FTR "func f {\n    b = ARG 0\n}\n",
     "t.tfasm:6:9: ARG is only allowed in an entry's region (this is func 'f')"},
    {HDR "    k = CONST i32[3] [1, 2]\n" FTR, "t.tfasm:3:27: too few elements along axis 0 (expected 3, got 2)"},
    {HDR "    k = CONST i32[2] [1, 2, 3]\n" FTR, "t.tfasm:3:27: too many elements along axis 0 (expected 2)"},
    {HDR "    k = CONST i32[2, 2] [[1, 2], [3]]\n" FTR, "t.tfasm:3:36: too few elements along axis 1 (expected 2, got 1)"},
    {HDR "    e = ENTER main (a)\n" FTR, "t.tfasm:3:15: ENTER needs a loop, but entry 'main' is not one"},
    {HDR "    RESULT 0 (a)\n" FTR "func f {\n    e = ENTER lp (main.a)\n}\nloop lp in main {\n    x = IDENTITY (f.e)\n}\n",
     "t.tfasm:6:15: ENTER lp must be in region 'main' (the loop's parent), not in func 'f'"},
    {HDR "    e = ENTER lp (a)\n    RESULT 0 (lp.x)\n" FTR "loop lp in main {\n    x = EXIT lq (e)\n}\n",
     "t.tfasm:7:14: EXIT lq must be in loop 'lq' (this is loop 'lp')"},
    {HDR "    c = CALL main@0 (a)\n" FTR, "t.tfasm:3:14: CALL calls entry 'main', which is not a func"},
    {HDR "    RESULT 0 (a)\n" FTR "func f {\n    x = NEG (main.a)\n}\n",
     "t.tfasm:6:14: 'a' is in region 'main', but this NEG is in region 'f' (only ENTER, EXIT, CALL and RETURN cross regions)"},
    {HDR "    r = RETURN f@1 (a)\n    c = CALL f@1 (a)\n    RESULT 0 (r)\n" FTR "func f {\n    x = IDENTITY (main.c)\n}\n",
     "t.tfasm:3:21: 'a' is in region 'main', but RETURN reads from its callee 'f' (only ENTER, EXIT, CALL and RETURN cross regions)"},
    {HDR "    x = IDENTITY (a | a)\n" FTR, "t.tfasm:3:23: 'a' already feeds input 0 of this instruction"},
    {HDR "    x = NEG (a) [a, a | a]\n" FTR, "t.tfasm:3:25: 'a' already feeds control input 1 of this instruction"},
    {HDR "    %3 = NEG (a)\n    %3 = NEG (a)\n" FTR, "t.tfasm:4:5: duplicate label '%3' (first at 3:5)"},
    {HDR "    RESULT 0 (a)\n" FTR "loop lp in nowhere {\n}\n", "t.tfasm:5:12: region 'nowhere' is not defined"},
    {"loop lp in main {\n}\n" HDR "    RESULT 0 (a)\n" FTR, "t.tfasm:1:12: loop 'lp' must come after its parent region 'main'"},
    {HDR "    x = CAST c64 (a)\n" FTR, "t.tfasm:3:14: unknown type 'c64'"},
    {HDR "    k = CONST bool 1\n" FTR, "t.tfasm:3:20: expected true or false for bool, got '1'"},
    {HDR "    e = ENTER lp parallel=0 (a)\n" FTR, "t.tfasm:3:27: parallel must be 1..65536, got 0"},
    {HDR "    RESULT 0 (a)\n", "t.tfasm:4:1: expected '}' to close entry 'main' (opened at 1:1), got end of file"},
    {"x = ADD (a, b)\n", "t.tfasm:1:1: expected 'entry', 'func', 'loop' or 'const', got 'x'"},
    {HDR "    RESULT 0 (a)\n    RESULT 0 (a)\n" FTR, "t.tfasm:4:5: RESULT 0 is already given at 3:5"},
    {HDR FTR, "t.tfasm:1:7: entry 'main' has no RESULT 0"},
    {HDR "    RESULT 0 (a)\n    e = ENTER lp const (a)\n" FTR "loop lp in main {\n    x = IDENTITY (e)\n}\n",
     "t.tfasm:6:6: loop 'lp' has no ENTER (a loop needs at least one ENTER without const)"},
    {HDR "    x = NEXTITER (a)\n" FTR, "t.tfasm:3:9: NEXTITER is only allowed in a loop (this is entry 'main')"},
    {HDR "    RESULT 0 (a)\n" FTR "func f {\n    k = CONST i32 1\n}\n",
     "t.tfasm:6:9: CONST in func 'f' needs a control input, as in CONST i32 1 [x]: it fires at that input's tag"},
    {HDR "    r = RETURN f@1 (f.x)\n    RESULT 0 (r)\n" FTR "func f {\n    x = CONST i32 1 [x]\n}\n",
     "t.tfasm:3:9: site 1 has no CALL (each call site needs at least one CALL)"},
    {HDR "    c = CALL f@1 (a)\n    RESULT 0 (a)\n" FTR "func f {\n    n = IDENTITY (main.c)\n    d = CALL f@1 (n)\n}\n",
     "t.tfasm:8:9: site 1 is used in func 'f' here but in region 'main' at 3:9"},
    {HDR "    k = CONST f32 1e39\n" FTR, "t.tfasm:3:19: number 1e39 out of range for f32"},
    {HDR "    k = CONST f16 65520\n" FTR, "t.tfasm:3:19: number 65520 out of range for f16"},
    {HDR "    k = CONST bf16 -4e38\n" FTR, "t.tfasm:3:20: number -4e38 out of range for bf16"},
    {HDR "    k = CONST u16 65536\n" FTR, "t.tfasm:3:19: integer 65536 out of range for u16"},
    {HDR "    k = CONST u64 -1\n" FTR, "t.tfasm:3:19: integer -1 out of range for u64"},
    {HDR "    k = CONST u64 18446744073709551616\n" FTR, "t.tfasm:3:19: integer 18446744073709551616 out of range for u64"},
    {HDR "    k = CONST f16 x\n" FTR, "t.tfasm:3:19: expected a number for f16 (or inf, nan), got 'x'"},
    {HDR "    k = CONST f32 nan(0x3f800000)\n" FTR, "t.tfasm:3:23: 0x3f800000 is not a NaN bit pattern for f32"},
    {HDR "    %3 NEG (a)\n" FTR, "t.tfasm:3:8: expected '=' after label '%3', got 'NEG'"},
    {HDR "    entry = NEG (a)\n    func f {\n" FTR, "t.tfasm:4:5: 'func' blocks cannot be nested (close entry 'main' first)"},
    {HDR "    k = CONST f32[] 1\n" FTR, "t.tfasm:3:18: a CONST tensor type needs its dimensions, as in f32[2, 3] (a scalar is just f32)"},
    {HDR "    k = CONST f32[0] [1.0]\n" FTR, "t.tfasm:3:23: expected ']' (a CONST without elements is written []), got '1.0'"},
    {HDR "    x = NEG (a) @12\n" FTR, "t.tfasm:3:20: expected ':' between the line and column of '@LINE:COL', got end of line"},
    {HDR "    RESULT 0 (a)\n" FTR "loop lp {\n}\n",
     "t.tfasm:5:9: expected 'in PARENT' after loop 'lp' (a top-level loop names its parent), got '{'"},
    {HDR "    x = NEG (a\n    RESULT 0 (x)\n" FTR, "t.tfasm:4:5: expected ')' after inputs, got 'RESULT'"},
    {HDR "    k = CONST i32 12abc\n" FTR, "t.tfasm:3:19: malformed number '12abc'"},
    {HDR "    k = CONST #2\n" FTR "const #0 = i32 1\n", "t.tfasm:3:9: const #2 is not declared (1 declared)"},
    {"const #1 = i32 1\n", "t.tfasm:1:8: expected const #0 here (the table is declared in order), got #1"},
    {"entry #0 a() {\n}\nentry #0 b() {\n}\n", "t.tfasm:3:8: entry #0 is already 'a' (at 1:8)"},
    {"entry #0 a() {\n}\nentry b() {\n}\n", "t.tfasm:3:7: entry 'b' needs an index (entry #K b) like the other entries"},
    {"entry #2 a() {\n}\n", "t.tfasm:1:8: entry #2 out of range (1 entry)"},
    {HDR "    x = NEG (a) [q.%3]\n" FTR, "t.tfasm:3:20: expected an instruction name after 'q.', got '%3'"},
    {HDR "    x = NEG (%7)\n" FTR, "t.tfasm:3:14: label '%7' is not defined"},
    {HDR "    x = NEG (a) junk\n" FTR, "t.tfasm:3:17: expected end of line after the instruction, got 'junk'"},
    {HDR "    x = NEG (a)\n    RESULT 0 (x)\n} }\n", "t.tfasm:5:3: expected 'entry', 'func', 'loop' or 'const', got '}'"},
    {HDR "    e = ENTER lp (a)\n    RESULT 0 (a)\n    loop lp in other {\n    }\n" FTR,
     "t.tfasm:5:16: a loop written inside entry 'main' has that region as its parent, not 'other'"},
    {"entry main(n: i32) -> (r: i32) {\n    a = ARG 0\n    k = CONST i32 1 @3:99999999999\n" FTR,
     "t.tfasm:3:24: a column number 99999999999 is too large (at most 4294967295)"},
    {"entry main(n: i32) -> (r: i32) {\n    a = ARG 0\n    k = CONST f64 nan(0x7ff8)\n" FTR,
     "t.tfasm:3:23: 0x7ff8 is not a NaN bit pattern for f64"},    /* constant operands */
    {HDR "    x = ADD (i32 1, i32 2)\n" FTR, "t.tfasm:3:21: only one input of an instruction may be a constant"},
    {HDR "    x = SWITCH (i32 1, a)\n" FTR,
     "t.tfasm:3:17: SWITCH takes no constant operands (only compute instructions with 2+ inputs do)"},
    {HDR "    x = NEG (i32 1)\n" FTR, "t.tfasm:3:14: NEG takes no constant operands (only compute instructions with 2+ inputs do)"},
    {HDR "    x = MERGE (a, i32 1)\n" FTR,
     "t.tfasm:3:19: MERGE takes no constant operands (only compute instructions with 2+ inputs do)"},
    {HDR "    x = SELECT (a, a, a, i32 1)\n" FTR, "t.tfasm:3:26: only inputs 0 to 2 may be constants"},
    {HDR "    x = ADD (a, i32 3000000000)\n" FTR, "t.tfasm:3:21: integer 3000000000 out of range for i32"},
    {HDR "    x = ADD (a, #3)\n    RESULT 0 (x)\n" FTR, "t.tfasm:3:9: const #3 is not declared (0 declared)"},
    /* axis and options */
    {HDR "    x = SOFTMAX axis=9 (a)\n" FTR, "t.tfasm:3:22: axis must be -8..7, got 9"},
    {HDR "    x = SOFTMAX axis=-9 (a)\n" FTR, "t.tfasm:3:23: axis must be -8..7, got -9"},
    {HDR "    x = SOFTMAX (a)\n" FTR, "t.tfasm:3:17: expected axis=N after SOFTMAX, got '('"},
    {HDR "    x = ARGMAX axis=x (a)\n" FTR, "t.tfasm:3:21: expected an axis number after 'axis=', got 'x'"},
    {HDR "    x = MATMUL tc (a, a)\n" FTR, "t.tfasm:3:16: unknown MATMUL option 'tc'"},
    {HDR "    x = REDUCE_SUM ta (a, a)\n" FTR, "t.tfasm:3:20: unknown REDUCE_SUM option 'ta'"},
    {HDR "    x = MATMUL ta ta (a, a)\n" FTR, "t.tfasm:3:19: 'ta' given twice"},
    /* placement */
    {HDR "    x = ADD on gpu (a, a)\n" FTR, "t.tfasm:3:16: expected a device after 'on' (cpu or cuda), got 'gpu'"},
    {HDR "    x = ADD on\n" FTR, "t.tfasm:3:15: expected a device after 'on' (cpu or cuda), got end of line"},
    {HDR "    x = IDENTITY on cpu (a)\n" FTR, "t.tfasm:3:18: IDENTITY cannot be placed on a device (only compute instructions can)"},
    {HDR "    x = ADD (a, a) on cpu\n" FTR, "t.tfasm:3:20: 'on DEVICE' goes before the inputs, as in ADD on cpu (...)"},
    /* pruned switches */
    {HDR "    x = ADD prune_false (a, a)\n" FTR, "t.tfasm:3:13: 'prune_false' is an option of SWITCH and BRANCH, not of ADD"},
    {HDR "    x = SWITCH prune_true prune_true (a, a)\n" FTR, "t.tfasm:3:27: 'prune_true' given twice"},
    /* BRANCH */
    {HDR "    x = BRANCH ADD i32 1 (a)\n" FTR,
     "t.tfasm:3:16: expected a comparison (LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, EQUAL, NOT_EQUAL) after BRANCH, got 'ADD'"},
    {HDR "    x = BRANCH LESS i32[2] [1, 2] (a)\n" FTR, "t.tfasm:3:21: the constant of BRANCH must be a scalar"},
    {HDR "    x = BRANCH LESS (a)\n" FTR, "t.tfasm:3:21: expected a type (bool, i32, i64, f32, f64, u8, i8, i16, u16, u32, u64, f16, bf16), got '('"},
};

START_TEST(channel_rules)
{
    static const char *const cases[][2] = {
        {HDR "    x = FEED \"x\" i32 (a)\n    y = FETCH \"x\" (a, a)\n    RESULT 0 (a)\n" FTR,
         "t.tfasm: bad .tfvm file (channel 'x' is both fed (instruction 1 'x') and fetched (instruction 2 'y'))"},
        {HDR "    x = FEED \"x\" i32 (a)\n    y = FEED \"x\" f32[] (a)\n    RESULT 0 (a)\n" FTR,
         "t.tfasm: bad .tfvm file (the FEEDs of channel 'x' disagree on its type: i32 (instruction 1 'x') and f32[...] "
         "(instruction 2 'y'))"},
        /* shapes compare by contents (each FEED has its own constant) */
        {HDR "    x = FEED \"x\" f32[?, 3] (a)\n    y = FEED \"x\" f32[?, 3] (a)\n    z = FEED \"x\" f32[?, 4] (a)\n"
             "    RESULT 0 (a)\n" FTR,
         "t.tfasm: bad .tfvm file (the FEEDs of channel 'x' disagree on its type: f32[?, 3] (instruction 2 'y') and "
         "f32[?, 4] (instruction 3 'z'))"},
        {"const #0 = u8[1] [120]\n" HDR "    x = FEED #0 f32[#0] (a)\n    RESULT 0 (a)\n" FTR,
         "t.tfasm: bad .tfvm file (instruction 1 'x': FEED shape: constant 0 is not a vector of at most 8 i64 "
         "dimensions (-1 or more))"},
        {"const #0 = i32[1] [7]\n" HDR "    f = FETCH #0 (a, a)\n    RESULT 0 (f)\n" FTR,
         "t.tfasm: bad .tfvm file (instruction 1 'f': FETCH channel name: constant 0 is not 1 to 64 bytes (u8) of "
         "letters, digits and _.:/-)"},
    };
    for (size_t i = 0; i < UT_COUNTOF(cases); i++) {
        isa_program p;
        tfvm_error err;
        tfvm_status st = ld_assemble(cases[i][0], strlen(cases[i][0]), "t.tfasm", NULL, &p, &err);
        ck_assert_msg(st == TFVM_ERR_FORMAT, "case %zu: %s", i, tfvm_status_name(st));
        ck_assert_str_eq(err.message, cases[i][1]);
    }
}
END_TEST

START_TEST(bad_syntax)
{
    size_t i = (size_t)_i;
    isa_program p;
    tfvm_error err;
    memset(&err, 0, sizeof err);
    const char *text = bad_cases[i].text;
    tfvm_status st = ld_assemble(text, strlen(text), "t.tfasm", NULL, &p, &err);
    ck_assert_msg(st == TFVM_ERR_SYNTAX, "case %zu: got %s (%s)", i, tfvm_status_name(st), err.message);
    ck_assert_msg(strcmp(err.message, bad_cases[i].message) == 0, "case %zu:\n got  %s\n want %s", i, err.message,
                  bad_cases[i].message);
    ck_assert_uint_eq(p.n_insts, 0); /* released */
}
END_TEST

/* Names of up to 127 characters, no longer. */
START_TEST(long_names)
{
    char text[512], name[200];
    for (int len = 126; len <= 128; len++) {
        memset(name, 'a', (size_t)len);
        name[len] = '\0';
        snprintf(text, sizeof text, "entry main() -> () {\n    %s = CONST i32 1\n}\n", name);
        isa_program p;
        tfvm_error err;
        tfvm_status st = ld_assemble(text, strlen(text), "t.tfasm", NULL, &p, &err);
        if (len <= 127) {
            ck_assert_msg(st == TFVM_OK, "%s", err.message);
            check_round_trip(&p, "long name");
            isa_program_release(&p);
        } else {
            ck_assert_int_eq(st, TFVM_ERR_SYNTAX);
            ck_assert_str_eq(err.message, "t.tfasm:2:5: name is longer than 127 characters");
        }
    }
}
END_TEST

/* Text that does not end (no final newline, cut in the middle of anything)
 * gives an error, never a crash. */
static void every_prefix(const char *t, size_t len)
{
    for (size_t n = 0; n < len; n++) {
        char *cut = malloc(n ? n : 1); /* exact size: ASan sees any overread */
        memcpy(cut, t, n);
        isa_program p;
        tfvm_error err;
        tfvm_status st = ld_assemble(cut, n, "cut.tfasm", NULL, &p, &err);
        if (st == TFVM_OK)
            isa_program_release(&p);
        else
            ck_assert_msg(st == TFVM_ERR_SYNTAX || st == TFVM_ERR_FORMAT, "%zu: %s", n, err.message);
        free(cut);
    }
}

START_TEST(every_prefix_fails_cleanly)
{
    size_t len;
    char *t = read_text("examples/asm/ackermann.tfasm", &len);
    every_prefix(t, len);
    free(t);
    every_prefix(OPERANDS, strlen(OPERANDS)); /* cut inside axis=, on DEVICE, a constant operand */
}
END_TEST

/* ---- allocation failure --------------------------------------------------------- */
static void nomem_loop(const char *t, size_t len, const char *path)
{
    for (long n = 0;; n++) {
        tu_alloc f = {.countdown = n};
        tfvm_allocator a = tu_allocator(&f);
        isa_program p;
        tfvm_error err;
        tfvm_status st = ld_assemble(t, len, path, &a, &p, &err);
        if (st == TFVM_OK) {
            /* and the disassembler, failing at every point too */
            for (long m = 0;; m++) {
                f.countdown = m;
                ut_buf b;
                ut_buf_init(&b, &a);
                tfvm_status ds = ld_disassemble(&p, &b, &err);
                ut_buf_free(&b);
                if (ds == TFVM_OK)
                    break;
                ck_assert_msg(ds == TFVM_ERR_NOMEM, "%s: dis failing allocation %ld: %s", path, m, err.message);
            }
            isa_program_release(&p);
            ck_assert_int_eq(f.blocks, 0);
            ck_assert_int_gt(n, 3);
            break;
        }
        ck_assert_msg(st == TFVM_ERR_NOMEM, "%s: failing allocation %ld: %s %s", path, n, tfvm_status_name(st),
                      err.message);
        ck_assert_msg(f.blocks == 0, "%s: failing allocation %ld leaked %ld blocks", path, n, f.blocks);
    }
}

START_TEST(allocation_failure)
{
    int n;
    char **paths = example_paths(&n);
    for (int i = 0; i < n; i++) {
        size_t len;
        char *t = read_text(paths[i], &len);
        nomem_loop(t, len, paths[i]);
        free(t);
    }
    free_paths(paths, n);
    nomem_loop(EXPLICIT, strlen(EXPLICIT), "explicit");
    nomem_loop(SMALL, strlen(SMALL), "small");
    nomem_loop(OPERANDS, strlen(OPERANDS), "operands");
    nomem_loop(OPERANDS_INLINE, strlen(OPERANDS_INLINE), "inline operands");
    /* and failing ones: the error paths release everything too */
    for (size_t k = 0; k < UT_COUNTOF(bad_cases); k++) {
        for (long m = 0;; m++) {
            tu_alloc f = {.countdown = m};
            tfvm_allocator a = tu_allocator(&f);
            isa_program p;
            tfvm_error err;
            tfvm_status st = ld_assemble(bad_cases[k].text, strlen(bad_cases[k].text), "t.tfasm", &a, &p, &err);
            ck_assert_int_eq(f.blocks, 0);
            if (st != TFVM_ERR_NOMEM) {
                ck_assert_int_eq(st, TFVM_ERR_SYNTAX);
                ck_assert_str_eq(err.message, bad_cases[k].message);
                break;
            }
        }
    }
}
END_TEST

static Suite *asm_suite(void)
{
    Suite *s = suite_create("asm");
    TCase *tc = tcase_create("asm");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, examples_round_trip);
    tcase_add_test(tc, format_inst_matches_dis);
    tcase_add_test(tc, format_inst_big_merge);
    tcase_add_test(tc, dis_format);
    tcase_add_test(tc, explicit_forms_round_trip);
    tcase_add_test(tc, constants_round_trip);
    tcase_add_test(tc, param_defaults_round_trip);
    tcase_add_test(tc, float_bits_round_trip);
    tcase_add_test(tc, names_and_attributes_round_trip);
    tcase_add_test(tc, empty_and_minimal);
    tcase_add_test(tc, operands_and_options_round_trip);
    tcase_add_test(tc, operands_inline_round_trip);
    tcase_add_test(tc, quoted_parameter_names);
    tcase_add_loop_test(tc, bad_syntax, 0, (int)UT_COUNTOF(bad_cases));
    tcase_add_test(tc, long_names);
    tcase_add_test(tc, channels_round_trip);
    tcase_add_test(tc, channel_rules);
    tcase_add_test(tc, every_prefix_fails_cleanly);
    tcase_add_test(tc, allocation_failure);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(asm_suite()); }
