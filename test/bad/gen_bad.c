/* test/bad/gen_bad.c — regenerates the corpus of bad .tfvm files (test/bad/NAME.tfvm and
 * test/bad/EXPECTED: "FILE<TAB>message", the message tfvm prints for `tfvm run test/bad/FILE`)
 * and the fuzz seeds (test/fuzz/seeds/NAME.tfvm). Each bad file is one mutation of a small valid
 * program; every expected message is written here by hand and checked against ld_read, so a
 * change in the reader shows up as a mismatch here instead of silently rewriting EXPECTED.
 *
 * Regenerate (from the repository root):
 *   cc -std=c11 -I. -Iinclude -D_GNU_SOURCE -o /tmp/gen_bad test/bad/gen_bad.c \
 *      loader/format.c loader/verify.c isa/isa.c util/util.c -lm
 *   /tmp/gen_bad test/bad test/fuzz/seeds
 */
#include "loader/loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The valid program every bad file starts from ---------------------------------
 * main (ROOT): y = inc(x) through call site 1; z = a loop that runs while x is true.
 * inc (FUNC): p + 1.  L (LOOP in main): ENTER, MERGE, LOOPCOND, SWITCH, NEXTITER, EXIT. */
enum { R_MAIN, R_INC, R_L };
typedef struct gi {
    uint16_t op;
    uint32_t region, n_in, n_ctl, a;
    uint16_t flags;
    const char *name;
} gi;
static const gi tiny_insts[] = {
    /* 0 */ {ISA_ARG, R_MAIN, 0, 0, 0, 0, "x"},
    /* 1 */ {ISA_CALL, R_MAIN, 1, 0, 0, 0, "c"},
    /* 2 */ {ISA_RETURN, R_MAIN, 1, 0, 0, 0, "r"},
    /* 3 */ {ISA_RESULT, R_MAIN, 1, 0, 0, 0, "y"},
    /* 4 */ {ISA_ENTER, R_MAIN, 1, 0, R_L, 0, "e"},
    /* 5 */ {ISA_RESULT, R_MAIN, 1, 0, 1, 0, "z"},
    /* 6 */ {ISA_IDENTITY, R_INC, 1, 0, 0, 0, "p"},
    /* 7 */ {ISA_ADD, R_INC, 2, 0, 0, 0, "q"},
    /* 8 */ {ISA_CONST, R_INC, 0, 1, 0, 0, "k"},
    /* 9 */ {ISA_MERGE, R_L, 2, 0, 0, 0, "m"},
    /* 10 */ {ISA_LOOPCOND, R_L, 1, 0, 0, 0, "lc"},
    /* 11 */ {ISA_SWITCH, R_L, 2, 0, 0, 0, "sw"},
    /* 12 */ {ISA_EXIT, R_L, 1, 0, R_L, 0, "ex"},
    /* 13 */ {ISA_NEXTITER, R_L, 1, 0, 0, 0, NULL},
};
#define N_INSTS ((uint32_t)(sizeof tiny_insts / sizeof tiny_insts[0]))
/* (source, out, destination, port), in canonical order. */
static const uint32_t tiny_edges[][4] = {
    {0, 0, 1, 0}, {0, 0, 4, 0}, {1, 0, 6, 0}, {2, 0, 3, 0}, {4, 0, 9, 0}, {6, 0, 7, 0},
    {6, 0, 8, 0}, {7, 0, 2, 0}, {8, 0, 7, 1}, {9, 0, 10, 0}, {9, 0, 11, 0}, {10, 0, 11, 1},
    {11, 0, 12, 0}, {11, 1, 13, 0}, {12, 0, 5, 0}, {13, 0, 9, 1},
};
#define N_EDGES ((uint32_t)(sizeof tiny_edges / sizeof tiny_edges[0]))

static isa_region g_regions[] = {
    {ISA_REGION_ROOT, ISA_NONE, "main"}, {ISA_REGION_FUNC, ISA_NONE, "inc"}, {ISA_REGION_LOOP, R_MAIN, "L"}};
static isa_param g_params[] = {{.name = "x", .dtype = TFVM_BOOL}, {.name = "y", .dtype = TFVM_I32}, {.name = "z", .dtype = TFVM_BOOL, .rank = ISA_RANK_ANY}};
static const int32_t g_one = 1;
static isa_const g_consts[] = {{TFVM_I32, 0, {0}, 4, &g_one}};
static isa_site g_sites[] = {{1, R_INC}};

static void build_tiny(isa_program *p, isa_inst *insts, isa_edge *edges, isa_entry *entry, bool names)
{
    isa_program_init(p, NULL);
    p->name = "tiny.tfvm";
    *entry = (isa_entry){"main", R_MAIN, 1, 2, g_params, g_params + 1};
    p->regions = g_regions;
    p->n_regions = 3;
    p->entries = entry;
    p->n_entries = 1;
    p->consts = g_consts;
    p->n_consts = 1;
    p->sites = g_sites;
    p->n_sites = 1;
    p->insts = insts;
    p->n_insts = N_INSTS;
    p->edges = edges;
    p->n_edges = N_EDGES;
    uint32_t k = 0;
    for (uint32_t i = 0; i < N_INSTS; i++) {
        const gi *s = &tiny_insts[i];
        insts[i] = (isa_inst){.op = s->op, .flags = s->flags, .region = s->region, .n_in = s->n_in,
                              .n_ctl = s->n_ctl, .a = s->a, .name = names ? s->name : NULL,
                              .line = names ? i + 1 : 0, .col = names ? 5 : 0, .edge_first = k};
        for (; k < N_EDGES && tiny_edges[k][0] == i; k++)
            edges[k] = (isa_edge){tiny_edges[k][1], tiny_edges[k][2], tiny_edges[k][3]};
        insts[i].n_edges = k - insts[i].edge_first;
    }
}

/* ---- Output ------------------------------------------------------------------------- */
static int g_failures;

static void write_file(const char *dir, const char *name, const void *d, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tfvm_error err;
    if (ut_write_file(path, d, n, &err)) {
        fprintf(stderr, "gen_bad: %s\n", err.message);
        exit(1);
    }
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
static void fix_crc(unsigned char *d, size_t n) { put32(d, 24, ut_crc32(0, d + 28, n - 28)); }

/* docs/format.md: 32-byte header, then 10 section entries of 24 bytes. */
enum { S_STRINGS = 1, S_DATA, S_CONSTS, S_REGIONS, S_ENTRIES, S_PARAMS, S_SITES, S_INSTS, S_EDGES, S_DEBUG };
static size_t tab(int id) { return 32 + (size_t)(id - 1) * 24; }
static size_t rec(const unsigned char *d, int id, size_t i)
{
    return (size_t)ut_le64(d + tab(id) + 8) + i * ut_le32(d + tab(id) + 4);
}

static void put(unsigned char *t, size_t at, uint32_t width, uint64_t v)
{
    switch (width) {
    case 1: t[at] = (unsigned char)v; break;
    case 2: put16(t, at, (uint16_t)v); break;
    case 4: put32(t, at, (uint32_t)v); break;
    default: put64(t, at, v); break;
    }
}

/* Writes one bad file, checks its message, adds it to EXPECTED. */
static void emit(const char *dir, FILE *expected, const char *file, const unsigned char *d, size_t n,
                 const char *what)
{
    char path[256], want[1024];
    snprintf(path, sizeof path, "test/bad/%s", file);
    snprintf(want, sizeof want, "%s: bad .tfvm file (%s)", path, what);
    isa_program p;
    tfvm_error err;
    if (ld_read(d, n, path, NULL, &p, &err) == TFVM_OK) {
        fprintf(stderr, "gen_bad: %s loads\n", file);
        isa_program_release(&p);
        g_failures++;
    } else if (strcmp(err.message, want) != 0) {
        fprintf(stderr, "gen_bad: %s\n   got: %s\n  want: %s\n", file, err.message, want);
        g_failures++;
    }
    write_file(dir, file, d, n);
    fprintf(expected, "%s\t%s\n", file, want);
}

typedef struct gm {
    const char *file;
    int sec;        /* section id, or 0: `field` is a file offset */
    uint32_t rec, field, width;
    uint64_t value;
    const char *what;
} gm;

/* Byte offsets follow from docs/format.md and the tiny program's layout. */
static const gm muts[] = {
    {"section_table_huge.tfvm", 0, 0, 28, 4, 0xFFFFFFFF,
     "truncated section table (4294967295 entries from byte 32) at byte 1176"},
    {"unknown_section.tfvm", 0, 0, 32 + 9 * 24, 4, 12, "unknown section 12 at byte 248"},
    {"sections_out_of_order.tfvm", 0, 0, 32 + 24, 4, 1, "section 1 out of order (after section 1) at byte 56"},
    {"missing_section.tfvm", 0, 0, 28, 4, 9, "missing debug table"},
    {"bad_record_size.tfvm", 0, 0, 32 + 8 * 24 + 4, 4, 16, "edge table records of 16 bytes, expected 12 at byte 228"},
    {"overlapping_sections.tfvm", 0, 0, 32 + 8 * 24 + 8, 8, 272,
     "edge table overlaps what comes before it (starts at byte 272, expected at least 816) at byte 232"},
    {"terabyte_edges.tfvm", 0, 0, 32 + 8 * 24 + 16, 8, 1ull << 40,
     "truncated edge table (1099511627776 records from byte 816) at byte 1176"},
    {"debug_count.tfvm", 0, 0, 32 + 9 * 24 + 16, 8, 13, "debug table has 13 records for 14 instructions at byte 264"},
    {"string_offset.tfvm", S_REGIONS, 1, 8, 4, 4000,
     "name of region 1: string offset 4000 outside the string table (40 bytes) at byte 416"},
    {"const_dtype.tfvm", S_CONSTS, 0, 0, 1, 14, "constant 0: bad dtype 14 at byte 316"},
    {"const_dim_beyond_rank.tfvm", S_CONSTS, 0, 16, 8, 1, "constant 0: dimension 1 is beyond its rank 0 but not 0 at byte 332"},
    {"const_data_past_end.tfvm", S_CONSTS, 0, 72, 8, 4, "constant 0: 4 bytes of data at offset 4 run past the constant data (4 bytes) at byte 388"},
    {"params_overrun.tfvm", S_ENTRIES, 0, 12, 4, 0xFFFFFFFF,
     "entry 0: 4294967296 parameters and results run past the parameter table (3 records) at byte 440"},
    {"edges_overrun.tfvm", S_INSTS, 0, 20, 4, 1000, "instruction 0: 1000 edges run past the edge table (16 records) at byte 500"},
    {"bad_opcode.tfvm", S_INSTS, 7, 0, 2, 999, "instruction 7 'q': bad opcode 999"},
    {"wrong_arity.tfvm", S_INSTS, 7, 8, 2, 3, "instruction 7 'q': ADD takes 2 data inputs, not 3"},
    {"merge_arity.tfvm", S_INSTS, 9, 8, 2, 0, "instruction 9 'm': MERGE needs 1 to 65535 data inputs, not 0"},
    {"bad_flags.tfvm", S_INSTS, 7, 2, 2, 1, "instruction 7 'q': flags 0x1 not allowed on ADD"},
    {"bad_region_kind.tfvm", S_REGIONS, 2, 0, 1, 5, "region 2 'L': bad kind 5"},
    {"loop_parent.tfvm", S_REGIONS, 2, 4, 4, 2, "region 2 'L': parent region 2 must come before it"},
    {"func_with_parent.tfvm", S_REGIONS, 1, 4, 4, 0, "region 1 'inc': a FUNC region has no parent, but its parent is 0"},
    {"duplicate_region_name.tfvm", S_REGIONS, 2, 8, 4, 5, "region 2 'inc': name already used by region 1"},
    {"bad_name.tfvm", S_STRINGS, 5, 0, 1, '9', "region 1: name '9nc' is not an identifier"},
    {"entry_not_root.tfvm", S_ENTRIES, 0, 4, 4, 1, "entry 0 'main': region 1 'inc' is a FUNC region, not ROOT"},
    {"param_rank.tfvm", S_PARAMS, 0, 5, 1, 3, "entry 0 'main': parameter 0 'x': bad rank 3 (0 for a scalar, 255 for a tensor)"},
    {"site_not_func.tfvm", S_SITES, 0, 4, 4, 2, "call site 0 (id 1): callee region 2 'L' is a LOOP region, not FUNC"},
    {"insts_unsorted.tfvm", S_INSTS, 8, 4, 4, 0,
     "instruction 8 'k': region 0 'main' after region 1 'inc' of the previous instruction (instructions must be sorted by region)"},
    {"arg_out_of_range.tfvm", S_INSTS, 0, 12, 4, 1, "instruction 0 'x': ARG 1, but entry 'main' has 1 parameter"},
    {"duplicate_result.tfvm", S_INSTS, 5, 12, 4, 0, "instruction 5 'z': result 0 of entry 'main' is already produced by instruction 3 'y'"},
    {"const_no_control.tfvm", S_INSTS, 8, 10, 2, 0, "instruction 8 'k': a CONST in FUNC region 'inc' needs a control input"},
    {"const_index.tfvm", S_INSTS, 8, 12, 4, 1, "instruction 8 'k': constant 1 does not exist (1 constant)"},
    {"enter_not_loop.tfvm", S_INSTS, 4, 12, 4, 1, "instruction 4 'e': ENTER frame 1 'inc' is a FUNC region, not LOOP"},
    {"enter_parallel.tfvm", S_INSTS, 4, 16, 4, 100000, "instruction 4 'e': parallel=100000 exceeds 65536"},
    {"no_nonconst_enter.tfvm", S_INSTS, 4, 2, 2, 1, "region 2 'L': LOOP region has no non-const ENTER"},
    {"exit_frame.tfvm", S_INSTS, 12, 12, 4, 0, "instruction 12 'ex': EXIT frame 0 'main' is a ROOT region, not LOOP"},
    {"nextiter_in_root.tfvm", S_INSTS, 1, 0, 2, ISA_NEXTITER, "instruction 1 'c': NEXTITER must be in a LOOP region, not ROOT region 'main'"},
    {"call_site_index.tfvm", S_INSTS, 1, 12, 4, 3, "instruction 1 'c': call site 3 does not exist (1 site)"},
    {"cast_dtype.tfvm", S_INSTS, 6, 0, 2, ISA_CAST, "instruction 6 'p': CAST to bad dtype 0"},
    {"edge_bad_output.tfvm", S_EDGES, 0, 0, 4, 1, "instruction 0 'x': edge 0: output 1 does not exist (ARG has 1)"},
    {"edge_bad_inst.tfvm", S_EDGES, 0, 4, 4, 14, "instruction 0 'x': edge 0: destination instruction 14 does not exist"},
    {"edge_bad_port.tfvm", S_EDGES, 0, 8, 4, 1, "instruction 0 'x': edge 0: instruction 1 'c' has no input port 1 (it has 1)"},
    {"edges_unsorted.tfvm", S_EDGES, 0, 4, 4, 5,
     "instruction 0 'x': edge 1 (output 0 to instruction 4 port 0) does not come after edge 0 (output 0 to instruction 5 port 0); edges must be sorted and distinct"},
    {"edge_leaves_region.tfvm", S_EDGES, 5, 4, 4, 3, "instruction 6 'p': edge to instruction 3 'y' leaves region 'inc' for region 'main'"},
    {"enter_wrong_region.tfvm", S_EDGES, 4, 4, 4, 5, "instruction 4 'e': ENTER delivers into its frame 'L', but instruction 5 'z' is in region 'main'"},
    {"exit_wrong_region.tfvm", S_EDGES, 14, 4, 4, 13,
     "instruction 12 'ex': EXIT delivers into the loop's parent region 'main', but instruction %13 is in region 'L'"},
    {"call_wrong_region.tfvm", S_EDGES, 2, 4, 4, 3, "instruction 1 'c': CALL delivers into the callee region 'inc', but instruction 3 'y' is in region 'main'"},
    {"return_wrong_region.tfvm", S_EDGES, 0, 4, 4, 2,
     "instruction 0 'x': edge to instruction 2 'r' leaves region 'main', but a RETURN of site inc@1 takes its input from region 'inc'"},
    {"unconnected_port.tfvm", S_EDGES, 8, 8, 4, 0, "instruction 7 'q': input 1 has no producer"},
    {"unconnected_control.tfvm", S_INSTS, 7, 10, 2, 1, "instruction 7 'q': control input 0 (port 2) has no producer"},
    /* constant operands (flags ISA_FLAG_IMM_*: port + 1 at bit 3; b = the constant), device
     * placement, pruned SWITCH outputs, axis and option attributes */
    {"imm_edge_into_port.tfvm", S_INSTS, 7, 2, 2, 2u << ISA_FLAG_IMM_SHIFT,
     "instruction 8 'k': edge 8: input 1 of instruction 7 'q' is a constant operand"},
    {"imm_port_range.tfvm", S_INSTS, 7, 2, 2, 3u << ISA_FLAG_IMM_SHIFT,
     "instruction 7 'q': constant operand on input 2, but ADD has 2 data inputs"},
    {"imm_not_compute.tfvm", S_INSTS, 11, 2, 2, 1u << ISA_FLAG_IMM_SHIFT, "instruction 11 'sw': flags 0x8 not allowed on SWITCH"},
    {"two_devices.tfvm", S_INSTS, 7, 2, 2, ISA_FLAG_DEV_CPU | ISA_FLAG_DEV_CUDA,
     "instruction 7 'q': ADD is placed on two devices (flags 0x6)"},
    {"device_not_compute.tfvm", S_INSTS, 11, 2, 2, ISA_FLAG_DEV_CUDA, "instruction 11 'sw': flags 0x4 not allowed on SWITCH"},
    {"prune_not_switch.tfvm", S_INSTS, 7, 2, 2, ISA_FLAG_PRUNE_TRUE, "instruction 7 'q': flags 0x40 not allowed on ADD"},
};

/* Checks that one field alone cannot reach: two fields of one instruction record
 * (op +0, flags +2, a +12, b +16). */
typedef struct gm2 {
    const char *file;
    uint32_t inst, field1, width1;
    uint64_t value1;
    uint32_t field2, width2;
    uint64_t value2;
    const char *what;
} gm2;

static const gm2 muts2[] = {
    {"imm_const_index.tfvm", 7, 2, 2, 2u << ISA_FLAG_IMM_SHIFT, 16, 4, 1,
     "instruction 7 'q': constant operand: constant 1 does not exist (1 constant)"},
    {"imm_one_input.tfvm", 6, 0, 2, ISA_NEG, 2, 2, 1u << ISA_FLAG_IMM_SHIFT,
     "instruction 6 'p': flags 0x8 not allowed on NEG"},
    {"axis_range.tfvm", 6, 0, 2, ISA_SOFTMAX, 12, 4, (uint32_t)-9,
     "instruction 6 'p': SOFTMAX axis -9 out of range -8..7"},
    {"axis_range_high.tfvm", 6, 0, 2, ISA_ARGMAX, 12, 4, 8, "instruction 6 'p': ARGMAX axis 8 out of range -8..7"},
    {"unknown_option.tfvm", 7, 0, 2, ISA_MATMUL, 12, 4, 4, "instruction 7 'q': MATMUL has no option bit 0x4"},
};

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: gen_bad BADDIR SEEDDIR   (from the repository root)\n");
        return 2;
    }
    const char *dir = argv[1], *seeds = argv[2];
    isa_inst insts[N_INSTS];
    isa_edge edges[N_EDGES];
    isa_entry entry;
    isa_program p;
    tfvm_error err;
    build_tiny(&p, insts, edges, &entry, true);
    if (ld_verify(&p, &err)) {
        fprintf(stderr, "gen_bad: the base program is bad: %s\n", err.message);
        return 1;
    }
    ut_buf b;
    ut_buf_init(&b, NULL);
    if (ld_write(&p, &b, &err)) {
        fprintf(stderr, "gen_bad: %s\n", err.message);
        return 1;
    }
    size_t n = b.len;
    unsigned char *d = b.data, *t = malloc(n + 16);

    /* Seeds: the program, the same without debug names, and an empty program. */
    write_file(seeds, "tiny.tfvm", d, n);
    ut_buf b2;
    ut_buf_init(&b2, NULL);
    build_tiny(&p, insts, edges, &entry, false);
    if (ld_write(&p, &b2, &err))
        return 1;
    write_file(seeds, "tiny_anonymous.tfvm", b2.data, b2.len);
    ut_buf_free(&b2);
    isa_program_init(&p, NULL);
    ut_buf_init(&b2, NULL);
    if (ld_write(&p, &b2, &err))
        return 1;
    write_file(seeds, "empty_program.tfvm", b2.data, b2.len);
    ut_buf_free(&b2);

    char path[1024], what[512];
    snprintf(path, sizeof path, "%s/EXPECTED", dir);
    FILE *ex = fopen(path, "w");
    if (!ex) {
        perror(path);
        return 1;
    }

    /* Header-level damage. */
    emit(dir, ex, "empty.tfvm", d, 0, "truncated header at byte 0");
    emit(dir, ex, "truncated_header.tfvm", d, 20, "truncated header at byte 20");
    snprintf(what, sizeof what, "truncated file (header says %zu bytes) at byte %zu", n, n - 7);
    emit(dir, ex, "truncated.tfvm", d, n - 7, what);
    memcpy(t, d, n);
    memcpy(t, "PK\3\4", 4);
    emit(dir, ex, "wrong_magic.tfvm", t, n, "wrong magic");
    memcpy(t, d, n);
    put16(t, 8, 2);
    emit(dir, ex, "newer_major.tfvm", t, n, "version 2.0 is newer than this tfvm reads (1.x)");
    memcpy(t, d, n);
    put32(t, 12, 24);
    emit(dir, ex, "header_size.tfvm", t, n, "header size 24, expected 32 at byte 12");
    memcpy(t, d, n);
    t[n] = '\n';
    snprintf(what, sizeof what, "trailing bytes after the end of the file (header says %zu bytes) at byte %zu", n, n);
    emit(dir, ex, "trailing_bytes.tfvm", t, n + 1, what);
    memcpy(t, d, n);
    t[rec(t, S_EDGES, 3) + 4] ^= 1;
    snprintf(what, sizeof what, "checksum mismatch: stored 0x%08x, computed 0x%08x", (unsigned)ut_le32(d + 24),
             (unsigned)ut_crc32(0, t + 28, n - 28));
    emit(dir, ex, "bad_checksum.tfvm", t, n, what);

    /* One field each, checksum fixed so the damage reaches its check. */
    for (size_t i = 0; i < sizeof muts / sizeof muts[0]; i++) {
        const gm *m = &muts[i];
        memcpy(t, d, n);
        put(t, (m->sec ? rec(t, m->sec, m->rec) : 0) + m->field, m->width, m->value);
        fix_crc(t, n);
        emit(dir, ex, m->file, t, n, m->what);
    }
    /* Two fields: constant 0 becomes a vector of 2^40 elements. */
    memcpy(t, d, n);
    t[rec(t, S_CONSTS, 0) + 1] = 1;
    put64(t, rec(t, S_CONSTS, 0) + 8, 1ull << 40);
    fix_crc(t, n);
    emit(dir, ex, "const_huge_shape.tfvm", t, n,
         "constant 0: its shape needs more bytes than the constant data holds (4 bytes) at byte 324");
    for (size_t i = 0; i < sizeof muts2 / sizeof muts2[0]; i++) {
        const gm2 *m = &muts2[i];
        memcpy(t, d, n);
        put(t, rec(t, S_INSTS, m->inst) + m->field1, m->width1, m->value1);
        put(t, rec(t, S_INSTS, m->inst) + m->field2, m->width2, m->value2);
        fix_crc(t, n);
        emit(dir, ex, m->file, t, n, m->what);
    }
    fclose(ex);
    free(t);
    ut_buf_free(&b);
    if (g_failures)
        fprintf(stderr, "gen_bad: %d mismatches; EXPECTED holds the hand-written messages\n", g_failures);
    return g_failures ? 1 : 0;
}
