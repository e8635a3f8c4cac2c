/* isa/shape.c — the shape rules of isa/shape.h: one function per kind of
 * op, one table by opcode. Each rule says what it can from what is known and
 * leaves the rest unknown; it reports a failure only when the known parts
 * prove one (what every run would hit), in the analyser's words. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "isa/isa.h"
#include "isa/shape.h"
#include "util/util.h"

typedef struct rule {
    const isa_shape *x; /* the operands */
    uint32_t n;
    uint32_t a;         /* the attribute */
    isa_shape *o;
    char *msg;
    size_t size;
} rule;

static tfvm_status fail(rule *c, const char *fmt, ...) UT_PRINTF(2, 3);
static tfvm_status fail(rule *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, c->size, fmt, ap);
    va_end(ap);
    return TFVM_ERR_SHAPE;
}

/* The op fails on these operands, and its kernel's message says how. */
static tfvm_status fails_silently(rule *c)
{
    if (c->size)
        c->msg[0] = '\0';
    return TFVM_ERR_SHAPE;
}

/* ---- Strings ------------------------------------------------------------------------------ */

const char *isa_dims_str(const isa_shape *s, char *buf, size_t size)
{
    if (s->rank < 0) {
        ut_fmt(buf, size, "[..]");
        return buf;
    }
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->rank && n + 24 < size; i++) {
        if (s->dims[i] < 0)
            n += (size_t)snprintf(buf + n, size - n, "%s?", i ? ", " : "[");
        else
            n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "[", (long long)s->dims[i]);
    }
    snprintf(buf + n, size - n, "%s", s->rank ? "]" : "[]");
    return buf;
}

const char *isa_shape_str(const isa_shape *s, char *buf, size_t size)
{
    const char *d = s->dtype ? tfvm_dtype_name((tfvm_dtype)s->dtype) : "?";
    if (s->rank == 0) {
        ut_fmt(buf, size, "%s", d);
        return buf;
    }
    if (s->rank < 0 && !s->dtype) {
        ut_fmt(buf, size, "?");
        return buf;
    }
    char dims[160];
    ut_fmt(buf, size, "%s%s", d, isa_dims_str(s, dims, sizeof dims));
    return buf;
}

typedef char sbuf[96];
static const char *str(const isa_shape *s, char *buf) { return isa_shape_str(s, buf, sizeof(sbuf)); }
static const char *dstr(const isa_shape *s, char *buf) { return isa_dims_str(s, buf, sizeof(sbuf)); }

/* ---- Helpers ------------------------------------------------------------------------------ */

/* The operand's values when every one is known (at most max), else -1. */
static int ints(const isa_shape *s, int64_t *out, int max)
{
    if (s->n_vals < 0 || s->n_vals > max)
        return -1;
    for (int k = 0; k < s->n_vals; k++) {
        if (s->syms && s->syms[k])
            return -1;
        out[k] = s->vals[k];
    }
    return s->n_vals;
}

/* Value k of a shape vector as a dim: known >= 0, a symbol, else unknown. */
static int64_t val_dim(const isa_shape *s, int k)
{
    if (s->syms && s->syms[k])
        return s->syms[k];
    return s->vals[k] >= 0 ? s->vals[k] : ISA_DIM_ANY;
}

static int64_t count_of(const isa_shape *s)
{
    if (s->rank < 0)
        return -1;
    int64_t n = 1;
    for (int k = 0; k < s->rank; k++) {
        if (s->dims[k] < 0 || (s->dims[k] && n > INT64_MAX / s->dims[k]))
            return -1;
        n *= s->dims[k];
    }
    return n;
}

static void unknown_dims(isa_shape *o, int rank)
{
    o->rank = (int8_t)rank;
    for (int k = 0; k < rank; k++)
        o->dims[k] = ISA_DIM_ANY;
}

static void same_shape(isa_shape *o, const isa_shape *x)
{
    o->rank = x->rank;
    memcpy(o->dims, x->dims, sizeof o->dims);
}

/* An axis attribute (two's complement in a) against rank r; -1 if out of range. */
static int axis_of(uint32_t a, int r)
{
    int ax = (int)(int32_t)a;
    if (ax < 0)
        ax += r;
    return ax >= 0 && ax < r ? ax : -1;
}

int64_t isa_dim_bcast(int64_t a, int64_t b)
{
    if (a == 1)
        return b;
    if (b == 1 || a == b)
        return a;
    if (a >= 0 && b < 0)
        return a;
    if (b >= 0 && a < 0)
        return b;
    return ISA_DIM_ANY;
}

bool isa_shape_bcast(const isa_shape *const *x, uint32_t n, isa_shape *o)
{
    int r = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (x[k]->rank < 0) {
            o->rank = -1;
            return true;
        }
        if (x[k]->rank > r)
            r = x[k]->rank;
    }
    o->rank = (int8_t)r;
    bool ok = true;
    for (int d = 0; d < r; d++) {
        int64_t e = 1;
        bool differ = false;
        for (uint32_t k = 0; k < n; k++) {
            int j = d - (r - x[k]->rank);
            int64_t v = j >= 0 ? x[k]->dims[j] : 1;
            differ = differ || (e >= 0 && v >= 0 && e != 1 && v != 1 && e != v);
            e = isa_dim_bcast(e, v);
        }
        o->dims[d] = differ ? ISA_DIM_ANY : e;
        ok = ok && !differ;
    }
    return ok;
}

/* ---- Elementwise -------------------------------------------------------------------------- */

static tfvm_status rule_elementwise(rule *c)
{
    const isa_shape *x[3] = {&c->x[0], c->n > 1 ? &c->x[1] : NULL, c->n > 2 ? &c->x[2] : NULL};
    if (isa_shape_bcast(x, c->n, c->o))
        return TFVM_OK;
    sbuf s[3];
    if (c->n == 2)
        return fail(c, "shapes %s and %s do not broadcast", dstr(x[0], s[0]), dstr(x[1], s[1]));
    return fail(c, "shapes %s, %s and %s do not broadcast", dstr(x[0], s[0]), dstr(x[1], s[1]), dstr(x[2], s[2]));
}

/* ---- Linear algebra and windows ----------------------------------------------------------- */

/* MATMUL's rule (and FUSED_MATMUL's product): batch + [M, N]. */
static tfvm_status matmul_shape(rule *c, const isa_shape *a, const isa_shape *b, isa_shape *o)
{
    if (a->rank < 0 || b->rank < 0) {
        o->rank = -1;
        return TFVM_OK;
    }
    sbuf s[2];
    if (a->rank == 0 || b->rank == 0)
        return fail(c, "operands need rank >= 1, got %s and %s", str(a, s[0]), str(b, s[1]));
    int ar = a->rank, br = b->rank;
    int64_t m = 1, ka, kb, n = 1;
    bool ta = (c->a & ISA_OPT_TRANS_A) && ar >= 2, tb = (c->a & ISA_OPT_TRANS_B) && br >= 2;
    if (ar == 1) {
        ka = a->dims[0];
    } else {
        m = ta ? a->dims[ar - 1] : a->dims[ar - 2];
        ka = ta ? a->dims[ar - 2] : a->dims[ar - 1];
    }
    if (br == 1) {
        kb = b->dims[0];
    } else {
        kb = tb ? b->dims[br - 1] : b->dims[br - 2];
        n = tb ? b->dims[br - 2] : b->dims[br - 1];
    }
    if (ka >= 0 && kb >= 0 && ka != kb)
        return fail(c, "inner dims differ: %s%s @ %s%s", str(a, s[0]), ta ? " (transposed)" : "", str(b, s[1]),
                    tb ? " (transposed)" : "");
    isa_shape ba = {.rank = (int8_t)(ar > 2 ? ar - 2 : 0)}, bb = {.rank = (int8_t)(br > 2 ? br - 2 : 0)};
    memcpy(ba.dims, a->dims, sizeof(int64_t) * (size_t)ba.rank);
    memcpy(bb.dims, b->dims, sizeof(int64_t) * (size_t)bb.rank);
    const isa_shape *xs[2] = {&ba, &bb};
    if (!isa_shape_bcast(xs, 2, o))
        return fail(c, "batch dims do not broadcast: %s and %s", str(a, s[0]), str(b, s[1]));
    if (ar >= 2)
        o->dims[o->rank++] = m;
    if (br >= 2)
        o->dims[o->rank++] = n;
    return TFVM_OK;
}

static tfvm_status rule_matmul(rule *c) { return matmul_shape(c, &c->x[0], &c->x[1], c->o); }

/* act(a @ b + bias): the product's shape, which the bias may not grow. */
static tfvm_status rule_fused_matmul(rule *c)
{
    tfvm_status st = matmul_shape(c, &c->x[0], &c->x[1], c->o);
    if (st != TFVM_OK)
        return st;
    const isa_shape *bias = &c->x[2], *o = c->o;
    isa_shape t = {.rank = -1};
    const isa_shape *xs[2] = {o, bias};
    bool ok = isa_shape_bcast(xs, 2, &t);
    bool grows = ok && t.rank >= 0 && o->rank >= 0 && t.rank != o->rank;
    for (int k = 0; ok && !grows && k < t.rank && o->rank >= 0; k++)
        grows = o->dims[k] >= 0 && t.dims[k] != o->dims[k];
    sbuf s[2];
    if (!ok || grows)
        return fail(c, "bias %s does not broadcast to the product %s", dstr(bias, s[0]), dstr(o, s[1]));
    return TFVM_OK;
}

/* CONV2D's rule (and FUSED_CONV2D's): [N, O, OH, OW]. */
static tfvm_status rule_conv2d(rule *c)
{
    const isa_shape *x = &c->x[0], *w = &c->x[1];
    isa_shape *o = c->o;
    sbuf s[2];
    if ((x->rank >= 0 && x->rank != 4) || (w->rank >= 0 && w->rank != 4))
        return fail(c, "x %s and w %s must both have rank 4", str(x, s[0]), str(w, s[1]));
    unknown_dims(o, 4);
    o->dims[0] = x->rank == 4 ? x->dims[0] : ISA_DIM_ANY;
    o->dims[1] = w->rank == 4 ? w->dims[0] : ISA_DIM_ANY;
    int64_t q[9];
    if (ints(&c->x[2], q, 9) != 9)
        return TFVM_OK;
    int64_t g = q[8];
    if (x->rank == 4 && w->rank == 4 && g >= 1 && x->dims[1] >= 0 && w->dims[1] >= 0 && x->dims[1] != g * w->dims[1])
        return fail(c, "x %s has %lld channels, w %s takes %lld (groups %lld)", str(x, s[0]), (long long)x->dims[1],
                    str(w, s[1]), (long long)(g * w->dims[1]), (long long)g);
    if (x->rank != 4 || w->rank != 4 || q[0] < 1 || q[1] < 1 || q[6] < 1 || q[7] < 1)
        return TFVM_OK;
    for (int k = 0; k < 2; k++) {
        int64_t h = x->dims[2 + k], kk = w->dims[2 + k];
        if (h < 0 || kk < 0)
            continue;
        int64_t span = q[6 + k] * (kk - 1) + 1, padded = h + q[2 + k] + q[4 + k];
        if (padded >= span)
            o->dims[2 + k] = (padded - span) / q[k] + 1;
    }
    return TFVM_OK;
}

/* A rank-4 shape's dims 1..3 rotated: [N, H, W, C] -> [N, C, H, W] when
 * to_first (channels last to first), else back */
static isa_shape rotate_channels(const isa_shape *s, bool to_first)
{
    isa_shape t = *s;
    for (int k = 1; s->rank == 4 && k < 4; k++)
        t.dims[k] = s->dims[to_first ? (k + 1) % 3 + 1 : k % 3 + 1];
    return t;
}

/* act(CONV2D(x, w, p) + bias[o]): a bias of one value per output channel;
 * x and the result channels last with nhwc_in and nhwc_out. */
static tfvm_status rule_fused_conv2d(rule *c)
{
    isa_shape xs[5];
    rule cc = *c;
    if (c->a & ISA_OPT_NHWC_IN && c->n >= 1 && c->n <= 5) {
        memcpy(xs, c->x, c->n * sizeof *xs);
        xs[0] = rotate_channels(&c->x[0], true);
        cc.x = xs;
    }
    tfvm_status st = rule_conv2d(&cc);
    if (st != TFVM_OK)
        return st;
    if (c->a & ISA_OPT_NHWC_OUT)
        *c->o = rotate_channels(c->o, false);
    const isa_shape *bias = &c->x[3];
    const int64_t oc = c->o->dims[c->a & ISA_OPT_NHWC_OUT ? 3 : 1];
    sbuf s[2];
    if (bias->rank >= 0 && (bias->rank != 1 || (bias->dims[0] >= 0 && oc >= 0 && bias->dims[0] != oc)))
        return fail(c, "bias must be [%lld] (the output channels of w %s), got %s", (long long)oc,
                    dstr(&c->x[1], s[0]), dstr(bias, s[1]));
    return TFVM_OK;
}

/* act(CONV2D(x, w, p) + bias[o] + r): r of the result's shape (where known). */
static tfvm_status rule_fused_conv2d_add(rule *c)
{
    tfvm_status st = rule_fused_conv2d(c);
    if (st != TFVM_OK)
        return st;
    const isa_shape *r = &c->x[4], *o = c->o;
    bool ok = r->rank < 0 || r->rank == 4;
    for (int k = 0; ok && r->rank == 4 && k < 4; k++)
        ok = r->dims[k] < 0 || o->dims[k] < 0 || r->dims[k] == o->dims[k];
    sbuf s[2];
    if (!ok)
        return fail(c, "r %s must have the result's shape %s", dstr(r, s[0]), dstr(o, s[1]));
    /* a dim (or symbol) r knows and the convolution's rule does not */
    for (int k = 0; r->rank == 4 && k < 4; k++)
        if (o->dims[k] == ISA_DIM_ANY)
            c->o->dims[k] = r->dims[k];
    return TFVM_OK;
}

/* MAXPOOL, AVGPOOL: p = [kh, kw, sh, sw, pt, pl, pb, pr] (+ [dh, dw, ceil, _]). */
static tfvm_status rule_pool(rule *c)
{
    const isa_shape *x = &c->x[0];
    isa_shape *o = c->o;
    sbuf s;
    if (x->rank >= 0 && x->rank != 4)
        return fail(c, "x %s must have rank 4", str(x, s));
    unknown_dims(o, 4);
    for (int k = 0; k < 2 && x->rank == 4; k++)
        o->dims[k] = x->dims[k];
    int64_t q[12];
    int n = ints(&c->x[1], q, 12);
    if (x->rank != 4 || (n != 8 && n != 12))
        return TFVM_OK;
    const bool ceil = n == 12 && q[10] == 1;
    for (int k = 0; k < 2; k++) {
        const int64_t h = x->dims[2 + k], dil = n == 12 ? q[8 + k] : 1, st = q[2 + k];
        if (h < 0 || q[k] < 1 || st < 1 || dil < 1 || q[4 + k] < 0 || q[6 + k] < 0 || (n == 12 && q[10] != 0 && !ceil))
            continue;
        const int64_t span = dil * (q[k] - 1) + 1, room = h + q[4 + k] + q[6 + k] - span;
        if (room < 0)
            continue;
        /* as the kernels count (conv.c pool_out): in ceil mode a last
         * window that would start in the end padding is dropped */
        int64_t out = (ceil ? (room + st - 1) / st : room / st) + 1;
        if (ceil && (out - 1) * st >= h + q[4 + k])
            out--;
        o->dims[2 + k] = out;
    }
    return TFVM_OK;
}

/* ---- Along axes --------------------------------------------------------------------------- */

static tfvm_status axis_out_of_range(rule *c, long long ax, const isa_shape *x)
{
    sbuf s;
    return fail(c, "axis %lld out of range for shape %s", ax, dstr(x, s));
}

/* SOFTMAX, LOG_SOFTMAX, LAYER_NORM, RMS_NORM: x's shape, along a valid axis. */
static tfvm_status rule_along_axis(rule *c)
{
    const isa_shape *x = &c->x[0];
    if (x->rank >= 0 && axis_of(c->a, x->rank) < 0)
        return axis_out_of_range(c, (int32_t)c->a, x);
    same_shape(c->o, x);
    return TFVM_OK;
}

/* CUMSUM, TRILU, LRN, BITCAST, SCATTER_ROWS: x's shape. */
static tfvm_status rule_same(rule *c)
{
    same_shape(c->o, &c->x[0]);
    return TFVM_OK;
}

/* The recurrent cells: the state's shape (the kernel checks the gates against it). */
static tfvm_status rule_cell(rule *c)
{
    same_shape(c->o, &c->x[2]);
    return TFVM_OK;
}

/* REDUCE_*: (x, axes) with keepdims; no axes reduce every one. */
static tfvm_status rule_reduce(rule *c)
{
    const isa_shape *x = &c->x[0];
    isa_shape *o = c->o;
    bool keep = c->a & ISA_OPT_KEEPDIMS;
    int64_t v[16];
    int nv = ints(&c->x[1], v, 16);
    if (nv == 0 && !keep) { /* every axis: a scalar, whatever x's rank */
        o->rank = 0;
        return TFVM_OK;
    }
    if (x->rank < 0 || nv < 0) {
        if (keep)
            unknown_dims(o, x->rank);
        return TFVM_OK;
    }
    bool red[TFVM_MAX_RANK] = {false};
    for (int k = 0; k < nv; k++) {
        int64_t ax = v[k] < 0 ? v[k] + x->rank : v[k];
        if (ax < 0 || ax >= x->rank)
            return axis_out_of_range(c, (long long)v[k], x);
        red[ax] = true;
    }
    o->rank = 0;
    for (int k = 0; k < x->rank; k++) {
        if (nv > 0 && !red[k])
            o->dims[o->rank++] = x->dims[k];
        else if (keep)
            o->dims[o->rank++] = 1;
    }
    return TFVM_OK;
}

/* ARGMAX, ARGMIN: x's dims without the axis. */
static tfvm_status rule_arg(rule *c)
{
    const isa_shape *x = &c->x[0];
    if (x->rank < 0)
        return TFVM_OK;
    int ax = axis_of(c->a, x->rank);
    if (ax < 0)
        return axis_out_of_range(c, (int32_t)c->a, x);
    c->o->rank = 0;
    for (int k = 0; k < x->rank; k++)
        if (k != ax)
            c->o->dims[c->o->rank++] = x->dims[k];
    return TFVM_OK;
}

static tfvm_status rule_concat(rule *c)
{
    const isa_shape *x = &c->x[0], *b = &c->x[1];
    isa_shape *o = c->o;
    sbuf s[2];
    int r = x->rank >= 0 ? x->rank : b->rank;
    if (r < 0)
        return TFVM_OK;
    if (x->rank >= 0 && b->rank >= 0 && x->rank != b->rank)
        return fail(c, "shapes %s and %s differ in rank", dstr(x, s[0]), dstr(b, s[1]));
    int ax = axis_of(c->a, r);
    if (ax < 0)
        return TFVM_OK;
    o->rank = (int8_t)r;
    for (int k = 0; k < r; k++) {
        int64_t da = x->rank >= 0 ? x->dims[k] : ISA_DIM_ANY, db = b->rank >= 0 ? b->dims[k] : ISA_DIM_ANY;
        if (k == ax)
            o->dims[k] = da >= 0 && db >= 0 ? da + db : ISA_DIM_ANY;
        else if (da >= 0 && db >= 0 && da != db)
            return fail(c, "shapes %s and %s differ outside axis %d", dstr(x, s[0]), dstr(b, s[1]), ax);
        else
            o->dims[k] = da >= 0 ? da : db >= 0 ? db : da == db ? da : ISA_DIM_ANY;
    }
    return TFVM_OK;
}

/* GATHER: x.dims[:axis] + idx.dims + x.dims[axis+1:] */
static tfvm_status rule_gather(rule *c)
{
    const isa_shape *x = &c->x[0], *idx = &c->x[1];
    if (x->rank < 0 || idx->rank < 0)
        return TFVM_OK;
    int ax = axis_of(c->a, x->rank);
    if (ax < 0 || x->rank - 1 + idx->rank > TFVM_MAX_RANK)
        return TFVM_OK;
    isa_shape *o = c->o;
    o->rank = 0;
    for (int k = 0; k < ax; k++)
        o->dims[o->rank++] = x->dims[k];
    for (int k = 0; k < idx->rank; k++)
        o->dims[o->rank++] = idx->dims[k];
    for (int k = ax + 1; k < x->rank; k++)
        o->dims[o->rank++] = x->dims[k];
    return TFVM_OK;
}

/* ---- Shapes ------------------------------------------------------------------------------- */

/* RESHAPE's -1 when symbols are about: x's known size over the others', when
 * the symbols on both sides cancel one for one (so [B, 6] into [B, -1, 2] is
 * [B, 3, 2], [B, S] into [-1] stays unknown). */
static int64_t infer_with_symbols(const isa_shape *x, const isa_shape *o, int infer)
{
    int64_t num = 1, den = 1, syms[TFVM_MAX_RANK];
    int ns = 0;
    for (int k = 0; k < x->rank; k++) {
        if (x->dims[k] >= 0) {
            if (__builtin_mul_overflow(num, x->dims[k], &num))
                return ISA_DIM_ANY;
        } else if (isa_dim_is_sym(x->dims[k]))
            syms[ns++] = x->dims[k];
        else
            return ISA_DIM_ANY;
    }
    for (int k = 0; k < o->rank; k++) {
        if (k == infer)
            continue;
        if (o->dims[k] >= 0) {
            if (__builtin_mul_overflow(den, o->dims[k], &den))
                return ISA_DIM_ANY;
            continue;
        }
        int j = 0;
        while (j < ns && syms[j] != o->dims[k])
            j++;
        if (!isa_dim_is_sym(o->dims[k]) || j == ns)
            return ISA_DIM_ANY;
        syms[j] = syms[--ns];
    }
    if (ns == 0 && den > 0 && num % den == 0)
        return num / den;
    if (ns == 1 && den == num)
        return syms[0];
    return ISA_DIM_ANY;
}

static tfvm_status rule_reshape(rule *c)
{
    const isa_shape *x = &c->x[0], *sh = &c->x[1];
    isa_shape *o = c->o;
    if (sh->n_vals < 0 || sh->n_vals > TFVM_MAX_RANK) {
        if (sh->rank == 1 && sh->dims[0] >= 0 && sh->dims[0] <= TFVM_MAX_RANK)
            unknown_dims(o, (int)sh->dims[0]);
        return TFVM_OK;
    }
    int nv = sh->n_vals;
    int64_t prod = 1;
    int infer = -1;
    bool bad = false, all_known = true, overflow = false;
    o->rank = (int8_t)nv;
    for (int k = 0; k < nv; k++) {
        if (sh->syms && sh->syms[k]) {
            o->dims[k] = sh->syms[k];
            all_known = false;
            continue;
        }
        int64_t v = sh->vals[k];
        o->dims[k] = v < -1 ? ISA_DIM_ANY : v;
        bad = bad || v < -1 || (v == -1 && infer >= 0);
        if (v == -1)
            infer = k;
        else if (v >= 0)
            overflow = overflow || __builtin_mul_overflow(prod, v, &prod);
    }
    if (bad)
        return fails_silently(c);
    int64_t n = count_of(x);
    sbuf s[2];
    /* products checked: a target of [3, 6148914691236517206] wraps to 2
     * elements, which an input of 2 would match */
    if (all_known && overflow && n >= 0 && infer < 0)
        return fail(c, "cannot reshape %s (%lld elements) into %s", dstr(x, s[0]), (long long)n, dstr(o, s[1]));
    if (all_known && overflow)
        return fails_silently(c);
    if (infer >= 0) {
        o->dims[infer] = ISA_DIM_ANY;
        if (all_known && n >= 0) {
            if (prod == 0 || n % prod)
                return fails_silently(c);
            o->dims[infer] = n / prod;
        } else if (x->rank >= 0) {
            o->dims[infer] = infer_with_symbols(x, o, infer);
        }
    } else if (all_known && n >= 0 && prod != n) {
        return fail(c, "cannot reshape %s (%lld elements) into %s", dstr(x, s[0]), (long long)n, dstr(o, s[1]));
    }
    return TFVM_OK;
}

static tfvm_status rule_transpose(rule *c)
{
    const isa_shape *x = &c->x[0];
    isa_shape *o = c->o;
    int64_t v[TFVM_MAX_RANK];
    int nv = ints(&c->x[1], v, TFVM_MAX_RANK);
    if (x->rank < 0 || nv < 0) {
        unknown_dims(o, nv >= 0 ? nv : x->rank);
        return TFVM_OK;
    }
    sbuf s;
    if (nv != x->rank)
        return fail(c, "perm of %d axes for shape %s", nv, dstr(x, s));
    bool seen[TFVM_MAX_RANK] = {false}, perm = true;
    o->rank = x->rank;
    for (int k = 0; k < nv; k++) {
        int64_t j = v[k] < 0 ? v[k] + x->rank : v[k];
        bool in = j >= 0 && j < x->rank;
        o->dims[k] = in ? x->dims[j] : ISA_DIM_ANY;
        perm = perm && in && !seen[j];
        if (in)
            seen[j] = true;
    }
    return perm ? TFVM_OK : fails_silently(c);
}

/* SHAPE: an i64 vector of x's rank (its value is the caller's: the dims). */
static tfvm_status rule_shape(rule *c)
{
    c->o->rank = 1;
    c->o->dims[0] = c->x[0].rank;
    return TFVM_OK;
}

/* WORKERS (x): a scalar. */
static tfvm_status rule_scalar(rule *c)
{
    c->o->rank = 0;
    return TFVM_OK;
}

/* FILL (shape, v): the shape vector's values. */
static tfvm_status rule_fill(rule *c)
{
    const isa_shape *sh = &c->x[0];
    if (sh->rank == 1 && sh->dims[0] >= 0 && sh->dims[0] <= TFVM_MAX_RANK) {
        unknown_dims(c->o, (int)sh->dims[0]);
        for (int k = 0; sh->n_vals == c->o->rank && k < c->o->rank; k++)
            c->o->dims[k] = val_dim(sh, k);
    }
    return TFVM_OK;
}

static tfvm_status rule_flatten(rule *c)
{
    const isa_shape *x = &c->x[0];
    unknown_dims(c->o, 2);
    if (x->rank < 0)
        return TFVM_OK;
    int ax = (int)(int32_t)c->a;
    if (ax < 0)
        ax += x->rank;
    if (ax < 0 || ax > x->rank)
        return axis_out_of_range(c, (int32_t)c->a, x);
    int64_t d[2] = {1, 1};
    for (int k = 0; k < x->rank; k++) {
        int64_t *p = &d[k >= ax];
        *p = (*p < 0 || x->dims[k] < 0) ? ISA_DIM_ANY : *p * x->dims[k];
    }
    c->o->dims[0] = d[0];
    c->o->dims[1] = d[1];
    return TFVM_OK;
}

static tfvm_status rule_unsqueeze(rule *c)
{
    const isa_shape *x = &c->x[0];
    int64_t v[TFVM_MAX_RANK];
    int nv = ints(&c->x[1], v, TFVM_MAX_RANK);
    if (x->rank < 0 || nv < 0 || x->rank + nv > TFVM_MAX_RANK)
        return TFVM_OK;
    int r = x->rank + nv, j = 0;
    bool ins[TFVM_MAX_RANK] = {false};
    for (int k = 0; k < nv; k++) {
        int64_t ax = v[k] < 0 ? v[k] + r : v[k];
        if (ax >= 0 && ax < r)
            ins[ax] = true;
    }
    c->o->rank = (int8_t)r;
    for (int k = 0; k < r; k++)
        c->o->dims[k] = ins[k] ? 1 : j < x->rank ? x->dims[j++] : ISA_DIM_ANY;
    return TFVM_OK;
}

static tfvm_status rule_squeeze(rule *c)
{
    const isa_shape *x = &c->x[0];
    int64_t v[TFVM_MAX_RANK];
    int nv = ints(&c->x[1], v, TFVM_MAX_RANK);
    if (x->rank < 0 || nv <= 0)
        return TFVM_OK;
    bool drop[TFVM_MAX_RANK] = {false};
    for (int k = 0; k < nv; k++) {
        int64_t ax = v[k] < 0 ? v[k] + x->rank : v[k];
        if (ax >= 0 && ax < x->rank)
            drop[ax] = true;
    }
    c->o->rank = 0;
    for (int k = 0; k < x->rank; k++)
        if (!drop[k])
            c->o->dims[c->o->rank++] = x->dims[k];
    return TFVM_OK;
}

/* EXPAND (x, shape): x broadcast with the target, both ways. */
static tfvm_status rule_expand(rule *c)
{
    const isa_shape *x = &c->x[0], *sh = &c->x[1];
    bool vals = sh->n_vals >= 0 && sh->n_vals <= TFVM_MAX_RANK;
    bool len = sh->rank == 1 && sh->dims[0] >= 0 && sh->dims[0] <= TFVM_MAX_RANK;
    if (x->rank < 0 || (!vals && !len))
        return TFVM_OK;
    isa_shape t = {.rank = (int8_t)(vals ? sh->n_vals : sh->dims[0])}; /* the target, its values if known */
    for (int k = 0; k < t.rank; k++)
        t.dims[k] = vals ? val_dim(sh, k) : ISA_DIM_ANY;
    const isa_shape *xs[2] = {x, &t};
    if (isa_shape_bcast(xs, 2, c->o))
        return TFVM_OK;
    sbuf s[2];
    return fail(c, "shapes %s and %s do not broadcast", dstr(x, s[0]), dstr(&t, s[1]));
}

static tfvm_status rule_tile(rule *c)
{
    const isa_shape *x = &c->x[0];
    int64_t v[TFVM_MAX_RANK];
    int nv = ints(&c->x[1], v, TFVM_MAX_RANK);
    if (x->rank < 0)
        return TFVM_OK;
    unknown_dims(c->o, x->rank); /* one repeat per axis, or the kernel fails */
    if (nv != x->rank)
        return TFVM_OK;
    for (int k = 0; k < nv; k++)
        c->o->dims[k] = x->dims[k] >= 0 && v[k] >= 0 ? x->dims[k] * v[k] : ISA_DIM_ANY;
    return TFVM_OK;
}

/* PAD (x, pads), PADV (x, pads, v): before and after each axis (negative
 * pads crop). */
static tfvm_status rule_pad(rule *c)
{
    const isa_shape *x = &c->x[0];
    int64_t v[16];
    int nv = ints(&c->x[1], v, 16);
    unknown_dims(c->o, x->rank);
    if (x->rank < 0 || nv != 2 * x->rank)
        return TFVM_OK;
    for (int k = 0; k < x->rank; k++) {
        int64_t d = x->dims[k] >= 0 ? x->dims[k] + v[k] + v[k + x->rank] : ISA_DIM_ANY;
        c->o->dims[k] = d >= 0 ? d : ISA_DIM_ANY; /* a negative size: the kernel says what is wrong */
    }
    return TFVM_OK;
}

/* GATHER_ELEMENTS (x, idx): idx's shape. */
static tfvm_status rule_gather_elements(rule *c)
{
    same_shape(c->o, &c->x[1]);
    return TFVM_OK;
}

/* TOPK (x, k, largest): x's dims, k of them along the axis. A bad axis or k
 * is the kernel's to report. */
static tfvm_status rule_topk(rule *c)
{
    const isa_shape *x = &c->x[0];
    int ax = x->rank >= 0 ? axis_of(c->a, x->rank) : -1;
    if (ax < 0)
        return TFVM_OK;
    same_shape(c->o, x);
    int64_t k;
    c->o->dims[ax] = ints(&c->x[1], &k, 1) == 1 && k >= 0 ? k : ISA_DIM_ANY;
    return TFVM_OK;
}

/* ONEHOT (indices, depth, [off, on]): indices' dims, depth inserted at the axis. */
static tfvm_status rule_onehot(rule *c)
{
    const isa_shape *ix = &c->x[0];
    if (ix->rank < 0 || ix->rank + 1 > TFVM_MAX_RANK)
        return TFVM_OK;
    int r = ix->rank + 1, ax = axis_of(c->a, r);
    if (ax < 0)
        return TFVM_OK;
    int64_t depth;
    bool known = ints(&c->x[1], &depth, 1) == 1 && depth >= 0;
    c->o->rank = (int8_t)r;
    for (int k = 0, j = 0; k < r; k++)
        c->o->dims[k] = k == ax ? (known ? depth : ISA_DIM_ANY) : ix->dims[j++];
    return TFVM_OK;
}

/* RESIZE (x, scales, sizes): x's rank; the sizes when given. */
static tfvm_status rule_resize(rule *c)
{
    const isa_shape *x = &c->x[0];
    if (x->rank < 0)
        return TFVM_OK;
    unknown_dims(c->o, x->rank);
    int64_t v[TFVM_MAX_RANK];
    if (ints(&c->x[2], v, TFVM_MAX_RANK) == x->rank)
        for (int k = 0; k < x->rank; k++)
            c->o->dims[k] = v[k] >= 0 ? v[k] : ISA_DIM_ANY;
    return TFVM_OK;
}

/* STACK_PUT (acc, i, v): a stack of rows like v (how many: acc's and i's). */
static tfvm_status rule_stack_put(rule *c)
{
    const isa_shape *v = &c->x[2];
    if (v->rank < 0 || v->rank + 1 > TFVM_MAX_RANK)
        return TFVM_OK;
    unknown_dims(c->o, v->rank + 1);
    memcpy(c->o->dims + 1, v->dims, sizeof(int64_t) * (size_t)v->rank);
    return TFVM_OK;
}

/* NumPy's slice bounds: negative from the end, clamped to [0, d]. */
static int64_t clamp_bound(int64_t v, int64_t d)
{
    if (v < 0)
        v += d;
    return v < 0 ? 0 : v > d ? d : v;
}

/* SLICE (x, starts, ends): per axis, NumPy's bounds. */
static tfvm_status rule_slice(rule *c)
{
    const isa_shape *x = &c->x[0];
    if (x->rank < 0)
        return TFVM_OK;
    unknown_dims(c->o, x->rank);
    int64_t s[TFVM_MAX_RANK], e[TFVM_MAX_RANK];
    if (ints(&c->x[1], s, TFVM_MAX_RANK) != x->rank || ints(&c->x[2], e, TFVM_MAX_RANK) != x->rank)
        return TFVM_OK;
    for (int k = 0; k < x->rank; k++) {
        int64_t d = x->dims[k];
        if (d < 0)
            continue;
        int64_t lo = clamp_bound(s[k], d), hi = clamp_bound(e[k], d);
        c->o->dims[k] = hi > lo ? hi - lo : 0;
    }
    return TFVM_OK;
}

/* STRIDED_SLICE: x's rank. */
static tfvm_status rule_strided_slice(rule *c)
{
    if (c->x[0].rank >= 0)
        unknown_dims(c->o, c->x[0].rank);
    return TFVM_OK;
}

/* DET: one value per matrix of the last two dims. */
static tfvm_status rule_det(rule *c)
{
    const isa_shape *x = &c->x[0];
    if (x->rank >= 2) {
        c->o->rank = (int8_t)(x->rank - 2);
        memcpy(c->o->dims, x->dims, sizeof(int64_t) * (size_t)c->o->rank);
    }
    return TFVM_OK;
}

/* RANGE: the count from known scalars (so that a huge range is never evaluated). */
static tfvm_status rule_range(rule *c)
{
    int64_t a0, a1, a2;
    unknown_dims(c->o, 1);
    if (ints(&c->x[0], &a0, 1) == 1 && ints(&c->x[1], &a1, 1) == 1 && ints(&c->x[2], &a2, 1) == 1 && a2 != 0) {
        int64_t n = a2 > 0 ? (a1 - a0 + a2 - 1) / a2 : (a0 - a1 - a2 - 1) / -a2;
        c->o->dims[0] = n > 0 ? n : 0;
    }
    return TFVM_OK;
}

/* ---- The table ---------------------------------------------------------------------------- */

typedef tfvm_status (*rule_fn)(rule *c);

static const rule_fn rules[ISA_OP_COUNT] = {
    [ISA_MATMUL] = rule_matmul,
    [ISA_FUSED_MATMUL] = rule_fused_matmul,
    [ISA_CONV2D] = rule_conv2d,
    [ISA_FUSED_CONV2D] = rule_fused_conv2d,
    [ISA_FUSED_CONV2D_ADD] = rule_fused_conv2d_add,
    [ISA_MAXPOOL] = rule_pool,
    [ISA_AVGPOOL] = rule_pool,
    [ISA_SOFTMAX] = rule_along_axis,
    [ISA_LOG_SOFTMAX] = rule_along_axis,
    [ISA_CUMSUM] = rule_same,
    [ISA_TRILU] = rule_same,
    [ISA_LRN] = rule_same,
    [ISA_BITCAST] = rule_same,
    [ISA_LSTM_CELL_C] = rule_cell,
    [ISA_LSTM_CELL_H] = rule_cell,
    [ISA_GRU_CELL] = rule_cell,
    [ISA_LSTM_STEP] = rule_cell,
    [ISA_GRU_STEP] = rule_cell,
    [ISA_REDUCE_SUM] = rule_reduce,
    [ISA_REDUCE_MEAN] = rule_reduce,
    [ISA_REDUCE_MAX] = rule_reduce,
    [ISA_REDUCE_MIN] = rule_reduce,
    [ISA_REDUCE_PROD] = rule_reduce,
    [ISA_ARGMAX] = rule_arg,
    [ISA_ARGMIN] = rule_arg,
    [ISA_RESHAPE] = rule_reshape,
    [ISA_TRANSPOSE] = rule_transpose,
    [ISA_CONCAT] = rule_concat,
    [ISA_SHAPE] = rule_shape,
    [ISA_WORKERS] = rule_scalar,
    [ISA_FILL] = rule_fill,
    [ISA_FLATTEN] = rule_flatten,
    [ISA_UNSQUEEZE] = rule_unsqueeze,
    [ISA_SQUEEZE] = rule_squeeze,
    [ISA_EXPAND] = rule_expand,
    [ISA_TILE] = rule_tile,
    [ISA_PAD] = rule_pad,
    [ISA_GATHER] = rule_gather,
    [ISA_SLICE] = rule_slice,
    [ISA_STRIDED_SLICE] = rule_strided_slice,
    [ISA_DET] = rule_det,
    [ISA_RANGE] = rule_range,
    [ISA_GATHER_ELEMENTS] = rule_gather_elements,
    [ISA_TOPK] = rule_topk,
    [ISA_ONEHOT] = rule_onehot,
    [ISA_RESIZE] = rule_resize,
    [ISA_PADV] = rule_pad,
    [ISA_STACK_PUT] = rule_stack_put,
    [ISA_SCATTER_ROWS] = rule_same,
    [ISA_LAYER_NORM] = rule_along_axis,
    [ISA_RMS_NORM] = rule_along_axis,
};

/* Elementwise ops (every compute class but TENSOR) broadcast their operands. */
static rule_fn rule_of(uint32_t op)
{
    if (op >= ISA_OP_COUNT)
        return NULL;
    isa_class cls = isa_ops[op].cls;
    if (isa_is_compute(cls) && cls != ISA_CLASS_TENSOR && cls != ISA_CLASS_HOST)
        return rule_elementwise;
    return rules[op];
}

bool isa_shape_has_rule(uint32_t op) { return rule_of(op) != NULL; }

tfvm_status isa_shape_rule(uint32_t op, uint32_t a, const isa_shape *in, uint32_t n_in, isa_shape *out, char *msg,
                           size_t size)
{
    *out = (isa_shape){.rank = -1, .n_vals = -1};
    if (size)
        msg[0] = '\0';
    rule_fn f = rule_of(op);
    if (!f || (isa_ops[op].n_in >= 0 && n_in < (uint32_t)isa_ops[op].n_in) || n_in == 0)
        return TFVM_OK;
    rule c = {.x = in, .n = n_in, .a = a, .o = out, .msg = msg, .size = size};
    return f(&c);
}

int isa_last_axes(const int64_t *axes, int n, int r)
{
    bool seen[TFVM_MAX_RANK] = {false};
    if (n < 1 || n > r || r > TFVM_MAX_RANK)
        return -1;
    for (int i = 0; i < n; i++) {
        const int64_t k = axes[i] < 0 ? axes[i] + r : axes[i];
        if (k < r - n || k >= r || seen[k])
            return -1;
        seen[k] = true;
    }
    return r - n;
}

bool isa_norm_param_fits(int pr, const int64_t *pd, int xr, const int64_t *xd, int axis, bool x_unknown_ok)
{
    int64_t count = 1;
    for (int i = 0; i < pr; i++) {
        if (pd[i] < 0)
            return false;
        count *= pd[i];
    }
    if (count == 1)
        return true;
    const int n = xr - axis;
    for (int i = 0; i < pr - n; i++)
        if (pd[i] != 1)
            return false;
    for (int i = 0; i < n; i++) {
        const int64_t p = pr - n + i >= 0 ? pd[pr - n + i] : 1, x = xd[axis + i];
        if (x < 0 ? !x_unknown_ok || p == 1 : p != x)
            return false;
    }
    return true;
}

bool isa_shape_grows(uint32_t op)
{
    switch (op) {
    case ISA_CONV2D:
    case ISA_FUSED_CONV2D:
    case ISA_FUSED_CONV2D_ADD:
    case ISA_FILL:
    case ISA_EXPAND:
    case ISA_TILE:
    case ISA_PAD:
    case ISA_RANGE:
    case ISA_PADV:
    case ISA_ONEHOT:
    case ISA_RESIZE:
    case ISA_RESIZE2:
    case ISA_STACK_PUT:
    case ISA_COL2IM:
    case ISA_AFFINE_GRID:
    case ISA_GRID_SAMPLE:
    case ISA_ROI_ALIGN:
    case ISA_DEFORM_CONV:
        return true;
    default:
        return false;
    }
}
