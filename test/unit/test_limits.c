/* test_limits.c — what a hostile or huge model file meets (docs/limits.md):
 * protobuf nesting past IMP_PB_MAX_DEPTH in both importers, and inputs
 * generated here (never committed) at and past each limit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf.pb-c.h"
#include "import/pb.h"
#include "testutil.h"

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* `levels` messages nested through length-delimited fields, outermost
 * first: level k is field ids[k % n_ids] of the one around it (ids of
 * fields below 16: a one-byte key). The innermost message is empty except
 * for `leaf` bytes. Malloc'd; *len its size. */
static uint8_t *nested(const unsigned *ids, size_t n_ids, size_t levels, const uint8_t *leaf, size_t leaf_len,
                       size_t *len)
{
    size_t *inner = malloc((levels + 1) * sizeof *inner); /* inner[k]: the bytes of level k's content */
    inner[levels] = leaf_len;
    for (size_t k = levels; k-- > 0;)
        inner[k] = 1 + varint_len(inner[k + 1]) + inner[k + 1];
    *len = inner[0];
    uint8_t *buf = malloc(*len), *p = buf;
    for (size_t k = 0; k < levels; k++) {
        *p++ = (uint8_t)(ids[k % n_ids] << 3 | 2);
        p = put_varint(p, inner[k + 1]);
    }
    memcpy(p, leaf, leaf_len);
    free(inner);
    return buf;
}

/* The innermost message holds an unknown field (15 = 1): not empty, so the
 * scan enters it, and harmless to the unpacker. */
static const uint8_t LEAF[] = {15 << 3, 1};

/* ModelProto.graph (7), then GraphProto.node (1), NodeProto.attribute (5),
 * AttributeProto.g (6) over and over: subgraphs in attributes. `levels`
 * messages below the model. */
static tfvm_status import_onnx(size_t levels, tfvm_error *err)
{
    static const unsigned cycle[] = {1, 5, 6};
    size_t inner_len;
    uint8_t *inner = nested(cycle, 3, levels - 1, LEAF, sizeof LEAF, &inner_len);
    uint8_t *model = malloc(inner_len + 16), *p = model;
    *p++ = 7 << 3 | 2;
    p = put_varint(p, inner_len);
    memcpy(p, inner, inner_len);
    p += inner_len;
    tfvm_program *prog = NULL;
    tfvm_status st = tfvm_program_import_onnx(model, (size_t)(p - model), "deep.onnx", NULL, NULL, &prog, err);
    tfvm_program_free(prog);
    free(inner);
    free(model);
    return st;
}

/* 20,000 nested messages (80 KB) once overflowed the stack inside
 * protobuf-c; now refused before it unpacks, at the first level past 100. */
START_TEST(onnx_nesting_refused)
{
    tfvm_error err;
    ck_assert_int_eq(import_onnx(20000, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, "deep.onnx: bad .onnx file (messages nested deeper than 100 at byte 400)");
    ck_assert_int_eq(import_onnx(101, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, "deep.onnx: bad .onnx file (messages nested deeper than 100 at byte 238)");
    /* 100: unpacked; refused later, for what it is (a node without an op) */
    ck_assert_int_ne(import_onnx(100, &err), TFVM_OK);
    ck_assert_ptr_null(strstr(err.message, "nested deeper"));
}
END_TEST

/* GraphDef.node (1), NodeDef.attr (5); then AttrEntry.value (2),
 * AttrValue.func (10), NameAttrList.attr (2) over and over. */
static tfvm_status import_tf(size_t levels, tfvm_error *err)
{
    size_t len;
    static const unsigned cycle[] = {2, 10, 2};
    uint8_t *inner = nested(cycle, 3, levels - 2, LEAF, sizeof LEAF, &len);
    uint8_t *g = malloc(len + 32), *p = g;
    *p++ = 1 << 3 | 2;
    p = put_varint(p, 1 + varint_len(len) + len);
    *p++ = 5 << 3 | 2;
    p = put_varint(p, len);
    memcpy(p, inner, len);
    p += len;
    tfvm_program *prog = NULL;
    tfvm_status st = tfvm_program_import_tf(g, (size_t)(p - g), "deep.pb", NULL, NULL, &prog, err);
    tfvm_program_free(prog);
    free(inner);
    free(g);
    return st;
}

START_TEST(tf_nesting_refused)
{
    tfvm_error err;
    ck_assert_int_eq(import_tf(20000, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, "deep.pb: bad GraphDef (messages nested deeper than 100 at byte 400)");
    ck_assert_int_eq(import_tf(101, &err), TFVM_ERR_FORMAT);
    ck_assert_str_eq(err.message, "deep.pb: bad GraphDef (messages nested deeper than 100 at byte 238)");
    ck_assert_int_ne(import_tf(100, &err), TFVM_OK);
    ck_assert_ptr_null(strstr(err.message, "nested deeper"));
}
END_TEST

/* The scan itself: a bytes field is not a message (its bytes may look like
 * one), and bad bytes are left to the unpacker. */
START_TEST(depth_scan)
{
    size_t at = 0, len;
    static const unsigned raw[] = {1, 5, 2, 2};
    /* NodeDef.attr -> AttrEntry.value -> AttrValue.s (2, bytes) holding deep "messages" */
    uint8_t *b = nested(raw, 4, 3000, NULL, 0, &len);
    ck_assert(imp_pb_depth_ok(&tfvm_tf__graph_def__descriptor, b, len, &at));
    free(b);
    static const uint8_t bad[] = {0x0a, 0xff}; /* a length that runs past the end */
    ck_assert(imp_pb_depth_ok(&tfvm_tf__graph_def__descriptor, bad, sizeof bad, &at));
    static const uint8_t group[] = {0x0b};
    ck_assert(imp_pb_depth_ok(&tfvm_tf__graph_def__descriptor, group, sizeof group, &at));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("limits");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, onnx_nesting_refused);
    tcase_add_test(tc, tf_nesting_refused);
    tcase_add_test(tc, depth_scan);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
