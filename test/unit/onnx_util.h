/* test/unit/onnx_util.h — what the ONNX suites share: a model file compiled
 * into a program handle, a run of it, and result comparison against .npy
 * expectations (exact for integers and bools, rtol 1e-3 / atol 1e-5 for
 * floats, NaN equal to NaN). */
#ifndef TFVM_TEST_ONNX_UTIL_H
#define TFVM_TEST_ONNX_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/import.h"
#include "loader/loader.h"
#include "tfvm.h"
#include "util/half.h"

/* Compiles the .onnx file at path (external data next to it). */
static inline tfvm_status ou_compile(const char *path, const tfvm_allocator *a, tfvm_program **out,
                                     tfvm_error *err)
{
    char *data;
    size_t len;
    tfvm_status st = ut_read_file(path, a, &data, &len, err);
    if (st != TFVM_OK)
        return st;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        strcpy(dir, ".");
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    if (a)
        cfg.allocator = *a;
    tfvm_program *p = ld_program_new(&cfg);
    if (!p) {
        ut_free(a, data, len + 1);
        return ut_err(err, TFVM_ERR_NOMEM, "out of memory");
    }
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    /* TFVM_ONNX_OPT=0 compiles without the optimizer (-O0) */
    const char *o = getenv("TFVM_ONNX_OPT");
    st = imp_onnx(data, len, base, dir, o && o[0] == '0' ? 0 : 1, &p->alloc, &p->isa, err);
    ut_free(a, data, len + 1);
    return ld_program_finish(p, st, out, err);
}

/* Compares a result with an expected tensor; on a mismatch writes why. */
static inline bool ou_same(const tfvm_value *v, const tfvm_tensor *want, char *why, size_t size)
{
    tfvm_dtype d = tfvm_tensor_dtype(want);
    int rank = tfvm_tensor_rank(want);
    const int64_t *wd = tfvm_tensor_dims(want);
    const unsigned char *wp = tfvm_tensor_cdata(want);
    const unsigned char *gp;
    int grank = 0;
    const int64_t *gd = NULL;
    tfvm_dtype gdt = v->tensor ? tfvm_tensor_dtype(v->tensor) : v->dtype;
    if (v->tensor) {
        grank = tfvm_tensor_rank(v->tensor);
        gd = tfvm_tensor_dims(v->tensor);
        gp = tfvm_tensor_cdata(v->tensor);
    } else {
        gp = (const unsigned char *)&v->as;
    }
    if (gdt != d) {
        snprintf(why, size, "dtype %s, expected %s", tfvm_dtype_name(gdt), tfvm_dtype_name(d));
        return false;
    }
    /* a scalar where one element is expected of rank 1: ONNX's own runner
     * compares with NumPy broadcasting, and some cases store 0-d results as [1] */
    bool shape_ok = grank == rank || (grank == 0 && rank == 1 && wd[0] == 1);
    for (int k = 0; k < rank && shape_ok && grank == rank; k++)
        shape_ok = gd[k] == wd[k];
    if (!shape_ok) {
        char a[128] = "", b[128] = "";
        for (int k = 0; k < grank; k++)
            snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", k ? ", " : "", (long long)gd[k]);
        for (int k = 0; k < rank; k++)
            snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", k ? ", " : "", (long long)wd[k]);
        snprintf(why, size, "shape [%.100s], expected [%.100s]", a, b);
        return false;
    }
    int64_t n = tfvm_tensor_count(want);
    size_t es = tfvm_dtype_size(d);
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *g = gp + (size_t)i * es, *w = wp + (size_t)i * es;
        bool ok;
        double gv = 0, wv = 0;
        if (d == TFVM_F32 || d == TFVM_F64 || d == TFVM_F16 || d == TFVM_BF16) {
            if (d == TFVM_F16 || d == TFVM_BF16) { /* 8 or 11 significant bits: a few ulps */
                uint16_t a, b;
                memcpy(&a, g, 2);
                memcpy(&b, w, 2);
                gv = d == TFVM_F16 ? ut_f16_to_f32(a) : ut_bf16_to_f32(a);
                wv = d == TFVM_F16 ? ut_f16_to_f32(b) : ut_bf16_to_f32(b);
            } else if (d == TFVM_F32) {
                float a, b;
                memcpy(&a, g, 4);
                memcpy(&b, w, 4);
                gv = a;
                wv = b;
            } else {
                memcpy(&gv, g, 8);
                memcpy(&wv, w, 8);
            }
            const double rtol = d == TFVM_F16 ? 4e-3 : d == TFVM_BF16 ? 2e-2 : 1e-3;
            ok = (isnan(gv) && isnan(wv)) || gv == wv || fabs(gv - wv) <= 1e-5 + rtol * fabs(wv);
        } else {
            ok = memcmp(g, w, es) == 0;
            if (!ok) {
                int64_t a = 0, b = 0; /* the little-endian low bytes: enough to show */
                memcpy(&a, g, es);
                memcpy(&b, w, es);
                gv = (double)a;
                wv = (double)b;
            }
        }
        if (!ok) {
            snprintf(why, size, "element %lld is %.9g, expected %.9g", (long long)i, gv, wv);
            return false;
        }
    }
    return true;
}

#endif
