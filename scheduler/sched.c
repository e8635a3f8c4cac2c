/* scheduler/sched.c — the policy table and the deterministic policy: one
 * LIFO stack, so the run is depth-first (live contexts stay proportional to
 * recursion depth) and every run fires in the same order. */
#include "sched.h"

#include <string.h>

static bool lifo_init(sched *s)
{
    s->items = NULL;
    s->len = s->cap = 0;
    return true;
}

static void lifo_fini(sched *s)
{
    ut_free(s->alloc, s->items, s->cap * s->item_size);
    s->items = NULL;
    s->len = s->cap = 0;
}

static bool lifo_push(sched *s, const void *item)
{
    if (s->len == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256, bytes, old = s->cap * s->item_size;
        if (!ut_mul_ok(cap, s->item_size, &bytes))
            return false;
        unsigned char *p = ut_realloc(s->alloc, s->items, old, bytes);
        if (!p)
            return false;
        s->items = p;
        s->cap = cap;
    }
    memcpy(s->items + s->len++ * s->item_size, item, s->item_size);
    return true;
}

static bool lifo_pop(sched *s, void *item)
{
    if (s->len == 0)
        return false;
    memcpy(item, s->items + --s->len * s->item_size, s->item_size);
    return true;
}

static size_t lifo_count(const sched *s) { return s->len; }

static void lifo_each(const sched *s, void (*fn)(void *, const void *), void *ud)
{
    for (size_t i = s->len; i-- > 0;)
        fn(ud, s->items + i * s->item_size);
}

static const sched_policy policies[] = {
    {.name = "deterministic",
     .summary = "one thread, LIFO (depth-first), the same firing order every run",
     .init = lifo_init,
     .fini = lifo_fini,
     .push = lifo_push,
     .pop = lifo_pop,
     .count = lifo_count,
     .each = lifo_each},
};

const sched_policy *sched_policy_find(const char *name)
{
    if (!name)
        return &policies[0];
    for (size_t i = 0; i < UT_COUNTOF(policies); i++)
        if (strcmp(policies[i].name, name) == 0)
            return &policies[i];
    return NULL;
}

const sched_policy *sched_policy_at(size_t i) { return i < UT_COUNTOF(policies) ? &policies[i] : NULL; }

bool sched_init(sched *s, const sched_policy *p, size_t item_size, const tfvm_allocator *a)
{
    memset(s, 0, sizeof *s);
    s->policy = p;
    s->alloc = a;
    s->item_size = item_size;
    return p->init(s);
}

void sched_fini(sched *s)
{
    if (s->policy)
        s->policy->fini(s);
}
