/* vm/seq.h — what the planner of sequential frames (seq_plan.c) and their
 * runtime (seq.c) share: the layout of a frame, whose size the plan fixes
 * per region (docs/frames.md). */
#ifndef TFVM_VM_SEQ_H
#define TFVM_VM_SEQ_H

#include "vm.h"

typedef struct seq_frame {
    struct seq_frame *up;   /* the caller's frame; NULL: the caller is context `ctx` */
    const vm_splan *sp;     /* the call site this frame runs (a loop's frame: NULL) */
    const vm_rplan *rp;     /* its region's plan */
    uint32_t pc;            /* next position in the region's order */
    bool tensors;           /* a register may hold a tensor reference */
    bool loop;              /* a loop instance's frame (no site): one iteration at a time */
    bool again;             /* loop: a NEXTITER fired in this iteration */
    uint64_t iter;          /* loop: the iteration running */
    dev_value *v;           /* rp->n_regs values */
    uint8_t *has;           /* rp->n_regs: present */
} seq_frame;

/* A frame's bytes: the header, the values, the present flags (32 or 64 when
 * there are at most that many registers), rounded to 16. */
static inline uint32_t frame_size(uint32_t n_regs)
{
    size_t flags = n_regs <= 32 ? 32 : n_regs <= 64 ? 64 : n_regs; /* cleared in constant sizes (frame_push_region) */
    return (uint32_t)((sizeof(seq_frame) + n_regs * sizeof(dev_value) + flags + 15) & ~(size_t)15);
}

#endif
