/* loader/verify.c — the verifier: every rule of the program model (isa/isa.h,
 * docs/format.md "Verification"), so that a program that passes cannot crash the VM.
 * Linear-ish on any input: O(n log n) at worst, scratch memory proportional to the counts. */
#include "loader/loader.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define VF_MAX_PORTS 65535u /* MERGE data inputs, and control inputs, per instruction */
#define VF_MAX_NAME 127u

static const char *const kind_name[] = {"ROOT", "LOOP", "FUNC"};

typedef struct vf_blk {
    void *ptr;
    size_t size;
} vf_blk;

typedef struct vf {
    const isa_program *p;
    tfvm_error *err;
    const char *name;
    vf_blk blk[16]; /* scratch to free */
    int n_blk;
    uint32_t *owner;       /* ROOT region -> its entry, else ISA_NONE        */
    size_t *res_base;      /* entry -> its first slot in res_by              */
    uint32_t *res_by;      /* result slot -> its RESULT instruction          */
    uint32_t *site_region; /* site -> region of its first CALL/RETURN        */
    uint32_t *site_first;  /* site -> that instruction                       */
    uint8_t *site_call;    /* site has a CALL                                */
    uint8_t *loop_enter;   /* LOOP region has a non-const ENTER              */
    uint32_t *indeg;       /* instruction -> edges into it                   */
    uint32_t *sort_a, *sort_b;
} vf;

/* ---- Messages ---------------------------------------------------------------- */
static tfvm_status vbad(vf *v, const char *fmt, ...) UT_PRINTF(2, 3);
static tfvm_status vbad(vf *v, const char *fmt, ...)
{
    char what[448];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ut_err(v->err, TFVM_ERR_FORMAT, "%s: bad .tfvm file (%s)", v->name, what);
}

static tfvm_status vnomem(vf *v)
{
    return ut_err(v->err, TFVM_ERR_NOMEM, "%s: out of memory verifying the program", v->name);
}

typedef char vf_label[176];

/* "instruction 12 'sum'", or "instruction %12" when anonymous. Only for
 * instructions whose names have been checked (bounded, printable). */
static const char *ilabel(const vf *v, uint32_t i, vf_label buf)
{
    const char *n = v->p->insts[i].name;
    if (n)
        snprintf(buf, sizeof(vf_label), "instruction %" PRIu32 " '%s'", i, n);
    else
        snprintf(buf, sizeof(vf_label), "instruction %%%" PRIu32, i);
    return buf;
}

static const char *rname(const vf *v, uint32_t r) { return v->p->regions[r].name; }
static const char *rkind(const vf *v, uint32_t r) { return kind_name[v->p->regions[r].kind]; }

/* A name that failed the identifier rule, quoted safely and briefly. */
static const char *quote(const char *s, char *buf, size_t size)
{
    size_t o = 0;
    buf[o++] = '\'';
    for (size_t i = 0; s[i] && o + 8 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i == 32) {
            o += (size_t)snprintf(buf + o, size - o, "...");
            break;
        }
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\')
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
    }
    snprintf(buf + o, size - o, "'");
    return buf;
}

static bool is_alpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static bool is_alnum(char c) { return is_alpha(c) || (c >= '0' && c <= '9'); }

/* [A-Za-z_][A-Za-z0-9_]*, at most 127 characters; never reads past byte 128. */
static tfvm_status vname(vf *v, const char *name, const char *ctx)
{
    char q[160];
    if (!name)
        return vbad(v, "%s: missing name", ctx);
    size_t i = 0;
    for (; name[i]; i++) {
        if (i >= VF_MAX_NAME)
            return vbad(v, "%s: name %s is longer than %u characters", ctx, quote(name, q, sizeof q),
                        VF_MAX_NAME);
        if (i == 0 ? !is_alpha(name[i]) : !is_alnum(name[i]))
            break;
    }
    if (i == 0 || name[i])
        return vbad(v, "%s: name %s is not an identifier", ctx, quote(name, q, sizeof q));
    return TFVM_OK;
}

/* Parameter and result names are the names users bind arguments and results
 * by, and models made elsewhere name them freely ("input.1", "x:0",
 * "dense/BiasAdd"): any printable ASCII but space and '"' (so that .tfasm can
 * quote them without escapes), at most 127 characters. */
static tfvm_status vpname(vf *v, const char *name, const char *ctx, const char *what)
{
    char q[160];
    if (!name)
        return vbad(v, "%s: missing name", ctx);
    size_t i = 0;
    for (; name[i]; i++) {
        if (i >= VF_MAX_NAME)
            return vbad(v, "%s: name %s is longer than %u characters", ctx, quote(name, q, sizeof q),
                        VF_MAX_NAME);
        if (name[i] <= ' ' || name[i] > '~' || name[i] == '"')
            break;
    }
    if (i == 0 || name[i])
        return vbad(v, "%s: name %s is not %s (printable ASCII without spaces or '\"')", ctx,
                    quote(name, q, sizeof q), what);
    return TFVM_OK;
}

/* ---- Scratch ----------------------------------------------------------------- */
static void *vf_calloc(vf *v, size_t count, size_t size)
{
    if (count == 0)
        count = 1;
    size_t n;
    if (v->n_blk == (int)UT_COUNTOF(v->blk) || !ut_mul_ok(count, size, &n))
        return NULL;
    void *ptr = ut_calloc(&v->p->alloc, count, size);
    if (ptr)
        v->blk[v->n_blk++] = (vf_blk){ptr, n};
    return ptr;
}

static void vf_release(vf *v)
{
    while (v->n_blk > 0) {
        vf_blk *b = &v->blk[--v->n_blk];
        ut_free(&v->p->alloc, b->ptr, b->size);
    }
}

static uint32_t *vf_nones(vf *v, size_t count)
{
    uint32_t *a = vf_calloc(v, count, sizeof *a);
    if (a)
        for (size_t i = 0; i < count; i++)
            a[i] = ISA_NONE;
    return a;
}

/* ---- Duplicate names: a stable merge sort of indices (no hashing, so no
 * input can make it quadratic), then adjacent equal keys. ---------------------- */
typedef int (*vf_cmp)(const vf *v, uint32_t a, uint32_t b);

static void vf_sort(const vf *v, uint32_t *a, uint32_t *tmp, size_t n, vf_cmp cmp)
{
    uint32_t *src = a, *dst = tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                dst[o++] = cmp(v, src[j], src[i]) < 0 ? src[j++] : src[i++];
            while (i < mid)
                dst[o++] = src[i++];
            while (j < hi)
                dst[o++] = src[j++];
        }
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, n * sizeof *a);
}

/* Sorts idx[0..n) (ascending indices on entry) and finds the smallest index
 * whose key repeats an earlier one; *first is the earliest with that key. */
static bool vf_dup(const vf *v, uint32_t *idx, size_t n, vf_cmp cmp, uint32_t *first, uint32_t *dup)
{
    vf_sort(v, idx, v->sort_b, n, cmp);
    bool found = false;
    for (size_t k = 1; k < n; k++) {
        if (cmp(v, idx[k - 1], idx[k]) != 0)
            continue;
        size_t g = k - 1;
        while (g > 0 && cmp(v, idx[g - 1], idx[k]) == 0)
            g--;
        if (!found || idx[k] < *dup) {
            *first = idx[g];
            *dup = idx[k];
            found = true;
        }
        while (k + 1 < n && cmp(v, idx[k], idx[k + 1]) == 0)
            k++;
    }
    return found;
}

static int cmp_region(const vf *v, uint32_t a, uint32_t b)
{
    return strcmp(v->p->regions[a].name, v->p->regions[b].name);
}
static int cmp_entry(const vf *v, uint32_t a, uint32_t b)
{
    return strcmp(v->p->entries[a].name, v->p->entries[b].name);
}
static int cmp_inst(const vf *v, uint32_t a, uint32_t b)
{
    const isa_inst *x = &v->p->insts[a], *y = &v->p->insts[b];
    if (x->region != y->region)
        return x->region < y->region ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* FEED and FETCH by channel name, then opcode and value type. */
static int cmp_chan(const vf *v, uint32_t a, uint32_t b)
{
    const isa_program *p = v->p;
    const isa_inst *x = &p->insts[a], *y = &p->insts[b];
    const isa_const *cx = &p->consts[x->a], *cy = &p->consts[y->a];
    size_t n = cx->nbytes < cy->nbytes ? cx->nbytes : cy->nbytes;
    int c = memcmp(cx->data, cy->data, n);
    if (c || cx->nbytes != cy->nbytes)
        return c ? c : cx->nbytes < cy->nbytes ? -1 : 1;
    if (x->op != y->op)
        return x->op < y->op ? -1 : 1;
    return x->b < y->b ? -1 : x->b > y->b;
}

/* ---- Tables --------------------------------------------------------------------- */
static tfvm_status check_regions(vf *v)
{
    const isa_program *p = v->p;
    char ctx[64];
    tfvm_status st;
    for (uint32_t r = 0; r < p->n_regions; r++) {
        const isa_region *g = &p->regions[r];
        snprintf(ctx, sizeof ctx, "region %" PRIu32, r);
        if ((st = vname(v, g->name, ctx)))
            return st;
        if (g->kind > ISA_REGION_FUNC)
            return vbad(v, "region %" PRIu32 " '%s': bad kind %u", r, g->name, g->kind);
        if (g->kind != ISA_REGION_LOOP && g->parent != ISA_NONE)
            return vbad(v, "region %" PRIu32 " '%s': a %s region has no parent, but its parent is %" PRIu32,
                        r, g->name, kind_name[g->kind], g->parent);
        if (g->kind == ISA_REGION_LOOP && g->parent == ISA_NONE)
            return vbad(v, "region %" PRIu32 " '%s': a LOOP region needs a parent region", r, g->name);
        if (g->kind == ISA_REGION_LOOP && g->parent >= r)
            return vbad(v, "region %" PRIu32 " '%s': parent region %" PRIu32 " must come before it", r,
                        g->name, g->parent);
        v->sort_a[r] = r;
    }
    uint32_t first, dup;
    if (vf_dup(v, v->sort_a, p->n_regions, cmp_region, &first, &dup))
        return vbad(v, "region %" PRIu32 " '%s': name already used by region %" PRIu32, dup,
                    p->regions[dup].name, first);
    return TFVM_OK;
}

/* A parameter's default is a constant of its type (a result has none). */
static tfvm_status check_default(vf *v, const isa_param *pa, const char *ctx, const char *what)
{
    if (strcmp(what, "parameter") != 0)
        return vbad(v, "%s '%s': a %s has no default", ctx, pa->name, what);
    if (pa->dflt >= v->p->n_consts)
        return vbad(v, "%s '%s': default constant %" PRIu32 " does not exist", ctx, pa->name, pa->dflt);
    const isa_const *k = &v->p->consts[pa->dflt];
    bool fits = k->dtype == pa->dtype && (pa->rank == 0) == (k->rank == 0) && (!pa->shaped || pa->ndim == k->rank);
    for (unsigned d = 0; fits && pa->shaped && d < pa->ndim; d++)
        fits = pa->dims[d] < 0 || pa->dims[d] == k->dims[d];
    if (!fits) {
        char want[160];
        isa_param_type(pa, want, sizeof want);
        return vbad(v, "%s '%s': default constant %" PRIu32 " is not a value of type %s", ctx, pa->name, pa->dflt,
                    want);
    }
    return TFVM_OK;
}

static tfvm_status check_params(vf *v, uint32_t e, const isa_param *pa, uint32_t n, const char *what)
{
    const char *en = v->p->entries[e].name;
    char ctx[224];
    tfvm_status st;
    for (uint32_t j = 0; j < n; j++) {
        snprintf(ctx, sizeof ctx, "entry %" PRIu32 " '%s': %s %" PRIu32, e, en, what, j);
        if ((st = vpname(v, pa[j].name, ctx, "a parameter name")))
            return st;
        if (!isa_dtype_valid(pa[j].dtype))
            return vbad(v, "%s '%s': bad dtype %u", ctx, pa[j].name, pa[j].dtype);
        if (pa[j].rank != 0 && pa[j].rank != ISA_RANK_ANY)
            return vbad(v, "%s '%s': bad rank %u (0 for a scalar, %u for a tensor)", ctx, pa[j].name,
                        pa[j].rank, ISA_RANK_ANY);
        if (pa[j].shaped && (pa[j].rank == 0 || pa[j].ndim > TFVM_MAX_RANK || !pa[j].dims))
            return vbad(v, "%s '%s': a shape on a scalar, or of rank %u", ctx, pa[j].name, pa[j].ndim);
        for (unsigned k = 0; pa[j].shaped && k < pa[j].ndim; k++)
            if (pa[j].dims[k] < -1)
                return vbad(v, "%s '%s': dimension %u is %" PRId64, ctx, pa[j].name, k, pa[j].dims[k]);
        if (pa[j].has_default && (st = check_default(v, &pa[j], ctx, what)))
            return st;
    }
    return TFVM_OK;
}

static tfvm_status check_entries(vf *v)
{
    if (v->p->source && !isa_source_ok(v->p->source))
        return vbad(v, "source file name is not 1 to %d printable characters without spaces or '\"'",
                    ISA_MAX_SOURCE);
    const isa_program *p = v->p;
    char ctx[64];
    tfvm_status st;
    size_t n_res = 0;
    for (uint32_t e = 0; e < p->n_entries; e++) {
        const isa_entry *en = &p->entries[e];
        snprintf(ctx, sizeof ctx, "entry %" PRIu32, e);
        if ((st = vname(v, en->name, ctx)))
            return st;
        if (en->region >= p->n_regions)
            return vbad(v, "entry %" PRIu32 " '%s': region %" PRIu32 " does not exist", e, en->name,
                        en->region);
        if (p->regions[en->region].kind != ISA_REGION_ROOT)
            return vbad(v, "entry %" PRIu32 " '%s': region %" PRIu32 " '%s' is a %s region, not ROOT", e,
                        en->name, en->region, rname(v, en->region), rkind(v, en->region));
        uint32_t o = v->owner[en->region];
        if (o != ISA_NONE)
            return vbad(v, "entry %" PRIu32 " '%s': region '%s' already belongs to entry %" PRIu32 " '%s'",
                        e, en->name, rname(v, en->region), o, p->entries[o].name);
        v->owner[en->region] = e;
        if ((st = check_params(v, e, en->params, en->n_params, "parameter")) ||
            (st = check_params(v, e, en->results, en->n_results, "result")))
            return st;
        n_res += en->n_results;
        v->sort_a[e] = e;
    }
    uint32_t first, dup;
    if (vf_dup(v, v->sort_a, p->n_entries, cmp_entry, &first, &dup))
        return vbad(v, "entry %" PRIu32 " '%s': name already used by entry %" PRIu32, dup,
                    p->entries[dup].name, first);
    for (uint32_t r = 0; r < p->n_regions; r++)
        if (p->regions[r].kind == ISA_REGION_ROOT && v->owner[r] == ISA_NONE)
            return vbad(v, "region %" PRIu32 " '%s': ROOT region belongs to no entry", r, rname(v, r));
    v->res_base = vf_calloc(v, p->n_entries, sizeof *v->res_base);
    v->res_by = vf_nones(v, n_res);
    if (!v->res_base || !v->res_by)
        return vnomem(v);
    for (uint32_t e = 1; e < p->n_entries; e++)
        v->res_base[e] = v->res_base[e - 1] + p->entries[e - 1].n_results;
    return TFVM_OK;
}

static tfvm_status check_consts(vf *v)
{
    const isa_program *p = v->p;
    for (uint32_t i = 0; i < p->n_consts; i++) {
        const isa_const *c = &p->consts[i];
        if (!isa_dtype_valid(c->dtype))
            return vbad(v, "constant %" PRIu32 ": bad dtype %u", i, c->dtype);
        if (c->rank > TFVM_MAX_RANK)
            return vbad(v, "constant %" PRIu32 ": rank %u exceeds %d", i, c->rank, TFVM_MAX_RANK);
        bool empty = false;
        for (unsigned k = 0; k < c->rank; k++) {
            if (c->dims[k] < 0)
                return vbad(v, "constant %" PRIu32 ": dimension %u is negative (%" PRId64 ")", i, k,
                            c->dims[k]);
            empty |= c->dims[k] == 0;
        }
        size_t n = 0;
        if (!empty) {
            n = tfvm_dtype_size((tfvm_dtype)c->dtype);
            for (unsigned k = 0; k < c->rank; k++)
                if ((uint64_t)c->dims[k] > SIZE_MAX || !ut_mul_ok(n, (size_t)c->dims[k], &n))
                    return vbad(v, "constant %" PRIu32 ": its size overflows", i);
        }
        if (c->nbytes != n)
            return vbad(v, "constant %" PRIu32 ": %zu bytes of data, but its dtype and shape need %zu", i,
                        c->nbytes, n);
        if (n && !c->data)
            return vbad(v, "constant %" PRIu32 ": no data", i);
        if (c->dtype == TFVM_BOOL) {
            const unsigned char *b = c->data;
            for (size_t k = 0; k < n; k++)
                if (b[k] > 1)
                    return vbad(v, "constant %" PRIu32 ": bool element %zu is %u, not 0 or 1", i, k, b[k]);
        }
    }
    return TFVM_OK;
}

static tfvm_status check_sites(vf *v)
{
    const isa_program *p = v->p;
    for (uint32_t s = 0; s < p->n_sites; s++) {
        const isa_site *si = &p->sites[s];
        if (si->callee >= p->n_regions)
            return vbad(v, "call site %" PRIu32 " (id %" PRIu32 "): callee region %" PRIu32 " does not exist",
                        s, si->id, si->callee);
        if (p->regions[si->callee].kind != ISA_REGION_FUNC)
            return vbad(v, "call site %" PRIu32 " (id %" PRIu32 "): callee region %" PRIu32
                        " '%s' is a %s region, not FUNC", s, si->id, si->callee, rname(v, si->callee),
                        rkind(v, si->callee));
        if (s > 0 && si->id <= p->sites[s - 1].id)
            return vbad(v, "call site %" PRIu32 " (id %" PRIu32 "): ids must be ascending, but the previous"
                        " site's id is %" PRIu32, s, si->id, p->sites[s - 1].id);
    }
    return TFVM_OK;
}

/* ---- Instructions ------------------------------------------------------------ */
static tfvm_status check_inst_names(vf *v)
{
    const isa_program *p = v->p;
    char ctx[64];
    vf_label l, l2;
    tfvm_status st;
    size_t n_named = 0;
    for (uint32_t i = 0; i < p->n_insts; i++) {
        const isa_inst *in = &p->insts[i];
        snprintf(ctx, sizeof ctx, "instruction %" PRIu32, i);
        if (in->name && (st = vname(v, in->name, ctx)))
            return st;
        if (in->region >= p->n_regions)
            return vbad(v, "%s: region %" PRIu32 " does not exist", ilabel(v, i, l), in->region);
        if (i > 0 && in->region < p->insts[i - 1].region)
            return vbad(v, "%s: region %" PRIu32 " '%s' after region %" PRIu32
                        " '%s' of the previous instruction (instructions must be sorted by region)",
                        ilabel(v, i, l), in->region, rname(v, in->region), p->insts[i - 1].region,
                        rname(v, p->insts[i - 1].region));
        if (in->name)
            v->sort_a[n_named++] = i;
    }
    uint32_t first, dup;
    if (vf_dup(v, v->sort_a, n_named, cmp_inst, &first, &dup))
        return vbad(v, "%s: name already used by %s in region '%s'", ilabel(v, dup, l),
                    ilabel(v, first, l2), rname(v, p->insts[dup].region));
    return TFVM_OK;
}

/* A channel is fed or fetched, not both, and its FEEDs agree on its type
 * (after check_inst: the names are valid). */
static tfvm_status check_channels(vf *v)
{
    const isa_program *p = v->p;
    size_t n = 0;
    for (uint32_t i = 0; i < p->n_insts; i++)
        if (isa_ops[p->insts[i].op].cls == ISA_CLASS_HOST)
            v->sort_a[n++] = i;
    vf_sort(v, v->sort_a, v->sort_b, n, cmp_chan);
    for (size_t k = 1; k < n; k++) {
        const isa_inst *x = &p->insts[v->sort_a[k - 1]], *y = &p->insts[v->sort_a[k]];
        const isa_const *cx = &p->consts[x->a], *cy = &p->consts[y->a];
        if (cx->nbytes != cy->nbytes || memcmp(cx->data, cy->data, cx->nbytes) != 0 ||
            (x->op == y->op && isa_chan_type_eq(p, x->b, y->b)))
            continue;
        vf_label l1, l2;
        char name[ISA_MAX_CHAN + 1], t1[160], t2[160];
        isa_chan_name(p, v->sort_a[k], name);
        if (x->op != y->op)
            return vbad(v, "channel '%s' is both fed (%s) and fetched (%s)", name, ilabel(v, v->sort_a[k - 1], l1),
                        ilabel(v, v->sort_a[k], l2));
        return vbad(v, "the FEEDs of channel '%s' disagree on its type: %s (%s) and %s (%s)", name,
                    isa_chan_type(p, x->b, t1, sizeof t1), ilabel(v, v->sort_a[k - 1], l1),
                    isa_chan_type(p, y->b, t2, sizeof t2), ilabel(v, v->sort_a[k], l2));
    }
    return TFVM_OK;
}

static tfvm_status check_frame(vf *v, uint32_t i, const char *op, uint32_t f)
{
    vf_label l;
    if (f >= v->p->n_regions)
        return vbad(v, "%s: %s frame %" PRIu32 " does not exist", ilabel(v, i, l), op, f);
    if (v->p->regions[f].kind != ISA_REGION_LOOP)
        return vbad(v, "%s: %s frame %" PRIu32 " '%s' is a %s region, not LOOP", ilabel(v, i, l), op, f,
                    rname(v, f), rkind(v, f));
    return TFVM_OK;
}

/* "fib@7": callee@id, as tags print it */
static const char *slabel(const vf *v, uint32_t s, char *buf, size_t size)
{
    isa_site_label(rname(v, v->p->sites[s].callee), v->p->sites[s].id, buf, size);
    return buf;
}

static tfvm_status check_inst(vf *v, uint32_t i)
{
    const isa_program *p = v->p;
    const isa_inst *in = &p->insts[i];
    vf_label l, l2;
    char sl[160];
    tfvm_status st;
    const char *L = ilabel(v, i, l);
    if (in->op >= ISA_OP_COUNT)
        return vbad(v, "%s: bad opcode %u", L, in->op);
    const isa_op_info *info = &isa_ops[in->op];
    const char *op = info->name;
    const isa_region *reg = &p->regions[in->region];
    if (info->n_in < 0 && (in->n_in < 1 || in->n_in > VF_MAX_PORTS))
        return vbad(v, "%s: %s needs 1 to %u data inputs, not %" PRIu32, L, op, VF_MAX_PORTS, in->n_in);
    if (info->n_in >= 0 && in->n_in != (uint32_t)info->n_in)
        return vbad(v, "%s: %s takes %d data input%s, not %" PRIu32, L, op, info->n_in,
                    info->n_in == 1 ? "" : "s", in->n_in);
    if (in->n_ctl > VF_MAX_PORTS)
        return vbad(v, "%s: %" PRIu32 " control inputs (at most %u)", L, in->n_ctl, VF_MAX_PORTS);
    uint16_t allowed = info->attr == ISA_ATTR_ENTER ? ISA_FLAG_CONST : 0;
    if (isa_is_compute(info->cls))
        allowed |= ISA_FLAG_DEV_CPU | ISA_FLAG_DEV_CUDA;
    if (isa_is_compute(info->cls) && info->n_in >= 2)
        allowed |= ISA_FLAG_IMM_MASK;
    if (isa_is_switch(in->op))
        allowed |= ISA_FLAG_PRUNE_FALSE | ISA_FLAG_PRUNE_TRUE;
    if ((in->flags & ISA_FLAG_DEV_MASK) == ISA_FLAG_DEV_MASK)
        return vbad(v, "%s: %s is placed on two devices (flags 0x%x)", L, op, in->flags);
    int imm = (in->flags & allowed & ISA_FLAG_IMM_MASK) ? isa_imm_port(in) : -1;
    if (imm >= 0 && (uint32_t)imm >= in->n_in)
        return vbad(v, "%s: constant operand on input %d, but %s has %" PRIu32 " data inputs", L, imm, op, in->n_in);
    if (imm >= 0 && in->b >= p->n_consts)
        return vbad(v, "%s: constant operand: constant %" PRIu32 " does not exist (%" PRIu32 " constant%s)", L, in->b,
                    p->n_consts, p->n_consts == 1 ? "" : "s");
    if (in->flags & ~allowed)
        return vbad(v, "%s: flags 0x%x not allowed on %s", L, in->flags, op);
    if (info->attr == ISA_ATTR_NONE && (in->a || (in->b && imm < 0)))
        return vbad(v, "%s: %s takes no attributes, but a=%" PRIu32 " b=%" PRIu32, L, op, in->a, in->b);
    if (info->attr != ISA_ATTR_ENTER && info->attr != ISA_ATTR_CMP && info->attr != ISA_ATTR_CHAN && in->b && imm < 0)
        return vbad(v, "%s: %s has no attribute b, but b=%" PRIu32, L, op, in->b);
    if (in->op == ISA_NEXTITER && reg->kind != ISA_REGION_LOOP)
        return vbad(v, "%s: NEXTITER must be in a LOOP region, not %s region '%s'", L,
                    kind_name[reg->kind], reg->name);
    switch (info->attr) {
    case ISA_ATTR_NONE:
        break;
    case ISA_ATTR_INDEX: {
        if (reg->kind != ISA_REGION_ROOT)
            return vbad(v, "%s: %s must be in a ROOT region, not %s region '%s'", L, op,
                        kind_name[reg->kind], reg->name);
        uint32_t e = v->owner[in->region];
        const isa_entry *en = &p->entries[e];
        uint32_t n = in->op == ISA_ARG ? en->n_params : en->n_results;
        if (in->a >= n)
            return vbad(v, "%s: %s %" PRIu32 ", but entry '%s' has %" PRIu32 " %s%s", L, op, in->a,
                        en->name, n, in->op == ISA_ARG ? "parameter" : "result", n == 1 ? "" : "s");
        if (in->op == ISA_RESULT) {
            uint32_t *by = &v->res_by[v->res_base[e] + in->a];
            if (*by != ISA_NONE)
                return vbad(v, "%s: result %" PRIu32 " of entry '%s' is already produced by %s", L, in->a,
                            en->name, ilabel(v, *by, l2));
            *by = i;
        }
        break;
    }
    case ISA_ATTR_CONST:
        if (in->a >= p->n_consts)
            return vbad(v, "%s: constant %" PRIu32 " does not exist (%" PRIu32 " constant%s)", L, in->a,
                        p->n_consts, p->n_consts == 1 ? "" : "s");
        if (reg->kind != ISA_REGION_ROOT && in->n_ctl == 0)
            return vbad(v, "%s: a CONST in %s region '%s' needs a control input", L, kind_name[reg->kind],
                        reg->name);
        break;
    case ISA_ATTR_ENTER:
        if ((st = check_frame(v, i, op, in->a)))
            return st;
        if (in->region != p->regions[in->a].parent)
            return vbad(v, "%s: ENTER of frame '%s' must be in its parent region '%s', not in '%s'", L,
                        rname(v, in->a), rname(v, p->regions[in->a].parent), reg->name);
        if (in->b > ISA_MAX_PARALLEL)
            return vbad(v, "%s: parallel=%" PRIu32 " exceeds %d", L, in->b, ISA_MAX_PARALLEL);
        if (!(in->flags & ISA_FLAG_CONST))
            v->loop_enter[in->a] = 1;
        break;
    case ISA_ATTR_FRAME:
        if ((st = check_frame(v, i, op, in->a)))
            return st;
        if (in->region != in->a)
            return vbad(v, "%s: EXIT of frame '%s' must be in that loop region, not in '%s'", L,
                        rname(v, in->a), reg->name);
        break;
    case ISA_ATTR_SITE:
        if (in->a >= p->n_sites)
            return vbad(v, "%s: call site %" PRIu32 " does not exist (%" PRIu32 " site%s)", L, in->a,
                        p->n_sites, p->n_sites == 1 ? "" : "s");
        if (v->site_region[in->a] == ISA_NONE) {
            v->site_region[in->a] = in->region;
            v->site_first[in->a] = i;
        } else if (v->site_region[in->a] != in->region) {
            uint32_t f = v->site_first[in->a];
            return vbad(v, "%s: %s of site %s is in region '%s', but %s (%s of the same site) is in region '%s'",
                        L, op, slabel(v, in->a, sl, sizeof sl), reg->name, ilabel(v, f, l2),
                        isa_ops[p->insts[f].op].name, rname(v, p->insts[f].region));
        }
        if (in->op == ISA_CALL)
            v->site_call[in->a] = 1;
        break;
    case ISA_ATTR_DTYPE:
        if (!isa_dtype_valid(in->a))
            return vbad(v, "%s: CAST to bad dtype %" PRIu32, L, in->a);
        break;
    case ISA_ATTR_AXIS: {
        int32_t axis = (int32_t)in->a;
        if (axis < -ISA_MAX_AXIS || axis >= ISA_MAX_AXIS)
            return vbad(v, "%s: %s axis %" PRId32 " out of range -%d..%d", L, op, axis, ISA_MAX_AXIS,
                        ISA_MAX_AXIS - 1);
        break;
    }
    case ISA_ATTR_CMP:
        if (in->a >= ISA_OP_COUNT || isa_ops[in->a].cls != ISA_CLASS_COMPARE)
            return vbad(v, "%s: BRANCH needs a comparison opcode, not %" PRIu32, L, in->a);
        if (in->b >= p->n_consts)
            return vbad(v, "%s: BRANCH constant %" PRIu32 " does not exist (%" PRIu32 " constant%s)", L, in->b,
                        p->n_consts, p->n_consts == 1 ? "" : "s");
        if (p->consts[in->b].rank != 0)
            return vbad(v, "%s: BRANCH constant %" PRIu32 " is a tensor; it must be a scalar", L, in->b);
        break;
    case ISA_ATTR_OPTS:
        for (uint32_t bit = 1; bit; bit <<= 1)
            if ((in->a & bit) && !isa_opt_name((isa_op)in->op, bit))
                return vbad(v, "%s: %s has no option bit 0x%" PRIx32, L, op, bit);
        break;
    case ISA_ATTR_CHAN:
        if (in->a >= p->n_consts)
            return vbad(v, "%s: %s channel name: constant %" PRIu32 " does not exist (%" PRIu32 " constant%s)", L, op,
                        in->a, p->n_consts, p->n_consts == 1 ? "" : "s");
        if (!isa_chan_ok(&p->consts[in->a]))
            return vbad(v, "%s: %s channel name: constant %" PRIu32 " is not 1 to %d bytes (u8) of letters, digits "
                        "and _.:/-", L, op, in->a, ISA_MAX_CHAN);
        if (in->op == ISA_FETCH ? in->b != 0
                                : (in->b & ~(ISA_CHAN_TENSOR | 0xFFu | ~0u << ISA_CHAN_SHAPE_SHIFT)) ||
                                      !isa_dtype_valid(ISA_CHAN_DTYPE(in->b)) ||
                                      (ISA_CHAN_SHAPE(in->b) && !(in->b & ISA_CHAN_TENSOR)))
            return vbad(v, "%s: %s has a bad value type 0x%" PRIx32, L, op, in->b);
        if (ISA_CHAN_SHAPE(in->b) && (ISA_CHAN_SHAPE(in->b) > p->n_consts ||
                                      !isa_chan_shape_ok(&p->consts[ISA_CHAN_SHAPE(in->b) - 1])))
            return vbad(v, "%s: FEED shape: constant %" PRIu32 " is not a vector of at most %d i64 dimensions "
                        "(-1 or more)", L, ISA_CHAN_SHAPE(in->b) - 1, TFVM_MAX_RANK);
        break;
    }
    return TFVM_OK;
}

/* Where the tokens of instruction S land, and where those of D must come from. */
static uint32_t lands(const isa_program *p, const isa_inst *s)
{
    switch (s->op) {
    case ISA_ENTER: return s->a;
    case ISA_EXIT: return p->regions[s->region].parent;
    case ISA_CALL: return p->sites[s->a].callee;
    default: return s->region;
    }
}
static uint32_t from(const isa_program *p, const isa_inst *d)
{
    return d->op == ISA_RETURN ? p->sites[d->a].callee : d->region;
}

static tfvm_status edge_region_error(vf *v, uint32_t i, uint32_t d)
{
    const isa_program *p = v->p;
    const isa_inst *s = &p->insts[i], *dd = &p->insts[d];
    vf_label l, ld;
    char sl[160], dst[400];
    uint32_t A = lands(p, s), B = from(p, dd);
    if (dd->op == ISA_RETURN)
        snprintf(dst, sizeof dst, "%s, a RETURN of site %s, takes its input from region '%s'",
                 ilabel(v, d, ld), slabel(v, dd->a, sl, sizeof sl), rname(v, B));
    else
        snprintf(dst, sizeof dst, "%s is in region '%s'", ilabel(v, d, ld), rname(v, B));
    switch (s->op) {
    case ISA_ENTER:
        return vbad(v, "%s: ENTER delivers into its frame '%s', but %s", ilabel(v, i, l), rname(v, A), dst);
    case ISA_EXIT:
        return vbad(v, "%s: EXIT delivers into the loop's parent region '%s', but %s", ilabel(v, i, l),
                    rname(v, A), dst);
    case ISA_CALL:
        return vbad(v, "%s: CALL delivers into the callee region '%s', but %s", ilabel(v, i, l), rname(v, A),
                    dst);
    default:
        if (dd->op == ISA_RETURN)
            return vbad(v, "%s: edge to %s leaves region '%s', but a RETURN of site %s takes its input from "
                        "region '%s'", ilabel(v, i, l), ilabel(v, d, ld), rname(v, A),
                        slabel(v, dd->a, sl, sizeof sl), rname(v, B));
        return vbad(v, "%s: edge to %s leaves region '%s' for region '%s'", ilabel(v, i, l),
                    ilabel(v, d, ld), rname(v, A), rname(v, B));
    }
}

static bool edge_less(const isa_edge *a, const isa_edge *b)
{
    if (a->out != b->out)
        return a->out < b->out;
    if (a->inst != b->inst)
        return a->inst < b->inst;
    return a->port < b->port;
}

static tfvm_status check_edges(vf *v)
{
    const isa_program *p = v->p;
    vf_label l, ld;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < p->n_insts; i++) {
        const isa_inst *in = &p->insts[i];
        if (in->edge_first != sum)
            return vbad(v, "%s: edges start at %" PRIu32 ", expected %" PRIu64
                        " (right after the previous instruction's)", ilabel(v, i, l), in->edge_first, sum);
        if (in->n_edges > p->n_edges - sum)
            return vbad(v, "%s: its %" PRIu32 " edges run past the end of the edge table (%" PRIu32 " edges)",
                        ilabel(v, i, l), in->n_edges, p->n_edges);
        uint32_t A = lands(p, in), outs = isa_outs(in);
        for (uint32_t k = in->edge_first; k < in->edge_first + in->n_edges; k++) {
            const isa_edge *e = &p->edges[k];
            if (e->out >= outs)
                return vbad(v, "%s: edge %" PRIu32 ": output %" PRIu32 " does not exist (%s has %" PRIu32 ")",
                            ilabel(v, i, l), k, e->out, isa_ops[in->op].name, outs);
            if (e->inst >= p->n_insts)
                return vbad(v, "%s: edge %" PRIu32 ": destination instruction %" PRIu32 " does not exist",
                            ilabel(v, i, l), k, e->inst);
            const isa_inst *d = &p->insts[e->inst];
            if (e->port >= isa_ports(d))
                return vbad(v, "%s: edge %" PRIu32 ": %s has no input port %" PRIu32 " (it has %" PRIu32 ")",
                            ilabel(v, i, l), k, ilabel(v, e->inst, ld), e->port, isa_ports(d));
            if ((int64_t)e->port == isa_imm_port(d))
                return vbad(v, "%s: edge %" PRIu32 ": input %" PRIu32 " of %s is a constant operand", ilabel(v, i, l),
                            k, e->port, ilabel(v, e->inst, ld));
            if (k > in->edge_first && !edge_less(e - 1, e))
                return vbad(v, "%s: edge %" PRIu32 " (output %" PRIu32 " to instruction %" PRIu32 " port %" PRIu32
                            ") does not come after edge %" PRIu32 " (output %" PRIu32 " to instruction %" PRIu32
                            " port %" PRIu32 "); edges must be sorted and distinct", ilabel(v, i, l), k, e->out,
                            e->inst, e->port, k - 1, e[-1].out, e[-1].inst, e[-1].port);
            if (A != from(p, d))
                return edge_region_error(v, i, e->inst);
            v->indeg[e->inst]++;
        }
        sum += in->n_edges;
    }
    if (sum != p->n_edges)
        return vbad(v, "%" PRIu64 " of %" PRIu32 " edges belong to no instruction", p->n_edges - sum,
                    p->n_edges);
    return TFVM_OK;
}

/* Every input port has a producer. Instruction d may declare up to 131070
 * ports, so a flag per port could be far larger than the file; but with
 * indeg(d) edges at most indeg(d) ports are fed, so looking at the first
 * min(ports, indeg+1) ports of each instruction finds the first unfed one. */
static tfvm_status check_ports(vf *v)
{
    const isa_program *p = v->p;
    vf_label l;
    size_t *base = vf_calloc(v, (size_t)p->n_insts + 1, sizeof *base);
    if (!base)
        return vnomem(v);
    for (uint32_t d = 0; d < p->n_insts; d++) {
        uint32_t ports = isa_ports(&p->insts[d]);
        size_t cap = ports < (uint64_t)v->indeg[d] + 1 ? ports : (size_t)v->indeg[d] + 1;
        base[d + 1] = base[d] + cap;
    }
    uint8_t *fed = vf_calloc(v, base[p->n_insts], 1);
    if (!fed)
        return vnomem(v);
    for (uint32_t k = 0; k < p->n_edges; k++) {
        const isa_edge *e = &p->edges[k];
        if (e->port < base[e->inst + 1] - base[e->inst])
            fed[base[e->inst] + e->port] = 1;
    }
    for (uint32_t d = 0; d < p->n_insts; d++) {
        const isa_inst *in = &p->insts[d];
        for (size_t q = base[d]; q < base[d + 1]; q++) {
            uint32_t port = (uint32_t)(q - base[d]);
            if (fed[q] || (int64_t)port == isa_imm_port(in))
                continue;
            if (port < in->n_in)
                return vbad(v, "%s: input %" PRIu32 " has no producer", ilabel(v, d, l), port);
            return vbad(v, "%s: control input %" PRIu32 " (port %" PRIu32 ") has no producer", ilabel(v, d, l),
                        port - in->n_in, port);
        }
    }
    return TFVM_OK;
}

static tfvm_status check_totals(vf *v)
{
    const isa_program *p = v->p;
    char sl[160];
    for (uint32_t e = 0; e < p->n_entries; e++) {
        const isa_entry *en = &p->entries[e];
        for (uint32_t j = 0; j < en->n_results; j++)
            if (v->res_by[v->res_base[e] + j] == ISA_NONE)
                return vbad(v, "entry %" PRIu32 " '%s': result %" PRIu32 " '%s' has no RESULT instruction", e,
                            en->name, j, en->results[j].name);
    }
    for (uint32_t s = 0; s < p->n_sites; s++)
        if (!v->site_call[s])
            return vbad(v, "call site %" PRIu32 " (%s) has no CALL instruction", s, slabel(v, s, sl, sizeof sl));
    for (uint32_t r = 0; r < p->n_regions; r++)
        if (p->regions[r].kind == ISA_REGION_LOOP && !v->loop_enter[r])
            return vbad(v, "region %" PRIu32 " '%s': LOOP region has no non-const ENTER", r, rname(v, r));
    return TFVM_OK;
}

/* The variable table: each record names a source variable (as freely as a
 * parameter: models name tensors "x:0", "/m/Add_output_0") and an output
 * that exists; records strictly ascending by (inst, out, name), so each
 * binding is listed once and the table has one valid order. */
static tfvm_status check_vars(vf *v)
{
    const isa_program *p = v->p;
    vf_label l;
    char ctx[48];
    for (uint32_t j = 0; j < p->n_vars; j++) {
        const isa_var *x = &p->vars[j];
        snprintf(ctx, sizeof ctx, "variable %" PRIu32, j);
        tfvm_status st = vpname(v, x->name, ctx, "a variable name");
        if (st)
            return st;
        if (x->inst >= p->n_insts)
            return vbad(v, "variable %" PRIu32 " '%s': instruction %" PRIu32 " does not exist (%" PRIu32
                        " instructions)", j, x->name, x->inst, p->n_insts);
        if (x->out >= isa_outs(&p->insts[x->inst]))
            return vbad(v, "variable %" PRIu32 " '%s': %s has no output %" PRIu32 " (%s has %u)", j, x->name,
                        ilabel(v, x->inst, l), x->out, isa_ops[p->insts[x->inst].op].name,
                        isa_outs(&p->insts[x->inst]));
        const isa_var *y = j ? &p->vars[j - 1] : NULL;
        if (y && (y->inst > x->inst || (y->inst == x->inst && (y->out > x->out ||
                                                               (y->out == x->out && strcmp(y->name, x->name) >= 0)))))
            return vbad(v, "variable %" PRIu32 " '%s': out of order or repeated (after '%s' of %s, output %" PRIu32
                        ")", j, x->name, y->name, ilabel(v, y->inst, l), y->out);
    }
    return TFVM_OK;
}

tfvm_status ld_verify(const isa_program *p, tfvm_error *err)
{
    vf v = {.p = p, .err = err, .name = p->name ? p->name : "(program)"};
    size_t n_sort = p->n_regions;
    if (p->n_entries > n_sort)
        n_sort = p->n_entries;
    if (p->n_insts > n_sort)
        n_sort = p->n_insts;
    v.owner = vf_nones(&v, p->n_regions);
    v.loop_enter = vf_calloc(&v, p->n_regions, 1);
    v.site_region = vf_nones(&v, p->n_sites);
    v.site_first = vf_calloc(&v, p->n_sites, sizeof *v.site_first);
    v.site_call = vf_calloc(&v, p->n_sites, 1);
    v.indeg = vf_calloc(&v, p->n_insts, sizeof *v.indeg);
    v.sort_a = vf_calloc(&v, n_sort, sizeof *v.sort_a);
    v.sort_b = vf_calloc(&v, n_sort, sizeof *v.sort_b);
    tfvm_status st = TFVM_OK;
    if (!v.owner || !v.loop_enter || !v.site_region || !v.site_first || !v.site_call || !v.indeg ||
        !v.sort_a || !v.sort_b)
        st = vnomem(&v);
    if (!st)
        st = check_regions(&v);
    if (!st)
        st = check_entries(&v);
    if (!st)
        st = check_consts(&v);
    if (!st)
        st = check_sites(&v);
    if (!st)
        st = check_inst_names(&v);
    for (uint32_t i = 0; !st && i < p->n_insts; i++)
        st = check_inst(&v, i);
    if (!st)
        st = check_channels(&v);
    if (!st)
        st = check_edges(&v);
    if (!st)
        st = check_ports(&v);
    if (!st)
        st = check_totals(&v);
    if (!st)
        st = check_vars(&v);
    vf_release(&v);
    return st;
}
