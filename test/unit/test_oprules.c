/* test/unit/test_oprules.c — the shape rules of isa/shape.h against the CPU
 * kernels: for every instruction of isa/ops.def with a rule, random operands
 * of every dtype the op admits (its `types`), and the rule's shape, from the
 * operands' shapes and integer values, must be the shape of the kernel's
 * result. One row per op (a generator of valid operands); a failure names
 * the op, the dtype and the operands. */
#include <stdio.h>
#include <string.h>

#include "devices/cpu/cpu.h"
#include "devices/tensor.h"
#include "devices/value.h"
#include "isa/isa.h"
#include "isa/shape.h"
#include "testutil.h"

#define ROUNDS 24 /* random cases per op and dtype */
#define MAX_OPS 5

static tu_alloc counts = {.countdown = -1};
static tfvm_allocator alloc = {tu_alloc_fn, &counts};

typedef struct gen {
    uint64_t rng;
    uint8_t dt;             /* the dtype under test */
    dev_value in[MAX_OPS];
    uint32_t n;
    uint32_t attr;
    int vmax;               /* values are 1 .. vmax */
} gen;

/* ---- Random operands ----------------------------------------------------------------------- */

static int rnd(gen *g, int lo, int hi) /* lo .. hi, both included */
{
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    return lo + (int)(g->rng % (uint64_t)(hi - lo + 1));
}

/* Element i of a tensor or scalar: small positive values (no division by
 * zero, no overflow, no out-of-range cast), 0 bits for the storage dtypes. */
static void put(uint8_t dt, void *p, int64_t i, int64_t v)
{
    switch (dt) {
    case TFVM_BOOL: ((uint8_t *)p)[i] = (uint8_t)(v & 1); break;
    case TFVM_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case TFVM_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case TFVM_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case TFVM_I64: ((int64_t *)p)[i] = v; break;
    case TFVM_F32: ((float *)p)[i] = (float)v; break;
    case TFVM_F64: ((double *)p)[i] = (double)v; break;
    default: memset((char *)p + i * (int64_t)tfvm_dtype_size((tfvm_dtype)dt), 0, tfvm_dtype_size((tfvm_dtype)dt));
    }
}

static void add(gen *g, dev_value v) { g->in[g->n++] = v; }

/* A tensor of dt (rank 0: a scalar) with values 1 .. 3. */
static void add_t(gen *g, uint8_t dt, int rank, const int64_t *dims)
{
    if (rank == 0) {
        dev_value v = {.dtype = dt};
        put(dt, &v.u, 0, rnd(g, 1, g->vmax));
        add(g, v);
        return;
    }
    tfvm_tensor *t = tfvm_tensor_new((tfvm_dtype)dt, rank, dims, &alloc);
    ck_assert_ptr_nonnull(t);
    for (int64_t i = 0; i < t->count; i++)
        put(dt, t->data, i, rnd(g, 1, g->vmax));
    add(g, (dev_value){.dtype = dt, .is_tensor = 1, .u.t = t});
}

static void add_x(gen *g, int rank, const int64_t *dims) { add_t(g, g->dt, rank, dims); }

static void add_i64s(gen *g, int n, const int64_t *v)
{
    int64_t d = n;
    tfvm_tensor *t = tfvm_tensor_new(TFVM_I64, 1, &d, &alloc);
    ck_assert_ptr_nonnull(t);
    for (int i = 0; i < n; i++)
        ((int64_t *)t->data)[i] = v[i];
    add(g, (dev_value){.dtype = TFVM_I64, .is_tensor = 1, .u.t = t});
}

static void add_scalar(gen *g, uint8_t dt, int64_t v)
{
    dev_value s = {.dtype = dt};
    put(dt, &s.u, 0, v);
    add(g, s);
}

/* A random shape: rank lo .. hi, dims dlo .. dhi; its rank. */
static int shape(gen *g, int lo, int hi, int dlo, int dhi, int64_t *dims)
{
    int r = rnd(g, lo, hi);
    for (int k = 0; k < r; k++)
        dims[k] = rnd(g, dlo, dhi);
    return r;
}

/* A shape that broadcasts to out (rank r): a suffix of it, some dims 1. */
static int bcast_of(gen *g, int r, const int64_t *out, int64_t *dims)
{
    int n = rnd(g, 0, r);
    for (int k = 0; k < n; k++)
        dims[k] = rnd(g, 0, 2) ? out[r - n + k] : 1;
    return n;
}

/* A random axis of rank r, negative half of the time. */
static int axis(gen *g, int r) { return rnd(g, 0, r - 1) - (rnd(g, 0, 1) ? r : 0); }

/* ---- Generators: valid operands per op --------------------------------------------------------- */

static void g_unary(gen *g, uint32_t op)
{
    int64_t d[4];
    add_x(g, shape(g, 0, 4, 0, 3, d), d);
    if (op == ISA_CAST) {
        static const uint8_t to[] = {TFVM_BOOL, TFVM_I32, TFVM_I64, TFVM_U8, TFVM_I8, TFVM_F32, TFVM_F64};
        g->attr = to[rnd(g, 0, 6)];
    }
}

static void g_binary(gen *g, uint32_t op)
{
    int64_t o[4], a[4], b[4];
    int r = shape(g, 0, 4, 0, 3, o);
    int ra = bcast_of(g, r, o, a), rb = bcast_of(g, r, o, b);
    g->vmax = op == ISA_SUB_OV ? 1 : 3; /* 1 - 3 overflows u8 */
    if (op == ISA_SELECT) {
        int64_t c[4];
        add_t(g, TFVM_BOOL, bcast_of(g, r, o, c), c);
    }
    add_x(g, ra, a);
    add_x(g, rb, b);
}

/* MATMUL's operands (batch dims broadcast, rank 1 on either side); the
 * product's shape into prod, its rank returned. */
static int matmul_operands(gen *g, int64_t *prod)
{
    int64_t bo[2], da[4], db[4];
    int nb = rnd(g, 0, 2);
    for (int k = 0; k < nb; k++)
        bo[k] = rnd(g, 1, 3);
    int64_t m = rnd(g, 1, 3), kk = rnd(g, 1, 3), n = rnd(g, 1, 3);
    bool ta = rnd(g, 0, 1), tb = rnd(g, 0, 1);
    bool va = rnd(g, 0, 3) == 0, vb = rnd(g, 0, 3) == 0; /* rank 1 */
    int na = va ? 0 : bcast_of(g, nb, bo, da), nbb = vb ? 0 : bcast_of(g, nb, bo, db), ra = na, rb = nbb;
    if (va) {
        da[ra++] = kk;
    } else {
        da[ra++] = ta ? kk : m;
        da[ra++] = ta ? m : kk;
    }
    if (vb) {
        db[rb++] = kk;
    } else {
        db[rb++] = tb ? n : kk;
        db[rb++] = tb ? kk : n;
    }
    g->attr = (ta ? ISA_OPT_TRANS_A : 0) | (tb ? ISA_OPT_TRANS_B : 0);
    int rp = na > nbb ? na : nbb;
    for (int k = 0; k < rp; k++) {
        int ia = k - (rp - na), ib = k - (rp - nbb);
        int64_t x = ia >= 0 ? da[ia] : 1, y = ib >= 0 ? db[ib] : 1;
        prod[k] = x == 1 ? y : x;
    }
    add_x(g, ra, da);
    add_x(g, rb, db);
    if (!va)
        prod[rp++] = m;
    if (!vb)
        prod[rp++] = n;
    return rp;
}

static void g_matmul(gen *g, uint32_t op)
{
    int64_t prod[4], bias[4];
    int rp = matmul_operands(g, prod);
    if (op == ISA_FUSED_MATMUL)
        add_x(g, bcast_of(g, rp, prod, bias), bias);
}

static void g_conv(gen *g, uint32_t op)
{
    int64_t grp = rnd(g, 1, 2), c = rnd(g, 1, 2), o = grp * rnd(g, 1, 2), p[9], x[4], w[4];
    for (int k = 0; k < 2; k++) {
        int64_t kk = rnd(g, 1, 3), dil = rnd(g, 1, 2);
        p[k] = rnd(g, 1, 3);
        p[2 + k] = rnd(g, 0, 1);
        p[4 + k] = rnd(g, 0, 1);
        p[6 + k] = dil;
        w[2 + k] = kk;
        x[2 + k] = dil * (kk - 1) + 1 + rnd(g, 0, 3);
    }
    p[8] = grp;
    x[0] = rnd(g, 1, 2);
    x[1] = c * grp;
    w[0] = o;
    w[1] = c;
    add_x(g, 4, x);
    add_x(g, 4, w);
    add_i64s(g, 9, p);
    if (op == ISA_FUSED_CONV2D || op == ISA_FUSED_CONV2D_ADD)
        add_x(g, 1, &o);
    if (op == ISA_FUSED_CONV2D_ADD) { /* r: the result's shape */
        int64_t r[4] = {x[0], o, 0, 0};
        for (int k = 0; k < 2; k++)
            r[2 + k] = (x[2 + k] + p[2 + k] + p[4 + k] - (p[6 + k] * (w[2 + k] - 1) + 1)) / p[k] + 1;
        add_x(g, 4, r);
    }
}

static void g_pool(gen *g, uint32_t op)
{
    (void)op;
    int64_t p[12] = {0}, x[4] = {rnd(g, 1, 2), rnd(g, 1, 2), 0, 0};
    bool twelve = rnd(g, 0, 1);
    for (int k = 0; k < 2; k++) {
        int64_t kk = rnd(g, 1, 3), dil = twelve ? rnd(g, 1, 2) : 1, span = dil * (kk - 1) + 1;
        p[k] = kk;
        p[2 + k] = rnd(g, 1, 3);
        p[4 + k] = rnd(g, 0, (int)span - 1);
        p[6 + k] = rnd(g, 0, (int)span - 1);
        p[8 + k] = dil;
        x[2 + k] = span + rnd(g, 0, 3);
    }
    if (twelve) { /* ceil mode (a last window in the end padding dropped) and count_include_pad */
        p[10] = rnd(g, 0, 1);
        p[11] = rnd(g, 0, 1);
    }
    add_x(g, 4, x);
    add_i64s(g, twelve ? 12 : 8, p);
}

/* x (dims >= 1: ARGMAX has something to pick) and an axis attribute */
static void g_axis(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4];
    int r = shape(g, 1, 4, 1, 3, d);
    add_x(g, r, d);
    g->attr = (uint32_t)axis(g, r);
}

/* LAYER_NORM and RMS_NORM: x, an axis, scale of x's dims from it on (or
 * one element), LAYER_NORM's bias likewise, eps */
static void g_layer_norm(gen *g, uint32_t op)
{
    int64_t d[4];
    int r = shape(g, 1, 4, 1, 3, d);
    add_x(g, r, d);
    const int a = axis(g, r), from = a < 0 ? a + r : a;
    g->attr = (uint32_t)a;
    for (int k = 0; k < (op == ISA_LAYER_NORM ? 2 : 1); k++) {
        if (rnd(g, 0, 2))
            add_x(g, r - from, d + from);
        else
            add_x(g, 0, d);
    }
    add_x(g, 0, d);
}

static void g_cumsum(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4];
    int r = shape(g, 1, 3, 0, 3, d);
    add_x(g, r, d);
    add_scalar(g, TFVM_I64, axis(g, r));
    g->attr = (uint32_t)rnd(g, 0, 3);
}

static void g_trilu(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4];
    add_x(g, shape(g, 2, 4, 0, 3, d), d);
    add_scalar(g, TFVM_I64, rnd(g, -3, 3));
    g->attr = (uint32_t)rnd(g, 0, 1);
}

static void g_lrn(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4];
    add_x(g, shape(g, 3, 4, 1, 3, d), d);
    int64_t four = 4;
    tfvm_tensor *p = tfvm_tensor_new(TFVM_F32, 1, &four, &alloc);
    ck_assert_ptr_nonnull(p);
    const float v[4] = {(float)(2 * rnd(g, 0, 2) + 1), 0.0001f, 0.75f, 1};
    memcpy(p->data, v, sizeof v);
    add(g, (dev_value){.dtype = TFVM_F32, .is_tensor = 1, .u.t = p});
}

static void g_bitcast(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4];
    add_x(g, shape(g, 0, 3, 0, 3, d), d);
    /* not to bool: it takes bytes 0 and 1 only */
    static const uint8_t by_size[9][3] = {[1] = {TFVM_U8, TFVM_I8, TFVM_U8}, [4] = {TFVM_I32, TFVM_F32, TFVM_I32},
                                          [8] = {TFVM_I64, TFVM_F64, TFVM_I64}};
    g->attr = by_size[tfvm_dtype_size((tfvm_dtype)g->dt)][rnd(g, 0, 2)];
}

static void g_cell(gen *g, uint32_t op)
{
    int64_t b = rnd(g, 1, 3), h = rnd(g, 1, 3), gates[2] = {b, (op == ISA_GRU_CELL ? 3 : 4) * h}, st[2] = {b, h};
    add_x(g, 2, gates);
    add_x(g, 2, gates);
    add_x(g, 2, st);
}

/* LSTM_STEP and GRU_STEP: (xw [T, B, G*H], the step t < T, the state (LSTM's
 * [2, B, H], GRU's [B, H]), r [G*H, H], rb [G*H]) */
static void g_step(gen *g, uint32_t op)
{
    const int64_t G = op == ISA_GRU_STEP ? 3 : 4, T = rnd(g, 1, 3), b = rnd(g, 1, 3), h = rnd(g, 1, 3);
    const int64_t xw[3] = {T, b, G * h}, st[3] = {2, b, h}, r[2] = {G * h, h}, rb[1] = {G * h};
    add_x(g, 3, xw);
    add_scalar(g, TFVM_I64, rnd(g, 0, (int)T - 1));
    if (op == ISA_LSTM_STEP)
        add_x(g, 3, st);
    else
        add_x(g, 2, st + 1);
    add_x(g, 2, r);
    add_x(g, 1, rb);
}

static void g_reduce(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4], axes[4];
    int r = shape(g, 0, 4, 1, 3, d), n = 0;
    add_x(g, r, d);
    for (int k = 0; k < r; k++)
        if (rnd(g, 0, 1))
            axes[n++] = k - (rnd(g, 0, 1) ? r : 0);
    add_i64s(g, n, axes);
    g->attr = rnd(g, 0, 1) ? ISA_OPT_KEEPDIMS : 0;
}

static void g_reshape(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4], t[4];
    int r = shape(g, 0, 4, 1, 3, d), n = 0;
    add_x(g, r, d);
    for (int k = 0; k < r; k++) /* x's dims, adjacent ones merged at random */
        if (n && rnd(g, 0, 2) == 0)
            t[n - 1] *= d[k];
        else
            t[n++] = d[k];
    if (n && rnd(g, 0, 1))
        t[rnd(g, 0, n - 1)] = -1;
    add_i64s(g, n, t);
}

static void g_transpose(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4], perm[4];
    int r = shape(g, 0, 4, 0, 3, d);
    add_x(g, r, d);
    for (int k = 0; k < r; k++)
        perm[k] = k;
    for (int k = r - 1; k > 0; k--) {
        int j = rnd(g, 0, k);
        int64_t s = perm[k];
        perm[k] = perm[j];
        perm[j] = s;
    }
    add_i64s(g, r, perm);
}

static void g_concat(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4];
    int r = shape(g, 1, 4, 0, 3, d);
    int ax = axis(g, r);
    add_x(g, r, d);
    d[ax < 0 ? ax + r : ax] = rnd(g, 0, 3);
    add_x(g, r, d);
    g->attr = (uint32_t)ax;
}

static void g_shape(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4];
    add_x(g, shape(g, 0, 4, 0, 3, d), d);
}

static void g_fill(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4];
    int r = shape(g, 0, 3, 0, 3, d);
    add_i64s(g, r, d);
    add_scalar(g, g->dt, 1);
}

static void g_flatten(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4];
    int r = shape(g, 0, 4, 0, 3, d);
    add_x(g, r, d);
    g->attr = (uint32_t)(rnd(g, 0, r) - (r && rnd(g, 0, 1) ? r : 0));
}

static void g_unsqueeze(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4], axes[2];
    int r = shape(g, 0, 3, 0, 3, d), n = rnd(g, 1, 2), out = r + n;
    add_x(g, r, d);
    axes[0] = rnd(g, 0, out - 1);
    if (n == 2)
        axes[1] = (axes[0] + rnd(g, 1, out - 1)) % out; /* another one */
    for (int k = 0; k < n; k++)
        axes[k] -= rnd(g, 0, 1) ? out : 0;
    add_i64s(g, n, axes);
}

static void g_squeeze(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4], axes[4];
    int r = shape(g, 0, 4, 1, 3, d), n = 0;
    for (int k = 0; k < r; k++)
        if (rnd(g, 0, 1))
            d[k] = 1;
    add_x(g, r, d);
    for (int k = 0; k < r; k++)
        if (d[k] == 1 && rnd(g, 0, 1))
            axes[n++] = k - (rnd(g, 0, 1) ? r : 0);
    add_i64s(g, n, axes);
}

static void g_expand(gen *g, uint32_t op)
{
    (void)op;
    int64_t o[4], x[4], t[4];
    int r = shape(g, 0, 4, 0, 3, o);
    int rx = bcast_of(g, r, o, x), rt = bcast_of(g, r, o, t);
    add_x(g, rx, x);
    add_i64s(g, rt, t);
}

/* x, and a vector of `per` values per axis: TILE's repeats (1, 0 .. 3),
 * PAD's befores and afters (2, 0 .. 2), PADV's (2, -1 .. 2: crops too, and
 * the value). */
static void g_per_axis(gen *g, uint32_t op)
{
    bool pad = op == ISA_PAD || op == ISA_PADV;
    int per = pad ? 2 : 1, max = pad ? 2 : 3;
    int64_t d[4], v[8];
    int r = shape(g, 0, 4, op == ISA_PADV ? 1 : 0, 3, d);
    add_x(g, r, d);
    for (int k = 0; k < per * r; k++)
        v[k] = rnd(g, op == ISA_PADV ? -1 : 0, max);
    for (int k = 0; pad && k < r; k++)
        if (d[k] + v[k] + v[k + r] < 0)
            v[k + r] = 0; /* no more cropped than the axis holds */
    add_i64s(g, per * r, v);
    if (op == ISA_PADV)
        add_scalar(g, g->dt, 1);
}

/* GATHER_ELEMENTS: idx of x's rank, no larger off the axis, values in range. */
static void g_gather_elements(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4], di[4];
    int r = shape(g, 1, 3, 1, 3, d), ax = axis(g, r), a = ax < 0 ? ax + r : ax;
    for (int k = 0; k < r; k++)
        di[k] = k == a ? rnd(g, 0, 3) : rnd(g, 1, (int)d[k]);
    add_x(g, r, d);
    add_t(g, TFVM_I64, r, di);
    tfvm_tensor *t = g->in[1].u.t;
    for (int64_t i = 0; i < t->count; i++)
        ((int64_t *)t->data)[i] = rnd(g, (int)-d[a], (int)d[a] - 1);
    g->attr = (uint32_t)ax;
}

static void g_topk(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4];
    int r = shape(g, 1, 3, 0, 3, d), ax = axis(g, r);
    add_x(g, r, d);
    add_scalar(g, TFVM_I64, rnd(g, 0, (int)d[ax < 0 ? ax + r : ax]));
    add_scalar(g, TFVM_BOOL, rnd(g, 0, 1));
    g->attr = (uint32_t)ax;
}

static void g_onehot(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4], two = 2;
    int r = shape(g, 0, 3, 0, 3, d);
    add_x(g, r, d);
    add_scalar(g, TFVM_I64, rnd(g, 0, 3));
    add_t(g, g->dt, 1, &two);
    g->attr = (uint32_t)(rnd(g, 0, r) - (rnd(g, 0, 1) ? r + 1 : 0));
}

/* RESIZE by sizes (nearest: any dtype). */
static void g_resize(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4], sz[4], none = 0;
    int r = shape(g, 1, 3, 1, 3, d);
    for (int k = 0; k < r; k++)
        sz[k] = rnd(g, 1, 4);
    add_x(g, r, d);
    add_t(g, TFVM_F32, 1, &none);
    add_i64s(g, r, sz);
}

/* STACK_PUT: a row into a fresh stack or one of rows like it. */
static void g_stack_put(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4], a[4], none = 0;
    int r = shape(g, 0, 2, 0, 3, d);
    a[0] = rnd(g, 0, 2);
    memcpy(a + 1, d, sizeof(int64_t) * (size_t)r);
    if (a[0] == 0)
        add_t(g, g->dt, 1, &none);
    else
        add_x(g, r + 1, a);
    add_scalar(g, TFVM_I64, rnd(g, 0, 3));
    add_x(g, r, d);
}

/* SCATTER_ROWS: x with rows, 0-3 in-range row numbers, as many rows like x's */
static void g_scatter_rows(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4], v[4], n = rnd(g, 0, 3), ix[3];
    int r = shape(g, 1, 3, 1, 3, d);
    add_x(g, r, d);
    for (int64_t j = 0; j < n; j++)
        ix[j] = rnd(g, 0, (int)d[0] - 1);
    add_i64s(g, (int)n, ix);
    memcpy(v, d, sizeof(int64_t) * (size_t)r);
    v[0] = n;
    add_x(g, r, v);
}

static void g_gather(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4], di[2];
    int r = shape(g, 1, 3, 1, 3, d), ri = shape(g, 0, 2, 0, 3, di), ax = axis(g, r);
    add_x(g, r, d);
    uint8_t it = rnd(g, 0, 1) ? TFVM_I64 : TFVM_I32;
    add_t(g, it, ri, di);
    int64_t size = d[ax < 0 ? ax + r : ax];
    dev_value *v = &g->in[1]; /* indices in range, negative ones too */
    int64_t cnt = v->is_tensor ? v->u.t->count : 1;
    for (int64_t i = 0; i < cnt; i++)
        put(it, v->is_tensor ? v->u.t->data : (void *)&v->u, i, rnd(g, (int)-size, (int)size - 1));
    g->attr = (uint32_t)ax;
}

static void g_slice(gen *g, uint32_t op)
{
    int64_t d[4], s[4], e[4], axes[4], steps[4];
    int r = shape(g, 1, 4, 0, 4, d);
    add_x(g, r, d);
    for (int k = 0; k < r; k++) {
        s[k] = rnd(g, -(int)d[k] - 2, (int)d[k] + 2);
        e[k] = rnd(g, -(int)d[k] - 2, (int)d[k] + 2);
        axes[k] = k;
        steps[k] = rnd(g, 1, 2) * (rnd(g, 0, 1) ? 1 : -1);
    }
    add_i64s(g, r, s);
    add_i64s(g, r, e);
    if (op == ISA_STRIDED_SLICE) {
        add_i64s(g, r, axes);
        add_i64s(g, r, steps);
    }
}

static void g_det(gen *g, uint32_t op)
{
    (void)op;
    int64_t d[4];
    int r = shape(g, 0, 2, 1, 2, d);
    d[r] = d[r + 1] = rnd(g, 1, 3);
    add_x(g, r + 2, d);
}

static void g_range(gen *g, uint32_t op)
{
    (void)op;
    int64_t delta = rnd(g, 1, 3) * (rnd(g, 0, 1) ? 1 : -1);
    add_scalar(g, g->dt, rnd(g, -5, 5));
    add_scalar(g, g->dt, rnd(g, -5, 5));
    add_scalar(g, g->dt, delta);
}

/* ---- The table ----------------------------------------------------------------------------- */

enum { EXACT = 0, PARTIAL = 1, PARTIAL_FLOAT = 2 }; /* whether every dim must be known */

typedef struct row {
    uint32_t op;
    void (*gen)(gen *g, uint32_t op);
    int known;
} row;

static const row rows[] = {
    {ISA_MATMUL, g_matmul, EXACT},          {ISA_FUSED_MATMUL, g_matmul, EXACT},
    {ISA_CONV2D, g_conv, EXACT},            {ISA_FUSED_CONV2D, g_conv, EXACT},
    {ISA_FUSED_CONV2D_ADD, g_conv, EXACT},
    {ISA_MAXPOOL, g_pool, EXACT},           {ISA_AVGPOOL, g_pool, EXACT},
    {ISA_SOFTMAX, g_axis, EXACT},           {ISA_LOG_SOFTMAX, g_axis, EXACT},
    {ISA_CUMSUM, g_cumsum, EXACT},          {ISA_TRILU, g_trilu, EXACT},
    {ISA_LRN, g_lrn, EXACT},                {ISA_BITCAST, g_bitcast, EXACT},
    {ISA_LSTM_CELL_C, g_cell, EXACT},       {ISA_LSTM_CELL_H, g_cell, EXACT},
    {ISA_GRU_CELL, g_cell, EXACT},          {ISA_LSTM_STEP, g_step, EXACT},
    {ISA_GRU_STEP, g_step, EXACT},          {ISA_REDUCE_SUM, g_reduce, EXACT},
    {ISA_REDUCE_MEAN, g_reduce, EXACT},     {ISA_REDUCE_MAX, g_reduce, EXACT},
    {ISA_REDUCE_MIN, g_reduce, EXACT},      {ISA_REDUCE_PROD, g_reduce, EXACT},
    {ISA_ARGMAX, g_axis, EXACT},            {ISA_ARGMIN, g_axis, EXACT},
    {ISA_RESHAPE, g_reshape, EXACT},        {ISA_TRANSPOSE, g_transpose, EXACT},
    {ISA_CONCAT, g_concat, EXACT},          {ISA_SHAPE, g_shape, EXACT},
    {ISA_WORKERS, g_shape, EXACT},
    {ISA_FILL, g_fill, EXACT},              {ISA_FLATTEN, g_flatten, EXACT},
    {ISA_UNSQUEEZE, g_unsqueeze, EXACT},    {ISA_SQUEEZE, g_squeeze, PARTIAL},
    {ISA_EXPAND, g_expand, EXACT},          {ISA_TILE, g_per_axis, EXACT},
    {ISA_PAD, g_per_axis, EXACT},                {ISA_GATHER, g_gather, EXACT},
    {ISA_SLICE, g_slice, EXACT},            {ISA_STRIDED_SLICE, g_slice, PARTIAL},
    {ISA_DET, g_det, EXACT},                {ISA_RANGE, g_range, PARTIAL_FLOAT},
    {ISA_GATHER_ELEMENTS, g_gather_elements, EXACT}, {ISA_TOPK, g_topk, EXACT},
    {ISA_ONEHOT, g_onehot, EXACT},          {ISA_RESIZE, g_resize, EXACT},
    {ISA_PADV, g_per_axis, EXACT},          {ISA_STACK_PUT, g_stack_put, PARTIAL},
    {ISA_SCATTER_ROWS, g_scatter_rows, EXACT},   {ISA_LAYER_NORM, g_layer_norm, EXACT},
    {ISA_RMS_NORM, g_layer_norm, EXACT},
};

/* The elementwise classes share one generator each. */
static row row_of(uint32_t op)
{
    switch (isa_ops[op].cls) {
    case ISA_CLASS_UNARY: return (row){op, g_unary, EXACT};
    case ISA_CLASS_BINARY:
    case ISA_CLASS_COMPARE:
    case ISA_CLASS_SELECT: return (row){op, g_binary, EXACT};
    case ISA_CLASS_LOGIC: return (row){op, isa_ops[op].n_in == 1 ? g_unary : g_binary, EXACT};
    default: break;
    }
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++)
        if (rows[k].op == op)
            return rows[k];
    return (row){op, NULL, EXACT};
}

/* ---- The check ----------------------------------------------------------------------------- */

static isa_shape shape_of(const dev_value *v, int64_t *vals)
{
    isa_shape s = {.dtype = v->dtype, .n_vals = -1, .vals = vals};
    if (!v->is_tensor) {
        if (isa_dtype_int(v->dtype)) {
            s.n_vals = 1;
            vals[0] = v->dtype == TFVM_I64 ? v->u.i64 : v->dtype == TFVM_I32 ? v->u.i32 : v->dtype == TFVM_U8 ? v->u.u8 : v->u.i8;
        }
        return s;
    }
    const tfvm_tensor *t = v->u.t;
    s.rank = (int8_t)t->rank;
    memcpy(s.dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    if ((t->dtype == TFVM_I64 || t->dtype == TFVM_I32) && t->rank == 1 && t->count <= 16) {
        s.n_vals = (int)t->count;
        for (int64_t i = 0; i < t->count; i++)
            vals[i] = t->dtype == TFVM_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
    }
    return s;
}

static void operands_str(const gen *g, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (uint32_t k = 0; k < g->n && n + 100 < size; k++) {
        int64_t vals[16];
        isa_shape s = shape_of(&g->in[k], vals);
        char one[96];
        n += (size_t)snprintf(buf + n, size - n, "%s%s", k ? ", " : "", isa_shape_str(&s, one, sizeof one));
        for (int i = 0; i < s.n_vals && n + 30 < size; i++)
            n += (size_t)snprintf(buf + n, size - n, "%s%lld%s", i ? " " : " {", (long long)vals[i],
                                  i + 1 == s.n_vals ? "}" : "");
    }
}

/* One case: the rule's shape against the kernel's result. */
static void check_case(const row *r, gen *g)
{
    const char *name = isa_ops[r->op].name, *dname = tfvm_dtype_name((tfvm_dtype)g->dt);
    char ops[400], msg[240], kmsg[240];
    operands_str(g, ops, sizeof ops);
    dev_value out = {0}, held[MAX_OPS];
    /* held for the call, which may relabel an input only one reference holds (dev_cpu_in_place) */
    for (uint32_t k = 0; k < g->n; k++) {
        held[k] = g->in[k];
        dev_value_retain(&held[k]);
    }
    tfvm_status ks = isa_ops[r->op].cls == ISA_CLASS_TENSOR
                         ? dev_cpu_tensor((isa_op)r->op, g->attr, g->in, g->n, &out, &alloc, kmsg, sizeof kmsg)
                         : dev_cpu_elementwise((isa_op)r->op, g->attr, g->in, &out, &alloc, kmsg, sizeof kmsg);
    for (uint32_t k = 0; k < g->n; k++)
        dev_value_release(&held[k]);
    ck_assert_msg(ks == TFVM_OK, "%s on %s: the kernel fails on valid operands (%s, attr %u): %s", name, dname, ops,
                  g->attr, kmsg);
    isa_shape x[MAX_OPS], o;
    int64_t vals[MAX_OPS][16];
    for (uint32_t k = 0; k < g->n; k++)
        x[k] = shape_of(&g->in[k], vals[k]);
    tfvm_status rs = isa_shape_rule(r->op, g->attr, x, g->n, &o, msg, sizeof msg);
    int64_t vr[16];
    isa_shape want = shape_of(&out, vr);
    char got_s[96], want_s[96];
    isa_dims_str(&o, got_s, sizeof got_s);
    isa_dims_str(&want, want_s, sizeof want_s);
    ck_assert_msg(rs == TFVM_OK, "%s on %s: the rule fails (%s) where the kernel gives %s (%s, attr %u)", name, dname,
                  msg, want_s, ops, g->attr);
    bool exact = r->known == EXACT || (r->known == PARTIAL_FLOAT && isa_dtype_int(g->dt));
    bool ok = o.rank == want.rank || (!exact && o.rank < 0);
    for (int k = 0; ok && o.rank >= 0 && k < o.rank; k++)
        ok = o.dims[k] == want.dims[k] || (!exact && o.dims[k] == ISA_DIM_ANY);
    ck_assert_msg(ok, "%s on %s: the rule gives %s, the kernel %s (%s, attr %u)", name, dname, got_s, want_s, ops,
                  g->attr);
    dev_value_release(&out);
    for (uint32_t k = 0; k < g->n; k++)
        dev_value_release(&g->in[k]);
}

START_TEST(test_every_rule_has_a_row)
{
    for (uint32_t op = 0; op < ISA_OP_COUNT; op++)
        if (isa_shape_has_rule(op))
            ck_assert_msg(row_of(op).gen != NULL, "%s has a shape rule but no row in test_oprules.c",
                          isa_ops[op].name);
}
END_TEST

START_TEST(test_rules_match_kernels)
{
    uint32_t cases = 0;
    for (uint32_t op = 0; op < ISA_OP_COUNT; op++) {
        row r = row_of(op);
        if (!isa_shape_has_rule(op) || !r.gen)
            continue;
        for (uint32_t dt = TFVM_BOOL; dt <= ISA_DTYPE_LAST; dt++) {
            if (!isa_takes(op, dt))
                continue;
            gen g = {.rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)op << 8 | dt), .dt = (uint8_t)dt};
            for (int i = 0; i < ROUNDS; i++) {
                g.n = 0;
                g.attr = 0;
                g.vmax = 3;
                r.gen(&g, op);
                check_case(&r, &g);
                cases++;
            }
        }
    }
    ck_assert_uint_gt(cases, 1000);
    ck_assert_int_eq(counts.blocks, 0); /* every operand and result released */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("oprules");
    TCase *tc = tcase_create("oprules");
    tcase_add_test(tc, test_every_rule_has_a_row);
    tcase_add_test(tc, test_rules_match_kernels);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
