/* analysis/plan.c — the CPU backend's plan for a convolution or a pool whose
 * operands' shapes the analyser knows: the planner the kernels themselves ask
 * (devices/cpu/convplan.h), given the facts instead of the tensors, for
 * `tfvm check` (tfvm_facts_kernel). */
#include <string.h>

#include "analysis/facts.h"
#include "devices/cpu/convplan.h"

/* The kernels' bound on parameters and spatial dims (conv.c's CONV_MAX), and
 * on a product's dims (a BLAS int): a shape past them fails in the kernel. */
#define PLAN_MAX (INT64_C(1) << 30)
#define PLAN_GEMM_MAX INT64_C(2147483647)

static bool in_range(const int64_t *v, int n, int64_t lo)
{
    for (int k = 0; k < n; k++)
        if (v[k] < lo || v[k] > PLAN_MAX)
            return false;
    return true;
}

static bool has_conflict(const isa_facts *F, uint32_t i)
{
    for (uint32_t k = 0; k < F->n_conflicts; k++)
        if (F->conflicts[k].inst == i)
            return true;
    return false;
}

/* x's dims with the batch (dims[0]) unknown allowed: *batch_known says; the
 * others known and within the kernels' bounds. */
static bool known_nchw(const isa_fact *x, int64_t *dims, bool *batch_known)
{
    if (x->none || x->rank != 4)
        return false;
    memcpy(dims, x->dims, 4 * sizeof *dims);
    *batch_known = dims[0] >= 0;
    if (!*batch_known)
        dims[0] = 1;
    return in_range(dims + 1, 3, 0);
}

/* lay: FUSED_CONV2D's channels-last options (x's and out's dims in that order) */
static const char *conv_plan(const isa_fact *in, const isa_fact *out, uint32_t lay, unsigned threads, char *buf,
                             size_t size)
{
    dev_conv_shape s = {.dtype = in[0].dtype, .lay = lay};
    int64_t xd[4];
    bool batch_known;
    const int oh = lay & ISA_OPT_NHWC_OUT ? 1 : 2;
    if (!known_nchw(&in[0], xd, &batch_known) || in[1].none || in[1].rank != 4 || !in_range(in[1].dims, 4, 0) ||
        in[1].dtype != s.dtype || !s.dtype || s.dtype == TFVM_BOOL || isa_fact_ints(&in[2], s.p, 9) != 9 ||
        !in_range(s.p, 9, 0) || out->rank != 4 || !in_range(out->dims + oh, 2, 0))
        return buf;
    if (lay & ISA_OPT_NHWC_IN)
        s.N = xd[0], s.C = xd[3], s.H = xd[1], s.W = xd[2];
    else
        s.N = xd[0], s.C = xd[1], s.H = xd[2], s.W = xd[3];
    s.O = in[1].dims[0], s.Cg = in[1].dims[1], s.KH = in[1].dims[2], s.KW = in[1].dims[3];
    s.OH = out->dims[oh], s.OW = out->dims[oh + 1];
    const int64_t G = s.p[8];
    if (s.p[0] < 1 || s.p[1] < 1 || s.p[6] < 1 || s.p[7] < 1 || G < 1 || s.KH < 1 || s.KW < 1 || s.O % G || (double)s.Cg * (double)s.KH * (double)s.KW > (double)PLAN_GEMM_MAX ||
        (double)s.OH * (double)s.OW > (double)PLAN_GEMM_MAX)
        return buf;
    /* (an unknown batch: the kernel of one image on one thread; with fewer
     * images than threads some kernels share an image out instead) */
    dev_conv_plan plan;
    dev_conv_plan_make(&s, batch_known ? threads : 1, &plan);
    return dev_conv_plan_str(&plan, &s, batch_known, buf, size);
}

static const char *pool_plan(bool avg, const isa_fact *in, const isa_fact *out, unsigned threads, char *buf,
                             size_t size)
{
    int64_t xd[4], p[12] = {0};
    bool batch_known;
    const int np = isa_fact_ints(&in[1], p, 12);
    if (!known_nchw(&in[0], xd, &batch_known) || !in[0].dtype || (np != 8 && np != 12) || !in_range(p, np, 0) ||
        out->rank != 4 || !in_range(out->dims + 2, 2, 0))
        return buf;
    if (np == 8)
        p[8] = p[9] = 1;
    if (p[0] < 1 || p[1] < 1 || p[2] < 1 || p[3] < 1 || p[8] < 1 || p[9] < 1)
        return buf;
    dev_pool_plan plan;
    dev_pool_plan_make(in[0].dtype, avg, xd, p, out->dims[2], out->dims[3], threads, &plan);
    return dev_pool_plan_str(&plan, batch_known, buf, size);
}

const char *an_kernel_plan(const isa_facts *F, uint32_t i, unsigned threads, char *buf, size_t size)
{
    if (!size)
        return buf;
    buf[0] = '\0';
    const uint32_t op = F->p->insts[i].op;
    const bool conv = op == ISA_CONV2D || op == ISA_FUSED_CONV2D || op == ISA_FUSED_CONV2D_ADD;
    const bool pool = op == ISA_MAXPOOL || op == ISA_AVGPOOL;
    if ((!conv && !pool) || has_conflict(F, i))
        return buf;
    isa_fact in[3];
    const uint32_t n = conv ? 3 : 2;
    for (uint32_t k = 0; k < n; k++)
        isa_facts_input(F, i, k, &in[k]);
    const isa_fact *out = isa_facts_of(F, i, 0);
    if (conv)
        conv_plan(in, out,
                  op == ISA_FUSED_CONV2D ? F->p->insts[i].a & (ISA_OPT_NHWC_IN | ISA_OPT_NHWC_OUT) : 0, threads, buf,
                  size);
    else
        pool_plan(op == ISA_AVGPOOL, in, out, threads, buf, size);
    for (uint32_t k = 0; k < n; k++)
        isa_fact_release(&in[k]);
    return buf;
}
