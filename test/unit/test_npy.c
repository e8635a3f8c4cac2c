/* test/unit/test_npy.c — .npy reading and writing against files made by real
 * NumPy (test/data/npy, see make_fixtures.py there), and every error message
 * on hand-made hostile headers, both from memory and from files. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/half.h"
#include "devices/npy.h"
#include "testutil.h"

#define DATA "test/data/npy/"

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    *len = n;
    return buf;
}

static void write_all(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* A fresh temporary file name (the file exists, empty). */
static void temp_path(char *buf, size_t size)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, size, "%s/tfvm_npy_XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(buf);
    ck_assert_int_ge(fd, 0);
    close(fd);
}

/* ---- Good files ---------------------------------------------------------------- */
static const struct { const char *tag; int rank; int64_t dims[3]; } shapes[] = {
    {"r0", 0, {0}}, {"r1", 1, {5}}, {"r2", 2, {2, 3}}, {"r3", 3, {2, 3, 4}},
    {"e1", 1, {0}}, {"e3", 3, {2, 0, 3}},
};
static const struct { const char *name; tfvm_dtype dtype; } dtypes[] = {
    {"bool", TFVM_BOOL}, {"i32", TFVM_I32}, {"i64", TFVM_I64}, {"f32", TFVM_F32}, {"f64", TFVM_F64},
    {"u8", TFVM_U8},     {"i8", TFVM_I8},   {"i16", TFVM_I16}, {"u16", TFVM_U16}, {"u32", TFVM_U32},
    {"u64", TFVM_U64},   {"f16", TFVM_F16}, {"bf16", TFVM_BF16},
};

/* Element k of every good fixture (make_fixtures.py writes the same). */
static void check_value(const tfvm_tensor *t, int64_t k)
{
    const void *d = tfvm_tensor_cdata(t);
    switch (tfvm_tensor_dtype(t)) {
    case TFVM_BOOL: ck_assert_uint_eq(((const uint8_t *)d)[k], k % 3 == 0); break;
    case TFVM_I32: ck_assert_int_eq(((const int32_t *)d)[k], 7 * k - 20); break;
    case TFVM_I64: ck_assert_int_eq(((const int64_t *)d)[k], k * 1000000007LL - (1LL << 40)); break;
    case TFVM_F32: ck_assert(((const float *)d)[k] == (float)k * 0.5f - 3.25f); break;
    case TFVM_F64: ck_assert(((const double *)d)[k] == (double)k * 0.25 - 2.0); break;
    case TFVM_U8: ck_assert_int_eq(((const uint8_t *)d)[k], (k * 37 + 250) % 256); break;
    case TFVM_I8: ck_assert_int_eq(((const int8_t *)d)[k], (k * 29 + 100) % 256 - 128); break;
    case TFVM_I16: ck_assert_int_eq(((const int16_t *)d)[k], k * 517 - 3000); break;
    case TFVM_U16: ck_assert_int_eq(((const uint16_t *)d)[k], (k * 4099 + 60000) % 65536); break;
    case TFVM_U32: ck_assert_uint_eq(((const uint32_t *)d)[k], (uint32_t)(k * 2654435761u + 4000000000u)); break;
    case TFVM_U64:
        ck_assert_uint_eq(((const uint64_t *)d)[k], (uint64_t)k * ((UINT64_C(1) << 61) + 3) + (UINT64_C(1) << 63));
        break;
    case TFVM_F16: ck_assert(ut_f16_to_f32(((const uint16_t *)d)[k]) == (float)k * 0.5f - 3.25f); break;
    case TFVM_BF16: ck_assert(ut_bf16_to_f32(((const uint16_t *)d)[k]) == (float)k * 0.5f - 3.25f); break;
    }
}

START_TEST(test_load_fixtures)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++) {
            char path[256];
            snprintf(path, sizeof path, DATA "%s_%s.npy", dtypes[i].name, shapes[j].tag);
            tfvm_tensor *t = NULL;
            tfvm_error err;
            ck_assert_msg(tfvm_npy_load(path, NULL, &t, &err) == TFVM_OK, "%s: %s", path,
                          err.message);
            ck_assert_int_eq(tfvm_tensor_dtype(t), dtypes[i].dtype);
            ck_assert_int_eq(tfvm_tensor_rank(t), shapes[j].rank);
            int64_t count = 1;
            for (int r = 0; r < shapes[j].rank; r++) {
                ck_assert_int_eq(tfvm_tensor_dims(t)[r], shapes[j].dims[r]);
                count *= shapes[j].dims[r];
            }
            ck_assert_int_eq(tfvm_tensor_count(t), count);
            for (int64_t k = 0; k < count; k++)
                check_value(t, k);
            tfvm_tensor_free(t);
        }
    }
}
END_TEST

/* tfvm writes the header NumPy 2.x writes, so saving what we loaded gives
 * back the very bytes np.save produced. */
START_TEST(test_save_matches_numpy)
{
    char tmp[256];
    temp_path(tmp, sizeof tmp);
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++) {
            char path[256];
            snprintf(path, sizeof path, DATA "%s_%s.npy", dtypes[i].name, shapes[j].tag);
            tfvm_tensor *t = NULL;
            ck_assert_int_eq(tfvm_npy_load(path, NULL, &t, NULL), TFVM_OK);
            tfvm_error err;
            ck_assert_msg(tfvm_npy_save(tmp, t, &err) == TFVM_OK, "%s", err.message);
            size_t n1, n2;
            unsigned char *want = read_all(path, &n1), *got = read_all(tmp, &n2);
            ck_assert_msg(n1 == n2 && memcmp(want, got, n1) == 0, "%s differs from np.save", path);
            free(want);
            free(got);
            tfvm_tensor_free(t);
        }
    }
    remove(tmp);
}
END_TEST

START_TEST(test_save_exact_header)
{
    int64_t dims[2] = {2, 3};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_I32, 2, dims, NULL);
    unsigned char buf[DEV_NPY_WRITE_MAX];
    size_t n = dev_npy_header_write(t, buf);
    ck_assert_uint_eq(n, 128);
    ck_assert_mem_eq(buf, "\x93NUMPY\x01\x00\x76\x00", 10);
    const char *dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
    ck_assert_mem_eq(buf + 10, dict, strlen(dict));
    for (size_t i = 10 + strlen(dict); i < 127; i++)
        ck_assert_uint_eq(buf[i], ' ');
    ck_assert_uint_eq(buf[127], '\n');
    tfvm_tensor_free(t);

    /* rank 1 needs the tuple comma; a rank-8 shape of big dims still fits 1.0 */
    int64_t big[8] = {INT64_MAX, 0, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
    t = tfvm_tensor_new(TFVM_F64, 8, big, NULL);
    ck_assert_ptr_nonnull(t);
    n = dev_npy_header_write(t, buf);
    ck_assert_uint_eq(n % 64, 0);
    ck_assert(n <= DEV_NPY_WRITE_MAX);
    dev_npy_header h;
    ck_assert_int_eq(dev_npy_parse(buf, n, "x.npy", &h, NULL), TFVM_OK);
    ck_assert_int_eq(h.rank, 8);
    ck_assert_int_eq(h.dims[7], INT64_MAX);
    ck_assert_int_eq(h.count, 0);
    tfvm_tensor_free(t);
    t = tfvm_tensor_new(TFVM_BOOL, 1, (int64_t[1]){7}, NULL);
    n = dev_npy_header_write(t, buf);
    const char *d1 = "{'descr': '|b1', 'fortran_order': False, 'shape': (7,), }";
    ck_assert_mem_eq(buf + 10, d1, strlen(d1));
    tfvm_tensor_free(t);
}
END_TEST

START_TEST(test_round_trip_built)
{
    char tmp[256];
    temp_path(tmp, sizeof tmp);
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++) {
            tfvm_tensor *t = tfvm_tensor_new(dtypes[i].dtype, shapes[j].rank, shapes[j].dims, NULL);
            unsigned char *d = tfvm_tensor_data(t);
            for (size_t b = 0; b < t->nbytes; b++) /* any bytes; bool needs 0/1 */
                d[b] = dtypes[i].dtype == TFVM_BOOL ? (unsigned char)(b & 1)
                                                    : (unsigned char)(b * 37 + 11);
            ck_assert_int_eq(tfvm_npy_save(tmp, t, NULL), TFVM_OK);
            tfvm_tensor *u = NULL;
            ck_assert_int_eq(tfvm_npy_load(tmp, NULL, &u, NULL), TFVM_OK);
            ck_assert_int_eq(tfvm_tensor_dtype(u), dtypes[i].dtype);
            ck_assert_int_eq(tfvm_tensor_rank(u), shapes[j].rank);
            ck_assert_mem_eq(tfvm_tensor_dims(u), shapes[j].dims, sizeof(int64_t) * (size_t)shapes[j].rank);
            ck_assert_uint_eq(u->nbytes, t->nbytes);
            if (t->nbytes)
                ck_assert_mem_eq(u->data, t->data, t->nbytes);
            tfvm_tensor_free(t);
            tfvm_tensor_free(u);
        }
    }
    remove(tmp);
}
END_TEST

START_TEST(test_special_values)
{
    tfvm_tensor *t = NULL;
    ck_assert_int_eq(tfvm_npy_load(DATA "f64_special.npy", NULL, &t, NULL), TFVM_OK);
    ck_assert_int_eq(tfvm_tensor_count(t), 6);
    const double *d = tfvm_tensor_cdata(t);
    ck_assert(isnan(d[0]));
    ck_assert(isinf(d[1]) && d[1] > 0);
    ck_assert(isinf(d[2]) && d[2] < 0);
    ck_assert(d[3] == 0.0 && signbit(d[3]));
    ck_assert(d[4] == 1e308);
    ck_assert(d[5] == 5e-324);
    tfvm_tensor_free(t);
    ck_assert_int_eq(tfvm_npy_load(DATA "i32_limits.npy", NULL, &t, NULL), TFVM_OK);
    const int32_t *i = tfvm_tensor_cdata(t);
    ck_assert_int_eq(i[0], INT32_MIN);
    ck_assert_int_eq(i[1], INT32_MAX);
    ck_assert_int_eq(i[2], -1);
    ck_assert_int_eq(i[3], 0);
    tfvm_tensor_free(t);
}
END_TEST

START_TEST(test_versions)
{
    tfvm_tensor *t = NULL;
    ck_assert_int_eq(tfvm_npy_load(DATA "v2.npy", NULL, &t, NULL), TFVM_OK);
    ck_assert_int_eq(tfvm_tensor_dtype(t), TFVM_F64);
    ck_assert_int_eq(tfvm_tensor_rank(t), 2);
    ck_assert_int_eq(tfvm_tensor_dims(t)[0], 2);
    ck_assert_int_eq(tfvm_tensor_dims(t)[1], 3);
    for (int k = 0; k < 6; k++)
        check_value(t, k);
    tfvm_tensor_free(t);
    ck_assert_int_eq(tfvm_npy_load(DATA "v3.npy", NULL, &t, NULL), TFVM_OK);
    ck_assert_int_eq(tfvm_tensor_dtype(t), TFVM_I32);
    ck_assert_int_eq(tfvm_tensor_count(t), 5);
    for (int k = 0; k < 5; k++)
        check_value(t, k);
    tfvm_tensor_free(t);

    size_t n;
    unsigned char *img = read_all(DATA "v2.npy", &n);
    dev_npy_header h;
    ck_assert_int_eq(dev_npy_parse(img, n, "v2.npy", &h, NULL), TFVM_OK);
    ck_assert_int_eq(h.major, 2);
    ck_assert_uint_eq(h.header_len, 128);
    ck_assert_uint_eq(h.nbytes, 48);
    free(img);
}
END_TEST

/* ---- Bad files made by NumPy ----------------------------------------------------- */
START_TEST(test_fixture_errors)
{
    static const struct { const char *file; tfvm_status code; const char *msg; } cases[] = {
        {"fortran.npy", TFVM_ERR_FORMAT, "Fortran-order arrays are not supported"},
        {"bigendian.npy", TFVM_ERR_FORMAT, "big-endian arrays are not supported"},
        {"complex.npy", TFVM_ERR_FORMAT, "unsupported dtype '<c16'"},
        {"structured.npy", TFVM_ERR_FORMAT, "structured dtypes are not supported"},
        {"rank9.npy", TFVM_ERR_FORMAT, "arrays of rank 9 are not supported (maximum 8)"},
        {"truncated.npy", TFVM_ERR_FORMAT, "truncated data: expected 48 bytes, found 20"},
        {"trailing.npy", TFVM_ERR_FORMAT, "trailing data: expected 48 bytes, found 52"},
        {"header_cut.npy", TFVM_ERR_FORMAT, "truncated header: expected 128 bytes, found 40"},
        {"badbool.npy", TFVM_ERR_FORMAT, "bad bool value 2 at element 3 (must be 0 or 1)"},
        {"notnpy.npy", TFVM_ERR_FORMAT, "not a .npy file (bad magic)"},
        {"missing.npy", TFVM_ERR_IO, "No such file or directory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[256], want[512];
        snprintf(path, sizeof path, DATA "%s", cases[i].file);
        snprintf(want, sizeof want, "%s: %s", path, cases[i].msg);
        tfvm_tensor *t = (tfvm_tensor *)&t; /* must be reset to NULL */
        tfvm_error err;
        tfvm_status st = tfvm_npy_load(path, NULL, &t, &err);
        ck_assert_msg(st == cases[i].code, "%s: got %s", path, tfvm_status_name(st));
        ck_assert_int_eq(err.code, cases[i].code);
        ck_assert_str_eq(err.message, want);
        ck_assert_ptr_null(t);
        /* the in-memory decoder agrees (file errors aside) */
        if (cases[i].code == TFVM_ERR_IO)
            continue;
        size_t n;
        unsigned char *img = read_all(path, &n);
        ck_assert_int_eq(dev_npy_decode(img, n, path, NULL, &t, &err), cases[i].code);
        ck_assert_str_eq(err.message, want);
        ck_assert_ptr_null(t);
        free(img);
    }
}
END_TEST

/* ---- Hand-made headers ------------------------------------------------------------ */
/* Builds a format 1.0 image: preamble, `dict` verbatim (its length is the
 * header length), then `data_len` zero bytes. */
static unsigned char *image(const char *dict, size_t dict_len, size_t data_len, size_t *size)
{
    *size = 10 + dict_len + data_len;
    unsigned char *p = calloc(1, *size);
    ck_assert_ptr_nonnull(p);
    memcpy(p, "\x93NUMPY\x01\x00", 8);
    p[8] = (unsigned char)(dict_len & 0xff);
    p[9] = (unsigned char)(dict_len >> 8);
    memcpy(p + 10, dict, dict_len);
    return p;
}

/* Decodes img from memory as "x.npy" and from a file, expecting code and
 * message (after the "name: " prefix; NULL when code is TFVM_OK). */
static void expect(const unsigned char *img, size_t size, tfvm_status code, const char *msg,
                   const char *label)
{
    tfvm_tensor *t = NULL;
    tfvm_error err = {0};
    tfvm_status st = dev_npy_decode(img, size, "x.npy", NULL, &t, &err);
    char want[600];
    snprintf(want, sizeof want, "x.npy: %s", msg ? msg : "");
    ck_assert_msg(st == code, "%s: got %s (%s)", label, tfvm_status_name(st), err.message);
    if (code == TFVM_OK) {
        ck_assert_ptr_nonnull(t);
        tfvm_tensor_free(t);
    } else {
        ck_assert_ptr_null(t);
        ck_assert_msg(strcmp(err.message, want) == 0, "%s:\n got  %s\n want %s", label, err.message,
                      want);
    }
    char tmp[256];
    temp_path(tmp, sizeof tmp);
    write_all(tmp, img, size);
    st = tfvm_npy_load(tmp, NULL, &t, &err);
    ck_assert_msg(st == code, "%s (file): got %s (%s)", label, tfvm_status_name(st), err.message);
    if (code == TFVM_OK) {
        tfvm_tensor_free(t);
    } else {
        snprintf(want, sizeof want, "%s: %s", tmp, msg);
        ck_assert_msg(strcmp(err.message, want) == 0, "%s (file):\n got  %s\n want %s", label,
                      err.message, want);
    }
    remove(tmp);
}

static void expect_dict(const char *dict, size_t data_len, tfvm_status code, const char *msg)
{
    size_t size;
    unsigned char *img = image(dict, strlen(dict), data_len, &size);
    expect(img, size, code, msg, dict);
    free(img);
}

#define OK TFVM_OK
#define BAD TFVM_ERR_FORMAT

START_TEST(test_header_variants)
{
    /* Everything a Python dict literal writer might legitimately produce. */
    expect_dict("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n", 8, OK, NULL);
    expect_dict("{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"<f8\"}", 48, OK, NULL);
    expect_dict("{'descr':'<i8','fortran_order':False,'shape':(3,)}", 24, OK, NULL);
    expect_dict("\n{ 'descr' : '<f4' ,\t'fortran_order' : False , 'shape' : ( 1 , 2 , ) , }  \r\n",
                8, OK, NULL);
    expect_dict("{'descr': '|b1', 'fortran_order': False, 'shape': ()}", 1, OK, NULL);
    expect_dict("{'descr': '<b1', 'fortran_order': False, 'shape': ()}", 1, OK, NULL);
    expect_dict("{'descr': '>b1', 'fortran_order': False, 'shape': ()}", 1, OK, NULL);
    /* Fortran order where the layout is the same as C order */
    expect_dict("{'descr': '<i4', 'fortran_order': True, 'shape': (3,)}", 12, OK, NULL);
    expect_dict("{'descr': '<i4', 'fortran_order': True, 'shape': (1, 3, 1)}", 12, OK, NULL);
    expect_dict("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 0, 3)}", 0, OK, NULL);
    expect_dict("{'descr': '<i4', 'fortran_order': True, 'shape': ()}", 4, OK, NULL);
    /* empty arrays may have huge other dimensions */
    expect_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 99999999999, 99999999999, "
                "99999999999)}", 0, OK, NULL);

    size_t size;
    const char *d = "{'shape': (2L, 3L), 'fortran_order': False, 'descr': '<f4'}";
    unsigned char *img = image(d, strlen(d), 24, &size);
    dev_npy_header h;
    ck_assert_int_eq(dev_npy_parse(img, size, "x.npy", &h, NULL), TFVM_OK);
    ck_assert_int_eq(h.dtype, TFVM_F32);
    ck_assert_int_eq(h.rank, 2);
    ck_assert_int_eq(h.dims[0], 2);
    ck_assert_int_eq(h.dims[1], 3);
    ck_assert_int_eq(h.count, 6);
    ck_assert_uint_eq(h.nbytes, 24);
    ck_assert_uint_eq(h.header_len, 10 + strlen(d));
    free(img);
}
END_TEST

START_TEST(test_header_errors)
{
    /* dtypes */
    expect_dict("{'descr': '<c16', 'fortran_order': False, 'shape': ()}", 16, BAD,
                "unsupported dtype '<c16'");
    expect_dict("{'descr': '>f4', 'fortran_order': False, 'shape': ()}", 4, BAD,
                "big-endian arrays are not supported");
    expect_dict("{'descr': '>i8', 'fortran_order': False, 'shape': ()}", 8, BAD,
                "big-endian arrays are not supported");
    expect_dict("{'descr': '=f8', 'fortran_order': False, 'shape': ()}", 8, BAD,
                "unsupported dtype '=f8'");
    expect_dict("{'descr': '<f2', 'fortran_order': False, 'shape': ()}", 2, OK, NULL);
    expect_dict("{'descr': '<V2', 'fortran_order': False, 'shape': ()}", 2, OK, NULL); /* ml_dtypes' bfloat16 */
    expect_dict("{'descr': '<V4', 'fortran_order': False, 'shape': ()}", 4, BAD,
                "unsupported dtype '<V4'");
    expect_dict("{'descr': '<u8', 'fortran_order': False, 'shape': ()}", 8, OK, NULL);
    expect_dict("{'descr': '', 'fortran_order': False, 'shape': ()}", 0, BAD,
                "unsupported dtype ''");
    expect_dict("{'descr': '<\x01\x7f', 'fortran_order': False, 'shape': ()}", 0, BAD,
                "unsupported dtype '<\\x01\\x7f'");
    expect_dict("{'descr': 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'fortran_order': "
                "False, 'shape': ()}", 0, BAD,
                "unsupported dtype 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...'");
    expect_dict("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,)}", 4, BAD,
                "structured dtypes are not supported");
    /* layout and shape */
    expect_dict("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3)}", 24, BAD,
                "Fortran-order arrays are not supported");
    expect_dict("{'descr': '<i4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1)}",
                4, BAD, "arrays of rank 9 are not supported (maximum 8)");
    expect_dict("{'descr': '<i4', 'fortran_order': False, 'shape': (4294967296, 4294967296, "
                "4294967296)}", 0, BAD, "array too large (its size overflows)");
    expect_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,)}", 0,
                BAD, "array too large (its size overflows)");
    /* syntax; byte offsets count from the start of the file (the dict starts at 10) */
    expect_dict("{'descr': '<i4', 'fortran_order': False, 'shape': (5)}", 20, BAD,
                "bad header: 'shape' must be a tuple of integers at byte 60");
    expect_dict("{'descr': '<i4', 'fortran_order': False, 'shape': [2, 3]}", 24, BAD,
                "bad header: 'shape' must be a tuple of integers at byte 60");
    expect_dict("{'descr': '<i4', 'fortran_order': False, 'shape': (2, x)}", 8, BAD,
                "bad header: 'shape' must be a tuple of integers at byte 64");
    expect_dict("{'descr': '<i4', 'fortran_order': False, 'shape': (2 3)}", 24, BAD,
                "bad header: expected ',' or ')' in 'shape' at byte 63");
    expect_dict("{'descr': '<i4', 'fortran_order': False, 'shape': (-1,)}", 0, BAD,
                "bad header: negative dimension in 'shape' at byte 61");
    expect_dict("{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 0,
                BAD, "bad header: dimension too large in 'shape' at byte 61");
    expect_dict("{'descr': '<i4', 'fortran_order': 0, 'shape': ()}", 4, BAD,
                "bad header: 'fortran_order' must be True or False at byte 44");
    expect_dict("{'descr': '<i4', 'fortran_order': Falsey, 'shape': ()}", 4, BAD,
                "bad header: 'fortran_order' must be True or False at byte 44");
    expect_dict("{'descr': 5, 'fortran_order': False, 'shape': ()}", 4, BAD,
                "bad header: 'descr' must be a string at byte 20");
    expect_dict("{'descr': '<i4', 'fortran_order': False}", 4, BAD,
                "bad header: missing key 'shape'");
    expect_dict("{'fortran_order': False, 'shape': ()}", 4, BAD, "bad header: missing key 'descr'");
    expect_dict("{'descr': '<i4', 'shape': ()}", 4, BAD, "bad header: missing key 'fortran_order'");
    expect_dict("{'descr': '<i4', 'descr': '<i4', 'fortran_order': False, 'shape': ()}", 4, BAD,
                "bad header: duplicate key 'descr' at byte 27");
    expect_dict("{'descr': '<i4', 'fortran_order': False, 'shape': (), 'extra': 1}", 4, BAD,
                "bad header: unknown key 'extra' at byte 64");
    expect_dict("{'descr' '<i4'}", 4, BAD, "bad header: expected ':' at byte 19");
    expect_dict("{'descr': '<i4' 'fortran_order': False}", 4, BAD,
                "bad header: expected ',' or '}' at byte 26");
    expect_dict("{descr: 1}", 4, BAD, "bad header: expected a quoted key or '}' at byte 11");
    expect_dict("{'descr': '<i4', 'fortran_order': False, 'shape': ()} x", 4, BAD,
                "bad header: unexpected text after the dict at byte 64");
    expect_dict("{'descr': '<i4', 'fortran_order': False, 'shape': ()}}", 4, BAD,
                "bad header: unexpected text after the dict at byte 63");
    expect_dict("descr", 4, BAD, "bad header: expected '{' at byte 10");
    expect_dict("", 4, BAD, "bad header: expected '{' at byte 10");
    expect_dict("{'descr': '<i4", 4, BAD, "bad header: unterminated string at byte 20");
    expect_dict("{'descr': '<i4\n', 'fortran_order': False, 'shape': ()}", 4, BAD,
                "bad header: unterminated string at byte 20");
    expect_dict("{'descr': '<\\i4', 'fortran_order': False, 'shape': ()}", 4, BAD,
                "bad header: escape in string at byte 22");
    expect_dict("{'descr': '<i4', 'fortran_order': False, 'shape': ()", 4, BAD,
                "bad header: expected ',' or '}' at byte 62");
    expect_dict("{'descr': '<i4', 'fortran_order': False, 'shape': (", 4, BAD,
                "bad header: 'shape' must be a tuple of integers at byte 61");
    /* data */
    expect_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3)}", 20, BAD,
                "truncated data: expected 48 bytes, found 20");
    expect_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3)}", 49, BAD,
                "trailing data: expected 48 bytes, found 49");
    expect_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3)}", 0, BAD,
                "truncated data: expected 48 bytes, found 0");
    /* a header claiming a huge array in a tiny file is refused before allocating */
    expect_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,)}", 8, BAD,
                "truncated data: expected 8000000000000 bytes, found 8");
}
END_TEST

START_TEST(test_bool_data)
{
    const char *d = "{'descr': '|b1', 'fortran_order': False, 'shape': (4,)}";
    size_t size;
    unsigned char *img = image(d, strlen(d), 4, &size);
    img[size - 4] = 1;
    img[size - 1] = 1;
    expect(img, size, OK, NULL, "bool 1001");
    img[size - 2] = 255;
    expect(img, size, BAD, "bad bool value 255 at element 2 (must be 0 or 1)", "bool 255");
    free(img);
}
END_TEST

START_TEST(test_preamble_errors)
{
    static const struct { const char *bytes; size_t n; const char *msg; } cases[] = {
        {"", 0, "not a .npy file (bad magic)"},
        {"\x93NUMP", 5, "not a .npy file (bad magic)"},
        {"\x93NUMPX\x01\x00\x00\x00", 10, "not a .npy file (bad magic)"},
        {"PK\x03\x04", 4, "not a .npy file (bad magic)"},
        {"\x93NUMPY", 6, "truncated header: expected 10 bytes, found 6"},
        {"\x93NUMPY\x01", 7, "truncated header: expected 10 bytes, found 7"},
        {"\x93NUMPY\x01\x00\x05", 9, "truncated header: expected 10 bytes, found 9"},
        {"\x93NUMPY\x02\x00\x10\x00", 10, "truncated header: expected 12 bytes, found 10"},
        {"\x93NUMPY\x04\x00\x00\x00\x00\x00", 12, "unsupported .npy format version 4.0"},
        {"\x93NUMPY\x01\x01\x00\x00", 10, "unsupported .npy format version 1.1"},
        {"\x93NUMPY\x00\x00\x00\x00", 10, "unsupported .npy format version 0.0"},
        {"\x93NUMPY\x02\x00\xff\xff\xff\xff", 12,
         "bad header: length 4294967295 exceeds the limit of 1048564 bytes"},
        {"\x93NUMPY\x03\x00\x00\x00\x10\x00", 12,
         "bad header: length 1048576 exceeds the limit of 1048564 bytes"},
        {"\x93NUMPY\x01\x00\x64\x00{'descr'", 18, "truncated header: expected 110 bytes, found 18"},
        {"\x93NUMPY\x02\x00\x00\x01\x00\x00{", 13, "truncated header: expected 268 bytes, found 13"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[32];
        snprintf(label, sizeof label, "preamble case %zu", i);
        expect((const unsigned char *)cases[i].bytes, cases[i].n, BAD, cases[i].msg, label);
    }
}
END_TEST

START_TEST(test_io_errors)
{
    tfvm_tensor *t = NULL;
    tfvm_error err;
    ck_assert_int_eq(tfvm_npy_load("/nonexistent/dir/x.npy", NULL, &t, &err), TFVM_ERR_IO);
    ck_assert_str_eq(err.message, "/nonexistent/dir/x.npy: No such file or directory");
    ck_assert_int_eq(tfvm_npy_load("test/data", NULL, &t, &err), TFVM_ERR_IO);
    ck_assert_str_eq(err.message, "test/data: read error: Is a directory");
    ck_assert_int_eq(tfvm_npy_load("/dev/null", NULL, &t, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, "/dev/null: not a .npy file (bad magic)");
    ck_assert_int_eq(tfvm_npy_load(NULL, NULL, &t, &err), TFVM_ERR_ARGUMENT);
    ck_assert_int_eq(tfvm_npy_load("x.npy", NULL, NULL, &err), TFVM_ERR_ARGUMENT);
    ck_assert_int_eq(tfvm_npy_load("/nonexistent/x.npy", NULL, &t, NULL), TFVM_ERR_IO);

    tfvm_tensor *s = tfvm_tensor_new(TFVM_I32, 0, NULL, NULL);
    ck_assert_int_eq(tfvm_npy_save("/nonexistent/dir/x.npy", s, &err), TFVM_ERR_IO);
    ck_assert_str_eq(err.message, "/nonexistent/dir/x.npy: No such file or directory");
    ck_assert_int_eq(tfvm_npy_save("x.npy", NULL, &err), TFVM_ERR_ARGUMENT);
    ck_assert_int_eq(tfvm_npy_save(NULL, s, &err), TFVM_ERR_ARGUMENT);
    if (access("/dev/full", W_OK) == 0) { /* ENOSPC on write */
        ck_assert_int_eq(tfvm_npy_save("/dev/full", s, &err), TFVM_ERR_IO);
        ck_assert_str_eq(err.message, "/dev/full: write failed: No space left on device");
    }
    tfvm_tensor_free(s);
}
END_TEST

/* Every allocation of a load can fail; each failure is a clean NOMEM. */
START_TEST(test_nomem)
{
    for (int from_file = 0; from_file < 2; from_file++) {
        size_t n;
        unsigned char *img = read_all(DATA "f64_r3.npy", &n);
        int fails = 0;
        for (long k = 1;; k++) {
            /* fresh allocations 1 .. k-1 go through, the k-th and later ones fail */
            tu_alloc ta = {.countdown = k - 1, .fresh_only = true};
            tfvm_allocator a = tu_allocator(&ta);
            tfvm_tensor *t = NULL;
            tfvm_error err;
            tfvm_status st = from_file ? tfvm_npy_load(DATA "f64_r3.npy", &a, &t, &err)
                                       : dev_npy_decode(img, n, "f64_r3.npy", &a, &t, &err);
            if (st == TFVM_OK) {
                ck_assert_int_eq(tfvm_tensor_count(t), 24);
                tfvm_tensor_free(t);
                ck_assert_int_eq(ta.live, 0);
                break;
            }
            ck_assert_int_eq(st, TFVM_ERR_NOMEM);
            ck_assert_ptr_null(t);
            ck_assert_int_eq(ta.live, 0);
            ck_assert(strstr(err.message, "out of memory") != NULL);
            fails++;
            ck_assert_int_lt(k, 100);
        }
        ck_assert_int_eq(fails, from_file ? 2 : 1); /* header buffer, tensor */
        free(img);
    }
}
END_TEST

/* Tensors whose data is in device memory never reach the API (results come
 * back on the host); saving one anyway is refused, not a crash. */
START_TEST(test_device_tensor)
{
    int64_t dims[1] = {4};
    tfvm_tensor *t = tfvm_tensor_new(TFVM_F32, 1, dims, NULL);
    ck_assert_ptr_nonnull(tfvm_tensor_data(t));
    t->device = 1; /* pretend: as if its data lived on the GPU */
    ck_assert_ptr_null(tfvm_tensor_data(t));
    ck_assert_ptr_null(tfvm_tensor_cdata(t));
    tfvm_error err;
    ck_assert_int_eq(tfvm_npy_save("/nonexistent/x.npy", t, &err), TFVM_ERR_ARGUMENT);
    ck_assert_str_eq(err.message, "/nonexistent/x.npy: the tensor's data is in device memory");
    t->device = 0;
    tfvm_tensor_free(t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_load_fixtures);
    tcase_add_test(tc, test_save_matches_numpy);
    tcase_add_test(tc, test_save_exact_header);
    tcase_add_test(tc, test_round_trip_built);
    tcase_add_test(tc, test_special_values);
    tcase_add_test(tc, test_versions);
    tcase_add_test(tc, test_fixture_errors);
    tcase_add_test(tc, test_header_variants);
    tcase_add_test(tc, test_header_errors);
    tcase_add_test(tc, test_bool_data);
    tcase_add_test(tc, test_preamble_errors);
    tcase_add_test(tc, test_io_errors);
    tcase_add_test(tc, test_nomem);
    tcase_add_test(tc, test_device_tensor);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(suite()); }
