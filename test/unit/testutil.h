/* test/unit/testutil.h — shared helpers for the Check suites. */
#ifndef TFVM_TESTUTIL_H
#define TFVM_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "tfvm.h"

/* TU_TSAN: built with ThreadSanitizer (make tsan), gcc's spelling or clang's */
#if defined(__SANITIZE_THREAD__)
#define TU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TU_TSAN 1
#endif
#endif

/* Runs one suite and exits with its verdict; each test file's main calls it. */
static inline int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* ---- A counting, optionally failing allocator ------------------------------
 * tu_alloc_fn is a tfvm_allocator hook (tu_allocator makes one) that tallies
 * what passes through it, so a test can prove that nothing leaked and that
 * every block was freed with the size it was allocated with, and that can fail
 * a chosen allocation, so a test can walk every failure point. It is not
 * thread-safe: a VM that uses it must run deterministic.
 *
 * Counted calls are allocations and resizes, or with fresh_only only fresh
 * allocations (ptr == NULL; resizes then always go through); frees are never
 * counted and never fail. countdown is how many counted calls go through
 * before one fails (< 0 = never fail). Once it has reached 0 every later
 * counted call fails too, unless once is set: then only that one call fails
 * and countdown becomes -1. A zeroed tu_alloc fails its first call; set
 * countdown = -1 for one that never fails. */
typedef struct tu_alloc {
    long countdown;
    bool once;
    bool fresh_only;
    long calls;    /* counted calls, failed ones included */
    long allocs;   /* fresh allocations that succeeded */
    long frees;    /* free calls */
    long failures; /* calls failed on purpose */
    long live;     /* bytes currently allocated */
    long blocks;   /* blocks currently allocated */
    long peak;     /* the most bytes ever live at once */
} tu_alloc;

static inline void *tu_alloc_fn(void *ud, void *ptr, size_t old, size_t n)
{
    tu_alloc *a = ud;
    if (n == 0) {
        a->frees++;
        if (ptr) {
            a->live -= (long)old;
            a->blocks--;
        }
        free(ptr);
        return NULL;
    }
    if (!ptr || !a->fresh_only) {
        a->calls++;
        if (a->countdown == 0) {
            a->failures++;
            if (a->once)
                a->countdown = -1;
            return NULL;
        }
        if (a->countdown > 0)
            a->countdown--;
    }
    void *q = realloc(ptr, n);
    if (q) {
        if (!ptr) {
            a->allocs++;
            a->blocks++;
        }
        a->live += (long)n - (ptr ? (long)old : 0);
        if (a->live > a->peak)
            a->peak = a->live;
    }
    return q;
}

static inline tfvm_allocator tu_allocator(tu_alloc *a)
{
    return (tfvm_allocator){tu_alloc_fn, a};
}

#endif
