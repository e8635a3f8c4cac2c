/* test/unit/sum_feed.h — the co-execution program of the session tests, the
 * debugger API's feed tests and the session fuzzer (test/fuzz): n
 * iterations; each takes value i of channel "x", adds it, and fetches the
 * partial sum on "s". Result: the sum. */
#ifndef TFVM_TEST_SUM_FEED_H
#define TFVM_TEST_SUM_FEED_H

static const char SUM_FEED[] = "entry main(n: i32) -> (s: i32) {\n"
                               "    n     = ARG 0\n"
                               "    zero  = CONST i32 0\n"
                               "    e_i   = ENTER sum (zero)\n"
                               "    e_s   = ENTER sum (zero)\n"
                               "    e_fo  = ENTER sum (zero)\n"
                               "    e_go  = ENTER sum (zero)\n"
                               "    e_n   = ENTER sum const (n)\n"
                               "            RESULT 0 (sum.s_out)\n"
                               "}\n"
                               "loop sum in main {\n"
                               "    i     = MERGE (e_i, i_next)\n"
                               "    s     = MERGE (e_s, s_next)\n"
                               "    fo    = MERGE (e_fo, fo_next)\n"
                               "    go    = MERGE (e_go, go_next)\n"
                               "    lt    = LESS (i, e_n)\n"
                               "    p     = LOOPCOND (lt)\n"
                               "    si    = SWITCH (i, p)\n"
                               "    ss    = SWITCH (s, p)\n"
                               "    sfo   = SWITCH (fo, p)\n"
                               "    sgo   = SWITCH (go, p)\n"
                               "    x     = FEED \"x\" i32 (sfo:1)\n"
                               "    s2    = ADD (ss:1, x)\n"
                               "    f     = FETCH \"s\" (s2, sgo:1)\n"
                               "    one   = CONST i32 1 [si:1]\n"
                               "    i2    = ADD (si:1, one)\n"
                               "    i_next = NEXTITER (i2)\n"
                               "    s_next = NEXTITER (s2)\n"
                               "    fo_next = NEXTITER (x:1)\n"
                               "    go_next = NEXTITER (f:1)\n"
                               "    s_out = EXIT sum (ss)\n"
                               "}\n";

#endif
