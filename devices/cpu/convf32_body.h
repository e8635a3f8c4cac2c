/* devices/cpu/convf32_body.h — the kernels of convf32.c, included once per
 * instruction set with its vector type and operations defined:
 * VF (CF_VL floats), VLD/VST (unaligned), VSTN (the first n lanes), VBC
 * (broadcast), VFMA(a, b, c) = a*b + c, VZERO, VRELU (x < 0 ? 0 : x per
 * lane); CF_SFX(to_hwc) and CF_SFX(to_chw), the layout changes; the
 * register blocking CF_PW x CF_OV (Winograd) and CF_MR x CF_NV (rows);
 * CF_TARGET, CF_SFX. */

/* ---- Winograd F(2x2, 3x3) ---------------------------------------------------------
 * x is transposed to [rows][cols][Cp] (channels last, zero padded), so that
 * the input transform B^T d B runs on vectors of channels; per block of
 * CF_PW tiles, each of the 16 transformed positions is then a product
 * [tiles, Cg] x [Cg, Op] held in registers (tiles x CF_OV vectors of
 * output channels), and the output transform A^T m A gives 2x2 outputs of
 * CF_OV * CF_VL channels at once, channels last; the last pass transposes
 * them to [Og, OH, OW]. */
/* V[xi][p][c] = (B^T d B)[xi] of tiles tb + p, p < np; 0 for p in [np,
 * CF_PW); a position xi's tiles are TS apart */
CF_TARGET CF_PHASE static void CF_SFX(wino_in)(const dev_cf *cf, const float *xt, int64_t tyb, int64_t tb, int64_t np,
                                               float *V, int64_t TS)
{
    const int64_t Cp = cf->Cp, TW = cf->TW, Wx = 2 * TW + 2;
    for (int64_t p = 0; p < CF_PW; p++) {
        if (p >= np) {
            for (int xi = 0; xi < 16; xi++)
                memset(V + (xi * TS + p) * Cp, 0, (size_t)Cp * sizeof *V);
            continue;
        }
        const int64_t t = tb + p, ty = t / TW, tx = t % TW;
        const float *base = xt + (2 * (ty - tyb) * Wx + 2 * tx) * Cp;
        for (int64_t cv = 0; cv < Cp; cv += CF_VL) {
            VF d[4][4], u[4][4];
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
                for (int q = 0; q < 4; q++)
                    d[r][q] = VLD(base + (r * Wx + q) * Cp + cv);
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                u[0][q] = d[0][q] - d[2][q];
                u[1][q] = d[1][q] + d[2][q];
                u[2][q] = d[2][q] - d[1][q];
                u[3][q] = d[1][q] - d[3][q];
            }
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                float *v = V + (r * 4 * TS + p) * Cp + cv;
                VST(v, u[r][0] - u[r][2]);
                VST(v + TS * Cp, u[r][1] + u[r][2]);
                VST(v + 2 * TS * Cp, u[r][2] - u[r][1]);
                VST(v + 3 * TS * Cp, u[r][1] - u[r][3]);
            }
        }
    }
}

/* M[xi][p][o] = sum over c of V[xi][p][c] U[xi][c][o] for p < ng CF_PW
 * (tiles TS apart), output channels [o0, o1) (whole vectors): CF_PW tiles
 * by CF_OV vectors of output channels in registers. A block of U (Cg x
 * CF_OV vectors) serves all ng groups while it is in cache: with few tiles
 * and many channels (7x7 x 512) U is read from memory once per band, not
 * once per CF_PW tiles. Where the channels do not fill whole blocks the
 * last vector runs alone (a group of 16 or 48 channels is not padded to 32
 * or 64: half or a quarter of the products and of U saved). */
#define CF_WINO_MUL(NV, OB0, OB1)                                                                              \
    for (int xi = 0; xi < 16; xi++)                                                                            \
        for (int64_t ob = (OB0); ob < (OB1); ob += (NV) * CF_VL)                                               \
            for (int64_t g = 0; g < ng; g++) {                                                                 \
                const float *Ux = U + xi * Cg * Op, *Vx = V + (xi * TS + g * CF_PW) * Cp;                      \
                VF acc[CF_PW][NV];                                                                             \
                _Pragma("GCC unroll 16") for (int p = 0; p < CF_PW; p++)                                       \
                    _Pragma("GCC unroll 4") for (int v = 0; v < (NV); v++) acc[p][v] = VZERO;                  \
                for (int64_t c = 0; c < Cg; c++) {                                                             \
                    VF u[NV];                                                                                  \
                    _Pragma("GCC unroll 4") for (int v = 0; v < (NV); v++) u[v] = VLD(Ux + c * Op + ob + v * CF_VL); \
                    _Pragma("GCC unroll 16") for (int p = 0; p < CF_PW; p++) {                                 \
                        const VF b = VBC(Vx[p * Cp + c]);                                                      \
                        _Pragma("GCC unroll 4") for (int v = 0; v < (NV); v++) acc[p][v] = VFMA(b, u[v], acc[p][v]); \
                    }                                                                                          \
                }                                                                                              \
                _Pragma("GCC unroll 16") for (int p = 0; p < CF_PW; p++)                                       \
                    _Pragma("GCC unroll 4") for (int v = 0; v < (NV); v++)                                     \
                        VST(M + (xi * TS + g * CF_PW + p) * Op + ob + v * CF_VL, acc[p][v]);                  \
            }
CF_TARGET CF_PHASE static void CF_SFX(wino_mul)(const dev_cf *cf, const float *U, const float *V, float *M,
                                                int64_t ng, int64_t TS, int64_t o0, int64_t o1)
{
    const int64_t Cg = cf->Cg, Cp = cf->Cp, Op = cf->Op, whole = o0 + (o1 - o0) / (CF_OV * CF_VL) * (CF_OV * CF_VL);
    CF_WINO_MUL(CF_OV, o0, whole)
    CF_WINO_MUL(1, whole, o1)
}
#undef CF_WINO_MUL

/* Y[2ty + a][2tx + b][o] = (A^T m A)[a][b] of tiles tb + p, p < np */
CF_TARGET CF_PHASE static void CF_SFX(wino_out)(const dev_cf *cf, const float *M, int64_t tyb, int64_t tb, int64_t np,
                                                float *Y, int64_t TS, int64_t o0, int64_t o1)
{
    const int64_t Op = cf->Op, TW = cf->TW, YW = 2 * TW;
    for (int64_t p = 0; p < np; p++) {
        const int64_t t = tb + p, ty = t / TW, tx = t % TW;
        float *y = Y + (2 * (ty - tyb) * YW + 2 * tx) * Op;
        for (int64_t ov = o0; ov < o1; ov += CF_VL) {
            VF m[4][4], t0[4], t1[4];
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
                for (int q = 0; q < 4; q++)
                    m[r][q] = VLD(M + ((r * 4 + q) * TS + p) * Op + ov);
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                t0[q] = m[0][q] + m[1][q] + m[2][q];
                t1[q] = m[1][q] - m[2][q] - m[3][q];
            }
            VST(y + ov, t0[0] + t0[1] + t0[2]);
            VST(y + Op + ov, t0[1] - t0[2] - t0[3]);
            VST(y + YW * Op + ov, t1[0] + t1[1] + t1[2]);
            VST(y + (YW + 1) * Op + ov, t1[1] - t1[2] - t1[3]);
        }
    }
}

/* Tile rows [ty0, ty1) in bands of at most cf->BT tile rows, output
 * channels [o0, o1) (whole vectors; those past Og are not stored): xt
 * holds the 2 BT + 2 rows of x a band reads, Y its 2 BT output rows. */
CF_TARGET static void CF_SFX(wino_item)(const dev_cf *cf, const float *U, const float *xg, float *og, float *s,
                                         const float *bias, const float *res, bool relu, int64_t ty0, int64_t ty1,
                                         int64_t o0, int64_t o1)
{
    const int64_t Cg = cf->Cg, H = cf->H, W = cf->W, Og = cf->Og, OH = cf->OH, OW = cf->OW;
    const int64_t oc = (o1 < Og ? o1 : Og) - o0; /* the channels stored */
    const int64_t Cp = cf->Cp, Op = cf->Op, TW = cf->TW, BT = cf->BT;
    const int64_t Wx = 2 * TW + 2, YW = 2 * TW, TS = cf->WG * CF_PW;
    float *xt = s, *V = xt + (2 * BT + 2) * Wx * Cp, *M = V + 16 * TS * Cp, *Y = M + 16 * TS * Op;
    for (int64_t b0 = ty0; b0 < ty1; b0 += BT) {
        const int64_t b1 = ty1 - b0 < BT ? ty1 : b0 + BT;
        memset(xt, 0, (size_t)((2 * (b1 - b0) + 2) * Wx * Cp) * sizeof *xt);
        for (int64_t r = 2 * b0; r < 2 * b1 + 2; r++) {
            const int64_t h = r - cf->pt;
            if (h >= 0 && h < H)
                CF_SFX(to_hwc)(xg + h * W, H * W, Cg, W, xt + ((r - 2 * b0) * Wx + cf->pl) * Cp, Cp);
        }
        for (int64_t tb = b0 * TW; tb < b1 * TW; tb += TS) {
            const int64_t nt = b1 * TW - tb < TS ? b1 * TW - tb : TS, ng = (nt + CF_PW - 1) / CF_PW;
            for (int64_t g = 0; g < ng; g++) {
                const int64_t np = nt - g * CF_PW < CF_PW ? nt - g * CF_PW : CF_PW;
                CF_SFX(wino_in)(cf, xt, b0, tb + g * CF_PW, np, V + g * CF_PW * Cp, TS);
            }
            CF_SFX(wino_mul)(cf, U, V, M, ng, TS, o0, o1);
            for (int64_t g = 0; g < ng; g++) {
                const int64_t np = nt - g * CF_PW < CF_PW ? nt - g * CF_PW : CF_PW;
                CF_SFX(wino_out)(cf, M + g * CF_PW * Op, b0, tb + g * CF_PW, np, Y, TS, o0, o1);
            }
        }
        for (int64_t h = 2 * b0; h < 2 * b1 && h < OH; h++)
            CF_SFX(to_chw)(Y + (h - 2 * b0) * YW * Op + o0, Op, OW, oc, og + o0 * OH * OW + h * OW, OH * OW,
                           bias ? bias + o0 : NULL, res ? res + o0 * OH * OW + h * OW : NULL, relu);
    }
}

/* ---- Rows ---------------------------------------------------------------------------
 * x padded into [Cg][Hp][Wp]; an output row's run of CF_NV vectors of
 * columns for CF_MR output channels is one register block: each window
 * element (c, i, j) adds the weights of those channels (wk[k][Op], k = (c*KH
 * + i)*KW + j) times the run of x it sees, read straight from the padded
 * row. Lanes past the row's end compute on what follows (in the buffer) and
 * are not stored. */
CF_TARGET static void CF_SFX(rows_item)(const dev_cf *cf, const float *wk, const float *xg, float *og, float *s,
                                         const float *bias, bool relu, int64_t oh0, int64_t oh1)
{
    const int64_t Cg = cf->Cg, H = cf->H, W = cf->W, Og = cf->Og, OH = cf->OH, OW = cf->OW;
    const int64_t KH = cf->KH, KW = cf->KW, Op = cf->Op, pt = cf->pt, pl = cf->pl;
    const int64_t Hp = OH + KH - 1, Wp = OW + KW - 1, HWp = Hp * Wp;
    float *xp = s;
    memset(xp, 0, (size_t)(Cg * HWp + CF_NV * CF_VL) * sizeof *xp);
    /* output rows [oh0, oh1) read padded rows [oh0, oh1 + KH - 1) */
    for (int64_t c = 0; c < Cg; c++)
        for (int64_t h = oh0 - pt < 0 ? 0 : oh0 - pt; h < H && h + pt < oh1 + KH - 1; h++)
            memcpy(xp + c * HWp + (h + pt) * Wp + pl, xg + (c * H + h) * W, (size_t)W * sizeof *xp);
    for (int64_t oh = oh0; oh < oh1; oh++)
        for (int64_t ow0 = 0; ow0 < OW; ow0 += CF_NV * CF_VL)
            for (int64_t ob = 0; ob < Op; ob += CF_MR) {
                VF acc[CF_MR][CF_NV];
#pragma GCC unroll 16
                for (int m = 0; m < CF_MR; m++)
#pragma GCC unroll 4
                    for (int v = 0; v < CF_NV; v++)
                        acc[m][v] = VZERO;
                const float *wkk = wk + ob;
                for (int64_t c = 0; c < Cg; c++)
                    for (int64_t i = 0; i < KH; i++) {
                        const float *xr = xp + c * HWp + (oh + i) * Wp + ow0;
                        for (int64_t j = 0; j < KW; j++, wkk += Op) {
                            VF xv[CF_NV];
#pragma GCC unroll 4
                            for (int v = 0; v < CF_NV; v++)
                                xv[v] = VLD(xr + j + v * CF_VL);
#pragma GCC unroll 16
                            for (int m = 0; m < CF_MR; m++) {
                                const VF b = VBC(wkk[m]);
#pragma GCC unroll 4
                                for (int v = 0; v < CF_NV; v++)
                                    acc[m][v] = VFMA(b, xv[v], acc[m][v]);
                            }
                        }
                    }
#pragma GCC unroll 16
                for (int m = 0; m < CF_MR; m++) {
                    if (ob + m >= Og)
                        break;
                    float *d = og + ((ob + m) * OH + oh) * OW + ow0;
#pragma GCC unroll 4
                    for (int v = 0; v < CF_NV; v++) {
                        VF y = acc[m][v];
                        if (bias)
                            y = y + VBC(bias[ob + m]);
                        if (relu)
                            y = VRELU(y);
                        const int64_t n = OW - ow0 - v * CF_VL;
                        if (n >= CF_VL)
                            VST(d + v * CF_VL, y);
                        else if (n > 0)
                            VSTN(d + v * CF_VL, y, n);
                    }
                }
            }
}

/* ---- Channels ----------------------------------------------------------------------
 * A group's output channels in vectors, at any strides and dilations (the
 * grouped layers of RegNet and ResNeXt, half a vector or more a group): x's
 * rows that a band of output rows reads, padded, in [Cg][Hb][Wp]; CF_PW
 * pixels of an output row by nv <= CF_OV vectors of output channels are one
 * register block, each window element (c, i, j) adding its weights of those
 * channels (wk[k][Op], as rows') times each pixel's x, broadcast. A row's
 * results [OW][Op] go out through to_chw with the epilogue, as Winograd's. */
CF_TARGET static inline __attribute__((always_inline)) void
CF_SFX(chan_block)(const dev_cf *cf, const float *wk, const float *xr, float *y, int64_t ow0, int64_t ob,
                   const int nv)
{
    const int64_t Cg = cf->Cg, KH = cf->KH, KW = cf->KW, Op = cf->Op, sw = cf->sw, dh = cf->dh, dw = cf->dw;
    const int64_t Wp = cf->Wp, plane = cf->Hb * Wp;
    VF acc[CF_PW][CF_OV];
#pragma GCC unroll 16
    for (int p = 0; p < CF_PW; p++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            acc[p][v] = VZERO;
    const float *wkk = wk + ob;
    for (int64_t c = 0; c < Cg; c++)
        for (int64_t i = 0; i < KH; i++) {
            const float *xi = xr + c * plane + i * dh * Wp + ow0 * sw;
            for (int64_t j = 0; j < KW; j++, wkk += Op) {
                VF u[CF_OV];
#pragma GCC unroll 4
                for (int v = 0; v < nv; v++)
                    u[v] = VLD(wkk + v * CF_VL);
#pragma GCC unroll 16
                for (int p = 0; p < CF_PW; p++) {
                    const VF b = VBC(xi[p * sw + j * dw]);
#pragma GCC unroll 4
                    for (int v = 0; v < nv; v++)
                        acc[p][v] = VFMA(b, u[v], acc[p][v]);
                }
            }
        }
#pragma GCC unroll 16
    for (int p = 0; p < CF_PW; p++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            VST(y + p * Op + ob + v * CF_VL, acc[p][v]);
}

/* Output rows [oh0, oh1) in bands of at most cf->BT rows; pixels past a
 * row's end (up to whole blocks of CF_PW) read the zeros after its x and
 * are not stored */
CF_TARGET static void CF_SFX(chan_item)(const dev_cf *cf, const float *wk, const float *xg, float *og, float *s,
                                         const float *bias, const float *res, bool relu, int64_t oh0, int64_t oh1)
{
    const int64_t Cg = cf->Cg, H = cf->H, W = cf->W, Og = cf->Og, OH = cf->OH, OW = cf->OW, Op = cf->Op;
    const int64_t sh = cf->sh, Wp = cf->Wp, plane = cf->Hb * Wp;
    float *xb = s, *y = xb + Cg * plane;
    for (int64_t b0 = oh0; b0 < oh1; b0 += cf->BT) {
        const int64_t b1 = oh1 - b0 < cf->BT ? oh1 : b0 + cf->BT, r0 = b0 * sh - cf->pt;
        const int64_t rows = (b1 - 1 - b0) * sh + (cf->KH - 1) * cf->dh + 1;
        memset(xb, 0, (size_t)(Cg * plane) * sizeof *xb);
        for (int64_t c = 0; c < Cg; c++)
            for (int64_t r = r0 < 0 ? 0 : r0; r < H && r < r0 + rows; r++) {
                const int64_t n = W < Wp - cf->pl ? W : Wp - cf->pl;
                if (n > 0)
                    memcpy(xb + c * plane + (r - r0) * Wp + cf->pl, xg + (c * H + r) * W, (size_t)n * sizeof *xb);
            }
        for (int64_t oh = b0; oh < b1; oh++) {
            const float *xr = xb + (oh - b0) * sh * Wp;
            for (int64_t ow0 = 0; ow0 < OW; ow0 += CF_PW)
                for (int64_t ob = 0; ob < Op; ob += CF_OV * CF_VL)
                    if (Op - ob >= CF_OV * CF_VL)
                        CF_SFX(chan_block)(cf, wk, xr, y + ow0 * Op, ow0, ob, CF_OV);
                    else
                        CF_SFX(chan_block)(cf, wk, xr, y + ow0 * Op, ow0, ob, 1);
            CF_SFX(to_chw)(y, Op, OW, Og, og + oh * OW, OH * OW, bias, res ? res + oh * OW : NULL, relu);
        }
    }
}

/* ---- Flat ---------------------------------------------------------------------------
 * When the output is as wide as x (unit strides, pl + pr = KW - 1), output
 * pixel q = oh*W + ow reads x at q + (i - pt)*W + (j - pl) for window element
 * (i, j): runs of CF_NV vectors of the flat output take every lane, across
 * row ends. A lane whose column falls outside x (it would wrap into the
 * previous or next row) loads 0 through its mask; the rows above and below x
 * are zeros around each channel's copy. Parts are runs of CF_NV*CF_VL
 * pixels, b to e. */
CF_TARGET static void CF_SFX(flat_item)(const dev_cf *cf, const float *wk, const float *xg, float *og, float *s,
                                         const float *bias, bool relu, int64_t b, int64_t e)
{
    const int64_t Cg = cf->Cg, H = cf->H, W = cf->W, Og = cf->Og, OHW = cf->OH * cf->OW;
    const int64_t KH = cf->KH, KW = cf->KW, Op = cf->Op, pt = cf->pt, pl = cf->pl;
    const int64_t lead = pt * W + KW, CS = cf->CS, run = CF_NV * CF_VL;
    const uint32_t *mk = cf->mk; /* [vector][j]: its lanes whose column is inside x */
    float *xz = s;
    memset(xz, 0, (size_t)(Cg * CS) * sizeof *xz);
    for (int64_t c = 0; c < Cg; c++)
        memcpy(xz + c * CS + lead, xg + c * H * W, (size_t)(H * W) * sizeof *xz);
    for (int64_t blk = b; blk < e; blk++) {
        const int64_t q0 = blk * run;
        const uint32_t *mq = mk + blk * CF_NV * KW;
        for (int64_t ob = 0; ob < Op; ob += CF_MR) {
            VF acc[CF_MR][CF_NV];
#pragma GCC unroll 16
            for (int m = 0; m < CF_MR; m++)
#pragma GCC unroll 4
                for (int v = 0; v < CF_NV; v++)
                    acc[m][v] = VZERO;
            const float *wkk = wk + ob;
            for (int64_t c = 0; c < Cg; c++)
                for (int64_t i = 0; i < KH; i++) {
                    const float *xr = xz + c * CS + lead + q0 + (i - pt) * W - pl;
                    for (int64_t j = 0; j < KW; j++, wkk += Op) {
                        VF xv[CF_NV];
#pragma GCC unroll 4
                        for (int v = 0; v < CF_NV; v++)
                            xv[v] = VLDZ(xr + j + v * CF_VL, mq[v * KW + j]);
#pragma GCC unroll 16
                        for (int m = 0; m < CF_MR; m++) {
                            const VF bw = VBC(wkk[m]);
#pragma GCC unroll 4
                            for (int v = 0; v < CF_NV; v++)
                                acc[m][v] = VFMA(bw, xv[v], acc[m][v]);
                        }
                    }
                }
#pragma GCC unroll 16
            for (int m = 0; m < CF_MR; m++) {
                if (ob + m >= Og)
                    break;
                float *d = og + (ob + m) * OHW + q0;
#pragma GCC unroll 4
                for (int v = 0; v < CF_NV; v++) {
                    VF y = acc[m][v];
                    if (bias)
                        y = y + VBC(bias[ob + m]);
                    if (relu)
                        y = VRELU(y);
                    const int64_t n = OHW - q0 - v * CF_VL;
                    if (n >= CF_VL)
                        VST(d + v * CF_VL, y);
                    else if (n > 0)
                        VSTN(d + v * CF_VL, y, n);
                }
            }
        }
    }
}
