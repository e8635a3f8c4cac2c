/* import/tf_bundle.c — a minimal reader of TensorFlow's TensorBundle, the
 * checkpoint format of a SavedModel's variables/: PREFIX.index is an SSTable
 * (LevelDB's table format: data blocks of prefix-compressed keys with
 * restart points, an index block, a 48-byte footer ending in a magic number)
 * mapping each tensor's key to a BundleEntryProto; the bytes live in
 * PREFIX.data-SSSSS-of-NNNNN at the entry's offset. Only uncompressed tables
 * (what TensorFlow writes) are read; checksums are not verified. */
#include <stdio.h>
#include <string.h>

#include "import/tf_bundle.h"
#include "util/util.h"

#define FOOTER_LEN 48
#define TABLE_MAGIC 0xdb4775248b80fb57ull
#define MAX_KEY 4096

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

static tfvm_status bad(imp_bundle *b, tfvm_error *err, const char *what)
{
    return ut_err(err, TFVM_ERR_FORMAT, "%s.index: not a TensorBundle index (%s)", b->prefix, what);
}

/* The block at handle (offset, size) read from *p, without its trailer. */
static tfvm_status block_at(imp_bundle *b, const uint8_t **p, const uint8_t *end, const uint8_t **blk,
                            size_t *len, tfvm_error *err)
{
    uint64_t off, size;
    if (!varint(p, end, &off) || !varint(p, end, &size) || off > b->index_len || size + 5 > b->index_len - off)
        return bad(b, err, "a block handle out of range");
    const uint8_t *base = (const uint8_t *)b->index;
    if (base[off + size] != 0)
        return ut_err(err, TFVM_ERR_UNSUPPORTED, "%s.index: compressed blocks are not supported", b->prefix);
    *blk = base + off;
    *len = (size_t)size;
    return TFVM_OK;
}

typedef tfvm_status (*entry_fn)(imp_bundle *b, const char *key, size_t klen, const uint8_t *val, size_t vlen,
                                void *ud, tfvm_error *err);

/* Calls fn for every entry of a block (keys rebuilt from their shared prefixes). */
static tfvm_status block_each(imp_bundle *b, const uint8_t *blk, size_t len, entry_fn fn, void *ud, tfvm_error *err)
{
    if (len < 4)
        return bad(b, err, "a block too short");
    uint32_t n_restarts = le32(blk + len - 4);
    if (n_restarts > (len - 4) / 4)
        return bad(b, err, "restart points out of range");
    const uint8_t *p = blk, *end = blk + len - 4 - 4 * (size_t)n_restarts;
    char key[MAX_KEY];
    size_t klen = 0;
    while (p < end) {
        uint64_t shared, own, vlen;
        if (!varint(&p, end, &shared) || !varint(&p, end, &own) || !varint(&p, end, &vlen) || shared > klen ||
            own > MAX_KEY - shared || own > (size_t)(end - p) || vlen > (size_t)(end - p) - own)
            return bad(b, err, "an entry out of range");
        memcpy(key + shared, p, own);
        klen = shared + own;
        p += own;
        tfvm_status st = fn(b, key, klen, p, vlen, ud, err);
        if (st != TFVM_OK)
            return st;
        p += vlen;
    }
    return TFVM_OK;
}

typedef struct each_ud {
    entry_fn fn;
    void *ud;
} each_ud;

static tfvm_status data_block(imp_bundle *b, const char *key, size_t klen, const uint8_t *val, size_t vlen,
                              void *ud, tfvm_error *err)
{
    (void)key, (void)klen;
    const each_ud *e = ud;
    const uint8_t *blk;
    size_t len;
    tfvm_status st = block_at(b, &val, val + vlen, &blk, &len, err);
    return st != TFVM_OK ? st : block_each(b, blk, len, e->fn, e->ud, err);
}

/* Every entry of the table, in key order. */
static tfvm_status table_each(imp_bundle *b, entry_fn fn, void *ud, tfvm_error *err)
{
    if (b->index_len < FOOTER_LEN)
        return bad(b, err, "shorter than its footer");
    const uint8_t *foot = (const uint8_t *)b->index + b->index_len - FOOTER_LEN;
    uint64_t magic = le32(foot + 40) | (uint64_t)le32(foot + 44) << 32;
    if (magic != TABLE_MAGIC)
        return bad(b, err, "no table magic");
    const uint8_t *p = foot, *end = foot + 40, *blk;
    size_t len;
    uint64_t skip;
    if (!varint(&p, end, &skip) || !varint(&p, end, &skip)) /* the metaindex handle */
        return bad(b, err, "a bad footer");
    tfvm_status st = block_at(b, &p, end, &blk, &len, err);
    each_ud e = {fn, ud};
    return st != TFVM_OK ? st : block_each(b, blk, len, data_block, &e, err);
}

typedef struct find_ud {
    const char *key;
    const uint8_t *val;
    size_t vlen;
    bool found;
} find_ud;

static tfvm_status find_entry(imp_bundle *b, const char *key, size_t klen, const uint8_t *val, size_t vlen,
                              void *ud, tfvm_error *err)
{
    (void)b, (void)err;
    find_ud *f = ud;
    if (!f->found && klen == strlen(f->key) && memcmp(key, f->key, klen) == 0) {
        f->found = true;
        f->val = val;
        f->vlen = vlen;
    }
    return TFVM_OK;
}

/* The BundleEntryProto of key (the header for ""), unpacked into b->pb. */
static tfvm_status entry_of(imp_bundle *b, const char *key, const ProtobufCMessageDescriptor *d, void **out,
                            tfvm_error *err)
{
    find_ud f = {.key = key};
    tfvm_status st = table_each(b, find_entry, &f, err);
    if (st != TFVM_OK)
        return st;
    if (!f.found)
        return ut_err(err, TFVM_ERR_FORMAT, "%s.index: no tensor '%s'", b->prefix, key);
    *out = protobuf_c_message_unpack(d, &b->pb.pa, f.vlen, f.val);
    if (!*out)
        return b->pb.failed ? ut_err(err, TFVM_ERR_NOMEM, "%s.index: out of memory", b->prefix)
                            : bad(b, err, "an entry that does not parse");
    if (b->n_msgs == b->cap_msgs) { /* kept to free at close */
        size_t cap = b->cap_msgs ? 2 * b->cap_msgs : 16;
        void **m = ut_alloc(b->a, cap * sizeof *m);
        if (!m) {
            protobuf_c_message_free_unpacked(*out, &b->pb.pa);
            return ut_err(err, TFVM_ERR_NOMEM, "%s.index: out of memory", b->prefix);
        }
        if (b->n_msgs)
            memcpy(m, b->msgs, b->n_msgs * sizeof *m);
        ut_free(b->a, b->msgs, b->cap_msgs * sizeof *m);
        b->msgs = m;
        b->cap_msgs = cap;
    }
    b->msgs[b->n_msgs++] = *out;
    return TFVM_OK;
}

tfvm_status imp_bundle_open(imp_bundle *b, const char *prefix, const tfvm_allocator *a, tfvm_error *err)
{
    memset(b, 0, sizeof *b);
    b->a = a;
    imp_pb_init(&b->pb, a);
    snprintf(b->prefix, sizeof b->prefix, "%s", prefix);
    char path[sizeof b->prefix + 32];
    snprintf(path, sizeof path, "%s.index", prefix);
    tfvm_status st = ut_read_file(path, a, &b->index, &b->index_len, err);
    if (st != TFVM_OK)
        return st;
    TfvmTf__BundleHeaderProto *h;
    st = entry_of(b, "", &tfvm_tf__bundle_header_proto__descriptor, (void **)&h, err);
    if (st == TFVM_OK && h->endianness != 0)
        st = ut_err(err, TFVM_ERR_UNSUPPORTED, "%s.index: a big-endian bundle", prefix);
    if (st == TFVM_OK && (h->num_shards < 1 || h->num_shards > IMP_BUNDLE_MAX_SHARDS))
        st = ut_err(err, TFVM_ERR_UNSUPPORTED, "%s.index: %d shards (at most %d)", prefix, (int)h->num_shards,
                    IMP_BUNDLE_MAX_SHARDS);
    if (st == TFVM_OK)
        b->n_shards = h->num_shards;
    if (st != TFVM_OK)
        imp_bundle_close(b);
    return st;
}

tfvm_status imp_bundle_get(imp_bundle *b, const char *key, imp_bundle_tensor *out, tfvm_error *err)
{
    TfvmTf__BundleEntryProto *e;
    tfvm_status st = entry_of(b, key, &tfvm_tf__bundle_entry_proto__descriptor, (void **)&e, err);
    if (st != TFVM_OK)
        return st;
    if (e->n_slices)
        return ut_err(err, TFVM_ERR_UNSUPPORTED, "%s: tensor '%s' is saved in slices", b->prefix, key);
    if (e->shard_id < 0 || e->shard_id >= b->n_shards)
        return bad(b, err, "a shard out of range");
    int s = e->shard_id;
    if (!b->shards[s]) {
        char path[sizeof b->prefix + 48];
        snprintf(path, sizeof path, "%s.data-%05d-of-%05d", b->prefix, s, b->n_shards);
        st = ut_read_file(path, b->a, &b->shards[s], &b->shard_len[s], err);
        if (st != TFVM_OK)
            return st;
    }
    if (e->offset < 0 || e->size < 0 || (uint64_t)e->offset > b->shard_len[s] ||
        (uint64_t)e->size > b->shard_len[s] - (uint64_t)e->offset)
        return ut_err(err, TFVM_ERR_FORMAT, "%s: tensor '%s' lies outside its data file", b->prefix, key);
    out->dtype = e->dtype;
    out->shape = e->shape;
    out->data = (const uint8_t *)b->shards[s] + e->offset;
    out->size = (size_t)e->size;
    return TFVM_OK;
}

tfvm_status imp_bundle_string(imp_bundle *b, const char *key, const uint8_t **data, size_t *len, tfvm_error *err)
{
    imp_bundle_tensor t;
    tfvm_status st = imp_bundle_get(b, key, &t, err);
    if (st != TFVM_OK)
        return st;
    /* a string tensor: varint lengths, a 4-byte checksum of them, the bytes */
    const uint8_t *p = t.data, *end = t.data + t.size;
    uint64_t n;
    if (t.dtype != TFVM_TF__DATA_TYPE__DT_STRING || (t.shape && t.shape->n_dim) || !varint(&p, end, &n) ||
        (size_t)(end - p) < 4 || n > (size_t)(end - p) - 4)
        return ut_err(err, TFVM_ERR_FORMAT, "%s: tensor '%s' is not one string", b->prefix, key);
    *data = p + 4;
    *len = (size_t)n;
    return TFVM_OK;
}

void imp_bundle_close(imp_bundle *b)
{
    for (size_t i = 0; i < b->n_msgs; i++)
        protobuf_c_message_free_unpacked(b->msgs[i], &b->pb.pa);
    if (b->msgs)
        ut_free(b->a, b->msgs, b->cap_msgs * sizeof *b->msgs);
    for (int s = 0; s < IMP_BUNDLE_MAX_SHARDS; s++)
        if (b->shards[s])
            ut_free(b->a, b->shards[s], b->shard_len[s] + 1);
    if (b->index)
        ut_free(b->a, b->index, b->index_len + 1);
    memset(b, 0, sizeof *b);
}
