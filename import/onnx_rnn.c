/* import/onnx_rnn.c — RNN, GRU and LSTM as IR While loops over the
 * sequence (one per direction): like ONNX Loop, never a host loop, the
 * steps are iterations of one static loop region whose body is the
 * recurrent MATMUL and the gates (the input products of all steps are one
 * product before the loop; the gate math of an LSTM without peepholes and
 * of a GRU with linear_before_reset, with the recurrent product, is one
 * instruction, LSTM_STEP or GRU_STEP); Y is stacked with STACK_PUT. */
#include <stdio.h>
#include <string.h>

#include "import/onnx_int.h"

typedef enum { K_RNN, K_GRU, K_LSTM } rnn_kind;

static ox_val plainv(cc_irval v, uint8_t dtype, int rank)
{
    ox_val r = {0};
    r.v = v;
    r.dtype = dtype;
    ox_unknown_shape(&r, rank);
    return r;
}

static ox_val take(ox_node *N, const ox_val *x, int64_t idx)
{
    ox_val i = ox_scalar(N, TFVM_I64, 0, idx);
    return ox_op2(N, ISA_GATHER, 0, x, &i);
}

/* columns [k*H, (k+1)*H) of a [batch, G*H] value */
static ox_val gate(ox_node *N, const ox_val *g, int k, int64_t H)
{
    int64_t st = k * H, en = (k + 1) * H, ax = -1;
    ox_val vs = ox_i64s(N, 1, &st), ve = ox_i64s(N, 1, &en), va = ox_i64s(N, 1, &ax), sp = ox_empty_vec(N, TFVM_I64);
    const ox_val *in[5] = {g, &vs, &ve, &va, &sp};
    return ox_op(N, ISA_STRIDED_SLICE, 0, 5, in);
}

static ox_val slice1(ox_node *N, const ox_val *v, int64_t st, int64_t en)
{
    ox_val vs = ox_i64s(N, 1, &st), ve = ox_i64s(N, 1, &en);
    return ox_op3(N, ISA_SLICE, 0, v, &vs, &ve);
}

static void check_activations(ox_node *N, rnn_kind kind)
{
    static const char *const defs[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    const Onnx__AttributeProto *a = ox_attr(N, "activations");
    if (a)
        for (size_t k = 0; k < a->n_strings; k++) {
            const char *want = defs[kind][k % (kind == K_RNN ? 1 : kind == K_GRU ? 2 : 3)];
            if (!want || a->strings[k].len != strlen(want) || memcmp(a->strings[k].data, want, strlen(want)) != 0)
                ox_unsupported(N, "activations other than the defaults");
        }
    if (ox_attr(N, "clip"))
        ox_unsupported(N, "clip");
    if (ox_attr_i(N, "input_forget", 0))
        ox_unsupported(N, "input_forget");
}

typedef struct rnn_in {
    rnn_kind kind;
    int64_t H;
    uint8_t d;
    ox_val X, T, W, R, Wb, Rb, P, h0, c0, lens;
    bool has_b, has_p, has_lens, reverse, lbr;
} rnn_in;

/* Whether a step is one instruction: LSTM_STEP for an LSTM without
 * peepholes (its state h and c stacked, [2, batch, H]), GRU_STEP for a GRU
 * with linear_before_reset */
static bool fused_step(const rnn_in *I) { return (I->kind == K_LSTM && !I->has_p) || (I->kind == K_GRU && I->lbr); }

/* The step's gates spelled out in instructions (the RNN, a GRU that resets
 * before its product, an LSTM with peepholes): the new h (and c) from the
 * step's input product xw, the previous h and c. */
static void step_ops(ox_node *N, const rnn_in *I, const ox_val *xw, const ox_val *h, const ox_val *cprev,
                     ox_val *hn, ox_val *cn)
{
    uint8_t d = I->d;
    int64_t H = I->H;
    ox_val hr = ox_op2(N, ISA_MATMUL, ISA_OPT_TRANS_B, h, &I->R);
    if (I->has_b)
        hr = ox_ew2(N, ISA_ADD, &hr, &I->Rb);
    if (I->kind == K_RNN) {
        ox_val a = ox_ew2(N, ISA_ADD, xw, &hr);
        *hn = ox_ew1(N, ISA_TANH, &a);
    } else if (I->kind == K_GRU) {
        /* gates z, r, h; (r * h) @ Rh^T + Rbh */
        ox_val xz = gate(N, xw, 0, H), xr = gate(N, xw, 1, H), xh = gate(N, xw, 2, H);
        ox_val hz = gate(N, &hr, 0, H), hrr = gate(N, &hr, 1, H);
        ox_val z = ox_ew2(N, ISA_ADD, &xz, &hz), r = ox_ew2(N, ISA_ADD, &xr, &hrr);
        z = ox_ew1(N, ISA_SIGMOID, &z);
        r = ox_ew1(N, ISA_SIGMOID, &r);
        ox_val rh = ox_ew2(N, ISA_MUL, &r, h);
        int64_t st = 2 * H, en = 3 * H, ax0 = 0;
        ox_val vs = ox_i64s(N, 1, &st), ve = ox_i64s(N, 1, &en), va = ox_i64s(N, 1, &ax0), sp = ox_empty_vec(N, TFVM_I64);
        const ox_val *in[5] = {&I->R, &vs, &ve, &va, &sp};
        ox_val Rh = ox_op(N, ISA_STRIDED_SLICE, 0, 5, in);
        ox_val m = ox_op2(N, ISA_MATMUL, ISA_OPT_TRANS_B, &rh, &Rh);
        if (I->has_b) {
            ox_val rbh = slice1(N, &I->Rb, 2 * H, 3 * H);
            m = ox_ew2(N, ISA_ADD, &m, &rbh);
        }
        ox_val cand = ox_ew2(N, ISA_ADD, &xh, &m);
        cand = ox_ew1(N, ISA_TANH, &cand);
        ox_val on = ox_fscalar(N, d, 1);
        ox_val omz = ox_ew2(N, ISA_SUB, &on, &z);
        ox_val a = ox_ew2(N, ISA_MUL, &omz, &cand), b = ox_ew2(N, ISA_MUL, &z, h);
        *hn = ox_ew2(N, ISA_ADD, &a, &b);
    } else {
        /* gates i, o, f, c, with peepholes */
        ox_val g = ox_ew2(N, ISA_ADD, xw, &hr);
        ox_val gi = gate(N, &g, 0, H), go = gate(N, &g, 1, H), gf = gate(N, &g, 2, H), gc = gate(N, &g, 3, H);
        ox_val pi = slice1(N, &I->P, 0, H), po = slice1(N, &I->P, H, 2 * H), pf = slice1(N, &I->P, 2 * H, 3 * H);
        ox_val a = ox_ew2(N, ISA_MUL, &pi, cprev), b = ox_ew2(N, ISA_MUL, &pf, cprev);
        gi = ox_ew2(N, ISA_ADD, &gi, &a);
        gf = ox_ew2(N, ISA_ADD, &gf, &b);
        gi = ox_ew1(N, ISA_SIGMOID, &gi);
        gf = ox_ew1(N, ISA_SIGMOID, &gf);
        gc = ox_ew1(N, ISA_TANH, &gc);
        ox_val fc = ox_ew2(N, ISA_MUL, &gf, cprev), ic = ox_ew2(N, ISA_MUL, &gi, &gc);
        *cn = ox_ew2(N, ISA_ADD, &fc, &ic);
        ox_val pc = ox_ew2(N, ISA_MUL, &po, cn);
        go = ox_ew2(N, ISA_ADD, &go, &pc);
        go = ox_ew1(N, ISA_SIGMOID, &go);
        ox_val tc = ox_ew1(N, ISA_TANH, cn);
        *hn = ox_ew2(N, ISA_MUL, &go, &tc);
    }
}

/* One direction: returns Y [T, batch, H], and the last h (and c). The loop
 * carries t, the state and Y's stack: the state is h, h and c (an LSTM
 * spelled out), or [h, c] stacked (LSTM_STEP, whose states the stack then
 * holds whole, growing in place: Y is their h half, taken once after). */
static void run_direction(ox_node *N, const rnn_in *I, ox_val *Y, ox_val *hT, ox_val *cT)
{
    cc *C = N->C;
    uint8_t d = I->d;
    bool lstm = I->kind == K_LSTM, fused = fused_step(I), hc = lstm && fused;
    uint32_t nvar = lstm && !fused ? 4 : 3;
    int64_t zero = 0;
    ox_val s0 = I->h0;
    if (hc) {
        ox_val a0 = ox_i64s(N, 1, &zero);
        ox_val h1 = ox_op2(N, ISA_UNSQUEEZE, 0, &I->h0, &a0), c1 = ox_op2(N, ISA_UNSQUEEZE, 0, &I->c0, &a0);
        s0 = ox_op2(N, ISA_CONCAT, 0, &h1, &c1);
    }
    ox_val init[4] = {ox_scalar(N, TFVM_I64, 0, 0), s0, I->c0, I->h0};
    ox_val acc = plainv(cc_const_new(C, N->b, (tfvm_dtype)d, 1, &zero, &zero, 0, false), d, 1);
    init[nvar - 1] = acc;
    cc_irval iv[4];
    cc_vtype ty[4];
    ox_val lv[4];
    for (uint32_t k = 0; k < nvar; k++) {
        iv[k] = init[k].v;
        lv[k] = plainv(iv[k], init[k].dtype, k == 0 ? 0 : k == nvar - 1 ? -1 : hc ? 3 : 2);
        ty[k] = ox_vtype(&lv[k]);
    }
    uint32_t id = N->X->n_loops++;
    char label[32], names[4][40];
    snprintf(label, sizeof label, "rnn%u", id);
    const char *nm[4];
    static const char *const suffix[4] = {"t", "h", "c", "y"};
    for (uint32_t k = 0; k < nvar; k++) {
        snprintf(names[k], sizeof names[k], "rnn%u_%s", id, k == nvar - 1 ? "y" : k == 1 && hc ? "s" : suffix[k]);
        nm[k] = names[k];
    }
    /* the input product of every step as one product before the loop
     * (X [T, batch, I] @ W^T, + Wb): a step then reads its rows, and only
     * the recurrent product h @ R^T stays in the loop */
    ox_val XW = ox_op2(N, ISA_MATMUL, ISA_OPT_TRANS_B, &I->X, &I->W);
    if (I->has_b)
        XW = ox_ew2(N, ISA_ADD, &XW, &I->Wb);
    ox_val Rb = I->Rb;
    if (fused && !I->has_b) {
        int64_t n = (lstm ? 4 : 3) * I->H;
        ox_val sh = ox_i64s(N, 1, &n), zf = ox_fscalar(N, d, 0);
        Rb = ox_op2(N, ISA_FILL, 0, &sh, &zf);
    }
    cc_node *w = cc_while_new(C, N->b, nvar, iv, ty, nm, label);
    for (uint32_t k = 0; k < nvar; k++)
        lv[k].v = cc_lvar(w, k);
    cc_blk *outer = N->b;
    N->b = w->u.loop.head;
    ox_val c = ox_op2(N, ISA_LESS, 0, &lv[0], &I->T);
    cc_block_results(C, w->u.loop.head, 1, &c.v);

    N->b = w->u.loop.body;
    ox_val t = lv[0], one = ox_scalar(N, TFVM_I64, 0, 1);
    if (I->reverse) {
        ox_val t1 = ox_ew2(N, ISA_SUB, &I->T, &one);
        t = ox_ew2(N, ISA_SUB, &t1, &lv[0]);
    }
    ox_val s = lv[1], hn, cn = {0};
    if (fused) {
        /* the whole step as one instruction (rnncell.c) */
        const ox_val *in[5] = {&XW, &t, &s, &I->R, &Rb};
        hn = ox_op(N, lstm ? ISA_LSTM_STEP : ISA_GRU_STEP, 0, 5, in);
    } else {
        ox_val xw = ox_op2(N, ISA_GATHER, 0, &XW, &t);
        step_ops(N, I, &xw, &s, &lv[2], &hn, &cn);
    }
    ox_val yv = hn;
    if (I->has_lens) {
        /* past a sequence's length its state holds and its output is 0
         * ([batch, 1] against [batch, H] or [2, batch, H]) */
        ox_val live = ox_ew2(N, ISA_LESS, &t, &I->lens);
        int64_t ax1 = 1;
        ox_val a1 = ox_i64s(N, 1, &ax1), z = ox_fscalar(N, d, 0);
        live = ox_op2(N, ISA_UNSQUEEZE, 0, &live, &a1);
        yv = ox_op3(N, ISA_SELECT, 0, &live, &hn, &z);
        hn = ox_op3(N, ISA_SELECT, 0, &live, &hn, &s);
        if (lstm && !fused)
            cn = ox_op3(N, ISA_SELECT, 0, &live, &cn, &lv[2]);
    }
    ox_val put = ox_op3(N, ISA_STACK_PUT, 0, &lv[nvar - 1], &t, &yv);
    cc_irval next[4];
    next[0] = ox_op2(N, ISA_ADD, 0, &lv[0], &one).v;
    next[1] = hn.v;
    if (nvar == 4)
        next[2] = cn.v;
    next[nvar - 1] = put.v;
    cc_block_results(C, w->u.loop.body, nvar, next);
    N->b = outer;
    *Y = plainv(cc_out(w, nvar - 1), d, hc ? 4 : 3);
    *hT = plainv(cc_out(w, 1), d, hc ? 3 : 2);
    /* what the importer knows of their shapes, so that what the graph
     * computes from them (a next layer's zero state, its length) folds:
     * the state keeps the initial state's, Y stacks T of it (a loop that
     * ran no step fails in the GATHER below) */
    if (I->X.rank == 3) {
        const int64_t sd[3] = {2, I->X.dims[1], I->H};
        memcpy(hT->dims, hc ? sd : sd + 1, (size_t)hT->rank * sizeof *sd);
        Y->dims[0] = I->X.dims[0];
        memcpy(Y->dims + 1, hT->dims, (size_t)hT->rank * sizeof *sd);
    }
    if (hc) {
        /* Y [T, 2, batch, H] and the last state [2, batch, H]: their h and c halves */
        ox_val i0 = ox_scalar(N, TFVM_I64, 0, 0), i1 = ox_scalar(N, TFVM_I64, 0, 1), sT = *hT;
        *Y = ox_op2(N, ISA_GATHER, 1, Y, &i0);
        *hT = ox_op2(N, ISA_GATHER, 0, &sT, &i0);
        *cT = ox_op2(N, ISA_GATHER, 0, &sT, &i1);
    } else if (lstm) {
        *cT = plainv(cc_out(w, 2), d, 2);
    }
}

static void rnn(ox_node *N, rnn_kind kind)
{
    check_activations(N, kind);
    ox_val *x = ox_need(N, 0), *W = ox_need(N, 1), *R = ox_need(N, 2);
    ox_val *B = ox_opt_in(N, 3), *lens = ox_opt_in(N, 4), *h0 = ox_opt_in(N, 5);
    ox_val *c0 = kind == K_LSTM ? ox_opt_in(N, 6) : NULL, *P = kind == K_LSTM ? ox_opt_in(N, 7) : NULL;
    int64_t H = ox_attr_i(N, "hidden_size", -1);
    if (H < 1)
        ox_unsupported(N, "an unknown hidden_size");
    int G = kind == K_RNN ? 1 : kind == K_GRU ? 3 : 4;
    char db[24];
    const char *dir = ox_attr_s(N, "direction", "forward", db, sizeof db);
    int ndir = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
    bool rev = strcmp(dir, "reverse") == 0;
    if (!rev && ndir == 1 && strcmp(dir, "forward") != 0)
        ox_fail(N, TFVM_ERR_FORMAT, "direction '%s'", dir);
    bool batchwise = ox_attr_i(N, "layout", 0) != 0;
    rnn_in I = {.kind = kind, .H = H, .d = x->dtype, .lbr = ox_attr_i(N, "linear_before_reset", 0) != 0};
    uint8_t d = I.d;
    I.X = *x;
    int64_t p3[3] = {1, 0, 2};
    ox_val pv3 = ox_i64s(N, 3, p3);
    if (batchwise)
        I.X = ox_op2(N, ISA_TRANSPOSE, 0, x, &pv3);
    /* the length and the batch: constants where X's shape says them (a
     * layer after another one then runs without computing them) */
    const bool known = I.X.rank == 3 && I.X.dims[0] >= 0 && I.X.dims[1] >= 0;
    ox_val xs = known ? ox_i64s(N, 3, I.X.dims) : ox_op1(N, ISA_SHAPE, 0, &I.X);
    ox_val z0 = ox_scalar(N, TFVM_I64, 0, 0);
    I.T = known ? ox_scalar(N, TFVM_I64, 0, I.X.dims[0]) : ox_op2(N, ISA_GATHER, 0, &xs, &z0);
    if (lens) {
        I.lens = ox_to_dtype(N, lens, TFVM_I64);
        I.has_lens = true;
    }
    int64_t one = 1, two = 2, hh = H;
    ox_val v1 = ox_i64s(N, 1, &one), v2 = ox_i64s(N, 1, &two), vh = ox_i64s(N, 1, &hh);
    ox_val zeros = {0};
    if (!h0 || (kind == K_LSTM && !c0)) {
        /* zeros [batch, H] for absent initial states */
        const int64_t bh[2] = {I.X.dims[1], H};
        ox_val bdim = known ? v1 : ox_op3(N, ISA_SLICE, 0, &xs, &v1, &v2);
        ox_val zs = known ? ox_i64s(N, 2, bh) : ox_op2(N, ISA_CONCAT, 0, &bdim, &vh), zf = ox_fscalar(N, d, 0);
        zeros = ox_op2(N, ISA_FILL, 0, &zs, &zf);
    }
    ox_val Ys[2], hs[2], cs[2];
    for (int k = 0; k < ndir; k++) {
        I.reverse = rev || k == 1;
        I.W = take(N, W, k);
        I.R = take(N, R, k);
        I.has_b = B != NULL;
        if (B) {
            ox_val b = take(N, B, k);
            I.Wb = slice1(N, &b, 0, G * H);
            I.Rb = slice1(N, &b, G * H, 2 * G * H);
        }
        I.has_p = P != NULL;
        if (P)
            I.P = take(N, P, k);
        ox_val *h0b = h0, h0t, *c0b = c0, c0t;
        if (h0 && batchwise) {
            h0t = ox_op2(N, ISA_TRANSPOSE, 0, h0, &pv3);
            h0b = &h0t;
        }
        if (c0 && batchwise) {
            c0t = ox_op2(N, ISA_TRANSPOSE, 0, c0, &pv3);
            c0b = &c0t;
        }
        I.h0 = h0b ? take(N, h0b, k) : zeros;
        I.c0 = c0b ? take(N, c0b, k) : zeros;
        run_direction(N, &I, &Ys[k], &hs[k], &cs[k]);
    }
    /* Y [T, dirs, batch, H], Y_h and Y_c [dirs, batch, H] */
    ox_val a0 = ox_i64s(N, 1, (const int64_t[]){0});
    ox_val Y = ox_op2(N, ISA_UNSQUEEZE, 0, &Ys[0], &v1);
    ox_val Yh = ox_op2(N, ISA_UNSQUEEZE, 0, &hs[0], &a0), Yc = {0};
    if (kind == K_LSTM)
        Yc = ox_op2(N, ISA_UNSQUEEZE, 0, &cs[0], &a0);
    if (ndir == 2) {
        ox_val y1 = ox_op2(N, ISA_UNSQUEEZE, 0, &Ys[1], &v1);
        Y = ox_op2(N, ISA_CONCAT, 1, &Y, &y1);
        ox_val h1 = ox_op2(N, ISA_UNSQUEEZE, 0, &hs[1], &a0);
        Yh = ox_op2(N, ISA_CONCAT, 0, &Yh, &h1);
        if (kind == K_LSTM) {
            ox_val c1 = ox_op2(N, ISA_UNSQUEEZE, 0, &cs[1], &a0);
            Yc = ox_op2(N, ISA_CONCAT, 0, &Yc, &c1);
        }
    }
    if (batchwise) {
        int64_t p4[4] = {2, 0, 1, 3};
        ox_val pv4 = ox_i64s(N, 4, p4);
        Y = ox_op2(N, ISA_TRANSPOSE, 0, &Y, &pv4);
        Yh = ox_op2(N, ISA_TRANSPOSE, 0, &Yh, &pv3);
        if (kind == K_LSTM)
            Yc = ox_op2(N, ISA_TRANSPOSE, 0, &Yc, &pv3);
    }
    ox_val outs[3] = {Y, Yh, Yc};
    for (uint32_t k = 0; k < N->n_out && k < (kind == K_LSTM ? 3u : 2u); k++)
        N->out[k] = outs[k];
}

static void op_RNN(ox_node *N) { rnn(N, K_RNN); }
static void op_GRU(ox_node *N) { rnn(N, K_GRU); }
static void op_LSTM(ox_node *N) { rnn(N, K_LSTM); }

const ox_opdef ox_rnn_ops[] = {{"GRU", 1, op_GRU}, {"LSTM", 1, op_LSTM}, {"RNN", 1, op_RNN}};
const size_t ox_n_rnn_ops = UT_COUNTOF(ox_rnn_ops);
