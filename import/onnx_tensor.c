/* import/onnx_tensor.c — TensorProto to a constant: raw_data (little-endian)
 * or the typed repeated fields, and external data files (data_location
 * EXTERNAL) read relative to the model's directory, never outside it: no
 * "..", no absolute path, no symbolic link on the way, a regular file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/half.h"
#include "import/onnx_int.h"

_Noreturn static void tfail(ox *X, const Onnx__TensorProto *t, tfvm_status code, const char *fmt, const char *a,
                            long long b)
{
    char msg[300];
    snprintf(msg, sizeof msg, fmt, a, b);
    cc_error(X->C, (cc_pos){0, 0}, code, "tensor '%.80s': %s", t->name ? t->name : "", msg);
}

/* Opens external data `loc` below X->dir one path component at a time,
 * none of them a symbolic link (O_NOFOLLOW: a link in the model's folder
 * could name /etc/passwd), the last a regular file (a FIFO would block, a
 * device never end: O_NONBLOCK opens without waiting). Its status in *sb. */
static int open_external(ox *X, const Onnx__TensorProto *t, const char *loc, const char *path, struct stat *sb)
{
    int dfd = open(X->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        tfail(X, t, TFVM_ERR_IO, "cannot open external data file '%.200s'", path, 0);
    char comp[256];
    const char *p = loc;
    for (;;) {
        const char *q = p;
        while (*q && *q != '/')
            q++;
        const size_t n = (size_t)(q - p);
        const bool last = !*q;
        if (n >= sizeof comp) {
            close(dfd);
            tfail(X, t, TFVM_ERR_IO, "cannot open external data file '%.200s'", path, 0);
        }
        memcpy(comp, p, n);
        comp[n] = 0;
        p = last ? q : q + 1;
        if (!last && (n == 0 || (n == 1 && comp[0] == '.')))
            continue;
        int fd = openat(dfd, comp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (last ? O_NONBLOCK : O_DIRECTORY));
        /* a link gives ELOOP, or ENOTDIR where a folder is asked for */
        struct stat ls;
        const bool link = fd < 0 && (errno == ELOOP || errno == ENOTDIR) &&
                          fstatat(dfd, comp, &ls, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(ls.st_mode);
        close(dfd);
        if (link)
            tfail(X, t, TFVM_ERR_FORMAT, "external data '%.100s' goes through a symbolic link (refused)", loc, 0);
        if (fd < 0)
            tfail(X, t, TFVM_ERR_IO, "cannot open external data file '%.200s'", path, 0);
        if (!last) {
            dfd = fd;
            continue;
        }
        if (fstat(fd, sb) != 0 || !S_ISREG(sb->st_mode)) {
            close(fd);
            tfail(X, t, TFVM_ERR_FORMAT, "external data '%.100s' is not a regular file (refused)", loc, 0);
        }
        return fd;
    }
}

/* The bytes of an external tensor: location must be a relative path below
 * dir (no "..", not absolute, no link). */
static const void *read_external(ox *X, const Onnx__TensorProto *t, size_t want)
{
    const char *loc = NULL;
    long long off = 0, length = -1;
    for (size_t k = 0; k < t->n_external_data; k++) {
        const Onnx__StringStringEntryProto *e = t->external_data[k];
        if (!e || !e->key || !e->value)
            continue;
        if (strcmp(e->key, "location") == 0)
            loc = e->value;
        else if (strcmp(e->key, "offset") == 0)
            off = strtoll(e->value, NULL, 10);
        else if (strcmp(e->key, "length") == 0)
            length = strtoll(e->value, NULL, 10);
    }
    if (!loc || !loc[0])
        tfail(X, t, TFVM_ERR_FORMAT, "external data without a location%s", "", 0);
    if (!X->dir)
        tfail(X, t, TFVM_ERR_IO, "external data '%.100s' needs the model's directory (the model was given as bytes)",
              loc, 0);
    bool escapes = loc[0] == '/' || loc[0] == '\\';
    for (const char *p = loc; *p && !escapes;) {
        const char *q = p;
        while (*q && *q != '/' && *q != '\\')
            q++;
        if (q - p == 2 && p[0] == '.' && p[1] == '.')
            escapes = true;
        p = *q ? q + 1 : q;
    }
    if (escapes)
        tfail(X, t, TFVM_ERR_FORMAT, "external data location '%.100s' is outside the model's directory", loc, 0);
    if (off < 0 || (length >= 0 && (size_t)length != want))
        tfail(X, t, TFVM_ERR_FORMAT, "external data '%.100s': length %lld does not match the tensor's size", loc,
              length);
    size_t plen = strlen(X->dir) + strlen(loc) + 2;
    char *path = cc_alloc(X->C, plen);
    snprintf(path, plen, "%s/%s", X->dir, loc);
    /* checked before the buffer is made (a tensor may claim 100 GB of a small
     * file), then opened again to read: cc_alloc may unwind, and must not
     * leave a descriptor open */
    struct stat sb;
    int fd = open_external(X, t, loc, path, &sb);
    close(fd);
    if ((unsigned long long)sb.st_size < (unsigned long long)off || (size_t)(sb.st_size - off) < want)
        tfail(X, t, TFVM_ERR_IO, "external data file '%.200s' is shorter than offset + %lld bytes", path,
              (long long)want);
    unsigned char *buf = cc_alloc(X->C, want ? want : 1);
    fd = open_external(X, t, loc, path, &sb);
    size_t got = 0;
    while (got < want) {
        ssize_t r = pread(fd, buf + got, want - got, (off_t)(off + (long long)got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (got < want)
        tfail(X, t, TFVM_ERR_IO, "external data file '%.200s' is shorter than offset + %lld bytes", path,
              (long long)want);
    return buf;
}

/* Element k of a storage-dtype tensor (raw little-endian bytes, or the typed
 * field ONNX keeps it in: the 16-bit types in int32_data, u32 and u64 in
 * uint64_data) written into q as its compute dtype. */
static void widen_elem(uint8_t store, const Onnx__TensorProto *t, size_t k, unsigned char *q)
{
    const size_t es = tfvm_dtype_size((tfvm_dtype)store);
    uint64_t w = 0;
    if (t->has_raw_data)
        for (size_t i = 0; i < es; i++)
            w |= (uint64_t)t->raw_data.data[k * es + i] << (8 * i);
    else
        w = es == 2 ? (uint64_t)(uint16_t)t->int32_data[k] : t->uint64_data[k];
    switch (store) {
    case TFVM_F16: { float f = ut_f16_to_f32((uint16_t)w); memcpy(q, &f, 4); break; }
    case TFVM_BF16: { float f = ut_bf16_to_f32((uint16_t)w); memcpy(q, &f, 4); break; }
    case TFVM_I16: { int32_t i = (int16_t)(uint16_t)w; memcpy(q, &i, 4); break; }
    case TFVM_U16: { int32_t i = (int32_t)w; memcpy(q, &i, 4); break; }
    default: memcpy(q, &w, 8); break; /* u32, u64: i64 with the same bits */
    }
}

/* A storage-dtype initializer (f16, u16...) in its compute dtype. */
static const void *widen_const(ox *X, const Onnx__TensorProto *t, uint8_t store, uint8_t dtype, size_t count)
{
    const size_t es = tfvm_dtype_size((tfvm_dtype)store), ces = tfvm_dtype_size((tfvm_dtype)dtype);
    const size_t have = t->has_raw_data ? t->raw_data.len / es : es == 2 ? t->n_int32_data : t->n_uint64_data;
    if ((t->has_raw_data && t->raw_data.len != count * es) || have != count)
        tfail(X, t, TFVM_ERR_FORMAT, "%s has %lld elements for its dims", "data", (long long)have);
    unsigned char *p = cc_alloc(X->C, count ? count * ces : 1);
    for (size_t k = 0; k < count; k++)
        widen_elem(store, t, k, p + k * ces);
    return p;
}

size_t ox_tensor_value(ox *X, const Onnx__TensorProto *t, ox_val *out)
{
    cc *C = X->C;
    memset(out, 0, sizeof *out);
    int32_t dt = t->has_data_type ? t->data_type : 0;
    uint8_t dtype;
    if (!ox_dtype(dt, &dtype))
        tfail(X, t, TFVM_ERR_UNSUPPORTED, "element type %s is not supported", ox_onnx_type_name(dt), 0);
    if (t->n_dims > TFVM_MAX_RANK)
        tfail(X, t, TFVM_ERR_UNSUPPORTED, "rank%s %lld is not supported (at most 8)", "", (long long)t->n_dims);
    if (t->segment)
        tfail(X, t, TFVM_ERR_UNSUPPORTED, "segmented tensors are not supported%s", "", 0);
    int64_t count = 1;
    for (size_t k = 0; k < t->n_dims; k++) {
        if (t->dims[k] < 0 || (t->dims[k] > 0 && count > ((int64_t)1 << 40) / t->dims[k]))
            tfail(X, t, TFVM_ERR_FORMAT, "bad dims%s (dim %lld)", "", (long long)t->dims[k]);
        count *= t->dims[k];
    }
    size_t es = tfvm_dtype_size((tfvm_dtype)dtype);
    size_t nbytes = (size_t)count * es;
    const void *data = NULL;
    bool external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    const uint8_t store = ox_store_dtype(dt);
    if (store && external)
        tfail(X, t, TFVM_ERR_UNSUPPORTED, "external data of element type %s is not supported", ox_onnx_type_name(dt), 0);
    if (store) {
        data = widen_const(X, t, store, dtype, (size_t)count);
    } else if (external) {
        data = read_external(X, t, nbytes);
    } else if (t->has_raw_data) {
        if (t->raw_data.len != nbytes)
            tfail(X, t, TFVM_ERR_FORMAT, "raw_data%s has %lld bytes", "", (long long)t->raw_data.len);
        /* bytes straight from the unpacked message, which outlives the build */
        data = t->raw_data.data;
    } else {
        size_t have = dtype == TFVM_F32 ? t->n_float_data : dtype == TFVM_F64 ? t->n_double_data
                    : dtype == TFVM_I64 ? t->n_int64_data : t->n_int32_data;
        if (have != (size_t)count) /* before allocating what the dims claim */
            tfail(X, t, TFVM_ERR_FORMAT, "%s has %lld elements for its dims", "typed data", (long long)have);
        unsigned char *p = cc_alloc(C, nbytes ? nbytes : 1);
        switch (dtype) {
        case TFVM_F32:
            have = t->n_float_data;
            if (have == (size_t)count && nbytes)
                memcpy(p, t->float_data, nbytes);
            break;
        case TFVM_F64:
            have = t->n_double_data;
            if (have == (size_t)count && nbytes)
                memcpy(p, t->double_data, nbytes);
            break;
        case TFVM_I64:
            have = t->n_int64_data;
            if (have == (size_t)count && nbytes)
                memcpy(p, t->int64_data, nbytes);
            break;
        case TFVM_I32:
            have = t->n_int32_data;
            if (have == (size_t)count && nbytes)
                memcpy(p, t->int32_data, nbytes);
            break;
        default: /* bool, u8, i8 live in int32_data */
            have = t->n_int32_data;
            if (have == (size_t)count)
                for (size_t k = 0; k < have; k++)
                    p[k] = dtype == TFVM_BOOL ? (t->int32_data[k] != 0) : (unsigned char)t->int32_data[k];
            break;
        }
        if (have != (size_t)count)
            tfail(X, t, TFVM_ERR_FORMAT, "%s has %lld elements for its dims", "typed data", (long long)have);
        data = p;
    }
    if (dtype == TFVM_BOOL) {
        /* the VM's bools are 0 or 1 */
        const unsigned char *s = data;
        bool clean = true;
        for (size_t k = 0; k < nbytes && clean; k++)
            clean = s[k] <= 1;
        if (!clean) {
            unsigned char *p = cc_alloc(C, nbytes);
            for (size_t k = 0; k < nbytes; k++)
                p[k] = s[k] != 0;
            data = p;
        }
    }
    out->dtype = dtype;
    out->store = store;
    out->rank = (int8_t)t->n_dims;
    for (int k = 0; k < TFVM_MAX_RANK; k++)
        out->dims[k] = (size_t)k < t->n_dims ? t->dims[k] : -1;
    static const int64_t none = 0;
    if (!nbytes)
        data = &none; /* an empty tensor's data may be NULL in the message */
    out->cdata = data;
    return nbytes;
}

void ox_tensor_const(ox *X, ox_node *N, cc_blk *b, const Onnx__TensorProto *t, ox_val *out)
{
    (void)N;
    size_t nbytes = ox_tensor_value(X, t, out);
    out->v = cc_const_new(X->C, b, (tfvm_dtype)out->dtype, (int)t->n_dims, t->dims, out->cdata, nbytes, true);
}
