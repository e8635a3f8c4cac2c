/* scheduler/sched.h — where ready activations wait to fire. The VM decides
 * what is ready (matching); a scheduler policy decides the order. Policies are
 * named entries of one table (sched.c), chosen by name. Items are fixed-size
 * blobs copied in and out, so the scheduler knows nothing of tags or values. */
#ifndef TFVM_SCHED_H
#define TFVM_SCHED_H

#include "util/util.h"

typedef struct sched sched;

typedef struct sched_policy {
    const char *name;
    const char *summary;
    bool (*init)(sched *s);
    void (*fini)(sched *s);
    bool (*push)(sched *s, const void *item); /* false: out of memory */
    bool (*pop)(sched *s, void *item);        /* false: empty */
    size_t (*count)(const sched *s);
    /* Visits queued items, next-to-run first (debugger, diagnosis). */
    void (*each)(const sched *s, void (*fn)(void *ud, const void *item), void *ud);
} sched_policy;

struct sched {
    const sched_policy *policy;
    const tfvm_allocator *alloc;
    size_t item_size;
    /* state of the built-in policies */
    unsigned char *items;
    size_t len, cap;
};

/* The policy called `name` (NULL = the default), or NULL if none. */
const sched_policy *sched_policy_find(const char *name);
/* Lists the policies, for --help: "deterministic (...), ..." */
const sched_policy *sched_policy_at(size_t i);

bool sched_init(sched *s, const sched_policy *p, size_t item_size, const tfvm_allocator *a);
void sched_fini(sched *s);
static inline bool sched_push(sched *s, const void *item) { return s->policy->push(s, item); }
static inline bool sched_pop(sched *s, void *item) { return s->policy->pop(s, item); }
static inline size_t sched_count(const sched *s) { return s->policy->count(s); }

#endif
