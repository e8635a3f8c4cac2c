/* vm/match.h — the matching words of a matched instruction in a context
 * (vm_iplan.match): one claim bit per input port, then a status word that
 * counts arrivals. Shared by delivery (token.c), the diagnosis (diag.c) and
 * inspection (inspect.c).
 *
 * Matching without locks: a token first claims its port (a second token for
 * the port finds the bit set: a program error), then writes its value slot,
 * then counts itself in the status word; the token that makes the count
 * complete fires the instruction, and the acquire/release order of the count
 * makes every slot visible to it. On a context private to one worker the same
 * words are read and written without atomic read-modify-writes. */
#ifndef TFVM_MATCH_H
#define TFVM_MATCH_H

#include "vm.h"

#define MERGE_FIRED (1ull << 63)

/* Read-modify-write on matching words: atomic on a shared context, plain (but
 * still through the atomic type, relaxed) in the deterministic mode. */
static inline uint64_t word_or(bool par, _Atomic uint64_t *p, uint64_t v)
{
    if (par)
        return atomic_fetch_or_explicit(p, v, memory_order_relaxed);
    uint64_t o = atomic_load_explicit(p, memory_order_relaxed);
    atomic_store_explicit(p, o | v, memory_order_relaxed);
    return o;
}

static inline uint64_t word_add(bool par, _Atomic uint64_t *p, uint64_t v)
{
    if (par)
        return atomic_fetch_add_explicit(p, v, memory_order_acq_rel);
    uint64_t o = atomic_load_explicit(p, memory_order_relaxed);
    atomic_store_explicit(p, o + v, memory_order_relaxed);
    return o;
}

static inline _Atomic uint64_t *claim_word(const vm_ctx *c, const vm_iplan *ip, uint32_t port)
{
    return &c->words[ip->match + port / 64];
}
static inline _Atomic uint64_t *status_word(const vm_ctx *c, const vm_iplan *ip)
{
    return &c->words[ip->match + (ip->ports + 63) / 64];
}
static inline bool port_claimed(const vm_ctx *c, const vm_iplan *ip, uint32_t port)
{
    return atomic_load_explicit(claim_word(c, ip, port), memory_order_relaxed) & (1ull << (port % 64));
}
#endif
