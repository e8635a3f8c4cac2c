/* test/unit/test_deque.c — the Chase–Lev deque: LIFO for the owner, FIFO for
 * thieves, growth, and every item taken exactly once while thieves race the
 * owner (run under ThreadSanitizer by `make tsan`). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "scheduler/deque.h"
#include "testutil.h"

static sched_item item(uint64_t id) { return (sched_item){{id, ~id, id * 3, id ^ 0x5a5a}}; }
static bool item_ok(const sched_item *it) { return it->w[1] == ~it->w[0] && it->w[2] == it->w[0] * 3 && it->w[3] == (it->w[0] ^ 0x5a5a); }

START_TEST(owner_lifo_thief_fifo_and_growth)
{
    sched_deque d;
    ck_assert(dq_init(&d, NULL));
    for (uint64_t i = 0; i < 1000; i++) { /* grows past the initial 256 */
        sched_item it = item(i);
        ck_assert(dq_push(&d, &it));
    }
    ck_assert_int_eq(dq_size(&d), 1000);
    sched_item it;
    ck_assert_int_eq(dq_steal(&d, &it), DQ_OK);
    ck_assert_uint_eq(it.w[0], 0); /* thieves take the oldest */
    ck_assert(dq_pop(&d, &it));
    ck_assert_uint_eq(it.w[0], 999); /* the owner takes the newest */
    uint64_t expect = 998;
    while (dq_pop(&d, &it)) {
        ck_assert(item_ok(&it));
        ck_assert_uint_eq(it.w[0], expect--);
    }
    ck_assert_uint_eq(expect, 0);
    ck_assert_int_eq(dq_steal(&d, &it), DQ_EMPTY);
    dq_fini(&d);
}
END_TEST

#define N_ITEMS 200000
static sched_deque shared;
static atomic_int done;
static unsigned char *taken;

static void *thief(void *arg)
{
    (void)arg;
    long n = 0;
    sched_item it;
    while (!atomic_load(&done) || dq_size(&shared) > 0) {
        if (dq_steal(&shared, &it) == DQ_OK) {
            if (!item_ok(&it) || it.w[0] >= N_ITEMS || taken[it.w[0]]++)
                return (void *)-1L;
            n++;
        }
    }
    return (void *)n;
}

START_TEST(concurrent_steals_take_each_item_once)
{
    ck_assert(dq_init(&shared, NULL));
    taken = calloc(N_ITEMS, 1);
    atomic_store(&done, 0);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, thief, NULL);
    long mine = 0;
    sched_item it;
    for (uint64_t i = 0; i < N_ITEMS; i++) {
        it = item(i);
        ck_assert(dq_push(&shared, &it));
        if (i % 3 == 0 && dq_pop(&shared, &it)) { /* the owner takes some back */
            ck_assert(item_ok(&it));
            ck_assert_int_eq(taken[it.w[0]]++, 0);
            mine++;
        }
    }
    while (dq_pop(&shared, &it)) {
        ck_assert(item_ok(&it));
        ck_assert_int_eq(taken[it.w[0]]++, 0);
        mine++;
    }
    atomic_store(&done, 1);
    long total = mine;
    for (int i = 0; i < 2; i++) {
        void *r;
        pthread_join(th[i], &r);
        ck_assert_int_ge((long)r, 0);
        total += (long)r;
    }
    ck_assert_int_eq(total, N_ITEMS);
    for (long i = 0; i < N_ITEMS; i++)
        ck_assert_int_eq(taken[i], 1);
    free(taken);
    dq_fini(&shared);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("deque");
    TCase *tc = tcase_create("chase-lev");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, owner_lifo_thief_fifo_and_growth);
    tcase_add_test(tc, concurrent_steals_take_each_item_once);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
