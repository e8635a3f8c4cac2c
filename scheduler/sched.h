/* scheduler/sched.h — scheduling policies and the machine's topology. The VM
 * decides what is ready (matching); a policy decides who runs it and in which
 * order. Policies are named entries of one table (sched.c); the VM picks
 * "deterministic" for one worker and "workstealing" for more (--threads,
 * TFVM_THREADS, --deterministic). The mechanics live beside them:
 * deque.h (work stealing) and topology.c (hwloc: cores, pinning). */
#ifndef TFVM_SCHED_H
#define TFVM_SCHED_H

#include "util/util.h"

typedef struct sched_policy {
    const char *name;
    const char *summary;
    bool parallel; /* several workers stealing from each other's deques */
} sched_policy;

/* The policy called `name`, or NULL if none. */
const sched_policy *sched_policy_find(const char *name);
/* The i-th policy, or NULL past the end (for --help and tests). */
const sched_policy *sched_policy_at(size_t i);

/* ---- Topology (hwloc) ---------------------------------------------------------
 * Loaded once per VM that runs in parallel. Without hwloc information the VM
 * still runs: cores come from sysconf and threads are not pinned. hwloc
 * allocates with the C library (its allocations are outside the hook). */
typedef struct sched_topo sched_topo;

sched_topo *sched_topo_load(void);
void sched_topo_free(sched_topo *t);
/* Physical cores (at least 1). t may be NULL. */
unsigned sched_topo_cores(const sched_topo *t);
/* Binds the calling thread to core `index` (mod the number of cores).
 * Best effort: false when it could not. */
bool sched_topo_pin(const sched_topo *t, unsigned index);

#endif
