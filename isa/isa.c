/* isa/isa.c — the op table, generated from ops.def, and program helpers. */
#include "isa.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const isa_op_info isa_ops[ISA_OP_COUNT] = {
#define OP(name, cls, in, out, attrs, types, res, fails, cuda, syn)                              \
    [ISA_##name] = {#name, ISA_CLASS_##cls, in, out, ISA_ATTR_##attrs, ISA_TYPES_##types,       \
                    ISA_RESULT_##res, ISA_FAILS_##fails, #cuda, syn},
#include "ops.def"
#undef OP
};

int isa_op_by_name(const char *name, size_t len)
{
    for (int i = 0; i < ISA_OP_COUNT; i++)
        if (strlen(isa_ops[i].name) == len && memcmp(isa_ops[i].name, name, len) == 0)
            return i;
    return -1;
}

const char *isa_opt_name(isa_op op, uint32_t bit)
{
    switch (op) {
    case ISA_MATMUL:
        return bit == ISA_OPT_TRANS_A ? "ta" : bit == ISA_OPT_TRANS_B ? "tb" : NULL;
    case ISA_FUSED_MATMUL:
    case ISA_FUSED_CONV2D:
    case ISA_FUSED_CONV2D_ADD:
        switch (bit) {
        case ISA_OPT_TRANS_A: return op == ISA_FUSED_MATMUL ? "ta" : NULL;
        case ISA_OPT_TRANS_B: return op == ISA_FUSED_MATMUL ? "tb" : NULL;
        case ISA_OPT_ACT_RELU: return "relu";
        case ISA_OPT_ACT_SIGMOID: return "sigmoid";
        case ISA_OPT_ACT_TANH: return "tanh";
        case ISA_OPT_ACT_SILU: return "silu";
        case ISA_OPT_ACT_GELU: return "gelu";
        case ISA_OPT_ACT_HARDSIGMOID: return "hardsigmoid";
        case ISA_OPT_ACT_HARDSWISH: return "hardswish";
        case ISA_OPT_ACT_RELU6: return "relu6";
        case ISA_OPT_ACT_GELU_TANH: return "gelu_tanh";
        case ISA_OPT_ACT_GELU_NEW: return "gelu_new";
        case ISA_OPT_NHWC_IN: return op == ISA_FUSED_CONV2D ? "nhwc_in" : NULL;
        case ISA_OPT_NHWC_OUT: return op == ISA_FUSED_CONV2D ? "nhwc_out" : NULL;
        default: return NULL;
        }
    case ISA_REDUCE_SUM:
    case ISA_REDUCE_MEAN:
    case ISA_REDUCE_MAX:
    case ISA_REDUCE_MIN:
    case ISA_REDUCE_PROD:
        return bit == ISA_OPT_KEEPDIMS ? "keepdims" : NULL;
    case ISA_TRILU:
        return bit == ISA_OPT_UPPER ? "upper" : NULL;
    case ISA_CUMSUM:
        return bit == ISA_OPT_EXCLUSIVE ? "exclusive" : bit == ISA_OPT_REVERSE ? "reverse" : NULL;
    case ISA_PADV:
        return bit == ISA_OPT_REFLECT ? "reflect" : bit == ISA_OPT_EDGE ? "edge" : bit == ISA_OPT_WRAP ? "wrap" : NULL;
    case ISA_RESIZE:
        switch (bit) {
        case ISA_OPT_LINEAR: return "linear";
        case ISA_OPT_ASYMMETRIC: return "asymmetric";
        case ISA_OPT_ALIGN_CORNERS: return "align_corners";
        case ISA_OPT_PYTORCH_HALF_PIXEL: return "pytorch_half_pixel";
        case ISA_OPT_TF_HALF_PIXEL_NN: return "tf_half_pixel_for_nn";
        case ISA_OPT_NEAREST_FLOOR: return "floor";
        case ISA_OPT_NEAREST_CEIL: return "ceil";
        case ISA_OPT_PREFER_CEIL: return "round_prefer_ceil";
        default: return NULL;
        }
    case ISA_RESIZE2: {
        static const char *const keep_axis[8] = {"keep_axis0", "keep_axis1", "keep_axis2", "keep_axis3",
                                                 "keep_axis4", "keep_axis5", "keep_axis6", "keep_axis7"};
        switch (bit) {
        case ISA_OPT_CUBIC: return "cubic";
        case ISA_OPT_ANTIALIAS: return "antialias";
        case ISA_OPT_EXCLUDE_OUTSIDE: return "exclude_outside";
        case ISA_OPT_HALF_PIXEL_SYMMETRIC: return "half_pixel_symmetric";
        case ISA_OPT_TF_CROP_AND_RESIZE: return "tf_crop_and_resize";
        case ISA_OPT_NOT_LARGER: return "not_larger";
        case ISA_OPT_NOT_SMALLER: return "not_smaller";
        default:
            for (int i = 0; i < 8; i++)
                if (bit == ISA_OPT_KEEP_AXIS0 << i)
                    return keep_axis[i];
            return bit < ISA_OPT_CUBIC ? isa_opt_name(ISA_RESIZE, bit) : NULL;
        }
    }
    case ISA_GRID_SAMPLE:
        switch (bit) {
        case ISA_OPT_GS_NEAREST: return "nearest";
        case ISA_OPT_GS_CUBIC: return "cubic";
        case ISA_OPT_GS_BORDER: return "border";
        case ISA_OPT_GS_REFLECTION: return "reflection";
        case ISA_OPT_GS_ALIGN_CORNERS: return "align_corners";
        default: return NULL;
        }
    case ISA_NMS:
        return bit == ISA_OPT_CENTER_POINT_BOX ? "center_point_box" : NULL;
    case ISA_AFFINE_GRID:
        return bit == ISA_OPT_AG_ALIGN_CORNERS ? "align_corners" : NULL;
    case ISA_ROI_ALIGN:
        return bit == ISA_OPT_ROI_MAX ? "max" : bit == ISA_OPT_ROI_HALF_PIXEL ? "half_pixel" : NULL;
    case ISA_UNIQUE:
        return bit == ISA_OPT_SORTED ? "sorted" : NULL;
    case ISA_UNIQUE_INDEX:
        switch (bit) {
        case ISA_OPT_SORTED: return "sorted";
        case ISA_OPT_UQ_INVERSE: return "inverse";
        case ISA_OPT_UQ_COUNTS: return "counts";
        default: return NULL;
        }
    default:
        return NULL;
    }
}

tfvm_dtype isa_dtype_by_name(const char *name, size_t len)
{
    for (int d = TFVM_BOOL; d <= ISA_DTYPE_LAST; d++) {
        const char *n = tfvm_dtype_name((tfvm_dtype)d);
        if (strlen(n) == len && memcmp(n, name, len) == 0)
            return (tfvm_dtype)d;
    }
    return (tfvm_dtype)0;
}

const char *tfvm_dtype_name(tfvm_dtype d)
{
    switch (d) {
    case TFVM_BOOL: return "bool";
    case TFVM_I32: return "i32";
    case TFVM_I64: return "i64";
    case TFVM_F32: return "f32";
    case TFVM_F64: return "f64";
    case TFVM_U8: return "u8";
    case TFVM_I8: return "i8";
    case TFVM_I16: return "i16";
    case TFVM_U16: return "u16";
    case TFVM_U32: return "u32";
    case TFVM_U64: return "u64";
    case TFVM_F16: return "f16";
    case TFVM_BF16: return "bf16";
    }
    return "?";
}

size_t tfvm_dtype_size(tfvm_dtype d)
{
    switch (d) {
    case TFVM_BOOL: return 1;
    case TFVM_I32: return 4;
    case TFVM_I64: return 8;
    case TFVM_F32: return 4;
    case TFVM_F64: return 8;
    case TFVM_U8: return 1;
    case TFVM_I8: return 1;
    case TFVM_I16: case TFVM_U16: case TFVM_F16: case TFVM_BF16: return 2;
    case TFVM_U32: return 4;
    case TFVM_U64: return 8;
    }
    return 0;
}

const char *isa_types_name(uint32_t types)
{
    static const struct { uint32_t set; const char *name; } names[] = {
        {ISA_TYPES_ANY, "ANY"}, {ISA_TYPES_ALL, "ALL"}, {ISA_TYPES_NUM, "NUM"}, {ISA_TYPES_INT, "INT"},
        {ISA_TYPES_FLT, "FLT"}, {ISA_TYPES_BOOL, "BOOL"}, {ISA_TYPES_WIDE, "WIDE"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].set == types)
            return names[i].name;
    return "?";
}

const char *isa_result_name(isa_result r)
{
    static const char *const names[] = {"NONE", "SAME", "BOOL", "I64", "ATTR", "IN1", "IN2"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}

const char *isa_fails_name(isa_fails f)
{
    static const char *const names[] = {"NO", "DIV0", "NEGEXP", "F2I", "YES"};
    return (unsigned)f < sizeof names / sizeof names[0] ? names[f] : "?";
}

const char *isa_types_list(uint32_t types, char *buf, size_t size)
{
    /* in the order people read them: bool, integers, floats */
    static const uint8_t order[] = {TFVM_BOOL, TFVM_I32, TFVM_I64, TFVM_U8, TFVM_I8, TFVM_I16,
                                     TFVM_U16, TFVM_U32, TFVM_U64, TFVM_F32, TFVM_F64, TFVM_F16, TFVM_BF16};
    int total = 0, k = 0;
    for (size_t i = 0; i < sizeof order; i++)
        total += (int)(types >> order[i] & 1);
    size_t len = 0;
    if (size)
        buf[0] = '\0';
    for (size_t i = 0; i < sizeof order && len < size; i++) {
        if (!(types >> order[i] & 1))
            continue;
        const char *sep = k == 0 ? "" : k == total - 1 ? " or " : ", ";
        int n = snprintf(buf + len, size - len, "%s%s", sep, tfvm_dtype_name((tfvm_dtype)order[i]));
        if (n < 0)
            break;
        len += (size_t)n;
        k++;
    }
    return buf;
}

const char *tfvm_status_name(tfvm_status s)
{
    switch (s) {
#define S(x) case x: return #x;
    S(TFVM_OK) S(TFVM_ERR_NOMEM) S(TFVM_ERR_IO) S(TFVM_ERR_FORMAT) S(TFVM_ERR_SYNTAX)
    S(TFVM_ERR_ARGUMENT) S(TFVM_ERR_TYPE) S(TFVM_ERR_SHAPE) S(TFVM_ERR_ARITH) S(TFVM_ERR_PORT)
    S(TFVM_ERR_DEADNESS) S(TFVM_ERR_STUCK) S(TFVM_ERR_LIMIT) S(TFVM_ERR_INTERRUPTED)
    S(TFVM_ERR_INTERNAL) S(TFVM_ERR_UNSUPPORTED) S(TFVM_ERR_DEVICE)
#undef S
    }
    return "TFVM_ERR_?";
}

void isa_program_init(isa_program *p, const tfvm_allocator *alloc)
{
    memset(p, 0, sizeof *p);
    p->alloc = alloc ? *alloc : (tfvm_allocator){0};
    ut_arena_init(&p->arena, &p->alloc);
}

void isa_program_release(isa_program *p)
{
    ut_arena_free(&p->arena);
    memset(p, 0, sizeof *p);
}

static int var_cmp(const void *a, const void *b)
{
    const isa_var *x = a, *y = b;
    if (x->inst != y->inst)
        return x->inst < y->inst ? -1 : 1;
    if (x->out != y->out)
        return x->out < y->out ? -1 : 1;
    return strcmp(x->name, y->name);
}

void isa_vars_sort(isa_program *p)
{
    if (!p->n_vars)
        return;
    qsort(p->vars, p->n_vars, sizeof *p->vars, var_cmp);
    uint32_t n = 1;
    for (uint32_t j = 1; j < p->n_vars; j++)
        if (var_cmp(&p->vars[n - 1], &p->vars[j]) != 0)
            p->vars[n++] = p->vars[j];
    p->n_vars = n;
}

uint32_t isa_vars_of(const isa_program *p, uint32_t i)
{
    uint32_t lo = 0, hi = p->n_vars;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->vars[mid].inst < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->n_vars && p->vars[lo].inst == i ? lo : p->n_vars;
}

const char *isa_inst_label(const isa_program *p, uint32_t i, char *buf, size_t size)
{
    if (i < p->n_insts && p->insts[i].name)
        snprintf(buf, size, "%s", p->insts[i].name);
    else
        snprintf(buf, size, "%%%u", i);
    return buf;
}

const char *isa_inst_where(const isa_program *p, uint32_t i, char *buf, size_t size)
{
    if (!size)
        return buf;
    buf[0] = '\0';
    if (i >= p->n_insts || !p->insts[i].line)
        return buf;
    const isa_inst *in = &p->insts[i];
    if (p->source)
        snprintf(buf, size, "%s:%" PRIu32 ":%" PRIu32, p->source, in->line, in->col);
    else
        snprintf(buf, size, "%" PRIu32 ":%" PRIu32, in->line, in->col);
    return buf;
}

bool isa_source_ok(const char *s)
{
    size_t i = 0;
    for (; s && s[i] && i <= ISA_MAX_SOURCE; i++)
        if (s[i] <= ' ' || s[i] > '~' || s[i] == '"')
            return false;
    return i >= 1 && i <= ISA_MAX_SOURCE;
}

const char *isa_site_label(const char *callee, uint32_t id, char *buf, size_t size)
{
    snprintf(buf, size, "%s@%" PRIu32, callee, id);
    return buf;
}

bool isa_param_set_shape(isa_program *p, isa_param *q, unsigned ndim, const int64_t *dims)
{
    int64_t *d = ut_arena_array(&p->arena, ndim ? ndim : 1, sizeof *d);
    if (!d)
        return false;
    for (unsigned k = 0; k < ndim; k++)
        d[k] = dims[k] < 0 ? -1 : dims[k];
    q->shaped = true;
    q->ndim = (uint8_t)ndim;
    q->dims = d;
    return true;
}

bool isa_dim_name_ok(const char *s, size_t len)
{
    if (len < 1 || len > ISA_MAX_DIM_NAME || isdigit((unsigned char)s[0]))
        return false;
    for (size_t k = 0; k < len; k++)
        if (!isalnum((unsigned char)s[k]) && s[k] != '_')
            return false;
    return true;
}

bool isa_param_set_dim_names(isa_program *p, isa_param *q, const char *const *names)
{
    const char **d = ut_arena_array(&p->arena, q->ndim ? q->ndim : 1, sizeof *d);
    if (!d)
        return false;
    for (unsigned k = 0; k < q->ndim; k++)
        if (names[k] && q->dims[k] < 0 && !(d[k] = ut_arena_strdup(&p->arena, names[k])))
            return false;
    q->dim_names = d;
    return true;
}

const char *isa_inst_origin(const isa_program *p, uint32_t i, char *buf, size_t size)
{
    const isa_inst *in = &p->insts[i];
    if (!in->origin)
        snprintf(buf, size, "%s", "");
    else if (in->origin_op)
        snprintf(buf, size, "node '%s' (%s)", in->origin, in->origin_op);
    else
        snprintf(buf, size, "node '%s'", in->origin);
    return buf;
}

const char *isa_param_type(const isa_param *q, char *buf, size_t size)
{
    const char *dt = tfvm_dtype_name((tfvm_dtype)q->dtype);
    if (q->rank == 0 || !q->shaped) {
        snprintf(buf, size, "%s%s", dt, q->rank == 0 ? "" : "[...]");
        return buf;
    }
    if (q->ndim == 0) {
        snprintf(buf, size, "%s[()]", dt);
        return buf;
    }
    size_t n = (size_t)snprintf(buf, size, "%s[", dt);
    for (unsigned k = 0; k < q->ndim && n < size; k++) {
        if (q->dims[k] < 0 && q->dim_names && q->dim_names[k])
            n += (size_t)snprintf(buf + n, size - n, "%s%s", k ? ", " : "", q->dim_names[k]);
        else if (q->dims[k] < 0)
            n += (size_t)snprintf(buf + n, size - n, "%s?", k ? ", " : "");
        else
            n += (size_t)snprintf(buf + n, size - n, "%s%" PRId64, k ? ", " : "", q->dims[k]);
    }
    if (n < size)
        snprintf(buf + n, size - n, "]");
    return buf;
}

bool isa_chan_ok(const isa_const *c)
{
    if (c->dtype != TFVM_U8 || c->rank != 1 || c->nbytes < 1 || c->nbytes > ISA_MAX_CHAN ||
        c->nbytes != (size_t)c->dims[0])
        return false;
    const unsigned char *s = c->data;
    for (size_t k = 0; k < c->nbytes; k++)
        if (!((s[k] >= 'a' && s[k] <= 'z') || (s[k] >= 'A' && s[k] <= 'Z') || (s[k] >= '0' && s[k] <= '9') ||
              (s[k] && strchr("_.:/-", s[k]))))
            return false;
    return true;
}

const char *isa_chan_name(const isa_program *p, uint32_t i, char *buf)
{
    const isa_const *c = &p->consts[p->insts[i].a];
    size_t n = c->nbytes > ISA_MAX_CHAN ? ISA_MAX_CHAN : c->nbytes;
    memcpy(buf, c->data, n);
    buf[n] = '\0';
    return buf;
}

bool isa_chan_shape_ok(const isa_const *c)
{
    if (c->dtype != TFVM_I64 || c->rank != 1 || c->dims[0] > TFVM_MAX_RANK ||
        c->nbytes != (size_t)c->dims[0] * sizeof(int64_t))
        return false;
    for (int64_t k = 0; k < c->dims[0]; k++) {
        int64_t d;
        memcpy(&d, (const char *)c->data + k * sizeof d, sizeof d);
        if (d < -1)
            return false;
    }
    return true;
}

isa_param isa_chan_param(const isa_program *p, uint32_t b, int64_t dims[TFVM_MAX_RANK])
{
    isa_param q = {.dtype = ISA_CHAN_DTYPE(b), .rank = b & ISA_CHAN_TENSOR ? ISA_RANK_ANY : 0};
    if (ISA_CHAN_SHAPE(b)) {
        const isa_const *c = &p->consts[ISA_CHAN_SHAPE(b) - 1];
        q.shaped = true;
        q.ndim = (uint8_t)c->dims[0];
        memcpy(dims, c->data, q.ndim * sizeof *dims);
        q.dims = dims;
    }
    return q;
}

const char *isa_chan_type(const isa_program *p, uint32_t b, char *buf, size_t size)
{
    int64_t dims[TFVM_MAX_RANK];
    isa_param q = isa_chan_param(p, b, dims);
    return isa_param_type(&q, buf, size);
}

bool isa_chan_type_eq(const isa_program *p, uint32_t b1, uint32_t b2)
{
    int64_t dx[TFVM_MAX_RANK], dy[TFVM_MAX_RANK];
    isa_param x = isa_chan_param(p, b1, dx), y = isa_chan_param(p, b2, dy);
    return x.dtype == y.dtype && x.rank == y.rank && x.shaped == y.shaped &&
           (!x.shaped || (x.ndim == y.ndim && memcmp(x.dims, y.dims, x.ndim * sizeof *x.dims) == 0));
}
