/* loader/format.c — the binary .tfvm reader and writer; docs/format.md is the spec.
 * The reader trusts no byte: every count is checked against its section's size before
 * anything is allocated, and the result goes through ld_verify before it is returned. */
#include "loader/loader.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- Layout (docs/format.md, "Layout") ------------------------------------ */
#define FMT_MAJOR 1
#define FMT_MINOR 3 /* 1.1 added the shape and source tables, 1.2 the dim-name and origin tables, 1.3 the
                      variable and default tables */
#define FMT_HEADER 32u   /* header bytes in 1.0                         */
#define FMT_CRC_AT 24u   /* the checksum field                          */
#define FMT_CRC_FROM 28u /* the checksum covers [28, file_size)         */
#define FMT_SECENT 24u   /* one section-table entry                     */
#define FMT_NO_STR UINT32_MAX
#define FMT_NO_CONST UINT32_MAX /* the default table: no default */

static const unsigned char fmt_magic[8] = {'T', 'F', 'V', 'M', '\r', '\n', 0x1a, '\n'};

bool ld_has_magic(const void *data, size_t len, bool partial)
{
    if (len >= sizeof fmt_magic)
        return memcmp(data, fmt_magic, sizeof fmt_magic) == 0;
    return partial && (len == 0 || memcmp(data, fmt_magic, len) == 0);
}

enum {
    SEC_STRINGS = 1,
    SEC_DATA,
    SEC_CONSTS,
    SEC_REGIONS,
    SEC_ENTRIES,
    SEC_PARAMS,
    SEC_SITES,
    SEC_INSTS,
    SEC_EDGES,
    SEC_DEBUG,
    SEC_REQUIRED = SEC_DEBUG, /* 1..10 are in every file */
    SEC_SHAPES,               /* 1.1, optional: declared parameter shapes */
    SEC_SOURCE,               /* 1.1, optional: the file debug positions refer to */
    SEC_DIMNAMES,             /* 1.2, optional: names of symbolic dims in the shape table */
    SEC_ORIGINS,              /* 1.2, optional: the model's node each instruction came from */
    SEC_VARS,                 /* 1.3, optional: the source variables the outputs carry */
    SEC_DEFAULTS,             /* 1.3, optional: parameters' default values (constants) */
    SEC_LAST = SEC_DEFAULTS
};

/* Record sizes of 1.0; a file of a newer minor may use larger records (the
 * reader reads the prefix it knows and skips the rest). */
static const struct {
    const char *what;
    uint32_t rec;
} sec_info[SEC_LAST + 1] = {
    [SEC_STRINGS] = {"string table", 1},
    [SEC_DATA] = {"constant data", 1},
    [SEC_CONSTS] = {"constant table", 80},
    [SEC_REGIONS] = {"region table", 12},
    [SEC_ENTRIES] = {"entry table", 16},
    [SEC_PARAMS] = {"parameter table", 8},
    [SEC_SITES] = {"call-site table", 8},
    [SEC_INSTS] = {"instruction table", 24},
    [SEC_EDGES] = {"edge table", 12},
    [SEC_DEBUG] = {"debug table", 12},
    [SEC_SHAPES] = {"shape table", 72},
    [SEC_SOURCE] = {"source table", 4},
    [SEC_DIMNAMES] = {"dim-name table", 4 * TFVM_MAX_RANK},
    [SEC_ORIGINS] = {"origin table", 8},
    [SEC_VARS] = {"variable table", 12},
    [SEC_DEFAULTS] = {"default table", 4},
};
/* The minor version that introduced each section (the rest: 0). */
static unsigned sec_minor(uint32_t id)
{
    return id > SEC_ORIGINS ? 3 : id > SEC_SOURCE ? 2 : id > SEC_REQUIRED ? 1 : 0;
}

/* ---- Reader ----------------------------------------------------------------- */
typedef struct rd_sec {
    uint64_t off, count, rec; /* rec: record size in this file */
    uint64_t at;              /* byte of its section-table entry */
} rd_sec;

typedef struct rd {
    const unsigned char *d;
    uint64_t size;
    const char *name;
    tfvm_error *err;
    unsigned minor;
    rd_sec s[SEC_LAST + 1];
    const char *str;  /* arena copy of the string table */
    uint64_t n_str;
    isa_program *p;
} rd;

static tfvm_status rd_bad(rd *r, bool has_at, uint64_t at, const char *fmt, va_list ap)
{
    char what[384];
    vsnprintf(what, sizeof what, fmt, ap);
    if (has_at)
        return ut_err(r->err, TFVM_ERR_FORMAT, "%s: bad .tfvm file (%s at byte %" PRIu64 ")",
                      r->name, what, at);
    return ut_err(r->err, TFVM_ERR_FORMAT, "%s: bad .tfvm file (%s)", r->name, what);
}

static tfvm_status bad_at(rd *r, uint64_t at, const char *fmt, ...) UT_PRINTF(3, 4);
static tfvm_status bad_at(rd *r, uint64_t at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tfvm_status s = rd_bad(r, true, at, fmt, ap);
    va_end(ap);
    return s;
}

static tfvm_status bad(rd *r, const char *fmt, ...) UT_PRINTF(2, 3);
static tfvm_status bad(rd *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tfvm_status s = rd_bad(r, false, 0, fmt, ap);
    va_end(ap);
    return s;
}

static tfvm_status nomem(rd *r)
{
    return ut_err(r->err, TFVM_ERR_NOMEM, "%s: out of memory reading .tfvm file", r->name);
}

/* Byte offset of record i of section s (i < count, so this cannot overflow:
 * off + count*rec <= size was checked). */
static uint64_t rec_at(const rd *r, int s, uint64_t i) { return r->s[s].off + i * r->s[s].rec; }
static uint32_t u32_at(const rd *r, uint64_t at) { return ut_le32(r->d + at); }

/* Allocates count elements in the program's arena; count was bounded by a
 * section size, so the request is a small multiple of the file size. */
static tfvm_status rd_array(rd *r, uint64_t count, size_t size, void **out)
{
    *out = NULL;
    if (count == 0)
        return TFVM_OK;
    if (count > SIZE_MAX / size)
        return nomem(r);
    *out = ut_arena_array(&r->p->arena, (size_t)count, size);
    return *out ? TFVM_OK : nomem(r);
}

static tfvm_status rd_zero(rd *r, uint64_t at, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (r->d[at + k] != 0)
            return bad_at(r, at + k, "nonzero padding");
    return TFVM_OK;
}

/* A u32 string reference at byte `at`; FMT_NO_STR is NULL where allowed. */
static tfvm_status rd_str(rd *r, uint64_t at, bool optional, const char *what, uint64_t idx,
                          const char **out)
{
    uint32_t v = u32_at(r, at);
    *out = NULL;
    if (v == FMT_NO_STR && optional)
        return TFVM_OK;
    if (v == FMT_NO_STR)
        return bad_at(r, at, "%s %" PRIu64 " has no name", what, idx);
    if (v >= r->n_str)
        return bad_at(r, at, "name of %s %" PRIu64 ": string offset %" PRIu32
                      " outside the string table (%" PRIu64 " bytes)", what, idx, v, r->n_str);
    *out = r->str + v;
    return TFVM_OK;
}

static tfvm_status rd_header(rd *r, uint64_t *hsize)
{
    const unsigned char *d = r->d;
    uint64_t n = r->size;
    size_t m = n < sizeof fmt_magic ? (size_t)n : sizeof fmt_magic;
    if (m && memcmp(d, fmt_magic, m) != 0)
        return bad(r, "wrong magic");
    if (n < 12)
        return bad_at(r, n, "truncated header");
    unsigned major = ut_le16(d + 8), minor = ut_le16(d + 10);
    if (major > FMT_MAJOR)
        return bad(r, "version %u.%u is newer than this tfvm reads (%d.x)", major, minor, FMT_MAJOR);
    if (major < FMT_MAJOR)
        return bad(r, "version %u.%u is older than this tfvm reads (%d.x)", major, minor, FMT_MAJOR);
    r->minor = minor;
    if (n < FMT_HEADER)
        return bad_at(r, n, "truncated header");
    uint32_t hs = ut_le32(d + 12);
    if (hs < FMT_HEADER || (minor <= FMT_MINOR && hs != FMT_HEADER))
        return bad_at(r, 12, "header size %" PRIu32 ", expected %u", hs, FMT_HEADER);
    uint64_t fs = ut_le64(d + 16);
    if (fs > n)
        return bad_at(r, n, "truncated file (header says %" PRIu64 " bytes)", fs);
    if (fs < n)
        return bad_at(r, fs, "trailing bytes after the end of the file (header says %" PRIu64 " bytes)", fs);
    if (hs > n)
        return bad_at(r, n, "truncated header (header size %" PRIu32 ")", hs);
    uint32_t stored = ut_le32(d + FMT_CRC_AT);
    uint32_t computed = ut_crc32(0, d + FMT_CRC_FROM, (size_t)(n - FMT_CRC_FROM));
    if (stored != computed)
        return bad(r, "checksum mismatch: stored 0x%08" PRIx32 ", computed 0x%08" PRIx32, stored,
                   computed);
    *hsize = hs;
    return TFVM_OK;
}

static tfvm_status rd_sections(rd *r, uint64_t hs)
{
    uint64_t n_sec = u32_at(r, 28);
    if (n_sec > (r->size - hs) / FMT_SECENT)
        return bad_at(r, r->size, "truncated section table (%" PRIu64 " entries from byte %" PRIu64 ")",
                      n_sec, hs);
    uint64_t end = hs + n_sec * FMT_SECENT; /* end of what came before */
    uint32_t prev_id = 0;
    bool seen[SEC_LAST + 1] = {false};
    for (uint64_t i = 0; i < n_sec; i++) {
        uint64_t at = hs + i * FMT_SECENT;
        uint32_t id = u32_at(r, at);
        uint64_t rec = u32_at(r, at + 4);
        uint64_t off = ut_le64(r->d + at + 8), count = ut_le64(r->d + at + 16);
        if (id == 0)
            return bad_at(r, at, "bad section id 0");
        if (id <= prev_id)
            return bad_at(r, at, "section %" PRIu32 " out of order (after section %" PRIu32 ")", id,
                          prev_id);
        prev_id = id;
        bool known = id <= SEC_LAST && sec_minor(id) <= r->minor;
        if (!known && r->minor <= FMT_MINOR)
            return bad_at(r, at, "unknown section %" PRIu32, id);
        char unknown[32];
        snprintf(unknown, sizeof unknown, "section %" PRIu32, id);
        const char *what = known ? sec_info[id].what : unknown;
        if (known && (rec < sec_info[id].rec || (rec != sec_info[id].rec && r->minor <= FMT_MINOR)))
            return bad_at(r, at + 4, "%s records of %" PRIu64 " bytes, expected %" PRIu32, what, rec,
                          sec_info[id].rec);
        if (rec == 0)
            return bad_at(r, at + 4, "%s records of 0 bytes", what);
        if (off < end)
            return bad_at(r, at + 8, "%s overlaps what comes before it (starts at byte %" PRIu64
                          ", expected at least %" PRIu64 ")", what, off, end);
        if (off > r->size || count > (r->size - off) / rec)
            return bad_at(r, r->size, "truncated %s (%" PRIu64 " records from byte %" PRIu64 ")",
                          what, count, off);
        if (known && id != SEC_DATA && count >= UINT32_MAX)
            return bad_at(r, at + 16, "%s has too many records (%" PRIu64 ")", what, count);
        end = off + count * rec;
        if (known) {
            seen[id] = true;
            r->s[id] = (rd_sec){off, count, rec, at};
        }
    }
    for (int id = 1; id <= SEC_REQUIRED; id++)
        if (!seen[id])
            return bad(r, "missing %s", sec_info[id].what);
    if (seen[SEC_SHAPES] && r->s[SEC_SHAPES].count != r->s[SEC_PARAMS].count)
        return bad_at(r, r->s[SEC_SHAPES].at + 16,
                      "shape table has %" PRIu64 " records for %" PRIu64 " parameters and results",
                      r->s[SEC_SHAPES].count, r->s[SEC_PARAMS].count);
    if (seen[SEC_DIMNAMES] && (!seen[SEC_SHAPES] || r->s[SEC_DIMNAMES].count != r->s[SEC_PARAMS].count))
        return bad_at(r, r->s[SEC_DIMNAMES].at + 16,
                      "dim-name table has %" PRIu64 " records for %" PRIu64 " parameters and results%s",
                      r->s[SEC_DIMNAMES].count, r->s[SEC_PARAMS].count, seen[SEC_SHAPES] ? "" : " and no shape table");
    if (seen[SEC_ORIGINS] && r->s[SEC_ORIGINS].count != r->s[SEC_INSTS].count)
        return bad_at(r, r->s[SEC_ORIGINS].at + 16, "origin table has %" PRIu64 " records for %" PRIu64 " instructions",
                      r->s[SEC_ORIGINS].count, r->s[SEC_INSTS].count);
    if (seen[SEC_DEFAULTS] && r->s[SEC_DEFAULTS].count != r->s[SEC_PARAMS].count)
        return bad_at(r, r->s[SEC_DEFAULTS].at + 16, "default table has %" PRIu64 " records for %" PRIu64
                      " parameter records", r->s[SEC_DEFAULTS].count, r->s[SEC_PARAMS].count);
    if (seen[SEC_SOURCE] && r->s[SEC_SOURCE].count != 1)
        return bad_at(r, r->s[SEC_SOURCE].at + 16, "source table has %" PRIu64 " records, expected 1",
                      r->s[SEC_SOURCE].count);
    if (r->s[SEC_DEBUG].count != r->s[SEC_INSTS].count)
        return bad_at(r, r->s[SEC_DEBUG].at + 16,
                      "debug table has %" PRIu64 " records for %" PRIu64 " instructions",
                      r->s[SEC_DEBUG].count, r->s[SEC_INSTS].count);
    return TFVM_OK;
}

/* Copies a byte section into the arena (16-byte aligned, so constant data
 * at an offset aligned to its element size is aligned in memory too). */
static tfvm_status rd_blob(rd *r, int s, const unsigned char **out)
{
    void *b;
    tfvm_status st = rd_array(r, r->s[s].count, 1, &b);
    if (st)
        return st;
    if (b)
        memcpy(b, r->d + r->s[s].off, (size_t)r->s[s].count);
    *out = b;
    return TFVM_OK;
}

static tfvm_status rd_strings(rd *r)
{
    const rd_sec *s = &r->s[SEC_STRINGS];
    if (s->count && r->d[s->off + s->count - 1] != 0)
        return bad_at(r, s->off + s->count - 1, "string table does not end with a NUL byte");
    const unsigned char *b;
    tfvm_status st = rd_blob(r, SEC_STRINGS, &b);
    r->str = (const char *)b;
    r->n_str = s->count;
    return st;
}

static tfvm_status rd_consts(rd *r, const unsigned char *data)
{
    isa_program *p = r->p;
    uint64_t n_data = r->s[SEC_DATA].count, prev_end = 0;
    tfvm_status st = rd_array(r, r->s[SEC_CONSTS].count, sizeof *p->consts, (void **)&p->consts);
    if (st)
        return st;
    p->n_consts = (uint32_t)r->s[SEC_CONSTS].count;
    for (uint32_t i = 0; i < p->n_consts; i++) {
        uint64_t at = rec_at(r, SEC_CONSTS, i);
        isa_const *c = &p->consts[i];
        c->dtype = r->d[at];
        c->rank = r->d[at + 1];
        if ((st = rd_zero(r, at + 2, 6)))
            return st;
        if (!isa_dtype_valid(c->dtype))
            return bad_at(r, at, "constant %" PRIu32 ": bad dtype %u", i, c->dtype);
        if (c->rank > TFVM_MAX_RANK)
            return bad_at(r, at + 1, "constant %" PRIu32 ": rank %u exceeds %d", i, c->rank,
                          TFVM_MAX_RANK);
        bool empty = false;
        for (unsigned k = 0; k < TFVM_MAX_RANK; k++) {
            c->dims[k] = (int64_t)ut_le64(r->d + at + 8 + 8 * k);
            if (k < c->rank && c->dims[k] < 0)
                return bad_at(r, at + 8 + 8 * k, "constant %" PRIu32 ": dimension %u is negative (%" PRId64 ")",
                              i, k, c->dims[k]);
            if (k >= c->rank && c->dims[k] != 0)
                return bad_at(r, at + 8 + 8 * k, "constant %" PRIu32 ": dimension %u is beyond its rank %u but not 0",
                              i, k, c->rank);
            empty |= k < c->rank && c->dims[k] == 0;
        }
        /* Bounded by the data section, so the product cannot overflow. */
        uint64_t esize = tfvm_dtype_size((tfvm_dtype)c->dtype), nbytes = 0;
        if (!empty) {
            nbytes = esize;
            for (unsigned k = 0; k < c->rank; k++) {
                if ((uint64_t)c->dims[k] > n_data / nbytes)
                    return bad_at(r, at + 8, "constant %" PRIu32 ": its shape needs more bytes than "
                                  "the constant data holds (%" PRIu64 " bytes)", i, n_data);
                nbytes *= (uint64_t)c->dims[k];
            }
        }
        uint64_t off = ut_le64(r->d + at + 72);
        if (off % esize)
            return bad_at(r, at + 72, "constant %" PRIu32 ": data offset %" PRIu64
                          " is not a multiple of its element size %" PRIu64, i, off, esize);
        if (off < prev_end)
            return bad_at(r, at + 72, "constant %" PRIu32 ": data offset %" PRIu64
                          " overlaps the previous constant's data (ends at %" PRIu64 ")", i, off, prev_end);
        if (off > n_data || nbytes > n_data - off)
            return bad_at(r, at + 72, "constant %" PRIu32 ": %" PRIu64 " bytes of data at offset %" PRIu64
                          " run past the constant data (%" PRIu64 " bytes)", i, nbytes, off, n_data);
        c->nbytes = (size_t)nbytes;
        c->data = data ? data + off : NULL;
        prev_end = off + nbytes;
    }
    return TFVM_OK;
}

static tfvm_status rd_regions(rd *r)
{
    isa_program *p = r->p;
    tfvm_status st = rd_array(r, r->s[SEC_REGIONS].count, sizeof *p->regions, (void **)&p->regions);
    if (st)
        return st;
    p->n_regions = (uint32_t)r->s[SEC_REGIONS].count;
    for (uint32_t i = 0; i < p->n_regions; i++) {
        uint64_t at = rec_at(r, SEC_REGIONS, i);
        isa_region *g = &p->regions[i];
        g->kind = r->d[at];
        if ((st = rd_zero(r, at + 1, 3)))
            return st;
        g->parent = u32_at(r, at + 4);
        if ((st = rd_str(r, at + 8, false, "region", i, &g->name)))
            return st;
    }
    return TFVM_OK;
}

/* 1.2: the names of symbolic dims, one record per parameter record: a
 * string (or none) per dim of a shaped tensor whose size is `?`. */
static tfvm_status rd_dim_names(rd *r, isa_param *all, uint64_t n_par)
{
    if (!r->s[SEC_DIMNAMES].off)
        return TFVM_OK;
    for (uint64_t i = 0; i < n_par; i++) {
        uint64_t at = rec_at(r, SEC_DIMNAMES, i);
        const char *names[TFVM_MAX_RANK];
        bool any = false;
        tfvm_status st;
        for (unsigned k = 0; k < TFVM_MAX_RANK; k++) {
            if ((st = rd_str(r, at + 4 * k, true, "dim of parameter", i, &names[k])))
                return st;
            if (names[k] && (!all[i].shaped || k >= all[i].ndim || all[i].dims[k] >= 0))
                return bad_at(r, at + 4 * k, "dim-name table: parameter %" PRIu64 " dimension %u is named but is "
                              "not a '?' of its shape", i, k);
            if (names[k] && !isa_dim_name_ok(names[k], strlen(names[k])))
                return bad_at(r, at + 4 * k, "dim-name table: parameter %" PRIu64 " dimension %u: '%.64s' is not "
                              "a name (a letter or '_', then letters, digits or '_')", i, k, names[k]);
            any |= names[k] != NULL;
        }
        if (any && !isa_param_set_dim_names(r->p, &all[i], names))
            return nomem(r);
    }
    return TFVM_OK;
}

static tfvm_status rd_entries(rd *r)
{
    isa_program *p = r->p;
    uint64_t n_par = r->s[SEC_PARAMS].count, used = 0;
    isa_param *all;
    tfvm_status st = rd_array(r, r->s[SEC_ENTRIES].count, sizeof *p->entries, (void **)&p->entries);
    if (st || (st = rd_array(r, n_par, sizeof *all, (void **)&all)))
        return st;
    p->n_entries = (uint32_t)r->s[SEC_ENTRIES].count;
    for (uint32_t i = 0; i < p->n_entries; i++) {
        uint64_t at = rec_at(r, SEC_ENTRIES, i);
        isa_entry *e = &p->entries[i];
        if ((st = rd_str(r, at, false, "entry", i, &e->name)))
            return st;
        e->region = u32_at(r, at + 4);
        e->n_params = u32_at(r, at + 8);
        e->n_results = u32_at(r, at + 12);
        uint64_t k = (uint64_t)e->n_params + e->n_results;
        if (k > n_par - used)
            return bad_at(r, at + 8, "entry %" PRIu32 ": %" PRIu64 " parameters and results run past "
                          "the parameter table (%" PRIu64 " records)", i, k, n_par);
        e->params = e->n_params ? all + used : NULL;
        e->results = e->n_results ? all + used + e->n_params : NULL;
        used += k;
    }
    if (used != n_par)
        return bad_at(r, rec_at(r, SEC_PARAMS, used), "%" PRIu64 " of %" PRIu64
                      " parameter records belong to no entry", n_par - used, n_par);
    for (uint64_t i = 0; i < n_par; i++) {
        uint64_t at = rec_at(r, SEC_PARAMS, i);
        if ((st = rd_str(r, at, false, "parameter", i, &all[i].name)) || (st = rd_zero(r, at + 6, 2)))
            return st;
        all[i].dtype = r->d[at + 4];
        all[i].rank = r->d[at + 5];
        if (r->s[SEC_DEFAULTS].off) { /* 1.3; the verifier checks the constant against the parameter */
            uint32_t k = u32_at(r, rec_at(r, SEC_DEFAULTS, i));
            all[i].has_default = k != FMT_NO_CONST;
            all[i].dflt = k;
        }
    }
    /* 1.1: declared shapes, one record per parameter record. The verifier
     * checks them against the parameters' dtypes and ranks. */
    if (!r->s[SEC_SHAPES].off)
        return TFVM_OK;
    for (uint64_t i = 0; i < n_par; i++) {
        uint64_t at = rec_at(r, SEC_SHAPES, i);
        unsigned rank = r->d[at];
        if ((st = rd_zero(r, at + 1, 7)))
            return st;
        if (rank > TFVM_MAX_RANK && rank != ISA_RANK_ANY)
            return bad_at(r, at, "shape of parameter %" PRIu64 ": rank %u exceeds %d", i, rank, TFVM_MAX_RANK);
        int64_t dims[TFVM_MAX_RANK];
        for (unsigned k = 0; k < TFVM_MAX_RANK; k++) {
            dims[k] = (int64_t)ut_le64(r->d + at + 8 + 8 * k);
            bool in = rank != ISA_RANK_ANY && k < rank;
            if (in && dims[k] < -1)
                return bad_at(r, at + 8 + 8 * k, "shape of parameter %" PRIu64 ": dimension %u is %" PRId64
                              " (-1 is '?')", i, k, dims[k]);
            if (!in && dims[k] != 0)
                return bad_at(r, at + 8 + 8 * k, "shape of parameter %" PRIu64 ": dimension %u is beyond "
                              "its rank but not 0", i, k);
        }
        if (all[i].rank == 0 && rank != 0)
            return bad_at(r, at, "shape of parameter %" PRIu64 ": a scalar has rank 0, not %u", i, rank);
        if (all[i].rank != 0 && rank != ISA_RANK_ANY && !isa_param_set_shape(p, &all[i], rank, dims))
            return nomem(r);
    }
    return rd_dim_names(r, all, n_par);
}

static tfvm_status rd_origins(rd *r)
{
    isa_program *p = r->p;
    tfvm_status st;
    for (uint32_t i = 0; i < p->n_insts && r->s[SEC_ORIGINS].off; i++) {
        uint64_t at = rec_at(r, SEC_ORIGINS, i);
        if ((st = rd_str(r, at, true, "origin of instruction", i, &p->insts[i].origin)) ||
            (st = rd_str(r, at + 4, true, "origin op of instruction", i, &p->insts[i].origin_op)))
            return st;
        if (!p->insts[i].origin && p->insts[i].origin_op)
            return bad_at(r, at, "origin of instruction %" PRIu32 " has an op type but no node", i);
    }
    return TFVM_OK;
}

/* The variable table: names and outputs; the verifier checks the outputs
 * exist and the order. */
static tfvm_status rd_vars(rd *r)
{
    isa_program *p = r->p;
    tfvm_status st = rd_array(r, r->s[SEC_VARS].count, sizeof *p->vars, (void **)&p->vars);
    if (st)
        return st;
    p->n_vars = (uint32_t)r->s[SEC_VARS].count;
    for (uint32_t j = 0; j < p->n_vars; j++) {
        uint64_t at = rec_at(r, SEC_VARS, j);
        if ((st = rd_str(r, at, false, "variable", j, &p->vars[j].name)))
            return st;
        p->vars[j].inst = u32_at(r, at + 4);
        p->vars[j].out = u32_at(r, at + 8);
    }
    return TFVM_OK;
}

static tfvm_status rd_sites(rd *r)
{
    isa_program *p = r->p;
    tfvm_status st = rd_array(r, r->s[SEC_SITES].count, sizeof *p->sites, (void **)&p->sites);
    if (st)
        return st;
    p->n_sites = (uint32_t)r->s[SEC_SITES].count;
    for (uint32_t i = 0; i < p->n_sites; i++) {
        uint64_t at = rec_at(r, SEC_SITES, i);
        p->sites[i].id = u32_at(r, at);
        p->sites[i].callee = u32_at(r, at + 4);
    }
    return TFVM_OK;
}

static tfvm_status rd_insts(rd *r)
{
    isa_program *p = r->p;
    uint64_t n_edges = r->s[SEC_EDGES].count, used = 0;
    tfvm_status st = rd_array(r, r->s[SEC_INSTS].count, sizeof *p->insts, (void **)&p->insts);
    if (st || (st = rd_array(r, n_edges, sizeof *p->edges, (void **)&p->edges)))
        return st;
    p->n_insts = (uint32_t)r->s[SEC_INSTS].count;
    p->n_edges = (uint32_t)n_edges;
    for (uint32_t i = 0; i < p->n_insts; i++) {
        uint64_t at = rec_at(r, SEC_INSTS, i);
        isa_inst *in = &p->insts[i];
        in->op = ut_le16(r->d + at);
        in->flags = ut_le16(r->d + at + 2);
        in->region = u32_at(r, at + 4);
        in->n_in = ut_le16(r->d + at + 8);
        in->n_ctl = ut_le16(r->d + at + 10);
        in->a = u32_at(r, at + 12);
        in->b = u32_at(r, at + 16);
        in->n_edges = u32_at(r, at + 20);
        if (in->n_edges > n_edges - used)
            return bad_at(r, at + 20, "instruction %" PRIu32 ": %" PRIu32 " edges run past the edge "
                          "table (%" PRIu64 " records)", i, in->n_edges, n_edges);
        in->edge_first = (uint32_t)used;
        used += in->n_edges;
    }
    if (used != n_edges)
        return bad_at(r, rec_at(r, SEC_EDGES, used), "%" PRIu64 " of %" PRIu64
                      " edge records belong to no instruction", n_edges - used, n_edges);
    for (uint32_t i = 0; i < p->n_edges; i++) {
        uint64_t at = rec_at(r, SEC_EDGES, i);
        p->edges[i] = (isa_edge){u32_at(r, at), u32_at(r, at + 4), u32_at(r, at + 8)};
    }
    for (uint32_t i = 0; i < p->n_insts; i++) {
        uint64_t at = rec_at(r, SEC_DEBUG, i);
        if ((st = rd_str(r, at, true, "instruction", i, &p->insts[i].name)))
            return st;
        p->insts[i].line = u32_at(r, at + 4);
        p->insts[i].col = u32_at(r, at + 8);
    }
    return TFVM_OK;
}

tfvm_status ld_read(const void *data, size_t size, const char *name, const tfvm_allocator *a,
                    isa_program *out, tfvm_error *err)
{
    isa_program_init(out, a);
    rd r = {.d = data, .size = size, .name = name ? name : "(memory)", .err = err, .p = out};
    uint64_t hs = 0;
    tfvm_status st = rd_header(&r, &hs);
    if (!st)
        st = rd_sections(&r, hs);
    /* The verifier and later users name the program by this copy. */
    if (!st && !(out->name = ut_arena_strdup(&out->arena, r.name)))
        st = nomem(&r);
    const unsigned char *cdata = NULL;
    if (!st)
        st = rd_strings(&r);
    if (!st)
        st = rd_blob(&r, SEC_DATA, &cdata);
    if (!st)
        st = rd_consts(&r, cdata);
    if (!st)
        st = rd_regions(&r);
    if (!st)
        st = rd_entries(&r);
    if (!st)
        st = rd_sites(&r);
    if (!st)
        st = rd_insts(&r);
    if (!st)
        st = rd_origins(&r);
    if (!st)
        st = rd_vars(&r);
    if (!st && r.s[SEC_SOURCE].off)
        st = rd_str(&r, r.s[SEC_SOURCE].off, false, "source", 0, &out->source);
    if (!st)
        st = ld_verify(out, err);
    if (st)
        isa_program_release(out);
    return st;
}

/* ---- Writer ------------------------------------------------------------------ */
/* The string table: every distinct name once, in order of first use (regions,
 * entries with their parameters and results, instruction names), so the bytes
 * depend only on the program. A hash set finds repeats. */
typedef struct wr_strs {
    const tfvm_allocator *alloc;
    ut_buf blob;
    uint32_t *slots; /* blob offset + 1; 0 = empty */
    size_t n_slots, used;
    bool nomem, too_big;
} wr_strs;

static uint64_t wr_hash(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3u;
    return h ^ (h >> 29);
}

static bool wr_grow(wr_strs *w)
{
    size_t n = w->n_slots ? w->n_slots * 2 : 64;
    uint32_t *t = ut_calloc(w->alloc, n, sizeof *t);
    if (!t)
        return false;
    for (size_t i = 0; i < w->n_slots; i++) {
        if (!w->slots[i])
            continue;
        const char *s = (const char *)w->blob.data + w->slots[i] - 1;
        size_t j = wr_hash(s, strlen(s)) & (n - 1);
        while (t[j])
            j = (j + 1) & (n - 1);
        t[j] = w->slots[i];
    }
    ut_free(w->alloc, w->slots, w->n_slots * sizeof *w->slots);
    w->slots = t;
    w->n_slots = n;
    return true;
}

/* Offset of s in the string table (added on first use); FMT_NO_STR for NULL. */
static uint32_t wr_str(wr_strs *w, const char *s)
{
    if (!s || w->nomem || w->too_big)
        return FMT_NO_STR;
    if (w->used * 2 >= w->n_slots && !wr_grow(w)) {
        w->nomem = true;
        return FMT_NO_STR;
    }
    size_t n = strlen(s), j = wr_hash(s, n) & (w->n_slots - 1);
    for (; w->slots[j]; j = (j + 1) & (w->n_slots - 1)) {
        const char *t = (const char *)w->blob.data + w->slots[j] - 1;
        if (strcmp(s, t) == 0)
            return w->slots[j] - 1;
    }
    size_t off = w->blob.len;
    if (off + n + 1 >= FMT_NO_STR - 1) {
        w->too_big = true;
        return FMT_NO_STR;
    }
    ut_buf_append(&w->blob, s, n + 1);
    if (w->blob.failed) {
        w->nomem = true;
        return FMT_NO_STR;
    }
    w->slots[j] = (uint32_t)off + 1;
    w->used++;
    return (uint32_t)off;
}

static void wr_zeros(ut_buf *b, size_t n)
{
    static const unsigned char z[16];
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        ut_buf_append(b, z, k);
        n -= k;
    }
}

static void wr_patch32(ut_buf *b, size_t at, uint32_t v)
{
    if (b->failed)
        return;
    for (int k = 0; k < 4; k++)
        b->data[at + k] = (unsigned char)(v >> (8 * k));
}

static void wr_patch64(ut_buf *b, size_t at, uint64_t v)
{
    wr_patch32(b, at, (uint32_t)v);
    wr_patch32(b, at + 4, (uint32_t)(v >> 32));
}

static size_t wr_const_size(const isa_const *c)
{
    size_t e = tfvm_dtype_size((tfvm_dtype)c->dtype);
    return e ? e : 1;
}

tfvm_status ld_write(const isa_program *p, ut_buf *out, tfvm_error *err)
{
    const char *name = p->name ? p->name : "(program)";
    wr_strs w = {.alloc = &p->alloc};
    ut_buf_init(&w.blob, &p->alloc);
    /* Parameter names in entry order; instruction names in index order. */
    uint32_t *rname = NULL, *ename = NULL, *pname = NULL, *iname = NULL;
    size_t n_par = 0;
    for (uint32_t e = 0; e < p->n_entries; e++)
        n_par += (size_t)p->entries[e].n_params + p->entries[e].n_results;
    rname = ut_calloc(&p->alloc, p->n_regions, sizeof *rname);
    ename = ut_calloc(&p->alloc, p->n_entries, sizeof *ename);
    pname = ut_calloc(&p->alloc, n_par, sizeof *pname);
    iname = ut_calloc(&p->alloc, p->n_insts, sizeof *iname);
    if (!rname || !ename || !pname || !iname)
        w.nomem = true;
    for (uint32_t i = 0; i < p->n_regions && !w.nomem; i++)
        rname[i] = wr_str(&w, p->regions[i].name);
    size_t k = 0;
    for (uint32_t e = 0; e < p->n_entries && !w.nomem; e++) {
        const isa_entry *en = &p->entries[e];
        ename[e] = wr_str(&w, en->name);
        for (uint32_t j = 0; j < en->n_params; j++)
            pname[k++] = wr_str(&w, en->params[j].name);
        for (uint32_t j = 0; j < en->n_results; j++)
            pname[k++] = wr_str(&w, en->results[j].name);
    }
    for (uint32_t i = 0; i < p->n_insts && !w.nomem; i++)
        iname[i] = wr_str(&w, p->insts[i].name);
    /* 1.2's names: of symbolic dims (8 per parameter record) and of each
     * instruction's origin (node, op) */
    bool has_dim_names = false, has_origins = false;
    uint32_t *dname = ut_calloc(&p->alloc, n_par * TFVM_MAX_RANK + 1, sizeof *dname);
    uint32_t *oname = ut_calloc(&p->alloc, 2 * (size_t)p->n_insts + 1, sizeof *oname);
    if (!dname || !oname)
        w.nomem = true;
    k = 0;
    for (uint32_t e = 0; e < p->n_entries && !w.nomem; e++) {
        const isa_entry *en = &p->entries[e];
        for (uint32_t j = 0; j < en->n_params + en->n_results; j++, k++) {
            const isa_param *pa = j < en->n_params ? &en->params[j] : &en->results[j - en->n_params];
            for (unsigned d = 0; d < TFVM_MAX_RANK; d++) {
                const char *nm = pa->shaped && pa->dim_names && d < pa->ndim ? pa->dim_names[d] : NULL;
                dname[k * TFVM_MAX_RANK + d] = nm ? wr_str(&w, nm) : FMT_NO_STR;
                has_dim_names |= nm != NULL;
            }
        }
    }
    for (uint32_t i = 0; i < p->n_insts && !w.nomem; i++) {
        oname[2 * i] = p->insts[i].origin ? wr_str(&w, p->insts[i].origin) : FMT_NO_STR;
        oname[2 * i + 1] = p->insts[i].origin && p->insts[i].origin_op ? wr_str(&w, p->insts[i].origin_op) : FMT_NO_STR;
        has_origins |= p->insts[i].origin != NULL;
    }
    /* 1.1's sections only when the program has what they hold, so that a
     * program without them is the same 1.0 file it always was. */
    bool has_shapes = false, has_defaults = false;
    for (uint32_t e = 0; e < p->n_entries; e++)
        for (uint32_t j = 0; j < p->entries[e].n_params; j++)
            has_defaults |= p->entries[e].params[j].has_default;
    for (uint32_t e = 0; e < p->n_entries; e++)
        for (uint32_t j = 0; j < p->entries[e].n_params + p->entries[e].n_results; j++) {
            const isa_entry *en = &p->entries[e];
            has_shapes |= (j < en->n_params ? &en->params[j] : &en->results[j - en->n_params])->shaped;
        }
    uint32_t source = p->source ? wr_str(&w, p->source) : FMT_NO_STR;
    uint32_t *vname = ut_calloc(&p->alloc, (size_t)p->n_vars + 1, sizeof *vname);
    if (!vname)
        w.nomem = true;
    for (uint32_t j = 0; j < p->n_vars && !w.nomem; j++)
        vname[j] = wr_str(&w, p->vars[j].name);
    bool present[SEC_LAST + 1];
    uint32_t n_sec = 0;
    unsigned minor = 0; /* the oldest that has every section written */
    for (int id = 1; id <= SEC_LAST; id++) {
        present[id] = id <= SEC_REQUIRED || (id == SEC_SHAPES && has_shapes) || (id == SEC_SOURCE && p->source) ||
                      (id == SEC_DIMNAMES && has_shapes && has_dim_names) || (id == SEC_ORIGINS && has_origins) ||
                      (id == SEC_VARS && p->n_vars) ||
                      (id == SEC_DEFAULTS && has_defaults);
        n_sec += present[id];
        minor = present[id] && sec_minor((uint32_t)id) > minor ? sec_minor((uint32_t)id) : minor;
    }

    tfvm_status st = TFVM_OK;
    if (w.nomem)
        st = ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory writing .tfvm file", name);
    else if (w.too_big)
        st = ut_err(err, TFVM_ERR_LIMIT, "%s: names exceed the 4 GiB string table of a .tfvm file", name);
    if (st)
        goto done;

    size_t base = out->len;
    ut_buf_append(out, fmt_magic, sizeof fmt_magic);
    ut_buf_u16(out, FMT_MAJOR);
    ut_buf_u16(out, (uint16_t)minor);
    ut_buf_u32(out, FMT_HEADER);
    ut_buf_u64(out, 0); /* file size, patched below */
    ut_buf_u32(out, 0); /* checksum, patched below */
    ut_buf_u32(out, n_sec);
    size_t table = out->len;
    wr_zeros(out, (size_t)n_sec * FMT_SECENT);
    size_t start[SEC_LAST + 1], count[SEC_LAST + 1];

    start[SEC_STRINGS] = out->len;
    ut_buf_append(out, w.blob.data, w.blob.len);
    count[SEC_STRINGS] = w.blob.len;

    /* Each constant's data at the next multiple of its element size. */
    start[SEC_DATA] = out->len;
    size_t doff = 0;
    for (uint32_t i = 0; i < p->n_consts; i++) {
        const isa_const *c = &p->consts[i];
        size_t pad = (wr_const_size(c) - doff % wr_const_size(c)) % wr_const_size(c);
        wr_zeros(out, pad);
        ut_buf_append(out, c->data, c->nbytes);
        doff += pad + c->nbytes;
    }
    count[SEC_DATA] = doff;

    start[SEC_CONSTS] = out->len;
    doff = 0;
    for (uint32_t i = 0; i < p->n_consts; i++) {
        const isa_const *c = &p->consts[i];
        doff += (wr_const_size(c) - doff % wr_const_size(c)) % wr_const_size(c);
        ut_buf_u8(out, c->dtype);
        ut_buf_u8(out, c->rank);
        wr_zeros(out, 6);
        for (unsigned d = 0; d < TFVM_MAX_RANK; d++)
            ut_buf_u64(out, d < c->rank ? (uint64_t)c->dims[d] : 0);
        ut_buf_u64(out, doff);
        doff += c->nbytes;
    }
    count[SEC_CONSTS] = p->n_consts;

    start[SEC_REGIONS] = out->len;
    for (uint32_t i = 0; i < p->n_regions; i++) {
        ut_buf_u8(out, p->regions[i].kind);
        wr_zeros(out, 3);
        ut_buf_u32(out, p->regions[i].parent);
        ut_buf_u32(out, rname[i]);
    }
    count[SEC_REGIONS] = p->n_regions;

    start[SEC_ENTRIES] = out->len;
    for (uint32_t e = 0; e < p->n_entries; e++) {
        ut_buf_u32(out, ename[e]);
        ut_buf_u32(out, p->entries[e].region);
        ut_buf_u32(out, p->entries[e].n_params);
        ut_buf_u32(out, p->entries[e].n_results);
    }
    count[SEC_ENTRIES] = p->n_entries;

    start[SEC_PARAMS] = out->len;
    k = 0;
    for (uint32_t e = 0; e < p->n_entries; e++) {
        const isa_entry *en = &p->entries[e];
        for (uint32_t j = 0; j < en->n_params + en->n_results; j++) {
            const isa_param *pa = j < en->n_params ? &en->params[j] : &en->results[j - en->n_params];
            ut_buf_u32(out, pname[k++]);
            ut_buf_u8(out, pa->dtype);
            ut_buf_u8(out, pa->rank);
            ut_buf_u16(out, 0);
        }
    }
    count[SEC_PARAMS] = n_par;

    start[SEC_SITES] = out->len;
    for (uint32_t i = 0; i < p->n_sites; i++) {
        ut_buf_u32(out, p->sites[i].id);
        ut_buf_u32(out, p->sites[i].callee);
    }
    count[SEC_SITES] = p->n_sites;

    start[SEC_INSTS] = out->len;
    for (uint32_t i = 0; i < p->n_insts; i++) {
        const isa_inst *in = &p->insts[i];
        ut_buf_u16(out, in->op);
        ut_buf_u16(out, in->flags);
        ut_buf_u32(out, in->region);
        ut_buf_u16(out, (uint16_t)in->n_in);
        ut_buf_u16(out, (uint16_t)in->n_ctl);
        ut_buf_u32(out, in->a);
        ut_buf_u32(out, in->b);
        ut_buf_u32(out, in->n_edges);
    }
    count[SEC_INSTS] = p->n_insts;

    start[SEC_EDGES] = out->len;
    for (uint32_t i = 0; i < p->n_edges; i++) {
        ut_buf_u32(out, p->edges[i].out);
        ut_buf_u32(out, p->edges[i].inst);
        ut_buf_u32(out, p->edges[i].port);
    }
    count[SEC_EDGES] = p->n_edges;

    start[SEC_DEBUG] = out->len;
    for (uint32_t i = 0; i < p->n_insts; i++) {
        ut_buf_u32(out, iname[i]);
        ut_buf_u32(out, p->insts[i].line);
        ut_buf_u32(out, p->insts[i].col);
    }
    count[SEC_DEBUG] = p->n_insts;

    start[SEC_SHAPES] = out->len;
    count[SEC_SHAPES] = present[SEC_SHAPES] ? n_par : 0;
    for (uint32_t e = 0; e < p->n_entries && present[SEC_SHAPES]; e++) {
        const isa_entry *en = &p->entries[e];
        for (uint32_t j = 0; j < en->n_params + en->n_results; j++) {
            const isa_param *pa = j < en->n_params ? &en->params[j] : &en->results[j - en->n_params];
            unsigned rank = pa->rank == 0 ? 0 : pa->shaped ? pa->ndim : ISA_RANK_ANY;
            ut_buf_u8(out, (uint8_t)rank);
            wr_zeros(out, 7);
            for (unsigned d = 0; d < TFVM_MAX_RANK; d++)
                ut_buf_u64(out, rank != ISA_RANK_ANY && d < rank ? (uint64_t)pa->dims[d] : 0);
        }
    }
    start[SEC_SOURCE] = out->len;
    count[SEC_SOURCE] = present[SEC_SOURCE];
    if (present[SEC_SOURCE])
        ut_buf_u32(out, source);
    start[SEC_DIMNAMES] = out->len;
    count[SEC_DIMNAMES] = present[SEC_DIMNAMES] ? n_par : 0;
    for (size_t i = 0; i < count[SEC_DIMNAMES] * TFVM_MAX_RANK; i++)
        ut_buf_u32(out, dname[i]);
    start[SEC_ORIGINS] = out->len;
    count[SEC_ORIGINS] = present[SEC_ORIGINS] ? p->n_insts : 0;
    for (size_t i = 0; i < 2 * count[SEC_ORIGINS]; i++)
        ut_buf_u32(out, oname[i]);
    start[SEC_VARS] = out->len;
    count[SEC_VARS] = p->n_vars;
    for (uint32_t j = 0; j < p->n_vars; j++) {
        ut_buf_u32(out, vname[j]);
        ut_buf_u32(out, p->vars[j].inst);
        ut_buf_u32(out, p->vars[j].out);
    }
    start[SEC_DEFAULTS] = out->len;
    count[SEC_DEFAULTS] = present[SEC_DEFAULTS] ? n_par : 0;
    for (uint32_t e = 0; e < p->n_entries && present[SEC_DEFAULTS]; e++) {
        const isa_entry *en = &p->entries[e];
        for (uint32_t j = 0; j < en->n_params + en->n_results; j++) {
            const isa_param *pa = j < en->n_params ? &en->params[j] : NULL;
            ut_buf_u32(out, pa && pa->has_default ? pa->dflt : FMT_NO_CONST);
        }
    }

    if (out->failed) {
        st = ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory writing .tfvm file", name);
        goto done;
    }
    size_t at = table;
    for (int id = 1; id <= SEC_LAST; id++) {
        if (!present[id])
            continue;
        wr_patch32(out, at, (uint32_t)id);
        wr_patch32(out, at + 4, sec_info[id].rec);
        wr_patch64(out, at + 8, start[id] - base);
        wr_patch64(out, at + 16, count[id]);
        at += FMT_SECENT;
    }
    wr_patch64(out, base + 16, out->len - base);
    wr_patch32(out, base + FMT_CRC_AT,
               ut_crc32(0, out->data + base + FMT_CRC_FROM, out->len - base - FMT_CRC_FROM));
done:
    ut_free(&p->alloc, rname, p->n_regions * sizeof *rname);
    ut_free(&p->alloc, ename, p->n_entries * sizeof *ename);
    ut_free(&p->alloc, pname, n_par * sizeof *pname);
    ut_free(&p->alloc, iname, p->n_insts * sizeof *iname);
    ut_free(&p->alloc, dname, (n_par * TFVM_MAX_RANK + 1) * sizeof *dname);
    ut_free(&p->alloc, oname, (2 * (size_t)p->n_insts + 1) * sizeof *oname);
    ut_free(&p->alloc, vname, ((size_t)p->n_vars + 1) * sizeof *vname);
    ut_free(&p->alloc, w.slots, w.n_slots * sizeof *w.slots);
    ut_buf_free(&w.blob);
    return st;
}
