/* test/unit/testutil.h — shared helpers for the Check suites. */
#ifndef TFVM_TESTUTIL_H
#define TFVM_TESTUTIL_H

#include <check.h>
#include <stdlib.h>

/* Runs one suite and exits with its verdict; each test file's main calls it. */
static inline int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
