/* vm/format.c — the one printed form of a value, used by `tfvm run`, traces,
 * errors and the debugger: integers in decimal, floats with the fewest digits
 * that read back to the same number, bools as true/false, tensors NumPy-like. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/half.h"
#include "vm.h"

/* Shortest "%.*g" that round-trips; always shows it is a float ("3.0"). */
static void format_float(double x, bool single, ut_buf *out)
{
    if (isnan(x)) {
        ut_buf_printf(out, "nan");
        return;
    }
    if (isinf(x)) {
        ut_buf_printf(out, x < 0 ? "-inf" : "inf");
        return;
    }
    char buf[48];
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        double back = strtod(buf, NULL);
        if (single ? (float)back == (float)x : back == x)
            break;
    }
    /* Like Python's repr: positional notation for 1e-4 <= |x| < 1e16. */
    /* the decimal exponent of x rounded to prec digits (log10 can be off by one) */
    snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
    int e10 = atoi(strchr(buf, 'e') + 1);
    if (e10 >= -4 && e10 < 16)
        snprintf(buf, sizeof buf, "%.*f", prec - 1 - e10 > 0 ? prec - 1 - e10 : 0, x);
    else
        snprintf(buf, sizeof buf, "%.*g", prec, x);
    ut_buf_printf(out, "%s", buf);
    if (!strpbrk(buf, ".e"))
        ut_buf_printf(out, ".0");
}

static void format_elem(tfvm_dtype dt, const unsigned char *p, ut_buf *out)
{
    switch (dt) {
    case TFVM_BOOL: ut_buf_printf(out, "%s", *p ? "true" : "false"); break;
    case TFVM_I32: { int32_t v; memcpy(&v, p, 4); ut_buf_printf(out, "%d", v); break; }
    case TFVM_I64: { int64_t v; memcpy(&v, p, 8); ut_buf_printf(out, "%lld", (long long)v); break; }
    case TFVM_F32: { float v; memcpy(&v, p, 4); format_float(v, true, out); break; }
    case TFVM_F64: { double v; memcpy(&v, p, 8); format_float(v, false, out); break; }
    case TFVM_U8: ut_buf_printf(out, "%u", (unsigned)*p); break;
    case TFVM_I8: ut_buf_printf(out, "%d", (int)(int8_t)*p); break;
    case TFVM_I16: { int16_t v; memcpy(&v, p, 2); ut_buf_printf(out, "%d", v); break; }
    case TFVM_U16: { uint16_t v; memcpy(&v, p, 2); ut_buf_printf(out, "%u", (unsigned)v); break; }
    case TFVM_U32: { uint32_t v; memcpy(&v, p, 4); ut_buf_printf(out, "%u", (unsigned)v); break; }
    case TFVM_U64: { uint64_t v; memcpy(&v, p, 8); ut_buf_printf(out, "%llu", (unsigned long long)v); break; }
    case TFVM_F16: { uint16_t v; memcpy(&v, p, 2); format_float(ut_f16_to_f32(v), true, out); break; }
    case TFVM_BF16: { uint16_t v; memcpy(&v, p, 2); format_float(ut_bf16_to_f32(v), true, out); break; }
    }
}

/* NumPy summarises arrays of more than 1000 elements with 3 edge items. */
#define SUMMARY_THRESHOLD 1000
#define EDGE_ITEMS 3

static void format_dim(const tfvm_tensor *t, int d, const unsigned char *p, size_t stride_bytes[], bool summary,
                       ut_buf *out)
{
    int64_t n = t->dims[d];
    ut_buf_append(out, "[", 1);
    for (int64_t i = 0; i < n; i++) {
        if (summary && n > 2 * EDGE_ITEMS && i == EDGE_ITEMS) {
            ut_buf_printf(out, ", ...");
            i = n - EDGE_ITEMS - 1;
            continue;
        }
        if (i > 0)
            ut_buf_append(out, ", ", 2);
        const unsigned char *q = p + (size_t)i * stride_bytes[d];
        if (d + 1 == t->rank)
            format_elem((tfvm_dtype)t->dtype, q, out);
        else
            format_dim(t, d + 1, q, stride_bytes, summary, out);
    }
    ut_buf_append(out, "]", 1);
}

void vm_format_value(const dev_value *v, ut_buf *out)
{
    if (v->dead) {
        ut_buf_printf(out, "<dead>");
        return;
    }
    if (!v->is_tensor) {
        unsigned char raw[8];
        memcpy(raw, &v->u, 8);
        format_elem((tfvm_dtype)v->dtype, raw, out);
        return;
    }
    const tfvm_tensor *t = v->u.t;
    if (t->rank == 0) {
        format_elem((tfvm_dtype)t->dtype, t->data, out);
        return;
    }
    size_t stride[TFVM_MAX_RANK];
    size_t s = tfvm_dtype_size((tfvm_dtype)t->dtype);
    for (int d = t->rank; d-- > 0;) {
        stride[d] = s;
        s *= (size_t)t->dims[d];
    }
    format_dim(t, 0, t->data, stride, t->count > SUMMARY_THRESHOLD, out);
}
