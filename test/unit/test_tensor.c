/* test/unit/test_tensor.c — the tensor API: shapes, validation, reference
 * counts (also across threads), the allocator hook and allocation failure. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "devices/tensor.h"
#include "devices/value.h"
#include "testutil.h"

START_TEST(test_new_basic)
{
    int64_t dims[2] = {2, 3};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, 2, dims, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(tfvm_tensor_dtype(t), TFVM_F32);
    ck_assert_int_eq(tfvm_tensor_rank(t), 2);
    ck_assert_int_eq(tfvm_tensor_dims(t)[0], 2);
    ck_assert_int_eq(tfvm_tensor_dims(t)[1], 3);
    ck_assert_int_eq(tfvm_tensor_count(t), 6);
    ck_assert_uint_eq(t->nbytes, 24);
    ck_assert_uint_eq((uintptr_t)tfvm_tensor_data(t) % 64, 0);
    ck_assert_ptr_eq(tfvm_tensor_cdata(t), tfvm_tensor_data(t));
    const unsigned char *bytes = tfvm_tensor_cdata(t);
    for (int i = 0; i < 24; i++)
        ck_assert_uint_eq(bytes[i], 0);
    float *f = tfvm_tensor_data(t);
    f[5] = 2.5f;
    ck_assert(f[5] == 2.5f);
    /* dims are copied: the caller's array may change afterwards. */
    dims[0] = 99;
    ck_assert_int_eq(tfvm_tensor_dims(t)[0], 2);
    tfvm_tensor_free(t);
}
END_TEST

START_TEST(test_every_dtype_and_rank)
{
    static const struct { tfvm_dtype d; size_t size; } dt[] = {
        {TFVM_BOOL, 1}, {TFVM_I32, 4}, {TFVM_I64, 8}, {TFVM_F32, 4}, {TFVM_F64, 8}};
    int64_t dims[TFVM_MAX_RANK] = {2, 1, 3, 1, 1, 2, 1, 1};
    for (size_t i = 0; i < sizeof dt / sizeof dt[0]; i++) {
        int64_t count = 1;
        for (int r = 0; r <= TFVM_MAX_RANK; r++) {
            if (r > 0)
                count *= dims[r - 1];
            tfvm_tensor *t = tfvm_tensor_new(dt[i].d, r, dims, NULL);
            ck_assert_ptr_nonnull(t);
            ck_assert_int_eq(tfvm_tensor_rank(t), r);
            ck_assert_int_eq(tfvm_tensor_count(t), count);
            ck_assert_uint_eq(t->nbytes, (size_t)count * dt[i].size);
            ck_assert_uint_eq((uintptr_t)t->data % 64, 0);
            tfvm_tensor_free(t);
        }
    }
}
END_TEST

START_TEST(test_rank0_and_empty)
{
    tfvm_tensor *s = tfvm_tensor_new(TFVM_I64, 0, NULL, NULL);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(tfvm_tensor_rank(s), 0);
    ck_assert_int_eq(tfvm_tensor_count(s), 1);
    ck_assert_int_eq(*(int64_t *)tfvm_tensor_data(s), 0);
    tfvm_tensor_free(s);

    int64_t dims[3] = {2, 0, 3};
    tfvm_tensor *e = tfvm_tensor_new(TFVM_F64, 3, dims, NULL);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(tfvm_tensor_count(e), 0);
    ck_assert_uint_eq(e->nbytes, 0);
    ck_assert_ptr_nonnull(tfvm_tensor_data(e));
    ck_assert_int_eq(tfvm_tensor_dims(e)[1], 0);
    tfvm_tensor_free(e);

    /* A zero dimension makes any other size valid: NumPy allows it too. */
    int64_t huge[3] = {INT64_MAX, 0, INT64_MAX};
    e = tfvm_tensor_new(TFVM_I32, 3, huge, NULL);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(tfvm_tensor_count(e), 0);
    tfvm_tensor_free(e);
}
END_TEST

START_TEST(test_invalid_shapes)
{
    int64_t d2[2] = {2, 3};
    ck_assert_ptr_null(tfvm_tensor_new((tfvm_dtype)0, 2, d2, NULL));
    ck_assert_ptr_null(tfvm_tensor_new((tfvm_dtype)14, 2, d2, NULL));
    ck_assert_ptr_null(tfvm_tensor_new(TFVM_I32, -1, d2, NULL));
    int64_t d9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    ck_assert_ptr_null(tfvm_tensor_new(TFVM_I32, 9, d9, NULL));
    ck_assert_ptr_null(tfvm_tensor_new(TFVM_I32, 2, NULL, NULL));
    int64_t neg[2] = {2, -1};
    ck_assert_ptr_null(tfvm_tensor_new(TFVM_I32, 2, neg, NULL));
    int64_t negz[2] = {0, -1}; /* a negative dimension is wrong even in an empty shape */
    ck_assert_ptr_null(tfvm_tensor_new(TFVM_I32, 2, negz, NULL));
    /* count overflows int64 */
    int64_t big[2] = {INT64_MAX, 2};
    ck_assert_ptr_null(tfvm_tensor_new(TFVM_BOOL, 2, big, NULL));
    int64_t big3[3] = {1LL << 32, 1LL << 32, 1};
    ck_assert_ptr_null(tfvm_tensor_new(TFVM_BOOL, 3, big3, NULL));
    /* count fits, bytes overflow size_t */
    int64_t bytes[1] = {1LL << 62};
    ck_assert_ptr_null(tfvm_tensor_new(TFVM_F64, 1, bytes, NULL));
    /* and the same directly through dev_tensor_alloc */
    ck_assert_ptr_null(dev_tensor_alloc(NULL, TFVM_F64, 1, bytes));
    ck_assert_ptr_null(dev_tensor_alloc(NULL, TFVM_I32, 9, d9));
}
END_TEST

START_TEST(test_refcount_and_allocator)
{
    tu_alloc ta = {.countdown = -1};
    tfvm_allocator a = tu_allocator(&ta);
    int64_t dims[1] = {100};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_I64, 1, dims, &a);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(ta.allocs, 1); /* header and data in one block */
    ck_assert(ta.live >= 800);
    ck_assert(tfvm_tensor_unique(t));
    ck_assert_ptr_eq(tfvm_tensor_ref(t), t);
    ck_assert_uint_eq(atomic_load(&t->refs), 2);
    ck_assert(!tfvm_tensor_unique(t));
    tfvm_tensor_free(t);
    ck_assert_int_eq(ta.frees, 0);
    ck_assert(tfvm_tensor_unique(t));
    ck_assert(!tfvm_tensor_unique(NULL));
    tfvm_tensor_free(t);
    ck_assert_int_eq(ta.frees, 1);
    ck_assert_int_eq(ta.live, 0); /* freed with the size it was allocated with */
}
END_TEST

START_TEST(test_alloc_failure)
{
    tu_alloc ta = {.countdown = 0, .once = true, .fresh_only = true}; /* fails the first allocation only */
    tfvm_allocator a = tu_allocator(&ta);
    int64_t dims[2] = {4, 4};
    ck_assert_ptr_null(tfvm_tensor_new(TFVM_F32, 2, dims, &a));
    ck_assert_int_eq(ta.live, 0);
    /* the next allocation succeeds */
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, 2, dims, &a);
    ck_assert_ptr_nonnull(t);
    tfvm_tensor_free(t);
    ck_assert_int_eq(ta.live, 0);
    ta.countdown = 0; /* the next allocation fails */
    ck_assert_ptr_null(dev_tensor_alloc(&a, TFVM_BOOL, 0, NULL));
    ck_assert_int_eq(ta.live, 0);
}
END_TEST

START_TEST(test_null_handles)
{
    tfvm_tensor_free(NULL);
    ck_assert_ptr_null(tfvm_tensor_ref(NULL));
    ck_assert_int_eq(tfvm_tensor_dtype(NULL), 0);
    ck_assert_int_eq(tfvm_tensor_rank(NULL), -1);
    ck_assert_ptr_null(tfvm_tensor_dims(NULL));
    ck_assert_int_eq(tfvm_tensor_count(NULL), 0);
    ck_assert_ptr_null(tfvm_tensor_data(NULL));
    ck_assert_ptr_null(tfvm_tensor_cdata(NULL));
    tfvm_value_release(NULL);
}
END_TEST

START_TEST(test_value_release)
{
    tu_alloc ta = {.countdown = -1};
    tfvm_allocator a = tu_allocator(&ta);
    tfvm_tensor *t = tfvm_tensor_new(TFVM_BOOL, 0, NULL, &a);
    ck_assert_ptr_nonnull(t);
    tfvm_value v = tfvm_tensor_value(t);
    ck_assert_int_eq(v.dtype, TFVM_BOOL);
    ck_assert_ptr_eq(v.tensor, t);
    tfvm_value_release(&v);
    ck_assert_ptr_null(v.tensor);
    ck_assert_int_eq(ta.frees, 1);
    tfvm_value_release(&v); /* twice is harmless */
    tfvm_value s = tfvm_i32(7);
    tfvm_value_release(&s);
    ck_assert_int_eq(s.as.i32, 7);
}
END_TEST

START_TEST(test_dev_value_refs)
{
    int64_t dims[1] = {3};
    tfvm_tensor *t = dev_tensor_alloc(NULL, TFVM_I32, 1, dims);
    ck_assert_ptr_nonnull(t);
    dev_value v = {.dtype = TFVM_I32, .is_tensor = 1, .u.t = t};
    dev_value_retain(&v);
    ck_assert_uint_eq(atomic_load(&t->refs), 2);
    dev_value w = v;
    dev_value_release(&w);
    ck_assert_uint_eq(atomic_load(&t->refs), 1);
    ck_assert_int_eq(w.is_tensor, 0);
    dev_value_release(&v);
}
END_TEST

START_TEST(test_shape_str)
{
    char buf[64];
    int64_t d[3] = {2, 3, 0};
    tfvm_tensor *t = dev_tensor_alloc(NULL, TFVM_F64, 3, d);
    ck_assert_str_eq(dev_shape_str(t, buf, sizeof buf), "[2, 3, 0]");
    ck_assert_str_eq(dev_shape_str(t, buf, 5), "[2, "); /* cut, still terminated */
    tfvm_tensor_free(t);
    t = dev_tensor_alloc(NULL, TFVM_F64, 0, NULL);
    ck_assert_str_eq(dev_shape_str(t, buf, sizeof buf), "[]");
    tfvm_tensor_free(t);
    t = dev_tensor_alloc(NULL, TFVM_BOOL, 1, (int64_t[1]){0});
    ck_assert_str_eq(dev_shape_str(t, buf, sizeof buf), "[0]");
    tfvm_tensor_free(t);
    t = dev_tensor_alloc(NULL, TFVM_BOOL, 2, (int64_t[2]){123456, 1});
    ck_assert_str_eq(dev_shape_str(t, buf, sizeof buf), "[123456, 1]");
    tfvm_tensor_free(t);
}
END_TEST

/* Reference counting is atomic: threads taking and dropping references to one
 * tensor never free it early (ASan would see it) nor leave a count behind. */
static void *ref_worker(void *arg)
{
    tfvm_tensor *t = arg;
    for (int i = 0; i < 100000; i++) {
        tfvm_tensor_ref(t);
        tfvm_tensor_free(t);
    }
    return NULL;
}

START_TEST(test_threads)
{
    tu_alloc ta = {.countdown = -1};
    tfvm_allocator a = tu_allocator(&ta);
    tfvm_tensor *t = tfvm_tensor_new(TFVM_I32, 0, NULL, &a);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, ref_worker, t), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    ck_assert_uint_eq(atomic_load(&t->refs), 1);
    ck_assert_int_eq(ta.frees, 0);
    tfvm_tensor_free(t);
    ck_assert_int_eq(ta.frees, 1);
}
END_TEST

/* dev_tensor_prep: make writes the form's bytes; count says how often */
typedef struct prep_ctx {
    int made;
    float value;
} prep_ctx;

static void prep_make(void *ctx, void *out)
{
    prep_ctx *c = ctx;
    c->made++;
    float *o = out;
    for (int i = 0; i < 16; i++)
        o[i] = c->value + (float)i;
}

START_TEST(test_prep_once_per_key)
{
    tu_alloc ta = {.countdown = -1};
    tfvm_allocator a = tu_allocator(&ta);
    int64_t dims[1] = {4};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, 1, dims, &a);
    prep_ctx c = {0, 10.0f};
    const int k1 = 1, k2 = 2;
    const float *f1 = dev_tensor_prep(t, &k1, sizeof k1, 16 * sizeof(float), prep_make, &c);
    ck_assert_ptr_nonnull(f1);
    ck_assert_int_eq((int)((uintptr_t)f1 % 64), 0);
    ck_assert_int_eq(c.made, 1);
    ck_assert_float_eq(f1[15], 25.0f);
    /* the same key: the same form, not made again */
    ck_assert_ptr_eq(dev_tensor_prep(t, &k1, sizeof k1, 16 * sizeof(float), prep_make, &c), f1);
    ck_assert_int_eq(c.made, 1);
    /* another key: a form of its own, the first kept */
    c.value = 100.0f;
    const float *f2 = dev_tensor_prep(t, &k2, sizeof k2, 16 * sizeof(float), prep_make, &c);
    ck_assert_ptr_nonnull(f2);
    ck_assert_ptr_ne(f2, f1);
    ck_assert_int_eq(c.made, 2);
    ck_assert_float_eq(f2[0], 100.0f);
    ck_assert_ptr_eq(dev_tensor_prep(t, &k1, sizeof k1, 16 * sizeof(float), prep_make, &c), f1);
    ck_assert_float_eq(f1[0], 10.0f);
    /* a key too long keeps nothing */
    char longkey[DEV_PREP_KEY + 1] = {0};
    ck_assert_ptr_null(dev_tensor_prep(t, longkey, sizeof longkey, 16, prep_make, &c));
    ck_assert_int_eq(c.made, 2);
    /* the forms go with the tensor, through its allocator */
    tfvm_tensor_free(t);
    ck_assert_int_eq(ta.live, 0);
    ck_assert_int_eq(ta.frees, 3);
}
END_TEST

START_TEST(test_prep_refused)
{
    tu_alloc ta = {.countdown = -1};
    tfvm_allocator a = tu_allocator(&ta);
    int64_t dims[1] = {4};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, 1, dims, &a);
    prep_ctx c = {0, 0.0f};
    const int k = 1;
    /* the allocation fails: NULL, nothing made, the next call may keep it */
    ta.countdown = 0;
    ta.once = true;
    ck_assert_ptr_null(dev_tensor_prep(t, &k, sizeof k, 64, prep_make, &c));
    ck_assert_int_eq(c.made, 0);
    ck_assert_ptr_nonnull(dev_tensor_prep(t, &k, sizeof k, 64, prep_make, &c));
    tfvm_tensor_free(t);
    ck_assert_int_eq(ta.live, 0);
    /* a tensor the API user may write keeps none */
    tfvm_tensor *u = tfvm_tensor_new(TFVM_F32, 1, dims, &a);
    atomic_store(&u->exposed, 1);
    ck_assert_ptr_null(dev_tensor_prep(u, &k, sizeof k, 64, prep_make, &c));
    ck_assert_int_eq(c.made, 1);
    tfvm_tensor_free(u);
    ck_assert_ptr_null(dev_tensor_prep(NULL, &k, sizeof k, 64, prep_make, &c));
    ck_assert_int_eq(ta.live, 0);
}
END_TEST

/* Four threads ask for the same form at once: all get one copy, and
 * whatever was made twice is freed. */
typedef struct prep_race {
    tfvm_tensor *t;
    const void *got;
} prep_race;

static void prep_make_plain(void *ctx, void *out)
{
    (void)ctx;
    memset(out, 7, 256);
}

static void *prep_worker(void *arg)
{
    prep_race *r = arg;
    const int k = 42;
    r->got = dev_tensor_prep(r->t, &k, sizeof k, 256, prep_make_plain, NULL);
    return NULL;
}

START_TEST(test_prep_threads)
{
    tu_alloc ta = {.countdown = -1};
    tfvm_allocator a = tu_allocator(&ta);
    int64_t dims[1] = {4};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, 1, dims, &a);
    pthread_t th[4];
    prep_race r[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (prep_race){t, NULL};
        ck_assert_int_eq(pthread_create(&th[i], NULL, prep_worker, &r[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++)
        ck_assert_ptr_eq(r[i].got, r[0].got);
    ck_assert_int_eq(((const unsigned char *)r[0].got)[255], 7);
    tfvm_tensor_free(t);
    ck_assert_int_eq(ta.live, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_new_basic);
    tcase_add_test(tc, test_every_dtype_and_rank);
    tcase_add_test(tc, test_rank0_and_empty);
    tcase_add_test(tc, test_invalid_shapes);
    tcase_add_test(tc, test_refcount_and_allocator);
    tcase_add_test(tc, test_alloc_failure);
    tcase_add_test(tc, test_null_handles);
    tcase_add_test(tc, test_value_release);
    tcase_add_test(tc, test_dev_value_refs);
    tcase_add_test(tc, test_shape_str);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_prep_once_per_key);
    tcase_add_test(tc, test_prep_refused);
    tcase_add_test(tc, test_prep_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(suite()); }
