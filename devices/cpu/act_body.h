/* devices/cpu/act_body.h — the f32 exp, sigmoid, erf, tanh, SiLU and GELU of act.c,
 * included once per instruction set with its vector type and operations
 * defined: VF, VSET(c), VADD/VSUB/VMUL/VDIV, VFMA(a, b, c) = a*b + c (fused
 * where the ISA has it), VMIN/VMAX (either operand when one is NaN: NaN is
 * put back at the end), VABS, VNEG, VNABS (-|x|), VCOPYSIGN(m, x) (m >= 0 with
 * x's sign),
 * VSEL_LT(a, b, x, y) = a < b ? x : y, VANY_LT(a, b) = whether a < b in any lane,
 * VANY_OUT(a, lo, hi) = whether a < lo or a > hi in any lane,
 * VNANFIX(x, r) = x is NaN ? x + x : r,
 * VPOW2(p, t) = p 2^n for t = 0x1.8p23 + n, rounded once (n in [-150,
 * 128]), VPOW2N(p, t) the same for n in [-126, 127] (2^n a normal float:
 * one product); ACT_TARGET, ACT_SFX. Every lane is
 * computed the same way, so an element's result never depends on its
 * position or the array's length. */

/* exp(x) without the NaN case: x clamped to [-104, 89] (beyond, the f32
 * result is 0 or inf), x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts,
 * the first with 13 significant bits so that n ln2hi is exact), exp(r) by a
 * degree-6 polynomial fitted for relative error (0.05 ulp before rounding),
 * times 2^n as two factors 2^(n/2) so that a denormal result is rounded once.
 * exp_poly: p = exp(r) and t = 0x1.8p23 + n. */
ACT_TARGET static inline VF ACT_SFX(exp_poly)(VF x, VF *t_)
{
    const VF shift = VSET(0x1.8p23f);
    const VF t = VFMA(x, VSET(0x1.715476p0f), shift);
    const VF n = VSUB(t, shift);
    VF r = VFMA(n, VSET(-0x1.62ep-1f), x);
    r = VFMA(n, VSET(-0x1.0bfbe8p-15f), r);
    VF p = VSET(0x1.6a4f52p-10f);
    p = VFMA(p, r, VSET(0x1.12397cp-7f));
    p = VFMA(p, r, VSET(0x1.5558aep-5f));
    p = VFMA(p, r, VSET(0x1.555492p-3f));
    p = VFMA(p, r, VSET(0x1.fffffcp-2f));
    p = VFMA(p, r, VSET(1.0f));
    p = VFMA(p, r, VSET(1.0f));
    *t_ = t;
    return p;
}
ACT_TARGET static inline VF ACT_SFX(exp_clamped)(VF x)
{
    VF t;
    const VF p = ACT_SFX(exp_poly)(x, &t);
    return VPOW2(p, t);
}
/* The same for x in [-87, 88] (a NaN lane: any result, the caller's to
 * replace): n is then in [-126, 127], 2^n a normal float, and p 2^n one
 * product, rounded once as VPOW2's two factors round it: the same bits,
 * and the clamps not needed (on AVX2 exp, sigmoid, SiLU, tanh and GELU
 * 11-20% faster; checked bit for bit over every f32 against the two) */
ACT_TARGET static inline VF ACT_SFX(exp_normal)(VF x)
{
    VF t;
    const VF p = ACT_SFX(exp_poly)(x, &t);
    return VPOW2N(p, t);
}

/* A vector with lanes below -104, whose result is +0 (exp_clamped(-104)
 * is), takes them through the polynomial as 0 and sets them to +0 after:
 * their 2^n factors would underflow, and an underflow costs a microcode
 * assist on x86 for the whole vector (a causal mask's -3.4e38 in half of an
 * attention's scores made its SOFTMAX 3.5x slower than unmasked ones). The
 * same results; other vectors pay one compare. Vectors whose lanes all lie
 * in [-87, 88] take exp_normal; the others these, out of line (inlined,
 * they had GCC call erf rather than inline it: GELU 17% slower). */
ACT_TARGET __attribute__((noinline, cold)) static VF ACT_SFX(exp_wide)(VF x)
{
    const VF lo = VSET(-104.0f);
    if (!VANY_LT(x, lo))
        return ACT_SFX(exp_clamped)(VMAX(VMIN(x, VSET(89.0f)), lo));
    const VF e = ACT_SFX(exp_clamped)(VMAX(VMIN(VSEL_LT(x, lo, VSET(0.0f), x), VSET(89.0f)), lo));
    return VSEL_LT(x, lo, VSET(0.0f), e);
}
ACT_TARGET __attribute__((noinline, cold)) static VF ACT_SFX(exp_wide_neg)(VF x)
{
    const VF lo = VSET(-104.0f);
    if (!VANY_LT(x, lo))
        return ACT_SFX(exp_clamped)(VMAX(x, lo));
    return VSEL_LT(x, lo, VSET(0.0f), ACT_SFX(exp_clamped)(VSEL_LT(x, lo, VSET(0.0f), x)));
}
ACT_TARGET static inline VF ACT_SFX(exp_core)(VF x)
{
    return VANY_OUT(x, VSET(-87.0f), VSET(88.0f)) ? ACT_SFX(exp_wide)(x) : ACT_SFX(exp_normal)(x);
}

/* exp_core of x <= 0 (or NaN, whose result the caller replaces): only the
 * lower clamp can apply */
ACT_TARGET static inline VF ACT_SFX(exp_core_neg)(VF x)
{
    return VANY_LT(x, VSET(-87.0f)) ? ACT_SFX(exp_wide_neg)(x) : ACT_SFX(exp_normal)(x);
}

ACT_TARGET static inline VF ACT_SFX(exp)(VF x) { return VNANFIX(x, ACT_SFX(exp_core)(x)); }

/* 1 / (1 + e) for x >= 0, e / (1 + e) below, e = exp(-|x|) <= 1: never
 * inf / inf, and the tiny results of large negative x keep their digits. */
ACT_TARGET static inline VF ACT_SFX(sigmoid)(VF x)
{
    const VF e = ACT_SFX(exp_core_neg)(VNABS(x));
    const VF num = VSEL_LT(x, VSET(0.0f), e, VSET(1.0f));
    return VNANFIX(x, VDIV(num, VADD(VSET(1.0f), e)));
}

/* erf: below |x| = 0.875, x P(x^2) with P's first coefficient 2/sqrt(pi) in
 * two parts; up to 3.92, 1 - exp(-x^2) g(1 / (1 + |x|)) with g a degree-5
 * fit of erfc(x) exp(x^2) (its error, relative to erf, 0.05 ulp); beyond,
 * +-1 (erfc(3.92) is under half an ulp of 1). Both parts are computed and
 * one is kept per lane. */
ACT_TARGET static inline VF ACT_SFX(erf)(VF x)
{
    const VF a = VABS(x), u = VMUL(a, a);
    VF q = VSET(-0x1.46d6d4p-11f);
    q = VFMA(q, u, VSET(0x1.4a389cp-8f));
    q = VFMA(q, u, VSET(-0x1.b70930p-6f));
    q = VFMA(q, u, VSET(0x1.ce22fap-4f));
    q = VFMA(q, u, VSET(-0x1.81271cp-2f));
    q = VFMA(q, u, VSET(-0x1.f7ac92p-25f));
    const VF small = VFMA(a, VSET(0x1.20dd76p0f), VMUL(a, q));
    const VF t = VDIV(VSET(1.0f), VADD(VSET(1.0f), a));
    VF g = VSET(0x1.8e5a7ep-2f);
    g = VFMA(g, t, VSET(-0x1.bb7176p-1f));
    g = VFMA(g, t, VSET(0x1.49c722p-2f));
    g = VFMA(g, t, VSET(0x1.3a6282p-1f));
    g = VFMA(g, t, VSET(0x1.18f726p-1f));
    g = VFMA(g, t, VSET(0x1.7287fap-10f));
    const VF e = ACT_SFX(exp_core)(VNEG(u));
    const VF mid = VFMA(VNEG(e), g, VSET(1.0f));
    const VF r = VSEL_LT(a, VSET(0.875f), small, VSEL_LT(a, VSET(3.92f), mid, VSET(1.0f)));
    return VNANFIX(x, VCOPYSIGN(r, x));
}

/* tanh: below |x| = 0.75, x + x^3 P(x^2) with P a degree-5 fit for
 * relative error (2e-9 before rounding); above, 1 - 2 / (exp(2|x|) + 1),
 * |x| clamped to 9.1 (from there the result rounds to 1); x's sign. Both
 * parts are computed and one is kept per lane; -0 stays -0. */
ACT_TARGET static inline VF ACT_SFX(tanh)(VF x)
{
    const VF a = VABS(x), u = VMUL(a, a);
    VF p = VSET(0x1.c753c4p-10f);
    p = VFMA(p, u, VSET(-0x1.f5d36ap-8f));
    p = VFMA(p, u, VSET(0x1.5f785ap-6f));
    p = VFMA(p, u, VSET(-0x1.b97d3cp-5f));
    p = VFMA(p, u, VSET(0x1.110db8p-3f));
    p = VFMA(p, u, VSET(-0x1.55554ap-2f));
    const VF small = VFMA(VMUL(a, u), p, a);
    const VF e = ACT_SFX(exp_normal)(VMUL(VMIN(a, VSET(9.1f)), VSET(2.0f))); /* (at most 18.2) */
    const VF big = VSUB(VSET(1.0f), VDIV(VSET(2.0f), VADD(e, VSET(1.0f))));
    return VNANFIX(x, VCOPYSIGN(VSEL_LT(a, VSET(0.75f), small, big), x));
}

/* x * sigmoid(x): MUL (x, SIGMOID (x)) */
ACT_TARGET static inline VF ACT_SFX(silu)(VF x) { return VMUL(x, ACT_SFX(sigmoid)(x)); }

/* GELU as torch.onnx.export spells it: (x * (erf(x / sqrt(2)) + 1)) * 0.5 */
ACT_TARGET static inline VF ACT_SFX(gelu)(VF x)
{
    const VF e = ACT_SFX(erf)(VDIV(x, VSET(DEV_SQRT2F)));
    return VMUL(VMUL(x, VADD(e, VSET(1.0f))), VSET(0.5f));
}

/* MIN (x, c) and MAX (x, c) as the elementwise ops (NaN wins; c not NaN): x
 * where x < c (x > c) or x is NaN, else c, so MAX (-0, 0) is +0 */
#define ACT_MINC(x, c) VSEL_NGE(x, VSET(c), x, VSET(c))
#define ACT_MAXC(x, c) VSEL_NLE(x, VSET(c), x, VSET(c))

/* MAX (MIN (ADD (MUL (x, 1/6), 0.5), 1), 0): four ops, each rounded */
ACT_TARGET static inline VF ACT_SFX(hardsigmoid)(VF x)
{
    const VF u = VADD(VMUL(x, VSET((float)(1.0 / 6))), VSET(0.5f));
    return ACT_MAXC(ACT_MINC(u, 1.0f), 0.0f);
}

/* MUL (x, hardsigmoid (x)) */
ACT_TARGET static inline VF ACT_SFX(hardswish)(VF x) { return VMUL(x, ACT_SFX(hardsigmoid)(x)); }

/* MIN (MAX (x, 0), 6) */
ACT_TARGET static inline VF ACT_SFX(relu6)(VF x) { return ACT_MINC(ACT_MAXC(x, 0.0f), 6.0f); }

/* the epilogues' plain bias (no activation) and RELU: x < 0 ? 0 : x, so NaN
 * and -0 stay */
ACT_TARGET static inline VF ACT_SFX(id)(VF x) { return x; }
ACT_TARGET static inline VF ACT_SFX(relu)(VF x) { return VSEL_LT(x, VSET(0.0f), VSET(0.0f), x); }

#undef ACT_MINC
#undef ACT_MAXC

/* log: x = m 2^e with m in [sqrt(1/2), sqrt(2)) (denormals scaled by 2^23
 * first), f = m - 1 (exact), s = f / (2 + f), log(1 + f) = f - (f^2/2 -
 * s (f^2/2 + R(s^2))) with R the atanh series to s^8 (the rest is under
 * 2^-30 relative), plus e ln2 in two parts; 0 gives -inf, x < 0 NaN. */
ACT_TARGET static inline VF ACT_SFX(log)(VF x)
{
    const VF xs = VSEL_LT(x, VSET(0x1p-126f), VMUL(x, VSET(0x1p23f)), x);
    VF m, e;
    VLOGSPLIT(xs, m, e);
    e = VSUB(e, VSEL_LT(x, VSET(0x1p-126f), VSET(23.0f), VSET(0.0f)));
    const VF f = VSUB(m, VSET(1.0f)), s = VDIV(f, VADD(VSET(2.0f), f));
    const VF z = VMUL(s, s), hfsq = VMUL(VMUL(VSET(0.5f), f), f);
    VF r = VSET((float)(2.0 / 9));
    r = VFMA(r, z, VSET((float)(2.0 / 7)));
    r = VFMA(r, z, VSET((float)(2.0 / 5)));
    r = VFMA(r, z, VSET((float)(2.0 / 3)));
    r = VMUL(r, z);
    VF lo = VFMA(e, VSET(0x1.0bfbe8p-15f), VMUL(s, VADD(hfsq, r)));
    VF y = VADD(VMUL(e, VSET(0x1.62ep-1f)), VSUB(f, VSUB(hfsq, lo)));
    y = VSEL_LT(x, VSET(0.0f), VSET(NAN), y);
    y = VSEL_LT(VABS(x), VSET(0x1p-149f), VSET(-INFINITY), y);
    y = VSEL_LT(x, VSET(INFINITY), y, VSET(INFINITY));
    return VNANFIX(x, y);
}
