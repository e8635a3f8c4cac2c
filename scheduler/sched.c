/* scheduler/sched.c — the table of scheduling policies. */
#include "sched.h"

#include <string.h>

static const sched_policy policies[] = {
    {.name = "workstealing",
     .summary = "one worker per core, Chase-Lev deques, owner LIFO, thieves FIFO",
     .parallel = true},
    {.name = "deterministic",
     .summary = "one thread, LIFO (depth-first), the same firing order every run",
     .parallel = false},
};

const sched_policy *sched_policy_find(const char *name)
{
    for (size_t i = 0; name && i < UT_COUNTOF(policies); i++)
        if (strcmp(policies[i].name, name) == 0)
            return &policies[i];
    return NULL;
}

const sched_policy *sched_policy_at(size_t i) { return i < UT_COUNTOF(policies) ? &policies[i] : NULL; }
