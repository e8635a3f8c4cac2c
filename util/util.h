/* util/util.h — the small foundation every layer shares: the allocation hook,
 * error records, an arena, a growable byte buffer and a CRC-32. */
#ifndef TFVM_UTIL_H
#define TFVM_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfvm.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tfvm assumes a little-endian host (tensor data is copied from files as is)"
#endif

#define UT_HIDDEN __attribute__((visibility("hidden")))
#define UT_PRINTF(f, a) __attribute__((format(printf, f, a)))
/* For the few functions of the VM's firing path that must be inlined. */
#define UT_INLINE inline __attribute__((always_inline))
#define UT_COUNTOF(a) (sizeof(a) / sizeof((a)[0]))
#define UT_UNUSED(x) ((void)(x))

/* ---- Allocation through the user's hook --------------------------------- */
/* A NULL hook (fn == NULL) is resolved to the C library's allocator here. */
void *ut_alloc(const tfvm_allocator *a, size_t n);              /* NULL on failure */
void *ut_calloc(const tfvm_allocator *a, size_t count, size_t size); /* overflow-checked, zeroed */
void *ut_realloc(const tfvm_allocator *a, void *p, size_t old, size_t n);
void ut_free(const tfvm_allocator *a, void *p, size_t n);
/* a*b (+c) without overflow: false when it would overflow size_t. */
bool ut_mul_ok(size_t a, size_t b, size_t *out);

/* ---- Error records ------------------------------------------------------ */
/* Sets code and message (printf-style); clears instr and tag. err may be NULL.
 * Returns code, so callers can `return ut_err(...)`. */
tfvm_status ut_err(tfvm_error *err, tfvm_status code, const char *fmt, ...) UT_PRINTF(3, 4);
tfvm_status ut_verr(tfvm_error *err, tfvm_status code, const char *fmt, va_list ap);
void ut_err_clear(tfvm_error *err);
/* Writes a one-line message into msg[size] (when msg and size) and returns
 * code: the kernels' and devices' way of failing. */
tfvm_status ut_msg(char *msg, size_t size, tfvm_status code, const char *fmt, ...) UT_PRINTF(4, 5);
/* snprintf that truncates by design (messages into fixed buffers). */
void ut_fmt(char *buf, size_t size, const char *fmt, ...) UT_PRINTF(3, 4);

/* ---- Arena: many small allocations freed together ----------------------- */
typedef struct ut_chunk ut_chunk;
typedef struct ut_arena {
    tfvm_allocator alloc;
    ut_chunk *head;
    size_t used, cap;  /* of head */
} ut_arena;

void ut_arena_init(ut_arena *ar, const tfvm_allocator *a);
void *ut_arena_alloc(ut_arena *ar, size_t n);      /* 16-byte aligned, zeroed; NULL on failure */
void *ut_arena_array(ut_arena *ar, size_t count, size_t size); /* overflow-checked */
char *ut_arena_strdup(ut_arena *ar, const char *s);
char *ut_arena_strndup(ut_arena *ar, const char *s, size_t n);
void ut_arena_free(ut_arena *ar);

/* ---- Growable byte buffer ------------------------------------------------ */
typedef struct ut_buf {
    const tfvm_allocator *alloc;
    unsigned char *data;
    size_t len, cap;
    bool failed; /* an append ran out of memory; later appends are ignored */
} ut_buf;

void ut_buf_init(ut_buf *b, const tfvm_allocator *a);
bool ut_buf_reserve(ut_buf *b, size_t extra);
void ut_buf_append(ut_buf *b, const void *p, size_t n);
void ut_buf_printf(ut_buf *b, const char *fmt, ...) UT_PRINTF(2, 3);
void ut_buf_u8(ut_buf *b, uint8_t v);
void ut_buf_u16(ut_buf *b, uint16_t v); /* little-endian */
void ut_buf_u32(ut_buf *b, uint32_t v);
void ut_buf_u64(ut_buf *b, uint64_t v);
void ut_buf_free(ut_buf *b);
/* Hands the bytes to the caller, NUL-terminated, in an allocation of exactly
 * len + 1 bytes (free it with ut_free(a, p, len + 1)); the buffer is reset.
 * NULL if any append failed or memory ran out (the buffer is freed). */
char *ut_buf_take(ut_buf *b, size_t *len);

/* ---- Files --------------------------------------------------------------- */
/* Reads a whole file ("-" = stdin) into *data (*len + 1 bytes, NUL-terminated;
 * free with ut_free(a, *data, *len + 1)). Errors: TFVM_ERR_IO "path: reason". */
tfvm_status ut_read_file(const char *path, const tfvm_allocator *a, char **data, size_t *len,
                         tfvm_error *err);
/* Writes a whole file ("-" = stdout) through a temporary file beside it,
 * renamed over path once complete: the old file stays until then. */
tfvm_status ut_write_file(const char *path, const void *data, size_t len, tfvm_error *err);

/* ---- Time ---------------------------------------------------------------
 * Nanoseconds of the monotonic clock, for intervals. */
uint64_t ut_now_ns(void);

/* ---- The machine (util/topo.c) ------------------------------------------
 * Physical cores through hwloc; without hwloc information they come from
 * sysconf (logical processors). hwloc allocates with the C library (its
 * allocations are outside the hook). */
typedef struct ut_topo ut_topo;
ut_topo *ut_topo_load(void);
void ut_topo_free(ut_topo *t);
/* Physical cores (at least 1). t may be NULL. */
unsigned ut_topo_cores(const ut_topo *t);

/* ---- Checksum ------------------------------------------------------------ */
uint32_t ut_crc32(uint32_t crc, const void *data, size_t n);
/* A hash of n bytes for tables of constants: every byte of up to 4 KiB, of
 * more a sample of 4 KiB in 64 runs spread over them, and n itself; so a
 * table of large weight tensors costs no pass over each (equal hashes still
 * compare the bytes). */
uint64_t ut_hash_bytes(const void *data, size_t n);

/* p rounded up to a multiple of `align` (a power of two). */
static inline void *ut_align_up(void *p, size_t align)
{
    return (void *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
}

/* Little-endian loads (no alignment assumptions). */
static inline uint16_t ut_le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t ut_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t ut_le64(const unsigned char *p) { return ut_le32(p) | (uint64_t)ut_le32(p + 4) << 32; }

#endif
