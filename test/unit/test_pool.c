/* test/unit/test_pool.c — the per-device memory pools: size classes, reuse,
 * large blocks by recency, the allocation hook, closing with blocks still out, failures, and many
 * threads at once (run under TSan by `make tsan`). */
#include <pthread.h>
#include <string.h>

#include "devices/pool.h"
#include "testutil.h"

START_TEST(test_class_sizes)
{
    ck_assert_uint_eq(dev_pool_class_size(1), 64);
    ck_assert_uint_eq(dev_pool_class_size(64), 64);
    ck_assert_uint_eq(dev_pool_class_size(65), 80);
    ck_assert_uint_eq(dev_pool_class_size(80), 80);
    ck_assert_uint_eq(dev_pool_class_size(81), 96);
    ck_assert_uint_eq(dev_pool_class_size(128), 128);
    ck_assert_uint_eq(dev_pool_class_size(129), 160);
    ck_assert_uint_eq(dev_pool_class_size(1000), 1024);
    ck_assert_uint_eq(dev_pool_class_size(1025), 1280);
    ck_assert_uint_eq(dev_pool_class_size((size_t)1 << 30), (size_t)1 << 30);
    ck_assert_uint_eq(dev_pool_class_size(((size_t)1 << 30) + 1), ((size_t)1 << 30) + 1);
    /* every class holds what maps to it and wastes at most a fifth */
    for (size_t n = 1; n < 100000; n += 7) {
        size_t c = dev_pool_class_size(n);
        ck_assert_uint_ge(c, n);
        ck_assert(n <= 64 || c - n < c / 5 + 1);
        ck_assert_uint_eq(dev_pool_class_size(c), c);
    }
}
END_TEST

START_TEST(test_reuse_and_stats)
{
    tu_alloc ta = {.countdown = -1};
    tfvm_allocator a = tu_allocator(&ta);
    dev_pool *p;
    ck_assert_int_eq(dev_pool_new(&a, NULL, &p), TFVM_OK);
    ck_assert_int_eq(dev_pool_device(p), DEV_CPU);
    void *b1 = dev_pool_get(p, 100), *b2 = dev_pool_get(p, 100);
    ck_assert_ptr_nonnull(b1);
    ck_assert_ptr_ne(b1, b2);
    memset(b1, 1, 100); /* the whole class is usable: 112 bytes */
    memset(b2, 2, 112);
    dev_pool_put(p, b1, 100);
    dev_pool_put(p, b2, 100);
    long allocs = ta.allocs; /* (the free list's array was one) */
    /* same class (97..112): the freed blocks come back, last in first out */
    void *c1 = dev_pool_get(p, 110), *c2 = dev_pool_get(p, 97);
    ck_assert_ptr_eq(c1, b2);
    ck_assert_ptr_eq(c2, b1);
    ck_assert_int_eq(ta.allocs, allocs);
    dev_pool_stats s;
    dev_pool_get_stats(p, &s);
    ck_assert_uint_eq(s.hits, 2);
    ck_assert_uint_eq(s.misses, 2);
    ck_assert_uint_eq(s.cached, 0);
    dev_pool_put(p, c1, 110);
    dev_pool_get_stats(p, &s);
    ck_assert_uint_eq(s.cached, 112);
    /* trim frees the cache; the block still out is untouched */
    dev_pool_trim(p);
    dev_pool_get_stats(p, &s);
    ck_assert_uint_eq(s.cached, 0);
    dev_pool_put(p, c2, 97);
    dev_pool_close(p);
    ck_assert_int_eq(ta.live, 0);
    ck_assert_int_eq(ta.blocks, 0);
}
END_TEST

START_TEST(test_close_with_blocks_out)
{
    tu_alloc ta = {.countdown = -1};
    tfvm_allocator a = tu_allocator(&ta);
    dev_pool *p;
    ck_assert_int_eq(dev_pool_new(&a, NULL, &p), TFVM_OK);
    void *big = dev_pool_get(p, ((size_t)1 << 20) + 3);
    void *small = dev_pool_get(p, 10);
    void *cached = dev_pool_get(p, 5000);
    dev_pool_put(p, cached, 5000);
    dev_pool_close(p); /* the cached block goes now, the pool stays for the other two */
    ck_assert_int_gt(ta.live, 0);
    dev_pool_put(p, small, 10);
    ck_assert_int_gt(ta.live, 0);
    dev_pool_put(p, big, ((size_t)1 << 20) + 3); /* the last block frees the pool */
    ck_assert_int_eq(ta.live, 0);
    dev_pool_close(NULL);
}
END_TEST

START_TEST(test_allocator_hook)
{
    tu_alloc ta = {.countdown = -1};
    tfvm_allocator a = tu_allocator(&ta);
    dev_pool *p;
    ck_assert_int_eq(dev_pool_new(&a, NULL, &p), TFVM_OK);
    tfvm_allocator h = dev_pool_allocator(p);
    char *x = ut_alloc(&h, 50);
    ck_assert_ptr_nonnull(x);
    memcpy(x, "hello", 6);
    ck_assert_ptr_eq(ut_realloc(&h, x, 50, 60), x); /* same class: in place */
    char *y = ut_realloc(&h, x, 60, 5000);
    ck_assert_ptr_nonnull(y);
    ck_assert_str_eq(y, "hello");
    /* a tensor made through the hook goes back to the pool when freed */
    int64_t dims[2] = {3, 4};
    tfvm_tensor *t = dev_tensor_alloc(&h, TFVM_F32, 2, dims);
    ck_assert_ptr_nonnull(t);
    tfvm_tensor_free(t);
    long allocs = ta.allocs;
    t = dev_tensor_alloc(&h, TFVM_F32, 2, dims);
    ck_assert_int_eq(ta.allocs, allocs); /* from the free list */
    ut_free(&h, y, 5000);
    dev_pool_close(p);
    ck_assert_int_gt(ta.live, 0); /* the tensor outlives the pool's owner */
    tfvm_tensor_free(t);
    ck_assert_int_eq(ta.live, 0);
}
END_TEST

START_TEST(test_out_of_memory)
{
    tu_alloc ta = {.countdown = 0};
    tfvm_allocator a = tu_allocator(&ta);
    dev_pool *p;
    ck_assert_int_eq(dev_pool_new(&a, NULL, &p), TFVM_ERR_NOMEM);
    ta.countdown = 1; /* the pool itself, then nothing */
    ck_assert_int_eq(dev_pool_new(&a, NULL, &p), TFVM_OK);
    ck_assert_ptr_null(dev_pool_get(p, 100));
    /* a free list that cannot grow frees the block instead */
    ta.countdown = 1;
    void *b = dev_pool_get(p, 100);
    ck_assert_ptr_nonnull(b);
    dev_pool_put(p, b, 100);
    dev_pool_stats s;
    dev_pool_get_stats(p, &s);
    ck_assert_uint_eq(s.cached, 0);
    dev_pool_close(p);
    ck_assert_int_eq(ta.live, 0);
}
END_TEST

/* Host blocks above 64 KiB go by recency: a request takes the block given
 * back last among its class and the four above it (at most twice its
 * size), and the block goes back to its own class whatever it served. */
START_TEST(test_near_blocks)
{
    tu_alloc ta = {.countdown = -1};
    tfvm_allocator a = tu_allocator(&ta);
    dev_pool *p;
    ck_assert_int_eq(dev_pool_new(&a, NULL, &p), TFVM_OK);
    const size_t small = 300 << 10, mid = 500 << 10, big = 700 << 10; /* classes 320, 512, 768 KiB */
    ck_assert_uint_eq(dev_pool_class_size(small), 320 << 10);
    ck_assert_uint_eq(dev_pool_class_size(mid), 512 << 10);
    ck_assert_uint_eq(dev_pool_class_size(big), 768 << 10);
    char *x = dev_pool_get(p, small), *y = dev_pool_get(p, mid), *z = dev_pool_get(p, big);
    memset(x, 1, 320 << 10);
    memset(y, 2, 512 << 10);
    memset(z, 3, 768 << 10);
    dev_pool_put(p, x, small);
    dev_pool_put(p, y, mid);
    /* y was given back last and is at most twice the request: it serves it */
    ck_assert_ptr_eq(dev_pool_get(p, small), y);
    ck_assert_ptr_eq(dev_pool_get(p, small), x); /* then the one of its own class */
    dev_pool_stats s;
    dev_pool_get_stats(p, &s);
    ck_assert_uint_eq(s.cached, 0);
    /* y goes back to its own class, as its own size, though it served 300 KiB */
    dev_pool_put(p, y, small);
    dev_pool_get_stats(p, &s);
    ck_assert_uint_eq(s.cached, 512 << 10);
    ck_assert_ptr_eq(dev_pool_get(p, mid), y);
    /* z, five classes up (2.4 times the request), is not taken even when newest */
    dev_pool_put(p, z, big);
    long allocs = ta.allocs; /* (z's class has its free list now) */
    char *w = dev_pool_get(p, small);
    ck_assert_ptr_ne(w, z);
    ck_assert_int_eq(ta.allocs, allocs + 1);
    ck_assert_ptr_eq(dev_pool_get(p, big), z);
    /* below 64 KiB, classes stay apart: a newer larger block does not serve */
    char *u = dev_pool_get(p, 40 << 10), *v = dev_pool_get(p, 50 << 10);
    dev_pool_put(p, u, 40 << 10);
    dev_pool_put(p, v, 50 << 10);
    ck_assert_ptr_eq(dev_pool_get(p, 40 << 10), u);
    dev_pool_put(p, u, 40 << 10);
    /* the hook resizes in place within the block's room: y (512 KiB) served
     * 300 KiB, so 450 KiB fits; 200 KiB is five classes down and moves */
    tfvm_allocator h = dev_pool_allocator(p);
    dev_pool_put(p, y, mid);
    char *r = ut_alloc(&h, small);
    ck_assert_ptr_eq(r, y);
    ck_assert_ptr_eq(ut_realloc(&h, r, small, 450 << 10), y);
    char *q = ut_realloc(&h, r, 450 << 10, 200 << 10);
    ck_assert_ptr_ne(q, y);
    ck_assert_int_eq(q[0], 2); /* the contents moved with it */
    ut_free(&h, q, 200 << 10);
    dev_pool_put(p, x, small);
    dev_pool_put(p, w, small);
    dev_pool_put(p, z, big);
    dev_pool_close(p);
    ck_assert_int_eq(ta.live, 0); /* headers and all */
    ck_assert_int_eq(ta.blocks, 0);
}
END_TEST

/* Several threads take and give back blocks of mixed sizes, some freed by
 * another thread than the one that took them. */
typedef struct pool_job {
    dev_pool *p;
    unsigned seed;
    void *handoff[64];
    size_t handoff_n[64];
} pool_job;

static void *pool_worker(void *arg)
{
    pool_job *j = arg;
    void *mine[16] = {0};
    size_t size[16] = {0};
    unsigned s = j->seed;
    for (int i = 0; i < 20000; i++) {
        s = s * 1103515245u + 12345u;
        int k = (int)((s >> 16) % 16);
        if (mine[k]) {
            ((unsigned char *)mine[k])[size[k] - 1] ^= 1;
            dev_pool_put(j->p, mine[k], size[k]);
            mine[k] = NULL;
        } else {
            /* one slot in 16 holds large blocks, which go by recency */
            size[k] = k ? 1 + (s >> 8) % 9000 : ((size_t)60 << 10) + (s >> 8) % (200 << 10);
            mine[k] = dev_pool_get(j->p, size[k]);
            ck_assert_ptr_nonnull(mine[k]);
            memset(mine[k], (int)k, size[k]);
        }
    }
    for (int k = 0; k < 16; k++) {
        j->handoff[k] = mine[k];
        j->handoff_n[k] = size[k];
    }
    return NULL;
}

START_TEST(test_threads)
{
    dev_pool *p;
    ck_assert_int_eq(dev_pool_new(NULL, NULL, &p), TFVM_OK);
    pool_job jobs[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].p = p;
        jobs[i].seed = 17u * (unsigned)i + 1u;
        ck_assert_int_eq(pthread_create(&t[i], NULL, pool_worker, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    dev_pool_stats s;
    dev_pool_get_stats(p, &s);
    ck_assert_uint_gt(s.hits, s.misses); /* steady state: mostly reuse */
    dev_pool_close(p);
    /* blocks still out after close are given back by another thread */
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 16; k++)
            dev_pool_put(p, jobs[i].handoff[k], jobs[i].handoff_n[k]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_class_sizes);
    tcase_add_test(tc, test_reuse_and_stats);
    tcase_add_test(tc, test_close_with_blocks_out);
    tcase_add_test(tc, test_allocator_hook);
    tcase_add_test(tc, test_out_of_memory);
    tcase_add_test(tc, test_near_blocks);
    tcase_add_test(tc, test_threads);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
