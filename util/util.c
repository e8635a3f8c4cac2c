/* util/util.c — allocation hook, error records, arena, buffers, files, CRC-32. */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void *libc_alloc(void *ud, void *p, size_t old, size_t n)
{
    (void)ud;
    (void)old;
    if (n == 0) {
        free(p);
        return NULL;
    }
    return realloc(p, n);
}

static inline tfvm_alloc_fn hook(const tfvm_allocator *a, void **ud)
{
    if (a && a->fn) {
        *ud = a->ud;
        return a->fn;
    }
    *ud = NULL;
    return libc_alloc;
}

void *ut_alloc(const tfvm_allocator *a, size_t n)
{
    void *ud;
    tfvm_alloc_fn fn = hook(a, &ud);
    return fn(ud, NULL, 0, n ? n : 1);
}

bool ut_mul_ok(size_t a, size_t b, size_t *out)
{
    if (b && a > SIZE_MAX / b)
        return false;
    *out = a * b;
    return true;
}

void *ut_calloc(const tfvm_allocator *a, size_t count, size_t size)
{
    size_t n;
    if (!ut_mul_ok(count, size, &n))
        return NULL;
    void *p = ut_alloc(a, n);
    if (p)
        memset(p, 0, n ? n : 1);
    return p;
}

void *ut_realloc(const tfvm_allocator *a, void *p, size_t old, size_t n)
{
    void *ud;
    tfvm_alloc_fn fn = hook(a, &ud);
    return fn(ud, p, old, n ? n : 1);
}

void ut_free(const tfvm_allocator *a, void *p, size_t n)
{
    if (!p)
        return;
    void *ud;
    tfvm_alloc_fn fn = hook(a, &ud);
    fn(ud, p, n, 0);
}

tfvm_status ut_verr(tfvm_error *err, tfvm_status code, const char *fmt, va_list ap)
{
    if (err) {
        err->code = code;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        err->instr[0] = '\0';
        err->tag[0] = '\0';
        err->where[0] = '\0';
    }
    return code;
}

tfvm_status ut_msg(char *msg, size_t size, tfvm_status code, const char *fmt, ...)
{
    if (msg && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, size, fmt, ap);
        va_end(ap);
    }
    return code;
}

tfvm_status ut_err(tfvm_error *err, tfvm_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ut_verr(err, code, fmt, ap);
    va_end(ap);
    return code;
}

void ut_fmt(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
}

void ut_err_clear(tfvm_error *err)
{
    if (err) {
        err->code = TFVM_OK;
        err->message[0] = err->instr[0] = err->tag[0] = err->where[0] = '\0';
    }
}

/* ---- Arena ---------------------------------------------------------------- */
struct ut_chunk {
    ut_chunk *next;
    size_t size; /* bytes of the whole chunk, for the free hook */
    _Alignas(16) unsigned char data[];
};

void ut_arena_init(ut_arena *ar, const tfvm_allocator *a)
{
    ar->alloc = a ? *a : (tfvm_allocator){0};
    ar->head = NULL;
    ar->used = ar->cap = 0;
}

void *ut_arena_alloc(ut_arena *ar, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    if (!ar->head || ar->cap - ar->used < n) {
        size_t cap = n > 4096 ? n : 4096;
        if (cap > SIZE_MAX - sizeof(ut_chunk))
            return NULL;
        ut_chunk *c = ut_alloc(&ar->alloc, sizeof(ut_chunk) + cap);
        if (!c)
            return NULL;
        c->size = sizeof(ut_chunk) + cap;
        c->next = ar->head;
        ar->head = c;
        ar->used = 0;
        ar->cap = cap;
    }
    void *p = ar->head->data + ar->used;
    ar->used += n;
    memset(p, 0, n);
    return p;
}

void *ut_arena_array(ut_arena *ar, size_t count, size_t size)
{
    size_t n;
    if (!ut_mul_ok(count, size, &n) || n > SIZE_MAX - 16)
        return NULL;
    return ut_arena_alloc(ar, n);
}

char *ut_arena_strndup(ut_arena *ar, const char *s, size_t n)
{
    if (n == SIZE_MAX)
        return NULL;
    char *d = ut_arena_alloc(ar, n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

char *ut_arena_strdup(ut_arena *ar, const char *s) { return ut_arena_strndup(ar, s, strlen(s)); }

void ut_arena_free(ut_arena *ar)
{
    ut_chunk *c = ar->head;
    while (c) {
        ut_chunk *next = c->next;
        ut_free(&ar->alloc, c, c->size);
        c = next;
    }
    ar->head = NULL;
    ar->used = ar->cap = 0;
}

/* ---- Buffer ---------------------------------------------------------------- */
void ut_buf_init(ut_buf *b, const tfvm_allocator *a)
{
    b->alloc = a;
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}

bool ut_buf_reserve(ut_buf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (extra <= b->cap - b->len)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len < extra) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true;
            return false;
        }
        cap *= 2;
    }
    unsigned char *d = ut_realloc(b->alloc, b->data, b->cap, cap);
    if (!d) {
        b->failed = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

void ut_buf_append(ut_buf *b, const void *p, size_t n)
{
    /* +1 keeps room for the NUL that ut_buf_take adds. */
    if (n == SIZE_MAX || !ut_buf_reserve(b, n + 1))
        return;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
}

void ut_buf_printf(ut_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t)n < sizeof small) {
        ut_buf_append(b, small, (size_t)n);
        return;
    }
    if (!ut_buf_reserve(b, (size_t)n + 1))
        return;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void ut_buf_u8(ut_buf *b, uint8_t v) { ut_buf_append(b, &v, 1); }
void ut_buf_u16(ut_buf *b, uint16_t v)
{
    unsigned char p[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    ut_buf_append(b, p, 2);
}
void ut_buf_u32(ut_buf *b, uint32_t v)
{
    unsigned char p[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    ut_buf_append(b, p, 4);
}
void ut_buf_u64(ut_buf *b, uint64_t v)
{
    ut_buf_u32(b, (uint32_t)v);
    ut_buf_u32(b, (uint32_t)(v >> 32));
}

void ut_buf_free(ut_buf *b)
{
    ut_free(b->alloc, b->data, b->cap);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *ut_buf_take(ut_buf *b, size_t *len)
{
    if (b->failed || !ut_buf_reserve(b, 1)) {
        ut_buf_free(b);
        return NULL;
    }
    b->data[b->len] = '\0';
    /* Shrink to the exact size so the caller can free len + 1 bytes. */
    char *d = ut_realloc(b->alloc, b->data, b->cap, b->len + 1);
    if (!d) {
        ut_buf_free(b);
        return NULL;
    }
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}

/* ---- Files ------------------------------------------------------------------ */
tfvm_status ut_read_file(const char *path, const tfvm_allocator *a, char **data, size_t *len,
                         tfvm_error *err)
{
    bool is_stdin = strcmp(path, "-") == 0;
    FILE *f = stdin;
    if (!is_stdin) {
        /* a regular file only: a FIFO blocked the open for ever, a device
         * (/dev/zero) never ends; O_NONBLOCK lets the open see which it is */
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            return ut_err(err, TFVM_ERR_IO, "%s: %s", path, strerror(errno));
        struct stat sb = {0};
        if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            close(fd);
            return ut_err(err, TFVM_ERR_IO, "%s: %s", path,
                          S_ISDIR(sb.st_mode) ? strerror(EISDIR) : "not a regular file (refused: it may never end)");
        }
        if (!(f = fdopen(fd, "rb"))) {
            close(fd);
            return ut_err(err, TFVM_ERR_IO, "%s: %s", path, strerror(errno));
        }
    }
    ut_buf b;
    ut_buf_init(&b, a);
    char chunk[65536];
    size_t n;
    while (!b.failed && (n = fread(chunk, 1, sizeof chunk, f)) > 0) /* endless standard input: until memory fails */
        ut_buf_append(&b, chunk, n);
    bool bad = ferror(f);
    int e = errno;
    if (!is_stdin)
        fclose(f);
    if (bad) {
        ut_buf_free(&b);
        return ut_err(err, TFVM_ERR_IO, "%s: %s", path, strerror(e ? e : EIO));
    }
    *data = ut_buf_take(&b, len);
    if (!*data)
        return ut_err(err, TFVM_ERR_NOMEM, "%s: out of memory reading file", path);
    return TFVM_OK;
}

/* All of data to fd; 0, or the errno that stopped it. */
static int write_all(int fd, const void *data, size_t len)
{
    const unsigned char *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        done += (size_t)w;
    }
    return 0;
}

tfvm_status ut_write_file(const char *path, const void *data, size_t len, tfvm_error *err)
{
    if (strcmp(path, "-") == 0) {
        bool ok = fwrite(data, 1, len, stdout) == len;
        if (fflush(stdout) != 0 || !ok)
            return ut_err(err, TFVM_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        return TFVM_OK;
    }
    /* what is not a regular file (a device such as /dev/null, a FIFO, a
     * symbolic link) is written in place: renaming a file over it would
     * replace the device or the link itself */
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (fd < 0)
            return ut_err(err, TFVM_ERR_IO, "%s: %s", path, strerror(errno));
        int e = write_all(fd, data, len);
        if (close(fd) != 0 && !e)
            e = errno;
        if (e)
            return ut_err(err, TFVM_ERR_IO, "%s: write failed: %s", path, strerror(e));
        return TFVM_OK;
    }
    /* a temporary file beside it, renamed over it once whole: a write cut
     * short (Ctrl-C, a full disk) leaves the old file, never half of a new
     * one. The name is unique per process and call; 0666 minus the umask,
     * as fopen gives. */
    static atomic_uint serial;
    char tmp[4096 + 48];
    if (snprintf(tmp, sizeof tmp, "%s.tmp-%ld-%u", path, (long)getpid(), atomic_fetch_add(&serial, 1)) >=
        (int)sizeof tmp)
        return ut_err(err, TFVM_ERR_IO, "%s: %s", path, strerror(ENAMETOOLONG));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return ut_err(err, TFVM_ERR_IO, "%s: %s", path, strerror(errno));
    int e = write_all(fd, data, len);
    if (close(fd) != 0 && !e)
        e = errno;
    if (!e && rename(tmp, path) != 0)
        e = errno;
    if (e)
        unlink(tmp);
    if (e)
        return ut_err(err, TFVM_ERR_IO, "%s: write failed: %s", path, strerror(e));
    return TFVM_OK;
}

/* ---- CRC-32 (IEEE 802.3, reflected, as in zlib and PNG) --------------------- */
uint32_t ut_crc32(uint32_t crc, const void *data, size_t n)
{
    static const uint32_t nibble[16] = {
        0x00000000, 0x1db71064, 0x3b6e20c8, 0x26d930ac, 0x76dc4190, 0x6b6b51f4,
        0x4db26158, 0x5005713c, 0xedb88320, 0xf00f9344, 0xd6d6a3e8, 0xcb61b38c,
        0x9b64c2b0, 0x86d3d2d4, 0xa00ae278, 0xbdbdf21c};
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        crc = (crc >> 4) ^ nibble[crc & 15];
        crc = (crc >> 4) ^ nibble[crc & 15];
    }
    return ~crc;
}

static uint64_t hash_run(uint64_t h, const unsigned char *p, size_t n)
{
    for (; n >= 8; n -= 8, p += 8)
        h = (h ^ ut_le64(p)) * 0x100000001b3ull + (h >> 29);
    for (; n; n--, p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

uint64_t ut_hash_bytes(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    if (n <= 4096)
        return hash_run(h, p, n);
    const size_t step = n / 64;
    for (size_t i = 0; i < 64; i++)
        h = hash_run(h, p + i * step, 64);
    return h;
}

uint64_t ut_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
