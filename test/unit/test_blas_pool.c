/* test/unit/test_blas_pool.c — OpenBLAS as libtfvm loads it: with dlopen, and
 * without the thread pool it starts at load (devices/cpu/blas.c: those
 * threads spun for ~0.1 s on the second core of every process that ran a
 * convolution). The one suite built without linking OpenBLAS (Makefile), so
 * that libtfvm's dlopen is what loads it, as in the tfvm command. */
#include <stdio.h>
#include <string.h>

#include "devices/cpu/blas.h"
#include "testutil.h"

/* ThreadSanitizer's runtime starts threads of its own as others come and
 * go: the count says nothing there (make tsan runs this suite too). */
#ifdef TU_TSAN
#define SAME_THREADS(before) ((void)(before))
#else
#define SAME_THREADS(before) ck_assert_int_eq(threads(), before)
#endif

/* The process's threads, from /proc/self/status. */
static int threads(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    ck_assert_int_gt(n, 0);
    return n;
}

START_TEST(test_no_pool_after_load)
{
    ck_assert_ptr_null(dev_blas_if_loaded()); /* not linked: not in the process yet */
    const int before = threads();
    const dev_blas_fns *b = dev_blas();
    ck_assert_msg(b != NULL, "OpenBLAS did not load: %s", dev_blas_error());
    SAME_THREADS(before);
    ck_assert_int_eq(b->get_num_threads(), 1);
    /* and it still computes, on the caller's thread */
    const float x[4] = {1, 2, 3, 4}, y[4] = {5, 6, 7, 8};
    float z[4];
    b->sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, x, 2, y, 2, 0.0f, z, 2);
    ck_assert(z[0] == 19 && z[1] == 22 && z[2] == 43 && z[3] == 50);
    SAME_THREADS(before);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("blas_pool");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_no_pool_after_load);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
