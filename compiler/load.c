/* compiler/load.c — load("w.npy") and load("w.npz", "name"): a tensor read at
 * compile time and embedded in the program as a constant. A .npz is a zip
 * archive of .npy members; only stored (uncompressed) members are read, as
 * np.savez writes them (np.savez_compressed's deflated ones are refused). */
#include <string.h>

#include "compiler.h"
#include "devices/npy.h"

static uint32_t ld_u16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t ld_u32(const unsigned char *p) { return ld_u16(p) | ld_u16(p + 2) << 16; }

/* The bytes of member `want` (".npy" added when missing) of the zip in
 * data[0..len): walks the central directory, then checks the local header. */
static const unsigned char *npz_member(cc *C, const unsigned char *data, size_t len, const char *path,
                                       const char *want, cc_pos pos, size_t *size)
{
    /* the end-of-central-directory record: the last "PK\5\6" within 64 KiB + 22 bytes of the end */
    size_t eocd = SIZE_MAX;
    for (size_t i = len >= 22 ? len - 22 + 1 : 0; i-- > 0 && len - i <= 65535 + 22;)
        if (data[i] == 'P' && data[i + 1] == 'K' && data[i + 2] == 5 && data[i + 3] == 6) {
            eocd = i;
            break;
        }
    if (eocd == SIZE_MAX)
        cc_error(C, pos, TFVM_ERR_TYPE, "load: %s is not a .npz file (no zip directory)", path);
    uint32_t count = ld_u16(data + eocd + 10);
    size_t dir = ld_u32(data + eocd + 16);
    size_t wl = strlen(want);
    bool add_ext = !(wl > 4 && strcmp(want + wl - 4, ".npy") == 0);
    char names[256] = "";
    for (uint32_t k = 0; k < count; k++) {
        if (dir > len || len - dir < 46 || ld_u32(data + dir) != 0x02014b50)
            cc_error(C, pos, TFVM_ERR_TYPE, "load: %s: bad zip directory", path);
        const unsigned char *h = data + dir;
        uint32_t method = ld_u16(h + 10), nl = ld_u16(h + 28), xl = ld_u16(h + 30), cl = ld_u16(h + 32);
        size_t csize = ld_u32(h + 20), usize = ld_u32(h + 24), local = ld_u32(h + 42);
        if (len - dir - 46 < (size_t)nl + xl + cl)
            cc_error(C, pos, TFVM_ERR_TYPE, "load: %s: bad zip directory", path);
        const char *name = (const char *)h + 46;
        bool match = add_ext ? nl == wl + 4 && memcmp(name, want, wl) == 0 && memcmp(name + wl, ".npy", 4) == 0
                             : nl == wl && memcmp(name, want, wl) == 0;
        size_t used = strlen(names);
        if (used + nl + 3 < sizeof names)
            ut_fmt(names + used, sizeof names - used, "%s%.*s", used ? ", " : "",
                   (int)(nl > 4 && memcmp(name + nl - 4, ".npy", 4) == 0 ? nl - 4 : nl), name);
        dir += 46 + (size_t)nl + xl + cl;
        if (!match)
            continue;
        if (method != 0)
            cc_error(C, pos, TFVM_ERR_TYPE,
                     "load: %s: '%s' is compressed (zip method %u); only stored members are supported "
                     "(write it with np.savez, not np.savez_compressed)",
                     path, want, method);
        if (csize != usize || local > len || len - local < 30 || ld_u32(data + local) != 0x04034b50)
            cc_error(C, pos, TFVM_ERR_TYPE, "load: %s: bad zip entry for '%s'", path, want);
        size_t start = local + 30 + ld_u16(data + local + 26) + ld_u16(data + local + 28);
        if (start > len || len - start < csize)
            cc_error(C, pos, TFVM_ERR_TYPE, "load: %s: '%s' is cut short", path, want);
        *size = csize;
        return data + start;
    }
    cc_error(C, pos, TFVM_ERR_TYPE, "load: %s has no array '%s' (it has %s)", path, want, names[0] ? names : "none");
}

void cc_load(cc *C, cc_expr *e, const char *path, cc_pos pos, const char *member, cc_pos member_pos)
{
    size_t dl = strlen(C->dir), pl = strlen(path);
    char *full = cc_array(C, dl + pl + 1, 1);
    if (path[0] == '/')
        dl = 0;
    memcpy(full, C->dir, dl);
    memcpy(full + dl, path, pl + 1);
    bool npz = pl > 4 && strcmp(path + pl - 4, ".npz") == 0;
    if (npz && !member)
        cc_error(C, pos, TFVM_ERR_TYPE, "load: %s is a .npz archive: name the array, load(\"%s\", \"name\")", path,
                 path);
    if (!npz && member)
        cc_error(C, member_pos, TFVM_ERR_TYPE, "load: only a .npz archive has named arrays (%s is not one)", path);
    char *data;
    size_t len;
    tfvm_error err;
    tfvm_status st = ut_read_file(full, &C->ar.alloc, &data, &len, &err);
    if (st == TFVM_ERR_NOMEM)
        cc_nomem(C);
    if (st != TFVM_OK)
        cc_error(C, pos, TFVM_ERR_TYPE, "load: %s", err.message);
    /* a copy in the arena, so that the unwinding of an error frees it */
    unsigned char *bytes = cc_array(C, len + 1, 1);
    memcpy(bytes, data, len);
    ut_free(&C->ar.alloc, data, len + 1);
    const unsigned char *npy = bytes;
    size_t size = len;
    if (npz)
        npy = npz_member(C, bytes, len, full, member, member_pos, &size);
    dev_npy_header h;
    if (dev_npy_parse(npy, size, full, &h, &err) != TFVM_OK)
        cc_error(C, pos, TFVM_ERR_TYPE, "load: %s", err.message);
    if (size - h.header_len != h.nbytes)
        cc_error(C, pos, TFVM_ERR_TYPE, "load: %s: the data has %zu bytes, the header says %zu", full,
                 size - h.header_len, h.nbytes);
    if (dev_npy_check_data(&h, npy + h.header_len, full, &err) != TFVM_OK)
        cc_error(C, pos, TFVM_ERR_TYPE, "load: %s", err.message);
    e->u.tensor.raw = npy + h.header_len;
    e->u.tensor.raw_bytes = h.nbytes;
    e->u.tensor.raw_dtype = (uint8_t)h.dtype;
    e->u.tensor.rank = (uint8_t)h.rank;
    for (int k = 0; k < h.rank; k++)
        e->u.tensor.dims[k] = h.dims[k];
}
