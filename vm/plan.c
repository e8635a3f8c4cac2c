/* vm/plan.c — derives, once per VM, the static layout the firing loop needs:
 * where each instruction's matching state lives in its region's contexts,
 * which child record each call site and loop frame uses, and the per-output
 * edge ranges. The program has been verified, so indices are trusted here. */
#include "vm.h"

#include <string.h>

static tfvm_status nomem(void) { return TFVM_ERR_NOMEM; }

tfvm_status vm_plan_build(const isa_program *p, const tfvm_allocator *a, bool seq_tensors, vm_plan *out)
{
    memset(out, 0, sizeof *out);
    ut_arena_init(&out->arena, a);
    ut_arena *ar = &out->arena;
    out->insts = ut_arena_array(ar, p->n_insts ? p->n_insts : 1, sizeof(vm_iplan));
    out->regions = ut_arena_array(ar, p->n_regions ? p->n_regions : 1, sizeof(vm_rplan));
    out->frames = ut_arena_array(ar, p->n_regions ? p->n_regions : 1, sizeof(vm_fplan));
    out->sites = ut_arena_array(ar, p->n_sites ? p->n_sites : 1, sizeof(vm_splan));
    if (!out->insts || !out->regions || !out->frames || !out->sites)
        goto fail;

    /* Child records: one per call site in its caller region, one per loop
     * frame in its parent region. Site child indices are found through any
     * CALL of the site (all live in the caller region). */
    uint32_t *site_child = ut_arena_array(ar, p->n_sites ? p->n_sites : 1, sizeof(uint32_t));
    if (!site_child)
        goto fail;
    for (uint32_t s = 0; s < p->n_sites; s++)
        site_child[s] = ISA_NONE;
    for (uint32_t r = 0; r < p->n_regions; r++)
        if (p->regions[r].kind == ISA_REGION_LOOP)
            out->regions[r].frame_child = out->regions[p->regions[r].parent].n_children++;
    for (uint32_t r = 0; r < p->n_regions; r++)
        out->regions[r].n_frames = out->regions[r].n_children; /* sites come after */

    for (uint32_t r = 0; r < p->n_regions; r++)
        out->regions[r].first = out->regions[r].end = 0;
    for (uint32_t i = p->n_insts; i-- > 0;)
        out->regions[p->insts[i].region].first = i;
    for (uint32_t i = 0; i < p->n_insts; i++)
        out->regions[p->insts[i].region].end = i + 1;

    for (uint32_t i = 0; i < p->n_insts; i++) {
        const isa_inst *in = &p->insts[i];
        vm_iplan *ip = &out->insts[i];
        vm_rplan *rp = &out->regions[in->region];
        uint32_t ports = isa_ports(in);
        ip->ports = ports;
        ip->imm = (int8_t)isa_imm_port(in);
        ip->op = in->op;
        if (in->op == ISA_RETURN)
            ip->k = in->a;
        else if (ip->imm >= 0)
            ip->k = in->b;
        ip->cls = (uint8_t)isa_ops[in->op].cls;
        ip->need = ports - (ip->imm >= 0);
        /* Matching state: every instruction that waits for several tokens,
         * and every MERGE, even with one input (it records arrivals to absorb
         * late tokens and to catch a second token on one port). */
        if (ip->need > 1 || in->op == ISA_MERGE) {
            ip->matched = 1;
            ip->slot = rp->n_slots;
            ip->match = rp->n_words;
            rp->n_slots += ports;
            rp->n_words += (ports + 63) / 64 + 1; /* claim words + status word */
        }
        /* edges are sorted by output port */
        uint32_t e = in->edge_first, end = in->edge_first + in->n_edges;
        for (uint32_t o = 0; o <= isa_outs(in) && o < 3; o++) {
            while (e < end && p->edges[e].out < o)
                e++;
            ip->out_at[o] = e;
        }
        for (uint32_t o = isa_outs(in) + 1; o < 3; o++)
            ip->out_at[o] = end;
        switch (in->op) {
        case ISA_CALL:
            if (site_child[in->a] == ISA_NONE)
                site_child[in->a] = rp->n_children++;
            ip->child = site_child[in->a];
            out->sites[in->a].n_call++;
            break;
        case ISA_RETURN:
            out->sites[in->a].n_returns++;
            break;
        case ISA_ENTER: {
            vm_fplan *f = &out->frames[in->a];
            ip->child = out->regions[in->a].frame_child;
            f->n_enter++;
            if (in->flags & ISA_FLAG_CONST)
                ip->k = f->n_const++;
            /* The largest N that an ENTER of the frame gives; an ENTER
             * without parallel=N (b == 0) gives none, so that a bound set on
             * one ENTER is not overridden by the default of the others. The
             * default applies only when no ENTER gives one (below). */
            if (in->b > f->parallel)
                f->parallel = in->b;
            break;
        }
        case ISA_EXIT:
            out->frames[in->a].n_exits++;
            break;
        default:
            break;
        }
    }

    /* Second pass: the lists (exits, const enters, returns). */
    for (uint32_t r = 0; r < p->n_regions; r++) {
        vm_fplan *f = &out->frames[r];
        if (f->parallel == 0)
            f->parallel = ISA_DEFAULT_PARALLEL;
        f->exits = ut_arena_array(ar, f->n_exits + 1, sizeof(uint32_t));
        f->const_enters = ut_arena_array(ar, f->n_const + 1, sizeof(uint32_t));
        if (!f->exits || !f->const_enters)
            goto fail;
        f->n_exits = 0;
    }
    for (uint32_t s = 0; s < p->n_sites; s++) {
        vm_splan *sp = &out->sites[s];
        sp->returns = ut_arena_array(ar, sp->n_returns + 1, sizeof(uint32_t));
        if (!sp->returns)
            goto fail;
        sp->n_returns = 0;
    }
    for (uint32_t i = 0; i < p->n_insts; i++) {
        const isa_inst *in = &p->insts[i];
        if (in->op == ISA_EXIT) {
            vm_fplan *f = &out->frames[in->a];
            f->exits[f->n_exits++] = i;
        } else if (in->op == ISA_ENTER && (in->flags & ISA_FLAG_CONST)) {
            out->frames[in->a].const_enters[out->insts[i].k] = i;
        } else if (in->op == ISA_RETURN) {
            vm_splan *sp = &out->sites[in->a];
            sp->returns[sp->n_returns++] = i;
        }
    }

    if (vm_seq_plan(p, seq_tensors, out) != TFVM_OK)
        goto fail;

    /* Context layout: header, value slots, child pointers, matching words. */
    for (uint32_t r = 0; r < p->n_regions; r++) {
        vm_rplan *rp = &out->regions[r];
        size_t size = sizeof(vm_ctx);
        size += (size_t)rp->n_slots * sizeof(dev_value);
        size += (size_t)rp->n_children * sizeof(void *);
        size += (size_t)rp->n_words * sizeof(uint64_t);
        rp->ctx_size = (size + 15) & ~(size_t)15;
    }
    return TFVM_OK;

fail:
    ut_arena_free(&out->arena);
    memset(out, 0, sizeof *out);
    return nomem();
}

void vm_plan_free(vm_plan *plan)
{
    ut_arena_free(&plan->arena);
    memset(plan, 0, sizeof *plan);
}
