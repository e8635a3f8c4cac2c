/* loader/dis.c — the .tfasm disassembler and ld_format_inst, the one printer of
 * an instruction shared by tfvm dis, --trace, error messages and the debugger.
 * Output follows docs/asm.md so that ld_assemble reads it back exactly. */
#include "util/half.h"
#include "loader.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIS_LABEL_ALIGN 16 /* longer labels are not padded to: they just stick out */

/* What printing needs beyond the program. ld_disassemble builds the indexes;
 * ld_format_inst runs without them (no allocation) and scans instead. */
typedef struct dis_named {
    uint32_t region;
    const char *name;
} dis_named;

typedef struct dis_ctx {
    const isa_program *p;
    const size_t *port_base;   /* per instruction: its first port in prod_first */
    const size_t *prod_first;  /* per port (+1): producers prod[prod_first[g] ..] */
    const uint32_t *prod_src, *prod_out;
    const dis_named *named;    /* named instructions, sorted by (region, name) */
    size_t n_named;
    int const_table;           /* CONST #K form: 1 yes, 0 no, -1 not known yet */
    /* without the index: the current instruction's producers, from one scan
     * of the edges, when they fit (else each port scans the edges again) */
    uint32_t (*local)[3];      /* (port, source, output) in edge order */
    size_t n_local;
    bool local_ok;
} dis_ctx;

#define DIS_LOCAL 256

/* Constants are written inline when the k-th CONST uses table entry k and
 * there are no others (what the assembler makes); otherwise as a table. */
static bool consts_inline(const isa_program *p)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < p->n_insts; i++) {
        if ((p->insts[i].op == ISA_CONST || isa_ops[p->insts[i].op].attr == ISA_ATTR_CHAN) && p->insts[i].a != k++)
            return false;
        if (p->insts[i].op == ISA_FEED && ISA_CHAN_SHAPE(p->insts[i].b) && ISA_CHAN_SHAPE(p->insts[i].b) != ++k)
            return false; /* its shape, right after its name */
        if ((isa_imm_port(&p->insts[i]) >= 0 || p->insts[i].op == ISA_BRANCH) && p->insts[i].b != k++)
            return false;
    }
    return k == p->n_consts;
}

/* ---- Names and references ------------------------------------------------------- */
static int cmp_named(const void *a, const void *b)
{
    const dis_named *x = a, *y = b;
    if (x->region != y->region)
        return x->region < y->region ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Does region r hold an instruction called `name`? */
static bool region_has(const dis_ctx *c, uint32_t r, const char *name)
{
    const isa_program *p = c->p;
    if (c->named) {
        dis_named key = {r, name};
        return bsearch(&key, c->named, c->n_named, sizeof key, cmp_named) != NULL;
    }
    /* instructions are grouped by region: binary search for r's first one */
    uint32_t lo = 0, hi = p->n_insts;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->insts[mid].region < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (uint32_t k = lo; k < p->n_insts && p->insts[k].region == r; k++)
        if (p->insts[k].name && strcmp(p->insts[k].name, name) == 0)
            return true;
    return false;
}

/* A reference to output `out` of instruction `src`, as read from region `from`:
 * bare when name resolution from there finds it, else qualified; %N if anonymous. */
static void put_ref(const dis_ctx *c, uint32_t from, uint32_t src, uint32_t out, ut_buf *b)
{
    const isa_program *p = c->p;
    if (src >= p->n_insts) {
        ut_buf_printf(b, "?");
        return;
    }
    const isa_inst *s = &p->insts[src];
    if (!s->name) {
        ut_buf_printf(b, "%%%" PRIu32, src);
    } else {
        bool bare = false;
        uint32_t r = from;
        for (uint32_t steps = 0; r < p->n_regions && steps <= p->n_regions; steps++) {
            if (r == s->region) {
                bare = true;
                break;
            }
            if (region_has(c, r, s->name))
                break;
            r = p->regions[r].parent;
        }
        if (bare || s->region >= p->n_regions)
            ut_buf_printf(b, "%s", s->name);
        else
            ut_buf_printf(b, "%s.%s", p->regions[s->region].name, s->name);
    }
    if (out)
        ut_buf_printf(b, ":%" PRIu32, out);
}

/* The producers of input port `port` of instruction i, joined by " | ". */
static void put_const(ut_buf *b, const isa_program *p, uint32_t ci);

static void put_port(const dis_ctx *c, uint32_t i, uint32_t port, ut_buf *b)
{
    const isa_program *p = c->p;
    if ((int64_t)port == isa_imm_port(&p->insts[i])) {
        if (c->const_table > 0 || (c->const_table < 0 && !consts_inline(p)))
            ut_buf_printf(b, "#%" PRIu32, p->insts[i].b);
        else
            put_const(b, p, p->insts[i].b);
        return;
    }
    uint32_t from = p->insts[i].region; /* a RETURN's too: names resolve from where it is written */
    bool any = false;
    if (c->prod_first) {
        size_t g = c->port_base[i] + port;
        for (size_t k = c->prod_first[g]; k < c->prod_first[g + 1]; k++) {
            if (any)
                ut_buf_printf(b, " | ");
            put_ref(c, from, c->prod_src[k], c->prod_out[k], b);
            any = true;
        }
    } else if (c->local_ok) {
        for (size_t k = 0; k < c->n_local; k++) {
            if (c->local[k][0] != port)
                continue;
            if (any)
                ut_buf_printf(b, " | ");
            put_ref(c, from, c->local[k][1], c->local[k][2], b);
            any = true;
        }
    } else {
        for (uint32_t s = 0; s < p->n_insts; s++) {
            const isa_inst *si = &p->insts[s];
            for (uint32_t e = si->edge_first; e - si->edge_first < si->n_edges && e < p->n_edges; e++) {
                if (p->edges[e].inst != i || p->edges[e].port != port)
                    continue;
                if (any)
                    ut_buf_printf(b, " | ");
                put_ref(c, from, s, p->edges[e].out, b);
                any = true;
            }
        }
    }
    if (!any)
        ut_buf_printf(b, "?");
}

/* ---- Constants ------------------------------------------------------------------- */
/* buf is the shortest %g form that reads back exactly. Where %g chose an
 * exponent only for lack of digits (100 -> "1e+02"), print the integer
 * digits instead: more precision, so it still reads back exactly. Then make
 * sure a '.' or an exponent marks it as a float. */
static void put_decimal(ut_buf *b, char *buf, double v, int max_digits)
{
    const char *e = strchr(buf, 'e');
    if (e) {
        int ex = atoi(e + 1);
        if (ex >= 0 && ex < max_digits)
            snprintf(buf, 48, "%.*g", ex + 1, v);
    }
    ut_buf_printf(b, "%s%s", buf, strpbrk(buf, ".e") ? "" : ".0");
}

/* Floats print in the shortest form that reads back to the same bits; a '.'
 * keeps them recognisably floats. NaN payloads print as nan(0xBITS). */
static void put_f64(ut_buf *b, uint64_t bits)
{
    double d;
    memcpy(&d, &bits, 8);
    const char *sign = bits >> 63 ? "-" : "";
    if (isnan(d)) {
        if ((bits & 0x7fffffffffffffffu) == 0x7ff8000000000000u)
            ut_buf_printf(b, "%snan", sign);
        else
            ut_buf_printf(b, "nan(0x%016" PRIx64 ")", bits);
        return;
    }
    if (isinf(d)) {
        ut_buf_printf(b, "%sinf", sign);
        return;
    }
    char buf[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, d);
        double back = strtod(buf, NULL);
        if (memcmp(&back, &d, 8) == 0)
            break;
    }
    put_decimal(b, buf, (double)d, 17);
}

static void put_f32(ut_buf *b, uint32_t bits)
{
    float f;
    memcpy(&f, &bits, 4);
    const char *sign = bits >> 31 ? "-" : "";
    if (isnan(f)) {
        if ((bits & 0x7fffffffu) == 0x7fc00000u)
            ut_buf_printf(b, "%snan", sign);
        else
            ut_buf_printf(b, "nan(0x%08" PRIx32 ")", bits);
        return;
    }
    if (isinf(f)) {
        ut_buf_printf(b, "%sinf", sign);
        return;
    }
    char buf[48];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        float back = strtof(buf, NULL);
        if (memcmp(&back, &f, 4) == 0)
            break;
    }
    put_decimal(b, buf, (double)f, 9);
}

static void put_scalar(ut_buf *b, uint8_t dtype, const unsigned char *d)
{
    switch (dtype) {
    case TFVM_BOOL: ut_buf_printf(b, "%s", d[0] ? "true" : "false"); break;
    case TFVM_I32: ut_buf_printf(b, "%" PRId32, (int32_t)ut_le32(d)); break;
    case TFVM_I64: ut_buf_printf(b, "%" PRId64, (int64_t)ut_le64(d)); break;
    case TFVM_F32: put_f32(b, ut_le32(d)); break;
    case TFVM_F64: put_f64(b, ut_le64(d)); break;
    case TFVM_U8: ut_buf_printf(b, "%u", (unsigned)d[0]); break;
    case TFVM_I8: ut_buf_printf(b, "%d", (int)(int8_t)d[0]); break;
    case TFVM_I16: ut_buf_printf(b, "%d", (int)(int16_t)ut_le16(d)); break;
    case TFVM_U16: ut_buf_printf(b, "%u", (unsigned)ut_le16(d)); break;
    case TFVM_U32: ut_buf_printf(b, "%" PRIu32, ut_le32(d)); break;
    case TFVM_U64: ut_buf_printf(b, "%" PRIu64, ut_le64(d)); break;
    case TFVM_F16:
    case TFVM_BF16: { /* its f32 value, which reads back to the same bits (NaN as plain nan) */
        float f = dtype == TFVM_F16 ? ut_f16_to_f32(ut_le16(d)) : ut_bf16_to_f32(ut_le16(d));
        uint32_t u;
        memcpy(&u, &f, 4);
        put_f32(b, isnan(f) ? (u & 0x80000000u) | 0x7fc00000u : u);
        break;
    }
    default: ut_buf_printf(b, "?"); break;
    }
}

/* NumPy-style nested rows; *at walks the element bytes in C order. */
static void put_rows(ut_buf *b, const isa_const *k, unsigned axis, const unsigned char **at)
{
    size_t es = tfvm_dtype_size((tfvm_dtype)k->dtype);
    ut_buf_printf(b, "[");
    for (int64_t i = 0; i < k->dims[axis] && !b->failed; i++) {
        if (i)
            ut_buf_printf(b, ", ");
        if (axis + 1 == k->rank) {
            put_scalar(b, k->dtype, *at);
            *at += es;
        } else {
            put_rows(b, k, axis + 1, at);
        }
    }
    ut_buf_printf(b, "]");
}

/* TYPE VALUE: "i32 1", "f32[2] [1.0, 2.5]" */
static void put_const(ut_buf *b, const isa_program *p, uint32_t ci)
{
    if (ci >= p->n_consts) {
        ut_buf_printf(b, "?");
        return;
    }
    const isa_const *k = &p->consts[ci];
    ut_buf_printf(b, "%s", tfvm_dtype_name((tfvm_dtype)k->dtype));
    size_t es = tfvm_dtype_size((tfvm_dtype)k->dtype);
    if (!es || k->rank > TFVM_MAX_RANK) {
        ut_buf_printf(b, " ?");
        return;
    }
    if (k->rank == 0) {
        ut_buf_printf(b, " ");
        if (k->nbytes >= es && k->data)
            put_scalar(b, k->dtype, k->data);
        else
            ut_buf_printf(b, "?");
        return;
    }
    uint64_t count = 1;
    ut_buf_printf(b, "[");
    for (unsigned a = 0; a < k->rank; a++) {
        ut_buf_printf(b, "%s%" PRId64, a ? ", " : "", k->dims[a]);
        uint64_t d = k->dims[a] > 0 ? (uint64_t)k->dims[a] : 0;
        count = d == 0 || count == 0 ? 0 : d <= UINT64_MAX / count ? count * d : UINT64_MAX;
    }
    ut_buf_printf(b, "] ");
    if (count == 0) {
        ut_buf_printf(b, "[]");
        return;
    }
    if (count > k->nbytes / es || !k->data) { /* not a verified constant */
        ut_buf_printf(b, "?");
        return;
    }
    const unsigned char *at = k->data;
    put_rows(b, k, 0, &at);
}

/* ---- Instructions ----------------------------------------------------------------- */
static bool has_label(const isa_program *p, uint32_t i)
{
    return p->insts[i].name || isa_outs(&p->insts[i]) > 0;
}

static size_t label_len(const isa_program *p, uint32_t i)
{
    if (p->insts[i].name)
        return strlen(p->insts[i].name);
    if (!has_label(p, i))
        return 0;
    char buf[16];
    return (size_t)snprintf(buf, sizeof buf, "%%%" PRIu32, i);
}

static const char *region_name(const isa_program *p, uint32_t r)
{
    return r < p->n_regions ? p->regions[r].name : "?";
}

/* Everything after "label = ": OP, attributes, (inputs), [controls], @L:C. */
static void put_body(dis_ctx *c, uint32_t i, ut_buf *b)
{
    const isa_program *p = c->p;
    const isa_inst *in = &p->insts[i];
    if (in->op >= ISA_OP_COUNT) {
        ut_buf_printf(b, "?");
        return;
    }
    const isa_op_info *info = &isa_ops[in->op];
    uint32_t local[DIS_LOCAL][3];
    if (!c->prod_first && isa_ports(in)) {
        c->local = local;
        c->n_local = 0;
        c->local_ok = true;
        for (uint32_t s = 0; s < p->n_insts && c->local_ok; s++) {
            const isa_inst *si = &p->insts[s];
            for (uint32_t e = si->edge_first; e - si->edge_first < si->n_edges && e < p->n_edges; e++) {
                if (p->edges[e].inst != i)
                    continue;
                if (c->n_local == DIS_LOCAL) {
                    c->local_ok = false;
                    break;
                }
                uint32_t *l = local[c->n_local++];
                l[0] = p->edges[e].port;
                l[1] = s;
                l[2] = p->edges[e].out;
            }
        }
    }
    ut_buf_printf(b, "%s", info->name);
    switch (info->attr) {
    case ISA_ATTR_NONE:
        break;
    case ISA_ATTR_INDEX:
        ut_buf_printf(b, " %" PRIu32, in->a);
        break;
    case ISA_ATTR_CONST:
        if (c->const_table < 0)
            c->const_table = !consts_inline(p);
        if (c->const_table) {
            ut_buf_printf(b, " #%" PRIu32, in->a);
        } else {
            ut_buf_printf(b, " ");
            put_const(b, p, in->a);
        }
        break;
    case ISA_ATTR_ENTER:
        ut_buf_printf(b, " %s", region_name(p, in->a));
        if (in->flags & ISA_FLAG_CONST)
            ut_buf_printf(b, " const");
        if (in->b)
            ut_buf_printf(b, " parallel=%" PRIu32, in->b);
        break;
    case ISA_ATTR_FRAME:
        ut_buf_printf(b, " %s", region_name(p, in->a));
        break;
    case ISA_ATTR_SITE:
        if (in->a < p->n_sites) {
            char lab[160];
            ut_buf_printf(b, " %s", isa_site_label(region_name(p, p->sites[in->a].callee), p->sites[in->a].id, lab, sizeof lab));
        } else {
            ut_buf_printf(b, " ?");
        }
        break;
    case ISA_ATTR_DTYPE:
        ut_buf_printf(b, " %s", tfvm_dtype_name((tfvm_dtype)in->a));
        break;
    case ISA_ATTR_AXIS:
        ut_buf_printf(b, " axis=%" PRId32, (int32_t)in->a);
        break;
    case ISA_ATTR_CMP:
        ut_buf_printf(b, " %s ", in->a < ISA_OP_COUNT ? isa_ops[in->a].name : "?");
        if (c->const_table < 0)
            c->const_table = !consts_inline(p);
        if (c->const_table)
            ut_buf_printf(b, "#%" PRIu32, in->b);
        else
            put_const(b, p, in->b);
        break;
    case ISA_ATTR_OPTS:
        for (uint32_t bit = 1; bit; bit <<= 1)
            if (in->a & bit) {
                const char *o = isa_opt_name((isa_op)in->op, bit);
                ut_buf_printf(b, " %s", o ? o : "?");
            }
        break;
    case ISA_ATTR_CHAN: {
        char name[ISA_MAX_CHAN + 1], t[160];
        if (c->const_table < 0)
            c->const_table = !consts_inline(p);
        if (c->const_table)
            ut_buf_printf(b, " #%" PRIu32, in->a);
        else if (in->a < p->n_consts && isa_chan_ok(&p->consts[in->a]))
            ut_buf_printf(b, " \"%s\"", isa_chan_name(p, i, name));
        else
            ut_buf_printf(b, " ?");
        if (in->op == ISA_FEED && c->const_table && ISA_CHAN_SHAPE(in->b))
            ut_buf_printf(b, " %s[#%" PRIu32 "]", tfvm_dtype_name((tfvm_dtype)ISA_CHAN_DTYPE(in->b)),
                          ISA_CHAN_SHAPE(in->b) - 1);
        else if (in->op == ISA_FEED)
            ut_buf_printf(b, " %s", isa_chan_type(p, in->b, t, sizeof t));
        break;
    }
    }
    if (in->flags & ISA_FLAG_PRUNE_FALSE)
        ut_buf_printf(b, " prune_false");
    if (in->flags & ISA_FLAG_PRUNE_TRUE)
        ut_buf_printf(b, " prune_true");
    if (in->flags & ISA_FLAG_DEV_MASK)
        ut_buf_printf(b, " on %s", (in->flags & ISA_FLAG_DEV_MASK) == ISA_FLAG_DEV_CPU ? "cpu" : "cuda");
    if (in->n_in) {
        ut_buf_printf(b, " (");
        for (uint32_t k = 0; k < in->n_in && !b->failed; k++) {
            if (k)
                ut_buf_printf(b, ", ");
            put_port(c, i, k, b);
        }
        ut_buf_printf(b, ")");
    }
    if (in->n_ctl) {
        ut_buf_printf(b, " [");
        for (uint32_t k = 0; k < in->n_ctl && !b->failed; k++) {
            if (k)
                ut_buf_printf(b, ", ");
            put_port(c, i, in->n_in + k, b);
        }
        ut_buf_printf(b, "]");
    }
    if (in->line || in->col)
        ut_buf_printf(b, " @%" PRIu32 ":%" PRIu32, in->line, in->col);
    /* the model's node, when .tfasm can quote its name (else it is left out) */
    if (in->origin && isa_source_ok(in->origin)) {
        ut_buf_printf(b, " from \"%s\"", in->origin);
        if (in->origin_op && isa_source_ok(in->origin_op))
            ut_buf_printf(b, " \"%s\"", in->origin_op);
    }
    /* the source variables its outputs carry (the variable table) */
    for (uint32_t j = isa_vars_of(p, i); j < p->n_vars && p->vars[j].inst == i; j++) {
        ut_buf_printf(b, " var \"%s\"", p->vars[j].name);
        if (p->vars[j].out)
            ut_buf_printf(b, ":%" PRIu32, p->vars[j].out);
    }
    c->local_ok = false; /* `local` goes out of scope */
}

/* label (padded to `width`) = body; instructions without outputs or a name
 * have no label, and their body is aligned with the others'. */
static void put_inst(dis_ctx *c, uint32_t i, size_t width, ut_buf *b)
{
    const isa_program *p = c->p;
    size_t len = label_len(p, i);
    if (has_label(p, i)) {
        if (p->insts[i].name)
            ut_buf_printf(b, "%s", p->insts[i].name);
        else
            ut_buf_printf(b, "%%%" PRIu32, i);
        ut_buf_printf(b, "%*s = ", (int)(width > len ? width - len : 0), "");
    } else if (width) {
        ut_buf_printf(b, "%*s", (int)width + 3, "");
    }
    put_body(c, i, b);
}

void ld_format_inst(const isa_program *p, uint32_t i, ut_buf *out)
{
    if (!p || i >= p->n_insts) {
        ut_buf_printf(out, "?");
        return;
    }
    dis_ctx c = {.p = p, .const_table = -1};
    put_inst(&c, i, 0, out);
}

/* ---- Whole programs ---------------------------------------------------------------- */
/* A parameter or result; a name that is not an identifier ("x:0", from an
 * imported model) is quoted (docs/asm.md). */
static void put_type(ut_buf *b, const isa_param *pa)
{
    const char *n = pa->name ? pa->name : "?";
    bool ident = (*n >= 'A' && *n <= 'Z') || (*n >= 'a' && *n <= 'z') || *n == '_';
    for (const char *c = n; ident && *c; c++)
        ident = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_';
    char ty[160];
    ut_buf_printf(b, ident ? "%s: %s" : "\"%s\": %s", n, isa_param_type(pa, ty, sizeof ty));
    if (pa->has_default) /* a constant of the table, which is then printed (consts_inline) */
        ut_buf_printf(b, " = #%" PRIu32, pa->dflt);
}

static void put_header(ut_buf *b, const isa_program *p, uint32_t r, const isa_entry *e, uint32_t ei,
                       bool numbered)
{
    const isa_region *g = &p->regions[r];
    if (g->kind == ISA_REGION_LOOP) {
        ut_buf_printf(b, "loop %s in %s {\n", g->name, region_name(p, g->parent));
    } else if (g->kind == ISA_REGION_FUNC || !e) {
        ut_buf_printf(b, "func %s {\n", g->name);
    } else {
        if (numbered)
            ut_buf_printf(b, "entry #%" PRIu32 " %s(", ei, e->name);
        else
            ut_buf_printf(b, "entry %s(", e->name);
        for (uint32_t k = 0; k < e->n_params; k++) {
            if (k)
                ut_buf_printf(b, ", ");
            put_type(b, &e->params[k]);
        }
        ut_buf_printf(b, ") -> (");
        for (uint32_t k = 0; k < e->n_results; k++) {
            if (k)
                ut_buf_printf(b, ", ");
            put_type(b, &e->results[k]);
        }
        ut_buf_printf(b, ")");
        if (strcmp(e->name, g->name) != 0)
            ut_buf_printf(b, " region %s", g->name);
        ut_buf_printf(b, " {\n");
    }
}

typedef struct dis_mem {
    const tfvm_allocator *a;
    void *ptr[8];
    size_t size[8];
    int n;
} dis_mem;

static void *dis_calloc(dis_mem *m, size_t count, size_t size)
{
    size_t bytes;
    if (m->n == (int)UT_COUNTOF(m->ptr) || !ut_mul_ok(count ? count : 1, size, &bytes))
        return NULL;
    void *q = ut_calloc(m->a, count ? count : 1, size);
    if (q) {
        m->ptr[m->n] = q;
        m->size[m->n++] = bytes;
    }
    return q;
}

tfvm_status ld_disassemble(const isa_program *p, ut_buf *out, tfvm_error *err)
{
    const char *pname = p->name ? p->name : "<program>";
    dis_mem m = {.a = &p->alloc};
    dis_ctx c = {.p = p, .const_table = !consts_inline(p)};
    tfvm_status st = TFVM_OK;

    /* producers of every port, grouped by port, in (source, out) order */
    size_t n_ports = 0;
    size_t *port_base = dis_calloc(&m, p->n_insts + 1, sizeof *port_base);
    if (!port_base)
        goto nomem;
    for (uint32_t i = 0; i < p->n_insts; i++) {
        port_base[i] = n_ports;
        n_ports += isa_ports(&p->insts[i]);
    }
    port_base[p->n_insts] = n_ports;
    size_t *first = dis_calloc(&m, n_ports + 2, sizeof *first);
    uint32_t *src = dis_calloc(&m, p->n_edges, sizeof *src);
    uint32_t *outp = dis_calloc(&m, p->n_edges, sizeof *outp);
    if (!first || !src || !outp)
        goto nomem;
    for (uint32_t s = 0; s < p->n_insts; s++) {
        const isa_inst *si = &p->insts[s];
        for (uint32_t e = si->edge_first; e - si->edge_first < si->n_edges && e < p->n_edges; e++) {
            const isa_edge *ed = &p->edges[e];
            if (ed->inst < p->n_insts && ed->port < isa_ports(&p->insts[ed->inst]))
                first[port_base[ed->inst] + ed->port + 2]++;
        }
    }
    for (size_t g = 2; g < n_ports + 2; g++)
        first[g] += first[g - 1];
    /* first[g + 1] is the fill cursor of port g; once filled it is port g's end */
    for (uint32_t s = 0; s < p->n_insts; s++) {
        const isa_inst *si = &p->insts[s];
        for (uint32_t e = si->edge_first; e - si->edge_first < si->n_edges && e < p->n_edges; e++) {
            const isa_edge *ed = &p->edges[e];
            if (ed->inst < p->n_insts && ed->port < isa_ports(&p->insts[ed->inst])) {
                size_t k = first[port_base[ed->inst] + ed->port + 1]++;
                src[k] = s;
                outp[k] = ed->out;
            }
        }
    }
    c.port_base = port_base;
    c.prod_first = first;
    c.prod_src = src;
    c.prod_out = outp;

    /* named instructions by (region, name), for the shadowing test of put_ref */
    dis_named *named = dis_calloc(&m, p->n_insts, sizeof *named);
    if (!named)
        goto nomem;
    for (uint32_t i = 0; i < p->n_insts; i++)
        if (p->insts[i].name)
            named[c.n_named++] = (dis_named){p->insts[i].region, p->insts[i].name};
    if (c.n_named)
        qsort(named, c.n_named, sizeof *named, cmp_named);
    c.named = named;

    /* the entry of each ROOT region */
    uint32_t *entry_of = dis_calloc(&m, p->n_regions, sizeof *entry_of);
    if (!entry_of)
        goto nomem;
    memset(entry_of, 0xff, (p->n_regions ? p->n_regions : 1) * sizeof *entry_of);
    for (uint32_t e = 0; e < p->n_entries; e++)
        if (p->entries[e].region < p->n_regions)
            entry_of[p->entries[e].region] = e;

    /* entries are numbered in the order of their blocks unless written #K */
    bool numbered = false;
    for (uint32_t e = 1; e < p->n_entries; e++)
        numbered |= p->entries[e].region <= p->entries[e - 1].region;

    if (p->source)
        ut_buf_printf(out, "source \"%s\"\n\n", p->source);
    if (c.const_table) {
        for (uint32_t k = 0; k < p->n_consts; k++) {
            ut_buf_printf(out, "const #%" PRIu32 " = ", k);
            put_const(out, p, k);
            ut_buf_printf(out, "\n");
        }
        if (p->n_regions)
            ut_buf_printf(out, "\n");
    }
    uint32_t i = 0;
    for (uint32_t r = 0; r < p->n_regions && !out->failed; r++) {
        if (r)
            ut_buf_printf(out, "\n");
        uint32_t e = entry_of[r];
        put_header(out, p, r, e != UINT32_MAX ? &p->entries[e] : NULL, e, numbered);
        uint32_t end = i;
        size_t width = 0;
        while (end < p->n_insts && p->insts[end].region == r) {
            size_t len = label_len(p, end++);
            if (len > width && len <= DIS_LABEL_ALIGN)
                width = len;
        }
        for (; i < end && !out->failed; i++) {
            ut_buf_printf(out, "    ");
            put_inst(&c, i, width, out);
            ut_buf_printf(out, "\n");
        }
        ut_buf_printf(out, "}\n");
    }
    if (out->failed)
        goto nomem;
    goto done;
nomem:
    st = ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory while disassembling", pname);
done:
    for (int k = 0; k < m.n; k++)
        ut_free(m.a, m.ptr[k], m.size[k]);
    return st;
}
