/* test/unit/test_loader.c — the .tfvm reader/writer and the verifier: round trips,
 * a corpus of damaged images (each with its exact message), allocation failure at
 * every point, and the checked-in test/bad corpus. */
#include "loader/loader.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* ---- The file layout, restated from docs/format.md (independent of format.c) -- */
enum { S_STRINGS = 1, S_DATA, S_CONSTS, S_REGIONS, S_ENTRIES, S_PARAMS, S_SITES, S_INSTS, S_EDGES, S_DEBUG };
#define HDR 32u
#define SECENT 24u

/* ---- A fib-like program ----------------------------------------------------------
 * main (ROOT): f = fib(n) through call site 1; s = a while loop counting to n.
 * fib (FUNC): if n < 2 then n else fib(n-1) + fib(n-2) through sites 2 and 5.
 * sum_loop (LOOP in main): ENTER/MERGE/LESS/LOOPCOND/SWITCH/ADD/NEXTITER/EXIT. */
typedef struct ispec {
    uint16_t op;
    uint32_t region, n_in, n_ctl, a, b;
    uint16_t flags;
    const char *name;
    uint32_t line, col;
} ispec;
typedef struct espec {
    uint32_t src, out, dst, port;
} espec;

enum { R_MAIN, R_FIB, R_LOOP };
#define I(op, reg, nin, nctl, a, b, fl, nm, ln) {ISA_##op, reg, nin, nctl, a, b, fl, nm, ln, ln ? 3 : 0}
static const ispec fib_insts[] = {
    /* 0 */ I(ARG, R_MAIN, 0, 0, 0, 0, 0, "n", 1),
    /* 1 */ I(CALL, R_MAIN, 1, 0, 0, 0, 0, "call", 2),
    /* 2 */ I(RETURN, R_MAIN, 1, 0, 0, 0, 0, "ret", 3),
    /* 3 */ I(RESULT, R_MAIN, 1, 0, 0, 0, 0, "rf", 4),
    /* 4 */ I(CONST, R_MAIN, 0, 0, 0, 0, 0, "zero", 5),
    /* 5 */ I(ENTER, R_MAIN, 1, 0, R_LOOP, 0, 0, "ei", 6),
    /* 6 */ I(ENTER, R_MAIN, 1, 0, R_LOOP, 4, ISA_FLAG_CONST, "en", 7),
    /* 7 */ I(RESULT, R_MAIN, 1, 0, 1, 0, 0, "rs", 8),
    /* 8 */ I(IDENTITY, R_MAIN, 1, 1, 0, 0, 0, NULL, 0),
    /* 9 */ I(IDENTITY, R_FIB, 1, 0, 0, 0, 0, "p", 10),
    /* 10 */ I(CONST, R_FIB, 0, 1, 2, 0, 0, "two", 11),
    /* 11 */ I(LESS, R_FIB, 2, 0, 0, 0, 0, "lt", 12),
    /* 12 */ I(SWITCH, R_FIB, 2, 0, 0, 0, 0, "sw", 13),
    /* 13 */ I(CONST, R_FIB, 0, 1, 1, 0, 0, "one", 14),
    /* 14 */ I(SUB, R_FIB, 2, 0, 0, 0, 0, "a", 15),
    /* 15 */ I(SUB, R_FIB, 2, 0, 0, 0, 0, "b", 16),
    /* 16 */ I(CALL, R_FIB, 1, 0, 1, 0, 0, "c1", 17),
    /* 17 */ I(RETURN, R_FIB, 1, 0, 1, 0, 0, "r1", 18),
    /* 18 */ I(CALL, R_FIB, 1, 0, 2, 0, 0, "c2", 19),
    /* 19 */ I(RETURN, R_FIB, 1, 0, 2, 0, 0, "r2", 20),
    /* 20 */ I(ADD, R_FIB, 2, 0, 0, 0, 0, "add", 21),
    /* 21 */ I(MERGE, R_FIB, 2, 0, 0, 0, 0, "m", 22),
    /* 22 */ I(MERGE, R_LOOP, 2, 0, 0, 0, 0, "i", 30),
    /* 23 */ I(LESS, R_LOOP, 2, 0, 0, 0, 0, "lt", 31),
    /* 24 */ I(LOOPCOND, R_LOOP, 1, 0, 0, 0, 0, "lc", 32),
    /* 25 */ I(SWITCH, R_LOOP, 2, 0, 0, 0, 0, "sw", 33),
    /* 26 */ I(CONST, R_LOOP, 0, 1, 1, 0, 0, "one", 34),
    /* 27 */ I(EXIT, R_LOOP, 1, 0, R_LOOP, 0, 0, "x", 35),
    /* 28 */ I(ADD, R_LOOP, 2, 0, 0, 0, 0, NULL, 36),
    /* 29 */ I(NEXTITER, R_LOOP, 1, 0, 0, 0, 0, "nx", 37),
};
#undef I
#define N_FIB_INSTS ((uint32_t)UT_COUNTOF(fib_insts))

/* Deliberately not in canonical order: build() sorts them. */
static const espec fib_edges[] = {
    {0, 0, 6, 0}, {0, 0, 1, 0}, {0, 0, 8, 0}, {1, 0, 9, 0}, {2, 0, 3, 0}, {4, 0, 5, 0}, {4, 0, 8, 1},
    {5, 0, 22, 0}, {6, 0, 23, 1}, {9, 0, 11, 0}, {9, 0, 12, 0}, {9, 0, 10, 0}, {10, 0, 11, 1},
    {10, 0, 15, 1}, {11, 0, 12, 1}, {12, 0, 14, 0}, {12, 0, 15, 0}, {12, 0, 13, 0}, {12, 1, 21, 0},
    {13, 0, 14, 1}, {14, 0, 16, 0}, {15, 0, 18, 0}, {16, 0, 9, 0}, {17, 0, 20, 0}, {18, 0, 9, 0},
    {19, 0, 20, 1}, {20, 0, 21, 1}, {21, 0, 2, 0}, {21, 0, 17, 0}, {21, 0, 19, 0}, {22, 0, 23, 0},
    {22, 0, 25, 0}, {23, 0, 24, 0}, {24, 0, 25, 1}, {25, 0, 27, 0}, {25, 1, 28, 0}, {25, 1, 26, 0},
    {26, 0, 28, 1}, {27, 0, 7, 0}, {28, 0, 29, 0}, {29, 0, 22, 1},
};

static int espec_cmp(const void *x, const void *y)
{
    const espec *a = x, *b = y;
    if (a->src != b->src)
        return a->src < b->src ? -1 : 1;
    if (a->out != b->out)
        return a->out < b->out ? -1 : 1;
    if (a->dst != b->dst)
        return a->dst < b->dst ? -1 : 1;
    return a->port < b->port ? -1 : a->port > b->port;
}

static void *arena_copy(isa_program *p, const void *src, size_t n)
{
    void *d = ut_arena_alloc(&p->arena, n);
    ck_assert_ptr_nonnull(d);
    memcpy(d, src, n);
    return d;
}

static void build_fib(isa_program *p)
{
    isa_program_init(p, NULL);
    p->name = "fib.tfvm";
    static const isa_region regions[] = {
        {ISA_REGION_ROOT, ISA_NONE, "main"}, {ISA_REGION_FUNC, ISA_NONE, "fib"}, {ISA_REGION_LOOP, R_MAIN, "sum_loop"}};
    p->n_regions = 3;
    p->regions = arena_copy(p, regions, sizeof regions);

    static const isa_param params[] = {{.name = "n", .dtype = TFVM_I32}, {.name = "f", .dtype = TFVM_I32}, {.name = "s", .dtype = TFVM_I32}};
    isa_param *pa = arena_copy(p, params, sizeof params);
    isa_entry e = {"main", R_MAIN, 1, 2, pa, pa + 1};
    p->n_entries = 1;
    p->entries = arena_copy(p, &e, sizeof e);

    static const int32_t k0 = 0, k1 = 1, k2 = 2;
    static const uint8_t kb[2] = {1, 0};
    static const double kf[6] = {0.5, 1.5, -2, 3, 1e300, -0.0};
    isa_const c[5] = {
        {TFVM_I32, 0, {0}, 4, &k0},
        {TFVM_I32, 0, {0}, 4, &k1},
        {TFVM_I32, 0, {0}, 4, &k2},
        {TFVM_BOOL, 1, {2}, 2, kb},
        {TFVM_F64, 2, {2, 3}, 48, kf},
    };
    p->n_consts = 5;
    p->consts = arena_copy(p, c, sizeof c);

    static const isa_site sites[] = {{1, R_FIB}, {2, R_FIB}, {5, R_FIB}};
    p->n_sites = 3;
    p->sites = arena_copy(p, sites, sizeof sites);

    espec es[UT_COUNTOF(fib_edges)];
    memcpy(es, fib_edges, sizeof es);
    qsort(es, UT_COUNTOF(es), sizeof es[0], espec_cmp);
    p->n_insts = N_FIB_INSTS;
    p->insts = ut_arena_array(&p->arena, N_FIB_INSTS, sizeof *p->insts);
    p->n_edges = (uint32_t)UT_COUNTOF(es);
    p->edges = ut_arena_array(&p->arena, UT_COUNTOF(es), sizeof *p->edges);
    ck_assert(p->insts && p->edges);
    uint32_t k = 0;
    for (uint32_t i = 0; i < N_FIB_INSTS; i++) {
        const ispec *s = &fib_insts[i];
        isa_inst *in = &p->insts[i];
        *in = (isa_inst){.op = s->op, .flags = s->flags, .region = s->region, .n_in = s->n_in,
                         .n_ctl = s->n_ctl, .a = s->a, .b = s->b, .name = s->name, .line = s->line,
                         .col = s->col};
        in->edge_first = k;
        for (; k < p->n_edges && es[k].src == i; k++)
            p->edges[k] = (isa_edge){es[k].out, es[k].dst, es[k].port};
        in->n_edges = k - in->edge_first;
    }
    ck_assert_uint_eq(k, p->n_edges);
}

/* ---- Helpers ----------------------------------------------------------------------- */
static unsigned char *write_image(const isa_program *p, size_t *len)
{
    ut_buf b;
    tfvm_error err;
    ut_buf_init(&b, NULL);
    ck_assert_int_eq(ld_write(p, &b, &err), TFVM_OK);
    unsigned char *d = (unsigned char *)ut_buf_take(&b, len);
    ck_assert_ptr_nonnull(d);
    return d;
}

static unsigned char *fib_image(size_t *len)
{
    isa_program p;
    build_fib(&p);
    tfvm_error err;
    if (ld_verify(&p, &err) != TFVM_OK)
        ck_abort_msg("fib does not verify: %s", err.message);
    unsigned char *d = write_image(&p, len);
    isa_program_release(&p);
    return d;
}

static void put16(unsigned char *d, size_t at, uint16_t v)
{
    d[at] = (unsigned char)v;
    d[at + 1] = (unsigned char)(v >> 8);
}
static void put32(unsigned char *d, size_t at, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        d[at + k] = (unsigned char)(v >> (8 * k));
}
static void put64(unsigned char *d, size_t at, uint64_t v)
{
    put32(d, at, (uint32_t)v);
    put32(d, at + 4, (uint32_t)(v >> 32));
}
static void fix_crc(unsigned char *d, size_t len) { put32(d, 24, ut_crc32(0, d + 28, len - 28)); }

/* Section-table entry of section id (1.0 writer: ids 1..10 in order). */
static size_t sec_entry(int id) { return HDR + (size_t)(id - 1) * SECENT; }
static size_t sec_off(const unsigned char *d, int id) { return (size_t)ut_le64(d + sec_entry(id) + 8); }
static size_t sec_count(const unsigned char *d, int id) { return (size_t)ut_le64(d + sec_entry(id) + 16); }
static size_t rec_at(const unsigned char *d, int id, size_t i)
{
    return sec_off(d, id) + i * ut_le32(d + sec_entry(id) + 4);
}

/* Offset of a string in the string table (must exist). */
static uint32_t str_off(const unsigned char *d, const char *s)
{
    size_t off = sec_off(d, S_STRINGS), n = sec_count(d, S_STRINGS);
    for (size_t i = 0; i < n; i += strlen((const char *)d + off + i) + 1)
        if (strcmp((const char *)d + off + i, s) == 0)
            return (uint32_t)i;
    ck_abort_msg("string %s not in the table", s);
    return 0;
}

static void expect_read(const unsigned char *d, size_t len, tfvm_status code, const char *msg)
{
    isa_program p;
    tfvm_error err;
    ut_err_clear(&err);
    tfvm_status st = ld_read(d, len, "t.tfvm", NULL, &p, &err);
    ck_assert_msg(st == code, "expected %s, got %s: %s (want \"%s\")", tfvm_status_name(code),
                  tfvm_status_name(st), err.message, msg);
    if (msg)
        ck_assert_str_eq(err.message, msg);
    if (st == TFVM_OK)
        isa_program_release(&p);
    else
        ck_assert_ptr_null(p.arena.head); /* released */
}

static void prog_equal(const isa_program *a, const isa_program *b)
{
#define STREQ(x, y) ck_assert((x) == NULL ? (y) == NULL : (y) != NULL && strcmp((x), (y)) == 0)
    ck_assert_uint_eq(a->n_regions, b->n_regions);
    ck_assert_uint_eq(a->n_insts, b->n_insts);
    ck_assert_uint_eq(a->n_edges, b->n_edges);
    ck_assert_uint_eq(a->n_consts, b->n_consts);
    ck_assert_uint_eq(a->n_sites, b->n_sites);
    ck_assert_uint_eq(a->n_entries, b->n_entries);
    for (uint32_t i = 0; i < a->n_regions; i++) {
        ck_assert_uint_eq(a->regions[i].kind, b->regions[i].kind);
        ck_assert_uint_eq(a->regions[i].parent, b->regions[i].parent);
        STREQ(a->regions[i].name, b->regions[i].name);
    }
    for (uint32_t i = 0; i < a->n_entries; i++) {
        const isa_entry *x = &a->entries[i], *y = &b->entries[i];
        STREQ(x->name, y->name);
        ck_assert_uint_eq(x->region, y->region);
        ck_assert_uint_eq(x->n_params, y->n_params);
        ck_assert_uint_eq(x->n_results, y->n_results);
        for (uint32_t j = 0; j < x->n_params + x->n_results; j++) {
            const isa_param *u = j < x->n_params ? &x->params[j] : &x->results[j - x->n_params];
            const isa_param *w = j < y->n_params ? &y->params[j] : &y->results[j - y->n_params];
            STREQ(u->name, w->name);
            ck_assert_uint_eq(u->dtype, w->dtype);
            ck_assert_uint_eq(u->rank, w->rank);
        }
    }
    for (uint32_t i = 0; i < a->n_consts; i++) {
        const isa_const *x = &a->consts[i], *y = &b->consts[i];
        ck_assert_uint_eq(x->dtype, y->dtype);
        ck_assert_uint_eq(x->rank, y->rank);
        for (unsigned k = 0; k < x->rank; k++)
            ck_assert_int_eq(x->dims[k], y->dims[k]);
        ck_assert_uint_eq(x->nbytes, y->nbytes);
        ck_assert(x->nbytes == 0 || memcmp(x->data, y->data, x->nbytes) == 0);
        /* Constant data comes back aligned for its element type. */
        ck_assert_uint_eq((uintptr_t)y->data % tfvm_dtype_size((tfvm_dtype)y->dtype), 0);
    }
    for (uint32_t i = 0; i < a->n_sites; i++) {
        ck_assert_uint_eq(a->sites[i].id, b->sites[i].id);
        ck_assert_uint_eq(a->sites[i].callee, b->sites[i].callee);
    }
    for (uint32_t i = 0; i < a->n_insts; i++) {
        const isa_inst *x = &a->insts[i], *y = &b->insts[i];
        ck_assert_uint_eq(x->op, y->op);
        ck_assert_uint_eq(x->flags, y->flags);
        ck_assert_uint_eq(x->region, y->region);
        ck_assert_uint_eq(x->n_in, y->n_in);
        ck_assert_uint_eq(x->n_ctl, y->n_ctl);
        ck_assert_uint_eq(x->a, y->a);
        ck_assert_uint_eq(x->b, y->b);
        ck_assert_uint_eq(x->edge_first, y->edge_first);
        ck_assert_uint_eq(x->n_edges, y->n_edges);
        STREQ(x->name, y->name);
        ck_assert_uint_eq(x->line, y->line);
        ck_assert_uint_eq(x->col, y->col);
    }
    for (uint32_t i = 0; i < a->n_edges; i++) {
        ck_assert_uint_eq(a->edges[i].out, b->edges[i].out);
        ck_assert_uint_eq(a->edges[i].inst, b->edges[i].inst);
        ck_assert_uint_eq(a->edges[i].port, b->edges[i].port);
    }
#undef STREQ
}

/* ---- Round trips ------------------------------------------------------------------- */
START_TEST(test_roundtrip)
{
    isa_program p, q;
    tfvm_error err;
    build_fib(&p);
    ck_assert_int_eq(ld_verify(&p, &err), TFVM_OK);
    size_t n1, n2;
    unsigned char *a = write_image(&p, &n1);
    ck_assert_int_eq(ld_read(a, n1, "fib.tfvm", NULL, &q, &err), TFVM_OK);
    ck_assert_str_eq(q.name, "fib.tfvm");
    prog_equal(&p, &q);
    unsigned char *b = write_image(&q, &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert(memcmp(a, b, n1) == 0);
    /* Deterministic: a second build writes the same bytes. */
    isa_program r;
    build_fib(&r);
    size_t n3;
    unsigned char *c = write_image(&r, &n3);
    ck_assert(n3 == n1 && memcmp(a, c, n1) == 0);
    /* The string table holds each name once ("one", "lt", "sw" appear twice). */
    size_t off = sec_off(a, S_STRINGS), n = sec_count(a, S_STRINGS), seen = 0;
    for (size_t i = 0; i < n; i += strlen((const char *)a + off + i) + 1)
        seen += strcmp((const char *)a + off + i, "one") == 0;
    ck_assert_uint_eq(seen, 1);
    /* ld_write appends. */
    ut_buf buf;
    ut_buf_init(&buf, NULL);
    ut_buf_append(&buf, "xyz", 3);
    ck_assert_int_eq(ld_write(&q, &buf, &err), TFVM_OK);
    ck_assert_uint_eq(buf.len, n1 + 3);
    ck_assert(memcmp(buf.data + 3, a, n1) == 0);
    ut_buf_free(&buf);
    free(a);
    free(b);
    free(c);
    isa_program_release(&p);
    isa_program_release(&q);
    isa_program_release(&r);
}
END_TEST

START_TEST(test_empty_program)
{
    isa_program p, q;
    tfvm_error err;
    isa_program_init(&p, NULL);
    ck_assert_int_eq(ld_verify(&p, &err), TFVM_OK);
    size_t n;
    unsigned char *a = write_image(&p, &n);
    ck_assert_uint_eq(n, HDR + 10 * SECENT);
    ck_assert_int_eq(ld_read(a, n, "e.tfvm", NULL, &q, &err), TFVM_OK);
    prog_equal(&p, &q);
    free(a);
    isa_program_release(&q);
}
END_TEST

START_TEST(test_layout)
{
    size_t n;
    unsigned char *d = fib_image(&n);
    ck_assert(memcmp(d, "TFVM\r\n\x1a\n", 8) == 0);
    ck_assert_uint_eq(ut_le16(d + 8), 1);
    ck_assert_uint_eq(ut_le16(d + 10), 0);
    ck_assert_uint_eq(ut_le32(d + 12), HDR);
    ck_assert_uint_eq(ut_le64(d + 16), n);
    ck_assert_uint_eq(ut_le32(d + 24), ut_crc32(0, d + 28, n - 28));
    ck_assert_uint_eq(ut_le32(d + 28), 10);
    static const uint32_t recs[] = {0, 1, 1, 80, 12, 16, 8, 8, 24, 12, 12};
    size_t end = HDR + 10 * SECENT;
    for (int id = 1; id <= 10; id++) {
        ck_assert_uint_eq(ut_le32(d + sec_entry(id)), id);
        ck_assert_uint_eq(ut_le32(d + sec_entry(id) + 4), recs[id]);
        ck_assert_uint_eq(sec_off(d, id), end); /* contiguous, in id order */
        end += sec_count(d, id) * recs[id];
    }
    ck_assert_uint_eq(end, n);
    ck_assert_uint_eq(sec_count(d, S_INSTS), N_FIB_INSTS);
    ck_assert_uint_eq(sec_count(d, S_EDGES), UT_COUNTOF(fib_edges));
    ck_assert_uint_eq(sec_count(d, S_DATA), 4 * 3 + 2 + 2 + 48); /* f64 data padded to 8 */
    /* String table starts with the first region's name. */
    ck_assert_str_eq((const char *)d + sec_off(d, S_STRINGS), "main");
    /* Anonymous instruction 8 has no name. */
    ck_assert_uint_eq(ut_le32(d + rec_at(d, S_DEBUG, 8)), UINT32_MAX);
    free(d);
}
END_TEST

/* A 1.4 file: bigger header, bigger instruction records, an unknown section.
 * A 1.3 reader must accept it and ignore the additions; as 1.0 it is bad. */
static unsigned char *future_image(const unsigned char *d, size_t n, uint16_t minor, size_t *out_len)
{
    const uint32_t extra_hdr = 8, extra_rec = 4;
    size_t n_insts = sec_count(d, S_INSTS);
    size_t len = n + extra_hdr + SECENT + n_insts * extra_rec + 6;
    unsigned char *o = calloc(1, len);
    ck_assert_ptr_nonnull(o);
    memcpy(o, d, HDR);
    put16(o, 10, minor);
    put32(o, 12, HDR + extra_hdr);
    put64(o, 16, len);
    put32(o, 28, 11);
    size_t tab = HDR + extra_hdr, pos = tab + 11 * SECENT;
    memset(o + HDR, 0xAB, extra_hdr);
    for (int id = 1; id <= 10; id++) {
        size_t rec = ut_le32(d + sec_entry(id) + 4), cnt = sec_count(d, id), at = tab + (size_t)(id - 1) * SECENT;
        size_t nrec = id == S_INSTS ? rec + extra_rec : rec;
        put32(o, at, (uint32_t)id);
        put32(o, at + 4, (uint32_t)nrec);
        put64(o, at + 8, pos);
        put64(o, at + 16, cnt);
        for (size_t i = 0; i < cnt; i++) {
            memcpy(o + pos, d + sec_off(d, id) + i * rec, rec);
            if (nrec > rec)
                memset(o + pos + rec, 0xCD, nrec - rec);
            pos += nrec;
        }
    }
    size_t at = tab + 10 * SECENT;
    put32(o, at, 77);
    put32(o, at + 4, 3);
    put64(o, at + 8, pos);
    put64(o, at + 16, 2);
    memset(o + pos, 0xEE, 6);
    pos += 6;
    ck_assert_uint_eq(pos, len);
    fix_crc(o, len);
    *out_len = len;
    return o;
}

START_TEST(test_newer_minor)
{
    size_t n, m;
    unsigned char *d = fib_image(&n);
    unsigned char *f = future_image(d, n, 4, &m);
    isa_program p, q;
    tfvm_error err;
    ck_assert_int_eq(ld_read(d, n, "a", NULL, &p, &err), TFVM_OK);
    ck_assert_msg(ld_read(f, m, "b", NULL, &q, &err) == TFVM_OK, "%s", err.message);
    prog_equal(&p, &q);
    size_t k;
    unsigned char *g = write_image(&q, &k); /* written back as 1.0, canonical */
    ck_assert(k == n && memcmp(g, d, n) == 0);
    free(g);
    free(f);
    f = future_image(d, n, 0, &m);
    expect_read(f, m, TFVM_ERR_FORMAT, "t.tfvm: bad .tfvm file (header size 40, expected 32 at byte 12)");
    put32(f, 12, HDR + 8);
    put16(f, 10, 4);
    size_t unk = HDR + 8 + 10 * SECENT; /* the unknown section's table entry */
    put32(f, unk + 4, 0);
    fix_crc(f, m);
    expect_read(f, m, TFVM_ERR_FORMAT, "t.tfvm: bad .tfvm file (section 77 records of 0 bytes at byte 284)");
    put32(f, unk + 4, 3);
    put64(f, unk + 16, 3);
    fix_crc(f, m);
    char want[200];
    snprintf(want, sizeof want, "t.tfvm: bad .tfvm file (truncated section 77 (3 records from byte %zu) at byte %zu)",
             m - 6, m);
    expect_read(f, m, TFVM_ERR_FORMAT, want);
    put64(f, unk + 16, 2);
    put32(f, HDR + 8 + 10 * SECENT, 5); /* a newer file may add sections, but not reuse ids */
    fix_crc(f, m);
    expect_read(f, m, TFVM_ERR_FORMAT, "t.tfvm: bad .tfvm file (section 5 out of order (after section 10) at byte 280)");
    free(f);
    isa_program_release(&p);
    isa_program_release(&q);
    free(d);
}
END_TEST

/* ---- Damaged images ----------------------------------------------------------------- */
START_TEST(test_truncated_every_length)
{
    size_t n;
    unsigned char *d = fib_image(&n);
    char want[256];
    for (size_t len = 0; len < n; len++) {
        unsigned char *t = malloc(len ? len : 1); /* exact size: ASan sees any overread */
        memcpy(t, d, len);
        if (len < HDR)
            snprintf(want, sizeof want, "t.tfvm: bad .tfvm file (truncated header at byte %zu)", len);
        else
            snprintf(want, sizeof want, "t.tfvm: bad .tfvm file (truncated file (header says %zu bytes) at byte %zu)",
                     n, len);
        expect_read(t, len, TFVM_ERR_FORMAT, want);
        free(t);
    }
    expect_read(NULL, 0, TFVM_ERR_FORMAT, "t.tfvm: bad .tfvm file (truncated header at byte 0)");
    free(d);
}
END_TEST

START_TEST(test_header_errors)
{
    size_t n;
    unsigned char *d = fib_image(&n), *t = malloc(n + 1);
    char want[256];
#define RESET() memcpy(t, d, n)
    RESET();
    t[0] = 'X';
    expect_read(t, n, TFVM_ERR_FORMAT, "t.tfvm: bad .tfvm file (wrong magic)");
    expect_read(t, 3, TFVM_ERR_FORMAT, "t.tfvm: bad .tfvm file (wrong magic)");
    RESET();
    t[6] = '\n'; /* line endings rewritten in transit */
    expect_read(t, n, TFVM_ERR_FORMAT, "t.tfvm: bad .tfvm file (wrong magic)");
    RESET();
    put16(t, 8, 2);
    expect_read(t, n, TFVM_ERR_FORMAT, "t.tfvm: bad .tfvm file (version 2.0 is newer than this tfvm reads (1.x))");
    expect_read(t, 12, TFVM_ERR_FORMAT, "t.tfvm: bad .tfvm file (version 2.0 is newer than this tfvm reads (1.x))");
    RESET();
    put16(t, 8, 0);
    put16(t, 10, 9);
    expect_read(t, n, TFVM_ERR_FORMAT, "t.tfvm: bad .tfvm file (version 0.9 is older than this tfvm reads (1.x))");
    RESET();
    put32(t, 12, 20);
    expect_read(t, n, TFVM_ERR_FORMAT, "t.tfvm: bad .tfvm file (header size 20, expected 32 at byte 12)");
    RESET();
    t[n] = 0;
    snprintf(want, sizeof want,
             "t.tfvm: bad .tfvm file (trailing bytes after the end of the file (header says %zu bytes) at byte %zu)", n, n);
    expect_read(t, n + 1, TFVM_ERR_FORMAT, want);
    RESET();
    put64(t, 16, 1ull << 40);
    snprintf(want, sizeof want, "t.tfvm: bad .tfvm file (truncated file (header says 1099511627776 bytes) at byte %zu)", n);
    expect_read(t, n, TFVM_ERR_FORMAT, want);
    /* Checksum: a flipped bit anywhere after the checksum field. */
    RESET();
    t[n - 5] ^= 0x10;
    snprintf(want, sizeof want, "t.tfvm: bad .tfvm file (checksum mismatch: stored 0x%08" PRIx32 ", computed 0x%08" PRIx32 ")",
             ut_le32(d + 24), ut_crc32(0, t + 28, n - 28));
    expect_read(t, n, TFVM_ERR_FORMAT, want);
    RESET();
    put32(t, 24, 0xdeadbeef);
    snprintf(want, sizeof want, "t.tfvm: bad .tfvm file (checksum mismatch: stored 0xdeadbeef, computed 0x%08" PRIx32 ")",
             ut_le32(d + 24));
    expect_read(t, n, TFVM_ERR_FORMAT, want);
#undef RESET
    free(t);
    free(d);
}
END_TEST

/* One mutation of a good image: `sec` = section id and `rec` its record, or 0
 * for an absolute offset; the checksum is fixed afterwards, so each case
 * reaches the check it is about. */
typedef struct mut {
    int sec;
    uint32_t rec, field, width;
    uint64_t value;
    const char *msg; /* after "t.tfvm: bad .tfvm file (" */
} mut;
#define TAB(id, f) 0, 0, (uint32_t)(HDR + ((id) - 1) * SECENT + (f))

#define LAST UINT32_MAX /* rec: the section's last record */

static void apply(unsigned char *t, const mut *m)
{
    uint32_t rec = m->rec == LAST ? (uint32_t)sec_count(t, m->sec) - 1 : m->rec;
    size_t at = m->sec ? rec_at(t, m->sec, rec) + m->field : m->field;
    switch (m->width) {
    case 1: t[at] = (unsigned char)m->value; break;
    case 2: put16(t, at, (uint16_t)m->value); break;
    case 4: put32(t, at, (uint32_t)m->value); break;
    default: put64(t, at, m->value); break;
    }
}

/* Runs every case and reports all mismatches together. */
static void run_muts(const mut *ms, size_t count)
{
    size_t n;
    unsigned char *d = fib_image(&n), *t = malloc(n);
    char want[600];
    int bad = 0;
    for (size_t i = 0; i < count; i++) {
        memcpy(t, d, n);
        apply(t, &ms[i]);
        fix_crc(t, n);
        if (ms[i].msg)
            snprintf(want, sizeof want, "t.tfvm: bad .tfvm file (%s", ms[i].msg);
        isa_program p;
        tfvm_error err;
        ut_err_clear(&err);
        tfvm_status st = ld_read(t, n, "t.tfvm", NULL, &p, &err);
        if (st == TFVM_OK)
            isa_program_release(&p);
        if (ms[i].msg ? st != TFVM_ERR_FORMAT || strcmp(err.message, want) != 0 : st != TFVM_OK) {
            fprintf(stderr, "case %zu: %s\n   got: %s %s\n  want: %s\n", i, ms[i].msg ? ms[i].msg : "(loads)",
                    tfvm_status_name(st), err.message, ms[i].msg ? want : "TFVM_OK");
            bad++;
        }
        ck_assert_ptr_null(p.arena.head);
    }
    free(t);
    free(d);
    ck_assert_msg(bad == 0, "%d of %zu cases failed (see stderr)", bad, count);
}

START_TEST(test_structure_errors)
{
    static const mut ms[] = {
        {TAB(1, -4), 4, 0xFFFFFFFF, "truncated section table (4294967295 entries from byte 32) at byte 2506)"},
        {TAB(2, 0), 4, 1, "section 1 out of order (after section 1) at byte 56)"},
        {TAB(10, 0), 4, 11, "unknown section 11 at byte 248)"},
        {TAB(10, 0), 4, 9, "section 9 out of order (after section 9) at byte 248)"},
        {TAB(8, 4), 4, 28, "instruction table records of 28 bytes, expected 24 at byte 204)"},
        {TAB(8, 4), 4, 20, "instruction table records of 20 bytes, expected 24 at byte 204)"},
        {TAB(1, 4), 4, 0, "string table records of 0 bytes, expected 1 at byte 36)"},
        {TAB(1, 0), 4, 0, "bad section id 0 at byte 32)"},
        {TAB(9, 8), 8, 300, "edge table overlaps what comes before it (starts at byte 300, expected at least 1654) at byte 232)"},
        {TAB(1, 8), 8, 40, "string table overlaps what comes before it (starts at byte 40, expected at least 272) at byte 40)"},
        {TAB(9, 16), 8, 1ull << 40, "truncated edge table (1099511627776 records from byte 1654) at byte 2506)"},
        {TAB(9, 16), 8, UINT64_MAX, "truncated edge table (18446744073709551615 records from byte 1654) at byte 2506)"},
        {TAB(9, 8), 8, UINT64_MAX, "truncated edge table (41 records from byte 18446744073709551615) at byte 2506)"},
        {TAB(2, 16), 8, 1ull << 62, "truncated constant data (4611686018427387904 records from byte 370) at byte 2506)"},
        {TAB(1, -4), 4, 9, "missing debug table)"},
        {TAB(10, 16), 8, 29, "debug table has 29 records for 30 instructions at byte 264)"},
    };
    run_muts(ms, UT_COUNTOF(ms));
}
END_TEST

START_TEST(test_record_errors)
{
    static const mut ms[] = {
        /* strings */
        {S_STRINGS, LAST, 0, 1, 'x', "string table does not end with a NUL byte at byte 369)"},
        {S_REGIONS, 1, 8, 4, 9999, "name of region 1: string offset 9999 outside the string table (98 bytes) at byte 854)"},
        {S_REGIONS, 1, 8, 4, 98, "name of region 1: string offset 98 outside the string table (98 bytes) at byte 854)"},
        {S_REGIONS, 1, 8, 4, UINT32_MAX, "region 1 has no name at byte 854)"},
        {S_ENTRIES, 0, 0, 4, UINT32_MAX, "entry 0 has no name at byte 870)"},
        {S_PARAMS, 2, 0, 4, 500, "name of parameter 2: string offset 500 outside the string table (98 bytes) at byte 902)"},
        {S_DEBUG, 3, 0, 4, 1000, "name of instruction 3: string offset 1000 outside the string table (98 bytes) at byte 2182)"},
        /* constants */
        {S_CONSTS, 0, 0, 1, 14, "constant 0: bad dtype 14 at byte 434)"},
        {S_CONSTS, 0, 0, 1, 0, "constant 0: bad dtype 0 at byte 434)"},
        {S_CONSTS, 0, 1, 1, 9, "constant 0: rank 9 exceeds 8 at byte 435)"},
        {S_CONSTS, 0, 5, 1, 1, "nonzero padding at byte 439)"},
        {S_CONSTS, 3, 8, 8, (uint64_t)-1, "constant 3: dimension 0 is negative (-1) at byte 682)"},
        {S_CONSTS, 3, 16, 8, 1, "constant 3: dimension 1 is beyond its rank 1 but not 0 at byte 690)"},
        {S_CONSTS, 4, 8, 8, 1000, "constant 4: its shape needs more bytes than the constant data holds (64 bytes) at byte 762)"},
        {S_CONSTS, 4, 8, 8, 1ull << 62, "constant 4: its shape needs more bytes than the constant data holds (64 bytes) at byte 762)"},
        {S_CONSTS, 4, 72, 8, 12, "constant 4: data offset 12 is not a multiple of its element size 8 at byte 826)"},
        {S_CONSTS, 4, 72, 8, 24, "constant 4: 48 bytes of data at offset 24 run past the constant data (64 bytes) at byte 826)"},
        {S_CONSTS, 1, 72, 8, 0, "constant 1: data offset 0 overlaps the previous constant's data (ends at 4) at byte 586)"},
        {S_CONSTS, 0, 72, 8, UINT64_MAX - 3, "constant 0: 4 bytes of data at offset 18446744073709551612 run past the constant data (64 bytes) at byte 506)"},
        /* regions, entries, parameters */
        {S_REGIONS, 0, 2, 1, 7, "nonzero padding at byte 836)"},
        {S_PARAMS, 0, 6, 2, 1, "nonzero padding at byte 892)"},
        {S_ENTRIES, 0, 8, 4, 100, "entry 0: 102 parameters and results run past the parameter table (3 records) at byte 878)"},
        {S_ENTRIES, 0, 8, 4, UINT32_MAX, "entry 0: 4294967297 parameters and results run past the parameter table (3 records) at byte 878)"},
        {S_ENTRIES, 0, 12, 4, 1, "1 of 3 parameter records belong to no entry at byte 902)"},
        /* instructions and edges */
        {S_INSTS, 29, 20, 4, 5, "instruction 29: 5 edges run past the edge table (41 records) at byte 1650)"},
        {S_INSTS, 0, 20, 4, UINT32_MAX, "instruction 0: 4294967295 edges run past the edge table (41 records) at byte 954)"},
        {S_INSTS, 29, 20, 4, 0, "1 of 41 edge records belong to no instruction at byte 2134)"},
    };
    run_muts(ms, UT_COUNTOF(ms));
}
END_TEST

START_TEST(test_verify_errors)
{
    /* Instruction fields: op +0 (2), flags +2 (2), region +4, n_in +8 (2), n_ctl +10 (2),
     * a +12, b +16, n_edges +20. Edge fields: out +0, inst +4, port +8. */
    static const mut ms[] = {
        /* regions */
        {S_REGIONS, 2, 0, 1, 3, "region 2 'sum_loop': bad kind 3)"},
        {S_REGIONS, 2, 4, 4, 2, "region 2 'sum_loop': parent region 2 must come before it)"},
        {S_REGIONS, 2, 4, 4, UINT32_MAX, "region 2 'sum_loop': a LOOP region needs a parent region)"},
        {S_REGIONS, 1, 4, 4, 0, "region 1 'fib': a FUNC region has no parent, but its parent is 0)"},
        {S_REGIONS, 2, 8, 4, 5, "region 2 'fib': name already used by region 1)"},
        {S_REGIONS, 0, 8, 4, 71, "region 0: name '1' is not an identifier)"},
        {S_REGIONS, 0, 8, 4, 4, "region 0: name '' is not an identifier)"},
        {S_STRINGS, 5, 0, 1, '1', "region 1: name '1ib' is not an identifier)"},
        {S_STRINGS, 6, 0, 1, '-', "region 1: name 'f-b' is not an identifier)"},
        {S_STRINGS, 0, 0, 1, 0, "region 0: name '' is not an identifier)"},
        {S_STRINGS, 1, 0, 1, 0xC3, "region 0: name 'm\\xc3in' is not an identifier)"},
        /* entries and parameters */
        {S_ENTRIES, 0, 4, 4, 1, "entry 0 'main': region 1 'fib' is a FUNC region, not ROOT)"},
        {S_ENTRIES, 0, 4, 4, 3, "entry 0 'main': region 3 does not exist)"},
        {S_REGIONS, 2, 0, 1, 0, "region 2 'sum_loop': a ROOT region has no parent, but its parent is 0)"},
        {S_PARAMS, 0, 4, 1, 14, "entry 0 'main': parameter 0 'n': bad dtype 14)"},
        {S_PARAMS, 2, 5, 1, 2, "entry 0 'main': result 1 's': bad rank 2 (0 for a scalar, 255 for a tensor))"},
        /* constants */
        {S_DATA, 12, 0, 1, 2, "constant 3: bool element 0 is 2, not 0 or 1)"},
        /* sites */
        {S_SITES, 0, 4, 4, 0, "call site 0 (id 1): callee region 0 'main' is a ROOT region, not FUNC)"},
        {S_SITES, 2, 4, 4, 9, "call site 2 (id 5): callee region 9 does not exist)"},
        {S_SITES, 1, 0, 4, 1, "call site 1 (id 1): ids must be ascending, but the previous site's id is 1)"},
        /* instruction names and regions */
        {S_INSTS, 29, 4, 4, 7, "instruction 29 'nx': region 7 does not exist)"},
        {S_INSTS, 21, 4, 4, 0, "instruction 21 'm': region 0 'main' after region 1 'fib' of the previous instruction (instructions must be sorted by region))"},
        /* opcodes, arity, attributes */
        {S_INSTS, 11, 0, 2, 200, "instruction 11 'lt': bad opcode 200)"},
        {S_INSTS, 20, 8, 2, 3, "instruction 20 'add': ADD takes 2 data inputs, not 3)"},
        {S_INSTS, 24, 8, 2, 2, "instruction 24 'lc': LOOPCOND takes 1 data input, not 2)"},
        {S_INSTS, 22, 8, 2, 0, "instruction 22 'i': MERGE needs 1 to 65535 data inputs, not 0)"},
        {S_INSTS, 20, 2, 2, 1, "instruction 20 'add': flags 0x1 not allowed on ADD)"},
        {S_INSTS, 6, 2, 2, 3, "instruction 6 'en': flags 0x3 not allowed on ENTER)"},
        {S_INSTS, 20, 12, 4, 1, "instruction 20 'add': ADD takes no attributes, but a=1 b=0)"},
        {S_INSTS, 10, 16, 4, 3, "instruction 10 'two': CONST has no attribute b, but b=3)"},
        {S_INSTS, 0, 12, 4, 1, "instruction 0 'n': ARG 1, but entry 'main' has 1 parameter)"},
        {S_INSTS, 3, 12, 4, 2, "instruction 3 'rf': RESULT 2, but entry 'main' has 2 results)"},
        {S_INSTS, 7, 12, 4, 0, "instruction 7 'rs': result 0 of entry 'main' is already produced by instruction 3 'rf')"},
        {S_INSTS, 4, 12, 4, 9, "instruction 4 'zero': constant 9 does not exist (5 constants))"},
        {S_INSTS, 26, 10, 2, 0, "instruction 26 'one': a CONST in LOOP region 'sum_loop' needs a control input)"},
        {S_INSTS, 5, 12, 4, 1, "instruction 5 'ei': ENTER frame 1 'fib' is a FUNC region, not LOOP)"},
        {S_INSTS, 5, 12, 4, 9, "instruction 5 'ei': ENTER frame 9 does not exist)"},
        {S_REGIONS, 2, 4, 4, 1, "instruction 5 'ei': ENTER of frame 'sum_loop' must be in its parent region 'fib', not in 'main')"},
        {S_INSTS, 5, 16, 4, 65537, "instruction 5 'ei': parallel=65537 exceeds 65536)"},
        {S_INSTS, 27, 12, 4, 0, "instruction 27 'x': EXIT frame 0 'main' is a ROOT region, not LOOP)"},
        {S_INSTS, 8, 0, 2, ISA_NEXTITER, "instruction %8: NEXTITER must be in a LOOP region, not ROOT region 'main')"},
        {S_INSTS, 8, 0, 2, ISA_CAST, "instruction %8: CAST to bad dtype 0)"},
        {S_INSTS, 1, 12, 4, 7, "instruction 1 'call': call site 7 does not exist (3 sites))"},
        {S_INSTS, 16, 12, 4, 0, "instruction 16 'c1': CALL of site fib@1 is in region 'fib', but instruction 1 'call' (CALL of the same site) is in region 'main')"},
        {S_INSTS, 5, 2, 2, ISA_FLAG_CONST, "region 2 'sum_loop': LOOP region has no non-const ENTER)"},
        /* edges */
        {S_EDGES, 0, 0, 4, 1, "instruction 0 'n': edge 0: output 1 does not exist (ARG has 1))"},
        {S_EDGES, 0, 4, 4, 999, "instruction 0 'n': edge 0: destination instruction 999 does not exist)"},
        {S_EDGES, 0, 8, 4, 5, "instruction 0 'n': edge 0: instruction 1 'call' has no input port 5 (it has 1))"},
        {S_EDGES, 0, 4, 4, 8, "instruction 0 'n': edge 1 (output 0 to instruction 6 port 0) does not come after edge 0 (output 0 to instruction 8 port 0); edges must be sorted and distinct)"},
        {S_EDGES, 1, 4, 4, 1, "instruction 0 'n': edge 1 (output 0 to instruction 1 port 0) does not come after edge 0 (output 0 to instruction 1 port 0); edges must be sorted and distinct)"},
        {S_EDGES, 20, 4, 4, 3, "instruction 14 'a': edge to instruction 3 'rf' leaves region 'fib' for region 'main')"},
        {S_EDGES, 7, 4, 4, 3, "instruction 5 'ei': ENTER delivers into its frame 'sum_loop', but instruction 3 'rf' is in region 'main')"},
        {S_EDGES, 38, 4, 4, 28, "instruction 27 'x': EXIT delivers into the loop's parent region 'main', but instruction %28 is in region 'sum_loop')"},
        {S_EDGES, 3, 4, 4, 3, "instruction 1 'call': CALL delivers into the callee region 'fib', but instruction 3 'rf' is in region 'main')"},
        {S_EDGES, 0, 4, 4, 2, "instruction 0 'n': edge to instruction 2 'ret' leaves region 'main', but a RETURN of site fib@1 takes its input from region 'fib')"},
        {S_EDGES, 7, 4, 4, 2, "instruction 5 'ei': ENTER delivers into its frame 'sum_loop', but instruction 2 'ret', a RETURN of site fib@1, takes its input from region 'fib')"},
        {S_EDGES, 3, 4, 4, 17, NULL} /* CALL into a RETURN of the same callee: legal */,
        {S_EDGES, 27, 4, 4, 3, "instruction 21 'm': edge to instruction 3 'rf' leaves region 'fib' for region 'main')"},
        /* ports */
        {S_EDGES, 19, 8, 4, 0, "instruction 14 'a': input 1 has no producer)"},
        {S_INSTS, 10, 10, 2, 2, "instruction 10 'two': control input 1 (port 1) has no producer)"},
        {S_INSTS, 20, 10, 2, 65535, "instruction 20 'add': control input 0 (port 2) has no producer)"},
        {S_INSTS, 21, 8, 2, 65535, "instruction 21 'm': input 2 has no producer)"},
        /* sites */
        {S_INSTS, 18, 0, 2, ISA_RETURN, "call site 2 (fib@5) has no CALL instruction)"},
    };
    run_muts(ms, UT_COUNTOF(ms));
}
END_TEST

/* Cases that need a name: point a name field at an existing string. */
START_TEST(test_name_errors)
{
    size_t n;
    unsigned char *d = fib_image(&n), *t = malloc(n);
    memcpy(t, d, n);
    put32(t, rec_at(t, S_DEBUG, 11), str_off(t, "p"));
    fix_crc(t, n);
    expect_read(t, n, TFVM_ERR_FORMAT,
                "t.tfvm: bad .tfvm file (instruction 11 'p': name already used by instruction 9 'p' in region 'fib')");
    memcpy(t, d, n);
    put32(t, rec_at(t, S_ENTRIES, 0), str_off(t, "fib"));
    put32(t, rec_at(t, S_DEBUG, 8), str_off(t, "rs")); /* anonymous -> duplicate of 7 */
    fix_crc(t, n);
    expect_read(t, n, TFVM_ERR_FORMAT,
                "t.tfvm: bad .tfvm file (instruction 8 'rs': name already used by instruction 7 'rs' in region 'main')");
    memcpy(t, d, n);
    put32(t, rec_at(t, S_DEBUG, 22), str_off(t, "p")); /* same name, other region: fine */
    put32(t, rec_at(t, S_DEBUG, 0), UINT32_MAX);         /* names are optional */
    fix_crc(t, n);
    expect_read(t, n, TFVM_OK, NULL);
    free(t);
    free(d);
}
END_TEST

/* ---- Verifier on in-memory programs (what the assembler hands it) ------------------ */
static void expect_verify(const isa_program *p, const char *msg)
{
    tfvm_error err;
    ut_err_clear(&err);
    tfvm_status st = ld_verify(p, &err);
    ck_assert_msg(st == TFVM_ERR_FORMAT, "verify: %s (want %s)", tfvm_status_name(st), msg);
    ck_assert_str_eq(err.message, msg);
}

START_TEST(test_verify_memory)
{
    isa_program p;
    char longname[130];
    memset(longname, 'a', 128);
    longname[128] = 0;
#define CASE(msg, ...)                                                \
    do {                                                              \
        build_fib(&p);                                                \
        __VA_ARGS__;                                                  \
        expect_verify(&p, "fib.tfvm: bad .tfvm file (" msg ")");      \
        isa_program_release(&p);                                      \
    } while (0)
    CASE("region 0: missing name",
         p.regions = arena_copy(&p, (isa_region[]){{0, ISA_NONE, NULL}}, sizeof(isa_region)); p.n_regions = 1);
    CASE("instruction 3: name 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' is longer than 127 characters",
         p.insts[3].name = longname);
    longname[127] = 0; /* 127 characters: the longest identifier */
    char want[300];
    snprintf(want, sizeof want, "fib.tfvm: bad .tfvm file (instruction 3 '%s': 70000 control inputs (at most 65535))",
             longname);
    build_fib(&p);
    p.insts[3].name = longname;
    p.insts[3].n_ctl = 70000;
    expect_verify(&p, want);
    isa_program_release(&p);
    CASE("entry 0 'main': result 1 's' has no RESULT instruction", p.insts[7].op = ISA_IDENTITY; p.insts[7].a = 0);
    CASE("instruction 0 'n': input 0 has no producer", p.insts[0].op = ISA_IDENTITY; p.insts[0].n_in = 1);
    CASE("instruction 22 'i': MERGE needs 1 to 65535 data inputs, not 70000", p.insts[22].n_in = 70000);
    CASE("instruction 5 'ei': edges start at 6, expected 7 (right after the previous instruction's)",
         p.insts[5].edge_first = 6);
    CASE("instruction 29 'nx': its 1 edges run past the end of the edge table (40 edges)", p.n_edges--);
    CASE("1 of 42 edges belong to no instruction", p.n_edges++);
    CASE("constant 4: 40 bytes of data, but its dtype and shape need 48", ((isa_const *)p.consts)[4].nbytes = 40);
    CASE("constant 4: no data", ((isa_const *)p.consts)[4].data = NULL);
    CASE("constant 4: its size overflows", ((isa_const *)p.consts)[4].dims[1] = INT64_MAX);
    CASE("constant 4: dimension 1 is negative (-3)", ((isa_const *)p.consts)[4].dims[1] = -3);
    CASE("constant 4: rank 9 exceeds 8", ((isa_const *)p.consts)[4].rank = 9);
    CASE("instruction 1 'call': region 0 'main' after region 1 'fib' of the previous instruction (instructions must be sorted by region)",
         p.insts[0].region = R_FIB);
    CASE("entry 0 'main': parameter 0: name 'a b' is not a parameter name (printable ASCII without spaces or '\"')",
         p.entries[0].params[0].name = "a b");
    /* An EXIT in the wrong loop needs a second loop region. */
    CASE("instruction 27 'x': EXIT of frame 'other' must be in that loop region, not in 'sum_loop'",
         isa_region *rs = ut_arena_array(&p.arena, 4, sizeof *rs); memcpy(rs, p.regions, 3 * sizeof *rs);
         rs[3] = (isa_region){ISA_REGION_LOOP, R_MAIN, "other"}; p.regions = rs; p.n_regions = 4; p.insts[27].a = 3);
    CASE("instruction 22 'i': RESULT must be in a ROOT region, not LOOP region 'sum_loop'",
         p.insts[22].op = ISA_RESULT; p.insts[22].n_in = 1);
    CASE("entry 1 'other': region 'main' already belongs to entry 0 'main'",
         isa_entry *es = ut_arena_array(&p.arena, 2, sizeof *es); es[0] = es[1] = p.entries[0]; es[1].name = "other";
         p.entries = es; p.n_entries = 2);
    CASE("entry 1 'main': name already used by entry 0",
         isa_entry *es = ut_arena_array(&p.arena, 2, sizeof *es); isa_region *rs = ut_arena_array(&p.arena, 4, sizeof *rs);
         memcpy(rs, p.regions, 3 * sizeof *rs); rs[3] = (isa_region){ISA_REGION_ROOT, ISA_NONE, "r2"};
         p.regions = rs; p.n_regions = 4; es[0] = es[1] = p.entries[0]; es[1].region = 3;
         p.entries = es; p.n_entries = 2);
    /* Zero-size constants are fine; bool consts must hold 0/1. */
    build_fib(&p);
    ((isa_const *)p.consts)[4].dims[1] = 0;
    ((isa_const *)p.consts)[4].nbytes = 0;
    tfvm_error err;
    ck_assert_int_eq(ld_verify(&p, &err), TFVM_OK);
    isa_program_release(&p);
#undef CASE
}
END_TEST

/* ---- Allocation failure at every point -------------------------------------------- */
/* Each run fails just one allocation (once): the ones after it go through. */

START_TEST(test_nomem_read)
{
    size_t n;
    unsigned char *d = fib_image(&n);
    long fail;
    for (fail = 0;; fail++) {
        tu_alloc t = {.countdown = fail, .once = true};
        tfvm_allocator a = tu_allocator(&t);
        isa_program p;
        tfvm_error err;
        tfvm_status st = ld_read(d, n, "t.tfvm", &a, &p, &err);
        if (st == TFVM_OK) {
            ck_assert_int_gt(t.live, 0);
            isa_program_release(&p);
            ck_assert_uint_eq(t.live, 0);
            break;
        }
        ck_assert_msg(st == TFVM_ERR_NOMEM, "fail_at %ld: %s", fail, err.message);
        ck_assert_uint_eq(t.live, 0);
        ck_assert(strcmp(err.message, "t.tfvm: out of memory reading .tfvm file") == 0 ||
                  strcmp(err.message, "t.tfvm: out of memory verifying the program") == 0);
    }
    ck_assert_int_gt(fail, 3);
    free(d);
}
END_TEST

START_TEST(test_nomem_write)
{
    size_t n;
    unsigned char *d = fib_image(&n);
    long fail;
    for (fail = 0;; fail++) {
        tu_alloc t = {.countdown = -1, .once = true};
        tfvm_allocator a = tu_allocator(&t);
        isa_program p;
        tfvm_error err;
        ck_assert_int_eq(ld_read(d, n, "t.tfvm", &a, &p, &err), TFVM_OK);
        long base = t.live;
        t.countdown = fail;
        ut_buf b;
        ut_buf_init(&b, &a);
        tfvm_status st = ld_write(&p, &b, &err);
        if (st == TFVM_OK) {
            ck_assert(b.len == n && memcmp(b.data, d, n) == 0);
            ut_buf_free(&b);
            ck_assert_uint_eq(t.live, base);
            isa_program_release(&p);
            ck_assert_uint_eq(t.live, 0);
            break;
        }
        ck_assert_int_eq(st, TFVM_ERR_NOMEM);
        ck_assert_str_eq(err.message, "t.tfvm: out of memory writing .tfvm file");
        ut_buf_free(&b);
        ck_assert_uint_eq(t.live, base);
        isa_program_release(&p);
        ck_assert_uint_eq(t.live, 0);
    }
    ck_assert_int_gt(fail, 3);
    free(d);
}
END_TEST

/* Hostile counts never turn into big allocations: the largest live total
 * while reading stays a small multiple of the file size. */
START_TEST(test_hostile_ports_memory)
{
    size_t n;
    unsigned char *d = fib_image(&n);
    for (uint32_t i = 0; i < N_FIB_INSTS; i++) {
        size_t at = rec_at(d, S_INSTS, i);
        put16(d, at + 10, 65535); /* every instruction claims 65535 control inputs */
        if (fib_insts[i].op == ISA_MERGE)
            put16(d, at + 8, 65535);
    }
    fix_crc(d, n);
    tu_alloc t = {.countdown = -1};
    tfvm_allocator a = tu_allocator(&t);
    isa_program p;
    tfvm_error err;
    ck_assert_int_eq(ld_read(d, n, "t.tfvm", &a, &p, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, "t.tfvm: bad .tfvm file (instruction 0 'n': control input 0 (port 0) has no producer)");
    ck_assert_uint_eq(t.live, 0);
    ck_assert_msg((size_t)t.peak < 16 * n + 65536, "peak %ld for a %zu-byte file", t.peak, n);
    free(d);
}
END_TEST

/* Random damage: never a crash (ASan/UBSan watch), and whatever reads back
 * round-trips. */
START_TEST(test_random_damage)
{
    size_t n;
    unsigned char *d = fib_image(&n), *t = malloc(n);
    uint64_t seed = 0x9e3779b97f4a7c15u;
    int ok = 0;
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(t, d, n);
        int flips = 1 + iter % 4;
        for (int k = 0; k < flips; k++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            size_t at = 28 + (size_t)(seed >> 33) % (n - 28);
            t[at] = (unsigned char)(seed >> 20);
        }
        fix_crc(t, n);
        isa_program p;
        tfvm_error err;
        tfvm_status st = ld_read(t, n, "r", NULL, &p, &err);
        ck_assert(st == TFVM_OK || st == TFVM_ERR_FORMAT);
        if (st == TFVM_OK) {
            ok++;
            size_t a_len, b_len;
            unsigned char *a = write_image(&p, &a_len);
            isa_program q;
            ck_assert_int_eq(ld_read(a, a_len, "r", NULL, &q, &err), TFVM_OK);
            prog_equal(&p, &q);
            unsigned char *b = write_image(&q, &b_len);
            ck_assert(a_len == b_len && memcmp(a, b, a_len) == 0);
            free(a);
            free(b);
            isa_program_release(&q);
            isa_program_release(&p);
        } else {
            ck_assert(strncmp(err.message, "r: bad .tfvm file (", 19) == 0);
        }
    }
    ck_assert_int_gt(ok, 0);
    free(t);
    free(d);
}
END_TEST

/* ---- The checked-in corpus of bad files (test/bad/EXPECTED) --------------------- */
START_TEST(test_bad_corpus)
{
    FILE *f = fopen("test/bad/EXPECTED", "r");
    ck_assert_msg(f != NULL, "test/bad/EXPECTED not found (run from the repository root)");
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        char *tab = strchr(line, '\t');
        ck_assert_msg(tab != NULL, "EXPECTED: no tab in '%s'", line);
        *tab = 0;
        char path[1100];
        snprintf(path, sizeof path, "test/bad/%s", line);
        char *data;
        size_t len;
        tfvm_error err;
        ck_assert_msg(ut_read_file(path, NULL, &data, &len, &err) == TFVM_OK, "%s", err.message);
        isa_program p;
        tfvm_status st = ld_read(data, len, path, NULL, &p, &err);
        free(data);
        ck_assert_msg(st != TFVM_OK, "%s loads", path);
        ck_assert_str_eq(err.message, tab + 1);
        n++;
    }
    fclose(f);
    ck_assert_int_gt(n, 10);
}
END_TEST

static Suite *loader_suite(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("format");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_empty_program);
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_newer_minor);
    tcase_add_test(tc, test_truncated_every_length);
    tcase_add_test(tc, test_header_errors);
    tcase_add_test(tc, test_structure_errors);
    tcase_add_test(tc, test_record_errors);
    tcase_add_test(tc, test_verify_errors);
    tcase_add_test(tc, test_name_errors);
    tcase_add_test(tc, test_verify_memory);
    tcase_add_test(tc, test_nomem_read);
    tcase_add_test(tc, test_nomem_write);
    tcase_add_test(tc, test_hostile_ports_memory);
    tcase_add_test(tc, test_random_damage);
    tcase_add_test(tc, test_bad_corpus);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(loader_suite()); }
