/* devices/npy.c — NumPy .npy files: read format 1.0-3.0, write 1.0. The header
 * is a Python dict literal; it is parsed by a small bounded grammar (never
 * evaluated), because files may be hostile. */
#include "devices/npy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isa/isa.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tfvm's .npy reader and writer assume a little-endian host (tensor data is copied as is)"
#endif

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* Copies untrusted text into buf for a message: printable ASCII as is,
 * anything else as \xNN, cut with "..." when long. */
static const char *npy_quote(char *buf, size_t size, const unsigned char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (o + 8 >= size || i >= 40) {
            memcpy(buf + o, "...", 4);
            return buf;
        }
        if (s[i] >= 0x20 && s[i] < 0x7f)
            buf[o++] = (char)s[i];
        else
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", s[i]);
    }
    buf[o] = '\0';
    return buf;
}

tfvm_status dev_npy_preamble(const void *data, size_t size, const char *name,
                             dev_npy_header *h, tfvm_error *err)
{
    const unsigned char *p = data;
    if (size < sizeof npy_magic || memcmp(p, npy_magic, sizeof npy_magic) != 0)
        return ut_err(err, TFVM_ERR_FORMAT, "%s: not a .npy file (bad magic)", name);
    if (size < 8)
        return ut_err(err, TFVM_ERR_FORMAT, "%s: truncated header: expected 10 bytes, found %zu",
                      name, size);
    h->major = p[6];
    h->minor = p[7];
    if (h->major < 1 || h->major > 3 || h->minor != 0)
        return ut_err(err, TFVM_ERR_FORMAT, "%s: unsupported .npy format version %d.%d", name,
                      h->major, h->minor);
    size_t pre = h->major == 1 ? 10 : 12;
    if (size < pre)
        return ut_err(err, TFVM_ERR_FORMAT, "%s: truncated header: expected %zu bytes, found %zu",
                      name, pre, size);
    uint32_t dict = h->major == 1 ? ut_le16(p + 8) : ut_le32(p + 8);
    if (dict > DEV_NPY_MAX_HEADER - pre)
        return ut_err(err, TFVM_ERR_FORMAT,
                      "%s: bad header: length %u exceeds the limit of %u bytes", name,
                      (unsigned)dict, DEV_NPY_MAX_HEADER - (unsigned)pre);
    h->header_len = pre + dict;
    return TFVM_OK;
}

/* ---- The header dict ----------------------------------------------------------
 * Grammar (a subset of Python literals, enough for every NumPy writer since
 * 2008, Python 2's 2L integers included):
 *   dict  := '{' [item (',' item)* [',']] '}'      item := string ':' value
 *   value := string | True | False | '(' [int (',' int)* [',']] ')'
 * Strings are quoted with ' or " and have no escapes. */
typedef struct npy_parser {
    const unsigned char *s; /* the whole header, preamble included */
    size_t pos, end;        /* offsets into s; pos is also the file offset */
    const char *name;
    tfvm_error *err;
} npy_parser;

static tfvm_status npy_bad_at(npy_parser *p, size_t at, const char *what)
{
    return ut_err(p->err, TFVM_ERR_FORMAT, "%s: bad header: %s at byte %zu", p->name, what, at);
}

static tfvm_status npy_bad(npy_parser *p, const char *what) { return npy_bad_at(p, p->pos, what); }

static void npy_ws(npy_parser *p)
{
    while (p->pos < p->end && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                               p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static bool npy_peek(npy_parser *p, char c) { return p->pos < p->end && p->s[p->pos] == (unsigned char)c; }

static bool npy_accept(npy_parser *p, char c)
{
    npy_ws(p);
    if (npy_peek(p, c)) {
        p->pos++;
        return true;
    }
    return false;
}

/* A quoted string; str and len point into the header. */
static tfvm_status npy_string(npy_parser *p, const unsigned char **str, size_t *len)
{
    unsigned char q = p->s[p->pos];
    size_t start = p->pos + 1;
    for (size_t i = start; i < p->end; i++) {
        if (p->s[i] == q) {
            *str = p->s + start;
            *len = i - start;
            p->pos = i + 1;
            return TFVM_OK;
        }
        if (p->s[i] == '\\')
            return npy_bad_at(p, i, "escape in string");
        if (p->s[i] == '\n')
            break;
    }
    return npy_bad(p, "unterminated string");
}

static bool npy_word(npy_parser *p, const char *w)
{
    size_t n = strlen(w);
    if (p->end - p->pos < n || memcmp(p->s + p->pos, w, n) != 0)
        return false;
    size_t after = p->pos + n;
    if (after < p->end) {
        unsigned char c = p->s[after];
        if (c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))
            return false;
    }
    p->pos = after;
    return true;
}

/* '(' [int (',' int)* [',']] ')'; counts every dimension, stores the first
 * TFVM_MAX_RANK (the caller reports ranks above that). */
static tfvm_status npy_shape(npy_parser *p, dev_npy_header *h, int *rank)
{
    static const char *const not_tuple = "'shape' must be a tuple of integers";
    *rank = 0;
    npy_ws(p);
    const size_t start = p->pos;
    if (!npy_accept(p, '('))
        return npy_bad(p, not_tuple);
    if (npy_accept(p, ')'))
        return TFVM_OK;
    for (;;) {
        npy_ws(p);
        if (npy_peek(p, '-'))
            return npy_bad(p, "negative dimension in 'shape'");
        if (p->pos >= p->end || p->s[p->pos] < '0' || p->s[p->pos] > '9')
            return npy_bad(p, not_tuple);
        int64_t v = 0;
        const size_t num = p->pos;
        while (p->pos < p->end && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
            int digit = p->s[p->pos] - '0';
            if (v > (INT64_MAX - digit) / 10)
                return npy_bad_at(p, num, "dimension too large in 'shape'");
            v = v * 10 + digit;
            p->pos++;
        }
        if (npy_peek(p, 'L') || npy_peek(p, 'l')) /* Python 2 long */
            p->pos++;
        /* rank stays small: each dimension takes at least 2 header bytes. */
        if (*rank < TFVM_MAX_RANK)
            h->dims[*rank] = v;
        (*rank)++;
        bool comma = npy_accept(p, ',');
        if (npy_accept(p, ')')) {
            /* "(5)" is an int in Python, not a tuple; NumPy rejects it too. */
            if (*rank == 1 && !comma)
                return npy_bad_at(p, start, not_tuple);
            return TFVM_OK;
        }
        if (!comma)
            return npy_bad(p, "expected ',' or ')' in 'shape'");
    }
}

/* Maps a descr string to a dtype; reports the unsupported ones. */
static tfvm_status npy_dtype(npy_parser *p, const unsigned char *d, size_t n, tfvm_dtype *out)
{
    static const struct { const char *code; tfvm_dtype dtype; } kinds[] = {
        {"b1", TFVM_BOOL}, {"i4", TFVM_I32}, {"i8", TFVM_I64}, {"f4", TFVM_F32}, {"f8", TFVM_F64},
        {"u1", TFVM_U8},   {"i1", TFVM_I8},  {"i2", TFVM_I16}, {"u2", TFVM_U16}, {"u4", TFVM_U32},
        {"u8", TFVM_U64},  {"f2", TFVM_F16},
        /* NumPy has no bfloat16; ml_dtypes' (what ONNX, JAX and TF hand out)
           saves as two raw bytes */
        {"V2", TFVM_BF16},
    };
    if (n == 3) {
        for (size_t i = 0; i < UT_COUNTOF(kinds); i++) {
            if (memcmp(d + 1, kinds[i].code, 2) != 0)
                continue;
            /* A 1-byte type has no byte order: NumPy writes '|b1', accept any. */
            bool one = tfvm_dtype_size(kinds[i].dtype) == 1;
            if (d[0] == '<' || (one && (d[0] == '|' || d[0] == '>' || d[0] == '='))) {
                *out = kinds[i].dtype;
                return TFVM_OK;
            }
            if (d[0] == '>')
                return ut_err(p->err, TFVM_ERR_FORMAT, "%s: big-endian arrays are not supported",
                              p->name);
        }
    }
    char q[64];
    return ut_err(p->err, TFVM_ERR_FORMAT, "%s: unsupported dtype '%s'", p->name,
                  npy_quote(q, sizeof q, d, n));
}

tfvm_status dev_npy_parse(const void *data, size_t size, const char *name, dev_npy_header *h,
                          tfvm_error *err)
{
    memset(h, 0, sizeof *h);
    tfvm_status st = dev_npy_preamble(data, size, name, h, err);
    if (st)
        return st;
    if (size < h->header_len)
        return ut_err(err, TFVM_ERR_FORMAT, "%s: truncated header: expected %zu bytes, found %zu",
                      name, h->header_len, size);
    npy_parser p = {data, h->major == 1 ? 10 : 12, h->header_len, name, err};

    const unsigned char *descr = NULL;
    size_t descr_len = 0;
    int fortran = -1, rank = -1;
    if (!npy_accept(&p, '{'))
        return npy_bad(&p, "expected '{'");
    while (!npy_accept(&p, '}')) {
        npy_ws(&p);
        if (!npy_peek(&p, '\'') && !npy_peek(&p, '"'))
            return npy_bad(&p, "expected a quoted key or '}'");
        size_t key_at = p.pos;
        const unsigned char *key;
        size_t key_len;
        if ((st = npy_string(&p, &key, &key_len)))
            return st;
        if (!npy_accept(&p, ':'))
            return npy_bad(&p, "expected ':'");
        npy_ws(&p);
        bool dup = false;
        if (key_len == 5 && memcmp(key, "descr", 5) == 0) {
            dup = descr != NULL;
            if (npy_peek(&p, '['))
                return ut_err(err, TFVM_ERR_FORMAT, "%s: structured dtypes are not supported", name);
            if (!npy_peek(&p, '\'') && !npy_peek(&p, '"'))
                return npy_bad(&p, "'descr' must be a string");
            if ((st = npy_string(&p, &descr, &descr_len)))
                return st;
        } else if (key_len == 13 && memcmp(key, "fortran_order", 13) == 0) {
            dup = fortran >= 0;
            if (npy_word(&p, "True"))
                fortran = 1;
            else if (npy_word(&p, "False"))
                fortran = 0;
            else
                return npy_bad(&p, "'fortran_order' must be True or False");
        } else if (key_len == 5 && memcmp(key, "shape", 5) == 0) {
            dup = rank >= 0;
            if ((st = npy_shape(&p, h, &rank)))
                return st;
        } else {
            char q[64];
            return ut_err(err, TFVM_ERR_FORMAT, "%s: bad header: unknown key '%s' at byte %zu",
                          name, npy_quote(q, sizeof q, key, key_len), key_at);
        }
        if (dup) {
            char q[64];
            return ut_err(err, TFVM_ERR_FORMAT, "%s: bad header: duplicate key '%s' at byte %zu",
                          name, npy_quote(q, sizeof q, key, key_len), key_at);
        }
        if (!npy_accept(&p, ',')) {
            if (npy_accept(&p, '}'))
                break;
            return npy_bad(&p, "expected ',' or '}'");
        }
    }
    npy_ws(&p);
    if (p.pos < p.end)
        return npy_bad(&p, "unexpected text after the dict");
    if (!descr)
        return ut_err(err, TFVM_ERR_FORMAT, "%s: bad header: missing key 'descr'", name);
    if (fortran < 0)
        return ut_err(err, TFVM_ERR_FORMAT, "%s: bad header: missing key 'fortran_order'", name);
    if (rank < 0)
        return ut_err(err, TFVM_ERR_FORMAT, "%s: bad header: missing key 'shape'", name);

    if ((st = npy_dtype(&p, descr, descr_len, &h->dtype)))
        return st;
    if (rank > TFVM_MAX_RANK)
        return ut_err(err, TFVM_ERR_FORMAT, "%s: arrays of rank %d are not supported (maximum %d)",
                      name, rank, TFVM_MAX_RANK);
    h->rank = rank;
    /* Fortran order only changes the layout when two dimensions exceed 1;
     * otherwise (and for empty arrays) the bytes are the same as C order. */
    int big = 0;
    bool empty = false;
    for (int i = 0; i < rank; i++) {
        big += h->dims[i] > 1;
        empty |= h->dims[i] == 0;
    }
    if (fortran == 1 && big > 1 && !empty)
        return ut_err(err, TFVM_ERR_FORMAT, "%s: Fortran-order arrays are not supported", name);
    int64_t count = 1;
    bool overflow = false;
    for (int i = 0; i < rank; i++) {
        if (h->dims[i] == 0)
            empty = true;
        else if (count > INT64_MAX / h->dims[i])
            overflow = true;
        else
            count *= h->dims[i];
    }
    if (empty)
        count = 0;
    size_t esize = tfvm_dtype_size(h->dtype);
    if ((overflow && !empty) || (uint64_t)count > SIZE_MAX / esize)
        return ut_err(err, TFVM_ERR_FORMAT, "%s: array too large (its size overflows)", name);
    h->count = count;
    h->nbytes = (size_t)count * esize;
    return TFVM_OK;
}

tfvm_status dev_npy_check_data(const dev_npy_header *h, const void *data, const char *name,
                               tfvm_error *err)
{
    if (h->dtype != TFVM_BOOL)
        return TFVM_OK;
    const unsigned char *b = data;
    for (size_t i = 0; i < h->nbytes; i++)
        if (b[i] > 1)
            return ut_err(err, TFVM_ERR_FORMAT,
                          "%s: bad bool value %u at element %zu (must be 0 or 1)", name, b[i], i);
    return TFVM_OK;
}

static tfvm_status npy_size_err(const char *name, const dev_npy_header *h, size_t found,
                                tfvm_error *err)
{
    return ut_err(err, TFVM_ERR_FORMAT, "%s: %s data: expected %zu bytes, found %zu", name,
                  found < h->nbytes ? "truncated" : "trailing", h->nbytes, found);
}

static tfvm_status npy_nomem(const char *name, const dev_npy_header *h, tfvm_error *err)
{
    return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory (array of %zu bytes)", name, h->nbytes);
}

tfvm_status dev_npy_decode(const void *data, size_t size, const char *name,
                           const tfvm_allocator *alloc, tfvm_tensor **out, tfvm_error *err)
{
    *out = NULL;
    dev_npy_header h;
    tfvm_status st = dev_npy_parse(data, size, name, &h, err);
    if (st)
        return st;
    size_t found = size - h.header_len;
    if (found != h.nbytes)
        return npy_size_err(name, &h, found, err);
    const unsigned char *bytes = (const unsigned char *)data + h.header_len;
    if ((st = dev_npy_check_data(&h, bytes, name, err)))
        return st;
    tfvm_tensor *t = dev_tensor_alloc(alloc, h.dtype, h.rank, h.dims);
    if (!t)
        return npy_nomem(name, &h, err);
    if (h.nbytes)
        memcpy(t->data, bytes, h.nbytes);
    *out = t;
    return TFVM_OK;
}

/* ---- Files ---------------------------------------------------------------------- */
static tfvm_status npy_read_err(FILE *f, const char *path, tfvm_error *err)
{
    int e = errno;
    fclose(f);
    return ut_err(err, TFVM_ERR_IO, "%s: read error: %s", path, strerror(e ? e : EIO));
}

tfvm_status tfvm_npy_load(const char *path, const tfvm_allocator *alloc, tfvm_tensor **out,
                          tfvm_error *err)
{
    if (!out)
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_npy_load: out is NULL");
    *out = NULL;
    if (!path)
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_npy_load: path is NULL");
    /* O_NONBLOCK: a FIFO is seen (and refused) instead of blocking the open
     * for ever. A device is read as far as its header says (/dev/null: bad
     * magic), never to its end. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return ut_err(err, TFVM_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat fsb;
    if (fstat(fd, &fsb) != 0 || S_ISFIFO(fsb.st_mode) || S_ISSOCK(fsb.st_mode)) {
        close(fd);
        return ut_err(err, TFVM_ERR_IO, "%s: not a regular file (refused: it may never end)", path);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return ut_err(err, TFVM_ERR_IO, "%s: %s", path, strerror(e));
    }

    /* Ten bytes is the shortest header (1.0, empty dict); 2.0 and 3.0 have a
     * 4-byte length, so read two more for those. Never read past the header. */
    unsigned char pre[DEV_NPY_PREAMBLE];
    dev_npy_header h;
    size_t got = fread(pre, 1, 10, f);
    if (got == 10 && memcmp(pre, npy_magic, sizeof npy_magic) == 0 && pre[6] >= 2)
        got += fread(pre + 10, 1, 2, f);
    if (ferror(f))
        return npy_read_err(f, path, err);
    tfvm_status st = dev_npy_preamble(pre, got, path, &h, err);
    if (st) {
        fclose(f);
        return st;
    }
    unsigned char *hbuf = ut_alloc(alloc, h.header_len);
    if (!hbuf) {
        fclose(f);
        return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory reading the header", path);
    }
    memcpy(hbuf, pre, got);
    size_t have = got + fread(hbuf + got, 1, h.header_len - got, f);
    if (ferror(f)) {
        ut_free(alloc, hbuf, h.header_len);
        return npy_read_err(f, path, err);
    }
    size_t hlen = h.header_len;
    st = dev_npy_parse(hbuf, have, path, &h, err);
    ut_free(alloc, hbuf, hlen);
    if (st) {
        fclose(f);
        return st;
    }

    /* Size checks before allocating, when the file size is known, so that a
     * header claiming terabytes costs nothing. */
    struct stat sb;
    bool regular = fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode);
    if (regular) {
        uint64_t left = (uint64_t)sb.st_size > h.header_len ? (uint64_t)sb.st_size - h.header_len : 0;
        if (left != h.nbytes) {
            fclose(f);
            return npy_size_err(path, &h, left > SIZE_MAX ? SIZE_MAX : (size_t)left, err);
        }
    }
    tfvm_tensor *t = dev_tensor_alloc(alloc, h.dtype, h.rank, h.dims);
    if (!t) {
        fclose(f);
        return npy_nomem(path, &h, err);
    }
    size_t n = h.nbytes ? fread(t->data, 1, h.nbytes, f) : 0;
    if (ferror(f)) {
        tfvm_tensor_free(t);
        return npy_read_err(f, path, err);
    }
    if (n != h.nbytes) {
        fclose(f);
        tfvm_tensor_free(t);
        return npy_size_err(path, &h, n, err);
    }
    if (!regular && fgetc(f) != EOF) {
        fclose(f);
        tfvm_tensor_free(t);
        return ut_err(err, TFVM_ERR_FORMAT, "%s: trailing data: expected %zu bytes, found more",
                      path, h.nbytes);
    }
    fclose(f);
    if ((st = dev_npy_check_data(&h, t->data, path, err))) {
        tfvm_tensor_free(t);
        return st;
    }
    *out = t;
    return TFVM_OK;
}

size_t dev_npy_header_write(const tfvm_tensor *t, unsigned char buf[DEV_NPY_WRITE_MAX])
{
    static const char *const descr[] = {
        [TFVM_BOOL] = "|b1", [TFVM_I32] = "<i4", [TFVM_I64] = "<i8", [TFVM_F32] = "<f4",
        [TFVM_F64] = "<f8", [TFVM_U8] = "|u1", [TFVM_I8] = "|i1", [TFVM_I16] = "<i2",
        [TFVM_U16] = "<u2", [TFVM_U32] = "<u4", [TFVM_U64] = "<u8", [TFVM_F16] = "<f2",
        [TFVM_BF16] = "<V2",
    };
    char *s = (char *)buf + 10;
    size_t room = DEV_NPY_WRITE_MAX - 10, n = 0;
    n += (size_t)snprintf(s + n, room - n, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                          descr[t->dtype]);
    for (int i = 0; i < t->rank; i++)
        n += (size_t)snprintf(s + n, room - n, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    n += (size_t)snprintf(s + n, room - n, "%s), }", t->rank == 1 ? "," : "");
    /* NumPy leaves room for the first dimension to grow to 21 digits (so a
     * file can be appended to in place), then pads to a multiple of 64 with
     * a final newline. Doing the same makes our files identical to np.save's. */
    if (t->rank > 0) {
        int digits = snprintf(NULL, 0, "%lld", (long long)t->dims[0]);
        for (int i = digits; i < 21; i++)
            s[n++] = ' ';
    }
    while ((10 + n + 1) % 64 != 0)
        s[n++] = ' ';
    s[n++] = '\n';
    memcpy(buf, npy_magic, sizeof npy_magic);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (unsigned char)(n & 0xff);
    buf[9] = (unsigned char)(n >> 8);
    return 10 + n;
}

tfvm_status tfvm_npy_save(const char *path, const tfvm_tensor *t, tfvm_error *err)
{
    if (!path || !t)
        return ut_err(err, TFVM_ERR_ARGUMENT, "tfvm_npy_save: %s is NULL", path ? "tensor" : "path");
    if (!isa_dtype_valid(t->dtype) || t->rank > TFVM_MAX_RANK)
        return ut_err(err, TFVM_ERR_ARGUMENT, "%s: invalid tensor", path);
    if (t->device != 0) /* (results reach the API on the host; this is a misuse) */
        return ut_err(err, TFVM_ERR_ARGUMENT, "%s: the tensor's data is in device memory", path);
    unsigned char hdr[DEV_NPY_WRITE_MAX];
    size_t hlen = dev_npy_header_write(t, hdr);
    FILE *f = fopen(path, "wb");
    if (!f)
        return ut_err(err, TFVM_ERR_IO, "%s: %s", path, strerror(errno));
    bool ok = fwrite(hdr, 1, hlen, f) == hlen;
    if (ok && t->nbytes)
        ok = fwrite(t->data, 1, t->nbytes, f) == t->nbytes;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    /* A partial file is left as it is: path may be a device or a pipe, and a
     * reader reports the truncated array anyway. */
    if (!ok)
        return ut_err(err, TFVM_ERR_IO, "%s: write failed: %s", path, strerror(e ? e : EIO));
    return TFVM_OK;
}
