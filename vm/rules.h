/* vm/rules.h — the token rules of the routing instructions (docs/isa.md),
 * once, for both engines: the dataflow one (fire.c, control.c) and the
 * sequential frames (seq.c). Each engine moves tokens its own way (sends into
 * contexts, or registers of a frame); what goes where, and when MERGE
 * fires, is decided here.
 * Inline: these run on the hottest paths of both. */
#ifndef TFVM_VM_RULES_H
#define TFVM_VM_RULES_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "devices/value.h"
#include "isa/isa.h"

/* x's dead and is_tensor flags in one load (they are neighbours): 0 for a
 * live scalar. */
static inline uint32_t vm_flags(const dev_value *x)
{
    _Static_assert(offsetof(dev_value, is_tensor) == offsetof(dev_value, dead) + 1, "dead, is_tensor: one 16-bit word");
    uint16_t f;
    memcpy(&f, &x->dead, sizeof f);
    return f;
}

/* Is x a live scalar (neither dead nor a tensor)? */
static inline bool vm_plain(const dev_value *x) { return vm_flags(x) == 0; }

/* Where SWITCH and BRANCH send their value: output 0 or 1 (the predicate's
 * false or true), both outputs a dead token, or nowhere (a bad predicate,
 * the run fails). */
typedef enum vm_route_to {
    VM_ROUTE_FALSE = 0,
    VM_ROUTE_TRUE = 1,
    VM_ROUTE_DEAD, /* a dead input: both outputs dead */
    VM_ROUTE_BAD,  /* a predicate that is not a live bool scalar (vm_rule_bad_predicate) */
} vm_route_to;

/* A SWITCH's predicate alone (a group of SWITCHes on one predicate looks
 * at it once). */
static inline vm_route_to vm_rule_predicate(const dev_value *pred)
{
    if (pred->dtype == TFVM_BOOL && vm_plain(pred))
        return pred->u.b ? VM_ROUTE_TRUE : VM_ROUTE_FALSE;
    return pred->dead ? VM_ROUTE_DEAD : VM_ROUTE_BAD;
}

/* SWITCH(data, pred). */
static inline vm_route_to vm_rule_switch(const dev_value *data, const dev_value *pred)
{
    return data->dead ? VM_ROUTE_DEAD : vm_rule_predicate(pred);
}

/* Does SWITCH(data, pred) send a live scalar to one side (the common case,
 * which the engines route without taking references)? Then pred->u.b is
 * the side; else vm_rule_switch says what happens. */
static inline bool vm_rule_switch_plain(const dev_value *data, const dev_value *pred)
{
    return pred->dtype == TFVM_BOOL && !(vm_flags(data) | vm_flags(pred));
}

/* The message of VM_ROUTE_BAD. */
static inline void vm_rule_bad_predicate(const dev_value *pred, char *msg, size_t size)
{
    snprintf(msg, size, "predicate must be a bool scalar, got %s%s", tfvm_dtype_name((tfvm_dtype)pred->dtype),
             pred->is_tensor ? " tensor" : "");
}

/* After SWITCH or BRANCH sent its value to output `taken`: does the other
 * output get a dead token? Not when the instruction prunes that side
 * (flags ISA_FLAG_PRUNE_*). */
static inline bool vm_rule_dead_other(uint16_t flags, uint32_t taken)
{
    return !(flags & (taken ? ISA_FLAG_PRUNE_FALSE : ISA_FLAG_PRUNE_TRUE));
}

/* MERGE(x0, x1, ...) fires on its first live input, or once every input
 * is in when all are dead; a token after that is absorbed (a MERGE fires
 * once per tag). Does it fire, with a live input among those in, or all in?
 * A macro, so that `all_in` is only evaluated when needed (as a function of
 * two bools it cost the two-input MERGE step an instruction a firing). */
#define VM_RULE_MERGE_FIRES(a_live_one, all_in) ((a_live_one) || (all_in))

/* Does an instruction with `got` of its `want` input tokens in, `live` of
 * them live, fire? MERGE by its rule; every other when all are in. */
static inline bool vm_rule_fires(uint32_t op, uint32_t live, uint32_t got, uint32_t want)
{
    return op == ISA_MERGE ? VM_RULE_MERGE_FIRES(live > 0, got >= want) : got >= want;
}

/* MERGE's output 1 when input k's live value is output 0 (both outputs are
 * dead tokens when every input was). */
static inline dev_value vm_rule_merge_index(uint32_t k)
{
    return (dev_value){.dtype = TFVM_I32, .u.i32 = (int32_t)k};
}

/* BRANCH(x) against its constant k with comparison op, when both are live
 * integer scalars of one dtype (the common case, no kernel): the side taken.
 * Anything else is VM_ROUTE_BAD here, and the engine asks
 * vm_branch_predicate (control.c), which runs the comparison where
 * placement puts it. */
static inline vm_route_to vm_rule_branch_int(uint16_t op, const dev_value *x, const dev_value *k)
{
    if (x->dead || x->is_tensor || x->dtype != k->dtype)
        return VM_ROUTE_BAD;
    if (x->dtype == TFVM_I32)
        return (vm_route_to)isa_compare_i32(op, x->u.i32, k->u.i32);
    if (x->dtype == TFVM_I64)
        return (vm_route_to)isa_compare_i64(op, x->u.i64, k->u.i64);
    return VM_ROUTE_BAD;
}

#endif
