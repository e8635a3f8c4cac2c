/* import/onnx_rnn.c — RNN, GRU and LSTM as IR While loops over the
 * sequence (one per direction): like ONNX Loop, never a host loop, the
 * steps are iterations of one static loop region whose body is the
 * recurrent MATMUL and the gates (the input products of all steps are one
 * product before the loop; the gate math of an LSTM without peepholes and
 * of a GRU with linear_before_reset, with the recurrent product, is one
 * instruction, LSTM_STEP or GRU_STEP); Y is stacked with STACK_PUT. A
 * stack of layers, each one's Y squeezed into the next one's X, is one
 * loop over chunks of steps instead (run_chain). */
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

/* A fused step's state before the first step: h0, or an LSTM's h0 and c0
 * stacked ([2, batch, H]) */
static ox_val initial_state(ox_node *N, const rnn_in *I)
{
    if (I->kind != K_LSTM)
        return I->h0;
    const int64_t zero = 0;
    ox_val a0 = ox_i64s(N, 1, &zero);
    ox_val h1 = ox_op2(N, ISA_UNSQUEEZE, 0, &I->h0, &a0), c1 = ox_op2(N, ISA_UNSQUEEZE, 0, &I->c0, &a0);
    return ox_op2(N, ISA_CONCAT, 0, &h1, &c1);
}

/* A fused step's recurrent bias: Rb, or zeros where the op has no B */
static ox_val step_bias(ox_node *N, const rnn_in *I)
{
    if (I->has_b)
        return I->Rb;
    int64_t n = (I->kind == K_LSTM ? 4 : 3) * I->H;
    ox_val sh = ox_i64s(N, 1, &n), zf = ox_fscalar(N, I->d, 0);
    return ox_op2(N, ISA_FILL, 0, &sh, &zf);
}

/* The input products of X's steps, X [T, batch, I] @ W^T (+ Wb) */
static ox_val input_products(ox_node *N, const rnn_in *I, const ox_val *X)
{
    ox_val XW = ox_op2(N, ISA_MATMUL, ISA_OPT_TRANS_B, X, &I->W);
    return I->has_b ? ox_ew2(N, ISA_ADD, &XW, &I->Wb) : XW;
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
    ox_val init[4] = {ox_scalar(N, TFVM_I64, 0, 0), hc ? initial_state(N, I) : I->h0, I->c0, I->h0};
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
    ox_val XW = input_products(N, I, &I->X);
    ox_val Rb = fused ? step_bias(N, I) : I->Rb;
    cc_blk *outer;
    cc_node *w = ox_count_loop(N, nvar, iv, ty, nm, label, &I->T, lv, &outer);
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

/* The op's attributes and the inputs that every direction shares: I's
 * kind, H, dtype, X (time first), T and lengths, zeros [batch, H] where an
 * initial state is absent */
static void rnn_setup(ox_node *N, rnn_kind kind, rnn_in *I, int *ndir, bool *rev, bool *batchwise, ox_val *zeros)
{
    check_activations(N, kind);
    ox_val *x = ox_need(N, 0);
    ox_need(N, 1);
    ox_need(N, 2);
    ox_val *lens = ox_opt_in(N, 4), *h0 = ox_opt_in(N, 5), *c0 = kind == K_LSTM ? ox_opt_in(N, 6) : NULL;
    int64_t H = ox_attr_i(N, "hidden_size", -1);
    if (H < 1)
        ox_unsupported(N, "an unknown hidden_size");
    char db[24];
    const char *dir = ox_attr_s(N, "direction", "forward", db, sizeof db);
    *ndir = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
    *rev = strcmp(dir, "reverse") == 0;
    if (!*rev && *ndir == 1 && strcmp(dir, "forward") != 0)
        ox_fail(N, TFVM_ERR_FORMAT, "direction '%s'", dir);
    *batchwise = ox_attr_i(N, "layout", 0) != 0;
    *I = (rnn_in){.kind = kind, .H = H, .d = x->dtype, .lbr = ox_attr_i(N, "linear_before_reset", 0) != 0};
    I->X = *x;
    int64_t p3[3] = {1, 0, 2};
    ox_val pv3 = ox_i64s(N, 3, p3);
    if (*batchwise)
        I->X = ox_op2(N, ISA_TRANSPOSE, 0, x, &pv3);
    /* the length and the batch: constants where X's shape says them (a
     * layer after another one then runs without computing them) */
    const bool known = I->X.rank == 3 && I->X.dims[0] >= 0 && I->X.dims[1] >= 0;
    ox_val xs = known ? ox_i64s(N, 3, I->X.dims) : ox_op1(N, ISA_SHAPE, 0, &I->X);
    ox_val z0 = ox_scalar(N, TFVM_I64, 0, 0);
    I->T = known ? ox_scalar(N, TFVM_I64, 0, I->X.dims[0]) : ox_op2(N, ISA_GATHER, 0, &xs, &z0);
    if (lens) {
        I->lens = ox_to_dtype(N, lens, TFVM_I64);
        I->has_lens = true;
    }
    *zeros = (ox_val){0};
    if (!h0 || (kind == K_LSTM && !c0)) {
        int64_t one = 1, two = 2, hh = H;
        ox_val v1 = ox_i64s(N, 1, &one), v2 = ox_i64s(N, 1, &two), vh = ox_i64s(N, 1, &hh);
        const int64_t bh[2] = {I->X.dims[1], H};
        ox_val bdim = known ? v1 : ox_op3(N, ISA_SLICE, 0, &xs, &v1, &v2);
        ox_val zs = known ? ox_i64s(N, 2, bh) : ox_op2(N, ISA_CONCAT, 0, &bdim, &vh), zf = ox_fscalar(N, I->d, 0);
        *zeros = ox_op2(N, ISA_FILL, 0, &zs, &zf);
    }
}

/* Direction k's weights, biases, peepholes and initial states */
static void direction_in(ox_node *N, rnn_in *I, int k, bool batchwise, const ox_val *zeros)
{
    const int64_t G = I->kind == K_RNN ? 1 : I->kind == K_GRU ? 3 : 4, H = I->H;
    ox_val *W = ox_need(N, 1), *R = ox_need(N, 2), *B = ox_opt_in(N, 3), *h0 = ox_opt_in(N, 5);
    ox_val *c0 = I->kind == K_LSTM ? ox_opt_in(N, 6) : NULL, *P = I->kind == K_LSTM ? ox_opt_in(N, 7) : NULL;
    I->W = take(N, W, k);
    I->R = take(N, R, k);
    I->has_b = B != NULL;
    if (B) {
        ox_val b = take(N, B, k);
        I->Wb = slice1(N, &b, 0, G * H);
        I->Rb = slice1(N, &b, G * H, 2 * G * H);
    }
    I->has_p = P != NULL;
    if (P)
        I->P = take(N, P, k);
    int64_t p3[3] = {1, 0, 2};
    ox_val *h0b = h0, h0t, *c0b = c0, c0t;
    if (h0 && batchwise) {
        ox_val pv3 = ox_i64s(N, 3, p3);
        h0t = ox_op2(N, ISA_TRANSPOSE, 0, h0, &pv3);
        h0b = &h0t;
    }
    if (c0 && batchwise) {
        ox_val pv3 = ox_i64s(N, 3, p3);
        c0t = ox_op2(N, ISA_TRANSPOSE, 0, c0, &pv3);
        c0b = &c0t;
    }
    I->h0 = h0b ? take(N, h0b, k) : *zeros;
    I->c0 = c0b ? take(N, c0b, k) : *zeros;
}

/* The op's outputs into out (as many as it lists) from its directions'
 * Y [T, batch, H] and last h and c: Y [T, dirs, batch, H], Y_h and Y_c
 * [dirs, batch, H], batch first where the layout says */
static void rnn_outputs(ox_node *N, rnn_kind kind, int ndir, bool batchwise, const ox_val *Ys, const ox_val *hs,
                        const ox_val *cs, ox_val *out)
{
    int64_t one = 1, zero = 0;
    ox_val v1 = ox_i64s(N, 1, &one), a0 = ox_i64s(N, 1, &zero);
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
        int64_t p3[3] = {1, 0, 2}, p4[4] = {2, 0, 1, 3};
        ox_val pv3 = ox_i64s(N, 3, p3), pv4 = ox_i64s(N, 4, p4);
        Y = ox_op2(N, ISA_TRANSPOSE, 0, &Y, &pv4);
        Yh = ox_op2(N, ISA_TRANSPOSE, 0, &Yh, &pv3);
        if (kind == K_LSTM)
            Yc = ox_op2(N, ISA_TRANSPOSE, 0, &Yc, &pv3);
    }
    const ox_val outs[3] = {Y, Yh, Yc};
    for (uint32_t k = 0; k < N->n_out && k < (kind == K_LSTM ? 3u : 2u); k++)
        out[k] = outs[k];
}

/* ---- Stacked layers ---------------------------------------------------------------
 * Exporters write a stack of recurrent layers (nn.LSTM(num_layers=2), a
 * Keras model of LSTM layers) as one op per layer, each layer's Y squeezed
 * into the next one's X. Lowered one by one, a layer's loop starts only
 * when the layer below has run all of its steps: its input products,
 * hoisted before its loop, need all of that Y. A chain of such layers
 * (forward, one direction, each step one instruction, no lengths, the
 * length and batch known, the Y between them read by nothing else) is one
 * loop over chunks of CHUNK steps instead (one chunk of all of them when
 * the run has one worker: WORKERS): in chunk c each layer runs its
 * steps (a loop of its own) after the layer below ran that chunk's, its
 * input products for the chunk one product of the chunk's rows. Nothing of
 * layer j + 1 is needed for layer j's next chunk, so with two workers the
 * layers run side by side a chunk apart (iterations of the chunk loop
 * overlap, as tags let them). The numbers are those of the layers one by
 * one: each element of a product sums its K terms in the same order however
 * many rows the product has (sgemm.c; products large enough for OpenBLAS
 * aside). */
enum { CHAIN_MAX = 8 };

typedef struct layer {
    ox_node *N; /* the layer's node */
    rnn_kind kind;
    rnn_in I;
    ox_val zeros;
} layer;

/* Steps a chunk has on several workers, CHUNK (16 for a sequence shorter
 * than two of them); a chain needs a sequence of CHUNK steps or more. On
 * one worker a chain runs its whole sequence as one chunk (WORKERS): a
 * chunk costs some 7 us more than its steps (the chunk loop's firings, its
 * inner loops' entries and exits, a product that streams the next layer's
 * input weights again) against ~3.5 us a step of a layer of 128 units.
 * Measured on 2 threads (Intel Xeon, 2 cores): a 2-layer LSTM of 128 units
 * over 128 steps 0.75-0.8x its time unchained with chunks of 16 or 32
 * steps; over 32 steps, two chunks of 16, a GRU 0.89x and an LSTM 0.88x. */
enum { CHUNK = 32 };

/* Whether node L names input k */
static bool named(const ox_node *L, uint32_t k) { return k < L->n_in && L->n->input[k] && L->n->input[k][0]; }

/* Whether layer node L can be a link of a chain: its step one instruction,
 * forward, one direction, time first, the default activations, no
 * lengths */
static bool chain_link(ox_node *L, rnn_kind kind)
{
    char db[24];
    static const char *const off[] = {"activations", "activation_alpha", "activation_beta", "clip", NULL};
    for (int k = 0; off[k]; k++)
        if (ox_attr(L, off[k]))
            return false;
    if (ox_attr_i(L, "hidden_size", -1) < 1 || ox_attr_i(L, "layout", 0) != 0 || ox_attr_i(L, "input_forget", 0) ||
        strcmp(ox_attr_s(L, "direction", "forward", db, sizeof db), "forward") != 0)
        return false;
    if (kind == K_GRU ? !ox_attr_i(L, "linear_before_reset", 0) : named(L, 7))
        return false;
    return !named(L, 4) && named(L, 1) && named(L, 2);
}

static bool is_op(const Onnx__NodeProto *n, const char *op)
{
    return n->op_type && strcmp(n->op_type, op) == 0 && (!n->domain || !n->domain[0] || strcmp(n->domain, "ai.onnx") == 0);
}

/* Whether a node of g or of its subgraphs reads name */
static bool graph_reads(const Onnx__GraphProto *g, const char *name, int depth)
{
    for (size_t i = 0; g && depth < 64 && i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; n && k < n->n_input; k++)
            if (n->input[k] && strcmp(n->input[k], name) == 0)
                return true;
        for (size_t k = 0; n && k < n->n_attribute; k++) {
            const Onnx__AttributeProto *a = n->attribute[k];
            if (a && a->g && graph_reads(a->g, name, depth + 1))
                return true;
            for (size_t j = 0; a && j < a->n_graphs; j++)
                if (graph_reads(a->graphs[j], name, depth + 1))
                    return true;
        }
    }
    return false;
}

/* Who reads `name` after node #from of g: Shape nodes apart (they read
 * no element), how many others (a node whose subgraph reads it, and g's
 * outputs, count); the first of them at node #first (SIZE_MAX: none, or
 * only g's outputs), as its input #slot */
typedef struct reads {
    int n, shapes;
    size_t first, slot;
} reads;

static reads readers(const Onnx__GraphProto *g, size_t from, const char *name)
{
    reads r = {0, 0, SIZE_MAX, 0};
    for (size_t k = 0; k < g->n_output; k++)
        r.n += g->output[k] && g->output[k]->name && strcmp(g->output[k]->name, name) == 0;
    for (size_t i = from + 1; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (!n)
            continue;
        bool reads_it = false;
        for (size_t k = 0; k < n->n_input; k++)
            if (n->input[k] && strcmp(n->input[k], name) == 0) {
                if (is_op(n, "Shape") && k == 0) {
                    r.shapes++;
                    continue;
                }
                r.n++;
                if (r.first == SIZE_MAX)
                    r.first = i, r.slot = k;
            }
        for (size_t k = 0; k < n->n_attribute && !reads_it; k++) {
            const Onnx__AttributeProto *a = n->attribute[k];
            reads_it = a && a->g && graph_reads(a->g, name, 1);
            for (size_t j = 0; a && j < a->n_graphs && !reads_it; j++)
                reads_it = graph_reads(a->graphs[j], name, 1);
        }
        if (reads_it) {
            r.n++;
            if (r.first == SIZE_MAX)
                r.first = i, r.slot = SIZE_MAX;
        }
    }
    return r;
}

/* Whether Squeeze node #at of g takes axis 1 alone out of a rank-4 Y: its
 * axes an attribute, a value known by now or a Constant node before it */
static bool squeezes_axis1(ox *X, const Onnx__GraphProto *g, size_t at)
{
    const Onnx__NodeProto *s = g->node[at];
    ox_node *S = ox_node_at(X, g, at, NULL);
    int64_t ax[2];
    int n = ox_attr_ints(S, "axes", ax, 2);
    if (named(S, 1)) {
        n = ox_const_ints(S->in[1], ax, 2);
        for (size_t i = 0; i < at && !S->in[1]; i++) {
            const Onnx__NodeProto *c = g->node[i];
            if (!c || !is_op(c, "Constant") || c->n_output != 1 || !c->output[0] ||
                strcmp(c->output[0], s->input[1]) != 0)
                continue;
            const Onnx__AttributeProto *v = ox_attr(ox_node_at(X, g, i, NULL), "value");
            const Onnx__TensorProto *t = v ? v->t : NULL;
            if (!t || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || t->n_dims > 1 ||
                (t->n_dims == 1 && t->dims[0] != 1))
                return false;
            if (t->n_int64_data == 1)
                ax[0] = t->int64_data[0], n = 1;
            else if (t->has_raw_data && t->raw_data.len == 8)
                memcpy(ax, t->raw_data.data, 8), n = 1;
        }
    }
    return n == 1 && (ax[0] == 1 || ax[0] == -3);
}

/* Whether a layer of `kind`, H units, batch B, elements of esz bytes pays
 * as a link of a chain: its steps heavy enough to share two workers' time
 * against the chunks' costs, and its recurrent weights small enough that
 * one core streams them from its own cache. Larger ones stream faster as
 * halves from two cores' caches, a step split over both (rnncell.c), than
 * whole beside the other layer. Measured (Intel Xeon, 2 cores, 2 MB L2
 * each, 2 threads, chained against unchained): a 2-layer GRU of 64 units
 * over 200 steps (12 K multiply-adds a step) 0.39 -> 0.49 ms; 48 K and more
 * gained (GRU and LSTM of 128 units, 0.8-0.86x the time); weights of 0.6-1
 * MB a layer gained 2-8% (GRU of 256 units at batch 4, LSTMs of 192 and
 * 256 units), of 3-4 MB lost 10-40% (GRU and LSTM of 512 units over 32
 * steps: 1.84 -> 2.59 ms, 3.23 -> 3.97). */
enum { CHAIN_MIN_MACS = 1 << 15, CHAIN_MAX_WEIGHTS = 1 << 20 };

static bool chain_pays(rnn_kind kind, int64_t B, int64_t H, int64_t esz)
{
    const int64_t G = kind == K_LSTM ? 4 : 3;
    return H >= 1 && H <= (1 << 14) && B <= (1 << 20) && G * H * H * B >= CHAIN_MIN_MACS &&
           G * H * H * esz <= CHAIN_MAX_WEIGHTS;
}

/* A chain's layers, from its first one's turn to its last one's */
typedef struct chain {
    int n;
    size_t at[CHAIN_MAX], sq[CHAIN_MAX]; /* the layers' nodes, the Squeezes after them */
    rnn_kind kinds[CHAIN_MAX];
} chain;

/* The chain that starts at N (of `kind`) into ch, ch->n its layers (1: no
 * chain). Each Y between two layers is read by a Squeeze of axis 1 alone,
 * whose result the next layer reads as its X and Shape nodes alone read
 * besides; a layer's last h and c are read by nothing before the chain's
 * last layer, if at all. */
static void find_chain(ox_node *N, rnn_kind kind, chain *ch)
{
    size_t *at = ch->at;
    ch->n = 1;
    const ox_val *x = N->n_in ? N->in[0] : NULL;
    if (!N->g || !x || x->rank != 3 || x->dims[1] < 1 || x->dims[0] < CHUNK ||
        !isa_dtype_float(x->dtype) || x->store || !chain_link(N, kind))
        return;
    const Onnx__GraphProto *g = N->g;
    const int64_t B = x->dims[1];
    const int64_t esz = tfvm_dtype_size((tfvm_dtype)x->dtype);
    if (!chain_pays(kind, B, ox_attr_i(N, "hidden_size", -1), esz))
        return;
    int n = 1;
    at[0] = N->index;
    ch->kinds[0] = kind;
    while (n < CHAIN_MAX) {
        const Onnx__NodeProto *cur = g->node[at[n - 1]];
        if (cur->n_output < 1 || !cur->output[0] || !cur->output[0][0])
            break;
        reads y = readers(g, at[n - 1], cur->output[0]);
        if (y.n != 1 || y.shapes || y.first == SIZE_MAX || y.slot != 0 || !is_op(g->node[y.first], "Squeeze"))
            break;
        const Onnx__NodeProto *sq = g->node[y.first];
        if (sq->n_output != 1 || !sq->output[0] || !sq->output[0][0] || !squeezes_axis1(N->X, g, y.first))
            break;
        reads x1 = readers(g, y.first, sq->output[0]);
        if (x1.n != 1 || x1.first == SIZE_MAX || x1.slot != 0)
            break;
        const Onnx__NodeProto *next = g->node[x1.first];
        rnn_kind k1 = is_op(next, "LSTM") ? K_LSTM : K_GRU;
        ox_node *M = ox_node_at(N->X, g, x1.first, NULL);
        if ((!is_op(next, "LSTM") && !is_op(next, "GRU")) || !chain_link(M, k1) ||
            !chain_pays(k1, B, ox_attr_i(M, "hidden_size", -1), esz))
            break;
        ch->sq[n - 1] = y.first;
        ch->kinds[n] = k1;
        at[n++] = x1.first;
    }
    /* the layers below the last one: their h and c read after it, if at all */
    for (int j = 0; j < n - 1; j++) {
        const Onnx__NodeProto *l = g->node[at[j]];
        for (size_t k = 1; k < l->n_output && k < 3; k++)
            if (l->output[k] && l->output[k][0]) {
                reads r = readers(g, at[j], l->output[k]);
                if (r.first != SIZE_MAX && r.first <= at[n - 1])
                    n = j + 1; /* the chain ends with layer j */
            }
    }
    ch->n = n;
}

/* Steps [0, len) of one layer of a chain in a chunk: a loop of its fused
 * step over the input products xw (row i, or i + xoff), from state s,
 * each step's state put into the stack acc (row i, or i + poff); the last
 * state into *s_out, the stack into *acc_out */
static void chunk_loop(ox_node *N, const rnn_in *I, const ox_val *xw, const ox_val *xoff, const ox_val *len,
                       const ox_val *s, const ox_val *rb, const ox_val *acc, const ox_val *poff, ox_val *s_out,
                       ox_val *acc_out)
{
    enum { VI, VS, VY }; /* the variables: the step, the state, the stack */
    cc *C = N->C;
    const bool lstm = I->kind == K_LSTM;
    const ox_val init[3] = {ox_scalar(N, TFVM_I64, 0, 0), *s, *acc};
    const int rank[3] = {0, lstm ? 3 : 2, -1};
    cc_irval iv[3];
    cc_vtype ty[3];
    ox_val lv[3];
    const uint32_t id = N->X->n_loops++;
    char label[32], names[3][40];
    const char *nm[3];
    snprintf(label, sizeof label, "rnn%u", id);
    for (int k = 0; k < 3; k++) {
        iv[k] = init[k].v;
        lv[k] = plainv(iv[k], init[k].dtype, rank[k]);
        ty[k] = ox_vtype(&lv[k]);
        snprintf(names[k], sizeof names[k], "rnn%u_%s", id, (const char *const[]){"i", lstm ? "s" : "h", "y"}[k]);
        nm[k] = names[k];
    }
    cc_blk *outer;
    cc_node *w = ox_count_loop(N, 3, iv, ty, nm, label, len, lv, &outer);
    ox_val one = ox_scalar(N, TFVM_I64, 0, 1);
    ox_val tx = xoff ? ox_ew2(N, ISA_ADD, &lv[VI], xoff) : lv[VI];
    ox_val tp = poff ? ox_ew2(N, ISA_ADD, &lv[VI], poff) : lv[VI];
    const ox_val *in[5] = {xw, &tx, &lv[VS], &I->R, rb};
    ox_val hn = ox_op(N, lstm ? ISA_LSTM_STEP : ISA_GRU_STEP, 0, 5, in);
    ox_val put = ox_op3(N, ISA_STACK_PUT, 0, &lv[VY], &tp, &hn);
    const cc_irval next[3] = {ox_op2(N, ISA_ADD, 0, &lv[VI], &one).v, hn.v, put.v};
    cc_block_results(C, w->u.loop.body, 3, next);
    N->b = outer;
    *s_out = plainv(cc_out(w, VS), I->d, rank[VS]);
    *acc_out = plainv(cc_out(w, VY), I->d, lstm ? 4 : 3);
}

/* What the chain makes for layer node n comes from it (as translate_node
 * names a node) */
static void layer_origin(cc *C, const Onnx__NodeProto *n)
{
    cc_set_origin(C, n->name && n->name[0] ? n->name : n->n_output && n->output[0] ? n->output[0] : "?", n->op_type);
}

/* The n layers of a chain (find_chain) as one loop over chunks of steps,
 * at the last layer's turn (N): its outputs into N's, the last h and c of
 * the layers below bound under their names */
static void run_chain(ox_node *N, layer *L, int n)
{
    cc *C = N->C;
    const cc_origin *origin = C->origin;
    const rnn_in *I0 = &L[0].I;
    const uint8_t d = I0->d;
    const int64_t T = I0->X.dims[0], Bn = I0->X.dims[1], zero = 0;
    ox_val rb[CHAIN_MAX];
    for (int j = 0; j < n; j++) {
        layer_origin(C, L[j].N->n);
        rb[j] = step_bias(N, &L[j].I);
    }
    C->origin = origin;
    ox_val XW = input_products(N, I0, &I0->X);
    /* chunks of CHUNK steps on several workers, all T steps in one on one
     * (the layers one by one, but for the chunk loop's one iteration): k
     * steps a chunk, m chunks */
    ox_val Tv = ox_scalar(N, TFVM_I64, 0, T), one = ox_scalar(N, TFVM_I64, 0, 1);
    ox_val ck = ox_scalar(N, TFVM_I64, 0, T >= 2 * CHUNK ? CHUNK : CHUNK / 2);
    ox_val workers = ox_op1(N, ISA_WORKERS, 0, &Tv), many = ox_ew2(N, ISA_GREATER, &workers, &one);
    ox_val kv = ox_op3(N, ISA_SELECT, 0, &many, &ck, &Tv), km1 = ox_ew2(N, ISA_SUB, &kv, &one);
    ox_val end = ox_ew2(N, ISA_ADD, &Tv, &km1), m = ox_ew2(N, ISA_DIV, &end, &kv);
    /* the loop's variables: the chunk, each layer's state, the last one's Y */
    const uint32_t nvar = (uint32_t)n + 2;
    ox_val init[CHAIN_MAX + 2], lv[CHAIN_MAX + 2];
    cc_irval iv[CHAIN_MAX + 2];
    cc_vtype ty[CHAIN_MAX + 2];
    char names[CHAIN_MAX + 2][40], label[32];
    const char *nm[CHAIN_MAX + 2];
    const uint32_t id = N->X->n_loops++;
    snprintf(label, sizeof label, "rnn%u", id);
    init[0] = ox_scalar(N, TFVM_I64, 0, 0);
    for (int j = 0; j < n; j++)
        init[1 + j] = initial_state(N, &L[j].I);
    init[nvar - 1] = plainv(cc_const_new(C, N->b, (tfvm_dtype)d, 1, &zero, &zero, 0, false), d, 1);
    for (uint32_t v = 0; v < nvar; v++) {
        iv[v] = init[v].v;
        lv[v] = plainv(iv[v], init[v].dtype, v == 0 ? 0 : v == nvar - 1 ? -1 : L[v - 1].kind == K_LSTM ? 3 : 2);
        ty[v] = ox_vtype(&lv[v]);
        if (v == 0 || v == nvar - 1)
            snprintf(names[v], sizeof names[v], "rnn%u_%s", id, v ? "y" : "c");
        else
            snprintf(names[v], sizeof names[v], "rnn%u_s%u", id, v - 1);
        nm[v] = names[v];
    }
    cc_blk *outer;
    cc_node *w = ox_count_loop(N, nvar, iv, ty, nm, label, &m, lv, &outer);
    /* chunk c: steps [t0, t0 + len) */
    ox_val t0 = ox_ew2(N, ISA_MUL, &lv[0], &kv), left = ox_ew2(N, ISA_SUB, &Tv, &t0);
    ox_val len = ox_ew2(N, ISA_MIN, &left, &kv), below = {0};
    cc_irval next[CHAIN_MAX + 2];
    next[0] = ox_op2(N, ISA_ADD, 0, &lv[0], &one).v;
    for (int j = 0; j < n; j++) {
        const rnn_in *I = &L[j].I;
        const bool last = j == n - 1;
        layer_origin(C, L[j].N->n);
        ox_val xw = XW, rows = below, s, acc;
        if (j > 0) {
            /* the chunk's input products, from the h half of the states
             * below, their rank known (a RESHAPE relabels the stack) so that
             * the bias joins the product (FUSED_MATMUL) */
            ox_val i0 = ox_scalar(N, TFVM_I64, 0, 0);
            if (L[j - 1].kind == K_LSTM)
                rows = ox_op2(N, ISA_GATHER, 1, &below, &i0);
            const int64_t rd[3] = {-1, Bn, L[j - 1].I.H};
            ox_val shape = ox_i64s(N, 3, rd);
            rows = ox_op2(N, ISA_RESHAPE, 0, &rows, &shape);
            xw = input_products(N, I, &rows);
        }
        ox_val fresh = plainv(cc_const_new(C, N->b, (tfvm_dtype)d, 1, &zero, &zero, 0, false), d, 1);
        chunk_loop(N, I, &xw, j == 0 ? &t0 : NULL, &len, &lv[1 + j], &rb[j], last ? &lv[nvar - 1] : &fresh,
                   last ? &t0 : NULL, &s, &acc);
        next[1 + j] = s.v;
        below = acc;
    }
    next[nvar - 1] = below.v;
    cc_block_results(C, w->u.loop.body, nvar, next);
    N->b = outer;

    /* each layer's outputs: the last state's h (and c), the last layer's Y
     * (the others' Y is read by nothing but the Squeeze into the next
     * layer, whose value the chain never reads: zeros stand for it) */
    for (int j = 0; j < n; j++) {
        const rnn_in *I = &L[j].I;
        const bool lstm = L[j].kind == K_LSTM;
        layer_origin(C, L[j].N->n);
        const int64_t sd[4] = {T, 2, Bn, I->H};
        ox_val sT = plainv(cc_out(w, 1 + (uint32_t)j), d, lstm ? 3 : 2), Y, hT = sT, cT = {0};
        memcpy(sT.dims, lstm ? sd + 1 : sd + 2, (size_t)sT.rank * sizeof *sd);
        ox_val i0 = ox_scalar(N, TFVM_I64, 0, 0), i1 = ox_scalar(N, TFVM_I64, 0, 1);
        if (lstm) {
            hT = ox_op2(N, ISA_GATHER, 0, &sT, &i0);
            cT = ox_op2(N, ISA_GATHER, 0, &sT, &i1);
        }
        ox_node *M = L[j].N;
        if (j == n - 1) {
            Y = plainv(cc_out(w, nvar - 1), d, lstm ? 4 : 3);
            Y.dims[0] = T;
            memcpy(Y.dims + 1, sT.dims, (size_t)sT.rank * sizeof *sd);
            if (lstm)
                Y = ox_op2(N, ISA_GATHER, 1, &Y, &i0);
            rnn_outputs(N, L[j].kind, 1, false, &Y, &hT, &cT, N->out);
            continue;
        }
        /* a layer below: its h and c ([1, batch, H]) under their names from
         * now on (nothing read them yet: find_chain) */
        const ox_val a0 = ox_i64s(N, 1, &zero), *hc[2] = {&hT, &cT};
        for (uint32_t o = 1; o < M->n_out && o < (lstm ? 3u : 2u); o++)
            if (M->n->output[o] && M->n->output[o][0]) {
                ox_val v = ox_op2(N, ISA_UNSQUEEZE, 0, hc[o - 1], &a0);
                ox_bind(N->X, M->n->output[o], ox_new_val(C, &v));
            }
    }
    C->origin = origin;
}

/* The last layer's turn: the whole chain */
static void chain_make(ox_node *N, void *ctx)
{
    const chain *ch = ctx;
    layer L[CHAIN_MAX] = {0};
    int ndir;
    bool rev, batchwise;
    for (int j = 0; j < ch->n; j++) {
        L[j] = (layer){.N = j == ch->n - 1 ? N : ox_node_at(N->X, N->g, ch->at[j], N->b), .kind = ch->kinds[j]};
        if (j > 0) {
            /* X: the layer below's Y squeezed (the shape stands in: its elements are never read) */
            ox_val *x = cc_alloc(N->C, sizeof *x);
            *x = L[0].I.X;
            x->cdata = NULL;
            x->dv = NULL;
            x->dims[2] = L[j - 1].I.H;
            L[j].N->in[0] = x;
        }
        rnn_setup(L[j].N, L[j].kind, &L[j].I, &ndir, &rev, &batchwise, &L[j].zeros);
        direction_in(L[j].N, &L[j].I, 0, false, &L[j].zeros);
    }
    run_chain(N, L, ch->n);
}

/* The outputs a layer below the last one of a chain has until the chain is
 * made: zeros of their shapes, read by nothing (the Squeeze after it has
 * its own, for the Shape nodes that read its result; its h and c are bound
 * again when the chain is made, before anything reads them: find_chain) */
static void chain_stand_ins(ox_node *N, int64_t T, int64_t B, int64_t H, uint8_t d, ox_val *out, uint32_t n_out)
{
    const int64_t dims[4] = {T, 1, B, H};
    ox_val zf = ox_fscalar(N, d, 0), y = ox_i64s(N, 4, dims), h = ox_i64s(N, 3, dims + 1);
    for (uint32_t k = 0; k < n_out && k < 3; k++)
        out[k] = ox_op2(N, ISA_FILL, 0, k ? &h : &y, &zf);
}

static void rnn(ox_node *N, rnn_kind kind)
{
    chain found;
    find_chain(N, kind, &found);
    if (found.n > 1) {
        chain *ch = cc_alloc(N->C, sizeof *ch); /* the last layer's turn reads it */
        *ch = found;
        /* the layers below the last one and their Squeezes get stand-ins;
         * the last one makes the chain */
        const int64_t T = N->in[0]->dims[0], B = N->in[0]->dims[1];
        const uint8_t d = N->in[0]->dtype;
        for (int j = 0; j < ch->n; j++) {
            const ox_node *M = j == 0 ? N : ox_node_at(N->X, N->g, ch->at[j], N->b);
            const int64_t H = ox_attr_i(M, "hidden_size", -1);
            ox_done *done = cc_alloc(N->C, sizeof *done);
            done->n = M->n;
            if (j == ch->n - 1) {
                done->make = chain_make;
                done->ctx = ch;
            } else {
                chain_stand_ins(N, T, B, H, d, j ? done->out : N->out, j ? 3 : N->n_out);
                const int64_t xd[3] = {T, B, H};
                ox_val sh = ox_i64s(N, 3, xd), zf = ox_fscalar(N, d, 0);
                ox_done *sq = cc_alloc(N->C, sizeof *sq);
                sq->n = N->g->node[ch->sq[j]];
                sq->out[0] = ox_op2(N, ISA_FILL, 0, &sh, &zf);
                sq->next = N->X->done;
                N->X->done = sq;
            }
            if (j > 0) {
                done->next = N->X->done;
                N->X->done = done;
            }
        }
        return;
    }
    int ndir;
    bool rev, batchwise;
    rnn_in I;
    ox_val zeros;
    rnn_setup(N, kind, &I, &ndir, &rev, &batchwise, &zeros);
    ox_val Ys[2], hs[2], cs[2];
    for (int k = 0; k < ndir; k++) {
        I.reverse = rev || k == 1;
        direction_in(N, &I, k, batchwise, &zeros);
        run_direction(N, &I, &Ys[k], &hs[k], &cs[k]);
    }
    rnn_outputs(N, kind, ndir, batchwise, Ys, hs, cs, N->out);
}

static void op_RNN(ox_node *N) { rnn(N, K_RNN); }
static void op_GRU(ox_node *N) { rnn(N, K_GRU); }
static void op_LSTM(ox_node *N) { rnn(N, K_LSTM); }

const ox_opdef ox_rnn_ops[] = {{"GRU", 1, op_GRU}, {"LSTM", 1, op_LSTM}, {"RNN", 1, op_RNN}};
const size_t ox_n_rnn_ops = UT_COUNTOF(ox_rnn_ops);
